/* host.c - a host program that uses kern's C API (include/kern.h) both ways:
 *
 *   kern-host SOURCE.kern            JIT: compile saxpy from source at run time
 *   kern-host --aot MODULE.so        AOT: load a module built by
 *                                    `kernc build examples/saxpy.kern --target=cpu -o MODULE.so`
 *
 * Build against an installed kern with
 *   cc host.c $(pkg-config --cflags --libs kern-jit) -o kern-host
 * It runs saxpy (y += a * x) on 1000 elements, checks the result against a plain C loop,
 * and prints the first values. Exit status 0 when the results match. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern.h"

#define CHECK(call)                                                                        \
    do {                                                                                   \
        kern_status st_ = (call);                                                          \
        if (st_ != KERN_OK) {                                                              \
            fprintf(stderr, "kern-host: %s: %s\n", kern_status_name(st_),                  \
                    kern_context_last_error(ctx));                                         \
            goto cleanup;                                                                  \
        }                                                                                  \
    } while (0)

int main(int argc, char **argv) {
    if (argc != 2 && !(argc == 3 && !strcmp(argv[1], "--aot"))) {
        fprintf(stderr, "usage: kern-host SOURCE.kern | kern-host --aot MODULE.so\n");
        return 2;
    }
    enum { N = 1000 };
    static float x[N], y[N], want[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)i / N;
        y[i] = 1.0f - (float)i / N;
        want[i] = y[i] + 2.5f * x[i];
    }
    int rc = 1;
    kern_context *ctx = NULL;
    kern_module *mod = NULL;
    kern_buffer *bx = NULL, *by = NULL;
    if (kern_context_create(NULL, &ctx) != KERN_OK) {
        fprintf(stderr, "kern-host: %s\n", ctx ? kern_context_last_error(ctx) : "no memory");
        goto cleanup;
    }
    if (argc == 3)
        CHECK(kern_module_load_file(ctx, argv[2], &mod));
    else
        CHECK(kern_module_from_file_source(ctx, argv[1], &mod));
    kern_kernel *saxpy;
    CHECK(kern_kernel_find(mod, "saxpy", &saxpy));
    int64_t shape[1] = {N};
    CHECK(kern_buffer_create(ctx, KERN_F32, 1, shape, x, &bx));
    CHECK(kern_buffer_create(ctx, KERN_F32, 1, shape, y, &by));
    kern_arg args[3] = {kern_arg_f32(2.5f), kern_arg_buffer(bx), kern_arg_buffer(by)};
    CHECK(kern_launch(saxpy, args, 3));
    CHECK(kern_sync(ctx));
    CHECK(kern_buffer_read(by, y, sizeof y));
    rc = 0;
    for (int i = 0; i < N; i++)
        if (fabsf(y[i] - want[i]) > 1e-6f) {
            fprintf(stderr, "kern-host: y[%d] = %g, expected %g\n", i, y[i], want[i]);
            rc = 1;
            break;
        }
    printf("%s saxpy: y[0..3] = %g %g %g %g (%s)\n", argc == 3 ? "AOT" : "JIT", y[0], y[1],
           y[2], y[3], rc ? "WRONG" : "matches the C loop");
cleanup:
    kern_buffer_release(bx);
    kern_buffer_release(by);
    kern_module_release(mod);
    kern_context_release(ctx);
    return rc;
}
