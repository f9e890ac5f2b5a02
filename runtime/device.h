/* device.h - the device abstraction: what the runtime asks of a CPU, CUDA or Vulkan
 * device. Internal to the runtime (no LLVM, no public API here).
 *
 * A device is a vtable plus a little shared state. Memory is handled through opaque
 * allocation handles (`void *mem`; on the CPU it is the host memory itself). Work is
 * submitted in order; each submission gets a completion point, a value of a monotonically
 * increasing counter (1, 2, 3, ...; 0 means "no work", which has always passed). A point
 * has passed when the submission and every earlier one have finished (for GPUs: a
 * timeline semaphore value or the fence of that submission). `poll` says, without
 * blocking, which points have passed; `wait` blocks until one has. The runtime uses these
 * to report device errors (abi.h's kern_err_record of each launch) and to free memory only
 * when no submission in flight may still use it (retire.h).
 *
 * Copies are synchronous with respect to host memory: copy_in may return before the
 * device has the data but never reads `src` after returning; copy_out returns with `dst`
 * filled. The runtime orders them against launches itself (it waits for the last launch
 * that used a buffer before copying), so a device needs no extra ordering for them.
 *
 * Code belongs to the device: load_code turns a module's code image (provider.h) into
 * the device's code object, rejecting kinds the device cannot run; get_kernel resolves
 * every task of one kernel into a handle that launches carry (rt_launch.kernel). A
 * device that runs host code (KERN_CODE_HOST) can use the rt_host_* functions below.
 *
 * The CPU device (cpu.c) runs each launch in the calling thread and its worker pool, so
 * every submission has passed when `launch` returns; the API keeps the asynchronous
 * shape for the GPU devices. */
#ifndef KERN_RT_DEVICE_H
#define KERN_RT_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../include/kern.h"
#include "abi.h"
#include "meta.h"
#include "provider.h"

typedef struct rt_device rt_device;

/* One argument of a launch, already checked against the kernel's signature. */
typedef struct rt_launch_arg {
    bool is_array;
    void *mem;                    /* array: the device allocation */
    int64_t shape[KERN_MAX_DIMS]; /* array: extents, unused dimensions 1 */
    union {                       /* scalar: the value, in the parameter's type */
        uint8_t b;
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        float f32;
        double f64;
        int8_t i8;
        uint8_t u8;
        int16_t i16;
        uint16_t u16;
        uint64_t u64;
    } scalar;
} rt_launch_arg;

/* One launch of a kernel: its tasks (metadata and the device's kernel handle) and its
 * arguments. The device copies what it needs before `launch` returns. */
typedef struct rt_launch {
    const char *name; /* the kernel's name, for messages */
    const kern_meta_kernel *meta;
    const void *kernel; /* the device's handle from get_kernel */
    const kern_meta_task *tasks;
    int ntasks;
    const rt_launch_arg *args;
    int nargs;
    /* Where the device leaves the launch's error record; it must hold the final record
     * by the time poll or wait reports the launch's completion point as passed. */
    kern_err_record *err;
    /* Per task: the number of work items when the host can compute it (rt_task_count,
     * adstack.h), else -1. GPUs size their grid with it. */
    const int64_t *counts;
    /* Kernels with adstacks (adstack.h): the heap, the slots it was sized for (ad_slots,
     * at least the threads that may run items at once), the bytes one slot uses, and per
     * adstack s the offset ad_layout[2s] and capacity ad_layout[2s + 1]. Where each entry
     * lives depends on the device's layout (rt_device.ad_slot_major):
     *   slot slices (CPU): slot w's slice starts at heap + w x ad_stride, stack s at
     *     offset ad_layout[2s] in it;
     *   slot-major (GPUs, docs/gpu-abi.md): entry k of stack s for slot w is at
     *     heap + ad_layout[2s] + (k x ad_slots + w) x size_s; ad_stride is the sum of
     *     capacity x size over the stacks.
     * Kernels without adstacks: NULL, 0, 0, NULL. */
    void *ad_heap;
    int64_t ad_slots;
    int64_t ad_stride;
    const int64_t *ad_layout;
} rt_launch;

/* Whether task t of launch l gets a thread per work item on a GPU (rt_gpu_grid): it is
 * spread and its kernel has no adstacks (whose heap is sized for the resident grid). */
static inline bool rt_task_spread(const rt_launch *l, int t) {
    return l->tasks[t].spread && l->meta->nadstacks == 0;
}

enum { RT_GRAPH_MAX_SETS = 64 }; /* copies of a device graph (graph_build) */

typedef struct rt_device_ops {
    const char *name;
    /* Its entry in the target registry (common/target.h): what its memory allows
     * (rt_device_caps); NULL for the tests' fake devices, which have no capability. */
    const struct kern_target *target;
    void (*destroy)(rt_device *d);
    /* bytes may be 0 (a valid, distinct handle is still returned). */
    kern_status (*alloc)(rt_device *d, size_t bytes, void **mem, char *err, size_t errlen);
    void (*free)(rt_device *d, void *mem);
    kern_status (*zero)(rt_device *d, void *mem, size_t offset, size_t n, char *err, size_t errlen);
    kern_status (*copy_in)(rt_device *d, void *mem, size_t offset, const void *src, size_t n,
                           char *err, size_t errlen);
    kern_status (*copy_out)(rt_device *d, void *dst, const void *mem, size_t offset, size_t n,
                            char *err, size_t errlen);
    /* Copies n bytes from allocation src at soff to allocation dst at doff (the two may be
     * one allocation, the ranges apart), complete when it returns, like copy_out. NULL:
     * the runtime copies through host memory (copy_out, then copy_in). */
    kern_status (*copy)(rt_device *d, void *dst, size_t doff, const void *src, size_t soff,
                        size_t n, char *err, size_t errlen);
    /* Loads a module's code image (provider.h) into *code. A kind the device cannot run
     * is KERN_ERR_UNSUPPORTED with a message naming both ("the module holds PTX for cuda;
     * the context's device is cpu"). On success the code object owns what it keeps of
     * the image (a HOST provider is released by unload_code); on failure nothing of the
     * image was released (the caller releases a HOST provider). */
    kern_status (*load_code)(rt_device *d, const kern_code_image *img, void **code, char *err,
                             size_t errlen);
    /* Resolves every task of kernel mk in code into *handle; a missing symbol is
     * KERN_ERR_FORMAT with the message "kernel 'K', task T: missing symbol 'S'". The
     * handle may keep pointers into mk (the module's metadata outlives it). */
    kern_status (*get_kernel)(rt_device *d, void *code, const kern_meta_kernel *mk, void **handle,
                              char *err, size_t errlen);
    void (*free_kernel)(rt_device *d, void *handle);
    /* Frees a code object; its kernels have been freed and no launch uses it. */
    void (*unload_code)(rt_device *d, void *code);
    /* Submits a launch; *point receives its completion point. */
    kern_status (*launch)(rt_device *d, const rt_launch *l, uint64_t *point, char *err,
                          size_t errlen);
    /* The highest completion point known to have passed; never blocks. */
    uint64_t (*poll)(rt_device *d);
    /* Blocks until `point` has passed. */
    kern_status (*wait)(rt_device *d, uint64_t point, char *err, size_t errlen);
    /* Blocks until every submission has passed. */
    kern_status (*sync)(rt_device *d, char *err, size_t errlen);
    /* The number of adstack heap slots a launch needs (at least 1): the most work items
     * that can be in progress at once. max_items is the largest host-known work-item
     * count over the kernel's tasks, -1 when some task's count is unknown. CPU: the
     * pool's threads, each running one item at a time (max_items unused); a GPU: its
     * resident threads, or fewer when max_items (rounded up to whole blocks) is smaller.
     * NULL means 1. */
    /* Runs the sizer kernel of adstack s of a kernel (docs/gpu-abi.md) with the launch's
     * arguments after the work submitted so far, and waits for it: res[0..3] as the sizer
     * leaves them. NULL for devices whose memory the host reads (the host evaluates). */
    kern_status (*size_adstack)(rt_device *d, const void *kernel, const kern_meta_kernel *mk, int s,
                                const rt_launch_arg *args, int64_t res[4], char *err,
                                size_t errlen);
    /* Graphs (runtime contract 9, docs/runtime-contracts.md): builds a device graph of n
     * launches in order, with room for *nsets (at most RT_GRAPH_MAX_SETS) copies (their err
     * fields unused: copy c has a record per launch, records[c * n + i], whose host address
     * goes to *recs; a replay of copy c reuses its records, so copies let replays overlap;
     * the runtime takes copies 0, 1, ... in order as replays pile up, and a device may
     * build a copy the first time it is replayed), replays copy `set` after the work
     * submitted so far (one completion point), frees it. NULL graph_build: the runtime
     * replays launch by launch. */
    kern_status (*graph_build)(rt_device *d, const rt_launch *ls, int n, void **graph, int *nsets,
                               kern_err_record **recs, char *err, size_t errlen);
    kern_status (*graph_launch)(rt_device *d, void *graph, int set, uint64_t *point, char *err,
                                size_t errlen);
    void (*graph_free)(rt_device *d, void *graph);
    int64_t (*ad_slots)(rt_device *d, int64_t max_items);
    /* The device memory free now, in bytes (the default adstack budget, docs/autodiff.md);
     * -1 when the device cannot tell. NULL: -1. */
    int64_t (*mem_free)(rt_device *d);
    /* Copies n bytes from allocation src of d to allocation dst of device `to`, another
     * device of the same ops (another context's: another GPU, or the same one), after the
     * work submitted to d so far and complete when it returns (kern_buffer_copy_from).
     * NULL: the runtime copies through host memory. */
    kern_status (*copy_peer)(rt_device *d, const void *src, rt_device *to, void *dst, size_t n,
                             char *err, size_t errlen);
} rt_device_ops;

struct rt_device {
    const rt_device_ops *ops;
    uint64_t submitted; /* the completion point of the latest submission (0: none yet) */
    bool host_memory;   /* allocation handles are host pointers the runtime may read */
    bool ad_slot_major; /* adstacks laid out slot-major (GPUs) rather than in slot slices */
    char desc[320]; /* for kern_context_device_name: "cpu (8 threads)", "cuda: NAME (sm_90, ...)" */
    int ordinal;    /* its number among its backend's devices (kern_context_device_index) */
};

/* A device's answer to a code image of another kind: KERN_ERR_UNSUPPORTED, and in err "the
 * module holds PTX for cuda; the context's device is cpu" (the registry's names). */
kern_status rt_code_refused(const rt_device *d, const kern_code_image *img, char *err,
                            size_t errlen);
/* KERN_CODE_HOST code for devices that run host functions (cpu.c, the tests' fakes): the
 * code object keeps the provider; a kernel handle is an rt_host_kernel. */
typedef struct rt_host_kernel {
    int ntasks;
    kern_count_fn *count; /* per task: "kern_<K>__t<t>_count" */
    kern_task_fn *body;   /* per task: "kern_<K>__t<t>" */
} rt_host_kernel;
kern_status rt_host_load_code(rt_device *d, const kern_code_image *img, void **code, char *err,
                              size_t errlen);
kern_status rt_host_get_kernel(rt_device *d, void *code, const kern_meta_kernel *mk, void **handle,
                               char *err, size_t errlen);
void rt_host_free_kernel(rt_device *d, void *handle);
void rt_host_unload_code(rt_device *d, void *code);

/* The CPU device: `threads` >= 1 threads including the caller (threads - 1 workers). */
kern_status rt_cpu_device_create(int threads, rt_device **out, char *err, size_t errlen);
int rt_cpu_device_threads(const rt_device *d);

/* The CUDA device (cuda.c): device `ordinal` of the driver library `driver` (NULL:
 * "libcuda.so.1"), opened with dlopen. KERN_ERR_UNSUPPORTED when the library cannot be
 * opened ("CUDA driver not found: dlopen(libcuda.so.1): ..."), lacks an entry point, or
 * cuInit fails (no device); the message says which. */
kern_status rt_cuda_device_create(const char *driver, int ordinal, rt_device **out, char *err,
                                  size_t errlen);
/* The CUstream the CUDA device d submits to (NULL for another device). */
void *rt_cuda_stream(rt_device *d);

/* The Vulkan device (vulkan.c): device p->ordinal (-1: the most capable) of the loader
 * `loader` (NULL: "libvulkan.so.1"), opened with dlopen.
 * KERN_ERR_UNSUPPORTED when the loader cannot be opened or there is no Vulkan 1.2 device
 * with timeline semaphores; the message says which. */
typedef struct rt_vulkan_params {
    int ordinal;                /* -1: the first discrete GPU, integrated, virtual, CPU */
    kern_validation validation; /* the Khronos layer (kern_context_options) */
    bool staging;               /* copies never map device memory */
} rt_vulkan_params;
kern_status rt_vulkan_device_create(const char *loader, const rt_vulkan_params *p,
                                    rt_device **out, char *err, size_t errlen);
/* With $KERN_VULKAN_VALIDATION=1: the number of warnings and errors the validation layer
 * reported so far on device d (a Vulkan device), and (first not NULL) the first one. */
int rt_vulkan_validation_messages(const rt_device *d, const char **first);
/* The adstack sizings of device d (a Vulkan device) so far: by sizer shaders, and by
 * copying the arrays back (runtime/vk_adstack.c), with the bytes so copied. */
void rt_vulkan_sizings(const rt_device *d, int64_t *by_shader, int64_t *copied,
                       int64_t *copied_bytes);
/* For tests: device d (a Vulkan device) behaves from now on as if it lacked the optional
 * feature that SPIR-V capability `capability` needs (docs/spirv-abi.md's table), so
 * load_code refuses modules that declare it (AtomicFloat32AddEXT, 6033: float atomic adds
 * on storage buffers and on workgroup memory). Other capabilities are ignored. */
void rt_vulkan_device_forget(rt_device *d, uint32_t capability);

/* The KERN_TARGET_* capabilities of d's target (0 for a device without one). */
static inline unsigned rt_device_caps(const rt_device *d) {
    return d->ops->target ? d->ops->target->caps : 0;
}

#endif
