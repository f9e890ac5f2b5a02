/* lower_agg.c - lowering of the version-1 value types (vectors, matrices, quaternions,
 * structs, local arrays) to scalar IR: the IR never sees them (docs/architecture.md).
 *
 * Values. A value of such a type is its list of scalar leaves, in order: components,
 * matrix elements row by row, struct fields in declared order (recursively), local array
 * elements row-major. A variable of such a type is one hidden scalar symbol per leaf
 * (fe_sym.leaves), so the statement lowering carries exactly the leaves that a loop or an
 * if assigns, and the gradient pass sees plain scalars (a leaf overwritten in a loop goes to
 * an adstack like any scalar).
 *
 * Memory. An array parameter of such a type is, in the IR, an array of its component type
 * with trailing dimensions: (n) for a vector, (n, n) for a matrix, (words) for a struct (all
 * of whose leaves have one type, sema checks); a kernel parameter passed by value is such an
 * array of its own (no leading dimension). Element k of a value is at trailing index k.
 *
 * Places. An assignment target or a read of a part (`v.y`, `m[i][j]`, `ps[i].vel.x`,
 * `a[k]`) is a place: the root (a variable's leaf symbols, a computed value's leaves, or a
 * memory element) and the offset of the part in it, a constant plus a dynamic term. For a
 * matrix root the offset is a (row, column) pair, so that m[i][j] in memory indexes the two
 * trailing dimensions directly. A dynamic offset into leaves selects among every leaf it
 * may reach (compares and selects; constants fold them away), which is why local arrays are
 * small (FE_MAX_LOCAL_LEAVES in sema_agg.c). */
#include <stdlib.h>
#include <string.h>

#include "../runtime/abi.h"
#include "lower_impl.h"

/* ---- Types and leaf symbols ------------------------------------------------------------ */

static int trailing(const kern_type *t) { return t->kind == TY_MAT ? 2 : 1; }

const kern_type *lw_ir_type(const kern_type *t) {
    if (ty_is_array(t) && ty_is_aggregate(t->elem))
        return ty_array(ty_storage_leaf(t->elem), t->rank + trailing(t->elem));
    if (ty_is_aggregate(t))
        return ty_array(ty_storage_leaf(t), trailing(t));
    return t;
}

static void view_name(kern_buf *b, const kern_type *t) {
    if (ty_is_array(t)) {
        view_name(b, t->elem);
        buf_printf(b, "[%.*s]", t->rank - 1, ",,,");
    } else if (t->kind == TY_STRUCT) {
        buf_printf(b, "%s{", t->name);
        for (int i = 0; i < t->nfields; i++) {
            buf_printf(b, "%s%s:", i ? "," : "", t->fields[i].name);
            view_name(b, t->fields[i].type);
        }
        buf_puts(b, "}");
    } else {
        buf_puts(b, t->name);
    }
}

void lw_param_view(lw *L, const kern_type *t, ir_param *p) {
    const kern_type *e = ty_is_array(t) ? t->elem : t;
    if (!ty_is_aggregate(e))
        return;
    kern_buf b = {0};
    view_name(&b, t);
    p->view = arena_strdup(&L->m->mem, b.data);
    buf_free(&b);
    if (e->kind == TY_MAT) {
        p->ntail = 2;
        p->tail[0] = p->tail[1] = e->n;
    } else {
        p->ntail = 1;
        p->tail[0] = ty_leaves(e);
    }
}

fe_sym **lw_leaf_syms(lw *L, fe_sym *s) {
    if (s->leaves)
        return s->leaves;
    int n = ty_leaves(s->type);
    s->leaves = ARENA_ARRAY(&L->ctx->mem, fe_sym *, n);
    for (int i = 0; i < n; i++) {
        fe_sym *x = ARENA_NEW(&L->ctx->mem, fe_sym);
        x->kind = SYM_LOCAL;
        x->name = s->name;
        x->type = ty_leaf_type(s->type, i);
        x->is_mutable = s->is_mutable;
        s->leaves[i] = x;
    }
    return s->leaves;
}

/* A by-value parameter of a kernel: its leaves are loaded from an IR array. */
static bool kernel_value_param(const fe_sym *s) {
    return s->kind == SYM_PARAM && s->owner && s->owner->kind == IT_KERNEL &&
           ty_is_aggregate(s->type);
}

static ir_value *conv(lw *L, ir_value *v, const kern_type *to) {
    return v->type == to ? v : ir_cast(&L->b, to, v);
}

static ir_value *cint(lw *L, int64_t v) { return ir_const_int(&L->b, ty_i32(), v); }

static ir_value *ir_unop_typed(lw *L, ir_opcode code, const kern_type *t, ir_value *v) {
    return ir_build(&L->b, code, &v, 1, &t, 1, 0)->results[0];
}

static ir_value *as_i32(lw *L, ir_value *v) { return conv(L, v, ty_i32()); }

void lw_zero_leaves(lw *L, const kern_type *t, ir_value **out) {
    for (int i = 0; i < ty_leaves(t); i++)
        out[i] = lw_zero(L, ty_leaf_type(t, i));
}

/* ---- Places -------------------------------------------------------------------------- */

typedef struct lw_place {
    const kern_type *root; /* the type of the whole value */
    const kern_type *type; /* the type of the part */
    fe_sym **syms;         /* a variable's leaves */
    ir_value **vals;       /* or a computed value's leaves */
    ir_value *arr;         /* or memory: the IR array and the element's indices */
    ir_value *idx[KERN_MAX_RANK];
    int nidx;
    bool mem;
    /* the part's offset: [0] (and for a matrix root, [1] the column) */
    int k[2];
    ir_value *d[2];
    int dmax[2];
} lw_place;

static void add_offset(lw *L, lw_place *p, int axis, ir_value *dyn, int konst, int stride,
                       int extent) {
    if (!dyn) {
        p->k[axis] += konst * stride;
        return;
    }
    ir_value *t = as_i32(L, dyn);
    if (stride != 1)
        t = ir_binop(&L->b, IR_MUL, t, cint(L, stride));
    p->d[axis] = p->d[axis] ? ir_binop(&L->b, IR_ADD, p->d[axis], t) : t;
    p->dmax[axis] += (extent - 1) * stride;
}

/* The index value: its constant when sema folded it (then *dyn is NULL). A dynamic index
 * into a value (not memory) is checked in debug builds, as array indices are: a `check`
 * op records KERN_DEVERR_BOUNDS; in release builds an index out of range reads one of the
 * value's leaves and writes none (undefined, docs/reference.md). Memory roots get the
 * load's and store's own bounds checks. */
static int index_value(lw *L, const lw_place *p, const fe_expr *ix, int extent, ir_value **dyn) {
    if (ix->is_const) {
        *dyn = NULL;
        return (int)ix->cval.i;
    }
    *dyn = lw_expr(L, ix);
    if (kc_checks(&L->ctx->opts) && !p->mem) {
        const kern_type *t = (*dyn)->type;
        ir_value *ok = ir_binop(&L->b, IR_LT, *dyn, ir_const_int(&L->b, t, extent));
        if (!ty_is_unsigned(t))
            ok = ir_binop(&L->b, IR_AND, ir_binop(&L->b, IR_GE, *dyn, ir_const_int(&L->b, t, 0)),
                          ok);
        ir_value *ops[3] = {ok, conv(L, *dyn, ty_i64()), ir_const_int(&L->b, ty_i64(), extent)};
        ir_build(&L->b, IR_CHECK, ops, 3, NULL, 0, 0)->imm.i = KERN_DEVERR_BOUNDS;
    }
    return 0;
}

/* Selects the part at index idx[0..n) of the current part (vector component, matrix row or
 * element, local array element). */
static void index_step(lw *L, lw_place *p, fe_expr *const *idx, int n) {
    const kern_type *t = p->type;
    bool matroot = p->root->kind == TY_MAT;
    ir_value *dyn;
    switch (t->kind) {
    case TY_VEC: {
        int k = index_value(L, p, idx[0], t->n, &dyn);
        add_offset(L, p, matroot ? 1 : 0, dyn, k, 1, t->n);
        p->type = t->elem;
        return;
    }
    case TY_MAT: {
        int k = index_value(L, p, idx[0], t->n, &dyn);
        add_offset(L, p, 0, dyn, k, matroot ? 1 : t->n, t->n);
        p->type = ty_vec(t->elem, t->n);
        if (n == 2) {
            k = index_value(L, p, idx[1], t->n, &dyn);
            add_offset(L, p, matroot ? 1 : 0, dyn, k, 1, t->n);
            p->type = t->elem;
        }
        return;
    }
    case TY_LOCAL: {
        int stride = ty_leaves(t->elem);
        for (int i = t->rank - 1; i >= 0; i--) {
            int k = index_value(L, p, idx[i], t->dims[i], &dyn);
            add_offset(L, p, 0, dyn, k, stride, t->dims[i]);
            stride *= t->dims[i];
        }
        p->type = t->elem;
        return;
    }
    default: kern_unreachable("index of a value type");
    }
}

static void member_step(lw *L, lw_place *p, const fe_expr *e) {
    const kern_type *t = p->type;
    if (t->kind == TY_VEC) {
        add_offset(L, p, p->root->kind == TY_MAT ? 1 : 0, NULL, e->member.index, 1, t->n);
        p->type = t->elem;
        return;
    }
    kern_assert(t->kind == TY_STRUCT);
    const kern_field *f = &t->fields[e->member.index];
    p->k[0] += f->leaf;
    p->type = f->type;
}

static void root_value(lw *L, lw_place *p, const fe_expr *e) {
    memset(p, 0, sizeof *p);
    p->root = p->type = e->type;
    p->vals = ARENA_ARRAY(&L->ctx->mem, ir_value *, ty_leaves(e->type));
    lw_agg(L, e, p->vals);
}

static void place_of(lw *L, const fe_expr *e, lw_place *p) {
    switch (e->kind) {
    case EX_NAME: {
        fe_sym *s = e->name.sym;
        memset(p, 0, sizeof *p);
        p->root = p->type = s->type;
        if (kernel_value_param(s)) {
            p->mem = true;
            p->arr = lw_get(s);
        } else {
            p->syms = lw_leaf_syms(L, s);
        }
        return;
    }
    case EX_INDEX: {
        fe_sym *s = e->index.sym;
        memset(p, 0, sizeof *p);
        if (ty_is_array(s->type)) {
            p->root = p->type = s->type->elem;
            p->mem = true;
            p->arr = lw_get(s);
            for (int i = 0; i < e->index.nidx; i++)
                p->idx[i] = lw_expr(L, e->index.idx[i]);
            p->nidx = e->index.nidx;
            return;
        }
        fe_expr name = {.kind = EX_NAME, .loc = e->loc, .type = s->type};
        name.name.name = s->name;
        name.name.sym = s;
        place_of(L, &name, p);
        index_step(L, p, e->index.idx, e->index.nidx);
        return;
    }
    case EX_MEMBER:
        if (ty_is_aggregate(e->member.base->type) && e->member.base->kind != EX_NAME &&
            e->member.base->kind != EX_INDEX && e->member.base->kind != EX_MEMBER &&
            e->member.base->kind != EX_ELEM)
            root_value(L, p, e->member.base);
        else
            place_of(L, e->member.base, p);
        member_step(L, p, e);
        return;
    case EX_ELEM:
        if (e->elem.base->kind != EX_NAME && e->elem.base->kind != EX_INDEX &&
            e->elem.base->kind != EX_MEMBER && e->elem.base->kind != EX_ELEM)
            root_value(L, p, e->elem.base);
        else
            place_of(L, e->elem.base, p);
        index_step(L, p, e->elem.idx, e->elem.nidx);
        return;
    default: root_value(L, p, e); return;
    }
}

static ir_value *offset_value(lw *L, int k, ir_value *d) {
    ir_value *c = cint(L, k);
    if (!d)
        return c;
    return k ? ir_binop(&L->b, IR_ADD, d, c) : d;
}

/* The trailing indices of leaf l of the part in memory. */
static int mem_indices(lw *L, const lw_place *p, int l, ir_value **out) {
    int n = p->nidx;
    memcpy(out, p->idx, sizeof(ir_value *) * (size_t)n);
    if (p->root->kind == TY_MAT) {
        int dim = p->root->n, r = 0, c = 0;
        if (p->type->kind == TY_MAT) {
            r = l / dim;
            c = l % dim;
        } else if (p->type->kind == TY_VEC) {
            c = l;
        }
        out[n++] = offset_value(L, p->k[0] + r, p->d[0]);
        out[n++] = offset_value(L, p->k[1] + c, p->d[1]);
    } else {
        out[n++] = offset_value(L, p->k[0] + l, p->d[0]);
    }
    return n;
}

/* The linear leaf offset of the part in a value root: constant and dynamic. */
static int leaf_offset(lw *L, const lw_place *p, ir_value **dyn, int *dmax) {
    if (p->root->kind == TY_MAT) {
        int n = p->root->n;
        ir_value *d = NULL;
        if (p->d[0])
            d = ir_binop(&L->b, IR_MUL, p->d[0], cint(L, n));
        if (p->d[1])
            d = d ? ir_binop(&L->b, IR_ADD, d, p->d[1]) : p->d[1];
        *dyn = d;
        *dmax = p->dmax[0] * n + p->dmax[1];
        return p->k[0] * n + p->k[1];
    }
    *dyn = p->d[0];
    *dmax = p->dmax[0];
    return p->k[0];
}

static ir_value *root_leaf(const lw_place *p, int i) {
    if (p->syms) {
        ir_value *v = lw_get(p->syms[i]);
        kern_assert(v != NULL);
        return v;
    }
    return p->vals[i];
}

static void read_place(lw *L, const lw_place *p, ir_value **out) {
    int n = ty_leaves(p->type);
    if (p->mem) {
        for (int l = 0; l < n; l++) {
            ir_value *ix[KERN_MAX_RANK + 2];
            int ni = mem_indices(L, p, l, ix);
            out[l] = ir_load(&L->b, p->arr, ix, (uint32_t)ni);
            const kern_type *want = ty_leaf_type(p->type, l);
            if (out[l]->type != want) /* an i32 field of a struct stored as f32 words */
                out[l] = ir_unop_typed(L, IR_BITCAST, want, out[l]);
        }
        return;
    }
    ir_value *dyn;
    int dmax, base = leaf_offset(L, p, &dyn, &dmax), total = ty_leaves(p->root);
    for (int l = 0; l < n; l++) {
        ir_value *v = root_leaf(p, base + l);
        for (int c = 1; dyn && c <= dmax && base + c + l < total; c++)
            v = ir_select(&L->b, ir_binop(&L->b, IR_EQ, dyn, cint(L, c)), root_leaf(p, base + c + l),
                          v);
        out[l] = v;
    }
}

/* Writes vals into the part: stores, or atomic adds / subs (code) in memory. */
static void write_place(lw *L, const lw_place *p, ir_value *const *vals, ir_opcode code) {
    int n = ty_leaves(p->type);
    if (p->mem) {
        for (int l = 0; l < n; l++) {
            ir_value *ix[KERN_MAX_RANK + 2];
            int ni = mem_indices(L, p, l, ix);
            const kern_type *word = p->arr->type->elem;
            if (code == IR_STORE)
                ir_store(&L->b, p->arr, ix, (uint32_t)ni,
                         vals[l]->type == word ? vals[l] : ir_unop_typed(L, IR_BITCAST, word, vals[l]));
            else
                ir_atomic(&L->b, code, p->arr, ix, (uint32_t)ni, vals[l]);
        }
        return;
    }
    kern_assert(p->syms && code == IR_STORE);
    ir_value *dyn;
    int dmax, base = leaf_offset(L, p, &dyn, &dmax), total = ty_leaves(p->root);
    if (!dyn) {
        for (int l = 0; l < n; l++)
            lw_set(p->syms[base + l], vals[l]);
        return;
    }
    for (int c = 0; c <= dmax; c++) {
        if (base + c + n > total)
            break;
        ir_value *hit = ir_binop(&L->b, IR_EQ, dyn, cint(L, c));
        for (int l = 0; l < n; l++) {
            fe_sym *x = p->syms[base + c + l];
            lw_set(x, ir_select(&L->b, hit, vals[l], lw_get(x)));
        }
    }
}

/* ---- Operators ------------------------------------------------------------------------ */

static ir_value *sum_products(lw *L, ir_value *const *a, int as, ir_value *const *b, int bs,
                              int n) {
    ir_value *acc = ir_binop(&L->b, IR_MUL, a[0], b[0]);
    for (int i = 1; i < n; i++)
        acc = ir_binop(&L->b, IR_ADD, acc, ir_binop(&L->b, IR_MUL, a[i * as], b[i * bs]));
    return acc;
}


static void quat_mul(lw *L, ir_value *const *a, ir_value *const *b, ir_value **out) {
    ir_builder *B = &L->b;
#define M(x, y) ir_binop(B, IR_MUL, x, y)
#define A(x, y) ir_binop(B, IR_ADD, x, y)
#define S(x, y) ir_binop(B, IR_SUB, x, y)
    ir_value *x1 = a[0], *y1 = a[1], *z1 = a[2], *w1 = a[3];
    ir_value *x2 = b[0], *y2 = b[1], *z2 = b[2], *w2 = b[3];
    out[0] = S(A(A(M(w1, x2), M(x1, w2)), M(y1, z2)), M(z1, y2));
    out[1] = A(A(S(M(w1, y2), M(x1, z2)), M(y1, w2)), M(z1, x2));
    out[2] = A(S(A(M(w1, z2), M(x1, y2)), M(y1, x2)), M(z1, w2));
    out[3] = S(S(S(M(w1, w2), M(x1, x2)), M(y1, y2)), M(z1, z2));
#undef M
#undef A
#undef S
}

/* lt op rt on leaves a and b (a scalar side has one leaf); writes the result's leaves. */
static void binary_leaves(lw *L, fe_binop op, const kern_type *lt, ir_value *const *a,
                          const kern_type *rt, ir_value *const *b, ir_value **out) {
    bool la = ty_is_aggregate(lt), ra = ty_is_aggregate(rt);
    if (op == BIN_EQ || op == BIN_NE) {
        ir_value *acc = NULL;
        for (int i = 0; i < ty_leaves(lt); i++) {
            ir_value *c = ir_binop(&L->b, op == BIN_EQ ? IR_EQ : IR_NE, a[i], b[i]);
            acc = !acc ? c : ir_binop(&L->b, op == BIN_EQ ? IR_AND : IR_OR, acc, c);
        }
        out[0] = acc;
        return;
    }
    if (op == BIN_MUL && la && ra) {
        if (lt->kind == TY_MAT && rt->kind == TY_VEC) {
            int n = lt->n;
            for (int r = 0; r < n; r++)
                out[r] = sum_products(L, a + r * n, 1, b, 1, n);
            return;
        }
        if (lt->kind == TY_VEC && rt->kind == TY_MAT) {
            int n = rt->n;
            for (int c = 0; c < n; c++)
                out[c] = sum_products(L, a, 1, b + c, n, n);
            return;
        }
        if (lt->kind == TY_MAT) {
            int n = lt->n;
            for (int r = 0; r < n; r++)
                for (int c = 0; c < n; c++)
                    out[r * n + c] = sum_products(L, a + r * n, 1, b + c, n, n);
            return;
        }
        if (lt->quat) {
            quat_mul(L, a, b, out);
            return;
        }
    }
    const kern_type *t = la ? lt : rt;
    for (int i = 0; i < ty_leaves(t); i++)
        out[i] = ir_binop(&L->b, lw_binop_code(op), a[la ? i : 0], b[ra ? i : 0]);
}

/* ---- Builtins ------------------------------------------------------------------------- */

static ir_value *fconst(lw *L, const kern_type *t, double v) { return ir_const_float(&L->b, t, v); }

/* The determinant of the n x n matrix m[rows[i] * stride + cols[j]]. */
static ir_value *det(lw *L, ir_value *const *m, int stride, const int *rows, const int *cols,
                     int n) {
    ir_builder *B = &L->b;
    if (n == 1)
        return m[rows[0] * stride + cols[0]];
    if (n == 2)
        return ir_binop(B, IR_SUB,
                        ir_binop(B, IR_MUL, m[rows[0] * stride + cols[0]], m[rows[1] * stride + cols[1]]),
                        ir_binop(B, IR_MUL, m[rows[0] * stride + cols[1]], m[rows[1] * stride + cols[0]]));
    ir_value *acc = NULL;
    for (int j = 0; j < n; j++) {
        int sub[4], k = 0;
        for (int c = 0; c < n; c++)
            if (c != j)
                sub[k++] = cols[c];
        ir_value *t = ir_binop(B, IR_MUL, m[rows[0] * stride + cols[j]], det(L, m, stride, rows + 1, sub, n - 1));
        acc = !acc ? t : ir_binop(B, j % 2 ? IR_SUB : IR_ADD, acc, t);
    }
    return acc;
}

static void inverse(lw *L, const kern_type *t, ir_value *const *m, ir_value **out) {
    int n = t->n, all[4] = {0, 1, 2, 3};
    ir_value *d = det(L, m, n, all, all, n);
    ir_value *inv = ir_binop(&L->b, IR_DIV, fconst(L, t->elem, 1.0), d);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            /* out[i][j] = cofactor(j, i) / det */
            int rows[4], cols[4], r = 0, c = 0;
            for (int k = 0; k < n; k++) {
                if (k != j)
                    rows[r++] = k;
                if (k != i)
                    cols[c++] = k;
            }
            ir_value *cof = det(L, m, n, rows, cols, n - 1);
            if ((i + j) % 2)
                cof = ir_unop(&L->b, IR_NEG, cof);
            out[i * n + j] = ir_binop(&L->b, IR_MUL, cof, inv);
        }
}

static void cross3(lw *L, ir_value *const *a, ir_value *const *b, ir_value **out) {
    ir_builder *B = &L->b;
    for (int i = 0; i < 3; i++) {
        int j = (i + 1) % 3, k = (i + 2) % 3;
        out[i] = ir_binop(B, IR_SUB, ir_binop(B, IR_MUL, a[j], b[k]), ir_binop(B, IR_MUL, a[k], b[j]));
    }
}

static int vector_builtin(lw *L, const fe_expr *e, ir_value **out) {
    fe_builtin bi = e->call.builtin;
    ir_value *a[16], *b[16];
    const kern_type *t0 = e->call.nargs > 0 ? e->call.args[0]->type : NULL;
    const kern_type *rt = e->type;
    if (e->call.nargs > 0)
        lw_agg(L, e->call.args[0], a);
    if (e->call.nargs > 1)
        lw_agg(L, e->call.args[1], b);
    L->b.loc = e->loc;
    ir_builder *B = &L->b;
    switch (bi) {
    case BI_IDENTITY2:
    case BI_IDENTITY3:
    case BI_IDENTITY4:
    case BI_DIAG: {
        int n = rt->n;
        for (int i = 0; i < n * n; i++)
            out[i] = i % (n + 1) == 0 ? (bi == BI_DIAG ? a[i / (n + 1)] : fconst(L, rt->elem, 1.0))
                                      : fconst(L, rt->elem, 0.0);
        return n * n;
    }
    case BI_DOT: out[0] = sum_products(L, a, 1, b, 1, t0->n); return 1;
    case BI_LENGTH_SQ: out[0] = sum_products(L, a, 1, a, 1, t0->n); return 1;
    case BI_LENGTH: out[0] = ir_unop(B, IR_SQRT, sum_products(L, a, 1, a, 1, t0->n)); return 1;
    case BI_NORMALIZE: {
        ir_value *len = ir_unop(B, IR_SQRT, sum_products(L, a, 1, a, 1, t0->n));
        for (int i = 0; i < t0->n; i++)
            out[i] = ir_binop(B, IR_DIV, a[i], len);
        return t0->n;
    }
    case BI_CROSS: cross3(L, a, b, out); return 3;
    case BI_OUTER: {
        int n = t0->n;
        for (int r = 0; r < n; r++)
            for (int c = 0; c < n; c++)
                out[r * n + c] = ir_binop(B, IR_MUL, a[r], b[c]);
        return n * n;
    }
    case BI_TRANSPOSE: {
        int n = t0->n;
        for (int r = 0; r < n; r++)
            for (int c = 0; c < n; c++)
                out[r * n + c] = a[c * n + r];
        return n * n;
    }
    case BI_CMUL:
        for (int i = 0; i < ty_leaves(t0); i++)
            out[i] = ir_binop(B, IR_MUL, a[i], b[i]);
        return ty_leaves(t0);
    case BI_TRACE: {
        ir_value *acc = a[0];
        for (int i = 1; i < t0->n; i++)
            acc = ir_binop(B, IR_ADD, acc, a[i * (t0->n + 1)]);
        out[0] = acc;
        return 1;
    }
    case BI_DETERMINANT: {
        int all[4] = {0, 1, 2, 3};
        out[0] = det(L, a, t0->n, all, all, t0->n);
        return 1;
    }
    case BI_INVERSE: inverse(L, t0, a, out); return ty_leaves(t0);
    case BI_CONJUGATE:
        for (int i = 0; i < 3; i++)
            out[i] = ir_unop(B, IR_NEG, a[i]);
        out[3] = a[3];
        return 4;
    case BI_QUAT_ROTATE: {
        /* v' = v + w t + u x t, t = 2 (u x v), u = (x, y, z): q a unit quaternion */
        ir_value *uv[3], *t[3], *ut[3], *two = fconst(L, t0->elem, 2.0);
        cross3(L, a, b, uv);
        for (int i = 0; i < 3; i++)
            t[i] = ir_binop(B, IR_MUL, two, uv[i]);
        cross3(L, a, t, ut);
        for (int i = 0; i < 3; i++)
            out[i] = ir_binop(B, IR_ADD, ir_binop(B, IR_ADD, b[i], ir_binop(B, IR_MUL, a[3], t[i])), ut[i]);
        return 3;
    }
    case BI_QUAT_FROM_AXIS_ANGLE: {
        const kern_type *ft = t0->elem;
        ir_value *half = ir_binop(B, IR_MUL, b[0], fconst(L, ft, 0.5));
        ir_value *s = ir_unop(B, IR_SIN, half);
        for (int i = 0; i < 3; i++)
            out[i] = ir_binop(B, IR_MUL, a[i], s);
        out[3] = ir_unop(B, IR_COS, half);
        return 4;
    }
    case BI_QUAT_TO_MAT3: {
        const kern_type *ft = t0->elem;
        ir_value *x = a[0], *y = a[1], *z = a[2], *w = a[3], *one = fconst(L, ft, 1.0),
                 *two = fconst(L, ft, 2.0);
#define M(p, q) ir_binop(B, IR_MUL, p, q)
#define T2(v) ir_binop(B, IR_MUL, two, v)
#define A(p, q) ir_binop(B, IR_ADD, p, q)
#define S(p, q) ir_binop(B, IR_SUB, p, q)
        out[0] = S(one, T2(A(M(y, y), M(z, z))));
        out[1] = T2(S(M(x, y), M(z, w)));
        out[2] = T2(A(M(x, z), M(y, w)));
        out[3] = T2(A(M(x, y), M(z, w)));
        out[4] = S(one, T2(A(M(x, x), M(z, z))));
        out[5] = T2(S(M(y, z), M(x, w)));
        out[6] = T2(S(M(x, z), M(y, w)));
        out[7] = T2(A(M(y, z), M(x, w)));
        out[8] = S(one, T2(A(M(x, x), M(y, y))));
#undef M
#undef T2
#undef A
#undef S
        return 9;
    }
    default: kern_unreachable("vector builtin");
    }
}

static int componentwise(lw *L, const fe_expr *e, ir_value **out) {
    int n = ty_leaves(e->type), na = e->call.nargs;
    ir_value *args[3][16];
    bool agg[3];
    for (int i = 0; i < na; i++) {
        agg[i] = ty_is_aggregate(e->call.args[i]->type);
        lw_agg(L, e->call.args[i], args[i]);
    }
    L->b.loc = e->loc;
    for (int l = 0; l < n; l++) {
        ir_value *v[3];
        for (int i = 0; i < na; i++)
            v[i] = args[i][agg[i] ? l : 0];
        out[l] = lw_scalar_builtin(L, e->call.builtin, v, na);
    }
    return n;
}

/* ---- Expressions ------------------------------------------------------------------------ */

bool fe_expr_is_memory_part(const fe_expr *e) {
    while (e->kind == EX_MEMBER || e->kind == EX_ELEM)
        e = e->kind == EX_MEMBER ? e->member.base : e->elem.base;
    return e->kind == EX_INDEX && e->index.sym && e->index.sym->type &&
           ty_is_array(e->index.sym->type);
}

bool lw_is_agg_expr(const fe_expr *e) {
    if (ty_is_aggregate(e->type))
        return true;
    switch (e->kind) {
    case EX_MEMBER:
    case EX_ELEM: return true;
    case EX_INDEX: return e->index.sym && !ty_is_array(e->index.sym->type);
    case EX_BINARY: return ty_is_aggregate(e->binary.lhs->type) || ty_is_aggregate(e->binary.rhs->type);
    case EX_CALL:
        if (fe_builtin_overridable(e->call.builtin))
            return true;
        for (int i = 0; i < e->call.nargs; i++)
            if (e->call.args[i]->type && ty_is_aggregate(e->call.args[i]->type))
                return e->call.builtin != BI_NONE;
        return false;
    default: return false;
    }
}

static int cond_leaves(lw *L, const fe_expr *e, const fe_expr *c, const fe_expr *a,
                       const fe_expr *b, ir_value **out) {
    int n = ty_leaves(e->type);
    ir_value *cv = lw_expr(L, c);
    if (lw_expr_is_safe(a) && lw_expr_is_safe(b)) {
        ir_value **x = kern_xmalloc(sizeof(ir_value *) * (size_t)n * 2), **y = x + n;
        lw_agg(L, a, x);
        lw_agg(L, b, y);
        L->b.loc = e->loc;
        for (int i = 0; i < n; i++)
            out[i] = ir_select(&L->b, cv, x[i], y[i]);
        free(x);
        return n;
    }
    const kern_type **types = kern_xmalloc(sizeof(kern_type *) * (size_t)n);
    ir_value **v = kern_xmalloc(sizeof(ir_value *) * (size_t)n);
    for (int i = 0; i < n; i++)
        types[i] = ty_leaf_type(e->type, i);
    L->b.loc = e->loc;
    ir_op *op = ir_if(&L->b, cv, types, (uint32_t)n);
    ir_builder saved = L->b;
    for (int r = 0; r < 2; r++) {
        L->b = ir_builder_at_end(L->m, op->regions[r]);
        lw_agg(L, r == 0 ? a : b, v);
        L->b.loc = e->loc;
        ir_yield(&L->b, v, (uint32_t)n);
    }
    L->b = saved;
    for (int i = 0; i < n; i++)
        out[i] = op->results[i];
    free(types);
    free(v);
    return n;
}

static int construct(lw *L, const fe_expr *e, ir_value **out) {
    const kern_type *to = e->cons.to, *c = to->elem;
    int n = ty_leaves(to);
    const fe_expr *a0 = e->cons.args[0];
    ir_value *tmp[16];
    if (e->cons.nargs == 1 && ty_is_scalar(a0->type)) {
        ir_value *s = lw_expr(L, a0);
        L->b.loc = e->loc;
        s = conv(L, s, c);
        for (int i = 0; i < n; i++)
            out[i] = to->kind == TY_MAT && i % (to->n + 1) != 0 ? lw_zero(L, c) : s;
        return n;
    }
    int k = 0;
    for (int i = 0; i < e->cons.nargs; i++) {
        int m = lw_agg(L, e->cons.args[i], tmp);
        L->b.loc = e->loc;
        for (int j = 0; j < m && k < n; j++)
            out[k++] = conv(L, tmp[j], c);
    }
    kern_assert(k == n);
    return n;
}

int lw_agg(lw *L, const fe_expr *e, ir_value **out) {
    if (!lw_is_agg_expr(e) || e->is_const) {
        out[0] = lw_expr(L, e);
        return 1;
    }
    switch (e->kind) {
    case EX_NAME:
    case EX_INDEX:
    case EX_MEMBER:
    case EX_ELEM: {
        lw_place p;
        place_of(L, e, &p);
        L->b.loc = e->loc;
        read_place(L, &p, out);
        return ty_leaves(e->type);
    }
    case EX_CONSTRUCT: return construct(L, e, out);
    case EX_STRUCTLIT: {
        const kern_type *t = e->type;
        for (int f = 0; f < t->nfields; f++)
            for (int i = 0; i < e->slit.n; i++)
                if (!strcmp(e->slit.fields[i], t->fields[f].name))
                    lw_agg(L, e->slit.values[i], out + t->fields[f].leaf);
        return t->leaves;
    }
    case EX_ARRAYLIT: {
        int k = 0;
        for (int i = 0; i < e->alit.n; i++)
            k += lw_agg(L, e->alit.elems[i], out + k);
        return k;
    }
    case EX_UNARY: {
        int n = lw_agg(L, e->unary.arg, out);
        L->b.loc = e->loc;
        for (int i = 0; i < n; i++)
            out[i] = ir_unop(&L->b, IR_NEG, out[i]);
        return n;
    }
    case EX_BINARY: {
        const fe_expr *l = e->binary.lhs, *r = e->binary.rhs;
        int nl = ty_leaves(l->type), nr = ty_leaves(r->type);
        ir_value **a = kern_xmalloc(sizeof(ir_value *) * (size_t)(nl + nr));
        lw_agg(L, l, a);
        lw_agg(L, r, a + nl);
        L->b.loc = e->loc;
        binary_leaves(L, e->binary.op, l->type, a, r->type, a + nl, out);
        free(a);
        return ty_leaves(e->type);
    }
    case EX_COND: return cond_leaves(L, e, e->cond.cond, e->cond.a, e->cond.b, out);
    case EX_CALL:
        if (e->call.builtin == BI_NONE)
            return lw_call_func(L, e, out);
        if (fe_builtin_overridable(e->call.builtin))
            return vector_builtin(L, e, out);
        switch (e->call.builtin) {
        case BI_SELECT:
            return cond_leaves(L, e, e->call.args[0], e->call.args[1], e->call.args[2], out);
        case BI_ATOMIC_ADD:
        case BI_ATOMIC_SUB: {
            lw_place p;
            place_of(L, e->call.args[0], &p);
            int n = ty_leaves(p.type);
            ir_value *v[16];
            lw_agg(L, e->call.args[1], v);
            L->b.loc = e->loc;
            for (int l = 0; l < n; l++) {
                ir_value *ix[KERN_MAX_RANK + 2];
                int ni = mem_indices(L, &p, l, ix);
                out[l] = ir_atomic(&L->b, e->call.builtin == BI_ATOMIC_ADD ? IR_ATOMIC_ADD : IR_ATOMIC_SUB,
                                   p.arr, ix, (uint32_t)ni, v[l]);
            }
            return n;
        }
        default: return componentwise(L, e, out);
        }
    default: kern_unreachable("aggregate expression");
    }
}

ir_value *lw_agg_scalar(lw *L, const fe_expr *e) {
    ir_value *v[1];
    kern_assert(ty_leaves(e->type) == 1);
    lw_agg(L, e, v);
    return v[0];
}

/* ---- Statements ------------------------------------------------------------------------- */

void lw_decl_agg(lw *L, const fe_stmt *st) {
    fe_sym *s = st->decl.sym;
    fe_sym **leaves = lw_leaf_syms(L, s);
    int n = ty_leaves(s->type);
    ir_value **v = kern_xmalloc(sizeof(ir_value *) * (size_t)n);
    L->b.loc = st->loc;
    if (st->decl.init)
        lw_agg(L, st->decl.init, v);
    else
        lw_zero_leaves(L, s->type, v);
    for (int i = 0; i < n; i++)
        lw_set(leaves[i], v[i]);
    free(v);
}

bool lw_assign_is_agg(const fe_stmt *st) {
    const fe_expr *t = st->assign.target;
    if (t->kind == EX_MEMBER || t->kind == EX_ELEM || ty_is_aggregate(t->type))
        return true;
    return t->kind == EX_INDEX && !ty_is_array(t->index.sym->type);
}

void lw_assign_agg(lw *L, const fe_stmt *st) {
    const fe_expr *t = st->assign.target, *val = st->assign.value;
    lw_place p;
    place_of(L, t, &p);
    int n = ty_leaves(p.type), nv = ty_leaves(val->type);
    ir_value **v = kern_xmalloc(sizeof(ir_value *) * (size_t)(2 * n + nv + 1));
    ir_value **old = v + nv, **res = old + n;
    lw_agg(L, val, v);
    L->b.loc = st->assign.op_loc;
    fe_assign_op op = st->assign.op;
    if (op == AS_SET) {
        write_place(L, &p, v, IR_STORE);
    } else if (p.mem && (op == AS_ADD || op == AS_SUB)) {
        /* += and -= on array elements are atomic, component by component */
        for (int i = 0; i < n; i++)
            res[i] = v[nv == n ? i : 0];
        write_place(L, &p, res, op == AS_ADD ? IR_ATOMIC_ADD : IR_ATOMIC_SUB);
    } else {
        static const fe_binop bin[] = {[AS_ADD] = BIN_ADD, [AS_SUB] = BIN_SUB,
                                       [AS_MUL] = BIN_MUL, [AS_DIV] = BIN_DIV};
        read_place(L, &p, old);
        binary_leaves(L, bin[op], p.type, old, val->type, v, res);
        write_place(L, &p, res, IR_STORE);
    }
    free(v);
}

/* The leaf symbols a statement assigns through its target (all the leaves of the root
 * variable: a dynamic index may reach any of them). */
fe_sym *lw_assign_root(const fe_stmt *st) {
    const fe_expr *e = st->assign.target;
    while (e->kind == EX_MEMBER || e->kind == EX_ELEM)
        e = e->kind == EX_MEMBER ? e->member.base : e->elem.base;
    if (e->kind == EX_NAME)
        return e->name.sym;
    if (e->kind == EX_INDEX && !ty_is_array(e->index.sym->type))
        return e->index.sym;
    return NULL;
}
