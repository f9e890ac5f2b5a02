/* parse.c - the IR parser: reads the text form of docs/ir.md back into a module.
 *
 * A hand-written scanner and recursive-descent parser. Each op's header stands on one
 * line. Names are per kernel and may be used before their definition (the verifier, not
 * the parser, judges dominance): a use of a name not yet defined gets a placeholder value
 * that is patched when the kernel ends. The parser rejects only what the IR cannot
 * represent: bad syntax, unknown ops and types, undefined or redefined names, constants
 * that do not fit their type, a count of result types that differs from the results
 * written, a region argument whose type it cannot derive. Everything else (operand
 * counts, type rules, terminators) is left to ir_verify, so bad IR can be written as text.
 *
 * Errors go to the sink with the line:col of the .ir text; the first one stops the parse
 * (a longjmp that never leaves ir_parse) and everything built so far is freed. Nesting is
 * bounded, so no input makes the parser overflow its stack. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "ir_priv.h"

enum { MAX_DEPTH = 256, MAX_NUMBER = 128 };

typedef enum tok_kind {
    TK_EOF,
    TK_VALUE,  /* %name or %name#i */
    TK_GLOBAL, /* @name or @"text" */
    TK_IDENT,  /* keywords, op names, types (f32[,] included) */
    TK_NUMBER, /* 12, -3, 1.5e-3, 0x1p3, -inf */
    TK_STRING, /* "text" */
    TK_PUNCT,  /* ( ) { } [ ] , : = ! */
} tok_kind;

typedef struct token {
    tok_kind kind;
    const char *s; /* the name / text without its sigil or quotes */
    uint32_t len;
    kern_loc loc;
    bool has_index; /* %name#i */
    uint32_t index;
    char punct;
} token;

/* A name of the kernel being parsed. */
typedef struct sym {
    const char *name;
    uint32_t len;
    bool defined;
    ir_value *val;  /* a single value */
    ir_op *group;   /* or an op with >= 2 results */
    kern_loc where; /* text position of the definition */
} sym;

/* A use of a name that was not defined yet; patched at the end of the kernel. */
typedef struct fwd {
    ir_value v; /* first: the placeholder that sits in the operand list */
    sym *s;
    bool has_index;
    uint32_t index;
    kern_loc loc;
} fwd;

typedef struct parser {
    const char *text;
    size_t len, pos;
    uint32_t line, col;
    token tok;
    uint32_t prev_line; /* line of the token before tok */
    const kern_source *src;
    diag_sink *sink;
    jmp_buf fail;
    arena scratch; /* symbols, temporary lists, unescaped strings */
    ir_module *m;
    sym **syms; /* open-addressing table, in scratch */
    uint32_t nsyms, cap;
    int depth;
    int undefined; /* undefined names found when a kernel ends */
} parser;

/* ---- Errors ----------------------------------------------------------------------- */

static const kern_source *err_src(parser *p) {
    if (!p->src && p->sink) {
        kern_source *s = ARENA_NEW(p->sink->mem, kern_source);
        s->path = "<ir>";
        s->text = arena_strndup(p->sink->mem, p->text, p->len);
        s->len = p->len;
        p->src = s;
    }
    return p->src;
}

static void report(parser *p, kern_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report(parser *p, kern_loc loc, const char *fmt, ...) {
    if (!p->sink)
        return;
    va_list ap;
    va_start(ap, fmt);
    diag_vreport(p->sink, DIAG_ERROR, err_src(p), loc, fmt, ap);
    va_end(ap);
}

#define fail_at(p, loc, ...)             \
    do {                                 \
        report((p), (loc), __VA_ARGS__); \
        longjmp((p)->fail, 1);           \
    } while (0)

/* A short description of the current token for messages. */
static const char *tok_desc(parser *p) {
    token *t = &p->tok;
    switch (t->kind) {
    case TK_EOF: return "end of input";
    case TK_VALUE:
        return arena_printf(&p->scratch, "'%%%.*s'", (int)(t->len > 40 ? 40 : t->len), t->s);
    case TK_GLOBAL:
        return arena_printf(&p->scratch, "'@%.*s'", (int)(t->len > 40 ? 40 : t->len), t->s);
    case TK_STRING: return "a string";
    case TK_PUNCT: return arena_printf(&p->scratch, "'%c'", t->punct);
    default: return arena_printf(&p->scratch, "'%.*s'", (int)(t->len > 40 ? 40 : t->len), t->s);
    }
}

/* ---- Scanner ---------------------------------------------------------------------- */

static int peekc(parser *p, size_t ahead) {
    return p->pos + ahead < p->len ? (unsigned char)p->text[p->pos + ahead] : -1;
}

static void advance(parser *p) {
    if (p->text[p->pos] == '\n') {
        p->line++;
        p->col = 1;
    } else {
        p->col++;
    }
    p->pos++;
}

static bool is_name_char(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
}

static bool is_digit(int c) { return c >= '0' && c <= '9'; }

static void skip_space(parser *p) {
    for (;;) {
        int c = peekc(p, 0);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            advance(p);
        } else if (c == '/' && peekc(p, 1) == '/') {
            while (peekc(p, 0) != -1 && peekc(p, 0) != '\n')
                advance(p);
        } else {
            return;
        }
    }
}

static int hexval(int c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* "text" with \XX escapes; the token holds the unescaped bytes (NUL-terminated). */
static void scan_string(parser *p, token *t) {
    advance(p); /* the quote */
    kern_buf b = {0};
    for (;;) {
        int c = peekc(p, 0);
        if (c == -1 || c == '\n') {
            buf_free(&b);
            fail_at(p, t->loc, "unterminated string");
        }
        if (c == '"')
            break;
        if (c == '\\') {
            int h = hexval(peekc(p, 1)), l = hexval(peekc(p, 2));
            if (h < 0 || l < 0 || (h == 0 && l == 0)) {
                kern_loc at = {p->line, p->col};
                buf_free(&b);
                fail_at(p, at, "bad escape in string: write \\XX with two hex digits, not \\00");
            }
            buf_putc(&b, (char)(h * 16 + l));
            advance(p);
            advance(p);
            advance(p);
            continue;
        }
        buf_putc(&b, (char)c);
        advance(p);
    }
    advance(p);
    t->kind = TK_STRING;
    t->len = (uint32_t)b.len;
    t->s = arena_strndup(&p->scratch, b.data ? b.data : "", b.len);
    buf_free(&b);
}

static void next(parser *p) {
    p->prev_line = p->tok.loc.line;
    skip_space(p);
    token *t = &p->tok;
    memset(t, 0, sizeof *t);
    t->loc = (kern_loc){p->line, p->col};
    int c = peekc(p, 0);
    if (c == -1) {
        t->kind = TK_EOF;
        return;
    }
    size_t start = p->pos;
    if (c == '%' || c == '@') {
        advance(p);
        t->kind = c == '%' ? TK_VALUE : TK_GLOBAL;
        if (c == '@' && peekc(p, 0) == '"') {
            scan_string(p, t);
            t->kind = TK_GLOBAL;
            return;
        }
        size_t s = p->pos;
        while (is_name_char(peekc(p, 0)))
            advance(p);
        if (p->pos == s)
            fail_at(p, t->loc, "expected a name after '%c'", c);
        t->s = p->text + s;
        t->len = (uint32_t)(p->pos - s);
        if (c == '%' && peekc(p, 0) == '#') {
            advance(p);
            uint64_t v = 0;
            size_t d = p->pos;
            while (is_digit(peekc(p, 0)) && p->pos - d < 10) {
                v = v * 10 + (uint64_t)(peekc(p, 0) - '0');
                advance(p);
            }
            if (p->pos == d || is_digit(peekc(p, 0)) || v > UINT32_MAX)
                fail_at(p, t->loc, "expected a result number after '#'");
            t->has_index = true;
            t->index = (uint32_t)v;
        }
        return;
    }
    if (c == '"') {
        scan_string(p, t);
        return;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
        while (is_name_char(peekc(p, 0)))
            advance(p);
        /* a type's rank suffix: f32[] i64[,,] */
        if (peekc(p, 0) == '[') {
            size_t k = 1;
            while (peekc(p, k) == ',')
                k++;
            if (peekc(p, k) == ']')
                for (size_t i = 0; i <= k; i++)
                    advance(p);
        }
        t->kind = TK_IDENT;
        t->s = p->text + start;
        t->len = (uint32_t)(p->pos - start);
        return;
    }
    if (is_digit(c) || ((c == '-' || c == '+') &&
                        (is_digit(peekc(p, 1)) || peekc(p, 1) == '.' || peekc(p, 1) == 'i'))) {
        advance(p);
        for (;;) {
            int d = peekc(p, 0);
            int prev = (unsigned char)p->text[p->pos - 1];
            bool exp_sign = (d == '+' || d == '-') &&
                            (prev == 'e' || prev == 'E' || prev == 'p' || prev == 'P');
            if (!is_name_char(d) && !exp_sign)
                break;
            advance(p);
        }
        t->kind = TK_NUMBER;
        t->s = p->text + start;
        t->len = (uint32_t)(p->pos - start);
        return;
    }
    if (c && strchr("(){}[],:=!", c)) {
        advance(p);
        t->kind = TK_PUNCT;
        t->punct = (char)c;
        t->s = p->text + start;
        t->len = 1;
        return;
    }
    if (c >= 0x20 && c < 0x7f)
        fail_at(p, t->loc, "unexpected character '%c'", c);
    fail_at(p, t->loc, "unexpected byte 0x%02x", c);
}

/* ---- Token helpers ---------------------------------------------------------------- */

static bool is_punct(parser *p, char c) { return p->tok.kind == TK_PUNCT && p->tok.punct == c; }

static bool is_word(parser *p, const char *w) {
    return p->tok.kind == TK_IDENT && p->tok.len == strlen(w) &&
           memcmp(p->tok.s, w, p->tok.len) == 0;
}

static void expect_punct(parser *p, char c, const char *what) {
    if (!is_punct(p, c))
        fail_at(p, p->tok.loc, "expected '%c' %s, found %s", c, what, tok_desc(p));
    next(p);
}

static void expect_word(parser *p, const char *w, const char *what) {
    if (!is_word(p, w))
        fail_at(p, p->tok.loc, "expected '%s' %s, found %s", w, what, tok_desc(p));
    next(p);
}

static bool accept_punct(parser *p, char c) {
    if (!is_punct(p, c))
        return false;
    next(p);
    return true;
}

/* Copies the current token's text (a number) into buf; false when it is too long. */
static bool tok_text(parser *p, char *buf, size_t size) {
    if (p->tok.len + 1 > size)
        return false;
    memcpy(buf, p->tok.s, p->tok.len);
    buf[p->tok.len] = 0;
    return true;
}

static uint32_t parse_u32(parser *p, const char *what) {
    char buf[MAX_NUMBER];
    if (p->tok.kind != TK_NUMBER || !tok_text(p, buf, sizeof buf))
        fail_at(p, p->tok.loc, "expected %s, found %s", what, tok_desc(p));
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (*end || errno || !is_digit(buf[0]) || v > UINT32_MAX)
        fail_at(p, p->tok.loc, "expected %s, found %s", what, tok_desc(p));
    next(p);
    return (uint32_t)v;
}

/* type := IDENT (a scalar or array type name) */
static const kern_type *parse_type(parser *p) {
    if (p->tok.kind != TK_IDENT)
        fail_at(p, p->tok.loc, "expected a type, found %s", tok_desc(p));
    const kern_type *t = ty_parse(p->tok.s, (int)p->tok.len);
    if (!t)
        fail_at(p, p->tok.loc, "unknown type %s", tok_desc(p));
    next(p);
    return t;
}

/* loc := '!' NUMBER ':' NUMBER */
static kern_loc parse_opt_loc(parser *p) {
    kern_loc loc = {0, 0};
    if (accept_punct(p, '!')) {
        loc.line = parse_u32(p, "a line number after '!'");
        expect_punct(p, ':', "between line and column");
        loc.col = parse_u32(p, "a column number");
    }
    return loc;
}

/* ---- Names ------------------------------------------------------------------------ */

static uint32_t hash_name(const char *s, uint32_t len) {
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static void syms_reset(parser *p) {
    p->cap = 64;
    p->nsyms = 0;
    p->syms = ARENA_ARRAY(&p->scratch, sym *, p->cap);
}

static sym *sym_get(parser *p, const char *name, uint32_t len) {
    if (2 * (p->nsyms + 1) > p->cap) {
        sym **old = p->syms;
        uint32_t old_cap = p->cap;
        p->cap *= 2;
        p->syms = ARENA_ARRAY(&p->scratch, sym *, p->cap);
        for (uint32_t i = 0; i < old_cap; i++) {
            if (!old[i])
                continue;
            uint32_t j = hash_name(old[i]->name, old[i]->len) & (p->cap - 1);
            while (p->syms[j])
                j = (j + 1) & (p->cap - 1);
            p->syms[j] = old[i];
        }
    }
    uint32_t mask = p->cap - 1;
    uint32_t i = hash_name(name, len) & mask;
    for (; p->syms[i]; i = (i + 1) & mask)
        if (p->syms[i]->len == len && memcmp(p->syms[i]->name, name, len) == 0)
            return p->syms[i];
    sym *s = ARENA_NEW(&p->scratch, sym);
    s->name = name;
    s->len = len;
    p->syms[i] = s;
    p->nsyms++;
    return s;
}

static void define(parser *p, const token *t, ir_value *v, ir_op *group) {
    if (t->has_index)
        fail_at(p, t->loc, "a definition cannot carry '#%u'", t->index);
    sym *s = sym_get(p, t->s, t->len);
    if (s->defined)
        fail_at(p, t->loc, "redefinition of %%%.*s (first defined at %u:%u)", (int)t->len, t->s,
                s->where.line, s->where.col);
    s->defined = true;
    s->val = v;
    s->group = group;
    s->where = t->loc;
    if (v && !v->name && !is_digit(t->s[0]))
        v->name = arena_strndup(&p->m->mem, t->s, t->len);
}

/* The value a use of a defined name denotes; NULL after reporting a mismatch of '#i'. */
static ir_value *resolve(parser *p, sym *s, bool has_index, uint32_t index, kern_loc loc) {
    if (s->group) {
        if (!has_index) {
            report(p, loc, "%%%.*s names %u results: write %%%.*s#0 .. #%u", (int)s->len, s->name,
                   s->group->nresults, (int)s->len, s->name, s->group->nresults - 1);
            return NULL;
        }
        if (index >= s->group->nresults) {
            report(p, loc, "%%%.*s#%u: the op has only %u results", (int)s->len, s->name, index,
                   s->group->nresults);
            return NULL;
        }
        return s->group->results[index];
    }
    if (has_index) {
        report(p, loc, "%%%.*s is a single value: '#%u' applies to ops with several results",
               (int)s->len, s->name, index);
        return NULL;
    }
    return s->val;
}

/* use := VALUE */
static ir_value *parse_use(parser *p) {
    if (p->tok.kind != TK_VALUE)
        fail_at(p, p->tok.loc, "expected a value, found %s", tok_desc(p));
    token t = p->tok;
    sym *s = sym_get(p, t.s, t.len);
    ir_value *v;
    if (s->defined) {
        v = resolve(p, s, t.has_index, t.index, t.loc);
        if (!v)
            longjmp(p->fail, 1);
    } else {
        fwd *f = ARENA_NEW(&p->scratch, fwd);
        f->s = s;
        f->has_index = t.has_index;
        f->index = t.index;
        f->loc = t.loc;
        v = &f->v;
    }
    next(p);
    return v;
}

static bool is_placeholder(const ir_value *v) { return v && !v->def && !v->region; }

/* Patches the placeholders of a finished kernel; reports every undefined name. */
static void patch_region(parser *p, ir_region *r) {
    ir_foreach_op(op, r) {
        for (uint32_t i = 0; i < op->noperands; i++) {
            ir_value *v = op->operands[i];
            if (!is_placeholder(v))
                continue;
            fwd *f = (fwd *)v;
            ir_value *to = NULL;
            if (!f->s->defined) {
                report(p, f->loc, "use of undefined value %%%.*s", (int)f->s->len, f->s->name);
                p->undefined++;
            } else if (!(to = resolve(p, f->s, f->has_index, f->index, f->loc))) {
                p->undefined++;
            }
            op->operands[i] = to ? to : v;
        }
        for (uint32_t i = 0; i < op->nregions; i++)
            patch_region(p, op->regions[i]);
    }
}

/* ---- Lists in the scratch arena --------------------------------------------------- */

typedef struct vlist {
    ir_value **v;
    uint32_t n, cap;
} vlist;

static void vl_push(parser *p, vlist *l, ir_value *v) {
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 8;
        ir_value **nv = ARENA_ARRAY(&p->scratch, ir_value *, cap);
        if (l->n)
            memcpy(nv, l->v, sizeof(ir_value *) * l->n);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

/* A region argument as written: its name and an optional type. */
typedef struct argdecl {
    token name;
    const kern_type *type; /* NULL: derive it */
} argdecl;

/* arg := VALUE [':' type] */
static argdecl parse_argdecl(parser *p) {
    argdecl a = {.name = p->tok, .type = NULL};
    if (p->tok.kind != TK_VALUE)
        fail_at(p, p->tok.loc, "expected a region argument, found %s", tok_desc(p));
    next(p);
    if (accept_punct(p, ':'))
        a.type = parse_type(p);
    return a;
}

/* Adds a region argument typed as written, or like `from` (an operand). */
static void add_arg(parser *p, ir_region *r, const argdecl *a, const ir_value *from) {
    const kern_type *t = a->type;
    if (!t) {
        if (!from || is_placeholder(from) || !from->type)
            fail_at(p, a->name.loc,
                    "cannot tell the type of %%%.*s: the value it starts from is not defined "
                    "yet; write '%%%.*s: TYPE'",
                    (int)a->name.len, a->name.s, (int)a->name.len, a->name.s);
        t = from->type;
    }
    ir_value *v = ir_region_add_arg(p->m, r, t);
    define(p, &a->name, v, NULL);
}

/* ---- Constants -------------------------------------------------------------------- */

/* A literal kept until the result type is known. */
typedef struct literal {
    token tok;
    bool is_nan_bits;
    uint64_t nan_bits;
} literal;

/* literal := NUMBER | 'true' | 'false' | 'inf' | 'nan' | 'nan' '(' NUMBER ')' */
static literal parse_literal(parser *p) {
    literal l = {.tok = p->tok};
    if (p->tok.kind == TK_NUMBER) {
        next(p);
    } else if (is_word(p, "true") || is_word(p, "false") || is_word(p, "inf")) {
        next(p);
    } else if (is_word(p, "nan")) {
        next(p);
        if (is_punct(p, '(') && p->tok.loc.line == l.tok.loc.line &&
            p->tok.loc.col == l.tok.loc.col + 3) {
            next(p);
            char buf[MAX_NUMBER];
            char *end;
            if (p->tok.kind != TK_NUMBER || !tok_text(p, buf, sizeof buf) || buf[0] != '0' ||
                (buf[1] != 'x' && buf[1] != 'X') || !buf[2])
                fail_at(p, p->tok.loc, "expected the NaN's bits as 0x..., found %s", tok_desc(p));
            errno = 0;
            l.nan_bits = strtoull(buf + 2, &end, 16);
            if (*end || errno || buf[2] == '-' || buf[2] == '+')
                fail_at(p, p->tok.loc, "bad NaN bits %s", tok_desc(p));
            l.is_nan_bits = true;
            next(p);
            expect_punct(p, ')', "after the NaN's bits");
        }
    } else {
        fail_at(p, p->tok.loc, "expected a constant, found %s", tok_desc(p));
    }
    return l;
}

static bool lit_is(const literal *l, const char *w) {
    return l->tok.kind == TK_IDENT && l->tok.len == strlen(w) &&
           memcmp(l->tok.s, w, l->tok.len) == 0;
}

/* Stores the literal in op->imm as a constant of type t (NULL: no result). */
static void set_const(parser *p, ir_op *op, const literal *l, const kern_type *t) {
    const token *tk = &l->tok;
    char buf[MAX_NUMBER];
    if (t && t->kind == TY_BOOL) {
        if (!lit_is(l, "true") && !lit_is(l, "false"))
            fail_at(p, tk->loc, "a bool constant is 'true' or 'false'");
        op->imm.i = lit_is(l, "true");
        return;
    }
    if (t && ty_is_float(t)) {
        bool f32 = t->kind == TY_F32;
        if (l->is_nan_bits) {
            if (f32) {
                uint32_t b = (uint32_t)l->nan_bits;
                float f;
                memcpy(&f, &b, sizeof f);
                if (l->nan_bits > UINT32_MAX || !isnan(f))
                    fail_at(p, tk->loc, "nan(0x%llx) is not the bit pattern of an f32 NaN",
                            (unsigned long long)l->nan_bits);
                op->imm.f = (double)f;
            } else {
                double d;
                memcpy(&d, &l->nan_bits, sizeof d);
                if (!isnan(d))
                    fail_at(p, tk->loc, "nan(0x%llx) is not the bit pattern of an f64 NaN",
                            (unsigned long long)l->nan_bits);
                op->imm.f = d;
            }
            return;
        }
        if (lit_is(l, "nan")) {
            op->imm.f = f32 ? (double)NAN : NAN;
            return;
        }
        if (lit_is(l, "inf")) {
            op->imm.f = INFINITY;
            return;
        }
        if (tk->kind != TK_NUMBER || tk->len + 1 > sizeof buf)
            fail_at(p, tk->loc, "expected a number for a %s constant", t->name);
        memcpy(buf, tk->s, tk->len);
        buf[tk->len] = 0;
        if (strcmp(buf, "-inf") == 0) {
            op->imm.f = -INFINITY;
            return;
        }
        if (strchr(buf, 'i') || strchr(buf, 'n') || strchr(buf, 'I') || strchr(buf, 'N'))
            fail_at(p, tk->loc, "bad number '%s'", buf);
        char *end;
        double d = f32 ? (double)strtof(buf, &end) : strtod(buf, &end);
        if (*end || end == buf)
            fail_at(p, tk->loc, "bad number '%s'", buf);
        if (isinf(d))
            fail_at(p, tk->loc, "%s is out of the range of %s", buf, t->name);
        op->imm.f = d;
        return;
    }
    /* integers, and constants without a scalar type (invalid IR, kept as an integer) */
    if (tk->kind != TK_NUMBER || tk->len + 1 > sizeof buf)
        fail_at(p, tk->loc, "expected an integer constant%s%s", t ? " of type " : "",
                t ? t->name : "");
    memcpy(buf, tk->s, tk->len);
    buf[tk->len] = 0;
    char *end;
    errno = 0;
    long long v;
    if (t && t->kind == TY_U64 && buf[0] != '-') /* printed unsigned (print.c) */
        v = (long long)strtoull(buf, &end, 10);
    else
        v = strtoll(buf, &end, 10);
    if (*end || end == buf || !(is_digit(buf[0]) || buf[0] == '-'))
        fail_at(p, tk->loc, "expected an integer constant, found '%s'", buf);
    bool fits = errno == 0 && !(t && t->kind == TY_U64 && buf[0] == '-');
    if (t && t->kind == TY_I32)
        fits = fits && v >= INT32_MIN && v <= INT32_MAX;
    else if (t && t->kind == TY_U32)
        fits = fits && v >= 0 && v <= (long long)UINT32_MAX;
    if (!fits)
        fail_at(p, tk->loc, "constant %s does not fit in %s", buf, t ? t->name : "i64");
    op->imm.i = v;
}

/* ---- Ops -------------------------------------------------------------------------- */

static void parse_region(parser *p, ir_region *r);

/* values := use (',' use)*  -- only when a value follows on the op's line */
static void parse_values_on_line(parser *p, vlist *l, uint32_t line) {
    if (p->tok.kind != TK_VALUE || p->tok.loc.line != line)
        return;
    vl_push(p, l, parse_use(p));
    while (accept_punct(p, ','))
        vl_push(p, l, parse_use(p));
}

/* index := '[' [use (',' use)*] ']' */
static void parse_index(parser *p, vlist *l) {
    expect_punct(p, '[', "before the indices");
    if (!is_punct(p, ']')) {
        vl_push(p, l, parse_use(p));
        while (accept_punct(p, ','))
            vl_push(p, l, parse_use(p));
    }
    expect_punct(p, ']', "after the indices");
}

/* The operand part of an op's header; declared region arguments go to args. */
typedef struct header {
    vlist ops;
    argdecl *args;
    uint32_t nargs, cap;
    literal lit;
    int64_t dim;
    bool early_exit;
} header;

static void push_arg(parser *p, header *h, argdecl a) {
    if (h->nargs == h->cap) {
        uint32_t cap = h->cap ? h->cap * 2 : 8;
        argdecl *na = ARENA_ARRAY(&p->scratch, argdecl, cap);
        if (h->nargs)
            memcpy(na, h->args, sizeof(argdecl) * h->nargs);
        h->args = na;
        h->cap = cap;
    }
    h->args[h->nargs++] = a;
}

/* for-header   := ['early_exit'] arg '=' use 'to' use ['iter' '(' arg '=' use (',' ...)* ')']
 * while-header := '(' [arg '=' use (',' arg '=' use)*] ')'
 * par-header   := '(' arg '=' use 'to' use (',' arg '=' use 'to' use)* ')' */
static void parse_header(parser *p, ir_opcode code, header *h, uint32_t line) {
    switch (code) {
    case IR_CONST:
        h->lit = parse_literal(p);
        while (accept_punct(p, ','))
            vl_push(p, &h->ops, parse_use(p));
        break;
    case IR_DIM:
        while (p->tok.kind == TK_VALUE) {
            vl_push(p, &h->ops, parse_use(p));
            expect_punct(p, ',', "before the dimension number");
        }
        h->dim = parse_u32(p, "a dimension number");
        break;
    case IR_ADPUSH:
    case IR_ADPOP:
        while (p->tok.kind == TK_VALUE) {
            vl_push(p, &h->ops, parse_use(p));
            expect_punct(p, ',', "before the adstack number");
        }
        h->dim = parse_u32(p, "an adstack number");
        break;
    case IR_CHECK:
        while (p->tok.kind == TK_VALUE) {
            vl_push(p, &h->ops, parse_use(p));
            expect_punct(p, ',', "before the error code");
        }
        h->dim = parse_u32(p, "an error code");
        break;
    case IR_LOAD:
        vl_push(p, &h->ops, parse_use(p));
        parse_index(p, &h->ops);
        break;
    case IR_STORE:
    case IR_ATOMIC_ADD:
    case IR_ATOMIC_SUB:
    case IR_ATOMIC_MIN:
    case IR_ATOMIC_MAX:
    case IR_ATOMIC_XCHG:
        vl_push(p, &h->ops, parse_use(p));
        parse_index(p, &h->ops);
        expect_punct(p, ',', "before the stored value");
        vl_push(p, &h->ops, parse_use(p));
        break;
    case IR_ATOMIC_CAS:
        vl_push(p, &h->ops, parse_use(p));
        parse_index(p, &h->ops);
        expect_punct(p, ',', "before the expected value");
        vl_push(p, &h->ops, parse_use(p));
        expect_punct(p, ',', "before the desired value");
        vl_push(p, &h->ops, parse_use(p));
        break;
    case IR_FOR:
        if (is_word(p, "early_exit")) {
            h->early_exit = true;
            next(p);
        }
        push_arg(p, h, parse_argdecl(p));
        expect_punct(p, '=', "after the loop index");
        vl_push(p, &h->ops, parse_use(p));
        expect_word(p, "to", "between the loop bounds");
        vl_push(p, &h->ops, parse_use(p));
        if (is_word(p, "iter")) {
            next(p);
            expect_punct(p, '(', "after 'iter'");
            do {
                push_arg(p, h, parse_argdecl(p));
                expect_punct(p, '=', "after a carried value");
                vl_push(p, &h->ops, parse_use(p));
            } while (accept_punct(p, ','));
            expect_punct(p, ')', "after the carried values");
        }
        break;
    case IR_WHILE:
        expect_punct(p, '(', "after 'while'");
        if (!is_punct(p, ')')) {
            do {
                push_arg(p, h, parse_argdecl(p));
                expect_punct(p, '=', "after a carried value");
                vl_push(p, &h->ops, parse_use(p));
            } while (accept_punct(p, ','));
        }
        expect_punct(p, ')', "after the carried values");
        break;
    case IR_PARALLEL:
        expect_punct(p, '(', "after 'parallel'");
        do {
            push_arg(p, h, parse_argdecl(p));
            expect_punct(p, '=', "after the index");
            vl_push(p, &h->ops, parse_use(p));
            expect_word(p, "to", "between the bounds");
            vl_push(p, &h->ops, parse_use(p));
        } while (accept_punct(p, ','));
        expect_punct(p, ')', "after the ranges");
        break;
    default: parse_values_on_line(p, &h->ops, line); break;
    }
}

static uint32_t regions_of(ir_opcode code) {
    switch (code) {
    case IR_IF:
    case IR_WHILE:
    case IR_CUSTOM: return 2;
    case IR_FOR:
    case IR_PARALLEL:
    case IR_SERIAL: return 1;
    default: return 0;
    }
}

/* block := '{' op* '}' */
static void parse_block(parser *p, ir_region *r) {
    expect_punct(p, '{', "to open a region");
    if (++p->depth > MAX_DEPTH)
        fail_at(p, p->tok.loc, "regions nested more than %d deep", MAX_DEPTH);
    parse_region(p, r);
    p->depth--;
    expect_punct(p, '}', "to close the region");
}

/* The arguments of a custom op's region i, typed as written or like `from` (the operands,
 * the results, then the results again for their adjoints):
 *   '(' [arg (',' arg)*] ')' */
static void parse_custom_args(parser *p, ir_op *op, uint32_t ri) {
    expect_punct(p, '(', "before the region's arguments");
    uint32_t i = 0, n = op->noperands, m = op->nresults;
    if (!is_punct(p, ')')) {
        do {
            argdecl a = parse_argdecl(p);
            const ir_value *from = i < n                      ? op->operands[i]
                                   : ri == 1 && i < n + 2 * m ? op->results[(i - n) % (m ? m : 1)]
                                                              : NULL;
            add_arg(p, op->regions[ri], &a, from);
            i++;
        } while (accept_punct(p, ','));
    }
    expect_punct(p, ')', "after the region's arguments");
}

/* custom-regions := 'primal' args block 'adjoint' args block */
static void parse_custom_regions(parser *p, ir_op *op) {
    expect_word(p, "primal", "after a 'custom' op's results");
    parse_custom_args(p, op, 0);
    parse_block(p, op->regions[0]);
    expect_word(p, "adjoint", "after the primal region");
    parse_custom_args(p, op, 1);
    parse_block(p, op->regions[1]);
}

/* op := [VALUE [':' NUMBER] '='] IDENT header [':' type (',' type)*] [loc] regions */
static void parse_op(parser *p, ir_region *r) {
    token lhs = {0};
    uint32_t nres = 0;
    if (p->tok.kind == TK_VALUE) {
        lhs = p->tok;
        nres = 1;
        next(p);
        if (accept_punct(p, ':')) {
            kern_loc at = p->tok.loc;
            nres = parse_u32(p, "the number of results");
            if (nres < 2)
                fail_at(p, at, "a result group %%N:K needs K >= 2 (write %%N for one result)");
            if (nres > 4096)
                fail_at(p, at, "too many results");
        }
        expect_punct(p, '=', "after the results");
    }
    if (p->tok.kind != TK_IDENT)
        fail_at(p, p->tok.loc, "expected an op, found %s", tok_desc(p));
    token name = p->tok;
    ir_opcode code = ir_opcode_lookup(name.s, (int)name.len);
    if (code == IR__COUNT && is_word(p, "adstack"))
        fail_at(p, name.loc,
                "an adstack line stands at the start of a kernel body, before its ops");
    if (code == IR__COUNT)
        fail_at(p, name.loc, "unknown op '%.*s'", (int)(name.len > 40 ? 40 : name.len), name.s);
    next(p);

    header h = {0};
    parse_header(p, code, &h, name.loc.line);

    const kern_type **types = ARENA_ARRAY(&p->scratch, const kern_type *, nres);
    uint32_t ntypes = 0;
    if (accept_punct(p, ':')) {
        do {
            kern_loc at = p->tok.loc;
            const kern_type *t = parse_type(p);
            if (ntypes == nres)
                fail_at(p, at, "'%s' has %u result%s but more types are written",
                        ir_info(code)->name, nres, nres == 1 ? "" : "s");
            types[ntypes++] = t;
        } while (accept_punct(p, ','));
    }
    if (ntypes != nres)
        fail_at(p, name.loc, "'%s' has %u result%s but %u type%s written", ir_info(code)->name,
                nres, nres == 1 ? "" : "s", ntypes, ntypes == 1 ? " is" : "s are");
    kern_loc loc = parse_opt_loc(p);

    uint32_t nregions = regions_of(code);
    ir_op *op = ir_op_new(p->m, code, loc, h.ops.v, h.ops.n, types, nres, nregions);
    ir_append(r, op);
    if (code == IR_CONST)
        set_const(p, op, &h.lit, nres ? types[0] : NULL);
    if (code == IR_DIM || code == IR_ADPUSH || code == IR_ADPOP || code == IR_CHECK)
        op->imm.i = h.dim;
    if (h.early_exit)
        op->attr |= IR_FOR_EARLY_EXIT;

    /* region arguments, typed as written or like the operand they start from */
    switch (code) {
    case IR_FOR:
        for (uint32_t i = 0; i < h.nargs; i++)
            add_arg(p, op->regions[0], &h.args[i], op->operands[i == 0 ? 0 : i + 1]);
        break;
    case IR_WHILE:
        for (uint32_t i = 0; i < h.nargs; i++)
            add_arg(p, op->regions[0], &h.args[i], op->operands[i]);
        break;
    case IR_PARALLEL:
        for (uint32_t i = 0; i < h.nargs; i++)
            add_arg(p, op->regions[0], &h.args[i], op->operands[2 * i]);
        break;
    default: break;
    }

    if (code == IR_CUSTOM) {
        parse_custom_regions(p, op);
    } else if (nregions) {
        parse_block(p, op->regions[0]);
        if (code == IR_IF) {
            expect_word(p, "else", "after the then-region");
            parse_block(p, op->regions[1]);
        } else if (code == IR_WHILE) {
            expect_word(p, "do", "after the before-region");
            expect_punct(p, '(', "before the after-region's arguments");
            uint32_t i = 0;
            if (!is_punct(p, ')')) {
                do {
                    argdecl a = parse_argdecl(p);
                    add_arg(p, op->regions[1], &a, i < nres ? op->results[i] : NULL);
                    i++;
                } while (accept_punct(p, ','));
            }
            expect_punct(p, ')', "after the after-region's arguments");
            parse_block(p, op->regions[1]);
        }
    }
    if (p->tok.kind != TK_EOF && p->tok.loc.line == p->prev_line && !is_punct(p, '}'))
        fail_at(p, p->tok.loc, "expected the end of the line after '%s', found %s",
                ir_info(code)->name, tok_desc(p));
    if (lhs.kind == TK_VALUE)
        define(p, &lhs, nres == 1 ? op->results[0] : NULL, nres >= 2 ? op : NULL);
}

/* region := op* (up to the closing '}') */
static void parse_region(parser *p, ir_region *r) {
    while (!is_punct(p, '}')) {
        if (p->tok.kind == TK_EOF)
            fail_at(p, p->tok.loc, "expected '}' before the end of input");
        parse_op(p, r);
    }
}

/* ---- Kernels and modules ---------------------------------------------------------- */

/* param := ['nograd'] VALUE ':' type */
static ir_param parse_param(parser *p, token *name) {
    ir_param pa = {0};
    if (is_word(p, "nograd")) {
        pa.nograd = true;
        next(p);
    }
    if (p->tok.kind != TK_VALUE)
        fail_at(p, p->tok.loc, "expected a parameter, found %s", tok_desc(p));
    *name = p->tok;
    if (name->has_index || !ir_is_plain_name(name->s, name->len))
        fail_at(p, name->loc, "a parameter name starts with a letter, '_' or '.' (not %s)",
                tok_desc(p));
    pa.loc = name->loc;
    pa.name = arena_strndup(&p->scratch, name->s, name->len);
    next(p);
    expect_punct(p, ':', "after the parameter name");
    pa.type = parse_type(p);
    return pa;
}

/* adstack := 'adstack' type STRING [loc]
 * The string is the capacity's SizeExpr text (common/sizeexpr.h), parsed into a tree. */
static void parse_adstack(parser *p, ir_kernel *k) {
    next(p); /* 'adstack' */
    kern_loc tloc = p->tok.loc;
    const kern_type *t = parse_type(p);
    if (!ty_is_scalar(t))
        fail_at(p, tloc, "an adstack holds a scalar type, not %s", t->name);
    if (p->tok.kind != TK_STRING)
        fail_at(p, p->tok.loc, "expected the adstack's capacity as a string, found %s",
                tok_desc(p));
    char msg[256];
    const sz_expr *cap = sz_parse(&p->scratch, p->tok.s, p->tok.len, msg, sizeof msg);
    if (!cap)
        fail_at(p, p->tok.loc, "bad adstack capacity: %s", msg);
    next(p);
    kern_loc loc = parse_opt_loc(p);
    if (p->tok.kind != TK_EOF && p->tok.loc.line == p->prev_line && !is_punct(p, '}'))
        fail_at(p, p->tok.loc, "expected the end of the line after 'adstack', found %s",
                tok_desc(p));
    ir_kernel_add_adstack(k, t, cap, loc);
}

/* body := '{' adstack* op* '}' */
static void parse_body(parser *p, ir_kernel *k) {
    expect_punct(p, '{', "to open a region");
    p->depth = 1;
    while (is_word(p, "adstack"))
        parse_adstack(p, k);
    parse_region(p, k->body);
    p->depth = 0;
    expect_punct(p, '}', "to close the region");
}

/* kernel := 'kernel' GLOBAL '(' [param (',' param)*] ')' [loc] body */
static void parse_kernel(parser *p) {
    expect_word(p, "kernel", "to start a kernel");
    if (p->tok.kind != TK_GLOBAL)
        fail_at(p, p->tok.loc, "expected the kernel's @name, found %s", tok_desc(p));
    const char *kname = arena_strndup(&p->scratch, p->tok.s, p->tok.len);
    if (strlen(kname) != p->tok.len)
        fail_at(p, p->tok.loc, "a kernel name cannot hold a NUL byte");
    next(p);
    expect_punct(p, '(', "before the parameters");
    ir_param *params = NULL;
    token *names = NULL;
    uint32_t n = 0, cap = 0;
    if (!is_punct(p, ')')) {
        do {
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                ir_param *np = ARENA_ARRAY(&p->scratch, ir_param, cap);
                token *nn = ARENA_ARRAY(&p->scratch, token, cap);
                if (n) {
                    memcpy(np, params, sizeof(ir_param) * n);
                    memcpy(nn, names, sizeof(token) * n);
                }
                params = np;
                names = nn;
            }
            params[n] = parse_param(p, &names[n]);
            n++;
        } while (accept_punct(p, ','));
    }
    expect_punct(p, ')', "after the parameters");
    kern_loc loc = parse_opt_loc(p);
    ir_kernel *k = ir_kernel_new(p->m, kname, loc, params, n);
    syms_reset(p);
    for (uint32_t i = 0; i < n; i++)
        define(p, &names[i], k->body->args[i], NULL);
    parse_body(p, k);
    p->undefined = 0;
    patch_region(p, k->body);
    if (p->undefined)
        longjmp(p->fail, 1);
}

/* module := ['source' STRING] kernel* */
static void parse_module(parser *p) {
    next(p);
    const char *path = NULL;
    if (is_word(p, "source")) {
        next(p);
        if (p->tok.kind != TK_STRING)
            fail_at(p, p->tok.loc, "expected the source path as a string, found %s", tok_desc(p));
        path = p->tok.s;
        if (strlen(path) != p->tok.len)
            fail_at(p, p->tok.loc, "a source path cannot hold a NUL byte");
        next(p);
    }
    p->m = ir_module_new(path);
    while (p->tok.kind != TK_EOF)
        parse_kernel(p);
}

ir_module *ir_parse(const char *text, size_t len, const kern_source *src, diag_sink *sink) {
    parser *p = kern_xmalloc(sizeof *p);
    memset(p, 0, sizeof *p);
    p->text = text ? text : "";
    p->len = text ? len : 0;
    p->line = p->col = 1;
    p->src = src;
    p->sink = sink;
    arena_init(&p->scratch);
    ir_module *m = NULL;
    if (setjmp(p->fail) == 0) {
        parse_module(p);
        m = p->m;
    } else {
        ir_module_free(p->m);
    }
    arena_free(&p->scratch);
    free(p);
    return m;
}
