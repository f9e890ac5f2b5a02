/* interp_util.c - the helpers of the interp suites (interp_util.h). */
#include "interp_util.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"

/* ---- Deterministic inputs (splitmix64) --------------------------------------------- */

uint64_t rng_next(rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

int64_t rng_int(rng *r, int64_t lo, int64_t hi) {
    return lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

double rng_unit(rng *r) { return (double)(rng_next(r) >> 11) / 9007199254740992.0; }

float rng_f32(rng *r, float lo, float hi) { return (float)(lo + (hi - lo) * rng_unit(r)); }

/* ---- Arguments --------------------------------------------------------------------- */

size_t kind_size(kern_tykind k) { return (size_t)ty_size(ty_scalar(k)); }

size_t arg_len(const ir_interp_arg *a) {
    if (a->rank == 0)
        return 0;
    size_t n = 1;
    for (int d = 0; d < a->rank; d++)
        n *= (size_t)a->shape[d];
    return n;
}

ir_interp_arg arr(kern_tykind k, int rank, int64_t d0, int64_t d1, int64_t d2) {
    ir_interp_arg a = ir_interp_array(k, NULL, rank, d0, rank > 1 ? d1 : 0, rank > 2 ? d2 : 0, 0);
    size_t n = arg_len(&a);
    a.data = calloc(n ? n : 1, kind_size(k));
    return a;
}

ir_interp_arg clone_arg(const ir_interp_arg *a) {
    ir_interp_arg c = *a;
    if (a->rank) {
        size_t bytes = arg_len(a) * kind_size(a->kind);
        c.data = malloc(bytes ? bytes : 1);
        memcpy(c.data, a->data, bytes);
    }
    return c;
}

void clone_args(ir_interp_arg *dst, const ir_interp_arg *src, int n) {
    for (int i = 0; i < n; i++)
        dst[i] = clone_arg(&src[i]);
}

void free_args(ir_interp_arg *a, int n) {
    for (int i = 0; i < n; i++)
        if (a[i].rank)
            free(a[i].data);
}

/* ---- Compiling and comparing ------------------------------------------------------- */

const int opt_levels[2] = {0, 2};

ir_module *compile_at(const char *name, const char *src, int opt) {
    kc_ctx *ctx = kc_ctx_new();
    ctx->opts.opt_level = opt;
    ctx->opts.keep_rules = true; /* the interpreter's own rules: division by zero fails */
    ir_module *m = kc_compile_source(ctx, name, src, strlen(src));
    if (!m)
        diag_print_all(stderr, &ctx->diags);
    kc_ctx_free(ctx);
    cr_assert(m, "%s does not compile at -O%d", name, opt);
    return m;
}

compiled compile_src(const char *name, const char *src) {
    compiled c = {name, {NULL, NULL}};
    for (int l = 0; l < 2; l++)
        c.m[l] = compile_at(name, src, opt_levels[l]);
    return c;
}

compiled compile_golden(const char *name) {
    size_t len;
    char *src = golden_read("ir", name, &len);
    cr_assert(src, "cannot read tests/golden/ir/%s", name);
    compiled c = compile_src(name, src);
    free(src);
    return c;
}

void compiled_free(compiled *c) {
    for (int l = 0; l < 2; l++)
        ir_module_free(c->m[l]);
}

double elem_value(const ir_interp_arg *a, size_t i) {
    switch (a->kind) {
    case TY_BOOL: return ((const unsigned char *)a->data)[i];
    case TY_I32: return ((const int32_t *)a->data)[i];
    case TY_U32: return ((const uint32_t *)a->data)[i];
    case TY_I64: return (double)((const int64_t *)a->data)[i];
    case TY_F32: return ((const float *)a->data)[i];
    case TY_I8: return ((const int8_t *)a->data)[i];
    case TY_U8: return ((const uint8_t *)a->data)[i];
    case TY_I16: return ((const int16_t *)a->data)[i];
    case TY_U16:
    case TY_F16: /* the bits */
    case TY_BF16: return ((const uint16_t *)a->data)[i];
    case TY_U64: return (double)((const uint64_t *)a->data)[i];
    default: return ((const double *)a->data)[i];
    }
}

bool elem_equal(const ir_interp_arg *a, const ir_interp_arg *b, size_t i, double tol,
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

int compare_args(const ir_interp_arg *got, const ir_interp_arg *exp, int n, double tol,
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

void check_runs(const compiled *c, const char *kernel, const ir_interp_arg *in,
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

void run_expect_error(const compiled *c, int l, const char *kernel, ir_interp_arg *in, int n,
                      ir_interp_options *opts, char *err, size_t errlen) {
    ir_interp_arg got[MAXARGS];
    clone_args(got, in, n);
    bool ok = ir_interp_run_opts(c->m[l], kernel, got, n, opts, err, errlen);
    free_args(got, n);
    cr_assert(!ok, "%s -O%d: the run succeeded but should fail", c->name, opt_levels[l]);
}

int32_t add32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }

int32_t neg32(int32_t a) { return (int32_t)(0u - (uint32_t)a); }

int32_t shl32(int32_t a, int s) { return (int32_t)((uint32_t)a << s); }

int32_t sar32(int32_t a, int s) { return a < 0 ? ~(~a >> s) : a >> s; }

int64_t add64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }

int64_t sub64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }

int64_t mul64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

int64_t sar64(int64_t a, int s) { return a < 0 ? ~(~a >> s) : a >> s; }

ir_module *parse_ir(const char *text) {
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

uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float sign_f32(float v) { return v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v; }
