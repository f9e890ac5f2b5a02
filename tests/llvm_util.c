/* llvm_util.c - the helpers of the llvm suites (llvm_util.h). */
#include "llvm_util.h"

#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/env.h"
#include "../backends/meta_ir.h"

/* ---- compiling and running ---------------------------------------------------------- */

int build_simd;
bool build_checks;

prog build(const char *src, int opt, bool debug) {
    prog p = {0};
    p.ctx = kc_ctx_new();
    p.ctx->opts.opt_level = opt;
    p.ctx->opts.debug = debug;
    p.ctx->opts.checks = build_checks;
    p.ctx->opts.simd = build_simd;
    kc_options_from_env(&p.ctx->opts); /* KERN_SIMD of CI's scalar and sse runs */
    p.m = kc_compile_source(p.ctx, "test.kern", src, strlen(src));
    if (!p.m) {
        diag_print_all(stderr, &p.ctx->diags);
        cr_assert_fail("does not compile:\n%s", src);
    }
    char err[2048];
    p.jit = llvm_jit_compile(p.m, &p.ctx->opts, err, sizeof err);
    cr_assert(p.jit != NULL, "JIT failed: %s", err);
    p.meta = kc_meta_from_ir(p.m);
    return p;
}

void release(prog *p) {
    llvm_jit_free(p->jit);
    kern_meta_free(p->meta); /* the runtime's free: the ownership contract of meta.h */
    ir_module_free(p->m);
    kc_ctx_free(p->ctx);
}

typedef struct worker {
    kern_task_fn body;
    void *const *args;
    int64_t count, chunk;
    atomic_llong next;
    kern_err_record *err;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    for (;;) {
        int64_t b = atomic_fetch_add(&w->next, w->chunk);
        if (b >= w->count)
            return NULL;
        int64_t e = b + w->chunk < w->count ? b + w->chunk : w->count;
        w->body(w->args, b, e, w->err, NULL, NULL);
    }
}

/* Runs every task of `kernel` as the runtime does; returns the error record. */
kern_err_record run_mt(prog *p, const char *kernel, void **args, int64_t chunk, int threads) {
    kern_err_record err = {0};
    const kern_meta_kernel *mk = kern_meta_find(p->meta, kernel);
    cr_assert(mk != NULL, "no kernel %s", kernel);
    for (int t = 0; t < mk->ntasks; t++) {
        char sym[256]; /* the runtime's naming of task symbols */
        kern_meta_symbol(sym, sizeof sym, kernel, t, true);
        kern_count_fn count = (kern_count_fn)llvm_jit_lookup(p->jit, sym);
        kern_meta_symbol(sym, sizeof sym, kernel, t, false);
        kern_task_fn body = (kern_task_fn)llvm_jit_lookup(p->jit, sym);
        cr_assert(count && body, "missing %s", sym);
        worker w = {body, args, count(args), chunk > 0 ? chunk : 1, 0, &err};
        if (!mk->tasks[t].parallel)
            cr_assert_eq(w.count, 1);
        if (threads <= 1) {
            work(&w);
            continue;
        }
        pthread_t th[16];
        for (int i = 0; i < threads; i++)
            pthread_create(&th[i], NULL, work, &w);
        for (int i = 0; i < threads; i++)
            pthread_join(th[i], NULL);
    }
    return err;
}

kern_err_record run(prog *p, const char *kernel, void **args, int64_t chunk) {
    return run_mt(p, kernel, args, chunk, 1);
}

kern_array_desc desc(void *data, int64_t d0, int64_t d1, int64_t d2) {
    kern_array_desc a = {data, {d0, d1, d2, 1}};
    return a;
}

const int OPT_LEVELS[2] = {0, 3};

/* ---- scalars of every type ---------------------------------------------------------- */

size_t ksize(kern_tykind k) { return k == TY_BOOL ? 1 : k == TY_I64 || k == TY_F64 ? 8 : 4; }

scalar get(const void *arr, kern_tykind k, int i) {
    scalar s;
    memset(&s, 0, sizeof s);
    memcpy(&s, (const char *)arr + (size_t)i * ksize(k), ksize(k));
    return s;
}

void put(void *arr, kern_tykind k, int i, scalar s) {
    memcpy((char *)arr + (size_t)i * ksize(k), &s, ksize(k));
}

bool is_float(kern_tykind k) { return k == TY_F32 || k == TY_F64; }

bool same(kern_tykind k, scalar x, scalar y, int ulps) {
    if (k == TY_F32) {
        if (isnan(x.f32) && isnan(y.f32))
            return true;
        if (x.u32 == y.u32)
            return true;
        if (ulps == 0 || signbit(x.f32) != signbit(y.f32) || isinf(x.f32) || isinf(y.f32))
            return false;
        int64_t d = (int64_t)x.u32 - (int64_t)y.u32;
        return d >= -ulps && d <= ulps;
    }
    if (k == TY_F64) {
        if (isnan(x.f64) && isnan(y.f64))
            return true;
        if (x.i64 == y.i64)
            return true;
        if (ulps == 0 || signbit(x.f64) != signbit(y.f64) || isinf(x.f64) || isinf(y.f64))
            return false;
        int64_t d = x.i64 - y.i64;
        return d >= -ulps && d <= ulps;
    }
    return memcmp(&x, &y, ksize(k)) == 0;
}

void show(char *buf, size_t n, kern_tykind k, scalar s) {
    switch (k) {
    case TY_BOOL: snprintf(buf, n, "%d", s.b); break;
    case TY_I32: snprintf(buf, n, "%d", s.i32); break;
    case TY_U32: snprintf(buf, n, "%u", s.u32); break;
    case TY_I64: snprintf(buf, n, "%lld", (long long)s.i64); break;
    case TY_F32: snprintf(buf, n, "%.9g (0x%08x)", s.f32, s.u32); break;
    default: snprintf(buf, n, "%.17g", s.f64); break;
    }
}

/* Test inputs: a[i] from these lists, b[i] = a-list[(7i + 3) % N], c[i] = [(5i + 11) % N]. */
const double FVALS[N] = {0.0,    -0.0,    1.0,      -1.0,      0.5, -2.5, 3.25, 1e10,
                         -1e-10, 123.456, 7.0,      -7.0,      2.5, -0.5, 1.5,  1e-3,
                         -3.75,  0.1,     INFINITY, -INFINITY, NAN, 42.0, 1e30, -5e-5};
const int64_t IVALS32[N] = {0,
                            1,
                            -1,
                            2,
                            -2,
                            3,
                            -3,
                            7,
                            -7,
                            100,
                            -100,
                            12345,
                            -12345,
                            INT32_MAX,
                            INT32_MIN,
                            INT32_MAX - 1,
                            INT32_MIN + 1,
                            65536,
                            -65536,
                            1 << 20,
                            5,
                            -5,
                            31,
                            33};
const int64_t IVALS64[N] = {0,
                            1,
                            -1,
                            2,
                            -2,
                            3,
                            -3,
                            7,
                            -7,
                            100,
                            -100,
                            1234567890123LL,
                            -1234567890123LL,
                            INT64_MAX,
                            INT64_MIN,
                            INT64_MAX - 1,
                            INT64_MIN + 1,
                            4294967296LL,
                            -4294967296LL,
                            1 << 20,
                            5,
                            -5,
                            63,
                            65};

scalar input(kern_tykind k, int j) {
    scalar s;
    memset(&s, 0, sizeof s);
    switch (k) {
    case TY_BOOL: s.b = (uint8_t)(j & 1) ^ (uint8_t)((j >> 2) & 1); break;
    case TY_I32: s.i32 = (int32_t)IVALS32[j]; break;
    case TY_U32: s.u32 = (uint32_t)IVALS32[j]; break;
    case TY_I64: s.i64 = IVALS64[j]; break;
    case TY_F32: s.f32 = (float)FVALS[j]; break;
    default: s.f64 = FVALS[j]; break;
    }
    return s;
}

const char *kname(kern_tykind k) {
    switch (k) {
    case TY_BOOL: return "bool";
    case TY_I32: return "i32";
    case TY_U32: return "u32";
    case TY_I64: return "i64";
    case TY_F32: return "f32";
    default: return "f64";
    }
}

const kern_tykind ALL_KINDS[NKINDS] = {TY_BOOL, TY_I32, TY_U32, TY_I64, TY_F32, TY_F64};

bool has(const char *text, const char *s) { return strstr(text, s) != NULL; }
