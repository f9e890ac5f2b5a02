/* sema_agg.c - typing of the version-1 value types (docs/reference.md section 11): vectors,
 * matrices and quaternions, structs, local arrays; their constructors, literals, component
 * and field access, operators and builtins.
 *
 * Types. A struct item becomes one kern_type (TY_STRUCT) in the context's arena, with its
 * four array types, built on first use so that items may come in any order, after the
 * structs it holds (depth first, on a stack of its own); a struct that contains itself is
 * an error, as are more than FE_MAX_STRUCT_LEAVES scalars in one struct and structs nested
 * more than FE_MAX_STRUCT_DEPTH deep. A local array type (TY_LOCAL) is made per declaration and
 * compared structurally (fe_sema_same_type). The parser's placeholders (TY_NAMED, a
 * TY_LOCAL whose extents are still expressions) are resolved by fe_sema_type.
 *
 * Values of these types are never constants (cval is scalar): folding stops at them, and
 * starts again at a component of a constant operand only through the lowering's folder.
 *
 * Operators (section 11.1): + - * / % component-wise between two values of one vector,
 * matrix or quaternion type, and with a scalar on either side (converted to the component
 * type); m * v, v * m, m * n are products, q * r the quaternion product; == and != compare
 * every component. Component-wise builtins take values of one such type and scalars. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sema.h"

enum {
    /* the scalar leaves a local array may hold: the lowering keeps each in its own SSA
     * value and selects among them for a dynamic index (docs/reference.md, local arrays) */
    FE_MAX_LOCAL_LEAVES = 256,
    /* the scalars of one struct: its layout fits an int, and a parameter's metadata
     * (its TAIL, docs/runtime.md) stays below the runtime's bound of 10^6 */
    FE_MAX_STRUCT_LEAVES = 65536,
    /* structs inside structs: the type's name, its view and every walk over its fields
     * recurse this deep at most */
    FE_MAX_STRUCT_DEPTH = 64,
};

/* ---- Types -------------------------------------------------------------------------- */

static int scalar_size(const kern_type *t) { return ty_size(t); }

/* The alignment of a field of type t (section 11.2: the size of its component type). */
static int field_align(const kern_type *t) {
    if (t->kind == TY_STRUCT)
        return t->align;
    return scalar_size(ty_is_scalar(t) ? t : t->elem);
}

static int value_size(const kern_type *t) {
    switch (t->kind) {
    case TY_STRUCT: return t->size;
    case TY_VEC:
    case TY_MAT: return ty_leaves(t) * scalar_size(t->elem);
    default: return scalar_size(t);
    }
}

static kern_type *build_struct(fe_sema *s, fe_item *it);

static const kern_type *resolve_named(fe_sema *s, const kern_type *t, kern_loc loc) {
    fe_item *it = fe_sema_find_item(s, t->name);
    if (!it) {
        const char *sug = fe_sema_suggest(s, t->name, false);
        if (sug)
            fe_sema_error(s, loc, "unknown type '%s'; did you mean '%s'?", t->name, sug);
        else
            fe_sema_error(s, loc, "unknown type '%s'", t->name);
        return NULL;
    }
    if (it->kind != IT_STRUCT) {
        fe_sema_error(s, loc, "'%s' is a %s, not a type", t->name,
                      it->kind == IT_FUNC ? "func" : it->kind == IT_KERNEL ? "kernel" : "const");
        return NULL;
    }
    return build_struct(s, it);
}

bool fe_sema_same_type(const kern_type *a, const kern_type *b) {
    if (a == b)
        return true;
    if (!a || !b || a->kind != TY_LOCAL || b->kind != TY_LOCAL || a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return fe_sema_same_type(a->elem, b->elem);
}

const kern_type *fe_sema_local_type(fe_sema *s, const kern_type *elem, int rank,
                                    const int *dims, kern_loc loc) {
    kern_type *t = ARENA_NEW(s->mem, kern_type);
    t->kind = TY_LOCAL;
    t->rank = (uint8_t)rank;
    t->elem = elem;
    int64_t leaves = ty_leaves(elem);
    kern_buf name = {0};
    buf_printf(&name, "%s[", elem->name);
    for (int i = 0; i < rank; i++) {
        t->dims[i] = dims[i];
        leaves *= dims[i];
        if (leaves > FE_MAX_LOCAL_LEAVES)
            leaves = FE_MAX_LOCAL_LEAVES + 1;
        buf_printf(&name, "%s%d", i ? ", " : "", dims[i]);
    }
    buf_puts(&name, "]");
    t->name = arena_strdup(s->mem, name.data);
    buf_free(&name);
    if (leaves > FE_MAX_LOCAL_LEAVES) {
        fe_sema_error(s, loc,
                      "local array %s holds more than %d scalars, the limit of a local array "
                      "(each is a register); use an array parameter",
                      t->name, FE_MAX_LOCAL_LEAVES);
        return NULL;
    }
    t->leaves = (int)leaves;
    return t;
}

static const kern_type *resolve_local(fe_sema *s, const kern_type *t, kern_loc loc) {
    const kern_type *elem = fe_sema_type(s, t->elem, loc);
    if (!elem)
        return NULL;
    if (!ty_is_scalar(elem) && elem->kind != TY_VEC && elem->kind != TY_MAT &&
        elem->kind != TY_STRUCT) {
        fe_sema_error(s, loc, "a local array holds scalars, vectors, matrices or structs, not %s",
                      elem->name);
        return NULL;
    }
    fe_expr **dx = (fe_expr **)t->pending;
    int dims[KERN_MAX_RANK];
    bool ok = true;
    for (int i = 0; i < t->rank; i++) {
        const kern_type *dt = fe_sema_value(s, &dx[i], ty_i32());
        if (!dt)
            return NULL;
        const fe_expr *d = dx[i];
        if (!ty_is_int(dt) || !d->is_const) {
            fe_sema_error(s, fe_sema_first_loc(d),
                          "the extent of a local array must be an integer constant");
            ok = false;
        } else if (d->cval.i < 1) {
            fe_sema_error(s, fe_sema_first_loc(d), "the extent of a local array must be at least 1, "
                                                   "got %lld",
                          (long long)d->cval.i);
            ok = false;
        } else {
            dims[i] = d->cval.i > FE_MAX_LOCAL_LEAVES ? FE_MAX_LOCAL_LEAVES + 1 : (int)d->cval.i;
        }
    }
    return ok ? fe_sema_local_type(s, elem, t->rank, dims, loc) : NULL;
}

const kern_type *fe_sema_type(fe_sema *s, const kern_type *t, kern_loc loc) {
    if (!t)
        return NULL;
    switch (t->kind) {
    case TY_NAMED: return resolve_named(s, t, loc);
    case TY_LOCAL: return t->pending ? resolve_local(s, t, loc) : t;
    case TY_ARRAY:
        if (t->elem->kind == TY_NAMED) {
            const kern_type *e = resolve_named(s, t->elem, loc);
            return e ? ty_array_of(e, t->rank) : NULL;
        }
        return t;
    default: return t;
    }
}

/* The struct item a field's type names (through an array or local array), or NULL. */
static fe_item *named_struct(fe_sema *s, const kern_type *t) {
    while (t && (t->kind == TY_ARRAY || t->kind == TY_LOCAL))
        t = t->elem;
    fe_item *it = t && t->kind == TY_NAMED ? fe_sema_find_item(s, t->name) : NULL;
    return it && it->kind == IT_STRUCT ? it : NULL;
}

/* The layout of struct it, whose fields' structs are built (state 2) or part of a cycle
 * (reported); sets it->stype, NULL on an error. */
static void lay_out_struct(fe_sema *s, fe_item *it) {
    fe_item_info *info = &s->info[fe_sema_item_index(s, it)];
    kern_type *t = ARENA_NEW(s->mem, kern_type);
    t->kind = TY_STRUCT;
    t->name = it->name;
    kern_field *fields = ARENA_ARRAY(s->mem, kern_field, it->nfields ? it->nfields : 1);
    bool ok = true;
    int64_t leaf = 0, offset = 0;
    int align = 1, depth = 1;
    for (int i = 0; i < it->nfields; i++) {
        const fe_field *f = &it->fields[i];
        for (int j = 0; j < i; j++)
            if (!strcmp(it->fields[j].name, f->name)) {
                fe_sema_error(s, f->loc, "struct '%s' has two fields named '%s'", it->name,
                              f->name);
                ok = false;
            }
        const kern_type *ft = fe_sema_type(s, f->type, f->loc);
        if (!ft) {
            ok = false;
            continue;
        }
        if (!ty_is_scalar(ft) && ft->kind != TY_VEC && ft->kind != TY_MAT &&
            ft->kind != TY_STRUCT) {
            fe_sema_error(s, f->loc,
                          "field '%s' of struct '%s' has type %s; a field is a scalar, vector, "
                          "matrix or struct (no arrays)",
                          f->name, it->name, ft->name);
            ok = false;
            continue;
        }
        int a = field_align(ft);
        offset = (offset + a - 1) / a * a;
        fields[i] = (kern_field){f->name, ft, (int)leaf, (int)offset};
        offset += value_size(ft);
        leaf += ty_leaves(ft);
        if (a > align)
            align = a;
        if (ft->kind == TY_STRUCT) {
            int d = 1 + s->info[fe_sema_item_index(s, named_struct(s, f->type))].depth;
            depth = d > depth ? d : depth;
        }
        if (leaf > FE_MAX_STRUCT_LEAVES) {
            fe_sema_error(s, f->loc,
                          "struct '%s' holds more than %d scalars (from field '%s' on), the "
                          "limit of a struct",
                          it->name, FE_MAX_STRUCT_LEAVES, f->name);
            ok = false;
            break;
        }
        if (depth > FE_MAX_STRUCT_DEPTH) {
            fe_sema_error(s, f->loc,
                          "struct '%s' nests structs %d deep (field '%s' of type %s), more than "
                          "the limit of %d",
                          it->name, depth, f->name, ft->name, FE_MAX_STRUCT_DEPTH);
            ok = false;
            break;
        }
    }
    info->state = 2;
    info->depth = depth;
    if (!ok || info->cyclic) {
        it->stype = NULL;
        return;
    }
    t->fields = fields;
    t->nfields = it->nfields;
    t->leaves = (int)leaf;
    t->align = align;
    t->size = (int)((offset + align - 1) / align * align);
    kern_type *arrays = ARENA_ARRAY(s->mem, kern_type, KERN_MAX_RANK);
    for (int r = 1; r <= KERN_MAX_RANK; r++) {
        arrays[r - 1].kind = TY_ARRAY;
        arrays[r - 1].rank = (uint8_t)r;
        arrays[r - 1].elem = t;
        arrays[r - 1].name = arena_printf(s->mem, "%s[%.*s]", it->name, r - 1, ",,,");
    }
    t->arrays = arrays;
    it->stype = t;
}

/* Builds struct `root` and the unbuilt structs its fields name, depth first, with a stack
 * of its own rather than recursion (a chain of 280,000 structs, each holding the next,
 * overflowed the C stack): a struct is laid out when every struct it holds is; one met
 * again while on the stack contains itself (an error at the field that names it). */
static void build_from(fe_sema *s, fe_item *root) {
    int n = s->file->nitems, sp = 0;
    int *stack = kern_xmalloc(sizeof *stack * (size_t)n);
    int *next_field = kern_xmalloc(sizeof *next_field * (size_t)n);
    int r = fe_sema_item_index(s, root);
    stack[sp++] = r;
    next_field[r] = 0;
    s->info[r].state = 1;
    while (sp > 0) {
        int top = stack[sp - 1];
        fe_item *it = s->file->items[top];
        if (next_field[top] == it->nfields) {
            sp--;
            lay_out_struct(s, it);
            continue;
        }
        const fe_field *f = &it->fields[next_field[top]++];
        fe_item *dep = named_struct(s, f->type);
        fe_item_info *di = dep ? &s->info[fe_sema_item_index(s, dep)] : NULL;
        if (di && di->state == 0) {
            int d = fe_sema_item_index(s, dep);
            stack[sp++] = d;
            next_field[d] = 0;
            di->state = 1;
        } else if (di && di->state == 1 && !di->cyclic) {
            fe_sema_error(s, f->loc,
                          "struct '%s' contains itself; a struct cannot hold a value "
                          "of its own type, directly or through another struct",
                          dep->name);
            di->cyclic = true;
        }
    }
    free(stack);
    free(next_field);
}

/* The type of struct it, built with those it holds on first use; NULL after an error (a
 * struct of a cycle is on build_from's stack, state 1, until the cycle is reported). */
static kern_type *build_struct(fe_sema *s, fe_item *it) {
    fe_item_info *info = &s->info[fe_sema_item_index(s, it)];
    if (info->state == 0)
        build_from(s, it);
    return info->state == 2 ? it->stype : NULL;
}

void fe_sema_build_structs(fe_sema *s) {
    for (int i = 0; i < s->file->nitems; i++) {
        fe_item *it = s->file->items[i];
        if (it && it->kind == IT_STRUCT)
            build_struct(s, it);
    }
}

/* ---- Helpers ------------------------------------------------------------------------ */

bool fe_sema_is_aggregate(const kern_type *t) { return t && ty_is_aggregate(t); }

static const char *desc(const fe_expr *e) {
    return e->type == &fe_untyped_int     ? "an integer literal"
           : e->type == &fe_untyped_float ? "a float literal"
                                          : e->type->name;
}

/* Converts a scalar operand to the component type c of a vector or matrix: untyped literals
 * take c, typed scalars widen implicitly (f64 into a vec3 is an error). */
static bool to_component(fe_sema *s, fe_expr **slot, const kern_type *c) {
    const kern_type *t = (*slot)->type;
    if (!fe_is_untyped(t) && !ty_is_number(t)) {
        fe_sema_error(s, fe_sema_first_loc(*slot), "expected a number for a component of type %s, "
                                                   "got %s",
                      c->name, desc(*slot));
        return false;
    }
    return fe_sema_convert(s, slot, c);
}

/* Checks an integer index and resolves an untyped one to i32. */
static bool check_index_value(fe_sema *s, fe_expr **slot) {
    const kern_type *t = fe_sema_expr(s, slot, NULL, 0);
    if (!t)
        return false;
    if (t == &fe_untyped_int)
        return fe_sema_resolve(s, slot, ty_i32());
    if (fe_is_untyped(t) || !ty_is_int(t)) {
        fe_sema_error(s, fe_sema_first_loc(*slot), "an index must be an integer, got %s",
                      desc(*slot));
        return false;
    }
    return true;
}

static bool const_in_range(fe_sema *s, const fe_expr *ix, int n, const char *what) {
    if (ix->is_const && (ix->cval.i < 0 || ix->cval.i >= n)) {
        fe_sema_error(s, fe_sema_first_loc(ix), "index %lld is out of range for %s (0 to %d)",
                      (long long)ix->cval.i, what, n - 1);
        return false;
    }
    return true;
}

/* The type of value type t indexed with n indices (idx already checked). */
const kern_type *fe_sema_index_value(fe_sema *s, kern_loc loc, const kern_type *t,
                                     fe_expr **idx, int n) {
    switch (t->kind) {
    case TY_VEC:
        if (n != 1) {
            fe_sema_error(s, loc, "a %s is indexed with one index, got %d", t->name, n);
            return NULL;
        }
        return const_in_range(s, idx[0], t->n, t->name) ? t->elem : NULL;
    case TY_MAT:
        if (n != 1 && n != 2) {
            fe_sema_error(s, loc, "a %s is indexed with one index (a row) or two (an element), "
                                  "got %d",
                          t->name, n);
            return NULL;
        }
        for (int i = 0; i < n; i++)
            if (!const_in_range(s, idx[i], t->n, t->name))
                return NULL;
        return n == 2 ? t->elem : ty_vec(t->elem, t->n);
    case TY_LOCAL:
        if (n != t->rank) {
            fe_sema_error(s, loc, "local array of type %s has rank %d but is indexed with %d "
                                  "index%s",
                          t->name, t->rank, n, n == 1 ? "" : "es");
            return NULL;
        }
        for (int i = 0; i < n; i++)
            if (!const_in_range(s, idx[i], t->dims[i], t->name))
                return NULL;
        return t->elem;
    default:
        fe_sema_error(s, loc, "a value of type %s cannot be indexed", t->name);
        return NULL;
    }
}

/* ---- Access ------------------------------------------------------------------------- */

static int component_of(const char *f) {
    if (!f[0] || f[1])
        return -1;
    switch (f[0]) {
    case 'x': return 0;
    case 'y': return 1;
    case 'z': return 2;
    case 'w': return 3;
    default: return -1;
    }
}

const kern_type *fe_sema_check_member(fe_sema *s, fe_expr *e) {
    const kern_type *bt = fe_sema_expr(s, &e->member.base, NULL, 0);
    if (!bt)
        return NULL;
    const char *f = e->member.field;
    if (bt->kind == TY_VEC) {
        int k = component_of(f);
        if (k < 0 || k >= bt->n) {
            fe_sema_error(s, e->member.field_loc, "%s has no component '%s' (it has %.*s)",
                          bt->name, f, bt->n * 2 - 1, "x y z w");
            return NULL;
        }
        e->member.index = k;
        return bt->elem;
    }
    if (bt->kind == TY_STRUCT) {
        for (int i = 0; i < bt->nfields; i++)
            if (!strcmp(bt->fields[i].name, f)) {
                e->member.index = i;
                return bt->fields[i].type;
            }
        kern_buf names = {0};
        for (int i = 0; i < bt->nfields; i++)
            buf_printf(&names, "%s'%s'", i ? ", " : "", bt->fields[i].name);
        fe_sema_error(s, e->member.field_loc, "struct '%s' has no field '%s' (its fields: %s)",
                      bt->name, f, names.data);
        buf_free(&names);
        return NULL;
    }
    if (bt->kind == TY_MAT)
        fe_sema_error(s, e->member.field_loc,
                      "a matrix has no component '%s'; its rows are m[i], its elements m[i, j]",
                      f);
    else
        fe_sema_error(s, e->member.field_loc, "a value of type %s has no field '%s'", bt->name, f);
    return NULL;
}

const kern_type *fe_sema_check_elem(fe_sema *s, fe_expr *e) {
    const kern_type *bt = fe_sema_expr(s, &e->elem.base, NULL, 0);
    bool ok = bt != NULL;
    for (int i = 0; i < e->elem.nidx; i++)
        ok &= check_index_value(s, &e->elem.idx[i]);
    if (!ok)
        return NULL;
    return fe_sema_index_value(s, e->loc, bt, e->elem.idx, e->elem.nidx);
}

/* ---- Constructors and literals -------------------------------------------------------- */

const kern_type *fe_sema_check_construct(fe_sema *s, fe_expr *e) {
    const kern_type *to = e->cons.to;
    int want = ty_leaves(to), have = 0;
    bool ok = true;
    for (int i = 0; i < e->cons.nargs; i++) {
        fe_expr **a = &e->cons.args[i];
        const kern_type *t = fe_sema_expr(s, a, to->elem, 0);
        if (!t) {
            ok = false;
            continue;
        }
        if (fe_is_untyped(t)) {
            if (!fe_sema_resolve(s, a, to->elem))
                ok = false;
            have++;
        } else if (ty_is_number(t)) {
            have++;
        } else if (t->kind == TY_VEC || (t->kind == TY_MAT && e->cons.nargs == 1)) {
            if (!ty_is_number(t->elem))
                ok = false;
            have += ty_leaves(t);
        } else {
            fe_sema_error(s, fe_sema_first_loc(*a), "%s(...) takes numbers and vectors, got %s",
                          to->name, t->name);
            ok = false;
        }
    }
    if (!ok)
        return NULL;
    const fe_expr *a0 = e->cons.nargs == 1 ? e->cons.args[0] : NULL;
    if (a0 && ty_is_scalar(a0->type))
        return to; /* vec3(s): every component; mat3(s): s times the identity */
    if (a0 && to->kind == TY_MAT && a0->type->kind == TY_MAT && a0->type->n == to->n)
        return to; /* dmat3(m) */
    if (a0 && a0->type->kind == TY_MAT) {
        fe_sema_error(s, e->loc, "cannot convert %s to %s", a0->type->name, to->name);
        return NULL;
    }
    if (have != want) {
        fe_sema_error(s, e->loc,
                      "%s(...) needs %d components%s, got %d", to->name, want,
                      to->kind == TY_MAT ? arena_printf(s->mem, " (%d rows of %d, or one scalar)",
                                                        to->n, to->n)
                                         : " (or one scalar)",
                      have);
        return NULL;
    }
    return to;
}

const kern_type *fe_sema_check_structlit(fe_sema *s, fe_expr *e) {
    fe_item *it = fe_sema_find_item(s, e->slit.name);
    if (!it || it->kind != IT_STRUCT) {
        kern_type named = {.kind = TY_NAMED, .name = e->slit.name};
        resolve_named(s, &named, e->slit.name_loc); /* the message */
        for (int i = 0; i < e->slit.n; i++)
            fe_sema_value(s, &e->slit.values[i], NULL);
        return NULL;
    }
    const kern_type *t = build_struct(s, it);
    if (!t)
        return NULL;
    bool ok = true;
    for (int i = 0; i < e->slit.n; i++) {
        int f = -1;
        for (int j = 0; j < t->nfields; j++)
            if (!strcmp(t->fields[j].name, e->slit.fields[i]))
                f = j;
        for (int j = 0; j < i; j++)
            if (!strcmp(e->slit.fields[j], e->slit.fields[i])) {
                fe_sema_error(s, e->slit.field_locs[i], "field '%s' is given twice",
                              e->slit.fields[i]);
                ok = false;
            }
        if (f < 0) {
            fe_sema_error(s, e->slit.field_locs[i], "struct '%s' has no field '%s'", t->name,
                          e->slit.fields[i]);
            fe_sema_value(s, &e->slit.values[i], NULL);
            ok = false;
            continue;
        }
        fe_sema_expect(s, &e->slit.values[i], t->fields[f].type);
        if (!e->slit.values[i]->type)
            ok = false;
    }
    for (int j = 0; j < t->nfields; j++) {
        bool given = false;
        for (int i = 0; i < e->slit.n; i++)
            given |= !strcmp(e->slit.fields[i], t->fields[j].name);
        if (!given) {
            fe_sema_error(s, e->loc, "the literal of struct '%s' does not give field '%s' "
                                     "(every field is named once)",
                          t->name, t->fields[j].name);
            ok = false;
        }
    }
    return ok ? t : NULL;
}

const kern_type *fe_sema_check_arraylit(fe_sema *s, fe_expr *e, const kern_type *hint) {
    const kern_type *want = hint && hint->kind == TY_LOCAL && hint->rank == 1 ? hint->elem : NULL;
    if (want && hint->dims[0] != e->alit.n) {
        fe_sema_error(s, e->loc, "the literal has %d elements but the array %s has %d", e->alit.n,
                      hint->name, hint->dims[0]);
        return NULL;
    }
    const kern_type *et = want;
    bool ok = true;
    for (int i = 0; i < e->alit.n; i++) {
        const kern_type *t = fe_sema_expr(s, &e->alit.elems[i], et, 0);
        if (!t) {
            ok = false;
            continue;
        }
        if (!fe_is_untyped(t) && !et)
            et = t;
        else if (!fe_is_untyped(t) && et && ty_is_scalar(t) && ty_is_scalar(et) && !want)
            et = ty_promote(et, t);
    }
    if (!ok)
        return NULL;
    if (!et) { /* only literals */
        et = ty_i32();
        for (int i = 0; i < e->alit.n; i++)
            if (e->alit.elems[i]->type == &fe_untyped_float)
                et = ty_f32();
    }
    for (int i = 0; i < e->alit.n; i++)
        if (!fe_sema_convert(s, &e->alit.elems[i], et))
            ok = false;
    if (!ok)
        return NULL;
    if (et->kind == TY_ARRAY || et->kind == TY_VOID) {
        fe_sema_error(s, e->loc, "an array literal holds values, not %s", et->name);
        return NULL;
    }
    int n = e->alit.n;
    return fe_sema_local_type(s, et, 1, &n, e->loc);
}

/* ---- Operators ---------------------------------------------------------------------- */

static bool arith(const kern_type *t) {
    return t && (t->kind == TY_VEC || t->kind == TY_MAT) && ty_is_number(t->elem);
}

const kern_type *fe_sema_agg_binary(fe_sema *s, fe_expr *e) {
    fe_binop op = e->binary.op;
    fe_expr **lp = &e->binary.lhs, **rp = &e->binary.rhs;
    const kern_type *lt = (*lp)->type, *rt = (*rp)->type;
    bool la = ty_is_aggregate(lt) , ra = ty_is_aggregate(rt);
    const char *o = fe_binop_text(op);
    if (op == BIN_EQ || op == BIN_NE) {
        if (la && ra && fe_sema_same_type(lt, rt) && lt->kind != TY_LOCAL)
            return ty_bool();
        fe_sema_error(s, e->loc, "'%s' compares two values of one type, got %s and %s", o,
                      desc(*lp), desc(*rp));
        return NULL;
    }
    bool arith_op = op == BIN_ADD || op == BIN_SUB || op == BIN_MUL || op == BIN_DIV ||
                    op == BIN_REM;
    const kern_type *agg = la ? lt : rt;
    if (!arith_op || !arith(agg) || (la && ra && !arith(la ? rt : lt))) {
        fe_sema_error(s, e->loc, "operator '%s' does not apply to %s%s%s", o, desc(*lp),
                      la && ra ? " and " : "", la && ra ? rt->name : "");
        return NULL;
    }
    if (la && ra) {
        if (lt->elem != rt->elem) {
            fe_sema_error(s, e->loc, "operands of '%s' have different component types (%s and "
                                     "%s); convert one, e.g. %s(...)",
                          o, lt->name, rt->name, lt->name);
            return NULL;
        }
        if (op == BIN_MUL && lt->kind == TY_MAT && rt->kind == TY_VEC && !rt->quat &&
            lt->n == rt->n)
            return rt; /* m * v */
        if (op == BIN_MUL && lt->kind == TY_VEC && !lt->quat && rt->kind == TY_MAT &&
            lt->n == rt->n)
            return lt; /* v * m */
        if (lt != rt) {
            fe_sema_error(s, e->loc, "operands of '%s' must have one type, got %s and %s", o,
                          lt->name, rt->name);
            return NULL;
        }
        return lt;
    }
    /* one side a scalar: broadcast */
    if (!to_component(s, la ? rp : lp, agg->elem))
        return NULL;
    if (agg->kind == TY_MAT && op != BIN_MUL && op != BIN_DIV && op != BIN_ADD &&
        op != BIN_SUB) {
        fe_sema_error(s, e->loc, "operator '%s' does not apply to %s", o, agg->name);
        return NULL;
    }
    return agg;
}

const kern_type *fe_sema_agg_neg(fe_sema *s, fe_expr *e) {
    const kern_type *t = e->unary.arg->type;
    if (e->unary.op == UN_NEG && arith(t))
        return t;
    fe_sema_error(s, e->loc, "operator '%s' does not apply to %s", fe_unop_text(e->unary.op),
                  t->name);
    return NULL;
}

/* ---- Builtins ----------------------------------------------------------------------- */

/* A component-wise builtin with at least one vector or matrix argument: every such argument
 * has one type T, scalars take T's component type; the result is T. */
const kern_type *fe_sema_agg_componentwise(fe_sema *s, fe_expr *e, bool floats_only) {
    const kern_type *T = NULL;
    fe_builtin b = e->call.builtin;
    if (b == BI_ISNAN || b == BI_ISINF || b == BI_ISFINITE) {
        fe_sema_error(s, e->call.name_loc, "'%s' applies to a scalar; test the components",
                      e->call.name);
        return NULL;
    }
    for (int i = 0; i < e->call.nargs; i++) {
        const kern_type *t = e->call.args[i]->type;
        if (!ty_is_aggregate(t))
            continue;
        if (!arith(t)) {
            fe_sema_error(s, fe_sema_first_loc(e->call.args[i]),
                          "'%s' applies to numbers, vectors and matrices, not %s", e->call.name,
                          t->name);
            return NULL;
        }
        if (T && T != t) {
            fe_sema_error(s, fe_sema_first_loc(e->call.args[i]),
                          "arguments of '%s' must have one type, got %s and %s", e->call.name,
                          T->name, t->name);
            return NULL;
        }
        T = t;
    }
    if (floats_only && !ty_is_float(T->elem)) {
        fe_sema_error(s, e->call.name_loc, "'%s' needs float components, got %s", e->call.name,
                      T->name);
        return NULL;
    }
    for (int i = 0; i < e->call.nargs; i++)
        if (!ty_is_aggregate(e->call.args[i]->type) &&
            !to_component(s, &e->call.args[i], T->elem))
            return NULL;
    return T;
}

static int vbuiltin_arity(fe_builtin b) {
    switch (b) {
    case BI_IDENTITY2:
    case BI_IDENTITY3:
    case BI_IDENTITY4: return 0;
    case BI_DOT:
    case BI_CROSS:
    case BI_OUTER:
    case BI_QUAT_ROTATE:
    case BI_QUAT_FROM_AXIS_ANGLE:
    case BI_CMUL: return 2;
    default: return 1;
    }
}

static bool want(fe_sema *s, const fe_expr *a, bool ok, const char *call, const char *what) {
    if (!ok)
        fe_sema_error(s, fe_sema_first_loc(a), "'%s' needs %s, got %s", call, what, desc(a));
    return ok;
}

static bool float_vec(const kern_type *t) {
    return t && t->kind == TY_VEC && !t->quat && ty_is_float(t->elem);
}
static bool float_quat(const kern_type *t) { return t && t->kind == TY_VEC && t->quat; }
static bool float_mat(const kern_type *t) { return t && t->kind == TY_MAT; }

const kern_type *fe_sema_vector_builtin(fe_sema *s, fe_expr *e) {
    fe_builtin b = e->call.builtin;
    const char *name = e->call.name;
    int n = vbuiltin_arity(b);
    if (e->call.nargs != n) {
        fe_sema_error(s, e->call.name_loc, "'%s' takes %d argument%s, got %d", name, n,
                      n == 1 ? "" : "s", e->call.nargs);
        for (int i = 0; i < e->call.nargs; i++)
            fe_sema_value(s, &e->call.args[i], NULL);
        return NULL;
    }
    bool ok = true;
    for (int i = 0; i < n; i++)
        ok &= fe_sema_expr(s, &e->call.args[i], NULL, 0) != NULL;
    if (!ok)
        return NULL;
    fe_expr **a = e->call.args;
    const kern_type *t0 = n > 0 ? a[0]->type : NULL, *t1 = n > 1 ? a[1]->type : NULL;
    switch (b) {
    case BI_IDENTITY2: return ty_mat(ty_f32(), 2);
    case BI_IDENTITY3: return ty_mat(ty_f32(), 3);
    case BI_IDENTITY4: return ty_mat(ty_f32(), 4);
    case BI_DOT:
        if (!want(s, a[0], t0->kind == TY_VEC && ty_is_number(t0->elem), name, "vectors") ||
            !want(s, a[1], t1 == t0, name, arena_printf(s->mem, "a second %s", t0->name)))
            return NULL;
        return t0->elem;
    case BI_CROSS:
        if (!want(s, a[0], float_vec(t0) && t0->n == 3, name, "3-D float vectors") ||
            !want(s, a[1], t1 == t0, name, arena_printf(s->mem, "a second %s", t0->name)))
            return NULL;
        return t0;
    case BI_LENGTH:
    case BI_LENGTH_SQ:
        return want(s, a[0], float_vec(t0) || float_quat(t0), name, "a float vector") ? t0->elem
                                                                                     : NULL;
    case BI_NORMALIZE:
        return want(s, a[0], float_vec(t0) || float_quat(t0), name, "a float vector") ? t0 : NULL;
    case BI_OUTER:
        if (!want(s, a[0], float_vec(t0), name, "float vectors") ||
            !want(s, a[1], t1 == t0, name, arena_printf(s->mem, "a second %s", t0->name)))
            return NULL;
        return ty_mat(t0->elem, t0->n);
    case BI_TRANSPOSE:
    case BI_INVERSE: return want(s, a[0], float_mat(t0), name, "a matrix") ? t0 : NULL;
    case BI_DETERMINANT:
    case BI_TRACE: return want(s, a[0], float_mat(t0), name, "a matrix") ? t0->elem : NULL;
    case BI_DIAG:
        return want(s, a[0], float_vec(t0), name, "a float vector") ? ty_mat(t0->elem, t0->n)
                                                                    : NULL;
    case BI_CMUL:
        if (!want(s, a[0], float_mat(t0), name, "matrices") ||
            !want(s, a[1], t1 == t0, name, arena_printf(s->mem, "a second %s", t0->name)))
            return NULL;
        return t0;
    case BI_QUAT_ROTATE:
        if (!want(s, a[0], float_quat(t0), name, "a quaternion") ||
            !want(s, a[1], t1 == ty_vec(t0->elem, 3), name,
                  t0->elem == ty_f32() ? "a vec3" : "a dvec3"))
            return NULL;
        return t1;
    case BI_QUAT_FROM_AXIS_ANGLE:
        if (!want(s, a[0], float_vec(t0) && t0->n == 3, name, "an axis (vec3 or dvec3)") ||
            !to_component(s, &a[1], t0->elem))
            return NULL;
        return ty_quat(t0->elem);
    case BI_QUAT_TO_MAT3:
        return want(s, a[0], float_quat(t0), name, "a quaternion") ? ty_mat(t0->elem, 3) : NULL;
    case BI_CONJUGATE: return want(s, a[0], float_quat(t0), name, "a quaternion") ? t0 : NULL;
    default: kern_unreachable("vector builtin");
    }
}
