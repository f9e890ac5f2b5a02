/* lower_libm.c - kern's own math library: sin, cos, tan, asin, acos, atan, atan2, sinh,
 * cosh, tanh, exp, exp2, log, log2 and pow written once as plain IR, for the targets whose
 * own functions are missing or less accurate than kern's table (docs/reference.md,
 * "Accuracy of the math builtins"): SPIR-V (f32 unless fast math, f64 always: GLSL.std.450
 * has no f64 functions and the drivers' f32 ones are approximations), AMDGPU (no ROCm
 * device libraries in Debian) and, on request, every target (kc_options.own_math).
 *
 * Each function is built from arithmetic, fma, floor, trunc, sqrt, abs, compares, selects
 * and bitcasts, with no control flow but one `if` (f32 trig's large arguments without a
 * fused fma), in the operand's type (f32 in f32: no f64 is needed
 * on the device). The same code serves both types; only the constants and the number of
 * terms differ. The methods (T the type, u = 2^-24 for f32, 2^-53 for f64):
 *   exp, exp2   n = round(x / ln 2) (exp2: round(x)), r = x - n ln 2 with ln 2 in two parts
 *               (fma), the Taylor polynomial of e^r on |r| <= 0.35 (to r^8 for f32, r^13
 *               for f64), times 2^n built from the exponent bits in two factors (subnormal
 *               results and overflow come out right);
 *   log, log2   x = m 2^e with m in [sqrt(1/2), sqrt(2)) from the bits (subnormals scaled
 *               first), log m = 2 atanh(s), s = (m - 1) / (m + 1), a series in s^2;
 *   sin, cos, tan  k = round(x 2/pi) from x 2/pi in two parts (right where it rounds
 *               across a half), r = x - k pi/2 exactly for |k| < 2^24 in f32, 2^20 in f64
 *               (|x| below about 2.6e7 resp. 1.6e6; beyond, the error grows with |x|;
 *               reduce_pio2; f32 without a fused fma below |x| = 6000: to 2^-35 absolute,
 *               reduce), polynomials of sin and cos on |r| <= pi/4 (f32 minimax, f64
 *               Taylor), picked and signed by the low bits of k;
 *   atan, atan2, asin, acos  atan reduced to |t| <= tan(pi/12) (1/x, then the pi/6 step)
 *               and a series; atan2 by quadrant; asin and acos through atan2 and sqrt;
 *   sinh, cosh, tanh  from exp and expm1 (a series below 1/2);
 *   pow         C's special cases, then 2^(y log2|x|) with log2|x| in two parts (about
 *               u^2 relative) and y log2|x| as an exact product plus its error, so that
 *               the error does not grow with |y log x|; the sign of an odd integer y.
 * The errors measured against glibc are in docs/reference.md and tests/test_libm.c. The
 * methods assume that fma is fused (GLSL.std.450's Fma is on lavapipe and NVIDIA's
 * driver) and that the emitter does not contract a * b + c on its own.
 *
 * Where: ir_libm_copy, by the SPIR-V and AMDGPU code generators, on a copy of the module, after
 * ir_lower_semantics (whose expansions of erf, log1p, ... leave exp, log and pow ops for
 * this pass); compiler/driver.c runs it on the module itself for kc_options.own_math.
 * Requires a lowered module (ir_module.lowered); keeps it valid. */
#include <math.h>

#include "passes.h"

/* The reductions of sin, cos and tan made in the region being lowered (its later ops, and
 * the regions nested in them, may use them): argument x, quadrant q, reduced argument r.
 * sin and cos of one argument share one. */
typedef struct reductions {
    const ir_region *region;
    struct {
        ir_value *x, *q, *r;
    } at[8];
    int n, next;
} reductions;

typedef struct lm {
    ir_builder *b;
    const kern_type *t, *ut; /* the float type and the unsigned integer of its size */
    bool f64;
    bool fused;      /* fma rounds once (LLVM's targets; not Vulkan's Fma) */
    int mbits, bias; /* mantissa bits (23, 52) and exponent bias (127, 1023) */
    reductions *red;
} lm;

static ir_value *k(lm *m, double v) { return ir_const_float(m->b, m->t, v); }
static ir_value *uk(lm *m, uint64_t v) { return ir_const_int(m->b, m->ut, (int64_t)v); }
static ir_value *bin(lm *m, ir_opcode c, ir_value *x, ir_value *y) {
    return ir_binop(m->b, c, x, y);
}
static ir_value *add(lm *m, ir_value *x, ir_value *y) { return bin(m, IR_ADD, x, y); }
static ir_value *sub(lm *m, ir_value *x, ir_value *y) { return bin(m, IR_SUB, x, y); }
static ir_value *mul(lm *m, ir_value *x, ir_value *y) { return bin(m, IR_MUL, x, y); }
static ir_value *dv(lm *m, ir_value *x, ir_value *y) { return bin(m, IR_DIV, x, y); }
static ir_value *un(lm *m, ir_opcode c, ir_value *x) { return ir_unop(m->b, c, x); }
static ir_value *fma3(lm *m, ir_value *x, ir_value *y, ir_value *z) {
    return ir_triop(m->b, IR_FMA, x, y, z);
}
static ir_value *sel(lm *m, ir_value *c, ir_value *x, ir_value *y) {
    return ir_select(m->b, c, x, y);
}
static ir_value *lt(lm *m, ir_value *x, ir_value *y) { return bin(m, IR_LT, x, y); }
static ir_value *gt(lm *m, ir_value *x, ir_value *y) { return bin(m, IR_GT, x, y); }
static ir_value *eq(lm *m, ir_value *x, ir_value *y) { return bin(m, IR_EQ, x, y); }
static ir_value *land(lm *m, ir_value *x, ir_value *y) { return bin(m, IR_AND, x, y); }
static ir_value *lor(lm *m, ir_value *x, ir_value *y) { return bin(m, IR_OR, x, y); }
static ir_value *lnot(lm *m, ir_value *x) { return un(m, IR_NOT, x); }
static ir_value *bits(lm *m, ir_value *x) { return ir_bitcast(m->b, m->ut, x); }
/* NaN and inf from the bits: no driver may assume them away */
static ir_value *absbits(lm *m, ir_value *x) {
    return bin(m, IR_AND, bits(m, x), uk(m, m->f64 ? 0x7fffffffffffffffull : 0x7fffffffu));
}
static ir_value *infbits(lm *m) { return uk(m, m->f64 ? 0x7ff0000000000000ull : 0x7f800000u); }
static ir_value *isnan_(lm *m, ir_value *x) { return gt(m, absbits(m, x), infbits(m)); }
static ir_value *isinf_(lm *m, ir_value *x) { return eq(m, absbits(m, x), infbits(m)); }
static ir_value *from_bits(lm *m, ir_value *u) { return ir_bitcast(m->b, m->t, u); }
/* the sign bit of x (also of -0.0 and NaNs) */
static ir_value *signbit_(lm *m, ir_value *x) {
    ir_value *s = bin(m, IR_SHR, bits(m, x), uk(m, m->f64 ? 63 : 31));
    return bin(m, IR_NE, s, uk(m, 0));
}
static ir_value *copysign_(lm *m, ir_value *mag, ir_value *sgn) {
    return ir_binop(m->b, IR_COPYSIGN, mag, sgn);
}

/* a b = result + *lo exactly (no overflow): fma where it is fused, else Dekker's product
 * with Veltkamp's split */
static ir_value *two_prod(lm *m, ir_value *a, ir_value *b, ir_value **lo) {
    ir_value *p = mul(m, a, b);
    if (m->fused) {
        *lo = fma3(m, a, b, un(m, IR_NEG, p));
        return p;
    }
    ir_value *split = k(m, m->f64 ? 134217729.0 : 4097.0); /* 2^27 + 1, 2^12 + 1 */
    ir_value *ca = mul(m, a, split), *cb = mul(m, b, split);
    ir_value *ah = sub(m, ca, sub(m, ca, a)), *bh = sub(m, cb, sub(m, cb, b));
    ir_value *al = sub(m, a, ah), *bl = sub(m, b, bh);
    ir_value *e = add(m, add(m, sub(m, mul(m, ah, bh), p), mul(m, ah, bl)), mul(m, al, bh));
    *lo = add(m, e, mul(m, al, bl));
    return p;
}

/* c[0] + x (c[1] + x (c[2] + ...)) */
static ir_value *poly(lm *m, ir_value *x, const double *c, int n) {
    ir_value *r = k(m, c[n - 1]);
    for (int i = n - 2; i >= 0; i--)
        r = fma3(m, r, x, k(m, c[i]));
    return r;
}

/* ---- exp and exp2 ------------------------------------------------------------------------ */

/* ln 2 in two parts, the first with trailing zeros (n ln2_hi is exact for |n| < 2^10 resp.
 * 2^20); 1 / ln 2 in two parts */
static double ln2_hi(const lm *m) {
    return m->f64 ? 6.93147180369123816490e-01 : 0.693138122558593750;
}
static double ln2_lo(const lm *m) {
    return m->f64 ? 1.90821492927058770002e-10 : 9.05800061445916e-06;
}

/* 2^n for an integer-valued n in [1 - bias, bias] (no float -> int cast: n + 1.5 2^mbits
 * holds n in its low bits) */
static ir_value *pow2i(lm *m, ir_value *n) {
    double magic = 1.5 * ldexp(1.0, m->mbits);
    ir_value *low = sub(m, bits(m, add(m, n, k(m, magic))), bits(m, k(m, magic)));
    ir_value *e = add(m, low, uk(m, (uint64_t)m->bias));
    return from_bits(m, bin(m, IR_SHL, e, uk(m, (uint64_t)m->mbits)));
}

static ir_value *clampf(lm *m, ir_value *x, double lo, double hi) {
    x = sel(m, lt(m, x, k(m, lo)), k(m, lo), x);
    return sel(m, gt(m, x, k(m, hi)), k(m, hi), x);
}

/* p 2^n for an integer-valued n: two factors, each a normal power of two */
static ir_value *scale(lm *m, ir_value *p, ir_value *n) {
    double lim = 4.0 * m->bias;
    n = clampf(m, n, -lim, lim);
    ir_value *n1 = un(m, IR_TRUNC, mul(m, n, k(m, 0.5)));
    ir_value *n2 = sub(m, n, n1);
    n1 = clampf(m, n1, 1.0 - m->bias, m->bias);
    n2 = clampf(m, n2, 1.0 - m->bias, m->bias);
    return mul(m, mul(m, p, pow2i(m, n1)), pow2i(m, n2));
}

/* e^r for |r| <= 0.35: the Taylor polynomial */
static ir_value *exp_poly(lm *m, ir_value *r) {
    double c[14];
    int n = m->f64 ? 14 : 9;
    c[0] = 1.0;
    for (int i = 1; i < n; i++)
        c[i] = c[i - 1] / i;
    return poly(m, r, c, n);
}

static ir_value *lm_exp(lm *m, ir_value *x, bool two) {
    ir_value *n, *r;
    if (two) {
        n = un(m, IR_FLOOR, add(m, x, k(m, 0.5)));
        ir_value *f = sub(m, x, n);
        r = fma3(m, f, k(m, ln2_hi(m)), mul(m, f, k(m, ln2_lo(m))));
    } else {
        n = un(m, IR_FLOOR, fma3(m, x, k(m, 1.0 / M_LN2), k(m, 0.5)));
        ir_value *nn = un(m, IR_NEG, n);
        r = fma3(m, nn, k(m, ln2_hi(m)), x);
        r = fma3(m, nn, k(m, ln2_lo(m)), r);
    }
    ir_value *y = scale(m, exp_poly(m, r), n);
    double hi, lo; /* beyond them: inf, 0 */
    if (m->f64)
        hi = two ? 1024.0 : 709.782712893384, lo = two ? -1075.0 : -745.1332191019412;
    else
        hi = two ? 128.0 : 88.72283935546875, lo = two ? -150.0 : -103.97208404541016;
    y = sel(m, gt(m, x, k(m, hi)), k(m, INFINITY), y);
    y = sel(m, lt(m, x, k(m, lo)), k(m, 0.0), y);
    return sel(m, isnan_(m, x), x, y);
}

/* e^x - 1: the Taylor series for |x| < 1/2, exp otherwise */
static ir_value *lm_expm1(lm *m, ir_value *x) {
    double c[18], f = 1.0;
    int n = m->f64 ? 18 : 10;
    for (int i = 0; i < n; i++) {
        f *= (i + 1);
        c[i] = 1.0 / f; /* x^(i+1) / (i+1)! */
    }
    ir_value *small = mul(m, x, poly(m, x, c, n));
    ir_value *big = sub(m, lm_exp(m, x, false), k(m, 1.0));
    return sel(m, lt(m, un(m, IR_ABS, x), k(m, 0.5)), small, big);
}

/* ---- log and log2 ------------------------------------------------------------------------ */

/* x = m 2^e, m in [sqrt(1/2), sqrt(2)), for finite x > 0 (subnormals too): *e as a float */
static ir_value *frexp_(lm *m, ir_value *x, ir_value **e) {
    double tiny = m->f64 ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
    int up = m->mbits + 2;
    ir_value *small = lt(m, x, k(m, tiny));
    ir_value *xs = sel(m, small, mul(m, x, k(m, ldexp(1.0, up))), x);
    ir_value *b = bits(m, xs);
    ir_value *eb =
        bin(m, IR_AND, bin(m, IR_SHR, b, uk(m, (uint64_t)m->mbits)), uk(m, m->f64 ? 0x7ff : 0xff));
    ir_value *ef = sub(m, ir_cast(m->b, m->t, eb), k(m, m->bias));
    uint64_t mant = m->f64 ? 0x000fffffffffffffull : 0x007fffffu;
    uint64_t one = m->f64 ? 0x3ff0000000000000ull : 0x3f800000u;
    ir_value *mv = from_bits(m, bin(m, IR_OR, bin(m, IR_AND, b, uk(m, mant)), uk(m, one)));
    ir_value *big = gt(m, mv, k(m, M_SQRT2));
    mv = sel(m, big, mul(m, mv, k(m, 0.5)), mv);
    ef = add(m, ef, sel(m, big, k(m, 1.0), k(m, 0.0)));
    *e = sub(m, ef, sel(m, small, k(m, up), k(m, 0.0)));
    return mv;
}

/* 2 atanh(s) / s - 2 = 2 z / 3 + 2 z^2 / 5 + ... for z = s^2 <= 0.0295 */
static ir_value *atanh_tail(lm *m, ir_value *z) {
    double c[12];
    int n = m->f64 ? 11 : 5;
    for (int i = 0; i < n; i++)
        c[i] = 2.0 / (2 * i + 3);
    return mul(m, z, poly(m, z, c, n));
}

/* the value of log x (or log2 x) for the special inputs, else y */
static ir_value *log_special(lm *m, ir_value *x, ir_value *y) {
    y = sel(m, eq(m, x, k(m, 0.0)), k(m, -INFINITY), y);
    y = sel(m, lt(m, x, k(m, 0.0)), k(m, NAN), y);
    y = sel(m, eq(m, x, k(m, INFINITY)), x, y);
    return sel(m, isnan_(m, x), x, y);
}

static ir_value *lm_log(lm *m, ir_value *x, bool two) {
    ir_value *e;
    ir_value *mv = frexp_(m, x, &e);
    ir_value *s = dv(m, sub(m, mv, k(m, 1.0)), add(m, mv, k(m, 1.0)));
    ir_value *lmv = fma3(m, s, atanh_tail(m, mul(m, s, s)), add(m, s, s)); /* log m */
    ir_value *y = two ? fma3(m, lmv, k(m, 1.0 / M_LN2), e)
                      : add(m, mul(m, e, k(m, ln2_hi(m))), fma3(m, e, k(m, ln2_lo(m)), lmv));
    return log_special(m, x, y);
}

/* ---- sin, cos, tan ----------------------------------------------------------------------- */

/* pi/2 in parts of 12 bits (the last rounded): q times a part is exact for |q| < 2^12 */
static const double pio2_12[6] = {1.5703125,
                                  0.0004837512969970703,
                                  7.549533620476723e-08,
                                  2.5632829192545614e-12,
                                  6.123031769111886e-17,
                                  2.0222662487959506e-21};

/* r = x - q pi/2, the reduced argument of sin, cos and tan for an integer-valued q. With a
 * fused fma, pi/2 in three parts (exact for |q| < 2^24 in f32: x - q p0 is then below 2 and
 * exact). Without one (SPIR-V: Vulkan's Fma may round twice), every product must be exact
 * by itself: f64 takes pi/2 in parts of 33 bits (exact for |q| < 2^20), f32 in parts of 12
 * bits times q split into two 12-bit halves (exact for |q| < 2^24). */
static ir_value *reduce_pio2(lm *m, ir_value *x, ir_value *q) {
    static const double p64[3] = {1.57079632673412561417e+00, 6.07710050630396597660e-11,
                                  2.02226624871116645580e-21};
    static const double p32[3] = {1.5707963705062866, -4.371138828673793e-08,
                                  -1.7151245100058819e-15};
    ir_value *r = x, *nq = un(m, IR_NEG, q);
    if (m->f64 && !m->fused) {
        for (int i = 0; i < 3; i++)
            r = sub(m, r, mul(m, q, k(m, p64[i])));
    } else if (m->fused) {
        for (int i = 0; i < 3; i++)
            r = fma3(m, nq, k(m, m->f64 ? p64[i] : p32[i]), r);
    } else {
        ir_value *ql = sub(m, q, mul(m, un(m, IR_TRUNC, mul(m, q, k(m, 0x1p-12))), k(m, 4096.0)));
        ir_value *qh = sub(m, q, ql);
        for (int i = 0; i < 5; i++) {
            r = sub(m, r, mul(m, qh, k(m, pio2_12[i])));
            r = sub(m, r, mul(m, ql, k(m, pio2_12[i])));
        }
        r = sub(m, r, mul(m, q, k(m, pio2_12[5])));
    }
    return r;
}

/* round(x 2/pi), the quadrant, right also where x 2/pi rounds across a half: the product
 * to about twice the type's precision (2/pi in two parts, the first product exact). The
 * first guess, floor(p + 1/2), can be off by more than one where p + 1/2 rounds (|p| >=
 * 2^22 in f32: -22848150 2/pi gave a guess two too high); the rest d = x 2/pi - guess is
 * small and exact enough to round by itself. */
static ir_value *quadrant(lm *m, ir_value *x) {
    double hi = m->f64 ? 0.6366197723675814 : 0.6366197466850281;
    double lo = m->f64 ? -3.935735335036497e-17 : 2.568255326690366e-08;
    ir_value *pl, *p = two_prod(m, x, k(m, hi), &pl);
    ir_value *q = un(m, IR_FLOOR, add(m, p, k(m, 0.5)));
    ir_value *d = add(m, sub(m, p, q), fma3(m, x, k(m, lo), pl)); /* x 2/pi - q */
    return add(m, q, un(m, IR_FLOOR, add(m, d, k(m, 0.5))));
}

/* q mod 4 of an integer-valued q, exact (q / 4 is a power-of-two scaling) */
static ir_value *mod4(lm *m, ir_value *q) {
    return sub(m, q, mul(m, un(m, IR_FLOOR, mul(m, q, k(m, 0.25))), k(m, 4.0)));
}

/* pi/2 - (the first three 12-bit parts), rounded to f32 */
static double pio2_tail(void) { return pio2_12[3] + pio2_12[4] + pio2_12[5]; }

/* r = x - q pi/2 with q = round(x 2/pi), |r| <= pi/4 (and a little), into *r, and into *q
 * a float equal to q mod 4 and below 2^12 in magnitude (q itself where it is that small).
 * f64: the rounded product decides q (within the exact range, |x| < 1.6e6, it is off only
 * where x 2/pi is within 1e-10 of a half); f32 with a fused fma: quadrant. f32 without
 * one: below |x| = 6000 (q < 4096) the rounded product, and pi/2 in three 12-bit parts
 * times q (exact products) and the rest as one rounded product (its error is below 2^-35
 * absolute), each taken off x by an fma (6 operations); above, quadrant and q in two halves (about 45), in the
 * else branch of an `if`, which a GPU skips where no lane of a warp needs it. */
static void reduce(lm *m, ir_value *x, ir_value **r, ir_value **q) {
    if (m->f64 || m->fused) {
        ir_value *qf =
            m->f64 ? un(m, IR_FLOOR, fma3(m, x, k(m, M_2_PI), k(m, 0.5))) : quadrant(m, x);
        *r = reduce_pio2(m, x, qf);
        /* f32's parts of pi/2 past the first are negative: -0 q times one is +0, and
         * fma(-0, -p, -0) = +0 would lose sin(-0)'s sign */
        if (!m->f64)
            *r = sel(m, eq(m, x, k(m, 0.0)), x, *r);
        *q = mod4(m, qf);
        return;
    }
    ir_value *small = lt(m, un(m, IR_ABS, x), k(m, 6000.0));
    const kern_type *ts[2] = {m->t, m->t};
    ir_op *iff = ir_if(m->b, small, ts, 2);
    ir_builder tb = ir_builder_at_end(m->b->m, iff->regions[0]);
    lm t = *m;
    t.b = &tb;
    ir_value *tq = un(&t, IR_FLOOR, fma3(&t, x, k(&t, M_2_PI), k(&t, 0.5)));
    /* each part of pi/2 times q comes off as one fma: the three 12-bit parts' products are
     * exact, so the fma rounds once whether the target fuses it or not (the result of a
     * multiply and a subtract), and the rest's product rounds at most once more; where
     * Fma is fused it is one instruction instead of two (NVIDIA's driver contracts none of
     * kern's NoContraction arithmetic: forward 8 to 14% faster, bench/README.md) */
    ir_value *tr = x;
    for (int i = 0; i < 3; i++)
        tr = fma3(&t, tq, k(&t, -pio2_12[i]), tr);
    tr = fma3(&t, tq, k(&t, -pio2_tail()), tr);
    ir_yield(&tb, (ir_value *[]){tr, tq}, 2);
    ir_builder eb = ir_builder_at_end(m->b->m, iff->regions[1]);
    lm e = *m;
    e.b = &eb;
    ir_value *eq_ = quadrant(&e, x);
    ir_yield(&eb, (ir_value *[]){reduce_pio2(&e, x, eq_), mod4(&e, eq_)}, 2);
    *r = iff->results[0];
    *q = iff->results[1];
}

/* The polynomials on |r| <= pi/4 (and a little), in z = r^2: sin r = r (1 + z S(z)) and
 * cos r = 1 + z C(z). f32: minimax (Remez, relative error of sin 3.8e-9, absolute error of
 * cos 1.2e-10, before rounding the coefficients), to r^7 and r^8; f64: the Taylor series
 * to r^17 and r^18. */
static const double sin_f32[4] = {1.0, -0.166666545731278, 0.008332158409302938,
                                  -0.00019514957593754178};
static const double cos_f32[5] = {1.0, -0.5, 0.041666645618808486, -0.0013887313063122937,
                                  2.4432785135583297e-05};

/* which: 0 sin, 1 cos, 2 tan. NaN and inf give NaN through the reduction (r is NaN), and
 * sin(-0) = tan(-0) = -0 through r times the polynomial. */
static ir_value *lm_trig(lm *m, ir_value *x, int which) {
    ir_value *q = NULL, *r = NULL;
    reductions *red = m->red;
    for (int i = 0; i < red->n; i++)
        if (red->at[i].x == x)
            r = red->at[i].r, q = red->at[i].q;
    if (!r) {
        reduce(m, x, &r, &q);
        red->at[red->next].x = x, red->at[red->next].r = r, red->at[red->next].q = q;
        red->next = (red->next + 1) % 8;
        red->n = red->n < 8 ? red->n + 1 : 8;
    }
    ir_value *z = mul(m, r, r);
    double cs[9], cc[10], f = 1.0;
    int ns = m->f64 ? 9 : 4, nc = m->f64 ? 10 : 5;
    for (int i = 0; i < ns; i++) { /* sin r / r = sum (-1)^i z^i / (2i+1)! */
        cs[i] = m->f64 ? (i % 2 ? -1.0 : 1.0) / f : sin_f32[i];
        f *= (2 * i + 2) * (2 * i + 3);
    }
    f = 1.0;
    for (int i = 0; i < nc; i++) { /* cos r = sum (-1)^i z^i / (2i)! */
        cc[i] = m->f64 ? (i % 2 ? -1.0 : 1.0) / f : cos_f32[i];
        f *= (2 * i + 1) * (2 * i + 2);
    }
    ir_value *sn = mul(m, r, poly(m, z, cs, ns)), *cn = poly(m, z, cc, nc);
    /* the low bits of q from its float: q + 1.5 2^mbits holds q mod 2^(mbits - 1) in the
     * low bits of its mantissa (|q| < 2^12 here); NaN gives any bits, and NaN results */
    ir_value *qb = bits(m, add(m, q, k(m, ldexp(1.5, m->mbits))));
    ir_value *odd = bin(m, IR_NE, land(m, qb, uk(m, 1)), uk(m, 0));
    ir_value *y;
    if (which == 0) /* sin: s, c, -s, -c */
        y = sel(m, bin(m, IR_NE, land(m, qb, uk(m, 2)), uk(m, 0)),
                un(m, IR_NEG, sel(m, odd, cn, sn)), sel(m, odd, cn, sn));
    else if (which == 1) /* cos: c, -s, -c, s */
        y = sel(m, bin(m, IR_NE, land(m, add(m, qb, uk(m, 1)), uk(m, 2)), uk(m, 0)),
                un(m, IR_NEG, sel(m, odd, sn, cn)), sel(m, odd, sn, cn));
    else /* tan: s/c, -c/s */
        y = sel(m, odd, un(m, IR_NEG, dv(m, cn, sn)), dv(m, sn, cn));
    return y;
}

/* ---- atan, atan2, asin, acos ------------------------------------------------------------- */

/* atan t for t >= 0 */
static ir_value *atan_pos(lm *m, ir_value *t) {
    ir_value *inv = gt(m, t, k(m, 1.0));
    ir_value *u = sel(m, inv, dv(m, k(m, 1.0), t), t);
    ir_value *step = gt(m, u, k(m, 0.26794919243112270)); /* tan(pi/12) */
    ir_value *s3 = k(m, 1.7320508075688772);
    ir_value *v = sel(m, step, dv(m, fma3(m, u, s3, k(m, -1.0)), add(m, u, s3)), u);
    double c[16];
    int n = m->f64 ? 16 : 7;
    for (int i = 0; i < n; i++)
        c[i] = (i % 2 ? -1.0 : 1.0) / (2 * i + 1);
    ir_value *at = mul(m, v, poly(m, mul(m, v, v), c, n));
    at = add(m, at, sel(m, step, k(m, M_PI / 6), k(m, 0.0)));
    at = sel(m, inv, sub(m, k(m, M_PI_2), at), at);
    return sel(m, eq(m, t, k(m, INFINITY)), k(m, M_PI_2), at);
}

static ir_value *lm_atan(lm *m, ir_value *x) {
    ir_value *r = copysign_(m, atan_pos(m, un(m, IR_ABS, x)), x);
    return sel(m, isnan_(m, x), x, r);
}

static ir_value *lm_atan2(lm *m, ir_value *y, ir_value *x) {
    ir_value *ay = un(m, IR_ABS, y), *ax = un(m, IR_ABS, x);
    ir_value *t = atan_pos(m, dv(m, ay, ax)); /* in [0, pi/2] */
    t = sel(m, land(m, isinf_(m, y), isinf_(m, x)), k(m, M_PI_4), t);
    t = sel(m, eq(m, ay, k(m, 0.0)), k(m, 0.0), t); /* 0/0 too */
    t = sel(m, signbit_(m, x), sub(m, k(m, M_PI), t), t);
    return sel(m, lor(m, isnan_(m, y), isnan_(m, x)), k(m, NAN), copysign_(m, t, y));
}

/* asin x = atan2(x, sqrt((1 - x)(1 + x))), acos x = atan2(sqrt(...), x) */
static ir_value *lm_asincos(lm *m, ir_value *x, bool cosine) {
    ir_value *s = un(m, IR_SQRT, mul(m, sub(m, k(m, 1.0), x), add(m, k(m, 1.0), x)));
    ir_value *r = cosine ? lm_atan2(m, s, x) : lm_atan2(m, x, s);
    return sel(m, gt(m, un(m, IR_ABS, x), k(m, 1.0)), k(m, NAN), r);
}

/* ---- sinh, cosh, tanh -------------------------------------------------------------------- */

/* which: 0 sinh, 1 cosh, 2 tanh */
static ir_value *lm_hyp(lm *m, ir_value *x, int which) {
    ir_value *a = un(m, IR_ABS, x);
    if (which == 2) {
        ir_value *e = lm_expm1(m, mul(m, a, k(m, 2.0)));
        ir_value *t = dv(m, e, add(m, e, k(m, 2.0)));
        t = sel(m, gt(m, a, k(m, m->f64 ? 22.0 : 9.0)), k(m, 1.0), t);
        return sel(m, isnan_(m, x), x, copysign_(m, t, x));
    }
    /* e^a / 2 = (e^(a/2) / 2) e^(a/2): no early overflow */
    ir_value *eh = lm_exp(m, mul(m, a, k(m, 0.5)), false);
    ir_value *half = mul(m, mul(m, eh, k(m, 0.5)), eh);
    ir_value *large = gt(m, a, k(m, m->f64 ? 20.0 : 10.0));
    if (which == 1) {
        ir_value *ea = lm_exp(m, a, false);
        return sel(m, large, half, fma3(m, ea, k(m, 0.5), dv(m, k(m, 0.5), ea)));
    }
    ir_value *em = lm_expm1(m, a); /* sinh a = (em + em / (em + 1)) / 2 */
    ir_value *sh = mul(m, add(m, em, dv(m, em, add(m, em, k(m, 1.0)))), k(m, 0.5));
    sh = sel(m, large, half, sh);
    return sel(m, isnan_(m, x), x, copysign_(m, sh, x));
}

/* ---- pow --------------------------------------------------------------------------------- */

/* log2 x = *lo + result for finite x > 0, the pair about u^2 relative */
static ir_value *log2_2(lm *m, ir_value *x, ir_value **lo) {
    ir_value *e;
    ir_value *mv = frexp_(m, x, &e);
    ir_value *f = sub(m, mv, k(m, 1.0)); /* exact */
    ir_value *d = add(m, f, k(m, 2.0));
    ir_value *dl = add(m, sub(m, k(m, 2.0), d), f); /* d + dl = f + 2 exactly */
    ir_value *s = dv(m, f, d);
    /* s + sl = f / (d + dl): the residual f - s d is exact */
    ir_value *sdl, *sdh = two_prod(m, s, d, &sdl);
    ir_value *sl = dv(m, sub(m, sub(m, sub(m, f, sdh), sdl), mul(m, s, dl)), d);
    ir_value *ahi = add(m, s, s); /* log m = ahi + alo */
    ir_value *alo = fma3(m, s, atanh_tail(m, mul(m, s, s)), add(m, sl, sl));
    double ilh = m->f64 ? 1.4426950408889634 : 1.4426950216293335;
    double ill = m->f64 ? 2.0355273740931033e-17 : 1.9259629911266175e-08;
    ir_value *pl, *lh = two_prod(m, ahi, k(m, ilh), &pl); /* log2 m = lh + ll */
    ir_value *ll = add(m, pl, fma3(m, ahi, k(m, ill), mul(m, alo, k(m, ilh))));
    ir_value *hi = add(m, e, lh); /* |e| >= 1 > |lh| or e = 0: the error is exact */
    *lo = add(m, add(m, sub(m, e, hi), lh), ll);
    return hi;
}

static ir_value *lm_pow(lm *m, ir_value *b, ir_value *e) {
    ir_value *ab = un(m, IR_ABS, b);
    ir_value *lo, *hi = log2_2(m, ab, &lo);
    ir_value *tp, *th = two_prod(m, e, hi, &tp); /* e log2|b| = th + tl */
    ir_value *tl = fma3(m, e, lo, tp);
    ir_value *n = un(m, IR_FLOOR, add(m, th, k(m, 0.5)));
    ir_value *f = add(m, sub(m, th, n), tl); /* |f| <= 1/2 + */
    ir_value *r = fma3(m, f, k(m, ln2_hi(m)), mul(m, f, k(m, ln2_lo(m))));
    ir_value *y = scale(m, exp_poly(m, r), n);
    double big = m->f64 ? 1100.0 : 160.0;
    y = sel(m, gt(m, th, k(m, big)), k(m, INFINITY), y);
    y = sel(m, lt(m, th, k(m, -big)), k(m, 0.0), y);
    /* the sign, and C's special cases */
    ir_value *eint = eq(m, un(m, IR_FLOOR, e), e);
    ir_value *half = mul(m, e, k(m, 0.5));
    ir_value *eodd = land(m, eint, bin(m, IR_NE, un(m, IR_FLOOR, half), half));
    eodd = land(m, eodd, lt(m, un(m, IR_ABS, e), k(m, ldexp(1.0, m->mbits + 1))));
    ir_value *bneg = signbit_(m, b);
    y = sel(m, land(m, bneg, eodd), un(m, IR_NEG, y), y);
    /* a negative finite base and a non-integer exponent: NaN */
    ir_value *negfin = land(m, lt(m, b, k(m, 0.0)), lnot(m, isinf_(m, b)));
    y = sel(m, land(m, negfin, lnot(m, eint)), k(m, NAN), y);
    /* a zero base: e < 0 gives inf, e > 0 zero (signed for odd e); an infinite base: the
     * same with the roles swapped */
    ir_value *zr = sel(m, lt(m, e, k(m, 0.0)), k(m, INFINITY), k(m, 0.0));
    y = sel(m, eq(m, b, k(m, 0.0)), sel(m, land(m, bneg, eodd), un(m, IR_NEG, zr), zr), y);
    ir_value *ir = sel(m, lt(m, e, k(m, 0.0)), k(m, 0.0), k(m, INFINITY));
    y = sel(m, isinf_(m, b), sel(m, land(m, bneg, eodd), un(m, IR_NEG, ir), ir), y);
    /* NaN in, NaN out, but pow(x, 0) = 1 and pow(1, y) = 1 */
    y = sel(m, lor(m, isnan_(m, b), isnan_(m, e)), k(m, NAN), y);
    /* (-1)^(+-inf) = 1; |b| < 1 with -inf and |b| > 1 with inf: inf; the others: 0 */
    ir_value *gt1 = gt(m, ab, k(m, 1.0)), *epos = gt(m, e, k(m, 0.0));
    ir_value *ie = sel(m, eq(m, gt1, epos), k(m, INFINITY), k(m, 0.0));
    ie = sel(m, eq(m, ab, k(m, 1.0)), k(m, 1.0), ie);
    y = sel(m, land(m, isinf_(m, e), lnot(m, isnan_(m, b))), ie, y);
    ir_value *one = lor(m, eq(m, e, k(m, 0.0)), eq(m, b, k(m, 1.0)));
    return sel(m, one, k(m, 1.0), y);
}

/* ---- the pass ---------------------------------------------------------------------------- */

bool ir_libm_lowers(const ir_op *op, unsigned which) {
    if (!op->noperands || !op->nresults)
        return false;
    kern_tykind t = op->operands[0]->type->kind;
    if (t == TY_F32 ? !(which & IR_LIBM_F32) : t == TY_F64 ? !(which & IR_LIBM_F64) : true)
        return false;
    if (!(ir_info(op->code)->flags & OPF_LIBM))
        return false;
    bool explog =
        op->code == IR_EXP || op->code == IR_EXP2 || op->code == IR_LOG || op->code == IR_LOG2;
    return !explog || t == TY_F64 || !(which & IR_LIBM_KEEP_F32_EXPLOG);
}

static ir_value *lower_op(ir_builder *b, ir_op *op, unsigned which, reductions *red) {
    ir_value *x = op->operands[0];
    bool f64 = x->type->kind == TY_F64;
    lm M = {.b = b,
            .t = x->type,
            .ut = f64 ? ty_u64() : ty_u32(),
            .f64 = f64,
            .fused = !(which & IR_LIBM_NO_FMA),
            .mbits = f64 ? 52 : 23,
            .bias = f64 ? 1023 : 127,
            .red = red};
    lm *m = &M;
    switch (op->code) {
    case IR_EXP: return lm_exp(m, x, false);
    case IR_EXP2: return lm_exp(m, x, true);
    case IR_LOG: return lm_log(m, x, false);
    case IR_LOG2: return lm_log(m, x, true);
    case IR_SIN: return lm_trig(m, x, 0);
    case IR_COS: return lm_trig(m, x, 1);
    case IR_TAN: return lm_trig(m, x, 2);
    case IR_ASIN: return lm_asincos(m, x, false);
    case IR_ACOS: return lm_asincos(m, x, true);
    case IR_ATAN: return lm_atan(m, x);
    case IR_ATAN2: return lm_atan2(m, x, op->operands[1]);
    case IR_SINH: return lm_hyp(m, x, 0);
    case IR_COSH: return lm_hyp(m, x, 1);
    case IR_TANH: return lm_hyp(m, x, 2);
    case IR_POW: return lm_pow(m, x, op->operands[1]);
    default: kern_unreachable("ir_lower_libm: not a library function");
    }
}

static bool lower_region(ir_module *m, ir_subst *s, ir_region *r, unsigned which) {
    bool any = false;
    reductions red = {.region = r};
    for (ir_op *op = r->first, *next; op; op = next) {
        next = op->next;
        ir_subst_op(s, op);
        for (uint32_t i = 0; i < op->nregions; i++)
            any |= lower_region(m, s, op->regions[i], which);
        if (!ir_libm_lowers(op, which))
            continue;
        ir_builder b = ir_builder_before(m, op);
        ir_subst_add(s, op->results[0], lower_op(&b, op, which, &red));
        ir_remove(op);
        any = true;
    }
    return any;
}

bool ir_lower_libm(ir_module *m, unsigned which) {
    kern_assert(m->lowered);
    bool any = false;
    ir_subst s = {0};
    for (ir_kernel *k = m->kernels; k; k = k->next) {
        ir_subst_begin(&s, k);
        any |= lower_region(m, &s, k->body, which);
    }
    ir_subst_free(&s);
    return any;
}

static bool needed_in(const ir_region *r, unsigned which) {
    ir_foreach_op(op, r) {
        if (ir_libm_lowers(op, which))
            return true;
        for (uint32_t i = 0; i < op->nregions; i++)
            if (needed_in(op->regions[i], which))
                return true;
    }
    return false;
}

bool ir_libm_needed(const ir_module *m, unsigned which) {
    ir_foreach_kernel(k, m) if (needed_in(k->body, which)) return true;
    return false;
}

ir_module *ir_libm_copy(const ir_module *m, unsigned which) {
    if (!ir_libm_needed(m, which))
        return NULL;
    ir_module *c = ir_module_copy(m);
    ir_lower_libm(c, which);
    ir_pass_after(c, "ir_lower_libm", true);
    bool progress = false; /* constants of the expansions, sin and cos of one argument */
    IR_PASS(progress, c, ir_opt_fold);
    IR_PASS(progress, c, ir_opt_cse);
    IR_PASS(progress, c, ir_opt_dce);
    (void)progress;
    return c;
}
