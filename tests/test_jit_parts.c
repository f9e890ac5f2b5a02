/* test_jit_parts.c - the JIT compiling a module's tasks in parts on several threads
 * (backends/llvm/llvm_jit.c): the split happens where it should (llvm_jit_times.parts),
 * every part is linked (each task's symbol resolves), the kernels' kern_<K>__lanes
 * constant is right when the task that needs it lies in another part, and the kernel and
 * its gradient give the results of a plain C reference and of f64 finite differences with
 * $KERN_JIT_THREADS = 1 (one part, the calling thread), 2 and 5. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../backends/llvm/llvm_backend.h"
#include "../backends/llvm/llvm_internal.h"
#include "../common/env.h"
#include "../common/util.h"
#include "../compiler/driver.h"
#include "../include/kern.h"

/* Task 0: a long chain of arithmetic per item at even elements (the larger task, so part
 * 0; scalar code: its accesses are strided and it computes no vector math). Task 1: a
 * serial loop whose trip count differs per item, so the gradient keeps per-lane adstacks
 * and its kernel needs kern_two_grad__lanes, which part 0 holds. */
static const char *SRC =
    "kernel two(a: f32[], b: f32[], x0: f32[], w: f32[], n: i32[], out: f32[]) {\n"
    "    for i in 0..len(a) / 2 {\n"
    "        let v = a[2 * i];\n"
    "        let p = ((((v * 0.5 + 0.25) * v - 0.125) * v + 0.0625) * v - 0.03125) * v + 1.0;\n"
    "        let q = ((((p * 0.5 - 0.25) * p + 0.125) * p - 0.0625) * p + 0.03125) * p - 1.0;\n"
    "        let r = ((((q * 0.3 + 0.2) * q - 0.1) * q + 0.05) * q - 0.025) * q + 0.5;\n"
    "        b[2 * i] = p * q + q * q * p + r * r * 0.25 + r * v;\n"
    "    }\n"
    "    for i in 0..len(x0) {\n"
    "        var x = x0[i];\n"
    "        for t in 0..n[i] {\n"
    "            x = sin(x) * w[t] + x;\n"
    "        }\n"
    "        out[i] = x;\n"
    "    }\n"
    "}\n";

static double task0(double v) {
    double p = ((((v * 0.5 + 0.25) * v - 0.125) * v + 0.0625) * v - 0.03125) * v + 1.0;
    double q = ((((p * 0.5 - 0.25) * p + 0.125) * p - 0.0625) * p + 0.03125) * p - 1.0;
    double r = ((((q * 0.3 + 0.2) * q - 0.1) * q + 0.05) * q - 0.025) * q + 0.5;
    return p * q + q * q * p + r * r * 0.25 + r * v;
}

enum { N = 301, T = 23 };

static void expect_near(const float *got, const double *want, int n, double rtol, const char *what,
                        const char *threads) {
    double scale = 0;
    for (int i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    for (int i = 0; i < n; i++)
        cr_expect(fabs((double)got[i] - want[i]) <= rtol * fmax(fabs(want[i]), 0.05 * scale),
                  "%s, KERN_JIT_THREADS=%s, [%d]: got %.9g, want %.9g", what, threads, i,
                  (double)got[i], want[i]);
}

Test(jit_parts, gradient_split_over_threads) {
    static float a[N], x0[N], w[T], zeros[N], ones[N], got[N], gw[T];
    static int32_t n[N];
    static double want_b[N], want_out[N], want_ga[N], want_gx[N], want_gw[T];
    for (int i = 0; i < N; i++) {
        a[i] = (float)(0.9 * sin(0.37 * i));
        x0[i] = (float)(0.8 * cos(0.23 * i));
        n[i] = (int32_t)((i * 7) % T); /* 0 .. T - 1: lanes leave the loop at different steps */
        ones[i] = 1;
    }
    for (int t = 0; t < T; t++)
        w[t] = (float)(0.3 * sin(1.1 * t) + 0.05);
    /* the C reference: the forward values, db/da by central differences in f64, and the
     * adjoint of sum(out) by a reverse sweep of the loop */
    for (int i = 0; i < N; i++) {
        double h = 1e-5;
        if (i % 2 == 0 && i + 1 < N) { /* odd elements and the last one stay 0 */
            want_b[i] = task0(a[i]);
            want_ga[i] = (task0((double)a[i] + h) - task0((double)a[i] - h)) / (2 * h);
        }
        double xs[T], x = x0[i];
        for (int t = 0; t < n[i]; t++) {
            xs[t] = x;
            x = sin(x) * w[t] + x;
        }
        want_out[i] = x;
        double g = 1;
        for (int t = n[i] - 1; t >= 0; t--) {
            want_gw[t] += g * sin(xs[t]);
            g *= cos(xs[t]) * w[t] + 1;
        }
        want_gx[i] = g;
    }

    const char *threads[] = {"1", "2", "5"};
    for (int c = 0; c < 3; c++) {
        setenv("KERN_JIT_THREADS", threads[c], 1);
        kern_context_options o = kern_context_options_default();
        o.backend = KERN_BACKEND_CPU;
        o.threads = 2;
        kern_context *ctx;
        cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK);
        kern_module *m;
        cr_assert_eq(kern_module_from_source(ctx, SRC, strlen(SRC), "two.kern", &m), KERN_OK, "%s",
                     kern_context_last_error(ctx));
        kern_kernel *k, *kg;
        cr_assert_eq(kern_kernel_find(m, "two", &k), KERN_OK);
        cr_assert_eq(kern_kernel_find(m, "two.grad", &kg), KERN_OK, "%s",
                     kern_context_last_error(ctx));
        int64_t sn[1] = {N}, st[1] = {T};
        kern_buffer *ba, *bb, *bx, *bw, *bn, *bo, *bag, *bbg, *bxg, *bwg, *bog;
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, sn, a, &ba), KERN_OK);
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, sn, zeros, &bb), KERN_OK);
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, sn, x0, &bx), KERN_OK);
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, st, w, &bw), KERN_OK);
        cr_assert_eq(kern_buffer_create(ctx, KERN_I32, 1, sn, n, &bn), KERN_OK);
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, sn, zeros, &bo), KERN_OK);
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, sn, zeros, &bag), KERN_OK);
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, sn, ones, &bbg), KERN_OK);
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, sn, zeros, &bxg), KERN_OK);
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, st, zeros, &bwg), KERN_OK);
        cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, sn, ones, &bog), KERN_OK);
        kern_arg args[11] = {kern_arg_buffer(ba),  kern_arg_buffer(bb),  kern_arg_buffer(bx),
                             kern_arg_buffer(bw),  kern_arg_buffer(bn),  kern_arg_buffer(bo),
                             kern_arg_buffer(bag), kern_arg_buffer(bbg), kern_arg_buffer(bxg),
                             kern_arg_buffer(bwg), kern_arg_buffer(bog)};
        cr_assert_eq(kern_launch(k, args, 6), KERN_OK, "%s", kern_context_last_error(ctx));
        cr_assert_eq(kern_buffer_read(bb, got, sizeof got), KERN_OK);
        expect_near(got, want_b, N, 2e-5, "b", threads[c]);
        cr_assert_eq(kern_buffer_read(bo, got, sizeof got), KERN_OK);
        expect_near(got, want_out, N, 2e-5, "out", threads[c]);
        /* the adjoint arrays of the gradient's parameters: a, b, x0, w, out (n is integer) */
        cr_assert_eq(kern_launch(kg, args, 11), KERN_OK, "%s", kern_context_last_error(ctx));
        cr_assert_eq(kern_buffer_read(bag, got, sizeof got), KERN_OK);
        expect_near(got, want_ga, N, 1e-3, "a.grad", threads[c]);
        cr_assert_eq(kern_buffer_read(bxg, got, sizeof got), KERN_OK);
        expect_near(got, want_gx, N, 1e-4, "x0.grad", threads[c]);
        cr_assert_eq(kern_buffer_read(bwg, gw, sizeof gw), KERN_OK);
        expect_near(gw, want_gw, T, 1e-4, "w.grad", threads[c]);
        kern_context_release(ctx);
    }
    unsetenv("KERN_JIT_THREADS");
}

/* The split itself, through the backend: one part with one thread; with two, two parts
 * whose every task symbol resolves, and the lanes constant of two.grad, whose adstack
 * task (task 0, the smaller) is compiled in part 1 while part 0 holds the constant. */
Test(jit_parts, parts_and_their_symbols) {
    kc_ctx *c = kc_ctx_new();
    c->opts.grad = KC_GRAD_POSSIBLE;
    c->opts.opt_level = 2;
    c->opts.debug = false;
    c->opts.simd = 4; /* whatever $KERN_SIMD says: the loop task runs 4 lanes */
    ir_module *m = kc_compile_source(c, "two.kern", SRC, strlen(SRC));
    cr_assert(m);
    int32_t lanes[2] = {0, 0};
    for (int threads = 1; threads <= 2; threads++) {
        c->opts.jit_threads = threads;
        char err[1024] = "";
        llvm_jit *j = llvm_jit_compile(m, &c->opts, err, sizeof err);
        cr_assert(j, "%s", err);
        cr_expect_eq(llvm_jit_get_times(j).parts, (unsigned)threads, "parts %u with %d thread(s)",
                     llvm_jit_get_times(j).parts, threads);
        char sym[256];
        for (ir_kernel *k = m->kernels; k; k = k->next) {
            int t = 0;
            ir_foreach_op(op, k->body) {
                if (op->code != IR_PARALLEL && op->code != IR_SERIAL)
                    continue;
                llvm_task_symbol(sym, sizeof sym, k->name, t, false);
                cr_expect(llvm_jit_lookup(j, sym), "%s missing with %d thread(s)", sym, threads);
                llvm_task_symbol(sym, sizeof sym, k->name, t, true);
                cr_expect(llvm_jit_lookup(j, sym), "%s missing with %d thread(s)", sym, threads);
                t++;
            }
        }
        kern_lanes_symbol(sym, sizeof sym, "two.grad");
        const int32_t *l = llvm_jit_lookup(j, sym);
        lanes[threads - 1] = l ? *l : 1;
        llvm_jit_free(j);
    }
    cr_expect(lanes[0] == 4 && lanes[1] == 4, "two.grad's lanes: %d in one part, %d in two",
              lanes[0], lanes[1]);
    ir_module_free(m);
    kc_ctx_free(c);
}

/* Four threads compile the module at once, each in two parts on threads of its own, and
 * each runs its gradient: every result is the C reference's. */
typedef struct compile_job {
    const float *a;
    double want[N];
    int bad; /* elements off the reference, or -1: a call failed */
} compile_job;

static void *compile_and_run(void *arg) {
    compile_job *job = arg;
    kern_context_options o = kern_context_options_default();
    o.backend = KERN_BACKEND_CPU;
    o.threads = 1;
    kern_context *ctx;
    kern_module *m;
    kern_kernel *k;
    if (kern_context_create(&o, &ctx) != KERN_OK) {
        job->bad = -1;
        return NULL;
    }
    static const float zeros[N];
    float got[N];
    int64_t sn[1] = {N};
    kern_buffer *ba = NULL, *bb = NULL;
    if (kern_module_from_source(ctx, SRC, strlen(SRC), "two.kern", &m) != KERN_OK ||
        kern_kernel_find(m, "two.grad", &k) != KERN_OK ||
        kern_buffer_create(ctx, KERN_F32, 1, sn, job->a, &ba) != KERN_OK ||
        kern_buffer_create(ctx, KERN_F32, 1, sn, zeros, &bb) != KERN_OK) {
        job->bad = -1;
        kern_context_release(ctx);
        return NULL;
    }
    /* only a.grad is checked here; the loop's arrays are empty */
    int64_t s0[1] = {0};
    kern_buffer *e, *ei, *bag, *bbg;
    float ones[N];
    for (int i = 0; i < N; i++)
        ones[i] = 1;
    bool ok = kern_buffer_create(ctx, KERN_F32, 1, s0, NULL, &e) == KERN_OK &&
              kern_buffer_create(ctx, KERN_I32, 1, s0, NULL, &ei) == KERN_OK &&
              kern_buffer_create(ctx, KERN_F32, 1, sn, zeros, &bag) == KERN_OK &&
              kern_buffer_create(ctx, KERN_F32, 1, sn, ones, &bbg) == KERN_OK;
    if (ok) {
        kern_arg args[11] = {kern_arg_buffer(ba),  kern_arg_buffer(bb),  kern_arg_buffer(e),
                             kern_arg_buffer(e),   kern_arg_buffer(ei),  kern_arg_buffer(e),
                             kern_arg_buffer(bag), kern_arg_buffer(bbg), kern_arg_buffer(e),
                             kern_arg_buffer(e),   kern_arg_buffer(e)};
        ok = kern_launch(k, args, 11) == KERN_OK &&
             kern_buffer_read(bag, got, sizeof got) == KERN_OK;
    }
    if (!ok) {
        job->bad = -1;
    } else {
        for (int i = 0; i < N; i++)
            if (fabs((double)got[i] - job->want[i]) > 1e-3 * fmax(fabs(job->want[i]), 0.05))
                job->bad++;
    }
    kern_context_release(ctx);
    return NULL;
}

Test(jit_parts, concurrent_compiles) {
    setenv("KERN_JIT_THREADS", "2", 1); /* before any thread reads it */
    static float a[N];
    static compile_job jobs[4];
    for (int i = 0; i < N; i++)
        a[i] = (float)(0.7 * cos(0.41 * i));
    for (int j = 0; j < 4; j++) {
        jobs[j].a = a;
        for (int i = 0; i < N; i++) {
            double h = 1e-5;
            jobs[j].want[i] = i % 2 == 0 && i + 1 < N
                                  ? (task0((double)a[i] + h) - task0((double)a[i] - h)) / (2 * h)
                                  : 0;
        }
    }
    pthread_t th[4];
    for (int j = 0; j < 4; j++)
        cr_assert_eq(pthread_create(&th[j], NULL, compile_and_run, &jobs[j]), 0);
    for (int j = 0; j < 4; j++)
        pthread_join(th[j], NULL);
    unsetenv("KERN_JIT_THREADS");
    for (int j = 0; j < 4; j++)
        cr_expect_eq(jobs[j].bad, 0,
                     "thread %d: %d element(s) off the reference (-1: a call failed)", j,
                     jobs[j].bad);
}

/* The environment is read at the boundary only (common/env.c): each variable lands in its
 * kc_options field, a value the caller set first wins, and a bad value keeps the default. */
Test(jit_parts, environment_read_into_options) {
    setenv("KERN_SIMD", "sse", 1);
    setenv("KERN_JIT_THREADS", "3", 1);
    setenv("KERN_SCATTER_ADJOINTS", "1", 1);
    setenv("KERN_NO_NEIGHBOUR_ADDS", "0", 1);
    setenv("KERN_DEBUG", "print,verify", 1);
    kc_options o;
    kc_options_default(&o);
    kc_options_from_env(&o);
    cr_expect_eq(o.simd, 4);
    cr_expect_eq(o.jit_threads, 3);
    cr_expect(o.scatter_adjoints);
    cr_expect(!o.no_neighbour_adds, "\"0\" is off");
    cr_expect_eq(o.pass_debug, (unsigned)(IR_DEBUG_PRINT | IR_DEBUG_VERIFY));
    kc_options_default(&o);
    o.simd = 8; /* kernc --simd=avx2 */
    setenv("KERN_JIT_THREADS", "none", 1);
    kc_options_from_env(&o);
    cr_expect_eq(o.simd, 8, "the command line's value wins");
    cr_expect_eq(o.jit_threads, 0, "a bad value keeps the default");
    int lanes = 99;
    cr_expect(!kc_parse_simd("avx3", &lanes) && lanes == 99);
    cr_expect(kc_parse_simd("off", &lanes) && lanes == -1);
    const char *vars[] = {"KERN_SIMD", "KERN_JIT_THREADS", "KERN_SCATTER_ADJOINTS",
                          "KERN_NO_NEIGHBOUR_ADDS", "KERN_DEBUG"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        unsetenv(vars[i]);
}
