/* llvm_simd_emit.c - the code of a task that runs SIMD across work items (llvm_simd.c says
 * which tasks, and how many lanes W): uniform values stay scalars, varying ones are
 * <W x T> vectors (the task's divergence, passes/divergence.c).
 *
 * Masks. The current mask (llvm_cpu(em)->mask) holds the lanes that run the code being emitted.
 * Code runs only when at least one lane of the mask is on: the chunk's vectors start at
 * an item of the chunk, a branch of a varying `if` is entered only when a lane takes it,
 * a masked loop iterates while a lane is on. So a uniform op (a load at a uniform
 * address) runs only where the scalar program runs it too. Pure ops compute every lane
 * (they cannot fault: divisions are guarded as in the scalar path); loads, stores,
 * gathers and scatters are masked.
 *   if (varying c)   then under mask & c, else under mask & !c, each skipped when no
 *                    lane takes it; results select(c, then, else);
 *   for (masked)     the active lanes: mask, then active & i < hi (& "go on" with a
 *                    break); carried values of inactive lanes are kept by selects; the
 *                    loop runs while a lane is active;
 *   while (masked)   the same, with the results captured per lane when its condition
 *                    fails.
 *
 * Atomics: an add/sub whose old value is unused at a uniform element adds the masked
 * lanes' sum (one atomic per vector; per chunk where llvm_reduce.c accumulates it).
 * Others run lane by lane in lane order (a loop over the mask's lanes running the scalar
 * code: atomics, neighbour adds, stores of varying values to uniform elements).
 *
 * Adstacks: per lane, laid out so that entry k of lane l is entry k * W + l of the
 * worker's slice (the runtime sizes slices for W lanes: the module exports
 * `kern_<K>__lanes`, runtime/adstack.c). A stack whose pushes and pops all happen under
 * uniform control keeps one depth for all lanes: a push or pop is one vector store or
 * load. Otherwise each lane has its own depth and pushes and pops are masked scatters
 * and gathers, but a pop whose active lanes are at one depth (an aligned reverse loop's)
 * is one vector load, and a push whose lanes are (a masked loop's, entered at one depth)
 * one masked vector store. Overflows are checked per lane and recorded as in the scalar path. */
#include <stdlib.h>
#include <string.h>

#include "../../runtime/abi.h"
#include "llvm_simd.h"

/* ---- vector helpers ----------------------------------------------------------------- */

static LLVMTypeRef vty(llvm_emitter *em, LLVMTypeRef s) { return LLVMVectorType(s, em->simd_w); }

static bool is_vec(LLVMValueRef x) {
    return x && LLVMGetTypeKind(LLVMTypeOf(x)) == LLVMVectorTypeKind;
}

static LLVMValueRef splat(llvm_emitter *em, LLVMValueRef x) {
    LLVMTypeRef vt = vty(em, LLVMTypeOf(x));
    LLVMValueRef one =
        LLVMBuildInsertElement(em->b, LLVMGetPoison(vt), x, LLVMConstInt(em->t_i32, 0, 0), "");
    return LLVMBuildShuffleVector(em->b, one, LLVMGetPoison(vt), LLVMConstNull(vty(em, em->t_i32)),
                                  "");
}

/* v as a vector (a uniform value splatted). */
static LLVMValueRef vec(llvm_emitter *em, const ir_value *v) {
    LLVMValueRef x = llvm_val(em, v);
    return is_vec(x) ? x : splat(em, x);
}

/* v as the analysis says it is: a vector when varying, else the scalar. */
static LLVMValueRef as_marked(llvm_emitter *em, const ir_value *v, bool varying) {
    if (varying)
        return vec(em, v);
    LLVMValueRef x = llvm_val(em, v);
    kern_assert(!is_vec(x));
    return x;
}

static LLVMValueRef call_intr(llvm_emitter *em, const char *name, LLVMTypeRef *types, size_t ntypes,
                              LLVMValueRef *args, unsigned nargs) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    kern_assert(id != 0);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(em->mod, id, types, ntypes);
    LLVMTypeRef fty = LLVMIntrinsicGetType(em->ctx, id, types, ntypes);
    return LLVMBuildCall2(em->b, fty, fn, args, nargs, "");
}

/* Whether a lane of mask m is on. */
static LLVMValueRef any_on(llvm_emitter *em, LLVMValueRef m) {
    LLVMTypeRef t = LLVMTypeOf(m);
    return call_intr(em, "llvm.vector.reduce.or", &t, 1, &m, 1);
}

static LLVMValueRef lane_ids(llvm_emitter *em, LLVMTypeRef elem) {
    LLVMValueRef c[64];
    for (unsigned l = 0; l < em->simd_w; l++)
        c[l] = LLVMConstInt(elem, l, 0);
    return LLVMConstVector(c, em->simd_w);
}

static const ir_op *vregion(llvm_emitter *em, const ir_region *r);

/* ---- lane by lane ------------------------------------------------------------------- */

/* Runs op's scalar code for each lane of the mask, in lane order: the vector operands'
 * lanes are mapped to op's operands for the time of the scalar code. */
static void scalarize(llvm_emitter *em, const ir_op *op) {
    uint32_t n = op->noperands;
    LLVMValueRef saved[8];
    kern_assert(n <= 8);
    for (uint32_t i = 0; i < n; i++)
        saved[i] = llvm_val(em, op->operands[i]);
    LLVMTypeRef rt = NULL;
    if (op->nresults) {
        bool vo = em->vec_ops;
        em->vec_ops = true;
        rt = llvm_reg_type(em, op->results[0]->type);
        em->vec_ops = vo;
    }
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b), loop = llvm_new_block(em, "lane"),
                      run = llvm_new_block(em, "lane.run"), next = llvm_new_block(em, "lane.next"),
                      exit = llvm_new_block(em, "lane.exit");
    LLVMBuildBr(em->b, loop);
    LLVMPositionBuilderAtEnd(em->b, loop);
    LLVMValueRef l = LLVMBuildPhi(em->b, em->t_i32, "l");
    LLVMValueRef zero = LLVMConstInt(em->t_i32, 0, 0);
    LLVMAddIncoming(l, &zero, &pre, 1);
    LLVMValueRef acc = NULL;
    if (rt) {
        acc = LLVMBuildPhi(em->b, rt, "");
        LLVMValueRef z = LLVMConstNull(rt);
        LLVMAddIncoming(acc, &z, &pre, 1);
    }
    LLVMBuildCondBr(em->b, LLVMBuildExtractElement(em->b, llvm_cpu(em)->mask, l, ""), run, next);

    LLVMPositionBuilderAtEnd(em->b, run);
    for (uint32_t i = 0; i < n; i++)
        if (is_vec(saved[i]))
            llvm_set_val(em, op->operands[i], LLVMBuildExtractElement(em->b, saved[i], l, ""));
    llvm_emit_simple_op(em, op);
    LLVMValueRef acc_run = NULL;
    if (rt)
        acc_run = LLVMBuildInsertElement(em->b, acc, llvm_val(em, op->results[0]), l, "");
    for (uint32_t i = 0; i < n; i++)
        llvm_set_val(em, op->operands[i], saved[i]);
    LLVMBasicBlockRef run_end = LLVMGetInsertBlock(em->b);
    LLVMBuildBr(em->b, next);

    LLVMPositionBuilderAtEnd(em->b, next);
    LLVMValueRef acc_next = NULL;
    if (rt) {
        acc_next = LLVMBuildPhi(em->b, rt, "");
        LLVMValueRef in[2] = {acc, acc_run};
        LLVMBasicBlockRef from[2] = {loop, run_end};
        LLVMAddIncoming(acc_next, in, from, 2);
        LLVMAddIncoming(acc, &acc_next, &next, 1);
    }
    LLVMValueRef l1 = LLVMBuildAdd(em->b, l, LLVMConstInt(em->t_i32, 1, 0), "");
    LLVMAddIncoming(l, &l1, &next, 1);
    LLVMBuildCondBr(
        em->b, LLVMBuildICmp(em->b, LLVMIntULT, l1, LLVMConstInt(em->t_i32, em->simd_w, 0), ""),
        loop, exit);
    LLVMPositionBuilderAtEnd(em->b, exit);
    if (rt)
        llvm_set_val(em, op->results[0], acc_next);
}

/* ---- arrays ------------------------------------------------------------------------- */

static int param_index(const llvm_emitter *em, const ir_value *a) {
    kern_assert(!a->def && a->region == em->kernel->body);
    return (int)a->index;
}

/* The element address of lane 0 (contiguous: the last index linear, the others
 * uniform), or NULL; else *lin_v: every lane's element number. */
static LLVMValueRef access_addr(llvm_emitter *em, const ir_op *op, LLVMValueRef *ptrs) {
    int p = param_index(em, op->operands[0]);
    const kern_type *at = op->operands[0]->type;
    LLVMTypeRef mt = llvm_mem_type(em, at->elem);
    bool contiguous = is_lin(em, op->operands[at->rank]);
    for (int d = 0; d + 1 < at->rank; d++)
        if (is_v(em, op->operands[1 + d]))
            contiguous = false;
    LLVMValueRef lin = NULL;
    for (int d = 0; d < at->rank; d++) {
        const ir_value *iv = op->operands[1 + d];
        LLVMValueRef i, n = em->arr_shape[p][d];
        if (contiguous) {
            i = llvm_val(em, iv);
            if (is_vec(i))
                i = LLVMBuildExtractElement(em->b, i, LLVMConstInt(em->t_i32, 0, 0), "");
            i = llvm_to_i64(em, i, iv->type);
        } else {
            i = llvm_to_i64(em, vec(em, iv), iv->type);
            n = splat(em, n);
        }
        lin = d == 0 ? i : LLVMBuildAdd(em->b, LLVMBuildMul(em->b, lin, n, ""), i, "");
    }
    /* no inbounds: lanes that are off may address anything */
    LLVMValueRef ptr = LLVMBuildGEP2(em->b, mt, em->arr_data[p], &lin, 1, "");
    if (contiguous) {
        *ptrs = NULL;
        return ptr;
    }
    *ptrs = ptr;
    return NULL;
}

/* Without AVX-512, LLVM expands masked gathers and scatters into a branch and a block
 * per lane (W of them, 16 or 32: much code to compile, and branches to predict). kern
 * emits them as straight-line code instead: lane l loads or stores at ptrs[l] when it is
 * on, else at llvm_cpu(em)->sink, a word of the task's frame that nothing reads: lanes that are
 * off load garbage from it (the result masks it out) and store garbage into it. */
static bool own_gathers(void) { return llvm_simd_host_bits() < 512; }

/* The address of lane l: ptrs[l] when the lane is on, else the sink. */
static LLVMValueRef lane_addr(llvm_emitter *em, LLVMValueRef ptrs, LLVMValueRef mask,
                              LLVMValueRef l) {
    LLVMValueRef p = LLVMBuildExtractElement(em->b, ptrs, l, "");
    LLVMValueRef on = LLVMIsConstant(mask)
                          ? LLVMGetAggregateElement(mask, (unsigned)LLVMConstIntGetZExtValue(l))
                          : NULL;
    if (on && LLVMIsAConstantInt(on) && LLVMConstIntGetZExtValue(on))
        return p; /* a lane that is always on */
    if (!llvm_cpu(em)->sink) {
        LLVMBuilderRef eb = llvm_entry_builder(em);
        llvm_cpu(em)->sink = LLVMBuildAlloca(eb, em->t_i64, "sink");
        LLVMSetAlignment(llvm_cpu(em)->sink, 8);
        /* the slot's address escapes (a volatile store of it into itself): otherwise SROA
         * turns the stores at select(on, p, sink) back into a branch per lane */
        LLVMValueRef st = LLVMBuildStore(eb, llvm_cpu(em)->sink, llvm_cpu(em)->sink);
        LLVMSetVolatile(st, 1);
        LLVMDisposeBuilder(eb);
    }
    return LLVMBuildSelect(em->b, LLVMBuildExtractElement(em->b, mask, l, ""), p,
                           llvm_cpu(em)->sink, "");
}

/* Lane l of the result: *ptrs[l] for every lane of mask, else 0. */
static LLVMValueRef gather(llvm_emitter *em, LLVMTypeRef vt, LLVMValueRef ptrs, LLVMValueRef mask,
                           unsigned align) {
    if (!own_gathers()) {
        LLVMTypeRef types[2] = {vt, vty(em, em->t_ptr)};
        LLVMValueRef args[4] = {ptrs, LLVMConstInt(em->t_i32, align, 0), mask, LLVMConstNull(vt)};
        return call_intr(em, "llvm.masked.gather", types, 2, args, 4);
    }
    LLVMTypeRef et = LLVMGetElementType(vt);
    LLVMValueRef r = LLVMConstNull(vt);
    for (unsigned i = 0; i < em->simd_w; i++) {
        LLVMValueRef l = LLVMConstInt(em->t_i32, i, 0);
        LLVMValueRef x = LLVMBuildLoad2(em->b, et, lane_addr(em, ptrs, mask, l), "");
        LLVMSetAlignment(x, align);
        r = LLVMBuildInsertElement(em->b, r, x, l, "");
    }
    /* lanes that are off read the sink: zero them as the masked gather does */
    return LLVMBuildSelect(em->b, mask, r, LLVMConstNull(vt), "");
}

/* Stores lane l of v at ptrs[l] for every lane of mask, in lane order. */
static void scatter(llvm_emitter *em, LLVMValueRef v, LLVMValueRef ptrs, LLVMValueRef mask,
                    unsigned align) {
    if (!own_gathers()) {
        LLVMTypeRef types[2] = {LLVMTypeOf(v), vty(em, em->t_ptr)};
        LLVMValueRef args[4] = {v, ptrs, LLVMConstInt(em->t_i32, align, 0), mask};
        call_intr(em, "llvm.masked.scatter", types, 2, args, 4);
        return;
    }
    for (unsigned i = 0; i < em->simd_w; i++) {
        LLVMValueRef l = LLVMConstInt(em->t_i32, i, 0);
        LLVMValueRef x = LLVMBuildStore(em->b, LLVMBuildExtractElement(em->b, v, l, ""),
                                        lane_addr(em, ptrs, mask, l));
        LLVMSetAlignment(x, align);
    }
}

static LLVMValueRef vload_masked(llvm_emitter *em, const ir_op *op) {
    const kern_type *et = op->operands[0]->type->elem;
    LLVMTypeRef mt = llvm_mem_type(em, et), vt = vty(em, mt);
    LLVMValueRef align = LLVMConstInt(em->t_i32, ty_size(et), 0), ptrs;
    LLVMValueRef ptr = access_addr(em, op, &ptrs), r;
    if (ptr) {
        LLVMTypeRef types[2] = {vt, em->t_ptr};
        LLVMValueRef args[4] = {ptr, align, llvm_cpu(em)->mask, LLVMConstNull(vt)};
        r = call_intr(em, "llvm.masked.load", types, 2, args, 4);
    } else {
        r = gather(em, vt, ptrs, llvm_cpu(em)->mask, (unsigned)ty_size(et));
    }
    if (et->kind == TY_BOOL)
        r = LLVMBuildICmp(em->b, LLVMIntNE, r, LLVMConstNull(vt), "");
    return r;
}

static LLVMValueRef vstore_masked(llvm_emitter *em, const ir_op *op) {
    const kern_type *et = op->operands[0]->type->elem;
    LLVMTypeRef mt = llvm_mem_type(em, et), vt = vty(em, mt);
    LLVMValueRef align = LLVMConstInt(em->t_i32, ty_size(et), 0), ptrs;
    LLVMValueRef v = vec(em, op->operands[op->noperands - 1]);
    if (et->kind == TY_BOOL)
        v = LLVMBuildZExt(em->b, v, vt, "");
    LLVMValueRef ptr = access_addr(em, op, &ptrs);
    if (ptr && LLVMIsConstant(llvm_cpu(em)->mask)) {
        LLVMTypeRef types[2] = {vt, em->t_ptr};
        LLVMValueRef args[4] = {v, ptr, align, llvm_cpu(em)->mask};
        call_intr(em, "llvm.masked.store", types, 2, args, 4);
    } else if (ptr) {
        /* a plain store when every lane is on (masked stores are slow on some CPUs) */
        LLVMValueRef m = llvm_cpu(em)->mask;
        LLVMTypeRef mt8 = LLVMIntTypeInContext(em->ctx, em->simd_w);
        LLVMValueRef all = LLVMBuildICmp(em->b, LLVMIntEQ, LLVMBuildBitCast(em->b, m, mt8, ""),
                                         LLVMConstAllOnes(mt8), "");
        LLVMBasicBlockRef full = llvm_new_block(em, "st.full"),
                          part = llvm_new_block(em, "st.part"),
                          done = llvm_new_block(em, "st.done");
        LLVMBuildCondBr(em->b, all, full, part);
        LLVMPositionBuilderAtEnd(em->b, full);
        LLVMSetAlignment(LLVMBuildStore(em->b, v, ptr), (unsigned)ty_size(et));
        LLVMBuildBr(em->b, done);
        LLVMPositionBuilderAtEnd(em->b, part);
        LLVMTypeRef types[2] = {vt, em->t_ptr};
        LLVMValueRef args[4] = {v, ptr, align, m};
        call_intr(em, "llvm.masked.store", types, 2, args, 4);
        LLVMBuildBr(em->b, done);
        LLVMPositionBuilderAtEnd(em->b, done);
    } else {
        scatter(em, v, ptrs, llvm_cpu(em)->mask, (unsigned)ty_size(et));
    }
    return NULL;
}

/* ---- checks ------------------------------------------------------------------------- */

/* Checked code (kc_checks) keeps the vector path. An access tests its lanes' indices
 * against the extents at once: the lanes that are on and out of range are `bad`; when
 * none is (one branch, almost always taken) the access runs as in unchecked code. Else a
 * cold block records the lowest bad lane (its dimension, index and extent, as the scalar
 * code records its item) and runs the access without the bad lanes: their loads yield 0,
 * their stores are dropped, as in scalar code. A contiguous access first tests its first
 * and last lane with two scalar compares, the vector test only when that fails (the last,
 * partly masked vector of an array). A `check` (divisions, shifts) records its lowest
 * failing lane and goes on. */

static LLVMValueRef mask_bits(llvm_emitter *em, LLVMValueRef m) {
    return LLVMBuildBitCast(em->b, m, LLVMIntTypeInContext(em->ctx, em->simd_w), "");
}

/* Whether a lane of m is on, as one integer compare of its bits. */
static LLVMValueRef any_bit(llvm_emitter *em, LLVMValueRef m) {
    LLVMValueRef bits = mask_bits(em, m);
    return LLVMBuildICmp(em->b, LLVMIntNE, bits, LLVMConstNull(LLVMTypeOf(bits)), "");
}

/* The number (i32) of the lowest lane on in m (which has one). */
static LLVMValueRef lowest_lane(llvm_emitter *em, LLVMValueRef m) {
    LLVMValueRef bits = mask_bits(em, m);
    LLVMTypeRef it = LLVMTypeOf(bits);
    LLVMValueRef args[2] = {bits, LLVMConstInt(em->t_i1, 1, 0)};
    LLVMValueRef l = call_intr(em, "llvm.cttz", &it, 1, args, 2);
    return LLVMBuildIntCast2(em->b, l, em->t_i32, 0, "");
}

/* Lane l of x, or x when it is uniform. */
static LLVMValueRef lane_of(llvm_emitter *em, LLVMValueRef x, LLVMValueRef l) {
    return is_vec(x) ? LLVMBuildExtractElement(em->b, x, l, "") : x;
}

/* Branches on `ok` to a new block `pass` (taken almost always) or `fail`; leaves the
 * builder in fail. */
static LLVMBasicBlockRef branch_unlikely(llvm_emitter *em, LLVMValueRef ok, LLVMBasicBlockRef pass,
                                         const char *name) {
    LLVMBasicBlockRef fail = llvm_new_block(em, name);
    llvm_likely_first(em, LLVMBuildCondBr(em->b, ok, pass, fail));
    LLVMPositionBuilderAtEnd(em->b, fail);
    return fail;
}

/* A vector access under the checks: `body` emits it under llvm_cpu(em)->mask and returns
 * a load's value (NULL for a store). */
static LLVMValueRef checked_access(llvm_emitter *em, const ir_op *op,
                                   LLVMValueRef (*body)(llvm_emitter *, const ir_op *)) {
    int p = param_index(em, op->operands[0]);
    int rank = op->operands[0]->type->rank;
    const ir_value *last = op->operands[rank];
    bool contiguous = is_lin(em, last);
    for (int d = 0; d + 1 < rank; d++)
        if (is_v(em, op->operands[1 + d]))
            contiguous = false;
    LLVMValueRef m = llvm_cpu(em)->mask, *shape = em->arr_shape[p];
    LLVMBasicBlockRef run = llvm_new_block(em, "chk.run"), join = llvm_new_block(em, "chk.join");
    LLVMValueRef base = NULL;
    if (contiguous) {
        /* the lanes address base, base + 1, ...: base >= 0, base + W <= n and the uniform
         * indices in range, in scalars; the lanes' test only when that fails */
        LLVMValueRef i = llvm_val(em, last);
        if (is_vec(i))
            i = LLVMBuildExtractElement(em->b, i, LLVMConstInt(em->t_i32, 0, 0), "");
        base = llvm_to_i64(em, i, last->type);
        LLVMValueRef end = LLVMBuildAdd(em->b, base, LLVMConstInt(em->t_i64, em->simd_w, 0), "");
        LLVMValueRef fast = LLVMBuildAnd(
            em->b, LLVMBuildICmp(em->b, LLVMIntSGE, base, LLVMConstNull(em->t_i64), ""),
            LLVMBuildICmp(em->b, LLVMIntSLE, end, shape[rank - 1], ""), "");
        for (int d = 0; d + 1 < rank; d++) {
            const ir_value *iv = op->operands[1 + d];
            LLVMValueRef x = llvm_to_i64(em, llvm_val(em, iv), iv->type);
            fast = LLVMBuildAnd(em->b, fast, LLVMBuildICmp(em->b, LLVMIntULT, x, shape[d], ""), "");
        }
        branch_unlikely(em, fast, run, "chk.lanes");
    }
    LLVMValueRef oob[KERN_MAX_RANK], idx[KERN_MAX_RANK], bad = NULL;
    for (int d = 0; d < rank; d++) {
        const ir_value *iv = op->operands[1 + d];
        LLVMValueRef i = contiguous && d == rank - 1
                             ? LLVMBuildAdd(em->b, splat(em, base), lane_ids(em, em->t_i64), "")
                             : llvm_to_i64(em, llvm_val(em, iv), iv->type);
        idx[d] = i;
        oob[d] =
            LLVMBuildICmp(em->b, LLVMIntUGE, i, is_vec(i) ? splat(em, shape[d]) : shape[d], "");
        LLVMValueRef o = is_vec(oob[d]) ? oob[d] : splat(em, oob[d]);
        bad = d ? LLVMBuildOr(em->b, bad, o, "") : o;
    }
    bad = LLVMBuildAnd(em->b, m, bad, "");
    branch_unlikely(em, LLVMBuildNot(em->b, any_bit(em, bad), ""), run, "chk.fail");
    /* the lowest bad lane, its first dimension out of range */
    LLVMValueRef l = lowest_lane(em, bad), dim = LLVMConstInt(em->t_i32, 0, 0);
    LLVMValueRef a = lane_of(em, idx[0], l), b = shape[0];
    for (int d = rank - 1; d > 0; d--) {
        LLVMValueRef out = lane_of(em, oob[d], l);
        for (int k = d - 1; k >= 0; k--) /* an earlier dimension out of range goes first */
            out = LLVMBuildAnd(em->b, out, LLVMBuildNot(em->b, lane_of(em, oob[k], l), ""), "");
        dim = LLVMBuildSelect(em->b, out, LLVMConstInt(em->t_i32, (unsigned)d, 0), dim, "");
        a = LLVMBuildSelect(em->b, out, lane_of(em, idx[d], l), a, "");
        b = LLVMBuildSelect(em->b, out, shape[d], b, "");
    }
    llvm_record_error(em, op, KERN_DEVERR_BOUNDS, dim, a, b);
    /* the other lanes one by one (compact code: this path runs once per failing launch),
     * their indices in range */
    LLVMValueRef saved = llvm_val(em, last);
    if (!is_vec(saved)) /* a contiguous index kept as lane 0's: every lane's */
        llvm_set_val(em, last,
                     LLVMBuildAdd(em->b, splat(em, saved), lane_ids(em, LLVMTypeOf(saved)), ""));
    llvm_cpu(em)->mask = LLVMBuildAnd(em->b, m, LLVMBuildNot(em->b, bad, ""), "");
    em->checks = false;
    scalarize(em, op);
    em->checks = true;
    llvm_cpu(em)->mask = m;
    llvm_set_val(em, last, saved);
    LLVMValueRef v_fail = op->nresults ? llvm_val(em, op->results[0]) : NULL;
    LLVMBasicBlockRef fail_end = LLVMGetInsertBlock(em->b);
    LLVMBuildBr(em->b, join);
    LLVMPositionBuilderAtEnd(em->b, run);
    LLVMValueRef v_run = body(em, op);
    LLVMBasicBlockRef run_end = LLVMGetInsertBlock(em->b);
    LLVMBuildBr(em->b, join);
    LLVMPositionBuilderAtEnd(em->b, join);
    if (!v_run)
        return NULL;
    LLVMValueRef phi = LLVMBuildPhi(em->b, LLVMTypeOf(v_run), "");
    LLVMValueRef in[2] = {v_run, v_fail};
    LLVMBasicBlockRef from[2] = {run_end, fail_end};
    LLVMAddIncoming(phi, in, from, 2);
    return phi;
}

static void vload(llvm_emitter *em, const ir_op *op) {
    llvm_set_val(em, op->results[0],
                 llvm_access_checked(em, op) ? checked_access(em, op, vload_masked)
                                             : vload_masked(em, op));
}

static void vstore(llvm_emitter *em, const ir_op *op) {
    if (llvm_access_checked(em, op))
        checked_access(em, op, vstore_masked);
    else
        vstore_masked(em, op);
}

/* A `check` of a division or shift (passes/lower_semantics.c) whose operands vary:
 * records the lowest lane on that fails it. */
static void vcheck(llvm_emitter *em, const ir_op *op) {
    LLVMValueRef ok = llvm_val(em, op->operands[0]);
    if (!is_vec(ok) && !is_vec(llvm_val(em, op->operands[1])) &&
        !is_vec(llvm_val(em, op->operands[2]))) {
        llvm_emit_simple_op(em, op); /* uniform: the scalar check */
        return;
    }
    if (!em->checks)
        return;
    ok = vec(em, op->operands[0]);
    LLVMValueRef bad = LLVMBuildAnd(em->b, llvm_cpu(em)->mask, LLVMBuildNot(em->b, ok, ""), "");
    LLVMBasicBlockRef pass = llvm_new_block(em, "chk.ok");
    branch_unlikely(em, LLVMBuildNot(em->b, any_bit(em, bad), ""), pass, "chk.fail");
    LLVMValueRef l = lowest_lane(em, bad);
    llvm_record_error(em, op, (int)op->imm.i, LLVMConstInt(em->t_i32, 0, 0),
                      lane_of(em, llvm_val(em, op->operands[1]), l),
                      lane_of(em, llvm_val(em, op->operands[2]), l));
    LLVMBuildBr(em->b, pass);
    LLVMPositionBuilderAtEnd(em->b, pass);
}

/* An atomic add/sub whose old value is unused, at a uniform element: the masked lanes'
 * sum, added by the scalar code (one atomic, or the chunk's accumulator). */
static bool vatomic_sum(llvm_emitter *em, const ir_op *op) {
    const kern_type *et = op->operands[0]->type->elem;
    if ((op->code != IR_ATOMIC_ADD && op->code != IR_ATOMIC_SUB) || et->kind == TY_BOOL ||
        any_index_varying(em, op) || llvm_value_used(em, op->results[0]))
        return false;
    const ir_value *val = op->operands[op->noperands - 1];
    LLVMValueRef saved = llvm_val(em, val), v = vec(em, val);
    LLVMTypeRef vt = LLVMTypeOf(v);
    v = LLVMBuildSelect(em->b, llvm_cpu(em)->mask, v, LLVMConstNull(vt), "");
    LLVMValueRef sum;
    if (ty_is_float(et)) {
        LLVMValueRef args[2] = {llvm_const_real(LLVMGetElementType(vt), -0.0), v};
        sum = call_intr(em, "llvm.vector.reduce.fadd", &vt, 1, args, 2);
        LLVMSetFastMathFlags(sum, LLVMFastMathAllowReassoc);
    } else {
        sum = call_intr(em, "llvm.vector.reduce.add", &vt, 1, &v, 1);
    }
    llvm_set_val(em, val, sum);
    llvm_emit_simple_op(em, op);
    llvm_set_val(em, val, saved);
    llvm_set_val(em, op->results[0], LLVMGetPoison(vt));
    return true;
}

/* ---- adstacks ----------------------------------------------------------------------- */

static void vad_reset(llvm_emitter *em) {
    for (uint32_t s = 0; s < em->kernel->nadstacks; s++)
        LLVMBuildStore(em->b,
                       llvm_cpu(em)->div.ad_varying[s] ? LLVMConstNull(vty(em, em->t_i64))
                                                       : LLVMConstInt(em->t_i64, 0, 0),
                       em->ad_depth[s]);
}

/* Element numbers d * W + lane of every lane (d: <W x i64>). */
static LLVMValueRef ad_slots(llvm_emitter *em, LLVMValueRef d) {
    LLVMValueRef w = splat(em, LLVMConstInt(em->t_i64, em->simd_w, 0));
    return LLVMBuildAdd(em->b, LLVMBuildMul(em->b, d, w, ""), lane_ids(em, em->t_i64), "");
}

/* Whether the lanes of mask are all at one depth of d (<W x i64>); *top: the largest of
 * their depths. */
static LLVMValueRef one_depth(llvm_emitter *em, LLVMValueRef mask, LLVMValueRef d,
                              LLVMValueRef *top) {
    LLVMTypeRef dt = LLVMTypeOf(d);
    *top = call_intr(em, "llvm.vector.reduce.umax", &dt, 1,
                     (LLVMValueRef[]){LLVMBuildSelect(em->b, mask, d, LLVMConstNull(dt), "")}, 1);
    LLVMValueRef bottom =
        call_intr(em, "llvm.vector.reduce.umin", &dt, 1,
                  (LLVMValueRef[]){LLVMBuildSelect(em->b, mask, d, LLVMConstAllOnes(dt), "")}, 1);
    return LLVMBuildICmp(em->b, LLVMIntEQ, *top, bottom, "");
}

static void vpush(llvm_emitter *em, const ir_op *op) {
    uint32_t s = (uint32_t)op->imm.i;
    const ir_adstack *st = &em->kernel->adstacks[s];
    LLVMTypeRef mt = llvm_mem_type(em, st->type), vt = vty(em, mt);
    unsigned align = (unsigned)ty_size(st->type);
    LLVMValueRef v = vec(em, op->operands[0]);
    if (st->type->kind == TY_BOOL)
        v = LLVMBuildZExt(em->b, v, vt, "");
    kern_loc loc = op->loc.line ? op->loc : st->loc;
    LLVMValueRef ofn = llvm_adstack_overflow_fn(em);
    LLVMValueRef cap = em->ad_cap[s];
    LLVMBasicBlockRef bb_ovf = llvm_new_block(em, "ad.overflow"),
                      bb_cont = llvm_new_block(em, "ad.pushed");
    if (!llvm_cpu(em)->div.ad_varying[s]) {
        LLVMValueRef d = LLVMBuildLoad2(em->b, em->t_i64, em->ad_depth[s], "ad.d");
        LLVMValueRef d1 = LLVMBuildAdd(em->b, d, LLVMConstInt(em->t_i64, 1, 0), "");
        LLVMBasicBlockRef bb_store = llvm_new_block(em, "ad.push");
        llvm_likely_first(em, LLVMBuildCondBr(em->b, LLVMBuildICmp(em->b, LLVMIntULT, d, cap, ""),
                                              bb_store, bb_ovf));
        LLVMPositionBuilderAtEnd(em->b, bb_store);
        LLVMValueRef e = LLVMBuildMul(em->b, d, LLVMConstInt(em->t_i64, em->simd_w, 0), "");
        LLVMValueRef p = LLVMBuildInBoundsGEP2(em->b, mt, em->ad_base[s], &e, 1, "");
        LLVMSetAlignment(LLVMBuildStore(em->b, v, p), align);
        LLVMBuildBr(em->b, bb_cont);
        LLVMPositionBuilderAtEnd(em->b, bb_ovf);
        LLVMValueRef args[5] = {em->err, LLVMConstInt(em->t_i32, loc.line, 0),
                                LLVMConstInt(em->t_i32, loc.col, 0), cap, d1};
        LLVMBuildCall2(em->b, LLVMGlobalGetValueType(ofn), ofn, args, 5, "");
        LLVMBuildBr(em->b, bb_cont);
        LLVMPositionBuilderAtEnd(em->b, bb_cont);
        LLVMBuildStore(em->b, d1, em->ad_depth[s]);
        return;
    }
    LLVMTypeRef dt = vty(em, em->t_i64);
    LLVMValueRef d = LLVMBuildLoad2(em->b, dt, em->ad_depth[s], "ad.d");
    LLVMValueRef ok = LLVMBuildICmp(em->b, LLVMIntULT, d, splat(em, cap), "");
    LLVMValueRef good = LLVMBuildAnd(em->b, llvm_cpu(em)->mask, ok, "");
    LLVMValueRef bad = LLVMBuildAnd(em->b, llvm_cpu(em)->mask, LLVMBuildNot(em->b, ok, ""), "");
    LLVMValueRef d1 = LLVMBuildAdd(em->b, d, LLVMBuildZExt(em->b, llvm_cpu(em)->mask, dt, ""), "");
    LLVMBasicBlockRef bb_store = llvm_new_block(em, "ad.push");
    llvm_likely_first(
        em, LLVMBuildCondBr(em->b, LLVMBuildNot(em->b, any_on(em, bad), ""), bb_store, bb_ovf));
    LLVMPositionBuilderAtEnd(em->b, bb_ovf);
    LLVMValueRef deep = LLVMBuildSelect(em->b, bad, d1, LLVMConstNull(dt), "");
    LLVMValueRef args[5] = {em->err, LLVMConstInt(em->t_i32, loc.line, 0),
                            LLVMConstInt(em->t_i32, loc.col, 0), cap,
                            call_intr(em, "llvm.vector.reduce.umax", &dt, 1, &deep, 1)};
    LLVMBuildCall2(em->b, LLVMGlobalGetValueType(ofn), ofn, args, 5, "");
    LLVMBuildBr(em->b, bb_store);
    LLVMPositionBuilderAtEnd(em->b, bb_store);
    /* the good lanes at one depth (a masked loop's pushes where the lanes entered it at
     * one depth: lane l pushes its step t at t): their entries are consecutive, one masked
     * vector store */
    LLVMValueRef top, one = one_depth(em, good, d, &top);
    LLVMBasicBlockRef bb_one = llvm_new_block(em, "ad.push.one"),
                      bb_each = llvm_new_block(em, "ad.push.each"),
                      bb_done = llvm_new_block(em, "ad.push.done");
    LLVMBuildCondBr(em->b, one, bb_one, bb_each);
    LLVMPositionBuilderAtEnd(em->b, bb_one);
    LLVMValueRef e1 = LLVMBuildMul(em->b, top, LLVMConstInt(em->t_i64, em->simd_w, 0), "");
    LLVMTypeRef types[2] = {vt, em->t_ptr};
    LLVMValueRef margs[4] = {v, LLVMBuildInBoundsGEP2(em->b, mt, em->ad_base[s], &e1, 1, ""),
                             LLVMConstInt(em->t_i32, align, 0), good};
    call_intr(em, "llvm.masked.store", types, 2, margs, 4);
    LLVMBuildBr(em->b, bb_done);
    LLVMPositionBuilderAtEnd(em->b, bb_each);
    LLVMValueRef e = ad_slots(em, d);
    LLVMValueRef ptrs = LLVMBuildGEP2(em->b, mt, em->ad_base[s], &e, 1, "");
    scatter(em, v, ptrs, good, align);
    LLVMBuildBr(em->b, bb_done);
    LLVMPositionBuilderAtEnd(em->b, bb_done);
    LLVMBuildStore(em->b, d1, em->ad_depth[s]);
    LLVMBuildBr(em->b, bb_cont);
    LLVMPositionBuilderAtEnd(em->b, bb_cont);
}

static void vpop(llvm_emitter *em, const ir_op *op) {
    uint32_t s = (uint32_t)op->imm.i;
    const ir_adstack *st = &em->kernel->adstacks[s];
    LLVMTypeRef mt = llvm_mem_type(em, st->type), vt = vty(em, mt);
    unsigned align = (unsigned)ty_size(st->type);
    LLVMValueRef cap = em->ad_cap[s], r;
    if (!llvm_cpu(em)->div.ad_varying[s]) {
        LLVMValueRef d = LLVMBuildLoad2(em->b, em->t_i64, em->ad_depth[s], "ad.d");
        LLVMValueRef d1 = LLVMBuildSub(em->b, d, LLVMConstInt(em->t_i64, 1, 0), "");
        LLVMBuildStore(em->b, d1, em->ad_depth[s]);
        LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b), bb_load = llvm_new_block(em, "ad.pop"),
                          bb_cont = llvm_new_block(em, "ad.popped");
        llvm_likely_first(em, LLVMBuildCondBr(em->b, LLVMBuildICmp(em->b, LLVMIntULT, d1, cap, ""),
                                              bb_load, bb_cont));
        LLVMPositionBuilderAtEnd(em->b, bb_load);
        LLVMValueRef e = LLVMBuildMul(em->b, d1, LLVMConstInt(em->t_i64, em->simd_w, 0), "");
        LLVMValueRef v = LLVMBuildLoad2(
            em->b, vt, LLVMBuildInBoundsGEP2(em->b, mt, em->ad_base[s], &e, 1, ""), "");
        LLVMSetAlignment(v, align);
        LLVMBuildBr(em->b, bb_cont);
        LLVMPositionBuilderAtEnd(em->b, bb_cont);
        r = LLVMBuildPhi(em->b, vt, "");
        LLVMValueRef in[2] = {v, LLVMConstNull(vt)};
        LLVMBasicBlockRef from[2] = {bb_load, pre};
        LLVMAddIncoming(r, in, from, 2);
    } else {
        LLVMTypeRef dt = vty(em, em->t_i64);
        LLVMValueRef d = LLVMBuildLoad2(em->b, dt, em->ad_depth[s], "ad.d");
        LLVMValueRef d1 =
            LLVMBuildSub(em->b, d, LLVMBuildZExt(em->b, llvm_cpu(em)->mask, dt, ""), "");
        LLVMBuildStore(em->b, d1, em->ad_depth[s]);
        LLVMValueRef mask = llvm_cpu(em)->mask;
        LLVMValueRef good =
            LLVMBuildAnd(em->b, mask, LLVMBuildICmp(em->b, LLVMIntULT, d1, splat(em, cap), ""), "");
        /* the mask's lanes at one depth below the capacity (an aligned reverse loop's pops,
         * docs/autodiff.md): their entries are consecutive, one vector load */
        LLVMValueRef top, one = one_depth(em, mask, d1, &top);
        one = LLVMBuildAnd(em->b, one, LLVMBuildICmp(em->b, LLVMIntULT, top, cap, ""), "");
        LLVMBasicBlockRef bb_one = llvm_new_block(em, "ad.pop.one"),
                          bb_each = llvm_new_block(em, "ad.pop.each"),
                          bb_cont = llvm_new_block(em, "ad.popped");
        LLVMBuildCondBr(em->b, one, bb_one, bb_each);
        LLVMPositionBuilderAtEnd(em->b, bb_one);
        LLVMValueRef e1 = LLVMBuildMul(em->b, top, LLVMConstInt(em->t_i64, em->simd_w, 0), "");
        LLVMValueRef v1 = LLVMBuildLoad2(
            em->b, vt, LLVMBuildInBoundsGEP2(em->b, mt, em->ad_base[s], &e1, 1, ""), "");
        LLVMSetAlignment(v1, align);
        v1 = LLVMBuildSelect(em->b, mask, v1, LLVMConstNull(vt), ""); /* as the gather's */
        LLVMBasicBlockRef from_one = LLVMGetInsertBlock(em->b);
        LLVMBuildBr(em->b, bb_cont);
        LLVMPositionBuilderAtEnd(em->b, bb_each);
        LLVMValueRef e = ad_slots(em, d1);
        LLVMValueRef ptrs = LLVMBuildGEP2(em->b, mt, em->ad_base[s], &e, 1, "");
        LLVMValueRef v2 = gather(em, vt, ptrs, good, align);
        LLVMBasicBlockRef from_each = LLVMGetInsertBlock(em->b);
        LLVMBuildBr(em->b, bb_cont);
        LLVMPositionBuilderAtEnd(em->b, bb_cont);
        r = LLVMBuildPhi(em->b, vt, "");
        LLVMValueRef in[2] = {v1, v2};
        LLVMBasicBlockRef from[2] = {from_one, from_each};
        LLVMAddIncoming(r, in, from, 2);
    }
    if (st->type->kind == TY_BOOL)
        r = LLVMBuildICmp(em->b, LLVMIntNE, r, LLVMConstNull(vt), "");
    llvm_set_val(em, op->results[0], r);
}

/* lanemax: the largest value of the current mask's lanes (the others neutral: the type's
 * minimum), a scalar; a uniform operand is its own maximum. */
static void vlanemax(llvm_emitter *em, const ir_op *op) {
    LLVMValueRef x = llvm_val(em, op->operands[0]);
    if (is_vec(x)) {
        bool uns = ty_is_unsigned(op->operands[0]->type);
        LLVMTypeRef et = LLVMGetElementType(LLVMTypeOf(x)), vt = LLVMTypeOf(x);
        unsigned bits = LLVMGetIntTypeWidth(et);
        LLVMValueRef low = LLVMConstInt(et, uns ? 0 : 1ULL << (bits - 1), 0);
        x = LLVMBuildSelect(em->b, llvm_cpu(em)->mask, x, splat(em, low), "");
        x = call_intr(em, uns ? "llvm.vector.reduce.umax" : "llvm.vector.reduce.smax", &vt, 1, &x,
                      1);
    }
    llvm_set_val(em, op->results[0], x);
}

/* ---- control flow ------------------------------------------------------------------- */

static LLVMValueRef *tmp(uint32_t n) {
    LLVMValueRef *a = calloc(n ? n : 1, sizeof *a);
    if (!a)
        kern_oom(n * sizeof *a);
    return a;
}

static void vif_uniform(llvm_emitter *em, const ir_op *op) {
    uint32_t n = op->nresults;
    LLVMBasicBlockRef bb_then = llvm_new_block(em, "then"), bb_else = llvm_new_block(em, "else"),
                      bb_merge = llvm_new_block(em, "endif");
    LLVMBuildCondBr(em->b, llvm_val(em, op->operands[0]), bb_then, bb_else);
    LLVMValueRef *v[2] = {tmp(n), tmp(n)};
    LLVMBasicBlockRef ends[2];
    LLVMBasicBlockRef starts[2] = {bb_then, bb_else};
    for (int b = 0; b < 2; b++) {
        LLVMPositionBuilderAtEnd(em->b, starts[b]);
        const ir_op *t = vregion(em, op->regions[b]);
        for (uint32_t k = 0; k < n; k++)
            v[b][k] = as_marked(em, t->operands[k], is_v(em, op->results[k]));
        ends[b] = LLVMGetInsertBlock(em->b);
        LLVMBuildBr(em->b, bb_merge);
    }
    LLVMPositionBuilderAtEnd(em->b, bb_merge);
    for (uint32_t k = 0; k < n; k++) {
        LLVMValueRef phi = LLVMBuildPhi(em->b, LLVMTypeOf(v[0][k]), "");
        LLVMValueRef in[2] = {v[0][k], v[1][k]};
        LLVMAddIncoming(phi, in, ends, 2);
        llvm_set_val(em, op->results[k], phi);
    }
    free(v[0]);
    free(v[1]);
}

/* Regions of at most this many ops (nested ones included) that are flat run without a
 * branch around them. */
enum { FLAT_OPS = 24 };

/* Whether r may run with no lane on: no loops, stores, atomics, adstack operations or
 * vector math (work or side effects that a branch should skip), and no loads at uniform
 * indices (the scalar program makes them only where a lane runs: a guard such as
 * `if i > 0 { a[k - 1] }` keeps an out-of-bounds one from happening). Loads at varying
 * indices are masked. */
static bool flat_region(const llvm_emitter *em, const ir_region *r) {
    ir_foreach_op(op, r) {
        switch (op->code) {
        case IR_FOR:
        case IR_WHILE:
        case IR_STORE:
        case IR_ADPUSH:
        case IR_ADPOP:
        case IR_CHECK: return false;
        case IR_LOAD:
            if (!any_index_varying(em, op))
                return false;
            break;
        default:
            if (ir_is_atomic(op->code) || llvm_simd_is_math_op(op->code))
                return false;
            break;
        }
        for (uint32_t i = 0; i < op->nregions; i++)
            if (!flat_region(em, op->regions[i]))
                return false;
    }
    return true;
}

/* An `if` on a varying condition: each region under its lanes, skipped by a branch when
 * no lane takes it, unless both regions are small and flat (straight-line code then,
 * fewer blocks to compile and no branch to mispredict). */
static void vif_masked(llvm_emitter *em, const ir_op *op) {
    uint32_t n = op->nresults;
    LLVMValueRef m0 = llvm_cpu(em)->mask, c = vec(em, op->operands[0]);
    LLVMValueRef masks[2] = {LLVMBuildAnd(em->b, m0, c, ""),
                             LLVMBuildAnd(em->b, m0, LLVMBuildNot(em->b, c, ""), "")};
    LLVMValueRef *res[2] = {tmp(n), tmp(n)};
    bool flat = llvm_count_ops(op->regions[0]) + llvm_count_ops(op->regions[1]) <= FLAT_OPS &&
                flat_region(em, op->regions[0]) && flat_region(em, op->regions[1]);
    for (int b = 0; b < 2 && flat; b++) {
        llvm_cpu(em)->mask = masks[b];
        const ir_op *t = vregion(em, op->regions[b]);
        for (uint32_t k = 0; k < n; k++)
            res[b][k] = vec(em, t->operands[k]);
        llvm_cpu(em)->mask = m0;
    }
    for (int b = 0; b < 2 && !flat; b++) {
        LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b),
                          run = llvm_new_block(em, b ? "else" : "then"),
                          join = llvm_new_block(em, b ? "endelse" : "endthen");
        LLVMBuildCondBr(em->b, any_on(em, masks[b]), run, join);
        LLVMPositionBuilderAtEnd(em->b, run);
        llvm_cpu(em)->mask = masks[b];
        const ir_op *t = vregion(em, op->regions[b]);
        LLVMValueRef *vals = tmp(n);
        for (uint32_t k = 0; k < n; k++)
            vals[k] = vec(em, t->operands[k]);
        LLVMBasicBlockRef end = LLVMGetInsertBlock(em->b);
        LLVMBuildBr(em->b, join);
        LLVMPositionBuilderAtEnd(em->b, join);
        for (uint32_t k = 0; k < n; k++) {
            res[b][k] = LLVMBuildPhi(em->b, LLVMTypeOf(vals[k]), "");
            LLVMValueRef in[2] = {vals[k], LLVMConstNull(LLVMTypeOf(vals[k]))};
            LLVMBasicBlockRef from[2] = {end, pre};
            LLVMAddIncoming(res[b][k], in, from, 2);
        }
        free(vals);
        llvm_cpu(em)->mask = m0;
    }
    for (uint32_t k = 0; k < n; k++)
        llvm_set_val(em, op->results[k], LLVMBuildSelect(em->b, c, res[0][k], res[1][k], ""));
    free(res[0]);
    free(res[1]);
}

static LLVMValueRef index_next(llvm_emitter *em, const kern_type *it, LLVMValueRef i) {
    if (!is_vec(i))
        return llvm_index_next(em, it, i);
    return LLVMBuildAdd(em->b, i, llvm_const_int(LLVMTypeOf(i), 1), "");
}

static void vfor(llvm_emitter *em, const ir_op *op) {
    bool early = (op->attr & IR_FOR_EARLY_EXIT) != 0, masked = masked_loop(em, op);
    uint32_t n = op->nresults;
    const ir_region *body = op->regions[0];
    const kern_type *it = op->operands[0]->type;
    bool vi = is_v(em, body->args[0]); /* a uniform index may run to a varying bound */
    LLVMValueRef lo = as_marked(em, op->operands[0], vi),
                 hi = as_marked(em, op->operands[1], vi || is_v(em, op->operands[1]));
    LLVMValueRef m0 = llvm_cpu(em)->mask;
    /* the initial values, before the branch: a uniform init of a varying carried value is
     * broadcast here, in the block the loop is entered from (in the header it would stand
     * among the phis, which LLVM's verifier rejects) */
    LLVMValueRef *carried = tmp(n), *next = tmp(n), *inits = tmp(n);
    for (uint32_t k = 0; k < n; k++)
        inits[k] = as_marked(em, op->operands[2 + k], is_v(em, op->results[k]));
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b);
    LLVMBasicBlockRef bb_head = llvm_new_block(em, "for.head"),
                      bb_body = llvm_new_block(em, "for.body"),
                      bb_exit = llvm_new_block(em, "for.exit");
    LLVMBuildBr(em->b, bb_head);

    LLVMPositionBuilderAtEnd(em->b, bb_head);
    LLVMValueRef iphi = LLVMBuildPhi(em->b, LLVMTypeOf(lo), "i");
    LLVMAddIncoming(iphi, &lo, &pre, 1);
    for (uint32_t k = 0; k < n; k++) {
        carried[k] = LLVMBuildPhi(em->b, LLVMTypeOf(inits[k]), "");
        LLVMAddIncoming(carried[k], &inits[k], &pre, 1);
    }
    LLVMValueRef act = NULL, a = NULL;
    if (masked) {
        act = LLVMBuildPhi(em->b, LLVMTypeOf(m0), "active");
        LLVMAddIncoming(act, &m0, &pre, 1);
    }
    LLVMValueRef inb =
        llvm_index_less(em, it, is_vec(hi) && !is_vec(iphi) ? splat(em, iphi) : iphi, hi);
    if (masked) {
        a = LLVMBuildAnd(em->b, act, is_vec(inb) ? inb : splat(em, inb), "");
        LLVMBuildCondBr(em->b, any_on(em, a), bb_body, bb_exit);
    } else {
        LLVMBuildCondBr(em->b, inb, bb_body, bb_exit);
    }

    LLVMPositionBuilderAtEnd(em->b, bb_body);
    if (masked)
        llvm_cpu(em)->mask = a;
    llvm_set_val(em, body->args[0], iphi);
    for (uint32_t k = 0; k < n; k++)
        llvm_set_val(em, body->args[1 + k], carried[k]);
    const ir_op *y = vregion(em, body);
    for (uint32_t k = 0; k < n; k++) {
        next[k] = as_marked(em, y->operands[(early ? 1 : 0) + k], is_v(em, op->results[k]));
        if (masked)
            next[k] = LLVMBuildSelect(em->b, a, next[k], carried[k], "");
    }
    LLVMValueRef inext = index_next(em, it, iphi);
    LLVMValueRef act_next = NULL;
    if (masked)
        act_next = early ? LLVMBuildAnd(em->b, a, vec(em, y->operands[0]), "") : a;
    LLVMBasicBlockRef body_end = LLVMGetInsertBlock(em->b);
    if (early && !masked)
        LLVMBuildCondBr(em->b, llvm_val(em, y->operands[0]), bb_head, bb_exit);
    else
        LLVMBuildBr(em->b, bb_head);
    LLVMAddIncoming(iphi, &inext, &body_end, 1);
    if (masked)
        LLVMAddIncoming(act, &act_next, &body_end, 1);
    for (uint32_t k = 0; k < n; k++)
        LLVMAddIncoming(carried[k], &next[k], &body_end, 1);
    llvm_cpu(em)->mask = m0;

    LLVMPositionBuilderAtEnd(em->b, bb_exit);
    for (uint32_t k = 0; k < n; k++) {
        if (!early || masked) {
            llvm_set_val(em, op->results[k], carried[k]); /* the header dominates the exit */
            continue;
        }
        LLVMValueRef phi = LLVMBuildPhi(em->b, LLVMTypeOf(carried[k]), "");
        LLVMValueRef in[2] = {carried[k], next[k]};
        LLVMBasicBlockRef from[2] = {bb_head, body_end};
        LLVMAddIncoming(phi, in, from, 2);
        llvm_set_val(em, op->results[k], phi);
    }
    free(carried);
    free(inits);
    free(next);
}

static void vwhile(llvm_emitter *em, const ir_op *op) {
    const ir_region *before = op->regions[0], *after = op->regions[1];
    uint32_t ninit = op->noperands, nres = op->nresults;
    bool masked = masked_loop(em, op);
    LLVMValueRef m0 = llvm_cpu(em)->mask;
    LLVMValueRef *carried = tmp(ninit), *res = tmp(nres), *res_next = tmp(nres);
    /* the inits before the loop: a uniform init of a varying value is broadcast there */
    for (uint32_t k = 0; k < ninit; k++)
        carried[k] = as_marked(em, op->operands[k], is_v(em, before->args[k]));
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b);
    LLVMBasicBlockRef bb_before = llvm_new_block(em, "while.before"),
                      bb_after = llvm_new_block(em, "while.after"),
                      bb_exit = llvm_new_block(em, "while.exit");
    LLVMBuildBr(em->b, bb_before);

    LLVMPositionBuilderAtEnd(em->b, bb_before);
    for (uint32_t k = 0; k < ninit; k++) {
        LLVMValueRef init = carried[k];
        carried[k] = LLVMBuildPhi(em->b, LLVMTypeOf(init), "");
        LLVMAddIncoming(carried[k], &init, &pre, 1);
        llvm_set_val(em, before->args[k], carried[k]);
    }
    LLVMValueRef act = NULL;
    if (masked) {
        act = LLVMBuildPhi(em->b, LLVMTypeOf(m0), "active");
        LLVMAddIncoming(act, &m0, &pre, 1);
        llvm_cpu(em)->mask = act;
        for (uint32_t k = 0; k < nres; k++) {
            em->vec_ops = true;
            LLVMTypeRef t = llvm_reg_type(em, op->results[k]->type);
            em->vec_ops = false;
            res[k] = LLVMBuildPhi(em->b, t, "");
            LLVMValueRef z = LLVMConstNull(t);
            LLVMAddIncoming(res[k], &z, &pre, 1);
        }
    }
    const ir_op *cond = vregion(em, before);
    LLVMValueRef go;
    if (masked) {
        LLVMValueRef c = vec(em, cond->operands[0]);
        LLVMValueRef cont = LLVMBuildAnd(em->b, llvm_cpu(em)->mask, c, "");
        LLVMValueRef stop = LLVMBuildAnd(em->b, llvm_cpu(em)->mask, LLVMBuildNot(em->b, c, ""), "");
        for (uint32_t k = 0; k < nres; k++) {
            LLVMValueRef f = vec(em, cond->operands[1 + k]);
            res_next[k] = LLVMBuildSelect(em->b, stop, f, res[k], "");
            llvm_set_val(em, after->args[k], f);
            llvm_set_val(em, op->results[k], res_next[k]);
        }
        go = any_on(em, cont);
        llvm_cpu(em)->mask = cont;
        LLVMBuildCondBr(em->b, go, bb_after, bb_exit);
        LLVMPositionBuilderAtEnd(em->b, bb_after);
        const ir_op *y = vregion(em, after);
        LLVMValueRef *next = tmp(ninit);
        for (uint32_t k = 0; k < ninit; k++)
            next[k] = as_marked(em, y->operands[k], true);
        LLVMBasicBlockRef after_end = LLVMGetInsertBlock(em->b);
        LLVMBuildBr(em->b, bb_before);
        for (uint32_t k = 0; k < ninit; k++)
            LLVMAddIncoming(carried[k], &next[k], &after_end, 1);
        LLVMAddIncoming(act, &cont, &after_end, 1);
        for (uint32_t k = 0; k < nres; k++)
            LLVMAddIncoming(res[k], &res_next[k], &after_end, 1);
        free(next);
    } else {
        for (uint32_t k = 0; k < nres; k++) {
            LLVMValueRef v = as_marked(em, cond->operands[1 + k], is_v(em, op->results[k]));
            llvm_set_val(em, after->args[k], v);
            llvm_set_val(em, op->results[k], v);
        }
        LLVMBuildCondBr(em->b, llvm_val(em, cond->operands[0]), bb_after, bb_exit);
        LLVMPositionBuilderAtEnd(em->b, bb_after);
        const ir_op *y = vregion(em, after);
        LLVMValueRef *next = tmp(ninit);
        for (uint32_t k = 0; k < ninit; k++)
            next[k] = as_marked(em, y->operands[k], is_v(em, before->args[k]));
        LLVMBasicBlockRef after_end = LLVMGetInsertBlock(em->b);
        LLVMBuildBr(em->b, bb_before);
        for (uint32_t k = 0; k < ninit; k++)
            LLVMAddIncoming(carried[k], &next[k], &after_end, 1);
        free(next);
    }
    llvm_cpu(em)->mask = m0;
    LLVMPositionBuilderAtEnd(em->b, bb_exit);
    free(carried);
    free(res);
    free(res_next);
}

static const ir_op *vregion(llvm_emitter *em, const ir_region *r) {
    ir_foreach_op(op, r) {
        switch (op->code) {
        case IR_YIELD:
        case IR_CONDITION: return op;
        case IR_IF:
            if (is_v(em, op->operands[0]))
                vif_masked(em, op);
            else
                vif_uniform(em, op);
            break;
        case IR_FOR: vfor(em, op); break;
        case IR_WHILE: vwhile(em, op); break;
        case IR_ADPUSH: vpush(em, op); break;
        case IR_ADPOP: vpop(em, op); break;
        case IR_LANEMAX: vlanemax(em, op); break;
        case IR_LOAD:
            if (is_v(em, op->results[0]))
                vload(em, op);
            else
                llvm_emit_simple_op(em, op);
            break;
        case IR_STORE:
            if (any_index_varying(em, op))
                vstore(em, op);
            else if (is_v(em, op->operands[op->noperands - 1]))
                scalarize(em, op); /* the last lane on stores */
            else
                llvm_emit_simple_op(em, op);
            break;
        case IR_PARALLEL:
        case IR_SERIAL: kern_unreachable("LLVM backend: a task inside a region");
        case IR_CHECK: vcheck(em, op); break;
        default:
            if (ir_is_atomic(op->code)) {
                if (!vatomic_sum(em, op))
                    scalarize(em, op);
            } else if (op->nresults && is_v(em, op->results[0])) {
                em->vec_ops = true;
                llvm_emit_simple_op(em, op);
                em->vec_ops = false;
            } else {
                llvm_emit_simple_op(em, op);
            }
            break;
        }
    }
    return NULL;
}

/* ---- the task ----------------------------------------------------------------------- */

/* Bodies of at most SIMD_TWICE_OPS ops (nested ones included), or SIMD_TWICE_FLAT_OPS
 * when they hold no loop, are emitted twice (full vectors and a masked last one). */
enum { SIMD_TWICE_OPS = 16, SIMD_TWICE_FLAT_OPS = 48 };

/* The lanes b, b + 1, ..., b + W - 1 (i64). */
static LLVMValueRef lanes_from(llvm_emitter *em, LLVMValueRef b) {
    return LLVMBuildAdd(em->b, splat(em, b), lane_ids(em, em->t_i64), "lanes");
}

/* Sets the index of dimension vd to `lanes` (<W x i64> numbers of its items) and the mask. */
static void set_items(llvm_emitter *em, const ir_region *body, uint32_t vd, const kern_type *it,
                      LLVMValueRef lanes, LLVMValueRef mask) {
    llvm_cpu(em)->mask = mask;
    LLVMValueRef idx = lanes;
    if (it->kind != TY_I64)
        idx = LLVMBuildTrunc(em->b, lanes, vty(em, em->t_i32), "");
    llvm_set_val(em, body->args[vd], idx);
}

/* The work items `lanes` of dimension vd under `mask`. */
static void emit_vector_items(llvm_emitter *em, const ir_region *body, uint32_t vd,
                              const kern_type *it, LLVMValueRef lanes, LLVMValueRef mask) {
    set_items(em, body, vd, it, lanes, mask);
    vad_reset(em);
    vregion(em, body);
}

/* ---- work items sorted by trip count ------------------------------------------------- */

/* A load of a trip count's computation (llvm_simd_sort_plan): the lanes of the mask whose
 * indices are in bounds load, the others give 0 (no error: the body's own load reports). */
static void key_load(llvm_emitter *em, const ir_op *op) {
    int p = param_index(em, op->operands[0]);
    const kern_type *at = op->operands[0]->type, *et = at->elem;
    LLVMValueRef in = llvm_cpu(em)->mask, ptrs;
    for (int d = 0; d < at->rank; d++) {
        const ir_value *iv = op->operands[1 + d];
        LLVMValueRef i = llvm_to_i64(em, vec(em, iv), iv->type);
        in = LLVMBuildAnd(
            em->b, in, LLVMBuildICmp(em->b, LLVMIntULT, i, splat(em, em->arr_shape[p][d]), ""), "");
    }
    LLVMValueRef ptr = access_addr(em, op, &ptrs);
    kern_assert(!ptr); /* no access is contiguous in a sorted task */
    LLVMTypeRef vt = vty(em, llvm_mem_type(em, et));
    LLVMValueRef r = gather(em, vt, ptrs, in, (unsigned)ty_size(et));
    if (et->kind == TY_BOOL)
        r = LLVMBuildICmp(em->b, LLVMIntNE, r, LLVMConstNull(vt), "");
    llvm_set_val(em, op->results[0], r);
}

/* The trip counts of s->loop in the lanes of the current mask, <W x i32> (0 in the others,
 * at most INT32_MAX): s->ops, then hi - lo. */
static LLVMValueRef emit_keys(llvm_emitter *em, const ir_trip_sort *s) {
    for (uint32_t i = 0; i < s->nops; i++) {
        const ir_op *op = s->ops[i];
        if (op->code == IR_LOAD) {
            key_load(em, op);
        } else {
            em->vec_ops = is_v(em, op->results[0]);
            llvm_emit_simple_op(em, op);
            em->vec_ops = false;
        }
    }
    const ir_value *lo = s->loop->operands[0], *hi = s->loop->operands[1];
    LLVMValueRef n = LLVMBuildSub(em->b, llvm_to_i64(em, vec(em, hi), hi->type),
                                  llvm_to_i64(em, vec(em, lo), lo->type), "");
    LLVMValueRef zero = LLVMConstNull(vty(em, em->t_i64));
    n = LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntSGT, n, zero, ""), n, zero, "");
    LLVMValueRef big = splat(em, LLVMConstInt(em->t_i64, INT32_MAX, 0));
    n = LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntSLT, n, big, ""), n, big, "");
    n = LLVMBuildSelect(em->b, llvm_cpu(em)->mask, n, zero, "");
    return LLVMBuildTrunc(em->b, n, vty(em, em->t_i32), "key");
}

/* A counted loop `for i = 0 .. n step` (i64) in the blocks it makes: returns i in the body's
 * block, where the caller emits; end_counted closes it. */
typedef struct counted {
    LLVMBasicBlockRef pre, head, exit;
    LLVMValueRef i;
    long long step;
} counted;

static LLVMValueRef begin_counted(llvm_emitter *em, counted *c, LLVMValueRef n, long long step,
                                  const char *name) {
    c->step = step;
    c->pre = LLVMGetInsertBlock(em->b);
    c->head = llvm_new_block(em, name);
    LLVMBasicBlockRef body = llvm_new_block(em, name);
    c->exit = llvm_new_block(em, name);
    LLVMBuildBr(em->b, c->head);
    LLVMPositionBuilderAtEnd(em->b, c->head);
    c->i = LLVMBuildPhi(em->b, LLVMTypeOf(n), "");
    LLVMValueRef zero = LLVMConstNull(LLVMTypeOf(n));
    LLVMAddIncoming(c->i, &zero, &c->pre, 1);
    LLVMBuildCondBr(em->b, LLVMBuildICmp(em->b, LLVMIntSLT, c->i, n, ""), body, c->exit);
    LLVMPositionBuilderAtEnd(em->b, body);
    return c->i;
}

static void end_counted(llvm_emitter *em, counted *c) {
    LLVMValueRef next = LLVMBuildAdd(em->b, c->i, llvm_const_int(LLVMTypeOf(c->i), c->step), "");
    LLVMBasicBlockRef end = LLVMGetInsertBlock(em->b);
    LLVMBuildBr(em->b, c->head);
    LLVMAddIncoming(c->i, &next, &end, 1);
    LLVMPositionBuilderAtEnd(em->b, c->exit);
}

static LLVMValueRef elem_ptr(llvm_emitter *em, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef i) {
    return LLVMBuildInBoundsGEP2(em->b, t, base, &i, 1, "");
}

enum { SORT_BUCKET_BITS = 5 };

/* The window's items from wb, nwin of them, in order[] by their keys[] (a counting sort on
 * the top SORT_BUCKET_BITS bits of the largest key's width: counts within a bucket differ
 * by less than a 32nd of the largest). */
static void sort_window(llvm_emitter *em, LLVMValueRef keys, LLVMValueRef order, LLVMValueRef hist,
                        LLVMValueRef wb, LLVMValueRef nwin, LLVMValueRef kmax) {
    LLVMTypeRef i32 = em->t_i32, i64 = em->t_i64;
    LLVMValueRef args[2] = {kmax, LLVMConstInt(em->t_i1, 0, 0)};
    LLVMValueRef lz = call_intr(em, "llvm.ctlz", &i32, 1, args, 2);
    LLVMValueRef bits = LLVMBuildSub(em->b, LLVMConstInt(i32, 32 - SORT_BUCKET_BITS, 0), lz, "");
    LLVMValueRef shift =
        LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntSGT, bits, LLVMConstNull(i32), ""), bits,
                        LLVMConstNull(i32), "shift");
    unsigned nb = 1u << SORT_BUCKET_BITS;
    LLVMBuildMemSet(em->b, hist, LLVMConstInt(LLVMInt8TypeInContext(em->ctx), 0, 0),
                    LLVMConstInt(i64, nb * 4, 0), 4);
    counted c;
    /* counts per bucket */
    LLVMValueRef p = begin_counted(em, &c, nwin, 1, "sort.count");
    LLVMValueRef b =
        LLVMBuildLShr(em->b, LLVMBuildLoad2(em->b, i32, elem_ptr(em, i32, keys, p), ""), shift, "");
    LLVMValueRef hp = elem_ptr(em, i32, hist, LLVMBuildZExt(em->b, b, i64, ""));
    LLVMBuildStore(
        em->b, LLVMBuildAdd(em->b, LLVMBuildLoad2(em->b, i32, hp, ""), LLVMConstInt(i32, 1, 0), ""),
        hp);
    end_counted(em, &c);
    /* each bucket's first position */
    LLVMValueRef sum = LLVMConstNull(i32);
    for (unsigned k = 0; k < nb; k++) {
        LLVMValueRef q = elem_ptr(em, i32, hist, LLVMConstInt(i64, k, 0));
        LLVMValueRef cnt = LLVMBuildLoad2(em->b, i32, q, "");
        LLVMBuildStore(em->b, sum, q);
        sum = LLVMBuildAdd(em->b, sum, cnt, "");
    }
    /* the items, in bucket order */
    p = begin_counted(em, &c, nwin, 1, "sort.place");
    b = LLVMBuildLShr(em->b, LLVMBuildLoad2(em->b, i32, elem_ptr(em, i32, keys, p), ""), shift, "");
    hp = elem_ptr(em, i32, hist, LLVMBuildZExt(em->b, b, i64, ""));
    LLVMValueRef at = LLVMBuildLoad2(em->b, i32, hp, "");
    LLVMBuildStore(em->b, LLVMBuildAdd(em->b, at, LLVMConstInt(i32, 1, 0), ""), hp);
    LLVMBuildStore(em->b, LLVMBuildAdd(em->b, wb, p, ""),
                   elem_ptr(em, i64, order, LLVMBuildZExt(em->b, at, i64, "")));
    end_counted(em, &c);
}

/* The work items from `from` to `to` of dimension vd, sorted by trip count in windows of
 * SORT_VECTORS vectors: each window's trip counts are computed first (emit_keys), the
 * items counting-sorted by them, then run W at a time in that order, so that a vector's
 * lanes run similar counts (a vector runs as long as its longest lane; with one item in 16
 * running 16 times longer than the others, nearly every unsorted vector of 64 lanes holds
 * one). Items may run in any order (docs/reference.md); no access is contiguous. */
static void emit_sorted_loop(llvm_emitter *em, const ir_op *task, uint32_t vd, LLVMValueRef from,
                             LLVMValueRef to, const ir_trip_sort *s) {
    const ir_region *body = task->regions[0];
    const kern_type *it = task->operands[2 * vd]->type;
    unsigned w = em->simd_w, win = SORT_VECTORS * w;
    LLVMTypeRef i32 = em->t_i32, i64 = em->t_i64;
    LLVMBuilderRef eb = llvm_entry_builder(em);
    LLVMValueRef keys = LLVMBuildAlloca(eb, LLVMArrayType(i32, win), "sort.keys");
    LLVMValueRef order = LLVMBuildAlloca(eb, LLVMArrayType(i64, win), "sort.order");
    LLVMValueRef hist =
        LLVMBuildAlloca(eb, LLVMArrayType(i32, 1u << SORT_BUCKET_BITS), "sort.hist");
    LLVMValueRef kmax = LLVMBuildAlloca(eb, i32, "sort.kmax");
    LLVMSetAlignment(keys, 64);
    LLVMSetAlignment(order, 64);
    LLVMDisposeBuilder(eb);
    LLVMValueRef f64 = llvm_to_i64(em, from, it), t64 = llvm_to_i64(em, to, it);

    counted wl;
    LLVMValueRef wb = LLVMBuildAdd(
        em->b, f64, begin_counted(em, &wl, LLVMBuildSub(em->b, t64, f64, ""), win, "sort.window"),
        "window");
    LLVMValueRef rest = LLVMBuildSub(em->b, t64, wb, "");
    LLVMValueRef wc = LLVMConstInt(i64, win, 0);
    LLVMValueRef nwin =
        LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntSLT, rest, wc, ""), rest, wc, "nwin");

    /* the keys, W at a time, and the largest */
    LLVMBuildStore(em->b, LLVMConstNull(i32), kmax);
    counted c;
    LLVMValueRef j = begin_counted(em, &c, nwin, w, "sort.key");
    LLVMValueRef lanes = lanes_from(em, LLVMBuildAdd(em->b, wb, j, ""));
    set_items(em, body, vd, it, lanes,
              LLVMBuildICmp(em->b, LLVMIntSLT, lanes, splat(em, t64), "mask"));
    LLVMValueRef k = emit_keys(em, s);
    LLVMValueRef st = LLVMBuildStore(em->b, k, elem_ptr(em, i32, keys, j));
    LLVMSetAlignment(st, 4);
    LLVMTypeRef kt = LLVMTypeOf(k);
    LLVMValueRef km = call_intr(em, "llvm.vector.reduce.umax", &kt, 1, &k, 1);
    LLVMValueRef old = LLVMBuildLoad2(em->b, i32, kmax, "");
    LLVMBuildStore(
        em->b, LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntUGT, km, old, ""), km, old, ""),
        kmax);
    end_counted(em, &c);

    sort_window(em, keys, order, hist, wb, nwin, LLVMBuildLoad2(em->b, i32, kmax, ""));

    /* the items, W at a time in sorted order; lanes past the window's end are off (and
     * hold the window's first item) */
    j = begin_counted(em, &c, nwin, w, "sort.items");
    LLVMValueRef ld = LLVMBuildLoad2(em->b, vty(em, i64), elem_ptr(em, i64, order, j), "");
    LLVMSetAlignment(ld, 8);
    LLVMValueRef on = LLVMBuildICmp(em->b, LLVMIntSLT, lanes_from(em, j), splat(em, nwin), "");
    emit_vector_items(em, body, vd, it, LLVMBuildSelect(em->b, on, ld, splat(em, wb), ""), on);
    end_counted(em, &c);

    end_counted(em, &wl);
}

/* The work items of the innermost dimension vd from `from` to `to` (its index type), W
 * at a time, under the mask of the items that exist. Small bodies are emitted twice:
 * full vectors with an all-on mask (LLVM makes their masked accesses plain ones), then at
 * most one masked vector of the last items; larger ones once, under the mask, where a
 * contiguous store checks at run time whether every lane is on (masked stores are slow
 * on some CPUs). In a straight-line body of up to 48 ops the masks cost about 20% (the
 * mass-spring K); in a loop they are small beside the loop's work, and emitting a large
 * body twice doubles the JIT's time. */
static void emit_vector_loop(llvm_emitter *em, const ir_op *task, uint32_t vd, LLVMValueRef from,
                             LLVMValueRef to) {
    const ir_region *body = task->regions[0];
    const kern_type *it = task->operands[2 * vd]->type;
    unsigned w = em->simd_w;
    uint32_t ops = llvm_count_ops(body);
    bool twice = ops <= SIMD_TWICE_OPS || (ops <= SIMD_TWICE_FLAT_OPS && !ir_region_has_loop(body));
    LLVMValueRef f64 = llvm_to_i64(em, from, it), t64 = llvm_to_i64(em, to, it);
    LLVMValueRef wc = LLVMConstInt(em->t_i64, w, 0);
    /* twice: a full vector starts at <= last; once: every vector starts below to */
    LLVMValueRef last = twice ? LLVMBuildSub(em->b, t64, wc, "") : NULL;
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b), head = llvm_new_block(em, "simd.head"),
                      bb = llvm_new_block(em, "simd.body"), tail = llvm_new_block(em, "simd.tail"),
                      exit = llvm_new_block(em, "simd.exit");
    LLVMBuildBr(em->b, head);
    LLVMPositionBuilderAtEnd(em->b, head);
    LLVMValueRef b = LLVMBuildPhi(em->b, em->t_i64, "item");
    LLVMAddIncoming(b, &f64, &pre, 1);
    LLVMBuildCondBr(em->b,
                    twice ? LLVMBuildICmp(em->b, LLVMIntSLE, b, last, "")
                          : LLVMBuildICmp(em->b, LLVMIntSLT, b, t64, ""),
                    bb, twice ? tail : exit);

    LLVMPositionBuilderAtEnd(em->b, bb);
    LLVMValueRef mask;
    if (twice) {
        LLVMValueRef on[64];
        for (unsigned l = 0; l < w; l++)
            on[l] = LLVMConstInt(em->t_i1, 1, 0);
        mask = LLVMConstVector(on, w);
    } else {
        LLVMValueRef lanes = LLVMBuildAdd(em->b, splat(em, b), lane_ids(em, em->t_i64), "");
        mask = LLVMBuildICmp(em->b, LLVMIntSLT, lanes, splat(em, t64), "mask");
    }
    emit_vector_items(em, body, vd, it, lanes_from(em, b), mask);
    LLVMValueRef b1 = LLVMBuildAdd(em->b, b, wc, "");
    LLVMBasicBlockRef end = LLVMGetInsertBlock(em->b);
    LLVMBuildBr(em->b, head);
    LLVMAddIncoming(b, &b1, &end, 1);

    LLVMPositionBuilderAtEnd(em->b, tail);
    if (twice) {
        LLVMBasicBlockRef rest = llvm_new_block(em, "simd.rest");
        LLVMBuildCondBr(em->b, LLVMBuildICmp(em->b, LLVMIntSLT, b, t64, ""), rest, exit);
        LLVMPositionBuilderAtEnd(em->b, rest);
        LLVMValueRef lanes = lanes_from(em, b);
        emit_vector_items(em, body, vd, it, lanes,
                          LLVMBuildICmp(em->b, LLVMIntSLT, lanes, splat(em, t64), "mask"));
    }
    LLVMBuildBr(em->b, exit);
    LLVMPositionBuilderAtEnd(em->b, exit);
}

/* The scalar loop over dimension d of the task (the outer dimensions), from `from` to
 * `to`; the innermost dimension is the vector loop. */
static void emit_outer_dim(llvm_emitter *em, const ir_op *task, uint32_t d, LLVMValueRef from,
                           LLVMValueRef to, const ir_trip_sort *sort) {
    const ir_region *body = task->regions[0];
    uint32_t vd = body->nargs - 1;
    if (d == vd) {
        if (sort)
            emit_sorted_loop(em, task, vd, from, to, sort);
        else
            emit_vector_loop(em, task, vd, from, to);
        return;
    }
    const kern_type *it = task->operands[2 * d]->type;
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b), head = llvm_new_block(em, "par.head"),
                      bb = llvm_new_block(em, "par.body"), exit = llvm_new_block(em, "par.exit");
    LLVMBuildBr(em->b, head);
    LLVMPositionBuilderAtEnd(em->b, head);
    LLVMValueRef i = LLVMBuildPhi(em->b, LLVMTypeOf(from), "idx");
    LLVMAddIncoming(i, &from, &pre, 1);
    LLVMBuildCondBr(em->b, llvm_index_less(em, it, i, to), bb, exit);
    LLVMPositionBuilderAtEnd(em->b, bb);
    llvm_set_val(em, body->args[d], i);
    emit_outer_dim(em, task, d + 1, llvm_val(em, task->operands[2 * d + 2]),
                   llvm_val(em, task->operands[2 * d + 3]), sort);
    LLVMValueRef next = llvm_index_next(em, it, i);
    LLVMBasicBlockRef end = LLVMGetInsertBlock(em->b);
    LLVMBuildBr(em->b, head);
    LLVMAddIncoming(i, &next, &end, 1);
    LLVMPositionBuilderAtEnd(em->b, exit);
}

void llvm_simd_emit_task(llvm_emitter *em, const ir_op *task, unsigned w, LLVMValueRef from,
                         LLVMValueRef to) {
    const ir_region *body = task->regions[0];
    const ir_kernel *k = em->kernel;
    em->simd_w = w;
    llvm_cpu(em)->sink = NULL;
    const bool *ad_vary = llvm_cpu(em)->div.ad_varying; /* llvm_simd_lanes analyzed the task */
    llvm_find_uses(em, body);

    /* per-lane depth counters: vector allocas at the top of the entry block */
    if (k->nadstacks) {
        LLVMBuilderRef eb = llvm_entry_builder(em);
        for (uint32_t s = 0; s < k->nadstacks; s++)
            if (ad_vary[s])
                em->ad_depth[s] = LLVMBuildAlloca(eb, vty(em, em->t_i64), "ad.depths");
        LLVMDisposeBuilder(eb);
    }

    /* sorted by trip count: the lanes hold items out of order, so no access is contiguous */
    ir_trip_sort sort;
    bool sorted = llvm_simd_sort_plan(em, body, &sort);
    if (sorted)
        ir_valset_clear(&llvm_cpu(em)->div.linear);
    emit_outer_dim(em, task, 0, from, to, sorted ? &sort : NULL);

    em->simd_w = 0;
    llvm_cpu(em)->sink = NULL;
    llvm_cpu(em)->mask = NULL;
}
