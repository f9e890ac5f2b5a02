/* launch_bench.c - the host cost of one small launch from C (bench/README.md,
 * "python-launch"): saxpy on 16 elements through kern_launch on the CPU, the median of
 * 21 batches of 20000 calls, in microseconds per call. bench/python_launch.py runs it
 * beside the same launch from Python and prints the ratio.
 *
 *   build/bench/launch-bench [--threads N]     prints "c_launch_us X" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../include/kern.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    kern_context_options o = kern_context_options_default();
    o.threads = argc > 2 && !strcmp(argv[1], "--threads") ? atoi(argv[2]) : 1;
    kern_context *ctx;
    kern_module *mod;
    kern_kernel *k;
    const char *src = "kernel saxpy(a: f32, x: f32[], y: f32[]) {\n"
                      "    for i in 0..len(x) { y[i] += a * x[i]; }\n"
                      "}\n";
    if (kern_context_create(&o, &ctx) != KERN_OK ||
        kern_module_from_source(ctx, src, strlen(src), "saxpy.kern", &mod) != KERN_OK ||
        kern_kernel_find(mod, "saxpy", &k) != KERN_OK) {
        fprintf(stderr, "launch-bench: %s\n", kern_context_last_error(ctx));
        return 1;
    }
    float xs[16], ys[16];
    for (int i = 0; i < 16; i++)
        xs[i] = ys[i] = (float)i;
    int64_t n = 16;
    kern_buffer *x, *y;
    kern_buffer_create(ctx, KERN_F32, 1, &n, xs, &x);
    kern_buffer_create(ctx, KERN_F32, 1, &n, ys, &y);
    kern_arg args[] = {kern_arg_f32(0.5f), kern_arg_buffer(x), kern_arg_buffer(y)};
    enum { BATCHES = 21, CALLS = 20000 };
    double t[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now_us();
        for (int c = 0; c < CALLS; c++)
            if (kern_launch(k, args, 3) != KERN_OK) {
                fprintf(stderr, "launch-bench: %s\n", kern_context_last_error(ctx));
                return 1;
            }
        t[b] = (now_us() - t0) / CALLS;
    }
    qsort(t, BATCHES, sizeof *t, cmp);
    printf("c_launch_us %.3f\n", t[BATCHES / 2]);
    kern_context_release(ctx);
    return 0;
}
