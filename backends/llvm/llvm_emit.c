/* llvm_emit.c - the target-neutral part of the LLVM backends: the emitter's state, the
 * value map, structured control flow, a kernel's uniform values and one work item.
 *
 * A target's ABI file (llvm_cpu.c, llvm_gpu.c) decides which functions a task becomes
 * and where the parameters, the error record, the work items and the adstack storage
 * come from; it binds the parameters (llvm_set_val on the kernel body's arguments,
 * em->arr_data / em->arr_shape for arrays), re-emits the kernel's uniform top-level ops
 * that precede the task in every function (llvm_emit_uniforms; LLVM drops those a
 * function does not use), and calls llvm_emit_work_item once per work item of its loop.
 *
 * Structured control flow is flattened into basic blocks in one walk:
 *   if     cond br to then/else, results as phis in the merge block;
 *   for    header (index and carried phis, i < hi), body, back edge from the body's end;
 *          with IR_FOR_EARLY_EXIT the body's end branches on the leading "go on" value and
 *          the results are phis of the header's values and the early-exit yields;
 *   while  before block (carried phis), condition br to after/exit; the after region's
 *          arguments and the loop's results are the forwarded values themselves.
 * Loop indices step with nsw/nuw adds: i < hi guarantees that i + 1 does not wrap.
 *
 * Kernels with adstacks (llvm_adstack.c): the body function sets up the stacks in its
 * entry block and empties them at the start of each work item: the innermost parallel
 * body (one index of every dimension) or the serial body. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/DebugInfo.h>

#include "llvm_internal.h"

/* ---- value map --------------------------------------------------------------------- */

static size_t hash_ptr(const void *p) {
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 17;
    x *= 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 29));
}

static void map_grow(llvm_valmap *m) {
    size_t ncap = m->cap ? m->cap * 2 : 256;
    const ir_value **keys = calloc(ncap, sizeof *keys);
    LLVMValueRef *vals = calloc(ncap, sizeof *vals);
    if (!keys || !vals)
        kern_oom(ncap * (sizeof *keys + sizeof *vals));
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

static void map_clear(llvm_valmap *m) {
    if (m->cap)
        memset(m->keys, 0, m->cap * sizeof *m->keys);
    m->len = 0;
}

static void map_put(llvm_valmap *m, const ir_value *v, LLVMValueRef x) {
    if (2 * (m->len + 1) > m->cap)
        map_grow(m);
    size_t h = hash_ptr(v) & (m->cap - 1);
    while (m->keys[h] && m->keys[h] != v)
        h = (h + 1) & (m->cap - 1);
    if (!m->keys[h])
        m->len++;
    m->keys[h] = v;
    m->vals[h] = x;
}

/* The slot of v in m, or NULL. */
static const LLVMValueRef *map_find(const llvm_valmap *m, const ir_value *v) {
    if (m->cap) {
        size_t h = hash_ptr(v) & (m->cap - 1);
        while (m->keys[h]) {
            if (m->keys[h] == v)
                return &m->vals[h];
            h = (h + 1) & (m->cap - 1);
        }
    }
    return NULL;
}

void llvm_map_put(llvm_valmap *m, const ir_value *v, LLVMValueRef x) { map_put(m, v, x); }
bool llvm_map_has(const llvm_valmap *m, const ir_value *v) { return map_find(m, v) != NULL; }
void llvm_map_clear(llvm_valmap *m) { map_clear(m); }
void llvm_map_free(llvm_valmap *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

void llvm_set_val(llvm_emitter *em, const ir_value *v, LLVMValueRef x) { map_put(&em->map, v, x); }

LLVMValueRef llvm_val(llvm_emitter *em, const ir_value *v) {
    const LLVMValueRef *x = map_find(&em->map, v);
    if (!x)
        kern_unreachable("LLVM backend: use of a value that was not emitted");
    if (em->vec_ops && *x && LLVMGetTypeKind(LLVMTypeOf(*x)) != LLVMVectorTypeKind) {
        /* a uniform operand of a varying op (llvm_simd.c): every lane gets it */
        LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(*x), em->simd_w);
        LLVMValueRef one =
            LLVMBuildInsertElement(em->b, LLVMGetPoison(vt), *x, LLVMConstInt(em->t_i32, 0, 0), "");
        return LLVMBuildShuffleVector(em->b, one, LLVMGetPoison(vt),
                                      LLVMConstNull(LLVMVectorType(em->t_i32, em->simd_w)), "");
    }
    return *x;
}

static void mark_uses(llvm_emitter *em, const ir_region *r) {
    ir_foreach_op(op, r) {
        for (uint32_t i = 0; i < op->noperands; i++)
            map_put(&em->used, op->operands[i], NULL);
        for (uint32_t i = 0; i < op->nregions; i++)
            mark_uses(em, op->regions[i]);
    }
}

void llvm_find_uses(llvm_emitter *em, const ir_region *r) {
    map_clear(&em->used);
    mark_uses(em, r);
}

bool llvm_value_used(const llvm_emitter *em, const ir_value *v) {
    return map_find(&em->used, v) != NULL;
}

LLVMBasicBlockRef llvm_new_block(llvm_emitter *em, const char *name) {
    return LLVMAppendBasicBlockInContext(em->ctx, em->fn, name);
}

void llvm_loop_property(llvm_emitter *em, LLVMValueRef br, const char *key, LLVMValueRef value) {
    LLVMMetadataRef prop[2] = {LLVMMDStringInContext2(em->ctx, key, strlen(key)),
                               LLVMValueAsMetadata(value)};
    LLVMMetadataRef tmp = LLVMTemporaryMDNode(em->ctx, NULL, 0);
    LLVMMetadataRef ops[2] = {tmp, LLVMMDNodeInContext2(em->ctx, prop, 2)};
    LLVMMetadataRef id = LLVMMDNodeInContext2(em->ctx, ops, 2);
    LLVMMetadataReplaceAllUsesWith(tmp, id); /* a loop ID's first operand is itself */
    LLVMSetMetadata(br, LLVMGetMDKindIDInContext(em->ctx, "llvm.loop", 9),
                    LLVMMetadataAsValue(em->ctx, id));
}

/* Whether r (or a region in it) calls a math library function (an OPF_LIBM op). */
static bool calls_math(const ir_region *r) {
    ir_foreach_op(op, r) {
        if (ir_info(op->code)->flags & OPF_LIBM)
            return true;
        for (uint32_t i = 0; i < op->nregions; i++)
            if (calls_math(op->regions[i]))
                return true;
    }
    return false;
}

LLVMBuilderRef llvm_entry_builder(llvm_emitter *em) {
    LLVMBuilderRef eb = LLVMCreateBuilderInContext(em->ctx);
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(em->fn);
    LLVMValueRef first = LLVMGetFirstInstruction(entry);
    if (first)
        LLVMPositionBuilderBefore(eb, first);
    else
        LLVMPositionBuilderAtEnd(eb, entry);
    return eb;
}

uint32_t llvm_count_ops(const ir_region *r) { return ir_region_count_ops(r); }

void llvm_task_symbol(char *buf, size_t size, const char *kernel, int task, bool count) {
    kern_code_symbol(buf, size, kernel, 't', task, count);
}

void llvm_sizer_symbol(char *buf, size_t size, const char *kernel, int s) {
    kern_code_symbol(buf, size, kernel, 's', s, false);
}

/* ---- control flow ------------------------------------------------------------------ */

static const ir_op *emit_region(llvm_emitter *em, const ir_region *r);

const ir_op *llvm_emit_region(llvm_emitter *em, const ir_region *r) { return emit_region(em, r); }

static void map_values(llvm_emitter *em, const ir_op *term, uint32_t from, LLVMValueRef *out,
                       uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        out[i] = llvm_val(em, term->operands[from + i]);
}

static LLVMValueRef *tmp_array(uint32_t n) {
    LLVMValueRef *a = calloc(n ? n : 1, sizeof *a);
    if (!a)
        kern_oom(n * sizeof *a);
    return a;
}

static void emit_if(llvm_emitter *em, const ir_op *op) {
    uint32_t n = op->nresults;
    LLVMBasicBlockRef bb_then = llvm_new_block(em, "then"), bb_else = llvm_new_block(em, "else"),
                      bb_merge = llvm_new_block(em, "endif");
    LLVMBuildCondBr(em->b, llvm_val(em, op->operands[0]), bb_then, bb_else);
    LLVMValueRef *vt = tmp_array(n), *ve = tmp_array(n);

    LLVMPositionBuilderAtEnd(em->b, bb_then);
    const ir_op *t = emit_region(em, op->regions[0]);
    map_values(em, t, 0, vt, n);
    LLVMBasicBlockRef end_then = LLVMGetInsertBlock(em->b);
    LLVMBuildBr(em->b, bb_merge);

    LLVMPositionBuilderAtEnd(em->b, bb_else);
    t = emit_region(em, op->regions[1]);
    map_values(em, t, 0, ve, n);
    LLVMBasicBlockRef end_else = LLVMGetInsertBlock(em->b);
    LLVMBuildBr(em->b, bb_merge);

    LLVMPositionBuilderAtEnd(em->b, bb_merge);
    for (uint32_t i = 0; i < n; i++) {
        LLVMValueRef phi = LLVMBuildPhi(em->b, llvm_reg_type(em, op->results[i]->type), "");
        LLVMValueRef in[2] = {vt[i], ve[i]};
        LLVMBasicBlockRef from[2] = {end_then, end_else};
        LLVMAddIncoming(phi, in, from, 2);
        llvm_set_val(em, op->results[i], phi);
    }
    free(vt);
    free(ve);
}

static bool is_unsigned(const kern_type *t) { return ty_is_unsigned(t); }

LLVMValueRef llvm_index_less(llvm_emitter *em, const kern_type *t, LLVMValueRef i,
                             LLVMValueRef hi) {
    return LLVMBuildICmp(em->b, is_unsigned(t) ? LLVMIntULT : LLVMIntSLT, i, hi, "");
}

LLVMValueRef llvm_index_next(llvm_emitter *em, const kern_type *t, LLVMValueRef i) {
    LLVMValueRef one = LLVMConstInt(LLVMTypeOf(i), 1, 0);
    return is_unsigned(t) ? LLVMBuildNUWAdd(em->b, i, one, "") : LLVMBuildNSWAdd(em->b, i, one, "");
}

static void emit_for_loop(llvm_emitter *em, const ir_op *op);

static void emit_for(llvm_emitter *em, const ir_op *op) {
    if (llvm_emit_tested_loop(em, op, emit_for_loop))
        return;
    em->hot_loop |= !em->cold && ir_region_has_loop(op->regions[0]);
    emit_for_loop(em, op);
}

static void emit_for_loop(llvm_emitter *em, const ir_op *op) {
    bool early = (op->attr & IR_FOR_EARLY_EXIT) != 0;
    uint32_t n = op->nresults;
    const ir_region *body = op->regions[0];
    const kern_type *it = op->operands[0]->type;
    LLVMValueRef lo = llvm_val(em, op->operands[0]), hi = llvm_val(em, op->operands[1]);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b);
    LLVMBasicBlockRef bb_head = llvm_new_block(em, "for.head"),
                      bb_body = llvm_new_block(em, "for.body"),
                      bb_exit = llvm_new_block(em, "for.exit");
    LLVMBuildBr(em->b, bb_head);

    LLVMPositionBuilderAtEnd(em->b, bb_head);
    LLVMValueRef iphi = LLVMBuildPhi(em->b, LLVMTypeOf(lo), "i");
    LLVMValueRef *carried = tmp_array(n);
    for (uint32_t k = 0; k < n; k++) {
        carried[k] = LLVMBuildPhi(em->b, llvm_reg_type(em, op->results[k]->type), "");
        LLVMValueRef init = llvm_val(em, op->operands[2 + k]);
        LLVMAddIncoming(carried[k], &init, &pre, 1);
    }
    LLVMAddIncoming(iphi, &lo, &pre, 1);
    LLVMBuildCondBr(em->b, llvm_index_less(em, it, iphi, hi), bb_body, bb_exit);

    LLVMPositionBuilderAtEnd(em->b, bb_body);
    llvm_set_val(em, body->args[0], iphi);
    for (uint32_t k = 0; k < n; k++)
        llvm_set_val(em, body->args[1 + k], carried[k]);
    const ir_op *y = emit_region(em, body);
    LLVMValueRef *next = tmp_array(n);
    map_values(em, y, early ? 1 : 0, next, n);
    LLVMValueRef inext = llvm_index_next(em, it, iphi);
    LLVMBasicBlockRef body_end = LLVMGetInsertBlock(em->b);
    LLVMValueRef back = early
                            ? LLVMBuildCondBr(em->b, llvm_val(em, y->operands[0]), bb_head, bb_exit)
                            : LLVMBuildBr(em->b, bb_head);
    /* the GPUs: an innermost loop around libdevice's sinf ran its forward 20% faster
     * unrolled four times than at LLVM's choice of two (the H200, bench/README.md) */
    unsigned unroll = em->hooks->math_loop_unroll;
    if (unroll && !em->opts->fast_math && !ir_region_has_loop(body) && calls_math(body))
        llvm_loop_property(em, back, "llvm.loop.unroll.count", LLVMConstInt(em->t_i32, unroll, 0));
    LLVMAddIncoming(iphi, &inext, &body_end, 1);
    for (uint32_t k = 0; k < n; k++)
        LLVMAddIncoming(carried[k], &next[k], &body_end, 1);

    LLVMPositionBuilderAtEnd(em->b, bb_exit);
    for (uint32_t k = 0; k < n; k++) {
        if (!early) {
            llvm_set_val(em, op->results[k], carried[k]); /* the header dominates the exit */
            continue;
        }
        LLVMValueRef phi = LLVMBuildPhi(em->b, llvm_reg_type(em, op->results[k]->type), "");
        LLVMValueRef in[2] = {carried[k], next[k]};
        LLVMBasicBlockRef from[2] = {bb_head, body_end};
        LLVMAddIncoming(phi, in, from, 2);
        llvm_set_val(em, op->results[k], phi);
    }
    free(carried);
    free(next);
}

static void emit_while_loop(llvm_emitter *em, const ir_op *op);

static void emit_while(llvm_emitter *em, const ir_op *op) {
    /* a while loop keeps its registers (llvm_gpu.c, limit_registers), tested or not */
    em->hot_loop |= !em->cold;
    if (!llvm_emit_tested_loop(em, op, emit_while_loop))
        emit_while_loop(em, op);
}

static void emit_while_loop(llvm_emitter *em, const ir_op *op) {
    const ir_region *before = op->regions[0], *after = op->regions[1];
    uint32_t ninit = op->noperands;
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b);
    LLVMBasicBlockRef bb_before = llvm_new_block(em, "while.before"),
                      bb_after = llvm_new_block(em, "while.after"),
                      bb_exit = llvm_new_block(em, "while.exit");
    LLVMBuildBr(em->b, bb_before);

    LLVMPositionBuilderAtEnd(em->b, bb_before);
    LLVMValueRef *carried = tmp_array(ninit);
    for (uint32_t k = 0; k < ninit; k++) {
        carried[k] = LLVMBuildPhi(em->b, llvm_reg_type(em, op->operands[k]->type), "");
        LLVMValueRef init = llvm_val(em, op->operands[k]);
        LLVMAddIncoming(carried[k], &init, &pre, 1);
        llvm_set_val(em, before->args[k], carried[k]);
    }
    const ir_op *cond = emit_region(em, before);
    /* the forwarded values are defined where the condition is; that block dominates both
     * the after region and the exit, so they are used directly */
    for (uint32_t k = 0; k < op->nresults; k++) {
        LLVMValueRef v = llvm_val(em, cond->operands[1 + k]);
        llvm_set_val(em, after->args[k], v);
        llvm_set_val(em, op->results[k], v);
    }
    LLVMBuildCondBr(em->b, llvm_val(em, cond->operands[0]), bb_after, bb_exit);

    LLVMPositionBuilderAtEnd(em->b, bb_after);
    const ir_op *y = emit_region(em, after);
    LLVMValueRef *next = tmp_array(ninit);
    map_values(em, y, 0, next, ninit);
    LLVMBasicBlockRef after_end = LLVMGetInsertBlock(em->b);
    LLVMBuildBr(em->b, bb_before);
    for (uint32_t k = 0; k < ninit; k++)
        LLVMAddIncoming(carried[k], &next[k], &after_end, 1);

    LLVMPositionBuilderAtEnd(em->b, bb_exit);
    free(carried);
    free(next);
}

/* Emits the ops of r in order; returns its terminator (not emitted), or NULL. */
static const ir_op *emit_region(llvm_emitter *em, const ir_region *r) {
    ir_foreach_op(op, r) {
        switch (op->code) {
        case IR_YIELD:
        case IR_CONDITION: return op;
        case IR_IF: emit_if(em, op); break;
        case IR_FOR: emit_for(em, op); break;
        case IR_WHILE: emit_while(em, op); break;
        case IR_ADPUSH: llvm_emit_adpush(em, op); break;
        case IR_ADPOP: llvm_emit_adpop(em, op); break;
        case IR_PARALLEL:
        case IR_SERIAL: kern_unreachable("LLVM backend: a task inside a region");
        default: llvm_emit_simple_op(em, op); break;
        }
    }
    return NULL;
}

/* ---- functions --------------------------------------------------------------------- */

void llvm_add_attr(llvm_emitter *em, LLVMValueRef fn, unsigned idx, const char *name) {
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(em->ctx, kind, 0));
}

LLVMValueRef llvm_function_begin(llvm_emitter *em, const char *name, LLVMTypeRef fty,
                                 LLVMValueRef err) {
    LLVMValueRef fn = LLVMAddFunction(em->mod, name, fty);
    llvm_add_attr(em, fn, LLVMAttributeFunctionIndex, "nounwind");
    em->fn = fn;
    em->err = err;
    em->checks = err && kc_checks(em->opts);
    map_clear(&em->map);
    LLVMPositionBuilderAtEnd(em->b, llvm_new_block(em, "entry"));
    return fn;
}

void llvm_emit_uniforms(llvm_emitter *em, const ir_op *task) {
    ir_foreach_op(op, em->kernel->body) {
        if (op == task)
            break;
        if (op->code != IR_PARALLEL && op->code != IR_SERIAL)
            llvm_emit_simple_op(em, op);
    }
}

LLVMValueRef llvm_task_extent(llvm_emitter *em, const ir_op *task, uint32_t d) {
    const kern_type *it = task->operands[2 * d]->type;
    LLVMValueRef lo = llvm_to_i64(em, llvm_val(em, task->operands[2 * d]), it);
    LLVMValueRef hi = llvm_to_i64(em, llvm_val(em, task->operands[2 * d + 1]), it);
    LLVMValueRef n = LLVMBuildSub(em->b, hi, lo, "");
    LLVMValueRef zero = LLVMConstInt(em->t_i64, 0, 0);
    LLVMValueRef pos = LLVMBuildICmp(em->b, LLVMIntSGT, n, zero, "");
    return LLVMBuildSelect(em->b, pos, n, zero, "extent");
}

void llvm_emit_work_item(llvm_emitter *em, const ir_op *task, LLVMValueRef *idx) {
    const ir_region *body = task->regions[0];
    if (task->code == IR_PARALLEL)
        for (uint32_t d = 0; d < body->nargs; d++)
            llvm_set_val(em, body->args[d], idx[d]);
    llvm_adstack_reset(em); /* a work item starts with empty stacks */
    emit_region(em, body);
}

void llvm_kernel_begin(llvm_emitter *em, const ir_kernel *k) {
    em->kernel = k;
    em->arr_data = calloc(k->nparams + 1, sizeof *em->arr_data);
    em->arr_shape = calloc(k->nparams + 1, sizeof *em->arr_shape);
    if (!em->arr_data || !em->arr_shape)
        kern_oom(k->nparams * sizeof *em->arr_shape);
    em->ad_depth = calloc(k->nadstacks + 1, sizeof *em->ad_depth);
    em->ad_base = calloc(k->nadstacks + 1, sizeof *em->ad_base);
    em->ad_cap = calloc(k->nadstacks + 1, sizeof *em->ad_cap);
    em->ad_ptr = calloc(k->nadstacks + 1, sizeof *em->ad_ptr);
    if (!em->ad_depth || !em->ad_base || !em->ad_cap || !em->ad_ptr)
        kern_oom(4 * (k->nadstacks + 1) * sizeof *em->ad_cap);
}

void llvm_kernel_end(llvm_emitter *em) {
    free(em->arr_data);
    free(em->arr_shape);
    free(em->ad_depth);
    free(em->ad_base);
    free(em->ad_cap);
    free(em->ad_ptr);
    em->arr_data = NULL;
    em->arr_shape = NULL;
    em->ad_depth = em->ad_base = em->ad_cap = em->ad_ptr = NULL;
    em->kernel = NULL;
}

static const llvm_target_hooks no_hooks = {0};

void llvm_emitter_init(llvm_emitter *em, LLVMContextRef ctx, const ir_module *m,
                       const kc_options *o, const llvm_target_hooks *hooks) {
    kern_assert(m->lowered); /* kc_compile_source, or ir_lower_semantics for IR made by hand */
    memset(em, 0, sizeof *em);
    em->ctx = ctx;
    em->opts = o;
    em->hooks = hooks ? hooks : &no_hooks;
    em->mod = LLVMModuleCreateWithNameInContext(m->source_path ? m->source_path : "kern", ctx);
    em->b = LLVMCreateBuilderInContext(ctx);
    em->t_i1 = LLVMInt1TypeInContext(ctx);
    em->t_i8 = LLVMInt8TypeInContext(ctx);
    em->t_i32 = LLVMInt32TypeInContext(ctx);
    em->t_i64 = LLVMInt64TypeInContext(ctx);
    em->t_f32 = LLVMFloatTypeInContext(ctx);
    em->t_f64 = LLVMDoubleTypeInContext(ctx);
    em->t_ptr = LLVMPointerTypeInContext(ctx, 0);
    em->t_void = LLVMVoidTypeInContext(ctx);
}

LLVMModuleRef llvm_emitter_fini(llvm_emitter *em) {
    LLVMDisposeBuilder(em->b);
    free(em->map.keys);
    free(em->map.vals);
    free(em->used.keys);
    free(em->used.vals);
    llvm_reduce_free(em);
    return em->mod;
}
