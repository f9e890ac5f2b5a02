/* ad_size.c - the adstack capacity of a loop: its trip count as a SizeExpr
 * (docs/reference.md section 9; common/sizeexpr.h; docs/sizeexpr.md).
 *
 * K.grad recomputes inner loops once per outer iteration, so a loop's adstacks only ever
 * hold one execution of that loop: the capacity is the loop's own trip count
 * max(0, hi - lo), maximized over the enclosing loop and parallel indices it depends on.
 * An early-exit for runs at most hi - lo iterations, so it is sized the same way.
 *
 * The bounds are followed along their def chains into an affine form
 * const + sum(coef * atom), where an atom is a parameter (param P), an extent (dim P D),
 * an element of an integer array parameter (read P idx...), a loop or parallel index
 * (a variable), or a min/max/div/non-constant product of two such forms. Integer casts
 * are identities. Anything else (floats, loop-carried values, select, rem, loads from
 * arrays the kernel writes, ...) cannot be bounded: NULL. Working on the affine form
 * makes the bounds tight: `for j in i..i+3` gives 3, and max(0, .) is kept only when the
 * difference is not proven non-negative (each index replaced by the end of its range
 * that minimizes the difference; extents, and min/max/div/products of non-negative
 * parts, are non-negative).
 *
 * The difference is then wrapped, innermost first, in a maxover for every enclosing
 * index it mentions (a range may mention outer indices, which are wrapped later).
 * Variables are numbered from the outermost maxover, v0. A while loop gives NULL.
 *
 * The same forms give the range of an index (ad_value_range, for the tape's access ranges
 * in the metadata): the affine form's smallest and largest values, each index term
 * replaced, innermost first, by the end of its range that makes it smallest or largest.
 *
 * Values are computed as mathematical integers: a bound whose computation wraps around
 * in the kernel's integer type is not modeled. Reads the kernel only; the tree goes to
 * the caller's arena as a tree (the IR's adstack table, the metadata), never as text. */
#include <string.h>

#include "passes.h"

#include "../common/sizeexpr.h"

enum { AD_SIZE_DEPTH = 64, AD_SIZE_MAXVARS = 64 };

typedef struct term {
    int64_t coef;
    sz_expr *atom;
} term;

/* c + sum of coef * atom; no atom twice, no zero coefficient. */
typedef struct lin {
    int64_t c;
    term *t;
    int n;
} lin;

/* An enclosing index: the value, its range (operands of the loop / parallel op). */
typedef struct ivar {
    const ir_value *val;
    const ir_value *lo, *hi;
    int depth; /* number of ops enclosing the index's loop */
} ivar;

typedef struct sizer {
    const ir_kernel *k;
    arena *a; /* scratch */
    ivar vars[AD_SIZE_MAXVARS];
    int nvars;
    int depth;
} sizer;

/* ---- Affine forms ------------------------------------------------------------------- */

static lin *lin_new(sizer *s, int64_t c, int cap) {
    lin *l = ARENA_NEW(s->a, lin);
    l->c = c;
    l->t = cap ? ARENA_ARRAY(s->a, term, cap) : NULL;
    return l;
}

static lin *lin_atom(sizer *s, sz_expr *atom) {
    lin *l = lin_new(s, 0, 1);
    l->t[0] = (term){1, atom};
    l->n = 1;
    return l;
}

/* Adds coef * atom to l (l has room). False on overflow. */
static bool lin_addterm(lin *l, int64_t coef, sz_expr *atom) {
    for (int i = 0; i < l->n; i++) {
        if (!sz_equal(l->t[i].atom, atom))
            continue;
        if (__builtin_add_overflow(l->t[i].coef, coef, &l->t[i].coef))
            return false;
        if (l->t[i].coef == 0) {
            memmove(&l->t[i], &l->t[i + 1], sizeof(term) * (size_t)(l->n - i - 1));
            l->n--;
        }
        return true;
    }
    l->t[l->n++] = (term){coef, atom};
    return true;
}

/* x + f * y; NULL on overflow. */
static lin *lin_axpy(sizer *s, const lin *x, int64_t f, const lin *y) {
    lin *r = lin_new(s, x->c, x->n + y->n);
    int64_t fc;
    if (__builtin_mul_overflow(f, y->c, &fc) || __builtin_add_overflow(r->c, fc, &r->c))
        return NULL;
    for (int i = 0; i < x->n; i++)
        r->t[r->n++] = x->t[i];
    for (int i = 0; i < y->n; i++)
        if (__builtin_mul_overflow(f, y->t[i].coef, &fc) || !lin_addterm(r, fc, y->t[i].atom))
            return NULL;
    return r;
}

static lin *lin_scale(sizer *s, const lin *x, int64_t f) {
    lin zero = {0};
    return f == 0 ? lin_new(s, 0, 0) : lin_axpy(s, &zero, f, x);
}

/* One term's expression, with the magnitude of its coefficient. */
static sz_expr *term_expr(sizer *s, const term *t) {
    int64_t mag = t->coef > 0 ? t->coef : -t->coef;
    return mag == 1 ? t->atom : sz_bin(s->a, SZ_MUL, t->atom, sz_const(s->a, mag));
}

/* The expression of an affine form: the positive terms, then the negative ones
 * subtracted, then the constant: (sub (add (add a (mul b 2)) 3) c) ...; with no positive
 * term the constant comes first: (sub 5 v0). NULL on overflow. */
static sz_expr *lin_expr(sizer *s, const lin *l) {
    sz_expr *e = NULL;
    bool const_used = false;
    for (int i = 0; i < l->n; i++)
        if (l->t[i].coef > 0)
            e = e ? sz_bin(s->a, SZ_ADD, e, term_expr(s, &l->t[i])) : term_expr(s, &l->t[i]);
    if (e && l->c > 0)
        e = sz_bin(s->a, SZ_ADD, e, sz_const(s->a, l->c));
    if (!e) {
        e = sz_const(s->a, l->c);
        const_used = true;
    }
    for (int i = 0; i < l->n; i++) {
        if (l->t[i].coef == INT64_MIN)
            return NULL;
        if (l->t[i].coef < 0)
            e = sz_bin(s->a, SZ_SUB, e, term_expr(s, &l->t[i]));
    }
    if (!const_used && l->c < 0) {
        if (l->c == INT64_MIN)
            return NULL;
        e = sz_bin(s->a, SZ_SUB, e, sz_const(s->a, -l->c));
    }
    return e;
}

/* ---- Following the def chains -------------------------------------------------------- */

static int var_of(sizer *s, const ir_value *v, const ir_value *lo, const ir_value *hi) {
    for (int i = 0; i < s->nvars; i++)
        if (s->vars[i].val == v)
            return i;
    if (s->nvars == AD_SIZE_MAXVARS)
        return -1;
    int depth = 0;
    for (const ir_op *op = v->region->parent; op; op = op->parent->parent)
        depth++;
    s->vars[s->nvars] = (ivar){v, lo, hi, depth};
    return s->nvars++;
}

static bool param_arg(const sizer *s, const ir_value *v) {
    return !v->def && v->region == s->k->body;
}

/* Whether the kernel stores to or updates array parameter p anywhere. */
static bool writes_array(const ir_region *r, const ir_value *p) {
    ir_foreach_op(op, r) {
        switch (op->code) {
        case IR_STORE:
        case IR_ATOMIC_ADD:
        case IR_ATOMIC_SUB:
        case IR_ATOMIC_MIN:
        case IR_ATOMIC_MAX:
        case IR_ATOMIC_XCHG:
        case IR_ATOMIC_CAS:
            if (op->operands[0] == p)
                return true;
            break;
        default: break;
        }
        for (uint32_t i = 0; i < op->nregions; i++)
            if (writes_array(op->regions[i], p))
                return true;
    }
    return false;
}

static lin *lin_of(sizer *s, const ir_value *v);

static sz_expr *expr_of(sizer *s, const ir_value *v) {
    lin *l = lin_of(s, v);
    return l ? lin_expr(s, l) : NULL;
}

static lin *lin_const(sizer *s, int64_t c) { return lin_new(s, c, 0); }

/* min or max of two forms: folded when their difference is a constant. */
static lin *lin_minmax(sizer *s, ir_opcode code, lin *x, lin *y) {
    lin *d = lin_axpy(s, x, -1, y);
    if (!d)
        return NULL;
    if (d->n == 0) /* x - y = d->c */
        return (code == IR_MIN) == (d->c <= 0) ? x : y;
    sz_expr *ex = lin_expr(s, x), *ey = lin_expr(s, y);
    if (!ex || !ey)
        return NULL;
    return lin_atom(s, sz_bin(s->a, code == IR_MIN ? SZ_MIN : SZ_MAX, ex, ey));
}

static lin *lin_arg(sizer *s, const ir_value *v) {
    const ir_op *owner = v->region->parent;
    if (param_arg(s, v))
        return lin_atom(s, sz_param(s->a, (int)v->index));
    if (!owner)
        return NULL;
    int var = -1;
    if (owner->code == IR_PARALLEL)
        var = var_of(s, v, owner->operands[2 * v->index], owner->operands[2 * v->index + 1]);
    else if (owner->code == IR_FOR && v->index == 0)
        var = var_of(s, v, owner->operands[0], owner->operands[1]);
    else
        return NULL; /* a loop-carried value */
    return var < 0 ? NULL : lin_atom(s, sz_var(s->a, var));
}

static lin *lin_op(sizer *s, const ir_op *op) {
    ir_value *const *o = op->operands;
    lin *x, *y;
    switch (op->code) {
    case IR_CONST: return lin_const(s, op->imm.i);
    case IR_CAST: return ty_is_int(o[0]->type) ? lin_of(s, o[0]) : NULL;
    case IR_ADD:
    case IR_SUB:
        if (!(x = lin_of(s, o[0])) || !(y = lin_of(s, o[1])))
            return NULL;
        return lin_axpy(s, x, op->code == IR_ADD ? 1 : -1, y);
    case IR_MUL:
        if (!(x = lin_of(s, o[0])) || !(y = lin_of(s, o[1])))
            return NULL;
        if (x->n == 0)
            return lin_scale(s, y, x->c);
        if (y->n == 0)
            return lin_scale(s, x, y->c);
        return lin_atom(s, sz_bin(s->a, SZ_MUL, lin_expr(s, x), lin_expr(s, y)));
    case IR_DIV:
        if (!(x = lin_of(s, o[0])) || !(y = lin_of(s, o[1])))
            return NULL;
        if (y->n == 0 && y->c == 0)
            return NULL; /* undefined in the kernel */
        if (y->n == 0 && y->c == 1)
            return x;
        if (x->n == 0 && y->n == 0)
            return x->c == INT64_MIN && y->c == -1 ? NULL : lin_const(s, x->c / y->c);
        return lin_atom(s, sz_bin(s->a, SZ_DIV, lin_expr(s, x), lin_expr(s, y)));
    case IR_MIN:
    case IR_MAX:
        if (!(x = lin_of(s, o[0])) || !(y = lin_of(s, o[1])))
            return NULL;
        return lin_minmax(s, op->code, x, y);
    case IR_CLAMP: { /* min(max(x, lo), hi) */
        lin *lo, *hi;
        if (!(x = lin_of(s, o[0])) || !(lo = lin_of(s, o[1])) || !(hi = lin_of(s, o[2])) ||
            !(x = lin_minmax(s, IR_MAX, x, lo)))
            return NULL;
        return lin_minmax(s, IR_MIN, x, hi);
    }
    case IR_DIM:
        if (!param_arg(s, o[0]))
            return NULL;
        return lin_atom(s, sz_dim(s->a, (int)o[0]->index, (int)op->imm.i));
    case IR_LOAD: {
        const ir_value *arr = o[0];
        if (!param_arg(s, arr) || !ty_is_int(arr->type->elem) || writes_array(s->k->body, arr))
            return NULL;
        sz_expr *idx[KERN_MAX_RANK];
        uint32_t n = op->noperands - 1;
        if (n > KERN_MAX_RANK)
            return NULL;
        for (uint32_t i = 0; i < n; i++)
            if (!(idx[i] = expr_of(s, o[1 + i])))
                return NULL;
        return lin_atom(s, sz_read(s->a, (int)arr->index, idx, (int)n));
    }
    default: return NULL;
    }
}

/* The affine form of integer value v; NULL when it cannot be followed. */
static lin *lin_of(sizer *s, const ir_value *v) {
    if (!ty_is_int(v->type) || s->depth >= AD_SIZE_DEPTH)
        return NULL;
    s->depth++;
    lin *l = v->def ? lin_op(s, v->def) : lin_arg(s, v);
    s->depth--;
    return l;
}

/* ---- Non-negativity, variables, maxovers --------------------------------------------- */

static bool mentions_var(const sz_expr *e, int var) {
    if (e->op == SZ_VAR)
        return e->v == var;
    for (int i = 0; i < e->nkids; i++)
        if (mentions_var(e->kids[i], var))
            return true;
    return false;
}

static bool lin_nonneg(sizer *s, lin *l);

/* Whether atom e is >= 0 wherever the indices lie in their ranges. */
static bool expr_nonneg(sizer *s, const sz_expr *e) {
    switch (e->op) {
    case SZ_CONST: return e->v >= 0;
    case SZ_DIM: return true;
    case SZ_VAR: {
        lin *lo = lin_of(s, s->vars[e->v].lo);
        return lo && lin_nonneg(s, lo);
    }
    case SZ_ADD:
    case SZ_MUL:
    case SZ_DIV:
    case SZ_MIN: return expr_nonneg(s, e->kids[0]) && expr_nonneg(s, e->kids[1]);
    case SZ_MAX: return expr_nonneg(s, e->kids[0]) || expr_nonneg(s, e->kids[1]);
    default: /* param, read, sub */ return false;
    }
}

/* The smallest (largest: the largest) value of l wherever every index lies in its range:
 * each index term is replaced, innermost first, by the end of its range that makes l
 * smallest (largest), until no index term is left (an index may still appear inside
 * another atom). NULL when a range's end cannot be followed. */
static lin *lin_extreme(sizer *s, lin *l, bool largest) {
    for (int round = 0; l && round < 2 * AD_SIZE_MAXVARS; round++) {
        int best = -1;
        for (int i = 0; i < l->n; i++)
            if (l->t[i].atom->op == SZ_VAR &&
                (best < 0 || s->vars[l->t[i].atom->v].depth > s->vars[l->t[best].atom->v].depth))
                best = i;
        if (best < 0)
            return l;
        term t = l->t[best];
        const ivar *iv = &s->vars[t.atom->v];
        bool low_end = (t.coef > 0) != largest;
        lin *b = lin_of(s, low_end ? iv->lo : iv->hi);
        if (!b)
            return NULL;
        if (!low_end && !(b = lin_axpy(s, b, -1, lin_const(s, 1)))) /* hi - 1 */
            return NULL;
        lin *rest = lin_axpy(s, l, -t.coef, lin_atom(s, t.atom));
        l = rest ? lin_axpy(s, rest, t.coef, b) : NULL;
    }
    return NULL;
}

/* Whether l >= 0 wherever every index lies in its range: its smallest value is a
 * constant and non-negative extents. */
static bool lin_nonneg(sizer *s, lin *l) {
    l = lin_extreme(s, l, false);
    if (!l || l->c < 0)
        return false;
    for (int i = 0; i < l->n; i++)
        if (l->t[i].coef < 0 || !expr_nonneg(s, l->t[i].atom))
            return false;
    return true;
}

/* Renumbers the variables of the maxover chain at the top of e: outermost v0. */
static sz_expr *renumber(sizer *s, const sz_expr *e, const int *map) {
    sz_expr *r = ARENA_NEW(s->a, sz_expr);
    *r = *e;
    if (e->op == SZ_VAR || e->op == SZ_MAXOVER)
        r->v = map[e->v];
    if (e->nkids) {
        r->kids = ARENA_ARRAY(s->a, sz_expr *, e->nkids);
        for (int i = 0; i < e->nkids; i++)
            r->kids[i] = renumber(s, e->kids[i], map);
    }
    return r;
}

/* The trip count of loop (its range lo..hi), maximized over the enclosing indices. */
static sz_expr *capacity(sizer *s, const ir_op *loop, const ir_value *lov, const ir_value *hiv) {
    lin *lo = lin_of(s, lov), *hi = lin_of(s, hiv);
    lin *trip = lo && hi ? lin_axpy(s, hi, -1, lo) : NULL;
    if (!trip)
        return NULL;
    if (trip->n == 0)
        return sz_const(s->a, trip->c > 0 ? trip->c : 0);
    sz_expr *e = lin_expr(s, trip);
    if (!e)
        return NULL;
    if (!lin_nonneg(s, trip))
        e = sz_bin(s->a, SZ_MAX, sz_const(s->a, 0), e);

    int order[AD_SIZE_MAXVARS], norder = 0;
    for (const ir_op *op = loop->parent->parent; op; op = op->parent->parent) {
        const ir_region *body = op->regions[0];
        int ndims = op->code == IR_PARALLEL ? (int)body->nargs : op->code == IR_FOR ? 1 : 0;
        for (int d = ndims - 1; d >= 0; d--) {
            int var = -1;
            for (int i = 0; i < s->nvars; i++)
                if (s->vars[i].val == body->args[d])
                    var = i;
            if (var < 0 || !mentions_var(e, var))
                continue;
            sz_expr *vlo = expr_of(s, s->vars[var].lo), *vhi = expr_of(s, s->vars[var].hi);
            if (!vlo || !vhi)
                return NULL;
            e = sz_maxover(s->a, var, vlo, vhi, e);
            order[norder++] = var;
        }
    }
    int map[AD_SIZE_MAXVARS] = {0};
    for (int i = 0; i < norder; i++)
        map[order[i]] = norder - 1 - i;
    return renumber(s, e, map);
}

/* capacity() of the range lo..hi of op, copied into arena out (NULL: none). */
static sz_expr *capacity_in(const ir_kernel *k, const ir_op *op, const ir_value *lo,
                            const ir_value *hi, arena *out) {
    arena scratch;
    arena_init(&scratch);
    sizer s = {.k = k, .a = &scratch};
    sz_expr *e = capacity(&s, op, lo, hi);
    sz_expr *r = e ? sz_copy(out, e) : NULL;
    arena_free(&scratch);
    return r;
}

sz_expr *ad_loop_capacity(const ir_kernel *k, const ir_op *loop, arena *out) {
    if (loop->code == IR_WHILE)
        return NULL;
    if (loop->code != IR_FOR)
        kern_unreachable("ad_loop_capacity: not a loop");
    return capacity_in(k, loop, loop->operands[0], loop->operands[1], out);
}

sz_expr *ad_task_extent(const ir_kernel *k, const ir_op *task, uint32_t d, arena *out) {
    if (task->code != IR_PARALLEL || 2 * d + 1 >= task->noperands)
        kern_unreachable("ad_task_extent: not a dimension of a parallel task");
    /* the ranges of a task are uniform: no enclosing index to maximize over */
    return capacity_in(k, task, task->operands[2 * d], task->operands[2 * d + 1], out);
}

/* Whether e mentions an index variable or reads array elements. */
static bool varies(const sz_expr *e) {
    if (e->op == SZ_VAR || e->op == SZ_READ)
        return true;
    for (int i = 0; i < e->nkids; i++)
        if (varies(e->kids[i]))
            return true;
    return false;
}

bool ad_value_range(const ir_kernel *k, const ir_value *v, arena *out, sz_expr **lo, sz_expr **hi) {
    arena scratch;
    arena_init(&scratch);
    sizer s = {.k = k, .a = &scratch};
    *lo = *hi = NULL;
    lin *l = lin_of(&s, v);
    lin *min = l ? lin_extreme(&s, l, false) : NULL;
    lin *max = l ? lin_extreme(&s, l, true) : NULL;
    lin *end = max ? lin_axpy(&s, max, 1, lin_const(&s, 1)) : NULL;
    sz_expr *elo = min ? lin_expr(&s, min) : NULL, *ehi = end ? lin_expr(&s, end) : NULL;
    if (elo && ehi && !varies(elo) && !varies(ehi)) {
        *lo = sz_copy(out, elo);
        *hi = sz_copy(out, ehi);
    }
    arena_free(&scratch);
    return *lo != NULL;
}
