/* test_gather.c - gather-form adjoints of neighbour reads (passes/ad_gather.c): where the
 * pass applies (the gradient's IR has a gather task and no atomic adds into the adjoint
 * array), where it does not (offsets that are not constants, loops), and that the gather
 * form gives the gradients of the scatter form ($KERN_SCATTER_ADJOINTS=1) and of a C
 * adjoint. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compiler/driver.h"
#include "../include/kern.h"
#include "../ir/ir.h"

/* K.grad's IR text, with the gather form (scatter = false) or the scatter form. */
static char *grad_ir(const char *src, const char *kernel, bool scatter) {
    kc_ctx *c = kc_ctx_new();
    c->opts.grad = KC_GRAD_ALL;
    c->opts.scatter_adjoints = scatter;
    ir_module *m = kc_compile_source(c, "g.kern", src, strlen(src));
    cr_assert(m, "does not compile:\n%s", src);
    kern_buf out = {0};
    ir_print(&out, m, kernel);
    ir_module_free(m);
    kc_ctx_free(c);
    return out.data;
}

static int count(const char *text, const char *s) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, s)); p += strlen(s))
        n++;
    return n;
}

static const char *STENCIL1 =
    "kernel smooth(x: f32[], y: f32[]) {\n"
    "    for i in 1..len(x) - 1 {\n"
    "        y[i] = 0.25 * x[i - 1] + 0.5 * x[i] + 0.25 * sin(x[i + 1]);\n"
    "    }\n"
    "}\n";

static const char *SPRINGS = "kernel step(x: f32[,], v: f32[,], k: f32, nograd dt: f32, t: i32) {\n"
                             "    let n = shape(x, 1);\n"
                             "    for i in 0..n {\n"
                             "        let xi = x[t - 1, i];\n"
                             "        var f = 0.0;\n"
                             "        if i > 0 { f += k * (x[t - 1, i - 1] - xi); }\n"
                             "        if i < n - 1 { f += k * (x[t - 1, i + 1] - xi); }\n"
                             "        let vn = v[t - 1, i] + dt * f;\n"
                             "        v[t, i] = vn;\n"
                             "        x[t, i] = xi + dt * vn;\n"
                             "    }\n"
                             "}\n";

Test(gather, chosen_where_offsets_are_constant) {
    char *g = grad_ir(STENCIL1, "smooth.grad", false), *s = grad_ir(STENCIL1, "smooth.grad", true);
    cr_expect_eq(count(g, "atomic_add %x.grad"), 0, "no scatter left:\n%s", g);
    cr_expect_eq(count(g, "parallel"), 2, "the gather task and the original one:\n%s", g);
    cr_expect_eq(count(s, "atomic_add %x.grad"), 3, "the scatter form:\n%s", s);
    cr_expect_eq(count(s, "parallel"), 1);
    free(g);
    free(s);
    g = grad_ir(SPRINGS, "step.grad", false);
    cr_expect_eq(count(g, "atomic_add %x.grad"), 0, "%s", g);
    cr_expect_eq(count(g, "atomic_add %k.grad"), 1, "k's adjoint stays a reduction:\n%s", g);
    free(g);
}

Test(gather, not_chosen_for_computed_offsets_or_loops) {
    const char *srcs[] = {
        /* an index read from memory */
        "kernel a(x: f32[], idx: i32[], y: f32[]) {\n"
        "    for i in 0..len(y) { y[i] = x[idx[i]]; }\n"
        "}\n",
        /* an offset that is a parameter */
        "kernel a(x: f32[], y: f32[], k: i32) {\n"
        "    for i in 0..len(y) { y[i] = x[i + k]; }\n"
        "}\n",
        /* a loop in the task */
        "kernel a(x: f32[], y: f32[], n: i32) {\n"
        "    for i in 1..len(y) - 1 {\n"
        "        var s = 0.0;\n"
        "        for r in 0..n { s += x[i - 1] * x[i + 1]; }\n"
        "        y[i] = s;\n"
        "    }\n"
        "}\n",
    };
    for (size_t i = 0; i < sizeof srcs / sizeof *srcs; i++) {
        char *g = grad_ir(srcs[i], "a.grad", false);
        cr_expect_gt(count(g, "atomic_add %x.grad"), 0, "case %zu keeps its atomics:\n%s", i, g);
        cr_expect_eq(count(g, "parallel"), 1, "case %zu: no gather task:\n%s", i, g);
        free(g);
    }
}

/* ---- the same gradients --------------------------------------------------------------- */

static kern_context *ctx_new(void) {
    kern_context_options o = kern_context_options_default();
    o.backend = KERN_BACKEND_CPU;
    o.threads = 2;
    kern_context *ctx;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK);
    return ctx;
}

static kern_kernel *grad_kernel(kern_context *ctx, const char *src, const char *name,
                                bool scatter) {
    setenv("KERN_SCATTER_ADJOINTS", scatter ? "1" : "0", 1);
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "g.kern", &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, name, &k), KERN_OK, "%s", kern_context_last_error(ctx));
    return k;
}

static kern_buffer *buf(kern_context *ctx, int rank, const int64_t *shape, const float *d) {
    kern_buffer *b;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, rank, shape, d, &b), KERN_OK);
    return b;
}

static void expect_close(const float *g, const float *w, int n, const char *what) {
    double scale = 0;
    for (int i = 0; i < n; i++)
        scale = fmax(scale, fabs(w[i]));
    for (int i = 0; i < n; i++)
        cr_expect(fabs((double)g[i] - w[i]) <= 1e-6 * fmax(fabs(w[i]), 1e-3 * scale) + 1e-30,
                  "%s[%d]: gather %.9g, scatter %.9g", what, i, (double)g[i], (double)w[i]);
}

Test(gather, same_gradients_as_the_scatter_form_1d) {
    enum { N = 1000 };
    static float x[N], yg[N], zero[N], res[2][N], ref[N];
    for (int i = 0; i < N; i++) {
        x[i] = sinf(0.37f * (float)i);
        yg[i] = cosf(0.11f * (float)i);
    }
    int64_t shape[1] = {N};
    for (int form = 0; form < 2; form++) {
        kern_context *ctx = ctx_new();
        kern_kernel *k = grad_kernel(ctx, STENCIL1, "smooth.grad", form == 1);
        kern_buffer *bx = buf(ctx, 1, shape, x), *by = buf(ctx, 1, shape, zero),
                    *bxg = buf(ctx, 1, shape, zero), *byg = buf(ctx, 1, shape, yg);
        kern_arg a[4] = {kern_arg_buffer(bx), kern_arg_buffer(by), kern_arg_buffer(bxg),
                         kern_arg_buffer(byg)};
        cr_assert_eq(kern_launch(k, a, 4), KERN_OK, "%s", kern_context_last_error(ctx));
        cr_assert_eq(kern_buffer_read(bxg, res[form], sizeof res[form]), KERN_OK);
        kern_context_release(ctx);
    }
    /* the C adjoint: y[i] = 0.25 x[i-1] + 0.5 x[i] + 0.25 sin(x[i+1]), i in 1..N-1 */
    for (int i = 1; i < N - 1; i++) {
        ref[i - 1] += 0.25f * yg[i];
        ref[i] += 0.5f * yg[i];
        ref[i + 1] += (float)(0.25 * cos((double)x[i + 1]) * yg[i]);
    }
    expect_close(res[0], res[1], N, "x.grad");
    expect_close(res[0], ref, N, "x.grad against C");
}

Test(gather, same_gradients_as_the_scatter_form_springs) {
    enum { T = 6, N = 517 };
    static float x[T * N], v[T * N], xg[T * N], vg[T * N], res[2][2][T * N];
    float kg[2];
    for (int i = 0; i < T * N; i++) {
        x[i] = sinf(0.013f * (float)i);
        v[i] = cosf(0.029f * (float)i);
        xg[i] = i >= (T - 1) * N ? 1.0f : 0.0f;
        vg[i] = i >= (T - 1) * N ? 0.5f : 0.0f;
    }
    int64_t shape[2] = {T, N}, one[1] = {1};
    for (int form = 0; form < 2; form++) {
        kern_context *ctx = ctx_new();
        kern_kernel *k = grad_kernel(ctx, SPRINGS, "step.grad", form == 1);
        float zero = 0;
        kern_buffer *bx = buf(ctx, 2, shape, x), *bv = buf(ctx, 2, shape, v),
                    *bxg = buf(ctx, 2, shape, xg), *bvg = buf(ctx, 2, shape, vg),
                    *bkg = buf(ctx, 1, one, &zero);
        for (int t = T - 1; t >= 1; t--) {
            kern_arg a[8] = {kern_arg_buffer(bx),  kern_arg_buffer(bv), kern_arg_f32(0.7f),
                             kern_arg_f32(0.05f),  kern_arg_i32(t),     kern_arg_buffer(bxg),
                             kern_arg_buffer(bvg), kern_arg_buffer(bkg)};
            cr_assert_eq(kern_launch(k, a, 8), KERN_OK, "%s", kern_context_last_error(ctx));
        }
        cr_assert_eq(kern_buffer_read(bxg, res[form][0], sizeof res[form][0]), KERN_OK);
        cr_assert_eq(kern_buffer_read(bvg, res[form][1], sizeof res[form][1]), KERN_OK);
        cr_assert_eq(kern_buffer_read(bkg, &kg[form], sizeof kg[form]), KERN_OK);
        kern_context_release(ctx);
    }
    expect_close(res[0][0], res[1][0], T * N, "x.grad");
    expect_close(res[0][1], res[1][1], T * N, "v.grad");
    /* a sum over every item and step, in an order the threads decide (it nearly cancels) */
    cr_expect(fabs(kg[0] - kg[1]) <= 1e-5 * fmax(1.0, fabs(kg[1])), "k.grad: %g, %g", (double)kg[0],
              (double)kg[1]);
}
