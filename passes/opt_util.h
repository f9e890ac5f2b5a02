/* opt_util.h - small inline helpers shared by the optimization passes (fold, simplify,
 * cse, dce): reading constants, the canonical integer form of a constant of a type, and
 * in-place rewrites of an op. Everything here is static inline; no state. */
#ifndef KERN_OPT_UTIL_H
#define KERN_OPT_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "../ir/ir.h"

/* The CONST op defining v, or NULL. */
static inline ir_op *opt_const_op(const ir_value *v) {
    return v && v->def && v->def->code == IR_CONST ? v->def : NULL;
}

/* Integer constant of a bool or integer type, as stored in imm.i. */
static inline bool opt_const_int(const ir_value *v, int64_t *out) {
    ir_op *c = opt_const_op(v);
    if (!c || ty_is_float(v->type) || !ty_is_scalar(v->type))
        return false;
    *out = c->imm.i;
    return true;
}

/* Float constant of an f32/f64 value. */
static inline bool opt_const_float(const ir_value *v, double *out) {
    ir_op *c = opt_const_op(v);
    if (!c || !ty_is_float(v->type))
        return false;
    *out = c->imm.f;
    return true;
}

/* The canonical imm.i of an integer value of type t: i32 sign-extended from its low 32
 * bits, u32 zero-extended, bool 0/1, i64 as is (two's-complement wrapping). */
static inline int64_t opt_wrap(const kern_type *t, uint64_t v) {
    switch (t->kind) {
    case TY_BOOL: return (int64_t)(v & 1);
    case TY_I32: {
        uint32_t lo = (uint32_t)v;
        return lo >= 0x80000000u ? (int64_t)lo - (int64_t)0x100000000 : (int64_t)lo;
    }
    case TY_U32: return (int64_t)(v & 0xffffffffu);
    default: return (int64_t)v;
    }
}

/* The value with every bit set in type t (-1 for signed types, 0xffffffff for u32,
 * true for bool). */
static inline int64_t opt_all_ones(const kern_type *t) { return opt_wrap(t, ~(uint64_t)0); }

/* Bit-exact equality of two doubles (so -0.0 != 0.0 and a NaN equals itself). */
static inline bool opt_same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Is v the constant whose integer value (bool/int) or float value (bit-exact) is given? */
static inline bool opt_is_int(const ir_value *v, int64_t want) {
    int64_t x;
    return opt_const_int(v, &x) && x == want;
}
static inline bool opt_is_float(const ir_value *v, double want) {
    double x;
    return opt_const_float(v, &x) && opt_same_bits(x, want);
}

/* Rewrites op in place into a constant (its result value, and so every use, stays). */
static inline void opt_make_const_int(ir_op *op, int64_t v) {
    op->code = IR_CONST;
    op->noperands = 0;
    op->attr = 0;
    op->imm.i = opt_wrap(op->results[0]->type, (uint64_t)v);
}
static inline void opt_make_const_float(ir_op *op, double v) {
    op->code = IR_CONST;
    op->noperands = 0;
    op->attr = 0;
    op->imm.f = op->results[0]->type->kind == TY_F32 ? (double)(float)v : v;
}

/* Rewrites op in place into a one-operand op (NEG, NOT) of the same result type. */
static inline void opt_make_unop(ir_op *op, ir_opcode code, ir_value *a) {
    op->code = code;
    op->noperands = 1;
    op->attr = 0;
    op->imm.i = 0;
    ir_op_set_operand(op, 0, a);
}

/* Rewrites op in place into a two-operand op (AND, OR) of the same result type. */
static inline void opt_make_binop(ir_op *op, ir_opcode code, ir_value *a, ir_value *b) {
    op->code = code;
    op->noperands = 2;
    op->attr = 0;
    op->imm.i = 0;
    ir_op_set_operand(op, 0, a);
    ir_op_set_operand(op, 1, b);
}

/* Replaces every use of op's single result with v and unlinks op. */
static inline void opt_replace_with(ir_op *op, ir_value *v) {
    ir_replace_uses(op->parent, op->results[0], v);
    ir_remove(op);
}

#endif
