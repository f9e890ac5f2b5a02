/* frontend_bench.c - throughput of the compiler frontend on a large generated program.
 *
 *   build/bench/frontend-bench [--units N] [--reps N] [--dump]
 *
 * Generates, in memory and deterministically, a program of N units (default 200, about
 * 60 lines each): per unit two consts, a func with a serial loop and an if/else chain that
 * calls the previous unit's func (chains of at most 8, so inlining stays linear), a func
 * over an array, and a kernel with a parallel loop holding a nested serial loop, a while
 * loop with break, ifs, math builtins and a second, 2-D parallel task with atomic updates.
 *
 * It then times, REPS times each (default 7), in a fresh context per run:
 *   check    kc_check_source    lexer + parser + semantic analysis
 *   compile  kc_compile_source  check + lowering to IR + the -O2 pipeline
 * and prints the median time and source lines per second of each. `--dump` prints the
 * generated program instead (to look at it or feed it to kernc). Exit status 1 when the
 * program does not compile (with its diagnostics). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/context.h"
#include "../common/util.h"
#include "../compiler/driver.h"
#include "../ir/ir.h"

typedef struct rng {
    uint64_t s;
} rng;

/* 64-bit LCG (Knuth's MMIX constants); the high bits are good enough for program shapes. */
static uint32_t rng_next(rng *r) {
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(r->s >> 33);
}

static int rng_range(rng *r, int lo, int hi) {
    return lo + (int)(rng_next(r) % (uint32_t)(hi - lo + 1));
}

static void gen_unit(kern_buf *b, rng *r, int u) {
    buf_printf(b, "// ---- unit %d\n", u);
    buf_printf(b, "const K%d = %d.%03d;\n", u, rng_range(r, 0, 3), rng_range(r, 0, 999));
    buf_printf(b, "const N%d = %d;\n\n", u, rng_range(r, 2, 16));

    /* a scalar func: serial loop, if / else if / else, math, and a call down the chain */
    int thr = rng_range(r, 1, 9);
    buf_printf(b, "func step%d(x: f32, y: f32) -> f32 {\n", u);
    buf_printf(b, "    var acc = x * K%d + y;\n", u);
    buf_printf(b, "    for k in 0..N%d {\n", u);
    buf_printf(b, "        if acc > %d.0 {\n", thr);
    buf_printf(b, "            acc = acc * 0.5 - sin(y);\n");
    buf_printf(b, "        } else if acc < -%d.0 {\n", thr);
    buf_printf(b, "            acc = acc * 0.5 + cos(x);\n");
    buf_printf(b, "        } else {\n");
    buf_printf(b, "            acc += tanh(x * y) * f32(k) / %d.0;\n", rng_range(r, 2, 50));
    buf_printf(b, "        }\n");
    buf_printf(b, "    }\n");
    if (u % 8 != 0)
        buf_printf(b, "    return step%d(acc, y) + acc * y;\n", u - 1);
    else
        buf_printf(b, "    return acc * y;\n");
    buf_printf(b, "}\n\n");

    /* an array func: a 3-point stencil with clamped indices */
    buf_printf(b, "func stencil%d(a: f32[], j: i32) -> f32 {\n", u);
    buf_printf(b, "    let n = len(a);\n");
    buf_printf(b, "    let l = a[max(j - 1, 0)];\n");
    buf_printf(b, "    let r = a[min(j + 1, n - 1)];\n");
    buf_printf(b, "    return 0.25 * l + 0.5 * a[j] + 0.25 * r;\n");
    buf_printf(b, "}\n\n");

    /* a kernel: two parallel tasks */
    buf_printf(b,
               "kernel k%d(x: f32[], y: f32[], w: f32[,], out: f32[], dw: f32[,], "
               "nograd scale: f32, steps: i32) {\n",
               u);
    buf_printf(b, "    let n = len(x);\n");
    buf_printf(b, "    let m = shape(w, 1);\n");
    buf_printf(b, "    for i in 0..n {\n");
    buf_printf(b, "        var s = 0.0;\n");
    buf_printf(b, "        for j in 0..m {\n");
    buf_printf(b, "            s += w[i, j] * stencil%d(x, j);\n", u);
    buf_printf(b, "        }\n");
    buf_printf(b, "        var t = step%d(s, y[i]) * scale;\n", u);
    buf_printf(b, "        var it = 0;\n");
    buf_printf(b, "        while abs(t) > 1.0 {\n");
    buf_printf(b, "            t *= 0.5;\n");
    buf_printf(b, "            it += 1;\n");
    buf_printf(b, "            if it > steps {\n");
    buf_printf(b, "                break;\n");
    buf_printf(b, "            }\n");
    buf_printf(b, "        }\n");
    buf_printf(b, "        let q = (i * %d + %d) %% 5;\n", rng_range(r, 2, 9), rng_range(r, 0, 4));
    buf_printf(b, "        if q == 0 || (q == 3 && t > 0.0) {\n");
    buf_printf(b, "            out[i] = t + exp(-s * s);\n");
    buf_printf(b, "        } else {\n");
    buf_printf(b, "            out[i] = select(t > 0.0, sqrt(t), -t) + pow(abs(s), 1.5);\n");
    buf_printf(b, "        }\n");
    buf_printf(b, "    }\n");
    buf_printf(b, "    for i in 0..n, j in 0..m {\n");
    buf_printf(b, "        let d = %d.%02d * out[i] * x[j];\n", rng_range(r, 0, 1),
               rng_range(r, 1, 99));
    buf_printf(b, "        if d != 0.0 {\n");
    buf_printf(b, "            dw[i, j] += clamp(d, -1.0, 1.0);\n");
    buf_printf(b, "        }\n");
    buf_printf(b, "    }\n");
    buf_printf(b, "}\n\n");
}

static char *gen_program(int units, size_t *len, int *lines) {
    kern_buf b = {0};
    rng r = {0x6b65726eull}; /* "kern": fixed seed, same program every run */
    buf_printf(&b, "// generated by bench/frontend_bench.c: %d units\n\n", units);
    for (int u = 0; u < units; u++)
        gen_unit(&b, &r, u);
    *len = b.len;
    *lines = 0;
    for (size_t i = 0; i < b.len; i++)
        *lines += b.data[i] == '\n';
    return buf_take(&b);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { STAGE_CHECK, STAGE_COMPILE };

/* One timed run in a fresh context. Returns the seconds, or a negative value on failure
 * (after printing the first diagnostics). */
static double run_once(int stage, const char *src, size_t len, size_t *arena_bytes) {
    kc_ctx *ctx = kc_ctx_new();
    double t0 = now_s();
    bool ok;
    ir_module *m = NULL;
    if (stage == STAGE_CHECK) {
        ok = kc_check_source(ctx, "bench.kern", src, len) != NULL;
    } else {
        m = kc_compile_source(ctx, "bench.kern", src, len);
        ok = m != NULL;
    }
    double t = now_s() - t0;
    *arena_bytes = ctx->mem.bytes + (m ? m->mem.bytes : 0);
    if (!ok) {
        fprintf(stderr, "frontend-bench: %s failed with %d error(s):\n",
                stage == STAGE_CHECK ? "kc_check_source" : "kc_compile_source",
                diag_errors(&ctx->diags));
        for (int k = 0; k < ctx->diags.len && k < 10; k++)
            diag_print(stderr, &ctx->diags.items[k]);
        t = -1;
    }
    if (m)
        ir_module_free(m);
    kc_ctx_free(ctx);
    return t;
}

static int bench_stage(int stage, const char *src, size_t len, int lines, int reps) {
    double *ts = kern_xmalloc(sizeof(double) * (size_t)reps);
    size_t bytes = 0;
    for (int i = 0; i < reps; i++) {
        ts[i] = run_once(stage, src, len, &bytes);
        if (ts[i] < 0) {
            free(ts);
            return 1;
        }
    }
    qsort(ts, (size_t)reps, sizeof(double), cmp_double);
    double med = reps % 2 ? ts[reps / 2] : 0.5 * (ts[reps / 2 - 1] + ts[reps / 2]);
    printf("%-8s median %8.2f ms  (min %8.2f, max %8.2f)  %10.0f lines/s  %6.1f MiB arena\n",
           stage == STAGE_CHECK ? "check" : "compile", med * 1e3, ts[0] * 1e3, ts[reps - 1] * 1e3,
           lines / med, (double)bytes / (1024.0 * 1024.0));
    free(ts);
    return 0;
}

int main(int argc, char **argv) {
    int units = 200, reps = 7;
    bool dump = false, only_check = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--units") && i + 1 < argc)
            units = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dump"))
            dump = true;
        else if (!strcmp(argv[i], "--check-only"))
            only_check = true;
        else {
            fprintf(stderr, "usage: frontend-bench [--units N] [--reps N] [--check-only] "
                            "[--dump]\n");
            return 2;
        }
    }
    if (units < 1 || reps < 1) {
        fprintf(stderr, "frontend-bench: --units and --reps must be positive\n");
        return 2;
    }
    size_t len;
    int lines;
    char *src = gen_program(units, &len, &lines);
    if (dump) {
        fwrite(src, 1, len, stdout);
        free(src);
        return 0;
    }
    printf("frontend-bench: %d units, %d lines, %zu bytes, %d runs each, median\n", units, lines,
           len, reps);
    fflush(stdout);
    int rc = bench_stage(STAGE_CHECK, src, len, lines, reps);
    if (!rc && !only_check)
        rc = bench_stage(STAGE_COMPILE, src, len, lines, reps);
    free(src);
    return rc;
}
