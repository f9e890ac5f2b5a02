/* llvm_reduce.c - atomic adds into one element, accumulated per call of a task function.
 *
 * In a parallel task, `s[0] += v` (an atomic add or sub whose old value is unused) at
 * indices that are the same for every work item and known before it (parameters, top-level values
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
 * Integer adds are exact either way. In checked code the end tests the element's
 * indices: in range, the atomic; out of range, the error record of the op, when it ran in
 * the call (a flag per op), and no add. */
#include <stdlib.h>

#include "../../passes/opt_util.h"
#include "../../runtime/abi.h"
#include "llvm_cpu.h"

/* The same value for every work item, and available where the task function ends: a
 * parameter, a top-level value (computed at the function's entry), or a constant (an
 * LLVM constant wherever it is emitted). Stronger than uniformity (ir_uniform_in, which
 * also admits pure computations inside the body: those are emitted per item, inside the
 * item loop, and do not dominate the function's end). */
static bool available_at_end(const llvm_emitter *em, const ir_value *v) {
    const ir_op *d = v->def;
    if (!d)
        return v->region == em->kernel->body;
    return d->parent == em->kernel->body || d->code == IR_CONST;
}

/* An atomic add/sub of the task body that may accumulate locally, ignoring the other
 * accesses of its array. */
static bool reducible_shape(const llvm_emitter *em, const ir_op *op, const ir_region *body) {
    if (op->code != IR_ATOMIC_ADD && op->code != IR_ATOMIC_SUB)
        return false;
    if (op->operands[0]->type->elem->kind == TY_BOOL)
        return false;
    for (uint32_t i = 1; i + 1 < op->noperands; i++)
        if (!available_at_end(em, op->operands[i]))
            return false;
    return !ir_region_uses(body, op->results[0]);
}

/* Whether every access of `array` in r is reducible. */
static bool only_reductions(const llvm_emitter *em, const ir_region *r, const ir_value *array,
                            const ir_region *body) {
    ir_foreach_op(op, r) {
        if (ir_is_access(op->code) && op->operands[0] == array && !reducible_shape(em, op, body))
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
            em->red_ran = realloc(em->red_ran, em->capred * sizeof *em->red_ran);
            if (!em->red_ops || !em->red_acc || !em->red_ran)
                kern_oom(em->capred * sizeof(void *));
        }
        em->red_ops[em->nred++] = op;
    }
}

void llvm_reduce_begin(llvm_emitter *em, const ir_op *task) {
    em->nred = 0;
    if (task->code != IR_PARALLEL)
        return;
    collect(em, task->regions[0], task->regions[0]);
    /* allocas at the top of the entry block, where SROA promotes them */
    LLVMBuilderRef eb = llvm_entry_builder(em);
    for (uint32_t i = 0; i < em->nred; i++) {
        LLVMTypeRef t = llvm_mem_type(em, em->red_ops[i]->operands[0]->type->elem);
        em->red_acc[i] = LLVMBuildAlloca(eb, t, "red");
        LLVMBuildStore(em->b, LLVMConstNull(t), em->red_acc[i]);
        if (em->checks) {
            em->red_ran[i] = LLVMBuildAlloca(eb, em->t_i1, "red.ran");
            LLVMBuildStore(em->b, LLVMConstInt(em->t_i1, 0, 0), em->red_ran[i]);
        }
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
        if (em->checks)
            LLVMBuildStore(em->b, LLVMConstInt(em->t_i1, 1, 0), em->red_ran[i]);
        return true;
    }
    return false;
}

/* Checked code: branches to the add when op's element is in range; else records the
 * error when op ran, and goes to the returned block, where the add goes too. */
static LLVMBasicBlockRef check_reduced(llvm_emitter *em, uint32_t i) {
    const ir_op *op = em->red_ops[i];
    const ir_value *a = op->operands[0];
    kern_assert(!a->def && a->region == em->kernel->body);
    LLVMValueRef *shape = em->arr_shape[a->index];
    LLVMValueRef ok = NULL, dim = NULL, idx = NULL, ext = NULL;
    for (int d = a->type->rank - 1; d >= 0; d--) { /* the first dimension out of range */
        const ir_value *iv = op->operands[1 + d];
        LLVMValueRef x = llvm_to_i64(em, llvm_val(em, iv), iv->type);
        LLVMValueRef in = LLVMBuildICmp(em->b, LLVMIntULT, x, shape[d], "");
        LLVMValueRef dc = LLVMConstInt(em->t_i32, (unsigned)d, 0);
        dim = dim ? LLVMBuildSelect(em->b, in, dim, dc, "") : dc;
        idx = idx ? LLVMBuildSelect(em->b, in, idx, x, "") : x;
        ext = ext ? LLVMBuildSelect(em->b, in, ext, shape[d], "") : shape[d];
        ok = ok ? LLVMBuildAnd(em->b, ok, in, "") : in;
    }
    LLVMBasicBlockRef add = llvm_new_block(em, "red.add"), bad = llvm_new_block(em, "red.bad"),
                      rec = llvm_new_block(em, "red.record"), done = llvm_new_block(em, "red.done");
    llvm_likely_first(em, LLVMBuildCondBr(em->b, ok, add, bad));
    LLVMPositionBuilderAtEnd(em->b, bad);
    LLVMBuildCondBr(em->b, LLVMBuildLoad2(em->b, em->t_i1, em->red_ran[i], ""), rec, done);
    LLVMPositionBuilderAtEnd(em->b, rec);
    llvm_record_error(em, op, KERN_DEVERR_BOUNDS, dim, idx, ext);
    LLVMBuildBr(em->b, done);
    LLVMPositionBuilderAtEnd(em->b, add);
    return done;
}

void llvm_reduce_end(llvm_emitter *em) {
    bool checks = em->checks;
    for (uint32_t i = 0; i < em->nred; i++) {
        const ir_op *op = em->red_ops[i];
        const kern_type *et = op->operands[0]->type->elem;
        bool fl = ty_is_float(et);
        LLVMTypeRef t = llvm_mem_type(em, et);
        LLVMBasicBlockRef done = checks ? check_reduced(em, i) : NULL;
        LLVMValueRef acc = LLVMBuildLoad2(em->b, t, em->red_acc[i], "");
        LLVMAtomicRMWBinOp rmw = op->code == IR_ATOMIC_ADD
                                     ? (fl ? LLVMAtomicRMWBinOpFAdd : LLVMAtomicRMWBinOpAdd)
                                     : (fl ? LLVMAtomicRMWBinOpFSub : LLVMAtomicRMWBinOpSub);
        em->checks = false; /* checked above */
        LLVMValueRef r = LLVMBuildAtomicRMW(em->b, rmw, llvm_element_ptr(em, op), acc,
                                            LLVMAtomicOrderingMonotonic, 0);
        em->checks = checks;
        LLVMSetAlignment(r, (unsigned)ty_size(et));
        if (done) {
            LLVMBuildBr(em->b, done);
            LLVMPositionBuilderAtEnd(em->b, done);
        }
    }
    em->nred = 0;
}

void llvm_reduce_free(llvm_emitter *em) {
    free(em->red_ops);
    free(em->red_acc);
    free(em->red_ran);
    em->red_ops = NULL;
    em->red_acc = NULL;
    em->red_ran = NULL;
    em->nred = em->capred = 0;
}

/* ---- neighbour scatters: plain adds inside the chunk (CPU task functions) -------------
 *
 * A CPU task function runs the work items [from, to) of dimension 0 (the chunked index
 * i0) in one thread. In a gradient kernel a point's adjoint is scattered to its
 * neighbours: `atomic_add(a.grad[t, i0 + c], v)` for small constants c (stencils,
 * springs). When every access of the array in the task addresses one dimension with
 * i0 + c, |c| <= K, the elements of that dimension in [from + K, to - K) are touched by this
 * chunk's items only: no other thread's i0 + c' can land there. So there an atomic add
 * whose old value is unused becomes a plain load, add and store; near the chunk's ends it
 * stays atomic. The sums are those of the atomic version, in one fixed order per element
 * within a chunk (docs/reference.md section 7 leaves the order of atomics open). Debug
 * builds keep the atomics. */

enum { NB_MAX_OFFSET = 64 };


/* c when v is i0 + c or i0 - c' for a constant within NB_MAX_OFFSET. */
static bool offset_of(const ir_value *v, const ir_value *i0, int64_t *c) {
    if (v == i0) {
        *c = 0;
        return true;
    }
    const ir_op *d = v->def;
    int64_t k;
    if (!d || d->noperands != 2 || (d->code != IR_ADD && d->code != IR_SUB))
        return false;
    if (d->operands[0] == i0 && opt_const_int(d->operands[1], &k))
        *c = d->code == IR_ADD ? k : -k;
    else if (d->code == IR_ADD && d->operands[1] == i0 && opt_const_int(d->operands[0], &k))
        *c = k;
    else
        return false;
    return *c >= -NB_MAX_OFFSET && *c <= NB_MAX_OFFSET;
}

/* Whether every access of `array` in r addresses dimension d with i0 + c; *k grows to the
 * largest |c|, *atomics counts the float atomic adds/subs whose old value is unused. */
static bool neighbour_accesses(const ir_region *r, const ir_value *array, const ir_value *i0,
                               uint32_t d, const ir_region *body, int64_t *k, int *atomics) {
    ir_foreach_op(op, r) {
        if (ir_is_access(op->code) && op->operands[0] == array) {
            int64_t c;
            if (!offset_of(op->operands[1 + d], i0, &c))
                return false;
            if (c < 0)
                c = -c;
            if (c > *k)
                *k = c;
            if ((op->code == IR_ATOMIC_ADD || op->code == IR_ATOMIC_SUB) &&
                !ir_region_uses(body, op->results[0]))
                (*atomics)++;
        }
        for (uint32_t i = 0; i < op->nregions; i++)
            if (!neighbour_accesses(op->regions[i], array, i0, d, body, k, atomics))
                return false;
    }
    return true;
}

static void nb_add(llvm_emitter *em, const ir_op *op, uint32_t d, int64_t k) {
    if (llvm_cpu(em)->nnb == llvm_cpu(em)->capnb) {
        llvm_cpu(em)->capnb = llvm_cpu(em)->capnb ? 2 * llvm_cpu(em)->capnb : 8;
        llvm_cpu(em)->nb_ops =
            realloc(llvm_cpu(em)->nb_ops, llvm_cpu(em)->capnb * sizeof *llvm_cpu(em)->nb_ops);
        llvm_cpu(em)->nb_dim =
            realloc(llvm_cpu(em)->nb_dim, llvm_cpu(em)->capnb * sizeof *llvm_cpu(em)->nb_dim);
        llvm_cpu(em)->nb_k =
            realloc(llvm_cpu(em)->nb_k, llvm_cpu(em)->capnb * sizeof *llvm_cpu(em)->nb_k);
        if (!llvm_cpu(em)->nb_ops || !llvm_cpu(em)->nb_dim || !llvm_cpu(em)->nb_k)
            kern_oom(llvm_cpu(em)->capnb * sizeof(void *));
    }
    llvm_cpu(em)->nb_ops[llvm_cpu(em)->nnb] = op;
    llvm_cpu(em)->nb_dim[llvm_cpu(em)->nnb] = d;
    llvm_cpu(em)->nb_k[llvm_cpu(em)->nnb++] = k;
}

static void nb_collect(llvm_emitter *em, const ir_region *r, const ir_value *array, uint32_t d,
                       int64_t k, const ir_region *body) {
    ir_foreach_op(op, r) {
        if ((op->code == IR_ATOMIC_ADD || op->code == IR_ATOMIC_SUB) && op->operands[0] == array &&
            ty_is_float(array->type->elem) && !ir_region_uses(body, op->results[0]))
            nb_add(em, op, d, k);
        for (uint32_t i = 0; i < op->nregions; i++)
            nb_collect(em, op->regions[i], array, d, k, body);
    }
}

void llvm_neighbour_begin(llvm_emitter *em, const ir_op *task, LLVMValueRef from, LLVMValueRef to) {
    llvm_cpu(em)->nnb = 0;
    if (task->code != IR_PARALLEL || em->opts->no_neighbour_adds)
        return;
    const ir_region *body = task->regions[0];
    const ir_value *i0 = body->args[0];
    const ir_kernel *k = em->kernel;
    for (uint32_t p = 0; p < k->nparams; p++) {
        const ir_value *array = k->body->args[p];
        if (!ty_is_array(array->type) || !ty_is_float(array->type->elem))
            continue;
        for (uint32_t d = 0; d < (uint32_t)array->type->rank; d++) {
            int64_t kk = 0;
            int atomics = 0;
            if (neighbour_accesses(body, array, i0, d, body, &kk, &atomics) && atomics > 0) {
                nb_collect(em, body, array, d, kk, body);
                break;
            }
        }
    }
    const kern_type *it = task->operands[0]->type;
    llvm_cpu(em)->nb_from = llvm_to_i64(em, from, it);
    llvm_cpu(em)->nb_to = llvm_to_i64(em, to, it);
}

bool llvm_neighbour_emit(llvm_emitter *em, const ir_op *op, LLVMValueRef ptr, LLVMValueRef v,
                         unsigned align) {
    for (uint32_t n = 0; n < llvm_cpu(em)->nnb; n++) {
        if (llvm_cpu(em)->nb_ops[n] != op)
            continue;
        const ir_value *iv = op->operands[1 + llvm_cpu(em)->nb_dim[n]];
        LLVMValueRef e = llvm_to_i64(em, llvm_val(em, iv), iv->type);
        LLVMValueRef k = LLVMConstInt(em->t_i64, (unsigned long long)llvm_cpu(em)->nb_k[n], 0);
        LLVMValueRef inside =
            LLVMBuildAnd(em->b,
                         LLVMBuildICmp(em->b, LLVMIntSGE, e,
                                       LLVMBuildAdd(em->b, llvm_cpu(em)->nb_from, k, ""), ""),
                         LLVMBuildICmp(em->b, LLVMIntSLT, e,
                                       LLVMBuildSub(em->b, llvm_cpu(em)->nb_to, k, ""), ""),
                         "nb.inside");
        LLVMBasicBlockRef plain = llvm_new_block(em, "nb.plain"),
                          atomic = llvm_new_block(em, "nb.atomic"),
                          join = llvm_new_block(em, "nb.join");
        LLVMBuildCondBr(em->b, inside, plain, atomic);
        LLVMTypeRef t = LLVMTypeOf(v);
        LLVMPositionBuilderAtEnd(em->b, plain);
        LLVMValueRef old = LLVMBuildLoad2(em->b, t, ptr, "");
        LLVMSetAlignment(old, align);
        LLVMValueRef sum = op->code == IR_ATOMIC_ADD ? LLVMBuildFAdd(em->b, old, v, "")
                                                     : LLVMBuildFSub(em->b, old, v, "");
        LLVMSetAlignment(LLVMBuildStore(em->b, sum, ptr), align);
        LLVMBuildBr(em->b, join);
        LLVMPositionBuilderAtEnd(em->b, atomic);
        LLVMValueRef r = LLVMBuildAtomicRMW(
            em->b, op->code == IR_ATOMIC_ADD ? LLVMAtomicRMWBinOpFAdd : LLVMAtomicRMWBinOpFSub, ptr,
            v, LLVMAtomicOrderingMonotonic, 0);
        LLVMSetAlignment(r, align);
        LLVMBuildBr(em->b, join);
        LLVMPositionBuilderAtEnd(em->b, join);
        return true;
    }
    return false;
}

void llvm_neighbour_end(llvm_emitter *em) { llvm_cpu(em)->nnb = 0; }

void llvm_neighbour_free(llvm_cpu_state *cpu) {
    free(cpu->nb_ops);
    free(cpu->nb_dim);
    free(cpu->nb_k);
    cpu->nb_ops = NULL;
    cpu->nb_dim = NULL;
    cpu->nb_k = NULL;
    cpu->nnb = cpu->capnb = 0;
}
