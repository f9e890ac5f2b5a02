/* nojit.c - libkern without the compiler: the JIT entry points of include/kern.h answer
 * KERN_ERR_UNSUPPORTED, so a program written for libkern-jit links against libkern too and
 * says what is missing instead of failing to link. Only libkern.so holds this file;
 * libkern-jit.so has the real functions (jit/jit.c). */
#include "provider.h"

static kern_status no_jit(kern_context *ctx, kern_module **out) {
    if (out)
        *out = NULL;
    return rt_error(ctx, KERN_ERR_UNSUPPORTED,
                    "compiling kern source needs the JIT library: this program is linked "
                    "with libkern (pkg-config kern), which loads only modules built by "
                    "`kernc build`; link with libkern-jit (pkg-config kern-jit) instead");
}

kern_status kern_module_from_source(kern_context *ctx, const char *source, size_t len,
                                    const char *name, kern_module **out) {
    (void)source;
    (void)len;
    (void)name;
    return no_jit(ctx, out);
}

kern_status kern_module_from_file_source(kern_context *ctx, const char *path, kern_module **out) {
    (void)path;
    return no_jit(ctx, out);
}
