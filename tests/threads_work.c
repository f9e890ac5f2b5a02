/* threads_work.c - compiles and launches from several threads and contexts at once.
 *
 * docs/runtime.md promises that two contexts are independent and that two threads can
 * compile at once with two compiler contexts (common/context.h). These workloads run the
 * whole path on 4 threads together: the frontend, the gradient passes, the SIMD analysis
 * (each thread with other lanes), the JIT's parts on threads of their own, the CPU
 * device's worker pools, adstack heaps and launches; every result is checked against a
 * plain C reference. test_threads.c runs them as Criterion tests; kern-threads
 * (threads_main.c) runs them without Criterion, for CI's ThreadSanitizer build (.ci/run),
 * where any data race between them is a report and a failure. (Criterion's forked test
 * runner cannot start under ThreadSanitizer.) */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../backends/llvm/llvm_backend.h"
#include "../common/util.h"
#include "../compiler/driver.h"
#include "../include/kern.h"
#include "threads_work.h"

enum { NTHREADS = 4, N = 67, T = 9, ROUNDS = 2 };

/* A serial loop every item runs alike (SIMD across items, vector math) and a while loop
 * whose trip count differs per item (per-lane adstacks in K.grad). */
static const char *SRC = "kernel sim(x0: f32[], w: f32[], out: f32[], steps: i32) {\n"
                         "    for i in 0..len(x0) {\n"
                         "        var x = x0[i];\n"
                         "        for t in 0..steps {\n"
                         "            x = sin(x) * w[t] + x;\n"
                         "        }\n"
                         "        out[i] = x;\n"
                         "    }\n"
                         "}\n"
                         "kernel ragged(a: f32[], b: f32[]) {\n"
                         "    for i in 0..len(a) {\n"
                         "        var x = a[i];\n"
                         "        var k = 0;\n"
                         "        while k < i % 5 {\n"
                         "            x = x * 0.5 + cos(x);\n"
                         "            k += 1;\n"
                         "        }\n"
                         "        b[i] = x;\n"
                         "    }\n"
                         "}\n";

/* sim's out[i] and d out[i] / d x0[i] in double precision. */
static void sim_ref(double x0, const float *w, double *out, double *dx0) {
    double x = x0, d = 1;
    for (int t = 0; t < T; t++) {
        d = d * (cos(x) * w[t] + 1);
        x = sin(x) * w[t] + x;
    }
    *out = x;
    *dx0 = d;
}

/* ragged's b[i] and d b[i] / d a[i]. */
static void ragged_ref(int i, double a, double *b, double *da) {
    double x = a, d = 1;
    for (int k = 0; k < i % 5; k++) {
        d = d * (0.5 - sin(x));
        x = x * 0.5 + cos(x);
    }
    *b = x;
    *da = d;
}

static bool near(float got, double want) {
    return fabs((double)got - want) <= 2e-4 * fmax(1.0, fabs(want));
}

typedef struct job {
    int id;
    const kern_context_options *opts; /* its context's (NULL: a CPU context of 2 threads) */
    char failed[256];                 /* "" or what went wrong first */
} job;

#define FAIL(j, ...)                                               \
    do {                                                           \
        if (!(j)->failed[0])                                       \
            snprintf((j)->failed, sizeof(j)->failed, __VA_ARGS__); \
    } while (0)

static kern_buffer *buffer(kern_context *ctx, job *j, const float *data) {
    int64_t shape[1] = {N};
    kern_buffer *b = NULL;
    if (kern_buffer_create(ctx, KERN_F32, 1, shape, data, &b) != KERN_OK)
        FAIL(j, "buffer: %s", kern_context_last_error(ctx));
    return b;
}

static bool read(kern_context *ctx, job *j, kern_buffer *b, float *out) {
    if (b && kern_buffer_read(b, out, N * sizeof *out) == KERN_OK)
        return true;
    FAIL(j, "read: %s", kern_context_last_error(ctx));
    return false;
}

static bool launch(kern_context *ctx, job *j, kern_module *m, const char *name, kern_arg *args,
                   int nargs) {
    kern_kernel *k;
    if (kern_kernel_find(m, name, &k) == KERN_OK && kern_launch(k, args, nargs) == KERN_OK)
        return true;
    FAIL(j, "%s: %s", name, kern_context_last_error(ctx));
    return false;
}

/* One thread's work: its own context, the module compiled, sim and ragged with their
 * gradients run and checked, ROUNDS times. */
static void run_context(job *j) {
    kern_context_options o = kern_context_options_default();
    o.threads = 2;
    o.debug = j->id % 2; /* checked code (scalar) beside SIMD code */
    if (j->opts)
        o = *j->opts;
    kern_context *ctx;
    if (kern_context_create(&o, &ctx) != KERN_OK) {
        FAIL(j, "context: %s", kern_context_last_error(ctx));
        kern_context_release(ctx);
        return;
    }
    float x0[N], w[N], a[N], ones[N], zeros[N] = {0};
    for (int i = 0; i < N; i++) {
        x0[i] = (float)(0.3 + 0.01 * i + 0.1 * j->id);
        w[i] = (float)(0.2 * cos(0.7 * i));
        a[i] = (float)(0.5 * sin(0.3 * i) - 0.05 * j->id);
        ones[i] = 1;
    }
    for (int round = 0; round < ROUNDS && !j->failed[0]; round++) {
        kern_module *m;
        if (kern_module_from_source(ctx, SRC, strlen(SRC), "threads.kern", &m) != KERN_OK) {
            FAIL(j, "compile: %s", kern_context_last_error(ctx));
            break;
        }
        kern_buffer *bx0 = buffer(ctx, j, x0), *bw = buffer(ctx, j, w),
                    *bout = buffer(ctx, j, zeros), *gx0 = buffer(ctx, j, zeros),
                    *gw = buffer(ctx, j, zeros), *gout = buffer(ctx, j, ones),
                    *ba = buffer(ctx, j, a), *bb = buffer(ctx, j, zeros),
                    *ga = buffer(ctx, j, zeros), *gb = buffer(ctx, j, ones);
        float out[N], dx0[N], b[N], da[N];
        kern_arg sim[4] = {kern_arg_buffer(bx0), kern_arg_buffer(bw), kern_arg_buffer(bout),
                           kern_arg_i32(T)};
        kern_arg sim_grad[7] = {kern_arg_buffer(bx0), kern_arg_buffer(bw),  kern_arg_buffer(bout),
                                kern_arg_i32(T),      kern_arg_buffer(gx0), kern_arg_buffer(gw),
                                kern_arg_buffer(gout)};
        kern_arg rag[2] = {kern_arg_buffer(ba), kern_arg_buffer(bb)};
        kern_arg rag_grad[4] = {kern_arg_buffer(ba), kern_arg_buffer(bb), kern_arg_buffer(ga),
                                kern_arg_buffer(gb)};
        if (!j->failed[0] && launch(ctx, j, m, "sim", sim, 4) &&
            launch(ctx, j, m, "sim.grad", sim_grad, 7) && launch(ctx, j, m, "ragged", rag, 2) &&
            launch(ctx, j, m, "ragged.grad", rag_grad, 4) && read(ctx, j, bout, out) &&
            read(ctx, j, gx0, dx0) && read(ctx, j, bb, b) && read(ctx, j, ga, da)) {
            for (int i = 0; i < N && !j->failed[0]; i++) {
                double want_out, want_dx0, want_b, want_da;
                sim_ref(x0[i], w, &want_out, &want_dx0);
                ragged_ref(i, a[i], &want_b, &want_da);
                if (!near(out[i], want_out) || !near(dx0[i], want_dx0))
                    FAIL(j, "sim [%d]: out %.7g (want %.7g), x0.grad %.7g (want %.7g)", i,
                         (double)out[i], want_out, (double)dx0[i], want_dx0);
                if (!near(b[i], want_b) || !near(da[i], want_da))
                    FAIL(j, "ragged [%d]: b %.7g (want %.7g), a.grad %.7g (want %.7g)", i,
                         (double)b[i], want_b, (double)da[i], want_da);
            }
        }
        kern_module_release(m);
        kern_buffer *all[] = {bx0, bw, bout, gx0, gw, gout, ba, bb, ga, gb};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            kern_buffer_release(all[i]);
    }
    kern_context_release(ctx);
}

static void *context_thread(void *arg) {
    run_context(arg);
    return NULL;
}

/* Runs body on n threads, thread t with opts[t] (opts NULL: the default); the first
 * failure (thread and what) into msg. */
static bool run_jobs(int n, const kern_context_options *opts, void *(*body)(void *), char *msg,
                     size_t msglen) {
    job jobs[NTHREADS];
    pthread_t th[NTHREADS];
    int started = 0;
    for (int t = 0; t < n; t++) {
        jobs[t] = (job){.id = t, .opts = opts ? &opts[t] : NULL};
        if (pthread_create(&th[t], NULL, body, &jobs[t]) != 0) {
            snprintf(msg, msglen, "pthread_create failed");
            break;
        }
        started++;
    }
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    if (started < n)
        return false;
    for (int t = 0; t < n; t++)
        if (jobs[t].failed[0]) {
            snprintf(msg, msglen, "thread %d (%s): %s", t,
                     kern_backend_name(opts ? opts[t].backend : KERN_BACKEND_CPU),
                     jobs[t].failed);
            return false;
        }
    return true;
}

static bool run_threads(void *(*body)(void *), char *msg, size_t msglen) {
    return run_jobs(NTHREADS, NULL, body, msg, msglen);
}

bool threads_contexts(char *msg, size_t msglen) { return run_threads(context_thread, msg, msglen); }

bool threads_devices(const kern_context_options *opts, int n, char *msg, size_t msglen) {
    if (n < 1 || n > NTHREADS) {
        snprintf(msg, msglen, "threads_devices: 1 to %d contexts", NTHREADS);
        return false;
    }
    return run_jobs(n, opts, context_thread, msg, msglen);
}

/* The compiler's own API on 4 threads, each with its compiler context and other SIMD
 * lanes (scalar, 4, 8, the host's): the same module, every gradient, the JIT in 2 parts. */
static void *compile_thread(void *arg) {
    job *j = arg;
    static const int lanes[NTHREADS] = {-1, 4, 8, 0};
    for (int round = 0; round < ROUNDS; round++) {
        kc_ctx *c = kc_ctx_new();
        c->opts.grad = KC_GRAD_ALL;
        c->opts.simd = lanes[j->id % NTHREADS];
        c->opts.jit_threads = 2;
        ir_module *m = kc_compile_source(c, "threads.kern", SRC, strlen(SRC));
        char err[1024] = "";
        llvm_jit *jit = m ? llvm_jit_compile(m, &c->opts, err, sizeof err) : NULL;
        if (!m)
            FAIL(j, "simd %d: the source does not compile", c->opts.simd);
        else if (!jit)
            FAIL(j, "simd %d: %s", c->opts.simd, err);
        char sym[128];
        kern_lanes_symbol(sym, sizeof sym, "ragged.grad");
        if (jit && c->opts.simd >= 0 && !llvm_jit_lookup(jit, sym)) /* SIMD adstacks */
            FAIL(j, "simd %d: %s is missing", c->opts.simd, sym);
        llvm_jit_free(jit);
        ir_module_free(m);
        kc_ctx_free(c);
    }
    return NULL;
}

bool threads_compilers(char *msg, size_t msglen) {
    return run_threads(compile_thread, msg, msglen);
}
