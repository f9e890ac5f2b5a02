/* codegen.h - the code generators, one table entry per target (in the spirit of QBE's
 * Target): what `kernc --target=T`, `kernc emit`, `kernc build` and the JIT library ask of
 * a backend, so that no caller compares target names or calls a backend directly.
 *
 *   cpu    LLVM, the host CPU: the JIT (ORC, in process) and shared objects
 *   cuda   LLVM NVPTX: PTX text, loaded by the runtime's CUDA device (docs/gpu-abi.md)
 *   amdgpu LLVM AMDGPU: code objects (builds with KERN_HAVE_AMDGPU; no runtime device)
 *   vulkan kern's own SPIR-V emitter (backends/spirv/): a SPIR-V module for the Vulkan device
 *          (docs/spirv-abi.md)
 * What a target is (its name, code kind, emit kinds, architecture) is the registry's
 * (common/target.h); this table adds what the compiler does for it.
 *
 * A GPU target's code is an image the runtime's device loads (runtime/provider.h's
 * kern_code_kind); its ahead-of-time module file is the container of docs/gpu-abi.md,
 * written by kc_write_module_file. */
#ifndef KERN_CODEGEN_H
#define KERN_CODEGEN_H

#include <stdbool.h>
#include <stddef.h>

#include "../common/context.h"
#include "../common/target.h"
#include "../ir/ir.h"

typedef struct kc_codegen {
    const kern_target *t; /* the target (common/target.h): name, backend, code kind, emit
                             kinds, default architecture */
    bool (*arch_valid)(const char *arch); /* NULL: the target takes no --arch */
    /* The text of --emit=kind (one of t->emit_kinds), malloc'd; NULL with a message. */
    char *(*emit)(const ir_module *m, const kc_options *o, const char *kind, char *err,
                  size_t errlen);
    /* GPU targets: the code image of every kernel of m, malloc'd (*len bytes, followed by
     * a NUL that len does not count); NULL with a message. NULL for the CPU, whose code
     * is compiled in the process (llvm_jit) or into a shared object (`object`). */
    char *(*code)(const ir_module *m, const kc_options *o, size_t *len, char *err, size_t errlen);
    /* The CPU: an object file of every kernel of m at path (kernc build links it). */
    bool (*object)(const ir_module *m, const kc_options *o, const char *path, char *err,
                   size_t errlen);
} kc_codegen;

/* The code generator of a target name ("cpu", "cuda"), or NULL when this build has none. */
const kc_codegen *kc_codegen_find(const char *target);
/* The code generator for a kern_backend, or NULL. */
const kc_codegen *kc_codegen_for_backend(int backend);
/* The names of every target this build generates code for ("cpu, cuda, vulkan"), into
 * buf; returns buf. */
char *kc_codegen_targets(char *buf, size_t size);

/* Writes an ahead-of-time module file for a GPU target (docs/gpu-abi.md, common/modfile.h):
 * the header line, the metadata text, the code and their checksum. Regular files are
 * written through a temporary file and a rename; false with a message on failure (nothing
 * left behind). */
bool kc_write_module_file(const char *path, const char *target, const char *meta, size_t metalen,
                          const char *code, size_t codelen, char *err, size_t errlen);

#endif
