/* spv_emit_sizer.c - sizer entry points: the Vulkan device's path of adstack sizing for
 * capacities that read device arrays (runtime contract 3, docs/runtime-contracts.md; the
 * CUDA counterpart is backends/llvm/llvm_sizer.c, whose rules this file follows).
 *
 * For each adstack s of a kernel K whose SizeExpr reads array elements, the module has a
 * GLCompute entry point kern_K__s<s> with the kernel's descriptor layout: the launch block
 * (binding 0) gives extents and scalars, bindings 5 + p the arrays, and a result buffer is
 * bound in place of the adstack heap (bindings 3 and 4, viewed as u32 and u64 words, both
 * Coherent; common/spvblock.h names its words). The runtime sets res[4] = {INT64_MIN, 0,
 * 0, 0} and the ticket to 0 before the launch:
 *   res[0]  the value (INT64_MIN: nothing evaluated; the runtime counts a negative
 *           capacity as 0);
 *   res[1]  0, or the first error (a 32-bit compare-and-swap from 0 on its low half): 1 a
 *           read out of bounds (res[2] = the parameter, res[3] = the index), 2 a division
 *           by zero, 3 an int64 overflow.
 * Each maxover is evaluated by sz_maxover_rule's decision, as llvm_sizer.c does. When the
 * expression is a maxover whose rule visits every point, its range is split over the grid
 * (a grid-stride loop, each invocation folding its own maximum into word 8 + w); the
 * invocation that finishes last (a u32 atomic ticket, with device-scope barriers) folds
 * the grid's maxima into res[0]. Anything else is evaluated by invocation 0. No 64-bit
 * atomics and no workgroup memory: a module with a sizer needs no feature its kernels do
 * not. Signed overflow is found from the operands (add, sub) or by dividing back (mul). */
#include "../../common/sizeexpr.h"
#include "../../common/spvblock.h"
#include "spv_emit_priv.h"

enum { SZ_ERR_BOUNDS = 1, SZ_ERR_DIV0 = 2, SZ_ERR_OVERFLOW = 3, MAX_VARS = 64 };

typedef struct sizer_em {
    spv_emitter *em;
    uint32_t vars[MAX_VARS]; /* the ids of the bound range variables (u64) */
} sizer_em;

static uint32_t ci64(spv_emitter *em, int64_t v) { return cu64(em, (uint64_t)v); }

/* A pointer to word i of the result buffer viewed with bits-bit words. */
static uint32_t res_ptr(spv_emitter *em, int bits, uint32_t i) {
    uint32_t elem = bits == 64 ? u64t(em) : em->t_u32;
    uint32_t ops[3] = {spv_sizer_result_var(em, bits), cu32(em, 0), i};
    return spv_op(&em->b, SpvOpAccessChain,
                  spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, elem), ops, 3);
}

static void res_store(spv_emitter *em, uint32_t word, uint32_t v) {
    spv_instv(&em->b.funcs, SpvOpStore, 2, res_ptr(em, 64, cu32(em, word)), v);
}

/* A selection `if (cond)`: opened by if_begin, which positions in the then block; the
 * else block (skip) only branches to the merge (a phi's other predecessor). */
typedef struct sz_if {
    uint32_t merge, skip;
} sz_if;

static sz_if if_begin(spv_emitter *em, uint32_t cond) {
    uint32_t l_then = spv_id(&em->b);
    sz_if f;
    f.merge = spv_id(&em->b);
    f.skip = spv_id(&em->b);
    selection_merge(em, f.merge);
    branch_cond(em, cond, l_then, f.skip);
    label(em, f.skip);
    branch(em, f.merge);
    label(em, l_then);
    return f;
}

static void if_end(spv_emitter *em, sz_if f) {
    branch(em, f.merge);
    label(em, f.merge);
}

static uint32_t lnot(spv_emitter *em, uint32_t c) {
    return spv_op1(&em->b, SpvOpLogicalNot, em->t_bool, c);
}

static uint32_t land(spv_emitter *em, uint32_t x, uint32_t y) {
    return spv_op2(&em->b, SpvOpLogicalAnd, em->t_bool, x, y);
}

static uint32_t eq(spv_emitter *em, uint32_t x, uint32_t y) {
    return spv_op2(&em->b, SpvOpIEqual, em->t_bool, x, y);
}

static uint32_t select64(spv_emitter *em, uint32_t c, uint32_t x, uint32_t y) {
    return spv_op3(&em->b, SpvOpSelect, u64t(em), c, x, y);
}

/* if (!ok) record the error code with a, b (the first error wins); execution goes on
 * either way (the caller replaces the value computed on the failing path). */
static void check(spv_emitter *em, uint32_t ok, uint32_t code, uint32_t a, uint32_t b) {
    sz_if f = if_begin(em, lnot(em, ok));
    uint32_t ops[6] = {res_ptr(em, 32, cu32(em, 2 * (KERN_SPV_SIZER_RES + 1))),
                       atomic_scope(em),
                       relaxed(em),
                       relaxed(em),
                       cu32(em, code),
                       cu32(em, 0)};
    uint32_t old = spv_op(&em->b, SpvOpAtomicCompareExchange, em->t_u32, ops, 6);
    sz_if won = if_begin(em, eq(em, old, cu32(em, 0)));
    res_store(em, KERN_SPV_SIZER_RES + 2, a);
    res_store(em, KERN_SPV_SIZER_RES + 3, b);
    if_end(em, won);
    if_end(em, f);
}

/* x op y (add, sub, mul) in int64, with an overflow check. */
static uint32_t arith(spv_emitter *em, sz_op op, uint32_t x, uint32_t y) {
    uint32_t u64 = u64t(em), t_bool = em->t_bool, ovf;
    uint32_t zero = ci64(em, 0), one = ci64(em, 1), minus1 = ci64(em, -1);
    if (op == SZ_MUL) {
        uint32_t r = spv_op2(&em->b, SpvOpIMul, u64, x, y);
        /* overflow: x = -1 and y = INT64_MIN, or x not in {0, -1} and r / x != y */
        uint32_t xm1 = eq(em, x, minus1);
        uint32_t plain = lnot(em, spv_op2(&em->b, SpvOpLogicalOr, t_bool, eq(em, x, zero), xm1));
        uint32_t back = spv_op2(&em->b, SpvOpSDiv, u64, r, select64(em, plain, x, one));
        uint32_t wrong = land(em, plain, spv_op2(&em->b, SpvOpINotEqual, t_bool, back, y));
        ovf = spv_op2(&em->b, SpvOpLogicalOr, t_bool, wrong,
                      land(em, xm1, eq(em, y, ci64(em, INT64_MIN))));
        check(em, lnot(em, ovf), SZ_ERR_OVERFLOW, zero, zero);
        return r;
    }
    bool add = op == SZ_ADD;
    uint32_t r = spv_op2(&em->b, add ? SpvOpIAdd : SpvOpISub, u64, x, y);
    /* add: x and y of one sign and r of the other; sub: x and y of different signs and r
     * of y's */
    uint32_t s1 = spv_op2(&em->b, SpvOpBitwiseXor, u64, x, r);
    uint32_t s2 = spv_op2(&em->b, SpvOpBitwiseXor, u64, add ? y : x, add ? r : y);
    ovf = spv_op2(&em->b, SpvOpSLessThan, t_bool, spv_op2(&em->b, SpvOpBitwiseAnd, u64, s1, s2),
                  zero);
    check(em, lnot(em, ovf), SZ_ERR_OVERFLOW, zero, zero);
    return r;
}

/* The maximum (signed) of body(i) over i = from, from + step, ... while i < hi, in one
 * invocation; INT64_MIN when no iteration ran, which callers tell by from < hi. */
typedef uint32_t (*fold_body)(sizer_em *s, const void *arg, uint32_t i);

static uint32_t fold_max(sizer_em *s, fold_body body, const void *arg, uint32_t from, uint32_t hi,
                         uint32_t step) {
    spv_emitter *em = s->em;
    uint32_t u64 = u64t(em), pre = em->cur;
    uint32_t l_head = spv_id(&em->b), l_body = spv_id(&em->b), l_cont = spv_id(&em->b),
             l_merge = spv_id(&em->b);
    branch(em, l_head);
    label(em, l_head);
    uint32_t i_at = spv_here(&em->b) + 5;
    uint32_t i = phi2(em, u64, from, pre, 0, l_cont);
    uint32_t m_at = spv_here(&em->b) + 5;
    uint32_t m = phi2(em, u64, ci64(em, INT64_MIN), pre, 0, l_cont);
    uint32_t more = spv_op2(&em->b, SpvOpSLessThan, em->t_bool, i, hi);
    spv_instv(&em->b.funcs, SpvOpLoopMerge, 3, l_merge, l_cont, SpvLoopControlMaskNone);
    branch_cond(em, more, l_body, l_merge);
    label(em, l_body);
    uint32_t x = body(s, arg, i);
    uint32_t m2 = select64(em, spv_op2(&em->b, SpvOpSGreaterThan, em->t_bool, x, m), x, m);
    branch(em, l_cont);
    label(em, l_cont);
    spv_patch(&em->b, i_at, spv_op2(&em->b, SpvOpIAdd, u64, i, step)); /* i < hi <= MAX - step */
    spv_patch(&em->b, m_at, m2);
    branch(em, l_head);
    label(em, l_merge);
    return m;
}

static uint32_t eval(sizer_em *s, const sz_expr *e);

/* The body of maxover e with its variable bound to x. */
static uint32_t body_at(sizer_em *s, const void *arg, uint32_t x) {
    const sz_expr *e = arg;
    kern_assert(e->v >= 0 && e->v < MAX_VARS);
    uint32_t saved = s->vars[e->v];
    s->vars[e->v] = x;
    uint32_t r = eval(s, e->kids[2]);
    s->vars[e->v] = saved;
    return r;
}

/* Closes the selection opened by if_begin: v from the then block, 0 from the skip
 * block. */
static uint32_t merge_or_zero(spv_emitter *em, uint32_t v, sz_if f) {
    uint32_t from = em->cur;
    if_end(em, f);
    return phi2(em, u64t(em), v, from, ci64(em, 0), f.skip);
}

static uint32_t eval_read(sizer_em *s, const sz_expr *e) {
    spv_emitter *em = s->em;
    int p = (int)e->v;
    const kern_type *t = em->kernel->params[p].type;
    uint32_t u64 = u64t(em), lin = 0, ok = spv_const_bool(&em->b, true), bad = ci64(em, 0);
    for (int d = 0; d < e->nkids; d++) {
        uint32_t i = eval(s, e->kids[d]);
        uint32_t in = spv_op2(&em->b, SpvOpULessThan, em->t_bool, i, em->shape[p][d]);
        bad = select64(em, land(em, ok, lnot(em, in)), i, bad);
        ok = land(em, ok, in);
        lin = d == 0 ? i
                     : spv_op2(&em->b, SpvOpIAdd, u64,
                               spv_op2(&em->b, SpvOpIMul, u64, lin, em->shape[p][d]), i);
    }
    check(em, ok, SZ_ERR_BOUNDS, ci64(em, p), bad);
    sz_if f = if_begin(em, ok); /* read only in bounds */
    uint32_t ptr = spv_element_ptr(em, p, false, lin), v;
    switch (t->elem->kind) {
    case TY_I8:
    case TY_I16:
    case TY_I32:
    case TY_U8:
    case TY_U16:
    case TY_U32:
    case TY_I64:
    case TY_U64: {
        uint32_t raw = spv_op1(&em->b, SpvOpLoad, spv_reg_type(em, t->elem), ptr);
        v = spv_to_u64(em, raw, t->elem);
        break;
    }
    case TY_BOOL: {
        uint32_t u8 = spv_type_uint(&em->b, 8);
        uint32_t byte = spv_op1(&em->b, SpvOpLoad, u8, ptr);
        v = select64(em, spv_op2(&em->b, SpvOpINotEqual, em->t_bool, byte, spv_const_u8(&em->b, 0)),
                     ci64(em, 1), ci64(em, 0));
        break;
    }
    default: kern_unreachable("sizer: a SizeExpr reads an array of non-integer elements");
    }
    return merge_or_zero(em, v, f);
}

/* Whether the rule of maxover e visits every point of its range. */
static bool scans(const sz_expr *e) {
    sz_rule r = sz_maxover_rule(e);
    return r != SZ_RULE_POINT && r != SZ_RULE_ENDPOINTS;
}

/* A maxover by its rule: the body at lo, the larger of the body at lo and hi - 1, or every
 * point; 0 for an empty range, where the body is not evaluated. */
static uint32_t eval_maxover(sizer_em *s, const sz_expr *e) {
    spv_emitter *em = s->em;
    uint32_t lo = eval(s, e->kids[0]), hi = eval(s, e->kids[1]);
    uint32_t some = spv_op2(&em->b, SpvOpSLessThan, em->t_bool, lo, hi);
    if (scans(e)) {
        uint32_t m = fold_max(s, body_at, e, lo, hi, ci64(em, 1));
        return select64(em, some, m, ci64(em, 0));
    }
    sz_if f = if_begin(em, some);
    uint32_t m = body_at(s, e, lo);
    if (sz_maxover_rule(e) == SZ_RULE_ENDPOINTS) {
        uint32_t last = body_at(s, e, spv_op2(&em->b, SpvOpISub, u64t(em), hi, ci64(em, 1)));
        m = select64(em, spv_op2(&em->b, SpvOpSGreaterThan, em->t_bool, last, m), last, m);
    }
    return merge_or_zero(em, m, f);
}

static uint32_t eval(sizer_em *s, const sz_expr *e) {
    spv_emitter *em = s->em;
    uint32_t u64 = u64t(em);
    switch (e->op) {
    case SZ_CONST: return ci64(em, e->v);
    case SZ_VAR: kern_assert(e->v >= 0 && e->v < MAX_VARS && s->vars[e->v]); return s->vars[e->v];
    case SZ_PARAM: {
        const ir_value *a = em->kernel->body->args[e->v];
        return spv_to_u64(em, val(em, a), a->type);
    }
    case SZ_DIM: return em->shape[e->v][e->d];
    case SZ_READ: return eval_read(s, e);
    case SZ_ADD:
    case SZ_SUB:
    case SZ_MUL: {
        uint32_t x = eval(s, e->kids[0]);
        return arith(em, e->op, x, eval(s, e->kids[1]));
    }
    case SZ_DIV: {
        uint32_t x = eval(s, e->kids[0]), y = eval(s, e->kids[1]);
        uint32_t nz = spv_op2(&em->b, SpvOpINotEqual, em->t_bool, y, ci64(em, 0));
        check(em, nz, SZ_ERR_DIV0, ci64(em, 0), ci64(em, 0));
        uint32_t ovf = land(em, eq(em, x, ci64(em, INT64_MIN)), eq(em, y, ci64(em, -1)));
        check(em, lnot(em, ovf), SZ_ERR_OVERFLOW, ci64(em, 0), ci64(em, 0));
        uint32_t safe = select64(em, land(em, nz, lnot(em, ovf)), y, ci64(em, 1));
        return spv_op2(&em->b, SpvOpSDiv, u64, x, safe);
    }
    case SZ_MIN:
    case SZ_MAX: {
        uint32_t x = eval(s, e->kids[0]), y = eval(s, e->kids[1]);
        uint32_t lt = spv_op2(&em->b, SpvOpSLessThan, em->t_bool, x, y);
        return e->op == SZ_MIN ? select64(em, lt, x, y) : select64(em, lt, y, x);
    }
    case SZ_MAXOVER: return eval_maxover(s, e);
    }
    kern_unreachable("sizer: bad SizeExpr node");
}

/* Device-scope acquire and release of the storage buffers. */
static uint32_t acq_rel(spv_emitter *em) {
    return cu32(em, SpvMemorySemanticsAcquireReleaseMask | SpvMemorySemanticsUniformMemoryMask);
}

/* Word KERN_SPV_SIZER_PART + i of the result buffer. */
static uint32_t part_at(sizer_em *s, const void *arg, uint32_t i) {
    (void)arg;
    spv_emitter *em = s->em;
    uint32_t w = spv_op2(&em->b, SpvOpIAdd, u64t(em), i, ci64(em, KERN_SPV_SIZER_PART));
    return spv_op1(&em->b, SpvOpLoad, u64t(em), res_ptr(em, 64, w));
}

/* The range of maxover e over the grid: invocation w folds points lo + w, lo + w + T, ...
 * into its part; the last invocation to finish folds the parts into res[0]. */
static void emit_grid_scan(sizer_em *s, const sz_expr *e, uint32_t w, uint32_t nthreads) {
    spv_emitter *em = s->em;
    uint32_t u64 = u64t(em);
    uint32_t lo = eval(s, e->kids[0]), hi = eval(s, e->kids[1]);
    uint32_t from = arith(em, SZ_ADD, lo, w);
    uint32_t m = fold_max(s, body_at, e, from, hi, nthreads);
    uint32_t any = spv_op2(&em->b, SpvOpSLessThan, em->t_bool, from, hi);
    uint32_t mine = spv_op2(&em->b, SpvOpIAdd, u64, w, ci64(em, KERN_SPV_SIZER_PART));
    spv_instv(&em->b.funcs, SpvOpStore, 2, res_ptr(em, 64, mine),
              select64(em, any, m, ci64(em, INT64_MIN)));
    spv_instv(&em->b.funcs, SpvOpMemoryBarrier, 2, atomic_scope(em), acq_rel(em));
    uint32_t ops[4] = {res_ptr(em, 32, cu32(em, 2 * KERN_SPV_SIZER_TICKET)), atomic_scope(em),
                       acq_rel(em), cu32(em, 1)};
    uint32_t ticket = spv_op(&em->b, SpvOpAtomicIAdd, em->t_u32, ops, 4);
    uint32_t last = eq(em, spv_op1(&em->b, SpvOpUConvert, u64, ticket),
                       spv_op2(&em->b, SpvOpISub, u64, nthreads, ci64(em, 1)));
    sz_if f = if_begin(em, last);
    spv_instv(&em->b.funcs, SpvOpMemoryBarrier, 2, atomic_scope(em), acq_rel(em));
    res_store(em, KERN_SPV_SIZER_RES,
              fold_max(s, part_at, NULL, ci64(em, 0), nthreads, ci64(em, 1)));
    if_end(em, f);
}

void spv_emit_sizer(spv_emitter *em, uint32_t s_index, const sz_expr *e) {
    sizer_em s = {.em = em};
    uint32_t fn = spv_entry_begin(em), w, nthreads;
    spv_entry_params(em, &w, &nthreads);
    if (e->op == SZ_MAXOVER && scans(e))
        emit_grid_scan(&s, e, w, nthreads);
    else {
        sz_if f = if_begin(em, eq(em, w, ci64(em, 0)));
        res_store(em, KERN_SPV_SIZER_RES, eval(&s, e));
        if_end(em, f);
    }
    spv_entry_end(em, fn, 's', (int)s_index);
}
