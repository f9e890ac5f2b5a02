/* context.h - the compiler context: options, the diagnostics sink and the memory that
 * outlives one compilation step. No process-global mutable state: two threads can
 * compile at once with two contexts. */
#ifndef KERN_CONTEXT_H
#define KERN_CONTEXT_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "diag.h"

typedef enum kc_grad_mode {
    KC_GRAD_NONE,     /* primal kernels only (default) */
    KC_GRAD_ALL,      /* K.grad for every kernel; a failed global-access check is an error */
    KC_GRAD_POSSIBLE, /* K.grad for every kernel that passes the check; the others get
                         ir_kernel.grad_error and no K.grad (modules for the runtime) */
    KC_GRAD_CHECK,    /* no K.grad, but the check runs: a kernel that fails it gets
                         grad_error (the JIT's modules, whose gradients are built lazily) */
} kc_grad_mode;

typedef struct kc_options {
    int opt_level;          /* 0..3, default 2 */
    bool checks;            /* runtime checks: bounds, division by zero, shifts (SIMD and
                               GPU code keep their fast paths: a vector compare and one
                               branch per access) */
    bool debug;             /* a debug build: the checks, and scalar code on the CPU (no
                               SIMD across work items) */
    bool no_grad_check;     /* the global-access check warns instead of failing */
    uint32_t ad_stack_size; /* adstack capacity of unbounded loops (default 1024) */
    kc_grad_mode grad;      /* which gradient kernels kc_compile_source builds */
    const char *grad_only;  /* only this kernel's derived kernels (NULL: every kernel's): "K"
                               (K.grad, with jvp also K.jvp and K.grad.jvp), or one of
                               "K.grad", "K.jvp", "K.grad.jvp" alone (with K.grad for the
                               last) */
    bool jvp;               /* forward mode too: K.jvp for every kernel, K.grad.jvp for
                               every K.grad built (passes/ad_jvp.c) */
    bool no_jvp;            /* kernc build --no-jvp: an AOT module without K.jvp and
                               K.grad.jvp (which otherwise up to triple its compile time) */
    bool promote_f64;       /* retype f32 to f64 before the gradients (kernc gradcheck) */
    const char *arch;       /* GPU targets: sm_XX / gfxNNN (NULL: the target's default) */
    const char *libdevice;  /* NVPTX: libdevice.10.bc (NULL: searched in CUDA's places) */
    int simd;               /* CPU: SIMD lanes of parallel tasks: 0 auto (the host's widest
                               vectors), -1 off (scalar), 4 / 8 / 16 / 32 / 64 */
    int jit_threads;        /* CPU JIT: threads compiling one module's parts (0: online CPUs) */
    bool scatter_adjoints;  /* neighbour reads keep atomic scatter adjoints (no gather form) */
    bool no_ckpt;           /* no K.grad.ckpt (the checkpointed gradient the runtime runs when
                               K.grad's adstacks exceed the memory budget) */
    bool no_neighbour_adds; /* CPU: neighbour scatters stay atomic inside a chunk too */
    bool no_vector_math;    /* CPU SIMD: math lane by lane through libm, not libmvec */
    bool no_trip_sort;      /* work items in index order, not sorted by a loop's trip count
                               (passes/trip_sort.c; $KERN_NO_TRIP_SORT=1, for comparison) */
    bool fast_math;         /* the targets' fast approximations of f32 sin, exp, ... (CUDA's
                               __sinf class, Vulkan's GLSL.std.450) instead of kern's accuracy
                               table (docs/reference.md, "Accuracy of the math builtins") */
    bool own_math;          /* kern's own math library (passes/lower_libm.c) on every target,
                               the CPU and CUDA too, in Vulkan's variant (no fused fma): the
                               same numbers as Vulkan ($KERN_OWN_MATH=1) */
    bool own_math_fused;    /* with own_math: AMDGPU's variant instead (a fused fma; f32 exp,
                               exp2, log and log2 left to the target), to measure AMDGPU's
                               numbers on the CPU ($KERN_OWN_MATH=fused) */
    bool eager_grads;       /* JIT: every K.grad at once, not at its first lookup */
    unsigned pass_debug;    /* IR_DEBUG_* (ir/ir.h): print / roundtrip / verify after passes */
    bool keep_rules;        /* kc_compile_source stops before ir_lower_semantics: the IR keeps
                               the language's rules in its plain ops (kernc emit --emit=ir
                               -O0, the interpreter's tests); no backend takes such IR */
    const char *cuda_home;  /* NVPTX: a CUDA installation searched for libdevice first */
    const char *lld;        /* AMDGPU: the ld.lld that links code objects (NULL: PATH) */
} kc_options;
/* The environment variables behind these fields are read by kc_options_from_env
 * (common/env.h), at the public API boundary only. */

typedef struct kc_ctx {
    arena mem;       /* diagnostics text, sources, AST */
    diag_sink diags; /* every error and warning of this context */
    kc_options opts;
} kc_ctx;

void kc_options_default(kc_options *o);
/* Whether code compiled with o checks bounds, divisions and shifts (checks, or debug). */
static inline bool kc_checks(const kc_options *o) { return o->checks || o->debug; }
kc_ctx *kc_ctx_new(void);
void kc_ctx_free(kc_ctx *c);
/* Registers a source; the text is copied into the context. */
const kern_source *kc_add_source(kc_ctx *c, const char *path, const char *text, size_t len);
void kc_error(kc_ctx *c, const kern_source *src, kern_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void kc_warning(kc_ctx *c, const kern_source *src, kern_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
