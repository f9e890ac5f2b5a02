/* sema_fold.c - constant folding of frontend values (see sema.h).
 *
 * Values are fe_value: integers in int64 (i32 sign-extended, u32 zero-extended, bool 0/1),
 * floats in double (f32 values already rounded to float). Typed integer arithmetic wraps
 * per type, as the language defines it; float arithmetic is done in double and rounded to
 * float for f32, which is exact for + - * / and sqrt (double has more than 2*24+2 bits).
 * Math builtins use libm in double and round for f32. Operations that are undefined or
 * trap at run time (integer division by zero, shifts by >= the width, float -> int of an
 * out-of-range value) are not folded: the caller decides whether that is an error (in a
 * const initializer) or is left for run time.
 *
 * Untyped ("ideal") arithmetic, used for expressions of literals only, computes integers
 * exactly in int64 and reports overflow instead of wrapping. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sema.h"

#include "../common/half.h"

fe_value fe_value_int(const kern_type *t, int64_t v) {
    fe_value r;
    r.type = t;
    switch (t->kind) {
    case TY_BOOL: r.i = v != 0; break;
    case TY_I32: r.i = (int32_t)(uint32_t)(uint64_t)v; break;
    case TY_U32: r.i = (int64_t)(uint32_t)(uint64_t)v; break;
    case TY_I64:
    case TY_U64: r.i = v; break; /* u64: the bits */
    case TY_I8: r.i = (int8_t)(uint8_t)(uint64_t)v; break;
    case TY_U8: r.i = (uint8_t)(uint64_t)v; break;
    case TY_I16: r.i = (int16_t)(uint16_t)(uint64_t)v; break;
    case TY_U16: r.i = (uint16_t)(uint64_t)v; break;
    default: kern_unreachable("fe_value_int of a non-integer type");
    }
    return r;
}

fe_value fe_value_float(const kern_type *t, double v) {
    fe_value r;
    r.type = t;
    if (t->kind == TY_F32)
        r.f = (double)(float)v;
    else if (t->kind == TY_F64)
        r.f = v;
    else if (t->kind == TY_F16)
        r.f = kern_round_f16(v);
    else if (t->kind == TY_BF16)
        r.f = kern_round_bf16(v);
    else
        kern_unreachable("fe_value_float of a non-float type");
    return r;
}

fe_value fe_value_bool(bool b) { return fe_value_int(ty_bool(), b); }

/* Wrapping integer arithmetic in uint64 (no signed overflow UB), then wrapped to t. */
static fe_value wrap(const kern_type *t, uint64_t v) { return fe_value_int(t, (int64_t)v); }

fe_fold_status fe_fold_unary(fe_unop op, fe_value a, fe_value *out) {
    const kern_type *t = a.type;
    switch (op) {
    case UN_NEG:
        if (ty_is_float(t))
            *out = fe_value_float(t, -a.f);
        else if (ty_is_int(t))
            *out = wrap(t, 0 - (uint64_t)a.i);
        else
            return FOLD_NOT_CONST;
        return FOLD_OK;
    case UN_PLUS:
        if (!ty_is_number(t))
            return FOLD_NOT_CONST;
        *out = a;
        return FOLD_OK;
    case UN_NOT:
        if (t->kind != TY_BOOL)
            return FOLD_NOT_CONST;
        *out = fe_value_bool(!a.i);
        return FOLD_OK;
    case UN_BITNOT:
        if (!ty_is_int(t))
            return FOLD_NOT_CONST;
        *out = wrap(t, ~(uint64_t)a.i);
        return FOLD_OK;
    }
    return FOLD_NOT_CONST;
}

static fe_fold_status fold_compare(fe_binop op, fe_value a, fe_value b, fe_value *out) {
    int c; /* -1, 0, 1, or 2 for unordered (NaN) */
    if (ty_is_float(a.type)) {
        if (isnan(a.f) || isnan(b.f))
            c = 2;
        else
            c = a.f < b.f ? -1 : a.f > b.f ? 1 : 0;
    } else if (a.type->kind == TY_U64) {
        uint64_t x = (uint64_t)a.i, y = (uint64_t)b.i;
        c = x < y ? -1 : x > y ? 1 : 0;
    } else {
        /* u32 values are zero-extended, so int64 order is their order too */
        c = a.i < b.i ? -1 : a.i > b.i ? 1 : 0;
    }
    bool r;
    switch (op) {
    case BIN_EQ: r = c == 0; break;
    case BIN_NE: r = c != 0; break; /* NaN != NaN is true */
    case BIN_LT: r = c == -1; break;
    case BIN_LE: r = c == -1 || c == 0; break;
    case BIN_GT: r = c == 1; break;
    case BIN_GE: r = c == 1 || c == 0; break;
    default: return FOLD_NOT_CONST;
    }
    *out = fe_value_bool(r);
    return FOLD_OK;
}

static fe_fold_status fold_int(fe_binop op, fe_value a, fe_value b, fe_value *out) {
    const kern_type *t = a.type;
    uint64_t x = (uint64_t)a.i, y = (uint64_t)b.i;
    int bits = ty_bits(t);
    switch (op) {
    case BIN_ADD: *out = wrap(t, x + y); return FOLD_OK;
    case BIN_SUB: *out = wrap(t, x - y); return FOLD_OK;
    case BIN_MUL: *out = wrap(t, x * y); return FOLD_OK;
    case BIN_DIV:
    case BIN_REM:
        if (b.i == 0)
            return FOLD_DIV_ZERO;
        if (t->kind == TY_I64 && a.i == INT64_MIN && b.i == -1) {
            /* the one overflowing division: wraps to INT64_MIN, remainder 0 */
            *out = fe_value_int(t, op == BIN_DIV ? INT64_MIN : 0);
            return FOLD_OK;
        }
        if (t->kind == TY_U64) {
            *out = wrap(t, op == BIN_DIV ? x / y : x % y);
            return FOLD_OK;
        }
        /* i32 and u32 values fit int64 exactly, so int64 division is theirs */
        *out = wrap(t, (uint64_t)(op == BIN_DIV ? a.i / b.i : a.i % b.i));
        return FOLD_OK;
    case BIN_SHL:
    case BIN_SHR:
        if (b.i < 0 || b.i >= bits)
            return FOLD_SHIFT;
        if (op == BIN_SHL)
            *out = wrap(t, x << b.i);
        else if (t->kind == TY_U32 || t->kind == TY_U64)
            *out = wrap(t, x >> b.i); /* zero-extended: a logical shift */
        else /* arithmetic shift of a sign-extended value */
            *out = wrap(t, a.i < 0 ? ~(~x >> b.i) : x >> b.i);
        return FOLD_OK;
    case BIN_BITAND: *out = wrap(t, x & y); return FOLD_OK;
    case BIN_BITOR: *out = wrap(t, x | y); return FOLD_OK;
    case BIN_BITXOR: *out = wrap(t, x ^ y); return FOLD_OK;
    default: return FOLD_NOT_CONST;
    }
}

static fe_fold_status fold_float(fe_binop op, fe_value a, fe_value b, fe_value *out) {
    const kern_type *t = a.type;
    switch (op) {
    case BIN_ADD: *out = fe_value_float(t, a.f + b.f); return FOLD_OK;
    case BIN_SUB: *out = fe_value_float(t, a.f - b.f); return FOLD_OK;
    case BIN_MUL: *out = fe_value_float(t, a.f * b.f); return FOLD_OK;
    case BIN_DIV: *out = fe_value_float(t, a.f / b.f); return FOLD_OK;
    case BIN_REM: *out = fe_value_float(t, fmod(a.f, b.f)); return FOLD_OK; /* exact */
    default: return FOLD_NOT_CONST;
    }
}

fe_fold_status fe_fold_binary(fe_binop op, fe_value a, fe_value b, fe_value *out) {
    if (!a.type || !b.type || !ty_is_scalar(a.type))
        return FOLD_NOT_CONST;
    switch (op) {
    case BIN_EQ:
    case BIN_NE:
    case BIN_LT:
    case BIN_LE:
    case BIN_GT:
    case BIN_GE:
        if (a.type != b.type)
            return FOLD_NOT_CONST;
        return fold_compare(op, a, b, out);
    case BIN_AND:
    case BIN_OR:
        if (a.type->kind != TY_BOOL || b.type->kind != TY_BOOL)
            return FOLD_NOT_CONST;
        *out = fe_value_bool(op == BIN_AND ? (a.i && b.i) : (a.i || b.i));
        return FOLD_OK;
    default: break;
    }
    if (a.type != b.type)
        return FOLD_NOT_CONST;
    if (ty_is_int(a.type))
        return fold_int(op, a, b, out);
    if (ty_is_float(a.type))
        return fold_float(op, a, b, out);
    return FOLD_NOT_CONST;
}

fe_fold_status fe_fold_cast(const kern_type *to, fe_value a, fe_value *out) {
    const kern_type *from = a.type;
    if (!from || !ty_is_scalar(from) || !ty_is_scalar(to))
        return FOLD_NOT_CONST;
    if (to->kind == TY_BOOL) {
        *out = fe_value_bool(ty_is_float(from) ? a.f != 0.0 : a.i != 0);
        return FOLD_OK;
    }
    if (ty_is_float(to)) {
        double d = ty_is_float(from)       ? a.f
                   : from->kind == TY_U64 ? (double)(uint64_t)a.i
                                          : (double)a.i;
        if (!ty_is_float(from) && from->kind == TY_U64 && to->kind != TY_F64 &&
            to->kind != TY_F32)
            return FOLD_NOT_CONST; /* u64 -> f16/bf16 would round twice; left to run time */
        if (!ty_is_float(from) && (to->kind == TY_F16 || to->kind == TY_BF16) &&
            (a.i > (1LL << 53) || a.i < -(1LL << 53)))
            return FOLD_NOT_CONST;
        *out = fe_value_float(to, d);
        return FOLD_OK;
    }
    /* to an integer type */
    if (!ty_is_float(from)) {
        *out = fe_value_int(to, a.i);
        return FOLD_OK;
    }
    double t = trunc(a.f);
    double lo, hi; /* the truncated value must lie in [lo, hi) */
    switch (to->kind) {
    case TY_I32: lo = -2147483648.0; hi = 2147483648.0; break;
    case TY_U32: lo = 0.0; hi = 4294967296.0; break;
    case TY_U64: lo = 0.0; hi = 18446744073709551616.0; break;
    case TY_I8:
    case TY_U8:
    case TY_I16:
    case TY_U16: lo = -2147483648.0; hi = 2147483648.0; break; /* through i32, then wrap */
    default: lo = -9223372036854775808.0; hi = 9223372036854775808.0; break;
    }
    if (isnan(t) || t < lo || t >= hi)
        return FOLD_RANGE;
    *out = fe_value_int(to, to->kind == TY_U64 ? (int64_t)(uint64_t)t : (int64_t)t);
    return FOLD_OK;
}

static double fsign(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x; }

static fe_fold_status fold_math1(fe_builtin b, fe_value a, fe_value *out) {
    const kern_type *t = a.type;
    if (ty_is_int(t)) {
        if (b == BI_STOP_GRADIENT)
            *out = a;
        else if (b == BI_ABS)
            *out = wrap(t, a.i < 0 ? 0 - (uint64_t)a.i : (uint64_t)a.i);
        else if (b == BI_SIGN)
            *out = fe_value_int(t, a.i > 0 ? 1 : a.i < 0 ? -1 : 0);
        else
            return FOLD_NOT_CONST;
        return FOLD_OK;
    }
    if (!ty_is_float(t))
        return FOLD_NOT_CONST;
    double x = a.f, r;
    switch (b) {
    case BI_SIN: r = sin(x); break;
    case BI_COS: r = cos(x); break;
    case BI_TAN: r = tan(x); break;
    case BI_ASIN: r = asin(x); break;
    case BI_ACOS: r = acos(x); break;
    case BI_ATAN: r = atan(x); break;
    case BI_SINH: r = sinh(x); break;
    case BI_COSH: r = cosh(x); break;
    case BI_TANH: r = tanh(x); break;
    case BI_EXP: r = exp(x); break;
    case BI_EXP2: r = exp2(x); break;
    case BI_LOG: r = log(x); break;
    case BI_LOG2: r = log2(x); break;
    case BI_SQRT: r = sqrt(x); break;
    case BI_RSQRT: r = 1.0 / sqrt(x); break;
    case BI_ABS: r = fabs(x); break;
    case BI_FLOOR: r = floor(x); break;
    case BI_CEIL: r = ceil(x); break;
    case BI_ROUND: r = round(x); break; /* halfway cases away from zero, like C */
    case BI_SIGN: r = fsign(x); break;
    case BI_LOG10: r = log10(x); break;
    case BI_LOG1P: r = log1p(x); break;
    case BI_EXPM1: r = expm1(x); break;
    case BI_CBRT: r = cbrt(x); break;
    case BI_TRUNC: r = trunc(x); break;
    case BI_RINT: r = nearbyint(x); break; /* the default rounding: half to even */
    case BI_FRAC: r = x - floor(x); break;
    case BI_ERF: r = erf(x); break;
    case BI_ERFC: r = erfc(x); break;
    case BI_STOP_GRADIENT: r = x; break;
    case BI_ISNAN: *out = fe_value_bool(isnan(x)); return FOLD_OK;
    case BI_ISINF: *out = fe_value_bool(isinf(x)); return FOLD_OK;
    case BI_ISFINITE: *out = fe_value_bool(isfinite(x)); return FOLD_OK;
    default: return FOLD_NOT_CONST;
    }
    *out = fe_value_float(t, r);
    return FOLD_OK;
}

/* min / max of two values of one type; floats as fmin/fmax (a NaN operand is ignored). */
static fe_value minmax(bool is_max, fe_value a, fe_value b) {
    if (ty_is_float(a.type))
        return fe_value_float(a.type, is_max ? fmax(a.f, b.f) : fmin(a.f, b.f));
    return (is_max ? a.i >= b.i : a.i <= b.i) ? a : b;
}

static double fold_math2(fe_builtin b, double x, double y) {
    switch (b) {
    case BI_HYPOT: return hypot(x, y);
    case BI_COPYSIGN: return copysign(x, y);
    default: return y < x ? 0.0 : 1.0; /* step(edge, x): 1 at and above the edge */
    }
}

/* lerp and smoothstep, as lower_expr.c builds them, rounded to the type at each step. */
static fe_value fold_math3(fe_builtin b, const fe_value *args) {
    const kern_type *t = args[0].type;
    bool f32 = t->kind == TY_F32;
#define R(v) (f32 ? (double)(float)(v) : (v))
    double x = args[0].f, y = args[1].f, z = args[2].f;
    if (b == BI_LERP)
        return fe_value_float(t, R(x + R(R(y - x) * z)));
    double u = R(R(z - x) / R(y - x)); /* smoothstep(e0, e1, x) */
    u = u < 0.0 ? 0.0 : u > 1.0 ? 1.0 : u;
    return fe_value_float(t, R(R(u * u) * R(3.0 - R(2.0 * u))));
#undef R
}

fe_fold_status fe_fold_builtin(fe_builtin b, const fe_value *args, int n, fe_value *out) {
    for (int i = 0; i < n; i++)
        if (!args[i].type || !ty_is_scalar(args[i].type))
            return FOLD_NOT_CONST;
    switch (b) {
    case BI_SIN: case BI_COS: case BI_TAN: case BI_ASIN: case BI_ACOS: case BI_ATAN:
    case BI_SINH: case BI_COSH: case BI_TANH: case BI_EXP: case BI_EXP2: case BI_LOG:
    case BI_LOG2: case BI_SQRT: case BI_RSQRT: case BI_ABS: case BI_FLOOR: case BI_CEIL:
    case BI_ROUND: case BI_SIGN: case BI_LOG10: case BI_LOG1P: case BI_EXPM1: case BI_CBRT:
    case BI_TRUNC: case BI_RINT: case BI_FRAC: case BI_ERF: case BI_ERFC: case BI_ISNAN:
    case BI_ISINF: case BI_ISFINITE: case BI_STOP_GRADIENT:
        if (n != 1)
            return FOLD_NOT_CONST;
        return fold_math1(b, args[0], out);
    case BI_ATAN2:
    case BI_POW:
        if (n != 2 || !ty_is_float(args[0].type) || args[1].type != args[0].type)
            return FOLD_NOT_CONST;
        *out = fe_value_float(args[0].type, b == BI_ATAN2 ? atan2(args[0].f, args[1].f)
                                                          : pow(args[0].f, args[1].f));
        return FOLD_OK;
    case BI_HYPOT:
    case BI_COPYSIGN:
    case BI_STEP:
        if (n != 2 || !ty_is_float(args[0].type) || args[1].type != args[0].type)
            return FOLD_NOT_CONST;
        *out = fe_value_float(args[0].type, fold_math2(b, args[0].f, args[1].f));
        return FOLD_OK;
    case BI_LERP:
    case BI_SMOOTHSTEP:
        if (n != 3 || !ty_is_float(args[0].type) || args[1].type != args[0].type ||
            args[2].type != args[0].type)
            return FOLD_NOT_CONST;
        *out = fold_math3(b, args);
        return FOLD_OK;
    case BI_MIN:
    case BI_MAX:
        if (n != 2 || args[1].type != args[0].type || args[0].type->kind == TY_BOOL)
            return FOLD_NOT_CONST;
        *out = minmax(b == BI_MAX, args[0], args[1]);
        return FOLD_OK;
    case BI_CLAMP:
        if (n != 3 || args[1].type != args[0].type || args[2].type != args[0].type ||
            args[0].type->kind == TY_BOOL)
            return FOLD_NOT_CONST;
        *out = minmax(false, minmax(true, args[0], args[1]), args[2]);
        return FOLD_OK;
    case BI_FMA:
        if (n != 3 || !ty_is_float(args[0].type) || args[1].type != args[0].type ||
            args[2].type != args[0].type)
            return FOLD_NOT_CONST;
        if (args[0].type->kind == TY_F32) /* fused: one rounding, to float */
            *out = fe_value_float(args[0].type,
                                  fmaf((float)args[0].f, (float)args[1].f, (float)args[2].f));
        else
            *out = fe_value_float(args[0].type, fma(args[0].f, args[1].f, args[2].f));
        return FOLD_OK;
    case BI_SELECT:
        if (n != 3 || args[0].type->kind != TY_BOOL || args[1].type != args[2].type)
            return FOLD_NOT_CONST;
        *out = args[0].i ? args[1] : args[2];
        return FOLD_OK;
    default: return FOLD_NOT_CONST;
    }
}

/* ---- Untyped arithmetic ------------------------------------------------------------ */

static double as_double(fe_value v) { return ty_is_float(v.type) ? v.f : (double)v.i; }

fe_fold_status fe_fold_ideal_unary(fe_unop op, fe_value a, fe_value *out) {
    if (op == UN_NEG) {
        if (ty_is_float(a.type)) {
            *out = fe_value_float(ty_f64(), -a.f);
            return FOLD_OK;
        }
        if (a.i == INT64_MIN)
            return FOLD_OVERFLOW;
        *out = fe_value_int(ty_i64(), -a.i);
        return FOLD_OK;
    }
    if (op == UN_PLUS) {
        *out = a;
        return FOLD_OK;
    }
    if (op == UN_BITNOT && !ty_is_float(a.type)) {
        *out = fe_value_int(ty_i64(), ~a.i);
        return FOLD_OK;
    }
    return FOLD_NOT_CONST;
}

fe_fold_status fe_fold_ideal_binary(fe_binop op, fe_value a, fe_value b, fe_value *out) {
    bool flt = ty_is_float(a.type) || ty_is_float(b.type);
    if (flt) {
        double x = as_double(a), y = as_double(b);
        switch (op) {
        case BIN_ADD: *out = fe_value_float(ty_f64(), x + y); return FOLD_OK;
        case BIN_SUB: *out = fe_value_float(ty_f64(), x - y); return FOLD_OK;
        case BIN_MUL: *out = fe_value_float(ty_f64(), x * y); return FOLD_OK;
        case BIN_DIV: *out = fe_value_float(ty_f64(), x / y); return FOLD_OK;
        case BIN_REM: *out = fe_value_float(ty_f64(), fmod(x, y)); return FOLD_OK;
        default: return FOLD_NOT_CONST;
        }
    }
    int64_t x = a.i, y = b.i, r;
    switch (op) {
    case BIN_ADD:
        if (__builtin_add_overflow(x, y, &r))
            return FOLD_OVERFLOW;
        break;
    case BIN_SUB:
        if (__builtin_sub_overflow(x, y, &r))
            return FOLD_OVERFLOW;
        break;
    case BIN_MUL:
        if (__builtin_mul_overflow(x, y, &r))
            return FOLD_OVERFLOW;
        break;
    case BIN_DIV:
    case BIN_REM:
        if (y == 0)
            return FOLD_DIV_ZERO;
        if (x == INT64_MIN && y == -1)
            return FOLD_OVERFLOW;
        r = op == BIN_DIV ? x / y : x % y;
        break;
    case BIN_SHL:
        if (y < 0 || y >= 64)
            return FOLD_SHIFT;
        if (x < 0)
            return FOLD_NOT_CONST; /* negative: typed rules apply */
        if ((x >> (63 - y)) != 0)  /* a set bit reaches bit 63: 1 << 63 as much as 3 << 62 */
            return FOLD_OVERFLOW;
        r = x << y;
        break;
    case BIN_SHR:
        if (y < 0 || y >= 64)
            return FOLD_SHIFT;
        if (x < 0)
            return FOLD_NOT_CONST; /* the result depends on the width: leave it typed */
        r = x >> y;
        break;
    case BIN_BITAND: r = x & y; break;
    case BIN_BITOR: r = x | y; break;
    case BIN_BITXOR: r = x ^ y; break;
    default: return FOLD_NOT_CONST;
    }
    *out = fe_value_int(ty_i64(), r);
    return FOLD_OK;
}

void fe_value_format(char *buf, size_t size, fe_value v) {
    if (!v.type || !ty_is_float(v.type)) {
        if (v.type && v.type->kind == TY_BOOL)
            snprintf(buf, size, "%s", v.i ? "true" : "false");
        else
            snprintf(buf, size, "%lld", (long long)v.i);
        return;
    }
    if (isnan(v.f)) {
        snprintf(buf, size, "nan");
        return;
    }
    if (isinf(v.f)) {
        snprintf(buf, size, "%s", v.f < 0 ? "-inf" : "inf");
        return;
    }
    if (v.f == trunc(v.f) && fabs(v.f) < 1e15) {
        snprintf(buf, size, "%.1f", v.f); /* 1000.0, not 1e+03 */
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v.f);
        if (strtod(buf, NULL) == v.f)
            break;
    }
    /* make a float look like one: "2" -> "2.0" */
    if (!strpbrk(buf, ".eni") && strlen(buf) + 3 <= size)
        strcat(buf, ".0");
}
