/* llvm_internal.h - what the files of the LLVM CPU backend share (not a public API).
 *
 *   llvm_emit.c      module, task functions, parameters, structured control flow
 *   llvm_emit_ops.c  scalar ops, math, casts, array accesses, atomics, debug checks
 *   llvm_adstack.c   adstack depth counters, push and pop, overflow records
 *   llvm_reduce.c    atomic adds into uniform elements accumulated per task call
 *   llvm_target.c    host target machine, verification, the optimization pipeline
 *   llvm_jit.c       ORC LLJIT;  llvm_obj.c  object files and LLVM text */
#ifndef KERN_LLVM_INTERNAL_H
#define KERN_LLVM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "../../common/context.h"
#include "../../ir/ir.h"

/* An ir_value -> LLVMValueRef map (open addressing on the pointer), reset per function. */
typedef struct llvm_valmap {
    const ir_value **keys;
    LLVMValueRef *vals;
    size_t cap, len; /* cap is 0 or a power of two */
} llvm_valmap;

/* The state of emitting one module. */
typedef struct llvm_emitter {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    const kc_options *opts;
    LLVMTypeRef t_i1, t_i8, t_i32, t_i64, t_f32, t_f64, t_ptr, t_void;
    LLVMValueRef err_fn;   /* the module's error-recording helper (created on first use) */
    /* per function */
    LLVMValueRef fn;       /* the function being emitted */
    LLVMValueRef err;      /* its kern_err_record * (NULL in a _count function) */
    bool checks;           /* emit debug-mode checks (opts->debug and err != NULL) */
    const ir_kernel *kernel;
    LLVMValueRef *arr_data;               /* per parameter: an array's data pointer */
    LLVMValueRef (*arr_shape)[KERN_MAX_RANK]; /* per parameter: an array's extents (i64) */
    llvm_valmap map;
    /* per task function of a kernel with adstacks (arrays of kernel->nadstacks) */
    bool ad_live;             /* adstack ops may be emitted (a task body with adstacks) */
    LLVMValueRef *ad_depth;   /* per adstack: its i64 depth counter (entry-block alloca) */
    LLVMValueRef *ad_base;    /* per adstack: the address of its entry 0 in the slice */
    LLVMValueRef *ad_cap;     /* per adstack: its capacity in entries (i64) */
    /* per parallel task function: atomic adds accumulated locally (llvm_reduce.c) */
    const ir_op **red_ops;
    LLVMValueRef *red_acc;    /* per such op: its accumulator (entry-block alloca) */
    uint32_t nred, capred;
} llvm_emitter;

/* ---- llvm_emit.c ---- */
/* Builds the LLVM module of m in ctx (unoptimized, not verified). Never fails on IR that
 * verifies. The caller disposes of the module. */
LLVMModuleRef llvm_emit_module(LLVMContextRef ctx, const ir_module *m, const kc_options *o);
/* The value emitted for v in the current function (it must have been emitted). */
LLVMValueRef llvm_val(llvm_emitter *em, const ir_value *v);
void llvm_set_val(llvm_emitter *em, const ir_value *v, LLVMValueRef x);
/* A new basic block at the end of the current function. */
LLVMBasicBlockRef llvm_new_block(llvm_emitter *em, const char *name);

/* ---- llvm_emit_ops.c ---- */
/* The register type of a scalar type (bool is i1) and its memory type (bool is i8). */
LLVMTypeRef llvm_reg_type(llvm_emitter *em, const kern_type *t);
LLVMTypeRef llvm_mem_type(llvm_emitter *em, const kern_type *t);
/* Emits a pure op, an array access or an atomic (everything but control flow and tasks)
 * and records its result. */
void llvm_emit_simple_op(llvm_emitter *em, const ir_op *op);
/* An integer value of type t widened to i64 (sign- or zero-extended as t says). */
LLVMValueRef llvm_to_i64(llvm_emitter *em, LLVMValueRef v, const kern_type *t);

/* The address of the element that access op addresses (no debug checks: em->checks must
 * be off). */
LLVMValueRef llvm_element_ptr(llvm_emitter *em, const ir_op *op);

/* ---- llvm_reduce.c ---- */
/* In a parallel task function, after the uniform values: finds the atomic adds/subs
 * into uniform elements of arrays the task accesses no other way, and zeroes a local
 * accumulator for each (nothing in debug builds). */
void llvm_reduce_begin(llvm_emitter *em, const ir_op *task);
/* Accumulates op locally when it is one of those; false otherwise. */
bool llvm_reduce_emit(llvm_emitter *em, const ir_op *op);
/* At the end of the task function: one atomic per accumulator. */
void llvm_reduce_end(llvm_emitter *em);
void llvm_reduce_free(llvm_emitter *em);

/* ---- llvm_adstack.c ---- */
/* In the entry block of a task body (after the parameters): the depth counters and the
 * loads of the layout (em->ad_* must hold kernel->nadstacks entries). Leaves the builder
 * in the block where the body goes on. Nothing for a kernel without adstacks. */
void llvm_adstack_begin(llvm_emitter *em, LLVMValueRef slice, LLVMValueRef layout);
void llvm_adstack_end(llvm_emitter *em);
/* Empties every stack: emitted at the start of each work item. */
void llvm_adstack_reset(llvm_emitter *em);
void llvm_emit_adpush(llvm_emitter *em, const ir_op *op);
void llvm_emit_adpop(llvm_emitter *em, const ir_op *op);

/* ---- llvm_target.c ---- */
/* Registers the native target once per process (thread-safe). */
void llvm_init_native(void);
/* A target machine for the host CPU and its features. */
LLVMTargetMachineRef llvm_host_target_machine(int opt_level, LLVMRelocMode reloc, char *err,
                                              size_t errlen);
/* Emits m, sets the host triple and data layout of tm, verifies (debug builds of kern, or
 * always when `verify`), and runs the default<O0..3> pipeline of o->opt_level. Returns
 * NULL with a message on failure. */
LLVMModuleRef llvm_build_module(LLVMContextRef ctx, const ir_module *m, const kc_options *o,
                                LLVMTargetMachineRef tm, char *err, size_t errlen);
/* The second half of llvm_build_module, for a module already emitted: target, checks and
 * pipeline. Disposes of mod and returns NULL on failure. */
LLVMModuleRef llvm_finish_module(LLVMModuleRef mod, const kc_options *o, LLVMTargetMachineRef tm,
                                 char *err, size_t errlen);
/* printf into err (NULL/0 allowed). */
void llvm_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The symbol of task `task` of kernel `kernel` (runtime/abi.h), into buf. */
void llvm_task_symbol(char *buf, size_t size, const char *kernel, int task, bool count);

#endif
