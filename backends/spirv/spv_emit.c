/* spv_emit.c - the structured IR to SPIR-V (docs/backend-spirv.md; the ABI is
 * docs/spirv-abi.md). The semantics of every op are those of the LLVM backends
 * (backends/llvm/llvm_emit_ops.c), op by op.
 *
 * Registers: bool is OpTypeBool; i32 and u32 are one unsigned 32-bit type (the op picks
 * signed or unsigned behaviour), i64 a 64-bit one, f32 and f64 floats. In memory bool is a
 * byte. Every integer type is declared with signedness 0, as OpUDiv and friends need.
 *
 * Control flow is written block by block in the order of the IR, so every block follows
 * its dominators:
 *   if     header: OpSelectionMerge, OpBranchConditional; then blocks, else blocks; merge
 *          block with OpPhi of the yields;
 *   for    header: OpPhi (index, carried), OpLoopMerge, OpBranchConditional (i < hi) to the
 *          body or the merge; body blocks; the continue block (i + 1) back to the header.
 *          The header's OpPhi operands from the continue block are patched once the body
 *          has been emitted. With IR_FOR_EARLY_EXIT the body's end branches on "go on" to
 *          the continue block or the merge (a break), and the merge block has OpPhis;
 *   while  header: OpPhi, OpLoopMerge, OpBranch to the before region; its condition
 *          branches to the after region or the merge (a break); the after region's end goes
 *          to the continue block, which goes back to the header.
 * A guarded operation (debug checks) is a selection: the checks first, an error record
 * when one fails, the operation under the selection, an OpPhi with 0 after it.
 *
 * f64 math: GLSL.std.450's transcendental functions take 16- and 32-bit floats only; f64 sin,
 * exp, ... call kern's own SPIR-V functions (spv_math64.c). */
#include "spv_emit.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/spvblock.h"
#include "../../runtime/abi.h"
#include "spv_builder.h"
#include "spv_math64.h"

/* ---- value map ------------------------------------------------------------------------- */

typedef struct valmap {
    const ir_value **keys;
    uint32_t *vals;
    size_t cap, len;
} valmap;

static size_t hash_ptr(const void *p) {
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 17;
    x *= 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 29));
}

static void map_put(valmap *m, const ir_value *v, uint32_t id) {
    if (2 * (m->len + 1) > m->cap) {
        size_t ncap = m->cap ? 2 * m->cap : 256;
        const ir_value **keys = calloc(ncap, sizeof *keys);
        uint32_t *vals = calloc(ncap, sizeof *vals);
        if (!keys || !vals)
            kern_oom(ncap * sizeof *keys);
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i])
                continue;
            size_t h = hash_ptr(m->keys[i]) & (ncap - 1);
            while (keys[h])
                h = (h + 1) & (ncap - 1);
            keys[h] = m->keys[i];
            vals[h] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = ncap;
    }
    size_t h = hash_ptr(v) & (m->cap - 1);
    while (m->keys[h] && m->keys[h] != v)
        h = (h + 1) & (m->cap - 1);
    if (!m->keys[h])
        m->len++;
    m->keys[h] = v;
    m->vals[h] = id;
}

static uint32_t map_get(const valmap *m, const ir_value *v) {
    if (m->cap) {
        size_t h = hash_ptr(v) & (m->cap - 1);
        while (m->keys[h]) {
            if (m->keys[h] == v)
                return m->vals[h];
            h = (h + 1) & (m->cap - 1);
        }
    }
    kern_unreachable("SPIR-V backend: use of a value that was not emitted");
}

/* ---- the emitter's state ---------------------------------------------------------------- */

enum { MAX_IFACE = 64, KERN_SPV_BLOCK_COPIES = 2, KERN_SPV_BLOCK_ELEMS = 2048 };

typedef struct emitter {
    spv_builder b;
    const kc_options *opts;
    char *err;
    size_t errlen;
    bool failed;
    uint32_t t_void, t_bool, t_u32, t_u64, t_f32, t_f64;
    /* module-wide globals and helpers (0 until used) */
    uint32_t v_gid, v_nwg;        /* GlobalInvocationId, NumWorkgroups */
    uint32_t v_err, t_err;        /* binding 1 and its struct */
    uint32_t v_heap[3];           /* bindings 2, 3, 4: the heap as u8, u32, u64 */
    uint32_t fn_error, fn_ovf;    /* record_error, adstack_overflow */
    uint32_t arr_struct[2][3][2]; /* per (float?, 8/32/64 bits index, -) the Block struct */
    spv_math64 m64;               /* the f64 functions the module calls */
    /* per kernel */
    const ir_kernel *kernel;
    uint32_t v_block;
    uint32_t *block_member; /* per parameter: its first member in the launch block */
    uint32_t *block_type;   /* per member: its type */
    uint32_t nmembers;
    uint32_t *v_arr, *v_alias; /* per parameter: the array's variable and its integer alias */
    /* per entry point */
    valmap map;
    valmap used; /* the values some op of the current task uses */
    uint32_t iface[MAX_IFACE];
    int niface;
    uint32_t (*shape)[KERN_MAX_RANK];      /* per parameter: extents (u64) */
    uint32_t *ad_depth, *ad_base, *ad_cap; /* per adstack */
    /* block copies (a parallel task): f32 arrays it only adds into, summed per workgroup in
     * shared memory when they fit (blk_on, uniform), then added to the array once */
    int nblk;
    int blk_param[KERN_SPV_BLOCK_COPIES];
    uint32_t blk_var[KERN_SPV_BLOCK_COPIES]; /* Workgroup f32[KERN_SPV_BLOCK_ELEMS] */
    uint32_t blk_on[KERN_SPV_BLOCK_COPIES];  /* bool */
    uint32_t blk_n[KERN_SPV_BLOCK_COPIES];   /* the array's elements (u64) */
    uint32_t v_lid;                          /* LocalInvocationId */
    uint32_t ad_slots;
    bool checks;
    uint32_t cur; /* the current block's label */
} emitter;

static void use_global(emitter *em, uint32_t id) {
    for (int i = 0; i < em->niface; i++)
        if (em->iface[i] == id)
            return;
    kern_assert(em->niface < MAX_IFACE);
    em->iface[em->niface++] = id;
}

static uint32_t val(emitter *em, const ir_value *v) { return map_get(&em->map, v); }

static void mark_uses(emitter *em, const ir_region *r) {
    ir_foreach_op(op, r) {
        for (uint32_t i = 0; i < op->noperands; i++)
            map_put(&em->used, op->operands[i], 1);
        for (uint32_t i = 0; i < op->nregions; i++)
            mark_uses(em, op->regions[i]);
    }
}

static bool value_used(const emitter *em, const ir_value *v) {
    const valmap *m = &em->used;
    if (m->cap) {
        size_t h = hash_ptr(v) & (m->cap - 1);
        while (m->keys[h]) {
            if (m->keys[h] == v)
                return true;
            h = (h + 1) & (m->cap - 1);
        }
    }
    return false;
}
static void set_val(emitter *em, const ir_value *v, uint32_t id) { map_put(&em->map, v, id); }

static uint32_t label(emitter *em, uint32_t l) {
    spv_label(&em->b, l);
    em->cur = l;
    return l;
}

static void branch(emitter *em, uint32_t to) { spv_instv(&em->b.funcs, SpvOpBranch, 1, to); }

static void branch_cond(emitter *em, uint32_t c, uint32_t t, uint32_t f) {
    spv_instv(&em->b.funcs, SpvOpBranchConditional, 3, c, t, f);
}

static void selection_merge(emitter *em, uint32_t merge) {
    spv_instv(&em->b.funcs, SpvOpSelectionMerge, 2, merge, SpvSelectionControlMaskNone);
}

static uint32_t phi2(emitter *em, uint32_t type, uint32_t a, uint32_t la, uint32_t c, uint32_t lc) {
    uint32_t ops[4] = {a, la, c, lc};
    return spv_op(&em->b, SpvOpPhi, type, ops, 4);
}

/* ---- types ------------------------------------------------------------------------------ */

static uint32_t reg_type(emitter *em, const kern_type *t) {
    switch (t->kind) {
    case TY_BOOL: return em->t_bool;
    case TY_I32:
    case TY_U32: return em->t_u32;
    case TY_I64: return spv_type_uint(&em->b, 64);
    case TY_F32: return em->t_f32;
    case TY_F64: return spv_type_float(&em->b, 64);
    default: kern_unreachable("SPIR-V backend: not a scalar type");
    }
}

static uint32_t mem_type(emitter *em, const kern_type *t) {
    if (t->kind == TY_BOOL) {
        spv_capability(&em->b, SpvCapabilityStorageBuffer8BitAccess);
        spv_extension(&em->b, "SPV_KHR_8bit_storage");
        return spv_type_uint(&em->b, 8);
    }
    return reg_type(em, t);
}

/* The integer type of t's bits in memory (bool: u8, f32: u32, f64: u64). */
static uint32_t int_mem_type(emitter *em, const kern_type *t) {
    switch (t->kind) {
    case TY_BOOL: return mem_type(em, t);
    case TY_I64:
    case TY_F64: return spv_type_uint(&em->b, 64);
    default: return em->t_u32;
    }
}

static uint32_t u64t(emitter *em) { return spv_type_uint(&em->b, 64); }
static uint32_t cu32(emitter *em, uint32_t v) { return spv_const_u32(&em->b, v); }
static uint32_t cu64(emitter *em, uint64_t v) { return spv_const_u64(&em->b, v); }

static uint32_t zero_of(emitter *em, const kern_type *t) {
    switch (t->kind) {
    case TY_BOOL: return spv_const_bool(&em->b, false);
    case TY_I32:
    case TY_U32: return cu32(em, 0);
    case TY_I64: return cu64(em, 0);
    case TY_F32: return spv_const_f32(&em->b, 0.0f);
    default: return spv_const_f64(&em->b, 0.0);
    }
}

/* v of integer or bool type t widened to u64 (sign-extended for i32). */
static uint32_t to_u64(emitter *em, uint32_t v, const kern_type *t) {
    switch (t->kind) {
    case TY_I64: return v;
    case TY_I32: return spv_op1(&em->b, SpvOpSConvert, u64t(em), v);
    case TY_BOOL: return spv_op3(&em->b, SpvOpSelect, u64t(em), v, cu64(em, 1), cu64(em, 0));
    default: return spv_op1(&em->b, SpvOpUConvert, u64t(em), v);
    }
}

/* ---- globals ---------------------------------------------------------------------------- */

static uint32_t builtin_var(emitter *em, SpvBuiltIn bi) {
    uint32_t t = spv_type_ptr(&em->b, SpvStorageClassInput, spv_type_vec(&em->b, em->t_u32, 3));
    uint32_t v = spv_global(&em->b, t, SpvStorageClassInput, 0, -1);
    uint32_t arg = (uint32_t)bi;
    spv_decorate(&em->b, v, SpvDecorationBuiltIn, &arg, 1);
    return v;
}

/* The Block struct { T data[]; } of a storage buffer of elements of SPIR-V type elem. */
static uint32_t array_struct(emitter *em, uint32_t elem, bool fl, int bits) {
    int bi = bits == 8 ? 0 : bits == 32 ? 1 : 2;
    uint32_t *slot = &em->arr_struct[fl][bi][0];
    if (!*slot) {
        uint32_t rt = spv_type_rtarray(&em->b, elem, (uint32_t)bits / 8);
        uint32_t off = 0;
        *slot = spv_type_struct(&em->b, &rt, &off, 1, true);
    }
    return *slot;
}

static uint32_t buffer_var(emitter *em, uint32_t elem, bool fl, int bits, int binding) {
    uint32_t st = array_struct(em, elem, fl, bits);
    return spv_global(&em->b, spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, st),
                      SpvStorageClassStorageBuffer, 0, binding);
}

static uint32_t err_var(emitter *em) {
    if (!em->v_err) {
        /* a as two 32-bit halves (little-endian): the overflow's atomic max is a 32-bit one,
         * so kernels need no 64-bit atomics (Metal has none) */
        uint32_t u64 = u64t(em), u32 = em->t_u32;
        uint32_t m[7] = {u32, u32, u32, u32, u32, u32, u64};
        uint32_t off[7] = {offsetof(kern_err_record, code), offsetof(kern_err_record, line),
                           offsetof(kern_err_record, col),  offsetof(kern_err_record, dim),
                           offsetof(kern_err_record, a),    offsetof(kern_err_record, a) + 4,
                           offsetof(kern_err_record, b)};
        em->t_err = spv_type_struct(&em->b, m, off, 7, true);
        em->v_err =
            spv_global(&em->b, spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, em->t_err),
                       SpvStorageClassStorageBuffer, 0, KERN_SPV_BIND_ERR);
        static const char *const fields[7] = {"code", "line", "col", "dim", "a_lo", "a_hi", "b"};
        spv_name(&em->b, em->t_err, -1, "kern_err_record");
        for (int i = 0; i < 7; i++)
            spv_name(&em->b, em->t_err, i, fields[i]);
        spv_name(&em->b, em->v_err, -1, "err");
    }
    use_global(em, em->v_err);
    return em->v_err;
}

/* A pointer to member i of the error record (0 code, 1 line, 2 col, 3 dim, 4 and 5 the low
 * and high halves of a, 6 b). */
static uint32_t err_field(emitter *em, uint32_t i) {
    uint32_t t = i == 6 ? u64t(em) : em->t_u32;
    return spv_op2(&em->b, SpvOpAccessChain, spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, t),
                   err_var(em), cu32(em, i));
}

/* The heap viewed with elements of t's size. */
static uint32_t heap_var(emitter *em, const kern_type *t, uint32_t *elem) {
    int size = ty_size(t), bi = size == 1 ? 0 : size == 4 ? 1 : 2;
    *elem = int_mem_type(em, t);
    if (!em->v_heap[bi]) {
        static const char *const names[3] = {"ad_heap8", "ad_heap32", "ad_heap64"};
        em->v_heap[bi] = buffer_var(em, *elem, false, size * 8, KERN_SPV_BIND_HEAP8 + bi);
        spv_name(&em->b, em->v_heap[bi], -1, names[bi]);
    }
    use_global(em, em->v_heap[bi]);
    return em->v_heap[bi];
}

/* ---- error records ---------------------------------------------------------------------- */

static uint32_t atomic_scope(emitter *em) { return cu32(em, SpvScopeDevice); }
static uint32_t relaxed(emitter *em) { return cu32(em, SpvMemorySemanticsMaskNone); }

/* void record_error(u32 code, u32 line, u32 col, u32 dim, u64 a, u64 b) (guard_begin calls
 * it): the first error wins (compare-and-swap of code from 0), then the fields
 * (runtime/abi.h). void adstack_overflow(u32 line, u32 col, u64 cap, u64 depth): as
 * backends/llvm/llvm_adstack.c's. Their bodies are written after the entry points
 * (emit_helpers). */
static void call_overflow(emitter *em, kern_loc loc, uint32_t cap, uint32_t depth) {
    if (!em->fn_ovf)
        em->fn_ovf = spv_id(&em->b);
    err_var(em);
    uint32_t args[5] = {em->fn_ovf, cu32(em, loc.line), cu32(em, loc.col), cap, depth};
    spv_op(&em->b, SpvOpFunctionCall, em->t_void, args, 5);
}

static uint32_t param(emitter *em, uint32_t type) {
    return spv_op(&em->b, SpvOpFunctionParameter, type, NULL, 0);
}

static void function_begin(emitter *em, uint32_t id, uint32_t fnty) {
    spv_instv(&em->b.funcs, SpvOpFunction, 4, em->t_void, id, SpvFunctionControlMaskNone, fnty);
}

static void function_end(emitter *em) {
    spv_instv(&em->b.funcs, SpvOpReturn, 0);
    spv_instv(&em->b.funcs, SpvOpFunctionEnd, 0);
}

static void emit_helpers(emitter *em) {
    uint32_t u64 = u64t(em), u32 = em->t_u32;
    uint32_t ptr_u32 = spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, u32);
    if (em->fn_error) {
        uint32_t pt[6] = {u32, u32, u32, u32, u64, u64};
        function_begin(em, em->fn_error, spv_type_fn(&em->b, em->t_void, pt, 6));
        uint32_t p[6];
        for (int i = 0; i < 6; i++)
            p[i] = param(em, pt[i]);
        label(em, spv_id(&em->b));
        uint32_t ops[6] = {err_field(em, 0), atomic_scope(em), relaxed(em), relaxed(em), p[0],
                           cu32(em, 0)};
        uint32_t old = spv_op(&em->b, SpvOpAtomicCompareExchange, u32, ops, 6);
        uint32_t won = spv_op2(&em->b, SpvOpIEqual, em->t_bool, old, cu32(em, 0));
        uint32_t l_write = spv_id(&em->b), l_done = spv_id(&em->b);
        selection_merge(em, l_done);
        branch_cond(em, won, l_write, l_done);
        label(em, l_write);
        for (uint32_t i = 1; i < 4; i++)
            spv_instv(&em->b.funcs, SpvOpStore, 2, err_field(em, i), p[i]);
        uint32_t hi = spv_op2(&em->b, SpvOpShiftRightLogical, u64, p[4], cu64(em, 32));
        spv_instv(&em->b.funcs, SpvOpStore, 2, err_field(em, 4),
                  spv_op1(&em->b, SpvOpUConvert, u32, p[4]));
        spv_instv(&em->b.funcs, SpvOpStore, 2, err_field(em, 5),
                  spv_op1(&em->b, SpvOpUConvert, u32, hi));
        spv_instv(&em->b.funcs, SpvOpStore, 2, err_field(em, 6), p[5]);
        branch(em, l_done);
        label(em, l_done);
        function_end(em);
    }
    if (em->fn_ovf) {
        uint32_t pt[4] = {u32, u32, u64, u64};
        function_begin(em, em->fn_ovf, spv_type_fn(&em->b, em->t_void, pt, 4));
        uint32_t p[4];
        for (int i = 0; i < 4; i++)
            p[i] = param(em, pt[i]);
        label(em, spv_id(&em->b));
        uint32_t code = cu32(em, KERN_DEVERR_ADSTACK);
        uint32_t ops[6] = {err_field(em, 0), atomic_scope(em), relaxed(em), relaxed(em), code,
                           cu32(em, 0)};
        uint32_t old = spv_op(&em->b, SpvOpAtomicCompareExchange, u32, ops, 6);
        uint32_t won = spv_op2(&em->b, SpvOpIEqual, em->t_bool, old, cu32(em, 0));
        uint32_t l_first = spv_id(&em->b), l_mid = spv_id(&em->b), l_max = spv_id(&em->b),
                 l_done = spv_id(&em->b);
        selection_merge(em, l_mid);
        branch_cond(em, won, l_first, l_mid);
        label(em, l_first);
        spv_instv(&em->b.funcs, SpvOpStore, 2, err_field(em, 1), p[0]);
        spv_instv(&em->b.funcs, SpvOpStore, 2, err_field(em, 2), p[1]);
        spv_instv(&em->b.funcs, SpvOpStore, 2, err_field(em, 6), p[2]);
        branch(em, l_mid);
        label(em, l_mid);
        /* the winner, or a record that already holds an overflow: raise a to the depth */
        uint32_t was = spv_op2(&em->b, SpvOpIEqual, em->t_bool, old, code);
        uint32_t raise = spv_op2(&em->b, SpvOpLogicalOr, em->t_bool, won, was);
        selection_merge(em, l_done);
        branch_cond(em, raise, l_max, l_done);
        label(em, l_max);
        /* the depth, at most 2^31 - 1 (a's high half stays 0 from the launch) */
        uint32_t big = spv_op2(&em->b, SpvOpUGreaterThan, em->t_bool, p[3], cu64(em, 0x7fffffffu));
        uint32_t d32 = spv_op3(&em->b, SpvOpSelect, u32, big, cu32(em, 0x7fffffffu),
                               spv_op1(&em->b, SpvOpUConvert, u32, p[3]));
        uint32_t mops[4] = {err_field(em, 4), atomic_scope(em), relaxed(em), d32};
        spv_op(&em->b, SpvOpAtomicUMax, u32, mops, 4);
        branch(em, l_done);
        label(em, l_done);
        function_end(em);
    }
    (void)ptr_u32;
}

/* ---- guards (debug checks) -------------------------------------------------------------- */

typedef struct guard {
    uint32_t ok;              /* bool: every check passed (0: no checks) */
    uint32_t code, dim, a, b; /* the first failing check's record (selected) */
    uint32_t l_merge, l_pre;
} guard;

/* Adds a check: cond must hold, else the record (code, dim, a, b). Checks added later are
 * reported only when the earlier ones passed. */
static void guard_add(emitter *em, guard *g, uint32_t cond, uint32_t code, uint32_t dim,
                      uint32_t a64, uint32_t b64) {
    if (!g->ok) {
        g->ok = cond;
        g->code = cu32(em, code);
        g->dim = dim;
        g->a = a64;
        g->b = b64;
        return;
    }
    /* keep the earlier record where it failed */
    uint32_t u64 = u64t(em);
    g->code = spv_op3(&em->b, SpvOpSelect, em->t_u32, g->ok, cu32(em, code), g->code);
    g->dim = spv_op3(&em->b, SpvOpSelect, em->t_u32, g->ok, dim, g->dim);
    g->a = spv_op3(&em->b, SpvOpSelect, u64, g->ok, a64, g->a);
    g->b = spv_op3(&em->b, SpvOpSelect, u64, g->ok, b64, g->b);
    g->ok = spv_op2(&em->b, SpvOpLogicalAnd, em->t_bool, g->ok, cond);
}

/* After the checks: records the error when one failed, then opens the selection under
 * which the operation runs. */
static void guard_begin(emitter *em, guard *g, const ir_op *op) {
    if (!g->ok)
        return;
    uint32_t l_fail = spv_id(&em->b), l_ok = spv_id(&em->b), l_j = spv_id(&em->b);
    selection_merge(em, l_j);
    branch_cond(em, g->ok, l_ok, l_fail);
    label(em, l_fail);
    /* the record's code is chosen at run time: call with it */
    if (!em->fn_error)
        em->fn_error = spv_id(&em->b);
    err_var(em);
    uint32_t args[7] = {
        em->fn_error, g->code, cu32(em, op->loc.line), cu32(em, op->loc.col), g->dim, g->a, g->b};
    spv_op(&em->b, SpvOpFunctionCall, em->t_void, args, 7);
    branch(em, l_j);
    label(em, l_ok);
    g->l_merge = l_j;
    g->l_pre = l_fail;
}

/* Closes the selection: the result is v, or zero (of type) when a check failed. */
static uint32_t guard_end(emitter *em, guard *g, uint32_t v, uint32_t zero, uint32_t type) {
    if (!g->ok)
        return v;
    uint32_t from = em->cur;
    branch(em, g->l_merge);
    label(em, g->l_merge);
    if (!v)
        return 0;
    /* predecessors: the end of the checked path and the block that recorded the error */
    return phi2(em, type, v, from, zero, g->l_pre);
}

/* ---- arithmetic ------------------------------------------------------------------------- */

static bool is_i64(const kern_type *t) { return t->kind == TY_I64; }

static uint32_t int_const(emitter *em, const kern_type *t, int64_t v) {
    return is_i64(t) ? cu64(em, (uint64_t)v) : cu32(em, (uint32_t)v);
}

static uint32_t emit_divrem(emitter *em, const ir_op *op, uint32_t a, uint32_t b) {
    const kern_type *t = op->operands[0]->type;
    uint32_t ty = reg_type(em, t);
    bool div = op->code == IR_DIV;
    if (ty_is_float(t))
        return spv_op2(&em->b, SpvOpFDiv, ty, a, b);
    uint32_t zero = int_const(em, t, 0), one = int_const(em, t, 1), m1 = int_const(em, t, -1);
    uint32_t is0 = spv_op2(&em->b, SpvOpIEqual, em->t_bool, b, zero);
    guard g = {0};
    if (em->checks) {
        guard_add(em, &g, spv_op1(&em->b, SpvOpLogicalNot, em->t_bool, is0), KERN_DEVERR_DIV_ZERO,
                  cu32(em, 0), to_u64(em, a, t), to_u64(em, b, t));
        guard_begin(em, &g, op);
    }
    uint32_t r;
    if (t->kind == TY_U32) {
        uint32_t d = spv_op3(&em->b, SpvOpSelect, ty, is0, one, b);
        r = spv_op2(&em->b, div ? SpvOpUDiv : SpvOpUMod, ty, a, d);
    } else {
        uint32_t ism1 = spv_op2(&em->b, SpvOpIEqual, em->t_bool, b, m1);
        uint32_t bad = spv_op2(&em->b, SpvOpLogicalOr, em->t_bool, is0, ism1);
        uint32_t d = spv_op3(&em->b, SpvOpSelect, ty, bad, one, b);
        if (div)
            r = spv_op3(&em->b, SpvOpSelect, ty, ism1, spv_op2(&em->b, SpvOpISub, ty, zero, a),
                        spv_op2(&em->b, SpvOpSDiv, ty, a, d));
        else
            r = spv_op3(&em->b, SpvOpSelect, ty, ism1, zero, spv_op2(&em->b, SpvOpSRem, ty, a, d));
    }
    return guard_end(em, &g, r, zero, ty);
}

static uint32_t emit_shift(emitter *em, const ir_op *op, uint32_t a, uint32_t b) {
    const kern_type *t = op->operands[0]->type;
    uint32_t ty = reg_type(em, t);
    int bits = is_i64(t) ? 64 : 32;
    guard g = {0};
    if (em->checks) {
        guard_add(em, &g, spv_op2(&em->b, SpvOpULessThan, em->t_bool, b, int_const(em, t, bits)),
                  KERN_DEVERR_SHIFT, cu32(em, 0), to_u64(em, b, t), cu64(em, (uint64_t)bits));
        guard_begin(em, &g, op);
    }
    uint32_t amt = spv_op2(&em->b, SpvOpBitwiseAnd, ty, b, int_const(em, t, bits - 1));
    SpvOp o = op->code == IR_SHL  ? SpvOpShiftLeftLogical
              : t->kind == TY_U32 ? SpvOpShiftRightLogical
                                  : SpvOpShiftRightArithmetic;
    uint32_t r = spv_op2(&em->b, o, ty, a, amt);
    return guard_end(em, &g, r, int_const(em, t, 0), ty);
}

static uint32_t emit_compare(emitter *em, ir_opcode code, const kern_type *t, uint32_t a,
                             uint32_t b) {
    SpvOp o;
    if (ty_is_float(t)) {
        switch (code) {
        case IR_EQ: o = SpvOpFOrdEqual; break;
        case IR_NE: o = SpvOpFUnordNotEqual; break;
        case IR_LT: o = SpvOpFOrdLessThan; break;
        case IR_LE: o = SpvOpFOrdLessThanEqual; break;
        case IR_GT: o = SpvOpFOrdGreaterThan; break;
        case IR_GE: o = SpvOpFOrdGreaterThanEqual; break;
        default: kern_unreachable("not a comparison");
        }
    } else if (t->kind == TY_BOOL) {
        o = code == IR_EQ ? SpvOpLogicalEqual : SpvOpLogicalNotEqual;
        if (code != IR_EQ && code != IR_NE) { /* false < true: compare as integers */
            uint32_t ia = to_u64(em, a, t), ib = to_u64(em, b, t);
            return emit_compare(em, code, ty_i64(), ia, ib);
        }
    } else {
        bool u = t->kind == TY_U32;
        switch (code) {
        case IR_EQ: o = SpvOpIEqual; break;
        case IR_NE: o = SpvOpINotEqual; break;
        case IR_LT: o = u ? SpvOpULessThan : SpvOpSLessThan; break;
        case IR_LE: o = u ? SpvOpULessThanEqual : SpvOpSLessThanEqual; break;
        case IR_GT: o = u ? SpvOpUGreaterThan : SpvOpSGreaterThan; break;
        case IR_GE: o = u ? SpvOpUGreaterThanEqual : SpvOpSGreaterThanEqual; break;
        default: kern_unreachable("not a comparison");
        }
    }
    return spv_op2(&em->b, o, em->t_bool, a, b);
}

/* b < a ? b : a (min), b > a ? b : a (max): operand 0 on ties and when a is NaN */
static uint32_t emit_minmax(emitter *em, bool is_min, const kern_type *t, uint32_t a, uint32_t b) {
    uint32_t c = emit_compare(em, is_min ? IR_LT : IR_GT, t, b, a);
    return spv_op3(&em->b, SpvOpSelect, reg_type(em, t), c, b, a);
}

static uint32_t fconst(emitter *em, const kern_type *t, double v) {
    return t->kind == TY_F32 ? spv_const_f32(&em->b, (float)v) : spv_const_f64(&em->b, v);
}

static uint32_t emit_sign(emitter *em, const kern_type *t, uint32_t a) {
    uint32_t ty = reg_type(em, t);
    if (ty_is_float(t)) { /* -0.0 and NaN keep themselves */
        uint32_t z = fconst(em, t, 0.0);
        uint32_t gt = spv_op2(&em->b, SpvOpFOrdGreaterThan, em->t_bool, a, z);
        uint32_t lt = spv_op2(&em->b, SpvOpFOrdLessThan, em->t_bool, a, z);
        uint32_t r = spv_op3(&em->b, SpvOpSelect, ty, lt, fconst(em, t, -1.0), a);
        return spv_op3(&em->b, SpvOpSelect, ty, gt, fconst(em, t, 1.0), r);
    }
    uint32_t z = int_const(em, t, 0), one = int_const(em, t, 1);
    if (t->kind == TY_U32)
        return spv_op3(&em->b, SpvOpSelect, ty, spv_op2(&em->b, SpvOpINotEqual, em->t_bool, a, z),
                       one, z);
    uint32_t gt = spv_op3(&em->b, SpvOpSelect, ty,
                          spv_op2(&em->b, SpvOpSGreaterThan, em->t_bool, a, z), one, z);
    uint32_t lt =
        spv_op3(&em->b, SpvOpSelect, ty, spv_op2(&em->b, SpvOpSLessThan, em->t_bool, a, z), one, z);
    return spv_op2(&em->b, SpvOpISub, ty, gt, lt);
}

/* float -> integer, saturating (NaN gives 0), as llvm.fpto[su]i.sat */
static uint32_t emit_fptoint(emitter *em, const kern_type *from, const kern_type *to, uint32_t v) {
    bool f32 = from->kind == TY_F32;
    uint32_t ft = reg_type(em, from), it = reg_type(em, to);
    double lo, top; /* the range; top = 2^bits (2^31, 2^32, 2^63) is out of it */
    uint64_t maxv, minv;
    if (to->kind == TY_U32) {
        lo = 0.0, top = 4294967296.0, maxv = 0xffffffffu, minv = 0;
    } else if (to->kind == TY_I32) {
        lo = -2147483648.0, top = 2147483648.0, maxv = 0x7fffffff, minv = 0x80000000u;
    } else {
        lo = -9223372036854775808.0, top = 9223372036854775808.0, maxv = 0x7fffffffffffffffull,
        minv = 0x8000000000000000ull;
    }
    /* the largest value of the float type below top: exact, and in range */
    double hi = f32 ? (double)nextafterf((float)top, 0.0f) : nextafter(top, 0.0);
    uint32_t flo = fconst(em, from, lo), fhi = fconst(em, from, hi);
    uint32_t args[3] = {v, flo, fhi};
    uint32_t c = spv_ext(&em->b, ft, GLSLstd450FClamp, args, 3);
    uint32_t r = spv_op1(&em->b, to->kind == TY_U32 ? SpvOpConvertFToU : SpvOpConvertFToS, it, c);
    uint32_t big = spv_op2(&em->b, SpvOpFOrdGreaterThanEqual, em->t_bool, v, fconst(em, from, top));
    uint32_t small = spv_op2(&em->b, SpvOpFOrdLessThanEqual, em->t_bool, v, flo);
    uint32_t nan = spv_op1(&em->b, SpvOpIsNan, em->t_bool, v);
    r = spv_op3(&em->b, SpvOpSelect, it, small, int_const(em, to, (int64_t)minv), r);
    r = spv_op3(&em->b, SpvOpSelect, it, big, int_const(em, to, (int64_t)maxv), r);
    return spv_op3(&em->b, SpvOpSelect, it, nan, int_const(em, to, 0), r);
}

static uint32_t emit_cast(emitter *em, const kern_type *from, const kern_type *to, uint32_t v) {
    uint32_t rt = reg_type(em, to);
    if (from == to)
        return v;
    if (ty_is_float(from)) {
        if (ty_is_float(to))
            return spv_op1(&em->b, SpvOpFConvert, rt, v);
        if (to->kind == TY_BOOL)
            return spv_op2(&em->b, SpvOpFUnordNotEqual, em->t_bool, v, fconst(em, from, 0.0));
        return emit_fptoint(em, from, to, v);
    }
    if (from->kind == TY_BOOL) {
        if (ty_is_float(to))
            return spv_op3(&em->b, SpvOpSelect, rt, v, fconst(em, to, 1.0), fconst(em, to, 0.0));
        return spv_op3(&em->b, SpvOpSelect, rt, v, int_const(em, to, 1), int_const(em, to, 0));
    }
    if (ty_is_float(to))
        return spv_op1(&em->b, from->kind == TY_U32 ? SpvOpConvertUToF : SpvOpConvertSToF, rt, v);
    if (to->kind == TY_BOOL)
        return spv_op2(&em->b, SpvOpINotEqual, em->t_bool, v, int_const(em, from, 0));
    int fw = is_i64(from) ? 64 : 32, tw = is_i64(to) ? 64 : 32;
    if (fw == tw)
        return v; /* i32 <-> u32: the same bits */
    if (fw > tw)
        return spv_op1(&em->b, SpvOpUConvert, rt, v);
    return spv_op1(&em->b, from->kind == TY_I32 ? SpvOpSConvert : SpvOpUConvert, rt, v);
}

static uint32_t emit_const(emitter *em, const ir_op *op) {
    const kern_type *t = op->results[0]->type;
    switch (t->kind) {
    case TY_BOOL: return spv_const_bool(&em->b, op->imm.i != 0);
    case TY_F32: {
        float f = (float)op->imm.f;
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        return spv_const_bits(&em->b, em->t_f32, 32, bits);
    }
    case TY_F64: return spv_const_f64(&em->b, op->imm.f);
    default: return int_const(em, t, op->imm.i);
    }
}

/* round half away from zero: t = trunc(x); t + sign(x) where |x - t| >= 0.5 (exact) */
static uint32_t emit_round(emitter *em, const kern_type *t, uint32_t x) {
    uint32_t ty = reg_type(em, t);
    uint32_t tr = spv_ext(&em->b, ty, GLSLstd450Trunc, &x, 1);
    uint32_t diff = spv_op2(&em->b, SpvOpFSub, ty, x, tr);
    uint32_t ad = spv_ext(&em->b, ty, GLSLstd450FAbs, &diff, 1);
    uint32_t up = spv_op2(&em->b, SpvOpFOrdGreaterThanEqual, em->t_bool, ad, fconst(em, t, 0.5));
    uint32_t sg = spv_ext(&em->b, ty, GLSLstd450FSign, &x, 1);
    uint32_t bumped = spv_op2(&em->b, SpvOpFAdd, ty, tr, sg);
    return spv_op3(&em->b, SpvOpSelect, ty, up, bumped, tr);
}

static uint32_t emit_float_math(emitter *em, const ir_op *op, const uint32_t *x) {
    const kern_type *t = op->operands[0]->type;
    uint32_t ty = reg_type(em, t);
    bool f64 = t->kind == TY_F64;
    enum GLSLstd450 g;
    switch (op->code) {
    case IR_SQRT: return spv_ext(&em->b, ty, GLSLstd450Sqrt, x, 1);
    case IR_RSQRT:
        return spv_op2(&em->b, SpvOpFDiv, ty, fconst(em, t, 1.0),
                       spv_ext(&em->b, ty, GLSLstd450Sqrt, x, 1));
    case IR_FLOOR: return spv_ext(&em->b, ty, GLSLstd450Floor, x, 1);
    case IR_CEIL: return spv_ext(&em->b, ty, GLSLstd450Ceil, x, 1);
    case IR_ROUND: return emit_round(em, t, x[0]);
    case IR_FMA: return spv_ext(&em->b, ty, GLSLstd450Fma, x, 3);
    case IR_SIN: g = GLSLstd450Sin; break;
    case IR_COS: g = GLSLstd450Cos; break;
    case IR_TAN: g = GLSLstd450Tan; break;
    case IR_ASIN: g = GLSLstd450Asin; break;
    case IR_ACOS: g = GLSLstd450Acos; break;
    case IR_ATAN: g = GLSLstd450Atan; break;
    case IR_SINH: g = GLSLstd450Sinh; break;
    case IR_COSH: g = GLSLstd450Cosh; break;
    case IR_TANH: g = GLSLstd450Tanh; break;
    case IR_EXP: g = GLSLstd450Exp; break;
    case IR_EXP2: g = GLSLstd450Exp2; break;
    case IR_LOG: g = GLSLstd450Log; break;
    case IR_LOG2: g = GLSLstd450Log2; break;
    case IR_ATAN2: g = GLSLstd450Atan2; break;
    case IR_POW: g = GLSLstd450Pow; break;
    default: kern_unreachable("SPIR-V backend: not a float math op");
    }
    if (f64) /* GLSL.std.450 has these for 16- and 32-bit floats only */
        return spv_math64_call(&em->b, &em->m64, op->code, x);
    return spv_ext(&em->b, ty, g, x, op->code == IR_ATAN2 || op->code == IR_POW ? 2 : 1);
}

/* ---- arrays ----------------------------------------------------------------------------- */

static int param_of(emitter *em, const ir_value *a) {
    kern_assert(!a->def && a->region == em->kernel->body);
    return (int)a->index;
}

/* The variable of array parameter p viewed with its element type, or (as_int) with the
 * integer type of the same size: a second variable of the same binding. */
static uint32_t array_var(emitter *em, int p, bool as_int) {
    const kern_type *et = em->kernel->params[p].type->elem;
    uint32_t *slot = as_int && ty_is_float(et) ? &em->v_alias[p] : &em->v_arr[p];
    if (!*slot) {
        bool fl = ty_is_float(et) && !as_int;
        uint32_t elem = fl ? mem_type(em, et) : int_mem_type(em, et);
        *slot = buffer_var(em, elem, fl, ty_size(et) * 8, KERN_SPV_BIND_PARAM0 + p);
        spv_name(&em->b, *slot, -1, em->kernel->params[p].name);
    }
    use_global(em, *slot);
    return *slot;
}

/* The linear element index (u64) of an access op, with its bounds checks added to g. */
static uint32_t element_index(emitter *em, const ir_op *op, guard *g) {
    int p = param_of(em, op->operands[0]);
    const kern_type *at = op->operands[0]->type;
    uint32_t u64 = u64t(em), lin = 0;
    for (int d = 0; d < at->rank; d++) {
        const ir_value *iv = op->operands[1 + d];
        uint32_t i = to_u64(em, val(em, iv), iv->type);
        uint32_t n = em->shape[p][d];
        if (em->checks)
            guard_add(em, g, spv_op2(&em->b, SpvOpULessThan, em->t_bool, i, n), KERN_DEVERR_BOUNDS,
                      cu32(em, (uint32_t)d), i, n);
        lin = d == 0 ? i
                     : spv_op2(&em->b, SpvOpIAdd, u64, spv_op2(&em->b, SpvOpIMul, u64, lin, n), i);
    }
    return lin;
}

static uint32_t element_ptr(emitter *em, int p, bool as_int, uint32_t lin) {
    const kern_type *et = em->kernel->params[p].type->elem;
    uint32_t elem = as_int ? int_mem_type(em, et) : mem_type(em, et);
    uint32_t ops[3] = {array_var(em, p, as_int), cu32(em, 0), lin};
    return spv_op(&em->b, SpvOpAccessChain,
                  spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, elem), ops, 3);
}

static uint32_t bitcast(emitter *em, uint32_t type, uint32_t v) {
    return spv_op1(&em->b, SpvOpBitcast, type, v);
}

/* A compare-and-swap loop on the integer bits of a float element: new = f(old), where f is
 * an add of v (min/max: v when v beats old, with the ties rule of emit_minmax; else the
 * loop ends without a store). Returns old. */
static uint32_t emit_cas_loop(emitter *em, ir_opcode code, const kern_type *t, uint32_t ptr,
                              uint32_t v) {
    uint32_t it = int_mem_type(em, t), ft = reg_type(em, t);
    if (it != em->t_u32)
        spv_capability(&em->b, SpvCapabilityInt64Atomics);
    uint32_t lops[3] = {ptr, atomic_scope(em), relaxed(em)};
    uint32_t cur = spv_op(&em->b, SpvOpAtomicLoad, it, lops, 3);
    uint32_t pre = em->cur;
    uint32_t l_head = spv_id(&em->b), l_body = spv_id(&em->b), l_try = spv_id(&em->b),
             l_cont = spv_id(&em->b), l_done = spv_id(&em->b);
    branch(em, l_head);
    label(em, l_head);
    uint32_t phi_at = spv_here(&em->b) + 3; /* OpPhi: header, type, id, then pairs */
    uint32_t oldbits = phi2(em, it, cur, pre, 0, l_cont);
    spv_instv(&em->b.funcs, SpvOpLoopMerge, 3, l_done, l_cont, SpvLoopControlMaskNone);
    branch(em, l_body);
    label(em, l_body);
    uint32_t old = bitcast(em, ft, oldbits), nv;
    if (code == IR_ATOMIC_ADD || code == IR_ATOMIC_SUB) {
        nv = spv_op2(&em->b, code == IR_ATOMIC_ADD ? SpvOpFAdd : SpvOpFSub, ft, old, v);
        branch(em, l_try);
    } else {
        uint32_t take = emit_compare(em, code == IR_ATOMIC_MIN ? IR_LT : IR_GT, t, v, old);
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

static void fadd_atomic(emitter *em, int p, uint32_t lin, uint32_t v) {
    spv_capability(&em->b, SpvCapabilityAtomicFloat32AddEXT);
    spv_extension(&em->b, "SPV_EXT_shader_atomic_float_add");
    uint32_t ops[4] = {element_ptr(em, p, false, lin), atomic_scope(em), relaxed(em), v};
    spv_op(&em->b, SpvOpAtomicFAddEXT, em->t_f32, ops, 4);
}

/* The block copy of array parameter p, or -1. */
static int block_copy_of(const emitter *em, int p) {
    for (int i = 0; i < em->nblk; i++)
        if (em->blk_param[i] == p)
            return i;
    return -1;
}

/* An f32 atomic add of v at element lin: into block copy bi (workgroup memory), or (bi < 0)
 * into array parameter p. */
static void add_to(emitter *em, int bi, int p, uint32_t lin, uint32_t v) {
    if (bi < 0) {
        fadd_atomic(em, p, lin, v);
        return;
    }
    spv_capability(&em->b, SpvCapabilityAtomicFloat32AddEXT);
    spv_extension(&em->b, "SPV_EXT_shader_atomic_float_add");
    uint32_t ptr =
        spv_op2(&em->b, SpvOpAccessChain, spv_type_ptr(&em->b, SpvStorageClassWorkgroup, em->t_f32),
                em->blk_var[bi], lin);
    uint32_t ops[4] = {ptr, cu32(em, SpvScopeWorkgroup), relaxed(em), v};
    spv_op(&em->b, SpvOpAtomicFAddEXT, em->t_f32, ops, 4);
}

/* An f32 atomic add whose old value nobody uses (adjoints like w.grad), into block copy bi
 * or (bi < 0) the array: when every active lane of the subgroup adds into the same element,
 * the subgroup sums first and one lane adds the sum (as the CUDA path combines per warp);
 * otherwise each lane adds. */
static void emit_combined_fadd(emitter *em, int bi, int p, uint32_t lin, uint32_t v) {
    spv_capability(&em->b, SpvCapabilityGroupNonUniform);
    spv_capability(&em->b, SpvCapabilityGroupNonUniformVote);
    spv_capability(&em->b, SpvCapabilityGroupNonUniformArithmetic);
    uint32_t sg = cu32(em, SpvScopeSubgroup);
    uint32_t same = spv_op2(&em->b, SpvOpGroupNonUniformAllEqual, em->t_bool, sg, lin);
    uint32_t l_same = spv_id(&em->b), l_each = spv_id(&em->b), l_one = spv_id(&em->b),
             l_j1 = spv_id(&em->b), l_j = spv_id(&em->b);
    selection_merge(em, l_j);
    branch_cond(em, same, l_same, l_each);
    label(em, l_same);
    uint32_t rops[3] = {sg, SpvGroupOperationReduce, v};
    uint32_t sum = spv_op(&em->b, SpvOpGroupNonUniformFAdd, em->t_f32, rops, 3);
    uint32_t first = spv_op1(&em->b, SpvOpGroupNonUniformElect, em->t_bool, sg);
    selection_merge(em, l_j1);
    branch_cond(em, first, l_one, l_j1);
    label(em, l_one);
    add_to(em, bi, p, lin, sum);
    branch(em, l_j1);
    label(em, l_j1);
    branch(em, l_j);
    label(em, l_each);
    add_to(em, bi, p, lin, v);
    branch(em, l_j);
    label(em, l_j);
}

/* An add into block-copied array p: into the workgroup's copy when the array fits it, else
 * into the array; both combined per subgroup first. */
static void emit_block_fadd(emitter *em, int bi, int p, uint32_t lin, uint32_t v) {
    uint32_t l_sh = spv_id(&em->b), l_gl = spv_id(&em->b), l_j = spv_id(&em->b);
    selection_merge(em, l_j);
    branch_cond(em, em->blk_on[bi], l_sh, l_gl);
    label(em, l_sh);
    emit_combined_fadd(em, bi, p, lin, v);
    branch(em, l_j);
    label(em, l_gl);
    emit_combined_fadd(em, -1, p, lin, v);
    branch(em, l_j);
    label(em, l_j);
}

static uint32_t emit_access(emitter *em, const ir_op *op) {
    int p = param_of(em, op->operands[0]);
    const kern_type *et = op->operands[0]->type->elem;
    uint32_t rt = reg_type(em, et);
    guard g = {0};
    uint32_t lin = element_index(em, op, &g);
    guard_begin(em, &g, op);
    if (op->code == IR_LOAD) {
        uint32_t r = spv_op1(&em->b, SpvOpLoad, mem_type(em, et), element_ptr(em, p, false, lin));
        if (et->kind == TY_BOOL)
            r = spv_op2(&em->b, SpvOpINotEqual, em->t_bool, r, spv_const_u8(&em->b, 0));
        return guard_end(em, &g, r, zero_of(em, et), rt);
    }
    uint32_t v = val(em, op->operands[op->noperands - 1]);
    if (op->code == IR_STORE) {
        if (et->kind == TY_BOOL)
            v = spv_op3(&em->b, SpvOpSelect, mem_type(em, et), v, spv_const_u8(&em->b, 1),
                        spv_const_u8(&em->b, 0));
        spv_instv(&em->b.funcs, SpvOpStore, 2, element_ptr(em, p, false, lin), v);
        guard_end(em, &g, 0, 0, 0);
        return 0;
    }
    uint32_t r;
    bool fl = ty_is_float(et), u = et->kind == TY_U32;
    if (et->kind == TY_BOOL) {
        /* no byte atomics in Vulkan: the builder makes none; an xchg (autodiff) is a plain
         * load and store of the byte */
        uint32_t ptr = element_ptr(em, p, false, lin);
        r = spv_op2(&em->b, SpvOpINotEqual, em->t_bool,
                    spv_op1(&em->b, SpvOpLoad, mem_type(em, et), ptr), spv_const_u8(&em->b, 0));
        if (op->code == IR_ATOMIC_XCHG)
            spv_instv(&em->b.funcs, SpvOpStore, 2, ptr,
                      spv_op3(&em->b, SpvOpSelect, mem_type(em, et), v, spv_const_u8(&em->b, 1),
                              spv_const_u8(&em->b, 0)));
        return guard_end(em, &g, r, zero_of(em, et), rt);
    }
    if (is_i64(et) || et->kind == TY_F64)
        spv_capability(&em->b, SpvCapabilityInt64Atomics);
    int bi = block_copy_of(em, p);
    if (bi >= 0 && (op->code == IR_ATOMIC_ADD || op->code == IR_ATOMIC_SUB)) {
        uint32_t add = op->code == IR_ATOMIC_SUB ? spv_op1(&em->b, SpvOpFNegate, rt, v) : v;
        emit_block_fadd(em, bi, p, lin, add);
        r = spv_op(&em->b, SpvOpUndef, rt, NULL, 0);
    } else if (fl && op->code == IR_ATOMIC_ADD && et->kind == TY_F32 &&
               !value_used(em, op->results[0])) {
        emit_combined_fadd(em, -1, p, lin, v);
        r = spv_op(&em->b, SpvOpUndef, rt, NULL, 0);
    } else if (fl && op->code == IR_ATOMIC_ADD && et->kind == TY_F32) {
        spv_capability(&em->b, SpvCapabilityAtomicFloat32AddEXT);
        spv_extension(&em->b, "SPV_EXT_shader_atomic_float_add");
        uint32_t ops[4] = {element_ptr(em, p, false, lin), atomic_scope(em), relaxed(em), v};
        r = spv_op(&em->b, SpvOpAtomicFAddEXT, rt, ops, 4);
    } else if (fl && op->code == IR_ATOMIC_SUB && et->kind == TY_F32) {
        spv_capability(&em->b, SpvCapabilityAtomicFloat32AddEXT);
        spv_extension(&em->b, "SPV_EXT_shader_atomic_float_add");
        uint32_t nv = spv_op1(&em->b, SpvOpFNegate, rt, v);
        uint32_t ops[4] = {element_ptr(em, p, false, lin), atomic_scope(em), relaxed(em), nv};
        r = spv_op(&em->b, SpvOpAtomicFAddEXT, rt, ops, 4);
    } else if (fl && op->code != IR_ATOMIC_XCHG) {
        r = emit_cas_loop(em, op->code, et, element_ptr(em, p, true, lin), v);
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
        uint32_t ops[4] = {element_ptr(em, p, fl, lin), atomic_scope(em), relaxed(em), iv};
        r = spv_op(&em->b, o, fl ? it : rt, ops, 4);
        if (fl)
            r = bitcast(em, rt, r);
    }
    return guard_end(em, &g, r, zero_of(em, et), rt);
}

/* ---- adstacks --------------------------------------------------------------------------- */

static uint32_t stack_of(emitter *em, const ir_op *op) {
    kern_assert(em->ad_depth && op->imm.i >= 0 && (uint64_t)op->imm.i < em->kernel->nadstacks);
    return (uint32_t)op->imm.i;
}

/* The pointer to entry d of stack s of this work item: element base[s] + d * slots. */
static uint32_t ad_entry(emitter *em, uint32_t s, uint32_t d) {
    const ir_adstack *st = &em->kernel->adstacks[s];
    uint32_t elem, u64 = u64t(em);
    uint32_t var = heap_var(em, st->type, &elem);
    uint32_t i = spv_op2(&em->b, SpvOpIAdd, u64, em->ad_base[s],
                         spv_op2(&em->b, SpvOpIMul, u64, d, em->ad_slots));
    uint32_t ops[3] = {var, cu32(em, 0), i};
    return spv_op(&em->b, SpvOpAccessChain,
                  spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, elem), ops, 3);
}

/* v (of the stack's type) as the bits the heap holds, and back. */
static uint32_t ad_to_bits(emitter *em, const kern_type *t, uint32_t v) {
    uint32_t it = int_mem_type(em, t);
    if (t->kind == TY_BOOL)
        return spv_op3(&em->b, SpvOpSelect, it, v, spv_const_u8(&em->b, 1),
                       spv_const_u8(&em->b, 0));
    return ty_is_float(t) ? bitcast(em, it, v) : v;
}

static uint32_t ad_from_bits(emitter *em, const kern_type *t, uint32_t bits) {
    if (t->kind == TY_BOOL)
        return spv_op2(&em->b, SpvOpINotEqual, em->t_bool, bits, spv_const_u8(&em->b, 0));
    return ty_is_float(t) ? bitcast(em, reg_type(em, t), bits) : bits;
}

static void emit_adpush(emitter *em, const ir_op *op) {
    uint32_t s = stack_of(em, op), u64 = u64t(em);
    const ir_adstack *st = &em->kernel->adstacks[s];
    uint32_t v = ad_to_bits(em, st->type, val(em, op->operands[0]));
    uint32_t d = spv_op1(&em->b, SpvOpLoad, u64, em->ad_depth[s]);
    uint32_t d1 = spv_op2(&em->b, SpvOpIAdd, u64, d, cu64(em, 1));
    uint32_t ok = spv_op2(&em->b, SpvOpULessThan, em->t_bool, d, em->ad_cap[s]);
    uint32_t l_store = spv_id(&em->b), l_ovf = spv_id(&em->b), l_j = spv_id(&em->b);
    selection_merge(em, l_j);
    branch_cond(em, ok, l_store, l_ovf);
    label(em, l_store);
    spv_instv(&em->b.funcs, SpvOpStore, 2, ad_entry(em, s, d), v);
    branch(em, l_j);
    label(em, l_ovf);
    call_overflow(em, op->loc.line ? op->loc : st->loc, em->ad_cap[s], d1);
    branch(em, l_j);
    label(em, l_j);
    spv_instv(&em->b.funcs, SpvOpStore, 2, em->ad_depth[s], d1);
}

static void emit_adpop(emitter *em, const ir_op *op) {
    uint32_t s = stack_of(em, op), u64 = u64t(em);
    const ir_adstack *st = &em->kernel->adstacks[s];
    uint32_t it = int_mem_type(em, st->type);
    uint32_t d = spv_op1(&em->b, SpvOpLoad, u64, em->ad_depth[s]);
    uint32_t d1 = spv_op2(&em->b, SpvOpISub, u64, d, cu64(em, 1));
    spv_instv(&em->b.funcs, SpvOpStore, 2, em->ad_depth[s], d1);
    /* unsigned: an unbalanced pop (depth -1) reads nothing either */
    uint32_t ok = spv_op2(&em->b, SpvOpULessThan, em->t_bool, d1, em->ad_cap[s]);
    uint32_t pre = em->cur, l_load = spv_id(&em->b), l_j = spv_id(&em->b);
    selection_merge(em, l_j);
    branch_cond(em, ok, l_load, l_j);
    label(em, l_load);
    uint32_t bits = spv_op1(&em->b, SpvOpLoad, it, ad_entry(em, s, d1));
    uint32_t from = em->cur;
    branch(em, l_j);
    label(em, l_j);
    uint32_t zero = spv_const_bits(&em->b, it, ty_size(st->type) * 8, 0);
    uint32_t phi = phi2(em, it, bits, from, zero, pre);
    set_val(em, op->results[0], ad_from_bits(em, st->type, phi));
}

/* ---- simple ops ------------------------------------------------------------------------- */

static void emit_simple(emitter *em, const ir_op *op) {
    const kern_type *t = op->noperands ? op->operands[0]->type : NULL;
    bool fl = t && ty_is_float(t);
    uint32_t x[3] = {0, 0, 0}, r = 0;
    switch (op->code) {
    case IR_CONST: r = emit_const(em, op); break;
    case IR_DIM: {
        int p = param_of(em, op->operands[0]);
        r = spv_op1(&em->b, SpvOpUConvert, em->t_u32, em->shape[p][op->imm.i]);
        break;
    }
    case IR_LOAD:
    case IR_STORE:
    case IR_ATOMIC_ADD:
    case IR_ATOMIC_SUB:
    case IR_ATOMIC_MIN:
    case IR_ATOMIC_MAX:
    case IR_ATOMIC_XCHG: r = emit_access(em, op); break;
    default: {
        kern_assert(op->noperands <= 3);
        for (uint32_t i = 0; i < op->noperands; i++)
            x[i] = val(em, op->operands[i]);
        uint32_t ty = op->nresults ? reg_type(em, op->results[0]->type) : 0;
        bool bl = t && t->kind == TY_BOOL;
        switch (op->code) {
        case IR_CAST: r = emit_cast(em, t, op->results[0]->type, x[0]); break;
        case IR_ADD: r = spv_op2(&em->b, fl ? SpvOpFAdd : SpvOpIAdd, ty, x[0], x[1]); break;
        case IR_SUB: r = spv_op2(&em->b, fl ? SpvOpFSub : SpvOpISub, ty, x[0], x[1]); break;
        case IR_MUL: r = spv_op2(&em->b, fl ? SpvOpFMul : SpvOpIMul, ty, x[0], x[1]); break;
        case IR_DIV:
        case IR_REM: r = emit_divrem(em, op, x[0], x[1]); break;
        case IR_NEG: r = spv_op1(&em->b, fl ? SpvOpFNegate : SpvOpSNegate, ty, x[0]); break;
        case IR_AND:
            r = spv_op2(&em->b, bl ? SpvOpLogicalAnd : SpvOpBitwiseAnd, ty, x[0], x[1]);
            break;
        case IR_OR:
            r = spv_op2(&em->b, bl ? SpvOpLogicalOr : SpvOpBitwiseOr, ty, x[0], x[1]);
            break;
        case IR_XOR:
            r = spv_op2(&em->b, bl ? SpvOpLogicalNotEqual : SpvOpBitwiseXor, ty, x[0], x[1]);
            break;
        case IR_NOT: r = spv_op1(&em->b, bl ? SpvOpLogicalNot : SpvOpNot, ty, x[0]); break;
        case IR_SHL:
        case IR_SHR: r = emit_shift(em, op, x[0], x[1]); break;
        case IR_EQ:
        case IR_NE:
        case IR_LT:
        case IR_LE:
        case IR_GT:
        case IR_GE: r = emit_compare(em, op->code, t, x[0], x[1]); break;
        case IR_SELECT: r = spv_op3(&em->b, SpvOpSelect, ty, x[0], x[1], x[2]); break;
        case IR_ABS:
            if (fl)
                r = spv_ext(&em->b, ty, GLSLstd450FAbs, x, 1);
            else if (t->kind == TY_U32)
                r = x[0];
            else /* INT_MIN wraps: select(x < 0, -x, x) */
                r = spv_op3(&em->b, SpvOpSelect, ty,
                            spv_op2(&em->b, SpvOpSLessThan, em->t_bool, x[0], int_const(em, t, 0)),
                            spv_op1(&em->b, SpvOpSNegate, ty, x[0]), x[0]);
            break;
        case IR_SIGN: r = emit_sign(em, t, x[0]); break;
        case IR_MIN: r = emit_minmax(em, true, t, x[0], x[1]); break;
        case IR_MAX: r = emit_minmax(em, false, t, x[0], x[1]); break;
        case IR_CLAMP:
            r = emit_minmax(em, true, t, emit_minmax(em, false, t, x[0], x[1]), x[2]);
            break;
        default: r = emit_float_math(em, op, x); break;
        }
    }
    }
    if (op->nresults)
        set_val(em, op->results[0], r);
}

/* ---- control flow ----------------------------------------------------------------------- */

static const ir_op *emit_region(emitter *em, const ir_region *r);

static uint32_t *tmp_ids(uint32_t n) {
    uint32_t *a = calloc(n ? n : 1, sizeof *a);
    if (!a)
        kern_oom(n * sizeof *a);
    return a;
}

static void emit_if(emitter *em, const ir_op *op) {
    uint32_t n = op->nresults;
    uint32_t l_then = spv_id(&em->b), l_else = spv_id(&em->b), l_merge = spv_id(&em->b);
    selection_merge(em, l_merge);
    branch_cond(em, val(em, op->operands[0]), l_then, l_else);
    uint32_t *vt = tmp_ids(n), *ve = tmp_ids(n);
    label(em, l_then);
    const ir_op *y = emit_region(em, op->regions[0]);
    for (uint32_t i = 0; i < n; i++)
        vt[i] = val(em, y->operands[i]);
    uint32_t end_then = em->cur;
    branch(em, l_merge);
    label(em, l_else);
    y = emit_region(em, op->regions[1]);
    for (uint32_t i = 0; i < n; i++)
        ve[i] = val(em, y->operands[i]);
    uint32_t end_else = em->cur;
    branch(em, l_merge);
    label(em, l_merge);
    for (uint32_t i = 0; i < n; i++)
        set_val(em, op->results[i],
                phi2(em, reg_type(em, op->results[i]->type), vt[i], end_then, ve[i], end_else));
    free(vt);
    free(ve);
}

/* Loop headers: one OpPhi per carried value with the entry value; the operands from the
 * continue block are patched in later (the returned word positions). */
static uint32_t header_phi(emitter *em, uint32_t type, uint32_t init, uint32_t pre, uint32_t l_cont,
                           uint32_t *patch_at) {
    *patch_at = spv_here(&em->b) + 5;
    return phi2(em, type, init, pre, 0, l_cont);
}

static void emit_for(emitter *em, const ir_op *op) {
    bool early = (op->attr & IR_FOR_EARLY_EXIT) != 0;
    uint32_t n = op->nresults;
    const ir_region *body = op->regions[0];
    const kern_type *it = op->operands[0]->type;
    uint32_t ity = reg_type(em, it);
    uint32_t lo = val(em, op->operands[0]), hi = val(em, op->operands[1]);
    uint32_t pre = em->cur;
    uint32_t l_head = spv_id(&em->b), l_body = spv_id(&em->b), l_cont = spv_id(&em->b),
             l_merge = spv_id(&em->b);
    branch(em, l_head);
    label(em, l_head);
    uint32_t i_at, *at = tmp_ids(n), *carried = tmp_ids(n), *next = tmp_ids(n);
    uint32_t iphi = header_phi(em, ity, lo, pre, l_cont, &i_at);
    for (uint32_t k = 0; k < n; k++)
        carried[k] = header_phi(em, reg_type(em, op->results[k]->type),
                                val(em, op->operands[2 + k]), pre, l_cont, &at[k]);
    uint32_t less =
        spv_op2(&em->b, it->kind == TY_U32 ? SpvOpULessThan : SpvOpSLessThan, em->t_bool, iphi, hi);
    spv_instv(&em->b.funcs, SpvOpLoopMerge, 3, l_merge, l_cont, SpvLoopControlMaskNone);
    branch_cond(em, less, l_body, l_merge);
    label(em, l_body);
    set_val(em, body->args[0], iphi);
    for (uint32_t k = 0; k < n; k++)
        set_val(em, body->args[1 + k], carried[k]);
    const ir_op *y = emit_region(em, body);
    for (uint32_t k = 0; k < n; k++)
        next[k] = val(em, y->operands[(early ? 1 : 0) + k]);
    uint32_t body_end = em->cur;
    if (early)
        branch_cond(em, val(em, y->operands[0]), l_cont, l_merge);
    else
        branch(em, l_cont);
    label(em, l_cont);
    uint32_t inext = spv_op2(&em->b, SpvOpIAdd, ity, iphi, is_i64(it) ? cu64(em, 1) : cu32(em, 1));
    branch(em, l_head);
    spv_patch(&em->b, i_at, inext);
    for (uint32_t k = 0; k < n; k++)
        spv_patch(&em->b, at[k], next[k]);
    label(em, l_merge);
    for (uint32_t k = 0; k < n; k++)
        set_val(em, op->results[k],
                early ? phi2(em, reg_type(em, op->results[k]->type), carried[k], l_head, next[k],
                             body_end)
                      : carried[k]);
    free(at);
    free(carried);
    free(next);
}

static void emit_while(emitter *em, const ir_op *op) {
    const ir_region *before = op->regions[0], *after = op->regions[1];
    uint32_t ninit = op->noperands;
    uint32_t pre = em->cur;
    uint32_t l_head = spv_id(&em->b), l_before = spv_id(&em->b), l_after = spv_id(&em->b),
             l_cont = spv_id(&em->b), l_merge = spv_id(&em->b);
    branch(em, l_head);
    label(em, l_head);
    uint32_t *at = tmp_ids(ninit);
    for (uint32_t k = 0; k < ninit; k++)
        set_val(em, before->args[k],
                header_phi(em, reg_type(em, op->operands[k]->type), val(em, op->operands[k]), pre,
                           l_cont, &at[k]));
    spv_instv(&em->b.funcs, SpvOpLoopMerge, 3, l_merge, l_cont, SpvLoopControlMaskNone);
    branch(em, l_before);
    label(em, l_before);
    const ir_op *cond = emit_region(em, before);
    for (uint32_t k = 0; k < op->nresults; k++) {
        uint32_t v = val(em, cond->operands[1 + k]);
        set_val(em, after->args[k], v);
        set_val(em, op->results[k], v);
    }
    branch_cond(em, val(em, cond->operands[0]), l_after, l_merge);
    label(em, l_after);
    const ir_op *y = emit_region(em, after);
    uint32_t *next = tmp_ids(ninit);
    for (uint32_t k = 0; k < ninit; k++)
        next[k] = val(em, y->operands[k]);
    branch(em, l_cont);
    label(em, l_cont);
    branch(em, l_head);
    for (uint32_t k = 0; k < ninit; k++)
        spv_patch(&em->b, at[k], next[k]);
    label(em, l_merge);
    free(at);
    free(next);
}

static const ir_op *emit_region(emitter *em, const ir_region *r) {
    ir_foreach_op(op, r) {
        switch (op->code) {
        case IR_YIELD:
        case IR_CONDITION: return op;
        case IR_IF: emit_if(em, op); break;
        case IR_FOR: emit_for(em, op); break;
        case IR_WHILE: emit_while(em, op); break;
        case IR_ADPUSH: emit_adpush(em, op); break;
        case IR_ADPOP: emit_adpop(em, op); break;
        case IR_PARALLEL:
        case IR_SERIAL: kern_unreachable("SPIR-V backend: a task inside a region");
        default: emit_simple(em, op); break;
        }
    }
    return NULL;
}

/* ---- entry points ----------------------------------------------------------------------- */

/* The kernel's launch block (binding 0): members in the order of kern_spv_block_layout. */
static void kernel_begin(emitter *em, const ir_kernel *k) {
    em->kernel = k;
    uint32_t np = k->nparams, na = k->nadstacks;
    const kern_type **pt = calloc(np + 1, sizeof *pt);
    size_t *off = calloc(np + 1 + 2 * na, sizeof *off);
    em->block_member = calloc(np + 1, sizeof *em->block_member);
    em->v_arr = calloc(np + 1, sizeof *em->v_arr);
    em->v_alias = calloc(np + 1, sizeof *em->v_alias);
    em->shape = calloc(np + 1, sizeof *em->shape);
    em->ad_depth = calloc(na + 1, sizeof *em->ad_depth);
    em->ad_base = calloc(na + 1, sizeof *em->ad_base);
    em->ad_cap = calloc(na + 1, sizeof *em->ad_cap);
    size_t nm = 1 + 2 * (size_t)na;
    for (uint32_t p = 0; p < np; p++)
        nm += ty_is_array(k->params[p].type) ? k->params[p].type->rank : 1;
    em->block_type = calloc(nm, sizeof *em->block_type);
    uint32_t *moff = calloc(nm, sizeof *moff);
    if (!pt || !off || !em->block_member || !em->v_arr || !em->v_alias || !em->shape ||
        !em->ad_depth || !em->ad_base || !em->ad_cap || !em->block_type || !moff)
        kern_oom(nm * sizeof *moff);
    for (uint32_t p = 0; p < np; p++)
        pt[p] = k->params[p].type;
    kern_spv_block_layout(pt, (int)np, (int)na, off);
    uint32_t m = 0, u64 = u64t(em);
    for (uint32_t p = 0; p < np; p++) {
        const kern_type *t = k->params[p].type;
        em->block_member[p] = m;
        if (ty_is_array(t)) {
            for (int d = 0; d < t->rank; d++) {
                em->block_type[m] = u64;
                moff[m++] = (uint32_t)off[p] + 8u * (uint32_t)d;
            }
        } else {
            em->block_type[m] = t->kind == TY_BOOL ? em->t_u32 : reg_type(em, t);
            moff[m++] = (uint32_t)off[p];
        }
    }
    em->block_type[m] = u64;
    moff[m++] = (uint32_t)off[np];
    for (uint32_t s = 0; s < 2 * na; s++) {
        em->block_type[m] = u64;
        moff[m++] = (uint32_t)off[np + 1 + s];
    }
    em->nmembers = m;
    uint32_t st = spv_type_struct(&em->b, em->block_type, moff, m, true);
    for (uint32_t i = 0; i < m; i++)
        spv_member_decorate(&em->b, st, i, SpvDecorationNonWritable, NULL, 0);
    em->v_block = spv_global(&em->b, spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, st),
                             SpvStorageClassStorageBuffer, 0, KERN_SPV_BIND_BLOCK);
    /* names for the text forms (spirv-asm, msl): launch.x0_extent0, launch.steps, ... */
    spv_name(&em->b, st, -1, "launch_block");
    spv_name(&em->b, em->v_block, -1, "launch");
    m = 0;
    for (uint32_t p = 0; p < np; p++) {
        const kern_type *t = k->params[p].type;
        char member[300];
        for (int d = 0; d < (ty_is_array(t) ? t->rank : 1); d++) {
            if (ty_is_array(t))
                snprintf(member, sizeof member, "%.256s_extent%d", k->params[p].name, d);
            else
                snprintf(member, sizeof member, "%.256s", k->params[p].name);
            spv_name(&em->b, st, (int)m++, member);
        }
    }
    spv_name(&em->b, st, (int)m++, "ad_slots");
    for (uint32_t s = 0; s < na; s++) {
        char member[64];
        snprintf(member, sizeof member, "ad_off%u", s);
        spv_name(&em->b, st, (int)m++, member);
        snprintf(member, sizeof member, "ad_cap%u", s);
        spv_name(&em->b, st, (int)m++, member);
    }
    free(pt);
    free(off);
    free(moff);
}

static void kernel_end(emitter *em) {
    free(em->block_member);
    free(em->block_type);
    free(em->v_arr);
    free(em->v_alias);
    free(em->shape);
    free(em->ad_depth);
    free(em->ad_base);
    free(em->ad_cap);
    em->block_member = em->block_type = em->v_arr = em->v_alias = NULL;
    em->ad_depth = em->ad_base = em->ad_cap = NULL;
    em->shape = NULL;
    em->kernel = NULL;
}

static uint32_t block_load(emitter *em, uint32_t member) {
    use_global(em, em->v_block);
    uint32_t t = em->block_type[member];
    uint32_t ptr =
        spv_op2(&em->b, SpvOpAccessChain, spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, t),
                em->v_block, cu32(em, member));
    return spv_op1(&em->b, SpvOpLoad, t, ptr);
}

static uint32_t builtin_x(emitter *em, uint32_t *var, SpvBuiltIn bi) {
    if (!*var)
        *var = builtin_var(em, bi);
    use_global(em, *var);
    uint32_t v3 = spv_op1(&em->b, SpvOpLoad, spv_type_vec(&em->b, em->t_u32, 3), *var);
    uint32_t idx = 0;
    uint32_t ops[2] = {v3, idx};
    uint32_t x = spv_op(&em->b, SpvOpCompositeExtract, em->t_u32, ops, 2);
    return spv_op1(&em->b, SpvOpUConvert, u64t(em), x);
}

/* The number of work items along dimension d of a parallel task: max(0, hi - lo) (u64). */
static uint32_t task_extent(emitter *em, const ir_op *task, uint32_t d) {
    const kern_type *it = task->operands[2 * d]->type;
    uint32_t u64 = u64t(em);
    uint32_t lo = to_u64(em, val(em, task->operands[2 * d]), it);
    uint32_t hi = to_u64(em, val(em, task->operands[2 * d + 1]), it);
    uint32_t n = spv_op2(&em->b, SpvOpISub, u64, hi, lo);
    uint32_t pos = spv_op2(&em->b, SpvOpSGreaterThan, em->t_bool, n, cu64(em, 0));
    return spv_op3(&em->b, SpvOpSelect, u64, pos, n, cu64(em, 0));
}

static void reset_adstacks(emitter *em) {
    for (uint32_t s = 0; s < em->kernel->nadstacks; s++)
        spv_instv(&em->b.funcs, SpvOpStore, 2, em->ad_depth[s], cu64(em, 0));
}

/* Which arrays of the task get block copies: f32 parameters that the task accesses only
 * by atomic adds and subs whose old value it never uses (adjoints such as w.grad). */
static void scan_block_use(emitter *em, const ir_region *r, int *use) {
    ir_foreach_op(op, r) {
        if (op->noperands && ty_is_array(op->operands[0]->type) && !op->operands[0]->def &&
            op->operands[0]->region == em->kernel->body) {
            int p = (int)op->operands[0]->index;
            bool add = (op->code == IR_ATOMIC_ADD || op->code == IR_ATOMIC_SUB) &&
                       op->operands[0]->type->elem->kind == TY_F32 &&
                       !value_used(em, op->results[0]);
            if (op->code == IR_DIM)
                ; /* its extents only */
            else if (add && use[p] >= 0)
                use[p] = 1;
            else
                use[p] = -1;
        }
        for (uint32_t i = 0; i < op->nregions; i++)
            scan_block_use(em, op->regions[i], use);
    }
}

static uint32_t local_x(emitter *em) {
    if (!em->v_lid)
        em->v_lid = builtin_var(em, SpvBuiltInLocalInvocationId);
    use_global(em, em->v_lid);
    uint32_t v3 = spv_op1(&em->b, SpvOpLoad, spv_type_vec(&em->b, em->t_u32, 3), em->v_lid);
    uint32_t ops[2] = {v3, 0};
    return spv_op1(&em->b, SpvOpUConvert, u64t(em),
                   spv_op(&em->b, SpvOpCompositeExtract, em->t_u32, ops, 2));
}

static void workgroup_barrier(emitter *em) {
    spv_instv(
        &em->b.funcs, SpvOpControlBarrier, 3, cu32(em, SpvScopeWorkgroup),
        cu32(em, SpvScopeWorkgroup),
        cu32(em, SpvMemorySemanticsAcquireReleaseMask | SpvMemorySemanticsWorkgroupMemoryMask));
}

/* A loop i = start, start + step, ... while i < end (u64): strided_begin opens it and
 * positions in its body (returning i), strided_end closes it after the body. */
typedef struct strided {
    uint32_t l_head, l_cont, l_merge, at;
} strided;

static uint32_t strided_begin(emitter *em, uint32_t start, uint32_t end, strided *st) {
    uint32_t pre = em->cur, l_body = spv_id(&em->b);
    st->l_head = spv_id(&em->b);
    st->l_cont = spv_id(&em->b);
    st->l_merge = spv_id(&em->b);
    branch(em, st->l_head);
    label(em, st->l_head);
    uint32_t i = header_phi(em, u64t(em), start, pre, st->l_cont, &st->at);
    uint32_t more = spv_op2(&em->b, SpvOpULessThan, em->t_bool, i, end);
    spv_instv(&em->b.funcs, SpvOpLoopMerge, 3, st->l_merge, st->l_cont, SpvLoopControlMaskNone);
    branch_cond(em, more, l_body, st->l_merge);
    label(em, l_body);
    return i;
}

static void strided_end(emitter *em, const strided *st, uint32_t i, uint32_t step) {
    branch(em, st->l_cont);
    label(em, st->l_cont);
    spv_patch(&em->b, st->at, spv_op2(&em->b, SpvOpIAdd, u64t(em), i, step));
    branch(em, st->l_head);
    label(em, st->l_merge);
}

/* for (j = lid; j < n; j += KERN_SPV_GROUP) body(j), under `if on`; body is 0 (zero the
 * copy) or 1 (add the copy's non-zero entries to the array). */
static void block_loop(emitter *em, int bi, uint32_t lid, int what) {
    uint32_t l_on = spv_id(&em->b), l_j = spv_id(&em->b);
    selection_merge(em, l_j);
    branch_cond(em, em->blk_on[bi], l_on, l_j);
    label(em, l_on);
    strided st;
    uint32_t j = strided_begin(em, lid, em->blk_n[bi], &st);
    uint32_t ptr =
        spv_op2(&em->b, SpvOpAccessChain, spv_type_ptr(&em->b, SpvStorageClassWorkgroup, em->t_f32),
                em->blk_var[bi], j);
    if (what == 0) {
        spv_instv(&em->b.funcs, SpvOpStore, 2, ptr, spv_const_f32(&em->b, 0.0f));
    } else {
        uint32_t x = spv_op1(&em->b, SpvOpLoad, em->t_f32, ptr);
        uint32_t nz =
            spv_op2(&em->b, SpvOpFUnordNotEqual, em->t_bool, x, spv_const_f32(&em->b, 0.0f));
        uint32_t l_add = spv_id(&em->b), l_skip = spv_id(&em->b);
        selection_merge(em, l_skip);
        branch_cond(em, nz, l_add, l_skip);
        label(em, l_add);
        fadd_atomic(em, em->blk_param[bi], j, x);
        branch(em, l_skip);
        label(em, l_skip);
    }
    strided_end(em, &st, j, cu64(em, KERN_SPV_GROUP));
    branch(em, l_j);
    label(em, l_j);
}

/* Before the grid-stride loop (uniform control flow): the block copies, zeroed. */
static void block_copies_begin(emitter *em, const ir_op *task) {
    const ir_kernel *k = em->kernel;
    em->nblk = 0;
    if (em->opts->debug)
        return; /* debug builds keep every access where the checks see it */
    int *use = calloc(k->nparams + 1, sizeof *use);
    if (!use)
        kern_oom(k->nparams * sizeof *use);
    scan_block_use(em, task->regions[0], use);
    uint32_t u64 = u64t(em);
    for (uint32_t p = 0; p < k->nparams && em->nblk < KERN_SPV_BLOCK_COPIES; p++) {
        if (use[p] != 1)
            continue;
        int i = em->nblk++;
        em->blk_param[i] = (int)p;
        uint32_t arr = spv_type_array_of(&em->b, em->t_f32, KERN_SPV_BLOCK_ELEMS);
        em->blk_var[i] = spv_global(&em->b, spv_type_ptr(&em->b, SpvStorageClassWorkgroup, arr),
                                    SpvStorageClassWorkgroup, 0, -1);
        use_global(em, em->blk_var[i]);
        uint32_t n = cu64(em, 1);
        for (int d = 0; d < k->params[p].type->rank; d++)
            n = spv_op2(&em->b, SpvOpIMul, u64, n, em->shape[p][d]);
        em->blk_n[i] = n;
        em->blk_on[i] =
            spv_op2(&em->b, SpvOpULessThanEqual, em->t_bool, n, cu64(em, KERN_SPV_BLOCK_ELEMS));
    }
    free(use);
    if (!em->nblk)
        return;
    uint32_t lid = local_x(em);
    for (int i = 0; i < em->nblk; i++)
        block_loop(em, i, lid, 0);
    workgroup_barrier(em);
}

/* After it: every invocation of the workgroup is done; the copies go to the arrays. */
static void block_copies_end(emitter *em) {
    if (!em->nblk)
        return;
    workgroup_barrier(em);
    uint32_t lid = local_x(em);
    for (int i = 0; i < em->nblk; i++)
        block_loop(em, i, lid, 1);
    em->nblk = 0;
}

static void emit_parallel(emitter *em, const ir_op *task, uint32_t w, uint32_t nthreads) {
    block_copies_begin(em, task);
    const ir_region *body = task->regions[0];
    uint32_t nd = body->nargs, u64 = u64t(em);
    uint32_t ext[8];
    kern_assert(nd <= 8);
    uint32_t count = 0;
    for (uint32_t d = 0; d < nd; d++) {
        ext[d] = task_extent(em, task, d);
        count = d == 0 ? ext[d] : spv_op2(&em->b, SpvOpIMul, u64, count, ext[d]);
    }
    strided st;
    uint32_t n = strided_begin(em, w, count, &st);
    uint32_t rem = n;
    for (uint32_t d = nd; d-- > 0;) { /* the last dimension fastest */
        const kern_type *it = task->operands[2 * d]->type;
        uint32_t lo = to_u64(em, val(em, task->operands[2 * d]), it);
        uint32_t off = d == 0 ? rem : spv_op2(&em->b, SpvOpUMod, u64, rem, ext[d]);
        if (d > 0)
            rem = spv_op2(&em->b, SpvOpUDiv, u64, rem, ext[d]);
        uint32_t i = spv_op2(&em->b, SpvOpIAdd, u64, lo, off);
        set_val(em, body->args[d], is_i64(it) ? i : spv_op1(&em->b, SpvOpUConvert, em->t_u32, i));
    }
    reset_adstacks(em);
    emit_region(em, body);
    strided_end(em, &st, n, nthreads);
    block_copies_end(em);
}

static void emit_serial(emitter *em, const ir_op *task, uint32_t w) {
    uint32_t l_run = spv_id(&em->b), l_merge = spv_id(&em->b);
    uint32_t first = spv_op2(&em->b, SpvOpIEqual, em->t_bool, w, cu64(em, 0));
    selection_merge(em, l_merge);
    branch_cond(em, first, l_run, l_merge);
    label(em, l_run);
    reset_adstacks(em);
    emit_region(em, task->regions[0]);
    branch(em, l_merge);
    label(em, l_merge);
}

static void emit_entry(emitter *em, const ir_op *task, int t) {
    const ir_kernel *k = em->kernel;
    em->niface = 0;
    em->map.len = 0;
    if (em->map.cap)
        memset(em->map.keys, 0, em->map.cap * sizeof *em->map.keys);
    em->checks = em->opts->debug;
    uint32_t fn = spv_id(&em->b), u64 = u64t(em);
    function_begin(em, fn, spv_type_fn(&em->b, em->t_void, NULL, 0));
    label(em, spv_id(&em->b));
    uint32_t fptr = spv_type_ptr(&em->b, SpvStorageClassFunction, u64);
    for (uint32_t s = 0; s < k->nadstacks; s++)
        em->ad_depth[s] = spv_op1(&em->b, SpvOpVariable, fptr, SpvStorageClassFunction);
    uint32_t w = builtin_x(em, &em->v_gid, SpvBuiltInGlobalInvocationId);
    uint32_t groups = builtin_x(em, &em->v_nwg, SpvBuiltInNumWorkgroups);
    uint32_t nthreads = spv_op2(&em->b, SpvOpIMul, u64, groups, cu64(em, KERN_SPV_GROUP));
    for (uint32_t p = 0; p < k->nparams; p++) {
        const kern_type *pt = k->params[p].type;
        uint32_t m = em->block_member[p];
        if (ty_is_array(pt)) {
            for (int d = 0; d < pt->rank; d++)
                em->shape[p][d] = block_load(em, m + (uint32_t)d);
            continue;
        }
        uint32_t v = block_load(em, m);
        if (pt->kind == TY_BOOL)
            v = spv_op2(&em->b, SpvOpINotEqual, em->t_bool, v, cu32(em, 0));
        set_val(em, k->body->args[p], v);
    }
    uint32_t nm0 = em->nmembers - 1 - 2 * k->nadstacks; /* ad_slots */
    if (k->nadstacks) {
        em->ad_slots = block_load(em, nm0);
        for (uint32_t s = 0; s < k->nadstacks; s++) {
            uint32_t offb = block_load(em, nm0 + 1 + 2 * s);
            em->ad_cap[s] = block_load(em, nm0 + 2 + 2 * s);
            uint32_t el = spv_op2(&em->b, SpvOpUDiv, u64, offb,
                                  cu64(em, (uint64_t)ty_size(k->adstacks[s].type)));
            em->ad_base[s] = spv_op2(&em->b, SpvOpIAdd, u64, el, w);
        }
    }
    ir_foreach_op(op, k->body) { /* the uniform values before the task */
        if (op == task)
            break;
        if (op->code != IR_PARALLEL && op->code != IR_SERIAL)
            emit_simple(em, op);
    }
    em->used.len = 0;
    if (em->used.cap)
        memset(em->used.keys, 0, em->used.cap * sizeof *em->used.keys);
    mark_uses(em, task->regions[0]);
    if (task->code == IR_PARALLEL)
        emit_parallel(em, task, w, nthreads);
    else
        emit_serial(em, task, w);
    function_end(em);

    char name[1024];
    kern_code_symbol(name, sizeof name, k->name, 't', t, false);
    uint32_t pre[2] = {SpvExecutionModelGLCompute, fn};
    spv_inst_str(&em->b.entries, SpvOpEntryPoint, pre, 2, name, em->iface, (size_t)em->niface);
    spv_instv(&em->b.modes, SpvOpExecutionMode, 5, fn, SpvExecutionModeLocalSize, KERN_SPV_GROUP, 1,
              1);
}

uint32_t *kc_spirv_emit(const ir_module *m, const kc_options *o, size_t *nwords, char *err,
                        size_t errlen) {
    emitter em;
    memset(&em, 0, sizeof em);
    em.opts = o;
    em.err = err;
    em.errlen = errlen;
    spv_init(&em.b);
    em.t_void = spv_type_void(&em.b);
    em.t_bool = spv_type_bool(&em.b);
    em.t_u32 = spv_type_uint(&em.b, 32);
    em.t_u64 = spv_type_uint(&em.b, 64);
    em.t_f32 = spv_type_float(&em.b, 32);
    ir_foreach_kernel(k, m) {
        kernel_begin(&em, k);
        int t = 0;
        ir_foreach_op(op, k->body) {
            if (op->code == IR_PARALLEL || op->code == IR_SERIAL)
                emit_entry(&em, op, t++);
        }
        kernel_end(&em);
    }
    emit_helpers(&em);
    spv_math64_finish(&em.b, &em.m64);
    free(em.map.keys);
    free(em.map.vals);
    free(em.used.keys);
    free(em.used.vals);
    uint32_t *words = NULL;
    if (!em.failed)
        words = spv_finish(&em.b, nwords);
    spv_free(&em.b);
#ifdef KERN_DEBUG_BUILD
    if (words && !kc_spirv_validate(words, *nwords, err, errlen)) {
        free(words);
        return NULL;
    }
#endif
    return words;
}
