/* spv_emit_adds.c - f32 atomic adds whose old value nobody reads (adjoints such as w.grad),
 * and the other subgroup operation, lanemax.
 *
 * When every active lane of a subgroup adds into the same element, the subgroup sums first
 * and one lane adds the sum (as the CUDA path combines per warp). A parallel task that
 * touches an f32 array only through such adds gets a block copy of it: a workgroup array,
 * zeroed before the grid-stride loop, that the adds go into when the array fits it, and
 * whose non-zero entries are added to the array after the loop. Checked builds (the
 * default) have no block copies, so the bounds checks see every access (on the H200 the
 * checked K.grad of bench/gpu-bench ran 22% faster than the unchecked one with block
 * copies: bench/README.md, "Checked against unchecked"). */
#include <stdlib.h>

#include "../../common/spvblock.h"
#include "spv_emit_priv.h"

static void fadd_atomic(spv_emitter *em, int p, uint32_t lin, uint32_t v) {
    spv_capability(&em->b, SpvCapabilityAtomicFloat32AddEXT);
    spv_extension(&em->b, "SPV_EXT_shader_atomic_float_add");
    uint32_t ops[4] = {spv_element_ptr(em, p, false, lin), atomic_scope(em), relaxed(em), v};
    spv_op(&em->b, SpvOpAtomicFAddEXT, em->t_f32, ops, 4);
}

/* The block copy of array parameter p, or -1. */
int spv_block_copy_of(const spv_emitter *em, int p) {
    for (int i = 0; i < em->nblk; i++)
        if (em->blk_param[i] == p)
            return i;
    return -1;
}

/* An f32 atomic add of v at element lin: into block copy bi (workgroup memory) while the
 * array fits it (a uniform branch around the atomic alone), or (bi < 0, or the array does
 * not fit) into array parameter p. */
static void add_to(spv_emitter *em, int bi, int p, uint32_t lin, uint32_t v) {
    if (bi < 0) {
        fadd_atomic(em, p, lin, v);
        return;
    }
    spv_capability(&em->b, SpvCapabilityAtomicFloat32AddEXT);
    spv_extension(&em->b, "SPV_EXT_shader_atomic_float_add");
    uint32_t l_sh = spv_id(&em->b), l_gl = spv_id(&em->b), l_j = spv_id(&em->b);
    selection_merge(em, l_j);
    branch_cond(em, em->blk_on[bi], l_sh, l_gl);
    label(em, l_sh);
    uint32_t ptr =
        spv_op2(&em->b, SpvOpAccessChain, spv_type_ptr(&em->b, SpvStorageClassWorkgroup, em->t_f32),
                em->blk_var[bi], lin);
    uint32_t ops[4] = {ptr, cu32(em, SpvScopeWorkgroup), relaxed(em), v};
    spv_op(&em->b, SpvOpAtomicFAddEXT, em->t_f32, ops, 4);
    branch(em, l_j);
    label(em, l_gl);
    fadd_atomic(em, p, lin, v);
    branch(em, l_j);
    label(em, l_j);
}

bool spv_uniform_access(const spv_emitter *em, const ir_op *op) {
    return em->have_div && !ir_div_access_varying(&em->div, op);
}

/* An f32 atomic add whose old value nobody uses (adjoints like w.grad), into block copy bi
 * or (bi < 0) the array: when every active lane of the subgroup adds into the same element,
 * the subgroup sums first and one lane adds the sum (as the CUDA path combines per warp);
 * otherwise each lane adds. uniform: the divergence analysis has proven the element one
 * for the subgroup, so no vote is taken. */
void spv_emit_combined_fadd(spv_emitter *em, int bi, int p, uint32_t lin, uint32_t v,
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
    add_to(em, bi, p, lin, sum);
    branch(em, l_j1);
    label(em, l_j1);
    if (uniform)
        return;
    branch(em, l_j);
    label(em, l_each);
    add_to(em, bi, p, lin, v);
    branch(em, l_j);
    label(em, l_j);
}

/* An add into block-copied array p: combined per subgroup, then into the workgroup's copy
 * when the array fits it, else into the array (add_to: one subgroup sum for both, so the
 * shader holds one copy of the combining code). */
void spv_emit_block_fadd(spv_emitter *em, int bi, int p, uint32_t lin, uint32_t v, bool uniform) {
    spv_emit_combined_fadd(em, bi, p, lin, v, uniform);
}

/* Which arrays of the task get block copies: f32 parameters that the task accesses only
 * by atomic adds and subs whose old value it never uses (adjoints such as w.grad). */
static void scan_block_use(spv_emitter *em, const ir_region *r, int *use) {
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
                use[p] = 1;
            else
                use[p] = -1;
        }
        for (uint32_t i = 0; i < op->nregions; i++)
            scan_block_use(em, op->regions[i], use);
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

/* for (j = lid; j < n; j += KERN_SPV_GROUP) body(j), under `if on`; body is 0 (zero the
 * copy) or 1 (add the copy's non-zero entries to the array). */
static void block_loop(spv_emitter *em, int bi, uint32_t lid, int what) {
    uint32_t l_on = spv_id(&em->b), l_j = spv_id(&em->b);
    selection_merge(em, l_j);
    branch_cond(em, em->blk_on[bi], l_on, l_j);
    label(em, l_on);
    spv_strided st;
    uint32_t j = spv_strided_begin(em, lid, em->blk_n[bi], &st);
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
    spv_strided_end(em, &st, j, cu64(em, KERN_SPV_GROUP));
    branch(em, l_j);
    label(em, l_j);
}

/* Before the grid-stride loop (uniform control flow): the block copies, zeroed. */
void spv_block_copies_begin(spv_emitter *em, const ir_op *task) {
    const ir_kernel *k = em->kernel;
    em->nblk = 0;
    if (em->checks)
        return; /* checked builds keep every access where the checks see it */
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
        spv_use_global(em, em->blk_var[i]);
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
    uint32_t lid = spv_local_x(em);
    for (int i = 0; i < em->nblk; i++)
        block_loop(em, i, lid, 0);
    spv_workgroup_barrier(em);
}

/* After it: every invocation of the workgroup is done; the copies go to the arrays. */
void spv_block_copies_end(spv_emitter *em) {
    if (!em->nblk)
        return;
    spv_workgroup_barrier(em);
    uint32_t lid = spv_local_x(em);
    for (int i = 0; i < em->nblk; i++)
        block_loop(em, i, lid, 1);
    em->nblk = 0;
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
