/* llvm_simd.h - what the two halves of the CPU's SIMD code share (llvm_simd.c chooses the
 * tasks and lanes and holds the vector math, llvm_simd_emit.c emits the task): the task's
 * divergence (em->div, passes/divergence.c) as the emitter asks it, and the host's
 * vectors. */
#ifndef KERN_LLVM_SIMD_H
#define KERN_LLVM_SIMD_H

#include "llvm_cpu.h"

static inline bool is_v(const llvm_emitter *em, const ir_value *v) {
    return ir_div_varying(&llvm_cpu(em)->div, v);
}
static inline bool is_lin(const llvm_emitter *em, const ir_value *v) {
    return ir_div_linear(&llvm_cpu(em)->div, v);
}
static inline bool masked_loop(const llvm_emitter *em, const ir_op *op) {
    return ir_div_loop_divergent(&llvm_cpu(em)->div, op);
}
static inline bool any_index_varying(const llvm_emitter *em, const ir_op *op) {
    return ir_div_access_varying(&llvm_cpu(em)->div, op);
}

/* Work items sorted by trip count (passes/trip_sort.c) in windows of SORT_VECTORS
 * vectors (llvm_simd_emit.c): the plan for the task's body, from its divergence. */
enum { SORT_VECTORS = 16 };
bool llvm_simd_sort_plan(const llvm_emitter *em, const ir_region *body, ir_trip_sort *s);

/* A math op that runs through the vector math library (sin, exp, pow, ...). */
bool llvm_simd_is_math_op(ir_opcode c);
/* The host's widest vector registers in bits: 128, 256 or 512 (a fact of the machine). */
unsigned llvm_simd_host_bits(void);

#endif
