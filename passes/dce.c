/* dce.c - dead code elimination (ir_opt_dce).
 *
 * What: removes
 *   - pure ops and loads whose results are unused (a load has no side effect; only its
 *     debug-mode bounds check goes with it, as a C compiler drops a dead read);
 *   - results of `if` that are unused, with their yield operands;
 *   - carried values of `for` whose result is unused and whose body argument is used
 *     only to compute its own next value (the result, the init, the body argument and
 *     the yield operand go together);
 *   - `if` and `for` ops that have no used result and no side effect inside them (so an
 *     `if` with no results and empty regions, and a side-effect-free loop, disappear).
 *   - the adstacks none of whose pops has a used result, with all their pushes and pops
 *     (kepler.grad pushed the loop's step `d`, used only in the loop's condition, and
 *     popped it for nothing), except one per loop (a stack's location is its loop's) when
 *     none of the loop's is read: the loop's capacity check stays; the kernel's adstack
 *     table is renumbered.
 * Never removed: `while` loops (their termination is observable), stores, atomics (even
 * with an unused result), the pushes and pops of an adstack that has a used pop (an
 * unused pop still pops: the pushes and pops of a work item stay balanced), tasks,
 * terminators, kernel parameters.
 *
 * Algorithm: mark and sweep (aggressive DCE), so that chains of dead values, dead
 * carried values feeding each other, and ops that become dead when a loop or if goes
 * are all removed in one run: the fixed point "inside regions" is reached at once.
 *   mark:  roots are the ops with side effects (store, atomics, while, tasks, checks), and
 *          the pushes and pops of an adstack once a pop of it has a live result. A live op
 *          makes its operands live and its enclosing if/for live; a live if/for makes its
 *          control operands live (cond; lo, hi and an early-exit `go on` value). A live
 *          result i of an if makes the yield operands i live; a live result or body
 *          argument of carried value k of a for makes both live, with init k and yield
 *          operand k. A while keeps all its carried values and terminator operands.
 *   sweep: unlink every non-terminator op that is not live, and shrink the live ifs and
 *          fors to their live results / carried values.
 * Liveness is kept in the scratch fields: value->id and op->id (1 = live).
 *
 * Where: ir_optimize()'s fixed-point loop, last. Requires a verified module. Keeps valid:
 * the verifier's invariants (results, region arguments and yield operands are removed
 * together and indices renumbered). Never frees IR memory (the worklist is malloc'd). */
#include <stdlib.h>

#include "opt_util.h"
#include "passes.h"

typedef struct marker {
    kern_ptrvec work; /* values made live, whose consequences are not yet marked */
} marker;

static void clear_region(ir_region *r);

static void clear_op(ir_op *op) {
    op->id = 0;
    for (uint32_t i = 0; i < op->nresults; i++)
        op->results[i]->id = 0;
    for (uint32_t i = 0; i < op->nregions; i++)
        clear_region(op->regions[i]);
}

static void clear_region(ir_region *r) {
    for (uint32_t i = 0; i < r->nargs; i++)
        r->args[i]->id = 0;
    ir_foreach_op(op, r)
        clear_op(op);
}

static ir_op *terminator(const ir_region *r) {
    return r->last && (ir_info(r->last->code)->flags & OPF_TERM) ? r->last : NULL;
}

static bool early_exit(const ir_op *op) {
    return op->code == IR_FOR && (op->attr & IR_FOR_EARLY_EXIT);
}

static void mark_value(marker *mk, ir_value *v) {
    if (!v || v->id)
        return;
    v->id = 1;
    ptrvec_push(&mk->work, v);
}

static void mark_all_operands(marker *mk, ir_op *op) {
    for (uint32_t i = 0; i < op->noperands; i++)
        mark_value(mk, op->operands[i]);
}

/* Marks op live, with what any live op of its kind needs, and its enclosing ops. */
static void mark_op(marker *mk, ir_op *op) {
    for (; op && !op->id; op = op->parent ? op->parent->parent : NULL) {
        op->id = 1;
        switch (op->code) {
        case IR_IF: mark_value(mk, op->operands[0]); break;
        case IR_FOR: {
            mark_value(mk, op->operands[0]);
            mark_value(mk, op->operands[1]);
            ir_op *y = terminator(op->regions[0]);
            if (early_exit(op) && y && y->noperands > 0)
                mark_value(mk, y->operands[0]);
            break;
        }
        case IR_WHILE:
        case IR_CUSTOM: /* all of it: its regions' yields are its results and adjoints */
            mark_all_operands(mk, op);
            for (uint32_t i = 0; i < op->nregions; i++) {
                ir_op *t = terminator(op->regions[i]);
                if (t)
                    mark_all_operands(mk, t);
            }
            break;
        default: mark_all_operands(mk, op); break;
        }
    }
}

/* Carried value k of a live-to-be for: its result, body argument, init and yield. */
static void mark_carried(marker *mk, ir_op *f, uint32_t k) {
    ir_region *body = f->regions[0];
    f->results[k]->id = 1;
    body->args[k + 1]->id = 1;
    mark_value(mk, f->operands[2 + k]);
    ir_op *y = terminator(body);
    uint32_t yi = k + (early_exit(f) ? 1 : 0);
    if (y && yi < y->noperands)
        mark_value(mk, y->operands[yi]);
    mark_op(mk, f);
}

/* What follows from v being live. */
static void propagate(marker *mk, ir_value *v) {
    ir_op *def = v->def;
    if (def) {
        if (def->code == IR_IF) {
            for (uint32_t r = 0; r < def->nregions; r++) {
                ir_op *y = terminator(def->regions[r]);
                if (y && v->index < y->noperands)
                    mark_value(mk, y->operands[v->index]);
            }
            mark_op(mk, def);
        } else if (def->code == IR_FOR)
            mark_carried(mk, def, v->index);
        else
            mark_op(mk, def);
        return;
    }
    ir_op *owner = v->region ? v->region->parent : NULL;
    if (owner && owner->code == IR_FOR && v->index >= 1)
        mark_carried(mk, owner, v->index - 1);
    /* Other arguments (kernel parameters, loop and task indices, while values) are live
     * through their users, whose enclosing ops are marked with them. */
}

static bool is_root(const ir_op *op) {
    switch (op->code) {
    case IR_STORE: case IR_ATOMIC_ADD: case IR_ATOMIC_SUB: case IR_ATOMIC_MIN:
    case IR_ATOMIC_MAX:
    case IR_ATOMIC_XCHG:
    case IR_ATOMIC_CAS:
    case IR_WHILE:
    case IR_PARALLEL:
    case IR_SERIAL:
    case IR_CHECK: /* records an error */
        return true;
    /* live with their stack (live_stacks): an unused adpop still pops, so pushes and pops
     * of a work item stay balanced */
    case IR_ADPUSH:
    case IR_ADPOP:
    case IR_CONST: case IR_LOAD: case IR_IF: case IR_FOR: case IR_YIELD: case IR_CONDITION:
    case IR_CUSTOM: /* pure apart from its regions: live through its results */ return false;
    default: return !(ir_info(op->code)->flags & OPF_PURE);
    }
}

static void mark_roots(marker *mk, ir_region *r) {
    ir_foreach_op(op, r) {
        if (is_root(op))
            mark_op(mk, op);
        for (uint32_t i = 0; i < op->nregions; i++)
            mark_roots(mk, op->regions[i]);
    }
}

/* ---- sweep ----------------------------------------------------------------------------- */

static void drop_operand(ir_op *op, uint32_t i) {
    for (uint32_t j = i + 1; j < op->noperands; j++)
        op->operands[j - 1] = op->operands[j];
    op->noperands--;
}

static void drop_result(ir_op *op, uint32_t i) {
    for (uint32_t j = i + 1; j < op->nresults; j++) {
        op->results[j - 1] = op->results[j];
        op->results[j - 1]->index = j - 1;
    }
    op->nresults--;
}

static void drop_arg(ir_region *r, uint32_t i) {
    for (uint32_t j = i + 1; j < r->nargs; j++) {
        r->args[j - 1] = r->args[j];
        r->args[j - 1]->index = j - 1;
    }
    r->nargs--;
}

static bool shrink_if(ir_op *op) {
    bool changed = false;
    for (uint32_t i = op->nresults; i-- > 0;) {
        if (op->results[i]->id)
            continue;
        for (uint32_t r = 0; r < op->nregions; r++) {
            ir_op *y = terminator(op->regions[r]);
            if (y && i < y->noperands)
                drop_operand(y, i);
        }
        drop_result(op, i);
        changed = true;
    }
    return changed;
}

static bool shrink_for(ir_op *op) {
    bool changed = false;
    ir_region *body = op->regions[0];
    ir_op *y = terminator(body);
    uint32_t skip = early_exit(op) ? 1 : 0;
    for (uint32_t k = op->nresults; k-- > 0;) {
        if (op->results[k]->id || body->args[k + 1]->id)
            continue;
        if (y && k + skip < y->noperands)
            drop_operand(y, k + skip);
        drop_operand(op, 2 + k);
        drop_arg(body, k + 1);
        drop_result(op, k);
        changed = true;
    }
    return changed;
}

static bool sweep_region(ir_region *r) {
    bool changed = false;
    ir_foreach_op_safe(op, tmp, r) {
        if (ir_info(op->code)->flags & OPF_TERM)
            continue;
        if (!op->id) {
            ir_remove(op);
            changed = true;
            continue;
        }
        if (op->code == IR_IF)
            changed |= shrink_if(op);
        else if (op->code == IR_FOR)
            changed |= shrink_for(op);
        for (uint32_t i = 0; i < op->nregions; i++)
            changed |= sweep_region(op->regions[i]);
    }
    return changed;
}

/* ---- adstacks ------------------------------------------------------------------------- */

/* Marks the pushes and pops of the stacks that a live pop has made live (live[s] 1: newly,
 * made 2 here); returns whether any stack became live. */
static bool mark_stack_ops(marker *mk, ir_region *r, uint8_t *live, bool find) {
    bool any = false;
    ir_foreach_op(op, r) {
        if (op->code == IR_ADPOP || op->code == IR_ADPUSH) {
            uint32_t s = (uint32_t)op->imm.i;
            if (find && op->code == IR_ADPOP && !live[s] && op->results[0]->id) {
                live[s] = 1;
                any = true;
            }
            if (!find && live[s] == 1)
                mark_op(mk, op);
        }
        for (uint32_t i = 0; i < op->nregions; i++)
            any |= mark_stack_ops(mk, op->regions[i], live, find);
    }
    return any;
}

static void renumber_stacks(ir_region *r, const uint32_t *to) {
    ir_foreach_op(op, r) {
        if (op->code == IR_ADPOP || op->code == IR_ADPUSH)
            op->imm.i = to[op->imm.i];
        for (uint32_t i = 0; i < op->nregions; i++)
            renumber_stacks(op->regions[i], to);
    }
}

/* Marks k's live ops: the roots, and the stacks that a live pop makes live, to a fixed
 * point; *live gets per stack whether it is. */
static bool same_loop(const ir_adstack *a, const ir_adstack *b) {
    return a->loc.line == b->loc.line && a->loc.col == b->loc.col;
}

/* A loop none of whose stacks is live keeps its first one (live[s] = 1): its capacity
 * still bounds the loop, so a `while` loop that runs past --ad-stack-size reports the
 * overflow whether or not its adjoint reads the values (a linear loop's does not). */
static bool keep_one_per_loop(const ir_kernel *k, uint8_t *live) {
    bool any = false;
    for (uint32_t s = 0; s < k->nadstacks; s++) {
        bool first = true, kept = false;
        for (uint32_t t = 0; t < k->nadstacks; t++)
            if (t != s && same_loop(&k->adstacks[t], &k->adstacks[s])) {
                kept |= live[t] != 0;
                first &= t > s;
            }
        if (!live[s] && !kept && first) {
            live[s] = 1;
            any = true;
        }
    }
    return any;
}

static void mark_kernel(marker *mk, ir_kernel *k, uint8_t *live) {
    mark_roots(mk, k->body);
    for (;;) {
        while (mk->work.len > 0)
            propagate(mk, mk->work.data[--mk->work.len]);
        if (!mark_stack_ops(mk, k->body, live, true) && !keep_one_per_loop(k, live))
            break;
        mark_stack_ops(mk, k->body, live, false);
        for (uint32_t s = 0; s < k->nadstacks; s++)
            live[s] = live[s] ? 2 : 0;
    }
}

/* Drops the dead stacks from k's table (their ops are swept): the others move down. */
static bool drop_stacks(ir_kernel *k, const uint8_t *live) {
    uint32_t *to = malloc((k->nadstacks + 1) * sizeof *to), n = 0;
    if (!to)
        kern_oom(k->nadstacks * sizeof *to);
    for (uint32_t s = 0; s < k->nadstacks; s++) {
        to[s] = n;
        if (live[s])
            k->adstacks[n++] = k->adstacks[s];
    }
    bool changed = n < k->nadstacks;
    if (changed) {
        renumber_stacks(k->body, to);
        k->nadstacks = n;
    }
    free(to);
    return changed;
}

bool ir_opt_dce(ir_module *m) {
    bool changed = false;
    marker mk = {{0}};
    ir_foreach_kernel(k, m) {
        uint8_t *live = calloc(k->nadstacks + 1, 1);
        if (!live)
            kern_oom(k->nadstacks + 1);
        clear_region(k->body);
        mark_kernel(&mk, k, live);
        changed |= sweep_region(k->body);
        changed |= drop_stacks(k, live);
        free(live);
    }
    ptrvec_free(&mk.work);
    return changed;
}
