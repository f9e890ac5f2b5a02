/* sizeexpr.c - SizeExpr construction, text form and evaluation (sizeexpr.h).
 *
 * Compiled into both the compiler library and the runtime, so it uses only common/
 * (arena, util, types). docs/sizeexpr.md describes the grammar and the evaluation.
 *
 * Evaluation works on intervals [lo, hi]: every leaf is a point, and a result stays a
 * point (exact) unless a maxover had to fall back to interval arithmetic. A maxover
 * over a non-empty range [a, b) of points is evaluated by the rule sz_maxover_rule gives
 * it from the shape of its body in its variable v (the GPU sizer kernels follow the same
 * rule, llvm_sizer.c):
 *   - SCAN: v reaches the index of a read (directly, or through the range of a nested
 *     maxover): scan every v in [a, b) (the sizer's reduction; exact);
 *   - POINT: the body does not depend on v: evaluate it at a;
 *   - ENDPOINTS: the body is convex in v (affine: v not under min/div/read, nor
 *     multiplied by a v-dependent value; max of convex parts; nested maxovers whose range
 *     does not depend on v): its maximum is at an endpoint, so evaluate at a and b - 1;
 *   - PIECEWISE: convex between the points where a nested range turns empty: evaluate at
 *     the endpoints and on both sides of each such point (exact);
 *   - OTHER: scan a short range; otherwise bind v to the interval [a, b - 1] and evaluate
 *     the body once (an upper bound).
 * Every operation is checked for int64 overflow. */
#include "sizeexpr.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* ---- Construction ------------------------------------------------------------------ */

static sz_expr *sz_node(arena *a, sz_op op, int64_t v, int nkids) {
    sz_expr *e = ARENA_NEW(a, sz_expr);
    e->op = op;
    e->v = v;
    e->nkids = nkids;
    e->kids = nkids ? ARENA_ARRAY(a, sz_expr *, nkids) : NULL;
    return e;
}

sz_expr *sz_const(arena *a, int64_t v) { return sz_node(a, SZ_CONST, v, 0); }
sz_expr *sz_var(arena *a, int var) { return sz_node(a, SZ_VAR, var, 0); }
sz_expr *sz_param(arena *a, int param) { return sz_node(a, SZ_PARAM, param, 0); }

sz_expr *sz_dim(arena *a, int param, int dim) {
    sz_expr *e = sz_node(a, SZ_DIM, param, 0);
    e->d = dim;
    return e;
}

sz_expr *sz_read(arena *a, int param, sz_expr *const *idx, int nidx) {
    sz_expr *e = sz_node(a, SZ_READ, param, nidx);
    for (int i = 0; i < nidx; i++)
        e->kids[i] = idx[i];
    return e;
}

sz_expr *sz_bin(arena *a, sz_op op, sz_expr *x, sz_expr *y) {
    kern_assert(op >= SZ_ADD && op <= SZ_MAX);
    sz_expr *e = sz_node(a, op, 0, 2);
    e->kids[0] = x;
    e->kids[1] = y;
    return e;
}

sz_expr *sz_maxover(arena *a, int var, sz_expr *lo, sz_expr *hi, sz_expr *body) {
    sz_expr *e = sz_node(a, SZ_MAXOVER, var, 3);
    e->kids[0] = lo;
    e->kids[1] = hi;
    e->kids[2] = body;
    return e;
}

sz_expr *sz_copy(arena *a, const sz_expr *e) {
    sz_expr *r = sz_node(a, e->op, e->v, e->nkids);
    r->d = e->d;
    for (int i = 0; i < e->nkids; i++)
        r->kids[i] = sz_copy(a, e->kids[i]);
    return r;
}

bool sz_equal(const sz_expr *x, const sz_expr *y) {
    if (x->op != y->op || x->v != y->v || x->d != y->d || x->nkids != y->nkids)
        return false;
    for (int i = 0; i < x->nkids; i++)
        if (!sz_equal(x->kids[i], y->kids[i]))
            return false;
    return true;
}

int sz_depth(const sz_expr *e) {
    int d = 0;
    for (int i = 0; i < e->nkids; i++) {
        int k = sz_depth(e->kids[i]);
        d = k > d ? k : d;
    }
    return d + 1;
}

/* ---- Text form --------------------------------------------------------------------- */

static const char *const sz_names[] = {
    [SZ_CONST] = NULL,    [SZ_VAR] = NULL,   [SZ_PARAM] = "param", [SZ_DIM] = "dim",
    [SZ_READ] = "read",   [SZ_ADD] = "add",  [SZ_SUB] = "sub",     [SZ_MUL] = "mul",
    [SZ_DIV] = "div",     [SZ_MIN] = "min",  [SZ_MAX] = "max",     [SZ_MAXOVER] = "maxover",
};

void sz_print(kern_buf *out, const sz_expr *e) {
    switch (e->op) {
    case SZ_CONST:
        buf_printf(out, "%lld", (long long)e->v);
        return;
    case SZ_VAR:
        buf_printf(out, "v%lld", (long long)e->v);
        return;
    case SZ_PARAM:
        buf_printf(out, "(param %lld)", (long long)e->v);
        return;
    case SZ_DIM:
        buf_printf(out, "(dim %lld %d)", (long long)e->v, e->d);
        return;
    case SZ_READ:
        buf_printf(out, "(read %lld", (long long)e->v);
        break;
    case SZ_MAXOVER:
        buf_printf(out, "(maxover v%lld", (long long)e->v);
        break;
    default:
        buf_printf(out, "(%s", sz_names[e->op]);
        break;
    }
    for (int i = 0; i < e->nkids; i++) {
        buf_putc(out, ' ');
        sz_print(out, e->kids[i]);
    }
    buf_putc(out, ')');
}

enum {
    SZ_MAX_DEPTH = 64,       /* nesting limit of the parser */
    SZ_MAX_EVAL_DEPTH = 256, /* nesting limit of evaluation (built trees are not parsed) */
};

typedef struct sz_parser {
    arena *a;
    const char *s;
    size_t len, pos;
    char *err;
    size_t errlen;
    bool failed;
    int depth;
    int bound[SZ_MAX_DEPTH]; /* variables bound by the enclosing maxovers */
    int nbound;
} sz_parser;

__attribute__((format(printf, 3, 4))) static void perr(sz_parser *p, size_t at,
                                                       const char *fmt, ...) {
    if (p->failed)
        return;
    p->failed = true;
    if (!p->err || !p->errlen)
        return;
    int n = snprintf(p->err, p->errlen, "SizeExpr offset %zu: ", at);
    if (n < 0 || (size_t)n >= p->errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

static int peekc(const sz_parser *p) { return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }

/* "expected WHAT, found X" at the current offset. */
static void found(sz_parser *p, const char *what) {
    int c = peekc(p);
    if (c < 0)
        perr(p, p->pos, "expected %s, found the end of the text", what);
    else if (c > ' ' && c < 127)
        perr(p, p->pos, "expected %s, found '%c'", what, (char)c);
    else
        perr(p, p->pos, "expected %s, found byte 0x%02x", what, (unsigned)c);
}

static bool expect(sz_parser *p, char c, const char *what) {
    if (peekc(p) == c) {
        p->pos++;
        return true;
    }
    found(p, what);
    return false;
}

/* INT := '-'? DIGIT+   (fits int64; no leading zero, no -0: one spelling per value) */
static bool parse_int(sz_parser *p, int64_t *out) {
    size_t start = p->pos;
    bool neg = false;
    if (peekc(p) == '-') {
        neg = true;
        p->pos++;
    }
    if (!is_digit(peekc(p))) {
        perr(p, p->pos, "expected a digit");
        return false;
    }
    if (peekc(p) == '0' && p->pos + 1 < p->len && is_digit((unsigned char)p->s[p->pos + 1])) {
        perr(p, p->pos, "integer with a leading zero");
        return false;
    }
    int64_t v = 0; /* accumulated negatively so that INT64_MIN parses */
    while (is_digit(peekc(p))) {
        int dgt = peekc(p) - '0';
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_sub_overflow(v, dgt, &v)) {
            perr(p, start, "integer does not fit in 64 bits");
            return false;
        }
        p->pos++;
    }
    if (neg && v == 0) {
        perr(p, start, "negative zero");
        return false;
    }
    if (!neg && v == INT64_MIN) {
        perr(p, start, "integer does not fit in 64 bits");
        return false;
    }
    *out = neg ? v : -v;
    return true;
}

/* A non-negative integer no larger than max (parameter index, dimension, variable). */
static bool parse_index(sz_parser *p, int64_t max, const char *what, int64_t *out) {
    size_t start = p->pos;
    if (!is_digit(peekc(p))) {
        perr(p, p->pos, "expected %s (a non-negative integer)", what);
        return false;
    }
    if (!parse_int(p, out))
        return false;
    if (*out > max) {
        perr(p, start, "%s %lld is out of range (at most %lld)", what, (long long)*out,
             (long long)max);
        return false;
    }
    return true;
}

/* vN */
static bool parse_varname(sz_parser *p, int64_t *out) {
    if (!expect(p, 'v', "a variable 'vN'"))
        return false;
    return parse_index(p, INT_MAX, "variable number", out);
}

static sz_expr *parse_expr(sz_parser *p);

/* ' ' E */
static sz_expr *parse_arg(sz_parser *p) {
    if (!expect(p, ' ', "a space before the next operand"))
        return NULL;
    return parse_expr(p);
}

static bool var_bound(const sz_parser *p, int64_t v) {
    for (int i = 0; i < p->nbound; i++)
        if (p->bound[i] == v)
            return true;
    return false;
}

/* '(' KEYWORD ... ')' after the '(' */
static sz_expr *parse_form(sz_parser *p, size_t open) {
    size_t kw = p->pos;
    while (peekc(p) >= 'a' && peekc(p) <= 'z')
        p->pos++;
    size_t kwlen = p->pos - kw;
    sz_op op = SZ_CONST;
    for (int i = SZ_PARAM; i <= SZ_MAXOVER; i++)
        if (strlen(sz_names[i]) == kwlen && memcmp(sz_names[i], p->s + kw, kwlen) == 0)
            op = (sz_op)i;
    if (op == SZ_CONST) {
        perr(p, kw, "expected param, dim, read, add, sub, mul, div, min, max or maxover after "
                    "'(' (opened at offset %zu)", open);
        return NULL;
    }
    sz_expr *e = NULL;
    int64_t n, d;
    switch (op) {
    case SZ_PARAM:
        if (!expect(p, ' ', "a space") || !parse_index(p, INT_MAX, "parameter index", &n))
            return NULL;
        e = sz_param(p->a, (int)n);
        break;
    case SZ_DIM:
        if (!expect(p, ' ', "a space") || !parse_index(p, INT_MAX, "parameter index", &n) ||
            !expect(p, ' ', "a space") ||
            !parse_index(p, KERN_MAX_RANK - 1, "dimension", &d))
            return NULL;
        e = sz_dim(p->a, (int)n, (int)d);
        break;
    case SZ_READ: {
        if (!expect(p, ' ', "a space") || !parse_index(p, INT_MAX, "parameter index", &n))
            return NULL;
        sz_expr *idx[KERN_MAX_RANK];
        int nidx = 0;
        while (peekc(p) == ' ') {
            if (nidx == KERN_MAX_RANK) {
                perr(p, p->pos, "read takes at most %d indices", KERN_MAX_RANK);
                return NULL;
            }
            if (!(idx[nidx++] = parse_arg(p)))
                return NULL;
        }
        if (nidx == 0) {
            perr(p, p->pos, "read needs at least one index");
            return NULL;
        }
        e = sz_read(p->a, (int)n, idx, nidx);
        break;
    }
    case SZ_MAXOVER: {
        size_t at;
        sz_expr *lo, *hi, *body;
        if (!expect(p, ' ', "a space"))
            return NULL;
        at = p->pos;
        if (!parse_varname(p, &n))
            return NULL;
        if (var_bound(p, n)) {
            perr(p, at, "variable v%lld is already bound by an enclosing maxover", (long long)n);
            return NULL;
        }
        if (!(lo = parse_arg(p)) || !(hi = parse_arg(p)))
            return NULL;
        p->bound[p->nbound++] = (int)n; /* nbound <= depth < SZ_MAX_DEPTH */
        body = parse_arg(p);
        p->nbound--;
        if (!body)
            return NULL;
        e = sz_maxover(p->a, (int)n, lo, hi, body);
        break;
    }
    default: {
        sz_expr *x, *y;
        if (!(x = parse_arg(p)) || !(y = parse_arg(p)))
            return NULL;
        e = sz_bin(p->a, op, x, y);
        break;
    }
    }
    if (peekc(p) == ' ') {
        perr(p, p->pos, "too many operands for %s", sz_names[op]);
        return NULL;
    }
    if (!expect(p, ')', "')'"))
        return NULL;
    return e;
}

/* E := INT | vN | '(' FORM ')' */
static sz_expr *parse_expr(sz_parser *p) {
    int c = peekc(p);
    if (c == '(') {
        size_t open = p->pos++;
        if (++p->depth >= SZ_MAX_DEPTH) {
            perr(p, open, "nesting deeper than %d", SZ_MAX_DEPTH - 1);
            return NULL;
        }
        sz_expr *e = parse_form(p, open);
        p->depth--;
        return e;
    }
    if (c == 'v') {
        size_t at = p->pos;
        int64_t n;
        if (!parse_varname(p, &n))
            return NULL;
        if (!var_bound(p, n)) {
            perr(p, at, "variable v%lld is not bound by an enclosing maxover", (long long)n);
            return NULL;
        }
        return sz_var(p->a, (int)n);
    }
    if (c == '-' || is_digit(c)) {
        int64_t v;
        if (!parse_int(p, &v))
            return NULL;
        return sz_const(p->a, v);
    }
    found(p, "an expression");
    return NULL;
}

sz_expr *sz_parse(arena *a, const char *text, size_t len, char *err, size_t errlen) {
    sz_parser p = {.a = a, .s = text ? text : "", .len = text ? len : 0, .err = err,
                   .errlen = errlen};
    if (err && errlen)
        err[0] = 0;
    sz_expr *e = parse_expr(&p);
    if (e && p.pos != p.len) {
        perr(&p, p.pos, "unexpected text after the expression");
        e = NULL;
    }
    return p.failed ? NULL : e;
}

/* ---- Analysis ---------------------------------------------------------------------- */

bool sz_reads_memory(const sz_expr *e) {
    if (e->op == SZ_READ)
        return true;
    for (int i = 0; i < e->nkids; i++)
        if (sz_reads_memory(e->kids[i]))
            return true;
    return false;
}

/* Whether e depends on any variable of vars[0..n): directly, or through the range of a
 * maxover (whose own variable then depends on it too). Inside a maxover that rebinds a
 * variable of the set, that variable is no longer the outer one. */
static bool depends(const sz_expr *e, const int64_t *vars, int n, bool in_read_only,
                    bool in_read);

static bool depends_maxover(const sz_expr *e, const int64_t *vars, int n, bool in_read_only,
                            bool in_read) {
    int64_t inner[SZ_MAX_EVAL_DEPTH + 1];
    int m = 0;
    bool range = depends(e->kids[0], vars, n, in_read_only, in_read) ||
                 depends(e->kids[1], vars, n, in_read_only, in_read);
    if (range)
        return true;
    bool range_any = depends(e->kids[0], vars, n, false, false) ||
                     depends(e->kids[1], vars, n, false, false);
    if (n > SZ_MAX_EVAL_DEPTH)
        return true; /* deeper than evaluation goes: say "depends", the safe answer */
    for (int i = 0; i < n; i++)
        if (vars[i] != e->v)
            inner[m++] = vars[i];
    if (range_any)
        inner[m++] = e->v; /* the range depends on the set: so does the variable */
    return depends(e->kids[2], inner, m, in_read_only, in_read);
}

/* in_read_only: count only occurrences inside a read's index. */
static bool depends(const sz_expr *e, const int64_t *vars, int n, bool in_read_only,
                    bool in_read) {
    switch (e->op) {
    case SZ_VAR:
        if (in_read_only && !in_read)
            return false;
        for (int i = 0; i < n; i++)
            if (vars[i] == e->v)
                return true;
        return false;
    case SZ_MAXOVER:
        return depends_maxover(e, vars, n, in_read_only, in_read);
    default:
        for (int i = 0; i < e->nkids; i++)
            if (depends(e->kids[i], vars, n, in_read_only, in_read || e->op == SZ_READ))
                return true;
        return false;
    }
}

static bool mentions(const sz_expr *e, int64_t v) { return depends(e, &v, 1, false, false); }
static bool reads_through(const sz_expr *e, int64_t v) { return depends(e, &v, 1, true, false); }

/* How an expression depends on a set of variables, from best to worst. PIECEWISE: convex
 * on each piece between the points where a nested maxover's range (affine in the set)
 * becomes empty. */
typedef enum { SH_CONST, SH_AFFINE, SH_CONVEX, SH_PIECEWISE, SH_OTHER } sz_shape;

static sz_shape shape_max(sz_shape a, sz_shape b) { return a > b ? a : b; }

static sz_shape shape(const sz_expr *e, const int64_t *vars, int n) {
    if (!depends(e, vars, n, false, false))
        return SH_CONST;
    switch (e->op) {
    case SZ_VAR:
        return SH_AFFINE; /* it depends on the set: it is in the set */
    case SZ_ADD:
        return shape_max(shape(e->kids[0], vars, n), shape(e->kids[1], vars, n));
    case SZ_SUB: {
        sz_shape y = shape(e->kids[1], vars, n);
        return y <= SH_AFFINE ? shape_max(shape(e->kids[0], vars, n), y) : SH_OTHER;
    }
    case SZ_MUL:
        for (int i = 0; i < 2; i++) {
            const sz_expr *k = e->kids[i], *o = e->kids[1 - i];
            if (depends(k, vars, n, false, false))
                continue;
            sz_shape s = shape(o, vars, n);
            if (s <= SH_AFFINE || (k->op == SZ_CONST && k->v >= 0))
                return s; /* a non-negative factor keeps convexity */
        }
        return SH_OTHER;
    case SZ_MAX:
        return shape_max(SH_CONVEX, shape_max(shape(e->kids[0], vars, n),
                                              shape(e->kids[1], vars, n)));
    case SZ_MAXOVER: {
        sz_shape range = shape_max(shape(e->kids[0], vars, n), shape(e->kids[1], vars, n));
        if (range == SH_CONST) {
            /* A pointwise maximum of convex functions (the range does not move). */
            int64_t inner[SZ_MAX_EVAL_DEPTH];
            int m = 0;
            if (n > SZ_MAX_EVAL_DEPTH)
                return SH_OTHER;
            for (int i = 0; i < n; i++)
                if (vars[i] != e->v) /* a rebound variable is not the outer one */
                    inner[m++] = vars[i];
            return shape(e->kids[2], inner, m) <= SH_CONVEX ? SH_CONVEX : SH_OTHER;
        }
        if (range > SH_AFFINE || n >= SZ_MAX_EVAL_DEPTH)
            return SH_OTHER;
        /* A maximum over a segment whose ends move affinely, of a function jointly convex
         * in the set and the segment's variable: the larger of its values at the two
         * ends, a convex function where the segment is not empty (0 elsewhere). */
        int64_t joint[SZ_MAX_EVAL_DEPTH + 1];
        memcpy(joint, vars, sizeof(int64_t) * (size_t)n);
        joint[n] = e->v;
        return shape(e->kids[2], joint, n + 1) <= SH_CONVEX ? SH_PIECEWISE : SH_OTHER;
    }
    default: /* min, div, read (and leaves, which never depend on the set) */
        return SH_OTHER;
    }
}

sz_rule sz_maxover_rule(const sz_expr *m) {
    kern_assert(m->op == SZ_MAXOVER);
    const sz_expr *body = m->kids[2];
    if (reads_through(body, m->v))
        return SZ_RULE_SCAN;
    switch (shape(body, &m->v, 1)) {
    case SH_CONST: return SZ_RULE_POINT;
    case SH_AFFINE:
    case SH_CONVEX: return SZ_RULE_ENDPOINTS;
    case SH_PIECEWISE: return SZ_RULE_PIECEWISE;
    case SH_OTHER: break;
    }
    return SZ_RULE_OTHER;
}

/* ---- Evaluation -------------------------------------------------------------------- */

typedef struct sz_iv {
    int64_t lo, hi;
} sz_iv;

enum {
    SZ_SMALL_SCAN = 4096,        /* a range this short is scanned whatever its body */
    SZ_WORK_BUDGET = 1 << 22,    /* nodes: past this, short ranges are no longer scanned */
    SZ_MAX_CANDIDATES = 32,      /* points of a piecewise convex body */
};

typedef struct sz_eval_ctx {
    const sz_arg *args;
    int nargs;
    char *err;
    size_t errlen;
    bool failed;
    int depth;
    int64_t work; /* nodes evaluated, against SZ_WORK_BUDGET */
    struct {
        int64_t var;
        sz_iv val;
    } bind[SZ_MAX_EVAL_DEPTH];
    int nbind;
} sz_eval_ctx;

__attribute__((format(printf, 2, 3))) static bool eerr(sz_eval_ctx *c, const char *fmt, ...) {
    if (c->failed)
        return false;
    c->failed = true;
    if (c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return false;
}

static bool overflow(sz_eval_ctx *c) { return eerr(c, "SizeExpr value overflows int64"); }

static const sz_arg *get_arg(sz_eval_ctx *c, const sz_expr *e) {
    if (e->v < 0 || e->v >= c->nargs || !c->args[e->v].type) {
        eerr(c, "SizeExpr refers to parameter %lld, but the kernel has %d", (long long)e->v,
             c->nargs);
        return NULL;
    }
    return &c->args[e->v];
}

static bool eval(sz_eval_ctx *c, const sz_expr *e, sz_iv *out);

static bool eval_read(sz_eval_ctx *c, const sz_expr *e, sz_iv *out) {
    const sz_arg *a = get_arg(c, e);
    if (!a)
        return false;
    const kern_type *t = a->type;
    if (!ty_is_array(t))
        return eerr(c, "SizeExpr reads parameter %lld, which is not an array", (long long)e->v);
    kern_tykind k = t->elem->kind;
    if (k != TY_I32 && k != TY_U32 && k != TY_I64 && k != TY_BOOL)
        return eerr(c, "SizeExpr reads parameter %lld of type %s (not an integer array)",
                    (long long)e->v, t->name);
    if (e->nkids != t->rank)
        return eerr(c, "SizeExpr reads parameter %lld with %d indices, but its rank is %d",
                    (long long)e->v, e->nkids, t->rank);
    int64_t off = 0;
    for (int d = 0; d < e->nkids; d++) {
        sz_iv i;
        if (!eval(c, e->kids[d], &i))
            return false;
        if (i.lo != i.hi)
            return eerr(c, "SizeExpr reads parameter %lld at an index known only as a range",
                        (long long)e->v);
        if (i.lo < 0 || i.lo >= a->shape[d])
            return eerr(c, "SizeExpr reads parameter %lld out of bounds: index %lld of "
                           "dimension %d (extent %lld)",
                        (long long)e->v, (long long)i.lo, d, (long long)a->shape[d]);
        if (__builtin_mul_overflow(off, a->shape[d], &off) ||
            __builtin_add_overflow(off, i.lo, &off))
            return overflow(c);
    }
    if (!a->data)
        return eerr(c, "SizeExpr reads parameter %lld, whose data is not readable on the host",
                    (long long)e->v);
    const char *p = (const char *)a->data;
    int64_t v;
    switch (k) {
    case TY_I32: {
        int32_t x;
        memcpy(&x, p + off * 4, 4);
        v = x;
        break;
    }
    case TY_U32: {
        uint32_t x;
        memcpy(&x, p + off * 4, 4);
        v = x;
        break;
    }
    case TY_I64:
        memcpy(&v, p + off * 8, 8);
        break;
    default: /* bool */
        v = p[off] != 0;
        break;
    }
    out->lo = out->hi = v;
    return true;
}

static bool push_bind(sz_eval_ctx *c, int64_t var, sz_iv val) {
    if (c->nbind == SZ_MAX_EVAL_DEPTH)
        return eerr(c, "SizeExpr nests too many maxovers");
    c->bind[c->nbind].var = var;
    c->bind[c->nbind].val = val;
    c->nbind++;
    return true;
}

/* The body at v = x (a point), merged into the running maximum *acc. */
static bool eval_at(sz_eval_ctx *c, const sz_expr *e, int64_t x, sz_iv *acc, bool first) {
    sz_iv r;
    if (!push_bind(c, e->v, (sz_iv){x, x}))
        return false;
    bool ok = eval(c, e->kids[2], &r);
    c->nbind--;
    if (!ok)
        return false;
    if (first || r.lo > acc->lo)
        acc->lo = r.lo;
    if (first || r.hi > acc->hi)
        acc->hi = r.hi;
    return true;
}

/* The body over v in [x0, x1] by interval arithmetic, merged into *acc (first: *acc is
 * unset); maybe_empty: the range may also be empty, and the maxover then 0. */
static bool eval_span(sz_eval_ctx *c, const sz_expr *e, int64_t x0, int64_t x1, bool maybe_empty,
                      sz_iv *acc, bool first) {
    sz_iv r;
    if (!push_bind(c, e->v, (sz_iv){x0, x1}))
        return false;
    bool ok = eval(c, e->kids[2], &r);
    c->nbind--;
    if (!ok)
        return false;
    if (maybe_empty) {
        if (r.lo > 0)
            r.lo = 0;
        if (r.hi < 0)
            r.hi = 0;
    }
    if (first || r.lo > acc->lo)
        acc->lo = r.lo;
    if (first || r.hi > acc->hi)
        acc->hi = r.hi;
    return true;
}

/* Scans v over [a, b). Unless exact (reads through v), the work budget may run out: the
 * rest of the range is then bounded by interval arithmetic. */
static bool eval_scan(sz_eval_ctx *c, const sz_expr *e, int64_t a, int64_t b, bool exact,
                      sz_iv *out) {
    for (int64_t x = a; x < b; x++) {
        if (!exact && c->work > SZ_WORK_BUDGET)
            return eval_span(c, e, x, b - 1, false, out, x == a);
        if (!eval_at(c, e, x, out, x == a))
            return false;
    }
    return true;
}

/* Where the range of nested maxover m (affine in v) turns empty within [a, b - 1]: adds
 * the last point of one side and the first of the other to cand. False when the points
 * cannot be found exactly (then the caller falls back). */
static bool empty_boundary(sz_eval_ctx *c, const sz_expr *e, const sz_expr *m, int64_t a,
                           int64_t b, int64_t *cand, int *ncand) {
    int64_t d[2];
    if (b - a < 2)
        return true; /* the endpoints are every point */
    for (int i = 0; i < 2; i++) {
        sz_iv lo, hi;
        if (!push_bind(c, e->v, (sz_iv){a + i, a + i}))
            return false;
        bool ok = eval(c, m->kids[0], &lo) && eval(c, m->kids[1], &hi);
        c->nbind--;
        if (!ok || lo.lo != lo.hi || hi.lo != hi.hi ||
            __builtin_sub_overflow(hi.lo, lo.lo, &d[i]))
            return false;
    }
    int64_t slope, x, q;
    if (__builtin_sub_overflow(d[1], d[0], &slope))
        return false;
    /* The length is d[0] + slope * (x - a); the range is non-empty while it is >= 1. */
    if (slope < 0 && d[0] >= 1) {
        if (slope == INT64_MIN)
            return false;
        q = (d[0] - 1) / -slope; /* last non-empty: a + q */
        if (__builtin_add_overflow(a, q, &x))
            return false;
    } else if (slope > 0 && d[0] < 1) {
        if (__builtin_sub_overflow(1, d[0], &q) || __builtin_add_overflow(q, slope - 1, &q))
            return false;
        q /= slope; /* first non-empty: a + q */
        if (__builtin_add_overflow(a, q - 1, &x))
            return false;
    } else {
        return true; /* empty everywhere or nowhere */
    }
    if (*ncand + 2 > SZ_MAX_CANDIDATES)
        return false;
    for (int i = 0; i < 2; i++) /* x and x + 1, clipped to the range */
        cand[(*ncand)++] = x + i < a ? a : x + i > b - 1 ? b - 1 : x + i;
    return true;
}

/* Candidate points of a piecewise convex body: the boundaries of the nested maxovers
 * (those not inside another maxover's body) whose range depends on v. */
static bool piecewise_points(sz_eval_ctx *c, const sz_expr *e, const sz_expr *x, int64_t a,
                             int64_t b, int64_t *cand, int *ncand) {
    if (x->op == SZ_MAXOVER) {
        if (!mentions(x->kids[0], e->v) && !mentions(x->kids[1], e->v))
            return true;
        return empty_boundary(c, e, x, a, b, cand, ncand);
    }
    for (int i = 0; i < x->nkids; i++)
        if (!piecewise_points(c, e, x->kids[i], a, b, cand, ncand))
            return false;
    return true;
}

static bool eval_maxover(sz_eval_ctx *c, const sz_expr *e, sz_iv *out) {
    sz_iv lo, hi;
    if (!eval(c, e->kids[0], &lo) || !eval(c, e->kids[1], &hi))
        return false;
    if (lo.lo >= hi.hi) { /* empty for sure */
        *out = (sz_iv){0, 0};
        return true;
    }
    if (lo.lo != lo.hi || hi.lo != hi.hi) /* the range is only known as intervals */
        return eval_span(c, e, lo.lo, hi.hi - 1, lo.hi >= hi.lo, out, true);
    int64_t a = lo.lo, b = hi.lo;
    switch (sz_maxover_rule(e)) {
    case SZ_RULE_SCAN: return eval_scan(c, e, a, b, true, out);
    case SZ_RULE_POINT: return eval_at(c, e, a, out, true);
    case SZ_RULE_ENDPOINTS: return eval_at(c, e, a, out, true) && eval_at(c, e, b - 1, out, false);
    case SZ_RULE_PIECEWISE: {
        int64_t cand[SZ_MAX_CANDIDATES];
        int ncand = 0;
        if (piecewise_points(c, e, e->kids[2], a, b, cand, &ncand)) {
            bool ok = eval_at(c, e, a, out, true) && eval_at(c, e, b - 1, out, false);
            for (int i = 0; ok && i < ncand; i++)
                ok = eval_at(c, e, cand[i], out, false);
            return ok;
        }
        if (c->failed)
            return false;
        break;
    }
    case SZ_RULE_OTHER: break;
    }
    if (b - a <= SZ_SMALL_SCAN && c->work <= SZ_WORK_BUDGET)
        return eval_scan(c, e, a, b, false, out);
    return eval_span(c, e, a, b - 1, false, out, true);
}

static bool div_checked(sz_eval_ctx *c, int64_t x, int64_t y, int64_t *q) {
    if (x == INT64_MIN && y == -1)
        return overflow(c);
    *q = x / y;
    return true;
}

static bool eval_bin(sz_eval_ctx *c, sz_op op, sz_iv x, sz_iv y, sz_iv *out) {
    switch (op) {
    case SZ_ADD:
        if (__builtin_add_overflow(x.lo, y.lo, &out->lo) ||
            __builtin_add_overflow(x.hi, y.hi, &out->hi))
            return overflow(c);
        return true;
    case SZ_SUB:
        if (__builtin_sub_overflow(x.lo, y.hi, &out->lo) ||
            __builtin_sub_overflow(x.hi, y.lo, &out->hi))
            return overflow(c);
        return true;
    case SZ_MIN:
        out->lo = x.lo < y.lo ? x.lo : y.lo;
        out->hi = x.hi < y.hi ? x.hi : y.hi;
        return true;
    case SZ_MAX:
        out->lo = x.lo > y.lo ? x.lo : y.lo;
        out->hi = x.hi > y.hi ? x.hi : y.hi;
        return true;
    case SZ_MUL:
    case SZ_DIV: {
        /* Products and truncating quotients are monotone in each operand on each sign:
         * the extremes are among the four corners. */
        if (op == SZ_DIV && y.lo <= 0 && y.hi >= 0)
            return eerr(c, "SizeExpr divides by zero");
        int64_t xs[2] = {x.lo, x.hi}, ys[2] = {y.lo, y.hi};
        for (int i = 0; i < 4; i++) {
            int64_t r = 0;
            if (op == SZ_MUL) {
                if (__builtin_mul_overflow(xs[i >> 1], ys[i & 1], &r))
                    return overflow(c);
            } else if (!div_checked(c, xs[i >> 1], ys[i & 1], &r)) {
                return false;
            }
            if (i == 0 || r < out->lo)
                out->lo = r;
            if (i == 0 || r > out->hi)
                out->hi = r;
        }
        return true;
    }
    default:
        kern_unreachable("not a binary SizeExpr op");
    }
}

static bool eval(sz_eval_ctx *c, const sz_expr *e, sz_iv *out) {
    if (c->depth >= SZ_MAX_EVAL_DEPTH)
        return eerr(c, "SizeExpr nested too deeply");
    c->depth++;
    c->work++;
    bool ok = true;
    switch (e->op) {
    case SZ_CONST:
        out->lo = out->hi = e->v;
        break;
    case SZ_VAR: {
        int i = c->nbind - 1;
        while (i >= 0 && c->bind[i].var != e->v)
            i--;
        if (i < 0)
            ok = eerr(c, "SizeExpr variable v%lld is not bound by a maxover", (long long)e->v);
        else
            *out = c->bind[i].val;
        break;
    }
    case SZ_PARAM: {
        const sz_arg *a = get_arg(c, e);
        if (!a)
            ok = false;
        else if (a->type->kind == TY_BOOL)
            out->lo = out->hi = a->scalar != 0;
        else if (ty_is_int(a->type))
            out->lo = out->hi = a->scalar;
        else
            ok = eerr(c, "SizeExpr uses parameter %lld of type %s as an integer",
                      (long long)e->v, a->type->name);
        break;
    }
    case SZ_DIM: {
        const sz_arg *a = get_arg(c, e);
        if (!a)
            ok = false;
        else if (!ty_is_array(a->type) || e->d < 0 || e->d >= a->type->rank)
            ok = eerr(c, "SizeExpr asks for dimension %d of parameter %lld of type %s", e->d,
                      (long long)e->v, a->type->name);
        else
            out->lo = out->hi = a->shape[e->d];
        break;
    }
    case SZ_READ:
        ok = eval_read(c, e, out);
        break;
    case SZ_MAXOVER:
        ok = eval_maxover(c, e, out);
        break;
    default: {
        sz_iv x, y;
        ok = eval(c, e->kids[0], &x) && eval(c, e->kids[1], &y) &&
             eval_bin(c, e->op, x, y, out);
        break;
    }
    }
    c->depth--;
    return ok;
}

bool sz_eval(const sz_expr *e, const sz_arg *args, int nargs, int64_t *out, char *err,
             size_t errlen) {
    sz_eval_ctx c = {.args = args, .nargs = nargs, .err = err, .errlen = errlen};
    sz_iv r;
    if (err && errlen)
        err[0] = 0;
    if (!eval(&c, e, &r))
        return false;
    *out = r.hi;
    return true;
}
