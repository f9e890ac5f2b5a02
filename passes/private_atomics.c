/* private_atomics.c - atomics on elements that only one thread touches become plain
 * read-modify-writes (ir_opt_private_atomics).
 *
 * What: an atomic (add, sub, min, max, xchg) becomes `load` + the update + `store` (the
 * old value, when used, is the load) when no other thread can touch the element at the
 * same time:
 *   - in a SERIAL task, always (one thread runs it);
 *   - in a PARALLEL task, when every access (load, store, atomic) of the same array in
 *     the task has each of the task's parallel indices, unchanged, as its index in one
 *     dimension, the same dimension in every access (x[i] in a 1-D task, x.grad[t - 1, i]
 *     in a 1-D task over i, u[i, j] or u[t, i, j] in a 2-D task over i, j): then the
 *     elements a thread touches carry its own index tuple, and no other thread touches
 *     them.
 * `x[i] += v` in the language is an atomic (two iterations may update one element), and
 * the gradient of a load is an atomic add into the .grad array; both are the common
 * cases this turns into plain code that vectorizes.
 *
 * Where: compiler/driver.c runs it once, after the gradient kernels are built (the
 * gradient transform must see `+=` as an atomic: its adjoint rule differs from a
 * store's), at optimization levels 1 and above. Requires a verified module; keeps every
 * invariant. Float min/max keep the tie rule of ops.def (operand 0, the old value, on
 * ties), the same as the backend's compare-exchange loop.
 *
 * Cost: linear in the task's size per distinct array that its atomics update (the
 * privacy of an array is decided once per task and kept), and the old values' uses are
 * replaced in one walk of the task at the end (ir_subst), not one walk per atomic. */
#include <stdlib.h>

#include "passes.h"

typedef struct scan {
    const ir_value *array;
    const ir_region *body;  /* the parallel task's body: its arguments are the indices */
    int pos[KERN_MAX_RANK]; /* per parallel dimension: the array dimension holding it;
                               -1 until the first access fixes it */
    bool private;
} scan;


/* Whether access op holds every parallel index in the dimensions fixed by the first
 * access seen (which fixes them). */
static bool owned(const ir_op *op, scan *s) {
    uint32_t nidx = ir_access_nidx(op);
    for (uint32_t d = 0; d < s->body->nargs; d++) {
        const ir_value *index = s->body->args[d];
        if (s->pos[d] < 0) {
            for (uint32_t p = 0; p < nidx && s->pos[d] < 0; p++)
                if (op->operands[1 + p] == index)
                    s->pos[d] = (int)p;
            if (s->pos[d] < 0)
                return false;
        } else if ((uint32_t)s->pos[d] >= nidx || op->operands[1 + s->pos[d]] != index) {
            return false;
        }
    }
    return true;
}

static void check_accesses(const ir_region *r, scan *s) {
    ir_foreach_op(op, r) {
        if (ir_is_access(op->code) && op->operands[0] == s->array && !owned(op, s))
            s->private = false;
        for (uint32_t i = 0; i < op->nregions && s->private; i++)
            check_accesses(op->regions[i], s);
        if (!s->private)
            return;
    }
}

static ir_opcode update_of(ir_opcode c) {
    switch (c) {
    case IR_ATOMIC_ADD: return IR_ADD;
    case IR_ATOMIC_SUB: return IR_SUB;
    case IR_ATOMIC_MIN: return IR_MIN;
    case IR_ATOMIC_MAX: return IR_MAX;
    default: return IR__COUNT; /* xchg: the new value itself */
    }
}

/* The privacy of each array the task's atomics update, decided once per array. */
typedef struct verdicts {
    const ir_value **array;
    bool *private;
    int len, cap;
} verdicts;

static bool array_private(verdicts *v, const ir_op *task, const ir_value *array) {
    for (int i = 0; i < v->len; i++)
        if (v->array[i] == array)
            return v->private[i];
    scan s = {.array = array, .private = true};
    if (task->code == IR_PARALLEL) {
        s.body = task->regions[0];
        if (s.body->nargs > KERN_MAX_RANK)
            s.private = false;
        for (int d = 0; d < KERN_MAX_RANK; d++)
            s.pos[d] = -1;
        if (s.private)
            check_accesses(task->regions[0], &s);
    }
    if (v->len == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 8;
        v->array = kern_xrealloc(v->array, sizeof *v->array * (size_t)v->cap);
        v->private = kern_xrealloc(v->private, sizeof *v->private * (size_t)v->cap);
    }
    v->array[v->len] = array;
    v->private[v->len++] = s.private;
    return s.private;
}

static bool rewrite_region(ir_module *m, ir_region *r, const ir_op *task, verdicts *vd,
                           ir_subst *sub) {
    bool changed = false;
    ir_foreach_op_safe(op, next, r) {
        for (uint32_t i = 0; i < op->nregions; i++)
            changed |= rewrite_region(m, op->regions[i], task, vd, sub);
        if (!ir_is_access(op->code) || op->code == IR_LOAD || op->code == IR_STORE)
            continue;
        if (!array_private(vd, task, op->operands[0]))
            continue;
        ir_builder b = ir_builder_before(m, op);
        uint32_t nidx = op->noperands - 2;
        ir_value *v = op->operands[op->noperands - 1];
        ir_value *old = ir_load(&b, op->operands[0], op->operands + 1, nidx);
        ir_opcode u = update_of(op->code);
        ir_value *nv;
        if (old->type != v->type) /* an f32 added into an f16/bf16 element (autodiff) */
            nv = ir_cast(&b, old->type, ir_binop(&b, u, ir_cast(&b, v->type, old), v));
        else
            nv = u == IR__COUNT ? v : ir_binop(&b, u, old, v);
        ir_store(&b, op->operands[0], op->operands + 1, nidx, nv);
        ir_subst_add(sub, op->results[0], old);
        ir_remove(op);
        changed = true;
    }
    return changed;
}

bool ir_opt_private_atomics(ir_module *m) {
    bool changed = false;
    verdicts v = {0};
    ir_subst sub = {0};
    ir_foreach_kernel(k, m) {
        ir_subst_begin(&sub, k);
        ir_foreach_op(op, k->body) {
            if (op->code != IR_PARALLEL && op->code != IR_SERIAL)
                continue;
            v.len = 0;
            if (rewrite_region(m, op->regions[0], op, &v, &sub)) {
                ir_subst_apply(&sub, op->regions[0]);
                changed = true;
            }
        }
    }
    free(v.array);
    free(v.private);
    ir_subst_free(&sub);
    return changed;
}
