/* ad_grad.c - reverse mode: builds K.grad from the primal kernel K (docs/reference.md section 8).
 *
 * Signature: K's parameters, then one adjoint array `p.grad` per differentiable
 * parameter p (float element type, not nograd); a scalar's adjoint is an array of length
 * 1. The top-level uniform values of K are copied first; then, for each task of K in
 * reverse order, a task of the same shape whose body is
 *
 *   forward sweep   the task body again, without its stores and atomics (K.grad never
 *                   writes primal arrays); the loops that sit directly in the body push
 *                   their carried values on adstacks at the start of every iteration
 *   reverse sweep   the body's ops in reverse order, each accumulating the adjoints of
 *                   its operands from the adjoint of its result (ad_rules.c for the pure
 *                   ops; loads, stores and atomics below), then the adjoints of the
 *                   top-level values the thread used, and finally one update per scalar
 *                   parameter of its adjoint array.
 *
 * Memory. A load of a differentiable array adds its adjoint to the element's .grad (an
 * atomic add: other threads may read the element too). A store replaces: the stored
 * value's adjoint is the element's .grad, which then becomes 0 (the old value did not
 * reach the new state). `+=` and `-=` (atomic_add/sub) pass the element's .grad to the
 * added value and keep it. atomic_min/max give the element's .grad to a value equal to
 * the final element (one thread takes it, with an exchange, and leaves 0). The global-
 * access check (ad_check.c) guarantees that every element a load saw is still in memory.
 *
 * Control flow. Regions are reversed by recomputation: the reverse of an `if` is an `if`
 * on the same condition whose branches recompute the branch and then reverse it, and
 * yield the adjoints of the values from outside that the branch used (its free values).
 * The reverse of a loop is a loop over the iterations in reverse order: each pops the
 * carried values of its iteration, recomputes the iteration (whose own inner loops push
 * again), reverses it, and carries the adjoints of the carried values and of the free
 * values. An early-exit for and a while count their iterations in the forward sweep. A
 * loop's adstacks therefore hold one execution of that loop only: the capacity is its
 * trip count maximized over the enclosing indices (ad_size.c), or, for a while loop,
 * ad_stack_size + 1 entries (ad_stack_size iterations and the final test). A while
 * iteration is "before" (the test) then "after"; the reverse handles the last test
 * first, then pairs of (after, before) in reverse.
 *
 * Aligned reverse loops. A loop of a parallel task whose trip count n differs between
 * work items (ir_div_loop_divergent: a varying bound, break, or a while's test) is
 * reversed by a loop over a counter that the lanes running together share: N = lanemax(n)
 * iterations, iteration r reversing forward iteration N - 1 - r in the lanes where that
 * is below n, the others carrying their adjoints through. The lanes of a warp, subgroup
 * or SIMD vector then pop their adstacks at one depth and add into w.grad[t] at one t.
 * Any N >= n is correct (a group of one lane is the plain loop), so correctness never
 * depends on the group. The segments of a checkpointed loop are aligned the same way.
 *
 * A `custom` op (a call of a func with a custom adjoint) is its primal region in the
 * forward sweep and its adjoint region in the reverse sweep: the region, inlined with its
 * arguments mapped to the forward sweep's operands and results and the results'
 * adjoints, yields the adjoints that flow into the operands. Its operands and results
 * are ordinary values of the forward sweep, so inside a loop they are recomputed or
 * popped like any other.
 *
 * K.grad.ckpt (ad_grad_ckpt_kernel) is the same transform with the loops that no loop
 * encloses checkpointed: their forward sweep pushes the carried values every k-th
 * iteration only (k = the parameter ckpt.kN, at least 1; a countdown carried beside them),
 * and their reverse runs segments of k iterations newest first, each recomputed forward
 * from its checkpoint onto the segment stacks and then reversed as K.grad reverses the
 * whole loop (a while loop first recomputes its final test from the last checkpoint).
 *
 * Loops and ifs without float values (integer searches, counters) are copied, never
 * reversed. Requires verified primal IR; runs after the optimization pipeline, and
 * compiler/driver.c optimizes the result (DCE removes the forward sweep's dead copies). */
#include <stdlib.h>
#include <string.h>

#include "ad_priv.h"

/* ---- Numbering and small helpers ------------------------------------------------------ */

void ad_number_region(ad_ctx *a, ir_region *r) {
    for (uint32_t i = 0; i < r->nargs; i++)
        r->args[i]->id = a->nvals++;
    ir_foreach_op(op, r) {
        op->id = a->nops++;
        for (uint32_t i = 0; i < op->nresults; i++)
            op->results[i]->id = a->nvals++;
        for (uint32_t i = 0; i < op->nregions; i++)
            ad_number_region(a, op->regions[i]);
    }
}

ir_value *ad_val(ad_ctx *a, ir_value *v) {
    ir_value *c = a->map[v->id];
    kern_assert(c);
    return c;
}

static void set_val(ad_ctx *a, ir_value *v, ir_value *c) { a->map[v->id] = c; }

void ad_accum(ad_ctx *a, ir_value *v, ir_value *d) {
    if (!d || !ty_is_float(v->type))
        return;
    ir_value *old = a->adj[v->id];
    a->adj[v->id] = old ? ir_binop(&a->b, IR_ADD, old, d) : d;
}

static ir_value *adj_or_zero(ad_ctx *a, ir_value *v) {
    ir_value *g = a->adj[v->id];
    return g ? g : ir_const_float(&a->b, ad_adj_type(v->type), 0.0);
}

static bool is_half(const kern_type *t) { return t->kind == TY_F16 || t->kind == TY_BF16; }

/* 0 as an element of adjoint array type t (f16/bf16: a rounded f32 0, as they have no
 * constants). */
static ir_value *zero_elem(ad_ctx *a, const kern_type *t) {
    ir_value *z = ir_const_float(&a->b, ad_adj_type(t), 0.0);
    return is_half(t) ? ir_cast(&a->b, t, z) : z;
}

/* Whether op or anything nested in it computes with floats (only then is there an
 * adjoint to propagate through it). */
static bool region_active(const ir_region *r);
static bool op_active(const ir_op *op) {
    for (uint32_t i = 0; i < op->nresults; i++)
        if (ty_is_float(op->results[i]->type))
            return true;
    for (uint32_t i = 0; i < op->noperands; i++) {
        const kern_type *t = op->operands[i]->type;
        if (ty_is_float(t) || (ty_is_array(t) && ty_is_float(t->elem)))
            return true;
    }
    for (uint32_t i = 0; i < op->nregions; i++)
        if (region_active(op->regions[i]))
            return true;
    return false;
}
static bool region_active(const ir_region *r) {
    for (uint32_t i = 0; i < r->nargs; i++)
        if (ty_is_float(r->args[i]->type))
            return true;
    ir_foreach_op(op, r) if (op_active(op)) return true;
    return false;
}

/* Whether value v is defined inside op (in one of its regions, at any depth). */
static bool defined_inside(const ir_value *v, const ir_op *op) {
    const ir_region *r = v->def ? v->def->parent : v->region;
    while (r) {
        if (r->parent == op)
            return true;
        r = r->parent ? r->parent->parent : NULL;
    }
    return false;
}

/* The float values defined outside op and used inside it: the free values whose
 * adjoints the reverse of op must hand back. */
static void collect_free_in(ad_ctx *a, const ir_op *root, const ir_region *r, kern_ptrvec *out) {
    ir_foreach_op(op, r) {
        for (uint32_t i = 0; i < op->noperands; i++) {
            ir_value *v = op->operands[i];
            if (!ty_is_float(v->type) || a->mark[v->id] == a->markgen || defined_inside(v, root))
                continue;
            a->mark[v->id] = a->markgen;
            ptrvec_push(out, v);
        }
        for (uint32_t i = 0; i < op->nregions; i++)
            collect_free_in(a, root, op->regions[i], out);
    }
}
static void collect_free(ad_ctx *a, const ir_op *root, kern_ptrvec *out) {
    a->markgen++;
    for (uint32_t i = 0; i < root->nregions; i++)
        collect_free_in(a, root, root->regions[i], out);
}

/* Forgets the adjoints of every value defined in r (a region about to be reversed once
 * more, by another iteration's copy). */
static void clear_adj(ad_ctx *a, const ir_region *r) {
    for (uint32_t i = 0; i < r->nargs; i++)
        a->adj[r->args[i]->id] = NULL;
    ir_foreach_op(op, r) {
        for (uint32_t i = 0; i < op->nresults; i++)
            a->adj[op->results[i]->id] = NULL;
        for (uint32_t i = 0; i < op->nregions; i++)
            clear_adj(a, op->regions[i]);
    }
}

static ir_op *terminator(const ir_region *r) {
    return r->last && (ir_info(r->last->code)->flags & OPF_TERM) ? r->last : NULL;
}

static ir_value **mapped_operands(ad_ctx *a, const ir_op *op, uint32_t from, uint32_t n) {
    ir_value **v = ARENA_ARRAY(&a->m->mem, ir_value *, n ? n : 1);
    for (uint32_t i = 0; i < n; i++)
        v[i] = ad_val(a, op->operands[from + i]);
    return v;
}

static const kern_type **result_types(ad_ctx *a, const ir_op *op) {
    const kern_type **t = ARENA_ARRAY(&a->m->mem, const kern_type *, op->nresults + 1);
    for (uint32_t i = 0; i < op->nresults; i++)
        t[i] = op->results[i]->type;
    return t;
}

/* ---- Forward sweep: copies ------------------------------------------------------------ */

static void copy_region(ad_ctx *a, ir_region *r, bool push);

/* A copy of op with mapped operands, its results mapped to the copy's. */
static ir_op *copy_plain(ad_ctx *a, ir_op *op) {
    a->b.loc = op->loc;
    ir_op *c = ir_build(&a->b, op->code, mapped_operands(a, op, 0, op->noperands), op->noperands,
                        result_types(a, op), op->nresults, op->nregions);
    c->imm = op->imm;
    c->attr = op->attr;
    for (uint32_t i = 0; i < op->nresults; i++)
        set_val(a, op->results[i], c->results[i]);
    for (uint32_t i = 0; i < op->nregions; i++) {
        ir_region *from = op->regions[i], *to = c->regions[i];
        for (uint32_t j = 0; j < from->nargs; j++)
            set_val(a, from->args[j], ir_region_add_arg(a->m, to, from->args[j]->type));
        ir_builder saved = a->b;
        a->b = ir_builder_at_end(a->m, to);
        copy_region(a, from, false);
        if (terminator(from))
            copy_plain(a, terminator(from));
        a->b = saved;
    }
    return c;
}

/* Whether carried value `arg` can be recomputed instead of pushed: it never changes
 * (`next` is arg itself), or it is an integer induction `arg + c` / `c + arg` / `arg - c`
 * with c defined outside the loop or a constant. Sets *step (NULL: never changes) and
 * *neg. */
static bool recomputable(const ir_op *loop, const ir_value *arg, const ir_value *next,
                         ir_value **step, bool *neg) {
    *step = NULL;
    *neg = false;
    if (next == arg)
        return true;
    const ir_op *d = next->def;
    if (!d || !ty_is_int(arg->type) || (d->code != IR_ADD && d->code != IR_SUB))
        return false;
    for (uint32_t k = 0; k < 2; k++) {
        if (d->operands[k] != arg || (k == 1 && d->code == IR_SUB))
            continue;
        ir_value *c = d->operands[1 - k];
        if (defined_inside(c, loop) && !(c->def && c->def->code == IR_CONST))
            return false;
        *step = c;
        *neg = d->code == IR_SUB;
        return true;
    }
    return false;
}

/* The value carried value i of `loop` arrives with in iteration k (loop-carried value
 * that was recomputable, not pushed): init, or init + k * c. */
static ir_value *recompute_carried(ad_ctx *a, ad_loop *L, ir_op *loop, uint32_t i, ir_value *k) {
    ir_value *init = ad_val(a, loop->operands[(loop->code == IR_FOR ? 2 : 0) + i]);
    if (!L->step[i])
        return init;
    const kern_type *t = init->type;
    ir_value *kk = k->type == t ? k : ir_cast(&a->b, t, k);
    const ir_value *c = L->step[i];
    ir_value *cv = c->def && c->def->code == IR_CONST ? ir_const_int(&a->b, t, c->def->imm.i)
                                                      : ad_val(a, L->step[i]);
    ir_value *d = ir_binop(&a->b, IR_MUL, kk, cv);
    return ir_binop(&a->b, L->neg[i] ? IR_SUB : IR_ADD, init, d);
}

static ad_loop *loop_record(ad_ctx *a, ir_op *loop, ir_region *carried_in) {
    ad_loop *L = a->loops[loop->id];
    if (L)
        return L;
    L = ARENA_NEW(&a->m->mem, ad_loop);
    uint32_t first = loop->code == IR_FOR ? 1 : 0; /* FOR: arg 0 is the index */
    L->ncarried = carried_in->nargs - first;
    L->stacks = ARENA_ARRAY(&a->m->mem, uint32_t, L->ncarried + 1);
    L->step = ARENA_ARRAY(&a->m->mem, ir_value *, L->ncarried + 1);
    L->neg = ARENA_ARRAY(&a->m->mem, bool, L->ncarried + 1);
    arena scratch; /* the capacity, until the adstacks copy it */
    arena_init(&scratch);
    sz_expr *cap = loop->code == IR_FOR ? ad_loop_capacity(a->pk, loop, &scratch) : NULL;
    if (!cap) /* while, or bounds the analysis cannot follow: the default capacity */
        cap = sz_const(&scratch, (int64_t)a->ad_stack_size + 1);
    sz_expr *ck_cap = NULL;
    if (a->ck_k && a->ck_k[loop->id]) { /* segments of min(k, N), checkpoints ceil(N / k) */
        sz_expr *k = sz_bin(&scratch, SZ_MAX, sz_param(&scratch, (int)a->ck_param[loop->id]),
                            sz_const(&scratch, 1));
        ck_cap = sz_bin(
            &scratch, SZ_DIV,
            sz_bin(&scratch, SZ_ADD, cap, sz_bin(&scratch, SZ_SUB, k, sz_const(&scratch, 1))), k);
        cap = sz_bin(&scratch, SZ_MIN, k, cap);
        L->ck_stacks = ARENA_ARRAY(&a->m->mem, uint32_t, L->ncarried + 1);
        L->ck_k = a->ck_k[loop->id];
    }
    for (uint32_t i = 0; i < L->ncarried; i++) {
        ir_value *arg = carried_in->args[first + i];
        /* the value the next iteration gets, in terms of this iteration's */
        const ir_value *self = arg, *next = NULL;
        if (loop->code == IR_FOR) {
            ir_op *y = terminator(loop->regions[0]);
            next = y->operands[(loop->attr & IR_FOR_EARLY_EXIT ? 1 : 0) + i];
        } else {
            ir_op *cond = terminator(loop->regions[0]);
            ir_region *after = loop->regions[1];
            if (cond->operands[1 + i] == arg) { /* forwarded unchanged to the body */
                self = after->args[i];
                next = terminator(after)->operands[i];
            }
        }
        if (next && recomputable(loop, self, next, &L->step[i], &L->neg[i])) {
            L->stacks[i] = UINT32_MAX;
        } else {
            L->stacks[i] = ir_kernel_add_adstack(a->gk, arg->type, cap, loop->loc);
            if (ck_cap)
                L->ck_stacks[i] = ir_kernel_add_adstack(a->gk, arg->type, ck_cap, loop->loc);
        }
    }
    arena_free(&scratch);
    a->loops[loop->id] = L;
    return L;
}

static void push_carried(ad_ctx *a, ad_loop *L, ir_region *to, uint32_t first, kern_loc loc) {
    a->b.loc = loc;
    for (uint32_t i = 0; i < L->ncarried; i++)
        if (L->stacks[i] != UINT32_MAX)
            ir_adpush(&a->b, L->stacks[i], to->args[first + i]);
}

/* A checkpointed loop's forward sweep: an iteration pushes its carried values on the
 * checkpoint stacks when it starts a segment (`left`, the iterations until the next
 * checkpoint, is 0: iterations 0, k, 2k, ...). */
static void push_checkpoint(ad_ctx *a, ad_loop *L, ir_region *to, uint32_t first, ir_value *left,
                            kern_loc loc) {
    a->b.loc = loc;
    ir_value *starts = ir_binop(&a->b, IR_EQ, left, ir_const_int(&a->b, ty_i64(), 0));
    ir_op *w = ir_if(&a->b, starts, NULL, 0);
    ir_builder saved = a->b;
    a->b = ir_builder_at_end(a->m, w->regions[0]);
    for (uint32_t i = 0; i < L->ncarried; i++)
        if (L->stacks[i] != UINT32_MAX)
            ir_adpush(&a->b, L->ck_stacks[i], to->args[first + i]);
    ir_yield(&a->b, NULL, 0);
    a->b = ir_builder_at_end(a->m, w->regions[1]);
    ir_yield(&a->b, NULL, 0);
    a->b = saved;
}

/* The next value of a checkpointed loop's countdown to its next checkpoint. */
static ir_value *countdown(ad_ctx *a, ad_loop *L, ir_value *left) {
    ir_value *zero = ir_const_int(&a->b, ty_i64(), 0), *one = ir_const_int(&a->b, ty_i64(), 1);
    return ir_select(&a->b, ir_binop(&a->b, IR_EQ, left, zero),
                     ir_binop(&a->b, IR_SUB, L->ck_k, one), ir_binop(&a->b, IR_SUB, left, one));
}

/* FOR with pushes: every iteration first pushes its carried values; an early-exit for
 * also counts its iterations in one more carried value. */
static void copy_for_push(ad_ctx *a, ir_op *op) {
    ir_region *body = op->regions[0];
    ad_loop *L = loop_record(a, op, body);
    bool early = op->attr & IR_FOR_EARLY_EXIT, ck = L->ck_stacks != NULL;
    uint32_t n = op->noperands - 2;
    ir_value **inits = ARENA_ARRAY(&a->m->mem, ir_value *, n + 2);
    for (uint32_t i = 0; i < n; i++)
        inits[i] = ad_val(a, op->operands[2 + i]);
    a->b.loc = op->loc;
    if (early)
        inits[n] = ir_const_int(&a->b, ty_i32(), 0);
    if (ck) /* a checkpointed loop counts k - 1 .. 0 down to its next checkpoint */
        inits[n + early] = ir_const_int(&a->b, ty_i64(), 0);
    ir_op *c = ir_for(&a->b, ad_val(a, op->operands[0]), ad_val(a, op->operands[1]), inits,
                      n + early + ck, early);
    ir_region *to = c->regions[0];
    for (uint32_t i = 0; i < body->nargs; i++)
        set_val(a, body->args[i], to->args[i]);
    ir_builder saved = a->b;
    a->b = ir_builder_at_end(a->m, to);
    if (ck)
        push_checkpoint(a, L, to, 1, to->args[1 + n + early], op->loc);
    else
        push_carried(a, L, to, 1, op->loc);
    copy_region(a, body, false); /* without the terminator */
    ir_op *y = terminator(body);
    uint32_t ny = y->noperands;
    ir_value **ys = ARENA_ARRAY(&a->m->mem, ir_value *, ny + 2);
    for (uint32_t i = 0; i < ny; i++)
        ys[i] = ad_val(a, y->operands[i]);
    a->b.loc = y->loc;
    if (early)
        ys[ny] = ir_binop(&a->b, IR_ADD, to->args[1 + n], ir_const_int(&a->b, ty_i32(), 1));
    if (ck)
        ys[ny + early] = countdown(a, L, to->args[1 + n + early]);
    ir_yield(&a->b, ys, ny + early + ck);
    a->b = saved;
    for (uint32_t i = 0; i < op->nresults; i++)
        set_val(a, op->results[i], c->results[i]);
    L->count = early ? c->results[n] : NULL;
}

/* WHILE with pushes: the before region pushes the carried values; both regions carry an
 * iteration counter (incremented by the after region). */
static void copy_while_push(ad_ctx *a, ir_op *op) {
    ir_region *before = op->regions[0], *after = op->regions[1];
    ad_loop *L = loop_record(a, op, before);
    bool ck = L->ck_stacks != NULL; /* one more carried i64: the countdown */
    uint32_t n = op->noperands;
    ir_value **inits = ARENA_ARRAY(&a->m->mem, ir_value *, n + 2);
    for (uint32_t i = 0; i < n; i++)
        inits[i] = ad_val(a, op->operands[i]);
    a->b.loc = op->loc;
    inits[n] = ir_const_int(&a->b, ty_i32(), 0);
    if (ck)
        inits[n + 1] = ir_const_int(&a->b, ty_i64(), 0);
    ir_op *c = ir_while(&a->b, inits, n + 1 + ck);
    /* ir_while gives both regions the carried types; the after region receives the
     * condition's forwarded values, which are the while's results. */
    ir_region *tb = c->regions[0], *ta = c->regions[1];
    for (uint32_t i = 0; i < before->nargs; i++)
        set_val(a, before->args[i], tb->args[i]);
    ir_builder saved = a->b;
    a->b = ir_builder_at_end(a->m, tb);
    if (ck) /* every test pushes: the final one's values are a checkpoint too */
        push_checkpoint(a, L, tb, 0, tb->args[n + 1], op->loc);
    else
        push_carried(a, L, tb, 0, op->loc);
    copy_region(a, before, false);
    ir_op *cond = terminator(before);
    ir_value **cv = ARENA_ARRAY(&a->m->mem, ir_value *, cond->noperands + 2);
    for (uint32_t i = 1; i < cond->noperands; i++)
        cv[i - 1] = ad_val(a, cond->operands[i]);
    cv[cond->noperands - 1] = tb->args[n];
    if (ck)
        cv[cond->noperands] = tb->args[n + 1];
    a->b.loc = cond->loc;
    ir_condition(&a->b, ad_val(a, cond->operands[0]), cv, cond->noperands + ck);
    for (uint32_t i = 0; i < after->nargs; i++)
        set_val(a, after->args[i], ta->args[i]);
    a->b = ir_builder_at_end(a->m, ta);
    copy_region(a, after, false);
    ir_op *y = terminator(after);
    ir_value **ys = ARENA_ARRAY(&a->m->mem, ir_value *, y->noperands + 2);
    for (uint32_t i = 0; i < y->noperands; i++)
        ys[i] = ad_val(a, y->operands[i]);
    a->b.loc = y->loc;
    ys[y->noperands] =
        ir_binop(&a->b, IR_ADD, ta->args[after->nargs], ir_const_int(&a->b, ty_i32(), 1));
    if (ck)
        ys[y->noperands + 1] = countdown(a, L, ta->args[after->nargs + 1]);
    ir_yield(&a->b, ys, y->noperands + 1 + ck);
    a->b = saved;
    for (uint32_t i = 0; i < op->nresults; i++)
        set_val(a, op->results[i], c->results[i]);
    L->count = c->results[op->nresults];
}

/* Copies op into the forward sweep: stores and atomics are left out (an atomic whose
 * old value is used reads the element instead: the global-access check has warned that
 * this is not what K saw); with push, an active loop pushes its carried values. */
static void copy_op(ad_ctx *a, ir_op *op, bool push) {
    switch (op->code) {
    case IR_STORE: return;
    case IR_ATOMIC_ADD:
    case IR_ATOMIC_SUB:
    case IR_ATOMIC_MIN:
    case IR_ATOMIC_MAX:
    case IR_ATOMIC_XCHG: {
        a->b.loc = op->loc;
        ir_value *r = ir_load(&a->b, ad_val(a, op->operands[0]),
                              mapped_operands(a, op, 1, op->noperands - 2), op->noperands - 2);
        set_val(a, op->results[0], r);
        return;
    }
    case IR_FOR:
        if (push && op_active(op))
            copy_for_push(a, op);
        else
            copy_plain(a, op);
        return;
    case IR_WHILE:
        if (push && op_active(op))
            copy_while_push(a, op);
        else
            copy_plain(a, op);
        return;
    case IR_CUSTOM: { /* its primal region, inlined; never reversed, so nothing pushed */
        ir_region *primal = op->regions[0];
        for (uint32_t i = 0; i < primal->nargs; i++)
            set_val(a, primal->args[i], ad_val(a, op->operands[i]));
        copy_region(a, primal, false);
        ir_op *y = terminator(primal);
        for (uint32_t i = 0; i < op->nresults; i++)
            set_val(a, op->results[i], ad_val(a, y->operands[i]));
        return;
    }
    default: copy_plain(a, op); return;
    }
}

/* Copies the ops of r (without its terminator) at the cursor. */
static void copy_region(ad_ctx *a, ir_region *r, bool push) {
    ir_op *term = terminator(r);
    ir_foreach_op(op, r) if (op != term) copy_op(a, op, push);
}

/* ---- Reverse sweep ---------------------------------------------------------------------- */

static void reverse_ops(ad_ctx *a, ir_region *r);

/* The element of adjoint array `grad` that access op addresses. */
static ir_value **grad_index(ad_ctx *a, const ir_op *op, uint32_t nidx) {
    return mapped_operands(a, op, 1, nidx);
}

static ir_value *grad_array(ad_ctx *a, const ir_value *array) {
    /* array operands are kernel parameters: region arguments of the kernel body */
    if (array->def || array->region != a->pk->body)
        return NULL;
    return a->grad_param[array->index];
}

static void reverse_access(ad_ctx *a, ir_op *op) {
    ir_value *array = op->operands[0];
    ir_value *ga = grad_array(a, array);
    if (!ga)
        return;
    a->b.loc = op->loc;
    switch (op->code) {
    case IR_LOAD: {
        ir_value *g = a->adj[op->results[0]->id];
        if (g)
            ir_atomic(&a->b, IR_ATOMIC_ADD, ga, grad_index(a, op, op->noperands - 1),
                      op->noperands - 1, g);
        return;
    }
    case IR_STORE: {
        uint32_t nidx = op->noperands - 2;
        ir_value **idx = grad_index(a, op, nidx);
        ir_value *v = op->operands[op->noperands - 1];
        ir_value *g = ir_load(&a->b, ga, idx, nidx);
        ir_store(&a->b, ga, idx, nidx, zero_elem(a, v->type));
        ad_accum(a, v, is_half(v->type) ? ir_cast(&a->b, ty_f32(), g) : g);
        return;
    }
    case IR_ATOMIC_ADD:
    case IR_ATOMIC_SUB: {
        uint32_t nidx = op->noperands - 2;
        ir_value *v = op->operands[op->noperands - 1];
        ir_value *g = ir_load(&a->b, ga, grad_index(a, op, nidx), nidx);
        ad_accum(a, v, op->code == IR_ATOMIC_ADD ? g : ir_unop(&a->b, IR_NEG, g));
        return;
    }
    case IR_ATOMIC_MIN:
    case IR_ATOMIC_MAX: {
        /* the thread whose value is the final element takes the element's adjoint */
        uint32_t nidx = op->noperands - 2;
        ir_value **idx = grad_index(a, op, nidx);
        ir_value *v = op->operands[op->noperands - 1];
        ir_value *fin = ir_load(&a->b, ad_val(a, array), idx, nidx);
        ir_op *w = ir_if(&a->b, ir_binop(&a->b, IR_EQ, ad_val(a, v), fin), &v->type, 1);
        ir_builder saved = a->b;
        a->b = ir_builder_at_end(a->m, w->regions[0]);
        ir_value *g =
            ir_atomic(&a->b, IR_ATOMIC_XCHG, ga, idx, nidx, ir_const_float(&a->b, v->type, 0.0));
        ir_yield(&a->b, &g, 1);
        a->b = ir_builder_at_end(a->m, w->regions[1]);
        ir_value *z = ir_const_float(&a->b, v->type, 0.0);
        ir_yield(&a->b, &z, 1);
        a->b = saved;
        ad_accum(a, v, w->results[0]);
        return;
    }
    default: kern_unreachable("reverse_access: not an access");
    }
}

/* Sets the adjoints of the free values to vals (saved by save_free_adj). */
static void set_free_adj(ad_ctx *a, kern_ptrvec *free, ir_value *const *vals) {
    for (int i = 0; i < free->len; i++)
        a->adj[((ir_value *)free->data[i])->id] = vals[i];
}

static ir_value **save_free_adj(ad_ctx *a, kern_ptrvec *free) {
    ir_value **s = ARENA_ARRAY(&a->m->mem, ir_value *, free->len + 1);
    for (int i = 0; i < free->len; i++)
        s[i] = a->adj[((ir_value *)free->data[i])->id];
    return s;
}

static void reverse_if(ad_ctx *a, ir_op *op) {
    kern_ptrvec free = {0};
    collect_free(a, op, &free);
    uint32_t nf = (uint32_t)free.len;
    ir_value **outer = save_free_adj(a, &free);
    /* the adjoints of the if's results, from the code after it */
    ir_value **gres = ARENA_ARRAY(&a->m->mem, ir_value *, op->nresults + 1);
    for (uint32_t i = 0; i < op->nresults; i++)
        gres[i] = a->adj[op->results[i]->id];
    const kern_type **types = ARENA_ARRAY(&a->m->mem, const kern_type *, nf + 1);
    for (uint32_t i = 0; i < nf; i++)
        types[i] = ad_adj_type(((ir_value *)free.data[i])->type);
    a->b.loc = op->loc;
    ir_op *w = ir_if(&a->b, ad_val(a, op->operands[0]), types, nf);
    ir_builder saved = a->b;
    for (int br = 0; br < 2; br++) {
        ir_region *from = op->regions[br];
        a->b = ir_builder_at_end(a->m, w->regions[br]);
        clear_adj(a, from);
        for (uint32_t i = 0; i < nf; i++)
            a->adj[((ir_value *)free.data[i])->id] = NULL;
        copy_region(a, from, true);
        ir_op *y = terminator(from);
        for (uint32_t i = 0; i < y->noperands; i++)
            if (gres[i])
                ad_accum(a, y->operands[i], gres[i]);
        reverse_ops(a, from);
        ir_value **ys = ARENA_ARRAY(&a->m->mem, ir_value *, nf + 1);
        for (uint32_t i = 0; i < nf; i++)
            ys[i] = adj_or_zero(a, free.data[i]);
        a->b.loc = op->loc;
        ir_yield(&a->b, ys, nf);
    }
    a->b = saved;
    set_free_adj(a, &free, outer);
    for (uint32_t i = 0; i < nf; i++)
        ad_accum(a, free.data[i], w->results[i]);
    ptrvec_free(&free);
}

/* The reverse loop's carried adjoints: the float carried values (in order), then the
 * free values. Builds the inits from the current adjoints. */
typedef struct rev_carry {
    uint32_t *fidx; /* carried value indices that are floats */
    uint32_t nfloat;
    kern_ptrvec free;
} rev_carry;

static ir_value **rev_inits(ad_ctx *a, rev_carry *rc, ir_value *const *carried_adj) {
    uint32_t n = rc->nfloat + (uint32_t)rc->free.len;
    ir_value **v = ARENA_ARRAY(&a->m->mem, ir_value *, n + 1);
    for (uint32_t i = 0; i < rc->nfloat; i++)
        v[i] = carried_adj[i];
    for (int i = 0; i < rc->free.len; i++)
        v[rc->nfloat + i] = adj_or_zero(a, rc->free.data[i]);
    return v;
}

static void rev_carry_init(ad_ctx *a, ir_op *op, ir_region *carried_in, uint32_t first,
                           rev_carry *rc) {
    rc->fidx = ARENA_ARRAY(&a->m->mem, uint32_t, carried_in->nargs + 1);
    rc->nfloat = 0;
    for (uint32_t i = first; i < carried_in->nargs; i++)
        if (ty_is_float(carried_in->args[i]->type))
            rc->fidx[rc->nfloat++] = i - first;
    memset(&rc->free, 0, sizeof rc->free);
    collect_free(a, op, &rc->free);
}

/* Inside a reverse loop body: the carried values of iteration k (0-based, counted from
 * the first) into the primal region's arguments (from `first`): popped, or recomputed. */
static void pop_carried(ad_ctx *a, ad_loop *L, ir_op *loop, ir_region *primal, uint32_t first,
                        ir_value *k) {
    a->b.loc = loop->loc;
    for (uint32_t i = 0; i < L->ncarried; i++) {
        ir_value *v = L->stacks[i] != UINT32_MAX ? ir_adpop(&a->b, L->stacks[i])
                                                 : recompute_carried(a, L, loop, i, k);
        set_val(a, primal->args[first + i], v);
    }
}

/* Yields (adjoints of the carried values in `args`, free adjoints) at the cursor. */
static void rev_yield(ad_ctx *a, rev_carry *rc, ir_region *primal, uint32_t first, kern_loc loc) {
    uint32_t n = rc->nfloat + (uint32_t)rc->free.len;
    ir_value **ys = ARENA_ARRAY(&a->m->mem, ir_value *, n + 1);
    for (uint32_t i = 0; i < rc->nfloat; i++)
        ys[i] = adj_or_zero(a, primal->args[first + rc->fidx[i]]);
    for (int i = 0; i < rc->free.len; i++)
        ys[rc->nfloat + i] = adj_or_zero(a, rc->free.data[i]);
    a->b.loc = loc;
    ir_yield(&a->b, ys, n);
}

/* After a reverse loop w: the adjoints of the primal loop's inits grow by the carried
 * results; the free values' adjoints are the accumulated results. */
static void rev_finish(ad_ctx *a, ir_op *w, rev_carry *rc, ir_value *const *inits) {
    /* the free values first: an init may be one of them (a constant used inside too) */
    for (int i = 0; i < rc->free.len; i++)
        a->adj[((ir_value *)rc->free.data[i])->id] = w->results[rc->nfloat + i];
    for (uint32_t i = 0; i < rc->nfloat; i++)
        ad_accum(a, inits[rc->fidx[i]], w->results[i]);
    ptrvec_free(&rc->free);
}

static ir_value *to_i64(ad_ctx *a, ir_value *v) {
    return v->type == ty_i64() ? v : ir_cast(&a->b, ty_i64(), v);
}

/* The body of a reverse loop over a for's iterations, at primal index j: wb carries the
 * adjoints of the float carried values, then the free adjoints, after its counter. */
static void rev_iteration(ad_ctx *a, ir_op *op, ad_loop *L, rev_carry *rc, ir_region *wb,
                          ir_value *j) {
    ir_region *body = op->regions[0];
    set_val(a, body->args[0], j);
    pop_carried(a, L, op, body, 1, ir_binop(&a->b, IR_SUB, j, ad_val(a, op->operands[0])));
    clear_adj(a, body);
    for (int i = 0; i < rc->free.len; i++)
        a->adj[((ir_value *)rc->free.data[i])->id] = wb->args[1 + rc->nfloat + i];
    copy_region(a, body, true);
    ir_op *y = terminator(body);
    uint32_t skip = op->attr & IR_FOR_EARLY_EXIT ? 1 : 0; /* the "go on" flag */
    for (uint32_t i = 0; i < rc->nfloat; i++)
        ad_accum(a, y->operands[skip + rc->fidx[i]], wb->args[1 + i]);
    reverse_ops(a, body);
    rev_yield(a, rc, body, 1, op->loc);
}

/* The carried values at a checkpoint at iteration `at` (i64): popped, or recomputed. */
static ir_value **pop_checkpoint(ad_ctx *a, ad_loop *L, ir_op *op, ir_value *at) {
    ir_value **x = ARENA_ARRAY(&a->m->mem, ir_value *, L->ncarried + 1);
    for (uint32_t i = 0; i < L->ncarried; i++)
        x[i] = L->stacks[i] != UINT32_MAX ? ir_adpop(&a->b, L->ck_stacks[i])
                                          : recompute_carried(a, L, op, i, at);
    return x;
}

/* One reverse iteration: km is the forward iteration (0-based) it reverses, wb the body
 * of the reverse loop (its counter, then what rev_inits made); ends with a yield. */
typedef void (*rev_step_fn)(ad_ctx *a, ir_op *op, ad_loop *L, rev_carry *rc, ir_region *wb,
                            ir_value *km);

/* Whether the reverse of loop op is aligned across lanes (see the header). */
static bool rev_aligned(const ad_ctx *a, const ir_op *op) {
    return a->div_ok && ir_div_loop_divergent(&a->div, op);
}

/* Whether integer v has one value in all the lanes that run a reverse loop's body
 * together: constants, the kernel's top-level values, lanemax results, counters of loops
 * with such bounds, and integer arithmetic of those. */
static bool group_uniform(const ir_value *v, int depth) {
    if (depth > 12 || !ty_is_int(v->type))
        return false;
    const ir_op *d = v->def;
    if (!d) {
        if (!v->region->parent)
            return true; /* a parameter */
        const ir_op *f = v->region->parent;
        return f->code == IR_FOR && v->index == 0 && !(f->attr & IR_FOR_EARLY_EXIT) &&
               group_uniform(f->operands[0], depth + 1) && group_uniform(f->operands[1], depth + 1);
    }
    if (!d->parent->parent || d->code == IR_CONST || d->code == IR_LANEMAX)
        return true;
    if (d->code != IR_ADD && d->code != IR_SUB && d->code != IR_MUL && d->code != IR_CAST &&
        d->code != IR_NEG)
        return false;
    for (uint32_t i = 0; i < d->noperands; i++)
        if (!group_uniform(d->operands[i], depth + 1))
            return false;
    return true;
}

/* Whether `then` (at any depth) accesses array `arr` other than by adds whose old value
 * is unused (which commute with the moved ones). */
static bool other_access(const ir_region *r, const ir_region *then, const ir_value *arr) {
    ir_foreach_op(op, r) {
        if (ir_is_access(op->code) && op->operands[0] == arr &&
            (op->code != IR_ATOMIC_ADD || ir_region_uses(then, op->results[0])))
            return true;
        for (uint32_t i = 0; i < op->nregions; i++)
            if (other_access(op->regions[i], then, arr))
                return true;
    }
    return false;
}

/* Whether v is defined outside region `then`, or by integer arithmetic at its top level
 * whose operands are (the index computations of a reverse iteration). */
static bool movable(const ir_value *v, const ir_region *then, int depth) {
    const ir_op *d = v->def;
    const ir_region *r = d ? d->parent : v->region;
    bool inside = false;
    for (const ir_region *q = r; q; q = q->parent ? q->parent->parent : NULL)
        inside |= q == then;
    if (!inside)
        return true;
    if (!d || d->parent != then || depth > 12 ||
        (d->code != IR_CONST && d->code != IR_ADD && d->code != IR_SUB && d->code != IR_MUL &&
         d->code != IR_CAST && d->code != IR_NEG))
        return false;
    for (uint32_t i = 0; i < d->noperands; i++)
        if (!movable(d->operands[i], then, depth + 1))
            return false;
    return true;
}

/* Moves the computation of v (movable) from `then` to before op `before`. */
static void move_before(ir_value *v, const ir_region *then, ir_op *before) {
    ir_op *d = v->def;
    if (!d || d->parent != then)
        return;
    for (uint32_t i = 0; i < d->noperands; i++)
        move_before(d->operands[i], then, before);
    ir_remove(d);
    ir_insert_before(before, d);
}

/* The adjoint adds of an aligned reverse iteration (`mine`: if r >= N - n) whose element
 * is the same in every lane of the group (an index of the counter only: w.grad[t]) move
 * after the if, adding the if's new result: the add's value where the lane reversed the
 * iteration, 0 where it idled. Every lane of the group then adds at one address with no
 * lane masked off, so the GPU combines the whole warp's adds into one and SIMD code
 * reduces a full vector. The element is one that the group's longest lane adds to in this
 * iteration anyway (r >= N - N), so no new element is touched. Returns the if that
 * replaces `mine` (mine itself when nothing moved). */
static ir_op *hoist_uniform_adds(ad_ctx *a, ir_op *mine, const kern_type **types, uint32_t nc) {
    ir_region *then = mine->regions[0];
    ir_op *adds[16];
    uint32_t nh = 0;
    ir_foreach_op(op, then) {
        if (op->code != IR_ATOMIC_ADD || nh == 16)
            continue;
        const ir_value *arr = op->operands[0];
        const kern_type *et = arr->type->elem;
        if ((et->kind != TY_F32 && et->kind != TY_F64) || defined_inside(arr, mine) ||
            ir_region_uses(then, op->results[0]))
            continue;
        bool ok = true;
        for (uint32_t i = 1; i + 1 < op->noperands; i++)
            ok &= movable(op->operands[i], then, 0) && group_uniform(op->operands[i], 0);
        if (ok)
            adds[nh++] = op;
    }
    uint32_t kept = 0;
    for (uint32_t i = 0; i < nh; i++) /* the array's other accesses keep their order */
        if (!other_access(then, then, adds[i]->operands[0]))
            adds[kept++] = adds[i];
    if (kept == 0)
        return mine;
    nh = kept;
    for (uint32_t i = 0; i < nh; i++) /* their indices, computed before the if */
        for (uint32_t j = 1; j + 1 < adds[i]->noperands; j++)
            move_before(adds[i]->operands[j], then, mine);
    const kern_type **t2 = ARENA_ARRAY(&a->m->mem, const kern_type *, nc + nh);
    memcpy(t2, types, nc * sizeof *t2);
    for (uint32_t i = 0; i < nh; i++)
        t2[nc + i] = adds[i]->operands[0]->type->elem;
    ir_builder bb = ir_builder_before(a->m, mine);
    bb.loc = mine->loc;
    ir_op *m2 = ir_if(&bb, mine->operands[0], t2, nc + nh);
    for (uint32_t r = 0; r < 2; r++) {
        ir_region *from = mine->regions[r], *to = m2->regions[r];
        ir_op *y = from->last;
        kern_assert(y && y->code == IR_YIELD && y->noperands == nc);
        ir_remove(y);
        while (from->first) {
            ir_op *op = from->first;
            ir_remove(op);
            ir_append(to, op);
        }
        ir_value **vals = ARENA_ARRAY(&a->m->mem, ir_value *, nc + nh);
        memcpy(vals, y->operands, nc * sizeof *vals);
        ir_builder yb = ir_builder_at_end(a->m, to);
        yb.loc = y->loc;
        for (uint32_t i = 0; i < nh; i++) {
            ir_op *add = adds[i];
            vals[nc + i] =
                r == 0 ? add->operands[add->noperands - 1] : ir_const_float(&yb, t2[nc + i], 0.0);
        }
        ir_yield(&yb, vals, nc + nh);
    }
    ir_remove(mine);
    ir_op *at = m2;
    for (uint32_t i = 0; i < nh; i++) {
        ir_op *add = adds[i];
        ir_remove(add);
        ir_op_set_operand(add, add->noperands - 1, m2->results[nc + i]);
        ir_insert_after(at, add);
        at = add;
    }
    return m2;
}

/* A reverse loop over n forward iterations (an integer >= 0), newest first, carrying the
 * adjoints `inits`: n iterations, iteration r reversing forward iteration n - 1 - r; when
 * aligned, N = lanemax(n) iterations, iteration r reversing forward iteration N - 1 - r
 * in the lanes where that is below n. */
static ir_op *rev_loop(ad_ctx *a, ir_op *op, ad_loop *L, rev_carry *rc, ir_value *n,
                       ir_value **inits, bool aligned, rev_step_fn step) {
    uint32_t nc = rc->nfloat + (uint32_t)rc->free.len;
    const kern_type *t = n->type;
    a->b.loc = op->loc;
    ir_value *total = aligned ? ir_unop(&a->b, IR_LANEMAX, n) : n;
    ir_op *w = ir_for(&a->b, ir_const_int(&a->b, t, 0), total, inits, nc, false);
    ir_region *wb = w->regions[0];
    ir_builder saved = a->b;
    a->b = ir_builder_at_end(a->m, wb);
    a->b.loc = op->loc;
    ir_value *km = ir_binop(&a->b, IR_SUB,
                            ir_binop(&a->b, IR_SUB, total, ir_const_int(&a->b, t, 1)), wb->args[0]);
    if (!aligned) {
        step(a, op, L, rc, wb, km);
        a->b = saved;
        return w;
    }
    const kern_type **types = ARENA_ARRAY(&a->m->mem, const kern_type *, nc + 1);
    for (uint32_t i = 0; i < nc; i++)
        types[i] = inits[i]->type;
    /* k < n, written r >= N - n: where N is n (one lane), LLVM folds it to true */
    ir_op *mine = ir_if(&a->b, ir_binop(&a->b, IR_GE, wb->args[0], ir_binop(&a->b, IR_SUB, total, n)),
                        types, nc);
    a->b = ir_builder_at_end(a->m, mine->regions[0]);
    a->b.loc = op->loc;
    step(a, op, L, rc, wb, km);
    a->b = ir_builder_at_end(a->m, mine->regions[1]);
    a->b.loc = op->loc;
    ir_yield(&a->b, wb->args + 1, nc);
    mine = hoist_uniform_adds(a, mine, types, nc);
    a->b = ir_builder_at_end(a->m, wb);
    a->b.loc = op->loc;
    ir_yield(&a->b, mine->results, nc);
    a->b = saved;
    return w;
}

/* A for's reverse iteration for forward iteration km: primal index lo + km. */
static void rev_for_step(ad_ctx *a, ir_op *op, ad_loop *L, rev_carry *rc, ir_region *wb,
                         ir_value *km) {
    ir_value *lo = ad_val(a, op->operands[0]);
    rev_iteration(
        a, op, L, rc, wb,
        ir_binop(&a->b, IR_ADD, lo, km->type == lo->type ? km : ir_cast(&a->b, lo->type, km)));
}

/* The number of iterations a for ran in the forward sweep: an i32 or the index type, or
 * with i64 an i64. */
static ir_value *for_count(ad_ctx *a, ir_op *op, ad_loop *L, bool i64) {
    if (op->attr & IR_FOR_EARLY_EXIT)
        return i64 ? to_i64(a, L->count) : L->count;
    ir_value *lo = ad_val(a, op->operands[0]), *hi = ad_val(a, op->operands[1]), *n;
    n = ir_binop(&a->b, IR_SUB, hi, lo);
    return ir_select(&a->b, ir_binop(&a->b, IR_GT, hi, lo), i64 ? to_i64(a, n) : n,
                     ir_const_int(&a->b, i64 ? ty_i64() : lo->type, 0));
}

/* Segment seg of a checkpointed for (K.grad.ckpt), reversed: the carried values at its
 * start come from the checkpoint stacks (or are recomputed), the segment of k iterations
 * runs forward again pushing them on the segment stacks, and then reverses as an
 * unsegmented loop does. reverse_for runs the segments newest first (rev_loop), carrying
 * what an unsegmented reverse loop carries. */
static void ckpt_for_segment(ad_ctx *a, ir_op *op, ad_loop *L, rev_carry *rc, ir_region *wb,
                             ir_value *seg) {
    ir_region *body = op->regions[0];
    ir_value *lo = ad_val(a, op->operands[0]);
    const kern_type *it = lo->type;
    ir_value *k = L->ck_k, *n = for_count(a, op, L, true);
    uint32_t nc = rc->nfloat + (uint32_t)rc->free.len;
    ir_builder here = a->b;
    ir_value *start = ir_binop(&a->b, IR_MUL, seg, k);
    ir_value *end = ir_binop(&a->b, IR_MIN, ir_binop(&a->b, IR_ADD, start, k), n);
    ir_value *slo = ir_binop(&a->b, IR_ADD, lo, ir_cast(&a->b, it, start));
    ir_value *shi = ir_binop(&a->b, IR_ADD, lo, ir_cast(&a->b, it, end));
    /* the segment forward from its checkpoint, pushing each iteration's carried values */
    ir_op *f = ir_for(&a->b, slo, shi, pop_checkpoint(a, L, op, start), L->ncarried, false);
    ir_region *fb = f->regions[0];
    for (uint32_t i = 0; i < body->nargs; i++)
        set_val(a, body->args[i], fb->args[i]);
    a->b = ir_builder_at_end(a->m, fb);
    push_carried(a, L, fb, 1, op->loc);
    copy_region(a, body, false);
    ir_op *y = terminator(body);
    uint32_t skip = op->attr & IR_FOR_EARLY_EXIT ? 1 : 0;
    ir_value **ys = ARENA_ARRAY(&a->m->mem, ir_value *, L->ncarried + 1);
    for (uint32_t i = 0; i < L->ncarried; i++)
        ys[i] = ad_val(a, y->operands[skip + i]);
    a->b.loc = y->loc;
    ir_yield(&a->b, ys, L->ncarried);
    /* then the segment in reverse: primal index slo + shi - 1 - counter */
    a->b = here;
    a->b.loc = op->loc;
    ir_op *v = ir_for(&a->b, slo, shi, wb->args + 1, nc, false);
    ir_region *vb = v->regions[0];
    a->b = ir_builder_at_end(a->m, vb);
    ir_value *last =
        ir_binop(&a->b, IR_SUB, ir_binop(&a->b, IR_ADD, slo, shi), ir_const_int(&a->b, it, 1));
    rev_iteration(a, op, L, rc, vb, ir_binop(&a->b, IR_SUB, last, vb->args[0]));
    a->b = here;
    a->b.loc = op->loc;
    ir_yield(&a->b, v->results, nc);
}

static void reverse_for(ad_ctx *a, ir_op *op) {
    ad_loop *L = a->loops[op->id];
    kern_assert(L);
    bool early = op->attr & IR_FOR_EARLY_EXIT, aligned = rev_aligned(a, op);
    rev_carry rc;
    rev_carry_init(a, op, op->regions[0], 1, &rc);
    ir_value **cadj = ARENA_ARRAY(&a->m->mem, ir_value *, rc.nfloat + 1);
    a->b.loc = op->loc;
    for (uint32_t i = 0; i < rc.nfloat; i++)
        cadj[i] = adj_or_zero(a, op->results[rc.fidx[i]]);
    ir_value **inits = rev_inits(a, &rc, cadj);
    if (L->ck_stacks) { /* segments of k iterations: ceil(n / k) */
        ir_value *n = for_count(a, op, L, true), *k = L->ck_k;
        ir_value *nseg =
            ir_binop(&a->b, IR_DIV,
                     ir_binop(&a->b, IR_ADD, n,
                              ir_binop(&a->b, IR_SUB, k, ir_const_int(&a->b, ty_i64(), 1))),
                     k);
        ir_op *w = rev_loop(a, op, L, &rc, nseg, inits, aligned, ckpt_for_segment);
        rev_finish(a, w, &rc, op->operands + 2);
        return;
    }
    if (early || aligned) {
        ir_op *w =
            rev_loop(a, op, L, &rc, for_count(a, op, L, false), inits, aligned, rev_for_step);
        rev_finish(a, w, &rc, op->operands + 2);
        return;
    }
    /* iteration k of the reverse loop runs primal index lo + hi - 1 - k */
    ir_value *lo = ad_val(a, op->operands[0]), *hi = ad_val(a, op->operands[1]);
    ir_value *last =
        ir_binop(&a->b, IR_SUB, ir_binop(&a->b, IR_ADD, lo, hi), ir_const_int(&a->b, lo->type, 1));
    uint32_t nc = rc.nfloat + (uint32_t)rc.free.len;
    ir_op *w = ir_for(&a->b, lo, hi, inits, nc, false);
    ir_region *wb = w->regions[0];
    ir_builder saved = a->b;
    a->b = ir_builder_at_end(a->m, wb);
    rev_iteration(a, op, L, &rc, wb, ir_binop(&a->b, IR_SUB, last, wb->args[0]));
    a->b = saved;
    rev_finish(a, w, &rc, op->operands + 2);
}

/* The body of a reverse loop over a while's iterations, for iteration km (counted from 0):
 * after(v_km) then before(x_km) reversed; wb carries what rev_inits made after its
 * counter. */
static void rev_while_iteration(ad_ctx *a, ir_op *op, ad_loop *L, rev_carry *rc, ir_region *wb,
                                ir_value *km) {
    ir_region *before = op->regions[0], *after = op->regions[1];
    ir_op *cond = terminator(before), *y = terminator(after);
    pop_carried(a, L, op, before, 0, km);
    clear_adj(a, before);
    clear_adj(a, after);
    for (int i = 0; i < rc->free.len; i++)
        a->adj[((ir_value *)rc->free.data[i])->id] = wb->args[1 + rc->nfloat + i];
    copy_region(a, before, true);
    for (uint32_t i = 0; i < after->nargs; i++)
        set_val(a, after->args[i], ad_val(a, cond->operands[1 + i]));
    copy_region(a, after, true);
    /* adj(x_{m+1}) flows into after's yield; the carried values that are not floats get
     * none */
    for (uint32_t i = 0; i < rc->nfloat; i++)
        ad_accum(a, y->operands[rc->fidx[i]], wb->args[1 + i]);
    reverse_ops(a, after);
    for (uint32_t i = 0; i < after->nargs; i++) {
        ir_value *g = a->adj[after->args[i]->id];
        if (g)
            ad_accum(a, cond->operands[1 + i], g);
    }
    reverse_ops(a, before);
    rev_yield(a, rc, before, 0, op->loc);
}

/* A for over [lo, hi) (i64) that runs a while's iterations forward from the carried values
 * x (the test, whose outcome is known to be true, then the body), pushing each
 * iteration's values on the segment stacks when push; returns the values after them. */
static ir_value **while_forward(ad_ctx *a, ir_op *op, ad_loop *L, ir_value **x, ir_value *lo,
                                ir_value *hi, bool push) {
    ir_region *before = op->regions[0], *after = op->regions[1];
    ir_op *cond = terminator(before), *y = terminator(after);
    ir_op *f = ir_for(&a->b, lo, hi, x, L->ncarried, false);
    ir_region *fb = f->regions[0];
    for (uint32_t i = 0; i < before->nargs; i++)
        set_val(a, before->args[i], fb->args[1 + i]);
    ir_builder saved = a->b;
    a->b = ir_builder_at_end(a->m, fb);
    if (push)
        push_carried(a, L, fb, 1, op->loc);
    copy_region(a, before, false);
    for (uint32_t i = 0; i < after->nargs; i++)
        set_val(a, after->args[i], ad_val(a, cond->operands[1 + i]));
    copy_region(a, after, false);
    ir_value **ys = ARENA_ARRAY(&a->m->mem, ir_value *, L->ncarried + 1);
    for (uint32_t i = 0; i < L->ncarried; i++)
        ys[i] = ad_val(a, y->operands[i]);
    a->b.loc = y->loc;
    ir_yield(&a->b, ys, L->ncarried);
    a->b = saved;
    return f->results;
}

/* Segment seg of a checkpointed while (K.grad.ckpt), reversed: recomputed forward from its
 * checkpoint onto the segment stacks, then reversed iteration by iteration. */
static void ckpt_while_segment(ad_ctx *a, ir_op *op, ad_loop *L, rev_carry *rc, ir_region *wb,
                               ir_value *seg) {
    ir_value *k = L->ck_k, *n = to_i64(a, L->count), *one = ir_const_int(&a->b, ty_i64(), 1);
    uint32_t nc = rc->nfloat + (uint32_t)rc->free.len;
    ir_builder here = a->b;
    ir_value *start = ir_binop(&a->b, IR_MUL, seg, k);
    ir_value *end = ir_binop(&a->b, IR_MIN, ir_binop(&a->b, IR_ADD, start, k), n);
    while_forward(a, op, L, pop_checkpoint(a, L, op, start), start, end, true);
    a->b.loc = op->loc;
    ir_op *v = ir_for(&a->b, start, end, wb->args + 1, nc, false);
    ir_region *vb = v->regions[0];
    a->b = ir_builder_at_end(a->m, vb);
    ir_value *last = ir_binop(&a->b, IR_SUB, ir_binop(&a->b, IR_ADD, start, end), one);
    rev_while_iteration(a, op, L, rc, vb, ir_binop(&a->b, IR_SUB, last, vb->args[0]));
    a->b = here;
    a->b.loc = op->loc;
    ir_yield(&a->b, v->results, nc);
}

static void reverse_while(ad_ctx *a, ir_op *op) {
    ir_region *before = op->regions[0];
    ir_op *cond = terminator(before);
    ad_loop *L = a->loops[op->id];
    kern_assert(L);
    rev_carry rc;
    rev_carry_init(a, op, before, 0, &rc);
    a->b.loc = op->loc;
    bool ck = L->ck_stacks != NULL;
    ir_value *n = NULL, *k = L->ck_k, *one = NULL;
    if (ck) {
        /* the final test's values: from the last checkpoint c = (count / k) k, forward
         * count - c iterations; the checkpoint goes back for its segment when c < count */
        n = to_i64(a, L->count);
        one = ir_const_int(&a->b, ty_i64(), 1);
        ir_value *c = ir_binop(&a->b, IR_MUL, ir_binop(&a->b, IR_DIV, n, k), k);
        ir_value **xc = pop_checkpoint(a, L, op, c);
        ir_op *back = ir_if(&a->b, ir_binop(&a->b, IR_LT, c, n), NULL, 0);
        ir_builder saved = a->b;
        a->b = ir_builder_at_end(a->m, back->regions[0]);
        for (uint32_t i = 0; i < L->ncarried; i++)
            if (L->stacks[i] != UINT32_MAX)
                ir_adpush(&a->b, L->ck_stacks[i], xc[i]);
        ir_yield(&a->b, NULL, 0);
        a->b = ir_builder_at_end(a->m, back->regions[1]);
        ir_yield(&a->b, NULL, 0);
        a->b = saved;
        ir_value **xn = while_forward(a, op, L, xc, c, n, false);
        for (uint32_t i = 0; i < L->ncarried; i++)
            set_val(a, before->args[i], xn[i]);
    } else {
        /* the last test: before(x_k) gave the results (k = count) */
        pop_carried(a, L, op, before, 0, L->count);
    }
    clear_adj(a, before);
    copy_region(a, before, true);
    for (uint32_t i = 0; i < op->nresults; i++) {
        ir_value *g = a->adj[op->results[i]->id];
        if (g)
            ad_accum(a, cond->operands[1 + i], g);
    }
    reverse_ops(a, before);
    ir_value **cadj = ARENA_ARRAY(&a->m->mem, ir_value *, rc.nfloat + 1);
    for (uint32_t i = 0; i < rc.nfloat; i++)
        cadj[i] = adj_or_zero(a, before->args[rc.fidx[i]]);
    /* then the iterations, newest first: after(v_m) then before(x_m) reversed */
    ir_value **inits = rev_inits(a, &rc, cadj);
    a->b.loc = op->loc;
    bool aligned = rev_aligned(a, op);
    ir_op *w;
    if (ck) { /* segments of k iterations, newest first, each recomputed from its checkpoint */
        ir_value *nseg =
            ir_binop(&a->b, IR_DIV, ir_binop(&a->b, IR_ADD, n, ir_binop(&a->b, IR_SUB, k, one)), k);
        w = rev_loop(a, op, L, &rc, nseg, inits, aligned, ckpt_while_segment);
    } else { /* reverse iteration r recomputes forward iteration count - 1 - r */
        w = rev_loop(a, op, L, &rc, L->count, inits, aligned, rev_while_iteration);
    }
    rev_finish(a, w, &rc, op->operands);
}

/* A custom op: its adjoint region, inlined with the forward sweep's operands and results
 * and the results' adjoints, gives the operands' adjoints. */
static void reverse_custom(ad_ctx *a, ir_op *op) {
    ir_region *adj = op->regions[1];
    uint32_t n = op->noperands, m = op->nresults;
    a->b.loc = op->loc;
    for (uint32_t i = 0; i < n; i++)
        set_val(a, adj->args[i], ad_val(a, op->operands[i]));
    for (uint32_t i = 0; i < m; i++) {
        ir_value *r = op->results[i];
        set_val(a, adj->args[n + i], ad_val(a, r));
        ir_value *g = ty_is_float(r->type) ? a->adj[r->id] : NULL;
        if (!g) {
            const kern_type *t = ad_adj_type(r->type);
            g = ty_is_float(t) ? ir_const_float(&a->b, t, 0.0) : ir_const_int(&a->b, t, 0);
        }
        set_val(a, adj->args[n + m + i], g);
    }
    copy_region(a, adj, false);
    ir_op *y = terminator(adj);
    for (uint32_t i = 0; i < n; i++)
        ad_accum(a, op->operands[i], ad_val(a, y->operands[i]));
}

/* Reverses the ops of r, last first (not its terminator: the caller has seeded the
 * adjoints of the values it yields). */
static void reverse_ops(ad_ctx *a, ir_region *r) {
    ir_op *term = terminator(r);
    for (ir_op *op = term ? term->prev : r->last; op; op = op->prev) {
        switch (op->code) {
        case IR_LOAD:
        case IR_STORE:
        case IR_ATOMIC_ADD:
        case IR_ATOMIC_SUB:
        case IR_ATOMIC_MIN:
        case IR_ATOMIC_MAX: reverse_access(a, op); break;
        case IR_IF:
            if (op_active(op))
                reverse_if(a, op);
            break;
        case IR_FOR:
            if (op_active(op))
                reverse_for(a, op);
            break;
        case IR_WHILE:
            if (op_active(op))
                reverse_while(a, op);
            break;
        case IR_CUSTOM:
            if (op_active(op))
                reverse_custom(a, op);
            break;
        default: {
            if (op->nresults != 1)
                break;
            ir_value *g = a->adj[op->results[0]->id];
            if (g) {
                a->b.loc = op->loc;
                ad_rule_pure(a, op, g);
            }
            break;
        }
        }
    }
}

/* ---- Tasks ---------------------------------------------------------------------------- */

/* The end of a thread's reverse sweep: the adjoints of the top-level values it used flow
 * back through the top-level ops to the scalar parameters, whose adjoint arrays get the
 * sum. */
static void finish_task(ad_ctx *a, bool parallel) {
    ir_region *top = a->pk->body;
    for (ir_op *op = top->last; op; op = op->prev) {
        if (op->code == IR_PARALLEL || op->code == IR_SERIAL || op->nresults != 1)
            continue;
        ir_value *g = a->adj[op->results[0]->id];
        if (g) {
            a->b.loc = op->loc;
            ad_rule_pure(a, op, g);
        }
    }
    for (uint32_t p = 0; p < a->pk->nparams; p++) {
        ir_value *v = top->args[p];
        ir_value *g = a->adj[v->id];
        ir_value *ga = a->grad_param[p];
        if (!g || !ga || ty_is_array(v->type))
            continue;
        a->b.loc = a->pk->loc;
        ir_value *zero = ir_const_int(&a->b, ty_i32(), 0);
        if (parallel) {
            ir_atomic(&a->b, IR_ATOMIC_ADD, ga, &zero, 1, g);
        } else {
            ir_value *old = ir_load(&a->b, ga, &zero, 1);
            ir_store(&a->b, ga, &zero, 1, ir_binop(&a->b, IR_ADD, old, g));
        }
    }
}

static void grad_task(ad_ctx *a, ir_op *task) {
    memset(a->adj, 0, a->nvals * sizeof *a->adj);
    ir_region *body = task->regions[0];
    a->b = ir_builder_at_end(a->m, a->gk->body);
    a->b.loc = task->loc;
    ir_op *t;
    if (task->code == IR_PARALLEL) {
        t = ir_parallel(&a->b, mapped_operands(a, task, 0, task->noperands), task->noperands / 2);
    } else {
        t = ir_serial(&a->b);
    }
    t->loc = task->loc;
    a->div_ok = task->code == IR_PARALLEL; /* which loops get aligned reverse loops */
    if (a->div_ok)
        ir_divergence_task(&a->div, a->pk, task);
    for (uint32_t i = 0; i < body->nargs; i++)
        set_val(a, body->args[i], t->regions[0]->args[i]);
    a->b = ir_builder_at_end(a->m, t->regions[0]);
    copy_region(a, body, true);
    reverse_ops(a, body);
    finish_task(a, task->code == IR_PARALLEL);
}

ir_param *ad_grad_params(const ir_kernel *k, uint32_t *nparams) {
    ir_module *m = k->module;
    uint32_t ngrad = 0;
    for (uint32_t i = 0; i < k->nparams; i++) {
        const kern_type *t = k->params[i].type;
        const kern_type *e = ty_is_array(t) ? t->elem : t;
        ngrad += ty_is_float(e) && !k->params[i].nograd;
    }
    ir_param *ps = ARENA_ARRAY(&m->mem, ir_param, k->nparams + ngrad + 1);
    uint32_t np = 0;
    for (uint32_t i = 0; i < k->nparams; i++)
        ps[np++] = k->params[i];
    for (uint32_t i = 0; i < k->nparams; i++) {
        const kern_type *t = k->params[i].type;
        const kern_type *e = ty_is_array(t) ? t->elem : t;
        if (!ty_is_float(e) || k->params[i].nograd)
            continue;
        ps[np++] = (ir_param){.name = arena_printf(&m->mem, "%s.grad", k->params[i].name),
                              .type = ty_is_array(t) ? t : ty_array(t, 1),
                              .nograd = false,
                              .loc = k->params[i].loc,
                              .view = k->params[i].view,
                              .ntail = k->params[i].ntail,
                              .tail = {k->params[i].tail[0], k->params[i].tail[1]}};
    }
    *nparams = np;
    return ps;
}

/* The loops K.grad.ckpt checkpoints: the active fors of r that no loop encloses (those
 * inside ifs included), in order. */
static void find_ckpt_loops(ir_region *r, kern_ptrvec *out) {
    ir_foreach_op(op, r) {
        if ((op->code == IR_FOR || op->code == IR_WHILE) && op_active(op))
            ptrvec_push(out, op);
        else if (op->code == IR_IF || op->code == IR_PARALLEL || op->code == IR_SERIAL)
            for (uint32_t i = 0; i < op->nregions; i++)
                find_ckpt_loops(op->regions[i], out);
    }
}

static ir_kernel *build_grad(ir_kernel *k, uint32_t ad_stack_size, bool ckpt) {
    ir_module *m = k->module;
    kern_assert(!m->lowered); /* the rules see plain ops: ir_lower_semantics runs after */
    kern_ptrvec ckl = {0};
    if (ckpt) {
        find_ckpt_loops(k->body, &ckl);
        if (ckl.len == 0)
            return NULL;
    }
    uint32_t np;
    ir_param *ps = ad_grad_params(k, &np);
    if (ckpt) { /* K.grad's parameters, then ckpt.0, ckpt.1, ...: each loop's k */
        ir_param *more = ARENA_ARRAY(&m->mem, ir_param, np + (uint32_t)ckl.len + 1);
        memcpy(more, ps, np * sizeof *ps);
        for (int i = 0; i < ckl.len; i++)
            more[np + (uint32_t)i] = (ir_param){.name = arena_printf(&m->mem, "ckpt.k%d", i),
                                                .type = ty_i64(),
                                                .nograd = true,
                                                .loc = ((ir_op *)ckl.data[i])->loc};
        ps = more;
        np += (uint32_t)ckl.len;
    }
    ad_ctx A = {.m = m, .pk = k, .ad_stack_size = ad_stack_size}, *a = &A;
    a->gk = ir_kernel_new(m, arena_printf(&m->mem, ckpt ? "%s.grad.ckpt" : "%s.grad", k->name),
                          k->loc, ps, np);
    ad_number_region(a, k->body);
    a->map = calloc(a->nvals + 1, sizeof *a->map);
    a->adj = calloc(a->nvals + 1, sizeof *a->adj);
    a->mark = calloc(a->nvals + 1, sizeof *a->mark);
    a->loops = calloc(a->nops + 1, sizeof *a->loops);
    a->grad_param = calloc(k->nparams + 1, sizeof *a->grad_param);
    if (ckpt) {
        a->ck_k = calloc(a->nops + 1, sizeof *a->ck_k);
        a->ck_param = calloc(a->nops + 1, sizeof *a->ck_param);
        if (!a->ck_k || !a->ck_param)
            kern_oom(a->nops * sizeof(void *));
    }
    if (!a->map || !a->adj || !a->mark || !a->loops || !a->grad_param)
        kern_oom(a->nvals * sizeof(void *));
    for (uint32_t i = 0, g = k->nparams; i < k->nparams; i++) {
        set_val(a, k->body->args[i], a->gk->body->args[i]);
        const kern_type *t = k->params[i].type;
        const kern_type *e = ty_is_array(t) ? t->elem : t;
        if (ty_is_float(e) && !k->params[i].nograd)
            a->grad_param[i] = a->gk->body->args[g++];
    }
    a->b = ir_builder_at_end(m, a->gk->body);
    for (int i = 0; i < ckl.len; i++) { /* k = max(ckpt.i, 1) */
        ir_op *loop = ckl.data[i];
        uint32_t p = np - (uint32_t)ckl.len + (uint32_t)i;
        ir_value *one = ir_const_int(&a->b, ty_i64(), 1), *kp = a->gk->body->args[p];
        a->ck_k[loop->id] = ir_select(&a->b, ir_binop(&a->b, IR_LT, kp, one), one, kp);
        a->ck_param[loop->id] = p;
    }
    /* the uniform values, then the tasks in reverse order */
    ir_foreach_op(op, k->body) if (op->code != IR_PARALLEL && op->code != IR_SERIAL)
        copy_plain(a, op);
    for (ir_op *op = k->body->last; op; op = op->prev)
        if (op->code == IR_PARALLEL || op->code == IR_SERIAL)
            grad_task(a, op);
    free(a->map);
    free(a->adj);
    free(a->mark);
    free(a->loops);
    free(a->grad_param);
    free(a->ck_k);
    free(a->ck_param);
    ir_divergence_free(&a->div);
    ptrvec_free(&ckl);
    return a->gk;
}

ir_kernel *ad_grad_kernel(ir_kernel *k, uint32_t ad_stack_size) {
    return build_grad(k, ad_stack_size, false);
}

ir_kernel *ad_grad_ckpt_kernel(ir_kernel *k, uint32_t ad_stack_size) {
    return build_grad(k, ad_stack_size, true);
}
