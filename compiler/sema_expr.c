/* sema_expr.c - typing of expressions (see sema.h for untyped literals).
 *
 * Each expression is checked bottom-up; its consumer then converts it to the type the
 * context needs. Conversions are made explicit: a widening implicit conversion becomes an
 * EX_CAST node (allocated in the context's arena, at the location of the converted
 * expression), an untyped literal simply takes the needed type. After sema the operands of
 * every operator have exactly the type the operator works in.
 *
 * Operand classes (reference section 6): + - * / and ordering comparisons take numbers, % | ^ &
 * << >> ~ integers, == != any scalar, && || ! ?:-conditions bool. Operands of one operator
 * are promoted to the wider type in the order bool < i32 < u32 < i64 < f32 < f64; an
 * untyped operand takes the other operand's type when it can (an integer literal any
 * number type, a float literal a float type), else the promotion includes its default
 * type (so `i * 0.5` is f32). Shifts are the exception: the result has the left operand's
 * type and the count is converted to it.
 *
 * Every expression whose operands are constants is folded (is_const, cval), except
 * operations that would fail at run time (integer division by zero, bad shift counts),
 * which are left for run time, or reported inside a const initializer. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sema.h"

const kern_type fe_untyped_int = {.kind = TY_I64, .name = "integer literal"};
const kern_type fe_untyped_float = {.kind = TY_F64, .name = "float literal"};

/* ---- Helpers ------------------------------------------------------------------------ */

static const kern_type *untyped_default(const kern_type *u) {
    return u == &fe_untyped_int ? ty_i32() : ty_f32();
}

/* Can an untyped expression of sentinel type u take the scalar type t? */
static bool adaptable(const kern_type *u, const kern_type *t) {
    if (!t || !ty_is_scalar(t))
        return false;
    return u == &fe_untyped_int ? ty_is_number(t) : ty_is_float(t);
}

static bool int_fits(const kern_type *t, int64_t v) {
    switch (t->kind) {
    case TY_I32: return v >= INT32_MIN && v <= INT32_MAX;
    case TY_U32: return v >= 0 && v <= (int64_t)UINT32_MAX;
    case TY_I64: return true;
    case TY_U64: return v >= 0;
    case TY_I8: return v >= INT8_MIN && v <= INT8_MAX;
    case TY_U8: return v >= 0 && v <= UINT8_MAX;
    case TY_I16: return v >= INT16_MIN && v <= INT16_MAX;
    case TY_U16: return v >= 0 && v <= UINT16_MAX;
    default: return false;
    }
}

/* What to call an untyped expression in a message. */
static const char *untyped_what(const fe_expr *e) {
    const fe_expr *lit = e;
    if (e->kind == EX_UNARY && e->unary.op == UN_NEG)
        lit = e->unary.arg; /* -1 reads as a literal */
    if (lit->kind == EX_INT)
        return "integer literal";
    if (lit->kind == EX_FLOAT)
        return "float literal";
    return e->type == &fe_untyped_int ? "integer constant" : "float constant";
}

/* The type of e for a message: "f32", or "float literal 1.5". */
static const char *type_desc(const fe_expr *e, char *buf, size_t size) {
    if (!fe_is_untyped(e->type))
        return e->type->name;
    char v[48];
    fe_value_format(v, sizeof v, e->cval);
    snprintf(buf, size, "%s %s", untyped_what(e), v);
    return buf;
}

/* The location of the first token of e (binary and ?: nodes are located at their
 * operator). */
kern_loc fe_sema_first_loc(const fe_expr *e) {
    for (;;) {
        if (e->kind == EX_BINARY && e->binary.lhs)
            e = e->binary.lhs;
        else if (e->kind == EX_COND && e->cond.cond)
            e = e->cond.cond;
        else
            return e->loc;
    }
}

static fe_expr *make_cast(fe_sema *s, fe_expr *e, const kern_type *to) {
    fe_expr *c = ARENA_NEW(s->mem, fe_expr);
    c->kind = EX_CAST;
    c->loc = e->loc;
    c->type = to;
    c->cast.to = to;
    c->cast.arg = e;
    if (e->is_const && fe_fold_cast(to, e->cval, &c->cval) == FOLD_OK)
        c->is_const = true;
    return c;
}

/* ---- Conversions -------------------------------------------------------------------- */

bool fe_sema_resolve(fe_sema *s, fe_expr **slot, const kern_type *to) {
    fe_expr *e = *slot;
    kern_assert(fe_is_untyped(e->type) && ty_is_scalar(to));
    bool is_int = e->type == &fe_untyped_int;
    char val[48];
    fe_value_format(val, sizeof val, e->cval);
    const char *what = untyped_what(e);
    kern_loc loc = fe_sema_first_loc(e);
    fe_value v;
    bool ok = true;
    if (is_int && to->kind == TY_BOOL) {
        fe_sema_error(s, loc, "cannot use %s %s as bool; write true or false, or a comparison",
                      what, val);
        v = fe_value_bool(e->cval.i != 0);
        ok = false;
    } else if (is_int && ty_is_int(to)) {
        if (!int_fits(to, e->cval.i)) {
            fe_sema_error(s, loc, "%s %s does not fit in %s", what, val, to->name);
            ok = false;
        }
        v = fe_value_int(to, e->cval.i);
    } else if (is_int) {
        v = fe_value_float(to, (double)e->cval.i);
    } else if (!ty_is_float(to)) {
        if (to->kind == TY_BOOL)
            fe_sema_error(s, loc, "%s %s where bool is required", what, val);
        else
            fe_sema_error(s, loc, "%s %s where an integer (%s) is required", what, val, to->name);
        v = to->kind == TY_BOOL ? fe_value_bool(false) : fe_value_int(to, 0);
        ok = false;
    } else {
        v = fe_value_float(to, e->cval.f);
        if (isfinite(e->cval.f) && !isfinite(v.f)) {
            fe_sema_error(s, loc, "%s %s is out of range for %s", what, val, to->name);
            ok = false;
        }
    }
    /* One literal node of the final type replaces the untyped subtree. */
    fe_expr *n = e;
    if (e->kind != EX_INT && e->kind != EX_FLOAT) {
        n = ARENA_NEW(s->mem, fe_expr);
        n->loc = loc;
        *slot = n;
    }
    if (ty_is_float(to)) {
        n->kind = EX_FLOAT;
        n->flt.fval = v.f;
    } else {
        n->kind = to->kind == TY_BOOL ? EX_BOOL : EX_INT;
        n->ival = v.i;
    }
    n->type = to;
    n->is_const = true;
    n->cval = v;
    return ok;
}

/* Whether from converts to to without a cast: to a wider type in the order of ty_promote,
 * and to a storage type from its arithmetic type (or one that converts to it): a store
 * into a u8 or an f16 wraps or rounds, as in C. */
static bool implicit_ok(const kern_type *from, const kern_type *to) {
    if (ty_is_narrow(to))
        return from == to || implicit_ok(from, ty_arith(to));
    if (ty_is_narrow(from))
        from = ty_arith(from);
    return from == to || ty_promote(from, to) == to;
}

bool fe_sema_convert(fe_sema *s, fe_expr **slot, const kern_type *to) {
    fe_expr *e = *slot;
    if (!e || !e->type || !to)
        return false;
    if (fe_is_untyped(e->type) && !ty_is_scalar(to)) {
        char buf[80];
        fe_sema_error(s, fe_sema_first_loc(e), "expected a value of type %s, got %s%s", to->name,
                      type_desc(e, buf, sizeof buf),
                      to->kind == TY_VEC || to->kind == TY_MAT
                          ? arena_printf(s->mem, "; write %s(...)", to->name)
                          : "");
        return false;
    }
    if (fe_is_untyped(e->type))
        return fe_sema_resolve(s, slot, to);
    if (e->type == to)
        return true;
    if (ty_is_aggregate(to) && fe_sema_same_type(e->type, to)) {
        e->type = to;
        return true;
    }
    if (!ty_is_scalar(e->type) || !ty_is_scalar(to)) {
        fe_sema_error(s, fe_sema_first_loc(e), "expected a value of type %s, got %s", to->name,
                      e->type->name);
        return false;
    }
    if (implicit_ok(e->type, to)) {
        *slot = make_cast(s, e, to);
        return true;
    }
    fe_sema_error(s, fe_sema_first_loc(e), "cannot implicitly convert %s to %s; write %s(...)",
                  e->type->name, to->name, to->name);
    return false;
}

/* ---- Operand classes and unification ------------------------------------------------ */

typedef enum ops_class { OPS_SCALAR, OPS_NUMBER, OPS_INT, OPS_FLOAT } ops_class;

static const char *class_noun(ops_class k, bool plural) {
    static const char *nouns[4][2] = {{"a scalar", "scalars"},
                                      {"a number", "numbers"},
                                      {"an integer", "integers"},
                                      {"a float", "floats"}};
    return nouns[k][plural];
}

static bool in_class(const kern_type *t, ops_class k) {
    switch (k) {
    case OPS_SCALAR: return ty_is_scalar(t);
    case OPS_NUMBER: return ty_is_number(t);
    case OPS_INT: return ty_is_int(t);
    case OPS_FLOAT: return ty_is_float(t);
    }
    return false;
}

/* Reports an operand outside its class. what: "operands of '+'", "argument of 'sin'". */
static void class_error(fe_sema *s, const fe_expr *e, ops_class k, const char *what, bool plural) {
    char buf[80];
    fe_sema_error(s, fe_sema_first_loc(e), "%s must be %s, got %s%s", what, class_noun(k, plural),
                  type_desc(e, buf, sizeof buf),
                  k == OPS_FLOAT && ty_is_int(e->type) && !fe_is_untyped(e->type)
                      ? "; convert it with f32(...) or f64(...)"
                      : "");
}

/* Gives the checked operands *slots[0..n) one common type of class k: typed operands are
 * promoted together; untyped ones take that type when they can, else their default type
 * joins the promotion; with no typed operand they take hint when they can, else their
 * default. Converts every operand; returns the common type, or NULL after an error. */
static const kern_type *unify(fe_sema *s, fe_expr **slots[], int n, ops_class k,
                              const kern_type *hint, const char *what, bool plural) {
    const kern_type *common = NULL;
    bool bad = false, any_int_lit = false, any_float_lit = false;
    for (int i = 0; i < n; i++) {
        const fe_expr *e = *slots[i];
        if (!e || !e->type) {
            bad = true;
            continue;
        }
        /* one message per operator: the first operand outside the class */
        if (fe_is_untyped(e->type)) {
            if (e->type == &fe_untyped_float) {
                any_float_lit = true;
                if (k == OPS_INT) {
                    if (!bad)
                        class_error(s, e, k, what, plural);
                    bad = true;
                }
            } else {
                any_int_lit = true;
            }
            continue;
        }
        if (!in_class(e->type, k)) {
            if (!bad)
                class_error(s, e, k, what, plural);
            bad = true;
            continue;
        }
        common = common ? ty_promote(common, e->type) : e->type;
    }
    if (bad)
        return NULL;
    if (!common) {
        const kern_type *u = any_float_lit || k == OPS_FLOAT ? &fe_untyped_float : &fe_untyped_int;
        common = adaptable(u, hint) && in_class(hint, k) ? hint : untyped_default(u);
    } else {
        if (any_float_lit && !ty_is_float(common))
            common = ty_promote(common, ty_f32());
        if (any_int_lit && common->kind == TY_BOOL)
            common = ty_i32(); /* b == 1 compares as i32 */
    }
    for (int i = 0; i < n; i++)
        if (!fe_sema_convert(s, slots[i], common))
            bad = true;
    return bad ? NULL : common;
}

const kern_type *fe_sema_unify_ints(fe_sema *s, fe_expr **ops[2], const char *what) {
    return unify(s, ops, 2, OPS_INT, NULL, what, true);
}

/* ---- Names -------------------------------------------------------------------------- */

static const kern_type *check_name(fe_sema *s, fe_expr *e, unsigned flags) {
    fe_sym *sym = fe_sema_lookup_value(s, e->name.name, e->loc);
    e->name.sym = sym;
    if (!sym || !sym->type)
        return NULL;
    if (ty_is_array(sym->type)) {
        if (flags & SX_ARRAY_OK)
            return sym->type;
        fe_sema_error(s, e->loc,
                      "array '%s' cannot be used as a value; index it (%s[...]), or pass it "
                      "to len, shape or a func",
                      e->name.name, e->name.name);
        return NULL;
    }
    if (sym->kind == SYM_CONST) {
        e->is_const = true;
        e->cval = sym->cval;
    }
    return sym->type;
}

/* ---- Operators ---------------------------------------------------------------------- */

/* In a const initializer, a fold that fails is an error; elsewhere the operation is left
 * for run time (a division by zero still gets a warning). */
static void fold_failed(fe_sema *s, fe_fold_status st, const fe_expr *e, const kern_type *t) {
    if (st == FOLD_DIV_ZERO) {
        if (s->const_ctx)
            fe_sema_error(s, e->loc, "division by zero in a constant expression");
        else
            fe_sema_warning(s, e->loc, "integer division by zero");
    } else if (st == FOLD_SHIFT && s->const_ctx) {
        fe_sema_error(s, e->loc, "shift count out of range for %s in a constant expression",
                      t->name);
    } else if (st == FOLD_RANGE && s->const_ctx) {
        fe_sema_error(s, e->loc, "value out of range for %s in a constant expression", t->name);
    }
}

static const kern_type *check_unary(fe_sema *s, fe_expr *e, const kern_type *hint) {
    fe_expr **arg = &e->unary.arg;
    char buf[80];
    const kern_type *t;
    if (e->unary.op == UN_NOT) {
        fe_sema_cond(s, arg, "operand of '!'");
        if ((*arg)->is_const && (*arg)->type == ty_bool()) {
            e->is_const = true;
            e->cval = fe_value_bool(!(*arg)->cval.i);
        }
        return ty_bool();
    }
    bool arith = e->unary.op == UN_NEG || e->unary.op == UN_PLUS; /* numbers, not ~ */
    t = fe_sema_expr(s, arg, hint, 0);
    if (!t)
        return NULL;
    if (ty_is_aggregate(t))
        return fe_sema_agg_neg(s, e);
    if (fe_is_untyped(t)) {
        fe_value v;
        if (arith && fe_fold_ideal_unary(e->unary.op, (*arg)->cval, &v) == FOLD_OK) {
            e->is_const = true;
            e->cval = v;
            return t;
        }
        if (t == &fe_untyped_float && e->unary.op == UN_BITNOT) {
            fe_sema_error(s, fe_sema_first_loc(*arg), "operand of '~' must be an integer, got %s",
                          type_desc(*arg, buf, sizeof buf));
            return NULL;
        }
        /* ~ on a literal takes the context's type: ~0 as u32 is 0xffffffff */
        bool int_hint = hint && (arith ? adaptable(t, hint) : ty_is_int(hint));
        if (!fe_sema_resolve(s, arg, int_hint ? hint : untyped_default(t)))
            return NULL;
        t = (*arg)->type;
    }
    bool ok = arith ? ty_is_number(t) : ty_is_int(t);
    if (!ok) {
        fe_sema_error(s, fe_sema_first_loc(*arg), "operand of '%s' must be %s, got %s",
                      fe_unop_text(e->unary.op), arith ? "a number" : "an integer", t->name);
        return NULL;
    }
    fe_value v;
    if ((*arg)->is_const && fe_fold_unary(e->unary.op, (*arg)->cval, &v) == FOLD_OK) {
        e->is_const = true;
        e->cval = v;
    }
    return t;
}

static void fold_binary(fe_sema *s, fe_expr *e, const kern_type *t) {
    const fe_expr *l = e->binary.lhs, *r = e->binary.rhs;
    if (!l->is_const && r->is_const && ty_is_int(t) && r->cval.i == 0 &&
        (e->binary.op == BIN_DIV || e->binary.op == BIN_REM))
        fold_failed(s, FOLD_DIV_ZERO, e, t); /* x / 0 */
    if (!l->is_const || !r->is_const)
        return;
    fe_value v;
    fe_fold_status st = fe_fold_binary(e->binary.op, l->cval, r->cval, &v);
    if (st == FOLD_OK) {
        e->is_const = true;
        e->cval = v;
    } else {
        fold_failed(s, st, e, t);
    }
}

/* lhs << rhs, lhs >> rhs: the result has the left operand's type; the count is converted
 * to it (explicitly: any integer type is a valid count). */
static const kern_type *check_shift(fe_sema *s, fe_expr *e, const kern_type *hint,
                                    const char *what) {
    fe_expr **lp = &e->binary.lhs, **rp = &e->binary.rhs;
    const kern_type *lt = (*lp)->type, *rt = (*rp)->type;
    bool bad = false;
    if (fe_is_untyped(lt)) {
        if (lt == &fe_untyped_float) {
            class_error(s, *lp, OPS_INT, what, true);
            bad = true;
        } else if (!fe_sema_resolve(s, lp, hint && ty_is_int(hint) ? hint : ty_i32())) {
            bad = true;
        }
    } else if (!ty_is_int(lt)) {
        class_error(s, *lp, OPS_INT, what, true);
        bad = true;
    }
    if (fe_is_untyped(rt) && rt == &fe_untyped_float) {
        class_error(s, *rp, OPS_INT, what, true);
        return NULL;
    }
    if (!fe_is_untyped(rt) && !ty_is_int(rt)) {
        class_error(s, *rp, OPS_INT, what, true);
        return NULL;
    }
    if (bad)
        return NULL;
    lt = (*lp)->type;
    if (fe_is_untyped(rt)) {
        if (!fe_sema_resolve(s, rp, lt))
            return NULL;
    } else if (rt != lt) {
        *rp = make_cast(s, *rp, lt);
    }
    fold_binary(s, e, lt);
    return lt;
}

static const kern_type *check_binary(fe_sema *s, fe_expr *e, const kern_type *hint) {
    fe_binop op = e->binary.op;
    fe_expr **lp = &e->binary.lhs, **rp = &e->binary.rhs;
    char what[40];
    snprintf(what, sizeof what, "operands of '%s'", fe_binop_text(op));
    if (op == BIN_AND || op == BIN_OR) {
        snprintf(what, sizeof what, "operand of '%s'", fe_binop_text(op));
        fe_sema_cond(s, lp, what);
        fe_sema_cond(s, rp, what);
        if ((*lp)->type == ty_bool() && (*rp)->type == ty_bool())
            fold_binary(s, e, ty_bool());
        return ty_bool();
    }
    bool cmp = op >= BIN_EQ && op <= BIN_GE;
    bool shift = op == BIN_SHL || op == BIN_SHR;
    const kern_type *lt = fe_sema_expr(s, lp, cmp ? NULL : hint, 0);
    const kern_type *rt = fe_sema_expr(s, rp, cmp || shift ? NULL : hint, 0);
    if (!lt || !rt)
        return cmp ? ty_bool() : NULL;
    if (ty_is_aggregate(lt) || ty_is_aggregate(rt))
        return fe_sema_agg_binary(s, e);
    ops_class k;
    switch (op) {
    case BIN_EQ:
    case BIN_NE: k = OPS_SCALAR; break;
    case BIN_BITAND:
    case BIN_BITOR:
    case BIN_BITXOR:
    case BIN_SHL:
    case BIN_SHR: k = OPS_INT; break;
    default: k = OPS_NUMBER; break;
    }
    if (!cmp && fe_is_untyped(lt) && fe_is_untyped(rt)) {
        /* both untyped: an exact constant, typed later by its context */
        if (k == OPS_INT && (lt == &fe_untyped_float || rt == &fe_untyped_float)) {
            class_error(s, lt == &fe_untyped_float ? *lp : *rp, k, what, true);
            return NULL;
        }
        fe_value v;
        fe_fold_status st = fe_fold_ideal_binary(op, (*lp)->cval, (*rp)->cval, &v);
        if (st == FOLD_OK) {
            e->is_const = true;
            e->cval = v;
            return ty_is_float(v.type) ? &fe_untyped_float : &fe_untyped_int;
        }
        if (st == FOLD_OVERFLOW) {
            fe_sema_error(s, e->loc, "integer constant overflows 64 bits in '%s'",
                          fe_binop_text(op));
            return NULL;
        }
        /* otherwise (x / 0, bad shift counts) it is typed like any other operation */
    }
    if (shift)
        return check_shift(s, e, hint, what);
    fe_expr **ops[2] = {lp, rp};
    const kern_type *t = unify(s, ops, 2, k, cmp ? NULL : hint, what, true);
    if (!t)
        return cmp ? ty_bool() : NULL;
    fold_binary(s, e, t);
    return cmp ? ty_bool() : t;
}

/* Two operands of which one is a vector, matrix, struct or local array: one type. */
static const kern_type *same_value_type(fe_sema *s, fe_expr **a, fe_expr **b, const char *what) {
    if (fe_sema_same_type((*a)->type, (*b)->type))
        return (*a)->type;
    char x[80], y[80];
    fe_sema_error(s, fe_sema_first_loc(*b), "%s must have one type, got %s and %s", what,
                  type_desc(*a, x, sizeof x), type_desc(*b, y, sizeof y));
    return NULL;
}

static const kern_type *check_cond_expr(fe_sema *s, fe_expr *e, const kern_type *hint) {
    fe_sema_cond(s, &e->cond.cond, "condition of '?:'");
    const kern_type *at = fe_sema_expr(s, &e->cond.a, hint, 0);
    const kern_type *bt = fe_sema_expr(s, &e->cond.b, hint, 0);
    if (!at || !bt)
        return NULL;
    if (ty_is_aggregate(at) || ty_is_aggregate(bt))
        return same_value_type(s, &e->cond.a, &e->cond.b, "branches of '?:'");
    fe_expr **ops[2] = {&e->cond.a, &e->cond.b};
    const kern_type *t = unify(s, ops, 2, OPS_SCALAR, hint, "branches of '?:'", true);
    if (!t)
        return NULL;
    const fe_expr *c = e->cond.cond;
    if (c->is_const && c->type == ty_bool()) {
        const fe_expr *pick = c->cval.i ? e->cond.a : e->cond.b;
        if (pick->is_const) {
            e->is_const = true;
            e->cval = pick->cval;
        }
    }
    return t;
}

static const kern_type *check_cast(fe_sema *s, fe_expr *e) {
    const kern_type *to = e->cast.to;
    fe_expr **arg = &e->cast.arg;
    const kern_type *t = fe_sema_expr(s, arg, to, 0);
    if (!t || !to)
        return to;
    if (fe_is_untyped(t)) {
        /* an explicit cast of a literal: the literal itself when it fits the target,
         * else a conversion of its exact value (u32(-1), i32(2.5), f32(1e300)) */
        fe_value c = (*arg)->cval;
        bool fits = t == &fe_untyped_int
                        ? adaptable(t, to) && (ty_is_float(to) || int_fits(to, c.i))
                        : adaptable(t, to) &&
                              (to->kind == TY_F64 || !isfinite(c.f) || isfinite((float)c.f));
        const kern_type *via = fits                      ? to
                               : t == &fe_untyped_float  ? ty_f64()
                               : int_fits(ty_i32(), c.i) ? ty_i32()
                                                         : ty_i64();
        fe_sema_resolve(s, arg, via);
        t = via;
    } else if (!ty_is_scalar(t)) {
        fe_sema_error(s, fe_sema_first_loc(*arg), "cannot convert %s to %s", t->name, to->name);
        return to;
    }
    if ((*arg)->is_const) {
        fe_value v;
        fe_fold_status st = fe_fold_cast(to, (*arg)->cval, &v);
        if (st == FOLD_OK) {
            e->is_const = true;
            e->cval = v;
        } else {
            fold_failed(s, st, e, to);
        }
    }
    return to;
}

static const kern_type *check_index(fe_sema *s, fe_expr *e) {
    const char *name = e->index.name;
    fe_sym *sym = fe_sema_lookup_value(s, name, e->loc);
    e->index.sym = sym;
    const kern_type *at = sym ? sym->type : NULL;
    bool ok = at != NULL;
    if (at && (at->kind == TY_VEC || at->kind == TY_MAT || at->kind == TY_LOCAL)) {
        for (int i = 0; i < e->index.nidx; i++) {
            fe_expr **ip = &e->index.idx[i];
            const kern_type *t = fe_sema_expr(s, ip, NULL, 0);
            if (!t)
                ok = false;
            else if (t == &fe_untyped_int)
                ok &= fe_sema_resolve(s, ip, ty_i32());
            else if (fe_is_untyped(t) || !ty_is_int(t)) {
                char buf[80];
                fe_sema_error(s, fe_sema_first_loc(*ip), "an index must be an integer, got %s",
                              type_desc(*ip, buf, sizeof buf));
                ok = false;
            }
        }
        return ok ? fe_sema_index_value(s, e->loc, at, e->index.idx, e->index.nidx) : NULL;
    }
    if (at && !ty_is_array(at)) {
        fe_sema_error(s, e->loc, "'%s' is not an array; it has type %s", name, at->name);
        ok = false;
    } else if (at && e->index.nidx != at->rank) {
        fe_sema_error(s, e->loc, "array '%s' has rank %d (%s) but is indexed with %d index%s%s",
                      name, at->rank, at->name, e->index.nidx, e->index.nidx == 1 ? "" : "es",
                      e->index.nidx < at->rank ? arena_printf(s->mem,
                                                              "; an element is written "
                                                              "%s[%.*s]",
                                                              name, 3 * at->rank - 2, "i, j, k, l")
                                               : "");
        ok = false;
    }
    char buf[80];
    for (int i = 0; i < e->index.nidx; i++) {
        fe_expr **ip = &e->index.idx[i];
        const kern_type *t = fe_sema_expr(s, ip, NULL, 0);
        if (!t)
            continue;
        if (t == &fe_untyped_int) {
            fe_sema_resolve(s, ip, int_fits(ty_i32(), (*ip)->cval.i) ? ty_i32() : ty_i64());
        } else if (fe_is_untyped(t) || !ty_is_int(t)) {
            fe_sema_error(s, fe_sema_first_loc(*ip), "array index must be an integer, got %s",
                          type_desc(*ip, buf, sizeof buf));
        }
    }
    return ok ? at->elem : NULL;
}

bool fe_sema_is_memory(const fe_expr *e) {
    for (;;) {
        if (e->kind == EX_MEMBER)
            e = e->member.base;
        else if (e->kind == EX_ELEM)
            e = e->elem.base;
        else
            break;
    }
    if (e->kind != EX_INDEX)
        return false;
    if (!e->index.sym) /* unchecked yet: resolve like check_index will */
        return true;
    return !e->index.sym->type || ty_is_array(e->index.sym->type);
}

bool fe_sema_atomic_ok(fe_sema *s, const fe_expr *place, const char *what) {
    const fe_expr *e = place;
    while (e->kind == EX_MEMBER || e->kind == EX_ELEM)
        e = e->kind == EX_MEMBER ? e->member.base : e->elem.base;
    if (e->kind != EX_INDEX || !e->index.sym || !e->index.sym->type || !place->type ||
        !ty_is_array(e->index.sym->type) || !ty_is_aggregate(e->index.sym->type->elem))
        return true;
    const kern_type *word = ty_storage_leaf(e->index.sym->type->elem), *t = place->type;
    for (int i = 0; word && i < ty_leaves(t); i++)
        if (ty_leaf_type(t, i) != word) {
            fe_sema_error(s, fe_sema_first_loc(place),
                          "%s on a field of type %s in array '%s' is not supported: its elements "
                          "are stored as "
                          "%s words, and atomics update a word of that type; write the element "
                          "with '=' where no two threads update one element",
                          what, ty_leaf_type(t, i)->name, e->index.name, word->name);
            return false;
        }
    return true;
}

/* ---- Calls -------------------------------------------------------------------------- */

/* Checks the arguments of a call that has already failed, for their own errors. */
static void check_args_loosely(fe_sema *s, fe_expr *e) {
    for (int i = 0; i < e->call.nargs; i++) {
        const kern_type *t = fe_sema_expr(s, &e->call.args[i], NULL, SX_ARRAY_OK);
        if (t && fe_is_untyped(t))
            fe_sema_resolve(s, &e->call.args[i], untyped_default(t));
    }
}

static int builtin_arity(fe_builtin b) {
    switch (b) {
    case BI_LEN: return 1;
    case BI_SHAPE:
    case BI_ATAN2:
    case BI_POW:
    case BI_MIN:
    case BI_MAX:
    case BI_ATOMIC_ADD:
    case BI_ATOMIC_SUB:
    case BI_ATOMIC_MIN:
    case BI_ATOMIC_MAX:
    case BI_HYPOT:
    case BI_COPYSIGN:
    case BI_STEP: return 2;
    case BI_FMA:
    case BI_CLAMP:
    case BI_SELECT:
    case BI_LERP:
    case BI_SMOOTHSTEP: return 3;
    default: return 1; /* unary math */
    }
}

static void fold_builtin(fe_expr *e) {
    fe_value v[3];
    if (e->call.nargs > 3)
        return;
    for (int i = 0; i < e->call.nargs; i++) {
        if (!e->call.args[i]->is_const)
            return;
        v[i] = e->call.args[i]->cval;
    }
    fe_value r;
    if (fe_fold_builtin(e->call.builtin, v, e->call.nargs, &r) == FOLD_OK) {
        e->is_const = true;
        e->cval = r;
    }
}

static const kern_type *check_shape(fe_sema *s, fe_expr *e) {
    fe_expr **a = e->call.args;
    char buf[80];
    const kern_type *at = fe_sema_expr(s, &a[0], NULL, SX_ARRAY_OK);
    if (at && at->kind != TY_LOCAL && !ty_is_array(at)) {
        fe_sema_error(s, fe_sema_first_loc(a[0]),
                      "first argument of 'shape' must be an array, got %s",
                      type_desc(a[0], buf, sizeof buf));
        at = NULL;
    }
    const kern_type *dt = fe_sema_expr(s, &a[1], ty_i32(), 0);
    if (dt && fe_is_untyped(dt))
        dt = fe_sema_resolve(s, &a[1], ty_i32()) ? ty_i32() : NULL;
    if (!dt)
        return ty_i32();
    if (!ty_is_int(dt)) {
        fe_sema_error(s, fe_sema_first_loc(a[1]),
                      "dimension of 'shape' must be an integer constant, got %s", dt->name);
    } else if (!a[1]->is_const) {
        fe_sema_error(s, fe_sema_first_loc(a[1]), "dimension of 'shape' must be a constant");
    } else {
        if (dt != ty_i32())
            a[1] = make_cast(s, a[1], ty_i32()); /* value checked just below */
        int64_t d = a[1]->cval.i;
        if (at && at->kind == TY_LOCAL && d >= 0 && d < at->rank) {
            e->is_const = true;
            e->cval = fe_value_int(ty_i32(), at->dims[d]);
        }
        if (at && (d < 0 || d >= at->rank))
            fe_sema_error(s, fe_sema_first_loc(a[1]),
                          "dimension %lld is out of range for '%s' of type %s (rank %d: "
                          "dimensions 0 to %d)",
                          (long long)d, a[0]->kind == EX_NAME ? a[0]->name.name : "?", at->name,
                          at->rank, at->rank - 1);
    }
    return ty_i32();
}

static const kern_type *check_atomic(fe_sema *s, fe_expr *e) {
    fe_expr **a = e->call.args;
    const char *name = e->call.name;
    if (!fe_sema_is_memory(a[0])) {
        fe_sema_error(s, fe_sema_first_loc(a[0]),
                      "first argument of '%s' must be an array element, such as a[i]", name);
        check_args_loosely(s, e);
        return NULL;
    }
    const kern_type *et = fe_sema_expr(s, &a[0], NULL, SX_NARROW_OK);
    if (et && !fe_sema_is_memory(a[0])) {
        fe_sema_error(s, fe_sema_first_loc(a[0]),
                      "first argument of '%s' must be an element of an array parameter, not a "
                      "local value",
                      name);
        fe_sema_value(s, &a[1], NULL);
        return NULL;
    }
    if (et && !fe_sema_atomic_ok(s, a[0], arena_printf(s->mem, "'%s'", name))) {
        fe_sema_value(s, &a[1], NULL);
        return NULL;
    }
    if (et && et->kind == TY_BOOL) {
        fe_sema_error(s, fe_sema_first_loc(a[0]),
                      "'%s' needs an element of a number array, got bool", name);
        et = NULL;
    } else if (et && ty_is_narrow(et)) {
        fe_sema_error(s, fe_sema_first_loc(a[0]),
                      "'%s' on array '%s' of %s elements is not supported: atomics work on "
                      "i32, u32, i64, u64, f32 and f64 elements",
                      name, a[0]->index.name, et->name);
        et = NULL;
    }
    if (et && ty_is_aggregate(et)) {
        if (!(et->kind == TY_VEC || et->kind == TY_MAT) ||
            (e->call.builtin != BI_ATOMIC_ADD && e->call.builtin != BI_ATOMIC_SUB)) {
            fe_sema_error(s, fe_sema_first_loc(a[0]),
                          "'%s' needs a number element (or a vector or matrix for atomic_add and "
                          "atomic_sub), got %s",
                          name, et->name);
            fe_sema_value(s, &a[1], NULL);
            return NULL;
        }
        if (fe_sema_expr(s, &a[1], et, 0) && !ty_is_aggregate(a[1]->type)) {
            char buf[80];
            fe_sema_error(s, fe_sema_first_loc(a[1]), "'%s' of a %s element needs a %s, got %s",
                          name, et->name, et->name, type_desc(a[1], buf, sizeof buf));
            return NULL;
        }
        return a[1]->type && fe_sema_convert(s, &a[1], et) ? et : NULL;
    }
    if (et)
        fe_sema_expect(s, &a[1], et);
    else
        fe_sema_value(s, &a[1], NULL);
    return et;
}

static const kern_type *check_builtin(fe_sema *s, fe_expr *e, const kern_type *hint) {
    fe_builtin b = e->call.builtin;
    const char *name = e->call.name;
    int want = builtin_arity(b);
    if (e->call.nargs != want) {
        fe_sema_error(s, e->call.name_loc, "'%s' takes %d argument%s, got %d", name, want,
                      want == 1 ? "" : "s", e->call.nargs);
        check_args_loosely(s, e);
        return NULL;
    }
    fe_expr **a = e->call.args;
    char what[48], buf[80];
    snprintf(what, sizeof what, "argument%s of '%s'", want == 1 ? "" : "s", name);
    switch (b) {
    case BI_LEN: {
        const kern_type *t = fe_sema_expr(s, &a[0], NULL, SX_ARRAY_OK);
        if (t && t->kind == TY_LOCAL) {
            e->is_const = true;
            e->cval = fe_value_int(ty_i32(), t->dims[0]);
        } else if (t && !ty_is_array(t))
            fe_sema_error(s, fe_sema_first_loc(a[0]), "argument of 'len' must be an array, got %s",
                          type_desc(a[0], buf, sizeof buf));
        return ty_i32();
    }
    case BI_SHAPE: return check_shape(s, e);
    case BI_ATOMIC_ADD:
    case BI_ATOMIC_SUB:
    case BI_ATOMIC_MIN:
    case BI_ATOMIC_MAX: return check_atomic(s, e);
    case BI_SELECT: {
        fe_sema_cond(s, &a[0], "first argument of 'select'");
        const kern_type *at = fe_sema_expr(s, &a[1], hint, 0);
        const kern_type *bt = fe_sema_expr(s, &a[2], hint, 0);
        if (!at || !bt)
            return NULL;
        if (ty_is_aggregate(at) || ty_is_aggregate(bt))
            return same_value_type(s, &a[1], &a[2], "second and third arguments of 'select'");
        fe_expr **ops[2] = {&a[1], &a[2]};
        const kern_type *t =
            unify(s, ops, 2, OPS_SCALAR, hint, "second and third arguments of 'select'", true);
        if (t && a[0]->type == ty_bool())
            fold_builtin(e);
        return t;
    }
    default: break;
    }
    /* math: every operand of one type; isnan, isinf and isfinite give a bool */
    bool test = b == BI_ISNAN || b == BI_ISINF || b == BI_ISFINITE;
    ops_class k = OPS_FLOAT;
    if (b == BI_ABS || b == BI_SIGN || b == BI_MIN || b == BI_MAX || b == BI_CLAMP ||
        b == BI_STOP_GRADIENT)
        k = OPS_NUMBER;
    if (test)
        hint = NULL;
    fe_expr **ops[3];
    bool bad = false;
    for (int i = 0; i < want; i++) {
        ops[i] = &a[i];
        if (!fe_sema_expr(s, &a[i], hint, 0))
            bad = true;
    }
    if (bad)
        return test ? ty_bool() : NULL;
    for (int i = 0; i < want; i++)
        if (ty_is_aggregate(a[i]->type))
            return fe_sema_agg_componentwise(s, e, k == OPS_FLOAT);
    const kern_type *t = unify(s, ops, want, k, hint, what, want > 1);
    if (t)
        fold_builtin(e);
    return test ? ty_bool() : t;
}

static const kern_type *check_call(fe_sema *s, fe_expr *e, const kern_type *hint) {
    const char *name = e->call.name;
    e->call.builtin = fe_builtin_lookup(name);
    e->call.func = NULL;
    fe_item *it = fe_sema_find_item(s, name);
    if (e->call.builtin != BI_NONE && !fe_builtin_reserved(e->call.builtin) && it &&
        (it->kind == IT_FUNC || it->kind == IT_CONST))
        e->call.builtin = BI_NONE; /* the program's own lerp, step, ... (section 11) */
    if (fe_builtin_overridable(e->call.builtin))
        return fe_sema_vector_builtin(s, e);
    if (e->call.builtin != BI_NONE)
        return check_builtin(s, e, hint);
    if (!it || it->kind != IT_FUNC) {
        if (it && it->kind == IT_KERNEL)
            fe_sema_error(s, e->call.name_loc,
                          "cannot call kernel '%s'; kernels are launched from the host, only "
                          "funcs can be called",
                          name);
        else if (it && it->kind == IT_STRUCT)
            fe_sema_error(s, e->call.name_loc,
                          "'%s' is a struct, not a function; write %s { field: value, ... }", name,
                          name);
        else if (it)
            fe_sema_error(s, e->call.name_loc, "'%s' is a const, not a function", name);
        else {
            const char *sug = fe_sema_suggest(s, name, true);
            if (sug)
                fe_sema_error(s, e->call.name_loc, "unknown function '%s'; did you mean '%s'?",
                              name, sug);
            else
                fe_sema_error(s, e->call.name_loc, "unknown function '%s'", name);
        }
        check_args_loosely(s, e);
        return NULL;
    }
    e->call.func = it;
    const kern_type *ret = it->ret ? it->ret : ty_void();
    if (s->const_ctx) {
        fe_sema_error(s, e->call.name_loc,
                      "cannot call func '%s' in a const initializer; only literals, consts, "
                      "operators, casts and math builtins are allowed",
                      name);
        check_args_loosely(s, e);
        return NULL;
    }
    fe_sema_note_call(s, e);
    if (e->call.nargs != it->nparams) {
        fe_sema_error(s, e->call.name_loc, "func '%s' takes %d argument%s, got %d", name,
                      it->nparams, it->nparams == 1 ? "" : "s", e->call.nargs);
        check_args_loosely(s, e);
        return ret;
    }
    for (int i = 0; i < it->nparams; i++)
        if (!it->params[i].type) { /* a parameter without a type: nothing to match */
            check_args_loosely(s, e);
            return ret;
        }
    for (int i = 0; i < it->nparams; i++) {
        const fe_param *p = &it->params[i];
        fe_expr **ap = &e->call.args[i];
        if (ty_is_array(p->type)) {
            char buf[80];
            const kern_type *t = fe_sema_expr(s, ap, NULL, SX_ARRAY_OK);
            if (t && t != p->type)
                fe_sema_error(s, (*ap)->loc,
                              "argument %d of '%s' (parameter '%s') must be an array of type "
                              "%s, got %s",
                              i + 1, name, p->name, p->type->name, type_desc(*ap, buf, sizeof buf));
        } else {
            fe_sema_expect(s, ap, p->type);
        }
    }
    return ret;
}

/* ---- Entry points ------------------------------------------------------------------- */

static const kern_type *sema_expr(fe_sema *s, fe_expr **slot, const kern_type *hint,
                                  unsigned flags);

const kern_type *fe_sema_expr(fe_sema *s, fe_expr **slot, const kern_type *hint, unsigned flags) {
    if (!*slot)
        return NULL;
    /* the size and the nesting that inlining copies (sema_inline.c) */
    if (s->fn) {
        fe_item_info *info = &s->info[s->fn_index];
        info->nodes++;
        if (++s->depth > info->max_depth)
            info->max_depth = s->depth;
    }
    s->const_depth += s->const_ctx; /* the nesting of consts inside consts (sema.c) */
    const kern_type *t = sema_expr(s, slot, hint, flags);
    s->const_depth -= s->const_ctx;
    if (s->fn)
        s->depth--;
    return t;
}

static const kern_type *sema_expr(fe_sema *s, fe_expr **slot, const kern_type *hint,
                                  unsigned flags) {
    fe_expr *e = *slot;
    e->is_const = false;
    const kern_type *t = NULL;
    switch (e->kind) {
    case EX_INT:
        t = &fe_untyped_int;
        e->is_const = true;
        e->cval.type = ty_i64();
        e->cval.i = e->ival;
        break;
    case EX_FLOAT:
        t = &fe_untyped_float;
        e->is_const = true;
        e->cval.type = ty_f64();
        e->cval.f = e->flt.fval;
        break;
    case EX_BOOL:
        t = ty_bool();
        e->is_const = true;
        e->cval = fe_value_bool(e->ival != 0);
        break;
    case EX_NAME: t = check_name(s, e, flags); break;
    case EX_UNARY: t = check_unary(s, e, hint); break;
    case EX_BINARY: t = check_binary(s, e, hint); break;
    case EX_COND: t = check_cond_expr(s, e, hint); break;
    case EX_CALL: t = check_call(s, e, hint); break;
    case EX_CAST: t = check_cast(s, e); break;
    case EX_INDEX: t = check_index(s, e); break;
    case EX_MEMBER: t = fe_sema_check_member(s, e); break;
    case EX_ELEM: t = fe_sema_check_elem(s, e); break;
    case EX_CONSTRUCT: t = fe_sema_check_construct(s, e); break;
    case EX_STRUCTLIT: t = fe_sema_check_structlit(s, e); break;
    case EX_ARRAYLIT: t = fe_sema_check_arraylit(s, e, hint); break;
    }
    if (t && t->kind == TY_VOID && !(flags & SX_VOID_OK)) {
        fe_sema_error(s, e->loc,
                      "func '%s' returns no value, so its call cannot be used as a value",
                      e->kind == EX_CALL ? e->call.name : "?");
        t = NULL;
    }
    e->type = t;
    if (!t)
        e->is_const = false;
    if (t && ty_is_narrow(t) && !(flags & SX_NARROW_OK)) {
        /* language.md 11.4: an expression sees a storage type promoted */
        *slot = make_cast(s, e, ty_arith(t));
        t = (*slot)->type;
    }
    return t;
}

const kern_type *fe_sema_value(fe_sema *s, fe_expr **slot, const kern_type *hint) {
    return fe_sema_value_flags(s, slot, hint, 0);
}

const kern_type *fe_sema_value_flags(fe_sema *s, fe_expr **slot, const kern_type *hint,
                                     unsigned flags) {
    const kern_type *t = fe_sema_expr(s, slot, hint, flags);
    if (t && fe_is_untyped(t)) {
        fe_sema_resolve(s, slot, adaptable(t, hint) ? hint : untyped_default(t));
        t = (*slot)->type;
    }
    return t;
}

void fe_sema_expect(fe_sema *s, fe_expr **slot, const kern_type *to) {
    if (fe_sema_expr(s, slot, to, 0))
        fe_sema_convert(s, slot, to);
}

void fe_sema_cond(fe_sema *s, fe_expr **slot, const char *what) {
    const kern_type *t = fe_sema_expr(s, slot, ty_bool(), 0);
    if (!t || t == ty_bool())
        return;
    char buf[80];
    fe_sema_error(s, fe_sema_first_loc(*slot), "%s must be bool, got %s%s", what,
                  type_desc(*slot, buf, sizeof buf),
                  ty_is_number(t) && !fe_is_untyped(t) ? "; compare it, e.g. x != 0" : "");
}

bool fe_sema_is_uniform(const fe_expr *e) {
    if (!e)
        return false;
    switch (e->kind) {
    case EX_INT:
    case EX_FLOAT:
    case EX_BOOL: return true;
    case EX_NAME: {
        const fe_sym *y = e->name.sym;
        if (!y)
            return false;
        switch (y->kind) {
        case SYM_CONST:
        case SYM_PARAM: return true; /* parameters are immutable */
        case SYM_LOCAL: return y->is_uniform;
        case SYM_LOOPVAR: return false;
        }
        return false;
    }
    case EX_UNARY: return fe_sema_is_uniform(e->unary.arg);
    case EX_BINARY: return fe_sema_is_uniform(e->binary.lhs) && fe_sema_is_uniform(e->binary.rhs);
    case EX_COND:
        return fe_sema_is_uniform(e->cond.cond) && fe_sema_is_uniform(e->cond.a) &&
               fe_sema_is_uniform(e->cond.b);
    case EX_CAST: return fe_sema_is_uniform(e->cast.arg);
    case EX_INDEX: /* memory may change between tasks */
        if (!e->index.sym || !e->index.sym->type || ty_is_array(e->index.sym->type))
            return false;
        for (int i = 0; i < e->index.nidx; i++)
            if (!fe_sema_is_uniform(e->index.idx[i]))
                return false;
        return e->index.sym->kind == SYM_PARAM || e->index.sym->is_uniform;
    case EX_MEMBER:
    case EX_ELEM:
    case EX_CONSTRUCT:
    case EX_STRUCTLIT:
    case EX_ARRAYLIT: return fe_expr_all_kids(e, fe_sema_is_uniform);
    case EX_CALL:
        switch (e->call.builtin) {
        case BI_LEN:
        case BI_SHAPE: return true;
        case BI_ATOMIC_ADD:
        case BI_ATOMIC_SUB:
        case BI_ATOMIC_MIN:
        case BI_ATOMIC_MAX: return false;
        case BI_NONE:
            /* the reference lists parameters, constants, len and shape: a func body may hold
             * loops, which the lowering does not hoist out of tasks */
            return false;
        default: break;
        }
        for (int i = 0; i < e->call.nargs; i++)
            if (!fe_sema_is_uniform(e->call.args[i]))
                return false;
        return true;
    }
    return false;
}
