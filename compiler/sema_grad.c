/* sema_grad.c - the grad clauses of funcs and kernels (docs/autodiff.md, "Custom
 * gradients").
 *
 *   func f(p1: T1, ..., pn: Tn) -> R grad G    G(p1: T1, ..., pn: Tn, r: R, dr: R') -> A
 *   kernel K(params) grad G                    G has exactly K.grad's signature
 *
 * R' is R with f16/bf16 leaves as f32. A is the adjoint of f's differentiable parameters
 * (value parameters with float leaves, not nograd): the one's type, or a struct whose
 * fields are, in order, of their types. f must take values only (no arrays) and return a
 * float value. Every mismatch is an error that names the signature G must have. A func's
 * clause is an edge of the call graph (G is inlined at every call of f), so `f grad G`
 * with G calling f is reported as recursion, and the inline limits count G. Runs after
 * every body is checked (the parameter types are resolved then), before the recursion
 * check. */
#include <string.h>

#include "sema.h"

static bool has_float_leaf(const kern_type *t) {
    for (int i = 0; i < ty_leaves(t); i++)
        if (ty_is_float(ty_is_aggregate(t) ? ty_leaf_type(t, i) : t))
            return true;
    return false;
}

static bool is_half(const kern_type *t) { return t->kind == TY_F16 || t->kind == TY_BF16; }

/* The adjoint type of a value of type t: f32 for a scalar f16/bf16; NULL for an aggregate
 * with f16/bf16 leaves (no such type is spelled; not supported). */
static const kern_type *adj_type(const kern_type *t) {
    if (is_half(t))
        return ty_f32();
    if (ty_is_aggregate(t))
        for (int i = 0; i < ty_leaves(t); i++)
            if (is_half(ty_leaf_type(t, i)))
                return NULL;
    return t;
}

/* The signature G must have, for messages. */
static const char *func_sig(fe_sema *s, const fe_item *f, const char *g, const kern_type **d,
                            int nd) {
    kern_buf b = {0};
    buf_printf(&b, "func %s(", g);
    for (int i = 0; i < f->nparams; i++)
        buf_printf(&b, "%s: %s, ", f->params[i].name, f->params[i].type->name);
    buf_printf(&b, "r: %s, dr: %s) -> ", f->ret->name, adj_type(f->ret)->name);
    if (nd == 1) {
        buf_puts(&b, d[0]->name);
    } else {
        buf_puts(&b, "a struct of fields (");
        for (int i = 0; i < nd; i++)
            buf_printf(&b, "%s%s", i ? ", " : "", d[i]->name);
        buf_puts(&b, ")");
    }
    const char *r = arena_strdup(s->mem, b.data);
    buf_free(&b);
    return r;
}

static void check_func_grad(fe_sema *s, fe_item *f, fe_item *g) {
    if (!f->ret)
        return;
    if (f->ret->kind == TY_VOID) {
        fe_sema_error(s, f->grad_loc,
                      "func '%s' returns nothing; a custom adjoint needs a func with a result",
                      f->name);
        return;
    }
    if (!has_float_leaf(f->ret)) {
        fe_sema_error(s, f->grad_loc,
                      "func '%s' returns %s, which carries no gradient; a custom adjoint needs "
                      "a float result",
                      f->name, f->ret->name);
        return;
    }
    if (!adj_type(f->ret)) {
        fe_sema_error(s, f->grad_loc,
                      "func '%s' returns %s, a value with f16/bf16 fields; custom adjoints "
                      "do not support it (return f32 fields)",
                      f->name, f->ret->name);
        return;
    }
    const kern_type **d = ARENA_ARRAY(s->mem, const kern_type *, f->nparams + 1);
    int nd = 0;
    for (int i = 0; i < f->nparams; i++) {
        const fe_param *p = &f->params[i];
        if (!p->type)
            return; /* reported */
        if (ty_is_array(p->type) || p->type->kind == TY_LOCAL) {
            fe_sema_error(s, f->grad_loc,
                          "func '%s' has the array parameter '%s' (%s); custom adjoints are for "
                          "funcs of values",
                          f->name, p->name, p->type->name);
            return;
        }
        if (p->nograd || !has_float_leaf(p->type))
            continue;
        if (!(d[nd++] = adj_type(p->type))) {
            fe_sema_error(s, f->grad_loc,
                          "parameter '%s' of func '%s' has type %s, with f16/bf16 fields; "
                          "custom adjoints do not support it",
                          p->name, f->name, p->type->name);
            return;
        }
    }
    if (nd == 0) {
        fe_sema_error(s, f->grad_loc,
                      "func '%s' has no differentiable parameter (a float value not marked "
                      "nograd); a custom adjoint would have nothing to return",
                      f->name);
        return;
    }
    const char *sig = func_sig(s, f, g->name, d, nd);
    int want = f->nparams + 2;
    if (g->nparams != want) {
        fe_sema_error(s, f->grad_loc,
                      "func '%s' has %d parameter%s; the adjoint of '%s' must be %d: `%s`", g->name,
                      g->nparams, g->nparams == 1 ? "" : "s", f->name, want, sig);
        return;
    }
    for (int i = 0; i < want; i++) {
        const kern_type *e = i < f->nparams    ? f->params[i].type
                             : i == f->nparams ? f->ret
                                               : adj_type(f->ret);
        const kern_type *t = g->params[i].type;
        if (!t)
            return;
        if (t != e) {
            fe_sema_error(s, f->grad_loc,
                          "parameter %d ('%s') of func '%s' has type %s, expected %s; the "
                          "adjoint of '%s' must be `%s`",
                          i + 1, g->params[i].name, g->name, t->name, e->name, f->name, sig);
            return;
        }
    }
    const kern_type *r = g->ret;
    if (!r)
        return;
    bool ok = nd == 1 ? r == d[0] : r->kind == TY_STRUCT && r->nfields == nd;
    for (int i = 0; ok && nd > 1 && i < nd; i++)
        ok = r->fields[i].type == d[i];
    if (!ok)
        fe_sema_error(s, f->grad_loc,
                      "func '%s' returns %s; the adjoint of '%s' must return %s: `%s`", g->name,
                      r->name, f->name,
                      nd == 1 ? "the adjoint of its differentiable parameter"
                              : "a struct with one field per differentiable parameter, in order",
                      sig);
}

/* Whether kernel parameter p has an adjoint in K.grad (its element's storage is float). */
static bool kernel_param_differentiable(const fe_param *p) {
    const kern_type *e = ty_is_array(p->type) ? p->type->elem : p->type;
    if (ty_is_aggregate(e))
        e = ty_storage_leaf(e) ? ty_storage_leaf(e) : ty_leaf_type(e, 0);
    return ty_is_float(e) && !p->nograd;
}

static void check_kernel_grad(fe_sema *s, fe_item *k, fe_item *g) {
    int n = k->nparams, want = n;
    for (int i = 0; i < n; i++) {
        if (!k->params[i].type)
            return;
        want += kernel_param_differentiable(&k->params[i]);
    }
    const kern_type **e = ARENA_ARRAY(s->mem, const kern_type *, want + 1);
    const char **names = ARENA_ARRAY(s->mem, const char *, want + 1);
    int m = 0;
    for (int i = 0; i < n; i++) {
        names[m] = k->params[i].name;
        e[m++] = k->params[i].type;
    }
    for (int i = 0; i < n; i++) {
        const fe_param *p = &k->params[i];
        if (!kernel_param_differentiable(p))
            continue;
        names[m] = arena_printf(s->mem, "%s.grad", p->name);
        e[m++] = ty_is_array(p->type) ? p->type : ty_array_of(p->type, 1);
    }
    kern_buf b = {0};
    buf_printf(&b, "kernel %s(", g->name);
    for (int i = 0; i < want; i++)
        buf_printf(&b, "%s%s: %s", i ? ", " : "", names[i], e[i] ? e[i]->name : "?");
    buf_puts(&b, ")");
    const char *sig = arena_strdup(s->mem, b.data);
    buf_free(&b);
    if (g->nparams != want) {
        fe_sema_error(s, k->grad_loc,
                      "kernel '%s' has %d parameter%s; the gradient of kernel '%s' must have "
                      "the %d of '%s.grad': `%s`",
                      g->name, g->nparams, g->nparams == 1 ? "" : "s", k->name, want, k->name, sig);
        return;
    }
    for (int i = 0; i < want; i++) {
        const kern_type *t = g->params[i].type;
        if (t && t != e[i]) {
            fe_sema_error(s, k->grad_loc,
                          "parameter %d ('%s') of kernel '%s' has type %s, expected %s; the "
                          "gradient of kernel '%s' must be `%s`",
                          i + 1, g->params[i].name, g->name, t->name, e[i] ? e[i]->name : "?",
                          k->name, sig);
            return;
        }
    }
}

void fe_sema_check_grads(fe_sema *s) {
    for (int i = 0; i < s->file->nitems; i++) {
        fe_item *it = s->file->items[i];
        if (!it || !it->grad_name || (it->kind != IT_FUNC && it->kind != IT_KERNEL))
            continue;
        const char *what = it->kind == IT_FUNC ? "func" : "kernel";
        fe_item *g = fe_sema_find_item(s, it->grad_name);
        if (!g || g->kind != it->kind) {
            const char *hint = fe_sema_suggest(s, it->grad_name, true);
            if (g)
                fe_sema_error(s, it->grad_loc,
                              "'%s' in the grad clause of %s '%s' is not a %s; the grad clause "
                              "of a %s names a %s",
                              it->grad_name, what, it->name, what, what, what);
            else if (hint)
                fe_sema_error(s, it->grad_loc,
                              "unknown %s '%s' in the grad clause of %s '%s'; did you mean "
                              "'%s'?",
                              what, it->grad_name, what, it->name, hint);
            else
                fe_sema_error(s, it->grad_loc, "unknown %s '%s' in the grad clause of %s '%s'",
                              what, it->grad_name, what, it->name);
            continue;
        }
        if (g == it) {
            fe_sema_error(s, it->grad_loc,
                          "%s '%s' names itself in its grad clause; name another %s that "
                          "computes its %s",
                          what, it->name, what, it->kind == IT_FUNC ? "adjoint" : "gradient");
            continue;
        }
        it->grad = g;
        if (it->kind == IT_KERNEL) {
            check_kernel_grad(s, it, g);
            continue;
        }
        check_func_grad(s, it, g);
        /* G is inlined at every call of f: an edge f -> G of the call graph */
        fe_expr *call = ARENA_NEW(s->mem, fe_expr);
        call->kind = EX_CALL;
        call->loc = it->grad_loc;
        call->call.name = it->grad_name;
        call->call.name_loc = it->grad_loc;
        call->call.func = g;
        call->call.builtin = BI_NONE;
        s->fn = it;
        s->fn_index = fe_sema_item_index(s, it);
        s->depth = 0;
        fe_sema_note_call(s, call);
        s->fn = NULL;
    }
}
