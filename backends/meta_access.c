/* meta_access.c - the access lines of the module metadata (runtime/meta.h): per array
 * parameter of a kernel, the elements a launch may read and those it may write, as one
 * index range per dimension over the kernel's scalar parameters and extents. The gradient
 * tape evaluates them at each launch to save what a launch overwrites of what an earlier
 * recorded launch read (runtime/tape_save.c; docs/autodiff.md, "What the tape saves").
 *
 * Every load, store and atomic of an array parameter contributes the range of each of its
 * indices (ad_value_range: exact for affine forms of scalar parameters, extents and
 * parallel or loop indices, such as x[t + 1, i]); the ranges of one parameter and kind are
 * joined per dimension, lo by min and hi by max (an identical bound once). A dimension
 * becomes whole (`*`) when an index has no such form (a loaded value, a loop-carried one)
 * or after MAX_JOINS different bounds; an array that any other op than these and `dim`
 * uses is read and written whole. Loads read, stores write, atomics do both. An enclosing
 * `if` is not looked at: a guarded access counts as if it always ran (a larger range,
 * never a smaller one). A kernel with a `grad G` clause reads every array whole: its
 * K.grad is G's code, which may read what K wrote. Derived kernels (K.grad, K.jvp) get no access lines: a reverse
 * tape records primal kernels, and a kernel without them counts as touching every array
 * whole. */
#include <stdlib.h>
#include <string.h>

#include "meta_ir.h"

#include "../passes/passes.h"

/* MAX_DEPTH keeps the printed trees within the parser's nesting limit (63) */
enum { MAX_JOINS = 16, MAX_DEPTH = 48 };

/* What the accesses of one kind to one array parameter cover so far. */
typedef struct box {
    bool any;                  /* an access was seen */
    bool whole[KERN_MAX_RANK]; /* dimension d: any index */
    int joins[KERN_MAX_RANK];
    sz_expr *lo[KERN_MAX_RANK], *hi[KERN_MAX_RANK];
} box;

static void make_whole(box *b) {
    b->any = true;
    for (int d = 0; d < KERN_MAX_RANK; d++)
        b->whole[d] = true;
}

/* x and y joined by min or max: x when the two are the same tree, folded when both are
 * constants. */
static sz_expr *join(arena *a, sz_op op, sz_expr *x, sz_expr *y) {
    if (x->op == SZ_CONST && y->op == SZ_CONST)
        return (op == SZ_MIN) == (x->v <= y->v) ? x : y;
    return sz_equal(x, y) ? x : sz_bin(a, op, x, y);
}

/* Adds the elements op touches (its array operand first, then one index per dimension). */
static void add_access(arena *a, const ir_kernel *k, const ir_op *op, int rank, box *b) {
    bool first = !b->any;
    b->any = true;
    for (int d = 0; d < rank; d++) {
        sz_expr *lo, *hi;
        if (b->whole[d])
            continue;
        if (!ad_value_range(k, op->operands[1 + d], a, &lo, &hi)) {
            b->whole[d] = true;
            continue;
        }
        if (first) {
            b->lo[d] = lo;
            b->hi[d] = hi;
            continue;
        }
        b->lo[d] = join(a, SZ_MIN, b->lo[d], lo);
        b->hi[d] = join(a, SZ_MAX, b->hi[d], hi);
        if (++b->joins[d] > MAX_JOINS || sz_depth(b->lo[d]) > MAX_DEPTH ||
            sz_depth(b->hi[d]) > MAX_DEPTH)
            b->whole[d] = true;
    }
}

static bool is_array_param(const ir_kernel *k, const ir_value *v) {
    return !v->def && v->region == k->body && ty_is_array(v->type);
}

static void walk(arena *a, const ir_kernel *k, const ir_region *r, box *reads, box *writes) {
    ir_foreach_op(op, r) {
        bool load = op->code == IR_LOAD, store = op->code == IR_STORE;
        bool atomic = ir_is_atomic(op->code);
        for (uint32_t i = 0; i < op->noperands; i++) {
            const ir_value *v = op->operands[i];
            if (!is_array_param(k, v))
                continue;
            uint32_t p = v->index;
            if (i == 0 && (load || store || atomic)) {
                if (load || atomic)
                    add_access(a, k, op, v->type->rank, &reads[p]);
                if (store || atomic)
                    add_access(a, k, op, v->type->rank, &writes[p]);
            } else if (op->code != IR_DIM) {
                make_whole(&reads[p]);
                make_whole(&writes[p]);
            }
        }
        for (uint32_t i = 0; i < op->nregions; i++)
            walk(a, k, op->regions[i], reads, writes);
    }
}

/* The access line of b, its trees copied into the metadata's arena. */
static kern_meta_access line_of(kern_meta *meta, const box *b, int param, bool write, int rank) {
    kern_meta_access acc = {.param = param, .write = write, .none = !b->any};
    for (int d = 0; b->any && d < rank; d++) {
        if (b->whole[d])
            continue;
        acc.lo[d] = sz_copy(&meta->mem, b->lo[d]);
        acc.hi[d] = sz_copy(&meta->mem, b->hi[d]);
    }
    return acc;
}

void kc_meta_access(kern_meta *meta, kern_meta_kernel *mk, const ir_kernel *k) {
    if (strchr(k->name, '.'))
        return; /* K.grad, K.jvp: a reverse tape records primal kernels only */
    size_t n = k->nparams ? k->nparams : 1;
    box *reads = calloc(n, sizeof *reads), *writes = calloc(n, sizeof *writes);
    mk->access = calloc(2 * n, sizeof *mk->access);
    if (!reads || !writes || !mk->access)
        kern_oom(2 * n * sizeof *mk->access);
    arena scratch;
    arena_init(&scratch);
    walk(&scratch, k, k->body, reads, writes);
    for (uint32_t p = 0; k->grad_kernel && p < k->nparams; p++)
        make_whole(&reads[p]); /* K.grad is G, which may read anything, what K wrote too */
    for (uint32_t p = 0; p < k->nparams; p++) {
        const kern_type *t = k->params[p].type;
        if (!ty_is_array(t))
            continue;
        mk->access[mk->naccess++] = line_of(meta, &reads[p], (int)p, false, t->rank);
        mk->access[mk->naccess++] = line_of(meta, &writes[p], (int)p, true, t->rank);
    }
    arena_free(&scratch);
    free(reads);
    free(writes);
}
