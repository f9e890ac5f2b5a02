/* vec_bench.c - vec-bench: does vec3 code run as fast as the same kernel scalarized by hand?
 * (bench/README.md, "vec-bench"). Built with the project, run by hand.
 *
 * Workloads, each a pair of kernel files of bench/kernels/ with the same signature in memory
 * (a vec3[] is an (N, 3) f32 array, a vec3[,] a (T, N, 3) one, a vec3 by value a (3,) one),
 * so that both kernels of a pair run on the same buffers with the same arguments:
 *   particles  vec_particles.kern / vec_particles_scalar.kern: a time loop of `steps` steps
 *              per work item (springs to an anchor, gravity, drag, a sin wind) on vec3 state; K.grad
 *              keeps the state on adstacks (SIMD across work items on the CPU)
 *   chain      vec_chain.kern / vec_chain_scalar.kern: one step of a chain of masses in 3-D
 *              on time-indexed arrays, launched for t = 1 .. T-1 (K.grad: t = T-1 .. 1)
 * For each workload and each side it prints: the JIT compile time of the module
 * (kern_module_from_source, primal kernels, median of --compiles) and of the first lookup of
 * K.grad (built lazily: the source is compiled again with that gradient); K and K.grad,
 * medians of 3 rounds x --reps runs that interleave vec3 K, scalar K, vec3 K.grad, scalar
 * K.grad (each round after one warm-up run; a 300 ms pause between runs of different kernels
 * on the CPU); and the ratios vec3 / scalar. Before timing, both sides run once from the same
 * inputs and their outputs and gradients are compared (the kernels do the same float
 * operations, up to additions of 0.0: expect bit equality), and the particles' forward is
 * compared with a double-precision C loop.
 *
 * --target cpu (default; 2 threads), cuda or vulkan: bench/gpu-bench/run.sh runs it on the
 * GPU machine. Exit status: 0, 1 when a check or a kern call failed, 2 for bad usage, 3 when
 * the context could not be created. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "kern.h"

#ifndef KERN_BENCH_KERNELS_DIR /* bench/meson.build sets it to the source directory */
#define KERN_BENCH_KERNELS_DIR "bench/kernels"
#endif

typedef struct opts {
    kern_backend backend;
    int threads, reps, compiles;
    int64_t n, steps, chain_n, chain_t;
    bool quick;
    const char *only, *kernels;
} opts;

static kern_context *g_ctx;
static int g_failed;

static void die(const char *what, const char *why) {
    fprintf(stderr, "vec-bench: %s: %s\n", what, why);
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

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float frand(float lo, float hi) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 11) * (1.0 / 9007199254740992.0));
}

/* ---- one side: a module, K, K.grad ------------------------------------------------------- */

typedef struct side {
    const char *file;
    kern_module *mod;
    kern_kernel *k, *kg;
    double compile_ms, grad_compile_ms;
} side;

static double compile_once(const char *src, size_t len, const char *path, kern_module **mod) {
    double t0 = bench_now_ms();
    kcheck(kern_module_from_source(g_ctx, src, len, path, mod), path);
    return bench_now_ms() - t0;
}

/* compiles o->compiles times (the median is the compile time; the last module is kept) and
 * times the first lookup of K.grad */
static void side_load(const opts *o, side *s, const char *kernel) {
    char path[4096], gname[128];
    snprintf(path, sizeof path, "%s/%s", o->kernels, s->file);
    size_t len;
    char *src = bench_read_text(path, &len);
    if (!src)
        die(path, "cannot read (--kernels DIR)");
    double t[32];
    int nc = o->compiles < 32 ? o->compiles : 32;
    for (int i = 0; i < nc; i++) {
        t[i] = compile_once(src, len, path, &s->mod);
        if (i + 1 < nc)
            kern_module_release(s->mod);
    }
    s->compile_ms = bench_median(t, nc);
    kcheck(kern_kernel_find(s->mod, kernel, &s->k), kernel);
    snprintf(gname, sizeof gname, "%s.grad", kernel);
    double t0 = bench_now_ms();
    kcheck(kern_kernel_find(s->mod, gname, &s->kg), gname);
    s->grad_compile_ms = bench_now_ms() - t0;
    free(src);
}

/* ---- workloads ----------------------------------------------------------------------------- */

enum { MAX_ARGS = 16, MAX_BUFS = 16 };

typedef struct work {
    const opts *o;
    const char *name, *kernel, *size;
    side vec, sc;
    kern_arg args[MAX_ARGS]; /* K's parameters, then the adjoints: K.grad's */
    int nargs, ngargs;
    int launches;                /* 1, or T - 1 (the time-indexed chain) */
    int targ;                    /* the index of the argument t, when launches > 1 */
    kern_buffer *outs[MAX_BUFS]; /* compared between the sides: K's outputs, then adjoints */
    int nouts, ngrads;
    kern_buffer *seed[MAX_BUFS]; /* adjoint buffers re-seeded before each K.grad */
    const void *seed_data[MAX_BUFS];
    size_t seed_bytes[MAX_BUFS];
    int nseed;
    kern_buffer *owned[2 * MAX_BUFS];
    int nowned;
} work;

static kern_buffer *wbuf(work *w, int rank, const int64_t *shape, const float *data) {
    kern_buffer *b;
    kcheck(kern_buffer_create(g_ctx, KERN_F32, rank, shape, data, &b), w->name);
    w->owned[w->nowned++] = b;
    return b;
}

/* an adjoint buffer: re-seeded with `data` (or zeros) before every K.grad */
static kern_buffer *wgrad(work *w, int rank, const int64_t *shape, const float *data) {
    size_t count = 1;
    for (int d = 0; d < rank; d++)
        count *= (size_t)shape[d];
    float *z = data ? NULL : xalloc(count * 4);
    kern_buffer *b = wbuf(w, rank, shape, data ? data : z);
    w->seed[w->nseed] = b;
    w->seed_data[w->nseed] = data ? data : z; /* z lives as long as the process */
    w->seed_bytes[w->nseed++] = count * 4;
    return b;
}

static void run_k(const work *w, const side *s) {
    for (int l = 0; l < w->launches; l++) {
        kern_arg a[MAX_ARGS];
        memcpy(a, w->args, sizeof a);
        if (w->launches > 1)
            a[w->targ] = kern_arg_i32(l + 1);
        kcheck(kern_launch(s->k, a, w->nargs), s->file);
    }
}

static void reseed(const work *w) {
    for (int i = 0; i < w->nseed; i++)
        kcheck(kern_buffer_write(w->seed[i], w->seed_data[i], w->seed_bytes[i]), "reseed");
}

static void run_grad(const work *w, const side *s) {
    for (int l = w->launches; l >= 1; l--) {
        kern_arg a[MAX_ARGS];
        memcpy(a, w->args, sizeof a);
        if (w->launches > 1)
            a[w->targ] = kern_arg_i32(l);
        kcheck(kern_launch(s->kg, a, w->ngargs), s->file);
    }
}

static double time_k(const work *w, const side *s) {
    kcheck(kern_sync(g_ctx), "sync");
    double t0 = bench_now_ms();
    run_k(w, s);
    kcheck(kern_sync(g_ctx), "sync");
    return bench_now_ms() - t0;
}

static double time_grad(const work *w, const side *s) {
    reseed(w);
    kcheck(kern_sync(g_ctx), "sync");
    double t0 = bench_now_ms();
    run_grad(w, s);
    kcheck(kern_sync(g_ctx), "sync");
    return bench_now_ms() - t0;
}

/* K then K.grad from the same inputs; copies of the buffers in outs[] */
static float **snapshot(const work *w, const side *s, const float *init, size_t init_bytes,
                        kern_buffer *state) {
    if (state)
        kcheck(kern_buffer_write(state, init, init_bytes), "reset the state");
    run_k(w, s);
    reseed(w);
    run_grad(w, s);
    kcheck(kern_sync(g_ctx), "sync");
    float **r = xalloc(sizeof *r * (size_t)w->nouts);
    for (int i = 0; i < w->nouts; i++) {
        size_t bytes = kern_buffer_bytes(w->outs[i]);
        r[i] = xalloc(bytes);
        kcheck(kern_buffer_read(w->outs[i], r[i], bytes), "read");
    }
    return r;
}

/* the largest difference between the sides over the largest magnitude, per buffer */
static double compare_sides(const work *w, float **a, float **b) {
    double worst = 0;
    for (int i = 0; i < w->nouts; i++) {
        size_t n = kern_buffer_bytes(w->outs[i]) / 4;
        double d = 0, m = 0;
        for (size_t j = 0; j < n; j++) {
            d = fmax(d, fabs((double)a[i][j] - b[i][j]));
            m = fmax(m, fabs((double)b[i][j]));
            if (a[i][j] != a[i][j] || b[i][j] != b[i][j])
                d = INFINITY;
        }
        worst = fmax(worst, m > 0 ? d / m : d);
    }
    return worst;
}

static void free_snap(const work *w, float **s) {
    for (int i = 0; i < w->nouts; i++)
        free(s[i]);
    free(s);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void settle(const opts *o) {
    if (o->backend == KERN_BACKEND_CPU)
        bench_settle();
}

/* interleaved rounds: vec K, scalar K, vec K.grad, scalar K.grad */
static void time_work(const work *w, double med[4]) {
    const opts *o = w->o;
    enum { ROUNDS = 3 };
    int reps = o->reps;
    double *t[4];
    for (int k = 0; k < 4; k++)
        t[k] = xalloc(sizeof(double) * ROUNDS * (size_t)reps);
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < 4; k++) {
            const side *s = k % 2 == 0 ? &w->vec : &w->sc;
            double (*f)(const work *, const side *) = k < 2 ? time_k : time_grad;
            settle(o);
            f(w, s); /* warm-up */
            for (int i = 0; i < reps; i++)
                t[k][r * reps + i] = f(w, s);
        }
    for (int k = 0; k < 4; k++) {
        qsort(t[k], (size_t)ROUNDS * reps, sizeof(double), cmp_double);
        med[k] = t[k][ROUNDS * reps / 2];
        free(t[k]);
    }
}

static void report(work *w, const float *init, size_t init_bytes, kern_buffer *state,
                   double ref_err) {
    float **a = snapshot(w, &w->vec, init, init_bytes, state);
    float **b = snapshot(w, &w->sc, init, init_bytes, state);
    double diff = compare_sides(w, a, b);
    free_snap(w, a), free_snap(w, b);
    if (ref_err >= 0)
        printf("# %s: vec3 K against a double-precision C loop on a few items: largest error "
               "%.3g of the largest value\n",
               w->name, ref_err);
    /* relative to the largest value: the gradients sum with atomics, in another order on
     * each GPU run (1.65e-5 measured on an H200 with CUDA), and the two sides' products
     * fuse into FMAs differently; 256 f32 steps near a singular spring for ref_err */
    bool ok = diff <= 1e-4 && !(ref_err > 1e-2);
    if (!ok) {
        fprintf(stderr, "vec-bench: CHECK FAILED: %s: vec3 and scalar differ by %.3g%s\n", w->name,
                diff, ref_err > 1e-2 ? " (or the C reference)" : "");
        g_failed = 1;
    }
    double med[4];
    time_work(w, med);
    printf("%-10s %-24s %8.2f %8.2f %6.3f   %9.2f %9.2f %6.3f   %6.1f %6.1f %6.1f %6.1f   %.2g%s\n",
           w->name, w->size, med[0], med[1], med[0] / med[1], med[2], med[3], med[2] / med[3],
           w->vec.compile_ms, w->sc.compile_ms, w->vec.grad_compile_ms, w->sc.grad_compile_ms, diff,
           ok ? "" : " FAILED");
    /* the same as `vec WORKLOAD METRIC VALUE` lines, for scripts */
    const char *m[] = {"forward_ms_vec3", "forward_ms_scalar", "grad_ms_vec3", "grad_ms_scalar"};
    for (int k = 0; k < 4; k++)
        printf("vec %s %s %.3f\n", w->name, m[k], med[k]);
    printf("vec %s forward_ratio %.3f\nvec %s grad_ratio %.3f\n", w->name, med[0] / med[1], w->name,
           med[2] / med[3]);
    fflush(stdout);
}

static void work_load(work *w) {
    side_load(w->o, &w->vec, w->kernel);
    side_load(w->o, &w->sc, w->kernel);
}

static void work_release(work *w) {
    for (int i = 0; i < w->nowned; i++)
        kern_buffer_release(w->owned[i]);
    kern_module_release(w->vec.mod);
    kern_module_release(w->sc.mod);
}

/* particles: x0, v0, out (N, 3), anchor (3,), k, dt, steps; then the adjoints of x0, v0, out,
 * anchor, k (K.grad's parameters follow K's order) */
static void bench_particles(const opts *o) {
    work w = {.o = o, .name = "particles", .kernel = "particles", .launches = 1};
    w.vec.file = "vec_particles.kern";
    w.sc.file = "vec_particles_scalar.kern";
    work_load(&w);
    int64_t n = o->n, steps = o->steps, s3[2] = {n, 3}, s1[1] = {3}, one[1] = {1};
    float *x0 = xalloc((size_t)n * 12), *v0 = xalloc((size_t)n * 12), *g = xalloc((size_t)n * 12);
    for (int64_t i = 0; i < n * 3; i++) {
        x0[i] = frand(-2, 2);
        v0[i] = frand(-1, 1);
        g[i] = frand(-1, 1);
    }
    static const float anchor[3] = {0.1f, 0.2f, -0.3f};
    const float k = 4.0f, dt = 0.01f;
    char size[64];
    snprintf(size, sizeof size, "%lld items x %lld steps", (long long)n, (long long)steps);
    w.size = size;
    kern_buffer *bout = wbuf(&w, 2, s3, NULL);
    kern_arg a[] = {kern_arg_buffer(wbuf(&w, 2, s3, x0)),
                    kern_arg_buffer(wbuf(&w, 2, s3, v0)),
                    kern_arg_buffer(bout),
                    kern_arg_buffer(wbuf(&w, 1, s1, anchor)),
                    kern_arg_f32(k),
                    kern_arg_f32(dt),
                    kern_arg_i32((int32_t)steps),
                    kern_arg_buffer(wgrad(&w, 2, s3, NULL)),
                    kern_arg_buffer(wgrad(&w, 2, s3, NULL)),
                    kern_arg_buffer(wgrad(&w, 2, s3, g)),
                    kern_arg_buffer(wgrad(&w, 1, s1, NULL)),
                    kern_arg_buffer(wgrad(&w, 1, one, NULL))};
    memcpy(w.args, a, sizeof a);
    w.nargs = 7;
    w.ngargs = 12;
    w.outs[w.nouts++] = bout;
    for (int i = 0; i < 5; i++) /* x0.grad, v0.grad, out.grad, anchor.grad, k.grad */
        w.outs[w.nouts++] = w.seed[i];
    /* the forward against double precision on a few items */
    run_k(&w, &w.vec);
    kcheck(kern_sync(g_ctx), "sync");
    float *out = xalloc((size_t)n * 12);
    kcheck(kern_buffer_read(bout, out, (size_t)n * 12), "read out");
    double err = 0, mag = 0;
    for (int64_t i = 0; i < n; i += n / 64 + 1) {
        double x[3], v[3];
        for (int c = 0; c < 3; c++)
            x[c] = x0[i * 3 + c], v[c] = v0[i * 3 + c];
        for (int64_t t = 0; t < steps; t++) {
            double d[3] = {x[0] - anchor[0], x[1] - anchor[1], x[2] - anchor[2]};
            double l = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]), s = -k * (l - 1) / l;
            for (int c = 0; c < 3; c++) {
                v[c] += dt *
                        (s * d[c] - 0.1 * v[c] + 0.5 * sin(x[(c + 2) % 3]) + (c == 1 ? -9.8 : 0.0));
                x[c] += dt * v[c];
            }
        }
        for (int c = 0; c < 3; c++) {
            err = fmax(err, fabs(out[i * 3 + c] - x[c]));
            mag = fmax(mag, fabs(x[c]));
        }
    }
    report(&w, NULL, 0, NULL, err / mag);
    work_release(&w);
    free(x0), free(v0), free(out);
}

/* chain: x, v (T, N, 3), k, dt, t; adjoints of x, v, k */
static void bench_chain(const opts *o) {
    work w = {.o = o, .name = "chain", .kernel = "chain"};
    w.vec.file = "vec_chain.kern";
    w.sc.file = "vec_chain_scalar.kern";
    work_load(&w);
    int64_t n = o->chain_n, tt = o->chain_t, s3[3] = {tt, n, 3}, one[1] = {1};
    size_t count = (size_t)(tt * n * 3);
    float *x = xalloc(count * 4), *g = xalloc(count * 4);
    for (int64_t i = 0; i < n; i++) { /* row 0: a stretched, wiggly chain; the other rows 0 */
        x[i * 3 + 0] = 1.1f * (float)i;
        x[i * 3 + 1] = frand(-0.1f, 0.1f);
        x[i * 3 + 2] = frand(-0.1f, 0.1f);
    }
    for (size_t i = 0; i < count; i++)
        g[i] = frand(-1, 1);
    char size[64];
    snprintf(size, sizeof size, "%lld masses x %lld launches", (long long)n, (long long)(tt - 1));
    w.size = size;
    w.launches = (int)tt - 1;
    w.targ = 4;
    kern_buffer *bx = wbuf(&w, 3, s3, x), *bv = wbuf(&w, 3, s3, NULL);
    kern_arg a[] = {kern_arg_buffer(bx),
                    kern_arg_buffer(bv),
                    kern_arg_f32(50.0f),
                    kern_arg_f32(0.001f),
                    kern_arg_i32(1),
                    kern_arg_buffer(wgrad(&w, 3, s3, g)),
                    kern_arg_buffer(wgrad(&w, 3, s3, NULL)),
                    kern_arg_buffer(wgrad(&w, 1, one, NULL))};
    memcpy(w.args, a, sizeof a);
    w.nargs = 5;
    w.ngargs = 8;
    w.outs[w.nouts++] = bx;
    w.outs[w.nouts++] = bv;
    for (int i = 0; i < 3; i++) /* x.grad, v.grad, k.grad */
        w.outs[w.nouts++] = w.seed[i];
    report(&w, x, count * 4, bx, -1);
    work_release(&w);
    free(x), free(g);
}

/* ---- main ---------------------------------------------------------------------------------- */

static void usage(FILE *to) {
    fprintf(to,
            "usage: vec-bench [--target cpu|cuda|vulkan] [--threads N] [--n N] [--steps T]\n"
            "                 [--chain-n N] [--chain-t T] [--reps N] [--compiles N] [--quick]\n"
            "                 [--only particles|chain] [--kernels DIR]\n"
            "defaults: --target cpu --threads 2 --reps 7 --compiles 5 --kernels %s;\n"
            "  CPU: --n 65536 --steps 256 --chain-n 262144 --chain-t 16\n"
            "  GPU: --n 1048576 --steps 256 --chain-n 4194304 --chain-t 16\n"
            "vec3 kernels against the same kernels scalarized by hand: bench/README.md.\n",
            KERN_BENCH_KERNELS_DIR);
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
    opts o = {.backend = KERN_BACKEND_CPU,
              .threads = 2,
              .reps = 7,
              .compiles = 5,
              .kernels = KERN_BENCH_KERNELS_DIR};
    int64_t n = -1, steps = -1, cn = -1, ct = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x = 0;
        bool ok = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--quick")) {
            o.quick = true;
            continue;
        } else if (!strcmp(a, "--target")) {
            ok = v && (!strcmp(v, "cuda") || !strcmp(v, "vulkan") || !strcmp(v, "cpu"));
            if (ok)
                o.backend = !strcmp(v, "cuda")     ? KERN_BACKEND_CUDA
                            : !strcmp(v, "vulkan") ? KERN_BACKEND_VULKAN
                                                   : KERN_BACKEND_CPU;
        } else if (!strcmp(a, "--n") || !strcmp(a, "--chain-n")) {
            ok = parse_i64(v, 2, INT32_MAX / 4, &x);
            *(!strcmp(a, "--n") ? &n : &cn) = x;
        } else if (!strcmp(a, "--steps") || !strcmp(a, "--chain-t")) {
            ok = parse_i64(v, 2, 1 << 20, &x);
            *(!strcmp(a, "--steps") ? &steps : &ct) = x;
        } else if (!strcmp(a, "--threads") || !strcmp(a, "--reps") || !strcmp(a, "--compiles")) {
            ok = parse_i64(v, !strcmp(a, "--threads") ? 0 : 1, 1 << 20, &x);
            *(!strcmp(a, "--threads") ? &o.threads
              : !strcmp(a, "--reps")  ? &o.reps
                                      : &o.compiles) = (int)x;
        } else if (!strcmp(a, "--only")) {
            ok = v && (!strcmp(v, "particles") || !strcmp(v, "chain"));
            o.only = v;
        } else if (!strcmp(a, "--kernels")) {
            ok = v != NULL;
            o.kernels = v;
        } else {
            ok = false;
            v = NULL;
        }
        if (!ok) {
            fprintf(stderr, "vec-bench: bad option %s%s%s\n", a, v ? " " : "", v ? v : "");
            usage(stderr);
            return 2;
        }
        i++;
    }
    bool gpu = o.backend != KERN_BACKEND_CPU;
    int shrink = o.quick ? 16 : 1;
    o.n = n > 0 ? n : (gpu ? 1 << 20 : 65536) / shrink;
    o.steps = steps > 0 ? steps : 256 / (o.quick ? 4 : 1);
    o.chain_n = cn > 0 ? cn : (gpu ? 1 << 22 : 1 << 18) / shrink;
    o.chain_t = ct > 0 ? ct : 16;
    if (o.quick)
        o.reps = 3, o.compiles = 1;

    kern_context_options ko = kern_context_options_default();
    ko.backend = o.backend;
    ko.threads = o.threads;
    kern_status st = kern_context_create(&ko, &g_ctx);
    if (st != KERN_OK) {
        printf("# vec-bench: no %s context: %s\n", kern_backend_name(o.backend),
               g_ctx ? kern_context_last_error(g_ctx) : "out of memory");
        kern_context_release(g_ctx);
        return 3;
    }
    char load[128], host[128] = "?", model[256] = "?";
    gethostname(host, sizeof host);
    FILE *ci = fopen("/proc/cpuinfo", "r");
    for (char line[512]; ci && fgets(line, sizeof line, ci);)
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
            model[strcspn(model, "\n")] = 0;
            break;
        }
    if (ci)
        fclose(ci);
    bench_load_average(load, sizeof load);
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    printf("# vec-bench %s, target %s", date, kern_backend_name(o.backend));
    if (!gpu)
        printf(", %d threads, CPU %s, %ld online cores", kern_context_threads(g_ctx), model,
               sysconf(_SC_NPROCESSORS_ONLN));
    printf(", load %s\n", load);
    printf("# ms: medians of 3 interleaved rounds x %d runs; compile ms: primal module median "
           "of %d, first K.grad lookup\n",
           o.reps, o.compiles);
    printf("%-10s %-24s %8s %8s %6s   %9s %9s %6s   %6s %6s %6s %6s   %s\n", "workload", "size",
           "K vec3", "K scal", "ratio", "grad vec3", "grad scal", "ratio", "c.vec", "c.scal",
           "cg.vec", "cg.sc", "vec3-scalar");
    fflush(stdout);
    if (!o.only || !strcmp(o.only, "particles"))
        bench_particles(&o);
    if (!o.only || !strcmp(o.only, "chain"))
        bench_chain(&o);
    bench_load_average(load, sizeof load);
    printf("# load at the end %s\n", load);
    kern_context_release(g_ctx);
    return g_failed;
}
