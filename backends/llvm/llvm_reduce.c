/* llvm_reduce.c - atomic adds into one element, accumulated per call of a task function.
 *
 * In a parallel task, `s[0] += v` (an atomic add or sub whose old value is unused) at
 * indices that are uniform (the same for every work item: parameters, top-level values
 * and constants)
 * is a reduction. Every work item of a chunk hitting the element with an atomic is slow
 * (on x86 a float atomic add is a compare-exchange loop) and, from several threads, a
 * fight over one cache line. When the task reads or writes the array in no other way, the
 * task function instead accumulates in a local (an entry-block alloca that SROA turns into
 * a register) and adds the sum to the element with one atomic at the end of the call.
 * That covers the adjoints of scalar parameters in gradient kernels (one add per work
 * item into s.grad[0]) and user reductions (sum of squares, losses).
 *
 * The element receives the same total; float additions are grouped per chunk instead of
 * one by one (docs/backend-cpu.md; docs/reference.md section 7 leaves the order of atomics open).
 * Debug builds keep the per-item atomics, so a bounds error is reported where it happens.
 * Integer adds are exact either way. */
#include <stdlib.h>

#include "llvm_internal.h"

/* The same value for every work item, and available where the task function ends: a
 * parameter, a top-level value (computed at the function's entry), or a constant (an
 * LLVM constant wherever it is emitted). */
static bool is_uniform(const llvm_emitter *em, const ir_value *v) {
    const ir_op *d = v->def;
    if (!d)
        return v->region == em->kernel->body;
    return d->parent == em->kernel->body || d->code == IR_CONST;
}

static bool used_in(const ir_region *r, const ir_value *v) {
    ir_foreach_op(op, r) {
        for (uint32_t i = 0; i < op->noperands; i++)
            if (op->operands[i] == v)
                return true;
        for (uint32_t i = 0; i < op->nregions; i++)
            if (used_in(op->regions[i], v))
                return true;
    }
    return false;
}

/* An atomic add/sub of the task body that may accumulate locally, ignoring the other
 * accesses of its array. */
static bool reducible_shape(const llvm_emitter *em, const ir_op *op, const ir_region *body) {
    if (op->code != IR_ATOMIC_ADD && op->code != IR_ATOMIC_SUB)
        return false;
    if (op->operands[0]->type->elem->kind == TY_BOOL)
        return false;
    for (uint32_t i = 1; i + 1 < op->noperands; i++)
        if (!is_uniform(em, op->operands[i]))
            return false;
    return !used_in(body, op->results[0]);
}

static bool is_access(ir_opcode c) {
    return c == IR_LOAD || c == IR_STORE || c == IR_ATOMIC_ADD || c == IR_ATOMIC_SUB ||
           c == IR_ATOMIC_MIN || c == IR_ATOMIC_MAX || c == IR_ATOMIC_XCHG;
}

/* Whether every access of `array` in r is reducible. */
static bool only_reductions(const llvm_emitter *em, const ir_region *r, const ir_value *array,
                            const ir_region *body) {
    ir_foreach_op(op, r) {
        if (is_access(op->code) && op->operands[0] == array && !reducible_shape(em, op, body))
            return false;
        for (uint32_t i = 0; i < op->nregions; i++)
            if (!only_reductions(em, op->regions[i], array, body))
                return false;
    }
    return true;
}

static void collect(llvm_emitter *em, const ir_region *r, const ir_region *body) {
    ir_foreach_op(op, r) {
        for (uint32_t i = 0; i < op->nregions; i++)
            collect(em, op->regions[i], body);
        if (!reducible_shape(em, op, body) || !only_reductions(em, body, op->operands[0], body))
            continue;
        if (em->nred == em->capred) {
            em->capred = em->capred ? 2 * em->capred : 8;
            em->red_ops = realloc(em->red_ops, em->capred * sizeof *em->red_ops);
            em->red_acc = realloc(em->red_acc, em->capred * sizeof *em->red_acc);
            if (!em->red_ops || !em->red_acc)
                kern_oom(em->capred * sizeof(void *));
        }
        em->red_ops[em->nred++] = op;
    }
}

void llvm_reduce_begin(llvm_emitter *em, const ir_op *task) {
    em->nred = 0;
    if (task->code != IR_PARALLEL || em->checks)
        return;
    collect(em, task->regions[0], task->regions[0]);
    /* allocas at the top of the entry block, where SROA promotes them */
    LLVMBuilderRef eb = LLVMCreateBuilderInContext(em->ctx);
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(em->fn);
    LLVMValueRef first = LLVMGetFirstInstruction(entry);
    if (first)
        LLVMPositionBuilderBefore(eb, first);
    else
        LLVMPositionBuilderAtEnd(eb, entry);
    for (uint32_t i = 0; i < em->nred; i++) {
        LLVMTypeRef t = llvm_mem_type(em, em->red_ops[i]->operands[0]->type->elem);
        em->red_acc[i] = LLVMBuildAlloca(eb, t, "red");
        LLVMBuildStore(em->b, LLVMConstNull(t), em->red_acc[i]);
    }
    LLVMDisposeBuilder(eb);
}

bool llvm_reduce_emit(llvm_emitter *em, const ir_op *op) {
    for (uint32_t i = 0; i < em->nred; i++) {
        if (em->red_ops[i] != op)
            continue;
        const kern_type *et = op->operands[0]->type->elem;
        LLVMTypeRef t = llvm_mem_type(em, et);
        LLVMValueRef acc = LLVMBuildLoad2(em->b, t, em->red_acc[i], "");
        LLVMValueRef v = llvm_val(em, op->operands[op->noperands - 1]);
        LLVMValueRef sum =
            ty_is_float(et) ? LLVMBuildFAdd(em->b, acc, v, "") : LLVMBuildAdd(em->b, acc, v, "");
        LLVMBuildStore(em->b, sum, em->red_acc[i]);
        return true;
    }
    return false;
}

void llvm_reduce_end(llvm_emitter *em) {
    for (uint32_t i = 0; i < em->nred; i++) {
        const ir_op *op = em->red_ops[i];
        const kern_type *et = op->operands[0]->type->elem;
        bool fl = ty_is_float(et);
        LLVMTypeRef t = llvm_mem_type(em, et);
        LLVMValueRef acc = LLVMBuildLoad2(em->b, t, em->red_acc[i], "");
        LLVMAtomicRMWBinOp rmw = op->code == IR_ATOMIC_ADD
                                     ? (fl ? LLVMAtomicRMWBinOpFAdd : LLVMAtomicRMWBinOpAdd)
                                     : (fl ? LLVMAtomicRMWBinOpFSub : LLVMAtomicRMWBinOpSub);
        LLVMValueRef r = LLVMBuildAtomicRMW(em->b, rmw, llvm_element_ptr(em, op), acc,
                                            LLVMAtomicOrderingMonotonic, 0);
        LLVMSetAlignment(r, (unsigned)ty_size(et));
    }
    em->nred = 0;
}

void llvm_reduce_free(llvm_emitter *em) {
    free(em->red_ops);
    free(em->red_acc);
    em->red_ops = NULL;
    em->red_acc = NULL;
    em->nred = em->capred = 0;
}
