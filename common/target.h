/* target.h - the target registry: one entry per target kern knows, the one place that says
 * what a target is called, which backend and code kind it has, what `kernc emit` prints for
 * it, its default architecture and what its memory allows. The command line (cli/), the
 * code generators (backends/codegen.c, keyed by these entries), the JIT (jit/), the
 * runtime's module loading, devices and buffers (runtime/) and, through
 * kern_backend_name / kern_backend_available (include/kern.h), the Python package all read
 * it; nothing outside this file compares a target's or a device's name. */
#ifndef KERN_TARGET_H
#define KERN_TARGET_H

#include <stdbool.h>
#include <stddef.h>

#include "../include/kern.h"

/* What a module's code image is (runtime/provider.h says how each is loaded). */
typedef enum kern_code_kind {
    KERN_CODE_HOST = 0,
    KERN_CODE_PTX = 1,
    KERN_CODE_HSACO = 2,
    KERN_CODE_SPIRV = 3
} kern_code_kind;

enum {
    KERN_CODE_NONE = -1, /* a target with no code generator (metal: --emit=msl is vulkan's) */
};

/* Capabilities: facts of the target, the same for every device of it. */
enum {
    KERN_TARGET_DEVICE = 1,       /* the runtime has a device: kern_context_create takes it */
    KERN_TARGET_POINTERS = 2,     /* a buffer is a plain address of the target's memory (the
                                     host's or the GPU's): kern_buffer_pointer gives it,
                                     kern_buffer_wrap takes one */
    KERN_TARGET_DLPACK = 4,       /* buffers are shared with DLPack (dlpack_device below) */
    KERN_TARGET_AOT_CONTAINER = 8 /* kernc build writes the container of docs/gpu-abi.md
                                     (not a shared object) */
};

typedef struct kern_target {
    const char *name;         /* --target, kern_backend_name, module files, Python devices */
    const char *about;        /* one line for kernc --help */
    kern_backend backend;     /* the kern_context_options.backend that selects it */
    int code_kind;            /* kern_code_kind of its images, or KERN_CODE_NONE */
    const char *code_name;    /* "PTX": the code kind in messages */
    const char *emit_kinds;   /* what --emit=KIND prints for it, "llvm, ptx" ("" none) */
    const char *binary_kinds; /* those of emit_kinds that are the code image itself (never
                                 written to a terminal); "" none */
    const char *default_arch; /* NULL: the target takes no --arch */
    const char *arches;       /* every --arch it compiles for, "sm_50, sm_52, ..." (one of
                                 them default_arch; NULL with it): target.c says which */
    unsigned caps;            /* KERN_TARGET_* */
    int dlpack_device;        /* the DLDeviceType of its buffers (kDLCPU 1, kDLCUDA 2); 0 */
} kern_target;

/* The entries, for tables that point at them (backends/codegen.c, the devices' ops). */
extern const kern_target kern_target_cpu, kern_target_cuda, kern_target_amdgpu, kern_target_vulkan,
    kern_target_metal;

/* Every target, in the order of kern_backend (cpu first). */
const kern_target *const *kern_target_list(size_t *n);
/* The target of a name, a backend, or a code kind; NULL when there is none. */
const kern_target *kern_target_find(const char *name);
const kern_target *kern_target_of_backend(kern_backend b);
const kern_target *kern_target_of_code(int code_kind);
/* Whether word is one of the comma-separated list's words ("spirv" in "spirv, msl"). */
bool kern_target_list_has(const char *list, const char *word);
/* Whether arch is one of t's architectures (t->arches). */
bool kern_target_arch_valid(const kern_target *t, const char *arch);
/* The first target whose emit_kinds has kind, in the registry's order ("llvm": cpu). */
const kern_target *kern_target_of_emit(const char *kind);
/* The names of the targets that have every capability in caps ("cpu, cuda, vulkan"),
 * into buf; returns buf. */
char *kern_target_names(unsigned caps, char *buf, size_t size);

#endif
