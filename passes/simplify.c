/* simplify.c - algebraic identities and control-flow simplification (ir_opt_simplify).
 *
 * What and why: rewrites that are exact for every input, so the program computes the
 * same bits afterwards (IEEE-754 included: -0.0, infinities and NaN, except the sign of
 * a NaN result, which IEEE-754 leaves unspecified: x*-1.0 -> neg x), and that leave
 * less work for the backends and for autodiff:
 *   - canonical form: a commutative op with a constant operand 0 and a non-constant
 *     operand 1 gets them swapped (so constants sit right and CSE sees one form);
 *   - integers: x+0, x-0, x*1, x/1, x|0, x^0, x&~0, x<<0, x>>0 -> x; x*0, x&0, x-x, x^x,
 *     x%1 -> 0; x|~0 -> ~0; 0-x, x*-1, x/-1 (signed) -> -x; x^~0 -> ~x;
 *     x==x, x<=x, x>=x -> true; x!=x, x<x, x>x -> false (ints and bools only);
 *   - bools: x==true, x!=false -> x; x==false, x!=true -> !x (with and/or/xor above);
 *   - floats, only the identities that hold in IEEE arithmetic: x*1.0, x/1.0, x+(-0.0),
 *     x-(+0.0) -> x; x*-1.0, x/-1.0, (-0.0)-x -> -x. NOT x+0.0 (wrong for x = -0.0), NOT
 *     x*0.0 (wrong for inf and NaN), NOT x-x (inf, NaN), NOT x==x (NaN);
 *   - -(-x) -> x, !!x -> x, abs(abs x) and abs(-x) -> abs x, abs on u32 -> x,
 *     min(x,x), max(x,x), select(c,x,x) -> x, select(c,true,false) -> c,
 *     select(c,false,true) -> !c, on bools select(c,true,b) -> c|b and
 *     select(c,a,false) -> c&a, select(!c,a,b) -> select(c,b,a), cast to the same type;
 *   - `if` with a constant condition -> the taken region's ops, inlined before the if,
 *     with the if's results replaced by the yielded values;
 *   - `if` whose regions only hold a few cheap, speculatable ops (IF_SELECT_MAX_OPS in
 *     all) -> those ops hoisted before it and one `select` per result. Never when a region
 *     holds a load, store, atomic, loop or nested if, an integer division/remainder or
 *     shift (the runtime's debug checks must not fire on a branch that is not taken), a
 *     float division or a transcendental (their derivatives are unbounded or undefined
 *     on the branch not taken: autodiff of a select would multiply an inf/NaN adjoint by
 *     zero and produce NaN);
 *   - `for` with constant bounds lo >= hi -> removed, its results replaced by its inits;
 *   - a `for` carried value that the body yields unchanged (a flag lowering never sets)
 *     -> its body argument and its result replaced by its init (DCE then drops it).
 *
 * Where: ir_optimize()'s fixed-point loop, after fold. Requires a verified module. Keeps
 * valid: the verifier's invariants (ops are rewritten in place with their result value
 * and type kept, or unlinked after every use was replaced by a value that dominates the
 * uses). Dead ops left behind are DCE's job. Never frees IR memory. */
#include "opt_util.h"
#include "passes.h"

enum { IF_SELECT_MAX_OPS = 8 };

typedef enum { KEPT, REWRITTEN, REMOVED } outcome;

static ir_op *def_of(const ir_value *v, ir_opcode code) {
    return v->def && v->def->code == code ? v->def : NULL;
}

/* ---- pure ops -------------------------------------------------------------------------- */

static outcome replace(ir_op *op, ir_value *v) {
    opt_replace_with(op, v);
    return REMOVED;
}

static outcome to_const(ir_op *op, int64_t v) {
    opt_make_const_int(op, v);
    return REWRITTEN;
}

static outcome to_unop(ir_op *op, ir_opcode code, ir_value *a) {
    opt_make_unop(op, code, a);
    return REWRITTEN;
}

static outcome simplify_int(ir_op *op, ir_value *x, ir_value *y) {
    const kern_type *t = op->results[0]->type;
    bool sgn = t->kind == TY_I32 || t->kind == TY_I64;
    int64_t ones = opt_all_ones(t);
    switch (op->code) {
    case IR_ADD:
        if (opt_is_int(y, 0)) return replace(op, x);
        break;
    case IR_SUB:
        if (opt_is_int(y, 0)) return replace(op, x);
        if (x == y) return to_const(op, 0);
        if (opt_is_int(x, 0)) return to_unop(op, IR_NEG, y);
        break;
    case IR_MUL:
        if (opt_is_int(y, 1)) return replace(op, x);
        if (opt_is_int(y, 0)) return to_const(op, 0);
        if (sgn && opt_is_int(y, -1)) return to_unop(op, IR_NEG, x);
        break;
    case IR_DIV:
        if (opt_is_int(y, 1)) return replace(op, x);
        if (sgn && opt_is_int(y, -1)) return to_unop(op, IR_NEG, x);
        break;
    case IR_REM:
        if (opt_is_int(y, 1) || (sgn && opt_is_int(y, -1))) return to_const(op, 0);
        break;
    case IR_AND:
        if (x == y || opt_is_int(y, ones)) return replace(op, x);
        if (opt_is_int(y, 0)) return to_const(op, 0);
        break;
    case IR_OR:
        if (x == y || opt_is_int(y, 0)) return replace(op, x);
        if (opt_is_int(y, ones)) return to_const(op, ones);
        break;
    case IR_XOR:
        if (x == y) return to_const(op, 0);
        if (opt_is_int(y, 0)) return replace(op, x);
        if (opt_is_int(y, ones)) return to_unop(op, IR_NOT, x);
        break;
    case IR_SHL:
    case IR_SHR:
        if (opt_is_int(y, 0)) return replace(op, x);
        break;
    default: break;
    }
    return KEPT;
}

static outcome simplify_float(ir_op *op, ir_value *x, ir_value *y) {
    switch (op->code) {
    case IR_ADD:
        if (opt_is_float(y, -0.0)) return replace(op, x);
        break;
    case IR_SUB:
        if (opt_is_float(y, 0.0)) return replace(op, x);
        if (opt_is_float(x, -0.0)) return to_unop(op, IR_NEG, y);
        break;
    case IR_MUL:
    case IR_DIV:
        if (opt_is_float(y, 1.0)) return replace(op, x);
        if (opt_is_float(y, -1.0)) return to_unop(op, IR_NEG, x);
        break;
    default: break;
    }
    return KEPT;
}

static outcome simplify_cmp(ir_op *op, ir_value *x, ir_value *y) {
    const kern_type *t = x->type;
    if (x == y && !ty_is_float(t)) {
        bool reflexive = op->code == IR_EQ || op->code == IR_LE || op->code == IR_GE;
        return to_const(op, reflexive);
    }
    if (t->kind == TY_BOOL && (op->code == IR_EQ || op->code == IR_NE)) {
        int64_t c;
        if (!opt_const_int(y, &c))
            return KEPT;
        bool same = (op->code == IR_EQ) == (c != 0); /* x==true, x!=false */
        return same ? replace(op, x) : to_unop(op, IR_NOT, x);
    }
    return KEPT;
}

static outcome simplify_select(ir_op *op) {
    ir_value *c = op->operands[0], *a = op->operands[1], *b = op->operands[2];
    if (a == b)
        return replace(op, a);
    if (a->type->kind == TY_BOOL) {
        if (opt_is_int(a, 1) && opt_is_int(b, 0))
            return replace(op, c);
        if (opt_is_int(a, 0) && opt_is_int(b, 1))
            return to_unop(op, IR_NOT, c);
        if (opt_is_int(a, 1)) { /* c ? true : b */
            opt_make_binop(op, IR_OR, c, b);
            return REWRITTEN;
        }
        if (opt_is_int(b, 0)) { /* c ? a : false */
            opt_make_binop(op, IR_AND, c, a);
            return REWRITTEN;
        }
    }
    ir_op *n = def_of(c, IR_NOT);
    if (n) {
        ir_op_set_operand(op, 0, n->operands[0]);
        ir_op_set_operand(op, 1, b);
        ir_op_set_operand(op, 2, a);
        return REWRITTEN;
    }
    return KEPT;
}

static outcome simplify_op(ir_op *op) {
    const ir_opinfo *info = ir_info(op->code);
    if (!(info->flags & OPF_PURE) || op->nregions || op->nresults != 1 ||
        op->code == IR_CONST)
        return KEPT;
    if ((info->flags & OPF_COMMUT) && op->noperands == 2 && opt_const_op(op->operands[0]) &&
        !opt_const_op(op->operands[1])) {
        ir_value *a = op->operands[0];
        ir_op_set_operand(op, 0, op->operands[1]);
        ir_op_set_operand(op, 1, a);
        return REWRITTEN;
    }
    ir_value *x = op->noperands > 0 ? op->operands[0] : NULL;
    ir_value *y = op->noperands > 1 ? op->operands[1] : NULL;
    ir_op *inner;
    switch (op->code) {
    case IR_NEG:
        if ((inner = def_of(x, IR_NEG)))
            return replace(op, inner->operands[0]);
        return KEPT;
    case IR_NOT:
        if ((inner = def_of(x, IR_NOT)))
            return replace(op, inner->operands[0]);
        return KEPT;
    case IR_ABS:
        if (ty_is_unsigned(x->type) || def_of(x, IR_ABS))
            return replace(op, x);
        if ((inner = def_of(x, IR_NEG))) {
            ir_op_set_operand(op, 0, inner->operands[0]);
            return REWRITTEN;
        }
        return KEPT;
    case IR_MIN:
    case IR_MAX: return x == y ? replace(op, x) : KEPT;
    case IR_CAST:
        if (x->type == op->results[0]->type)
            return replace(op, x);
        /* u8 -> i32 -> u8 and f16 -> f32 -> f16 give the value back */
        if ((inner = def_of(x, IR_CAST)) && inner->operands[0]->type == op->results[0]->type &&
            ty_is_narrow(op->results[0]->type) && x->type == ty_arith(op->results[0]->type))
            return replace(op, inner->operands[0]);
        return KEPT;
    case IR_SELECT: return simplify_select(op);
    default: break;
    }
    if (info->rule == T_BOOL)
        return simplify_cmp(op, x, y);
    if (op->noperands != 2 || !ty_is_scalar(op->results[0]->type))
        return KEPT;
    return ty_is_float(op->results[0]->type) ? simplify_float(op, x, y)
                                             : simplify_int(op, x, y);
}

/* ---- control flow ---------------------------------------------------------------------- */

/* Moves every op of src but its terminator before `at`; returns the terminator. */
static ir_op *hoist_region(ir_region *src, ir_op *at) {
    ir_op *term = NULL;
    ir_foreach_op_safe(o, tmp, src) {
        if (ir_info(o->code)->flags & OPF_TERM) {
            term = o;
            continue;
        }
        ir_remove(o);
        ir_insert_before(at, o);
    }
    return term;
}

static void replace_results(ir_op *op, ir_value *const *vals) {
    for (uint32_t i = 0; i < op->nresults; i++)
        ir_replace_uses(op->parent, op->results[i], vals[i]);
}

static bool speculatable(const ir_op *o) {
    switch (o->code) {
    case IR_CONST: case IR_CAST: case IR_ADD: case IR_SUB: case IR_MUL: case IR_NEG:
    case IR_AND: case IR_OR: case IR_XOR: case IR_NOT: case IR_EQ: case IR_NE: case IR_LT:
    case IR_LE: case IR_GT: case IR_GE: case IR_SELECT: case IR_ABS: case IR_SIGN:
    case IR_MIN: case IR_MAX: case IR_CLAMP: case IR_FMA: case IR_FLOOR: case IR_CEIL:
    case IR_ROUND: case IR_DIM:
        return true;
    default: return false;
    }
}

/* Number of non-terminator ops of r if all are speculatable, else -1. */
static int speculatable_count(const ir_region *r) {
    int n = 0;
    ir_foreach_op(o, r) {
        if (ir_info(o->code)->flags & OPF_TERM)
            continue;
        if (!speculatable(o))
            return -1;
        n++;
    }
    return n;
}

static bool if_to_select(ir_op *op) {
    int n0 = speculatable_count(op->regions[0]), n1 = speculatable_count(op->regions[1]);
    if (n0 < 0 || n1 < 0 || n0 + n1 > IF_SELECT_MAX_OPS)
        return false;
    ir_value *cond = op->operands[0];
    ir_op *ty = hoist_region(op->regions[0], op);
    ir_op *ey = hoist_region(op->regions[1], op);
    ir_builder b = ir_builder_before(op->parent->kernel->module, op);
    b.loc = op->loc;
    for (uint32_t i = 0; i < op->nresults; i++) {
        ir_value *tv = ty->operands[i], *ev = ey->operands[i];
        ir_value *v = tv == ev ? tv : ir_select(&b, cond, tv, ev);
        ir_replace_uses(op->parent, op->results[i], v);
    }
    ir_remove(op);
    return true;
}

static bool simplify_if(ir_op *op) {
    int64_t c;
    if (opt_const_int(op->operands[0], &c)) {
        ir_op *y = hoist_region(op->regions[c ? 0 : 1], op);
        replace_results(op, y->operands);
        ir_remove(op);
        return true;
    }
    return if_to_select(op);
}

/* A carried value that the body yields unchanged holds its init in every iteration. */
static bool forward_invariant_carried(ir_op *op) {
    bool changed = false;
    ir_region *body = op->regions[0];
    ir_op *y = body->last;
    uint32_t skip = (op->attr & IR_FOR_EARLY_EXIT) ? 1 : 0;
    if (!y || y->code != IR_YIELD)
        return false;
    for (uint32_t k = 0; k < op->nresults && k + skip < y->noperands; k++) {
        ir_value *arg = body->args[k + 1], *init = op->operands[2 + k];
        if (y->operands[k + skip] != arg)
            continue;
        ir_replace_uses(body, arg, init); /* the yield now passes init along */
        ir_replace_uses(op->parent, op->results[k], init);
        changed = true;
    }
    return changed;
}

static bool simplify_for(ir_op *op) {
    int64_t lo, hi;
    if (!opt_const_int(op->operands[0], &lo) || !opt_const_int(op->operands[1], &hi) ||
        lo < hi) /* canonical imm.i compares in the type's own order (u32 zero-extended) */
        return forward_invariant_carried(op);
    replace_results(op, op->operands + 2);
    ir_remove(op);
    return true;
}

static bool simplify_region(ir_region *r) {
    bool changed = false;
    ir_foreach_op_safe(op, tmp, r) {
        for (uint32_t i = 0; i < op->nregions; i++)
            changed |= simplify_region(op->regions[i]);
        if (op->code == IR_IF) {
            changed |= simplify_if(op);
            continue;
        }
        if (op->code == IR_FOR) {
            changed |= simplify_for(op);
            continue;
        }
        outcome o;
        while ((o = simplify_op(op)) == REWRITTEN)
            changed = true;
        if (o == REMOVED)
            changed = true;
    }
    return changed;
}

bool ir_opt_simplify(ir_module *m) {
    bool changed = false;
    ir_foreach_kernel(k, m)
        changed |= simplify_region(k->body);
    return changed;
}
