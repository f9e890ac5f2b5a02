/* ad_promote.c - f32 -> f64 everywhere (ad_promote_f64), for `kernc gradcheck`.
 *
 * What: retypes every f32 of the module to f64: kernel parameters (scalars and array
 * elements), region arguments, op results (consts keep their value: imm.f is a double
 * already), and the adstack table. A cast whose operand and result then have the same
 * type (f32 <-> f64 in the source) is removed and its uses take the operand.
 * Why: gradcheck compares K.grad with central finite differences; both must run in f64
 * so that the differences measure the derivative and not f32 rounding (reference section 10).
 * A bitcast between f32 and a 32-bit integer (a field of a struct array stored as f32
 * words, compiler/lower_agg.c) keeps its meaning through an f32: f64 -> f32 -> i32 and
 * i32 -> f32 -> f64 (exact for every bit pattern but signalling NaNs, which gradcheck's
 * integer fields are not).
 * Where: after lowering and the first optimization, before the gradient kernels are built
 * (kc_options.promote_f64 in kc_compile_source). Requires a verified module; keeps it
 * verified (every op's type rule holds again after the uniform retyping). Never frees. */
#include "passes.h"

static const kern_type *promoted(const kern_type *t) {
    if (t->kind == TY_F32)
        return ty_f64();
    if (t->kind == TY_ARRAY && t->elem->kind == TY_F32)
        return ty_array(ty_f64(), t->rank);
    return t;
}

typedef struct promote_state {
    bool changed;
    kern_ptrvec dead_casts;
} promote_state;

static void retype(promote_state *s, ir_value *v) {
    const kern_type *t = promoted(v->type);
    if (t != v->type) {
        v->type = t;
        s->changed = true;
    }
}

static void retype_region_args(promote_state *s, ir_region *r) {
    for (uint32_t i = 0; i < r->nargs; i++)
        retype(s, r->args[i]);
}

static void promote_op(ir_op *op, void *user) {
    promote_state *s = user;
    for (uint32_t i = 0; i < op->nresults; i++)
        retype(s, op->results[i]);
    for (uint32_t i = 0; i < op->nregions; i++)
        retype_region_args(s, op->regions[i]);
}

/* Bitcasts whose operand or result became f64: through an f32 again. */
static void find_wide_bitcast(ir_op *op, void *user) {
    promote_state *s = user;
    if (op->code == IR_BITCAST &&
        ty_size(op->operands[0]->type) != ty_size(op->results[0]->type))
        ptrvec_push(&s->dead_casts, op);
}

static void narrow_bitcast(ir_module *m, ir_op *op) {
    ir_builder b = ir_builder_before(m, op);
    b.loc = op->loc;
    if (op->operands[0]->type == ty_f64()) { /* f64 -> i32: cast to f32 first */
        ir_op_set_operand(op, 0, ir_cast(&b, ty_f32(), op->operands[0]));
        return;
    }
    /* i32 -> f64: the bitcast gives an f32, a cast after it the f64 */
    ir_value *wide = op->results[0];
    ir_value *bits = ir_build(&b, IR_BITCAST, op->operands, 1, (const kern_type *[]){ty_f32()}, 1,
                              0)->results[0];
    ir_value *f64 = ir_cast(&b, ty_f64(), bits);
    ir_replace_uses(op->parent->kernel->body, wide, f64);
    ir_remove(op);
}

/* Marks the casts that became identities; operands were retyped by the walk already
 * when they are defined earlier (SSA: every operand is defined before its use). */
static void find_identity_cast(ir_op *op, void *user) {
    promote_state *s = user;
    if (op->code == IR_CAST && op->noperands == 1 && op->nresults == 1 &&
        op->operands[0]->type == op->results[0]->type)
        ptrvec_push(&s->dead_casts, op);
}

bool ad_promote_f64(ir_module *m) {
    promote_state s = {0};
    ir_foreach_kernel(k, m) {
        for (uint32_t i = 0; i < k->nparams; i++) {
            const kern_type *t = promoted(k->params[i].type);
            s.changed |= t != k->params[i].type;
            k->params[i].type = t;
        }
        for (uint32_t i = 0; i < k->nadstacks; i++) {
            const kern_type *t = promoted(k->adstacks[i].type);
            s.changed |= t != k->adstacks[i].type;
            k->adstacks[i].type = t;
        }
        if (!k->body)
            continue;
        retype_region_args(&s, k->body);
        ir_walk(k->body, promote_op, &s);
        s.dead_casts.len = 0;
        ir_walk(k->body, find_wide_bitcast, &s);
        for (int i = 0; i < s.dead_casts.len; i++)
            narrow_bitcast(m, s.dead_casts.data[i]);
        s.dead_casts.len = 0;
        ir_walk(k->body, find_identity_cast, &s);
        for (int i = 0; i < s.dead_casts.len; i++) {
            ir_op *op = s.dead_casts.data[i];
            ir_replace_uses(k->body, op->results[0], op->operands[0]);
            ir_remove(op);
            s.changed = true;
        }
    }
    ptrvec_free(&s.dead_casts);
    return s.changed;
}
