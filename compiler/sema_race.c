/* sema_race.c - the check-time warning about races between the threads of a parallel
 * `for` (docs/language.md section 7): a thread that reads an element which another thread
 * of the same task may write gets a value that depends on the order the threads run in.
 *
 * What: in the body of a parallel for (its own statements, not the bodies of the funcs it
 * calls), every array read is compared with every write of the same array (`=`, the
 * compound assignments, atomics as statements). A pair is safe when both accesses are
 * owned by their thread: for each parallel index, some dimension of each index list is
 * that index, unchanged, and in the same dimension for both (`x[i]` read and written, or
 * `u[t, i, j]` in a for over i, j), so every element belongs to one thread; or the two
 * never meet, their indices in some dimension being one uniform value plus two different
 * constants (`u[t - 1, i - 1]` read, `u[t, i]` written, t a parameter). Any other
 * pair is reported at the read, with the write's line and the parallel indices, once per
 * read, at most four per loop. A warning, not an error: reads of elements that are never
 * written in the same launch (`x[i + 1]` when only even threads write) are legitimate.
 *
 * Where: sema (sema.c, check_for) after the body of a parallel for is checked. Linear in
 * the body's size times the writes of each array. */
#include <stdlib.h>

#include "sema.h"

enum { MAX_RACE_WARNINGS = 4 };

typedef struct access {
    const fe_expr *e; /* the EX_INDEX */
    kern_loc loc;     /* of the write: the assignment's operator */
    bool write;
} access;

typedef struct race_scan {
    const fe_stmt *loop;
    access *acc;
    int n, cap;
} race_scan;

static void add(race_scan *r, const fe_expr *e, kern_loc loc, bool write) {
    if (!e->index.sym)
        return;
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 16;
        r->acc = kern_xrealloc(r->acc, sizeof *r->acc * (size_t)r->cap);
    }
    r->acc[r->n++] = (access){e, loc, write};
}

static void scan_expr(race_scan *r, const fe_expr *e) {
    if (!e)
        return;
    switch (e->kind) {
    case EX_INDEX:
        if (e->index.sym && e->index.sym->type && ty_is_array(e->index.sym->type))
            add(r, e, e->loc, false);
        for (int i = 0; i < e->index.nidx; i++)
            scan_expr(r, e->index.idx[i]);
        return;
    case EX_UNARY: scan_expr(r, e->unary.arg); return;
    case EX_BINARY:
        scan_expr(r, e->binary.lhs);
        scan_expr(r, e->binary.rhs);
        return;
    case EX_COND:
        scan_expr(r, e->cond.cond);
        scan_expr(r, e->cond.a);
        scan_expr(r, e->cond.b);
        return;
    case EX_CAST: scan_expr(r, e->cast.arg); return;
    case EX_CALL: {
        int first = 0;
        if (e->call.builtin >= BI_ATOMIC_ADD && e->call.builtin <= BI_ATOMIC_MAX &&
            e->call.nargs > 0 && e->call.args[0]->kind == EX_INDEX) {
            const fe_expr *el = e->call.args[0];
            add(r, el, e->loc, true); /* an atomic writes; its result is not a plain read */
            for (int i = 0; i < el->index.nidx; i++)
                scan_expr(r, el->index.idx[i]);
            first = 1;
        }
        for (int i = first; i < e->call.nargs; i++)
            if (e->call.builtin != BI_LEN && e->call.builtin != BI_SHAPE)
                scan_expr(r, e->call.args[i]);
        return;
    }
    default: {
        const fe_expr *k[64];
        int n = fe_expr_kids(e, k, 64);
        for (int i = 0; i < n && i < 64; i++)
            scan_expr(r, k[i]);
        return;
    }
    }
}

static void scan_stmt(race_scan *r, const fe_stmt *st) {
    if (!st)
        return;
    switch (st->kind) {
    case ST_LET:
    case ST_VAR: scan_expr(r, st->decl.init); return;
    case ST_ASSIGN: {
        const fe_expr *t = st->assign.target;
        scan_expr(r, st->assign.value);
        while (t && (t->kind == EX_MEMBER || t->kind == EX_ELEM)) {
            if (t->kind == EX_ELEM)
                for (int i = 0; i < t->elem.nidx; i++)
                    scan_expr(r, t->elem.idx[i]);
            t = t->kind == EX_MEMBER ? t->member.base : t->elem.base;
        }
        if (t && t->kind == EX_INDEX && t->index.sym && t->index.sym->type && ty_is_array(t->index.sym->type)) {
            for (int i = 0; i < t->index.nidx; i++)
                scan_expr(r, t->index.idx[i]);
            if (st->assign.op == AS_MUL || st->assign.op == AS_DIV)
                add(r, t, t->loc, false); /* *= and /= read the old value */
            add(r, t, st->assign.op_loc, true);
        }
        return;
    }
    case ST_IF:
        scan_expr(r, st->if_.cond);
        scan_stmt(r, st->if_.then);
        scan_stmt(r, st->if_.els);
        return;
    case ST_FOR:
        for (int i = 0; i < st->for_.nranges; i++) {
            scan_expr(r, st->for_.ranges[i].lo);
            scan_expr(r, st->for_.ranges[i].hi);
        }
        scan_stmt(r, st->for_.body);
        return;
    case ST_WHILE:
        scan_expr(r, st->while_.cond);
        scan_stmt(r, st->while_.body);
        return;
    case ST_RETURN: scan_expr(r, st->ret.value); return;
    case ST_EXPR: scan_expr(r, st->expr.expr); return;
    case ST_BLOCK:
        for (int i = 0; i < st->block.nstmts; i++)
            scan_stmt(r, st->block.stmts[i]);
        return;
    default: return;
    }
}

/* The dimension of e's index list that is parallel index k unchanged, or -1. */
static int owner_dim(const fe_expr *e, const fe_sym *k) {
    for (int d = 0; d < e->index.nidx; d++) {
        const fe_expr *x = e->index.idx[d];
        if (x && x->kind == EX_NAME && x->name.sym == k)
            return d;
    }
    return -1;
}

/* e as base + offset: base a name (NULL for a constant), offset the sum of the constants
 * added or subtracted; false when e is not of that form. */
static bool split(const fe_expr *e, const fe_sym **base, int64_t *off) {
    if (!e)
        return false;
    if (e->is_const && e->type && ty_is_int(e->type)) {
        *base = NULL;
        *off = e->cval.i;
        return true;
    }
    if (e->kind == EX_NAME) {
        *base = e->name.sym;
        *off = 0;
        return *base != NULL;
    }
    if (e->kind == EX_BINARY && (e->binary.op == BIN_ADD || e->binary.op == BIN_SUB)) {
        const fe_expr *c = e->binary.rhs, *rest = e->binary.lhs;
        bool neg = e->binary.op == BIN_SUB;
        if (!(c->is_const && c->type && ty_is_int(c->type))) {
            if (neg || !(rest->is_const && rest->type && ty_is_int(rest->type)))
                return false;
            c = e->binary.lhs; /* c + x */
            rest = e->binary.rhs;
        }
        if (!split(rest, base, off))
            return false;
        *off = neg ? *off - c->cval.i : *off + c->cval.i;
        return true;
    }
    return false;
}

static bool uniform_sym(const fe_sym *y) {
    return !y || y->kind == SYM_PARAM || y->kind == SYM_CONST ||
           (y->kind == SYM_LOCAL && y->is_uniform);
}

/* Whether a and b never touch one element: in some dimension their indices are
 * u + c1 and u + c2, c1 != c2, with u the same value in every thread (a parameter, a
 * constant, a uniform let; or no u at all). The time-step layout x[t - 1, i] / x[t, i]. */
static bool disjoint(const fe_expr *a, const fe_expr *b) {
    for (int d = 0; d < a->index.nidx && d < b->index.nidx; d++) {
        const fe_sym *ba, *bb;
        int64_t oa, ob;
        if (split(a->index.idx[d], &ba, &oa) && split(b->index.idx[d], &bb, &ob) && ba == bb &&
            uniform_sym(ba) && oa != ob)
            return true;
    }
    return false;
}

/* Whether a and b touch only elements of their own thread (see the contract). */
static bool same_thread(const race_scan *r, const fe_expr *a, const fe_expr *b) {
    for (int k = 0; k < r->loop->for_.nranges; k++) {
        const fe_sym *idx = r->loop->for_.ranges[k].sym;
        int da = owner_dim(a, idx);
        if (da < 0 || da != owner_dim(b, idx))
            return false;
    }
    return true;
}

void fe_sema_warn_races(fe_sema *s, const fe_stmt *loop) {
    race_scan r = {loop, NULL, 0, 0};
    scan_stmt(&r, loop->for_.body);
    kern_buf names = {0};
    for (int k = 0; k < loop->for_.nranges; k++)
        buf_printf(&names, "%s'%s'", k ? ", " : "", loop->for_.ranges[k].var);
    int warned = 0;
    for (int i = 0; i < r.n && warned < MAX_RACE_WARNINGS; i++) {
        const access *rd = &r.acc[i];
        if (rd->write)
            continue;
        for (int j = 0; j < r.n; j++) {
            const access *w = &r.acc[j];
            if (!w->write || w->e->index.sym != rd->e->index.sym || same_thread(&r, rd->e, w->e) ||
                disjoint(rd->e, w->e))
                continue;
            fe_sema_warning(s, rd->loc,
                            "'%s' is read here and written (line %u) by other threads of the "
                            "parallel for over %s, which run in no order: the value read may "
                            "be the old or the new one; write a different array, or split the "
                            "loop into two parallel fors",
                            rd->e->index.name, w->loc.line, names.data);
            warned++;
            break;
        }
    }
    buf_free(&names);
    free(r.acc);
}
