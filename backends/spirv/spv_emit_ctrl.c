/* spv_emit_ctrl.c - structured control flow in SPIR-V: regions, if, for and while, and
 * the u64 strided loops of the task level (spv_emit.c, spv_emit_adds.c).
 *
 * Control flow is written block by block in the order of the IR, so every block follows
 * its dominators:
 *   if     header: OpSelectionMerge, OpBranchConditional; then blocks, else blocks; merge
 *          block with OpPhi of the yields;
 *   for    header: OpPhi (index, carried), OpLoopMerge, OpBranchConditional (i < hi) to the
 *          body or the merge; body blocks; the continue block (i + 1) back to the header.
 *          The header's OpPhi operands from the continue block are patched once the body
 *          has been emitted. With IR_FOR_EARLY_EXIT the body's end branches on "go on" to
 *          the continue block or the merge (a break), and the merge block has OpPhis; a
 *          checked innermost for loop with accesses at its index is tested once and
 *          emitted twice, under a selection (emit_for);
 *   while  header: OpPhi, OpLoopMerge, OpBranch to the before region; its condition
 *          branches to the after region or the merge (a break); the after region's end goes
 *          to the continue block, which goes back to the header. */
#include <stdlib.h>

#include "spv_emit_priv.h"

static uint32_t *tmp_ids(uint32_t n) {
    uint32_t *a = calloc(n ? n : 1, sizeof *a);
    if (!a)
        kern_oom(n * sizeof *a);
    return a;
}

static void emit_if(spv_emitter *em, const ir_op *op) {
    uint32_t n = op->nresults;
    uint32_t l_then = spv_id(&em->b), l_else = spv_id(&em->b), l_merge = spv_id(&em->b);
    selection_merge(em, l_merge);
    branch_cond(em, val(em, op->operands[0]), l_then, l_else);
    uint32_t *vt = tmp_ids(n), *ve = tmp_ids(n);
    label(em, l_then);
    const ir_op *y = spv_emit_region(em, op->regions[0]);
    for (uint32_t i = 0; i < n; i++)
        vt[i] = val(em, y->operands[i]);
    uint32_t end_then = em->cur;
    branch(em, l_merge);
    label(em, l_else);
    y = spv_emit_region(em, op->regions[1]);
    for (uint32_t i = 0; i < n; i++)
        ve[i] = val(em, y->operands[i]);
    uint32_t end_else = em->cur;
    branch(em, l_merge);
    label(em, l_merge);
    for (uint32_t i = 0; i < n; i++)
        set_val(em, op->results[i],
                phi2(em, spv_reg_type(em, op->results[i]->type), vt[i], end_then, ve[i], end_else));
    free(vt);
    free(ve);
}

/* Loop headers: one OpPhi per carried value with the entry value; the operands from the
 * continue block are patched in later (the returned word positions). */
static uint32_t header_phi(spv_emitter *em, uint32_t type, uint32_t init, uint32_t pre,
                           uint32_t l_cont, uint32_t *patch_at) {
    *patch_at = spv_here(&em->b) + 5;
    return phi2(em, type, init, pre, 0, l_cont);
}

enum { UNROLL = 4, UNROLL_MIN_OPS = 16 };

/* Whether the loop op runs UNROLL iterations per trip (emit_loop_from): an innermost loop
 * without an early exit whose body has at least UNROLL_MIN_OPS ops. */
static bool unrolls(const ir_op *op) {
    const ir_region *body = op->regions[0];
    return op->code == IR_FOR && !(op->attr & IR_FOR_EARLY_EXIT) && !ir_region_has_loop(body) &&
           ir_region_count_ops(body) >= UNROLL_MIN_OPS;
}

/* The loop of op from index lo with the carried values init[] (op's own operands where
 * NULL), `steps` iterations per trip: 1, or (a loop without an early exit) more while at
 * least that many are left, the body emitted once per step, and then the rest one at a
 * time; sets op's results. */
static void emit_loop_from(spv_emitter *em, const ir_op *op, uint32_t lo, const uint32_t *init,
                           int steps) {
    bool early = (op->attr & IR_FOR_EARLY_EXIT) != 0;
    kern_assert(steps == 1 || !early);
    uint32_t n = op->nresults;
    const ir_region *body = op->regions[0];
    const kern_type *it = op->operands[0]->type;
    uint32_t ity = spv_reg_type(em, it);
    uint32_t hi = val(em, op->operands[1]);
    uint32_t pre = em->cur;
    uint32_t l_head = spv_id(&em->b), l_body = spv_id(&em->b), l_cont = spv_id(&em->b),
             l_merge = spv_id(&em->b);
    branch(em, l_head);
    label(em, l_head);
    uint32_t i_at, *at = tmp_ids(n), *carried = tmp_ids(n), *next = tmp_ids(n);
    uint32_t iphi = header_phi(em, ity, lo, pre, l_cont, &i_at);
    for (uint32_t k = 0; k < n; k++)
        carried[k] = header_phi(em, spv_reg_type(em, op->results[k]->type),
                                init ? init[k] : val(em, op->operands[2 + k]), pre, l_cont, &at[k]);
    uint32_t one = is_i64(it) ? cu64(em, 1) : cu32(em, 1);
    uint32_t go =
        spv_op2(&em->b, ty_is_unsigned(it) ? SpvOpULessThan : SpvOpSLessThan, em->t_bool, iphi, hi);
    if (steps > 1) { /* and hi - i > steps - 1: once i < hi, the difference is exact unsigned */
        uint32_t left = spv_op2(&em->b, SpvOpISub, ity, hi, iphi);
        uint32_t enough =
            spv_op2(&em->b, SpvOpUGreaterThan, em->t_bool, left,
                    is_i64(it) ? cu64(em, (uint64_t)steps - 1) : cu32(em, (uint32_t)steps - 1));
        go = spv_op2(&em->b, SpvOpLogicalAnd, em->t_bool, go, enough);
    }
    spv_instv(&em->b.funcs, SpvOpLoopMerge, 3, l_merge, l_cont, SpvLoopControlMaskNone);
    branch_cond(em, go, l_body, l_merge);
    label(em, l_body);
    uint32_t idx = iphi;
    const ir_op *y = NULL;
    for (uint32_t k = 0; k < n; k++)
        next[k] = carried[k];
    for (int u = 0; u < steps; u++) {
        if (u)
            idx = spv_op2(&em->b, SpvOpIAdd, ity, idx, one);
        set_val(em, body->args[0], idx);
        for (uint32_t k = 0; k < n; k++)
            set_val(em, body->args[1 + k], next[k]);
        y = spv_emit_region(em, body);
        for (uint32_t k = 0; k < n; k++)
            next[k] = val(em, y->operands[(early ? 1 : 0) + k]);
    }
    uint32_t body_end = em->cur;
    if (early)
        branch_cond(em, val(em, y->operands[0]), l_cont, l_merge);
    else
        branch(em, l_cont);
    label(em, l_cont);
    uint32_t inext = spv_op2(&em->b, SpvOpIAdd, ity, idx, one);
    branch(em, l_head);
    spv_patch(&em->b, i_at, inext);
    for (uint32_t k = 0; k < n; k++)
        spv_patch(&em->b, at[k], next[k]);
    label(em, l_merge);
    if (steps > 1)
        emit_loop_from(em, op, iphi, carried, 1);
    else
        for (uint32_t k = 0; k < n; k++)
            set_val(em, op->results[k],
                    early ? phi2(em, spv_reg_type(em, op->results[k]->type), carried[k], l_head,
                                 next[k], body_end)
                          : carried[k]);
    free(at);
    free(carried);
    free(next);
}

/* may_unroll: not the checked copy of a tested loop (which runs only where a test failed) */
static void emit_loop(spv_emitter *em, const ir_op *op, bool may_unroll) {
    emit_loop_from(em, op, val(em, op->operands[0]), NULL, may_unroll && unrolls(op) ? UNROLL : 1);
}

/* idx is (hi - 1) - t, the reverse sweep's index over a loop index t of a loop to hi */
static bool reversed(const ir_value *idx, const ir_value *t, const ir_value *hi) {
    const ir_op *s = idx->def, *top = s && s->code == IR_SUB ? s->operands[0]->def : NULL;
    return top && s->operands[1] == t && top->code == IR_SUB && top->operands[0] == hi &&
           top->operands[1]->def && top->operands[1]->def->code == IR_CONST &&
           top->operands[1]->def->imm.i == 1;
}

/* The checked accesses in r (and its nested regions) of a one-dimensional array at index t
 * (the loop's index) or (hi - 1) - t, into acc (at most max); their count. */
static int loop_accesses(const ir_region *r, const ir_value *t, const ir_value *hi,
                         const ir_op **acc, int n, int max) {
    ir_foreach_op(op, r) {
        if (ir_is_access(op->code) && op->operands[0]->type->rank == 1 &&
            (op->operands[1] == t || reversed(op->operands[1], t, hi)) &&
            !ir_index_in_dim(op->operands[1], op->operands[0], 0) && n < max)
            acc[n++] = op;
        for (uint32_t i = 0; i < op->nregions; i++)
            n = loop_accesses(op->regions[i], t, hi, acc, n, max);
    }
    return n;
}

/* c where cond is t >= hi - c with c computed before the loop: the aligned reverse sweep's
 * `if` around a work item's own steps (the last c of the group's hi), or NULL */
static const ir_value *aligned_count(const ir_value *cond, const ir_value *t, const ir_value *hi,
                                     const ir_region *body) {
    const ir_op *g = cond->def, *s = NULL;
    if (g && g->code == IR_GE && g->operands[0] == t)
        s = g->operands[1]->def;
    if (!s || s->code != IR_SUB || s->operands[0] != hi || ir_defined_in(s->operands[1], body))
        return NULL;
    return s->operands[1];
}

/* Per adstack, what runs its pushes and pops in a loop body without loops (each op at most
 * once per iteration): at the top level of the body (every iteration: count NULL), or in
 * the then-region of the aligned sweep's `if` (the iterations t >= hi - c: count c), the
 * same for all its ops; else (another `if`, mixed) the stack is not tested. */
typedef struct stack_runs {
    int push, pop;
    int state; /* 0 none, 1 counted, -1 not testable */
    const ir_value *count;
} stack_runs;

static void loop_stack_count(const ir_region *r, const ir_region *body, const ir_value *hi,
                             const ir_value *count, bool other, stack_runs *st) {
    ir_foreach_op(op, r) {
        if (op->code == IR_ADPUSH || op->code == IR_ADPOP) {
            stack_runs *u = &st[op->imm.i];
            (op->code == IR_ADPUSH ? &u->push : &u->pop)[0]++;
            if (other || (u->state == 1 && u->count != count))
                u->state = -1;
            else if (u->state == 0)
                u->state = 1, u->count = count;
        }
        const ir_value *c = op->code == IR_IF && r == body
                                ? aligned_count(op->operands[0], body->args[0], hi, body)
                                : NULL;
        for (uint32_t i = 0; i < op->nregions; i++)
            loop_stack_count(op->regions[i], body, hi, c && i == 0 ? c : NULL, !(c && i == 0), st);
    }
}

/* The pushes and pops in the loop body r of the stacks that `testable` marks, into ops (at
 * most max); their count. */
static int loop_stack_ops(const ir_region *r, const bool *testable, const ir_op **ops, int n,
                          int max) {
    ir_foreach_op(op, r) {
        if ((op->code == IR_ADPUSH || op->code == IR_ADPOP) && testable[op->imm.i] && n < max)
            ops[n++] = op;
        for (uint32_t i = 0; i < op->nregions; i++)
            n = loop_stack_ops(op->regions[i], testable, ops, n, max);
    }
    return n;
}

enum { TESTED_MAX = 32, STACK_OPS_MAX = 16 };

/* The test that every push and pop of the loop stays in its stack, per testable stack: n,
 * the iterations that run its ops (u64): the loop's trip count `iters`, or for ops under
 * the aligned sweep's `if` its c where 0 <= c <= hi (then hi - c does not wrap, and at most
 * c iterations pass the `if`); at offset off = pos - base from the heap position (in
 * elements; the stack holds span = cap slots-strided entries), with m = n slots: off <=
 * span, n <= cap (so that m <= span), slots != 0, pops m <= off and off + pushes m <= span. At most
 * STACK_OPS_MAX of each per iteration and span below 2^59 elements keep the products from
 * wrapping. hi: the loop's hi in u64, t its index type. */
static uint32_t stacks_test(spv_emitter *em, const stack_runs *st, const bool *testable,
                            uint32_t iters, uint32_t hi, const kern_type *t) {
    uint32_t u64 = u64t(em), ok = spv_const_bool(&em->b, true);
    bool sgn = !ty_is_unsigned(t);
    for (uint32_t s = 0; s < em->kernel->nadstacks; s++) {
        if (!testable[s])
            continue;
        uint32_t n = iters;
        if (st[s].count) {
            n = spv_to_u64(em, val(em, st[s].count), t);
            ok = spv_op2(&em->b, SpvOpLogicalAnd, em->t_bool, ok,
                         spv_op2(&em->b, sgn ? SpvOpSLessThanEqual : SpvOpULessThanEqual,
                                 em->t_bool, n, hi));
            if (sgn)
                ok = spv_op2(&em->b, SpvOpLogicalAnd, em->t_bool, ok,
                             spv_op2(&em->b, SpvOpSGreaterThanEqual, em->t_bool, n, cu64(em, 0)));
        }
        uint32_t off = spv_op2(&em->b, SpvOpISub, u64,
                               spv_op1(&em->b, SpvOpLoad, u64, em->ad_pos[s]), em->ad_base[s]);
        uint32_t m = spv_op2(&em->b, SpvOpIMul, u64, n, em->ad_slots);
        /* (no slots: a launch without a heap, where every push fails its own test) */
        uint32_t c[5] = {spv_op2(&em->b, SpvOpULessThanEqual, em->t_bool, off, em->ad_span[s]),
                         spv_op2(&em->b, SpvOpULessThanEqual, em->t_bool, n, em->ad_cap[s]),
                         spv_op2(&em->b, SpvOpINotEqual, em->t_bool, em->ad_slots, cu64(em, 0)), 0,
                         0};
        if (st[s].pop) /* (a stack with pops only, or pushes only, tests one side) */
            c[3] = spv_op2(&em->b, SpvOpULessThanEqual, em->t_bool,
                           spv_op2(&em->b, SpvOpIMul, u64, m, cu64(em, (uint64_t)st[s].pop)), off);
        if (st[s].push)
            c[4] =
                spv_op2(&em->b, SpvOpULessThanEqual, em->t_bool,
                        spv_op2(&em->b, SpvOpIAdd, u64, off,
                                spv_op2(&em->b, SpvOpIMul, u64, m, cu64(em, (uint64_t)st[s].push))),
                        em->ad_span[s]);
        for (int i = 0; i < 5; i++)
            if (c[i])
                ok = spv_op2(&em->b, SpvOpLogicalAnd, em->t_bool, ok, c[i]);
    }
    return ok;
}

/* An innermost `for` loop is tested once, where the test covers something:
 * - checked code: its accesses a[t] at its index t or at (hi - 1) - t (`for t in 0..n[i] {
 *   w[t] }`, the reverse sweep's `w.grad[n - 1 - t]`): lo >= 0 and hi <= len(a) for each
 *   such a;
 * - its adstack pushes and pops (always checked: an overflow is reported even without
 *   checks) of the stacks whose ops all sit at the top level of the body, or all under the
 *   aligned reverse sweep's `if`, at most STACK_OPS_MAX of each per iteration: stacks_test.
 * Where the test holds the loop runs in a copy without those checks, else in the checked
 * copy; the results are merged after both. Other accesses keep their checks in both. */
static void emit_for(spv_emitter *em, const ir_op *op) {
    const ir_region *body = op->regions[0];
    const ir_op *acc[TESTED_MAX];
    uint32_t ns = em->kernel->nadstacks;
    stack_runs *st = calloc(ns + 1, sizeof *st);
    bool *testable = calloc(ns + 1, sizeof *testable);
    if (!st || !testable)
        kern_oom((ns + 1) * sizeof *st);
    bool inner = !em->ntested && !ir_region_has_loop(body);
    int n = inner && em->checks ? loop_accesses(body, body->args[0], op->operands[1], acc, 0,
                                                TESTED_MAX - STACK_OPS_MAX)
                                : 0;
    int na = n;
    if (inner && ns) {
        loop_stack_count(body, body, op->operands[1], NULL, false, st);
        for (uint32_t s = 0; s < ns; s++)
            testable[s] =
                st[s].state == 1 && st[s].push <= STACK_OPS_MAX && st[s].pop <= STACK_OPS_MAX;
        n = loop_stack_ops(body, testable, acc, n, TESTED_MAX);
    }
    if (!n) {
        free(testable);
        free(st);
        emit_loop(em, op, true);
        return;
    }
    const kern_type *it = op->operands[0]->type;
    uint32_t lo = val(em, op->operands[0]), hi = spv_to_u64(em, val(em, op->operands[1]), it);
    uint32_t ok = ty_is_unsigned(it) || !na ? spv_const_bool(&em->b, true)
                                            : spv_op2(&em->b, SpvOpSGreaterThanEqual, em->t_bool,
                                                      lo, is_i64(it) ? cu64(em, 0) : cu32(em, 0));
    for (int i = 0; i < na; i++) {
        int p = param_of(em, acc[i]->operands[0]);
        ok = spv_op2(&em->b, SpvOpLogicalAnd, em->t_bool, ok,
                     spv_op2(&em->b, SpvOpULessThanEqual, em->t_bool, hi, em->shape[p][0]));
    }
    if (n > na) { /* the trip count: hi - lo where hi > lo (exact in u64), else 0 */
        uint32_t lo64 = spv_to_u64(em, lo, it);
        uint32_t more = spv_op2(&em->b, ty_is_unsigned(it) ? SpvOpUGreaterThan : SpvOpSGreaterThan,
                                em->t_bool, hi, lo64);
        uint32_t iters = spv_op3(&em->b, SpvOpSelect, u64t(em), more,
                                 spv_op2(&em->b, SpvOpISub, u64t(em), hi, lo64), cu64(em, 0));
        ok = spv_op2(&em->b, SpvOpLogicalAnd, em->t_bool, ok,
                     stacks_test(em, st, testable, iters, hi, it));
    }
    free(st);
    free(testable);
    uint32_t nr = op->nresults;
    uint32_t l_fast = spv_id(&em->b), l_checked = spv_id(&em->b), l_merge = spv_id(&em->b);
    uint32_t *vf = tmp_ids(nr);
    selection_merge(em, l_merge);
    branch_cond(em, ok, l_fast, l_checked);
    label(em, l_fast);
    em->tested = acc;
    em->ntested = n;
    emit_loop(em, op, true);
    em->tested = NULL;
    em->ntested = 0;
    for (uint32_t k = 0; k < nr; k++)
        vf[k] = val(em, op->results[k]);
    uint32_t end_fast = em->cur;
    branch(em, l_merge);
    label(em, l_checked);
    emit_loop(em, op, false);
    uint32_t end_checked = em->cur;
    branch(em, l_merge);
    label(em, l_merge);
    for (uint32_t k = 0; k < nr; k++)
        set_val(em, op->results[k],
                phi2(em, spv_reg_type(em, op->results[k]->type), vf[k], end_fast,
                     val(em, op->results[k]), end_checked));
    free(vf);
}

static void emit_while(spv_emitter *em, const ir_op *op) {
    const ir_region *before = op->regions[0], *after = op->regions[1];
    uint32_t ninit = op->noperands;
    uint32_t pre = em->cur;
    uint32_t l_head = spv_id(&em->b), l_before = spv_id(&em->b), l_after = spv_id(&em->b),
             l_cont = spv_id(&em->b), l_merge = spv_id(&em->b);
    branch(em, l_head);
    label(em, l_head);
    uint32_t *at = tmp_ids(ninit);
    for (uint32_t k = 0; k < ninit; k++)
        set_val(em, before->args[k],
                header_phi(em, spv_reg_type(em, op->operands[k]->type), val(em, op->operands[k]),
                           pre, l_cont, &at[k]));
    spv_instv(&em->b.funcs, SpvOpLoopMerge, 3, l_merge, l_cont, SpvLoopControlMaskNone);
    branch(em, l_before);
    label(em, l_before);
    const ir_op *cond = spv_emit_region(em, before);
    for (uint32_t k = 0; k < op->nresults; k++) {
        uint32_t v = val(em, cond->operands[1 + k]);
        set_val(em, after->args[k], v);
        set_val(em, op->results[k], v);
    }
    branch_cond(em, val(em, cond->operands[0]), l_after, l_merge);
    label(em, l_after);
    const ir_op *y = spv_emit_region(em, after);
    uint32_t *next = tmp_ids(ninit);
    for (uint32_t k = 0; k < ninit; k++)
        next[k] = val(em, y->operands[k]);
    branch(em, l_cont);
    label(em, l_cont);
    branch(em, l_head);
    for (uint32_t k = 0; k < ninit; k++)
        spv_patch(&em->b, at[k], next[k]);
    label(em, l_merge);
    free(at);
    free(next);
}

const ir_op *spv_emit_region(spv_emitter *em, const ir_region *r) {
    ir_foreach_op(op, r) {
        switch (op->code) {
        case IR_YIELD:
        case IR_CONDITION: return op;
        case IR_IF: emit_if(em, op); break;
        case IR_FOR: emit_for(em, op); break;
        case IR_WHILE: emit_while(em, op); break;
        case IR_ADPUSH: spv_emit_adpush(em, op); break;
        case IR_ADPOP: spv_emit_adpop(em, op); break;
        case IR_PARALLEL:
        case IR_SERIAL: kern_unreachable("SPIR-V backend: a task inside a region");
        default: spv_emit_simple(em, op); break;
        }
    }
    return NULL;
}

uint32_t spv_strided_begin(spv_emitter *em, uint32_t start, uint32_t end, spv_strided *st) {
    uint32_t pre = em->cur, l_body = spv_id(&em->b);
    st->l_head = spv_id(&em->b);
    st->l_cont = spv_id(&em->b);
    st->l_merge = spv_id(&em->b);
    branch(em, st->l_head);
    label(em, st->l_head);
    uint32_t i = header_phi(em, u64t(em), start, pre, st->l_cont, &st->at);
    uint32_t more = spv_op2(&em->b, SpvOpULessThan, em->t_bool, i, end);
    spv_instv(&em->b.funcs, SpvOpLoopMerge, 3, st->l_merge, st->l_cont, SpvLoopControlMaskNone);
    branch_cond(em, more, l_body, st->l_merge);
    label(em, l_body);
    return i;
}

void spv_strided_end(spv_emitter *em, const spv_strided *st, uint32_t i, uint32_t step) {
    branch(em, st->l_cont);
    label(em, st->l_cont);
    spv_patch(&em->b, st->at, spv_op2(&em->b, SpvOpIAdd, u64t(em), i, step));
    branch(em, st->l_head);
    label(em, st->l_merge);
}
