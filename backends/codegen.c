/* codegen.c - the table of code generators (codegen.h) and GPU module files. */
#include "codegen.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/modfile.h"
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
    {.t = &kern_target_cpu, .emit = cpu_emit, .object = llvm_emit_object},
    {.t = &kern_target_cuda, .arch_valid = llvm_nvptx_arch_valid, .emit = cuda_emit,
     .code = cuda_code},
    {.t = &kern_target_vulkan, .emit = vulkan_emit, .code = vulkan_code},
#ifdef KERN_HAVE_AMDGPU
    {.t = &kern_target_amdgpu, .arch_valid = llvm_amdgpu_arch_valid, .emit = amdgpu_emit,
     .code = llvm_emit_hsaco},
#endif
};

enum { NCODEGENS = sizeof codegens / sizeof *codegens };

const kc_codegen *kc_codegen_find(const char *target) {
    for (size_t i = 0; target && i < NCODEGENS; i++)
        if (!strcmp(codegens[i].t->name, target))
            return &codegens[i];
    return NULL;
}

const kc_codegen *kc_codegen_for_backend(int backend) {
    for (size_t i = 0; i < NCODEGENS; i++)
        if ((int)codegens[i].t->backend == backend)
            return &codegens[i];
    return NULL;
}

char *kc_codegen_targets(char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NCODEGENS && len < size; i++) {
        int w = snprintf(buf + len, size - len, "%s%s", i ? ", " : "", codegens[i].t->name);
        len += w > 0 ? (size_t)w : 0;
    }
    return buf;
}

bool kc_write_module_file(const char *path, const char *target, const char *meta, size_t metalen,
                          const char *code, size_t codelen, char *err, size_t errlen) {
    size_t len;
    char *file = kern_modfile_build(target, meta, metalen, code, codelen, &len);
    if (!file) {
        snprintf(err, errlen, "out of memory for module file '%s'", path);
        return false;
    }
    kern_outfile o;
    bool ok = kern_outfile_open(&o, path, err, errlen);
    if (ok) {
        kern_outfile_write(&o, file, len);
        ok = kern_outfile_commit(&o, path, err, errlen);
    }
    free(file);
    return ok;
}
