/* ast_names.c - spellings of AST operators and builtins, for printing and diagnostics.
 *
 * The tables are indexed by the enums of ast.h; a static assertion keeps the builtin
 * table in step with fe_builtin. */
#include <string.h>

#include "ast.h"

static const char *const binop_text[] = {
    [BIN_ADD] = "+",  [BIN_SUB] = "-",  [BIN_MUL] = "*",  [BIN_DIV] = "/",   [BIN_REM] = "%",
    [BIN_SHL] = "<<", [BIN_SHR] = ">>", [BIN_BITAND] = "&", [BIN_BITOR] = "|", [BIN_BITXOR] = "^",
    [BIN_EQ] = "==",  [BIN_NE] = "!=",  [BIN_LT] = "<",   [BIN_LE] = "<=",  [BIN_GT] = ">",
    [BIN_GE] = ">=",  [BIN_AND] = "&&", [BIN_OR] = "||",
};

static const char *const unop_text[] = {
    [UN_NEG] = "-", [UN_NOT] = "!", [UN_BITNOT] = "~", [UN_PLUS] = "+"};

static const char *const assign_text[] = {
    [AS_SET] = "=", [AS_ADD] = "+=", [AS_SUB] = "-=", [AS_MUL] = "*=", [AS_DIV] = "/=",
};

static const char *const builtin_names[] = {
    [BI_NONE] = "",
    [BI_LEN] = "len",     [BI_SHAPE] = "shape",
    [BI_SIN] = "sin",     [BI_COS] = "cos",     [BI_TAN] = "tan",     [BI_ASIN] = "asin",
    [BI_ACOS] = "acos",   [BI_ATAN] = "atan",   [BI_SINH] = "sinh",   [BI_COSH] = "cosh",
    [BI_TANH] = "tanh",   [BI_EXP] = "exp",     [BI_EXP2] = "exp2",   [BI_LOG] = "log",
    [BI_LOG2] = "log2",   [BI_SQRT] = "sqrt",   [BI_RSQRT] = "rsqrt", [BI_ABS] = "abs",
    [BI_FLOOR] = "floor", [BI_CEIL] = "ceil",   [BI_ROUND] = "round", [BI_SIGN] = "sign",
    [BI_ATAN2] = "atan2", [BI_POW] = "pow",     [BI_MIN] = "min",     [BI_MAX] = "max",
    [BI_FMA] = "fma",     [BI_CLAMP] = "clamp", [BI_SELECT] = "select",
    [BI_LOG10] = "log10", [BI_LOG1P] = "log1p", [BI_EXPM1] = "expm1", [BI_CBRT] = "cbrt",
    [BI_TRUNC] = "trunc", [BI_RINT] = "rint",   [BI_FRAC] = "frac",   [BI_ERF] = "erf",
    [BI_ERFC] = "erfc",   [BI_HYPOT] = "hypot", [BI_COPYSIGN] = "copysign",
    [BI_LERP] = "lerp",   [BI_STEP] = "step",   [BI_SMOOTHSTEP] = "smoothstep",
    [BI_ISNAN] = "isnan", [BI_ISINF] = "isinf", [BI_ISFINITE] = "isfinite",
    [BI_STOP_GRADIENT] = "stop_gradient",
    [BI_DOT] = "dot", [BI_CROSS] = "cross", [BI_LENGTH] = "length", [BI_LENGTH_SQ] = "length_sq",
    [BI_NORMALIZE] = "normalize", [BI_OUTER] = "outer", [BI_TRANSPOSE] = "transpose",
    [BI_DETERMINANT] = "determinant", [BI_INVERSE] = "inverse", [BI_TRACE] = "trace",
    [BI_DIAG] = "diag", [BI_IDENTITY2] = "identity2", [BI_IDENTITY3] = "identity3",
    [BI_IDENTITY4] = "identity4", [BI_QUAT_ROTATE] = "quat_rotate",
    [BI_QUAT_FROM_AXIS_ANGLE] = "quat_from_axis_angle", [BI_QUAT_TO_MAT3] = "quat_to_mat3",
    [BI_CONJUGATE] = "conjugate", [BI_CMUL] = "cmul",
    [BI_ATOMIC_ADD] = "atomic_add", [BI_ATOMIC_SUB] = "atomic_sub",
    [BI_ATOMIC_MIN] = "atomic_min", [BI_ATOMIC_MAX] = "atomic_max",
};

_Static_assert(sizeof builtin_names / sizeof builtin_names[0] == BI__COUNT,
               "builtin_names must name every fe_builtin");

#define LOOKUP(table, i)                                                                   \
    ((unsigned)(i) < sizeof(table) / sizeof(table)[0] && (table)[i] ? (table)[i] : "?")

const char *fe_binop_text(fe_binop op) { return LOOKUP(binop_text, op); }
const char *fe_unop_text(fe_unop op) { return LOOKUP(unop_text, op); }
const char *fe_assign_text(fe_assign_op op) { return LOOKUP(assign_text, op); }
const char *fe_builtin_name(fe_builtin b) { return LOOKUP(builtin_names, b); }

fe_builtin fe_builtin_lookup(const char *name) {
    if (!name)
        return BI_NONE;
    for (int b = BI_NONE + 1; b < BI__COUNT; b++)
        if (strcmp(builtin_names[b], name) == 0)
            return (fe_builtin)b;
    return BI_NONE;
}

int fe_expr_kids(const fe_expr *e, const fe_expr **kids, int cap) {
    int n = 0;
#define KID(x)                                                                             \
    do {                                                                                   \
        if (n < cap)                                                                       \
            kids[n] = (x);                                                                 \
        n++;                                                                               \
    } while (0)
    switch (e->kind) {
    case EX_INT:
    case EX_FLOAT:
    case EX_BOOL:
    case EX_NAME: break;
    case EX_UNARY: KID(e->unary.arg); break;
    case EX_BINARY:
        KID(e->binary.lhs);
        KID(e->binary.rhs);
        break;
    case EX_COND:
        KID(e->cond.cond);
        KID(e->cond.a);
        KID(e->cond.b);
        break;
    case EX_CALL:
        for (int i = 0; i < e->call.nargs; i++)
            KID(e->call.args[i]);
        break;
    case EX_CAST: KID(e->cast.arg); break;
    case EX_INDEX:
        for (int i = 0; i < e->index.nidx; i++)
            KID(e->index.idx[i]);
        break;
    case EX_MEMBER: KID(e->member.base); break;
    case EX_ELEM:
        KID(e->elem.base);
        for (int i = 0; i < e->elem.nidx; i++)
            KID(e->elem.idx[i]);
        break;
    case EX_CONSTRUCT:
        for (int i = 0; i < e->cons.nargs; i++)
            KID(e->cons.args[i]);
        break;
    case EX_STRUCTLIT:
        for (int i = 0; i < e->slit.n; i++)
            KID(e->slit.values[i]);
        break;
    case EX_ARRAYLIT:
        for (int i = 0; i < e->alit.n; i++)
            KID(e->alit.elems[i]);
        break;
    }
#undef KID
    return n;
}

bool fe_builtin_reserved(fe_builtin b) {
    return b != BI_NONE && (b < BI_LOG10 || b > BI_CMUL);
}

bool fe_expr_all_kids(const fe_expr *e, bool (*ok)(const fe_expr *)) {
    const fe_expr *k[64];
    int n = fe_expr_kids(e, k, 64);
    if (n > 64)
        return false;
    for (int i = 0; i < n; i++)
        if (!ok(k[i]))
            return false;
    return true;
}
