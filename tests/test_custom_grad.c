/* test_custom_grad.c - custom adjoints of funcs and custom gradient kernels (grad clauses,
 * docs/autodiff.md "Custom gradients").
 *
 * The kernels run on the test device (test_backend.h: the CPU, or Vulkan/CUDA with
 * $KERN_TEST_BACKEND) through the public API, whose JIT builds K.grad lazily; the
 * references are plain C loops in f64 (hand-derived derivatives) and f64 central finite
 * differences of those loops, never the code under test. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compiler/driver.h"
#include "../compiler/lower.h"
#include "../include/kern.h"
#include "../ir/ir.h"
#include "../passes/passes.h"
#include "test_backend.h"

enum { N = 8 };

static kern_context *ctx_new(void) {
    kern_context_options o = kern_context_options_default();
    o.backend = kern_test_backend();
    kern_context *ctx;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    return ctx;
}

static kern_module *compile(kern_context *ctx, const char *src) {
    kern_module *m = NULL;
    kern_status st = kern_module_from_source(ctx, src, strlen(src), "custom.kern", &m);
    cr_assert_eq(st, KERN_OK, "%s", kern_context_last_error(ctx));
    return m;
}

static kern_buffer *vec(kern_context *ctx, const float *d) {
    kern_buffer *b;
    int64_t shape[1] = {N};
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, shape, d, &b), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    return b;
}

static void launch(kern_context *ctx, kern_module *m, const char *name, kern_arg *a, int n) {
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, name, &k), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_launch(k, a, n), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_sync(ctx), KERN_OK, "%s", kern_context_last_error(ctx));
}

static void read(kern_buffer *b, float *out) {
    cr_assert_eq(kern_buffer_read(b, out, sizeof(float) * N), KERN_OK);
}

static void expect_close(double got, double want, double tol, const char *what, int i) {
    cr_expect(fabs(got - want) <= tol * fmax(1.0, fabs(want)), "%s[%d]: got %.9g, want %.9g", what,
              i, got, want);
}

/* ---- a custom adjoint inside a while loop ------------------------------------------ */

/* softplus in its stable form; its adjoint is dr * sigmoid(x) times `factor` (1: the true
 * derivative; 2: a deliberately wrong one, to show that the adjoint is the one used) */
static const char *softplus_src(double factor) {
    static char src[1024];
    snprintf(src, sizeof src,
             "func softplus(x: f32) -> f32 grad softplus_adj {\n"
             "    return max(x, 0.0) + log(1.0 + exp(-abs(x)));\n"
             "}\n"
             "func softplus_adj(x: f32, r: f32, dr: f32) -> f32 {\n"
             "    return %.1f * dr / (1.0 + exp(-x));\n"
             "}\n"
             "kernel k(x: f32[], y: f32[], n: i32) {\n"
             "    for i in 0..len(x) {\n"
             "        var s = x[i];\n"
             "        var t = 0;\n"
             "        while t < n {\n"
             "            s = softplus(s) * 0.5 + 0.1 * s;\n"
             "            t += 1;\n"
             "        }\n"
             "        y[i] = s;\n"
             "    }\n"
             "}\n",
             factor);
    return src;
}

static double softplus(double x) { return fmax(x, 0.0) + log1p(exp(-fabs(x))); }
static double ref_forward(double x, int n) {
    for (int t = 0; t < n; t++)
        x = softplus(x) * 0.5 + 0.1 * x;
    return x;
}
/* d y / d x by the chain rule, each step's derivative times `factor` on softplus' part */
static double ref_deriv(double x, int n, double factor) {
    double d = 1.0;
    for (int t = 0; t < n; t++) {
        d *= factor * 0.5 / (1.0 + exp(-x)) + 0.1;
        x = softplus(x) * 0.5 + 0.1 * x;
    }
    return d;
}

static void run_softplus(double factor) {
    const int n = 5;
    kern_context *ctx = ctx_new();
    kern_module *m = compile(ctx, softplus_src(factor));
    float x[N], zero[N] = {0}, ones[N], y[N], gx[N];
    for (int i = 0; i < N; i++) {
        x[i] = -3.0f + 0.8f * (float)i;
        ones[i] = 1;
    }
    kern_buffer *bx = vec(ctx, x), *by = vec(ctx, zero), *bgx = vec(ctx, zero),
                *bgy = vec(ctx, ones);
    kern_arg a[5] = {kern_arg_buffer(bx), kern_arg_buffer(by), kern_arg_i32(n),
                     kern_arg_buffer(bgx), kern_arg_buffer(bgy)};
    launch(ctx, m, "k", a, 3);
    read(by, y);
    launch(ctx, m, "k.grad", a, 5);
    read(bgx, gx);
    for (int i = 0; i < N; i++) {
        expect_close(y[i], ref_forward(x[i], n), 1e-5, "y", i);
        expect_close(gx[i], ref_deriv(x[i], n, factor), 1e-5, "x.grad", i);
        if (factor == 1.0) { /* and against f64 finite differences */
            double h = 1e-6;
            double fd = (ref_forward(x[i] + h, n) - ref_forward(x[i] - h, n)) / (2 * h);
            expect_close(gx[i], fd, 1e-4, "x.grad vs fd", i);
        } else { /* the deliberately wrong adjoint is visibly not the derivative */
            cr_expect(fabs(gx[i] - ref_deriv(x[i], n, 1.0)) > 1e-3, "x.grad[%d] = %g", i, gx[i]);
        }
    }
    kern_module_release(m);
    kern_context_release(ctx);
}

Test(custom_grad, adjoint_in_a_while_loop_matches_c_and_fd) { run_softplus(1.0); }
Test(custom_grad, the_custom_adjoint_is_the_one_used) { run_softplus(2.0); }

/* ---- a custom gradient kernel: the implicit-function adjoint of a Newton solve --------- */

static const char *NEWTON = "func newton(a: f32, b: f32) -> f32 {\n"
                            "    var x = 1.0;\n"
                            "    for k in 0..30 {\n"
                            "        x -= (x * x * x + a * x - b) / (3.0 * x * x + a);\n"
                            "    }\n"
                            "    return x;\n"
                            "}\n";
static const char *SOLVE = "kernel %s(a: f32[], b: f32[], x: f32[])%s {\n"
                           "    for i in 0..len(a) {\n"
                           "        x[i] = newton(a[i], b[i]);\n"
                           "    }\n"
                           "}\n";
static const char *SOLVE_ADJ =
    "kernel solve_adj(a: f32[], b: f32[], x: f32[], ag: f32[], bg: f32[], xg: f32[]) {\n"
    "    for i in 0..len(a) {\n"
    "        let s = newton(a[i], b[i]);\n"
    "        let gx = 3.0 * s * s + a[i];\n"
    "        let w = xg[i] / gx;\n"
    "        ag[i] += -s * w;\n"
    "        bg[i] += w;\n"
    "        xg[i] = 0.0;\n"
    "    }\n"
    "}\n";

static double ref_solve(double a, double b) {
    double x = 1.0;
    for (int k = 0; k < 60; k++)
        x -= (x * x * x + a * x - b) / (3 * x * x + a);
    return x;
}

Test(custom_grad, implicit_adjoint_kernel_matches_unrolled_grad_and_fd) {
    char src[4096], k1[256], k2[256];
    snprintf(k1, sizeof k1, SOLVE, "solve", " grad solve_adj");
    snprintf(k2, sizeof k2, SOLVE, "unrolled", "");
    snprintf(src, sizeof src, "%s%s%s%s", NEWTON, k1, k2, SOLVE_ADJ);
    kern_context *ctx = ctx_new();
    kern_module *m = compile(ctx, src);
    float a[N], b[N], zero[N] = {0}, xg[N], x[N];
    for (int i = 0; i < N; i++) {
        a[i] = 0.5f + 0.25f * (float)i; /* a > 0: g is increasing, one real root */
        b[i] = -2.0f + 0.6f * (float)i;
        xg[i] = 1.0f + 0.1f * (float)i;
    }
    float got[2][2][N]; /* [custom, unrolled][a.grad, b.grad] */
    const char *names[2] = {"solve", "unrolled"};
    for (int v = 0; v < 2; v++) {
        kern_buffer *ba = vec(ctx, a), *bb = vec(ctx, b), *bx = vec(ctx, zero),
                    *ga = vec(ctx, zero), *gb = vec(ctx, zero), *gx = vec(ctx, xg);
        kern_arg args[6] = {kern_arg_buffer(ba), kern_arg_buffer(bb), kern_arg_buffer(bx),
                            kern_arg_buffer(ga), kern_arg_buffer(gb), kern_arg_buffer(gx)};
        launch(ctx, m, names[v], args, 3);
        read(bx, x);
        for (int i = 0; i < N; i++)
            expect_close(x[i], ref_solve(a[i], b[i]), 1e-5, "x", i);
        char gname[32];
        snprintf(gname, sizeof gname, "%s.grad", names[v]);
        launch(ctx, m, gname, args, 6);
        read(ga, got[v][0]);
        read(gb, got[v][1]);
        float rxg[N];
        read(gx, rxg);
        for (int i = 0; i < N; i++)
            cr_expect_eq(rxg[i], 0.0f, "x.grad[%d] is replaced by 0 (x is overwritten)", i);
        kern_buffer *all[6] = {ba, bb, bx, ga, gb, gx};
        for (int j = 0; j < 6; j++)
            kern_buffer_release(all[j]);
    }
    for (int i = 0; i < N; i++) {
        double s = ref_solve(a[i], b[i]), gxv = 3 * s * s + a[i];
        double h = 1e-6;
        double fda = (ref_solve(a[i] + h, b[i]) - ref_solve(a[i] - h, b[i])) / (2 * h);
        double fdb = (ref_solve(a[i], b[i] + h) - ref_solve(a[i], b[i] - h)) / (2 * h);
        /* hand-derived: dx/da = -x / g_x, dx/db = 1 / g_x */
        expect_close(got[0][0][i], xg[i] * -s / gxv, 1e-5, "custom a.grad", i);
        expect_close(got[0][1][i], xg[i] / gxv, 1e-5, "custom b.grad", i);
        for (int v = 0; v < 2; v++) {
            expect_close(got[v][0][i], xg[i] * fda, 1e-4, v ? "unrolled a.grad" : "a.grad", i);
            expect_close(got[v][1][i], xg[i] * fdb, 1e-4, v ? "unrolled b.grad" : "b.grad", i);
        }
    }
    kern_module_release(m);
    kern_context_release(ctx);
}

/* ---- checker errors ------------------------------------------------------------------ */

/* The first error of checking src contains `want`. */
static void expect_error(const char *src, const char *want) {
    kc_ctx *c = kc_ctx_new();
    fe_file *f = kc_check_source(c, "t.kern", src, strlen(src));
    cr_expect(!f, "accepted:\n%s", src);
    const char *msg = NULL;
    for (int i = 0; i < c->diags.len && !msg; i++)
        if (c->diags.items[i].severity == DIAG_ERROR)
            msg = c->diags.items[i].message;
    cr_expect(msg && strstr(msg, want), "error '%s', expected one with '%s', for:\n%s",
              msg ? msg : "(none)", want, src);
    kc_ctx_free(c);
}

Test(custom_grad, checker_errors_name_the_expected_signature) {
    expect_error("func f(x: f32) -> f32 grad g { return x; }\n",
                 "unknown func 'g' in the grad clause of func 'f'");
    expect_error("func f(x: f32) -> f32 grad k { return x; }\nkernel k() { }\n",
                 "'k' in the grad clause of func 'f' is not a func");
    expect_error("func f(x: f32) -> f32 grad f { return x; }\n", "func 'f' names itself");
    expect_error("func f(x: f32, k: f32) -> f32 grad g { return x * k; }\n"
                 "func g(x: f32, k: f32, r: f32) -> f32 { return r; }\n",
                 "func 'g' has 3 parameters; the adjoint of 'f' must be 4: `func g(x: f32, k: "
                 "f32, r: f32, dr: f32) -> a struct of fields (f32, f32)`");
    expect_error("func f(x: f32, y: f64) -> f32 grad g { return x; }\n"
                 "func g(x: f32, y: f32, r: f32, dr: f32) -> f32 { return dr; }\n",
                 "parameter 2 ('y') of func 'g' has type f32, expected f64");
    expect_error("func f(x: f32) -> f32 grad g { return x; }\n"
                 "func g(x: f32, r: f32, dr: f64) -> f32 { return r; }\n",
                 "parameter 3 ('dr') of func 'g' has type f64, expected f32");
    expect_error("func f(x: f32) -> f32 grad g { return x; }\n"
                 "func g(x: f32, r: f32, dr: f32) -> f64 { return 0.0; }\n",
                 "func 'g' returns f64; the adjoint of 'f' must return the adjoint of its "
                 "differentiable parameter: `func g(x: f32, r: f32, dr: f32) -> f32`");
    expect_error("struct A { p: f32, q: f32 }\n"
                 "func f(x: f32, y: f32) -> f32 grad g { return x * y; }\n"
                 "func g(x: f32, y: f32, r: f32, dr: f32) -> f32 { return dr; }\n",
                 "a struct with one field per differentiable parameter");
    expect_error("func f(x: f32[]) -> f32 grad g { return x[0]; }\n"
                 "func g(x: f32[], r: f32, dr: f32) -> f32 { return dr; }\n",
                 "func 'f' has the array parameter 'x' (f32[])");
    expect_error("func f(x: f32) grad g { }\nfunc g(x: f32) -> f32 { return x; }\n",
                 "func 'f' returns nothing");
    expect_error("func f(x: f32) -> i32 grad g { return 1; }\n"
                 "func g(x: f32, r: i32, dr: i32) -> f32 { return x; }\n",
                 "func 'f' returns i32, which carries no gradient");
    expect_error("func f(n: i32) -> f32 grad g { return 1.0; }\n"
                 "func g(n: i32, r: f32, dr: f32) -> f32 { return dr; }\n",
                 "func 'f' has no differentiable parameter");
    expect_error("func f(x: f32) -> f32 grad g { return x; }\n"
                 "func g(x: f32, r: f32, dr: f32) -> f32 { return f(x) * dr; }\n",
                 "recursive call: f -> g -> f");
    expect_error("kernel k(x: f32[], n: i32, s: f32) grad kg { }\n"
                 "kernel kg(x: f32[], n: i32, s: f32, xg: f32[]) { }\n",
                 "kernel 'kg' has 4 parameters; the gradient of kernel 'k' must have the 5 of "
                 "'k.grad': `kernel kg(x: f32[], n: i32, s: f32, x.grad: f32[], s.grad: f32[])`");
    expect_error("kernel k(x: f32[]) grad kg { }\nkernel kg(x: f32[], xg: f64[]) { }\n",
                 "parameter 2 ('xg') of kernel 'kg' has type f64[], expected f32[]");
    expect_error("kernel k(x: f32[]) grad f { }\nfunc f(x: f32) -> f32 { return x; }\n",
                 "'f' in the grad clause of kernel 'k' is not a kernel");
}

Test(custom_grad, grad_stays_an_identifier) {
    const char *src = "func grad(x: f32) -> f32 { let grad = x; return grad * 2.0; }\n"
                      "kernel k(x: f32[]) { for i in 0..len(x) { x[i] = grad(x[i]); } }\n";
    kc_ctx *c = kc_ctx_new();
    cr_expect(kc_check_source(c, "t.kern", src, strlen(src)), "grad as a name is refused");
    kc_ctx_free(c);
}

/* ---- the IR text form of a custom op ------------------------------------------------- */

Test(custom_grad, custom_op_round_trips_and_verifies) {
    const char *src = "func f(x: f32, n: i32) -> f32 grad g {\n"
                      "    var s = x;\n"
                      "    for k in 0..n { s = s * x; }\n"
                      "    return s;\n"
                      "}\n"
                      "func g(x: f32, n: i32, r: f32, dr: f32) -> f32 {\n"
                      "    return dr * f32(n + 1) * r / x;\n"
                      "}\n"
                      "kernel k(x: f32[], y: f32[]) {\n"
                      "    for i in 0..len(x) { y[i] = f(x[i], 2) + f(x[i] + 1.0, 3); }\n"
                      "}\n";
    kc_ctx *c = kc_ctx_new();
    fe_file *f = kc_check_source(c, "t.kern", src, strlen(src));
    cr_assert(f);
    ir_module *m = fe_lower(c, f);
    cr_assert(m);
    cr_expect(ir_verify(m, &c->diags));
    kern_buf a = {0}, b = {0};
    ir_print(&a, m, NULL);
    cr_expect(strstr(a.data, "= custom ") && strstr(a.data, " primal (") &&
                  strstr(a.data, "} adjoint ("),
              "%s", a.data);
    kern_source text = {.path = "t.ir", .text = a.data, .len = a.len};
    ir_module *p = ir_parse(a.data, a.len, &text, &c->diags);
    cr_assert(p, "does not parse back:\n%s", a.data);
    cr_expect(ir_verify(p, &c->diags));
    ir_print(&b, p, NULL);
    cr_expect_str_eq(b.data, a.data);
    /* once inlined, no custom op is left and the module still verifies */
    cr_expect(ir_inline_custom(p));
    cr_expect(ir_verify(p, &c->diags));
    kern_buf d = {0};
    ir_print(&d, p, NULL);
    cr_expect(!strstr(d.data, "custom"), "%s", d.data);
    buf_free(&a);
    buf_free(&b);
    buf_free(&d);
    ir_module_free(p);
    ir_module_free(m);
    kc_ctx_free(c);
}
