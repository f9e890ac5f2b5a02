/* workload.h - what the programs of bench/gpu-bench share (C11 and CUDA C++): the inputs,
 * the check subset, the double-precision reference and the error measure. jax_bench.py
 * builds the same inputs with numpy (its make_inputs); README.md states them.
 *
 * Workloads: work item i runs T_i steps of x = 0.5 sin(x) w[t] + 0.4 x + 0.1 from x0[i]
 * (t = 0 .. T_i - 1), out[i] = x; L = sum_i out[i] g[i]; the gradients are dL/dx0 and dL/dw.
 *   loop:   T_i = T (= len(w)) for every item;
 *   ragged: T_i = count[i] = T/2 + (i * 7919) mod (T - T/2 + 1), so T/2 .. T
 *           (512 .. 1024 for T = 1024);
 *   divergent: T_i = count[i] = floor(f(i, 4) (T + 1)), uniform in 0 .. T (f below: a
 *           fixed-seed hash of i, so neighbouring items differ by hundreds of steps).
 * Workload "kepler" (the `while` workload: a data-dependent exit): item i solves Kepler's
 * equation x = m + e sin(x) by fixed-point iteration from x = m, m = x0[i],
 * e = 0.6 w[i mod T] in [0.3, 0.9): x_{k+1} = m + e sin(x_k), d = x_{k+1} - x_k, while
 * k < T (the hard cap) and |d| > GB_KEPLER_TOL (the test before each iteration, d = 1 before
 * the first). It converges at the rate e |cos x|: from 1 iteration to about 150 per item.
 * out[i] = x; the gradients are dL/dx0 (= dL/dm) and dL/dw[t] = sum over i = t mod T of
 * 0.6 dL/de_i, through the iterations that ran (the exit test carries no gradient).
 * Inputs, with u(i, s) = ((i * 2654435761 + s * 40503) mod 2^32) >> 9, a 23-bit integer, and
 * f(i, s) = u(i, s) / 2^23 in [0, 1) (every value below is exact in f32):
 *   x0[i] = -2 + 4 f(i, 1)   in [-2, 2)
 *   w[t]  = 0.5 + f(t, 2)    in [0.5, 1.5)
 *   g[i]  = 0.5 + f(i, 3)    in [0.5, 1.5)   (positive: w's gradient does not cancel)
 *
 * The check: the gradient is taken once more with g kept only on a subset of the items
 * (every stride-th item, stride = max(1, n / check)) and zero elsewhere; then out and
 * x0.grad of those items and all of w.grad are fixed by those items alone and are compared
 * with gb_reference, in double precision. */
#ifndef KERN_GPU_BENCH_WORKLOAD_H
#define KERN_GPU_BENCH_WORKLOAD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline double gb_frac(int64_t i, uint32_t seed) {
    uint32_t h = (uint32_t)((uint64_t)i * 2654435761u + (uint64_t)seed * 40503u);
    return (double)(h >> 9) / 8388608.0;
}
static inline float gb_x0(int64_t i) { return (float)(-2.0 + 4.0 * gb_frac(i, 1)); }
static inline float gb_w(int64_t t) { return (float)(0.5 + gb_frac(t, 2)); }
static inline float gb_g(int64_t i) { return (float)(0.5 + gb_frac(i, 3)); }
static inline int32_t gb_count(int64_t i, int64_t steps) {
    int64_t lo = steps / 2;
    return (int32_t)(lo + (i * 7919) % (steps - lo + 1));
}

/* divergent's counts: uniform in 0 .. steps */
static inline int32_t gb_count_uniform(int64_t i, int64_t steps) {
    int64_t c = (int64_t)(gb_frac(i, 4) * (double)(steps + 1));
    return (int32_t)(c > steps ? steps : c);
}

/* The parts of the benchmark: --only takes a comma-separated list of their names (huge and
 * the budget rows of ckpt are kern's alone) */
enum {
    PART_LOOP = 1,
    PART_RAGGED = 2,
    PART_CKPT = 4,
    PART_HUGE = 8,
    PART_DIVERGENT = 16,
    PART_KEPLER = 32,
    PART_ALL = 63
};

/* --only's list: the PART_* bits of comma-separated names; 0 for a bad list */
static inline unsigned gb_parse_parts(const char *v) {
    static const char *const names[] = {"loop", "ragged", "ckpt", "huge", "divergent", "kepler"};
    unsigned parts = 0;
    while (v && *v) {
        size_t len = strcspn(v, ",");
        unsigned bit = 0;
        for (unsigned p = 0; p < sizeof names / sizeof *names; p++)
            if (strlen(names[p]) == len && !strncmp(v, names[p], len))
                bit = 1u << p;
        if (!bit)
            return 0;
        parts |= bit;
        v += len + (v[len] == ',');
    }
    return parts;
}

/* The check subset: items 0, stride, 2 stride, ... below n. */
static inline int64_t gb_stride(int64_t n, int64_t check) {
    return check > 0 && n > check ? n / check : 1;
}

/* One item in double precision: returns out, sets *x0grad, adds its share of dL/dw into
 * wgrad[0 .. steps-1]; xs has room for steps values. */
static inline double gb_reference(double x0, const float *w, int64_t steps, double g,
                                  double *x0grad, double *wgrad, double *xs) {
    double x = x0;
    for (int64_t t = 0; t < steps; t++) {
        xs[t] = x;
        x = 0.5 * sin(x) * (double)w[t] + 0.4 * x + 0.1;
    }
    double a = g;
    for (int64_t t = steps - 1; t >= 0; t--) {
        wgrad[t] += a * 0.5 * sin(xs[t]);
        a *= 0.5 * cos(xs[t]) * (double)w[t] + 0.4;
    }
    *x0grad = a;
    return x;
}

#define GB_KEPLER_TOL 1e-6

/* kepler's e of item i: 0.6 w[i mod steps], rounded to f32 as every program computes it */
static inline float gb_kepler_e(int64_t i, const float *w, int64_t steps) {
    return 0.6f * w[i % steps];
}

/* One item of kepler in double precision: returns out, sets *x0grad and *egrad (dL/de of
 * the item) and *iters (the iterations it ran); xs has room for steps values. */
static inline double gb_kepler_reference(double m, double e, int64_t steps, double g,
                                         double *x0grad, double *egrad, int64_t *iters,
                                         double *xs) {
    double x = m, d = 1.0;
    int64_t k = 0;
    while (k < steps && fabs(d) > GB_KEPLER_TOL) {
        xs[k] = x;
        double xn = m + e * sin(x);
        d = xn - x;
        x = xn;
        k++;
    }
    double a = g, am = 0, ae = 0;
    for (int64_t j = k - 1; j >= 0; j--) {
        am += a;
        ae += a * sin(xs[j]);
        a *= e * cos(xs[j]);
    }
    *x0grad = am + a;
    *egrad = ae;
    *iters = k;
    return x;
}

/* The workloads, for the code they share */
enum { GB_LOOP, GB_RAGGED, GB_DIVERGENT, GB_KEPLER };

/* The steps item i runs in the workloads with a step count (loop, ragged, divergent) */
static inline int64_t gb_trips(int kind, int64_t i, int64_t steps) {
    return kind == GB_RAGGED      ? gb_count(i, steps)
           : kind == GB_DIVERGENT ? gb_count_uniform(i, steps)
                                  : steps;
}

/* Item i of a workload in double precision (w: the steps weights, g: the item's seed):
 * returns out, sets *x0grad, adds its share of dL/dw into wgrad; xs has room for steps. */
static inline double gb_item_reference(int kind, int64_t i, const float *w, int64_t steps, double g,
                                       double *x0grad, double *wgrad, double *xs) {
    if (kind != GB_KEPLER)
        return gb_reference(gb_x0(i), w, gb_trips(kind, i, steps), g, x0grad, wgrad, xs);
    double eg;
    int64_t iters;
    double out =
        gb_kepler_reference(gb_x0(i), gb_kepler_e(i, w, steps), steps, g, x0grad, &eg, &iters, xs);
    wgrad[i % steps] += 0.6 * eg;
    return out;
}

/* The error measure of every comparison: max_k |got[k] - ref[k]| / max_k |ref[k]|, over the
 * elements k = 0, stride, 2 stride, ... below n. The denominator is at least 1e-30: after
 * 1024 steps dL/dx0 is about 0.78^1024 ~ 1e-110 in double, 0 in float, and that is no error. */
static inline double gb_maxrel_f32(const float *got, const double *ref, int64_t n, int64_t stride) {
    double scale = 1e-30, worst = 0;
    for (int64_t k = 0; k < n; k += stride)
        scale = fabs(ref[k]) > scale ? fabs(ref[k]) : scale;
    for (int64_t k = 0; k < n; k += stride) {
        double d = fabs((double)got[k] - ref[k]);
        if (!(d <= worst)) /* NaN wins */
            worst = d;
    }
    return worst / scale;
}

/* The same with a float reference (another program's results). */
static inline double gb_maxrel_ff(const float *got, const float *ref, int64_t n) {
    double scale = 1e-30, worst = 0;
    for (int64_t k = 0; k < n; k++)
        scale = fabs((double)ref[k]) > scale ? fabs((double)ref[k]) : scale;
    for (int64_t k = 0; k < n; k++) {
        double d = fabs((double)got[k] - (double)ref[k]);
        if (!(d <= worst))
            worst = d;
    }
    return worst / scale;
}

/* Tolerances: against the double-precision reference; between two float programs on the
 * full size (sums of 2^20 float terms in different orders). */
#define GB_CHECK_TOL 1e-4
#define GB_AGREE_TOL 1e-3
/* The forward with the targets' fast sin (CUDA's __sinf: about 2^-21.4 absolute error on
 * [-pi, pi]) against the double-precision reference */
#define GB_FAST_TOL 1e-3

#endif
