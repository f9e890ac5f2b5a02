/* interp.c - the reference interpreter of the IR (contract in interp.h, choices in
 * docs/interp.md).
 *
 * A direct walk over the structured IR. Before a run, the kernel's values are numbered
 * (ir_value.id: parameters 0..nparams-1, then every result and region argument in walk
 * order) and each value lives in one slot of a table indexed by that number. A slot holds
 * a value in canonical form, the form of the IR's constants: bool 0/1, i32 sign-extended
 * and u32 zero-extended to 64 bits, i64 as is, f32 as the double of a float, f64 as is.
 * So comparisons of any integer type are plain int64 comparisons, and every f32 result is
 * computed in float and widened exactly.
 *
 * Region execution runs a region's ops up to its terminator; the op that owns the region
 * then reads the terminator's operands (yield/condition) itself. Loop-carried values are
 * copied through a scratch buffer, since a yield may permute the region's own arguments.
 * Every error unwinds by returning false; the first message is kept.
 *
 * Undefined values (poison): a float -> int cast out of range does not stop the run, since
 * the lowering and simplify evaluate casts speculatively (`c ? i32(x) : 0` becomes a
 * select). Its result is poison, as in LLVM: ops on poison give poison, a select passes
 * the poison of the arm it picks (or of its condition), and the run stops with an error
 * only where poison would matter: a stored value, an index, a branch or loop condition, a
 * loop bound, a divisor or a shift count. Poison bits live in a second table that is only
 * allocated when the first poison appears, so runs without one pay a pointer test per op. */
#include "interp.h"

#include "../common/half.h"
#include "../runtime/abi.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DEFAULT_MAX_WHILE_ITERS = 100000000 };

typedef union ival {
    int64_t i;
    double f;
} ival;

/* One adstack of the work item being run: values with their poison bits. */
typedef struct adstack_rt {
    ival *v;
    uint8_t *p;
    size_t len, cap;
} adstack_rt;

typedef struct interp {
    const ir_kernel *k;
    adstack_rt *stacks; /* one per entry of k's adstack table */
    const ir_interp_arg *args;
    ival *vals;              /* one slot per value id */
    ival *scratch;           /* room for the operands of the largest terminator */
    uint8_t *poison;         /* one bit per value id; NULL until a first poison */
    uint8_t *scratch_poison; /* poison bits of the scratch values */
    uint32_t nvals, nscratch;
    char poison_why[200]; /* how the first poison arose */
    uint64_t max_while_iters;
    uint64_t nops, max_ops;
    uint64_t trips; /* sum of mix(loop op, its trip count) over every loop run */
    char *err;
    size_t errlen;
    bool failed;
} interp;

#define V(v) (I->vals[(v)->id])
#define P(v) (I->poison[(v)->id])

static bool fail(interp *I, const ir_op *op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool fail(interp *I, const ir_op *op, const char *fmt, ...) {
    if (!I->failed && I->errlen > 0) {
        int n =
            op ? snprintf(I->err, I->errlen, "%u:%u: @%s: ", op->loc.line, op->loc.col, I->k->name)
               : snprintf(I->err, I->errlen, "@%s: ", I->k->name);
        if (n >= 0 && (size_t)n < I->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(I->err + n, I->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    I->failed = true;
    return false;
}

/* ---- poison ------------------------------------------------------------------------ */

/* Makes op's result poison; the first poison's origin is kept for the error message. */
static bool make_poison(interp *I, const ir_op *op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool make_poison(interp *I, const ir_op *op, const char *fmt, ...) {
    if (!I->poison) {
        I->poison = calloc(I->nvals, 1);
        I->scratch_poison = calloc(I->nscratch, 1);
        if (!I->poison || !I->scratch_poison)
            return fail(I, op, "out of memory");
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(I->poison_why, sizeof I->poison_why, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < sizeof I->poison_why)
            snprintf(I->poison_why + n, sizeof I->poison_why - (size_t)n, " at %u:%u", op->loc.line,
                     op->loc.col);
    }
    V(op->results[0]).i = 0;
    P(op->results[0]) = 1;
    return true;
}

/* An error when v, used by op as `what`, is poison. */
static bool check_defined(interp *I, const ir_op *op, const ir_value *v, const char *what) {
    if (I->poison && P(v))
        return fail(I, op, "%s: %s is undefined: it comes from %s", ir_info(op->code)->name, what,
                    I->poison_why);
    return true;
}

/* Copies n values and their poison bits from src to dst through the scratch buffer
 * (dst may be the region arguments that src permutes). */
static void copy_values(interp *I, ir_value *const *dst, ir_value *const *src, uint32_t n) {
    for (uint32_t k = 0; k < n; k++)
        I->scratch[k] = V(src[k]);
    for (uint32_t k = 0; k < n; k++)
        V(dst[k]) = I->scratch[k];
    if (I->poison) {
        for (uint32_t k = 0; k < n; k++)
            I->scratch_poison[k] = P(src[k]);
        for (uint32_t k = 0; k < n; k++)
            P(dst[k]) = I->scratch_poison[k];
    }
}

/* For a pure op once poison exists: clears the result's bit, or, when an operand is
 * poison, makes the result poison (false after an error: a poison divisor or count). */
static bool pure_poison(interp *I, const ir_op *op, bool *done) {
    *done = false;
    if (op->code == IR_SELECT) {
        const ir_value *c = op->operands[0];
        const ir_value *arm = op->operands[V(c).i ? 1 : 2];
        P(op->results[0]) = P(c) | P(arm);
        return true;
    }
    bool any = false;
    for (uint32_t i = 0; i < op->noperands; i++)
        any |= P(op->operands[i]);
    P(op->results[0]) = any;
    if (!any)
        return true;
    switch (op->code) {
    case IR_DIV:
    case IR_REM:
        if (!check_defined(I, op, op->operands[1], "the divisor"))
            return false;
        break;
    case IR_SHL:
    case IR_SHR:
        if (!check_defined(I, op, op->operands[1], "the shift count"))
            return false;
        break;
    default: break;
    }
    V(op->results[0]).i = 0;
    *done = true;
    return true;
}

/* ---- numbering --------------------------------------------------------------------- */

typedef struct numbering {
    uint32_t next;
    uint32_t max_term; /* operands of the largest terminator */
} numbering;

static void number_region(numbering *n, ir_region *r) {
    for (uint32_t i = 0; i < r->nargs; i++)
        r->args[i]->id = n->next++;
    ir_foreach_op(op, r) {
        for (uint32_t i = 0; i < op->nresults; i++)
            op->results[i]->id = n->next++;
        for (uint32_t i = 0; i < op->nregions; i++)
            number_region(n, op->regions[i]);
        if ((ir_info(op->code)->flags & OPF_TERM) && op->noperands > n->max_term)
            n->max_term = op->noperands;
    }
}

/* ---- scalars ----------------------------------------------------------------------- */

static inline int64_t wrap(kern_tykind k, uint64_t v) {
    switch (k) {
    case TY_BOOL: return (int64_t)(v & 1);
    case TY_I32: return (int32_t)(uint32_t)v;
    case TY_U32: return (int64_t)(uint32_t)v;
    case TY_I8: return (int8_t)(uint8_t)v;
    case TY_U8: return (uint8_t)v;
    case TY_I16: return (int16_t)(uint16_t)v;
    case TY_U16: return (uint16_t)v;
    default: return (int64_t)v; /* i64, and u64 as its bits */
    }
}

static int type_bits(kern_tykind k) { return ty_bits(ty_scalar(k)); }

static const char *kind_name(kern_tykind k) { return ty_scalar(k)->name; }

static bool exec_int(interp *I, const ir_op *op) {
    kern_tykind k = op->operands[0]->type->kind;
    int64_t a = V(op->operands[0]).i;
    int64_t b = op->noperands > 1 ? V(op->operands[1]).i : 0;
    int64_t c = op->noperands > 2 ? V(op->operands[2]).i : 0;
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    int64_t r;
    if (k == TY_U64) { /* the bits in int64: compare unsigned */
        switch (op->code) {
        case IR_LT: r = ua < ub; goto done;
        case IR_LE: r = ua <= ub; goto done;
        case IR_GT: r = ua > ub; goto done;
        case IR_GE: r = ua >= ub; goto done;
        case IR_ABS: r = a; goto done;
        case IR_SIGN: r = a != 0; goto done;
        case IR_MIN: r = ub < ua ? b : a; goto done;
        case IR_MAX: r = ub > ua ? b : a; goto done;
        case IR_CLAMP: {
            uint64_t x = ub > ua ? ub : ua;
            r = (int64_t)((uint64_t)c < x ? (uint64_t)c : x);
            goto done;
        }
        default: break;
        }
    }
    switch (op->code) {
    /* canonical values compare as int64 for every type (u32 is zero-extended) */
    case IR_EQ: r = a == b; break;
    case IR_NE: r = a != b; break;
    case IR_LT: r = a < b; break;
    case IR_LE: r = a <= b; break;
    case IR_GT: r = a > b; break;
    case IR_GE: r = a >= b; break;
    case IR_ADD: r = wrap(k, ua + ub); break;
    case IR_SUB: r = wrap(k, ua - ub); break;
    case IR_MUL: r = wrap(k, ua * ub); break;
    case IR_NEG: r = wrap(k, 0 - ua); break;
    case IR_AND: r = wrap(k, ua & ub); break;
    case IR_OR: r = wrap(k, ua | ub); break;
    case IR_XOR: r = wrap(k, ua ^ ub); break;
    case IR_NOT: r = wrap(k, ~ua); break;
    case IR_DIV:
    case IR_REM: {
        const char *what = op->code == IR_DIV ? "division" : "remainder";
        if (b == 0)
            return fail(I, op, "integer %s by zero (%s)", what, kind_name(k));
        if (k == TY_U32 || k == TY_U64)
            r = op->code == IR_DIV ? (int64_t)(ua / ub) : (int64_t)(ua % ub);
        else if (b == -1) /* as the backends define it: INT_MIN / -1 wraps to INT_MIN */
            r = op->code == IR_DIV ? wrap(k, 0 - ua) : 0;
        else
            r = op->code == IR_DIV ? a / b : a % b;
        break;
    }
    case IR_SHL:
    case IR_SHR: {
        /* the count is read unsigned at the type's width: a negative count is huge */
        uint64_t amount = k == TY_I32 ? (uint32_t)ub : ub;
        int bits = type_bits(k);
        if (amount >= (uint64_t)bits)
            return fail(I, op, "shift count %" PRId64 " is out of range for %s (0 to %d)", b,
                        kind_name(k), bits - 1);
        if (op->code == IR_SHL)
            r = wrap(k, ua << amount);
        else if (k == TY_U32 || k == TY_U64)
            r = (int64_t)(ua >> amount);
        else /* arithmetic shift of the sign-extended value */
            r = a < 0 ? (int64_t) ~(~ua >> amount) : (int64_t)(ua >> amount);
        break;
    }
    case IR_LANEMAX: r = a; break; /* one work item at a time: a group of one lane */
    case IR_ABS: r = k != TY_U32 && a < 0 ? wrap(k, 0 - ua) : a; break;
    case IR_SIGN: r = (a > 0) - (a < 0); break;
    case IR_MIN: r = b < a ? b : a; break;
    case IR_MAX: r = b > a ? b : a; break;
    case IR_CLAMP: {
        int64_t x = b > a ? b : a;
        r = c < x ? c : x;
        break;
    }
    default: kern_unreachable("integer op without a rule");
    }
done:
    V(op->results[0]).i = r;
    return true;
}

static float f32_op(ir_opcode code, float a, float b, float c) {
    switch (code) {
    case IR_ADD: return a + b;
    case IR_SUB: return a - b;
    case IR_MUL: return a * b;
    case IR_DIV: return a / b;
    case IR_NEG: return -a;
    case IR_SIN: return sinf(a);
    case IR_COS: return cosf(a);
    case IR_TAN: return tanf(a);
    case IR_ASIN: return asinf(a);
    case IR_ACOS: return acosf(a);
    case IR_ATAN: return atanf(a);
    case IR_SINH: return sinhf(a);
    case IR_COSH: return coshf(a);
    case IR_TANH: return tanhf(a);
    case IR_EXP: return expf(a);
    case IR_EXP2: return exp2f(a);
    case IR_LOG: return logf(a);
    case IR_LOG2: return log2f(a);
    case IR_SQRT: return sqrtf(a);
    case IR_RSQRT: return 1.0f / sqrtf(a);
    case IR_FLOOR: return floorf(a);
    case IR_CEIL: return ceilf(a);
    case IR_ROUND: return roundf(a);
    case IR_REM: return fmodf(a, b);
    case IR_TRUNC: return truncf(a);
    case IR_RINT: return nearbyintf(a); /* the default rounding mode: half to even */
    case IR_ERF: return erff(a);
    case IR_ERFC: return erfcf(a);
    case IR_LOG1P: return log1pf(a);
    case IR_EXPM1: return expm1f(a);
    case IR_CBRT: return cbrtf(a);
    case IR_STOPGRAD: return a;
    case IR_COPYSIGN: return copysignf(a, b);
    case IR_HYPOT: return hypotf(a, b);
    case IR_ABS: return fabsf(a);
    case IR_SIGN: return a > 0.0f ? 1.0f : a < 0.0f ? -1.0f : a;
    case IR_ATAN2: return atan2f(a, b);
    case IR_POW: return powf(a, b);
    case IR_MIN: return b < a ? b : a;
    case IR_MAX: return b > a ? b : a;
    case IR_FMA: return fmaf(a, b, c);
    case IR_CLAMP: {
        float x = b > a ? b : a;
        return c < x ? c : x;
    }
    default: kern_unreachable("f32 op without a rule");
    }
}

static double f64_op(ir_opcode code, double a, double b, double c) {
    switch (code) {
    case IR_ADD: return a + b;
    case IR_SUB: return a - b;
    case IR_MUL: return a * b;
    case IR_DIV: return a / b;
    case IR_NEG: return -a;
    case IR_SIN: return sin(a);
    case IR_COS: return cos(a);
    case IR_TAN: return tan(a);
    case IR_ASIN: return asin(a);
    case IR_ACOS: return acos(a);
    case IR_ATAN: return atan(a);
    case IR_SINH: return sinh(a);
    case IR_COSH: return cosh(a);
    case IR_TANH: return tanh(a);
    case IR_EXP: return exp(a);
    case IR_EXP2: return exp2(a);
    case IR_LOG: return log(a);
    case IR_LOG2: return log2(a);
    case IR_SQRT: return sqrt(a);
    case IR_RSQRT: return 1.0 / sqrt(a);
    case IR_FLOOR: return floor(a);
    case IR_CEIL: return ceil(a);
    case IR_ROUND: return round(a);
    case IR_REM: return fmod(a, b);
    case IR_TRUNC: return trunc(a);
    case IR_RINT: return nearbyint(a);
    case IR_ERF: return erf(a);
    case IR_ERFC: return erfc(a);
    case IR_LOG1P: return log1p(a);
    case IR_EXPM1: return expm1(a);
    case IR_CBRT: return cbrt(a);
    case IR_STOPGRAD: return a;
    case IR_COPYSIGN: return copysign(a, b);
    case IR_HYPOT: return hypot(a, b);
    case IR_ABS: return fabs(a);
    case IR_SIGN: return a > 0.0 ? 1.0 : a < 0.0 ? -1.0 : a;
    case IR_ATAN2: return atan2(a, b);
    case IR_POW: return pow(a, b);
    case IR_MIN: return b < a ? b : a;
    case IR_MAX: return b > a ? b : a;
    case IR_FMA: return fma(a, b, c);
    case IR_CLAMP: {
        double x = b > a ? b : a;
        return c < x ? c : x;
    }
    default: kern_unreachable("f64 op without a rule");
    }
}

static void exec_float(interp *I, const ir_op *op) {
    double a = V(op->operands[0]).f;
    double b = op->noperands > 1 ? V(op->operands[1]).f : 0.0;
    double c = op->noperands > 2 ? V(op->operands[2]).f : 0.0;
    ival *res = &V(op->results[0]);
    switch (op->code) {
    /* f32 values are exact doubles: comparing them as doubles is comparing the floats */
    case IR_EQ: res->i = a == b; return;
    case IR_NE: res->i = a != b; return;
    case IR_LT: res->i = a < b; return;
    case IR_LE: res->i = a <= b; return;
    case IR_GT: res->i = a > b; return;
    case IR_GE: res->i = a >= b; return;
    default: break;
    }
    if (op->operands[0]->type->kind == TY_F32)
        res->f = (double)f32_op(op->code, (float)a, (float)b, (float)c);
    else
        res->f = f64_op(op->code, a, b, c);
}

/* Is d, truncated toward zero, representable in the integer kind k? (false for NaN) */
static bool float_fits(kern_tykind k, double d) {
    switch (k) {
    case TY_I32: return d > -2147483649.0 && d < 2147483648.0;
    case TY_U32: return d > -1.0 && d < 4294967296.0;
    case TY_I64: return d >= -9223372036854775808.0 && d < 9223372036854775808.0;
    case TY_U64: return d > -1.0 && d < 18446744073709551616.0;
    case TY_I8:
    case TY_U8:
    case TY_I16:
    case TY_U16: return float_fits(TY_I32, d); /* through i32, then wrapped */
    default: return false;
    }
}

/* The value of a float of kind k rounded from d. */
static double round_to(kern_tykind k, double d) {
    switch (k) {
    case TY_F32: return (double)(float)d;
    case TY_F16: return kern_round_f16(d);
    case TY_BF16: return kern_round_bf16(d);
    default: return d;
    }
}

/* The bits of a scalar value of kind k (bitcast). */
static uint64_t bits_of(kern_tykind k, ival v) {
    switch (k) {
    case TY_F32: {
        float f = (float)v.f;
        uint32_t u;
        memcpy(&u, &f, 4);
        return u;
    }
    case TY_F64: {
        uint64_t u;
        memcpy(&u, &v.f, 8);
        return u;
    }
    case TY_F16: return kern_f16_bits(v.f);
    case TY_BF16: return kern_bf16_bits(v.f);
    default: return (uint64_t)v.i;
    }
}

static ival from_bits(kern_tykind k, uint64_t u) {
    ival v;
    switch (k) {
    case TY_F32: {
        uint32_t w = (uint32_t)u;
        float f;
        memcpy(&f, &w, 4);
        v.f = f;
        break;
    }
    case TY_F64: memcpy(&v.f, &u, 8); break;
    case TY_F16: v.f = kern_f16_value((uint16_t)u); break;
    case TY_BF16: v.f = kern_bf16_value((uint16_t)u); break;
    default: v.i = wrap(k, u); break;
    }
    return v;
}

static bool exec_cast(interp *I, const ir_op *op) {
    kern_tykind from = op->operands[0]->type->kind, to = op->results[0]->type->kind;
    ival v = V(op->operands[0]);
    ival *res = &V(op->results[0]);
    if (op->code == IR_BITCAST) {
        *res = from_bits(to, bits_of(from, v));
        return true;
    }
    bool tof = ty_is_float(ty_scalar(to));
    if (!ty_is_float(ty_scalar(from))) {
        if (to == TY_BOOL)
            res->i = v.i != 0;
        else if (tof && from == TY_U64) /* u64 -> f32 rounds once, from the exact value */
            res->f = to == TY_F32 ? (double)(float)(uint64_t)v.i : round_to(to, (double)(uint64_t)v.i);
        else if (to == TY_F32)
            res->f = (double)(float)v.i;
        else if (tof) /* f64, f16, bf16: i64 beyond 2^53 rounds through f64 (reference.md) */
            res->f = round_to(to, (double)v.i);
        else
            res->i = wrap(to, (uint64_t)v.i);
        return true;
    }
    if (to == TY_BOOL)
        res->i = v.f != 0.0;
    else if (tof)
        res->f = round_to(to, v.f);
    else {
        if (!float_fits(to, v.f))
            return make_poison(I, op, "an out-of-range cast (%s %.17g to %s)", kind_name(from), v.f,
                               kind_name(to));
        double t = trunc(v.f);
        res->i = to == TY_U64 ? (int64_t)(uint64_t)t : wrap(to, (uint64_t)(int64_t)t);
    }
    return true;
}

/* ---- arrays ------------------------------------------------------------------------ */

static const ir_interp_arg *array_of(interp *I, const ir_value *a) {
    return &I->args[a->index]; /* arrays are kernel parameters (verifier) */
}

/* The row-major element offset of a load/store/atomic; false after an error. */
static bool element(interp *I, const ir_op *op, const char *what, size_t *off) {
    const ir_value *av = op->operands[0];
    const ir_interp_arg *a = array_of(I, av);
    uint64_t o = 0;
    for (int d = 0; d < a->rank; d++) {
        if (!check_defined(I, op, op->operands[1 + d], "the index"))
            return false;
        int64_t idx = V(op->operands[1 + d]).i;
        if (idx < 0 || idx >= a->shape[d])
            return fail(I, op,
                        "%s: index %" PRId64 " is out of bounds for dimension %d of '%s' "
                        "(extent %" PRId64 ")",
                        what, idx, d, I->k->params[av->index].name, a->shape[d]);
        o = o * (uint64_t)a->shape[d] + (uint64_t)idx;
    }
    *off = (size_t)o;
    return true;
}

static ival elem_read(const ir_interp_arg *a, size_t off) {
    ival v;
    switch (a->kind) {
    case TY_BOOL: v.i = ((const unsigned char *)a->data)[off] != 0; break;
    case TY_I32: v.i = ((const int32_t *)a->data)[off]; break;
    case TY_U32: v.i = ((const uint32_t *)a->data)[off]; break;
    case TY_I64: v.i = ((const int64_t *)a->data)[off]; break;
    case TY_F32: v.f = ((const float *)a->data)[off]; break;
    case TY_F64: v.f = ((const double *)a->data)[off]; break;
    case TY_I8: v.i = ((const int8_t *)a->data)[off]; break;
    case TY_U8: v.i = ((const uint8_t *)a->data)[off]; break;
    case TY_I16: v.i = ((const int16_t *)a->data)[off]; break;
    case TY_U16: v.i = ((const uint16_t *)a->data)[off]; break;
    case TY_U64: v.i = (int64_t)((const uint64_t *)a->data)[off]; break;
    case TY_F16: v.f = kern_f16_value(((const uint16_t *)a->data)[off]); break;
    case TY_BF16: v.f = kern_bf16_value(((const uint16_t *)a->data)[off]); break;
    default: kern_unreachable("array of a non-scalar element");
    }
    return v;
}

static void elem_write(const ir_interp_arg *a, size_t off, ival v) {
    switch (a->kind) {
    case TY_BOOL: ((unsigned char *)a->data)[off] = (unsigned char)(v.i != 0); break;
    case TY_I32: ((int32_t *)a->data)[off] = (int32_t)v.i; break;
    case TY_U32: ((uint32_t *)a->data)[off] = (uint32_t)v.i; break;
    case TY_I64: ((int64_t *)a->data)[off] = v.i; break;
    case TY_F32: ((float *)a->data)[off] = (float)v.f; break;
    case TY_F64: ((double *)a->data)[off] = v.f; break;
    case TY_I8: ((int8_t *)a->data)[off] = (int8_t)v.i; break;
    case TY_U8: ((uint8_t *)a->data)[off] = (uint8_t)v.i; break;
    case TY_I16: ((int16_t *)a->data)[off] = (int16_t)v.i; break;
    case TY_U16: ((uint16_t *)a->data)[off] = (uint16_t)v.i; break;
    case TY_U64: ((uint64_t *)a->data)[off] = (uint64_t)v.i; break;
    case TY_F16: ((uint16_t *)a->data)[off] = kern_f16_bits(v.f); break;
    case TY_BF16: ((uint16_t *)a->data)[off] = kern_bf16_bits(v.f); break;
    default: kern_unreachable("array of a non-scalar element");
    }
}

/* The bits of a 16-bit element value. */
static uint16_t bits16(kern_tykind k, ival v) {
    return k == TY_F16 ? kern_f16_bits(v.f) : k == TY_BF16 ? kern_bf16_bits(v.f) : (uint16_t)v.i;
}

/* atomic_cas: the element's bits compared with expected's, desired stored on a match. */
static bool exec_cas(interp *I, const ir_op *op, const ir_interp_arg *a, size_t off) {
    uint32_t n = op->noperands;
    if (!check_defined(I, op, op->operands[n - 2], "the expected value") ||
        !check_defined(I, op, op->operands[n - 1], "the desired value"))
        return false;
    if (I->poison)
        P(op->results[0]) = 0;
    uint16_t *e = (uint16_t *)a->data + off;
    ival old = elem_read(a, off);
    if (*e == bits16(a->kind, V(op->operands[n - 2])))
        elem_write(a, off, V(op->operands[n - 1]));
    V(op->results[0]) = old;
    return true;
}

static bool exec_access(interp *I, const ir_op *op) {
    const ir_interp_arg *a = array_of(I, op->operands[0]);
    size_t off = 0;
    if (!element(I, op, ir_info(op->code)->name, &off))
        return false;
    ival *val = NULL;
    if (op->code == IR_ATOMIC_CAS)
        return exec_cas(I, op, a, off);
    if (op->code != IR_LOAD) {
        if (!check_defined(I, op, op->operands[op->noperands - 1], "the stored value"))
            return false;
        val = &V(op->operands[op->noperands - 1]);
    }
    if (I->poison && op->nresults)
        P(op->results[0]) = 0;
    if (op->code == IR_STORE) {
        elem_write(a, off, *val);
        return true;
    }
    ival old = elem_read(a, off);
    if (op->code == IR_LOAD) {
        V(op->results[0]) = old;
        return true;
    }
    /* atomics: new = old OP v, returning old; min/max keep old on a tie; xchg: new = v */
    ival nv;
    kern_tykind k = a->kind;
    if (k == TY_F32 || k == TY_F64 || k == TY_F16 || k == TY_BF16) {
        /* f16/bf16 (autodiff's add of an f32): the f32 sum, rounded when written */
        double o = old.f, v = val->f;
        switch (op->code) {
        case IR_ATOMIC_ADD: nv.f = k != TY_F64 ? (double)((float)o + (float)v) : o + v; break;
        case IR_ATOMIC_SUB: nv.f = k == TY_F32 ? (double)((float)o - (float)v) : o - v; break;
        case IR_ATOMIC_MIN: nv.f = v < o ? v : o; break;
        case IR_ATOMIC_MAX: nv.f = v > o ? v : o; break;
        case IR_ATOMIC_XCHG: nv.f = v; break;
        default: kern_unreachable("not an atomic");
        }
    } else {
        int64_t o = old.i, v = val->i;
        switch (op->code) {
        case IR_ATOMIC_ADD: nv.i = wrap(k, (uint64_t)o + (uint64_t)v); break;
        case IR_ATOMIC_SUB: nv.i = wrap(k, (uint64_t)o - (uint64_t)v); break;
        case IR_ATOMIC_MIN:
            nv.i = (k == TY_U64 ? (uint64_t)v < (uint64_t)o : v < o) ? v : o;
            break;
        case IR_ATOMIC_MAX:
            nv.i = (k == TY_U64 ? (uint64_t)v > (uint64_t)o : v > o) ? v : o;
            break;
        case IR_ATOMIC_XCHG: nv.i = v; break;
        default: kern_unreachable("not an atomic");
        }
    }
    elem_write(a, off, nv);
    V(op->results[0]) = old;
    return true;
}

/* ---- adstacks ---------------------------------------------------------------------- */

/* Every work item (a parallel index, a serial task) starts with empty stacks. */
static void reset_stacks(interp *I) {
    for (uint32_t i = 0; i < I->k->nadstacks; i++)
        I->stacks[i].len = 0;
}

/* Stacks grow without bound: the interpreter does not model the capacities (SizeExprs)
 * that the runtime sizes its per-thread heap by; the op limit bounds a runaway loop. */
static bool exec_adpush(interp *I, const ir_op *op) {
    adstack_rt *s = &I->stacks[op->imm.i];
    if (s->len == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        ival *nv = realloc(s->v, cap * sizeof *nv);
        if (nv)
            s->v = nv;
        uint8_t *np = realloc(s->p, cap);
        if (np)
            s->p = np;
        if (!nv || !np)
            return fail(I, op, "out of memory for %zu entries of adstack %lld", cap,
                        (long long)op->imm.i);
        s->cap = cap;
    }
    const ir_value *v = op->operands[0];
    s->v[s->len] = V(v);
    s->p[s->len] = I->poison ? P(v) : 0;
    s->len++;
    return true;
}

static bool exec_adpop(interp *I, const ir_op *op) {
    adstack_rt *s = &I->stacks[op->imm.i];
    if (s->len == 0)
        return fail(I, op,
                    "adpop: adstack %lld is empty (this work item popped more values than it "
                    "pushed)",
                    (long long)op->imm.i);
    s->len--;
    V(op->results[0]) = s->v[s->len];
    if (I->poison)
        P(op->results[0]) = s->p[s->len];
    return true;
}

/* ---- control flow ------------------------------------------------------------------ */

static bool exec_op(interp *I, const ir_op *op);

/* Runs r's ops up to (not including) its terminator. */
static bool exec_region(interp *I, const ir_region *r) {
    for (const ir_op *op = r->first; op; op = op->next)
        if (!exec_op(I, op))
            return false;
    return true;
}

static bool exec_if(interp *I, const ir_op *op) {
    if (!check_defined(I, op, op->operands[0], "the condition"))
        return false;
    const ir_region *r = op->regions[V(op->operands[0]).i ? 0 : 1];
    if (!exec_region(I, r))
        return false;
    copy_values(I, op->results, r->last->operands, op->nresults);
    return true;
}

/* One loop run of trip count n, into the order-independent fingerprint I->trips. */
static void note_trips(interp *I, const ir_op *op, uint64_t n) {
    uint64_t z = (uint64_t)(uintptr_t)op * 0x9e3779b97f4a7c15ull + n;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    I->trips += z ^ (z >> 31);
}

static bool exec_for(interp *I, const ir_op *op) {
    const ir_region *body = op->regions[0];
    int64_t lo = V(op->operands[0]).i, hi = V(op->operands[1]).i;
    uint32_t n = op->nresults;
    bool early = op->attr & IR_FOR_EARLY_EXIT;
    uint32_t skip = early ? 1 : 0;
    if (!check_defined(I, op, op->operands[0], "the lower bound") ||
        !check_defined(I, op, op->operands[1], "the upper bound"))
        return false;
    copy_values(I, body->args + 1, op->operands + 2, n);
    uint64_t trips = 0;
    /* lo and hi are canonical values of one type and i < hi, so i + 1 cannot overflow */
    for (int64_t i = lo; i < hi; i++, trips++) {
        V(body->args[0]).i = i;
        if (!exec_region(I, body))
            return false;
        const ir_op *y = body->last;
        if (early && !check_defined(I, y, y->operands[0], "the loop's go-on flag"))
            return false;
        bool go = !early || V(y->operands[0]).i;
        copy_values(I, body->args + 1, y->operands + skip, n);
        if (!go) {
            trips++;
            break;
        }
    }
    note_trips(I, op, trips);
    copy_values(I, op->results, body->args + 1, n);
    return true;
}

static bool exec_while(interp *I, const ir_op *op) {
    const ir_region *before = op->regions[0], *after = op->regions[1];
    uint32_t ninit = op->noperands, nres = op->nresults;
    copy_values(I, before->args, op->operands, ninit);
    for (uint64_t it = 0;; it++) {
        if (!exec_region(I, before))
            return false;
        const ir_op *c = before->last;
        if (!check_defined(I, c, c->operands[0], "the loop condition"))
            return false;
        if (!V(c->operands[0]).i) {
            note_trips(I, op, it);
            copy_values(I, op->results, c->operands + 1, nres);
            return true;
        }
        if (it >= I->max_while_iters)
            return fail(I, op, "while loop did not terminate after %" PRIu64 " iterations", it);
        copy_values(I, after->args, c->operands + 1, nres);
        if (!exec_region(I, after))
            return false;
        copy_values(I, before->args, after->last->operands, ninit);
    }
}

/* Row-major: the last dimension varies fastest. */
static bool exec_parallel(interp *I, const ir_op *op) {
    const ir_region *body = op->regions[0];
    uint32_t nd = op->noperands / 2;
    int64_t lo[KERN_MAX_RANK + 4], hi[KERN_MAX_RANK + 4];
    if (nd > KERN_MAX_RANK + 4)
        return fail(I, op, "parallel task of %u dimensions is not supported", nd);
    for (uint32_t d = 0; d < nd; d++) {
        if (!check_defined(I, op, op->operands[2 * d], "the lower bound") ||
            !check_defined(I, op, op->operands[2 * d + 1], "the upper bound"))
            return false;
        lo[d] = V(op->operands[2 * d]).i;
        hi[d] = V(op->operands[2 * d + 1]).i;
        if (lo[d] >= hi[d])
            return true;
        V(body->args[d]).i = lo[d];
    }
    for (;;) {
        reset_stacks(I);
        if (!exec_region(I, body))
            return false;
        uint32_t d = nd;
        while (d > 0) {
            d--;
            int64_t next = V(body->args[d]).i + 1;
            if (next < hi[d]) {
                V(body->args[d]).i = next;
                break;
            }
            V(body->args[d]).i = lo[d];
            if (d == 0)
                return true;
        }
    }
}

/* A debug check of lowered IR (passes/lower_semantics.c): the run stops with the error. */
static bool exec_check(interp *I, const ir_op *op) {
    if (!check_defined(I, op, op->operands[0], "the condition"))
        return false;
    if (V(op->operands[0]).i)
        return true;
    int64_t a = V(op->operands[1]).i, b = V(op->operands[2]).i;
    switch (op->imm.i) {
    case KERN_DEVERR_DIV_ZERO:
        return fail(I, op, "integer division by zero (dividend %" PRId64 ")", a);
    case KERN_DEVERR_SHIFT:
        return fail(I, op, "shift count %" PRId64 " is out of range (0 to %" PRId64 ")", a,
                    b - 1);
    default:
        return fail(I, op, "check %" PRId64 " failed (%" PRId64 ", %" PRId64 ")", op->imm.i, a,
                    b);
    }
}

static bool exec_op(interp *I, const ir_op *op) {
    if (++I->nops > I->max_ops)
        return fail(I, op, "the run exceeded its limit of %" PRIu64 " ops", I->max_ops);
    if (I->poison && op->nresults == 1 && (ir_info(op->code)->flags & OPF_PURE) &&
        op->code != IR_CONST && op->code != IR_DIM) {
        bool done;
        if (!pure_poison(I, op, &done))
            return false;
        if (done)
            return true;
    }
    switch (op->code) {
    case IR_CONST:
        if (ty_is_float(op->results[0]->type))
            V(op->results[0]).f = op->imm.f;
        else
            V(op->results[0]).i = op->imm.i;
        return true;
    case IR_CAST:
    case IR_BITCAST: return exec_cast(I, op);
    case IR_SELECT: V(op->results[0]) = V(op->operands[V(op->operands[0]).i ? 1 : 2]); return true;
    case IR_DIM: V(op->results[0]).i = array_of(I, op->operands[0])->shape[op->imm.i]; return true;
    case IR_LOAD:
    case IR_STORE:
    case IR_ATOMIC_ADD:
    case IR_ATOMIC_SUB:
    case IR_ATOMIC_MIN:
    case IR_ATOMIC_MAX:
    case IR_ATOMIC_XCHG:
    case IR_ATOMIC_CAS: return exec_access(I, op);
    case IR_IF: return exec_if(I, op);
    case IR_FOR: return exec_for(I, op);
    case IR_WHILE: return exec_while(I, op);
    case IR_CUSTOM: { /* its value is its primal region's */
        const ir_region *r = op->regions[0];
        copy_values(I, r->args, op->operands, op->noperands);
        if (!exec_region(I, r))
            return false;
        copy_values(I, op->results, r->last->operands, op->nresults);
        return true;
    }
    case IR_PARALLEL: return exec_parallel(I, op);
    case IR_SERIAL: reset_stacks(I); return exec_region(I, op->regions[0]);
    case IR_ADPUSH: return exec_adpush(I, op);
    case IR_ADPOP: return exec_adpop(I, op);
    case IR_CHECK: return exec_check(I, op);
    case IR_YIELD:
    case IR_CONDITION: return true; /* read by the op that owns the region */
    default:
        if (ty_is_float(op->operands[0]->type)) {
            exec_float(I, op);
            return true;
        }
        return exec_int(I, op);
    }
}

/* ---- binding and the entry points -------------------------------------------------- */

static bool bind_args(interp *I, const ir_interp_arg *args, int nargs) {
    const ir_kernel *k = I->k;
    if (nargs < 0 || (uint32_t)nargs != k->nparams)
        return fail(I, NULL, "%d arguments given, the kernel has %u parameters", nargs, k->nparams);
    for (uint32_t p = 0; p < k->nparams; p++) {
        const ir_param *pr = &k->params[p];
        const ir_interp_arg *a = &args[p];
        const kern_type *t = pr->type;
        if (ty_is_array(t)) {
            if (a->rank != t->rank || a->kind != t->elem->kind)
                return fail(I, NULL, "argument %u ('%s': %s) is not an array of that type", p,
                            pr->name, t->name);
            uint64_t count = 1;
            for (int d = 0; d < a->rank; d++) {
                if (a->shape[d] < 0 || a->shape[d] > INT32_MAX)
                    return fail(I, NULL,
                                "argument %u ('%s'): extent %" PRId64 " of dimension "
                                "%d is out of range",
                                p, pr->name, a->shape[d], d);
                count *= (uint64_t)a->shape[d];
            }
            if (count > 0 && !a->data)
                return fail(I, NULL, "argument %u ('%s'): no data", p, pr->name);
            I->vals[p].i = p;
            continue;
        }
        if (a->rank != 0 || a->kind != t->kind)
            return fail(I, NULL, "argument %u ('%s': %s) is not a scalar of that type", p, pr->name,
                        t->name);
        if (ty_is_float(t))
            I->vals[p].f = round_to(t->kind, a->f);
        else {
            if (wrap(t->kind, (uint64_t)a->i) != a->i)
                return fail(I, NULL, "argument %u ('%s'): %" PRId64 " does not fit in %s", p,
                            pr->name, a->i, t->name);
            I->vals[p].i = a->i;
        }
    }
    return true;
}

static bool verified(const ir_module *m, char *err, size_t errlen) {
    arena mem;
    arena_init(&mem);
    diag_sink sink;
    diag_init(&sink, &mem);
    bool ok = ir_verify(m, &sink);
    if (!ok && errlen > 0)
        snprintf(err, errlen, "the IR does not verify: %u:%u: %s",
                 sink.len ? sink.items[0].loc.line : 0, sink.len ? sink.items[0].loc.col : 0,
                 sink.len ? sink.items[0].message : "?");
    diag_free(&sink);
    arena_free(&mem);
    return ok;
}

bool ir_interp_run_opts(const ir_module *m, const char *kernel, ir_interp_arg *args, int nargs,
                        ir_interp_options *opts, char *err, size_t errlen) {
    if (errlen > 0)
        err[0] = '\0';
    if (!verified(m, err, errlen))
        return false;
    ir_kernel *k = ir_kernel_find(m, kernel);
    if (!k) {
        if (errlen > 0)
            snprintf(err, errlen, "no kernel named '%s'", kernel);
        return false;
    }
    numbering n = {0, 0};
    number_region(&n, k->body); /* the parameters first: ids 0..nparams-1 */
    interp I = {0};
    I.k = k;
    I.args = args;
    I.vals = calloc(n.next ? n.next : 1, sizeof(ival));
    I.nvals = n.next ? n.next : 1;
    I.nscratch = n.max_term ? n.max_term : 1;
    I.scratch = calloc(I.nscratch, sizeof(ival));
    I.max_while_iters =
        opts && opts->max_while_iters ? opts->max_while_iters : DEFAULT_MAX_WHILE_ITERS;
    I.max_ops = opts && opts->max_ops ? opts->max_ops : UINT64_MAX;
    I.err = err;
    I.errlen = errlen;
    I.stacks = calloc(k->nadstacks ? k->nadstacks : 1, sizeof(adstack_rt));
    if (!I.vals || !I.scratch || !I.stacks) {
        free(I.vals);
        free(I.scratch);
        free(I.stacks);
        if (errlen > 0)
            snprintf(err, errlen, "out of memory for %u values", n.next);
        return false;
    }
    bool ok = bind_args(&I, args, nargs) && exec_region(&I, k->body);
    if (opts) {
        opts->ops_executed = I.nops;
        opts->loop_trips = I.trips;
    }
    for (uint32_t i = 0; i < k->nadstacks; i++) {
        free(I.stacks[i].v);
        free(I.stacks[i].p);
    }
    free(I.stacks);
    free(I.vals);
    free(I.scratch);
    free(I.poison);
    free(I.scratch_poison);
    return ok;
}

bool ir_interp_run(const ir_module *m, const char *kernel, ir_interp_arg *args, int nargs,
                   char *err, size_t errlen) {
    return ir_interp_run_opts(m, kernel, args, nargs, NULL, err, errlen);
}
