/* ast_print.c - the AST as indented S-expressions (`kernc emit --emit=ast`).
 *
 * The form is specified in docs/ast.md. In short: every node is
 *     (HEAD ATOMS... LINE:COL [: TYPE] CHILDREN...)
 * items, parameters and statements start on a line of their own, indented two spaces per
 * level; expressions are printed inline. The output depends only on the tree, so it is
 * deterministic; `: TYPE` appears on expressions that sema has annotated. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"

static void put_loc(kern_buf *b, kern_loc loc) { buf_printf(b, " %u:%u", loc.line, loc.col); }

static void indent(kern_buf *b, int n) {
    buf_putc(b, '\n');
    for (int i = 0; i < n; i++)
        buf_putc(b, ' ');
}

/* The shortest text that reads back as the same double: positional notation for
 * exponents -5..16 ("0.001", "25000.0"), else scientific ("1e+30"); always with a '.' or
 * an exponent so that it reads as a float. */
static void put_float(kern_buf *b, double v) {
    char s[64];
    if (v != v || v - v != 0) { /* nan, inf: not from the parser, but sema may fold */
        snprintf(s, sizeof s, "%g", v);
        buf_puts(b, s);
        return;
    }
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(s, sizeof s, "%.*e", prec - 1, v);
        if (strtod(s, NULL) == v)
            break;
    }
    snprintf(s, sizeof s, "%.*e", prec - 1, v);
    int exp = atoi(strchr(s, 'e') + 1);
    if (exp >= -5 && exp <= 16) {
        int decimals = prec - 1 - exp;
        snprintf(s, sizeof s, "%.*f", decimals > 0 ? decimals : 0, v);
    } else {
        snprintf(s, sizeof s, "%.*g", prec, v);
    }
    buf_puts(b, s);
    if (!strpbrk(s, ".e"))
        buf_puts(b, ".0");
}

static void print_expr(kern_buf *b, const fe_expr *e);

/* "LINE:COL" and the sema type, after the head of an expression. */
static void expr_tail(kern_buf *b, const fe_expr *e) {
    put_loc(b, e->loc);
    if (e->type)
        buf_printf(b, " : %s", e->type->name);
}

static void print_args(kern_buf *b, fe_expr *const *args, int n) {
    for (int i = 0; i < n; i++) {
        buf_putc(b, ' ');
        print_expr(b, args[i]);
    }
}

static void print_expr(kern_buf *b, const fe_expr *e) {
    if (!e) {
        buf_puts(b, "(missing)");
        return;
    }
    switch (e->kind) {
    case EX_INT:
        buf_printf(b, "(int %" PRId64, e->ival);
        expr_tail(b, e);
        break;
    case EX_FLOAT:
        buf_puts(b, "(float ");
        put_float(b, e->flt.fval);
        expr_tail(b, e);
        break;
    case EX_BOOL:
        buf_printf(b, "(bool %s", e->ival ? "true" : "false");
        expr_tail(b, e);
        break;
    case EX_NAME:
        buf_printf(b, "(name %s", e->name.name);
        expr_tail(b, e);
        break;
    case EX_UNARY:
        buf_printf(b, "(unary %s", fe_unop_text(e->unary.op));
        expr_tail(b, e);
        print_args(b, &e->unary.arg, 1);
        break;
    case EX_BINARY:
        buf_printf(b, "(binary %s", fe_binop_text(e->binary.op));
        expr_tail(b, e);
        print_args(b, &e->binary.lhs, 1);
        print_args(b, &e->binary.rhs, 1);
        break;
    case EX_COND:
        buf_puts(b, "(cond");
        expr_tail(b, e);
        print_args(b, &e->cond.cond, 1);
        print_args(b, &e->cond.a, 1);
        print_args(b, &e->cond.b, 1);
        break;
    case EX_CALL:
        buf_printf(b, "(call %s", e->call.name);
        expr_tail(b, e);
        print_args(b, e->call.args, e->call.nargs);
        break;
    case EX_CAST:
        buf_printf(b, "(cast %s", e->cast.to ? e->cast.to->name : "?");
        expr_tail(b, e);
        print_args(b, &e->cast.arg, 1);
        break;
    case EX_INDEX:
        buf_printf(b, "(index %s", e->index.name);
        expr_tail(b, e);
        print_args(b, e->index.idx, e->index.nidx);
        break;
    case EX_MEMBER:
        buf_printf(b, "(member %s", e->member.field);
        expr_tail(b, e);
        print_args(b, &e->member.base, 1);
        break;
    case EX_ELEM:
        buf_puts(b, "(elem");
        expr_tail(b, e);
        print_args(b, &e->elem.base, 1);
        print_args(b, e->elem.idx, e->elem.nidx);
        break;
    case EX_CONSTRUCT:
        buf_printf(b, "(construct %s", e->cons.to->name);
        expr_tail(b, e);
        print_args(b, e->cons.args, e->cons.nargs);
        break;
    case EX_STRUCTLIT:
        buf_printf(b, "(struct %s", e->slit.name);
        expr_tail(b, e);
        for (int i = 0; i < e->slit.n; i++) {
            buf_printf(b, " %s:", e->slit.fields[i]);
            print_args(b, &e->slit.values[i], 1);
        }
        break;
    case EX_ARRAYLIT:
        buf_puts(b, "(array");
        expr_tail(b, e);
        print_args(b, e->alit.elems, e->alit.n);
        break;
    default:
        buf_puts(b, "(unknown");
        break;
    }
    buf_putc(b, ')');
}

/* A child statement on its own line at depth ind. */
static void print_stmt(kern_buf *b, const fe_stmt *s, int ind);

static void child_stmt(kern_buf *b, const fe_stmt *s, int ind) {
    indent(b, ind);
    print_stmt(b, s, ind);
}

static void print_stmt(kern_buf *b, const fe_stmt *s, int ind) {
    if (!s) {
        buf_puts(b, "(missing)");
        return;
    }
    switch (s->kind) {
    case ST_LET:
    case ST_VAR:
        buf_printf(b, "(%s %s", s->kind == ST_LET ? "let" : "var", s->decl.name);
        if (s->decl.declared)
            buf_printf(b, " %s", s->decl.declared->name);
        put_loc(b, s->loc);
        if (s->decl.init)
            print_args(b, &s->decl.init, 1);
        break;
    case ST_ASSIGN:
        buf_printf(b, "(assign %s", fe_assign_text(s->assign.op));
        put_loc(b, s->loc);
        print_args(b, &s->assign.target, 1);
        print_args(b, &s->assign.value, 1);
        break;
    case ST_IF:
        buf_puts(b, "(if");
        put_loc(b, s->loc);
        print_args(b, &s->if_.cond, 1);
        child_stmt(b, s->if_.then, ind + 2);
        if (s->if_.els)
            child_stmt(b, s->if_.els, ind + 2);
        break;
    case ST_FOR:
        buf_puts(b, "(for");
        put_loc(b, s->loc);
        for (int i = 0; i < s->for_.nranges; i++) {
            const fe_range *r = &s->for_.ranges[i];
            buf_printf(b, " (range %s", r->var);
            put_loc(b, r->loc);
            print_args(b, &r->lo, 1);
            print_args(b, &r->hi, 1);
            buf_putc(b, ')');
        }
        child_stmt(b, s->for_.body, ind + 2);
        break;
    case ST_WHILE:
        buf_puts(b, "(while");
        put_loc(b, s->loc);
        print_args(b, &s->while_.cond, 1);
        child_stmt(b, s->while_.body, ind + 2);
        break;
    case ST_BREAK:
    case ST_CONTINUE:
        buf_puts(b, s->kind == ST_BREAK ? "(break" : "(continue");
        put_loc(b, s->loc);
        break;
    case ST_RETURN:
        buf_puts(b, "(return");
        put_loc(b, s->loc);
        if (s->ret.value)
            print_args(b, &s->ret.value, 1);
        break;
    case ST_EXPR:
        buf_puts(b, "(expr");
        put_loc(b, s->loc);
        print_args(b, &s->expr.expr, 1);
        break;
    case ST_BLOCK:
        buf_puts(b, "(block");
        put_loc(b, s->loc);
        for (int i = 0; i < s->block.nstmts; i++)
            child_stmt(b, s->block.stmts[i], ind + 2);
        break;
    default:
        buf_puts(b, "(unknown");
        break;
    }
    buf_putc(b, ')');
}

static void print_item(kern_buf *b, const fe_item *it) {
    switch (it->kind) {
    case IT_CONST:
        buf_printf(b, "(const %s", it->name);
        if (it->declared)
            buf_printf(b, " %s", it->declared->name);
        put_loc(b, it->loc);
        print_args(b, &it->init, 1);
        break;
    case IT_FUNC:
    case IT_KERNEL:
        buf_printf(b, "(%s %s", it->kind == IT_FUNC ? "func" : "kernel", it->name);
        if (it->kind == IT_FUNC && it->ret && it->ret->kind != TY_VOID)
            buf_printf(b, " -> %s", it->ret->name);
        put_loc(b, it->loc);
        for (int i = 0; i < it->nparams; i++) {
            const fe_param *pa = &it->params[i];
            indent(b, 2);
            buf_printf(b, "(param %s%s %s", pa->nograd ? "nograd " : "", pa->name,
                       pa->type ? pa->type->name : "?");
            put_loc(b, pa->loc);
            buf_putc(b, ')');
        }
        child_stmt(b, it->body, 2);
        break;
    case IT_STRUCT:
        buf_printf(b, "(struct %s", it->name);
        put_loc(b, it->loc);
        for (int i = 0; i < it->nfields; i++) {
            indent(b, 2);
            buf_printf(b, "(field %s %s", it->fields[i].name,
                       it->fields[i].type ? it->fields[i].type->name : "?");
            put_loc(b, it->fields[i].loc);
            buf_putc(b, ')');
        }
        break;
    default:
        buf_puts(b, "(unknown");
        break;
    }
    buf_puts(b, ")\n");
}

void fe_print_ast(kern_buf *out, const fe_file *file, const char *only) {
    for (int i = 0; i < file->nitems; i++) {
        const fe_item *it = file->items[i];
        if (only && (!it->name || strcmp(it->name, only) != 0))
            continue;
        print_item(out, it);
    }
}
