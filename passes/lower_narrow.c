/* lower_narrow.c - conversions of the storage types f16, bf16, i8, u8, i16 and u16
 * written once as integer IR, so that an emitter needs no half-precision arithmetic, no
 * Float16/Int8 capability and no libcall (ir_lower_narrow; language.md 11.4).
 *
 * What: every `cast` with a storage type on either side becomes a chain that the emitters
 * map one to one: integer <-> integer of any width (truncate, or extend by the source's
 * signedness), integer <-> f32/f64, and `bitcast` between numbers of one size. f16 and
 * bf16 values are then only loaded, stored and bitcast to and from u16, so an emitter
 * treats them as 16-bit integers.
 *   f16 -> f32    from the bits h: a normal number moves its exponent (bits << 13 plus
 *                 (127 - 15) << 23), inf/NaN sets the f32 exponent, a subnormal is its
 *                 mantissa as an f32 times 2^-24 (exact; no f32 subnormal on the way, so
 *                 it holds where f32 subnormals flush to zero);
 *   f32 -> f16    round to nearest even with integer ops (F. Giesen's float_to_half_fast3
 *                 _rtne): |x| >= 65536 or NaN: inf or a quiet NaN; |x| < 2^-14: the low
 *                 bits of x + 0.5f (the f32 add rounds to a multiple of 2^-24, ties to
 *                 even); otherwise bits + 0xc8000fff + the kept mantissa's lowest bit,
 *                 shifted right 13 (a carry into the exponent rounds up to inf);
 *   bf16 -> f32   u32(bits) << 16, bitcast;
 *   f32 -> bf16   (bits + 0x7fff + bit 16 of bits) >> 16, NaN quieted: (bits >> 16) | 0x40;
 *   f64 -> f16/bf16  rounded once: f64 -> f32 rounded to odd (the nearest f32 toward zero
 *                 with its lowest bit set when inexact), then as f32: 24 bits >= 2p + 2
 *                 for both, so the second rounding is exact (Boldo and Melquiond, 2008);
 *   integers      i8/u8/i16/u16 <-> a float or bool go through i32; an integer to f16
 *                 through f32 (exact below 2^24, and f16 overflows long before), to bf16
 *                 through f64 and the rounding to odd (i64/u64 beyond 2^53 round twice:
 *                 docs/reference.md); a float to i8..u16 through i32, then wrapped.
 * The atomic add of an f32 into an f16/bf16 element (made by autodiff: the adjoint of a
 * load; old := round(f32(old) + v)) becomes a compare-and-swap loop on the element,
 *     h = bits(load a[i])
 *     while (cur = h) { n = round(f32(cur) + v); seen = bits(atomic_cas a[i], cur, n);
 *                       condition seen != cur, seen } do (x) { yield x }
 * (bits: the element's 16 bits in a u32, the loop-carried type; compared as bits, so a
 * NaN element ends the loop too)
 * with the conversions above, so an emitter only learns a 16-bit compare-and-swap.
 *
 * Where: the end of ir_lower_semantics (passes/lower_semantics.c), so every lowered
 * module has it; the interpreter runs the unlowered IR and gives these casts their
 * meaning directly (common/half.c). Requires a verified module; the result verifies. */
#include "passes.h"

static const kern_type *u16t(void) { return ty_scalar(TY_U16); }

static ir_value *u32c(ir_builder *b, uint32_t v) { return ir_const_int(b, ty_u32(), v); }

static ir_value *bin(ir_builder *b, ir_opcode code, ir_value *x, ir_value *y) {
    return ir_binop(b, code, x, y);
}

/* f16 bits (u16) -> f32 */
static ir_value *f16_to_f32(ir_builder *b, ir_value *h) {
    ir_value *w = ir_cast(b, ty_u32(), h);
    ir_value *sign = bin(b, IR_SHL, bin(b, IR_AND, w, u32c(b, 0x8000)), u32c(b, 16));
    ir_value *a = bin(b, IR_AND, w, u32c(b, 0x7fff));
    ir_value *e = bin(b, IR_AND, w, u32c(b, 0x7c00));
    ir_value *moved = bin(b, IR_SHL, a, u32c(b, 13));
    ir_value *norm = bin(b, IR_ADD, moved, u32c(b, 0x38000000));
    ir_value *infnan = bin(b, IR_OR, moved, u32c(b, 0x7f800000));
    ir_value *sub = bin(b, IR_MUL, ir_cast(b, ty_f32(), a), ir_const_float(b, ty_f32(), 0x1p-24));
    ir_value *bits = ir_select(b, bin(b, IR_EQ, e, u32c(b, 0x7c00)), infnan, norm);
    bits = ir_select(b, bin(b, IR_EQ, e, u32c(b, 0)), ir_bitcast(b, ty_u32(), sub), bits);
    return ir_bitcast(b, ty_f32(), bin(b, IR_OR, bits, sign));
}

/* f32 -> f16 bits (u16), to nearest even */
static ir_value *f32_to_f16(ir_builder *b, ir_value *x) {
    ir_value *u = ir_bitcast(b, ty_u32(), x);
    ir_value *sign = bin(b, IR_AND, u, u32c(b, 0x80000000u));
    ir_value *a = bin(b, IR_XOR, u, sign);
    ir_value *big =
        ir_select(b, bin(b, IR_GT, a, u32c(b, 0x7f800000)), u32c(b, 0x7e00), u32c(b, 0x7c00));
    ir_value *f = bin(b, IR_ADD, ir_bitcast(b, ty_f32(), a), ir_const_float(b, ty_f32(), 0.5));
    ir_value *small = bin(b, IR_SUB, ir_bitcast(b, ty_u32(), f), u32c(b, 0x3f000000));
    ir_value *odd = bin(b, IR_AND, bin(b, IR_SHR, a, u32c(b, 13)), u32c(b, 1));
    ir_value *norm = bin(b, IR_ADD, bin(b, IR_ADD, a, u32c(b, 0xc8000fffu)), odd);
    norm = bin(b, IR_SHR, norm, u32c(b, 13));
    ir_value *o = ir_select(b, bin(b, IR_LT, a, u32c(b, 0x38800000)), small, norm);
    o = ir_select(b, bin(b, IR_GE, a, u32c(b, 0x47800000)), big, o);
    o = bin(b, IR_OR, o, bin(b, IR_SHR, sign, u32c(b, 16)));
    return ir_cast(b, u16t(), o);
}

/* bf16 bits (u16) -> f32 */
static ir_value *bf16_to_f32(ir_builder *b, ir_value *h) {
    ir_value *w = bin(b, IR_SHL, ir_cast(b, ty_u32(), h), u32c(b, 16));
    return ir_bitcast(b, ty_f32(), w);
}

/* f32 -> bf16 bits (u16), to nearest even */
static ir_value *f32_to_bf16(ir_builder *b, ir_value *x) {
    ir_value *u = ir_bitcast(b, ty_u32(), x);
    ir_value *hi = bin(b, IR_SHR, u, u32c(b, 16));
    ir_value *r =
        bin(b, IR_ADD, bin(b, IR_ADD, u, u32c(b, 0x7fff)), bin(b, IR_AND, hi, u32c(b, 1)));
    r = bin(b, IR_SHR, r, u32c(b, 16));
    ir_value *quiet = bin(b, IR_OR, hi, u32c(b, 0x40));
    return ir_cast(b, u16t(), ir_select(b, bin(b, IR_NE, x, x), quiet, r));
}

/* f64 -> f32 rounded to odd */
static ir_value *f64_to_f32_odd(ir_builder *b, ir_value *d) {
    ir_value *f = ir_cast(b, ty_f32(), d);
    ir_value *back = ir_cast(b, ty_f64(), f);
    ir_value *inexact = bin(b, IR_NE, back, d);
    ir_value *away = bin(b, IR_GT, ir_unop(b, IR_ABS, back), ir_unop(b, IR_ABS, d));
    ir_value *u = ir_bitcast(b, ty_u32(), f);
    u = ir_select(b, away, bin(b, IR_SUB, u, u32c(b, 1)), u);
    u = ir_select(b, inexact, bin(b, IR_OR, u, u32c(b, 1)), u);
    return ir_bitcast(b, ty_f32(), u);
}

static bool is_half(const kern_type *t) { return t->kind == TY_F16 || t->kind == TY_BF16; }

static ir_value *convert(ir_builder *b, ir_value *v, const kern_type *to);

/* v (not f16/bf16) as an f32 that rounds to the right f16/bf16 */
static ir_value *to_f32_for(ir_builder *b, ir_value *v, const kern_type *to) {
    const kern_type *t = v->type;
    if (t == ty_f32())
        return v;
    if (t == ty_f64())
        return f64_to_f32_odd(b, v);
    if (ty_is_narrow(t) || t->kind == TY_BOOL)
        return ir_cast(b, ty_f32(), convert(b, v, ty_i32()));
    if (to->kind == TY_F16) /* an integer: exact below 2^24, inf in f16 above */
        return ir_cast(b, ty_f32(), v);
    return f64_to_f32_odd(b, ir_cast(b, ty_f64(), v));
}

/* v converted to `to` with only the casts an emitter maps directly. */
static ir_value *convert(ir_builder *b, ir_value *v, const kern_type *to) {
    const kern_type *from = v->type;
    if (from == to)
        return v;
    if (is_half(from)) {
        ir_value *bits = ir_bitcast(b, u16t(), v);
        ir_value *f = from->kind == TY_F16 ? f16_to_f32(b, bits) : bf16_to_f32(b, bits);
        return convert(b, f, to);
    }
    if (is_half(to)) {
        ir_value *f = to_f32_for(b, v, to);
        ir_value *bits = to->kind == TY_F16 ? f32_to_f16(b, f) : f32_to_bf16(b, f);
        return ir_bitcast(b, to, bits);
    }
    bool nf = ty_is_narrow(from), nt = ty_is_narrow(to);
    if ((!nf && !nt) || (ty_is_int(from) && ty_is_int(to)))
        return ir_cast(b, to, v);
    if (nf) /* i8..u16 to a float or bool */
        return ir_cast(b, to, ir_cast(b, ty_i32(), v));
    /* a float or bool to i8..u16: through i32, then wrapped */
    return ir_cast(b, to, convert(b, v, ty_i32()));
}

static bool needs_lowering(const ir_op *op) {
    const kern_type *f = op->operands[0]->type, *t = op->results[0]->type;
    if (!ty_is_narrow(f) && !ty_is_narrow(t))
        return false;
    return is_half(f) || is_half(t) || !(ty_is_int(f) && ty_is_int(t));
}

static bool is_half_add(const ir_op *op) {
    return op->code == IR_ATOMIC_ADD && is_half(op->operands[0]->type->elem);
}

/* atomic_add a[idx], v (f16/bf16 a, f32 v) as a compare-and-swap loop; returns the old
 * element. */
static ir_value *lower_half_add(ir_builder *b, const ir_op *op) {
    ir_value *a = op->operands[0], *v = op->operands[op->noperands - 1];
    ir_value *const *idx = op->operands + 1;
    uint32_t nidx = op->noperands - 2;
    const kern_type *et = a->type->elem;
    /* the loop carries the element's bits as a u32 (no storage type is loop-carried) */
    ir_value *h = ir_cast(b, ty_u32(), ir_bitcast(b, u16t(), ir_load(b, a, idx, nidx)));
    ir_op *w = ir_while(b, &h, 1);
    ir_builder in = ir_builder_at_end(b->m, w->regions[0]);
    in.loc = b->loc;
    ir_value *cur = w->regions[0]->args[0];
    ir_value *curh = ir_bitcast(&in, et, ir_cast(&in, u16t(), cur));
    ir_value *n = convert(&in, ir_binop(&in, IR_ADD, convert(&in, curh, ty_f32()), v), et);
    ir_value *seen = ir_atomic_cas(&in, a, idx, nidx, curh, n);
    ir_value *sbits = ir_cast(&in, ty_u32(), ir_bitcast(&in, u16t(), seen));
    ir_condition(&in, bin(&in, IR_NE, sbits, cur), &sbits, 1);
    ir_builder after = ir_builder_at_end(b->m, w->regions[1]);
    after.loc = b->loc;
    ir_yield(&after, w->regions[1]->args, 1);
    return ir_bitcast(b, et, ir_cast(b, u16t(), w->results[0]));
}

static bool lower_region(ir_module *m, ir_subst *s, ir_region *r) {
    bool changed = false;
    for (ir_op *op = r->first, *next; op; op = next) {
        next = op->next;
        ir_subst_op(s, op);
        for (uint32_t i = 0; i < op->nregions; i++)
            changed |= lower_region(m, s, op->regions[i]);
        bool add = is_half_add(op);
        if (!add && (op->code != IR_CAST || !needs_lowering(op)))
            continue;
        ir_builder b = ir_builder_before(m, op);
        b.loc = op->loc;
        ir_value *nv =
            add ? lower_half_add(&b, op) : convert(&b, op->operands[0], op->results[0]->type);
        ir_subst_add(s, op->results[0], nv);
        ir_remove(op);
        changed = true;
    }
    return changed;
}

bool ir_lower_narrow(ir_module *m) {
    ir_subst s = {0};
    bool changed = false;
    for (ir_kernel *k = m->kernels; k; k = k->next) {
        ir_subst_begin(&s, k);
        changed |= lower_region(m, &s, k->body);
    }
    ir_subst_free(&s);
    return changed;
}
