/* test_interp_ops.c - the interpreter's op semantics on hand-written IR: integer and float
 * ops, u32, shifts, rounding and ties, casts, atomics, dim and select, and the order of
 * parallel work items (suite `interp_ops`). */
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
#include "interp_util.h"

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

Test(interp_ops, op_integer_semantics) {
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

Test(interp_ops, op_float_semantics) {
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

Test(interp_ops, op_casts) {
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

Test(interp_ops, op_atomics_dim_select) {
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
Test(interp_ops, parallel_runs_in_row_major_order) {
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
