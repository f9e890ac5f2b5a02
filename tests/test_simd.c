/* test_simd.c - SIMD across work items on the CPU (backends/llvm/llvm_simd.c): kernels whose
 * lanes diverge (different trip counts, early break, continue, while loops with different
 * iteration counts, if on carried values), atomics that collide across lanes, gathers and
 * scatters, per-lane adstacks and their overflow, run through the public API with
 * $KERN_SIMD = off (the scalar path), sse (4 lanes) and auto (the host's widest vectors).
 * Every mode is compared with a plain C reference written here, and the gradients of the
 * SIMD modes with the scalar path's and, where written, a C adjoint. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backends/llvm/llvm_backend.h"
#include "../compiler/driver.h"
#include "../include/kern.h"
#include "trips_ref.h"

static const char *const MODES[] = {"off", "sse", "auto"};
enum { NMODES = 3 };

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void) { /* xorshift64, deterministic */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

/* A CPU context on 2 threads whose JIT modules compile with KERN_SIMD=mode. */
static kern_context *ctx_mode(const char *mode, int64_t ad_stack_size) {
    setenv("KERN_SIMD", mode, 1);
    kern_context_options o = kern_context_options_default();
    o.backend = KERN_BACKEND_CPU;
    o.threads = 2;
    o.ad_stack_size = ad_stack_size;
    kern_context *ctx;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    return ctx;
}

static kern_kernel *kernel(kern_context *ctx, const char *src, const char *name) {
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "simd.kern", &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, name, &k), KERN_OK, "%s: %s", name,
                 kern_context_last_error(ctx));
    return k;
}

static kern_buffer *buf(kern_context *ctx, kern_dtype t, int64_t n, const void *data) {
    kern_buffer *b;
    int64_t shape[1] = {n};
    cr_assert_eq(kern_buffer_create(ctx, t, 1, shape, data, &b), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    return b;
}

static void get(kern_buffer *b, void *out, size_t bytes) {
    cr_assert_eq(kern_buffer_read(b, out, bytes), KERN_OK);
}

static void launch(kern_context *ctx, kern_kernel *k, const kern_arg *args, int n) {
    cr_assert_eq(kern_launch(k, args, n), KERN_OK, "%s", kern_context_last_error(ctx));
}

static void expect_near(const float *got, const float *want, int n, double rtol, const char *what,
                        const char *mode) {
    double scale = 0;
    for (int i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    for (int i = 0; i < n; i++) {
        double tol = rtol * fmax(fabs(want[i]), 1e-3 * scale);
        cr_expect(fabs((double)got[i] - want[i]) <= tol,
                  "%s, KERN_SIMD=%s, [%d]: got %.9g, want %.9g", what, mode, i, (double)got[i],
                  (double)want[i]);
    }
}

/* ---- a loop-carried value that starts uniform and becomes varying ---------------------- */

/* acc starts at a uniform value that is computed (not a constant), so the vector loop must
 * broadcast it before entering the loop: emitted in the loop's header it stood among the
 * phis, and LLVM's verifier refused the module (the while loop had the same bug). */
static const char *ACC = "kernel acc(x: f32[], y: f32[], a: f32, n: i32) {\n"
                         "    for i in 0..len(x) {\n"
                         "        var acc = a * 2.0;\n"
                         "        for t in 0..n { acc = acc + sin(x[i] * f32(t)); }\n"
                         "        var w = a + 1.0;\n"
                         "        while w < 3.0 + x[i] { w = w + 0.5 * cos(x[i]); }\n"
                         "        y[i] = acc + w;\n"
                         "    }\n"
                         "}\n";

Test(simd, uniform_initial_values_of_varying_loop_values) {
    enum { N = 77 };
    float x[N], y[N], want[N];
    const float a = 0.5f;
    const int n = 9;
    for (int i = 0; i < N; i++)
        x[i] = (float)urand();
    for (int i = 0; i < N; i++) {
        float acc = a * 2.0f, w = a + 1.0f;
        for (int t = 0; t < n; t++)
            acc = acc + sinf(x[i] * (float)t);
        while (w < 3.0f + x[i])
            w = w + 0.5f * cosf(x[i]);
        want[i] = acc + w;
    }
    for (int m = 0; m < 3; m++) {
        kern_context *ctx = ctx_mode(MODES[m], 0);
        kern_buffer *bx = buf(ctx, KERN_F32, N, x), *by = buf(ctx, KERN_F32, N, NULL);
        kern_arg args[4] = {kern_arg_buffer(bx), kern_arg_buffer(by), kern_arg_f32(a),
                            kern_arg_i32(n)};
        launch(ctx, kernel(ctx, ACC, "acc"), args, 4);
        cr_assert_eq(kern_sync(ctx), KERN_OK);
        get(by, y, sizeof y);
        expect_near(y, want, N, 1e-5, "acc", MODES[m]);
        kern_context_release(ctx);
    }
}

/* ---- a serial loop whose trip count differs per item (CSR), and its gradient --------- */

static const char *RAGGED =
    "kernel ragged(x0: f32[], w: f32[], start: i32[], count: i32[], out: f32[]) {\n"
    "    for i in 0..len(x0) {\n"
    "        var x = x0[i];\n"
    "        let s = start[i];\n"
    "        for j in 0..count[i] {\n"
    "            x = sin(x) * w[s + j] + x;\n"
    "        }\n"
    "        out[i] = x;\n"
    "    }\n"
    "}\n";

Test(simd, ragged_loop_and_gradient_per_lane_adstacks) {
    enum { N = 203, MAXC = 29 };
    static float x0[N], w[N * MAXC], want[N], wx0[N], ww[N * MAXC];
    static int32_t start[N], count[N];
    int total = 0;
    for (int i = 0; i < N; i++) {
        x0[i] = (float)(urand() * 2 - 1);
        count[i] = (int32_t)(urand() * MAXC); /* 0 .. MAXC - 1: lanes leave at different steps */
        start[i] = total;
        total += count[i];
    }
    for (int j = 0; j < total; j++)
        w[j] = (float)(urand() - 0.5);
    /* the C reference: forward, and the adjoint of L = sum(out) by a reverse sweep */
    for (int i = 0; i < N; i++) {
        float xs[MAXC], x = x0[i];
        for (int j = 0; j < count[i]; j++) {
            xs[j] = x;
            x = sinf(x) * w[start[i] + j] + x;
        }
        want[i] = x;
        double g = 1;
        for (int j = count[i] - 1; j >= 0; j--) {
            ww[start[i] + j] += (float)(g * sin((double)xs[j]));
            g *= cos((double)xs[j]) * w[start[i] + j] + 1;
        }
        wx0[i] = (float)g;
    }
    float got[N], gx0[NMODES][N], *gw[NMODES];
    for (int m = 0; m < NMODES; m++) {
        kern_context *ctx = ctx_mode(MODES[m], 0);
        kern_kernel *k = kernel(ctx, RAGGED, "ragged"), *kg = kernel(ctx, RAGGED, "ragged.grad");
        float zeros[N * MAXC] = {0}, ones[N];
        for (int i = 0; i < N; i++)
            ones[i] = 1;
        kern_buffer *bx = buf(ctx, KERN_F32, N, x0), *bw = buf(ctx, KERN_F32, total, w),
                    *bs = buf(ctx, KERN_I32, N, start), *bc = buf(ctx, KERN_I32, N, count),
                    *bo = buf(ctx, KERN_F32, N, zeros), *bxg = buf(ctx, KERN_F32, N, zeros),
                    *bwg = buf(ctx, KERN_F32, total, zeros), *bog = buf(ctx, KERN_F32, N, ones);
        kern_arg a[5] = {kern_arg_buffer(bx), kern_arg_buffer(bw), kern_arg_buffer(bs),
                         kern_arg_buffer(bc), kern_arg_buffer(bo)};
        launch(ctx, k, a, 5);
        get(bo, got, sizeof got);
        expect_near(got, want, N, 2e-5, "ragged out", MODES[m]);
        kern_arg ag[8] = {a[0],
                          a[1],
                          a[2],
                          a[3],
                          a[4],
                          kern_arg_buffer(bxg),
                          kern_arg_buffer(bwg),
                          kern_arg_buffer(bog)};
        launch(ctx, kg, ag, 8);
        get(bxg, gx0[m], sizeof gx0[m]);
        gw[m] = malloc((size_t)total * sizeof(float));
        get(bwg, gw[m], (size_t)total * sizeof(float));
        expect_near(gx0[m], wx0, N, 1e-4, "x0.grad against C", MODES[m]);
        expect_near(gw[m], ww, total, 1e-4, "w.grad against C", MODES[m]);
        if (m > 0) {
            expect_near(gx0[m], gx0[0], N, 1e-4, "x0.grad against the scalar path", MODES[m]);
            expect_near(gw[m], gw[0], total, 1e-4, "w.grad against the scalar path", MODES[m]);
        }
        kern_context_release(ctx);
    }
    for (int m = 0; m < NMODES; m++)
        free(gw[m]);
}

/* ---- while loops with per-lane iteration counts; a range that starts at 5 ----------- */

static const char *GROW = "kernel grow(x0: f32[], lim: f32[], out: f32[], iters: i32[]) {\n"
                          "    for i in 5..len(x0) - 2 {\n"
                          "        var x = x0[i];\n"
                          "        var n = 0;\n"
                          "        while x < lim[i] { x = x * 1.5 + 0.25; n += 1; }\n"
                          "        out[i] = x;\n"
                          "        iters[i] = n;\n"
                          "    }\n"
                          "}\n";

Test(simd, while_loops_with_different_iteration_counts) {
    enum { N = 100 };
    float x0[N], lim[N], want[N], wantg[N];
    int32_t wn[N];
    for (int i = 0; i < N; i++) {
        x0[i] = (float)(urand() * 2);
        lim[i] = (float)(urand() * 60 - 5); /* some items never enter the loop */
    }
    for (int i = 0; i < N; i++) {
        want[i] = wantg[i] = 0;
        wn[i] = 0;
        if (i < 5 || i >= N - 2)
            continue;
        float x = x0[i];
        int n = 0;
        while (x < lim[i]) {
            float t = x * 1.5f;
            x = t + 0.25f;
            n++;
        }
        want[i] = x;
        wn[i] = n;
        wantg[i] = (float)pow(1.5, n); /* d out / d x0 */
    }
    for (int m = 0; m < NMODES; m++) {
        kern_context *ctx = ctx_mode(MODES[m], 0);
        kern_kernel *k = kernel(ctx, GROW, "grow"), *kg = kernel(ctx, GROW, "grow.grad");
        float zeros[N] = {0}, ones[N], got[N], g[N];
        int32_t izero[N] = {0}, n[N];
        for (int i = 0; i < N; i++)
            ones[i] = 1;
        kern_buffer *bx = buf(ctx, KERN_F32, N, x0), *bl = buf(ctx, KERN_F32, N, lim),
                    *bo = buf(ctx, KERN_F32, N, zeros), *bn = buf(ctx, KERN_I32, N, izero),
                    *bxg = buf(ctx, KERN_F32, N, zeros), *blg = buf(ctx, KERN_F32, N, zeros),
                    *bog = buf(ctx, KERN_F32, N, ones);
        kern_arg a[4] = {kern_arg_buffer(bx), kern_arg_buffer(bl), kern_arg_buffer(bo),
                         kern_arg_buffer(bn)};
        launch(ctx, k, a, 4);
        get(bo, got, sizeof got);
        get(bn, n, sizeof n);
        expect_near(got, want, N, 1e-6, "grow out", MODES[m]);
        for (int i = 0; i < N; i++)
            cr_expect_eq(n[i], wn[i], "KERN_SIMD=%s iters[%d]: %d, want %d", MODES[m], i, n[i],
                         wn[i]);
        kern_arg ag[7] = {a[0],
                          a[1],
                          a[2],
                          a[3],
                          kern_arg_buffer(bxg),
                          kern_arg_buffer(blg),
                          kern_arg_buffer(bog)};
        launch(ctx, kg, ag, 7);
        get(bxg, g, sizeof g);
        expect_near(g, wantg, N, 1e-5, "x0.grad", MODES[m]);
        kern_context_release(ctx);
    }
}

/* ---- break, continue and if on carried values -------------------------------------- */

static const char *WALK =
    "kernel walk(x0: f32[], w: f32[], thr: f32[], out: f32[], steps: i32[]) {\n"
    "    for i in 0..len(x0) {\n"
    "        var x = x0[i];\n"
    "        var k = 0;\n"
    "        for j in 0..len(w) {\n"
    "            if x > thr[i] { break; }\n"
    "            k += 1;\n"
    "            if j % 3 == 1 { continue; }\n"
    "            if x > 0.0 { x = x * w[j] + 0.5; } else { x = x - w[j]; }\n"
    "        }\n"
    "        out[i] = x;\n"
    "        steps[i] = k;\n"
    "    }\n"
    "}\n";

Test(simd, break_continue_and_if_on_carried_values) {
    enum { N = 77, T = 40 };
    float x0[N], w[T], thr[N], want[N];
    int32_t wk[N];
    for (int i = 0; i < N; i++) {
        x0[i] = (float)(urand() * 4 - 2);
        thr[i] = (float)(urand() * 6);
    }
    for (int j = 0; j < T; j++)
        w[j] = (float)(urand() * 1.6 - 0.3);
    for (int i = 0; i < N; i++) {
        float x = x0[i];
        int k = 0;
        for (int j = 0; j < T; j++) {
            if (x > thr[i])
                break;
            k++;
            if (j % 3 == 1)
                continue;
            if (x > 0) {
                float t = x * w[j];
                x = t + 0.5f;
            } else {
                x = x - w[j];
            }
        }
        want[i] = x;
        wk[i] = k;
    }
    float g0[N];
    for (int m = 0; m < NMODES; m++) {
        kern_context *ctx = ctx_mode(MODES[m], 0);
        kern_kernel *k = kernel(ctx, WALK, "walk"), *kg = kernel(ctx, WALK, "walk.grad");
        float zeros[N] = {0}, zt[T] = {0}, ones[N], got[N], g[N];
        int32_t izero[N] = {0}, steps[N];
        for (int i = 0; i < N; i++)
            ones[i] = 1;
        kern_buffer *bx = buf(ctx, KERN_F32, N, x0), *bw = buf(ctx, KERN_F32, T, w),
                    *bt = buf(ctx, KERN_F32, N, thr), *bo = buf(ctx, KERN_F32, N, zeros),
                    *bs = buf(ctx, KERN_I32, N, izero);
        kern_arg a[5] = {kern_arg_buffer(bx), kern_arg_buffer(bw), kern_arg_buffer(bt),
                         kern_arg_buffer(bo), kern_arg_buffer(bs)};
        launch(ctx, k, a, 5);
        get(bo, got, sizeof got);
        get(bs, steps, sizeof steps);
        expect_near(got, want, N, 1e-6, "walk out", MODES[m]);
        for (int i = 0; i < N; i++)
            cr_expect_eq(steps[i], wk[i], "KERN_SIMD=%s steps[%d]: %d, want %d", MODES[m], i,
                         steps[i], wk[i]);
        kern_arg ag[9] = {a[0],
                          a[1],
                          a[2],
                          a[3],
                          a[4],
                          kern_arg_buffer(buf(ctx, KERN_F32, N, zeros)),
                          kern_arg_buffer(buf(ctx, KERN_F32, T, zt)),
                          kern_arg_buffer(buf(ctx, KERN_F32, N, zeros)),
                          kern_arg_buffer(buf(ctx, KERN_F32, N, ones))};
        launch(ctx, kg, ag, 9);
        get(ag[5].u.buffer, g, sizeof g);
        if (m == 0)
            memcpy(g0, g, sizeof g);
        else
            expect_near(g, g0, N, 1e-5, "x0.grad against the scalar path", MODES[m]);
        /* d out / d x0 by the C recurrence: 1 per subtraction step, w[j] per multiply */
        for (int i = 0; i < N; i++) {
            double d = 1;
            float x = x0[i];
            for (int j = 0; j < T && !(x > thr[i]); j++) {
                if (j % 3 == 1)
                    continue;
                if (x > 0) {
                    d *= w[j];
                    x = x * w[j] + 0.5f;
                } else {
                    x = x - w[j];
                }
            }
            cr_expect(fabs(g[i] - d) <= 1e-5 * fmax(1, fabs(d)),
                      "KERN_SIMD=%s x0.grad[%d]: %g, want %g", MODES[m], i, (double)g[i], d);
        }
        kern_context_release(ctx);
    }
}

/* ---- atomics that collide across lanes, uniform reductions, gathers, scatters -------- */

static const char *HIST =
    "kernel hist(idx: i32[], v: f32[], h: f32[], cnt: i32[], s: f32[], mx: i32[], perm: i32[],\n"
    "            out: f32[], flag: bool[]) {\n"
    "    for i in 0..len(idx) {\n"
    "        h[idx[i]] += v[i];\n"
    "        cnt[idx[i]] += 1;\n"
    "        s[0] += v[i];\n"
    "        atomic_max(mx[0], idx[i] * 7 % 13);\n"
    "        out[perm[i]] = v[perm[i]] * 2.0;\n"
    "        flag[perm[i]] = v[i] > 0.0;\n"
    "    }\n"
    "}\n";

Test(simd, atomics_across_lanes_gathers_and_scatters) {
    enum { N = 301, B = 5 };
    float v[N], wh[B] = {0}, ws = 0, wout[N];
    double wabs = 0, habs[B] = {0};
    int32_t idx[N], perm[N], wc[B] = {0}, wmx = -1;
    uint8_t wflag[N];
    for (int i = 0; i < N; i++) {
        idx[i] = (int32_t)(urand() * B); /* 5 bins: lanes of one vector collide */
        v[i] = (float)(urand() * 2 - 1);
        perm[i] = i;
    }
    for (int i = N - 1; i > 0; i--) { /* a random permutation */
        int j = (int)(urand() * (i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int i = 0; i < N; i++) {
        wh[idx[i]] += v[i];
        habs[idx[i]] += fabs(v[i]);
        wc[idx[i]]++;
        ws += v[i];
        wabs += fabs(v[i]);
        if (idx[i] * 7 % 13 > wmx)
            wmx = idx[i] * 7 % 13;
        wout[perm[i]] = v[perm[i]] * 2;
        wflag[perm[i]] = v[i] > 0;
    }
    for (int m = 0; m < NMODES; m++) {
        kern_context *ctx = ctx_mode(MODES[m], 0);
        kern_kernel *k = kernel(ctx, HIST, "hist");
        float zf[N] = {0}, h[B], s, out[N];
        int32_t zi[N] = {0}, cnt[B], mx = -1;
        uint8_t flag[N];
        kern_buffer *bi = buf(ctx, KERN_I32, N, idx), *bv = buf(ctx, KERN_F32, N, v),
                    *bh = buf(ctx, KERN_F32, B, zf), *bc = buf(ctx, KERN_I32, B, zi),
                    *bs = buf(ctx, KERN_F32, 1, zf), *bm = buf(ctx, KERN_I32, 1, &mx),
                    *bp = buf(ctx, KERN_I32, N, perm), *bo = buf(ctx, KERN_F32, N, zf),
                    *bf = buf(ctx, KERN_BOOL, N, zi);
        kern_arg a[9] = {kern_arg_buffer(bi), kern_arg_buffer(bv), kern_arg_buffer(bh),
                         kern_arg_buffer(bc), kern_arg_buffer(bs), kern_arg_buffer(bm),
                         kern_arg_buffer(bp), kern_arg_buffer(bo), kern_arg_buffer(bf)};
        launch(ctx, k, a, 9);
        get(bh, h, sizeof h);
        get(bc, cnt, sizeof cnt);
        get(bs, &s, sizeof s);
        get(bm, &mx, sizeof mx);
        get(bo, out, sizeof out);
        get(bf, flag, sizeof flag);
        for (int q = 0; q < B; q++) /* float sums in another order (threads race) */
            cr_expect(fabs((double)h[q] - wh[q]) <= 1e-6 * habs[q],
                      "KERN_SIMD=%s bin %d: %.9g, want %.9g", MODES[m], q, (double)h[q],
                      (double)wh[q]);
        /* float sums in another order: within 1e-6 of the sum of magnitudes */
        cr_expect(fabs((double)s - ws) <= 1e-6 * wabs, "KERN_SIMD=%s sum: %.9g, want %.9g",
                  MODES[m], (double)s, (double)ws);
        for (int b = 0; b < B; b++)
            cr_expect_eq(cnt[b], wc[b], "KERN_SIMD=%s cnt[%d]: %d, want %d", MODES[m], b, cnt[b],
                         wc[b]);
        cr_expect_eq(mx, wmx, "KERN_SIMD=%s max: %d, want %d", MODES[m], mx, wmx);
        for (int i = 0; i < N; i++) {
            cr_expect_eq(out[i], wout[i], "KERN_SIMD=%s out[%d]", MODES[m], i);
            cr_expect_eq(flag[i], wflag[i], "KERN_SIMD=%s flag[%d]", MODES[m], i);
        }
        kern_context_release(ctx);
    }
}

/* ---- adstack overflow in one lane ---------------------------------------------------- */

static const char *SPIN = "kernel spin(x0: f32[], n: i32[], out: f32[]) {\n"
                          "    for i in 0..len(x0) {\n"
                          "        var x = x0[i];\n"
                          "        var k = 0;\n"
                          "        while k < n[i] { x = sin(x) + x; k += 1; }\n"
                          "        out[i] = x;\n"
                          "    }\n"
                          "}\n";

Test(simd, adstack_overflow_in_one_lane_is_reported_like_the_scalar_path) {
    enum { N = 37 };
    float x0[N], zeros[N] = {0}, ones[N];
    int32_t n[N];
    char msg[NMODES][1024];
    for (int i = 0; i < N; i++) {
        x0[i] = (float)urand();
        n[i] = i % 7;
        ones[i] = 1;
    }
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            n[19] = 40; /* past the capacity of 16 in one lane only */
        float g[NMODES][N];
        for (int m = 0; m < NMODES; m++) {
            kern_context *ctx = ctx_mode(MODES[m], 16);
            kern_kernel *kg = kernel(ctx, SPIN, "spin.grad");
            kern_buffer *bxg = buf(ctx, KERN_F32, N, zeros);
            kern_arg ag[5] = {kern_arg_buffer(buf(ctx, KERN_F32, N, x0)),
                              kern_arg_buffer(buf(ctx, KERN_I32, N, n)),
                              kern_arg_buffer(buf(ctx, KERN_F32, N, zeros)), kern_arg_buffer(bxg),
                              kern_arg_buffer(buf(ctx, KERN_F32, N, ones))};
            kern_status st = kern_launch(kg, ag, 5);
            if (st == KERN_OK)
                st = kern_sync(ctx);
            if (pass == 0) {
                cr_assert_eq(st, KERN_OK, "KERN_SIMD=%s: %s", MODES[m],
                             kern_context_last_error(ctx));
                get(bxg, g[m], sizeof g[m]);
                if (m > 0)
                    expect_near(g[m], g[0], N, 1e-5, "x0.grad against the scalar path", MODES[m]);
            } else {
                cr_assert_neq(st, KERN_OK, "KERN_SIMD=%s: the overflow is an error", MODES[m]);
                snprintf(msg[m], sizeof msg[m], "%s", kern_context_last_error(ctx));
                cr_expect(strstr(msg[m], "simd.kern:5:9"), "KERN_SIMD=%s: names the loop: %s",
                          MODES[m], msg[m]);
                cr_expect(strstr(msg[m], "40"), "KERN_SIMD=%s: says the depth: %s", MODES[m],
                          msg[m]);
                if (m > 0)
                    cr_expect_str_eq(msg[m], msg[0], "KERN_SIMD=%s", MODES[m]);
            }
            kern_context_release(ctx);
        }
    }
}

/* ---- the choice is visible in --emit=llvm -------------------------------------------- */

static char *llvm_text_sorted(const char *src, int simd, bool trip_sort) {
    kc_ctx *c = kc_ctx_new();
    c->opts.simd = simd;
    c->opts.no_trip_sort = !trip_sort;
    ir_module *m = kc_compile_source(c, "t.kern", src, strlen(src));
    cr_assert(m);
    char err[512];
    char *text = llvm_emit_text(m, &c->opts, err, sizeof err);
    cr_assert(text, "%s", err);
    ir_module_free(m);
    kc_ctx_free(c);
    return text;
}

static char *llvm_text(const char *src, int simd) { return llvm_text_sorted(src, simd, true); }

Test(simd, the_choice_per_task_shows_in_the_llvm_text) {
    const char *src = "kernel two(a: f32[], b: f32[,], s: f32[]) {\n"
                      "    for i in 0..len(a) { a[i] = sin(a[i]); }\n"
                      "    for i in 0..shape(b, 0), j in 0..shape(b, 1) { b[i, j] = 1.0; }\n"
                      "    s[0] = 2.0;\n"
                      "}\n";
    char *t = llvm_text(src, 4);
    cr_expect(strstr(t, "\"kern-simd\"=\"4 lanes\""), "%s", t);
    cr_expect(strstr(t, "\"kern-simd\"=\"scalar: a serial task\""), "%s", t);
    cr_expect(strstr(t, "<4 x float>"), "vector code");
    free(t);
    /* a loop over each item's own elements with no vector math stays scalar */
    t = llvm_text("kernel chunks(x: f32[], s: f32[], c: i32) {\n"
                  "    for k in 0..len(x) / c {\n"
                  "        var a = 0.0;\n"
                  "        for i in k * c..(k + 1) * c { a += x[i] * x[i]; }\n"
                  "        s[k] = a;\n"
                  "    }\n"
                  "}\n",
                  8);
    cr_expect(strstr(t, "\"kern-simd\"=\"scalar: a loop over each item's own elements"), "%s", t);
    free(t);
    /* a border copy (strided, no math) stays scalar, and its loop is not vectorized by
     * LLVM either: no vector type in the module, the loop marked */
    t = llvm_text(
        "kernel border(src: f32[,], dst: f32[,]) {\n"
        "    let m = shape(src, 1);\n"
        "    for i in 0..shape(src, 0) { dst[i, 0] = src[i, 0]; dst[i, m - 1] = src[i, m - 1]; }\n"
        "}\n",
        8);
    cr_expect(strstr(t, "\"kern-simd\"=\"scalar: no contiguous access and no vector math"), "%s",
              t);
    cr_expect(strstr(t, "!\"llvm.loop.vectorize.enable\", i1 false"), "%s", t);
    cr_expect(!strstr(t, " x float>"), "%s", t);
    free(t);
    t = llvm_text(src, -1);
    cr_expect(strstr(t, "\"kern-simd\"=\"scalar: SIMD is off"), "%s", t);
    cr_expect(!strstr(t, "\"kern-simd\"=\"4 lanes\""));
    free(t);
}

/* The lanes the automatic choice gives kernel k's first task (its "kern-simd" attribute). */
static int auto_lanes(const char *src) {
    char *t = llvm_text(src, 0);
    const char *a = strstr(t, "\"kern-simd\"=\"");
    int lanes = a ? atoi(a + strlen("\"kern-simd\"=\"")) : -1;
    cr_expect(a, "%s", t);
    free(t);
    return lanes;
}

/* A loop is a serial chain per work item: with vector math in it, four vectors hide the
 * math's latency, whether the lanes run it alike (len(w)) or under a mask (count[i]); a
 * masked loop without math gets one vector, a uniform one two. */
Test(simd, loops_with_math_get_four_vectors_masked_or_not) {
    int uniform_math = auto_lanes("kernel k(x: f32[], w: f32[]) {\n"
                                  "  for i in 0..len(x) { var v = x[i];\n"
                                  "    for t in 0..len(w) { v = sin(v) * w[t]; }\n"
                                  "    x[i] = v; } }\n");
    int masked_math = auto_lanes("kernel k(x: f32[], w: f32[], n: i32[]) {\n"
                                 "  for i in 0..len(x) { var v = x[i];\n"
                                 "    for t in 0..n[i] { v = sin(v) * w[t]; }\n"
                                 "    x[i] = v; } }\n");
    int uniform_plain = auto_lanes("kernel k(x: f32[], w: f32[]) {\n"
                                   "  for i in 0..len(x) { var v = x[i];\n"
                                   "    for t in 0..len(w) { v = v * w[t] + 1.0; }\n"
                                   "    x[i] = v; } }\n");
    int masked_plain = auto_lanes("kernel k(x: f32[], w: f32[], n: i32[]) {\n"
                                  "  for i in 0..len(x) { var v = x[i];\n"
                                  "    for t in 0..n[i] { v = v * w[t] + 1.0; }\n"
                                  "    x[i] = v; } }\n");
    cr_assert_gt(masked_plain, 1, "masked loop without math: %d lanes", masked_plain);
    cr_expect_eq(masked_math, uniform_math);
    cr_expect_eq(masked_math, 4 * masked_plain, "masked: %d with math, %d without", masked_math,
                 masked_plain);
    cr_expect_eq(uniform_plain, 2 * masked_plain, "uniform without math: %d", uniform_plain);
}

/* ---- two-dimensional tasks: the innermost dimension across the lanes ----------------- */

static const char *STENCIL = "kernel heat(u: f32[,,], t: i32) {\n"
                             "    let n = shape(u, 1);\n"
                             "    let m = shape(u, 2);\n"
                             "    for i in 0..n, j in 0..m {\n"
                             "        let c = u[t - 1, i, j];\n"
                             "        if i == 0 || j == 0 || i == n - 1 || j == m - 1 {\n"
                             "            u[t, i, j] = c;\n"
                             "        } else {\n"
                             "            let s = u[t - 1, i - 1, j] + u[t - 1, i + 1, j] + u[t - "
                             "1, i, j - 1] + u[t - 1, i, j + 1];\n"
                             "            u[t, i, j] = c + 0.2 * (s - 4.0 * c);\n"
                             "        }\n"
                             "    }\n"
                             "}\n";

Test(simd, two_dimensional_stencil_and_its_gradient) {
    enum { T = 4, R = 13, C = 21 }; /* 21 columns: full vectors and a masked one per row */
    static float u0[T * R * C], want[T * R * C], g0[T * R * C];
    for (int i = 0; i < T * R * C; i++)
        u0[i] = (float)(urand() * 2 - 1);
    memcpy(want, u0, sizeof want);
    for (int t = 1; t < T; t++)
        for (int i = 0; i < R; i++)
            for (int j = 0; j < C; j++) {
                const float *p = want + (t - 1) * R * C;
                float c = p[i * C + j], v = c;
                if (!(i == 0 || j == 0 || i == R - 1 || j == C - 1)) {
                    float s = p[(i - 1) * C + j] + p[(i + 1) * C + j];
                    s = s + p[i * C + j - 1];
                    s = s + p[i * C + j + 1];
                    float d = 4.0f * c;
                    float e = 0.2f * (s - d);
                    v = c + e;
                }
                want[t * R * C + i * C + j] = v;
            }
    for (int m = 0; m < NMODES; m++) {
        kern_context *ctx = ctx_mode(MODES[m], 0);
        kern_kernel *k = kernel(ctx, STENCIL, "heat"), *kg = kernel(ctx, STENCIL, "heat.grad");
        kern_buffer *bu;
        int64_t shape[3] = {T, R, C};
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 3, shape, u0, &bu), KERN_OK);
        for (int t = 1; t < T; t++) {
            kern_arg a[2] = {kern_arg_buffer(bu), kern_arg_i32(t)};
            launch(ctx, k, a, 2);
        }
        static float got[T * R * C], g[T * R * C], seed[T * R * C];
        get(bu, got, sizeof got);
        expect_near(got, want, T * R * C, 1e-6, "heat", MODES[m]);
        /* the gradient of sum(u[T-1]) through the sweeps, newest first */
        memset(seed, 0, sizeof seed);
        for (int i = 0; i < R * C; i++)
            seed[(T - 1) * R * C + i] = 1;
        kern_buffer *bg;
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 3, shape, seed, &bg), KERN_OK);
        for (int t = T - 1; t >= 1; t--) {
            kern_arg a[3] = {kern_arg_buffer(bu), kern_arg_i32(t), kern_arg_buffer(bg)};
            launch(ctx, kg, a, 3);
        }
        get(bg, g, sizeof g);
        if (m == 0)
            memcpy(g0, g, sizeof g);
        else
            expect_near(g, g0, T * R * C, 1e-5, "u.grad against the scalar path", MODES[m]);
        kern_context_release(ctx);
    }
    /* the scalar path's gradient against a C adjoint of the same sweeps */
    static float a[2][R * C];
    for (int i = 0; i < R * C; i++)
        a[0][i] = 1;
    for (int t = T - 1; t >= 1; t--) {
        float *in = a[(T - 1 - t) % 2], *out = a[(T - t) % 2];
        memset(out, 0, sizeof a[0]);
        for (int i = 0; i < R; i++)
            for (int j = 0; j < C; j++) {
                float gv = in[i * C + j];
                if (i == 0 || j == 0 || i == R - 1 || j == C - 1) {
                    out[i * C + j] += gv;
                } else {
                    out[i * C + j] += gv * (1.0f - 0.8f);
                    out[(i - 1) * C + j] += 0.2f * gv;
                    out[(i + 1) * C + j] += 0.2f * gv;
                    out[i * C + j - 1] += 0.2f * gv;
                    out[i * C + j + 1] += 0.2f * gv;
                }
            }
    }
    expect_near(g0, a[(T - 1) % 2], R * C, 1e-5, "u.grad[0] against C", "off");
}

/* ---- ifs on varying conditions whose regions run without a branch ------------------- */

/* The first `if` is flat: both sides run straight, their loads at i - 1 and i + 1 masked
 * (the lanes at the ends are off there). The second holds a load at a uniform index far
 * out of bounds that no lane ever reaches (i < 0 never holds): it must keep its branch,
 * or the load happens and faults. */
static const char *FLAT = "kernel flat(a: f32[], out: f32[], far: i32) {\n"
                          "    let n = len(a);\n"
                          "    for i in 0..n {\n"
                          "        var y = 0.0;\n"
                          "        if i > 0 && i < n - 1 { y = a[i - 1] + a[i + 1]; }\n"
                          "        else { y = a[i] * 2.0; }\n"
                          "        if i < 0 { y = a[far]; }\n"
                          "        out[i] = y;\n"
                          "    }\n"
                          "}\n";

Test(simd, flat_ifs_mask_their_loads_and_guarded_uniform_loads_stay_guarded) {
    enum { N = 77 };
    static float a[N], got[N], want[N], zeros[N];
    for (int i = 0; i < N; i++)
        a[i] = (float)(urand() * 4 - 2);
    for (int i = 0; i < N; i++)
        want[i] = i > 0 && i < N - 1 ? a[i - 1] + a[i + 1] : a[i] * 2.0f;
    for (int m = 0; m < NMODES; m++) {
        kern_context *ctx = ctx_mode(MODES[m], 0);
        kern_kernel *k = kernel(ctx, FLAT, "flat");
        kern_buffer *ba = buf(ctx, KERN_F32, N, a), *bo = buf(ctx, KERN_F32, N, zeros);
        kern_arg args[3] = {kern_arg_buffer(ba), kern_arg_buffer(bo),
                            kern_arg_i32(1 << 30)}; /* 4 GiB past the array */
        launch(ctx, k, args, 3);
        get(bo, got, sizeof got);
        for (int i = 0; i < N; i++)
            cr_expect_eq(got[i], want[i], "KERN_SIMD=%s, out[%d]: got %.9g, want %.9g", MODES[m], i,
                         (double)got[i], (double)want[i]);
        kern_context_release(ctx);
    }
}

/* ---- work items sorted by trip count --------------------------------------------------- */

/* The trip count min(count[i], len(w)) computed ahead (a load, dim, min) for each window of
 * items, which then run sorted by it: the results must be each item's own, whatever lane
 * it ran in. */
static const char *TRIPS = "kernel trips(x0: f32[], w: f32[], count: i32[], out: f32[]) {\n"
                           "    for i in 0..len(x0) {\n"
                           "        var x = x0[i];\n"
                           "        for t in 0..min(count[i], len(w)) {\n"
                           "            x = 0.5 * sin(x) * w[t] + 0.4 * x + 0.1;\n"
                           "        }\n"
                           "        out[i] = x + f32(i);\n"
                           "    }\n"
                           "}\n";

Test(simd, items_sorted_by_trip_count_get_their_own_results_and_gradients) {
    /* windows of 16 vectors (256 items at 16 lanes, 1024 at 64) and a partial one */
    enum { N = 2 * 1024 + 333, T = 64 };
    static float x0[N], w[T], want[N], wx0[N], ww[T], got[N], gx[N], gw[T];
    static int32_t count[N];
    for (int i = 0; i < N; i++) {
        x0[i] = (float)(urand() * 2 - 1);
        double u = urand();
        /* one item in 16 long, negative counts (no step), counts past len(w) */
        count[i] = u < 1.0 / 16 ? T : u < 0.1 ? -3 : u < 0.15 ? T + 9 : (int32_t)(u * 8);
    }
    for (int t = 0; t < T; t++)
        w[t] = (float)(0.5 + urand());
    static double wwd[T];
    for (int i = 0; i < N; i++) { /* C: forward, and the adjoint of L = sum(out) */
        double g;
        want[i] = trips_item(x0[i], count[i], w, T, wwd, &g) + (float)i;
        wx0[i] = (float)g;
    }
    for (int t = 0; t < T; t++)
        ww[t] = (float)wwd[t];
    for (int m = 0; m < NMODES; m++) {
        kern_context *ctx = ctx_mode(MODES[m], 0);
        kern_kernel *k = kernel(ctx, TRIPS, "trips"), *kg = kernel(ctx, TRIPS, "trips.grad");
        static float zeros[N], ones[N];
        for (int i = 0; i < N; i++)
            ones[i] = 1;
        kern_buffer *bo = buf(ctx, KERN_F32, N, zeros), *bxg = buf(ctx, KERN_F32, N, zeros),
                    *bwg = buf(ctx, KERN_F32, T, zeros);
        kern_arg a[7] = {kern_arg_buffer(buf(ctx, KERN_F32, N, x0)),
                         kern_arg_buffer(buf(ctx, KERN_F32, T, w)),
                         kern_arg_buffer(buf(ctx, KERN_I32, N, count)),
                         kern_arg_buffer(bo),
                         kern_arg_buffer(bxg),
                         kern_arg_buffer(bwg),
                         kern_arg_buffer(buf(ctx, KERN_F32, N, ones))};
        launch(ctx, k, a, 4);
        get(bo, got, sizeof got);
        expect_near(got, want, N, 2e-5, "trips out", MODES[m]);
        launch(ctx, kg, a, 7);
        get(bxg, gx, sizeof gx);
        get(bwg, gw, sizeof gw);
        expect_near(gx, wx0, N, 1e-4, "x0.grad against C", MODES[m]);
        expect_near(gw, ww, T, 1e-4, "w.grad against C", MODES[m]);
        kern_context_release(ctx);
    }
}

/* A count array shorter than x0: computing the trip counts ahead reads nothing out of
 * bounds and reports nothing; the item's own load reports, as on the scalar path. */
Test(simd, sorted_items_report_an_out_of_bounds_count_like_the_scalar_path) {
    enum { N = 300, T = 8 };
    float x0[N] = {0}, w[T] = {0};
    int32_t count[N - 1];
    for (int i = 0; i < N - 1; i++)
        count[i] = i % 5;
    char msg[NMODES][1024];
    for (int m = 0; m < NMODES; m++) {
        kern_context *ctx = ctx_mode(MODES[m], 0);
        kern_arg a[4] = {kern_arg_buffer(buf(ctx, KERN_F32, N, x0)),
                         kern_arg_buffer(buf(ctx, KERN_F32, T, w)),
                         kern_arg_buffer(buf(ctx, KERN_I32, N - 1, count)),
                         kern_arg_buffer(buf(ctx, KERN_F32, N, NULL))};
        kern_status st = kern_launch(kernel(ctx, TRIPS, "trips"), a, 4);
        if (st == KERN_OK)
            st = kern_sync(ctx);
        cr_assert_neq(st, KERN_OK, "KERN_SIMD=%s: count[%d] is out of bounds", MODES[m], N - 1);
        snprintf(msg[m], sizeof msg[m], "%s", kern_context_last_error(ctx));
        cr_expect(strstr(msg[m], "simd.kern:4:"), "KERN_SIMD=%s: %s", MODES[m], msg[m]);
        cr_expect(strstr(msg[m], "299"), "KERN_SIMD=%s: names the index: %s", MODES[m], msg[m]);
        if (m > 0)
            cr_expect_str_eq(msg[m], msg[0], "KERN_SIMD=%s", MODES[m]);
        kern_context_release(ctx);
    }
}

/* Which tasks sort: a loop whose trip count differs between lanes, computes vector math
 * and has bounds made of integer ops on loads and indices. Not a uniform loop, not one
 * without math, not a bound computed from floats, not a task whose lanes store a varying
 * value at one element (the last lane's stays). */
Test(simd, tasks_sort_their_items_only_where_the_trip_counts_can_be_computed_ahead) {
    static const struct {
        const char *src;
        bool sorts;
    } cases[] = {
        {"kernel k(x: f32[], w: f32[], n: i32[,]) {\n"
         "  for i in 0..len(x) { var v = x[i];\n"
         "    for t in n[0, i] + 1..n[1, i] * 2 { v = sin(v) * w[t]; }\n"
         "    x[i] = v; } }\n",
         true},
        {"kernel k(x: f32[], w: f32[]) {\n"
         "  for i in 0..len(x) { var v = x[i];\n"
         "    for t in 0..len(w) { v = sin(v) * w[t]; }\n"
         "    x[i] = v; } }\n",
         false},
        {"kernel k(x: f32[], w: f32[], n: i32[]) {\n"
         "  for i in 0..len(x) { var v = x[i];\n"
         "    for t in 0..n[i] { v = v * w[t] + 1.0; }\n"
         "    x[i] = v; } }\n",
         false},
        {"kernel k(x: f32[], w: f32[]) {\n"
         "  for i in 0..len(x) { var v = x[i];\n"
         "    for t in 0..i32(x[i] * 4.0) { v = sin(v) * w[t]; }\n"
         "    x[i] = v; } }\n",
         false},
        {"kernel k(x: f32[], w: f32[], n: i32[], s: f32[]) {\n"
         "  for i in 0..len(x) { var v = x[i];\n"
         "    for t in 0..n[i] { v = sin(v) * w[t]; }\n"
         "    s[0] = v; } }\n",
         false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char *t = llvm_text(cases[c].src, 0);
        const char *a = strstr(t, "\"kern-simd\"");
        cr_expect_eq(strstr(t, "%sort.order") != NULL, cases[c].sorts, "case %zu (%.40s):\n%s", c,
                     a ? a : "no SIMD", cases[c].src);
        free(t);
        t = llvm_text_sorted(cases[c].src, 0, false); /* KERN_NO_TRIP_SORT */
        cr_expect(!strstr(t, "%sort.order"), "case %zu, no_trip_sort", c);
        free(t);
    }
}
