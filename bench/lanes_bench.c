/* lanes_bench.c - lanes-bench: K + K.grad of a loop whose trip count differs between work
 * items (bench/gpu-bench/ragged.kern: x = 0.5 sin(x) w[t] + 0.4 x + 0.1 for t in
 * 0..count[i], every item reading the same w) on the CPU, SIMD across work items against
 * the scalar path, for trip counts uniform in 0..MAX and for every count MAX / 2 (the same
 * work in all). The reverse sweep of such a loop is aligned across lanes (issue 24,
 * docs/autodiff.md "Aligned reverse loops"); this program measures what that is worth.
 *
 * Each row: KERN_SIMD = off, sse or auto (set before the context is created), 2 threads
 * unless --threads; the median of --reps runs of K then K.grad (launches and kern_sync),
 * after one untimed run. The x0.grad and w.grad of every mode are compared with those of
 * the first (|a - b| <= 1e-3 max(|b|, 1e-3 max|b|)); a mismatch prints MISMATCH and makes
 * the exit status 1. Built with the project, run by hand (bench/README.md). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/kern.h"
#include "bench_util.h"

static const char *SRC = "kernel ragged(x0: f32[], w: f32[], count: i32[], out: f32[]) {\n"
                         "    for i in 0..len(x0) {\n"
                         "        var x = x0[i];\n"
                         "        for t in 0..count[i] {\n"
                         "            x = 0.5 * sin(x) * w[t] + 0.4 * x + 0.1;\n"
                         "        }\n"
                         "        out[i] = x;\n"
                         "    }\n"
                         "}\n";

static void check(kern_status s, kern_context *ctx, const char *what) {
    if (s != KERN_OK) {
        fprintf(stderr, "lanes-bench: %s: %s\n", what, ctx ? kern_context_last_error(ctx) : "");
        exit(1);
    }
}

static kern_buffer *buf(kern_context *ctx, kern_dtype t, int64_t n, const void *data) {
    kern_buffer *b;
    check(kern_buffer_create(ctx, t, 1, &n, data, &b), ctx, "buffer");
    return b;
}

/* One mode on one distribution: the median time (ms); the gradients into gx, gw. */
static double run(const char *mode, int threads, int reps, int64_t n, int maxc,
                  const int32_t *count, const float *x0, const float *w, const float *seed,
                  float *gx, float *gw) {
    setenv("KERN_SIMD", mode, 1);
    kern_context_options o = kern_context_options_default();
    o.backend = KERN_BACKEND_CPU;
    o.threads = threads;
    kern_context *ctx;
    check(kern_context_create(&o, &ctx), NULL, "context");
    kern_module *m;
    check(kern_module_from_source(ctx, SRC, strlen(SRC), "ragged.kern", &m), ctx, "compile");
    kern_kernel *k, *kg;
    check(kern_kernel_find(m, "ragged", &k), ctx, "ragged");
    check(kern_kernel_find(m, "ragged.grad", &kg), ctx, "ragged.grad");
    float *zero = calloc((size_t)(n > maxc ? n : maxc), sizeof *zero);
    kern_buffer *bx = buf(ctx, KERN_F32, n, x0), *bw = buf(ctx, KERN_F32, maxc, w),
                *bc = buf(ctx, KERN_I32, n, count), *bo = buf(ctx, KERN_F32, n, NULL),
                *bxg = buf(ctx, KERN_F32, n, NULL), *bwg = buf(ctx, KERN_F32, maxc, NULL),
                *bog = buf(ctx, KERN_F32, n, NULL);
    kern_arg a[8] = {kern_arg_buffer(bx), kern_arg_buffer(bw),  kern_arg_buffer(bc),
                     kern_arg_buffer(bo), kern_arg_buffer(bxg), kern_arg_buffer(bwg),
                     kern_arg_buffer(bog)};
    double *t = malloc((size_t)reps * sizeof *t);
    for (int r = -1; r < reps; r++) {
        check(kern_buffer_write(bog, seed, (size_t)n * 4), ctx, "write");
        check(kern_buffer_write(bxg, zero, (size_t)n * 4), ctx, "write");
        check(kern_buffer_write(bwg, zero, (size_t)maxc * 4), ctx, "write");
        check(kern_sync(ctx), ctx, "sync");
        double t0 = bench_now_ms();
        check(kern_launch(k, a, 4), ctx, "ragged");
        check(kern_launch(kg, a, 7), ctx, "ragged.grad");
        check(kern_sync(ctx), ctx, "sync");
        if (r >= 0)
            t[r] = bench_now_ms() - t0;
    }
    check(kern_buffer_read(bxg, gx, (size_t)n * 4), ctx, "read");
    check(kern_buffer_read(bwg, gw, (size_t)maxc * 4), ctx, "read");
    double med = bench_median(t, reps);
    free(t);
    free(zero);
    kern_context_release(ctx);
    bench_settle();
    return med;
}

static bool close_to(const float *a, const float *b, int64_t n) {
    double scale = 0;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(b[i]));
    for (int64_t i = 0; i < n; i++)
        if (fabs((double)a[i] - b[i]) > 1e-3 * fmax(fabs(b[i]), 1e-3 * scale))
            return false;
    return true;
}

int main(int argc, char **argv) {
    int64_t n = 65536;
    int maxc = 256, reps = 5, threads = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n"))
            n = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--max"))
            maxc = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: lanes-bench [--n N] [--max M] [--reps R] [--threads T]\n");
            return 2;
        }
    }
    if (n < 1 || maxc < 2 || reps < 1 || threads < 1)
        return 2;
    int32_t *count = malloc((size_t)n * 4);
    float *x0 = malloc((size_t)n * 4), *seed = malloc((size_t)n * 4), *w = malloc((size_t)maxc * 4);
    float *gx[3], *gw[3];
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x0[i] = (float)((s >> 40) % 4000) / 1000.0f - 2.0f;
        seed[i] = (float)((s >> 20) % 2000) / 1000.0f - 1.0f;
    }
    for (int t = 0; t < maxc; t++)
        w[t] = 0.5f + 0.001f * (float)(t % 97);
    static const char *const modes[] = {"off", "sse", "auto"};
    int status = 0;
    printf("lanes-bench: %lld items, %d threads, K + K.grad, median of %d (ms)\n", (long long)n,
           threads, reps);
    for (int dist = 0; dist < 2; dist++) {
        uint64_t r = 41;
        for (int64_t i = 0; i < n; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            count[i] = dist == 0 ? (int32_t)((r >> 33) % (uint64_t)(maxc + 1)) : maxc / 2;
        }
        for (int md = 0; md < 3; md++) {
            gx[md] = malloc((size_t)n * 4);
            gw[md] = malloc((size_t)maxc * 4);
            double ms = run(modes[md], threads, reps, n, maxc, count, x0, w, seed, gx[md], gw[md]);
            bool ok = md == 0 || (close_to(gx[md], gx[0], n) && close_to(gw[md], gw[0], maxc));
            printf("  counts %-14s KERN_SIMD=%-5s %9.2f%s\n",
                   dist == 0 ? "uniform 0..max" : "all max/2", modes[md], ms,
                   ok ? "" : "  MISMATCH");
            fflush(stdout);
            status |= !ok;
        }
        for (int md = 0; md < 3; md++)
            free(gx[md]), free(gw[md]);
    }
    free(count), free(x0), free(seed), free(w);
    return status;
}
