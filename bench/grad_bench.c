/* grad_bench.c - grad-bench: reverse mode (K.grad) on the CPU against the forward kernel K
 * and against PyTorch's CPU autograd, in one run (bench/README.md, "grad-bench").
 *
 * For every workload of bench/kernels/grad_*.kern it JIT-compiles the module through the
 * C API (kern_module_from_source builds K and K.grad), in a fresh CPU context per workload
 * (so that the adstack heap it reports is that workload's own), and reports:
 *   - the time of K and of K.grad (for a time-stepped workload: the whole sequence of
 *     launches, and of the gradient launches in reverse order), and their ratio;
 *   - the adstack heap bytes the runtime allocated (kern_context_adstack_info) against the
 *     minimum needed, computed here from the workload's parameters: the values the loop
 *     carries (one f32 per iteration) times the trip counts of the threads that can run
 *     at once (the context's threads; for the ragged loop the largest counts);
 *   - PyTorch's forward + backward of the same computation (bench/grad_torch.py, run as a
 *     subprocess with /usr/bin/python3 and driven over a pipe), with as many threads.
 * Before timing, each workload runs K then K.grad once from the same inputs and seeds as
 * the PyTorch side and compares the gradients (|kern - torch| <= 1e-3 |torch| + 1e-4
 * max |torch|, per array): a failed check prints CHECK FAILED and makes the exit status 1.
 *
 * Timing: clock_gettime(CLOCK_MONOTONIC) around the launches and kern_sync (buffer writes
 * that re-seed the adjoints before each K.grad run are outside the timed window); the
 * PyTorch time is measured in the subprocess (time.perf_counter around forward +
 * backward). Each number is the median of --reps runs taken in three rounds that
 * interleave the sides (K, K.grad, PyTorch, K, ...), each after --warmup untimed runs and
 * followed by a 300 ms pause (idle OpenMP threads of either side spin for a while).
 *
 * Not a test: built with the project, never run by CI. Exit status 0 when every check
 * passed, 1 when a check or a kern call failed, 2 for bad usage. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#ifdef KERN_BENCH_TRIPS
#include "grad_trips.h"
#endif
#include "../include/kern.h"

#ifndef KERN_BENCH_KERNELS_DIR /* set by bench/meson.build to the source directory's */
#define KERN_BENCH_KERNELS_DIR "bench/kernels"
#endif
#ifndef KERN_BENCH_TORCH_SCRIPT
#define KERN_BENCH_TORCH_SCRIPT "bench/grad_torch.py"
#endif

/* ---- options and small helpers ------------------------------------------------------ */

typedef struct opts {
    int threads, reps, warmup, shrink;
    const char *kernels_dir, *only, *python, *script;
    bool torch; /* run the PyTorch side */
} opts;




static void die(const char *what, const char *why) {
    fprintf(stderr, "grad-bench: %s: %s\n", what, why);
    exit(1);
}

static void *xalloc(size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p)
        die("out of memory", "calloc");
    return p;
}

/* deterministic inputs: a 64-bit LCG */
static uint64_t lcg_next(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 40; /* 24 bits */
}
static void fill(float *a, int64_t n, uint64_t seed, float lo, float hi) {
    uint64_t s = seed * 7919u + 17u;
    for (int64_t i = 0; i < n; i++)
        a[i] = lo + (hi - lo) * (float)((double)lcg_next(&s) / (double)(1ull << 24));
}


/* ---- the PyTorch subprocess ------------------------------------------------------------ */

typedef struct torch_proc {
    FILE *to, *from;
    pid_t pid;
    bool up;
    char version[256];
} torch_proc;

/* Sends one command line, reads one answer line into ans. False when the process is
 * gone or answered "error ..." (the answer is printed to stderr). */
static bool torch_cmd(torch_proc *t, const char *cmd, char *ans, size_t size) {
    if (!t->up)
        return false;
    if (fprintf(t->to, "%s\n", cmd) < 0 || fflush(t->to) != 0 || !fgets(ans, (int)size, t->from)) {
        fprintf(stderr, "grad-bench: the PyTorch process stopped answering (command: %s)\n", cmd);
        t->up = false;
        return false;
    }
    ans[strcspn(ans, "\n")] = 0;
    if (strncmp(ans, "error", 5) == 0) {
        fprintf(stderr, "grad-bench: PyTorch: %s (command: %.80s)\n", ans, cmd);
        return false;
    }
    return true;
}

static void torch_start(torch_proc *t, const opts *o) {
    memset(t, 0, sizeof *t);
    snprintf(t->version, sizeof t->version, "not run");
    if (!o->torch)
        return;
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0)
        die("pipe", strerror(errno));
    t->pid = fork();
    if (t->pid < 0)
        die("fork", strerror(errno));
    if (t->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        execl(o->python, o->python, o->script, (char *)NULL);
        fprintf(stderr, "grad-bench: cannot run %s: %s\n", o->python, strerror(errno));
        _exit(127);
    }
    close(in[0]), close(out[1]);
    t->to = fdopen(in[1], "w");
    t->from = fdopen(out[0], "r");
    if (!t->to || !t->from)
        die("fdopen", strerror(errno));
    t->up = true;
    char ans[512], cmd[64];
    snprintf(cmd, sizeof cmd, "threads %d", o->threads);
    if (!torch_cmd(t, cmd, ans, sizeof ans)) {
        snprintf(t->version, sizeof t->version, "unavailable (see the message above)");
        t->up = false;
        return;
    }
    if (torch_cmd(t, "version", ans, sizeof ans))
        snprintf(t->version, sizeof t->version, "%.200s", ans + 3);
}

static void torch_stop(torch_proc *t) {
    if (t->to) {
        if (t->up)
            fprintf(t->to, "quit\n");
        fclose(t->to);
    }
    if (t->from)
        fclose(t->from);
    if (t->pid > 0)
        waitpid(t->pid, NULL, 0);
}

/* ---- shared state ----------------------------------------------------------------------- */

typedef struct bench {
    opts o;
    torch_proc py;
    char dir[64]; /* scratch directory for the inputs and PyTorch's gradients */
    bool failed;
} bench;

static void write_file(const bench *b, const char *name, const void *data, size_t bytes) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s.bin", b->dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, bytes, f) != bytes || fclose(f) != 0)
        die(path, "cannot write");
}

/* reads DIR/torch_NAME.bin (n floats) into dst; false when missing or short */
static bool read_torch(const bench *b, const char *name, float *dst, int64_t n) {
    char path[256];
    snprintf(path, sizeof path, "%s/torch_%s.bin", b->dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    size_t got = fread(dst, sizeof *dst, (size_t)n, f);
    fclose(f);
    return got == (size_t)n;
}

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[512];
    while (d && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* One workload: its context, module, kernels and the report's row. */
typedef struct row {
    char name[64], size[96];
    double fwd_ms, grad_ms, torch_ms; /* torch_ms < 0: not measured */
    int64_t heap_bytes, heap_allocs, stride, slots, min_bytes;
    int adstacks;
    double compile_ms;      /* kern_module_from_source (K; K.grad is built lazily) */
    double grad_compile_ms; /* the first kern_kernel_find of K.grad (its build) */
    double err;        /* largest |kern - torch| / max |torch| over the compared arrays */
    const char *check;
} row;

typedef struct work {
    bench *b;
    kern_context *ctx;
    kern_module *mod;
    kern_kernel *k, *kg;
    double compile_ms;
    row *r;
} work;

static void kcheck(work *w, kern_status st, const char *what) {
    if (st != KERN_OK)
        die(what, kern_context_last_error(w->ctx));
}

static void work_open(work *w, bench *b, row *r, const char *file, const char *kernel) {
    memset(w, 0, sizeof *w);
    w->b = b;
    w->r = r;
    kern_context_options ko = kern_context_options_default();
    ko.threads = b->o.threads;
    if (kern_context_create(&ko, &w->ctx) != KERN_OK)
        die("context", w->ctx ? kern_context_last_error(w->ctx) : "out of memory");
    char path[4096], gname[128];
    snprintf(path, sizeof path, "%s/%s", b->o.kernels_dir, file);
    size_t len;
    char *src = bench_read_text(path, &len);
    if (!src)
        die(path, "cannot read the kernel source (use --kernels DIR)");
    double t0 = bench_now_ms();
    kcheck(w, kern_module_from_source(w->ctx, src, len, path, &w->mod), path);
    w->compile_ms = r->compile_ms = bench_now_ms() - t0;
    free(src);
    snprintf(gname, sizeof gname, "%s.grad", kernel);
    kcheck(w, kern_kernel_find(w->mod, kernel, &w->k), kernel);
    t0 = bench_now_ms();
    kcheck(w, kern_kernel_find(w->mod, gname, &w->kg), gname);
    r->grad_compile_ms = bench_now_ms() - t0;
    r->adstacks = kern_kernel_adstack_count(w->kg);
}

static void work_close(work *w) {
    kern_adstack_info ai;
    kcheck(w, kern_context_adstack_info(w->ctx, &ai), "adstack info");
    w->r->heap_bytes = ai.heap_bytes;
    w->r->heap_allocs = ai.heap_allocs;
    w->r->stride = ai.last_stride;
    w->r->slots = ai.last_slots;
    kern_context_release(w->ctx); /* buffers and module with it */
}

static kern_buffer *kbuf(work *w, kern_dtype t, int rank, const int64_t *shape, const void *data) {
    kern_buffer *buf;
    kcheck(w, kern_buffer_create(w->ctx, t, rank, shape, data, &buf), "buffer");
    return buf;
}

static void kwrite(work *w, kern_buffer *buf, const void *src) {
    kcheck(w, kern_buffer_write(buf, src, kern_buffer_bytes(buf)), "buffer write");
}

static void kread(work *w, kern_buffer *buf, void *dst) {
    kcheck(w, kern_buffer_read(buf, dst, kern_buffer_bytes(buf)), "buffer read");
}

static void launch(work *w, kern_kernel *k, const kern_arg *args, int nargs) {
    kcheck(w, kern_launch(k, args, nargs), kern_kernel_name(k));
}

static void sync_ctx(work *w) { kcheck(w, kern_sync(w->ctx), "sync"); }

/* Compares kern's gradient with PyTorch's (DIR/torch_NAME.bin): per element
 * |k - r| <= 1e-3 |r| + 1e-4 max|r|. Updates the row's error (normalized by max|r|). */
static void compare(work *w, const char *name, const float *got, int64_t n) {
    bench *b = w->b;
    row *r = w->r;
    float *ref = xalloc((size_t)n * sizeof *ref);
    if (!read_torch(b, name, ref, n)) {
        fprintf(stderr, "grad-bench: %s: no PyTorch gradient for %s\n", r->name, name);
        r->check = "no torch";
        free(ref);
        return;
    }
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < n; i++)
        scale = fabsf(ref[i]) > scale ? fabsf(ref[i]) : scale;
    int64_t bad = -1;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)ref[i];
        d = d < 0 ? -d : d;
        if (!(d <= 1e-3 * fabsf(ref[i]) + 1e-4 * scale) && bad < 0) /* NaN fails too */
            bad = i;
        if (d > worst || d != d)
            worst = d;
    }
    double e = scale > 0 ? worst / scale : worst;
    if (e > r->err || e != e)
        r->err = e;
    if (bad >= 0) {
        fprintf(
            stderr,
            "grad-bench: CHECK FAILED: %s: %s.grad[%lld]: kern %.9g, PyTorch %.9g (max |PyTorch| "
            "%.6g)\n",
            r->name, name, (long long)bad, (double)got[bad], (double)ref[bad], scale);
        r->check = "FAILED";
        b->failed = true;
    } else if (!r->check) {
        r->check = "ok";
    }
    free(ref);
}

/* Asks the PyTorch side to set NAME up with the parameters and to write its gradients.
 * False when PyTorch is not there or failed (the row then has no PyTorch column). */
static bool torch_setup(work *w, const char *name, const char *params) {
    char cmd[512], ans[256];
    snprintf(cmd, sizeof cmd, "setup %s %s %s", name, w->b->dir, params);
    if (!torch_cmd(&w->b->py, cmd, ans, sizeof ans) ||
        !torch_cmd(&w->b->py, "check", ans, sizeof ans)) {
        w->r->check = w->b->py.up ? "torch failed" : "no torch";
        w->r->torch_ms = -1;
        return false;
    }
    return true;
}

/* ---- measurement -------------------------------------------------------------------- */

typedef bench_run_fn run_fn;
typedef bench_side side;

static double torch_run(void *u) {
    work *w = u;
    char ans[256];
    if (!torch_cmd(&w->b->py, "time 1", ans, sizeof ans))
        return -1;
    return atof(ans + 6);
}

/* K, K.grad and (when available) PyTorch, interleaved */
static void measure_work(work *w, run_fn fwd, run_fn grad, bool torch) {
    fprintf(stderr, "grad-bench: timing %s (%s)\n", w->r->name,
            w->r->check ? w->r->check : "no check");
    side sides[] = {{fwd, w, 0}, {grad, w, 0}, {torch_run, w, 0}};
    bench_measure(sides, torch ? 3 : 2, w->b->o.reps, w->b->o.warmup);
    w->r->fwd_ms = sides[0].ms;
    w->r->grad_ms = sides[1].ms;
    /* a PyTorch process that failed during the runs gave no valid times */
    w->r->torch_ms = torch && w->b->py.up && sides[2].ms > 0 ? sides[2].ms : -1;
}

/* ---- workload 1: a per-thread loop (grad_simulate.kern) -------------------------------- */

typedef struct simulate {
    work w;
    int64_t n, steps;
    bool wgrad;
    float *seed;
    kern_buffer *x0, *wt, *out, *x0g, *wg, *outg;
} simulate;

static double simulate_fwd(void *u) {
    simulate *s = u;
    double t0 = bench_now_ms();
    kern_arg a[] = {kern_arg_buffer(s->x0), kern_arg_buffer(s->wt), kern_arg_buffer(s->out),
                    kern_arg_i32((int32_t)s->steps)};
    launch(&s->w, s->w.k, a, 4);
    sync_ctx(&s->w);
    return bench_now_ms() - t0;
}

static double simulate_grad(void *u) {
    simulate *s = u;
    /* the adjoints on entry: out.grad = seed, x0.grad = w.grad = 0 (K.grad accumulates) */
    kwrite(&s->w, s->outg, s->seed);
    kwrite(&s->w, s->x0g, s->seed + s->n); /* zeros */
    if (s->wg)
        kwrite(&s->w, s->wg, s->seed + s->n);
    double t0 = bench_now_ms();
    kern_arg a[7] = {kern_arg_buffer(s->x0), kern_arg_buffer(s->wt), kern_arg_buffer(s->out),
                     kern_arg_i32((int32_t)s->steps), kern_arg_buffer(s->x0g)};
    int na = 5;
    if (s->wg)
        a[na++] = kern_arg_buffer(s->wg);
    a[na++] = kern_arg_buffer(s->outg);
    launch(&s->w, s->w.kg, a, na);
    sync_ctx(&s->w);
    return bench_now_ms() - t0;
}

static void bench_simulate(bench *b, row *r, int64_t steps, bool wgrad) {
    simulate s = {.n = 65536 / b->o.shrink, .steps = steps, .wgrad = wgrad};
    int64_t n = s.n, big = n > steps ? n : steps;
    snprintf(r->name, sizeof r->name, "per-thread loop, T = %lld%s", (long long)steps,
             wgrad ? "" : ", nograd w");
    snprintf(r->size, sizeof r->size, "%lld threads x %lld steps", (long long)n, (long long)steps);
    work_open(&s.w, b, r, "grad_simulate.kern", wgrad ? "simulate" : "simulate_x0");
    float *x0 = xalloc((size_t)n * 4), *wv = xalloc((size_t)steps * 4),
          *g = xalloc((size_t)big * 4);
    s.seed = xalloc((size_t)(n + big) * 4); /* seed, then zeros */
    fill(x0, n, 11, -2, 2);
    fill(wv, steps, 12, -0.05f, 0.05f);
    fill(s.seed, n, 13, -1, 1);
    write_file(b, "x0", x0, (size_t)n * 4);
    write_file(b, "w", wv, (size_t)steps * 4);
    write_file(b, "seed", s.seed, (size_t)n * 4);
    s.x0 = kbuf(&s.w, KERN_F32, 1, &n, x0);
    s.wt = kbuf(&s.w, KERN_F32, 1, &steps, wv);
    s.out = kbuf(&s.w, KERN_F32, 1, &n, NULL);
    s.x0g = kbuf(&s.w, KERN_F32, 1, &n, NULL);
    s.wg = wgrad ? kbuf(&s.w, KERN_F32, 1, &steps, NULL) : NULL;
    s.outg = kbuf(&s.w, KERN_F32, 1, &n, NULL);

    /* minimum: every running thread keeps x of each of its steps, one f32 per step */
    int64_t conc = b->o.threads < n ? b->o.threads : n;
    r->min_bytes = conc * steps * 4;

    char params[128];
    snprintf(params, sizeof params, "n=%lld steps=%lld wgrad=%d", (long long)n, (long long)steps,
             wgrad);
    bool torch = torch_setup(&s.w, "simulate", params);
    simulate_fwd(&s);
    simulate_grad(&s);
    if (torch) {
        kread(&s.w, s.x0g, g);
        compare(&s.w, "x0", g, n);
        if (wgrad) {
            kread(&s.w, s.wg, g);
            compare(&s.w, "w", g, steps);
        }
    }
    measure_work(&s.w, simulate_fwd, simulate_grad, torch);
    work_close(&s.w);
    free(x0), free(wv), free(g), free(s.seed);
}

/* ---- workload 2: a mass-spring chain on time-indexed arrays (grad_springs.kern) ------- */

typedef struct springs {
    work w;
    int64_t n, nt;
    float k, dt;
    float *seedx, *seedv, *zero; /* [nt, n]: the seeds on row nt - 1 */
    kern_buffer *x, *v, *xg, *vg, *kg;
} springs;

static double springs_fwd(void *u) {
    springs *s = u;
    double t0 = bench_now_ms();
    for (int32_t t = 1; t < (int32_t)s->nt; t++) {
        kern_arg a[] = {kern_arg_buffer(s->x), kern_arg_buffer(s->v), kern_arg_f32(s->k),
                        kern_arg_f32(s->dt), kern_arg_i32(t)};
        launch(&s->w, s->w.k, a, 5);
    }
    sync_ctx(&s->w);
    return bench_now_ms() - t0;
}

static double springs_grad(void *u) {
    springs *s = u;
    kwrite(&s->w, s->xg, s->seedx);
    kwrite(&s->w, s->vg, s->seedv);
    kwrite(&s->w, s->kg, s->zero);
    double t0 = bench_now_ms();
    for (int32_t t = (int32_t)s->nt - 1; t >= 1; t--) {
        kern_arg a[] = {kern_arg_buffer(s->x),  kern_arg_buffer(s->v), kern_arg_f32(s->k),
                        kern_arg_f32(s->dt),    kern_arg_i32(t),       kern_arg_buffer(s->xg),
                        kern_arg_buffer(s->vg), kern_arg_buffer(s->kg)};
        launch(&s->w, s->w.kg, a, 8);
    }
    sync_ctx(&s->w);
    return bench_now_ms() - t0;
}

static void bench_springs(bench *b, row *r) {
    springs s = {.n = (256ll << 10) / b->o.shrink, .nt = 16, .k = 0.7f, .dt = 0.05f};
    int64_t n = s.n, nt = s.nt, shape[2] = {nt, n}, one = 1, total = nt * n;
    snprintf(r->name, sizeof r->name, "mass-spring chain, time-indexed");
    snprintf(r->size, sizeof r->size, "%lld masses x %lld steps (launches)", (long long)n,
             (long long)(nt - 1));
    work_open(&s.w, b, r, "grad_springs.kern", "step");
    float *x = xalloc((size_t)total * 4), *v = xalloc((size_t)total * 4),
          *g = xalloc((size_t)total * 4);
    s.seedx = xalloc((size_t)total * 4);
    s.seedv = xalloc((size_t)total * 4);
    s.zero = xalloc(4);
    fill(x, n, 21, -1, 1);
    fill(v, n, 22, -1, 1);
    float *last_x = s.seedx + (nt - 1) * n, *last_v = s.seedv + (nt - 1) * n;
    fill(last_x, n, 23, -1, 1);
    fill(last_v, n, 24, -1, 1);
    write_file(b, "x0", x, (size_t)n * 4);
    write_file(b, "v0", v, (size_t)n * 4);
    write_file(b, "seedx", last_x, (size_t)n * 4);
    write_file(b, "seedv", last_v, (size_t)n * 4);
    s.x = kbuf(&s.w, KERN_F32, 2, shape, x);
    s.v = kbuf(&s.w, KERN_F32, 2, shape, v);
    s.xg = kbuf(&s.w, KERN_F32, 2, shape, NULL);
    s.vg = kbuf(&s.w, KERN_F32, 2, shape, NULL);
    s.kg = kbuf(&s.w, KERN_F32, 1, &one, NULL);
    r->min_bytes = 0; /* no serial loop: nothing to keep */

    char params[128];
    snprintf(params, sizeof params, "n=%lld steps=%lld k=%.9g dt=%.9g", (long long)n,
             (long long)(nt - 1), (double)s.k, (double)s.dt);
    bool torch = torch_setup(&s.w, "springs", params);
    springs_fwd(&s);
    springs_grad(&s);
    if (torch) {
        kread(&s.w, s.xg, g);
        compare(&s.w, "x0", g, n); /* row 0 */
        kread(&s.w, s.vg, g);
        compare(&s.w, "v0", g, n);
        kread(&s.w, s.kg, g);
        compare(&s.w, "k", g, 1);
    }
    measure_work(&s.w, springs_fwd, springs_grad, torch);
    work_close(&s.w);
    free(x), free(v), free(g), free(s.seedx), free(s.seedv), free(s.zero);
}

/* ---- workload 3: a 2-D stencil, time-indexed (grad_stencil.kern) ---------------------- */

typedef struct stencil {
    work w;
    int64_t n, m, nt;
    float *seed; /* [nt, n, m]: the seed on the last grid */
    kern_buffer *u, *ug;
} stencil;

static double stencil_fwd(void *u) {
    stencil *s = u;
    double t0 = bench_now_ms();
    for (int32_t t = 1; t < (int32_t)s->nt; t++) {
        kern_arg a[] = {kern_arg_buffer(s->u), kern_arg_i32(t)};
        launch(&s->w, s->w.k, a, 2);
    }
    sync_ctx(&s->w);
    return bench_now_ms() - t0;
}

static double stencil_grad(void *u) {
    stencil *s = u;
    kwrite(&s->w, s->ug, s->seed);
    double t0 = bench_now_ms();
    for (int32_t t = (int32_t)s->nt - 1; t >= 1; t--) {
        kern_arg a[] = {kern_arg_buffer(s->u), kern_arg_i32(t), kern_arg_buffer(s->ug)};
        launch(&s->w, s->w.kg, a, 3);
    }
    sync_ctx(&s->w);
    return bench_now_ms() - t0;
}

static void bench_stencil(bench *b, row *r) {
    int64_t side_len = 1024 / (b->o.shrink > 1 ? 4 : 1);
    stencil s = {.n = side_len, .m = side_len, .nt = 9};
    int64_t n = s.n, m = s.m, nt = s.nt, shape[3] = {nt, n, m}, total = nt * n * m;
    snprintf(r->name, sizeof r->name, "2-D 5-point stencil, time-indexed");
    snprintf(r->size, sizeof r->size, "%lld x %lld grid x %lld sweeps (launches)", (long long)n,
             (long long)m, (long long)(nt - 1));
    work_open(&s.w, b, r, "grad_stencil.kern", "heat");
    float *u0 = xalloc((size_t)total * 4), *g = xalloc((size_t)total * 4);
    s.seed = xalloc((size_t)total * 4);
    fill(u0, n * m, 31, 0, 1);
    float *last = s.seed + (nt - 1) * n * m;
    fill(last, n * m, 32, -1, 1);
    write_file(b, "u0", u0, (size_t)(n * m) * 4);
    write_file(b, "seed", last, (size_t)(n * m) * 4);
    s.u = kbuf(&s.w, KERN_F32, 3, shape, u0);
    s.ug = kbuf(&s.w, KERN_F32, 3, shape, NULL);
    r->min_bytes = 0;

    char params[128];
    snprintf(params, sizeof params, "n=%lld m=%lld steps=%lld", (long long)n, (long long)m,
             (long long)(nt - 1));
    bool torch = torch_setup(&s.w, "stencil", params);
    stencil_fwd(&s);
    stencil_grad(&s);
    if (torch) {
        kread(&s.w, s.ug, g);
        compare(&s.w, "u0", g, n * m); /* grid 0 */
    }
    measure_work(&s.w, stencil_fwd, stencil_grad, torch);
    work_close(&s.w);
    free(u0), free(g), free(s.seed);
}

/* ---- workload 4: a ragged loop bounded by an array read (grad_ragged.kern) ------------ */

typedef struct ragged {
    work w;
    int64_t n, total;
    float *seed, *zero;
    kern_buffer *x0, *wt, *start, *count, *out, *x0g, *wg, *outg;
} ragged;

static double ragged_fwd(void *u) {
    ragged *s = u;
    double t0 = bench_now_ms();
    kern_arg a[] = {kern_arg_buffer(s->x0), kern_arg_buffer(s->wt), kern_arg_buffer(s->start),
                    kern_arg_buffer(s->count), kern_arg_buffer(s->out)};
    launch(&s->w, s->w.k, a, 5);
    sync_ctx(&s->w);
    return bench_now_ms() - t0;
}

static double ragged_grad(void *u) {
    ragged *s = u;
    kwrite(&s->w, s->outg, s->seed);
    kwrite(&s->w, s->x0g, s->zero);
    kwrite(&s->w, s->wg, s->zero);
    double t0 = bench_now_ms();
    kern_arg a[] = {kern_arg_buffer(s->x0),    kern_arg_buffer(s->wt),  kern_arg_buffer(s->start),
                    kern_arg_buffer(s->count), kern_arg_buffer(s->out), kern_arg_buffer(s->x0g),
                    kern_arg_buffer(s->wg),    kern_arg_buffer(s->outg)};
    launch(&s->w, s->w.kg, a, 8);
    sync_ctx(&s->w);
    return bench_now_ms() - t0;
}

static int cmp_i32_desc(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x > y ? -1 : x < y;
}

enum { RAGGED_MAX = 128 };

static void bench_ragged(bench *b, row *r) {
    ragged s = {.n = 65536 / b->o.shrink};
    int64_t n = s.n;
    int32_t *start = xalloc((size_t)n * 4), *count = xalloc((size_t)n * 4);
    uint64_t rs = 41;
    int32_t maxc = 0;
    for (int64_t i = 0; i < n; i++) {
        count[i] = (int32_t)(lcg_next(&rs) % (RAGGED_MAX + 1)); /* 0 .. 128, mean 64 */
        start[i] = (int32_t)s.total;
        s.total += count[i];
        maxc = count[i] > maxc ? count[i] : maxc;
    }
    int64_t total = s.total, big = total > n ? total : n;
    snprintf(r->name, sizeof r->name, "ragged loop, for j in 0..count[i]");
    snprintf(r->size, sizeof r->size, "%lld threads, counts 0..%d (%lld steps)", (long long)n,
             RAGGED_MAX, (long long)total);
    work_open(&s.w, b, r, "grad_ragged.kern", "ragged");
    float *x0 = xalloc((size_t)n * 4), *wv = xalloc((size_t)total * 4),
          *g = xalloc((size_t)big * 4);
    s.seed = xalloc((size_t)n * 4);
    s.zero = xalloc((size_t)big * 4);
    fill(x0, n, 42, -2, 2);
    fill(wv, total, 43, -0.05f, 0.05f);
    fill(s.seed, n, 44, -1, 1);
    write_file(b, "x0", x0, (size_t)n * 4);
    write_file(b, "w", wv, (size_t)total * 4);
    write_file(b, "seed", s.seed, (size_t)n * 4);
    write_file(b, "start", start, (size_t)n * 4);
    write_file(b, "count", count, (size_t)n * 4);
    s.x0 = kbuf(&s.w, KERN_F32, 1, &n, x0);
    s.wt = kbuf(&s.w, KERN_F32, 1, &total, wv);
    s.start = kbuf(&s.w, KERN_I32, 1, &n, start);
    s.count = kbuf(&s.w, KERN_I32, 1, &n, count);
    s.out = kbuf(&s.w, KERN_F32, 1, &n, NULL);
    s.x0g = kbuf(&s.w, KERN_F32, 1, &n, NULL);
    s.wg = kbuf(&s.w, KERN_F32, 1, &total, NULL);
    s.outg = kbuf(&s.w, KERN_F32, 1, &n, NULL);

    /* minimum: the threads that can run at once hold one f32 per step of their own item;
     * in the worst schedule those are the items with the largest counts */
    qsort(count, (size_t)n, sizeof *count, cmp_i32_desc);
    r->min_bytes = 0;
    for (int64_t i = 0; i < n && i < b->o.threads; i++)
        r->min_bytes += (int64_t)count[i] * 4;

    char params[128];
    snprintf(params, sizeof params, "n=%lld total=%lld maxcount=%d", (long long)n, (long long)total,
             (int)maxc);
    bool torch = torch_setup(&s.w, "ragged", params);
    ragged_fwd(&s);
    ragged_grad(&s);
    if (torch) {
        kread(&s.w, s.x0g, g);
        compare(&s.w, "x0", g, n);
        kread(&s.w, s.wg, g);
        compare(&s.w, "w", g, total);
    }
    measure_work(&s.w, ragged_fwd, ragged_grad, torch);
    work_close(&s.w);
    free(start), free(count), free(x0), free(wv), free(g), free(s.seed), free(s.zero);
}

/* ---- the report ----------------------------------------------------------------------- */


static void print_header(const bench *b) {
    char date[64], model[256] = "unknown", line[512], load[128];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", localtime(&now));
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
    int per = (b->o.reps + BENCH_ROUNDS - 1) / BENCH_ROUNDS;
    printf("grad-bench  %s\n", date);
    printf("machine:    %s, %ld online cores, load average %s\n", model,
           sysconf(_SC_NPROCESSORS_ONLN), load);
    printf("kern:       JIT (kern_module_from_source builds K and K.grad), kern_launch on the CPU "
           "device, %d threads\n",
           b->o.threads);
    printf("PyTorch:    %s (%s %s)\n", b->py.version, b->o.python, b->o.script);
    printf("timing:     median of %d runs (%d rounds of %d; K, K.grad and PyTorch interleaved, "
           "%d warm-up run(s) before each)\n\n",
           per * BENCH_ROUNDS, BENCH_ROUNDS, per, b->o.warmup);
}

static void print_bytes(char *buf, size_t size, int64_t v) {
    if (v >= (1 << 20))
        snprintf(buf, size, "%.2f MiB", (double)v / (1 << 20));
    else if (v >= 1024)
        snprintf(buf, size, "%.1f KiB", (double)v / 1024);
    else
        snprintf(buf, size, "%lld B", (long long)v);
}

static void print_table(const row *rows, int n) {
    printf("| workload | size | K ms | K.grad ms | K.grad / K | K + K.grad ms | PyTorch fwd+bwd ms "
           "| PyTorch / kern | adstack heap | minimum | heap / min | check (max diff / max) |\n");
    printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        double both = r->fwd_ms + r->grad_ms;
        char torch[32] = "-", ratio[32] = "-", heap[32], minb[32], hm[32] = "-";
        if (r->torch_ms > 0) {
            snprintf(torch, sizeof torch, "%.2f", r->torch_ms);
            snprintf(ratio, sizeof ratio, "%.2f", r->torch_ms / both);
        }
        print_bytes(heap, sizeof heap, r->heap_bytes);
        print_bytes(minb, sizeof minb, r->min_bytes);
        if (r->min_bytes > 0)
            snprintf(hm, sizeof hm, "%.2f", (double)r->heap_bytes / (double)r->min_bytes);
        else if (r->heap_bytes == 0)
            snprintf(hm, sizeof hm, "(none)");
        printf("| %s | %s | %.2f | %.2f | **%.2f** | %.2f | %s | **%s** | %s | %s | %s | %s (%.2g) "
               "|\n",
               r->name, r->size, r->fwd_ms, r->grad_ms, r->grad_ms / r->fwd_ms, both, torch, ratio,
               heap, minb, hm, r->check ? r->check : "-", r->err);
    }
    printf("\nper workload (K.grad's adstacks from kern_context_adstack_info):");
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        printf("\n- %s: JIT compile %.1f ms (K), %.1f ms (K.grad, at its first lookup); %d "
               "adstack(s), last launch: stride %lld B x %lld slots, %lld heap allocation(s)",
               r->name, r->compile_ms, r->grad_compile_ms, r->adstacks, (long long)r->stride, (long long)r->slots,
               (long long)r->heap_allocs);
    }
    printf("\n");
}

static void usage(FILE *to) {
    fprintf(to,
            "usage: grad-bench [--threads N] [--reps N] [--warmup N] [--quick] [--only NAME]\n"
            "                  [--no-torch] [--python PATH] [--torch-script PATH] [--kernels DIR]\n"
            "  --threads N   kern and PyTorch threads (default 2)\n"
            "  --reps N      timed runs per measurement, median (default 9, max 255)\n"
            "  --warmup N    untimed runs before each round of timed runs (default 1)\n"
            "  --quick       problem sizes / 16, 3 runs: a smoke test, not numbers\n"
            "  --only NAME   only loop64, loop1024, springs, stencil, ragged or trips (trip-count\n"
            "                distributions: kern SIMD, kern scalar, hand SIMD C; bench/README.md)\n"
            "  --no-torch    leave PyTorch out (no check, no PyTorch column)\n"
            "  --python PATH the Python with torch (default /usr/bin/python3)\n"
            "  --torch-script PATH  default %s\n"
            "  --kernels DIR the .kern files (default %s)\n",
            KERN_BENCH_TORCH_SCRIPT, KERN_BENCH_KERNELS_DIR);
}

static bool want(const bench *b, const char *name) {
    return !b->o.only || strcmp(b->o.only, name) == 0;
}

int main(int argc, char **argv) {
    bench b = {.o = {.threads = 2,
                     .reps = 9,
                     .warmup = 1,
                     .shrink = 1,
                     .kernels_dir = KERN_BENCH_KERNELS_DIR,
                     .python = "/usr/bin/python3",
                     .script = KERN_BENCH_TORCH_SCRIPT,
                     .torch = true}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *num = strcmp(a, "--threads") == 0  ? &b.o.threads
                   : strcmp(a, "--reps") == 0   ? &b.o.reps
                   : strcmp(a, "--warmup") == 0 ? &b.o.warmup
                                                : NULL;
        const char **str = strcmp(a, "--only") == 0           ? &b.o.only
                           : strcmp(a, "--python") == 0       ? &b.o.python
                           : strcmp(a, "--torch-script") == 0 ? &b.o.script
                           : strcmp(a, "--kernels") == 0      ? &b.o.kernels_dir
                                                              : NULL;
        if (num && v) {
            *num = atoi(v);
            i++;
        } else if (str && v) {
            *str = v;
            i++;
        } else if (strcmp(a, "--quick") == 0) {
            b.o.shrink = 16;
            b.o.reps = 3;
        } else if (strcmp(a, "--no-torch") == 0) {
            b.o.torch = false;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (b.o.threads < 1 || b.o.threads > 1024 || b.o.reps < 1 || b.o.reps > 255 || b.o.warmup < 0 ||
        (b.o.only && strcmp(b.o.only, "loop64") && strcmp(b.o.only, "loop1024") &&
         strcmp(b.o.only, "springs") && strcmp(b.o.only, "stencil") && strcmp(b.o.only, "ragged") &&
         strcmp(b.o.only, "trips"))) {
        usage(stderr);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN); /* a dead PyTorch process is reported, not fatal */
    snprintf(b.dir, sizeof b.dir, "/tmp/grad-bench.XXXXXX");
    if (!mkdtemp(b.dir))
        die("mkdtemp", strerror(errno));
    torch_start(&b.py, &b.o);
    print_header(&b);
    fflush(stdout);

    row rows[8];
    int n = 0;
    memset(rows, 0, sizeof rows);
    if (want(&b, "loop64")) {
        bench_simulate(&b, &rows[n++], 64, true);
        bench_simulate(&b, &rows[n++], 64, false);
    }
    if (want(&b, "loop1024")) {
        bench_simulate(&b, &rows[n++], 1024, true);
        bench_simulate(&b, &rows[n++], 1024, false);
    }
    if (want(&b, "springs"))
        bench_springs(&b, &rows[n++]);
    if (want(&b, "stencil"))
        bench_stencil(&b, &rows[n++]);
    if (want(&b, "ragged"))
        bench_ragged(&b, &rows[n++]);
    if (n > 0)
        print_table(rows, n);
#ifdef KERN_BENCH_TRIPS
    if (want(&b, "trips")) {
        trips_opts to = {.threads = b.o.threads,
                         .reps = b.o.reps,
                         .warmup = b.o.warmup,
                         .shrink = b.o.shrink,
                         .dir = KERN_GPU_BENCH_DIR};
        b.failed |= !grad_trips_run(&to);
    }
#endif
    char load[128];
    bench_load_average(load, sizeof load);
    printf("\nload average at the end: %s\n", load);
    torch_stop(&b.py);
    remove_dir(b.dir);
    if (b.failed) {
        fprintf(stderr, "grad-bench: a check FAILED (above): the comparison is not valid\n");
        return 1;
    }
    return 0;
}
