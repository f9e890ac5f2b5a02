/* test_interp_adstack.c - adstacks and atomic_xchg in the interpreter: LIFO order, a reset per
 * work item, a pop from an empty stack, poison through a stack; and the interpreter
 * speed check (suite `interp_adstack`). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../compiler/driver.h"
#include "../ir/interp.h"
#include "../passes/passes.h"
#include "golden.h"
#include "interp_util.h"

/* ---- adstacks and atomic_xchg ------------------------------------------------------- */

/* Runs IR text with the given arguments; returns the error ("" on success). */
static bool run_text(const char *text, ir_interp_arg *args, int nargs, char *err, size_t errlen) {
    ir_module *m = parse_ir(text);
    bool ok = ir_interp_run(m, m->kernels->name, args, nargs, err, errlen);
    ir_module_free(m);
    return ok;
}

/* Pops return the values pushed, last first; each stack of the table is separate. */
Test(interp_adstack, adstack_pops_in_lifo_order) {
    const char *text = "kernel @t(%o: i32[], %of: f64[], %n: i32) {\n"
                       "  adstack i32 \"8\"\n"
                       "  adstack f64 \"(param 2)\"\n"
                       "  %z = const 0 : i32\n"
                       "  serial {\n"
                       "    %c1 = const 11 : i32\n"
                       "    %c2 = const 22 : i32\n"
                       "    %c3 = const 33 : i32\n"
                       "    %one = const 1 : i32\n"
                       "    %two = const 2 : i32\n"
                       "    %three = const 3 : i32\n"
                       "    adpush %c1, 0\n"
                       "    adpush %c2, 0\n"
                       "    for %j = %z to %n {\n"
                       "      %jj = mul %j, %j : i32\n"
                       "      %f = cast %jj : f64\n"
                       "      adpush %f, 1\n"
                       "      yield\n"
                       "    }\n"
                       "    adpush %c3, 0\n"
                       "    %p3 = adpop 0 : i32\n"
                       "    %p2 = adpop 0 : i32\n"
                       "    store %o[%z], %p3\n"
                       "    store %o[%one], %p2\n"
                       "    for %k = %z to %n {\n"
                       "      %g = adpop 1 : f64\n"
                       "      store %of[%k], %g\n"
                       "      yield\n"
                       "    }\n"
                       "    %p1 = adpop 0 : i32\n"
                       "    store %o[%two], %p1\n"
                       "  }\n"
                       "}\n";
    int32_t o[3] = {0};
    double of[5] = {0};
    ir_interp_arg args[3] = {ir_interp_array(TY_I32, o, 1, 3, 0, 0, 0),
                             ir_interp_array(TY_F64, of, 1, 5, 0, 0, 0), ir_interp_int(TY_I32, 5)};
    char err[512];
    cr_assert(run_text(text, args, 3, err, sizeof err), "%s", err);
    cr_expect_eq(o[0], 33);
    cr_expect_eq(o[1], 22);
    cr_expect_eq(o[2], 11);
    /* pushed 0, 1, 4, 9, 16: popped 16 first */
    const double want[5] = {16.0, 9.0, 4.0, 1.0, 0.0};
    for (int i = 0; i < 5; i++)
        cr_expect_eq(of[i], want[i], "of[%d] = %g, expected %g", i, of[i], want[i]);
}

/* Every parallel index runs with empty stacks, so each reads back only its own pushes,
 * here a triangular number of them (i + 1 for index i), more than the stack's first
 * allocation for the last items. */
Test(interp_adstack, adstack_per_work_item) {
    const char *text = "kernel @t(%x: f32[], %sum: f32[], %last: f32[]) {\n"
                       "  adstack f32 \"(dim 0 0)\"\n"
                       "  %z = const 0 : i32\n"
                       "  %one = const 1 : i32\n"
                       "  %n = dim %x, 0 : i32\n"
                       "  parallel (%i = %z to %n) {\n"
                       "    %hi = add %i, %one : i32\n"
                       "    for %j = %z to %hi {\n"
                       "      %v = load %x[%j] : f32\n"
                       "      adpush %v, 0\n"
                       "      yield\n"
                       "    }\n"
                       "    %first = adpop 0 : f32\n"
                       "    store %last[%i], %first\n"
                       "    %zf = const 0.0 : f32\n"
                       "    %s = for %j2 = %one to %hi iter(%acc = %first) : f32 {\n"
                       "      %w = adpop 0 : f32\n"
                       "      %acc2 = add %acc, %w : f32\n"
                       "      yield %acc2\n"
                       "    }\n"
                       "    store %sum[%i], %s\n"
                       "  }\n"
                       "}\n";
    enum { N = 40 };
    float x[N], sum[N] = {0}, last[N] = {0};
    for (int i = 0; i < N; i++)
        x[i] = (float)(i + 1) * 0.5f;
    ir_interp_arg args[3] = {ir_interp_array(TY_F32, x, 1, N, 0, 0, 0),
                             ir_interp_array(TY_F32, sum, 1, N, 0, 0, 0),
                             ir_interp_array(TY_F32, last, 1, N, 0, 0, 0)};
    char err[512];
    cr_assert(run_text(text, args, 3, err, sizeof err), "%s", err);
    for (int i = 0; i < N; i++) {
        /* pops x[i], x[i-1], ..., x[0], summed in that order in float */
        float s = x[i];
        for (int j = i - 1; j >= 0; j--)
            s += x[j];
        cr_expect_eq(last[i], x[i], "last[%d]", i);
        cr_expect_eq(sum[i], s, "sum[%d] = %g, expected %g", i, sum[i], s);
    }
}

/* A value left on a stack by one work item is not seen by the next: its pop finds the
 * stack empty, which is a run-time error naming the op, never a crash. */
Test(interp_adstack, adstack_empty_pop_is_an_error) {
    const char *par = "kernel @t(%o: f32[], %n: i32) {\n"
                      "  adstack f32 \"1\"\n"
                      "  %z = const 0 : i32\n"
                      "  parallel (%i = %z to %n) {\n"
                      "    %c = eq %i, %z : bool\n"
                      "    if %c {\n"
                      "      %v = const 1.5 : f32\n"
                      "      adpush %v, 0\n"
                      "      yield\n"
                      "    } else {\n"
                      "      %p = adpop 0 : f32 !11:7\n"
                      "      store %o[%i], %p\n"
                      "      yield\n"
                      "    }\n"
                      "  }\n"
                      "}\n";
    float o[2] = {0};
    ir_interp_arg args[2] = {ir_interp_array(TY_F32, o, 1, 2, 0, 0, 0), ir_interp_int(TY_I32, 2)};
    char err[512];
    cr_assert(!run_text(par, args, 2, err, sizeof err));
    cr_expect_str_eq(err, "11:7: @t: adpop: adstack 0 is empty (this work item popped more "
                          "values than it pushed)");
    /* one index alone runs: a value left on the stack at its end is no error */
    args[1] = ir_interp_int(TY_I32, 1);
    cr_expect(run_text(par, args, 2, err, sizeof err), "%s", err);

    const char *ser = "kernel @t(%x: i64) {\n"
                      "  adstack i64 \"1\"\n"
                      "  serial {\n"
                      "    adpush %x, 0\n"
                      "  }\n"
                      "  serial {\n"
                      "    %p = adpop 0 : i64 !7:5\n"
                      "  }\n"
                      "}\n";
    ir_interp_arg sargs[1] = {ir_interp_int(TY_I64, 3)};
    cr_assert(!run_text(ser, sargs, 1, err, sizeof err));
    cr_expect_str_eq(err, "7:5: @t: adpop: adstack 0 is empty (this work item popped more "
                          "values than it pushed)");
}

/* An undefined value (poison) keeps its poison through a push and a pop. */
Test(interp_adstack, adstack_carries_poison) {
    const char *text = "kernel @t(%x: f32, %o: i32[]) {\n"
                       "  adstack i32 \"1\"\n"
                       "  adstack i32 \"1\"\n"
                       "  serial {\n"
                       "    %z = const 0 : i32\n"
                       "    %p = cast %x : i32 !5:3\n"
                       "    %d = const 4 : i32\n"
                       "    adpush %p, 0\n"
                       "    adpush %d, 1\n"
                       "    %q = adpop 1 : i32\n"
                       "    store %o[%z], %q\n"
                       "    %r = adpop 0 : i32\n"
                       "    store %o[%z], %r !13:5\n"
                       "  }\n"
                       "}\n";
    int32_t o[1] = {0};
    ir_interp_arg args[2] = {ir_interp_float(TY_F32, 3e9),
                             ir_interp_array(TY_I32, o, 1, 1, 0, 0, 0)};
    char err[512];
    cr_assert(!run_text(text, args, 2, err, sizeof err));
    cr_expect_eq(o[0], 4); /* the defined value popped from the other stack was stored */
    const char *want = "13:5: @t: store: the stored value is undefined: it comes from an "
                       "out-of-range cast (f32 3000000000 to i32) at 5:3";
    cr_expect_str_eq(err, want);
}

/* atomic_xchg stores the new value and returns the old one, for every element type. */
Test(interp_adstack, atomic_xchg_returns_the_old_value) {
    const char *text = "kernel @t(%a: i32[], %u: u32[], %l: i64[,], %f: f32[], %d: f64[], "
                       "%o: f64[]) {\n"
                       "  %z = const 0 : i32\n"
                       "  %one = const 1 : i32\n"
                       "  %two = const 2 : i32\n"
                       "  %three = const 3 : i32\n"
                       "  %four = const 4 : i32\n"
                       "  serial {\n"
                       "    %vi = const -7 : i32\n"
                       "    %oi = atomic_xchg %a[%one], %vi : i32\n"
                       "    %oi2 = atomic_xchg %a[%one], %oi : i32\n"
                       "    %vu = const 4000000000 : u32\n"
                       "    %ou = atomic_xchg %u[%z], %vu : u32\n"
                       "    %vl = const -9000000000 : i64\n"
                       "    %ol = atomic_xchg %l[%one, %z], %vl : i64\n"
                       "    %vf = const -0.0 : f32\n"
                       "    %of = atomic_xchg %f[%z], %vf : f32\n"
                       "    %vd = const 0.1 : f64\n"
                       "    %od = atomic_xchg %d[%z], %vd : f64\n"
                       "    %c0 = cast %oi2 : f64\n"
                       "    %c1 = cast %ou : f64\n"
                       "    %c2 = cast %ol : f64\n"
                       "    %c3 = cast %of : f64\n"
                       "    store %o[%z], %c0\n"
                       "    store %o[%one], %c1\n"
                       "    store %o[%two], %c2\n"
                       "    store %o[%three], %c3\n"
                       "    store %o[%four], %od\n"
                       "  }\n"
                       "}\n";
    int32_t a[2] = {5, 6};
    uint32_t u[1] = {3000000000u};
    int64_t l[2][2] = {{1, 2}, {3, 4}};
    float f[1] = {2.5f};
    double d[1] = {-1.0}, o[5] = {0};
    ir_interp_arg args[6] = {
        ir_interp_array(TY_I32, a, 1, 2, 0, 0, 0), ir_interp_array(TY_U32, u, 1, 1, 0, 0, 0),
        ir_interp_array(TY_I64, l, 2, 2, 2, 0, 0), ir_interp_array(TY_F32, f, 1, 1, 0, 0, 0),
        ir_interp_array(TY_F64, d, 1, 1, 0, 0, 0), ir_interp_array(TY_F64, o, 1, 5, 0, 0, 0)};
    char err[512];
    cr_assert(run_text(text, args, 6, err, sizeof err), "%s", err);
    cr_expect_eq(o[0], -7.0); /* the second exchange returned what the first stored */
    cr_expect_eq(a[1], 6);    /* ... and put the original back */
    cr_expect_eq(a[0], 5);
    cr_expect_eq(o[1], 3000000000.0);
    cr_expect_eq(u[0], 4000000000u);
    cr_expect_eq(o[2], 3.0);
    cr_expect_eq(l[1][0], -9000000000LL);
    cr_expect_eq(l[0][0], 1);
    cr_expect_eq(o[3], 2.5);
    cr_expect_eq(f32_bits(f[0]), f32_bits(-0.0f));
    cr_expect_eq(o[4], -1.0);
    cr_expect_eq(d[0], 0.1);
}

Test(interp_adstack, speed) {
    static const char src[] = "kernel busy(out: f32[], n: i32) {\n"
                              "    for i in 0..len(out) {\n"
                              "        var s = 0.0;\n"
                              "        for j in 0..n {\n"
                              "            s += f32(j % 7) * 0.5;\n"
                              "        }\n"
                              "        out[i] = s;\n"
                              "    }\n"
                              "}\n";
    ir_module *m = compile_at("busy", src, 2);
    float out[100];
    ir_interp_arg args[2] = {ir_interp_array(TY_F32, out, 1, 100, 0, 0, 0),
                             ir_interp_int(TY_I32, 20000)};
    ir_interp_options o = {0, 0, 0, 0};
    char err[256];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert(ir_interp_run_opts(m, "busy", args, 2, &o, err, sizeof err), "%s", err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ir_module_free(m);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    float s = 0.0f;
    for (int32_t j = 0; j < 20000; j++)
        s += (float)(j % 7) * 0.5f;
    cr_expect_eq(out[99], s);
    cr_expect_geq(o.ops_executed, 100u * 20000u * 5u);
    fprintf(stderr, "interp speed: %llu ops in %.3f s (%.1f M ops/s)\n",
            (unsigned long long)o.ops_executed, secs, (double)o.ops_executed / secs / 1e6);
}
