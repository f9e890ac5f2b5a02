/* test_stress.c - many launches whose buffers are released right after launching, with
 * adstack heaps that must grow on the way (runtime contracts 4 to 6 of
 * docs/runtime-contracts.md), on the device of KERN_TEST_BACKEND (the CPU by default).
 * Every launch's buffers are released before the launch is known to have completed, so
 * they are retired, not freed; the retirement queue must stay bounded, the heap must grow
 * only by doubling, and sampled results must match a plain C loop. KERN_STRESS_LAUNCHES
 * sets the number of launches (default 3000; the GPU run uses 100000). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../include/kern.h"
#include "../runtime/rt.h"
#include "test_backend.h"

static const char src[] = "kernel roll(x: f32[], y: f32[], steps: i32) {\n"
                          "    for i in 0..len(x) {\n"
                          "        var v = x[i];\n"
                          "        for t in 0..steps { v = sin(v) * 0.9 + 0.1; }\n"
                          "        y[i] = v;\n"
                          "    }\n"
                          "}\n";

/* y and dL/dx for L = sum(y * gy), in double */
static void reference(float x0, int steps, double *y, double *dx) {
    double v = x0, d = 1.0;
    for (int t = 0; t < steps; t++) {
        d *= 0.9 * cos(v);
        v = sin(v) * 0.9 + 0.1;
    }
    *y = v;
    *dx = d;
}

Test(stress, released_buffers_and_growing_heaps) {
    const char *env = getenv("KERN_STRESS_LAUNCHES");
    long launches = env ? atol(env) : 3000;
    cr_assert_gt(launches, 0);
    kern_context_options o = kern_context_options_default();
    o.backend = kern_test_backend();
    o.threads = 2;
    kern_context *ctx = NULL;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_module *m = NULL;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "roll.kern", &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    kern_kernel *k, *g;
    cr_assert_eq(kern_kernel_find(m, "roll", &k), KERN_OK);
    cr_assert_eq(kern_kernel_find(m, "roll.grad", &g), KERN_OK);
    enum { N = 300 };
    float x[N], one[N], y[N], gx[N];
    for (int i = 0; i < N; i++)
        x[i] = 0.01f * (float)i - 1.0f, one[i] = 1.0f;
    int64_t n = N;
    int max_retired = 0, steps = 1, checks = 0;
    int64_t last_heap = 0, growths = 0;
    for (long it = 0; it < launches; it++) {
        if (it % (launches / 8 + 1) == 0 && steps < 512)
            steps *= 2; /* 2, 4, ..., 256: the heap must grow on the way */
        bool check = it % 997 == 0 || it == launches - 1;
        kern_buffer *bx, *by, *bgx, *bgy;
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, x, &bx), KERN_OK);
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, NULL, &by), KERN_OK);
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, NULL, &bgx), KERN_OK);
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, one, &bgy), KERN_OK);
        kern_arg a[3] = {kern_arg_buffer(bx), kern_arg_buffer(by), kern_arg_i32(steps)};
        cr_assert_eq(kern_launch(k, a, 3), KERN_OK, "launch %ld: %s", it,
                     kern_context_last_error(ctx));
        kern_arg ga[5] = {kern_arg_buffer(bx), kern_arg_buffer(by), kern_arg_i32(steps),
                          kern_arg_buffer(bgx), kern_arg_buffer(bgy)};
        cr_assert_eq(kern_launch(g, ga, 5), KERN_OK, "launch %ld: %s", it,
                     kern_context_last_error(ctx));
        if (check) {
            cr_assert_eq(kern_buffer_read(by, y, sizeof y), KERN_OK);
            cr_assert_eq(kern_buffer_read(bgx, gx, sizeof gx), KERN_OK);
            for (int i = 0; i < N; i += 7) {
                double ry, rdx;
                reference(x[i], steps, &ry, &rdx);
                cr_assert(fabs(y[i] - ry) <= 1e-4 * (1 + fabs(ry)),
                          "launch %ld, y[%d] = %g, want %g", it, i, (double)y[i], ry);
                cr_assert(fabs(gx[i] - rdx) <= 1e-3 * (fabs(rdx) + 1e-6),
                          "launch %ld, x.grad[%d] = %g, want %g", it, i, (double)gx[i], rdx);
            }
            checks++;
        }
        /* released while the launches may still be in flight: retired, not freed */
        kern_buffer_release(bx);
        kern_buffer_release(by);
        kern_buffer_release(bgx);
        kern_buffer_release(bgy);
        if (ctx->retired.len > max_retired)
            max_retired = ctx->retired.len;
        kern_adstack_info info;
        cr_assert_eq(kern_context_adstack_info(ctx, &info), KERN_OK);
        if (info.heap_bytes != last_heap) {
            cr_assert(last_heap == 0 || info.heap_bytes >= 2 * last_heap ||
                          info.heap_bytes >= info.last_stride * info.last_slots,
                      "the heap grows by doubling (or to the exact size)");
            last_heap = info.heap_bytes;
            growths++;
        }
    }
    cr_assert_eq(kern_sync(ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_leq(max_retired, RT_RETIRE_DEPTH + 8, "the retirement queue stays bounded (%d)",
                  max_retired);
    cr_assert_eq(ctx->retired.len, 0, "a full drain empties the queue");
    cr_assert_gt(growths, 1, "the heap grew");
    cr_log_info("stress on %s: %ld launch pairs, %d checked, retired at most %d, %lld heap sizes",
                kern_context_device_name(ctx), launches, checks, max_retired, (long long)growths);
    kern_context_release(ctx);
}
