/* target.c - the target registry (target.h). */
#include "target.h"

#include <stdio.h>
#include <string.h>

const kern_target kern_target_cpu = {
    .name = "cpu",
    .about = "the host CPU: the JIT, shared objects",
    .backend = KERN_BACKEND_CPU,
    .code_kind = KERN_CODE_HOST,
    .code_name = "host code",
    .emit_kinds = "llvm",
    .binary_kinds = "",
    .caps = KERN_TARGET_DEVICE | KERN_TARGET_POINTERS | KERN_TARGET_DLPACK,
    .dlpack_device = 1, /* kDLCPU */
};

const kern_target kern_target_cuda = {
    .name = "cuda",
    .about = "NVIDIA GPUs: PTX",
    .backend = KERN_BACKEND_CUDA,
    .code_kind = KERN_CODE_PTX,
    .code_name = "PTX",
    .emit_kinds = "llvm, ptx",
    .binary_kinds = "",
    .default_arch = "sm_75",
    .caps =
        KERN_TARGET_DEVICE | KERN_TARGET_POINTERS | KERN_TARGET_DLPACK | KERN_TARGET_AOT_CONTAINER,
    .dlpack_device = 2, /* kDLCUDA */
};

const kern_target kern_target_amdgpu = {
    .name = "amdgpu",
    .about = "AMD GPUs: code objects (no device in the runtime yet)",
    .backend = KERN_BACKEND_AMDGPU,
    .code_kind = KERN_CODE_HSACO,
    .code_name = "an HSACO code object",
    .emit_kinds = "llvm, amdgcn",
    .binary_kinds = "",
    .default_arch = "gfx90a",
    .caps = KERN_TARGET_AOT_CONTAINER,
};

const kern_target kern_target_vulkan = {
    .name = "vulkan",
    .about = "Vulkan: SPIR-V (and Metal's source, msl)",
    .backend = KERN_BACKEND_VULKAN,
    .code_kind = KERN_CODE_SPIRV,
    .code_name = "SPIR-V",
    .emit_kinds = "spirv, spirv-asm, msl",
    .binary_kinds = "spirv",
    .caps = KERN_TARGET_DEVICE | KERN_TARGET_AOT_CONTAINER,
};

const kern_target kern_target_metal = {
    .name = "metal",
    .about = "Metal: no code of its own (--emit=msl is vulkan's), no device",
    .backend = KERN_BACKEND_METAL,
    .code_kind = KERN_CODE_NONE,
    .code_name = "no code",
    .emit_kinds = "",
    .binary_kinds = "",
};

/* In the order of kern_backend: targets[b] is backend b's. */
static const kern_target *const targets[] = {&kern_target_cpu, &kern_target_cuda,
                                             &kern_target_amdgpu, &kern_target_vulkan,
                                             &kern_target_metal};

enum { NTARGETS = sizeof targets / sizeof *targets };

const kern_target *const *kern_target_list(size_t *n) {
    *n = NTARGETS;
    return targets;
}

const kern_target *kern_target_find(const char *name) {
    for (size_t i = 0; name && i < NTARGETS; i++)
        if (!strcmp(targets[i]->name, name))
            return targets[i];
    return NULL;
}

const kern_target *kern_target_of_backend(kern_backend b) {
    return (unsigned)b < NTARGETS ? targets[b] : NULL;
}

const kern_target *kern_target_of_code(int code_kind) {
    for (size_t i = 0; code_kind != KERN_CODE_NONE && i < NTARGETS; i++)
        if (targets[i]->code_kind == code_kind)
            return targets[i];
    return NULL;
}

bool kern_target_list_has(const char *list, const char *word) {
    size_t n = word ? strlen(word) : 0;
    while (n && list && *list) {
        size_t len = strcspn(list, ",");
        if (len == n && !strncmp(list, word, n))
            return true;
        list += len;
        list += strspn(list, ", ");
    }
    return false;
}

const kern_target *kern_target_of_emit(const char *kind) {
    for (size_t i = 0; i < NTARGETS; i++)
        if (kern_target_list_has(targets[i]->emit_kinds, kind))
            return targets[i];
    return NULL;
}

char *kern_target_names(unsigned caps, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NTARGETS; i++)
        if ((targets[i]->caps & caps) == caps && len < size) {
            int w = snprintf(buf + len, size - len, "%s%s", len ? ", " : "", targets[i]->name);
            len += w > 0 ? (size_t)w : 0;
        }
    return buf;
}
