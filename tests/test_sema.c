/* test_sema.c - semantic analysis (fe_check) and constant folding (sema_fold.c).
 *
 * Folding is tested on values directly, against results worked out by hand from the
 * language's rules (two's-complement wrapping, f32 rounding). Typing is tested through
 * fe_parse + fe_check on small programs, by inspecting the annotated tree: types, symbols,
 * inserted casts, folded values, tasks. A tree walker checks the annotation contract
 * (docs/semantics.md) on every node of every good program in the repository: operators
 * see operands of exactly their type, literals' kinds match their types, no untyped
 * sentinel survives. Error messages are mostly covered by the golden files in
 * tests/golden/errors; a few are checked here by location and text. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/context.h"
#include "../compiler/ast.h"
#include "../compiler/sema.h"
#include "golden.h"

/* ---- Helpers ------------------------------------------------------------------------ */

typedef struct checked {
    kc_ctx *ctx;
    fe_file *file;
    bool ok;
    char *diags; /* "L:C: severity: message\n" per diagnostic */
} checked;

static checked check(const char *text) {
    checked r;
    r.ctx = kc_ctx_new();
    const kern_source *src = kc_add_source(r.ctx, "t.kern", text, strlen(text));
    r.file = fe_parse(r.ctx, src);
    cr_assert_not_null(r.file);
    cr_assert_eq(r.ctx->diags.errors, 0, "syntax error in test program: %s",
                 r.ctx->diags.len ? r.ctx->diags.items[0].message : "");
    r.ok = fe_check(r.ctx, r.file);
    kern_buf b = {0};
    for (int i = 0; i < r.ctx->diags.len; i++) {
        const diag *d = &r.ctx->diags.items[i];
        buf_printf(&b, "%u:%u: %s: %s\n", d->loc.line, d->loc.col,
                   d->severity == DIAG_ERROR ? "error" : "warning", d->message);
    }
    r.diags = b.data ? buf_take(&b) : strdup("");
    return r;
}

static checked check_ok(const char *text) {
    checked r = check(text);
    cr_assert(r.ok, "expected no errors, got:\n%s", r.diags);
    return r;
}

static void done(checked *r) {
    kc_ctx_free(r->ctx);
    free(r->diags);
}

static fe_item *item(const checked *r, const char *name) {
    for (int i = 0; i < r->file->nitems; i++)
        if (!strcmp(r->file->items[i]->name, name))
            return r->file->items[i];
    cr_assert_fail("no item %s", name);
    return NULL;
}

/* The first let/var called name anywhere in the statement tree. */
static fe_stmt *find_decl(fe_stmt *st, const char *name) {
    if (!st)
        return NULL;
    fe_stmt *r = NULL;
    switch (st->kind) {
    case ST_LET:
    case ST_VAR: return !strcmp(st->decl.name, name) ? st : NULL;
    case ST_BLOCK:
        for (int i = 0; i < st->block.nstmts && !r; i++)
            r = find_decl(st->block.stmts[i], name);
        return r;
    case ST_IF: return (r = find_decl(st->if_.then, name)) ? r : find_decl(st->if_.els, name);
    case ST_FOR: return find_decl(st->for_.body, name);
    case ST_WHILE: return find_decl(st->while_.body, name);
    default: return NULL;
    }
}

static fe_stmt *decl_in(const checked *r, const char *fn, const char *name) {
    fe_stmt *st = find_decl(item(r, fn)->body, name);
    cr_assert_not_null(st, "no declaration of %s in %s", name, fn);
    return st;
}

/* The initializer of let/var `name` in item fn. */
static fe_expr *init_of(const checked *r, const char *fn, const char *name) {
    return decl_in(r, fn, name)->decl.init;
}

static fe_stmt *top_stmt(const checked *r, const char *fn, int i) {
    fe_stmt *b = item(r, fn)->body;
    cr_assert_lt(i, b->block.nstmts);
    return b->block.stmts[i];
}

/* ---- Folding ------------------------------------------------------------------------ */

static fe_value I(const kern_type *t, int64_t v) { return fe_value_int(t, v); }
static fe_value F(const kern_type *t, double v) { return fe_value_float(t, v); }

static int64_t fold2i(fe_binop op, fe_value a, fe_value b) {
    fe_value r;
    cr_assert_eq(fe_fold_binary(op, a, b, &r), FOLD_OK);
    return r.i;
}

Test(sema, fold_int_wraps_per_type) {
    cr_expect_eq(fold2i(BIN_ADD, I(ty_i32(), 2147483647), I(ty_i32(), 1)), -2147483648LL);
    cr_expect_eq(fold2i(BIN_SUB, I(ty_u32(), 0), I(ty_u32(), 1)), 4294967295LL);
    cr_expect_eq(fold2i(BIN_MUL, I(ty_i32(), 65536), I(ty_i32(), 65536)), 0);
    cr_expect_eq(fold2i(BIN_ADD, I(ty_i64(), INT64_MAX), I(ty_i64(), 1)), INT64_MIN);
    cr_expect_eq(fold2i(BIN_DIV, I(ty_i32(), -7), I(ty_i32(), 2)), -3); /* toward zero */
    cr_expect_eq(fold2i(BIN_REM, I(ty_i32(), -7), I(ty_i32(), 2)), -1);
    cr_expect_eq(fold2i(BIN_DIV, I(ty_i32(), INT32_MIN), I(ty_i32(), -1)), INT32_MIN);
    cr_expect_eq(fold2i(BIN_DIV, I(ty_i64(), INT64_MIN), I(ty_i64(), -1)), INT64_MIN);
    cr_expect_eq(fold2i(BIN_DIV, I(ty_u32(), 4294967295LL), I(ty_u32(), 2)), 2147483647);
    cr_expect_eq(fold2i(BIN_SHR, I(ty_i32(), -8), I(ty_i32(), 1)), -4);
    cr_expect_eq(fold2i(BIN_SHR, I(ty_u32(), 4294967288LL), I(ty_u32(), 1)), 2147483644);
    cr_expect_eq(fold2i(BIN_SHL, I(ty_i32(), 1), I(ty_i32(), 31)), INT32_MIN);
    cr_expect_eq(fold2i(BIN_BITXOR, I(ty_u32(), 0xF0), I(ty_u32(), 0xFF)), 0x0F);
    cr_expect_eq(fold2i(BIN_LT, I(ty_u32(), 4294967295LL), I(ty_u32(), 1)), 0); /* unsigned */
    cr_expect_eq(fold2i(BIN_LT, I(ty_i32(), -1), I(ty_i32(), 1)), 1);
    fe_value r;
    cr_expect_eq(fe_fold_unary(UN_BITNOT, I(ty_u32(), 0), &r), FOLD_OK);
    cr_expect_eq(r.i, 4294967295LL);
    cr_expect_eq(fe_fold_unary(UN_NEG, I(ty_i32(), INT32_MIN), &r), FOLD_OK);
    cr_expect_eq(r.i, INT32_MIN);
}

Test(sema, fold_refuses_runtime_failures) {
    fe_value r;
    cr_expect_eq(fe_fold_binary(BIN_DIV, I(ty_i32(), 1), I(ty_i32(), 0), &r), FOLD_DIV_ZERO);
    cr_expect_eq(fe_fold_binary(BIN_REM, I(ty_u32(), 1), I(ty_u32(), 0), &r), FOLD_DIV_ZERO);
    cr_expect_eq(fe_fold_binary(BIN_SHL, I(ty_i32(), 1), I(ty_i32(), 32), &r), FOLD_SHIFT);
    cr_expect_eq(fe_fold_binary(BIN_SHR, I(ty_i64(), 1), I(ty_i64(), -1), &r), FOLD_SHIFT);
    cr_expect_eq(fe_fold_cast(ty_i32(), F(ty_f64(), 3e9), &r), FOLD_RANGE);
    cr_expect_eq(fe_fold_cast(ty_u32(), F(ty_f32(), -1.0), &r), FOLD_RANGE);
    cr_expect_eq(fe_fold_cast(ty_i64(), F(ty_f64(), NAN), &r), FOLD_RANGE);
    /* float division by zero is IEEE */
    cr_expect_eq(fe_fold_binary(BIN_DIV, F(ty_f32(), 1.0), F(ty_f32(), 0.0), &r), FOLD_OK);
    cr_expect(isinf(r.f) && r.f > 0);
}

Test(sema, fold_floats_round_to_f32) {
    fe_value r;
    cr_expect_eq(F(ty_f32(), 0.1).f, (double)0.1f);
    cr_expect_eq(F(ty_f64(), 0.1).f, 0.1);
    cr_assert_eq(fe_fold_binary(BIN_ADD, F(ty_f32(), 0.1), F(ty_f32(), 0.2), &r), FOLD_OK);
    cr_expect_eq(r.f, (double)(0.1f + 0.2f));
    cr_assert_eq(fe_fold_binary(BIN_ADD, F(ty_f64(), 0.1), F(ty_f64(), 0.2), &r), FOLD_OK);
    cr_expect_eq(r.f, 0.1 + 0.2);
    cr_expect_neq(r.f, (double)(0.1f + 0.2f));
    fe_value two = F(ty_f32(), 2.0);
    cr_assert_eq(fe_fold_builtin(BI_SQRT, &two, 1, &r), FOLD_OK);
    cr_expect_eq(r.f, (double)(float)sqrt(2.0));
    cr_expect_eq(r.type, ty_f32());
    fe_value x = F(ty_f64(), -2.5);
    cr_assert_eq(fe_fold_builtin(BI_ROUND, &x, 1, &r), FOLD_OK);
    cr_expect_eq(r.f, -3.0); /* halfway away from zero */
    cr_assert_eq(fe_fold_builtin(BI_SIGN, &x, 1, &r), FOLD_OK);
    cr_expect_eq(r.f, -1.0);
    fe_value nan2[2] = {F(ty_f32(), NAN), F(ty_f32(), NAN)};
    cr_assert_eq(fe_fold_binary(BIN_NE, nan2[0], nan2[1], &r), FOLD_OK);
    cr_expect_eq(r.i, 1);
    cr_assert_eq(fe_fold_binary(BIN_EQ, nan2[0], nan2[1], &r), FOLD_OK);
    cr_expect_eq(r.i, 0);
}

Test(sema, fold_casts) {
    fe_value r;
    cr_assert_eq(fe_fold_cast(ty_i32(), F(ty_f32(), -2.7), &r), FOLD_OK);
    cr_expect_eq(r.i, -2); /* truncates toward zero */
    cr_assert_eq(fe_fold_cast(ty_u32(), I(ty_i32(), -1), &r), FOLD_OK);
    cr_expect_eq(r.i, 4294967295LL);
    cr_assert_eq(fe_fold_cast(ty_i32(), I(ty_u32(), 4294967295LL), &r), FOLD_OK);
    cr_expect_eq(r.i, -1);
    cr_assert_eq(fe_fold_cast(ty_bool(), I(ty_i32(), 2), &r), FOLD_OK);
    cr_expect_eq(r.i, 1);
    cr_assert_eq(fe_fold_cast(ty_bool(), F(ty_f32(), 0.0), &r), FOLD_OK);
    cr_expect_eq(r.i, 0);
    cr_assert_eq(fe_fold_cast(ty_f32(), I(ty_i32(), 16777217), &r), FOLD_OK);
    cr_expect_eq(r.f, 16777216.0); /* rounded to float */
    cr_assert_eq(fe_fold_cast(ty_i64(), I(ty_i32(), -5), &r), FOLD_OK);
    cr_expect_eq(r.i, -5);
    cr_assert_eq(fe_fold_cast(ty_i32(), I(ty_bool(), 1), &r), FOLD_OK);
    cr_expect_eq(r.i, 1);
}

Test(sema, fold_int_builtins) {
    fe_value r;
    fe_value a[3] = {I(ty_i32(), INT32_MIN)};
    cr_assert_eq(fe_fold_builtin(BI_ABS, a, 1, &r), FOLD_OK);
    cr_expect_eq(r.i, INT32_MIN); /* wraps */
    a[0] = I(ty_i32(), -7);
    cr_assert_eq(fe_fold_builtin(BI_SIGN, a, 1, &r), FOLD_OK);
    cr_expect_eq(r.i, -1);
    a[0] = I(ty_i32(), 15), a[1] = I(ty_i32(), 0), a[2] = I(ty_i32(), 10);
    cr_assert_eq(fe_fold_builtin(BI_CLAMP, a, 3, &r), FOLD_OK);
    cr_expect_eq(r.i, 10);
    cr_assert_eq(fe_fold_builtin(BI_MIN, a, 2, &r), FOLD_OK);
    cr_expect_eq(r.i, 0);
    a[0] = I(ty_u32(), 4294967295LL), a[1] = I(ty_u32(), 1);
    cr_assert_eq(fe_fold_builtin(BI_MAX, a, 2, &r), FOLD_OK);
    cr_expect_eq(r.i, 4294967295LL);
    cr_expect_eq(fe_fold_builtin(BI_SIN, a, 1, &r), FOLD_NOT_CONST);
}

Test(sema, fold_ideal_is_exact) {
    fe_value r;
    cr_assert_eq(fe_fold_ideal_binary(BIN_SHL, I(ty_i64(), 1), I(ty_i64(), 40), &r), FOLD_OK);
    cr_expect_eq(r.i, 1LL << 40);
    cr_expect_eq(fe_fold_ideal_binary(BIN_MUL, I(ty_i64(), INT64_MAX), I(ty_i64(), 2), &r),
                 FOLD_OVERFLOW);
    cr_expect_eq(fe_fold_ideal_binary(BIN_DIV, I(ty_i64(), 1), I(ty_i64(), 0), &r), FOLD_DIV_ZERO);
    cr_assert_eq(fe_fold_ideal_binary(BIN_DIV, I(ty_i64(), 1), F(ty_f64(), 3.0), &r), FOLD_OK);
    cr_expect_eq(r.f, 1.0 / 3.0);
    cr_expect_eq(r.type, ty_f64());
    cr_assert_eq(fe_fold_ideal_binary(BIN_DIV, I(ty_i64(), 1), I(ty_i64(), 2), &r), FOLD_OK);
    cr_expect_eq(r.i, 0);
}

/* Literal shifts are exact like + and *: a set bit reaching bit 63 overflows, 1 << 63 as
 * much as 3 << 62 (1 << 63 was accepted, wrapping to -2^63, while 3 << 62 was an error:
 * issue 23); a typed shift wraps per type. */
Test(sema, ideal_shifts_overflow_alike) {
    fe_value r;
    cr_expect_eq(fe_fold_ideal_binary(BIN_SHL, I(ty_i64(), 1), I(ty_i64(), 63), &r), FOLD_OVERFLOW);
    cr_expect_eq(fe_fold_ideal_binary(BIN_SHL, I(ty_i64(), 3), I(ty_i64(), 62), &r), FOLD_OVERFLOW);
    cr_expect_eq(fe_fold_ideal_binary(BIN_SHL, I(ty_i64(), 1), I(ty_i64(), 64), &r), FOLD_SHIFT);
    cr_assert_eq(fe_fold_ideal_binary(BIN_SHL, I(ty_i64(), 1), I(ty_i64(), 62), &r), FOLD_OK);
    cr_expect_eq(r.i, INT64_C(1) << 62);
    cr_assert_eq(fe_fold_ideal_binary(BIN_SHL, I(ty_i64(), 0), I(ty_i64(), 63), &r), FOLD_OK);
    cr_expect_eq(r.i, 0);
    const char *const overflow[] = {"1 << 63", "3 << 62", "2 << 62"};
    for (size_t i = 0; i < sizeof overflow / sizeof *overflow; i++) {
        char src[160];
        snprintf(src, sizeof src, "const C: i64 = %s;\nkernel k(a: i64[]) { a[0] = C; }\n",
                 overflow[i]);
        checked c = check(src);
        cr_expect(!c.ok &&
                      strstr(c.diags, "1:18: error: integer constant overflows 64 bits in '<<'"),
                  "%s: %s", overflow[i], c.diags);
        done(&c);
    }
    checked c = check_ok("const C: i64 = i64(1) << 63;\nkernel k(a: i64[]) { a[0] = C; }\n");
    cr_expect_eq(item(&c, "C")->sym->cval.i, INT64_MIN);
    done(&c);
}

Test(sema, value_format) {
    char b[48];
    fe_value_format(b, sizeof b, F(ty_f64(), 0.1));
    cr_expect_str_eq(b, "0.1");
    fe_value_format(b, sizeof b, F(ty_f64(), 2.0));
    cr_expect_str_eq(b, "2.0");
    fe_value_format(b, sizeof b, F(ty_f64(), 1e39));
    cr_expect_str_eq(b, "1e+39");
    fe_value_format(b, sizeof b, I(ty_i64(), -42));
    cr_expect_str_eq(b, "-42");
}

/* ---- Literal typing and conversions ------------------------------------------------- */

Test(sema, literals_default_and_take_declared_type) {
    checked r = check_ok("kernel k(a: f32[]) {\n"
                         "    let i = 1;\n"
                         "    let f = 1.5;\n"
                         "    let d: f64 = 0.1;\n"
                         "    let u: u32 = 4000000000;\n"
                         "    let g: f32 = 3;\n"
                         "    let h: f64 = 1.0 / 3.0;\n"
                         "    let m: u32 = ~0;\n"
                         "    let n = -5;\n"
                         "    a[0] = f32(i) + f + f32(d) + f32(u) + g + f32(h) + f32(m) + f32(n);\n"
                         "}\n");
    fe_expr *e = init_of(&r, "k", "i");
    cr_expect_eq(e->kind, EX_INT);
    cr_expect_eq(e->type, ty_i32());
    e = init_of(&r, "k", "f");
    cr_expect_eq(e->kind, EX_FLOAT);
    cr_expect_eq(e->type, ty_f32());
    cr_expect_eq(e->cval.f, (double)1.5f);
    e = init_of(&r, "k", "d");
    cr_expect_eq(e->type, ty_f64());
    cr_expect_eq(e->flt.fval, 0.1); /* exact f64, not a widened f32 */
    cr_expect_eq(e->cval.f, 0.1);
    e = init_of(&r, "k", "u");
    cr_expect_eq(e->type, ty_u32());
    cr_expect_eq(e->ival, 4000000000LL);
    e = init_of(&r, "k", "g");
    cr_expect_eq(e->kind, EX_FLOAT); /* an integer literal that became f32 */
    cr_expect_eq(e->type, ty_f32());
    cr_expect_eq(e->flt.fval, 3.0);
    e = init_of(&r, "k", "h");
    cr_expect_eq(e->kind, EX_FLOAT); /* folded into one literal */
    cr_expect_eq(e->type, ty_f64());
    cr_expect_eq(e->cval.f, 1.0 / 3.0);
    e = init_of(&r, "k", "m");
    cr_expect(e->is_const);
    cr_expect_eq(e->type, ty_u32());
    cr_expect_eq(e->cval.i, 4294967295LL);
    e = init_of(&r, "k", "n");
    cr_expect_eq(e->kind, EX_INT);
    cr_expect_eq(e->type, ty_i32());
    cr_expect_eq(e->ival, -5);
    cr_expect_eq(decl_in(&r, "k", "n")->decl.sym->type, ty_i32());
    done(&r);
}

Test(sema, literal_takes_other_operand_type) {
    checked r = check_ok("kernel k(x: f64, i: i64, a: f64[]) {\n"
                         "    let p = x * 2;\n"
                         "    let q = 3 + i;\n"
                         "    let s = i * 0.5;\n"
                         "    let t = x * (1.0 / 3.0);\n"
                         "    a[0] = p + f64(q) + f64(s) + t;\n"
                         "}\n");
    fe_expr *e = init_of(&r, "k", "p");
    cr_expect_eq(e->type, ty_f64());
    cr_expect_eq(e->binary.rhs->kind, EX_FLOAT);
    cr_expect_eq(e->binary.rhs->type, ty_f64());
    cr_expect_eq(e->binary.rhs->cval.f, 2.0);
    e = init_of(&r, "k", "q");
    cr_expect_eq(e->type, ty_i64());
    cr_expect_eq(e->binary.lhs->type, ty_i64());
    cr_expect_eq(e->binary.lhs->kind, EX_INT);
    /* a float literal with an integer operand: promotion to f32 */
    e = init_of(&r, "k", "s");
    cr_expect_eq(e->type, ty_f32());
    cr_expect_eq(e->binary.lhs->kind, EX_CAST);
    cr_expect_eq(e->binary.lhs->cast.to, ty_f32());
    cr_expect_eq(e->binary.lhs->cast.arg->type, ty_i64());
    e = init_of(&r, "k", "t");
    cr_expect_eq(e->binary.rhs->type, ty_f64());
    cr_expect_eq(e->binary.rhs->cval.f, 1.0 / 3.0);
    done(&r);
}

Test(sema, widening_inserts_casts) {
    checked r = check_ok("func f(x: f64) -> f64 { return x; }\n"
                         "func g(n: i32) -> i64 { return n; }\n"
                         "kernel k(a: f64[], b: i32[], x: f32) {\n"
                         "    let s = a[0] + b[0];\n"
                         "    var v: f64 = x;\n"
                         "    v += x;\n"
                         "    let w = f(x);\n"
                         "    let c = b[0] < x;\n"
                         "    a[0] = v + w + f64(g(1)) + s;\n"
                         "    if c { a[1] = x; }\n"
                         "}\n");
    fe_expr *e = init_of(&r, "k", "s");
    cr_expect_eq(e->type, ty_f64());
    cr_assert_eq(e->binary.rhs->kind, EX_CAST);
    cr_expect_eq(e->binary.rhs->type, ty_f64());
    cr_expect_eq(e->binary.rhs->cast.arg->kind, EX_INDEX);
    cr_expect_eq(e->binary.rhs->cast.arg->type, ty_i32());
    cr_expect_eq(e->binary.rhs->loc.line, e->binary.rhs->cast.arg->loc.line);
    cr_expect_eq(e->binary.rhs->loc.col, e->binary.rhs->cast.arg->loc.col);
    e = init_of(&r, "k", "v");
    cr_assert_eq(e->kind, EX_CAST);
    cr_expect_eq(e->cast.to, ty_f64());
    fe_stmt *as = top_stmt(&r, "k", 2);
    cr_assert_eq(as->kind, ST_ASSIGN);
    cr_expect_eq(as->assign.op, AS_ADD);
    cr_assert_eq(as->assign.value->kind, EX_CAST); /* compound value converted to v's type */
    cr_expect_eq(as->assign.value->type, ty_f64());
    e = init_of(&r, "k", "w");
    cr_assert_eq(e->kind, EX_CALL);
    cr_expect_eq(e->call.builtin, BI_NONE);
    cr_expect_eq(e->call.func, item(&r, "f"));
    cr_expect_eq(e->call.args[0]->kind, EX_CAST);
    cr_expect_eq(e->call.args[0]->type, ty_f64());
    e = init_of(&r, "k", "c");
    cr_expect_eq(e->type, ty_bool());
    cr_expect_eq(e->binary.lhs->kind, EX_CAST);
    cr_expect_eq(e->binary.lhs->type, ty_f32());
    cr_expect_eq(e->binary.rhs->type, ty_f32());
    /* return value converted to the return type */
    fe_stmt *ret = item(&r, "g")->body->block.stmts[0];
    cr_assert_eq(ret->kind, ST_RETURN);
    cr_expect_eq(ret->ret.value->kind, EX_CAST);
    cr_expect_eq(ret->ret.value->type, ty_i64());
    done(&r);
}

Test(sema, shifts_keep_left_type) {
    checked r = check_ok("kernel k(a: u32[], s: i64, x: i32) {\n"
                         "    let p = a[0] << s;\n"
                         "    let q = x >> 3;\n"
                         "    let big: i64 = 1 << 40;\n"
                         "    a[1] = p + u32(q) + u32(big);\n"
                         "}\n");
    fe_expr *e = init_of(&r, "k", "p");
    cr_expect_eq(e->type, ty_u32());
    cr_assert_eq(e->binary.rhs->kind, EX_CAST);
    cr_expect_eq(e->binary.rhs->type, ty_u32()); /* narrowing count: explicit, no error */
    e = init_of(&r, "k", "q");
    cr_expect_eq(e->type, ty_i32());
    cr_expect_eq(e->binary.rhs->type, ty_i32());
    e = init_of(&r, "k", "big");
    cr_expect(e->is_const);
    cr_expect_eq(e->type, ty_i64());
    cr_expect_eq(e->cval.i, 1LL << 40);
    done(&r);
}

Test(sema, for_bounds_promote) {
    checked r = check_ok("kernel k(a: f32[], n: i64, m: i32) {\n"
                         "    for i in m..n {\n"
                         "        for j in 0..3 { a[i] += f32(j); }\n"
                         "    }\n"
                         "}\n");
    fe_stmt *f = top_stmt(&r, "k", 0);
    cr_assert_eq(f->kind, ST_FOR);
    fe_range *rg = &f->for_.ranges[0];
    cr_expect_eq(rg->sym->type, ty_i64());
    cr_expect_eq(rg->sym->kind, SYM_LOOPVAR);
    cr_expect_eq(rg->sym->decl, f);
    cr_assert_eq(rg->lo->kind, EX_CAST);
    cr_expect_eq(rg->lo->type, ty_i64());
    cr_expect_eq(rg->hi->type, ty_i64());
    fe_stmt *inner = f->for_.body->block.stmts[0];
    cr_expect_eq(inner->for_.ranges[0].sym->type, ty_i32());
    cr_expect(f->for_.parallel);
    cr_expect_not(inner->for_.parallel);
    done(&r);
}

/* ---- Symbols and calls --------------------------------------------------------------- */

Test(sema, symbols_and_builtins_are_annotated) {
    checked r = check_ok("const K = 2;\n"
                         "kernel k(a: f32[], b: f32[,], nograd s: f32) {\n"
                         "    for i in 0..len(a) {\n"
                         "        let v = sin(a[i]) * s + f32(K);\n"
                         "        let n = shape(b, 1);\n"
                         "        let old = atomic_add(b[i, 0], v);\n"
                         "        a[i] = old + f32(n);\n"
                         "    }\n"
                         "}\n");
    fe_item *k = item(&r, "k");
    cr_expect_eq(k->params[0].sym->kind, SYM_PARAM);
    cr_expect_eq(k->params[0].sym->param, &k->params[0]);
    cr_expect_eq(k->params[0].sym->owner, k);
    fe_expr *v = init_of(&r, "k", "v");
    fe_expr *sn = v->binary.lhs->binary.lhs;
    cr_assert_eq(sn->kind, EX_CALL);
    cr_expect_eq(sn->call.builtin, BI_SIN);
    cr_expect_eq(sn->type, ty_f32());
    cr_expect_eq(sn->call.args[0]->index.sym, k->params[0].sym);
    cr_expect_eq(v->binary.lhs->binary.rhs->name.sym, k->params[2].sym);
    fe_expr *kc = v->binary.rhs->cast.arg;
    cr_expect_eq(kc->name.sym, item(&r, "K")->sym);
    cr_expect(kc->is_const);
    cr_expect_eq(kc->cval.i, 2);
    fe_expr *n = init_of(&r, "k", "n");
    cr_expect_eq(n->call.builtin, BI_SHAPE);
    cr_expect_eq(n->type, ty_i32());
    cr_expect_eq(n->call.args[0]->type, ty_array(ty_f32(), 2));
    cr_expect_eq(n->call.args[1]->cval.i, 1);
    fe_expr *old = init_of(&r, "k", "old");
    cr_expect_eq(old->call.builtin, BI_ATOMIC_ADD);
    cr_expect_eq(old->type, ty_f32());
    fe_stmt *d = decl_in(&r, "k", "old");
    cr_expect_eq(d->decl.sym->kind, SYM_LOCAL);
    cr_expect_eq(d->decl.sym->decl, d);
    cr_expect_not(d->decl.sym->is_mutable);
    done(&r);
}

Test(sema, consts_fold_in_any_order) {
    checked r = check_ok("const C = A * 2;\n"
                         "const A = 2 * 3 + 1;\n"
                         "const R: f32 = sqrt(2.0);\n"
                         "const D: f64 = 0.1;\n"
                         "const M: u32 = 0xffffffff;\n"
                         "const T = i32(2.9) + i32(-2.9);\n"
                         "const B = A > 5 && true;\n"
                         "kernel k(a: f32[]) { let q = C + 1; a[0] = f32(q); }\n");
    cr_expect_eq(item(&r, "A")->sym->cval.i, 7);
    cr_expect_eq(item(&r, "A")->sym->type, ty_i32());
    cr_expect_eq(item(&r, "C")->sym->cval.i, 14);
    cr_expect_eq(item(&r, "R")->sym->type, ty_f32());
    cr_expect_eq(item(&r, "R")->sym->cval.f, (double)(float)sqrt(2.0));
    cr_expect_eq(item(&r, "D")->sym->cval.f, 0.1);
    cr_expect_eq(item(&r, "M")->sym->cval.i, 4294967295LL);
    cr_expect_eq(item(&r, "T")->sym->cval.i, 0);
    cr_expect_eq(item(&r, "B")->sym->type, ty_bool());
    cr_expect_eq(item(&r, "B")->sym->cval.i, 1);
    cr_expect_eq(item(&r, "A")->sym->kind, SYM_CONST);
    fe_expr *q = init_of(&r, "k", "q");
    cr_expect(q->is_const);
    cr_expect_eq(q->cval.i, 15);
    done(&r);
}

Test(sema, division_by_zero_is_left_for_run_time) {
    checked r = check("kernel k(a: i32[]) { let d = 1 / 0; let e = a[0] % 0; a[0] = d + e; }\n");
    cr_expect(r.ok, "%s", r.diags);
    fe_expr *d = init_of(&r, "k", "d");
    cr_expect_not(d->is_const);
    cr_expect_eq(d->kind, EX_BINARY);
    cr_expect_eq(d->type, ty_i32());
    cr_expect_str_eq(r.diags, "1:32: warning: integer division by zero\n"
                              "1:50: warning: integer division by zero\n");
    done(&r);
}

/* ---- Kernels as task sequences ------------------------------------------------------- */

Test(sema, tasks_and_uniform_lets) {
    checked r = check_ok("func sq(x: i32) -> i32 { return x * x; }\n"
                         "kernel k(x: f32[], total: f32[], s: f32) {\n"
                         "    let n = len(x);\n"
                         "    var acc = 0.0;\n"
                         "    total[0] = acc;\n"
                         "    for i in 0..n { total[0] += x[i]; }\n"
                         "    let half = min(n / 2, i32(sqrt(f32(n))));\n"
                         "    let sqh = sq(half);\n"
                         "    total[1] = f32(sqh);\n"
                         "    let first = x[0];\n"
                         "    for i in 0..n, j in 0..half {\n"
                         "        for t in 0..i { x[i] = x[i] * s + f32(half + t + j); }\n"
                         "    }\n"
                         "}\n");
    fe_item *k = item(&r, "k");
    cr_expect_eq(k->ntasks, 4);
    fe_sym *n = decl_in(&r, "k", "n")->decl.sym;
    cr_expect(n->is_uniform);
    cr_expect_eq(n->task, 0);
    fe_sym *acc = decl_in(&r, "k", "acc")->decl.sym;
    cr_expect_not(acc->is_uniform);
    cr_expect_eq(acc->task, 0);
    fe_sym *half = decl_in(&r, "k", "half")->decl.sym;
    cr_expect(half->is_uniform); /* operators, casts and math builtins of uniform values */
    cr_expect_eq(half->task, 2);
    fe_sym *sqh = decl_in(&r, "k", "sqh")->decl.sym;
    cr_expect_not(sqh->is_uniform); /* func calls are not uniform */
    fe_sym *first = decl_in(&r, "k", "first")->decl.sym;
    cr_expect_not(first->is_uniform); /* memory may change between tasks */
    fe_stmt *f1 = top_stmt(&r, "k", 3), *f2 = top_stmt(&r, "k", 8);
    cr_expect(f1->for_.parallel);
    cr_expect(f2->for_.parallel);
    cr_expect_eq(f1->for_.ranges[0].sym->task, 1);
    cr_expect_eq(f2->for_.ranges[1].sym->task, 3);
    cr_expect_eq(f2->for_.ranges[1].sym->range, 1);
    fe_stmt *inner = f2->for_.body->block.stmts[0];
    cr_expect_not(inner->for_.parallel);
    cr_expect_eq(item(&r, "sq")->ntasks, 0);
    done(&r);
}

Test(sema, empty_kernel_has_no_tasks) {
    checked r = check_ok("kernel k() { }\nkernel l(a: f32[]) { a[0] = 1.0; a[1] = 2.0; }\n");
    cr_expect_eq(item(&r, "k")->ntasks, 0);
    cr_expect_eq(item(&r, "l")->ntasks, 1);
    done(&r);
}

Test(sema, serial_multirange_may_use_outer_variable) {
    checked r = check_ok("kernel k(a: f32[,], n: i32) {\n"
                         "    if n > 0 {\n"
                         "        for i in 0..n, j in 0..i { a[i, j] = 0.0; }\n"
                         "    }\n"
                         "}\n");
    done(&r);
}

Test(sema, continue_in_parallel_for_is_allowed) {
    checked r = check_ok("kernel k(a: f32[]) {\n"
                         "    for i in 0..len(a) {\n"
                         "        if a[i] < 0.0 { continue; }\n"
                         "        var j = 0;\n"
                         "        while j < 3 { j += 1; if j == 2 { break; } }\n"
                         "        a[i] = sqrt(a[i]);\n"
                         "    }\n"
                         "}\n");
    done(&r);
}

/* ---- Errors ------------------------------------------------------------------------- */

Test(sema, several_errors_in_one_run) {
    checked r = check("kernel k(a: f32[], n: i32) {\n"
                      "    let x: f32 = a[0] + 1.0;\n"
                      "    let y: i32 = x;\n"
                      "    n = 2;\n"
                      "    a[0] = undefined;\n"
                      "}\n");
    cr_expect_not(r.ok);
    cr_expect_str_eq(r.diags,
                     "3:18: error: cannot implicitly convert f32 to i32; write i32(...)\n"
                     "4:5: error: cannot assign to parameter 'n'; parameters are immutable, "
                     "copy it into a var first (var n = n;)\n"
                     "5:12: error: unknown name 'undefined'\n");
    done(&r);
}

Test(sema, suggestions_for_close_names) {
    checked r = check("func smooth(x: f32) -> f32 { return x; }\n"
                      "kernel k(values: f32[]) {\n"
                      "    let total = valuez[0];\n"
                      "    values[0] = smoth(total) + sinn(total);\n"
                      "}\n");
    cr_expect_str_eq(r.diags, "3:17: error: unknown name 'valuez'; did you mean 'values'?\n"
                              "4:17: error: unknown function 'smoth'; did you mean 'smooth'?\n"
                              "4:32: error: unknown function 'sinn'; did you mean 'sin'?\n");
    done(&r);
}

Test(sema, no_cascade_after_an_error) {
    /* one unknown name: the operators, the conversion and the call above it stay silent */
    checked r = check("kernel k(a: f32[]) { a[0] = sqrt(nope * 2.0 + 1.0) + a[1]; }\n");
    cr_expect_str_eq(r.diags, "1:34: error: unknown name 'nope'\n");
    done(&r);
}

Test(sema, parameter_shadowed_by_a_var_copy) {
    checked r = check_ok("func f(x: f32) -> f32 { var x = x; x *= 2.0; return x; }\n"
                         "kernel k(a: f32[]) { a[0] = f(a[0]); }\n");
    fe_stmt *d = item(&r, "f")->body->block.stmts[0];
    cr_expect_eq(d->decl.init->name.sym, item(&r, "f")->params[0].sym);
    cr_expect(d->decl.sym->is_mutable);
    done(&r);
}

/* ---- The annotation contract on every good program --------------------------------- */

typedef struct walk {
    int exprs;
    char err[256];
} walk;

#define BAD(w, e, ...)                                                                           \
    do {                                                                                         \
        if (!(w)->err[0]) {                                                                      \
            int n_ = snprintf((w)->err, sizeof(w)->err, "%u:%u: ", (e)->loc.line, (e)->loc.col); \
            snprintf((w)->err + n_, sizeof(w)->err - (size_t)n_, __VA_ARGS__);                   \
        }                                                                                        \
    } while (0)

static bool interned_scalar(const kern_type *t) {
    return t && !fe_is_untyped(t) && ty_is_scalar(t) && ty_scalar(t->kind) == t;
}

static void walk_expr(walk *w, const fe_expr *e) {
    if (!e) {
        snprintf(w->err, sizeof w->err, "NULL expression");
        return;
    }
    w->exprs++;
    const kern_type *t = e->type;
    if (!t || fe_is_untyped(t)) {
        BAD(w, e, "expression without a type");
        return;
    }
    if (e->is_const && e->cval.type != t)
        BAD(w, e, "cval type %s differs from type %s", e->cval.type ? e->cval.type->name : "-",
            t->name);
    switch (e->kind) {
    case EX_INT:
        if (!ty_is_int(t) || !e->is_const || e->cval.i != e->ival)
            BAD(w, e, "integer literal typed %s", t->name);
        break;
    case EX_FLOAT:
        if (!ty_is_float(t) || !e->is_const || e->cval.f != e->flt.fval)
            BAD(w, e, "float literal typed %s", t->name);
        break;
    case EX_BOOL:
        if (t != ty_bool())
            BAD(w, e, "bool literal typed %s", t->name);
        break;
    case EX_NAME:
        if (!e->name.sym || e->name.sym->type != t)
            BAD(w, e, "name '%s' without its symbol's type", e->name.name);
        break;
    case EX_UNARY:
        walk_expr(w, e->unary.arg);
        if (e->unary.arg->type != t)
            BAD(w, e, "unary operand type %s, result %s", e->unary.arg->type->name, t->name);
        break;
    case EX_BINARY: {
        const fe_expr *l = e->binary.lhs, *r = e->binary.rhs;
        walk_expr(w, l);
        walk_expr(w, r);
        if (w->err[0])
            return;
        if (ty_is_aggregate(l->type) || ty_is_aggregate(r->type)) {
            /* vectors: one side may be the component type (broadcast), m * v mixes types */
            const kern_type *agg = ty_is_aggregate(l->type) ? l->type : r->type;
            const kern_type *other = agg == l->type ? r->type : l->type;
            if (other != agg && other != agg->elem && !ty_is_aggregate(other))
                BAD(w, e, "vector operands of %s: %s and %s", fe_binop_text(e->binary.op),
                    l->type->name, r->type->name);
            break;
        }
        if (l->type != r->type)
            BAD(w, e, "operands of %s have types %s and %s", fe_binop_text(e->binary.op),
                l->type->name, r->type->name);
        bool to_bool = e->binary.op >= BIN_EQ;
        if (to_bool ? t != ty_bool() : t != l->type)
            BAD(w, e, "operator %s has type %s", fe_binop_text(e->binary.op), t->name);
        if ((e->binary.op == BIN_AND || e->binary.op == BIN_OR) && l->type != ty_bool())
            BAD(w, e, "logical operator on %s", l->type->name);
        break;
    }
    case EX_COND:
        walk_expr(w, e->cond.cond);
        walk_expr(w, e->cond.a);
        walk_expr(w, e->cond.b);
        if (!w->err[0] &&
            (e->cond.cond->type != ty_bool() || e->cond.a->type != t || e->cond.b->type != t))
            BAD(w, e, "?: with mismatched types");
        break;
    case EX_CAST:
        walk_expr(w, e->cast.arg);
        if (e->cast.to != t || !interned_scalar(t))
            BAD(w, e, "cast typed %s", t->name);
        break;
    case EX_INDEX: {
        const fe_sym *y = e->index.sym;
        if (!y || (ty_is_array(y->type) &&
                   (y->type->elem != t || y->type->rank != e->index.nidx)))
            BAD(w, e, "index of '%s' badly annotated", e->index.name);
        for (int i = 0; i < e->index.nidx; i++) {
            walk_expr(w, e->index.idx[i]);
            if (!w->err[0] && !ty_is_int(e->index.idx[i]->type))
                BAD(w, e, "index typed %s", e->index.idx[i]->type->name);
        }
        break;
    }
    case EX_MEMBER:
    case EX_ELEM:
    case EX_CONSTRUCT:
    case EX_STRUCTLIT:
    case EX_ARRAYLIT: {
        const fe_expr *k[64];
        int n = fe_expr_kids(e, k, 64);
        for (int i = 0; i < n && i < 64; i++)
            walk_expr(w, (fe_expr *)k[i]);
        break;
    }
    case EX_CALL: {
        fe_builtin b = e->call.builtin;
        for (int i = 0; i < e->call.nargs; i++)
            walk_expr(w, e->call.args[i]);
        if (w->err[0])
            return;
        if (b == BI_NONE) {
            const fe_item *f = e->call.func;
            if (!f || f->nparams != e->call.nargs || f->ret != t)
                BAD(w, e, "call of '%s' badly annotated", e->call.name);
            else
                for (int i = 0; i < f->nparams; i++)
                    if (e->call.args[i]->type != f->params[i].type)
                        BAD(w, e, "argument %d of '%s' typed %s", i + 1, e->call.name,
                            e->call.args[i]->type->name);
        } else if (b == BI_LEN || b == BI_SHAPE) {
            if (t != ty_i32() || e->call.args[0]->kind != EX_NAME ||
                !ty_is_array(e->call.args[0]->type))
                BAD(w, e, "len/shape badly annotated");
            if (b == BI_SHAPE && (!e->call.args[1]->is_const || e->call.args[1]->type != ty_i32()))
                BAD(w, e, "shape dimension not an i32 constant");
        } else if (fe_builtin_overridable(b)) {
            /* dot, cross, length, ...: typed by their own rules (sema_agg.c) */
        } else if (b >= BI_ATOMIC_ADD && b <= BI_ATOMIC_MAX && ty_is_aggregate(t)) {
            if (e->call.args[1]->type != t)
                BAD(w, e, "vector atomic badly annotated");
        } else if (b >= BI_ATOMIC_ADD && b <= BI_ATOMIC_MAX) {
            if (e->call.args[0]->kind != EX_INDEX || e->call.args[0]->type != t ||
                e->call.args[1]->type != t)
                BAD(w, e, "atomic badly annotated");
        } else {
            int first = b == BI_SELECT ? 1 : 0;
            if (b == BI_SELECT && e->call.args[0]->type != ty_bool())
                BAD(w, e, "select condition typed %s", e->call.args[0]->type->name);
            for (int i = first; i < e->call.nargs; i++)
                if (e->call.args[i]->type != t &&
                    !(ty_is_aggregate(t) && e->call.args[i]->type == t->elem)) /* broadcast */
                    BAD(w, e, "argument %d of %s typed %s, result %s", i + 1, e->call.name,
                        e->call.args[i]->type->name, t->name);
        }
        break;
    }
    }
}

static void walk_stmt(walk *w, const fe_stmt *st, const fe_item *fn) {
    if (!st)
        return;
    switch (st->kind) {
    case ST_LET:
    case ST_VAR:
        if (st->decl.init)
            walk_expr(w, st->decl.init); /* none: `var a: f32[8];`, zero */
        if (!st->decl.sym || (st->decl.init && st->decl.sym->type != st->decl.init->type) ||
            (st->decl.declared && st->decl.declared != st->decl.sym->type))
            BAD(w, st, "declaration of '%s' badly annotated", st->decl.name);
        break;
    case ST_ASSIGN:
        walk_expr(w, st->assign.target);
        walk_expr(w, st->assign.value);
        if (!w->err[0] && st->assign.target->type != st->assign.value->type &&
            !(st->assign.op != AS_SET && ty_is_aggregate(st->assign.target->type)))
            BAD(w, st, "assignment of %s to %s", st->assign.value->type->name,
                st->assign.target->type->name);
        break;
    case ST_IF:
        walk_expr(w, st->if_.cond);
        if (!w->err[0] && st->if_.cond->type != ty_bool())
            BAD(w, st, "if condition typed %s", st->if_.cond->type->name);
        walk_stmt(w, st->if_.then, fn);
        walk_stmt(w, st->if_.els, fn);
        break;
    case ST_FOR:
        for (int i = 0; i < st->for_.nranges; i++) {
            const fe_range *r = &st->for_.ranges[i];
            walk_expr(w, r->lo);
            walk_expr(w, r->hi);
            if (!w->err[0] && (!r->sym || !ty_is_int(r->sym->type) || r->lo->type != r->sym->type ||
                               r->hi->type != r->sym->type))
                BAD(w, st, "range '%s' badly annotated", r->var);
        }
        walk_stmt(w, st->for_.body, fn);
        break;
    case ST_WHILE:
        walk_expr(w, st->while_.cond);
        walk_stmt(w, st->while_.body, fn);
        break;
    case ST_RETURN:
        if (st->ret.value) {
            walk_expr(w, st->ret.value);
            if (!w->err[0] && st->ret.value->type != fn->ret)
                BAD(w, st, "return of %s from a func returning %s", st->ret.value->type->name,
                    fn->ret->name);
        }
        break;
    case ST_EXPR: walk_expr(w, st->expr.expr); break;
    case ST_BLOCK:
        for (int i = 0; i < st->block.nstmts; i++)
            walk_stmt(w, st->block.stmts[i], fn);
        break;
    default: break;
    }
}

/* Checks the contract on every node; returns the number of expressions seen. */
static int check_contract(const char *what, const fe_file *f) {
    walk w = {0};
    for (int i = 0; i < f->nitems; i++) {
        const fe_item *it = f->items[i];
        if (it->kind == IT_CONST) {
            walk_expr(&w, it->init);
            if (!w.err[0] && (!it->sym || !it->init->is_const || it->sym->type != it->init->type))
                snprintf(w.err, sizeof w.err, "const %s badly annotated", it->name);
        } else {
            for (int p = 0; p < it->nparams; p++)
                if (!it->params[p].sym || it->params[p].sym->type != it->params[p].type)
                    snprintf(w.err, sizeof w.err, "parameter %s without symbol",
                             it->params[p].name);
            walk_stmt(&w, it->body, it);
        }
        cr_assert(!w.err[0], "%s: %s", what, w.err);
    }
    return w.exprs;
}

static const char *contract_program =
    "const SCALE: f64 = 1.0 / 3.0;\n"
    "const N = 1 << 4;\n"
    "const MASK: u32 = ~0;\n"
    "func mix(a: f32, b: f64, n: i64) -> f64 { return a * b + n; }\n"
    "func clampi(x: i32) -> i32 { return clamp(x, 0, N); }\n"
    "func fill(a: f32[], v: f32) { for i in 0..len(a) { a[i] = v; } }\n"
    "kernel k(a: f32[], d: f64[,], u: u32[], c: i64[], b: bool[], s: f32, t: i32) {\n"
    "    let n = len(a);\n"
    "    let m = shape(d, 1);\n"
    "    fill(a, 0);\n"
    "    for i in 0..n, j in 0..m {\n"
    "        let x = a[i] * 2 + s / 3.0 - f32(t % 4);\n"
    "        var y = d[i, j];\n"
    "        y += x;\n"
    "        y *= SCALE;\n"
    "        y = mix(x, y, c[i]) + min(y, 1) + pow(x, 2) + fma(y, 2, 1);\n"
    "        d[i, j] = y > 0.5 ? y : -y;\n"
    "        u[i] = (u[i] << t) | (u[i] >> 2) ^ MASK & ~u[i] + 1;\n"
    "        c[i] += i + j * t;\n"
    "        b[i] = !b[i] || (x < 1 && t != 0) || b[i] == true || t == 1.5;\n"
    "        let z = select(b[i], 1, x) + f32(clampi(t)) + abs(t) + sign(-2.5);\n"
    "        let w = atomic_add(a[0], z) + atomic_max(u[0], 3);\n"
    "        a[i] = w + f32(round(y)) + f32(i) * 0.5;\n"
    "        if i == 0 && (t << 2) > 3 { continue; }\n"
    "    }\n"
    "    let k2 = n * 2;\n"
    "    for i in 0..k2 { a[i % n] = f32(k2) + sqrt(4); }\n"
    "}\n";

Test(sema, contract_holds_on_a_mixed_program) {
    checked r = check_ok(contract_program);
    cr_expect_gt(check_contract("contract program", r.file), 150);
    done(&r);
}

static int check_contract_dir(const char *dir) {
    char **names;
    int n = golden_list(dir, ".kern", &names);
    for (int i = 0; i < n; i++) {
        size_t len;
        char *src = golden_read(dir, names[i], &len);
        checked r = check_ok(src);
        check_contract(names[i], r.file);
        done(&r);
        free(src);
    }
    golden_free_list(names, n);
    return n;
}

Test(sema, contract_holds_on_every_good_program) {
    cr_expect_gt(check_contract_dir("ir"), 10);
    cr_expect_gt(check_contract_dir("sema_ok"), 3);
}

Test(sema, examples_check_cleanly) {
    static const char *examples[] = {"bounce", "elastic", "heat", "loss", "saxpy", "simulate", "springs"};
    for (size_t i = 0; i < sizeof examples / sizeof *examples; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/examples/%s.kern", KERN_SOURCE_ROOT, examples[i]);
        size_t len;
        char *src = kern_read_file(path, &len);
        if (!src)
            continue; /* examples come and go; the golden programs are the fixed set */
        checked r = check_ok(src);
        check_contract(path, r.file);
        done(&r);
        free(src);
    }
}

/* ---- the builtins of language.md section 11.5 ------------------------------------------ */

static double fold1(fe_builtin b, const kern_type *t, double x) {
    fe_value v = F(t, x), r;
    cr_assert_eq(fe_fold_builtin(b, &v, 1, &r), FOLD_OK, "%s", fe_builtin_name(b));
    return ty_is_float(r.type) ? r.f : (double)r.i;
}

Test(sema, fold_builtins_v1) {
    const kern_type *d = ty_f64(), *f = ty_f32();
    cr_expect_eq(fold1(BI_LOG10, d, 1000.0), log10(1000.0));
    cr_expect_eq(fold1(BI_LOG1P, d, 1e-20), 1e-20);
    cr_expect_eq(fold1(BI_EXPM1, d, -1e-20), -1e-20);
    volatile double m27 = -27.0; /* libm at run time, not the compiler's folding */
    cr_expect_eq(fold1(BI_CBRT, d, m27), cbrt(m27));
    cr_expect_eq(fold1(BI_TRUNC, d, -2.7), -2.0);
    cr_expect_eq(fold1(BI_RINT, d, 2.5), 2.0); /* half to even */
    cr_expect_eq(fold1(BI_RINT, d, 3.5), 4.0);
    cr_expect_eq(fold1(BI_FRAC, d, -1.25), 0.75);
    cr_expect_eq(fold1(BI_ERF, d, 0.5), erf(0.5));
    cr_expect_eq(fold1(BI_ERFC, f, 2.0), (double)(float)erfc(2.0)); /* rounded to f32 */
    cr_expect_eq(fold1(BI_STOP_GRADIENT, d, 1.5), 1.5);
    cr_expect_eq(fold1(BI_ISNAN, d, NAN), 1);
    cr_expect_eq(fold1(BI_ISINF, d, -INFINITY), 1);
    cr_expect_eq(fold1(BI_ISFINITE, d, INFINITY), 0);
    fe_value r, two[2] = {F(d, 3.0), F(d, -4.0)};
    cr_assert_eq(fe_fold_builtin(BI_HYPOT, two, 2, &r), FOLD_OK);
    cr_expect_eq(r.f, 5.0);
    cr_assert_eq(fe_fold_builtin(BI_COPYSIGN, two, 2, &r), FOLD_OK);
    cr_expect_eq(r.f, -3.0);
    cr_assert_eq(fe_fold_builtin(BI_STEP, two, 2, &r), FOLD_OK); /* step(3, -4) */
    cr_expect_eq(r.f, 0.0);
    fe_value three[3] = {F(d, 1.0), F(d, 3.0), F(d, 0.25)};
    cr_assert_eq(fe_fold_builtin(BI_LERP, three, 3, &r), FOLD_OK);
    cr_expect_eq(r.f, 1.5);
    fe_value ss[3] = {F(d, 0.0), F(d, 2.0), F(d, 1.0)};
    cr_assert_eq(fe_fold_builtin(BI_SMOOTHSTEP, ss, 3, &r), FOLD_OK);
    cr_expect_eq(r.f, 0.5);
    /* float %: fmod, the dividend's sign */
    cr_assert_eq(fe_fold_binary(BIN_REM, F(d, -7.5), F(d, 2.0), &r), FOLD_OK);
    cr_expect_eq(r.f, -1.5);
    cr_assert_eq(fe_fold_ideal_binary(BIN_REM, F(d, 7.5), F(d, -2.0), &r), FOLD_OK);
    cr_expect_eq(r.f, 1.5);
    cr_assert_eq(fe_fold_unary(UN_PLUS, F(f, -2.0), &r), FOLD_OK);
    cr_expect_eq(r.f, -2.0);
    /* in a program: the initializer of a const folds */
    checked c = check_ok("const A: f64 = erf(0.5) + 7.5 % 2.0 + +1.0;\n"
                         "const B: bool = isnan(0.0 / 0.0);\n");
    fe_item *a = item(&c, "A"), *b = item(&c, "B");
    cr_expect_eq(a->sym->cval.f, erf(0.5) + 1.5 + 1.0);
    cr_expect_eq(b->sym->cval.i, 1);
    done(&c);
}

Test(sema, builtins_v1_names_are_not_reserved) {
    /* a func named lerp and a const named step are what the names mean */
    checked c = check_ok("func lerp(a: f32, b: f32, t: f32) -> f32 { return a * t; }\n"
                         "const step: f32 = 4.0;\n"
                         "kernel k(x: f32[]) { for i in 0..len(x) { x[i] = lerp(x[i], 1.0, step); } }\n");
    done(&c);
    /* calling the const is an error, as for any const; the old builtins stay reserved */
    c = check("const step: f32 = 4.0;\nkernel k(x: f32[]) { for i in 0..len(x) { x[i] = step(0.0, x[i]); } }\n");
    cr_expect_not(c.ok);
    cr_expect(strstr(c.diags, "'step' is a const, not a function"), "%s", c.diags);
    done(&c);
    c = check("func sin(a: f32) -> f32 { return a; }\n");
    cr_expect(strstr(c.diags, "func 'sin' has the name of a builtin"), "%s", c.diags);
    done(&c);
}

Test(sema, builtins_v1_bad_arguments) {
    static const char *const bad[][2] = {
        {"isnan(i)", "argument of 'isnan'"},
        {"erf(true)", "argument of 'erf'"},
        {"x[i] % true", "operands of '%'"},
        {"hypot(x[i])", "'hypot' takes 2 arguments, got 1"},
        {"lerp(x[i], 1.0)", "'lerp' takes 3 arguments, got 2"},
        {"copysign(x[i], i)", "copysign"},
        {"+true", "operand of '+' must be a number"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char src[256];
        snprintf(src, sizeof src,
                 "kernel k(x: f32[], b: bool[]) { for i in 0..len(x) { let v = %s; } }\n",
                 bad[i][0]);
        checked c = check(src);
        cr_expect_not(c.ok, "%s", bad[i][0]);
        cr_expect(strstr(c.diags, bad[i][1]), "%s: %s", bad[i][0], c.diags);
        done(&c);
    }
}

/* Structs are bounded (docs/language.md section 11): at most 65536 scalars and 64 levels of
 * structs in structs. A struct doubling 40 times overflowed its leaf count and aborted
 * ("leaf of an empty struct"), and a chain of 280,000 structs, each holding the one
 * defined after it, overflowed the stack (issue 23's "no abort from user input"). */
Test(sema, struct_limits) {
    kern_buf src = {0};
    buf_puts(&src, "struct S0 { x: f32 }\n");
    for (int i = 1; i < 40; i++)
        buf_printf(&src, "struct S%d { a: S%d, b: S%d }\n", i, i - 1, i - 1);
    buf_puts(&src, "kernel k(p: S39[]) { }\n");
    checked c = check(src.data);
    cr_expect(!c.ok && strstr(c.diags, "18:22: error: struct 'S17' holds more than 65536 scalars "
                                       "(from field 'b' on), the limit of a struct\n"),
              "%s", c.diags);
    cr_expect_eq(c.ctx->diags.errors, 1, "%s", c.diags);
    done(&c);
    for (int reverse = 0; reverse < 2; reverse++) {
        int n = reverse ? 280000 : 100;
        src.len = 0;
        for (int j = 1; j < n; j++) {
            int i = reverse ? n - j : j;
            buf_printf(&src, "struct S%d { a: S%d }\n", i, i - 1);
        }
        buf_puts(&src, "struct S0 { x: f32 }\nkernel k(x: f32[]) { }\n");
        c = check(src.data);
        cr_expect(!c.ok && strstr(c.diags, "error: struct 'S64' nests structs 65 deep (field 'a' "
                                           "of type S63), more than the limit of 64\n"),
                  "%.300s", c.diags);
        cr_expect_eq(c.ctx->diags.errors, 1, "%.300s", c.diags);
        done(&c);
    }
    /* at the limits: 64 deep, 65536 scalars */
    src.len = 0;
    buf_puts(&src, "struct S0 { x: f32 }\n");
    for (int i = 1; i < 64; i++)
        buf_printf(&src, "struct S%d { a: S%d }\n", i, i - 1);
    for (int i = 1; i <= 16; i++)
        buf_printf(&src, "struct W%d { a: %s%d, b: %s%d }\n", i, i > 1 ? "W" : "S",
                   i > 1 ? i - 1 : 0, i > 1 ? "W" : "S", i > 1 ? i - 1 : 0);
    buf_puts(&src, "kernel k(p: S63[], w: W16[]) { }\n");
    c = check_ok(src.data);
    done(&c);
    buf_free(&src);
}

/* Consts that name consts defined after them are resolved inside each other: the nesting
 * of consts and their expressions is bounded like a kernel's (KC_MAX_NESTING); a chain of
 * 20,000 consts, each naming the next, overflowed the stack (SIGSEGV). One error. */
Test(sema, const_nesting_limit) {
    kern_buf src = {0};
    for (int n = 1000; n <= 20000; n += 19000) {
        src.len = 0;
        for (int i = 0; i + 1 < n; i++)
            buf_printf(&src, "const C%d = C%d;\n", i, i + 1);
        buf_printf(&src, "const C%d = 7;\nkernel k(x: i32[]) { x[0] = C0; }\n", n - 1);
        checked c = check(src.data);
        if (n == 1000) {
            cr_expect(c.ok, "%s", c.diags);
        } else {
            cr_expect(!c.ok && strstr(c.diags, "error: const 'C1501' is defined through consts "
                                               "and expressions nested more than 1500 deep (C0 "
                                               "-> ... -> C1500 -> C1501)"),
                      "%.400s", c.diags);
            cr_expect_eq(c.ctx->diags.errors, 1, "%.400s", c.diags);
        }
        done(&c);
    }
    buf_free(&src);
}

/* A cycle of many funcs is named in one line: its first six, the count of the others, the
 * last (a cycle of 150,000 funcs printed 1.5 MB). */
Test(sema, long_cycles_are_clipped) {
    kern_buf src = {0};
    for (int i = 0; i < 20; i++)
        buf_printf(&src, "func g%d(x: f32) -> f32 { return g%d(x); }\n", i, (i + 1) % 20);
    buf_puts(&src, "kernel k(x: f32[]) { x[0] = g0(x[0]); }\n");
    checked c = check(src.data);
    cr_expect(strstr(c.diags, "recursive call: g0 -> g1 -> g2 -> g3 -> g4 -> g5 -> ... (13 more) "
                              "-> g19 -> g0; funcs are inlined"),
              "%s", c.diags);
    done(&c);
    buf_free(&src);
}
