/* ast.h - the abstract syntax tree of a .kern file.
 *
 * The parser (parser.c) builds it in the context's arena; semantic analysis (sema.c)
 * annotates it in place: every expression gets its type (and its folded value when it is
 * a constant expression), every name its symbol, every call its target. Lowering
 * (lower.c) reads only annotated trees of files that passed sema without errors.
 *
 * Every node has the location of its first token (for binary operators: the operator). */
#ifndef KERN_AST_H
#define KERN_AST_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/context.h"
#include "../common/types.h"
#include "../common/util.h"

typedef struct fe_expr fe_expr;
typedef struct fe_stmt fe_stmt;
typedef struct fe_item fe_item;
typedef struct fe_sym fe_sym;

/* ---- Expressions ------------------------------------------------------------------ */

typedef enum fe_expr_kind {
    EX_INT,     /* integer literal: ival */
    EX_FLOAT,   /* float literal: fval (and the literal's text) */
    EX_BOOL,    /* true / false: ival 0 or 1 */
    EX_NAME,    /* name: a local, parameter, const or loop variable */
    EX_UNARY,   /* unop operand */
    EX_BINARY,  /* lhs binop rhs (also && and ||) */
    EX_COND,    /* cond ? a : b */
    EX_CALL,    /* name(args): func call or builtin (len, sin, atomic_add, select, ...) */
    EX_CAST,    /* f32(x), i32(x), ...: to is the target scalar type */
    EX_INDEX,   /* name[idx, ...]: an array parameter's element, a local array's element, a
                   vector's component, a matrix's row or element */
    /* version 1 (docs/reference.md section 11) */
    EX_MEMBER,    /* base.field: a vector component (x y z w) or a struct field */
    EX_ELEM,      /* base[idx, ...] on a value that is not a name: v(...)[k], m[i][j] */
    EX_CONSTRUCT, /* vec3(...), mat3(...), quat(...): cons.to is the type */
    EX_STRUCTLIT, /* Name { field: value, ... } */
    EX_ARRAYLIT,  /* [a, b, ...]: a local array */
} fe_expr_kind;

typedef enum fe_unop { UN_NEG, UN_NOT, UN_BITNOT, UN_PLUS } fe_unop; /* - ! ~ + */

typedef enum fe_binop {
    BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_REM,
    BIN_SHL, BIN_SHR, BIN_BITAND, BIN_BITOR, BIN_BITXOR,
    BIN_EQ, BIN_NE, BIN_LT, BIN_LE, BIN_GT, BIN_GE,
    BIN_AND, BIN_OR, /* short-circuit && and || */
} fe_binop;

/* Builtins that sema resolves calls to (BI_NONE: a func call). */
typedef enum fe_builtin {
    BI_NONE,
    BI_LEN, BI_SHAPE,
    /* unary math */
    BI_SIN, BI_COS, BI_TAN, BI_ASIN, BI_ACOS, BI_ATAN, BI_SINH, BI_COSH, BI_TANH,
    BI_EXP, BI_EXP2, BI_LOG, BI_LOG2, BI_SQRT, BI_RSQRT, BI_ABS, BI_FLOOR, BI_CEIL,
    BI_ROUND, BI_SIGN,
    /* binary and ternary math */
    BI_ATAN2, BI_POW, BI_MIN, BI_MAX, BI_FMA, BI_CLAMP, BI_SELECT,
    /* version 1 (language.md 11.5): not reserved, a func or const of that name wins */
    BI_LOG10, BI_LOG1P, BI_EXPM1, BI_CBRT, BI_TRUNC, BI_RINT, BI_FRAC, BI_ERF, BI_ERFC,
    BI_HYPOT, BI_COPYSIGN, BI_LERP, BI_STEP, BI_SMOOTHSTEP, BI_ISNAN, BI_ISINF, BI_ISFINITE,
    BI_STOP_GRADIENT,
    /* vectors, matrices and quaternions (version 1, section 11.1); not reserved: a func of
     * the program with one of these names is what its calls mean */
    BI_DOT, BI_CROSS, BI_LENGTH, BI_LENGTH_SQ, BI_NORMALIZE, BI_OUTER, BI_TRANSPOSE,
    BI_DETERMINANT, BI_INVERSE, BI_TRACE, BI_DIAG, BI_IDENTITY2, BI_IDENTITY3, BI_IDENTITY4,
    BI_QUAT_ROTATE, BI_QUAT_FROM_AXIS_ANGLE, BI_QUAT_TO_MAT3, BI_CONJUGATE, BI_CMUL,
    /* atomics: first argument is an indexed array element */
    BI_ATOMIC_ADD, BI_ATOMIC_SUB, BI_ATOMIC_MIN, BI_ATOMIC_MAX,
    BI__COUNT
} fe_builtin;

/* A compile-time value (sema's constant folding). */
typedef struct fe_value {
    const kern_type *type; /* a scalar type */
    union {
        int64_t i; /* bool, i32, u32 (zero-extended), i64 */
        double f;  /* f32 (already rounded to float), f64 */
    };
} fe_value;

struct fe_expr {
    fe_expr_kind kind;
    kern_loc loc;
    /* Set by sema: */
    const kern_type *type; /* scalar type of the value; array type for an array name */
    bool is_const;         /* cval holds the folded value */
    fe_value cval;
    union {
        int64_t ival;                                            /* EX_INT, EX_BOOL */
        struct { double fval; } flt;                             /* EX_FLOAT */
        struct { const char *name; fe_sym *sym; } name;          /* EX_NAME (sym by sema) */
        struct { fe_unop op; fe_expr *arg; } unary;              /* EX_UNARY */
        struct { fe_binop op; fe_expr *lhs, *rhs; } binary;      /* EX_BINARY */
        struct { fe_expr *cond, *a, *b; } cond;                  /* EX_COND */
        struct {
            const char *name;
            kern_loc name_loc;
            fe_expr **args;
            int nargs;
            fe_builtin builtin; /* by sema */
            fe_item *func;      /* by sema: the func called (builtin == BI_NONE) */
        } call;                                                  /* EX_CALL */
        struct { const kern_type *to; fe_expr *arg; } cast;      /* EX_CAST */
        struct {
            const char *name;
            fe_sym *sym; /* by sema: the array parameter */
            fe_expr **idx;
            int nidx;
        } index;                                                 /* EX_INDEX */
        struct {
            fe_expr *base;
            const char *field;
            kern_loc field_loc;
            int index; /* by sema: the component, or the field of the struct */
        } member;                                                /* EX_MEMBER */
        struct { fe_expr *base; fe_expr **idx; int nidx; } elem; /* EX_ELEM */
        struct { const kern_type *to; fe_expr **args; int nargs; } cons; /* EX_CONSTRUCT */
        struct {
            const char *name;
            kern_loc name_loc;
            const char **fields;
            kern_loc *field_locs;
            fe_expr **values;
            int n;
        } slit;                                                  /* EX_STRUCTLIT */
        struct { fe_expr **elems; int n; } alit;                 /* EX_ARRAYLIT */
    };
};

/* ---- Symbols (created by sema) ---------------------------------------------------- */

typedef enum fe_sym_kind {
    SYM_CONST,   /* item const: value in cval */
    SYM_PARAM,   /* kernel or func parameter: param */
    SYM_LOCAL,   /* let / var: decl is the ST_LET/ST_VAR statement */
    SYM_LOOPVAR, /* for-loop variable: decl is the ST_FOR, range its index */
} fe_sym_kind;

struct fe_sym {
    fe_sym_kind kind;
    fe_sym **leaves;     /* lowering's scratch for a value of a version-1 type: one scalar
                            symbol per leaf (compiler/lower_agg.c) */
    const char *name;
    const kern_type *type;
    kern_loc loc;
    bool is_mutable;     /* var */
    bool is_uniform;     /* a top-level kernel let of params/consts/len/shape only */
    int task;            /* for kernel locals: index of the task that declares it */
    fe_value cval;       /* SYM_CONST */
    struct fe_param *param;
    fe_stmt *decl;
    int range;           /* SYM_LOOPVAR: which range of a multi-range for */
    fe_item *owner;      /* the kernel or func it belongs to (NULL for consts) */
    void *lower_value;   /* lowering's scratch: the symbol's current ir_value */
};

/* ---- Statements ------------------------------------------------------------------- */

typedef enum fe_stmt_kind {
    ST_LET,      /* let name (: type)? = init */
    ST_VAR,      /* var name (: type)? = init */
    ST_ASSIGN,   /* target (op)= value */
    ST_IF,       /* if cond then (else els)?  -- els is an ST_BLOCK or an ST_IF */
    ST_FOR,      /* for r0, r1, ... body */
    ST_WHILE,    /* while cond body */
    ST_BREAK,
    ST_CONTINUE,
    ST_RETURN,   /* return value? */
    ST_EXPR,     /* expr; */
    ST_BLOCK,    /* { stmts } */
} fe_stmt_kind;

typedef enum fe_assign_op { AS_SET, AS_ADD, AS_SUB, AS_MUL, AS_DIV } fe_assign_op;

typedef struct fe_range {
    const char *var;
    kern_loc loc; /* of the variable name */
    fe_expr *lo, *hi;
    fe_sym *sym;  /* by sema */
} fe_range;

struct fe_stmt {
    fe_stmt_kind kind;
    kern_loc loc;
    union {
        struct {
            const char *name;
            kern_loc name_loc;
            const kern_type *declared; /* NULL when no ': type' was written */
            fe_expr *init;             /* NULL: `var a: T;`, zero (local arrays, vectors,
                                          matrices and structs) */
            fe_sym *sym; /* by sema */
        } decl; /* ST_LET, ST_VAR */
        struct {
            fe_assign_op op;
            kern_loc op_loc;
            fe_expr *target; /* EX_NAME or EX_INDEX */
            fe_expr *value;
        } assign;
        struct { fe_expr *cond; fe_stmt *then, *els; } if_;
        struct {
            fe_range *ranges;
            int nranges;
            fe_stmt *body;    /* ST_BLOCK */
            bool parallel;    /* by sema: a top-level for of a kernel */
        } for_;
        struct { fe_expr *cond; fe_stmt *body; } while_;
        struct { fe_expr *value; /* may be NULL */ } ret;
        struct { fe_expr *expr; } expr;
        struct { fe_stmt **stmts; int nstmts; } block;
    };
};

/* ---- Items ------------------------------------------------------------------------ */

typedef struct fe_param {
    const char *name;
    kern_loc loc;
    const kern_type *type;
    bool nograd;
    fe_sym *sym; /* by sema */
} fe_param;

typedef enum fe_item_kind { IT_CONST, IT_FUNC, IT_KERNEL, IT_STRUCT } fe_item_kind;

/* A field of a struct item, as written. */
typedef struct fe_field {
    const char *name;
    kern_loc loc;
    const kern_type *type;
} fe_field;

struct fe_item {
    fe_item_kind kind;
    kern_loc loc;      /* of the keyword */
    const char *name;
    kern_loc name_loc;
    /* IT_CONST */
    const kern_type *declared; /* may be NULL */
    fe_expr *init;
    fe_sym *sym;               /* by sema */
    /* IT_FUNC, IT_KERNEL */
    fe_param *params;
    int nparams;
    const kern_type *ret;      /* IT_FUNC: return type, ty_void() when none */
    fe_stmt *body;             /* ST_BLOCK */
    int ntasks;                /* IT_KERNEL, by sema: number of tasks */
    const char *grad_name;     /* IT_FUNC, IT_KERNEL: the `grad NAME` clause (NULL: none) */
    kern_loc grad_loc;         /* of NAME */
    fe_item *grad;             /* by sema: the func or kernel it names */
    /* IT_STRUCT */
    fe_field *fields;
    int nfields;
    kern_type *stype;          /* by sema: the struct type */
};

typedef struct fe_file {
    const kern_source *src;
    fe_item **items;
    int nitems;
} fe_file;

/* ---- Entry points ----------------------------------------------------------------- */

/* Parses src; syntax errors go to ctx's sink. Always returns a tree (possibly partial);
 * the tree lives in ctx's arena. */
fe_file *fe_parse(kc_ctx *ctx, const kern_source *src);
/* Semantic analysis; returns true when no error was reported. */
bool fe_check(kc_ctx *ctx, fe_file *file);
/* Prints the tree in the form of `kernc emit --emit=ast` (docs/cli.md). kernel: only the
 * item of that name when non-NULL. */
void fe_print_ast(kern_buf *out, const fe_file *file, const char *only);

/* Names for printing and diagnostics. */
const char *fe_binop_text(fe_binop op);   /* "+", "&&", ... */
const char *fe_unop_text(fe_unop op);     /* "-", "!", "~" */
const char *fe_assign_text(fe_assign_op op); /* "=", "+=", ... */
const char *fe_builtin_name(fe_builtin b); /* "sin", "atomic_add", ... */
fe_builtin fe_builtin_lookup(const char *name); /* BI_NONE when not a builtin */
/* A builtin of version 1, whose name a func of the program may take. */
static inline bool fe_builtin_overridable(fe_builtin b) { return b >= BI_DOT && b <= BI_CMUL; }
/* The subexpressions of e, in evaluation order (at most FE_MAX_KIDS are written to kids;
 * the count is returned). For an EX_INDEX, the indices; for a call, the arguments. */
enum { FE_MAX_KIDS = 4 };
int fe_expr_kids(const fe_expr *e, const fe_expr **kids, int cap);
/* Whether ok holds for every subexpression of e (false past 64 of them). */
bool fe_expr_all_kids(const fe_expr *e, bool (*ok)(const fe_expr *));
/* Is b a reserved builtin (version 0)? A program's func or const may take the name of
 * the others (language.md section 11). */
bool fe_builtin_reserved(fe_builtin b);

#endif
