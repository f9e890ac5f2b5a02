/* llvm_backend.h - the LLVM 19 CPU backend (llvm-c): IR module -> native code.
 *
 * The code follows the CPU ABI of runtime/abi.h: per task t of kernel K, the functions
 *   int64_t kern_<K>__t<t>_count(void *const *args);
 *   void    kern_<K>__t<t>(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
 *                          void *ad_slice, const int64_t *ad_layout);
 * (K with '.' written "__"). docs/backend-cpu.md describes the code shape, the math and
 * atomics mapping, the adstacks of gradient kernels, the debug-mode checks and the
 * optimization pipeline.
 *
 * Every entry point takes the IR module read-only (it must verify), the compiler options
 * (opt_level 0..3 selects default<O0..O3>; debug adds the run-time checks), and reports a
 * failure as a message in err (when errlen > 0) with a false/NULL return. Nothing here
 * keeps process-global mutable state besides LLVM's own one-time target registration, so
 * two threads may compile at once. */
#ifndef KERN_LLVM_BACKEND_H
#define KERN_LLVM_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "../../common/context.h"
#include "../../common/target.h" /* the default architectures */
#include "../../common/util.h"
#include "../../ir/ir.h"

/* The version of the LLVM library kern runs on ("19.1.7", LLVMGetVersion), into buf;
 * returns buf. */
char *llvm_version(char *buf, size_t size);

/* ---- JIT (ORC LLJIT) -------------------------------------------------------------- */

typedef struct llvm_jit llvm_jit;

/* Compiles every kernel of m for the host and loads it into a new JIT (the code is
 * generated and linked here, not at the first lookup). The tasks are split into parts
 * compiled on threads of their own (up to the online CPUs, or $KERN_JIT_THREADS). libm
 * and libc symbols resolve from the process. Returns NULL with a message on failure. */
llvm_jit *llvm_jit_compile(const ir_module *m, const kc_options *o, char *err, size_t errlen);
/* The address of a symbol of the JIT's module (e.g. "kern_saxpy__t0"); NULL if absent. */
void *llvm_jit_lookup(llvm_jit *j, const char *sym);
/* llvm_jit_compile that also appends to *objects what llvm_jit_load takes back: the object
 * file of every part, the task symbol that links it and the vector math functions the code
 * calls (the compile cache keeps it, jit/cache.c). */
llvm_jit *llvm_jit_compile_keep(const ir_module *m, const kc_options *o, kern_buf *objects,
                                char *err, size_t errlen);
/* A JIT of the objects that llvm_jit_compile_keep wrote, in this or another process of the
 * same host and build (the cache's key says so): linked here, without compiling anything.
 * NULL with a message when the bytes are damaged or do not link. */
llvm_jit *llvm_jit_load(const char *objects, size_t len, const kc_options *o, char *err,
                        size_t errlen);
/* Appends what host code depends on besides the IR and the options: LLVM's version, the
 * host's triple, CPU name and features, whether libmvec loads (the cache's key). */
void llvm_host_describe(kern_buf *b);
/* Seconds the last llvm_jit_compile spent, split as IR emission, the optimization
 * pipeline and machine-code generation (with linking), the latter two of the part that
 * took longest, and the parts the module was compiled in on as many threads (for
 * benchmarks, docs and tests). */
typedef struct llvm_jit_times {
    double emit_s, opt_s, codegen_s, total_s;
    unsigned parts;
} llvm_jit_times;
llvm_jit_times llvm_jit_get_times(const llvm_jit *j);
/* The GPU sizer kernels of every adstack of m (backends/llvm/llvm_sizer.c) compiled for
 * the host, so that tests can run them against the host evaluator (tests/test_sizer.c):
 *   void kern_<K>__s<s>(const int64_t *slots)
 * takes the sizer's parameters (docs/gpu-abi.md: the kernel's, then res) from consecutive
 * 8-byte slots; the grid is the i64 globals kern_sizer_tid and kern_sizer_nthreads
 * (llvm_sizer_host.c). Returns NULL with a message on failure. */
llvm_jit *llvm_jit_host_sizers(const ir_module *m, const kc_options *o, char *err, size_t errlen);
void llvm_jit_free(llvm_jit *j);

/* ---- Ahead of time ---------------------------------------------------------------- */

/* Writes a relocatable object file (position-independent, for `cc -shared`) for the host
 * CPU with every task function of m. */
bool llvm_emit_object(const ir_module *m, const kc_options *o, const char *path, char *err,
                      size_t errlen);
/* Same, and adds a constant global byte array `blob_symbol` (external, size blob_len,
 * followed by one NUL byte) holding blob: a way to embed the module metadata text
 * (runtime/meta.h) in the object. blob_symbol NULL: no array (as llvm_emit_object). */
bool llvm_emit_object_blob(const ir_module *m, const kc_options *o, const char *path,
                           const char *blob_symbol, const void *blob, size_t blob_len, char *err,
                           size_t errlen);
/* The optimized LLVM IR text of m (--emit=llvm), malloc'd (the caller frees), or NULL
 * with a message. */
char *llvm_emit_text(const ir_module *m, const kc_options *o, char *err, size_t errlen);

/* ---- NVPTX (llvm_nvptx.c; docs/gpu-abi.md) ----------------------------------------- */

/* Whether kern compiles for CUDA architecture arch (kern_target_cuda.arches). */
bool llvm_nvptx_arch_valid(const char *arch);
/* The PTX of every kernel of m for o->arch (NULL: kern_target_cuda.default_arch), malloc'd, or
 * NULL with a message (an unknown arch, libdevice missing where math needs it). */
char *llvm_emit_ptx(const ir_module *m, const kc_options *o, char *err, size_t errlen);
/* The optimized NVPTX LLVM IR (--emit=llvm --target=cuda), malloc'd, or NULL. */
char *llvm_emit_nvptx_ir(const ir_module *m, const kc_options *o, char *err, size_t errlen);
/* The kernels' own NVPTX LLVM IR, before libdevice is linked and before optimization (the
 * calls of libdevice's functions still there; for tests), malloc'd. */
char *llvm_emit_nvptx_own_ir(const ir_module *m, const kc_options *o);

/* ---- AMDGPU (llvm_amdgpu.c; docs/gpu-abi.md) ---------------------------------------- */

/* Whether kern compiles for AMD GPU architecture arch (kern_target_amdgpu.arches). */
bool llvm_amdgpu_arch_valid(const char *arch);
/* --emit=amdgcn: the assembly of every kernel of m, malloc'd, or NULL with a message (a
 * builtin the target cannot compile in this build is an error naming it). */
char *llvm_emit_amdgcn(const ir_module *m, const kc_options *o, char *err, size_t errlen);
/* --emit=llvm --target=amdgpu: the optimized AMDGPU LLVM IR. */
char *llvm_emit_amdgpu_ir(const ir_module *m, const kc_options *o, char *err, size_t errlen);
/* A loadable code object (.hsaco, linked with ld.lld), malloc'd (*len bytes), or NULL. */
char *llvm_emit_hsaco(const ir_module *m, const kc_options *o, size_t *len, char *err,
                      size_t errlen);

#endif
