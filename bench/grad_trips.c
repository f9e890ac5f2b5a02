/* grad_trips.c - grad-bench's "trips" part: a loop whose trip count differs per item, under
 * three distributions of the counts, K + K.grad with kern's SIMD across work items against
 * kern without SIMD and against C that puts items in vector lanes by hand (trips_ref.c), in
 * one run (bench/README.md, "grad-bench: trip-count distributions").
 *
 * The workload is the GPU benchmark's "divergent" (bench/gpu-bench/divergent.kern,
 * workload.h's inputs): item i runs count[i] steps of x = 0.5 sin(x) w[t] + 0.4 x + 0.1;
 * the gradient of L = sum_i out[i] g[i] with respect to x0 and w. Distributions of count[i]
 * over T steps, after a first row with the GPU benchmark's loop.kern (every item T steps,
 * the bound len(w): no count array):
 *   equal:   T for every item;
 *   uniform: uniform in 0 .. T (workload.h's gb_count_uniform);
 *   skewed:  T for one item in 16 (a fixed-seed hash of i), T / 16 for the others.
 * Sides, each timed as K alone and as K + K.grad (the adjoints re-seeded outside the
 * window; K.grad runs its own forward sweep, so K + K.grad is what a training step costs):
 *   kern SIMD:   the JIT's default (SIMD across work items where the CPU has vectors);
 *   kern scalar: the module compiled with KERN_SIMD=off;
 *   hand C:      trips_ref_forward and trips_ref_grad (which computes out too).
 * Before timing, every side's out, dL/dx0 and dL/dw are compared with workload.h's
 * double-precision reference: max |got - ref| / max |ref| per array at most GB_CHECK_TOL. */
#include "grad_trips.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/kern.h"
#include "bench_util.h"
#include "gpu-bench/workload.h"
#include "trips_ref.h"

enum { DIST_LOOP, DIST_EQUAL, DIST_UNIFORM, DIST_SKEWED, NDIST };
static const char *const dist_names[NDIST] = {"T, loop.kern (bound len(w))", "equal (T)",
                                              "uniform 0..T", "skewed (1/16 T, else T/16)"};

static int32_t dist_count(int dist, int64_t i, int64_t steps) {
    switch (dist) {
    case DIST_UNIFORM: return gb_count_uniform(i, steps);
    case DIST_SKEWED: return gb_frac(i, 5) < 1.0 / 16 ? (int32_t)steps : (int32_t)(steps / 16);
    default: return (int32_t)steps;
    }
}

/* the inputs, the seed and the zeros that re-seed the adjoints */
typedef struct inputs {
    int64_t n, steps;
    float *x0, *w, *g, *zeros;
    int32_t *count;
} inputs;

/* one kern side: a context, its kernels and buffers */
typedef struct kside {
    const inputs *in;
    kern_context *ctx;
    bool counted; /* divergent.kern (count[] bounds the loop), else loop.kern (len(w)) */
    kern_kernel *k, *kg;
    kern_buffer *x0, *w, *count, *out, *x0g, *wg, *outg;
} kside;

static void kdie(kside *s, kern_status st, const char *what) {
    if (st == KERN_OK)
        return;
    fprintf(stderr, "grad-bench: trips: %s: %s: %s\n", what, kern_status_name(st),
            s->ctx ? kern_context_last_error(s->ctx) : "no context");
    exit(1);
}

/* simd false: the module is compiled with KERN_SIMD=off */
static void kside_open(kside *s, const trips_opts *o, const inputs *in, bool simd, bool counted) {
    memset(s, 0, sizeof *s);
    s->in = in;
    s->counted = counted;
    const char *name = counted ? "divergent" : "loop";
    char path[4096], gname[64];
    snprintf(path, sizeof path, "%s/%s.kern", o->dir, name);
    snprintf(gname, sizeof gname, "%s.grad", name);
    kern_context_options ko = kern_context_options_default();
    ko.threads = o->threads;
    kdie(s, kern_context_create(&ko, &s->ctx), "context");
    size_t len;
    char *src = bench_read_text(path, &len);
    if (!src) {
        fprintf(stderr, "grad-bench: trips: cannot read %s\n", path);
        exit(1);
    }
    char *prev = getenv("KERN_SIMD") ? strdup(getenv("KERN_SIMD")) : NULL;
    if (!simd)
        setenv("KERN_SIMD", "off", 1);
    kern_module *mod;
    kdie(s, kern_module_from_source(s->ctx, src, len, path, &mod), path);
    kdie(s, kern_kernel_find(mod, name, &s->k), name);
    kdie(s, kern_kernel_find(mod, gname, &s->kg), gname); /* built now */
    if (prev)
        setenv("KERN_SIMD", prev, 1);
    else
        unsetenv("KERN_SIMD");
    free(prev), free(src);
    int64_t n = in->n, steps = in->steps;
    kdie(s, kern_buffer_create(s->ctx, KERN_F32, 1, &n, in->x0, &s->x0), "buffer");
    kdie(s, kern_buffer_create(s->ctx, KERN_F32, 1, &steps, in->w, &s->w), "buffer");
    kdie(s, kern_buffer_create(s->ctx, KERN_I32, 1, &n, in->count, &s->count), "buffer");
    kdie(s, kern_buffer_create(s->ctx, KERN_F32, 1, &n, NULL, &s->out), "buffer");
    kdie(s, kern_buffer_create(s->ctx, KERN_F32, 1, &n, NULL, &s->x0g), "buffer");
    kdie(s, kern_buffer_create(s->ctx, KERN_F32, 1, &steps, NULL, &s->wg), "buffer");
    kdie(s, kern_buffer_create(s->ctx, KERN_F32, 1, &n, NULL, &s->outg), "buffer");
}

/* the arguments of K; with adjoints, of K.grad */
static int kside_args(const kside *s, bool adjoints, kern_arg *a) {
    int na = 0;
    a[na++] = kern_arg_buffer(s->x0);
    a[na++] = kern_arg_buffer(s->w);
    if (s->counted)
        a[na++] = kern_arg_buffer(s->count);
    a[na++] = kern_arg_buffer(s->out);
    if (adjoints) {
        a[na++] = kern_arg_buffer(s->x0g);
        a[na++] = kern_arg_buffer(s->wg);
        a[na++] = kern_arg_buffer(s->outg);
    }
    return na;
}

static void kside_fwd(kside *s) {
    kern_arg a[8];
    kdie(s, kern_launch(s->k, a, kside_args(s, false, a)), "K");
}

static void kside_seed(kside *s) {
    kdie(s, kern_buffer_write(s->outg, s->in->g, (size_t)s->in->n * 4), "write out.grad");
    kdie(s, kern_buffer_write(s->x0g, s->in->zeros, (size_t)s->in->n * 4), "write x0.grad");
    kdie(s, kern_buffer_write(s->wg, s->in->zeros, (size_t)s->in->steps * 4), "write w.grad");
    kdie(s, kern_sync(s->ctx), "sync");
}

static void kside_grad(kside *s) {
    kern_arg a[8];
    kdie(s, kern_launch(s->kg, a, kside_args(s, true, a)), "K.grad");
}

static double kern_k(void *u) {
    kside *s = u;
    double t0 = bench_now_ms();
    kside_fwd(s);
    kdie(s, kern_sync(s->ctx), "sync");
    return bench_now_ms() - t0;
}

static double kern_kgrad(void *u) {
    kside *s = u;
    kside_seed(s);
    double t0 = bench_now_ms();
    kside_fwd(s);
    kside_grad(s);
    kdie(s, kern_sync(s->ctx), "sync");
    return bench_now_ms() - t0;
}

/* the hand side's outputs */
typedef struct hside {
    const inputs *in;
    float *out, *x0g, *wg;
} hside;

static double hand_k(void *u) {
    hside *h = u;
    const inputs *in = h->in;
    double t0 = bench_now_ms();
    trips_ref_forward(in->n, in->steps, in->x0, in->w, in->count, h->out);
    return bench_now_ms() - t0;
}

static double hand_kgrad(void *u) {
    hside *h = u;
    const inputs *in = h->in;
    double t0 = bench_now_ms();
    trips_ref_grad(in->n, in->steps, in->x0, in->w, in->count, in->g, h->out, h->x0g, h->wg);
    return bench_now_ms() - t0;
}

/* out, x0.grad, w.grad against the reference; prints the error, returns whether it passed */
static bool check3(const char *who, const char *dist, const float *out, const float *x0g,
                   const float *wg, const double *r, int64_t n, int64_t steps, double *worst) {
    double e[3] = {gb_maxrel_f32(out, r, n, 1), gb_maxrel_f32(x0g, r + n, n, 1),
                   gb_maxrel_f32(wg, r + 2 * n, steps, 1)};
    double m = e[0] > e[1] ? e[0] : e[1];
    m = m > e[2] ? m : e[2];
    if (e[0] != e[0] || e[1] != e[1] || e[2] != e[2])
        m = NAN;
    if (!(m <= GB_CHECK_TOL))
        fprintf(stderr,
                "grad-bench: CHECK FAILED: trips %s, %s: out %.3g, x0.grad %.3g, w.grad %.3g "
                "(tolerance %g)\n",
                dist, who, e[0], e[1], e[2], GB_CHECK_TOL);
    if (m > *worst || m != m)
        *worst = m;
    return m <= GB_CHECK_TOL;
}

static bool kside_check(kside *s, const char *who, const char *dist, const double *r,
                        double *worst) {
    const inputs *in = s->in;
    float *res = calloc((size_t)(2 * in->n + in->steps), 4);
    if (!res)
        exit(1);
    kside_seed(s);
    kside_fwd(s);
    kside_grad(s);
    kdie(s, kern_sync(s->ctx), "sync");
    kdie(s, kern_buffer_read(s->out, res, (size_t)in->n * 4), "read out");
    kdie(s, kern_buffer_read(s->x0g, res + in->n, (size_t)in->n * 4), "read x0.grad");
    kdie(s, kern_buffer_read(s->wg, res + 2 * in->n, (size_t)in->steps * 4), "read w.grad");
    bool ok = check3(who, dist, res, res + in->n, res + 2 * in->n, r, in->n, in->steps, worst);
    free(res);
    return ok;
}

bool grad_trips_run(const trips_opts *o) {
    int64_t n = 65536 / o->shrink, steps = 256;
    bool hand = trips_ref_supported(), ok = true;
    trips_ref_set_threads(o->threads);
    printf("\ntrips: K + K.grad of bench/gpu-bench/divergent.kern, %lld items, count[i] <= T = "
           "%lld steps, %d threads\n",
           (long long)n, (long long)steps, o->threads);
    printf("hand C:     %s (libmvec _ZGVdN8v_sinf/cosf, 16 vectors of 8 items per block)%s\n",
           trips_ref_compiler(), hand ? "" : ": NOT RUN (no AVX2 here)");
    printf("timing:     medians of %d runs, the six sides interleaved; K + K.grad includes K\n\n",
           (o->reps + BENCH_ROUNDS - 1) / BENCH_ROUNDS * BENCH_ROUNDS);
    printf("| counts | mean count | kern SIMD K | kern scalar K | hand C K | kern SIMD K + K.grad "
           "| kern scalar K + K.grad | hand C fwd + rev | SIMD / scalar | kern SIMD / hand | "
           "check |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    fflush(stdout);
    inputs in = {.n = n, .steps = steps};
    in.x0 = malloc((size_t)n * 4), in.w = malloc((size_t)steps * 4), in.g = malloc((size_t)n * 4);
    in.zeros = calloc((size_t)(n > steps ? n : steps), 4);
    in.count = malloc((size_t)n * 4);
    double *ref = malloc((size_t)(2 * n + steps) * 8), *xs = malloc((size_t)steps * 8);
    hside h = {.in = &in,
               .out = malloc((size_t)n * 4),
               .x0g = malloc((size_t)n * 4),
               .wg = malloc((size_t)steps * 4)};
    if (!in.x0 || !in.w || !in.g || !in.zeros || !in.count || !ref || !xs || !h.out || !h.x0g ||
        !h.wg) {
        fprintf(stderr, "grad-bench: trips: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++)
        in.x0[i] = gb_x0(i), in.g[i] = gb_g(i);
    for (int64_t t = 0; t < steps; t++)
        in.w[t] = gb_w(t);
    for (int d = 0; d < NDIST; d++) {
        double mean = 0, worst = 0;
        for (int64_t i = 0; i < n; i++)
            mean += in.count[i] = dist_count(d, i, steps);
        mean /= (double)n;
        memset(ref, 0, (size_t)(2 * n + steps) * 8);
        for (int64_t i = 0; i < n; i++)
            ref[i] =
                gb_reference(in.x0[i], in.w, in.count[i], in.g[i], &ref[n + i], ref + 2 * n, xs);
        kside simd, scalar;
        kside_open(&simd, o, &in, true, d != DIST_LOOP);
        kside_open(&scalar, o, &in, false, d != DIST_LOOP);
        bool dok = kside_check(&simd, "kern SIMD", dist_names[d], ref, &worst);
        dok &= kside_check(&scalar, "kern scalar", dist_names[d], ref, &worst);
        if (hand) {
            hand_kgrad(&h);
            dok &= check3("hand C", dist_names[d], h.out, h.x0g, h.wg, ref, n, steps, &worst);
            hand_k(&h);
            dok &=
                check3("hand C forward", dist_names[d], h.out, h.x0g, h.wg, ref, n, steps, &worst);
        }
        ok &= dok;
        fprintf(stderr, "grad-bench: timing trips, %s\n", dist_names[d]);
        bench_side sides[] = {{kern_k, &simd, 0},       {kern_k, &scalar, 0},
                              {hand_k, &h, 0},          {kern_kgrad, &simd, 0},
                              {kern_kgrad, &scalar, 0}, {hand_kgrad, &h, 0}};
        if (hand)
            bench_measure(sides, 6, o->reps, o->warmup);
        else {
            bench_side ks[] = {sides[0], sides[1], sides[3], sides[4]};
            bench_measure(ks, 4, o->reps, o->warmup);
            sides[0] = ks[0], sides[1] = ks[1], sides[3] = ks[2], sides[4] = ks[3];
            sides[2].ms = sides[5].ms = NAN;
        }
        printf("| %s | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s %.2g |\n",
               dist_names[d], mean, sides[0].ms, sides[1].ms, sides[2].ms, sides[3].ms, sides[4].ms,
               sides[5].ms, sides[3].ms / sides[4].ms, sides[3].ms / sides[5].ms,
               dok ? "ok" : "FAILED", worst);
        fflush(stdout);
        kern_context_release(simd.ctx);
        kern_context_release(scalar.ctx);
    }
    printf("\nms; SIMD / scalar and kern SIMD / hand: of K + K.grad (the aims: at most 1, and at "
           "most 1.5); check: the largest error against double precision\n");
    free(in.x0), free(in.w), free(in.g), free(in.zeros), free(in.count), free(ref), free(xs);
    free(h.out), free(h.x0g), free(h.wg);
    return ok;
}
