/* sema.c - semantic analysis of a parsed file (fe_check, ast.h): items and scopes,
 * statements, kernels as task sequences, control-flow rules, return paths and recursion.
 * Expressions are typed in sema_expr.c, constants folded in sema_fold.c; the choices the
 * reference (docs/reference.md) leaves open are written down in docs/semantics.md.
 *
 * Order of work: (1) the item namespace (consts, funcs and kernels share it; any order of
 * definition), (2) every const, folded on demand so a const may use a later one (a
 * resolution stack finds cycles), (3) the bodies of funcs and kernels, in file order,
 * (4) the call graph of funcs, for recursion. Errors are reported as found; a construct
 * with an error gets a NULL type so that its consumers stay silent about it.
 *
 * Scopes: a flat stack of visible symbols (innermost last) with the start of the
 * innermost scope. The parameters form the outermost scope of a body; the body's block is
 * a scope of its own, so `var x = x;` copies a parameter into a mutable local.
 *
 * Kernel tasks (reference section 8): each top-level `for` of a kernel is a parallel task; each
 * maximal run of other top-level statements is a serial task. Symbols record their task;
 * a local of one task used in another is an error unless it is a uniform top-level let. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "sema.h"

void fe_sema_error(fe_sema *s, kern_loc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_vreport(&s->ctx->diags, DIAG_ERROR, s->src, loc, fmt, ap);
    va_end(ap);
}

void fe_sema_warning(fe_sema *s, kern_loc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_vreport(&s->ctx->diags, DIAG_WARNING, s->src, loc, fmt, ap);
    va_end(ap);
}

/* ---- Items -------------------------------------------------------------------------- */

/* ---- The item namespace: a hash table of names (a file may hold 10^5 items) ------------ */

static uint32_t name_hash(const char *name) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

/* The slot of name: the first item of that name, or the empty slot where it would go. */
static uint32_t name_slot(const fe_sema *s, const char *name) {
    uint32_t i = name_hash(name) & s->names_mask;
    while (s->names[i] >= 0 && strcmp(s->file->items[s->names[i]]->name, name) != 0)
        i = (i + 1) & s->names_mask;
    return i;
}

static void build_names(fe_sema *s) {
    uint32_t size = 16;
    while (size < 2 * (uint32_t)s->file->nitems + 16)
        size *= 2;
    s->names = kern_xmalloc(sizeof *s->names * size);
    s->names_mask = size - 1;
    for (uint32_t i = 0; i < size; i++)
        s->names[i] = -1;
    for (int i = 0; i < s->file->nitems; i++) {
        fe_item *it = s->file->items[i];
        if (!it || !it->name)
            continue;
        uint32_t slot = name_slot(s, it->name);
        if (s->names[slot] < 0) /* the first of a name stays */
            s->names[slot] = i;
    }
}

int fe_sema_item_index(const fe_sema *s, const fe_item *it) {
    if (it && it->name) {
        int i = s->names[name_slot(s, it->name)];
        if (i >= 0 && s->file->items[i] == it)
            return i;
    }
    for (int i = 0; i < s->file->nitems; i++) /* a later item of a duplicate name */
        if (s->file->items[i] == it)
            return i;
    kern_unreachable("item of another file");
}

static int item_index(const fe_sema *s, const fe_item *it) { return fe_sema_item_index(s, it); }

fe_item *fe_sema_find_item(fe_sema *s, const char *name) {
    if (!name)
        return NULL;
    int i = s->names[name_slot(s, name)];
    return i >= 0 ? s->file->items[i] : NULL;
}

static const char *item_kind_name(fe_item_kind k) {
    return k == IT_CONST ? "const" : k == IT_FUNC ? "func" : k == IT_STRUCT ? "struct" : "kernel";
}

/* ---- Scopes ------------------------------------------------------------------------- */

static fe_sym *find_local(const fe_sema *s, const char *name, int from) {
    for (int i = s->locals.len - 1; i >= from; i--) {
        fe_sym *y = s->locals.data[i];
        if (!strcmp(y->name, name))
            return y;
    }
    return NULL;
}

static int push_scope(fe_sema *s) {
    int saved = s->scope_start;
    s->scope_start = s->locals.len;
    return saved;
}

static void pop_scope(fe_sema *s, int saved) {
    s->locals.len = s->scope_start;
    s->scope_start = saved;
}

/* Declares a local in the innermost scope (reporting a redeclaration there). */
static fe_sym *declare(fe_sema *s, fe_sym_kind kind, const char *name, kern_loc loc,
                       const kern_type *t) {
    fe_sym *y = ARENA_NEW(s->mem, fe_sym);
    y->kind = kind;
    y->name = name ? name : "?";
    y->type = t;
    y->loc = loc;
    y->owner = s->fn;
    y->task = s->task;
    if (!name)
        return y;
    fe_sym *prev = find_local(s, name, s->scope_start);
    if (prev)
        fe_sema_error(s, loc, "'%s' is already declared in this scope (at line %u)", name,
                      prev->loc.line);
    ptrvec_push(&s->locals, y);
    return y;
}

/* ---- Names -------------------------------------------------------------------------- */

/* Edit distance with adjacent transpositions counting as one edit (optimal string
 * alignment), for names up to 63 bytes (-1 beyond). */
static int edit_distance(const char *a, const char *b) {
    int n = (int)strlen(a), m = (int)strlen(b);
    if (n > 63 || m > 63)
        return -1;
    int d[64][64];
    for (int i = 0; i <= n; i++)
        d[i][0] = i;
    for (int j = 0; j <= m; j++)
        d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

typedef struct suggestion {
    const char *name, *best;
    int dist, limit;
} suggestion;

static void consider(suggestion *g, const char *cand) {
    if (!cand || !strcmp(cand, g->name))
        return;
    int d = edit_distance(g->name, cand);
    if (d >= 0 && d <= g->limit && d < g->dist) {
        g->dist = d;
        g->best = cand;
    }
}

const char *fe_sema_suggest(fe_sema *s, const char *name, bool calls) {
    size_t n = strlen(name);
    suggestion g = {name, NULL, 1000, n <= 2 ? 0 : n <= 5 ? 1 : 2};
    if (!calls && !s->const_ctx)
        for (int i = s->locals.len - 1; i >= 0; i--)
            consider(&g, ((fe_sym *)s->locals.data[i])->name);
    for (int i = 0; i < s->file->nitems; i++) {
        fe_item *it = s->file->items[i];
        if (it && (calls ? it->kind == IT_FUNC : it->kind == IT_CONST))
            consider(&g, it->name);
    }
    if (calls)
        for (int b = BI_NONE + 1; b < BI__COUNT; b++)
            consider(&g, fe_builtin_name((fe_builtin)b));
    return g.best;
}

fe_sym *fe_sema_lookup_value(fe_sema *s, const char *name, kern_loc loc) {
    if (!name)
        return NULL;
    if (!s->const_ctx) {
        fe_sym *y = find_local(s, name, 0);
        if (y) {
            if (s->task >= 0 && y->task >= 0 && y->task != s->task && !y->is_uniform)
                fe_sema_error(s, loc,
                              "'%s' is declared in another task; only top-level lets of "
                              "parameters, constants, len and shape are visible across tasks",
                              name);
            return y;
        }
    }
    fe_item *it = fe_sema_find_item(s, name);
    if (it && it->kind == IT_CONST)
        return fe_sema_resolve_const(s, it, loc);
    if (it) {
        if (it->kind == IT_FUNC)
            fe_sema_error(s, loc, "func '%s' is not a value; call it: %s(...)", name, name);
        else
            fe_sema_error(s, loc, "kernel '%s' is not a value", name);
        return NULL;
    }
    if (fe_builtin_lookup(name) != BI_NONE) {
        fe_sema_error(s, loc, "builtin '%s' is not a value; call it: %s(...)", name, name);
        return NULL;
    }
    const char *sug = fe_sema_suggest(s, name, false);
    if (sug)
        fe_sema_error(s, loc, "unknown name '%s'; did you mean '%s'?", name, sug);
    else
        fe_sema_error(s, loc, "unknown name '%s'", name);
    return NULL;
}

void fe_sema_note_call(fe_sema *s, fe_expr *call) {
    if (!s->fn)
        return;
    fe_item_info *info = &s->info[s->fn_index];
    ptrvec_push(&info->sites, call);
    if (info->sites.len > info->site_depth_cap) {
        info->site_depth_cap = info->sites.len * 2;
        info->site_depth =
            kern_xrealloc(info->site_depth, sizeof *info->site_depth * info->site_depth_cap);
    }
    info->site_depth[info->sites.len - 1] = s->depth;
    /* distinct callees: bodies are checked one at a time, so a callee already called
     * from this body carries its mark */
    fe_item_info *callee = &s->info[item_index(s, call->call.func)];
    if (callee->called_by == s->fn_index + 1)
        return;
    callee->called_by = s->fn_index + 1;
    ptrvec_push(&info->calls, call);
}

/* ---- Consts ------------------------------------------------------------------------- */

/* Reports the cycle that closes when `it`, being resolved, is used again at loc. */
void fe_sema_chain_link(kern_buf *b, int i, int n, const char *name) {
    if (i < 6 || i == n - 1)
        buf_printf(b, "%s -> ", name);
    else if (i == 6)
        buf_printf(b, "... (%d more) -> ", n - 7);
}

static void const_cycle(fe_sema *s, fe_item *it, kern_loc loc) {
    kern_buf b = {0};
    int start = 0;
    while (start < s->const_stack.len && s->const_stack.data[start] != it)
        start++;
    for (int i = start; i < s->const_stack.len; i++) {
        fe_item *c = s->const_stack.data[i];
        fe_sema_chain_link(&b, i - start, s->const_stack.len - start, c->name);
        s->info[item_index(s, c)].cyclic = true;
    }
    buf_puts(&b, it->name);
    fe_sema_error(s, loc, "cyclic const definition: %s", b.data);
    buf_free(&b);
}

fe_sym *fe_sema_resolve_const(fe_sema *s, fe_item *it, kern_loc use) {
    fe_item_info *info = &s->info[item_index(s, it)];
    if (info->state == 2)
        return it->sym;
    if (info->state == 1) {
        const_cycle(s, it, use);
        return it->sym; /* type NULL while resolving: uses stay silent */
    }
    fe_sym *y = ARENA_NEW(s->mem, fe_sym);
    y->kind = SYM_CONST;
    y->name = it->name;
    y->loc = it->name_loc;
    y->task = -1;
    it->sym = y;
    if (s->const_depth > KC_MAX_NESTING) {
        /* consts resolved inside consts recurse: a chain of 20,000 overflowed the stack. One
         * error; the rest of the chain is left untyped (its uses stay silent). */
        if (!s->const_too_deep && s->const_stack.len) {
            const fe_item *first = s->const_stack.data[0];
            const fe_item *last = s->const_stack.data[s->const_stack.len - 1];
            fe_sema_error(s, use,
                          "const '%s' is defined through consts and expressions nested more "
                          "than %d deep (%s -> ... -> %s -> %s); the limit of nesting",
                          it->name, KC_MAX_NESTING, first->name, last->name, it->name);
        }
        s->const_too_deep = true;
        info->state = 2;
        return y;
    }
    info->state = 1;
    ptrvec_push(&s->const_stack, it);

    /* a const initializer sees only items */
    fe_item *fn = s->fn;
    bool const_ctx = s->const_ctx;
    int task = s->task;
    fe_loop_kind loop = s->loop;
    s->fn = NULL;
    s->const_ctx = true;
    s->task = -1;
    s->loop = LOOP_NONE;

    int errors = s->ctx->diags.errors;
    const kern_type *t;
    if (it->declared) {
        t = fe_sema_expr(s, &it->init, it->declared, 0);
        if (t && !fe_sema_convert(s, &it->init, it->declared))
            t = NULL;
    } else {
        t = fe_sema_value(s, &it->init, NULL);
    }
    if (t && it->init && it->init->is_const) {
        y->type = it->init->type;
        y->cval = it->init->cval;
    } else if (t && !info->cyclic && s->ctx->diags.errors == errors) {
        fe_sema_error(s, it->init ? fe_sema_first_loc(it->init) : it->name_loc,
                      "initializer of const '%s' is not a constant expression", it->name);
    }

    s->fn = fn;
    s->const_ctx = const_ctx;
    s->task = task;
    s->loop = loop;
    s->const_stack.len--;
    info->state = 2;
    return y;
}

/* ---- Statements --------------------------------------------------------------------- */

static void check_stmt(fe_sema *s, fe_stmt *st, bool top);

static void check_block(fe_sema *s, fe_stmt *blk) {
    if (!blk)
        return;
    if (blk->kind != ST_BLOCK) {
        check_stmt(s, blk, false);
        return;
    }
    int saved = push_scope(s);
    for (int i = 0; i < blk->block.nstmts; i++)
        check_stmt(s, blk->block.stmts[i], false);
    pop_scope(s, saved);
}

static void check_decl(fe_sema *s, fe_stmt *st, bool top) {
    const kern_type *t = st->decl.declared;
    if (t) {
        t = st->decl.declared = fe_sema_type(s, t, st->decl.name_loc);
        if (t && st->decl.init && st->decl.init->kind == EX_ARRAYLIT) {
            if (!fe_sema_expr(s, &st->decl.init, t, 0) || !fe_sema_convert(s, &st->decl.init, t))
                st->decl.init->type = NULL;
        } else if (t && st->decl.init) {
            fe_sema_expect(s, &st->decl.init, t);
        } else if (t && !ty_is_aggregate(t)) {
            fe_sema_error(s, st->decl.name_loc,
                          "var '%s' of type %s needs an initial value (= ...); only local arrays, "
                          "vectors, matrices and structs start at zero",
                          st->decl.name, t->name);
        }
    } else {
        t = fe_sema_value_flags(s, &st->decl.init, NULL, SX_NARROW_OK);
    }
    fe_sym *y = declare(s, SYM_LOCAL, st->decl.name, st->decl.name_loc, t);
    if (t && (ty_is_array(t) || t->kind == TY_VOID)) {
        fe_sema_error(s, st->decl.name_loc, "a local cannot have type %s", t->name);
        y->type = NULL;
    }
    y->is_mutable = st->kind == ST_VAR;
    y->decl = st;
    st->decl.sym = y;
    if (top && s->fn && s->fn->kind == IT_KERNEL && st->kind == ST_LET && t &&
        fe_sema_is_uniform(st->decl.init))
        y->is_uniform = true;
}

/* A component, field or element target: its root is an array parameter's element, or a
 * var (not a let, parameter or loop variable). Reports and returns false otherwise. */
static bool assignable_part(fe_sema *s, const fe_expr *tg) {
    const fe_expr *e = tg;
    while (e->kind == EX_MEMBER || e->kind == EX_ELEM)
        e = e->kind == EX_MEMBER ? e->member.base : e->elem.base;
    const fe_sym *y = e->kind == EX_INDEX ? e->index.sym : e->kind == EX_NAME ? e->name.sym : NULL;
    if (e->kind != EX_INDEX && e->kind != EX_NAME) {
        fe_sema_error(s, fe_sema_first_loc(tg), "cannot assign to a part of a computed value; "
                                                "assign it to a var first");
        return false;
    }
    if (!y || !y->type)
        return false;
    if (ty_is_array(y->type))
        return true;
    if (y->kind == SYM_LOCAL && y->is_mutable)
        return true;
    fe_sema_error(s, e->loc,
                  y->kind == SYM_LOCAL ? "cannot assign to a part of '%s'; it is declared with let "
                                         "(use var for a mutable local)"
                                       : "cannot assign to a part of '%s'; it is immutable (copy "
                                         "it into a var first)",
                  y->name);
    return false;
}

/* t op= v on a vector or matrix target: the value is one of the target's type or a scalar
 * (broadcast), and t op v must have the target's type (m *= n is the matrix product). */
static void check_compound_aggregate(fe_sema *s, fe_stmt *st, const kern_type *tt) {
    const kern_type *vt = fe_sema_expr(s, &st->assign.value, tt, 0);
    if (!vt)
        return;
    if (!(tt->kind == TY_VEC || tt->kind == TY_MAT) || !ty_is_number(tt->elem)) {
        fe_sema_error(s, st->assign.op_loc, "'%s' needs a number, vector or matrix target, got %s",
                      fe_assign_text(st->assign.op), tt->name);
        return;
    }
    static const fe_binop ops[] = {[AS_ADD] = BIN_ADD, [AS_SUB] = BIN_SUB, [AS_MUL] = BIN_MUL,
                                   [AS_DIV] = BIN_DIV};
    fe_expr bin = {.kind = EX_BINARY, .loc = st->assign.op_loc};
    bin.binary.op = ops[st->assign.op];
    bin.binary.lhs = st->assign.target;
    bin.binary.rhs = st->assign.value;
    const kern_type *r = fe_sema_agg_binary(s, &bin);
    st->assign.value = bin.binary.rhs; /* a converted scalar */
    if (r && r != tt)
        fe_sema_error(s, st->assign.op_loc, "'%s' of a %s by a %s gives a %s, not the target's type",
                      fe_assign_text(st->assign.op), tt->name, vt->name, r->name);
}

static void check_assign(fe_sema *s, fe_stmt *st) {
    fe_expr *tg = st->assign.target;
    const kern_type *tt = NULL, *hint = NULL;
    if (!tg)
        return;
    if (tg->kind == EX_NAME) {
        const char *name = tg->name.name;
        fe_sym *y = fe_sema_lookup_value(s, name, tg->loc);
        tg->name.sym = y;
        tg->type = y ? y->type : NULL;
        hint = tg->type;
        if (y && y->type) {
            switch (y->kind) {
            case SYM_CONST: fe_sema_error(s, tg->loc, "cannot assign to const '%s'", name); break;
            case SYM_PARAM:
                if (ty_is_array(y->type))
                    fe_sema_error(s, tg->loc,
                                  "cannot assign to array '%s'; assign to its elements, e.g. "
                                  "%s[i] = ...",
                                  name, name);
                else
                    fe_sema_error(s, tg->loc,
                                  "cannot assign to parameter '%s'; parameters are immutable, "
                                  "copy it into a var first (var %s = %s;)",
                                  name, name, name);
                break;
            case SYM_LOOPVAR:
                fe_sema_error(s, tg->loc, "cannot assign to loop variable '%s'", name);
                break;
            case SYM_LOCAL:
                if (y->is_mutable)
                    tt = y->type;
                else
                    fe_sema_error(s, tg->loc,
                                  "cannot assign to '%s'; it is declared with let (use var for "
                                  "a mutable local)",
                                  name);
                break;
            }
        }
    } else if (tg->kind == EX_INDEX || tg->kind == EX_MEMBER || tg->kind == EX_ELEM) {
        tt = fe_sema_expr(s, &st->assign.target, NULL, SX_NARROW_OK);
        if (tt && !assignable_part(s, st->assign.target))
            tt = NULL;
        if (tt && (st->assign.op == AS_ADD || st->assign.op == AS_SUB) &&
            fe_sema_is_memory(st->assign.target) &&
            !fe_sema_atomic_ok(s, st->assign.target, st->assign.op == AS_ADD ? "'+='" : "'-='"))
            tt = NULL;
        if (tt && ty_is_narrow(tt) && (st->assign.op == AS_ADD || st->assign.op == AS_SUB) &&
            fe_sema_is_memory(tg)) {
            const char *an = tg->kind == EX_INDEX ? tg->index.name : "the array";
            fe_sema_error(s, st->assign.op_loc,
                          "'%s' on array '%s' of %s elements is not supported: on an array "
                          "element it is atomic, and atomics work on i32, u32, i64, u64, f32 "
                          "and f64 elements; write '%s[...] = %s[...] %c ...' if no two threads "
                          "update one element",
                          fe_assign_text(st->assign.op), an, tt->name, an, an,
                          st->assign.op == AS_ADD ? '+' : '-');
            tt = NULL;
        }
    } else {
        fe_sema_error(s, tg->loc, "cannot assign to this expression");
    }
    if (tt && ty_is_aggregate(tt) && st->assign.op != AS_SET) {
        check_compound_aggregate(s, st, tt);
        return;
    }
    if (tt && st->assign.op != AS_SET && !ty_is_number(tt)) {
        fe_sema_error(s, st->assign.op_loc, "'%s' needs a number target, got %s",
                      fe_assign_text(st->assign.op), tt->name);
        tt = NULL;
    }
    if (tt) /* a compound update of a u8 or f16 target computes in i32 or f32 */
        fe_sema_expect(s, &st->assign.value, st->assign.op == AS_SET ? tt : ty_arith(tt));
    else
        fe_sema_value(s, &st->assign.value, hint && ty_is_scalar(hint) ? hint : NULL);
}

typedef struct range_use {
    const fe_stmt *loop;
    int before; /* ranges [0, before) of loop */
} range_use;

/* The first use in e of a variable of ranges [0, before) of the for `loop`, or NULL. */
static const fe_expr *find_range_use(const fe_expr *e, const range_use *u) {
    if (!e)
        return NULL;
    const fe_expr *r = NULL;
    switch (e->kind) {
    case EX_NAME: {
        const fe_sym *y = e->name.sym;
        if (y && y->kind == SYM_LOOPVAR && y->decl == u->loop && y->range < u->before)
            return e;
        return NULL;
    }
    case EX_UNARY: return find_range_use(e->unary.arg, u);
    case EX_BINARY:
        if ((r = find_range_use(e->binary.lhs, u)))
            return r;
        return find_range_use(e->binary.rhs, u);
    case EX_COND:
        if ((r = find_range_use(e->cond.cond, u)) || (r = find_range_use(e->cond.a, u)))
            return r;
        return find_range_use(e->cond.b, u);
    case EX_CAST: return find_range_use(e->cast.arg, u);
    case EX_CALL:
        for (int i = 0; i < e->call.nargs && !r; i++)
            r = find_range_use(e->call.args[i], u);
        return r;
    case EX_INDEX:
        for (int i = 0; i < e->index.nidx && !r; i++)
            r = find_range_use(e->index.idx[i], u);
        return r;
    default: {
        const fe_expr *k[64];
        int n = fe_expr_kids(e, k, 64);
        for (int i = 0; i < n && i < 64 && !r; i++)
            r = find_range_use(k[i], u);
        return r;
    }
    }
}

/* A range with constant bounds whose length does not fit its type (i32: 2^31 - 1, u32:
 * 2^32 - 1, i64: 2^63 - 1) would wrap its trip count: an error. */
static void check_range_length(fe_sema *s, const fe_range *r, const kern_type *t) {
    if (!t || !r->lo || !r->hi || !r->lo->is_const || !r->hi->is_const)
        return;
    __int128 lo = t->kind == TY_U32 ? (__int128)(uint32_t)r->lo->cval.i : r->lo->cval.i;
    __int128 hi = t->kind == TY_U32 ? (__int128)(uint32_t)r->hi->cval.i : r->hi->cval.i;
    __int128 max = t->kind == TY_I32 ? INT32_MAX : t->kind == TY_U32 ? UINT32_MAX : INT64_MAX;
    if (hi - lo > max)
        fe_sema_error(s, r->loc,
                      "the range of '%s' has %.0f iterations, more than an %s index can count "
                      "(%.0f)",
                      r->var, (double)(hi - lo), t->name, (double)max);
}

/* The first func call (atomics included) in e, or NULL. Array reads are fine: a bound read
 * from an array is a top-level load, evaluated when the task starts (docs/ir.md). */
static const fe_expr *memory_or_call(const fe_expr *e) {
    if (!e)
        return NULL;
    const fe_expr *r = NULL;
    switch (e->kind) {
    case EX_INDEX:
        for (int i = 0; i < e->index.nidx && !r; i++)
            r = memory_or_call(e->index.idx[i]);
        return r;
    case EX_UNARY: return memory_or_call(e->unary.arg);
    case EX_BINARY: r = memory_or_call(e->binary.lhs); return r ? r : memory_or_call(e->binary.rhs);
    case EX_COND:
        r = memory_or_call(e->cond.cond);
        r = r ? r : memory_or_call(e->cond.a);
        return r ? r : memory_or_call(e->cond.b);
    case EX_CAST: return memory_or_call(e->cast.arg);
    case EX_CALL:
        if (e->call.builtin == BI_NONE ||
            (e->call.builtin >= BI_ATOMIC_ADD && e->call.builtin <= BI_ATOMIC_MAX))
            return e;
        if (e->call.builtin == BI_LEN || e->call.builtin == BI_SHAPE)
            return NULL; /* the array's shape, not its elements */
        for (int i = 0; i < e->call.nargs && !r; i++)
            r = memory_or_call(e->call.args[i]);
        return r;
    default: {
        const fe_expr *k[64];
        int n = fe_expr_kids(e, k, 64);
        for (int i = 0; i < n && i < 64 && !r; i++)
            r = memory_or_call(k[i]);
        return r;
    }
    }
}

static void check_for(fe_sema *s, fe_stmt *st, bool top) {
    bool parallel = top && s->fn && s->fn->kind == IT_KERNEL;
    st->for_.parallel = parallel;
    if (parallel && st->for_.nranges > FE_MAX_PARALLEL_RANGES)
        fe_sema_error(s, st->for_.ranges[FE_MAX_PARALLEL_RANGES].loc,
                      "a parallel for has at most %d ranges, this one has %d; nest a serial for "
                      "inside for the others",
                      FE_MAX_PARALLEL_RANGES, st->for_.nranges);
    int saved = push_scope(s);
    for (int k = 0; k < st->for_.nranges; k++) {
        fe_range *r = &st->for_.ranges[k];
        const kern_type *lt = fe_sema_expr(s, &r->lo, NULL, 0);
        const kern_type *ht = fe_sema_expr(s, &r->hi, NULL, 0);
        const kern_type *t = NULL;
        if (lt && ht) {
            fe_expr **ops[2] = {&r->lo, &r->hi};
            t = fe_sema_unify_ints(s, ops, "range bounds");
            check_range_length(s, r, t);
        }
        /* a parallel for's grid is sized before its threads start (runtime/launch.c),
         * from values the host knows: not from array elements or func bodies (names of
         * other tasks and loops have their own errors) */
        for (int b = 0; parallel && t && b < 2; b++) {
            const fe_expr *bad = memory_or_call(b ? r->hi : r->lo);
            if (bad)
                fe_sema_error(s, bad->loc,
                              "the bounds of a parallel for may not call funcs or atomics (they "
                              "are evaluated once, before the task's first iteration); compute "
                              "the bound in a top-level let of parameters, constants, len, shape "
                              "or array elements");
        }
        if (parallel && k > 0) {
            range_use u = {st, k};
            const fe_expr *use = find_range_use(r->lo, &u);
            if (!use)
                use = find_range_use(r->hi, &u);
            if (use)
                fe_sema_error(s, use->loc,
                              "bounds of '%s' use '%s' of the same parallel for; its iteration "
                              "space must be rectangular (nest a serial for instead)",
                              r->var, use->name.name);
        }
        fe_sym *y = declare(s, SYM_LOOPVAR, r->var, r->loc, t);
        y->decl = st;
        y->range = k;
        r->sym = y;
    }
    fe_loop_kind loop = s->loop;
    s->loop = parallel ? LOOP_PARALLEL : LOOP_SERIAL;
    check_block(s, st->for_.body);
    s->loop = loop;
    if (parallel)
        fe_sema_warn_races(s, st);
    pop_scope(s, saved);
}

static void check_return(fe_sema *s, fe_stmt *st) {
    fe_item *fn = s->fn;
    if (!fn || fn->kind != IT_FUNC) {
        fe_sema_error(s, st->loc, "return outside of a func; a kernel cannot return");
        if (st->ret.value)
            fe_sema_value(s, &st->ret.value, NULL);
        return;
    }
    const kern_type *ret = fn->ret ? fn->ret : ty_void();
    if (ret->kind == TY_VOID) {
        if (st->ret.value) {
            fe_sema_error(s, fe_sema_first_loc(st->ret.value),
                          "func '%s' has no return type, so it cannot return a value", fn->name);
            fe_sema_expr(s, &st->ret.value, NULL, SX_VOID_OK);
        }
    } else if (!st->ret.value) {
        fe_sema_error(s, st->loc, "func '%s' must return a value of type %s", fn->name, ret->name);
    } else {
        fe_sema_expect(s, &st->ret.value, ret);
    }
}

static void check_stmt_kind(fe_sema *s, fe_stmt *st, bool top);

static void check_stmt(fe_sema *s, fe_stmt *st, bool top) {
    if (!st)
        return;
    if (!s->fn) {
        check_stmt_kind(s, st, top);
        return;
    }
    fe_item_info *info = &s->info[s->fn_index];
    info->nodes++;
    if (++s->depth > info->max_depth)
        info->max_depth = s->depth;
    check_stmt_kind(s, st, top);
    s->depth--;
}

static void check_stmt_kind(fe_sema *s, fe_stmt *st, bool top) {
    switch (st->kind) {
    case ST_LET:
    case ST_VAR: check_decl(s, st, top); break;
    case ST_ASSIGN: check_assign(s, st); break;
    case ST_IF:
        fe_sema_cond(s, &st->if_.cond, "if condition");
        check_block(s, st->if_.then);
        check_block(s, st->if_.els);
        break;
    case ST_FOR: check_for(s, st, top); break;
    case ST_WHILE: {
        fe_sema_cond(s, &st->while_.cond, "while condition");
        fe_loop_kind loop = s->loop;
        s->loop = LOOP_SERIAL;
        check_block(s, st->while_.body);
        s->loop = loop;
        break;
    }
    case ST_BREAK:
        if (s->loop == LOOP_PARALLEL)
            fe_sema_error(s, st->loc,
                          "break inside a parallel for; its iterations cannot stop the loop "
                          "(use continue to end this iteration)");
        else if (s->loop == LOOP_NONE)
            fe_sema_error(s, st->loc, "break outside of a loop");
        break;
    case ST_CONTINUE:
        if (s->loop == LOOP_NONE)
            fe_sema_error(s, st->loc, "continue outside of a loop");
        break;
    case ST_RETURN: check_return(s, st); break;
    case ST_EXPR: {
        const kern_type *t = fe_sema_expr(s, &st->expr.expr, NULL, SX_VOID_OK);
        fe_expr *e = st->expr.expr;
        if (t && fe_is_untyped(t)) {
            fe_sema_resolve(s, &st->expr.expr, t == &fe_untyped_int ? ty_i32() : ty_f32());
            e = st->expr.expr;
        }
        if (t && e->kind != EX_CALL)
            fe_sema_warning(s, fe_sema_first_loc(e), "expression result unused");
        break;
    }
    case ST_BLOCK: check_block(s, st); break;
    }
}

/* ---- Return paths ------------------------------------------------------------------- */

/* Does st contain a break of the loop it is the body of (not of an inner loop)? */
static bool has_break(const fe_stmt *st) {
    if (!st)
        return false;
    switch (st->kind) {
    case ST_BREAK: return true;
    case ST_BLOCK:
        for (int i = 0; i < st->block.nstmts; i++)
            if (has_break(st->block.stmts[i]))
                return true;
        return false;
    case ST_IF: return has_break(st->if_.then) || has_break(st->if_.els);
    default: return false;
    }
}

/* Does control never reach the end of st (every path returns)? */
static bool never_falls_through(const fe_stmt *st) {
    if (!st)
        return false;
    switch (st->kind) {
    case ST_RETURN: return true;
    case ST_BLOCK:
        for (int i = 0; i < st->block.nstmts; i++)
            if (never_falls_through(st->block.stmts[i]))
                return true;
        return false;
    case ST_IF:
        return st->if_.els && never_falls_through(st->if_.then) && never_falls_through(st->if_.els);
    case ST_WHILE: {
        const fe_expr *c = st->while_.cond;
        return c && c->is_const && c->type == ty_bool() && c->cval.i && !has_break(st->while_.body);
    }
    default: return false;
    }
}

/* ---- Bodies ------------------------------------------------------------------------- */

/* What a kernel parameter may be (docs/reference.md section 11): the IR passes a vector,
 * matrix or struct (and an array of them) as an array of one component type with trailing
 * dimensions, so every leaf has one type, and the whole fits in KERN_MAX_RANK dimensions. */
static void check_kernel_param(fe_sema *s, fe_param *p) {
    const kern_type *t = p->type, *e = ty_is_array(t) ? t->elem : t;
    if (t->kind == TY_LOCAL) {
        fe_sema_error(s, p->loc, "kernel parameter '%s' cannot be a local array (%s); use an "
                                 "array parameter",
                      p->name, t->name);
        p->type = NULL;
        return;
    }
    if (!ty_is_aggregate(e))
        return;
    if (!ty_storage_leaf(e)) {
        const kern_type *leaf = ty_leaf_type(e, 0);
        for (int i = 0; i < ty_leaves(e); i++)
            if (ty_leaf_type(e, i)->kind == TY_BOOL || ty_size(ty_leaf_type(e, i)) != ty_size(leaf)) {
                fe_sema_error(s, p->loc,
                              "kernel parameter '%s' of type %s: the fields of a struct passed "
                              "to a kernel must have one size and no bools (it has %s and %s); "
                              "use i32 for a flag, or f64 and i64 together",
                              p->name, t->name, leaf->name, ty_leaf_type(e, i)->name);
                break;
            }
        p->type = NULL;
        return;
    }
    int trailing = e->kind == TY_MAT ? 2 : 1;
    int rank = (ty_is_array(t) ? t->rank : 0) + trailing;
    if (rank > KERN_MAX_RANK) {
        fe_sema_error(s, p->loc,
                      "kernel parameter '%s' of type %s has %d dimensions in memory (%d for the "
                      "%s); the most is %d",
                      p->name, t->name, rank, trailing, e->name, KERN_MAX_RANK);
        p->type = NULL;
    }
}

static void declare_params(fe_sema *s, fe_item *it) {
    if (it->ret)
        it->ret = fe_sema_type(s, it->ret, it->name_loc);
    for (int i = 0; i < it->nparams; i++) {
        fe_param *p = &it->params[i];
        p->type = fe_sema_type(s, p->type, p->loc);
        if (p->type && it->kind == IT_KERNEL)
            check_kernel_param(s, p);
        if (p->name && find_local(s, p->name, 0))
            fe_sema_error(s, p->loc, "duplicate parameter '%s'", p->name);
        if (p->nograd && p->type) {
            const kern_type *e = ty_is_array(p->type) ? p->type->elem : p->type;
            if (ty_is_aggregate(e))
                e = ty_leaf_type(e, 0);
            if (!ty_is_float(e))
                fe_sema_error(s, p->loc,
                              "nograd on parameter '%s' of type %s; only f32 and f64 "
                              "parameters have gradients",
                              p->name, p->type->name);
            else if (it->kind == IT_FUNC && !it->grad_name)
                fe_sema_warning(s, p->loc,
                                "nograd has no effect on a func parameter; mark the kernel "
                                "parameter instead");
        }
        if (it->kind == IT_KERNEL && p->type && (p->type->kind == TY_F16 || p->type->kind == TY_BF16))
            fe_sema_error(s, p->loc,
                          "kernel parameter '%s' has type %s; f16 and bf16 are storage types "
                          "for arrays (%s[]), pass a scalar as f32",
                          p->name, p->type->name, p->type->name);
        fe_sym *y = ARENA_NEW(s->mem, fe_sym);
        y->kind = SYM_PARAM;
        y->name = p->name ? p->name : "?";
        y->type = p->type;
        y->loc = p->loc;
        y->param = p;
        y->owner = it;
        y->task = -1;
        p->sym = y;
        ptrvec_push(&s->locals, y);
    }
}

static void check_body(fe_sema *s, fe_item *it) {
    s->fn = it;
    s->fn_index = item_index(s, it);
    s->const_ctx = false;
    s->locals.len = 0;
    s->scope_start = 0;
    s->task = -1;
    s->loop = LOOP_NONE;
    declare_params(s, it);
    fe_stmt *body = it->body;
    if (body && body->kind == ST_BLOCK) {
        int saved = push_scope(s);
        if (it->kind == IT_KERNEL) {
            int task = -1;
            bool serial = false;
            for (int i = 0; i < body->block.nstmts; i++) {
                fe_stmt *st = body->block.stmts[i];
                if (!st)
                    continue;
                if (st->kind == ST_FOR) {
                    task++;
                    serial = false;
                } else if (!serial) {
                    task++;
                    serial = true;
                }
                s->task = task;
                check_stmt(s, st, true);
            }
            it->ntasks = task + 1;
            s->task = -1;
        } else {
            for (int i = 0; i < body->block.nstmts; i++)
                check_stmt(s, body->block.stmts[i], false);
        }
        pop_scope(s, saved);
    }
    if (it->kind == IT_FUNC && it->ret && it->ret->kind != TY_VOID && body &&
        !never_falls_through(body))
        fe_sema_error(s, it->name_loc,
                      "missing return: func '%s' must return a value of type %s on every path",
                      it->name, it->ret->name);
    s->fn = NULL;
    s->locals.len = 0;
    s->scope_start = 0;
}

/* ---- Recursion ---------------------------------------------------------------------- */

/* An explicit stack, not recursion: a file may chain 10^5 funcs. */
typedef struct call_dfs {
    fe_sema *s;
    int *color; /* 0 unvisited, 1 on the path, 2 done */
    int *path;  /* the items on the path, outermost first */
    int *next;  /* per path entry: the next call of its item to follow */
    int depth;
} call_dfs;

static void report_cycle(call_dfs *d, const fe_expr *call, int j) {
    fe_sema *s = d->s;
    kern_buf b = {0};
    int k = d->depth - 1;
    while (d->path[k] != j)
        k--;
    for (int i = k; i < d->depth; i++)
        fe_sema_chain_link(&b, i - k, d->depth - k, s->file->items[d->path[i]]->name);
    buf_puts(&b, s->file->items[j]->name);
    fe_sema_error(s, call->call.name_loc,
                  "recursive call: %s; funcs are inlined, so recursion is not allowed", b.data);
    buf_free(&b);
}

static void dfs(call_dfs *d, int root) {
    fe_sema *s = d->s;
    d->color[root] = 1;
    d->path[0] = root;
    d->next[0] = 0;
    d->depth = 1;
    while (d->depth > 0) {
        int i = d->path[d->depth - 1];
        kern_ptrvec *calls = &s->info[i].calls;
        if (d->next[d->depth - 1] == calls->len) {
            d->color[i] = 2;
            d->depth--;
            continue;
        }
        fe_expr *call = calls->data[d->next[d->depth - 1]++];
        int j = item_index(s, call->call.func);
        if (d->color[j] == 1) {
            report_cycle(d, call, j);
        } else if (d->color[j] == 0) {
            d->color[j] = 1;
            d->path[d->depth] = j;
            d->next[d->depth++] = 0;
        }
    }
}

static void check_recursion(fe_sema *s) {
    int n = s->file->nitems;
    size_t cnt = n > 0 ? (size_t)n : 1;
    call_dfs d = {s, calloc(cnt, sizeof(int)), calloc(cnt, sizeof(int)), calloc(cnt, sizeof(int)),
                  0};
    if (!d.color || !d.path || !d.next)
        kern_oom(cnt * sizeof(int));
    for (int i = 0; i < n; i++)
        if (s->file->items[i] && s->file->items[i]->kind == IT_FUNC && d.color[i] == 0)
            dfs(&d, i);
    free(d.color);
    free(d.path);
    free(d.next);
}

/* ---- Entry point -------------------------------------------------------------------- */

bool fe_check(kc_ctx *ctx, fe_file *file) {
    int errors = ctx->diags.errors;
    fe_sema S;
    memset(&S, 0, sizeof S);
    fe_sema *s = &S;
    s->ctx = ctx;
    s->file = file;
    s->src = file->src;
    s->mem = &ctx->mem;
    s->task = -1;
    int n = file->nitems;
    size_t cnt = n > 0 ? (size_t)n : 1;
    s->info = calloc(cnt, sizeof(fe_item_info));
    if (!s->info)
        kern_oom(cnt * sizeof(fe_item_info));
    for (int i = 0; i < n; i++)
        s->info[i].item = file->items[i];
    build_names(s);

    /* (1) the item namespace */
    for (int i = 0; i < n; i++) {
        fe_item *it = file->items[i];
        if (!it || !it->name)
            continue;
        fe_item *first = fe_sema_find_item(s, it->name);
        if (first != it)
            fe_sema_error(s, it->name_loc, "duplicate definition of '%s' (a %s at line %u)",
                          it->name, item_kind_name(first->kind), first->name_loc.line);
        if (it->kind == IT_FUNC && fe_builtin_reserved(fe_builtin_lookup(it->name)))
            fe_sema_error(s, it->name_loc, "func '%s' has the name of a builtin", it->name);
        /* the symbols of K.grad (K.jvp, K.grad.jvp) are those of a kernel named K__grad
         * (K__jvp, K__grad__jvp; runtime/abi.h writes '.' as "__"): such a kernel beside K
         * would run in the derived kernel's place */
        static const char *const mangled[][2] = {
            {"__grad__jvp", ".grad.jvp"}, {"__grad", ".grad"}, {"__jvp", ".jvp"}};
        size_t len = strlen(it->name);
        for (int d = 0; it->kind == IT_KERNEL && d < 3; d++) {
            size_t sl = strlen(mangled[d][0]);
            if (len <= sl || strcmp(it->name + len - sl, mangled[d][0]) != 0)
                continue;
            char *base = strndup(it->name, len - sl);
            fe_item *k = base ? fe_sema_find_item(s, base) : NULL;
            if (k && k->kind == IT_KERNEL)
                fe_sema_error(s, it->name_loc,
                              "kernel '%s' would have the symbols of '%s%s', derived from "
                              "kernel '%s' (line %u); rename it",
                              it->name, base, mangled[d][1], base, k->name_loc.line);
            free(base);
            break;
        }
    }
    /* (2) structs, consts, (3) bodies */
    fe_sema_build_structs(s);
    for (int i = 0; i < n; i++)
        if (file->items[i] && file->items[i]->kind == IT_CONST)
            fe_sema_resolve_const(s, file->items[i], file->items[i]->name_loc);
    for (int i = 0; i < n; i++)
        if (file->items[i] && file->items[i]->kind != IT_CONST &&
            file->items[i]->kind != IT_STRUCT)
            check_body(s, file->items[i]);
    fe_sema_check_grads(s);
    /* (4) the call graph: recursion, then (on a graph without cycles) the inline limits */
    int before_calls = ctx->diags.errors;
    check_recursion(s);
    if (ctx->diags.errors == before_calls)
        fe_sema_check_inlining(s);

    for (int i = 0; i < n; i++) {
        ptrvec_free(&s->info[i].calls);
        ptrvec_free(&s->info[i].sites);
        free(s->info[i].site_depth);
    }
    free(s->names);
    free(s->info);
    ptrvec_free(&s->locals);
    ptrvec_free(&s->const_stack);
    return ctx->diags.errors == errors;
}
