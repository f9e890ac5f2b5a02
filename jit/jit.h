/* jit.h - the JIT library below the public API (jit/jit.c), for tools that compile with
 * their own compiler options (kernc run, kernc gradcheck): an IR module, already
 * compiled by the compiler library, becomes a runtime module of a CPU context.
 * kern_module_from_source (include/kern.h) is built on it. */
#ifndef KERN_JIT_H
#define KERN_JIT_H

#include "../common/context.h"
#include "../include/kern.h"
#include "../ir/ir.h"

/* JIT-compiles every kernel of m (gradient kernels included) with the code options of o
 * (opt_level, debug) and makes a module of ctx from it; name is used in messages (NULL =
 * "<source>"). m stays the caller's. On failure the context's message says why:
 * KERN_ERR_UNSUPPORTED for a backend other than the CPU, KERN_ERR_INTERNAL when code
 * generation fails. */
kern_status jit_module_from_ir(kern_context *ctx, const ir_module *m, const kc_options *o,
                               const char *name, kern_module **out);
/* The compile cache (cache.h, docs/runtime.md) for tools that compile with their own
 * options and print the compiler's warnings (kernc run). jit_cache_has: whether the cache
 * of a context with options co holds an entry for `len` bytes of source named name compiled
 * with o for target. jit_module_cached: that entry's module on ctx; KERN_ERR_NOT_FOUND with
 * nothing changed when there is none or it does not load (then it is removed). */
bool jit_cache_has(const kern_context_options *co, const char *target, const char *name,
                   const char *source, size_t len, const kc_options *o);
kern_status jit_module_cached(kern_context *ctx, const char *name, const char *source, size_t len,
                              const kc_options *o, kern_module **out);
/* jit_module_from_ir, and the module kept in ctx's compile cache under the key of (name,
 * source, o), m being what compiling that source with o gave. */
kern_status jit_module_from_ir_keep(kern_context *ctx, const ir_module *m, const kc_options *o,
                                    const char *name, const char *source, size_t len,
                                    kern_module **out);
/* Lets the launches of mod's K.grad build K.grad.ckpt from `source` (compiled with o) when
 * the memory budget needs it (docs/autodiff.md): kernc run compiles without it. */
kern_status jit_module_lazy_ckpt(kern_module *mod, const kc_options *o, const char *name,
                                 const char *source, size_t len);

#endif
