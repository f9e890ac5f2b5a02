/* test_passes.c - tests of the optimization passes (suite `passes`).
 *
 * Two kinds of tests:
 *   - golden files: tests/golden/passes/NAME.ir is an input module in the IR text form;
 *     NAME.fold.out, NAME.simplify.out, NAME.cse.out, NAME.dce.out hold the expected text
 *     after that single pass, NAME.opt.out after ir_optimize(m, 2), NAME.lower.out and
 *     NAME.checked.out after ir_lower_semantics without and with checks. Every expectation was
 *     written by hand; UPDATE=1 rewrites them from the current output (review the diff).
 *     The verifier must accept the module after each pass.
 *   - builder tests: IR built with ir/builder, one pass run, specific results checked
 *     against values computed here independently (C arithmetic in the right precision),
 *     including what must NOT be folded or simplified. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "../common/env.h"
#include "../passes/passes.h"
#include "golden.h"

/* ---- a kernel to build into ------------------------------------------------------------ */

enum { P_OF, P_OD, P_OI, P_OU, P_OL, P_OB, P_X, P_Y, P_N, P_U, P_COUNT };

typedef struct fx {
    ir_module *m;
    ir_kernel *k;
    ir_op *task;
    ir_builder b; /* at the end of the serial task's body */
    ir_value *p[P_COUNT];
} fx;

/* kernel k(of: f32[], od: f64[], oi: i32[], ou: u32[], ol: i64[], ob: bool[],
 *          x: f32, y: f64, n: i32, u: u32) { serial { ... } } */
static fx fx_new(void) {
    fx f;
    memset(&f, 0, sizeof f);
    f.m = ir_module_new("test.kern");
    ir_param ps[P_COUNT] = {
        {.name = "of", .type = ty_array(ty_f32(), 1), .nograd = false, .loc = {1, 1}},
        {.name = "od", .type = ty_array(ty_f64(), 1), .nograd = false, .loc = {1, 1}},
        {.name = "oi", .type = ty_array(ty_i32(), 1), .nograd = false, .loc = {1, 1}},
        {.name = "ou", .type = ty_array(ty_u32(), 1), .nograd = false, .loc = {1, 1}},
        {.name = "ol", .type = ty_array(ty_i64(), 1), .nograd = false, .loc = {1, 1}},
        {.name = "ob", .type = ty_array(ty_bool(), 1), .nograd = false, .loc = {1, 1}},
        {.name = "x", .type = ty_f32(), .nograd = false, .loc = {1, 1}},
        {.name = "y", .type = ty_f64(), .nograd = false, .loc = {1, 1}},
        {.name = "n", .type = ty_i32(), .nograd = false, .loc = {1, 1}},
        {.name = "u", .type = ty_u32(), .nograd = false, .loc = {1, 1}},
    };
    f.k = ir_kernel_new(f.m, "k", (kern_loc){1, 1}, ps, P_COUNT);
    for (int i = 0; i < P_COUNT; i++)
        f.p[i] = f.k->body->args[i];
    ir_builder top = ir_builder_at_end(f.m, f.k->body);
    f.task = ir_serial(&top);
    f.b = ir_builder_at_end(f.m, f.task->regions[0]);
    return f;
}

/* Stores v into the output array of its type (so that DCE keeps it). */
static void keep(fx *f, ir_value *v) {
    int arr;
    switch (v->type->kind) {
    case TY_F32: arr = P_OF; break;
    case TY_F64: arr = P_OD; break;
    case TY_I32: arr = P_OI; break;
    case TY_U32: arr = P_OU; break;
    case TY_I64: arr = P_OL; break;
    default: arr = P_OB; break;
    }
    ir_value *zero = ir_const_int(&f->b, ty_i32(), 0);
    ir_store(&f->b, f->p[arr], &zero, 1, v);
}

static bool verifies(const ir_module *m) {
    arena a;
    arena_init(&a);
    diag_sink s;
    diag_init(&s, &a);
    bool ok = ir_verify(m, &s);
    if (!ok)
        diag_print_all(stderr, &s);
    diag_free(&s);
    arena_free(&a);
    return ok;
}

/* Runs one pass, checks the verifier, returns the pass's progress. */
static bool run(fx *f, bool (*pass)(ir_module *)) {
    cr_assert(verifies(f->m), "input does not verify");
    bool p = pass(f->m);
    cr_assert(verifies(f->m), "module does not verify after the pass");
    return p;
}

static ir_value *ci(fx *f, const kern_type *t, int64_t v) { return ir_const_int(&f->b, t, v); }
static ir_value *cf(fx *f, const kern_type *t, double v) { return ir_const_float(&f->b, t, v); }
static ir_value *bin(fx *f, ir_opcode c, ir_value *a, ir_value *b) {
    ir_value *v = ir_binop(&f->b, c, a, b);
    keep(f, v);
    return v;
}
static ir_value *un(fx *f, ir_opcode c, ir_value *a) {
    ir_value *v = ir_unop(&f->b, c, a);
    keep(f, v);
    return v;
}
static ir_value *cast(fx *f, const kern_type *t, ir_value *a) {
    ir_value *v = ir_cast(&f->b, t, a);
    keep(f, v);
    return v;
}

static bool is_const(const ir_value *v) { return v->def && v->def->code == IR_CONST; }
static int64_t ival(const ir_value *v) {
    cr_assert(is_const(v), "expected a constant, found op %s",
              v->def ? ir_info(v->def->code)->name : "(argument)");
    return v->def->imm.i;
}
static double fval(const ir_value *v) {
    cr_assert(is_const(v), "expected a constant, found op %s",
              v->def ? ir_info(v->def->code)->name : "(argument)");
    return v->def->imm.f;
}
static bool same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* The value stored by the n-th store (0-based) of the task body. */
static ir_value *stored(fx *f, int n) {
    ir_foreach_op(op, f->task->regions[0]) {
        if (op->code == IR_STORE && n-- == 0)
            return op->operands[op->noperands - 1];
    }
    cr_assert_fail("no store %d", n);
    return NULL;
}

static int count_ops(ir_region *r, ir_opcode code) {
    int n = 0;
    ir_foreach_op(op, r) {
        if (op->code == code)
            n++;
        for (uint32_t i = 0; i < op->nregions; i++)
            n += count_ops(op->regions[i], code);
    }
    return n;
}

/* ---- fold: integers ---------------------------------------------------------------------- */

Test(passes, fold_i32_wraps) {
    fx f = fx_new();
    const kern_type *i32 = ty_i32();
    ir_value *a = bin(&f, IR_ADD, ci(&f, i32, INT32_MAX), ci(&f, i32, 1));
    ir_value *m = bin(&f, IR_MUL, ci(&f, i32, 65536), ci(&f, i32, 65536));
    ir_value *n = un(&f, IR_NEG, ci(&f, i32, INT32_MIN));
    ir_value *s = bin(&f, IR_SHL, ci(&f, i32, 1), ci(&f, i32, 31));
    cr_assert(run(&f, ir_opt_fold));
    cr_assert_eq(ival(a), INT32_MIN);
    cr_assert_eq(ival(m), 0);
    cr_assert_eq(ival(n), INT32_MIN);
    cr_assert_eq(ival(s), INT32_MIN);
    ir_module_free(f.m);
}

Test(passes, fold_u32_is_unsigned) {
    fx f = fx_new();
    const kern_type *u32 = ty_u32();
    ir_value *w = bin(&f, IR_SUB, ci(&f, u32, 0), ci(&f, u32, 1));
    ir_value *d = bin(&f, IR_DIV, ci(&f, u32, 0xffffffffu), ci(&f, u32, 2));
    ir_value *r = bin(&f, IR_REM, ci(&f, u32, 0xffffffffu), ci(&f, u32, 10));
    ir_value *sh = bin(&f, IR_SHR, ci(&f, u32, 0x80000000u), ci(&f, u32, 31));
    ir_value *gt = bin(&f, IR_GT, ci(&f, u32, 0xffffffffu), ci(&f, u32, 1));
    ir_value *mx = bin(&f, IR_MAX, ci(&f, u32, 0x80000000u), ci(&f, u32, 7));
    ir_value *ad = bin(&f, IR_ADD, ci(&f, u32, 0xffffffffu), ci(&f, u32, 2));
    cr_assert(run(&f, ir_opt_fold));
    cr_assert_eq(ival(w), 4294967295ll);
    cr_assert_eq(ival(d), 2147483647ll);
    cr_assert_eq(ival(r), 4294967295ll % 10);
    cr_assert_eq(ival(sh), 1);
    cr_assert_eq(ival(gt), 1);
    cr_assert_eq(ival(mx), 0x80000000ll);
    cr_assert_eq(ival(ad), 1);
    ir_module_free(f.m);
}

Test(passes, fold_signed_division_and_shifts) {
    fx f = fx_new();
    const kern_type *i32 = ty_i32(), *i64 = ty_i64();
    ir_value *d = bin(&f, IR_DIV, ci(&f, i32, -7), ci(&f, i32, 2));
    ir_value *r = bin(&f, IR_REM, ci(&f, i32, -7), ci(&f, i32, 2));
    ir_value *sh = bin(&f, IR_SHR, ci(&f, i32, INT32_MIN), ci(&f, i32, 31));
    ir_value *sh2 = bin(&f, IR_SHR, ci(&f, i32, -9), ci(&f, i32, 1));
    ir_value *lt = bin(&f, IR_LT, ci(&f, i32, -1), ci(&f, i32, 1));
    ir_value *l = bin(&f, IR_SHL, ci(&f, i64, 1), ci(&f, i64, 63));
    ir_value *lm = bin(&f, IR_MUL, ci(&f, i64, INT64_MAX), ci(&f, i64, 2));
    ir_value *ab = un(&f, IR_ABS, ci(&f, i32, INT32_MIN));
    ir_value *sg = un(&f, IR_SIGN, ci(&f, i64, -5));
    cr_assert(run(&f, ir_opt_fold));
    cr_assert_eq(ival(d), -3);
    cr_assert_eq(ival(r), -1);
    cr_assert_eq(ival(sh), -1);
    cr_assert_eq(ival(sh2), -5);
    cr_assert_eq(ival(lt), 1);
    cr_assert_eq(ival(l), INT64_MIN);
    cr_assert_eq(ival(lm), -2);
    cr_assert_eq(ival(ab), INT32_MIN);
    cr_assert_eq(ival(sg), -1);
    ir_module_free(f.m);
}

Test(passes, fold_leaves_undefined_integer_ops) {
    fx f = fx_new();
    const kern_type *i32 = ty_i32(), *u32 = ty_u32(), *i64 = ty_i64();
    ir_value *v[] = {
        bin(&f, IR_DIV, ci(&f, i32, 7), ci(&f, i32, 0)),
        bin(&f, IR_REM, ci(&f, i32, 7), ci(&f, i32, 0)),
        bin(&f, IR_DIV, ci(&f, u32, 7), ci(&f, u32, 0)),
        bin(&f, IR_DIV, ci(&f, i32, INT32_MIN), ci(&f, i32, -1)),
        bin(&f, IR_REM, ci(&f, i64, INT64_MIN), ci(&f, i64, -1)),
        bin(&f, IR_SHL, ci(&f, i32, 1), ci(&f, i32, 32)),
        bin(&f, IR_SHR, ci(&f, i32, 1), ci(&f, i32, -1)),
        bin(&f, IR_SHL, ci(&f, u32, 1), ci(&f, u32, 32)),
        bin(&f, IR_SHR, ci(&f, i64, 1), ci(&f, i64, 64)),
    };
    cr_assert_not(run(&f, ir_opt_fold), "nothing is foldable, so no progress");
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        cr_assert(!is_const(v[i]), "case %zu was folded", i);
    ir_module_free(f.m);
}

/* ---- fold: floats ------------------------------------------------------------------------ */

Test(passes, fold_f32_rounds_in_float) {
    fx f = fx_new();
    const kern_type *f32 = ty_f32(), *f64 = ty_f64();
    ir_value *a32 = bin(&f, IR_ADD, cf(&f, f32, 16777216.0), cf(&f, f32, 1.0));
    ir_value *a64 = bin(&f, IR_ADD, cf(&f, f64, 16777216.0), cf(&f, f64, 1.0));
    ir_value *t32 = bin(&f, IR_DIV, cf(&f, f32, 1.0), cf(&f, f32, 3.0));
    ir_value *t64 = bin(&f, IR_DIV, cf(&f, f64, 1.0), cf(&f, f64, 3.0));
    ir_value *p32 = bin(&f, IR_ADD, cf(&f, f32, 0.1), cf(&f, f32, 0.2));
    ir_value *s32 = un(&f, IR_SIN, cf(&f, f32, 1.0));
    ir_value *s64 = un(&f, IR_SIN, cf(&f, f64, 1.0));
    ir_value *e32 = un(&f, IR_EXP, cf(&f, f32, 0.5));
    ir_value *r32 = un(&f, IR_ROUND, cf(&f, f32, -2.5));
    ir_value *q32 = un(&f, IR_RSQRT, cf(&f, f32, 4.0));
    cr_assert(run(&f, ir_opt_fold));
    cr_assert_eq(fval(a32), 16777216.0);
    cr_assert_eq(fval(a64), 16777217.0);
    cr_assert_eq(fval(t32), (double)(1.0f / 3.0f));
    cr_assert_eq(fval(t64), 1.0 / 3.0);
    cr_assert_neq(fval(t32), fval(t64));
    volatile float p1 = 0.1f, p2 = 0.2f; /* what the device computes, in float */
    cr_assert_eq(fval(p32), (double)(float)(p1 + p2));
    volatile float one = 1.0f, half = 0.5f;
    cr_assert_eq(fval(s32), (double)sinf(one));
    cr_assert_eq(fval(s64), sin(1.0));
    cr_assert_eq(fval(e32), (double)expf(half));
    cr_assert_eq(fval(r32), -3.0);
    cr_assert_eq(fval(q32), 0.5);
    ir_module_free(f.m);
}

Test(passes, fold_signed_zeros) {
    fx f = fx_new();
    const kern_type *f32 = ty_f32(), *f64 = ty_f64();
    ir_value *n = un(&f, IR_NEG, cf(&f, f32, 0.0));
    ir_value *s = bin(&f, IR_ADD, cf(&f, f64, -0.0), cf(&f, f64, 0.0));
    ir_value *ss = bin(&f, IR_ADD, cf(&f, f64, -0.0), cf(&f, f64, -0.0));
    ir_value *m = bin(&f, IR_MUL, cf(&f, f32, -1.0), cf(&f, f32, 0.0));
    ir_value *mn = bin(&f, IR_MIN, cf(&f, f32, -0.0), cf(&f, f32, 0.0));
    ir_value *mn2 = bin(&f, IR_MIN, cf(&f, f32, 0.0), cf(&f, f32, -0.0));
    ir_value *eq = bin(&f, IR_EQ, cf(&f, f32, -0.0), cf(&f, f32, 0.0));
    ir_value *sg = un(&f, IR_SIGN, cf(&f, f32, -0.0));
    cr_assert(run(&f, ir_opt_fold));
    cr_assert(same_bits(fval(n), -0.0));
    cr_assert(same_bits(fval(s), 0.0));
    cr_assert(same_bits(fval(ss), -0.0));
    cr_assert(same_bits(fval(m), -0.0));
    cr_assert(same_bits(fval(mn), -0.0), "min ties give operand 0");
    cr_assert(same_bits(fval(mn2), 0.0), "min ties give operand 0");
    cr_assert_eq(ival(eq), 1);
    cr_assert(!is_const(sg), "sign(-0.0) is left to the device");
    ir_module_free(f.m);
}

Test(passes, fold_never_makes_nan) {
    fx f = fx_new();
    const kern_type *f32 = ty_f32(), *f64 = ty_f64();
    ir_value *v[] = {
        bin(&f, IR_DIV, cf(&f, f32, 0.0), cf(&f, f32, 0.0)),
        un(&f, IR_SQRT, cf(&f, f64, -1.0)),
        un(&f, IR_LOG, cf(&f, f32, -1.0)),
        un(&f, IR_ASIN, cf(&f, f64, 2.0)),
        bin(&f, IR_SUB, cf(&f, f64, INFINITY), cf(&f, f64, INFINITY)),
        bin(&f, IR_ADD, cf(&f, f32, NAN), cf(&f, f32, 1.0)),
        bin(&f, IR_EQ, cf(&f, f32, NAN), cf(&f, f32, NAN)),
        bin(&f, IR_NE, cf(&f, f64, NAN), cf(&f, f64, 1.0)),
        bin(&f, IR_LT, cf(&f, f64, NAN), cf(&f, f64, 1.0)),
        bin(&f, IR_MIN, cf(&f, f32, NAN), cf(&f, f32, 1.0)),
        bin(&f, IR_MAX, cf(&f, f32, 1.0), cf(&f, f32, NAN)),
        cast(&f, ty_i32(), cf(&f, f32, NAN)),
        cast(&f, ty_bool(), cf(&f, f64, NAN)),
    };
    cr_assert_not(run(&f, ir_opt_fold));
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        cr_assert(!is_const(v[i]), "case %zu was folded", i);
    ir_module_free(f.m);
}

Test(passes, fold_infinities_and_overflow) {
    fx f = fx_new();
    const kern_type *f32 = ty_f32();
    ir_value *d = bin(&f, IR_DIV, cf(&f, f32, -1.0), cf(&f, f32, 0.0));
    ir_value *o = bin(&f, IR_MUL, cf(&f, f32, 3e38), cf(&f, f32, 10.0));
    ir_value *c = cast(&f, f32, cf(&f, ty_f64(), 1e300));
    cr_assert(run(&f, ir_opt_fold));
    cr_assert(isinf(fval(d)) && fval(d) < 0);
    cr_assert(isinf(fval(o)) && fval(o) > 0, "f32 overflows to inf (f64 would not)");
    cr_assert(isinf(fval(c)));
    ir_module_free(f.m);
}

/* ---- fold: casts, select ---------------------------------------------------------------- */

Test(passes, fold_casts) {
    fx f = fx_new();
    const kern_type *f32 = ty_f32(), *f64 = ty_f64(), *i32 = ty_i32(), *u32 = ty_u32(),
                    *i64 = ty_i64(), *b = ty_bool();
    ir_value *t1 = cast(&f, i32, cf(&f, f32, 3.75));
    ir_value *t2 = cast(&f, i32, cf(&f, f32, -3.75));
    ir_value *t3 = cast(&f, u32, cf(&f, f64, 3e9));
    ir_value *t4 = cast(&f, u32, cf(&f, f64, -0.5));
    ir_value *t5 = cast(&f, u32, ci(&f, i32, -1));
    ir_value *t6 = cast(&f, i64, ci(&f, u32, 0xffffffffu));
    ir_value *t7 = cast(&f, i64, ci(&f, i32, -1));
    ir_value *t8 = cast(&f, i32, ci(&f, i64, 0x100000005ll));
    ir_value *t9 = cast(&f, f32, ci(&f, i32, 16777217));
    ir_value *t10 = cast(&f, f64, ci(&f, i32, 16777217));
    ir_value *t11 = cast(&f, f32, cf(&f, f64, 0.1));
    ir_value *t12 = cast(&f, b, ci(&f, i32, 42));
    ir_value *t13 = cast(&f, i32, ci(&f, b, 1));
    ir_value *t14 = cast(&f, f32, ci(&f, u32, 0xffffffffu));
    ir_value *t15 = cast(&f, i32, cf(&f, f64, 2147483647.9));
    cr_assert(run(&f, ir_opt_fold));
    cr_assert_eq(ival(t1), 3);
    cr_assert_eq(ival(t2), -3);
    cr_assert_eq(ival(t3), 3000000000ll);
    cr_assert_eq(ival(t4), 0);
    cr_assert_eq(ival(t5), 4294967295ll);
    cr_assert_eq(ival(t6), 4294967295ll);
    cr_assert_eq(ival(t7), -1);
    cr_assert_eq(ival(t8), 5);
    cr_assert_eq(fval(t9), 16777216.0);
    cr_assert_eq(fval(t10), 16777217.0);
    cr_assert_eq(fval(t11), (double)0.1f);
    cr_assert_eq(ival(t12), 1);
    cr_assert_eq(ival(t13), 1);
    cr_assert_eq(fval(t14), 4294967296.0);
    cr_assert_eq(ival(t15), 2147483647);
    ir_module_free(f.m);
}

Test(passes, fold_leaves_out_of_range_casts) {
    fx f = fx_new();
    ir_value *v[] = {
        cast(&f, ty_i32(), cf(&f, ty_f32(), 3e9)),
        cast(&f, ty_i32(), cf(&f, ty_f64(), 2147483648.0)),
        cast(&f, ty_u32(), cf(&f, ty_f64(), -1.0)),
        cast(&f, ty_u32(), cf(&f, ty_f64(), 4294967296.0)),
        cast(&f, ty_i64(), cf(&f, ty_f64(), 9223372036854775808.0)),
        cast(&f, ty_i32(), cf(&f, ty_f32(), INFINITY)),
    };
    cr_assert_not(run(&f, ir_opt_fold));
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        cr_assert(!is_const(v[i]), "case %zu was folded", i);
    ir_module_free(f.m);
}

Test(passes, fold_select_with_constant_condition) {
    fx f = fx_new();
    ir_value *s = ir_select(&f.b, ir_const_bool(&f.b, false), f.p[P_X], cf(&f, ty_f32(), 2.0));
    keep(&f, s);
    ir_value *t = ir_select(&f.b, ir_const_bool(&f.b, true), f.p[P_N], ci(&f, ty_i32(), 3));
    keep(&f, t);
    ir_value *u = ir_select(&f.b, bin(&f, IR_LT, f.p[P_X], f.p[P_X]), f.p[P_X], f.p[P_X]);
    keep(&f, u);
    cr_assert(run(&f, ir_opt_fold));
    cr_assert_eq(fval(stored(&f, 0)), 2.0);
    cr_assert_eq(stored(&f, 1), f.p[P_N]);
    cr_assert_eq(stored(&f, 3), u, "a select on an unknown condition stays");
    ir_module_free(f.m);
}

/* ---- simplify ----------------------------------------------------------------------------- */

Test(passes, simplify_float_identities_exact_only) {
    fx f = fx_new();
    const kern_type *f32 = ty_f32();
    ir_value *x = f.p[P_X];
    ir_value *keep0 = bin(&f, IR_ADD, x, cf(&f, f32, 0.0));  /* -0 + 0 = +0: not x */
    ir_value *keep1 = bin(&f, IR_MUL, x, cf(&f, f32, 0.0));  /* inf * 0 = NaN: not 0 */
    ir_value *keep2 = bin(&f, IR_SUB, x, x);                 /* inf - inf = NaN: not 0 */
    ir_value *keep3 = bin(&f, IR_SUB, cf(&f, f32, 0.0), x);  /* 0 - 0 = +0 != -0 */
    ir_value *keep4 = bin(&f, IR_EQ, x, x);                  /* NaN != NaN */
    ir_value *keep5 = bin(&f, IR_SUB, x, cf(&f, f32, -0.0)); /* -0 - -0 = +0 */
    bin(&f, IR_ADD, x, cf(&f, f32, -0.0));                   /* store 6: x */
    bin(&f, IR_SUB, x, cf(&f, f32, 0.0));                    /* store 7: x */
    bin(&f, IR_MUL, cf(&f, f32, 1.0), x);                    /* store 8: x */
    bin(&f, IR_DIV, x, cf(&f, f32, 1.0));                    /* store 9: x */
    ir_value *n1 = bin(&f, IR_MUL, x, cf(&f, f32, -1.0));    /* -x */
    ir_value *n2 = bin(&f, IR_SUB, cf(&f, f32, -0.0), x);    /* -x */
    run(&f, ir_opt_simplify);
    cr_assert_eq(keep0->def->code, IR_ADD);
    cr_assert_eq(keep1->def->code, IR_MUL);
    cr_assert_eq(keep2->def->code, IR_SUB);
    cr_assert_eq(keep3->def->code, IR_SUB);
    cr_assert_eq(keep4->def->code, IR_EQ);
    cr_assert_eq(keep5->def->code, IR_SUB);
    for (int i = 0; i < 6; i++)
        cr_assert_neq(stored(&f, i), x, "store %d", i);
    for (int i = 6; i < 10; i++)
        cr_assert_eq(stored(&f, i), x, "store %d", i);
    cr_assert_eq(n1->def->code, IR_NEG);
    cr_assert_eq(n1->def->operands[0], x);
    cr_assert_eq(n2->def->code, IR_NEG);
    cr_assert_eq(n2->def->operands[0], x);
    ir_module_free(f.m);
}

Test(passes, simplify_integer_identities) {
    fx f = fx_new();
    const kern_type *i32 = ty_i32(), *u32 = ty_u32();
    ir_value *n = f.p[P_N], *u = f.p[P_U];
    bin(&f, IR_ADD, ci(&f, i32, 0), n);  /* 0: n */
    bin(&f, IR_MUL, n, ci(&f, i32, 1));  /* 1: n */
    bin(&f, IR_OR, n, n);                /* 2: n */
    bin(&f, IR_AND, n, ci(&f, i32, -1)); /* 3: n */
    bin(&f, IR_SHL, n, ci(&f, i32, 0));  /* 4: n */
    bin(&f, IR_DIV, u, ci(&f, u32, 1));  /* 5: u */
    ir_value *z1 = bin(&f, IR_MUL, n, ci(&f, i32, 0));
    ir_value *z2 = bin(&f, IR_SUB, n, n);
    ir_value *z3 = bin(&f, IR_XOR, u, u);
    ir_value *t1 = bin(&f, IR_LE, n, n);
    ir_value *t2 = bin(&f, IR_LT, u, u);
    ir_value *ng = bin(&f, IR_SUB, ci(&f, i32, 0), n);
    ir_value *ud = bin(&f, IR_DIV, u, ci(&f, u32, 0xffffffffu)); /* not -u */
    ir_value *o = bin(&f, IR_OR, u, ci(&f, u32, 0xffffffffu));
    run(&f, ir_opt_simplify);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(stored(&f, i), n, "store %d", i);
    cr_assert_eq(stored(&f, 5), u);
    cr_assert_eq(ival(z1), 0);
    cr_assert_eq(ival(z2), 0);
    cr_assert_eq(ival(z3), 0);
    cr_assert_eq(ival(t1), 1);
    cr_assert_eq(ival(t2), 0);
    cr_assert_eq(ng->def->code, IR_NEG);
    cr_assert_eq(ud->def->code, IR_DIV);
    cr_assert_eq(ival(o), 0xffffffffll);
    ir_module_free(f.m);
}

Test(passes, simplify_double_negation_and_bools) {
    fx f = fx_new();
    ir_value *x = f.p[P_X];
    ir_value *nn = ir_unop(&f.b, IR_NEG, ir_unop(&f.b, IR_NEG, x));
    keep(&f, nn);
    ir_value *c = ir_binop(&f.b, IR_LT, x, cf(&f, ty_f32(), 1.0));
    keep(&f, ir_unop(&f.b, IR_NOT, ir_unop(&f.b, IR_NOT, c)));
    keep(&f, ir_binop(&f.b, IR_EQ, c, ir_const_bool(&f.b, true)));
    ir_value *ne = bin(&f, IR_EQ, c, ir_const_bool(&f.b, false));
    keep(&f, ir_select(&f.b, c, ir_const_bool(&f.b, true), ir_const_bool(&f.b, false)));
    run(&f, ir_opt_simplify);
    cr_assert_eq(stored(&f, 0), x);
    cr_assert_eq(stored(&f, 1), c);
    cr_assert_eq(stored(&f, 2), c);
    cr_assert_eq(ne->def->code, IR_NOT);
    cr_assert_eq(ne->def->operands[0], c);
    cr_assert_eq(stored(&f, 4), c);
    ir_module_free(f.m);
}

/* if (x < 1) { yield x * 2 } else { yield x + 1 } */
static ir_op *build_if(fx *f, ir_value *cond, bool with_store, bool with_div) {
    const kern_type *f32 = ty_f32();
    ir_op *op = ir_if(&f->b, cond, &f32, 1);
    ir_builder t = ir_builder_at_end(f->m, op->regions[0]);
    ir_value *a = ir_binop(&t, IR_MUL, f->p[P_X], ir_const_float(&t, f32, 2.0));
    if (with_store) {
        ir_value *zero = ir_const_int(&t, ty_i32(), 0);
        ir_store(&t, f->p[P_OF], &zero, 1, a);
    }
    if (with_div)
        a = ir_binop(&t, IR_DIV, a, f->p[P_X]);
    ir_yield(&t, &a, 1);
    ir_builder e = ir_builder_at_end(f->m, op->regions[1]);
    ir_value *bv = ir_binop(&e, IR_ADD, f->p[P_X], ir_const_float(&e, f32, 1.0));
    ir_yield(&e, &bv, 1);
    keep(f, op->results[0]);
    return op;
}

Test(passes, simplify_if_with_constant_condition) {
    fx f = fx_new();
    build_if(&f, ir_const_bool(&f.b, false), true, false);
    run(&f, ir_opt_simplify);
    cr_assert_eq(count_ops(f.k->body, IR_IF), 0);
    cr_assert_eq(count_ops(f.k->body, IR_STORE), 1, "the untaken store is gone");
    ir_value *v = stored(&f, 0);
    cr_assert_eq(v->def->code, IR_ADD, "the else value is stored");
    cr_assert_eq(v->def->parent, f.task->regions[0]);
    ir_module_free(f.m);
}

Test(passes, simplify_if_to_select) {
    fx f = fx_new();
    ir_value *c = ir_binop(&f.b, IR_LT, f.p[P_X], cf(&f, ty_f32(), 1.0));
    build_if(&f, c, false, false);
    cr_assert(run(&f, ir_opt_simplify));
    cr_assert_eq(count_ops(f.k->body, IR_IF), 0);
    ir_value *v = stored(&f, 0);
    cr_assert_eq(v->def->code, IR_SELECT);
    cr_assert_eq(v->def->operands[0], c);
    cr_assert_eq(v->def->operands[1]->def->code, IR_MUL);
    cr_assert_eq(v->def->operands[2]->def->code, IR_ADD);
    ir_module_free(f.m);
}

Test(passes, simplify_keeps_if_with_side_effects_or_division) {
    fx f = fx_new();
    ir_value *c = ir_binop(&f.b, IR_LT, f.p[P_X], cf(&f, ty_f32(), 1.0));
    build_if(&f, c, true, false);
    build_if(&f, c, false, true); /* float division: unbounded derivative */
    run(&f, ir_opt_simplify);
    cr_assert_eq(count_ops(f.k->body, IR_IF), 2);
    ir_module_free(f.m);
}

Test(passes, simplify_empty_for) {
    fx f = fx_new();
    ir_value *init = f.p[P_X];
    ir_op *loop = ir_for(&f.b, ci(&f, ty_i32(), 5), ci(&f, ty_i32(), 5), &init, 1, false);
    ir_builder lb = ir_builder_at_end(f.m, loop->regions[0]);
    ir_value *nx = ir_binop(&lb, IR_MUL, loop->regions[0]->args[1], f.p[P_X]);
    ir_yield(&lb, &nx, 1);
    keep(&f, loop->results[0]);
    /* u32 bounds 1 .. 0xffffffff: a real loop (compared unsigned) */
    ir_op *loop2 =
        ir_for(&f.b, ci(&f, ty_u32(), 1), ci(&f, ty_u32(), 0xffffffffu), &init, 1, false);
    ir_builder lb2 = ir_builder_at_end(f.m, loop2->regions[0]);
    ir_value *nx2 = ir_binop(&lb2, IR_ADD, loop2->regions[0]->args[1], f.p[P_X]);
    ir_yield(&lb2, &nx2, 1);
    keep(&f, loop2->results[0]);
    cr_assert(run(&f, ir_opt_simplify));
    cr_assert_eq(stored(&f, 0), init);
    cr_assert_eq(count_ops(f.k->body, IR_FOR), 1);
    cr_assert_eq(stored(&f, 1), loop2->results[0]);
    ir_module_free(f.m);
}

/* ---- cse ---------------------------------------------------------------------------------- */

Test(passes, cse_merges_pure_ops_and_commuted_operands) {
    fx f = fx_new();
    ir_value *x = f.p[P_X], *y = f.p[P_Y];
    ir_value *a = bin(&f, IR_MUL, x, x);
    ir_value *b = bin(&f, IR_ADD, x, a);
    ir_value *c = bin(&f, IR_ADD, ir_binop(&f.b, IR_MUL, x, x), x);
    ir_value *d = bin(&f, IR_SUB, x, a);
    ir_value *e = bin(&f, IR_SUB, a, x); /* not commutative */
    ir_value *g = cast(&f, ty_f64(), x);
    ir_value *h = cast(&f, ty_f64(), x);
    ir_value *yy = bin(&f, IR_MUL, y, y);
    ir_value *dm = ir_dim(&f.b, f.p[P_OF], 0);
    keep(&f, dm);
    keep(&f, ir_dim(&f.b, f.p[P_OF], 0));
    ir_value *pz = cf(&f, ty_f32(), 0.0), *nz = cf(&f, ty_f32(), -0.0);
    keep(&f, pz);
    keep(&f, nz);
    cr_assert(run(&f, ir_opt_cse));
    cr_assert_eq(stored(&f, 2), b, "x + x*x and x*x + x are one value");
    cr_assert_neq(d, e);
    cr_assert_eq(stored(&f, 3), d);
    cr_assert_eq(stored(&f, 4), e);
    cr_assert_eq(stored(&f, 6), g, "%p %p", (void *)g, (void *)h);
    cr_assert_eq(stored(&f, 7), yy);
    cr_assert_eq(stored(&f, 9), dm, "dim is pure");
    cr_assert_neq(stored(&f, 10), stored(&f, 11), "0.0 and -0.0 are different constants");
    (void)c;
    ir_module_free(f.m);
}

Test(passes, cse_respects_regions_and_loads) {
    fx f = fx_new();
    ir_value *x = f.p[P_X];
    ir_value *c = ir_binop(&f.b, IR_LT, x, cf(&f, ty_f32(), 1.0));
    const kern_type *f32 = ty_f32();
    ir_op *op = ir_if(&f.b, c, &f32, 1);
    ir_builder t = ir_builder_at_end(f.m, op->regions[0]);
    ir_value *ts = ir_unop(&t, IR_SIN, x);
    ir_yield(&t, &ts, 1);
    ir_builder e = ir_builder_at_end(f.m, op->regions[1]);
    ir_value *es = ir_unop(&e, IR_SIN, x);
    ir_yield(&e, &es, 1);
    keep(&f, op->results[0]);
    ir_value *after = un(&f, IR_SIN, x); /* a sibling's op is not available here */
    ir_value *zero = ci(&f, ty_i32(), 0);
    ir_value *l1 = ir_load(&f.b, f.p[P_OF], &zero, 1);
    keep(&f, l1);
    ir_value *l2 = ir_load(&f.b, f.p[P_OF], &zero, 1);
    keep(&f, l2);
    run(&f, ir_opt_cse);
    cr_assert_eq(op->regions[0]->first->code, IR_SIN);
    cr_assert_eq(op->regions[1]->first->code, IR_SIN);
    cr_assert_eq(stored(&f, 1), after);
    cr_assert_eq(stored(&f, 2), l1);
    cr_assert_eq(stored(&f, 3), l2, "loads are not merged (a store comes between)");
    ir_module_free(f.m);
}

Test(passes, cse_uses_enclosing_region) {
    fx f = fx_new();
    ir_value *x = f.p[P_X];
    ir_value *outer = ir_unop(&f.b, IR_COS, x);
    keep(&f, outer);
    ir_value *init = x;
    ir_op *loop = ir_for(&f.b, ci(&f, ty_i32(), 0), f.p[P_N], &init, 1, false);
    ir_builder lb = ir_builder_at_end(f.m, loop->regions[0]);
    ir_value *inner = ir_unop(&lb, IR_COS, x);
    ir_value *nx = ir_binop(&lb, IR_ADD, loop->regions[0]->args[1], inner);
    ir_yield(&lb, &nx, 1);
    keep(&f, loop->results[0]);
    cr_assert(run(&f, ir_opt_cse));
    cr_assert_eq(nx->def->operands[1], outer);
    cr_assert_eq(count_ops(f.k->body, IR_COS), 1);
    ir_module_free(f.m);
}

/* ---- dce ---------------------------------------------------------------------------------- */

Test(passes, dce_removes_dead_pure_ops_keeps_effects) {
    fx f = fx_new();
    ir_value *x = f.p[P_X];
    ir_value *d1 = ir_unop(&f.b, IR_SIN, x);
    ir_binop(&f.b, IR_ADD, d1, x); /* dead chain */
    ir_value *zero = ci(&f, ty_i32(), 0);
    ir_load(&f.b, f.p[P_OF], &zero, 1);                     /* dead load */
    ir_atomic(&f.b, IR_ATOMIC_ADD, f.p[P_OF], &zero, 1, x); /* unused result, kept */
    ir_value *inits[1] = {x};
    ir_op *w = ir_while(&f.b, inits, 1); /* result unused, kept */
    {
        ir_builder bb = ir_builder_at_end(f.m, w->regions[0]);
        ir_value *a = w->regions[0]->args[0];
        ir_value *go = ir_binop(&bb, IR_LT, a, ir_const_float(&bb, ty_f32(), 10.0));
        ir_condition(&bb, go, &a, 1);
        ir_builder ab = ir_builder_at_end(f.m, w->regions[1]);
        ir_value *n =
            ir_binop(&ab, IR_ADD, w->regions[1]->args[0], ir_const_float(&ab, ty_f32(), 1.0));
        ir_yield(&ab, &n, 1);
    }
    cr_assert(run(&f, ir_opt_dce));
    cr_assert_eq(count_ops(f.k->body, IR_SIN), 0);
    cr_assert_eq(count_ops(f.k->body, IR_LOAD), 0);
    cr_assert_eq(count_ops(f.k->body, IR_ATOMIC_ADD), 1);
    cr_assert_eq(count_ops(f.k->body, IR_WHILE), 1);
    cr_assert_eq(count_ops(f.k->body, IR_ADD), 1, "the while's add stays");
    cr_assert_eq(count_ops(f.k->body, IR_CONST), 3, "index 0, 10.0, 1.0");
    cr_assert_not(run(&f, ir_opt_dce), "a second run finds nothing");
    ir_module_free(f.m);
}

Test(passes, dce_removes_dead_carried_values) {
    fx f = fx_new();
    ir_value *x = f.p[P_X];
    ir_value *inits[3] = {x, x, x};
    ir_op *loop = ir_for(&f.b, ci(&f, ty_i32(), 0), f.p[P_N], inits, 3, false);
    ir_region *body = loop->regions[0];
    ir_builder lb = ir_builder_at_end(f.m, body);
    /* a: used after the loop; b: feeds only itself (dead); c: feeds a (live) */
    ir_value *a2 = ir_binop(&lb, IR_ADD, body->args[1], body->args[3]);
    ir_value *b2 = ir_binop(&lb, IR_MUL, body->args[2], body->args[2]);
    ir_value *c2 = ir_unop(&lb, IR_SIN, body->args[3]);
    ir_value *ys[3] = {a2, b2, c2};
    ir_yield(&lb, ys, 3);
    keep(&f, loop->results[0]);
    cr_assert(run(&f, ir_opt_dce));
    cr_assert_eq(loop->nresults, 2);
    cr_assert_eq(loop->noperands, 4);
    cr_assert_eq(body->nargs, 3);
    cr_assert_eq(count_ops(body, IR_MUL), 0);
    cr_assert_eq(body->last->noperands, 2);
    cr_assert_eq(body->last->operands[0], a2);
    cr_assert_eq(body->last->operands[1], c2);
    cr_assert_eq(a2->def->operands[1], body->args[2]);
    cr_assert_eq(body->args[2]->index, 2);
    cr_assert_eq(loop->results[1]->index, 1);
    ir_module_free(f.m);
}

Test(passes, dce_removes_loops_without_effects) {
    fx f = fx_new();
    ir_value *x = f.p[P_X];
    ir_op *dead = ir_for(&f.b, ci(&f, ty_i32(), 0), f.p[P_N], &x, 1, false);
    ir_builder lb = ir_builder_at_end(f.m, dead->regions[0]);
    ir_value *n = ir_unop(&lb, IR_EXP, dead->regions[0]->args[1]);
    ir_yield(&lb, &n, 1);
    ir_op *live = ir_for(&f.b, ci(&f, ty_i32(), 0), f.p[P_N], NULL, 0, false);
    ir_builder lb2 = ir_builder_at_end(f.m, live->regions[0]);
    ir_store(&lb2, f.p[P_OF], &live->regions[0]->args[0], 1, x);
    ir_yield(&lb2, NULL, 0);
    ir_value *c = ir_binop(&f.b, IR_LT, x, cf(&f, ty_f32(), 1.0));
    ir_op *e = ir_if(&f.b, c, NULL, 0);
    ir_builder t = ir_builder_at_end(f.m, e->regions[0]);
    ir_unop(&t, IR_COS, x);
    ir_yield(&t, NULL, 0);
    ir_builder el = ir_builder_at_end(f.m, e->regions[1]);
    ir_yield(&el, NULL, 0);
    cr_assert(run(&f, ir_opt_dce));
    cr_assert_eq(count_ops(f.k->body, IR_FOR), 1);
    cr_assert_eq(count_ops(f.k->body, IR_STORE), 1);
    cr_assert_eq(count_ops(f.k->body, IR_IF), 0);
    cr_assert_eq(count_ops(f.k->body, IR_LT), 0);
    cr_assert_eq(count_ops(f.k->body, IR_EXP), 0);
    ir_module_free(f.m);
}

/* ---- pipeline ----------------------------------------------------------------------------- */

Test(passes, optimize_level0_does_nothing_level2_folds) {
    fx f = fx_new();
    ir_value *a = bin(&f, IR_ADD, ci(&f, ty_i32(), 2), ci(&f, ty_i32(), 3));
    ir_optimize(f.m, 0);
    cr_assert_eq(a->def->code, IR_ADD);
    ir_optimize(f.m, 2);
    cr_assert(verifies(f.m));
    cr_assert_eq(ival(stored(&f, 0)), 5);
    ir_module_free(f.m);
}

/* ---- golden files ------------------------------------------------------------------------- */

static const char *const GOLDEN_DIR = "passes";

static char *print_module(const ir_module *m) {
    kern_buf b = {0};
    ir_print(&b, m, NULL);
    return b.data ? buf_take(&b) : strdup("");
}

static ir_module *parse_golden(const char *name, const char *text, size_t len) {
    arena a;
    arena_init(&a);
    diag_sink s;
    diag_init(&s, &a);
    kern_source src = {name, text, len};
    ir_module *m = ir_parse(text, len, &src, &s);
    if (!m)
        diag_print_all(stderr, &s);
    diag_free(&s);
    arena_free(&a);
    return m;
}

typedef struct golden_pass {
    const char *ext; /* expected-output suffix */
    bool (*pass)(ir_module *m);
} golden_pass;

static bool opt2(ir_module *m) {
    ir_optimize(m, 2);
    return true;
}

static bool lower(ir_module *m) { return ir_lower_semantics(m, false); }
static bool lower_checked(ir_module *m) { return ir_lower_semantics(m, true); }

static const golden_pass GOLDEN_PASSES[] = {
    {".fold.out", ir_opt_fold}, {".simplify.out", ir_opt_simplify},
    {".cse.out", ir_opt_cse},   {".dce.out", ir_opt_dce},
    {".opt.out", opt2},         {".private.out", ir_opt_private_atomics},
    {".lower.out", lower},      {".checked.out", lower_checked},
};

Test(passes, golden) {
    char **names;
    int n = golden_list(GOLDEN_DIR, ".ir", &names);
    cr_assert_geq(n, 20, "expected at least 20 golden inputs, found %d", n);
    int checked = 0, failed = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        char *text = golden_read(GOLDEN_DIR, names[i], &len);
        cr_assert(text, "cannot read %s", names[i]);
        int outputs = 0;
        for (size_t p = 0; p < sizeof GOLDEN_PASSES / sizeof GOLDEN_PASSES[0]; p++) {
            char *out = golden_sibling(names[i], GOLDEN_PASSES[p].ext);
            size_t olen;
            char *expected = golden_read(GOLDEN_DIR, out, &olen);
            if (!expected) {
                free(out);
                continue;
            }
            free(expected);
            outputs++;
            ir_module *m = parse_golden(names[i], text, len);
            cr_assert(m, "%s does not parse", names[i]);
            if (!verifies(m)) {
                fprintf(stderr, "golden passes/%s: input does not verify\n", names[i]);
                failed++;
            }
            GOLDEN_PASSES[p].pass(m);
            if (!verifies(m)) {
                fprintf(stderr, "golden passes/%s: does not verify after %s\n", names[i],
                        GOLDEN_PASSES[p].ext);
                failed++;
            }
            char *actual = print_module(m);
            if (!golden_check(GOLDEN_DIR, out, actual))
                failed++;
            checked++;
            free(actual);
            ir_module_free(m);
            free(out);
        }
        if (outputs == 0) {
            fprintf(stderr, "golden passes/%s: no expected output beside it\n", names[i]);
            failed++;
        }
        free(text);
    }
    golden_free_list(names, n);
    cr_assert_eq(failed, 0, "%d of %d golden checks failed (see stderr)", failed, checked);
}

/* ---- the pass runner ---------------------------------------------------------------------- */

/* A "pass" that breaks the module: a store loses its value operand. */
static bool break_module(ir_module *m) {
    ir_op *task = m->kernels->body->last;
    ir_foreach_op(op, task->regions[0]) {
        if (op->code == IR_STORE) {
            op->noperands = 1;
            return true;
        }
    }
    return false;
}

Test(passes, kern_debug_verify_aborts_on_broken_ir, .signal = SIGABRT) {
    fx f = fx_new();
    keep(&f, f.p[P_X]);
    f.m->debug = IR_DEBUG_VERIFY;
    bool progress = false;
    IR_PASS(progress, f.m, break_module);
    cr_assert_fail("the runner did not abort (progress %d)", progress);
}

Test(passes, kern_debug_print_names_the_pass, .init = cr_redirect_stderr) {
    fx f = fx_new();
    ir_value *two = ci(&f, ty_i32(), 2), *three = ci(&f, ty_i32(), 3);
    bin(&f, IR_ADD, two, three);
    f.m->debug = kc_parse_pass_debug("print,roundtrip");
    bool progress = false;
    IR_PASS(progress, f.m, ir_opt_fold);
    IR_PASS(progress, f.m, ir_opt_cse); /* nothing to merge: prints nothing */
    cr_assert(progress);
    fflush(stderr);
    FILE *err = cr_get_redirected_stderr();
    char got[4096];
    size_t n = fread(got, 1, sizeof got - 1, err);
    got[n] = 0;
    cr_assert_str_eq(got, "// ---- IR after ir_opt_fold ----\n"
                          "source \"test.kern\"\n"
                          "\n"
                          "kernel @k(%of: f32[], %od: f64[], %oi: i32[], %ou: u32[], "
                          "%ol: i64[], %ob: bool[], %x: f32, %y: f64, %n: i32, %u: u32) "
                          "!1:1 {\n"
                          "  serial {\n"
                          "    %0 = const 2 : i32\n"
                          "    %1 = const 3 : i32\n"
                          "    %2 = const 5 : i32\n"
                          "    %3 = const 0 : i32\n"
                          "    store %oi[%3], %2\n"
                          "  }\n"
                          "}\n");
    ir_module_free(f.m);
}

Test(passes, forward_invariant_carried_value) {
    fx f = fx_new();
    ir_value *inits[2] = {f.p[P_X], ir_const_bool(&f.b, false)};
    ir_op *loop = ir_for(&f.b, ci(&f, ty_i32(), 0), f.p[P_N], inits, 2, false);
    ir_region *body = loop->regions[0];
    ir_builder lb = ir_builder_at_end(f.m, body);
    ir_value *nx = ir_select(&lb, body->args[2], body->args[1],
                             ir_binop(&lb, IR_ADD, body->args[1], f.p[P_X]));
    ir_value *ys[2] = {nx, body->args[2]};
    ir_yield(&lb, ys, 2);
    keep(&f, loop->results[0]);
    keep(&f, loop->results[1]);
    cr_assert(run(&f, ir_opt_simplify));
    cr_assert_eq(stored(&f, 1), inits[1], "the flag never changes: its init");
    ir_optimize(f.m, 2);
    cr_assert(verifies(f.m));
    cr_assert_eq(loop->nresults, 1);
    cr_assert_eq(body->nargs, 2);
    cr_assert_eq(count_ops(body, IR_SELECT), 0);
    ir_module_free(f.m);
}
