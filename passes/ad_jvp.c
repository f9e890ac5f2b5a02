/* ad_jvp.c - forward mode: builds K.jvp from kernel K (docs/reference.md section 11.6,
 * docs/autodiff.md "Forward mode").
 *
 * Signature: K's parameters, then one tangent array `p.tan` per differentiable parameter
 * p (float element type, not nograd), typed like K.grad's adjoints (a scalar's tangent is
 * an array of length 1). K.jvp is K itself, every op kept in place, with the tangent of
 * each float value computed next to it:
 *
 *   pure ops     tangent = sum over the float operands u of (d op / d u) * tan(u). The
 *                partials are the adjoint rules of ad_rules.c, which are linear in the
 *                adjoint: the rule run with the adjoint tan(u) leaves exactly
 *                (d op / d u) * tan(u) in adj(u);
 *   loads        tan = p.tan[idx];
 *   stores       p.tan[idx] = tan(v) (0 for a value without one): the element's tangent is
 *                replaced as the element is;
 *   += and -=    atomic adds of tan(v) into p.tan, as the primal;
 *   min/max      in a serial task, the element's tangent follows the value that wins;
 *                a parallel task runs twice: first as K (values final), then again
 *                without side effects, each thread storing its value's tangent where its
 *                value is the element's final one (refused, with an error at the atomic,
 *                when the second pass could not see what the first saw);
 *   if, loops    the float results and carried values get one more result / carried
 *                value each, their tangents; no adstack (forward mode needs none);
 *   adstacks     (K.grad.jvp, Hessian-vector products) each adstack of a float type gets
 *                a twin holding the tangents, pushed and popped next to it.
 *
 * Tangents of values that cannot have one (integers, bools) are absent; a float value
 * without a tangent (a constant, a load of a nograd array) is structurally zero, and no
 * code is made for it. Top-level (uniform) values keep their copies at the top level;
 * their tangents, which read the scalar parameters' tangent arrays, are computed at the
 * start of each task. Requires verified IR (a primal kernel or a gradient kernel, before
 * ir_lower_semantics); the result verifies and is optimized by compiler/driver.c. */
#include <stdlib.h>
#include <string.h>

#include "ad_priv.h"

typedef struct jv {
    ad_ctx a;             /* the rules' context: map, adj (scratch), builder */
    ir_value **tan;       /* primal value -> its tangent in the code being built (NULL: 0) */
    ir_value **tan_param; /* primal param index -> its tangent array, or NULL */
    uint32_t *twin;       /* adstack index -> the twin holding tangents, or UINT32_MAX */
    bool parallel;        /* inside a parallel task */
    bool recompute;       /* the second pass of a parallel task with atomic_min/max: the
                             body again without side effects, giving each element's
                             tangent to the thread whose value won (jvp_task) */
    diag_sink *sink;
    const kern_source *src;
    bool failed;
} jv;

static ir_builder *B(jv *j) { return &j->a.b; }

static void set_val(jv *j, const ir_value *v, ir_value *c) { j->a.map[v->id] = c; }
static ir_value *val(jv *j, ir_value *v) { return ad_val(&j->a, v); }
static ir_value *tan_of(jv *j, const ir_value *v) { return j->tan[v->id]; }
static void set_tan(jv *j, const ir_value *v, ir_value *t) { j->tan[v->id] = t; }

static bool is_half(const kern_type *t) { return t->kind == TY_F16 || t->kind == TY_BF16; }

static ir_value *tan_or_zero(jv *j, const ir_value *v) {
    ir_value *t = tan_of(j, v);
    return t ? t : ir_const_float(B(j), ad_adj_type(v->type), 0.0);
}

static ir_op *terminator(const ir_region *r) { return (ir_op *)ir_region_terminator(r); }

static ir_value **mapped(jv *j, const ir_op *op, uint32_t from, uint32_t n) {
    ir_value **v = ARENA_ARRAY(&j->a.m->mem, ir_value *, n ? n : 1);
    for (uint32_t i = 0; i < n; i++)
        v[i] = val(j, op->operands[from + i]);
    return v;
}

/* The tangent array of array operand `array` (a kernel parameter), or NULL. */
static ir_value *tan_array(jv *j, const ir_value *array) {
    if (array->def || array->region != j->a.pk->body)
        return NULL;
    return j->tan_param[array->index];
}

/* An element of tangent array type t holding f32/f64 tangent v. */
static ir_value *to_elem(jv *j, const kern_type *elem, ir_value *v) {
    return is_half(elem) ? ir_cast(B(j), elem, v) : v;
}
static ir_value *from_elem(jv *j, ir_value *v) {
    return is_half(v->type) ? ir_cast(B(j), ty_f32(), v) : v;
}

static void copy_region(jv *j, ir_region *r);

/* ---- Pure ops ----------------------------------------------------------------------- */

/* The tangent of pure op `op` (already copied) from its operands' tangents. */
static void tangent_pure(jv *j, ir_op *op) {
    if (op->nresults != 1 || !ty_is_float(op->results[0]->type))
        return;
    ir_value *res = op->results[0];
    if (op->code == IR_CAST) {
        ir_value *x = op->operands[0], *t = ty_is_float(x->type) ? tan_of(j, x) : NULL;
        const kern_type *rt = ad_adj_type(res->type);
        if (t)
            set_tan(j, res, t->type == rt ? t : ir_cast(B(j), rt, t));
        return;
    }
    if (op->code == IR_BITCAST)
        return;
    ir_value *sum = NULL;
    for (uint32_t i = 0; i < op->noperands; i++) {
        ir_value *u = op->operands[i];
        ir_value *t = ty_is_float(u->type) ? tan_of(j, u) : NULL;
        bool seen = false;
        for (uint32_t k = 0; k < i; k++)
            seen |= op->operands[k] == u;
        if (!t || seen)
            continue;
        for (uint32_t k = 0; k < op->noperands; k++)
            j->a.adj[op->operands[k]->id] = NULL;
        ad_rule_pure(&j->a, op, t);
        ir_value *d = j->a.adj[u->id];
        for (uint32_t k = 0; k < op->noperands; k++)
            j->a.adj[op->operands[k]->id] = NULL;
        if (d)
            sum = sum ? ir_binop(B(j), IR_ADD, sum, d) : d;
    }
    set_tan(j, res, sum);
}

/* A copy of op (no regions) with mapped operands; maps its results. */
static ir_op *copy_flat(jv *j, ir_op *op) {
    B(j)->loc = op->loc;
    const kern_type **rt = ARENA_ARRAY(&j->a.m->mem, const kern_type *, op->nresults + 1);
    for (uint32_t i = 0; i < op->nresults; i++)
        rt[i] = op->results[i]->type;
    ir_op *c = ir_build(B(j), op->code, mapped(j, op, 0, op->noperands), op->noperands, rt,
                        op->nresults, 0);
    c->imm = op->imm;
    c->attr = op->attr;
    for (uint32_t i = 0; i < op->nresults; i++)
        set_val(j, op->results[i], c->results[i]);
    return c;
}

/* ---- Memory ------------------------------------------------------------------------- */

static void jvp_access(jv *j, ir_op *op) {
    if (j->recompute && op->code != IR_LOAD && op->code != IR_ATOMIC_MIN &&
        op->code != IR_ATOMIC_MAX)
        return; /* stores and adds happened in the first pass (their results are unused) */
    ir_op *c = j->recompute && op->code != IR_LOAD ? NULL : copy_flat(j, op);
    ir_value *ta = tan_array(j, op->operands[0]);
    if (!ta)
        return;
    const kern_type *elem = ta->type->elem;
    uint32_t nidx = ir_access_nidx(op);
    ir_value **idx = mapped(j, op, 1, nidx);
    ir_value *v = op->code == IR_LOAD ? NULL : op->operands[op->noperands - 1];
    bool used = op->nresults == 1 && ty_is_float(op->results[0]->type);
    switch (op->code) {
    case IR_LOAD: set_tan(j, op->results[0], from_elem(j, ir_load(B(j), ta, idx, nidx))); return;
    case IR_STORE: ir_store(B(j), ta, idx, nidx, to_elem(j, elem, tan_or_zero(j, v))); return;
    case IR_ATOMIC_ADD:
    case IR_ATOMIC_SUB:
    case IR_ATOMIC_XCHG: {
        if (!tan_of(j, v) && !used && op->code != IR_ATOMIC_XCHG)
            return;
        ir_value *old = ir_atomic(B(j), op->code, ta, idx, nidx, tan_or_zero(j, v));
        if (used)
            set_tan(j, op->results[0], from_elem(j, old));
        return;
    }
    case IR_ATOMIC_MIN:
    case IR_ATOMIC_MAX: {
        if (j->parallel) { /* the second pass gives the tangent to the winner */
            if (!j->recompute)
                return;
            ir_value *fin = ir_load(B(j), val(j, op->operands[0]), idx, nidx);
            ir_op *w = ir_if(B(j), ir_binop(B(j), IR_EQ, val(j, v), fin), NULL, 0);
            ir_builder saved = j->a.b;
            j->a.b = ir_builder_at_end(j->a.m, w->regions[0]);
            ir_store(B(j), ta, idx, nidx, to_elem(j, elem, tan_or_zero(j, v)));
            ir_yield(B(j), NULL, 0);
            j->a.b = ir_builder_at_end(j->a.m, w->regions[1]);
            ir_yield(B(j), NULL, 0);
            j->a.b = saved;
            return;
        }
        /* serial: the element takes the tangent of the value that replaced it (ties keep
         * the element's own, as the value does) */
        ir_value *old_t = from_elem(j, ir_load(B(j), ta, idx, nidx));
        if (used)
            set_tan(j, op->results[0], old_t);
        ir_value *wins =
            ir_binop(B(j), op->code == IR_ATOMIC_MIN ? IR_LT : IR_GT, val(j, v), c->results[0]);
        ir_value *nt = ir_select(B(j), wins, tan_or_zero(j, v), old_t);
        ir_store(B(j), ta, idx, nidx, to_elem(j, elem, nt));
        return;
    }
    default: kern_unreachable("jvp_access: not an access");
    }
}

/* ---- Adstacks (gradient kernels) ------------------------------------------------------ */

static uint32_t twin_of(jv *j, uint32_t s) {
    if (j->twin[s] == UINT32_MAX) {
        const ir_adstack *st = &j->a.pk->adstacks[s];
        j->twin[s] = ir_kernel_add_adstack(j->a.gk, ad_adj_type(st->type), st->cap, st->loc);
    }
    return j->twin[s];
}

static void jvp_adstack(jv *j, ir_op *op) {
    ir_op *c = copy_flat(j, op);
    uint32_t s = (uint32_t)op->imm.i;
    if (!ty_is_float(j->a.pk->adstacks[s].type))
        return;
    if (op->code == IR_ADPUSH)
        ir_adpush(B(j), twin_of(j, s), tan_or_zero(j, op->operands[0]));
    else
        set_tan(j, op->results[0], ir_adpop(B(j), twin_of(j, s)));
    (void)c;
}

/* ---- Control flow ------------------------------------------------------------------- */

/* Values with their tangents appended: vals (mapped already) then, for each float
 * primal value in prim, its tangent (or 0). */
static ir_value **with_tangents(jv *j, ir_value *const *vals, ir_value *const *prim, uint32_t n,
                                uint32_t *total) {
    ir_value **v = ARENA_ARRAY(&j->a.m->mem, ir_value *, 2 * n + 1);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        v[k++] = vals[i];
    for (uint32_t i = 0; i < n; i++)
        if (ty_is_float(prim[i]->type))
            v[k++] = tan_or_zero(j, prim[i]);
    *total = k;
    return v;
}

/* Maps the primal values `prim` (n) to to[0..n) and their tangents to the float slots
 * from to[n]. */
static void map_with_tangents(jv *j, ir_value *const *prim, ir_value *const *to, uint32_t n) {
    uint32_t k = n;
    for (uint32_t i = 0; i < n; i++) {
        set_val(j, prim[i], to[i]);
        set_tan(j, prim[i], ty_is_float(prim[i]->type) ? to[k++] : NULL);
    }
}

/* Copies the terminator of `from` (yield or condition) with tangents of its values
 * (from operand `first` on; the ones before, a condition or a go-on flag, as they are). */
static void copy_term(jv *j, ir_region *from, uint32_t first) {
    ir_op *y = terminator(from);
    uint32_t n = y->noperands - first, total;
    ir_value **vals = ARENA_ARRAY(&j->a.m->mem, ir_value *, n + 1);
    for (uint32_t i = 0; i < n; i++)
        vals[i] = val(j, y->operands[first + i]);
    B(j)->loc = y->loc;
    ir_value **v = with_tangents(j, vals, y->operands + first, n, &total);
    if (first) { /* shift in the leading operands */
        ir_value **all = ARENA_ARRAY(&j->a.m->mem, ir_value *, total + first + 1);
        for (uint32_t i = 0; i < first; i++)
            all[i] = val(j, y->operands[i]);
        memcpy(all + first, v, total * sizeof *v);
        v = all;
    }
    if (y->code == IR_YIELD)
        ir_yield(B(j), v, total + first);
    else
        ir_condition(B(j), v[0], v + 1, total);
}

/* The region of a new control-flow op: copied with tangents, at its end the terminator. */
static void fill_region(jv *j, ir_region *from, ir_region *to, uint32_t first_term) {
    ir_builder saved = j->a.b;
    j->a.b = ir_builder_at_end(j->a.m, to);
    copy_region(j, from);
    copy_term(j, from, first_term);
    j->a.b = saved;
}

static const kern_type **types_with_tangents(jv *j, ir_value *const *prim, uint32_t n,
                                             uint32_t *total) {
    const kern_type **t = ARENA_ARRAY(&j->a.m->mem, const kern_type *, 2 * n + 1);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        t[k++] = prim[i]->type;
    for (uint32_t i = 0; i < n; i++)
        if (ty_is_float(prim[i]->type))
            t[k++] = ad_adj_type(prim[i]->type);
    *total = k;
    return t;
}

static void jvp_if(jv *j, ir_op *op) {
    uint32_t nt;
    const kern_type **rt = types_with_tangents(j, op->results, op->nresults, &nt);
    B(j)->loc = op->loc;
    ir_op *c = ir_if(B(j), val(j, op->operands[0]), rt, nt);
    for (int br = 0; br < 2; br++)
        fill_region(j, op->regions[br], c->regions[br], 0);
    map_with_tangents(j, op->results, c->results, op->nresults);
}

static void jvp_for(jv *j, ir_op *op) {
    ir_region *body = op->regions[0];
    uint32_t n = op->noperands - 2, total;
    B(j)->loc = op->loc;
    ir_value **inits = with_tangents(j, mapped(j, op, 2, n), op->operands + 2, n, &total);
    bool early = op->attr & IR_FOR_EARLY_EXIT;
    ir_op *c = ir_for(B(j), val(j, op->operands[0]), val(j, op->operands[1]), inits, total, early);
    ir_region *to = c->regions[0];
    set_val(j, body->args[0], to->args[0]);
    map_with_tangents(j, body->args + 1, to->args + 1, n);
    fill_region(j, body, to, early ? 1 : 0);
    map_with_tangents(j, op->results, c->results, op->nresults);
}

static void jvp_while(jv *j, ir_op *op) {
    ir_region *before = op->regions[0], *after = op->regions[1];
    uint32_t n = op->noperands, total;
    B(j)->loc = op->loc;
    ir_value **inits = with_tangents(j, mapped(j, op, 0, n), op->operands, n, &total);
    ir_op *c = ir_while(B(j), inits, total);
    map_with_tangents(j, before->args, c->regions[0]->args, n);
    fill_region(j, before, c->regions[0], 1);
    map_with_tangents(j, after->args, c->regions[1]->args, after->nargs);
    fill_region(j, after, c->regions[1], 0);
    map_with_tangents(j, op->results, c->results, op->nresults);
}

/* A func call with a custom adjoint (docs/ir.md): forward mode differentiates the func's
 * body, its primal region, inline. */
static void jvp_custom(jv *j, ir_op *op) {
    ir_region *body = op->regions[0];
    for (uint32_t i = 0; i < body->nargs; i++) {
        set_val(j, body->args[i], val(j, op->operands[i]));
        set_tan(j, body->args[i], tan_of(j, op->operands[i]));
    }
    copy_region(j, body);
    ir_op *y = terminator(body);
    for (uint32_t i = 0; i < op->nresults; i++) {
        set_val(j, op->results[i], val(j, y->operands[i]));
        set_tan(j, op->results[i], tan_of(j, y->operands[i]));
    }
}

static void jvp_op(jv *j, ir_op *op) {
    switch (op->code) {
    case IR_CUSTOM: jvp_custom(j, op); return;
    case IR_LOAD:
    case IR_STORE:
    case IR_ATOMIC_ADD:
    case IR_ATOMIC_SUB:
    case IR_ATOMIC_MIN:
    case IR_ATOMIC_MAX:
    case IR_ATOMIC_XCHG: jvp_access(j, op); return;
    case IR_ADPUSH:
    case IR_ADPOP: jvp_adstack(j, op); return;
    case IR_IF: jvp_if(j, op); return;
    case IR_FOR: jvp_for(j, op); return;
    case IR_WHILE: jvp_while(j, op); return;
    default:
        kern_assert(op->nregions == 0);
        if (j->recompute && op->code == IR_CHECK)
            return; /* reported by the first pass */
        copy_flat(j, op);
        tangent_pure(j, op);
        return;
    }
}

/* Copies the ops of r (without its terminator) at the cursor, with tangents. */
static void copy_region(jv *j, ir_region *r) {
    ir_op *term = terminator(r);
    ir_foreach_op(op, r) if (op != term) jvp_op(j, op);
}

/* ---- Kernel ------------------------------------------------------------------------- */

/* At the start of a task: the tangents of the scalar parameters and the top-level values
 * (their primal copies are at the top level). */
static void top_tangents(jv *j) {
    ir_region *top = j->a.pk->body;
    for (uint32_t p = 0; p < j->a.pk->nparams; p++) {
        ir_value *v = top->args[p], *ta = j->tan_param[p];
        set_tan(j, v, NULL);
        if (ta && !ty_is_array(v->type)) {
            B(j)->loc = j->a.pk->params[p].loc;
            ir_value *zero = ir_const_int(B(j), ty_i32(), 0);
            set_tan(j, v, from_elem(j, ir_load(B(j), ta, &zero, 1)));
        }
    }
    ir_foreach_op(op, top) {
        if (op->code == IR_PARALLEL || op->code == IR_SERIAL)
            continue;
        B(j)->loc = op->loc;
        if (op->code == IR_LOAD) {
            ir_value *ta = tan_array(j, op->operands[0]);
            if (ta)
                set_tan(j, op->results[0],
                        from_elem(j, ir_load(B(j), ta, mapped(j, op, 1, op->noperands - 1),
                                             op->noperands - 1)));
        } else {
            tangent_pure(j, op);
        }
    }
}

typedef struct task_scan {
    const ir_op *minmax;     /* the first atomic_min/max on an array with a tangent */
    const ir_op *used;       /* an atomic whose result the body uses */
    const ir_value **loaded; /* arrays loaded */
    uint32_t nloaded;
    const ir_op *conflict;   /* a write of an array the body also loads */
} task_scan;

static void scan_task(jv *j, const ir_region *body, const ir_region *r, task_scan *t) {
    ir_foreach_op(op, r) {
        for (uint32_t i = 0; i < op->nregions; i++)
            scan_task(j, body, op->regions[i], t);
        if (op->code == IR_LOAD) {
            t->loaded[t->nloaded++] = op->operands[0];
            continue;
        }
        if (op->code != IR_STORE && !(op->code >= IR_ATOMIC_ADD && op->code <= IR_ATOMIC_XCHG))
            continue;
        if ((op->code == IR_ATOMIC_MIN || op->code == IR_ATOMIC_MAX) && !t->minmax &&
            tan_array(j, op->operands[0]))
            t->minmax = op;
        if (op->code != IR_STORE && !t->used && ir_region_uses(body, op->results[0]))
            t->used = op;
    }
}

/* Whether array a is loaded in the task (t->loaded after scan_task). */
static bool loaded(const task_scan *t, const ir_value *a) {
    for (uint32_t i = 0; i < t->nloaded; i++)
        if (t->loaded[i] == a)
            return true;
    return false;
}

static void find_conflict(const ir_region *r, task_scan *t) {
    ir_foreach_op(op, r) {
        for (uint32_t i = 0; i < op->nregions; i++)
            find_conflict(op->regions[i], t);
        if (!t->conflict && op->code != IR_LOAD && (ir_info(op->code)->flags & OPF_PURE) == 0 &&
            op->noperands > 0 && ty_is_array(op->operands[0]->type) &&
            loaded(t, op->operands[0]))
            t->conflict = op;
    }
}

/* A parallel task with atomic_min/max gets a second pass (docs/autodiff.md): the first
 * updates the values, the second recomputes each thread's value and its tangent and
 * stores the tangent where the value is the element's final one. That needs the second
 * pass to see what the first saw: no array the task writes is one it loads, and no
 * atomic's result is used. False (after an error) when that does not hold. */
static bool minmax_pass_possible(jv *j, ir_region *body, task_scan *t) {
    t->loaded = calloc(ir_region_count_ops(body) + 1, sizeof *t->loaded);
    if (!t->loaded)
        kern_oom(ir_region_count_ops(body) * sizeof *t->loaded);
    scan_task(j, body, body, t);
    if (t->minmax)
        find_conflict(body, t);
    free(t->loaded);
    const ir_op *why = t->used ? t->used : t->conflict;
    if (!t->minmax || !why)
        return true;
    diag_report(j->sink, DIAG_ERROR, j->src, t->minmax->loc,
                "forward mode (K.jvp) differentiates %s in a parallel loop by recomputing the "
                "loop once the values are final, which needs a loop that %s (line %u); "
                "K.grad supports it, or split the kernel",
                t->minmax->code == IR_ATOMIC_MIN ? "atomic_min" : "atomic_max",
                t->used ? "does not use an atomic's result" : "reads no array it writes",
                why->loc.line);
    j->failed = true;
    return false;
}

static void jvp_task(jv *j, ir_op *task) {
    ir_region *body = task->regions[0];
    task_scan scan = {0};
    bool second = task->code == IR_PARALLEL && minmax_pass_possible(j, body, &scan) &&
                  scan.minmax != NULL;
    j->parallel = task->code == IR_PARALLEL;
    for (int pass = 0; pass < 1 + second; pass++) {
        j->a.b = ir_builder_at_end(j->a.m, j->a.gk->body);
        B(j)->loc = task->loc;
        ir_op *t = task->code == IR_PARALLEL ? ir_parallel(B(j), mapped(j, task, 0, task->noperands),
                                                           task->noperands / 2)
                                             : ir_serial(B(j));
        t->loc = task->loc;
        if (second) /* both passes compute the values alike, bit for bit */
            t->attr |= IR_PAR_SCALAR;
        for (uint32_t i = 0; i < body->nargs; i++)
            set_val(j, body->args[i], t->regions[0]->args[i]);
        j->a.b = ir_builder_at_end(j->a.m, t->regions[0]);
        j->recompute = pass == 1;
        top_tangents(j);
        copy_region(j, body);
    }
    j->recompute = false;
}

ir_kernel *ad_jvp_kernel(ir_kernel *k, diag_sink *sink, const kern_source *src) {
    ir_module *m = k->module;
    kern_assert(!m->lowered);
    uint32_t ntan = 0;
    for (uint32_t i = 0; i < k->nparams; i++) {
        const kern_type *t = k->params[i].type;
        ntan += ty_is_float(ty_is_array(t) ? t->elem : t) && !k->params[i].nograd;
    }
    ir_param *ps = ARENA_ARRAY(&m->mem, ir_param, k->nparams + ntan + 1);
    uint32_t np = 0;
    for (uint32_t i = 0; i < k->nparams; i++)
        ps[np++] = k->params[i];
    for (uint32_t i = 0; i < k->nparams; i++) {
        const kern_type *t = k->params[i].type;
        if (!ty_is_float(ty_is_array(t) ? t->elem : t) || k->params[i].nograd)
            continue;
        ps[np] = k->params[i];
        ps[np].name = arena_printf(&m->mem, "%s.tan", k->params[i].name);
        ps[np].type = ty_is_array(t) ? t : ty_array(t, 1);
        ps[np++].nograd = false;
    }
    jv J = {.sink = sink, .src = src}, *j = &J;
    j->a.m = m;
    j->a.pk = k;
    j->a.gk = ir_kernel_new(m, arena_printf(&m->mem, "%s.jvp", k->name), k->loc, ps, np);
    ad_number_region(&j->a, k->body);
    j->a.map = calloc(j->a.nvals + 1, sizeof *j->a.map);
    j->a.adj = calloc(j->a.nvals + 1, sizeof *j->a.adj);
    j->tan = calloc(j->a.nvals + 1, sizeof *j->tan);
    j->tan_param = calloc(k->nparams + 1, sizeof *j->tan_param);
    j->twin = malloc((k->nadstacks + 1) * sizeof *j->twin);
    if (!j->a.map || !j->a.adj || !j->tan || !j->tan_param || !j->twin)
        kern_oom(j->a.nvals * sizeof(void *));
    /* a gradient kernel's adstacks keep their indices; twins come after them */
    for (uint32_t s = 0; s < k->nadstacks; s++) {
        ir_kernel_add_adstack(j->a.gk, k->adstacks[s].type, k->adstacks[s].cap, k->adstacks[s].loc);
        j->twin[s] = UINT32_MAX;
    }
    for (uint32_t i = 0, g = k->nparams; i < k->nparams; i++) {
        set_val(j, k->body->args[i], j->a.gk->body->args[i]);
        const kern_type *t = k->params[i].type;
        if (ty_is_float(ty_is_array(t) ? t->elem : t) && !k->params[i].nograd)
            j->tan_param[i] = j->a.gk->body->args[g++];
    }
    j->a.b = ir_builder_at_end(m, j->a.gk->body);
    ir_foreach_op(op, k->body) if (op->code != IR_PARALLEL && op->code != IR_SERIAL)
        copy_flat(j, op);
    ir_foreach_op(op, k->body) if (op->code == IR_PARALLEL || op->code == IR_SERIAL)
        jvp_task(j, op);
    free(j->a.map);
    free(j->a.adj);
    free(j->tan);
    free(j->tan_param);
    free(j->twin);
    if (!j->failed)
        return j->a.gk;
    /* unlink the kernel (its memory stays in the arena) */
    ir_kernel **pp = &m->kernels, *prev = NULL;
    while (*pp != j->a.gk)
        prev = *pp, pp = &(*pp)->next;
    *pp = NULL;
    m->last_kernel = prev;
    m->nkernels--;
    return NULL;
}
