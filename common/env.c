/* env.c - reading the environment into kc_options (env.h): the only getenv of the compiler
 * libraries. */
#include "env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/ir.h"

bool kc_parse_simd(const char *s, int *lanes) {
    static const struct {
        const char *name;
        int lanes;
    } names[] = {{"auto", 0}, {"off", -1}, {"scalar", -1}, {"0", -1}, {"sse", 4},
                 {"neon", 4}, {"4", 4},    {"avx2", 8},    {"8", 8},  {"avx512", 16},
                 {"16", 16},  {"32", 32},  {"64", 64}};
    for (size_t i = 0; s && i < sizeof names / sizeof *names; i++)
        if (!strcmp(s, names[i].name)) {
            *lanes = names[i].lanes;
            return true;
        }
    return false;
}

unsigned kc_parse_pass_debug(const char *s) {
    unsigned f = 0;
    while (s && *s) {
        size_t n = strcspn(s, ",");
        if (n == 5 && strncmp(s, "print", 5) == 0)
            f |= IR_DEBUG_PRINT;
        else if (n == 9 && strncmp(s, "roundtrip", 9) == 0)
            f |= IR_DEBUG_ROUNDTRIP;
        else if (n == 6 && strncmp(s, "verify", 6) == 0)
            f |= IR_DEBUG_VERIFY;
        s += n;
        if (*s == ',')
            s++;
    }
    return f;
}

/* A set variable other than "" and "0". */
static bool env_on(const char *name) {
    const char *e = getenv(name);
    return e && *e && strcmp(e, "0") != 0;
}

/* The variable's value, NULL when unset or empty. */
static const char *env_str(const char *name) {
    const char *e = getenv(name);
    return e && *e ? e : NULL;
}

void kc_options_from_env(kc_options *o) {
    const char *e;
    if (!o->simd && (e = env_str("KERN_SIMD")) && !kc_parse_simd(e, &o->simd))
        fprintf(stderr,
                "kern: warning: KERN_SIMD='%s' is not one of off, sse, avx2, avx512, auto, 4, 8, "
                "16, 32, 64; using auto\n",
                e);
    if (!o->jit_threads && (e = env_str("KERN_JIT_THREADS"))) {
        char *end;
        long n = strtol(e, &end, 10);
        if (*end || n < 1 || n > 1024)
            fprintf(stderr,
                    "kern: warning: KERN_JIT_THREADS='%s' is not a number from 1 to 1024; using "
                    "the online CPUs\n",
                    e);
        else
            o->jit_threads = (int)n;
    }
    o->scatter_adjoints |= env_on("KERN_SCATTER_ADJOINTS");
    o->no_ckpt |= env_on("KERN_NO_CKPT");
    o->no_neighbour_adds |= env_on("KERN_NO_NEIGHBOUR_ADDS");
    o->no_vector_math |= env_on("KERN_NO_LIBMVEC");
    o->no_trip_sort |= env_on("KERN_NO_TRIP_SORT");
    o->fast_math |= env_on("KERN_FAST_MATH");
    o->own_math |= env_on("KERN_OWN_MATH");
    const char *own = getenv("KERN_OWN_MATH");
    o->own_math_fused |= own && !strcmp(own, "fused");
    o->eager_grads |= env_on("KERN_JIT_EAGER_GRADS");
    o->pass_debug |= kc_parse_pass_debug(getenv("KERN_DEBUG"));
    if (!o->libdevice)
        o->libdevice = env_str("KERN_LIBDEVICE");
    if (!o->cuda_home && !(o->cuda_home = env_str("CUDA_HOME")))
        o->cuda_home = env_str("CUDA_PATH");
    if (!o->lld)
        o->lld = env_str("KERN_LLD");
}
