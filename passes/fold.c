/* fold.c - constant folding (ir_opt_fold).
 *
 * What: every pure op whose operands are all CONST is rewritten in place into a CONST
 * holding its value; `select` with a constant condition is replaced by the chosen
 * operand. The folded value is the one the device computes:
 *   - integers wrap in two's complement at their width (i32/u32 at 32 bits, i64 at 64);
 *     u32 divides, shifts right and compares unsigned; signed shr is arithmetic.
 *   - f32 arithmetic is done in float (not in double and rounded afterwards), f64 in
 *     double; math ops call the libm function of the op's precision (sinf for f32).
 *   - min/max follow ops.def: on a tie the result is operand 0.
 * What is deliberately NOT folded, so that run time behaves as without the pass:
 *   - integer division/remainder by zero, INT_MIN / -1 and INT_MIN % -1, shifts by a
 *     negative amount or by >= the bit width (undefined; the runtime's debug mode reports
 *     them with a source location);
 *   - anything whose result is a NaN (its sign and payload are not portable across
 *     devices), and comparisons, min/max/clamp, sign and casts that see a NaN operand
 *     (ordered/unordered choices and minNum semantics differ between backends);
 *   - float -> int casts of values out of the destination range (undefined);
 *   - sign(-0.0).
 * Results stay exactly representable: an f32 constant is a double holding a float value,
 * integer constants are in the canonical form of opt_wrap().
 *
 * Where: in ir_optimize()'s fixed-point loop, first of fold/simplify/cse/dce.
 * Requires: a verified module. Keeps valid: the verifier's invariants (an op changes its
 * opcode in place and keeps its result value and type; a replaced select is unlinked after
 * its uses are rewritten). Never frees IR memory. */
#include <math.h>
#include <stdint.h>

#include "opt_util.h"
#include "passes.h"

/* ---- integers ------------------------------------------------------------------------- */

/* Canonical operands compare correctly as int64 for every type: u32 is zero-extended,
 * so the int64 order is the unsigned order. */
static bool fold_int_cmp(ir_opcode code, int64_t a, int64_t b, bool *out) {
    switch (code) {
    case IR_EQ: *out = a == b; return true;
    case IR_NE: *out = a != b; return true;
    case IR_LT: *out = a < b; return true;
    case IR_LE: *out = a <= b; return true;
    case IR_GT: *out = a > b; return true;
    case IR_GE: *out = a >= b; return true;
    default: return false;
    }
}

/* Integer/bool op on canonical operands; false when the op must not be folded. */
static bool fold_int(ir_opcode code, const kern_type *t, const int64_t *v, int64_t *out) {
    int bits = ty_bits(t);
    bool uns = ty_is_unsigned(t);
    if (t->kind == TY_U64) { /* the bits in int64: order, sign and abs are unsigned */
        uint64_t x = (uint64_t)v[0], y = (uint64_t)v[1], z = (uint64_t)v[2];
        switch (code) {
        case IR_ABS: *out = v[0]; return true;
        case IR_SIGN: *out = v[0] != 0; return true;
        case IR_MIN: *out = (int64_t)(y < x ? y : x); return true;
        case IR_MAX: *out = (int64_t)(y > x ? y : x); return true;
        case IR_CLAMP: {
            uint64_t m = y > x ? y : x;
            *out = (int64_t)(z < m ? z : m);
            return true;
        }
        default: break;
        }
    }
    int64_t smin = t->kind == TY_I64 ? INT64_MIN : INT32_MIN;
    uint64_t a = (uint64_t)v[0], b = (uint64_t)v[1];
    switch (code) {
    case IR_ADD: *out = opt_wrap(t, a + b); return true;
    case IR_SUB: *out = opt_wrap(t, a - b); return true;
    case IR_MUL: *out = opt_wrap(t, a * b); return true;
    case IR_NEG: *out = opt_wrap(t, 0 - a); return true;
    case IR_AND: *out = opt_wrap(t, a & b); return true;
    case IR_OR: *out = opt_wrap(t, a | b); return true;
    case IR_XOR: *out = opt_wrap(t, a ^ b); return true;
    case IR_NOT: *out = opt_wrap(t, ~a); return true;
    case IR_DIV:
    case IR_REM:
        if (v[1] == 0 || (!uns && v[0] == smin && v[1] == -1))
            return false;
        if (uns)
            *out = (int64_t)(code == IR_DIV ? a / b : a % b);
        else
            *out = code == IR_DIV ? v[0] / v[1] : v[0] % v[1];
        *out = opt_wrap(t, (uint64_t)*out);
        return true;
    case IR_SHL:
    case IR_SHR: {
        /* The amount is read as unsigned: a negative amount is a huge one. */
        uint64_t amount = t->kind == TY_I32 ? (uint32_t)b : b;
        if (amount >= (uint64_t)bits)
            return false;
        if (code == IR_SHL)
            *out = opt_wrap(t, a << amount);
        else if (uns)
            *out = (int64_t)(a >> amount); /* a is zero-extended */
        else /* arithmetic shift of the sign-extended value, without relying on C's >> */
            *out = v[0] < 0 ? (int64_t)~(~a >> amount) : (int64_t)(a >> amount);
        return true;
    }
    case IR_LANEMAX: *out = v[0]; return true; /* a constant is the same in every lane */
    case IR_ABS: *out = opt_wrap(t, !uns && v[0] < 0 ? 0 - a : a); return true;
    case IR_SIGN: *out = (v[0] > 0) - (v[0] < 0); return true;
    case IR_MIN: *out = v[1] < v[0] ? v[1] : v[0]; return true;
    case IR_MAX: *out = v[1] > v[0] ? v[1] : v[0]; return true;
    case IR_CLAMP: {
        int64_t x = v[1] > v[0] ? v[1] : v[0];
        *out = v[2] < x ? v[2] : x;
        return true;
    }
    default: return false;
    }
}

/* ---- floats ---------------------------------------------------------------------------- */

/* min/max with the ops.def tie rule (operand 0 on a tie). */
static double fmin0(double a, double b) { return b < a ? b : a; }
static double fmax0(double a, double b) { return b > a ? b : a; }

static bool fold_f32(ir_opcode code, const double *dv, int n, double *out) {
    float a = (float)dv[0], b = n > 1 ? (float)dv[1] : 0.0f, c = n > 2 ? (float)dv[2] : 0.0f;
    float r;
    switch (code) {
    case IR_ADD: r = a + b; break;
    case IR_SUB: r = a - b; break;
    case IR_MUL: r = a * b; break;
    case IR_DIV: r = a / b; break;
    case IR_NEG: r = -a; break;
    case IR_SIN: r = sinf(a); break;
    case IR_COS: r = cosf(a); break;
    case IR_TAN: r = tanf(a); break;
    case IR_ASIN: r = asinf(a); break;
    case IR_ACOS: r = acosf(a); break;
    case IR_ATAN: r = atanf(a); break;
    case IR_SINH: r = sinhf(a); break;
    case IR_COSH: r = coshf(a); break;
    case IR_TANH: r = tanhf(a); break;
    case IR_EXP: r = expf(a); break;
    case IR_EXP2: r = exp2f(a); break;
    case IR_LOG: r = logf(a); break;
    case IR_LOG2: r = log2f(a); break;
    case IR_SQRT: r = sqrtf(a); break;
    case IR_RSQRT: r = 1.0f / sqrtf(a); break;
    case IR_FLOOR: r = floorf(a); break;
    case IR_CEIL: r = ceilf(a); break;
    case IR_ROUND: r = roundf(a); break;
    case IR_REM: r = fmodf(a, b); break;
    case IR_TRUNC: r = truncf(a); break;
    case IR_RINT: r = nearbyintf(a); break;
    case IR_ERF: r = erff(a); break;
    case IR_ERFC: r = erfcf(a); break;
    case IR_LOG1P: r = log1pf(a); break;
    case IR_EXPM1: r = expm1f(a); break;
    case IR_CBRT: r = cbrtf(a); break;
    case IR_COPYSIGN: r = copysignf(a, b); break;
    case IR_HYPOT: r = hypotf(a, b); break;
    case IR_ABS: r = fabsf(a); break;
    case IR_ATAN2: r = atan2f(a, b); break;
    case IR_POW: r = powf(a, b); break;
    case IR_FMA: r = fmaf(a, b, c); break;
    default: return false;
    }
    *out = (double)r;
    return true;
}

static bool fold_f64(ir_opcode code, const double *dv, int n, double *out) {
    double a = dv[0], b = n > 1 ? dv[1] : 0.0, c = n > 2 ? dv[2] : 0.0;
    switch (code) {
    case IR_ADD: *out = a + b; return true;
    case IR_SUB: *out = a - b; return true;
    case IR_MUL: *out = a * b; return true;
    case IR_DIV: *out = a / b; return true;
    case IR_NEG: *out = -a; return true;
    case IR_SIN: *out = sin(a); return true;
    case IR_COS: *out = cos(a); return true;
    case IR_TAN: *out = tan(a); return true;
    case IR_ASIN: *out = asin(a); return true;
    case IR_ACOS: *out = acos(a); return true;
    case IR_ATAN: *out = atan(a); return true;
    case IR_SINH: *out = sinh(a); return true;
    case IR_COSH: *out = cosh(a); return true;
    case IR_TANH: *out = tanh(a); return true;
    case IR_EXP: *out = exp(a); return true;
    case IR_EXP2: *out = exp2(a); return true;
    case IR_LOG: *out = log(a); return true;
    case IR_LOG2: *out = log2(a); return true;
    case IR_SQRT: *out = sqrt(a); return true;
    case IR_RSQRT: *out = 1.0 / sqrt(a); return true;
    case IR_FLOOR: *out = floor(a); return true;
    case IR_CEIL: *out = ceil(a); return true;
    case IR_ROUND: *out = round(a); return true;
    case IR_REM: *out = fmod(a, b); return true;
    case IR_TRUNC: *out = trunc(a); return true;
    case IR_RINT: *out = nearbyint(a); return true;
    case IR_ERF: *out = erf(a); return true;
    case IR_ERFC: *out = erfc(a); return true;
    case IR_LOG1P: *out = log1p(a); return true;
    case IR_EXPM1: *out = expm1(a); return true;
    case IR_CBRT: *out = cbrt(a); return true;
    case IR_COPYSIGN: *out = copysign(a, b); return true;
    case IR_HYPOT: *out = hypot(a, b); return true;
    case IR_ABS: *out = fabs(a); return true;
    case IR_ATAN2: *out = atan2(a, b); return true;
    case IR_POW: *out = pow(a, b); return true;
    case IR_FMA: *out = fma(a, b, c); return true;
    default: return false;
    }
}

/* Float op giving a float result (t is f32 or f64). */
static bool fold_float(ir_opcode code, const kern_type *t, const double *dv, int n,
                       double *out) {
    for (int i = 0; i < n; i++)
        if (isnan(dv[i]) && (code == IR_MIN || code == IR_MAX || code == IR_CLAMP ||
                             code == IR_SIGN))
            return false;
    switch (code) {
    case IR_MIN: *out = fmin0(dv[0], dv[1]); break;
    case IR_MAX: *out = fmax0(dv[0], dv[1]); break;
    case IR_CLAMP: *out = fmin0(fmax0(dv[0], dv[1]), dv[2]); break;
    case IR_SIGN:
        if (dv[0] == 0.0 && signbit(dv[0]))
            return false;
        *out = dv[0] > 0.0 ? 1.0 : dv[0] < 0.0 ? -1.0 : 0.0;
        break;
    default:
        if (!(t->kind == TY_F32 ? fold_f32(code, dv, n, out) : fold_f64(code, dv, n, out)))
            return false;
    }
    return !isnan(*out);
}

static bool fold_float_cmp(ir_opcode code, double a, double b, bool *out) {
    if (isnan(a) || isnan(b))
        return false;
    switch (code) {
    case IR_EQ: *out = a == b; return true;
    case IR_NE: *out = a != b; return true;
    case IR_LT: *out = a < b; return true;
    case IR_LE: *out = a <= b; return true;
    case IR_GT: *out = a > b; return true;
    case IR_GE: *out = a >= b; return true;
    default: return false;
    }
}

/* ---- casts ----------------------------------------------------------------------------- */

/* Is the float d, truncated toward zero, representable in integer type t? */
static bool float_fits(const kern_type *t, double d) {
    switch (t->kind) {
    case TY_I32: return d > -2147483649.0 && d < 2147483648.0;
    case TY_U32: return d > -1.0 && d < 4294967296.0;
    case TY_I64: return d >= -9223372036854775808.0 && d < 9223372036854775808.0;
    case TY_U64: return d > -1.0 && d < 18446744073709551616.0;
    default: return false;
    }
}

static bool fold_cast(ir_op *op) {
    const kern_type *from = op->operands[0]->type, *to = op->results[0]->type;
    ir_op *c = opt_const_op(op->operands[0]);
    /* a storage type (u8, f16) has no constants: its casts stay (docs/ir.md) */
    if (!c || !ty_is_scalar(from) || !ty_is_scalar(to) || ty_is_narrow(to))
        return false;
    if (!ty_is_float(from)) {
        int64_t v = c->imm.i;
        if (to->kind == TY_BOOL)
            opt_make_const_int(op, v != 0);
        else if (ty_is_int(to))
            opt_make_const_int(op, v);
        else if (from->kind == TY_U64)
            opt_make_const_float(op, to->kind == TY_F32 ? (double)(float)(uint64_t)v
                                                        : (double)(uint64_t)v);
        else if (to->kind == TY_F32)
            opt_make_const_float(op, (double)(float)v);
        else
            opt_make_const_float(op, (double)v);
        return true;
    }
    double d = c->imm.f;
    if (isnan(d))
        return false;
    if (to->kind == TY_BOOL)
        opt_make_const_int(op, d != 0.0);
    else if (ty_is_int(to)) {
        if (!float_fits(to, d))
            return false;
        opt_make_const_int(op, to->kind == TY_U64 ? (int64_t)(uint64_t)trunc(d) : (int64_t)trunc(d));
    } else if (to->kind == TY_F32)
        opt_make_const_float(op, (double)(float)d);
    else
        opt_make_const_float(op, d);
    return true;
}

/* ---- one op ---------------------------------------------------------------------------- */

static bool fold_op(ir_op *op) {
    const ir_opinfo *info = ir_info(op->code);
    if (!(info->flags & OPF_PURE) || op->nregions || op->nresults != 1 ||
        op->code == IR_CONST || op->code == IR_DIM)
        return false;
    if (op->code == IR_SELECT) {
        int64_t c;
        if (!opt_const_int(op->operands[0], &c))
            return false;
        opt_replace_with(op, op->operands[c ? 1 : 2]);
        return true;
    }
    if (op->code == IR_CAST)
        return fold_cast(op);
    if (op->noperands < 1 || op->noperands > 3)
        return false;
    for (uint32_t i = 0; i < op->noperands; i++)
        if (!opt_const_op(op->operands[i]))
            return false;

    const kern_type *at = op->operands[0]->type, *rt = op->results[0]->type;
    int n = (int)op->noperands;
    if (info->rule == T_BOOL) { /* comparisons */
        bool r;
        if (ty_is_float(at)) {
            if (!fold_float_cmp(op->code, op->operands[0]->def->imm.f,
                                op->operands[1]->def->imm.f, &r))
                return false;
        } else if (at->kind == TY_U64) { /* flipping the sign bit maps unsigned to signed order */
            if (!fold_int_cmp(op->code, op->operands[0]->def->imm.i ^ INT64_MIN,
                              op->operands[1]->def->imm.i ^ INT64_MIN, &r))
                return false;
        } else if (!fold_int_cmp(op->code, op->operands[0]->def->imm.i,
                                 op->operands[1]->def->imm.i, &r))
            return false;
        opt_make_const_int(op, r);
        return true;
    }
    if (ty_is_float(rt)) {
        double dv[3] = {0, 0, 0}, r;
        for (int i = 0; i < n; i++)
            dv[i] = op->operands[i]->def->imm.f;
        if (!fold_float(op->code, rt, dv, n, &r))
            return false;
        opt_make_const_float(op, r);
        return true;
    }
    if (!ty_is_scalar(rt))
        return false;
    int64_t iv[3] = {0, 0, 0}, r;
    for (int i = 0; i < n; i++)
        iv[i] = op->operands[i]->def->imm.i;
    if (!fold_int(op->code, rt, iv, &r))
        return false;
    opt_make_const_int(op, r);
    return true;
}

static bool fold_region(ir_region *r) {
    bool changed = false;
    ir_foreach_op_safe(op, tmp, r) {
        for (uint32_t i = 0; i < op->nregions; i++)
            changed |= fold_region(op->regions[i]);
        changed |= fold_op(op);
    }
    return changed;
}

bool ir_opt_fold(ir_module *m) {
    bool changed = false;
    ir_foreach_kernel(k, m)
        changed |= fold_region(k->body);
    return changed;
}
