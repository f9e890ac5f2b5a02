/* test_e2e.c - end to end: the examples compiled by the JIT (kern_module_from_source) or
 * ahead of time (kernc build + kern_module_load_file) and run through the C API, and
 * `kernc run` on .npy files; every result is compared with a plain C loop in this file. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../include/kern.h"
#include "../runtime/npy.h"
#include "test_backend.h"
#include "trips_ref.h"

#ifndef KERNC_PATH
#define KERNC_PATH "kernc"
#endif

static uint64_t rng = 88172645463325252ull;
static float frand(float lo, float hi) { /* xorshift64, deterministic */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 11) * (1.0 / 9007199254740992.0));
}

static kern_context *ctx_new(bool debug) {
    kern_context_options o = kern_context_options_default();
    o.debug = debug;
    o.backend = kern_test_backend();
    kern_context *ctx;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    return ctx;
}

static kern_module *jit_example(kern_context *ctx, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/examples/%s", KERN_SOURCE_ROOT, name);
    kern_module *m;
    kern_status st = kern_module_from_file_source(ctx, path, &m);
    cr_assert_eq(st, KERN_OK, "%s: %s", name, kern_context_last_error(ctx));
    return m;
}

static kern_kernel *find(kern_module *m, const char *name) {
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, name, &k), KERN_OK, "kernel %s", name);
    return k;
}

static kern_buffer *buf_f32(kern_context *ctx, int rank, const int64_t *shape, const float *d) {
    kern_buffer *b;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, rank, shape, d, &b), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    return b;
}

static void read_f32(kern_buffer *b, float *out, size_t n) {
    cr_assert_eq(kern_buffer_read(b, out, n * sizeof(float)), KERN_OK);
}

static void expect_close(const float *got, const float *want, size_t n, float rtol,
                         const char *what) {
    for (size_t i = 0; i < n; i++) {
        float tol = rtol * fmaxf(1.0f, fabsf(want[i]));
        cr_assert(fabsf(got[i] - want[i]) <= tol, "%s[%zu]: got %.9g, want %.9g", what, i,
                  (double)got[i], (double)want[i]);
    }
}

Test(e2e, saxpy_jit) {
    kern_context *ctx = ctx_new(false);
    kern_module *m = jit_example(ctx, "saxpy.kern");
    enum { N = 1003 };
    float x[N], y[N], want[N], got[N];
    for (int i = 0; i < N; i++) {
        x[i] = frand(-2, 2);
        y[i] = frand(-2, 2);
    }
    const float a = 1.75f;
    for (int i = 0; i < N; i++)
        want[i] = y[i] + a * x[i];
    int64_t shape[1] = {N};
    kern_buffer *bx = buf_f32(ctx, 1, shape, x), *by = buf_f32(ctx, 1, shape, y);
    kern_arg args[3] = {kern_arg_f32(a), kern_arg_buffer(bx), kern_arg_buffer(by)};
    cr_assert_eq(kern_launch(find(m, "saxpy"), args, 3), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    cr_assert_eq(kern_sync(ctx), KERN_OK);
    read_f32(by, got, N);
    expect_close(got, want, N, 1e-6f, "y");
    kern_context_release(ctx);
}

Test(e2e, jacobi_2d) {
    kern_context *ctx = ctx_new(false);
    kern_module *m = jit_example(ctx, "stencil2d.kern");
    enum { R = 37, C = 53 };
    static float src[R * C], want[R * C], got[R * C];
    for (int i = 0; i < R * C; i++)
        src[i] = frand(0, 10);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            want[i * C + j] = (i == 0 || j == 0 || i == R - 1 || j == C - 1)
                                  ? src[i * C + j]
                                  : 0.25f * (src[(i - 1) * C + j] + src[(i + 1) * C + j] +
                                             src[i * C + j - 1] + src[i * C + j + 1]);
    int64_t shape[2] = {R, C};
    kern_buffer *bs = buf_f32(ctx, 2, shape, src), *bd = buf_f32(ctx, 2, shape, NULL);
    kern_arg args[2] = {kern_arg_buffer(bs), kern_arg_buffer(bd)};
    cr_assert_eq(kern_launch(find(m, "jacobi"), args, 2), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    read_f32(bd, got, R * C);
    expect_close(got, want, R * C, 1e-6f, "dst");
    kern_context_release(ctx);
}

Test(e2e, mse_atomic_reduction) {
    kern_context *ctx = ctx_new(false);
    kern_module *m = jit_example(ctx, "loss.kern");
    enum { N = 4099 };
    static float p[N], t[N];
    double want = 0;
    for (int i = 0; i < N; i++) {
        p[i] = frand(-1, 1);
        t[i] = frand(-1, 1);
        want += ((double)p[i] - t[i]) * ((double)p[i] - t[i]) / N;
    }
    int64_t shape[1] = {N}, one[1] = {1};
    kern_buffer *bp = buf_f32(ctx, 1, shape, p), *bt = buf_f32(ctx, 1, shape, t),
                *bl = buf_f32(ctx, 1, one, NULL);
    kern_arg args[3] = {kern_arg_buffer(bp), kern_arg_buffer(bt), kern_arg_buffer(bl)};
    cr_assert_eq(kern_launch(find(m, "mse"), args, 3), KERN_OK, "%s", kern_context_last_error(ctx));
    float got;
    read_f32(bl, &got, 1);
    /* f32 atomic adds in any order vs an f64 sum: a loose but meaningful bound */
    cr_assert(fabs(got - want) <= 1e-4 * fabs(want), "loss %.9g, want %.9g", (double)got, want);
    kern_context_release(ctx);
}

/* The reference of examples/bounce.kern, in the same float operations. */
static void bounce_ref(int n, const float *y0, const float *v0, float *y1, float *v1, int32_t *hits,
                       float dt, int steps, float vmax) {
    const float G = 9.81f, REST = 0.8f;
    for (int b = 0; b < n; b++) {
        float y = y0[b], vy = v0[b];
        int count = 0;
        for (int s = 0; s < steps; s++) {
            float v = vy - G * dt;
            float lo = -vmax;
            v = v < lo ? lo : v; /* clamp = min(max(v, lo), hi) */
            vy = vmax < v ? vmax : v;
            y += vy * dt;
            if (y < 0.0f) {
                y = -y;
                vy = -vy * REST;
                count++;
            }
        }
        int k = 0;
        while (fabsf(vy) > 1e-3f) {
            vy *= 0.5f;
            k++;
            if (k >= 64)
                break;
        }
        y1[b] = y;
        v1[b] = vy;
        hits[b] = count;
    }
}

Test(e2e, bounce_per_thread_loops) {
    kern_context *ctx = ctx_new(false);
    kern_module *m = jit_example(ctx, "bounce.kern");
    enum { N = 257 };
    float y0[N], v0[N], wy[N], wv[N], gy[N], gv[N];
    int32_t wh[N], gh[N];
    for (int i = 0; i < N; i++) {
        y0[i] = frand(0, 5);
        v0[i] = frand(-3, 3);
    }
    const float dt = 0.01f, vmax = 8.0f;
    const int steps = 500;
    bounce_ref(N, y0, v0, wy, wv, wh, dt, steps, vmax);
    int64_t shape[1] = {N};
    kern_buffer *by0 = buf_f32(ctx, 1, shape, y0), *bv0 = buf_f32(ctx, 1, shape, v0),
                *by1 = buf_f32(ctx, 1, shape, NULL), *bv1 = buf_f32(ctx, 1, shape, NULL), *bh;
    cr_assert_eq(kern_buffer_create(ctx, KERN_I32, 1, shape, NULL, &bh), KERN_OK);
    kern_arg args[8] = {kern_arg_buffer(by0), kern_arg_buffer(bv0), kern_arg_buffer(by1),
                        kern_arg_buffer(bv1), kern_arg_f32(dt),     kern_arg_i32(steps),
                        kern_arg_f32(vmax),   kern_arg_buffer(bh)};
    cr_assert_eq(kern_launch(find(m, "bounce"), args, 8), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    read_f32(by1, gy, N);
    read_f32(bv1, gv, N);
    cr_assert_eq(kern_buffer_read(bh, gh, sizeof gh), KERN_OK);
    expect_close(gy, wy, N, 1e-5f, "y1");
    expect_close(gv, wv, N, 1e-5f, "v1");
    for (int i = 0; i < N; i++)
        cr_assert_eq(gh[i], wh[i], "hits[%d]: %d vs %d", i, gh[i], wh[i]);
    kern_context_release(ctx);
}

Test(e2e, particles_time_indexed) {
    kern_context *ctx = ctx_new(true); /* debug mode: bounds checked, none may fire */
    kern_module *m = jit_example(ctx, "particles.kern");
    enum { T = 20, P = 33, D = 3 };
    static float x[T * P * D], v[T * P * D], wx[T * P * D], wv[T * P * D];
    for (int i = 0; i < P * D; i++) {
        x[i] = wx[i] = frand(-1, 1);
        v[i] = wv[i] = frand(-1, 1);
    }
    const float k = 2.0f, dt = 0.05f;
    for (int t = 1; t < T; t++)
        for (int i = 0; i < P * D; i++) {
            float a = -k * wx[(t - 1) * P * D + i];
            float vn = wv[(t - 1) * P * D + i] + dt * a;
            wv[t * P * D + i] = vn;
            wx[t * P * D + i] = wx[(t - 1) * P * D + i] + dt * vn;
        }
    int64_t shape[3] = {T, P, D};
    kern_buffer *bx = buf_f32(ctx, 3, shape, x), *bv = buf_f32(ctx, 3, shape, v);
    kern_kernel *step = find(m, "step");
    for (int t = 1; t < T; t++) {
        kern_arg args[5] = {kern_arg_buffer(bx), kern_arg_buffer(bv), kern_arg_f32(k),
                            kern_arg_f32(dt), kern_arg_i32(t)};
        cr_assert_eq(kern_launch(step, args, 5), KERN_OK, "t=%d: %s", t,
                     kern_context_last_error(ctx));
    }
    static float gx[T * P * D];
    read_f32(bx, gx, T * P * D);
    expect_close(gx, wx, T * P * D, 1e-5f, "x");
    kern_context_release(ctx);
}

Test(e2e, debug_mode_reports_out_of_bounds) {
    kern_context *ctx = ctx_new(true);
    const char *src = "kernel shift(x: f32[], y: f32[]) {\n"
                      "    for i in 0..len(x) {\n"
                      "        y[i] = x[i + 1];\n"
                      "    }\n"
                      "}\n";
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "shift.kern", &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    int64_t shape[1] = {8};
    kern_buffer *bx = buf_f32(ctx, 1, shape, NULL), *by = buf_f32(ctx, 1, shape, NULL);
    kern_arg args[2] = {kern_arg_buffer(bx), kern_arg_buffer(by)};
    kern_status st = kern_launch(find(m, "shift"), args, 2);
    if (st == KERN_OK)
        st = kern_sync(ctx);
    cr_assert_eq(st, KERN_ERR_DEVICE);
    const char *msg = kern_context_last_error(ctx);
    cr_expect(strstr(msg, "shift") != NULL, "%s", msg);
    cr_expect(strstr(msg, "shift.kern:3:") != NULL, "message names the line: %s", msg);
    cr_expect(strstr(msg, "8") != NULL, "message names the index/extent: %s", msg);
    kern_context_release(ctx);
}

Test(e2e, compile_errors_come_back_as_diagnostics) {
    kern_context *ctx = ctx_new(false);
    const char *src = "kernel k(x: f32[]) {\n    x[0] = nope;\n}\n";
    kern_module *m = NULL;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "bad.kern", &m), KERN_ERR_COMPILE);
    cr_assert_null(m);
    const char *msg = kern_context_last_error(ctx);
    cr_expect(strstr(msg, "bad.kern:2:12: error:") != NULL, "%s", msg);
    kern_context_release(ctx);
}

static int sh(const char *cmd) {
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

Test(e2e, aot_build_and_load) {
    char dir[] = "/tmp/kern-e2e-XXXXXX";
    cr_assert(mkdtemp(dir));
    char so[128], cmd[1024];
    snprintf(so, sizeof so, "%s/saxpy.so", dir);
    /* a module for the device the suite runs on (KERN_TEST_BACKEND) */
    snprintf(cmd, sizeof cmd, "'%s' build '%s/examples/saxpy.kern' --target=%s -o '%s'", KERNC_PATH,
             KERN_SOURCE_ROOT, kern_backend_name(kern_test_backend()), so);
    cr_assert_eq(sh(cmd), 0, "%s", cmd);
    kern_context *ctx = ctx_new(false);
    kern_module *m;
    cr_assert_eq(kern_module_load_file(ctx, so, &m), KERN_OK, "%s", kern_context_last_error(ctx));
    enum { N = 100 };
    float x[N], y[N], want[N], got[N];
    for (int i = 0; i < N; i++) {
        x[i] = frand(-1, 1);
        y[i] = frand(-1, 1);
        want[i] = y[i] + 3.0f * x[i];
    }
    int64_t shape[1] = {N};
    kern_buffer *bx = buf_f32(ctx, 1, shape, x), *by = buf_f32(ctx, 1, shape, y);
    kern_arg args[3] = {kern_arg_f32(3.0f), kern_arg_buffer(bx), kern_arg_buffer(by)};
    cr_assert_eq(kern_launch(find(m, "saxpy"), args, 3), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    read_f32(by, got, N);
    expect_close(got, want, N, 1e-6f, "y");
    /* a wrong argument is checked against the AOT metadata too */
    kern_arg bad[3] = {kern_arg_f64(3.0), kern_arg_buffer(bx), kern_arg_buffer(by)};
    cr_assert_eq(kern_launch(find(m, "saxpy"), bad, 3), KERN_ERR_ARGUMENT);
    kern_context_release(ctx);
    unlink(so);
    rmdir(dir);
}

Test(e2e, kernc_run_with_npy_files) {
    char dir[] = "/tmp/kern-e2e-XXXXXX";
    cr_assert(mkdtemp(dir));
    enum { R = 9, C = 11 };
    float src[R * C], want[R * C];
    for (int i = 0; i < R * C; i++)
        src[i] = frand(-5, 5);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            want[i * C + j] = (i == 0 || j == 0 || i == R - 1 || j == C - 1)
                                  ? src[i * C + j]
                                  : 0.25f * (src[(i - 1) * C + j] + src[(i + 1) * C + j] +
                                             src[i * C + j - 1] + src[i * C + j + 1]);
    char in[128], out[128], cmd[1024], err[256];
    snprintf(in, sizeof in, "%s/in.npy", dir);
    snprintf(out, sizeof out, "%s/out.npy", dir);
    int64_t shape[2] = {R, C};
    cr_assert_eq(kern_npy_write(in, KERN_F32, 2, shape, src, err, sizeof err), KERN_OK, "%s", err);
    snprintf(cmd, sizeof cmd,
             "'%s' run '%s/examples/stencil2d.kern' jacobi src=%s dst=%s --save dst=%s", KERNC_PATH,
             KERN_SOURCE_ROOT, in, in, out);
    cr_assert_eq(sh(cmd), 0, "%s", cmd);
    kern_npy a;
    cr_assert_eq(kern_npy_read(out, &a, err, sizeof err), KERN_OK, "%s", err);
    cr_assert_eq(a.dtype, KERN_F32);
    cr_assert_eq(a.rank, 2);
    cr_assert_eq(a.shape[0], R);
    cr_assert_eq(a.shape[1], C);
    expect_close(a.data, want, R * C, 1e-6f, "dst");
    kern_npy_free(&a);
    /* a dtype mismatch is refused and nothing is written */
    unlink(out);
    snprintf(cmd, sizeof cmd,
             "'%s' run '%s/examples/saxpy.kern' saxpy a=1 x=%s y=%s --save y=%s 2>/dev/null",
             KERNC_PATH, KERN_SOURCE_ROOT, in, in, out);
    cr_assert_eq(sh(cmd), 1, "%s", cmd);
    cr_assert(access(out, F_OK) != 0, "no output may be written after a failed run");
    unlink(in);
    rmdir(dir);
}

Test(e2e, host_program_jit_and_aot) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' '%s/examples/saxpy.kern' >/dev/null", KERN_HOST_PATH,
             KERN_SOURCE_ROOT);
    cr_assert_eq(sh(cmd), 0, "%s", cmd);
    char dir[] = "/tmp/kern-host-XXXXXX";
    cr_assert(mkdtemp(dir));
    snprintf(cmd, sizeof cmd,
             "'%s' build '%s/examples/saxpy.kern' --target=cpu -o %s/m.so && '%s' --aot "
             "%s/m.so >/dev/null",
             KERNC_PATH, KERN_SOURCE_ROOT, dir, KERN_HOST_PATH, dir);
    cr_assert_eq(sh(cmd), 0, "%s", cmd);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    sh(cmd);
}

/* Interoperability with NumPy itself (Debian's python3-numpy, installed by
 * scripts/setup.sh): files kern writes load in np.load with the same values, and files
 * np.save writes load in kern's reader. */
Test(e2e, npy_files_interoperate_with_numpy) {
    char dir[] = "/tmp/kern-npy-XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[256], err[256], cmd[2048];
    int32_t vi[6] = {1, -2, 3, -4, 5, 2147483647};
    double vd[6] = {0.5, -1.25, 1e300, -0.0, 3.0, 1.0 / 3.0};
    int64_t shape[2] = {2, 3};
    snprintf(path, sizeof path, "%s/i.npy", dir);
    cr_assert_eq(kern_npy_write(path, KERN_I32, 2, shape, vi, err, sizeof err), KERN_OK);
    snprintf(path, sizeof path, "%s/d.npy", dir);
    cr_assert_eq(kern_npy_write(path, KERN_F64, 1, (int64_t[]){6}, vd, err, sizeof err), KERN_OK);
    snprintf(cmd, sizeof cmd,
             "cd %s && %s -c \""
             "import numpy as np\n"
             "i = np.load('i.npy'); d = np.load('d.npy')\n"
             "assert i.dtype == np.int32 and i.shape == (2, 3), (i.dtype, i.shape)\n"
             "assert i.tolist() == [[1, -2, 3], [-4, 5, 2147483647]], i\n"
             "assert d.dtype == np.float64 and d.tolist() == [0.5, -1.25, 1e300, -0.0, 3.0, "
             "1.0/3.0]\n"
             "np.save('b.npy', np.array([[True, False], [False, True]]))\n"
             "np.save('u.npy', np.arange(7, dtype=np.uint32) * 1000000000)\n"
             "np.save('f.npy', np.linspace(0, 1, 5, dtype=np.float32).reshape(5, 1, 1, 1))\n"
             "\"",
             dir, getenv("KERN_TEST_PYTHON") ? getenv("KERN_TEST_PYTHON") : "/usr/bin/python3");
    cr_assert_eq(sh(cmd), 0,
                 "numpy could not read kern's files (or is not installed: "
                 "scripts/setup.sh installs python3-numpy)");
    kern_npy a;
    snprintf(path, sizeof path, "%s/b.npy", dir);
    cr_assert_eq(kern_npy_read(path, &a, err, sizeof err), KERN_OK, "%s", err);
    cr_assert(a.dtype == KERN_BOOL && a.rank == 2 && a.shape[0] == 2 && a.shape[1] == 2);
    const unsigned char *b = a.data;
    cr_assert(b[0] == 1 && b[1] == 0 && b[2] == 0 && b[3] == 1);
    kern_npy_free(&a);
    snprintf(path, sizeof path, "%s/u.npy", dir);
    cr_assert_eq(kern_npy_read(path, &a, err, sizeof err), KERN_OK, "%s", err);
    cr_assert(a.dtype == KERN_U32 && a.rank == 1 && a.shape[0] == 7);
    for (int i = 0; i < 7; i++)
        cr_assert_eq(((uint32_t *)a.data)[i], (uint32_t)(i * 1000000000u));
    kern_npy_free(&a);
    snprintf(path, sizeof path, "%s/f.npy", dir);
    cr_assert_eq(kern_npy_read(path, &a, err, sizeof err), KERN_OK, "%s", err);
    cr_assert(a.dtype == KERN_F32 && a.rank == 4 && a.shape[0] == 5 && a.shape[3] == 1);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(((float *)a.data)[i], (float)i / 4.0f);
    kern_npy_free(&a);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    sh(cmd);
}

/* ---- work items sorted by trip count (passes/trip_sort.c) ------------------------------ */

/* Each item runs min(count[i], len(w)) steps; the backends run the items sorted by that
 * count (the CPU's SIMD windows, the GPUs' blocks), so an item may run in any lane or
 * thread: every result must still be its own. Counts: one item in 16 long, negative ones,
 * ones past len(w); several blocks, grid rounds and a partial block. */
static const char *TRIPS = "kernel trips(x0: f32[], w: f32[], count: i32[], out: f32[]) {\n"
                           "    for i in 0..len(x0) {\n"
                           "        var x = x0[i];\n"
                           "        for t in 0..min(count[i], len(w)) {\n"
                           "            x = 0.5 * sin(x) * w[t] + 0.4 * x + 0.1;\n"
                           "        }\n"
                           "        out[i] = x + f32(i % 7);\n"
                           "    }\n"
                           "}\n";

/* n items of TRIPS, forward and gradient, against trips_ref.h */
static void sorted_trips(int n) {
    enum { N = 20000 + 77, T = 48 };
    static float x0[N], w[T], want[N], wx0[N], got[N], gx[N], gw[T], ones[N];
    static double ww[T];
    static int32_t count[N];
    kern_assert(n <= N);
    memset(ww, 0, sizeof ww);
    for (int i = 0; i < n; i++) {
        x0[i] = frand(-1, 1);
        float u = frand(0, 1);
        count[i] = u < 1.0f / 16 ? T : u < 0.1f ? -3 : u < 0.15f ? T + 9 : (int32_t)(u * 6);
        ones[i] = 1;
    }
    for (int t = 0; t < T; t++)
        w[t] = frand(0.5f, 1.5f);
    for (int i = 0; i < n; i++) { /* C: forward, and the adjoint of L = sum(out) */
        double g;
        want[i] = trips_item(x0[i], count[i], w, T, ww, &g) + (float)(i % 7);
        wx0[i] = (float)g;
    }
    kern_context *ctx = ctx_new(false);
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, TRIPS, strlen(TRIPS), "trips.kern", &m), KERN_OK,
                 "%s", kern_context_last_error(ctx));
    int64_t nn = n, t = T;
    kern_buffer *bc;
    cr_assert_eq(kern_buffer_create(ctx, KERN_I32, 1, &nn, count, &bc), KERN_OK);
    kern_buffer *bo = buf_f32(ctx, 1, &nn, NULL), *bxg = buf_f32(ctx, 1, &nn, NULL),
                *bwg = buf_f32(ctx, 1, &t, NULL);
    kern_arg a[7] = {kern_arg_buffer(buf_f32(ctx, 1, &nn, x0)),
                     kern_arg_buffer(buf_f32(ctx, 1, &t, w)),
                     kern_arg_buffer(bc),
                     kern_arg_buffer(bo),
                     kern_arg_buffer(bxg),
                     kern_arg_buffer(bwg),
                     kern_arg_buffer(buf_f32(ctx, 1, &nn, ones))};
    cr_assert_eq(kern_launch(find(m, "trips"), a, 4), KERN_OK, "%s", kern_context_last_error(ctx));
    read_f32(bo, got, n);
    expect_close(got, want, n, 2e-5f, "out");
    cr_assert_eq(kern_launch(find(m, "trips.grad"), a, 7), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    read_f32(bxg, gx, n);
    read_f32(bwg, gw, T);
    expect_close(gx, wx0, n, 1e-4f, "x0.grad");
    for (int k = 0; k < T; k++)
        cr_expect(fabs(gw[k] - ww[k]) <= 1e-4 * fmax(1.0, fabs(ww[k])),
                  "n %d: w.grad[%d]: %.9g, want %.9g", n, k, (double)gw[k], ww[k]);
    kern_context_release(ctx);
}

/* Sizes around the GPUs' rounds: a Vulkan workgroup sorts 256 items of a forward (two
 * per invocation) and 128 of K.grad, a CUDA block 256, a SIMD window 16 vectors */
Test(e2e, items_sorted_by_trip_count_keep_their_results_and_gradients) {
    static const int sizes[] = {1, 100, 128, 129, 255, 256, 257, 511, 20000 + 77};
    for (size_t c = 0; c < sizeof sizes / sizeof *sizes; c++)
        sorted_trips(sizes[c]);
}

/* count shorter than x0: the counts computed ahead read nothing out of bounds and record
 * nothing; the item's own load reports index N - 1, as in index order. */
Test(e2e, items_sorted_by_trip_count_report_an_out_of_bounds_count) {
    enum { N = 1000, T = 8 };
    static float x0[N], w[T];
    static int32_t count[N - 1];
    for (int i = 0; i < N - 1; i++)
        count[i] = i % 5;
    kern_context_options o = kern_context_options_default();
    o.backend = kern_test_backend();
    o.no_checks = false; /* checked code, whatever $KERN_NO_CHECKS says */
    kern_context *ctx;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, TRIPS, strlen(TRIPS), "trips.kern", &m), KERN_OK,
                 "%s", kern_context_last_error(ctx));
    int64_t n = N, nc = N - 1, t = T;
    kern_buffer *bc;
    cr_assert_eq(kern_buffer_create(ctx, KERN_I32, 1, &nc, count, &bc), KERN_OK);
    kern_arg a[4] = {kern_arg_buffer(buf_f32(ctx, 1, &n, x0)),
                     kern_arg_buffer(buf_f32(ctx, 1, &t, w)), kern_arg_buffer(bc),
                     kern_arg_buffer(buf_f32(ctx, 1, &n, NULL))};
    kern_status st = kern_launch(find(m, "trips"), a, 4);
    if (st == KERN_OK)
        st = kern_sync(ctx);
    cr_assert_neq(st, KERN_OK, "count[%d] is out of bounds", N - 1);
    const char *msg = kern_context_last_error(ctx);
    cr_expect(strstr(msg, "trips.kern:4:") && strstr(msg, "999"), "%s", msg);
    kern_context_release(ctx);
}

/* ---- loops of four steps per trip (SPIR-V: spv_emit_ctrl.c, emit_loop_from) --------------- */

/* A loop of 16 ops or more from a to b: trip counts 0 to 9 around multiples of four, an
 * empty range, and ranges at the ends of i32 (where hi - i, i + 3 and i + 4 must not wrap),
 * against a C loop in double. */
Test(e2e, loops_of_four_steps_per_trip_at_every_count_and_the_ends_of_i32) {
    static const char src[] =
        "kernel edge(x: f32[], a: i32, b: i32) {\n"
        "    for i in 0..len(x) {\n"
        "        var v = x[i];\n"
        "        var c = 0;\n"
        "        for t in a..b {\n"
        "            v = v * 0.5 + 0.25 * v * v - 0.125 * v * v * v + f32(t % 7) * 0.001;\n"
        "            c += 1;\n"
        "        }\n"
        "        x[i] = v + f32(c);\n"
        "    }\n"
        "}\n";
    static const int32_t ranges[][2] = {{0, 0},
                                        {0, 1},
                                        {0, 3},
                                        {0, 4},
                                        {0, 5},
                                        {0, 7},
                                        {0, 8},
                                        {0, 9},
                                        {5, 2},
                                        {-3, 3},
                                        {INT32_MAX - 7, INT32_MAX},
                                        {INT32_MIN, INT32_MIN + 6},
                                        {INT32_MAX - 1, INT32_MAX}};
    enum { N = 300 };
    kern_context *ctx = ctx_new(false);
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "edge.kern", &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    for (size_t r = 0; r < sizeof ranges / sizeof *ranges; r++) {
        int32_t a = ranges[r][0], b = ranges[r][1];
        float x[N], got[N], want[N];
        for (int i = 0; i < N; i++) {
            x[i] = -0.5f + (float)i / N;
            double v = x[i];
            int c = 0;
            for (int64_t t = a; t < b; t++, c++) {
                float f = (float)v; /* f32 steps, as the kernel's */
                f = f * 0.5f + 0.25f * f * f - 0.125f * f * f * f + (float)(t % 7) * 0.001f;
                v = f;
            }
            want[i] = (float)v + (float)c;
        }
        int64_t n = N;
        kern_buffer *bx = buf_f32(ctx, 1, &n, x);
        kern_arg args[3] = {kern_arg_buffer(bx), kern_arg_i32(a), kern_arg_i32(b)};
        cr_assert_eq(kern_launch(find(m, "edge"), args, 3), KERN_OK, "%s",
                     kern_context_last_error(ctx));
        read_f32(bx, got, N);
        for (int i = 0; i < N; i++)
            cr_expect(fabsf(got[i] - want[i]) <= 1e-5f * fmaxf(1.0f, fabsf(want[i])),
                      "a %d, b %d: x[%d] = %.9g, the C loop gives %.9g", a, b, i, got[i], want[i]);
    }
    kern_context_release(ctx);
}
