/* test_lanes.c - reverse sweeps aligned across lanes (issue 24; passes/ad_grad.c, "Aligned
 * reverse loops"; the lanemax op, docs/ir.md).
 *
 * A loop whose trip count differs between work items is reversed over lanemax(n)
 * iterations, each lane idle until the shared counter reaches its own range. The tests:
 * which loops get that form (the IR of K.grad, and its text round trip); the gradient of
 * a kernel with such loops of every kind (a for with a varying bound, break and continue,
 * one nested in another, all inside a varying if, then a while with a data-dependent
 * exit; every iteration reads the shared w, the t loop's first line at t: an adjoint add that
 * moves out of the aligned iteration) on the CPU's scalar path and SIMD (KERN_SIMD =
 * off, sse, auto) and on Vulkan (lavapipe in CI), against central finite differences of a
 * plain C forward in f64; and the warp maximum in the PTX (redux.sync on sm_80 and later,
 * ballots before). Which loops get the form: test_ad_grad.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backends/llvm/llvm_backend.h"
#include "../compiler/driver.h"
#include "../include/kern.h"
#include "../runtime/device.h"
#include "../runtime/rt.h"
#include "test_backend.h"

/* ---- the kernel and its reference ---------------------------------------------------- */

static const char NEST[] = "kernel nest(x0: f32[], w: f32[], n: i32[], out: f32[]) {\n"
                           "    for i in 0..len(x0) {\n"
                           "        var x = x0[i];\n"
                           "        if x0[i] > -1.5 {\n"
                           "            for t in 0..n[i] {\n"
                           "                x = x + 0.01 * w[t] * x;\n"
                           "                for u in 0..(n[i] + t) % 5 {\n"
                           "                    x = 0.5 * sin(x) * w[u] + 0.4 * x;\n"
                           "                }\n"
                           "                if t == 6 + i % 5 { break; }\n"
                           "                if t % 3 == 1 { continue; }\n"
                           "                x = x + 0.1 * w[t] * cos(x);\n"
                           "            }\n"
                           "        }\n"
                           "        var k = 0;\n"
                           "        while x < 1.0 && k < 12 + i % 4 {\n"
                           "            x = x * 1.05 + 0.05 * w[k];\n"
                           "            k += 1;\n"
                           "        }\n"
                           "        out[i] = x;\n"
                           "    }\n"
                           "}\n";

enum { N = 333, W = 24, MAXN = 20 };

/* out[i] of NEST in f64 */
static double nest_ref(double x0, const double *w, int i, int n) {
    double x = x0;
    if (x0 > -1.5) {
        for (int t = 0; t < n; t++) {
            x = x + 0.01 * w[t] * x;
            for (int u = 0; u < (n + t) % 5; u++)
                x = 0.5 * sin(x) * w[u] + 0.4 * x;
            if (t == 6 + i % 5)
                break;
            if (t % 3 == 1)
                continue;
            x = x + 0.1 * w[t] * cos(x);
        }
    }
    for (int k = 0; x < 1.0 && k < 12 + i % 4; k++)
        x = x * 1.05 + 0.05 * w[k];
    return x;
}

typedef struct nest_case {
    float x0[N], w[W], seed[N];
    int32_t n[N];
    double gx[N], gw[W]; /* d(sum seed * out) by central differences */
} nest_case;

static const nest_case *nest_case_get(void) {
    static nest_case c;
    static bool made;
    if (made)
        return &c;
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        c.x0[i] = (float)((s >> 40) % 4000) / 1000.0f - 2.0f;
        c.n[i] = (int32_t)((s >> 20) % (MAXN + 1)); /* 0 .. MAXN: lanes differ */
        c.seed[i] = 0.5f + (float)(i % 7) / 7.0f;
    }
    double w[W];
    for (int j = 0; j < W; j++)
        w[j] = c.w[j] = 0.3f + (float)(j % 11) / 20.0f;
    const double h = 1e-6;
    for (int i = 0; i < N; i++) {
        double x = c.x0[i];
        c.gx[i] =
            c.seed[i] * (nest_ref(x + h, w, i, c.n[i]) - nest_ref(x - h, w, i, c.n[i])) / (2 * h);
    }
    for (int j = 0; j < W; j++) {
        double keep = w[j], sum = 0;
        for (int i = 0; i < N; i++) {
            w[j] = keep + h;
            double up = nest_ref(c.x0[i], w, i, c.n[i]);
            w[j] = keep - h;
            sum += c.seed[i] * (up - nest_ref(c.x0[i], w, i, c.n[i])) / (2 * h);
        }
        w[j] = keep;
        c.gw[j] = sum;
    }
    made = true;
    return &c;
}

static void expect_close(const float *got, const double *want, int n, const char *what,
                         const char *where) {
    double scale = 0;
    for (int i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    for (int i = 0; i < n; i++)
        cr_expect(fabs(got[i] - want[i]) <= 2e-3 * fmax(fabs(want[i]), 1e-2 * scale),
                  "%s, %s, [%d]: got %.7g, want %.7g", where, what, i, (double)got[i], want[i]);
}

/* Runs nest.grad on ctx and checks x0.grad and w.grad against the finite differences. */
static void nest_grad_on(kern_context *ctx, const char *where) {
    const nest_case *c = nest_case_get();
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, NEST, strlen(NEST), "nest.kern", &m), KERN_OK,
                 "%s: %s", where, kern_context_last_error(ctx));
    kern_kernel *kg;
    cr_assert_eq(kern_kernel_find(m, "nest.grad", &kg), KERN_OK);
    int64_t nn = N, nw = W;
    kern_buffer *b[7];
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &nn, c->x0, &b[0]), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &nw, c->w, &b[1]), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_I32, 1, &nn, c->n, &b[2]), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &nn, NULL, &b[3]), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &nn, NULL, &b[4]), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &nw, NULL, &b[5]), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &nn, c->seed, &b[6]), KERN_OK);
    kern_arg args[7];
    for (int i = 0; i < 7; i++)
        args[i] = kern_arg_buffer(b[i]);
    cr_assert_eq(kern_launch(kg, args, 7), KERN_OK, "%s: %s", where, kern_context_last_error(ctx));
    float gx[N], gw[W];
    cr_assert_eq(kern_buffer_read(b[4], gx, sizeof gx), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    cr_assert_eq(kern_buffer_read(b[5], gw, sizeof gw), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    expect_close(gx, c->gx, N, "x0.grad", where);
    expect_close(gw, c->gw, W, "w.grad", where);
    for (int i = 0; i < 7; i++)
        kern_buffer_release(b[i]);
    kern_module_release(m);
}

/* ---- the CPU: scalar and SIMD ---------------------------------------------------------- */

Test(lanes, gradients_on_the_cpu_scalar_and_simd) {
    static const char *const modes[] = {"off", "sse", "auto"};
    for (int i = 0; i < 3; i++) {
        setenv("KERN_SIMD", modes[i], 1);
        kern_context_options o = kern_context_options_default();
        o.backend = KERN_BACKEND_CPU;
        o.threads = 2;
        kern_context *ctx;
        cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
        char where[32];
        snprintf(where, sizeof where, "KERN_SIMD=%s", modes[i]);
        nest_grad_on(ctx, where);
        kern_context_release(ctx);
    }
    unsetenv("KERN_SIMD");
}

/* ---- Vulkan: subgroups -------------------------------------------------------------- */

Test(vulkan, aligned_reverse_loops_against_finite_differences) {
    kern_context *ctx = kern_test_vulkan_or_null();
    if (!ctx)
        cr_skip_test("no Vulkan device");
    nest_grad_on(ctx, "vulkan");
    const char *first = NULL;
    int n = rt_vulkan_validation_messages(ctx->dev, &first);
    cr_expect_eq(n, 0, "the validation layer reported %d messages; the first: %s", n, first);
    kern_context_release(ctx);
}

/* ---- CUDA: the warp maximum in the PTX ----------------------------------------------- */

Test(nvptx, aligned_reverse_loops_take_the_warp_maximum) {
    static const struct {
        const char *arch, *want, *not_want;
    } arches[] = {
        {NULL, "vote.sync.ballot", "redux.sync"}, /* the default, sm_75 */
        {"sm_80", "redux.sync.max.s32", "vote.sync.ballot"},
        {"sm_90", "redux.sync.max.s32", "vote.sync.ballot"},
    };
    for (size_t i = 0; i < sizeof arches / sizeof *arches; i++) {
        kc_ctx *c = kc_ctx_new();
        c->opts.grad = KC_GRAD_ALL;
        ir_module *m = kc_compile_source(c, "nest.kern", NEST, strlen(NEST));
        cr_assert(m);
        c->opts.arch = arches[i].arch;
        char err[1024] = "";
        char *ptx = llvm_emit_ptx(m, &c->opts, err, sizeof err);
        cr_assert(ptx, "%s", err);
        const char *arch = arches[i].arch ? arches[i].arch : "the default arch";
        cr_expect(strstr(ptx, arches[i].want), "%s: no %s", arch, arches[i].want);
        cr_expect(strstr(ptx, "activemask"), "%s: no activemask", arch);
        cr_expect(!strstr(ptx, arches[i].not_want), "%s: %s", arch, arches[i].not_want);
        free(ptx);
        ir_module_free(m);
        kc_ctx_free(c);
    }
}
