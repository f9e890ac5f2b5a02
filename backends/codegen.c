/* codegen.c - the table of code generators (codegen.h) and GPU module files. */
#include "codegen.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/outfile.h"
#include "../include/kern.h"
#include "../runtime/provider.h"
#include "spirv/spv_emit.h"
#include "llvm/llvm_backend.h"

static char *cpu_emit(const ir_module *m, const kc_options *o, const char *kind, char *err,
                      size_t errlen) {
    (void)kind; /* "llvm" only */
    return llvm_emit_text(m, o, err, errlen);
}

static char *cuda_emit(const ir_module *m, const kc_options *o, const char *kind, char *err,
                       size_t errlen) {
    if (!strcmp(kind, "llvm"))
        return llvm_emit_nvptx_ir(m, o, err, errlen);
    return llvm_emit_ptx(m, o, err, errlen);
}

static char *cuda_code(const ir_module *m, const kc_options *o, size_t *len, char *err,
                       size_t errlen) {
    char *ptx = llvm_emit_ptx(m, o, err, errlen);
    *len = ptx ? strlen(ptx) : 0;
    return ptx;
}

/* The SPIR-V module's words as the code image (KERN_CODE_SPIRV): --emit=spirv and the
 * module files of `kernc build --target=vulkan`. */
static char *vulkan_code(const ir_module *m, const kc_options *o, size_t *len, char *err,
                         size_t errlen) {
    size_t n = 0;
    uint32_t *w = kc_spirv_emit(m, o, &n, err, errlen);
    if (!w)
        return NULL;
    char *bytes = realloc(w, n * 4 + 1); /* the image is followed by a NUL (codegen.h) */
    if (!bytes) {
        free(w);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    bytes[n * 4] = '\0';
    *len = n * 4;
    return bytes;
}

static char *vulkan_emit(const ir_module *m, const kc_options *o, const char *kind, char *err,
                         size_t errlen) {
    /* "spirv-asm" or "msl"; the binary kinds go through vulkan_code */
    size_t n = 0;
    uint32_t *w = kc_spirv_emit(m, o, &n, err, errlen);
    if (!w)
        return NULL;
    char *text = !strcmp(kind, "msl") ? kc_spirv_to_msl(w, n, err, errlen)
                                      : kc_spirv_disassemble(w, n, err, errlen);
    free(w);
    return text;
}

#ifdef KERN_HAVE_AMDGPU
static char *amdgpu_emit(const ir_module *m, const kc_options *o, const char *kind, char *err,
                         size_t errlen) {
    if (!strcmp(kind, "llvm"))
        return llvm_emit_amdgpu_ir(m, o, err, errlen);
    return llvm_emit_amdgcn(m, o, err, errlen);
}
#endif

static const kc_codegen codegens[] = {
    {
        .target = "cpu",
        .backend = KERN_BACKEND_CPU,
        .code_kind = KERN_CODE_HOST,
        .emit_kinds = "llvm",
        .emit = cpu_emit,
    },
    {
        .target = "cuda",
        .backend = KERN_BACKEND_CUDA,
        .code_kind = KERN_CODE_PTX,
        .emit_kinds = "llvm, ptx",
        .default_arch = LLVM_NVPTX_DEFAULT_ARCH,
        .arch_valid = llvm_nvptx_arch_valid,
        .emit = cuda_emit,
        .code = cuda_code,
    },
    {
        .target = "vulkan",
        .backend = KERN_BACKEND_VULKAN,
        .code_kind = KERN_CODE_SPIRV,
        .emit_kinds = "spirv, spirv-asm, msl",
        .binary_kinds = "spirv",
        .emit = vulkan_emit,
        .code = vulkan_code,
    },
#ifdef KERN_HAVE_AMDGPU
    {
        .target = "amdgpu",
        .backend = KERN_BACKEND_AMDGPU,
        .code_kind = KERN_CODE_HSACO,
        .emit_kinds = "llvm, amdgcn",
        .default_arch = LLVM_AMDGPU_DEFAULT_ARCH,
        .arch_valid = llvm_amdgpu_arch_valid,
        .emit = amdgpu_emit,
        .code = llvm_emit_hsaco,
    },
#endif
};

const kc_codegen *kc_codegen_find(const char *target) {
    for (size_t i = 0; target && i < sizeof codegens / sizeof *codegens; i++)
        if (!strcmp(codegens[i].target, target))
            return &codegens[i];
    return NULL;
}

const kc_codegen *kc_codegen_for_backend(int backend) {
    for (size_t i = 0; i < sizeof codegens / sizeof *codegens; i++)
        if (codegens[i].backend == backend)
            return &codegens[i];
    return NULL;
}

const char *kc_codegen_targets(void) {
#ifdef KERN_HAVE_AMDGPU
    return "cpu, cuda, vulkan, amdgpu";
#else
    return "cpu, cuda, vulkan";
#endif
}

bool kc_write_module_file(const char *path, const char *target, const char *meta, size_t metalen,
                          const char *code, size_t codelen, char *err, size_t errlen) {
    kern_outfile o;
    if (!kern_outfile_open(&o, path, err, errlen))
        return false;
    char head[160];
    int n = snprintf(head, sizeof head, "kern-module 1 %s\nmeta %zu\n", target, metalen);
    kern_outfile_write(&o, head, (size_t)n);
    kern_outfile_write(&o, meta, metalen);
    n = snprintf(head, sizeof head, "\ncode %zu\n", codelen);
    kern_outfile_write(&o, head, (size_t)n);
    kern_outfile_write(&o, code, codelen);
    kern_outfile_write(&o, "\n", 1);
    return kern_outfile_commit(&o, path, err, errlen);
}
