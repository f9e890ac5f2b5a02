/* divergence.c - which values of a parallel task differ between its work items: the one
 * uniformity analysis that every pass and emitter reads (passes.h, "Analyses").
 *
 * Two questions, two entry points:
 *
 *   ir_uniform_in(v, scope)   Is v the same in every execution of region `scope` (every
 *                             work item of a task body, every iteration of a loop body)?
 *                             Structural and conservative: v is defined outside `scope`,
 *                             or computed inside it by pure ops without regions (no load,
 *                             atomic or adstack pop) from such values. Such a value can be
 *                             recomputed anywhere inside `scope` (ad_gather.c), and it is
 *                             one value for every thread and iteration (ad_check.c).
 *
 *   ir_divergence_task(d, k, task)
 *                             The divergence of a task along its innermost parallel index
 *                             (the dimension that SIMD spreads across lanes, and that
 *                             neighbouring GPU threads differ in): the values that vary with
 *                             it (d->varying), those that are that index plus a uniform value
 *                             (d->linear: contiguous accesses), the adstacks whose depth
 *                             differs between items (d->ad_varying), and the loops whose trip
 *                             count differs (ir_div_loop_divergent). Loads at uniform
 *                             indices are uniform; results of atomics and adstack pops vary;
 *                             a value defined under control flow that diverges varies (the
 *                             items leave a loop at different iterations). A lanemax is
 *                             uniform: one value in the lanes that execute it together,
 *                             which is what SIMD and the other readers of this analysis
 *                             mean (never one value for the whole task: ir_uniform_in
 *                             says no to it).
 *
 * Algorithm: a forward pass over the task body, repeated until nothing changes (a value
 * carried around a loop may become varying in a later round); sets only grow, so it ends.
 *
 * Where: computed by its users when they need it (llvm_simd.c per task function; the
 * gradient passes on their kernels); it changes no IR. Requires verified IR. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* ---- uniform in a region ------------------------------------------------------------ */

bool ir_defined_in(const ir_value *v, const ir_region *scope) {
    for (const ir_region *r = v->def ? v->def->parent : v->region; r;
         r = r->parent ? r->parent->parent : NULL)
        if (r == scope)
            return true;
    return false;
}

bool ir_uniform_in(const ir_value *v, const ir_region *scope, ir_uniform_memo *memo) {
    if (!ir_defined_in(v, scope))
        return true;
    const ir_op *d = v->def;
    if (!d || d->nregions || !(ir_info(d->code)->flags & OPF_PURE)) /* loads, atomics, pops */
        return false;
    if (d->code == IR_LANEMAX) /* one value per group of lanes, not per task */
        return false;
    if (ir_valset_has(&memo->yes, v))
        return true;
    if (ir_valset_has(&memo->no, v))
        return false;
    bool u = true;
    for (uint32_t i = 0; i < d->noperands && u; i++)
        u = ir_uniform_in(d->operands[i], scope, memo);
    ir_valset_add(u ? &memo->yes : &memo->no, v);
    return u;
}

void ir_uniform_memo_free(ir_uniform_memo *memo) {
    ir_valset_free(&memo->yes);
    ir_valset_free(&memo->no);
}

/* ---- divergence of a task ------------------------------------------------------------ */

static void set_v(ir_divergence *d, const ir_value *v) {
    if (ir_valset_add(&d->varying, v))
        d->changed = true;
}

static void set_lin(ir_divergence *d, const ir_value *v) {
    if (ir_valset_add(&d->linear, v))
        d->changed = true;
}

const ir_op *ir_region_terminator(const ir_region *r) {
    const ir_op *t = r->last;
    return t && (t->code == IR_YIELD || t->code == IR_CONDITION) ? t : NULL;
}

bool ir_div_access_varying(const ir_divergence *d, const ir_op *access) {
    int rank = access->operands[0]->type->rank;
    for (int i = 0; i < rank; i++)
        if (ir_div_varying(d, access->operands[1 + i]))
            return true;
    return false;
}

static void mark_ad(ir_divergence *d, const ir_op *op, bool cv) {
    uint32_t s = (uint32_t)op->imm.i;
    if (cv && s < d->kernel->nadstacks && !d->ad_varying[s]) {
        d->ad_varying[s] = true;
        d->changed = true;
    }
}

bool ir_div_loop_divergent(const ir_divergence *d, const ir_op *loop) {
    if (loop->code == IR_FOR) {
        const ir_op *y = ir_region_terminator(loop->regions[0]);
        return ir_div_varying(d, loop->operands[0]) || ir_div_varying(d, loop->operands[1]) ||
               ((loop->attr & IR_FOR_EARLY_EXIT) && y && ir_div_varying(d, y->operands[0]));
    }
    const ir_op *c = ir_region_terminator(loop->regions[0]);
    return c && ir_div_varying(d, c->operands[0]);
}

/* One pass over r; cv: r runs under control flow that diverges. */
static void analyze(ir_divergence *d, const ir_region *r, bool cv) {
    ir_foreach_op(op, r) {
        switch (op->code) {
        case IR_CONST:
        case IR_DIM:
        case IR_YIELD:
        case IR_CONDITION:
        case IR_STORE:
        case IR_LANEMAX: break; /* one value in the lanes that run it together */
        case IR_LOAD:
            if (ir_div_access_varying(d, op))
                set_v(d, op->results[0]);
            break;
        case IR_ADPUSH: mark_ad(d, op, cv); break;
        case IR_ADPOP:
            mark_ad(d, op, cv);
            set_v(d, op->results[0]);
            break;
        case IR_IF: {
            bool c = ir_div_varying(d, op->operands[0]);
            analyze(d, op->regions[0], cv || c);
            analyze(d, op->regions[1], cv || c);
            const ir_op *yt = ir_region_terminator(op->regions[0]),
                        *ye = ir_region_terminator(op->regions[1]);
            for (uint32_t k = 0; k < op->nresults; k++)
                if (c || (yt && ir_div_varying(d, yt->operands[k])) ||
                    (ye && ir_div_varying(d, ye->operands[k])))
                    set_v(d, op->results[k]);
            break;
        }
        case IR_FOR: {
            const ir_region *body = op->regions[0];
            bool early = (op->attr & IR_FOR_EARLY_EXIT) != 0, masked = ir_div_loop_divergent(d, op);
            const ir_op *y = ir_region_terminator(body);
            /* a varying bound alone leaves the index uniform: lanes that run an iteration
             * together run it at one index (lo + the iteration's number) */
            if (ir_div_varying(d, op->operands[0]))
                set_v(d, body->args[0]);
            for (uint32_t k = 0; k < op->nresults; k++)
                if (masked || ir_div_varying(d, op->operands[2 + k]) ||
                    (y && ir_div_varying(d, y->operands[(early ? 1 : 0) + k]))) {
                    set_v(d, body->args[1 + k]);
                    set_v(d, op->results[k]);
                }
            analyze(d, body, cv || masked);
            break;
        }
        case IR_WHILE: {
            const ir_region *before = op->regions[0], *after = op->regions[1];
            bool masked = ir_div_loop_divergent(d, op);
            const ir_op *c = ir_region_terminator(before), *y = ir_region_terminator(after);
            for (uint32_t k = 0; k < op->noperands; k++)
                if (masked || ir_div_varying(d, op->operands[k]) ||
                    (y && ir_div_varying(d, y->operands[k])))
                    set_v(d, before->args[k]);
            for (uint32_t k = 0; k < op->nresults; k++)
                if (masked || (c && ir_div_varying(d, c->operands[1 + k]))) {
                    set_v(d, after->args[k]);
                    set_v(d, op->results[k]);
                }
            analyze(d, before, cv || masked);
            analyze(d, after, cv || masked);
            break;
        }
        case IR_CUSTOM: { /* conservatively: everything varies when an operand does */
            bool any = false;
            for (uint32_t i = 0; i < op->noperands; i++)
                any |= ir_div_varying(d, op->operands[i]);
            for (uint32_t ri = 0; any && ri < op->nregions; ri++)
                for (uint32_t i = 0; i < op->regions[ri]->nargs; i++)
                    set_v(d, op->regions[ri]->args[i]);
            for (uint32_t k = 0; any && k < op->nresults; k++)
                set_v(d, op->results[k]);
            analyze(d, op->regions[0], cv);
            analyze(d, op->regions[1], cv);
            break;
        }
        default:
            if (ir_is_atomic(op->code)) {
                set_v(d, op->results[0]);
                break;
            }
            for (uint32_t i = 0; i < op->noperands; i++)
                if (ir_div_varying(d, op->operands[i]))
                    for (uint32_t k = 0; k < op->nresults; k++)
                        set_v(d, op->results[k]);
            if (op->nresults != 1)
                break;
            if (op->code == IR_ADD &&
                ((ir_div_linear(d, op->operands[0]) && !ir_div_varying(d, op->operands[1])) ||
                 (ir_div_linear(d, op->operands[1]) && !ir_div_varying(d, op->operands[0]))))
                set_lin(d, op->results[0]);
            else if (op->code == IR_SUB && ir_div_linear(d, op->operands[0]) &&
                     !ir_div_varying(d, op->operands[1]))
                set_lin(d, op->results[0]);
            else if (op->code == IR_CAST && ir_div_linear(d, op->operands[0]) &&
                     ty_is_int(op->results[0]->type) && op->operands[0]->type->kind != TY_BOOL)
                set_lin(d, op->results[0]);
            break;
        }
    }
}

void ir_divergence_task(ir_divergence *d, const ir_kernel *k, const ir_op *task) {
    ir_valset_clear(&d->varying);
    ir_valset_clear(&d->linear);
    free(d->ad_varying);
    d->kernel = k;
    d->ad_varying = calloc(k->nadstacks + 1, sizeof *d->ad_varying);
    if (!d->ad_varying)
        kern_oom(k->nadstacks + 1);
    const ir_region *body = task->regions[0];
    const ir_value *index = body->args[body->nargs - 1];
    set_v(d, index);
    set_lin(d, index);
    do {
        d->changed = false;
        analyze(d, body, false);
    } while (d->changed);
}

void ir_divergence_free(ir_divergence *d) {
    ir_valset_free(&d->varying);
    ir_valset_free(&d->linear);
    free(d->ad_varying);
    memset(d, 0, sizeof *d);
}
