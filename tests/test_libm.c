/* test_libm.c - the math builtins against glibc (suite `libm`): every function of the
 * accuracy table (docs/reference.md, "Accuracy of the math builtins") in f32 and f64, on
 * the CPU with glibc (the default) and with kern's own library (kc_options.own_math,
 * $KERN_OWN_MATH: passes/lower_libm.c, what SPIR-V and AMDGPU get), on Vulkan (lavapipe in
 * CI: kern's own f32 and f64) and on CUDA where there is a GPU (libdevice), and fast math on
 * the GPUs. The references are glibc's long double functions for f64 and its double
 * functions for f32, computed here, independently of the code under test. Each test prints
 * its worst errors on stderr, one line per target and type (the measured column of the
 * table). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backends/codegen.h"
#include "../compiler/driver.h"
#include "../include/kern.h"
#include "../ir/ir.h"
#include "../passes/passes.h"
#include "test_backend.h"

enum { N = 8192, F = 16 };

static const char *const names[F] = {"exp",   "exp2", "log",  "log2",       "sin",  "cos",
                                     "tan",   "atan", "sinh", "cosh",       "tanh", "pow",
                                     "atan2", "asin", "acos", "pow(x, 30y)"};

/* The kernel for type T (f32 or f64): out[f, i] is function f of x[i] (and y[i]). */
static char *source(const char *t) {
    static const char *body =
        "kernel m(x: T[], y: T[], z: T[], out: T[,]) {\n"
        "    for i in 0..len(x) {\n"
        "        let a = x[i];\n"
        "        out[0, i] = exp(a); out[1, i] = exp2(a); out[2, i] = log(a);\n"
        "        out[3, i] = log2(a); out[4, i] = sin(a); out[5, i] = cos(a);\n"
        "        out[6, i] = tan(a); out[7, i] = atan(a); out[8, i] = sinh(a);\n"
        "        out[9, i] = cosh(a); out[10, i] = tanh(a); out[11, i] = pow(a, y[i]);\n"
        "        out[12, i] = atan2(y[i], a); out[13, i] = asin(y[i]); out[14, i] = acos(y[i]);\n"
        "        out[15, i] = pow(abs(a), z[i]);\n"
        "    }\n"
        "}\n";
    size_t n = strlen(body);
    char *s = malloc(2 * n);
    cr_assert(s);
    size_t o = 0;
    for (const char *p = body; *p; p++) {
        if (*p == 'T') {
            memcpy(s + o, t, 3);
            o += 3;
        } else {
            s[o++] = *p;
        }
    }
    s[o] = 0;
    return s;
}

/* The arguments: many magnitudes, both signs, special values; f32 ones rounded to f32. */
static void inputs(bool f32, double *x, double *y, double *z) {
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(s >> 11) / 9007199254740992.0; /* [0, 1) */
        x[i] = (u - 0.5) * pow(10.0, (double)(i % 9) - 3.0);
        if (i % 16 == 7) /* large arguments, up to where trig's reduction is exact */
            x[i] = (u - 0.5) * (f32 ? 5e7 : 3e6);
        y[i] = (double)((i * 7919) % 2001 - 1000) / 1000.0;
        z[i] = y[i] * 30.0;
    }
    x[0] = 0.0, x[1] = -0.0, x[2] = INFINITY, x[3] = -INFINITY, x[4] = NAN,
    x[5] = f32 ? 88.0 : 700.0;
    x[6] = f32 ? -100.0 : -740.0, x[7] = f32 ? 1e-40 : 1e-310, x[8] = 1.0, x[9] = 2.0;
    x[10] = -3.0, x[11] = 1e5, x[12] = 0.5, x[13] = -0.5, x[14] = 9.5, x[15] = -20.0;
    y[10] = 3.0, y[9] = 0.5, y[8] = -2.0, y[11] = 1.0, y[12] = -1.0, y[13] = 0.0;
    for (int i = 0; f32 && i < N; i++)
        x[i] = (float)x[i], y[i] = (float)y[i], z[i] = (float)z[i];
}

static long double want_of(int f, long double a, long double b, long double c) {
    switch (f) {
    case 0: return expl(a);
    case 1: return exp2l(a);
    case 2: return logl(a);
    case 3: return log2l(a);
    case 4: return sinl(a);
    case 5: return cosl(a);
    case 6: return tanl(a);
    case 7: return atanl(a);
    case 8: return sinhl(a);
    case 9: return coshl(a);
    case 10: return tanhl(a);
    case 11: return powl(a, b);
    case 12: return atan2l(b, a);
    case 13: return asinl(b);
    case 14: return acosl(b);
    default: return powl(fabsl(a), c);
    }
}

/* The error of got in ulps of the type at want; near a zero of the function (|want| < 1)
 * ulps of the result mean little, and there the error counts in units of the spacing at 1
 * where that is smaller. NaN = NaN; infinities and the signs of zeros must match. */
static double err_of(double got, long double want, bool f32) {
    long double rounded = f32 ? (long double)(float)want : (long double)(double)want;
    if (isinf((double)rounded) || rounded == 0) /* compared as what the type holds */
        want = rounded;
    if (isnan(got) && isnan((double)want))
        return 0;
    if (got == 0 && want == 0 && signbit(got) != signbit((double)want))
        return INFINITY; /* sin(-0) is -0 */
    if ((long double)got == want)
        return 0;
    if (isnan(got) || isnan((double)want) || isinf(got) || isinf((double)want))
        return INFINITY;
    double w = (double)want;
    double ulp = f32 ? (double)(nextafterf((float)fabs(w), INFINITY) - (float)fabs(w))
                     : nextafter(fabs(w), INFINITY) - fabs(w);
    if (ulp == 0 || !isfinite(ulp))
        ulp = f32 ? 1.4e-45 : 4.9e-324;
    double e = (double)(fabsl((long double)got - want) / ulp);
    double at1 = f32 ? 1.1920928955078125e-07 : 2.220446049250313e-16;
    if (fabs(w) < 1.0 && (double)(fabsl((long double)got - want) / at1) < e)
        e = (double)(fabsl((long double)got - want) / at1);
    return e;
}

typedef struct result {
    double worst[F];
    int at[F];
    double x[N], y[N], z[N], out[F * N];
} result;

/* Runs the kernel on ctx in type f32 or f64 and measures every function. flush: the
 * device may flush f32 subnormals to zero (a Vulkan device without
 * shaderDenormPreserveFloat32, as the H200's driver: docs/reference.md), so a subnormal
 * argument may also give the function's value at zero. */
static void measure(kern_context *ctx, bool f32, bool flush, result *r) {
    char *src = source(f32 ? "f32" : "f64");
    kern_module *mod;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "m.kern", &mod), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    free(src);
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(mod, "m", &k), KERN_OK);
    inputs(f32, r->x, r->y, r->z);
    kern_dtype dt = f32 ? KERN_F32 : KERN_F64;
    static float fx[N], fy[N], fz[N], fo[F * N];
    const void *px = r->x, *py = r->y, *pz = r->z;
    if (f32) {
        for (int i = 0; i < N; i++)
            fx[i] = (float)r->x[i], fy[i] = (float)r->y[i], fz[i] = (float)r->z[i];
        px = fx, py = fy, pz = fz;
    }
    kern_buffer *bx, *by, *bz, *bo;
    int64_t n[1] = {N}, shp[2] = {F, N};
    cr_assert_eq(kern_buffer_create(ctx, dt, 1, n, px, &bx), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, dt, 1, n, py, &by), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, dt, 1, n, pz, &bz), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, dt, 2, shp, NULL, &bo), KERN_OK);
    kern_arg args[4] = {kern_arg_buffer(bx), kern_arg_buffer(by), kern_arg_buffer(bz),
                        kern_arg_buffer(bo)};
    cr_assert_eq(kern_launch(k, args, 4), KERN_OK, "%s", kern_context_last_error(ctx));
    if (f32) {
        cr_assert_eq(kern_buffer_read(bo, fo, sizeof fo), KERN_OK, "%s",
                     kern_context_last_error(ctx));
        for (int i = 0; i < F * N; i++)
            r->out[i] = fo[i];
    } else {
        cr_assert_eq(kern_buffer_read(bo, r->out, sizeof r->out), KERN_OK, "%s",
                     kern_context_last_error(ctx));
    }
    kern_buffer_release(bx);
    kern_buffer_release(by);
    kern_buffer_release(bz);
    kern_buffer_release(bo);
    kern_module_release(mod);
    for (int f = 0; f < F; f++) {
        r->worst[f] = 0, r->at[f] = -1;
        for (int i = 0; i < N; i++) {
            long double want = want_of(f, r->x[i], r->y[i], r->z[i]);
            double e = err_of(r->out[f * N + i], want, f32);
            if (flush && f32 && r->x[i] != 0 && fabs(r->x[i]) < 1.1754943508222875e-38) {
                double e0 = err_of(r->out[f * N + i], want_of(f, 0.0, r->y[i], r->z[i]), f32);
                e = e0 < e ? e0 : e;
            }
            if (e > r->worst[f])
                r->worst[f] = e, r->at[f] = i;
        }
    }
}

/* Prints the worst errors and checks them against bound (NULL: prints only). */
static void report(const char *label, bool f32, const result *r, const double *bound) {
    fprintf(stderr, "libm: %s %s:", label, f32 ? "f32" : "f64");
    for (int f = 0; f < F; f++)
        fprintf(stderr, " %s %.2g%s", names[f], r->worst[f], f + 1 < F ? "," : "\n");
    for (int f = 0; bound && f < F; f++) {
        int i = r->at[f];
        cr_expect(r->worst[f] <= bound[f],
                  "%s %s %s: %.3g ulp (bound %g) at x = %.17g (y = %.17g, z = %.17g): got %.17g",
                  label, f32 ? "f32" : "f64", names[f], r->worst[f], bound[f],
                  i >= 0 ? r->x[i] : 0.0, i >= 0 ? r->y[i] : 0.0, i >= 0 ? r->z[i] : 0.0,
                  i >= 0 ? r->out[f * N + i] : 0.0);
    }
}

/* The table's bounds (docs/reference.md): every target meets them by default (sin, cos
 * and tan up to 2.5e7 in f32, 1.5e6 in f64). */
static const double bound32[F] = {3, 2, 2, 2, 2, 2, 4, 2, 3, 3, 2, 4, 3, 2, 2, 4};
static const double bound64[F] = {3, 2, 2, 2, 2, 2, 4, 2, 3, 3, 2, 2, 2, 2, 2, 2};

static kern_context *context(kern_backend b, bool fast) {
    kern_context_options o = kern_context_options_default();
    o.backend = b;
    o.fast_math = fast;
    kern_context *ctx = NULL;
    kern_status s =
        b == KERN_BACKEND_VULKAN ? kern_test_vulkan_context(&ctx) : kern_context_create(&o, &ctx);
    if (s != KERN_OK) {
        fprintf(stderr, "libm: no %s device here (%s): the test is skipped\n", kern_backend_name(b),
                kern_context_last_error(ctx));
        kern_context_release(ctx);
        return NULL;
    }
    return ctx;
}

/* own: NULL (the target's library) or $KERN_OWN_MATH's value ("1": Vulkan's variant,
 * "fused": AMDGPU's) */
static void run_case(kern_backend b, const char *label, bool f32, const char *own) {
    bool flush = b == KERN_BACKEND_VULKAN;
    kern_context *ctx = context(b, false);
    if (!ctx)
        cr_skip_test("no %s device", kern_backend_name(b));
    if (own)
        setenv("KERN_OWN_MATH", own, 1); /* read when the module is compiled */
    static result r;
    measure(ctx, f32, flush, &r);
    unsetenv("KERN_OWN_MATH");
    report(label, f32, &r, f32 ? bound32 : bound64);
    kern_context_release(ctx);
}

Test(libm, cpu_glibc_f32) { run_case(KERN_BACKEND_CPU, "cpu", true, NULL); }
Test(libm, cpu_glibc_f64) { run_case(KERN_BACKEND_CPU, "cpu", false, NULL); }
Test(libm, cpu_own_f32) { run_case(KERN_BACKEND_CPU, "cpu own", true, "1"); }
Test(libm, cpu_own_f64) { run_case(KERN_BACKEND_CPU, "cpu own", false, "1"); }
/* AMDGPU's variant of kern's library (a fused fma), measured on the CPU: Debian has no AMD
 * GPU to run it on */
Test(libm, cpu_own_fused_f32) {
    run_case(KERN_BACKEND_CPU, "cpu own fused (AMDGPU's)", true, "fused");
}
Test(libm, cpu_own_fused_f64) {
    run_case(KERN_BACKEND_CPU, "cpu own fused (AMDGPU's)", false, "fused");
}
Test(libm, vulkan_f32) { run_case(KERN_BACKEND_VULKAN, "vulkan", true, NULL); }
Test(libm, vulkan_f64) { run_case(KERN_BACKEND_VULKAN, "vulkan", false, NULL); }
Test(libm, cuda_f32) { run_case(KERN_BACKEND_CUDA, "cuda", true, NULL); }
Test(libm, cuda_f64) { run_case(KERN_BACKEND_CUDA, "cuda", false, NULL); }
Test(libm, cuda_fast_f32) { /* CUDA's documented bounds are in the table: measured, printed */
    kern_context *ctx = context(KERN_BACKEND_CUDA, true);
    if (!ctx)
        cr_skip_test("no cuda device");
    static result r;
    measure(ctx, true, false, &r);
    report("cuda fast", true, &r, NULL);
    kern_context_release(ctx);
}

/* Fast math on Vulkan: the driver's GLSL.std.450 functions. Their bounds are Vulkan's
 * (loose); printed, and checked only against gross errors. */
Test(libm, vulkan_fast_f32) {
    kern_context *ctx = kern_test_vulkan_or_null();
    if (!ctx)
        cr_skip_test("no Vulkan device");
    kern_context_release(ctx);
    setenv("KERN_FAST_MATH", "1", 1); /* the context's default reads it */
    ctx = context(KERN_BACKEND_VULKAN, true);
    unsetenv("KERN_FAST_MATH");
    cr_assert(ctx);
    static result r;
    measure(ctx, true, true, &r);
    report("vulkan fast", true, &r, NULL);
    for (int i = 0; i < N; i++) /* sin on [-pi, pi]: Vulkan's 2^-11 absolute */
        if (fabs(r.x[i]) <= 3.14159)
            cr_expect(fabs(r.out[4 * N + i] - sin(r.x[i])) <= 0x1p-11, "sin(%.9g) = %.9g", r.x[i],
                      r.out[4 * N + i]);
    kern_context_release(ctx);
}

/* ---- the code: what each target gets --------------------------------------------------- */

static ir_module *compile(kc_ctx **cc, const char *t) {
    *cc = kc_ctx_new();
    char *src = source(t);
    ir_module *m = kc_compile_source(*cc, "m.kern", src, strlen(src));
    free(src);
    cr_assert(m);
    return m;
}

/* Vulkan: no GLSL.std.450 transcendental function by default (kern's own, as plain
 * arithmetic decorated NoContraction), the driver's with fast math (no decoration). */
Test(libm, spirv_uses_its_own_math_unless_fast) {
    kc_ctx *cc;
    ir_module *m = compile(&cc, "f32");
    const kc_codegen *vk = kc_codegen_find("vulkan");
    char err[1024] = "";
    char *own = vk->emit(m, &cc->opts, "spirv-asm", err, sizeof err);
    cr_assert(own, "%s", err);
    cc->opts.fast_math = true;
    char *fast = vk->emit(m, &cc->opts, "spirv-asm", err, sizeof err);
    cr_assert(fast, "%s", err);
    static const char *const glsl[] = {"Sin ", "Cos ", "Tan ", "Exp ", "Log ", "Pow ", "Atan2 "};
    for (size_t i = 0; i < sizeof glsl / sizeof *glsl; i++) {
        cr_expect(!strstr(own, glsl[i]), "GLSL.std.450 %s without fast math", glsl[i]);
        cr_expect(strstr(fast, glsl[i]), "no GLSL.std.450 %s with fast math", glsl[i]);
    }
    cr_expect(strstr(own, "NoContraction"));
    cr_expect(!strstr(fast, "NoContraction"));
    free(own);
    free(fast);
    ir_module_free(m);
    kc_ctx_free(cc);
}

/* The pass leaves no library function and a module that verifies; ir_libm_copy leaves m
 * itself alone. */
Test(libm, lowering_leaves_plain_ir) {
    for (int t = 0; t < 2; t++) {
        kc_ctx *cc;
        ir_module *m = compile(&cc, t ? "f64" : "f32");
        unsigned all = IR_LIBM_F32 | IR_LIBM_F64;
        cr_assert(ir_libm_needed(m, all));
        cr_assert(!ir_libm_needed(m, t ? IR_LIBM_F32 : IR_LIBM_F64), "only the other type");
        ir_module *c = ir_libm_copy(m, all | IR_LIBM_NO_FMA);
        cr_assert(c);
        cr_expect(!ir_libm_needed(c, all));
        cr_expect(ir_libm_needed(m, all), "the original keeps its ops");
        arena a;
        arena_init(&a);
        diag_sink sink;
        diag_init(&sink, &a);
        cr_expect(ir_verify(c, &sink), "the lowered module does not verify: %s",
                  sink.len ? sink.items[0].message : "");
        diag_free(&sink);
        arena_free(&a);
        ir_module_free(c);
        ir_module_free(m);
        kc_ctx_free(cc);
    }
}

/* The first `if` in r, depth first (the reduction's test of |x| < 6000), or NULL. */
static const ir_op *first_if(const ir_region *r) {
    ir_foreach_op(op, r) {
        if (op->code == IR_IF)
            return op;
        for (uint32_t i = 0; i < op->nregions; i++) {
            const ir_op *f = first_if(op->regions[i]);
            if (f)
                return f;
        }
    }
    return NULL;
}

/* f32 sin without a fused fma (Vulkan): below |x| = 6000 the reduction is q = floor(x 2/pi
 * + 1/2) and four fmas that take q times the parts of pi/2 off x (exact products: one
 * rounding, fused or not), no multiply and subtract pairs, which NVIDIA's driver keeps
 * apart (NoContraction). */
Test(libm, small_sin_reduction_is_fmas) {
    kc_ctx *cc = kc_ctx_new();
    static const char src[] =
        "kernel s(x: f32[], y: f32[]) { for i in 0..len(x) { y[i] = sin(x[i]); } }";
    ir_module *m = kc_compile_source(cc, "s.kern", src, strlen(src));
    cr_assert(m);
    ir_module *c = ir_libm_copy(m, IR_LIBM_F32 | IR_LIBM_NO_FMA);
    cr_assert(c);
    const ir_op *iff = first_if(c->kernels->body);
    cr_assert(iff, "no small-argument branch");
    int fma = 0, other = 0;
    ir_foreach_op(op, iff->regions[0]) {
        if (op->code == IR_FMA)
            fma++;
        else if (op->code == IR_MUL || op->code == IR_SUB || op->code == IR_ADD)
            other++;
    }
    cr_expect_eq(fma, 5, "fmas in the small-argument reduction: %d", fma);
    cr_expect_eq(other, 0, "multiplies, adds and subtracts there: %d", other);
    ir_module_free(c);
    ir_module_free(m);
    kc_ctx_free(cc);
}

/* CUDA: libdevice's accurate functions by default, __nv_fast_* (sin.approx, ex2.approx,
 * lg2.approx) with fast math. */
Test(libm, ptx_fast_math_uses_the_approximations) {
    kc_ctx *cc;
    ir_module *m = compile(&cc, "f32");
    const kc_codegen *cuda = kc_codegen_find("cuda");
    char err[2048] = "";
    char *acc = cuda->emit(m, &cc->opts, "ptx", err, sizeof err);
    if (!acc && strstr(err, "libdevice not found"))
        cr_skip_test("no libdevice on this machine");
    cr_assert(acc, "%s", err);
    cc->opts.fast_math = true;
    char *fast = cuda->emit(m, &cc->opts, "ptx", err, sizeof err);
    cr_assert(fast, "%s", err);
    cr_expect(!strstr(acc, "sin.approx.f32") && !strstr(acc, "lg2.approx.f32 "),
              "approximations without fast math");
    cr_expect(strstr(fast, "sin.approx") && strstr(fast, "cos.approx") &&
                  strstr(fast, "lg2.approx"),
              "no approximations with fast math");
    free(acc);
    free(fast);
    ir_module_free(m);
    kc_ctx_free(cc);
}

/* AMDGPU: every builtin in both types builds (no ROCm device libraries needed). */
Test(libm, amdgpu_builds_every_builtin) {
    const kc_codegen *amd = kc_codegen_find("amdgpu");
    if (!amd)
        cr_skip_test("this build has no AMDGPU code generator");
    for (int t = 0; t < 2; t++) {
        kc_ctx *cc;
        ir_module *m = compile(&cc, t ? "f64" : "f32");
        char err[2048] = "";
        char *asm_ = amd->emit(m, &cc->opts, "amdgcn", err, sizeof err);
        cr_expect(asm_, "%s: %s", t ? "f64" : "f32", err);
        cr_expect(!asm_ || !strstr(asm_, "call"), "a call in the AMDGPU code");
        free(asm_);
        ir_module_free(m);
        kc_ctx_free(cc);
    }
}
