/* ad_rules.c - the adjoint rules of the pure scalar ops, one case per opcode of ops.def.
 *
 * For an op r = f(x, y, ...) whose result has the adjoint g, each rule accumulates
 * g * df/dx into adj(x) and so on (ad_accum), using the primal values of the copy being
 * built (ad_val). Ops without a float result (integer arithmetic, comparisons, DIM) and
 * the piecewise-constant ones (floor, ceil, round, sign) carry no gradient. Values at
 * non-differentiable points follow docs/reference.md section 8: abs'(0) = 0 (through sign), min and
 * max give the whole adjoint to operand 0 on ties, clamp is min(max(x, lo), hi) with the
 * same tie rule, sqrt'(0) = +inf as IEEE arithmetic gives it. pow's partial in the
 * exponent is 0 where the base is not positive (log is undefined there), and its partial
 * in the base is 0 where the exponent is 0 (y x^(y-1), which is 0 there anyway except at
 * x = 0, where the select keeps 0 * inf from making a NaN). Float rem (fmod) passes 1 to the dividend and
 * -trunc(a / b) to the divisor; trunc, rint and stopgrad (stop_gradient) carry none;
 * copysign passes +-1 to its first operand only; hypot's partials are a / h and b / h, 0
 * where h = 0.
 *
 * Runs inside ad_grad.c's reverse sweep: the builder cursor is where the adjoint code
 * goes, after the recomputed primal values. */
#include <math.h>

#include "ad_priv.h"

typedef struct rb {
    ad_ctx *a;
    ir_builder *b;
    const kern_type *t;
} rb;

static ir_value *k(rb *r, double v) { return ir_const_float(r->b, r->t, v); }
static ir_value *add(rb *r, ir_value *x, ir_value *y) { return ir_binop(r->b, IR_ADD, x, y); }
static ir_value *sub(rb *r, ir_value *x, ir_value *y) { return ir_binop(r->b, IR_SUB, x, y); }
static ir_value *mul(rb *r, ir_value *x, ir_value *y) { return ir_binop(r->b, IR_MUL, x, y); }
static ir_value *dv(rb *r, ir_value *x, ir_value *y) { return ir_binop(r->b, IR_DIV, x, y); }
static ir_value *neg(rb *r, ir_value *x) { return ir_unop(r->b, IR_NEG, x); }
static ir_value *un(rb *r, ir_opcode c, ir_value *x) { return ir_unop(r->b, c, x); }
static ir_value *sel(rb *r, ir_value *c, ir_value *x, ir_value *y) {
    return ir_select(r->b, c, x, y);
}
static ir_value *cmp(rb *r, ir_opcode c, ir_value *x, ir_value *y) {
    return ir_binop(r->b, c, x, y);
}
/* g where c holds, 0 elsewhere. */
static ir_value *gate(rb *r, ir_value *c, ir_value *g) { return sel(r, c, g, k(r, 0.0)); }

void ad_rule_pure(ad_ctx *a, ir_op *op, ir_value *g) {
    if (op->nresults != 1 || !ty_is_float(op->results[0]->type))
        return;
    rb R = {a, &a->b, ad_adj_type(op->results[0]->type)}, *r = &R;
    ir_value *x = op->noperands > 0 ? op->operands[0] : NULL;
    ir_value *y = op->noperands > 1 ? op->operands[1] : NULL;
    ir_value *z = op->noperands > 2 ? op->operands[2] : NULL;
    ir_value *X = x ? ad_val(a, x) : NULL;
    ir_value *Y = y ? ad_val(a, y) : NULL;
    ir_value *Z = z ? ad_val(a, z) : NULL;
    ir_value *res = ad_val(a, op->results[0]);
    switch (op->code) {
    case IR_CONST:
    case IR_FLOOR:
    case IR_CEIL:
    case IR_ROUND:
    case IR_TRUNC:
    case IR_RINT:
    case IR_SIGN:
    case IR_STOPGRAD: return; /* stop_gradient: the value, no gradient */
    case IR_CAST: {           /* f16/bf16 have f32 adjoints: f16 <-> f32 passes g as it is */
        const kern_type *xt = ad_adj_type(x->type);
        if (ty_is_float(x->type))
            ad_accum(a, x, xt == g->type ? g : ir_cast(r->b, xt, g));
        return;
    }
    case IR_ADD:
        ad_accum(a, x, g);
        ad_accum(a, y, g);
        return;
    case IR_SUB:
        ad_accum(a, x, g);
        ad_accum(a, y, neg(r, g));
        return;
    case IR_MUL:
        ad_accum(a, x, mul(r, g, Y));
        ad_accum(a, y, mul(r, g, X));
        return;
    case IR_DIV: /* d/dy (x / y) = -(x / y) / y */
        ad_accum(a, x, dv(r, g, Y));
        ad_accum(a, y, neg(r, mul(r, g, dv(r, res, Y))));
        return;
    case IR_NEG: ad_accum(a, x, neg(r, g)); return;
    case IR_SIN: ad_accum(a, x, mul(r, g, un(r, IR_COS, X))); return;
    case IR_COS: ad_accum(a, x, neg(r, mul(r, g, un(r, IR_SIN, X)))); return;
    case IR_TAN: ad_accum(a, x, mul(r, g, add(r, k(r, 1.0), mul(r, res, res)))); return;
    case IR_ASIN:
        ad_accum(a, x, mul(r, g, un(r, IR_RSQRT, sub(r, k(r, 1.0), mul(r, X, X)))));
        return;
    case IR_ACOS:
        ad_accum(a, x, neg(r, mul(r, g, un(r, IR_RSQRT, sub(r, k(r, 1.0), mul(r, X, X))))));
        return;
    case IR_ATAN: ad_accum(a, x, dv(r, g, add(r, k(r, 1.0), mul(r, X, X)))); return;
    case IR_SINH: ad_accum(a, x, mul(r, g, un(r, IR_COSH, X))); return;
    case IR_COSH: ad_accum(a, x, mul(r, g, un(r, IR_SINH, X))); return;
    case IR_TANH: ad_accum(a, x, mul(r, g, sub(r, k(r, 1.0), mul(r, res, res)))); return;
    case IR_EXP: ad_accum(a, x, mul(r, g, res)); return;
    case IR_EXP2: ad_accum(a, x, mul(r, mul(r, g, res), k(r, M_LN2))); return;
    case IR_LOG: ad_accum(a, x, dv(r, g, X)); return;
    case IR_LOG2: ad_accum(a, x, dv(r, g, mul(r, X, k(r, M_LN2)))); return;
    case IR_SQRT: ad_accum(a, x, dv(r, mul(r, g, k(r, 0.5)), res)); return;
    case IR_RSQRT: /* d/dx x^-1/2 = -1/2 x^-3/2 = -1/2 r^3 */
        ad_accum(a, x, mul(r, mul(r, g, k(r, -0.5)), mul(r, res, mul(r, res, res))));
        return;
    case IR_ABS: ad_accum(a, x, mul(r, g, un(r, IR_SIGN, X))); return;
    case IR_REM: /* fmod: a - trunc(a / b) * b */
        ad_accum(a, x, g);
        ad_accum(a, y, neg(r, mul(r, g, un(r, IR_TRUNC, dv(r, X, Y)))));
        return;
    case IR_ERF:
    case IR_ERFC: { /* erf' = 2 / sqrt(pi) exp(-x^2) = -erfc' */
        double c = (op->code == IR_ERF ? 2.0 : -2.0) / sqrt(M_PI);
        ad_accum(a, x, mul(r, mul(r, g, k(r, c)), un(r, IR_EXP, neg(r, mul(r, X, X)))));
        return;
    }
    case IR_LOG1P: ad_accum(a, x, dv(r, g, add(r, k(r, 1.0), X))); return;
    case IR_EXPM1: ad_accum(a, x, mul(r, g, add(r, res, k(r, 1.0)))); return;
    case IR_CBRT: /* 1 / (3 cbrt(x)^2): +inf at 0, like sqrt */
        ad_accum(a, x, dv(r, g, mul(r, k(r, 3.0), mul(r, res, res))));
        return;
    case IR_HYPOT: { /* a / h, b / h; 0 at h = 0, as abs'(0) = 0 */
        ir_value *zero = cmp(r, IR_EQ, res, k(r, 0.0));
        ad_accum(a, x, sel(r, zero, k(r, 0.0), mul(r, g, dv(r, X, res))));
        ad_accum(a, y, sel(r, zero, k(r, 0.0), mul(r, g, dv(r, Y, res))));
        return;
    }
    case IR_COPYSIGN: { /* copysign(1, a) * copysign(1, b): +-1 as the signs agree */
        ir_value *s = mul(r, ir_binop(r->b, IR_COPYSIGN, k(r, 1.0), X),
                          ir_binop(r->b, IR_COPYSIGN, k(r, 1.0), Y));
        ad_accum(a, x, mul(r, g, s));
        return;
    }
    case IR_ATAN2: { /* atan2(y, x): operand 0 is y */
        ir_value *d = add(r, mul(r, X, X), mul(r, Y, Y));
        ad_accum(a, x, dv(r, mul(r, g, Y), d));
        ad_accum(a, y, neg(r, dv(r, mul(r, g, X), d)));
        return;
    }
    case IR_POW: {
        ir_value *py = ir_binop(r->b, IR_POW, X, sub(r, Y, k(r, 1.0)));
        ir_value *dx = mul(r, mul(r, g, Y), py);
        /* y = 0 gives 0 * x^-1 = 0 by itself except at x = 0 (0 * inf): only there the
         * select, so that forward mode over this rule (K.grad.jvp) keeps d/dy of y x^(y-1) */
        ir_value *zero_base = ir_binop(r->b, IR_AND, cmp(r, IR_EQ, Y, k(r, 0.0)),
                                       cmp(r, IR_EQ, X, k(r, 0.0)));
        ad_accum(a, x, sel(r, zero_base, k(r, 0.0), dx));
        ir_value *dy = mul(r, mul(r, g, res), un(r, IR_LOG, X));
        ad_accum(a, y, gate(r, cmp(r, IR_GT, X, k(r, 0.0)), dy));
        return;
    }
    case IR_MIN: {
        ir_value *first = cmp(r, IR_LE, X, Y);
        ad_accum(a, x, gate(r, first, g));
        ad_accum(a, y, sel(r, first, k(r, 0.0), g));
        return;
    }
    case IR_MAX: {
        ir_value *first = cmp(r, IR_GE, X, Y);
        ad_accum(a, x, gate(r, first, g));
        ad_accum(a, y, sel(r, first, k(r, 0.0), g));
        return;
    }
    case IR_FMA:
        ad_accum(a, x, mul(r, g, Y));
        ad_accum(a, y, mul(r, g, X));
        ad_accum(a, z, g);
        return;
    case IR_CLAMP: { /* min(max(x, lo), hi): m = max(x, lo) gets g when m <= hi */
        ir_value *m = ir_binop(r->b, IR_MAX, X, Y);
        ir_value *gm = gate(r, cmp(r, IR_LE, m, Z), g);
        ad_accum(a, z, sel(r, cmp(r, IR_LE, m, Z), k(r, 0.0), g));
        ir_value *xfirst = cmp(r, IR_GE, X, Y);
        ad_accum(a, x, gate(r, xfirst, gm));
        ad_accum(a, y, sel(r, xfirst, k(r, 0.0), gm));
        return;
    }
    case IR_SELECT:
        ad_accum(a, y, gate(r, X, g));
        ad_accum(a, z, sel(r, X, k(r, 0.0), g));
        return;
    default: return; /* no float result depends differentiably on the operands */
    }
}
