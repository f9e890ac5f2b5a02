/* llvm_gpu.c - the GPUs' ABI (docs/gpu-abi.md), shared by NVPTX and AMDGPU: per task t of
 * kernel K one kernel entry point kern_K__t<t> whose parameters are passed by value
 *   per kernel parameter: an array's data pointer and its extents (i64 each), or a
 *   scalar's value (bool as i8); then ptr err, ptr ad_heap, i64 ad_slots, and per adstack
 *   s i64 ad_off[s], i64 ad_cap[s].
 *
 * A parallel task runs a grid-stride loop: thread w of T runs work items w, w + T, ...
 * below count = the product of the extents, item n mapped to indices with the last
 * dimension fastest (neighbouring threads, neighbouring elements). A serial task runs in
 * thread 0 only. The thread index and count, and how a function is marked as a kernel,
 * come from the target (llvm_gpu_target).
 *
 * Adstacks are slot-major: thread w's entry k of stack s is at
 *   ad_heap + ad_off[s] + (k * ad_slots + w) * size_s,
 * so em->ad_base[s] = ad_heap + ad_off[s] + w * size_s and em->ad_step = ad_slots. A
 * thread at or beyond ad_slots, or a NULL heap, sees capacity 0 (every push records an
 * overflow instead of writing).
 *
 * A kernel whose adstack capacities read array elements also gets a sizer entry point per
 * such adstack (llvm_sizer.c).
 *
 * Block copies: in a parallel task, a float array that the task only updates with atomic
 * adds whose old values are unused (the adjoint of an array every thread reads, w.grad)
 * is accumulated in a copy in the block's shared memory when it has at most
 * BLK_ELEMS elements (a check uniform over the grid): zeroed before the grid-stride loop,
 * updated with shared-memory atomics, and added to the array once per block and element
 * at the end (between block barriers, which every thread reaches: the loop is the only
 * control flow around them). Larger arrays take the global atomics. At most four arrays
 * and 32 KiB per block. */
#include <stdlib.h>

#include "../../common/sizeexpr.h"
#include "llvm_gpu.h"

unsigned llvm_gpu_bind_params(llvm_emitter *em, LLVMValueRef fn) {
    const ir_kernel *k = em->kernel;
    unsigned n = 0;
    for (uint32_t i = 0; i < k->nparams; i++) {
        const kern_type *t = k->params[i].type;
        if (ty_is_array(t)) {
            em->arr_data[i] = LLVMGetParam(fn, n++);
            LLVMSetValueName2(em->arr_data[i], k->params[i].name, strlen(k->params[i].name));
            llvm_add_attr(em, fn, n, "nocapture");
            for (int d = 0; d < t->rank; d++)
                em->arr_shape[i][d] = LLVMGetParam(fn, n++);
            llvm_set_val(em, k->body->args[i], NULL);
        } else {
            LLVMValueRef v = LLVMGetParam(fn, n++);
            if (t->kind == TY_BOOL)
                v = LLVMBuildICmp(em->b, LLVMIntNE, v, LLVMConstInt(em->t_i8, 0, 0), "");
            llvm_set_val(em, k->body->args[i], v);
        }
    }
    return n;
}

LLVMTypeRef llvm_gpu_fn_type(llvm_emitter *em, const ir_kernel *k, bool entry) {
    uint32_t n = 0, cap = 3 + 2 * k->nadstacks;
    for (uint32_t i = 0; i < k->nparams; i++)
        cap += ty_is_array(k->params[i].type) ? 1 + (uint32_t)k->params[i].type->rank : 1;
    LLVMTypeRef *ps = calloc(cap, sizeof *ps);
    if (!ps)
        kern_oom(cap * sizeof *ps);
    for (uint32_t i = 0; i < k->nparams; i++) {
        const kern_type *t = k->params[i].type;
        if (ty_is_array(t)) {
            ps[n++] = em->t_ptr;
            for (int d = 0; d < t->rank; d++)
                ps[n++] = em->t_i64;
        } else {
            ps[n++] = llvm_mem_type(em, t);
        }
    }
    ps[n++] = em->t_ptr; /* err (a sizer: res) */
    if (entry) {
        ps[n++] = em->t_ptr; /* ad_heap */
        ps[n++] = em->t_i64; /* ad_slots */
        for (uint32_t s = 0; s < k->nadstacks; s++) {
            ps[n++] = em->t_i64;
            ps[n++] = em->t_i64;
        }
    }
    LLVMTypeRef fty = LLVMFunctionType(em->t_void, ps, n, 0);
    free(ps);
    return fty;
}

/* Slot-major stacks of thread w (see the top of the file). */
static void bind_adstacks(llvm_emitter *em, LLVMValueRef fn, unsigned first, LLVMValueRef w) {
    const ir_kernel *k = em->kernel;
    if (k->nadstacks == 0)
        return;
    LLVMValueRef heap = LLVMGetParam(fn, first), slots = LLVMGetParam(fn, first + 1);
    LLVMValueRef ok =
        LLVMBuildAnd(em->b, LLVMBuildICmp(em->b, LLVMIntNE, heap, LLVMConstNull(em->t_ptr), ""),
                     LLVMBuildICmp(em->b, LLVMIntULT, w, slots, ""), "ad.ok");
    LLVMValueRef zero = LLVMConstInt(em->t_i64, 0, 0);
    for (uint32_t s = 0; s < k->nadstacks; s++) {
        LLVMValueRef off = LLVMGetParam(fn, first + 2 + 2 * s);
        LLVMValueRef cap = LLVMGetParam(fn, first + 3 + 2 * s);
        LLVMTypeRef mt = llvm_mem_type(em, k->adstacks[s].type);
        LLVMValueRef base = LLVMBuildGEP2(em->b, em->t_i8, heap, &off, 1, "");
        em->ad_base[s] = LLVMBuildGEP2(em->b, mt, base, &w, 1, "ad.base");
        em->ad_cap[s] = LLVMBuildSelect(em->b, ok, cap, zero, "ad.cap");
    }
    em->ad_step = slots;
}

enum { BLK_ELEMS = 2048, BLK_MAX = 4, BLK_BYTES = 32768 };

/* The GPU target's own state in the emitter (em->target): arrays whose float atomic adds
 * accumulate in a block copy. */
typedef struct gpu_blocks {
    int nblk;
    int blk_param[BLK_MAX];          /* the array parameter */
    LLVMValueRef blk_mem[BLK_MAX];   /* its block copy (shared memory) */
    LLVMValueRef blk_on[BLK_MAX];    /* i1: the array fits its copy (uniform over the grid) */
    LLVMValueRef blk_count[BLK_MAX]; /* its elements (i64) */
    ir_divergence div;               /* the task's, when one-dimensional (have_div) */
    bool have_div;
} gpu_blocks;

static gpu_blocks *blocks_of(const llvm_emitter *em) { return (gpu_blocks *)em->target; }

static bool is_fadd_unused(llvm_emitter *em, const ir_op *op) {
    return (op->code == IR_ATOMIC_ADD || op->code == IR_ATOMIC_SUB) &&
           ty_is_float(op->operands[0]->type->elem) && !llvm_value_used(em, op->results[0]);
}

/* Whether v, an index, differs in every thread of a warp by construction: the task's index
 * plus a uniform value (ir_div_linear), that modulo a uniform value (kepler's i % len(w):
 * distinct while the modulus is at least 32), a cast of one, or a select by a uniform
 * condition between one and a uniform value (the lowering of %). */
static bool spread_index(const ir_divergence *d, const ir_value *v) {
    if (ir_div_linear(d, v))
        return true;
    const ir_op *o = v->def;
    if (!o)
        return false;
    switch (o->code) {
    case IR_CAST: return ty_is_int(o->operands[0]->type) && spread_index(d, o->operands[0]);
    case IR_REM: return spread_index(d, o->operands[0]) && !ir_div_varying(d, o->operands[1]);
    case IR_SELECT: {
        const ir_value *p = o->operands[1], *q = o->operands[2];
        return !ir_div_varying(d, o->operands[0]) &&
               ((spread_index(d, p) && (spread_index(d, q) || !ir_div_varying(d, q))) ||
                (spread_index(d, q) && !ir_div_varying(d, p)));
    }
    default: return false;
    }
}

/* Whether every access of array a in r is a float atomic add with its old value unused;
 * *any: there is one; *shared: the adds may meet at one address: one is inside a loop of
 * r (in_loop: r is in one), or a one-dimensional array's at an index not spread_index (in
 * a task of several dimensions, which has no divergence analysis: any). */
static bool only_fadds(llvm_emitter *em, const ir_region *r, const ir_value *a, bool in_loop,
                       bool *any, bool *shared) {
    ir_foreach_op(op, r) {
        bool access = ir_is_access(op->code) || op->code == IR_DIM;
        if (access && op->operands[0] == a) {
            if (op->code == IR_DIM)
                continue;
            if (!is_fadd_unused(em, op))
                return false;
            *any = true;
            const gpu_blocks *g = blocks_of(em);
            *shared |= in_loop || !g->have_div || op->operands[0]->type->rank != 1 ||
                       !spread_index(&g->div, op->operands[1]);
        }
        bool loop = in_loop || op->code == IR_FOR || op->code == IR_WHILE;
        for (uint32_t i = 0; i < op->nregions; i++)
            if (!only_fadds(em, op->regions[i], a, loop, any, shared))
                return false;
    }
    return true;
}

/* for (j = tib; j < n; j += bs) body(j): the loop of the block's threads over a copy */
typedef void (*blk_body)(llvm_emitter *em, int b, LLVMValueRef j);

static void block_loop(llvm_emitter *em, const llvm_gpu_target *gt, int b, blk_body body) {
    LLVMBasicBlockRef on = llvm_new_block(em, "blk.on"), head = llvm_new_block(em, "blk.head"),
                      bb = llvm_new_block(em, "blk.body"), done = llvm_new_block(em, "blk.done");
    LLVMBuildCondBr(em->b, blocks_of(em)->blk_on[b], on, done);
    LLVMPositionBuilderAtEnd(em->b, on);
    LLVMValueRef from = gt->block_index(em), step = gt->block_size(em);
    LLVMBuildBr(em->b, head);
    LLVMPositionBuilderAtEnd(em->b, head);
    LLVMValueRef j = LLVMBuildPhi(em->b, em->t_i64, "j");
    LLVMAddIncoming(j, &from, &on, 1);
    LLVMBuildCondBr(em->b, LLVMBuildICmp(em->b, LLVMIntSLT, j, blocks_of(em)->blk_count[b], ""), bb,
                    done);
    LLVMPositionBuilderAtEnd(em->b, bb);
    body(em, b, j);
    LLVMValueRef next = LLVMBuildNSWAdd(em->b, j, step, "");
    LLVMBasicBlockRef end = LLVMGetInsertBlock(em->b);
    LLVMBuildBr(em->b, head);
    LLVMAddIncoming(j, &next, &end, 1);
    LLVMPositionBuilderAtEnd(em->b, done);
}

static LLVMTypeRef blk_elem(llvm_emitter *em, int b) {
    return llvm_mem_type(em, em->kernel->params[blocks_of(em)->blk_param[b]].type->elem);
}

static void blk_zero(llvm_emitter *em, int b, LLVMValueRef j) {
    LLVMTypeRef et = blk_elem(em, b);
    LLVMBuildStore(em->b, LLVMConstNull(et),
                   LLVMBuildInBoundsGEP2(em->b, et, blocks_of(em)->blk_mem[b], &j, 1, ""));
}

static void blk_flush(llvm_emitter *em, int b, LLVMValueRef j) {
    LLVMTypeRef et = blk_elem(em, b);
    LLVMValueRef v = LLVMBuildLoad2(
        em->b, et, LLVMBuildInBoundsGEP2(em->b, et, blocks_of(em)->blk_mem[b], &j, 1, ""), "");
    LLVMBasicBlockRef add = llvm_new_block(em, "blk.add"), next = llvm_new_block(em, "blk.next");
    LLVMBuildCondBr(em->b, LLVMBuildFCmp(em->b, LLVMRealUNE, v, LLVMConstNull(et), ""), add, next);
    LLVMPositionBuilderAtEnd(em->b, add);
    LLVMValueRef g =
        LLVMBuildInBoundsGEP2(em->b, et, em->arr_data[blocks_of(em)->blk_param[b]], &j, 1, "");
    LLVMValueRef r =
        LLVMBuildAtomicRMW(em->b, LLVMAtomicRMWBinOpFAdd, g, v, LLVMAtomicOrderingMonotonic, 0);
    LLVMSetAlignment(r, et == em->t_f64 ? 8 : 4);
    LLVMBuildBr(em->b, next);
    LLVMPositionBuilderAtEnd(em->b, next);
}

/* Chooses the arrays of a parallel task that get block copies and zeroes the copies: an
 * array whose adds may meet (only_fadds: inside a loop of the task, like loop.grad's
 * w.grad[t]; at an index the same in the warp; at a data-dependent one, a histogram's
 * h[b[i]]: 63x faster with the copy on an H200). An array added into once per item at an
 * index that differs in every thread of a warp (kepler.grad's w.grad[i % len(w)], x.grad[i]
 * after a loop) keeps the global adds: the warp's 32 adds are one instruction there and 32
 * in shared memory (kepler K.grad 0.200 -> 0.180 ms, bench/README.md). */
static void block_copies_begin(llvm_emitter *em, const llvm_gpu_target *gt, const ir_op *task) {
    blocks_of(em)->nblk = 0;
    if (!gt->barrier || task->code != IR_PARALLEL)
        return;
    const ir_kernel *k = em->kernel;
    int bytes = 0;
    for (uint32_t i = 0; i < k->nparams && blocks_of(em)->nblk < BLK_MAX; i++) {
        const kern_type *t = k->params[i].type;
        bool any = false, shared = false;
        if (!ty_is_array(t) || !ty_is_float(t->elem) ||
            !only_fadds(em, task->regions[0], k->body->args[i], false, &any, &shared) || !any ||
            !shared)
            continue;
        int size = BLK_ELEMS * (int)ty_size(t->elem);
        if (bytes + size > BLK_BYTES)
            break;
        bytes += size;
        int b = blocks_of(em)->nblk++;
        blocks_of(em)->blk_param[b] = (int)i;
        LLVMTypeRef at = LLVMArrayType2(llvm_mem_type(em, t->elem), BLK_ELEMS);
        LLVMValueRef g = LLVMAddGlobalInAddressSpace(em->mod, at, "kern.block", 3);
        LLVMSetInitializer(g, LLVMGetUndef(at));
        LLVMSetLinkage(g, LLVMInternalLinkage);
        LLVMSetAlignment(g, 8);
        blocks_of(em)->blk_mem[b] = g;
        LLVMValueRef n = em->arr_shape[i][0];
        for (int d = 1; d < t->rank; d++)
            n = LLVMBuildMul(em->b, n, em->arr_shape[i][d], "");
        blocks_of(em)->blk_count[b] = n;
        blocks_of(em)->blk_on[b] =
            LLVMBuildICmp(em->b, LLVMIntULE, n, LLVMConstInt(em->t_i64, BLK_ELEMS, 0), "blk.fits");
    }
    for (int b = 0; b < blocks_of(em)->nblk; b++)
        block_loop(em, gt, b, blk_zero);
    if (blocks_of(em)->nblk)
        gt->barrier(em);
}

static void block_copies_end(llvm_emitter *em, const llvm_gpu_target *gt) {
    if (!blocks_of(em)->nblk)
        return;
    gt->barrier(em);
    for (int b = 0; b < blocks_of(em)->nblk; b++)
        block_loop(em, gt, b, blk_flush);
    blocks_of(em)->nblk = 0;
}

bool llvm_gpu_uniform_access(const llvm_emitter *em, const ir_op *op) {
    return blocks_of(em)->have_div && !ir_div_access_varying(&blocks_of(em)->div, op);
}

bool llvm_gpu_block_fadd(llvm_emitter *em, const ir_op *op, LLVMValueRef ptr, LLVMValueRef lin,
                         LLVMValueRef v, unsigned align, llvm_gpu_fadd_fn global_fadd) {
    /* (global_fadd takes a pointer in any address space) */
    int b = -1;
    for (int i = 0; i < blocks_of(em)->nblk; i++)
        if (em->kernel->body->args[blocks_of(em)->blk_param[i]] == op->operands[0])
            b = i;
    if (b < 0 || !lin)
        return false;
    LLVMBasicBlockRef shared = llvm_new_block(em, "blk.shared"),
                      global = llvm_new_block(em, "blk.global"),
                      done = llvm_new_block(em, "blk.added");
    LLVMBuildCondBr(em->b, blocks_of(em)->blk_on[b], shared, global);
    LLVMPositionBuilderAtEnd(em->b, shared);
    /* the target's add (combined per warp where the lanes agree) into the block copy */
    bool uniform = llvm_gpu_uniform_access(em, op);
    global_fadd(
        em, LLVMBuildInBoundsGEP2(em->b, blk_elem(em, b), blocks_of(em)->blk_mem[b], &lin, 1, ""),
        v, align, uniform);
    LLVMBuildBr(em->b, done);
    LLVMPositionBuilderAtEnd(em->b, global);
    global_fadd(em, ptr, v, align, uniform);
    LLVMBuildBr(em->b, done);
    LLVMPositionBuilderAtEnd(em->b, done);
    return true;
}

typedef struct gpu_item {
    const ir_op *task;
    LLVMValueRef *idx;
} gpu_item;

static void emit_gpu_item(llvm_emitter *em, void *user) {
    const gpu_item *gi = user;
    llvm_emit_work_item(em, gi->task, gi->idx);
}

/* Index lo + i of dimension d of the task (i: an i64 in 0 .. hi - lo, so lo + i does not
 * wrap in the index type). */
static LLVMValueRef index_at(llvm_emitter *em, const ir_op *task, uint32_t d, LLVMValueRef i) {
    LLVMValueRef lo = llvm_val(em, task->operands[2 * d]);
    LLVMTypeRef ity = LLVMTypeOf(lo);
    return LLVMBuildAdd(em->b, lo, ity == em->t_i64 ? i : LLVMBuildTrunc(em->b, i, ity, ""), "");
}

/* for (x = start; x < end; x += step), x an i64: grid_loop_begin returns x in the body's
 * block, grid_loop_end closes the loop. */
typedef struct grid_loop {
    LLVMBasicBlockRef head, exit;
    LLVMValueRef x;
} grid_loop;

static LLVMValueRef grid_loop_begin(llvm_emitter *em, grid_loop *l, LLVMValueRef start,
                                    LLVMValueRef end, const char *name) {
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b), body = llvm_new_block(em, name);
    l->head = llvm_new_block(em, name);
    l->exit = llvm_new_block(em, name);
    LLVMBuildBr(em->b, l->head);
    LLVMPositionBuilderAtEnd(em->b, l->head);
    l->x = LLVMBuildPhi(em->b, em->t_i64, name);
    LLVMAddIncoming(l->x, &start, &pre, 1);
    LLVMBuildCondBr(em->b, LLVMBuildICmp(em->b, LLVMIntSLT, l->x, end, ""), body, l->exit);
    LLVMPositionBuilderAtEnd(em->b, body);
    return l->x;
}

static void grid_loop_end(llvm_emitter *em, grid_loop *l, LLVMValueRef step) {
    LLVMValueRef next = LLVMBuildNSWAdd(em->b, l->x, step, "");
    LLVMBasicBlockRef end = LLVMGetInsertBlock(em->b);
    LLVMBuildBr(em->b, l->head);
    LLVMAddIncoming(l->x, &next, &end, 1);
    LLVMPositionBuilderAtEnd(em->b, l->exit);
}

/* The work item at indices idx; checked code tests its accesses whose ranges are known at
 * its start once. */
static void run_item(llvm_emitter *em, const ir_op *task, LLVMValueRef *idx) {
    LLVMValueRef at[8];
    for (uint32_t d = 0; d < task->regions[0]->nargs; d++)
        at[d] = llvm_to_i64(em, idx[d], task->operands[2 * d]->type);
    gpu_item gi = {task, idx};
    llvm_emit_tested(em, task, at, at, emit_gpu_item, &gi);
}

/* ---- work items sorted by trip count (passes/trip_sort.c) ------------------------------ */

enum { SORT_BLOCK_MAX = 1024, SORT_BUCKET_BITS = 5 };

/* A load of a trip count's computation: the element where every index is in bounds, else
 * 0 (no error: the item's own load reports it). */
static void key_load(llvm_emitter *em, const ir_op *op) {
    int p = (int)op->operands[0]->index;
    const kern_type *at = op->operands[0]->type, *et = at->elem;
    LLVMValueRef in = LLVMConstInt(em->t_i1, 1, 0);
    for (int d = 0; d < at->rank; d++) {
        const ir_value *iv = op->operands[1 + d];
        LLVMValueRef i = llvm_to_i64(em, llvm_val(em, iv), iv->type);
        in = LLVMBuildAnd(em->b, in, LLVMBuildICmp(em->b, LLVMIntULT, i, em->arr_shape[p][d], ""),
                          "");
    }
    LLVMTypeRef mt = llvm_mem_type(em, et);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b), load = llvm_new_block(em, "key.load"),
                      done = llvm_new_block(em, "key.done");
    LLVMBuildCondBr(em->b, in, load, done);
    LLVMPositionBuilderAtEnd(em->b, load);
    bool checks = em->checks;
    em->checks = false;
    LLVMValueRef x = LLVMBuildLoad2(em->b, mt, llvm_element_ptr(em, op), "");
    em->checks = checks;
    LLVMSetAlignment(x, (unsigned)ty_size(et));
    LLVMBuildBr(em->b, done);
    LLVMPositionBuilderAtEnd(em->b, done);
    LLVMValueRef r = LLVMBuildPhi(em->b, mt, "");
    LLVMValueRef in_v[2] = {x, LLVMConstNull(mt)};
    LLVMBasicBlockRef in_b[2] = {load, pre};
    LLVMAddIncoming(r, in_v, in_b, 2);
    if (et->kind == TY_BOOL)
        r = LLVMBuildICmp(em->b, LLVMIntNE, r, LLVMConstNull(mt), "");
    llvm_set_val(em, op->results[0], r);
}

/* This thread's item's trip count of s->loop (i32, 0 to INT32_MAX): s->ops, then hi - lo. */
static LLVMValueRef emit_key(llvm_emitter *em, const ir_trip_sort *s) {
    for (uint32_t i = 0; i < s->nops; i++) {
        if (s->ops[i]->code == IR_LOAD)
            key_load(em, s->ops[i]);
        else
            llvm_emit_simple_op(em, s->ops[i]);
    }
    const ir_value *lo = s->loop->operands[0], *hi = s->loop->operands[1];
    LLVMValueRef n = LLVMBuildSub(em->b, llvm_to_i64(em, llvm_val(em, hi), hi->type),
                                  llvm_to_i64(em, llvm_val(em, lo), lo->type), "");
    LLVMValueRef zero = LLVMConstInt(em->t_i64, 0, 0), big = LLVMConstInt(em->t_i64, INT32_MAX, 0);
    n = LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntSGT, n, zero, ""), n, zero, "");
    n = LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntSLT, n, big, ""), n, big, "");
    return LLVMBuildTrunc(em->b, n, em->t_i32, "key");
}

static LLVMValueRef shared_array(llvm_emitter *em, LLVMTypeRef et, unsigned n, const char *name) {
    LLVMTypeRef at = LLVMArrayType2(et, n);
    LLVMValueRef g = LLVMAddGlobalInAddressSpace(em->mod, at, name, 3);
    LLVMSetInitializer(g, LLVMGetUndef(at));
    LLVMSetLinkage(g, LLVMInternalLinkage);
    LLVMSetAlignment(g, 4);
    return g;
}

static LLVMValueRef shared_at(llvm_emitter *em, LLVMValueRef g, LLVMValueRef i) {
    return LLVMBuildInBoundsGEP2(em->b, em->t_i32, g, &i, 1, "");
}

/* if (c) { ... }: returns the block after, the builder in the then-block */
static LLVMBasicBlockRef begin_if(llvm_emitter *em, LLVMValueRef c, const char *name) {
    LLVMBasicBlockRef then = llvm_new_block(em, name), after = llvm_new_block(em, name);
    LLVMBuildCondBr(em->b, c, then, after);
    LLVMPositionBuilderAtEnd(em->b, then);
    return after;
}

static void end_if(llvm_emitter *em, LLVMBasicBlockRef after) {
    LLVMBuildBr(em->b, after);
    LLVMPositionBuilderAtEnd(em->b, after);
}

/* The block's items base .. base + nb - 1 (nb of them, at most the block's size), sorted by
 * trip count in shared memory: returns the item this thread runs, valid where tib < nb.
 * Every thread of the block calls it (its barriers). A counting sort on the top
 * SORT_BUCKET_BITS bits of the largest count's width, with shared-memory atomics. */
static LLVMValueRef sort_block(llvm_emitter *em, const llvm_gpu_target *gt, const ir_op *task,
                               const ir_trip_sort *s, LLVMValueRef base, LLVMValueRef nb,
                               LLVMValueRef tib) {
    LLVMTypeRef i32 = em->t_i32;
    LLVMValueRef bs = gt->block_size(em);
    LLVMValueRef order = shared_array(em, i32, SORT_BLOCK_MAX, "kern.sort.order");
    LLVMValueRef hist = shared_array(em, i32, 1u << SORT_BUCKET_BITS, "kern.sort.hist");
    LLVMValueRef kmax = shared_array(em, i32, 1, "kern.sort.max");
    LLVMValueRef zero = LLVMConstInt(i32, 0, 0), zero64 = LLVMConstInt(em->t_i64, 0, 0);
    LLVMValueRef valid = LLVMBuildICmp(em->b, LLVMIntSLT, tib, nb, "");
    /* the key of item base + tib: the task's index set as the grid-stride loop sets it */
    llvm_set_val(em, task->regions[0]->args[0],
                 index_at(em, task, 0, LLVMBuildAdd(em->b, base, tib, "")));
    LLVMValueRef key = LLVMBuildSelect(em->b, valid, emit_key(em, s), zero, "");
    /* the histogram cleared by the block's threads (any block size), the largest by one */
    grid_loop l;
    LLVMValueRef j = grid_loop_begin(
        em, &l, tib, LLVMConstInt(em->t_i64, 1u << SORT_BUCKET_BITS, 0), "sort.clear");
    LLVMBuildStore(em->b, zero, shared_at(em, hist, j));
    grid_loop_end(em, &l, bs);
    LLVMBasicBlockRef after =
        begin_if(em, LLVMBuildICmp(em->b, LLVMIntEQ, tib, zero64, ""), "sort.clear");
    LLVMBuildStore(em->b, zero, shared_at(em, kmax, zero64));
    end_if(em, after);
    gt->barrier(em);
    LLVMBuildAtomicRMW(em->b, LLVMAtomicRMWBinOpUMax, shared_at(em, kmax, zero64), key,
                       LLVMAtomicOrderingMonotonic, 0);
    gt->barrier(em);
    LLVMValueRef m = LLVMBuildLoad2(em->b, i32, shared_at(em, kmax, zero64), "");
    LLVMValueRef args[2] = {m, LLVMConstInt(em->t_i1, 0, 0)};
    unsigned id = LLVMLookupIntrinsicID("llvm.ctlz", 9);
    LLVMValueRef lz =
        LLVMBuildCall2(em->b, LLVMIntrinsicGetType(em->ctx, id, &i32, 1),
                       LLVMGetIntrinsicDeclaration(em->mod, id, &i32, 1), args, 2, "");
    LLVMValueRef bits = LLVMBuildSub(em->b, LLVMConstInt(i32, 32 - SORT_BUCKET_BITS, 0), lz, "");
    LLVMValueRef shift =
        LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntSGT, bits, zero, ""), bits, zero, "");
    LLVMValueRef bucket = LLVMBuildZExt(em->b, LLVMBuildLShr(em->b, key, shift, ""), em->t_i64, "");
    /* the item's place in its bucket (an invalid thread adds 0) */
    LLVMValueRef r =
        LLVMBuildAtomicRMW(em->b, LLVMAtomicRMWBinOpAdd, shared_at(em, hist, bucket),
                           LLVMBuildZExt(em->b, valid, i32, ""), LLVMAtomicOrderingMonotonic, 0);
    gt->barrier(em);
    /* each bucket's first place (thread 0) */
    after = begin_if(em, LLVMBuildICmp(em->b, LLVMIntEQ, tib, zero64, ""), "sort.prefix");
    LLVMValueRef sum = zero;
    for (unsigned k = 0; k < 1u << SORT_BUCKET_BITS; k++) {
        LLVMValueRef q = shared_at(em, hist, LLVMConstInt(em->t_i64, k, 0));
        LLVMValueRef c = LLVMBuildLoad2(em->b, i32, q, "");
        LLVMBuildStore(em->b, sum, q);
        sum = LLVMBuildAdd(em->b, sum, c, "");
    }
    end_if(em, after);
    gt->barrier(em);
    after = begin_if(em, valid, "sort.place");
    LLVMValueRef at =
        LLVMBuildAdd(em->b, LLVMBuildLoad2(em->b, i32, shared_at(em, hist, bucket), ""), r, "");
    LLVMBuildStore(em->b, LLVMBuildTrunc(em->b, tib, i32, ""),
                   shared_at(em, order, LLVMBuildZExt(em->b, at, em->t_i64, "")));
    end_if(em, after);
    gt->barrier(em);
    LLVMValueRef mine = LLVMBuildLoad2(
        em->b, i32, shared_at(em, order, LLVMBuildSelect(em->b, valid, tib, zero64, "")), "");
    return LLVMBuildAdd(em->b, base, LLVMBuildZExt(em->b, mine, em->t_i64, ""), "");
}

/* The grid-stride loop over the work items of a parallel task. */
static void emit_grid_stride(llvm_emitter *em, const ir_op *task, LLVMValueRef w,
                             LLVMValueRef nthreads) {
    uint32_t nd = task->regions[0]->nargs;
    LLVMValueRef ext[8];
    kern_assert(nd <= 8);
    LLVMValueRef count = NULL;
    for (uint32_t d = 0; d < nd; d++) {
        ext[d] = llvm_task_extent(em, task, d);
        count = d ? LLVMBuildMul(em->b, count, ext[d], "") : ext[d];
    }
    grid_loop l;
    LLVMValueRef n = grid_loop_begin(em, &l, w, count, "grid");
    LLVMValueRef idx[8], rem = n;
    for (uint32_t d = nd; d-- > 0;) {
        LLVMValueRef i = rem;
        if (d > 0) { /* dimension 0 takes what is left */
            i = LLVMBuildURem(em->b, rem, ext[d], "");
            rem = LLVMBuildUDiv(em->b, rem, ext[d], "");
        }
        idx[d] = index_at(em, task, d, i);
    }
    run_item(em, task, idx);
    grid_loop_end(em, &l, nthreads);
}

/* The grid-stride loop of a one-dimensional task whose items run sorted by trip count
 * (s): the block's threads take the block's items base .. base + size - 1 together, sort
 * them (sort_block) and each runs the item at its place; the loop goes on while the
 * block's base is below the count, the same in every thread of the block (its barriers). */
static void emit_sorted_grid_stride(llvm_emitter *em, const llvm_gpu_target *gt, const ir_op *task,
                                    const ir_trip_sort *s, LLVMValueRef w, LLVMValueRef nthreads) {
    LLVMValueRef count = llvm_task_extent(em, task, 0);
    LLVMValueRef tib = gt->block_index(em), bs = gt->block_size(em);
    grid_loop l;
    LLVMValueRef base = grid_loop_begin(em, &l, LLVMBuildSub(em->b, w, tib, ""), count, "sort");
    LLVMValueRef rest = LLVMBuildSub(em->b, count, base, "");
    LLVMValueRef nb =
        LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntSLT, rest, bs, ""), rest, bs, "");
    LLVMValueRef n = sort_block(em, gt, task, s, base, nb, tib);
    LLVMBasicBlockRef after =
        begin_if(em, LLVMBuildICmp(em->b, LLVMIntSLT, tib, nb, ""), "sort.run");
    LLVMValueRef idx[1] = {index_at(em, task, 0, n)};
    run_item(em, task, idx);
    end_if(em, after);
    gt->barrier(em); /* the shared arrays are the next round's */
    grid_loop_end(em, &l, nthreads);
}

static void emit_entry(llvm_emitter *em, const llvm_gpu_target *gt, const ir_op *task, int t) {
    char name[512];
    llvm_task_symbol(name, sizeof name, em->kernel->name, t, false);
    LLVMValueRef fn = llvm_function_begin(em, name, llvm_gpu_fn_type(em, em->kernel, true), NULL);
    gt->mark_kernel(em, fn);
    em->cold = em->hot_loop = em->tested_loop = false;
    unsigned abi = llvm_gpu_bind_params(em, fn);
    em->err = LLVMGetParam(fn, abi);
    em->checks = kc_checks(em->opts);
    LLVMValueRef w = gt->thread_index(em), nthreads = gt->thread_count(em);
    llvm_adstack_begin(em);
    bind_adstacks(em, fn, abi + 1, w);
    llvm_emit_uniforms(em, task);
    llvm_reduce_begin(em, task);
    llvm_find_uses(em, task->regions[0]);
    if (task->code == IR_SERIAL) {
        LLVMBasicBlockRef run = llvm_new_block(em, "run"), done = llvm_new_block(em, "done");
        LLVMValueRef first = LLVMBuildICmp(em->b, LLVMIntEQ, w, LLVMConstInt(em->t_i64, 0, 0), "");
        LLVMBuildCondBr(em->b, first, run, done);
        LLVMPositionBuilderAtEnd(em->b, run);
        llvm_emit_work_item(em, task, NULL);
        LLVMBuildBr(em->b, done);
        LLVMPositionBuilderAtEnd(em->b, done);
    } else {
        /* one dimension: the lanes of a warp differ in that index only, so what the
         * divergence analysis finds uniform is one value in the whole warp */
        blocks_of(em)->have_div = task->regions[0]->nargs == 1;
        if (blocks_of(em)->have_div)
            ir_divergence_task(&blocks_of(em)->div, em->kernel, task);
        block_copies_begin(em, gt, task);
        ir_trip_sort sort;
        if (gt->barrier && blocks_of(em)->have_div && !em->opts->no_trip_sort &&
            ir_trip_sort_plan(&blocks_of(em)->div, task->regions[0], &sort))
            emit_sorted_grid_stride(em, gt, task, &sort, w, nthreads);
        else
            emit_grid_stride(em, task, w, nthreads);
        block_copies_end(em, gt);
        blocks_of(em)->have_div = false;
    }
    llvm_reduce_end(em);
    LLVMBuildRetVoid(em->b);
    llvm_adstack_end(em);
    /* the checked copies run only where a test failed, but the register allocator sizes
     * the thread's registers for them too (44 to 58 against the fast code's 32 in the
     * gradient benchmark: a third to half the occupancy). Where the loops outside them
     * are small tested ones, the cap keeps the fast code at full occupancy and spills in
     * the checked copies; a while loop (kepler's spilled on its hot path), a large loop and
     * straight-line code keep their registers */
    if (gt->limit_registers && em->tested_loop && !em->hot_loop)
        gt->limit_registers(em, fn);
}

/* A sizer kernel for every adstack whose capacity reads array elements (llvm_sizer.c). */
static void emit_sizers(llvm_emitter *em, const llvm_gpu_target *gt) {
    const ir_kernel *k = em->kernel;
    for (uint32_t s = 0; s < k->nadstacks; s++)
        if (sz_reads_memory(k->adstacks[s].cap))
            llvm_gpu_emit_sizer(em, gt, s, k->adstacks[s].cap);
}

LLVMModuleRef llvm_gpu_emit_module(LLVMContextRef ctx, const ir_module *m, const kc_options *o,
                                   const llvm_gpu_target *gt) {
    llvm_emitter em;
    gpu_blocks blocks = {0};
    llvm_emitter_init(&em, ctx, m, o, &gt->hooks);
    em.target = &blocks;
    ir_foreach_kernel(k, m) {
        llvm_kernel_begin(&em, k);
        int t = 0;
        ir_foreach_op(op, k->body) {
            if (op->code == IR_PARALLEL || op->code == IR_SERIAL)
                emit_entry(&em, gt, op, t++);
        }
        emit_sizers(&em, gt);
        llvm_kernel_end(&em);
    }
    ir_divergence_free(&blocks.div);
    return llvm_emitter_fini(&em);
}
