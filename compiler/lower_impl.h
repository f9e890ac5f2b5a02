/* lower_impl.h - state shared by the statement lowering (lower.c) and the expression
 * lowering (lower_expr.c). Internal to the lowering. */
#ifndef KERN_LOWER_IMPL_H
#define KERN_LOWER_IMPL_H

#include "../ir/ir.h"
#include "ast.h"

/* A growable set of symbols, in insertion order (deterministic output). */
typedef struct lw_syms {
    fe_sym **data;
    int len, cap;
} lw_syms;

/* The innermost serial loop (or parallel body) being lowered: its escape flags. A flag is
 * a synthetic bool symbol, created only when the body contains a break / continue that
 * targets this loop. */
typedef struct lw_loop {
    fe_sym *brk;  /* set by `break` */
    fe_sym *cont; /* set by `continue` */
    struct lw_loop *outer;
} lw_loop;

/* The func being inlined: `return v` sets retval = v and ret = true. */
typedef struct lw_func {
    fe_sym *ret, *retval;
    struct lw_func *outer;
} lw_func;

typedef struct lw {
    kc_ctx *ctx;
    ir_module *m;
    ir_builder b;
    lw_loop *loop;
    lw_func *func;
    int inline_depth;
} lw;

/* lower_expr.c */
ir_value *lw_expr(lw *L, const fe_expr *e);
/* True when evaluating e cannot trap or have effects (no loads, calls of funcs or
 * atomics, integer division or shifts), so it may be evaluated speculatively. */
bool lw_expr_is_safe(const fe_expr *e);
ir_value *lw_zero(lw *L, const kern_type *t);

/* lower.c: used by the expression lowering to inline a func body. */
void lw_func_body(lw *L, const fe_stmt *body);

static inline ir_value *lw_get(const fe_sym *s) { return (ir_value *)s->lower_value; }
static inline void lw_set(fe_sym *s, ir_value *v) { s->lower_value = v; }
/* v as a value of a local of (sema) type t: a local of a storage type (u8, f16...) holds
 * its value wrapped or rounded, in ty_arith(t) (language.md 11.4). */
ir_value *lw_local_value(lw *L, const kern_type *t, ir_value *v);
/* Binds a named local, parameter or return value: lw_set of lw_local_value. */
static inline void lw_bind(lw *L, fe_sym *s, ir_value *v) { lw_set(s, lw_local_value(L, s->type, v)); }

#endif
