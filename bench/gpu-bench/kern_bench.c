/* kern_bench.c - kern-bench: the kern side of the GPU benchmark (bench/gpu-bench/README.md).
 *
 * Runs the workloads "loop", "ragged", "divergent" and "kepler" (the `while` workload) of
 * workload.h (the kernels: NAME.kern) through
 * kern's C API on a CUDA context (--target vulkan: the Vulkan device; --target cpu: the CPU
 * device, to try it where there is no GPU) and prints one line per measurement, `kern WORKLOAD METRIC VALUE`:
 *   forward_ms      K, median of --reps runs of kern_launch + kern_sync (host clock)
 *   forward_fast_ms the same in a context made with KERN_FAST_MATH=1 (the targets' fast
 *                   sin: the forward at equal math with the baseline's __sinf build); its
 *                   kernels from --fast-module files, else the JIT; check_fast_out: its out
 *                   against the reference (tolerance GB_FAST_TOL)
 *   fwdrev_ms       K.grad alone (it runs the forward sweep itself, keeping every x_t, then
 *                   the reverse sweep), median, the adjoints re-seeded outside the window
 *   forward_b2b_ms, fwdrev_b2b_ms, forward_fast_b2b_ms  the same launches, 16 back to back and one kern_sync
 *                   (host clock), per launch: the GPU's time without a launch and a sync
 *                   each (median of 5), as the baseline's *_b2b_ms
 *   launch_us       host time of one kern_launch(K) without sync, averaged over --launches
 *                   launches issued back to back (then one kern_sync, not counted)
 *   grad_launch_us  the same for K.grad
 *   graph_launch_us host time of one kern_graph_launch of a captured step (K then K.grad)
 *                   in a burst of 16 after a first burst (graph_first_launch_us: that first
 *                   one, in which Vulkan records the copies the replays in flight need)
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
 * The adstack memory budget (issue 22; --only ckpt and huge, README.md "Memory budget"):
 *   loop_store, loop_budgetK, loop_budgetK_slots, loop_budgetK_recompute: the loop workload
 *       (--n x --steps) in fresh contexts: store-all forced; then ad_memory_budget = the
 *       store-all heap / K (--ckpt K, 32) with the strategy chosen by the runtime, then with
 *       KERN_AD_FEWER_SLOTS and KERN_AD_RECOMPUTE forced. Each: the check, fwdrev_ms,
 *       strategy, budget, needed_bytes, store_all_bytes, recompute (the runtime's expected
 *       cost factor), within_budget, vs_store_all (fwdrev_ms over loop_store's).
 *   loop_huge: the loop workload with as many steps as make its store-all heap at least
 *       --huge-ratio (10) times the device's memory, with the default budget: items (default:
 *       the thread slots the device keeps resident, probed), steps, device_mem_bytes,
 *       store_all_bytes, store_all_ratio, budget, strategy, needed_bytes, recompute,
 *       forward_ms and fwdrev_ms (one run each) and the check on --huge-check items.
 * On the CUDA device the device's memory is cuDeviceTotalMem's; on others loop_huge runs
 * only with --huge-mem BYTES (a pretend memory size: the CPU check of this code).
 *
 * Modules: by default the JIT compiles KERNELS/NAME.kern for the
 * context's backend; --module PATH (repeatable) loads an ahead-of-time module instead
 * (`kernc build X.kern --target=cuda -o PATH`), and a workload takes its kernel from the
 * first module that has it. kern-bench-aot is this program built without the JIT (and so
 * without LLVM, small enough to stage on the GPU machine): it needs --module.
 *
 * Exit status: 0 when every check passed; 1 when a check or a kern call failed; 2 for bad
 * usage; 3 when the context could not be created (no such backend in this runtime, no GPU):
 * the runtime's message is printed. */
#include <dlfcn.h>
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

/* the parts of the benchmark (--only takes a comma-separated list of their names) */

typedef struct opts {
    kern_backend backend;
    int64_t n, steps;
    int reps, warmup, launches, check, threads;
    bool debug;
    unsigned only; /* PART_* */
    const char *kernels, *compare, *dump;
    const char *modules[MAX_MODULES];
    int nmodules;
    const char *fast_modules[MAX_MODULES]; /* --fast-module: built with kernc --fast-math */
    int nfast_modules;
    int ckpt;           /* the budget of loop_budgetK: the store-all heap / ckpt */
    int64_t huge_n;     /* loop_huge's items (0: the device's resident thread slots) */
    int64_t huge_steps; /* loop_huge's steps (0: enough for huge_ratio) */
    int64_t huge_mem;   /* the memory loop_huge measures against (0: the device's) */
    double huge_ratio;  /* loop_huge's store-all heap over that memory, at least */
    int huge_check;     /* loop_huge's items in the check subset */
} opts;

/* The context in use: every kern call below goes to it, and kcheck takes its messages from
 * it. The memory-budget parts switch it to contexts of their own and back. */
static kern_context *g_ctx;
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
    int kind; /* GB_LOOP, GB_RAGGED, GB_DIVERGENT, GB_KEPLER */
    kern_kernel *k, *kg;
    kern_buffer *x0, *w, *count, *out, *x0g, *wg, *outg;
    float *g, *gsub, *zeros; /* host: the seed, the seed on the check subset, zeros */
    int64_t n, steps;
    int check; /* items in the check subset */
} work;

static int fwd_args(const work *wk, kern_arg *a) {
    int na = 0;
    a[na++] = kern_arg_buffer(wk->x0);
    a[na++] = kern_arg_buffer(wk->w);
    if (wk->count)
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

/* Launches issued back to back (B2B of them, one sync after the last; host clock): the
 * milliseconds per launch, the GPU's time per run without a launch and a sync of its own
 * (the baseline's *_b2b_ms are measured the same way). K.grad's adjoints are seeded once:
 * the later runs do the same work with the seed spent. */
enum { B2B = 16 };

/* n launches of K (grad: K.grad) issued back to back, no sync */
static void run_n(const work *wk, bool grad, int n) {
    for (int i = 0; i < n; i++) {
        if (grad)
            run_grad(wk);
        else
            run_fwd(wk);
    }
}

static double time_b2b(const work *wk, bool grad) {
    if (grad)
        seed_grad(wk, wk->g);
    sync_all();
    double t0 = bench_now_ms();
    run_n(wk, grad, B2B);
    sync_all();
    return (bench_now_ms() - t0) / B2B;
}

static double time_fwd_b2b(const work *wk) { return time_b2b(wk, false); }
static double time_grad_b2b(const work *wk) { return time_b2b(wk, true); }

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
    run_n(wk, grad, launches);
    double t1 = bench_now_ms();
    sync_all();
    return (t1 - t0) * 1e3 / launches;
}

/* microseconds per kern_graph_launch of a graph of one step (K, then K.grad): 16 replays
 * issued back to back after a sync (fewer than the CUDA device keeps in flight, 32, so
 * the host does not wait for the GPU), twice: *first_us the first burst, in which a device
 * may still set up the graph's copies (Vulkan records one per replay in flight, once),
 * and the result the second, the replays of a graph already in use; and the milliseconds
 * per replayed step over `launches` replays back to back */
static double graph_launch_us(const work *wk, int launches, double *step_ms, double *first_us) {
    sync_all();
    kcheck(kern_graph_begin(g_ctx), "kern_graph_begin");
    run_fwd(wk);
    run_grad(wk);
    kern_graph *g = NULL;
    kcheck(kern_graph_end(g_ctx, &g), "kern_graph_end");
    kcheck(kern_graph_launch(g), "kern_graph_launch"); /* warm-up */
    sync_all();
    enum { BURST = 16 };
    double us[2];
    for (int b = 0; b < 2; b++) {
        double t0 = bench_now_ms();
        for (int i = 0; i < BURST; i++)
            kcheck(kern_graph_launch(g), "kern_graph_launch");
        us[b] = (bench_now_ms() - t0) * 1e3 / BURST;
        sync_all();
    }
    double t2 = bench_now_ms();
    for (int i = 0; i < launches; i++)
        kcheck(kern_graph_launch(g), "kern_graph_launch");
    sync_all();
    *step_ms = (bench_now_ms() - t2) / launches;
    kern_graph_release(g);
    *first_us = us[0];
    return us[1];
}

static void print_metric(const work *wk, const char *metric, const char *fmt, double v) {
    printf("kern %s %s ", wk->name, metric);
    printf(fmt, v);
    printf("\n");
    fflush(stdout);
}

/* A failed kern call of a part that must not end the program: the message, then false. */
static bool soft(kern_status st, const work *wk, const char *what) {
    if (st == KERN_OK)
        return true;
    printf("# kern %s: %s failed: %s: %s\n", wk->name, what, kern_status_name(st),
           kern_context_last_error(g_ctx));
    fprintf(stderr, "kern-bench: %s: %s failed: %s: %s\n", wk->name, what, kern_status_name(st),
            kern_context_last_error(g_ctx));
    return false;
}

/* K and K.grad with g kept on the check subset, against the double-precision reference.
 * With fwd_ms and grad_ms, the two launches are timed alone (host clock, one run each).
 * A failed launch is a failed check, not the end of the program: false. */
static bool check(work *wk, double *fwd_ms, double *grad_ms) {
    int64_t n = wk->n, steps = wk->steps, stride = gb_stride(n, wk->check);
    kern_arg a[8];
    int na;
    double t0, t1;
    bool ran;
    char what[64];
    snprintf(what, sizeof what, "%s.grad", wk->name);
    sync_all();
    t0 = bench_now_ms();
    na = fwd_args(wk, a);
    ran = soft(kern_launch(wk->k, a, na), wk, wk->name) && soft(kern_sync(g_ctx), wk, "kern_sync");
    t1 = bench_now_ms();
    if (fwd_ms)
        *fwd_ms = t1 - t0;
    if (ran) {
        seed_grad(wk, wk->gsub);
        sync_all();
        t0 = bench_now_ms();
        na = grad_args(wk, a);
        ran = soft(kern_launch(wk->kg, a, na), wk, what) &&
              soft(kern_sync(g_ctx), wk, "kern_sync after K.grad");
        t1 = bench_now_ms();
        if (grad_ms)
            *grad_ms = t1 - t0;
    }
    if (!ran) {
        printf("kern %s check FAILED\n", wk->name);
        fflush(stdout);
        g_failed = 1;
        return false;
    }
    float *out = xalloc((size_t)n * 4), *x0g = xalloc((size_t)n * 4),
          *wg = xalloc((size_t)steps * 4), *w = xalloc((size_t)steps * 4);
    double *rout = xalloc((size_t)n * 8), *rx0g = xalloc((size_t)n * 8),
           *rwg = xalloc((size_t)steps * 8), *xs = xalloc((size_t)steps * 8);
    kcheck(kern_buffer_read(wk->out, out, (size_t)n * 4), "read out");
    kcheck(kern_buffer_read(wk->x0g, x0g, (size_t)n * 4), "read x0.grad");
    kcheck(kern_buffer_read(wk->wg, wg, (size_t)steps * 4), "read w.grad");
    for (int64_t t = 0; t < steps; t++)
        w[t] = gb_w(t);
    for (int64_t i = 0; i < n; i += stride)
        rout[i] = gb_item_reference(wk->kind, i, w, steps, wk->gsub[i], &rx0g[i], rwg, xs);
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
    return true;
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

/* name and name.grad (kg NULL: name alone) on g_ctx: from the first --module file that has name (each is loaded
 * into g_ctx), else the JIT compiles KERNELS/name.kern (compile_ms printed when report). */
static void load_kernels(const opts *o, const char *name, kern_kernel **k, kern_kernel **kg,
                         bool report) {
    kern_module *mod = NULL;
    for (int m = 0; m < o->nmodules && !mod; m++) {
        kern_module *candidate;
        kcheck(kern_module_load_file(g_ctx, o->modules[m], &candidate), o->modules[m]);
        if (kern_kernel_find(candidate, name, k) == KERN_OK)
            mod = candidate;
    }
    if (!mod && o->nmodules > 0) {
        fprintf(stderr, "kern-bench: no module given with --module has a kernel '%s'\n", name);
        exit(1);
    }
    if (!mod) {
#ifdef KERN_BENCH_NO_JIT
        fprintf(stderr,
                "kern-bench: this build has no JIT: give the module of '%s' with --module\n", name);
        exit(2);
#else
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.kern", o->kernels, name);
        double t0 = bench_now_ms();
        kcheck(kern_module_from_file_source(g_ctx, path, &mod), path);
        double ms = bench_now_ms() - t0;
        if (report)
            printf("kern %s compile_ms %.1f\n", name, ms);
        kcheck(kern_kernel_find(mod, name, k), name);
#endif
    }
    char gname[64];
    snprintf(gname, sizeof gname, "%s.grad", name);
    if (kg) /* NULL: K alone (the JIT builds K.grad only when it is looked up) */
        kcheck(kern_kernel_find(mod, gname, kg), gname);
}

/* The inputs of workload.h for n items and `steps` steps in buffers of g_ctx. */
static void work_init(work *wk, int64_t n, int64_t steps, int check) {
    wk->n = n, wk->steps = steps, wk->check = check;
    float *x0 = xalloc((size_t)n * 4), *w = xalloc((size_t)steps * 4);
    bool counted = wk->kind == GB_RAGGED || wk->kind == GB_DIVERGENT;
    int32_t *count = counted ? xalloc((size_t)n * 4) : NULL;
    wk->g = xalloc((size_t)n * 4);
    wk->gsub = xalloc((size_t)n * 4);
    wk->zeros = xalloc((size_t)(n > steps ? n : steps) * 4);
    int64_t stride = gb_stride(n, check);
    for (int64_t i = 0; i < n; i++) {
        x0[i] = gb_x0(i);
        wk->g[i] = gb_g(i);
        wk->gsub[i] = i % stride == 0 ? wk->g[i] : 0.0f;
        if (count)
            count[i] = (int32_t)gb_trips(wk->kind, i, steps);
    }
    for (int64_t t = 0; t < steps; t++)
        w[t] = gb_w(t);
    kcheck(kern_buffer_create(g_ctx, KERN_F32, 1, &n, x0, &wk->x0), "buffer x0");
    kcheck(kern_buffer_create(g_ctx, KERN_F32, 1, &steps, w, &wk->w), "buffer w");
    if (count)
        kcheck(kern_buffer_create(g_ctx, KERN_I32, 1, &n, count, &wk->count), "buffer count");
    kcheck(kern_buffer_create(g_ctx, KERN_F32, 1, &n, NULL, &wk->out), "buffer out");
    kcheck(kern_buffer_create(g_ctx, KERN_F32, 1, &n, NULL, &wk->x0g), "buffer x0.grad");
    kcheck(kern_buffer_create(g_ctx, KERN_F32, 1, &steps, NULL, &wk->wg), "buffer w.grad");
    kcheck(kern_buffer_create(g_ctx, KERN_F32, 1, &n, NULL, &wk->outg), "buffer out.grad");
    free(x0), free(w), free(count);
}

static void work_free(work *wk) {
    kern_buffer *bufs[] = {wk->x0, wk->w, wk->count, wk->out, wk->x0g, wk->wg, wk->outg};
    for (size_t b = 0; b < sizeof bufs / sizeof *bufs; b++)
        kern_buffer_release(bufs[b]);
    free(wk->g), free(wk->gsub), free(wk->zeros);
}

/* The forward at equal math with the baseline's __sinf build: K of the workload in a
 * context created, and its kernel compiled, with KERN_FAST_MATH=1 (the runtime's default
 * options and the JIT read it), from a --fast-module file when one has it; its out against
 * the reference, then forward_fast_ms. A runtime without fast math measures the default. */
static void bench_fast(const opts *o, const char *name, int kind) {
    opts fo = *o;
    memcpy(fo.modules, o->fast_modules, sizeof fo.modules);
    fo.nmodules = o->nfast_modules;
    bool has = false;
    for (int m = 0; m < fo.nmodules && !has; m++) {
        kern_module *mod;
        kern_kernel *k;
        has = kern_module_load_file(g_ctx, fo.modules[m], &mod) == KERN_OK &&
              kern_kernel_find(mod, name, &k) == KERN_OK;
    }
#ifdef KERN_BENCH_NO_JIT
    if (!has) {
        printf("# kern %s: no forward_fast_ms: no --fast-module has '%s' (this build has no "
               "JIT)\n",
               name, name);
        return;
    }
#endif
    if (!has)
        fo.nmodules = 0; /* the JIT, then */
    kern_context *outer = g_ctx;
    kern_context_options base = kern_context_get_options(outer);
    setenv("KERN_FAST_MATH", "1", 1);
    kern_context_options ko = kern_context_options_default();
    ko.backend = base.backend, ko.debug = base.debug, ko.threads = base.threads;
    ko.device = base.device;
    kern_status st = kern_context_create(&ko, &g_ctx);
    work wk = {.o = o, .name = name, .kind = kind};
    if (st == KERN_OK)
        load_kernels(&fo, name, &wk.k, NULL, false);
    unsetenv("KERN_FAST_MATH");
    if (st != KERN_OK) {
        printf("# kern %s: no fast-math context: %s\n", name, kern_context_last_error(g_ctx));
        kern_context_release(g_ctx);
        g_ctx = outer;
        return;
    }
    work_init(&wk, o->n, o->steps, o->check);
    int64_t n = wk.n, steps = wk.steps, stride = gb_stride(n, wk.check);
    run_fwd(&wk);
    sync_all();
    float *out = xalloc((size_t)n * 4), *w = xalloc((size_t)steps * 4);
    double *rout = xalloc((size_t)n * 8), *rwg = xalloc((size_t)steps * 8),
           *xs = xalloc((size_t)steps * 8), xg;
    kcheck(kern_buffer_read(wk.out, out, (size_t)n * 4), "read out");
    for (int64_t t = 0; t < steps; t++)
        w[t] = gb_w(t);
    for (int64_t i = 0; i < n; i += stride)
        rout[i] = gb_item_reference(kind, i, w, steps, 1.0, &xg, rwg, xs);
    double e = gb_maxrel_f32(out, rout, n, stride);
    print_metric(&wk, "check_fast_out", "%.3g", e);
    if (!(e <= GB_FAST_TOL)) {
        fprintf(stderr,
                "kern-bench: CHECK FAILED: %s: the fast-math forward is %.3g off "
                "(tolerance %g)\n",
                name, e, GB_FAST_TOL);
        printf("kern %s check FAILED\n", name);
        g_failed = 1;
    }
    print_metric(&wk, "forward_fast_ms", "%.3f", median_of(&wk, time_fwd, o->warmup, o->reps));
    print_metric(&wk, "forward_fast_b2b_ms", "%.3f",
                 median_of(&wk, time_fwd_b2b, 1, o->reps < 5 ? o->reps : 5));
    free(out), free(w), free(rout), free(rwg), free(xs);
    work_free(&wk);
    kern_context_release(g_ctx);
    g_ctx = outer;
}

static void bench_workload(const opts *o, const char *name, int kind) {
    work wk = {.o = o, .name = name, .kind = kind};
    load_kernels(o, name, &wk.k, &wk.kg, true);
    work_init(&wk, o->n, o->steps, o->check);
    int64_t n = wk.n, steps = wk.steps, work_steps = 0;
    float *w = xalloc((size_t)steps * 4);
    double *xs = xalloc((size_t)steps * 8);
    for (int64_t t = 0; t < steps; t++)
        w[t] = gb_w(t);
    for (int64_t i = 0; i < n; i++) {
        double xg, eg;
        int64_t iters = 0;
        if (kind == GB_KEPLER) /* the iterations in double: the float ones may differ by one */
            gb_kepler_reference(gb_x0(i), gb_kepler_e(i, w, steps), steps, 1.0, &xg, &eg, &iters,
                                xs);
        work_steps += kind == GB_KEPLER ? iters : gb_trips(kind, i, steps);
    }
    free(w), free(xs);
    static const char *const how[] = {
        [GB_LOOP] = "every item",
        [GB_RAGGED] = "item i runs count[i] = T/2 + (i * 7919) % (T - T/2 + 1)",
        [GB_DIVERGENT] = "item i runs count[i], uniform in 0 .. T",
        [GB_KEPLER] = "the cap of a while loop that runs until x converges"};
    printf("# kern %s: %lld items, %lld steps (%s), %.4g steps in all\n", name, (long long)n,
           (long long)steps, how[kind], (double)work_steps);

    if (check(&wk, NULL, NULL)) {
        print_metric(&wk, "forward_ms", "%.3f", median_of(&wk, time_fwd, o->warmup, o->reps));
        print_metric(&wk, "fwdrev_ms", "%.3f", median_of(&wk, time_grad, o->warmup, o->reps));
        print_metric(&wk, "forward_b2b_ms", "%.3f",
                     median_of(&wk, time_fwd_b2b, 1, o->reps < 5 ? o->reps : 5));
        print_metric(&wk, "fwdrev_b2b_ms", "%.3f",
                     median_of(&wk, time_grad_b2b, 1, o->reps < 5 ? o->reps : 5));
        print_metric(&wk, "launch_us", "%.2f", launch_us(&wk, false, o->launches));
        print_metric(&wk, "grad_launch_us", "%.2f", launch_us(&wk, true, o->launches));
        double step_ms;
        double first_us = 0;
        double gus = graph_launch_us(&wk, o->launches, &step_ms, &first_us);
        print_metric(&wk, "graph_launch_us", "%.2f", gus);
        print_metric(&wk, "graph_first_launch_us", "%.2f", first_us);
        print_metric(&wk, "graph_step_ms", "%.3f", step_ms);
        kern_adstack_info ai = {0};
        kcheck(kern_context_adstack_info(g_ctx, &ai), "adstack info");
        print_metric(&wk, "adstack_bytes", "%.0f", (double)ai.heap_bytes);
        printf("# kern %s: adstack heap %lld bytes in %lld allocations, %lld slots of %lld "
               "bytes\n",
               name, (long long)ai.heap_bytes, (long long)ai.heap_allocs, (long long)ai.last_slots,
               (long long)ai.last_stride);
        full_results(&wk);
    }
    work_free(&wk);
    bench_fast(o, name, kind);
}

/* ---- the adstack memory budget (issue 22) ----------------------------------------------- */

static const char *strategy_name(int s) {
    switch (s) {
    case KERN_AD_STORE_ALL: return "store";
    case KERN_AD_FEWER_SLOTS: return "slots";
    case KERN_AD_RECOMPUTE: return "recompute";
    default: return "unreported"; /* 0: a runtime without strategies, or no launch */
    }
}

/* The heap storing every iteration would take: the runtime's figure, else (a runtime that
 * does not report it) the slots times the bytes per slot of the last launch. */
static int64_t store_all_of(const kern_adstack_info *ai) {
    return ai->last_store_all_bytes > 0 ? ai->last_store_all_bytes
                                        : ai->last_slots * ai->last_stride;
}

/* The heap the last launch took: the runtime's figure, else the heap's size. */
static int64_t needed_of(const kern_adstack_info *ai) {
    return ai->last_needed_bytes > 0 ? ai->last_needed_bytes : ai->heap_bytes;
}

static kern_adstack_info adstack_info(void) {
    kern_adstack_info ai = {0}; /* fields a runtime does not fill stay 0 */
    kcheck(kern_context_adstack_info(g_ctx, &ai), "adstack info");
    return ai;
}

/* A context like base, with this budget and strategy; NULL (the message printed) when it
 * cannot be created. */
static kern_context *budget_context(const kern_context_options *base, const char *name,
                                    int64_t budget, int strategy) {
    kern_context_options ko = *base;
    ko.ad_memory_budget = budget;
    ko.ad_strategy = strategy;
    kern_context *ctx = NULL;
    kern_status st = kern_context_create(&ko, &ctx);
    if (st != KERN_OK) {
        const char *why = ctx ? kern_context_last_error(ctx) : "out of memory";
        printf("# kern %s: no context with budget %lld and strategy %s: %s: %s\n", name,
               (long long)budget, strategy_name(strategy), kern_status_name(st), why);
        fprintf(stderr, "kern-bench: %s: cannot create its context: %s: %s\n", name,
                kern_status_name(st), why);
        printf("kern %s check FAILED\n", name);
        kern_context_release(ctx);
        g_failed = 1;
        return NULL;
    }
    return ctx;
}

static void print_adstack(const work *wk, const kern_adstack_info *ai) {
    print_metric(wk, "budget", "%.0f", (double)ai->last_budget);
    printf("kern %s strategy %s\n", wk->name, strategy_name(ai->last_strategy));
    print_metric(wk, "needed_bytes", "%.0f", (double)needed_of(ai));
    print_metric(wk, "store_all_bytes", "%.0f", (double)store_all_of(ai));
    print_metric(wk, "recompute", "%.3g", ai->last_recompute);
    print_metric(wk, "slots", "%.0f", (double)ai->last_slots);
    printf("# kern %s: adstack heap %lld bytes, %lld slots of %lld bytes, strategy %s, "
           "budget %lld, store-all %lld bytes%s\n",
           wk->name, (long long)ai->heap_bytes, (long long)ai->last_slots,
           (long long)ai->last_stride, strategy_name(ai->last_strategy), (long long)ai->last_budget,
           (long long)store_all_of(ai),
           ai->last_store_all_bytes > 0 ? "" : " (slots x stride: not reported by the runtime)");
}

/* One row of the budget part: the loop workload (--n x --steps) in a fresh context with
 * this budget (0: the default) and strategy: the check, then K.grad timed. Returns its
 * fwdrev_ms (NAN when it failed); *ai gets the adstack figures of its last launch. */
static double budget_row(const opts *o, const kern_context_options *base, const char *name,
                         int64_t budget, int strategy, kern_adstack_info *ai) {
    kern_context *outer = g_ctx;
    *ai = (kern_adstack_info){0};
    g_ctx = budget_context(base, name, budget, strategy);
    if (!g_ctx) {
        g_ctx = outer;
        return NAN;
    }
    work wk = {.o = o, .name = name};
    load_kernels(o, "loop", &wk.k, &wk.kg, false);
    work_init(&wk, o->n, o->steps, o->check);
    double ms = NAN;
    if (check(&wk, NULL, NULL)) {
        ms = median_of(&wk, time_grad, o->warmup, o->reps);
        print_metric(&wk, "fwdrev_ms", "%.3f", ms);
        *ai = adstack_info();
        print_adstack(&wk, ai);
        int64_t need = needed_of(ai);
        bool within = budget <= 0 || need <= budget;
        printf("kern %s within_budget %s\n", name, within ? "yes" : "no");
        if (!within) {
            fprintf(stderr,
                    "kern-bench: %s: the adstack heap (%lld bytes) exceeds the budget "
                    "(%lld bytes)\n",
                    name, (long long)need, (long long)budget);
            g_failed = 1;
        }
    }
    work_free(&wk);
    kern_context_release(g_ctx);
    g_ctx = outer;
    return ms;
}

/* loop_store, then loop_budgetK with the runtime's choice and each strategy forced. */
static void bench_budget(const opts *o, const kern_context_options *base) {
    kern_adstack_info ai;
    printf("# kern budget: loop, %lld items x %lld steps, budget = the store-all heap / %d\n",
           (long long)o->n, (long long)o->steps, o->ckpt);
    double store_ms = budget_row(o, base, "loop_store", 0, KERN_AD_STORE_ALL, &ai);
    int64_t store_all = store_all_of(&ai);
    if (!(store_ms == store_ms) || store_all <= 0) {
        printf("# kern budget: no store-all heap to take a budget from; the budget rows are "
               "skipped\n");
        return;
    }
    int64_t budget = store_all / o->ckpt;
    static const struct {
        const char *suffix;
        int strategy;
    } rows[] = {
        {"", KERN_AD_AUTO}, {"_slots", KERN_AD_FEWER_SLOTS}, {"_recompute", KERN_AD_RECOMPUTE}};
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
        char name[64];
        snprintf(name, sizeof name, "loop_budget%d%s", o->ckpt, rows[r].suffix);
        double ms = budget_row(o, base, name, budget, rows[r].strategy, &ai);
        if (ms == ms)
            printf("kern %s vs_store_all %.3f\n", name, ms / store_ms);
        if (rows[r].strategy == KERN_AD_AUTO && ms == ms)
            printf("# kern %s: K.grad %.3f ms at 1/%d of the store-all heap, %.2fx store-all's "
                   "%.3f ms (the aim: at most 1.5x)\n",
                   name, ms, o->ckpt, ms / store_ms, store_ms);
        fflush(stdout);
    }
}

/* The CUDA device's memory (cuDeviceTotalMem, through the driver library the runtime
 * loaded); -1 when it cannot tell. */
static int64_t cuda_total_mem(int ordinal) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib)
        return -1;
    int (*device_get)(int *, int);
    int (*total_mem)(size_t *, int);
    void *f = dlsym(lib, "cuDeviceGet");
    memcpy(&device_get, &f, sizeof f);
    f = dlsym(lib, "cuDeviceTotalMem_v2");
    memcpy(&total_mem, &f, sizeof f);
    int dev = 0;
    size_t bytes = 0;
    int64_t r =
        device_get && total_mem && device_get(&dev, ordinal) == 0 && total_mem(&bytes, dev) == 0
            ? (int64_t)bytes
            : -1;
    dlclose(lib);
    return r;
}

/* The thread slots and the adstack bytes per slot and step of a K.grad of loop on g_ctx:
 * two launches with n items, at 64 and 1088 steps (store-all at those sizes). */
static bool probe_slots(const opts *o, int64_t n, int64_t *slots, double *step_bytes,
                        int64_t *stride_at, int64_t *steps_at) {
    int64_t steps[2] = {64, 1088}, stride[2] = {0, 0};
    for (int p = 0; p < 2; p++) {
        work wk = {.o = o, .name = "loop_huge"};
        load_kernels(o, "loop", &wk.k, &wk.kg, false);
        work_init(&wk, n, steps[p], 0);
        seed_grad(&wk, wk.g);
        kern_arg a[8];
        int na = grad_args(&wk, a);
        bool ok = soft(kern_launch(wk.kg, a, na), &wk, "the probe's K.grad") &&
                  soft(kern_sync(g_ctx), &wk, "kern_sync after the probe");
        kern_adstack_info ai = adstack_info();
        work_free(&wk);
        if (!ok)
            return false;
        *slots = ai.last_slots;
        stride[p] = ai.last_stride;
    }
    *step_bytes = (double)(stride[1] - stride[0]) / (double)(steps[1] - steps[0]);
    *stride_at = stride[1], *steps_at = steps[1];
    return *slots > 0 && *step_bytes > 0;
}

/* loop_huge: as many steps as make the store-all heap huge_ratio times the device's
 * memory, in a fresh context with the default budget; one K and one K.grad, checked. */
static void bench_huge(const opts *o, const kern_context_options *base) {
    const char *name = "loop_huge";
    int64_t mem = o->huge_mem;
    if (mem <= 0 && base->backend == KERN_BACKEND_CUDA)
        mem = cuda_total_mem(base->device < 0 ? 0 : base->device);
    if (mem <= 0) {
        printf("# kern %s: skipped: the device's memory is unknown on %s (--huge-mem BYTES)\n",
               name, kern_backend_name(base->backend));
        return;
    }
    kern_context *outer = g_ctx;
    g_ctx = budget_context(base, name, base->ad_memory_budget, base->ad_strategy);
    if (!g_ctx) {
        g_ctx = outer;
        return;
    }
    /* the probe: with many items, a GPU's slots are its resident threads (the CPU's are its
     * worker threads, for any number of items) */
    int64_t slots = 0, stride_at = 0, steps_at = 0;
    double step_bytes = 0;
    int64_t probe_n = o->huge_n > 0                       ? o->huge_n
                      : base->backend == KERN_BACKEND_CPU ? o->n
                      : o->n > (1 << 22)                  ? o->n
                                                          : (int64_t)1 << 22;
    if (!probe_slots(o, probe_n, &slots, &step_bytes, &stride_at, &steps_at)) {
        printf("kern %s check FAILED\n", name);
        g_failed = 1;
        kern_context_release(g_ctx);
        g_ctx = outer;
        return;
    }
    int64_t n = o->huge_n > 0 ? o->huge_n : slots;
    int64_t use = n < slots ? n : slots; /* the slots loop_huge's launch will have */
    int64_t steps = o->huge_steps;
    if (steps <= 0) {
        double per_slot = o->huge_ratio * (double)mem / (double)use;
        double t = (double)steps_at + (per_slot - (double)stride_at) / step_bytes;
        steps = ((int64_t)ceil(t) + 1023) / 1024 * 1024;
        steps = steps < steps_at ? steps_at : steps;
    }
    if (steps > INT32_MAX) {
        printf("# kern %s: skipped: %lld steps would be needed (w's extent must stay below "
               "2^31); give --huge-n\n",
               name, (long long)steps);
        kern_context_release(g_ctx);
        g_ctx = outer;
        return;
    }
    double estimate = (double)use * ((double)stride_at + (double)(steps - steps_at) * step_bytes);
    printf("# kern %s: %s, memory %lld bytes%s; %lld items, %lld steps; store-all heap about "
           "%.4g bytes (%lld slots of %.4g bytes/step), %.1fx the memory\n",
           name, kern_context_device_name(g_ctx), (long long)mem,
           o->huge_mem > 0 ? " (--huge-mem)" : "", (long long)n, (long long)steps, estimate,
           (long long)use, step_bytes, estimate / (double)mem);
    fflush(stdout);

    work wk = {.o = o, .name = name};
    load_kernels(o, "loop", &wk.k, &wk.kg, false);
    work_init(&wk, n, steps, o->huge_check);
    print_metric(&wk, "items", "%.0f", (double)n);
    print_metric(&wk, "steps", "%.0f", (double)steps);
    print_metric(&wk, "device_mem_bytes", "%.0f", (double)mem);
    double fwd_ms = NAN, grad_ms = NAN;
    if (check(&wk, &fwd_ms, &grad_ms)) {
        kern_adstack_info ai = adstack_info();
        double ratio = (double)store_all_of(&ai) / (double)mem;
        print_metric(&wk, "forward_ms", "%.3f", fwd_ms);
        print_metric(&wk, "fwdrev_ms", "%.3f", grad_ms);
        print_adstack(&wk, &ai);
        print_metric(&wk, "store_all_ratio", "%.2f", ratio);
        if (ratio < o->huge_ratio)
            printf("# kern %s: the store-all heap is only %.2fx the memory (the aim: %gx); "
                   "give --huge-steps\n",
                   name, ratio, o->huge_ratio);
    }
    work_free(&wk);
    kern_context_release(g_ctx);
    g_ctx = outer;
}

/* ---- main ---------------------------------------------------------------------------------- */

static void usage(FILE *to) {
    fprintf(
        to,
        "usage: kern-bench [--target cuda|vulkan|cpu] [--n N] [--steps T] [--reps N] [--warmup N]\n"
        "                  [--launches N] [--check N] [--only PARTS] [--threads N]\n"
        "                  [--debug] [--kernels DIR] [--module PATH]... [--fast-module PATH]...\n"
        "                  [--compare DIR]\n"
        "                  [--dump DIR] [--ckpt K] [--huge-n N] [--huge-steps T]\n"
        "                  [--huge-mem BYTES] [--huge-ratio R] [--huge-check N]\n"
        "defaults: --target cuda --n 1048576 --steps 1024 --reps 20 --warmup 3\n"
        "          --launches 100 --check 4096 --kernels %s\n"
        "          --only loop,ragged,ckpt,huge,divergent,kepler --ckpt 32 --huge-ratio 10\n"
        "          --huge-check 16\n"
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
              .only = PART_ALL,
              .ckpt = 32,
              .huge_ratio = 10,
              .huge_check = 16,
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
            o.only = gb_parse_parts(v);
            ok = o.only != 0;
        } else if (!strcmp(a, "--ckpt")) {
            ok = parse_i64(v, 2, 1 << 20, &x);
            if (ok)
                o.ckpt = (int)x;
        } else if (!strcmp(a, "--huge-n") || !strcmp(a, "--huge-steps") ||
                   !strcmp(a, "--huge-mem")) {
            ok = parse_i64(v, 1, !strcmp(a, "--huge-mem") ? INT64_MAX : INT32_MAX, &x);
            int64_t *dst = !strcmp(a, "--huge-n")       ? &o.huge_n
                           : !strcmp(a, "--huge-steps") ? &o.huge_steps
                                                        : &o.huge_mem;
            if (ok)
                *dst = x;
        } else if (!strcmp(a, "--huge-ratio")) {
            char *end;
            o.huge_ratio = v ? strtod(v, &end) : 0;
            ok = v && *v && !*end && o.huge_ratio > 0;
        } else if (!strcmp(a, "--huge-check")) {
            ok = parse_i64(v, 1, 1 << 30, &x);
            if (ok)
                o.huge_check = (int)x;
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
        } else if (!strcmp(a, "--fast-module")) {
            ok = v && o.nfast_modules < MAX_MODULES;
            if (ok)
                o.fast_modules[o.nfast_modules++] = v;
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

    if (getenv("KERN_FAST_MATH")) { /* the default context must be the default */
        printf("# kern-bench: KERN_FAST_MATH=%s ignored: forward_fast_ms sets it itself\n",
               getenv("KERN_FAST_MATH"));
        unsetenv("KERN_FAST_MATH");
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

    printf("# kern-bench: device %s\n", kern_context_device_name(g_ctx));
    if (o.only & PART_LOOP)
        bench_workload(&o, "loop", GB_LOOP);
    if (o.only & PART_RAGGED)
        bench_workload(&o, "ragged", GB_RAGGED);
    if (o.only & PART_DIVERGENT)
        bench_workload(&o, "divergent", GB_DIVERGENT);
    if (o.only & PART_KEPLER)
        bench_workload(&o, "kepler", GB_KEPLER);
    if (o.only & PART_CKPT)
        bench_budget(&o, &ko);
    if (o.only & PART_HUGE)
        bench_huge(&o, &ko);
    kern_context_release(g_ctx);
    return g_failed;
}
