/* lower_expr.c - lowering of checked expressions to IR values.
 *
 * Sema made every conversion explicit (EX_CAST) and folded constant expressions, so each
 * operator maps to one IR op on operands of its own type. Short-circuit && and || and the
 * conditional operator become IF ops with results, unless the lazily evaluated operands
 * are safe to evaluate anyway (lw_expr_is_safe), in which case they become AND / OR /
 * SELECT. Func calls are inlined (lower.c's lw_func_body). */
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
    case EX_INDEX: return false;
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

static ir_opcode binop_code(fe_binop op) {
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
            return ir_binop(&L->b, binop_code(op), l, r);
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
    return ir_binop(&L->b, binop_code(op), l, r);
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
    case BI_ATOMIC_ADD: return IR_ATOMIC_ADD;
    case BI_ATOMIC_SUB: return IR_ATOMIC_SUB;
    case BI_ATOMIC_MIN: return IR_ATOMIC_MIN;
    case BI_ATOMIC_MAX: return IR_ATOMIC_MAX;
    default: kern_unreachable("builtin without an op");
    }
}

/* Inlines a func call: binds the parameters to the arguments, lowers the body with a
 * fresh return flag, and returns the value the body returned (NULL for a void func). */
static ir_value *lower_func_call(lw *L, const fe_expr *e) {
    fe_item *fn = e->call.func;
    ir_value *args[64];
    ir_value **argv = e->call.nargs <= 64 ? args : kern_xmalloc(sizeof(ir_value *) * (size_t)e->call.nargs);
    for (int i = 0; i < e->call.nargs; i++)
        argv[i] = lw_expr(L, e->call.args[i]);
    /* Bind after all arguments are evaluated: an argument may itself call the same func
     * (f(f(x))), which rebinds the parameters while it runs. */
    for (int i = 0; i < fn->nparams; i++)
        lw_bind(L, fn->params[i].sym, argv[i]);
    if (argv != args)
        free(argv);
    lw_func F = {0};
    F.outer = L->func;
    F.ret = ARENA_NEW(&L->ctx->mem, fe_sym);
    F.ret->kind = SYM_LOCAL;
    F.ret->name = "return";
    F.ret->type = ty_bool();
    F.ret->is_mutable = true;
    L->b.loc = e->loc;
    lw_set(F.ret, ir_const_bool(&L->b, false));
    if (fn->ret != ty_void()) {
        F.retval = ARENA_NEW(&L->ctx->mem, fe_sym);
        F.retval->kind = SYM_LOCAL;
        F.retval->name = "retval";
        F.retval->type = fn->ret;
        F.retval->is_mutable = true;
        lw_set(F.retval, lw_zero(L, fn->ret));
    }
    lw_loop *saved_loop = L->loop;
    L->loop = NULL; /* break/continue never cross a func boundary */
    L->func = &F;
    L->inline_depth++;
    lw_func_body(L, fn->body);
    L->inline_depth--;
    L->func = F.outer;
    L->loop = saved_loop;
    return F.retval ? lw_get(F.retval) : NULL;
}

static ir_value *lower_call(lw *L, const fe_expr *e) {
    fe_builtin bi = e->call.builtin;
    fe_expr *const *a = e->call.args;
    switch (bi) {
    case BI_NONE: return lower_func_call(L, e);
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
    ir_opcode code = builtin_code(bi);
    switch (e->call.nargs) {
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
    }
    kern_unreachable("expression kind");
}
