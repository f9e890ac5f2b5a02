/* kern_bench.c - kern-bench: the kern side of the GPU benchmark (bench/gpu-bench/README.md).
 *
 * Runs the workloads "loop" (loop.kern) and "ragged" (ragged.kern) of workload.h through
 * kern's C API on a CUDA context (--target vulkan: the Vulkan device; --target cpu: the CPU
 * device, to try it where there is no GPU) and prints one line per measurement, `kern WORKLOAD METRIC VALUE`:
 *   forward_ms      K, median of --reps runs of kern_launch + kern_sync (host clock)
 *   fwdrev_ms       K.grad alone (it runs the forward sweep itself, keeping every x_t, then
 *                   the reverse sweep), median, the adjoints re-seeded outside the window
 *   launch_us       host time of one kern_launch(K) without sync, averaged over --launches
 *                   launches issued back to back (then one kern_sync, not counted)
 *   grad_launch_us  the same for K.grad
 *   graph_launch_us host time of one kern_graph_launch of a captured step (K then K.grad)
 *   graph_step_ms   wall time per replayed step, replays back to back
 *   compile_ms      the JIT compile of the .kern (kern_module_from_file_source)
 *   adstack_bytes   the adstack heap after the K.grad launches (kern_context_adstack_info)
 *   check_*         K and K.grad with g kept on a subset of items against workload.h's
 *                   double-precision reference: the largest error over the largest value
 *                   of out, x0.grad and w.grad; check_maxrel the largest of the three
 *   vs_baseline_*   with --compare DIR: the full-size results against the hand-written
 *                   CUDA baseline's (DIR/baseline_WORKLOAD_{out,x0grad,wgrad}.f32)
 * Lines that start with '#' are comments (the device, the sizes, why something failed).
 *
 * Modules: by default the JIT compiles KERNELS/loop.kern and KERNELS/ragged.kern for the
 * context's backend; --module PATH (repeatable) loads an ahead-of-time module instead
 * (`kernc build X.kern --target=cuda -o PATH`), and a workload takes its kernel from the
 * first module that has it. kern-bench-aot is this program built without the JIT (and so
 * without LLVM, small enough to stage on the GPU machine): it needs --module.
 *
 * Exit status: 0 when every check passed; 1 when a check or a kern call failed; 2 for bad
 * usage; 3 when the context could not be created (no such backend in this runtime, no GPU):
 * the runtime's message is printed. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench_util.h"
#include "kern.h"
#include "workload.h"

#ifndef KERN_GPU_BENCH_DIR /* bench/meson.build sets it to the source directory */
#define KERN_GPU_BENCH_DIR "bench/gpu-bench"
#endif

enum { MAX_MODULES = 8 };

typedef struct opts {
    kern_backend backend;
    int64_t n, steps;
    int reps, warmup, launches, check, threads;
    bool debug;
    const char *only, *kernels, *compare, *dump;
    const char *modules[MAX_MODULES];
    int nmodules;
} opts;

static kern_context *g_ctx; /* for the messages of failed calls */
static int g_failed;

static void die(const char *what, const char *why) {
    fprintf(stderr, "kern-bench: %s: %s\n", what, why);
    exit(1);
}

static void kcheck(kern_status st, const char *what) {
    if (st != KERN_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s: %s", kern_status_name(st), kern_context_last_error(g_ctx));
        die(what, msg);
    }
}

static void *xalloc(size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p)
        die("out of memory", "calloc");
    return p;
}

/* ---- results against files of other programs -------------------------------------------- */

static bool read_f32(const char *path, float *dst, int64_t n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    size_t got = fread(dst, sizeof *dst, (size_t)n + 1, f); /* one more: the size must match */
    fclose(f);
    return got == (size_t)n;
}

static void write_f32(const char *path, const float *src, int64_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(src, sizeof *src, (size_t)n, f) != (size_t)n || fclose(f) != 0)
        die(path, "cannot write");
}

/* ---- one workload -------------------------------------------------------------------------- */

typedef struct work {
    const opts *o;
    const char *name;
    bool ragged;
    kern_kernel *k, *kg;
    kern_buffer *x0, *w, *count, *out, *x0g, *wg, *outg;
    float *g, *gsub, *zeros; /* host: the seed, the seed on the check subset, zeros */
    int64_t n, steps;
} work;

static int fwd_args(const work *wk, kern_arg *a) {
    int na = 0;
    a[na++] = kern_arg_buffer(wk->x0);
    a[na++] = kern_arg_buffer(wk->w);
    if (wk->ragged)
        a[na++] = kern_arg_buffer(wk->count);
    a[na++] = kern_arg_buffer(wk->out);
    return na;
}

static int grad_args(const work *wk, kern_arg *a) {
    int na = fwd_args(wk, a);
    a[na++] = kern_arg_buffer(wk->x0g);
    a[na++] = kern_arg_buffer(wk->wg);
    a[na++] = kern_arg_buffer(wk->outg);
    return na;
}

static void run_fwd(const work *wk) {
    kern_arg a[8];
    int na = fwd_args(wk, a);
    kcheck(kern_launch(wk->k, a, na), wk->name);
}

/* the adjoints on entry to K.grad: out.grad = seed, x0.grad = w.grad = 0 (K.grad adds into
 * them and sets out.grad to 0) */
static void seed_grad(const work *wk, const float *seed) {
    kcheck(kern_buffer_write(wk->outg, seed, (size_t)wk->n * 4), "write out.grad");
    kcheck(kern_buffer_write(wk->x0g, wk->zeros, (size_t)wk->n * 4), "write x0.grad");
    kcheck(kern_buffer_write(wk->wg, wk->zeros, (size_t)wk->steps * 4), "write w.grad");
}

static void run_grad(const work *wk) {
    kern_arg a[8];
    int na = grad_args(wk, a);
    char what[64];
    snprintf(what, sizeof what, "%s.grad", wk->name);
    kcheck(kern_launch(wk->kg, a, na), what);
}

static void sync_all(void) { kcheck(kern_sync(g_ctx), "kern_sync"); }

static double time_fwd(const work *wk) {
    sync_all();
    double t0 = bench_now_ms();
    run_fwd(wk);
    sync_all();
    return bench_now_ms() - t0;
}

static double time_grad(const work *wk) {
    seed_grad(wk, wk->g);
    sync_all();
    double t0 = bench_now_ms();
    run_grad(wk);
    sync_all();
    return bench_now_ms() - t0;
}

static double median_of(const work *wk, double (*f)(const work *), int warmup, int reps) {
    for (int i = 0; i < warmup; i++)
        f(wk);
    double *t = xalloc(sizeof *t * (size_t)reps);
    for (int i = 0; i < reps; i++)
        t[i] = f(wk);
    double m = bench_median(t, reps);
    free(t);
    return m;
}

/* microseconds per launch call, launches issued back to back without a sync */
static double launch_us(const work *wk, bool grad, int launches) {
    sync_all();
    double t0 = bench_now_ms();
    for (int i = 0; i < launches; i++) {
        if (grad)
            run_grad(wk);
        else
            run_fwd(wk);
    }
    double t1 = bench_now_ms();
    sync_all();
    return (t1 - t0) * 1e3 / launches;
}

/* microseconds per kern_graph_launch of a graph of one step (K, then K.grad): 16 replays
 * issued back to back after a sync (fewer than the CUDA device keeps in flight, 32, so
 * the host does not wait for the GPU); and the milliseconds per replayed step over
 * `launches` replays back to back */
static double graph_launch_us(const work *wk, int launches, double *step_ms) {
    sync_all();
    kcheck(kern_graph_begin(g_ctx), "kern_graph_begin");
    run_fwd(wk);
    run_grad(wk);
    kern_graph *g = NULL;
    kcheck(kern_graph_end(g_ctx, &g), "kern_graph_end");
    kcheck(kern_graph_launch(g), "kern_graph_launch"); /* warm-up */
    sync_all();
    enum { BURST = 16 };
    double t0 = bench_now_ms();
    for (int i = 0; i < BURST; i++)
        kcheck(kern_graph_launch(g), "kern_graph_launch");
    double t1 = bench_now_ms();
    sync_all();
    double t2 = bench_now_ms();
    for (int i = 0; i < launches; i++)
        kcheck(kern_graph_launch(g), "kern_graph_launch");
    sync_all();
    *step_ms = (bench_now_ms() - t2) / launches;
    kern_graph_release(g);
    return (t1 - t0) * 1e3 / BURST;
}

static void print_metric(const work *wk, const char *metric, const char *fmt, double v) {
    printf("kern %s %s ", wk->name, metric);
    printf(fmt, v);
    printf("\n");
    fflush(stdout);
}

/* K and K.grad with g kept on the check subset, against the double-precision reference */
static void check(work *wk) {
    int64_t n = wk->n, steps = wk->steps, stride = gb_stride(n, wk->o->check);
    float *out = xalloc((size_t)n * 4), *x0g = xalloc((size_t)n * 4),
          *wg = xalloc((size_t)steps * 4), *w = xalloc((size_t)steps * 4);
    double *rout = xalloc((size_t)n * 8), *rx0g = xalloc((size_t)n * 8),
           *rwg = xalloc((size_t)steps * 8), *xs = xalloc((size_t)steps * 8);
    run_fwd(wk);
    seed_grad(wk, wk->gsub);
    run_grad(wk);
    sync_all();
    kcheck(kern_buffer_read(wk->out, out, (size_t)n * 4), "read out");
    kcheck(kern_buffer_read(wk->x0g, x0g, (size_t)n * 4), "read x0.grad");
    kcheck(kern_buffer_read(wk->wg, wg, (size_t)steps * 4), "read w.grad");
    for (int64_t t = 0; t < steps; t++)
        w[t] = gb_w(t);
    for (int64_t i = 0; i < n; i += stride) {
        int64_t ti = wk->ragged ? gb_count(i, steps) : steps;
        rout[i] = gb_reference(gb_x0(i), w, ti, wk->gsub[i], &rx0g[i], rwg, xs);
    }
    double e_out = gb_maxrel_f32(out, rout, n, stride), e_x0g = gb_maxrel_f32(x0g, rx0g, n, stride),
           e_wg = gb_maxrel_f32(wg, rwg, steps, 1);
    double e = e_out > e_x0g ? e_out : e_x0g;
    e = e > e_wg ? e : e_wg;
    e = e_out != e_out || e_x0g != e_x0g || e_wg != e_wg ? NAN : e;
    printf("# kern %s: check on %lld of %lld items (every %lld-th), w.grad from those items\n",
           wk->name, (long long)((n + stride - 1) / stride), (long long)n, (long long)stride);
    print_metric(wk, "check_out", "%.3g", e_out);
    print_metric(wk, "check_x0grad", "%.3g", e_x0g);
    print_metric(wk, "check_wgrad", "%.3g", e_wg);
    print_metric(wk, "check_maxrel", "%.3g", e);
    bool ok = e <= GB_CHECK_TOL;
    printf("kern %s check %s\n", wk->name, ok ? "ok" : "FAILED");
    if (!ok) {
        fprintf(stderr, "kern-bench: CHECK FAILED: %s: largest error %.3g (tolerance %g)\n",
                wk->name, e, GB_CHECK_TOL);
        g_failed = 1;
    }
    free(out), free(x0g), free(wg), free(w), free(rout), free(rx0g), free(rwg), free(xs);
}

/* The full-size results (out from K, the gradients with the full seed): written with --dump,
 * compared with the baseline's with --compare. */
static void full_results(work *wk) {
    const opts *o = wk->o;
    if (!o->dump && !o->compare)
        return;
    int64_t n = wk->n, steps = wk->steps;
    float *res[3] = {xalloc((size_t)n * 4), xalloc((size_t)n * 4), xalloc((size_t)steps * 4)};
    const char *names[3] = {"out", "x0grad", "wgrad"};
    int64_t len[3] = {n, n, steps};
    run_fwd(wk);
    seed_grad(wk, wk->g);
    run_grad(wk);
    sync_all();
    kcheck(kern_buffer_read(wk->out, res[0], (size_t)n * 4), "read out");
    kcheck(kern_buffer_read(wk->x0g, res[1], (size_t)n * 4), "read x0.grad");
    kcheck(kern_buffer_read(wk->wg, res[2], (size_t)steps * 4), "read w.grad");
    char path[4096];
    for (int a = 0; a < 3 && o->dump; a++) {
        snprintf(path, sizeof path, "%s/kern_%s_%s.f32", o->dump, wk->name, names[a]);
        write_f32(path, res[a], len[a]);
    }
    if (o->compare) {
        float *ref = xalloc((size_t)n * 4);
        double worst = 0;
        bool all = true;
        for (int a = 0; a < 3; a++) {
            snprintf(path, sizeof path, "%s/baseline_%s_%s.f32", o->compare, wk->name, names[a]);
            char metric[64];
            snprintf(metric, sizeof metric, "vs_baseline_%s", names[a]);
            if (!read_f32(path, ref, len[a])) {
                printf("# kern %s: no baseline results in %s (missing, or not %lld floats)\n",
                       wk->name, path, (long long)len[a]);
                all = false;
                continue;
            }
            double e = gb_maxrel_ff(res[a], ref, len[a]);
            print_metric(wk, metric, "%.3g", e);
            worst = e > worst || e != e ? e : worst;
        }
        if (all) {
            print_metric(wk, "vs_baseline_maxrel", "%.3g", worst);
            if (!(worst <= GB_AGREE_TOL))
                fprintf(stderr,
                        "kern-bench: %s: kern and the baseline differ by %.3g (more than %g)\n",
                        wk->name, worst, GB_AGREE_TOL);
        }
        free(ref);
    }
    for (int a = 0; a < 3; a++)
        free(res[a]);
}

static kern_module *load_module(const opts *o, const char *name, kern_module **mods, int nmods,
                                kern_kernel **k) {
    for (int m = 0; m < nmods; m++)
        if (kern_kernel_find(mods[m], name, k) == KERN_OK)
            return mods[m];
    if (o->nmodules > 0) {
        fprintf(stderr, "kern-bench: no module given with --module has a kernel '%s'\n", name);
        exit(1);
    }
#ifdef KERN_BENCH_NO_JIT
    fprintf(stderr, "kern-bench: this build has no JIT: give the module of '%s' with --module\n",
            name);
    exit(2);
#else
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.kern", o->kernels, name);
    kern_module *mod;
    double t0 = bench_now_ms();
    kcheck(kern_module_from_file_source(g_ctx, path, &mod), path);
    double ms = bench_now_ms() - t0;
    printf("kern %s compile_ms %.1f\n", name, ms);
    kcheck(kern_kernel_find(mod, name, k), name);
    return mod;
#endif
}

static void bench_workload(const opts *o, const char *name, bool ragged, kern_module **mods,
                           int nmods) {
    work wk = {.o = o, .name = name, .ragged = ragged, .n = o->n, .steps = o->steps};
    int64_t n = wk.n, steps = wk.steps;
    kern_module *mod = load_module(o, name, mods, nmods, &wk.k);
    char gname[64];
    snprintf(gname, sizeof gname, "%s.grad", name);
    kcheck(kern_kernel_find(mod, gname, &wk.kg), gname);

    float *x0 = xalloc((size_t)n * 4), *w = xalloc((size_t)steps * 4);
    int32_t *count = xalloc((size_t)n * 4);
    wk.g = xalloc((size_t)n * 4);
    wk.gsub = xalloc((size_t)n * 4);
    wk.zeros = xalloc((size_t)(n > steps ? n : steps) * 4);
    int64_t stride = gb_stride(n, o->check), work_steps = 0;
    for (int64_t i = 0; i < n; i++) {
        x0[i] = gb_x0(i);
        wk.g[i] = gb_g(i);
        wk.gsub[i] = i % stride == 0 ? wk.g[i] : 0.0f;
        count[i] = gb_count(i, steps);
        work_steps += ragged ? count[i] : steps;
    }
    for (int64_t t = 0; t < steps; t++)
        w[t] = gb_w(t);
    printf("# kern %s: %lld items, %lld steps (%s), %.4g steps in all\n", name, (long long)n,
           (long long)steps,
           ragged ? "item i runs count[i] = T/2 + (i * 7919) % (T - T/2 + 1)" : "every item",
           (double)work_steps);
    kcheck(kern_buffer_create(g_ctx, KERN_F32, 1, &n, x0, &wk.x0), "buffer x0");
    kcheck(kern_buffer_create(g_ctx, KERN_F32, 1, &steps, w, &wk.w), "buffer w");
    if (ragged)
        kcheck(kern_buffer_create(g_ctx, KERN_I32, 1, &n, count, &wk.count), "buffer count");
    kcheck(kern_buffer_create(g_ctx, KERN_F32, 1, &n, NULL, &wk.out), "buffer out");
    kcheck(kern_buffer_create(g_ctx, KERN_F32, 1, &n, NULL, &wk.x0g), "buffer x0.grad");
    kcheck(kern_buffer_create(g_ctx, KERN_F32, 1, &steps, NULL, &wk.wg), "buffer w.grad");
    kcheck(kern_buffer_create(g_ctx, KERN_F32, 1, &n, NULL, &wk.outg), "buffer out.grad");

    check(&wk);
    print_metric(&wk, "forward_ms", "%.3f", median_of(&wk, time_fwd, o->warmup, o->reps));
    print_metric(&wk, "fwdrev_ms", "%.3f", median_of(&wk, time_grad, o->warmup, o->reps));
    print_metric(&wk, "launch_us", "%.2f", launch_us(&wk, false, o->launches));
    print_metric(&wk, "grad_launch_us", "%.2f", launch_us(&wk, true, o->launches));
    double step_ms;
    double gus = graph_launch_us(&wk, o->launches, &step_ms);
    print_metric(&wk, "graph_launch_us", "%.2f", gus);
    print_metric(&wk, "graph_step_ms", "%.3f", step_ms);
    kern_adstack_info ai;
    kcheck(kern_context_adstack_info(g_ctx, &ai), "adstack info");
    print_metric(&wk, "adstack_bytes", "%.0f", (double)ai.heap_bytes);
    printf("# kern %s: adstack heap %lld bytes in %lld allocations, %lld slots of %lld bytes\n",
           name, (long long)ai.heap_bytes, (long long)ai.heap_allocs, (long long)ai.last_slots,
           (long long)ai.last_stride);
    full_results(&wk);

    kern_buffer *bufs[] = {wk.x0, wk.w, wk.count, wk.out, wk.x0g, wk.wg, wk.outg};
    for (size_t b = 0; b < sizeof bufs / sizeof *bufs; b++)
        kern_buffer_release(bufs[b]);
    free(x0), free(w), free(count), free(wk.g), free(wk.gsub), free(wk.zeros);
}

/* ---- main ---------------------------------------------------------------------------------- */

static void usage(FILE *to) {
    fprintf(to,
            "usage: kern-bench [--target cuda|vulkan|cpu] [--n N] [--steps T] [--reps N] [--warmup N]\n"
            "                  [--launches N] [--check N] [--only loop|ragged] [--threads N]\n"
            "                  [--debug] [--kernels DIR] [--module PATH]... [--compare DIR]\n"
            "                  [--dump DIR]\n"
            "defaults: --target cuda --n 1048576 --steps 1024 --reps 20 --warmup 3\n"
            "          --launches 100 --check 4096 --kernels %s\n"
            "The GPU benchmark's kern side: see bench/gpu-bench/README.md.\n",
            KERN_GPU_BENCH_DIR);
}

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || *end || end == s || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

int main(int argc, char **argv) {
    opts o = {.backend = KERN_BACKEND_CUDA,
              .n = 1 << 20,
              .steps = 1024,
              .reps = 20,
              .warmup = 3,
              .launches = 100,
              .check = 4096,
              .kernels = KERN_GPU_BENCH_DIR};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x;
        bool ok = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--debug")) {
            o.debug = true;
            continue;
        } else if (!strcmp(a, "--target")) {
            ok = v && (!strcmp(v, "cuda") || !strcmp(v, "vulkan") || !strcmp(v, "cpu"));
            if (ok)
                o.backend = !strcmp(v, "cuda")     ? KERN_BACKEND_CUDA
                            : !strcmp(v, "vulkan") ? KERN_BACKEND_VULKAN
                                                   : KERN_BACKEND_CPU;
        } else if (!strcmp(a, "--n")) {
            ok = parse_i64(v, 1, INT32_MAX, &o.n);
        } else if (!strcmp(a, "--steps")) {
            ok = parse_i64(v, 2, INT32_MAX, &o.steps);
        } else if (!strcmp(a, "--reps") || !strcmp(a, "--warmup") || !strcmp(a, "--launches") ||
                   !strcmp(a, "--check") || !strcmp(a, "--threads")) {
            int lo = !strcmp(a, "--reps") || !strcmp(a, "--launches") ? 1 : 0;
            ok = parse_i64(v, lo, 1 << 30, &x);
            int *dst = !strcmp(a, "--reps")       ? &o.reps
                       : !strcmp(a, "--warmup")   ? &o.warmup
                       : !strcmp(a, "--launches") ? &o.launches
                       : !strcmp(a, "--check")    ? &o.check
                                                  : &o.threads;
            if (ok)
                *dst = (int)x;
        } else if (!strcmp(a, "--only")) {
            ok = v && (!strcmp(v, "loop") || !strcmp(v, "ragged"));
            o.only = v;
        } else if (!strcmp(a, "--kernels")) {
            ok = v != NULL;
            o.kernels = v;
        } else if (!strcmp(a, "--compare")) {
            ok = v != NULL;
            o.compare = v;
        } else if (!strcmp(a, "--dump")) {
            ok = v != NULL;
            o.dump = v;
        } else if (!strcmp(a, "--module")) {
            ok = v && o.nmodules < MAX_MODULES;
            if (ok)
                o.modules[o.nmodules++] = v;
        } else {
            ok = false;
            v = NULL;
        }
        if (!ok) {
            fprintf(stderr, "kern-bench: bad option %s%s%s\n", a, v ? " " : "", v ? v : "");
            usage(stderr);
            return 2;
        }
        i++;
    }

    kern_context_options ko = kern_context_options_default();
    ko.backend = o.backend;
    ko.debug = o.debug;
    ko.threads = o.threads;
    kern_status st = kern_context_create(&ko, &g_ctx);
    if (st != KERN_OK) {
        fprintf(stderr, "kern-bench: cannot create a %s context: %s: %s\n",
                kern_backend_name(o.backend), kern_status_name(st),
                g_ctx ? kern_context_last_error(g_ctx) : "out of memory");
        printf("# kern: no %s context: %s\n", kern_backend_name(o.backend),
               g_ctx ? kern_context_last_error(g_ctx) : "out of memory");
        kern_context_release(g_ctx);
        return 3;
    }
    printf("# kern-bench: target %s%s, %s build, n %lld, steps %lld, reps %d, warmup %d\n",
           kern_backend_name(o.backend), o.debug ? " (debug)" : "",
#ifdef KERN_BENCH_NO_JIT
           "AOT-only",
#else
           "JIT",
#endif
           (long long)o.n, (long long)o.steps, o.reps, o.warmup);
    if (o.backend == KERN_BACKEND_CPU)
        printf("# kern-bench: %d CPU threads\n", kern_context_threads(g_ctx));

    kern_module *mods[MAX_MODULES];
    for (int m = 0; m < o.nmodules; m++)
        kcheck(kern_module_load_file(g_ctx, o.modules[m], &mods[m]), o.modules[m]);
    if (!o.only || !strcmp(o.only, "loop"))
        bench_workload(&o, "loop", false, mods, o.nmodules);
    if (!o.only || !strcmp(o.only, "ragged"))
        bench_workload(&o, "ragged", true, mods, o.nmodules);
    kern_context_release(g_ctx);
    return g_failed;
}
