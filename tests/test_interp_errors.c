/* test_interp_errors.c - the interpreter's error paths and their messages: out of bounds,
 * negative indices, division by zero, shifts, casts out of range, poison, a while that
 * does not terminate, bad arguments, IR that does not verify (suite `interp_errors`). */
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

/* ---- Errors ------------------------------------------------------------------------- */

/* The message of a failing run at both levels must contain `want` (the same at both). */
static void expect_error_both(const compiled *c, const char *kernel, ir_interp_arg *in, int n,
                              ir_interp_options *opts, const char *want) {
    for (int l = 0; l < 2; l++) {
        char err[512];
        run_expect_error(c, l, kernel, in, n, opts, err, sizeof err);
        cr_expect(strstr(err, want), "%s -O%d: message '%s' lacks '%s'", c->name, opt_levels[l],
                  err, want);
    }
}

Test(interp_errors, error_store_out_of_bounds) {
    static const char src[] = "kernel oob(x: f32[]) {\n"
                              "    for i in 0..len(x) + 1 {\n"
                              "        x[i] = 1.0;\n"
                              "    }\n"
                              "}\n";
    compiled c = compile_src("oob", src);
    ir_interp_arg in[1] = {arr(TY_F32, 1, 4, 0, 0)};
    expect_error_both(&c, "oob", in, 1, NULL,
                      "3:14: @oob: store: index 4 is out of bounds for dimension 0 of 'x' "
                      "(extent 4)");
    /* what was written before the error stays written */
    char err[256];
    cr_assert(!ir_interp_run(c.m[0], "oob", in, 1, err, sizeof err));
    for (int i = 0; i < 4; i++)
        cr_expect_eq(F32(in[0])[i], 1.0f);
    free_args(in, 1);
    compiled_free(&c);
}

Test(interp_errors, error_load_out_of_bounds_names_the_dimension) {
    static const char src[] = "kernel oob2(a: i32[,], out: i32[]) {\n"
                              "    for i in 0..shape(a, 0) {\n"
                              "        out[i] = a[i, i + 1];\n"
                              "    }\n"
                              "}\n";
    compiled c = compile_src("oob2", src);
    ir_interp_arg in[2] = {arr(TY_I32, 2, 3, 3, 0), arr(TY_I32, 1, 3, 0, 0)};
    expect_error_both(&c, "oob2", in, 2, NULL,
                      "3:18: @oob2: load: index 3 is out of bounds for dimension 1 of 'a' "
                      "(extent 3)");
    free_args(in, 2);
    compiled_free(&c);
}

Test(interp_errors, error_negative_index) {
    static const char src[] = "kernel neg(a: i32[], k: i32) {\n"
                              "    a[k] += 1;\n"
                              "}\n";
    compiled c = compile_src("neg", src);
    ir_interp_arg in[2] = {arr(TY_I32, 1, 3, 0, 0), ir_interp_int(TY_I32, -1)};
    expect_error_both(&c, "neg", in, 2, NULL,
                      "index -1 is out of bounds for dimension 0 of 'a' (extent 3)");
    free_args(in, 2);
    compiled_free(&c);
}

static const char divmod_src[] = "kernel dz(a: i32[], b: i32[], u: u32[], w: i64[]) {\n"
                                 "    for i in 0..len(a) {\n"
                                 "        a[i] = a[i] / b[i];\n"
                                 "    }\n"
                                 "    for i in 0..len(u) {\n"
                                 "        u[i] = u[i] % u[0];\n"
                                 "    }\n"
                                 "    w[0] = w[0] / w[1];\n"
                                 "}\n";

Test(interp_errors, error_division_by_zero) {
    compiled c = compile_src("dz", divmod_src);
    ir_interp_arg in[4] = {arr(TY_I32, 1, 3, 0, 0), arr(TY_I32, 1, 3, 0, 0),
                           arr(TY_U32, 1, 0, 0, 0), arr(TY_I64, 1, 2, 0, 0)};
    I32(in[1])[0] = 1, I32(in[1])[1] = 0, I32(in[1])[2] = 2;
    I64(in[3])[1] = 1;
    expect_error_both(&c, "dz", in, 4, NULL, "3:21: @dz: integer division by zero (i32)");
    /* a u32 remainder by zero */
    I32(in[1])[1] = 5;
    free_args(&in[2], 1);
    in[2] = arr(TY_U32, 1, 2, 0, 0);
    expect_error_both(&c, "dz", in, 4, NULL, "6:21: @dz: integer remainder by zero (u32)");
    /* INT64_MIN / -1 is not an error: it wraps, as the CPU backend defines it (and as
     * simplify's x / -1 -> -x computes it) (u[0] % u[0] is 0 with one element) */
    free_args(&in[2], 1);
    in[2] = arr(TY_U32, 1, 1, 0, 0);
    U32(in[2])[0] = 3;
    I64(in[3])[0] = INT64_MIN, I64(in[3])[1] = -1;
    for (int l = 0; l < 2; l++) {
        char err[256];
        ir_interp_arg got[4];
        clone_args(got, in, 4);
        cr_expect(ir_interp_run(c.m[l], "dz", got, 4, err, sizeof err), "%s", err);
        cr_expect_eq(I64(got[3])[0], INT64_MIN);
        free_args(got, 4);
    }
    free_args(in, 4);
    compiled_free(&c);
}

Test(interp_errors, error_shift_out_of_range) {
    static const char src[] = "kernel sh(a: i32[], s: i32) {\n"
                              "    for i in 0..len(a) {\n"
                              "        a[i] = a[i] << s;\n"
                              "    }\n"
                              "}\n";
    compiled c = compile_src("sh", src);
    ir_interp_arg in[2] = {arr(TY_I32, 1, 2, 0, 0), ir_interp_int(TY_I32, 32)};
    expect_error_both(&c, "sh", in, 2, NULL,
                      "3:21: @sh: shift count 32 is out of range for i32 (0 to 31)");
    in[1] = ir_interp_int(TY_I32, -1);
    expect_error_both(&c, "sh", in, 2, NULL, "shift count -1 is out of range for i32");
    in[1] = ir_interp_int(TY_I32, 31); /* the largest valid count */
    char err[256];
    cr_expect(ir_interp_run(c.m[0], "sh", in, 2, err, sizeof err), "%s", err);
    free_args(in, 2);
    compiled_free(&c);
}

/* A float -> int cast out of range gives an undefined value (poison): the run fails where
 * it is used (here stored), naming the cast. */
Test(interp_errors, error_cast_out_of_range_is_undefined_where_used) {
    static const char src[] = "kernel cv(x: f32[], a: i32[]) {\n"
                              "    for i in 0..len(x) {\n"
                              "        a[i] = i32(x[i]);\n"
                              "    }\n"
                              "}\n";
    compiled c = compile_src("cv", src);
    ir_interp_arg in[2] = {arr(TY_F32, 1, 2, 0, 0), arr(TY_I32, 1, 2, 0, 0)};
    F32(in[0])[0] = -2147483648.0f, F32(in[0])[1] = 3e9f;
    expect_error_both(&c, "cv", in, 2, NULL,
                      "3:14: @cv: store: the stored value is undefined: it comes from an "
                      "out-of-range cast (f32 3000000000 to i32) at 3:16");
    F32(in[0])[1] = NAN;
    expect_error_both(&c, "cv", in, 2, NULL, "out-of-range cast (f32 nan to i32) at 3:16");
    free_args(in, 2);
    compiled_free(&c);
}

/* The lowering (and simplify) evaluate a cast guarded by ?: eagerly, as a select: an
 * out-of-range value on the branch not taken must not stop the run. */
static const char guarded_cast_src[] = "kernel gc(x: f32[], out: i32[]) {\n"
                                       "    for i in 0..len(x) {\n"
                                       "        let v = x[i];\n"
                                       "        let ok = v < 1e9 && v > -1e9;\n"
                                       "        out[i] = ok ? i32(v) : -1;\n"
                                       "        if ok {\n"
                                       "            out[i] += i32(v * 2.0);\n"
                                       "        }\n"
                                       "    }\n"
                                       "}\n";

Test(interp_errors, guarded_out_of_range_cast_is_not_an_error) {
    compiled c = compile_src("gc", guarded_cast_src);
    rng r = {112};
    int64_t n = 20;
    ir_interp_arg in[2] = {arr(TY_F32, 1, n, 0, 0), arr(TY_I32, 1, n, 0, 0)};
    float special[] = {3e9f, -3e9f, NAN, INFINITY, -INFINITY, 1e9f, -0.5f, 2.5f};
    for (int64_t i = 0; i < n; i++)
        F32(in[0])[i] = i < 8 ? special[i] : rng_f32(&r, -1e6f, 1e6f);
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int64_t i = 0; i < n; i++) {
        float v = F32(ref[0])[i];
        bool ok = v < 1e9f && v > -1e9f;
        I32(ref[1])[i] = ok ? (int32_t)v : -1;
        if (ok)
            I32(ref[1])[i] += (int32_t)(v * 2.0f);
    }
    check_runs(&c, "gc", in, ref, 2, 0, "out-of-range values on the untaken side");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

/* Poison on hand-written IR: through arithmetic and the chosen arm of a select it stops
 * the run at a store, an index, a divisor, a branch; unused or unchosen it does not. */
Test(interp_errors, poison_propagation) {
    static const char *const uses[][2] = {
        {"    %s = select %c, %q, %one : i32\n    store %o[%z], %s !9:7\n",
         "9:7: @t: store: the stored value is undefined: it comes from an out-of-range cast "
         "(f32 3000000000 to i32) at 2:3"},
        {"    store %o[%q], %one !9:7\n", "9:7: @t: store: the index is undefined"},
        {"    %d = div %one, %q : i32 !9:7\n", "9:7: @t: div: the divisor is undefined"},
        {"    %d = shl %one, %q : i32 !9:7\n", "9:7: @t: shl: the shift count is undefined"},
        {"    %b = lt %q, %one : bool\n    if %b !9:7 {\n      yield\n    } else {\n"
         "      yield\n    }\n",
         "9:7: @t: if: the condition is undefined"},
        {"    %r = for %i = %z to %q iter(%a = %one) : i32 !9:7 {\n      yield %a\n    }\n",
         "9:7: @t: for: the upper bound is undefined"},
        /* not errors: an unused poison, a poison dividend, the arm a select does not pick,
         * a poison carried through a loop and dropped */
        {"    %d = div %q, %one : i32\n    %s = select %c, %one, %q : i32\n"
         "    store %o[%z], %s\n"
         "    %r = for %i = %z to %one iter(%a = %q) : i32 {\n      yield %a\n    }\n",
         NULL},
    };
    for (size_t u = 0; u < sizeof uses / sizeof uses[0]; u++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "kernel @t(%%x: f32, %%c: bool, %%o: i32[]) {\n"
                 "  serial {\n"
                 "    %%z = const 0 : i32\n"
                 "    %%p = cast %%x : i32 !2:3\n"
                 "    %%one = const 1 : i32\n"
                 "    %%q = add %%p, %%one : i32\n"
                 "%s"
                 "  }\n"
                 "}\n",
                 uses[u][0]);
        ir_module *m = parse_ir(text);
        int32_t o[2] = {7, 7};
        ir_interp_arg args[3] = {ir_interp_float(TY_F32, 3e9), ir_interp_int(TY_BOOL, 1),
                                 ir_interp_array(TY_I32, o, 1, 2, 0, 0, 0)};
        char err[512];
        bool ok = ir_interp_run(m, "t", args, 3, err, sizeof err);
        if (uses[u][1])
            cr_expect(!ok && !strncmp(err, uses[u][1], strlen(uses[u][1])),
                      "use %zu: got '%s', want '%s...'", u, ok ? "(success)" : err, uses[u][1]);
        else
            cr_expect(ok && o[0] == 1, "use %zu: %s (o[0] = %d)", u, ok ? "" : err, o[0]);
        ir_module_free(m);
    }
}

Test(interp_errors, error_while_does_not_terminate) {
    static const char src[] = "kernel spin(x: f32[]) {\n"
                              "    var k = 0;\n"
                              "    while x[0] > 0.0 {\n"
                              "        k += 1;\n"
                              "    }\n"
                              "    x[1] = f32(k);\n"
                              "}\n";
    compiled c = compile_src("spin", src);
    ir_interp_arg in[1] = {arr(TY_F32, 1, 2, 0, 0)};
    F32(in[0])[0] = 1.0f;
    ir_interp_options o = {1000, 0, 0, 0};
    expect_error_both(&c, "spin", in, 1, &o,
                      "3:5: @spin: while loop did not terminate after 1000 iterations");
    ir_interp_options lim = {0, 0, 500, 0}; /* the op budget stops it first */
    expect_error_both(&c, "spin", in, 1, &lim, "the run exceeded its limit of 500 ops");
    F32(in[0])[0] = -1.0f; /* terminates at once */
    char err[256];
    cr_expect(ir_interp_run_opts(c.m[1], "spin", in, 1, &o, err, sizeof err), "%s", err);
    cr_expect_eq(F32(in[0])[1], 0.0f);
    free_args(in, 1);
    compiled_free(&c);
}

Test(interp_errors, error_bad_arguments) {
    compiled c = compile_golden("saxpy.kern");
    float x[3] = {0}, y[3] = {0};
    char err[256];
    struct {
        ir_interp_arg args[3];
        int n;
        const char *kernel, *want;
    } cases[] = {
        {{ir_interp_float(TY_F32, 1), ir_interp_array(TY_F32, x, 1, 3, 0, 0, 0)},
         2,
         "saxpy",
         "@saxpy: 2 arguments given, the kernel has 3 parameters"},
        {{ir_interp_float(TY_F64, 1), ir_interp_array(TY_F32, x, 1, 3, 0, 0, 0),
          ir_interp_array(TY_F32, y, 1, 3, 0, 0, 0)},
         3,
         "saxpy",
         "@saxpy: argument 0 ('a': f32) is not a scalar of that type"},
        {{ir_interp_float(TY_F32, 1), ir_interp_array(TY_F32, x, 2, 1, 3, 0, 0),
          ir_interp_array(TY_F32, y, 1, 3, 0, 0, 0)},
         3,
         "saxpy",
         "@saxpy: argument 1 ('x': f32[]) is not an array of that type"},
        {{ir_interp_float(TY_F32, 1), ir_interp_array(TY_F32, x, 1, 3, 0, 0, 0),
          ir_interp_array(TY_I32, y, 1, 3, 0, 0, 0)},
         3,
         "saxpy",
         "@saxpy: argument 2 ('y': f32[]) is not an array of that type"},
        {{ir_interp_float(TY_F32, 1), ir_interp_array(TY_F32, x, 1, -1, 0, 0, 0),
          ir_interp_array(TY_F32, y, 1, 3, 0, 0, 0)},
         3,
         "saxpy",
         "@saxpy: argument 1 ('x'): extent -1 of dimension 0 is out of range"},
        {{ir_interp_float(TY_F32, 1), ir_interp_array(TY_F32, NULL, 1, 3, 0, 0, 0),
          ir_interp_array(TY_F32, y, 1, 3, 0, 0, 0)},
         3,
         "saxpy",
         "@saxpy: argument 1 ('x'): no data"},
        {{ir_interp_float(TY_F32, 1)}, 1, "nosuch", "no kernel named 'nosuch'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool ok =
            ir_interp_run(c.m[0], cases[i].kernel, cases[i].args, cases[i].n, err, sizeof err);
        cr_expect(!ok && !strcmp(err, cases[i].want), "case %zu: got '%s', want '%s'", i,
                  ok ? "(success)" : err, cases[i].want);
    }
    compiled_free(&c);
    /* an integer scalar that does not fit its parameter */
    ir_module *m = parse_ir("kernel @k(%n: i32) {\n}\n");
    ir_interp_arg big = ir_interp_int(TY_I32, 1LL << 31);
    cr_expect(!ir_interp_run(m, "k", &big, 1, err, sizeof err));
    cr_expect_str_eq(err, "@k: argument 0 ('n'): 2147483648 does not fit in i32");
    ir_module_free(m);
}

Test(interp_errors, error_ir_that_does_not_verify) {
    ir_module *m = parse_ir("kernel @t(%f: f32, %d: f64) {\n"
                            "  serial {\n"
                            "    %0 = add %f, %d : f32 !4:2\n"
                            "  }\n"
                            "}\n");
    ir_interp_arg args[2] = {ir_interp_float(TY_F32, 1), ir_interp_float(TY_F64, 2)};
    char err[512];
    cr_expect(!ir_interp_run(m, "t", args, 2, err, sizeof err));
    cr_expect(!strncmp(err, "the IR does not verify: 4:2: @t: 'add'", 38), "got '%s'", err);
    ir_module_free(m);
}

/* Lowered IR in checked mode (passes/lower_semantics.c, as kernc gradcheck runs it): the
 * interpreter stops at the `check` op before the division, with its location; a shift's
 * check names the count. */
Test(interp_errors, lowered_checks_stop_the_run) {
    kc_ctx *ctx = kc_ctx_new();
    ctx->opts.debug = true;
    ir_module *m = kc_compile_source(ctx, "dz", divmod_src, strlen(divmod_src));
    cr_assert(m && m->lowered);
    ir_interp_arg in[4] = {arr(TY_I32, 1, 3, 0, 0), arr(TY_I32, 1, 3, 0, 0),
                           arr(TY_U32, 1, 0, 0, 0), arr(TY_I64, 1, 2, 0, 0)};
    I32(in[0])[1] = 7;
    I32(in[1])[0] = 1, I32(in[1])[1] = 0, I32(in[1])[2] = 2;
    I64(in[3])[1] = 1;
    char err[256];
    cr_expect(!ir_interp_run(m, "dz", in, 4, err, sizeof err));
    cr_expect_str_eq(err, "3:21: @dz: integer division by zero (dividend 7)");
    free_args(in, 4);
    ir_module_free(m);
    static const char sh[] = "kernel sh(a: i32[], s: i32) {\n"
                             "    for i in 0..len(a) { a[i] = a[i] << s; }\n"
                             "}\n";
    m = kc_compile_source(ctx, "sh", sh, strlen(sh));
    cr_assert(m);
    ir_interp_arg in2[2] = {arr(TY_I32, 1, 2, 0, 0), ir_interp_int(TY_I32, -1)};
    cr_expect(!ir_interp_run(m, "sh", in2, 2, err, sizeof err));
    cr_expect_str_eq(err, "2:38: @sh: shift count -1 is out of range (0 to 31)");
    free_args(in2, 2);
    ir_module_free(m);
    kc_ctx_free(ctx);
}
