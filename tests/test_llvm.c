/* test_llvm.c - the LLVM CPU backend, end to end: every op x every type it supports
 * (a table) at -O0 and -O3, floats bit for bit (NaN equals NaN), libm functions within
 * 1 ulp; casts between all scalar types, float -> int saturation (suite `llvm`).
 *
 * Kernels are compiled from source (kc_compile_source), JIT-compiled (llvm_jit_compile)
 * and their task functions called directly, as the runtime will call them (runtime/abi.h,
 * llvm_util.h), and compared with plain C references written here. The other llvm suites:
 * llvm_control, llvm_debug, llvm_aot, llvm_adstack. */
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
#include "../backends/meta_ir.h"
#include "../runtime/abi.h"
#include "../runtime/meta.h"
#include "llvm_util.h"

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

/* libmvec's documented bound, which the SIMD path's transcendental functions keep
 * (docs/backend-cpu.md) */
enum { SIMD_MATH_ULPS = 4 };

static bool vector_math(const char *name) {
    static const char *const fns[] = {"sin",  "cos", "tan",  "asin", "acos", "atan", "sinh", "cosh",
                                      "tanh", "exp", "exp2", "log",  "log2", "pow",  "atan2"};
    for (size_t i = 0; i < sizeof fns / sizeof *fns; i++)
        if (!strcmp(name, fns[i]))
            return true;
    return false;
}

/* simd: kc_options.simd (-1: the scalar path, 0: the host's widest vectors, 4: SSE). */
static void check_ops_of_kind(kern_tykind k, int opt, int simd) {
    build_simd = simd;
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
    build_simd = 0;
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
            int ulps = op->ulps;
            if (simd >= 0 && vector_math(op->name) && ulps < SIMD_MATH_ULPS)
                ulps = SIMD_MATH_ULPS;
            if (!same(rk, got, want, ulps)) {
                char g[64], w[64], x[64], y[64];
                show(g, sizeof g, rk, got);
                show(w, sizeof w, rk, want);
                show(x, sizeof x, k, get(av, k, j));
                show(y, sizeof y, k, get(bv, k, j));
                cr_expect_fail(
                    "-O%d simd %d: %s on %s, element %d (a = %s, b = %s): got %s, want %s", opt,
                    simd, op->name, kname(k), j, x, y, g, w);
            }
        }
        checked++;
    }
    cr_assert_eq(checked, nk);
    release(&p);
    buf_free(&src);
}

/* the scalar path, the host's widest vectors, 4 lanes (SSE) */
static const int SIMD_MODES[3] = {-1, 0, 4};

Test(llvm, ops_bool) {
    for (int l = 0; l < 2; l++)
        for (int v = 0; v < 3; v++)
            check_ops_of_kind(TY_BOOL, OPT_LEVELS[l], SIMD_MODES[v]);
}
Test(llvm, ops_i32) {
    for (int l = 0; l < 2; l++)
        for (int v = 0; v < 3; v++)
            check_ops_of_kind(TY_I32, OPT_LEVELS[l], SIMD_MODES[v]);
}
Test(llvm, ops_u32) {
    for (int l = 0; l < 2; l++)
        for (int v = 0; v < 3; v++)
            check_ops_of_kind(TY_U32, OPT_LEVELS[l], SIMD_MODES[v]);
}
Test(llvm, ops_i64) {
    for (int l = 0; l < 2; l++)
        for (int v = 0; v < 3; v++)
            check_ops_of_kind(TY_I64, OPT_LEVELS[l], SIMD_MODES[v]);
}
Test(llvm, ops_f32) {
    for (int l = 0; l < 2; l++)
        for (int v = 0; v < 3; v++)
            check_ops_of_kind(TY_F32, OPT_LEVELS[l], SIMD_MODES[v]);
}
Test(llvm, ops_f64) {
    for (int l = 0; l < 2; l++)
        for (int v = 0; v < 3; v++)
            check_ops_of_kind(TY_F64, OPT_LEVELS[l], SIMD_MODES[v]);
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
