/* lower_math.c - erf, erfc, log1p, expm1, cbrt, hypot and stopgrad written once as plain
 * IR, for passes/lower_semantics.c (docs/passes.md, "Lowering the rules").
 *
 * The module is lowered before a target is chosen, so the expansions serve every emitter:
 * they use only ops that each one has (exp, log, pow, sqrt, copysign, arithmetic,
 * compares and selects), and they compute every branch and select the one that applies
 * (no control flow: they stand anywhere an op may). The error bounds below are measured
 * against glibc's libm in tests/test_builtins.c, with the CPU's exp, log and pow; on a
 * backend whose exp or log is less accurate (Vulkan's relaxed f32 precision, SPIR-V's own
 * f64 library) those errors add to them.
 *   log1p  |x| small (1 + x in [sqrt(1/2), sqrt(2)]): 2 atanh(s), s = x / (2 + x), as its
 *          odd series; elsewhere log(u), u = 1 + x, corrected by -((u - 1) - x) / u
 *          for the rounding of u. Within 2 ulp.
 *   expm1  |x| < ln 2: the Taylor series (17 terms for f64, 10 for f32); elsewhere
 *          exp(x) - 1. Within 2 ulp.
 *   cbrt   pow(|x|, 1/3) and one Newton step y + (|x| / y^2 - y) / 3, with x's sign; 0,
 *          inf and NaN pass through. Within 1 ulp.
 *   hypot  m * sqrt(1 + (n / m)^2), m = max(|a|, |b|), n = min(|a|, |b|): no overflow or
 *          underflow of the squares; inf when either operand is inf (even with a NaN), as
 *          C's hypot. Within 2 ulp.
 *   erfc   x >= 0: exp(-x^2) g(t) / (1 + 2x), t = (x - 3.75) / (x + 3.75), g a Chebyshev
 *          series (26 terms for f64, 15 for f32; coefficients computed for kern with
 *          mpmath at 40 digits; the method of Shepherd and Laframboise, "Chebyshev
 *          approximation of (1 + 2x) exp(x^2) erfc x in 0 <= x < inf", Math. Comp. 36,
 *          1981), and exp(-x^2) as exp(-h^2) exp(-l (x + h)) with x = h + l split so that
 *          h^2 is exact (Veltkamp); x < 0: 2 - erfc(-x); |x| < 1/2: 1 - erf(x). Within 4
 *          ulp (relative, also deep in the tail).
 *   erf    |x| < 1/2: the Taylor series x sum (-1)^n 2 x^2n / (sqrt(pi) n! (2n + 1)) (13
 *          terms for f64, 7 for f32); elsewhere sign(x) (1 - erfc(|x|)). Within 2 ulp.
 *   stopgrad  its operand: autodiff is over.
 * Requires: the op's operands are f32 or f64 (ops.def's OPF_FLOAT). */
#include <math.h>

#include "lower_math.h"

typedef struct mb {
    ir_builder *b;
    const kern_type *t;
    bool f64;
} mb;

static ir_value *k(mb *m, double v) { return ir_const_float(m->b, m->t, v); }
static ir_value *add(mb *m, ir_value *x, ir_value *y) { return ir_binop(m->b, IR_ADD, x, y); }
static ir_value *sub(mb *m, ir_value *x, ir_value *y) { return ir_binop(m->b, IR_SUB, x, y); }
static ir_value *mul(mb *m, ir_value *x, ir_value *y) { return ir_binop(m->b, IR_MUL, x, y); }
static ir_value *dv(mb *m, ir_value *x, ir_value *y) { return ir_binop(m->b, IR_DIV, x, y); }
static ir_value *un(mb *m, ir_opcode c, ir_value *x) { return ir_unop(m->b, c, x); }
static ir_value *cmp(mb *m, ir_opcode c, ir_value *x, ir_value *y) {
    return ir_binop(m->b, c, x, y);
}
static ir_value *sel(mb *m, ir_value *c, ir_value *x, ir_value *y) {
    return ir_select(m->b, c, x, y);
}

/* c[0] + c[1] x + ... + c[n - 1] x^(n-1), by Horner's rule. */
static ir_value *horner(mb *m, ir_value *x, const double *c, int n) {
    ir_value *p = k(m, c[n - 1]);
    for (int i = n - 2; i >= 0; i--)
        p = add(m, mul(m, p, x), k(m, c[i]));
    return p;
}

/* ---- log1p and expm1 ------------------------------------------------------------------ */

static ir_value *lower_log1p(mb *m, ir_value *x) {
    /* 2 atanh(s) = 2 s (1 + s^2/3 + s^4/5 + ...), |s| <= 0.1716: 12 terms (f64), 6 (f32) */
    double c[12];
    int n = m->f64 ? 12 : 6;
    for (int i = 0; i < n; i++)
        c[i] = 2.0 / (2 * i + 1);
    ir_value *s = dv(m, x, add(m, k(m, 2.0), x));
    ir_value *series = mul(m, s, horner(m, mul(m, s, s), c, n));
    ir_value *u = add(m, k(m, 1.0), x);
    ir_value *d = sub(m, sub(m, u, k(m, 1.0)), x); /* the rounding of u; 0 or NaN: none */
    ir_value *corr = sel(m, cmp(m, IR_GT, un(m, IR_ABS, d), k(m, 0.0)), dv(m, d, u), k(m, 0.0));
    ir_value *wide = sub(m, un(m, IR_LOG, u), corr);
    ir_value *small = ir_binop(m->b, IR_AND, cmp(m, IR_GT, x, k(m, -0.29289321881345248)),
                               cmp(m, IR_LT, x, k(m, 0.41421356237309505)));
    return sel(m, small, series, wide);
}

static ir_value *lower_expm1(mb *m, ir_value *x) {
    double c[17]; /* 1, 1/2!, 1/3!, ...: expm1(x) = x (1 + x/2! + x^2/3! + ...) */
    int n = m->f64 ? 17 : 10;
    c[0] = 1.0;
    for (int i = 1; i < n; i++)
        c[i] = c[i - 1] / (i + 1);
    ir_value *series = mul(m, x, horner(m, x, c, n));
    ir_value *wide = sub(m, un(m, IR_EXP, x), k(m, 1.0));
    ir_value *small = cmp(m, IR_LT, un(m, IR_ABS, x), k(m, M_LN2));
    return sel(m, small, series, wide);
}

/* ---- cbrt and hypot ------------------------------------------------------------------- */

static ir_value *lower_cbrt(mb *m, ir_value *x) {
    ir_value *a = un(m, IR_ABS, x);
    ir_value *y = ir_binop(m->b, IR_POW, a, k(m, 1.0 / 3.0));
    ir_value *step = dv(m, sub(m, dv(m, a, mul(m, y, y)), y), k(m, 3.0));
    ir_value *finite =
        ir_binop(m->b, IR_AND, cmp(m, IR_GT, a, k(m, 0.0)), cmp(m, IR_LT, a, k(m, INFINITY)));
    /* 0, inf and NaN are their own cube roots (pow of a NaN is not NaN on every GPU) */
    return sel(m, finite, ir_binop(m->b, IR_COPYSIGN, add(m, y, step), x), x);
}

static ir_value *lower_hypot(mb *m, ir_value *x, ir_value *y) {
    ir_value *ax = un(m, IR_ABS, x), *ay = un(m, IR_ABS, y);
    ir_value *ylarger = cmp(m, IR_LT, ax, ay);
    ir_value *big = sel(m, ylarger, ay, ax), *small = sel(m, ylarger, ax, ay);
    ir_value *r = dv(m, small, big);
    ir_value *h = mul(m, big, un(m, IR_SQRT, add(m, k(m, 1.0), mul(m, r, r))));
    h = sel(m, cmp(m, IR_EQ, big, k(m, 0.0)), small, h); /* 0 (or the NaN) */
    ir_value *inf =
        ir_binop(m->b, IR_OR, cmp(m, IR_EQ, ax, k(m, INFINITY)), cmp(m, IR_EQ, ay, k(m, INFINITY)));
    return sel(m, inf, k(m, INFINITY), h);
}

/* ---- erf and erfc --------------------------------------------------------------------- */

/* The Chebyshev coefficients of g(t) = (1 + 2x) exp(x^2) erfc(x), x = 3.75 (1 + t) / (1 - t)
 * (mpmath, 40 digits); f32 uses the first 15. */
static const double erfc_cheb[26] = {
    1.17757893456740175408,      -0.00459005458064647733085,  -0.0842491333665179155835,
    0.0592099399981918904981,    -0.0266586684353057522774,   0.00907499767070526509388,
    -0.00241316354041760819094,  0.000490775836525808632286,  -0.000069169733025012063671,
    4.13902798607301016753e-6,   7.74038306619849066863e-7,   -2.18864010492343956615e-7,
    1.07649994656709103771e-8,   4.52195981121828689793e-9,   -7.75440020883135110647e-10,
    -6.31808834088668449439e-11, 2.86879501093066989814e-11,  1.94558685457773472295e-13,
    -9.65469674843343890586e-13, 3.2525481481487398415e-14,   3.34781194828680538778e-14,
    -1.86456288041931310196e-15, -1.25079505306886470895e-15, 7.41823525662404342131e-17,
    5.06814890479611127522e-17,  -2.23705665943600001158e-18,
};

/* exp(-x^2) without the rounding of x^2: x = h + l with h's upper half of the bits
 * (Veltkamp's split), so h^2 is exact and x^2 = h^2 + l (x + h). x is at most 30. */
static ir_value *exp_neg_sq(mb *m, ir_value *x) {
    ir_value *c = mul(m, x, k(m, m->f64 ? 134217729.0 : 4097.0)); /* 2^27 + 1, 2^12 + 1 */
    ir_value *h = sub(m, c, sub(m, c, x));
    ir_value *l = sub(m, x, h);
    ir_value *e1 = un(m, IR_EXP, un(m, IR_NEG, mul(m, h, h)));
    ir_value *e2 = un(m, IR_EXP, un(m, IR_NEG, mul(m, l, add(m, x, h))));
    return mul(m, e1, e2);
}

/* erfc(a) for a >= 0 (or NaN). */
static ir_value *erfc_pos(mb *m, ir_value *a) {
    ir_value *x = sel(m, cmp(m, IR_GT, a, k(m, 30.0)), k(m, 30.0), a); /* erfc(30) = 0 */
    ir_value *t = dv(m, sub(m, x, k(m, 3.75)), add(m, x, k(m, 3.75)));
    /* Clenshaw: b_j = 2 t b_(j+1) - b_(j+2) + c_j; g = t b_1 - b_2 + c_0 */
    int n = m->f64 ? 26 : 15;
    ir_value *t2 = add(m, t, t), *b1 = k(m, 0.0), *b2 = k(m, 0.0);
    for (int j = n - 1; j >= 1; j--) {
        ir_value *b0 = add(m, sub(m, mul(m, t2, b1), b2), k(m, erfc_cheb[j]));
        b2 = b1;
        b1 = b0;
    }
    ir_value *g = add(m, sub(m, mul(m, t, b1), b2), k(m, erfc_cheb[0]));
    ir_value *q = dv(m, g, add(m, k(m, 1.0), add(m, x, x)));
    return mul(m, exp_neg_sq(m, x), q);
}

static ir_value *lower_erf(mb *m, ir_value *x, bool complement) {
    ir_value *a = un(m, IR_ABS, x);
    ir_value *e = erfc_pos(m, a);
    ir_value *neg = cmp(m, IR_LT, x, k(m, 0.0));
    double c[13]; /* 2 / sqrt(pi) (-1)^n / (n! (2n + 1)) */
    int n = m->f64 ? 13 : 7;
    double f = 2.0 / sqrt(M_PI);
    for (int i = 0; i < n; i++) {
        c[i] = f / (2 * i + 1);
        f = -f / (i + 1);
    }
    ir_value *series = mul(m, x, horner(m, mul(m, x, x), c, n));
    ir_value *small = cmp(m, IR_LT, a, k(m, 0.5));
    if (complement) /* 1 - erf(x) near 0: erf is at most 0.53 there, nothing cancels */
        return sel(m, small, sub(m, k(m, 1.0), series), sel(m, neg, sub(m, k(m, 2.0), e), e));
    ir_value *wide = ir_binop(m->b, IR_COPYSIGN, sub(m, k(m, 1.0), e), x);
    return sel(m, small, series, wide);
}

ir_value *lower_math_op(ir_builder *b, ir_op *op) {
    if (!op->noperands || !ty_is_float(op->operands[0]->type))
        return NULL;
    ir_value *x = op->operands[0];
    mb M = {b, x->type, x->type->kind == TY_F64}, *m = &M;
    switch (op->code) {
    case IR_LOG1P: return lower_log1p(m, x);
    case IR_EXPM1: return lower_expm1(m, x);
    case IR_CBRT: return lower_cbrt(m, x);
    case IR_HYPOT: return lower_hypot(m, x, op->operands[1]);
    case IR_ERF: return lower_erf(m, x, false);
    case IR_ERFC: return lower_erf(m, x, true);
    case IR_STOPGRAD: return x;
    default: return NULL;
    }
}
