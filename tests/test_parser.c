/* test_parser.c - the parser (fe_parse) and the AST printer (fe_print_ast).
 *
 * Trees are checked through their printed form (docs/ast.md). Precedence tests strip the
 * LINE:COL locations and compare with the tree the reference's precedence table implies;
 * statement and item tests keep the locations, counted by hand from the source text.
 * Error tests compare every diagnostic as "LINE:COL: message". */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/context.h"
#include "../compiler/ast.h"

typedef struct parsed {
    kc_ctx *ctx;
    fe_file *file;
    char *ast;    /* fe_print_ast of the whole file */
    char *errors; /* "L:C: message\n" per diagnostic */
} parsed;

static parsed parse_n(const char *text, size_t len) {
    parsed r;
    r.ctx = kc_ctx_new();
    const kern_source *src = kc_add_source(r.ctx, "t.kern", text, len);
    r.file = fe_parse(r.ctx, src);
    cr_assert_not_null(r.file, "fe_parse returned NULL");
    kern_buf b = {0}, e = {0};
    fe_print_ast(&b, r.file, NULL);
    for (int i = 0; i < r.ctx->diags.len; i++) {
        const diag *d = &r.ctx->diags.items[i];
        buf_printf(&e, "%u:%u: %s\n", d->loc.line, d->loc.col, d->message);
    }
    r.ast = b.data ? buf_take(&b) : strdup("");
    r.errors = e.data ? buf_take(&e) : strdup("");
    return r;
}

static parsed parse(const char *text) { return parse_n(text, strlen(text)); }

static void parsed_free(parsed *r) {
    kc_ctx_free(r->ctx);
    free(r->ast);
    free(r->errors);
}

/* Removes every " LINE:COL" from printed AST text. */
static char *strip_locs(const char *s) {
    char *out = malloc(strlen(s) + 1), *o = out;
    while (*s) {
        if (*s == ' ' && s[1] >= '0' && s[1] <= '9') {
            const char *q = s + 1;
            while (*q >= '0' && *q <= '9')
                q++;
            if (*q == ':' && q[1] >= '0' && q[1] <= '9') {
                q++;
                while (*q >= '0' && *q <= '9')
                    q++;
                s = q;
                continue;
            }
        }
        *o++ = *s++;
    }
    *o = 0;
    return out;
}

/* The tree of one expression, without locations: parses `const X = EXPR;`. */
static void expect_expr(const char *expr, const char *want) {
    char src[512];
    snprintf(src, sizeof src, "const X = %s;", expr);
    parsed r = parse(src);
    cr_expect_str_eq(r.errors, "", "errors in \"%s\"", expr);
    char *flat = strip_locs(r.ast);
    char full[1024];
    snprintf(full, sizeof full, "(const X %s)\n", want);
    cr_expect_str_eq(flat, full, "tree of \"%s\"", expr);
    free(flat);
    parsed_free(&r);
}

/* The printed tree of `kernel k() { BODY }`: BODY starts at column 14, the block at 12. */
static void expect_body(const char *body, const char *want_stmts) {
    char src[1024], full[4096];
    snprintf(src, sizeof src, "kernel k() { %s }", body);
    snprintf(full, sizeof full, "(kernel k 1:1\n  (block 1:12\n%s))\n", want_stmts);
    parsed r = parse(src);
    cr_expect_str_eq(r.errors, "", "errors in \"%s\"", body);
    cr_expect_str_eq(r.ast, full, "tree of \"%s\"", body);
    parsed_free(&r);
}

static void expect_tree(const char *src, const char *want) {
    parsed r = parse(src);
    cr_expect_str_eq(r.errors, "", "errors in \"%s\"", src);
    cr_expect_str_eq(r.ast, want, "tree of \"%s\"", src);
    parsed_free(&r);
}

static void expect_errors(const char *src, const char *want) {
    parsed r = parse(src);
    cr_expect_str_eq(r.errors, want, "errors of \"%s\"", src);
    parsed_free(&r);
}

/* ---- Precedence and associativity (docs/reference.md section 6) ------------------- */

Test(parser, arithmetic_precedence) {
    expect_expr("1 + 2 * 3", "(binary + (int 1) (binary * (int 2) (int 3)))");
    expect_expr("1 * 2 + 3", "(binary + (binary * (int 1) (int 2)) (int 3))");
    expect_expr("1 - 2 - 3", "(binary - (binary - (int 1) (int 2)) (int 3))");
    expect_expr("a * b / c % d",
                "(binary % (binary / (binary * (name a) (name b)) (name c)) (name d))");
    expect_expr("(1 + 2) * 3", "(binary * (binary + (int 1) (int 2)) (int 3))");
    expect_expr("a / (b / c)", "(binary / (name a) (binary / (name b) (name c)))");
}

Test(parser, shift_comparison_equality) {
    expect_expr("a << 1 + 2", "(binary << (name a) (binary + (int 1) (int 2)))");
    expect_expr("a >> 1 << 2", "(binary << (binary >> (name a) (int 1)) (int 2))");
    expect_expr("a < b << c", "(binary < (name a) (binary << (name b) (name c)))");
    expect_expr("a <= b >= c", "(binary >= (binary <= (name a) (name b)) (name c))");
    expect_expr("a == b < c", "(binary == (name a) (binary < (name b) (name c)))");
    expect_expr("a != b == c", "(binary == (binary != (name a) (name b)) (name c))");
    expect_expr("a > b != c >= d",
                "(binary != (binary > (name a) (name b)) (binary >= (name c) (name d)))");
}

Test(parser, bitwise_is_one_level_below_equality) {
    expect_expr("a | b ^ c & d",
                "(binary & (binary ^ (binary | (name a) (name b)) (name c)) (name d))");
    expect_expr("a & b | c", "(binary | (binary & (name a) (name b)) (name c))");
    expect_expr("a & b == c", "(binary & (name a) (binary == (name b) (name c)))");
    expect_expr("a == b | c", "(binary | (binary == (name a) (name b)) (name c))");
}

Test(parser, logical_operators) {
    expect_expr("a && b | c", "(binary && (name a) (binary | (name b) (name c)))");
    expect_expr("a || b && c", "(binary || (name a) (binary && (name b) (name c)))");
    expect_expr("a && b || c", "(binary || (binary && (name a) (name b)) (name c))");
    expect_expr("a || b || c", "(binary || (binary || (name a) (name b)) (name c))");
    expect_expr("x >= 0 && x <= n",
                "(binary && (binary >= (name x) (int 0)) (binary <= (name x) (name n)))");
}

Test(parser, conditional_is_lowest_and_right_associative) {
    expect_expr("a || b ? c : d", "(cond (binary || (name a) (name b)) (name c) (name d))");
    expect_expr("a ? b : c ? d : e", "(cond (name a) (name b) (cond (name c) (name d) (name e)))");
    expect_expr("a ? b ? c : d : e", "(cond (name a) (cond (name b) (name c) (name d)) (name e))");
    expect_expr("a ? b + 1 : c * 2",
                "(cond (name a) (binary + (name b) (int 1)) (binary * (name c) (int 2)))");
    expect_expr("(a ? b : c) + 1", "(binary + (cond (name a) (name b) (name c)) (int 1))");
}

Test(parser, unary_binds_tighter_than_binary) {
    expect_expr("-a * b", "(binary * (unary - (name a)) (name b))");
    expect_expr("!a && b", "(binary && (unary ! (name a)) (name b))");
    expect_expr("~a & b", "(binary & (unary ~ (name a)) (name b))");
    expect_expr("- -a", "(unary - (unary - (name a)))");
    expect_expr("-!~a", "(unary - (unary ! (unary ~ (name a))))");
    expect_expr("a - -b", "(binary - (name a) (unary - (name b)))");
    expect_expr("-a[i]", "(unary - (index a (name i)))");
    expect_expr("-f(x)", "(unary - (call f (name x)))");
    expect_expr("-1", "(unary - (int 1))");
}

Test(parser, calls_indexing_casts) {
    expect_expr("f()", "(call f)");
    expect_expr("f(a, b + 1)", "(call f (name a) (binary + (name b) (int 1)))");
    expect_expr("f(x,)", "(call f (name x))");
    expect_expr("select(c, a, b)", "(call select (name c) (name a) (name b))");
    expect_expr("a[i + 1, j]", "(index a (binary + (name i) (int 1)) (name j))");
    expect_expr("a[b[i]]", "(index a (index b (name i)))");
    expect_expr("f32(i) * 2.0", "(binary * (cast f32 (name i)) (float 2.0))");
    expect_expr("i64(-x)", "(cast i64 (unary - (name x)))");
    expect_expr("bool(f(x))", "(cast bool (call f (name x)))");
    expect_expr(
        "u32(a) + f64(b) + i32(c)",
        "(binary + (binary + (cast u32 (name a)) (cast f64 (name b))) (cast i32 (name c)))");
    expect_expr("atomic_add(a[i, j], 1.0)",
                "(call atomic_add (index a (name i) (name j)) (float 1.0))");
}

Test(parser, literals) {
    expect_expr("0x2A + .5", "(binary + (int 42) (float 0.5))");
    expect_expr("1e-3", "(float 0.001)");
    expect_expr("2.5e+4", "(float 25000.0)");
    expect_expr("1.", "(float 1.0)");
    expect_expr("0.1", "(float 0.1)");
    expect_expr("1e30", "(float 1e+30)");
    expect_expr("3.14159", "(float 3.14159)");
    expect_expr("true && !false", "(binary && (bool true) (unary ! (bool false)))");
    expect_expr("9223372036854775807", "(int 9223372036854775807)");
}

Test(parser, operator_locations) {
    /* Binary and ?: nodes carry the operator's location, the others their first token's. */
    expect_tree("const X = a + b;", "(const X 1:1 (binary + 1:13 (name a 1:11) (name b 1:15)))\n");
    expect_tree("const X = a ? b : c;",
                "(const X 1:1 (cond 1:13 (name a 1:11) (name b 1:15) (name c 1:19)))\n");
    expect_tree("const X = -f(a[1]);",
                "(const X 1:1 (unary - 1:11 (call f 1:12 (index a 1:14 (int 1 1:16)))))\n");
    expect_tree("const X = f32(2);", "(const X 1:1 (cast f32 1:11 (int 2 1:15)))\n");
    expect_tree("const X = (((y)));", "(const X 1:1 (name y 1:14))\n");
}

/* ---- Statements (docs/reference.md section 5) ------------------------------------- */

Test(parser, let_and_var) {
    expect_body("let x = 1;", "    (let x 1:14 (int 1 1:22))");
    expect_body("var y: f64 = 2.5;", "    (var y f64 1:14 (float 2.5 1:27))");
    expect_body("let b: bool = true;", "    (let b bool 1:14 (bool true 1:28))");
}

Test(parser, assignments) {
    expect_body("x = y;", "    (assign = 1:14 (name x 1:14) (name y 1:18))");
    expect_body("a[i, j] += 1.0;",
                "    (assign += 1:14 (index a 1:14 (name i 1:16) (name j 1:19)) (float 1.0 1:25))");
    expect_body("x -= 1;", "    (assign -= 1:14 (name x 1:14) (int 1 1:19))");
    expect_body("x *= 1;", "    (assign *= 1:14 (name x 1:14) (int 1 1:19))");
    expect_body("x /= 1;", "    (assign /= 1:14 (name x 1:14) (int 1 1:19))");
    expect_body("x = a == b;",
                "    (assign = 1:14 (name x 1:14) (binary == 1:20 (name a 1:18) (name b 1:23)))");
}

Test(parser, if_else) {
    expect_body("if c { }", "    (if 1:14 (name c 1:17)\n      (block 1:19))");
    expect_body("if c { } else { }",
                "    (if 1:14 (name c 1:17)\n      (block 1:19)\n      (block 1:28))");
    expect_body("if a { } else if b { } else { }", "    (if 1:14 (name a 1:17)\n"
                                                   "      (block 1:19)\n"
                                                   "      (if 1:28 (name b 1:31)\n"
                                                   "        (block 1:33)\n"
                                                   "        (block 1:42)))");
    expect_body("if (a) { x = 1; }", "    (if 1:14 (name a 1:18)\n"
                                     "      (block 1:21\n"
                                     "        (assign = 1:23 (name x 1:23) (int 1 1:27))))");
}

Test(parser, for_loops) {
    expect_body("for i in 0..n { }",
                "    (for 1:14 (range i 1:18 (int 0 1:23) (name n 1:26))\n      (block 1:28))");
    expect_body(
        "for i in 0..n, j in a..b { }",
        "    (for 1:14 (range i 1:18 (int 0 1:23) (name n 1:26)) (range j 1:29 (name a 1:34) "
        "(name b 1:37))\n      (block 1:39))");
    expect_body("for i in 1..2 { }",
                "    (for 1:14 (range i 1:18 (int 1 1:23) (int 2 1:26))\n      (block 1:28))");
    expect_body("for t in n-1..len(a) { }",
                "    (for 1:14 (range t 1:18 (binary - 1:24 (name n 1:23) (int 1 1:25)) "
                "(call len 1:28 (name a 1:32)))\n      (block 1:35))");
}

Test(parser, while_break_continue) {
    expect_body("while x < 10 { break; continue; }",
                "    (while 1:14 (binary < 1:22 (name x 1:20) (int 10 1:24))\n"
                "      (block 1:27\n"
                "        (break 1:29)\n"
                "        (continue 1:36)))");
}

Test(parser, return_expr_and_blocks) {
    expect_body("return;", "    (return 1:14)");
    expect_body("return x + 1;", "    (return 1:14 (binary + 1:23 (name x 1:21) (int 1 1:25)))");
    expect_body(
        "atomic_max(a[i], v);",
        "    (expr 1:14 (call atomic_max 1:14 (index a 1:25 (name i 1:27)) (name v 1:31)))");
    expect_body("x + 1;", "    (expr 1:14 (binary + 1:16 (name x 1:14) (int 1 1:18)))");
    expect_body("{ { } }", "    (block 1:14\n      (block 1:16))");
}

Test(parser, several_statements_and_lines) {
    expect_tree("kernel k() {\n    let x = 1;\n\n    x += 2;\n}\n",
                "(kernel k 1:1\n"
                "  (block 1:12\n"
                "    (let x 2:5 (int 1 2:13))\n"
                "    (assign += 4:5 (name x 4:5) (int 2 4:10))))\n");
}

/* ---- Items (docs/reference.md section 4) ------------------------------------------ */

Test(parser, consts) {
    expect_tree("const N = 4;", "(const N 1:1 (int 4 1:11))\n");
    expect_tree("const D: f32 = 1.0 / 60.0;",
                "(const D f32 1:1 (binary / 1:20 (float 1.0 1:16) (float 60.0 1:22)))\n");
}

Test(parser, funcs) {
    expect_tree("func f(x: f32, nograd w: f64[,], ) -> f32 { return x; }",
                "(func f -> f32 1:1\n"
                "  (param x f32 1:8)\n"
                "  (param nograd w f64[,] 1:23)\n"
                "  (block 1:43\n"
                "    (return 1:45 (name x 1:52))))\n");
    expect_tree("func g() { }", "(func g 1:1\n  (block 1:10))\n");
}

Test(parser, kernels_and_array_ranks) {
    expect_tree("kernel k(a: i32[,,,], b: bool, c: u32[], d: i64[,,]) { }",
                "(kernel k 1:1\n"
                "  (param a i32[,,,] 1:10)\n"
                "  (param b bool 1:23)\n"
                "  (param c u32[] 1:32)\n"
                "  (param d i64[,,] 1:42)\n"
                "  (block 1:54))\n");
}

Test(parser, item_fields) {
    parsed r = parse("func f(nograd x: f32[]) -> f64 { }\nkernel k() { }\nconst C: i64 = 1;");
    cr_assert_str_eq(r.errors, "");
    cr_assert_eq(r.file->nitems, 3);
    fe_item *f = r.file->items[0], *k = r.file->items[1], *c = r.file->items[2];
    cr_expect_eq(f->kind, IT_FUNC);
    cr_expect_str_eq(f->name, "f");
    cr_expect_eq(f->name_loc.col, 6);
    cr_expect_eq(f->nparams, 1);
    cr_expect(f->params[0].nograd);
    cr_expect_eq(f->params[0].type, ty_array(ty_f32(), 1));
    cr_expect_eq(f->ret, ty_f64());
    cr_expect_eq(f->body->kind, ST_BLOCK);
    cr_expect_eq(k->kind, IT_KERNEL);
    cr_expect_eq(k->ret, ty_void());
    cr_expect_eq(k->nparams, 0);
    cr_expect_eq(k->loc.line, 2);
    cr_expect_eq(c->kind, IT_CONST);
    cr_expect_eq(c->declared, ty_i64());
    cr_expect_eq(c->init->kind, EX_INT);
    cr_expect_eq(c->init->ival, 1);
    cr_expect_null(c->init->type, "the parser leaves types to sema");
    parsed_free(&r);
}

Test(parser, statement_fields) {
    parsed r =
        parse("kernel k() { a[i] -= 1; for i in 0..n, j in 0..m { } if c { } else if d { } }");
    cr_assert_str_eq(r.errors, "");
    fe_stmt *body = r.file->items[0]->body;
    cr_assert_eq(body->block.nstmts, 3);
    fe_stmt *as = body->block.stmts[0], *fo = body->block.stmts[1], *ifs = body->block.stmts[2];
    cr_expect_eq(as->kind, ST_ASSIGN);
    cr_expect_eq(as->assign.op, AS_SUB);
    cr_expect_eq(as->assign.op_loc.col, 19);
    cr_expect_eq(as->assign.target->kind, EX_INDEX);
    cr_expect_eq(as->assign.target->index.nidx, 1);
    cr_expect_eq(fo->for_.nranges, 2);
    cr_expect_str_eq(fo->for_.ranges[1].var, "j");
    cr_expect_eq(ifs->if_.els->kind, ST_IF);
    cr_expect_null(ifs->if_.els->if_.els);
    parsed_free(&r);
}

Test(parser, empty_file_and_comments_only) {
    parsed r = parse("// nothing here\n/* at all */\n");
    cr_expect_str_eq(r.errors, "");
    cr_expect_eq(r.file->nitems, 0);
    cr_expect_str_eq(r.ast, "");
    parsed_free(&r);
}

/* ---- Printer ---------------------------------------------------------------------- */

Test(parser, print_only_one_item) {
    parsed r = parse("const A = 1;\nfunc f() { }\nkernel k() { }\n");
    kern_buf b = {0};
    fe_print_ast(&b, r.file, "f");
    cr_expect_str_eq(b.data, "(func f 2:1\n  (block 2:10))\n");
    buf_free(&b);
    fe_print_ast(&b, r.file, "nope");
    cr_expect(b.data == NULL || b.data[0] == 0);
    buf_free(&b);
    parsed_free(&r);
}

Test(parser, print_sema_types) {
    parsed r = parse("kernel k(a: f32[]) { a[0] = f32(1) + 2.0; }");
    cr_assert_str_eq(r.errors, "");
    fe_stmt *s = r.file->items[0]->body->block.stmts[0];
    fe_expr *t = s->assign.target, *v = s->assign.value;
    t->type = ty_f32();
    t->index.idx[0]->type = ty_i32();
    v->type = ty_f32();
    v->binary.lhs->type = ty_f32();
    v->binary.lhs->cast.arg->type = ty_i32();
    v->binary.rhs->type = ty_f32();
    kern_buf b = {0};
    fe_print_ast(&b, r.file, NULL);
    cr_expect_str_eq(
        b.data, "(kernel k 1:1\n"
                "  (param a f32[] 1:10)\n"
                "  (block 1:20\n"
                "    (assign = 1:22 (index a 1:22 : f32 (int 0 1:24 : i32)) (binary + 1:36 : f32 "
                "(cast f32 1:29 : f32 (int 1 1:33 : i32)) (float 2.0 1:38 : f32)))))\n");
    buf_free(&b);
    parsed_free(&r);
}

Test(parser, name_tables) {
    cr_expect_str_eq(fe_binop_text(BIN_SHL), "<<");
    cr_expect_str_eq(fe_binop_text(BIN_OR), "||");
    cr_expect_str_eq(fe_binop_text(BIN_BITXOR), "^");
    cr_expect_str_eq(fe_unop_text(UN_BITNOT), "~");
    cr_expect_str_eq(fe_assign_text(AS_DIV), "/=");
    cr_expect_str_eq(fe_builtin_name(BI_ATOMIC_MAX), "atomic_max");
    cr_expect_str_eq(fe_builtin_name(BI_RSQRT), "rsqrt");
    cr_expect_eq(fe_builtin_lookup("clamp"), BI_CLAMP);
    cr_expect_eq(fe_builtin_lookup("len"), BI_LEN);
    cr_expect_eq(fe_builtin_lookup("exp2"), BI_EXP2);
    cr_expect_eq(fe_builtin_lookup("select"), BI_SELECT);
    cr_expect_eq(fe_builtin_lookup("atomic_sub"), BI_ATOMIC_SUB);
    cr_expect_eq(fe_builtin_lookup("step"), BI_STEP); /* not reserved: a func may take it */
    cr_expect(!fe_builtin_reserved(BI_STEP) && fe_builtin_reserved(BI_SIN));
    cr_expect_eq(fe_builtin_lookup("smooth_step"), BI_NONE);
    cr_expect_eq(fe_builtin_lookup(""), BI_NONE);
    cr_expect_eq(fe_builtin_lookup("Sin"), BI_NONE);
    /* Every builtin's name looks up to itself. */
    for (int b = BI_NONE + 1; b < BI__COUNT; b++)
        cr_expect_eq(fe_builtin_lookup(fe_builtin_name((fe_builtin)b)), (fe_builtin)b, "builtin %d",
                     b);
}

/* ---- Syntax errors ---------------------------------------------------------------- */

Test(parser, error_missing_semicolon) {
    expect_errors("kernel k() { let x = 1 let y = 2; }",
                  "1:24: expected ';' after statement, found 'let'\n");
    expect_errors("kernel k() { x = 1 }", "1:20: expected ';' after statement, found '}'\n");
    expect_errors("kernel k() { break }", "1:20: expected ';' after statement, found '}'\n");
    expect_errors("kernel k() { return 1 2; }", "1:23: expected ';' after statement, found '2'\n");
    expect_errors("const X = 3", "1:12: expected ';' after the value of 'X', found end of file\n");
}

Test(parser, error_missing_expression) {
    expect_errors("kernel k() { let x = (1 + ; }", "1:27: expected expression, found ';'\n");
    expect_errors("kernel k() { x <<= 1; }", "1:18: expected expression, found '='\n");
    expect_errors("kernel k() { x = a[]; }", "1:20: expected expression, found ']'\n");
}

Test(parser, error_bad_assignment_target) {
    const char *msg =
        "cannot assign to this expression (only a variable, an array element, a component or a "
        "field can be assigned)";
    char want[256];
    snprintf(want, sizeof want, "1:14: %s\n", msg);
    expect_errors("kernel k() { a + b = 1; }", want);
    expect_errors("kernel k() { f(x) = 1; }", want);
    expect_errors("kernel k() { 1 += 1; }", want);
    expect_errors("kernel k() { (x) = 1; }", "");
}

Test(parser, error_closers) {
    expect_errors("kernel k() { x = 1; ",
                  "1:21: expected '}' to close the block opened at 1:12, found end of file\n");
    expect_errors("kernel k() { x = (1 + 2; }", "1:24: expected ')' to close '(', found ';'\n");
    expect_errors("kernel k() { x = f(a b); }",
                  "1:22: expected ',' or ')' in the call to 'f', found 'b'\n");
    expect_errors("kernel k() { x = a[i; }",
                  "1:21: expected ',' or ']' in the index of 'a', found ';'\n");
    expect_errors("kernel k() { x = a ? b; }",
                  "1:23: expected ':' after the first branch of '?', found ';'\n");
    expect_errors("kernel a() {\nkernel b() { }",
                  "2:1: expected '}' to close the block opened at 1:12, found 'kernel'\n");
}

Test(parser, error_types) {
    expect_errors("kernel k(a: f32[,,,,]) { }",
                  "1:16: array rank 5 is too large (the largest is 4)\n");
    expect_errors("kernel k(x: 3) { }",
                  "1:13: expected a type (f32, f64, i32, u32, i64, bool, a vector or matrix type "
                  "or a struct), found '3'\n");
    expect_errors("kernel k(a: f32[3) { }",
                  "1:18: expected ']' to close the extents of the local array type, found ')'\n");
    expect_errors("kernel k() { let x: f32[] = 1; }",
                  "1:24: array type 'f32[]' is not allowed here; only parameters can be arrays\n");
    expect_errors("func f() -> f32[] { }",
                  "1:16: array type 'f32[]' is not allowed here; only parameters can be arrays\n");
}

Test(parser, error_items) {
    expect_errors("let x = 1;", "1:1: expected 'const', 'struct', 'func' or 'kernel', found 'let'\n");
    expect_errors("kernel k() { x = 1; } }",
                  "1:23: expected 'const', 'struct', 'func' or 'kernel', found '}'\n");
    expect_errors(
        "kernel k() -> f32 { }",
        "1:12: a kernel cannot return a value (it writes its results to array parameters)\n");
    expect_errors("func f(x f32) -> f32 { return x; }",
                  "1:10: expected ':' after parameter name 'x', found 'f32'\n");
    expect_errors("kernel k( { }", "1:11: expected a parameter name, found '{'\n");
    expect_errors("kernel k(a: f32 { }", "1:17: expected ',' or ')' after parameter, found '{'\n");
    expect_errors("kernel { }", "1:8: expected a name after 'kernel', found '{'\n");
    expect_errors("func f() f32 { }",
                  "1:10: expected '{' or '->' after the parameters of 'f', found 'f32'\n");
    expect_errors("func f() -> f32 return",
                  "1:17: expected '{' after the return type of 'f', found 'return'\n");
    expect_errors("kernel k() ;", "1:12: expected '{' after the parameters of 'k', found ';'\n");
    expect_errors("const = 3;", "1:7: expected a name after 'const', found '='\n");
    expect_errors("const X 3;", "1:9: expected '=' in the declaration of 'X', found '3'\n");
}

Test(parser, error_statements) {
    expect_errors("kernel k() { let = 1; }", "1:18: expected a name after 'let', found '='\n");
    expect_errors("kernel k() { let x 1; }",
                  "1:20: expected '=' in the declaration of 'x', found '1'\n");
    expect_errors("kernel k() { for i 0..n { } }",
                  "1:20: expected 'in' after the loop variable 'i', found '0'\n");
    expect_errors("kernel k() { for i in 0 n { } }",
                  "1:25: expected '..' in the range of 'i', found 'n'\n");
    expect_errors("kernel k() { for (i = 0; i < n; i++) { } }",
                  "1:18: expected a loop variable name, found '('\n");
    expect_errors("kernel k() { while x y = 1; }",
                  "1:22: expected '{' after the 'while' condition, found 'y'\n");
    expect_errors("kernel k() { if (x) y = 1; }",
                  "1:21: expected '{' after the 'if' condition, found 'y'\n");
    expect_errors("kernel k() { if x { } else y = 1; }",
                  "1:28: expected '{' or 'if' after 'else', found 'y'\n");
    expect_errors("kernel k() { else { } }", "1:14: 'else' without a matching 'if'\n");
    expect_errors("kernel k() { ) }", "1:14: expected a statement, found ')'\n");
    expect_errors("kernel k() { ; }", "1:14: expected a statement, found ';'\n");
}

Test(parser, error_postfix_and_casts) {
    expect_errors("kernel k() { let x = v.(y); }",
                  "1:24: expected a component or field name after '.', found '('\n");
    expect_errors("kernel k() { x = f(x)(y); }",
                  "1:22: only a func or builtin name can be called, found '('\n");
    expect_errors("kernel k() { x = f32(1, 2); }",
                  "1:18: a cast to 'f32' takes exactly one argument, found 2\n");
    expect_errors("kernel k() { x = i32(); }",
                  "1:18: a cast to 'i32' takes exactly one argument, found 0\n");
    expect_errors(
        "kernel k() { x = f32; }",
        "1:21: expected '(' after type name 'f32' (a cast is written f32(x)), found ';'\n");
}

Test(parser, lexer_errors_are_not_repeated) {
    expect_errors("kernel k() { x = $; y = 1; }", "1:18: unexpected character '$'\n");
    expect_errors("kernel k() { x = $ 1; }", "1:18: unexpected character '$'\n");
    expect_errors("kernel k() { $ x = 1; }", "1:14: unexpected character '$'\n");
    expect_errors("kernel k() { x = 1 $; y = 2; }", "1:20: unexpected character '$'\n");
    expect_errors("kernel k() { x = f($); }", "1:20: unexpected character '$'\n");
    expect_errors("kernel k() { x = 0x; y = 1; }",
                  "1:18: malformed number '0x': expected hex digits after '0x'\n");
    expect_errors("kernel k() { x = 1; /* open",
                  "1:21: unterminated comment: '/*' has no matching '*/'\n");
    expect_errors("kernel k() { x = 1 /* open",
                  "1:20: unterminated comment: '/*' has no matching '*/'\n");
    expect_errors("$ kernel k() { }", "1:1: unexpected character '$'\n");
}

Test(parser, recovery_reports_each_error_once) {
    expect_errors("kernel a() {\n"
                  "    let x = ;\n"
                  "    y = 1 +;\n"
                  "    if { }\n"
                  "}\n"
                  "kernel b(x f32) { }\n"
                  "func c() -> { }\n",
                  "2:13: expected expression, found ';'\n"
                  "3:12: expected expression, found ';'\n"
                  "4:8: expected expression, found '{'\n"
                  "6:12: expected ':' after parameter name 'x', found 'f32'\n"
                  "7:13: expected a type (f32, f64, i32, u32, i64, bool, a vector or matrix type or a "
                  "struct), found '{'\n");
}

Test(parser, recovery_keeps_later_items) {
    parsed r = parse("kernel a() { let = ; }\nconst B = 2;\nfunc c() { }\n");
    cr_expect_str_eq(r.errors, "1:18: expected a name after 'let', found '='\n");
    cr_assert_eq(r.file->nitems, 3);
    cr_expect_str_eq(r.file->items[1]->name, "B");
    cr_expect_str_eq(r.file->items[2]->name, "c");
    parsed_free(&r);
}

/* ---- Limits and hostile input ----------------------------------------------------- */

static char *repeat(const char *prefix, const char *unit, int n, const char *suffix) {
    size_t lu = strlen(unit);
    kern_buf b = {0};
    buf_puts(&b, prefix);
    for (int i = 0; i < n; i++)
        buf_putn(&b, unit, lu);
    buf_puts(&b, suffix);
    return buf_take(&b);
}

Test(parser, deep_parentheses) {
    char *src = repeat("const X = ", "(", 100000, "1;");
    parsed r = parse(src);
    cr_expect_str_eq(r.errors, "1:211: expression nested too deeply (more than 200 levels)\n");
    parsed_free(&r);
    free(src);
    /* 150 levels are fine. */
    kern_buf b = {0};
    buf_puts(&b, "const X = ");
    for (int i = 0; i < 150; i++)
        buf_putc(&b, '(');
    buf_putc(&b, '1');
    for (int i = 0; i < 150; i++)
        buf_putc(&b, ')');
    buf_putc(&b, ';');
    r = parse(b.data);
    cr_expect_str_eq(r.errors, "");
    cr_expect_str_eq(r.ast, "(const X 1:1 (int 1 1:161))\n");
    parsed_free(&r);
    buf_free(&b);
}

Test(parser, deep_unary_and_calls) {
    char *src = repeat("const X = ", "-", 50000, "1;");
    parsed r = parse(src);
    cr_expect_str_eq(r.errors, "1:211: expression nested too deeply (more than 200 levels)\n");
    parsed_free(&r);
    free(src);
    src = repeat("const X = ", "f(", 50000, "");
    r = parse(src);
    cr_expect_str_eq(r.errors, "1:411: expression nested too deeply (more than 200 levels)\n");
    parsed_free(&r);
    free(src);
}

Test(parser, deep_blocks) {
    char *src = repeat("kernel k() ", "{", 100000, "");
    parsed r = parse(src);
    /* The kernel body is level 1; the 201st nested '{' is at column 12 + 200. */
    cr_expect_str_eq(r.errors, "1:212: blocks nested too deeply (more than 200 levels)\n");
    parsed_free(&r);
    free(src);
}

Test(parser, long_operator_chain) {
    char *src = repeat("const X = a", " + a", 5000, ";");
    parsed r = parse(src);
    /* The 1000th '+' makes the tree 1001 levels deep; it is at column 13 + 4 * 999. */
    cr_expect_str_eq(r.errors,
                     "1:4009: expression too complex (more than 1000 levels of operators)\n");
    parsed_free(&r);
    free(src);
    src = repeat("const X = a", " + a", 900, ";");
    r = parse(src);
    cr_expect_str_eq(r.errors, "");
    parsed_free(&r);
    free(src);
}

Test(parser, long_else_if_chain) {
    char *src = repeat("kernel k() { if a { }", " else if a { }", 1500, " }");
    parsed r = parse(src);
    /* The 1001st 'else if': its 'if' is at column 22 + 14 * 1000 + 6. */
    cr_expect_str_eq(r.errors,
                     "1:14028: too many 'else if' branches in one chain (more than 1000)\n");
    parsed_free(&r);
    free(src);
}

Test(parser, nul_bytes_and_garbage_never_crash) {
    static const char nul[] = "kernel k() { x\0= 1; }";
    parsed r = parse_n(nul, sizeof nul - 1);
    cr_expect_str_eq(r.errors, "1:15: unexpected character 0x00\n");
    parsed_free(&r);
    /* Random byte strings and random token soups: every call returns a tree. */
    static const char *const frags[] = {
        "kernel", "func", "const", "k",  "(",     ")",   "{",   "}",      "[",   "]",
        ",",      ";",    ":",     "->", "..",    "=",   "+=",  "+",      "*",   "?",
        "if",     "else", "for",   "in", "while", "let", "var", "return", "f32", "i32[,]",
        "nograd", "1",    "2.5",   "0x", "$",     "/*",  "\n",  " ",      "x",   "a[i]",
    };
    uint64_t s = 0x9E3779B97F4A7C15u;
    for (int iter = 0; iter < 3000; iter++) {
        char buf[600];
        size_t n = 0;
        int len = 1 + (int)(s % 120);
        for (int i = 0; i < len; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            if (iter % 3 == 0) {
                buf[n++] = (char)(s >> 24);
            } else {
                const char *f = frags[(s >> 20) % (sizeof frags / sizeof frags[0])];
                size_t fl = strlen(f);
                if (n + fl + 1 >= sizeof buf)
                    break;
                memcpy(buf + n, f, fl);
                n += fl;
                buf[n++] = ' ';
            }
        }
        parsed q = parse_n(buf, n);
        cr_assert_not_null(q.file);
        parsed_free(&q);
    }
}
