/* half.c - f16 and bf16 conversions (see half.h).
 *
 * Rounding: with E the exponent of |x| (clamped below at the format's smallest normal
 * exponent), x / 2^(E - mantissa bits) is scaled exactly and nearbyint rounds it to an
 * integer, ties to even (the default rounding mode); the result times the same power of
 * two is the rounded value. Past the largest finite value it becomes an infinity. */
#include "half.h"

#include <math.h>
#include <string.h>

static double round_fmt(double x, int mant, int emin, int emax) {
    if (isnan(x) || isinf(x) || x == 0.0)
        return x;
    int e;
    frexp(fabs(x), &e);
    int E = e - 1 < emin ? emin : e - 1;
    double ulp = ldexp(1.0, E - mant);
    double r = nearbyint(x / ulp) * ulp;
    if (fabs(r) >= ldexp(1.0, emax + 1))
        r = copysign(INFINITY, x);
    return r;
}

double kern_round_f16(double x) { return round_fmt(x, 10, -14, 15); }
double kern_round_bf16(double x) { return round_fmt(x, 7, -126, 127); }

uint16_t kern_f16_bits(double x) {
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    if (isnan(x))
        return sign | 0x7e00;
    double r = fabs(kern_round_f16(x));
    if (isinf(r))
        return sign | 0x7c00;
    if (r == 0.0)
        return sign;
    int e;
    frexp(r, &e);
    if (e - 1 < -14) /* subnormal: a multiple of 2^-24 */
        return sign | (uint16_t)ldexp(r, 24);
    return sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)(ldexp(r, 10 - (e - 1)) - 1024.0);
}

uint16_t kern_bf16_bits(double x) {
    float f = (float)kern_round_bf16(x); /* exact: a bf16 value is an f32 value */
    uint32_t u;
    memcpy(&u, &f, 4);
    if (isnan(x))
        return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)(u >> 16);
}

float kern_f16_value(uint16_t bits) {
    int e = (bits >> 10) & 0x1f, m = bits & 0x3ff;
    float v;
    if (e == 0)
        v = ldexpf((float)m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexpf((float)(m | 0x400), e - 25);
    return bits & 0x8000 ? -v : v;
}

float kern_bf16_value(uint16_t bits) {
    uint32_t u = (uint32_t)bits << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
