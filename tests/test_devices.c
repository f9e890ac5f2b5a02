/* test_devices.c - several devices in one program (docs/runtime.md, "Several devices"):
 * a device chosen by number (Vulkan device 0: lavapipe in CI), numbers out of range
 * refused with the count, contexts on two devices used from two threads at once (each
 * result checked against a plain C loop), and kern_buffer_copy_from between contexts of
 * the CPU and Vulkan devices (checked against the source data). The CUDA half (two GPUs,
 * peer copies) is tests/python/test_multigpu.py, on the GPU machine. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../include/kern.h"
#include "test_backend.h"
#include "threads_work.h"

/* The options of a Vulkan context on device `device` (the validation settings the Vulkan
 * tests use), or a skip where there is no Vulkan device. */
static kern_context_options vulkan_options(int device) {
    kern_context *probe = kern_test_vulkan_or_null();
    if (!probe)
        cr_skip_test("no Vulkan device");
    kern_context_options o = kern_context_get_options(probe);
    kern_context_release(probe);
    o.device = device;
    return o;
}

Test(devices, vulkan_device_zero) {
    kern_context_options o = vulkan_options(0);
    kern_context *ctx;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_expect_eq(kern_context_device_index(ctx), 0);
    cr_expect(!strncmp(kern_context_device_name(ctx), "vulkan: ", 8), "%s",
              kern_context_device_name(ctx));
    kern_context_release(ctx);
    /* the default device is one of the numbered ones */
    o.device = -1;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_expect_geq(kern_context_device_index(ctx), 0);
    kern_context_release(ctx);
}

Test(devices, numbers_out_of_range) {
    kern_context_options o = kern_context_options_default();
    kern_context *ctx;
    o.device = 1; /* the CPU has device 0 only */
    cr_expect_eq(kern_context_create(&o, &ctx), KERN_ERR_ARGUMENT);
    cr_expect(strstr(kern_context_last_error(ctx), "no cpu device 1") &&
                  strstr(kern_context_last_error(ctx), "one device (0)"),
              "%s", kern_context_last_error(ctx));
    cr_expect_eq(kern_context_device_index(ctx), -1);
    kern_context_release(ctx);
    o.device = -2;
    cr_expect_eq(kern_context_create(&o, &ctx), KERN_ERR_ARGUMENT);
    cr_expect(strstr(kern_context_last_error(ctx), "device -2 is out of range"), "%s",
              kern_context_last_error(ctx));
    kern_context_release(ctx);
    o.device = 0;
    cr_expect_eq(kern_context_create(&o, &ctx), KERN_OK);
    cr_expect_eq(kern_context_device_index(ctx), 0);
    kern_context_release(ctx);

    o = vulkan_options(99);
    cr_expect_eq(kern_context_create(&o, &ctx), KERN_ERR_ARGUMENT, "%s",
                 kern_context_last_error(ctx));
    /* "there is no device 99: the loader sees 1 (0 to 0)" where lavapipe is the only one */
    cr_expect(strstr(kern_context_last_error(ctx), "there is no device 99: the loader sees "), "%s",
              kern_context_last_error(ctx));
    kern_context_release(ctx);
}

/* CUDA's numbers, where a GPU is there (the GPU machine); elsewhere the driver is missing,
 * which is not a wrong number. */
Test(devices, cuda_numbers) {
    kern_context_options o = kern_context_options_default();
    o.backend = KERN_BACKEND_CUDA;
    kern_context *ctx;
    kern_status s = kern_context_create(&o, &ctx);
    if (s != KERN_OK) {
        cr_expect_eq(s, KERN_ERR_UNSUPPORTED, "%s", kern_context_last_error(ctx));
        kern_context_release(ctx);
        cr_skip_test("no CUDA device");
    }
    cr_expect_eq(kern_context_device_index(ctx), 0);
    kern_context_release(ctx);
    o.device = 1000;
    cr_expect_eq(kern_context_create(&o, &ctx), KERN_ERR_ARGUMENT);
    cr_expect(strstr(kern_context_last_error(ctx), "there is no CUDA device 1000: the driver sees"),
              "%s", kern_context_last_error(ctx));
    kern_context_release(ctx);
}

/* ---- two contexts, two threads ------------------------------------------------------- */

/* threads_work.c's work (two kernels and their gradients against C references) on two
 * threads at once, each with its own context */
static void at_once(kern_context_options a, kern_context_options b) {
    kern_context_options opts[2] = {a, b};
    char msg[512] = "";
    cr_expect(threads_devices(opts, 2, msg, sizeof msg), "%s", msg);
}

Test(devices, cpu_and_vulkan_at_once) {
    kern_context_options cpu = kern_context_options_default();
    cpu.threads = 2;
    at_once(cpu, vulkan_options(0));
}

Test(devices, two_cpu_contexts_at_once) {
    kern_context_options cpu = kern_context_options_default();
    cpu.threads = 1;
    cpu.debug = true; /* checked code beside SIMD code */
    kern_context_options simd = cpu;
    simd.debug = false;
    at_once(cpu, simd);
}

/* ---- copies between contexts --------------------------------------------------------- */

/* A buffer of n f64 values start + i on ctx. */
static kern_buffer *ramp(kern_context *ctx, int64_t n, double start) {
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = start + (double)i;
    kern_buffer *b = NULL;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F64, 1, &n, v, &b), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    free(v);
    return b;
}

/* Whether b holds start + i. */
static void expect_ramp(kern_buffer *b, int64_t n, double start, const char *what) {
    double *v = malloc((size_t)n * sizeof *v);
    cr_assert_eq(kern_buffer_read(b, v, (size_t)n * sizeof *v), KERN_OK);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (v[i] != start + (double)i)
            bad = i;
    cr_expect_eq(bad, -1, "%s: element %lld is %g, want %g", what, (long long)bad,
                 bad >= 0 ? v[bad] : 0.0, start + (double)bad);
    free(v);
}

Test(devices, copies_between_cpu_and_vulkan) {
    kern_context_options vo = vulkan_options(0);
    kern_context *cpu, *vk, *vk2;
    cr_assert_eq(kern_context_create(NULL, &cpu), KERN_OK);
    cr_assert_eq(kern_context_create(&vo, &vk), KERN_OK, "%s", kern_context_last_error(vk));
    cr_assert_eq(kern_context_create(&vo, &vk2), KERN_OK, "%s", kern_context_last_error(vk2));
    /* 2.5M f64: 20 MB, more than one 16 MiB staging chunk between the Vulkan contexts */
    const int64_t sizes[] = {1, 1000, 2500000};
    for (int s = 0; s < 3; s++) {
        int64_t n = sizes[s];
        kern_buffer *c = ramp(cpu, n, 1.5), *v = ramp(vk, n, 0), *v2 = ramp(vk2, n, -7);
        cr_expect_eq(kern_buffer_copy_from(v, c), KERN_OK, "%s", kern_context_last_error(vk));
        expect_ramp(v, n, 1.5, "cpu -> vulkan");
        cr_expect_eq(kern_buffer_copy_from(v2, v), KERN_OK, "%s", kern_context_last_error(vk2));
        expect_ramp(v2, n, 1.5, "vulkan -> vulkan (another context)");
        kern_buffer *c2 = ramp(cpu, n, 99), *v3 = ramp(vk, n, 3);
        cr_expect_eq(kern_buffer_copy_from(c2, v3), KERN_OK, "%s", kern_context_last_error(cpu));
        expect_ramp(c2, n, 3, "vulkan -> cpu");
        cr_expect_eq(kern_buffer_copy_from(c, c2), KERN_OK, "%s", kern_context_last_error(cpu));
        expect_ramp(c, n, 3, "cpu -> cpu (one context)");
        cr_expect_eq(kern_buffer_copy_from(v3, v3), KERN_OK); /* itself: nothing to do */
        expect_ramp(v3, n, 3, "a buffer into itself");
        kern_buffer *all[] = {c, v, v2, c2, v3};
        for (int b = 0; b < 5; b++)
            kern_buffer_release(all[b]);
    }
    kern_context_release(vk2);
    kern_context_release(vk);
    kern_context_release(cpu);
}

enum { N = 300, T = 6 };

/* A kernel whose output the copy test checks (a serial loop per item). */
static const char *SRC = "kernel roll(x: f32[], w: f32[], out: f32[], steps: i32) {\n"
                         "    for i in 0..len(x) {\n"
                         "        var v = x[i];\n"
                         "        for t in 0..steps {\n"
                         "            v = v * w[t] + 0.25 * cos(v);\n"
                         "        }\n"
                         "        out[i] = v;\n"
                         "    }\n"
                         "}\n";

/* The copy waits for the launch that writes the source, on the source's device. */
Test(devices, copy_after_a_launch) {
    kern_context_options vo = vulkan_options(0);
    kern_context *cpu, *vk;
    cr_assert_eq(kern_context_create(NULL, &cpu), KERN_OK);
    cr_assert_eq(kern_context_create(&vo, &vk), KERN_OK, "%s", kern_context_last_error(vk));
    kern_module *m;
    kern_kernel *k;
    cr_assert_eq(kern_module_from_source(vk, SRC, strlen(SRC), "roll.kern", &m), KERN_OK, "%s",
                 kern_context_last_error(vk));
    cr_assert_eq(kern_kernel_find(m, "roll", &k), KERN_OK);
    float x[N], w[T], out[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)cos(0.05 * i);
    for (int t = 0; t < T; t++)
        w[t] = 0.7f;
    int64_t sn = N, st = T;
    kern_buffer *bx, *bw, *bout, *host;
    cr_assert_eq(kern_buffer_create(vk, KERN_F32, 1, &sn, x, &bx), KERN_OK);
    cr_assert_eq(kern_buffer_create(vk, KERN_F32, 1, &st, w, &bw), KERN_OK);
    cr_assert_eq(kern_buffer_create(vk, KERN_F32, 1, &sn, NULL, &bout), KERN_OK);
    cr_assert_eq(kern_buffer_create(cpu, KERN_F32, 1, &sn, NULL, &host), KERN_OK);
    kern_arg a[4] = {kern_arg_buffer(bx), kern_arg_buffer(bw), kern_arg_buffer(bout),
                     kern_arg_i32(T)};
    cr_assert_eq(kern_launch(k, a, 4), KERN_OK, "%s", kern_context_last_error(vk));
    cr_assert_eq(kern_buffer_copy_from(host, bout), KERN_OK, "%s", kern_context_last_error(cpu));
    cr_assert_eq(kern_buffer_read(host, out, sizeof out), KERN_OK);
    for (int i = 0; i < N; i++) {
        double v = x[i];
        for (int t = 0; t < T; t++)
            v = v * w[t] + 0.25 * cos(v);
        cr_expect(fabs(out[i] - v) <= 1e-4 * fmax(1, fabs(v)), "[%d] %.7g, want %.7g", i,
                  (double)out[i], v);
    }
    kern_context_release(vk);
    kern_context_release(cpu);
}

Test(devices, copy_refusals) {
    kern_context *a, *b;
    cr_assert_eq(kern_context_create(NULL, &a), KERN_OK);
    cr_assert_eq(kern_context_create(NULL, &b), KERN_OK);
    int64_t n4 = 4, n5 = 5, s22[2] = {2, 2};
    kern_buffer *f4, *f5, *i4, *m22;
    cr_assert_eq(kern_buffer_create(a, KERN_F32, 1, &n4, NULL, &f4), KERN_OK);
    cr_assert_eq(kern_buffer_create(b, KERN_F32, 1, &n5, NULL, &f5), KERN_OK);
    cr_assert_eq(kern_buffer_create(b, KERN_I32, 1, &n4, NULL, &i4), KERN_OK);
    cr_assert_eq(kern_buffer_create(b, KERN_F32, 2, s22, NULL, &m22), KERN_OK);
    cr_expect_eq(kern_buffer_copy_from(f4, f5), KERN_ERR_ARGUMENT);
    cr_expect(strstr(kern_context_last_error(a), "the source is f32[5], the destination f32[4]"),
              "%s", kern_context_last_error(a));
    cr_expect_eq(kern_buffer_copy_from(f4, i4), KERN_ERR_ARGUMENT);
    cr_expect(strstr(kern_context_last_error(a), "i32[4]"), "%s", kern_context_last_error(a));
    cr_expect_eq(kern_buffer_copy_from(f4, m22), KERN_ERR_ARGUMENT); /* same bytes, not shape */
    cr_expect_eq(kern_buffer_copy_from(f4, NULL), KERN_ERR_ARGUMENT);
    cr_expect(strstr(kern_context_last_error(a), "the source is NULL"), "%s",
              kern_context_last_error(a));
    cr_expect_eq(kern_buffer_copy_from(NULL, f4), KERN_ERR_ARGUMENT);
    kern_context_release(b);
    kern_context_release(a);
}

/* CUDA, where a GPU is (the GPU machine): two contexts on two GPUs (or twice GPU 0 where
 * there is one) on two threads at once, and copies between them, each right after the
 * destination was zeroed (an asynchronous memset on the destination's stream). */
Test(devices, cuda_contexts_at_once_and_copies) {
    kern_context_options a = kern_context_options_default(), b;
    a.backend = KERN_BACKEND_CUDA;
    a.device = 0;
    kern_context *c0, *c1, *cpu;
    kern_status s = kern_context_create(&a, &c0);
    if (s != KERN_OK) {
        kern_context_release(c0);
        cr_skip_test("no CUDA device");
    }
    b = a;
    b.device = 1;
    if (kern_context_create(&b, &c1) != KERN_OK) { /* one GPU: a second context of it */
        kern_context_release(c1);
        b.device = 0;
        cr_assert_eq(kern_context_create(&b, &c1), KERN_OK, "%s", kern_context_last_error(c1));
    }
    cr_expect_eq(kern_context_device_index(c1), b.device);
    at_once(a, b);
    cr_assert_eq(kern_context_create(NULL, &cpu), KERN_OK);
    const int64_t n = 2500000; /* 20 MB */
    kern_buffer *src = ramp(c0, n, 0.5), *dst, *back, *host;
    cr_assert_eq(kern_buffer_create(c1, KERN_F64, 1, &n, NULL, &dst), KERN_OK);
    cr_expect_eq(kern_buffer_copy_from(dst, src), KERN_OK, "%s", kern_context_last_error(c1));
    expect_ramp(dst, n, 0.5, "cuda:0 -> cuda:1");
    cr_assert_eq(kern_buffer_create(c0, KERN_F64, 1, &n, NULL, &back), KERN_OK);
    cr_expect_eq(kern_buffer_copy_from(back, dst), KERN_OK, "%s", kern_context_last_error(c0));
    expect_ramp(back, n, 0.5, "cuda:1 -> cuda:0");
    cr_assert_eq(kern_buffer_create(cpu, KERN_F64, 1, &n, NULL, &host), KERN_OK);
    cr_expect_eq(kern_buffer_copy_from(host, dst), KERN_OK, "%s", kern_context_last_error(cpu));
    expect_ramp(host, n, 0.5, "cuda:1 -> cpu");
    kern_buffer *h2 = ramp(cpu, n, -3);
    cr_expect_eq(kern_buffer_copy_from(dst, h2), KERN_OK, "%s", kern_context_last_error(c1));
    expect_ramp(dst, n, -3, "cpu -> cuda:1");
    kern_context_release(cpu);
    kern_context_release(c1);
    kern_context_release(c0);
}
