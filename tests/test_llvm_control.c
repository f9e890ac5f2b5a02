/* test_llvm_control.c - the LLVM CPU backend: control flow (if, for, while, break, continue,
 * early return), n-D parallel tasks with chunked calls, serial tasks, uniform values
 * across tasks; atomics on several threads, their old values and their ties rule (suite
 * `llvm_control`). */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../backends/llvm/llvm_backend.h"
#include "../compiler/driver.h"
#include "../backends/meta_ir.h"
#include "../runtime/abi.h"
#include "../runtime/meta.h"
#include "llvm_util.h"

/* ---- control flow ------------------------------------------------------------------- */

static float cf_f(float x) {
    if (x > 10.0f)
        return x;
    return -x;
}

Test(llvm_control, while_break_continue_return) {
    const char *src = "func f(x: f32) -> f32 {\n"
                      "    if x > 10.0 { return x; }\n"
                      "    return -x;\n"
                      "}\n"
                      "kernel cf(a: f32[], b: bool[], n: i32[], out: f32[]) {\n"
                      "    for i in 0..len(a) {\n"
                      "        var s = 0.0;\n"
                      "        var k = 0;\n"
                      "        while k < n[i] {\n"
                      "            k += 1;\n"
                      "            if k == 3 { continue; }\n"
                      "            if k > 7 { break; }\n"
                      "            s += f32(k) * a[i];\n"
                      "        }\n"
                      "        out[i] = select(b[i], s, f(a[i])) + f32(b[i]);\n"
                      "    }\n"
                      "}\n";
    enum { M = 40 };
    float a[M], out[M], want[M];
    uint8_t b[M];
    int32_t n[M];
    for (int i = 0; i < M; i++) {
        a[i] = (float)(i - 20) * 0.75f;
        b[i] = (uint8_t)(i % 3 == 0);
        n[i] = (i * 7) % 13 - 2;
        float s = 0.0f;
        int k = 0;
        while (k < n[i]) {
            k += 1;
            if (k == 3)
                continue;
            if (k > 7)
                break;
            float t = (float)k * a[i];
            s = s + t;
        }
        float v = b[i] ? s : cf_f(a[i]);
        want[i] = v + (float)b[i];
    }
    for (int l = 0; l < 2; l++) {
        prog p = build(src, OPT_LEVELS[l], l == 0);
        memset(out, 0, sizeof out);
        kern_array_desc da = desc(a, M, 1, 1), db = desc(b, M, 1, 1), dn = desc(n, M, 1, 1),
                        dout = desc(out, M, 1, 1);
        void *args[] = {&da, &db, &dn, &dout};
        kern_err_record e = run(&p, "cf", args, 3);
        cr_assert_eq(e.code, 0);
        for (int i = 0; i < M; i++)
            cr_expect(out[i] == want[i], "-O%d out[%d] = %g, want %g", OPT_LEVELS[l], i,
                      (double)out[i], (double)want[i]);
        release(&p);
    }
}

Test(llvm_control, nested_for_break_continue) {
    const char *src = "kernel loops(x: i32[], out: i64[], m: i32) {\n"
                      "    for i in 0..len(x) {\n"
                      "        var acc: i64 = 0;\n"
                      "        for j in 0..m {\n"
                      "            if j == x[i] { break; }\n"
                      "            if j % 2 == 1 { continue; }\n"
                      "            for k in j..m { acc += i64(k * j) + 1; }\n"
                      "        }\n"
                      "        out[i] = acc;\n"
                      "    }\n"
                      "}\n";
    enum { M = 17 };
    int32_t x[M], m = 11;
    int64_t out[M], want[M];
    for (int i = 0; i < M; i++) {
        x[i] = i - 3;
        int64_t acc = 0;
        for (int j = 0; j < m; j++) {
            if (j == x[i])
                break;
            if (j % 2 == 1)
                continue;
            for (int k = j; k < m; k++)
                acc += (int64_t)(k * j) + 1;
        }
        want[i] = acc;
    }
    for (int l = 0; l < 2; l++) {
        prog p = build(src, OPT_LEVELS[l], false);
        memset(out, 0, sizeof out);
        kern_array_desc dx = desc(x, M, 1, 1), dout = desc(out, M, 1, 1);
        void *args[] = {&dx, &dout, &m};
        run(&p, "loops", args, 4);
        for (int i = 0; i < M; i++)
            cr_expect_eq(out[i], want[i], "-O%d out[%d] = %lld, want %lld", OPT_LEVELS[l], i,
                         (long long)out[i], (long long)want[i]);
        release(&p);
    }
}

/* ---- tasks -------------------------------------------------------------------------- */

Test(llvm_control, parallel_2d_3d_chunked) {
    const char *src = "kernel grid(a: f32[,], out: f32[,]) {\n"
                      "    for i in 1..shape(a, 0) - 1, j in 1..shape(a, 1) - 1 {\n"
                      "        out[i, j] = a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1] - "
                      "4.0 * a[i, j];\n"
                      "    }\n"
                      "}\n"
                      "kernel cube(v: i64[,,], n: i32) {\n"
                      "    for i in 0..shape(v, 0), j in 0..shape(v, 1), k in 0..shape(v, 2) {\n"
                      "        v[i, j, k] = i64(i) * 10000 + i64(j) * 100 + i64(k) + i64(n);\n"
                      "    }\n"
                      "}\n";
    enum { R = 13, C = 21, X = 5, Y = 7, Z = 9 };
    static float a[R][C], out[R][C], want[R][C];
    static int64_t v[X][Y][Z];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            a[i][j] = (float)((i * 31 + j * 17) % 23) * 0.25f;
    memset(want, 0, sizeof want);
    for (int i = 1; i < R - 1; i++)
        for (int j = 1; j < C - 1; j++) {
            float t = 4.0f * a[i][j];
            float s = a[i - 1][j] + a[i + 1][j];
            s = s + a[i][j - 1];
            s = s + a[i][j + 1];
            want[i][j] = s - t;
        }
    const int64_t chunks[] = {1, 3, 1000};
    for (int l = 0; l < 2; l++) {
        prog p = build(src, OPT_LEVELS[l], false);
        for (int c = 0; c < 3; c++) {
            memset(out, 0, sizeof out);
            kern_array_desc da = desc(a, R, C, 1), dout = desc(out, R, C, 1);
            void *args[] = {&da, &dout};
            kern_count_fn count = (kern_count_fn)llvm_jit_lookup(p.jit, "kern_grid__t0_count");
            cr_assert_eq(count(args), R - 2, "count is hi0 - lo0");
            run(&p, "grid", args, chunks[c]);
            cr_expect(memcmp(out, want, sizeof out) == 0, "-O%d grid, chunks of %lld",
                      OPT_LEVELS[l], (long long)chunks[c]);

            memset(v, 0xff, sizeof v);
            int32_t n = 7;
            kern_array_desc dv = desc(v, X, Y, Z);
            void *args3[] = {&dv, &n};
            run_mt(&p, "cube", args3, chunks[c], c == 1 ? 3 : 1);
            for (int i = 0; i < X; i++)
                for (int j = 0; j < Y; j++)
                    for (int k = 0; k < Z; k++)
                        cr_expect_eq(v[i][j][k], i * 10000 + j * 100 + k + 7);
        }
        release(&p);
    }
}

Test(llvm_control, serial_tasks_and_uniforms) {
    const char *src = "kernel seq(a: i32[], out: i32[], k: i32) {\n"
                      "    let n = len(a) * 2 + k;\n"
                      "    out[0] = n;\n"
                      "    for i in 0..len(a) { out[1 + i] = a[i] * n; }\n"
                      "    out[0] += 1;\n"
                      "    for i in -3..k { out[len(a) + 4 + i] = i; }\n"
                      "}\n";
    enum { M = 6 };
    int32_t a[M] = {1, -2, 3, -4, 5, 100}, out[M + 1 + 4 + 5], k = 5;
    for (int l = 0; l < 2; l++) {
        prog p = build(src, OPT_LEVELS[l], false);
        const kern_meta_kernel *mk = &p.meta->kernels[0];
        cr_assert_eq(mk->ntasks, 4);
        cr_expect(!mk->tasks[0].parallel && mk->tasks[1].parallel && !mk->tasks[2].parallel &&
                  mk->tasks[3].parallel);
        memset(out, 0, sizeof out);
        kern_array_desc da = desc(a, M, 1, 1), dout = desc(out, M + 10, 1, 1);
        void *args[] = {&da, &dout, &k};
        kern_count_fn count = (kern_count_fn)llvm_jit_lookup(p.jit, "kern_seq__t3_count");
        cr_assert_eq(count(args), 8, "-3..5 has 8 items");
        run(&p, "seq", args, 2);
        int n = M * 2 + k;
        cr_expect_eq(out[0], n + 1);
        for (int i = 0; i < M; i++)
            cr_expect_eq(out[1 + i], a[i] * n);
        for (int i = -3; i < k; i++)
            cr_expect_eq(out[M + 4 + i], i);
        /* a serial body called with an empty range does nothing */
        kern_task_fn t0 = (kern_task_fn)llvm_jit_lookup(p.jit, "kern_seq__t0");
        kern_err_record e = {0};
        out[0] = -1;
        t0(args, 0, 0, &e, NULL, NULL);
        cr_expect_eq(out[0], -1);
        release(&p);
    }
}

Test(llvm_control, empty_and_reversed_ranges) {
    const char *src = "kernel r(out: i32[], lo: i32, hi: i32) {\n"
                      "    for i in lo..hi { out[i] = 1; }\n"
                      "}\n";
    prog p = build(src, 3, false);
    int32_t out[4] = {0}, lo = 3, hi = 1;
    kern_array_desc d = desc(out, 4, 1, 1);
    void *args[] = {&d, &lo, &hi};
    kern_count_fn count = (kern_count_fn)llvm_jit_lookup(p.jit, "kern_r__t0_count");
    cr_expect_eq(count(args), 0, "a reversed range has no items (clamped)");
    run(&p, "r", args, 1);
    cr_expect(out[0] == 0 && out[1] == 0 && out[2] == 0 && out[3] == 0);
    release(&p);
}

/* ---- atomics ------------------------------------------------------------------------ */

Test(llvm_control, atomics_concurrent) {
    const char *src =
        "kernel hist(v: i32[], h: i32[], hf: f32[], hd: f64[], h64: i64[], hu: u32[]) {\n"
        "    for i in 0..len(v) {\n"
        "        h[v[i] % 8] += 1;\n"
        "        hf[v[i] % 8] += 1.0;\n"
        "        hd[v[i] % 8] -= 0.5;\n"
        "        atomic_add(h64[0], i64(v[i]));\n"
        "        atomic_sub(h64[1], i64(v[i]));\n"
        "        atomic_min(h[8], v[i] - 2000);\n"
        "        atomic_max(h[9], v[i] - 2000);\n"
        "        atomic_max(hu[0], u32(v[i]) * 1000000);\n"
        "        atomic_min(hu[1], u32(v[i]) * 1000000);\n"
        "        atomic_max(hf[8], f32(v[i]) * 0.5);\n"
        "        atomic_min(hd[8], f64(v[i]) - 100.0);\n"
        "    }\n"
        "}\n";
    enum { M = 100000 };
    static int32_t v[M];
    int32_t h[10], wh[10] = {0};
    float hf[9], whf[9] = {0};
    double hd[9], whd[9] = {0};
    int64_t h64[2], wh64[2] = {0};
    uint32_t hu[2], whu[2] = {0, UINT32_MAX};
    wh[8] = 0;
    wh[9] = -5000;
    whf[8] = -1.0f;
    whd[8] = 1e9;
    for (int i = 0; i < M; i++) {
        v[i] = (int32_t)((i * 2654435761u) % 4001u);
        wh[v[i] % 8]++;
        whf[v[i] % 8] += 1.0f;
        whd[v[i] % 8] -= 0.5;
        wh64[0] += v[i];
        wh64[1] -= v[i];
        if (v[i] - 2000 < wh[8])
            wh[8] = v[i] - 2000;
        if (v[i] - 2000 > wh[9])
            wh[9] = v[i] - 2000;
        uint32_t u = (uint32_t)v[i] * 1000000u;
        if (u > whu[0])
            whu[0] = u;
        if (u < whu[1])
            whu[1] = u;
        if ((float)v[i] * 0.5f > whf[8])
            whf[8] = (float)v[i] * 0.5f;
        if ((double)v[i] - 100.0 < whd[8])
            whd[8] = (double)v[i] - 100.0;
    }
    cr_assert(whu[0] > 2147483648u, "u32 max must exceed the signed range");
    for (int l = 0; l < 2; l++) {
        prog p = build(src, OPT_LEVELS[l], false);
        memset(h, 0, sizeof h);
        memset(hf, 0, sizeof hf);
        memset(hd, 0, sizeof hd);
        memset(h64, 0, sizeof h64);
        h[9] = -5000;
        hf[8] = -1.0f;
        hd[8] = 1e9;
        hu[0] = 0;
        hu[1] = UINT32_MAX;
        kern_array_desc dv = desc(v, M, 1, 1), dh = desc(h, 10, 1, 1), dhf = desc(hf, 9, 1, 1),
                        dhd = desc(hd, 9, 1, 1), dh64 = desc(h64, 2, 1, 1), dhu = desc(hu, 2, 1, 1);
        void *args[] = {&dv, &dh, &dhf, &dhd, &dh64, &dhu};
        run_mt(&p, "hist", args, 64, 8);
        for (int i = 0; i < 10; i++)
            cr_expect_eq(h[i], wh[i], "-O%d h[%d] = %d, want %d", OPT_LEVELS[l], i, h[i], wh[i]);
        for (int i = 0; i < 9; i++) {
            cr_expect(hf[i] == whf[i], "-O%d hf[%d] = %g, want %g", OPT_LEVELS[l], i, (double)hf[i],
                      (double)whf[i]);
            cr_expect(hd[i] == whd[i], "hd[%d] = %g, want %g", i, hd[i], whd[i]);
        }
        cr_expect(h64[0] == wh64[0] && h64[1] == wh64[1]);
        cr_expect(hu[0] == whu[0] && hu[1] == whu[1], "u32 max %u (want %u), min %u (want %u)",
                  hu[0], whu[0], hu[1], whu[1]);
        release(&p);
    }
}

Test(llvm_control, atomics_old_values_and_ties) {
    const char *src =
        "kernel olds(a: f32[], m: f32[], olds: f32[], xs: i32[], im: i32[], iold: i32[]) {\n"
        "    for i in 0..len(a) {\n"
        "        olds[i] = atomic_min(m[0], a[i]);\n"
        "        olds[len(a) + i] = atomic_max(m[1], a[i]);\n"
        "        olds[2 * len(a) + i] = atomic_min(m[2], a[i]);\n"
        "        iold[i] = atomic_sub(im[0], xs[i]);\n"
        "        iold[len(a) + i] = atomic_add(im[1], xs[i]);\n"
        "    }\n"
        "}\n";
    enum { M = 8 };
    float a[M] = {5.0f, 3.0f, -0.0f, 0.0f, NAN, 1.0f, -7.0f, 0.0f};
    int32_t xs[M] = {1, 2, 3, 4, 5, 6, 7, INT32_MAX};
    for (int l = 0; l < 2; l++) {
        prog p = build(src, OPT_LEVELS[l], false);
        float m[3] = {4.0f, -0.0f, NAN}, olds[3 * M];
        int32_t im[2] = {10, 0}, iold[2 * M];
        kern_array_desc da = desc(a, M, 1, 1), dm = desc(m, 3, 1, 1),
                        dold = desc(olds, 3 * M, 1, 1), dx = desc(xs, M, 1, 1),
                        dim = desc(im, 2, 1, 1), dio = desc(iold, 2 * M, 1, 1);
        void *args[] = {&da, &dm, &dold, &dx, &dim, &dio};
        run(&p, "olds", args, M); /* one chunk: items in order */
        /* the reference: a plain sequential loop with `v < old ? v : old` */
        float rm[3] = {4.0f, -0.0f, NAN};
        int32_t rim[2] = {10, 0};
        for (int i = 0; i < M; i++) {
            float o0 = rm[0], o1 = rm[1], o2 = rm[2];
            rm[0] = a[i] < rm[0] ? a[i] : rm[0];
            rm[1] = a[i] > rm[1] ? a[i] : rm[1];
            rm[2] = a[i] < rm[2] ? a[i] : rm[2];
            scalar g, w;
            g.f32 = olds[i], w.f32 = o0;
            cr_expect(same(TY_F32, g, w, 0), "-O%d min old %d: %g, want %g", OPT_LEVELS[l], i,
                      (double)olds[i], (double)o0);
            g.f32 = olds[M + i], w.f32 = o1;
            cr_expect(same(TY_F32, g, w, 0), "max old %d: %g, want %g", i, (double)olds[M + i],
                      (double)o1);
            g.f32 = olds[2 * M + i], w.f32 = o2;
            cr_expect(same(TY_F32, g, w, 0), "min-on-NaN old %d", i);
            cr_expect_eq(iold[i], rim[0]);
            cr_expect_eq(iold[M + i], rim[1]);
            rim[0] = (int32_t)((uint32_t)rim[0] - (uint32_t)xs[i]);
            rim[1] = (int32_t)((uint32_t)rim[1] + (uint32_t)xs[i]); /* wraps */
        }
        cr_expect(m[0] == -7.0f && !signbit(m[1]) && m[1] == 5.0f, "final min/max");
        cr_expect(isnan(m[2]), "NaN in memory stays (v < NaN is false)");
        cr_expect(im[0] == rim[0] && im[1] == rim[1]);
        release(&p);
    }
}
