/* lower_semantics.c - the language's rules for integer division, shifts, min/max and sign
 * (docs/reference.md), written once as plain IR that every emitter maps one to one.
 *
 * What: each op below is replaced by plain ops (docs/passes.md, "Lowering the rules"):
 *   div/rem, signed    d = select(b == 0 || b == -1, 1, b); q = div(a, d) (rem(a, d));
 *                      select(b == -1, -a, q) (rem: select(b == -1, 0, q)): INT_MIN / -1
 *                      wraps, and a division by zero divides by 1 (undefined in the
 *                      language; no trap);
 *   div/rem, u32       select(b == 0, 1, b) as the divisor;
 *   shl/shr            the count masked: and(b, bits - 1);
 *   min / max          select(b < a, b, a) / select(b > a, b, a): operand 0 on ties and
 *                      when a is NaN; clamp(x, lo, hi) is min(max(x, lo), hi);
 *   sign               float: select(a > 0, 1, select(a < 0, -1, a)) (-0.0 and NaN keep
 *                      themselves); i32/i64: cast(a > 0) - cast(a < 0); u32: cast(a != 0);
 *   erf erfc log1p expm1 cbrt hypot
 *                      accurate expansions into exp, log, pow, sqrt, copysign and
 *                      arithmetic (lower_math.c, with their error bounds);
 *   stopgrad           its operand (autodiff, which it was for, is over).
 * In checked mode (kc_options.debug) a `check` op stands before a division (ok: b != 0,
 * record a, b as i64: KERN_DEVERR_DIV_ZERO) and before a shift (ok: 0 <= b < bits, record
 * the count and the width: KERN_DEVERR_SHIFT); every emitter maps it to its "record an
 * error" path. The arithmetic after it is the release one, so nothing is skipped: a failed
 * division or shift yields what a release build computes. Checks stand at the top level
 * too: each backend recomputes top-level values in its task functions, where the record
 * exists (the CPU's count functions have none and skip them).
 *
 * What stays in the emitters: float division (IEEE), float rem (fmod: exact on the CPU and
 * CUDA; x - y trunc(x / y) where the target's frem is that, see docs/reference.md), trunc,
 * rint and copysign (an instruction or an intrinsic everywhere), abs (llvm.abs / a select), the bounds
 * checks of loads, stores and atomics (a failed one must skip the access: memory safety,
 * not arithmetic), and float -> integer casts: LLVM's llvm.fptosi.sat is one instruction
 * on most targets where a lowering to clamps, compares and selects would be several, so
 * each emitter keeps its own saturating cast (SPIR-V emulates it).
 *
 * Where: the last step of kc_compile_source (compiler/driver.c), after the gradients and
 * the optimizer, which still see the plain ops with their full meaning (the interpreter
 * gives them that meaning too). Records each parallel task's extents first
 * (ir_kernel.extents), since ad_task_extent reads min/max/div, which are gone after.
 * Requires a verified module that is not lowered yet; sets ir_module.lowered; the result
 * verifies. */
#include "lower_math.h"

#include "../runtime/abi.h"

typedef struct lowerer {
    ir_module *m;
    ir_subst subst;
    bool checks;
} lowerer;

static ir_value *cint(ir_builder *b, const kern_type *t, int64_t v) { return ir_const_int(b, t, v); }

static ir_value *to_i64(ir_builder *b, ir_value *v) {
    return v->type == ty_i64() ? v : ir_cast(b, ty_i64(), v);
}

static void check(ir_builder *b, ir_value *ok, ir_value *x, ir_value *y, int code) {
    ir_value *ops[3] = {ok, to_i64(b, x), to_i64(b, y)};
    ir_build(b, IR_CHECK, ops, 3, NULL, 0, 0)->imm.i = code;
}

static ir_value *lower_divrem(lowerer *L, ir_builder *b, ir_op *op) {
    ir_value *a = op->operands[0], *d = op->operands[1];
    const kern_type *t = a->type;
    ir_value *zero = cint(b, t, 0), *one = cint(b, t, 1);
    ir_value *is0 = ir_binop(b, IR_EQ, d, zero);
    if (L->checks)
        check(b, ir_unop(b, IR_NOT, is0), a, d, KERN_DEVERR_DIV_ZERO);
    if (ty_is_unsigned(t))
        return ir_binop(b, op->code, a, ir_select(b, is0, one, d));
    ir_value *ism1 = ir_binop(b, IR_EQ, d, cint(b, t, -1));
    ir_value *safe = ir_select(b, ir_binop(b, IR_OR, is0, ism1), one, d);
    ir_value *q = ir_binop(b, op->code, a, safe);
    return ir_select(b, ism1, op->code == IR_DIV ? ir_unop(b, IR_NEG, a) : zero, q);
}

static ir_value *lower_shift(lowerer *L, ir_builder *b, ir_op *op) {
    ir_value *a = op->operands[0], *n = op->operands[1];
    const kern_type *t = a->type;
    int bits = ty_bits(t);
    if (L->checks) { /* the count read unsigned: a negative one is out of range */
        ir_value *ok = ir_binop(b, IR_LT, n, cint(b, t, bits));
        if (!ty_is_unsigned(t))
            ok = ir_binop(b, IR_AND, ir_binop(b, IR_GE, n, cint(b, t, 0)), ok);
        check(b, ok, n, ir_const_int(b, ty_i64(), bits), KERN_DEVERR_SHIFT);
    }
    return ir_binop(b, op->code, a, ir_binop(b, IR_AND, n, cint(b, t, bits - 1)));
}

/* select(b < a, b, a) (min) / select(b > a, b, a) (max) */
static ir_value *minmax(ir_builder *b, bool is_min, ir_value *x, ir_value *y) {
    return ir_select(b, ir_binop(b, is_min ? IR_LT : IR_GT, y, x), y, x);
}

static ir_value *lower_sign(ir_builder *b, ir_value *a) {
    const kern_type *t = a->type;
    if (ty_is_float(t)) {
        ir_value *z = ir_const_float(b, t, 0.0);
        ir_value *gt = ir_binop(b, IR_GT, a, z), *lt = ir_binop(b, IR_LT, a, z);
        ir_value *r = ir_select(b, lt, ir_const_float(b, t, -1.0), a);
        return ir_select(b, gt, ir_const_float(b, t, 1.0), r);
    }
    ir_value *z = cint(b, t, 0);
    if (ty_is_unsigned(t))
        return ir_cast(b, t, ir_binop(b, IR_NE, a, z));
    ir_value *gt = ir_cast(b, t, ir_binop(b, IR_GT, a, z));
    ir_value *lt = ir_cast(b, t, ir_binop(b, IR_LT, a, z));
    return ir_binop(b, IR_SUB, gt, lt);
}

/* The replacement of op's result, built before op; NULL when op stays. */
static ir_value *lower_op(lowerer *L, ir_op *op) {
    const kern_type *t = op->noperands ? op->operands[0]->type : NULL;
    ir_builder b = ir_builder_before(L->m, op);
    ir_value *const *o = op->operands;
    switch (op->code) {
    case IR_DIV:
    case IR_REM: return ty_is_int(t) ? lower_divrem(L, &b, op) : NULL;
    case IR_SHL:
    case IR_SHR: return lower_shift(L, &b, op);
    case IR_MIN:
    case IR_MAX: return minmax(&b, op->code == IR_MIN, o[0], o[1]);
    case IR_CLAMP: return minmax(&b, true, minmax(&b, false, o[0], o[1]), o[2]);
    case IR_SIGN: return lower_sign(&b, o[0]);
    default: return lower_math_op(&b, op);
    }
}

static void lower_region(lowerer *L, ir_region *r) {
    for (ir_op *op = r->first, *next; op; op = next) {
        next = op->next;
        ir_subst_op(&L->subst, op);
        for (uint32_t i = 0; i < op->nregions; i++)
            lower_region(L, op->regions[i]);
        ir_value *v = lower_op(L, op);
        if (v) {
            ir_subst_add(&L->subst, op->results[0], v);
            ir_remove(op);
        }
    }
}

/* The extents of k's parallel tasks, in order, while min/max/div are still there. */
static void record_extents(ir_module *m, ir_kernel *k) {
    uint32_t n = 0;
    ir_foreach_op(op, k->body) if (op->code == IR_PARALLEL) n += op->noperands / 2;
    k->extents = n ? arena_alloc(&m->mem, n * sizeof *k->extents) : NULL;
    k->nextents = n;
    uint32_t i = 0;
    ir_foreach_op(op, k->body) {
        if (op->code == IR_PARALLEL)
            for (uint32_t d = 0; d < op->noperands / 2; d++)
                k->extents[i++] = ad_task_extent(k, op, d, &m->mem);
    }
}

bool ir_lower_semantics(ir_module *m, bool checks) {
    kern_assert(!m->lowered);
    lowerer L = {.m = m, .checks = checks};
    for (ir_kernel *k = m->kernels; k; k = k->next) {
        record_extents(m, k);
        ir_subst_begin(&L.subst, k);
        lower_region(&L, k->body);
    }
    ir_subst_free(&L.subst);
    ir_lower_narrow(m);
    m->lowered = true;
    return true;
}
