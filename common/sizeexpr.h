/* sizeexpr.h - SizeExpr: the symbolic capacity of an adstack (docs/reference.md section 9).
 *
 * The compiler (passes/ad_size.c) derives, for every loop whose carried values the
 * reverse sweep needs, an upper bound on the number of pushes one thread makes: the
 * loop's trip count, maximized over the ranges of the enclosing loop and parallel
 * indices. The compiler hands it on as a tree: in the IR (ir_adstack.cap, printed and
 * parsed as the text form below), to the metadata (backends/meta_ir.c, which also writes
 * the text that module files carry) and to the GPU sizer kernels (llvm_sizer.c). The
 * runtime evaluates it per launch without the compiler (runtime/adstack.c).
 *
 * Text form (an s-expression; single spaces, no other whitespace):
 *   E := INT                       a constant (decimal, may be negative)
 *      | vN                        range variable N (N >= 0), bound by an enclosing maxover
 *      | (param P)                 value of scalar integer parameter P (0-based index)
 *      | (dim P D)                 extent of dimension D of array parameter P
 *      | (read P E...)             element of integer array parameter P at the given indices
 *                                  (one E per dimension of P)
 *      | (add E E) | (sub E E) | (mul E E) | (div E E) | (min E E) | (max E E)
 *      | (maxover vN LO HI BODY)   the maximum of BODY over vN in [LO, HI); 0 when the
 *                                  range is empty
 * Integer division truncates toward zero; division by zero evaluates to an error.
 * Example: for j in 0..count[i] inside for i in 0..len(count):
 *   (maxover v0 0 (dim 0 0) (max 0 (read 0 v0)))
 *
 * Evaluation (sz_eval) is exact for the forms the compiler produces: a maxover whose body
 * is convex in its variable is evaluated at the range's endpoints, one whose body reads
 * an array through the variable scans the range (that is the sizer's reduction), a
 * triangular nest at a few points; any other body is scanned over a short range and
 * bounded by interval arithmetic over a long one (an upper bound). Which of these applies
 * is decided once, by sz_maxover_rule, for both sz_eval and the GPU sizer kernels
 * (backends/llvm/llvm_sizer.c); tests/test_sizer.c runs the two against each other.
 * Every result is checked for int64 overflow. */
#ifndef KERN_SIZEEXPR_H
#define KERN_SIZEEXPR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "types.h"
#include "util.h"

typedef enum sz_op {
    SZ_CONST,   /* v: the value */
    SZ_VAR,     /* v: the variable number */
    SZ_PARAM,   /* v: the parameter index */
    SZ_DIM,     /* v: the parameter index, d: the dimension */
    SZ_READ,    /* v: the parameter index; kids: the indices */
    SZ_ADD,
    SZ_SUB,
    SZ_MUL,
    SZ_DIV,
    SZ_MIN,
    SZ_MAX,
    SZ_MAXOVER, /* v: the variable number; kids: lo, hi, body */
} sz_op;

typedef struct sz_expr {
    sz_op op;
    int64_t v;
    int d;
    int nkids;
    struct sz_expr **kids;
} sz_expr;

/* Construction (compiler side: nodes live in the given arena). */
sz_expr *sz_const(arena *a, int64_t v);
sz_expr *sz_var(arena *a, int var);
sz_expr *sz_param(arena *a, int param);
sz_expr *sz_dim(arena *a, int param, int dim);
sz_expr *sz_read(arena *a, int param, sz_expr *const *idx, int nidx);
sz_expr *sz_bin(arena *a, sz_op op, sz_expr *x, sz_expr *y); /* ADD..MAX */
sz_expr *sz_maxover(arena *a, int var, sz_expr *lo, sz_expr *hi, sz_expr *body);
/* A deep copy of e in arena a. */
sz_expr *sz_copy(arena *a, const sz_expr *e);
/* Whether x and y are the same tree (same ops, values and kids). */
bool sz_equal(const sz_expr *x, const sz_expr *y);
/* The nesting depth of e: 1 for a leaf (the parser takes at most 63). */
int sz_depth(const sz_expr *e);

/* Appends the text form. */
void sz_print(kern_buf *out, const sz_expr *e);
/* Parses the text form into nodes of arena a. NULL on a syntax error, with a message
 * (naming the offset) in err. Never crashes on malformed input; nesting is limited. */
sz_expr *sz_parse(arena *a, const char *text, size_t len, char *err, size_t errlen);

/* What evaluation needs to know about one launch's arguments. */
typedef struct sz_arg {
    const kern_type *type; /* the parameter's type */
    int64_t scalar;        /* integer scalar parameters: the value */
    const void *data;      /* arrays: host-readable elements (NULL: not readable here) */
    int64_t shape[KERN_MAX_RANK];
} sz_arg;

/* Evaluates e for the given arguments; false with a message in err when a leaf is out of
 * range (a parameter index, a dimension, an array read out of bounds or of unreadable
 * data), on division by zero, or when the value overflows int64. */
bool sz_eval(const sz_expr *e, const sz_arg *args, int nargs, int64_t *out, char *err,
             size_t errlen);
/* How a maxover over a non-empty range [a, b) is evaluated, decided from the tree alone.
 * One decision for the host evaluator (sz_eval) and the GPU sizer kernels
 * (backends/llvm/llvm_sizer.c), so that the two cannot choose differently: */
typedef enum sz_rule {
    SZ_RULE_POINT,     /* the body does not depend on the variable: the body at a */
    SZ_RULE_ENDPOINTS, /* convex in the variable: the larger of the body at a and b - 1 */
    SZ_RULE_SCAN,      /* the variable reaches a read's index: the body at every point */
    SZ_RULE_PIECEWISE, /* convex between the points where a nested range (affine in the
                        * variable) turns empty: the host evaluates the endpoints and both
                        * sides of each such point, the sizer scans */
    SZ_RULE_OTHER,     /* anything else: the host scans a short range and bounds a long
                        * one by interval arithmetic, the sizer scans */
} sz_rule;
sz_rule sz_maxover_rule(const sz_expr *maxover);

/* Whether e reads array elements (then evaluation needs the data on the host, or a sizer
 * kernel on the device). */
bool sz_reads_memory(const sz_expr *e);

#endif
