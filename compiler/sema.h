/* sema.h - internal interface of semantic analysis: shared by sema.c (items, scopes,
 * statements, tasks, recursion), sema_expr.c (expression typing, implicit conversions,
 * builtins) and sema_fold.c (constant folding). Not used outside the frontend except by
 * the unit tests (tests/test_sema.c).
 *
 * Untyped literals. An integer or float literal, and an operator applied only to untyped
 * operands (`1 << 20`, `-0.5`, `1.0 / 3.0`), is *untyped* while it is being checked: its
 * type is one of the two sentinels below and its cval holds the exact value (an i64 or
 * an f64, computed without overflow; Go's untyped constants). The consumer of the value
 * then resolves it (fe_sema_convert / fe_sema_resolve): to the type the context needs
 * (the other operand, the declared type, the parameter, the target), else to i32 / f32.
 * Resolution rewrites the subtree into one literal node of the final type (EX_INT for an
 * integer type, EX_FLOAT for a float type, ival/fval equal to cval), so no sentinel type
 * survives sema and every literal's kind matches its type.
 *
 * Error recovery: an expression whose type is NULL had an error that was reported;
 * consumers stay silent about it, so one mistake gives one message. */
#ifndef KERN_SEMA_H
#define KERN_SEMA_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/util.h"
#include "ast.h"

/* ---- Untyped literal types (const data; never escape sema) ----------------------- */

extern const kern_type fe_untyped_int;   /* kind TY_I64, cval an exact int64 */
extern const kern_type fe_untyped_float; /* kind TY_F64, cval a double */

static inline bool fe_is_untyped(const kern_type *t) {
    return t == &fe_untyped_int || t == &fe_untyped_float;
}

/* ---- Checker state ------------------------------------------------------------------ */

typedef enum fe_loop_kind { LOOP_NONE, LOOP_SERIAL, LOOP_PARALLEL } fe_loop_kind;

/* The ranges of one parallel for: the dimensions of a parallel task (the lowering, the
 * metadata's KERN_META_MAX_TASK_DIMS and every backend take this many). */
enum { FE_MAX_PARALLEL_RANGES = 8 };

/* Per item: const resolution state and the funcs a func calls (recursion check). */
typedef struct fe_item_info {
    fe_item *item;
    int state;         /* consts: 0 unresolved, 1 resolving, 2 resolved */
    bool cyclic;       /* consts: part of a reported cycle */
    kern_ptrvec calls; /* funcs and kernels: EX_CALL nodes of distinct callees */
    kern_ptrvec sites; /* funcs and kernels: every EX_CALL node of a func (inline limits) */
    int64_t nodes;     /* funcs and kernels: statements and expressions of the body */
    int called_by;     /* funcs: 1 + the index of the last item whose body called it */
    int max_depth;     /* funcs and kernels: the deepest nesting of statements and
                          expressions in the body */
    int *site_depth;   /* per entry of sites: the nesting at the call */
    int site_depth_cap;
    int depth; /* structs: 1 + the deepest struct among the fields (1: none) */
} fe_item_info;

typedef struct fe_sema {
    kc_ctx *ctx;
    fe_file *file;
    const kern_source *src;
    arena *mem;
    fe_item_info *info;      /* one per file->items[i] */
    kern_ptrvec const_stack; /* consts being resolved, outermost first (cycle messages) */
    /* The body being checked. */
    fe_item *fn;             /* func or kernel; NULL in a const initializer */
    int fn_index;            /* its index in file->items */
    int depth;               /* nesting of the statement or expression being checked */
    int *names;              /* open-addressing table of item indices by name (-1: empty) */
    uint32_t names_mask;     /* its size - 1, a power of two minus one */
    bool const_ctx;          /* checking a const initializer: no locals, no calls */
    int const_depth;         /* expressions being checked in const initializers, those of
                                the consts they name included (at most KC_MAX_NESTING) */
    bool const_too_deep;     /* that limit was reported */
    kern_ptrvec locals;      /* visible locals and params, innermost last */
    int scope_start;         /* index in locals where the innermost scope begins */
    int task;                /* current task of a kernel body, -1 elsewhere */
    fe_loop_kind loop;       /* the innermost enclosing loop */
} fe_sema;

void fe_sema_error(fe_sema *s, kern_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void fe_sema_warning(fe_sema *s, kern_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- sema.c: names ------------------------------------------------------------------ */

/* The first item called name, or NULL. */
fe_item *fe_sema_find_item(fe_sema *s, const char *name);
/* Resolves a name used as a value (EX_NAME, EX_INDEX, an assignment target): a visible
 * local or parameter, else a const item (resolved on demand). Reports unknown names (with
 * a close name when there is one), funcs and builtins used as values (returning NULL),
 * and locals of another task (returning the symbol, so typing goes on). The returned
 * const symbol has a NULL type when its definition had an error. */
fe_sym *fe_sema_lookup_value(fe_sema *s, const char *name, kern_loc loc);
/* Records that the body being checked calls func callee (recursion check). */
void fe_sema_note_call(fe_sema *s, fe_expr *call);
/* Link i of a chain of n names in a message ("A -> B -> "): the first six and the last,
 * "... (N more) -> " for those between, so that a cycle of 10^5 funcs is one line. */
void fe_sema_chain_link(kern_buf *b, int i, int n, const char *name);
/* The index of item it in file->items. */
int fe_sema_item_index(const fe_sema *s, const fe_item *it);
/* sema_race.c: warns about reads of a parallel for (a checked ST_FOR) that other threads
 * of the loop may write. */
void fe_sema_warn_races(fe_sema *s, const fe_stmt *loop);
/* sema_inline.c: after the recursion check, the limits of inlining (driver.h): the depth
 * of call chains and the nodes inlining adds to each kernel. */
void fe_sema_check_inlining(fe_sema *s);
/* sema_grad.c: the grad clauses of funcs and kernels (signatures of the adjoint func and
 * the gradient kernel); a func's clause becomes an edge of the call graph. After every
 * body is checked, before the recursion check. */
void fe_sema_check_grads(fe_sema *s);
/* Resolves a const item (folding its initializer) and returns its symbol. */
fe_sym *fe_sema_resolve_const(fe_sema *s, fe_item *it, kern_loc use);
/* A close name among the visible locals and items (and builtins when calls is set), or
 * NULL: for "did you mean" hints. */
const char *fe_sema_suggest(fe_sema *s, const char *name, bool calls);

/* ---- sema_expr.c: expressions ------------------------------------------------------ */

enum {
    SX_ARRAY_OK = 1, /* an array name is allowed (len, shape, a func's array argument) */
    SX_VOID_OK = 2,  /* a void func call is allowed (expression statement) */
    SX_NARROW_OK = 4, /* keep a storage type (u8, f16...): an assignment target, an atomic's
                         element, a let's inferred type; elsewhere ty_arith of it */
};

/* Checks *slot and annotates it. The result may be untyped (the caller resolves it);
 * hint is the type the context would like, used to type untyped subexpressions that
 * cannot be typed by their own operands (branches of ?:, arguments of min). Returns the
 * type, or NULL after an error. */
const kern_type *fe_sema_expr(fe_sema *s, fe_expr **slot, const kern_type *hint,
                              unsigned flags);
/* fe_sema_expr, then resolves an untyped result to hint when it can take it, else to its
 * default type (i32 / f32). */
const kern_type *fe_sema_value(fe_sema *s, fe_expr **slot, const kern_type *hint);
/* fe_sema_value with flags (SX_NARROW_OK for a let's inferred type). */
const kern_type *fe_sema_value_flags(fe_sema *s, fe_expr **slot, const kern_type *hint,
                                     unsigned flags);
/* Checks *slot and converts it implicitly to `to` (widening only). */
void fe_sema_expect(fe_sema *s, fe_expr **slot, const kern_type *to);
/* Checks *slot as a condition: it must be bool. what names the context ("if condition"). */
void fe_sema_cond(fe_sema *s, fe_expr **slot, const char *what);
/* Implicit conversion of a checked expression to `to`: resolves untyped literals (with
 * range checks), inserts an EX_CAST when widening, reports narrowing. False after an
 * error. */
bool fe_sema_convert(fe_sema *s, fe_expr **slot, const kern_type *to);
/* Gives two checked operands their common integer type (range bounds): promoted, with
 * conversions inserted. NULL after an error. what: "range bounds". */
const kern_type *fe_sema_unify_ints(fe_sema *s, fe_expr **ops[2], const char *what);
/* Resolves an untyped expression to `to` (a scalar type); false after an error. */
bool fe_sema_resolve(fe_sema *s, fe_expr **slot, const kern_type *to);
/* The location of the first token of e (a binary node is located at its operator). */
kern_loc fe_sema_first_loc(const fe_expr *e);
/* True when a checked expression depends only on literals, consts, scalar parameters,
 * len, shape, uniform lets, operators, casts and math builtins (no array reads, atomics
 * or func calls). */
bool fe_sema_is_uniform(const fe_expr *e);

/* Whether e names memory: an element of an array parameter, or a component or field of
 * one (the place an atomic updates). */
bool fe_sema_is_memory(const fe_expr *e);
/* Whether an atomic update (what: "'+='", "'atomic_add'") of memory place `place` can be
 * done: a field of another type than the words a struct array is stored as cannot
 * (reported). */
bool fe_sema_atomic_ok(fe_sema *s, const fe_expr *place, const char *what);

/* ---- sema_agg.c: version-1 value types ------------------------------------------- */

/* Resolves the parser's placeholders in t (struct names, local array extents); NULL after
 * a reported error. */
const kern_type *fe_sema_type(fe_sema *s, const kern_type *t, kern_loc loc);
/* Builds every struct type (before anything uses them). */
void fe_sema_build_structs(fe_sema *s);
bool fe_sema_same_type(const kern_type *a, const kern_type *b);
bool fe_sema_is_aggregate(const kern_type *t);
const kern_type *fe_sema_local_type(fe_sema *s, const kern_type *elem, int rank,
                                    const int *dims, kern_loc loc);
/* The type of a value of type t indexed with n checked indices; NULL after an error. */
const kern_type *fe_sema_index_value(fe_sema *s, kern_loc loc, const kern_type *t,
                                     fe_expr **idx, int n);
const kern_type *fe_sema_check_member(fe_sema *s, fe_expr *e);
const kern_type *fe_sema_check_elem(fe_sema *s, fe_expr *e);
const kern_type *fe_sema_check_construct(fe_sema *s, fe_expr *e);
const kern_type *fe_sema_check_structlit(fe_sema *s, fe_expr *e);
const kern_type *fe_sema_check_arraylit(fe_sema *s, fe_expr *e, const kern_type *hint);
/* A binary operator with a vector, matrix or struct operand (both checked). */
const kern_type *fe_sema_agg_binary(fe_sema *s, fe_expr *e);
const kern_type *fe_sema_agg_neg(fe_sema *s, fe_expr *e);
/* A component-wise builtin call whose checked arguments include a vector or matrix. */
const kern_type *fe_sema_agg_componentwise(fe_sema *s, fe_expr *e, bool floats_only);
/* dot, cross, length, ... (BI_DOT..BI_CMUL). */
const kern_type *fe_sema_vector_builtin(fe_sema *s, fe_expr *e);

/* ---- sema_fold.c: constant folding ------------------------------------------------- */

typedef enum fe_fold_status {
    FOLD_OK,
    FOLD_NOT_CONST, /* an operation with no compile-time value */
    FOLD_DIV_ZERO,  /* integer division or remainder by zero */
    FOLD_SHIFT,     /* shift count negative or >= the bit width */
    FOLD_RANGE,     /* float -> int of a value out of range (or NaN) */
    FOLD_OVERFLOW,  /* untyped integer arithmetic beyond int64 */
} fe_fold_status;

/* v wrapped to integer type t (bool: v != 0; u32 zero-extended, i32 sign-extended). */
fe_value fe_value_int(const kern_type *t, int64_t v);
/* v rounded to float type t. */
fe_value fe_value_float(const kern_type *t, double v);
fe_value fe_value_bool(bool b);
/* Operands have the type the operator works in (for shifts the count is converted to
 * the left operand's type); comparisons give bool. Integers wrap. */
fe_fold_status fe_fold_unary(fe_unop op, fe_value a, fe_value *out);
fe_fold_status fe_fold_binary(fe_binop op, fe_value a, fe_value b, fe_value *out);
fe_fold_status fe_fold_cast(const kern_type *to, fe_value a, fe_value *out);
/* Math builtins, min/max/clamp/select; all operands of the builtin's operand type
 * (select: a bool, then two values). Computed with libm in double, rounded for f32. */
fe_fold_status fe_fold_builtin(fe_builtin b, const fe_value *args, int n, fe_value *out);
/* Untyped arithmetic: operands are i64 (exact integers) or f64 values; integers are
 * combined exactly (FOLD_OVERFLOW beyond int64), an f64 operand makes the result f64. */
fe_fold_status fe_fold_ideal_binary(fe_binop op, fe_value a, fe_value b, fe_value *out);
fe_fold_status fe_fold_ideal_unary(fe_unop op, fe_value a, fe_value *out);
/* Writes a value for messages: integers in decimal, floats in the shortest form that
 * reads back to the same value ("0.1", "1e+39", "inf"). */
void fe_value_format(char *buf, size_t size, fe_value v);

#endif
