/* trip_sort.c - which parallel tasks run their work items sorted by a loop's trip count,
 * and how that count is computed ahead (ir_trip_sort_plan; the CPU's SIMD code sorts each
 * window of items, docs/backend-cpu.md, the GPUs each block's, docs/backend-gpu.md).
 *
 * A group of work items that runs together (a SIMD vector, a warp, a subgroup) runs a
 * loop as long as its longest item. Where trip counts differ a lot between items, the
 * group is nearly always held up by one long item; sorted by trip count, groups run
 * similar counts. The plan: the first masked `for` loop (a trip count that differs
 * between items) with varying math or at least HEAVY_OPS ops in its body, at the top level
 * of the task's body, whose
 * bounds are made, by integer ops that cannot fault, of the task's indices, uniform values
 * and loads (which the backend runs as loads of the in-bounds items only). */
#include <string.h>

#include "passes.h"

/* A loop body of at least this many ops (nested ones included) is worth sorting for, with
 * or without math: kern's own sin (passes/lower_libm.c, Vulkan's) is about 30 ops. */
enum { HEAVY_OPS = 16 };

/* Whether r (or a region in it) computes math of a library (sin, exp, ...) on varying
 * values; *ops counts its ops. */
static bool varying_math(const ir_divergence *d, const ir_region *r, int *ops) {
    bool math = false;
    ir_foreach_op(op, r) {
        (*ops)++;
        if ((ir_info(op->code)->flags & OPF_LIBM) && ir_div_varying(d, op->results[0]))
            math = true;
        for (uint32_t i = 0; i < op->nregions; i++)
            math |= varying_math(d, op->regions[i], ops);
    }
    return math;
}

/* Whether op may compute a trip count before the body runs: an integer op that cannot
 * fault (a load runs as a gather that leaves out-of-bounds lanes, llvm_simd_emit.c). */
static bool key_opcode(const ir_op *op) {
    switch (op->code) {
    case IR_CONST:
    case IR_DIM:
    case IR_LOAD:
    case IR_CAST:
    case IR_ADD:
    case IR_SUB:
    case IR_MUL:
    case IR_NEG:
    case IR_AND:
    case IR_OR:
    case IR_XOR:
    case IR_NOT:
    case IR_EQ:
    case IR_NE:
    case IR_LT:
    case IR_LE:
    case IR_GT:
    case IR_GE:
    case IR_SELECT:
    case IR_MIN:
    case IR_MAX:
    case IR_CLAMP: break;
    default: return false;
    }
    for (uint32_t i = op->code == IR_LOAD || op->code == IR_DIM ? 1 : 0; i < op->noperands; i++)
        if (!ty_is_int(op->operands[i]->type) && op->operands[i]->type->kind != TY_BOOL)
            return false;
    return ty_is_int(op->results[0]->type) || op->results[0]->type->kind == TY_BOOL;
}

/* Adds the ops of body's top level that v is computed from to s->ops (false: one of them
 * cannot run before the body, or there are too many). Values from outside the body (the
 * task's uniform values) and region arguments (its indices) are there already. */
static bool key_ops(const ir_region *body, const ir_value *v, ir_trip_sort *s) {
    const ir_op *def = v->def;
    if (!def || def->parent != body)
        return true;
    for (uint32_t i = 0; i < s->nops; i++)
        if (s->ops[i] == def)
            return true;
    if (!key_opcode(def) || s->nops == IR_TRIP_SORT_OPS)
        return false;
    s->ops[s->nops++] = def;
    for (uint32_t i = 0; i < def->noperands; i++)
        if (!key_ops(body, def->operands[i], s))
            return false;
    return true;
}

/* A store of a varying value to a uniform element: the lanes store in lane order (the
 * last one's value stays), which sorting would change. */
static bool lane_ordered_store(const ir_divergence *d, const ir_region *r) {
    ir_foreach_op(op, r) {
        if (op->code == IR_STORE && !ir_div_access_varying(d, op) &&
            ir_div_varying(d, op->operands[op->noperands - 1]))
            return true;
        for (uint32_t i = 0; i < op->nregions; i++)
            if (lane_ordered_store(d, op->regions[i]))
                return true;
    }
    return false;
}

bool ir_trip_sort_plan(const ir_divergence *d, const ir_region *body, ir_trip_sort *s) {
    memset(s, 0, sizeof *s);
    if (lane_ordered_store(d, body))
        return false;
    ir_foreach_op(op, body) {
        if (op->code != IR_FOR || !ir_div_loop_divergent(d, op))
            continue;
        s->nops = 0;
        int ops = 0;
        bool math = varying_math(d, op->regions[0], &ops);
        if ((math || ops >= HEAVY_OPS) && key_ops(body, op->operands[0], s) &&
            key_ops(body, op->operands[1], s)) {
            s->loop = op;
            /* in body order */
            uint32_t n = 0;
            const ir_op *sorted[IR_TRIP_SORT_OPS];
            ir_foreach_op(o, body) for (uint32_t i = 0; i < s->nops; i++) if (s->ops[i] == o)
                sorted[n++] = o;
            memcpy(s->ops, sorted, n * sizeof *sorted);
            return true;
        }
    }
    return false;
}
