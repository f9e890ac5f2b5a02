/* test_interp.c - end-to-end semantic tests of the lowering and the optimizer with the
 * reference interpreter (suite `interp`).
 *
 *   - every tests/golden/ir/NAME.kern program and a set of inline programs that stress the
 *     lowering (break/continue/return flags, laziness, carried values, ranges, tasks,
 *     integer widths) is compiled at -O0 and at -O2, run by ir_interp_run on
 *     deterministic pseudo-random inputs with edge cases, and every array is compared
 *     with a plain C reference of the same computation written here (floats exactly:
 *     the references do the same f32/f64 operations in the same order);
 *   - the -O0 and -O2 results must be identical bit for bit (the passes claim exact
 *     identities only): a difference is reported as an optimizer bug;
 *   - the interpreter's op semantics on hand-written IR (u32, shifts, rounding, ties,
 *     casts, atomics, atomic_xchg, adstacks: LIFO order, per-work-item reset, poison
 *     through a stack), its parallel order, and its error paths (out of bounds, division
 *     by zero, shifts, casts, non-terminating while, bad arguments, a pop from an empty
 *     adstack) with their messages;
 *   - every gradient kernel of the corpus tests/grad at -O0 and -O2: adstack pushes and
 *     pops stay balanced and the two levels agree. */
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

/* ---- Deterministic inputs (splitmix64) --------------------------------------------- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Uniform integer in [lo, hi]. */
static int64_t rng_int(rng *r, int64_t lo, int64_t hi) {
    return lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

static double rng_unit(rng *r) { return (double)(rng_next(r) >> 11) / 9007199254740992.0; }

static float rng_f32(rng *r, float lo, float hi) { return (float)(lo + (hi - lo) * rng_unit(r)); }

/* ---- Arguments --------------------------------------------------------------------- */

static size_t kind_size(kern_tykind k) {
    switch (k) {
    case TY_BOOL: return 1;
    case TY_I32:
    case TY_U32:
    case TY_F32: return 4;
    default: return 8;
    }
}

static size_t arg_len(const ir_interp_arg *a) {
    if (a->rank == 0)
        return 0;
    size_t n = 1;
    for (int d = 0; d < a->rank; d++)
        n *= (size_t)a->shape[d];
    return n;
}

/* A zeroed array argument. */
static ir_interp_arg arr(kern_tykind k, int rank, int64_t d0, int64_t d1, int64_t d2) {
    ir_interp_arg a = ir_interp_array(k, NULL, rank, d0, rank > 1 ? d1 : 0, rank > 2 ? d2 : 0, 0);
    size_t n = arg_len(&a);
    a.data = calloc(n ? n : 1, kind_size(k));
    return a;
}

static ir_interp_arg clone_arg(const ir_interp_arg *a) {
    ir_interp_arg c = *a;
    if (a->rank) {
        size_t bytes = arg_len(a) * kind_size(a->kind);
        c.data = malloc(bytes ? bytes : 1);
        memcpy(c.data, a->data, bytes);
    }
    return c;
}

static void clone_args(ir_interp_arg *dst, const ir_interp_arg *src, int n) {
    for (int i = 0; i < n; i++)
        dst[i] = clone_arg(&src[i]);
}

static void free_args(ir_interp_arg *a, int n) {
    for (int i = 0; i < n; i++)
        if (a[i].rank)
            free(a[i].data);
}

#define F32(a) ((float *)(a).data)
#define F64(a) ((double *)(a).data)
#define I32(a) ((int32_t *)(a).data)
#define U32(a) ((uint32_t *)(a).data)
#define I64(a) ((int64_t *)(a).data)
#define BOOL(a) ((bool *)(a).data)

/* ---- Compiling and comparing ------------------------------------------------------- */

enum { MAXARGS = 12 };

typedef struct compiled {
    const char *name;
    ir_module *m[2]; /* -O0, -O2 */
} compiled;

static const int opt_levels[2] = {0, 2};

static ir_module *compile_at(const char *name, const char *src, int opt) {
    kc_ctx *ctx = kc_ctx_new();
    ctx->opts.opt_level = opt;
    ir_module *m = kc_compile_source(ctx, name, src, strlen(src));
    if (!m)
        diag_print_all(stderr, &ctx->diags);
    kc_ctx_free(ctx);
    cr_assert(m, "%s does not compile at -O%d", name, opt);
    return m;
}

static compiled compile_src(const char *name, const char *src) {
    compiled c = {name, {NULL, NULL}};
    for (int l = 0; l < 2; l++)
        c.m[l] = compile_at(name, src, opt_levels[l]);
    return c;
}

static compiled compile_golden(const char *name) {
    size_t len;
    char *src = golden_read("ir", name, &len);
    cr_assert(src, "cannot read tests/golden/ir/%s", name);
    compiled c = compile_src(name, src);
    free(src);
    return c;
}

static void compiled_free(compiled *c) {
    for (int l = 0; l < 2; l++)
        ir_module_free(c->m[l]);
}

/* Element i of array a as a double (for messages). */
static double elem_value(const ir_interp_arg *a, size_t i) {
    switch (a->kind) {
    case TY_BOOL: return ((const unsigned char *)a->data)[i];
    case TY_I32: return ((const int32_t *)a->data)[i];
    case TY_U32: return ((const uint32_t *)a->data)[i];
    case TY_I64: return (double)((const int64_t *)a->data)[i];
    case TY_F32: return ((const float *)a->data)[i];
    default: return ((const double *)a->data)[i];
    }
}

/* Equal bits, or (not bitwise) floats within tol; two NaNs are equal (their sign and
 * payload are not portable: see the KNOWN_BUG test of simplify below). */
static bool elem_equal(const ir_interp_arg *a, const ir_interp_arg *b, size_t i, double tol,
                       bool bitwise) {
    size_t sz = kind_size(a->kind);
    const char *x = (const char *)a->data + i * sz, *y = (const char *)b->data + i * sz;
    if (!memcmp(x, y, sz))
        return true;
    if (a->kind != TY_F32 && a->kind != TY_F64)
        return false;
    double u = elem_value(a, i), v = elem_value(b, i);
    if (isnan(u) && isnan(v))
        return true;
    if (bitwise)
        return false;
    if (u == v) /* +0.0 and -0.0 differ only bitwise */
        return false;
    return tol > 0 && fabs(u - v) <= tol * fmax(fabs(u), fabs(v));
}

/* Number of differing elements over all arrays; prints the first few. */
static int compare_args(const ir_interp_arg *got, const ir_interp_arg *exp, int n, double tol,
                        bool bitwise, const char *what) {
    int bad = 0;
    for (int p = 0; p < n; p++) {
        size_t len = arg_len(&got[p]);
        for (size_t i = 0; i < len; i++)
            if (!elem_equal(&got[p], &exp[p], i, tol, bitwise)) {
                if (bad < 6)
                    fprintf(stderr, "%s: argument %d element %zu: got %.17g, expected %.17g\n",
                            what, p, i, elem_value(&got[p], i), elem_value(&exp[p], i));
                bad++;
            }
    }
    return bad;
}

/* Runs c's kernel at -O0 and -O2, each on a copy of `in`; compares every array with `ref`
 * (the C reference's result on a copy of `in`), then the two runs bit for bit. */
static void check_runs(const compiled *c, const char *kernel, const ir_interp_arg *in,
                       const ir_interp_arg *ref, int n, double tol, const char *label) {
    ir_interp_arg got[2][MAXARGS];
    char what[256];
    for (int l = 0; l < 2; l++) {
        char err[512];
        clone_args(got[l], in, n);
        bool ok = ir_interp_run(c->m[l], kernel, got[l], n, err, sizeof err);
        cr_assert(ok, "%s (%s) -O%d: %s", c->name, label, opt_levels[l], err);
        snprintf(what, sizeof what, "%s (%s) -O%d vs the C reference", c->name, label,
                 opt_levels[l]);
        int bad = compare_args(got[l], ref, n, tol, false, what);
        cr_expect_eq(bad, 0, "%s: %d elements differ", what, bad);
    }
    snprintf(what, sizeof what, "OPTIMIZER BUG? %s (%s): -O0 vs -O2", c->name, label);
    int bad = compare_args(got[0], got[1], n, 1e-12, false, what);
    cr_expect_eq(bad, 0, "%s: %d elements differ bitwise", what, bad);
    for (int l = 0; l < 2; l++)
        free_args(got[l], n);
}

/* The error message of running c's kernel at optimization level index l. */
static void run_expect_error(const compiled *c, int l, const char *kernel, ir_interp_arg *in, int n,
                             ir_interp_options *opts, char *err, size_t errlen) {
    ir_interp_arg got[MAXARGS];
    clone_args(got, in, n);
    bool ok = ir_interp_run_opts(c->m[l], kernel, got, n, opts, err, errlen);
    free_args(got, n);
    cr_assert(!ok, "%s -O%d: the run succeeded but should fail", c->name, opt_levels[l]);
}

/* Wrapping and shifting helpers for the references (C's signed overflow is undefined). */
static int32_t add32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
static int32_t neg32(int32_t a) { return (int32_t)(0u - (uint32_t)a); }
static int32_t shl32(int32_t a, int s) { return (int32_t)((uint32_t)a << s); }
static int32_t sar32(int32_t a, int s) { return a < 0 ? ~(~a >> s) : a >> s; }
static int64_t add64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t sub64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static int64_t mul64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static int64_t sar64(int64_t a, int s) { return a < 0 ? ~(~a >> s) : a >> s; }

/* ======================================================================================
 * The golden programs of tests/golden/ir
 * ==================================================================================== */

Test(interp, golden_saxpy) {
    compiled c = compile_golden("saxpy.kern");
    rng r = {1};
    int64_t sizes[] = {0, 1, 37};
    for (int s = 0; s < 3; s++) {
        int64_t n = sizes[s];
        ir_interp_arg in[3] = {ir_interp_float(TY_F32, -1.75), arr(TY_F32, 1, n, 0, 0),
                               arr(TY_F32, 1, n, 0, 0)};
        for (int64_t i = 0; i < n; i++) {
            F32(in[1])[i] = rng_f32(&r, -10, 10);
            F32(in[2])[i] = rng_f32(&r, -10, 10);
        }
        ir_interp_arg ref[3];
        clone_args(ref, in, 3);
        for (int64_t i = 0; i < n; i++)
            F32(ref[2])[i] = -1.75f * F32(ref[1])[i] + F32(ref[2])[i];
        check_runs(&c, "saxpy", in, ref, 3, 0, "n varies");
        free_args(in, 3);
        free_args(ref, 3);
    }
    compiled_free(&c);
}

Test(interp, golden_atomics) {
    compiled c = compile_golden("atomics.kern");
    rng r = {2};
    int64_t n = 50, nb = 10;
    ir_interp_arg in[5] = {arr(TY_F32, 1, n, 0, 0), arr(TY_I32, 1, nb, 0, 0),
                           arr(TY_F32, 1, 1, 0, 0), arr(TY_F32, 1, 1, 0, 0),
                           arr(TY_F32, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++) {
        F32(in[0])[i] = i % 9 == 0 ? 0.0f : rng_f32(&r, -2, 2); /* clamps at both ends */
        F32(in[4])[i] = rng_f32(&r, -5, 5);
    }
    for (int64_t i = 0; i < nb; i++)
        I32(in[1])[i] = (int32_t)rng_int(&r, 0, 5);
    F32(in[2])[0] = 0.5f;
    F32(in[3])[0] = 0.75f;
    ir_interp_arg ref[5];
    clone_args(ref, in, 5);
    float *v = F32(ref[0]), *hi = F32(ref[2]), *lo = F32(ref[3]), *prod = F32(ref[4]);
    int32_t *bins = I32(ref[1]);
    for (int64_t i = 0; i < n; i++) {
        int32_t t = (int32_t)(v[i] * 10.0f);
        int32_t x = 0 > t ? 0 : t;
        int32_t b = (int32_t)(nb - 1) < x ? (int32_t)(nb - 1) : x;
        bins[b] += 1;
        float old = hi[0];
        hi[0] = v[i] > old ? v[i] : old;
        lo[0] = old < lo[0] ? old : lo[0];
        prod[i] = prod[i] * 2.0f;
        prod[i] = prod[i] / 3.0f;
    }
    check_runs(&c, "histogram", in, ref, 5, 0, "random");
    free_args(in, 5);
    free_args(ref, 5);
    compiled_free(&c);
}

Test(interp, golden_break_continue) {
    compiled c = compile_golden("break_continue.kern");
    rng r = {3};
    int64_t R = 12, C = 9;
    ir_interp_arg in[3] = {arr(TY_F32, 2, R, C, 0), arr(TY_I32, 1, R, 0, 0),
                           arr(TY_F32, 1, R, 0, 0)};
    for (int64_t i = 0; i < R * C; i++) {
        uint64_t k = rng_next(&r) % 10;
        F32(in[0])[i] = k < 3 ? 0.0f : k == 3 ? rng_f32(&r, -4, -0.5f) : rng_f32(&r, 0.5f, 4);
    }
    for (int64_t j = 0; j < C; j++) /* a row without negatives, a row of zeros */
        F32(in[0])[0 * C + j] = (float)(j + 1), F32(in[0])[1 * C + j] = 0.0f;
    F32(in[0])[2 * C + 0] = -1.0f; /* break at once */
    ir_interp_arg ref[3];
    clone_args(ref, in, 3);
    for (int64_t i = 0; i < R; i++) {
        int32_t found = -1;
        float sum = 0.0f;
        for (int64_t j = 0; j < C; j++) {
            float v = F32(ref[0])[i * C + j];
            if (v == 0.0f)
                continue;
            sum += v;
            if (v < 0.0f) {
                found = (int32_t)j;
                break;
            }
        }
        I32(ref[1])[i] = found;
        F32(ref[2])[i] = sum;
    }
    check_runs(&c, "first_negative", in, ref, 3, 0, "random");
    free_args(in, 3);
    free_args(ref, 3);
    compiled_free(&c);
}

static int32_t ref_find(const int32_t *a, int64_t n, int32_t key) {
    for (int64_t k = 0; k < n; k++)
        if (a[k] == key)
            return (int32_t)k;
    return -1;
}

Test(interp, golden_early_return) {
    compiled c = compile_golden("early_return.kern");
    rng r = {4};
    int64_t na_list[] = {15, 0};
    for (int s = 0; s < 2; s++) {
        int64_t na = na_list[s], nk = 20;
        ir_interp_arg in[4] = {arr(TY_I32, 1, na, 0, 0), arr(TY_I32, 1, nk, 0, 0),
                               arr(TY_I32, 1, nk, 0, 0), arr(TY_F32, 1, nk + 3, 0, 0)};
        for (int64_t i = 0; i < na; i++)
            I32(in[0])[i] = (int32_t)rng_int(&r, -5, 10); /* duplicates: the first wins */
        for (int64_t i = 0; i < nk; i++)
            I32(in[1])[i] = (int32_t)rng_int(&r, -8, 14);
        for (int64_t i = 0; i < nk + 3; i++)
            F32(in[3])[i] = i % 5 == 0 ? 1.0f : rng_f32(&r, -3, 3);
        F32(in[3])[2] = NAN;
        ir_interp_arg ref[4];
        clone_args(ref, in, 4);
        for (int64_t i = 0; i < nk; i++) {
            I32(ref[2])[i] = ref_find(I32(ref[0]), na, I32(ref[1])[i]);
            float x = F32(ref[3])[i];
            F32(ref[3])[i] = x > 1.0f ? 1.0f : x;
        }
        check_runs(&c, "lookup", in, ref, 4, 0, s ? "empty table" : "random");
        free_args(in, 4);
        free_args(ref, 4);
    }
    compiled_free(&c);
}

Test(interp, golden_if_else) {
    compiled c = compile_golden("if_else.kern");
    rng r = {5};
    int64_t n = 40;
    ir_interp_arg in[2] = {arr(TY_F32, 1, n, 0, 0), arr(TY_I32, 1, n, 0, 0)};
    float special[] = {0.0f, -0.0f, 10.0f, 10.5f, -10.5f, NAN, INFINITY, -INFINITY};
    for (int64_t i = 0; i < n; i++)
        F32(in[0])[i] = i < 8 ? special[i] : rng_f32(&r, -20, 20);
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int64_t i = 0; i < n; i++) {
        int32_t cl = 0;
        float s = F32(ref[0])[i];
        if (s < 0.0f) {
            cl = -1;
            s = -s;
        } else if (s == 0.0f) {
            cl = 0;
        } else {
            cl = 1;
            if (s > 10.0f)
                cl = 2;
        }
        I32(ref[1])[i] = cl;
    }
    check_runs(&c, "classify", in, ref, 2, 0, "random");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

static float sign_f32(float v) { return v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v; }

Test(interp, golden_math) {
    compiled c = compile_golden("math.kern");
    rng r = {6};
    int64_t n = 48;
    ir_interp_arg in[2] = {arr(TY_F32, 1, n, 0, 0), arr(TY_F32, 1, n, 0, 0)};
    float special[] = {0.0f, -0.0f, 0.5f, -0.5f, 1.0f, -1.0f, 2.5f, 1e-3f, 0.25f, -2.0f};
    for (int64_t i = 0; i < n; i++)
        F32(in[0])[i] = i < 10 ? special[i] : rng_f32(&r, -1.2f, 1.2f);
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int64_t i = 0; i < n; i++) {
        float v = F32(ref[0])[i];
        float s = sinf(v) + cosf(v) + tanf(v) + asinf(v) + acosf(v) + atanf(v);
        s += sinhf(v) + coshf(v) + tanhf(v) + expf(v) + exp2f(v) + logf(v) + log2f(v);
        s += sqrtf(v) + 1.0f / sqrtf(v) + fabsf(v) + floorf(v) + ceilf(v) + roundf(v) + sign_f32(v);
        float mn = 1.0f < v ? 1.0f : v, mx = 0.0f > v ? 0.0f : v;
        s += atan2f(v, 2.0f) + powf(v, 3.0f) + mn + mx + fmaf(v, 2.0f, 1.0f);
        float cl = -1.0f > v ? -1.0f : v;
        cl = 1.0f < cl ? 1.0f : cl;
        s += cl;
        F32(ref[1])[i] = s + 3.0f + -1.0f + 2.0f;
    }
    check_runs(&c, "math", in, ref, 2, 0, "random in [-1.2, 1.2]");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

Test(interp, golden_multirange_serial) {
    compiled c = compile_golden("multirange_serial.kern");
    rng r = {7};
    int64_t R = 5, C = 6;
    ir_interp_arg in[2] = {arr(TY_F32, 2, R, C, 0), arr(TY_F32, 1, 2, 0, 0)};
    for (int64_t i = 0; i < R * C; i++)
        F32(in[0])[i] = rng_f32(&r, -3, 3);
    F32(in[1])[1] = 42.0f;
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    float s = 0.0f;
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < i; j++)
            s += F32(ref[0])[i * C + j];
    F32(ref[1])[0] = s;
    check_runs(&c, "tri", in, ref, 2, 0, "5x6");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

Test(interp, golden_nested_loops_var) {
    compiled c = compile_golden("nested_loops_var.kern");
    rng r = {8};
    int64_t n = 9, m = 6;
    int32_t steps_list[] = {3, 0, -2, 1};
    for (int s = 0; s < 4; s++) {
        int32_t steps = steps_list[s];
        ir_interp_arg in[4] = {arr(TY_I32, 1, n, 0, 0), arr(TY_F32, 2, n, m, 0),
                               ir_interp_int(TY_I32, steps), arr(TY_F32, 1, n, 0, 0)};
        for (int64_t i = 0; i < n; i++)
            I32(in[0])[i] = (int32_t)rng_int(&r, -1, m); /* -1 and 0: no trips */
        for (int64_t i = 0; i < n * m; i++)
            F32(in[1])[i] = rng_f32(&r, -2, 2);
        ir_interp_arg ref[4];
        clone_args(ref, in, 4);
        for (int64_t i = 0; i < n; i++) {
            float a = 0.0f, b = 1.0f;
            for (int32_t t = 0; t < steps; t++) {
                for (int32_t j = 0; j < I32(ref[0])[i]; j++)
                    a = a + F32(ref[1])[i * m + j] * b;
                b = b * 0.5f;
            }
            F32(ref[3])[i] = a + b;
        }
        char label[32];
        snprintf(label, sizeof label, "steps=%d", steps);
        check_runs(&c, "ragged", in, ref, 4, 0, label);
        free_args(in, 4);
        free_args(ref, 4);
    }
    compiled_free(&c);
}

Test(interp, golden_parallel_continue) {
    compiled c = compile_golden("parallel_continue.kern");
    rng r = {9};
    int64_t n = 30;
    ir_interp_arg in[2] = {arr(TY_F32, 1, n, 0, 0), arr(TY_F32, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++) {
        F32(in[0])[i] = rng_f32(&r, -4, 4);
        F32(in[1])[i] = 100.0f + (float)i;
    }
    F32(in[0])[0] = -0.0f;
    F32(in[0])[1] = NAN;
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int64_t i = 0; i < n; i++) {
        if (F32(ref[0])[i] < 0.0f)
            continue;
        F32(ref[1])[i] = sqrtf(F32(ref[0])[i]);
    }
    check_runs(&c, "skip_neg", in, ref, 2, 0, "random");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

Test(interp, golden_serial_top) {
    compiled c = compile_golden("serial_top.kern");
    rng r = {10};
    int64_t sizes[] = {0, 17};
    for (int s = 0; s < 2; s++) {
        int64_t n = sizes[s];
        ir_interp_arg in[2] = {arr(TY_F32, 1, n, 0, 0), arr(TY_F32, 1, n, 0, 0)};
        for (int64_t i = 0; i < n; i++)
            F32(in[0])[i] = rng_f32(&r, -1, 1);
        ir_interp_arg ref[2];
        clone_args(ref, in, 2);
        float acc = 0.0f;
        for (int64_t k = 0; k < n; k++) {
            acc += F32(ref[0])[k];
            F32(ref[1])[k] = acc;
        }
        check_runs(&c, "prefix", in, ref, 2, 0, n ? "17" : "empty");
        free_args(in, 2);
        free_args(ref, 2);
    }
    compiled_free(&c);
}

Test(interp, golden_shadowing_blocks) {
    compiled c = compile_golden("shadowing_blocks.kern");
    rng r = {11};
    int64_t n = 21;
    ir_interp_arg in[1] = {arr(TY_F32, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++)
        F32(in[0])[i] = rng_f32(&r, -8, 8);
    ir_interp_arg ref[1];
    clone_args(ref, in, 1);
    for (int64_t i = 0; i < n; i++) {
        float v = F32(ref[0])[i];
        float v2 = v * 2.0f;
        float inner = v2 + 1.0f;
        inner += 1.0f;
        F32(ref[0])[i] = inner;
        v -= 1.0f;
        F32(ref[0])[i] = F32(ref[0])[i] + v;
    }
    check_runs(&c, "shadow", in, ref, 1, 0, "random");
    free_args(in, 1);
    free_args(ref, 1);
    compiled_free(&c);
}

Test(interp, golden_simulate) {
    compiled c = compile_golden("simulate.kern");
    rng r = {12};
    int64_t n = 13, nw = 25;
    int32_t steps_list[] = {25, 0, -1, 3};
    for (int s = 0; s < 4; s++) {
        int32_t steps = steps_list[s];
        ir_interp_arg in[4] = {arr(TY_F32, 1, n, 0, 0), arr(TY_F32, 1, nw, 0, 0),
                               arr(TY_F32, 1, n, 0, 0), ir_interp_int(TY_I32, steps)};
        for (int64_t i = 0; i < n; i++)
            F32(in[0])[i] = rng_f32(&r, -3, 3);
        for (int64_t i = 0; i < nw; i++)
            F32(in[1])[i] = rng_f32(&r, -1, 1);
        ir_interp_arg ref[4];
        clone_args(ref, in, 4);
        for (int64_t i = 0; i < n; i++) {
            float x = F32(ref[0])[i];
            int32_t T = steps < 4096 ? steps : 4096;
            for (int32_t t = 0; t < T; t++)
                x = sinf(x) * F32(ref[1])[t] + x;
            F32(ref[2])[i] = x;
        }
        char label[32];
        snprintf(label, sizeof label, "steps=%d", steps);
        check_runs(&c, "simulate", in, ref, 4, 0, label);
        free_args(in, 4);
        free_args(ref, 4);
    }
    compiled_free(&c);
}

Test(interp, golden_stencil2d) {
    compiled c = compile_golden("stencil2d.kern");
    rng r = {13};
    int64_t shapes[][2] = {{6, 7}, {2, 5}, {1, 1}, {3, 3}};
    for (int s = 0; s < 4; s++) {
        int64_t R = shapes[s][0], C = shapes[s][1];
        ir_interp_arg in[2] = {arr(TY_F32, 2, R, C, 0), arr(TY_F32, 2, R, C, 0)};
        for (int64_t i = 0; i < R * C; i++) {
            F32(in[0])[i] = rng_f32(&r, -5, 5);
            F32(in[1])[i] = -99.0f;
        }
        ir_interp_arg ref[2];
        clone_args(ref, in, 2);
        float *src = F32(ref[0]), *dst = F32(ref[1]);
        for (int64_t i = 1; i < R - 1; i++)
            for (int64_t j = 1; j < C - 1; j++)
                dst[i * C + j] = 0.25f * (src[(i - 1) * C + j] + src[(i + 1) * C + j] +
                                          src[i * C + j - 1] + src[i * C + j + 1]);
        char label[32];
        snprintf(label, sizeof label, "%dx%d", (int)R, (int)C);
        check_runs(&c, "blur", in, ref, 2, 0, label);
        free_args(in, 2);
        free_args(ref, 2);
    }
    compiled_free(&c);
}

Test(interp, golden_tasks) {
    compiled c = compile_golden("tasks.kern");
    rng r = {14};
    int64_t n = 19;
    ir_interp_arg in[3] = {arr(TY_F32, 1, n, 0, 0), arr(TY_F32, 1, 1, 0, 0),
                           ir_interp_float(TY_F32, 2.5)};
    for (int64_t i = 0; i < n; i++)
        F32(in[0])[i] = rng_f32(&r, 0.1f, 3);
    F32(in[1])[0] = 1234.0f; /* overwritten by the first serial task */
    ir_interp_arg ref[3];
    clone_args(ref, in, 3);
    float *x = F32(ref[0]), *total = F32(ref[1]);
    total[0] = 0.0f;
    for (int64_t i = 0; i < n; i++)
        total[0] += x[i];
    int32_t half = (int32_t)n / 2;
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] * 2.5f / total[0] + (float)half;
    check_runs(&c, "normalize", in, ref, 3, 0, "random");
    free_args(in, 3);
    free_args(ref, 3);
    compiled_free(&c);
}

Test(interp, golden_ternary_lazy) {
    compiled c = compile_golden("ternary_lazy.kern");
    rng r = {15};
    /* x has exactly n elements and out more: x[i] with i >= n would be out of bounds, so
     * the run only succeeds if && and ?: are lazy. n < 0: no load at all. */
    int32_t n_list[] = {7, 0, -3};
    for (int s = 0; s < 3; s++) {
        int32_t n = n_list[s];
        int64_t nx = n > 0 ? n : 0, nout = 11;
        ir_interp_arg in[3] = {arr(TY_F32, 1, nx, 0, 0), ir_interp_int(TY_I32, n),
                               arr(TY_F32, 1, nout, 0, 0)};
        for (int64_t i = 0; i < nx; i++)
            F32(in[0])[i] = rng_f32(&r, -2, 2);
        ir_interp_arg ref[3];
        clone_args(ref, in, 3);
        for (int32_t i = 0; i < nout; i++) {
            bool inb = i < n && F32(ref[0])[i] > 0.0f;
            float v = i < n ? F32(ref[0])[i] : 0.0f;
            float w = i < n ? 1.0f : 2.0f;
            F32(ref[2])[i] = inb ? v + w : w;
        }
        char label[32];
        snprintf(label, sizeof label, "n=%d", n);
        check_runs(&c, "guard", in, ref, 3, 0, label);
        free_args(in, 3);
        free_args(ref, 3);
    }
    compiled_free(&c);
}

Test(interp, golden_types_casts) {
    compiled c = compile_golden("types_casts.kern");
    rng r = {16};
    int64_t n = 40;
    ir_interp_arg in[6] = {arr(TY_I32, 1, n, 0, 0),  arr(TY_U32, 1, n, 0, 0),
                           arr(TY_I64, 1, n, 0, 0),  arr(TY_F64, 1, n, 0, 0),
                           arr(TY_BOOL, 1, n, 0, 0), arr(TY_F32, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++) {
        I32(in[0])[i] = (int32_t)(uint32_t)rng_next(&r);
        U32(in[1])[i] = (uint32_t)rng_next(&r);
        I64(in[2])[i] = (int64_t)rng_next(&r);
        F64(in[3])[i] = (rng_unit(&r) - 0.5) * 1e6;
        BOOL(in[4])[i] = rng_next(&r) & 1;
    }
    int32_t xs[] = {0, -1, 1, INT32_MIN, INT32_MAX, 7, -8};
    uint32_t ys[] = {0, UINT32_MAX, 1, 3, 5, 0x80000000u, 14};
    int64_t zs[] = {0, -1, INT64_MIN, INT64_MAX, 1, 3, -3};
    double ws[] = {1.0, 0.5, -0.0, INFINITY, NAN, 1e300, -2.0};
    for (int i = 0; i < 7; i++) {
        I32(in[0])[i] = xs[i], U32(in[1])[i] = ys[i], I64(in[2])[i] = zs[i];
        F64(in[3])[i] = ws[i];
    }
    ir_interp_arg ref[6];
    clone_args(ref, in, 6);
    for (int64_t i = 0; i < n; i++) {
        int32_t x = I32(ref[0])[i];
        uint32_t y = U32(ref[1])[i];
        int64_t z = I64(ref[2])[i];
        double w = F64(ref[3])[i];
        bool p = BOOL(ref[4])[i];
        int32_t q =
            (int32_t)((((uint32_t)shl32(x, 2) | (uint32_t)sar32(x, 1)) & ~(uint32_t)x) ^ 7u);
        uint32_t rr = y / 3u + y % 5u;
        F32(ref[5])[i] = (float)x + (float)w * 0.5f;
        F64(ref[3])[i] = w + (double)z + (double)y + (double)q + (double)rr;
        I64(ref[2])[i] = sub64(mul64((int64_t)x, z), (int64_t)y);
        BOOL(ref[4])[i] = !p || (x > 0 && w < 1.0);
        I32(ref[0])[i] = add32(p ? x : neg32(x), 1);
    }
    check_runs(&c, "mix", in, ref, 6, 0, "random and edge values");
    free_args(in, 6);
    free_args(ref, 6);
    compiled_free(&c);
}

Test(interp, golden_void_func) {
    compiled c = compile_golden("void_func.kern");
    rng r = {17};
    double by_list[] = {1.5, 0.0, -0.0, -2.25};
    for (int s = 0; s < 4; s++) {
        int64_t n = 12;
        ir_interp_arg in[2] = {arr(TY_F32, 1, n, 0, 0), ir_interp_float(TY_F32, by_list[s])};
        for (int64_t i = 0; i < n; i++)
            F32(in[0])[i] = rng_f32(&r, -3, 3);
        ir_interp_arg ref[2];
        clone_args(ref, in, 2);
        float by = (float)by_list[s];
        for (int64_t i = 0; i < n; i++) {
            if (by == 0.0f)
                continue;
            F32(ref[0])[i] = F32(ref[0])[i] + by;
        }
        char label[32];
        snprintf(label, sizeof label, "by=%g", by_list[s]);
        check_runs(&c, "bump_all", in, ref, 2, 0, label);
        free_args(in, 2);
        free_args(ref, 2);
    }
    compiled_free(&c);
}

Test(interp, golden_while_break) {
    compiled c = compile_golden("while_break.kern");
    rng r = {18};
    int64_t n = 40;
    ir_interp_arg in[2] = {arr(TY_I64, 1, n, 0, 0), arr(TY_I32, 1, n, 0, 0)};
    int64_t special[] = {1, 2, 27, 0, -1, -7, INT64_MAX, INT64_MIN, 97, 871};
    for (int64_t i = 0; i < n; i++)
        I64(in[0])[i] = i < 10 ? special[i] : rng_int(&r, 1, 1000000);
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = I64(ref[0])[i];
        int32_t k = 0;
        while (v != 1) {
            if (k >= 1000)
                break;
            if (v % 2 == 0)
                v = v / 2;
            else
                v = add64(mul64(3, v), 1);
            k += 1;
        }
        I32(ref[1])[i] = k;
    }
    check_runs(&c, "collatz", in, ref, 2, 0, "random and cycles");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

Test(interp, golden_while_converge) {
    compiled c = compile_golden("while_converge.kern");
    rng r = {19};
    int64_t n = 30;
    ir_interp_arg in[3] = {arr(TY_F64, 1, n, 0, 0), arr(TY_F64, 1, n, 0, 0),
                           ir_interp_float(TY_F64, 1e-12)};
    double special[] = {0.0, 1.0, 4.0, -4.0, 1e-6, 1e6, 2.0};
    for (int64_t i = 0; i < n; i++)
        F64(in[0])[i] = i < 7 ? special[i] : rng_unit(&r) * 100.0;
    ir_interp_arg ref[3];
    clone_args(ref, in, 3);
    for (int64_t i = 0; i < n; i++) {
        double a = F64(ref[0])[i], x = a;
        int32_t it = 0;
        while (fabs(x * x - a) > 1e-12 && it < 100) {
            x = 0.5 * (x + a / x);
            it += 1;
        }
        F64(ref[1])[i] = x;
    }
    check_runs(&c, "newton", in, ref, 3, 0, "random, zero, negative");
    free_args(in, 3);
    free_args(ref, 3);
    compiled_free(&c);
}

/* Every golden lowering program has a test above: a new one needs a reference too. */
Test(interp, every_golden_program_is_covered) {
    static const char *const covered[] = {
        "atomics.kern",
        "break_continue.kern",
        "early_return.kern",
        "if_else.kern",
        "math.kern",
        "multirange_serial.kern",
        "nested_loops_var.kern",
        "parallel_continue.kern",
        "saxpy.kern",
        "serial_top.kern",
        "shadowing_blocks.kern",
        "simulate.kern",
        "stencil2d.kern",
        "tasks.kern",
        "ternary_lazy.kern",
        "types_casts.kern",
        "void_func.kern",
        "while_break.kern",
        "while_converge.kern",
    };
    char **names;
    int n = golden_list("ir", ".kern", &names);
    cr_assert(n > 0);
    for (int i = 0; i < n; i++) {
        bool found = false;
        for (size_t j = 0; j < sizeof covered / sizeof covered[0]; j++)
            found |= !strcmp(names[i], covered[j]);
        cr_expect(found, "tests/golden/ir/%s has no interpreter test in test_interp.c", names[i]);
    }
    golden_free_list(names, n);
}

/* ======================================================================================
 * Inline programs that stress the lowering
 * ==================================================================================== */

/* A break out of a while nested in a for that has its own break. */
static const char nest_break_src[] = "kernel nest_break(x: i32[], out: i32[]) {\n"
                                     "    for i in 0..len(x) {\n"
                                     "        var total = 0;\n"
                                     "        for j in 0..10 {\n"
                                     "            var v = x[i] + j;\n"
                                     "            while v > 0 {\n"
                                     "                if v % 7 == 3 {\n"
                                     "                    break;\n"
                                     "                }\n"
                                     "                v -= 2;\n"
                                     "                total += 1;\n"
                                     "            }\n"
                                     "            total += v;\n"
                                     "            if total > 40 {\n"
                                     "                break;\n"
                                     "            }\n"
                                     "        }\n"
                                     "        out[i] = total;\n"
                                     "    }\n"
                                     "}\n";

Test(interp, nested_break_in_while_in_for) {
    compiled c = compile_src("nest_break", nest_break_src);
    rng r = {101};
    int64_t n = 60;
    ir_interp_arg in[2] = {arr(TY_I32, 1, n, 0, 0), arr(TY_I32, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++)
        I32(in[0])[i] = (int32_t)(i < 30 ? i - 12 : rng_int(&r, -20, 60));
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int64_t i = 0; i < n; i++) {
        int32_t total = 0;
        for (int32_t j = 0; j < 10; j++) {
            int32_t v = I32(ref[0])[i] + j;
            while (v > 0) {
                if (v % 7 == 3)
                    break;
                v -= 2;
                total += 1;
            }
            total += v;
            if (total > 40)
                break;
        }
        I32(ref[1])[i] = total;
    }
    check_runs(&c, "nest_break", in, ref, 2, 0, "x in [-20, 60]");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

/* continue and break in one serial loop. */
static const char cont_break_src[] =
    "kernel cont_break(a: i32[,], lim: i32, s: i32[], cnt: i32[]) {\n"
    "    for i in 0..shape(a, 0) {\n"
    "        var sum = 0;\n"
    "        var c = 0;\n"
    "        for j in 0..shape(a, 1) {\n"
    "            let v = a[i, j];\n"
    "            if v < 0 {\n"
    "                continue;\n"
    "            }\n"
    "            if v > lim {\n"
    "                break;\n"
    "            }\n"
    "            sum += v;\n"
    "            c += 1;\n"
    "        }\n"
    "        s[i] = sum;\n"
    "        cnt[i] = c;\n"
    "    }\n"
    "}\n";

Test(interp, continue_and_break_in_one_loop) {
    compiled c = compile_src("cont_break", cont_break_src);
    rng r = {102};
    int64_t R = 15, C = 8;
    int32_t lims[] = {50, -1, 1000};
    for (int s = 0; s < 3; s++) {
        ir_interp_arg in[4] = {arr(TY_I32, 2, R, C, 0), ir_interp_int(TY_I32, lims[s]),
                               arr(TY_I32, 1, R, 0, 0), arr(TY_I32, 1, R, 0, 0)};
        for (int64_t i = 0; i < R * C; i++)
            I32(in[0])[i] = (int32_t)rng_int(&r, -30, 70);
        ir_interp_arg ref[4];
        clone_args(ref, in, 4);
        for (int64_t i = 0; i < R; i++) {
            int32_t sum = 0, cn = 0;
            for (int64_t j = 0; j < C; j++) {
                int32_t v = I32(ref[0])[i * C + j];
                if (v < 0)
                    continue;
                if (v > lims[s])
                    break;
                sum += v;
                cn += 1;
            }
            I32(ref[2])[i] = sum;
            I32(ref[3])[i] = cn;
        }
        char label[32];
        snprintf(label, sizeof label, "lim=%d", lims[s]);
        check_runs(&c, "cont_break", in, ref, 4, 0, label);
        free_args(in, 4);
        free_args(ref, 4);
    }
    compiled_free(&c);
}

/* A return from inside a while inside a for of a func. */
static const char search_src[] = "func search(a: i32[], lim: i32) -> i32 {\n"
                                 "    for r in 1..4 {\n"
                                 "        var k = 0;\n"
                                 "        while k < len(a) {\n"
                                 "            if a[k] * r > lim {\n"
                                 "                return k + 100 * r;\n"
                                 "            }\n"
                                 "            k += 1;\n"
                                 "        }\n"
                                 "    }\n"
                                 "    return -1;\n"
                                 "}\n"
                                 "\n"
                                 "kernel find_over(a: i32[], lims: i32[], out: i32[]) {\n"
                                 "    for i in 0..len(lims) {\n"
                                 "        out[i] = search(a, lims[i]);\n"
                                 "    }\n"
                                 "}\n";

Test(interp, return_from_while_inside_for_in_func) {
    compiled c = compile_src("find_over", search_src);
    rng r = {103};
    int64_t na = 9, nl = 30;
    ir_interp_arg in[3] = {arr(TY_I32, 1, na, 0, 0), arr(TY_I32, 1, nl, 0, 0),
                           arr(TY_I32, 1, nl, 0, 0)};
    for (int64_t i = 0; i < na; i++)
        I32(in[0])[i] = (int32_t)rng_int(&r, 0, 20);
    for (int64_t i = 0; i < nl; i++)
        I32(in[1])[i] = (int32_t)rng_int(&r, -1, 70); /* > 60: never found */
    ir_interp_arg ref[3];
    clone_args(ref, in, 3);
    for (int64_t i = 0; i < nl; i++) {
        int32_t res = -1, lim = I32(ref[1])[i];
        for (int32_t rr = 1; rr < 4 && res == -1; rr++)
            for (int32_t k = 0; k < na; k++)
                if (I32(ref[0])[k] * rr > lim) {
                    res = k + 100 * rr;
                    break;
                }
        I32(ref[2])[i] = res;
    }
    check_runs(&c, "find_over", in, ref, 3, 0, "random limits");
    free_args(in, 3);
    free_args(ref, 3);
    compiled_free(&c);
}

/* A func called twice in one expression, once nested in itself. */
static const char twice_src[] = "func f(x: f32) -> f32 {\n"
                                "    if x > 1.0 {\n"
                                "        return x * 0.5;\n"
                                "    }\n"
                                "    var y = x;\n"
                                "    y += 2.0;\n"
                                "    return y;\n"
                                "}\n"
                                "\n"
                                "kernel twice(x: f32[], out: f32[]) {\n"
                                "    for i in 0..len(x) {\n"
                                "        out[i] = f(f(x[i])) + f(x[i] - 1.0);\n"
                                "    }\n"
                                "}\n";

static float ref_f(float x) {
    if (x > 1.0f)
        return x * 0.5f;
    float y = x;
    y += 2.0f;
    return y;
}

Test(interp, func_called_twice_and_nested) {
    compiled c = compile_src("twice", twice_src);
    rng r = {104};
    int64_t n = 40;
    ir_interp_arg in[2] = {arr(TY_F32, 1, n, 0, 0), arr(TY_F32, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++)
        F32(in[0])[i] = i == 0 ? 1.0f : i == 1 ? 2.0f : rng_f32(&r, -4, 6);
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int64_t i = 0; i < n; i++) {
        float x = F32(ref[0])[i];
        F32(ref[1])[i] = ref_f(ref_f(x)) + ref_f(x - 1.0f);
    }
    check_runs(&c, "twice", in, ref, 2, 0, "random");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

/* && / || / ?: guarding loads that would be out of bounds and divisions by zero. */
static const char guarded_src[] =
    "kernel guarded(x: f32[], d: i32[], out: f32[], q: i32[]) {\n"
    "    for i in 0..len(out) {\n"
    "        let j = 2 * i - 3;\n"
    "        let pos = j >= 0 && j < len(x) && x[j] > 0.0;\n"
    "        let neg = j < 0 || j >= len(x) || x[j] < -0.5;\n"
    "        out[i] = pos ? x[j] : (neg ? -1.0 : 0.0);\n"
    "        let dv = i < len(d) ? d[i] : 0;\n"
    "        q[i] = dv != 0 ? 1000 / dv : (dv == 0 ? -7 : 1000 % dv);\n"
    "    }\n"
    "}\n";

Test(interp, lazy_and_or_ternary_guard_out_of_bounds) {
    compiled c = compile_src("guarded", guarded_src);
    rng r = {105};
    int64_t nx = 6, nd = 7, nout = 10;
    ir_interp_arg in[4] = {arr(TY_F32, 1, nx, 0, 0), arr(TY_I32, 1, nd, 0, 0),
                           arr(TY_F32, 1, nout, 0, 0), arr(TY_I32, 1, nout, 0, 0)};
    for (int64_t i = 0; i < nx; i++)
        F32(in[0])[i] = rng_f32(&r, -1, 1);
    for (int64_t i = 0; i < nd; i++)
        I32(in[1])[i] = i % 3 == 0 ? 0 : (int32_t)rng_int(&r, -9, 9);
    ir_interp_arg ref[4];
    clone_args(ref, in, 4);
    for (int32_t i = 0; i < nout; i++) {
        int32_t j = 2 * i - 3;
        float *x = F32(ref[0]);
        bool pos = j >= 0 && j < nx && x[j] > 0.0f;
        bool neg = j < 0 || j >= nx || x[j] < -0.5f;
        F32(ref[2])[i] = pos ? x[j] : (neg ? -1.0f : 0.0f);
        int32_t dv = i < nd ? I32(ref[1])[i] : 0;
        I32(ref[3])[i] = dv != 0 ? 1000 / dv : -7;
    }
    check_runs(&c, "guarded", in, ref, 4, 0, "lazy guards");
    free_args(in, 4);
    free_args(ref, 4);
    compiled_free(&c);
}

/* Carried variables assigned in only one branch of nested ifs. */
static const char branches_src[] = "kernel branches(x: i32[,], out: i32[,]) {\n"
                                   "    for i in 0..shape(x, 0) {\n"
                                   "        var a = 0;\n"
                                   "        var b = 1;\n"
                                   "        var c = 2;\n"
                                   "        for j in 0..shape(x, 1) {\n"
                                   "            let v = x[i, j];\n"
                                   "            if v > 0 {\n"
                                   "                if v > 5 {\n"
                                   "                    a += v;\n"
                                   "                } else {\n"
                                   "                    b = b * 3 % 1001;\n"
                                   "                }\n"
                                   "            } else {\n"
                                   "                if v == 0 {\n"
                                   "                    c -= 1;\n"
                                   "                }\n"
                                   "            }\n"
                                   "        }\n"
                                   "        out[i, 0] = a;\n"
                                   "        out[i, 1] = b;\n"
                                   "        out[i, 2] = c;\n"
                                   "    }\n"
                                   "}\n";

Test(interp, carried_values_in_one_branch_of_nested_ifs) {
    compiled c = compile_src("branches", branches_src);
    rng r = {106};
    int64_t R = 12, C = 10;
    ir_interp_arg in[2] = {arr(TY_I32, 2, R, C, 0), arr(TY_I32, 2, R, 3, 0)};
    for (int64_t i = 0; i < R * C; i++)
        I32(in[0])[i] = (int32_t)rng_int(&r, -3, 9);
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int64_t i = 0; i < R; i++) {
        int32_t a = 0, b = 1, cc = 2;
        for (int64_t j = 0; j < C; j++) {
            int32_t v = I32(ref[0])[i * C + j];
            if (v > 0) {
                if (v > 5)
                    a += v;
                else
                    b = b * 3 % 1001;
            } else if (v == 0) {
                cc -= 1;
            }
        }
        I32(ref[1])[i * 3 + 0] = a;
        I32(ref[1])[i * 3 + 1] = b;
        I32(ref[1])[i * 3 + 2] = cc;
    }
    check_runs(&c, "branches", in, ref, 2, 0, "random");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

/* Loops with zero trips and negative ranges (lo > hi), serial and parallel. */
static const char ranges_src[] = "kernel ranges(lo: i32, hi: i32, out: i32[]) {\n"
                                 "    for i in 0..len(out) {\n"
                                 "        var s = 0;\n"
                                 "        for j in lo..hi {\n"
                                 "            s += j;\n"
                                 "        }\n"
                                 "        for j in hi..lo {\n"
                                 "            s += 1000;\n"
                                 "        }\n"
                                 "        for j in 5..5 {\n"
                                 "            s -= 1;\n"
                                 "        }\n"
                                 "        for j in -5..-2 {\n"
                                 "            s += j * 10;\n"
                                 "        }\n"
                                 "        for j in i..i - 3 {\n"
                                 "            s += 99999;\n"
                                 "        }\n"
                                 "        out[i] = s + i;\n"
                                 "    }\n"
                                 "    for k in 3..1 {\n"
                                 "        out[0] = 12345;\n"
                                 "    }\n"
                                 "    for k in hi..lo {\n"
                                 "        out[k - hi] = -k;\n"
                                 "    }\n"
                                 "}\n";

Test(interp, zero_trip_and_negative_ranges) {
    compiled c = compile_src("ranges", ranges_src);
    int32_t bounds[][2] = {{2, 7}, {7, 2}, {-8, -3}, {-3, -8}, {0, 0}, {4, 4}};
    for (int s = 0; s < 6; s++) {
        int32_t lo = bounds[s][0], hi = bounds[s][1];
        int64_t n = 8;
        ir_interp_arg in[3] = {ir_interp_int(TY_I32, lo), ir_interp_int(TY_I32, hi),
                               arr(TY_I32, 1, n, 0, 0)};
        ir_interp_arg ref[3];
        clone_args(ref, in, 3);
        for (int32_t i = 0; i < n; i++) {
            int32_t sm = 0;
            for (int32_t j = lo; j < hi; j++)
                sm += j;
            for (int32_t j = hi; j < lo; j++)
                sm += 1000;
            for (int32_t j = -5; j < -2; j++)
                sm += j * 10;
            I32(ref[2])[i] = sm + i;
        }
        for (int32_t k = hi; k < lo; k++)
            I32(ref[2])[k - hi] = -k;
        char label[32];
        snprintf(label, sizeof label, "lo=%d hi=%d", lo, hi);
        check_runs(&c, "ranges", in, ref, 3, 0, label);
        free_args(in, 3);
        free_args(ref, 3);
    }
    compiled_free(&c);
}

/* Multi-range parallel loops, 3-D and 2-D with offset and negative lower bounds. */
static const char grid_src[] =
    "kernel grid(a: f32[,,], b: f32[,,], c: i32[,], lo: i32) {\n"
    "    for i in 0..shape(a, 0), j in 0..shape(a, 1), k in 0..shape(a, 2) {\n"
    "        b[i, j, k] = a[i, j, k] * f32(i) + f32(j - k);\n"
    "    }\n"
    "    for i in lo..shape(c, 0), j in -2..shape(c, 1) - 2 {\n"
    "        c[i, j + 2] = i * 100 + j;\n"
    "    }\n"
    "}\n";

Test(interp, multi_range_parallel_2d_3d) {
    compiled c = compile_src("grid", grid_src);
    rng r = {107};
    int64_t D0 = 3, D1 = 4, D2 = 5, R = 4, C = 6;
    int32_t lo_list[] = {1, 0, 5};
    for (int s = 0; s < 3; s++) {
        int32_t lo = lo_list[s];
        ir_interp_arg in[4] = {arr(TY_F32, 3, D0, D1, D2), arr(TY_F32, 3, D0, D1, D2),
                               arr(TY_I32, 2, R, C, 0), ir_interp_int(TY_I32, lo)};
        for (int64_t i = 0; i < D0 * D1 * D2; i++)
            F32(in[0])[i] = rng_f32(&r, -2, 2);
        for (int64_t i = 0; i < R * C; i++)
            I32(in[2])[i] = -5;
        ir_interp_arg ref[4];
        clone_args(ref, in, 4);
        for (int32_t i = 0; i < D0; i++)
            for (int32_t j = 0; j < D1; j++)
                for (int32_t k = 0; k < D2; k++) {
                    int64_t o = (i * D1 + j) * D2 + k;
                    F32(ref[1])[o] = F32(ref[0])[o] * (float)i + (float)(j - k);
                }
        for (int32_t i = lo; i < R; i++)
            for (int32_t j = -2; j < C - 2; j++)
                I32(ref[2])[i * C + j + 2] = i * 100 + j;
        char label[32];
        snprintf(label, sizeof label, "lo=%d", lo);
        check_runs(&c, "grid", in, ref, 4, 0, label);
        free_args(in, 4);
        free_args(ref, 4);
    }
    /* an extent of 0 in the middle of a 3-D range: no iteration at all */
    ir_interp_arg in[4] = {arr(TY_F32, 3, 2, 0, 3), arr(TY_F32, 3, 2, 0, 3),
                           arr(TY_I32, 2, 1, 1, 0), ir_interp_int(TY_I32, 3)};
    ir_interp_arg ref[4];
    clone_args(ref, in, 4);
    check_runs(&c, "grid", in, ref, 4, 0, "empty");
    free_args(in, 4);
    free_args(ref, 4);
    compiled_free(&c);
}

/* u32 wraparound, unsigned division, shifts and comparisons. */
static const char u32_src[] =
    "kernel u32ops(u: u32[], v: u32[], out: u32[], f: f32[], flags: bool[]) {\n"
    "    for i in 0..len(u) {\n"
    "        let a = u[i];\n"
    "        let b = v[i];\n"
    "        let big: u32 = 4294967295;\n"
    "        var h = a * 2654435761 + big;\n"
    "        h = h ^ (h >> 13);\n"
    "        h = h - b;\n"
    "        out[i] = h + (b == 0 ? u32(0) : a / b) + a % (b | 1) + (a << (b & 31));\n"
    "        f[i] = f32(a) + f32(b >> 16);\n"
    "        flags[i] = a > b || a - b > 2147483648;\n"
    "    }\n"
    "}\n";

Test(interp, u32_wraparound) {
    compiled c = compile_src("u32ops", u32_src);
    rng r = {108};
    int64_t n = 40;
    ir_interp_arg in[5] = {arr(TY_U32, 1, n, 0, 0), arr(TY_U32, 1, n, 0, 0),
                           arr(TY_U32, 1, n, 0, 0), arr(TY_F32, 1, n, 0, 0),
                           arr(TY_BOOL, 1, n, 0, 0)};
    uint32_t special[][2] = {{0, 0},           {UINT32_MAX, 1}, {1, UINT32_MAX},
                             {0x80000000u, 1}, {5, 0},          {UINT32_MAX, UINT32_MAX}};
    for (int64_t i = 0; i < n; i++) {
        U32(in[0])[i] = i < 6 ? special[i][0] : (uint32_t)rng_next(&r);
        U32(in[1])[i] = i < 6 ? special[i][1] : i % 4 ? (uint32_t)rng_next(&r) : 0;
    }
    ir_interp_arg ref[5];
    clone_args(ref, in, 5);
    for (int64_t i = 0; i < n; i++) {
        uint32_t a = U32(ref[0])[i], b = U32(ref[1])[i];
        uint32_t h = a * 2654435761u + 4294967295u;
        h = h ^ (h >> 13);
        h = h - b;
        U32(ref[2])[i] = h + (b == 0 ? 0u : a / b) + a % (b | 1u) + (a << (b & 31u));
        F32(ref[3])[i] = (float)a + (float)(b >> 16);
        BOOL(ref[4])[i] = a > b || a - b > 2147483648u;
    }
    check_runs(&c, "u32ops", in, ref, 5, 0, "random and edges");
    free_args(in, 5);
    free_args(ref, 5);
    compiled_free(&c);
}

/* i64 arithmetic: wrapping LCG, arithmetic shifts, signed division, abs/sign/min/max. */
static const char i64_src[] =
    "kernel i64ops(x: i64[], y: i32[], out: i64[], g: f64[]) {\n"
    "    for i in 0..len(x) {\n"
    "        let a = x[i];\n"
    "        let b = i64(y[i]);\n"
    "        var h = a * 6364136223846793005 + 1442695040888963407;\n"
    "        h = h ^ (h >> 29);\n"
    "        let q = b != 0 ? a / b : i64(0);\n"
    "        let r = b != 0 ? a % b : i64(-1);\n"
    "        out[i] = h + q * 3 - r + (i64(1) << (y[i] & 63)) + abs(b) * sign(a) - min(a, b)\n"
    "            + max(a >> 40, b);\n"
    "        g[i] = f64(a) * 0.5 + f64(b);\n"
    "    }\n"
    "}\n";

Test(interp, i64_arithmetic) {
    compiled c = compile_src("i64ops", i64_src);
    rng r = {109};
    int64_t n = 40;
    ir_interp_arg in[4] = {arr(TY_I64, 1, n, 0, 0), arr(TY_I32, 1, n, 0, 0),
                           arr(TY_I64, 1, n, 0, 0), arr(TY_F64, 1, n, 0, 0)};
    int64_t xs[] = {0, -1, INT64_MIN, INT64_MAX, 7, -7, 1LL << 40, -(1LL << 41)};
    int32_t ys[] = {0, -1, 3, -1, 2, -2, 63, INT32_MIN};
    for (int64_t i = 0; i < n; i++) {
        I64(in[0])[i] = i < 8 ? xs[i] : (int64_t)rng_next(&r) >> rng_int(&r, 0, 40);
        I32(in[1])[i] = i < 8 ? ys[i] : (int32_t)rng_int(&r, -100, 100);
    }
    ir_interp_arg ref[4];
    clone_args(ref, in, 4);
    for (int64_t i = 0; i < n; i++) {
        int64_t a = I64(ref[0])[i], b = I32(ref[1])[i];
        int64_t h = add64(mul64(a, 6364136223846793005LL), 1442695040888963407LL);
        h = h ^ sar64(h, 29);
        int64_t q = b != 0 ? a / b : 0;
        int64_t rr = b != 0 ? a % b : -1;
        int64_t absb = b < 0 ? -b : b, sg = (a > 0) - (a < 0);
        int64_t mn = b < a ? b : a, sh = sar64(a, 40), mx = b > sh ? b : sh;
        int64_t o = sub64(add64(h, mul64(q, 3)), rr);
        o = add64(o, (int64_t)((uint64_t)1 << (I32(ref[1])[i] & 63)));
        o = sub64(add64(o, mul64(absb, sg)), mn);
        I64(ref[2])[i] = add64(o, mx);
        F64(ref[3])[i] = (double)a * 0.5 + (double)b;
    }
    check_runs(&c, "i64ops", in, ref, 4, 0, "random and edges");
    free_args(in, 4);
    free_args(ref, 4);
    compiled_free(&c);
}

/* Serial top-level statements between parallel tasks that read earlier results. */
static const char staged_src[] = "kernel staged(x: f32[], sum: f32[], y: f32[], cnt: i32[]) {\n"
                                 "    sum[0] = 0.0;\n"
                                 "    for i in 0..len(x) {\n"
                                 "        sum[0] += x[i];\n"
                                 "    }\n"
                                 "    let n = len(x);\n"
                                 "    var mean = sum[0] / f32(n);\n"
                                 "    sum[1] = mean;\n"
                                 "    cnt[0] = 0;\n"
                                 "    for i in 0..n {\n"
                                 "        if x[i] > sum[1] {\n"
                                 "            cnt[0] += 1;\n"
                                 "            y[i] = x[i] - sum[1];\n"
                                 "        } else {\n"
                                 "            y[i] = 0.0;\n"
                                 "        }\n"
                                 "    }\n"
                                 "    cnt[1] = cnt[0] * 2;\n"
                                 "    var k = 0;\n"
                                 "    while k < 3 {\n"
                                 "        sum[2] += f32(k) * sum[1];\n"
                                 "        k += 1;\n"
                                 "    }\n"
                                 "}\n";

Test(interp, serial_statements_between_tasks) {
    compiled c = compile_src("staged", staged_src);
    rng r = {110};
    int64_t n = 23;
    ir_interp_arg in[4] = {arr(TY_F32, 1, n, 0, 0), arr(TY_F32, 1, 3, 0, 0),
                           arr(TY_F32, 1, n, 0, 0), arr(TY_I32, 1, 2, 0, 0)};
    for (int64_t i = 0; i < n; i++)
        F32(in[0])[i] = rng_f32(&r, -1, 3);
    F32(in[1])[0] = 77.0f, F32(in[1])[2] = 0.5f;
    I32(in[3])[0] = 9, I32(in[3])[1] = 9;
    ir_interp_arg ref[4];
    clone_args(ref, in, 4);
    float *x = F32(ref[0]), *sum = F32(ref[1]), *y = F32(ref[2]);
    int32_t *cnt = I32(ref[3]);
    sum[0] = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum[0] += x[i];
    sum[1] = sum[0] / (float)n;
    cnt[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        if (x[i] > sum[1]) {
            cnt[0] += 1;
            y[i] = x[i] - sum[1];
        } else {
            y[i] = 0.0f;
        }
    }
    cnt[1] = cnt[0] * 2;
    for (int32_t k = 0; k < 3; k++)
        sum[2] += (float)k * sum[1];
    check_runs(&c, "staged", in, ref, 4, 0, "random");
    free_args(in, 4);
    free_args(ref, 4);
    compiled_free(&c);
}

/* continue in a while, an inner `while true` left by break, an early return of a void
 * func from inside a for. */
static const char while_cont_src[] = "func put(a: i32[], i: i32, v: i32) {\n"
                                     "    for t in 0..4 {\n"
                                     "        if v + t > 5 {\n"
                                     "            a[i] = t;\n"
                                     "            return;\n"
                                     "        }\n"
                                     "    }\n"
                                     "    a[i] = -1;\n"
                                     "}\n"
                                     "\n"
                                     "kernel wc(x: i32[], out: i32[], tag: i32[]) {\n"
                                     "    for i in 0..len(x) {\n"
                                     "        var k = 0;\n"
                                     "        var s = 0;\n"
                                     "        while k < x[i] {\n"
                                     "            k += 1;\n"
                                     "            if k % 3 == 0 {\n"
                                     "                continue;\n"
                                     "            }\n"
                                     "            var m = k;\n"
                                     "            while true {\n"
                                     "                m -= 4;\n"
                                     "                if m < 0 {\n"
                                     "                    break;\n"
                                     "                }\n"
                                     "                s += 1;\n"
                                     "            }\n"
                                     "            s += k;\n"
                                     "        }\n"
                                     "        out[i] = s;\n"
                                     "        put(tag, i, x[i]);\n"
                                     "    }\n"
                                     "}\n";

Test(interp, while_continue_and_void_func_return) {
    compiled c = compile_src("wc", while_cont_src);
    int64_t n = 16;
    ir_interp_arg in[3] = {arr(TY_I32, 1, n, 0, 0), arr(TY_I32, 1, n, 0, 0),
                           arr(TY_I32, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++)
        I32(in[0])[i] = (int32_t)i - 3;
    ir_interp_arg ref[3];
    clone_args(ref, in, 3);
    for (int64_t i = 0; i < n; i++) {
        int32_t xi = I32(ref[0])[i], k = 0, s = 0;
        while (k < xi) {
            k += 1;
            if (k % 3 == 0)
                continue;
            int32_t m = k;
            for (;;) {
                m -= 4;
                if (m < 0)
                    break;
                s += 1;
            }
            s += k;
        }
        I32(ref[1])[i] = s;
        int32_t tag = -1;
        for (int32_t t = 0; t < 4; t++)
            if (xi + t > 5) {
                tag = t;
                break;
            }
        I32(ref[2])[i] = tag;
    }
    check_runs(&c, "wc", in, ref, 3, 0, "x = -3..12");
    free_args(in, 3);
    free_args(ref, 3);
    compiled_free(&c);
}

/* f64 with promotions from i32, bool arrays, select and float rounding builtins. */
static const char mixed_src[] =
    "kernel mixed(a: f64[], b: i32[], c: bool[], out: f64[]) {\n"
    "    for i in 0..len(a) {\n"
    "        let x = a[i] * b[i] + 0.5;\n"
    "        let y = c[i] ? x : -x;\n"
    "        let z = select(b[i] > 0, floor(y), ceil(y));\n"
    "        out[i] = round(z * 0.75) + sqrt(abs(x)) - clamp(x, -2.0, 2.0)\n"
    "            + pow(2.0, f64(b[i] % 5));\n"
    "        c[i] = c[i] != (b[i] % 2 == 0);\n"
    "    }\n"
    "}\n";

Test(interp, f64_promotions_and_bools) {
    compiled c = compile_src("mixed", mixed_src);
    rng r = {111};
    int64_t n = 40;
    ir_interp_arg in[4] = {arr(TY_F64, 1, n, 0, 0), arr(TY_I32, 1, n, 0, 0),
                           arr(TY_BOOL, 1, n, 0, 0), arr(TY_F64, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++) {
        F64(in[0])[i] = i == 0 ? 0.5 : i == 1 ? -0.5 : (rng_unit(&r) - 0.5) * 10;
        I32(in[1])[i] = (int32_t)rng_int(&r, -7, 7);
        BOOL(in[2])[i] = rng_next(&r) & 1;
    }
    I32(in[1])[0] = 1, I32(in[1])[1] = 1; /* x = 1.0 and 0.0: round(0.75), halves */
    ir_interp_arg ref[4];
    clone_args(ref, in, 4);
    for (int64_t i = 0; i < n; i++) {
        int32_t b = I32(ref[1])[i];
        double x = F64(ref[0])[i] * (double)b + 0.5;
        double y = BOOL(ref[2])[i] ? x : -x;
        double z = b > 0 ? floor(y) : ceil(y);
        double cl = -2.0 > x ? -2.0 : x;
        cl = 2.0 < cl ? 2.0 : cl;
        F64(ref[3])[i] = round(z * 0.75) + sqrt(fabs(x)) - cl + pow(2.0, (double)(b % 5));
        BOOL(ref[2])[i] = BOOL(ref[2])[i] != (b % 2 == 0);
    }
    check_runs(&c, "mixed", in, ref, 4, 0, "random");
    free_args(in, 4);
    free_args(ref, 4);
    compiled_free(&c);
}

/* ======================================================================================
 * The interpreter itself: op semantics on hand-written IR, order, speed, errors
 * ==================================================================================== */

static ir_module *parse_ir(const char *text) {
    arena a;
    arena_init(&a);
    diag_sink s;
    diag_init(&s, &a);
    kern_source src = {"<test>", text, strlen(text)};
    ir_module *m = ir_parse(text, strlen(text), &src, &s);
    if (!m)
        diag_print_all(stderr, &s);
    diag_free(&s);
    arena_free(&a);
    cr_assert(m, "the test's IR does not parse:\n%s", text);
    return m;
}

/* Result of `%r = OP %a[, %b[, %c]] : RT` on scalars of kind t (nops of them, in args),
 * run in a serial task that stores it. */
typedef union scalar {
    bool b;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    float f32;
    double f64;
} scalar;

static scalar run_op(const char *op, kern_tykind t, kern_tykind rt, int nops, ir_interp_arg a,
                     ir_interp_arg b, ir_interp_arg c) {
    const char *tn = ty_scalar(t)->name, *rn = ty_scalar(rt)->name;
    char text[1024];
    const char *ops = nops == 1 ? "%a" : nops == 2 ? "%a, %b" : "%a, %b, %c";
    snprintf(text, sizeof text,
             "kernel @t(%%a: %s, %%b: %s, %%c: %s, %%o: %s[]) {\n"
             "  serial {\n"
             "    %%z = const 0 : i32\n"
             "    %%r = %s %s : %s\n"
             "    store %%o[%%z], %%r\n"
             "  }\n"
             "}\n",
             tn, tn, tn, rn, op, ops, rn);
    ir_module *m = parse_ir(text);
    scalar out;
    memset(&out, 0xAB, sizeof out);
    ir_interp_arg args[4] = {a, b, c, ir_interp_array(rt, &out, 1, 1, 0, 0, 0)};
    args[0].kind = args[1].kind = args[2].kind = t;
    char err[512];
    bool ok = ir_interp_run(m, "t", args, 4, err, sizeof err);
    ir_module_free(m);
    cr_assert(ok, "%s: %s", op, err);
    return out;
}

#define SI(v) ir_interp_int(TY_I32, (v))
#define SU(v) ir_interp_int(TY_U32, (int64_t)(uint32_t)(v))
#define SL(v) ir_interp_int(TY_I64, (v))
#define SB(v) ir_interp_int(TY_BOOL, (v))
#define SF(v) ir_interp_float(TY_F32, (v))
#define SD(v) ir_interp_float(TY_F64, (v))

static scalar op_i32(const char *op, int32_t a, int32_t b) {
    return run_op(op, TY_I32, TY_I32, 2, SI(a), SI(b), SI(0));
}
static scalar op_u32(const char *op, uint32_t a, uint32_t b) {
    return run_op(op, TY_U32, TY_U32, 2, SU(a), SU(b), SU(0));
}
static bool cmp_u32(const char *op, uint32_t a, uint32_t b) {
    return run_op(op, TY_U32, TY_BOOL, 2, SU(a), SU(b), SU(0)).b;
}
static scalar op_f32(const char *op, int nops, float a, float b, float c) {
    return run_op(op, TY_F32, TY_F32, nops, SF(a), SF(b), SF(c));
}
static scalar cast(kern_tykind from, kern_tykind to, ir_interp_arg a) {
    return run_op("cast", from, to, 1, a, a, a);
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

Test(interp, op_integer_semantics) {
    /* u32: unsigned division, remainder, shifts, comparisons, wrapping */
    cr_expect_eq(op_u32("div", 4294967295u, 2).u32, 2147483647u);
    cr_expect_eq(op_u32("rem", 4294967295u, 10).u32, 5u);
    cr_expect_eq(op_u32("shr", 0x80000000u, 31).u32, 1u);
    cr_expect_eq(op_u32("add", 4294967295u, 1).u32, 0u);
    cr_expect_eq(op_u32("sub", 0, 1).u32, 4294967295u);
    cr_expect_eq(op_u32("mul", 65536u, 65537u).u32, 65536u);
    cr_expect(cmp_u32("lt", 1, 4294967295u));
    cr_expect(!cmp_u32("gt", 1, 4294967295u));
    cr_expect(cmp_u32("ge", 0x80000000u, 0x7fffffffu));
    cr_expect_eq(op_u32("max", 0x80000000u, 5).u32, 0x80000000u);
    cr_expect_eq(run_op("abs", TY_U32, TY_U32, 1, SU(0xfffffff0u), SU(0), SU(0)).u32, 0xfffffff0u);
    /* i32: arithmetic shr, truncating division, remainder with the dividend's sign */
    cr_expect_eq(op_i32("shr", -8, 1).i32, -4);
    cr_expect_eq(op_i32("shr", -1, 31).i32, -1);
    cr_expect_eq(op_i32("shl", 1, 31).i32, INT32_MIN);
    cr_expect_eq(op_i32("div", -7, 2).i32, -3);
    cr_expect_eq(op_i32("rem", -7, 2).i32, -1);
    cr_expect_eq(op_i32("rem", 7, -2).i32, 1);
    cr_expect_eq(op_i32("div", INT32_MIN, -1).i32, INT32_MIN);
    cr_expect_eq(op_i32("rem", INT32_MIN, -1).i32, 0);
    cr_expect_eq(op_i32("div", 7, -1).i32, -7);
    cr_expect_eq(op_i32("add", INT32_MAX, 1).i32, INT32_MIN);
    cr_expect_eq(op_i32("mul", 65536, 65536).i32, 0);
    cr_expect_eq(op_i32("min", -3, 2).i32, -3);
    cr_expect(!run_op("lt", TY_I32, TY_BOOL, 2, SI(1), SI(-1), SI(0)).b);
    cr_expect_eq(run_op("neg", TY_I32, TY_I32, 1, SI(INT32_MIN), SI(0), SI(0)).i32, INT32_MIN);
    cr_expect_eq(run_op("abs", TY_I32, TY_I32, 1, SI(INT32_MIN), SI(0), SI(0)).i32, INT32_MIN);
    cr_expect_eq(run_op("abs", TY_I32, TY_I32, 1, SI(-5), SI(0), SI(0)).i32, 5);
    cr_expect_eq(run_op("not", TY_I32, TY_I32, 1, SI(0), SI(0), SI(0)).i32, -1);
    cr_expect_eq(run_op("sign", TY_I32, TY_I32, 1, SI(-9), SI(0), SI(0)).i32, -1);
    cr_expect_eq(run_op("sign", TY_I32, TY_I32, 1, SI(0), SI(0), SI(0)).i32, 0);
    cr_expect_eq(run_op("clamp", TY_I32, TY_I32, 3, SI(5), SI(0), SI(3)).i32, 3);
    cr_expect_eq(run_op("clamp", TY_I32, TY_I32, 3, SI(-1), SI(0), SI(3)).i32, 0);
    cr_expect_eq(run_op("clamp", TY_I32, TY_I32, 3, SI(1), SI(3), SI(2)).i32, 2);
    /* i64 */
    cr_expect_eq(run_op("shr", TY_I64, TY_I64, 2, SL(INT64_MIN), SL(63), SL(0)).i64, -1);
    cr_expect_eq(run_op("mul", TY_I64, TY_I64, 2, SL(INT64_MAX), SL(2), SL(0)).i64, -2);
    cr_expect_eq(run_op("div", TY_I64, TY_I64, 2, SL(-9000000000LL), SL(7), SL(0)).i64,
                 -1285714285LL);
    /* bool */
    cr_expect(!run_op("not", TY_BOOL, TY_BOOL, 1, SB(1), SB(0), SB(0)).b);
    cr_expect(run_op("xor", TY_BOOL, TY_BOOL, 2, SB(1), SB(0), SB(0)).b);
    cr_expect(!run_op("and", TY_BOOL, TY_BOOL, 2, SB(1), SB(0), SB(0)).b);
    cr_expect(run_op("eq", TY_BOOL, TY_BOOL, 2, SB(0), SB(0), SB(0)).b);
}

Test(interp, op_float_semantics) {
    /* f32 arithmetic is done in float: 2^24 + 1 rounds back to 2^24 (not in double) */
    cr_expect_eq(op_f32("add", 2, 16777216.0f, 1.0f, 0).f32, 16777216.0f);
    cr_expect_eq(op_f32("div", 2, 1.0f, 3.0f, 0).f32, 1.0f / 3.0f);
    /* round half away from zero */
    cr_expect_eq(op_f32("round", 1, 2.5f, 0, 0).f32, 3.0f);
    cr_expect_eq(op_f32("round", 1, -2.5f, 0, 0).f32, -3.0f);
    cr_expect_eq(op_f32("round", 1, 0.49999997f, 0, 0).f32, 0.0f);
    cr_expect_eq(run_op("round", TY_F64, TY_F64, 1, SD(-0.5), SD(0), SD(0)).f64, -1.0);
    cr_expect_eq(op_f32("floor", 1, -0.5f, 0, 0).f32, -1.0f);
    cr_expect_eq(op_f32("ceil", 1, -0.5f, 0, 0).f32, -0.0f);
    /* min/max: a tie returns operand 0 (visible on the sign of zero) */
    cr_expect_eq(f32_bits(op_f32("min", 2, -0.0f, 0.0f, 0).f32), f32_bits(-0.0f));
    cr_expect_eq(f32_bits(op_f32("min", 2, 0.0f, -0.0f, 0).f32), f32_bits(0.0f));
    cr_expect_eq(f32_bits(op_f32("max", 2, -0.0f, 0.0f, 0).f32), f32_bits(-0.0f));
    cr_expect_eq(f32_bits(op_f32("max", 2, 0.0f, -0.0f, 0).f32), f32_bits(0.0f));
    cr_expect_eq(op_f32("min", 2, 3.0f, -1.0f, 0).f32, -1.0f);
    cr_expect_eq(op_f32("max", 2, 3.0f, -1.0f, 0).f32, 3.0f);
    /* clamp = min(max(x, lo), hi) */
    cr_expect_eq(op_f32("clamp", 3, 5.0f, -1.0f, 1.0f).f32, 1.0f);
    cr_expect_eq(op_f32("clamp", 3, -5.0f, -1.0f, 1.0f).f32, -1.0f);
    cr_expect_eq(op_f32("clamp", 3, 0.25f, -1.0f, 1.0f).f32, 0.25f);
    cr_expect_eq(op_f32("clamp", 3, 0.0f, 2.0f, 1.0f).f32, 1.0f);
    /* sign: -1, 0, 1; a zero keeps its sign */
    cr_expect_eq(op_f32("sign", 1, -3.5f, 0, 0).f32, -1.0f);
    cr_expect_eq(op_f32("sign", 1, 1e-30f, 0, 0).f32, 1.0f);
    cr_expect_eq(f32_bits(op_f32("sign", 1, -0.0f, 0, 0).f32), f32_bits(-0.0f));
    /* fma rounds once: (1 + 2^-12)^2 - (1 + 2^-11) is 2^-24, 0 with two roundings */
    float a = 1.0f + 0x1p-12f;
    cr_expect_eq(op_f32("fma", 3, a, a, -(1.0f + 0x1p-11f)).f32, 0x1p-24f);
    cr_expect_eq(op_f32("rsqrt", 1, 4.0f, 0, 0).f32, 0.5f);
    cr_expect_eq(op_f32("exp2", 1, 3.0f, 0, 0).f32, 8.0f);
    cr_expect_eq(op_f32("abs", 1, -2.0f, 0, 0).f32, 2.0f);
    cr_expect_eq(op_f32("neg", 1, 2.0f, 0, 0).f32, -2.0f);
    cr_expect_eq(op_f32("sin", 1, 0.5f, 0, 0).f32, sinf(0.5f));
    cr_expect_eq(op_f32("pow", 2, 2.0f, 10.0f, 0).f32, 1024.0f);
    cr_expect_eq(run_op("atan2", TY_F64, TY_F64, 2, SD(1.0), SD(-1.0), SD(0)).f64,
                 atan2(1.0, -1.0));
    /* comparisons with NaN are false, except ne */
    cr_expect(!run_op("eq", TY_F32, TY_BOOL, 2, SF(NAN), SF(NAN), SF(0)).b);
    cr_expect(run_op("ne", TY_F32, TY_BOOL, 2, SF(NAN), SF(NAN), SF(0)).b);
    cr_expect(!run_op("lt", TY_F64, TY_BOOL, 2, SD(NAN), SD(1), SD(0)).b);
    cr_expect(run_op("le", TY_F64, TY_BOOL, 2, SD(-0.0), SD(0.0), SD(0)).b);
}

Test(interp, op_casts) {
    cr_expect_eq(cast(TY_F32, TY_I32, SF(-2.7)).i32, -2);
    cr_expect_eq(cast(TY_F32, TY_I32, SF(2.7)).i32, 2);
    cr_expect_eq(cast(TY_F64, TY_U32, SD(3.9e9)).u32, 3900000000u);
    cr_expect_eq(cast(TY_F64, TY_U32, SD(-0.9)).u32, 0u);
    cr_expect_eq(cast(TY_F64, TY_I64, SD(-9.9)).i64, -9);
    cr_expect(cast(TY_F32, TY_BOOL, SF(0.5)).b);
    cr_expect(!cast(TY_F32, TY_BOOL, SF(-0.0)).b);
    cr_expect(cast(TY_I32, TY_BOOL, SI(-4)).b);
    cr_expect_eq(cast(TY_U32, TY_I32, SU(4294967295u)).i32, -1);
    cr_expect_eq(cast(TY_I32, TY_U32, SI(-1)).u32, 4294967295u);
    cr_expect_eq(cast(TY_U32, TY_I64, SU(4294967295u)).i64, 4294967295LL);
    cr_expect_eq(cast(TY_I32, TY_I64, SI(-5)).i64, -5);
    cr_expect_eq(cast(TY_I64, TY_I32, SL(0x123456789LL)).i32, 0x23456789);
    cr_expect_eq(cast(TY_I32, TY_F32, SI(16777217)).f32, 16777216.0f);
    cr_expect_eq(cast(TY_U32, TY_F64, SU(4294967295u)).f64, 4294967295.0);
    cr_expect_eq(cast(TY_F64, TY_F32, SD(0.1)).f32, 0.1f);
    cr_expect_eq(cast(TY_F32, TY_F64, SF(0.1)).f64, (double)0.1f);
    cr_expect_eq(cast(TY_BOOL, TY_F32, SB(1)).f32, 1.0f);
    cr_expect_eq(cast(TY_BOOL, TY_I32, SB(1)).i32, 1);
}

Test(interp, op_atomics_dim_select) {
    const char *text = "kernel @t(%a: i32[,], %f: f32[], %o: i32[], %of: f32[]) {\n"
                       "  serial {\n"
                       "    %z = const 0 : i32\n"
                       "    %one = const 1 : i32\n"
                       "    %two = const 2 : i32\n"
                       "    %v = const 5 : i32\n"
                       "    %o0 = atomic_add %a[%one, %two], %v : i32\n"
                       "    %o1 = atomic_sub %a[%one, %two], %two : i32\n"
                       "    %o2 = atomic_max %a[%z, %z], %v : i32\n"
                       "    %o3 = atomic_min %a[%z, %one], %v : i32\n"
                       "    %d0 = dim %a, 0 : i32\n"
                       "    %d1 = dim %a, 1 : i32\n"
                       "    %fv = const -0.0 : f32\n"
                       "    %p0 = atomic_min %f[%z], %fv : f32\n"
                       "    %q = const 0.5 : f32\n"
                       "    %p1 = atomic_add %f[%one], %q : f32\n"
                       "    %c = lt %d0, %d1 : bool\n"
                       "    %s = select %c, %o0, %o1 : i32\n"
                       "    %three = const 3 : i32\n"
                       "    %four = const 4 : i32\n"
                       "    %five = const 5 : i32\n"
                       "    store %o[%z], %o0\n"
                       "    store %o[%one], %o1\n"
                       "    store %o[%two], %o2\n"
                       "    store %o[%three], %o3\n"
                       "    store %o[%four], %d1\n"
                       "    store %o[%five], %s\n"
                       "    store %of[%z], %p0\n"
                       "    store %of[%one], %p1\n"
                       "  }\n"
                       "}\n";
    ir_module *m = parse_ir(text);
    int32_t a[2][3] = {{7, 9, 0}, {0, 0, 10}}, o[6] = {0};
    float f[2] = {0.0f, 1.25f}, of[2] = {0};
    ir_interp_arg args[4] = {
        ir_interp_array(TY_I32, a, 2, 2, 3, 0, 0), ir_interp_array(TY_F32, f, 1, 2, 0, 0, 0),
        ir_interp_array(TY_I32, o, 1, 6, 0, 0, 0), ir_interp_array(TY_F32, of, 1, 2, 0, 0, 0)};
    char err[512];
    cr_assert(ir_interp_run(m, "t", args, 4, err, sizeof err), "%s", err);
    ir_module_free(m);
    /* each atomic returns the element before its update */
    cr_expect_eq(o[0], 10);
    cr_expect_eq(o[1], 15);
    cr_expect_eq(a[1][2], 13);
    cr_expect_eq(o[2], 7);
    cr_expect_eq(a[0][0], 7);
    cr_expect_eq(o[3], 9);
    cr_expect_eq(a[0][1], 5);
    cr_expect_eq(o[4], 3);
    cr_expect_eq(o[5], 10); /* 2 < 3: the first arm */
    cr_expect_eq(of[0], 0.0f);
    cr_expect_eq(f32_bits(f[0]), f32_bits(0.0f)); /* min(0.0, -0.0) keeps the old value */
    cr_expect_eq(of[1], 1.25f);
    cr_expect_eq(f[1], 1.75f);
}

/* The documented order of a parallel task: row-major, one iteration after the other. */
Test(interp, parallel_runs_in_row_major_order) {
    static const char src[] = "kernel order(ctr: i32[], o: i32[,,]) {\n"
                              "    for i in 0..2, j in 0..3, k in 0..2 {\n"
                              "        o[i, j, k] = atomic_add(ctr[0], 1);\n"
                              "    }\n"
                              "}\n";
    compiled c = compile_src("order", src);
    ir_interp_arg in[2] = {arr(TY_I32, 1, 1, 0, 0), arr(TY_I32, 3, 2, 3, 2)};
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int32_t i = 0; i < 12; i++)
        I32(ref[1])[i] = i;
    I32(ref[0])[0] = 12;
    check_runs(&c, "order", in, ref, 2, 0, "2x3x2");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

/* ---- adstacks and atomic_xchg ------------------------------------------------------- */

/* Runs IR text with the given arguments; returns the error ("" on success). */
static bool run_text(const char *text, ir_interp_arg *args, int nargs, char *err, size_t errlen) {
    ir_module *m = parse_ir(text);
    bool ok = ir_interp_run(m, m->kernels->name, args, nargs, err, errlen);
    ir_module_free(m);
    return ok;
}

/* Pops return the values pushed, last first; each stack of the table is separate. */
Test(interp, adstack_pops_in_lifo_order) {
    const char *text = "kernel @t(%o: i32[], %of: f64[], %n: i32) {\n"
                       "  adstack i32 \"8\"\n"
                       "  adstack f64 \"(param 2)\"\n"
                       "  %z = const 0 : i32\n"
                       "  serial {\n"
                       "    %c1 = const 11 : i32\n"
                       "    %c2 = const 22 : i32\n"
                       "    %c3 = const 33 : i32\n"
                       "    %one = const 1 : i32\n"
                       "    %two = const 2 : i32\n"
                       "    %three = const 3 : i32\n"
                       "    adpush %c1, 0\n"
                       "    adpush %c2, 0\n"
                       "    for %j = %z to %n {\n"
                       "      %jj = mul %j, %j : i32\n"
                       "      %f = cast %jj : f64\n"
                       "      adpush %f, 1\n"
                       "      yield\n"
                       "    }\n"
                       "    adpush %c3, 0\n"
                       "    %p3 = adpop 0 : i32\n"
                       "    %p2 = adpop 0 : i32\n"
                       "    store %o[%z], %p3\n"
                       "    store %o[%one], %p2\n"
                       "    for %k = %z to %n {\n"
                       "      %g = adpop 1 : f64\n"
                       "      store %of[%k], %g\n"
                       "      yield\n"
                       "    }\n"
                       "    %p1 = adpop 0 : i32\n"
                       "    store %o[%two], %p1\n"
                       "  }\n"
                       "}\n";
    int32_t o[3] = {0};
    double of[5] = {0};
    ir_interp_arg args[3] = {ir_interp_array(TY_I32, o, 1, 3, 0, 0, 0),
                             ir_interp_array(TY_F64, of, 1, 5, 0, 0, 0), ir_interp_int(TY_I32, 5)};
    char err[512];
    cr_assert(run_text(text, args, 3, err, sizeof err), "%s", err);
    cr_expect_eq(o[0], 33);
    cr_expect_eq(o[1], 22);
    cr_expect_eq(o[2], 11);
    /* pushed 0, 1, 4, 9, 16: popped 16 first */
    const double want[5] = {16.0, 9.0, 4.0, 1.0, 0.0};
    for (int i = 0; i < 5; i++)
        cr_expect_eq(of[i], want[i], "of[%d] = %g, expected %g", i, of[i], want[i]);
}

/* Every parallel index runs with empty stacks, so each reads back only its own pushes,
 * here a triangular number of them (i + 1 for index i), more than the stack's first
 * allocation for the last items. */
Test(interp, adstack_per_work_item) {
    const char *text = "kernel @t(%x: f32[], %sum: f32[], %last: f32[]) {\n"
                       "  adstack f32 \"(dim 0 0)\"\n"
                       "  %z = const 0 : i32\n"
                       "  %one = const 1 : i32\n"
                       "  %n = dim %x, 0 : i32\n"
                       "  parallel (%i = %z to %n) {\n"
                       "    %hi = add %i, %one : i32\n"
                       "    for %j = %z to %hi {\n"
                       "      %v = load %x[%j] : f32\n"
                       "      adpush %v, 0\n"
                       "      yield\n"
                       "    }\n"
                       "    %first = adpop 0 : f32\n"
                       "    store %last[%i], %first\n"
                       "    %zf = const 0.0 : f32\n"
                       "    %s = for %j2 = %one to %hi iter(%acc = %first) : f32 {\n"
                       "      %w = adpop 0 : f32\n"
                       "      %acc2 = add %acc, %w : f32\n"
                       "      yield %acc2\n"
                       "    }\n"
                       "    store %sum[%i], %s\n"
                       "  }\n"
                       "}\n";
    enum { N = 40 };
    float x[N], sum[N] = {0}, last[N] = {0};
    for (int i = 0; i < N; i++)
        x[i] = (float)(i + 1) * 0.5f;
    ir_interp_arg args[3] = {ir_interp_array(TY_F32, x, 1, N, 0, 0, 0),
                             ir_interp_array(TY_F32, sum, 1, N, 0, 0, 0),
                             ir_interp_array(TY_F32, last, 1, N, 0, 0, 0)};
    char err[512];
    cr_assert(run_text(text, args, 3, err, sizeof err), "%s", err);
    for (int i = 0; i < N; i++) {
        /* pops x[i], x[i-1], ..., x[0], summed in that order in float */
        float s = x[i];
        for (int j = i - 1; j >= 0; j--)
            s += x[j];
        cr_expect_eq(last[i], x[i], "last[%d]", i);
        cr_expect_eq(sum[i], s, "sum[%d] = %g, expected %g", i, sum[i], s);
    }
}

/* A value left on a stack by one work item is not seen by the next: its pop finds the
 * stack empty, which is a run-time error naming the op, never a crash. */
Test(interp, adstack_empty_pop_is_an_error) {
    const char *par = "kernel @t(%o: f32[], %n: i32) {\n"
                      "  adstack f32 \"1\"\n"
                      "  %z = const 0 : i32\n"
                      "  parallel (%i = %z to %n) {\n"
                      "    %c = eq %i, %z : bool\n"
                      "    if %c {\n"
                      "      %v = const 1.5 : f32\n"
                      "      adpush %v, 0\n"
                      "      yield\n"
                      "    } else {\n"
                      "      %p = adpop 0 : f32 !11:7\n"
                      "      store %o[%i], %p\n"
                      "      yield\n"
                      "    }\n"
                      "  }\n"
                      "}\n";
    float o[2] = {0};
    ir_interp_arg args[2] = {ir_interp_array(TY_F32, o, 1, 2, 0, 0, 0), ir_interp_int(TY_I32, 2)};
    char err[512];
    cr_assert(!run_text(par, args, 2, err, sizeof err));
    cr_expect_str_eq(err, "11:7: @t: adpop: adstack 0 is empty (this work item popped more "
                          "values than it pushed)");
    /* one index alone runs: a value left on the stack at its end is no error */
    args[1] = ir_interp_int(TY_I32, 1);
    cr_expect(run_text(par, args, 2, err, sizeof err), "%s", err);

    const char *ser = "kernel @t(%x: i64) {\n"
                      "  adstack i64 \"1\"\n"
                      "  serial {\n"
                      "    adpush %x, 0\n"
                      "  }\n"
                      "  serial {\n"
                      "    %p = adpop 0 : i64 !7:5\n"
                      "  }\n"
                      "}\n";
    ir_interp_arg sargs[1] = {ir_interp_int(TY_I64, 3)};
    cr_assert(!run_text(ser, sargs, 1, err, sizeof err));
    cr_expect_str_eq(err, "7:5: @t: adpop: adstack 0 is empty (this work item popped more "
                          "values than it pushed)");
}

/* An undefined value (poison) keeps its poison through a push and a pop. */
Test(interp, adstack_carries_poison) {
    const char *text = "kernel @t(%x: f32, %o: i32[]) {\n"
                       "  adstack i32 \"1\"\n"
                       "  adstack i32 \"1\"\n"
                       "  serial {\n"
                       "    %z = const 0 : i32\n"
                       "    %p = cast %x : i32 !5:3\n"
                       "    %d = const 4 : i32\n"
                       "    adpush %p, 0\n"
                       "    adpush %d, 1\n"
                       "    %q = adpop 1 : i32\n"
                       "    store %o[%z], %q\n"
                       "    %r = adpop 0 : i32\n"
                       "    store %o[%z], %r !13:5\n"
                       "  }\n"
                       "}\n";
    int32_t o[1] = {0};
    ir_interp_arg args[2] = {ir_interp_float(TY_F32, 3e9),
                             ir_interp_array(TY_I32, o, 1, 1, 0, 0, 0)};
    char err[512];
    cr_assert(!run_text(text, args, 2, err, sizeof err));
    cr_expect_eq(o[0], 4); /* the defined value popped from the other stack was stored */
    const char *want = "13:5: @t: store: the stored value is undefined: it comes from an "
                       "out-of-range cast (f32 3000000000 to i32) at 5:3";
    cr_expect_str_eq(err, want);
}

/* atomic_xchg stores the new value and returns the old one, for every element type. */
Test(interp, atomic_xchg_returns_the_old_value) {
    const char *text = "kernel @t(%a: i32[], %u: u32[], %l: i64[,], %f: f32[], %d: f64[], "
                       "%o: f64[]) {\n"
                       "  %z = const 0 : i32\n"
                       "  %one = const 1 : i32\n"
                       "  %two = const 2 : i32\n"
                       "  %three = const 3 : i32\n"
                       "  %four = const 4 : i32\n"
                       "  serial {\n"
                       "    %vi = const -7 : i32\n"
                       "    %oi = atomic_xchg %a[%one], %vi : i32\n"
                       "    %oi2 = atomic_xchg %a[%one], %oi : i32\n"
                       "    %vu = const 4000000000 : u32\n"
                       "    %ou = atomic_xchg %u[%z], %vu : u32\n"
                       "    %vl = const -9000000000 : i64\n"
                       "    %ol = atomic_xchg %l[%one, %z], %vl : i64\n"
                       "    %vf = const -0.0 : f32\n"
                       "    %of = atomic_xchg %f[%z], %vf : f32\n"
                       "    %vd = const 0.1 : f64\n"
                       "    %od = atomic_xchg %d[%z], %vd : f64\n"
                       "    %c0 = cast %oi2 : f64\n"
                       "    %c1 = cast %ou : f64\n"
                       "    %c2 = cast %ol : f64\n"
                       "    %c3 = cast %of : f64\n"
                       "    store %o[%z], %c0\n"
                       "    store %o[%one], %c1\n"
                       "    store %o[%two], %c2\n"
                       "    store %o[%three], %c3\n"
                       "    store %o[%four], %od\n"
                       "  }\n"
                       "}\n";
    int32_t a[2] = {5, 6};
    uint32_t u[1] = {3000000000u};
    int64_t l[2][2] = {{1, 2}, {3, 4}};
    float f[1] = {2.5f};
    double d[1] = {-1.0}, o[5] = {0};
    ir_interp_arg args[6] = {
        ir_interp_array(TY_I32, a, 1, 2, 0, 0, 0), ir_interp_array(TY_U32, u, 1, 1, 0, 0, 0),
        ir_interp_array(TY_I64, l, 2, 2, 2, 0, 0), ir_interp_array(TY_F32, f, 1, 1, 0, 0, 0),
        ir_interp_array(TY_F64, d, 1, 1, 0, 0, 0), ir_interp_array(TY_F64, o, 1, 5, 0, 0, 0)};
    char err[512];
    cr_assert(run_text(text, args, 6, err, sizeof err), "%s", err);
    cr_expect_eq(o[0], -7.0); /* the second exchange returned what the first stored */
    cr_expect_eq(a[1], 6);    /* ... and put the original back */
    cr_expect_eq(a[0], 5);
    cr_expect_eq(o[1], 3000000000.0);
    cr_expect_eq(u[0], 4000000000u);
    cr_expect_eq(o[2], 3.0);
    cr_expect_eq(l[1][0], -9000000000LL);
    cr_expect_eq(l[0][0], 1);
    cr_expect_eq(o[3], 2.5);
    cr_expect_eq(f32_bits(f[0]), f32_bits(-0.0f));
    cr_expect_eq(o[4], -1.0);
    cr_expect_eq(d[0], 0.1);
}

Test(interp, speed) {
    static const char src[] = "kernel busy(out: f32[], n: i32) {\n"
                              "    for i in 0..len(out) {\n"
                              "        var s = 0.0;\n"
                              "        for j in 0..n {\n"
                              "            s += f32(j % 7) * 0.5;\n"
                              "        }\n"
                              "        out[i] = s;\n"
                              "    }\n"
                              "}\n";
    ir_module *m = compile_at("busy", src, 2);
    float out[100];
    ir_interp_arg args[2] = {ir_interp_array(TY_F32, out, 1, 100, 0, 0, 0),
                             ir_interp_int(TY_I32, 20000)};
    ir_interp_options o = {0, 0, 0, 0};
    char err[256];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert(ir_interp_run_opts(m, "busy", args, 2, &o, err, sizeof err), "%s", err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ir_module_free(m);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    float s = 0.0f;
    for (int32_t j = 0; j < 20000; j++)
        s += (float)(j % 7) * 0.5f;
    cr_expect_eq(out[99], s);
    cr_expect_geq(o.ops_executed, 100u * 20000u * 5u);
    fprintf(stderr, "interp speed: %llu ops in %.3f s (%.1f M ops/s)\n",
            (unsigned long long)o.ops_executed, secs, (double)o.ops_executed / secs / 1e6);
}

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

Test(interp, error_store_out_of_bounds) {
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

Test(interp, error_load_out_of_bounds_names_the_dimension) {
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

Test(interp, error_negative_index) {
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

Test(interp, error_division_by_zero) {
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

Test(interp, error_shift_out_of_range) {
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
Test(interp, error_cast_out_of_range_is_undefined_where_used) {
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

Test(interp, guarded_out_of_range_cast_is_not_an_error) {
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
Test(interp, poison_propagation) {
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

Test(interp, error_while_does_not_terminate) {
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

Test(interp, error_bad_arguments) {
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

Test(interp, error_ir_that_does_not_verify) {
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

/* ======================================================================================
 * Programs aimed at the passes: identities on special values, folding of inlined calls
 * ==================================================================================== */

/* The float identities simplify applies (and ones it must not), on -0.0, inf and NaN. */
static const char fid_src[] = "kernel fid(x: f32[], y: f32[], o: f32[,]) {\n"
                              "    for i in 0..len(x) {\n"
                              "        let a = x[i];\n"
                              "        let b = y[i];\n"
                              "        o[i, 0] = a * 1.0;\n"
                              "        o[i, 1] = a / 1.0;\n"
                              "        o[i, 2] = a + -0.0;\n"
                              "        o[i, 3] = a - 0.0;\n"
                              "        o[i, 4] = a * -1.0;\n"
                              "        o[i, 5] = a / -1.0;\n"
                              "        o[i, 6] = -0.0 - a;\n"
                              "        o[i, 7] = -(-a);\n"
                              "        o[i, 8] = abs(-a);\n"
                              "        o[i, 9] = min(a, a) + max(b, b);\n"
                              "        o[i, 10] = a > b ? a : b;\n"
                              "        o[i, 11] = a + 0.0;\n"
                              "        o[i, 12] = 0.0 - a;\n"
                              "        o[i, 13] = select(!(a < b), a, b);\n"
                              "        o[i, 14] = 1.0 * a + 0.0 * b;\n"
                              "        o[i, 15] = a == a ? 1.0 : 0.0;\n"
                              "        o[i, 16] = a - a;\n"
                              "        o[i, 17] = min(a, b) - max(a, b) + min(b, a);\n"
                              "    }\n"
                              "}\n";

static float min0f(float a, float b) { return b < a ? b : a; }
static float max0f(float a, float b) { return b > a ? b : a; }

Test(interp, float_identities_on_special_values) {
    compiled c = compile_src("fid", fid_src);
    float sp[] = {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-45f, 3.5f};
    int64_t ns = sizeof sp / sizeof sp[0], n = ns * ns, W = 18;
    ir_interp_arg in[3] = {arr(TY_F32, 1, n, 0, 0), arr(TY_F32, 1, n, 0, 0),
                           arr(TY_F32, 2, n, W, 0)};
    for (int64_t i = 0; i < n; i++)
        F32(in[0])[i] = sp[i / ns], F32(in[1])[i] = sp[i % ns];
    ir_interp_arg ref[3];
    clone_args(ref, in, 3);
    for (int64_t i = 0; i < n; i++) {
        float a = F32(ref[0])[i], b = F32(ref[1])[i], *o = F32(ref[2]) + i * W;
        o[0] = a * 1.0f;
        o[1] = a / 1.0f;
        o[2] = a + -0.0f;
        o[3] = a - 0.0f;
        o[4] = a * -1.0f;
        o[5] = a / -1.0f;
        o[6] = -0.0f - a;
        o[7] = -(-a);
        o[8] = fabsf(-a);
        o[9] = min0f(a, a) + max0f(b, b);
        o[10] = a > b ? a : b;
        o[11] = a + 0.0f;
        o[12] = 0.0f - a;
        o[13] = !(a < b) ? a : b;
        o[14] = 1.0f * a + 0.0f * b;
        o[15] = a == a ? 1.0f : 0.0f;
        o[16] = a - a;
        o[17] = min0f(a, b) - max0f(a, b) + min0f(b, a);
    }
    check_runs(&c, "fid", in, ref, 3, 0, "all pairs of special values");
    free_args(in, 3);
    free_args(ref, 3);
    compiled_free(&c);
}

/* Funcs inlined with constant arguments, so that fold evaluates at -O2 what -O0 runs. */
static const char folds_src[] =
    "func fi(a: i32, b: i32) -> i32 {\n"
    "    return a * 65537 + (a << 3) - (a >> 2) / 3 % 5 + (b ^ ~a) - abs(a) * sign(b)\n"
    "        + min(a, b) - max(b, -a) + clamp(a, b, 100);\n"
    "}\n"
    "func fu(a: u32, b: u32) -> u32 {\n"
    "    return a * 3 / 7 + (a >> 31) + a % 10 - b + (b << 4) + min(a, b) + max(a, b)\n"
    "        + (a > b ? a - b : b - a);\n"
    "}\n"
    "func fl(a: i64, b: i64) -> i64 {\n"
    "    return a * 3037000493 - (a >> 17) + b % 1000 - (a ^ b) + (b << 20) - min(a, b);\n"
    "}\n"
    "func ff(x: f32, y: f32) -> f32 {\n"
    "    return sin(x) * cos(y) + sqrt(abs(x)) / (y * y + 1.0) - exp(-x) + pow(2.0, y)\n"
    "        + atan2(x, y) + floor(x) - round(y) + fma(x, y, 0.5) + min(x, y) - max(x, -y)\n"
    "        + clamp(x, -1.0, 1.0) + sign(y) + tanh(x) * log(2.0 + abs(y)) + rsqrt(1.0 + x * x);\n"
    "}\n"
    "func fd(x: f64, y: f64) -> f64 {\n"
    "    return sin(x) * cos(y) + sqrt(abs(x)) / (y * y + 1.0) - exp(-x) + pow(2.0, y)\n"
    "        + atan2(x, y) + floor(x) - round(y) + fma(x, y, 0.5) + min(x, y) - max(x, -y)\n"
    "        + clamp(x, -1.0, 1.0) + sign(y) + tanh(x) * log(2.0 + abs(y)) + rsqrt(1.0 + x * x);\n"
    "}\n"
    "func fc(x: f32) -> i32 {\n"
    "    return i32(x) + i32(f64(x) * 2.0) + i32(u32(abs(x))) + i32(bool(x)) + i32(i64(x) >> 1)\n"
    "        + i32(f32(i32(x) * 3)) + i32(u32(i32(x) - 5));\n"
    "}\n"
    "kernel folds(xi: i32[], xu: u32[], xl: i64[], xf: f32[], xd: f64[], oi: i32[], ou: u32[],\n"
    "             ol: i64[], of: f32[], od: f64[]) {\n"
    "    for i in 0..len(oi) {\n"
    "        oi[i] = fi(2147483647, -3) + fi(-2147483648, 7) + fi(xi[i], 5) + fi(0, 0)\n"
    "            + fi(xi[i], xi[i]) + fc(1.5) + fc(-2.5) + fc(xf[i]) + fc(-0.0);\n"
    "        ou[i] = fu(4294967295, 1) + fu(0, 4294967295) + fu(xu[i], 3) + fu(xu[i], xu[i]);\n"
    "        ol[i] = fl(-9223372036854775807 - 1, 3) + fl(9223372036854775807, -1)\n"
    "            + fl(xl[i], 12345) + fl(xl[i], xl[i]);\n"
    "        of[i] = ff(0.5, -0.25) + ff(-0.0, 0.0) + ff(xf[i], 0.75) + ff(xf[i], xf[i]);\n"
    "        od[i] = fd(0.5, -0.25) + fd(-0.0, 0.0) + fd(xd[i], 0.75) + fd(xd[i], xd[i]);\n"
    "    }\n"
    "}\n";

static int32_t r_fi(int32_t a, int32_t b) {
    int32_t absa = a < 0 ? neg32(a) : a, sgb = (b > 0) - (b < 0);
    int32_t mn = b < a ? b : a, na = neg32(a), mx = na > b ? na : b;
    int32_t cl = b > a ? b : a;
    cl = 100 < cl ? 100 : cl;
    int32_t t = add32((int32_t)((uint32_t)a * 65537u), shl32(a, 3));
    t = add32(t, neg32(sar32(a, 2) / 3 % 5));
    t = add32(t, b ^ ~a);
    t = add32(t, neg32((int32_t)((uint32_t)absa * (uint32_t)sgb)));
    return add32(add32(add32(t, mn), neg32(mx)), cl);
}

static uint32_t r_fu(uint32_t a, uint32_t b) {
    return a * 3u / 7u + (a >> 31) + a % 10u - b + (b << 4) + (b < a ? b : a) + (b > a ? b : a) +
           (a > b ? a - b : b - a);
}

static int64_t r_fl(int64_t a, int64_t b) {
    int64_t t = sub64(mul64(a, 3037000493LL), sar64(a, 17));
    t = add64(t, b % 1000);
    t = sub64(t, a ^ b);
    t = add64(t, (int64_t)((uint64_t)b << 20));
    return sub64(t, b < a ? b : a);
}

static float r_ff(float x, float y) {
    float cl = -1.0f > x ? -1.0f : x;
    cl = 1.0f < cl ? 1.0f : cl;
    return sinf(x) * cosf(y) + sqrtf(fabsf(x)) / (y * y + 1.0f) - expf(-x) + powf(2.0f, y) +
           atan2f(x, y) + floorf(x) - roundf(y) + fmaf(x, y, 0.5f) + min0f(x, y) - max0f(x, -y) +
           cl + sign_f32(y) + tanhf(x) * logf(2.0f + fabsf(y)) + 1.0f / sqrtf(1.0f + x * x);
}

static double r_fd(double x, double y) {
    double cl = -1.0 > x ? -1.0 : x;
    cl = 1.0 < cl ? 1.0 : cl;
    double mn = y < x ? y : x, mx = -y > x ? -y : x;
    double sg = y > 0 ? 1.0 : y < 0 ? -1.0 : y;
    return sin(x) * cos(y) + sqrt(fabs(x)) / (y * y + 1.0) - exp(-x) + pow(2.0, y) + atan2(x, y) +
           floor(x) - round(y) + fma(x, y, 0.5) + mn - mx + cl + sg + tanh(x) * log(2.0 + fabs(y)) +
           1.0 / sqrt(1.0 + x * x);
}

static int32_t r_fc(float x) {
    int32_t ix = (int32_t)x;
    int32_t t = add32(ix, (int32_t)((double)x * 2.0));
    t = add32(t, (int32_t)(uint32_t)fabsf(x));
    t = add32(t, x != 0.0f);
    t = add32(t, (int32_t)sar64((int64_t)x, 1));
    t = add32(t, (int32_t)(float)(int32_t)((uint32_t)ix * 3u));
    return add32(t, (int32_t)((uint32_t)ix - 5u));
}

Test(interp, folding_of_inlined_constant_calls) {
    compiled c = compile_src("folds", folds_src);
    rng r = {113};
    int64_t n = 24;
    ir_interp_arg in[10];
    kern_tykind kinds[5] = {TY_I32, TY_U32, TY_I64, TY_F32, TY_F64};
    for (int k = 0; k < 10; k++)
        in[k] = arr(kinds[k % 5], 1, n, 0, 0);
    for (int64_t i = 0; i < n; i++) {
        I32(in[0])[i] = i == 0 ? INT32_MIN : i == 1 ? INT32_MAX : (int32_t)rng_next(&r);
        U32(in[1])[i] = i == 0 ? UINT32_MAX : (uint32_t)rng_next(&r);
        I64(in[2])[i] = i == 0 ? INT64_MIN : (int64_t)rng_next(&r);
        F32(in[3])[i] = i == 0 ? -0.0f : rng_f32(&r, -100, 100);
        F64(in[4])[i] = i == 0 ? -0.0 : (rng_unit(&r) - 0.5) * 200;
    }
    ir_interp_arg ref[10];
    clone_args(ref, in, 10);
    for (int64_t i = 0; i < n; i++) {
        int32_t xi = I32(ref[0])[i];
        uint32_t xu = U32(ref[1])[i];
        int64_t xl = I64(ref[2])[i];
        float xf = F32(ref[3])[i];
        double xd = F64(ref[4])[i];
        int32_t oi = add32(r_fi(INT32_MAX, -3), r_fi(INT32_MIN, 7));
        oi = add32(add32(add32(oi, r_fi(xi, 5)), r_fi(0, 0)), r_fi(xi, xi));
        oi = add32(add32(add32(add32(oi, r_fc(1.5f)), r_fc(-2.5f)), r_fc(xf)), r_fc(-0.0f));
        I32(ref[5])[i] = oi;
        U32(ref[6])[i] = r_fu(UINT32_MAX, 1) + r_fu(0, UINT32_MAX) + r_fu(xu, 3) + r_fu(xu, xu);
        I64(ref[7])
        [i] = add64(add64(add64(r_fl(INT64_MIN, 3), r_fl(INT64_MAX, -1)), r_fl(xl, 12345)),
                    r_fl(xl, xl));
        F32(ref[8])[i] = r_ff(0.5f, -0.25f) + r_ff(-0.0f, 0.0f) + r_ff(xf, 0.75f) + r_ff(xf, xf);
        F64(ref[9])[i] = r_fd(0.5, -0.25) + r_fd(-0.0, 0.0) + r_fd(xd, 0.75) + r_fd(xd, xd);
    }
    /* clang rewrites libm calls of the reference (e.g. powf(2, y) -> exp2f(y)): 1 ulp */
    check_runs(&c, "folds", in, ref, 10, 1e-6, "constant and random arguments");
    free_args(in, 10);
    free_args(ref, 10);
    compiled_free(&c);
}

/* KNOWN BUG (passes/simplify.c), kept failing on purpose until fixed: simplify rewrites
 * x * -1.0, x / -1.0 and (-0.0) - x into neg x and claims "the same bits afterwards
 * (IEEE-754 included: ... NaN)". For a NaN x the bits differ: mul/div/sub return the NaN
 * operand (x86, ARM without default-NaN; the interpreter computes them in C), neg flips
 * its sign bit. So -O0 stores 0x7fc00000 and -O2 0xffc00000 for x = NaN. Either the
 * claim should exclude the sign of NaN results (IEEE 754 leaves it unspecified for these
 * ops; gcc itself folds x * -1.0 into -x by default) or the rewrites must go. The other
 * tests compare NaNs without their sign bit. */
/* simplify turns x * -1.0 into neg x. IEEE 754 leaves the sign of a NaN result of a
 * multiplication unspecified (x86 keeps the operand's sign, neg flips it), so -O0 and -O2
 * may differ in that bit only: both must be NaN. */
Test(interp, neg_identities_keep_nan) {
    static const char src[] = "kernel negid(x: f32[], o: f32[]) {\n"
                              "    for i in 0..len(x) {\n"
                              "        o[i] = x[i] * -1.0;\n"
                              "    }\n"
                              "}\n";
    compiled c = compile_src("negid", src);
    float x[1] = {NAN}, o[2][1];
    for (int l = 0; l < 2; l++) {
        ir_interp_arg args[2] = {ir_interp_array(TY_F32, x, 1, 1, 0, 0, 0),
                                 ir_interp_array(TY_F32, o[l], 1, 1, 0, 0, 0)};
        char err[256];
        cr_assert(ir_interp_run(c.m[l], "negid", args, 2, err, sizeof err), "%s", err);
    }
    volatile float minus_one = -1.0f; /* gcc folds NAN * -1.0f into -NAN at compile time */
    cr_expect_eq(f32_bits(o[0][0]), f32_bits(x[0] * minus_one), "-O0 computes x * -1.0");
    cr_expect(isnan(o[1][0]), "-O2 gives 0x%08x for x = NaN", f32_bits(o[1][0]));
    cr_expect_eq(f32_bits(o[1][0]) & 0x7fffffffu, f32_bits(o[0][0]) & 0x7fffffffu,
                 "the NaN payload survives");
    compiled_free(&c);
}

/* ======================================================================================
 * Side effects in conditions, lazy calls, serial multi-range loops with break/continue
 * ==================================================================================== */

/* The while condition has a side effect (an atomic): after a break it must not run again;
 * a lazy && must not run its atomic when the left side is false; a func with a store
 * called on one side of ?: runs only when chosen. */
static const char effects_src[] =
    "func take(a: i32[], i: i32) -> i32 {\n"
    "    a[i] += 10;\n"
    "    return a[i];\n"
    "}\n"
    "\n"
    "kernel effects(x: f32[], cnt: i32[], hits: i32[], got: i32[], k_out: i32[]) {\n"
    "    for i in 0..len(x) {\n"
    "        var k = 0;\n"
    "        while atomic_add(cnt[i], 1) < 10 {\n"
    "            if f32(k) > x[i] {\n"
    "                break;\n"
    "            }\n"
    "            k += 1;\n"
    "        }\n"
    "        k_out[i] = k;\n"
    "        if x[i] > 2.0 && atomic_add(hits[0], 1) < 1000 {\n"
    "            hits[1] += 1;\n"
    "        }\n"
    "        got[i] = x[i] < 3.0 ? take(got, i) : -1;\n"
    "    }\n"
    "}\n";

Test(interp, side_effects_in_conditions_and_lazy_calls) {
    compiled c = compile_src("effects", effects_src);
    rng r = {114};
    int64_t n = 25;
    ir_interp_arg in[5] = {arr(TY_F32, 1, n, 0, 0), arr(TY_I32, 1, n, 0, 0),
                           arr(TY_I32, 1, 2, 0, 0), arr(TY_I32, 1, n, 0, 0),
                           arr(TY_I32, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++) {
        F32(in[0])[i] = rng_f32(&r, -1, 12);
        I32(in[1])[i] = (int32_t)rng_int(&r, 0, 12);
        I32(in[3])[i] = (int32_t)i;
    }
    ir_interp_arg ref[5];
    clone_args(ref, in, 5);
    int32_t *cnt = I32(ref[1]), *hits = I32(ref[2]), *got = I32(ref[3]);
    for (int64_t i = 0; i < n; i++) {
        float xi = F32(ref[0])[i];
        int32_t k = 0;
        while (cnt[i]++ < 10) {
            if ((float)k > xi)
                break;
            k += 1;
        }
        I32(ref[4])[i] = k;
        if (xi > 2.0f && hits[0]++ < 1000)
            hits[1] += 1;
        if (xi < 3.0f) {
            got[i] += 10;
            got[i] = got[i];
        } else {
            got[i] = -1;
        }
    }
    check_runs(&c, "effects", in, ref, 5, 0, "random");
    free_args(in, 5);
    free_args(ref, 5);
    compiled_free(&c);
}

/* break and continue in a serial multi-range for apply to the innermost range; a return
 * from two nested whiles in a func; shadowing of a carried variable inside a loop. */
static const char multi_break_src[] = "func depth(v: i32) -> i32 {\n"
                                      "    var a = 0;\n"
                                      "    while a < 10 {\n"
                                      "        var b = 0;\n"
                                      "        while b < 10 {\n"
                                      "            if a * 10 + b == v {\n"
                                      "                return a * 100 + b;\n"
                                      "            }\n"
                                      "            b += 3;\n"
                                      "        }\n"
                                      "        a += 1;\n"
                                      "    }\n"
                                      "    return -1;\n"
                                      "}\n"
                                      "\n"
                                      "kernel mb(a: i32[,], out: i32[,]) {\n"
                                      "    for r in 0..shape(out, 0) {\n"
                                      "        var s = 0;\n"
                                      "        var x = 1;\n"
                                      "        for i in 0..shape(a, 0), j in 0..shape(a, 1) {\n"
                                      "            if a[i, j] == r {\n"
                                      "                continue;\n"
                                      "            }\n"
                                      "            if a[i, j] > 7 + r {\n"
                                      "                break;\n"
                                      "            }\n"
                                      "            s += a[i, j] * (i + 1);\n"
                                      "            var x = x * 2;\n"
                                      "            x += j;\n"
                                      "            s += x;\n"
                                      "        }\n"
                                      "        x /= 1 + r;\n"
                                      "        out[r, 0] = s;\n"
                                      "        out[r, 1] = x;\n"
                                      "        out[r, 2] = depth(s % 100) + depth(r * 11);\n"
                                      "    }\n"
                                      "}\n";

static int32_t r_depth(int32_t v) {
    for (int32_t a = 0; a < 10; a++)
        for (int32_t b = 0; b < 10; b += 3)
            if (a * 10 + b == v)
                return a * 100 + b;
    return -1;
}

Test(interp, serial_multi_range_break_continue_and_nested_return) {
    compiled c = compile_src("mb", multi_break_src);
    rng r = {115};
    int64_t R = 5, C = 6, NR = 6;
    ir_interp_arg in[2] = {arr(TY_I32, 2, R, C, 0), arr(TY_I32, 2, NR, 3, 0)};
    for (int64_t i = 0; i < R * C; i++)
        I32(in[0])[i] = (int32_t)rng_int(&r, 0, 12);
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int32_t rr = 0; rr < NR; rr++) {
        int32_t s = 0, x = 1;
        for (int32_t i = 0; i < R; i++)
            for (int32_t j = 0; j < C; j++) {
                int32_t v = I32(ref[0])[i * C + j];
                if (v == rr)
                    continue;
                if (v > 7 + rr)
                    break;
                s += v * (i + 1);
                int32_t xi = x * 2;
                xi += j;
                s += xi;
            }
        x /= 1 + rr;
        I32(ref[1])[rr * 3 + 0] = s;
        I32(ref[1])[rr * 3 + 1] = x;
        I32(ref[1])[rr * 3 + 2] = r_depth(s % 100) + r_depth(rr * 11);
    }
    check_runs(&c, "mb", in, ref, 2, 0, "random");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

/* Loads are not merged across stores and atomics (CSE), and stored values are reloaded. */
static const char reload_src[] = "kernel reload(x: f32[], o: f32[]) {\n"
                                 "    for i in 0..len(x) {\n"
                                 "        let a = x[i];\n"
                                 "        x[i] = a * 2.0;\n"
                                 "        let b = x[i];\n"
                                 "        atomic_add(x[i], 1.0);\n"
                                 "        let c = x[i];\n"
                                 "        x[i] -= 0.5;\n"
                                 "        o[i] = a + b + c + x[i] + f32(len(x)) + f32(len(x));\n"
                                 "    }\n"
                                 "}\n";

Test(interp, loads_see_earlier_stores) {
    compiled c = compile_src("reload", reload_src);
    rng r = {116};
    int64_t n = 9;
    ir_interp_arg in[2] = {arr(TY_F32, 1, n, 0, 0), arr(TY_F32, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++)
        F32(in[0])[i] = rng_f32(&r, -4, 4);
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int64_t i = 0; i < n; i++) {
        float *x = F32(ref[0]);
        float a = x[i];
        x[i] = a * 2.0f;
        float b = x[i];
        x[i] = x[i] + 1.0f;
        float cc = x[i];
        x[i] = x[i] - 0.5f;
        F32(ref[1])[i] = a + b + cc + x[i] + (float)n + (float)n;
    }
    check_runs(&c, "reload", in, ref, 2, 0, "random");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

/* ======================================================================================
 * Random programs: -O0 against -O2
 * ==================================================================================== */

/* A generator of random, well-defined kernels (every division has a divisor in 1..8,
 * shift counts and indices are masked, every while loop has a counter bound), exercising
 * nested control flow with break/continue, funcs with early returns, lazy operators and
 * floats. The -O0 and -O2 runs of each must agree (NaNs compared without their bits). */
typedef struct gen {
    rng r;
    kern_buf b;
    int nint, nflt; /* int vars v0.., float vars f0.. in scope */
    int loop_depth; /* serial loops around the statement */
    int loop_vars;  /* loop indices j0.. in scope */
    int wcount;     /* while counters made so far */
    bool in_func;
} gen;

static int gpick(gen *g, int n) { return (int)(rng_next(&g->r) % (uint64_t)n); }

static void gen_iexpr(gen *g, int depth);

static void gen_iatom(gen *g) {
    int k = gpick(g, 8);
    if (k == 0 || (k == 1 && g->loop_vars == 0)) /* typed: literal-only expressions are
                                                   exact constants that must fit i32 */
        buf_printf(&g->b, "i32(%d)", gpick(g, 41) - 20);
    else if (k == 1)
        buf_printf(&g->b, "j%d", gpick(g, g->loop_vars));
    else if (k == 2)
        buf_puts(&g->b, g->in_func ? "p" : "i");
    else if (k == 3 && !g->in_func)
        buf_printf(&g->b, "a[(v%d) & 7]", gpick(g, g->nint));
    else if (k == 6)
        buf_puts(&g->b, "i32(u0 % u32(1000))");
    else if (k == 7)
        buf_puts(&g->b, "i32(l0 % i64(1000))");
    else
        buf_printf(&g->b, "v%d", gpick(g, g->nint));
}

static void gen_cond(gen *g, int depth) {
    int k = depth <= 0 ? 0 : gpick(g, 5);
    static const char *const cmp[] = {"<", "<=", ">", ">=", "==", "!="};
    if (k <= 1) {
        buf_putc(&g->b, '(');
        gen_iexpr(g, depth - 1);
        buf_printf(&g->b, " %s ", cmp[gpick(g, 6)]);
        gen_iexpr(g, depth - 1);
        buf_putc(&g->b, ')');
    } else if (k == 2) {
        buf_putc(&g->b, '(');
        gen_cond(g, depth - 1);
        buf_puts(&g->b, gpick(g, 2) ? " && " : " || ");
        gen_cond(g, depth - 1);
        buf_putc(&g->b, ')');
    } else if (k == 3) {
        buf_puts(&g->b, "!");
        gen_cond(g, depth - 1);
    } else {
        buf_printf(&g->b, "(f%d < ", gpick(g, g->nflt));
        buf_printf(&g->b, "%d.5)", gpick(g, 9) - 4);
    }
}

static void gen_iexpr(gen *g, int depth) {
    if (depth <= 0) {
        gen_iatom(g);
        return;
    }
    int k = gpick(g, 13);
    static const char *const ops[] = {"+", "-", "*", "&", "|", "^"};
    buf_putc(&g->b, '(');
    if (k < 6) {
        gen_iexpr(g, depth - 1);
        buf_printf(&g->b, " %s ", ops[k]);
        gen_iexpr(g, depth - 1);
    } else if (k == 6) {
        gen_iexpr(g, depth - 1);
        buf_puts(&g->b, gpick(g, 2) ? " / " : " % ");
        buf_puts(&g->b, "(((");
        gen_iexpr(g, depth - 1);
        buf_puts(&g->b, ") & 7) + 1)");
    } else if (k == 7) {
        gen_iexpr(g, depth - 1);
        buf_puts(&g->b, gpick(g, 2) ? " << (" : " >> (");
        gen_iexpr(g, depth - 1);
        buf_puts(&g->b, " & 31)");
    } else if (k == 8) {
        gen_cond(g, depth - 1);
        buf_puts(&g->b, " ? ");
        gen_iexpr(g, depth - 1);
        buf_puts(&g->b, " : ");
        gen_iexpr(g, depth - 1);
    } else if (k == 9) {
        static const char *const fn[] = {"min", "max"};
        buf_printf(&g->b, "%s(", fn[gpick(g, 2)]);
        gen_iexpr(g, depth - 1);
        buf_puts(&g->b, ", ");
        gen_iexpr(g, depth - 1);
        buf_putc(&g->b, ')');
    } else if (k == 10) {
        buf_puts(&g->b, gpick(g, 2) ? "abs(" : "-(");
        gen_iexpr(g, depth - 1);
        buf_putc(&g->b, ')');
    } else if (k == 11 && !g->in_func) {
        buf_printf(&g->b, "g%d(", gpick(g, 2));
        gen_iexpr(g, depth - 1);
        buf_puts(&g->b, ", ");
        gen_iexpr(g, depth - 1);
        buf_putc(&g->b, ')');
    } else {
        buf_printf(&g->b, "i32(clamp(f%d * 0.25, -1000.0, 1000.0))", gpick(g, g->nflt));
    }
    buf_putc(&g->b, ')');
}

static void gen_fexpr(gen *g, int depth) {
    int k = depth <= 0 ? gpick(g, 3) : gpick(g, 9);
    if (k == 0)
        buf_printf(&g->b, "f%d", gpick(g, g->nflt));
    else if (k == 1)
        buf_printf(&g->b, "%d.25", gpick(g, 9) - 4);
    else if (k == 2)
        buf_printf(&g->b, "f32(v%d %% 100)", gpick(g, g->nint));
    else if (k <= 5) {
        static const char *const ops[] = {"+", "-", "*"};
        buf_putc(&g->b, '(');
        gen_fexpr(g, depth - 1);
        buf_printf(&g->b, " %s ", ops[k - 3]);
        gen_fexpr(g, depth - 1);
        buf_putc(&g->b, ')');
    } else if (k == 6) {
        static const char *const fn[] = {"sin", "abs", "floor", "round", "sign", "tanh"};
        buf_printf(&g->b, "%s(", fn[gpick(g, 6)]);
        gen_fexpr(g, depth - 1);
        buf_putc(&g->b, ')');
    } else if (k == 7) {
        static const char *const fn[] = {"min", "max"};
        buf_printf(&g->b, "%s(", fn[gpick(g, 2)]);
        gen_fexpr(g, depth - 1);
        buf_puts(&g->b, ", ");
        gen_fexpr(g, depth - 1);
        buf_putc(&g->b, ')');
    } else {
        buf_putc(&g->b, '(');
        gen_cond(g, depth - 1);
        buf_puts(&g->b, " ? ");
        gen_fexpr(g, depth - 1);
        buf_puts(&g->b, " : ");
        gen_fexpr(g, depth - 1);
        buf_putc(&g->b, ')');
    }
}

static void gen_indent(gen *g, int ind) {
    for (int k = 0; k < ind; k++)
        buf_puts(&g->b, "    ");
}

static void gen_block(gen *g, int ind, int depth, int nstmts);

static void gen_stmt(gen *g, int ind, int depth) {
    int k = gpick(g, depth > 0 ? 16 : 4);
    if (depth <= 0 && k == 3 && g->loop_depth == 0)
        k = 0; /* no compound statement at depth 0 */
    gen_indent(g, ind);
    if (k >= 12) {
        /* u32 and i64 updates, a store to this thread's row of t, a shared atomic */
        static const char *const ops[] = {"+", "-", "*", "^", "|", "&"};
        if (k == 12 || (k >= 14 && g->in_func)) {
            buf_puts(&g->b, "u0 = ");
            int o = gpick(g, 9);
            if (o < 6)
                buf_printf(&g->b, "u0 %s u32(", ops[o]);
            else if (o == 6)
                buf_puts(&g->b, "u0 / ((u0 & u32(7)) + u32(1)) + u32(");
            else if (o == 7)
                buf_puts(&g->b, "(u0 >> (u32(7) & u0)) * u32(2654435761) + u32(");
            else
                buf_puts(&g->b, "(u0 > u32(2147483648) ? u0 - u32(1) : u0 << u32(3)) + u32(");
        } else if (k == 13) {
            buf_puts(&g->b, "l0 = ");
            int o = gpick(g, 8);
            if (o < 6)
                buf_printf(&g->b, "l0 %s i64(", ops[o]);
            else if (o == 6)
                buf_puts(&g->b, "l0 * i64(6364136223846793005) + i64(");
            else
                buf_puts(&g->b, "(l0 >> (l0 & i64(63))) - (l0 / ((l0 & i64(7)) + i64(1))) + i64(");
        } else if (k == 14) {
            buf_puts(&g->b, "t[i, (");
            gen_iexpr(g, 1);
            buf_puts(&g->b, ") & 3] = (");
        } else {
            buf_printf(&g->b, "atomic_%s(cnt[%d], (", gpick(g, 2) ? "add" : "max", gpick(g, 2));
        }
        gen_iexpr(g, 2);
        buf_puts(&g->b, k == 15 && !g->in_func ? "));\n" : ");\n");
    } else if (k <= 1) {
        buf_printf(&g->b, "v%d %s ", gpick(g, g->nint), gpick(g, 3) ? "=" : "+=");
        gen_iexpr(g, 2);
        buf_puts(&g->b, ";\n");
    } else if (k == 2) {
        buf_printf(&g->b, "f%d = ", gpick(g, g->nflt));
        gen_fexpr(g, 2);
        buf_puts(&g->b, ";\n");
    } else if (k == 3 && g->loop_depth > 0) {
        buf_puts(&g->b, "if ");
        gen_cond(g, 1);
        buf_puts(&g->b, gpick(g, 2) ? " {\n" : " {\n");
        gen_indent(g, ind + 1);
        buf_puts(&g->b, gpick(g, 2) ? "break;\n" : "continue;\n");
        gen_indent(g, ind);
        buf_puts(&g->b, "}\n");
    } else if (k == 4 && g->in_func) {
        buf_puts(&g->b, "if ");
        gen_cond(g, 1);
        buf_puts(&g->b, " {\n");
        gen_indent(g, ind + 1);
        buf_puts(&g->b, "return ");
        gen_iexpr(g, 1);
        buf_puts(&g->b, ";\n");
        gen_indent(g, ind);
        buf_puts(&g->b, "}\n");
    } else if (k <= 6) {
        buf_puts(&g->b, "if ");
        gen_cond(g, 2);
        buf_puts(&g->b, " {\n");
        gen_block(g, ind + 1, depth - 1, 1 + gpick(g, 3));
        gen_indent(g, ind);
        if (gpick(g, 2)) {
            buf_puts(&g->b, "} else {\n");
            gen_block(g, ind + 1, depth - 1, 1 + gpick(g, 3));
            gen_indent(g, ind);
        }
        buf_puts(&g->b, "}\n");
    } else if (k <= 8) {
        int j = g->loop_vars;
        buf_printf(&g->b, "for j%d in %d..", j, gpick(g, 5) - 2);
        if (gpick(g, 2))
            buf_printf(&g->b, "%d", gpick(g, 6) - 1);
        else
            buf_printf(&g->b, "(v%d & 3)", gpick(g, g->nint));
        buf_puts(&g->b, " {\n");
        g->loop_vars++;
        g->loop_depth++;
        gen_block(g, ind + 1, depth - 1, 1 + gpick(g, 4));
        g->loop_depth--;
        g->loop_vars--;
        gen_indent(g, ind);
        buf_puts(&g->b, "}\n");
    } else if (k <= 10) {
        int w = g->wcount++;
        buf_printf(&g->b, "var w%d = 0;\n", w);
        gen_indent(g, ind);
        buf_printf(&g->b, "while w%d < %d && ", w, 1 + gpick(g, 5));
        gen_cond(g, 1);
        buf_puts(&g->b, " {\n");
        gen_indent(g, ind + 1);
        buf_printf(&g->b, "w%d += 1;\n", w);
        g->loop_depth++;
        gen_block(g, ind + 1, depth - 1, 1 + gpick(g, 4));
        g->loop_depth--;
        gen_indent(g, ind);
        buf_puts(&g->b, "}\n");
    } else if (!g->in_func) {
        buf_puts(&g->b, "o[i] += ");
        gen_iexpr(g, 1);
        buf_puts(&g->b, ";\n");
    }
}

static void gen_block(gen *g, int ind, int depth, int nstmts) {
    for (int s = 0; s < nstmts; s++)
        gen_stmt(g, ind, depth);
}

static char *gen_program(uint64_t seed) {
    gen g = {{seed}, {0}, 0, 0, 0, 0, 0, false};
    for (int f = 0; f < 2; f++) {
        buf_printf(&g.b, "func g%d(p: i32, q: i32) -> i32 {\n", f);
        buf_puts(&g.b, "    var v0 = p;\n    var v1 = q;\n    var f0 = f32(p % 50) * 0.5;\n"
                       "    var u0 = u32(p);\n    var l0 = i64(q) * i64(-3);\n");
        g.nint = 2, g.nflt = 1, g.in_func = true;
        gen_block(&g, 1, 2, 2 + gpick(&g, 3));
        buf_puts(&g.b, "    return v0 ^ v1 ^ i32(u0 >> u32(5)) ^ i32(l0 >> i64(9));\n}\n\n");
    }
    g.in_func = false;
    buf_puts(&g.b, "kernel rnd(a: i32[], b: f32[], o: i32[], of: f32[], t: i32[,], cnt: i32[],\n"
                   "           o2: i64[]) {\n"
                   "    for i in 0..len(o) {\n"
                   "        var v0 = a[i & 7];\n"
                   "        var v1 = a[(i + 3) & 7] - i;\n"
                   "        var v2 = i * 7;\n"
                   "        var f0 = b[i & 7];\n"
                   "        var f1 = 0.5;\n"
                   "        var u0 = u32(a[(i + 5) & 7]) * u32(2246822519);\n"
                   "        var l0 = i64(a[(i + 6) & 7]) << i64(33);\n");
    g.nint = 3, g.nflt = 2;
    gen_block(&g, 2, 3, 4 + gpick(&g, 5));
    buf_puts(&g.b,
             "        o[i] += v0 + v1 * 3 + v2 * 5 + i32(u0 >> u32(7)) + i32(l0 % i64(100000));\n"
             "        of[i] = f0 + f1 * 2.0;\n"
             "    }\n"
             "    cnt[2] = cnt[0] ^ cnt[1];\n"
             "    for i in 0..len(o) {\n"
             "        o2[i] = i64(o[(i + 1) % len(o)]) * i64(t[i, 0] + t[i, 3]) + i64(cnt[2]);\n"
             "    }\n"
             "}\n");
    return buf_take(&g.b);
}

Test(interp, random_programs_agree_at_O0_and_O2, .timeout = 600) {
    int nprog = 300, bad = 0;
    const char *env = getenv("KERN_INTERP_RANDOM");
    if (env)
        nprog = atoi(env);
    for (int p = 0; p < nprog && bad < 3; p++) {
        uint64_t seed = 1000 + (uint64_t)p;
        char *src = gen_program(seed);
        char name[64];
        snprintf(name, sizeof name, "random-%llu", (unsigned long long)seed);
        compiled c = compile_src(name, src);
        rng r = {seed};
        int64_t n = 12;
        ir_interp_arg in[7] = {arr(TY_I32, 1, 8, 0, 0), arr(TY_F32, 1, 8, 0, 0),
                               arr(TY_I32, 1, n, 0, 0), arr(TY_F32, 1, n, 0, 0),
                               arr(TY_I32, 2, n, 4, 0), arr(TY_I32, 1, 3, 0, 0),
                               arr(TY_I64, 1, n, 0, 0)};
        int32_t edge[] = {0, -1, 1, INT32_MIN, INT32_MAX, 7, -8, 100};
        for (int i = 0; i < 8; i++) {
            I32(in[0])[i] = p % 2 ? edge[i] : (int32_t)rng_int(&r, -50, 50);
            F32(in[1])[i] = rng_f32(&r, -5, 5);
        }
        ir_interp_arg got[2][7];
        char err[2][512];
        bool ok[2];
        for (int l = 0; l < 2; l++) {
            clone_args(got[l], in, 7);
            ok[l] = ir_interp_run(c.m[l], "rnd", got[l], 7, err[l], sizeof err[l]);
        }
        int diff = ok[0] != ok[1] ? 1
                   : ok[0]        ? compare_args(got[0], got[1], 7, 0, true, name)
                                  : strcmp(err[0], err[1]) != 0;
        if (!ok[0] && !ok[1] && !diff)
            fprintf(stderr, "%s: both runs fail alike: %s\n", name, err[0]);
        if (diff) {
            bad++;
            fprintf(stderr, "OPTIMIZER BUG? %s: -O0 %s, -O2 %s\n%s\n", name, ok[0] ? "ok" : err[0],
                    ok[1] ? "ok" : err[1], src);
        }
        cr_expect(!diff, "%s: -O0 and -O2 disagree (program printed above)", name);
        for (int l = 0; l < 2; l++)
            free_args(got[l], 7);
        free_args(in, 7);
        compiled_free(&c);
        free(src);
    }
}

/* Loop bounds are evaluated once even when the body changes the variables they read;
 * nested loop variables shadow outer ones; a uniform let bounds a later task; a for
 * nested in a top-level if is serial and carries a top-level var. */
static const char bounds_src[] = "func sq(v: i32) -> i32 {\n"
                                 "    return v * v;\n"
                                 "}\n"
                                 "\n"
                                 "kernel bounds(x: i32[], n: i32, out: i32[], acc: i32[]) {\n"
                                 "    let m = n * n - len(x);\n"
                                 "    for i in 0..len(out) {\n"
                                 "        var hi = x[i];\n"
                                 "        var s = 0;\n"
                                 "        for j in 0..hi {\n"
                                 "            hi -= 1;\n"
                                 "            s += j;\n"
                                 "            for j in 0..2 {\n"
                                 "                s += j * 100;\n"
                                 "            }\n"
                                 "        }\n"
                                 "        var k = 0;\n"
                                 "        while k < hi + 3 {\n"
                                 "            hi -= 1;\n"
                                 "            k += 1;\n"
                                 "        }\n"
                                 "        out[i] = s * 1000 + hi * 10 + sq(k);\n"
                                 "    }\n"
                                 "    var total = m;\n"
                                 "    if n > 0 {\n"
                                 "        for i in 0..len(x) {\n"
                                 "            if x[i] < 0 {\n"
                                 "                continue;\n"
                                 "            }\n"
                                 "            total += x[i];\n"
                                 "        }\n"
                                 "    }\n"
                                 "    acc[0] = total;\n"
                                 "    for i in 0..m {\n"
                                 "        acc[1] += i;\n"
                                 "    }\n"
                                 "}\n";

Test(interp, bounds_once_shadowed_loop_vars_uniform_lets) {
    compiled c = compile_src("bounds", bounds_src);
    rng r = {117};
    int32_t n_list[] = {3, 0, -4};
    for (int s = 0; s < 3; s++) {
        int32_t n = n_list[s];
        int64_t nx = 7;
        ir_interp_arg in[4] = {arr(TY_I32, 1, nx, 0, 0), ir_interp_int(TY_I32, n),
                               arr(TY_I32, 1, nx, 0, 0), arr(TY_I32, 1, 2, 0, 0)};
        for (int64_t i = 0; i < nx; i++)
            I32(in[0])[i] = (int32_t)rng_int(&r, -3, 9);
        ir_interp_arg ref[4];
        clone_args(ref, in, 4);
        int32_t *x = I32(ref[0]), *acc = I32(ref[3]);
        int32_t m = n * n - (int32_t)nx;
        for (int64_t i = 0; i < nx; i++) {
            int32_t hi = x[i], sm = 0, end = hi;
            for (int32_t j = 0; j < end; j++) {
                hi -= 1;
                sm += j;
                for (int32_t j2 = 0; j2 < 2; j2++)
                    sm += j2 * 100;
            }
            int32_t k = 0;
            while (k < hi + 3) {
                hi -= 1;
                k += 1;
            }
            I32(ref[2])[i] = sm * 1000 + hi * 10 + k * k;
        }
        int32_t total = m;
        if (n > 0)
            for (int64_t i = 0; i < nx; i++)
                if (x[i] >= 0)
                    total += x[i];
        acc[0] = total;
        for (int32_t i = 0; i < m; i++)
            acc[1] += i;
        char label[32];
        snprintf(label, sizeof label, "n=%d", n);
        check_runs(&c, "bounds", in, ref, 4, 0, label);
        free_args(in, 4);
        free_args(ref, 4);
    }
    compiled_free(&c);
}

/* ======================================================================================
 * Each pass alone, and the pipeline, on the IR texts of tests/golden/{passes,irtext}
 * ==================================================================================== */

/* Arguments for kernel k: arrays with extents 6 of small values, small scalars. */
static int synth_args(const ir_kernel *k, rng *r, ir_interp_arg *a) {
    for (uint32_t p = 0; p < k->nparams; p++) {
        const kern_type *t = k->params[p].type;
        if (ty_is_array(t)) {
            a[p] = arr(t->elem->kind, t->rank, 6, 6, 6);
            if (t->rank == 4) { /* arr() makes rank <= 3; a 4th extent of 1 */
                free(a[p].data);
                a[p] = ir_interp_array(t->elem->kind, NULL, 4, 6, 6, 6, 1);
                a[p].data = calloc(216, kind_size(t->elem->kind));
            }
            size_t n = arg_len(&a[p]);
            for (size_t i = 0; i < n; i++) {
                switch (t->elem->kind) {
                case TY_BOOL: ((bool *)a[p].data)[i] = rng_next(r) & 1; break;
                case TY_I32: ((int32_t *)a[p].data)[i] = (int32_t)rng_int(r, -3, 8); break;
                case TY_U32: ((uint32_t *)a[p].data)[i] = (uint32_t)rng_int(r, 0, 8); break;
                case TY_I64: ((int64_t *)a[p].data)[i] = rng_int(r, -3, 8); break;
                case TY_F32: ((float *)a[p].data)[i] = rng_f32(r, -2, 2); break;
                default: ((double *)a[p].data)[i] = rng_unit(r) * 4 - 2; break;
                }
            }
        } else if (ty_is_float(t)) {
            a[p] = ir_interp_float(t->kind, 0.75);
        } else {
            a[p] = ir_interp_int(t->kind, t->kind == TY_BOOL ? 1 : rng_int(r, 0, 5));
        }
    }
    return (int)k->nparams;
}

Test(interp, each_pass_preserves_the_golden_ir_texts) {
    static const char *const dirs[] = {"passes", "irtext"};
    static const char *const variants[] = {"fold", "simplify", "cse", "dce", "-O2"};
    int compared = 0, failed_alike = 0, bad = 0;
    for (int d = 0; d < 2; d++) {
        char **names;
        int nn = golden_list(dirs[d], ".ir", &names);
        cr_assert(nn > 0, "no tests/golden/%s/*.ir", dirs[d]);
        for (int f = 0; f < nn; f++) {
            size_t len;
            char *text = golden_read(dirs[d], names[f], &len);
            ir_module *m0 = parse_ir(text);
            ir_foreach_kernel(k, m0) {
                if (k->nparams > MAXARGS)
                    continue;
                for (int v = 0; v < 5; v++) {
                    ir_module *mv = parse_ir(text);
                    switch (v) {
                    case 0: ir_opt_fold(mv); break;
                    case 1: ir_opt_simplify(mv); break;
                    case 2: ir_opt_cse(mv); break;
                    case 3: ir_opt_dce(mv); break;
                    default: ir_optimize(mv, 2); break;
                    }
                    ir_pass_after(mv, variants[v], true);
                    for (int seed = 0; seed < 3; seed++) {
                        rng r = {(uint64_t)(7 * f + 1000 * d + seed)};
                        ir_interp_arg in[MAXARGS], got[2][MAXARGS];
                        int n = synth_args(k, &r, in);
                        char err[2][512];
                        bool ok[2];
                        ir_module *ms[2] = {m0, mv};
                        for (int l = 0; l < 2; l++) {
                            clone_args(got[l], in, n);
                            /* some loops never end, or run 2^32 times */
                            ir_interp_options o = {100000, 0, 1000000, 0};
                            ok[l] = ir_interp_run_opts(ms[l], k->name, got[l], n, &o, err[l], 512);
                        }
                        char what[256];
                        snprintf(what, sizeof what, "OPTIMIZER BUG? %s/%s @%s after %s", dirs[d],
                                 names[f], k->name, variants[v]);
                        if (ok[0] && ok[1]) {
                            compared++;
                            int diff = compare_args(got[0], got[1], n, 1e-12, false, what);
                            cr_expect_eq(diff, 0, "%s: %d elements differ", what, diff);
                            bad += diff != 0;
                        } else if (!ok[0] && !ok[1]) {
                            failed_alike++;
                        } else if (!ok[0] && strstr(err[0], "load: index")) {
                            failed_alike++; /* DCE may drop a dead out-of-bounds load */
                        } else {
                            bad++;
                            cr_expect(false, "%s: unoptimized %s, optimized %s", what,
                                      ok[0] ? "ok" : err[0], ok[1] ? "ok" : err[1]);
                        }
                        free_args(got[0], n);
                        free_args(got[1], n);
                        free_args(in, n);
                    }
                    ir_module_free(mv);
                }
            }
            ir_module_free(m0);
            free(text);
        }
        golden_free_list(names, nn);
    }
    fprintf(stderr, "passes on golden IR: %d runs compared, %d failing alike, %d bad\n", compared,
            failed_alike, bad);
    cr_expect_gt(compared, 100, "too few runs compared");
}
/* The gradient kernels of the gradient corpus (tests/grad, REAL = f64), built at -O0 and
 * at -O2, run in the interpreter on the same inputs: no adpop ever finds its stack empty
 * (the pushes and pops autodiff makes stay balanced through the passes, DCE included),
 * and both levels agree to 1e-12 relative: not bit for bit, since K.grad is built from
 * the optimized K, whose merged subexpressions (CSE) sum their adjoints in another order. */
Test(interp, gradient_kernels_balance_their_adstacks, .timeout = 300) {
    char **names;
    int nn = golden_list("../grad", ".kern", &names);
    cr_assert(nn > 0, "no tests/grad/*.kern");
    int compared = 0, with_stacks = 0, failed_alike = 0;
    for (int f = 0; f < nn; f++) {
        size_t len;
        char *raw = golden_read("../grad", names[f], &len);
        kern_buf src = {0};
        for (const char *s = raw; *s;) { /* REAL -> f64 (the corpus is typed by REAL) */
            if (!strncmp(s, "REAL", 4)) {
                buf_puts(&src, "f64");
                s += 4;
            } else {
                buf_putc(&src, *s++);
            }
        }
        free(raw);
        ir_module *m[2] = {NULL, NULL};
        for (int l = 0; l < 2; l++) {
            kc_ctx *ctx = kc_ctx_new();
            ctx->opts.opt_level = l ? 2 : 0;
            ctx->opts.grad = KC_GRAD_POSSIBLE;
            m[l] = kc_compile_source(ctx, names[f], src.data, src.len);
            if (!m[l])
                diag_print_all(stderr, &ctx->diags);
            kc_ctx_free(ctx);
        }
        buf_free(&src);
        cr_assert(m[0] && m[1], "%s does not compile", names[f]);
        ir_foreach_kernel(k, m[0]) {
            size_t nl = strlen(k->name);
            if (nl < 5 || strcmp(k->name + nl - 5, ".grad") != 0 || k->nparams > MAXARGS)
                continue;
            cr_assert_not_null(ir_kernel_find(m[1], k->name), "%s: no -O2 %s", names[f], k->name);
            with_stacks += k->nadstacks > 0;
            for (int seed = 0; seed < 2; seed++) {
                rng r = {(uint64_t)(31 * f + seed)};
                ir_interp_arg in[MAXARGS], got[2][MAXARGS];
                int n = synth_args(k, &r, in);
                char err[2][512];
                bool ok[2];
                for (int l = 0; l < 2; l++) {
                    clone_args(got[l], in, n);
                    ir_interp_options o = {100000, 0, 5000000, 0};
                    ok[l] = ir_interp_run_opts(m[l], k->name, got[l], n, &o, err[l], 512);
                    cr_expect(ok[l] || !strstr(err[l], "adpop"), "%s @%s at -O%d: %s", names[f],
                              k->name, l ? 2 : 0, err[l]);
                }
                if (ok[0] && ok[1]) {
                    char what[256];
                    snprintf(what, sizeof what, "%s @%s -O0 vs -O2", names[f], k->name);
                    cr_expect_eq(compare_args(got[0], got[1], n, 1e-12, false, what), 0, "%s",
                                 what);
                    compared++;
                } else {
                    cr_expect(!ok[0] && !ok[1], "%s @%s: -O0 %s, -O2 %s", names[f], k->name,
                              ok[0] ? "ok" : err[0], ok[1] ? "ok" : err[1]);
                    failed_alike++;
                }
                free_args(got[0], n);
                free_args(got[1], n);
                free_args(in, n);
            }
        }
        ir_module_free(m[0]);
        ir_module_free(m[1]);
    }
    golden_free_list(names, nn);
    fprintf(stderr,
            "gradient kernels: %d runs compared (%d kernels with adstacks), %d failing alike\n",
            compared, with_stacks, failed_alike);
    cr_expect_geq(with_stacks, 10, "too few gradient kernels with adstacks");
    cr_expect_geq(compared, 40, "too few runs compared");
}
