/* ad_gather.c - gather-form adjoints of neighbour reads (ad_gather_kernel; the
 * transformation of adjoint stencil loops known from PerforAD).
 *
 * What: in a parallel task of a gradient kernel, the adjoint of a read `a[u, i + c]` (i a
 * parallel index, c a constant, u indices that are the same for every item) is
 * `atomic_add a.grad[u, i + c], v` - a scatter: each item adds into its neighbours'
 * elements, and on a CPU or GPU every one of those adds is an atomic on an element other
 * items hit too. When every such atomic of one adjoint array in the task has that form
 * (constant offsets in the dimensions that hold the parallel indices, the same uniform
 * indices elsewhere), the pass turns the scatter into a gather, run as a new task just
 * before the original one:
 *
 *   parallel (j over [lo + min c, hi + max c) per dimension) {
 *       total = 0; touched = false
 *       for each distinct offset c:                     (unrolled)
 *           if (j - c is an item of the task) {
 *               recompute that item's body with its side effects dropped, summing the
 *               values its atomics at offset c add: (sum, did any run)
 *           }
 *       if (touched) a.grad[u, j] += total               (a plain add: only item j
 *   }                                                      of this task touches it)
 *
 * and the original task keeps everything but those atomics. Every element receives the
 * adds it received before, from the same items, summed in a fixed order (the order of
 * atomics is unspecified, reference section 7), without atomics; the GPU and CPU
 * backends then vectorize the gather like any streaming loop.
 *
 * When: the recomputation must see what the original item saw. The new task runs before
 * the original one, so it reads memory as it was before the task: that is what an item
 * read when each of its loads comes before every write of the task's body to the same
 * array (in program order; reads of elements other items write are races, for which any
 * order is allowed). Not transformed (atomics kept), per array: offsets that are not
 * constants or exceed 64, an index that is neither a parallel index plus a constant nor
 * uniform, differing uniform indices, other accesses of the array that are not provably
 * in other rows (an index that differs by a nonzero constant), integer or bool arrays,
 * used old values; per task: loops, adstack ops, an atomic whose old value is used, a load
 * after a write of its array. kc_options.scatter_adjoints (KERN_SCATTER_ADJOINTS=1) turns
 * the pass off (compiler/driver.c).
 *
 * Where: compiler/driver.c runs it on each gradient kernel right after ad_grad_kernel,
 * before the optimization pipeline (which removes what the recomputations do not need).
 * It keeps every invariant of the verifier. */
#include <stdlib.h>
#include <string.h>

#include "ad_priv.h"
#include "opt_util.h"
#include "passes.h"

enum { MAX_OFFSET = 64, MAX_GROUP = 64 };

/* ---- a small value map (src -> clone) ---------------------------------------------- */

typedef struct vmap {
    const ir_value **k;
    ir_value **v;
    size_t cap, len;
} vmap;

static size_t vhash(const void *p) {
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 17;
    x *= 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 29));
}

static void vmap_put(vmap *m, const ir_value *k, ir_value *v) {
    if (2 * (m->len + 1) > m->cap) {
        size_t nc = m->cap ? 2 * m->cap : 64;
        const ir_value **nk = calloc(nc, sizeof *nk);
        ir_value **nv = calloc(nc, sizeof *nv);
        if (!nk || !nv)
            kern_oom(nc * sizeof *nv);
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->k[i])
                continue;
            size_t h = vhash(m->k[i]) & (nc - 1);
            while (nk[h])
                h = (h + 1) & (nc - 1);
            nk[h] = m->k[i];
            nv[h] = m->v[i];
        }
        free(m->k);
        free(m->v);
        m->k = nk;
        m->v = nv;
        m->cap = nc;
    }
    size_t h = vhash(k) & (m->cap - 1);
    while (m->k[h] && m->k[h] != k)
        h = (h + 1) & (m->cap - 1);
    if (!m->k[h])
        m->len++;
    m->k[h] = k;
    m->v[h] = v;
}

static ir_value *vmap_get(const vmap *m, ir_value *k) {
    if (m->cap) {
        size_t h = vhash(k) & (m->cap - 1);
        while (m->k[h]) {
            if (m->k[h] == k)
                return m->v[h];
            h = (h + 1) & (m->cap - 1);
        }
    }
    return k; /* defined outside the cloned region: used as it is */
}

static void vmap_free(vmap *m) {
    free(m->k);
    free(m->v);
    memset(m, 0, sizeof *m);
}

/* ---- analysis ----------------------------------------------------------------------- */




/* Whether v is the same for every item of the task whose body is `body`, so that the
 * gather task can recompute it (passes/divergence.c). */
static bool uniform(const ir_value *v, const ir_region *body, ir_uniform_memo *memo) {
    return ir_uniform_in(v, body, memo);
}

/* d and c when v is body->args[d] + c (or - c', or args[d] itself). */
static bool neighbour(const ir_value *v, const ir_region *body, uint32_t *d, int64_t *c) {
    const ir_value *base = v;
    int64_t k = 0;
    const ir_op *op = v->def;
    if (op && op->noperands == 2 && (op->code == IR_ADD || op->code == IR_SUB)) {
        if (opt_const_int(op->operands[1], &k)) {
            base = op->operands[0];
            if (op->code == IR_SUB)
                k = -k;
        } else if (op->code == IR_ADD && opt_const_int(op->operands[0], &k)) {
            base = op->operands[1];
        }
    }
    if (base->def || base->region != body || k < -MAX_OFFSET || k > MAX_OFFSET)
        return false;
    *d = base->index;
    *c = k;
    return true;
}

/* Whether a and b are the same value: the same IR value, equal constants, or the same
 * pure op of the same values (the transform repeats `t - 1` for every use). */
static bool same_value(const ir_value *a, const ir_value *b, int depth) {
    if (a == b)
        return true;
    const ir_op *x = a->def, *y = b->def;
    if (!x || !y || depth > 8 || x->code != y->code || a->type != b->type || x->nregions ||
        y->nregions || x->noperands != y->noperands || x->nresults != 1 || y->nresults != 1)
        return false;
    if (!(ir_info(x->code)->flags & OPF_PURE))
        return false;
    if (x->code == IR_CONST || x->code == IR_DIM || x->code == IR_CAST)
        if (memcmp(&x->imm, &y->imm, sizeof x->imm))
            return false;
    for (uint32_t i = 0; i < x->noperands; i++)
        if (!same_value(x->operands[i], y->operands[i], depth + 1))
            return false;
    return true;
}

/* Whether indices a and b are provably different values (one is the other plus a nonzero
 * constant, or both are different constants). */
static bool differ(const ir_value *a, const ir_value *b) {
    int64_t x, y;
    if (opt_const_int(a, &x) && opt_const_int(b, &y))
        return x != y;
    for (int s = 0; s < 2; s++) {
        const ir_value *p = s ? b : a, *q = s ? a : b;
        const ir_op *op = p->def;
        if (op && op->noperands == 2 && (op->code == IR_ADD || op->code == IR_SUB) &&
            same_value(op->operands[0], q, 0) && opt_const_int(op->operands[1], &x) && x != 0)
            return true;
        if (op && op->code == IR_ADD && op->noperands == 2 && same_value(op->operands[1], q, 0) &&
            opt_const_int(op->operands[0], &x) && x != 0)
            return true;
    }
    return false;
}

/* One adjoint array's neighbour atomics in a task. */
typedef struct group {
    ir_value *array;
    const ir_op *ops[MAX_GROUP];
    int64_t off[MAX_GROUP][KERN_MAX_RANK]; /* per op: the offset per task dimension */
    int nops;
    int dim_of[KERN_MAX_RANK];    /* array dimension -> task dimension, or -1 (uniform) */
    ir_value *uni[KERN_MAX_RANK]; /* array dimension -> its uniform index (dim_of -1) */
} group;

/* The shape of op's indices for g (fills dim_of/uni at the first op); false when op does
 * not fit. */
static bool fits(group *g, const ir_op *op, const ir_region *body, int64_t *off,
                 ir_uniform_memo *memo) {
    int rank = op->operands[0]->type->rank;
    uint32_t nd = body->nargs;
    bool seen[KERN_MAX_RANK] = {false};
    for (int e = 0; e < rank; e++) {
        ir_value *iv = op->operands[1 + e];
        uint32_t d;
        int64_t c;
        int want_d;
        if (neighbour(iv, body, &d, &c)) {
            want_d = (int)d;
            if (seen[d])
                return false;
            seen[d] = true;
            off[d] = c;
        } else if (uniform(iv, body, memo) &&
                   (!iv->def || iv->def->parent == body || iv->def->parent == body->kernel->body)) {
            want_d = -1; /* defined outside the body or at its top level */
        } else {
            return false;
        }
        if (g->nops == 0) {
            g->dim_of[e] = want_d;
            g->uni[e] = want_d < 0 ? iv : NULL;
        } else if (g->dim_of[e] != want_d || (want_d < 0 && !same_value(g->uni[e], iv, 0))) {
            return false;
        }
    }
    for (uint32_t d = 0; d < nd; d++)
        if (!seen[d])
            return false; /* each item must map to its own element per offset */
    return true;
}

typedef struct scan {
    const ir_region *body;
    ir_valset uses;      /* every value an op of the body uses */
    ir_uniform_memo memo; /* uniform()'s answers */
    bool ok;             /* the task can be transformed at all */
    const ir_op **order; /* every op of the body in program order */
    size_t n, cap;
} scan;

static void collect_ops(scan *s, const ir_region *r) {
    ir_foreach_op(op, r) {
        if (op->code == IR_FOR || op->code == IR_WHILE || op->code == IR_ADPUSH ||
            op->code == IR_ADPOP || op->code == IR_PARALLEL || op->code == IR_SERIAL)
            s->ok = false;
        if (op->noperands > 16 || op->nresults > 30) /* clone_op's fixed arrays */
            s->ok = false;
        for (uint32_t i = 0; i < op->noperands; i++)
            ir_valset_add(&s->uses, op->operands[i]);
        if (s->n == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 64;
            s->order = realloc(s->order, s->cap * sizeof *s->order);
            if (!s->order)
                kern_oom(s->cap * sizeof *s->order);
        }
        s->order[s->n++] = op;
        for (uint32_t i = 0; i < op->nregions; i++)
            collect_ops(s, op->regions[i]);
    }
}

static bool used(const scan *s, ir_value *v) { return ir_valset_has(&s->uses, v); }

/* The arrays written so far on a path (a small set). */
typedef struct wset {
    const ir_value *a[64];
    int n;
    bool full; /* more than 64: give up */
} wset;

static bool wset_has(const wset *w, const ir_value *x) {
    for (int i = 0; i < w->n; i++)
        if (w->a[i] == x)
            return true;
    return false;
}

static void wset_add(wset *w, const ir_value *x) {
    if (wset_has(w, x))
        return;
    if (w->n == 64)
        w->full = true;
    else
        w->a[w->n++] = x;
}

/* No atomic's old value is used, and no load can follow a write of its array on a path
 * through r (the branches of an `if` are separate paths; after it, both branches' writes
 * count). */
static bool path_fits(const scan *s, const ir_region *r, wset *w) {
    ir_foreach_op(op, r) {
        if (ir_is_atomic(op->code) && used(s, op->results[0]))
            return false;
        if (op->code == IR_LOAD && wset_has(w, op->operands[0]))
            return false;
        if (ir_is_access(op->code) && op->code != IR_LOAD)
            wset_add(w, op->operands[0]);
        if (op->code == IR_IF) {
            wset e = *w;
            if (!path_fits(s, op->regions[0], w) || !path_fits(s, op->regions[1], &e))
                return false;
            for (int i = 0; i < e.n; i++)
                wset_add(w, e.a[i]);
            w->full |= e.full;
        }
        if (w->full)
            return false;
    }
    return true;
}

static bool task_fits(const scan *s) {
    wset w = {.n = 0};
    return path_fits(s, s->body, &w);
}

/* Builds g from the atomics on `array` in the body; false when the array does not
 * qualify. */
static bool build_group(group *g, ir_value *array, scan *s) {
    memset(g, 0, sizeof *g);
    g->array = array;
    if (!ty_is_float(array->type->elem))
        return false;
    for (size_t i = 0; i < s->n; i++) {
        const ir_op *op = s->order[i];
        if ((op->code != IR_ATOMIC_ADD && op->code != IR_ATOMIC_SUB) || op->operands[0] != array)
            continue;
        if (g->nops == MAX_GROUP || !fits(g, op, s->body, g->off[g->nops], &s->memo))
            return false;
        g->ops[g->nops++] = op;
    }
    bool moves = false; /* all at the item's own element: private_atomics.c's case */
    for (int k = 0; k < g->nops; k++)
        for (uint32_t d = 0; d < s->body->nargs; d++)
            moves |= g->off[k][d] != 0;
    if (g->nops == 0 || !moves)
        return false;
    /* every other access of the array must be in another row */
    for (size_t i = 0; i < s->n; i++) {
        const ir_op *op = s->order[i];
        if (!ir_is_access(op->code) || op->operands[0] != array)
            continue;
        bool mine = false;
        for (int k = 0; k < g->nops; k++)
            mine |= g->ops[k] == op;
        if (mine)
            continue;
        bool apart = false;
        for (int e = 0; e < array->type->rank; e++)
            if (g->dim_of[e] < 0 && differ(op->operands[1 + e], g->uni[e]))
                apart = true;
        if (!apart)
            return false;
    }
    return true;
}

/* ---- the gather task ---------------------------------------------------------------- */

typedef struct cloner {
    ir_module *m;
    const group *g;
    const int64_t *off; /* the offset this clone sums */
    int noff;           /* task dimensions */
    vmap map;
} cloner;

static bool is_group_op(const group *g, const ir_op *op, int *k) {
    for (int i = 0; i < g->nops; i++)
        if (g->ops[i] == op) {
            *k = i;
            return true;
        }
    return false;
}

static ir_op *clone_op(cloner *c, ir_builder *b, const ir_op *op, uint32_t extra,
                       const kern_type *const *extra_types) {
    ir_value *ops[16];
    const kern_type *types[32];
    kern_assert(op->noperands <= 16 && op->nresults + extra <= 32);
    for (uint32_t i = 0; i < op->noperands; i++)
        ops[i] = vmap_get(&c->map, op->operands[i]);
    for (uint32_t i = 0; i < op->nresults; i++)
        types[i] = op->results[i]->type;
    for (uint32_t i = 0; i < extra; i++)
        types[op->nresults + i] = extra_types[i];
    ir_op *n = ir_build(b, op->code, ops, op->noperands, types, op->nresults + extra, op->nregions);
    n->imm = op->imm;
    n->attr = op->attr;
    n->loc = op->loc;
    for (uint32_t i = 0; i < op->nresults; i++)
        vmap_put(&c->map, op->results[i], n->results[i]);
    return n;
}

/* Clones region r's ops at b without side effects; returns the sum of the values that
 * the group's atomics at offset c->off add (*sum) and whether one ran (*touched). The
 * terminator is not cloned. */
static const ir_op *clone_region(cloner *c, ir_builder *b, const ir_region *r, ir_value **sum,
                                 ir_value **touched) {
    const kern_type *ft = ad_adj_type(c->g->array->type->elem);
    *sum = NULL; /* nothing added yet (x + 0.0 is not x for x = -0.0) */
    *touched = NULL;
    const ir_op *term = NULL;
    ir_foreach_op(op, r) {
        int k;
        if (term)
            break;
        switch (op->code) {
        case IR_YIELD:
        case IR_CONDITION: term = op; break;
        case IR_STORE: break;
        case IR_IF: {
            const kern_type *extra[2] = {ft, ty_bool()};
            ir_op *n = clone_op(c, b, op, 2, extra);
            for (uint32_t ri = 0; ri < 2; ri++) {
                ir_builder rb = ir_builder_at_end(c->m, n->regions[ri]);
                ir_value *s, *t;
                const ir_op *y = clone_region(c, &rb, op->regions[ri], &s, &t);
                ir_value *vals[34];
                uint32_t ny = y ? y->noperands : 0;
                kern_assert(ny + 2 <= 34);
                for (uint32_t i = 0; i < ny; i++)
                    vals[i] = vmap_get(&c->map, y->operands[i]);
                vals[ny] = s;
                vals[ny + 1] = t;
                ir_yield(&rb, vals, ny + 2);
            }
            ir_value *ns = n->results[op->nresults], *nt = n->results[op->nresults + 1];
            *sum = *sum ? ir_binop(b, IR_ADD, *sum, ns) : ns;
            *touched = *touched ? ir_binop(b, IR_OR, *touched, nt) : nt;
            break;
        }
        default:
            if (is_group_op(c->g, op, &k)) {
                bool same = true;
                for (int d = 0; d < c->noff; d++)
                    same &= c->g->off[k][d] == c->off[d];
                if (!same)
                    break;
                ir_value *v = vmap_get(&c->map, op->operands[op->noperands - 1]);
                if (*sum)
                    *sum = ir_binop(b, op->code == IR_ATOMIC_SUB ? IR_SUB : IR_ADD, *sum, v);
                else
                    *sum = op->code == IR_ATOMIC_SUB ? ir_unop(b, IR_NEG, v) : v;
                *touched = ir_const_bool(b, true);
                break;
            }
            if (ir_is_atomic(op->code))
                break; /* another array's: the original task keeps it */
            clone_op(c, b, op, 0, NULL);
            break;
        }
    }
    if (!*sum)
        *sum = ir_const_float(b, ft, 0.0);
    if (!*touched)
        *touched = ir_const_bool(b, false);
    return term;
}

/* v (uniform over the task whose body is `body`) at b: the pure ops of the body's top
 * level that compute it cloned after their operands (once each: c->map remembers). */
static ir_value *clone_uniform(cloner *c, ir_builder *b, ir_value *v, const ir_region *body) {
    ir_value *done = vmap_get(&c->map, v);
    if (done != v || !v->def || v->def->parent != body)
        return done;
    const ir_op *d = v->def;
    for (uint32_t i = 0; i < d->noperands; i++)
        clone_uniform(c, b, d->operands[i], body);
    clone_op(c, b, d, 0, NULL);
    return vmap_get(&c->map, v);
}

/* lo + c in the index type t (lo itself for c = 0), at b. */
static ir_value *plus(ir_builder *b, ir_value *lo, int64_t c) {
    if (c == 0)
        return lo;
    return ir_binop(b, IR_ADD, lo, ir_const_int(b, lo->type, c));
}

/* Inserts the gather task of g before `task` and removes g's atomics from it. */
static void gather(ir_module *m, ir_op *task, const group *g) {
    ir_region *body = task->regions[0];
    uint32_t nd = body->nargs;
    int64_t lo_c[KERN_MAX_RANK], hi_c[KERN_MAX_RANK];
    for (uint32_t d = 0; d < nd; d++) {
        lo_c[d] = hi_c[d] = g->off[0][d];
        for (int k = 1; k < g->nops; k++) {
            if (g->off[k][d] < lo_c[d])
                lo_c[d] = g->off[k][d];
            if (g->off[k][d] > hi_c[d])
                hi_c[d] = g->off[k][d];
        }
    }
    ir_builder top = ir_builder_before(m, task);
    top.loc = task->loc;
    ir_value *bounds[2 * KERN_MAX_RANK];
    for (uint32_t d = 0; d < nd; d++) {
        bounds[2 * d] = plus(&top, task->operands[2 * d], lo_c[d]);
        bounds[2 * d + 1] = plus(&top, task->operands[2 * d + 1], hi_c[d]);
    }
    ir_op *par = ir_parallel(&top, bounds, nd);
    ir_region *pb = par->regions[0];
    ir_builder b = ir_builder_at_end(m, pb);
    b.loc = task->loc;
    const kern_type *ft = ad_adj_type(g->array->type->elem);
    ir_value *total = NULL, *touched = NULL;

    /* one recomputation per distinct offset */
    for (int k = 0; k < g->nops; k++) {
        bool dup = false;
        for (int p = 0; p < k && !dup; p++)
            dup = !memcmp(g->off[p], g->off[k], nd * sizeof g->off[k][0]);
        if (dup)
            continue;
        ir_value *item[KERN_MAX_RANK], *inside = NULL;
        for (uint32_t d = 0; d < nd; d++) {
            ir_value *j = pb->args[d];
            item[d] =
                g->off[k][d] ? ir_binop(&b, IR_SUB, j, ir_const_int(&b, j->type, g->off[k][d])) : j;
            ir_value *ge = ir_binop(&b, IR_GE, item[d], task->operands[2 * d]),
                     *lt = ir_binop(&b, IR_LT, item[d], task->operands[2 * d + 1]);
            ir_value *in = ir_binop(&b, IR_AND, ge, lt);
            inside = inside ? ir_binop(&b, IR_AND, inside, in) : in;
        }
        const kern_type *rt[2] = {ft, ty_bool()};
        ir_op *iff = ir_if(&b, inside, rt, 2);
        cloner c = {.m = m, .g = g, .off = g->off[k], .noff = (int)nd};
        for (uint32_t d = 0; d < nd; d++)
            vmap_put(&c.map, body->args[d], item[d]);
        ir_builder tb = ir_builder_at_end(m, iff->regions[0]);
        tb.loc = task->loc;
        ir_value *s, *t;
        clone_region(&c, &tb, body, &s, &t);
        ir_value *y[2] = {s, t};
        ir_yield(&tb, y, 2);
        ir_builder eb = ir_builder_at_end(m, iff->regions[1]);
        eb.loc = task->loc;
        ir_value *z[2] = {ir_const_float(&eb, ft, 0.0), ir_const_bool(&eb, false)};
        ir_yield(&eb, z, 2);
        total = total ? ir_binop(&b, IR_ADD, total, iff->results[0]) : iff->results[0];
        touched = touched ? ir_binop(&b, IR_OR, touched, iff->results[1]) : iff->results[1];
        vmap_free(&c.map);
    }

    /* a.grad[u, j] += total where an item added into it */
    ir_op *wr = ir_if(&b, touched, NULL, 0);
    ir_builder wb = ir_builder_at_end(m, wr->regions[0]);
    wb.loc = task->loc;
    cloner uc = {.m = m, .g = g, .off = g->off[0], .noff = (int)nd};
    ir_value *idx[KERN_MAX_RANK];
    for (int e = 0; e < g->array->type->rank; e++) {
        if (g->dim_of[e] >= 0) {
            idx[e] = pb->args[g->dim_of[e]];
            continue;
        }
        /* a uniform index computed inside the original body: computed here again */
        idx[e] = clone_uniform(&uc, &wb, g->uni[e], body);
        continue;
    }
    ir_value *old = ir_load(&wb, g->array, idx, (uint32_t)g->array->type->rank);
    if (old->type != ft) /* an f16/bf16 adjoint: the f32 sum, rounded once */
        old = ir_cast(&wb, ft, old);
    ir_value *nv = ir_binop(&wb, IR_ADD, old, total);
    if (nv->type != g->array->type->elem)
        nv = ir_cast(&wb, g->array->type->elem, nv);
    ir_store(&wb, g->array, idx, (uint32_t)g->array->type->rank, nv);
    ir_yield(&wb, NULL, 0);
    ir_builder nb = ir_builder_at_end(m, wr->regions[1]);
    ir_yield(&nb, NULL, 0);
    vmap_free(&uc.map);

    for (int k = 0; k < g->nops; k++)
        ir_remove((ir_op *)g->ops[k]);
}

bool ad_gather_kernel(ir_module *m, ir_kernel *k) {
    bool changed = false;
    ir_foreach_op(task, k->body) {
        if (task->code != IR_PARALLEL)
            continue;
        bool signed_ranges = true; /* lo + c below 0 must not wrap (u32) */
        for (uint32_t i = 0; i < task->noperands; i++)
            signed_ranges &= task->operands[i]->type->kind != TY_U32;
        if (!signed_ranges)
            continue;
        scan s = {.body = task->regions[0], .ok = true};
        collect_ops(&s, s.body);
        if (s.ok && task_fits(&s)) {
            /* one group per adjoint array (parameters: arrays are parameters) */
            for (uint32_t p = 0; p < k->nparams; p++) {
                ir_value *a = k->body->args[p];
                group g;
                if (!ty_is_array(a->type) || !build_group(&g, a, &s))
                    continue;
                gather(m, task, &g);
                changed = true;
                /* the body changed: scan it again for the next array */
                s.n = 0;
                ir_valset_clear(&s.uses);
                collect_ops(&s, s.body);
            }
        }
        free(s.order);
        ir_valset_free(&s.uses);
        ir_uniform_memo_free(&s.memo);
    }
    return changed;
}
