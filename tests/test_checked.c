/* test_checked.c - checked code (the default) through the C API on $KERN_TEST_BACKEND
 * (test_backend.h: the CPU here, CUDA and Vulkan on the GPU machine): the accesses whose
 * ranges are known before the items are tested once (llvm_chunk.c: per chunk on the CPU,
 * per work item on CUDA), the others keep their own checks. In range, the results are a
 * plain C loop's; a guard one off, a bad gather, a short array and a loop bound past the
 * end are each reported with the index and extent (suite `checked`). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../include/kern.h"
#include "test_backend.h"

static const char SRC[] =
    "kernel stencil(src: f32[,], dst: f32[,]) {\n"
    "    let n = shape(src, 0);\n"
    "    let m = shape(src, 1);\n"
    "    for i in 0..n, j in 0..m {\n"
    "        if i == 0 || j == 0 || i == n - 1 || j == m - 1 {\n"
    "            dst[i, j] = src[i, j];\n"
    "        } else {\n"
    "            dst[i, j] = src[i - 1, j] + src[i + 1, j] - src[i, j - 1] * src[i, j + 1];\n"
    "        }\n"
    "    }\n"
    "}\n"
    "kernel gather(a: f32[], idx: i32[], out: f32[], lim: i32) {\n"
    "    for i in 0..len(out) {\n"
    "        let k = idx[i];\n"
    "        var s = a[i] * 2.0;\n"
    "        if k >= 0 && k < lim { s += a[k]; }\n"
    "        if i > 0 { s += a[i - 1]; }\n"
    "        out[i] = s;\n"
    "    }\n"
    "}\n"
    "kernel steps(x0: f32[], w: f32[], out: f32[], t: i32) {\n"
    "    for i in 0..len(x0) {\n"
    "        var x = x0[i];\n"
    "        for s in 0..t { x = 0.5 * x * w[s] + 0.25; }\n"
    "        out[i] = x;\n"
    "    }\n"
    "}\n"
    "kernel ragged(x0: f32[], w: f32[], count: i32[], out: f32[]) {\n"
    "    for i in 0..len(x0) {\n"
    "        var x = x0[i];\n"
    "        for s in 0..count[i] { x = 0.5 * x * w[s] + 0.25; }\n"
    "        out[i] = x;\n"
    "    }\n"
    "}\n";

enum { R = 45, M = 37, L = 1000, W = 16 };

typedef struct fixture {
    kern_context *ctx;
    kern_module *mod;
} fixture;

static fixture open_fixture(void) {
    fixture f = {0};
    kern_context_options o = kern_context_options_default();
    o.backend = kern_test_backend();
    cr_assert_eq(kern_context_create(&o, &f.ctx), KERN_OK, "%s", kern_context_last_error(f.ctx));
    cr_assert_eq(kern_module_from_source(f.ctx, SRC, strlen(SRC), "checked.kern", &f.mod), KERN_OK,
                 "%s", kern_context_last_error(f.ctx));
    return f;
}

static void close_fixture(fixture *f) {
    kern_module_release(f->mod);
    kern_context_release(f->ctx);
}

static kern_buffer *buf(fixture *f, kern_dtype t, int rank, int64_t d0, int64_t d1,
                        const void *data) {
    int64_t shape[2] = {d0, d1};
    kern_buffer *b;
    cr_assert_eq(kern_buffer_create(f->ctx, t, rank, shape, data, &b), KERN_OK, "%s",
                 kern_context_last_error(f->ctx));
    return b;
}

/* Launches kernel name and waits: KERN_OK, or the error with its message in msg. */
static kern_status launch(fixture *f, const char *name, kern_arg *args, int n, char *msg,
                          size_t len) {
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(f->mod, name, &k), KERN_OK);
    kern_status s = kern_launch(k, args, n);
    if (s == KERN_OK)
        s = kern_sync(f->ctx);
    snprintf(msg, len, "%s", s == KERN_OK ? "" : kern_context_last_error(f->ctx));
    return s;
}

Test(checked, guarded_stencil_in_range) {
    fixture f = open_fixture();
    static float src[R][M], dst[R][M], want[R][M];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < M; j++)
            src[i][j] = (float)((i * 7 + j * 3) % 11) - 5.0f;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < M; j++)
            want[i][j] = i == 0 || j == 0 || i == R - 1 || j == M - 1
                             ? src[i][j]
                             : src[i - 1][j] + src[i + 1][j] - src[i][j - 1] * src[i][j + 1];
    kern_buffer *bs = buf(&f, KERN_F32, 2, R, M, src), *bd = buf(&f, KERN_F32, 2, R, M, NULL);
    kern_arg a[2] = {kern_arg_buffer(bs), kern_arg_buffer(bd)};
    char msg[512];
    cr_assert_eq(launch(&f, "stencil", a, 2, msg, sizeof msg), KERN_OK, "%s", msg);
    cr_assert_eq(kern_buffer_read(bd, dst, sizeof dst), KERN_OK);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < M; j++)
            if (dst[i][j] != want[i][j]) {
                cr_expect_fail("dst[%d][%d] = %g, want %g", i, j, dst[i][j], want[i][j]);
                i = R;
                break;
            }
    kern_buffer_release(bs);
    kern_buffer_release(bd);
    close_fixture(&f);
}

Test(checked, guards_gathers_and_loop_bounds) {
    fixture f = open_fixture();
    static float a[L], out[L], x0[L], w[W];
    static int32_t idx[L];
    for (int i = 0; i < L; i++) {
        a[i] = 0.5f * (float)(i % 9);
        idx[i] = (i * 37) % (L + 40) - 20; /* -20 .. L + 19: the guard keeps a[] in range */
        x0[i] = (float)(i % 5) * 0.25f;
    }
    for (int s = 0; s < W; s++)
        w[s] = 1.0f + (float)s / 16.0f;
    kern_buffer *ba = buf(&f, KERN_F32, 1, L, 0, a), *bi = buf(&f, KERN_I32, 1, L, 0, idx),
                *bo = buf(&f, KERN_F32, 1, L, 0, NULL), *bx = buf(&f, KERN_F32, 1, L, 0, x0),
                *bw = buf(&f, KERN_F32, 1, W, 0, w);
    char msg[512];
    kern_arg g[4] = {kern_arg_buffer(ba), kern_arg_buffer(bi), kern_arg_buffer(bo),
                     kern_arg_i32(L)};
    cr_assert_eq(launch(&f, "gather", g, 4, msg, sizeof msg), KERN_OK, "%s", msg);
    cr_assert_eq(kern_buffer_read(bo, out, sizeof out), KERN_OK);
    for (int i = 0; i < L; i++) {
        float s = a[i] * 2.0f;
        if (idx[i] >= 0 && idx[i] < L)
            s += a[idx[i]];
        if (i > 0)
            s += a[i - 1];
        if (out[i] != s) {
            cr_expect_fail("gather: out[%d] = %g, want %g", i, out[i], s);
            break;
        }
    }
    g[3] = kern_arg_i32(L + 1); /* the guard one off: k == L gets through */
    cr_expect_eq(launch(&f, "gather", g, 4, msg, sizeof msg), KERN_ERR_DEVICE);
    cr_expect(strstr(msg, "index 1000 out of bounds for dimension 0 of extent 1000"), "%s", msg);

    kern_arg s[4] = {kern_arg_buffer(bx), kern_arg_buffer(bw), kern_arg_buffer(bo),
                     kern_arg_i32(W)};
    cr_assert_eq(launch(&f, "steps", s, 4, msg, sizeof msg), KERN_OK, "%s", msg);
    cr_assert_eq(kern_buffer_read(bo, out, sizeof out), KERN_OK);
    for (int i = 0; i < L; i++) {
        float x = x0[i];
        for (int t = 0; t < W; t++)
            x = 0.5f * x * w[t] + 0.25f;
        if (out[i] != x) {
            cr_expect_fail("steps: out[%d] = %g, want %g", i, out[i], x);
            break;
        }
    }
    s[3] = kern_arg_i32(W + 2); /* the loop runs past w's end */
    cr_expect_eq(launch(&f, "steps", s, 4, msg, sizeof msg), KERN_ERR_DEVICE);
    cr_expect(strstr(msg, "index 16 out of bounds for dimension 0 of extent 16"), "%s", msg);
    static int32_t count[L];
    for (int i = 0; i < L; i++)
        count[i] = (i * 5) % (W + 1); /* 0 .. W: per-item trip counts */
    kern_buffer *bc = buf(&f, KERN_I32, 1, L, 0, count);
    kern_arg r[4] = {kern_arg_buffer(bx), kern_arg_buffer(bw), kern_arg_buffer(bc),
                     kern_arg_buffer(bo)};
    cr_assert_eq(launch(&f, "ragged", r, 4, msg, sizeof msg), KERN_OK, "%s", msg);
    cr_assert_eq(kern_buffer_read(bo, out, sizeof out), KERN_OK);
    for (int i = 0; i < L; i++) {
        float x = x0[i];
        for (int t = 0; t < count[i]; t++)
            x = 0.5f * x * w[t] + 0.25f;
        if (out[i] != x) {
            cr_expect_fail("ragged: out[%d] = %g, want %g", i, out[i], x);
            break;
        }
    }
    count[777] = W + 5; /* one item's loop runs past w's end */
    cr_assert_eq(kern_buffer_write(bc, count, sizeof count), KERN_OK);
    cr_expect_eq(launch(&f, "ragged", r, 4, msg, sizeof msg), KERN_ERR_DEVICE);
    cr_expect(strstr(msg, "index 16 out of bounds for dimension 0 of extent 16"), "%s", msg);
    kern_buffer_release(bc);
    kern_buffer *bshort = buf(&f, KERN_F32, 1, L - 3, 0, a); /* a[] short: a[i] fails */
    kern_arg g2[4] = {kern_arg_buffer(bshort), kern_arg_buffer(bi), kern_arg_buffer(bo),
                      kern_arg_i32(L - 3)};
    cr_expect_eq(launch(&f, "gather", g2, 4, msg, sizeof msg), KERN_ERR_DEVICE);
    cr_expect(strstr(msg, "index 997 out of bounds for dimension 0 of extent 997"), "%s", msg);
    kern_buffer *bufs[] = {ba, bi, bo, bx, bw, bshort};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        kern_buffer_release(bufs[i]);
    close_fixture(&f);
}
