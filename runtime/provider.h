/* provider.h - where a module's code comes from, and what the JIT library needs of the
 * runtime (it includes this header and include/kern.h, never rt.h).
 *
 * A module is metadata (meta.h) plus a code image. The image is handed to the context's
 * device (device.h: load_code), which turns it into code it can run or rejects a kind it
 * cannot run; the device then resolves every kernel's tasks (get_kernel). Kinds:
 *   KERN_CODE_HOST   a code provider that resolves the task symbols of abi.h
 *                    ("kern_<K>__t<t>" and its "_count") to host function pointers: a
 *                    dlopen()ed AOT shared object, or the JIT's ORC session. The CPU
 *                    device runs it.
 *   KERN_CODE_PTX    PTX text (docs/gpu-abi.md), for the CUDA device.
 *   KERN_CODE_HSACO  an AMDGPU code object, for a HIP device (none yet).
 *   KERN_CODE_SPIRV  a SPIR-V module (docs/spirv-abi.md), for the Vulkan device.
 * Ownership: a HOST provider passes to rt_module_create, which releases it with the
 * module (or at once when creation fails); PTX/HSACO bytes stay the caller's and are
 * copied or consumed while loading (no pointer into them is kept).
 *
 * The JIT library and module.c's loaders both go through rt_module_create, so a module
 * never knows where its code came from. */
#ifndef KERN_RT_PROVIDER_H
#define KERN_RT_PROVIDER_H

#include <stddef.h>

#include "../common/target.h" /* kern_code_kind */
#include "../include/kern.h"
#include "meta.h"

typedef struct kern_code_provider {
    void *user;
    void *(*lookup)(void *user, const char *symbol); /* NULL when absent */
    void (*release)(void *user);                     /* may be NULL */
} kern_code_provider;

typedef struct kern_code_image {
    kern_code_kind kind;
    kern_code_provider host; /* KERN_CODE_HOST: symbol lookups (released with the module, or on
                                failure) */
    const void *bytes;       /* PTX (text, need not be NUL-terminated) / HSACO: copied or */
    size_t len;              /* consumed while loading */
} kern_code_image;

/* "host code", "PTX", "an HSACO code object"; "code of unknown kind" otherwise. */
const char *kern_code_kind_name(kern_code_kind k);

/* Makes a module from metadata (taken over: freed with the module, or here on failure)
 * and a code image (see above). The device loads the image and resolves every task of
 * every kernel; a missing symbol is KERN_ERR_FORMAT naming the symbol, the kernel and the
 * task, an image the device cannot run KERN_ERR_UNSUPPORTED naming both. The context's
 * message is set on failure. */
kern_status rt_module_create(kern_context *ctx, kern_meta *meta, kern_code_image code,
                             kern_module **out);

/* Sets the context's message (printf-style) and returns s; a NULL ctx is ignored. The
 * context's options are read with kern_context_get_options (kern.h). */
kern_status rt_error(kern_context *ctx, kern_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Makes m's gradients lazy: listed now (the kernels without grad_error), each built by
 * build on its first kern_kernel_find. Takes state (freed with m, or now on failure). */
kern_status rt_module_set_lazy_grads(kern_module *m,
                                     kern_status (*build)(kern_context *, void *, const char *,
                                                          kern_module **),
                                     void (*free_state)(void *), void *state);

/* Gives m (which holds its gradients already) K.grad.ckpt built lazily by `build` (as
 * rt_module_set_lazy_grads, without lazy names). */
kern_status rt_module_set_lazy_ckpt(kern_module *m,
                                    kern_status (*build)(kern_context *, void *, const char *,
                                                         kern_module **),
                                    void (*free_state)(void *), void *state);

/* Whether ctx is a live context (checked mode, KERN_RUNTIME_CHECKS; always true off it),
 * said on stderr when not: the check every public entry point makes on its context. */
bool rt_context_check(const kern_context *ctx, const char *fn);

#endif
