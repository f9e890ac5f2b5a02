/* test_llvm_debug.c - the LLVM CPU backend's checked code (debug builds, scalar, and
 * checked builds, whose SIMD code tests the lanes at once): bounds, division by zero and
 * shift errors with their line:col, the faulting operation skipped; unchecked code without
 * any check (suite `llvm_debug`). */
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

/* ---- checked code ------------------------------------------------------------------- */

/* The checked builds: debug (scalar code), and checked code (kc_options.checks) on the
 * scalar path, in SSE's 4 lanes and in the host's widest vectors. Every test below expects
 * the same of each. */
typedef struct mode {
    const char *name;
    bool debug;
    int simd;
} mode;
static const mode MODES[] = {
    {"debug", true, 0},
    {"checks, scalar", false, -1},
    {"checks, 4 lanes", false, 4},
    {"checks, the host's lanes", false, 0},
};
enum { NMODES = sizeof MODES / sizeof *MODES };

static prog build_mode(const char *src, int opt, const mode *m) {
    build_simd = m->simd;
    build_checks = !m->debug;
    prog p = build(src, opt, m->debug);
    build_simd = 0;
    build_checks = false;
    return p;
}

/* The LLVM IR text of src's checked build with SIMD setting simd at -O<opt> (free it). */
static char *checked_text(const char *src, int simd, int opt) {
    kc_ctx *c = kc_ctx_new();
    c->opts.checks = true;
    c->opts.simd = simd;
    c->opts.opt_level = opt;
    ir_module *m = kc_compile_source(c, "t.kern", src, strlen(src));
    cr_assert(m);
    char err[512];
    char *text = llvm_emit_text(m, &c->opts, err, sizeof err);
    cr_assert(text, "%s", err);
    ir_module_free(m);
    kc_ctx_free(c);
    return text;
}

Test(llvm_debug, debug_bounds_load_and_store) {
    for (int mi = 0; mi < NMODES; mi++) {
        const mode *md = &MODES[mi];
        /* columns counted by hand: `a` of a[i] on line 3 is column 18; the store's `=` col 16 */
        const char *src = "kernel dbg(a: f32[], out: f32[], n: i32) {\n"
                          "    for i in 0..n {\n"
                          "        out[i] = a[i] * 2.0;\n"
                          "    }\n"
                          "}\n";
        prog p = build_mode(src, 2, md);
        float a[4] = {1, 2, 3, 4}, buf[10];
        for (int i = 0; i < 10; i++)
            buf[i] = -1.0f;
        int32_t n = 6;
        /* out has 8 elements, a 4: a[4], a[5] fail */
        kern_array_desc da = desc(a, 4, 1, 1), dout = desc(buf, 8, 1, 1);
        void *args[] = {&da, &dout, &n};
        kern_err_record e = run(&p, "dbg", args, 100);
        cr_assert_eq(e.code, KERN_DEVERR_BOUNDS, "%s: code %d", md->name, (int)e.code);
        cr_expect_eq(e.line, 3, "%s", md->name);
        cr_expect_eq(e.col, 18, "%s", md->name);
        cr_expect_eq(e.dim, 0, "%s", md->name);
        cr_expect_eq(e.a, 4, "%s: the first failing index wins", md->name);
        cr_expect_eq(e.b, 4, "%s", md->name);
        for (int i = 0; i < 4; i++)
            cr_expect(buf[i] == a[i] * 2.0f, "%s", md->name);
        cr_expect(buf[4] == 0.0f && buf[5] == 0.0f, "a failed load yields 0");
        cr_expect(buf[6] == -1.0f && buf[7] == -1.0f, "%s", md->name);

        /* now the store is out of bounds: out has 3 elements of a bigger buffer */
        n = 4;
        for (int i = 0; i < 10; i++)
            buf[i] = -1.0f;
        dout = desc(buf, 3, 1, 1);
        e = run(&p, "dbg", args, 1);
        cr_assert_eq(e.code, KERN_DEVERR_BOUNDS, "%s: code %d", md->name, (int)e.code);
        cr_expect_eq(e.line, 3, "%s", md->name);
        cr_expect_eq(e.col, 16, "%s", md->name);
        cr_expect(e.a == 3 && e.b == 3 && e.dim == 0, "%s", md->name);
        cr_expect(buf[2] == 6.0f && buf[3] == -1.0f, "the store past the end is dropped");
        release(&p);
    }
}

Test(llvm_debug, debug_bounds_2d_negative_index) {
    for (int mi = 0; mi < NMODES; mi++) {
        const mode *md = &MODES[mi];
        const char *src = "kernel d2(m: i32[,], out: i32[], k: i32) {\n"
                          "    for i in 0..len(out) {\n"
                          "        out[i] = m[i, i - k];\n"
                          "    }\n"
                          "}\n";
        prog p = build_mode(src, 3, md);
        int32_t m[3][3] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}, out[3] = {-1, -1, -1}, k = 1;
        kern_array_desc dm = desc(m, 3, 3, 1), dout = desc(out, 3, 1, 1);
        void *args[] = {&dm, &dout, &k};
        kern_err_record e = run(&p, "d2", args, 1);
        cr_assert_eq(e.code, KERN_DEVERR_BOUNDS, "%s: code %d", md->name, (int)e.code);
        cr_expect(e.line == 3 && e.col == 18, "at %u:%u", e.line, e.col);
        cr_expect(e.dim == 1 && e.a == -1 && e.b == 3, "dim %d index %lld extent %lld", e.dim,
                  (long long)e.a, (long long)e.b);
        cr_expect(out[0] == 0 && out[1] == 4 && out[2] == 8, "%s", md->name);
        release(&p);
    }
}

Test(llvm_debug, debug_div_zero_and_shift) {
    for (int mi = 0; mi < NMODES; mi++) {
        const mode *md = &MODES[mi];
        const char *src = "kernel ds(a: i32[], b: i32[], q: i32[], s: i64[], sh: i64[]) {\n"
                          "    for i in 0..len(a) {\n"
                          "        q[i] = a[i] / b[i];\n"
                          "        s[i] = i64(a[i]) << sh[i];\n"
                          "    }\n"
                          "}\n";
        prog p = build_mode(src, 3, md);
        int32_t a[4] = {7, 8, 9, 10}, b[4] = {2, 0, 3, 0}, q[4];
        int64_t s[4], sh[4] = {1, 2, 64, 3};
        kern_array_desc da = desc(a, 4, 1, 1), db = desc(b, 4, 1, 1), dq = desc(q, 4, 1, 1),
                        dsv = desc(s, 4, 1, 1), dsh = desc(sh, 4, 1, 1);
        void *args[] = {&da, &db, &dq, &dsv, &dsh};
        kern_err_record e = run(&p, "ds", args, 4);
        cr_assert_eq(e.code, KERN_DEVERR_DIV_ZERO, "%s: code %d", md->name, (int)e.code);
        cr_expect(e.line == 3 && e.col == 21, "at %u:%u", e.line, e.col);
        /* the checked arithmetic goes on with the release results (passes/lower_semantics.c) */
        cr_expect(q[0] == 3 && q[1] == 8 && q[2] == 3 && q[3] == 10,
                  "a failed division divides by 1");
        cr_expect(s[0] == 14 && s[1] == 32 && s[2] == 9 && s[3] == 80,
                  "a failed shift masks its count");

        /* no division error: the shift's error is recorded */
        b[1] = b[3] = 1;
        e = run(&p, "ds", args, 4);
        cr_assert_eq(e.code, KERN_DEVERR_SHIFT, "%s: code %d", md->name, (int)e.code);
        cr_expect(e.line == 4 && e.col == 26, "at %u:%u", e.line, e.col);
        cr_expect(e.a == 64 && e.b == 64, "%s", md->name);
        release(&p);
    }
}

/* Gathers and scatters: the lowest bad item is recorded, the bad lanes' loads yield 0 and
 * their stores are dropped, the other lanes run. */
Test(llvm_debug, checked_gather_and_scatter) {
    const char *src = "kernel g(x: f32[], idx: i32[], y: f32[]) {\n"
                      "    for i in 0..len(y) {\n"
                      "        y[i] = x[idx[i]] + 1.0;\n"
                      "    }\n"
                      "}\n"
                      "kernel s(idx: i32[], y: f32[]) {\n"
                      "    for i in 0..len(idx) {\n"
                      "        y[idx[i]] = f32(i);\n"
                      "    }\n"
                      "}\n";
    enum { NI = 64, NX = 100 };
    for (int mi = 0; mi < NMODES; mi++) {
        const mode *md = &MODES[mi];
        prog p = build_mode(src, 3, md);
        float x[NX], y[NI + 8];
        int32_t idx[NI];
        for (int i = 0; i < NX; i++)
            x[i] = (float)(3 * i);
        for (int i = 0; i < NI; i++)
            idx[i] = (i * 7) % NX;
        idx[37] = 1000;
        idx[50] = -3;
        idx[51] = NX;
        kern_array_desc dx = desc(x, NX, 1, 1), di = desc(idx, NI, 1, 1), dy = desc(y, NI, 1, 1);
        void *args[] = {&dx, &di, &dy};
        kern_err_record e = run(&p, "g", args, 1000);
        cr_assert_eq(e.code, KERN_DEVERR_BOUNDS, "%s: code %d", md->name, (int)e.code);
        cr_expect(e.line == 3 && e.col == 16 && e.dim == 0, "%s: at %u:%u dim %d", md->name, e.line,
                  e.col, e.dim);
        cr_expect(e.a == 1000 && e.b == NX, "%s: the lowest bad item's index %lld, extent %lld",
                  md->name, (long long)e.a, (long long)e.b);
        for (int i = 0; i < NI; i++) {
            float want = i == 37 || i == 50 || i == 51 ? 1.0f : x[idx[i]] + 1.0f;
            cr_expect(y[i] == want, "%s: y[%d] = %g, want %g", md->name, i, y[i], want);
        }

        /* scatter: y has NI elements of a buffer of NI + 8 */
        for (int i = 0; i < NI + 8; i++)
            y[i] = -1.0f;
        for (int i = 0; i < NI; i++)
            idx[i] = NI - 1 - i;
        idx[5] = NI;     /* just past the end */
        idx[9] = NI + 3; /* inside the buffer, outside the array */
        idx[20] = -1;
        void *sargs[] = {&di, &dy};
        e = run(&p, "s", sargs, 1000);
        cr_assert_eq(e.code, KERN_DEVERR_BOUNDS, "%s: code %d", md->name, (int)e.code);
        cr_expect(e.line == 8 && e.a == NI && e.b == NI, "%s: line %u index %lld", md->name, e.line,
                  (long long)e.a);
        for (int i = 0; i < NI + 8; i++) {
            int item = NI - 1 - i; /* the item that writes element i, when it is in range */
            float want = i >= NI || item == 5 || item == 9 || item == 20 ? -1.0f : (float)item;
            cr_expect(y[i] == want, "%s: y[%d] = %g, want %g", md->name, i, y[i], want);
        }
        release(&p);
    }
}

/* A uniform index out of range in a vector access: every lane fails, the dimension is the
 * uniform one. */
Test(llvm_debug, checked_uniform_dimension) {
    const char *src = "kernel r(m: f32[,], k: i32, out: f32[]) {\n"
                      "    for i in 0..len(out) {\n"
                      "        out[i] = m[k, i];\n"
                      "    }\n"
                      "}\n";
    for (int mi = 0; mi < NMODES; mi++) {
        const mode *md = &MODES[mi];
        prog p = build_mode(src, 3, md);
        float m[3][20], out[20];
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 20; c++)
                m[r][c] = (float)(r * 100 + c);
        int32_t k = 2;
        kern_array_desc dm = desc(m, 3, 20, 1), dout = desc(out, 20, 1, 1);
        void *args[] = {&dm, &k, &dout};
        kern_err_record e = run(&p, "r", args, 7);
        cr_expect_eq(e.code, 0, "%s: row 2 is in range", md->name);
        for (int c = 0; c < 20; c++)
            cr_expect(out[c] == m[2][c], "%s: out[%d]", md->name, c);
        k = 3;
        e = run(&p, "r", args, 7);
        cr_assert_eq(e.code, KERN_DEVERR_BOUNDS, "%s: code %d", md->name, (int)e.code);
        cr_expect(e.dim == 0 && e.a == 3 && e.b == 3, "%s: dim %d index %lld extent %lld", md->name,
                  e.dim, (long long)e.a, (long long)e.b);
        for (int c = 0; c < 20; c++)
            cr_expect(out[c] == 0.0f, "%s: a failed load yields 0", md->name);
        release(&p);
    }
}

/* A reduction into one element (accumulated per task call, llvm_reduce.c): in range, the
 * sum; out of range, the op's error when it ran, and nothing when it did not. */
Test(llvm_debug, checked_reduction) {
    const char *src = "kernel r(x: f32[], s: f32[], k: i32, lim: f32) {\n"
                      "    for i in 0..len(x) {\n"
                      "        if x[i] > lim {\n"
                      "            s[k] += x[i];\n"
                      "        }\n"
                      "    }\n"
                      "}\n";
    enum { NX = 301 };
    float x[NX], s[4];
    double want = 0;
    for (int i = 0; i < NX; i++) {
        x[i] = (float)(i % 17) * 0.5f;
        want += x[i] > 2.0f ? x[i] : 0.0f;
    }
    for (int mi = 0; mi < NMODES; mi++) {
        const mode *md = &MODES[mi];
        prog p = build_mode(src, 3, md);
        int32_t k = 1;
        float lim = 2.0f;
        memset(s, 0, sizeof s);
        kern_array_desc dx = desc(x, NX, 1, 1), ds = desc(s, 3, 1, 1);
        void *args[] = {&dx, &ds, &k, &lim};
        kern_err_record e = run_mt(&p, "r", args, 50, 2);
        cr_expect_eq(e.code, 0, "%s", md->name);
        cr_expect(fabs(s[1] - want) < 1e-3 && s[0] == 0 && s[2] == 0 && s[3] == 0,
                  "%s: s[1] = %g, want %g", md->name, s[1], want);
        k = 3; /* s has 3 elements of a buffer of 4 */
        e = run_mt(&p, "r", args, 50, 2);
        cr_assert_eq(e.code, KERN_DEVERR_BOUNDS, "%s: code %d", md->name, (int)e.code);
        cr_expect(e.line == 4 && e.dim == 0 && e.a == 3 && e.b == 3, "%s: line %u index %lld",
                  md->name, e.line, (long long)e.a);
        cr_expect(s[3] == 0, "%s: nothing is added out of range", md->name);
        lim = 100.0f; /* the add never runs: no error */
        e = run_mt(&p, "r", args, 50, 2);
        cr_expect_eq(e.code, 0, "%s: an add that never ran reports nothing", md->name);
        release(&p);
    }
}

/* A task whose every access has a range known at the chunk's start (task indices, a for's
 * index, uniform offsets): on the scalar path one test per chunk picks the loop without
 * checks when all is in range (LLVM vectorizes it), the checked loop otherwise, which
 * reports the first bad access. */
Test(llvm_debug, checked_chunk_ranges) {
    const char *src = "kernel step(x: f32[,,], t: i32) {\n"
                      "    for p in 0..shape(x, 1) {\n"
                      "        for d in 0..shape(x, 2) {\n"
                      "            x[t, p, d] = x[t - 1, p, d] * 0.5 + f32(d);\n"
                      "        }\n"
                      "    }\n"
                      "}\n";
    enum { T = 3, P = 37, D = 3 };
    for (int mi = 0; mi < NMODES; mi++) {
        const mode *md = &MODES[mi];
        prog p = build_mode(src, 3, md);
        static float x[T][P][D];
        for (int q = 0; q < P; q++)
            for (int d = 0; d < D; d++)
                x[0][q][d] = (float)(q * D + d);
        int32_t t = 1;
        kern_array_desc dx = desc(x, T, P, D);
        void *args[] = {&dx, &t};
        kern_err_record e = run_mt(&p, "step", args, 5, 2);
        cr_expect_eq(e.code, 0, "%s", md->name);
        for (int q = 0; q < P; q++)
            for (int d = 0; d < D; d++)
                cr_expect(x[1][q][d] == x[0][q][d] * 0.5f + (float)d, "%s: x[1][%d][%d]", md->name,
                          q, d);
        t = 0; /* reads row -1 */
        e = run_mt(&p, "step", args, 5, 2);
        cr_assert_eq(e.code, KERN_DEVERR_BOUNDS, "%s: code %d", md->name, (int)e.code);
        cr_expect(e.line == 4 && e.dim == 0 && e.a == -1 && e.b == T,
                  "%s: line %u dim %d index %lld", md->name, e.line, e.dim, (long long)e.a);
        t = T; /* writes row T */
        e = run_mt(&p, "step", args, 5, 2);
        cr_assert_eq(e.code, KERN_DEVERR_BOUNDS, "%s: code %d", md->name, (int)e.code);
        cr_expect(e.dim == 0 && e.a == T && e.b == T, "%s: dim %d index %lld", md->name, e.dim,
                  (long long)e.a);
        release(&p);
    }
    /* the scalar path's code holds both loops, behind one test */
    char *text = checked_text(src, -1, 0);
    cr_expect(has(text, "chunk.unchecked") && has(text, "chunk.checked"),
              "checked scalar code tests the chunk's ranges once");
    free(text);
}

/* The chunk test reads the `if`s around an access: `i == 0 || ... else a[i - 1]`, `i > 0`,
 * `k >= 0 && k < n` on a loaded k, `!=`, `not`. Right guards run without errors and
 * compute what a plain loop computes; a guard one off reports the access it lets through. */
Test(llvm_debug, checked_chunk_guards) {
    const char *src =
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
        "kernel gather(a: f32[], idx: i32[], out: f32[], lim: i32, skip: i32) {\n"
        "    for i in 0..len(out) {\n"
        "        let k = idx[i];\n"
        "        var s = 0.0;\n"
        "        if k >= 0 && k < lim { s += a[k]; }\n"
        "        if !(i < 1) { s += a[i - 1]; }\n"
        "        if i != skip { s += 2.0 * a[i - 1]; }\n"
        "        out[i] = s;\n"
        "    }\n"
        "}\n";
    enum { R = 67, M = 13, L = 300 };
    static float src_[R][M], dst[R][M], a[L], out[L];
    static int32_t idx[L];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < M; j++)
            src_[i][j] = (float)((i * 7 + j * 3) % 11) - 5.0f;
    for (int i = 0; i < L; i++) {
        a[i] = 0.5f * (float)(i % 9);
        idx[i] = (i * 37) % (L + 40) - 20; /* -20 .. L + 19: a guard keeps a[] in range */
    }
    for (int mi = 0; mi < NMODES; mi++) {
        const mode *md = &MODES[mi];
        prog p = build_mode(src, 3, md);
        kern_array_desc ds = desc(src_, R, M, 1), dd = desc(dst, R, M, 1);
        void *sargs[] = {&ds, &dd};
        memset(dst, 0, sizeof dst);
        kern_err_record e = run_mt(&p, "stencil", sargs, 5, 2);
        cr_expect_eq(e.code, 0, "%s: stencil", md->name);
        for (int i = 0; i < R; i++)
            for (int j = 0; j < M; j++) {
                float want =
                    i == 0 || j == 0 || i == R - 1 || j == M - 1
                        ? src_[i][j]
                        : src_[i - 1][j] + src_[i + 1][j] - src_[i][j - 1] * src_[i][j + 1];
                if (dst[i][j] != want) {
                    cr_expect_fail("%s: dst[%d][%d] = %g, want %g", md->name, i, j, dst[i][j],
                                   want);
                    i = R;
                    break;
                }
            }

        int32_t lim = L, skip = 0;
        kern_array_desc da = desc(a, L, 1, 1), di = desc(idx, L, 1, 1), dout = desc(out, L, 1, 1);
        void *gargs[] = {&da, &di, &dout, &lim, &skip};
        e = run_mt(&p, "gather", gargs, 7, 2);
        cr_expect_eq(e.code, 0, "%s: gather", md->name);
        for (int i = 0; i < L; i++) {
            float s = 0.0f;
            if (idx[i] >= 0 && idx[i] < L)
                s += a[idx[i]];
            if (i >= 1)
                s += a[i - 1];
            if (i != skip)
                s += 2.0f * a[i - 1];
            if (out[i] != s) {
                cr_expect_fail("%s: out[%d] = %g, want %g", md->name, i, out[i], s);
                break;
            }
        }
        lim = L + 1; /* k == L gets through */
        e = run_mt(&p, "gather", gargs, 7, 2);
        cr_assert_eq(e.code, KERN_DEVERR_BOUNDS, "%s: code %d", md->name, (int)e.code);
        cr_expect(e.line == 16 && e.a == L && e.b == L, "%s: line %u index %lld", md->name, e.line,
                  (long long)e.a);
        lim = L, skip = 1; /* i == 0 reads a[-1] */
        e = run_mt(&p, "gather", gargs, 7, 2);
        cr_assert_eq(e.code, KERN_DEVERR_BOUNDS, "%s: code %d", md->name, (int)e.code);
        cr_expect(e.line == 18 && e.a == -1, "%s: line %u index %lld", md->name, e.line,
                  (long long)e.a);
        release(&p);
    }
    /* in lanes too, the stencil's checked code sits behind one test per chunk */
    char *text = checked_text(src, 4, 0);
    cr_expect(has(text, "chunk.unchecked"), "the guarded stencil's chunk is tested once");
    free(text);
}

/* A task with accesses the chunk test covers (a[i], out[i]) and one it cannot (b[j[i]]):
 * in range, the covered ones lose their checks and the other keeps its own, which reports
 * a bad j[i]; a short a[] fails the chunk test and the checked items report it. */
Test(llvm_debug, checked_chunk_partly_tested) {
    const char *src = "kernel mixed(a: f32[], b: f32[], j: i32[], out: f32[]) {\n"
                      "    for i in 0..len(out) {\n"
                      "        out[i] = a[i] * 2.0 + b[j[i]];\n"
                      "    }\n"
                      "}\n";
    enum { L = 203, B = 17 };
    static float a[L], b[B], out[L];
    static int32_t j[L];
    for (int i = 0; i < L; i++) {
        a[i] = (float)(i % 13) - 6.0f;
        j[i] = (i * 7) % B;
    }
    for (int i = 0; i < B; i++)
        b[i] = 0.5f * (float)i;
    for (int mi = 0; mi < NMODES; mi++) {
        const mode *md = &MODES[mi];
        prog p = build_mode(src, 3, md);
        kern_array_desc da = desc(a, L, 1, 1), db = desc(b, B, 1, 1), dj = desc(j, L, 1, 1),
                        dout = desc(out, L, 1, 1);
        void *args[] = {&da, &db, &dj, &dout};
        memset(out, 0, sizeof out);
        kern_err_record e = run_mt(&p, "mixed", args, 9, 2);
        cr_expect_eq(e.code, 0, "%s", md->name);
        for (int i = 0; i < L; i++)
            if (out[i] != a[i] * 2.0f + b[j[i]]) {
                cr_expect_fail("%s: out[%d] = %g", md->name, i, out[i]);
                break;
            }
        j[100] = B; /* one bad gather */
        e = run_mt(&p, "mixed", args, 9, 2);
        j[100] = (100 * 7) % B;
        cr_assert_eq(e.code, KERN_DEVERR_BOUNDS, "%s: code %d", md->name, (int)e.code);
        cr_expect(e.col == 31 && e.a == B && e.b == B, "%s: col %u index %lld", md->name, e.col,
                  (long long)e.a);
        da = desc(a, L - 3, 1, 1); /* a[] three short */
        e = run_mt(&p, "mixed", args, 9, 2);
        da = desc(a, L, 1, 1);
        cr_assert_eq(e.code, KERN_DEVERR_BOUNDS, "%s: code %d", md->name, (int)e.code);
        cr_expect(e.col == 18 && e.a == L - 3 && e.b == L - 3, "%s: col %u index %lld", md->name,
                  e.col, (long long)e.a);
        release(&p);
    }
    char *text = checked_text(src, 4, 0);
    cr_expect(has(text, "chunk.unchecked"), "a[i] and out[i] are tested once per chunk");
    free(text);
}

/* An access guarded by flags that other `if`s set (the gather form of K.grad: `if hit` after
 * `if i - 1 >= 0 && i - 1 < hi { hit = true; ... }`): the chunk test reads the flag as "one
 * of the `if`s ran", the hull of their ranges, i in [1, hi] or [lo - 1, n - 2] here, which
 * is in range when hi and lo are right. hi one too big lets out[n] through, lo one too
 * small out[-1] (the second `if` alone): the checked items report them. */
Test(llvm_debug, checked_chunk_flag_guards) {
    const char *src = "kernel flagged(a: f32[], out: f32[], hi: i32, lo: i32) {\n"
                      "    let n = len(out);\n"
                      "    for i in -1..n + 1 {\n"
                      "        var hit = false;\n"
                      "        var s = 0.0;\n"
                      "        if i - 1 >= 0 && i - 1 < hi { hit = true; s += a[i - 1]; }\n"
                      "        if i + 1 >= lo && i + 1 < n { hit = true; s += 2.0 * a[i + 1]; }\n"
                      "        if hit { out[i] = out[i] + s; }\n"
                      "    }\n"
                      "}\n";
    enum { L = 157 };
    static float a[L + 1], buf[L + 2], want[L + 2];
    for (int i = 0; i <= L; i++)
        a[i] = (float)(i % 7) - 3.0f;
    static const int32_t cases[3][2] = {{L - 1, 1}, {L, 1}, {L - 1, 0}}; /* hi, lo */
    for (int mi = 0; mi < NMODES; mi++) {
        const mode *md = &MODES[mi];
        prog p = build_mode(src, 3, md);
        for (int ci = 0; ci < 3; ci++) {
            int32_t hi = cases[ci][0], lo = cases[ci][1];
            float *out = buf + 1, *wout = want + 1; /* out[-1] and out[L] are there, unused */
            for (int i = -1; i <= L; i++)
                out[i] = wout[i] = 0.25f * (float)i;
            for (int i = -1; i <= L; i++) { /* the plain loop */
                bool hit = false;
                float s = 0.0f;
                if (i - 1 >= 0 && i - 1 < hi)
                    hit = true, s += a[i - 1];
                if (i + 1 >= lo && i + 1 < L)
                    hit = true, s += 2.0f * a[i + 1];
                if (hit && i >= 0 && i < L)
                    wout[i] = wout[i] + s;
            }
            kern_array_desc da = desc(a, L, 1, 1), dout = desc(out, L, 1, 1);
            void *args[] = {&da, &dout, &hi, &lo};
            kern_err_record e = run_mt(&p, "flagged", args, 11, 2);
            if (ci == 0) {
                cr_expect_eq(e.code, 0, "%s", md->name);
            } else {
                long long bad = ci == 1 ? L : -1;
                cr_assert_eq(e.code, KERN_DEVERR_BOUNDS, "%s, hi %d lo %d: code %d", md->name, hi,
                             lo, (int)e.code);
                cr_expect(e.line == 8 && e.a == bad && e.b == L, "%s: line %u index %lld", md->name,
                          e.line, (long long)e.a);
            }
            for (int i = -1; i <= L; i++)
                if (out[i] != wout[i]) {
                    cr_expect_fail("%s, hi %d lo %d: out[%d] = %g, want %g", md->name, hi, lo, i,
                                   out[i], wout[i]);
                    break;
                }
        }
        release(&p);
    }
    char *text = checked_text(src, -1, 0);
    cr_expect(has(text, "chunk.unchecked"), "the flagged task is tested once per chunk");
    free(text);
}

/* A loop whose bound is read from an array (for t in 0..count[i]): on the scalar path the
 * loop tests w[t]'s range once before it (count[i] known there) and runs without the
 * check per step; a count past w's end is reported at the first bad t. */
Test(llvm_debug, checked_loop_tested_before_it) {
    const char *src = "kernel ragged(x0: f32[], w: f32[], count: i32[], out: f32[]) {\n"
                      "    for i in 0..len(x0) {\n"
                      "        var x = x0[i];\n"
                      "        for t in 0..count[i] { x = 0.5 * x * w[t] + 0.25; }\n"
                      "        out[i] = x;\n"
                      "    }\n"
                      "}\n";
    enum { L = 301, W = 24 };
    static float x0[L], w[W], out[L];
    static int32_t count[L];
    for (int i = 0; i < L; i++) {
        x0[i] = (float)(i % 7) * 0.5f;
        count[i] = (i * 5) % (W + 1); /* 0 .. W */
    }
    for (int t = 0; t < W; t++)
        w[t] = 1.0f + (float)t / 32.0f;
    for (int mi = 0; mi < NMODES; mi++) {
        const mode *md = &MODES[mi];
        prog p = build_mode(src, 3, md);
        kern_array_desc dx = desc(x0, L, 1, 1), dw = desc(w, W, 1, 1), dc = desc(count, L, 1, 1),
                        dout = desc(out, L, 1, 1);
        void *args[] = {&dx, &dw, &dc, &dout};
        kern_err_record e = run_mt(&p, "ragged", args, 13, 2);
        cr_expect_eq(e.code, 0, "%s", md->name);
        for (int i = 0; i < L; i++) {
            float x = x0[i];
            for (int t = 0; t < count[i]; t++)
                x = 0.5f * x * w[t] + 0.25f;
            if (out[i] != x) {
                cr_expect_fail("%s: out[%d] = %g, want %g", md->name, i, out[i], x);
                break;
            }
        }
        count[200] = W + 3; /* t = W is the first bad step */
        e = run_mt(&p, "ragged", args, 13, 2);
        count[200] = (200 * 5) % (W + 1);
        cr_assert_eq(e.code, KERN_DEVERR_BOUNDS, "%s: code %d", md->name, (int)e.code);
        cr_expect(e.line == 4 && e.a == W && e.b == W, "%s: line %u index %lld", md->name, e.line,
                  (long long)e.a);
        release(&p);
    }
    char *text = checked_text(src, -1, 0);
    cr_expect(has(text, "loop.unchecked") && has(text, "loop.checked"),
              "the scalar path tests the loop's accesses before it");
    free(text);
}

/* Checked code in range computes what unchecked code computes, on several threads. */
Test(llvm_debug, checked_in_range_matches_plain_loop) {
    const char *src = "kernel k(a: f32[], b: f32[], q: i32[], out: f32[], n: i32) {\n"
                      "    for i in 0..n {\n"
                      "        out[i] = a[i] * b[(i * 5) % n] + f32(q[i] / (i % 7 + 1));\n"
                      "    }\n"
                      "}\n";
    enum { NN = 10007 };
    float *a = malloc(NN * sizeof *a), *b = malloc(NN * sizeof *b), *out = malloc(NN * 4);
    int32_t *q = malloc(NN * sizeof *q);
    cr_assert(a && b && out && q);
    for (int i = 0; i < NN; i++) {
        a[i] = (float)(i % 13) - 6.0f;
        b[i] = 0.25f * (float)(i % 5);
        q[i] = i * 3 - 5000;
    }
    for (int mi = 1; mi < NMODES; mi++) {
        const mode *md = &MODES[mi];
        prog p = build_mode(src, 3, md);
        int32_t n = NN;
        memset(out, 0, NN * sizeof *out);
        kern_array_desc da = desc(a, NN, 1, 1), db = desc(b, NN, 1, 1), dq = desc(q, NN, 1, 1),
                        dout = desc(out, NN, 1, 1);
        void *args[] = {&da, &db, &dq, &dout, &n};
        kern_err_record e = run_mt(&p, "k", args, 333, 3);
        cr_expect_eq(e.code, 0, "%s", md->name);
        for (int i = 0; i < NN; i++) {
            float want = a[i] * b[(i * 5) % NN] + (float)(q[i] / (i % 7 + 1));
            if (out[i] != want) {
                cr_expect_fail("%s: out[%d] = %g, want %g", md->name, i, out[i], want);
                break;
            }
        }
        release(&p);
    }
    free(a), free(b), free(out), free(q);
}

/* Checked code keeps the SIMD path: its task runs in lanes and records errors. */
Test(llvm_debug, checked_code_runs_in_lanes) {
    const char *src = "kernel k(a: f32[], out: f32[]) {\n"
                      "    for i in 0..len(out) { out[i] = a[i + 1] * 2.0; }\n"
                      "}\n";
    char *text = checked_text(src, 4, 2);
    cr_expect(has(text, "\"kern-simd\"=\"4 lanes\""), "checked code runs in 4 lanes");
    cr_expect(has(text, "kern.record_error"), "checked code records errors");
    free(text);
}

Test(llvm_debug, release_has_no_checks) {
    const char *src = "kernel k(a: i32[], b: i32[], out: i32[]) {\n"
                      "    for i in 0..len(out) { out[i] = (a[i] / b[i]) << (a[i] % b[i]); }\n"
                      "}\n";
    for (int dbg = 0; dbg < 2; dbg++) {
        for (int l = 0; l < 2; l++) {
            kc_ctx *c = kc_ctx_new();
            c->opts.opt_level = OPT_LEVELS[l];
            c->opts.debug = dbg;
            ir_module *m = kc_compile_source(c, "t.kern", src, strlen(src));
            cr_assert(m);
            char err[512];
            char *text = llvm_emit_text(m, &c->opts, err, sizeof err);
            cr_assert(text, "%s", err);
            cr_expect(has(text, "define void @kern_k__t0(") && has(text, " i64 @kern_k__t0_count("),
                      "both ABI functions are defined");
            if (dbg)
                cr_expect(has(text, "kern.record_error"), "-O%d debug code records errors",
                          OPT_LEVELS[l]);
            else
                cr_expect(!has(text, "record_error") && !has(text, "cmpxchg"),
                          "-O%d release code has no error path", OPT_LEVELS[l]);
            free(text);
            ir_module_free(m);
            kc_ctx_free(c);
        }
    }
}

/* Release builds: division by zero and INT_MIN / -1 do not trap (documented results). */
Test(llvm_debug, release_division_never_traps) {
    const char *src = "kernel k(a: i32[], b: i32[], q: i32[], r: i32[]) {\n"
                      "    for i in 0..len(a) { q[i] = a[i] / b[i]; r[i] = a[i] % b[i]; }\n"
                      "}\n";
    prog p = build(src, 3, false);
    int32_t a[3] = {INT32_MIN, 5, INT32_MIN}, b[3] = {-1, 0, 7}, q[3], r[3];
    kern_array_desc da = desc(a, 3, 1, 1), db = desc(b, 3, 1, 1), dq = desc(q, 3, 1, 1),
                    dr = desc(r, 3, 1, 1);
    void *args[] = {&da, &db, &dq, &dr};
    run(&p, "k", args, 3);
    cr_expect(q[0] == INT32_MIN && r[0] == 0, "INT_MIN / -1 wraps");
    cr_expect(q[1] == 5 && r[1] == 0, "x / 0 divides by 1 in release builds");
    cr_expect(q[2] == INT32_MIN / 7 && r[2] == INT32_MIN % 7);
    release(&p);
}
