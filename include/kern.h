/* kern.h - the public C API of the kern runtime: link with libkern (pkg-config kern: modules
 * built by `kernc build`, no compiler) or libkern-jit (pkg-config kern-jit: the same API with
 * the JIT compiler and LLVM), never both.
 *
 * A host program creates a context for a device (the CPU, a CUDA GPU or a Vulkan device),
 * creates buffers from host data, loads a module (an ahead-of-time file built by `kernc
 * build`, or source code compiled by the JIT library), finds a kernel by name, launches it
 * with typed arguments that are checked against the kernel's signature, synchronizes and
 * reads buffers back.
 *
 * Conventions (docs/runtime.md has the details):
 * - Handles are opaque; everything made from a context is released with it. A released
 *   handle must not be used again (as with free()). With the environment variable
 *   KERN_RUNTIME_CHECKS=1 the runtime detects it: every handle is checked against a
 *   registry, and a released one, one of the wrong kind or a pointer kern never made is
 *   KERN_ERR_ARGUMENT with a message (also on stderr); see docs/runtime.md, "Checked mode".
 * - Every call that can fail returns a kern_status and, on failure, leaves a message in
 *   its context (kern_context_last_error): what failed and why, naming the kernel,
 *   parameter, file or source line involved. A call that succeeds clears the message.
 *   Nothing in the library exits the process or prints.
 * - A context is used by one thread at a time; distinct contexts are independent.
 *   KERN_RUNTIME_CHECKS=1 refuses a second thread inside kern_launch, kern_buffer_read,
 *   kern_buffer_write, kern_sync or kern_graph_launch of a context another thread is in.
 * - Launches are asynchronous in shape: a device error (an index out of bounds in debug
 *   mode, a division by zero, ...) is returned as KERN_ERR_DEVICE by the call that
 *   observes the launch's completion: the launch itself on the CPU, or a later launch,
 *   read or kern_sync on devices that run asynchronously. Each device error is reported
 *   once. Array contents after a launch that reported a device error are unspecified. */
#ifndef KERN_H
#define KERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header; kern_version() gives the library's (they may differ when a
 * program runs against a newer libkern of the same soname). */
#define KERN_VERSION_MAJOR 0
#define KERN_VERSION_MINOR 1
#define KERN_VERSION_PATCH 0
#define KERN_VERSION_STRING "0.1.0"
/* Encodes a version for comparisons: KERN_VERSION_NUMBER(0, 1, 0) == 100. */
#define KERN_VERSION_NUMBER(major, minor, patch) ((major)*10000 + (minor)*100 + (patch))

/* Only the declarations of this header are exported by libkern and libkern-jit (they
 * are built with -fvisibility=hidden). */
#if defined(__GNUC__) && !defined(KERN_NO_VISIBILITY)
#pragma GCC visibility push(default)
#endif

/* The library's version as KERN_VERSION_NUMBER; *text (may be NULL) gets "0.1.0". */
int kern_version(const char **text);

typedef enum kern_status {
    KERN_OK = 0,
    KERN_ERR_ARGUMENT = 1,      /* a bad argument: null handle, bad shape, an argument that
                                   does not match the kernel's signature, ... */
    KERN_ERR_NOT_FOUND = 2,     /* an unknown kernel name, a missing file */
    KERN_ERR_IO = 3,            /* reading or writing a file failed */
    KERN_ERR_FORMAT = 4,        /* a malformed module file, metadata or .npy file */
    KERN_ERR_COMPILE = 5,       /* JIT: the source has errors (the message has them) */
    KERN_ERR_UNSUPPORTED = 6,   /* a backend or feature this build does not have */
    KERN_ERR_DEVICE = 7,        /* a device-side error reported by a launch */
    KERN_ERR_OUT_OF_MEMORY = 8, /* host or device memory */
    KERN_ERR_INTERNAL = 9,      /* a bug in kern */
    KERN_ERR_CALLBACK = 10,     /* a host callback failed (kern_tape_record_func) */
} kern_status;

/* "KERN_OK", "KERN_ERR_ARGUMENT", ...; "KERN_ERR_?" for values outside the enum. */
const char *kern_status_name(kern_status s);

/* Element types of buffers and scalar arguments (the scalar types of the language). */
typedef enum kern_dtype {
    KERN_BOOL = 1, /* one byte, 0 or 1 */
    KERN_I32 = 2,
    KERN_U32 = 3,
    KERN_I64 = 4,
    KERN_F32 = 5,
    KERN_F64 = 6,
    KERN_I8 = 7,
    KERN_U8 = 8,
    KERN_I16 = 9,
    KERN_U16 = 10,
    KERN_U64 = 11,
    KERN_F16 = 12,  /* IEEE binary16, arrays only; elements are its bits (uint16_t) */
    KERN_BF16 = 13, /* bfloat16, arrays only; elements are its bits (uint16_t) */
} kern_dtype;

/* "bool", "i32", ...; NULL for an invalid value. */
const char *kern_dtype_name(kern_dtype t);
/* Bytes per element (bool: 1); 0 for an invalid value. */
size_t kern_dtype_size(kern_dtype t);

enum { KERN_MAX_DIMS = 4 };

/* ---- contexts ---------------------------------------------------------------------- */

typedef enum kern_backend {
    KERN_BACKEND_CPU = 0,
    KERN_BACKEND_CUDA = 1,
    KERN_BACKEND_AMDGPU = 2,
    KERN_BACKEND_VULKAN = 3,
    KERN_BACKEND_METAL = 4,
} kern_backend;

/* "cpu", "cuda", "amdgpu", "vulkan", "metal"; NULL for an invalid value. */
const char *kern_backend_name(kern_backend b);
/* Whether this runtime has a device for b (kern_context_create may still fail: no driver,
 * no GPU). A program lists the backends with kern_backend_name(0, 1, ...) until NULL. */
bool kern_backend_available(kern_backend b);

/* The Khronos validation layer under a Vulkan context. */
typedef enum kern_validation {
    KERN_VALIDATION_OFF = 0,
    KERN_VALIDATION_ON = 1,   /* messages are counted and printed */
    KERN_VALIDATION_FATAL = 2 /* a message also fails the launch (CI's tests) */
} kern_validation;

/* kern_context_options_default() is where the runtime reads its environment variables
 * (docs/runtime.md, "The environment"); every one has a field here. */
typedef struct kern_context_options {
    kern_backend backend;  /* KERN_BACKEND_CPU by default, KERN_BACKEND_CUDA, KERN_BACKEND_VULKAN */
    bool debug;            /* JIT modules compile as debug builds: the checks, and scalar
                            * code on the CPU (no SIMD across work items) */
    int threads;           /* CPU worker threads including the caller; 0 = online CPUs */
    int64_t ad_stack_size; /* default adstack capacity for JIT modules: 0 = the default (1024),
                            * else 1 to 2^31 (larger is KERN_ERR_ARGUMENT) */
    int device;            /* the backend's device N (0 .. count - 1), or -1 (the default):
                            * CUDA's device 0; Vulkan's $KERN_VULKAN_DEVICE, else the first
                            * discrete GPU, integrated, virtual, then CPU device; the CPU
                            * has device 0 only. N >= count is KERN_ERR_ARGUMENT naming the
                            * count (kern_context_device_index, below) */
    kern_validation validation; /* Vulkan ($KERN_VULKAN_VALIDATION: 1 on, fatal) */
    bool staging;          /* Vulkan: copies always go through a staging buffer, never through
                            * mapped device memory ($KERN_VULKAN_STAGING=1; for tests) */
    /* The bytes a gradient launch's adstack heap (and a tape's saved ranges) may take;
     * 0 = the default: 3/4 of the device's free memory (CPU: the free physical
     * memory) plus the heap it already has, measured when a launch needs more than it has. A
     * launch whose store-all heap does not fit runs with fewer slots or checkpointed
     * (docs/autodiff.md), or fails naming what it would need. Negative is
     * KERN_ERR_ARGUMENT at creation. */
    int64_t ad_memory_budget;
    /* Forces a strategy for every gradient launch (tests, benchmarks; $KERN_AD_STRATEGY =
     * store, slots or recompute); KERN_AD_AUTO (the default) chooses per launch. */
    int ad_strategy; /* a kern_ad_strategy */
    /* JIT modules use the targets' fast approximations of f32 sin, cos, tan, exp, log, log2
     * and pow (CUDA's __sinf class, Vulkan's GLSL.std.450) instead of kern's accuracy table
     * (docs/reference.md, "Accuracy of the math builtins"; $KERN_FAST_MATH=1) */
    bool fast_math;
    /* JIT modules compile without their bounds, division and shift checks (checked code is
     * the default, from every front end: an index out of range is an error record naming
     * the access, where unchecked code reads or writes outside the array). Checked code
     * keeps the SIMD and GPU code paths; docs/runtime.md says what it costs. */
    bool no_checks;
    /* JIT modules compile every f32 as f64 (parameters, values, constants; casts between
     * the two disappear): the reference precision of `kernc gradcheck` and kern.gradcheck,
     * whose finite differences run in f64 (docs/cli.md, gradcheck). Off by default. */
    bool promote_f64;
    /* The compile cache of JIT modules and their lazily built gradients (docs/runtime.md,
     * "The compile cache"): no_cache turns it off ($KERN_CACHE=0); cache_dir is its
     * directory (NULL: $KERN_CACHE_DIR, else $XDG_CACHE_HOME/kern, else ~/.cache/kern),
     * copied at kern_context_create. */
    bool no_cache;
    const char *cache_dir;
} kern_context_options;

/* How a launch of a kernel with adstacks keeps what its reverse sweep needs. */
typedef enum kern_ad_strategy {
    KERN_AD_AUTO = 0,       /* options only: choose per launch */
    KERN_AD_STORE_ALL = 1,  /* every loop iteration's carried values, for every slot */
    KERN_AD_FEWER_SLOTS = 2, /* store all, for fewer thread slots (items run in more waves) */
    KERN_AD_RECOMPUTE = 3,  /* checkpoints every k-th iteration; segments recomputed */
} kern_ad_strategy;

typedef struct kern_context kern_context;

kern_context_options kern_context_options_default(void);

/* Creates a context (opts NULL = the defaults). As with sqlite3_open, *out receives a
 * context even when creation fails (unless host memory runs out: then NULL), so that
 * kern_context_last_error can say why; such a context only answers last_error and must
 * still be released. */
kern_status kern_context_create(const kern_context_options *opts, kern_context **out);
/* Waits for outstanding work, then frees the context and every buffer and module made
 * from it. NULL is ignored. */
void kern_context_release(kern_context *ctx);
/* The message of the last call on this context that failed ("" after a success).
 * Valid until the next call on the context. */
const char *kern_context_last_error(const kern_context *ctx);
kern_context_options kern_context_get_options(const kern_context *ctx);
/* Worker threads of the CPU device (including the calling thread); 1 for other devices. */
int kern_context_threads(const kern_context *ctx);
/* The context's device in words: "cpu (8 threads)", "cuda: NVIDIA H100 80GB HBM3 (sm_90,
 * 132 SMs)"; "" for a context that was not created successfully. */
const char *kern_context_device_name(const kern_context *ctx);
/* The CUDA stream (a CUstream) a CUDA context submits its work to, in order, so that a host
 * program can order its own CUDA work with kern's (cuStreamWaitEvent) instead of waiting
 * with kern_sync; NULL for other devices. */
void *kern_context_cuda_stream(const kern_context *ctx);
/* Waits until every launch has completed; returns KERN_ERR_DEVICE for a device error
 * that no earlier call reported. */
kern_status kern_sync(kern_context *ctx);

/* The adstack heap (docs/runtime.md): gradient kernels keep loop-carried values on
 * per-thread stacks in one heap per context, sized before each launch from the
 * capacities the compiler derived, grown by doubling and reused. For tests, benchmarks
 * and tuning. */
typedef struct kern_adstack_info {
    int64_t heap_bytes;  /* the heap's current size (0: no launch with adstacks yet) */
    int64_t heap_allocs; /* heap allocations so far, the first one included */
    int64_t last_stride; /* bytes per thread slot of the last launch with adstacks */
    int64_t last_slots;  /* thread slots it was sized for (CPU: the context's threads) */
    int last_count;      /* adstacks of that launch */
    int last_strategy;   /* the kern_ad_strategy it ran with (0: no launch with adstacks) */
    int64_t last_store_all_bytes; /* the heap storing everything would have taken */
    int64_t last_needed_bytes;    /* the heap the chosen strategy took */
    int64_t last_budget;          /* the budget it was checked against */
    double last_recompute;        /* expected cost of K.grad against store-all (1.0: none) */
} kern_adstack_info;

kern_status kern_context_adstack_info(kern_context *ctx, kern_adstack_info *out);
/* Adstack s (0-based, the kernel's table order) of the last launch with adstacks: its
 * byte offset in a thread's slice and its capacity in entries (either may be NULL).
 * KERN_ERR_ARGUMENT when s is out of range. */
kern_status kern_context_adstack_last(kern_context *ctx, int s, int64_t *offset, int64_t *capacity);

/* ---- buffers ----------------------------------------------------------------------- */

typedef struct kern_buffer kern_buffer;

/* A row-major array of rank 1..4 with extents 0 <= e < 2^31. data (NULL = zeroed) holds
 * the product of the extents times kern_dtype_size(dtype) bytes; it is copied. */
kern_status kern_buffer_create(kern_context *ctx, kern_dtype dtype, int rank, const int64_t *shape,
                               const void *data, kern_buffer **out);
/* Copies the whole buffer to host memory; size must equal kern_buffer_bytes. Waits for
 * the launches that use the buffer. */
kern_status kern_buffer_read(kern_buffer *buf, void *dst, size_t size);
/* Overwrites the whole buffer from host memory; size must equal kern_buffer_bytes. */
kern_status kern_buffer_write(kern_buffer *buf, const void *src, size_t size);
/* Releases the buffer; memory that launches in flight still use is freed once they
 * complete. NULL is ignored. */
void kern_buffer_release(kern_buffer *buf);
kern_dtype kern_buffer_dtype(const kern_buffer *buf);
int kern_buffer_rank(const kern_buffer *buf);
/* Extent of dimension dim (0-based); 1 for dim >= rank, as the kernel ABI sees it. */
int64_t kern_buffer_extent(const kern_buffer *buf, int dim);
int64_t kern_buffer_count(const kern_buffer *buf); /* elements */
size_t kern_buffer_bytes(const kern_buffer *buf);

/* Memory kern does not own, used in place (docs/runtime.md, "Wrapped memory"): host
 * memory on the CPU device, a CUDA device pointer (a CUdeviceptr) of the context's CUDA
 * context on the CUDA device; other devices answer KERN_ERR_UNSUPPORTED. data must hold
 * the extents' product times kern_dtype_size(dtype) bytes, aligned to the element size.
 * No copy is made: launches read and write data itself. release(user), when release is not
 * NULL, is called exactly once, after kern_buffer_release (or the context's release) AND
 * the completion of every launch that used the buffer, by the runtime's retirement rules;
 * the caller keeps its memory alive until then. On failure nothing is wrapped and release
 * is not called. */
kern_status kern_buffer_wrap(kern_context *ctx, kern_dtype dtype, int rank, const int64_t *shape,
                             void *data, void (*release)(void *user), void *user,
                             kern_buffer **out);
/* The buffer's memory: a host pointer on the CPU device, a CUDA device pointer on the CUDA
 * device; NULL on other devices. Launches in flight may be using it (kern_sync first). */
void *kern_buffer_pointer(const kern_buffer *buf);
/* Whether the buffer wraps memory kern does not own (kern_buffer_wrap). */
bool kern_buffer_is_wrapped(const kern_buffer *buf);

/* DLPack (dlpack.h 0.6, DLManagedTensor), the zero-copy exchange of NumPy, PyTorch, JAX
 * and CuPy. kern_buffer_from_dlpack wraps a tensor (void *: a DLManagedTensor *) of the
 * context's device (kDLCPU on the CPU device, kDLCUDA on the CUDA device), C-contiguous,
 * of dtype f32, f64, i32, u32, i64 or bool (uint8 0/1), rank 1..4, byte offset aligned:
 * on success the buffer owns the tensor and calls its deleter when released (by the
 * retirement rules); on failure the caller still owns it. kern_buffer_to_dlpack makes a
 * DLManagedTensor that views the buffer; its deleter releases that view: the buffer's
 * memory stays valid until both the buffer and every tensor made from it are released. */
kern_status kern_buffer_from_dlpack(kern_context *ctx, void *managed_tensor, kern_buffer **out);
kern_status kern_buffer_to_dlpack(kern_buffer *buf, void **managed_tensor);

/* ---- modules and kernels ----------------------------------------------------------- */

typedef struct kern_module kern_module;
typedef struct kern_kernel kern_kernel;

/* Loads an ahead-of-time module built by `kernc build --target=cpu -o PATH` (a shared
 * object with the kernels' code and metadata) or `--target=cuda` (a module file holding
 * metadata and PTX, docs/gpu-abi.md). KERN_ERR_NOT_FOUND for a missing file,
 * KERN_ERR_FORMAT for a file that is not a kern module or whose metadata, code or
 * symbols are broken, KERN_ERR_UNSUPPORTED for code the context's device cannot run. */
kern_status kern_module_load_file(kern_context *ctx, const char *path, kern_module **out);

/* JIT: compiles kern source (name is the file name used in messages; NULL = "<source>")
 * for the context's backend with its options (debug, ad_stack_size).
 * These two compile only in the JIT library: link with -lkern-jit (pkg-config kern-jit)
 * instead of -lkern; libkern's answer KERN_ERR_UNSUPPORTED, saying so.
 * KERN_ERR_COMPILE with the diagnostics as the message when the source has errors. */
kern_status kern_module_from_source(kern_context *ctx, const char *source, size_t len,
                                    const char *name, kern_module **out);
kern_status kern_module_from_file_source(kern_context *ctx, const char *path, kern_module **out);

/* Waits for the module's launches, then frees it and its kernels. NULL is ignored. */
void kern_module_release(kern_module *mod);
int kern_module_kernel_count(const kern_module *mod);
/* Name of kernel i (0-based) in source order; NULL when out of range. */
const char *kern_module_kernel_name(const kern_module *mod, int i);

/* Finds a kernel by name ("simulate", "simulate.grad"); KERN_ERR_NOT_FOUND otherwise,
 * and for "K.grad" of a kernel K whose gradient could not be built the message says why
 * ("kernel 'K.grad' was not built: ..."). The kernel lives as long as its module. */
kern_status kern_kernel_find(kern_module *mod, const char *name, kern_kernel **out);
const char *kern_kernel_name(const kern_kernel *k);
int kern_kernel_param_count(const kern_kernel *k);
/* Adstacks of the kernel (gradient kernels with loops; 0 otherwise). */
int kern_kernel_adstack_count(const kern_kernel *k);

typedef struct kern_param_info {
    const char *name;
    bool is_array;
    kern_dtype dtype; /* the element type of an array */
    int rank;         /* 1..4 for arrays, 0 for scalars */
    bool nograd;
    /* The declared type: the source's view of a vector, matrix or struct parameter
     * ("vec3[]", "mat3[,]", "P{pos:vec3,vel:vec3,mass:f32}[]", by value "vec3"), else
     * the plain type name ("f32[,]", "i32"). Lives as long as the module. */
    const char *type_name;
    /* The extents that the last ntail dimensions of the array must have: (3) for vec3[]
     * and a by-value vec3, (3, 3) for mat3, (leaves) for a struct; 0 for other params. */
    int ntail;
    int64_t tail[2];
} kern_param_info;

/* Describes parameter i; KERN_ERR_ARGUMENT when i is out of range. */
kern_status kern_kernel_param(kern_kernel *k, int i, kern_param_info *out);
/* Whether the kernel may write array parameter i (store or atomic): 0 when it never does
 * (read-only memory may then be passed), 1 when it may or the module does not say, -1 for
 * a bad kernel or index, or a scalar parameter. */
int kern_kernel_param_written(const kern_kernel *k, int i);

/* ---- launches ---------------------------------------------------------------------- */

typedef enum kern_arg_kind {
    KERN_ARG_BUFFER = 1,
    KERN_ARG_SCALAR = 2,
} kern_arg_kind;

/* One argument of a launch: a buffer for an array parameter, a scalar of exactly the
 * parameter's dtype for a scalar parameter (no implicit conversions). */
typedef struct kern_arg {
    kern_arg_kind kind;
    kern_dtype dtype; /* scalars */
    union {
        kern_buffer *buffer;
        bool b;
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
    } u;
} kern_arg;

static inline kern_arg kern_arg_buffer(kern_buffer *b) {
    kern_arg a = {KERN_ARG_BUFFER, (kern_dtype)0, {0}};
    a.u.buffer = b;
    return a;
}
static inline kern_arg kern_arg_bool(bool v) {
    kern_arg a = {KERN_ARG_SCALAR, KERN_BOOL, {0}};
    a.u.b = v;
    return a;
}
static inline kern_arg kern_arg_i32(int32_t v) {
    kern_arg a = {KERN_ARG_SCALAR, KERN_I32, {0}};
    a.u.i32 = v;
    return a;
}
static inline kern_arg kern_arg_u32(uint32_t v) {
    kern_arg a = {KERN_ARG_SCALAR, KERN_U32, {0}};
    a.u.u32 = v;
    return a;
}
static inline kern_arg kern_arg_i64(int64_t v) {
    kern_arg a = {KERN_ARG_SCALAR, KERN_I64, {0}};
    a.u.i64 = v;
    return a;
}
static inline kern_arg kern_arg_i8(int8_t v) {
    kern_arg a = {KERN_ARG_SCALAR, KERN_I8, {0}};
    a.u.i8 = v;
    return a;
}
static inline kern_arg kern_arg_u8(uint8_t v) {
    kern_arg a = {KERN_ARG_SCALAR, KERN_U8, {0}};
    a.u.u8 = v;
    return a;
}
static inline kern_arg kern_arg_i16(int16_t v) {
    kern_arg a = {KERN_ARG_SCALAR, KERN_I16, {0}};
    a.u.i16 = v;
    return a;
}
static inline kern_arg kern_arg_u16(uint16_t v) {
    kern_arg a = {KERN_ARG_SCALAR, KERN_U16, {0}};
    a.u.u16 = v;
    return a;
}
static inline kern_arg kern_arg_u64(uint64_t v) {
    kern_arg a = {KERN_ARG_SCALAR, KERN_U64, {0}};
    a.u.u64 = v;
    return a;
}
static inline kern_arg kern_arg_f32(float v) {
    kern_arg a = {KERN_ARG_SCALAR, KERN_F32, {0}};
    a.u.f32 = v;
    return a;
}
static inline kern_arg kern_arg_f64(double v) {
    kern_arg a = {KERN_ARG_SCALAR, KERN_F64, {0}};
    a.u.f64 = v;
    return a;
}

/* Launches kernel k with nargs arguments, one per parameter in order. KERN_ERR_ARGUMENT
 * (naming the kernel and parameter) when they do not match the signature;
 * KERN_ERR_DEVICE for a device error observed by this call (see the top of this file). */
kern_status kern_launch(kern_kernel *k, const kern_arg *args, int nargs);

/* ---- graphs: capture once, replay many times ---------------------------------------- */

/* A graph is a recorded sequence of launches (one training step, say: the forward
 * launches, then the gradients) that replays with no per-launch host work: on CUDA one
 * CUDA graph launch per replay; on the CPU the launches are submitted in order.
 *
 *   kern_graph_begin(ctx);
 *   kern_launch(step, args, n); kern_launch(step_grad, gargs, m);   // recorded, not run
 *   kern_graph_end(ctx, &g);
 *   for (...) kern_graph_launch(g);                                 // runs them
 *
 * While capturing, kern_launch checks and sizes each launch and records it with its
 * arguments (buffers by identity, scalars by value), but runs nothing. A graph keeps what
 * it uses alive and in place (runtime contract 9, docs/runtime-contracts.md): its buffers
 * and modules are freed only with the graph, even when released before, and the adstack
 * heap keeps its address: while a graph lives, a launch that would need a larger heap
 * fails with a message saying so.
 * A replay whose loop bounds outgrow the captured capacities (the contents of a count
 * array changed) fails with the adstack overflow error, never writing past the heap.
 * Device errors of a replay are reported as for launches, naming the captured kernel. */
typedef struct kern_graph kern_graph;

/* Starts capturing the launches of ctx. KERN_ERR_ARGUMENT when a capture is under way. */
kern_status kern_graph_begin(kern_context *ctx);
/* Ends the capture; *out receives the graph (possibly of no launches). */
kern_status kern_graph_end(kern_context *ctx, kern_graph **out);
/* Replays the graph's launches, in order, after the work submitted before. */
kern_status kern_graph_launch(kern_graph *g);
/* Launches in the graph. */
int kern_graph_launch_count(const kern_graph *g);
/* Waits for the graph's replays, then frees it (and what was released while it lived). */
void kern_graph_release(kern_graph *g);

/* ---- the gradient tape ------------------------------------------------------------ */

/* A tape records launches and runs their gradient kernels (K.grad, found by name in K's
 * module) in reverse order: reverse mode over a sequence of launches (docs/runtime.md).
 *
 *   kern_tape_create(ctx, &tape);
 *   kern_tape_set_grad(tape, x, x_grad);        // optional: your adjoint buffer for x
 *   kern_tape_launch(tape, step, args, n);      // launches now, and records the launch
 *   ...                                         // more launches
 *   kern_buffer_write(out_grad, seed, ...);     // dL/d(out) in out's adjoint buffer
 *   kern_tape_backward(tape);                   // newest record first
 *   kern_tape_grad(tape, x, &g);                // the adjoint of x (set, or the tape's own)
 *   kern_tape_scalar_grad(tape, rec, param, &d);// dL/d(scalar param) of one record
 *
 * For each record, kern_tape_backward launches K.grad with the recorded arguments
 * followed by, per differentiable parameter of K (f32 or f64 element type, not nograd):
 * for an array, the adjoint buffer of that argument's buffer (the one given to
 * kern_tape_set_grad, or one the tape creates zeroed with the buffer's dtype and shape
 * on first use); for a scalar, a zeroed f32[1] or f64[1] buffer per (record, parameter).
 *
 * Ownership: the tape keeps pointers to the buffers and kernels of its records and to
 * the adjoint buffers given to it; they must stay alive until kern_tape_clear or
 * kern_tape_destroy (a backward pass that finds one released fails with
 * KERN_ERR_ARGUMENT rather than using it, as far as it can tell). Buffers the tape
 * creates belong to it: kern_tape_clear and kern_tape_destroy release them.
 *
 * K.grad reads the primal arrays when backward runs. So that it reads what K read, a
 * launch that may overwrite elements an earlier record may have read (the index ranges
 * of the kernel's metadata, evaluated for the launch) first copies them into a buffer of
 * the tape's, and backward puts them back, newest record first, right after that launch's
 * K.grad; after backward each such element holds the value the earlier records read.
 * Time-indexed arrays (x[t + 1, i] from x[t, i]) overlap nothing and cost nothing. The
 * copies count against the context's adstack budget (kern_context_options.
 * ad_memory_budget) with the adstack heap; a launch whose copies do not fit fails before
 * it runs (KERN_ERR_OUT_OF_MEMORY, naming both kernels, the parameter and the bytes).
 * Writes the tape does not see (kern_buffer_write, a host step's own work) are not
 * saved: they must not change what an earlier record read.
 *
 * A step that is not a kern kernel (a library call, a host solver) is recorded with its
 * own backward by kern_tape_record_func, below; backward calls it at its place among the
 * kernel records. */
typedef struct kern_tape kern_tape;

kern_status kern_tape_create(kern_context *ctx, kern_tape **out);
/* Releases the tape and the buffers it created, and calls the host steps' free_user.
 * NULL is ignored. A context's release destroys its tapes too (like its buffers and
 * modules). Inside a host step's backward, destroying its own tape does nothing (the
 * context's message says why). */
void kern_tape_destroy(kern_tape *tape);
/* Uses grad (same dtype and shape as primal, a float dtype) as primal's adjoint. Both
 * stay owned by the caller. Replaces an earlier association, the tape's own buffer
 * included (which is then released). */
kern_status kern_tape_set_grad(kern_tape *tape, kern_buffer *primal, kern_buffer *grad);
/* The adjoint buffer of primal: the one set, or the tape's own (created by backward);
 * KERN_ERR_NOT_FOUND when there is none. */
kern_status kern_tape_grad(kern_tape *tape, kern_buffer *primal, kern_buffer **out);
/* kern_launch(k, args, nargs), then records the launch if it succeeded. On a forward tape
 * (below): launches k's K.jvp instead, then records it. */
kern_status kern_tape_launch(kern_tape *tape, kern_kernel *k, const kern_arg *args, int nargs);

/* A host step's backward: turns the adjoints of the step's outputs into those of its
 * inputs (accumulating: x.grad += ...), as K.grad does for a kernel. Returns KERN_OK, or
 * an error status that stops kern_tape_backward (kern_tape_error gives it a message). */
typedef kern_status (*kern_tape_backward_fn)(kern_tape *tape, void *user);
/* Records a host step: backward(tape, user) runs during kern_tape_backward at this
 * record's position (newest first, among the kernel records). buffers[0..nbuffers) are
 * the buffers whose adjoints it reads or writes (buffers of other dtypes may be listed:
 * they are only checked). The step itself has run already: this call runs nothing.
 *
 * Before calling backward, kern_tape_backward checks that each listed buffer is still
 * alive (a released one is KERN_ERR_ARGUMENT naming its index), gives each f32/f64 one an
 * adjoint (the associated one, or a zeroed one the tape owns, as for kernel records), so
 * that kern_tape_grad finds them, and waits for the launches submitted before
 * (kern_sync: on the CUDA device one stream synchronization per host step, on the CPU
 * nothing to wait for), so the adjoints' memory is final even through
 * kern_buffer_pointer. backward runs on the thread that called kern_tape_backward.
 *
 * Inside backward: kern_tape_grad, kern_tape_set_grad, buffer reads and writes and
 * launches on the context (K.grad kernels included; they are ordered after what came
 * before) are allowed, and so is another tape. Recording on, clearing, destroying or
 * running backward this tape is refused (KERN_ERR_ARGUMENT); releasing the context is not
 * allowed. Work that backward queues elsewhere (another library's CUDA stream) must be
 * complete, or ordered before kern's stream (kern_context_cuda_stream), when it returns.
 * A backward that returns an error stops the pass: kern_tape_backward returns that status
 * with "kern_tape_backward: record R (host callback) failed: " and backward's message (the
 * one kern_tape_error set, or that of the kern call that failed), or "the callback
 * returned KERN_ERR_..." when there is none.
 *
 * Ownership: from this call on, user belongs to the tape: free_user(user) (when not NULL)
 * runs exactly once, when the record is dropped (kern_tape_clear, kern_tape_destroy, the
 * context's release) or, when this call fails for any reason (a NULL or released tape
 * included), before it returns. free_user must not call kern on the tape or its context.
 * The buffers stay the caller's, as for kern_tape_launch. Fails (KERN_ERR_ARGUMENT) for a
 * NULL backward, a NULL, released or other context's buffer, and on a tape that has run
 * backward. */
kern_status kern_tape_record_func(kern_tape *tape, kern_tape_backward_fn backward, void *user,
                                  void (*free_user)(void *user), kern_buffer *const *buffers,
                                  int nbuffers);
/* For a host step's backward: sets the message kern_tape_backward reports for it and
 * returns status (KERN_OK becomes KERN_ERR_CALLBACK): return kern_tape_error(tape,
 * KERN_ERR_CALLBACK, "the solver diverged"). */
kern_status kern_tape_error(kern_tape *tape, kern_status status, const char *message);
/* Runs the gradient kernels and host steps of the records, newest first. A tape runs
 * backward once per recording: a second call fails until kern_tape_zero or kern_tape_clear.
 * Fails on the first record whose gradient kernel is missing or fails, naming the record
 * and the kernel, or whose host step fails (above). */
kern_status kern_tape_backward(kern_tape *tape);
/* The number of records, host steps included. */
int kern_tape_record_count(const kern_tape *tape);
/* The bytes of the copies the tape keeps now (above: what a launch overwrote of earlier
 * records' reads); 0 for a NULL tape. Backward releases each record's copies once it has
 * put them back; kern_tape_clear and kern_tape_destroy release the rest. */
int64_t kern_tape_saved_bytes(const kern_tape *tape);
/* After backward: dL/d(scalar parameter `param`) of record `record` (0-based, in launch
 * order), read back as a double. KERN_ERR_ARGUMENT when the record or parameter is out
 * of range, the record is a host step, or the parameter is not a differentiable scalar;
 * KERN_ERR_NOT_FOUND before backward. */
kern_status kern_tape_scalar_grad(kern_tape *tape, int record, int param, double *out);
/* Forgets the records (calling the host steps' free_user) and releases the buffers the
 * tape created (scalar adjoints and its own array adjoints); associations made with
 * kern_tape_set_grad stay. */
kern_status kern_tape_clear(kern_tape *tape);
/* Zeroes the adjoints and keeps the records (Warp's Tape.zero; kern_tape_clear is its
 * reset): every adjoint associated with a buffer (those given to kern_tape_set_grad and
 * the tape's own) and the records' scalar adjoints become zero, so that kern_tape_backward
 * can run again over the same records with new seeds. A tape whose backward pass put back
 * saved elements (kern_tape_saved_bytes was not 0) cannot run backward again: the arrays
 * no longer hold the state the records left. Records cannot be added after a backward
 * pass until kern_tape_clear. On a forward tape: zeroes the array tangents (set and own).
 * Refused while the tape's backward pass runs. */
kern_status kern_tape_zero(kern_tape *tape);

/* ---- the forward-mode tape ---------------------------------------------------------- */

/* A forward tape launches, in place of each kernel K given to it, K's forward-mode kernel
 * K.jvp (found by name in K's module; built on first use for JIT modules): the JVP of a
 * sequence of launches, computed as they run (docs/runtime.md, "Forward tapes").
 *
 *   kern_tape_create_forward(ctx, &tape);
 *   kern_tape_set_tan(tape, x0, v);             // the tangent of x0 (your buffer, optional)
 *   kern_tape_launch(tape, step, args, n);      // runs step.jvp: step's primal work, and
 *   ...                                         //   the tangents turned into those after it
 *   kern_tape_tan(tape, x5, &t5);               // J v: the tangent of x5 (set, or the tape's)
 *
 * K.jvp gets K's arguments followed by, per differentiable parameter of K (as for
 * K.grad): for an array, the tangent buffer of that argument's buffer (the one given to
 * kern_tape_set_tan, or one the tape creates zeroed with the buffer's dtype and shape on
 * first use, so an array whose tangent was never set starts at zero); for a scalar, a
 * f32[1] or f64[1] the tape creates per (record, parameter), holding the scalar's tangent
 * for that launch: 0 with kern_tape_launch, scalar_tans[param] with kern_tape_launch_jvp.
 * The tangents hold the tangent of the state as it is now: read them after the launches
 * of interest (kern_buffer_read waits for them).
 *
 * A kernel whose K.jvp cannot be built (an atomic_min/max in a parallel loop, say) fails
 * the launch with KERN_ERR_UNSUPPORTED or the status of kern_kernel_find, and a message
 * "kern_tape_launch: kernel 'K' has no forward-mode kernel 'K.jvp': ..."; nothing runs.
 * A forward tape has no adjoints, backward pass or host steps: kern_tape_backward,
 * kern_tape_set_grad, kern_tape_grad, kern_tape_scalar_grad and kern_tape_record_func fail
 * on it (KERN_ERR_ARGUMENT, free_user called as for any failure), and the tangent calls
 * fail on a reverse tape. Ownership is as for the reverse tape: tangents given by the user
 * stay the user's (a launch that finds one released fails, naming the parameter); those
 * the tape creates (array and scalar tangents) belong to it, and kern_tape_clear and
 * kern_tape_destroy release them (associations from kern_tape_set_tan stay). The tape
 * keeps no data: unlike the reverse tape, the launches may overwrite anything. */
kern_status kern_tape_create_forward(kern_context *ctx, kern_tape **out);
/* Uses tan (same dtype and shape as primal, a float dtype) as primal's tangent, for the
 * launches after this call. Both stay owned by the caller. Replaces an earlier
 * association, the tape's own tangent included (which is then released). */
kern_status kern_tape_set_tan(kern_tape *tape, kern_buffer *primal, kern_buffer *tan);
/* The tangent buffer of primal: the one set, or the tape's own (created by a launch);
 * KERN_ERR_NOT_FOUND when there is none. */
kern_status kern_tape_tan(kern_tape *tape, kern_buffer *primal, kern_buffer **out);
/* kern_tape_launch with the tangents of K's scalar parameters: scalar_tans[i] for a
 * differentiable scalar parameter i (indexed as args; other entries are ignored), or all
 * zero when scalar_tans is NULL. The tangent of a scalar applies to this launch only. */
kern_status kern_tape_launch_jvp(kern_tape *tape, kern_kernel *k, const kern_arg *args, int nargs,
                                 const double *scalar_tans);

/* ---- several devices --------------------------------------------------------------- */

/* A context has one device; a program uses several GPUs with a context per device
 * (kern_context_options.device = N), each from any thread: contexts on different devices
 * (or on one) are used by different threads at once (docs/runtime.md, "Several devices").
 * On CUDA every call makes the device's primary context current on the calling thread. */

/* The number of the context's device among its backend's: the CUDA ordinal, the Vulkan
 * physical device's index (the one chosen when options.device was -1), 0 for the CPU; -1
 * for a context that was not created successfully. */
int kern_context_device_index(const kern_context *ctx);
/* Copies src's contents into dst, buffers of the same dtype and shape that may belong to
 * different contexts, on different devices: after the launches that write src and those
 * that use dst, complete when it returns (as kern_buffer_write). CUDA to CUDA is one
 * cuMemcpyPeerAsync (peer to peer where the GPUs allow it); a CPU side is one copy from or
 * to its memory; other pairs go through host memory in chunks of 16 MiB. Failures leave
 * their message in dst's context; a device error of src's launches stays with src's
 * context (reported by its next call). Neither context may be used by another thread
 * during the call. */
kern_status kern_buffer_copy_from(kern_buffer *dst, kern_buffer *src);

#if defined(__GNUC__) && !defined(KERN_NO_VISIBILITY)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
