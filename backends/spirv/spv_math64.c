/* spv_math64.c - f64 transcendental functions for the SPIR-V backend, written in SPIR-V:
 * GLSL.std.450 has them for 16- and 32-bit floats only. Each is a function of the module
 * (emitted once, after the entry points, when some kernel uses it), built from f64
 * arithmetic, fma, floor, sqrt and bit casts (docs/backend-spirv.md gives the accuracy):
 *   exp, exp2   n = round(x / ln 2) (exp2: round(x)), r = x - n ln 2 (Cody-Waite, two
 *               parts), a degree-13 Taylor polynomial on |r| <= 0.35, times 2^n built in
 *               two factors from the exponent bits (so subnormal results and overflow come
 *               out right);
 *   log, log2   x = m 2^e with m in [sqrt(1/2), sqrt(2)) from the bits (subnormals scaled
 *               first), log m = 2 atanh(s), s = (m - 1) / (m + 1), a series in s^2;
 *   sin, cos, tan  k = round(x 2/pi), r = x - k pi/2 in three parts with fma (exact for
 *               |x| < 2^20 pi/2; larger arguments lose accuracy), Taylor polynomials of
 *               sin and cos on |r| <= pi/4, picked and signed by k mod 4;
 *   atan, atan2, asin, acos  atan reduced to |t| <= tan(pi/12) (1/x, then the pi/6 step),
 *               a series; atan2 by quadrant; asin, acos through atan2 and sqrt;
 *   sinh, cosh, tanh  from exp and expm1 (a series below 0.5);
 *   pow         C's special cases, then exp(y log|x|) with the sign of an odd integer y
 *               (the error grows with |y log x|). */
#include <math.h>
#include <string.h>

#include "../../common/util.h"
#include "spv_math64.h"

enum {
    F_EXP,
    F_EXP2,
    F_LOG,
    F_LOG2,
    F_SIN,
    F_COS,
    F_TAN,
    F_ASIN,
    F_ACOS,
    F_ATAN,
    F_ATAN2,
    F_SINH,
    F_COSH,
    F_TANH,
    F_POW,
    F_EXPM1,
    F__COUNT
};
_Static_assert((int)F__COUNT <= (int)SPV_MATH64_FUNCS, "spv_math64 holds every function");

typedef struct m64 {
    spv_builder *b;
    spv_math64 *st;
    uint32_t d, u64, bl, i64t;
} m64;

static uint32_t C(m64 *m, double v) { return spv_const_f64(m->b, v); }
static uint32_t op2(m64 *m, SpvOp o, uint32_t a, uint32_t c) {
    return spv_op2(m->b, o, m->d, a, c);
}
static uint32_t add(m64 *m, uint32_t a, uint32_t c) { return op2(m, SpvOpFAdd, a, c); }
static uint32_t sub(m64 *m, uint32_t a, uint32_t c) { return op2(m, SpvOpFSub, a, c); }
static uint32_t mul(m64 *m, uint32_t a, uint32_t c) { return op2(m, SpvOpFMul, a, c); }
static uint32_t dv(m64 *m, uint32_t a, uint32_t c) { return op2(m, SpvOpFDiv, a, c); }
static uint32_t neg(m64 *m, uint32_t a) { return spv_op1(m->b, SpvOpFNegate, m->d, a); }
static uint32_t ext1(m64 *m, enum GLSLstd450 g, uint32_t a) {
    return spv_ext(m->b, m->d, g, &a, 1);
}
static uint32_t fma3(m64 *m, uint32_t a, uint32_t c, uint32_t e) {
    uint32_t x[3] = {a, c, e};
    return spv_ext(m->b, m->d, GLSLstd450Fma, x, 3);
}
static uint32_t sel(m64 *m, uint32_t c, uint32_t a, uint32_t e) {
    return spv_op3(m->b, SpvOpSelect, m->d, c, a, e);
}
static uint32_t cmp(m64 *m, SpvOp o, uint32_t a, uint32_t c) {
    return spv_op2(m->b, o, m->bl, a, c);
}
static uint32_t lt(m64 *m, uint32_t a, uint32_t c) { return cmp(m, SpvOpFOrdLessThan, a, c); }
static uint32_t gt(m64 *m, uint32_t a, uint32_t c) { return cmp(m, SpvOpFOrdGreaterThan, a, c); }
static uint32_t isnan_(m64 *m, uint32_t a) { return spv_op1(m->b, SpvOpIsNan, m->bl, a); }
static uint32_t land(m64 *m, uint32_t a, uint32_t c) {
    return spv_op2(m->b, SpvOpLogicalAnd, m->bl, a, c);
}
static uint32_t lor(m64 *m, uint32_t a, uint32_t c) {
    return spv_op2(m->b, SpvOpLogicalOr, m->bl, a, c);
}

/* c[0] + x (c[1] + x (c[2] + ...)) */
static uint32_t poly(m64 *m, uint32_t x, const double *c, int n) {
    uint32_t r = C(m, c[n - 1]);
    for (int i = n - 2; i >= 0; i--)
        r = fma3(m, r, x, C(m, c[i]));
    return r;
}

/* 2^k for an integer-valued f64 k in [-1022, 1023], from the exponent bits */
static uint32_t pow2i(m64 *m, uint32_t k) {
    uint32_t ki = spv_op1(m->b, SpvOpConvertFToS, m->u64, add(m, k, C(m, 1023.0)));
    uint32_t bits = spv_op2(m->b, SpvOpShiftLeftLogical, m->u64, ki, spv_const_u64(m->b, 52));
    return spv_op1(m->b, SpvOpBitcast, m->d, bits);
}

/* p 2^n for integer-valued n in about [-1100, 1100]: two factors, each in range */
static uint32_t scale(m64 *m, uint32_t p, uint32_t n) {
    n = ext1(m, GLSLstd450Trunc, n);
    uint32_t lim[3] = {n, C(m, -2000.0), C(m, 2000.0)};
    n = spv_ext(m->b, m->d, GLSLstd450FClamp, lim, 3);
    uint32_t n1 = ext1(m, GLSLstd450Trunc, mul(m, n, C(m, 0.5)));
    uint32_t n2 = sub(m, n, n1);
    uint32_t c1[3] = {n1, C(m, -1022.0), C(m, 1023.0)}, c2[3] = {n2, C(m, -1022.0), C(m, 1023.0)};
    n1 = spv_ext(m->b, m->d, GLSLstd450FClamp, c1, 3);
    n2 = spv_ext(m->b, m->d, GLSLstd450FClamp, c2, 3);
    return mul(m, mul(m, p, pow2i(m, n1)), pow2i(m, n2));
}

static const double LN2_HI = 6.93147180369123816490e-01, LN2_LO = 1.90821492927058770002e-10;

/* e^r for |r| <= 0.35: the Taylor polynomial to r^13 */
static uint32_t exp_poly(m64 *m, uint32_t r) {
    double c[14];
    c[0] = 1.0;
    for (int i = 1; i < 14; i++)
        c[i] = c[i - 1] / i;
    return poly(m, r, c, 14);
}

static uint32_t call(m64 *m, int f, const uint32_t *x, int n);

static uint32_t body_exp(m64 *m, const uint32_t *x, bool two) {
    uint32_t n, r;
    if (two) {
        n = ext1(m, GLSLstd450Floor, add(m, x[0], C(m, 0.5)));
        uint32_t f = sub(m, x[0], n);
        r = fma3(m, f, C(m, LN2_HI), mul(m, f, C(m, LN2_LO)));
    } else {
        n = ext1(m, GLSLstd450Floor, fma3(m, x[0], C(m, 1.0 / M_LN2), C(m, 0.5)));
        r = fma3(m, neg(m, n), C(m, LN2_HI), x[0]);
        r = fma3(m, neg(m, n), C(m, LN2_LO), r);
    }
    uint32_t y = scale(m, exp_poly(m, r), n);
    double hi = two ? 1024.0 : 709.782712893384, lo = two ? -1075.0 : -745.1332191019412;
    y = sel(m, gt(m, x[0], C(m, hi)), C(m, INFINITY), y);
    y = sel(m, lt(m, x[0], C(m, lo)), C(m, 0.0), y);
    return sel(m, isnan_(m, x[0]), x[0], y);
}

/* log x = e ln2 + log m; log2 x = e + log m / ln 2 */
static uint32_t body_log(m64 *m, const uint32_t *x, bool two) {
    uint32_t a = x[0];
    uint32_t tiny = lt(m, a, C(m, 2.2250738585072014e-308));
    uint32_t as = sel(m, tiny, mul(m, a, C(m, 18014398509481984.0 /* 2^54 */)), a);
    uint32_t eadj = sel(m, tiny, C(m, -54.0), C(m, 0.0));
    uint32_t bits = spv_op1(m->b, SpvOpBitcast, m->u64, as);
    uint32_t eb = spv_op2(m->b, SpvOpShiftRightLogical, m->u64, bits, spv_const_u64(m->b, 52));
    eb = spv_op2(m->b, SpvOpBitwiseAnd, m->u64, eb, spv_const_u64(m->b, 0x7ff));
    uint32_t e = sub(m, spv_op1(m->b, SpvOpConvertUToF, m->d, eb), C(m, 1023.0));
    uint32_t mb =
        spv_op2(m->b, SpvOpBitwiseAnd, m->u64, bits, spv_const_u64(m->b, 0x000fffffffffffffull));
    mb = spv_op2(m->b, SpvOpBitwiseOr, m->u64, mb, spv_const_u64(m->b, 0x3ff0000000000000ull));
    uint32_t mant = spv_op1(m->b, SpvOpBitcast, m->d, mb);
    uint32_t big = gt(m, mant, C(m, M_SQRT2));
    mant = sel(m, big, mul(m, mant, C(m, 0.5)), mant);
    e = add(m, add(m, e, eadj), sel(m, big, C(m, 1.0), C(m, 0.0)));
    uint32_t f = sub(m, mant, C(m, 1.0));
    uint32_t s = dv(m, f, add(m, mant, C(m, 1.0)));
    uint32_t z = mul(m, s, s);
    double c[12];
    for (int i = 0; i < 12; i++)
        c[i] = 2.0 / (2 * i + 1);
    uint32_t lm = mul(m, s, poly(m, z, c, 12)); /* 2 atanh s */
    uint32_t y = two ? fma3(m, lm, C(m, 1.0 / M_LN2), e)
                     : add(m, mul(m, e, C(m, LN2_HI)), fma3(m, e, C(m, LN2_LO), lm));
    y = sel(m, cmp(m, SpvOpFOrdEqual, a, C(m, 0.0)), C(m, -INFINITY), y);
    y = sel(m, lt(m, a, C(m, 0.0)), C(m, NAN), y);
    y = sel(m, cmp(m, SpvOpFOrdEqual, a, C(m, INFINITY)), a, y);
    return sel(m, isnan_(m, a), a, y);
}

/* sin (which 0) or cos (1) or tan (2) */
static uint32_t body_trig(m64 *m, const uint32_t *x, int which) {
    uint32_t a = x[0];
    uint32_t k = ext1(m, GLSLstd450Floor, fma3(m, a, C(m, M_2_PI), C(m, 0.5)));
    uint32_t nk = neg(m, k);
    uint32_t r = fma3(m, nk, C(m, 1.57079632673412561417e+00), a);
    r = fma3(m, nk, C(m, 6.07710050630396597660e-11), r);
    r = fma3(m, nk, C(m, 2.02226624871116645580e-21), r);
    uint32_t z = mul(m, r, r);
    double cs[9], cc[10];
    double f = 1.0;
    for (int i = 0; i < 9; i++) { /* sin r / r = sum (-1)^i z^i / (2i+1)! */
        cs[i] = (i % 2 ? -1.0 : 1.0) / f;
        f *= (2 * i + 2) * (2 * i + 3);
    }
    f = 1.0;
    for (int i = 0; i < 10; i++) { /* cos r = sum (-1)^i z^i / (2i)! */
        cc[i] = (i % 2 ? -1.0 : 1.0) / f;
        f *= (2 * i + 1) * (2 * i + 2);
    }
    uint32_t sn = mul(m, r, poly(m, z, cs, 9)), cn = poly(m, z, cc, 10);
    /* q = k mod 4 from the bits of k (k is exact for |x| < 2^52) */
    uint32_t ki = spv_op1(m->b, SpvOpConvertFToS, m->u64, k);
    uint32_t q = spv_op2(m->b, SpvOpBitwiseAnd, m->u64, ki, spv_const_u64(m->b, 3));
    uint32_t odd = spv_op2(m->b, SpvOpINotEqual, m->bl,
                           spv_op2(m->b, SpvOpBitwiseAnd, m->u64, q, spv_const_u64(m->b, 1)),
                           spv_const_u64(m->b, 0));
    uint32_t q2 = spv_op2(m->b, SpvOpINotEqual, m->bl,
                          spv_op2(m->b, SpvOpBitwiseAnd, m->u64, q, spv_const_u64(m->b, 2)),
                          spv_const_u64(m->b, 0));
    uint32_t q13 = spv_op2(m->b, SpvOpLogicalNotEqual, m->bl, odd, q2); /* q == 1 or q == 2 */
    uint32_t y;
    if (which == 0) /* sin: s, c, -s, -c */
        y = sel(m, q2, neg(m, sel(m, odd, cn, sn)), sel(m, odd, cn, sn));
    else if (which == 1) /* cos: c, -s, -c, s */
        y = sel(m, q13, neg(m, sel(m, odd, sn, cn)), sel(m, odd, sn, cn));
    else /* tan: s/c, -c/s */
        y = sel(m, odd, neg(m, dv(m, cn, sn)), dv(m, sn, cn));
    uint32_t bad = lor(m, isnan_(m, a), spv_op1(m->b, SpvOpIsInf, m->bl, a));
    return sel(m, bad, C(m, NAN), y);
}

/* atan of t >= 0 */
static uint32_t atan_pos(m64 *m, uint32_t t) {
    uint32_t inv = gt(m, t, C(m, 1.0));
    uint32_t u = sel(m, inv, dv(m, C(m, 1.0), t), t);
    uint32_t step = gt(m, u, C(m, 0.26794919243112270)); /* tan(pi/12) */
    uint32_t s3 = C(m, 1.7320508075688772);
    uint32_t v = sel(m, step, dv(m, fma3(m, u, s3, C(m, -1.0)), add(m, u, s3)), u);
    uint32_t z = mul(m, v, v);
    double c[16];
    for (int i = 0; i < 16; i++)
        c[i] = (i % 2 ? -1.0 : 1.0) / (2 * i + 1);
    uint32_t at = mul(m, v, poly(m, z, c, 16));
    at = add(m, at, sel(m, step, C(m, M_PI / 6), C(m, 0.0)));
    at = sel(m, inv, sub(m, C(m, M_PI_2), at), at);
    return sel(m, cmp(m, SpvOpFOrdEqual, t, C(m, INFINITY)), C(m, M_PI_2), at);
}

static uint32_t signbit_(m64 *m, uint32_t a) {
    uint32_t bits = spv_op1(m->b, SpvOpBitcast, m->u64, a);
    return spv_op2(m->b, SpvOpINotEqual, m->bl,
                   spv_op2(m->b, SpvOpShiftRightLogical, m->u64, bits, spv_const_u64(m->b, 63)),
                   spv_const_u64(m->b, 0));
}

static uint32_t copysign_(m64 *m, uint32_t mag, uint32_t sgn) {
    uint32_t am = ext1(m, GLSLstd450FAbs, mag);
    return sel(m, signbit_(m, sgn), neg(m, am), am);
}

static uint32_t body_atan(m64 *m, const uint32_t *x) {
    uint32_t r = copysign_(m, atan_pos(m, ext1(m, GLSLstd450FAbs, x[0])), x[0]);
    return sel(m, isnan_(m, x[0]), x[0], r);
}

static uint32_t body_atan2(m64 *m, const uint32_t *x) {
    uint32_t y = x[0], xx = x[1];
    uint32_t ay = ext1(m, GLSLstd450FAbs, y), ax = ext1(m, GLSLstd450FAbs, xx);
    uint32_t t = atan_pos(m, dv(m, ay, ax)); /* in [0, pi/2] */
    uint32_t yinf = spv_op1(m->b, SpvOpIsInf, m->bl, y),
             xinf = spv_op1(m->b, SpvOpIsInf, m->bl, xx);
    t = sel(m, land(m, yinf, xinf), C(m, M_PI_4), t);
    t = sel(m, cmp(m, SpvOpFOrdEqual, ay, C(m, 0.0)), C(m, 0.0), t); /* 0/0 too */
    uint32_t xneg = signbit_(m, xx);
    t = sel(m, xneg, sub(m, C(m, M_PI), t), t);
    uint32_t r = copysign_(m, t, y);
    return sel(m, lor(m, isnan_(m, y), isnan_(m, xx)), C(m, NAN), r);
}

/* asin x = atan2(x, sqrt((1 - x)(1 + x))), acos x = atan2(sqrt(...), x) */
static uint32_t body_asincos(m64 *m, const uint32_t *x, bool cosine) {
    uint32_t s = ext1(m, GLSLstd450Sqrt, mul(m, sub(m, C(m, 1.0), x[0]), add(m, C(m, 1.0), x[0])));
    uint32_t args[2] = {cosine ? s : x[0], cosine ? x[0] : s};
    uint32_t r = call(m, F_ATAN2, args, 2);
    return sel(m, gt(m, ext1(m, GLSLstd450FAbs, x[0]), C(m, 1.0)), C(m, NAN), r);
}

/* e^x - 1: a series for |x| < 0.5, exp otherwise */
static uint32_t body_expm1(m64 *m, const uint32_t *x) {
    double c[18];
    double f = 1.0;
    for (int i = 0; i < 18; i++) {
        f *= (i + 1);
        c[i] = 1.0 / f; /* x^(i+1) / (i+1)! */
    }
    uint32_t small = mul(m, x[0], poly(m, x[0], c, 18));
    uint32_t big = sub(m, call(m, F_EXP, x, 1), C(m, 1.0));
    return sel(m, lt(m, ext1(m, GLSLstd450FAbs, x[0]), C(m, 0.5)), small, big);
}

/* sinh (0), cosh (1), tanh (2) */
static uint32_t body_hyp(m64 *m, const uint32_t *x, int which) {
    uint32_t a = ext1(m, GLSLstd450FAbs, x[0]);
    if (which == 2) {
        uint32_t twoa = mul(m, a, C(m, 2.0));
        uint32_t e = call(m, F_EXPM1, &twoa, 1);
        uint32_t t = dv(m, e, add(m, e, C(m, 2.0)));
        t = sel(m, gt(m, a, C(m, 22.0)), C(m, 1.0), t);
        return sel(m, isnan_(m, x[0]), x[0], copysign_(m, t, x[0]));
    }
    uint32_t ah = mul(m, a, C(m, 0.5)); /* e^a / 2 = (e^(a/2) / 2) e^(a/2): no early overflow */
    uint32_t eh = call(m, F_EXP, &ah, 1);
    uint32_t half = mul(m, mul(m, eh, C(m, 0.5)), eh);
    uint32_t ea = call(m, F_EXP, &a, 1);
    uint32_t inv = dv(m, C(m, 0.5), ea);
    uint32_t large = gt(m, a, C(m, 20.0));
    if (which == 1)
        return sel(m, large, half, fma3(m, ea, C(m, 0.5), inv));
    uint32_t em = call(m, F_EXPM1, &a, 1); /* sinh a = (em + em / (em + 1)) / 2 */
    uint32_t sh = mul(m, add(m, em, dv(m, em, add(m, em, C(m, 1.0)))), C(m, 0.5));
    sh = sel(m, large, half, sh);
    return sel(m, isnan_(m, x[0]), x[0], copysign_(m, sh, x[0]));
}

static uint32_t body_pow(m64 *m, const uint32_t *x) {
    uint32_t b = x[0], e = x[1];
    uint32_t ab = ext1(m, GLSLstd450FAbs, b);
    uint32_t lg = call(m, F_LOG, &ab, 1);
    uint32_t prod = mul(m, e, lg);
    uint32_t r = call(m, F_EXP, &prod, 1);
    uint32_t eint = cmp(m, SpvOpFOrdEqual, ext1(m, GLSLstd450Floor, e), e);
    uint32_t half = mul(m, e, C(m, 0.5));
    uint32_t eodd = land(
        m, eint, spv_op2(m->b, SpvOpFOrdNotEqual, m->bl, ext1(m, GLSLstd450Floor, half), half));
    eodd = land(m, eodd, lt(m, ext1(m, GLSLstd450FAbs, e), C(m, 9007199254740992.0)));
    uint32_t bneg = signbit_(m, b);
    /* a negative base: an odd integer exponent keeps the sign, a non-integer one gives NaN */
    r = sel(m, land(m, bneg, eodd), neg(m, r), r);
    uint32_t bfin = spv_op1(m->b, SpvOpLogicalNot, m->bl, spv_op1(m->b, SpvOpIsInf, m->bl, b));
    r = sel(
        m, land(m, land(m, lt(m, b, C(m, 0.0)), bfin), spv_op1(m->b, SpvOpLogicalNot, m->bl, eint)),
        C(m, NAN), r);
    /* zero base: e < 0 gives inf, e > 0 zero (signed for odd e) */
    uint32_t bzero = cmp(m, SpvOpFOrdEqual, b, C(m, 0.0));
    uint32_t zr = sel(m, lt(m, e, C(m, 0.0)), C(m, INFINITY), C(m, 0.0));
    zr = sel(m, land(m, bneg, eodd), neg(m, zr), zr);
    r = sel(m, bzero, zr, r);
    /* NaN in, NaN out, but pow(x, 0) = 1 and pow(1, y) = 1 */
    r = sel(m, lor(m, isnan_(m, b), isnan_(m, e)), C(m, NAN), r);
    uint32_t one =
        lor(m, cmp(m, SpvOpFOrdEqual, e, C(m, 0.0)), cmp(m, SpvOpFOrdEqual, b, C(m, 1.0)));
    r = sel(m, one, C(m, 1.0), r);
    /* (-1)^(+-inf) = 1; |b| < 1 with -inf and |b| > 1 with inf: inf; the others: 0 */
    uint32_t einf = spv_op1(m->b, SpvOpIsInf, m->bl, e);
    uint32_t gt1 = gt(m, ab, C(m, 1.0)), epos = gt(m, e, C(m, 0.0));
    uint32_t ir =
        sel(m, spv_op2(m->b, SpvOpLogicalEqual, m->bl, gt1, epos), C(m, INFINITY), C(m, 0.0));
    ir = sel(m, cmp(m, SpvOpFOrdEqual, ab, C(m, 1.0)), C(m, 1.0), ir);
    return sel(m, land(m, einf, spv_op1(m->b, SpvOpLogicalNot, m->bl, isnan_(m, b))), ir, r);
}

/* ---- functions --------------------------------------------------------------------------- */

static int nargs_of(int f) { return f == F_ATAN2 || f == F_POW ? 2 : 1; }

static uint32_t call(m64 *m, int f, const uint32_t *x, int n) {
    if (!m->st->fn[f])
        m->st->fn[f] = spv_id(m->b);
    uint32_t ops[3] = {m->st->fn[f], x[0], n > 1 ? x[1] : 0};
    return spv_op(m->b, SpvOpFunctionCall, m->d, ops, (size_t)n + 1);
}

uint32_t spv_math64_call(spv_builder *b, spv_math64 *st, ir_opcode code, const uint32_t *x) {
    m64 m = {b, st, spv_type_float(b, 64), spv_type_uint(b, 64), spv_type_bool(b), 0};
    int f;
    switch (code) {
    case IR_EXP: f = F_EXP; break;
    case IR_EXP2: f = F_EXP2; break;
    case IR_LOG: f = F_LOG; break;
    case IR_LOG2: f = F_LOG2; break;
    case IR_SIN: f = F_SIN; break;
    case IR_COS: f = F_COS; break;
    case IR_TAN: f = F_TAN; break;
    case IR_ASIN: f = F_ASIN; break;
    case IR_ACOS: f = F_ACOS; break;
    case IR_ATAN: f = F_ATAN; break;
    case IR_ATAN2: f = F_ATAN2; break;
    case IR_SINH: f = F_SINH; break;
    case IR_COSH: f = F_COSH; break;
    case IR_TANH: f = F_TANH; break;
    case IR_POW: f = F_POW; break;
    default: kern_unreachable("spv_math64_call: not an f64 function");
    }
    return call(&m, f, x, nargs_of(f));
}

void spv_math64_finish(spv_builder *b, spv_math64 *st) {
    bool any = false;
    for (int f = 0; f < F__COUNT; f++)
        any = any || st->fn[f];
    if (!any) /* no f64 type (and no Float64 capability) for modules without them */
        return;
    m64 m = {b, st, spv_type_float(b, 64), spv_type_uint(b, 64), spv_type_bool(b), 0};
    bool again = true;
    while (again) { /* a body may ask for more functions (pow: log, exp) */
        again = false;
        for (int f = 0; f < F__COUNT; f++) {
            if (!st->fn[f] || st->done[f])
                continue;
            st->done[f] = again = true;
            int n = nargs_of(f);
            uint32_t pt[2] = {m.d, m.d};
            uint32_t fnty = spv_type_fn(b, m.d, pt, (size_t)n);
            spv_instv(&b->funcs, SpvOpFunction, 4, m.d, st->fn[f], SpvFunctionControlMaskNone,
                      fnty);
            uint32_t x[2];
            for (int i = 0; i < n; i++)
                x[i] = spv_op(b, SpvOpFunctionParameter, m.d, NULL, 0);
            spv_label(b, spv_id(b));
            uint32_t r;
            switch (f) {
            case F_EXP: r = body_exp(&m, x, false); break;
            case F_EXP2: r = body_exp(&m, x, true); break;
            case F_LOG: r = body_log(&m, x, false); break;
            case F_LOG2: r = body_log(&m, x, true); break;
            case F_SIN: r = body_trig(&m, x, 0); break;
            case F_COS: r = body_trig(&m, x, 1); break;
            case F_TAN: r = body_trig(&m, x, 2); break;
            case F_ASIN: r = body_asincos(&m, x, false); break;
            case F_ACOS: r = body_asincos(&m, x, true); break;
            case F_ATAN: r = body_atan(&m, x); break;
            case F_ATAN2: r = body_atan2(&m, x); break;
            case F_SINH: r = body_hyp(&m, x, 0); break;
            case F_COSH: r = body_hyp(&m, x, 1); break;
            case F_TANH: r = body_hyp(&m, x, 2); break;
            case F_EXPM1: r = body_expm1(&m, x); break;
            default: r = body_pow(&m, x); break;
            }
            spv_instv(&b->funcs, SpvOpReturnValue, 1, r);
            spv_instv(&b->funcs, SpvOpFunctionEnd, 0);
        }
    }
}
