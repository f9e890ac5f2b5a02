/* llvm_adstack.c - the adstacks of gradient kernels: per-work-item typed stacks in the
 * adstack heap (runtime/abi.h for the CPU, docs/gpu-abi.md for GPUs).
 *
 * Per adstack s of the kernel, a task function keeps
 *   depth[s]  an i64 alloca of the entry block (mem2reg turns it into SSA values), set to
 *             0 at the start of every work item (each index of a parallel task's ranges,
 *             or the serial body);
 *   base[s], cap[s], step
 *             set by the target's ABI: the address of this thread's entry 0, the
 *             capacity in entries, and the distance in entries from one entry to the next
 *             (1 in the CPU's per-thread slices; the number of slots in the GPUs'
 *             slot-major heaps).
 *
 *   adpush v:  if (depth u< cap) base[depth * step] = v;    (the likely path)
 *              else kern.adstack_overflow(err, line, col, cap, depth + 1);
 *              depth += 1
 *   adpop:     depth -= 1; v = depth u< cap ? base[depth * step] : 0
 * Entries have the memory type of the stack (bool is one byte). The check is emitted in
 * every build: an overflow never writes past the capacity and is never silent.
 *
 * kern.adstack_overflow (internal, cold, noinline): cmpxchg err->code 0 ->
 * KERN_DEVERR_ADSTACK; the winner writes line, col and b = cap; then, whether it won or
 * the record already held an adstack overflow, atomicrmw max err->a, depth. So the
 * record ends with the first overflow's location and capacity and the deepest depth any
 * thread reached; a record holding another error is left alone. */
#include <stddef.h>
#include <string.h>

#include "../../runtime/abi.h"
#include "llvm_internal.h"

/* Marks the conditional branch br as taking its first successor almost always. */
void llvm_likely_first(llvm_emitter *em, LLVMValueRef br) {
    LLVMMetadataRef md[3] = {
        LLVMMDStringInContext2(em->ctx, "branch_weights", 14),
        LLVMValueAsMetadata(LLVMConstInt(em->t_i32, 2000, 0)),
        LLVMValueAsMetadata(LLVMConstInt(em->t_i32, 1, 0)),
    };
    LLVMValueRef node = LLVMMetadataAsValue(em->ctx, LLVMMDNodeInContext2(em->ctx, md, 3));
    LLVMSetMetadata(br, LLVMGetMDKindIDInContext(em->ctx, "prof", 4), node);
}

static void add_fn_attr(llvm_emitter *em, LLVMValueRef fn, const char *name) {
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(em->ctx, kind, 0));
}

static LLVMValueRef record_field(LLVMBuilderRef b, llvm_emitter *em, LLVMValueRef err, size_t off) {
    LLVMValueRef o = LLVMConstInt(em->t_i64, off, 0);
    return LLVMBuildInBoundsGEP2(b, em->t_i8, err, &o, 1, "");
}

/* void kern.adstack_overflow(ptr err, i32 line, i32 col, i64 cap, i64 depth) */
LLVMValueRef llvm_adstack_overflow_fn(llvm_emitter *em) {
    LLVMValueRef fn = LLVMGetNamedFunction(em->mod, "kern.adstack_overflow");
    if (fn)
        return fn;
    LLVMTypeRef params[5] = {em->t_ptr, em->t_i32, em->t_i32, em->t_i64, em->t_i64};
    fn = LLVMAddFunction(em->mod, "kern.adstack_overflow",
                         LLVMFunctionType(em->t_void, params, 5, 0));
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    add_fn_attr(em, fn, "nounwind");
    add_fn_attr(em, fn, "noinline");
    add_fn_attr(em, fn, "cold");
    LLVMBuilderRef b = LLVMCreateBuilderInContext(em->ctx);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(em->ctx, fn, "entry"),
                      first = LLVMAppendBasicBlockInContext(em->ctx, fn, "first"),
                      seen = LLVMAppendBasicBlockInContext(em->ctx, fn, "seen"),
                      max = LLVMAppendBasicBlockInContext(em->ctx, fn, "max"),
                      done = LLVMAppendBasicBlockInContext(em->ctx, fn, "done");
    LLVMValueRef err = LLVMGetParam(fn, 0);
    LLVMValueRef code = LLVMConstInt(em->t_i32, KERN_DEVERR_ADSTACK, 0);

    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef x = LLVMBuildAtomicCmpXchg(b, err, LLVMConstInt(em->t_i32, 0, 0), code,
                                            LLVMAtomicOrderingSequentiallyConsistent,
                                            LLVMAtomicOrderingSequentiallyConsistent, 0);
    LLVMSetAlignment(x, 4);
    LLVMBuildCondBr(b, LLVMBuildExtractValue(b, x, 1, ""), first, seen);

    LLVMPositionBuilderAtEnd(b, first);
    LLVMValueRef st[3] = {
        LLVMBuildStore(b, LLVMGetParam(fn, 1),
                       record_field(b, em, err, offsetof(kern_err_record, line))),
        LLVMBuildStore(b, LLVMGetParam(fn, 2),
                       record_field(b, em, err, offsetof(kern_err_record, col))),
        LLVMBuildStore(b, LLVMGetParam(fn, 3),
                       record_field(b, em, err, offsetof(kern_err_record, b))),
    };
    LLVMSetAlignment(st[0], 4);
    LLVMSetAlignment(st[1], 4);
    LLVMSetAlignment(st[2], 8);
    LLVMBuildBr(b, max);

    LLVMPositionBuilderAtEnd(b, seen); /* lost: raise a only if the record is an overflow */
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildExtractValue(b, x, 0, ""), code, ""),
                    max, done);

    LLVMPositionBuilderAtEnd(b, max);
    LLVMValueRef r = LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpMax,
                                        record_field(b, em, err, offsetof(kern_err_record, a)),
                                        LLVMGetParam(fn, 4), LLVMAtomicOrderingMonotonic, 0);
    LLVMSetAlignment(r, 8);
    LLVMBuildBr(b, done);

    LLVMPositionBuilderAtEnd(b, done);
    LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);
    return fn;
}

void llvm_adstack_begin(llvm_emitter *em) {
    const ir_kernel *k = em->kernel;
    em->ad_live = k->nadstacks > 0;
    em->ad_step = NULL;
    for (uint32_t s = 0; s < k->nadstacks; s++) {
        em->ad_depth[s] = LLVMBuildAlloca(em->b, em->t_i64, "ad.depth");
        em->ad_ptr[s] = LLVMBuildAlloca(em->b, em->t_ptr, "ad.ptr");
        LLVMBuildStore(em->b, LLVMConstInt(em->t_i64, 0, 0), em->ad_depth[s]);
    }
}

/* The address of entry d of stack s of this work item. */
static LLVMValueRef entry_ptr(llvm_emitter *em, uint32_t s, LLVMTypeRef mt, LLVMValueRef d) {
    LLVMValueRef i = em->ad_step ? LLVMBuildMul(em->b, d, em->ad_step, "") : d;
    return LLVMBuildInBoundsGEP2(em->b, mt, em->ad_base[s], &i, 1, "");
}

/* The address one entry after (dir 1) or before (dir -1) entry address p of stack s. */
static LLVMValueRef entry_step(llvm_emitter *em, uint32_t s, LLVMValueRef p, int dir) {
    LLVMTypeRef mt = llvm_mem_type(em, em->kernel->adstacks[s].type);
    LLVMValueRef i = em->ad_step ? em->ad_step : LLVMConstInt(em->t_i64, 1, 0);
    if (dir < 0)
        i = LLVMBuildNeg(em->b, i, "");
    return LLVMBuildInBoundsGEP2(em->b, mt, p, &i, 1, "");
}

void llvm_adstack_enter_proven(llvm_emitter *em, uint32_t s) {
    LLVMTypeRef mt = llvm_mem_type(em, em->kernel->adstacks[s].type);
    LLVMValueRef d = LLVMBuildLoad2(em->b, em->t_i64, em->ad_depth[s], "ad.d");
    LLVMBuildStore(em->b, entry_ptr(em, s, mt, d), em->ad_ptr[s]);
}

void llvm_adstack_end(llvm_emitter *em) { em->ad_live = false; }

void llvm_adstack_reset(llvm_emitter *em) {
    if (!em->ad_live)
        return;
    for (uint32_t s = 0; s < em->kernel->nadstacks; s++)
        LLVMBuildStore(em->b, LLVMConstInt(em->t_i64, 0, 0), em->ad_depth[s]);
}

static uint32_t stack_of(llvm_emitter *em, const ir_op *op) {
    if (!em->ad_live)
        kern_unreachable("LLVM backend: an adstack op outside a task of a kernel with adstacks");
    kern_assert(op->imm.i >= 0 && (uint64_t)op->imm.i < em->kernel->nadstacks);
    return (uint32_t)op->imm.i;
}

void llvm_emit_adpush(llvm_emitter *em, const ir_op *op) {
    uint32_t s = stack_of(em, op);
    const ir_adstack *st = &em->kernel->adstacks[s];
    LLVMTypeRef mt = llvm_mem_type(em, st->type);
    LLVMValueRef v = llvm_val(em, op->operands[0]);
    if (st->type->kind == TY_BOOL)
        v = LLVMBuildZExt(em->b, v, mt, "");
    LLVMValueRef d = LLVMBuildLoad2(em->b, em->t_i64, em->ad_depth[s], "ad.d");
    LLVMValueRef d1 = LLVMBuildAdd(em->b, d, LLVMConstInt(em->t_i64, 1, 0), "");
    if (llvm_proven(em, op)) { /* the loop's test found the entry within the capacity */
        LLVMValueRef p = LLVMBuildLoad2(em->b, em->t_ptr, em->ad_ptr[s], "ad.p");
        LLVMSetAlignment(LLVMBuildStore(em->b, v, p), (unsigned)ty_size(st->type));
        LLVMBuildStore(em->b, entry_step(em, s, p, 1), em->ad_ptr[s]);
        LLVMBuildStore(em->b, d1, em->ad_depth[s]);
        return;
    }
    LLVMBasicBlockRef bb_store = llvm_new_block(em, "ad.push"),
                      bb_ovf = llvm_new_block(em, "ad.overflow"),
                      bb_cont = llvm_new_block(em, "ad.pushed");
    LLVMValueRef ok = LLVMBuildICmp(em->b, LLVMIntULT, d, em->ad_cap[s], "");
    llvm_likely_first(em, LLVMBuildCondBr(em->b, ok, bb_store, bb_ovf));

    LLVMPositionBuilderAtEnd(em->b, bb_store);
    LLVMValueRef p = entry_ptr(em, s, mt, d);
    LLVMSetAlignment(LLVMBuildStore(em->b, v, p), (unsigned)ty_size(st->type));
    LLVMBuildBr(em->b, bb_cont);

    LLVMPositionBuilderAtEnd(em->b, bb_ovf);
    kern_loc loc = op->loc.line ? op->loc : st->loc;
    LLVMValueRef fn = llvm_adstack_overflow_fn(em);
    LLVMValueRef args[5] = {em->err, LLVMConstInt(em->t_i32, loc.line, 0),
                            LLVMConstInt(em->t_i32, loc.col, 0), em->ad_cap[s], d1};
    LLVMBuildCall2(em->b, LLVMGlobalGetValueType(fn), fn, args, 5, "");
    LLVMBuildBr(em->b, bb_cont);

    LLVMPositionBuilderAtEnd(em->b, bb_cont);
    LLVMBuildStore(em->b, d1, em->ad_depth[s]);
}

void llvm_emit_adpop(llvm_emitter *em, const ir_op *op) {
    uint32_t s = stack_of(em, op);
    const ir_adstack *st = &em->kernel->adstacks[s];
    LLVMTypeRef mt = llvm_mem_type(em, st->type);
    LLVMValueRef d = LLVMBuildLoad2(em->b, em->t_i64, em->ad_depth[s], "ad.d");
    LLVMValueRef d1 = LLVMBuildSub(em->b, d, LLVMConstInt(em->t_i64, 1, 0), "");
    LLVMBuildStore(em->b, d1, em->ad_depth[s]);
    if (llvm_proven(em, op)) { /* the loop's test found the entry within the capacity */
        LLVMValueRef p = entry_step(
            em, s, LLVMBuildLoad2(em->b, em->t_ptr, em->ad_ptr[s], "ad.p"), -1);
        LLVMBuildStore(em->b, p, em->ad_ptr[s]);
        LLVMValueRef v = LLVMBuildLoad2(em->b, mt, p, "");
        LLVMSetAlignment(v, (unsigned)ty_size(st->type));
        if (st->type->kind == TY_BOOL)
            v = LLVMBuildICmp(em->b, LLVMIntNE, v, LLVMConstNull(mt), "");
        llvm_set_val(em, op->results[0], v);
        return;
    }
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b), bb_load = llvm_new_block(em, "ad.pop"),
                      bb_cont = llvm_new_block(em, "ad.popped");
    /* unsigned: an unbalanced pop (depth -1) reads nothing either */
    LLVMValueRef ok = LLVMBuildICmp(em->b, LLVMIntULT, d1, em->ad_cap[s], "");
    llvm_likely_first(em, LLVMBuildCondBr(em->b, ok, bb_load, bb_cont));

    LLVMPositionBuilderAtEnd(em->b, bb_load);
    LLVMValueRef p = entry_ptr(em, s, mt, d1);
    LLVMValueRef v = LLVMBuildLoad2(em->b, mt, p, "");
    LLVMSetAlignment(v, (unsigned)ty_size(st->type));
    LLVMBuildBr(em->b, bb_cont);

    LLVMPositionBuilderAtEnd(em->b, bb_cont);
    LLVMValueRef phi = LLVMBuildPhi(em->b, mt, "");
    LLVMValueRef in[2] = {v, LLVMConstNull(mt)};
    LLVMBasicBlockRef from[2] = {bb_load, pre};
    LLVMAddIncoming(phi, in, from, 2);
    LLVMValueRef r = phi;
    if (st->type->kind == TY_BOOL)
        r = LLVMBuildICmp(em->b, LLVMIntNE, phi, LLVMConstNull(mt), "");
    llvm_set_val(em, op->results[0], r);
}
