/* provider.h - where a module's code comes from.
 *
 * A code provider resolves the task symbols of abi.h ("kern_<K>__t<t>" and its "_count")
 * to code the module's device can run: for the CPU device, function pointers (a dlopen()ed
 * AOT shared object, or the JIT's ORC session). The module calls lookup for every symbol
 * while it is created and release once when it is destroyed (or when creation fails).
 *
 * The JIT library (the compiler side) and module.c's AOT loader both go through
 * rt_module_create, so a module never knows where its code came from. */
#ifndef KERN_RT_PROVIDER_H
#define KERN_RT_PROVIDER_H

#include "../include/kern.h"
#include "meta.h"

typedef enum kern_code_kind { KERN_CODE_HOST = 0, KERN_CODE_PTX = 1, KERN_CODE_HSACO = 2 } kern_code_kind;

typedef struct kern_code_provider {
    void *user;
    void *(*lookup)(void *user, const char *symbol); /* NULL when absent */
    void (*release)(void *user);                     /* may be NULL */
} kern_code_provider;

/* Makes a module from metadata (taken over: freed with the module, or here on failure)
 * and a provider (released with the module, or here on failure). Resolves every task's
 * two symbols; a missing one is KERN_ERR_FORMAT naming the symbol, the kernel and the
 * task. The context's message is set on failure. */
kern_status rt_module_create(kern_context *ctx, kern_meta *meta, kern_code_provider p,
                             kern_module **out);

#endif
