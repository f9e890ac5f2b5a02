/* llvm_cpu.h - the CPU target's own state in the LLVM emitter (em->target), which only the
 * CPU's files and hooks read: llvm_cpu.c (task functions), llvm_reduce.c (neighbour adds),
 * llvm_simd.c and llvm_simd_emit.c (SIMD across work items). */
#ifndef KERN_LLVM_CPU_H
#define KERN_LLVM_CPU_H

#include "llvm_internal.h"

typedef struct llvm_cpu_state {
    /* parallel task functions: neighbour scatters added without atomics inside the chunk
     * (llvm_reduce.c) */
    const ir_op **nb_ops;
    uint32_t *nb_dim; /* per such op: the dimension addressed with i0 + c */
    int64_t *nb_k;    /* per such op: the largest |c| of its array */
    uint32_t nnb, capnb;
    LLVMValueRef nb_from, nb_to; /* the chunk's items of dimension 0 (i64) */
    /* parallel task functions run with SIMD across work items (llvm_simd*.c) */
    LLVMValueRef mask; /* <W x i1>: the lanes that run the current code */
    ir_divergence div; /* the task's divergence (passes/divergence.c): its varying values,
                          linear ones and adstacks whose depths differ between lanes */
    LLVMValueRef sink; /* 8 bytes (entry-block alloca): where lanes that are off load and store */
    bool plain_loop;   /* the scalar task's work-item loop is not to be vectorized either */
} llvm_cpu_state;

static inline llvm_cpu_state *llvm_cpu(const llvm_emitter *em) {
    return (llvm_cpu_state *)em->target;
}

/* CPU task functions, after the uniform values, with the chunk's bounds of dimension 0:
 * finds the float atomic adds/subs into arrays addressed with i0 + c in one dimension
 * (nothing in debug builds or with kc_options.no_neighbour_adds). */
void llvm_neighbour_begin(llvm_emitter *em, const ir_op *task, LLVMValueRef from, LLVMValueRef to);
/* Emits op (one of those) as a plain add inside the chunk, atomic near its ends; false
 * when op is not one of them (the CPU's atomic_add hook). */
bool llvm_neighbour_emit(llvm_emitter *em, const ir_op *op, LLVMValueRef ptr, LLVMValueRef v,
                         unsigned align);
void llvm_neighbour_end(llvm_emitter *em);
void llvm_neighbour_free(llvm_cpu_state *cpu);
/* The vector value of a float math op (x: vector operands), through the vector math
 * library where it has the function, else lane by lane (llvm_simd.c; the CPU's math
 * hook). */
LLVMValueRef llvm_simd_math(llvm_emitter *em, const ir_op *op, LLVMValueRef *x);

/* ---- llvm_simd.c, llvm_simd_emit.c ---- */
/* The lanes a CPU parallel task runs with (0: the scalar path); *why says why not when
 * 0 (a static string). Decided from o->simd, $KERN_SIMD and the host's vector ISA. Sets
 * em->plain_loop when vectors have nothing to do in the task at all. */
unsigned llvm_simd_lanes(llvm_emitter *em, const ir_op *task, const char **why);
/* Emits the work items of task from `from` to `to` (index type of dimension 0) W at a
 * time, after llvm_simd_lanes said W. */
void llvm_simd_emit_task(llvm_emitter *em, const ir_op *task, unsigned w, LLVMValueRef from,
                         LLVMValueRef to);
/* The name of a vector math function for `base` (e.g. "sinf") on n lanes and nargs
 * vector arguments, or NULL when the library lacks it; the JIT resolves such names. */
bool llvm_simd_is_vector_math(const char *name);
void *llvm_simd_vector_math_address(const char *name);

#endif
