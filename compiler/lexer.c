/* lexer.c - .kern source text to tokens (contract in lexer.h, choices in docs/ast.md).
 *
 * A hand-written scanner over the byte range [text, text + len); it never reads past
 * `end`, so NUL bytes inside the text are ordinary (invalid) characters. Every error is
 * reported once, where it starts, and the scanner moves on past the bad bytes. */
#include "lexer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

static const char *const tok_names[TK__COUNT] = {
#define FE_TOK_NAME(k, s) s,
    FE_TOKENS(FE_TOK_NAME)
#undef FE_TOK_NAME
};

const char *fe_tok_name(fe_tok_kind k) { return k >= 0 && k < TK__COUNT ? tok_names[k] : "?"; }

const kern_type *fe_tok_scalar(fe_tok_kind k) {
    if (k < TK_BOOL || k > TK_BF16)
        return NULL;
    return ty_scalar((kern_tykind)(TY_BOOL + (k - TK_BOOL)));
}

void fe_lexer_init(fe_lexer *lx, kc_ctx *ctx, const kern_source *src) {
    memset(lx, 0, sizeof *lx);
    lx->ctx = ctx;
    lx->src = src;
    lx->p = src->text;
    lx->end = src->text + src->len;
    lx->line_start = src->text;
    lx->line = 1;
    if (src->len >= 3 && memcmp(src->text, "\xEF\xBB\xBF", 3) == 0)
        lx->p += 3; /* byte-order mark */
}

/* ---- Character classes ------------------------------------------------------------ */

static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_hex(int c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static bool is_ident_start(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_ident_char(int c) { return is_ident_start(c) || is_digit(c); }
static bool is_space(int c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Can c begin a token (or whitespace/comment)? Used to end a run of invalid characters. */
static bool is_token_start(int c) {
    return is_ident_char(c) || is_space(c) || (c != 0 && strchr("()[]{},;:?.+-*/%<>&|^~!=", c));
}

/* The byte k positions ahead, or 0 past the end. */
static int peekc(const fe_lexer *lx, size_t k) {
    return lx->p + k < lx->end ? (unsigned char)lx->p[k] : 0;
}

static kern_loc loc_of(const fe_lexer *lx, const char *at) {
    return (kern_loc){lx->line, (uint32_t)(at - lx->line_start) + 1};
}

/* Quotes at most 40 bytes of a token's text for a message. */
static const char *clip(fe_lexer *lx, const char *s, size_t n) {
    if (n <= 40)
        return arena_printf(&lx->ctx->mem, "%.*s", (int)n, s);
    return arena_printf(&lx->ctx->mem, "%.*s...", 40, s);
}

/* ---- Whitespace and comments ------------------------------------------------------ */

/* Consumes a line end at lx->p: "\n", "\r\n" or a lone "\r" (old Mac files), so that
 * lines and columns are what an editor shows (common/diag.c quotes lines the same way). */
static void new_line(fe_lexer *lx) {
    lx->p += lx->p[0] == '\r' && peekc(lx, 1) == '\n' ? 2 : 1;
    lx->line++;
    lx->line_start = lx->p;
}

/* Skips whitespace and comments. Returns false when an unterminated comment ended the
 * input (reported here). */
static bool skip_space(fe_lexer *lx) {
    while (lx->p < lx->end) {
        int c = (unsigned char)*lx->p;
        if (c == '\n' || c == '\r') {
            new_line(lx);
        } else if (is_space(c)) {
            lx->p++;
        } else if (c == '/' && peekc(lx, 1) == '/') {
            while (lx->p < lx->end && *lx->p != '\n' && *lx->p != '\r')
                lx->p++;
        } else if (c == '/' && peekc(lx, 1) == '*') {
            kern_loc start = loc_of(lx, lx->p);
            lx->p += 2;
            for (;;) {
                if (lx->p >= lx->end) {
                    kc_error(lx->ctx, lx->src, start,
                             "unterminated comment: '/*' has no matching '*/'");
                    lx->truncated = true;
                    return false;
                }
                if (*lx->p == '*' && peekc(lx, 1) == '/') {
                    lx->p += 2;
                    break;
                }
                if (*lx->p == '\n' || *lx->p == '\r')
                    new_line(lx);
                else
                    lx->p++;
            }
        } else {
            break;
        }
    }
    return true;
}

/* ---- Numbers ---------------------------------------------------------------------- */

/* Consumes letters and digits glued to a number; returns how many. */
static size_t eat_suffix(fe_lexer *lx) {
    const char *s = lx->p;
    while (lx->p < lx->end && is_ident_char((unsigned char)*lx->p))
        lx->p++;
    return (size_t)(lx->p - s);
}

static void lex_hex(fe_lexer *lx, fe_token *t) {
    const char *start = lx->p;
    lx->p += 2; /* 0x */
    uint64_t v = 0;
    bool too_big = false;
    const char *digits = lx->p;
    while (lx->p < lx->end && is_hex((unsigned char)*lx->p)) {
        int c = (unsigned char)*lx->p++;
        int d = is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
        if (v > (uint64_t)INT64_MAX >> 4)
            too_big = true;
        v = v << 4 | (uint64_t)d;
    }
    bool none = lx->p == digits;
    const char *bad = lx->p;
    size_t extra = eat_suffix(lx);
    size_t n = (size_t)(lx->p - start);
    t->kind = TK_INT;
    if (none) {
        kc_error(lx->ctx, lx->src, t->loc,
                 "malformed number '%s': expected hex digits after '%.2s'", clip(lx, start, n),
                 start);
    } else if (extra) {
        kc_error(lx->ctx, lx->src, t->loc, "malformed number '%s': unexpected character '%c'",
                 clip(lx, start, n), *bad);
    } else if (too_big || v > (uint64_t)INT64_MAX) {
        kc_error(lx->ctx, lx->src, t->loc,
                 "integer literal '%s' is too large (the largest is 0x7FFFFFFFFFFFFFFF)",
                 clip(lx, start, n));
    } else {
        t->ival = (int64_t)v;
    }
}

static void lex_decimal(fe_lexer *lx, fe_token *t) {
    const char *start = lx->p;
    bool is_float = false, bad_exp = false;
    while (lx->p < lx->end && is_digit((unsigned char)*lx->p))
        lx->p++;
    const char *int_end = lx->p;
    /* A '.' followed by another '.' is the range token, never part of a number. */
    if (peekc(lx, 0) == '.' && peekc(lx, 1) != '.') {
        is_float = true;
        lx->p++;
        while (lx->p < lx->end && is_digit((unsigned char)*lx->p))
            lx->p++;
    }
    if (peekc(lx, 0) == 'e' || peekc(lx, 0) == 'E') {
        is_float = true;
        int k = (peekc(lx, 1) == '+' || peekc(lx, 1) == '-') ? 2 : 1;
        if (is_digit(peekc(lx, (size_t)k))) {
            lx->p += k;
            while (lx->p < lx->end && is_digit((unsigned char)*lx->p))
                lx->p++;
        } else {
            bad_exp = true;
            lx->p += k;
        }
    }
    const char *bad = lx->p;
    size_t extra = eat_suffix(lx);
    size_t n = (size_t)(lx->p - start);
    t->kind = is_float ? TK_FLOAT : TK_INT;
    if (bad_exp) {
        kc_error(lx->ctx, lx->src, t->loc, "malformed number '%s': expected digits in the exponent",
                 clip(lx, start, n));
    } else if (extra) {
        kc_error(lx->ctx, lx->src, t->loc, "malformed number '%s': unexpected character '%c'",
                 clip(lx, start, n), *bad);
    } else if (is_float) {
        char small[64];
        char *copy = n < sizeof small ? small : kern_xmalloc(n + 1);
        memcpy(copy, start, n);
        copy[n] = 0;
        errno = 0;
        double v = strtod(copy, NULL);
        if (copy != small)
            free(copy);
        if (v > 1.7976931348623157e308) /* overflow to +inf; underflow rounds toward 0 */
            kc_error(lx->ctx, lx->src, t->loc, "float literal '%s' is out of range",
                     clip(lx, start, n));
        else
            t->fval = v;
    } else if (*start == '0' && int_end - start > 1) {
        kc_error(
            lx->ctx, lx->src, t->loc,
            "malformed number '%s': leading zeros are not allowed (there are no octal literals)",
            clip(lx, start, n));
    } else {
        uint64_t v = 0;
        bool too_big = false;
        for (const char *q = start; q < int_end; q++) {
            uint64_t d = (uint64_t)(*q - '0');
            if (v > ((uint64_t)INT64_MAX - d) / 10)
                too_big = true;
            else
                v = v * 10 + d;
        }
        if (too_big)
            kc_error(lx->ctx, lx->src, t->loc,
                     "integer literal '%s' is too large (the largest is 9223372036854775807)",
                     clip(lx, start, n));
        else
            t->ival = (int64_t)v;
    }
}

/* ---- Invalid characters ----------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (2..4), or 0. */
static int utf8_len(const fe_lexer *lx, uint32_t *cp) {
    int c0 = peekc(lx, 0), n, lo = 0x80, hi = 0xBF;
    if (c0 >= 0xC2 && c0 <= 0xDF)
        n = 2;
    else if (c0 >= 0xE0 && c0 <= 0xEF)
        n = 3, lo = c0 == 0xE0 ? 0xA0 : 0x80, hi = c0 == 0xED ? 0x9F : 0xBF;
    else if (c0 >= 0xF0 && c0 <= 0xF4)
        n = 4, lo = c0 == 0xF0 ? 0x90 : 0x80, hi = c0 == 0xF4 ? 0x8F : 0xBF;
    else
        return 0;
    uint32_t v = (uint32_t)c0 & (0x7Fu >> n);
    for (int i = 1; i < n; i++) {
        int c = peekc(lx, (size_t)i);
        if (lx->p + i >= lx->end || c < (i == 1 ? lo : 0x80) || c > (i == 1 ? hi : 0xBF))
            return 0;
        v = v << 6 | ((uint32_t)c & 0x3F);
    }
    *cp = v;
    return n;
}

/* Reports the character at p and skips it and any invalid characters glued to it. */
static void lex_invalid(fe_lexer *lx, fe_token *t) {
    int c = peekc(lx, 0);
    uint32_t cp;
    int n = utf8_len(lx, &cp);
    if (c >= 0x21 && c < 0x7F)
        kc_error(lx->ctx, lx->src, t->loc, "unexpected character '%c'", c);
    else if (c < 0x80)
        kc_error(lx->ctx, lx->src, t->loc, "unexpected character 0x%02X", (unsigned)c);
    else if (n)
        kc_error(lx->ctx, lx->src, t->loc, "unexpected character U+%04X '%.*s'", (unsigned)cp, n,
                 lx->p);
    else
        kc_error(lx->ctx, lx->src, t->loc, "invalid UTF-8 byte 0x%02X", (unsigned)c);
    lx->p += n ? n : 1;
    /* One error for a run like `$$$` or a stretch of binary garbage. */
    while (lx->p < lx->end && !is_token_start((unsigned char)*lx->p)) {
        n = utf8_len(lx, &cp);
        lx->p += n ? n : 1;
    }
    t->kind = TK_ERROR;
}

/* ---- Identifiers, keywords, operators --------------------------------------------- */

static fe_tok_kind keyword(const char *s, size_t n) {
    for (int k = TK_CONST; k <= TK_BF16; k++)
        if (strlen(tok_names[k]) == n && memcmp(tok_names[k], s, n) == 0)
            return (fe_tok_kind)k;
    if (ty_vector_named(s, (int)n))
        return TK_VTYPE;
    return TK_IDENT;
}

/* The operator at p by longest match; TK_ERROR when none. Sets *n to its length. */
static fe_tok_kind lex_operator(const fe_lexer *lx, int *n) {
    int c = peekc(lx, 0), c1 = peekc(lx, 1);
    *n = 2;
    switch (c) {
    case '.':
        if (c1 == '.')
            return TK_DOTDOT;
        *n = 1;
        return TK_DOT;
    case '-':
        if (c1 == '>')
            return TK_ARROW;
        if (c1 == '=')
            return TK_MINUSEQ;
        break;
    case '+':
        if (c1 == '=')
            return TK_PLUSEQ;
        break;
    case '*':
        if (c1 == '=')
            return TK_STAREQ;
        break;
    case '/':
        if (c1 == '=')
            return TK_SLASHEQ;
        break;
    case '<':
        if (c1 == '<')
            return TK_SHL;
        if (c1 == '=')
            return TK_LE;
        break;
    case '>':
        if (c1 == '>')
            return TK_SHR;
        if (c1 == '=')
            return TK_GE;
        break;
    case '=':
        if (c1 == '=')
            return TK_EQ;
        break;
    case '!':
        if (c1 == '=')
            return TK_NE;
        break;
    case '&':
        if (c1 == '&')
            return TK_ANDAND;
        break;
    case '|':
        if (c1 == '|')
            return TK_OROR;
        break;
    default: break;
    }
    *n = 1;
    switch (c) {
    case '(': return TK_LPAREN;
    case ')': return TK_RPAREN;
    case '[': return TK_LBRACKET;
    case ']': return TK_RBRACKET;
    case '{': return TK_LBRACE;
    case '}': return TK_RBRACE;
    case ',': return TK_COMMA;
    case ';': return TK_SEMI;
    case ':': return TK_COLON;
    case '?': return TK_QUESTION;
    case '+': return TK_PLUS;
    case '-': return TK_MINUS;
    case '*': return TK_STAR;
    case '/': return TK_SLASH;
    case '%': return TK_PERCENT;
    case '&': return TK_AMP;
    case '|': return TK_PIPE;
    case '^': return TK_CARET;
    case '~': return TK_TILDE;
    case '!': return TK_BANG;
    case '<': return TK_LT;
    case '>': return TK_GT;
    case '=': return TK_ASSIGN;
    default: return TK_ERROR;
    }
}

fe_token fe_lex_next(fe_lexer *lx) {
    fe_token t;
    memset(&t, 0, sizeof t);
    bool ok = skip_space(lx);
    t.loc = loc_of(lx, lx->p);
    t.text = lx->p;
    if (!ok) {
        /* The unterminated comment is reported; the input ends here. */
        lx->p = lx->end;
        t.kind = TK_EOF;
        return t;
    }
    if (lx->p >= lx->end) {
        t.kind = TK_EOF;
        return t;
    }
    int c = peekc(lx, 0);
    int n;
    if (is_ident_start(c)) {
        const char *s = lx->p;
        while (lx->p < lx->end && is_ident_char((unsigned char)*lx->p))
            lx->p++;
        t.kind = keyword(s, (size_t)(lx->p - s));
        if ((size_t)(lx->p - s) > KERN_MAX_NAME) { /* symbols are built from names (abi.h) */
            kc_error(lx->ctx, lx->src, t.loc,
                     "name '%.20s...' is %zu characters long; the longest allowed is %d", s,
                     (size_t)(lx->p - s), KERN_MAX_NAME);
            t.kind = TK_ERROR;
        }
    } else if (c == '0' && (peekc(lx, 1) == 'x' || peekc(lx, 1) == 'X')) {
        lex_hex(lx, &t);
    } else if (is_digit(c) || (c == '.' && is_digit(peekc(lx, 1)))) {
        lex_decimal(lx, &t);
    } else if ((t.kind = lex_operator(lx, &n)) != TK_ERROR) {
        lx->p += n;
    } else {
        lex_invalid(lx, &t);
    }
    t.len = (uint32_t)(lx->p - t.text);
    return t;
}
