/* env.h - the environment variables kern reads, and the one place it reads them.
 *
 * Library code below the public API never calls getenv: it reads option fields. The
 * environment is read at the boundary, into those fields: kc_options_from_env by kernc's
 * main and by the JIT's entry points (jit/jit.c), and kern_context_create for the runtime's
 * own variables (runtime/context.c). Every variable has a field, so a host program can set
 * each one without the environment (docs/runtime.md, docs/cli.md). */
#ifndef KERN_ENV_H
#define KERN_ENV_H

#include <stdbool.h>

#include "context.h"

/* The lanes that a --simd / KERN_SIMD value names (auto 0, off -1, sse 4, avx2 8, avx512 16,
 * 4..64 as counts); false for anything else. */
bool kc_parse_simd(const char *s, int *lanes);

/* The KERN_DEBUG list (print, roundtrip, verify; comma-separated) as IR_DEBUG_* bits
 * (ir/ir.h); unknown words are ignored. */
unsigned kc_parse_pass_debug(const char *s);

/* Fills the fields of o that the caller left at their defaults from the environment:
 *   KERN_SIMD               simd (when 0)
 *   KERN_JIT_THREADS        jit_threads (when 0)
 *   KERN_SCATTER_ADJOINTS   scatter_adjoints (1: the atomic scatter form of neighbour reads)
 *   KERN_NO_CKPT            no_ckpt (1: no K.grad.ckpt, as kernc build --no-ckpt)
 *   KERN_NO_NEIGHBOUR_ADDS  no_neighbour_adds (CPU: neighbour scatters stay atomic)
 *   KERN_NO_LIBMVEC         no_vector_math (SIMD math lane by lane through libm)
 *   KERN_JIT_EAGER_GRADS    eager_grads (JIT modules build every K.grad at once)
 *   KERN_DEBUG              pass_debug
 *   KERN_LIBDEVICE          libdevice (when NULL)
 *   CUDA_HOME, CUDA_PATH    cuda_home (when NULL): where libdevice is searched
 *   KERN_LLD                lld (when NULL): the linker of AMDGPU code objects
 * A value that is not understood gets a warning on stderr and the default. The strings
 * stay the environment's: copy them to keep them past a later setenv. */
void kc_options_from_env(kc_options *o);

#endif
