/* llvm_emit.c - IR module -> LLVM module: task functions and structured control flow.
 *
 * Per task t of kernel K (runtime/abi.h), two functions with C linkage:
 *   i64  kern_K__t<t>_count(ptr args)             hi0 - lo0 clamped to >= 0 (serial: 1)
 *   void kern_K__t<t>(ptr args, i64 begin, i64 end, ptr err, ptr noalias ad_slice,
 *                     ptr noalias readonly ad_layout)
 * Each loads the kernel's parameters from args at its entry (an array's data pointer and
 * extents from its kern_array_desc, a scalar's value), then re-emits the kernel's uniform
 * top-level ops that precede the task (LLVM drops those the function does not use).
 *
 * A PARALLEL task becomes a loop nest: dimension 0 over [lo0 + begin, lo0 + end), the
 * other dimensions over their full ranges, the first dimension outermost. A SERIAL task is
 * straight code run when begin < end.
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

void llvm_set_val(llvm_emitter *em, const ir_value *v, LLVMValueRef x) {
    llvm_valmap *m = &em->map;
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

LLVMValueRef llvm_val(llvm_emitter *em, const ir_value *v) {
    llvm_valmap *m = &em->map;
    if (m->cap) {
        size_t h = hash_ptr(v) & (m->cap - 1);
        while (m->keys[h]) {
            if (m->keys[h] == v)
                return m->vals[h];
            h = (h + 1) & (m->cap - 1);
        }
    }
    kern_unreachable("LLVM backend: use of a value that was not emitted");
}

LLVMBasicBlockRef llvm_new_block(llvm_emitter *em, const char *name) {
    return LLVMAppendBasicBlockInContext(em->ctx, em->fn, name);
}

void llvm_task_symbol(char *buf, size_t size, const char *kernel, int task, bool count) {
    /* the naming rule of kern_meta_symbol (runtime/meta.h): '.' is written "__" */
    kern_buf b = {0};
    buf_puts(&b, "kern_");
    for (const char *p = kernel; *p; p++) {
        if (*p == '.')
            buf_puts(&b, "__");
        else
            buf_putc(&b, *p);
    }
    buf_printf(&b, "__t%d%s", task, count ? "_count" : "");
    snprintf(buf, size, "%s", b.data ? b.data : "");
    buf_free(&b);
}

/* ---- control flow ------------------------------------------------------------------ */

static const ir_op *emit_region(llvm_emitter *em, const ir_region *r);

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

static bool is_unsigned(const kern_type *t) { return t->kind == TY_U32; }

static LLVMValueRef index_less(llvm_emitter *em, const kern_type *t, LLVMValueRef i,
                               LLVMValueRef hi) {
    return LLVMBuildICmp(em->b, is_unsigned(t) ? LLVMIntULT : LLVMIntSLT, i, hi, "");
}

static LLVMValueRef index_next(llvm_emitter *em, const kern_type *t, LLVMValueRef i) {
    LLVMValueRef one = LLVMConstInt(LLVMTypeOf(i), 1, 0);
    return is_unsigned(t) ? LLVMBuildNUWAdd(em->b, i, one, "") : LLVMBuildNSWAdd(em->b, i, one, "");
}

static void emit_for(llvm_emitter *em, const ir_op *op) {
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
    LLVMBuildCondBr(em->b, index_less(em, it, iphi, hi), bb_body, bb_exit);

    LLVMPositionBuilderAtEnd(em->b, bb_body);
    llvm_set_val(em, body->args[0], iphi);
    for (uint32_t k = 0; k < n; k++)
        llvm_set_val(em, body->args[1 + k], carried[k]);
    const ir_op *y = emit_region(em, body);
    LLVMValueRef *next = tmp_array(n);
    map_values(em, y, early ? 1 : 0, next, n);
    LLVMValueRef inext = index_next(em, it, iphi);
    LLVMBasicBlockRef body_end = LLVMGetInsertBlock(em->b);
    if (early)
        LLVMBuildCondBr(em->b, llvm_val(em, y->operands[0]), bb_head, bb_exit);
    else
        LLVMBuildBr(em->b, bb_head);
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

static void emit_while(llvm_emitter *em, const ir_op *op) {
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

/* Loads every parameter from args (entry block). */
static void emit_params(llvm_emitter *em, LLVMValueRef args) {
    const ir_kernel *k = em->kernel;
    for (uint32_t i = 0; i < k->nparams; i++) {
        const kern_type *t = k->params[i].type;
        LLVMValueRef idx = LLVMConstInt(em->t_i64, i, 0);
        LLVMValueRef slot = LLVMBuildInBoundsGEP2(em->b, em->t_ptr, args, &idx, 1, "");
        LLVMValueRef p = LLVMBuildLoad2(em->b, em->t_ptr, slot, k->params[i].name);
        LLVMSetAlignment(p, 8);
        if (ty_is_array(t)) {
            /* kern_array_desc { void *data; int64_t shape[4]; } */
            em->arr_data[i] = LLVMBuildLoad2(em->b, em->t_ptr, p, "data");
            LLVMSetAlignment(em->arr_data[i], 8);
            for (int d = 0; d < t->rank; d++) {
                LLVMValueRef off = LLVMConstInt(em->t_i64, 8 + 8 * (unsigned)d, 0);
                LLVMValueRef sp = LLVMBuildInBoundsGEP2(em->b, em->t_i8, p, &off, 1, "");
                em->arr_shape[i][d] = LLVMBuildLoad2(em->b, em->t_i64, sp, "n");
                LLVMSetAlignment(em->arr_shape[i][d], 8);
            }
            llvm_set_val(em, k->body->args[i], NULL);
        } else {
            LLVMValueRef v = LLVMBuildLoad2(em->b, llvm_mem_type(em, t), p, k->params[i].name);
            LLVMSetAlignment(v, (unsigned)ty_size(t));
            if (t->kind == TY_BOOL)
                v = LLVMBuildICmp(em->b, LLVMIntNE, v, LLVMConstInt(em->t_i8, 0, 0), "");
            llvm_set_val(em, k->body->args[i], v);
        }
    }
}

/* Emits the uniform top-level ops of the kernel that come before `task`. */
static void emit_uniforms(llvm_emitter *em, const ir_op *task) {
    ir_foreach_op(op, em->kernel->body) {
        if (op == task)
            break;
        if (op->code != IR_PARALLEL && op->code != IR_SERIAL)
            llvm_emit_simple_op(em, op);
    }
}

static LLVMValueRef begin_function(llvm_emitter *em, const char *name, LLVMTypeRef fty,
                                   bool with_err) {
    LLVMValueRef fn = LLVMAddFunction(em->mod, name, fty);
    unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(em->ctx, nounwind, 0));
    em->fn = fn;
    em->err = with_err ? LLVMGetParam(fn, 3) : NULL;
    em->checks = with_err && em->opts->debug;
    map_clear(&em->map);
    LLVMPositionBuilderAtEnd(em->b, llvm_new_block(em, "entry"));
    emit_params(em, LLVMGetParam(fn, 0));
    return fn;
}

static void emit_count_fn(llvm_emitter *em, const ir_op *task, int t) {
    char name[512];
    llvm_task_symbol(name, sizeof name, em->kernel->name, t, true);
    LLVMTypeRef fty = LLVMFunctionType(em->t_i64, &em->t_ptr, 1, 0);
    begin_function(em, name, fty, false);
    if (task->code == IR_SERIAL) {
        LLVMBuildRet(em->b, LLVMConstInt(em->t_i64, 1, 0));
        return;
    }
    emit_uniforms(em, task);
    const kern_type *it = task->operands[0]->type;
    LLVMValueRef lo = llvm_to_i64(em, llvm_val(em, task->operands[0]), it);
    LLVMValueRef hi = llvm_to_i64(em, llvm_val(em, task->operands[1]), it);
    LLVMValueRef n = LLVMBuildSub(em->b, hi, lo, "");
    LLVMValueRef zero = LLVMConstInt(em->t_i64, 0, 0);
    LLVMValueRef pos = LLVMBuildICmp(em->b, LLVMIntSGT, n, zero, "");
    LLVMBuildRet(em->b, LLVMBuildSelect(em->b, pos, n, zero, "count"));
}

/* The loop over dimension d of a parallel task from `from` to `to` (index type of the
 * dimension); the body is the next dimension or the task's region. */
static void emit_parallel_dim(llvm_emitter *em, const ir_op *task, uint32_t d, LLVMValueRef from,
                              LLVMValueRef to) {
    const ir_region *body = task->regions[0];
    const kern_type *it = task->operands[2 * d]->type;
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b);
    LLVMBasicBlockRef head = llvm_new_block(em, "par.head"), bb = llvm_new_block(em, "par.body"),
                      exit = llvm_new_block(em, "par.exit");
    LLVMBuildBr(em->b, head);
    LLVMPositionBuilderAtEnd(em->b, head);
    LLVMValueRef i = LLVMBuildPhi(em->b, LLVMTypeOf(from), "idx");
    LLVMAddIncoming(i, &from, &pre, 1);
    LLVMBuildCondBr(em->b, index_less(em, it, i, to), bb, exit);
    LLVMPositionBuilderAtEnd(em->b, bb);
    llvm_set_val(em, body->args[d], i);
    if (d + 1 < body->nargs)
        emit_parallel_dim(em, task, d + 1, llvm_val(em, task->operands[2 * d + 2]),
                          llvm_val(em, task->operands[2 * d + 3]));
    else {
        llvm_adstack_reset(em); /* a work item starts with empty stacks */
        emit_region(em, body);
    }
    LLVMValueRef next = index_next(em, it, i);
    LLVMBasicBlockRef end = LLVMGetInsertBlock(em->b);
    LLVMBuildBr(em->b, head);
    LLVMAddIncoming(i, &next, &end, 1);
    LLVMPositionBuilderAtEnd(em->b, exit);
}

static void param_attr(llvm_emitter *em, LLVMValueRef fn, unsigned idx, const char *name) {
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(em->ctx, kind, 0));
}

static void emit_task_fn(llvm_emitter *em, const ir_op *task, int t) {
    char name[512];
    llvm_task_symbol(name, sizeof name, em->kernel->name, t, false);
    LLVMTypeRef params[6] = {em->t_ptr, em->t_i64, em->t_i64, em->t_ptr, em->t_ptr, em->t_ptr};
    LLVMTypeRef fty = LLVMFunctionType(em->t_void, params, 6, 0);
    LLVMValueRef fn = begin_function(em, name, fty, true);
    /* the adstack heap is the runtime's own allocation, seen through nothing else; the
     * layout is only read (attribute index = parameter number + 1) */
    param_attr(em, fn, 5, "noalias");
    param_attr(em, fn, 5, "nocapture");
    param_attr(em, fn, 6, "noalias");
    param_attr(em, fn, 6, "nocapture");
    param_attr(em, fn, 6, "readonly");
    LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
    llvm_adstack_begin(em, LLVMGetParam(fn, 4), LLVMGetParam(fn, 5));
    emit_uniforms(em, task);
    llvm_reduce_begin(em, task);
    if (task->code == IR_SERIAL) {
        LLVMBasicBlockRef run = llvm_new_block(em, "run"), done = llvm_new_block(em, "done");
        LLVMBuildCondBr(em->b, LLVMBuildICmp(em->b, LLVMIntSLT, begin, end, ""), run, done);
        LLVMPositionBuilderAtEnd(em->b, run);
        llvm_adstack_reset(em);
        emit_region(em, task->regions[0]);
        LLVMBuildBr(em->b, done);
        LLVMPositionBuilderAtEnd(em->b, done);
    } else {
        /* work items [begin, end) are indices lo0 + begin .. lo0 + end - 1; they lie in
         * [lo0, hi0], so the sums in the index type do not wrap */
        LLVMValueRef lo = llvm_val(em, task->operands[0]);
        LLVMTypeRef ity = LLVMTypeOf(lo);
        LLVMValueRef from = LLVMBuildAdd(em->b, lo, LLVMBuildTrunc(em->b, begin, ity, "") /* no-op for i64 */, "");
        LLVMValueRef to = LLVMBuildAdd(em->b, lo, LLVMBuildTrunc(em->b, end, ity, ""), "");
        emit_parallel_dim(em, task, 0, from, to);
    }
    llvm_reduce_end(em);
    LLVMBuildRetVoid(em->b);
    llvm_adstack_end(em);
}

static void emit_kernel(llvm_emitter *em, const ir_kernel *k) {
    em->kernel = k;
    em->arr_data = calloc(k->nparams + 1, sizeof *em->arr_data);
    em->arr_shape = calloc(k->nparams + 1, sizeof *em->arr_shape);
    if (!em->arr_data || !em->arr_shape)
        kern_oom(k->nparams * sizeof *em->arr_shape);
    em->ad_depth = calloc(k->nadstacks + 1, sizeof *em->ad_depth);
    em->ad_base = calloc(k->nadstacks + 1, sizeof *em->ad_base);
    em->ad_cap = calloc(k->nadstacks + 1, sizeof *em->ad_cap);
    if (!em->ad_depth || !em->ad_base || !em->ad_cap)
        kern_oom(3 * (k->nadstacks + 1) * sizeof *em->ad_cap);
    int t = 0;
    ir_foreach_op(op, k->body) {
        if (op->code != IR_PARALLEL && op->code != IR_SERIAL)
            continue;
        emit_count_fn(em, op, t);
        emit_task_fn(em, op, t);
        t++;
    }
    free(em->arr_data);
    free(em->arr_shape);
    free(em->ad_depth);
    free(em->ad_base);
    free(em->ad_cap);
    em->arr_data = NULL;
    em->arr_shape = NULL;
    em->ad_depth = em->ad_base = em->ad_cap = NULL;
}

LLVMModuleRef llvm_emit_module(LLVMContextRef ctx, const ir_module *m, const kc_options *o) {
    llvm_emitter em = {0};
    em.ctx = ctx;
    em.opts = o;
    em.mod = LLVMModuleCreateWithNameInContext(m->source_path ? m->source_path : "kern", ctx);
    em.b = LLVMCreateBuilderInContext(ctx);
    em.t_i1 = LLVMInt1TypeInContext(ctx);
    em.t_i8 = LLVMInt8TypeInContext(ctx);
    em.t_i32 = LLVMInt32TypeInContext(ctx);
    em.t_i64 = LLVMInt64TypeInContext(ctx);
    em.t_f32 = LLVMFloatTypeInContext(ctx);
    em.t_f64 = LLVMDoubleTypeInContext(ctx);
    em.t_ptr = LLVMPointerTypeInContext(ctx, 0);
    em.t_void = LLVMVoidTypeInContext(ctx);
    ir_foreach_kernel(k, m) emit_kernel(&em, k);
    LLVMDisposeBuilder(em.b);
    free(em.map.keys);
    free(em.map.vals);
    llvm_reduce_free(&em);
    return em.mod;
}
