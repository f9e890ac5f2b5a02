/* passes.h - every IR pass, one per file, the analyses they share, and the pass runner.
 *
 * A pass has one entry point `bool ir_opt_NAME(ir_module *m)` that returns whether it
 * changed anything. IR_PASS runs a pass and, in debug builds (KERN_DEBUG_BUILD) or when
 * the module's debug bits ask for it (ir_module.debug, from KERN_DEBUG), verifies after any
 * pass that made progress:
 *   print      print the IR to stderr after every pass that made progress
 *   roundtrip  check print -> parse -> print after every pass that made progress
 *   verify     verify after every pass, also in release builds */
#ifndef KERN_PASSES_H
#define KERN_PASSES_H

#include <stdbool.h>

#include "../ir/ir.h"
#include "../ir/valset.h"

bool ir_opt_fold(ir_module *m);     /* constant folding */
bool ir_opt_simplify(ir_module *m); /* algebraic identities, if -> select, dead branches */
bool ir_opt_cse(ir_module *m);      /* common subexpressions of pure ops */
bool ir_opt_dce(ir_module *m);      /* dead pure ops, unused loop-carried values */
/* atomics on elements private to one thread -> load/update/store; runs once, after the
 * gradient kernels are built (compiler/driver.c), not in ir_optimize */
bool ir_opt_private_atomics(ir_module *m);

/* Replaces every `custom` op (a call of a func with a custom adjoint) by its primal region
 * (passes/inline_custom.c). compiler/driver.c runs it once the gradients are built, so no
 * later pass and no emitter sees a `custom` op. */
bool ir_inline_custom(ir_module *m);

/* The language's rules for integer div/rem, shifts, min/max/clamp and sign, written once as
 * plain IR (passes/lower_semantics.c), with `check` ops for the debug checks of division by
 * zero and shift counts when checks. The last step of kc_compile_source; sets
 * ir_module.lowered, which every emitter requires. */
bool ir_lower_semantics(ir_module *m, bool checks);
/* Casts from and to the storage types (f16, bf16, i8..u16) as integer IR and bitcasts
 * (passes/lower_narrow.c); run by ir_lower_semantics, last. */
bool ir_lower_narrow(ir_module *m);

/* kern's own math library (passes/lower_libm.c): sin, cos, tan, asin, acos, atan, atan2,
 * sinh, cosh, tanh, exp, exp2, log, log2 and pow of the float types in `which` replaced by
 * plain IR, for targets without an accurate library of their own. Requires a lowered
 * module. ir_libm_needed: whether m has such an op; ir_libm_lowers: whether op is one. */
enum {
    IR_LIBM_F32 = 1,
    IR_LIBM_F64 = 2,
    IR_LIBM_KEEP_F32_EXPLOG = 4, /* f32 exp, exp2, log and log2 stay ops (AMDGPU's own) */
    IR_LIBM_NO_FMA = 8,          /* the target's fma may round twice (Vulkan): no method
                                    relies on a fused one */
};
bool ir_lower_libm(ir_module *m, unsigned which);
bool ir_libm_needed(const ir_module *m, unsigned which);
bool ir_libm_lowers(const ir_op *op, unsigned which);
/* A lowered copy of m (ir_module_copy, ir_lower_libm, then fold, cse and dce: sin and cos
 * of one argument share their reduction), or NULL when m has nothing to lower: what a code
 * generator emits instead of m. */
ir_module *ir_libm_copy(const ir_module *m, unsigned which);

/* ---- Analyses: divergence (passes/divergence.c) ------------------------------------- */

/* Whether v is defined in region scope or a region nested in it. */
bool ir_defined_in(const ir_value *v, const ir_region *scope);
/* What ir_uniform_in has already decided (zeroed: nothing; freed by the caller). */
typedef struct ir_uniform_memo {
    ir_valset yes, no;
} ir_uniform_memo;
/* Whether v is the same in every execution of region scope (each work item of a task body,
 * each iteration of a loop body): defined outside scope, or computed inside it by pure
 * ops without regions from such values, so that it can be recomputed anywhere in scope. */
bool ir_uniform_in(const ir_value *v, const ir_region *scope, ir_uniform_memo *memo);
void ir_uniform_memo_free(ir_uniform_memo *memo);

/* Whether idx, an index of array a's dimension d, lies in 0..dim(a, d) by construction (a
 * loop or task index from 0 to dim(a, d), or dim(a, d) - 1 minus one; passes/inbounds.c). */
bool ir_index_in_dim(const ir_value *idx, const ir_value *a, int d);

/* The divergence of a parallel task along its innermost index (zeroed before the first
 * ir_divergence_task, which may be called again for another task; ir_divergence_free). */
typedef struct ir_divergence {
    const ir_kernel *kernel;
    ir_valset varying; /* values that differ between work items */
    ir_valset linear;  /* varying values equal to the innermost index plus a uniform value */
    bool *ad_varying;  /* per adstack of the kernel: its depth differs between work items */
    bool changed;      /* the fixpoint's flag (this analysis's own, never shared) */
} ir_divergence;
void ir_divergence_task(ir_divergence *d, const ir_kernel *k, const ir_op *task);
void ir_divergence_free(ir_divergence *d);
static inline bool ir_div_varying(const ir_divergence *d, const ir_value *v) {
    return ir_valset_has(&d->varying, v);
}
static inline bool ir_div_linear(const ir_divergence *d, const ir_value *v) {
    return ir_valset_has(&d->linear, v);
}
/* A load, store or atomic at an index that differs between work items. */
bool ir_div_access_varying(const ir_divergence *d, const ir_op *access);
/* A for or while loop whose trip count differs between work items (a varying bound,
 * early exit or condition): its body runs under a mask in SIMD code. */
bool ir_div_loop_divergent(const ir_divergence *d, const ir_op *loop);
/* Work items sorted by a loop's trip count (passes/trip_sort.c): `loop`, a masked `for` at
 * the top level of a task body, and `ops`, the ops of the body's top level that its bounds
 * are computed from, in body order (integer ops and loads; a backend runs them ahead for
 * each item, its loads for in-bounds indices only, and orders the items by
 * max(hi - lo, 0)). */
enum { IR_TRIP_SORT_OPS = 24 };
typedef struct ir_trip_sort {
    const ir_op *loop;
    const ir_op *ops[IR_TRIP_SORT_OPS];
    uint32_t nops;
} ir_trip_sort;
/* Whether the task body (whose divergence d is) suits sorting, and how (*s): false where no
 * such loop has vector math and computable bounds, or where a store of a varying value at
 * a uniform element makes the order of the items show. */
bool ir_trip_sort_plan(const ir_divergence *d, const ir_region *body, ir_trip_sort *s);
/* r's yield or condition, or NULL. */
const ir_op *ir_region_terminator(const ir_region *r);

/* ---- Reverse mode (docs/autodiff.md) ------------------------------------------------ */

/* The global-access check of reference section 8 on primal kernel k (passes/ad_check.c): for
 * every read of an array element that k may write afterwards (same task or a later one),
 * reports an error at the read with a note at the write (warnings instead when
 * as_warning) and the suggested fixes. Returns false when it reported an error. */
bool ad_check_kernel(const ir_kernel *k, diag_sink *sink, const kern_source *src,
                     bool as_warning);

/* Builds K.grad for primal kernel k and appends it to k's module (passes/ad_grad.c).
 * ad_stack_size is the capacity of loops that cannot be bounded (while). Returns the new
 * kernel. Requires verified IR; the result verifies. */
ir_kernel *ad_grad_kernel(ir_kernel *k, uint32_t ad_stack_size);
/* K.grad.ckpt, the checkpointed gradient of k (docs/autodiff.md, "Memory budget"): K.grad's
 * parameters, then one i64 `ckpt.kN` per checkpointed loop (the active `for` and `while`
 * loops of a task body that no other loop encloses): the forward sweep pushes the loop's
 * carried values every k-th iteration only, and the reverse sweep recomputes each segment
 * of k iterations from its checkpoint before reversing it. NULL when k has no such loop. */
ir_kernel *ad_grad_ckpt_kernel(ir_kernel *k, uint32_t ad_stack_size);
/* The parameters of K.grad for primal kernel k: k's, then `p.grad` for each differentiable
 * p (in k's module's arena; *nparams gets the count). */
ir_param *ad_grad_params(const ir_kernel *k, uint32_t *nparams);

/* Builds K.jvp, the forward-mode (Jacobian-vector) kernel of k, and appends it to k's
 * module (passes/ad_jvp.c); k may be a primal kernel or a gradient kernel (K.grad.jvp,
 * Hessian-vector products). Returns NULL after reporting to sink what forward mode cannot
 * differentiate (atomic_min/max in a parallel task that reads an array it writes or uses
 * an atomic's result). Requires verified IR. */
ir_kernel *ad_jvp_kernel(ir_kernel *k, diag_sink *sink, const kern_source *src);

/* Gather-form adjoints of neighbour reads in gradient kernel k (passes/ad_gather.c): the
 * atomic adds of a parallel task into an adjoint array at the parallel indices plus
 * constants become a new task before it that gathers each element's adds by
 * recomputation. Returns whether it changed k. The driver skips it under
 * kc_options.scatter_adjoints (KERN_SCATTER_ADJOINTS=1). */
bool ad_gather_kernel(ir_module *m, ir_kernel *k);

/* The SizeExpr of loop op `loop` (FOR or WHILE) of primal kernel k (passes/ad_size.c): an
 * upper bound on its trip count in one execution, maximized over the ranges of the
 * parallel and serial loop indices it depends on, as a tree (common/sizeexpr.h) in arena
 * out. NULL when it cannot be bounded (a while loop; a bound computed from floats or
 * loop-carried values). */
sz_expr *ad_loop_capacity(const ir_kernel *k, const ir_op *loop, arena *out);
/* The number of indices of dimension d of a parallel task, max(0, hi - lo), as a SizeExpr
 * in arena out, so that the runtime can size a GPU grid on the host (docs/gpu-abi.md);
 * NULL when the range cannot be expressed (a bound from floats, say). */
sz_expr *ad_task_extent(const ir_kernel *k, const ir_op *task, uint32_t d, arena *out);
/* The values integer v of kernel k takes wherever its op runs, as [*lo, *hi) (trees in
 * arena out) over the ranges of the parallel and serial loop indices it depends on: exact
 * for affine forms of indices, parameters and extents (`t + 1`, `2 * i + j`), an enclosing
 * range being non-empty whenever the op runs. False (both NULL) when it cannot be
 * expressed without the data: loop-carried values, loads, floats, selects, products of
 * indices. Values are mathematical integers, as for ad_loop_capacity. */
bool ad_value_range(const ir_kernel *k, const ir_value *v, arena *out, sz_expr **lo, sz_expr **hi);

/* Retypes every f32 of m (parameters, values, consts, adstacks) to f64 and removes the
 * casts that become identities (passes/ad_promote.c): kernc gradcheck runs K and K.grad
 * in f64. Returns whether anything changed. */
bool ad_promote_f64(ir_module *m);

/* Called by IR_PASS: verifies/prints/round-trips according to the build and m->debug. */
void ir_pass_after(ir_module *m, const char *name, bool progress);

#define IR_PASS(progress, m, pass)                                                         \
    do {                                                                                   \
        bool ir_pass_p_ = pass(m);                                                         \
        ir_pass_after((m), #pass, ir_pass_p_);                                             \
        if (ir_pass_p_)                                                                    \
            (progress) = true;                                                             \
    } while (0)

/* The standard optimization pipeline for opt_level (0..3): runs the passes above to a
 * fixed point (bounded). */
void ir_optimize(ir_module *m, int opt_level);

#endif
