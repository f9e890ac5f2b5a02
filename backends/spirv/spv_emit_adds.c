/* spv_emit_adds.c - f32 atomic adds whose old value nobody reads (adjoints such as w.grad),
 * and the other subgroup operation, lanemax.
 *
 * When every active lane of a subgroup adds into the same element, the subgroup sums first
 * and one lane adds the sum (as the CUDA path combines per warp). When such an add's
 * element is one for the whole subgroup by the divergence analysis (w.grad[t] at a loop's
 * t, which every subgroup of the grid adds into at about the same time), the task gets
 * replicas of the array: while it has at most KERN_SPV_REPLICA_ELEMS elements (uniform),
 * each subgroup adds into one of KERN_SPV_REPLICAS copies in the kernel's scratch buffer
 * (common/spvblock.h), so that an eighth of the adds meet at one address. After the task
 * the runtime runs its sum entry point kern_<K>__r<t>, which adds the copies to the array
 * and zeroes them: the buffer is zero between tasks. On the H200 this took loop.grad from
 * 7.45 to 6.36 ms (bench/README.md). The sum is an entry point of its own because in the
 * task, after a workgroup barrier, it made NVIDIA's driver give K.grad 38 to 40 registers
 * instead of 32, and the whole gain went; workgroup copies as the CUDA path has got 56. */
#include <stdlib.h>

#include "spv_emit_priv.h"

static void fadd_atomic(spv_emitter *em, int p, uint32_t lin, uint32_t v) {
    spv_capability(&em->b, SpvCapabilityAtomicFloat32AddEXT);
    spv_extension(&em->b, "SPV_EXT_shader_atomic_float_add");
    uint32_t ops[4] = {spv_element_ptr(em, p, false, lin), atomic_scope(em), relaxed(em), v};
    spv_op(&em->b, SpvOpAtomicFAddEXT, em->t_f32, ops, 4);
}

/* The replica index of array parameter p, or -1. */
int spv_replica_of(const spv_emitter *em, int p) {
    for (int i = 0; i < em->nrep; i++)
        if (em->rep_param[i] == p)
            return i;
    return -1;
}

/* The kernel's scratch buffer of f32 words (Coherent; the barrier before the sum entry
 * point is what makes the task's adds visible to it). */
static uint32_t scratch_var(spv_emitter *em) {
    if (!em->v_scr) {
        uint32_t rt = spv_type_rtarray(&em->b, em->t_f32, 4), off = 0;
        uint32_t st = spv_type_struct(&em->b, &rt, &off, 1, true);
        em->v_scr = spv_global(&em->b, spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, st),
                               SpvStorageClassStorageBuffer, 0,
                               kern_spv_scratch_binding((int)em->kernel->nparams));
        spv_decorate(&em->b, em->v_scr, SpvDecorationCoherent, NULL, 0);
        spv_name(&em->b, em->v_scr, -1, "scratch_f32");
    }
    spv_use_global(em, em->v_scr);
    return em->v_scr;
}

/* A pointer to word `word` (u64) of the scratch buffer. */
static uint32_t scratch_ptr(spv_emitter *em, uint32_t word) {
    return spv_op3(&em->b, SpvOpAccessChain,
                   spv_type_ptr(&em->b, SpvStorageClassStorageBuffer, em->t_f32), scratch_var(em),
                   cu32(em, 0), word);
}

/* An f32 atomic add of v at element lin: into replica ri while the array fits it (a
 * uniform branch around the atomic alone), or (ri < 0, or the array does not fit) into
 * array parameter p. */
static void add_to(spv_emitter *em, int ri, int p, uint32_t lin, uint32_t v) {
    if (ri < 0) {
        fadd_atomic(em, p, lin, v);
        return;
    }
    uint32_t l_rep = spv_id(&em->b), l_arr = spv_id(&em->b), l_j = spv_id(&em->b);
    selection_merge(em, l_j);
    branch_cond(em, em->rep_on[ri], l_rep, l_arr);
    label(em, l_rep);
    uint32_t at = spv_op2(&em->b, SpvOpIAdd, u64t(em), em->rep_at[ri], lin);
    uint32_t ops[4] = {scratch_ptr(em, at), atomic_scope(em), relaxed(em), v};
    spv_op(&em->b, SpvOpAtomicFAddEXT, em->t_f32, ops, 4);
    branch(em, l_j);
    label(em, l_arr);
    fadd_atomic(em, p, lin, v);
    branch(em, l_j);
    label(em, l_j);
}

bool spv_uniform_access(const spv_emitter *em, const ir_op *op) {
    return em->have_div && !ir_div_access_varying(&em->div, op);
}

/* An f32 atomic add whose old value nobody uses (adjoints like w.grad), into replica ri
 * or (ri < 0) the array: when every active lane of the subgroup adds into the same element,
 * the subgroup sums first and one lane adds the sum (as the CUDA path combines per warp);
 * otherwise each lane adds. uniform: the divergence analysis has proven the element one
 * for the subgroup, so no vote is taken. */
void spv_emit_combined_fadd(spv_emitter *em, int ri, int p, uint32_t lin, uint32_t v,
                            bool uniform) {
    spv_capability(&em->b, SpvCapabilityGroupNonUniform);
    spv_capability(&em->b, SpvCapabilityGroupNonUniformArithmetic);
    uint32_t sg = cu32(em, SpvScopeSubgroup);
    uint32_t l_same = spv_id(&em->b), l_each = spv_id(&em->b), l_one = spv_id(&em->b),
             l_j1 = spv_id(&em->b), l_j = spv_id(&em->b);
    if (!uniform) {
        spv_capability(&em->b, SpvCapabilityGroupNonUniformVote);
        uint32_t same = spv_op2(&em->b, SpvOpGroupNonUniformAllEqual, em->t_bool, sg, lin);
        selection_merge(em, l_j);
        branch_cond(em, same, l_same, l_each);
        label(em, l_same);
    }
    uint32_t rops[3] = {sg, SpvGroupOperationReduce, v};
    uint32_t sum = spv_op(&em->b, SpvOpGroupNonUniformFAdd, em->t_f32, rops, 3);
    uint32_t first = spv_op1(&em->b, SpvOpGroupNonUniformElect, em->t_bool, sg);
    selection_merge(em, l_j1);
    branch_cond(em, first, l_one, l_j1);
    label(em, l_one);
    add_to(em, ri, p, lin, sum);
    branch(em, l_j1);
    label(em, l_j1);
    if (uniform)
        return;
    branch(em, l_j);
    label(em, l_each);
    add_to(em, ri, p, lin, v);
    branch(em, l_j);
    label(em, l_j);
}

/* Which arrays of the task get replicas: f32 parameters that the task accesses only by
 * atomic adds and subs whose old value it never uses (adjoints such as w.grad), 2 where
 * one of them adds at an element uniform in the subgroup (1: none does). */
static void scan_replica_use(spv_emitter *em, const ir_region *r, int *use) {
    ir_foreach_op(op, r) {
        if (op->noperands && ty_is_array(op->operands[0]->type) && !op->operands[0]->def &&
            op->operands[0]->region == em->kernel->body) {
            int p = (int)op->operands[0]->index;
            bool add = (op->code == IR_ATOMIC_ADD || op->code == IR_ATOMIC_SUB) &&
                       op->operands[0]->type->elem->kind == TY_F32 &&
                       !spv_value_used(em, op->results[0]);
            if (op->code == IR_DIM)
                ; /* its extents only */
            else if (add && use[p] >= 0)
                use[p] = use[p] == 2 || spv_uniform_access(em, op) ? 2 : 1;
            else
                use[p] = -1;
        }
        for (uint32_t i = 0; i < op->nregions; i++)
            scan_replica_use(em, op->regions[i], use);
    }
}

uint32_t spv_local_x(spv_emitter *em) {
    if (!em->v_lid)
        em->v_lid = spv_builtin_var(em, SpvBuiltInLocalInvocationId);
    spv_use_global(em, em->v_lid);
    uint32_t v3 = spv_op1(&em->b, SpvOpLoad, spv_type_vec(&em->b, em->t_u32, 3), em->v_lid);
    uint32_t ops[2] = {v3, 0};
    return spv_op1(&em->b, SpvOpUConvert, u64t(em),
                   spv_op(&em->b, SpvOpCompositeExtract, em->t_u32, ops, 2));
}

void spv_workgroup_barrier(spv_emitter *em) {
    spv_instv(
        &em->b.funcs, SpvOpControlBarrier, 3, cu32(em, SpvScopeWorkgroup),
        cu32(em, SpvScopeWorkgroup),
        cu32(em, SpvMemorySemanticsAcquireReleaseMask | SpvMemorySemanticsWorkgroupMemoryMask));
}

/* The elements of array parameter p (u64): the product of its extents. */
static uint32_t elements(spv_emitter *em, int p) {
    uint32_t n = cu64(em, 1);
    for (int d = 0; d < em->kernel->params[p].type->rank; d++)
        n = spv_op2(&em->b, SpvOpIMul, u64t(em), n, em->shape[p][d]);
    return n;
}

/* Before the grid-stride loop, with the task's divergence: the arrays that get replicas,
 * and this invocation's copy of each (its subgroup's: consecutive subgroups take
 * consecutive copies). */
void spv_replicas_begin(spv_emitter *em, const ir_op *task, uint32_t w) {
    const ir_kernel *k = em->kernel;
    em->nrep = 0;
    if (kern_spv_scratch_binding((int)k->nparams) < 0)
        return;
    int *use = calloc(k->nparams + 1, sizeof *use);
    if (!use)
        kern_oom(k->nparams * sizeof *use);
    scan_replica_use(em, task->regions[0], use);
    uint32_t u64 = u64t(em);
    uint32_t r = spv_op2(&em->b, SpvOpBitwiseAnd, u64,
                         spv_op2(&em->b, SpvOpShiftRightLogical, u64, w, cu64(em, 5)),
                         cu64(em, KERN_SPV_REPLICAS - 1));
    for (uint32_t p = 0; p < k->nparams && em->nrep < KERN_SPV_REPLICA_ARRAYS; p++) {
        if (use[p] != 2)
            continue;
        int i = em->nrep++;
        em->rep_param[i] = (int)p;
        uint32_t n = elements(em, (int)p);
        em->rep_n[i] = n;
        em->rep_on[i] =
            spv_op2(&em->b, SpvOpULessThanEqual, em->t_bool, n, cu64(em, KERN_SPV_REPLICA_ELEMS));
        /* kern_spv_replica_word(i, r), r this subgroup's copy */
        uint32_t copy =
            spv_op2(&em->b, SpvOpIAdd, u64, r, cu64(em, (uint64_t)i * KERN_SPV_REPLICAS));
        em->rep_at[i] =
            spv_op2(&em->b, SpvOpIAdd, u64, cu64(em, KERN_SPV_SCRATCH_COPIES),
                    spv_op2(&em->b, SpvOpIMul, u64, copy, cu64(em, KERN_SPV_REPLICA_ELEMS)));
    }
    free(use);
}

/* After the grid-stride loop: the task's replicated arrays, for its sum entry point. */
void spv_replicas_end(spv_emitter *em) {
    em->nsum = em->nrep;
    for (int i = 0; i < em->nrep; i++)
        em->sum_param[i] = em->rep_param[i];
    em->nrep = 0;
}

/* The sum entry point kern_<K>__r<t> of task t that has replicas (spv_replicas_end): element
 * e of replicated array i, summed over its copies, is added to the array by invocation e of
 * a grid-stride loop, and the copies are zeroed. */
void spv_emit_replica_sum(spv_emitter *em, int t) {
    if (!em->nsum)
        return;
    uint32_t fn = spv_entry_begin(em), w, nthreads, u64 = u64t(em);
    uint32_t f0 = spv_const_f32(&em->b, 0.0f);
    spv_entry_params(em, &w, &nthreads);
    for (int i = 0; i < em->nsum; i++) {
        int p = em->sum_param[i];
        uint32_t n = elements(em, p);
        uint32_t l_fits = spv_begin_if(em, spv_op2(&em->b, SpvOpULessThanEqual, em->t_bool, n,
                                                   cu64(em, KERN_SPV_REPLICA_ELEMS)));
        spv_strided st;
        uint32_t e = spv_strided_begin(em, w, n, &st);
        uint32_t sum = f0;
        for (int r = 0; r < KERN_SPV_REPLICAS; r++) {
            uint32_t at = cu64(em, kern_spv_replica_word(i, r));
            uint32_t ptr = scratch_ptr(em, spv_op2(&em->b, SpvOpIAdd, u64, e, at));
            uint32_t x = spv_op1(&em->b, SpvOpLoad, em->t_f32, ptr);
            spv_instv(&em->b.funcs, SpvOpStore, 2, ptr, f0);
            sum = r ? spv_op2(&em->b, SpvOpFAdd, em->t_f32, sum, x) : x;
        }
        uint32_t l_nz = spv_begin_if(em, spv_op2(&em->b, SpvOpFUnordNotEqual, em->t_bool, sum, f0));
        fadd_atomic(em, p, e, sum);
        spv_end_if(em, l_nz);
        spv_strided_end(em, &st, e, nthreads);
        spv_end_if(em, l_fits);
    }
    em->nsum = 0;
    spv_entry_end(em, fn, 'r', t);
}

static uint32_t group_max(spv_emitter *em, SpvOp op, uint32_t x) {
    uint32_t ops[3] = {cu32(em, SpvScopeSubgroup), SpvGroupOperationReduce, x};
    return spv_op(&em->b, op, em->t_u32, ops, 3);
}

/* lanemax: the largest x over the subgroup's active invocations (a reduction, in each).
 * 64-bit values reduce as two 32-bit halves (group operations on 64-bit integers need
 * shaderSubgroupExtendedTypes): the high words' maximum, then the low words' among the
 * invocations that hold it; a signed value's sign bit flipped first, so that unsigned
 * order is its order. */
uint32_t spv_emit_lanemax(spv_emitter *em, const ir_op *op, uint32_t x) {
    spv_capability(&em->b, SpvCapabilityGroupNonUniform);
    spv_capability(&em->b, SpvCapabilityGroupNonUniformArithmetic);
    const kern_type *t = op->operands[0]->type;
    bool sgn = !ty_is_unsigned(t);
    if (ty_size(t) < 8)
        return group_max(em, sgn ? SpvOpGroupNonUniformSMax : SpvOpGroupNonUniformUMax, x);
    spv_builder *b = &em->b;
    uint32_t u64 = em->t_u64, u32 = em->t_u32, bias = cu64(em, 0x8000000000000000ull);
    uint32_t u = sgn ? spv_op2(b, SpvOpBitwiseXor, u64, x, bias) : x;
    uint32_t hi =
        spv_op1(b, SpvOpUConvert, u32, spv_op2(b, SpvOpShiftRightLogical, u64, u, cu64(em, 32)));
    uint32_t lo = spv_op1(b, SpvOpUConvert, u32, u);
    uint32_t mh = group_max(em, SpvOpGroupNonUniformUMax, hi);
    uint32_t top = spv_op2(b, SpvOpIEqual, em->t_bool, hi, mh);
    uint32_t ml =
        group_max(em, SpvOpGroupNonUniformUMax, spv_op3(b, SpvOpSelect, u32, top, lo, cu32(em, 0)));
    uint32_t m = spv_op2(
        b, SpvOpBitwiseOr, u64,
        spv_op2(b, SpvOpShiftLeftLogical, u64, spv_op1(b, SpvOpUConvert, u64, mh), cu64(em, 32)),
        spv_op1(b, SpvOpUConvert, u64, ml));
    return sgn ? spv_op2(b, SpvOpBitwiseXor, u64, m, bias) : m;
}
