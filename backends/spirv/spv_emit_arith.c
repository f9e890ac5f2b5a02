/* spv_emit_arith.c - the SPIR-V of the scalar ops: integer and float arithmetic, bitwise
 * ops, shifts, comparisons, casts, constants, float math and `check`. The module is lowered
 * (passes/lower_semantics.c): division, shifts, min/max/clamp/sign and the debug checks of
 * divisions and shifts come as plain ops. What stays here: float -> integer casts saturate
 * as backends/llvm/llvm_emit_ops.c's llvm.fptosi.sat does (emulated with a clamp and
 * selects), and round is half away from zero.
 *
 * Math: GLSL.std.450's transcendental functions take 16- and 32-bit floats only, and its f32
 * ones are the driver's approximations: f64 sin, exp, ... always, and f32 ones without fast
 * math, arrive here as kern's own functions in plain IR (passes/lower_libm.c, run by
 * kc_spirv_emit). Only fast math's f32 functions map to GLSL.std.450. */
#include <math.h>
#include <string.h>

#include "../../runtime/abi.h"
#include "spv_emit_priv.h"

/* ---- arithmetic ------------------------------------------------------------------------- */

static uint32_t int_const(spv_emitter *em, const kern_type *t, int64_t v) {
    return ty_size(t) == 8 ? cu64(em, (uint64_t)v) : cu32(em, (uint32_t)v);
}

/* The width of an integer register (bool: 0). */
static int int_width(const kern_type *t) { return t->kind == TY_BOOL ? 0 : 8 * ty_size(t); }

/* div/rem and shifts of lowered IR (passes/lower_semantics.c): the divisor is never 0 or
 * -1 where the language would trap, and the count is masked. */
static uint32_t emit_divrem(spv_emitter *em, const ir_op *op, uint32_t a, uint32_t b) {
    const kern_type *t = op->operands[0]->type;
    uint32_t ty = spv_reg_type(em, t);
    bool div = op->code == IR_DIV, u = ty_is_unsigned(t);
    SpvOp o = ty_is_float(t) ? (div ? SpvOpFDiv : SpvOpFRem) /* FRem: the dividend's sign */
              : div          ? (u ? SpvOpUDiv : SpvOpSDiv)
                             : (u ? SpvOpUMod : SpvOpSRem);
    return spv_op2(&em->b, o, ty, a, b);
}

static uint32_t emit_shift(spv_emitter *em, const ir_op *op, uint32_t a, uint32_t b) {
    const kern_type *t = op->operands[0]->type;
    SpvOp o = op->code == IR_SHL  ? SpvOpShiftLeftLogical
              : ty_is_unsigned(t) ? SpvOpShiftRightLogical
                                  : SpvOpShiftRightArithmetic;
    return spv_op2(&em->b, o, spv_reg_type(em, t), a, b);
}

/* A `check` (lowered debug check): records the error when operand 0 is false. */
static void emit_check(spv_emitter *em, const ir_op *op, const uint32_t *x) {
    if (!em->checks)
        return;
    spv_guard g = {0};
    spv_guard_add(em, &g, x[0], (uint32_t)op->imm.i, cu32(em, 0), x[1], x[2]);
    spv_guard_begin(em, &g, op);
    spv_guard_end(em, &g, 0, 0, 0);
}

uint32_t spv_emit_compare(spv_emitter *em, ir_opcode code, const kern_type *t, uint32_t a,
                          uint32_t b) {
    SpvOp o;
    if (ty_is_float(t)) {
        switch (code) {
        case IR_EQ: o = SpvOpFOrdEqual; break;
        case IR_NE: o = SpvOpFUnordNotEqual; break;
        case IR_LT: o = SpvOpFOrdLessThan; break;
        case IR_LE: o = SpvOpFOrdLessThanEqual; break;
        case IR_GT: o = SpvOpFOrdGreaterThan; break;
        case IR_GE: o = SpvOpFOrdGreaterThanEqual; break;
        default: kern_unreachable("not a comparison");
        }
    } else if (t->kind == TY_BOOL) {
        o = code == IR_EQ ? SpvOpLogicalEqual : SpvOpLogicalNotEqual;
        if (code != IR_EQ && code != IR_NE) { /* false < true: compare as integers */
            uint32_t ia = spv_to_u64(em, a, t), ib = spv_to_u64(em, b, t);
            return spv_emit_compare(em, code, ty_i64(), ia, ib);
        }
    } else {
        bool u = ty_is_unsigned(t);
        switch (code) {
        case IR_EQ: o = SpvOpIEqual; break;
        case IR_NE: o = SpvOpINotEqual; break;
        case IR_LT: o = u ? SpvOpULessThan : SpvOpSLessThan; break;
        case IR_LE: o = u ? SpvOpULessThanEqual : SpvOpSLessThanEqual; break;
        case IR_GT: o = u ? SpvOpUGreaterThan : SpvOpSGreaterThan; break;
        case IR_GE: o = u ? SpvOpUGreaterThanEqual : SpvOpSGreaterThanEqual; break;
        default: kern_unreachable("not a comparison");
        }
    }
    return spv_op2(&em->b, o, em->t_bool, a, b);
}

static uint32_t fconst(spv_emitter *em, const kern_type *t, double v) {
    return t->kind == TY_F32 ? spv_const_f32(&em->b, (float)v) : spv_const_f64(&em->b, v);
}

/* float -> integer, saturating (NaN gives 0), as llvm.fpto[su]i.sat */
static uint32_t emit_fptoint(spv_emitter *em, const kern_type *from, const kern_type *to,
                             uint32_t v) {
    bool f32 = from->kind == TY_F32;
    uint32_t ft = spv_reg_type(em, from), it = spv_reg_type(em, to);
    double lo, top; /* the range; top = 2^bits (2^31, 2^32, 2^63) is out of it */
    uint64_t maxv, minv;
    if (to->kind == TY_U32) {
        lo = 0.0, top = 4294967296.0, maxv = 0xffffffffu, minv = 0;
    } else if (to->kind == TY_U64) {
        lo = 0.0, top = 18446744073709551616.0, maxv = UINT64_MAX, minv = 0;
    } else if (to->kind == TY_I32) {
        lo = -2147483648.0, top = 2147483648.0, maxv = 0x7fffffff, minv = 0x80000000u;
    } else {
        lo = -9223372036854775808.0, top = 9223372036854775808.0, maxv = 0x7fffffffffffffffull,
        minv = 0x8000000000000000ull;
    }
    /* the largest value of the float type below top: exact, and in range */
    double hi = f32 ? (double)nextafterf((float)top, 0.0f) : nextafter(top, 0.0);
    uint32_t flo = fconst(em, from, lo), fhi = fconst(em, from, hi);
    uint32_t args[3] = {v, flo, fhi};
    uint32_t c = spv_ext(&em->b, ft, GLSLstd450FClamp, args, 3);
    uint32_t r = spv_op1(&em->b, ty_is_unsigned(to) ? SpvOpConvertFToU : SpvOpConvertFToS, it, c);
    uint32_t big = spv_op2(&em->b, SpvOpFOrdGreaterThanEqual, em->t_bool, v, fconst(em, from, top));
    uint32_t small = spv_op2(&em->b, SpvOpFOrdLessThanEqual, em->t_bool, v, flo);
    uint32_t nan = spv_op1(&em->b, SpvOpIsNan, em->t_bool, v);
    r = spv_op3(&em->b, SpvOpSelect, it, small, int_const(em, to, (int64_t)minv), r);
    r = spv_op3(&em->b, SpvOpSelect, it, big, int_const(em, to, (int64_t)maxv), r);
    return spv_op3(&em->b, SpvOpSelect, it, nan, int_const(em, to, 0), r);
}

static uint32_t emit_cast(spv_emitter *em, const kern_type *from, const kern_type *to, uint32_t v) {
    uint32_t rt = spv_reg_type(em, to);
    if (from == to)
        return v;
    if (ty_is_float(from)) {
        if (ty_is_float(to))
            return spv_op1(&em->b, SpvOpFConvert, rt, v);
        if (to->kind == TY_BOOL)
            return spv_op2(&em->b, SpvOpFUnordNotEqual, em->t_bool, v, fconst(em, from, 0.0));
        return emit_fptoint(em, from, to, v);
    }
    if (from->kind == TY_BOOL) {
        if (ty_is_float(to))
            return spv_op3(&em->b, SpvOpSelect, rt, v, fconst(em, to, 1.0), fconst(em, to, 0.0));
        return spv_op3(&em->b, SpvOpSelect, rt, v, int_const(em, to, 1), int_const(em, to, 0));
    }
    /* lowered IR: i8..u16 meet floats and bool only through i32 (passes/lower_narrow.c) */
    if (ty_is_float(to))
        return spv_op1(&em->b, ty_is_unsigned(from) ? SpvOpConvertUToF : SpvOpConvertSToF, rt, v);
    if (to->kind == TY_BOOL)
        return spv_op2(&em->b, SpvOpINotEqual, em->t_bool, v, int_const(em, from, 0));
    int fw = int_width(from), tw = int_width(to);
    if (fw == tw)
        return v; /* i32 <-> u32, i64 <-> u64, i16 <-> u16: the same bits */
    if (fw > tw)
        return spv_op1(&em->b, SpvOpUConvert, rt, v);
    if (!ty_is_unsigned(from) && tw == 64)
        return spv_sext64(em, v, fw);
    return spv_op1(&em->b, ty_is_unsigned(from) ? SpvOpUConvert : SpvOpSConvert, rt, v);
}

/* The same bits as another type: f32 <-> u32, f64 <-> u64/i64; f16/bf16 <-> u16 are one
 * register type, so nothing. */
static uint32_t emit_bitcast(spv_emitter *em, const kern_type *to, uint32_t v,
                             const kern_type *from) {
    uint32_t rt = spv_reg_type(em, to);
    if (rt == spv_reg_type(em, from))
        return v;
    return spv_op1(&em->b, SpvOpBitcast, rt, v);
}

static uint32_t emit_const(spv_emitter *em, const ir_op *op) {
    const kern_type *t = op->results[0]->type;
    switch (t->kind) {
    case TY_BOOL: return spv_const_bool(&em->b, op->imm.i != 0);
    case TY_F32: {
        float f = (float)op->imm.f;
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        return spv_const_bits(&em->b, em->t_f32, 32, bits);
    }
    case TY_F64: return spv_const_f64(&em->b, op->imm.f);
    default: return int_const(em, t, op->imm.i);
    }
}

/* round half away from zero: t = trunc(x); t + sign(x) where |x - t| >= 0.5 (exact) */
static uint32_t emit_round(spv_emitter *em, const kern_type *t, uint32_t x) {
    uint32_t ty = spv_reg_type(em, t);
    uint32_t tr = spv_ext(&em->b, ty, GLSLstd450Trunc, &x, 1);
    uint32_t diff = spv_op2(&em->b, SpvOpFSub, ty, x, tr);
    uint32_t ad = spv_ext(&em->b, ty, GLSLstd450FAbs, &diff, 1);
    uint32_t up = spv_op2(&em->b, SpvOpFOrdGreaterThanEqual, em->t_bool, ad, fconst(em, t, 0.5));
    uint32_t sg = spv_ext(&em->b, ty, GLSLstd450FSign, &x, 1);
    uint32_t bumped = spv_op2(&em->b, SpvOpFAdd, ty, tr, sg);
    return spv_op3(&em->b, SpvOpSelect, ty, up, bumped, tr);
}

/* copysign(a, b): a's magnitude bits with b's sign bit, on the integer of the same width */
static uint32_t emit_copysign(spv_emitter *em, const kern_type *t, const uint32_t *x) {
    bool f64 = t->kind == TY_F64;
    uint32_t it = f64 ? u64t(em) : em->t_u32, ty = spv_reg_type(em, t);
    uint32_t sign = f64 ? cu64(em, 1ull << 63) : cu32(em, 1u << 31);
    uint32_t mag = f64 ? cu64(em, ~(1ull << 63)) : cu32(em, ~(1u << 31));
    uint32_t a = spv_op1(&em->b, SpvOpBitcast, it, x[0]),
             b = spv_op1(&em->b, SpvOpBitcast, it, x[1]);
    uint32_t bits =
        spv_op2(&em->b, SpvOpBitwiseOr, it, spv_op2(&em->b, SpvOpBitwiseAnd, it, a, mag),
                spv_op2(&em->b, SpvOpBitwiseAnd, it, b, sign));
    return spv_op1(&em->b, SpvOpBitcast, ty, bits);
}

/* f64 rint (half to even) from exact ops: lavapipe's f64 RoundEven rounds 3.5 to 3.
 * t = trunc(x); t + sign(x) where |x - t| > 0.5, or = 0.5 and t is odd. */
static uint32_t emit_rint64(spv_emitter *em, const kern_type *t, uint32_t x) {
    uint32_t ty = spv_reg_type(em, t), bt = em->t_bool;
    uint32_t tr = spv_ext(&em->b, ty, GLSLstd450Trunc, &x, 1);
    uint32_t diff = spv_op2(&em->b, SpvOpFSub, ty, x, tr);
    uint32_t ad = spv_ext(&em->b, ty, GLSLstd450FAbs, &diff, 1);
    uint32_t h = spv_op2(&em->b, SpvOpFMul, ty, tr, fconst(em, t, 0.5));
    uint32_t odd = spv_op2(&em->b, SpvOpFUnordNotEqual, bt, h, spv_ext(&em->b, ty, GLSLstd450Trunc, &h, 1));
    uint32_t half = spv_op2(&em->b, SpvOpFOrdEqual, bt, ad, fconst(em, t, 0.5));
    uint32_t up = spv_op2(&em->b, SpvOpLogicalOr, bt,
                          spv_op2(&em->b, SpvOpFOrdGreaterThan, bt, ad, fconst(em, t, 0.5)),
                          spv_op2(&em->b, SpvOpLogicalAnd, bt, half, odd));
    uint32_t sg = spv_ext(&em->b, ty, GLSLstd450FSign, &x, 1);
    return spv_op3(&em->b, SpvOpSelect, ty, up, spv_op2(&em->b, SpvOpFAdd, ty, tr, sg), tr);
}

static uint32_t emit_float_math(spv_emitter *em, const ir_op *op, const uint32_t *x) {
    const kern_type *t = op->operands[0]->type;
    uint32_t ty = spv_reg_type(em, t);
    bool f64 = t->kind == TY_F64;
    enum GLSLstd450 g;
    switch (op->code) {
    case IR_SQRT: return spv_ext(&em->b, ty, GLSLstd450Sqrt, x, 1);
    case IR_RSQRT:
        return spv_op2(&em->b, SpvOpFDiv, ty, fconst(em, t, 1.0),
                       spv_ext(&em->b, ty, GLSLstd450Sqrt, x, 1));
    case IR_FLOOR: return spv_ext(&em->b, ty, GLSLstd450Floor, x, 1);
    case IR_CEIL: return spv_ext(&em->b, ty, GLSLstd450Ceil, x, 1);
    case IR_ROUND: return emit_round(em, t, x[0]);
    case IR_TRUNC: return spv_ext(&em->b, ty, GLSLstd450Trunc, x, 1);
    case IR_RINT: return f64 ? emit_rint64(em, t, x[0]) : spv_ext(&em->b, ty, GLSLstd450RoundEven, x, 1);
    case IR_COPYSIGN: return emit_copysign(em, t, x);
    case IR_FMA: return spv_ext(&em->b, ty, GLSLstd450Fma, x, 3);
    case IR_SIN: g = GLSLstd450Sin; break;
    case IR_COS: g = GLSLstd450Cos; break;
    case IR_TAN: g = GLSLstd450Tan; break;
    case IR_ASIN: g = GLSLstd450Asin; break;
    case IR_ACOS: g = GLSLstd450Acos; break;
    case IR_ATAN: g = GLSLstd450Atan; break;
    case IR_SINH: g = GLSLstd450Sinh; break;
    case IR_COSH: g = GLSLstd450Cosh; break;
    case IR_TANH: g = GLSLstd450Tanh; break;
    case IR_EXP: g = GLSLstd450Exp; break;
    case IR_EXP2: g = GLSLstd450Exp2; break;
    case IR_LOG: g = GLSLstd450Log; break;
    case IR_LOG2: g = GLSLstd450Log2; break;
    case IR_ATAN2: g = GLSLstd450Atan2; break;
    case IR_POW: g = GLSLstd450Pow; break;
    default: kern_unreachable("SPIR-V backend: not a float math op");
    }
    /* f64 (GLSL.std.450 has these for 16- and 32-bit floats only) and f32 without fast math
     * are kern's own functions, lowered before (passes/lower_libm.c) */
    kern_assert(!f64 && em->opts->fast_math);
    return spv_ext(&em->b, ty, g, x, op->code == IR_ATAN2 || op->code == IR_POW ? 2 : 1);
}

/* ---- simple ops ------------------------------------------------------------------------- */

void spv_emit_simple(spv_emitter *em, const ir_op *op) {
    const kern_type *t = op->noperands ? op->operands[0]->type : NULL;
    bool fl = t && ty_is_float(t);
    uint32_t x[3] = {0, 0, 0}, r = 0;
    switch (op->code) {
    case IR_CONST: r = emit_const(em, op); break;
    case IR_DIM: {
        int p = param_of(em, op->operands[0]);
        r = spv_op1(&em->b, SpvOpUConvert, em->t_u32, em->shape[p][op->imm.i]);
        break;
    }
    case IR_LOAD:
    case IR_STORE:
    case IR_ATOMIC_ADD:
    case IR_ATOMIC_SUB:
    case IR_ATOMIC_MIN:
    case IR_ATOMIC_MAX:
    case IR_ATOMIC_XCHG:
    case IR_ATOMIC_CAS: r = spv_emit_access(em, op); break;
    default: {
        kern_assert(op->noperands <= 3);
        for (uint32_t i = 0; i < op->noperands; i++)
            x[i] = val(em, op->operands[i]);
        uint32_t ty = op->nresults ? spv_reg_type(em, op->results[0]->type) : 0;
        bool bl = t && t->kind == TY_BOOL;
        switch (op->code) {
        case IR_CAST: r = emit_cast(em, t, op->results[0]->type, x[0]); break;
        case IR_BITCAST: r = emit_bitcast(em, op->results[0]->type, x[0], t); break;
        case IR_ADD: r = spv_op2(&em->b, fl ? SpvOpFAdd : SpvOpIAdd, ty, x[0], x[1]); break;
        case IR_SUB: r = spv_op2(&em->b, fl ? SpvOpFSub : SpvOpISub, ty, x[0], x[1]); break;
        case IR_MUL: r = spv_op2(&em->b, fl ? SpvOpFMul : SpvOpIMul, ty, x[0], x[1]); break;
        case IR_DIV:
        case IR_REM: r = emit_divrem(em, op, x[0], x[1]); break;
        case IR_NEG: r = spv_op1(&em->b, fl ? SpvOpFNegate : SpvOpSNegate, ty, x[0]); break;
        case IR_AND:
            r = spv_op2(&em->b, bl ? SpvOpLogicalAnd : SpvOpBitwiseAnd, ty, x[0], x[1]);
            break;
        case IR_OR:
            r = spv_op2(&em->b, bl ? SpvOpLogicalOr : SpvOpBitwiseOr, ty, x[0], x[1]);
            break;
        case IR_XOR:
            r = spv_op2(&em->b, bl ? SpvOpLogicalNotEqual : SpvOpBitwiseXor, ty, x[0], x[1]);
            break;
        case IR_NOT: r = spv_op1(&em->b, bl ? SpvOpLogicalNot : SpvOpNot, ty, x[0]); break;
        case IR_SHL:
        case IR_SHR: r = emit_shift(em, op, x[0], x[1]); break;
        case IR_EQ:
        case IR_NE:
        case IR_LT:
        case IR_LE:
        case IR_GT:
        case IR_GE: r = spv_emit_compare(em, op->code, t, x[0], x[1]); break;
        case IR_SELECT: r = spv_op3(&em->b, SpvOpSelect, ty, x[0], x[1], x[2]); break;
        case IR_ABS:
            if (fl)
                r = spv_ext(&em->b, ty, GLSLstd450FAbs, x, 1);
            else if (ty_is_unsigned(t))
                r = x[0];
            else /* INT_MIN wraps: select(x < 0, -x, x) */
                r = spv_op3(&em->b, SpvOpSelect, ty,
                            spv_op2(&em->b, SpvOpSLessThan, em->t_bool, x[0], int_const(em, t, 0)),
                            spv_op1(&em->b, SpvOpSNegate, ty, x[0]), x[0]);
            break;
        case IR_CHECK: emit_check(em, op, x); break;
        case IR_LANEMAX: r = spv_emit_lanemax(em, op, x[0]); break;
        case IR_SIGN:
        case IR_MIN:
        case IR_MAX:
        case IR_CLAMP: kern_unreachable("SPIR-V backend: lowered by ir_lower_semantics");
        default: r = emit_float_math(em, op, x); break;
        }
        /* IEEE arithmetic, as the LLVM targets give it: a driver may neither contract a * b + c
         * into one fma nor reassociate (Mesa treats undecorated float ops as inexact); kern's
         * own math (passes/lower_libm.c) depends on it. Fast math lets the driver choose. */
        if (fl && !em->opts->fast_math &&
            (op->code == IR_ADD || op->code == IR_SUB || op->code == IR_MUL || op->code == IR_DIV ||
             op->code == IR_NEG || op->code == IR_FMA))
            spv_decorate(&em->b, r, SpvDecorationNoContraction, NULL, 0);
    }
    }
    if (op->nresults)
        set_val(em, op->results[0], r);
}
