/* spv_emit.c - the structured IR to SPIR-V (docs/backend-spirv.md; the ABI is
 * docs/spirv-abi.md): the module, its kernels and their entry points. The semantics of
 * every op are those of the LLVM backends (backends/llvm/llvm_emit_ops.c), op by op; the
 * ops themselves are emitted by the other spv_emit_*.c files (spv_emit_priv.h lists them).
 *
 * Registers: bool is OpTypeBool; i32 and u32 are one unsigned 32-bit type (the op picks
 * signed or unsigned behaviour), i64 a 64-bit one, f32 and f64 floats. In memory bool is a
 * byte. Every integer type is declared with signedness 0, as OpUDiv and friends need.
 *
 * Per kernel a launch block (binding 0) holds the scalars, the extents and the adstack
 * offsets (common/spvblock.c lays it out). Every task is one GLCompute entry point: a
 * parallel task a grid-stride loop over its index space, a serial task run by work item 0.
 * The error record's helper functions and the f64 math functions are written after the
 * entry points. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/sizeexpr.h"
#include "../../common/spvblock.h"
#include "../../passes/passes.h"
#include "spv_emit_priv.h"

/* ---- value map -------------------------------------------------------------------------- */

static size_t hash_ptr(const void *p) {
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 17;
    x *= 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 29));
}

void spv_map_put(spv_valmap *m, const ir_value *v, uint32_t id) {
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

uint32_t spv_map_get(const spv_valmap *m, const ir_value *v) {
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

void spv_use_global(spv_emitter *em, uint32_t id) {
    for (int i = 0; i < em->niface; i++)
        if (em->iface[i] == id)
            return;
    if (em->niface == em->iface_cap) {
        em->iface_cap = em->iface_cap ? 2 * em->iface_cap : 16;
        em->iface = kern_xrealloc(em->iface, (size_t)em->iface_cap * sizeof *em->iface);
    }
    em->iface[em->niface++] = id;
}

static void mark_uses(spv_emitter *em, const ir_region *r) {
    ir_foreach_op(op, r) {
        for (uint32_t i = 0; i < op->noperands; i++)
            spv_map_put(&em->used, op->operands[i], 1);
        for (uint32_t i = 0; i < op->nregions; i++)
            mark_uses(em, op->regions[i]);
    }
}

bool spv_value_used(const spv_emitter *em, const ir_value *v) {
    const spv_valmap *m = &em->used;
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

/* ---- types ------------------------------------------------------------------------------ */

uint32_t spv_reg_type(spv_emitter *em, const kern_type *t) {
    switch (t->kind) {
    case TY_BOOL: return em->t_bool;
    case TY_I32:
    case TY_U32: return em->t_u32;
    case TY_I64:
    case TY_U64: return spv_type_uint(&em->b, 64);
    case TY_I8:
    case TY_U8: return spv_type_uint(&em->b, 8);
    case TY_I16:
    case TY_U16:
    case TY_F16: /* f16 and bf16 registers hold bits (passes/lower_narrow.c) */
    case TY_BF16: return spv_type_uint(&em->b, 16);
    case TY_F32: return em->t_f32;
    case TY_F64: return spv_type_float(&em->b, 64);
    default: kern_unreachable("SPIR-V backend: not a scalar type");
    }
}

uint32_t spv_sext64(spv_emitter *em, uint32_t v, int bits) {
    uint32_t u64 = u64t(em), shift = cu64(em, 64u - (unsigned)bits);
    uint32_t x = spv_op1(&em->b, SpvOpUConvert, u64, v);
    x = spv_op2(&em->b, SpvOpShiftLeftLogical, u64, x, shift);
    return spv_op2(&em->b, SpvOpShiftRightArithmetic, u64, x, shift);
}

/* v of integer or bool type t widened to u64 (sign-extended for signed types). */
uint32_t spv_to_u64(spv_emitter *em, uint32_t v, const kern_type *t) {
    switch (t->kind) {
    case TY_I64:
    case TY_U64: return v;
    case TY_I8:
    case TY_I16:
    case TY_I32: return spv_sext64(em, v, 8 * ty_size(t));
    case TY_BOOL: return spv_op3(&em->b, SpvOpSelect, u64t(em), v, cu64(em, 1), cu64(em, 0));
    default: return spv_op1(&em->b, SpvOpUConvert, u64t(em), v);
    }
}

/* ---- functions and built-ins ------------------------------------------------------------ */

void spv_function_begin(spv_emitter *em, uint32_t id, uint32_t fnty) {
    spv_instv(&em->b.funcs, SpvOpFunction, 4, em->t_void, id, SpvFunctionControlMaskNone, fnty);
}

void spv_function_end(spv_emitter *em) {
    spv_instv(&em->b.funcs, SpvOpReturn, 0);
    spv_instv(&em->b.funcs, SpvOpFunctionEnd, 0);
}

uint32_t spv_builtin_var(spv_emitter *em, SpvBuiltIn bi) {
    uint32_t t = spv_type_ptr(&em->b, SpvStorageClassInput, spv_type_vec(&em->b, em->t_u32, 3));
    uint32_t v = spv_global(&em->b, t, SpvStorageClassInput, 0, -1);
    uint32_t arg = (uint32_t)bi;
    spv_decorate(&em->b, v, SpvDecorationBuiltIn, &arg, 1);
    return v;
}

static uint32_t builtin_x(spv_emitter *em, uint32_t *var, SpvBuiltIn bi) {
    if (!*var)
        *var = spv_builtin_var(em, bi);
    spv_use_global(em, *var);
    uint32_t v3 = spv_op1(&em->b, SpvOpLoad, spv_type_vec(&em->b, em->t_u32, 3), *var);
    uint32_t idx = 0;
    uint32_t ops[2] = {v3, idx};
    uint32_t x = spv_op(&em->b, SpvOpCompositeExtract, em->t_u32, ops, 2);
    return spv_op1(&em->b, SpvOpUConvert, u64t(em), x);
}

/* ---- kernels and entry points ----------------------------------------------------------- */

/* The kernel's launch block (binding 0): members in the order of kern_spv_block_layout. */
static void kernel_begin(spv_emitter *em, const ir_kernel *k) {
    em->kernel = k;
    em->v_scr = 0;
    uint32_t np = k->nparams, na = k->nadstacks;
    const kern_type **pt = calloc(np + 1, sizeof *pt);
    size_t *off = calloc(np + 1 + 2 * na, sizeof *off);
    em->block_member = calloc(np + 1, sizeof *em->block_member);
    em->v_arr = calloc(np + 1, sizeof *em->v_arr);
    em->v_alias = calloc(np + 1, sizeof *em->v_alias);
    em->shape = calloc(np + 1, sizeof *em->shape);
    em->ad_pos = calloc(na + 1, sizeof *em->ad_pos);
    em->ad_base = calloc(na + 1, sizeof *em->ad_base);
    em->ad_cap = calloc(na + 1, sizeof *em->ad_cap);
    em->ad_span = calloc(na + 1, sizeof *em->ad_span);
    size_t nm = 1 + 2 * (size_t)na;
    for (uint32_t p = 0; p < np; p++)
        nm += ty_is_array(k->params[p].type) ? k->params[p].type->rank : 1;
    em->block_type = calloc(nm, sizeof *em->block_type);
    uint32_t *moff = calloc(nm, sizeof *moff);
    if (!pt || !off || !em->block_member || !em->v_arr || !em->v_alias || !em->shape ||
        !em->ad_pos || !em->ad_base || !em->ad_cap || !em->ad_span || !em->block_type || !moff)
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
            /* bool and i8..u16 as a 32-bit word (the runtime widens them) */
            em->block_type[m] =
                t->kind == TY_BOOL || ty_is_narrow(t) ? em->t_u32 : spv_reg_type(em, t);
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

static void kernel_end(spv_emitter *em) {
    free(em->block_member);
    free(em->block_type);
    free(em->v_arr);
    free(em->v_alias);
    free(em->shape);
    free(em->ad_pos);
    free(em->ad_base);
    free(em->ad_cap);
    free(em->ad_span);
    em->block_member = em->block_type = em->v_arr = em->v_alias = NULL;
    em->ad_pos = em->ad_base = em->ad_cap = em->ad_span = NULL;
    em->shape = NULL;
    em->kernel = NULL;
}

uint32_t spv_block_load(spv_emitter *em, uint32_t member) {
    spv_use_global(em, em->v_block);
    uint32_t t = em->block_type[member];
    uint32_t ptr =
        spv_op2(&em->b, SpvOpAccessChain, spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, t),
                em->v_block, cu32(em, member));
    return spv_op1(&em->b, SpvOpLoad, t, ptr);
}

/* The number of work items along dimension d of a parallel task: max(0, hi - lo) (u64). */
static uint32_t task_extent(spv_emitter *em, const ir_op *task, uint32_t d) {
    const kern_type *it = task->operands[2 * d]->type;
    uint32_t u64 = u64t(em);
    uint32_t lo = spv_to_u64(em, val(em, task->operands[2 * d]), it);
    uint32_t hi = spv_to_u64(em, val(em, task->operands[2 * d + 1]), it);
    uint32_t n = spv_op2(&em->b, SpvOpISub, u64, hi, lo);
    uint32_t pos = spv_op2(&em->b, SpvOpSGreaterThan, em->t_bool, n, cu64(em, 0));
    return spv_op3(&em->b, SpvOpSelect, u64, pos, n, cu64(em, 0));
}

static void reset_adstacks(spv_emitter *em) {
    for (uint32_t s = 0; s < em->kernel->nadstacks; s++)
        spv_instv(&em->b.funcs, SpvOpStore, 2, em->ad_pos[s], em->ad_base[s]);
}

/* ---- work items sorted by trip count (passes/trip_sort.c) ------------------------------ */

enum { SORT_BUCKET_BITS = 5 };

/* This invocation's item's trip count of s->loop (u32, 0 to INT32_MAX): s->ops, its loads
 * read only in bounds, then hi - lo. */
static uint32_t emit_key(spv_emitter *em, const ir_trip_sort *s) {
    for (uint32_t i = 0; i < s->nops; i++) {
        if (s->ops[i]->code == IR_LOAD)
            set_val(em, s->ops[i]->results[0], spv_emit_load_in_bounds(em, s->ops[i]));
        else
            spv_emit_simple(em, s->ops[i]);
    }
    const ir_value *lo = s->loop->operands[0], *hi = s->loop->operands[1];
    uint32_t u64 = u64t(em);
    uint32_t n = spv_op2(&em->b, SpvOpISub, u64, spv_to_u64(em, val(em, hi), hi->type),
                         spv_to_u64(em, val(em, lo), lo->type));
    uint32_t zero = cu64(em, 0), big = cu64(em, INT32_MAX);
    n = spv_op3(&em->b, SpvOpSelect, u64, spv_op2(&em->b, SpvOpSGreaterThan, em->t_bool, n, zero),
                n, zero);
    n = spv_op3(&em->b, SpvOpSelect, u64, spv_op2(&em->b, SpvOpSLessThan, em->t_bool, n, big), n,
                big);
    return spv_op1(&em->b, SpvOpUConvert, em->t_u32, n);
}

/* A workgroup array of n u32, and a pointer to its element i (u64). */
static uint32_t group_array(spv_emitter *em, uint32_t n) {
    uint32_t arr = spv_type_array_of(&em->b, em->t_u32, n);
    uint32_t v = spv_global(&em->b, spv_type_ptr(&em->b, SpvStorageClassWorkgroup, arr),
                            SpvStorageClassWorkgroup, 0, -1);
    spv_use_global(em, v);
    return v;
}

static uint32_t group_at(spv_emitter *em, uint32_t arr, uint32_t i) {
    return spv_op2(&em->b, SpvOpAccessChain,
                   spv_type_ptr(&em->b, SpvStorageClassWorkgroup, em->t_u32), arr, i);
}

uint32_t spv_begin_if(spv_emitter *em, uint32_t c) {
    uint32_t l_then = spv_id(&em->b), l_j = spv_id(&em->b);
    selection_merge(em, l_j);
    branch_cond(em, c, l_then, l_j);
    label(em, l_then);
    return l_j;
}

void spv_end_if(spv_emitter *em, uint32_t l_j) {
    branch(em, l_j);
    label(em, l_j);
}

static uint32_t group_atomic(spv_emitter *em, SpvOp op, uint32_t ptr, uint32_t v) {
    uint32_t ops[4] = {ptr, cu32(em, SpvScopeWorkgroup), relaxed(em), v};
    return spv_op(&em->b, op, em->t_u32, ops, 4);
}

/* Items a sorted task's invocation runs per round: SORT_PER in a kernel without adstacks
 * (the workgroup sorts 256 items). A subgroup of 32 runs as long as its longest item, so
 * the more items sorted together, the closer the counts of a subgroup's items (counts
 * uniform in 0..T: the subgroups run 0.62 T sorted by 128, 0.56 T by 256, the CUDA path's
 * block). One in a kernel with adstacks (K.grad): with two, NVIDIA's driver gave ragged's
 * and divergent's K.grad 38 registers instead of 32 and ragged's ran 5.63 -> 6.03 ms
 * (bench/README.md, 2026-11-29). */
enum { SORT_PER = 2, SORT_ITEMS = SORT_PER * KERN_SPV_GROUP };
static int sort_per(const spv_emitter *em) { return em->kernel->nadstacks ? 1 : SORT_PER; }

/* The workgroup's items base .. base + nb - 1 (nb <= sort_per KERN_SPV_GROUP) sorted by
 * trip count in workgroup memory (a counting sort on the top SORT_BUCKET_BITS bits of the
 * largest count's width, with workgroup atomics): returns the workgroup array whose
 * element p (u32) is the offset from base of the item at place p, valid for p < nb.
 * Invocation lid computes the counts of items lid + h KERN_SPV_GROUP, h < sort_per. Every
 * invocation of the workgroup runs it (its barriers). */
static uint32_t sort_group(spv_emitter *em, const ir_op *task, const ir_trip_sort *s, uint32_t base,
                           uint32_t nb, uint32_t lid) {
    int per = sort_per(em);
    uint32_t u64 = u64t(em), u32 = em->t_u32, nbk = 1u << SORT_BUCKET_BITS;
    uint32_t order = group_array(em, SORT_ITEMS), hist = group_array(em, nbk),
             kmax = group_array(em, 1);
    const kern_type *it = task->operands[0]->type;
    uint32_t j[SORT_PER], valid[SORT_PER], key[SORT_PER], bucket[SORT_PER], r[SORT_PER];
    for (int h = 0; h < per; h++) {
        j[h] = spv_op2(&em->b, SpvOpIAdd, u64, lid, cu64(em, (uint64_t)h * KERN_SPV_GROUP));
        valid[h] = spv_op2(&em->b, SpvOpULessThan, em->t_bool, j[h], nb);
        uint32_t i = spv_op2(&em->b, SpvOpIAdd, u64, spv_to_u64(em, val(em, task->operands[0]), it),
                             spv_op2(&em->b, SpvOpIAdd, u64, base, j[h]));
        set_val(em, task->regions[0]->args[0],
                is_i64(it) ? i : spv_op1(&em->b, SpvOpUConvert, em->t_u32, i));
        key[h] = spv_op3(&em->b, SpvOpSelect, u32, valid[h], emit_key(em, s), cu32(em, 0));
    }
    uint32_t l_j =
        spv_begin_if(em, spv_op2(&em->b, SpvOpULessThan, em->t_bool, lid, cu64(em, nbk)));
    spv_instv(&em->b.funcs, SpvOpStore, 2, group_at(em, hist, lid), cu32(em, 0));
    spv_instv(&em->b.funcs, SpvOpStore, 2, group_at(em, kmax, cu64(em, 0)), cu32(em, 0));
    spv_end_if(em, l_j);
    spv_workgroup_barrier(em);
    uint32_t kx = key[0];
    for (int h = 1; h < per; h++)
        kx = spv_ext(&em->b, u32, GLSLstd450UMax, (uint32_t[]){kx, key[h]}, 2);
    group_atomic(em, SpvOpAtomicUMax, group_at(em, kmax, cu64(em, 0)), kx);
    spv_workgroup_barrier(em);
    uint32_t m = spv_op1(&em->b, SpvOpLoad, u32, group_at(em, kmax, cu64(em, 0)));
    /* the width of m: FindUMsb + 1 (FindUMsb(0) is -1) */
    uint32_t bits = spv_op2(&em->b, SpvOpIAdd, u32, spv_ext(&em->b, u32, GLSLstd450FindUMsb, &m, 1),
                            cu32(em, 1 - SORT_BUCKET_BITS));
    uint32_t shift = spv_op3(&em->b, SpvOpSelect, u32,
                             spv_op2(&em->b, SpvOpSGreaterThan, em->t_bool, bits, cu32(em, 0)),
                             bits, cu32(em, 0));
    /* each item's place in its bucket (an invalid item adds 0) */
    for (int h = 0; h < per; h++) {
        bucket[h] = spv_op1(&em->b, SpvOpUConvert, u64,
                            spv_op2(&em->b, SpvOpShiftRightLogical, u32, key[h], shift));
        r[h] = group_atomic(em, SpvOpAtomicIAdd, group_at(em, hist, bucket[h]),
                            spv_op3(&em->b, SpvOpSelect, u32, valid[h], cu32(em, 1), cu32(em, 0)));
    }
    spv_workgroup_barrier(em);
    l_j = spv_begin_if(em, spv_op2(&em->b, SpvOpIEqual, em->t_bool, lid, cu64(em, 0)));
    uint32_t sum = cu32(em, 0);
    for (uint32_t k = 0; k < nbk; k++) {
        uint32_t q = group_at(em, hist, cu64(em, k));
        uint32_t c = spv_op1(&em->b, SpvOpLoad, u32, q);
        spv_instv(&em->b.funcs, SpvOpStore, 2, q, sum);
        sum = spv_op2(&em->b, SpvOpIAdd, u32, sum, c);
    }
    spv_end_if(em, l_j);
    spv_workgroup_barrier(em);
    for (int h = 0; h < per; h++) {
        l_j = spv_begin_if(em, valid[h]);
        uint32_t at = spv_op2(&em->b, SpvOpIAdd, u32,
                              spv_op1(&em->b, SpvOpLoad, u32, group_at(em, hist, bucket[h])), r[h]);
        spv_instv(&em->b.funcs, SpvOpStore, 2,
                  group_at(em, order, spv_op1(&em->b, SpvOpUConvert, u64, at)),
                  spv_op1(&em->b, SpvOpUConvert, u32, j[h]));
        spv_end_if(em, l_j);
    }
    spv_workgroup_barrier(em);
    return order;
}

/* The task body for the item at place `place` of the sorted order, where place < nb. */
static void run_place(spv_emitter *em, const ir_op *task, uint32_t order, uint32_t base,
                      uint32_t nb, uint32_t place) {
    const ir_region *body = task->regions[0];
    const kern_type *it = task->operands[0]->type;
    uint32_t u64 = u64t(em);
    uint32_t l_j = spv_begin_if(em, spv_op2(&em->b, SpvOpULessThan, em->t_bool, place, nb));
    uint32_t n = spv_op1(&em->b, SpvOpUConvert, u64,
                         spv_op1(&em->b, SpvOpLoad, em->t_u32, group_at(em, order, place)));
    uint32_t i = spv_op2(&em->b, SpvOpIAdd, u64, spv_to_u64(em, val(em, task->operands[0]), it),
                         spv_op2(&em->b, SpvOpIAdd, u64, base, n));
    set_val(em, body->args[0], is_i64(it) ? i : spv_op1(&em->b, SpvOpUConvert, em->t_u32, i));
    reset_adstacks(em);
    spv_emit_region(em, body);
    spv_end_if(em, l_j);
}

/* A one-dimensional task whose items run sorted by trip count: the workgroup takes items
 * base .. base + sort_per KERN_SPV_GROUP - 1 together, sorts them (sort_group) and
 * invocation lid runs the item at place lid, with two per invocation also the one at place
 * 255 - lid (subgroup k then runs the k-th shortest 32 items and the k-th longest: the
 * subgroups' work evens out); the loop's base is the same in the whole workgroup (its
 * barriers are in uniform control flow). */
static void emit_sorted_parallel(spv_emitter *em, const ir_op *task, const ir_trip_sort *s,
                                 uint32_t w, uint32_t nthreads) {
    _Static_assert(SORT_PER == 2, "places lid and items - 1 - lid");
    uint32_t u64 = u64t(em), count = task_extent(em, task, 0), lid = spv_local_x(em);
    uint64_t items = (uint64_t)sort_per(em) * KERN_SPV_GROUP;
    uint32_t per = cu64(em, (uint64_t)sort_per(em));
    spv_strided st;
    uint32_t base = spv_strided_begin(
        em, spv_op2(&em->b, SpvOpIMul, u64, spv_op2(&em->b, SpvOpISub, u64, w, lid), per), count,
        &st);
    uint32_t rest = spv_op2(&em->b, SpvOpISub, u64, count, base), gs = cu64(em, items);
    uint32_t nb = spv_op3(&em->b, SpvOpSelect, u64,
                          spv_op2(&em->b, SpvOpULessThan, em->t_bool, rest, gs), rest, gs);
    uint32_t order = sort_group(em, task, s, base, nb, lid);
    if (sort_per(em) == 1) {
        run_place(em, task, order, base, nb, lid);
    } else { /* a loop over the two places (the body emitted twice: 40 registers, not 38) */
        spv_strided half;
        uint32_t h = spv_strided_begin(em, cu64(em, 0), per, &half);
        uint32_t place = spv_op3(&em->b, SpvOpSelect, u64,
                                 spv_op2(&em->b, SpvOpIEqual, em->t_bool, h, cu64(em, 0)), lid,
                                 spv_op2(&em->b, SpvOpISub, u64, cu64(em, items - 1), lid));
        run_place(em, task, order, base, nb, place);
        spv_strided_end(em, &half, h, cu64(em, 1));
    }
    spv_workgroup_barrier(em); /* the workgroup arrays are the next round's */
    spv_strided_end(em, &st, base, spv_op2(&em->b, SpvOpIMul, u64, nthreads, per));
}

static void emit_parallel(spv_emitter *em, const ir_op *task, uint32_t w, uint32_t nthreads) {
    const ir_region *body = task->regions[0];
    uint32_t nd = body->nargs, u64 = u64t(em);
    if (nd == 1)
        ir_divergence_task(&em->div, em->kernel, task);
    em->have_div = nd == 1;
    spv_replicas_begin(em, task, w);
    em->have_div = false;
    ir_trip_sort sort;
    if (nd == 1 && !em->opts->no_trip_sort && ir_trip_sort_plan(&em->div, body, &sort)) {
        em->have_div = true;
        emit_sorted_parallel(em, task, &sort, w, nthreads);
        em->have_div = false;
        spv_replicas_end(em);
        return;
    }
    uint32_t ext[8];
    kern_assert(nd <= 8);
    uint32_t count = 0;
    for (uint32_t d = 0; d < nd; d++) {
        ext[d] = task_extent(em, task, d);
        count = d == 0 ? ext[d] : spv_op2(&em->b, SpvOpIMul, u64, count, ext[d]);
    }
    spv_strided st;
    uint32_t n = spv_strided_begin(em, w, count, &st);
    uint32_t rem = n;
    for (uint32_t d = nd; d-- > 0;) { /* the last dimension fastest */
        const kern_type *it = task->operands[2 * d]->type;
        uint32_t lo = spv_to_u64(em, val(em, task->operands[2 * d]), it);
        uint32_t off = d == 0 ? rem : spv_op2(&em->b, SpvOpUMod, u64, rem, ext[d]);
        if (d > 0)
            rem = spv_op2(&em->b, SpvOpUDiv, u64, rem, ext[d]);
        uint32_t i = spv_op2(&em->b, SpvOpIAdd, u64, lo, off);
        set_val(em, body->args[d], is_i64(it) ? i : spv_op1(&em->b, SpvOpUConvert, em->t_u32, i));
    }
    reset_adstacks(em);
    em->have_div = nd == 1; /* the divergence computed above */
    spv_emit_region(em, body);
    em->have_div = false;
    spv_strided_end(em, &st, n, nthreads);
    spv_replicas_end(em);
}

static void emit_serial(spv_emitter *em, const ir_op *task, uint32_t w) {
    uint32_t l_run = spv_id(&em->b), l_merge = spv_id(&em->b);
    uint32_t first = spv_op2(&em->b, SpvOpIEqual, em->t_bool, w, cu64(em, 0));
    selection_merge(em, l_merge);
    branch_cond(em, first, l_run, l_merge);
    label(em, l_run);
    reset_adstacks(em);
    spv_emit_region(em, task->regions[0]);
    branch(em, l_merge);
    label(em, l_merge);
}

/* An entry point of the current kernel: spv_entry_begin starts its function (an empty
 * value map and interface) in its first block and returns the function's id;
 * spv_entry_end closes it and declares it as kern_<K>__<kind><index>, LocalSize 128. */
uint32_t spv_entry_begin(spv_emitter *em) {
    em->niface = 0;
    em->map.len = 0;
    if (em->map.cap)
        memset(em->map.keys, 0, em->map.cap * sizeof *em->map.keys);
    uint32_t fn = spv_id(&em->b);
    spv_function_begin(em, fn, spv_type_fn(&em->b, em->t_void, NULL, 0));
    label(em, spv_id(&em->b));
    return fn;
}

void spv_entry_end(spv_emitter *em, uint32_t fn, char kind, int index) {
    spv_function_end(em);
    char name[1024];
    kern_code_symbol(name, sizeof name, em->kernel->name, kind, index, false);
    uint32_t pre[2] = {SpvExecutionModelGLCompute, fn};
    spv_inst_str(&em->b.entries, SpvOpEntryPoint, pre, 2, name, em->iface, (size_t)em->niface);
    spv_instv(&em->b.modes, SpvOpExecutionMode, 5, fn, SpvExecutionModeLocalSize, KERN_SPV_GROUP, 1,
              1);
}

/* The start of an entry point of the current kernel: its invocation index *w and the
 * invocations of the grid *nthreads (u64), the extents of its arrays (em->shape) and the
 * values of its scalar parameters (in the value map), all from the launch block. */
void spv_entry_params(spv_emitter *em, uint32_t *w, uint32_t *nthreads) {
    const ir_kernel *k = em->kernel;
    *w = builtin_x(em, &em->v_gid, SpvBuiltInGlobalInvocationId);
    uint32_t groups = builtin_x(em, &em->v_nwg, SpvBuiltInNumWorkgroups);
    *nthreads = spv_op2(&em->b, SpvOpIMul, u64t(em), groups, cu64(em, KERN_SPV_GROUP));
    for (uint32_t p = 0; p < k->nparams; p++) {
        const kern_type *pt = k->params[p].type;
        uint32_t m = em->block_member[p];
        if (ty_is_array(pt)) {
            for (int d = 0; d < pt->rank; d++)
                em->shape[p][d] = spv_block_load(em, m + (uint32_t)d);
            continue;
        }
        uint32_t v = spv_block_load(em, m);
        if (pt->kind == TY_BOOL)
            v = spv_op2(&em->b, SpvOpINotEqual, em->t_bool, v, cu32(em, 0));
        else if (ty_is_narrow(pt))
            v = spv_op1(&em->b, SpvOpUConvert, spv_reg_type(em, pt), v);
        set_val(em, k->body->args[p], v);
    }
}

static void emit_entry(spv_emitter *em, const ir_op *task, int t) {
    const ir_kernel *k = em->kernel;
    em->checks = kc_checks(em->opts);
    uint32_t fn = spv_entry_begin(em), u64 = u64t(em);
    uint32_t fptr = spv_type_ptr(&em->b, SpvStorageClassFunction, u64);
    for (uint32_t s = 0; s < k->nadstacks; s++)
        em->ad_pos[s] = spv_op1(&em->b, SpvOpVariable, fptr, SpvStorageClassFunction);
    uint32_t w, nthreads;
    spv_entry_params(em, &w, &nthreads);
    uint32_t nm0 = em->nmembers - 1 - 2 * k->nadstacks; /* ad_slots */
    if (k->nadstacks) {
        em->ad_slots = spv_block_load(em, nm0);
        for (uint32_t s = 0; s < k->nadstacks; s++) {
            uint32_t offb = spv_block_load(em, nm0 + 1 + 2 * s);
            em->ad_cap[s] = spv_block_load(em, nm0 + 2 + 2 * s);
            uint32_t el = spv_op2(&em->b, SpvOpUDiv, u64, offb,
                                  cu64(em, (uint64_t)ty_size(k->adstacks[s].type)));
            em->ad_base[s] = spv_op2(&em->b, SpvOpIAdd, u64, el, w);
            em->ad_span[s] = spv_op2(&em->b, SpvOpIMul, u64, em->ad_cap[s], em->ad_slots);
        }
    }
    ir_foreach_op(op, k->body) { /* the uniform values before the task */
        if (op == task)
            break;
        if (op->code != IR_PARALLEL && op->code != IR_SERIAL)
            spv_emit_simple(em, op);
    }
    em->used.len = 0;
    if (em->used.cap)
        memset(em->used.keys, 0, em->used.cap * sizeof *em->used.keys);
    mark_uses(em, task->regions[0]);
    if (task->code == IR_PARALLEL)
        emit_parallel(em, task, w, nthreads);
    else
        emit_serial(em, task, w);
    spv_entry_end(em, fn, 't', t);
    spv_emit_replica_sum(em, t);
}

/* IEEE semantics for the floats every entry point computes with: infinities, NaNs and
 * signed zeros are kept (a driver may otherwise assume there are none: NVIDIA's compiled
 * pow(NaN, y) to inf and x != x to false) and subnormals are not flushed (NVIDIA flushes
 * f32 ones by default). A device without the float controls loads the module without
 * these modes (runtime/vk_code.c); fast math leaves them out. */
static void float_controls(spv_builder *b) {
    bool f64 = (b->capset >> SpvCapabilityFloat64) & 1;
    size_t n = b->modes.n;
    for (size_t i = 0; i < n; i += b->modes.w[i] >> 16) {
        uint32_t *w = &b->modes.w[i];
        if ((w[0] & 0xffffu) != SpvOpExecutionMode || w[2] != SpvExecutionModeLocalSize)
            continue;
        uint32_t fn = w[1];
        for (int bits = 32; bits <= (f64 ? 64 : 32); bits += 32) {
            spv_instv(&b->modes, SpvOpExecutionMode, 3, fn,
                      SpvExecutionModeSignedZeroInfNanPreserve, bits);
            spv_instv(&b->modes, SpvOpExecutionMode, 3, fn, SpvExecutionModeDenormPreserve, bits);
        }
    }
    spv_capability(b, SpvCapabilitySignedZeroInfNanPreserve);
    spv_capability(b, SpvCapabilityDenormPreserve);
}

/* SPIR-V's universal limit on the members of a structure (the launch block is one). */
enum { SPV_MAX_MEMBERS = 16383 };

static uint32_t *emit_module(const ir_module *m, const kc_options *o, size_t *nwords, char *err,
                             size_t errlen) {
    ir_foreach_kernel(k, m) {
        size_t nm = 1 + 2 * (size_t)k->nadstacks; /* kernel_begin's launch block */
        for (uint32_t p = 0; p < k->nparams; p++)
            nm += ty_is_array(k->params[p].type) ? (size_t)k->params[p].type->rank : 1;
        if (nm > SPV_MAX_MEMBERS) {
            snprintf(err, errlen,
                     "kernel '%s' needs a launch block of %zu members (one per scalar "
                     "parameter, array dimension and two per adstack), more than the %d a "
                     "SPIR-V structure holds",
                     k->name, nm, SPV_MAX_MEMBERS);
            return NULL;
        }
    }
    spv_emitter em;
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
        for (uint32_t s = 0; s < k->nadstacks; s++)
            if (sz_reads_memory(k->adstacks[s].cap))
                spv_emit_sizer(&em, s, k->adstacks[s].cap);
        kernel_end(&em);
    }
    spv_emit_helpers(&em);
    ir_divergence_free(&em.div);
    if (!o->fast_math)
        float_controls(&em.b);
    free(em.map.keys);
    free(em.map.vals);
    free(em.used.keys);
    free(em.used.vals);
    free(em.iface);
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

uint32_t *kc_spirv_emit(const ir_module *m, const kc_options *o, size_t *nwords, char *err,
                        size_t errlen) {
    kern_assert(m->lowered); /* kc_compile_source, or ir_lower_semantics for IR made by hand */
    /* kern's own math: GLSL.std.450 has no f64 functions, and its f32 ones are the driver's
     * approximations, which only fast math takes (docs/backend-spirv.md) */
    ir_module *own =
        ir_libm_copy(m, IR_LIBM_NO_FMA | IR_LIBM_F64 | (o->fast_math ? 0 : IR_LIBM_F32));
    uint32_t *words = emit_module(own ? own : m, o, nwords, err, errlen);
    ir_module_free(own);
    return words;
}
