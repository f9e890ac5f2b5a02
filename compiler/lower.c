/* lower.c - lowering of a checked AST to structured SSA IR: kernels, tasks, statements.
 *
 * Mutable locals disappear: each symbol's current SSA value lives in its lower_value slot.
 * A statement with nested control flow carries the outer variables it assigns
 * ("carried" = assigned in it minus declared in it) explicitly: IF results, FOR iter
 * values and WHILE loop values, and the slots are rebound to the op's results after it.
 *
 * break, continue and return become synthetic bool variables (flags) that flow through
 * the same machinery:
 *   - `break` sets the loop's brk flag; a FOR with a break is an early-exit FOR whose body
 *     yields "go on" = !brk; a WHILE carries brk and its condition region yields false once
 *     it is set (without evaluating the user's condition);
 *   - `continue` sets the iteration-local cont flag;
 *   - `return v` in an inlined func sets retval = v and the func's ret flag, which also
 *     ends every loop of the func that contains it.
 * After a statement that may set a flag, the rest of its block runs under
 * `if !(flags) { rest }`; statements after an unconditional escape are dropped.
 *
 * Kernels: top-level `for` loops become PARALLEL tasks (n-D for multi-range), maximal
 * runs of other statements SERIAL tasks; uniform top-level lets are computed at the top
 * level of the kernel body, where every task sees them. */
#include "lower.h"

#include <stdlib.h>
#include <string.h>

#include "lower_impl.h"

/* ---- Symbol sets ------------------------------------------------------------------ */

static void syms_add(lw_syms *s, fe_sym *x) {
    for (int i = 0; i < s->len; i++)
        if (s->data[i] == x)
            return;
    if (s->len == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 8;
        s->data = kern_xrealloc(s->data, sizeof(fe_sym *) * (size_t)s->cap);
    }
    s->data[s->len++] = x;
}

static bool syms_has(const lw_syms *s, const fe_sym *x) {
    for (int i = 0; i < s->len; i++)
        if (s->data[i] == x)
            return true;
    return false;
}

static void syms_free(lw_syms *s) { free(s->data); }

/* Adds x, or the leaf symbols of a variable of a version-1 type. */
static void syms_add_value(lw *L, lw_syms *s, fe_sym *x) {
    if (!x->type || !ty_is_aggregate(x->type)) {
        syms_add(s, x);
        return;
    }
    fe_sym **leaves = lw_leaf_syms(L, x);
    for (int i = 0; i < ty_leaves(x->type); i++)
        syms_add(s, leaves[i]);
}

/* ---- Analysis: what a statement assigns and may escape through ---------------------- */

typedef struct lw_scan {
    lw *L;
    lw_syms assigned, declared;
    const lw_loop *target; /* loop that a break/continue outside nested loops targets */
    const lw_func *func;
    bool brk, cont, ret; /* may set the target's brk / cont, or the func's ret */
} lw_scan;

static void scan_stmt(lw_scan *s, const fe_stmt *st, bool nested_loop);

static void scan_list(lw_scan *s, fe_stmt *const *list, int n, bool nested_loop) {
    for (int i = 0; i < n; i++)
        scan_stmt(s, list[i], nested_loop);
}

static void scan_stmt(lw_scan *s, const fe_stmt *st, bool nested_loop) {
    if (!st)
        return;
    switch (st->kind) {
    case ST_LET:
    case ST_VAR: syms_add_value(s->L, &s->declared, st->decl.sym); break;
    case ST_ASSIGN: {
        fe_sym *root = lw_assign_root(st);
        if (root)
            syms_add_value(s->L, &s->assigned, root);
        break;
    }
    case ST_IF:
        scan_stmt(s, st->if_.then, nested_loop);
        scan_stmt(s, st->if_.els, nested_loop);
        break;
    case ST_FOR:
        for (int i = 0; i < st->for_.nranges; i++)
            syms_add(&s->declared, st->for_.ranges[i].sym);
        scan_stmt(s, st->for_.body, true);
        break;
    case ST_WHILE: scan_stmt(s, st->while_.body, true); break;
    case ST_BREAK:
        if (!nested_loop && s->target && s->target->brk) {
            s->brk = true;
            syms_add(&s->assigned, s->target->brk);
        }
        break;
    case ST_CONTINUE:
        if (!nested_loop && s->target && s->target->cont) {
            s->cont = true;
            syms_add(&s->assigned, s->target->cont);
        }
        break;
    case ST_RETURN:
        if (s->func) {
            s->ret = true;
            syms_add(&s->assigned, s->func->ret);
            if (s->func->retval)
                syms_add_value(s->L, &s->assigned, s->func->retval);
        }
        break;
    case ST_EXPR: break;
    case ST_BLOCK: scan_list(s, st->block.stmts, st->block.nstmts, nested_loop); break;
    }
}

/* Scans statements in the current loop/func context; *carried gets the outer variables
 * they assign (assigned minus declared). */
static void scan(lw *L, fe_stmt *const *list, int n, lw_scan *s, lw_syms *carried) {
    memset(s, 0, sizeof *s);
    s->L = L;
    s->target = L->loop;
    s->func = L->func;
    scan_list(s, list, n, false);
    if (carried) {
        memset(carried, 0, sizeof *carried);
        for (int i = 0; i < s->assigned.len; i++)
            if (!syms_has(&s->declared, s->assigned.data[i]))
                syms_add(carried, s->assigned.data[i]);
    }
}

static void scan_free(lw_scan *s) {
    syms_free(&s->assigned);
    syms_free(&s->declared);
}

/* ---- Helpers ---------------------------------------------------------------------- */

static fe_sym *new_flag(lw *L, const char *name) {
    fe_sym *f = ARENA_NEW(&L->ctx->mem, fe_sym);
    f->kind = SYM_LOCAL;
    f->name = name;
    f->type = ty_bool();
    f->is_mutable = true;
    return f;
}

static bool is_const_true(const ir_value *v) {
    return v && v->def && v->def->code == IR_CONST && v->type == ty_bool() && v->def->imm.i;
}

static bool is_const_false(const ir_value *v) {
    return v && v->def && v->def->code == IR_CONST && v->type == ty_bool() && !v->def->imm.i;
}

/* The current values of the carried variables. */
static ir_value **current_values(const lw_syms *c) {
    ir_value **v = kern_xmalloc(sizeof(ir_value *) * (size_t)(c->len + 1));
    for (int i = 0; i < c->len; i++) {
        v[i] = lw_get(c->data[i]);
        kern_assert(v[i] != NULL);
    }
    return v;
}

static void restore(const lw_syms *c, ir_value *const *v) {
    for (int i = 0; i < c->len; i++)
        lw_set(c->data[i], v[i]);
}

static void yield_carried(lw *L, const lw_syms *c, ir_value *lead, kern_loc loc) {
    ir_value **v = kern_xmalloc(sizeof(ir_value *) * (size_t)(c->len + 1));
    int n = 0;
    if (lead)
        v[n++] = lead;
    for (int i = 0; i < c->len; i++)
        v[n++] = lw_get(c->data[i]);
    L->b.loc = loc;
    ir_yield(&L->b, v, (uint32_t)n);
    free(v);
}

/* The OR of the flags that a scanned statement may have set; NULL when none. */
static ir_value *escape_value(lw *L, const lw_scan *s, kern_loc loc) {
    ir_value *flags[3];
    int n = 0;
    if (s->brk && L->loop && L->loop->brk)
        flags[n++] = lw_get(L->loop->brk);
    if (s->cont && L->loop && L->loop->cont)
        flags[n++] = lw_get(L->loop->cont);
    if (s->ret && L->func)
        flags[n++] = lw_get(L->func->ret);
    if (n == 0)
        return NULL;
    L->b.loc = loc;
    ir_value *v = flags[0];
    for (int i = 1; i < n; i++) {
        if (is_const_true(v) || is_const_false(flags[i]))
            continue;
        v = is_const_false(v) ? flags[i] : ir_binop(&L->b, IR_OR, v, flags[i]);
    }
    return v;
}

/* ---- Statements ------------------------------------------------------------------- */

static void lower_stmt(lw *L, const fe_stmt *st);

/* Lowers a statement list; after a statement that may escape, the rest runs under
 * if !(escape flags). */
static void lower_list(lw *L, fe_stmt *const *list, int n) {
    for (int i = 0; i < n; i++) {
        const fe_stmt *st = list[i];
        lower_stmt(L, st);
        if (i + 1 == n)
            return;
        lw_scan s;
        scan(L, &list[i], 1, &s, NULL);
        ir_value *esc = escape_value(L, &s, st->loc);
        scan_free(&s);
        if (!esc || is_const_false(esc))
            continue;
        if (is_const_true(esc))
            return; /* the rest is unreachable */
        /* if !esc { rest } */
        lw_scan rs;
        lw_syms carried;
        scan(L, &list[i + 1], n - i - 1, &rs, &carried);
        scan_free(&rs);
        kern_loc loc = list[i + 1]->loc;
        L->b.loc = loc;
        ir_value *go = ir_unop(&L->b, IR_NOT, esc);
        const kern_type **types = kern_xmalloc(sizeof(kern_type *) * (size_t)(carried.len + 1));
        for (int k = 0; k < carried.len; k++)
            types[k] = carried.data[k]->type;
        ir_value **before = current_values(&carried);
        ir_op *op = ir_if(&L->b, go, types, (uint32_t)carried.len);
        ir_builder saved = L->b;
        L->b = ir_builder_at_end(L->m, op->regions[0]);
        lower_list(L, &list[i + 1], n - i - 1);
        yield_carried(L, &carried, NULL, loc);
        restore(&carried, before);
        L->b = ir_builder_at_end(L->m, op->regions[1]);
        yield_carried(L, &carried, NULL, loc);
        L->b = saved;
        for (int k = 0; k < carried.len; k++)
            lw_set(carried.data[k], op->results[k]);
        free(before);
        free(types);
        syms_free(&carried);
        return;
    }
}

static void lower_block(lw *L, const fe_stmt *st) {
    if (st->kind == ST_BLOCK)
        lower_list(L, st->block.stmts, st->block.nstmts);
    else
        lower_list(L, (fe_stmt *const *)&st, 1);
}

static ir_opcode assign_code(fe_assign_op op) {
    switch (op) {
    case AS_ADD: return IR_ADD;
    case AS_SUB: return IR_SUB;
    case AS_MUL: return IR_MUL;
    case AS_DIV: return IR_DIV;
    case AS_SET: break;
    }
    kern_unreachable("assignment operator");
}

static void lower_assign(lw *L, const fe_stmt *st) {
    const fe_expr *t = st->assign.target;
    fe_assign_op op = st->assign.op;
    if (lw_assign_is_agg(st)) {
        lw_assign_agg(L, st);
        return;
    }
    if (t->kind == EX_NAME) {
        ir_value *v = lw_expr(L, st->assign.value);
        if (op != AS_SET) {
            L->b.loc = st->assign.op_loc;
            v = ir_binop(&L->b, assign_code(op), lw_get(t->name.sym), v);
        }
        lw_bind(L, t->name.sym, v);
        return;
    }
    ir_value *idx[KERN_MAX_RANK];
    for (int i = 0; i < t->index.nidx; i++)
        idx[i] = lw_expr(L, t->index.idx[i]);
    ir_value *arr = lw_get(t->index.sym);
    uint32_t n = (uint32_t)t->index.nidx;
    ir_value *v = lw_expr(L, st->assign.value);
    L->b.loc = st->assign.op_loc;
    switch (op) {
    case AS_SET: ir_store(&L->b, arr, idx, n, v); break;
    /* On array elements += and -= are atomic (docs/reference.md section 5). */
    case AS_ADD: ir_atomic(&L->b, IR_ATOMIC_ADD, arr, idx, n, v); break;
    case AS_SUB: ir_atomic(&L->b, IR_ATOMIC_SUB, arr, idx, n, v); break;
    case AS_MUL:
    case AS_DIV: {
        const kern_type *et = arr->type->elem; /* u8 or f16: computed in i32 or f32 */
        ir_value *old = ir_load(&L->b, arr, idx, n);
        if (ty_is_narrow(et))
            old = ir_cast(&L->b, ty_arith(et), old);
        ir_value *nv = ir_binop(&L->b, assign_code(op), old, v);
        ir_store(&L->b, arr, idx, n, nv->type == et ? nv : ir_cast(&L->b, et, nv));
        break;
    }
    }
}

static const kern_type **carried_types(const lw_syms *c, const kern_type *lead) {
    const kern_type **t = kern_xmalloc(sizeof(kern_type *) * (size_t)(c->len + 2));
    int n = 0;
    if (lead)
        t[n++] = lead;
    for (int i = 0; i < c->len; i++)
        t[n++] = c->data[i]->type;
    return t;
}

static void lower_if(lw *L, const fe_stmt *st) {
    ir_value *c = lw_expr(L, st->if_.cond);
    lw_scan s;
    lw_syms carried;
    fe_stmt *parts[2] = {st->if_.then, st->if_.els};
    scan(L, parts, st->if_.els ? 2 : 1, &s, &carried);
    scan_free(&s);
    const kern_type **types = carried_types(&carried, NULL);
    ir_value **before = current_values(&carried);
    L->b.loc = st->loc;
    ir_op *op = ir_if(&L->b, c, types, (uint32_t)carried.len);
    ir_builder saved = L->b;
    for (int r = 0; r < 2; r++) {
        L->b = ir_builder_at_end(L->m, op->regions[r]);
        restore(&carried, before);
        if (parts[r])
            lower_block(L, parts[r]);
        yield_carried(L, &carried, NULL, st->loc);
    }
    L->b = saved;
    for (int k = 0; k < carried.len; k++)
        lw_set(carried.data[k], op->results[k]);
    free(before);
    free(types);
    syms_free(&carried);
}

/* Creates the flags of a loop whose body is `body`. */
static void loop_flags(lw *L, lw_loop *lp, const fe_stmt *body) {
    lw_loop probe = {.outer = L->loop};
    /* Scan with placeholder flags to learn whether the body breaks or continues. */
    fe_sym tmp_b = {0}, tmp_c = {0};
    probe.brk = &tmp_b;
    probe.cont = &tmp_c;
    lw_loop *saved = L->loop;
    L->loop = &probe;
    lw_scan s;
    scan(L, (fe_stmt *const *)&body, 1, &s, NULL);
    L->loop = saved;
    memset(lp, 0, sizeof *lp);
    lp->outer = L->loop;
    if (s.brk)
        lp->brk = new_flag(L, "break");
    if (s.cont)
        lp->cont = new_flag(L, "continue");
    scan_free(&s);
}

/* Lowers ranges [k, n) of a serial for as nested FOR ops; the innermost gets the body. */
static void lower_serial_for(lw *L, const fe_stmt *st, int k) {
    const fe_range *r = &st->for_.ranges[k];
    bool innermost = k + 1 == st->for_.nranges;
    ir_value *lo = lw_expr(L, r->lo), *hi = lw_expr(L, r->hi);

    lw_loop lp = {0};
    if (innermost)
        loop_flags(L, &lp, st->for_.body);
    /* What the loop carries: outer variables assigned in it, seen from inside the loop. */
    lw_loop *outer_loop = L->loop;
    if (innermost) {
        lp.outer = outer_loop;
        L->loop = &lp;
    } else {
        L->loop = NULL; /* breaks of the body target an inner range's loop */
    }
    lw_scan s;
    lw_syms carried;
    const fe_stmt *body = st->for_.body;
    scan(L, (fe_stmt *const *)&body, 1, &s, &carried);
    scan_free(&s);
    /* this loop's own flags are per iteration, never carried */
    lw_syms c2 = {0};
    for (int i = 0; i < carried.len; i++)
        if (carried.data[i] != lp.brk && carried.data[i] != lp.cont)
            syms_add(&c2, carried.data[i]);
    syms_free(&carried);
    carried = c2;
    L->loop = outer_loop;

    bool returns = L->func && syms_has(&carried, L->func->ret);
    bool early = innermost && (lp.brk || returns);
    if (!innermost && returns)
        early = true;
    ir_value **inits = current_values(&carried);
    L->b.loc = st->loc;
    ir_op *op = ir_for(&L->b, lo, hi, inits, (uint32_t)carried.len, early);
    free(inits);
    ir_region *bodyr = op->regions[0];
    ir_builder saved = L->b;
    L->b = ir_builder_at_end(L->m, bodyr);
    lw_set(r->sym, bodyr->args[0]);
    for (int i = 0; i < carried.len; i++)
        lw_set(carried.data[i], bodyr->args[i + 1]);
    if (innermost) {
        L->loop = &lp;
        L->b.loc = st->loc;
        if (lp.brk)
            lw_set(lp.brk, ir_const_bool(&L->b, false));
        if (lp.cont)
            lw_set(lp.cont, ir_const_bool(&L->b, false));
        lower_block(L, body);
    } else {
        lower_serial_for(L, st, k + 1);
    }
    ir_value *go = NULL;
    if (early) {
        L->b.loc = st->loc;
        lw_scan es = {0};
        es.brk = lp.brk != NULL;
        es.ret = returns;
        lw_loop *keep = L->loop;
        L->loop = innermost ? &lp : NULL;
        ir_value *esc = escape_value(L, &es, st->loc);
        L->loop = keep;
        go = esc ? ir_unop(&L->b, IR_NOT, esc) : ir_const_bool(&L->b, true);
    }
    yield_carried(L, &carried, go, st->loc);
    L->b = saved;
    L->loop = outer_loop;
    for (int i = 0; i < carried.len; i++)
        lw_set(carried.data[i], op->results[i]);
    syms_free(&carried);
}

static void lower_while(lw *L, const fe_stmt *st) {
    lw_loop lp;
    loop_flags(L, &lp, st->while_.body);
    lw_loop *outer_loop = L->loop;
    L->loop = &lp;
    lw_scan s;
    lw_syms carried;
    scan(L, (fe_stmt *const *)&st->while_.body, 1, &s, &carried);
    scan_free(&s);
    /* cont is per iteration; brk is carried so the condition region can see it */
    lw_syms c2 = {0};
    for (int i = 0; i < carried.len; i++)
        if (carried.data[i] != lp.cont)
            syms_add(&c2, carried.data[i]);
    syms_free(&carried);
    carried = c2;
    L->b.loc = st->loc;
    if (lp.brk)
        lw_set(lp.brk, ir_const_bool(&L->b, false));
    bool returns = L->func && syms_has(&carried, L->func->ret);
    ir_value **inits = current_values(&carried);
    ir_op *op = ir_while(&L->b, inits, (uint32_t)carried.len);
    free(inits);
    ir_builder saved = L->b;

    /* before: if a flag ended the loop, leave it without evaluating the condition */
    ir_region *before = op->regions[0];
    L->b = ir_builder_at_end(L->m, before);
    for (int i = 0; i < carried.len; i++)
        lw_set(carried.data[i], before->args[i]);
    lw_scan es = {0};
    es.brk = lp.brk != NULL;
    es.ret = returns;
    ir_value *esc = escape_value(L, &es, st->loc);
    ir_value *c;
    if (esc) {
        L->b.loc = st->loc;
        const kern_type *bt = ty_bool();
        ir_op *g = ir_if(&L->b, esc, &bt, 1);
        ir_builder keep = L->b;
        L->b = ir_builder_at_end(L->m, g->regions[0]);
        L->b.loc = st->loc;
        ir_value *f = ir_const_bool(&L->b, false);
        ir_yield(&L->b, &f, 1);
        L->b = ir_builder_at_end(L->m, g->regions[1]);
        ir_value *uc = lw_expr(L, st->while_.cond);
        L->b.loc = st->loc;
        ir_yield(&L->b, &uc, 1);
        L->b = keep;
        c = g->results[0];
    } else {
        c = lw_expr(L, st->while_.cond);
    }
    ir_value **vals = current_values(&carried);
    L->b.loc = st->loc;
    ir_condition(&L->b, c, vals, (uint32_t)carried.len);
    free(vals);

    /* after: the body */
    ir_region *after = op->regions[1];
    L->b = ir_builder_at_end(L->m, after);
    for (int i = 0; i < carried.len; i++)
        lw_set(carried.data[i], after->args[i]);
    if (lp.cont) {
        L->b.loc = st->loc;
        lw_set(lp.cont, ir_const_bool(&L->b, false));
    }
    lower_block(L, st->while_.body);
    yield_carried(L, &carried, NULL, st->loc);
    L->b = saved;
    L->loop = outer_loop;
    for (int i = 0; i < carried.len; i++)
        lw_set(carried.data[i], op->results[i]);
    syms_free(&carried);
}

/* ---- Unrolling short loops over parts of values ------------------------------------ */

enum { UNROLL_MAX_TRIPS = 8 };

/* Whether e indexes a vector, matrix or local array with a non-constant index. */
static bool dynamic_value_index(const fe_expr *e) {
    if (!e)
        return false;
    const fe_expr *const *idx = NULL;
    int n = 0;
    bool value = false;
    if (e->kind == EX_INDEX && e->index.sym && e->index.sym->type &&
        !ty_is_array(e->index.sym->type)) {
        idx = (const fe_expr *const *)e->index.idx;
        n = e->index.nidx;
        value = true;
    } else if (e->kind == EX_ELEM) {
        idx = (const fe_expr *const *)e->elem.idx;
        n = e->elem.nidx;
        value = !fe_expr_is_memory_part(e);
    }
    for (int i = 0; value && i < n; i++)
        if (!idx[i]->is_const)
            return true;
    const fe_expr *k[64];
    int nk = fe_expr_kids(e, k, 64);
    for (int i = 0; i < nk && i < 64; i++)
        if (dynamic_value_index(k[i]))
            return true;
    return false;
}

/* Whether the statement indexes a value dynamically, and has no break, continue or return
 * (which an unrolled copy could not express). */
static bool unrollable_body(const fe_stmt *st, bool *indexes) {
    if (!st)
        return true;
    switch (st->kind) {
    case ST_BREAK:
    case ST_CONTINUE:
    case ST_RETURN: return false;
    case ST_LET:
    case ST_VAR: *indexes |= dynamic_value_index(st->decl.init); return true;
    case ST_ASSIGN:
        *indexes |= dynamic_value_index(st->assign.target) || dynamic_value_index(st->assign.value);
        return true;
    case ST_EXPR: *indexes |= dynamic_value_index(st->expr.expr); return true;
    case ST_IF:
        *indexes |= dynamic_value_index(st->if_.cond);
        return unrollable_body(st->if_.then, indexes) && unrollable_body(st->if_.els, indexes);
    case ST_FOR:
        for (int i = 0; i < st->for_.nranges; i++)
            *indexes |= dynamic_value_index(st->for_.ranges[i].lo) ||
                        dynamic_value_index(st->for_.ranges[i].hi);
        return unrollable_body(st->for_.body, indexes);
    case ST_WHILE:
        *indexes |= dynamic_value_index(st->while_.cond);
        return unrollable_body(st->while_.body, indexes);
    case ST_BLOCK:
        for (int i = 0; i < st->block.nstmts; i++)
            if (!unrollable_body(st->block.stmts[i], indexes))
                return false;
        return true;
    }
    return false;
}

/* A serial `for` of one range with constant bounds and at most UNROLL_MAX_TRIPS
 * iterations whose body indexes a vector, matrix or local array with a computed index
 * (`for k in 0..3 { v[k] = ... }`) is lowered as that many copies of the body with the
 * loop variable a constant: each index then folds to one component, where the loop would
 * select among all of them in every iteration and carry (and, in K.grad, push) all of
 * them. False when the loop is not such a loop. */
bool lw_unroll_for(lw *L, const fe_stmt *st) {
    if (st->for_.nranges != 1)
        return false;
    const fe_range *r = &st->for_.ranges[0];
    if (!r->lo->is_const || !r->hi->is_const || !r->sym || !r->sym->type)
        return false;
    int64_t lo = r->lo->cval.i, hi = r->hi->cval.i;
    if (r->sym->type->kind == TY_U32) {
        lo = (int64_t)(uint32_t)lo;
        hi = (int64_t)(uint32_t)hi;
    }
    if (hi - lo > UNROLL_MAX_TRIPS)
        return false;
    bool indexes = false;
    if (!unrollable_body(st->for_.body, &indexes) || !indexes)
        return false;
    for (int64_t i = lo; i < hi; i++) {
        L->b.loc = st->loc;
        lw_set(r->sym, ir_const_int(&L->b, r->sym->type, i));
        lower_block(L, st->for_.body);
    }
    return true;
}

static void lower_stmt(lw *L, const fe_stmt *st) {
    switch (st->kind) {
    case ST_LET:
    case ST_VAR:
        if (ty_is_aggregate(st->decl.sym->type))
            lw_decl_agg(L, st);
        else
            lw_bind(L, st->decl.sym, lw_expr(L, st->decl.init));
        return;
    case ST_ASSIGN: lower_assign(L, st); return;
    case ST_IF: lower_if(L, st); return;
    case ST_FOR:
        if (!lw_unroll_for(L, st))
            lower_serial_for(L, st, 0);
        return;
    case ST_WHILE: lower_while(L, st); return;
    case ST_BREAK:
        L->b.loc = st->loc;
        lw_set(L->loop->brk, ir_const_bool(&L->b, true));
        return;
    case ST_CONTINUE:
        L->b.loc = st->loc;
        lw_set(L->loop->cont, ir_const_bool(&L->b, true));
        return;
    case ST_RETURN:
        if (st->ret.value && ty_is_aggregate(L->func->retval->type)) {
            fe_sym **leaves = lw_leaf_syms(L, L->func->retval);
            int n = ty_leaves(L->func->retval->type);
            ir_value **v = kern_xmalloc(sizeof(ir_value *) * (size_t)n);
            lw_agg(L, st->ret.value, v);
            for (int i = 0; i < n; i++)
                lw_set(leaves[i], v[i]);
            free(v);
        } else if (st->ret.value) {
            lw_bind(L, L->func->retval, lw_expr(L, st->ret.value));
        }
        L->b.loc = st->loc;
        lw_set(L->func->ret, ir_const_bool(&L->b, true));
        return;
    case ST_EXPR:
        if (st->expr.expr->type && ty_is_aggregate(st->expr.expr->type)) {
            ir_value **v = kern_xmalloc(sizeof(ir_value *) * (size_t)ty_leaves(st->expr.expr->type));
            lw_agg(L, st->expr.expr, v); /* atomic_add(x[i], v); */
            free(v);
        } else {
            (void)lw_expr(L, st->expr.expr);
        }
        return;
    case ST_BLOCK: lower_list(L, st->block.stmts, st->block.nstmts); return;
    }
    kern_unreachable("statement kind");
}

void lw_func_body(lw *L, const fe_stmt *body) { lower_block(L, body); }

/* ---- Kernels and tasks ------------------------------------------------------------ */

/* A top-level parallel for: one PARALLEL task over the ranges' grid. A `continue` in its
 * body ends the thread's iteration. */
static void lower_parallel(lw *L, const fe_stmt *st) {
    int n = st->for_.nranges;
    ir_value *bounds[2 * KERN_MAX_RANK * 2];
    kern_assert(n <= 2 * KERN_MAX_RANK);
    for (int i = 0; i < n; i++) {
        bounds[2 * i] = lw_expr(L, st->for_.ranges[i].lo);
        bounds[2 * i + 1] = lw_expr(L, st->for_.ranges[i].hi);
    }
    L->b.loc = st->loc;
    ir_op *op = ir_parallel(&L->b, bounds, (uint32_t)n);
    ir_builder saved = L->b;
    L->b = ir_builder_at_end(L->m, op->regions[0]);
    for (int i = 0; i < n; i++)
        lw_set(st->for_.ranges[i].sym, op->regions[0]->args[i]);
    lw_loop lp;
    loop_flags(L, &lp, st->for_.body);
    lp.brk = NULL; /* sema rejects break here */
    L->loop = &lp;
    if (lp.cont) {
        L->b.loc = st->loc;
        lw_set(lp.cont, ir_const_bool(&L->b, false));
    }
    lower_block(L, st->for_.body);
    L->loop = NULL;
    L->b = saved;
}

static bool is_uniform_let(const fe_stmt *st) {
    return st->kind == ST_LET && st->decl.sym && st->decl.sym->is_uniform;
}

static void lower_kernel(lw *L, const fe_item *k) {
    ir_param *params = ARENA_ARRAY(&L->m->mem, ir_param, k->nparams ? k->nparams : 1);
    for (int i = 0; i < k->nparams; i++) {
        params[i].name = arena_strdup(&L->m->mem, k->params[i].name);
        params[i].type = lw_ir_type(k->params[i].type);
        lw_param_view(L, k->params[i].type, &params[i]);
        params[i].nograd = k->params[i].nograd;
        params[i].loc = k->params[i].loc;
    }
    ir_kernel *ik = ir_kernel_new(L->m, k->name, k->loc, params, (uint32_t)k->nparams);
    ik->grad_kernel = k->grad ? k->grad->name : NULL;
    ir_builder top = ir_builder_at_end(L->m, ik->body);
    L->b = top; /* a u8 or i16 scalar parameter is widened once, at the top level */
    for (int i = 0; i < k->nparams; i++)
        lw_bind(L, k->params[i].sym, ik->body->args[i]);
    top = L->b;
    fe_stmt *const *stmts = k->body->block.stmts;
    int n = k->body->block.nstmts;
    ir_op *serial = NULL; /* the open serial task */
    for (int i = 0; i < n; i++) {
        const fe_stmt *st = stmts[i];
        if (st->kind == ST_FOR && st->for_.parallel) {
            serial = NULL;
            L->b = top;
            lower_parallel(L, st);
            continue;
        }
        if (is_uniform_let(st)) {
            /* computed at the top level, before the open serial task if any */
            L->b = serial ? ir_builder_before(L->m, serial) : top;
            lower_stmt(L, st);
            continue;
        }
        if (!serial) {
            L->b = top;
            L->b.loc = st->loc;
            serial = ir_serial(&L->b);
        }
        L->b = ir_builder_at_end(L->m, serial->regions[0]);
        lower_stmt(L, st);
    }
}

ir_module *fe_lower(kc_ctx *ctx, const fe_file *file) {
    ir_module *m = ir_module_new(file->src ? file->src->path : NULL);
    lw L = {0};
    L.ctx = ctx;
    L.m = m;
    for (int i = 0; i < file->nitems; i++)
        if (file->items[i]->kind == IT_KERNEL)
            lower_kernel(&L, file->items[i]);
    return m;
}
