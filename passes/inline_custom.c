/* inline_custom.c - replaces every `custom` op by its primal region (ir_inline_custom).
 *
 * What: a `custom` op (a call of a func with a custom adjoint, docs/ir.md) is needed only
 * until the gradient kernels are built: passes/ad_grad.c reads its adjoint region. After
 * that its value is its primal region's, so the primal region's ops move before the op
 * (its arguments replaced by the op's operands), the op's results are replaced by the
 * values the primal region yields, and the op (with its adjoint region) goes. Nested
 * custom ops (a func with a custom adjoint called by one) are inlined first.
 *
 * Where: compiler/driver.c, right after the gradients are built (or where they would be
 * built), before ir_opt_private_atomics, so that no later pass and no emitter sees a
 * `custom` op. Requires a verified module; keeps every invariant (the primal region uses
 * only its arguments and its own values, so the moved ops are well defined where they
 * land). Linear: the uses are rewritten in one walk per kernel (ir_subst). */
#include "passes.h"

static bool inline_region(ir_subst *s, ir_region *r) {
    bool changed = false;
    ir_foreach_op_safe(op, tmp, r) {
        for (uint32_t i = 0; i < op->nregions; i++)
            if (op->code != IR_CUSTOM || i == 0) /* the adjoint region goes */
                changed |= inline_region(s, op->regions[i]);
        if (op->code != IR_CUSTOM)
            continue;
        ir_region *primal = op->regions[0];
        for (uint32_t i = 0; i < primal->nargs; i++)
            ir_subst_add(s, primal->args[i], op->operands[i]);
        ir_op *y = primal->last;
        kern_assert(y && y->code == IR_YIELD && y->noperands == op->nresults);
        for (uint32_t i = 0; i < op->nresults; i++)
            ir_subst_add(s, op->results[i], y->operands[i]);
        ir_foreach_op_safe(p, ptmp, primal) {
            if (p == y)
                break;
            ir_remove(p);
            ir_insert_before(op, p);
        }
        ir_remove(op);
        changed = true;
    }
    return changed;
}

bool ir_inline_custom(ir_module *m) {
    bool changed = false;
    ir_subst s = {0};
    ir_foreach_kernel(k, m) {
        ir_subst_begin(&s, k);
        if (inline_region(&s, k->body)) {
            ir_subst_apply(&s, k->body);
            changed = true;
        }
    }
    ir_subst_free(&s);
    return changed;
}
