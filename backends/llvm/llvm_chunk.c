/* llvm_chunk.c - checked code that tests the ranges of its accesses once (llvm_internal.h,
 * llvm_emit_tested): the CPU per chunk of work items (llvm_cpu.c), the GPU per work item
 * (llvm_gpu.c).
 *
 * Checked code tests every access: on the CPU's scalar path its branches to the error call
 * keep LLVM's loop vectorizer from the work-item loop (2 to 6 times slower), on the SIMD
 * path and on the GPU each access pays a compare and a branch (every step of a loop over
 * w[t]). The accesses that index each dimension with a value whose range over the items
 * is known before them (a uniform value, a task index, an index of a `for` with uniform
 * bounds, and sums and differences of those, narrowed by the `if`s around the access) are
 * tested once: all in range (or no item), the items run without those accesses' checks
 * (without any check when every access is tested and the task has no `check` op:
 * divisions, shifts); else the checked items run, which report the first bad access as
 * before. The items are emitted twice, behind one branch (blocks `chunk.unchecked` and
 * `chunk.checked`). */
#include <stdlib.h>
#include <string.h>

#include "llvm_internal.h"

/* What the `if`s around an access tell of an integer value v there: v >= b (GE), v <= b
 * (LE) or v != b (NE), b an i64 computed at the function's start. */
typedef enum { BOUND_GE, BOUND_LE, BOUND_NE } bound_kind;
typedef struct bound {
    const ir_value *v;
    bound_kind kind;
    LLVMValueRef b;
} bound;

/* A loop's pushes onto or pops off one adstack: how often they can run at most (i64 sums
 * over the ops of the iterations each op's `if`s allow), and the ops. */
typedef struct stack_use {
    LLVMValueRef pushes, pops;
    const ir_op **ops;
    uint32_t nops, capops;
    bool unknown; /* an op whose count is not known: the stack keeps its checks */
    bool proven;  /* tested: its ops are proven */
} stack_use;

typedef struct chunk {
    llvm_emitter *em;
    const ir_op *task;
    const LLVMValueRef *lo, *hi; /* per dimension: the items' least and greatest index, i64 */
    LLVMValueRef ok;             /* i1: every access seen so far in range */
    bound *bounds;               /* the `if` conditions on the way to the current region */
    uint32_t nbounds, capbounds;
    const ir_op **proven; /* the accesses whose ranges are tested */
    uint32_t nproven, capproven;
    bool all; /* every access is, and there is no `check` op */
    const ir_op *loop; /* a loop's test (llvm_emit_tested_loop): values defined outside it
                          are known before it; else the items' test */
    bool accesses;     /* test the accesses' ranges (checked code) */
    LLVMValueRef runs; /* a while loop's test: how often its after-region runs at most (i64) */
    stack_use *stacks; /* a loop's test: per adstack, its pushes and pops in the loop (NULL:
                          none tested) */
} chunk;

/* Whether v is defined inside op (in one of its regions, at any depth). */
static bool inside_op(const ir_value *v, const ir_op *op) {
    for (const ir_region *r = v->def ? v->def->parent : v->region; r;
         r = r->parent ? r->parent->parent : NULL)
        if (r->parent == op)
            return true;
    return false;
}

/* v known before the items (a parameter, a top-level value; in a loop's test, any value
 * defined outside the loop), or computed from such values by a constant, a parameter's
 * extent or an add/sub/mul/integer cast, emitted here once more; else NULL. */
static LLVMValueRef chunk_uniform(const chunk *c, const ir_value *v, int depth) {
    llvm_emitter *em = c->em;
    const ir_op *d = v->def;
    if (c->loop && !inside_op(v, c->loop))
        return llvm_val(em, v);
    if (!d)
        return v->region == em->kernel->body ? llvm_val(em, v) : NULL;
    if (d->parent == em->kernel->body)
        return llvm_val(em, v);
    if (depth > 8 || !ty_is_int(v->type))
        return NULL;
    if (d->code == IR_DIM) { /* an extent of a parameter */
        if (d->operands[0]->def || d->operands[0]->region != em->kernel->body)
            return NULL;
    } else if (d->code == IR_CONST || d->code == IR_ADD || d->code == IR_SUB || d->code == IR_MUL ||
               (d->code == IR_CAST && ty_is_int(d->operands[0]->type))) {
        for (uint32_t i = 0; i < d->noperands; i++)
            if (!chunk_uniform(c, d->operands[i], depth + 1))
                return NULL;
    } else {
        return NULL;
    }
    llvm_emit_simple_op(em, d);
    return llvm_val(em, v);
}

static bool chunk_range(chunk *c, const ir_value *v, LLVMValueRef *lo, LLVMValueRef *hi, int depth);

/* v's range from its definition alone. */
static bool range_of(chunk *c, const ir_value *v, LLVMValueRef *lo, LLVMValueRef *hi, int depth) {
    llvm_emitter *em = c->em;
    LLVMValueRef one = LLVMConstInt(em->t_i64, 1, 0);
    const ir_region *body = c->task->regions[0];
    if (!v->def && v->region == body && !c->loop) { /* a task index */
        *lo = c->lo[v->index], *hi = c->hi[v->index];
        return true;
    }
    if (!v->def && v->region->parent && v->region->parent->code == IR_FOR && v->index == 0) {
        const ir_op *f = v->region->parent; /* a for's index: its bounds, when uniform */
        LLVMValueRef a = chunk_uniform(c, f->operands[0], 0),
                     b = chunk_uniform(c, f->operands[1], 0);
        if (!a || !b)
            return false;
        *lo = llvm_to_i64(em, a, v->type);
        *hi = LLVMBuildSub(em->b, llvm_to_i64(em, b, v->type), one, "");
        return true;
    }
    LLVMValueRef u = chunk_uniform(c, v, 0);
    if (u) {
        *lo = *hi = llvm_to_i64(em, u, v->type);
        return true;
    }
    const ir_op *d = v->def;
    if (!d || depth > 8 || (d->code != IR_ADD && d->code != IR_SUB) || ty_is_unsigned(v->type))
        return false;
    LLVMValueRef alo, ahi, blo, bhi;
    if (!chunk_range(c, d->operands[0], &alo, &ahi, depth + 1) ||
        !chunk_range(c, d->operands[1], &blo, &bhi, depth + 1))
        return false;
    if (d->code == IR_ADD) {
        *lo = LLVMBuildAdd(em->b, alo, blo, "");
        *hi = LLVMBuildAdd(em->b, ahi, bhi, "");
    } else {
        *lo = LLVMBuildSub(em->b, alo, bhi, "");
        *hi = LLVMBuildSub(em->b, ahi, blo, "");
    }
    return true;
}

/* Whether integer values of type t compare alike as i64s. */
static bool fits_i64(const kern_type *t) {
    return ty_is_int(t) && (!ty_is_unsigned(t) || ty_size(t) < 8);
}

/* The least and greatest value (i64) of integer index v over the chunk where it is used,
 * inside the `if`s of c->bounds; false when unknown. An empty range (lo > hi) means that
 * no item of the chunk gets there. */
static bool chunk_range(chunk *c, const ir_value *v, LLVMValueRef *lo, LLVMValueRef *hi,
                        int depth) {
    llvm_emitter *em = c->em;
    bool ge = false, le = false;
    for (uint32_t i = 0; i < c->nbounds; i++)
        if (c->bounds[i].v == v)
            ge |= c->bounds[i].kind == BOUND_GE, le |= c->bounds[i].kind == BOUND_LE;
    if (!range_of(c, v, lo, hi, depth)) {
        if (!ge || !le || !fits_i64(v->type)) /* a value the `if`s bound on both sides */
            return false;
        *lo = LLVMConstInt(em->t_i64, (unsigned long long)INT64_MIN, 1);
        *hi = LLVMConstInt(em->t_i64, INT64_MAX, 0);
    }
    LLVMValueRef one = LLVMConstInt(em->t_i64, 1, 0);
    for (int pass = 0; pass < 2; pass++) /* the != bounds after the others */
        for (uint32_t i = 0; i < c->nbounds; i++) {
            const bound *b = &c->bounds[i];
            if (b->v != v || (b->kind == BOUND_NE) != (pass == 1))
                continue;
            if (b->kind == BOUND_GE) {
                *lo = LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntSGT, b->b, *lo, ""), b->b,
                                      *lo, "");
            } else if (b->kind == BOUND_LE) {
                *hi = LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntSLT, b->b, *hi, ""), b->b,
                                      *hi, "");
            } else {
                LLVMValueRef l = *lo;
                *lo = LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntEQ, l, b->b, ""),
                                      LLVMBuildAdd(em->b, l, one, ""), l, "");
                *hi = LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntEQ, *hi, b->b, ""),
                                      LLVMBuildSub(em->b, *hi, one, ""), *hi, "");
            }
        }
    return true;
}

static void push_bound(chunk *c, const ir_value *v, bound_kind kind, LLVMValueRef b) {
    if (c->nbounds == c->capbounds) {
        c->capbounds = c->capbounds ? 2 * c->capbounds : 16;
        c->bounds = realloc(c->bounds, c->capbounds * sizeof *c->bounds);
        if (!c->bounds)
            kern_oom(c->capbounds * sizeof *c->bounds);
    }
    c->bounds[c->nbounds++] = (bound){v, kind, b};
}

/* Bounds v by b, and through v = x + u, x - u or u - x (u uniform) bounds x too, where x's
 * range is known and x + u stays inside v's type (c->ok tests that: the bound of x holds
 * only where the sum did not wrap). */
static void add_bound(chunk *c, const ir_value *v, bound_kind kind, LLVMValueRef b, int depth) {
    push_bound(c, v, kind, b);
    const ir_op *d = v->def;
    if (!d || depth > 4 || (d->code != IR_ADD && d->code != IR_SUB) || !fits_i64(v->type) ||
        ty_size(v->type) >= 8)
        return;
    llvm_emitter *em = c->em;
    int k = chunk_uniform(c, d->operands[1], 0) ? 0 : chunk_uniform(c, d->operands[0], 0) ? 1 : -1;
    if (k < 0 || chunk_uniform(c, d->operands[k], 0))
        return; /* no uniform operand, or both */
    const ir_value *x = d->operands[k];
    LLVMValueRef xlo, xhi;
    if (!chunk_range(c, x, &xlo, &xhi, 0))
        return;
    LLVMValueRef u = llvm_to_i64(em, chunk_uniform(c, d->operands[1 - k], 0), v->type);
    bool neg = d->code == IR_SUB && k == 1; /* v = u - x */
    LLVMValueRef vlo, vhi, xb;
    if (d->code == IR_ADD) {
        vlo = LLVMBuildAdd(em->b, xlo, u, ""), vhi = LLVMBuildAdd(em->b, xhi, u, "");
        xb = LLVMBuildSub(em->b, b, u, "");
    } else if (!neg) {
        vlo = LLVMBuildSub(em->b, xlo, u, ""), vhi = LLVMBuildSub(em->b, xhi, u, "");
        xb = LLVMBuildAdd(em->b, b, u, "");
    } else {
        vlo = LLVMBuildSub(em->b, u, xhi, ""), vhi = LLVMBuildSub(em->b, u, xlo, "");
        xb = LLVMBuildSub(em->b, u, b, "");
        kind = kind == BOUND_GE ? BOUND_LE : kind == BOUND_LE ? BOUND_GE : kind;
    }
    int bits = (int)ty_size(v->type) * 8 - (ty_is_unsigned(v->type) ? 0 : 1);
    LLVMValueRef tmin = LLVMConstInt(
                     em->t_i64, ty_is_unsigned(v->type) ? 0 : (unsigned long long)-(1LL << bits),
                     1),
                 tmax = LLVMConstInt(em->t_i64, (1ULL << bits) - 1, 0);
    LLVMValueRef fits = LLVMBuildAnd(em->b, LLVMBuildICmp(em->b, LLVMIntSGE, vlo, tmin, ""),
                                     LLVMBuildICmp(em->b, LLVMIntSLE, vhi, tmax, ""), "");
    LLVMValueRef none = LLVMBuildICmp(em->b, LLVMIntSGT, xlo, xhi, "");
    c->ok = LLVMBuildAnd(em->b, c->ok, LLVMBuildOr(em->b, fits, none, ""), "");
    add_bound(c, x, kind, xb, depth + 1);
}

static void assume(chunk *c, const ir_value *cond, bool truth, int depth);

/* One way for a condition to hold: a holds truth a (and b holds truth b, when b is given). */
typedef struct alt {
    const ir_value *a, *b;
    bool ta, tb;
} alt;

/* Adds to c->bounds what one of two alternatives alts[0..n) tells: for each value that an
 * alternative bounds, the hull of its ranges under the alternatives where it is known in
 * all of them (an alternative where its range is empty adds nothing to the hull). */
static void assume_any(chunk *c, const alt *alts, int n, int depth) {
    llvm_emitter *em = c->em;
    uint32_t base = c->nbounds;
    bound *own[2] = {NULL, NULL}; /* each alternative's own bounds */
    uint32_t nown[2] = {0, 0};
    for (int k = 0; k < n && k < 2; k++) {
        assume(c, alts[k].a, alts[k].ta, depth + 1);
        if (alts[k].b)
            assume(c, alts[k].b, alts[k].tb, depth + 1);
        nown[k] = c->nbounds - base;
        own[k] = malloc((nown[k] + 1) * sizeof *own[k]);
        if (!own[k])
            kern_oom((nown[k] + 1) * sizeof *own[k]);
        if (nown[k]) /* c->bounds is NULL while no bound was pushed */
            memcpy(own[k], c->bounds + base, nown[k] * sizeof *own[k]);
        c->nbounds = base;
    }
    enum { MAXV = 32 };
    LLVMValueRef lo[MAXV], hi[MAXV];
    const ir_value *vs[MAXV];
    int nv = 0;
    for (int k0 = 0; k0 < n && k0 < 2; k0++)
        for (uint32_t i = 0; i < nown[k0] && nv < MAXV; i++) {
            const ir_value *v = own[k0][i].v;
            bool seen = false;
            for (int j = 0; j < nv; j++)
                seen |= vs[j] == v;
            if (seen)
                continue;
            LLVMValueRef l = LLVMConstInt(em->t_i64, INT64_MAX, 0),
                         h = LLVMConstInt(em->t_i64, (unsigned long long)INT64_MIN, 1);
            bool known = true;
            for (int k = 0; k < n && k < 2 && known; k++) {
                for (uint32_t j = 0; j < nown[k]; j++) /* under alternative k */
                    push_bound(c, own[k][j].v, own[k][j].kind, own[k][j].b);
                LLVMValueRef vl, vh;
                known = chunk_range(c, v, &vl, &vh, 0);
                c->nbounds = base;
                if (!known)
                    break;
                LLVMValueRef empty = LLVMBuildICmp(em->b, LLVMIntSGT, vl, vh, "");
                l = LLVMBuildSelect(
                    em->b,
                    LLVMBuildOr(em->b, empty, LLVMBuildICmp(em->b, LLVMIntSGE, vl, l, ""), ""), l,
                    vl, "");
                h = LLVMBuildSelect(
                    em->b,
                    LLVMBuildOr(em->b, empty, LLVMBuildICmp(em->b, LLVMIntSLE, vh, h, ""), ""), h,
                    vh, "");
            }
            if (known)
                vs[nv] = v, lo[nv] = l, hi[nv] = h, nv++;
        }
    free(own[0]);
    free(own[1]);
    for (int j = 0; j < nv; j++) {
        push_bound(c, vs[j], BOUND_GE, lo[j]);
        push_bound(c, vs[j], BOUND_LE, hi[j]);
    }
}

/* Adds to c->bounds what `cond == truth` tells of integer values compared with uniform
 * ones (through and, or, not, and the results of `if`s that yield bools: the flags of
 * K.grad's gather form; a condition it cannot read tells nothing). */
static void assume(chunk *c, const ir_value *cond, bool truth, int depth) {
    const ir_op *d = cond->def;
    if (!d || depth > 16 || cond->type->kind != TY_BOOL)
        return;
    if (d->code == IR_NOT) {
        assume(c, d->operands[0], !truth, depth + 1);
        return;
    }
    if ((d->code == IR_AND && truth) || (d->code == IR_OR && !truth)) {
        assume(c, d->operands[0], truth, depth + 1);
        assume(c, d->operands[1], truth, depth + 1);
        return;
    }
    if (d->code == IR_AND || d->code == IR_OR) { /* one of the two holds */
        alt alts[2] = {{d->operands[0], NULL, truth, false}, {d->operands[1], NULL, truth, false}};
        assume_any(c, alts, 2, depth);
        return;
    }
    if (d->code == IR_IF) { /* one of the branches ran and yielded truth */
        alt alts[2];
        int n = 0;
        for (int r = 0; r < 2; r++) {
            const ir_op *y = d->regions[r]->last;
            if (!y || y->code != IR_YIELD || y->noperands != d->nresults)
                return;
            const ir_value *v = y->operands[cond->index];
            const ir_op *vd = v->def;
            if (vd && vd->code == IR_CONST) {
                if ((vd->imm.i != 0) != truth)
                    continue; /* this branch yields !truth */
                v = NULL;
            }
            alts[n++] = (alt){d->operands[0], v, r == 0, truth};
        }
        if (n == 1) {
            assume(c, alts[0].a, alts[0].ta, depth + 1);
            if (alts[0].b)
                assume(c, alts[0].b, alts[0].tb, depth + 1);
        } else if (n == 2) {
            assume_any(c, alts, 2, depth);
        }
        return;
    }
    ir_opcode op = d->code;
    if (op != IR_EQ && op != IR_NE && op != IR_LT && op != IR_LE && op != IR_GT && op != IR_GE)
        return;
    const ir_value *x = d->operands[0], *y = d->operands[1];
    if (!fits_i64(x->type))
        return;
    llvm_emitter *em = c->em;
    LLVMValueRef u = chunk_uniform(c, y, 0);
    if (!u) { /* u OP x: x (swapped OP) u */
        const ir_value *t = x;
        x = y, y = t;
        u = chunk_uniform(c, y, 0);
        if (!u || chunk_uniform(c, x, 0))
            return;
        op = op == IR_LT   ? IR_GT
             : op == IR_GT ? IR_LT
             : op == IR_LE ? IR_GE
             : op == IR_GE ? IR_LE
                           : op;
    } else if (chunk_uniform(c, x, 0)) {
        return; /* both uniform: nothing of an index */
    }
    if (!truth) /* the negation */
        op = op == IR_EQ   ? IR_NE
             : op == IR_NE ? IR_EQ
             : op == IR_LT ? IR_GE
             : op == IR_LE ? IR_GT
             : op == IR_GT ? IR_LE
                           : IR_LT;
    u = llvm_to_i64(em, u, y->type);
    LLVMValueRef one = LLVMConstInt(em->t_i64, 1, 0);
    switch (op) { /* the bounds wrap only on paths that never run */
    case IR_EQ: add_bound(c, x, BOUND_GE, u, 0), add_bound(c, x, BOUND_LE, u, 0); break;
    case IR_NE: add_bound(c, x, BOUND_NE, u, 0); break;
    case IR_LT: add_bound(c, x, BOUND_LE, LLVMBuildSub(em->b, u, one, ""), 0); break;
    case IR_LE: add_bound(c, x, BOUND_LE, u, 0); break;
    case IR_GT: add_bound(c, x, BOUND_GE, LLVMBuildAdd(em->b, u, one, ""), 0); break;
    default: add_bound(c, x, BOUND_GE, u, 0); break;
    }
}

static void add_proven(chunk *c, const ir_op *op) {
    if (c->nproven == c->capproven) {
        c->capproven = c->capproven ? 2 * c->capproven : 16;
        c->proven = realloc(c->proven, c->capproven * sizeof *c->proven);
        if (!c->proven)
            kern_oom(c->capproven * sizeof *c->proven);
    }
    c->proven[c->nproven++] = op;
}

/* Adds the range test of access op to c->ok and op to c->proven, when its ranges are known. */
static void access_test(chunk *c, const ir_op *op) {
    llvm_emitter *em = c->em;
    const ir_value *a = op->operands[0];
    int rank = a->type->rank;
    LLVMValueRef lo[KERN_MAX_RANK], hi[KERN_MAX_RANK];
    if (a->def || a->region != em->kernel->body)
        return;
    for (int d = 0; d < rank; d++)
        if (!chunk_range(c, op->operands[1 + d], &lo[d], &hi[d], 0))
            return;
    for (int d = 0; d < rank; d++) {
        const ir_value *iv = op->operands[1 + d];
        /* the index's own type holds the values too (no wrap on the way) */
        int bits = (int)ty_size(iv->type) * 8 - (ty_is_unsigned(iv->type) ? 0 : 1);
        LLVMValueRef tmax = LLVMConstInt(em->t_i64, bits >= 63 ? INT64_MAX : (1ULL << bits) - 1, 0);
        LLVMValueRef in = LLVMBuildAnd(
            em->b, LLVMBuildICmp(em->b, LLVMIntSGE, lo[d], LLVMConstNull(em->t_i64), ""),
            LLVMBuildAnd(em->b,
                         LLVMBuildICmp(em->b, LLVMIntSLT, hi[d], em->arr_shape[a->index][d], ""),
                         LLVMBuildICmp(em->b, LLVMIntSLE, hi[d], tmax, ""), ""),
            "");
        LLVMValueRef none = LLVMBuildICmp(em->b, LLVMIntSGT, lo[d], hi[d], "");
        c->ok = LLVMBuildAnd(em->b, c->ok, LLVMBuildOr(em->b, in, none, ""), "");
    }
    add_proven(c, op);
}

/* Counts push or pop op of a loop's test: it runs at most once per iteration whose index
 * the `if`s around op allow (the loop holds no loop), so at most that many times. */
static void stack_count(chunk *c, const ir_op *op) {
    llvm_emitter *em = c->em;
    stack_use *u = &c->stacks[op->imm.i];
    LLVMValueRef n;
    if (c->loop->code == IR_WHILE) { /* the before-region runs once more than the after */
        const ir_region *r = op->parent;
        while (r->parent != c->loop)
            r = r->parent->parent;
        n = r == c->loop->regions[0]
                ? LLVMBuildAdd(em->b, c->runs, LLVMConstInt(em->t_i64, 1, 0), "")
                : c->runs;
    } else {
        const ir_value *iv = c->loop->regions[0]->args[0];
        LLVMValueRef lo, hi;
        if (u->unknown || !fits_i64(iv->type) || !chunk_range(c, iv, &lo, &hi, 0)) {
            u->unknown = true;
            return;
        }
        /* hi < INT64_MAX (a bound below the loop's end), so the count fits in u64 */
        n = LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntSGT, lo, hi, ""),
                            LLVMConstInt(em->t_i64, 0, 0),
                            LLVMBuildAdd(em->b, LLVMBuildSub(em->b, hi, lo, ""),
                                         LLVMConstInt(em->t_i64, 1, 0), ""),
                            "");
    }
    /* each count at most the capacity: the sums cannot wrap */
    LLVMValueRef cap = em->ad_cap[op->imm.i];
    c->ok = LLVMBuildAnd(em->b, c->ok, LLVMBuildICmp(em->b, LLVMIntULE, n, cap, ""), "");
    LLVMValueRef *sum = op->code == IR_ADPUSH ? &u->pushes : &u->pops;
    *sum = *sum ? LLVMBuildAdd(em->b, *sum, n, "") : n;
    if (u->nops == u->capops) {
        u->capops = u->capops ? 2 * u->capops : 4;
        u->ops = realloc(u->ops, u->capops * sizeof *u->ops);
        if (!u->ops)
            kern_oom(u->capops * sizeof *u->ops);
    }
    u->ops[u->nops++] = op;
}

/* A loop's adstack test: for each stack whose pushes and pops are all counted, with d its
 * depth before the loop, d <= cap, pops <= d and d + pushes <= cap, so that every entry
 * the loop pushes or pops lies in [d - pops, d + pushes) within [0, cap); its ops are
 * proven (no capacity test of their own). */
static void stack_tests(chunk *c) {
    llvm_emitter *em = c->em;
    for (uint32_t s = 0; s < em->kernel->nadstacks; s++) {
        stack_use *u = &c->stacks[s];
        if (u->nops && !u->unknown) {
            LLVMValueRef d = LLVMBuildLoad2(em->b, em->t_i64, em->ad_depth[s], "ad.d"),
                         cap = em->ad_cap[s];
            LLVMValueRef ok = LLVMBuildICmp(em->b, LLVMIntULE, d, cap, "");
            if (u->pops)
                ok = LLVMBuildAnd(em->b, ok, LLVMBuildICmp(em->b, LLVMIntULE, u->pops, d, ""),
                                  "");
            if (u->pushes)
                ok = LLVMBuildAnd(
                    em->b, ok,
                    LLVMBuildICmp(em->b, LLVMIntULE, LLVMBuildAdd(em->b, d, u->pushes, ""), cap,
                                  ""),
                    "");
            c->ok = LLVMBuildAnd(em->b, c->ok, ok, "");
            for (uint32_t i = 0; i < u->nops; i++)
                add_proven(c, u->ops[i]);
            u->proven = true;
        }
        free(u->ops);
        u->ops = NULL;
    }
}

/* The range tests of r's accesses (c->proven, c->ok); clears c->all at a `check` op or an
 * access whose ranges are unknown (it keeps its own checks). */
static void chunk_tests(chunk *c, const ir_region *r) {
    ir_foreach_op(op, r) {
        if (op->code == IR_CHECK)
            c->all = false;
        if (c->stacks && (op->code == IR_ADPUSH || op->code == IR_ADPOP))
            stack_count(c, op);
        if (ir_is_access(op->code) && c->accesses) {
            uint32_t n = c->nproven;
            access_test(c, op);
            if (c->nproven == n)
                c->all = false;
        }
        for (uint32_t i = 0; i < op->nregions; i++) {
            uint32_t n = c->nbounds;
            if (op->code == IR_IF)
                assume(c, op->operands[0], i == 0, 0);
            chunk_tests(c, op->regions[i]);
            c->nbounds = n;
        }
    }
}

void llvm_emit_tested(llvm_emitter *em, const ir_op *task, const LLVMValueRef *lo,
                      const LLVMValueRef *hi, void (*items)(llvm_emitter *em, void *user),
                      void *user) {
    if (!em->checks || em->opts->debug || task->code != IR_PARALLEL) {
        items(em, user);
        return;
    }
    chunk c = {.em = em, .task = task, .lo = lo, .hi = hi, .ok = LLVMConstInt(em->t_i1, 1, 0),
               .all = true, .accesses = true};
    chunk_tests(&c, task->regions[0]);
    free(c.bounds);
    if (c.nproven == 0) {
        items(em, user);
        return;
    }
    /* no item (an empty dimension): nothing to test */
    LLVMValueRef empty = LLVMConstInt(em->t_i1, 0, 0);
    for (uint32_t d = 0; d < task->regions[0]->nargs; d++)
        empty = LLVMBuildOr(em->b, empty, LLVMBuildICmp(em->b, LLVMIntSGT, lo[d], hi[d], ""), "");
    LLVMBasicBlockRef fast = llvm_new_block(em, "chunk.unchecked"),
                      slow = llvm_new_block(em, "chunk.checked"),
                      done = llvm_new_block(em, "chunk.done");
    llvm_likely_first(em, LLVMBuildCondBr(em->b, LLVMBuildOr(em->b, empty, c.ok, ""), fast, slow));
    LLVMPositionBuilderAtEnd(em->b, fast);
    if (c.all) { /* no check at all */
        em->checks = false;
    } else { /* the tested accesses without theirs */
        em->proven = c.proven;
        em->nproven = c.nproven;
    }
    items(em, user);
    em->checks = true;
    em->proven = NULL;
    em->nproven = 0;
    free(c.proven);
    LLVMBuildBr(em->b, done);
    /* the checked copy runs only where a test failed (a bad access, as a rule): its loops
     * are not tested again, which keeps the code at three copies of an inner loop */
    LLVMPositionBuilderAtEnd(em->b, slow);
    bool untested = em->untested, cold = em->cold;
    em->untested = em->cold = true;
    items(em, user);
    em->untested = untested, em->cold = cold;
    LLVMBuildBr(em->b, done);
    LLVMPositionBuilderAtEnd(em->b, done);
}

/* Whether a is arg + 1 or 1 + arg (a counter's step). */
static bool plus_one(const ir_value *a, const ir_value *arg) {
    const ir_op *d = a->def;
    if (!d || d->code != IR_ADD)
        return false;
    for (int k = 0; k < 2; k++) {
        const ir_op *one = d->operands[1 - k]->def;
        if (d->operands[k] == arg && one && one->code == IR_CONST && one->imm.i == 1)
            return true;
    }
    return false;
}

/* How often while loop c->loop's after-region runs at most (i64, >= 0), from a conjunct
 * `k < u` or `k <= u` of its condition: k a carried value that the after-region steps by
 * one, its start and u known before the loop (signed integers of at most 32 bits, so the
 * counts fit); NULL when the condition has none. */
static LLVMValueRef while_runs(chunk *c, const ir_value *cond, int depth) {
    llvm_emitter *em = c->em;
    const ir_op *w = c->loop, *d = cond->def;
    const ir_region *before = w->regions[0], *after = w->regions[1];
    if (!d || depth > 8 || d->parent != before)
        return NULL;
    if (d->code == IR_AND) {
        LLVMValueRef a = while_runs(c, d->operands[0], depth + 1);
        return a ? a : while_runs(c, d->operands[1], depth + 1);
    }
    if (d->code != IR_LT && d->code != IR_LE)
        return NULL;
    const ir_value *k = d->operands[0];
    LLVMValueRef u = chunk_uniform(c, d->operands[1], 0);
    if (!u || k->def || k->region != before || !ty_is_int(k->type) ||
        ty_is_unsigned(k->type) || ty_size(k->type) > 4)
        return NULL;
    /* the after-region's argument that the condition forwards k to, stepped by one into
     * k's next value */
    const ir_op *cnd = before->last, *y = after->last;
    if (!cnd || cnd->code != IR_CONDITION || !y || y->code != IR_YIELD)
        return NULL;
    bool stepped = false;
    for (uint32_t j = 0; j + 1 < cnd->noperands && !stepped; j++)
        if (cnd->operands[1 + j] == k)
            stepped = plus_one(y->operands[k->index], after->args[j]);
    if (!stepped)
        return NULL;
    LLVMValueRef k0 = llvm_to_i64(em, llvm_val(em, w->operands[k->index]), k->type);
    LLVMValueRef n = LLVMBuildSub(em->b, llvm_to_i64(em, u, d->operands[1]->type), k0, "");
    if (d->code == IR_LE)
        n = LLVMBuildAdd(em->b, n, LLVMConstInt(em->t_i64, 1, 0), "");
    LLVMValueRef zero = LLVMConstInt(em->t_i64, 0, 0);
    return LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntSLT, n, zero, ""), zero, n, "");
}

bool llvm_emit_tested_loop(llvm_emitter *em, const ir_op *loop,
                           void (*emit)(llvm_emitter *em, const ir_op *loop)) {
    /* the accesses' ranges in checked code; the adstacks' capacities in every build (a
     * while loop: those alone, where its condition bounds a counter) */
    bool stacks = em->ad_live && em->kernel->nadstacks, w = loop->code == IR_WHILE;
    if ((!em->checks && !stacks) || em->opts->debug || em->simd_w || em->untested ||
        (loop->code != IR_FOR && (!w || !stacks)) || ir_region_has_loop(loop->regions[0]) ||
        (w && ir_region_has_loop(loop->regions[1])))
        return false;
    const ir_op *task = loop->parent->parent;
    while (task && task->code != IR_PARALLEL && task->code != IR_SERIAL)
        task = task->parent->parent;
    if (!task)
        return false;
    chunk c = {.em = em,
               .task = task,
               .ok = LLVMConstInt(em->t_i1, 1, 0),
               .all = true,
               .loop = loop,
               .accesses = em->checks && !w};
    if (w) {
        const ir_op *cnd = loop->regions[0]->last;
        c.runs = cnd && cnd->code == IR_CONDITION ? while_runs(&c, cnd->operands[0], 0) : NULL;
        if (!c.runs)
            return false;
    }
    if (stacks) {
        c.stacks = calloc(em->kernel->nadstacks, sizeof *c.stacks);
        if (!c.stacks)
            kern_oom(em->kernel->nadstacks * sizeof *c.stacks);
    }
    chunk_tests(&c, loop->regions[0]);
    if (w)
        chunk_tests(&c, loop->regions[1]);
    if (c.stacks)
        stack_tests(&c);
    free(c.bounds);
    if (c.nproven == 0) {
        free(c.proven);
        free(c.stacks);
        return false;
    }
    /* no iteration of a for loop: nothing to test */
    LLVMValueRef none = LLVMConstInt(em->t_i1, 0, 0);
    if (!w) {
        const kern_type *it = loop->operands[0]->type;
        LLVMValueRef lo = llvm_val(em, loop->operands[0]), hi = llvm_val(em, loop->operands[1]);
        none = LLVMBuildNot(em->b, llvm_index_less(em, it, lo, hi), "");
    }
    LLVMBasicBlockRef fast = llvm_new_block(em, "loop.unchecked"),
                      slow = llvm_new_block(em, "loop.checked"),
                      done = llvm_new_block(em, "loop.done");
    llvm_likely_first(em, LLVMBuildCondBr(em->b, LLVMBuildOr(em->b, none, c.ok, ""), fast, slow));
    uint32_t n = loop->nresults;
    LLVMValueRef *res = calloc(2 * (size_t)n + 1, sizeof *res);
    const ir_op **both = malloc(((size_t)em->nproven + c.nproven) * sizeof *both);
    if (!res || !both)
        kern_oom(((size_t)em->nproven + c.nproven + 2 * (size_t)n) * sizeof(void *));
    LLVMBasicBlockRef from[2];
    /* fast: the tested accesses without their checks (besides those of an enclosing test) */
    LLVMPositionBuilderAtEnd(em->b, fast);
    const ir_op **outer = em->proven;
    uint32_t nouter = em->nproven;
    if (nouter)
        memcpy(both, outer, nouter * sizeof *both);
    memcpy(both + nouter, c.proven, c.nproven * sizeof *both);
    em->proven = both;
    em->nproven = nouter + c.nproven;
    for (uint32_t s = 0; c.stacks && s < em->kernel->nadstacks; s++)
        if (c.stacks[s].proven)
            llvm_adstack_enter_proven(em, s);
    emit(em, loop);
    em->proven = outer;
    em->nproven = nouter;
    for (uint32_t k = 0; k < n; k++)
        res[k] = llvm_val(em, loop->results[k]);
    from[0] = LLVMGetInsertBlock(em->b);
    LLVMBuildBr(em->b, done);
    LLVMPositionBuilderAtEnd(em->b, slow);
    bool cold = em->cold;
    em->cold = true;
    emit(em, loop);
    em->cold = cold;
    /* a small loop (the steps of K.grad's sweeps) needs few registers of its own */
    em->tested_loop = true;
    em->hot_loop |= !cold && (loop->nresults > 4 || llvm_count_ops(loop->regions[0]) > 64);
    for (uint32_t k = 0; k < n; k++)
        res[n + k] = llvm_val(em, loop->results[k]);
    from[1] = LLVMGetInsertBlock(em->b);
    LLVMBuildBr(em->b, done);
    LLVMPositionBuilderAtEnd(em->b, done);
    for (uint32_t k = 0; k < n; k++) {
        LLVMValueRef phi = LLVMBuildPhi(em->b, LLVMTypeOf(res[k]), "");
        LLVMValueRef in[2] = {res[k], res[n + k]};
        LLVMAddIncoming(phi, in, from, 2);
        llvm_set_val(em, loop->results[k], phi);
    }
    free(res);
    free(both);
    free(c.proven);
    free(c.stacks);
    return true;
}
