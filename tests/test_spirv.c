/* test_spirv.c - the SPIR-V backend (backends/spirv/, docs/spirv-abi.md) and the Vulkan
 * device (runtime/vulkan.c).
 *
 * spirv: every kernel of the examples, of the compiler's valid test programs and of the
 * gradient corpus (REAL as f32 and as f64), forward and K.grad, release and debug, emits a
 * module that SPIRV-Tools' validator accepts for Vulkan 1.2, with one entry point per task
 * named by the task symbol; Float64 is declared only where the source has f64.
 *
 * vulkan (on a Vulkan device: lavapipe in CI; the tests say so and skip where there is
 * none): the f64 functions of spv_math64.c against libm in ulps; an adstack overflow under
 * `while` gives the CPU's message; malformed SPIR-V and missing entry points are format
 * errors; buffers released while launches are in flight stay valid over thousands of
 * launches; and the validation layer reports nothing for any of it. The gradient corpus on
 * Vulkan is KERN_TEST_BACKEND=vulkan of the grad_corpus suite (.ci/run runs it). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adds_cases.h"
#include "../backends/meta_ir.h"
#include "../backends/spirv/spv_emit.h"
#include "../common/modfile.h"
#include "../common/util.h"
#include "../compiler/driver.h"
#include "../include/kern.h"
#include "../runtime/device.h"
#include "../runtime/meta.h"
#include "../runtime/rt.h"
#include "golden.h"
#include "test_backend.h"

#ifndef KERN_SOURCE_ROOT
#define KERN_SOURCE_ROOT "."
#endif

/* ---- spirv: validation over every program ------------------------------------------------ */

/* Whether the module declares capability cap / an entry point named name. */
static bool has_capability(const uint32_t *w, size_t n, uint32_t cap) {
    for (size_t i = 5; i < n && (w[i] >> 16);) {
        if ((w[i] & 0xffff) == 17 && w[i + 1] == cap)
            return true;
        i += w[i] >> 16;
    }
    return false;
}

static bool has_entry(const uint32_t *w, size_t n, const char *name) {
    for (size_t i = 5; i < n && (w[i] >> 16);) {
        if ((w[i] & 0xffff) == 15 && !strcmp((const char *)&w[i + 3], name))
            return true;
        i += w[i] >> 16;
    }
    return false;
}

typedef struct spv_stats {
    int files, kernels, entries;
} spv_stats;

static void check_source(const char *path, const char *src, bool debug, spv_stats *st) {
    kc_ctx *cc = kc_ctx_new();
    cc->opts.grad = KC_GRAD_POSSIBLE;
    cc->opts.debug = debug;
    ir_module *m = kc_compile_source(cc, path, src, strlen(src));
    if (!m) {
        diag_print_all(stderr, &cc->diags);
        cr_assert_fail("%s does not compile", path);
    }
    char err[4096] = "";
    size_t n = 0;
    uint32_t *w = kc_spirv_emit(m, &cc->opts, &n, err, sizeof err);
    cr_assert(w, "%s: %s", path, err);
    cr_expect(kc_spirv_validate(w, n, err, sizeof err), "%s (%s): %s", path,
              debug ? "debug" : "release", err);
    kern_meta *meta = kc_meta_from_ir(m);
    for (int k = 0; k < meta->nkernels; k++) {
        st->kernels++;
        for (int t = 0; t < meta->kernels[k].ntasks; t++, st->entries++) {
            char sym[600];
            kern_meta_symbol(sym, sizeof sym, meta->kernels[k].name, t, false);
            cr_expect(has_entry(w, n, sym), "%s: no entry point %s", path, sym);
        }
    }
    kern_meta_free(meta);
    cr_expect(has_capability(w, n, 11 /* Int64 */), "%s: no Int64", path);
    if (!strstr(src, "f64"))
        cr_expect(!has_capability(w, n, 10 /* Float64 */), "%s: Float64 without f64", path);
    st->files++;
    free(w);
    ir_module_free(m);
    kc_ctx_free(cc);
}

static void check_dir(const char *dir, const char *type, bool debug, spv_stats *st) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", KERN_SOURCE_ROOT, dir);
    DIR *d = opendir(path);
    cr_assert(d, "cannot open %s", path);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".kern") != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s/%s", KERN_SOURCE_ROOT, dir, e->d_name);
        size_t len;
        char *text = kern_read_file(path, &len);
        cr_assert(text, "cannot read %s", path);
        char *src = golden_with_type(text, type);
        check_source(path, src, debug, st);
        free(src);
        free(text);
    }
    closedir(d);
}

static void corpus(bool debug) {
    spv_stats st = {0};
    check_dir("examples", NULL, debug, &st);
    check_dir("tests/golden/ir", NULL, debug, &st);
    check_dir("tests/golden/passes", NULL, debug, &st);
    check_dir("tests/grad", "f64", debug, &st);
    check_dir("tests/grad", "f32", debug, &st);
    cr_log_info("spirv: %d files, %d kernels, %d entry points validated", st.files, st.kernels,
                st.entries);
    cr_assert_gt(st.files, 140);
    cr_assert_gt(st.entries, st.kernels); /* gradients included */
}

Test(spirv, corpus_release_validates) { corpus(false); }
Test(spirv, corpus_debug_validates) { corpus(true); }

/* ---- vulkan: on a device -------------------------------------------------------------------- */

static kern_context *vk_context(void) {
    kern_context *ctx = NULL;
    kern_status s = kern_test_vulkan_context(&ctx);
    if (s != KERN_OK) {
        fprintf(stderr, "vulkan: no Vulkan device here (%s): the test is skipped\n",
                kern_context_last_error(ctx));
        kern_context_release(ctx);
        return NULL;
    }
    cr_assert(!strncmp(kern_context_device_name(ctx), "vulkan: ", 8), "%s",
              kern_context_device_name(ctx));
    return ctx;
}

static void no_validation_messages(kern_context *ctx) {
    const char *first = NULL;
    int n = rt_vulkan_validation_messages(ctx->dev, &first);
    cr_expect_eq(n, 0, "the validation layer reported %d messages; the first: %s", n, first);
}

/* The same overflow on the CPU and on Vulkan: the same message. */
Test(vulkan, adstack_overflow_message_is_the_cpus) {
    static const char *src = "kernel w(x: f32[], y: f32[]) {\n"
                             "    for i in 0..len(x) {\n"
                             "        var v = x[i];\n"
                             "        while v < 100.0 {\n"
                             "            v = v * 1.5 + sin(v);\n"
                             "        }\n"
                             "        y[i] = v;\n"
                             "    }\n"
                             "}\n";
    char msg[2][2048];
    for (int dev = 0; dev < 2; dev++) {
        kern_context *ctx;
        if (dev == 1) {
            if (!(ctx = vk_context()))
                cr_skip_test("no Vulkan device");
        } else {
            kern_context_options o = kern_context_options_default();
            o.ad_stack_size = 4;
            cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK);
        }
        if (dev == 1) { /* the same option on the Vulkan context */
            kern_context_options o = kern_context_get_options(ctx);
            kern_context_release(ctx);
            o.ad_stack_size = 4;
            cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s",
                         kern_context_last_error(ctx));
        }
        kern_module *mod;
        cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "w.kern", &mod), KERN_OK, "%s",
                     kern_context_last_error(ctx));
        kern_kernel *g;
        cr_assert_eq(kern_kernel_find(mod, "w.grad", &g), KERN_OK, "%s",
                     kern_context_last_error(ctx));
        float x[8] = {1, 2, 3, 4, 5, 6, 7, 0.5f}, zero[8] = {0};
        int64_t n = 8;
        kern_buffer *b[4];
        for (int i = 0; i < 4; i++)
            cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, i == 0 ? x : zero, &b[i]),
                         KERN_OK);
        kern_arg args[4] = {kern_arg_buffer(b[0]), kern_arg_buffer(b[1]), kern_arg_buffer(b[2]),
                            kern_arg_buffer(b[3])};
        kern_status st = kern_launch(g, args, 4);
        if (st == KERN_OK)
            st = kern_sync(ctx);
        cr_assert_eq(st, KERN_ERR_DEVICE, "%s: %s", dev ? "vulkan" : "cpu", kern_status_name(st));
        snprintf(msg[dev], sizeof msg[dev], "%s", kern_context_last_error(ctx));
        if (dev == 1)
            no_validation_messages(ctx);
        kern_context_release(ctx);
    }
    cr_assert(strstr(msg[0], "adstack"), "%s", msg[0]);
    cr_assert_str_eq(msg[1], msg[0]);
}

Test(vulkan, malformed_modules_are_format_errors) {
    kern_context *ctx = vk_context();
    if (!ctx)
        cr_skip_test("no Vulkan device");
    const char *meta = "kern-meta 1\nkernel k 1 1 0 1\ntask serial 0 1 1\nend\n";
    char path[] = "/tmp/kern-vkmod-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    static const unsigned char bad[][24] = {
        {1, 2, 3},                                       /* not a multiple of 4 */
        {0x03, 0x02, 0x23, 0x08, 0, 5, 1, 0, 0, 0, 0, 0, /* wrong magic */
         1,    0,    0,    0,    0, 0, 0, 0, 0, 0, 0, 0},
        {0x03, 0x02, 0x23, 0x07, 0, 5, 1, 0, 0,    0, 0,    0, /* an instruction that overruns */
         9,    0,    0,    0,    0, 0, 0, 0, 0x11, 0, 0x20, 0},
    };
    size_t lens[] = {3, 24, 24};
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(path, "wb");
        size_t n;
        char *file = kern_modfile_build("vulkan", meta, strlen(meta), bad[i], lens[i], &n);
        cr_assert(f && file);
        cr_assert_eq(fwrite(file, 1, n, f), n);
        fclose(f);
        free(file);
        kern_module *m = NULL;
        kern_status s = kern_module_load_file(ctx, path, &m);
        cr_expect_eq(s, KERN_ERR_FORMAT, "case %d: %s: %s", i, kern_status_name(s),
                     kern_context_last_error(ctx));
        cr_expect(strstr(kern_context_last_error(ctx), "SPIR-V"), "case %d: %s", i,
                  kern_context_last_error(ctx));
    }
    remove(path);
    no_validation_messages(ctx);
    kern_context_release(ctx);
}

/* Buffers released right after their launch stay valid until it completes; every result
 * is checked against a C loop. */
Test(vulkan, release_after_launch_stress) {
    kern_context *ctx = vk_context();
    if (!ctx)
        cr_skip_test("no Vulkan device");
    static const char *src = "kernel axpy(a: f32, x: f32[], y: f32[]) {\n"
                             "    for i in 0..len(x) { y[i] = a * x[i] + y[i]; }\n"
                             "}\n";
    kern_module *mod;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "s.kern", &mod), KERN_OK);
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(mod, "axpy", &k), KERN_OK);
    enum { N = 1000, ROUNDS = 2000 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)i;
    int64_t n = N;
    kern_buffer *keep;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, NULL, &keep), KERN_OK);
    for (int r = 0; r < ROUNDS; r++) {
        kern_buffer *bx;
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, x, &bx), KERN_OK);
        kern_arg args[3] = {kern_arg_f32((float)(r % 3)), kern_arg_buffer(bx),
                            kern_arg_buffer(keep)};
        cr_assert_eq(kern_launch(k, args, 3), KERN_OK, "%s", kern_context_last_error(ctx));
        kern_buffer_release(bx); /* still in flight */
    }
    cr_assert_eq(kern_buffer_read(keep, y, sizeof y), KERN_OK);
    double sum_a = 0;
    for (int r = 0; r < ROUNDS; r++)
        sum_a += r % 3;
    for (int i = 0; i < N; i++)
        cr_assert_float_eq(y[i], (float)(sum_a * i), 1e-3 * fabs(sum_a * i) + 1e-3, "y[%d] = %g", i,
                           y[i]);
    no_validation_messages(ctx);
    kern_context_release(ctx);
}

/* LeakSanitizer and Vulkan drivers: lavapipe makes one-time allocations (under
 * pthread_once) that it never frees, and the loader unloads it at vkDestroyInstance, so
 * LSan reports them from an unknown module. Keeping the driver mapped (RTLD_NODELETE)
 * keeps what they point at reachable (no leak); the test binary does this before any
 * context. */
#include <dlfcn.h>
__attribute__((constructor)) static void keep_vulkan_driver_mapped(void) {
    static const char *const drivers[] = {"libvulkan_lvp.so", "libVkLayer_khronos_validation.so"};
    for (size_t i = 0; i < sizeof drivers / sizeof *drivers; i++)
        (void)dlopen(drivers[i], RTLD_NOW | RTLD_NODELETE | RTLD_LOCAL);
}

/* ---- msl: Metal source through SPIRV-Cross -------------------------------------------------- */

/* The MSL of src (every kernel and gradient), or NULL with err. */
static char *msl_of(const char *path, const char *src, char *err, size_t errlen) {
    kc_ctx *cc = kc_ctx_new();
    cc->opts.grad = KC_GRAD_POSSIBLE;
    ir_module *m = kc_compile_source(cc, path, src, strlen(src));
    cr_assert(m, "%s does not compile", path);
    size_t n = 0;
    uint32_t *w = kc_spirv_emit(m, &cc->opts, &n, err, errlen);
    cr_assert(w, "%s: %s", path, err);
    char *msl = kc_spirv_to_msl(w, n, err, errlen);
    kern_meta *meta = kc_meta_from_ir(m);
    for (int k = 0; msl && k < meta->nkernels; k++) /* one kernel function per task */
        for (int t = 0; t < meta->kernels[k].ntasks; t++) {
            char sym[600], line[700];
            kern_meta_symbol(sym, sizeof sym, meta->kernels[k].name, t, false);
            snprintf(line, sizeof line, "// kern: entry %s\n", sym);
            cr_expect(strstr(msl, line), "%s: no MSL for %s", path, sym);
        }
    kern_meta_free(meta);
    free(w);
    ir_module_free(m);
    kc_ctx_free(cc);
    return msl;
}

/* Every f32 program of the corpus translates; f64 ones are refused with the reason. */
Test(msl, corpus_translates) {
    const char *dirs[] = {"tests/grad", "examples"};
    int ok = 0, refused = 0;
    for (int d = 0; d < 2; d++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", KERN_SOURCE_ROOT, dirs[d]);
        DIR *dir = opendir(path);
        cr_assert(dir);
        struct dirent *e;
        while ((e = readdir(dir))) {
            size_t n = strlen(e->d_name);
            if (n < 6 || strcmp(e->d_name + n - 5, ".kern") != 0)
                continue;
            snprintf(path, sizeof path, "%s/%s/%s", KERN_SOURCE_ROOT, dirs[d], e->d_name);
            size_t len;
            char *text = kern_read_file(path, &len);
            for (int f64 = 0; f64 < 2; f64++) {
                char *src = golden_with_type(text, f64 ? "f64" : "f32");
                char err[1024] = "";
                char *msl = msl_of(path, src, err, sizeof err);
                if (strstr(src, "f64")) {
                    cr_expect(!msl && strstr(err, "Metal has no 64-bit floats"), "%s: %s", path,
                              err);
                    refused++;
                } else {
                    cr_expect(msl && strstr(msl, "#include <metal_stdlib>"), "%s: %s", path, err);
                    ok++;
                }
                free(msl);
                free(src);
            }
            free(text);
        }
        closedir(dir);
    }
    cr_log_info("msl: %d programs translated, %d refused for f64", ok, refused);
    cr_assert_gt(ok, 60);
}

/* Version 1's small types translate: bytes, shorts and longs in device buffers; f16/bf16
 * as their bits (ushort). 64-bit atomics stay refused by SPIRV-Cross, with its reason. */
Test(msl, small_types_translate) {
    static const char src[] =
        "kernel k(a: u64[], b: i8[], c: u16[], s: u64, t: i8, f: f32[], h: f16[], g: bf16[]) {\n"
        "    for i in 0..len(a) {\n"
        "        a[i] = a[i] / s; b[i] = i8(i32(t) * 3); c[i] = u16(a[i]);\n"
        "        h[i] = g[i] * f[i];\n"
        "    }\n"
        "}\n";
    char err[1024] = "";
    char *msl = msl_of("small.kern", src, err, sizeof err);
    cr_assert(msl, "%s", err);
    cr_expect(strstr(msl, "uchar") && strstr(msl, "ushort") && strstr(msl, "ulong"), "%s", msl);
    free(msl);
    static const char atomics[] =
        "kernel k(m: u64[], a: u64[]) { for i in 0..len(a) { atomic_max(m[0], a[i]); } }\n";
    msl = msl_of("atomics.kern", atomics, err, sizeof err);
    cr_expect(!msl && strstr(err, "64-bit atomics"), "%s", err);
    free(msl);
}

/* A few translations kept as golden files (UPDATE=1 rewrites them): tests/golden/msl. */
Test(msl, golden_files) {
    char **names;
    int n = golden_list("msl", ".kern", &names);
    cr_assert_geq(n, 2);
    for (int i = 0; i < n; i++) {
        size_t len;
        char *src = golden_read("msl", names[i], &len);
        char err[1024] = "";
        char *msl = msl_of(names[i], src, err, sizeof err);
        cr_assert(msl, "%s: %s", names[i], err);
        /* buffer n is descriptor binding n (docs/metal.md): the launch block is 0 */
        cr_expect(strstr(msl, "launch [[buffer(0)]]"), "%s", names[i]);
        char *want = golden_sibling(names[i], ".msl");
        cr_expect(golden_check("msl", want, msl), "%s differs from %s", names[i], want);
        free(want);
        free(msl);
        free(src);
    }
    golden_free_list(names, n);
}

/* K.grad of the per-thread loop: w.grad is summed in the scratch buffer's replicas when it
 * fits one (T <= 2048) and with global atomics when it does not, against a hand-written
 * reverse sweep in double. `runs` launches (graph: a graph of one launch, replayed), each
 * with out.grad seeded again, add into the same w.grad, so each after the first finds what
 * the one before left: the replicas zero and the ticket counter reset, or the sum is off. */
static void loop_grad_case(kern_context *ctx, int n, int steps, int runs, bool graph) {
    static const char *src =
        "kernel loop(x0: f32[], w: f32[], out: f32[]) {\n"
        "    for i in 0..len(x0) {\n"
        "        var x = x0[i];\n"
        "        for t in 0..len(w) { x = 0.5 * sin(x) * w[t] + 0.4 * x + 0.1; }\n"
        "        out[i] = x;\n"
        "    }\n"
        "}\n";
    kern_module *mod;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "loop.kern", &mod), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    kern_kernel *g;
    cr_assert_eq(kern_kernel_find(mod, "loop.grad", &g), KERN_OK);
    float *x0 = calloc((size_t)n, 4), *w = calloc((size_t)steps, 4), *gout = calloc((size_t)n, 4);
    float *gw = calloc((size_t)steps, 4), *gx = calloc((size_t)n, 4);
    double *rw = calloc((size_t)steps, sizeof *rw), *xs = calloc((size_t)steps, sizeof *xs);
    cr_assert(x0 && w && gout && gw && gx && rw && xs);
    for (int i = 0; i < n; i++)
        x0[i] = -1.0f + 2.0f * (float)i / (float)n, gout[i] = 0.5f + (float)(i % 7) / 7.0f;
    for (int t = 0; t < steps; t++)
        w[t] = 0.5f + (float)(t % 11) / 11.0f;
    for (int i = 0; i < n; i++) { /* the reference, in double */
        double x = x0[i];
        for (int t = 0; t < steps; t++)
            xs[t] = x, x = 0.5 * sin(x) * w[t] + 0.4 * x + 0.1;
        double a = gout[i];
        for (int t = steps - 1; t >= 0; t--) {
            rw[t] += a * 0.5 * sin(xs[t]);
            a *= 0.5 * cos(xs[t]) * w[t] + 0.4;
        }
    }
    int64_t nn = n, ns = steps;
    kern_buffer *b[6];
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &nn, x0, &b[0]), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &ns, w, &b[1]), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &nn, NULL, &b[2]), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &nn, NULL, &b[3]), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &ns, NULL, &b[4]), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &nn, gout, &b[5]), KERN_OK);
    kern_arg args[6];
    for (int i = 0; i < 6; i++)
        args[i] = kern_arg_buffer(b[i]);
    kern_graph *gr = NULL;
    if (graph) {
        cr_assert_eq(kern_graph_begin(ctx), KERN_OK);
        cr_assert_eq(kern_launch(g, args, 6), KERN_OK, "%s", kern_context_last_error(ctx));
        cr_assert_eq(kern_graph_end(ctx, &gr), KERN_OK, "%s", kern_context_last_error(ctx));
    }
    for (int r = 0; r < runs; r++) { /* K.grad zeroes out.grad (out[i] = x overwrote out) */
        cr_assert_eq(kern_buffer_write(b[5], gout, (size_t)n * 4), KERN_OK);
        cr_assert_eq(graph ? kern_graph_launch(gr) : kern_launch(g, args, 6), KERN_OK, "%s",
                     kern_context_last_error(ctx));
    }
    cr_assert_eq(kern_buffer_read(b[4], gw, (size_t)steps * 4), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    double scale = 0;
    for (int t = 0; t < steps; t++)
        scale = fmax(scale, runs * fabs(rw[t]));
    for (int t = 0; t < steps; t++)
        cr_expect(fabs(gw[t] - runs * rw[t]) <= 1e-4 * scale + 1e-6,
                  "T = %d, %d %s: w.grad[%d] = %.7g, want %.7g", steps, runs,
                  graph ? "replays" : "launches", t, (double)gw[t], runs * rw[t]);
    if (gr)
        kern_graph_release(gr);
    for (int i = 0; i < 6; i++)
        kern_buffer_release(b[i]);
    kern_module_release(mod);
    free(x0), free(w), free(gout), free(gw), free(gx), free(rw), free(xs);
}

Test(vulkan, adjoint_sums_in_replicas_and_global) {
    kern_context *ctx = vk_context();
    if (!ctx)
        cr_skip_test("no Vulkan device");
    loop_grad_case(ctx, 20000, 64, 1, false);  /* w.grad fits a replica */
    loop_grad_case(ctx, 3000, 3000, 1, false); /* it does not: global atomics */
    loop_grad_case(ctx, 300, 2048, 1, false);  /* the largest that fits */
    loop_grad_case(ctx, 300, 2049, 1, false);
    loop_grad_case(ctx, 5000, 16, 3, false); /* three launches into one w.grad */
    loop_grad_case(ctx, 5000, 16, 3, true);  /* a graph replayed three times */
    loop_grad_case(ctx, 1, 5, 2, false);     /* one work item: one workgroup does all */
    no_validation_messages(ctx);
    kern_context_release(ctx);
}

/* ---- wide launch blocks (issue 23: the builder once aborted at 64 struct members) ----- */

/* "kernel k(x: f32[], s0: f32, ..., s<n-1>: f32) { x[i] = x[i] * 0.5 + s0 + ... }", the
 * sum over the first 100 scalars at most (an expression is at most 1000 levels deep) */
static char *scalars_source(int n) {
    kern_buf b = {0};
    buf_printf(&b, "kernel k(x: f32[]");
    for (int i = 0; i < n; i++)
        buf_printf(&b, ", s%d: f32", i);
    buf_printf(&b, ") { for i in 0..len(x) { x[i] = x[i] * 0.5");
    for (int i = 0; i < n && i < 100; i++)
        buf_printf(&b, " + s%d", i);
    buf_printf(&b, "; } }\n");
    return b.data;
}

/* The SPIR-V of src (with every gradient the global-access check allows), or NULL with err. */
static bool spirv_checks; /* spirv_of compiles checked code */

static uint32_t *spirv_of(const char *src, size_t *n, char *err, size_t errlen) {
    kc_ctx *cc = kc_ctx_new();
    cc->opts.grad = KC_GRAD_POSSIBLE;
    cc->opts.checks = spirv_checks;
    ir_module *m = kc_compile_source(cc, "wide.kern", src, strlen(src));
    if (!m)
        diag_print_all(stderr, &cc->diags);
    cr_assert(m, "does not compile");
    uint32_t *w = kc_spirv_emit(m, &cc->opts, n, err, errlen);
    ir_module_free(m);
    kc_ctx_free(cc);
    return w;
}

/* Version 1's scalar types: 8/16-bit storage buffers and registers, declared with their
 * capabilities and extensions; spirv-val accepts the module. */
Test(spirv, small_types_declare_their_capabilities) {
    static const char src[] =
        "kernel k(a: i8[], b: u16[], h: f16[], g: bf16[], e: u64[], s: u8) {\n"
        "    for i in 0..len(a) {\n"
        "        a[i] = i8(s); b[i] = u16(e[i] >> u64(3));\n"
        "        h[i] = g[i] * 2.0; e[i] = e[i] / u64(7);\n"
        "    }\n"
        "}\n";
    char err[1024] = "";
    size_t n = 0;
    uint32_t *w = spirv_of(src, &n, err, sizeof err);
    cr_assert(w, "%s", err);
    cr_expect(kc_spirv_validate(w, n, err, sizeof err), "%s", err);
    const uint32_t caps[] = {39 /* Int8 */, 22 /* Int16 */, 11 /* Int64 */,
                             4448 /* StorageBuffer8BitAccess */,
                             4433 /* StorageBuffer16BitAccess */};
    for (size_t i = 0; i < sizeof caps / sizeof *caps; i++)
        cr_expect(has_capability(w, n, caps[i]), "capability %u missing", caps[i]);
    cr_expect(!has_capability(w, n, 9 /* Float16 */), "f16 is stored as bits, no Float16");
    free(w);
}

/* How many instructions of opcode op the function of entry point `entry` has (-1: no such
 * entry point). */
static int count_op(const uint32_t *w, size_t n, const char *entry, uint32_t op) {
    uint32_t fn = 0;
    int c = -1;
    for (size_t i = 5; i < n && (w[i] >> 16); i += w[i] >> 16) {
        uint32_t code = w[i] & 0xffff;
        if (code == 15 /* OpEntryPoint */ && !strcmp((const char *)&w[i + 3], entry))
            fn = w[i + 2];
        else if (code == 54 /* OpFunction */ && fn && w[i + 2] == fn)
            c = 0;
        else if (code == 56 /* OpFunctionEnd */ && c >= 0)
            return c;
        else if (c >= 0)
            c += code == op;
    }
    return c;
}

/* A combined adjoint add whose element the divergence analysis finds one for the subgroup
 * (w.grad[t] of a one-dimensional task, also under per-item trip counts) is summed over
 * the subgroup with no vote on the element; one at a per-item index (w.grad[j[i]]) and one
 * in a two-dimensional task, whose subgroups span rows, keep the vote. The sums these make
 * are checked by the gradient corpus on Vulkan. */
Test(spirv, uniform_adjoint_adds_skip_the_vote) {
    const adds_case *cases = adds_cases;
    size_t ncases = sizeof adds_cases / sizeof *adds_cases;
    for (size_t i = 0; i < ncases; i++) {
        char err[1024] = "";
        size_t n = 0;
        uint32_t *w = spirv_of(cases[i].src, &n, err, sizeof err);
        cr_assert(w, "case %zu: %s", i, err);
        cr_expect(kc_spirv_validate(w, n, err, sizeof err), "case %zu: %s", i, err);
        const char *g = "kern_k__grad__t0"; /* (its checkpointed copy decides on its own) */
        cr_expect(count_op(w, n, g, 350 /* OpGroupNonUniformFAdd */) > 0,
                  "case %zu: the adds are not combined", i);
        cr_expect_eq(count_op(w, n, g, 336 /* OpGroupNonUniformAllEqual */) > 0, cases[i].vote,
                     "case %zu: the vote is %s", i, cases[i].vote ? "missing" : "kept");
        free(w);
    }
}

/* The adds at an element the divergence analysis finds one for the subgroup (the cases
 * without a vote) go to replicas: K.grad's task has no add into w.grad's own binding in its
 * hot path but the fallback for arrays past 2048 elements, and a sum entry point
 * kern_k__grad__r0 with one loop adds the copies back; the others have no sum entry point.
 * A K.grad with more than 26 parameters (its scratch binding would pass 32) has none
 * either. What the sums come to: vulkan/adjoint_sums_in_replicas_and_global and the
 * gradient corpus on Vulkan. */
Test(spirv, uniform_adjoint_adds_go_to_replicas) {
    for (size_t i = 0; i < sizeof adds_cases / sizeof *adds_cases; i++) {
        char err[1024] = "";
        size_t n = 0;
        uint32_t *w = spirv_of(adds_cases[i].src, &n, err, sizeof err);
        cr_assert(w, "case %zu: %s", i, err);
        cr_expect(kc_spirv_validate(w, n, err, sizeof err), "case %zu: %s", i, err);
        int loops = count_op(w, n, "kern_k__grad__r0", 246 /* OpLoopMerge */);
        cr_expect_eq(loops, adds_cases[i].vote ? -1 : 1, "case %zu: the sum entry point has %d", i,
                     loops);
        free(w);
    }
    kern_buf b = {0};
    buf_printf(&b, "kernel k(x: f32[], w: f32[], out: f32[]");
    for (int i = 0; i < 12; i++)
        buf_printf(&b, ", s%d: f32", i);
    buf_printf(&b, ") { for i in 0..len(x) { var v = x[i];\n"
                   "    for t in 0..len(w) { v = sin(v) * w[t] + s0 * s11; }\n"
                   "    out[i] = v; } }\n");
    char err[1024] = "";
    size_t n = 0;
    uint32_t *w = spirv_of(b.data, &n, err, sizeof err);
    cr_assert(w, "%s", err);
    cr_expect(kc_spirv_validate(w, n, err, sizeof err), "%s", err);
    cr_expect_gt(count_op(w, n, "kern_k__grad__t0", 246), 0, "no K.grad");
    cr_expect_eq(count_op(w, n, "kern_k__grad__r0", 246), -1,
                 "more than 26 parameters: K.grad has replicas");
    free(w);
    free(b.data);
}

/* The loops (OpLoopMerge) of entry point `entry` of a kernel k(x, w, y, n) whose work item
 * runs `loop` on v = x[i] and stores y[i] = v, compiled checked or not; the module must
 * validate. */
static int loops_of(const char *loop, bool checks, const char *entry) {
    char src[512];
    snprintf(src, sizeof src,
             "kernel k(x: f32[], w: f32[], y: f32[], n: i32[]) {\n"
             "  for i in 0..len(x) { var v = x[i];\n    %s\n    y[i] = v; } }\n",
             loop);
    char err[1024] = "";
    size_t nw = 0;
    spirv_checks = checks;
    uint32_t *w = spirv_of(src, &nw, err, sizeof err);
    spirv_checks = false;
    cr_assert(w, "%s: %s", loop, err);
    cr_expect(kc_spirv_validate(w, nw, err, sizeof err), "%s: %s", loop, err);
    int loops = count_op(w, nw, entry, 246 /* OpLoopMerge */);
    free(w);
    return loops;
}

/* A checked innermost loop with accesses at its index under a bound the compiler cannot
 * prove (t in 0..n[i]: w[t]) is tested once and has two copies, one without w[t]'s check
 * (3 loops in the entry point: the grid-stride loop and the copies); one whose accesses
 * are in bounds by construction (t in 0..len(w)) and a loop with none has one. What the
 * copies compute, in range and past w's end: suite `checked` on Vulkan. */
Test(spirv, loops_with_per_item_bounds_are_tested_once) {
    const struct {
        const char *loop;
        int loops;
    } cases[] = {{"for t in 0..n[i] { v = v * w[t]; }", 3},
                 {"for t in 0..len(w) { v = v * w[t]; }", 2},
                 {"for t in 0..n[i] { v = v * 0.5; }", 2}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int loops = loops_of(cases[i].loop, true, "kern_k__t0");
        cr_expect_eq(loops, cases[i].loops, "%s: %d loops", cases[i].loop, loops);
    }
}

/* K.grad's innermost for loops test their adstack pushes and pops once (always: an
 * overflow is reported without checks too) and, checked, the reverse sweep's w.grad[n - 1 -
 * t] with them: each loop that pushes or pops has two copies (5 loops in the entry point:
 * the grid-stride loop, the forward sweep's two and the reverse sweep's two; the sum of
 * w.grad's replicas is an entry point of its own), also where per-item counts make
 * the reverse sweep aligned (its pops under an `if` that runs the item's last n[i] steps of
 * the group's). A while loop (its count unknown ahead) keeps one copy; the reverse sweep's
 * for loop over its count has two. A fast copy of 16 ops or more is two loops, four steps
 * per trip and the rest (loops_of_16_ops_take_four_steps_per_trip): sin's (two more
 * loops), the while loop's reverse sweep and the last case's. What a failed test
 * reports: adstack_rt's a_for_loop_past_its_capacity_is_reported_at_the_for_loop on
 * Vulkan. */
Test(spirv, loops_test_their_adstacks_once) {
    const struct {
        const char *loop;
        bool checks;
        int loops;
    } cases[] = {{"for t in 0..len(w) { v = sin(v) * w[t]; }", true, 7},
                 {"for t in 0..len(w) { v = sin(v) * w[t]; }", false, 7},
                 {"var k = 0; while k < len(w) { v = sin(v) * w[k]; k += 1; }", true, 5},
                 /* per-item counts: the reverse sweep is aligned, its pops under an `if`;
                  * unchecked, so that only its stack makes its copies */
                 {"for t in 0..n[i] { v = v * w[t] + 0.5 * v * v; }", false, 6}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int loops = loops_of(cases[i].loop, cases[i].checks, "kern_k__grad__t0");
        cr_expect_eq(loops, cases[i].loops, "%s: %d loops", cases[i].loop, loops);
    }
}

/* An innermost for loop without an early exit whose body has 16 ops or more runs four
 * steps per trip while four are left, then the rest one at a time (spv_emit_ctrl.c,
^ * emit_loop_from): two loops; only the fast copy of a tested loop, not its checked one; a
 * small body, a while loop and a loop with a break keep one. What the steps compute,
 * counts 0 to 7 past multiples of four: e2e/items_sorted_* and the corpus on Vulkan. */
Test(spirv, loops_of_16_ops_take_four_steps_per_trip) {
#define BIG "v = v * w[t] + 0.5 * v * v - 0.25 * v * v * v + 0.125 * v * v * v * v;"
    const struct {
        const char *loop;
        int loops;
    } cases[] = {{"for t in 0..len(w) { v = v * w[t]; }", 2},
                 {"for t in 0..len(w) { " BIG " }", 3},
                 /* the sort's loop over an invocation's two items, the fast copy's two,
                  * the checked copy */
                 {"for t in 0..n[i] { " BIG " }", 5},
                 {"var t = 0; while t < n[i] { " BIG " t += 1; }", 2},
                 /* tested, two copies, neither unrolled */
                 {"for t in 0..len(w) { " BIG " if v > 3.0 { break; } }", 3}};
#undef BIG
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int loops = loops_of(cases[i].loop, true, "kern_k__t0");
        cr_expect_eq(loops, cases[i].loops, "%s: %d loops", cases[i].loop, loops);
    }
}

Test(spirv, wide_launch_blocks) {
    char err[1024] = "";
    size_t n = 0;
    /* 62 scalars: 64 members with x's extent and the heap's */
    char *src = scalars_source(62);
    uint32_t *w = spirv_of(src, &n, err, sizeof err);
    cr_assert(w, "62 scalars: %s", err);
    cr_expect(kc_spirv_validate(w, n, err, sizeof err), "62 scalars: %s", err);
    free(w);
    free(src);
    /* a gradient with 30 adstacks (two members each) */
    kern_buf b = {0};
    buf_printf(&b, "kernel w(x: f32[], out: f32[], n: i32) {\n  for i in 0..len(x) {\n"
                   "    var y = x[i];\n");
    for (int l = 0; l < 30; l++)
        buf_printf(&b, "    var k%d = 0;\n    while k%d < n { y = sin(y) * 0.9 + 0.1; k%d += 1; }\n",
                   l, l, l);
    buf_printf(&b, "    out[i] = y;\n  }\n}\n");
    w = spirv_of(b.data, &n, err, sizeof err);
    cr_assert(w, "30 while loops: %s", err);
    cr_expect(kc_spirv_validate(w, n, err, sizeof err), "30 while loops: %s", err);
    free(w);
    buf_free(&b);
    /* past SPIR-V's limit of 16383 members: a compile error naming the kernel */
    src = scalars_source(16400);
    w = spirv_of(src, &n, err, sizeof err);
    cr_expect_null(w);
    cr_expect(strstr(err, "kernel 'k'") && strstr(err, "16383"), "%s", err);
    free(w);
    free(src);
}

/* A kernel binding more storage buffers than the device allows in one shader (lavapipe: 32;
 * K.grad.jvp of a kernel with 8 arrays binds 32 + 5) is refused with the kernel's name and
 * the limit, before the driver sees the layout (validation errors are fatal in CI); a device
 * with a higher limit runs it, against a C loop. */
/* A kernel of 200 arrays and its gradient (400 bindings): every array is a global of the
 * entry point's interface (the emitter once aborted past 64 of them, issue 23). */
Test(spirv, two_hundred_arrays_validate) {
    enum { NA = 200 };
    kern_buf b = {0};
    buf_printf(&b, "kernel k(out: f32[]");
    for (int a = 0; a < NA; a++)
        buf_printf(&b, ", a%d: f32[]", a);
    buf_printf(&b, ") {\n  for i in 0..len(out) {\n    var s = 0.0;\n");
    for (int a = 0; a < NA; a++)
        buf_printf(&b, "    s = s + a%d[i] * %d.0;\n", a, a + 1);
    buf_printf(&b, "    out[i] = s;\n  }\n}\n");
    char err[1024] = "";
    size_t n = 0;
    uint32_t *w = spirv_of(b.data, &n, err, sizeof err);
    cr_assert(w, "%s", err);
    cr_expect(kc_spirv_validate(w, n, err, sizeof err), "%s", err);
    size_t entries = 0;
    for (size_t i = 5; i < n; i += w[i] >> 16) /* k and k.grad, one task each */
        entries += (w[i] & 0xffffu) == 15 /* OpEntryPoint */;
    cr_expect_geq(entries, 2);
    free(w);
    buf_free(&b);
}

Test(vulkan, storage_buffer_limit_is_refused_by_name) {
    kern_context *ctx = vk_context();
    if (!ctx)
        cr_skip_test("no Vulkan device");
    enum { NA = 70, N = 5 }; /* past the 64 interface variables the emitter once aborted at */
    kern_buf b = {0};
    buf_printf(&b, "kernel k(");
    for (int a = 0; a < NA; a++)
        buf_printf(&b, "%sa%d: f32[]", a ? ", " : "", a);
    buf_printf(&b, ") {\n  for i in 0..len(a0) {\n    a0[i] = 0.0");
    for (int a = 1; a < NA; a++)
        buf_printf(&b, " + a%d[i]", a);
    buf_printf(&b, ";\n  }\n}\n");
    kern_module *m = NULL;
    kern_kernel *k = NULL;
    kern_status st = kern_module_from_source(ctx, b.data, b.len, "many.kern", &m);
    buf_free(&b);
    if (st == KERN_OK)
        st = kern_kernel_find(m, "k", &k);
    if (strstr(kern_context_device_name(ctx), "llvmpipe"))
        cr_expect_eq(st, KERN_ERR_UNSUPPORTED, "lavapipe allows 32 storage buffers");
    if (st != KERN_OK) {
        cr_expect_eq(st, KERN_ERR_UNSUPPORTED);
        cr_expect(strstr(kern_context_last_error(ctx), "kernel 'k' needs 75 storage buffers") &&
                      strstr(kern_context_last_error(ctx), "maxPerStageDescriptorStorageBuffers"),
                  "%s", kern_context_last_error(ctx));
    } else {
        kern_buffer *bufs[NA];
        kern_arg args[NA];
        float v[N], got[N];
        for (int a = 0; a < NA; a++) {
            for (int i = 0; i < N; i++)
                v[i] = (float)(a * 0.5 + i);
            int64_t n = N;
            cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, v, &bufs[a]), KERN_OK);
            args[a] = kern_arg_buffer(bufs[a]);
        }
        cr_assert_eq(kern_launch(k, args, NA), KERN_OK, "%s", kern_context_last_error(ctx));
        cr_assert_eq(kern_buffer_read(bufs[0], got, sizeof got), KERN_OK);
        for (int i = 0; i < N; i++) {
            double want = 0;
            for (int a = 1; a < NA; a++)
                want += a * 0.5 + i;
            cr_expect(fabs(got[i] - want) <= 1e-4 * want, "a0[%d] = %g, want %g", i, got[i], want);
        }
        for (int a = 0; a < NA; a++)
            kern_buffer_release(bufs[a]);
    }
    no_validation_messages(ctx);
    kern_module_release(m);
    kern_context_release(ctx);
}

Test(vulkan, sixty_two_scalars_against_c) {
    kern_context *ctx = vk_context();
    if (!ctx)
        cr_skip_test("no Vulkan device");
    char *src = scalars_source(62);
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "wide.kern", &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    free(src);
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, "k", &k), KERN_OK);
    enum { N = 37 };
    float x[N], want[N];
    double sum = 0;
    kern_arg args[63];
    for (int i = 0; i < 62; i++) {
        float s = (float)(0.25 * i - 3.0);
        args[1 + i] = kern_arg_f32(s);
        sum += s;
    }
    for (int i = 0; i < N; i++) {
        x[i] = (float)(0.1 * i - 1.0);
        want[i] = (float)(x[i] * 0.5 + sum);
    }
    int64_t shape[1] = {N};
    kern_buffer *bx;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, shape, x, &bx), KERN_OK);
    args[0] = kern_arg_buffer(bx);
    cr_assert_eq(kern_launch(k, args, 63), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_buffer_read(bx, x, sizeof x), KERN_OK);
    for (int i = 0; i < N; i++) /* the GPU adds in the source's order, like this loop */
        cr_expect(fabsf(x[i] - want[i]) <= 1e-4f * fmaxf(1.0f, fabsf(want[i])),
                  "x[%d] = %.7g, want %.7g", i, (double)x[i], (double)want[i]);
    no_validation_messages(ctx);
    kern_buffer_release(bx);
    kern_module_release(m);
    kern_context_release(ctx);
}

/* Signed widening to i64 compared with 0: lavapipe (Mesa 22.3.6) took `i64(s) > 0` as true
 * for s = 0 and -5 when the widening was an OpSConvert (the emitter now shifts). Against
 * the same expressions in C, for i8, i16 and i32 scalars. */
Test(vulkan, widened_signed_scalars_compare_with_zero) {
    kern_context *ctx = vk_context();
    if (!ctx)
        cr_skip_test("no Vulkan device");
    static const char src[] = "kernel k(out: i64[], a: i32, b: i16, c: i8) {\n"
                              "    for i in 0..1 {\n"
                              "        var r: i64 = 0;\n"
                              "        if i64(a) > 0 { r += 1; }\n"
                              "        if i64(a) < 0 { r += 2; }\n"
                              "        if i64(b) > 0 { r += 4; }\n"
                              "        if i64(b) >= 0 { r += 8; }\n"
                              "        if i64(c) > 0 { r += 16; }\n"
                              "        if i64(c) <= 0 { r += 32; }\n"
                              "        out[i] = r * 1000 + i64(a) + i64(b) + i64(c);\n"
                              "    }\n"
                              "}\n";
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "widen.kern", &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, "k", &k), KERN_OK);
    int64_t one = 1;
    kern_buffer *out;
    cr_assert_eq(kern_buffer_create(ctx, KERN_I64, 1, &one, NULL, &out), KERN_OK);
    static const int32_t vals[] = {-5, -1, 0, 1, 3, -128, 127};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        int32_t a = vals[i];
        int16_t b = (int16_t)vals[i];
        int8_t c = (int8_t)vals[i];
        int64_t r = ((int64_t)a > 0) + 2 * ((int64_t)a < 0) + 4 * ((int64_t)b > 0) +
                    8 * ((int64_t)b >= 0) + 16 * ((int64_t)c > 0) + 32 * ((int64_t)c <= 0);
        int64_t want = r * 1000 + a + b + c, got = 0;
        kern_arg args[4] = {kern_arg_buffer(out), kern_arg_i32(a), kern_arg_i16(b), kern_arg_i8(c)};
        cr_assert_eq(kern_launch(k, args, 4), KERN_OK, "%s", kern_context_last_error(ctx));
        cr_assert_eq(kern_buffer_read(out, &got, sizeof got), KERN_OK);
        cr_expect_eq(got, want, "a = %d: %lld, want %lld", a, (long long)got, (long long)want);
    }
    no_validation_messages(ctx);
    kern_buffer_release(out);
    kern_module_release(m);
    kern_context_release(ctx);
}

/* Work items sorted by trip count (passes/trip_sort.c): a task whose loop runs n[i] steps
 * sorts each workgroup's items in workgroup memory (barriers, a workgroup max and adds);
 * with no_trip_sort, and for a loop of len(w) steps, it does not; spirv-val accepts both.
 * The results: e2e/items_sorted_* with KERN_TEST_BACKEND=vulkan (lavapipe in CI). */
Test(spirv, workgroups_sort_their_items_by_trip_count) {
    static const char *const srcs[2] = {
        "kernel k(x0: f32[], w: f32[], n: i32[], out: f32[]) {\n"
        "  for i in 0..len(x0) { var x = x0[i];\n"
        "    for t in 0..n[i] { x = 0.5 * sin(x) * w[t] + 0.4 * x; }\n"
        "    out[i] = x; } }\n",
        "kernel k(x0: f32[], w: f32[], out: f32[]) {\n"
        "  for i in 0..len(x0) { var x = x0[i];\n"
        "    for t in 0..len(w) { x = 0.5 * sin(x) * w[t] + 0.4 * x; }\n"
        "    out[i] = x; } }\n",
    };
    for (int c = 0; c < 2; c++) {
        for (int off = 0; off < 2; off++) {
            kc_ctx *cc = kc_ctx_new();
            cc->opts.no_trip_sort = off;
            ir_module *m = kc_compile_source(cc, "t.kern", srcs[c], strlen(srcs[c]));
            cr_assert(m);
            char err[1024] = "";
            size_t n = 0;
            uint32_t *w = kc_spirv_emit(m, &cc->opts, &n, err, sizeof err);
            cr_assert(w, "%s", err);
            cr_expect(kc_spirv_validate(w, n, err, sizeof err), "%s", err);
            bool want = c == 0 && !off;
            cr_expect_eq(count_op(w, n, "kern_k__t0", 224 /* OpControlBarrier */) >= 5, want,
                         "case %d, no_trip_sort %d: barriers", c, off);
            cr_expect_eq(count_op(w, n, "kern_k__t0", 239 /* OpAtomicUMax */) > 0, want,
                         "case %d, no_trip_sort %d: the workgroup's largest count", c, off);
            free(w);
            ir_module_free(m);
            kc_ctx_free(cc);
        }
    }
}
