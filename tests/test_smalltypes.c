/* test_smalltypes.c - version 1's scalar types i8 u8 i16 u16 u64 f16 bf16 (language.md
 * 11.4) on the interpreter, the CPU JIT and kernc run with .npy files, against references
 * computed here in plain C: C casts for the integers, and for f16/bf16 the nearest
 * representable value found by scanning all 65536 bit patterns (ties to the even pattern;
 * infinity counts as the next power of two past the largest finite value, which is how
 * IEEE rounding overflows). */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/kern.h"
#include "../runtime/npy.h"
#include "interp_util.h"
#include "test_backend.h"

/* ---- references ----------------------------------------------------------------------- */

static double f16_val(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

static double bf16_val(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The nearest pattern to d by brute force; big = the value standing for infinity. */
static uint16_t nearest(double d, double (*val)(uint16_t), double big) {
    if (isnan(d))
        return 0xffff;              /* any NaN; compared as "is NaN" */
    if (isinf(d) || fabs(d) >= big) /* beyond the halfway point to "big": infinity */
        for (int h = 0; h < 65536; h++)
            if (isinf(val((uint16_t)h)) && signbit(val((uint16_t)h)) == signbit(d))
                return (uint16_t)h;
    int best = -1;
    double bd = INFINITY;
    for (int h = 0; h < 65536; h++) {
        double v = val((uint16_t)h);
        if (isnan(v) || (v == 0 && (h & 0x8000) != (signbit(d) ? 0x8000 : 0)))
            continue;
        if (isinf(v))
            v = copysign(big, v);
        double dist = fabs(v - d);
        if (dist < bd || (dist == bd && (h & 1) == 0 && (best & 1) == 1)) {
            bd = dist;
            best = h;
        }
    }
    return (uint16_t)best;
}

static const double probes[] = {
    0.0,
    -0.0,
    1.0,
    -1.5,
    0.1,
    1.0 / 3,
    65504.0,
    65519.99,
    65520.0,
    1e6,
    -1e6,
    ldexp(1, -24),
    ldexp(1, -25),
    ldexp(3, -26),
    ldexp(1, -14),
    ldexp(1023, -24),
    1.0 + ldexp(1, -11),
    1.0 + ldexp(3, -11),
    1.0 + ldexp(1, -8),
    1.0 + ldexp(3, -8),
    1.0 + ldexp(1, -8) + ldexp(1, -30),
    3.0e38,
    3.3961e38,
    3.4e38,
    -3.4028e38,
    1e-40,
    ldexp(1, -133),
    ldexp(1, -134),
    ldexp(3, -135),
    123.456,
    -7.77e-3,
    2049.0,
    4097.0,
    INFINITY,
    -INFINITY,
    NAN,
};
enum { NP = sizeof probes / sizeof probes[0] };

/* ---- the kernels ------------------------------------------------------------------------ */

static const char conv_src[] =
    "kernel conv(a: i32[], f: f32[], d: f64[], u8o: u8[], i8o: i8[], u16o: u16[], i16o: i16[],\n"
    "            h: f16[], hd: f16[], b: bf16[], bd: bf16[], back: f32[]) {\n"
    "    for i in 0..len(a) {\n"
    "        u8o[i] = u8(a[i]);\n"
    "        i8o[i] = i8(a[i]);\n"
    "        u16o[i] = u16(a[i]);\n"
    "        i16o[i] = i16(a[i]);\n"
    "        h[i] = f[i];\n" /* a store rounds */
    "        hd[i] = f16(d[i]);\n"
    "        b[i] = bf16(f[i]);\n"
    "        bd[i] = bf16(d[i]);\n"
    "        back[i] = h[i] + b[i];\n" /* loads widen exactly */
    "    }\n"
    "}\n"
    "kernel promote(x: i16[], y: u8[], out: i32[], s: u8) {\n"
    "    for i in 0..len(x) {\n"
    "        let p: u8 = u8(300);\n"
    "        var c: u8 = y[i];\n"
    "        c += s;\n"
    "        out[i] = x[i] * x[i] + i32(p) + i32(c);\n"
    "    }\n"
    "}\n"
    "kernel big(a: u64[], b: u64[], q: u64[], r: u64[], sh: u64[], lt: i32[], f: f64[]) {\n"
    "    for i in 0..len(a) {\n"
    "        q[i] = a[i] / b[i];\n"
    "        r[i] = a[i] % b[i];\n"
    "        sh[i] = a[i] >> u64(3);\n"
    "        lt[i] = select(a[i] < b[i], 1, 0);\n"
    "        f[i] = f64(a[i]);\n"
    "    }\n"
    "}\n";

static const int32_t ints[] = {0,
                               1,
                               -1,
                               127,
                               128,
                               200,
                               255,
                               256,
                               300,
                               -56,
                               -129,
                               32767,
                               32768,
                               65535,
                               65536,
                               70000,
                               -40000,
                               2147483647,
                               -2147483647 - 1};
enum { NI = sizeof ints / sizeof ints[0] };

static kern_context *cpu_ctx(void) {
    kern_context_options o = kern_context_options_default();
    o.backend = KERN_BACKEND_CPU;
    kern_context *ctx;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK);
    return ctx;
}

/* A Vulkan context (lavapipe here), validation on where installed; skips without one. */
static kern_context *vulkan_ctx(void) {
    kern_context *ctx = NULL;
    if (kern_test_vulkan_context(&ctx) != KERN_OK) {
        fprintf(stderr, "smalltypes: no Vulkan device (%s): skipped\n",
                kern_context_last_error(ctx));
        kern_context_release(ctx);
        cr_skip_test("no Vulkan device");
    }
    return ctx;
}

static kern_buffer *buf(kern_context *ctx, kern_dtype t, int64_t n, const void *data) {
    kern_buffer *b;
    cr_assert_eq(kern_buffer_create(ctx, t, 1, &n, data, &b), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    return b;
}

static void check_half(const char *what, int i, uint16_t got, uint16_t want) {
    if (want == 0xffff) { /* NaN */
        cr_expect((got & 0x7fff) > 0x7c00 || (got & 0x7fff) > 0x7f80, "%s[%d]: %#x not NaN", what,
                  i, got);
        return;
    }
    cr_expect_eq(got, want, "%s[%d] (probe %.17g): got %#06x, want %#06x", what, i, probes[i], got,
                 want);
}

/* The conversions of conv on one target's outputs. */
static void check_conv(const char *target, const uint8_t *u8o, const int8_t *i8o,
                       const uint16_t *u16o, const int16_t *i16o, const uint16_t *h,
                       const uint16_t *hd, const uint16_t *b, const uint16_t *bd, int n) {
    for (int i = 0; i < n; i++) {
        int32_t a = ints[i % NI];
        cr_expect_eq(u8o[i], (uint8_t)a, "%s u8(%d)", target, a);
        cr_expect_eq(i8o[i], (int8_t)a, "%s i8(%d)", target, a);
        cr_expect_eq(u16o[i], (uint16_t)a, "%s u16(%d)", target, a);
        cr_expect_eq(i16o[i], (int16_t)a, "%s i16(%d)", target, a);
        double pf = (double)(float)probes[i], pd = probes[i];
        /* a Vulkan driver may flush f32 subnormals (NVIDIA's does, without float controls):
         * the conversions of those probes are the driver's there */
        if (!strcmp(target, "vulkan") && pd != 0 && fabs(pd) < FLT_MIN)
            continue;
        check_half("f16(f32)", i, h[i], nearest(pf, f16_val, 65536.0));
        check_half("f16(f64)", i, hd[i], nearest(pd, f16_val, 65536.0));
        check_half("bf16(f32)", i, b[i], nearest(pf, bf16_val, ldexp(1, 128)));
        check_half("bf16(f64)", i, bd[i], nearest(pd, bf16_val, ldexp(1, 128)));
    }
}

Test(smalltypes, conversions_interp) {
    compiled c = compile_src("conv.kern", conv_src);
    ir_interp_arg in[12], ref[12];
    kern_tykind kinds[12] = {TY_I32, TY_F32, TY_F64, TY_U8,   TY_I8,   TY_U16,
                             TY_I16, TY_F16, TY_F16, TY_BF16, TY_BF16, TY_F32};
    for (int k = 0; k < 12; k++)
        in[k] = arr(kinds[k], 1, NP, 0, 0);
    for (int i = 0; i < NP; i++) {
        I32(in[0])[i] = ints[i % NI];
        F32(in[1])[i] = (float)probes[i];
        F64(in[2])[i] = probes[i];
    }
    clone_args(ref, in, 12);
    /* the reference: written here, element by element */
    for (int i = 0; i < NP; i++) {
        int32_t a = ints[i % NI];
        ((uint8_t *)ref[3].data)[i] = (uint8_t)a;
        ((int8_t *)ref[4].data)[i] = (int8_t)a;
        ((uint16_t *)ref[5].data)[i] = (uint16_t)a;
        ((int16_t *)ref[6].data)[i] = (int16_t)a;
        uint16_t h = nearest((double)(float)probes[i], f16_val, 65536.0);
        uint16_t hd = nearest(probes[i], f16_val, 65536.0);
        uint16_t b = nearest((double)(float)probes[i], bf16_val, ldexp(1, 128));
        uint16_t bd = nearest(probes[i], bf16_val, ldexp(1, 128));
        ((uint16_t *)ref[7].data)[i] = h == 0xffff ? 0x7e00 : h;
        ((uint16_t *)ref[8].data)[i] = hd == 0xffff ? 0x7e00 : hd;
        ((uint16_t *)ref[9].data)[i] = b == 0xffff ? 0x7fc0 : b;
        ((uint16_t *)ref[10].data)[i] = bd == 0xffff ? 0x7fc0 : bd;
        F32(ref[11])
        [i] =
            (float)(f16_val(((uint16_t *)ref[7].data)[i]) + bf16_val(((uint16_t *)ref[9].data)[i]));
    }
    check_runs(&c, "conv", in, ref, 12, 0.0, "conv");
    free_args(in, 12);
    free_args(ref, 12);
    compiled_free(&c);
}

/* conv on the device of ctx (released here), checked against the C references. */
static void conversions_on(kern_context *ctx, const char *target) {
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, conv_src, strlen(conv_src), "conv.kern", &m), KERN_OK,
                 "%s", kern_context_last_error(ctx));
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, "conv", &k), KERN_OK);
    int32_t a[NP];
    float f[NP];
    double d[NP];
    for (int i = 0; i < NP; i++)
        a[i] = ints[i % NI], f[i] = (float)probes[i], d[i] = probes[i];
    kern_dtype outs[9] = {KERN_U8,  KERN_I8,   KERN_U16,  KERN_I16, KERN_F16,
                          KERN_F16, KERN_BF16, KERN_BF16, KERN_F32};
    kern_buffer *b[12];
    b[0] = buf(ctx, KERN_I32, NP, a);
    b[1] = buf(ctx, KERN_F32, NP, f);
    b[2] = buf(ctx, KERN_F64, NP, d);
    for (int i = 0; i < 9; i++)
        b[3 + i] = buf(ctx, outs[i], NP, NULL);
    kern_arg args[12];
    for (int i = 0; i < 12; i++)
        args[i] = kern_arg_buffer(b[i]);
    cr_assert_eq(kern_launch(k, args, 12), KERN_OK, "%s", kern_context_last_error(ctx));
    uint8_t u8o[NP];
    int8_t i8o[NP];
    uint16_t u16o[NP], h[NP], hd[NP], bf[NP], bfd[NP];
    int16_t i16o[NP];
    float back[NP];
    cr_assert_eq(kern_buffer_read(b[3], u8o, sizeof u8o), KERN_OK);
    cr_assert_eq(kern_buffer_read(b[4], i8o, sizeof i8o), KERN_OK);
    cr_assert_eq(kern_buffer_read(b[5], u16o, sizeof u16o), KERN_OK);
    cr_assert_eq(kern_buffer_read(b[6], i16o, sizeof i16o), KERN_OK);
    cr_assert_eq(kern_buffer_read(b[7], h, sizeof h), KERN_OK);
    cr_assert_eq(kern_buffer_read(b[8], hd, sizeof hd), KERN_OK);
    cr_assert_eq(kern_buffer_read(b[9], bf, sizeof bf), KERN_OK);
    cr_assert_eq(kern_buffer_read(b[10], bfd, sizeof bfd), KERN_OK);
    cr_assert_eq(kern_buffer_read(b[11], back, sizeof back), KERN_OK);
    check_conv(target, u8o, i8o, u16o, i16o, h, hd, bf, bfd, NP);
    for (int i = 0; i < NP; i++) {
        double want = f16_val(h[i]) + bf16_val(bf[i]);
        /* a Vulkan driver may flush f32 subnormals to zero (NVIDIA's does: no DenormPreserve
         * without VK_KHR_shader_float_controls) */
        bool ftz = !strcmp(target, "vulkan") && fabs(want) < FLT_MIN && back[i] == 0.0f;
        cr_expect((isnan(want) && isnan(back[i])) || back[i] == (float)want || ftz,
                  "%s back[%d]: got %g, want %g", target, i, (double)back[i], want);
    }
    for (int i = 0; i < 12; i++)
        kern_buffer_release(b[i]);
    kern_module_release(m);
    kern_context_release(ctx);
}

Test(smalltypes, conversions_cpu_jit) { conversions_on(cpu_ctx(), "cpu"); }
Test(smalltypes, conversions_vulkan) { conversions_on(vulkan_ctx(), "vulkan"); }

/* promote and big on the device of ctx (released here). */
static void promotion_and_u64_on(kern_context *ctx, const char *target) {
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, conv_src, strlen(conv_src), "conv.kern", &m), KERN_OK,
                 "%s", kern_context_last_error(ctx));
    kern_kernel *kp, *kb;
    cr_assert_eq(kern_kernel_find(m, "promote", &kp), KERN_OK);
    cr_assert_eq(kern_kernel_find(m, "big", &kb), KERN_OK);
    int16_t x[4] = {300, -300, 32767, -32768};
    uint8_t y[4] = {0, 5, 100, 255};
    kern_buffer *bx = buf(ctx, KERN_I16, 4, x), *by = buf(ctx, KERN_U8, 4, y),
                *bo = buf(ctx, KERN_I32, 4, NULL);
    kern_arg pa[4] = {kern_arg_buffer(bx), kern_arg_buffer(by), kern_arg_buffer(bo),
                      kern_arg_u8(250)};
    cr_assert_eq(kern_launch(kp, pa, 4), KERN_OK, "%s", kern_context_last_error(ctx));
    int32_t out[4];
    cr_assert_eq(kern_buffer_read(bo, out, sizeof out), KERN_OK);
    for (int i = 0; i < 4; i++) { /* i16 * i16 in i32: no 16-bit wrap; c wraps at 256 */
        int32_t want = (int32_t)x[i] * x[i] + (uint8_t)300 + (uint8_t)(y[i] + 250);
        cr_expect_eq(out[i], want, "%s promote[%d]: %d, want %d", target, i, out[i], want);
    }
    uint64_t a[4] = {UINT64_MAX, (1ull << 63) + 12345, 7, 1ull << 63};
    uint64_t bv[4] = {3, (1ull << 63) + 1, (1ull << 63) + 9, 10};
    kern_buffer *ba = buf(ctx, KERN_U64, 4, a), *bb = buf(ctx, KERN_U64, 4, bv),
                *bq = buf(ctx, KERN_U64, 4, NULL), *br = buf(ctx, KERN_U64, 4, NULL),
                *bs = buf(ctx, KERN_U64, 4, NULL), *bl = buf(ctx, KERN_I32, 4, NULL),
                *bf = buf(ctx, KERN_F64, 4, NULL);
    kern_arg ba_[7] = {kern_arg_buffer(ba), kern_arg_buffer(bb), kern_arg_buffer(bq),
                       kern_arg_buffer(br), kern_arg_buffer(bs), kern_arg_buffer(bl),
                       kern_arg_buffer(bf)};
    cr_assert_eq(kern_launch(kb, ba_, 7), KERN_OK, "%s", kern_context_last_error(ctx));
    uint64_t q[4], r[4], s[4];
    int32_t lt[4];
    double fd[4];
    kern_buffer_read(bq, q, sizeof q);
    kern_buffer_read(br, r, sizeof r);
    kern_buffer_read(bs, s, sizeof s);
    kern_buffer_read(bl, lt, sizeof lt);
    kern_buffer_read(bf, fd, sizeof fd);
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(q[i], a[i] / bv[i], "%s q[%d]", target, i);
        cr_expect_eq(r[i], a[i] % bv[i], "%s r[%d]", target, i);
        cr_expect_eq(s[i], a[i] >> 3, "%s s[%d]", target, i);
        cr_expect_eq(lt[i], a[i] < bv[i], "%s lt[%d]", target, i);
        cr_expect_eq(fd[i], (double)a[i], "%s f[%d]", target, i);
    }
    kern_buffer *all[] = {bx, by, bo, ba, bb, bq, br, bs, bl, bf};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        kern_buffer_release(all[i]);
    kern_module_release(m);
    kern_context_release(ctx);
}

Test(smalltypes, promotion_and_u64_cpu_jit) { promotion_and_u64_on(cpu_ctx(), "cpu"); }
Test(smalltypes, promotion_and_u64_vulkan) { promotion_and_u64_on(vulkan_ctx(), "vulkan"); }

/* Scalar parameters of every new integer type, u64 atomics (unsigned max, add), u64 loop
 * bounds and saturating float -> u64 casts, against the same computed in C. */
static const char scalars_src[] =
    "kernel sc(a: u64[], b: i8[], c: u16[], f: f32[], o: u64[], m: u64[], s: u64, t: i8,\n"
    "          w: i16, x: u8, y: u16) {\n"
    "    for i in 0..len(a) {\n"
    "        a[i] = a[i] + s;\n"
    "        b[i] = i8(i32(t) * 3 + i32(x));\n"
    "        c[i] = u16(i32(w) + i32(y));\n"
    "        o[i] = u64(f[i]);\n"
    "        atomic_max(m[0], a[i]);\n"
    "        m[1] += a[i] >> u64(60);\n"
    "    }\n"
    "    for j in u64(0)..u64(3) {\n"
    "        m[2] += j;\n"
    "    }\n"
    "}\n";

static void scalars_on(kern_context *ctx, const char *target) {
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, scalars_src, strlen(scalars_src), "sc.kern", &m),
                 KERN_OK, "%s", kern_context_last_error(ctx));
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, "sc", &k), KERN_OK);
    enum { N = 6 };
    uint64_t a[N] = {0, 1, UINT64_MAX - 5, 1ull << 63, 12345, (1ull << 62) + 7};
    float f[N] = {-1.0f, 0.5f, 3e19f, 1.8e19f, NAN, 4294967296.0f};
    uint64_t s = (1ull << 63) + 3, mz[3] = {0, 0, 0};
    int8_t t = -100;
    int16_t w = -30000;
    uint8_t x = 250;
    uint16_t y = 65535;
    kern_buffer *ba = buf(ctx, KERN_U64, N, a), *bb = buf(ctx, KERN_I8, N, NULL),
                *bc = buf(ctx, KERN_U16, N, NULL), *bf = buf(ctx, KERN_F32, N, f),
                *bo = buf(ctx, KERN_U64, N, NULL), *bm = buf(ctx, KERN_U64, 3, mz);
    kern_arg args[11] = {kern_arg_buffer(ba), kern_arg_buffer(bb), kern_arg_buffer(bc),
                         kern_arg_buffer(bf), kern_arg_buffer(bo), kern_arg_buffer(bm),
                         kern_arg_u64(s),     kern_arg_i8(t),      kern_arg_i16(w),
                         kern_arg_u8(x),      kern_arg_u16(y)};
    cr_assert_eq(kern_launch(k, args, 11), KERN_OK, "%s", kern_context_last_error(ctx));
    uint64_t ga[N], go[N], gm[3];
    int8_t gb[N];
    uint16_t gc[N];
    kern_buffer_read(ba, ga, sizeof ga);
    kern_buffer_read(bb, gb, sizeof gb);
    kern_buffer_read(bc, gc, sizeof gc);
    kern_buffer_read(bo, go, sizeof go);
    kern_buffer_read(bm, gm, sizeof gm);
    uint64_t mx = 0, sum = 0;
    for (int i = 0; i < N; i++) {
        uint64_t ai = a[i] + s;
        cr_expect_eq(ga[i], ai, "%s a[%d]", target, i);
        cr_expect_eq(gb[i], (int8_t)(t * 3 + x), "%s b[%d]", target, i);
        cr_expect_eq(gc[i], (uint16_t)(w + y), "%s c[%d]", target, i);
        /* saturating, NaN 0, as llvm.fptoui.sat */
        uint64_t want = isnan(f[i]) || f[i] <= 0          ? 0
                        : f[i] >= 18446744073709551616.0f ? UINT64_MAX
                                                          : (uint64_t)f[i];
        cr_expect_eq(go[i], want, "%s u64(%g): %llu, want %llu", target, f[i],
                     (unsigned long long)go[i], (unsigned long long)want);
        mx = ai > mx ? ai : mx;
        sum += ai >> 60;
    }
    cr_expect_eq(gm[0], mx, "%s unsigned atomic_max", target);
    cr_expect_eq(gm[1], sum, "%s atomic add", target);
    cr_expect_eq(gm[2], 0 + 1 + 2, "%s parallel loop over u64 bounds", target);
    kern_buffer *all[] = {ba, bb, bc, bf, bo, bm};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        kern_buffer_release(all[i]);
    kern_module_release(m);
    kern_context_release(ctx);
}

Test(smalltypes, scalars_and_u64_atomics_cpu_jit) { scalars_on(cpu_ctx(), "cpu"); }
Test(smalltypes, scalars_and_u64_atomics_vulkan) { scalars_on(vulkan_ctx(), "vulkan"); }

static void expect_compile_error(const char *src, const char *needle) {
    kern_context *ctx = cpu_ctx();
    kern_module *m = NULL;
    kern_status st = kern_module_from_source(ctx, src, strlen(src), "e.kern", &m);
    cr_assert_eq(st, KERN_ERR_COMPILE);
    cr_expect(strstr(kern_context_last_error(ctx), needle), "message: %s",
              kern_context_last_error(ctx));
    kern_context_release(ctx);
}

Test(smalltypes, errors) {
    expect_compile_error("kernel k(x: u8[]) { for i in 0..len(x) { x[i] += 1; } }",
                         "array 'x' of u8 elements");
    expect_compile_error(
        "kernel k(x: f16[], y: f32[]) { for i in 0..len(y) { y[i] = atomic_add(x[i], 1.0); } }",
        "array 'x' of f16 elements");
    expect_compile_error("kernel k(x: f16, y: f32[]) { for i in 0..len(y) { y[i] = 1.0; } }",
                         "storage types");
    expect_compile_error(
        "kernel k(x: f32[]) { for i in 0..len(x) { let a: u8 = 300; x[i] = f32(a); } }",
        "does not fit in u8");
}

/* kernc run ... --save: every new dtype through .npy files, and a wrong dtype named */
Test(smalltypes, npy_round_trip_cli) {
    char dir[] = "/tmp/kern-smalltypes-XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[512], cmd[4096];
    snprintf(path, sizeof path, "%s/t.kern", dir);
    FILE *f = fopen(path, "w");
    fputs("kernel t(a: i8[], b: u8[], c: i16[], d: u16[], e: u64[], h: f16[], g: bf16[]) {\n"
          "    for i in 0..len(a) {\n"
          "        a[i] = a[i] * 2; b[i] = b[i] * 2; c[i] = c[i] * 2; d[i] = d[i] * 2;\n"
          "        e[i] = e[i] * u64(2); h[i] = h[i] * 2.0; g[i] = g[i] * 2.0;\n"
          "    }\n"
          "}\n",
          f);
    fclose(f);
    /* inputs written with kern's own writer */
    int8_t a[3] = {100, -100, 3};
    uint8_t b[3] = {200, 1, 128};
    int16_t c[3] = {20000, -3, 7};
    uint16_t d[3] = {40000, 9, 65535};
    uint64_t e[3] = {(1ull << 63) + 1, 5, 1};
    uint16_t h[3] = {0x3c00 /* 1 */, 0x7bff /* 65504 */, 0x0001};
    uint16_t g[3] = {0x3fc0 /* 1.5 */, 0x7f7f, 0x0001};
    const void *data[7] = {a, b, c, d, e, h, g};
    kern_dtype dt[7] = {KERN_I8, KERN_U8, KERN_I16, KERN_U16, KERN_U64, KERN_F16, KERN_BF16};
    const char *names = "abcdehg";
    int64_t shape = 3;
    char err[256];
    int n = snprintf(cmd, sizeof cmd, "%s run %s t", KERNC_PATH, path);
    for (int i = 0; i < 7; i++) {
        snprintf(path, sizeof path, "%s/%c.npy", dir, names[i]);
        cr_assert_eq(kern_npy_write(path, dt[i], 1, &shape, data[i], err, sizeof err), KERN_OK,
                     "%s", err);
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " %c=%s --save %c=%s/%c.out.npy", names[i],
                      path, names[i], dir, names[i]);
    }
    snprintf(cmd + n, sizeof cmd - (size_t)n, " > /dev/null");
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    const char *descr[7] = {"|i1", "|u1", "<i2", "<u2", "<u8", "<f2", "<u2"};
    for (int i = 0; i < 7; i++) {
        snprintf(path, sizeof path, "%s/%c.out.npy", dir, names[i]);
        kern_npy out;
        cr_assert_eq(kern_npy_read(path, &out, err, sizeof err), KERN_OK, "%s", err);
        cr_expect_eq(out.dtype, i == 6 ? KERN_U16 : dt[i], "%c: dtype %d", names[i], out.dtype);
        cr_expect_str_eq(kern_npy_descr(out.dtype), descr[i]);
        for (int j = 0; j < 3; j++) {
            switch (i) {
            case 0: cr_expect_eq(((int8_t *)out.data)[j], (int8_t)(a[j] * 2)); break;
            case 1: cr_expect_eq(((uint8_t *)out.data)[j], (uint8_t)(b[j] * 2)); break;
            case 2: cr_expect_eq(((int16_t *)out.data)[j], (int16_t)(c[j] * 2)); break;
            case 3: cr_expect_eq(((uint16_t *)out.data)[j], (uint16_t)(d[j] * 2)); break;
            case 4: cr_expect_eq(((uint64_t *)out.data)[j], e[j] * 2); break;
            case 5:
                cr_expect_eq(((uint16_t *)out.data)[j],
                             nearest(2 * f16_val(h[j]), f16_val, 65536.0), "h[%d]", j);
                break;
            case 6:
                cr_expect_eq(((uint16_t *)out.data)[j],
                             nearest(2 * bf16_val(g[j]), bf16_val, ldexp(1, 128)), "g[%d]", j);
                break;
            }
        }
        kern_npy_free(&out);
    }
    /* a file of the wrong dtype: the message names the expected one */
    snprintf(cmd, sizeof cmd,
             "%s run %s/t.kern t a=%s/b.npy b=%s/b.npy c=%s/c.npy d=%s/d.npy e=%s/e.npy h=%s/h.npy "
             "g=%s/g.npy 2>&1 | grep -q \"'|i1'\"",
             KERNC_PATH, dir, dir, dir, dir, dir, dir, dir, dir);
    cr_expect_eq(system(cmd), 0, "%s", cmd);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    (void)system(cmd);
}

/* ---- gradients of f16/bf16 parameters (language.md 11.4) ------------------------------ */

/* The CAS loop under contention: N threads each add 1.0 into one of M adjoint elements
 * (the adjoint of x[i % M]); every partial sum is an integer below the type's last exact
 * one (2048 in f16, 256 in bf16), so the exact count is the only correct result and a
 * lost update shows. */
static const char spread_src[] = "kernel spread(x: f16[], b: bf16[], out: f32[]) {\n"
                                 "    for i in 0..len(out) {\n"
                                 "        out[i] = f32(x[i % len(x)]) + f32(b[i % len(b)]);\n"
                                 "    }\n"
                                 "}\n";

static kern_module *compile(kern_context *ctx, const char *src, const char *name) {
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), name, &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    return m;
}

static void spread_on(kern_context *ctx, const char *target) {
    enum { N = 100000, MX = 64, MB = 512 };
    kern_module *m = compile(ctx, spread_src, "spread.kern");
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, "spread.grad", &k), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    static float ones[N];
    for (int i = 0; i < N; i++)
        ones[i] = 1.0f;
    kern_buffer *b[6] = {buf(ctx, KERN_F16, MX, NULL),  buf(ctx, KERN_BF16, MB, NULL),
                         buf(ctx, KERN_F32, N, NULL),   buf(ctx, KERN_F16, MX, NULL),
                         buf(ctx, KERN_BF16, MB, NULL), buf(ctx, KERN_F32, N, ones)};
    kern_arg args[6];
    for (int i = 0; i < 6; i++)
        args[i] = kern_arg_buffer(b[i]);
    cr_assert_eq(kern_launch(k, args, 6), KERN_OK, "%s", kern_context_last_error(ctx));
    uint16_t gx[MX], gb[MB];
    cr_assert_eq(kern_buffer_read(b[3], gx, sizeof gx), KERN_OK);
    cr_assert_eq(kern_buffer_read(b[4], gb, sizeof gb), KERN_OK);
    for (int j = 0; j < MX; j++)
        cr_expect_eq(f16_val(gx[j]), (double)((N - j + MX - 1) / MX), "%s: x.grad[%d] = %g", target,
                     j, f16_val(gx[j]));
    for (int j = 0; j < MB; j++)
        cr_expect_eq(bf16_val(gb[j]), (double)((N - j + MB - 1) / MB), "%s: b.grad[%d] = %g",
                     target, j, bf16_val(gb[j]));
    for (int i = 0; i < 6; i++)
        kern_buffer_release(b[i]);
    kern_module_release(m);
    kern_context_release(ctx);
}

Test(smalltypes, grad_cas_contention_cpu) { spread_on(cpu_ctx(), "cpu"); }
Test(smalltypes, grad_cas_contention_cpu_scalar) {
    setenv("KERN_SIMD", "off", 1); /* read when the module compiles */
    spread_on(cpu_ctx(), "cpu (scalar)");
    unsetenv("KERN_SIMD");
}
Test(smalltypes, grad_cas_contention_vulkan) { spread_on(vulkan_ctx(), "vulkan"); }

/* A gradient through f16/bf16 inputs read in a loop by every thread (so each adjoint
 * element takes NO atomic adds) and an f16 output overwritten (its adjoint replaced by 0),
 * against central differences in f64 of the same kernel over f64 arrays, computing in
 * f64 (the inputs are f16/bf16 values, so both kernels see the same numbers). */
static const char mix_src[] =
    "kernel mix(x: @H[], w: @B[], y: @F[], out: @F[], h: @H[]) {\n"
    "    for i in 0..len(out) {\n"
    "        var s = @F(0.0);\n"
    "        for j in 0..len(x) {\n"
    "            let xj = @F(x[j]);\n"
    "            s += sin(xj * @F(i + 1) * 0.25) * @F(w[j]) + y[i] * xj * xj;\n"
    "        }\n"
    "        out[i] = s;\n"
    "        h[i] = @H(0.5 * s);\n"
    "    }\n"
    "}\n";

/* mix_src with @H, @B and @F replaced (the compute type F: f32 with storage types, f64
 * for the reference). */
static char *mix_text(const char *H, const char *B, const char *F) {
    static char out[2][1024];
    char *o = out[F[1] == '6'];
    size_t n = 0;
    for (const char *p = mix_src; *p; p++) {
        const char *rep = p[0] != '@'   ? NULL
                          : p[1] == 'H' ? H
                          : p[1] == 'B' ? B
                          : p[1] == 'F' ? F
                                        : NULL;
        if (rep) {
            n += (size_t)snprintf(o + n, 1024 - n, "%s", rep);
            p++;
        } else {
            o[n++] = *p;
        }
    }
    o[n] = 0;
    return o;
}

enum { MN = 16, MJ = 12 };

/* L = sum(out * gout) + sum(h * gh) of the f64 kernel at x, w, y. */
static double mix_loss(kern_context *ctx, kern_kernel *k, kern_buffer **b, const double *x,
                       const double *w, const double *y, const double *gout, const double *gh) {
    cr_assert_eq(kern_buffer_write(b[0], x, MJ * sizeof *x), KERN_OK);
    cr_assert_eq(kern_buffer_write(b[1], w, MJ * sizeof *w), KERN_OK);
    cr_assert_eq(kern_buffer_write(b[2], y, MN * sizeof *y), KERN_OK);
    kern_arg args[5];
    for (int i = 0; i < 5; i++)
        args[i] = kern_arg_buffer(b[i]);
    cr_assert_eq(kern_launch(k, args, 5), KERN_OK, "%s", kern_context_last_error(ctx));
    double out[MN], h[MN], l = 0;
    cr_assert_eq(kern_buffer_read(b[3], out, sizeof out), KERN_OK);
    cr_assert_eq(kern_buffer_read(b[4], h, sizeof h), KERN_OK);
    for (int i = 0; i < MN; i++)
        l += out[i] * gout[i] + h[i] * gh[i];
    return l;
}

static void mix_on(kern_context *ctx, const char *target) {
    /* inputs exactly representable in f16 (x, and the seeds of h) and bf16 (w) */
    uint16_t xh[MJ], wh[MJ], ghh[MN];
    double x[MJ], w[MJ], y[MN], gout[MN], gh[MN];
    float yf[MN], goutf[MN];
    for (int j = 0; j < MJ; j++) {
        xh[j] = nearest(-1.5 + 0.27 * j, f16_val, 65536.0);
        wh[j] = nearest(0.8 - 0.13 * j, bf16_val, ldexp(1, 128));
        x[j] = f16_val(xh[j]);
        w[j] = bf16_val(wh[j]);
    }
    for (int i = 0; i < MN; i++) {
        yf[i] = (float)(0.1 * (i % 5) - 0.2);
        goutf[i] = (float)(1.0 - 0.05 * i);
        ghh[i] = nearest(0.3 + 0.1 * (i % 3), f16_val, 65536.0);
        y[i] = yf[i];
        gout[i] = goutf[i];
        gh[i] = f16_val(ghh[i]);
    }
    /* the reference: f64 central differences of the f64 kernel, on the CPU */
    kern_context *cpu = cpu_ctx();
    kern_module *m64 = compile(cpu, mix_text("f64", "f64", "f64"), "mix64.kern");
    kern_kernel *k64;
    cr_assert_eq(kern_kernel_find(m64, "mix", &k64), KERN_OK);
    kern_buffer *r[5] = {buf(cpu, KERN_F64, MJ, x), buf(cpu, KERN_F64, MJ, w),
                         buf(cpu, KERN_F64, MN, y), buf(cpu, KERN_F64, MN, NULL),
                         buf(cpu, KERN_F64, MN, NULL)};
    double wx[MJ], ww[MJ];
    for (int j = 0; j < MJ; j++) {
        double e = 1e-6, *v[2] = {x, w}, *want[2] = {wx, ww};
        for (int a = 0; a < 2; a++) {
            double keep = v[a][j];
            v[a][j] = keep + e;
            double lp = mix_loss(cpu, k64, r, x, w, y, gout, gh);
            v[a][j] = keep - e;
            double lm = mix_loss(cpu, k64, r, x, w, y, gout, gh);
            v[a][j] = keep;
            want[a][j] = (lp - lm) / (2 * e);
        }
    }
    for (int i = 0; i < 5; i++)
        kern_buffer_release(r[i]);
    kern_module_release(m64);
    kern_context_release(cpu);

    kern_module *m = compile(ctx, mix_text("f16", "bf16", "f32"), "mix16.kern");
    kern_kernel *k, *kg;
    cr_assert_eq(kern_kernel_find(m, "mix", &k), KERN_OK);
    cr_assert_eq(kern_kernel_find(m, "mix.grad", &kg), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_buffer *b[10] = {buf(ctx, KERN_F16, MJ, xh),    buf(ctx, KERN_BF16, MJ, wh),
                          buf(ctx, KERN_F32, MN, yf),    buf(ctx, KERN_F32, MN, NULL),
                          buf(ctx, KERN_F16, MN, NULL),  buf(ctx, KERN_F16, MJ, NULL),
                          buf(ctx, KERN_BF16, MJ, NULL), buf(ctx, KERN_F32, MN, NULL),
                          buf(ctx, KERN_F32, MN, goutf), buf(ctx, KERN_F16, MN, ghh)};
    kern_arg args[10];
    for (int i = 0; i < 10; i++)
        args[i] = kern_arg_buffer(b[i]);
    cr_assert_eq(kern_launch(k, args, 5), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_launch(kg, args, 10), KERN_OK, "%s", kern_context_last_error(ctx));
    uint16_t gx[MJ], gw[MJ], ghout[MN];
    cr_assert_eq(kern_buffer_read(b[5], gx, sizeof gx), KERN_OK);
    cr_assert_eq(kern_buffer_read(b[6], gw, sizeof gw), KERN_OK);
    cr_assert_eq(kern_buffer_read(b[9], ghout, sizeof ghout), KERN_OK);
    /* Each adjoint element is the sum of MN f32 terms, rounded to the storage type after
     * every atomic add: at most MN roundings of a partial sum, each within half an ulp
     * (2^-11 relative in f16, 2^-8 in bf16) of a value no larger than the sum of the
     * terms' magnitudes (bounded here by max |want| times 4: the terms of one element
     * have one sign up to small cross terms). The f32 arithmetic and the difference
     * quotient add far less (about 1e-6). */
    double mx = 0, mw = 0;
    for (int j = 0; j < MJ; j++) {
        mx = fmax(mx, fabs(wx[j]));
        mw = fmax(mw, fabs(ww[j]));
    }
    for (int j = 0; j < MJ; j++) {
        double tx = MN * ldexp(1, -11) * 4 * mx + 1e-4, tw = MN * ldexp(1, -8) * 4 * mw + 1e-4;
        cr_expect(fabs(f16_val(gx[j]) - wx[j]) <= tx, "%s: x.grad[%d] = %.6g, want %.6g (tol %.2g)",
                  target, j, f16_val(gx[j]), wx[j], tx);
        cr_expect(fabs(bf16_val(gw[j]) - ww[j]) <= tw,
                  "%s: w.grad[%d] = %.6g, want %.6g (tol %.2g)", target, j, bf16_val(gw[j]), ww[j],
                  tw);
    }
    for (int i = 0; i < MN; i++) /* h was overwritten: its adjoint is replaced by 0 */
        cr_expect_eq(ghout[i], 0, "%s: h.grad[%d] = %#x", target, i, ghout[i]);
    for (int i = 0; i < 10; i++)
        kern_buffer_release(b[i]);
    kern_module_release(m);
    kern_context_release(ctx);
}

Test(smalltypes, grad_f16_bf16_cpu) { mix_on(cpu_ctx(), "cpu"); }
Test(smalltypes, grad_f16_bf16_cpu_scalar) {
    setenv("KERN_SIMD", "off", 1);
    mix_on(cpu_ctx(), "cpu (scalar)");
    unsetenv("KERN_SIMD");
}
Test(smalltypes, grad_f16_bf16_vulkan) { mix_on(vulkan_ctx(), "vulkan"); }
