/* cpu.c - the CPU device (device.h): host memory and a worker pool.
 *
 * Allocation handles are 64-byte aligned host memory. Code is KERN_CODE_HOST only
 * (hostcode.c): a kernel handle holds each task's `_count` and body functions. A launch builds the argument
 * vector of abi.h (a kern_array_desc per array, the value per scalar), then runs the
 * tasks in order: for each, the `_count` function gives the number of work items; a
 * parallel task's body runs on chunks of [0, count) across the pool (pool.h, about 8
 * chunks per thread), a serial task's body runs once, (0, 1), in the calling thread. A
 * kernel with adstacks gets, in each call, the slice of the adstack heap that belongs to
 * the calling thread (pool.h's worker index; the calling thread is slot 0, so serial
 * tasks use slot 0) and the launch's layout; other kernels get NULL, NULL. The
 * pool's run is a barrier, so a task starts after the previous one has finished. After a
 * task that recorded a device error the remaining tasks are skipped: the record is what
 * the launch reports, and later tasks would only compound the fault.
 *
 * Everything runs inside `launch`, so each submission's completion point has passed when
 * it returns: poll returns the submission counter and wait/sync have nothing to wait for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device.h"
#include "pool.h"

typedef struct cpu_device {
    rt_device base;
    rt_pool *pool;
    uint64_t completed;
} cpu_device;

typedef struct cpu_task_run {
    kern_task_fn body;
    void *const *args;
    kern_err_record *err;
    char *ad_heap; /* NULL: no adstacks */
    int64_t ad_stride;
    const int64_t *ad_layout;
    int64_t items, per_slot; /* fewer slots than threads: each slot's share of the items */
} cpu_task_run;

static void cpu_destroy(rt_device *d) {
    cpu_device *c = (cpu_device *)d;
    rt_pool_destroy(c->pool);
    free(c);
}

/* No host has this much memory (x86-64 and arm64 user space spans at most 2^48 bytes);
 * larger requests fail here without asking the allocator (which a sanitizer would turn
 * into an abort). */
#define CPU_MAX_ALLOC ((uint64_t)1 << 48)

static kern_status cpu_alloc(rt_device *d, size_t bytes, void **mem, char *err, size_t errlen) {
    size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded < bytes || (uint64_t)bytes > CPU_MAX_ALLOC) {
        snprintf(err, errlen, "cannot allocate %zu bytes of host memory", bytes);
        return KERN_ERR_OUT_OF_MEMORY;
    }
    void *p = NULL;
    if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0) {
        snprintf(err, errlen, "cannot allocate %zu bytes of host memory", bytes);
        return KERN_ERR_OUT_OF_MEMORY;
    }
    *mem = p;
    return KERN_OK;
}

static void cpu_free(rt_device *d, void *mem) { free(mem); }

static kern_status cpu_zero(rt_device *d, void *mem, size_t offset, size_t n, char *err,
                            size_t errlen) {
    if (n)
        memset((char *)mem + offset, 0, n);
    return KERN_OK;
}

static kern_status cpu_copy_in(rt_device *d, void *mem, size_t offset, const void *src, size_t n,
                               char *err, size_t errlen) {
    if (n)
        memcpy((char *)mem + offset, src, n);
    return KERN_OK;
}

static kern_status cpu_copy_out(rt_device *d, void *dst, const void *mem, size_t offset, size_t n,
                                char *err, size_t errlen) {
    if (n)
        memcpy(dst, (const char *)mem + offset, n);
    return KERN_OK;
}

static kern_status cpu_copy(rt_device *d, void *dst, size_t doff, const void *src, size_t soff,
                            size_t n, char *err, size_t errlen) {
    if (n)
        memmove((char *)dst + doff, (const char *)src + soff, n);
    return KERN_OK;
}

static void cpu_run_range(void *user, int worker, int64_t begin, int64_t end) {
    const cpu_task_run *r = user;
    void *slice = r->ad_heap ? r->ad_heap + (int64_t)worker * r->ad_stride : NULL;
    r->body(r->args, begin, end, r->err, slice, r->ad_heap ? r->ad_layout : NULL);
}

/* A heap with fewer slots than threads (the fewer-slots strategy, docs/autodiff.md): slot
 * w runs items [w x per_slot, (w + 1) x per_slot) on whichever worker claims it. */
static void cpu_run_slots(void *user, int worker, int64_t begin, int64_t end) {
    const cpu_task_run *r = user;
    for (int64_t w = begin; w < end; w++) {
        int64_t b = w * r->per_slot, e = b + r->per_slot < r->items ? b + r->per_slot : r->items;
        if (b < e)
            r->body(r->args, b, e, r->err, r->ad_heap + w * r->ad_stride, r->ad_layout);
    }
}

static kern_status cpu_launch(rt_device *d, const rt_launch *l, uint64_t *point, char *err,
                              size_t errlen) {
    cpu_device *c = (cpu_device *)d;
    const rt_host_kernel *hk = l->kernel;
    kern_array_desc descs_small[16];
    void *argv_small[16];
    kern_array_desc *descs = descs_small;
    void **argv = argv_small;
    if (l->nargs > 16) {
        descs = calloc((size_t)l->nargs, sizeof *descs);
        argv = calloc((size_t)l->nargs, sizeof *argv);
        if (!descs || !argv) {
            if (descs != descs_small)
                free(descs);
            if (argv != argv_small)
                free(argv);
            snprintf(err, errlen, "out of host memory for the arguments of kernel '%s'", l->name);
            return KERN_ERR_OUT_OF_MEMORY;
        }
    }
    for (int i = 0; i < l->nargs; i++) {
        const rt_launch_arg *a = &l->args[i];
        if (a->is_array) {
            descs[i].data = a->mem;
            memcpy(descs[i].shape, a->shape, sizeof descs[i].shape);
            argv[i] = &descs[i];
        } else {
            argv[i] = (void *)&a->scalar;
        }
    }
    memset(l->err, 0, sizeof *l->err);
    for (int t = 0; t < l->ntasks; t++) {
        cpu_task_run run;
        run.body = hk->body[t];
        run.args = argv;
        run.err = l->err;
        run.ad_heap = l->ad_heap;
        run.ad_stride = l->ad_stride;
        run.ad_layout = l->ad_layout;
        int64_t n = hk->count[t](argv);
        int threads = rt_pool_threads(c->pool);
        if (!l->tasks[t].parallel) {
            cpu_run_range(&run, 0, 0, 1);
        } else if (n > 0 && l->ad_heap && l->ad_slots < threads) {
            run.items = n;
            run.per_slot = n / l->ad_slots + (n % l->ad_slots != 0);
            rt_pool_run(c->pool, l->ad_slots, 1, cpu_run_slots, &run);
        } else if (n > 0)
            rt_pool_run(c->pool, n, rt_pool_chunk(n, threads), cpu_run_range, &run);
        if (l->err->code != 0) /* the pool's barrier ordered the workers' writes */
            break;
    }
    if (descs != descs_small)
        free(descs);
    if (argv != argv_small)
        free(argv);
    *point = ++d->submitted;
    c->completed = *point;
    return KERN_OK;
}

static uint64_t cpu_poll(rt_device *d) { return ((cpu_device *)d)->completed; }

static kern_status cpu_wait(rt_device *d, uint64_t point, char *err, size_t errlen) {
    return KERN_OK;
}

static kern_status cpu_sync(rt_device *d, char *err, size_t errlen) { return KERN_OK; }

static int64_t cpu_ad_slots(rt_device *d, int64_t max_items) {
    return rt_pool_threads(((cpu_device *)d)->pool);
}

/* The free physical memory (the page cache not counted: a lower bound). */
static int64_t cpu_mem_free(rt_device *d) {
    long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || size <= 0)
        return -1;
    return pages > INT64_MAX / size ? INT64_MAX : (int64_t)pages * size;
}

static const rt_device_ops cpu_ops = {
    .name = "cpu",
    .target = &kern_target_cpu,
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .zero = cpu_zero,
    .copy_in = cpu_copy_in,
    .copy_out = cpu_copy_out,
    .copy = cpu_copy,
    .load_code = rt_host_load_code,
    .get_kernel = rt_host_get_kernel,
    .free_kernel = rt_host_free_kernel,
    .unload_code = rt_host_unload_code,
    .launch = cpu_launch,
    .poll = cpu_poll,
    .wait = cpu_wait,
    .sync = cpu_sync,
    .ad_slots = cpu_ad_slots,
    .mem_free = cpu_mem_free,
};

kern_status rt_cpu_device_create(int threads, rt_device **out, char *err, size_t errlen) {
    *out = NULL;
    cpu_device *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of host memory for the CPU device");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    c->base.ops = &cpu_ops;
    c->base.host_memory = true;
    c->pool = rt_pool_create(threads, err, errlen);
    if (!c->pool) {
        free(c);
        return KERN_ERR_OUT_OF_MEMORY; /* no memory or no more threads */
    }
    snprintf(c->base.desc, sizeof c->base.desc, "cpu (%d thread%s)", threads,
             threads == 1 ? "" : "s");
    *out = &c->base;
    return KERN_OK;
}

int rt_cpu_device_threads(const rt_device *d) {
    return rt_pool_threads(((const cpu_device *)d)->pool);
}
