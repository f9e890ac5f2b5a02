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
    /* The processors LLVM 19's NVPTX target knows (llc -mtriple=nvptx64-nvidia-cuda
     * -mcpu=help; test_nvptx compares them) from sm_50 on: for a name it does not know,
     * LLVM warns, goes on without the processor's features (PTX ISA 6.0, below what the
     * warp votes and shuffles need) and can fail in instruction selection (an abort). A
     * later LLVM knows more (sm_100 in LLVM 20); they join this list when kern is built and
     * tested with it. */
    .arches = "sm_50, sm_52, sm_53, sm_60, sm_61, sm_62, sm_70, sm_72, sm_75, sm_80, sm_86, "
              "sm_87, sm_89, sm_90, sm_90a",
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
    /* The gfxNNN processors LLVM 19's AMDGPU target knows (llc -mtriple=amdgcn-amd-amdhsa
     * -mcpu=help; test_nvptx compares them) from gfx700 on: gfx6 has no flat addressing,
     * so kern's atomics fail in instruction selection there, and an unknown name is a
     * processor without features, where every kernel does. LLVM's aliases (tahiti) and
     * generic targets (gfx9-generic, which need code object version 6) are left out. */
    .arches = "gfx700, gfx701, gfx702, gfx703, gfx704, gfx705, gfx801, gfx802, gfx803, gfx805, "
              "gfx810, gfx900, gfx902, gfx904, gfx906, gfx908, gfx909, gfx90a, gfx90c, gfx940, "
              "gfx941, gfx942, gfx1010, gfx1011, gfx1012, gfx1013, gfx1030, gfx1031, gfx1032, "
              "gfx1033, gfx1034, gfx1035, gfx1036, gfx1100, gfx1101, gfx1102, gfx1103, gfx1150, "
              "gfx1151, gfx1152, gfx1200, gfx1201",
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

bool kern_target_arch_valid(const kern_target *t, const char *arch) {
    return t->arches && kern_target_list_has(t->arches, arch);
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
