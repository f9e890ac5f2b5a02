/* test_adbudget.c - the adstack memory budget and the strategies (suite `adbudget`,
 * docs/autodiff.md "Memory budget and checkpointing"): every strategy forced in turn on
 * loop kernels (a for, a for with per-item trip counts and a break, a nest whose outer loop
 * is checkpointed, a loop inside an if) gives the gradient of a plain C reference in f64
 * (forward storing every state, reverse by hand); the automatic choice under budgets that
 * fit everything, only the checkpointed variant, or nothing (a clear error before anything
 * is allocated); the heap never doubles past the budget; K.grad.ckpt's capacities; bad
 * options refused at creation. Contexts on $KERN_TEST_BACKEND (test_backend.h). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../include/kern.h"
#include "test_backend.h"

/* x = 0.5 sin(x) w[t] + 0.4 x + 0.1 for t < count[i] (stopping early where x > stop),
 * out[i] = x; inside an if on flag[i] when `guarded`, else always. */
static const char loop_src[] =
    "kernel loop(x0: f32[], w: f32[], count: i32[], stop: f32, out: f32[]) {\n"
    "    for i in 0..len(x0) {\n"
    "        var x = x0[i];\n"
    "        for t in 0..count[i] {\n"
    "            x = 0.5 * sin(x) * w[t] + 0.4 * x + 0.1;\n"
    "            if x > stop { break; }\n"
    "        }\n"
    "        out[i] = x;\n"
    "    }\n"
    "}\n";

/* two nested loops: the outer one is checkpointed, the inner one stores one execution */
static const char nest_src[] = "kernel nest(x0: f32[], w: f32[], out: f32[], inner: i32) {\n"
                               "    for i in 0..len(x0) {\n"
                               "        var x = x0[i];\n"
                               "        for t in 0..len(w) {\n"
                               "            var y = x;\n"
                               "            for u in 0..inner {\n"
                               "                y = 0.9 * y + 0.05 * cos(y) * w[t];\n"
                               "            }\n"
                               "            x = 0.5 * x + 0.5 * y;\n"
                               "        }\n"
                               "        out[i] = x;\n"
                               "    }\n"
                               "}\n";

enum { N = 70, T = 90 };

static kern_context *new_ctx(int strategy, int64_t budget) {
    kern_context_options o = kern_context_options_default();
    o.threads = 2;
    o.backend = kern_test_backend();
    o.ad_strategy = strategy;
    o.ad_memory_budget = budget;
    kern_context *ctx = NULL;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    return ctx;
}

static kern_kernel *find(kern_context *ctx, const char *src, const char *name) {
    kern_module *m = NULL;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "b.kern", &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    kern_kernel *k = NULL;
    cr_assert_eq(kern_kernel_find(m, name, &k), KERN_OK, "%s", kern_context_last_error(ctx));
    return k;
}

static kern_buffer *buf(kern_context *ctx, kern_dtype dt, int64_t n, const void *data) {
    kern_buffer *b = NULL;
    cr_assert_eq(kern_buffer_create(ctx, dt, 1, &n, data, &b), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    return b;
}

static void inputs(float *x0, float *w, int32_t *count) {
    for (int i = 0; i < N; i++) {
        x0[i] = -2.0f + 4.0f * (float)i / N;
        count[i] = (i * 37) % (T + 1); /* 0 .. T, neighbours differ */
    }
    for (int t = 0; t < T; t++)
        w[t] = 0.5f + (float)((t * 13) % 17) / 17.0f;
}

/* The reference of loop_src in f64: dL/dx0 and dL/dw for L = sum g[i] out[i]. */
static void loop_reference(const float *x0, const float *w, const int32_t *count, double stop,
                           const double *g, double *gx0, double *gw) {
    memset(gw, 0, T * sizeof *gw);
    for (int i = 0; i < N; i++) {
        double xs[T + 1];
        int n = 0;
        double x = x0[i];
        for (int t = 0; t < count[i]; t++) {
            xs[n++] = x;
            x = 0.5 * sin(x) * w[t] + 0.4 * x + 0.1;
            if (x > stop)
                break;
        }
        double a = g[i];
        for (int t = n - 1; t >= 0; t--) {
            gw[t] += a * 0.5 * sin(xs[t]);
            a = a * (0.5 * cos(xs[t]) * w[t] + 0.4);
        }
        gx0[i] = a;
    }
}

static void expect_close(const float *got, const double *want, int n, double tol, const char *what,
                         int strategy) {
    double scale = 1e-6;
    for (int i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    for (int i = 0; i < n; i++)
        cr_expect(fabs(got[i] - want[i]) <= tol * scale,
                  "strategy %d: %s[%d] = %.9g, the reference %.9g", strategy, what, i, got[i],
                  want[i]);
}

/* Runs loop.grad with the strategy forced; returns the strategy it reports. */
static int run_loop(int strategy, int64_t budget, double stop, float *gx0, float *gw,
                    kern_adstack_info *info) {
    kern_context *ctx = new_ctx(strategy, budget);
    kern_kernel *kg = find(ctx, loop_src, "loop.grad");
    float x0[N], w[T], zero[N > T ? N : T] = {0}, g[N];
    int32_t count[N];
    inputs(x0, w, count);
    for (int i = 0; i < N; i++)
        g[i] = 0.5f + (float)(i % 5) / 5.0f;
    kern_buffer *bx = buf(ctx, KERN_F32, N, x0), *bw = buf(ctx, KERN_F32, T, w),
                *bc = buf(ctx, KERN_I32, N, count), *bo = buf(ctx, KERN_F32, N, zero),
                *gbx = buf(ctx, KERN_F32, N, zero), *gbw = buf(ctx, KERN_F32, T, zero),
                *gbo = buf(ctx, KERN_F32, N, g), *gstop = buf(ctx, KERN_F32, 1, zero);
    kern_arg args[] = {kern_arg_buffer(bx),       kern_arg_buffer(bw),    kern_arg_buffer(bc),
                       kern_arg_f32((float)stop), kern_arg_buffer(bo),    kern_arg_buffer(gbx),
                       kern_arg_buffer(gbw),      kern_arg_buffer(gstop), kern_arg_buffer(gbo)};
    kern_status st = kern_launch(kg, args, 9);
    if (st == KERN_OK)
        st = kern_sync(ctx);
    cr_assert_eq(st, KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_buffer_read(gbx, gx0, N * sizeof *gx0), KERN_OK);
    cr_assert_eq(kern_buffer_read(gbw, gw, T * sizeof *gw), KERN_OK);
    cr_assert_eq(kern_context_adstack_info(ctx, info), KERN_OK);
    kern_context_release(ctx);
    return info->last_strategy;
}

Test(adbudget, every_strategy_matches_plain_c) {
    float x0[N], w[T];
    int32_t count[N];
    inputs(x0, w, count);
    double g[N], gx0[N], gw[T];
    for (int i = 0; i < N; i++)
        g[i] = 0.5f + (float)(i % 5) / 5.0f;
    /* a stop no state reaches (every item runs count[i] steps), then one some reach */
    const double stops[] = {1e30, 0.35};
    for (int s = 0; s < 2; s++) {
        loop_reference(x0, w, count, stops[s], g, gx0, gw);
        for (int strat = KERN_AD_STORE_ALL; strat <= KERN_AD_RECOMPUTE; strat++) {
            float gotx[N], gotw[T];
            kern_adstack_info in;
            cr_expect_eq(run_loop(strat, 0, stops[s], gotx, gotw, &in), strat);
            expect_close(gotx, gx0, N, 1e-4, "x0.grad", strat);
            expect_close(gotw, gw, T, 1e-4, "w.grad", strat);
            cr_expect_eq(in.last_needed_bytes <= in.last_store_all_bytes, true);
            if (strat == KERN_AD_RECOMPUTE) /* sqrt(90) + 90 / 10 entries against 90 */
                cr_expect_lt(in.last_needed_bytes * 2, in.last_store_all_bytes,
                             "checkpointed %lld bytes, storing all %lld",
                             (long long)in.last_needed_bytes, (long long)in.last_store_all_bytes);
        }
    }
}

Test(adbudget, automatic_choice_follows_the_budget) {
    float gx[N], gw[T];
    kern_adstack_info all, ck, in;
    /* a large budget: store all */
    cr_assert_eq(run_loop(KERN_AD_AUTO, (int64_t)1 << 40, 1e30, gx, gw, &all), KERN_AD_STORE_ALL);
    /* what recompute takes */
    cr_assert_eq(run_loop(KERN_AD_RECOMPUTE, 0, 1e30, gx, gw, &ck), KERN_AD_RECOMPUTE);
    /* a budget below storing all, at least the checkpointed heap: recompute, when it costs
     * less than fewer slots (halving the slots costs 2x) */
    int64_t b = all.last_store_all_bytes * 6 / 10;
    cr_assert_geq(b, ck.last_needed_bytes);
    int got = run_loop(KERN_AD_AUTO, b, 1e30, gx, gw, &in);
    cr_expect(got == KERN_AD_RECOMPUTE || (got == KERN_AD_FEWER_SLOTS && in.last_recompute <= 1.3),
              "strategy %d, expected time %.2f", got, in.last_recompute);
    cr_expect_leq(in.last_needed_bytes, b);
    cr_expect_eq(in.last_budget, b);
    cr_expect_eq(in.last_store_all_bytes, all.last_store_all_bytes);
}

Test(adbudget, nothing_fits_is_an_error_before_allocating) {
    kern_context *ctx = new_ctx(KERN_AD_AUTO, 16);
    kern_kernel *kg = find(ctx, loop_src, "loop.grad");
    float x0[N], w[T], zero[T] = {0};
    int32_t count[N];
    inputs(x0, w, count);
    kern_buffer *bx = buf(ctx, KERN_F32, N, x0), *bw = buf(ctx, KERN_F32, T, w),
                *bc = buf(ctx, KERN_I32, N, count), *bo = buf(ctx, KERN_F32, N, zero),
                *gbx = buf(ctx, KERN_F32, N, zero), *gbw = buf(ctx, KERN_F32, T, zero),
                *gbo = buf(ctx, KERN_F32, N, zero), *gstop = buf(ctx, KERN_F32, 1, zero);
    kern_arg args[] = {kern_arg_buffer(bx),  kern_arg_buffer(bw),    kern_arg_buffer(bc),
                       kern_arg_f32(1e30f),  kern_arg_buffer(bo),    kern_arg_buffer(gbx),
                       kern_arg_buffer(gbw), kern_arg_buffer(gstop), kern_arg_buffer(gbo)};
    cr_assert_eq(kern_launch(kg, args, 9), KERN_ERR_OUT_OF_MEMORY);
    const char *msg = kern_context_last_error(ctx);
    cr_expect(strstr(msg, "kernel 'loop.grad'") && strstr(msg, "memory budget is 16 bytes") &&
                  strstr(msg, "b.kern:4:") && strstr(msg, "ad_memory_budget") &&
                  strstr(msg, "the least it can take is ") && strstr(msg, "(checkpointed, "),
              "%s", msg);
    kern_adstack_info in;
    cr_assert_eq(kern_context_adstack_info(ctx, &in), KERN_OK);
    cr_expect_eq(in.heap_bytes, 0, "a heap of %lld bytes was allocated", (long long)in.heap_bytes);
    kern_context_release(ctx);
}

/* The reference of nest_src in f64. */
static void nest_reference(const float *x0, const float *w, int inner, int tt, const double *g,
                           double *gx0, double *gw) {
    memset(gw, 0, (size_t)tt * sizeof *gw);
    for (int i = 0; i < N; i++) {
        double xs[T], x = x0[i];
        for (int t = 0; t < tt; t++) {
            xs[t] = x;
            double y = x;
            for (int u = 0; u < inner; u++)
                y = 0.9 * y + 0.05 * cos(y) * w[t];
            x = 0.5 * x + 0.5 * y;
        }
        double a = g[i];
        for (int t = tt - 1; t >= 0; t--) {
            double ys[64], y = xs[t];
            for (int u = 0; u < inner; u++) {
                ys[u] = y;
                y = 0.9 * y + 0.05 * cos(y) * w[t];
            }
            double ay = 0.5 * a, ax = 0.5 * a;
            for (int u = inner - 1; u >= 0; u--) {
                gw[t] += ay * 0.05 * cos(ys[u]);
                ay = ay * (0.9 - 0.05 * sin(ys[u]) * w[t]);
            }
            a = ax + ay;
        }
        gx0[i] = a;
    }
}

Test(adbudget, nested_loops_checkpoint_the_outer_one) {
    enum { TT = 40, INNER = 7 };
    float x0[N], w[T];
    int32_t count[N];
    inputs(x0, w, count);
    double g[N], gx0[N], gw[TT];
    for (int i = 0; i < N; i++)
        g[i] = 1.0 - (double)(i % 3) / 4.0;
    nest_reference(x0, w, INNER, TT, g, gx0, gw);
    for (int strat = KERN_AD_STORE_ALL; strat <= KERN_AD_RECOMPUTE; strat++) {
        kern_context *ctx = new_ctx(strat, 0);
        kern_kernel *kg = find(ctx, nest_src, "nest.grad");
        float zero[N] = {0}, gf[N], gotx[N], gotw[TT];
        for (int i = 0; i < N; i++)
            gf[i] = (float)g[i];
        kern_buffer *bx = buf(ctx, KERN_F32, N, x0), *bw = buf(ctx, KERN_F32, TT, w),
                    *bo = buf(ctx, KERN_F32, N, zero), *gbx = buf(ctx, KERN_F32, N, zero),
                    *gbw = buf(ctx, KERN_F32, TT, zero), *gbo = buf(ctx, KERN_F32, N, gf);
        kern_arg args[] = {kern_arg_buffer(bx), kern_arg_buffer(bw),  kern_arg_buffer(bo),
                           kern_arg_i32(INNER), kern_arg_buffer(gbx), kern_arg_buffer(gbw),
                           kern_arg_buffer(gbo)};
        kern_status st = kern_launch(kg, args, 7);
        if (st == KERN_OK)
            st = kern_sync(ctx);
        cr_assert_eq(st, KERN_OK, "%s", kern_context_last_error(ctx));
        cr_assert_eq(kern_buffer_read(gbx, gotx, sizeof gotx), KERN_OK);
        cr_assert_eq(kern_buffer_read(gbw, gotw, sizeof gotw), KERN_OK);
        kern_adstack_info in;
        cr_assert_eq(kern_context_adstack_info(ctx, &in), KERN_OK);
        cr_expect_eq(in.last_strategy, strat);
        expect_close(gotx, gx0, N, 1e-4, "x0.grad", strat);
        expect_close(gotw, gw, TT, 1e-4, "w.grad", strat);
        kern_context_release(ctx);
    }
}

Test(adbudget, checkpointed_variant_sizes_segments_and_checkpoints) {
    kern_context *ctx = new_ctx(KERN_AD_AUTO, 0);
    kern_kernel *kc = find(ctx, loop_src, "loop.grad.ckpt");
    /* K.grad's parameters, then ckpt.0 */
    cr_assert_eq(kern_kernel_param_count(kc), 10);
    kern_param_info p;
    cr_assert_eq(kern_kernel_param(kc, 9, &p), KERN_OK);
    cr_expect_str_eq(p.name, "ckpt.k0");
    cr_expect_eq(p.dtype, KERN_I64);
    /* launched directly with k = 7 (and a k below 1, which counts as 1): capacities
     * min(k, N) and ceil(N / k) for N = max count = 90 */
    float x0[N], w[T], zero[T] = {0};
    int32_t count[N];
    inputs(x0, w, count);
    const int64_t ks[] = {7, -3};
    const int64_t seg[] = {7, 1}, cks[] = {13, 90};
    for (int j = 0; j < 2; j++) {
        kern_buffer *bx = buf(ctx, KERN_F32, N, x0), *bw = buf(ctx, KERN_F32, T, w),
                    *bc = buf(ctx, KERN_I32, N, count), *bo = buf(ctx, KERN_F32, N, zero),
                    *gbx = buf(ctx, KERN_F32, N, zero), *gbw = buf(ctx, KERN_F32, T, zero),
                    *gbo = buf(ctx, KERN_F32, N, zero), *gs = buf(ctx, KERN_F32, 1, zero);
        kern_arg args[] = {kern_arg_buffer(bx),  kern_arg_buffer(bw), kern_arg_buffer(bc),
                           kern_arg_f32(1e30f),  kern_arg_buffer(bo), kern_arg_buffer(gbx),
                           kern_arg_buffer(gbw), kern_arg_buffer(gs), kern_arg_buffer(gbo),
                           kern_arg_i64(ks[j])};
        cr_assert_eq(kern_launch(kc, args, 10), KERN_OK, "%s", kern_context_last_error(ctx));
        cr_assert_eq(kern_sync(ctx), KERN_OK, "%s", kern_context_last_error(ctx));
        int64_t cap0, cap1;
        cr_assert_eq(kern_context_adstack_last(ctx, 0, NULL, &cap0), KERN_OK);
        cr_assert_eq(kern_context_adstack_last(ctx, 1, NULL, &cap1), KERN_OK);
        cr_expect_eq(cap0, seg[j], "segment capacity %lld", (long long)cap0);
        cr_expect_eq(cap1, cks[j], "checkpoint capacity %lld", (long long)cap1);
    }
    kern_context_release(ctx);
}

Test(adbudget, bad_options_are_refused) {
    kern_context_options o = kern_context_options_default();
    o.ad_memory_budget = -5;
    kern_context *ctx = NULL;
    cr_expect_eq(kern_context_create(&o, &ctx), KERN_ERR_ARGUMENT);
    cr_expect(strstr(kern_context_last_error(ctx), "budget -5 is negative"), "%s",
              kern_context_last_error(ctx));
    kern_context_release(ctx);
    o = kern_context_options_default();
    o.ad_strategy = 9;
    cr_expect_eq(kern_context_create(&o, &ctx), KERN_ERR_ARGUMENT);
    cr_expect(strstr(kern_context_last_error(ctx), "strategy 9"), "%s",
              kern_context_last_error(ctx));
    kern_context_release(ctx);
}

/* A while loop whose count is known only when it ends (a pendulum, whose gradient neither
 * grows nor vanishes over a million steps): with --ad-stack-size at the largest count,
 * storing all holds every iteration per slot; under a budget of a twentieth of that,
 * K.grad.ckpt holds about 2 sqrt(count) entries, and the gradients match plain C in f64 for
 * counts from 1 to 10^6 (10^4 on Vulkan: lavapipe stops a shader invocation after 65,535
 * loop iterations in all). */
static const char while_src[] = "kernel swing(x0: f64[], v0: f64[], n: i32[], out: f64[]) {\n"
                                "    for i in 0..len(x0) {\n"
                                "        var x = x0[i];\n"
                                "        var v = v0[i];\n"
                                "        var t = 0;\n"
                                "        while t < n[i] {\n"
                                "            v = v - 0.001 * sin(x);\n"
                                "            x = x + 0.001 * v;\n"
                                "            t += 1;\n"
                                "        }\n"
                                "        out[i] = x;\n"
                                "    }\n"
                                "}\n";

/* d out / d (x0, v0) of while_src in f64, by hand. */
static void swing_reference(double x0, double v0, int n, double g, double *gx, double *gv) {
    const double h = 0.001;
    double *xs = malloc(sizeof(double) * (size_t)(n + 1));
    cr_assert_not_null(xs);
    double x = x0, v = v0;
    for (int t = 0; t < n; t++) {
        xs[t] = x;
        v = v - h * sin(x);
        x = x + h * v;
    }
    double ax = g, av = 0;
    for (int t = n - 1; t >= 0; t--) {
        double avn = av + h * ax; /* adjoint of v_{t+1} */
        ax = ax - h * cos(xs[t]) * avn;
        av = avn;
    }
    free(xs);
    *gx = ax;
    *gv = av;
}

Test(adbudget, while_counts_up_to_a_million_within_the_budget) {
    enum { M = 6 };
    int32_t most = kern_test_backend() == KERN_BACKEND_VULKAN ? 10000 : 1000000;
    int32_t n[M] = {1, 2, 7, 1000, most / 3, most};
    double x0[M], v0[M], zero[M] = {0}, g[M], gx[M], gv[M];
    for (int i = 0; i < M; i++) {
        x0[i] = 0.3 + 0.4 * i;
        v0[i] = 0.5 - 0.2 * i;
        g[i] = 1.0 + i / 4.0;
    }
    kern_context_options o = kern_context_options_default();
    o.threads = 2;
    o.backend = kern_test_backend();
    /* storing all: 2 stacks of most + 1 f64 per slot, times the task's SIMD lanes on the
     * CPU (1 to 64 with the host's vectors: measured by a launch with capacity 100); 2
     * slots on the CPU, a GPU's 128 or 256 (the items rounded up to a group) */
    int64_t slots = o.backend == KERN_BACKEND_CPU ? 2 : 256, stride = 101 * 16;
    if (o.backend == KERN_BACKEND_CPU) {
        o.ad_stack_size = 100;
        kern_context *probe = NULL;
        cr_assert_eq(kern_context_create(&o, &probe), KERN_OK);
        int32_t one[M] = {1, 1, 1, 1, 1, 1};
        kern_buffer *pb[7] = {buf(probe, KERN_F64, M, x0),   buf(probe, KERN_F64, M, v0),
                              buf(probe, KERN_I32, M, one),  buf(probe, KERN_F64, M, zero),
                              buf(probe, KERN_F64, M, zero), buf(probe, KERN_F64, M, zero),
                              buf(probe, KERN_F64, M, g)};
        kern_arg pa[7];
        for (int i = 0; i < 7; i++)
            pa[i] = kern_arg_buffer(pb[i]);
        kern_kernel *pk = find(probe, while_src, "swing.grad");
        cr_assert_eq(kern_launch(pk, pa, 7), KERN_OK, "%s", kern_context_last_error(probe));
        cr_assert_eq(kern_sync(probe), KERN_OK);
        kern_adstack_info pi;
        cr_assert_eq(kern_context_adstack_info(probe, &pi), KERN_OK);
        stride = pi.last_stride;
        /* x's stack (v's values no adjoint reads: passes/dce.c drops its stack) */
        cr_assert_geq(stride, 101 * 8, "a slot holds x's stack: %lld", (long long)stride);
        kern_context_release(probe);
    }
    o.ad_stack_size = most;
    o.ad_memory_budget = stride * (most + 1) / 101 * slots / 20;
    kern_context *ctx = NULL;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_kernel *kg = find(ctx, while_src, "swing.grad");
    kern_buffer *bx = buf(ctx, KERN_F64, M, x0), *bv = buf(ctx, KERN_F64, M, v0),
                *bn = buf(ctx, KERN_I32, M, n), *bo = buf(ctx, KERN_F64, M, zero),
                *gbx = buf(ctx, KERN_F64, M, zero), *gbv = buf(ctx, KERN_F64, M, zero),
                *gbo = buf(ctx, KERN_F64, M, g);
    kern_arg args[] = {kern_arg_buffer(bx), kern_arg_buffer(bv),  kern_arg_buffer(bn),
                       kern_arg_buffer(bo), kern_arg_buffer(gbx), kern_arg_buffer(gbv),
                       kern_arg_buffer(gbo)};
    kern_status st = kern_launch(kg, args, 7);
    if (st == KERN_OK)
        st = kern_sync(ctx);
    cr_assert_eq(st, KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_buffer_read(gbx, gx, sizeof gx), KERN_OK);
    cr_assert_eq(kern_buffer_read(gbv, gv, sizeof gv), KERN_OK);
    kern_adstack_info in;
    cr_assert_eq(kern_context_adstack_info(ctx, &in), KERN_OK);
    cr_expect_eq(in.last_strategy, KERN_AD_RECOMPUTE);
    cr_expect_leq(in.last_needed_bytes, o.ad_memory_budget, "%lld bytes, the budget %lld",
                  (long long)in.last_needed_bytes, (long long)o.ad_memory_budget);
    for (int i = 0; i < M; i++) {
        double wx, wv;
        swing_reference(x0[i], v0[i], n[i], g[i], &wx, &wv);
        cr_expect(fabs(gx[i] - wx) <= 1e-7 * (1 + fabs(wx)),
                  "count %d: x0.grad %.15g, plain C %.15g", n[i], gx[i], wx);
        cr_expect(fabs(gv[i] - wv) <= 1e-7 * (1 + fabs(wv)),
                  "count %d: v0.grad %.15g, plain C %.15g", n[i], gv[i], wv);
    }
    kern_context_release(ctx);
}

/* A captured K.grad keeps the strategy it was captured with: replays run K.grad.ckpt with
 * the checkpoint lengths of the capture, and give the plain C gradient every time. */
Test(adbudget, graph_replays_keep_the_captured_strategy) {
    float x0[N], w[T], zero[N > T ? N : T] = {0}, g[N], gx[N], gw[T];
    int32_t count[N];
    inputs(x0, w, count);
    double gd[N], wx[N], ww[T];
    for (int i = 0; i < N; i++)
        g[i] = (float)(gd[i] = 1.0 - (double)(i % 4) / 8.0);
    loop_reference(x0, w, count, 1e30, gd, wx, ww);
    kern_context *ctx = new_ctx(KERN_AD_RECOMPUTE, 0);
    kern_kernel *kg = find(ctx, loop_src, "loop.grad");
    kern_buffer *bx = buf(ctx, KERN_F32, N, x0), *bw = buf(ctx, KERN_F32, T, w),
                *bc = buf(ctx, KERN_I32, N, count), *bo = buf(ctx, KERN_F32, N, zero),
                *gbx = buf(ctx, KERN_F32, N, zero), *gbw = buf(ctx, KERN_F32, T, zero),
                *gbo = buf(ctx, KERN_F32, N, g), *gs = buf(ctx, KERN_F32, 1, zero);
    kern_arg args[] = {kern_arg_buffer(bx),  kern_arg_buffer(bw), kern_arg_buffer(bc),
                       kern_arg_f32(1e30f),  kern_arg_buffer(bo), kern_arg_buffer(gbx),
                       kern_arg_buffer(gbw), kern_arg_buffer(gs), kern_arg_buffer(gbo)};
    kern_graph *gr = NULL;
    cr_assert_eq(kern_graph_begin(ctx), KERN_OK);
    cr_assert_eq(kern_launch(kg, args, 9), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_graph_end(ctx, &gr), KERN_OK, "%s", kern_context_last_error(ctx));
    for (int rep = 0; rep < 2; rep++) {
        /* K.grad keeps no state between runs but the adjoints: reset them */
        cr_assert_eq(kern_buffer_write(gbx, zero, N * sizeof(float)), KERN_OK);
        cr_assert_eq(kern_buffer_write(gbw, zero, T * sizeof(float)), KERN_OK);
        cr_assert_eq(kern_buffer_write(gbo, g, sizeof g), KERN_OK);
        cr_assert_eq(kern_graph_launch(gr), KERN_OK, "%s", kern_context_last_error(ctx));
        cr_assert_eq(kern_sync(ctx), KERN_OK, "%s", kern_context_last_error(ctx));
        cr_assert_eq(kern_buffer_read(gbx, gx, sizeof gx), KERN_OK);
        cr_assert_eq(kern_buffer_read(gbw, gw, sizeof gw), KERN_OK);
        expect_close(gx, wx, N, 1e-4, "x0.grad (replay)", KERN_AD_RECOMPUTE);
        expect_close(gw, ww, T, 1e-4, "w.grad (replay)", KERN_AD_RECOMPUTE);
    }
    kern_adstack_info in;
    cr_assert_eq(kern_context_adstack_info(ctx, &in), KERN_OK);
    cr_expect_eq(in.last_strategy, KERN_AD_RECOMPUTE);
    kern_graph_release(gr);
    kern_context_release(ctx);
}

/* A while loop past --ad-stack-size in K.grad.ckpt is an overflow in the option's units. */
Test(adbudget, checkpointed_overflow_names_the_option) {
    static const char src[] = "kernel walk(x0: f32[], n: i32[], out: f32[]) {\n"
                              "    for i in 0..len(x0) {\n"
                              "        var x = x0[i];\n"
                              "        var t = 0;\n"
                              "        while t < n[i] {\n"
                              "            x = 0.9 * x + 0.1 * sin(x);\n"
                              "            t += 1;\n"
                              "        }\n"
                              "        out[i] = x;\n"
                              "    }\n"
                              "}\n";
    kern_context_options o = kern_context_options_default();
    o.threads = 2;
    o.backend = kern_test_backend();
    o.ad_stack_size = 15;
    o.ad_strategy = KERN_AD_RECOMPUTE;
    kern_context *ctx = NULL;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_kernel *kg = find(ctx, src, "walk.grad");
    float x0[3] = {1, 1, 1}, zero[3] = {0};
    int32_t n[3] = {5, 12, 40};
    kern_buffer *bx = buf(ctx, KERN_F32, 3, x0), *bn = buf(ctx, KERN_I32, 3, n),
                *bo = buf(ctx, KERN_F32, 3, zero), *gbx = buf(ctx, KERN_F32, 3, zero),
                *gbo = buf(ctx, KERN_F32, 3, zero);
    kern_arg args[] = {kern_arg_buffer(bx), kern_arg_buffer(bn), kern_arg_buffer(bo),
                       kern_arg_buffer(gbx), kern_arg_buffer(gbo)};
    kern_status st = kern_launch(kg, args, 5);
    if (st == KERN_OK)
        st = kern_sync(ctx);
    cr_assert_neq(st, KERN_OK);
    const char *msg = kern_context_last_error(ctx);
    cr_expect(strstr(msg, "adstack overflow in the loop at b.kern:5:9") &&
                  strstr(msg, "runs more than 15 iterations (--ad-stack-size 15; checkpointed"),
              "%s", msg);
    kern_context_release(ctx);
}
