/* spv_emit_check.c - the debug checks of SPIR-V kernels and the error record
 * (runtime/abi.h, binding 1) they write.
 *
 * A guarded operation (debug checks) is a selection: the checks first, an error record
 * when one fails, the operation under the selection, an OpPhi with 0 after it. The record
 * is written by the module's function record_error (the first error wins); an adstack
 * overflow, checked in every build, calls adstack_overflow. */
#include <stddef.h>

#include "../../common/spvblock.h"
#include "../../runtime/abi.h"
#include "spv_emit_priv.h"

/* ---- error records ---------------------------------------------------------------------- */

static uint32_t err_var(spv_emitter *em) {
    if (!em->v_err) {
        /* a as two 32-bit halves (little-endian): the overflow's atomic max is a 32-bit one,
         * so kernels need no 64-bit atomics (Metal has none) */
        uint32_t u64 = u64t(em), u32 = em->t_u32;
        uint32_t m[7] = {u32, u32, u32, u32, u32, u32, u64};
        uint32_t off[7] = {offsetof(kern_err_record, code), offsetof(kern_err_record, line),
                           offsetof(kern_err_record, col),  offsetof(kern_err_record, dim),
                           offsetof(kern_err_record, a),    offsetof(kern_err_record, a) + 4,
                           offsetof(kern_err_record, b)};
        em->t_err = spv_type_struct(&em->b, m, off, 7, true);
        em->v_err =
            spv_global(&em->b, spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, em->t_err),
                       SpvStorageClassStorageBuffer, 0, KERN_SPV_BIND_ERR);
        static const char *const fields[7] = {"code", "line", "col", "dim", "a_lo", "a_hi", "b"};
        spv_name(&em->b, em->t_err, -1, "kern_err_record");
        for (int i = 0; i < 7; i++)
            spv_name(&em->b, em->t_err, i, fields[i]);
        spv_name(&em->b, em->v_err, -1, "err");
    }
    spv_use_global(em, em->v_err);
    return em->v_err;
}

/* A pointer to member i of the error record (0 code, 1 line, 2 col, 3 dim, 4 and 5 the low
 * and high halves of a, 6 b). */
static uint32_t err_field(spv_emitter *em, uint32_t i) {
    uint32_t t = i == 6 ? u64t(em) : em->t_u32;
    return spv_op2(&em->b, SpvOpAccessChain, spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, t),
                   err_var(em), cu32(em, i));
}

/* void record_error(u32 code, u32 line, u32 col, u32 dim, u64 a, u64 b) (guard_begin calls
 * it): the first error wins (compare-and-swap of code from 0), then the fields
 * (runtime/abi.h). void adstack_overflow(u32 line, u32 col, u64 cap, u64 depth): as
 * backends/llvm/llvm_adstack.c's. Their bodies are written after the entry points
 * (emit_helpers). */
void spv_call_overflow(spv_emitter *em, kern_loc loc, uint32_t cap, uint32_t depth) {
    if (!em->fn_ovf)
        em->fn_ovf = spv_id(&em->b);
    err_var(em);
    uint32_t args[5] = {em->fn_ovf, cu32(em, loc.line), cu32(em, loc.col), cap, depth};
    spv_op(&em->b, SpvOpFunctionCall, em->t_void, args, 5);
}

static uint32_t param(spv_emitter *em, uint32_t type) {
    return spv_op(&em->b, SpvOpFunctionParameter, type, NULL, 0);
}

void spv_emit_helpers(spv_emitter *em) {
    uint32_t u64 = u64t(em), u32 = em->t_u32;
    uint32_t ptr_u32 = spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, u32);
    if (em->fn_error) {
        uint32_t pt[6] = {u32, u32, u32, u32, u64, u64};
        spv_function_begin(em, em->fn_error, spv_type_fn(&em->b, em->t_void, pt, 6));
        uint32_t p[6];
        for (int i = 0; i < 6; i++)
            p[i] = param(em, pt[i]);
        label(em, spv_id(&em->b));
        uint32_t ops[6] = {err_field(em, 0), atomic_scope(em), relaxed(em), relaxed(em), p[0],
                           cu32(em, 0)};
        uint32_t old = spv_op(&em->b, SpvOpAtomicCompareExchange, u32, ops, 6);
        uint32_t won = spv_op2(&em->b, SpvOpIEqual, em->t_bool, old, cu32(em, 0));
        uint32_t l_write = spv_id(&em->b), l_done = spv_id(&em->b);
        selection_merge(em, l_done);
        branch_cond(em, won, l_write, l_done);
        label(em, l_write);
        for (uint32_t i = 1; i < 4; i++)
            spv_instv(&em->b.funcs, SpvOpStore, 2, err_field(em, i), p[i]);
        uint32_t hi = spv_op2(&em->b, SpvOpShiftRightLogical, u64, p[4], cu64(em, 32));
        spv_instv(&em->b.funcs, SpvOpStore, 2, err_field(em, 4),
                  spv_op1(&em->b, SpvOpUConvert, u32, p[4]));
        spv_instv(&em->b.funcs, SpvOpStore, 2, err_field(em, 5),
                  spv_op1(&em->b, SpvOpUConvert, u32, hi));
        spv_instv(&em->b.funcs, SpvOpStore, 2, err_field(em, 6), p[5]);
        branch(em, l_done);
        label(em, l_done);
        spv_function_end(em);
    }
    if (em->fn_ovf) {
        uint32_t pt[4] = {u32, u32, u64, u64};
        spv_function_begin(em, em->fn_ovf, spv_type_fn(&em->b, em->t_void, pt, 4));
        uint32_t p[4];
        for (int i = 0; i < 4; i++)
            p[i] = param(em, pt[i]);
        label(em, spv_id(&em->b));
        uint32_t code = cu32(em, KERN_DEVERR_ADSTACK);
        uint32_t ops[6] = {err_field(em, 0), atomic_scope(em), relaxed(em), relaxed(em), code,
                           cu32(em, 0)};
        uint32_t old = spv_op(&em->b, SpvOpAtomicCompareExchange, u32, ops, 6);
        uint32_t won = spv_op2(&em->b, SpvOpIEqual, em->t_bool, old, cu32(em, 0));
        uint32_t l_first = spv_id(&em->b), l_mid = spv_id(&em->b), l_max = spv_id(&em->b),
                 l_done = spv_id(&em->b);
        selection_merge(em, l_mid);
        branch_cond(em, won, l_first, l_mid);
        label(em, l_first);
        spv_instv(&em->b.funcs, SpvOpStore, 2, err_field(em, 1), p[0]);
        spv_instv(&em->b.funcs, SpvOpStore, 2, err_field(em, 2), p[1]);
        spv_instv(&em->b.funcs, SpvOpStore, 2, err_field(em, 6), p[2]);
        branch(em, l_mid);
        label(em, l_mid);
        /* the winner, or a record that already holds an overflow: raise a to the depth */
        uint32_t was = spv_op2(&em->b, SpvOpIEqual, em->t_bool, old, code);
        uint32_t raise = spv_op2(&em->b, SpvOpLogicalOr, em->t_bool, won, was);
        selection_merge(em, l_done);
        branch_cond(em, raise, l_max, l_done);
        label(em, l_max);
        /* the depth, at most 2^31 - 1 (a's high half stays 0 from the launch) */
        uint32_t big = spv_op2(&em->b, SpvOpUGreaterThan, em->t_bool, p[3], cu64(em, 0x7fffffffu));
        uint32_t d32 = spv_op3(&em->b, SpvOpSelect, u32, big, cu32(em, 0x7fffffffu),
                               spv_op1(&em->b, SpvOpUConvert, u32, p[3]));
        uint32_t mops[4] = {err_field(em, 4), atomic_scope(em), relaxed(em), d32};
        spv_op(&em->b, SpvOpAtomicUMax, u32, mops, 4);
        branch(em, l_done);
        label(em, l_done);
        spv_function_end(em);
    }
    (void)ptr_u32;
}

/* ---- guards (debug checks) -------------------------------------------------------------- */

/* Adds a check: cond must hold, else the record (code, dim, a, b). Checks added later are
 * reported only when the earlier ones passed. */
void spv_guard_add(spv_emitter *em, spv_guard *g, uint32_t cond, uint32_t code, uint32_t dim,
                   uint32_t a64, uint32_t b64) {
    if (!g->ok) {
        g->ok = cond;
        g->code = cu32(em, code);
        g->dim = dim;
        g->a = a64;
        g->b = b64;
        return;
    }
    /* keep the earlier record where it failed */
    uint32_t u64 = u64t(em);
    g->code = spv_op3(&em->b, SpvOpSelect, em->t_u32, g->ok, cu32(em, code), g->code);
    g->dim = spv_op3(&em->b, SpvOpSelect, em->t_u32, g->ok, dim, g->dim);
    g->a = spv_op3(&em->b, SpvOpSelect, u64, g->ok, a64, g->a);
    g->b = spv_op3(&em->b, SpvOpSelect, u64, g->ok, b64, g->b);
    g->ok = spv_op2(&em->b, SpvOpLogicalAnd, em->t_bool, g->ok, cond);
}

/* After the checks: records the error when one failed, then opens the selection under
 * which the operation runs. */
void spv_guard_begin(spv_emitter *em, spv_guard *g, const ir_op *op) {
    if (!g->ok)
        return;
    uint32_t l_fail = spv_id(&em->b), l_ok = spv_id(&em->b), l_j = spv_id(&em->b);
    selection_merge(em, l_j);
    branch_cond(em, g->ok, l_ok, l_fail);
    label(em, l_fail);
    /* the record's code is chosen at run time: call with it */
    if (!em->fn_error)
        em->fn_error = spv_id(&em->b);
    err_var(em);
    uint32_t args[7] = {
        em->fn_error, g->code, cu32(em, op->loc.line), cu32(em, op->loc.col), g->dim, g->a, g->b};
    spv_op(&em->b, SpvOpFunctionCall, em->t_void, args, 7);
    branch(em, l_j);
    label(em, l_ok);
    g->l_merge = l_j;
    g->l_pre = l_fail;
}

/* Closes the selection: the result is v, or zero (of type) when a check failed. */
uint32_t spv_guard_end(spv_emitter *em, spv_guard *g, uint32_t v, uint32_t zero, uint32_t type) {
    if (!g->ok)
        return v;
    uint32_t from = em->cur;
    branch(em, g->l_merge);
    label(em, g->l_merge);
    if (!v)
        return 0;
    /* predecessors: the end of the checked path and the block that recorded the error */
    return phi2(em, type, v, from, zero, g->l_pre);
}
