/* parser.c - recursive-descent parser: tokens to the AST of ast.h (fe_parse).
 *
 * One function per grammar rule, with the rule above it (docs/reference.md sections 4-6).
 * The lexer runs on demand, one token ahead at most, so lexer and parser diagnostics
 * arrive in source order.
 *
 * Errors and recovery (panic mode). The first error about a token sets `panic`; while it
 * is set, further errors are not reported and the parse functions only consume tokens
 * that fit, so they unwind quickly. The statement, block, parameter and item loops then
 * resynchronize: skip to a `;` (consumed), a `}`, a statement or item keyword, or past a
 * balanced `{...}`, and clear `panic`. Errors that do not desynchronize the parser (an
 * invalid assignment target, a rank-5 array type) are reported without panic. Tokens the
 * lexer already reported (TK_ERROR, the end of a file cut short by an unterminated
 * comment) never cause a second message.
 *
 * Limits that keep every consumer's recursion bounded on any input: 200 levels of
 * parser recursion (parentheses, unary operators, calls, blocks), 1000 levels in an
 * expression tree (long operator chains), 1000 branches in an else-if chain.
 *
 * On errors the tree is still complete in shape: a missing expression is (int 0), a
 * missing name "<missing>", a missing type f32, a missing block an empty block. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"
#include "ast.h"
#include "lexer.h"

enum {
    MAX_NEST = 200,    /* parser recursion: nested parentheses, unary operators, blocks */
    MAX_HEIGHT = 1000, /* depth of an expression tree */
    MAX_ELSE_IF = 1000,
};

typedef struct parser {
    kc_ctx *ctx;
    const kern_source *src;
    fe_lexer lx;
    fe_token tok;   /* the current token */
    bool panic;     /* an error was reported and the parser has not resynchronized yet */
    int expr_nest;  /* expression recursion depth */
    int block_nest; /* block recursion depth */
    int h;          /* height of the expression tree the last parse function returned */
} parser;

#define MISSING "<missing>"

/* ---- Tokens ----------------------------------------------------------------------- */

static void advance(parser *p) { p->tok = fe_lex_next(&p->lx); }
static bool at(const parser *p, fe_tok_kind k) { return p->tok.kind == k; }

static bool accept(parser *p, fe_tok_kind k) {
    if (!at(p, k))
        return false;
    advance(p);
    return true;
}

static bool is_item_kw(fe_tok_kind k) {
    return k == TK_CONST || k == TK_FUNC || k == TK_KERNEL || k == TK_STRUCT;
}
static bool is_type_kw(fe_tok_kind k) { return k >= TK_BOOL && k <= TK_BF16; }

static bool is_stmt_kw(fe_tok_kind k) {
    switch (k) {
    case TK_LET: case TK_VAR: case TK_IF: case TK_FOR: case TK_WHILE:
    case TK_BREAK: case TK_CONTINUE: case TK_RETURN:
        return true;
    default:
        return false;
    }
}

static bool starts_expr(fe_tok_kind k) {
    switch (k) {
    case TK_IDENT: case TK_INT: case TK_FLOAT: case TK_TRUE: case TK_FALSE:
    case TK_LPAREN: case TK_MINUS: case TK_PLUS: case TK_BANG: case TK_TILDE: case TK_VTYPE:
    case TK_LBRACKET:
        return true;
    default:
        return is_type_kw(k);
    }
}

/* The current token for a message: 'text' (clipped) or "end of file". */
static const char *found(parser *p) {
    if (at(p, TK_EOF))
        return "end of file";
    if (p->tok.len > 32)
        return arena_printf(&p->ctx->mem, "'%.32s...'", p->tok.text);
    return arena_printf(&p->ctx->mem, "'%.*s'", (int)p->tok.len, p->tok.text);
}

static const char *tok_str(parser *p) {
    return arena_strndup(&p->ctx->mem, p->tok.text, p->tok.len);
}

/* ---- Errors ----------------------------------------------------------------------- */

/* An error about the current token: reported unless in panic or already reported by the
 * lexer; enters panic. */
static void syntax_error(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void syntax_error(parser *p, const char *fmt, ...) {
    bool quiet = p->panic || at(p, TK_ERROR) || (at(p, TK_EOF) && p->lx.truncated);
    p->panic = true;
    if (quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    diag_vreport(&p->ctx->diags, DIAG_ERROR, p->src, p->tok.loc, fmt, ap);
    va_end(ap);
}

/* An error that does not desynchronize the parser. */
static void report(parser *p, kern_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report(parser *p, kern_loc loc, const char *fmt, ...) {
    if (p->panic)
        return;
    va_list ap;
    va_start(ap, fmt);
    diag_vreport(&p->ctx->diags, DIAG_ERROR, p->src, loc, fmt, ap);
    va_end(ap);
}

/* Consumes a k or reports "expected 'k' WHAT, found ...". In panic it consumes nothing,
 * so that a ';' or '}' is left for the resynchronization that follows. */
static bool expect(parser *p, fe_tok_kind k, const char *what) {
    if (!p->panic && accept(p, k))
        return true;
    syntax_error(p, "expected '%s' %s, found %s", fe_tok_name(k), what, found(p));
    return false;
}

/* Skips a balanced {...} starting at the current '{' (iterative: any depth is fine).
 * Leaves panic on when the end of the file came first. */
static void skip_braces(parser *p) {
    int depth = 0;
    do {
        if (at(p, TK_LBRACE))
            depth++;
        else if (at(p, TK_RBRACE))
            depth--;
        advance(p);
    } while (depth > 0 && !at(p, TK_EOF));
    p->panic = depth > 0;
}

/* Resynchronizes after an error inside a statement. */
static void sync_stmt(parser *p) {
    for (;;) {
        fe_tok_kind k = p->tok.kind;
        if (k == TK_EOF)
            return; /* stay in panic: nothing after this point is worth reporting */
        if (k == TK_SEMI) {
            advance(p);
            break;
        }
        if (k == TK_LBRACE) {
            skip_braces(p);
            return;
        }
        if (k == TK_RBRACE || is_stmt_kw(k) || is_item_kw(k))
            break;
        advance(p);
    }
    p->panic = false;
}

/* After an error in the header of if/for/while or of a func/kernel: skip to the body's
 * '{' (or give up at a '}' or an item keyword) so that the body is still parsed. */
static void sync_header(parser *p) {
    if (!p->panic)
        return;
    while (!at(p, TK_LBRACE) && !at(p, TK_RBRACE) && !at(p, TK_EOF) && !is_item_kw(p->tok.kind))
        advance(p);
    if (at(p, TK_LBRACE))
        p->panic = false;
}

/* ---- Nodes ------------------------------------------------------------------------ */

static fe_expr *new_expr(parser *p, fe_expr_kind k, kern_loc loc) {
    fe_expr *e = ARENA_NEW(&p->ctx->mem, fe_expr);
    e->kind = k;
    e->loc = loc;
    return e;
}

/* The placeholder for a missing expression. */
static fe_expr *error_expr(parser *p) {
    p->h = 1;
    return new_expr(p, EX_INT, p->tok.loc);
}

static fe_stmt *new_stmt(parser *p, fe_stmt_kind k, kern_loc loc) {
    fe_stmt *s = ARENA_NEW(&p->ctx->mem, fe_stmt);
    s->kind = k;
    s->loc = loc;
    return s;
}

/* Moves a pointer vector into the arena (NULL when empty) and frees the vector. */
static void **to_arena(parser *p, kern_ptrvec *v, int *n) {
    *n = v->len;
    void **a = NULL;
    if (v->len) {
        a = ARENA_ARRAY(&p->ctx->mem, void *, v->len);
        memcpy(a, v->data, sizeof(void *) * (size_t)v->len);
    }
    ptrvec_free(v);
    return a;
}

/* The location of an expression's first token (binary and ?: nodes carry the operator's). */
static kern_loc start_loc(const fe_expr *e) {
    while (e->kind == EX_BINARY || e->kind == EX_COND)
        e = e->kind == EX_BINARY ? e->binary.lhs : e->cond.cond;
    return e->loc;
}

/* Sets the height of the new node e from its children's; false (reported at e) when too
 * high. */
static bool set_height(parser *p, const fe_expr *e, int child_max) {
    p->h = child_max + 1;
    if (p->h <= MAX_HEIGHT)
        return true;
    if (!p->panic)
        kc_error(p->ctx, p->src, e->loc, "expression too complex (more than %d levels of operators)",
                 MAX_HEIGHT);
    p->panic = true;
    return false;
}

/* ---- Types ------------------------------------------------------------------------ */

/* type   := base | base '[' ','* ']' | base '[' expr (',' expr)* ']'
 * base   := scalar | vector_or_matrix_type | IDENT        -- IDENT: a struct
 * scalar := 'f32' | 'f64' | 'i32' | 'u32' | 'i64' | 'bool'
 * `T[]`, `T[,]`: an array parameter; `T[16]`, `T[4, 4]`: a local array of constant extents
 * (sema checks where each may appear). A struct name is a TY_NAMED placeholder and the
 * extents of a local array stay expressions (TY_LOCAL with `pending`) until sema resolves
 * them. Array types are parsed everywhere and rejected where only values are allowed. */
static fe_expr *parse_expr(parser *p);

static const kern_type *parse_type(parser *p, bool allow_array) {
    const kern_type *t = fe_tok_scalar(p->tok.kind);
    if (at(p, TK_VTYPE)) {
        t = ty_vector_named(p->tok.text, (int)p->tok.len);
    } else if (at(p, TK_IDENT)) {
        kern_type *named = ARENA_NEW(&p->ctx->mem, kern_type);
        named->kind = TY_NAMED;
        named->name = tok_str(p);
        t = named;
    } else if (!t) {
        syntax_error(p, "expected a type (f32, f64, i32, u32, i64, bool, a vector or matrix type "
                        "or a struct), found %s", found(p));
        return ty_f32();
    }
    advance(p);
    if (!at(p, TK_LBRACKET))
        return t;
    kern_loc open = p->tok.loc;
    advance(p);
    if (!at(p, TK_COMMA) && !at(p, TK_RBRACKET)) {
        /* a local array: T[n, ...] */
        kern_type *loc = ARENA_NEW(&p->ctx->mem, kern_type);
        fe_expr **dims = ARENA_ARRAY(&p->ctx->mem, fe_expr *, KERN_MAX_RANK);
        int rank = 0;
        do {
            fe_expr *d = parse_expr(p);
            if (rank < KERN_MAX_RANK)
                dims[rank] = d;
            rank++;
        } while (accept(p, TK_COMMA));
        if (!expect(p, TK_RBRACKET, "to close the extents of the local array type"))
            return t;
        if (rank > KERN_MAX_RANK) {
            report(p, open, "a local array has at most %d dimensions, found %d", KERN_MAX_RANK, rank);
            rank = KERN_MAX_RANK;
        }
        loc->kind = TY_LOCAL;
        loc->rank = (uint8_t)rank;
        loc->elem = t;
        loc->name = arena_printf(&p->ctx->mem, "%s[...]", t->name);
        loc->pending = dims;
        return loc;
    }
    int rank = 1;
    while (accept(p, TK_COMMA))
        rank++;
    if (!expect(p, TK_RBRACKET, "to close the array type (array types are written f32[], f32[,], ...)"))
        return t;
    if (rank > KERN_MAX_RANK) {
        report(p, open, "array rank %d is too large (the largest is %d)", rank, KERN_MAX_RANK);
        rank = KERN_MAX_RANK;
    }
    const kern_type *arr;
    if (t->kind == TY_NAMED) {
        kern_type *a = ARENA_NEW(&p->ctx->mem, kern_type);
        a->kind = TY_ARRAY;
        a->rank = (uint8_t)rank;
        a->elem = t;
        a->name = arena_printf(&p->ctx->mem, "%s[%.*s]", t->name, rank - 1, ",,,");
        arr = a;
    } else {
        arr = ty_array_of(t, rank);
    }
    if (!allow_array) {
        report(p, open, "array type '%s' is not allowed here; only parameters can be arrays", arr->name);
        return t;
    }
    return arr;
}

/* ---- Expressions ------------------------------------------------------------------ */

/* Enters one level of expression recursion; false (reported) when too deep. */
static bool enter_expr(parser *p) {
    if (p->expr_nest >= MAX_NEST) {
        syntax_error(p, "expression nested too deeply (more than %d levels)", MAX_NEST);
        return false;
    }
    p->expr_nest++;
    return true;
}

/* args := expr (',' expr)* ','?      (after the '('; consumes the ')')
 * Returns the height of the tallest argument. */
static int parse_args(parser *p, fe_expr ***args, int *nargs, const char *name) {
    kern_ptrvec v = {0};
    int hmax = 0;
    advance(p); /* ( */
    while (!at(p, TK_RPAREN)) {
        ptrvec_push(&v, parse_expr(p));
        if (p->h > hmax)
            hmax = p->h;
        if (!accept(p, TK_COMMA))
            break;
    }
    if (!accept(p, TK_RPAREN))
        syntax_error(p, "expected ',' or ')' in the call to '%s', found %s", name, found(p));
    *args = (fe_expr **)to_arena(p, &v, nargs);
    return hmax;
}

/* Whether the '{' after a name opens a struct literal: `Name { field: ...`. Looks at the
 * raw text after the '{' (an identifier, then ':'), skipping spaces and comments, so that
 * `if ok { x = 1; }` stays a block and no token is lexed twice. */
static bool struct_literal_follows(const parser *p) {
    const char *c = p->lx.p, *end = p->lx.end;
    int seen = 0; /* 0: before the name, 1: after it */
    while (c < end) {
        if (*c == ' ' || *c == '\t' || *c == '\n' || *c == '\r' || *c == '\f' || *c == '\v') {
            c++;
        } else if (c + 1 < end && c[0] == '/' && c[1] == '/') {
            while (c < end && *c != '\n' && *c != '\r')
                c++;
        } else if (c + 1 < end && c[0] == '/' && c[1] == '*') {
            const char *close = NULL;
            for (const char *q = c + 2; q + 1 < end; q++)
                if (q[0] == '*' && q[1] == '/') {
                    close = q;
                    break;
                }
            if (!close)
                return false;
            c = close + 2;
        } else if (seen == 0) {
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_'))
                return false;
            while (c < end && ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                               (*c >= '0' && *c <= '9') || *c == '_'))
                c++;
            seen = 1;
        } else {
            return *c == ':';
        }
    }
    return false;
}

/* struct_lit := IDENT '{' IDENT ':' expr (',' IDENT ':' expr)* ','? '}'   (at the '{') */
static fe_expr *parse_struct_literal(parser *p, const char *name, kern_loc loc) {
    fe_expr *e = new_expr(p, EX_STRUCTLIT, loc);
    e->slit.name = name;
    e->slit.name_loc = loc;
    kern_ptrvec names = {0}, values = {0}, locs = {0};
    int h = 0;
    advance(p); /* { */
    while (at(p, TK_IDENT)) {
        kern_loc *fl = ARENA_NEW(&p->ctx->mem, kern_loc);
        *fl = p->tok.loc;
        ptrvec_push(&names, (void *)tok_str(p));
        ptrvec_push(&locs, fl);
        advance(p);
        if (!expect(p, TK_COLON, "after the field name in a struct literal"))
            break;
        ptrvec_push(&values, parse_expr(p));
        if (p->h > h)
            h = p->h;
        if (!accept(p, TK_COMMA))
            break;
    }
    if (!p->panic && !accept(p, TK_RBRACE))
        syntax_error(p, "expected a field name or '}' in the literal of struct '%s', found %s",
                     name, found(p));
    int n = 0;
    e->slit.fields = (const char **)to_arena(p, &names, &n);
    e->slit.values = (fe_expr **)to_arena(p, &values, &e->slit.n);
    kern_loc **lp = (kern_loc **)to_arena(p, &locs, &n);
    if (e->slit.n > n)
        e->slit.n = n;
    e->slit.field_locs = ARENA_ARRAY(&p->ctx->mem, kern_loc, n ? n : 1);
    for (int i = 0; i < n; i++)
        e->slit.field_locs[i] = *lp[i];
    set_height(p, e, h);
    return e;
}

/* array_lit := '[' expr (',' expr)* ','? ']' */
static fe_expr *parse_array_literal(parser *p) {
    fe_expr *e = new_expr(p, EX_ARRAYLIT, p->tok.loc);
    kern_ptrvec v = {0};
    int h = 0;
    advance(p); /* [ */
    while (!at(p, TK_RBRACKET)) {
        ptrvec_push(&v, parse_expr(p));
        if (p->h > h)
            h = p->h;
        if (!accept(p, TK_COMMA))
            break;
    }
    if (!accept(p, TK_RBRACKET))
        syntax_error(p, "expected ',' or ']' in an array literal, found %s", found(p));
    e->alit.elems = (fe_expr **)to_arena(p, &v, &e->alit.n);
    if (e->alit.n == 0 && !p->panic)
        report(p, e->loc, "an array literal needs at least one element");
    set_height(p, e, h);
    return e;
}

/* primary := INT | FLOAT | 'true' | 'false' | IDENT | '(' expr ')'
 *          | IDENT '(' args? ')'                      -- call of a func or builtin
 *          | IDENT '[' expr (',' expr)* ']'           -- array element
 *          | scalar '(' expr ')'                      -- cast */
static fe_expr *parse_primary(parser *p) {
    fe_token t = p->tok;
    fe_expr *e;
    switch (t.kind) {
    case TK_INT:
        advance(p);
        e = new_expr(p, EX_INT, t.loc);
        e->ival = t.ival;
        p->h = 1;
        return e;
    case TK_FLOAT:
        advance(p);
        e = new_expr(p, EX_FLOAT, t.loc);
        e->flt.fval = t.fval;
        p->h = 1;
        return e;
    case TK_TRUE:
    case TK_FALSE:
        advance(p);
        e = new_expr(p, EX_BOOL, t.loc);
        e->ival = t.kind == TK_TRUE;
        p->h = 1;
        return e;
    case TK_LPAREN: {
        advance(p);
        e = parse_expr(p);
        int h = p->h;
        expect(p, TK_RPAREN, "to close '('");
        p->h = h;
        return e;
    }
    case TK_LBRACKET: return parse_array_literal(p);
    case TK_VTYPE: {
        e = new_expr(p, EX_CONSTRUCT, t.loc);
        e->cons.to = ty_vector_named(t.text, (int)t.len);
        advance(p);
        if (!at(p, TK_LPAREN)) {
            syntax_error(p, "expected '(' after type name '%s' (a value is written %s(...)), "
                            "found %s", e->cons.to->name, e->cons.to->name, found(p));
            return error_expr(p);
        }
        int h = parse_args(p, &e->cons.args, &e->cons.nargs, e->cons.to->name);
        set_height(p, e, h);
        return e;
    }
    case TK_IDENT: {
        const char *name = tok_str(p);
        advance(p);
        if (at(p, TK_LBRACE) && struct_literal_follows(p))
            return parse_struct_literal(p, name, t.loc);
        if (at(p, TK_LPAREN)) {
            e = new_expr(p, EX_CALL, t.loc);
            e->call.name = name;
            e->call.name_loc = t.loc;
            int h = parse_args(p, &e->call.args, &e->call.nargs, name);
            set_height(p, e, h);
            return e;
        }
        if (at(p, TK_LBRACKET)) {
            e = new_expr(p, EX_INDEX, t.loc);
            e->index.name = name;
            kern_ptrvec v = {0};
            int hmax = 0;
            advance(p);
            do {
                ptrvec_push(&v, parse_expr(p));
                if (p->h > hmax)
                    hmax = p->h;
            } while (accept(p, TK_COMMA));
            if (!accept(p, TK_RBRACKET))
                syntax_error(p, "expected ',' or ']' in the index of '%s', found %s", name, found(p));
            e->index.idx = (fe_expr **)to_arena(p, &v, &e->index.nidx);
            set_height(p, e, hmax);
            return e;
        }
        e = new_expr(p, EX_NAME, t.loc);
        e->name.name = name;
        p->h = 1;
        return e;
    }
    default:
        break;
    }
    if (is_type_kw(t.kind)) {
        const kern_type *to = fe_tok_scalar(t.kind);
        advance(p);
        e = new_expr(p, EX_CAST, t.loc);
        e->cast.to = to;
        if (!at(p, TK_LPAREN)) {
            syntax_error(p, "expected '(' after type name '%s' (a cast is written %s(x)), found %s",
                         to->name, to->name, found(p));
            e->cast.arg = error_expr(p);
            return e;
        }
        fe_expr **args;
        int nargs;
        int h = parse_args(p, &args, &nargs, to->name);
        if (nargs != 1)
            report(p, t.loc, "a cast to '%s' takes exactly one argument, found %d", to->name, nargs);
        e->cast.arg = nargs ? args[0] : error_expr(p);
        set_height(p, e, h);
        return e;
    }
    syntax_error(p, "expected expression, found %s", found(p));
    return error_expr(p);
}

/* postfix := primary ('.' IDENT | '[' expr (',' expr)* ']')*
 * Calls and the first indexing of a name are part of primary; what follows selects a
 * component, a row or a field of the value (v.x, m[i][j], ps[i].vel.x, f(x)[1]). */
static fe_expr *parse_postfix(parser *p) {
    fe_expr *e = parse_primary(p);
    if (p->panic || e->kind == EX_INT || e->kind == EX_FLOAT || e->kind == EX_BOOL)
        return e;
    int h = p->h;
    for (;;) {
        if (at(p, TK_DOT)) {
            fe_expr *m = new_expr(p, EX_MEMBER, p->tok.loc);
            advance(p);
            m->member.base = e;
            m->member.field_loc = p->tok.loc;
            if (!at(p, TK_IDENT)) {
                syntax_error(p, "expected a component or field name after '.', found %s", found(p));
                return e;
            }
            m->member.field = tok_str(p);
            advance(p);
            e = m;
        } else if (at(p, TK_LBRACKET)) {
            fe_expr *x = new_expr(p, EX_ELEM, p->tok.loc);
            x->elem.base = e;
            kern_ptrvec v = {0};
            advance(p);
            do {
                ptrvec_push(&v, parse_expr(p));
                if (p->h > h)
                    h = p->h;
            } while (accept(p, TK_COMMA));
            if (!accept(p, TK_RBRACKET))
                syntax_error(p, "expected ',' or ']' in an index, found %s", found(p));
            x->elem.idx = (fe_expr **)to_arena(p, &v, &x->elem.nidx);
            e = x;
        } else {
            break;
        }
        if (!set_height(p, e, h++))
            return e;
    }
    if (at(p, TK_LPAREN))
        syntax_error(p, "only a func or builtin name can be called, found '('");
    p->h = h;
    return e;
}

/* unary := ('-' | '!' | '~') unary | postfix */
static fe_expr *parse_unary(parser *p) {
    if (at(p, TK_ERROR)) {
        /* Already reported by the lexer: skip it, and if no operand follows, give up on
         * this statement without a second message. */
        while (at(p, TK_ERROR))
            advance(p);
        if (!starts_expr(p->tok.kind)) {
            p->panic = true;
            return error_expr(p);
        }
    }
    if (!enter_expr(p))
        return error_expr(p);
    fe_expr *e;
    fe_unop op;
    switch (p->tok.kind) {
    case TK_MINUS: op = UN_NEG; break;
    case TK_BANG: op = UN_NOT; break;
    case TK_TILDE: op = UN_BITNOT; break;
    case TK_PLUS: op = UN_PLUS; break;
    default:
        e = parse_postfix(p);
        p->expr_nest--;
        return e;
    }
    e = new_expr(p, EX_UNARY, p->tok.loc);
    e->unary.op = op;
    advance(p);
    e->unary.arg = parse_unary(p);
    set_height(p, e, p->h);
    p->expr_nest--;
    return e;
}

/* Binary precedence levels, lowest first (docs/reference.md section 6). */
enum { PREC_NONE, PREC_OR, PREC_AND, PREC_BITWISE, PREC_EQUALITY, PREC_RELATIONAL,
       PREC_SHIFT, PREC_ADDITIVE, PREC_MULTIPLICATIVE };

static int binop_prec(fe_tok_kind k, fe_binop *op) {
    switch (k) {
    case TK_OROR: *op = BIN_OR; return PREC_OR;
    case TK_ANDAND: *op = BIN_AND; return PREC_AND;
    case TK_PIPE: *op = BIN_BITOR; return PREC_BITWISE;
    case TK_CARET: *op = BIN_BITXOR; return PREC_BITWISE;
    case TK_AMP: *op = BIN_BITAND; return PREC_BITWISE;
    case TK_EQ: *op = BIN_EQ; return PREC_EQUALITY;
    case TK_NE: *op = BIN_NE; return PREC_EQUALITY;
    case TK_LT: *op = BIN_LT; return PREC_RELATIONAL;
    case TK_LE: *op = BIN_LE; return PREC_RELATIONAL;
    case TK_GT: *op = BIN_GT; return PREC_RELATIONAL;
    case TK_GE: *op = BIN_GE; return PREC_RELATIONAL;
    case TK_SHL: *op = BIN_SHL; return PREC_SHIFT;
    case TK_SHR: *op = BIN_SHR; return PREC_SHIFT;
    case TK_PLUS: *op = BIN_ADD; return PREC_ADDITIVE;
    case TK_MINUS: *op = BIN_SUB; return PREC_ADDITIVE;
    case TK_STAR: *op = BIN_MUL; return PREC_MULTIPLICATIVE;
    case TK_SLASH: *op = BIN_DIV; return PREC_MULTIPLICATIVE;
    case TK_PERCENT: *op = BIN_REM; return PREC_MULTIPLICATIVE;
    default: return PREC_NONE;
    }
}

/* One left-associative level: operand (OP operand)*, OP of precedence prec. */
static fe_expr *parse_level(parser *p, int prec, fe_expr *(*operand)(parser *)) {
    fe_expr *e = operand(p);
    int h = p->h;
    fe_binop op;
    while (!p->panic && binop_prec(p->tok.kind, &op) == prec) {
        fe_expr *b = new_expr(p, EX_BINARY, p->tok.loc);
        advance(p);
        b->binary.op = op;
        b->binary.lhs = e;
        b->binary.rhs = operand(p);
        e = b;
        if (!set_height(p, b, h > p->h ? h : p->h))
            break;
        h = p->h;
    }
    p->h = h;
    return e;
}

/* multiplicative := unary (('*' | '/' | '%') unary)* */
static fe_expr *parse_multiplicative(parser *p) { return parse_level(p, PREC_MULTIPLICATIVE, parse_unary); }
/* additive := multiplicative (('+' | '-') multiplicative)* */
static fe_expr *parse_additive(parser *p) { return parse_level(p, PREC_ADDITIVE, parse_multiplicative); }
/* shift := additive (('<<' | '>>') additive)* */
static fe_expr *parse_shift(parser *p) { return parse_level(p, PREC_SHIFT, parse_additive); }
/* relational := shift (('<' | '<=' | '>' | '>=') shift)* */
static fe_expr *parse_relational(parser *p) { return parse_level(p, PREC_RELATIONAL, parse_shift); }
/* equality := relational (('==' | '!=') relational)* */
static fe_expr *parse_equality(parser *p) { return parse_level(p, PREC_EQUALITY, parse_relational); }
/* bitwise := equality (('|' | '^' | '&') equality)*      -- one level, left to right */
static fe_expr *parse_bitwise(parser *p) { return parse_level(p, PREC_BITWISE, parse_equality); }
/* and := bitwise ('&&' bitwise)* */
static fe_expr *parse_and(parser *p) { return parse_level(p, PREC_AND, parse_bitwise); }
/* or := and ('||' and)* */
static fe_expr *parse_or(parser *p) { return parse_level(p, PREC_OR, parse_and); }

/* ternary := or ('?' expr ':' ternary)?      -- right-associative */
static fe_expr *parse_ternary(parser *p) {
    fe_expr *c = parse_or(p);
    if (!at(p, TK_QUESTION) || p->panic)
        return c;
    int h = p->h;
    if (!enter_expr(p))
        return c;
    fe_expr *e = new_expr(p, EX_COND, p->tok.loc);
    advance(p);
    e->cond.cond = c;
    e->cond.a = parse_expr(p);
    if (p->h > h)
        h = p->h;
    expect(p, TK_COLON, "after the first branch of '?'");
    e->cond.b = parse_ternary(p);
    if (p->h > h)
        h = p->h;
    p->expr_nest--;
    set_height(p, e, h);
    return e;
}

/* expr := ternary */
static fe_expr *parse_expr(parser *p) { return parse_ternary(p); }

/* ---- Statements ------------------------------------------------------------------- */

static fe_stmt *parse_stmt(parser *p);

/* block := '{' stmt* '}'
 * what completes "expected '{' ..., found X" when the '{' is missing. */
static fe_stmt *parse_block(parser *p, const char *what) {
    fe_stmt *b = new_stmt(p, ST_BLOCK, p->tok.loc);
    if (!at(p, TK_LBRACE)) {
        syntax_error(p, "expected '{' %s, found %s", what, found(p));
        return b;
    }
    kern_loc open = p->tok.loc;
    if (p->block_nest >= MAX_NEST) {
        syntax_error(p, "blocks nested too deeply (more than %d levels)", MAX_NEST);
        skip_braces(p);
        return b;
    }
    p->block_nest++;
    advance(p);
    kern_ptrvec v = {0};
    while (!at(p, TK_RBRACE) && !at(p, TK_EOF) && !is_item_kw(p->tok.kind)) {
        if (at(p, TK_ERROR)) { /* reported by the lexer */
            advance(p);
            continue;
        }
        fe_stmt *s = parse_stmt(p);
        if (s)
            ptrvec_push(&v, s);
        if (p->panic)
            sync_stmt(p);
    }
    if (!accept(p, TK_RBRACE))
        syntax_error(p, "expected '}' to close the block opened at %u:%u, found %s", open.line,
                     open.col, found(p));
    b->block.stmts = (fe_stmt **)to_arena(p, &v, &b->block.nstmts);
    p->block_nest--;
    return b;
}

/* decl := ('let' | 'var') IDENT (':' scalar)? '=' expr ';' */
static fe_stmt *parse_decl(parser *p) {
    fe_stmt *s = new_stmt(p, at(p, TK_LET) ? ST_LET : ST_VAR, p->tok.loc);
    const char *kw = fe_tok_name(p->tok.kind);
    advance(p);
    s->decl.name = MISSING;
    s->decl.name_loc = p->tok.loc;
    if (at(p, TK_IDENT)) {
        s->decl.name = tok_str(p);
        advance(p);
    } else {
        syntax_error(p, "expected a name after '%s', found %s", kw, found(p));
    }
    if (accept(p, TK_COLON))
        s->decl.declared = parse_type(p, false);
    if (s->kind == ST_VAR && s->decl.declared && at(p, TK_SEMI)) {
        advance(p); /* var a: f32[16];  zero-initialized (sema checks the type allows it) */
        return s;
    }
    if (!accept(p, TK_ASSIGN))
        syntax_error(p, "expected '=' in the declaration of '%s', found %s", s->decl.name, found(p));
    s->decl.init = parse_expr(p);
    expect(p, TK_SEMI, "after statement");
    return s;
}

/* if := 'if' expr block ('else' ('if' ... | block))?
 * An else-if chain is parsed in a loop: its length does not cost parser recursion. */
static fe_stmt *parse_if(parser *p) {
    fe_stmt *first = NULL, *last = NULL;
    int n = 0;
    for (;;) {
        fe_stmt *s = new_stmt(p, ST_IF, p->tok.loc);
        advance(p); /* if */
        s->if_.cond = parse_expr(p);
        sync_header(p);
        s->if_.then = parse_block(p, "after the 'if' condition");
        if (last)
            last->if_.els = s;
        else
            first = s;
        last = s;
        if (!accept(p, TK_ELSE))
            break;
        if (at(p, TK_IF)) {
            if (++n > MAX_ELSE_IF) {
                syntax_error(p, "too many 'else if' branches in one chain (more than %d)", MAX_ELSE_IF);
                break;
            }
            continue;
        }
        if (!at(p, TK_LBRACE)) {
            syntax_error(p, "expected '{' or 'if' after 'else', found %s", found(p));
            break;
        }
        last->if_.els = parse_block(p, "after 'else'");
        break;
    }
    return first;
}

/* for   := 'for' range (',' range)* block
 * range := IDENT 'in' expr '..' expr */
static fe_stmt *parse_for(parser *p) {
    fe_stmt *s = new_stmt(p, ST_FOR, p->tok.loc);
    advance(p);
    fe_range *ranges = NULL;
    int n = 0, cap = 0;
    do {
        if (n == cap) {
            cap = cap ? cap * 2 : 2;
            fe_range *grown = ARENA_ARRAY(&p->ctx->mem, fe_range, cap);
            if (n)
                memcpy(grown, ranges, sizeof(fe_range) * (size_t)n);
            ranges = grown;
        }
        fe_range *r = &ranges[n++];
        r->loc = p->tok.loc;
        r->var = MISSING;
        if (at(p, TK_IDENT)) {
            r->var = tok_str(p);
            advance(p);
        } else {
            syntax_error(p, "expected a loop variable name, found %s", found(p));
        }
        if (!accept(p, TK_IN))
            syntax_error(p, "expected 'in' after the loop variable '%s', found %s", r->var, found(p));
        r->lo = parse_expr(p);
        if (!accept(p, TK_DOTDOT))
            syntax_error(p, "expected '..' in the range of '%s', found %s", r->var, found(p));
        r->hi = parse_expr(p);
    } while (!p->panic && accept(p, TK_COMMA));
    s->for_.ranges = ranges;
    s->for_.nranges = n;
    sync_header(p);
    s->for_.body = parse_block(p, "after the 'for' ranges");
    return s;
}

/* while := 'while' expr block */
static fe_stmt *parse_while(parser *p) {
    fe_stmt *s = new_stmt(p, ST_WHILE, p->tok.loc);
    advance(p);
    s->while_.cond = parse_expr(p);
    sync_header(p);
    s->while_.body = parse_block(p, "after the 'while' condition");
    return s;
}

/* simple := expr ';'
 *         | lvalue ('=' | '+=' | '-=' | '*=' | '/=') expr ';'
 * lvalue := IDENT | IDENT '[' expr (',' expr)* ']'
 * The target is parsed as an expression, then checked. */
static fe_stmt *parse_simple(parser *p) {
    fe_expr *e = parse_expr(p);
    fe_assign_op op;
    switch (p->tok.kind) {
    case TK_ASSIGN: op = AS_SET; break;
    case TK_PLUSEQ: op = AS_ADD; break;
    case TK_MINUSEQ: op = AS_SUB; break;
    case TK_STAREQ: op = AS_MUL; break;
    case TK_SLASHEQ: op = AS_DIV; break;
    default: {
        fe_stmt *s = new_stmt(p, ST_EXPR, start_loc(e));
        s->expr.expr = e;
        expect(p, TK_SEMI, "after statement");
        return s;
    }
    }
    fe_stmt *s = new_stmt(p, ST_ASSIGN, start_loc(e));
    s->assign.op = op;
    s->assign.op_loc = p->tok.loc;
    s->assign.target = e;
    if (e->kind != EX_NAME && e->kind != EX_INDEX && e->kind != EX_MEMBER && e->kind != EX_ELEM)
        report(p, start_loc(e), "cannot assign to this expression (only a variable, an array "
                                "element, a component or a field can be assigned)");
    advance(p);
    s->assign.value = parse_expr(p);
    expect(p, TK_SEMI, "after statement");
    return s;
}

/* stmt := decl | if | for | while | block
 *       | 'break' ';' | 'continue' ';' | 'return' expr? ';'
 *       | simple
 * Returns NULL (after an error) when no statement starts here. */
static fe_stmt *parse_stmt(parser *p) {
    fe_stmt *s;
    switch (p->tok.kind) {
    case TK_LET:
    case TK_VAR: return parse_decl(p);
    case TK_IF: return parse_if(p);
    case TK_FOR: return parse_for(p);
    case TK_WHILE: return parse_while(p);
    case TK_LBRACE: return parse_block(p, "");
    case TK_BREAK:
    case TK_CONTINUE:
        s = new_stmt(p, at(p, TK_BREAK) ? ST_BREAK : ST_CONTINUE, p->tok.loc);
        advance(p);
        expect(p, TK_SEMI, "after statement");
        return s;
    case TK_RETURN:
        s = new_stmt(p, ST_RETURN, p->tok.loc);
        advance(p);
        if (starts_expr(p->tok.kind) || at(p, TK_ERROR))
            s->ret.value = parse_expr(p);
        expect(p, TK_SEMI, "after statement");
        return s;
    case TK_ELSE:
        syntax_error(p, "'else' without a matching 'if'");
        return NULL;
    default:
        if (!starts_expr(p->tok.kind)) {
            syntax_error(p, "expected a statement, found %s", found(p));
            return NULL;
        }
        return parse_simple(p);
    }
}

/* ---- Items ------------------------------------------------------------------------ */

/* const := 'const' IDENT (':' scalar)? '=' expr ';' */
static fe_item *parse_const(parser *p) {
    fe_item *it = ARENA_NEW(&p->ctx->mem, fe_item);
    it->kind = IT_CONST;
    it->loc = p->tok.loc;
    advance(p);
    it->name = MISSING;
    it->name_loc = p->tok.loc;
    it->ret = ty_void();
    if (at(p, TK_IDENT)) {
        it->name = tok_str(p);
        advance(p);
    } else {
        syntax_error(p, "expected a name after 'const', found %s", found(p));
    }
    if (accept(p, TK_COLON))
        it->declared = parse_type(p, false);
    if (!accept(p, TK_ASSIGN))
        syntax_error(p, "expected '=' in the declaration of '%s', found %s", it->name, found(p));
    it->init = parse_expr(p);
    if (!accept(p, TK_SEMI))
        syntax_error(p, "expected ';' after the value of '%s', found %s", it->name, found(p));
    return it;
}

/* struct := 'struct' IDENT '{' field (',' field)* ','? '}'
 * field  := IDENT ':' type */
static fe_item *parse_struct(parser *p) {
    fe_item *it = ARENA_NEW(&p->ctx->mem, fe_item);
    it->kind = IT_STRUCT;
    it->loc = p->tok.loc;
    advance(p);
    it->name = MISSING;
    it->name_loc = p->tok.loc;
    it->ret = ty_void();
    if (at(p, TK_IDENT)) {
        it->name = tok_str(p);
        advance(p);
    } else {
        syntax_error(p, "expected a name after 'struct', found %s", found(p));
        return it;
    }
    if (!expect(p, TK_LBRACE, "after the name of the struct"))
        return it;
    kern_ptrvec v = {0};
    while (at(p, TK_IDENT)) {
        fe_field *f = ARENA_NEW(&p->ctx->mem, fe_field);
        f->name = tok_str(p);
        f->loc = p->tok.loc;
        advance(p);
        if (!expect(p, TK_COLON, "after the field name"))
            break;
        f->type = parse_type(p, false);
        ptrvec_push(&v, f);
        if (!accept(p, TK_COMMA))
            break;
    }
    if (!p->panic && !accept(p, TK_RBRACE))
        syntax_error(p, "expected a field (name: type) or '}' in struct '%s', found %s", it->name,
                     found(p));
    int n = 0;
    fe_field **fs = (fe_field **)to_arena(p, &v, &n);
    it->fields = ARENA_ARRAY(&p->ctx->mem, fe_field, n ? n : 1);
    for (int i = 0; i < n; i++)
        it->fields[i] = *fs[i];
    it->nfields = n;
    if (n == 0 && !p->panic)
        report(p, it->name_loc, "struct '%s' needs at least one field", it->name);
    return it;
}

/* params := param (',' param)* ','?
 * param  := 'nograd'? IDENT ':' type
 * (after the '('; consumes the ')') */
static void parse_params(parser *p, fe_item *it) {
    fe_param *ps = NULL;
    int n = 0, cap = 0;
    while (!at(p, TK_RPAREN)) {
        if (n == cap) {
            cap = cap ? cap * 2 : 4;
            fe_param *grown = ARENA_ARRAY(&p->ctx->mem, fe_param, cap);
            if (n)
                memcpy(grown, ps, sizeof(fe_param) * (size_t)n);
            ps = grown;
        }
        fe_param *pa = &ps[n++];
        pa->nograd = accept(p, TK_NOGRAD);
        pa->loc = p->tok.loc;
        pa->name = MISSING;
        pa->type = ty_f32();
        if (at(p, TK_IDENT)) {
            pa->name = tok_str(p);
            advance(p);
            if (!accept(p, TK_COLON))
                syntax_error(p, "expected ':' after parameter name '%s', found %s", pa->name, found(p));
            else
                pa->type = parse_type(p, true);
        } else {
            syntax_error(p, "expected a parameter name, found %s", found(p));
        }
        if (p->panic) {
            /* Skip the rest of this parameter. */
            while (!at(p, TK_COMMA) && !at(p, TK_RPAREN) && !at(p, TK_LBRACE) &&
                   !at(p, TK_RBRACE) && !at(p, TK_EOF) && !is_item_kw(p->tok.kind))
                advance(p);
            if (!at(p, TK_COMMA) && !at(p, TK_RPAREN))
                break;
            p->panic = false;
        }
        if (!accept(p, TK_COMMA))
            break;
    }
    if (!accept(p, TK_RPAREN))
        syntax_error(p, "expected ',' or ')' after parameter, found %s", found(p));
    it->params = ps;
    it->nparams = n;
}

/* func   := 'func' IDENT '(' params? ')' ('->' type)? ('grad' IDENT)? block
 * kernel := 'kernel' IDENT '(' params? ')' ('grad' IDENT)? block
 * `grad` is a contextual word: an identifier everywhere else. */
static fe_item *parse_func(parser *p) {
    fe_item *it = ARENA_NEW(&p->ctx->mem, fe_item);
    it->kind = at(p, TK_KERNEL) ? IT_KERNEL : IT_FUNC;
    it->loc = p->tok.loc;
    const char *kw = fe_tok_name(p->tok.kind);
    advance(p);
    it->name = MISSING;
    it->name_loc = p->tok.loc;
    it->ret = ty_void();
    if (at(p, TK_IDENT)) {
        it->name = tok_str(p);
        advance(p);
    } else {
        syntax_error(p, "expected a name after '%s', found %s", kw, found(p));
    }
    if (at(p, TK_LPAREN)) {
        advance(p);
        parse_params(p, it);
    } else {
        syntax_error(p, "expected '(' after the name of %s '%s', found %s", kw, it->name, found(p));
    }
    const char *what = it->kind == IT_FUNC ? "or '->' after the parameters of" : "after the parameters of";
    if (!p->panic && at(p, TK_ARROW)) {
        kern_loc arrow = p->tok.loc;
        advance(p);
        const kern_type *t = parse_type(p, false);
        if (it->kind == IT_KERNEL)
            report(p, arrow, "a kernel cannot return a value (it writes its results to array parameters)");
        else
            it->ret = t;
        what = "after the return type of";
    }
    if (!p->panic && at(p, TK_IDENT) && p->tok.len == 4 && !memcmp(p->tok.text, "grad", 4)) {
        advance(p);
        if (at(p, TK_IDENT)) {
            it->grad_loc = p->tok.loc;
            it->grad_name = tok_str(p);
            advance(p);
        } else {
            syntax_error(p, "expected the name of a %s after 'grad' in %s '%s', found %s",
                         it->kind == IT_FUNC ? "func" : "kernel", kw, it->name, found(p));
        }
        what = "after the grad clause of";
    }
    sync_header(p);
    it->body = parse_block(p, arena_printf(&p->ctx->mem, "%s '%s'", what, it->name));
    return it;
}

/* file := item* */
fe_file *fe_parse(kc_ctx *ctx, const kern_source *src) {
    parser p;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    p.src = src;
    fe_lexer_init(&p.lx, ctx, src);
    advance(&p);
    kern_ptrvec items = {0};
    while (!at(&p, TK_EOF)) {
        switch (p.tok.kind) {
        case TK_CONST: ptrvec_push(&items, parse_const(&p)); break;
        case TK_STRUCT: ptrvec_push(&items, parse_struct(&p)); break;
        case TK_FUNC:
        case TK_KERNEL: ptrvec_push(&items, parse_func(&p)); break;
        case TK_ERROR: advance(&p); break; /* reported by the lexer */
        default:
            syntax_error(&p, "expected 'const', 'struct', 'func' or 'kernel', found %s", found(&p));
            break;
        }
        if (p.panic) {
            while (!at(&p, TK_EOF) && !is_item_kw(p.tok.kind))
                advance(&p);
            if (!at(&p, TK_EOF))
                p.panic = false;
        }
    }
    fe_file *f = ARENA_NEW(&ctx->mem, fe_file);
    f->src = src;
    f->items = (fe_item **)to_arena(&p, &items, &f->nitems);
    return f;
}
