/* llvm_internal.h - what the files of the LLVM backends share (not a public API).
 *
 * Target-neutral (every target's code goes through these):
 *   llvm_emit.c      the emitter's state, value map, structured control flow, uniforms,
 *                    one work item of a task
 *   llvm_emit_ops.c  scalar ops, math, casts, array accesses, atomics, checks
 *   llvm_adstack.c   adstack depth counters, push and pop, overflow records
 *   llvm_reduce.c    atomic adds into uniform elements accumulated per task call
 *   llvm_target.c    verification and the optimization pipeline
 * Per-target ABI (how a task becomes functions, where parameters and work items come
 * from, how builtins map):
 *   llvm_cpu.c       the CPU: chunked task functions and `_count` (runtime/abi.h), the
 *                    host target machine; llvm_jit.c (ORC LLJIT), llvm_obj.c (objects)
 *   llvm_gpu.c       GPUs: kernel entry points, parameters by value, grid-stride loops,
 *                    slot-major adstacks (docs/gpu-abi.md)
 *   llvm_nvptx.c     NVPTX: thread indexing, libdevice math, PTX
 *   llvm_amdgpu.c    AMDGPU: thread indexing, math, code objects */
#ifndef KERN_LLVM_INTERNAL_H
#define KERN_LLVM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "../../common/context.h"
#include "../../ir/ir.h"
#include "../../passes/passes.h"

/* An ir_value -> LLVMValueRef map (open addressing on the pointer), reset per function. */
typedef struct llvm_valmap {
    const ir_value **keys;
    LLVMValueRef *vals;
    size_t cap, len; /* cap is 0 or a power of two */
} llvm_valmap;

typedef struct llvm_emitter llvm_emitter;

/* What a target changes in the target-neutral emitter. Every hook may be NULL. */
typedef struct llvm_target_hooks {
    /* The value of a float math op (IR_SIN ...) for this target, or NULL for the generic
     * mapping of llvm_emit_ops.c (LLVM intrinsics and libm calls). */
    LLVMValueRef (*math)(llvm_emitter *em, const ir_op *op, LLVMValueRef *x);
    /* Emits a float atomic add of v at ptr (element lin of op's array) whose old value
     * nobody uses (the target may combine the adds of neighbouring threads first); false:
     * the generic atomicrmw. */
    bool (*atomic_fadd)(llvm_emitter *em, const ir_op *op, LLVMValueRef ptr, LLVMValueRef lin,
                        LLVMValueRef v, unsigned align);
    /* Emits the float atomic add or sub op of v at ptr itself (the CPU: neighbour adds
     * inside the chunk, without an atomic); false: the generic path. */
    bool (*atomic_add)(llvm_emitter *em, const ir_op *op, LLVMValueRef ptr, LLVMValueRef v,
                       unsigned align);
    /* The largest x over the threads that run this lanemax op together (a warp's active
     * ones); NULL: x (a group of one lane, as on the CPU's scalar path) */
    LLVMValueRef (*lanemax)(llvm_emitter *em, const ir_op *op, LLVMValueRef x);
    /* With fast math (kc_options.fast_math), float adds, subs and muls may be contracted into
     * fmas (LLVM's `contract`), as nvcc does by default and a Vulkan driver may without
     * NoContraction: the GPU targets. Else IEEE operations, one rounding each. */
    bool fast_contract;
    /* Innermost `for` loops whose body calls a math library function (libdevice's `sinf`;
     * not with fast math, where `sin` is one instruction) are unrolled this many times
     * (`llvm.loop.unroll.count`); 0: LLVM's own choice. */
    unsigned math_loop_unroll;
} llvm_target_hooks;

/* The state of emitting one module. */
struct llvm_emitter {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    const kc_options *opts;
    const llvm_target_hooks *hooks; /* never NULL */
    LLVMTypeRef t_i1, t_i8, t_i32, t_i64, t_f32, t_f64, t_ptr, t_void;
    LLVMValueRef err_fn; /* the module's error-recording helper (created on first use) */
    /* per function */
    LLVMValueRef fn;  /* the function being emitted */
    LLVMValueRef err; /* its kern_err_record * (NULL in a _count function) */
    bool checks;      /* emit the checks (kc_checks(opts) and err != NULL) */
    const ir_op **proven; /* accesses whose indices a test at the function's start found in
                             range (llvm_cpu.c, "checked tasks"), adstack pushes and pops
                             a loop's test found within the capacity: no checks of their own */
    uint32_t nproven;
    bool untested; /* emitting the checked copy of a failed test: no loop tests in it */
    /* per function: what register sizing needs to know (llvm_gpu.c, limit_registers) */
    bool cold;     /* emitting a checked copy (chunk.checked, loop.checked) */
    bool hot_loop; /* a loop outside the checked copies that no test split (a while loop, a
                      loop holding loops), or a large one that a test split */
    bool tested_loop; /* a loop that a test split (llvm_emit_tested_loop) */
    const ir_kernel *kernel;
    LLVMValueRef *arr_data;                   /* per parameter: an array's data pointer */
    LLVMValueRef (*arr_shape)[KERN_MAX_RANK]; /* per parameter: an array's extents (i64) */
    llvm_valmap map;
    llvm_valmap used; /* the values some op of the current task uses (llvm_find_uses) */
    /* per task function of a kernel with adstacks (arrays of kernel->nadstacks) */
    bool ad_live;           /* adstack ops may be emitted (a task body with adstacks) */
    LLVMValueRef *ad_depth; /* per adstack: its i64 depth counter (entry-block alloca) */
    LLVMValueRef *ad_base;  /* per adstack: the address of this work item's entry 0 */
    LLVMValueRef *ad_cap;   /* per adstack: its capacity in entries (i64) */
    LLVMValueRef *ad_ptr;   /* per adstack: the address of entry depth, kept by the pushes
                               and pops of a loop whose test proved them (entry-block
                               alloca; llvm_adstack_enter_proven) */
    LLVMValueRef ad_step;   /* entries between entry k and k + 1 (i64; NULL: 1) */
    void *target;           /* the target's own state, read by its files and hooks only: the CPU's
                     llvm_cpu_state (llvm_cpu.h), the GPUs' block copies (llvm_gpu.c) */
    /* per parallel task function: atomic adds accumulated locally (llvm_reduce.c) */
    const ir_op **red_ops;
    LLVMValueRef *red_acc; /* per such op: its accumulator (entry-block alloca) */
    LLVMValueRef *red_ran; /* checked code: per such op, whether it ran (an i1 alloca) */
    uint32_t nred, capred;
    /* vector registers (the CPU's SIMD across work items, llvm_simd*.c) */
    unsigned simd_w; /* lanes of the task being emitted (0: the scalar path) */
    bool vec_ops;    /* llvm_val splats uniform operands; llvm_reg_type gives vectors */
};

/* ---- llvm_emit.c ---- */
/* Starts emitting into a new module of ctx named after m; ends with llvm_emitter_fini,
 * which returns the module (unoptimized, not verified; the caller disposes of it). */
void llvm_emitter_init(llvm_emitter *em, LLVMContextRef ctx, const ir_module *m,
                       const kc_options *o, const llvm_target_hooks *hooks);
LLVMModuleRef llvm_emitter_fini(llvm_emitter *em);
/* Per kernel: the per-parameter and per-adstack tables (em->arr_*, em->ad_*). */
void llvm_kernel_begin(llvm_emitter *em, const ir_kernel *k);
void llvm_kernel_end(llvm_emitter *em);
/* Adds a function to the module, makes it the current one and positions the builder in
 * its entry block; the value map is cleared. err: its kern_err_record * (NULL: none, no
 * debug checks). */
LLVMValueRef llvm_function_begin(llvm_emitter *em, const char *name, LLVMTypeRef fty,
                                 LLVMValueRef err);
void llvm_add_attr(llvm_emitter *em, LLVMValueRef fn, unsigned idx, const char *name);
/* Emits the uniform top-level ops of the kernel that come before `task`. */
void llvm_emit_uniforms(llvm_emitter *em, const ir_op *task);
/* The number of work items along dimension d of a parallel task: max(0, hi - lo) as i64. */
LLVMValueRef llvm_task_extent(llvm_emitter *em, const ir_op *task, uint32_t d);
/* One work item of task: the parallel indices idx[d] (in each dimension's index type;
 * NULL for a serial task), empty adstacks, then the body. */
void llvm_emit_work_item(llvm_emitter *em, const ir_op *task, LLVMValueRef *idx);
/* The structured-loop helpers the ABIs share: i < hi and i + 1 in the index type t. */
LLVMValueRef llvm_index_less(llvm_emitter *em, const kern_type *t, LLVMValueRef i, LLVMValueRef hi);
LLVMValueRef llvm_index_next(llvm_emitter *em, const kern_type *t, LLVMValueRef i);
/* The value emitted for v in the current function (it must have been emitted). */
LLVMValueRef llvm_val(llvm_emitter *em, const ir_value *v);
void llvm_set_val(llvm_emitter *em, const ir_value *v, LLVMValueRef x);
/* Records which values the ops of r use (the current task's body), for llvm_value_used. */
void llvm_find_uses(llvm_emitter *em, const ir_region *r);
bool llvm_value_used(const llvm_emitter *em, const ir_value *v);
/* A new basic block at the end of the current function. */
LLVMBasicBlockRef llvm_new_block(llvm_emitter *em, const char *name);
/* Gives the loop whose back edge is br the property key = value (`llvm.loop` metadata,
 * e.g. llvm.loop.unroll.count 4); value is an i1 or i32 constant. */
void llvm_loop_property(llvm_emitter *em, LLVMValueRef br, const char *key, LLVMValueRef value);
/* A builder at the top of the current function's entry block (for allocas, where SROA
 * promotes them); the caller disposes of it. */
LLVMBuilderRef llvm_entry_builder(llvm_emitter *em);
/* The ops of r and of its nested regions. */
uint32_t llvm_count_ops(const ir_region *r);

/* The value map itself: x is stored for v (llvm_map_put) or found (NULL: absent). */
void llvm_map_put(llvm_valmap *m, const ir_value *v, LLVMValueRef x);
bool llvm_map_has(const llvm_valmap *m, const ir_value *v);
void llvm_map_clear(llvm_valmap *m);
void llvm_map_free(llvm_valmap *m);
/* Emits the ops of r with the scalar emitter; returns r's terminator (not emitted). */
const ir_op *llvm_emit_region(llvm_emitter *em, const ir_region *r);

/* ---- llvm_emit_ops.c ---- */
/* A constant of type t (a scalar or a vector type: splatted) from an integer or a
 * double. */
LLVMValueRef llvm_const_int(LLVMTypeRef t, long long v);
LLVMValueRef llvm_const_real(LLVMTypeRef t, double v);
/* A libm-like function `name` of nargs (1 or 2) arguments of type t returning t (a scalar
 * or a vector type), declared once without observable effects; *fty its type. */
LLVMValueRef llvm_declare_math(llvm_emitter *em, const char *name, LLVMTypeRef t, unsigned nargs,
                               LLVMTypeRef *fty);
/* The register type of a scalar type (bool is i1) and its memory type (bool is i8). */
LLVMTypeRef llvm_reg_type(llvm_emitter *em, const kern_type *t);
LLVMTypeRef llvm_mem_type(llvm_emitter *em, const kern_type *t);
/* Emits a pure op, an array access or an atomic (everything but control flow and tasks)
 * and records its result. */
void llvm_emit_simple_op(llvm_emitter *em, const ir_op *op);
/* An integer value of type t widened to i64 (sign- or zero-extended as t says). */
LLVMValueRef llvm_to_i64(llvm_emitter *em, LLVMValueRef v, const kern_type *t);

/* Calls the module's kern.record_error for op (its line and column): error `code`,
 * dimension dim (i32), values a64 and b64 (i64). The first error of a launch wins. */
void llvm_record_error(llvm_emitter *em, const ir_op *op, int code, LLVMValueRef dim,
                       LLVMValueRef a64, LLVMValueRef b64);

/* The work items of parallel task, emitted by items(em, user), whose dimension d's indices
 * lie in [lo[d], hi[d]] (i64; empty when lo > hi): in checked code the ranges of the
 * accesses known before the items are tested once, and the items are emitted twice, with
 * and without those accesses' checks (llvm_chunk.c). */
void llvm_emit_tested(llvm_emitter *em, const ir_op *task, const LLVMValueRef *lo,
                      const LLVMValueRef *hi, void (*items)(llvm_emitter *em, void *user),
                      void *user);
/* Checked scalar code (CPU scalar path, GPU): an innermost for loop of a task whose
 * accesses' ranges are known before it is emitted twice by emit, behind one test of those
 * ranges, with and without their checks; false (nothing emitted) when it is not such a
 * loop. */
bool llvm_emit_tested_loop(llvm_emitter *em, const ir_op *loop,
                           void (*emit)(llvm_emitter *em, const ir_op *loop));
/* Before a loop whose test proved the pushes and pops of adstack s: em->ad_ptr[s] set to
 * the entry at the current depth, which those ops then step by one entry. */
void llvm_adstack_enter_proven(llvm_emitter *em, uint32_t s);
/* Whether a test before op's loop or task proved op (em->proven): an access in range, an
 * adstack push or pop within the capacity. */
bool llvm_proven(const llvm_emitter *em, const ir_op *op);
/* Whether access op is emitted with its bounds checks (em->checks, and not proven). */
bool llvm_access_checked(const llvm_emitter *em, const ir_op *op);

/* The address of the element that access op addresses (no debug checks: em->checks must
 * be off). */
LLVMValueRef llvm_element_ptr(llvm_emitter *em, const ir_op *op);

/* ---- llvm_reduce.c ---- */
/* In a parallel task function, after the uniform values: finds the atomic adds/subs
 * into uniform elements of arrays the task accesses no other way, and zeroes a local
 * accumulator for each (checked code tests the element's indices at the end). */
void llvm_reduce_begin(llvm_emitter *em, const ir_op *task);
/* Accumulates op locally when it is one of those; false otherwise. */
bool llvm_reduce_emit(llvm_emitter *em, const ir_op *op);
/* At the end of the task function: one atomic per accumulator. */
void llvm_reduce_end(llvm_emitter *em);
void llvm_reduce_free(llvm_emitter *em);

/* ---- llvm_adstack.c ---- */
/* In the entry block of a task body: the depth counters. The target's ABI then sets
 * em->ad_base, em->ad_cap (and em->ad_step) before the first work item. Nothing for a
 * kernel without adstacks. */
void llvm_adstack_begin(llvm_emitter *em);
void llvm_adstack_end(llvm_emitter *em);
/* Marks the conditional branch br as taking its first successor almost always. */
void llvm_likely_first(llvm_emitter *em, LLVMValueRef br);
/* Empties every stack: emitted at the start of each work item. */
void llvm_adstack_reset(llvm_emitter *em);
void llvm_emit_adpush(llvm_emitter *em, const ir_op *op);
/* The module's kern.adstack_overflow(err, line, col, cap, depth) (created on first use). */
LLVMValueRef llvm_adstack_overflow_fn(llvm_emitter *em);
void llvm_emit_adpop(llvm_emitter *em, const ir_op *op);

/* ---- llvm_cpu.c ---- */
/* Registers the native target once per process (thread-safe). */
void llvm_init_native(void);
/* A target machine for the host CPU and its features. */
LLVMTargetMachineRef llvm_host_target_machine(int opt_level, LLVMRelocMode reloc, char *err,
                                              size_t errlen);
/* Builds the CPU module of m in ctx (unoptimized, not verified): the functions of
 * runtime/abi.h. Never fails on IR that verifies. */
LLVMModuleRef llvm_cpu_emit_module(LLVMContextRef ctx, const ir_module *m, const kc_options *o);
/* The part `part` of that module, for compiling parts on several threads: the functions of
 * the tasks t (numbered through the module's kernels in order) with part_of[t] == part,
 * and in part 0 the kernels' kern_<K>__lanes constants. part_of NULL: the whole module. */
LLVMModuleRef llvm_cpu_emit_part(LLVMContextRef ctx, const ir_module *m, const kc_options *o,
                                 const unsigned *part_of, unsigned part);
/* Emits m for the CPU and finishes it with tm (llvm_finish_module). */
LLVMModuleRef llvm_build_module(LLVMContextRef ctx, const ir_module *m, const kc_options *o,
                                LLVMTargetMachineRef tm, char *err, size_t errlen);

/* ---- llvm_target.c ---- */
/* For a module already emitted: the triple and data layout of tm, verification (debug
 * builds of kern), and the default<O0..3> pipeline of o->opt_level. Disposes of mod and
 * returns NULL on failure. */
LLVMModuleRef llvm_finish_module(LLVMModuleRef mod, const kc_options *o, LLVMTargetMachineRef tm,
                                 char *err, size_t errlen);
/* Makes LLVM's fatal errors (which end the process) say that they are an internal error
 * of kern's code generation; once per process. */
void llvm_install_fatal_handler(void);
/* A new LLVM context whose error diagnostics are kept for llvm_context_error: LLVM's own
 * handler prints them and exits the process (a damaged libdevice did, issue 23). Freed
 * with llvm_context_free, never with LLVMContextDispose. */
LLVMContextRef llvm_context_new(void);
void llvm_context_free(LLVMContextRef ctx);
/* The first error diagnostic reported on ctx ("" when none). */
const char *llvm_context_error(LLVMContextRef ctx);
/* The code generator's optimization level for opt_level 0..3. */
LLVMCodeGenOptLevel llvm_codegen_level(int opt_level);
/* printf into err (NULL/0 allowed). */
void llvm_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The symbol of task `task` of kernel `kernel` (runtime/abi.h), into buf. */
void llvm_task_symbol(char *buf, size_t size, const char *kernel, int task, bool count);
/* The symbol of the sizer kernel of adstack s of `kernel` (docs/gpu-abi.md), into buf. */
void llvm_sizer_symbol(char *buf, size_t size, const char *kernel, int s);

#endif
