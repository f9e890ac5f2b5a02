/* cuda.c - the CUDA device (device.h) over the CUDA driver API, loaded with
 * dlopen("libcuda.so.1") only when a CUDA context is created: libkern does not link
 * libcuda and needs no CUDA headers (the few types and constants used are declared
 * below with the driver API's documented names and values).
 *
 * - Memory: allocation handles are device addresses (CUdeviceptr; a 0-byte buffer gets a
 *   1-byte allocation so handles stay distinct). zero and copy_in are asynchronous on
 *   the device's stream (a copy from pageable memory returns once the driver has staged
 *   it, so `src` is not read afterwards); copy_out is cuMemcpyDtoH, which the legacy
 *   default stream orders after the device's (blocking) stream.
 * - Code: PTX (provider.h) loaded with cuModuleLoadDataEx, whose JIT error log goes into
 *   the message; host code and HSACO are refused. A kernel handle holds one CUfunction
 *   per task ("kern_<K>__t<t>", docs/gpu-abi.md).
 * - Launches: the tasks in order on one stream, each with the parameters of
 *   docs/gpu-abi.md (gpu.h) on the grid of rt_gpu_grid (256-thread blocks, at most the
 *   resident threads: SMs x max threads per SM), then an event: the completion point.
 *   poll queries the events of the submissions in flight, oldest first, without
 *   blocking (cuEventQuery); wait synchronizes on one event; sync on the stream.
 * - Error records (runtime contract 7, docs/runtime-contracts.md): a pool of
 *   kern_err_records in host memory mapped into the device (cuMemHostAlloc with
 *   DEVICEMAP); each launch takes one, zeroed before the launch, and when its point has
 *   passed the record is copied into the launch's rt_launch.err and returned to the pool.
 *   When every record is in flight, a launch waits for the oldest submission.
 * - Adstacks are slot-major (rt_device.ad_slot_major); ad_slots is the resident threads,
 *   or max_items rounded up to whole blocks when that is fewer.
 * - Devices: GPU `ordinal`'s primary context (the one the CUDA runtime, PyTorch's
 *   included, uses), made current on the calling thread by every call, so that contexts
 *   on several GPUs can be used from any threads; each kern context has its own stream.
 *   copy_peer is cuMemcpyPeerAsync between two contexts (two GPUs, or one GPU's twice).
 * A driver call that fails with anything but "not ready" while polling marks the device
 * lost: later waits and launches report the failure. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "gpu.h"

/* ---- the driver API (documented names, types and values) --------------------------- */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef int CUjit_option;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_NOT_READY = 600,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_MEMHOSTALLOC_DEVICEMAP = 0x02,
    CU_STREAM_DEFAULT = 0,
    CU_EVENT_DISABLE_TIMING = 0x2,
    CU_JIT_INFO_LOG_BUFFER = 3,
    CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

#define CUDA_API(X)                                                                                \
    X(cuInit, CUresult, (unsigned))                                                                \
    X(cuGetErrorString, CUresult, (CUresult, const char **))                                       \
    X(cuGetErrorName, CUresult, (CUresult, const char **))                                         \
    X(cuDeviceGetCount, CUresult, (int *))                                                         \
    X(cuDeviceGet, CUresult, (CUdevice *, int))                                                    \
    X(cuDeviceGetName, CUresult, (char *, int, CUdevice))                                          \
    X(cuDeviceGetAttribute, CUresult, (int *, int, CUdevice))                                      \
    X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, CUdevice))                                 \
    X(cuDevicePrimaryCtxRelease_v2, CUresult, (CUdevice))                                          \
    X(cuCtxSetCurrent, CUresult, (CUcontext))                                                      \
    X(cuMemAlloc_v2, CUresult, (CUdeviceptr *, size_t))                                            \
    X(cuMemFree_v2, CUresult, (CUdeviceptr))                                                       \
    X(cuMemGetInfo_v2, CUresult, (size_t *, size_t *))                                             \
    X(cuMemsetD8Async, CUresult, (CUdeviceptr, unsigned char, size_t, CUstream))                   \
    X(cuMemcpyHtoDAsync_v2, CUresult, (CUdeviceptr, const void *, size_t, CUstream))               \
    X(cuMemcpyDtoH_v2, CUresult, (void *, CUdeviceptr, size_t))                                    \
    X(cuMemcpyDtoDAsync_v2, CUresult, (CUdeviceptr, CUdeviceptr, size_t, CUstream))                \
    X(cuMemHostAlloc, CUresult, (void **, size_t, unsigned))                                       \
    X(cuMemHostGetDevicePointer_v2, CUresult, (CUdeviceptr *, void *, unsigned))                   \
    X(cuMemFreeHost, CUresult, (void *))                                                           \
    X(cuStreamCreate, CUresult, (CUstream *, unsigned))                                            \
    X(cuStreamDestroy_v2, CUresult, (CUstream))                                                    \
    X(cuStreamSynchronize, CUresult, (CUstream))                                                   \
    X(cuEventCreate, CUresult, (CUevent *, unsigned))                                              \
    X(cuEventDestroy_v2, CUresult, (CUevent))                                                      \
    X(cuEventRecord, CUresult, (CUevent, CUstream))                                                \
    X(cuEventQuery, CUresult, (CUevent))                                                           \
    X(cuEventSynchronize, CUresult, (CUevent))                                                     \
    X(cuModuleLoadDataEx, CUresult, (CUmodule *, const void *, unsigned, CUjit_option *, void **)) \
    X(cuModuleUnload, CUresult, (CUmodule))                                                        \
    X(cuModuleGetFunction, CUresult, (CUfunction *, CUmodule, const char *))                       \
    X(cuLaunchKernel, CUresult,                                                                    \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, \
       void **, void **))

/* Graphs (runtime contract 9, docs/runtime-contracts.md), through stream capture;
 * optional: a driver without them has no device graphs (graph_build says so). */
#define CUDA_GRAPH_API(X)                                                                  \
    X(cuStreamBeginCapture_v2, CUresult, (CUstream, int))                                  \
    X(cuStreamEndCapture, CUresult, (CUstream, CUgraph *))                                 \
    X(cuGraphInstantiateWithFlags, CUresult, (CUgraphExec *, CUgraph, unsigned long long)) \
    X(cuGraphLaunch, CUresult, (CUgraphExec, CUstream))                                    \
    X(cuGraphExecDestroy, CUresult, (CUgraphExec))                                         \
    X(cuGraphDestroy, CUresult, (CUgraph))

/* Copies between two contexts' memory (kern_buffer_copy_from); optional: without it the
 * runtime copies through host memory. */
#define CUDA_PEER_API(X)           \
    X(cuMemcpyPeerAsync, CUresult, \
      (CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream))

enum { CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1 };

typedef struct cuda_api {
    void *lib;
#define CUDA_FIELD(name, ret, args) ret(*name) args;
    CUDA_API(CUDA_FIELD)
    CUDA_GRAPH_API(CUDA_FIELD)
    CUDA_PEER_API(CUDA_FIELD)
#undef CUDA_FIELD
} cuda_api;

/* ---- the device -------------------------------------------------------------------- */

enum { CUDA_RECORDS = 1024, CUDA_LOG = 16384 };

typedef struct cuda_sub {
    uint64_t point;
    CUevent ev;
    int rec;              /* index into the record pool; -1: none */
    kern_err_record *out; /* where the record goes when the point passes */
} cuda_sub;

typedef struct cuda_device {
    rt_device base;
    cuda_api api;
    CUdevice dev;
    CUcontext cu;
    bool retained;
    CUstream stream;
    int64_t resident_blocks; /* SMs x max threads per SM / 256 */
    char name[256];
    /* error records */
    kern_err_record *recs; /* host address of the pool */
    CUdeviceptr recs_dev;  /* its device address */
    int free_recs[CUDA_RECORDS];
    int nfree_recs;
    /* submissions in flight, oldest first */
    cuda_sub *subs;
    int nsubs, capsubs;
    uint64_t completed;
    CUevent *events; /* spare events */
    int nevents, capevents;
    char lost[512]; /* non-empty once a driver call failed while polling */
} cuda_device;

typedef struct cuda_kernel {
    int ntasks;
    CUfunction *sizer; /* per adstack: its sizer kernel (NULL: sized on the host) */
    CUfunction fn[];   /* per task */
} cuda_kernel;

/* "cuFoo failed: CUDA_ERROR_X (description)" */
static void cu_err(const cuda_api *api, CUresult r, const char *what, char *err, size_t errlen) {
    const char *name = NULL, *desc = NULL;
    if (api->cuGetErrorName)
        api->cuGetErrorName(r, &name);
    if (api->cuGetErrorString)
        api->cuGetErrorString(r, &desc);
    if (name)
        snprintf(err, errlen, "%s failed: %s (%s)", what, name, desc ? desc : "no description");
    else
        snprintf(err, errlen, "%s failed: CUresult %d", what, (int)r);
}

#define CU_CHECK(c, call, what)                       \
    do {                                              \
        CUresult r_ = (call);                         \
        if (r_ != CUDA_SUCCESS) {                     \
            cu_err(&(c)->api, r_, what, err, errlen); \
            return KERN_ERR_DEVICE;                   \
        }                                             \
    } while (0)

static cuda_device *cuda_of(rt_device *d) { return (cuda_device *)d; }

static const rt_device_ops cuda_ops;

void *rt_cuda_stream(rt_device *d) {
    return d && d->ops == &cuda_ops ? (void *)cuda_of(d)->stream : NULL;
}

static kern_status cuda_current(cuda_device *c, char *err, size_t errlen) {
    CU_CHECK(c, c->api.cuCtxSetCurrent(c->cu), "cuCtxSetCurrent");
    return KERN_OK;
}

/* Marks the submissions whose events have completed as passed, oldest first, stopping
 * at the first that has not; block: wait for the oldest one first. */
static void cuda_retire_subs(cuda_device *c, bool block) {
    int i = 0;
    for (; i < c->nsubs && !c->lost[0]; i++) {
        cuda_sub *s = &c->subs[i];
        CUresult r =
            block && i == 0 ? c->api.cuEventSynchronize(s->ev) : c->api.cuEventQuery(s->ev);
        if (r == CUDA_ERROR_NOT_READY)
            break;
        if (r != CUDA_SUCCESS) {
            cu_err(&c->api, r, "waiting for a launch", c->lost, sizeof c->lost);
            break;
        }
        if (s->rec >= 0) { /* a graph's replay has its own records */
            *s->out = c->recs[s->rec];
            c->free_recs[c->nfree_recs++] = s->rec;
        }
        if (c->nevents < c->capevents)
            c->events[c->nevents++] = s->ev;
        else
            c->api.cuEventDestroy_v2(s->ev);
        c->completed = s->point;
    }
    memmove(c->subs, c->subs + i, (size_t)(c->nsubs - i) * sizeof *c->subs);
    c->nsubs -= i;
}

static uint64_t cuda_poll(rt_device *d) {
    cuda_device *c = cuda_of(d);
    if (c->nsubs && c->api.cuCtxSetCurrent(c->cu) == CUDA_SUCCESS)
        cuda_retire_subs(c, false);
    return c->completed;
}

static kern_status cuda_wait(rt_device *d, uint64_t point, char *err, size_t errlen) {
    cuda_device *c = cuda_of(d);
    kern_status s = cuda_current(c, err, errlen);
    if (s != KERN_OK)
        return s;
    while (c->completed < point && c->nsubs > 0 && !c->lost[0])
        cuda_retire_subs(c, true);
    if (c->lost[0]) {
        snprintf(err, errlen, "%s", c->lost);
        return KERN_ERR_DEVICE;
    }
    return KERN_OK;
}

static kern_status cuda_sync(rt_device *d, char *err, size_t errlen) {
    cuda_device *c = cuda_of(d);
    kern_status s = cuda_current(c, err, errlen);
    if (s != KERN_OK)
        return s;
    CU_CHECK(c, c->api.cuStreamSynchronize(c->stream), "cuStreamSynchronize");
    return cuda_wait(d, d->submitted, err, errlen);
}

static kern_status cuda_alloc(rt_device *d, size_t bytes, void **mem, char *err, size_t errlen) {
    cuda_device *c = cuda_of(d);
    kern_status s = cuda_current(c, err, errlen);
    if (s != KERN_OK)
        return s;
    CUdeviceptr p = 0;
    CUresult r = c->api.cuMemAlloc_v2(&p, bytes ? bytes : 1);
    if (r != CUDA_SUCCESS) {
        char what[64];
        snprintf(what, sizeof what, "cuMemAlloc of %zu bytes", bytes);
        cu_err(&c->api, r, what, err, errlen);
        return KERN_ERR_OUT_OF_MEMORY;
    }
    *mem = (void *)(uintptr_t)p;
    return KERN_OK;
}

static void cuda_free(rt_device *d, void *mem) {
    cuda_device *c = cuda_of(d);
    if (c->api.cuCtxSetCurrent(c->cu) == CUDA_SUCCESS)
        c->api.cuMemFree_v2((CUdeviceptr)(uintptr_t)mem);
}

static kern_status cuda_zero(rt_device *d, void *mem, size_t off, size_t n, char *err,
                             size_t errlen) {
    cuda_device *c = cuda_of(d);
    kern_status s = cuda_current(c, err, errlen);
    if (s != KERN_OK || n == 0)
        return s;
    CU_CHECK(c, c->api.cuMemsetD8Async((CUdeviceptr)(uintptr_t)mem + off, 0, n, c->stream),
             "cuMemsetD8Async");
    return KERN_OK;
}

static kern_status cuda_copy_in(rt_device *d, void *mem, size_t off, const void *src, size_t n,
                                char *err, size_t errlen) {
    cuda_device *c = cuda_of(d);
    kern_status s = cuda_current(c, err, errlen);
    if (s != KERN_OK || n == 0)
        return s;
    CU_CHECK(c, c->api.cuMemcpyHtoDAsync_v2((CUdeviceptr)(uintptr_t)mem + off, src, n, c->stream),
             "cuMemcpyHtoDAsync");
    return KERN_OK;
}

static kern_status cuda_copy_out(rt_device *d, void *dst, const void *mem, size_t off, size_t n,
                                 char *err, size_t errlen) {
    cuda_device *c = cuda_of(d);
    kern_status s = cuda_current(c, err, errlen);
    if (s != KERN_OK || n == 0)
        return s;
    CU_CHECK(c, c->api.cuMemcpyDtoH_v2(dst, (CUdeviceptr)(uintptr_t)mem + off, n), "cuMemcpyDtoH");
    return KERN_OK;
}

/* In stream order after the launches submitted so far, and complete when it returns. */
static kern_status cuda_copy(rt_device *d, void *dst, size_t doff, const void *src, size_t soff,
                             size_t n, char *err, size_t errlen) {
    cuda_device *c = cuda_of(d);
    kern_status s = cuda_current(c, err, errlen);
    if (s != KERN_OK || n == 0)
        return s;
    CU_CHECK(c,
             c->api.cuMemcpyDtoDAsync_v2((CUdeviceptr)(uintptr_t)dst + doff,
                                         (CUdeviceptr)(uintptr_t)src + soff, n, c->stream),
             "cuMemcpyDtoDAsync");
    CU_CHECK(c, c->api.cuStreamSynchronize(c->stream), "cuStreamSynchronize");
    return KERN_OK;
}

static kern_status cuda_load_code(rt_device *d, const kern_code_image *img, void **code, char *err,
                                  size_t errlen) {
    cuda_device *c = cuda_of(d);
    *code = NULL;
    if (img->kind != KERN_CODE_PTX) {
        kern_status s = rt_code_refused(d, img, err, errlen);
        size_t n = strlen(err);
        snprintf(err + n, errlen - n, " (%s)", c->name);
        return s;
    }
    kern_status s = cuda_current(c, err, errlen);
    if (s != KERN_OK)
        return s;
    char *ptx = malloc(img->len + 1), *log = calloc(1, CUDA_LOG);
    if (!ptx || !log) {
        free(ptx);
        free(log);
        snprintf(err, errlen, "out of host memory for a module's PTX");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    memcpy(ptx, img->bytes, img->len);
    ptx[img->len] = '\0'; /* cuModuleLoadDataEx reads PTX up to a NUL */
    CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[2] = {log, (void *)(uintptr_t)(CUDA_LOG - 1)};
    CUmodule mod = NULL;
    CUresult r = c->api.cuModuleLoadDataEx(&mod, ptx, 2, opts, vals);
    free(ptx);
    if (r != CUDA_SUCCESS) {
        size_t ll = strlen(log);
        while (ll > 0 && (log[ll - 1] == '\n' || log[ll - 1] == ' '))
            log[--ll] = '\0';
        cu_err(&c->api, r, "loading the module's PTX (cuModuleLoadDataEx)", err, errlen);
        if (ll) {
            size_t el = strlen(err);
            snprintf(err + el, errlen > el ? errlen - el : 0, ": %s", log);
        }
        free(log);
        return KERN_ERR_FORMAT;
    }
    free(log);
    *code = mod;
    return KERN_OK;
}

static void cuda_unload_code(rt_device *d, void *code) {
    cuda_device *c = cuda_of(d);
    if (code && c->api.cuCtxSetCurrent(c->cu) == CUDA_SUCCESS)
        c->api.cuModuleUnload((CUmodule)code);
}

static kern_status cuda_get_kernel(rt_device *d, void *code, const kern_meta_kernel *mk,
                                   void **handle, char *err, size_t errlen) {
    cuda_device *c = cuda_of(d);
    char sym[512];
    *handle = NULL;
    kern_status s = cuda_current(c, err, errlen);
    if (s != KERN_OK)
        return s;
    cuda_kernel *ck = calloc(1, sizeof *ck + ((size_t)mk->ntasks + 1) * sizeof(CUfunction));
    if (!ck) {
        snprintf(err, errlen, "out of host memory for kernel '%s'", mk->name);
        return KERN_ERR_OUT_OF_MEMORY;
    }
    ck->ntasks = mk->ntasks;
    for (int t = 0; t < mk->ntasks; t++) {
        kern_meta_symbol(sym, sizeof sym, mk->name, t, false);
        if (c->api.cuModuleGetFunction(&ck->fn[t], (CUmodule)code, sym) != CUDA_SUCCESS) {
            snprintf(err, errlen, "kernel '%s', task %d: missing symbol '%s'", mk->name, t, sym);
            free(ck);
            return KERN_ERR_FORMAT;
        }
    }
    /* the sizer kernels of the adstacks whose capacities read array elements */
    for (int a = 0; a < mk->nadstacks; a++) {
        if (!rt_gpu_needs_sizer(mk, a))
            continue;
        if (!ck->sizer && !(ck->sizer = calloc((size_t)mk->nadstacks, sizeof *ck->sizer))) {
            free(ck);
            snprintf(err, errlen, "out of host memory for kernel '%s'", mk->name);
            return KERN_ERR_OUT_OF_MEMORY;
        }
        kern_meta_sizer_symbol(sym, sizeof sym, mk->name, a);
        if (c->api.cuModuleGetFunction(&ck->sizer[a], (CUmodule)code, sym) != CUDA_SUCCESS) {
            snprintf(err, errlen,
                     "kernel '%s', adstack %d: missing sizer symbol '%s' (its capacity reads "
                     "array elements)",
                     mk->name, a, sym);
            free(ck->sizer);
            free(ck);
            return KERN_ERR_FORMAT;
        }
    }
    *handle = ck;
    return KERN_OK;
}

static void cuda_free_kernel(rt_device *d, void *handle) {
    cuda_kernel *ck = handle;
    if (ck)
        free(ck->sizer);
    free(ck);
}

/* The sizer kernel of adstack s (docs/gpu-abi.md), on the stream after the work submitted
 * so far; its four results go to an error record of the pool (32 bytes, host-mapped). */
static kern_status cuda_size_adstack(rt_device *d, const void *kernel, const kern_meta_kernel *mk,
                                     int s, const rt_launch_arg *args, int64_t res[4], char *err,
                                     size_t errlen) {
    _Static_assert(sizeof(kern_err_record) >= 4 * sizeof(int64_t), "a record holds 4 i64");
    cuda_device *c = cuda_of(d);
    const cuda_kernel *ck = kernel;
    kern_status st = cuda_current(c, err, errlen);
    if (st != KERN_OK)
        return st;
    if (c->lost[0]) {
        snprintf(err, errlen, "the device was lost: %s", c->lost);
        return KERN_ERR_DEVICE;
    }
    if (!ck->sizer || !ck->sizer[s]) {
        snprintf(err, errlen, "adstack %d has no sizer kernel", s);
        return KERN_ERR_INTERNAL;
    }
    if (c->nfree_recs == 0 && c->nsubs > 0 &&
        (st = cuda_wait(d, c->subs[0].point, err, errlen)) != KERN_OK)
        return st;
    if (c->nfree_recs == 0) {
        snprintf(err, errlen, "no free error record");
        return KERN_ERR_INTERNAL;
    }
    int rec = c->free_recs[--c->nfree_recs];
    volatile int64_t *r = (volatile int64_t *)(void *)&c->recs[rec];
    r[0] = INT64_MIN;
    r[1] = r[2] = r[3] = 0;
    int64_t *layout = calloc((size_t)mk->nadstacks * 2 + 1, sizeof *layout);
    rt_gpu_params p = {0};
    if (!layout) {
        snprintf(err, errlen, "out of host memory");
        st = KERN_ERR_OUT_OF_MEMORY;
        goto done;
    }
    /* the kernel's parameters, then the result's address where the launch passes err (the
     * trailing values are beyond the sizer's parameters: CUDA reads only those it has) */
    st = rt_gpu_pack_params(mk, args, c->recs_dev + (CUdeviceptr)rec * sizeof(kern_err_record), 0,
                            0, layout, &p, err, errlen);
    if (st != KERN_OK)
        goto done;
    CUresult cr = c->api.cuLaunchKernel(ck->sizer[s], (unsigned)c->resident_blocks, 1, 1,
                                        RT_GPU_BLOCK, 1, 1, 0, c->stream, p.ptrs, NULL);
    if (cr == CUDA_SUCCESS)
        cr = c->api.cuStreamSynchronize(c->stream);
    if (cr != CUDA_SUCCESS) {
        cu_err(&c->api, cr, "the sizer kernel", err, errlen);
        st = KERN_ERR_DEVICE;
        goto done;
    }
    for (int i = 0; i < 4; i++)
        res[i] = r[i];
done:
    rt_gpu_params_free(&p);
    free(layout);
    c->free_recs[c->nfree_recs++] = rec;
    return st;
}

/* Room for one more submission (and its event); false when host memory runs out. */
static bool reserve_sub(cuda_device *c) {
    if (c->nsubs < c->capsubs)
        return true;
    int cap = c->capsubs ? 2 * c->capsubs : 64;
    cuda_sub *ns = realloc(c->subs, (size_t)cap * sizeof *ns);
    if (ns)
        c->subs = ns;
    CUevent *ne = realloc(c->events, (size_t)cap * sizeof *ne);
    if (ne)
        c->events = ne;
    if (!ns || !ne)
        return false;
    c->capsubs = c->capevents = cap;
    return true;
}

static kern_status cuda_launch(rt_device *d, const rt_launch *l, uint64_t *point, char *err,
                               size_t errlen) {
    cuda_device *c = cuda_of(d);
    const cuda_kernel *ck = l->kernel;
    rt_gpu_params p = {0};
    CUevent ev = NULL;
    int rec = -1;
    kern_status s = cuda_current(c, err, errlen);
    if (ck->ntasks != l->ntasks) {
        snprintf(err, errlen, "kernel '%s': %d tasks in the metadata, %d loaded", l->name,
                 l->ntasks, ck->ntasks);
        return KERN_ERR_INTERNAL;
    }
    if (s != KERN_OK)
        return s;
    if (c->lost[0]) {
        snprintf(err, errlen, "the device was lost: %s", c->lost);
        return KERN_ERR_DEVICE;
    }
    if (!reserve_sub(c)) {
        snprintf(err, errlen, "out of host memory for launching kernel '%s'", l->name);
        return KERN_ERR_OUT_OF_MEMORY;
    }
    /* a record of the pool; when all are in flight, wait for the oldest submission */
    if (c->nfree_recs == 0 && (s = cuda_wait(d, c->subs[0].point, err, errlen)) != KERN_OK)
        return s;
    rec = c->free_recs[--c->nfree_recs];
    memset(&c->recs[rec], 0, sizeof c->recs[rec]);
    if (c->nevents > 0) {
        ev = c->events[--c->nevents];
    } else {
        CUresult r = c->api.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS) {
            cu_err(&c->api, r, "cuEventCreate", err, errlen);
            s = KERN_ERR_DEVICE;
            goto cleanup;
        }
    }
    uint64_t err_addr = c->recs_dev + (CUdeviceptr)rec * sizeof(kern_err_record);
    s = rt_gpu_pack_params(l->meta, l->args, err_addr, (uint64_t)(uintptr_t)l->ad_heap,
                           l->ad_heap ? l->ad_slots : 0, l->ad_layout, &p, err, errlen);
    if (s != KERN_OK)
        goto cleanup;
    for (int t = 0; t < l->ntasks; t++) {
        unsigned blocks, threads;
        rt_gpu_grid(l->tasks[t].parallel, rt_task_spread(l, t), l->counts ? l->counts[t] : -1,
                    c->resident_blocks, l->ad_heap ? l->ad_slots : 0, &blocks, &threads);
        if (blocks == 0)
            continue;
        CUresult r = c->api.cuLaunchKernel(ck->fn[t], blocks, 1, 1, threads, 1, 1, 0, c->stream,
                                           p.ptrs, NULL);
        if (r != CUDA_SUCCESS) {
            char what[600];
            snprintf(what, sizeof what, "cuLaunchKernel of task %d (%u blocks of %u threads)", t,
                     blocks, threads);
            cu_err(&c->api, r, what, err, errlen);
            s = KERN_ERR_DEVICE;
            /* earlier tasks may be running and use the record: let them finish */
            c->api.cuStreamSynchronize(c->stream);
            goto cleanup;
        }
    }
    CUresult r = c->api.cuEventRecord(ev, c->stream);
    if (r != CUDA_SUCCESS) {
        cu_err(&c->api, r, "cuEventRecord", err, errlen);
        c->api.cuStreamSynchronize(c->stream);
        s = KERN_ERR_DEVICE;
        goto cleanup;
    }
    memset(l->err, 0, sizeof *l->err);
    *point = ++d->submitted;
    c->subs[c->nsubs++] = (cuda_sub){*point, ev, rec, l->err};
    rt_gpu_params_free(&p);
    return s;
cleanup:
    rt_gpu_params_free(&p);
    if (ev)
        c->events[c->nevents++] = ev;
    if (rec >= 0)
        c->free_recs[c->nfree_recs++] = rec;
    return s;
}

static int64_t cuda_ad_slots(rt_device *d, int64_t max_items) {
    cuda_device *c = cuda_of(d);
    int64_t resident = c->resident_blocks * RT_GPU_BLOCK;
    if (max_items < 0)
        return resident;
    int64_t want = (max_items + RT_GPU_BLOCK - 1) / RT_GPU_BLOCK * RT_GPU_BLOCK;
    if (want < RT_GPU_BLOCK)
        want = RT_GPU_BLOCK;
    return want < resident ? want : resident;
}

static int64_t cuda_mem_free(rt_device *d) {
    cuda_device *c = cuda_of(d);
    size_t free_bytes = 0, total = 0;
    if (c->api.cuCtxSetCurrent(c->cu) != CUDA_SUCCESS ||
        c->api.cuMemGetInfo_v2(&free_bytes, &total) != CUDA_SUCCESS)
        return -1;
    return free_bytes > (size_t)INT64_MAX ? INT64_MAX : (int64_t)free_bytes;
}

static void cuda_destroy(rt_device *d) {
    cuda_device *c = cuda_of(d);
    if (c->cu && c->api.cuCtxSetCurrent(c->cu) == CUDA_SUCCESS) {
        if (c->stream)
            c->api.cuStreamSynchronize(c->stream);
        for (int i = 0; i < c->nsubs; i++)
            c->api.cuEventDestroy_v2(c->subs[i].ev);
        for (int i = 0; i < c->nevents; i++)
            c->api.cuEventDestroy_v2(c->events[i]);
        if (c->stream)
            c->api.cuStreamDestroy_v2(c->stream);
        if (c->recs)
            c->api.cuMemFreeHost(c->recs);
    }
    if (c->retained)
        c->api.cuDevicePrimaryCtxRelease_v2(c->dev);
    free(c->subs);
    free(c->events);
    if (c->api.lib)
        dlclose(c->api.lib);
    free(c);
}

/* ---- graphs ------------------------------------------------------------------------ */

enum { CUDA_GRAPH_SETS = 32 };

/* CUDA_GRAPH_SETS captures of the same launches, each writing its own error records, so
 * that up to that many replays are in flight at once. */
typedef struct cuda_graph {
    CUgraph graph[CUDA_GRAPH_SETS];
    CUgraphExec exec[CUDA_GRAPH_SETS];
    kern_err_record *recs; /* host-mapped, CUDA_GRAPH_SETS x n */
} cuda_graph;

static void cuda_graph_free(rt_device *d, void *graph) {
    cuda_device *c = cuda_of(d);
    cuda_graph *g = graph;
    if (!g)
        return;
    if (c->api.cuCtxSetCurrent(c->cu) == CUDA_SUCCESS) {
        for (int k = 0; k < CUDA_GRAPH_SETS; k++) {
            if (g->exec[k])
                c->api.cuGraphExecDestroy(g->exec[k]);
            if (g->graph[k])
                c->api.cuGraphDestroy(g->graph[k]);
        }
        if (g->recs)
            c->api.cuMemFreeHost(g->recs);
    }
    free(g);
}

/* Captures the launches' kernel launches on the stream into a CUDA graph; each launch's
 * error record is its own record of the graph. */
static kern_status capture_set(cuda_device *c, cuda_graph *g, int k, const rt_launch *ls, int n,
                               CUdeviceptr recs_dev, char *err, size_t errlen);

static kern_status cuda_graph_build(rt_device *d, const rt_launch *ls, int n, void **graph,
                                    int *nsets, kern_err_record **recs, char *err, size_t errlen) {
    cuda_device *c = cuda_of(d);
    *graph = NULL;
    *recs = NULL;
    *nsets = 0;
    if (!c->api.cuStreamBeginCapture_v2 || !c->api.cuStreamEndCapture ||
        !c->api.cuGraphInstantiateWithFlags || !c->api.cuGraphLaunch ||
        !c->api.cuGraphExecDestroy || !c->api.cuGraphDestroy) {
        snprintf(err, errlen,
                 "the CUDA driver has no graph API (cuStreamBeginCapture_v2, "
                 "cuGraphInstantiateWithFlags: CUDA 11.4 or later)");
        return KERN_ERR_UNSUPPORTED;
    }
    kern_status s = cuda_current(c, err, errlen);
    if (s != KERN_OK)
        return s;
    cuda_graph *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "out of host memory for a graph");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    CUdeviceptr recs_dev = 0;
    size_t nrec = (size_t)n * CUDA_GRAPH_SETS;
    CUresult r = c->api.cuMemHostAlloc((void **)&g->recs, nrec * sizeof(kern_err_record),
                                       CU_MEMHOSTALLOC_DEVICEMAP);
    if (r == CUDA_SUCCESS)
        r = c->api.cuMemHostGetDevicePointer_v2(&recs_dev, g->recs, 0);
    if (r != CUDA_SUCCESS) {
        cu_err(&c->api, r, "the graph's error records (cuMemHostAlloc)", err, errlen);
        cuda_graph_free(d, g);
        return KERN_ERR_OUT_OF_MEMORY;
    }
    memset(g->recs, 0, nrec * sizeof(kern_err_record));
    for (int k = 0; k < CUDA_GRAPH_SETS; k++) {
        s = capture_set(c, g, k, ls, n, recs_dev + (CUdeviceptr)k * n * sizeof(kern_err_record),
                        err, errlen);
        if (s != KERN_OK) {
            cuda_graph_free(d, g);
            return s;
        }
    }
    *graph = g;
    *recs = g->recs;
    *nsets = CUDA_GRAPH_SETS;
    return KERN_OK;
}

/* Copy k of the graph: the launches captured on the stream, records at recs_dev. */
static kern_status capture_set(cuda_device *c, cuda_graph *g, int k, const rt_launch *ls, int n,
                               CUdeviceptr recs_dev, char *err, size_t errlen) {
    kern_status s = KERN_OK;
    CUresult r = c->api.cuStreamBeginCapture_v2(c->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (r != CUDA_SUCCESS) {
        cu_err(&c->api, r, "cuStreamBeginCapture", err, errlen);
        return KERN_ERR_DEVICE;
    }
    for (int i = 0; i < n && r == CUDA_SUCCESS && s == KERN_OK; i++) {
        const rt_launch *l = &ls[i];
        const cuda_kernel *ck = l->kernel;
        rt_gpu_params p = {0};
        s = rt_gpu_pack_params(l->meta, l->args,
                               recs_dev + (CUdeviceptr)i * sizeof(kern_err_record),
                               (uint64_t)(uintptr_t)l->ad_heap, l->ad_heap ? l->ad_slots : 0,
                               l->ad_layout, &p, err, errlen);
        for (int t = 0; s == KERN_OK && r == CUDA_SUCCESS && t < l->ntasks; t++) {
            unsigned blocks, threads;
            rt_gpu_grid(l->tasks[t].parallel, rt_task_spread(l, t), l->counts ? l->counts[t] : -1,
                        c->resident_blocks, l->ad_heap ? l->ad_slots : 0, &blocks, &threads);
            if (blocks == 0)
                continue;
            r = c->api.cuLaunchKernel(ck->fn[t], blocks, 1, 1, threads, 1, 1, 0, c->stream, p.ptrs,
                                      NULL);
            if (r != CUDA_SUCCESS)
                cu_err(&c->api, r, "capturing a launch (cuLaunchKernel)", err, errlen);
        }
        rt_gpu_params_free(&p); /* the captured node keeps its own copy of the values */
    }
    CUresult re = c->api.cuStreamEndCapture(c->stream, &g->graph[k]);
    if (s == KERN_OK && r == CUDA_SUCCESS && re != CUDA_SUCCESS) {
        cu_err(&c->api, re, "cuStreamEndCapture", err, errlen);
        r = re;
    }
    if (s == KERN_OK && r == CUDA_SUCCESS) {
        r = c->api.cuGraphInstantiateWithFlags(&g->exec[k], g->graph[k], 0);
        if (r != CUDA_SUCCESS)
            cu_err(&c->api, r, "cuGraphInstantiateWithFlags", err, errlen);
    }
    return s != KERN_OK ? s : r != CUDA_SUCCESS ? KERN_ERR_DEVICE : KERN_OK;
}

/* One graph launch, one completion point (a submission without a record of the pool). */
static kern_status cuda_graph_launch(rt_device *d, void *graph, int set, uint64_t *point, char *err,
                                     size_t errlen) {
    cuda_device *c = cuda_of(d);
    cuda_graph *g = graph;
    kern_status s = cuda_current(c, err, errlen);
    if (s != KERN_OK)
        return s;
    if (c->lost[0]) {
        snprintf(err, errlen, "the device was lost: %s", c->lost);
        return KERN_ERR_DEVICE;
    }
    if (!reserve_sub(c)) {
        snprintf(err, errlen, "out of host memory for replaying a graph");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    CUevent ev = NULL;
    CUresult r = CUDA_SUCCESS;
    if (c->nevents > 0)
        ev = c->events[--c->nevents];
    else
        r = c->api.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    if (r == CUDA_SUCCESS)
        r = c->api.cuGraphLaunch(g->exec[set], c->stream);
    if (r == CUDA_SUCCESS)
        r = c->api.cuEventRecord(ev, c->stream);
    if (r != CUDA_SUCCESS) {
        cu_err(&c->api, r, "cuGraphLaunch", err, errlen);
        if (ev)
            c->events[c->nevents++] = ev;
        return KERN_ERR_DEVICE;
    }
    *point = ++d->submitted;
    c->subs[c->nsubs++] = (cuda_sub){*point, ev, -1, NULL};
    return KERN_OK;
}

/* On d's stream, between the two devices' contexts (the primary contexts of two GPUs, or
 * one GPU's twice): the driver copies peer to peer where it can, else through the host.
 * The destination's stream may still hold a zeroing or an upload of dst (asynchronous):
 * it is waited for first. */
static kern_status cuda_copy_peer(rt_device *d, const void *src, rt_device *to, void *dst, size_t n,
                                  char *err, size_t errlen) {
    cuda_device *c = cuda_of(d), *t = cuda_of(to);
    if (!c->api.cuMemcpyPeerAsync) {
        snprintf(err, errlen, "the CUDA driver has no cuMemcpyPeerAsync");
        return KERN_ERR_UNSUPPORTED;
    }
    kern_status s = cuda_current(t, err, errlen);
    if (s != KERN_OK || n == 0)
        return s;
    CU_CHECK(t, t->api.cuStreamSynchronize(t->stream), "cuStreamSynchronize (destination)");
    if ((s = cuda_current(c, err, errlen)) != KERN_OK)
        return s;
    CU_CHECK(c,
             c->api.cuMemcpyPeerAsync((CUdeviceptr)(uintptr_t)dst, t->cu,
                                      (CUdeviceptr)(uintptr_t)src, c->cu, n, c->stream),
             "cuMemcpyPeerAsync");
    CU_CHECK(c, c->api.cuStreamSynchronize(c->stream), "cuStreamSynchronize");
    return KERN_OK;
}

static const rt_device_ops cuda_ops = {
    .name = "cuda",
    .target = &kern_target_cuda,
    .destroy = cuda_destroy,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .zero = cuda_zero,
    .copy_in = cuda_copy_in,
    .copy_out = cuda_copy_out,
    .load_code = cuda_load_code,
    .get_kernel = cuda_get_kernel,
    .free_kernel = cuda_free_kernel,
    .unload_code = cuda_unload_code,
    .launch = cuda_launch,
    .poll = cuda_poll,
    .wait = cuda_wait,
    .sync = cuda_sync,
    .ad_slots = cuda_ad_slots,
    .mem_free = cuda_mem_free,
    .copy = cuda_copy,
    .size_adstack = cuda_size_adstack,
    .graph_build = cuda_graph_build,
    .graph_launch = cuda_graph_launch,
    .graph_free = cuda_graph_free,
    .copy_peer = cuda_copy_peer,
};

/* Loads the driver library and its entry points. */
static kern_status load_api(cuda_api *api, const char *lib, char *err, size_t errlen) {
    dlerror();
    api->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!api->lib) {
        const char *e = dlerror();
        snprintf(err, errlen, "CUDA driver not found: dlopen(%s): %s", lib, e ? e : "failed");
        return KERN_ERR_UNSUPPORTED;
    }
#define CUDA_LOAD(name, ret, args)                                                            \
    *(void **)&api->name = dlsym(api->lib, #name);                                            \
    if (!api->name) {                                                                         \
        snprintf(err, errlen, "the CUDA driver %s lacks %s (too old a driver?)", lib, #name); \
        return KERN_ERR_UNSUPPORTED;                                                          \
    }
    CUDA_API(CUDA_LOAD)
#undef CUDA_LOAD
#define CUDA_LOAD_OPT(name, ret, args) *(void **)&api->name = dlsym(api->lib, #name);
    CUDA_GRAPH_API(CUDA_LOAD_OPT)
    CUDA_PEER_API(CUDA_LOAD_OPT)
#undef CUDA_LOAD_OPT
    return KERN_OK;
}

kern_status rt_cuda_device_create(const char *driver, int ordinal, rt_device **out, char *err,
                                  size_t errlen) {
    *out = NULL;
    kern_status s = KERN_OK;
    cuda_device *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of host memory for the CUDA device");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    c->base.ops = &cuda_ops;
    c->base.host_memory = false;
    c->base.ad_slot_major = true;
    const char *lib = driver ? driver : "libcuda.so.1";
    if ((s = load_api(&c->api, lib, err, errlen)) != KERN_OK)
        goto cleanup;
    cuda_api *a = &c->api;
    CUresult r = a->cuInit(0);
    if (r != CUDA_SUCCESS) {
        cu_err(a, r, "CUDA driver: cuInit", err, errlen);
        s = KERN_ERR_UNSUPPORTED;
        goto cleanup;
    }
    int count = 0;
    if ((r = a->cuDeviceGetCount(&count)) != CUDA_SUCCESS || count == 0) {
        if (r != CUDA_SUCCESS)
            cu_err(a, r, "cuDeviceGetCount", err, errlen);
        else
            snprintf(err, errlen, "the CUDA driver sees no device");
        s = KERN_ERR_UNSUPPORTED;
        goto cleanup;
    }
    if (ordinal < 0 || ordinal >= count) { /* a wrong number, not a missing device */
        snprintf(err, errlen, "there is no CUDA device %d: the driver sees %d (0 to %d)", ordinal,
                 count, count - 1);
        s = KERN_ERR_ARGUMENT;
        goto cleanup;
    }
    c->base.ordinal = ordinal;
    int sms = 0, per_sm = 0, major = 0, minor = 0, can_map = 0;
    if ((r = a->cuDeviceGet(&c->dev, ordinal)) != CUDA_SUCCESS ||
        (r = a->cuDeviceGetName(c->name, (int)sizeof c->name - 1, c->dev)) != CUDA_SUCCESS ||
        (r = a->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c->dev)) !=
            CUDA_SUCCESS ||
        (r = a->cuDeviceGetAttribute(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
                                     c->dev)) != CUDA_SUCCESS ||
        (r = a->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                     c->dev)) != CUDA_SUCCESS ||
        (r = a->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                     c->dev)) != CUDA_SUCCESS ||
        (r = a->cuDeviceGetAttribute(&can_map, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, c->dev)) !=
            CUDA_SUCCESS) {
        cu_err(a, r, "querying the CUDA device", err, errlen);
        s = KERN_ERR_DEVICE;
        goto cleanup;
    }
    if (!can_map) {
        snprintf(err, errlen, "CUDA device %s cannot map host memory (error records need it)",
                 c->name);
        s = KERN_ERR_UNSUPPORTED;
        goto cleanup;
    }
    int64_t resident = (int64_t)sms * per_sm / RT_GPU_BLOCK;
    c->resident_blocks = resident < 1 ? 1 : resident;
    size_t nl = strlen(c->name);
    snprintf(c->name + nl, sizeof c->name - nl, " (sm_%d%d, %d SMs)", major, minor, sms);
    if ((r = a->cuDevicePrimaryCtxRetain(&c->cu, c->dev)) != CUDA_SUCCESS) {
        cu_err(a, r, "cuDevicePrimaryCtxRetain", err, errlen);
        s = KERN_ERR_DEVICE;
        goto cleanup;
    }
    c->retained = true;
    void *recs = NULL;
    if ((r = a->cuCtxSetCurrent(c->cu)) != CUDA_SUCCESS ||
        (r = a->cuStreamCreate(&c->stream, CU_STREAM_DEFAULT)) != CUDA_SUCCESS ||
        (r = a->cuMemHostAlloc(&recs, sizeof(kern_err_record) * CUDA_RECORDS,
                               CU_MEMHOSTALLOC_DEVICEMAP)) != CUDA_SUCCESS ||
        (c->recs = recs, r = a->cuMemHostGetDevicePointer_v2(&c->recs_dev, recs, 0)) !=
            CUDA_SUCCESS) {
        cu_err(a, r, "setting up the CUDA context, stream and error records", err, errlen);
        s = KERN_ERR_DEVICE;
        goto cleanup;
    }
    memset(c->recs, 0, sizeof(kern_err_record) * CUDA_RECORDS);
    for (int i = 0; i < CUDA_RECORDS; i++)
        c->free_recs[c->nfree_recs++] = CUDA_RECORDS - 1 - i;
    snprintf(c->base.desc, sizeof c->base.desc, "cuda: %s", c->name);
    *out = &c->base;
    return KERN_OK;
cleanup:
    cuda_destroy(&c->base);
    return s;
}
