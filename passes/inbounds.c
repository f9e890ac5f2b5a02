/* inbounds.c - accesses that are in bounds by construction (passes.h: ir_index_in_dim).
 *
 * An index proven in 0..dim(a, d) needs no bounds check on any target: the index of a `for`
 * or a parallel task from 0 to dim(a, d) (`for t in 0..len(w) { w[t] }`), and the reverse
 * sweep's dim(a, d) - 1 - r over such an r (`K.grad`'s `w[N - 1 - r]`). The SPIR-V emitter
 * leaves the check out of these (the LLVM targets prove them, and more, at run time:
 * backends/llvm/llvm_chunk.c). */
#include "passes.h"

/* v is the constant 0 */
static bool is_zero(const ir_value *v) {
    return v->def && v->def->code == IR_CONST && ty_is_int(v->type) && v->def->imm.i == 0;
}

/* v is dim(a, d) */
static bool is_dim(const ir_value *v, const ir_value *a, int d) {
    return v->def && v->def->code == IR_DIM && v->def->operands[0] == a && v->def->imm.i == d;
}

/* v is an index of a loop or task that runs from 0 to some n: *n */
static bool counter(const ir_value *v, const ir_value **n) {
    if (v->def || !v->region || !v->region->parent)
        return false;
    const ir_op *o = v->region->parent;
    if (o->code == IR_FOR && v->index == 0 && is_zero(o->operands[0])) {
        *n = o->operands[1];
        return true;
    }
    if (o->code == IR_PARALLEL && o->regions[0] == v->region && v->index < o->regions[0]->nargs &&
        is_zero(o->operands[2 * v->index])) {
        *n = o->operands[2 * v->index + 1];
        return true;
    }
    return false;
}

bool ir_index_in_dim(const ir_value *idx, const ir_value *a, int d) {
    const ir_value *n;
    if (counter(idx, &n)) /* 0 <= idx < n = dim(a, d) */
        return is_dim(n, a, d);
    /* (dim(a, d) - 1) - r with 0 <= r < dim(a, d): in 0 .. dim(a, d) - 1 */
    const ir_op *s = idx->def;
    if (!s || s->code != IR_SUB || !counter(s->operands[1], &n) || !is_dim(n, a, d))
        return false;
    const ir_op *top = s->operands[0]->def;
    return top && top->code == IR_SUB && top->operands[0] == n && top->operands[1]->def &&
           top->operands[1]->def->code == IR_CONST && top->operands[1]->def->imm.i == 1;
}
