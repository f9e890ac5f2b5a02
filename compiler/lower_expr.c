/* lower_expr.c - lowering of checked expressions to IR values.
 *
 * Sema made every conversion explicit (EX_CAST) and folded constant expressions, so each
 * operator maps to one IR op on operands of its own type. Short-circuit && and || and the
 * conditional operator become IF ops with results, unless the lazily evaluated operands
 * are safe to evaluate anyway (lw_expr_is_safe), in which case they become AND / OR /
 * SELECT. Func calls are inlined (lower.c's lw_func_body). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lower_impl.h"

ir_value *lw_zero(lw *L, const kern_type *t) {
    t = ty_arith(t);
    return ty_is_float(t) ? ir_const_float(&L->b, t, 0.0) : ir_const_int(&L->b, t, 0);
}

ir_value *lw_local_value(lw *L, const kern_type *t, ir_value *v) {
    if (!t || !ty_is_narrow(t))
        return v;
    if (v->type != t)
        v = ir_cast(&L->b, t, v);
    return ir_cast(&L->b, ty_arith(t), v);
}

/* A constant of a storage type is its value in ty_arith, cast: the IR has no u8 or f16
 * constants (docs/ir.md). */
static ir_value *lower_const(lw *L, const fe_value *v) {
    const kern_type *t = ty_arith(v->type);
    ir_value *c = ty_is_float(t) ? ir_const_float(&L->b, t, v->f) : ir_const_int(&L->b, t, v->i);
    return t == v->type ? c : ir_cast(&L->b, v->type, c);
}

bool lw_expr_is_safe(const fe_expr *e) {
    if (e->is_const)
        return true;
    switch (e->kind) {
    case EX_INT:
    case EX_FLOAT:
    case EX_BOOL:
    case EX_NAME: return true;
    case EX_UNARY: return lw_expr_is_safe(e->unary.arg);
    case EX_CAST: return lw_expr_is_safe(e->cast.arg);
    case EX_BINARY:
        if (ty_is_int(e->binary.lhs->type) &&
            (e->binary.op == BIN_DIV || e->binary.op == BIN_REM || e->binary.op == BIN_SHL ||
             e->binary.op == BIN_SHR))
            return false;
        return lw_expr_is_safe(e->binary.lhs) && lw_expr_is_safe(e->binary.rhs);
    case EX_COND:
        return lw_expr_is_safe(e->cond.cond) && lw_expr_is_safe(e->cond.a) &&
               lw_expr_is_safe(e->cond.b);
    case EX_CALL:
        if (e->call.builtin == BI_NONE || e->call.builtin >= BI_ATOMIC_ADD)
            return false;
        for (int i = 0; i < e->call.nargs; i++)
            if (!lw_expr_is_safe(e->call.args[i]))
                return false;
        return true;
    case EX_INDEX:
        if (!e->index.sym || ty_is_array(e->index.sym->type))
            return false;
        for (int i = 0; i < e->index.nidx; i++)
            if (!lw_expr_is_safe(e->index.idx[i]))
                return false;
        return true;
    case EX_MEMBER:
    case EX_ELEM:
    case EX_CONSTRUCT:
    case EX_STRUCTLIT:
    case EX_ARRAYLIT: return fe_expr_all_kids(e, lw_expr_is_safe);
    }
    return false;
}

/* if c { yield a } else { yield b }, with a and b lowered inside their regions. */
static ir_value *lazy_select(lw *L, ir_value *c, const fe_expr *a, const fe_expr *b,
                             const kern_type *t, kern_loc loc) {
    L->b.loc = loc;
    ir_op *op = ir_if(&L->b, c, &t, 1);
    ir_builder saved = L->b;
    for (int r = 0; r < 2; r++) {
        L->b = ir_builder_at_end(L->m, op->regions[r]);
        ir_value *v = lw_expr(L, r == 0 ? a : b);
        L->b.loc = loc;
        ir_yield(&L->b, &v, 1);
    }
    L->b = saved;
    return op->results[0];
}

ir_opcode lw_binop_code(fe_binop op) {
    switch (op) {
    case BIN_ADD: return IR_ADD;
    case BIN_SUB: return IR_SUB;
    case BIN_MUL: return IR_MUL;
    case BIN_DIV: return IR_DIV;
    case BIN_REM: return IR_REM;
    case BIN_SHL: return IR_SHL;
    case BIN_SHR: return IR_SHR;
    case BIN_BITAND: return IR_AND;
    case BIN_BITOR: return IR_OR;
    case BIN_BITXOR: return IR_XOR;
    case BIN_EQ: return IR_EQ;
    case BIN_NE: return IR_NE;
    case BIN_LT: return IR_LT;
    case BIN_LE: return IR_LE;
    case BIN_GT: return IR_GT;
    case BIN_GE: return IR_GE;
    case BIN_AND: return IR_AND;
    case BIN_OR: return IR_OR;
    }
    kern_unreachable("binary operator");
}

static ir_value *lower_binary(lw *L, const fe_expr *e) {
    fe_binop op = e->binary.op;
    if (op == BIN_AND || op == BIN_OR) {
        ir_value *l = lw_expr(L, e->binary.lhs);
        if (lw_expr_is_safe(e->binary.rhs)) {
            ir_value *r = lw_expr(L, e->binary.rhs);
            L->b.loc = e->loc;
            return ir_binop(&L->b, lw_binop_code(op), l, r);
        }
        /* a && b  ==  a ? b : false;   a || b  ==  a ? true : b */
        fe_expr lit = {.kind = EX_BOOL, .loc = e->loc, .type = ty_bool(), .is_const = true};
        lit.cval.type = ty_bool();
        lit.cval.i = op == BIN_OR;
        return op == BIN_AND ? lazy_select(L, l, e->binary.rhs, &lit, ty_bool(), e->loc)
                             : lazy_select(L, l, &lit, e->binary.rhs, ty_bool(), e->loc);
    }
    ir_value *l = lw_expr(L, e->binary.lhs);
    ir_value *r = lw_expr(L, e->binary.rhs);
    L->b.loc = e->loc;
    return ir_binop(&L->b, lw_binop_code(op), l, r);
}

static ir_value *lower_cond(lw *L, const fe_expr *c, const fe_expr *a, const fe_expr *b,
                            const kern_type *t, kern_loc loc) {
    ir_value *cv = lw_expr(L, c);
    if (lw_expr_is_safe(a) && lw_expr_is_safe(b)) {
        ir_value *av = lw_expr(L, a), *bv = lw_expr(L, b);
        L->b.loc = loc;
        return ir_select(&L->b, cv, av, bv);
    }
    return lazy_select(L, cv, a, b, t, loc);
}

static ir_value **lower_indices(lw *L, fe_expr *const *idx, int n, ir_value **out) {
    for (int i = 0; i < n; i++)
        out[i] = lw_expr(L, idx[i]);
    return out;
}

static ir_opcode builtin_code(fe_builtin b) {
    switch (b) {
    case BI_SIN: return IR_SIN;
    case BI_COS: return IR_COS;
    case BI_TAN: return IR_TAN;
    case BI_ASIN: return IR_ASIN;
    case BI_ACOS: return IR_ACOS;
    case BI_ATAN: return IR_ATAN;
    case BI_SINH: return IR_SINH;
    case BI_COSH: return IR_COSH;
    case BI_TANH: return IR_TANH;
    case BI_EXP: return IR_EXP;
    case BI_EXP2: return IR_EXP2;
    case BI_LOG: return IR_LOG;
    case BI_LOG2: return IR_LOG2;
    case BI_SQRT: return IR_SQRT;
    case BI_RSQRT: return IR_RSQRT;
    case BI_ABS: return IR_ABS;
    case BI_FLOOR: return IR_FLOOR;
    case BI_CEIL: return IR_CEIL;
    case BI_ROUND: return IR_ROUND;
    case BI_SIGN: return IR_SIGN;
    case BI_ATAN2: return IR_ATAN2;
    case BI_POW: return IR_POW;
    case BI_MIN: return IR_MIN;
    case BI_MAX: return IR_MAX;
    case BI_FMA: return IR_FMA;
    case BI_CLAMP: return IR_CLAMP;
    case BI_LOG1P: return IR_LOG1P;
    case BI_EXPM1: return IR_EXPM1;
    case BI_CBRT: return IR_CBRT;
    case BI_TRUNC: return IR_TRUNC;
    case BI_RINT: return IR_RINT;
    case BI_ERF: return IR_ERF;
    case BI_ERFC: return IR_ERFC;
    case BI_HYPOT: return IR_HYPOT;
    case BI_COPYSIGN: return IR_COPYSIGN;
    case BI_ATOMIC_ADD: return IR_ATOMIC_ADD;
    case BI_ATOMIC_SUB: return IR_ATOMIC_SUB;
    case BI_ATOMIC_MIN: return IR_ATOMIC_MIN;
    case BI_ATOMIC_MAX: return IR_ATOMIC_MAX;
    default: kern_unreachable("builtin without an op");
    }
}

/* The builtins of language.md section 11.5 that need no op of their own, built from
 * existing ops (their gradients follow from those ops' rules); NULL for the others. */
static ir_value *lower_sugar(lw *L, fe_builtin bi, ir_value *const *v) {
    ir_builder *b = &L->b;
    const kern_type *t = v[0]->type;
    switch (bi) {
    case BI_LOG10: { /* log(x) / ln 10, as log1p(x - 1) (exact) near 1, where a GPU's log has
                      * only an absolute error bound */
        ir_value *x = v[0], *one = ir_const_float(b, t, 1.0);
        ir_value *near1 = ir_binop(b, IR_AND, ir_binop(b, IR_GE, x, ir_const_float(b, t, 0.5)),
                                   ir_binop(b, IR_LE, x, ir_const_float(b, t, 2.0)));
        ir_value *ln = ir_select(b, near1, ir_unop(b, IR_LOG1P, ir_binop(b, IR_SUB, x, one)),
                                 ir_unop(b, IR_LOG, x));
        return ir_binop(b, IR_MUL, ln, ir_const_float(b, t, 1.0 / M_LN10));
    }
    case BI_FRAC: return ir_binop(b, IR_SUB, v[0], ir_unop(b, IR_FLOOR, v[0]));
    case BI_LERP: /* a + (b - a) * t */
        return ir_binop(b, IR_ADD, v[0],
                        ir_binop(b, IR_MUL, ir_binop(b, IR_SUB, v[1], v[0]), v[2]));
    case BI_STEP: /* step(edge, x): 0 below the edge, 1 at and above it (and for NaN) */
        return ir_select(b, ir_binop(b, IR_LT, v[1], v[0]), ir_const_float(b, t, 0.0),
                         ir_const_float(b, t, 1.0));
    case BI_SMOOTHSTEP: { /* u = clamp((x - e0) / (e1 - e0), 0, 1); u * u * (3 - 2 u) */
        ir_value *d =
            ir_binop(b, IR_DIV, ir_binop(b, IR_SUB, v[2], v[0]), ir_binop(b, IR_SUB, v[1], v[0]));
        ir_value *u =
            ir_triop(b, IR_CLAMP, d, ir_const_float(b, t, 0.0), ir_const_float(b, t, 1.0));
        ir_value *p = ir_binop(b, IR_SUB, ir_const_float(b, t, 3.0),
                               ir_binop(b, IR_MUL, ir_const_float(b, t, 2.0), u));
        return ir_binop(b, IR_MUL, ir_binop(b, IR_MUL, u, u), p);
    }
    case BI_ISNAN: return ir_binop(b, IR_NE, v[0], v[0]);
    case BI_ISINF:
    case BI_ISFINITE:
        return ir_binop(b, bi == BI_ISINF ? IR_EQ : IR_LT, ir_unop(b, IR_ABS, v[0]),
                        ir_const_float(b, t, INFINITY));
    case BI_STOP_GRADIENT: return ty_is_float(t) ? ir_unop(b, IR_STOPGRAD, v[0]) : v[0];
    default: return NULL;
    }
}

/* Binds func parameter p to the argument's leaves. */
static void bind_param(lw *L, fe_sym *p, ir_value *const *v) {
    if (!ty_is_aggregate(p->type)) {
        lw_bind(L, p, v[0]);
        return;
    }
    fe_sym **leaves = lw_leaf_syms(L, p);
    for (int i = 0; i < ty_leaves(p->type); i++)
        lw_set(leaves[i], v[i]);
}

/* The leaves of the values of fn's parameters (argument count of a call of fn). */
static int param_leaves(const fe_item *fn) {
    int total = 0;
    for (int i = 0; i < fn->nparams; i++)
        total += ty_is_array(fn->params[i].type) ? 1 : ty_leaves(fn->params[i].type);
    return total;
}

/* Inlines fn with its parameters bound to the leaves argv; writes the leaves of its value
 * and returns their count. */
static int inline_func(lw *L, kern_loc loc, fe_item *fn, ir_value *const *argv, ir_value **out) {
    int k = 0;
    for (int i = 0; i < fn->nparams; i++) {
        bind_param(L, fn->params[i].sym, argv + k);
        k += ty_is_array(fn->params[i].type) ? 1 : ty_leaves(fn->params[i].type);
    }
    lw_func F = {0};
    F.outer = L->func;
    F.ret = ARENA_NEW(&L->ctx->mem, fe_sym);
    F.ret->kind = SYM_LOCAL;
    F.ret->name = "return";
    F.ret->type = ty_bool();
    F.ret->is_mutable = true;
    L->b.loc = loc;
    lw_set(F.ret, ir_const_bool(&L->b, false));
    if (fn->ret != ty_void()) {
        F.retval = ARENA_NEW(&L->ctx->mem, fe_sym);
        F.retval->kind = SYM_LOCAL;
        F.retval->name = "retval";
        F.retval->type = fn->ret;
        F.retval->is_mutable = true;
        if (ty_is_aggregate(fn->ret)) {
            ir_value **z = kern_xmalloc(sizeof(ir_value *) * (size_t)ty_leaves(fn->ret));
            lw_zero_leaves(L, fn->ret, z);
            bind_param(L, F.retval, z);
            free(z);
        } else {
            lw_set(F.retval, lw_zero(L, fn->ret));
        }
    }
    lw_loop *saved_loop = L->loop;
    L->loop = NULL; /* break/continue never cross a func boundary */
    L->func = &F;
    L->inline_depth++;
    lw_func_body(L, fn->body);
    L->inline_depth--;
    L->func = F.outer;
    L->loop = saved_loop;
    if (!F.retval)
        return 0;
    if (!ty_is_aggregate(fn->ret)) {
        out[0] = lw_get(F.retval);
        return 1;
    }
    int n = ty_leaves(fn->ret);
    for (int i = 0; i < n; i++)
        out[i] = lw_get(F.retval->leaves[i]);
    return n;
}

static bool has_float_leaf(const kern_type *t) {
    for (int i = 0; i < ty_leaves(t); i++)
        if (ty_is_float(ty_is_aggregate(t) ? ty_leaf_type(t, i) : t))
            return true;
    return false;
}

static ir_value *zero_of(lw *L, const kern_type *t) {
    return ty_is_float(t) ? ir_const_float(&L->b, t, 0.0) : ir_const_int(&L->b, t, 0);
}

/* A call of func fn with a custom adjoint (a grad clause) on the leaves argv (total of
 * them): a `custom` op (docs/ir.md) whose primal region is fn inlined and whose adjoint
 * region is fn->grad inlined on (arguments, result, result's adjoint), yielding one
 * adjoint per operand (zero for integers and nograd parameters). */
static int call_custom(lw *L, const fe_expr *e, ir_value **argv, int total, ir_value **out) {
    fe_item *fn = e->call.func;
    for (int i = 0; i < total; i++) /* the IR computes in ty_arith (f16 in f32) */
        if (ty_arith(argv[i]->type) != argv[i]->type)
            argv[i] = ir_cast(&L->b, ty_arith(argv[i]->type), argv[i]);
    int m = ty_leaves(fn->ret);
    const kern_type **rt = kern_xmalloc(sizeof *rt * (size_t)(m + 1));
    for (int j = 0; j < m; j++)
        rt[j] = ty_arith(ty_is_aggregate(fn->ret) ? ty_leaf_type(fn->ret, j) : fn->ret);
    L->b.loc = e->loc;
    ir_op *op = ir_build(&L->b, IR_CUSTOM, argv, (uint32_t)total, rt, (uint32_t)m, 2);
    ir_region *pr = op->regions[0], *ar = op->regions[1];
    ir_builder saved = L->b;
    ir_value **v = kern_xmalloc(sizeof *v * (size_t)(total + 2 * m + 1));
    ir_value **res = kern_xmalloc(sizeof *res * (size_t)(total + m + 1));
    /* primal: fn on its own arguments */
    for (int i = 0; i < total; i++)
        v[i] = ir_region_add_arg(L->m, pr, argv[i]->type);
    L->b = ir_builder_at_end(L->m, pr);
    inline_func(L, e->loc, fn, v, res);
    L->b.loc = e->loc;
    ir_yield(&L->b, res, (uint32_t)m);
    /* adjoint: G(args, r, dr), spread over the operands */
    for (int i = 0; i < total; i++)
        v[i] = ir_region_add_arg(L->m, ar, argv[i]->type);
    for (int j = 0; j < m; j++)
        v[total + j] = ir_region_add_arg(L->m, ar, rt[j]);
    for (int j = 0; j < m; j++)
        v[total + m + j] = ir_region_add_arg(L->m, ar, rt[j]); /* f16 never: ty_arith */
    L->b = ir_builder_at_end(L->m, ar);
    ir_value **g = kern_xmalloc(sizeof *g * (size_t)(total + 1));
    inline_func(L, e->loc, fn->grad, v, g);
    L->b.loc = e->loc;
    int k = 0, gk = 0;
    for (int i = 0; i < fn->nparams; i++) {
        const kern_type *t = fn->params[i].type;
        bool diff = !fn->params[i].nograd && has_float_leaf(t);
        for (int j = 0; j < ty_leaves(t); j++, k++) {
            const kern_type *lt = ty_is_aggregate(t) ? ty_leaf_type(t, j) : t;
            ir_value *d = diff ? g[gk++] : NULL;
            res[k] = d && ty_is_float(lt) ? d : zero_of(L, ty_arith(lt));
        }
    }
    ir_yield(&L->b, res, (uint32_t)total);
    L->b = saved;
    for (int j = 0; j < m; j++)
        out[j] = op->results[j];
    free(g);
    free(res);
    free(v);
    free(rt);
    return m;
}

int lw_call_func(lw *L, const fe_expr *e, ir_value **out) {
    fe_item *fn = e->call.func;
    int total = param_leaves(fn);
    ir_value **argv = kern_xmalloc(sizeof(ir_value *) * (size_t)(total + 1));
    int k = 0;
    for (int i = 0; i < e->call.nargs; i++)
        k += ty_is_array(fn->params[i].type) ? (argv[k] = lw_expr(L, e->call.args[i]), 1)
                                             : lw_agg(L, e->call.args[i], argv + k);
    /* Bind after all arguments are evaluated: an argument may itself call the same func
     * (f(f(x))), which rebinds the parameters while it runs. */
    int n = fn->grad ? call_custom(L, e, argv, total, out) : inline_func(L, e->loc, fn, argv, out);
    free(argv);
    return n;
}

static ir_value *lower_call(lw *L, const fe_expr *e) {
    fe_builtin bi = e->call.builtin;
    fe_expr *const *a = e->call.args;
    switch (bi) {
    case BI_NONE: {
        ir_value *v = NULL;
        lw_call_func(L, e, &v);
        return v;
    }
    case BI_LEN:
    case BI_SHAPE: {
        ir_value *arr = lw_get(a[0]->name.sym);
        int d = bi == BI_LEN ? 0 : (int)a[1]->cval.i;
        L->b.loc = e->loc;
        return ir_dim(&L->b, arr, d);
    }
    case BI_SELECT: return lower_cond(L, a[0], a[1], a[2], e->type, e->loc);
    case BI_ATOMIC_ADD:
    case BI_ATOMIC_SUB:
    case BI_ATOMIC_MIN:
    case BI_ATOMIC_MAX: {
        const fe_expr *el = a[0];
        ir_value *idx[KERN_MAX_RANK];
        lower_indices(L, el->index.idx, el->index.nidx, idx);
        ir_value *v = lw_expr(L, a[1]);
        L->b.loc = e->loc;
        return ir_atomic(&L->b, builtin_code(bi), lw_get(el->index.sym), idx,
                         (uint32_t)el->index.nidx, v);
    }
    default: break;
    }
    ir_value *v[3];
    kern_assert(e->call.nargs >= 1 && e->call.nargs <= 3);
    for (int i = 0; i < e->call.nargs; i++)
        v[i] = lw_expr(L, a[i]);
    L->b.loc = e->loc;
    return lw_scalar_builtin(L, bi, v, e->call.nargs);
}

ir_value *lw_scalar_builtin(lw *L, fe_builtin bi, ir_value *const *v, int n) {
    ir_value *sugar = lower_sugar(L, bi, v);
    if (sugar)
        return sugar;
    ir_opcode code = builtin_code(bi);
    switch (n) {
    case 1: return ir_unop(&L->b, code, v[0]);
    case 2: return ir_binop(&L->b, code, v[0], v[1]);
    default: return ir_triop(&L->b, code, v[0], v[1], v[2]);
    }
}

ir_value *lw_expr(lw *L, const fe_expr *e) {
    if (e->is_const) {
        L->b.loc = e->loc;
        return lower_const(L, &e->cval);
    }
    if (lw_is_agg_expr(e))
        return lw_agg_scalar(L, e);
    switch (e->kind) {
    case EX_INT:
    case EX_BOOL:
        L->b.loc = e->loc;
        return ir_const_int(&L->b, e->type, e->ival);
    case EX_FLOAT:
        L->b.loc = e->loc;
        return ir_const_float(&L->b, e->type,
                              e->type == ty_f32() ? (double)(float)e->flt.fval : e->flt.fval);
    case EX_NAME: {
        fe_sym *s = e->name.sym;
        if (s->kind == SYM_CONST) {
            L->b.loc = e->loc;
            return lower_const(L, &s->cval);
        }
        ir_value *v = lw_get(s);
        kern_assert(v != NULL);
        return v;
    }
    case EX_UNARY: {
        ir_value *v = lw_expr(L, e->unary.arg);
        if (e->unary.op == UN_PLUS)
            return v;
        L->b.loc = e->loc;
        return ir_unop(&L->b, e->unary.op == UN_NEG ? IR_NEG : IR_NOT, v);
    }
    case EX_BINARY: return lower_binary(L, e);
    case EX_COND: return lower_cond(L, e->cond.cond, e->cond.a, e->cond.b, e->type, e->loc);
    case EX_CALL: return lower_call(L, e);
    case EX_CAST: {
        ir_value *v = lw_expr(L, e->cast.arg);
        if (v->type == e->cast.to)
            return v;
        L->b.loc = e->loc;
        return ir_cast(&L->b, e->cast.to, v);
    }
    case EX_INDEX: {
        ir_value *idx[KERN_MAX_RANK];
        lower_indices(L, e->index.idx, e->index.nidx, idx);
        L->b.loc = e->loc;
        return ir_load(&L->b, lw_get(e->index.sym), idx, (uint32_t)e->index.nidx);
    }
    case EX_MEMBER:
    case EX_ELEM:
    case EX_CONSTRUCT:
    case EX_STRUCTLIT:
    case EX_ARRAYLIT: break; /* lw_agg */
    }
    kern_unreachable("expression kind");
}
