/* ad_check.c - the global-access check of reverse mode (reference section 8, "Reads of memory
 * that K later changes"; docs/grad-check.md).
 *
 * K.grad re-reads every array element that K read, so it needs each one as K saw it. This
 * check runs on the optimized primal IR of a kernel before K.grad is built (driver.c,
 * build_grads) and reports every read R of an array parameter that a write W of the same
 * parameter may change afterwards.
 *
 * Accesses: LOAD reads; STORE and every ATOMIC_* write, and an atomic whose result is
 * used also reads (the old value). `*=` and `/=` lower to a load and a store of the same
 * element, so they are a read and a later write. Every array parameter counts, integer
 * and bool arrays too: their values steer control flow and indices in K.grad.
 *
 * A pair (R, W) on one array is safe when it is proven that W cannot change what R read:
 *   - W is in an earlier task than R (tasks run in order, K.grad re-reads after K);
 *   - the indices are disjoint: in some dimension they are `b + c1` and `b + c2`, c1 != c2
 *     integer constants, b the same value (or structurally the same pure computation) and
 *     uniform across all threads and iterations (a parameter, a top-level value, or a
 *     pure computation of those), or both absent (two different constants);
 *   - same task, same thread, and no execution of W comes after R on R's element: for
 *     each loop around both (outermost first), an index `t + cw` of W and `t + cr` of R in
 *     one dimension, t that for loop's index; cw > cr settles it (W hits R's element only
 *     in an earlier iteration), cw == cr passes to the next loop; in the same iteration
 *     of every loop, W precedes R in program order (or the two sit in different arms of
 *     one `if`). In a parallel task both index lists hold each parallel index value,
 *     unchanged, in the same dimension, so no other thread writes the element.
 * Everything else is reported (the check is conservative): an error at R with a note at
 * W and a note with the fix, or warnings with --no-grad-check. One diagnostic per read
 * (its first conflicting write), at most AD_CHECK_MAX per kernel, then a note that counts
 * the rest.
 *
 * Runs on verified IR; reads the kernel only (no scratch fields are written). */
#include "passes.h"

#include <stdlib.h>
#include <string.h>

enum { AD_CHECK_MAX = 4 };    /* diagnostics per kernel */
enum { AD_CHECK_DEPTH = 32 }; /* bound on index expressions and on loop nesting */

typedef struct access {
    const ir_op *op;
    const ir_value *array;
    ir_value *const *idx; /* the index operands */
    uint32_t nidx;
    const ir_op *task;     /* PARALLEL / SERIAL op, or NULL for an access at top level */
    const ir_region *root; /* the task body (or the kernel body) */
    uint32_t order;        /* ordinal of the top-level op that holds it */
    bool read, write;
} access;

typedef struct checker {
    const ir_kernel *k;
    access *acc;
    uint32_t nacc, cap;
} checker;


static bool is_loop(const ir_op *op) { return op && (op->code == IR_FOR || op->code == IR_WHILE); }

/* ---- collecting the accesses ------------------------------------------------------ */

static void add_access(checker *c, const ir_op *op, const ir_op *task, const ir_region *root,
                       uint32_t order) {
    if (c->nacc == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 16;
        c->acc = kern_xrealloc(c->acc, sizeof *c->acc * c->cap);
    }
    access *a = &c->acc[c->nacc++];
    a->op = op;
    a->array = op->operands[0];
    a->idx = op->operands + 1;
    a->nidx = op->code == IR_LOAD ? op->noperands - 1 : op->noperands - 2;
    a->task = task;
    a->root = root;
    a->order = order;
    a->read = op->code == IR_LOAD; /* atomics: set once their result is seen used */
    a->write = op->code != IR_LOAD;
}

/* The access recorded for atomic op `def`, if any. */
static access *find_access(checker *c, const ir_op *def) {
    for (uint32_t i = c->nacc; i-- > 0;)
        if (c->acc[i].op == def)
            return &c->acc[i];
    return NULL;
}

static void collect_op(checker *c, const ir_op *op, const ir_op *task, const ir_region *root,
                       uint32_t order);

static void collect_region(checker *c, const ir_region *r, const ir_op *task, const ir_region *root,
                           uint32_t order) {
    ir_foreach_op(op, r) collect_op(c, op, task, root, order);
}

static void collect_op(checker *c, const ir_op *op, const ir_op *task, const ir_region *root,
                       uint32_t order) {
    /* A used atomic result makes that atomic a read as well. Uses follow definitions. */
    for (uint32_t i = 0; i < op->noperands; i++) {
        const ir_op *d = op->operands[i]->def;
        if (d && ir_is_atomic(d->code)) {
            access *a = find_access(c, d);
            if (a)
                a->read = true;
        }
    }
    if (op->code == IR_LOAD || op->code == IR_STORE || ir_is_atomic(op->code))
        add_access(c, op, task, root, order);
    for (uint32_t i = 0; i < op->nregions; i++)
        collect_region(c, op->regions[i], task, root, order);
}

/* ---- index expressions ------------------------------------------------------------ */

static bool int_const(const ir_value *v, int64_t *out) {
    if (!v->def || v->def->code != IR_CONST || !ty_is_int(v->type))
        return false;
    *out = v->def->imm.i;
    return true;
}

/* Splits index v into base + offset, looking through add/sub of integer constants.
 * base is NULL when v is a constant. */
static void split_index(const ir_value *v, const ir_value **base, int64_t *off) {
    int64_t o = 0, c;
    for (int n = 0; n < AD_CHECK_DEPTH; n++) {
        if (int_const(v, &c)) {
            *base = NULL;
            *off = o + c;
            return;
        }
        const ir_op *d = v->def;
        if (d && d->code == IR_ADD && int_const(d->operands[1], &c))
            v = d->operands[0], o += c;
        else if (d && d->code == IR_ADD && int_const(d->operands[0], &c))
            v = d->operands[1], o += c;
        else if (d && d->code == IR_SUB && int_const(d->operands[1], &c))
            v = d->operands[0], o -= c;
        else
            break;
    }
    *base = v;
    *off = o;
}

/* Whether v has one value in every thread and iteration of k: a parameter, a value of
 * the kernel body's top level, or a pure computation of such values (ir_uniform_in over the
 * body of the task that holds v). */
static bool uniform(const ir_kernel *k, const ir_value *v) {
    const ir_region *task_body = NULL;
    for (const ir_region *r = v->def ? v->def->parent : v->region; r && r != k->body;
         r = r->parent ? r->parent->parent : NULL)
        task_body = r;
    ir_uniform_memo memo = {0};
    bool u = !task_body || ir_uniform_in(v, task_body, &memo);
    ir_uniform_memo_free(&memo);
    return u;
}

/* Whether a and b are the same value: the same SSA value, or the same pure computation
 * of the same values (CSE leaves copies in different regions). */
static bool same_value(const ir_value *a, const ir_value *b, int depth) {
    if (a == b)
        return true;
    const ir_op *x = a->def, *y = b->def;
    if (!x || !y || depth <= 0 || x->code != y->code || a->type != b->type ||
        a->index != b->index || x->nregions || y->nregions || x->noperands != y->noperands ||
        !(ir_info(x->code)->flags & OPF_PURE))
        return false;
    if ((x->code == IR_CONST || x->code == IR_DIM) && memcmp(&x->imm, &y->imm, sizeof x->imm) != 0)
        return false;
    for (uint32_t i = 0; i < x->noperands; i++)
        if (!same_value(x->operands[i], y->operands[i], depth - 1))
            return false;
    return true;
}

/* Whether r and w can never touch the same element, in any threads and iterations. */
static bool disjoint(const ir_kernel *k, const access *r, const access *w) {
    if (r->nidx != w->nidx)
        return false;
    for (uint32_t d = 0; d < r->nidx; d++) {
        const ir_value *br, *bw;
        int64_t or_, ow;
        split_index(r->idx[d], &br, &or_);
        split_index(w->idx[d], &bw, &ow);
        if (r->idx[d]->type->kind != TY_I64) /* offsets wrap at 32 bits */
            or_ = (int64_t)(uint32_t)or_, ow = (int64_t)(uint32_t)ow;
        if (or_ == ow)
            continue;
        if (!br && !bw)
            return true;
        if (br && bw && same_value(br, bw, AD_CHECK_DEPTH) && uniform(k, br))
            return true;
    }
    return false;
}

/* In a parallel task: whether both index lists hold every parallel index value in the
 * same dimension, so that the element belongs to one thread. */
static bool thread_owned(const access *r, const access *w) {
    if (!r->task || r->task->code != IR_PARALLEL)
        return true;
    if (r->nidx != w->nidx)
        return false;
    const ir_region *body = r->task->regions[0];
    for (uint32_t j = 0; j < body->nargs; j++) {
        bool found = false;
        for (uint32_t d = 0; d < r->nidx && !found; d++)
            found = r->idx[d] == body->args[j] && w->idx[d] == body->args[j];
        if (!found)
            return false;
    }
    return true;
}

/* ---- program order ---------------------------------------------------------------- */

/* The ancestor of op (or op itself) that lies directly in region r; NULL if none. */
static const ir_op *ancestor_in(const ir_op *op, const ir_region *r, const ir_region *root) {
    for (;;) {
        if (op->parent == r)
            return op;
        if (op->parent == root || !op->parent->parent)
            return NULL;
        op = op->parent->parent;
    }
}

/* How the elements of r and w relate over t, the index of a for loop around both: in
 * some dimension they are `t + cr` and `t + cw` (small constants). 1 when cw > cr in such
 * a dimension: w's element is r's only if w ran in an earlier iteration (t + cr - cw < t;
 * for loops count up by one); 0 when cw == cr: only in the same iteration; -1 when no
 * dimension proves either. */
static int over_index(const access *r, const access *w, const ir_value *t) {
    int rel = -1;
    for (uint32_t d = 0; d < r->nidx && r->nidx == w->nidx; d++) {
        const ir_value *br, *bw;
        int64_t cr, cw;
        split_index(r->idx[d], &br, &cr);
        split_index(w->idx[d], &bw, &cw);
        /* small offsets only: a u32 constant may stand for a negative one */
        if (br != t || bw != t || cr < -(1 << 30) || cr > (1 << 30) || cw < -(1 << 30) ||
            cw > (1 << 30))
            continue;
        if (cw > cr)
            return 1;
        if (cw == cr)
            rel = 0;
    }
    return rel;
}

/* Same task, same thread: whether no execution of w writes the element that r read after
 * r read it. Let C be the innermost region that holds both. The loops around C (below
 * the task body) are taken outermost first; each must be a for loop whose index t
 * appears in both index lists in one dimension as `t + cr` and `t + cw`: cw > cr proves
 * it (w reaches r's element only in an earlier iteration of that loop, and inner loops
 * do not matter); cw == cr moves on to the next loop (only the same iteration of this one
 * can hit r's element). In the same iteration of every loop, w must come before r in C
 * (or the two sit in the two arms of one if, which never both run). A loop around w
 * alone (inside C) ends before r; one around r alone starts after w. That the two hit
 * the same element is not needed: a read that no write of K precedes sees memory as it
 * was, and no later write changes it either. */
static bool w_before_r(const access *r, const access *w) {
    if (r->op == w->op)
        return false;
    /* The closest common region: the innermost region around r that also holds w. */
    const ir_region *common = r->op->parent;
    const ir_op *ar, *aw;
    for (;;) {
        aw = ancestor_in(w->op, common, r->root);
        if (aw)
            break;
        if (common == r->root)
            return false; /* cannot happen: both lie in the root */
        common = common->parent->parent;
    }
    ar = ancestor_in(r->op, common, r->root);
    const ir_op *loops[AD_CHECK_DEPTH];
    uint32_t n = 0;
    for (const ir_region *g = common; g != r->root; g = g->parent->parent) {
        if (!is_loop(g->parent))
            continue;
        if (n == AD_CHECK_DEPTH)
            return false;
        loops[n++] = g->parent;
    }
    while (n-- > 0) {
        if (loops[n]->code != IR_FOR)
            return false; /* a while repeats with no index to tell its iterations apart */
        int rel = over_index(r, w, loops[n]->regions[0]->args[0]);
        if (rel != 0)
            return rel > 0;
    }
    if (ar == aw) /* different regions of one op: exclusive only for the two arms of an if */
        return ar->code == IR_IF;
    for (const ir_op *o = aw; o; o = o->next)
        if (o == ar)
            return true;
    return false;
}

/* Whether w may change an element that r read, before K.grad re-reads it. */
static bool conflicts(const ir_kernel *k, const access *r, const access *w) {
    if (w->order < r->order)
        return false;
    if (disjoint(k, r, w))
        return false;
    if (w->order > r->order)
        return true;
    return !(w_before_r(r, w) && thread_owned(r, w));
}

/* ---- entry point ------------------------------------------------------------------ */

static const char *array_name(const ir_kernel *k, const ir_value *array) {
    if (!array->def && array->region == k->body && array->index < k->nparams)
        return k->params[array->index].name;
    return array->name ? array->name : "?";
}

/* The parameter index of an array value, or nparams for any other value (one shared
 * bucket: still correct, since writes are matched by the array value itself). */
static uint32_t param_of(const ir_kernel *k, const ir_value *array) {
    return array->region == k->body && !array->def && array->index < k->nparams ? array->index
                                                                                : k->nparams;
}

bool ad_check_kernel(const ir_kernel *k, diag_sink *sink, const kern_source *src, bool as_warning) {
    checker c = {.k = k};
    uint32_t order = 0;
    ir_foreach_op(op, k->body) {
        if (op->code == IR_PARALLEL || op->code == IR_SERIAL)
            collect_region(&c, op->regions[0], op, op->regions[0], order);
        else
            collect_op(&c, op, NULL, k->body, order);
        order++;
    }

    /* The writes of each array parameter, in access order, so that a read is compared
     * with the writes of its own array only (not every access: quadratic in long code). */
    uint32_t np = k->nparams;
    uint32_t *wstart = kern_xmalloc(sizeof *wstart * (np + 2));
    uint32_t *wlist = kern_xmalloc(sizeof *wlist * (c.nacc + 1));
    memset(wstart, 0, sizeof *wstart * (np + 2));
    for (uint32_t j = 0; j < c.nacc; j++)
        if (c.acc[j].write)
            wstart[param_of(k, c.acc[j].array) + 1]++;
    for (uint32_t a = 0; a <= np; a++)
        wstart[a + 1] += wstart[a];
    uint32_t *fill = kern_xmalloc(sizeof *fill * (np + 1));
    memcpy(fill, wstart, sizeof *fill * (np + 1));
    for (uint32_t j = 0; j < c.nacc; j++)
        if (c.acc[j].write)
            wlist[fill[param_of(k, c.acc[j].array)]++] = j;
    free(fill);

    int reported = 0;
    bool failed = false;
    for (uint32_t i = 0; i < c.nacc; i++) {
        const access *r = &c.acc[i];
        if (!r->read)
            continue;
        uint32_t a = param_of(k, r->array);
        for (uint32_t n = wstart[a]; n < wstart[a + 1]; n++) {
            const access *w = &c.acc[wlist[n]];
            if (w->array != r->array || !conflicts(k, r, w))
                continue;
            failed = true;
            if (reported++ < AD_CHECK_MAX) {
                diag_severity sev = as_warning ? DIAG_WARNING : DIAG_ERROR;
                diag_report(sink, sev, src, r->op->loc,
                            "'%s' is read here and may be written afterwards by kernel '%s' "
                            "(line %u:%u), so %s.grad would read changed values",
                            array_name(k, r->array), k->name, w->op->loc.line, w->op->loc.col,
                            k->name);
                diag_report(sink, DIAG_NOTE, src, w->op->loc, "written here");
                diag_report(sink, DIAG_NOTE, src, (kern_loc){0, 0},
                            "keep the value in a local, write a different array, or split "
                            "the kernel%s",
                            as_warning ? "" : "; --no-grad-check turns this into a warning");
            }
            break; /* one diagnostic per read */
        }
    }
    if (reported > AD_CHECK_MAX)
        diag_report(sink, DIAG_NOTE, src, k->loc,
                    "%d more reads in kernel '%s' may be written afterwards (not shown)",
                    reported - AD_CHECK_MAX, k->name);
    free(c.acc);
    free(wstart);
    free(wlist);
    return !failed || as_warning;
}
