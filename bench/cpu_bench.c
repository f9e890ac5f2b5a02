/* cpu_bench.c - cpu-bench: kern kernels on the CPU against the same algorithms written by
 * hand in C with OpenMP (bench/cpu_ref.c), in one run (bench/README.md, "cpu-bench").
 *
 * For every workload it JIT-compiles the kernel of bench/kernels/ through the C API
 * (kern_module_from_source, timed: the median of several compiles), checks kern's result
 * against the hand-written one once (and fails loudly beyond the stated tolerance), then
 * times both with clock_gettime(CLOCK_MONOTONIC): the median of N runs, taken in three
 * interleaved rounds (kern, C, kern, C, ...), each after a warm-up run. kern runs through kern_launch on a CPU context with
 * --threads threads (default 2); the C code runs on as many OpenMP threads. The output is
 * a header (date, CPU model, cores, load, compilers) and one markdown table.
 *
 * Not a test: CI builds it (so that it does not rot) but never runs it. Exit status 0 when
 * every check passed, 1 when a check or a kern call failed, 2 for bad usage. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "../include/kern.h"
#include "cpu_ref.h"

#ifndef KERN_BENCH_KERNELS_DIR /* set by bench/meson.build to the source directory's */
#define KERN_BENCH_KERNELS_DIR "bench/kernels"
#endif

/* ---- options and small helpers ------------------------------------------------------ */

typedef struct bench_opts {
    int threads;  /* kern context threads = OpenMP threads */
    int reps;     /* timed runs per measurement (median) */
    int warmup;   /* untimed runs before them */
    int compiles; /* JIT compiles per kernel (median) */
    int shrink;   /* divide the problem sizes by this (--quick: 16) */
    int grid;     /* the stencil's grid is grid x grid */
    const char *kernels_dir;
    const char *only;     /* run only this workload */
    const char *schedule; /* the OpenMP schedule of the C loops */
} bench_opts;




static void die(const char *what, const char *why) {
    fprintf(stderr, "cpu-bench: %s: %s\n", what, why);
    exit(1);
}

static void *xalloc(size_t bytes) {
    /* 64-byte aligned like kern's CPU buffers, so neither side gets an alignment edge */
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p)
        die("out of memory", "aligned_alloc");
    return p;
}

/* deterministic inputs: a 64-bit LCG, uniform floats in [lo, hi) */
static void fill(float *a, int64_t n, uint64_t seed, float lo, float hi) {
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        a[i] = lo + (hi - lo) * (float)((double)(s >> 40) / (double)(1ull << 24));
    }
}


/* ---- kern side ------------------------------------------------------------------------ */

typedef struct bench {
    bench_opts o;
    kern_context *ctx;
    bool failed; /* a check failed */
} bench;

static void kcheck(bench *b, kern_status st, const char *what) {
    if (st != KERN_OK)
        die(what, kern_context_last_error(b->ctx));
}

static kern_buffer *kbuf(bench *b, int rank, const int64_t *shape, const float *data) {
    kern_buffer *buf;
    kcheck(b, kern_buffer_create(b->ctx, KERN_F32, rank, shape, data, &buf), "buffer");
    return buf;
}

static void kread(bench *b, kern_buffer *buf, float *dst) {
    kcheck(b, kern_buffer_read(buf, dst, kern_buffer_bytes(buf)), "buffer read");
}

typedef struct compiled {
    kern_module *mod;
    kern_kernel *k;
    double median_ms, min_ms;
} compiled;

/* Compiles FILE o.compiles times with kern_module_from_source, timing each call; keeps
 * the last module. */
static compiled compile_kernel(bench *b, const char *file, const char *kernel) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", b->o.kernels_dir, file);
    size_t len;
    char *src = bench_read_text(path, &len);
    if (!src)
        die(path, "cannot read the kernel source (use --kernels DIR)");
    compiled c = {0};
    double t[64];
    int n = b->o.compiles;
    for (int i = 0; i < n; i++) {
        kern_module *m;
        double t0 = bench_now_ms();
        kern_status st = kern_module_from_source(b->ctx, src, len, path, &m);
        t[i] = bench_now_ms() - t0;
        kcheck(b, st, path);
        if (c.mod)
            kern_module_release(c.mod);
        c.mod = m;
    }
    free(src);
    kcheck(b, kern_kernel_find(c.mod, kernel, &c.k), kernel);
    c.min_ms = t[0];
    for (int i = 1; i < n; i++)
        c.min_ms = t[i] < c.min_ms ? t[i] : c.min_ms;
    c.median_ms = bench_median(t, n);
    return c;
}

/* ---- measurement -------------------------------------------------------------------- */

typedef void (*run_fn)(void *u);

/* OpenMP runtimes spin after a parallel region (libomp: KMP_BLOCKTIME, 200 ms) and kern's
 * workers spin briefly too; on a 2-core machine a spinning thread of the other side
 * would steal a core. A pause after each side's runs lets them go to sleep. */

/* One thing to time: f(u) is one run. ms receives the median. */
typedef struct side {
    run_fn f;
    void *u;
    double ms;
} side;

enum { ROUNDS = 3 };

/* Times the sides in ROUNDS rounds; in each round every side in turn does o.warmup
 * untimed runs, then its share of the o.reps timed runs, then settles. Interleaving the
 * sides spreads the load of a shared machine over all of them instead of letting a burst
 * hit one side's window. Each side's ms is the median of all its timed runs. */
static void measure_sides(const bench *b, side *sides, int n) {
    int per = (b->o.reps + ROUNDS - 1) / ROUNDS;
    double *t = malloc(sizeof *t * (size_t)(n * per * ROUNDS));
    if (!t)
        die("out of memory", "timing samples");
    for (int r = 0; r < ROUNDS; r++) {
        for (int s = 0; s < n; s++) {
            for (int i = 0; i < b->o.warmup; i++)
                sides[s].f(sides[s].u);
            for (int i = 0; i < per; i++) {
                double t0 = bench_now_ms();
                sides[s].f(sides[s].u);
                t[(s * ROUNDS + r) * per + i] = bench_now_ms() - t0;
            }
            bench_settle();
        }
    }
    for (int s = 0; s < n; s++)
        sides[s].ms = bench_median(t + s * ROUNDS * per, ROUNDS * per);
    free(t);
}

/* Compares kern's out[] with the reference ref[]: |k - r| <= atol + rtol * |r|. Returns
 * the largest |k - r|; reports and marks failure when the tolerance is exceeded. */
static double compare(bench *b, bool *row_failed, const char *what, const float *out,
                      const float *ref, int64_t n, double rtol, double atol) {
    double worst = 0;
    int64_t bad = -1;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)out[i] - (double)ref[i];
        d = d < 0 ? -d : d;
        double r = ref[i] < 0 ? -(double)ref[i] : (double)ref[i];
        if (!(d <= atol + rtol * r) && bad < 0) /* NaN fails too */
            bad = i;
        if (d > worst || d != d)
            worst = d;
    }
    if (bad >= 0) {
        fprintf(stderr,
                "cpu-bench: CHECK FAILED: %s: element %lld: got %.9g, reference %.9g "
                "(tolerance %g + %g * |reference|)\n",
                what, (long long)bad, (double)out[bad], (double)ref[bad], atol, rtol);
        b->failed = *row_failed = true;
    }
    return worst;
}

typedef struct row {
    const char *name, *baseline;
    char size[64];
    double kern_ms, ref_ms, compile_ms, compile_min_ms;
    double err;  /* largest difference found by the check */
    bool failed; /* the check failed */
} row;

enum { MAX_ROWS = 16 };

typedef struct table {
    row r[MAX_ROWS];
    int n;
} table;

static row *add_row(table *t, const char *name, const char *baseline) {
    row *r = &t->r[t->n++];
    memset(r, 0, sizeof *r);
    r->name = name;
    r->baseline = baseline;
    return r;
}

/* ---- workloads ---------------------------------------------------------------------- */

/* The state of one workload: host arrays of the hand-written side and kern's buffers. */
typedef struct work {
    bench *b;
    kern_kernel *k;
    int64_t n, m, nt;
    float a, dt;
    int32_t steps;
    float *x, *y, *w, *out, *s, *v; /* hand-written side */
    kern_buffer *kx, *ky, *kw, *kout, *ks, *kv;
} work;

static void launch(work *w, const kern_arg *args, int nargs) {
    kcheck(w->b, kern_launch(w->k, args, nargs), kern_kernel_name(w->k));
    kcheck(w->b, kern_sync(w->b->ctx), "sync");
}

static void kern_saxpy(void *u) {
    work *w = u;
    kern_arg args[] = {kern_arg_f32(w->a), kern_arg_buffer(w->kx), kern_arg_buffer(w->ky)};
    launch(w, args, 3);
}
static void ref_saxpy(void *u) {
    work *w = u;
    cpu_ref_saxpy(w->n, w->a, w->x, w->y);
}

/* saxpy.kern (plain store) and saxpy_atomic.kern (+=) against the same C loop */
static void bench_saxpy(bench *b, table *t, compiled plain, compiled atomic) {
    int64_t n = (16ll << 20) / b->o.shrink;
    work w = {.b = b, .n = n, .a = 1.5f};
    float *x0 = xalloc((size_t)n * 4), *y0 = xalloc((size_t)n * 4);
    fill(x0, n, 1, -1, 1);
    fill(y0, n, 2, -1, 1);
    w.x = xalloc((size_t)n * 4);
    w.y = xalloc((size_t)n * 4);
    float *got = xalloc((size_t)n * 4);
    memcpy(w.x, x0, (size_t)n * 4);
    memcpy(w.y, y0, (size_t)n * 4);
    w.kx = kbuf(b, 1, &n, x0);
    w.ky = kbuf(b, 1, &n, y0);
    ref_saxpy(&w);

    const compiled *cs[] = {&plain, &atomic};
    const char *names[] = {"saxpy", "saxpy `+=` (atomic)"};
    for (int v = 0; v < 2; v++) {
        row *r = add_row(t, names[v], "omp for");
        snprintf(r->size, sizeof r->size, "%lld f32", (long long)n);
        r->compile_ms = cs[v]->median_ms;
        r->compile_min_ms = cs[v]->min_ms;
        w.k = cs[v]->k;
        kcheck(b, kern_buffer_write(w.ky, y0, (size_t)n * 4), "buffer write");
        kern_saxpy(&w);
        kread(b, w.ky, got);
        /* one run of each from the same y0: the same float ops, so equal bits expected */
        r->err = compare(b, &r->failed, names[v], got, w.y, n, 1e-6, 1e-7);
    }
    work wa = w;
    w.k = plain.k;
    wa.k = atomic.k;
    side sides[] = {{kern_saxpy, &w, 0}, {kern_saxpy, &wa, 0}, {ref_saxpy, &w, 0}};
    measure_sides(b, sides, 3);
    t->r[t->n - 2].kern_ms = sides[0].ms;
    t->r[t->n - 1].kern_ms = sides[1].ms;
    t->r[t->n - 1].ref_ms = t->r[t->n - 2].ref_ms = sides[2].ms;
    free(x0), free(y0), free(w.x), free(w.y), free(got);
    kern_buffer_release(w.kx), kern_buffer_release(w.ky);
}

static void kern_jacobi(void *u) {
    work *w = u;
    kern_arg args[] = {kern_arg_buffer(w->kx), kern_arg_buffer(w->ky)};
    launch(w, args, 2);
}
static void ref_jacobi(void *u) {
    work *w = u;
    cpu_ref_jacobi(w->n, w->m, w->x, w->y);
}

/* jacobi.kern (a branch for the border inside the 2-D task, as examples/stencil2d.kern)
 * and jacobi_split.kern (interior and border as separate tasks) against the same C */
static void bench_jacobi(bench *b, table *t, compiled branch, compiled split) {
    int64_t n = b->o.grid / (b->o.shrink > 1 ? 4 : 1), m = n, shape[2] = {n, m};
    work w = {.b = b, .n = n, .m = m};
    w.x = xalloc((size_t)(n * m) * 4);
    w.y = xalloc((size_t)(n * m) * 4);
    float *got = xalloc((size_t)(n * m) * 4);
    fill(w.x, n * m, 3, 0, 1);
    memset(w.y, 0, (size_t)(n * m) * 4);
    w.kx = kbuf(b, 2, shape, w.x);
    w.ky = kbuf(b, 2, shape, NULL);
    ref_jacobi(&w);

    const compiled *cs[] = {&branch, &split};
    const char *names[] = {"jacobi 5-point stencil", "jacobi, interior/border tasks"};
    for (int v = 0; v < 2; v++) {
        row *r = add_row(t, names[v], "omp for");
        snprintf(r->size, sizeof r->size, "%lldx%lld f32", (long long)n, (long long)m);
        r->compile_ms = cs[v]->median_ms;
        r->compile_min_ms = cs[v]->min_ms;
        w.k = cs[v]->k;
        memset(got, 0, (size_t)(n * m) * 4);
        kcheck(b, kern_buffer_write(w.ky, got, (size_t)(n * m) * 4), "buffer write");
        kern_jacobi(&w);
        kread(b, w.ky, got);
        r->err = compare(b, &r->failed, names[v], got, w.y, n * m, 1e-6, 1e-7);
    }
    work ws = w;
    w.k = branch.k;
    ws.k = split.k;
    side sides[] = {{kern_jacobi, &w, 0}, {kern_jacobi, &ws, 0}, {ref_jacobi, &w, 0}};
    measure_sides(b, sides, 3);
    t->r[t->n - 2].kern_ms = sides[0].ms;
    t->r[t->n - 1].kern_ms = sides[1].ms;
    t->r[t->n - 1].ref_ms = t->r[t->n - 2].ref_ms = sides[2].ms;
    free(w.x), free(w.y), free(got);
    kern_buffer_release(w.kx), kern_buffer_release(w.ky);
}

static void kern_simulate(void *u) {
    work *w = u;
    kern_arg args[] = {kern_arg_buffer(w->kx), kern_arg_buffer(w->kw), kern_arg_buffer(w->kout),
                       kern_arg_i32(w->steps)};
    launch(w, args, 4);
}
static void ref_simulate(void *u) {
    work *w = u;
    cpu_ref_simulate(w->n, w->steps, w->x, w->w, w->out);
}

static void bench_simulate(bench *b, table *t, compiled c) {
    int64_t n = 65536 / b->o.shrink, nw = 256;
    work w = {.b = b, .n = n, .steps = 256, .k = c.k};
    w.x = xalloc((size_t)n * 4);
    w.w = xalloc((size_t)nw * 4);
    w.out = xalloc((size_t)n * 4);
    float *got = xalloc((size_t)n * 4);
    fill(w.x, n, 4, -2, 2);
    fill(w.w, nw, 5, -0.05f, 0.05f);
    w.kx = kbuf(b, 1, &n, w.x);
    w.kw = kbuf(b, 1, &nw, w.w);
    w.kout = kbuf(b, 1, &n, NULL);
    row *r = add_row(t, "simulate (sin loop per item)", "omp for");
    snprintf(r->size, sizeof r->size, "%lld items x %d steps", (long long)n, (int)w.steps);
    r->compile_ms = c.median_ms;
    r->compile_min_ms = c.min_ms;
    kern_simulate(&w);
    ref_simulate(&w);
    kread(b, w.kout, got);
    /* both call libm's sinf with the same arguments: equal bits expected */
    r->err = compare(b, &r->failed, r->name, got, w.out, n, 1e-5, 1e-6);
    side sides[] = {{kern_simulate, &w, 0}, {ref_simulate, &w, 0}};
    measure_sides(b, sides, 2);
    r->kern_ms = sides[0].ms;
    r->ref_ms = sides[1].ms;
    free(w.x), free(w.w), free(w.out), free(got);
    kern_buffer_release(w.kx), kern_buffer_release(w.kw), kern_buffer_release(w.kout);
}

static void kern_sumsq(void *u) {
    work *w = u;
    kern_arg args[] = {kern_arg_buffer(w->kx), kern_arg_buffer(w->ks)};
    launch(w, args, 2);
}
static void ref_sumsq_reduction(void *u) {
    work *w = u;
    cpu_ref_sumsq_reduction(w->n, w->x, w->s);
}
static void ref_sumsq_atomic(void *u) {
    work *w = u;
    cpu_ref_sumsq_atomic(w->n, w->x, w->s);
}

static void kern_sumsq_chunked(void *u) {
    work *w = u;
    kern_arg args[] = {kern_arg_buffer(w->kx), kern_arg_buffer(w->ks), kern_arg_i32(w->steps)};
    launch(w, args, 3);
}

/* sumsq.kern (an atomic add per element) against the OpenMP reduction and against
 * `omp atomic`; sumsq_chunked.kern (a local sum per chunk, one atomic add per chunk)
 * against the reduction */
static void bench_sumsq(bench *b, table *t, compiled c, compiled chunked) {
    int64_t n = (4ll << 20) / b->o.shrink, one = 1;
    work w = {.b = b, .n = n, .k = c.k};
    w.x = xalloc((size_t)n * 4);
    w.s = xalloc(4);
    fill(w.x, n, 6, -1, 1);
    w.kx = kbuf(b, 1, &n, w.x);
    w.ks = kbuf(b, 1, &one, NULL);
    work wc = w;
    wc.k = chunked.k;
    wc.steps = (int32_t)(n / 256 > 0 ? n / 256 : 1); /* the chunk: 256 work items */
    double exact = 0;
    for (int64_t i = 0; i < n; i++)
        exact += (double)w.x[i] * (double)w.x[i];

    row *r1 = add_row(t, "sum of squares, atomic `+=`", "omp reduction");
    row *r2 = add_row(t, "sum of squares, atomic `+=`", "omp atomic");
    row *r3 = add_row(t, "sum of squares, chunked by hand", "omp reduction");
    row *rows[] = {r1, r2, r3};
    for (int i = 0; i < 3; i++)
        snprintf(rows[i]->size, sizeof rows[i]->size, "%lld f32", (long long)n);
    snprintf(r3->size, sizeof r3->size, "%lld f32, %d chunks", (long long)n,
             (int)((n + wc.steps - 1) / wc.steps));
    r1->compile_ms = r2->compile_ms = c.median_ms;
    r1->compile_min_ms = r2->compile_min_ms = c.min_ms;
    r3->compile_ms = chunked.median_ms;
    r3->compile_min_ms = chunked.min_ms;

    /* float sums in different orders: compare each with the double sum, relative 1e-2.
     * A float running sum of 4M positive terms of about 1/3 loses about 0.3% (measured:
     * the atomic sums 1394366 and 1394430 for 1398500); chunked sums lose less. */
    float got, zero = 0, exactf = (float)exact;
    kern_sumsq(&w);
    kread(b, w.ks, &got);
    r1->err = r2->err = compare(b, &r1->failed, "sumsq (kern)", &got, &exactf, 1, 1e-2, 0);
    r2->failed = r1->failed;
    kcheck(b, kern_buffer_write(w.ks, &zero, 4), "buffer write");
    kern_sumsq_chunked(&wc);
    kread(b, w.ks, &got);
    r3->err = compare(b, &r3->failed, "sumsq_chunked (kern)", &got, &exactf, 1, 1e-2, 0);
    w.s[0] = 0;
    ref_sumsq_reduction(&w);
    compare(b, &r1->failed, "sumsq (omp reduction)", w.s, &exactf, 1, 1e-2, 0);
    r3->failed |= r1->failed;
    w.s[0] = 0;
    ref_sumsq_atomic(&w);
    compare(b, &r2->failed, "sumsq (omp atomic)", w.s, &exactf, 1, 1e-2, 0);

    side sides[] = {{kern_sumsq, &w, 0},
                    {kern_sumsq_chunked, &wc, 0},
                    {ref_sumsq_reduction, &w, 0},
                    {ref_sumsq_atomic, &w, 0}};
    measure_sides(b, sides, 4);
    r1->kern_ms = r2->kern_ms = sides[0].ms;
    r3->kern_ms = sides[1].ms;
    r1->ref_ms = r3->ref_ms = sides[2].ms;
    r2->ref_ms = sides[3].ms;
    free(w.x), free(w.s);
    kern_buffer_release(w.kx), kern_buffer_release(w.ks);
}

static void kern_particles(void *u) {
    work *w = u;
    for (int32_t t = 1; t < (int32_t)w->nt; t++) {
        kern_arg args[] = {kern_arg_buffer(w->kx), kern_arg_buffer(w->kv), kern_arg_f32(w->a),
                           kern_arg_f32(w->dt), kern_arg_i32(t)};
        launch(w, args, 5);
    }
}
static void ref_particles(void *u) {
    work *w = u;
    cpu_ref_particles(w->nt, w->n, w->m, w->a, w->dt, w->x, w->v);
}

static void bench_particles(bench *b, table *t, compiled c) {
    int64_t nt = 16, np = (256ll << 10) / b->o.shrink, nd = 3, shape[3] = {nt, np, nd};
    int64_t total = nt * np * nd, row0 = np * nd;
    work w = {.b = b, .nt = nt, .n = np, .m = nd, .a = 2.0f, .dt = 0.01f, .k = c.k};
    w.x = xalloc((size_t)total * 4);
    w.v = xalloc((size_t)total * 4);
    float *got = xalloc((size_t)total * 4);
    memset(w.x, 0, (size_t)total * 4);
    memset(w.v, 0, (size_t)total * 4);
    fill(w.x, row0, 7, -1, 1);
    fill(w.v, row0, 8, -1, 1);
    w.kx = kbuf(b, 3, shape, w.x);
    w.kv = kbuf(b, 3, shape, w.v);
    row *r = add_row(t, "particles (time-indexed 3-D)", "omp for");
    snprintf(r->size, sizeof r->size, "%lld steps x %lld x %lld f32 (%lld launches)",
             (long long)(nt - 1), (long long)np, (long long)nd, (long long)(nt - 1));
    r->compile_ms = c.median_ms;
    r->compile_min_ms = c.min_ms;
    kern_particles(&w);
    ref_particles(&w);
    kread(b, w.kx, got);
    double ex = compare(b, &r->failed, "particles x", got, w.x, total, 1e-6, 1e-7);
    kread(b, w.kv, got);
    double ev = compare(b, &r->failed, "particles v", got, w.v, total, 1e-6, 1e-7);
    r->err = ex > ev ? ex : ev;
    side sides[] = {{kern_particles, &w, 0}, {ref_particles, &w, 0}};
    measure_sides(b, sides, 2);
    r->kern_ms = sides[0].ms;
    r->ref_ms = sides[1].ms;
    free(w.x), free(w.v), free(got);
    kern_buffer_release(w.kx), kern_buffer_release(w.kv);
}

/* ---- the report ----------------------------------------------------------------------- */


static void print_header(const bench *b, int omp_threads) {
    char date[64];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", localtime(&now));
    char model[256] = "unknown", line[512], load[128];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
            snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
            model[strcspn(model, "\n")] = 0;
            break;
        }
    }
    if (f)
        fclose(f);
    bench_load_average(load, sizeof load);
    printf("cpu-bench  %s\n", date);
    printf("machine:   %s, %ld online cores, load average %s\n", model,
           sysconf(_SC_NPROCESSORS_ONLN), load);
    printf("kern:      JIT (kern_module_from_source, LLVM -O2 for the host CPU), kern_launch "
           "on the CPU device, %d threads\n",
           kern_context_threads(b->ctx));
    printf("C:         %s, OpenMP %d threads, schedule %s\n", cpu_ref_compiler(), omp_threads,
           b->o.schedule);
    printf("timing:    median of %d runs (%d rounds of %d, kern and C interleaved, %d warm-up "
           "run(s) before each); JIT compile: median of %d compiles (min in parentheses)\n\n",
           (b->o.reps + ROUNDS - 1) / ROUNDS * ROUNDS, ROUNDS, (b->o.reps + ROUNDS - 1) / ROUNDS,
           b->o.warmup, b->o.compiles);
}

static void print_table(const table *t) {
    printf("| kernel | size | kern ms | C ms | C baseline | kern/C | JIT compile ms | check "
           "(max abs diff) |\n");
    printf("|---|---|---:|---:|---|---:|---:|---|\n");
    for (int i = 0; i < t->n; i++) {
        const row *r = &t->r[i];
        printf("| %s | %s | %.2f | %.2f | %s | %.2f | %.1f (%.1f) | %s (%.3g) |\n", r->name,
               r->size, r->kern_ms, r->ref_ms, r->baseline, r->kern_ms / r->ref_ms, r->compile_ms,
               r->compile_min_ms, r->failed ? "FAILED" : "ok", r->err);
    }
}

static void usage(FILE *to) {
    fprintf(to,
            "usage: cpu-bench [--threads N] [--reps N] [--warmup N] [--compiles N] "
            "[--quick] [--only NAME] [--grid N] [--omp-schedule KIND] [--kernels DIR]\n"
            "  --threads N   kern and OpenMP threads (default 2)\n"
            "  --reps N      timed runs per measurement, median (default 21, max 255)\n"
            "  --warmup N    untimed runs before each round of timed runs (default 1)\n"
            "  --compiles N  JIT compiles per kernel, median (default 7, max 64)\n"
            "  --quick       problem sizes / 16, 3 runs: a smoke test, not numbers\n"
            "  --only NAME   only saxpy, jacobi, simulate, sumsq or particles\n"
            "  --grid N      the stencil's grid is N x N (default 2048, 8..16384)\n"
            "  --omp-schedule static|guided\n"
            "                the schedule of the C loops (default static)\n"
            "  --kernels DIR the .kern files (default %s)\n",
            KERN_BENCH_KERNELS_DIR);
}

static bool want(const bench *b, const char *name) {
    return !b->o.only || strcmp(b->o.only, name) == 0;
}

int main(int argc, char **argv) {
    bench b = {.o = {.threads = 2,
                     .reps = 21,
                     .warmup = 1,
                     .compiles = 7,
                     .shrink = 1,
                     .grid = 2048,
                     .kernels_dir = KERN_BENCH_KERNELS_DIR,
                     .schedule = "static"}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *num = strcmp(a, "--threads") == 0    ? &b.o.threads
                   : strcmp(a, "--reps") == 0     ? &b.o.reps
                   : strcmp(a, "--warmup") == 0   ? &b.o.warmup
                   : strcmp(a, "--compiles") == 0 ? &b.o.compiles
                   : strcmp(a, "--grid") == 0     ? &b.o.grid
                                                  : NULL;
        if (num && v) {
            *num = atoi(v);
            i++;
        } else if (strcmp(a, "--quick") == 0) {
            b.o.shrink = 16;
            b.o.reps = 3;
            b.o.compiles = 3;
        } else if (strcmp(a, "--only") == 0 && v) {
            b.o.only = v;
            i++;
        } else if (strcmp(a, "--omp-schedule") == 0 && v) {
            b.o.schedule = v;
            i++;
        } else if (strcmp(a, "--kernels") == 0 && v) {
            b.o.kernels_dir = v;
            i++;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (b.o.threads < 1 || b.o.threads > 1024 || b.o.reps < 1 || b.o.reps > 255 || b.o.warmup < 0 ||
        b.o.compiles < 1 || b.o.compiles > 64 || b.o.grid < 8 || b.o.grid > 16384) {
        usage(stderr);
        return 2;
    }

    if (cpu_ref_set_schedule(b.o.schedule) != 0) {
        usage(stderr);
        return 2;
    }
    kern_context_options ko = kern_context_options_default();
    ko.threads = b.o.threads;
    if (kern_context_create(&ko, &b.ctx) != KERN_OK)
        die("context", b.ctx ? kern_context_last_error(b.ctx) : "out of memory");
    int omp_threads = cpu_ref_set_threads(b.o.threads);
    print_header(&b, omp_threads);
    fflush(stdout);

    /* every JIT compile first, before any thread of either side has run */
    compiled saxpy = {0}, saxpy_atomic = {0}, jacobi = {0}, jacobi_split = {0}, simulate = {0},
             sumsq = {0}, sumsq_chunked = {0}, particles = {0};
    if (want(&b, "saxpy")) {
        saxpy = compile_kernel(&b, "saxpy.kern", "saxpy");
        saxpy_atomic = compile_kernel(&b, "saxpy_atomic.kern", "saxpy");
    }
    if (want(&b, "jacobi")) {
        jacobi = compile_kernel(&b, "jacobi.kern", "jacobi");
        jacobi_split = compile_kernel(&b, "jacobi_split.kern", "jacobi");
    }
    if (want(&b, "simulate"))
        simulate = compile_kernel(&b, "simulate.kern", "simulate");
    if (want(&b, "sumsq")) {
        sumsq = compile_kernel(&b, "sumsq.kern", "sumsq");
        sumsq_chunked = compile_kernel(&b, "sumsq_chunked.kern", "sumsq_chunked");
    }
    if (want(&b, "particles"))
        particles = compile_kernel(&b, "particles.kern", "step");

    table t = {.n = 0};
    if (want(&b, "saxpy"))
        bench_saxpy(&b, &t, saxpy, saxpy_atomic);
    if (want(&b, "jacobi"))
        bench_jacobi(&b, &t, jacobi, jacobi_split);
    if (want(&b, "simulate"))
        bench_simulate(&b, &t, simulate);
    if (want(&b, "sumsq"))
        bench_sumsq(&b, &t, sumsq, sumsq_chunked);
    if (want(&b, "particles"))
        bench_particles(&b, &t, particles);
    if (t.n == 0) {
        usage(stderr);
        return 2;
    }
    print_table(&t);
    char load[128];
    bench_load_average(load, sizeof load);
    printf("\nload average at the end: %s\n", load);
    kern_context_release(b.ctx);
    if (b.failed) {
        fprintf(stderr, "cpu-bench: a check FAILED (above): the timings are not valid\n");
        return 1;
    }
    return 0;
}
