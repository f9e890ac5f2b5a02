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

/* lower_agg.c: the version-1 value types, as lists of scalar leaves. */
/* Lowers e to its leaves (ty_leaves(e->type) of them: one for a scalar); returns the count. */
int lw_agg(lw *L, const fe_expr *e, ir_value **out);
ir_value *lw_agg_scalar(lw *L, const fe_expr *e);
/* Whether e needs lw_agg: its type or an operand's is a vector, matrix, struct or local
 * array, or it selects a part of one. */
bool lw_is_agg_expr(const fe_expr *e);
/* The scalar symbols holding the leaves of variable s (made on first use). */
fe_sym **lw_leaf_syms(lw *L, fe_sym *s);
/* The IR type of a kernel parameter of type t (docs/reference.md, memory layout). */
const kern_type *lw_ir_type(const kern_type *t);
/* Sets p's view and trailing extents for a parameter of declared type t. */
void lw_param_view(lw *L, const kern_type *t, ir_param *p);
void lw_zero_leaves(lw *L, const kern_type *t, ir_value **out);
void lw_decl_agg(lw *L, const fe_stmt *st);
/* An assignment to a part or to a whole value of a version-1 type, and its lowering. */
bool lw_assign_is_agg(const fe_stmt *st);
void lw_assign_agg(lw *L, const fe_stmt *st);
/* The variable an assignment changes a part of (NULL: memory). */
fe_sym *lw_assign_root(const fe_stmt *st);
/* lower_expr.c: the IR op of a binary operator. */
ir_opcode lw_binop_code(fe_binop op);
/* lower_expr.c: inlines a func call; writes the leaves of its value, returns their count
 * (0 for a void func). */
int lw_call_func(lw *L, const fe_expr *e, ir_value **out);
/* A math builtin on scalar operands v[0..n) (an op, or built from ops). */
ir_value *lw_scalar_builtin(lw *L, fe_builtin bi, ir_value *const *v, int n);

/* lower.c: a short loop over parts of a value, lowered unrolled (false: not such a loop). */
bool lw_unroll_for(lw *L, const fe_stmt *st);
/* lower_agg.c: whether an EX_ELEM selects a part of memory (an array parameter's element). */
bool fe_expr_is_memory_part(const fe_expr *e);

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
