/* test_vulkan.c - the Vulkan device (runtime/vulkan.c) on its own, with hand-written GLSL
 * kernels (tests/vulkan/ *.comp, compiled and linked by meson into KERN_TEST_VK_*) that
 * follow the SPIR-V kernel ABI (docs/spirv-abi.md), and hand-made metadata (meta.h):
 * creation and description, memory round trips (also through the staging path that
 * discrete GPUs take, forced with KERN_VULKAN_STAGING on devices whose memory is host
 * visible), kernels against C loops, the launch block, grids and adstack slots, error
 * records, completion points and retirement, capability refusal, malformed code, and the
 * validation layer. Each test skips with a message where no Vulkan device can be
 * created; the validation layer is on (KERN_VULKAN_VALIDATION=1 unless the environment
 * says otherwise, CI: fatal) and every test fails on any message it reports.
 *
 * The suite `vulkan` also has tests with the SPIR-V emitter's kernels (test_spirv.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../backends/spirv/spv_emit.h"
#include "../common/modfile.h"
#include "../common/spvblock.h"
#include "../compiler/driver.h"
#include "../include/kern.h"
#include "../runtime/device.h"
#include "../runtime/meta.h"
#include "test_backend.h"

/* ---- helpers ------------------------------------------------------------------------ */

static const char axpy_meta[] = "kern-meta 1\n"
                                "source axpy.glsl\n"
                                "kernel axpy 1 1 4 2\n"
                                "param a f32 0\n"
                                "param x f32[] 0 0\n"
                                "param y f32[] 0\n"
                                "param s f64[] 0\n"
                                "task parallel 1 3 5\n"
                                "extent 0 (dim 1 0)\n"
                                "task serial 0 7 5\n"
                                "end\n";

static const char scal_meta[] = "kern-meta 1\n"
                                "kernel scal 1 1 8 1\n"
                                "param b bool 0\n"
                                "param i i32 0\n"
                                "param u u32 0\n"
                                "param l i64 0\n"
                                "param f f32 0\n"
                                "param d f64 0\n"
                                "param m i64[,] 0 0\n"
                                "param out f64[] 0\n"
                                "task serial 0 2 5\n"
                                "end\n";

/* grid.comp without adstacks, and with one (i32, capacity len(out)): launches of the
 * latter carry a heap */
static const char grid_meta[] = "kern-meta 1\n"
                                "kernel grid 1 1 1 1\n"
                                "param out u32[] 0\n"
                                "task parallel 1 2 5\n"
                                "extent 0 ?\n"
                                "end\n";
/* the same task marked spread: a thread per work item where the count is known */
static const char grid_spread_meta[] = "kern-meta 1\n"
                                       "kernel grid 1 1 1 1\n"
                                       "param out u32[] 0\n"
                                       "task parallel 1 2 5 spread\n"
                                       "extent 0 ?\n"
                                       "end\n";
static const char grid_ad_meta[] = "kern-meta 1\n"
                                   "kernel grid 1 1 1 1\n"
                                   "param out u32[] 0\n"
                                   "task parallel 1 2 5\n"
                                   "extent 0 ?\n"
                                   "adstack i32 3 9 (dim 0 0)\n"
                                   "end\n";

/* The bytes of a built shader module (KERN_TEST_VK_*), or NULL when the build had no
 * glslangValidator/spirv-link (the caller skips). */
static void *shader(const char *path, size_t *len) {
    if (!path || !*path)
        return NULL;
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open the built shader %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc((size_t)n);
    cr_assert(buf && fread(buf, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

#ifndef KERN_TEST_VK_AXPY
#define KERN_TEST_VK_AXPY ""
#define KERN_TEST_VK_SCAL ""
#define KERN_TEST_VK_GRID ""
#endif

static void *shader_or_skip(const char *path, size_t *len) {
    void *w = shader(path, len);
    if (!w) {
        fprintf(stderr, "vulkan: the test shaders were not built (no glslangValidator or "
                        "spirv-link at configure time): the test is skipped\n");
        cr_skip_test("no test shaders");
    }
    return w;
}

/* The device parameters the tests' contexts have (kern_test_vulkan_context: validation on
 * unless the environment says, or the layer is missing). */
static rt_vulkan_params default_params(int ordinal) {
    kern_context_options o = kern_context_options_default();
    rt_vulkan_params p = {ordinal, o.validation, o.staging};
    if (!getenv("KERN_VULKAN_VALIDATION"))
        p.validation = KERN_VALIDATION_ON;
    return p;
}

/* The Vulkan device, or a skip with the reason. */
static rt_device *device_or_skip(void) {
    rt_device *d = NULL;
    char err[512];
    rt_vulkan_params p = default_params(-1);
    kern_status s = rt_vulkan_device_create(NULL, &p, &d, err, sizeof err);
    if (s != KERN_OK && !getenv("KERN_VULKAN_VALIDATION") && strstr(err, "is not installed")) {
        p.validation = KERN_VALIDATION_OFF; /* the GPU machine has no layer */
        s = rt_vulkan_device_create(NULL, &p, &d, err, sizeof err);
    }
    if (s != KERN_OK) {
        fprintf(stderr, "vulkan: no Vulkan device here (%s): the test is skipped\n", err);
        cr_skip_test("no Vulkan device");
    }
    return d;
}

static kern_context *context_or_skip(void) {
    kern_context *ctx = kern_test_vulkan_or_null();
    if (!ctx)
        cr_skip_test("no Vulkan device");
    return ctx;
}

static void no_messages(const rt_device *d) {
    const char *first = NULL;
    int n = rt_vulkan_validation_messages(d, &first);
    cr_expect_eq(n, 0, "the validation layer reported %d messages; the first: %s", n, first);
}

/* A module file (target vulkan) of meta and the shader at path, loaded into ctx. */
static kern_module *load_module(kern_context *ctx, const char *meta, const char *path) {
    size_t len;
    void *code = shader_or_skip(path, &len);
    char file[] = "/tmp/kern-vktest-XXXXXX";
    int fd = mkstemp(file);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    size_t n;
    char *bytes = kern_modfile_build("vulkan", meta, strlen(meta), code, len, &n);
    cr_assert(f && bytes);
    cr_assert_eq(fwrite(bytes, 1, n, f), n);
    fclose(f);
    free(bytes);
    free(code);
    kern_module *m = NULL;
    kern_status s = kern_module_load_file(ctx, file, &m);
    remove(file);
    cr_assert_eq(s, KERN_OK, "%s: %s", kern_status_name(s), kern_context_last_error(ctx));
    return m;
}

static kern_kernel *axpy_kernel(kern_context *ctx) {
    kern_module *mod = load_module(ctx, axpy_meta, KERN_TEST_VK_AXPY);
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(mod, "axpy", &k), KERN_OK);
    return k;
}

/* Fails on any validation message, then destroys d. */
static void device_done(rt_device *d) {
    no_messages(d);
    d->ops->destroy(d);
}

/* Device-level: metadata, code and kernel 0's handle. */
typedef struct dev_kernel {
    kern_meta *meta;
    void *code, *handle;
} dev_kernel;

static dev_kernel dev_kernel_load(rt_device *d, const char *meta, const char *path) {
    dev_kernel k = {0};
    char err[1024];
    size_t len;
    void *w = shader_or_skip(path, &len);
    k.meta = kern_meta_parse(meta, strlen(meta), err, sizeof err);
    cr_assert(k.meta, "%s", err);
    cr_assert(kern_meta_check_adstacks(k.meta, err, sizeof err), "%s", err);
    kern_code_image img = {.kind = KERN_CODE_SPIRV, .bytes = w, .len = len};
    kern_status s = d->ops->load_code(d, &img, &k.code, err, sizeof err);
    cr_assert_eq(s, KERN_OK, "%s", err);
    free(w);
    s = d->ops->get_kernel(d, k.code, &k.meta->kernels[0], &k.handle, err, sizeof err);
    cr_assert_eq(s, KERN_OK, "%s", err);
    return k;
}

static void dev_kernel_free(rt_device *d, dev_kernel *k) {
    d->ops->free_kernel(d, k->handle);
    d->ops->unload_code(d, k->code);
    kern_meta_free(k->meta);
}

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* ---- creation ----------------------------------------------------------------------- */

Test(vulkan, creation_and_description) {
    rt_device *d = device_or_skip();
    const char *desc = d->desc;
    cr_expect(!strncmp(desc, "vulkan: ", 8), "%s", desc);
    cr_expect(strstr(desc, " (driver ") && strstr(desc, ", Vulkan 1."), "%s", desc);
    cr_expect(desc[strlen(desc) - 1] == ')', "%s", desc);
    cr_expect(!d->host_memory && d->ad_slot_major);
    cr_expect_eq(d->submitted, 0);
    cr_expect_eq(d->ops->poll(d), 0);
    /* the context picks the same device */
    kern_context *ctx = context_or_skip();
    cr_expect_str_eq(kern_context_device_name(ctx), desc);
    kern_context_release(ctx);
    device_done(d);

    char err[512];
    rt_device *none = NULL;
    rt_vulkan_params p = default_params(-1);
    kern_status s =
        rt_vulkan_device_create("libkern-no-such-vulkan.so.1", &p, &none, err, sizeof err);
    cr_expect_eq(s, KERN_ERR_UNSUPPORTED);
    cr_expect(!none);
    cr_expect(strstr(err, "Vulkan loader not found") && strstr(err, "libkern-no-such-vulkan"), "%s",
              err);
    p = default_params(999);
    p.validation = KERN_VALIDATION_OFF; /* the ordinal's message, even without the layer */
    s = rt_vulkan_device_create(NULL, &p, &none, err, sizeof err);
    cr_expect_eq(s, KERN_ERR_ARGUMENT, "%s", kern_status_name(s)); /* a wrong number */
    cr_expect(strstr(err, "there is no device 999: the loader sees"), "%s", err);

    /* the options' device, and $KERN_VULKAN_DEVICE when it is -1: a number picks that
     * device; anything else is refused */
    kern_context_options o = kern_context_options_default();
    o.backend = KERN_BACKEND_VULKAN;
    o.device = 999;
    s = kern_context_create(&o, &ctx);
    cr_expect_eq(s, KERN_ERR_ARGUMENT, "%s", kern_status_name(s));
    cr_expect(strstr(kern_context_last_error(ctx), "device 999"), "%s",
              kern_context_last_error(ctx));
    kern_context_release(ctx);
    o.device = -2;
    cr_expect_eq(kern_context_create(&o, &ctx), KERN_ERR_ARGUMENT);
    kern_context_release(ctx);
    o.device = 0;
    cr_expect_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_context_release(ctx);
    o.device = -1;
    setenv("KERN_VULKAN_DEVICE", "0", 1);
    s = kern_context_create(&o, &ctx);
    cr_expect_eq(s, KERN_OK, "%s", kern_context_last_error(ctx));
    kern_context_release(ctx);
    setenv("KERN_VULKAN_DEVICE", "first", 1);
    s = kern_context_create(&o, &ctx);
    cr_expect_eq(s, KERN_ERR_ARGUMENT, "%s", kern_status_name(s));
    cr_expect(strstr(kern_context_last_error(ctx), "KERN_VULKAN_DEVICE='first'"), "%s",
              kern_context_last_error(ctx));
    kern_context_release(ctx);
    unsetenv("KERN_VULKAN_DEVICE");
}

/* ---- memory ------------------------------------------------------------------------- */

static void round_trips(bool staging) {
    if (staging)
        setenv("KERN_VULKAN_STAGING", "1", 1);
    rt_device *d = device_or_skip();
    char err[512];
    /* 0 bytes: distinct valid handles; empty copies succeed */
    void *z1 = NULL, *z2 = NULL;
    cr_assert_eq(d->ops->alloc(d, 0, &z1, err, sizeof err), KERN_OK, "%s", err);
    cr_assert_eq(d->ops->alloc(d, 0, &z2, err, sizeof err), KERN_OK, "%s", err);
    cr_expect(z1 && z2 && z1 != z2);
    char c = 'x';
    cr_expect_eq(d->ops->copy_in(d, z1, 0, &c, 0, err, sizeof err), KERN_OK, "%s", err);
    cr_expect_eq(d->ops->copy_out(d, &c, z1, 0, 0, err, sizeof err), KERN_OK, "%s", err);
    cr_expect_eq(d->ops->zero(d, z2, 0, 0, err, sizeof err), KERN_OK, "%s", err);
    cr_expect_eq(c, 'x');
    d->ops->free(d, z1);
    d->ops->free(d, z2);

    /* odd sizes and offsets, checked against a host copy */
    enum { ODD = 13 };
    unsigned char ref[ODD], got[ODD];
    void *m = NULL;
    cr_assert_eq(d->ops->alloc(d, ODD, &m, err, sizeof err), KERN_OK, "%s", err);
    for (int i = 0; i < ODD; i++)
        ref[i] = (unsigned char)(0xa0 + i);
    cr_assert_eq(d->ops->copy_in(d, m, 0, ref, ODD, err, sizeof err), KERN_OK, "%s", err);
    unsigned char part[3] = {1, 2, 3};
    cr_assert_eq(d->ops->copy_in(d, m, 9, part, 3, err, sizeof err), KERN_OK, "%s", err);
    memcpy(ref + 9, part, 3);
    cr_assert_eq(d->ops->zero(d, m, 3, 5, err, sizeof err), KERN_OK, "%s", err); /* unaligned */
    memset(ref + 3, 0, 5);
    cr_assert_eq(d->ops->zero(d, m, 12, 1, err, sizeof err), KERN_OK, "%s", err); /* the tail */
    ref[12] = 0;
    memset(got, 0x55, sizeof got);
    cr_assert_eq(d->ops->copy_out(d, got, m, 0, ODD, err, sizeof err), KERN_OK, "%s", err);
    cr_expect_arr_eq(got, ref, ODD);
    cr_assert_eq(d->ops->copy_out(d, got, m, 5, 7, err, sizeof err), KERN_OK, "%s", err);
    cr_expect_arr_eq(got, ref + 5, 7);
    d->ops->free(d, m);

    /* a large buffer: 64 MiB of a pseudo-random pattern, and a window at its end */
    size_t big = (size_t)64 << 20;
    uint32_t *src = malloc(big), *dst = malloc(big);
    cr_assert(src && dst);
    uint64_t seed = 7;
    for (size_t i = 0; i < big / 4; i++)
        src[i] = (uint32_t)lcg(&seed);
    cr_assert_eq(d->ops->alloc(d, big, &m, err, sizeof err), KERN_OK, "%s", err);
    cr_assert_eq(d->ops->copy_in(d, m, 0, src, big, err, sizeof err), KERN_OK, "%s", err);
    memset(dst, 0, big);
    cr_assert_eq(d->ops->copy_out(d, dst, m, 0, big, err, sizeof err), KERN_OK, "%s", err);
    cr_expect(!memcmp(src, dst, big), "64 MiB round trip differs");
    cr_assert_eq(d->ops->copy_out(d, dst, m, big - 1000, 1000, err, sizeof err), KERN_OK, "%s",
                 err);
    cr_expect(!memcmp(dst, (char *)src + big - 1000, 1000));
    cr_assert_eq(d->ops->zero(d, m, 4096, big - 8192, err, sizeof err), KERN_OK, "%s", err);
    cr_assert_eq(d->ops->copy_out(d, dst, m, 0, big, err, sizeof err), KERN_OK, "%s", err);
    memset((char *)src + 4096, 0, big - 8192);
    cr_expect(!memcmp(src, dst, big), "zeroing the middle of 64 MiB");
    d->ops->free(d, m);
    free(src);
    free(dst);

    /* more than one storage buffer can address: refused with the reason, nothing made */
    void *huge = NULL;
    kern_status s = d->ops->alloc(d, (size_t)1 << 40, &huge, err, sizeof err);
    cr_expect_eq(s, KERN_ERR_OUT_OF_MEMORY, "%s", kern_status_name(s));
    cr_expect(!huge);
    cr_expect(strstr(err, "1099511627776 bytes is more than one"), "%s", err);
    device_done(d);
}

Test(vulkan, memory_round_trips) { round_trips(false); }
Test(vulkan, memory_round_trips_staged) { round_trips(true); }

/* ---- kernels ------------------------------------------------------------------------ */

static void axpy_against_c(bool staging) {
    if (staging)
        setenv("KERN_VULKAN_STAGING", "1", 1);
    kern_context *ctx = context_or_skip();
    kern_kernel *k = axpy_kernel(ctx);
    /* more items than lavapipe's resident threads (grid-stride), but fewer than 65535: llvmpipe
     * ends any loop of a shader after that many iterations (LP_MAX_TGSI_LOOP_ITERATIONS), and
     * task 1 loops over them all in one invocation */
    enum { N = 60001 };
    static float x[N], y[N], ref[N], got[N];
    uint64_t seed = 42;
    for (int i = 0; i < N; i++) {
        x[i] = (float)lcg(&seed) / 2147483648.0f - 1.0f;
        y[i] = (float)(i % 97) * 0.25f;
    }
    const float a = 1.75f;
    double sum = 0;
    for (int i = 0; i < N; i++) {
        ref[i] = a * x[i] + y[i];
        sum += (double)ref[i];
    }
    int64_t n = N, one = 1;
    kern_buffer *bx, *by, *bs;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, x, &bx), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, y, &by), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F64, 1, &one, NULL, &bs), KERN_OK);
    kern_arg args[4] = {kern_arg_f32(a), kern_arg_buffer(bx), kern_arg_buffer(by),
                        kern_arg_buffer(bs)};
    cr_assert_eq(kern_launch(k, args, 4), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_buffer_read(by, got, sizeof got), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    double s = 0;
    cr_assert_eq(kern_buffer_read(bs, &s, sizeof s), KERN_OK);
    /* a driver may fuse a * x + y (NVIDIA's does): one rounding less, off by up to an ulp
     * of the product, which is more than an ulp of the sum where they cancel (seen on an
     * H100: 2.2e-7 relative at y[7]) */
    for (int i = 0; i < N; i++)
        cr_assert(fabsf(got[i] - ref[i]) <= 2e-7f * (fabsf(a * x[i]) + fabsf(y[i])) + 1e-30f,
                  "y[%d] = %.9g, the C loop gives %.9g", i, got[i], ref[i]);
    /* task 1 summed what task 0 wrote: it ran after it */
    cr_expect(fabs(s - sum) <= 1e-6 * fabs(sum) + 1e-3, "s = %.17g, the C loop gives %.17g", s,
              sum);
    cr_expect_eq(kern_sync(ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_context_release(ctx);
}

Test(vulkan, glsl_kernel_against_c_loop) { axpy_against_c(false); }
Test(vulkan, glsl_kernel_against_c_loop_staged) { axpy_against_c(true); }

/* Every scalar kind and the extents land where the shader's std430 declaration (not
 * kern_spv_block_layout) says they are. */
Test(vulkan, launch_block_matches_std430) {
    char err[256];
    kern_meta *meta = kern_meta_parse(scal_meta, strlen(scal_meta), err, sizeof err);
    cr_assert(meta, "%s", err);
    const kern_meta_kernel *mk = &meta->kernels[0];
    const kern_type *pt[8];
    for (int p = 0; p < 8; p++)
        pt[p] = mk->params[p].type;
    size_t off[9];
    size_t size = kern_spv_block_layout(pt, 8, 0, off);
    const size_t want[9] = {0, 4, 8, 16, 24, 32, 40, 56, 64}; /* scal.comp */
    cr_expect_arr_eq(off, want, sizeof want);
    cr_expect_eq(size, 80);
    kern_meta_free(meta);

    kern_context *ctx = context_or_skip();
    kern_module *mod = load_module(ctx, scal_meta, KERN_TEST_VK_SCAL);
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(mod, "scal", &k), KERN_OK);
    int64_t ms[2] = {3, 5}, on = 10;
    kern_buffer *bm, *bo;
    cr_assert_eq(kern_buffer_create(ctx, KERN_I64, 2, ms, NULL, &bm), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F64, 1, &on, NULL, &bo), KERN_OK);
    kern_arg args[8] = {kern_arg_bool(true),       kern_arg_i32(-7),
                        kern_arg_u32(4000000000u), kern_arg_i64(-(INT64_C(1) << 40) - 3),
                        kern_arg_f32(1.5f),        kern_arg_f64(2.25),
                        kern_arg_buffer(bm),       kern_arg_buffer(bo)};
    cr_assert_eq(kern_launch(k, args, 8), KERN_OK, "%s", kern_context_last_error(ctx));
    double out[10];
    cr_assert_eq(kern_buffer_read(bo, out, sizeof out), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    const double expect[10] = {1, -7, 4000000000.0, -1099511627779.0, 1.5, 2.25, 3, 5, 10, 0};
    for (int i = 0; i < 10; i++)
        cr_expect_eq(out[i], expect[i], "value %d: %.17g, expected %.17g", i, out[i], expect[i]);
    kern_context_release(ctx);
}

/* Groups per task: enough for a host-known count, the full resident grid for an unknown
 * one, none for 0, never more threads than adstack slots; a spread task a thread per work
 * item (more than the resident grid); the heap's bindings reach the slot-major entries. */
Test(vulkan, grid_follows_counts_and_slots) {
    rt_device *d = device_or_skip();
    dev_kernel plain = dev_kernel_load(d, grid_meta, KERN_TEST_VK_GRID);
    dev_kernel ad = dev_kernel_load(d, grid_ad_meta, KERN_TEST_VK_GRID);
    dev_kernel spread = dev_kernel_load(d, grid_spread_meta, KERN_TEST_VK_GRID);
    char err[512];
    const int64_t G = KERN_SPV_GROUP, resident = d->ops->ad_slots(d, -1);
    cr_assert(resident >= G && resident % G == 0, "resident threads %lld", (long long)resident);
    cr_expect_eq(d->ops->ad_slots(d, 1), G);
    cr_expect_eq(d->ops->ad_slots(d, 129), 2 * G);
    cr_expect_eq(d->ops->ad_slots(d, INT64_C(1) << 40), resident);
    void *out = NULL, *heap = NULL;
    cr_assert_eq(d->ops->alloc(d, 16, &out, err, sizeof err), KERN_OK, "%s", err);
    size_t heap_bytes = 256 + 4 * (size_t)resident;
    cr_assert_eq(d->ops->alloc(d, heap_bytes, &heap, err, sizeof err), KERN_OK, "%s", err);
    struct {
        int64_t count, slots; /* slots 0: no adstack heap */
        int64_t threads;      /* expected */
        bool spread;
    } cases[] = {
        {1000, 0, 1024, false},     {1, 0, G, false},
        {0, 0, 0, false},           {-1, 0, resident, false},
        {-1, 3 * G, 3 * G, false},  {INT64_C(1) << 40, resident, resident, false},
        {200, 3 * G, 2 * G, false}, {3 * resident + 1, 0, 3 * resident + G, true},
        {1000, 0, 1024, true},      {-1, 0, resident, true},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        uint32_t rec[4] = {0};
        cr_assert_eq(d->ops->copy_in(d, out, 0, rec, sizeof rec, err, sizeof err), KERN_OK);
        cr_assert_eq(d->ops->zero(d, heap, 0, heap_bytes, err, sizeof err), KERN_OK);
        rt_launch_arg arg = {.is_array = true, .mem = out, .shape = {4, 1, 1, 1}};
        int64_t layout[2] = {256, 1};
        kern_err_record er;
        memset(&er, 0x5a, sizeof er);
        const dev_kernel *k = cases[c].slots ? &ad : cases[c].spread ? &spread : &plain;
        const kern_meta_kernel *mk = &k->meta->kernels[0];
        rt_launch l = {.name = "grid",
                       .meta = mk,
                       .kernel = k->handle,
                       .tasks = mk->tasks,
                       .ntasks = 1,
                       .args = &arg,
                       .nargs = 1,
                       .err = &er,
                       .counts = &cases[c].count,
                       .ad_heap = cases[c].slots ? heap : NULL,
                       .ad_slots = cases[c].slots,
                       .ad_stride = cases[c].slots ? 4 : 0,
                       .ad_layout = cases[c].slots ? layout : NULL};
        uint64_t point = 0;
        cr_assert_eq(d->ops->launch(d, &l, &point, err, sizeof err), KERN_OK, "%s", err);
        cr_assert_eq(d->ops->wait(d, point, err, sizeof err), KERN_OK, "%s", err);
        cr_expect_eq(er.code, 0, "the record is the launch's zeroed one");
        cr_expect_eq(er.a, 0);
        cr_assert_eq(d->ops->copy_out(d, rec, out, 0, sizeof rec, err, sizeof err), KERN_OK);
        cr_expect_eq(rec[0], (uint32_t)cases[c].threads, "case %zu: %u threads, expected %lld", c,
                     rec[0], (long long)cases[c].threads);
        cr_expect_eq(rec[1], (uint32_t)cases[c].threads, "case %zu: %u invocations", c, rec[1]);
        cr_expect_eq(rec[2], (uint32_t)cases[c].slots, "case %zu: ad_slots %u", c, rec[2]);
        if (cases[c].slots) {
            uint32_t *h = malloc(heap_bytes);
            cr_assert(h);
            cr_assert_eq(d->ops->copy_out(d, h, heap, 0, heap_bytes, err, sizeof err), KERN_OK);
            for (int64_t w = 0; w < resident; w++) {
                uint32_t want = w < cases[c].threads ? (uint32_t)w + 1 : 0;
                cr_assert_eq(h[64 + w], want, "case %zu: slot %lld's entry is %u, expected %u", c,
                             (long long)w, h[64 + w], want);
            }
            for (int i = 0; i < 64; i++)
                cr_assert_eq(h[i], 0, "case %zu: below ad_off", c);
            free(h);
        }
    }
    d->ops->free(d, out);
    d->ops->free(d, heap);
    dev_kernel_free(d, &plain);
    dev_kernel_free(d, &ad);
    dev_kernel_free(d, &spread);
    device_done(d);
}

/* ---- errors, completion points, retirement ------------------------------------------ */

Test(vulkan, error_record_reaches_the_context) {
    kern_context *ctx = context_or_skip();
    kern_kernel *k = axpy_kernel(ctx);
    int64_t nx = 5000, ny = 1000, one = 1;
    kern_buffer *bx, *by, *bs;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &nx, NULL, &bx), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &ny, NULL, &by), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F64, 1, &one, NULL, &bs), KERN_OK);
    kern_arg args[4] = {kern_arg_f32(1), kern_arg_buffer(bx), kern_arg_buffer(by),
                        kern_arg_buffer(bs)};
    kern_status s = kern_launch(k, args, 4);
    if (s == KERN_OK)
        s = kern_sync(ctx);
    cr_assert_eq(s, KERN_ERR_DEVICE, "%s", kern_status_name(s));
    const char *msg = kern_context_last_error(ctx);
    long long idx = -1;
    cr_expect_eq(sscanf(msg, "kernel 'axpy' (axpy.glsl:3:9): index %lld out of bounds", &idx), 1,
                 "%s", msg);
    cr_expect(idx >= 1000 && idx < 5000, "%s", msg);
    cr_expect(strstr(msg, "out of bounds for dimension 0 of extent 1000"), "%s", msg);
    /* the next launch has a fresh record */
    args[1] = kern_arg_buffer(by);
    cr_assert_eq(kern_launch(k, args, 4), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_expect_eq(kern_sync(ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_context_release(ctx);
}

/* Completion points rise by launch; poll never goes back nor passes what was submitted;
 * each launch's record (every other one faults, with its own extent) reaches its own
 * rt_launch.err once its point has passed. spin: $KERN_VULKAN_SPIN_US, how long a wait
 * polls before it blocks (vk_launch.c; NULL: the device's default, none on lavapipe). */
static void completion_points(const char *spin) {
    if (spin)
        setenv("KERN_VULKAN_SPIN_US", spin, 1);
    rt_device *d = device_or_skip();
    dev_kernel k = dev_kernel_load(d, axpy_meta, KERN_TEST_VK_AXPY);
    const kern_meta_kernel *mk = &k.meta->kernels[0];
    char err[512];
    enum { L = 400 };
    void *x, *y, *s;
    cr_assert_eq(d->ops->alloc(d, 4 * 600, &x, err, sizeof err), KERN_OK);
    cr_assert_eq(d->ops->alloc(d, 4 * 600, &y, err, sizeof err), KERN_OK);
    cr_assert_eq(d->ops->alloc(d, 8, &s, err, sizeof err), KERN_OK);
    static kern_err_record recs[L];
    static uint64_t points[L];
    memset(recs, 0x77, sizeof recs);
    uint64_t last_poll = 0;
    for (int i = 0; i < L; i++) {
        int64_t ny = i % 2 ? 100 + i : 600, cnt = 500;
        rt_launch_arg args[4] = {{.scalar.f32 = 1.0f},
                                 {.is_array = true, .mem = x, .shape = {500, 1, 1, 1}},
                                 {.is_array = true, .mem = y, .shape = {ny, 1, 1, 1}},
                                 {.is_array = true, .mem = s, .shape = {1, 1, 1, 1}}};
        int64_t counts[2] = {cnt, 1};
        rt_launch l = {.name = "axpy",
                       .meta = mk,
                       .kernel = k.handle,
                       .tasks = mk->tasks,
                       .ntasks = 2,
                       .args = args,
                       .nargs = 4,
                       .err = &recs[i],
                       .counts = counts};
        cr_assert_eq(d->ops->launch(d, &l, &points[i], err, sizeof err), KERN_OK, "%s", err);
        cr_assert(points[i] > (i ? points[i - 1] : 0), "point %llu after %llu",
                  (unsigned long long)points[i], (unsigned long long)(i ? points[i - 1] : 0));
        cr_assert_eq(points[i], d->submitted);
        uint64_t p = d->ops->poll(d);
        cr_assert(p >= last_poll && p <= d->submitted, "poll %llu after %llu, submitted %llu",
                  (unsigned long long)p, (unsigned long long)last_poll,
                  (unsigned long long)d->submitted);
        last_poll = p;
        if (i == L / 2) {
            cr_assert_eq(d->ops->wait(d, points[L / 4], err, sizeof err), KERN_OK, "%s", err);
            cr_assert(d->ops->poll(d) >= points[L / 4]);
        }
    }
    cr_expect_eq(d->ops->wait(d, 0, err, sizeof err), KERN_OK);
    kern_status st = d->ops->wait(d, d->submitted + 1, err, sizeof err);
    cr_expect_eq(st, KERN_ERR_INTERNAL, "waiting for a point never submitted: %s",
                 kern_status_name(st));
    cr_expect(strstr(err, "never submitted"), "%s", err);
    cr_assert_eq(d->ops->sync(d, err, sizeof err), KERN_OK, "%s", err);
    cr_expect_eq(d->ops->poll(d), d->submitted);
    for (int i = 0; i < L; i++) {
        if (i % 2 == 0) {
            cr_expect_eq(recs[i].code, 0, "launch %d: code %d", i, recs[i].code);
            continue;
        }
        cr_expect_eq(recs[i].code, KERN_DEVERR_BOUNDS, "launch %d: code %d", i, recs[i].code);
        cr_expect(recs[i].line == 3 && recs[i].col == 9 && recs[i].dim == 0, "launch %d", i);
        cr_expect(recs[i].b == 100 + i && recs[i].a >= recs[i].b && recs[i].a < 500,
                  "launch %d: index %lld, extent %lld", i, (long long)recs[i].a,
                  (long long)recs[i].b);
    }
    d->ops->free(d, x);
    d->ops->free(d, y);
    d->ops->free(d, s);
    dev_kernel_free(d, &k);
    device_done(d);
}

Test(vulkan, completion_points_and_records) { completion_points(NULL); }
/* waits that poll to the end, and ones that poll 1 us and then block */
Test(vulkan, completion_points_and_records_polled) { completion_points("10000000"); }
Test(vulkan, completion_points_and_records_polled_then_blocked) { completion_points("1"); }

/* Thousands of launches whose input buffers are released while they are in flight; the
 * result against a C loop. */
Test(vulkan, released_buffers_stay_valid) {
    kern_context *ctx = context_or_skip();
    kern_kernel *k = axpy_kernel(ctx);
    enum { N = 777, ROUNDS = 3000 };
    static float x[N], y[N], ref[N];
    int64_t n = N, one = 1;
    kern_buffer *by, *bs;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, NULL, &by), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F64, 1, &one, NULL, &bs), KERN_OK);
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < N; i++)
            x[i] = (float)((i + r) % 5);
        kern_buffer *bx;
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, x, &bx), KERN_OK);
        float a = (float)(r % 3);
        kern_arg args[4] = {kern_arg_f32(a), kern_arg_buffer(bx), kern_arg_buffer(by),
                            kern_arg_buffer(bs)};
        cr_assert_eq(kern_launch(k, args, 4), KERN_OK, "round %d: %s", r,
                     kern_context_last_error(ctx));
        kern_buffer_release(bx); /* still in flight */
        for (int i = 0; i < N; i++)
            ref[i] = a * x[i] + ref[i]; /* small integers: exact in f32 */
    }
    cr_assert_eq(kern_buffer_read(by, y, sizeof y), KERN_OK, "%s", kern_context_last_error(ctx));
    for (int i = 0; i < N; i++)
        cr_assert_eq(y[i], ref[i], "y[%d] = %g, the C loop gives %g", i, y[i], ref[i]);
    kern_context_release(ctx);
}

/* ---- code --------------------------------------------------------------------------- */

/* load_code of a SPIR-V image: loads when want is NULL, else refused with
 * KERN_ERR_UNSUPPORTED and a message holding want and the device's name. */
static void expect_load(rt_device *d, const void *bytes, size_t len, const char *want) {
    char err[512] = "";
    kern_code_image img = {.kind = KERN_CODE_SPIRV, .bytes = bytes, .len = len};
    void *code = NULL;
    kern_status s = d->ops->load_code(d, &img, &code, err, sizeof err);
    if (!want) {
        cr_assert_eq(s, KERN_OK, "%s", err);
        d->ops->unload_code(d, code);
        return;
    }
    char name[300]; /* "vulkan: NAME (driver ..." */
    snprintf(name, sizeof name, "%s", d->desc + 8);
    *strstr(name, " (driver ") = '\0';
    cr_expect_eq(s, KERN_ERR_UNSUPPORTED, "%s: %s", kern_status_name(s), err);
    cr_expect(strstr(err, want) && strstr(err, name), "'%s' lacks '%s' or '%s'", err, want, name);
    cr_expect(!code);
}

Test(vulkan, capability_refusal_names_the_feature) {
    rt_device *d = device_or_skip();
    size_t alen, glen;
    void *axpy = shader_or_skip(KERN_TEST_VK_AXPY, &alen); /* Int64 and Float64 */
    void *grid = shader_or_skip(KERN_TEST_VK_GRID, &glen); /* Int64 */
    expect_load(d, axpy, alen, NULL);                      /* the device has what they need */
    rt_vulkan_device_forget(d, 10 /* Float64 */);
    expect_load(d, axpy, alen, "the module needs 64-bit floats (shaderFloat64), which ");
    expect_load(d, grid, glen, NULL);
    rt_vulkan_device_forget(d, 11 /* Int64 */);
    expect_load(d, grid, glen, "the module needs 64-bit integers (shaderInt64), which ");
    /* other kinds of code are refused naming both */
    char err[512];
    void *code = NULL;
    kern_code_image ptx = {.kind = KERN_CODE_PTX, .bytes = ".version 8.0", .len = 12};
    kern_status s = d->ops->load_code(d, &ptx, &code, err, sizeof err);
    cr_expect_eq(s, KERN_ERR_UNSUPPORTED);
    cr_expect(strstr(err, "PTX for cuda; the context's device is vulkan"), "%s", err);
    free(axpy);
    free(grid);
    device_done(d);
}

/* A module of version 1's small types on a device without 16- or 8-bit storage buffers
 * (or Int16): refused at load with the feature's name, never handed to the driver. */
Test(vulkan, small_types_refused_without_their_features) {
    static const char src[] = "kernel k(a: i8[], h: f16[]) {\n"
                              "    for i in 0..len(a) { a[i] = i8(h[i]); }\n"
                              "}\n";
    kc_ctx *cc = kc_ctx_new();
    ir_module *m = kc_compile_source(cc, "small.kern", src, strlen(src));
    cr_assert(m);
    char err[512] = "";
    size_t n = 0;
    uint32_t *w = kc_spirv_emit(m, &cc->opts, &n, err, sizeof err);
    cr_assert(w, "%s", err);
    ir_module_free(m);
    kc_ctx_free(cc);
    static const struct {
        uint32_t cap;
        const char *want;
    } cases[] = {
        {4433, "the module needs 16-bit storage buffers (storageBuffer16BitAccess), which "},
        {22, "the module needs 16-bit integers (shaderInt16), which "},
        {4448, "the module needs 8-bit storage buffers (storageBuffer8BitAccess), which "},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        rt_device *d = device_or_skip();
        expect_load(d, w, n * 4, NULL);
        rt_vulkan_device_forget(d, cases[c].cap);
        expect_load(d, w, n * 4, cases[c].want);
        device_done(d);
    }
    free(w);
}

/* The SPIR-V of src, with r.grad (grads) or without, in *n words. */
static uint32_t *spirv_with_grads(const char *src, bool grads, size_t *n) {
    kc_ctx *cc = kc_ctx_new();
    cc->opts.grad = grads ? KC_GRAD_POSSIBLE : KC_GRAD_NONE;
    ir_module *m = kc_compile_source(cc, "r.kern", src, strlen(src));
    cr_assert(m);
    char err[512] = "";
    uint32_t *w = kc_spirv_emit(m, &cc->opts, n, err, sizeof err);
    cr_assert(w, "%s", err);
    ir_module_free(m);
    kc_ctx_free(cc);
    return w;
}

/* Float atomic adds on workgroup memory (the block copies of modules built before
 * 2026-11-28) need shaderSharedFloat32AtomicAdd; workgroup arrays of other use do not: the
 * forward kernel of per-item trip counts sorts its items in u32 workgroup arrays and loads
 * on a device without float atomics, its K.grad (float adds into w.grad) is refused for
 * the buffer adds, and a module with an OpAtomicFAddEXT on a workgroup variable for the
 * workgroup adds, before any driver sees it. */
Test(vulkan, float_adds_on_workgroup_memory_need_their_feature) {
    static const char src[] = "kernel r(x: f32[], n: i32[], w: f32[], out: f32[]) {\n"
                              "    for i in 0..len(x) {\n"
                              "        var v = x[i];\n"
                              "        for t in 0..n[i] { v = sin(v) * w[t]; }\n"
                              "        out[i] = v;\n"
                              "    }\n"
                              "}\n";
    size_t nf = 0, n = 0;
    uint32_t *fwd = spirv_with_grads(src, false, &nf), *both = spirv_with_grads(src, true, &n);
    /* OpTypeFloat %1 32; OpTypePointer %2 Workgroup %1; OpVariable %2 %3 Workgroup;
     * OpAtomicFAddEXT %1 %4 %3 %5 %6 %7 */
    static const uint32_t wg_add[] = {0x07230203u,
                                      0x00010500u,
                                      0,
                                      8,
                                      0,
                                      (3u << 16) | 22,
                                      1,
                                      32,
                                      (4u << 16) | 32,
                                      2,
                                      4,
                                      1,
                                      (4u << 16) | 59,
                                      2,
                                      3,
                                      4,
                                      (7u << 16) | 6035,
                                      1,
                                      4,
                                      3,
                                      5,
                                      6,
                                      7};
    rt_device *d = device_or_skip();
    rt_vulkan_device_forget(d, 6033);
    expect_load(d, fwd, nf * 4, NULL);
    expect_load(d, both, n * 4, "the module needs float atomic add (shaderBufferFloat32AtomicAdd)");
    expect_load(d, wg_add, sizeof wg_add,
                "the module needs float atomic add on workgroup memory "
                "(shaderSharedFloat32AtomicAdd), which ");
    device_done(d);
    free(fwd);
    free(both);
}

Test(vulkan, malformed_code_is_a_format_error) {
    rt_device *d = device_or_skip();
    char err[512];
    size_t len;
    uint32_t *good = shader_or_skip(KERN_TEST_VK_GRID, &len);
    size_t nw = len / 4;
    uint32_t *w = malloc(len + 8);
    cr_assert(w);
    struct {
        const char *what;
        size_t bytes;
        void (*edit)(uint32_t *w, size_t nw);
    } cases[] = {
        {"empty", 0, NULL},
        {"3 bytes", 3, NULL},
        {"16 bytes (a header cut short)", 16, NULL},
        {"length not a multiple of 4", 0, NULL},
        {"bad magic", 0, NULL},
        {"big-endian magic", 0, NULL},
        {"an instruction of 0 words", 0, NULL},
        {"the last instruction overruns", 0, NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        memcpy(w, good, len);
        size_t bytes = len;
        switch (c) {
        case 0: bytes = 0; break;
        case 1: bytes = 3; break;
        case 2: bytes = 16; break;
        case 3: bytes = len - 2; break;
        case 4: w[0] = 0x07230204u; break;
        case 5: w[0] = 0x03022307u; break;
        case 6: w[5] = 0; break; /* the first instruction's word count */
        default: {
            size_t i = 5, last = 5;
            while (i < nw && (w[i] >> 16))
                last = i, i += w[i] >> 16;
            w[last] = (w[last] & 0xffffu) | (uint32_t)(nw - last + 1) << 16;
        }
        }
        kern_code_image img = {.kind = KERN_CODE_SPIRV, .bytes = w, .len = bytes};
        void *code = (void *)1;
        kern_status s = d->ops->load_code(d, &img, &code, err, sizeof err);
        cr_expect_eq(s, KERN_ERR_FORMAT, "%s: %s (%s)", cases[c].what, kern_status_name(s), err);
        cr_expect(strstr(err, "malformed SPIR-V"), "%s: %s", cases[c].what, err);
        cr_expect(!code, "%s", cases[c].what);
        if (s == KERN_OK && code)
            d->ops->unload_code(d, code);
    }
    /* a kernel the module has no entry point for */
    const char *meta = "kern-meta 1\nkernel nope 1 1 0 1\ntask serial 0 1 1\nend\n";
    kern_meta *m = kern_meta_parse(meta, strlen(meta), err, sizeof err);
    cr_assert(m, "%s", err);
    kern_code_image img = {.kind = KERN_CODE_SPIRV, .bytes = good, .len = len};
    void *code = NULL, *handle = (void *)1;
    cr_assert_eq(d->ops->load_code(d, &img, &code, err, sizeof err), KERN_OK, "%s", err);
    kern_status s = d->ops->get_kernel(d, code, &m->kernels[0], &handle, err, sizeof err);
    cr_expect_eq(s, KERN_ERR_FORMAT, "%s", kern_status_name(s));
    cr_expect_str_eq(err, "kernel 'nope', task 0: missing symbol 'kern_nope__t0'");
    cr_expect(!handle);
    d->ops->unload_code(d, code);
    kern_meta_free(m);
    free(w);
    free(good);
    device_done(d);
}

/* The messenger sees what the layer reports: a module whose Int64 capability was
 * removed (its i64 types now invalid) passes the runtime's scan but not the layer's
 * SPIR-V validation. The layer is switched to counting (not fatal) for this test. */
Test(vulkan, validation_layer_messages_are_counted) {
    setenv("KERN_VULKAN_VALIDATION", "1", 1);
    rt_device *d = device_or_skip();
    char err[512];
    size_t len;
    uint32_t *w = shader_or_skip(KERN_TEST_VK_GRID, &len);
    size_t nw = len / 4, removed = 0;
    for (size_t i = 5; i < nw && (w[i] >> 16);) {
        size_t n = w[i] >> 16;
        if ((w[i] & 0xffffu) == 17 && n == 2 && w[i + 1] == 11) { /* OpCapability Int64 */
            w[i] = w[i + 1] = 1u << 16;                           /* two OpNops */
            removed++;
        }
        i += n;
    }
    cr_assert_eq(removed, 1);
    cr_expect_eq(rt_vulkan_validation_messages(d, NULL), 0);
    kern_code_image img = {.kind = KERN_CODE_SPIRV, .bytes = w, .len = len};
    void *code = NULL;
    kern_status s = d->ops->load_code(d, &img, &code, err, sizeof err);
    const char *first = NULL;
    int n = rt_vulkan_validation_messages(d, &first);
    cr_expect(n >= 1, "the validation layer reported nothing for an invalid module (%s)",
              kern_status_name(s));
    cr_expect(first && *first, "the first message is recorded");
    if (s == KERN_OK)
        d->ops->unload_code(d, code);
    free(w);
    d->ops->destroy(d);
}
