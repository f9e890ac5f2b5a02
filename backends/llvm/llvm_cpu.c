/* llvm_cpu.c - the CPU's ABI (runtime/abi.h): per task t of kernel K two functions with C
 * linkage,
 *   i64  kern_K__t<t>_count(ptr args)             hi0 - lo0 clamped to >= 0 (serial: 1)
 *   void kern_K__t<t>(ptr args, i64 begin, i64 end, ptr err, ptr noalias ad_slice,
 *                     ptr noalias readonly ad_layout)
 * and the host target machine.
 *
 * Each function loads the kernel's parameters from args at its entry (an array's data
 * pointer and extents from its kern_array_desc, a scalar's value), then re-emits the
 * kernel's uniform values. A PARALLEL task becomes a loop nest: dimension 0 over
 * [lo0 + begin, lo0 + end), the other dimensions over their full ranges, the first
 * dimension outermost. A SERIAL task is straight code run when begin < end.
 *
 * Adstacks: the calling worker's slice holds stack s at ad_slice + ad_layout[2s] with
 * capacity ad_layout[2s + 1], entries contiguous (one work item runs at a time per
 * worker). With a NULL slice or layout every capacity is 0: each push then records an
 * overflow instead of writing.
 *
 * Code is generated for the host: its triple, CPU name and features (LLVMGetHostCPUName /
 * LLVMGetHostCPUFeatures), like clang's -march=native, so that the vectorizers use the
 * widest vectors the machine has. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>
#include <llvm-c/DebugInfo.h>
#include <llvm-c/Target.h>

#include "llvm_backend.h"
#include "llvm_cpu.h"

/* ---- host target machine ------------------------------------------------------------ */

static pthread_once_t native_once = PTHREAD_ONCE_INIT;

static void init_native_once(void) {
    llvm_install_fatal_handler();
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    LLVMInitializeNativeAsmParser();
}

void llvm_init_native(void) { pthread_once(&native_once, init_native_once); }

LLVMTargetMachineRef llvm_host_target_machine(int opt_level, LLVMRelocMode reloc, char *err,
                                              size_t errlen) {
    llvm_init_native();
    char *triple = LLVMGetDefaultTargetTriple();
    char *msg = NULL;
    LLVMTargetRef target;
    if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
        llvm_errf(err, errlen, "LLVM has no target for the host triple %s: %s", triple,
                  msg ? msg : "");
        LLVMDisposeMessage(msg);
        LLVMDisposeMessage(triple);
        return NULL;
    }
    char *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(
        target, triple, cpu, features, llvm_codegen_level(opt_level), reloc, LLVMCodeModelDefault);
    if (!tm)
        llvm_errf(err, errlen, "cannot create an LLVM target machine for %s (%s)", triple, cpu);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(features);
    LLVMDisposeMessage(triple);
    return tm;
}

void llvm_host_describe(kern_buf *b) {
    llvm_init_native();
    unsigned major, minor, patch;
    LLVMGetVersion(&major, &minor, &patch);
    char *triple = LLVMGetDefaultTargetTriple();
    char *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
    /* whether the vector math library loads changes the code of SIMD math */
    bool mvec = llvm_simd_vector_math_address("_ZGVbN4v_sinf") != NULL;
    buf_printf(b, "llvm %u.%u.%u\nhost %s %s %s\nlibmvec %d\n", major, minor, patch, triple, cpu,
               features, mvec);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(features);
    LLVMDisposeMessage(triple);
}

/* ---- task functions ----------------------------------------------------------------- */

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

static void emit_count_fn(llvm_emitter *em, const ir_op *task, int t) {
    char name[512];
    llvm_task_symbol(name, sizeof name, em->kernel->name, t, true);
    LLVMTypeRef fty = LLVMFunctionType(em->t_i64, &em->t_ptr, 1, 0);
    LLVMValueRef fn = llvm_function_begin(em, name, fty, NULL);
    emit_params(em, LLVMGetParam(fn, 0));
    if (task->code == IR_SERIAL) {
        LLVMBuildRet(em->b, LLVMConstInt(em->t_i64, 1, 0));
        return;
    }
    llvm_emit_uniforms(em, task);
    LLVMBuildRet(em->b, llvm_task_extent(em, task, 0));
}

/* The loop over dimension d of a parallel task from `from` to `to` (index type of the
 * dimension); the body is the next dimension or one work item. */
/* Marks the loop whose back edge is br as not to be vectorized (nor interleaved). */
static void no_vectorize(llvm_emitter *em, LLVMValueRef br) {
    llvm_loop_property(em, br, "llvm.loop.vectorize.enable", LLVMConstInt(em->t_i1, 0, 0));
}

static void emit_parallel_dim(llvm_emitter *em, const ir_op *task, uint32_t d, LLVMValueRef from,
                              LLVMValueRef to, LLVMValueRef *idx) {
    const ir_region *body = task->regions[0];
    const kern_type *it = task->operands[2 * d]->type;
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b);
    LLVMBasicBlockRef head = llvm_new_block(em, "par.head"), bb = llvm_new_block(em, "par.body"),
                      exit = llvm_new_block(em, "par.exit");
    LLVMBuildBr(em->b, head);
    LLVMPositionBuilderAtEnd(em->b, head);
    LLVMValueRef i = LLVMBuildPhi(em->b, LLVMTypeOf(from), "idx");
    LLVMAddIncoming(i, &from, &pre, 1);
    LLVMBuildCondBr(em->b, llvm_index_less(em, it, i, to), bb, exit);
    LLVMPositionBuilderAtEnd(em->b, bb);
    idx[d] = i;
    if (d + 1 < body->nargs)
        emit_parallel_dim(em, task, d + 1, llvm_val(em, task->operands[2 * d + 2]),
                          llvm_val(em, task->operands[2 * d + 3]), idx);
    else
        llvm_emit_work_item(em, task, idx);
    LLVMValueRef next = llvm_index_next(em, it, i);
    LLVMBasicBlockRef end = LLVMGetInsertBlock(em->b);
    LLVMValueRef br = LLVMBuildBr(em->b, head);
    if (llvm_cpu(em)->plain_loop && d + 1 == body->nargs)
        no_vectorize(em, br);
    LLVMAddIncoming(i, &next, &end, 1);
    LLVMPositionBuilderAtEnd(em->b, exit);
}

/* The work items of a parallel task from `from` to `to` (dimension 0's index type): W at a
 * time (w > 0) or on the scalar path. */
static void emit_items(llvm_emitter *em, const ir_op *task, unsigned w, LLVMValueRef from,
                       LLVMValueRef to) {
    LLVMValueRef idx[8];
    kern_assert(task->regions[0]->nargs <= 8);
    if (w)
        llvm_simd_emit_task(em, task, w, from, to);
    else
        emit_parallel_dim(em, task, 0, from, to, idx);
}

/* The work items of a parallel task; checked code tests the ranges of the chunk's
 * accesses once (llvm_chunk.c). */
typedef struct cpu_items {
    const ir_op *task;
    unsigned w;
    LLVMValueRef from, to;
} cpu_items;

static void emit_cpu_items(llvm_emitter *em, void *user) {
    const cpu_items *ci = user;
    emit_items(em, ci->task, ci->w, ci->from, ci->to);
}

static void emit_chunk(llvm_emitter *em, const ir_op *task, unsigned w, LLVMValueRef from,
                       LLVMValueRef to) {
    uint32_t nd = task->regions[0]->nargs;
    LLVMValueRef lo[8], hi[8], one = LLVMConstInt(em->t_i64, 1, 0);
    const kern_type *it = task->operands[0]->type;
    lo[0] = llvm_to_i64(em, from, it);
    hi[0] = LLVMBuildSub(em->b, llvm_to_i64(em, to, it), one, "");
    for (uint32_t d = 1; d < nd; d++) {
        const kern_type *dt = task->operands[2 * d]->type;
        lo[d] = llvm_to_i64(em, llvm_val(em, task->operands[2 * d]), dt);
        hi[d] = LLVMBuildSub(em->b, llvm_to_i64(em, llvm_val(em, task->operands[2 * d + 1]), dt),
                             one, "");
    }
    cpu_items ci = {task, w, from, to};
    llvm_emit_tested(em, task, lo, hi, emit_cpu_items, &ci);
}

/* The worker's slice: stack s at slice + layout[2s], capacity layout[2s + 1]; capacity 0
 * for every stack when the caller passed no slice or layout. */
static void emit_adstack_slice(llvm_emitter *em, LLVMValueRef slice, LLVMValueRef layout) {
    const ir_kernel *k = em->kernel;
    if (k->nadstacks == 0)
        return;
    LLVMValueRef null = LLVMConstNull(em->t_ptr);
    LLVMValueRef have = LLVMBuildAnd(em->b, LLVMBuildICmp(em->b, LLVMIntNE, slice, null, ""),
                                     LLVMBuildICmp(em->b, LLVMIntNE, layout, null, ""), "");
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b), load = llvm_new_block(em, "ad.layout"),
                      ready = llvm_new_block(em, "ad.ready");
    llvm_likely_first(em, LLVMBuildCondBr(em->b, have, load, ready));

    LLVMPositionBuilderAtEnd(em->b, load);
    LLVMValueRef *base = calloc(k->nadstacks, sizeof *base),
                 *cap = calloc(k->nadstacks, sizeof *cap);
    if (!base || !cap)
        kern_oom(2 * k->nadstacks * sizeof *base);
    for (uint32_t s = 0; s < k->nadstacks; s++) {
        LLVMValueRef i = LLVMConstInt(em->t_i64, 2 * s, 0),
                     j = LLVMConstInt(em->t_i64, 2 * s + 1, 0);
        LLVMValueRef off = LLVMBuildLoad2(
            em->b, em->t_i64, LLVMBuildInBoundsGEP2(em->b, em->t_i64, layout, &i, 1, ""), "ad.off");
        cap[s] = LLVMBuildLoad2(
            em->b, em->t_i64, LLVMBuildInBoundsGEP2(em->b, em->t_i64, layout, &j, 1, ""), "ad.cap");
        LLVMSetAlignment(off, 8);
        LLVMSetAlignment(cap[s], 8);
        base[s] = LLVMBuildInBoundsGEP2(em->b, em->t_i8, slice, &off, 1, "ad.base");
    }
    LLVMBuildBr(em->b, ready);

    LLVMPositionBuilderAtEnd(em->b, ready);
    for (uint32_t s = 0; s < k->nadstacks; s++) {
        LLVMBasicBlockRef from[2] = {load, pre};
        LLVMValueRef b_in[2] = {base[s], null}, c_in[2] = {cap[s], LLVMConstInt(em->t_i64, 0, 0)};
        em->ad_base[s] = LLVMBuildPhi(em->b, em->t_ptr, "ad.base");
        LLVMAddIncoming(em->ad_base[s], b_in, from, 2);
        em->ad_cap[s] = LLVMBuildPhi(em->b, em->t_i64, "ad.cap");
        LLVMAddIncoming(em->ad_cap[s], c_in, from, 2);
    }
    em->ad_step = NULL; /* entries are contiguous in a slice */
    free(base);
    free(cap);
}

/* The task function's "kern-simd" attribute: "W lanes", or "scalar: why". */
static void note_simd(llvm_emitter *em, LLVMValueRef fn, unsigned w, const char *why) {
    char v[160];
    if (w)
        snprintf(v, sizeof v, "%u lanes", w);
    else
        snprintf(v, sizeof v, "scalar: %s", why);
    LLVMAddAttributeAtIndex(
        fn, LLVMAttributeFunctionIndex,
        LLVMCreateStringAttribute(em->ctx, "kern-simd", 9, v, (unsigned)strlen(v)));
}

/* Returns the SIMD lanes the task runs with (0: scalar). */
static unsigned emit_task_fn(llvm_emitter *em, const ir_op *task, int t) {
    char name[512];
    llvm_task_symbol(name, sizeof name, em->kernel->name, t, false);
    LLVMTypeRef params[6] = {em->t_ptr, em->t_i64, em->t_i64, em->t_ptr, em->t_ptr, em->t_ptr};
    LLVMTypeRef fty = LLVMFunctionType(em->t_void, params, 6, 0);
    LLVMValueRef fn = llvm_function_begin(em, name, fty, NULL);
    em->err = LLVMGetParam(fn, 3);
    em->checks = kc_checks(em->opts);
    /* the adstack heap is the runtime's own allocation, seen through nothing else; the
     * layout is only read (attribute index = parameter number + 1) */
    llvm_add_attr(em, fn, 5, "noalias");
    llvm_add_attr(em, fn, 5, "nocapture");
    llvm_add_attr(em, fn, 6, "noalias");
    llvm_add_attr(em, fn, 6, "nocapture");
    llvm_add_attr(em, fn, 6, "readonly");
    LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
    emit_params(em, LLVMGetParam(fn, 0));
    llvm_adstack_begin(em);
    emit_adstack_slice(em, LLVMGetParam(fn, 4), LLVMGetParam(fn, 5));
    llvm_emit_uniforms(em, task);
    llvm_reduce_begin(em, task);
    const char *why = NULL;
    unsigned w = llvm_simd_lanes(em, task, &why);
    note_simd(em, fn, w, why);
    if (task->code == IR_SERIAL) {
        LLVMBasicBlockRef run = llvm_new_block(em, "run"), done = llvm_new_block(em, "done");
        LLVMBuildCondBr(em->b, LLVMBuildICmp(em->b, LLVMIntSLT, begin, end, ""), run, done);
        LLVMPositionBuilderAtEnd(em->b, run);
        llvm_emit_work_item(em, task, NULL);
        LLVMBuildBr(em->b, done);
        LLVMPositionBuilderAtEnd(em->b, done);
    } else {
        /* work items [begin, end) are indices lo0 + begin .. lo0 + end - 1; they lie in
         * [lo0, hi0], so the sums in the index type do not wrap */
        LLVMValueRef lo = llvm_val(em, task->operands[0]);
        LLVMTypeRef ity = LLVMTypeOf(lo);
        LLVMValueRef from =
            LLVMBuildAdd(em->b, lo, LLVMBuildTrunc(em->b, begin, ity, "") /* no-op for i64 */, "");
        LLVMValueRef to = LLVMBuildAdd(em->b, lo, LLVMBuildTrunc(em->b, end, ity, ""), "");
        llvm_neighbour_begin(em, task, from, to);
        emit_chunk(em, task, w, from, to);
        llvm_neighbour_end(em);
    }
    llvm_reduce_end(em);
    LLVMBuildRetVoid(em->b);
    llvm_adstack_end(em);
    return w;
}

/* i32 kern_<K>__lanes: the work items one worker runs at once, for which the runtime
 * sizes the worker's adstack slice (kernels with adstacks and SIMD tasks only). */
static void emit_lanes(llvm_emitter *em, unsigned lanes) {
    char name[512];
    kern_lanes_symbol(name, sizeof name, em->kernel->name);
    LLVMValueRef g = LLVMAddGlobal(em->mod, em->t_i32, name);
    LLVMSetInitializer(g, LLVMConstInt(em->t_i32, lanes, 0));
    LLVMSetGlobalConstant(g, 1);
    LLVMSetAlignment(g, 4);
}

/* The lanes task `task` would run with, without emitting it. */
static unsigned task_lanes(llvm_emitter *em, const ir_op *task) {
    const char *why = NULL;
    em->checks = kc_checks(em->opts);
    return llvm_simd_lanes(em, task, &why);
}

/* Float math in SIMD code: the vector math library (llvm_simd.c), except what LLVM lowers
 * to instructions or inline vector code itself; scalar code keeps the generic mapping. */
static LLVMValueRef cpu_math(llvm_emitter *em, const ir_op *op, LLVMValueRef *x) {
    if (!em->vec_ops)
        return NULL;
    switch (op->code) {
    case IR_SQRT:
    case IR_FLOOR:
    case IR_CEIL:
    case IR_ROUND:
    case IR_RSQRT:
    case IR_FMA: return NULL;
    default: return llvm_simd_math(em, op, x);
    }
}

/* Neighbour adds inside the chunk (llvm_reduce.c). */
static bool cpu_atomic_add(llvm_emitter *em, const ir_op *op, LLVMValueRef ptr, LLVMValueRef v,
                           unsigned align) {
    return llvm_cpu(em)->nnb && llvm_neighbour_emit(em, op, ptr, v, align);
}

static const llvm_target_hooks cpu_hooks = {.math = cpu_math, .atomic_add = cpu_atomic_add};

LLVMModuleRef llvm_cpu_emit_part(LLVMContextRef ctx, const ir_module *m, const kc_options *o,
                                 const unsigned *part_of, unsigned part) {
    llvm_emitter em;
    llvm_cpu_state cpu = {0};
    llvm_emitter_init(&em, ctx, m, o, &cpu_hooks);
    em.target = &cpu;
    unsigned n = 0; /* tasks of the module so far */
    ir_foreach_kernel(k, m) {
        llvm_kernel_begin(&em, k);
        int t = 0;
        unsigned lanes = 0, w;
        ir_foreach_op(op, k->body) {
            if (op->code != IR_PARALLEL && op->code != IR_SERIAL)
                continue;
            if (!part_of || part_of[n] == part) {
                emit_count_fn(&em, op, t);
                w = emit_task_fn(&em, op, t);
            } else {
                w = k->nadstacks && part == 0 ? task_lanes(&em, op) : 0;
            }
            if (w > lanes)
                lanes = w;
            t++;
            n++;
        }
        if (k->nadstacks && lanes > 1 && part == 0)
            emit_lanes(&em, lanes);
        llvm_kernel_end(&em);
    }
    LLVMModuleRef mod = llvm_emitter_fini(&em);
    ir_divergence_free(&cpu.div);
    llvm_neighbour_free(&cpu);
    return mod;
}

LLVMModuleRef llvm_cpu_emit_module(LLVMContextRef ctx, const ir_module *m, const kc_options *o) {
    return llvm_cpu_emit_part(ctx, m, o, NULL, 0);
}

LLVMModuleRef llvm_build_module(LLVMContextRef ctx, const ir_module *m, const kc_options *o,
                                LLVMTargetMachineRef tm, char *err, size_t errlen) {
    return llvm_finish_module(llvm_cpu_emit_module(ctx, m, o), o, tm, err, errlen);
}
