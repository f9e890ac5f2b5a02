/* test_lexer.c - the lexer (compiler/lexer.h): token streams of tricky inputs, locations,
 * values of literals and lexical errors.
 *
 * Token streams are compared as text: each token is its spelling for keywords and
 * punctuation, `id:NAME`, `int:VALUE`, `float:VALUE` (%g), `error` or `eof`. The expected
 * strings are written from the language reference (section 2), not from the lexer's output. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/context.h"
#include "../common/util.h"
#include "../compiler/lexer.h"

typedef struct lexed {
    kc_ctx *ctx;
    char *toks;   /* the token stream as text */
    char *locs;   /* "L:C L:C ..." of every token, eof included */
    char *errors; /* "L:C: message\n" per diagnostic */
} lexed;

static lexed lex_n(const char *text, size_t len) {
    lexed r;
    r.ctx = kc_ctx_new();
    const kern_source *src = kc_add_source(r.ctx, "t.kern", text, len);
    fe_lexer lx;
    fe_lexer_init(&lx, r.ctx, src);
    kern_buf toks = {0}, locs = {0}, errs = {0};
    for (int guard = 0; guard < 10000; guard++) {
        fe_token t = fe_lex_next(&lx);
        if (toks.len)
            buf_putc(&toks, ' ');
        if (locs.len)
            buf_putc(&locs, ' ');
        buf_printf(&locs, "%u:%u", t.loc.line, t.loc.col);
        switch (t.kind) {
        case TK_EOF: buf_puts(&toks, "eof"); break;
        case TK_ERROR: buf_puts(&toks, "error"); break;
        case TK_IDENT: buf_printf(&toks, "id:%.*s", (int)t.len, t.text); break;
        case TK_INT: buf_printf(&toks, "int:%lld", (long long)t.ival); break;
        case TK_FLOAT: buf_printf(&toks, "float:%g", t.fval); break;
        default: buf_puts(&toks, fe_tok_name(t.kind)); break;
        }
        if (t.kind == TK_EOF)
            break;
    }
    for (int i = 0; i < r.ctx->diags.len; i++) {
        const diag *d = &r.ctx->diags.items[i];
        buf_printf(&errs, "%u:%u: %s\n", d->loc.line, d->loc.col, d->message);
    }
    r.toks = buf_take(&toks);
    r.locs = buf_take(&locs);
    r.errors = errs.data ? buf_take(&errs) : strdup("");
    return r;
}

static lexed lex(const char *text) { return lex_n(text, strlen(text)); }

static void lexed_free(lexed *r) {
    kc_ctx_free(r->ctx);
    free(r->toks);
    free(r->locs);
    free(r->errors);
}

/* Asserts the token stream of text (without errors). */
static void expect_tokens(const char *text, const char *want) {
    lexed r = lex(text);
    cr_expect_str_eq(r.toks, want, "tokens of \"%s\"", text);
    cr_expect_str_eq(r.errors, "", "unexpected errors for \"%s\"", text);
    lexed_free(&r);
}

/* Asserts the diagnostics (and optionally the tokens) of text. */
static void expect_error_n(const char *text, size_t len, const char *want_errors,
                           const char *want_toks) {
    lexed r = lex_n(text, len);
    cr_expect_str_eq(r.errors, want_errors, "errors of \"%s\"", text);
    if (want_toks)
        cr_expect_str_eq(r.toks, want_toks, "tokens of \"%s\"", text);
    lexed_free(&r);
}

static void expect_error(const char *text, const char *want_errors, const char *want_toks) {
    expect_error_n(text, strlen(text), want_errors, want_toks);
}

/* ---- Token streams ---------------------------------------------------------------- */

Test(lexer, empty_and_whitespace) {
    expect_tokens("", "eof");
    expect_tokens(" \t\r\n\f\v ", "eof");
}

Test(lexer, range_wins_over_float) {
    expect_tokens("1..2", "int:1 .. int:2 eof");
    expect_tokens("0..n", "int:0 .. id:n eof");
    expect_tokens("0 .. len(a)", "int:0 .. id:len ( id:a ) eof");
    expect_tokens("1...2", "int:1 .. float:0.2 eof");
    expect_tokens("a..b", "id:a .. id:b eof");
}

Test(lexer, floats) {
    expect_tokens(".5", "float:0.5 eof");
    expect_tokens("1.0", "float:1 eof");
    expect_tokens("1e-3", "float:0.001 eof");
    expect_tokens("2.5e+4", "float:25000 eof");
    expect_tokens("3E2", "float:300 eof");
    expect_tokens("0.25", "float:0.25 eof");
}

Test(lexer, trailing_dot_is_a_float) {
    /* docs/ast.md: `1.` is the float 1.0 unless a second '.' follows. */
    expect_tokens("1.", "float:1 eof");
    expect_tokens("1. + x", "float:1 + id:x eof");
    expect_tokens("1.e3", "float:1000 eof");
    expect_tokens("1.)", "float:1 ) eof");
}

Test(lexer, integers) {
    expect_tokens("0", "int:0 eof");
    expect_tokens("42", "int:42 eof");
    expect_tokens("0x2A", "int:42 eof");
    expect_tokens("0X2a", "int:42 eof");
    expect_tokens("0xffffffff", "int:4294967295 eof");
    expect_tokens("9223372036854775807", "int:9223372036854775807 eof");
    expect_tokens("0x7FFFFFFFFFFFFFFF", "int:9223372036854775807 eof");
    expect_tokens("0x0", "int:0 eof");
}

Test(lexer, comments) {
    expect_tokens("a // comment\nb", "id:a id:b eof");
    expect_tokens("a /* x */ b", "id:a id:b eof");
    expect_tokens("a /* multi\nline\n*/ b", "id:a id:b eof");
    expect_tokens("a /* not /* nested */ b", "id:a id:b eof");
    expect_tokens("a /**/ b", "id:a id:b eof");
    expect_tokens("a/b", "id:a / id:b eof");
    expect_tokens("// only a comment", "eof");
    expect_tokens("a /* $ é \x01 */ b // é $", "id:a id:b eof");
    expect_tokens("x /*/ y */ z", "id:x id:z eof");
}

Test(lexer, keywords_and_types) {
    expect_tokens("const func kernel let var if else for in while break continue return true "
                  "false nograd",
                  "const func kernel let var if else for in while break continue return true "
                  "false nograd eof");
    expect_tokens("f32 f64 i32 u32 i64 bool", "f32 f64 i32 u32 i64 bool eof");
    /* Near misses are identifiers. */
    expect_tokens("i8 u8 i16 u16 u64 f16 bf16", "i8 u8 i16 u16 u64 f16 bf16 eof");
    expect_tokens("f8 i9 consts _for For letx in_ _", "id:f8 id:i9 id:consts id:_for id:For "
                                                      "id:letx id:in_ id:_ eof");
    expect_tokens("x_1 _a9 A", "id:x_1 id:_a9 id:A eof");
}

Test(lexer, type_token_kinds) {
    cr_expect_eq(fe_tok_scalar(TK_F32), ty_f32());
    cr_expect_eq(fe_tok_scalar(TK_F64), ty_f64());
    cr_expect_eq(fe_tok_scalar(TK_I32), ty_i32());
    cr_expect_eq(fe_tok_scalar(TK_U32), ty_u32());
    cr_expect_eq(fe_tok_scalar(TK_I64), ty_i64());
    cr_expect_eq(fe_tok_scalar(TK_BOOL), ty_bool());
    cr_expect_null(fe_tok_scalar(TK_IDENT));
    cr_expect_null(fe_tok_scalar(TK_NOGRAD));
}

Test(lexer, operators_longest_match) {
    expect_tokens("+ - * / % << >> & | ^ ~ ! == != < <= > >= && || ? : = += -= *= /= -> .. "
                  "( ) [ ] { } , ;",
                  "+ - * / % << >> & | ^ ~ ! == != < <= > >= && || ? : = += -= *= /= -> .. "
                  "( ) [ ] { } , ; eof");
    expect_tokens("a<<=b", "id:a << = id:b eof");
    expect_tokens("a>>=b", "id:a >> = id:b eof");
    expect_tokens("a<=b", "id:a <= id:b eof");
    expect_tokens("a<-b", "id:a < - id:b eof");
    expect_tokens("a->b", "id:a -> id:b eof");
    expect_tokens("a--b", "id:a - - id:b eof");
    expect_tokens("a&&&b", "id:a && & id:b eof");
    expect_tokens("a|||b", "id:a || | id:b eof");
    expect_tokens("a===b", "id:a == = id:b eof");
    expect_tokens("!!=", "! != eof");
    expect_tokens("x+=-1", "id:x += - int:1 eof");
    expect_tokens("a%=b", "id:a % = id:b eof");
}

Test(lexer, realistic_line) {
    expect_tokens("for i in 0..len(x0) { out[i, j] += x*2.0; }",
                  "for id:i in int:0 .. id:len ( id:x0 ) { id:out [ id:i , id:j ] += id:x * "
                  "float:2 ; } eof");
}

/* ---- Locations -------------------------------------------------------------------- */

Test(lexer, locations_are_line_and_byte_column) {
    lexed r = lex("let x\n  = 1..2;\n\tfoo");
    cr_expect_str_eq(r.toks, "let id:x = int:1 .. int:2 ; id:foo eof");
    cr_expect_str_eq(r.locs, "1:1 1:5 2:3 2:5 2:6 2:8 2:9 3:2 3:5");
    lexed_free(&r);
}

Test(lexer, locations_after_comments_and_utf8) {
    /* Columns count bytes: 'é' in the comment is two bytes. */
    lexed r = lex("/* a\nb */ x // é\n/*é*/y");
    cr_expect_str_eq(r.toks, "id:x id:y eof");
    cr_expect_str_eq(r.locs, "2:6 3:7 3:8");
    lexed_free(&r);
}

Test(lexer, crlf_line_endings) {
    lexed r = lex("a\r\nb\r\n");
    cr_expect_str_eq(r.locs, "1:1 2:1 3:1");
    lexed_free(&r);
}

/* A lone '\r' ends a line too (old Mac files), and ends a // comment: the comment does
 * not swallow the rest of the file. */
Test(lexer, cr_only_line_endings) {
    lexed r = lex("a\rb\r\rc\r\n// x\ry /* \r */ z");
    cr_expect_str_eq(r.toks, "id:a id:b id:c id:y id:z eof");
    cr_expect_str_eq(r.locs, "1:1 2:1 4:1 6:1 7:5 7:6");
    lexed_free(&r);
}

Test(lexer, byte_order_mark_is_skipped) {
    lexed r = lex("\xEF\xBB\xBFkernel");
    cr_expect_str_eq(r.toks, "kernel eof");
    cr_expect_str_eq(r.errors, "");
    lexed_free(&r);
}

Test(lexer, eof_repeats) {
    kc_ctx *ctx = kc_ctx_new();
    const kern_source *src = kc_add_source(ctx, "t.kern", "x", 1);
    fe_lexer lx;
    fe_lexer_init(&lx, ctx, src);
    cr_expect_eq(fe_lex_next(&lx).kind, TK_IDENT);
    for (int i = 0; i < 3; i++)
        cr_expect_eq(fe_lex_next(&lx).kind, TK_EOF);
    kc_ctx_free(ctx);
}

/* ---- Errors ----------------------------------------------------------------------- */

Test(lexer, unexpected_characters) {
    expect_error("a $ b", "1:3: unexpected character '$'\n", "id:a error id:b eof");
    expect_error("a @#$ b", "1:3: unexpected character '@'\n", "id:a error id:b eof");
    expect_error("x`y", "1:2: unexpected character '`'\n", "id:x error id:y eof");
    expect_error("\"str\"", "1:1: unexpected character '\"'\n1:5: unexpected character '\"'\n",
                 "error id:str error eof");
    expect_error("a\x01"
                 "b",
                 "1:2: unexpected character 0x01\n", "id:a error id:b eof");
    expect_error("x\x7f", "1:2: unexpected character 0x7F\n", "id:x error eof");
}

Test(lexer, nul_byte) {
    expect_error_n("a\0b", 3, "1:2: unexpected character 0x00\n", "id:a error id:b eof");
    expect_error_n("a /* \0 */ b", 11, "", "id:a id:b eof");
}

Test(lexer, non_ascii) {
    expect_error("x = \xC3\xA9;", "1:5: unexpected character U+00E9 '\xC3\xA9'\n",
                 "id:x = error ; eof");
    expect_error("\xE2\x82\xAC", "1:1: unexpected character U+20AC '\xE2\x82\xAC'\n", "error eof");
    expect_error("\xF0\x9F\x98\x80 x", "1:1: unexpected character U+1F600 '\xF0\x9F\x98\x80'\n",
                 "error id:x eof");
    expect_error("a \xFF b", "1:3: invalid UTF-8 byte 0xFF\n", "id:a error id:b eof");
    expect_error("\xC3", "1:1: invalid UTF-8 byte 0xC3\n", "error eof");
    expect_error("\xC0\x80", "1:1: invalid UTF-8 byte 0xC0\n", "error eof");     /* overlong */
    expect_error("\xED\xA0\x80", "1:1: invalid UTF-8 byte 0xED\n", "error eof"); /* surrogate */
}

Test(lexer, unterminated_comment) {
    expect_error("a /* b\nc", "1:3: unterminated comment: '/*' has no matching '*/'\n", "id:a eof");
    expect_error("x\n  /*/", "2:3: unterminated comment: '/*' has no matching '*/'\n", "id:x eof");
    expect_error("/*", "1:1: unterminated comment: '/*' has no matching '*/'\n", "eof");
}

Test(lexer, malformed_numbers) {
    expect_error("0x", "1:1: malformed number '0x': expected hex digits after '0x'\n", "int:0 eof");
    expect_error("0xg1 y", "1:1: malformed number '0xg1': expected hex digits after '0x'\n",
                 "int:0 id:y eof");
    expect_error("0x1G", "1:1: malformed number '0x1G': unexpected character 'G'\n", "int:0 eof");
    expect_error("1e", "1:1: malformed number '1e': expected digits in the exponent\n",
                 "float:0 eof");
    expect_error("1e+", "1:1: malformed number '1e+': expected digits in the exponent\n",
                 "float:0 eof");
    expect_error("2.5e-x", "1:1: malformed number '2.5e-x': expected digits in the exponent\n",
                 "float:0 eof");
    expect_error("12abc", "1:1: malformed number '12abc': unexpected character 'a'\n", "int:0 eof");
    expect_error("1.5f", "1:1: malformed number '1.5f': unexpected character 'f'\n", "float:0 eof");
    expect_error("1_000", "1:1: malformed number '1_000': unexpected character '_'\n", "int:0 eof");
    expect_error("007",
                 "1:1: malformed number '007': leading zeros are not allowed (there are no octal "
                 "literals)\n",
                 "int:0 eof");
    /* Leading zeros are fine in floats. */
    expect_tokens("00.5", "float:0.5 eof");
}

Test(lexer, integer_too_large) {
    expect_error("9223372036854775808",
                 "1:1: integer literal '9223372036854775808' is too large (the largest is "
                 "9223372036854775807)\n",
                 "int:0 eof");
    expect_error("0x8000000000000000",
                 "1:1: integer literal '0x8000000000000000' is too large (the largest is "
                 "0x7FFFFFFFFFFFFFFF)\n",
                 "int:0 eof");
    expect_error("0x1FFFFFFFFFFFFFFFF",
                 "1:1: integer literal '0x1FFFFFFFFFFFFFFFF' is too large (the largest is "
                 "0x7FFFFFFFFFFFFFFF)\n",
                 "int:0 eof");
    expect_tokens("0x00000000000000000000001", "int:1 eof");
}

Test(lexer, float_out_of_range) {
    expect_error("1e999", "1:1: float literal '1e999' is out of range\n", "float:0 eof");
    /* Underflow rounds toward zero, like C. */
    expect_tokens("1e-999", "float:0 eof");
}

Test(lexer, long_literal_is_clipped_in_message) {
    char text[200];
    memset(text, '9', 100);
    text[100] = 0;
    lexed r = lex(text);
    cr_expect_str_eq(r.errors,
                     "1:1: integer literal '9999999999999999999999999999999999999999...' is too "
                     "large (the largest is 9223372036854775807)\n");
    lexed_free(&r);
}

Test(lexer, errors_keep_later_locations_right) {
    lexed r = lex("$\n  0x z\n");
    cr_expect_str_eq(r.toks, "error int:0 id:z eof");
    cr_expect_str_eq(r.locs, "1:1 2:3 2:6 3:1");
    cr_expect_str_eq(r.errors, "1:1: unexpected character '$'\n"
                               "2:3: malformed number '0x': expected hex digits after '0x'\n");
    lexed_free(&r);
}

/* ---- Diagnostics as printed ------------------------------------------------------- */

/* A stream that counts its write calls (unbuffered: one call per write the printer
 * makes, as on stderr) and keeps what was written. */
typedef struct counted {
    kern_buf text;
    int writes;
} counted;

static ssize_t counted_write(void *cookie, const char *data, size_t n) {
    counted *c = cookie;
    buf_putn(&c->text, data, n);
    c->writes++;
    return (ssize_t)n;
}

/* The diagnostics of lexing text, as diag_print_all writes them, and its write count. */
static char *printed(const char *text, size_t len, int *writes) {
    counted c = {{0}, 0};
    FILE *f = fopencookie(&c, "w", (cookie_io_functions_t){.write = counted_write});
    cr_assert(f);
    setvbuf(f, NULL, _IONBF, 0);
    lexed r = lex_n(text, len);
    diag_print_all(f, &r.ctx->diags);
    fclose(f);
    lexed_free(&r);
    *writes = c.writes;
    buf_putc(&c.text, 0);
    return c.text.data;
}

/* The quoted line and the caret under the character: with CR-only line ends, the line of
 * the error is quoted (not the file's first) and the caret stands under the '$'. */
Test(lexer, diagnostic_quotes_the_line_of_cr_only_line_ends) {
    const char *text = "kernel k(a: f32[]) {\r  let x = $;\r}\r";
    int writes;
    char *out = printed(text, strlen(text), &writes);
    cr_expect_str_eq(out, "t.kern:2:11: error: unexpected character '$'\n"
                          "      let x = $;\n"
                          "              ^\n");
    free(out);
}

/* An error at column 5,000,001 of one line quotes a window of the line around the column,
 * in one write (it printed the 5 MB line a byte per write(2), about 20 s). */
Test(lexer, diagnostic_cuts_a_long_line_around_the_caret) {
    size_t n = 5000000;
    char *text = malloc(n + 16);
    memset(text, ' ', n);
    memcpy(text + n, "$ abc", 6);
    int writes;
    char *out = printed(text, n + 5, &writes);
    cr_assert_eq(writes, 1, "%d writes", writes);
    cr_expect_lt(strlen(out), 400, "%zu bytes printed", strlen(out));
    const char *l1 = strchr(out, '\n') + 1, *l2 = strchr(l1, '\n') + 1;
    cr_expect(!strncmp(out, "t.kern:1:5000001: error: unexpected character '$'\n", 50), "%s", out);
    cr_expect(!strncmp(l1, "    ...", 7), "the cut is marked: %s", l1);
    const char *dollar = strchr(l1, '$'), *caret = strchr(l2, '^');
    cr_assert(dollar && caret, "%s", out);
    cr_expect_eq(dollar - l1, caret - l2, "the caret under the '$':\n%s", out);
    free(out);
    /* a cut in the middle of the line is marked at both ends; UTF-8 is cut between
     * characters (the window's ends fall inside an 'é' here) and the caret counts
     * characters, not bytes */
    memset(text, ' ', n);
    size_t at = 2000200; /* the '$': the window is [at - 60, at + 60) */
    memcpy(text + at - 200, "/*", 2);
    for (size_t i = at - 99; i < at - 20; i += 2)
        memcpy(text + i, "\xC3\xA9", 2);
    memcpy(text + at - 10, "*/", 2);
    text[at] = '$';
    memcpy(text + at + 2, "/*", 2);
    for (size_t i = at + 5; i < at + 100; i += 2)
        memcpy(text + i, "\xC3\xA9", 2);
    memcpy(text + at + 110, "*/", 2);
    out = printed(text, n, &writes);
    l1 = strchr(out, '\n') + 1, l2 = strchr(l1, '\n') + 1;
    const char *e1 = strchr(l1, '\n');
    cr_expect(!strncmp(l1, "    ...", 7) && !strncmp(e1 - 3, "...", 3), "%.*s", (int)(e1 - l1), l1);
    cr_expect_neq((unsigned char)l1[7] & 0xC0, 0x80, "the window starts on a character");
    cr_expect_neq((unsigned char)e1[-4] & 0xC0, 0xC0, "the window ends after a character");
    dollar = strchr(l1, '$');
    size_t chars = 0;
    for (const char *p = l1; p < dollar; p++)
        chars += ((unsigned char)*p & 0xC0) != 0x80;
    cr_expect_eq(strchr(l2, '^') - l2, (ptrdiff_t)chars, "the caret under the '$'");
    free(out);
    free(text);
}
