/* test_llvm_debug.c - the LLVM CPU backend in debug mode: bounds, division by zero and
 * shift errors with their line:col, the faulting operation skipped; release code without
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

/* ---- debug mode --------------------------------------------------------------------- */

Test(llvm_debug, debug_bounds_load_and_store) {
    /* columns counted by hand: `a` of a[i] on line 3 is column 18; the store's `=` col 16 */
    const char *src = "kernel dbg(a: f32[], out: f32[], n: i32) {\n"
                      "    for i in 0..n {\n"
                      "        out[i] = a[i] * 2.0;\n"
                      "    }\n"
                      "}\n";
    prog p = build(src, 2, true);
    float a[4] = {1, 2, 3, 4}, buf[10];
    for (int i = 0; i < 10; i++)
        buf[i] = -1.0f;
    int32_t n = 6;
    /* out has 8 elements, a 4: a[4], a[5] fail */
    kern_array_desc da = desc(a, 4, 1, 1), dout = desc(buf, 8, 1, 1);
    void *args[] = {&da, &dout, &n};
    kern_err_record e = run(&p, "dbg", args, 100);
    cr_assert_eq(e.code, KERN_DEVERR_BOUNDS);
    cr_expect_eq(e.line, 3);
    cr_expect_eq(e.col, 18);
    cr_expect_eq(e.dim, 0);
    cr_expect_eq(e.a, 4, "the first failing index wins");
    cr_expect_eq(e.b, 4);
    for (int i = 0; i < 4; i++)
        cr_expect(buf[i] == a[i] * 2.0f);
    cr_expect(buf[4] == 0.0f && buf[5] == 0.0f, "a failed load yields 0");
    cr_expect(buf[6] == -1.0f && buf[7] == -1.0f);

    /* now the store is out of bounds: out has 3 elements of a bigger buffer */
    n = 4;
    for (int i = 0; i < 10; i++)
        buf[i] = -1.0f;
    dout = desc(buf, 3, 1, 1);
    e = run(&p, "dbg", args, 1);
    cr_assert_eq(e.code, KERN_DEVERR_BOUNDS);
    cr_expect_eq(e.line, 3);
    cr_expect_eq(e.col, 16);
    cr_expect(e.a == 3 && e.b == 3 && e.dim == 0);
    cr_expect(buf[2] == 6.0f && buf[3] == -1.0f, "the store past the end is dropped");
    release(&p);
}

Test(llvm_debug, debug_bounds_2d_negative_index) {
    const char *src = "kernel d2(m: i32[,], out: i32[], k: i32) {\n"
                      "    for i in 0..len(out) {\n"
                      "        out[i] = m[i, i - k];\n"
                      "    }\n"
                      "}\n";
    prog p = build(src, 3, true);
    int32_t m[3][3] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}, out[3] = {-1, -1, -1}, k = 1;
    kern_array_desc dm = desc(m, 3, 3, 1), dout = desc(out, 3, 1, 1);
    void *args[] = {&dm, &dout, &k};
    kern_err_record e = run(&p, "d2", args, 1);
    cr_assert_eq(e.code, KERN_DEVERR_BOUNDS);
    cr_expect(e.line == 3 && e.col == 18, "at %u:%u", e.line, e.col);
    cr_expect(e.dim == 1 && e.a == -1 && e.b == 3, "dim %d index %lld extent %lld", e.dim,
              (long long)e.a, (long long)e.b);
    cr_expect(out[0] == 0 && out[1] == 4 && out[2] == 8);
    release(&p);
}

Test(llvm_debug, debug_div_zero_and_shift) {
    const char *src = "kernel ds(a: i32[], b: i32[], q: i32[], s: i64[], sh: i64[]) {\n"
                      "    for i in 0..len(a) {\n"
                      "        q[i] = a[i] / b[i];\n"
                      "        s[i] = i64(a[i]) << sh[i];\n"
                      "    }\n"
                      "}\n";
    prog p = build(src, 3, true);
    int32_t a[4] = {7, 8, 9, 10}, b[4] = {2, 0, 3, 0}, q[4];
    int64_t s[4], sh[4] = {1, 2, 64, 3};
    kern_array_desc da = desc(a, 4, 1, 1), db = desc(b, 4, 1, 1), dq = desc(q, 4, 1, 1),
                    dsv = desc(s, 4, 1, 1), dsh = desc(sh, 4, 1, 1);
    void *args[] = {&da, &db, &dq, &dsv, &dsh};
    kern_err_record e = run(&p, "ds", args, 4);
    cr_assert_eq(e.code, KERN_DEVERR_DIV_ZERO);
    cr_expect(e.line == 3 && e.col == 21, "at %u:%u", e.line, e.col);
    /* the checked arithmetic goes on with the release results (passes/lower_semantics.c) */
    cr_expect(q[0] == 3 && q[1] == 8 && q[2] == 3 && q[3] == 10,
              "a failed division divides by 1");
    cr_expect(s[0] == 14 && s[1] == 32 && s[2] == 9 && s[3] == 80,
              "a failed shift masks its count");

    /* no division error: the shift's error is recorded */
    b[1] = b[3] = 1;
    e = run(&p, "ds", args, 4);
    cr_assert_eq(e.code, KERN_DEVERR_SHIFT);
    cr_expect(e.line == 4 && e.col == 26, "at %u:%u", e.line, e.col);
    cr_expect(e.a == 64 && e.b == 64);
    release(&p);
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
