/* llvm_gpu.h - what a GPU target gives the shared GPU ABI (llvm_gpu.c). Not a public API. */
#ifndef KERN_LLVM_GPU_H
#define KERN_LLVM_GPU_H

#include <string.h>

#include "llvm_internal.h"

typedef struct llvm_gpu_target {
    llvm_target_hooks hooks;
    /* this thread's index in the grid and the grid's thread count, as i64 */
    LLVMValueRef (*thread_index)(llvm_emitter *em);
    LLVMValueRef (*thread_count)(llvm_emitter *em);
    /* makes fn a kernel entry point (calling convention, annotations) */
    void (*mark_kernel)(llvm_emitter *em, LLVMValueRef fn);
    /* a barrier of the block (memory included), the thread's index in its block and the
     * block's size (i64); NULL barrier: no block copies of arrays */
    void (*barrier)(llvm_emitter *em);
    LLVMValueRef (*block_index)(llvm_emitter *em);
    LLVMValueRef (*block_size)(llvm_emitter *em);
    /* caps entry fn's registers per thread at those of full occupancy (NULL: no cap) */
    void (*limit_registers)(llvm_emitter *em, LLVMValueRef fn);
} llvm_gpu_target;

/* A target's float atomic add of v at ptr (any address space); uniform: every thread of
 * the warp that runs it adds at the same address (llvm_gpu_uniform_access). */
typedef void (*llvm_gpu_fadd_fn)(llvm_emitter *em, LLVMValueRef ptr, LLVMValueRef v, unsigned align,
                                 bool uniform);
/* Whether access op of the task being emitted has one index in all the threads that run it
 * together (a one-dimensional task, an index the divergence analysis finds uniform). */
bool llvm_gpu_uniform_access(const llvm_emitter *em, const ir_op *op);
/* The float atomic add of v into element lin of op's array when that array has a block
 * copy (into the block's copy while the array fits it, else into the array, both through
 * the target's fadd); false when it has none. */
bool llvm_gpu_block_fadd(llvm_emitter *em, const ir_op *op, LLVMValueRef ptr, LLVMValueRef lin,
                         LLVMValueRef v, unsigned align, llvm_gpu_fadd_fn global_fadd);

/* Builds the GPU module of m in ctx (unoptimized, not verified): one entry point per task
 * (docs/gpu-abi.md). Never fails on IR that verifies. */
LLVMModuleRef llvm_gpu_emit_module(LLVMContextRef ctx, const ir_module *m, const kc_options *o,
                                   const llvm_gpu_target *gt);

/* The type of a GPU entry point of k (entry) or of its sizers (!entry: the kernel's
 * parameters, then ptr res), docs/gpu-abi.md. */
LLVMTypeRef llvm_gpu_fn_type(llvm_emitter *em, const ir_kernel *k, bool entry);
/* Binds the parameters of a GPU entry point (docs/gpu-abi.md) to the kernel body's
 * arguments (em->arr_data, em->arr_shape for arrays); returns the index of the first
 * parameter after them. */
unsigned llvm_gpu_bind_params(llvm_emitter *em, LLVMValueRef fn);
/* The sizer entry point of adstack s of the current kernel, whose capacity is e. */
struct sz_expr;
void llvm_gpu_emit_sizer(llvm_emitter *em, const llvm_gpu_target *gt, uint32_t s,
                         const struct sz_expr *e);

/* Every adstack's sizer of m, with a trampoline each, for the host CPU (llvm_sizer_host.c;
 * unoptimized, not verified). */
LLVMModuleRef llvm_host_sizers(LLVMContextRef ctx, const ir_module *m, const kc_options *o);

#endif
