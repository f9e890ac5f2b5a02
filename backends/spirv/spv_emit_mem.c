/* spv_emit_mem.c - memory in SPIR-V: how values are stored (bool as a byte), the storage
 * buffers of array parameters and of the adstack heap (docs/spirv-abi.md), array loads,
 * stores and atomics with their bounds checks, and adstack push and pop.
 *
 * An array parameter is a runtime array in a Block struct, viewed with its element type
 * and, for float atomics that SPIR-V has no instruction for, through an integer alias of
 * the same binding: a compare-and-swap loop on the bits. f32 adds whose old value nobody
 * reads go to spv_emit_adds.c. */
#include "../../common/spvblock.h"
#include "../../runtime/abi.h"
#include "spv_emit_priv.h"

/* ---- types ------------------------------------------------------------------------------ */

/* f32 or f64: a float in registers and in memory (f16/bf16 are their bits, a u16). */
static bool real_float(const kern_type *t) { return t->kind == TY_F32 || t->kind == TY_F64; }

static uint32_t mem_type(spv_emitter *em, const kern_type *t) {
    switch (ty_size(t)) {
    case 1:
        spv_capability(&em->b, SpvCapabilityStorageBuffer8BitAccess);
        spv_extension(&em->b, "SPV_KHR_8bit_storage");
        return spv_type_uint(&em->b, 8);
    case 2:
        spv_capability(&em->b, SpvCapabilityStorageBuffer16BitAccess);
        spv_extension(&em->b, "SPV_KHR_16bit_storage");
        return spv_type_uint(&em->b, 16);
    default: return spv_reg_type(em, t);
    }
}

/* The integer type of t's bits in memory (bool: u8, f32: u32, f64: u64). */
static uint32_t int_mem_type(spv_emitter *em, const kern_type *t) {
    switch (ty_size(t)) {
    case 1:
    case 2: return mem_type(em, t);
    case 8: return spv_type_uint(&em->b, 64);
    default: return em->t_u32;
    }
}

static uint32_t zero_of(spv_emitter *em, const kern_type *t) {
    switch (t->kind) {
    case TY_BOOL: return spv_const_bool(&em->b, false);
    case TY_I32:
    case TY_U32: return cu32(em, 0);
    case TY_I64:
    case TY_U64: return cu64(em, 0);
    case TY_F32: return spv_const_f32(&em->b, 0.0f);
    case TY_F64: return spv_const_f64(&em->b, 0.0);
    default: return spv_const_bits(&em->b, spv_reg_type(em, t), 8 * ty_size(t), 0);
    }
}

/* ---- buffers ---------------------------------------------------------------------------- */

/* The Block struct { T data[]; } of a storage buffer of elements of SPIR-V type elem. */
static uint32_t array_struct(spv_emitter *em, uint32_t elem, bool fl, int bits) {
    int bi = bits == 8 ? 0 : bits == 16 ? 1 : bits == 32 ? 2 : 3;
    uint32_t *slot = &em->arr_struct[fl][bi];
    if (!*slot) {
        uint32_t rt = spv_type_rtarray(&em->b, elem, (uint32_t)bits / 8);
        uint32_t off = 0;
        *slot = spv_type_struct(&em->b, &rt, &off, 1, true);
    }
    return *slot;
}

static uint32_t buffer_var(spv_emitter *em, uint32_t elem, bool fl, int bits, int binding) {
    uint32_t st = array_struct(em, elem, fl, bits);
    return spv_global(&em->b, spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, st),
                      SpvStorageClassStorageBuffer, 0, binding);
}

/* The heap viewed with elements of t's size. */
static uint32_t heap_var(spv_emitter *em, const kern_type *t, uint32_t *elem) {
    int size = ty_size(t), bi = size == 1 ? 0 : size == 4 ? 1 : 2;
    *elem = int_mem_type(em, t);
    if (!em->v_heap[bi]) {
        static const char *const names[3] = {"ad_heap8", "ad_heap32", "ad_heap64"};
        em->v_heap[bi] = buffer_var(em, *elem, false, size * 8, KERN_SPV_BIND_HEAP8 + bi);
        spv_name(&em->b, em->v_heap[bi], -1, names[bi]);
    }
    spv_use_global(em, em->v_heap[bi]);
    return em->v_heap[bi];
}

uint32_t spv_sizer_result_var(spv_emitter *em, int bits) {
    uint32_t *slot = &em->v_res[bits == 64];
    if (!*slot) {
        uint32_t elem = bits == 64 ? u64t(em) : em->t_u32;
        *slot = buffer_var(em, elem, false, bits,
                           bits == 64 ? KERN_SPV_BIND_HEAP64 : KERN_SPV_BIND_HEAP32);
        spv_decorate(&em->b, *slot, SpvDecorationCoherent, NULL, 0);
        spv_name(&em->b, *slot, -1, bits == 64 ? "sizer_res64" : "sizer_res32");
    }
    spv_use_global(em, *slot);
    return *slot;
}

/* ---- arrays ----------------------------------------------------------------------------- */

/* The variable of array parameter p viewed with its element type, or (as_int) with the
 * integer type of the same size: a second variable of the same binding. */
static uint32_t array_var(spv_emitter *em, int p, bool as_int) {
    const kern_type *et = em->kernel->params[p].type->elem;
    uint32_t *slot = as_int && real_float(et) ? &em->v_alias[p] : &em->v_arr[p];
    if (!*slot) {
        bool fl = real_float(et) && !as_int;
        uint32_t elem = fl ? mem_type(em, et) : int_mem_type(em, et);
        *slot = buffer_var(em, elem, fl, ty_size(et) * 8, KERN_SPV_BIND_PARAM0 + p);
        spv_name(&em->b, *slot, -1, em->kernel->params[p].name);
    }
    spv_use_global(em, *slot);
    return *slot;
}

/* Whether a loop test has checked op's bounds (emit_for, spv_emit_ctrl.c). */
static bool tested(const spv_emitter *em, const ir_op *op) {
    for (int i = 0; i < em->ntested; i++)
        if (em->tested[i] == op)
            return true;
    return false;
}

/* The linear element index (u64) of an access op, with its bounds checks added to g. */
static uint32_t element_index(spv_emitter *em, const ir_op *op, spv_guard *g) {
    int p = param_of(em, op->operands[0]);
    const kern_type *at = op->operands[0]->type;
    uint32_t u64 = u64t(em), lin = 0;
    for (int d = 0; d < at->rank; d++) {
        const ir_value *iv = op->operands[1 + d];
        /* an index in bounds by construction (passes/inbounds.c) or by its loop's test is
         * not negative: widened without the sign, and not checked */
        bool in = ir_index_in_dim(iv, op->operands[0], d) || tested(em, op);
        uint32_t i = in && !is_i64(iv->type) ? spv_op1(&em->b, SpvOpUConvert, u64, val(em, iv))
                                             : spv_to_u64(em, val(em, iv), iv->type);
        uint32_t n = em->shape[p][d];
        if (em->checks && !in)
            spv_guard_add(em, g, spv_op2(&em->b, SpvOpULessThan, em->t_bool, i, n),
                          KERN_DEVERR_BOUNDS, cu32(em, (uint32_t)d), i, n);
        lin = d == 0 ? i
                     : spv_op2(&em->b, SpvOpIAdd, u64, spv_op2(&em->b, SpvOpIMul, u64, lin, n), i);
    }
    return lin;
}

uint32_t spv_emit_load_in_bounds(spv_emitter *em, const ir_op *op) {
    int p = param_of(em, op->operands[0]);
    const kern_type *at = op->operands[0]->type, *et = at->elem;
    uint32_t u64 = u64t(em), lin = 0, in = 0;
    for (int d = 0; d < at->rank; d++) {
        const ir_value *iv = op->operands[1 + d];
        uint32_t i = spv_to_u64(em, val(em, iv), iv->type), n = em->shape[p][d];
        uint32_t ok = spv_op2(&em->b, SpvOpULessThan, em->t_bool, i, n);
        in = d == 0 ? ok : spv_op2(&em->b, SpvOpLogicalAnd, em->t_bool, in, ok);
        lin = d == 0 ? i
                     : spv_op2(&em->b, SpvOpIAdd, u64, spv_op2(&em->b, SpvOpIMul, u64, lin, n), i);
    }
    uint32_t mt = mem_type(em, et), pre = em->cur, l_load = spv_id(&em->b), l_j = spv_id(&em->b);
    selection_merge(em, l_j);
    branch_cond(em, in, l_load, l_j);
    label(em, l_load);
    uint32_t x = spv_op1(&em->b, SpvOpLoad, mt, spv_element_ptr(em, p, false, lin));
    uint32_t from = em->cur;
    branch(em, l_j);
    label(em, l_j);
    uint32_t r = phi2(em, mt, x, from, spv_const_bits(&em->b, mt, 8 * ty_size(et), 0), pre);
    if (et->kind == TY_BOOL)
        r = spv_op2(&em->b, SpvOpINotEqual, em->t_bool, r, spv_const_u8(&em->b, 0));
    return r;
}

uint32_t spv_element_ptr(spv_emitter *em, int p, bool as_int, uint32_t lin) {
    const kern_type *et = em->kernel->params[p].type->elem;
    uint32_t elem = as_int ? int_mem_type(em, et) : mem_type(em, et);
    uint32_t ops[3] = {array_var(em, p, as_int), cu32(em, 0), lin};
    return spv_op(&em->b, SpvOpAccessChain,
                  spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, elem), ops, 3);
}

static uint32_t bitcast(spv_emitter *em, uint32_t type, uint32_t v) {
    return spv_op1(&em->b, SpvOpBitcast, type, v);
}

/* The head of a compare-and-swap loop on *ptr (of integer type it): loads it, opens the
 * loop (labels l: head, body, try, cont, done) and returns the phi of the value seen, now
 * in the body block; *phi_at is where the value from cont is patched in. */
static uint32_t cas_head(spv_emitter *em, uint32_t it, uint32_t ptr, uint32_t l[5],
                         uint32_t *phi_at) {
    uint32_t lops[3] = {ptr, atomic_scope(em), relaxed(em)};
    uint32_t cur = spv_op(&em->b, SpvOpAtomicLoad, it, lops, 3);
    uint32_t pre = em->cur;
    for (int i = 0; i < 5; i++)
        l[i] = spv_id(&em->b);
    branch(em, l[0]);
    label(em, l[0]);
    *phi_at = spv_here(&em->b) + 3; /* OpPhi: header, type, id, then pairs */
    uint32_t seen = phi2(em, it, cur, pre, 0, l[3]);
    spv_instv(&em->b.funcs, SpvOpLoopMerge, 3, l[4], l[3], SpvLoopControlMaskNone);
    branch(em, l[1]);
    label(em, l[1]);
    return seen;
}

/* A compare-and-swap loop on the integer bits of a float element: new = f(old), where f is
 * an add of v (min/max: v when v beats old, with the ties rule of emit_minmax; else the
 * loop ends without a store). Returns old. */
static uint32_t emit_cas_loop(spv_emitter *em, ir_opcode code, const kern_type *t, uint32_t ptr,
                              uint32_t v) {
    uint32_t it = int_mem_type(em, t), ft = spv_reg_type(em, t);
    if (it != em->t_u32)
        spv_capability(&em->b, SpvCapabilityInt64Atomics);
    uint32_t l[5], phi_at, oldbits = cas_head(em, it, ptr, l, &phi_at);
    uint32_t l_head = l[0], l_try = l[2], l_cont = l[3], l_done = l[4];
    uint32_t old = bitcast(em, ft, oldbits), nv;
    if (code == IR_ATOMIC_ADD || code == IR_ATOMIC_SUB) {
        nv = spv_op2(&em->b, code == IR_ATOMIC_ADD ? SpvOpFAdd : SpvOpFSub, ft, old, v);
        branch(em, l_try);
    } else {
        uint32_t take = spv_emit_compare(em, code == IR_ATOMIC_MIN ? IR_LT : IR_GT, t, v, old);
        nv = v;
        branch_cond(em, take, l_try, l_done);
    }
    label(em, l_try);
    uint32_t cops[6] = {ptr,         atomic_scope(em),    relaxed(em),
                        relaxed(em), bitcast(em, it, nv), oldbits};
    uint32_t seen = spv_op(&em->b, SpvOpAtomicCompareExchange, it, cops, 6);
    uint32_t ok = spv_op2(&em->b, SpvOpIEqual, em->t_bool, seen, oldbits);
    branch_cond(em, ok, l_done, l_cont);
    label(em, l_cont);
    branch(em, l_head);
    spv_patch(&em->b, phi_at + 2, seen);
    label(em, l_done);
    return old;
}

/* atomic_cas on the 16-bit element lin of array parameter p (ir_lower_narrow's loops):
 * Vulkan has no 16-bit atomics, so the compare-and-swap is on the 32-bit word holding the
 * element, through a u32 view of the same binding (buffers are padded to 4 bytes:
 * vk_mem_create); it loops while only the word's other half changed. Returns the old
 * element as u16. */
static uint32_t emit_cas16(spv_emitter *em, int p, uint32_t lin, uint32_t expected,
                           uint32_t desired) {
    uint32_t u32 = em->t_u32, u64 = u64t(em);
    uint32_t *slot = &em->v_alias[p]; /* unused otherwise for a 16-bit element type */
    if (!*slot) {
        *slot = buffer_var(em, u32, false, 32, KERN_SPV_BIND_PARAM0 + p);
        spv_name(&em->b, *slot, -1, em->kernel->params[p].name);
    }
    spv_use_global(em, *slot);
    uint32_t wi = spv_op2(&em->b, SpvOpShiftRightLogical, u64, lin, spv_const_u64(&em->b, 1));
    uint32_t odd = spv_op1(&em->b, SpvOpUConvert, u32,
                           spv_op2(&em->b, SpvOpBitwiseAnd, u64, lin, spv_const_u64(&em->b, 1)));
    uint32_t sh = spv_op2(&em->b, SpvOpIMul, u32, odd, cu32(em, 16));
    uint32_t keep = spv_op1(&em->b, SpvOpNot, u32,
                            spv_op2(&em->b, SpvOpShiftLeftLogical, u32, cu32(em, 0xffff), sh));
    uint32_t e32 = spv_op1(&em->b, SpvOpUConvert, u32, expected);
    uint32_t d32 = spv_op2(&em->b, SpvOpShiftLeftLogical, u32,
                           spv_op1(&em->b, SpvOpUConvert, u32, desired), sh);
    uint32_t aops[3] = {*slot, cu32(em, 0), wi};
    uint32_t ptr = spv_op(&em->b, SpvOpAccessChain,
                          spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, u32), aops, 3);
    uint32_t l[5], phi_at, w = cas_head(em, u32, ptr, l, &phi_at);
    uint32_t l_head = l[0], l_try = l[2], l_cont = l[3], l_done = l[4];
    uint32_t half = spv_op2(&em->b, SpvOpBitwiseAnd, u32,
                            spv_op2(&em->b, SpvOpShiftRightLogical, u32, w, sh), cu32(em, 0xffff));
    branch_cond(em, spv_op2(&em->b, SpvOpINotEqual, em->t_bool, half, e32), l_done, l_try);
    label(em, l_try);
    uint32_t nw =
        spv_op2(&em->b, SpvOpBitwiseOr, u32, spv_op2(&em->b, SpvOpBitwiseAnd, u32, w, keep), d32);
    uint32_t cops[6] = {ptr, atomic_scope(em), relaxed(em), relaxed(em), nw, w};
    uint32_t seen = spv_op(&em->b, SpvOpAtomicCompareExchange, u32, cops, 6);
    branch_cond(em, spv_op2(&em->b, SpvOpIEqual, em->t_bool, seen, w), l_done, l_cont);
    label(em, l_cont);
    branch(em, l_head);
    spv_patch(&em->b, phi_at + 2, seen);
    label(em, l_done);
    return spv_op1(&em->b, SpvOpUConvert, spv_type_uint(&em->b, 16), half);
}

uint32_t spv_emit_access(spv_emitter *em, const ir_op *op) {
    int p = param_of(em, op->operands[0]);
    const kern_type *et = op->operands[0]->type->elem;
    uint32_t rt = spv_reg_type(em, et);
    spv_guard g = {0};
    uint32_t lin = element_index(em, op, &g);
    spv_guard_begin(em, &g, op);
    if (op->code == IR_LOAD) {
        uint32_t r =
            spv_op1(&em->b, SpvOpLoad, mem_type(em, et), spv_element_ptr(em, p, false, lin));
        if (et->kind == TY_BOOL)
            r = spv_op2(&em->b, SpvOpINotEqual, em->t_bool, r, spv_const_u8(&em->b, 0));
        return spv_guard_end(em, &g, r, zero_of(em, et), rt);
    }
    uint32_t v = val(em, op->operands[op->noperands - 1]);
    if (op->code == IR_ATOMIC_CAS) {
        uint32_t u16 = spv_type_uint(&em->b, 16), e = val(em, op->operands[op->noperands - 2]);
        if (rt != u16) {
            e = bitcast(em, u16, e);
            v = bitcast(em, u16, v);
        }
        uint32_t r = emit_cas16(em, p, lin, e, v);
        return spv_guard_end(em, &g, rt != u16 ? bitcast(em, rt, r) : r, zero_of(em, et), rt);
    }
    if (op->code == IR_STORE) {
        if (et->kind == TY_BOOL)
            v = spv_op3(&em->b, SpvOpSelect, mem_type(em, et), v, spv_const_u8(&em->b, 1),
                        spv_const_u8(&em->b, 0));
        spv_instv(&em->b.funcs, SpvOpStore, 2, spv_element_ptr(em, p, false, lin), v);
        spv_guard_end(em, &g, 0, 0, 0);
        return 0;
    }
    uint32_t r;
    bool fl = real_float(et), u = ty_is_unsigned(et);
    if (et->kind == TY_BOOL) {
        /* no byte atomics in Vulkan: the builder makes none; an xchg (autodiff) is a plain
         * load and store of the byte */
        uint32_t ptr = spv_element_ptr(em, p, false, lin);
        r = spv_op2(&em->b, SpvOpINotEqual, em->t_bool,
                    spv_op1(&em->b, SpvOpLoad, mem_type(em, et), ptr), spv_const_u8(&em->b, 0));
        if (op->code == IR_ATOMIC_XCHG)
            spv_instv(&em->b.funcs, SpvOpStore, 2, ptr,
                      spv_op3(&em->b, SpvOpSelect, mem_type(em, et), v, spv_const_u8(&em->b, 1),
                              spv_const_u8(&em->b, 0)));
        return spv_guard_end(em, &g, r, zero_of(em, et), rt);
    }
    if (is_i64(et) || et->kind == TY_F64)
        spv_capability(&em->b, SpvCapabilityInt64Atomics);
    int ri = spv_replica_of(em, p);
    if (ri >= 0 && (op->code == IR_ATOMIC_ADD || op->code == IR_ATOMIC_SUB)) {
        uint32_t add = op->code == IR_ATOMIC_SUB ? spv_op1(&em->b, SpvOpFNegate, rt, v) : v;
        spv_emit_combined_fadd(em, ri, p, lin, add, spv_uniform_access(em, op));
        r = spv_op(&em->b, SpvOpUndef, rt, NULL, 0);
    } else if (fl && op->code == IR_ATOMIC_ADD && et->kind == TY_F32 &&
               !spv_value_used(em, op->results[0])) {
        spv_emit_combined_fadd(em, -1, p, lin, v, spv_uniform_access(em, op));
        r = spv_op(&em->b, SpvOpUndef, rt, NULL, 0);
    } else if (fl && op->code == IR_ATOMIC_ADD && et->kind == TY_F32) {
        spv_capability(&em->b, SpvCapabilityAtomicFloat32AddEXT);
        spv_extension(&em->b, "SPV_EXT_shader_atomic_float_add");
        uint32_t ops[4] = {spv_element_ptr(em, p, false, lin), atomic_scope(em), relaxed(em), v};
        r = spv_op(&em->b, SpvOpAtomicFAddEXT, rt, ops, 4);
    } else if (fl && op->code == IR_ATOMIC_SUB && et->kind == TY_F32) {
        spv_capability(&em->b, SpvCapabilityAtomicFloat32AddEXT);
        spv_extension(&em->b, "SPV_EXT_shader_atomic_float_add");
        uint32_t nv = spv_op1(&em->b, SpvOpFNegate, rt, v);
        uint32_t ops[4] = {spv_element_ptr(em, p, false, lin), atomic_scope(em), relaxed(em), nv};
        r = spv_op(&em->b, SpvOpAtomicFAddEXT, rt, ops, 4);
    } else if (fl && op->code != IR_ATOMIC_XCHG) {
        r = emit_cas_loop(em, op->code, et, spv_element_ptr(em, p, true, lin), v);
    } else {
        SpvOp o;
        switch (op->code) {
        case IR_ATOMIC_ADD: o = SpvOpAtomicIAdd; break;
        case IR_ATOMIC_SUB: o = SpvOpAtomicISub; break;
        case IR_ATOMIC_MIN: o = u ? SpvOpAtomicUMin : SpvOpAtomicSMin; break;
        case IR_ATOMIC_MAX: o = u ? SpvOpAtomicUMax : SpvOpAtomicSMax; break;
        case IR_ATOMIC_XCHG: o = SpvOpAtomicExchange; break;
        default: kern_unreachable("SPIR-V backend: not an array access");
        }
        uint32_t it = int_mem_type(em, et);
        uint32_t iv = fl ? bitcast(em, it, v) : v;
        uint32_t ops[4] = {spv_element_ptr(em, p, fl, lin), atomic_scope(em), relaxed(em), iv};
        r = spv_op(&em->b, o, fl ? it : rt, ops, 4);
        if (fl)
            r = bitcast(em, rt, r);
    }
    return spv_guard_end(em, &g, r, zero_of(em, et), rt);
}

/* ---- adstacks --------------------------------------------------------------------------- */

static uint32_t stack_of(spv_emitter *em, const ir_op *op) {
    kern_assert(em->ad_pos && op->imm.i >= 0 && (uint64_t)op->imm.i < em->kernel->nadstacks);
    return (uint32_t)op->imm.i;
}

/* The pointer to heap element e (u64) of stack s: entry d of this work item is element
 * base + d * slots, which ad_pos steps to by adding slots per push (no multiply). */
static uint32_t ad_entry(spv_emitter *em, uint32_t s, uint32_t e) {
    const ir_adstack *st = &em->kernel->adstacks[s];
    uint32_t elem;
    uint32_t var = heap_var(em, st->type, &elem);
    uint32_t ops[3] = {var, cu32(em, 0), e};
    return spv_op(&em->b, SpvOpAccessChain,
                  spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, elem), ops, 3);
}

/* v (of the stack's type) as the bits the heap holds, and back. */
static uint32_t ad_to_bits(spv_emitter *em, const kern_type *t, uint32_t v) {
    uint32_t it = int_mem_type(em, t);
    if (t->kind == TY_BOOL)
        return spv_op3(&em->b, SpvOpSelect, it, v, spv_const_u8(&em->b, 1),
                       spv_const_u8(&em->b, 0));
    return real_float(t) ? bitcast(em, it, v) : v;
}

static uint32_t ad_from_bits(spv_emitter *em, const kern_type *t, uint32_t bits) {
    if (t->kind == TY_BOOL)
        return spv_op2(&em->b, SpvOpINotEqual, em->t_bool, bits, spv_const_u8(&em->b, 0));
    return real_float(t) ? bitcast(em, spv_reg_type(em, t), bits) : bits;
}

/* A push: stored where the entry lies in the stack (e - base < cap * slots; after an
 * unbalanced pop e - base wraps and fails too), else the overflow is recorded with the
 * depth it would have reached ((e - base) / slots + 1, on that path only); the position
 * moves on either way, as the depth did. */
void spv_emit_adpush(spv_emitter *em, const ir_op *op) {
    uint32_t s = stack_of(em, op), u64 = u64t(em);
    const ir_adstack *st = &em->kernel->adstacks[s];
    uint32_t v = ad_to_bits(em, st->type, val(em, op->operands[0]));
    uint32_t e = spv_op1(&em->b, SpvOpLoad, u64, em->ad_pos[s]);
    if (tested(em, op)) { /* its loop's test found every push in the stack */
        spv_instv(&em->b.funcs, SpvOpStore, 2, ad_entry(em, s, e), v);
        spv_instv(&em->b.funcs, SpvOpStore, 2, em->ad_pos[s],
                  spv_op2(&em->b, SpvOpIAdd, u64, e, em->ad_slots));
        return;
    }
    uint32_t off = spv_op2(&em->b, SpvOpISub, u64, e, em->ad_base[s]);
    uint32_t ok = spv_op2(&em->b, SpvOpULessThan, em->t_bool, off, em->ad_span[s]);
    uint32_t l_store = spv_id(&em->b), l_ovf = spv_id(&em->b), l_j = spv_id(&em->b);
    selection_merge(em, l_j);
    branch_cond(em, ok, l_store, l_ovf);
    label(em, l_store);
    spv_instv(&em->b.funcs, SpvOpStore, 2, ad_entry(em, s, e), v);
    branch(em, l_j);
    label(em, l_ovf);
    uint32_t one = cu64(em, 1);
    uint32_t nz = spv_op2(&em->b, SpvOpINotEqual, em->t_bool, em->ad_slots, cu64(em, 0));
    uint32_t per = spv_op3(&em->b, SpvOpSelect, u64, nz, em->ad_slots, one);
    uint32_t d = spv_op2(&em->b, SpvOpUDiv, u64, off, per);
    spv_call_overflow(em, op->loc.line ? op->loc : st->loc, em->ad_cap[s],
                      spv_op2(&em->b, SpvOpIAdd, u64, d, one));
    branch(em, l_j);
    label(em, l_j);
    spv_instv(&em->b.funcs, SpvOpStore, 2, em->ad_pos[s],
              spv_op2(&em->b, SpvOpIAdd, u64, e, em->ad_slots));
}

/* A pop: the entry below the position, read where it lies in the stack (an unbalanced pop,
 * below base, wraps to a large offset and reads nothing either), else zero. */
void spv_emit_adpop(spv_emitter *em, const ir_op *op) {
    uint32_t s = stack_of(em, op), u64 = u64t(em);
    const ir_adstack *st = &em->kernel->adstacks[s];
    uint32_t it = int_mem_type(em, st->type);
    uint32_t e = spv_op2(&em->b, SpvOpISub, u64,
                         spv_op1(&em->b, SpvOpLoad, u64, em->ad_pos[s]), em->ad_slots);
    spv_instv(&em->b.funcs, SpvOpStore, 2, em->ad_pos[s], e);
    if (tested(em, op)) { /* its loop's test found every pop in the stack */
        set_val(em, op->results[0],
                ad_from_bits(em, st->type, spv_op1(&em->b, SpvOpLoad, it, ad_entry(em, s, e))));
        return;
    }
    uint32_t off = spv_op2(&em->b, SpvOpISub, u64, e, em->ad_base[s]);
    uint32_t ok = spv_op2(&em->b, SpvOpULessThan, em->t_bool, off, em->ad_span[s]);
    uint32_t pre = em->cur, l_load = spv_id(&em->b), l_j = spv_id(&em->b);
    selection_merge(em, l_j);
    branch_cond(em, ok, l_load, l_j);
    label(em, l_load);
    uint32_t bits = spv_op1(&em->b, SpvOpLoad, it, ad_entry(em, s, e));
    uint32_t from = em->cur;
    branch(em, l_j);
    label(em, l_j);
    uint32_t zero = spv_const_bits(&em->b, it, ty_size(st->type) * 8, 0);
    uint32_t phi = phi2(em, it, bits, from, zero, pre);
    set_val(em, op->results[0], ad_from_bits(em, st->type, phi));
}
