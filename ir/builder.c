/* builder.c - the cursor builder and its typed helpers (see ir.h).
 *
 * Result types follow the type rules of ops.def: T_SAME -> operand 0's type, T_BOOL ->
 * bool, DIM -> i32, LOAD and the atomics -> the array's element type. Control-flow helpers
 * create the op with its regions and region arguments; the caller fills the regions.
 * Every helper asserts (kern_assert) on misuse: a wrong opcode for the helper, a missing
 * operand, operand types that break the op's rule, a wrong index count. Raw ops that break
 * the rules on purpose (tests of the verifier) go through ir_op_new instead. */
#include "ir.h"

ir_builder ir_builder_at_end(ir_module *m, ir_region *r) {
    kern_assert(m && r);
    return (ir_builder){.m = m, .region = r, .before = NULL, .loc = {0, 0}};
}

/* The cursor takes the location of the op it stands before. */
ir_builder ir_builder_before(ir_module *m, ir_op *op) {
    kern_assert(m && op && op->parent);
    return (ir_builder){.m = m, .region = op->parent, .before = op, .loc = op->loc};
}

ir_op *ir_build(ir_builder *b, ir_opcode code, ir_value *const *operands, uint32_t noperands,
                const kern_type *const *result_types, uint32_t nresults, uint32_t nregions) {
    kern_assert(b && b->m && b->region);
    for (uint32_t i = 0; i < noperands; i++)
        kern_assert(operands[i] && operands[i]->type);
    ir_op *op =
        ir_op_new(b->m, code, b->loc, operands, noperands, result_types, nresults, nregions);
    if (b->before) {
        kern_assert(b->before->parent == b->region);
        ir_insert_before(b->before, op);
    } else {
        ir_append(b->region, op);
    }
    return op;
}

/* ---- Constants -------------------------------------------------------------------- */

ir_value *ir_const_int(ir_builder *b, const kern_type *t, int64_t v) {
    kern_assert(t && (t->kind == TY_BOOL || ty_is_int(t)));
    /* Wrap to the type's width, as a C conversion does; u32 is kept zero-extended. */
    switch (t->kind) {
    case TY_BOOL: v = v != 0; break;
    case TY_I32: v = (int32_t)(uint32_t)(uint64_t)v; break;
    case TY_U32: v = (int64_t)(uint32_t)(uint64_t)v; break;
    default: break; /* i64; u64 as its bits */
    }
    ir_op *op = ir_build(b, IR_CONST, NULL, 0, &t, 1, 0);
    op->imm.i = v;
    return op->results[0];
}

ir_value *ir_const_float(ir_builder *b, const kern_type *t, double v) {
    kern_assert(t && ty_is_float(t));
    ir_op *op = ir_build(b, IR_CONST, NULL, 0, &t, 1, 0);
    /* f32 constants hold a double that is exactly a float (rounded here once). */
    op->imm.f = t->kind == TY_F32 ? (double)(float)v : v;
    return op->results[0];
}

ir_value *ir_const_bool(ir_builder *b, bool v) { return ir_const_int(b, ty_bool(), v); }

/* ---- Pure ops --------------------------------------------------------------------- */

/* Asserts that the operands of a T_SAME / T_BOOL op follow its rule and class flags. */
static void check_uniform(ir_opcode code, ir_value *const *ops, uint32_t n) {
    const ir_opinfo *in = ir_info(code);
    kern_assert(in->nops == (int)n && in->nres == 1);
    kern_assert(in->rule == T_SAME || in->rule == T_BOOL);
    const kern_type *t = ops[0]->type;
    kern_assert(ty_is_scalar(t));
    for (uint32_t i = 1; i < n; i++)
        kern_assert(ops[i]->type == t);
    if (in->flags & OPF_FLOAT)
        kern_assert(ty_is_float(t));
    if (in->flags & OPF_INT)
        kern_assert(ty_is_int(t));
    if (in->flags & OPF_NUM)
        kern_assert(ty_is_number(t));
    if (in->flags & OPF_INTBOOL)
        kern_assert(ty_is_int(t) || t->kind == TY_BOOL);
}

static ir_value *build_uniform(ir_builder *b, ir_opcode code, ir_value *const *ops, uint32_t n) {
    kern_assert((unsigned)code < IR__COUNT);
    for (uint32_t i = 0; i < n; i++)
        kern_assert(ops[i] && ops[i]->type);
    check_uniform(code, ops, n);
    const kern_type *t = ir_info(code)->rule == T_BOOL ? ty_bool() : ops[0]->type;
    return ir_build(b, code, ops, n, &t, 1, 0)->results[0];
}

ir_value *ir_unop(ir_builder *b, ir_opcode code, ir_value *a) {
    ir_value *ops[1] = {a};
    return build_uniform(b, code, ops, 1);
}

ir_value *ir_binop(ir_builder *b, ir_opcode code, ir_value *x, ir_value *y) {
    ir_value *ops[2] = {x, y};
    return build_uniform(b, code, ops, 2);
}

ir_value *ir_triop(ir_builder *b, ir_opcode code, ir_value *x, ir_value *y, ir_value *z) {
    if (code == IR_SELECT)
        return ir_select(b, x, y, z);
    ir_value *ops[3] = {x, y, z};
    return build_uniform(b, code, ops, 3);
}

ir_value *ir_cast(ir_builder *b, const kern_type *to, ir_value *v) {
    kern_assert(to && ty_is_scalar(to) && v && v->type && ty_is_scalar(v->type));
    return ir_build(b, IR_CAST, &v, 1, &to, 1, 0)->results[0];
}

ir_value *ir_bitcast(ir_builder *b, const kern_type *to, ir_value *v) {
    kern_assert(to && ty_is_scalar(to) && v && v->type && ty_size(to) == ty_size(v->type));
    return ir_build(b, IR_BITCAST, &v, 1, &to, 1, 0)->results[0];
}

ir_value *ir_select(ir_builder *b, ir_value *c, ir_value *x, ir_value *y) {
    kern_assert(c && x && y && c->type && x->type);
    kern_assert(c->type->kind == TY_BOOL && ty_is_scalar(x->type) && x->type == y->type);
    ir_value *ops[3] = {c, x, y};
    return ir_build(b, IR_SELECT, ops, 3, &x->type, 1, 0)->results[0];
}

/* ---- Arrays ----------------------------------------------------------------------- */

ir_value *ir_dim(ir_builder *b, ir_value *array, int d) {
    kern_assert(array && array->type && ty_is_array(array->type));
    kern_assert(d >= 0 && d < array->type->rank);
    const kern_type *t = ty_i32();
    ir_op *op = ir_build(b, IR_DIM, &array, 1, &t, 1, 0);
    op->imm.i = d;
    return op->results[0];
}

/* Gathers array, indices and (optionally) a value into one operand list on the stack. */
enum { MAX_ACCESS_OPS = KERN_MAX_RANK + 2 };

static uint32_t access_operands(ir_value **ops, ir_value *array, ir_value *const *idx,
                                uint32_t nidx, ir_value *v) {
    kern_assert(array && array->type && ty_is_array(array->type));
    kern_assert(nidx == array->type->rank);
    kern_assert(nidx == 0 || idx);
    uint32_t n = 0;
    ops[n++] = array;
    for (uint32_t i = 0; i < nidx; i++) {
        kern_assert(idx[i] && idx[i]->type && ty_is_int(idx[i]->type));
        ops[n++] = idx[i];
    }
    if (v) {
        /* or an f32 added into an f16/bf16 element (autodiff; checked by ir_atomic) */
        const kern_type *e = array->type->elem;
        kern_assert(v->type == e ||
                    ((e->kind == TY_F16 || e->kind == TY_BF16) && v->type == ty_f32()));
        ops[n++] = v;
    }
    return n;
}

ir_value *ir_load(ir_builder *b, ir_value *array, ir_value *const *idx, uint32_t nidx) {
    ir_value *ops[MAX_ACCESS_OPS];
    uint32_t n = access_operands(ops, array, idx, nidx, NULL);
    return ir_build(b, IR_LOAD, ops, n, &array->type->elem, 1, 0)->results[0];
}

void ir_store(ir_builder *b, ir_value *array, ir_value *const *idx, uint32_t nidx, ir_value *v) {
    kern_assert(v);
    ir_value *ops[MAX_ACCESS_OPS];
    uint32_t n = access_operands(ops, array, idx, nidx, v);
    ir_build(b, IR_STORE, ops, n, NULL, 0, 0);
}

ir_value *ir_atomic(ir_builder *b, ir_opcode code, ir_value *array, ir_value *const *idx,
                    uint32_t nidx, ir_value *v) {
    kern_assert(code == IR_ATOMIC_ADD || code == IR_ATOMIC_SUB || code == IR_ATOMIC_MIN ||
                code == IR_ATOMIC_MAX || code == IR_ATOMIC_XCHG);
    kern_assert(v);
    ir_value *ops[MAX_ACCESS_OPS];
    uint32_t n = access_operands(ops, array, idx, nidx, v);
    kern_assert(array->type->elem->kind != TY_BOOL);
    kern_assert(v->type == array->type->elem || code == IR_ATOMIC_ADD);
    return ir_build(b, code, ops, n, &array->type->elem, 1, 0)->results[0];
}

ir_value *ir_atomic_cas(ir_builder *b, ir_value *array, ir_value *const *idx, uint32_t nidx,
                        ir_value *expected, ir_value *desired) {
    ir_value *ops[MAX_ACCESS_OPS + 1];
    kern_assert(nidx + 3 <= MAX_ACCESS_OPS + 1);
    ops[0] = array;
    for (uint32_t i = 0; i < nidx; i++)
        ops[1 + i] = idx[i];
    ops[1 + nidx] = expected;
    ops[2 + nidx] = desired;
    return ir_build(b, IR_ATOMIC_CAS, ops, nidx + 3, &array->type->elem, 1, 0)->results[0];
}

/* ---- Adstacks --------------------------------------------------------------------- */

void ir_adpush(ir_builder *b, uint32_t stack, ir_value *v) {
    ir_kernel *k = b->region->kernel;
    kern_assert(k && stack < k->nadstacks && v && v->type == k->adstacks[stack].type);
    ir_build(b, IR_ADPUSH, &v, 1, NULL, 0, 0)->imm.i = stack;
}

ir_value *ir_adpop(ir_builder *b, uint32_t stack) {
    ir_kernel *k = b->region->kernel;
    kern_assert(k && stack < k->nadstacks);
    ir_op *op = ir_build(b, IR_ADPOP, NULL, 0, &k->adstacks[stack].type, 1, 0);
    op->imm.i = stack;
    return op->results[0];
}

/* ---- Terminators ------------------------------------------------------------------ */

void ir_yield(ir_builder *b, ir_value *const *vals, uint32_t n) {
    kern_assert(n == 0 || vals);
    ir_build(b, IR_YIELD, vals, n, NULL, 0, 0);
}

void ir_condition(ir_builder *b, ir_value *cond, ir_value *const *vals, uint32_t n) {
    kern_assert(cond && cond->type && cond->type->kind == TY_BOOL);
    kern_assert(n == 0 || vals);
    ir_value **ops = ARENA_ARRAY(&b->m->mem, ir_value *, n + 1);
    ops[0] = cond;
    for (uint32_t i = 0; i < n; i++)
        ops[i + 1] = vals[i];
    ir_build(b, IR_CONDITION, ops, n + 1, NULL, 0, 0);
}

/* ---- Control flow and tasks ------------------------------------------------------- */

ir_op *ir_if(ir_builder *b, ir_value *cond, const kern_type *const *result_types, uint32_t n) {
    kern_assert(cond && cond->type && cond->type->kind == TY_BOOL);
    for (uint32_t i = 0; i < n; i++)
        kern_assert(result_types[i] && ty_is_scalar(result_types[i]));
    return ir_build(b, IR_IF, &cond, 1, result_types, n, 2);
}

/* Result types of a loop: the types of its carried values. */
static const kern_type **carried_types(ir_builder *b, ir_value *const *inits, uint32_t n) {
    kern_assert(n == 0 || inits);
    const kern_type **t = ARENA_ARRAY(&b->m->mem, const kern_type *, n);
    for (uint32_t i = 0; i < n; i++) {
        kern_assert(inits[i] && inits[i]->type && ty_is_scalar(inits[i]->type));
        t[i] = inits[i]->type;
    }
    return t;
}

ir_op *ir_for(ir_builder *b, ir_value *lo, ir_value *hi, ir_value *const *inits, uint32_t n,
              bool early_exit) {
    kern_assert(lo && hi && lo->type && ty_is_int(lo->type) && hi->type == lo->type);
    const kern_type **types = carried_types(b, inits, n);
    ir_value **ops = ARENA_ARRAY(&b->m->mem, ir_value *, n + 2);
    ops[0] = lo;
    ops[1] = hi;
    for (uint32_t i = 0; i < n; i++)
        ops[i + 2] = inits[i];
    ir_op *op = ir_build(b, IR_FOR, ops, n + 2, types, n, 1);
    if (early_exit)
        op->attr |= IR_FOR_EARLY_EXIT;
    ir_region_add_arg(b->m, op->regions[0], lo->type);
    for (uint32_t i = 0; i < n; i++)
        ir_region_add_arg(b->m, op->regions[0], types[i]);
    return op;
}

ir_op *ir_while(ir_builder *b, ir_value *const *inits, uint32_t n) {
    const kern_type **types = carried_types(b, inits, n);
    ir_op *op = ir_build(b, IR_WHILE, inits, n, types, n, 2);
    for (uint32_t r = 0; r < 2; r++)
        for (uint32_t i = 0; i < n; i++)
            ir_region_add_arg(b->m, op->regions[r], types[i]);
    return op;
}

ir_op *ir_parallel(ir_builder *b, ir_value *const *bounds, uint32_t ndims) {
    kern_assert(ndims >= 1 && bounds);
    for (uint32_t d = 0; d < ndims; d++) {
        ir_value *lo = bounds[2 * d], *hi = bounds[2 * d + 1];
        kern_assert(lo && hi && lo->type && ty_is_int(lo->type) && hi->type == lo->type);
    }
    kern_assert(b->region->parent == NULL); /* tasks live at the top level of a kernel */
    ir_op *op = ir_build(b, IR_PARALLEL, bounds, 2 * ndims, NULL, 0, 1);
    for (uint32_t d = 0; d < ndims; d++)
        ir_region_add_arg(b->m, op->regions[0], bounds[2 * d]->type);
    return op;
}

ir_op *ir_serial(ir_builder *b) {
    kern_assert(b->region->parent == NULL);
    return ir_build(b, IR_SERIAL, NULL, 0, NULL, 0, 1);
}
