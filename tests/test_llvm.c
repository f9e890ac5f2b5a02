/* test_llvm.c - the LLVM CPU backend, end to end (suite `llvm`).
 *
 * Kernels are compiled from source (kc_compile_source), JIT-compiled (llvm_jit_compile)
 * and their task functions called directly, as the runtime will call them (runtime/abi.h):
 * count once, then the body over chunks of the work, on one or several threads, tasks in
 * order. Results are compared with plain C references written here:
 *   - every op x every type it supports (a table), at -O0 and -O3: floats bit for bit
 *     (NaN equals NaN), libm functions within 1 ulp;
 *   - casts between all scalar types, float -> int saturation;
 *   - control flow (if, for, while, break, continue, early return), n-D parallel tasks
 *     with chunked calls, serial tasks, uniform values across tasks;
 *   - atomics on several threads, their old values and their ties rule;
 *   - debug mode: bounds, division by zero and shift errors with their line:col, the
 *     faulting operation skipped; release code without any check;
 *   - object files (linked with cc into a shared object and run), LLVM text, metadata,
 *     JIT compile time. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../backends/llvm/llvm_backend.h"
#include "../compiler/driver.h"
#include "../compiler/meta_ir.h"
#include "../runtime/abi.h"
#include "../runtime/meta.h"

/* ---- compiling and running ---------------------------------------------------------- */

typedef struct prog {
    kc_ctx *ctx;
    ir_module *m;
    llvm_jit *jit;
    kern_meta *meta;
} prog;

static prog build(const char *src, int opt, bool debug) {
    prog p = {0};
    p.ctx = kc_ctx_new();
    p.ctx->opts.opt_level = opt;
    p.ctx->opts.debug = debug;
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

static void release(prog *p) {
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
static kern_err_record run_mt(prog *p, const char *kernel, void **args, int64_t chunk,
                              int threads) {
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

static kern_err_record run(prog *p, const char *kernel, void **args, int64_t chunk) {
    return run_mt(p, kernel, args, chunk, 1);
}

static kern_array_desc desc(void *data, int64_t d0, int64_t d1, int64_t d2) {
    kern_array_desc a = {data, {d0, d1, d2, 1}};
    return a;
}

static const int OPT_LEVELS[] = {0, 3};

/* ---- scalars of every type ---------------------------------------------------------- */

typedef union scalar {
    uint8_t b;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    float f32;
    double f64;
} scalar;

enum { NKINDS = 6, N = 24 };

static const char *kname(kern_tykind k) {
    switch (k) {
    case TY_BOOL: return "bool";
    case TY_I32: return "i32";
    case TY_U32: return "u32";
    case TY_I64: return "i64";
    case TY_F32: return "f32";
    default: return "f64";
    }
}

static size_t ksize(kern_tykind k) { return k == TY_BOOL ? 1 : k == TY_I64 || k == TY_F64 ? 8 : 4; }

static scalar get(const void *arr, kern_tykind k, int i) {
    scalar s;
    memset(&s, 0, sizeof s);
    memcpy(&s, (const char *)arr + (size_t)i * ksize(k), ksize(k));
    return s;
}

static void put(void *arr, kern_tykind k, int i, scalar s) {
    memcpy((char *)arr + (size_t)i * ksize(k), &s, ksize(k));
}

static bool is_float(kern_tykind k) { return k == TY_F32 || k == TY_F64; }

/* Equal bit for bit, or both NaN; with ulps > 0 floats may differ by that many ulps. */
static bool same(kern_tykind k, scalar x, scalar y, int ulps) {
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

static void show(char *buf, size_t n, kern_tykind k, scalar s) {
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
static const double FVALS[N] = {0.0,    -0.0,    1.0,      -1.0,      0.5, -2.5, 3.25, 1e10,
                                -1e-10, 123.456, 7.0,      -7.0,      2.5, -0.5, 1.5,  1e-3,
                                -3.75,  0.1,     INFINITY, -INFINITY, NAN, 42.0, 1e30, -5e-5};
static const int64_t IVALS32[N] = {0,
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
static const int64_t IVALS64[N] = {0,
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

static scalar input(kern_tykind k, int j) {
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

/* ---- the op table ------------------------------------------------------------------- */

enum {
    KB = 1 << TY_BOOL,
    KI = (1 << TY_I32) | (1 << TY_U32) | (1 << TY_I64),
    KF = (1 << TY_F32) | (1 << TY_F64),
    KNUM = KI | KF,
    KALL = KNUM | KB,
};
enum { FIX_NONE, FIX_DIV, FIX_SHIFT };

typedef enum opid {
    O_ADD,
    O_SUB,
    O_MUL,
    O_DIV,
    O_REM,
    O_NEG,
    O_BAND,
    O_BOR,
    O_BXOR,
    O_BNOT,
    O_SHL,
    O_SHR,
    O_LAND,
    O_LOR,
    O_LNOT,
    O_EQ,
    O_NE,
    O_LT,
    O_LE,
    O_GT,
    O_GE,
    O_SELECT,
    O_TERNARY,
    O_MIN,
    O_MAX,
    O_CLAMP,
    O_ABS,
    O_SIGN,
    O_FLOOR,
    O_CEIL,
    O_ROUND,
    O_SQRT,
    O_RSQRT,
    O_SIN,
    O_COS,
    O_TAN,
    O_ASIN,
    O_ACOS,
    O_ATAN,
    O_SINH,
    O_COSH,
    O_TANH,
    O_EXP,
    O_EXP2,
    O_LOG,
    O_LOG2,
    O_ATAN2,
    O_POW,
    O_FMA,
    O__COUNT
} opid;

typedef struct opdef {
    opid id;
    const char *name;
    const char *expr; /* over a[i], b[i], c[i] (of the type) and s[i] (bool) */
    unsigned kinds;
    bool to_bool;
    int fix;
    int ulps; /* tolerance: libm functions */
} opdef;

static const opdef OPS[] = {
    {O_ADD, "add", "a[i] + b[i]", KNUM, false, FIX_NONE, 0},
    {O_SUB, "sub", "a[i] - b[i]", KNUM, false, FIX_NONE, 0},
    {O_MUL, "mul", "a[i] * b[i]", KNUM, false, FIX_NONE, 0},
    {O_DIV, "div", "a[i] / b[i]", KNUM, false, FIX_DIV, 0},
    {O_REM, "rem", "a[i] % b[i]", KI, false, FIX_DIV, 0},
    {O_NEG, "neg", "-a[i]", KNUM, false, FIX_NONE, 0},
    {O_BAND, "band", "a[i] & b[i]", KI, false, FIX_NONE, 0},
    {O_BOR, "bor", "a[i] | b[i]", KI, false, FIX_NONE, 0},
    {O_BXOR, "bxor", "a[i] ^ b[i]", KI, false, FIX_NONE, 0},
    {O_BNOT, "bnot", "~a[i]", KI, false, FIX_NONE, 0},
    {O_SHL, "shl", "a[i] << b[i]", KI, false, FIX_SHIFT, 0},
    {O_SHR, "shr", "a[i] >> b[i]", KI, false, FIX_SHIFT, 0},
    {O_LAND, "land", "a[i] && b[i]", KB, false, FIX_NONE, 0},
    {O_LOR, "lor", "a[i] || b[i]", KB, false, FIX_NONE, 0},
    {O_LNOT, "lnot", "!a[i]", KB, false, FIX_NONE, 0},
    {O_EQ, "eq", "a[i] == b[i]", KALL, true, FIX_NONE, 0},
    {O_NE, "ne", "a[i] != b[i]", KALL, true, FIX_NONE, 0},
    {O_LT, "lt", "a[i] < b[i]", KNUM, true, FIX_NONE, 0},
    {O_LE, "le", "a[i] <= b[i]", KNUM, true, FIX_NONE, 0},
    {O_GT, "gt", "a[i] > b[i]", KNUM, true, FIX_NONE, 0},
    {O_GE, "ge", "a[i] >= b[i]", KNUM, true, FIX_NONE, 0},
    {O_SELECT, "select", "select(s[i], a[i], b[i])", KALL, false, FIX_NONE, 0},
    {O_TERNARY, "ternary", "s[i] ? b[i] : c[i]", KALL, false, FIX_NONE, 0},
    {O_MIN, "min", "min(a[i], b[i])", KNUM, false, FIX_NONE, 0},
    {O_MAX, "max", "max(a[i], b[i])", KNUM, false, FIX_NONE, 0},
    {O_CLAMP, "clamp", "clamp(a[i], b[i], c[i])", KNUM, false, FIX_NONE, 0},
    {O_ABS, "abs", "abs(a[i])", KNUM, false, FIX_NONE, 0},
    {O_SIGN, "sign", "sign(a[i])", KNUM, false, FIX_NONE, 0},
    {O_FLOOR, "floor", "floor(a[i])", KF, false, FIX_NONE, 0},
    {O_CEIL, "ceil", "ceil(a[i])", KF, false, FIX_NONE, 0},
    {O_ROUND, "round", "round(a[i])", KF, false, FIX_NONE, 0},
    {O_SQRT, "sqrt", "sqrt(a[i])", KF, false, FIX_NONE, 0},
    {O_RSQRT, "rsqrt", "rsqrt(a[i])", KF, false, FIX_NONE, 0},
    {O_SIN, "sin", "sin(a[i])", KF, false, FIX_NONE, 1},
    {O_COS, "cos", "cos(a[i])", KF, false, FIX_NONE, 1},
    {O_TAN, "tan", "tan(a[i])", KF, false, FIX_NONE, 1},
    {O_ASIN, "asin", "asin(a[i])", KF, false, FIX_NONE, 1},
    {O_ACOS, "acos", "acos(a[i])", KF, false, FIX_NONE, 1},
    {O_ATAN, "atan", "atan(a[i])", KF, false, FIX_NONE, 1},
    {O_SINH, "sinh", "sinh(a[i])", KF, false, FIX_NONE, 1},
    {O_COSH, "cosh", "cosh(a[i])", KF, false, FIX_NONE, 1},
    {O_TANH, "tanh", "tanh(a[i])", KF, false, FIX_NONE, 1},
    {O_EXP, "exp", "exp(a[i])", KF, false, FIX_NONE, 1},
    {O_EXP2, "exp2", "exp2(a[i])", KF, false, FIX_NONE, 1},
    {O_LOG, "log", "log(a[i])", KF, false, FIX_NONE, 1},
    {O_LOG2, "log2", "log2(a[i])", KF, false, FIX_NONE, 1},
    {O_ATAN2, "atan2", "atan2(a[i], b[i])", KF, false, FIX_NONE, 1},
    {O_POW, "pow", "pow(a[i], b[i])", KF, false, FIX_NONE, 1},
    {O_FMA, "fma", "fma(a[i], b[i], c[i])", KF, false, FIX_NONE, 0},
};
enum { NOPS = sizeof OPS / sizeof *OPS };

/* Integer references in the unsigned type UT (wrapping), T the signed or unsigned type. */
#define INT_REF(NAME, T, UT, BITS, SIGNED)                             \
    static T NAME(opid op, T a, T b, T c, bool s, bool *bres) {        \
        UT ua = (UT)a, ub = (UT)b;                                     \
        bool neg = SIGNED && (ua >> (BITS - 1)) != 0; /* a < 0 */      \
        T mx;                                                          \
        switch (op) {                                                  \
        case O_ADD: return (T)(ua + ub);                               \
        case O_SUB: return (T)(ua - ub);                               \
        case O_MUL: return (T)(ua * ub);                               \
        case O_DIV:                                                    \
            if (SIGNED && b == (T)-1)                                  \
                return (T)((UT)0 - ua);                                \
            return a / b;                                              \
        case O_REM:                                                    \
            if (SIGNED && b == (T)-1)                                  \
                return 0;                                              \
            return a % b;                                              \
        case O_NEG: return (T)((UT)0 - ua);                            \
        case O_BAND: return (T)(ua & ub);                              \
        case O_BOR: return (T)(ua | ub);                               \
        case O_BXOR: return (T)(ua ^ ub);                              \
        case O_BNOT: return (T)~ua;                                    \
        case O_SHL: return (T)(ua << ub);                              \
        case O_SHR:                                                    \
            if (neg)                                                   \
                return (T) ~(~ua >> ub);                               \
            return (T)(ua >> ub);                                      \
        case O_EQ: *bres = a == b; return 0;                           \
        case O_NE: *bres = a != b; return 0;                           \
        case O_LT: *bres = a < b; return 0;                            \
        case O_LE: *bres = a <= b; return 0;                           \
        case O_GT: *bres = a > b; return 0;                            \
        case O_GE: *bres = a >= b; return 0;                           \
        case O_SELECT: return s ? a : b;                               \
        case O_TERNARY: return s ? b : c;                              \
        case O_MIN: return b < a ? b : a;                              \
        case O_MAX: return b > a ? b : a;                              \
        case O_CLAMP: mx = b > a ? b : a; return c < mx ? c : mx;      \
        case O_ABS: return neg ? (T)((UT)0 - ua) : a;                  \
        case O_SIGN: return (T)((a > 0) - neg);                        \
        default: cr_assert_fail("no integer reference for op %d", op); \
        }                                                              \
        return 0;                                                      \
    }
INT_REF(ref_i32, int32_t, uint32_t, 32, true)
INT_REF(ref_u32, uint32_t, uint32_t, 32, false)
INT_REF(ref_i64, int64_t, uint64_t, 64, true)

#define FLOAT_REF(NAME, T, SUF)                                      \
    static T NAME(opid op, T a, T b, T c, bool s, bool *bres) {      \
        T mx;                                                        \
        switch (op) {                                                \
        case O_ADD: return a + b;                                    \
        case O_SUB: return a - b;                                    \
        case O_MUL: return a * b;                                    \
        case O_DIV: return a / b;                                    \
        case O_NEG: return -a;                                       \
        case O_EQ: *bres = a == b; return 0;                         \
        case O_NE: *bres = a != b; return 0;                         \
        case O_LT: *bres = a < b; return 0;                          \
        case O_LE: *bres = a <= b; return 0;                         \
        case O_GT: *bres = a > b; return 0;                          \
        case O_GE: *bres = a >= b; return 0;                         \
        case O_SELECT: return s ? a : b;                             \
        case O_TERNARY: return s ? b : c;                            \
        case O_MIN: return b < a ? b : a;                            \
        case O_MAX: return b > a ? b : a;                            \
        case O_CLAMP: mx = b > a ? b : a; return c < mx ? c : mx;    \
        case O_ABS: return fabs##SUF(a);                             \
        case O_SIGN: return a > 0 ? (T)1 : a < 0 ? (T)-1 : a;        \
        case O_FLOOR: return floor##SUF(a);                          \
        case O_CEIL: return ceil##SUF(a);                            \
        case O_ROUND: return round##SUF(a);                          \
        case O_SQRT: return sqrt##SUF(a);                            \
        case O_RSQRT: return (T)1 / sqrt##SUF(a);                    \
        case O_SIN: return sin##SUF(a);                              \
        case O_COS: return cos##SUF(a);                              \
        case O_TAN: return tan##SUF(a);                              \
        case O_ASIN: return asin##SUF(a);                            \
        case O_ACOS: return acos##SUF(a);                            \
        case O_ATAN: return atan##SUF(a);                            \
        case O_SINH: return sinh##SUF(a);                            \
        case O_COSH: return cosh##SUF(a);                            \
        case O_TANH: return tanh##SUF(a);                            \
        case O_EXP: return exp##SUF(a);                              \
        case O_EXP2: return exp2##SUF(a);                            \
        case O_LOG: return log##SUF(a);                              \
        case O_LOG2: return log2##SUF(a);                            \
        case O_ATAN2: return atan2##SUF(a, b);                       \
        case O_POW: return pow##SUF(a, b);                           \
        case O_FMA: return fma##SUF(a, b, c);                        \
        default: cr_assert_fail("no float reference for op %d", op); \
        }                                                            \
        return 0;                                                    \
    }
FLOAT_REF(ref_f32, float, f)
FLOAT_REF(ref_f64, double, )

static scalar ref_bool(opid op, bool a, bool b, bool c, bool s) {
    scalar r;
    memset(&r, 0, sizeof r);
    switch (op) {
    case O_LAND: r.b = a && b; break;
    case O_LOR: r.b = a || b; break;
    case O_LNOT: r.b = !a; break;
    case O_EQ: r.b = a == b; break;
    case O_NE: r.b = a != b; break;
    case O_SELECT: r.b = s ? a : b; break;
    case O_TERNARY: r.b = s ? b : c; break;
    default: cr_assert_fail("no bool reference for op %d", op);
    }
    return r;
}

static scalar reference(const opdef *op, kern_tykind k, scalar a, scalar b, scalar c, bool s) {
    scalar r;
    memset(&r, 0, sizeof r);
    bool br = false;
    switch (k) {
    case TY_BOOL: return ref_bool(op->id, a.b, b.b, c.b, s);
    case TY_I32: r.i32 = ref_i32(op->id, a.i32, b.i32, c.i32, s, &br); break;
    case TY_U32: r.u32 = ref_u32(op->id, a.u32, b.u32, c.u32, s, &br); break;
    case TY_I64: r.i64 = ref_i64(op->id, a.i64, b.i64, c.i64, s, &br); break;
    case TY_F32: r.f32 = ref_f32(op->id, a.f32, b.f32, c.f32, s, &br); break;
    default: r.f64 = ref_f64(op->id, a.f64, b.f64, c.f64, s, &br); break;
    }
    if (op->to_bool) {
        memset(&r, 0, sizeof r);
        r.b = br;
    }
    return r;
}

/* The inputs of element j for an op, made valid for it (no division by zero, shifts
 * within the width). */
static void op_inputs(const opdef *op, kern_tykind k, int j, scalar *a, scalar *b, scalar *c,
                      uint8_t *s) {
    *a = input(k, j);
    *b = input(k, (7 * j + 3) % N);
    *c = input(k, (5 * j + 11) % N);
    *s = (uint8_t)((j / 3) & 1);
    scalar zero;
    memset(&zero, 0, sizeof zero);
    if (op->fix == FIX_DIV && !is_float(k) && memcmp(b, &zero, ksize(k)) == 0)
        b->i64 = 3; /* 3 in every integer type (little endian) */
    if (op->fix == FIX_SHIFT) {
        if (k == TY_I64)
            b->i64 = (int64_t)((uint64_t)b->i64 % 64);
        else
            b->u32 %= 32;
    }
}

static void check_ops_of_kind(kern_tykind k, int opt) {
    /* one module with a kernel per op */
    kern_buf src = {0};
    int nk = 0;
    for (int o = 0; o < NOPS; o++) {
        if (!(OPS[o].kinds & (1u << k)))
            continue;
        buf_printf(&src,
                   "kernel k_%s(a: %s[], b: %s[], c: %s[], s: bool[], out: %s[]) {\n"
                   "    for i in 0..len(out) { out[i] = %s; }\n}\n",
                   OPS[o].name, kname(k), kname(k), kname(k), OPS[o].to_bool ? "bool" : kname(k),
                   OPS[o].expr);
        nk++;
    }
    prog p = build(src.data, opt, false);
    int checked = 0;
    for (int o = 0; o < NOPS; o++) {
        const opdef *op = &OPS[o];
        if (!(op->kinds & (1u << k)))
            continue;
        kern_tykind rk = op->to_bool ? TY_BOOL : k;
        char av[N * 8], bv[N * 8], cv[N * 8], out[N * 8];
        uint8_t sv[N];
        for (int j = 0; j < N; j++) {
            scalar a, b, c;
            op_inputs(op, k, j, &a, &b, &c, &sv[j]);
            put(av, k, j, a);
            put(bv, k, j, b);
            put(cv, k, j, c);
        }
        memset(out, 0xAB, sizeof out);
        kern_array_desc da = desc(av, N, 1, 1), db = desc(bv, N, 1, 1), dc = desc(cv, N, 1, 1),
                        ds = desc(sv, N, 1, 1), dout = desc(out, N, 1, 1);
        void *args[] = {&da, &db, &dc, &ds, &dout};
        char kernel[64];
        snprintf(kernel, sizeof kernel, "k_%s", op->name);
        kern_err_record e = run(&p, kernel, args, 5);
        cr_assert_eq(e.code, 0);
        for (int j = 0; j < N; j++) {
            scalar want = reference(op, k, get(av, k, j), get(bv, k, j), get(cv, k, j), sv[j]);
            scalar got = get(out, rk, j);
            if (!same(rk, got, want, op->ulps)) {
                char g[64], w[64], x[64], y[64];
                show(g, sizeof g, rk, got);
                show(w, sizeof w, rk, want);
                show(x, sizeof x, k, get(av, k, j));
                show(y, sizeof y, k, get(bv, k, j));
                cr_expect_fail("-O%d %s on %s, element %d (a = %s, b = %s): got %s, want %s", opt,
                               op->name, kname(k), j, x, y, g, w);
            }
        }
        checked++;
    }
    cr_assert_eq(checked, nk);
    release(&p);
    buf_free(&src);
}

Test(llvm, ops_bool) {
    for (int l = 0; l < 2; l++)
        check_ops_of_kind(TY_BOOL, OPT_LEVELS[l]);
}
Test(llvm, ops_i32) {
    for (int l = 0; l < 2; l++)
        check_ops_of_kind(TY_I32, OPT_LEVELS[l]);
}
Test(llvm, ops_u32) {
    for (int l = 0; l < 2; l++)
        check_ops_of_kind(TY_U32, OPT_LEVELS[l]);
}
Test(llvm, ops_i64) {
    for (int l = 0; l < 2; l++)
        check_ops_of_kind(TY_I64, OPT_LEVELS[l]);
}
Test(llvm, ops_f32) {
    for (int l = 0; l < 2; l++)
        check_ops_of_kind(TY_F32, OPT_LEVELS[l]);
}
Test(llvm, ops_f64) {
    for (int l = 0; l < 2; l++)
        check_ops_of_kind(TY_F64, OPT_LEVELS[l]);
}

/* ---- casts -------------------------------------------------------------------------- */

static const double CAST_F[N] = {
    0.0,    -0.0,    0.5,     -0.5,     1.7,          -1.7,          2.5, -2.5,
    100.99, -100.99, 65536.5, -65536.5, 2147483520.0, -2147483648.0, 3e9, -3e9,
    1e15,   -1e15,   1e30,    -1e30,    INFINITY,     -INFINITY,     NAN, 4294967040.0};

/* C's conversion where it is defined; the documented saturation elsewhere (NaN -> 0). */
static int64_t sat(double x, double lo, double hi) {
    if (isnan(x))
        return 0;
    if (x <= lo)
        return (int64_t)lo;
    if (x >= hi)
        return hi >= 9.2e18 ? INT64_MAX : (int64_t)hi;
    return (int64_t)x;
}

static scalar cast_ref(kern_tykind from, kern_tykind to, scalar v) {
    scalar r;
    memset(&r, 0, sizeof r);
    if (is_float(from)) {
        double x = from == TY_F32 ? (double)v.f32 : v.f64;
        switch (to) {
        case TY_BOOL: r.b = x != 0.0; break;
        case TY_I32: r.i32 = (int32_t)sat(x, -2147483648.0, 2147483647.0); break;
        case TY_U32: r.u32 = (uint32_t)sat(x, 0.0, 4294967295.0); break;
        case TY_I64:
            r.i64 = isnan(x)                      ? 0
                    : x <= -9223372036854775808.0 ? INT64_MIN
                    : x >= 9223372036854775808.0  ? INT64_MAX
                                                  : (int64_t)x;
            break;
        case TY_F32: r.f32 = from == TY_F32 ? v.f32 : (float)v.f64; break;
        default: r.f64 = x; break;
        }
        return r;
    }
    /* from bool or an integer: its exact value */
    bool neg = from == TY_I32 ? v.i32 < 0 : from == TY_I64 ? v.i64 < 0 : false;
    int64_t sv = from == TY_BOOL  ? v.b
                 : from == TY_I32 ? v.i32
                 : from == TY_U32 ? (int64_t)v.u32
                                  : v.i64;
    (void)neg;
    switch (to) {
    case TY_BOOL: r.b = sv != 0; break;
    case TY_I32: r.i32 = (int32_t)(uint32_t)(uint64_t)sv; break;
    case TY_U32: r.u32 = (uint32_t)(uint64_t)sv; break;
    case TY_I64: r.i64 = sv; break;
    case TY_F32: r.f32 = (float)sv; break;
    default: r.f64 = (double)sv; break;
    }
    return r;
}

static scalar cast_input(kern_tykind k, int j) {
    scalar s;
    memset(&s, 0, sizeof s);
    if (k == TY_F32)
        s.f32 = (float)CAST_F[j];
    else if (k == TY_F64)
        s.f64 = CAST_F[j];
    else
        s = input(k, j);
    return s;
}

static const kern_tykind ALL_KINDS[NKINDS] = {TY_BOOL, TY_I32, TY_U32, TY_I64, TY_F32, TY_F64};

Test(llvm, casts_all_pairs) {
    for (int l = 0; l < 2; l++) {
        kern_buf src = {0};
        for (int f = 0; f < NKINDS; f++)
            for (int t = 0; t < NKINDS; t++)
                buf_printf(&src,
                           "kernel c_%s_%s(a: %s[], out: %s[]) {\n"
                           "    for i in 0..len(a) { out[i] = %s(a[i]); }\n}\n",
                           kname(ALL_KINDS[f]), kname(ALL_KINDS[t]), kname(ALL_KINDS[f]),
                           kname(ALL_KINDS[t]), kname(ALL_KINDS[t]));
        prog p = build(src.data, OPT_LEVELS[l], false);
        for (int f = 0; f < NKINDS; f++) {
            for (int t = 0; t < NKINDS; t++) {
                kern_tykind fk = ALL_KINDS[f], tk = ALL_KINDS[t];
                char av[N * 8], out[N * 8];
                for (int j = 0; j < N; j++)
                    put(av, fk, j, cast_input(fk, j));
                kern_array_desc da = desc(av, N, 1, 1), dout = desc(out, N, 1, 1);
                void *args[] = {&da, &dout};
                char kernel[64];
                snprintf(kernel, sizeof kernel, "c_%s_%s", kname(fk), kname(tk));
                run(&p, kernel, args, 7);
                for (int j = 0; j < N; j++) {
                    scalar want = cast_ref(fk, tk, get(av, fk, j)), got = get(out, tk, j);
                    if (!same(tk, got, want, 0)) {
                        char g[64], w[64], x[64];
                        show(g, sizeof g, tk, got);
                        show(w, sizeof w, tk, want);
                        show(x, sizeof x, fk, get(av, fk, j));
                        cr_expect_fail("-O%d %s(%s %s): got %s, want %s", OPT_LEVELS[l], kname(tk),
                                       kname(fk), x, g, w);
                    }
                }
            }
        }
        release(&p);
        buf_free(&src);
    }
}

/* min/max: operand 0 on ties (+0/-0) and when operand 0 is NaN; clamp = min(max(x, lo), hi) */
Test(llvm, min_max_ties) {
    const char *src = "kernel t(a: f32[], b: f32[], mn: f32[], mx: f32[], cl: f32[]) {\n"
                      "    for i in 0..len(a) {\n"
                      "        mn[i] = min(a[i], b[i]); mx[i] = max(a[i], b[i]);\n"
                      "        cl[i] = clamp(a[i], b[i], -0.0);\n"
                      "    }\n}\n";
    for (int l = 0; l < 2; l++) {
        prog p = build(src, OPT_LEVELS[l], false);
        float a[6] = {0.0f, -0.0f, NAN, 1.0f, -0.0f, 5.0f};
        float b[6] = {-0.0f, 0.0f, 1.0f, NAN, -0.0f, 0.0f};
        float mn[6], mx[6], cl[6];
        kern_array_desc da = desc(a, 6, 1, 1), db = desc(b, 6, 1, 1), dn = desc(mn, 6, 1, 1),
                        dx = desc(mx, 6, 1, 1), dc = desc(cl, 6, 1, 1);
        void *args[] = {&da, &db, &dn, &dx, &dc};
        run(&p, "t", args, 6);
        /* written out by hand from `b < a ? b : a` */
        cr_expect(!signbit(mn[0]) && mn[0] == 0.0f, "min(0, -0) is operand 0");
        cr_expect(signbit(mn[1]) && mn[1] == 0.0f, "min(-0, 0) is operand 0");
        cr_expect(!signbit(mx[0]) && signbit(mx[1]), "max ties give operand 0");
        cr_expect(isnan(mn[2]) && isnan(mx[2]), "NaN operand 0 stays");
        cr_expect(mn[3] == 1.0f && mx[3] == 1.0f, "NaN operand 1 is never taken");
        cr_expect(mn[5] == 0.0f && mx[5] == 5.0f);
        /* clamp(5, 0, -0) = min(max(5, 0), -0) = -0; clamp(0, -0, -0): max keeps 0, min keeps 0 */
        cr_expect(cl[5] == 0.0f && signbit(cl[5]), "clamp(5, 0, -0) = -0");
        cr_expect(cl[0] == 0.0f && !signbit(cl[0]), "clamp(0, -0, -0) = 0");
        release(&p);
    }
}

/* ---- control flow ------------------------------------------------------------------- */

static float cf_f(float x) {
    if (x > 10.0f)
        return x;
    return -x;
}

Test(llvm, while_break_continue_return) {
    const char *src = "func f(x: f32) -> f32 {\n"
                      "    if x > 10.0 { return x; }\n"
                      "    return -x;\n"
                      "}\n"
                      "kernel cf(a: f32[], b: bool[], n: i32[], out: f32[]) {\n"
                      "    for i in 0..len(a) {\n"
                      "        var s = 0.0;\n"
                      "        var k = 0;\n"
                      "        while k < n[i] {\n"
                      "            k += 1;\n"
                      "            if k == 3 { continue; }\n"
                      "            if k > 7 { break; }\n"
                      "            s += f32(k) * a[i];\n"
                      "        }\n"
                      "        out[i] = select(b[i], s, f(a[i])) + f32(b[i]);\n"
                      "    }\n"
                      "}\n";
    enum { M = 40 };
    float a[M], out[M], want[M];
    uint8_t b[M];
    int32_t n[M];
    for (int i = 0; i < M; i++) {
        a[i] = (float)(i - 20) * 0.75f;
        b[i] = (uint8_t)(i % 3 == 0);
        n[i] = (i * 7) % 13 - 2;
        float s = 0.0f;
        int k = 0;
        while (k < n[i]) {
            k += 1;
            if (k == 3)
                continue;
            if (k > 7)
                break;
            float t = (float)k * a[i];
            s = s + t;
        }
        float v = b[i] ? s : cf_f(a[i]);
        want[i] = v + (float)b[i];
    }
    for (int l = 0; l < 2; l++) {
        prog p = build(src, OPT_LEVELS[l], l == 0);
        memset(out, 0, sizeof out);
        kern_array_desc da = desc(a, M, 1, 1), db = desc(b, M, 1, 1), dn = desc(n, M, 1, 1),
                        dout = desc(out, M, 1, 1);
        void *args[] = {&da, &db, &dn, &dout};
        kern_err_record e = run(&p, "cf", args, 3);
        cr_assert_eq(e.code, 0);
        for (int i = 0; i < M; i++)
            cr_expect(out[i] == want[i], "-O%d out[%d] = %g, want %g", OPT_LEVELS[l], i,
                      (double)out[i], (double)want[i]);
        release(&p);
    }
}

Test(llvm, nested_for_break_continue) {
    const char *src = "kernel loops(x: i32[], out: i64[], m: i32) {\n"
                      "    for i in 0..len(x) {\n"
                      "        var acc: i64 = 0;\n"
                      "        for j in 0..m {\n"
                      "            if j == x[i] { break; }\n"
                      "            if j % 2 == 1 { continue; }\n"
                      "            for k in j..m { acc += i64(k * j) + 1; }\n"
                      "        }\n"
                      "        out[i] = acc;\n"
                      "    }\n"
                      "}\n";
    enum { M = 17 };
    int32_t x[M], m = 11;
    int64_t out[M], want[M];
    for (int i = 0; i < M; i++) {
        x[i] = i - 3;
        int64_t acc = 0;
        for (int j = 0; j < m; j++) {
            if (j == x[i])
                break;
            if (j % 2 == 1)
                continue;
            for (int k = j; k < m; k++)
                acc += (int64_t)(k * j) + 1;
        }
        want[i] = acc;
    }
    for (int l = 0; l < 2; l++) {
        prog p = build(src, OPT_LEVELS[l], false);
        memset(out, 0, sizeof out);
        kern_array_desc dx = desc(x, M, 1, 1), dout = desc(out, M, 1, 1);
        void *args[] = {&dx, &dout, &m};
        run(&p, "loops", args, 4);
        for (int i = 0; i < M; i++)
            cr_expect_eq(out[i], want[i], "-O%d out[%d] = %lld, want %lld", OPT_LEVELS[l], i,
                         (long long)out[i], (long long)want[i]);
        release(&p);
    }
}

/* ---- tasks -------------------------------------------------------------------------- */

Test(llvm, parallel_2d_3d_chunked) {
    const char *src = "kernel grid(a: f32[,], out: f32[,]) {\n"
                      "    for i in 1..shape(a, 0) - 1, j in 1..shape(a, 1) - 1 {\n"
                      "        out[i, j] = a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1] - "
                      "4.0 * a[i, j];\n"
                      "    }\n"
                      "}\n"
                      "kernel cube(v: i64[,,], n: i32) {\n"
                      "    for i in 0..shape(v, 0), j in 0..shape(v, 1), k in 0..shape(v, 2) {\n"
                      "        v[i, j, k] = i64(i) * 10000 + i64(j) * 100 + i64(k) + i64(n);\n"
                      "    }\n"
                      "}\n";
    enum { R = 13, C = 21, X = 5, Y = 7, Z = 9 };
    static float a[R][C], out[R][C], want[R][C];
    static int64_t v[X][Y][Z];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            a[i][j] = (float)((i * 31 + j * 17) % 23) * 0.25f;
    memset(want, 0, sizeof want);
    for (int i = 1; i < R - 1; i++)
        for (int j = 1; j < C - 1; j++) {
            float t = 4.0f * a[i][j];
            float s = a[i - 1][j] + a[i + 1][j];
            s = s + a[i][j - 1];
            s = s + a[i][j + 1];
            want[i][j] = s - t;
        }
    const int64_t chunks[] = {1, 3, 1000};
    for (int l = 0; l < 2; l++) {
        prog p = build(src, OPT_LEVELS[l], false);
        for (int c = 0; c < 3; c++) {
            memset(out, 0, sizeof out);
            kern_array_desc da = desc(a, R, C, 1), dout = desc(out, R, C, 1);
            void *args[] = {&da, &dout};
            kern_count_fn count = (kern_count_fn)llvm_jit_lookup(p.jit, "kern_grid__t0_count");
            cr_assert_eq(count(args), R - 2, "count is hi0 - lo0");
            run(&p, "grid", args, chunks[c]);
            cr_expect(memcmp(out, want, sizeof out) == 0, "-O%d grid, chunks of %lld",
                      OPT_LEVELS[l], (long long)chunks[c]);

            memset(v, 0xff, sizeof v);
            int32_t n = 7;
            kern_array_desc dv = desc(v, X, Y, Z);
            void *args3[] = {&dv, &n};
            run_mt(&p, "cube", args3, chunks[c], c == 1 ? 3 : 1);
            for (int i = 0; i < X; i++)
                for (int j = 0; j < Y; j++)
                    for (int k = 0; k < Z; k++)
                        cr_expect_eq(v[i][j][k], i * 10000 + j * 100 + k + 7);
        }
        release(&p);
    }
}

Test(llvm, serial_tasks_and_uniforms) {
    const char *src = "kernel seq(a: i32[], out: i32[], k: i32) {\n"
                      "    let n = len(a) * 2 + k;\n"
                      "    out[0] = n;\n"
                      "    for i in 0..len(a) { out[1 + i] = a[i] * n; }\n"
                      "    out[0] += 1;\n"
                      "    for i in -3..k { out[len(a) + 4 + i] = i; }\n"
                      "}\n";
    enum { M = 6 };
    int32_t a[M] = {1, -2, 3, -4, 5, 100}, out[M + 1 + 4 + 5], k = 5;
    for (int l = 0; l < 2; l++) {
        prog p = build(src, OPT_LEVELS[l], false);
        const kern_meta_kernel *mk = &p.meta->kernels[0];
        cr_assert_eq(mk->ntasks, 4);
        cr_expect(!mk->tasks[0].parallel && mk->tasks[1].parallel && !mk->tasks[2].parallel &&
                  mk->tasks[3].parallel);
        memset(out, 0, sizeof out);
        kern_array_desc da = desc(a, M, 1, 1), dout = desc(out, M + 10, 1, 1);
        void *args[] = {&da, &dout, &k};
        kern_count_fn count = (kern_count_fn)llvm_jit_lookup(p.jit, "kern_seq__t3_count");
        cr_assert_eq(count(args), 8, "-3..5 has 8 items");
        run(&p, "seq", args, 2);
        int n = M * 2 + k;
        cr_expect_eq(out[0], n + 1);
        for (int i = 0; i < M; i++)
            cr_expect_eq(out[1 + i], a[i] * n);
        for (int i = -3; i < k; i++)
            cr_expect_eq(out[M + 4 + i], i);
        /* a serial body called with an empty range does nothing */
        kern_task_fn t0 = (kern_task_fn)llvm_jit_lookup(p.jit, "kern_seq__t0");
        kern_err_record e = {0};
        out[0] = -1;
        t0(args, 0, 0, &e, NULL, NULL);
        cr_expect_eq(out[0], -1);
        release(&p);
    }
}

Test(llvm, empty_and_reversed_ranges) {
    const char *src = "kernel r(out: i32[], lo: i32, hi: i32) {\n"
                      "    for i in lo..hi { out[i] = 1; }\n"
                      "}\n";
    prog p = build(src, 3, false);
    int32_t out[4] = {0}, lo = 3, hi = 1;
    kern_array_desc d = desc(out, 4, 1, 1);
    void *args[] = {&d, &lo, &hi};
    kern_count_fn count = (kern_count_fn)llvm_jit_lookup(p.jit, "kern_r__t0_count");
    cr_expect_eq(count(args), 0, "a reversed range has no items (clamped)");
    run(&p, "r", args, 1);
    cr_expect(out[0] == 0 && out[1] == 0 && out[2] == 0 && out[3] == 0);
    release(&p);
}

/* ---- atomics ------------------------------------------------------------------------ */

Test(llvm, atomics_concurrent) {
    const char *src =
        "kernel hist(v: i32[], h: i32[], hf: f32[], hd: f64[], h64: i64[], hu: u32[]) {\n"
        "    for i in 0..len(v) {\n"
        "        h[v[i] % 8] += 1;\n"
        "        hf[v[i] % 8] += 1.0;\n"
        "        hd[v[i] % 8] -= 0.5;\n"
        "        atomic_add(h64[0], i64(v[i]));\n"
        "        atomic_sub(h64[1], i64(v[i]));\n"
        "        atomic_min(h[8], v[i] - 2000);\n"
        "        atomic_max(h[9], v[i] - 2000);\n"
        "        atomic_max(hu[0], u32(v[i]) * 1000000);\n"
        "        atomic_min(hu[1], u32(v[i]) * 1000000);\n"
        "        atomic_max(hf[8], f32(v[i]) * 0.5);\n"
        "        atomic_min(hd[8], f64(v[i]) - 100.0);\n"
        "    }\n"
        "}\n";
    enum { M = 100000 };
    static int32_t v[M];
    int32_t h[10], wh[10] = {0};
    float hf[9], whf[9] = {0};
    double hd[9], whd[9] = {0};
    int64_t h64[2], wh64[2] = {0};
    uint32_t hu[2], whu[2] = {0, UINT32_MAX};
    wh[8] = 0;
    wh[9] = -5000;
    whf[8] = -1.0f;
    whd[8] = 1e9;
    for (int i = 0; i < M; i++) {
        v[i] = (int32_t)((i * 2654435761u) % 4001u);
        wh[v[i] % 8]++;
        whf[v[i] % 8] += 1.0f;
        whd[v[i] % 8] -= 0.5;
        wh64[0] += v[i];
        wh64[1] -= v[i];
        if (v[i] - 2000 < wh[8])
            wh[8] = v[i] - 2000;
        if (v[i] - 2000 > wh[9])
            wh[9] = v[i] - 2000;
        uint32_t u = (uint32_t)v[i] * 1000000u;
        if (u > whu[0])
            whu[0] = u;
        if (u < whu[1])
            whu[1] = u;
        if ((float)v[i] * 0.5f > whf[8])
            whf[8] = (float)v[i] * 0.5f;
        if ((double)v[i] - 100.0 < whd[8])
            whd[8] = (double)v[i] - 100.0;
    }
    cr_assert(whu[0] > 2147483648u, "u32 max must exceed the signed range");
    for (int l = 0; l < 2; l++) {
        prog p = build(src, OPT_LEVELS[l], false);
        memset(h, 0, sizeof h);
        memset(hf, 0, sizeof hf);
        memset(hd, 0, sizeof hd);
        memset(h64, 0, sizeof h64);
        h[9] = -5000;
        hf[8] = -1.0f;
        hd[8] = 1e9;
        hu[0] = 0;
        hu[1] = UINT32_MAX;
        kern_array_desc dv = desc(v, M, 1, 1), dh = desc(h, 10, 1, 1), dhf = desc(hf, 9, 1, 1),
                        dhd = desc(hd, 9, 1, 1), dh64 = desc(h64, 2, 1, 1), dhu = desc(hu, 2, 1, 1);
        void *args[] = {&dv, &dh, &dhf, &dhd, &dh64, &dhu};
        run_mt(&p, "hist", args, 64, 8);
        for (int i = 0; i < 10; i++)
            cr_expect_eq(h[i], wh[i], "-O%d h[%d] = %d, want %d", OPT_LEVELS[l], i, h[i], wh[i]);
        for (int i = 0; i < 9; i++) {
            cr_expect(hf[i] == whf[i], "-O%d hf[%d] = %g, want %g", OPT_LEVELS[l], i, (double)hf[i],
                      (double)whf[i]);
            cr_expect(hd[i] == whd[i], "hd[%d] = %g, want %g", i, hd[i], whd[i]);
        }
        cr_expect(h64[0] == wh64[0] && h64[1] == wh64[1]);
        cr_expect(hu[0] == whu[0] && hu[1] == whu[1], "u32 max %u (want %u), min %u (want %u)",
                  hu[0], whu[0], hu[1], whu[1]);
        release(&p);
    }
}

Test(llvm, atomics_old_values_and_ties) {
    const char *src =
        "kernel olds(a: f32[], m: f32[], olds: f32[], xs: i32[], im: i32[], iold: i32[]) {\n"
        "    for i in 0..len(a) {\n"
        "        olds[i] = atomic_min(m[0], a[i]);\n"
        "        olds[len(a) + i] = atomic_max(m[1], a[i]);\n"
        "        olds[2 * len(a) + i] = atomic_min(m[2], a[i]);\n"
        "        iold[i] = atomic_sub(im[0], xs[i]);\n"
        "        iold[len(a) + i] = atomic_add(im[1], xs[i]);\n"
        "    }\n"
        "}\n";
    enum { M = 8 };
    float a[M] = {5.0f, 3.0f, -0.0f, 0.0f, NAN, 1.0f, -7.0f, 0.0f};
    int32_t xs[M] = {1, 2, 3, 4, 5, 6, 7, INT32_MAX};
    for (int l = 0; l < 2; l++) {
        prog p = build(src, OPT_LEVELS[l], false);
        float m[3] = {4.0f, -0.0f, NAN}, olds[3 * M];
        int32_t im[2] = {10, 0}, iold[2 * M];
        kern_array_desc da = desc(a, M, 1, 1), dm = desc(m, 3, 1, 1),
                        dold = desc(olds, 3 * M, 1, 1), dx = desc(xs, M, 1, 1),
                        dim = desc(im, 2, 1, 1), dio = desc(iold, 2 * M, 1, 1);
        void *args[] = {&da, &dm, &dold, &dx, &dim, &dio};
        run(&p, "olds", args, M); /* one chunk: items in order */
        /* the reference: a plain sequential loop with `v < old ? v : old` */
        float rm[3] = {4.0f, -0.0f, NAN};
        int32_t rim[2] = {10, 0};
        for (int i = 0; i < M; i++) {
            float o0 = rm[0], o1 = rm[1], o2 = rm[2];
            rm[0] = a[i] < rm[0] ? a[i] : rm[0];
            rm[1] = a[i] > rm[1] ? a[i] : rm[1];
            rm[2] = a[i] < rm[2] ? a[i] : rm[2];
            scalar g, w;
            g.f32 = olds[i], w.f32 = o0;
            cr_expect(same(TY_F32, g, w, 0), "-O%d min old %d: %g, want %g", OPT_LEVELS[l], i,
                      (double)olds[i], (double)o0);
            g.f32 = olds[M + i], w.f32 = o1;
            cr_expect(same(TY_F32, g, w, 0), "max old %d: %g, want %g", i, (double)olds[M + i],
                      (double)o1);
            g.f32 = olds[2 * M + i], w.f32 = o2;
            cr_expect(same(TY_F32, g, w, 0), "min-on-NaN old %d", i);
            cr_expect_eq(iold[i], rim[0]);
            cr_expect_eq(iold[M + i], rim[1]);
            rim[0] = (int32_t)((uint32_t)rim[0] - (uint32_t)xs[i]);
            rim[1] = (int32_t)((uint32_t)rim[1] + (uint32_t)xs[i]); /* wraps */
        }
        cr_expect(m[0] == -7.0f && !signbit(m[1]) && m[1] == 5.0f, "final min/max");
        cr_expect(isnan(m[2]), "NaN in memory stays (v < NaN is false)");
        cr_expect(im[0] == rim[0] && im[1] == rim[1]);
        release(&p);
    }
}

/* ---- debug mode --------------------------------------------------------------------- */

Test(llvm, debug_bounds_load_and_store) {
    /* columns counted by hand: `a` of a[i] on line 3 is column 18; the store's `=` col 16 */
    const char *src = "kernel dbg(a: f32[], out: f32[], n: i32) {\n"
                      "    for i in 0..n {\n"
                      "        out[i] = a[i] * 2.0;\n"
                      "    }\n"
                      "}\n";
    prog p = build(src, 2, true);
    float a[4] = {1, 2, 3, 4}, buf[10];
    for (int i = 0; i < 10; i++)
        buf[i] = -1.0f;
    int32_t n = 6;
    /* out has 8 elements, a 4: a[4], a[5] fail */
    kern_array_desc da = desc(a, 4, 1, 1), dout = desc(buf, 8, 1, 1);
    void *args[] = {&da, &dout, &n};
    kern_err_record e = run(&p, "dbg", args, 100);
    cr_assert_eq(e.code, KERN_DEVERR_BOUNDS);
    cr_expect_eq(e.line, 3);
    cr_expect_eq(e.col, 18);
    cr_expect_eq(e.dim, 0);
    cr_expect_eq(e.a, 4, "the first failing index wins");
    cr_expect_eq(e.b, 4);
    for (int i = 0; i < 4; i++)
        cr_expect(buf[i] == a[i] * 2.0f);
    cr_expect(buf[4] == 0.0f && buf[5] == 0.0f, "a failed load yields 0");
    cr_expect(buf[6] == -1.0f && buf[7] == -1.0f);

    /* now the store is out of bounds: out has 3 elements of a bigger buffer */
    n = 4;
    for (int i = 0; i < 10; i++)
        buf[i] = -1.0f;
    dout = desc(buf, 3, 1, 1);
    e = run(&p, "dbg", args, 1);
    cr_assert_eq(e.code, KERN_DEVERR_BOUNDS);
    cr_expect_eq(e.line, 3);
    cr_expect_eq(e.col, 16);
    cr_expect(e.a == 3 && e.b == 3 && e.dim == 0);
    cr_expect(buf[2] == 6.0f && buf[3] == -1.0f, "the store past the end is dropped");
    release(&p);
}

Test(llvm, debug_bounds_2d_negative_index) {
    const char *src = "kernel d2(m: i32[,], out: i32[], k: i32) {\n"
                      "    for i in 0..len(out) {\n"
                      "        out[i] = m[i, i - k];\n"
                      "    }\n"
                      "}\n";
    prog p = build(src, 3, true);
    int32_t m[3][3] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}, out[3] = {-1, -1, -1}, k = 1;
    kern_array_desc dm = desc(m, 3, 3, 1), dout = desc(out, 3, 1, 1);
    void *args[] = {&dm, &dout, &k};
    kern_err_record e = run(&p, "d2", args, 1);
    cr_assert_eq(e.code, KERN_DEVERR_BOUNDS);
    cr_expect(e.line == 3 && e.col == 18, "at %u:%u", e.line, e.col);
    cr_expect(e.dim == 1 && e.a == -1 && e.b == 3, "dim %d index %lld extent %lld", e.dim,
              (long long)e.a, (long long)e.b);
    cr_expect(out[0] == 0 && out[1] == 4 && out[2] == 8);
    release(&p);
}

Test(llvm, debug_div_zero_and_shift) {
    const char *src = "kernel ds(a: i32[], b: i32[], q: i32[], s: i64[], sh: i64[]) {\n"
                      "    for i in 0..len(a) {\n"
                      "        q[i] = a[i] / b[i];\n"
                      "        s[i] = i64(a[i]) << sh[i];\n"
                      "    }\n"
                      "}\n";
    prog p = build(src, 3, true);
    int32_t a[4] = {7, 8, 9, 10}, b[4] = {2, 0, 3, 0}, q[4];
    int64_t s[4], sh[4] = {1, 2, 64, 3};
    kern_array_desc da = desc(a, 4, 1, 1), db = desc(b, 4, 1, 1), dq = desc(q, 4, 1, 1),
                    dsv = desc(s, 4, 1, 1), dsh = desc(sh, 4, 1, 1);
    void *args[] = {&da, &db, &dq, &dsv, &dsh};
    kern_err_record e = run(&p, "ds", args, 4);
    cr_assert_eq(e.code, KERN_DEVERR_DIV_ZERO);
    cr_expect(e.line == 3 && e.col == 21, "at %u:%u", e.line, e.col);
    cr_expect(q[0] == 3 && q[1] == 0 && q[2] == 3 && q[3] == 0, "a failed division yields 0");
    cr_expect(s[0] == 14 && s[1] == 32 && s[2] == 0 && s[3] == 80, "a failed shift yields 0");

    /* no division error: the shift's error is recorded */
    b[1] = b[3] = 1;
    e = run(&p, "ds", args, 4);
    cr_assert_eq(e.code, KERN_DEVERR_SHIFT);
    cr_expect(e.line == 4 && e.col == 26, "at %u:%u", e.line, e.col);
    cr_expect(e.a == 64 && e.b == 64);
    release(&p);
}

static bool has(const char *text, const char *s) { return strstr(text, s) != NULL; }

Test(llvm, release_has_no_checks) {
    const char *src = "kernel k(a: i32[], b: i32[], out: i32[]) {\n"
                      "    for i in 0..len(out) { out[i] = (a[i] / b[i]) << (a[i] % b[i]); }\n"
                      "}\n";
    for (int dbg = 0; dbg < 2; dbg++) {
        for (int l = 0; l < 2; l++) {
            kc_ctx *c = kc_ctx_new();
            c->opts.opt_level = OPT_LEVELS[l];
            c->opts.debug = dbg;
            ir_module *m = kc_compile_source(c, "t.kern", src, strlen(src));
            cr_assert(m);
            char err[512];
            char *text = llvm_emit_text(m, &c->opts, err, sizeof err);
            cr_assert(text, "%s", err);
            cr_expect(has(text, "define void @kern_k__t0(") && has(text, " i64 @kern_k__t0_count("),
                      "both ABI functions are defined");
            if (dbg)
                cr_expect(has(text, "kern.record_error"), "-O%d debug code records errors",
                          OPT_LEVELS[l]);
            else
                cr_expect(!has(text, "record_error") && !has(text, "cmpxchg"),
                          "-O%d release code has no error path", OPT_LEVELS[l]);
            free(text);
            ir_module_free(m);
            kc_ctx_free(c);
        }
    }
}

/* Release builds: division by zero and INT_MIN / -1 do not trap (documented results). */
Test(llvm, release_division_never_traps) {
    const char *src = "kernel k(a: i32[], b: i32[], q: i32[], r: i32[]) {\n"
                      "    for i in 0..len(a) { q[i] = a[i] / b[i]; r[i] = a[i] % b[i]; }\n"
                      "}\n";
    prog p = build(src, 3, false);
    int32_t a[3] = {INT32_MIN, 5, INT32_MIN}, b[3] = {-1, 0, 7}, q[3], r[3];
    kern_array_desc da = desc(a, 3, 1, 1), db = desc(b, 3, 1, 1), dq = desc(q, 3, 1, 1),
                    dr = desc(r, 3, 1, 1);
    void *args[] = {&da, &db, &dq, &dr};
    run(&p, "k", args, 3);
    cr_expect(q[0] == INT32_MIN && r[0] == 0, "INT_MIN / -1 wraps");
    cr_expect(q[1] == 5 && r[1] == 0, "x / 0 divides by 1 in release builds");
    cr_expect(q[2] == INT32_MIN / 7 && r[2] == INT32_MIN % 7);
    release(&p);
}

/* ---- ahead of time: object file, shared object ---------------------------------------- */

Test(llvm, object_file_links_and_runs) {
    const char *src = "kernel saxpy(a: f32, x: f32[], y: f32[]) {\n"
                      "    for i in 0..len(x) { y[i] = a * x[i] + sin(y[i]); }\n"
                      "}\n";
    kc_ctx *c = kc_ctx_new();
    c->opts.opt_level = 3;
    ir_module *m = kc_compile_source(c, "saxpy.kern", src, strlen(src));
    cr_assert(m);
    char dir[] = "/tmp/kern-llvm-XXXXXX";
    cr_assert(mkdtemp(dir));
    char obj[128], so[128], cmd[512], err[512];
    snprintf(obj, sizeof obj, "%s/m.o", dir);
    snprintf(so, sizeof so, "%s/m.so", dir);
    const char meta[] = "kern-meta 1\nend\n";
    cr_assert(llvm_emit_object_blob(m, &c->opts, obj, "kern_module_meta", meta, sizeof meta - 1,
                                    err, sizeof err),
              "%s", err);
    FILE *f = fopen(obj, "rb");
    cr_assert(f);
    unsigned char magic[4] = {0};
    cr_assert_eq(fread(magic, 1, 4, f), 4);
    fclose(f);
    cr_expect(magic[0] == 0x7f && magic[1] == 'E' && magic[2] == 'L' && magic[3] == 'F');
    snprintf(cmd, sizeof cmd, "cc -shared -o %s %s -lm", so, obj);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    cr_assert(h, "%s", dlerror());
    kern_task_fn body = (kern_task_fn)dlsym(h, "kern_saxpy__t0");
    kern_count_fn count = (kern_count_fn)dlsym(h, "kern_saxpy__t0_count");
    const char *blob = dlsym(h, "kern_module_meta");
    cr_assert(body && count && blob);
    cr_expect_str_eq(blob, meta, "the blob is NUL-terminated");
    float x[5] = {1, 2, 3, 4, 5}, y[5] = {0.5f, -1, 2, 0, 9}, a = 1.5f, want[5];
    for (int i = 0; i < 5; i++) {
        float t = a * x[i];
        want[i] = t + sinf(y[i]);
    }
    kern_array_desc dx = desc(x, 5, 1, 1), dy = desc(y, 5, 1, 1);
    void *args[] = {&a, &dx, &dy};
    kern_err_record e = {0};
    cr_assert_eq(count(args), 5);
    body(args, 0, 2, &e, NULL, NULL);
    body(args, 2, 5, &e, NULL, NULL);
    for (int i = 0; i < 5; i++)
        cr_expect(y[i] == want[i], "y[%d] = %g, want %g", i, (double)y[i], (double)want[i]);
    dlclose(h);
    unlink(obj);
    unlink(so);
    rmdir(dir);
    /* an unwritable path is an error with a message, not a crash */
    cr_expect(!llvm_emit_object(m, &c->opts, "/nonexistent-dir/x.o", err, sizeof err));
    cr_expect(strstr(err, "/nonexistent-dir/x.o") != NULL, "message: %s", err);
    ir_module_free(m);
    kc_ctx_free(c);
}

/* ---- metadata, symbols, IR-level shapes ------------------------------------------------ */

Test(llvm, metadata_from_ir) {
    const char *src = "kernel first(x: f32[], nograd k: f32, n: i32) {\n"
                      "    let z = n * 2;\n"
                      "    for i in 0..len(x), j in 0..z { x[i] += k; }\n"
                      "    x[0] = 1.0;\n"
                      "}\n"
                      "kernel second(b: bool[,,]) {\n"
                      "    b[0, 0, 0] = true;\n"
                      "}\n";
    prog p = build(src, 2, false);
    kern_meta *m = p.meta;
    cr_assert_eq(m->nkernels, 2);
    cr_expect_str_eq(m->source, "test.kern");
    kern_meta_kernel *k = &m->kernels[0];
    cr_expect_str_eq(k->name, "first");
    cr_expect(k->line == 1 && k->col == 1);
    cr_assert_eq(k->nparams, 3);
    cr_expect_str_eq(k->params[0].name, "x");
    cr_expect(k->params[0].type == ty_array(ty_f32(), 1) && !k->params[0].nograd);
    cr_expect(k->params[1].type == ty_f32() && k->params[1].nograd);
    cr_expect(k->params[2].type == ty_i32() && !k->params[2].nograd);
    cr_assert_eq(k->ntasks, 2);
    cr_expect(k->tasks[0].parallel && k->tasks[0].ndims == 2 && k->tasks[0].line == 3 &&
              k->tasks[0].col == 5);
    cr_expect(!k->tasks[1].parallel && k->tasks[1].ndims == 0 && k->tasks[1].line == 4);
    k = &m->kernels[1];
    cr_expect_str_eq(k->name, "second");
    cr_expect(k->nparams == 1 && k->params[0].type == ty_array(ty_bool(), 3));
    cr_expect(k->ntasks == 1 && !k->tasks[0].parallel);

    /* the runtime prints and parses it back unchanged */
    kern_buf text = {0};
    kern_meta_print(&text, m);
    char err[256];
    kern_meta *back = kern_meta_parse(text.data, text.len, err, sizeof err);
    cr_assert(back, "%s\n%s", err, text.data);
    kern_buf again = {0};
    kern_meta_print(&again, back);
    cr_expect_str_eq(again.data, text.data);
    cr_expect(strstr(text.data, "param k f32 1\n") && strstr(text.data, "task parallel 2 3 5\n"),
              "%s", text.data);
    kern_meta_free(back);
    buf_free(&text);
    buf_free(&again);
    release(&p);
}

static ir_module *parse_ir(kc_ctx *c, const char *text) {
    const kern_source *s = kc_add_source(c, "t.ir", text, strlen(text));
    ir_module *m = ir_parse(text, strlen(text), s, &c->diags);
    if (!m)
        diag_print_all(stderr, &c->diags);
    cr_assert(m);
    cr_assert(ir_verify(m, &c->diags));
    return m;
}

/* Hand-written IR: a dotted kernel name, a while whose results are the forwarded values
 * (not the carried ones), an early-exit for's results, an f32 NaN constant's payload. */
Test(llvm, ir_while_forwarding_early_exit_dotted_name) {
    const char *text =
        "kernel @sim.grad(%out: i32[], %f: f32[]) {\n"
        "  serial {\n"
        "    %c0 = const 0 : i32\n"
        "    %c1 = const 1 : i32\n"
        "    %c10 = const 10 : i32\n"
        "    %r:2 = while (%x = %c0, %y = %c1) : i32, i32 {\n"
        "      %lt = lt %x, %c10 : bool\n"
        "      %x2 = add %x, %c1 : i32\n"
        "      %y2 = mul %y, %c10 : i32\n"
        "      condition %lt, %x2, %y2\n"
        "    } do (%a, %b) {\n"
        "      %a3 = add %a, %c1 : i32\n"
        "      yield %a3, %b\n"
        "    }\n"
        "    %i0 = const 0 : i32\n"
        "    store %out[%i0], %r#0\n"
        "    store %out[%c1], %r#1\n"
        "    %s:2 = for early_exit %i = %c0 to %c10 iter(%acc = %c0, %last = %c0) : i32, i32 {\n"
        "      %acc2 = add %acc, %i : i32\n"
        "      %c4 = const 4 : i32\n"
        "      %go = ne %i, %c4 : bool\n"
        "      yield %go, %acc2, %i\n"
        "    }\n"
        "    %c2 = const 2 : i32\n"
        "    %c3 = const 3 : i32\n"
        "    store %out[%c2], %s#0\n"
        "    store %out[%c3], %s#1\n"
        "    %nan = const nan(0x7fc00123) : f32\n"
        "    store %f[%i0], %nan\n"
        "  }\n"
        "}\n";
    for (int l = 0; l < 2; l++) {
        kc_ctx *c = kc_ctx_new();
        ir_module *m = parse_ir(c, text);
        kc_options o;
        kc_options_default(&o);
        o.opt_level = OPT_LEVELS[l];
        char err[512];
        llvm_jit *j = llvm_jit_compile(m, &o, err, sizeof err);
        cr_assert(j, "%s", err);
        char sb[64], sc[64];
        kern_meta_symbol(sb, sizeof sb, "sim.grad", 0, false);
        kern_meta_symbol(sc, sizeof sc, "sim.grad", 0, true);
        cr_expect_str_eq(sb, "kern_sim__grad__t0");
        kern_task_fn body = (kern_task_fn)llvm_jit_lookup(j, sb);
        kern_count_fn count = (kern_count_fn)llvm_jit_lookup(j, sc);
        cr_assert(body && count, "'.' is written \"__\" in symbols");
        cr_expect_null(llvm_jit_lookup(j, "kern_sim__grad__t1"));
        int32_t out[4] = {0};
        float f[1] = {0};
        kern_array_desc dout = desc(out, 4, 1, 1), df = desc(f, 1, 1, 1);
        void *args[] = {&dout, &df};
        kern_err_record e = {0};
        cr_expect_eq(count(args), 1);
        body(args, 0, 1, &e, NULL, NULL);
        /* while: carried (x, y) = (0, 1), (2, 10), (4, 100), .., (10, 10^5): each round
         * forwards (x + 1, 10 y) and the after region yields (x + 2, 10 y); at x = 10 the
         * condition fails and the results are the forwarded (11, 10^6) */
        cr_expect(out[0] == 11 && out[1] == 1000000, "while results %d %d", out[0], out[1]);
        /* for early_exit: i = 0..4, acc = 0+1+2+3+4 = 10, the last yield gives last = 4 */
        cr_expect(out[2] == 10 && out[3] == 4, "for results %d %d", out[2], out[3]);
        uint32_t bits;
        memcpy(&bits, f, 4);
        cr_expect_eq(bits, 0x7fc00123u, "NaN payload kept: 0x%08x", bits);
        llvm_jit_free(j);
        ir_module_free(m);
        kc_ctx_free(c);
    }
}

/* ---- compile time ------------------------------------------------------------------- */

Test(llvm, jit_compile_time_small_kernel) {
    const char *src = "kernel saxpy(a: f32, x: f32[], y: f32[]) {\n"
                      "    for i in 0..len(x) { y[i] = a * x[i] + y[i]; }\n"
                      "}\n";
    kc_ctx *c = kc_ctx_new();
    c->opts.opt_level = 3;
    ir_module *m = kc_compile_source(c, "saxpy.kern", src, strlen(src));
    cr_assert(m);
    double best = 1e9;
    llvm_jit_times bt = {0};
    for (int r = 0; r < 5; r++) {
        char err[512];
        llvm_jit *j = llvm_jit_compile(m, &c->opts, err, sizeof err);
        cr_assert(j, "%s", err);
        llvm_jit_times t = llvm_jit_get_times(j);
        if (t.total_s < best)
            best = t.total_s, bt = t;
        llvm_jit_free(j);
    }
    cr_log_info("JIT compile of saxpy at -O3: %.1f ms (emit %.2f, optimize %.2f, codegen %.2f)",
                best * 1e3, bt.emit_s * 1e3, bt.opt_s * 1e3, bt.codegen_s * 1e3);
    /* the aim is 30 ms (docs/backend-cpu.md); this bound only catches gross regressions on
     * a loaded machine, with room for sanitizers' slow malloc */
#if defined(__SANITIZE_ADDRESS__)
    double bound = 2.0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    double bound = 2.0;
#else
    double bound = 0.5;
#endif
#else
    double bound = 0.5;
#endif
    cr_expect(best < bound, "JIT compile took %.1f ms", best * 1e3);
    ir_module_free(m);
    kc_ctx_free(c);
}

/* Index types u32 and i64: the range [lo, hi) crosses 2^31 (u32) or lies beyond 2^32
 * (i64); counts and indices use the index type's own arithmetic. */
Test(llvm, parallel_u32_and_i64_indices) {
    const char *src = "kernel u(out: u32[], lo: u32, hi: u32) {\n"
                      "    for i in lo..hi { out[i - lo] = i; }\n"
                      "}\n"
                      "kernel w(out: i64[], lo: i64, hi: i64) {\n"
                      "    for i in lo..hi { out[i - lo] = i; }\n"
                      "}\n";
    for (int l = 0; l < 2; l++) {
        prog p = build(src, OPT_LEVELS[l], true);
        uint32_t out[20], lo = 2147483640u, hi = 2147483660u;
        kern_array_desc d = desc(out, 20, 1, 1);
        void *args[] = {&d, &lo, &hi};
        kern_count_fn count = (kern_count_fn)llvm_jit_lookup(p.jit, "kern_u__t0_count");
        cr_assert_eq(count(args), 20);
        kern_err_record e = run(&p, "u", args, 3);
        cr_expect_eq(e.code, 0);
        for (int i = 0; i < 20; i++)
            cr_expect_eq(out[i], lo + (uint32_t)i);
        int64_t o64[5], lo64 = (int64_t)1 << 40, hi64 = lo64 + 5;
        kern_array_desc d64 = desc(o64, 5, 1, 1);
        void *args64[] = {&d64, &lo64, &hi64};
        e = run(&p, "w", args64, 2);
        cr_expect_eq(e.code, 0);
        for (int i = 0; i < 5; i++)
            cr_expect_eq(o64[i], lo64 + i);
        release(&p);
    }
}

/* Debug checks in uniform top-level values (re-emitted in the task body; the count
 * function has no error record and must not trap) and in atomics (skipped, yield 0). */
Test(llvm, debug_uniform_division_and_atomic_bounds) {
    const char *src = "kernel u(a: i32[], h: i32[], old: i32[], k: i32) {\n"
                      "    let q = len(a) / k;\n"
                      "    for i in 0..len(a) {\n"
                      "        old[i] = atomic_add(h[a[i]], 1) + q;\n"
                      "    }\n"
                      "    for i in 0..q { h[0] = 0; }\n"
                      "}\n";
    prog p = build(src, 3, true);
    int32_t a[4] = {0, 1, 7, 1}, h[2] = {10, 20}, old[4], k = 2;
    kern_array_desc da = desc(a, 4, 1, 1), dh = desc(h, 2, 1, 1), dold = desc(old, 4, 1, 1);
    void *args[] = {&da, &dh, &dold, &k};
    kern_err_record e = run(&p, "u", args, 1);
    cr_assert_eq(e.code, KERN_DEVERR_BOUNDS);
    /* an atomic is located at its call, column 18 */
    cr_expect(e.line == 4 && e.col == 18 && e.a == 7 && e.b == 2, "at %u:%u index %lld", e.line,
              e.col, (long long)e.a);
    cr_expect(old[0] == 12 && old[1] == 22 && old[2] == 2 && old[3] == 23,
              "the failed atomic yields 0: %d %d %d %d", old[0], old[1], old[2], old[3]);
    cr_expect(h[0] == 0 && h[1] == 22);

    k = 0;
    kern_count_fn count = (kern_count_fn)llvm_jit_lookup(p.jit, "kern_u__t1_count");
    cr_expect_eq(count(args), 4, "no check in count functions: 4 / 0 divides by 1");
    e = run(&p, "u", args, 4);
    cr_assert_eq(e.code, KERN_DEVERR_DIV_ZERO, "the body reports the uniform division");
    cr_expect(e.line == 2 && e.col == 20, "at %u:%u", e.line, e.col);
    release(&p);
}

/* ---- adstacks and atomic_xchg (built with the IR builder) ----------------------------- */

static kern_loc LOC(uint32_t line, uint32_t col) { return (kern_loc){line, col}; }

static const int AD_OPT_LEVELS[] = {0, 2};

static llvm_jit *jit_ir(ir_module *m, int opt, bool debug) {
    kc_options o;
    kc_options_default(&o);
    o.opt_level = opt;
    o.debug = debug;
    char err[1024];
    llvm_jit *j = llvm_jit_compile(m, &o, err, sizeof err);
    cr_assert(j, "JIT failed: %s", err);
    return j;
}

/* A slice of `bytes` bytes filled with the canary 0xAB, 64-byte aligned. */
static unsigned char *canary_slice(size_t bytes) {
    size_t n = (bytes + 63) / 64 * 64;
    unsigned char *s = aligned_alloc(64, n ? n : 64);
    cr_assert(s);
    memset(s, 0xAB, n ? n : 64);
    return s;
}

/* The value item i pushes at step t on the stack of kind k: IR below, C here. */
static scalar ad_ref(kern_tykind k, int32_t i, int32_t t) {
    scalar s;
    memset(&s, 0, sizeof s);
    int32_t v = i * 1000 + t;
    switch (k) {
    case TY_BOOL: s.b = (uint8_t)((i + t) & 1); break;
    case TY_I32: s.i32 = v * -3; break;
    case TY_U32: s.u32 = (uint32_t)v ^ 0x80000000u; break;
    case TY_I64: s.i64 = (int64_t)v * ((int64_t)1 << 33) + 7; break;
    case TY_F32: s.f32 = (float)v * 0.25f + 0.5f; break;
    default: s.f64 = (double)v + 0.125; break;
    }
    return s;
}

static ir_value *ad_ir_value(ir_builder *b, kern_tykind k, ir_value *i, ir_value *t) {
    const kern_type *ti = ty_i32();
    ir_value *v = ir_binop(b, IR_ADD, ir_binop(b, IR_MUL, i, ir_const_int(b, ti, 1000)), t);
    switch (k) {
    case TY_BOOL:
        return ir_binop(b, IR_NE,
                        ir_binop(b, IR_AND, ir_binop(b, IR_ADD, i, t), ir_const_int(b, ti, 1)),
                        ir_const_int(b, ti, 0));
    case TY_I32: return ir_binop(b, IR_MUL, v, ir_const_int(b, ti, -3));
    case TY_U32:
        return ir_binop(b, IR_XOR, ir_cast(b, ty_u32(), v),
                        ir_const_int(b, ty_u32(), 0x80000000ll));
    case TY_I64:
        return ir_binop(b, IR_ADD,
                        ir_binop(b, IR_MUL, ir_cast(b, ty_i64(), v),
                                 ir_const_int(b, ty_i64(), (int64_t)1 << 33)),
                        ir_const_int(b, ty_i64(), 7));
    case TY_F32:
        return ir_binop(
            b, IR_ADD,
            ir_binop(b, IR_MUL, ir_cast(b, ty_f32(), v), ir_const_float(b, ty_f32(), 0.25)),
            ir_const_float(b, ty_f32(), 0.5));
    default:
        return ir_binop(b, IR_ADD, ir_cast(b, ty_f64(), v), ir_const_float(b, ty_f64(), 0.125));
    }
}

/* kernel lifo(items: i32, n: i32, push_line: i32, out_k: K[] for the 6 kinds):
 *   parallel i in 0..items {
 *     for t in 0..n { push_k(value_k(i, t)) for every kind }        (adpush at 7:9)
 *     for t in 0..n { out_k[i * n + t] = pop_k() for every kind }
 *   }
 * or, with `serial`, the same body once with i = 0 in a serial task. One adstack per
 * kind, in the order of ALL_KINDS. */
static ir_module *build_lifo(bool serial) {
    ir_module *m = ir_module_new("lifo.kern");
    ir_param ps[3 + NKINDS] = {{"items", ty_i32(), false, LOC(1, 1)},
                               {"n", ty_i32(), false, LOC(1, 2)},
                               {"unused", ty_i32(), false, LOC(1, 3)}};
    static const char *names[NKINDS] = {"ob", "oi", "ou", "ol", "of", "od"};
    for (int k = 0; k < NKINDS; k++)
        ps[3 + k] = (ir_param){names[k], ty_array(ty_scalar(ALL_KINDS[k]), 1), false, LOC(1, 4)};
    ir_kernel *kn = ir_kernel_new(m, "lifo", LOC(1, 1), ps, 3 + NKINDS);
    for (int k = 0; k < NKINDS; k++)
        ir_kernel_add_adstack(kn, ty_scalar(ALL_KINDS[k]), "(param 1)", LOC(6, 5));
    ir_value *items = kn->body->args[0], *n = kn->body->args[1];
    ir_builder top = ir_builder_at_end(m, kn->body);
    ir_value *zero = ir_const_int(&top, ty_i32(), 0);
    ir_region *body;
    ir_value *i;
    if (serial) {
        body = ir_serial(&top)->regions[0];
        ir_builder sb = ir_builder_at_end(m, body);
        i = ir_const_int(&sb, ty_i32(), 0);
    } else {
        ir_value *bounds[2] = {zero, items};
        body = ir_parallel(&top, bounds, 1)->regions[0];
        i = body->args[0];
    }
    ir_builder b = ir_builder_at_end(m, body);
    ir_op *f1 = ir_for(&b, zero, n, NULL, 0, false);
    ir_builder lb = ir_builder_at_end(m, f1->regions[0]);
    ir_value *t = f1->regions[0]->args[0];
    for (int k = 0; k < NKINDS; k++) {
        ir_value *v = ad_ir_value(&lb, ALL_KINDS[k], i, t);
        lb.loc = LOC(7, 9);
        ir_adpush(&lb, (uint32_t)k, v);
        lb.loc = LOC(0, 0);
    }
    ir_yield(&lb, NULL, 0);
    ir_op *f2 = ir_for(&b, zero, n, NULL, 0, false);
    lb = ir_builder_at_end(m, f2->regions[0]);
    t = f2->regions[0]->args[0];
    ir_value *idx = ir_binop(&lb, IR_ADD, ir_binop(&lb, IR_MUL, i, n), t);
    for (int k = 0; k < NKINDS; k++)
        ir_store(&lb, kn->body->args[3 + k], &idx, 1, ir_adpop(&lb, (uint32_t)k));
    ir_yield(&lb, NULL, 0);
    return m;
}

/* Lays out the 6 stacks of lifo with capacity cap each, back to back in the order
 * f64 i64 f32 i32 u32 bool (descending size keeps them aligned), then `gap` canary
 * bytes. Returns the slice size. */
static size_t lifo_layout(int64_t layout[2 * NKINDS], int64_t cap, size_t gap) {
    static const int order[NKINDS] = {5, 3, 4, 1, 2, 0}; /* indices into ALL_KINDS */
    size_t off = 0;
    for (int o = 0; o < NKINDS; o++) {
        int k = order[o];
        layout[2 * k] = (int64_t)off;
        layout[2 * k + 1] = cap;
        off += (size_t)cap * ksize(ALL_KINDS[k]);
    }
    return off + gap;
}

Test(llvm, adstack_lifo_every_type_chunked) {
    enum { ITEMS = 7, NPUSH = 9 };
    for (int serial = 0; serial < 2; serial++) {
        for (int l = 0; l < 2; l++) {
            ir_module *m = build_lifo(serial);
            llvm_jit *j = jit_ir(m, AD_OPT_LEVELS[l], false);
            kern_task_fn body = (kern_task_fn)llvm_jit_lookup(j, "kern_lifo__t0");
            kern_count_fn count = (kern_count_fn)llvm_jit_lookup(j, "kern_lifo__t0_count");
            cr_assert(body && count);
            int32_t items = ITEMS, n = NPUSH, unused = 0;
            void *bufs[NKINDS];
            kern_array_desc d[NKINDS];
            void *args[3 + NKINDS] = {&items, &n, &unused};
            for (int k = 0; k < NKINDS; k++) {
                bufs[k] = calloc(ITEMS * NPUSH, ksize(ALL_KINDS[k]));
                d[k] = desc(bufs[k], ITEMS * NPUSH, 1, 1);
                args[3 + k] = &d[k];
            }
            int64_t layout[2 * NKINDS];
            enum { GAP = 40 };
            size_t bytes = lifo_layout(layout, NPUSH, GAP);
            unsigned char *slice = canary_slice(bytes);
            kern_err_record e = {0};
            int64_t cnt = count(args);
            cr_assert_eq(cnt, serial ? 1 : ITEMS);
            /* several items per call, one slice for all of them */
            for (int64_t b0 = 0; b0 < cnt; b0 += 3)
                body(args, b0, b0 + 3 < cnt ? b0 + 3 : cnt, &e, slice, layout);
            cr_expect_eq(e.code, 0, "no error: code %d", e.code);
            int nitems = serial ? 1 : ITEMS;
            for (int k = 0; k < NKINDS; k++) {
                kern_tykind kk = ALL_KINDS[k];
                for (int i = 0; i < nitems; i++) {
                    for (int t = 0; t < NPUSH; t++) {
                        scalar got = get(bufs[k], kk, i * NPUSH + t);
                        scalar want = ad_ref(kk, i, NPUSH - 1 - t); /* last in, first out */
                        char g[64], w[64];
                        show(g, sizeof g, kk, got);
                        show(w, sizeof w, kk, want);
                        cr_expect(same(kk, got, want, 0), "%s O%d %s item %d pop %d: %s, want %s",
                                  serial ? "serial" : "parallel", AD_OPT_LEVELS[l], kname(kk), i, t,
                                  g, w);
                    }
                }
                /* the stack's entries hold the last item's pushes, in order: the stacks
                 * lie where the layout says and do not overlap */
                for (int t = 0; t < NPUSH; t++) {
                    scalar got = get(slice + layout[2 * k], kk, t);
                    cr_expect(same(kk, got, ad_ref(kk, nitems - 1, t), 0),
                              "%s entry %d of its stack", kname(kk), t);
                }
            }
            for (size_t x = bytes - GAP; x < bytes; x++)
                cr_expect_eq(slice[x], 0xAB, "canary byte %zu after the stacks", x);
            for (int k = 0; k < NKINDS; k++)
                free(bufs[k]);
            free(slice);
            llvm_jit_free(j);
            ir_module_free(m);
        }
    }
}

/* Per-item reset: every item pushes 3 values and pops only 1. Capacity 3 fits one item;
 * without the reset at the start of each item the second item of a call would overflow. */
Test(llvm, adstack_reset_per_item) {
    for (int l = 0; l < 2; l++) {
        ir_module *m = ir_module_new("reset.kern");
        ir_param ps[2] = {{"items", ty_i32(), false, LOC(1, 1)},
                          {"out", ty_array(ty_f32(), 2), false, LOC(1, 2)}};
        ir_kernel *kn = ir_kernel_new(m, "reset", LOC(1, 1), ps, 2);
        uint32_t s = ir_kernel_add_adstack(kn, ty_f32(), "3", LOC(3, 5));
        ir_builder top = ir_builder_at_end(m, kn->body);
        ir_value *zero = ir_const_int(&top, ty_i32(), 0), *two = ir_const_int(&top, ty_i32(), 2);
        ir_value *bounds[4] = {zero, kn->body->args[0], zero, two}; /* 2-D: items x 2 */
        ir_region *body = ir_parallel(&top, bounds, 2)->regions[0];
        ir_value *i = body->args[0], *jj = body->args[1];
        ir_builder b = ir_builder_at_end(m, body);
        ir_value *three = ir_const_int(&b, ty_i32(), 3);
        ir_op *f = ir_for(&b, zero, three, NULL, 0, false);
        ir_builder lb = ir_builder_at_end(m, f->regions[0]);
        ir_value *t = f->regions[0]->args[0];
        ir_value *v =
            ir_binop(&lb, IR_ADD, ir_binop(&lb, IR_MUL, i, ir_const_int(&lb, ty_i32(), 10)),
                     ir_binop(&lb, IR_ADD, t, ir_binop(&lb, IR_MUL, jj, three)));
        ir_adpush(&lb, s, ir_cast(&lb, ty_f32(), v));
        ir_yield(&lb, NULL, 0);
        ir_value *idx[2] = {i, jj};
        ir_store(&b, kn->body->args[1], idx, 2, ir_adpop(&b, s));

        llvm_jit *j = jit_ir(m, AD_OPT_LEVELS[l], true);
        kern_task_fn fn = (kern_task_fn)llvm_jit_lookup(j, "kern_reset__t0");
        int32_t items = 6;
        float out[6][2];
        memset(out, 0, sizeof out);
        kern_array_desc d = desc(out, 6, 2, 1);
        void *args[2] = {&items, &d};
        int64_t layout[2] = {8, 3};
        unsigned char *slice = canary_slice(8 + 12 + 8);
        kern_err_record e = {0};
        fn(args, 0, 4, &e, slice, layout);
        fn(args, 4, 6, &e, slice, layout);
        cr_expect_eq(e.code, 0, "O%d: code %d (a %lld)", AD_OPT_LEVELS[l], e.code, (long long)e.a);
        for (int x = 0; x < 6; x++)
            for (int y = 0; y < 2; y++)
                cr_expect_eq(out[x][y], (float)(10 * x + 3 * y + 2), "out[%d][%d] = %g", x, y,
                             (double)out[x][y]);
        float last[3];
        memcpy(last, slice + 8, sizeof last);
        cr_expect(last[0] == 53 && last[1] == 54 && last[2] == 55, "the last item's entries");
        for (int x = 0; x < 8; x++)
            cr_expect(slice[x] == 0xAB && slice[20 + x] == 0xAB, "canaries around the stack");
        free(slice);
        llvm_jit_free(j);
        ir_module_free(m);
    }
}

/* kernel ovf(items: i32, npush: i32, out: i64[]): per item i, with c = npush + i % 4,
 * push 100 * i + t for t in 0..c (adpush at 12:34), then out[8 * i + t] = pop for t in
 * 0..c. One i64 stack. */
static ir_module *build_overflow(void) {
    ir_module *m = ir_module_new("ovf.kern");
    ir_param ps[3] = {{"items", ty_i32(), false, LOC(1, 1)},
                      {"npush", ty_i32(), false, LOC(1, 2)},
                      {"out", ty_array(ty_i64(), 1), false, LOC(1, 3)}};
    ir_kernel *kn = ir_kernel_new(m, "ovf", LOC(1, 1), ps, 3);
    uint32_t s = ir_kernel_add_adstack(kn, ty_i64(), "(param 1)", LOC(12, 5));
    ir_value *items = kn->body->args[0], *np = kn->body->args[1], *out = kn->body->args[2];
    ir_builder top = ir_builder_at_end(m, kn->body);
    ir_value *zero = ir_const_int(&top, ty_i32(), 0);
    ir_value *bounds[2] = {zero, items};
    ir_region *body = ir_parallel(&top, bounds, 1)->regions[0];
    ir_value *i = body->args[0];
    ir_builder b = ir_builder_at_end(m, body);
    ir_value *c = ir_binop(&b, IR_ADD, np, ir_binop(&b, IR_REM, i, ir_const_int(&b, ty_i32(), 4)));
    ir_op *f = ir_for(&b, zero, c, NULL, 0, false);
    ir_builder lb = ir_builder_at_end(m, f->regions[0]);
    ir_value *t = f->regions[0]->args[0];
    ir_value *v =
        ir_binop(&lb, IR_ADD, ir_binop(&lb, IR_MUL, i, ir_const_int(&lb, ty_i32(), 100)), t);
    lb.loc = LOC(12, 34);
    ir_adpush(&lb, s, ir_cast(&lb, ty_i64(), v));
    ir_yield(&lb, NULL, 0);
    f = ir_for(&b, zero, c, NULL, 0, false);
    lb = ir_builder_at_end(m, f->regions[0]);
    t = f->regions[0]->args[0];
    ir_value *idx =
        ir_binop(&lb, IR_ADD, ir_binop(&lb, IR_MUL, i, ir_const_int(&lb, ty_i32(), 8)), t);
    ir_store(&lb, out, &idx, 1, ir_adpop(&lb, s));
    ir_yield(&lb, NULL, 0);
    return m;
}

/* Capacity 3, 5 pushes: the record says ADSTACK at the push's line:col, b = 3, a = 5;
 * nothing is written past the capacity; pops from beyond it give 0. */
Test(llvm, adstack_overflow_record_and_no_write) {
    for (int l = 0; l < 2; l++) {
        ir_module *m = build_overflow();
        llvm_jit *j = jit_ir(m, AD_OPT_LEVELS[l], false); /* release: checked all the same */
        kern_task_fn fn = (kern_task_fn)llvm_jit_lookup(j, "kern_ovf__t0");
        int32_t items = 1, np = 5;
        int64_t out[5] = {-1, -1, -1, -1, -1};
        kern_array_desc d = desc(out, 5, 1, 1);
        void *args[3] = {&items, &np, &d};
        int64_t layout[2] = {16, 3};
        enum { BYTES = 16 + 3 * 8 + 32 };
        unsigned char *slice = canary_slice(BYTES);
        kern_err_record e = {0};
        fn(args, 0, 1, &e, slice, layout);
        cr_expect_eq(e.code, KERN_DEVERR_ADSTACK);
        cr_expect(e.line == 12 && e.col == 34, "at %u:%u", e.line, e.col);
        cr_expect_eq(e.b, 3, "capacity %lld", (long long)e.b);
        cr_expect_eq(e.a, 5, "depth needed %lld", (long long)e.a);
        int64_t want[5] = {0, 0, 2, 1, 0};
        for (int t = 0; t < 5; t++)
            cr_expect_eq(out[t], want[t], "O%d pop %d: %lld", AD_OPT_LEVELS[l], t,
                         (long long)out[t]);
        for (int x = 0; x < BYTES; x++)
            if (x < 16 || x >= 16 + 24)
                cr_expect_eq(slice[x], 0xAB, "byte %d outside the stack written", x);

        /* a record that already holds another error is left as it is */
        kern_err_record other = {.code = KERN_DEVERR_BOUNDS, .line = 1, .col = 2, .a = 9, .b = 10};
        fn(args, 0, 1, &other, slice, layout);
        cr_expect(other.code == KERN_DEVERR_BOUNDS && other.line == 1 && other.col == 2 &&
                      other.a == 9 && other.b == 10,
                  "another error's record is kept");

        /* a caller without a slice: every push overflows (capacity 0), nothing crashes */
        kern_err_record none = {0};
        np = 4;
        fn(args, 0, 1, &none, NULL, NULL);
        cr_expect(none.code == KERN_DEVERR_ADSTACK && none.b == 0 && none.a == 4,
                  "no slice: code %d b %lld a %lld", none.code, (long long)none.b,
                  (long long)none.a);
        cr_expect(out[0] == 0 && out[3] == 0, "pops without a slice give 0");
        free(slice);
        llvm_jit_free(j);
        ir_module_free(m);
    }
}

typedef struct ad_worker {
    kern_task_fn body;
    void *const *args;
    int64_t count, chunk;
    atomic_llong *next;
    kern_err_record *err;
    unsigned char *slice;
    const int64_t *layout;
} ad_worker;

static void *ad_work(void *arg) {
    ad_worker *w = arg;
    for (;;) {
        int64_t b = atomic_fetch_add(w->next, w->chunk);
        if (b >= w->count)
            return NULL;
        int64_t e = b + w->chunk < w->count ? b + w->chunk : w->count;
        w->body(w->args, b, e, w->err, w->slice, w->layout);
    }
}

/* 8 threads, each with its own slice, overflow at different depths (items push 4..7
 * values onto a stack of capacity 3): the record ends with the deepest, 7. */
Test(llvm, adstack_overflow_many_threads_deepest) {
    ir_module *m = build_overflow();
    llvm_jit *j = jit_ir(m, 2, false);
    kern_task_fn fn = (kern_task_fn)llvm_jit_lookup(j, "kern_ovf__t0");
    enum { ITEMS = 64, THREADS = 8, NP = 4, CAP = 3 };
    int32_t items = ITEMS, np = NP;
    int64_t *out = calloc(ITEMS * 8, sizeof *out);
    kern_array_desc d = desc(out, ITEMS * 8, 1, 1);
    void *args[3] = {&items, &np, &d};
    int64_t layout[2] = {0, CAP};
    kern_err_record e = {0};
    atomic_llong next = 0;
    ad_worker w[THREADS];
    pthread_t th[THREADS];
    for (int k = 0; k < THREADS; k++) {
        w[k] = (ad_worker){fn, args, ITEMS, 1, &next, &e, canary_slice(CAP * 8 + 8), layout};
        pthread_create(&th[k], NULL, ad_work, &w[k]);
    }
    for (int k = 0; k < THREADS; k++)
        pthread_join(th[k], NULL);
    cr_expect(e.code == KERN_DEVERR_ADSTACK && e.a == NP + 3 && e.b == CAP && e.line == 12,
              "code %d a %lld b %lld line %u", e.code, (long long)e.a, (long long)e.b, e.line);
    for (int i = 0; i < ITEMS; i++) {
        int c = NP + i % 4; /* pops c - 1 .. 0: the first c - CAP are beyond the capacity */
        for (int t = 0; t < c; t++) {
            int64_t want = t < c - CAP ? 0 : 100 * i + (c - 1 - t);
            cr_expect_eq(out[i * 8 + t], want, "item %d pop %d", i, t);
        }
    }
    for (int k = 0; k < THREADS; k++) {
        for (int x = CAP * 8; x < CAP * 8 + 8; x++)
            cr_expect_eq(w[k].slice[x], 0xAB, "thread %d canary", k);
        free(w[k].slice);
    }
    free(out);
    llvm_jit_free(j);
    ir_module_free(m);
}

/* The checks stay in optimized release code, and the depth counters become registers. */
Test(llvm, adstack_release_code_checked_counters_promoted) {
    ir_module *m = build_lifo(false);
    kc_options o;
    kc_options_default(&o);
    o.opt_level = 2;
    o.debug = false;
    char err[512];
    char *text = llvm_emit_text(m, &o, err, sizeof err);
    cr_assert(text, "%s", err);
    cr_expect(has(text, "define void @kern_lifo__t0(ptr ") && has(text, "ptr noalias nocapture"),
              "6 parameters, the slice noalias");
    cr_expect(has(text, "@kern.adstack_overflow"), "the overflow path is kept at -O2");
    cr_expect(has(text, "cmpxchg") && has(text, "atomicrmw max"), "the overflow record");
    cr_expect(!has(text, "alloca"), "depth counters promoted to registers");
    free(text);
    ir_module_free(m);
}

/* atomic_xchg from 8 threads: every value written is returned exactly once as an old
 * value or left in the cell, so the olds and the final value are a permutation of
 * 0..N (the cell starts at 0, item i writes i + 1). */
Test(llvm, atomic_xchg_threads_i32_f32) {
    enum { NX = 20000, THREADS = 8 };
    for (int l = 0; l < 2; l++) {
        for (int debug = 0; debug < 2; debug++) {
            ir_module *m = ir_module_new("xchg.kern");
            ir_param ps[4] = {{"ci", ty_array(ty_i32(), 1), false, LOC(1, 1)},
                              {"cf", ty_array(ty_f32(), 1), false, LOC(1, 2)},
                              {"oi", ty_array(ty_i32(), 1), false, LOC(1, 3)},
                              {"of", ty_array(ty_f32(), 1), false, LOC(1, 4)}};
            ir_kernel *kn = ir_kernel_new(m, "xchg", LOC(1, 1), ps, 4);
            ir_value **a = kn->body->args;
            ir_builder top = ir_builder_at_end(m, kn->body);
            ir_value *zero = ir_const_int(&top, ty_i32(), 0);
            ir_value *bounds[2] = {zero, ir_dim(&top, a[2], 0)};
            ir_region *body = ir_parallel(&top, bounds, 1)->regions[0];
            ir_value *i = body->args[0];
            ir_builder b = ir_builder_at_end(m, body);
            ir_value *v = ir_binop(&b, IR_ADD, i, ir_const_int(&b, ty_i32(), 1));
            /* the cell index is i - i (0, but not a constant for LLVM before folding) */
            ir_value *c0 = ir_binop(&b, IR_SUB, i, i);
            b.loc = LOC(5, 7);
            ir_store(&b, a[2], &i, 1, ir_atomic(&b, IR_ATOMIC_XCHG, a[0], &c0, 1, v));
            ir_store(&b, a[3], &i, 1,
                     ir_atomic(&b, IR_ATOMIC_XCHG, a[1], &c0, 1, ir_cast(&b, ty_f32(), v)));

            llvm_jit *j = jit_ir(m, AD_OPT_LEVELS[l], debug);
            kern_task_fn fn = (kern_task_fn)llvm_jit_lookup(j, "kern_xchg__t0");
            int32_t ci = 0, *oi = calloc(NX, sizeof *oi);
            float cf = 0, *of = calloc(NX, sizeof *of);
            kern_array_desc d[4] = {desc(&ci, 1, 1, 1), desc(&cf, 1, 1, 1), desc(oi, NX, 1, 1),
                                    desc(of, NX, 1, 1)};
            void *args[4] = {&d[0], &d[1], &d[2], &d[3]};
            kern_err_record e = {0};
            atomic_llong next = 0;
            ad_worker w[THREADS];
            pthread_t th[THREADS];
            for (int k = 0; k < THREADS; k++) {
                w[k] = (ad_worker){fn, args, NX, 7, &next, &e, NULL, NULL};
                pthread_create(&th[k], NULL, ad_work, &w[k]);
            }
            for (int k = 0; k < THREADS; k++)
                pthread_join(th[k], NULL);
            cr_expect_eq(e.code, 0);
            unsigned char *seen_i = calloc(NX + 1, 1), *seen_f = calloc(NX + 1, 1);
            int64_t sum_i = ci, bad = 0;
            double sum_f = cf;
            for (int x = 0; x < NX; x++) {
                sum_i += oi[x];
                sum_f += of[x];
                bad += oi[x] < 0 || oi[x] > NX || seen_i[oi[x]]++;
                bad += !(of[x] >= 0 && of[x] <= NX && of[x] == (float)(int)of[x]) ||
                       seen_f[(int)of[x]]++;
            }
            bad += seen_i[ci]++ || seen_f[(int)cf]++;
            int64_t total = (int64_t)NX * (NX + 1) / 2;
            cr_expect_eq(sum_i, total, "O%d i32: olds + final = %lld", AD_OPT_LEVELS[l],
                         (long long)sum_i);
            cr_expect(sum_f == (double)total, "O%d f32: olds + final = %.17g", AD_OPT_LEVELS[l],
                      sum_f);
            cr_expect_eq(bad, 0, "each of 0..N appears once among the olds and the final value");
            free(seen_i);
            free(seen_f);
            free(oi);
            free(of);
            llvm_jit_free(j);
            ir_module_free(m);
        }
    }
}

/* atomic_xchg in debug mode: an index out of bounds is recorded and the exchange skipped
 * (yields 0); also i64, f64 and u32 cells in one thread. */
Test(llvm, atomic_xchg_bounds_and_types) {
    for (int l = 0; l < 2; l++) {
        ir_module *m = ir_module_new("xchg2.kern");
        ir_param ps[4] = {{"cl", ty_array(ty_i64(), 1), false, LOC(1, 1)},
                          {"cd", ty_array(ty_f64(), 1), false, LOC(1, 2)},
                          {"cb", ty_array(ty_u32(), 1), false, LOC(1, 3)},
                          {"old", ty_array(ty_f64(), 1), false, LOC(1, 4)}};
        ir_kernel *kn = ir_kernel_new(m, "x2", LOC(1, 1), ps, 4);
        ir_value **a = kn->body->args;
        ir_builder top = ir_builder_at_end(m, kn->body);
        ir_region *body = ir_serial(&top)->regions[0];
        ir_builder b = ir_builder_at_end(m, body);
        ir_value *z = ir_const_int(&b, ty_i32(), 0), *one = ir_const_int(&b, ty_i32(), 1),
                 *two = ir_const_int(&b, ty_i32(), 2), *three = ir_const_int(&b, ty_i32(), 3);
        ir_value *ol = ir_atomic(&b, IR_ATOMIC_XCHG, a[0], &z, 1,
                                 ir_const_int(&b, ty_i64(), -((int64_t)1 << 40)));
        ir_store(&b, a[3], &z, 1, ir_cast(&b, ty_f64(), ol));
        ir_value *od =
            ir_atomic(&b, IR_ATOMIC_XCHG, a[1], &z, 1, ir_const_float(&b, ty_f64(), -2.5));
        ir_store(&b, a[3], &one, 1, od);
        ir_value *ob =
            ir_atomic(&b, IR_ATOMIC_XCHG, a[2], &z, 1, ir_const_int(&b, ty_u32(), 0x80000001ll));
        ir_store(&b, a[3], &two, 1, ir_cast(&b, ty_f64(), ob));
        b.loc = LOC(9, 3);
        ir_value *bad =
            ir_atomic(&b, IR_ATOMIC_XCHG, a[1], &three, 1, ir_const_float(&b, ty_f64(), 7.0));
        ir_store(&b, a[3], &three, 1, bad);

        llvm_jit *j = jit_ir(m, AD_OPT_LEVELS[l], true);
        kern_task_fn fn = (kern_task_fn)llvm_jit_lookup(j, "kern_x2__t0");
        int64_t cl = 123456789012345ll;
        double cd = 0.75, old[4] = {-1, -1, -1, -1};
        uint32_t cb = 0xFFFFFFFFu;
        kern_array_desc d[4] = {desc(&cl, 1, 1, 1), desc(&cd, 1, 1, 1), desc(&cb, 1, 1, 1),
                                desc(old, 4, 1, 1)};
        void *args[4] = {&d[0], &d[1], &d[2], &d[3]};
        kern_err_record e = {0};
        fn(args, 0, 1, &e, NULL, NULL);
        cr_expect(cl == -((int64_t)1 << 40) && cd == -2.5 && cb == 0x80000001u,
                  "new values stored");
        cr_expect(old[0] == 123456789012345.0 && old[1] == 0.75 && old[2] == 4294967295.0,
                  "old values %g %g %g", old[0], old[1], old[2]);
        cr_expect(e.code == KERN_DEVERR_BOUNDS && e.line == 9 && e.col == 3 && e.a == 3 && e.b == 1,
                  "bounds record %d %u:%u", e.code, e.line, e.col);
        cr_expect_eq(old[3], 0.0, "the skipped exchange yields 0");
        llvm_jit_free(j);
        ir_module_free(m);
    }
}

/* llvm_reduce.c: atomic adds into uniform elements accumulate per task call. The sums
 * must equal a C loop's (integers exactly; floats within rounding), from several
 * threads and chunk sizes, and the emitted code must hold one atomic per reduction
 * instead of one per work item (release), or keep the per-item atomics (debug). */
static int count_of(const char *text, const char *s) {
    int n = 0;
    for (const char *p = strstr(text, s); p; p = strstr(p + 1, s))
        n++;
    return n;
}

Test(llvm, reductions_accumulate_per_call) {
    const char *src = "kernel red(x: f64[], n: i64[], s: f64[], t: f64[], m: i32[], k: i32) {\n"
                      "    for i in 0..len(x) {\n"
                      "        s[k] += x[i] * x[i];\n" /* uniform index: reduced */
                      "        n[0] += i64(i);\n"      /* integer: reduced, exact */
                      "        if x[i] > 0.0 { s[k] -= 0.5 * x[i]; }\n" /* under control flow */
                      "        t[i % 2] += x[i];\n" /* not uniform: stays atomic */
                      "        m[0] += 1;\n"
                      "        m[1] = 7;\n" /* m accessed otherwise: stays atomic */
                      "    }\n"
                      "}\n";
    enum { NRED = 10007 };
    double *x = malloc(NRED * sizeof *x);
    double ref_s = 0, ref_t[2] = {0, 0};
    int64_t ref_n = 0;
    for (int i = 0; i < NRED; i++) {
        x[i] = sin(0.37 * i) * 3.0;
        ref_s += x[i] * x[i] - (x[i] > 0 ? 0.5 * x[i] : 0.0);
        ref_t[i % 2] += x[i];
        ref_n += i;
    }
    for (int l = 0; l < 2; l++) {
        for (int threads = 1; threads <= 4; threads += 3) {
            prog p = build(src, OPT_LEVELS[l], false);
            double s[3] = {0, 1.0, 0}, t[2] = {0, 0};
            int64_t n[1] = {5};
            int32_t m[2] = {0, 0}, k = 1;
            kern_array_desc dx = desc(x, NRED, 1, 1), dn = desc(n, 1, 1, 1), ds = desc(s, 3, 1, 1),
                            dt = desc(t, 2, 1, 1), dm = desc(m, 2, 1, 1);
            void *args[6] = {&dx, &dn, &ds, &dt, &dm, &k};
            kern_err_record e = run_mt(&p, "red", args, 97, threads);
            cr_expect_eq(e.code, 0);
            cr_expect_eq(n[0], 5 + ref_n, "-O%d %d threads: n = %lld", OPT_LEVELS[l], threads,
                         (long long)n[0]);
            cr_expect_eq(m[0], NRED);
            cr_expect(fabs(s[1] - (1.0 + ref_s)) <= 1e-9 * fabs(ref_s), "s = %.17g, C %.17g", s[1],
                      1.0 + ref_s);
            cr_expect(s[0] == 0 && s[2] == 0, "other elements untouched");
            cr_expect(fabs(t[0] - ref_t[0]) <= 1e-9 && fabs(t[1] - ref_t[1]) <= 1e-9);
            release(&p);
        }
    }
    free(x);
    for (int dbg = 0; dbg < 2; dbg++) {
        kc_ctx *c = kc_ctx_new();
        c->opts.debug = dbg;
        c->opts.opt_level = 0; /* the code as emitted */
        ir_module *m = kc_compile_source(c, "t.kern", src, strlen(src));
        cr_assert(m);
        char err[512];
        char *text = llvm_emit_text(m, &c->opts, err, sizeof err);
        cr_assert(text, "%s", err);
        /* release: an accumulator (\"red\" alloca) per reduced atomic: s[k] +=, s[k] -=
         * and n[0] +=; t and m keep their per-item atomics. Debug: none. */
        int acc = count_of(text, "%red");
        int allocas = count_of(text, "= alloca");
        if (dbg)
            cr_expect_eq(acc, 0, "debug: no accumulators, got %d", acc);
        else
            cr_expect(allocas >= 3 && acc >= 3, "release: 3 accumulators, got %d", acc);
        free(text);
        ir_module_free(m);
        kc_ctx_free(c);
    }
}
