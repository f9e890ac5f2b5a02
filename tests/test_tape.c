/* test_tape.c - the tapes (suite `tape`). Host steps on the gradient tape: kern_tape_record_func
 * between kernel records, gradients against plain C loops in f64; a host step whose
 * backward launches a K.grad kernel; the callback's errors and their messages; free_user
 * called exactly once (clear, destroy, the context's release, failed recordings);
 * released buffers; a callback that tries to change its own tape. The forward tape (below):
 * kern_tape_create_forward over a sequence of launches (x1 = a sin(x0); x[0] = x1^2 + b;
 * five time steps x[t+1] = x[t] + dt cos(x[t])), its final tangent against f64 central
 * finite differences of a plain C loop and hand-derived tangents; the dot-product identity
 * <J v, u> = <v, J^T u> against a reverse tape over the same launches; its errors: backward,
 * adjoints and host steps on a forward tape, tangents on a reverse one, a released tangent
 * buffer, a kernel whose K.jvp is refused (atomic_max in a parallel loop); what clear
 * releases. kern_tape_zero (adjoints zeroed, records kept) against closed-form gradients
 * of two seeds, and its refusals.
 *
 * The contexts are on $KERN_TEST_BACKEND (test_backend.h), so the host steps' ordering
 * against device launches is checked on the GPU machine too. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "../include/kern.h"
#include "test_backend.h"

static const char src[] = "kernel sq(x: f32[], y: f32[], a: f32) {\n"
                          "    for i in 0..len(x) {\n"
                          "        y[i] = a * x[i] * x[i];\n"
                          "    }\n"
                          "}\n";

static kern_context *new_ctx(void) {
    kern_context_options o = kern_context_options_default();
    o.threads = 2;
    o.backend = kern_test_backend();
    kern_context *ctx = NULL;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    return ctx;
}

static kern_module *compile_source(kern_context *ctx, const char *text, const char *name) {
    kern_module *m = NULL;
    cr_assert_eq(kern_module_from_source(ctx, text, strlen(text), name, &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    return m;
}

static kern_module *compile(kern_context *ctx) { return compile_source(ctx, src, "sq.kern"); }

static kern_kernel *find(kern_module *m, const char *name) {
    kern_kernel *k = NULL;
    cr_assert_eq(kern_kernel_find(m, name, &k), KERN_OK);
    return k;
}

static kern_buffer *fbuf(kern_context *ctx, int64_t n, const float *data) {
    kern_buffer *b = NULL;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, data, &b), KERN_OK);
    return b;
}

static void readf(kern_buffer *b, float *out, size_t n) {
    cr_assert_eq(kern_buffer_read(b, out, n * sizeof *out), KERN_OK);
}

/* ---- kern_tape_zero: adjoints zeroed, records kept ------------------------------------ */

/* y = a x^2 recorded once, backward with two seeds in turn: each gradient against the
 * closed form 2 a x s and sum(x^2 s), the second free of the first; then the refusals
 * (recording after backward, backward after a pass that put saves back). */
Test(tape, zero_keeps_records_for_another_backward) {
    kern_context *ctx = new_ctx();
    kern_module *m = compile(ctx);
    kern_kernel *sq = find(m, "sq");
    enum { Z = 6 };
    float xs[Z], s1[Z], s2[Z], g[Z];
    for (int i = 0; i < Z; i++) {
        xs[i] = 0.5f + 0.25f * (float)i;
        s1[i] = 1;
        s2[i] = (float)i - 2;
    }
    kern_buffer *x = fbuf(ctx, Z, xs), *y = fbuf(ctx, Z, NULL), *gy = fbuf(ctx, Z, s1);
    kern_arg args[3] = {kern_arg_buffer(x), kern_arg_buffer(y), kern_arg_f32(1.5f)};
    kern_tape *t;
    cr_assert_eq(kern_tape_create(ctx, &t), KERN_OK);
    cr_assert_eq(kern_tape_set_grad(t, y, gy), KERN_OK);
    cr_assert_eq(kern_tape_launch(t, sq, args, 3), KERN_OK, "%s", kern_context_last_error(ctx));
    const float *seeds[2] = {s1, s2};
    for (int pass = 0; pass < 2; pass++) {
        if (pass) {
            cr_assert_eq(kern_tape_zero(t), KERN_OK, "%s", kern_context_last_error(ctx));
            cr_assert_eq(kern_tape_record_count(t), 1);
            kern_buffer *gx;
            cr_assert_eq(kern_tape_grad(t, x, &gx), KERN_OK);
            readf(gx, g, Z);
            for (int i = 0; i < Z; i++)
                cr_assert_eq(g[i], 0.0f, "x.grad[%d] not zeroed: %g", i, g[i]);
            readf(gy, g, Z);
            for (int i = 0; i < Z; i++)
                cr_assert_eq(g[i], 0.0f, "the seed buffer was not zeroed");
            cr_assert_eq(kern_buffer_write(gy, s2, sizeof s2), KERN_OK);
        }
        cr_assert_eq(kern_tape_backward(t), KERN_OK, "%s", kern_context_last_error(ctx));
        kern_buffer *gx;
        cr_assert_eq(kern_tape_grad(t, x, &gx), KERN_OK);
        readf(gx, g, Z);
        double da, want_a = 0;
        cr_assert_eq(kern_tape_scalar_grad(t, 0, 2, &da), KERN_OK);
        for (int i = 0; i < Z; i++) {
            double want = 2 * 1.5 * xs[i] * seeds[pass][i];
            cr_assert(fabs(g[i] - want) <= 1e-5 * (1 + fabs(want)), "pass %d x.grad[%d]: %g vs %g",
                      pass, i, g[i], want);
            want_a += (double)xs[i] * xs[i] * seeds[pass][i];
        }
        cr_assert(fabs(da - want_a) <= 1e-4 * (1 + fabs(want_a)), "a.grad %g vs %g", da, want_a);
    }
    /* a second backward without zero, and a record after backward, are refused */
    cr_assert_eq(kern_tape_backward(t), KERN_ERR_ARGUMENT);
    cr_assert(strstr(kern_context_last_error(ctx), "kern_tape_zero zeroes the adjoints"), "%s",
              kern_context_last_error(ctx));
    cr_assert_eq(kern_tape_zero(t), KERN_OK);
    cr_assert_eq(kern_tape_launch(t, sq, args, 3), KERN_ERR_ARGUMENT);
    cr_assert(strstr(kern_context_last_error(ctx), "kern_tape_clear starts a new recording"), "%s",
              kern_context_last_error(ctx));

    /* sq(x -> y), then sq(y -> x) overwrites what the first read: saved, put back by
     * backward, so the tape cannot run backward again */
    cr_assert_eq(kern_tape_clear(t), KERN_OK);
    kern_arg back[3] = {args[1], args[0], args[2]};
    cr_assert_eq(kern_tape_launch(t, sq, args, 3), KERN_OK);
    cr_assert_eq(kern_tape_launch(t, sq, back, 3), KERN_OK);
    cr_assert_gt(kern_tape_saved_bytes(t), 0);
    kern_buffer *gx = fbuf(ctx, Z, s1);
    cr_assert_eq(kern_tape_set_grad(t, x, gx), KERN_OK);
    cr_assert_eq(kern_tape_backward(t), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_tape_zero(t), KERN_OK);
    cr_assert_eq(kern_tape_backward(t), KERN_ERR_ARGUMENT);
    cr_assert(strstr(kern_context_last_error(ctx), "backward cannot run again"), "%s",
              kern_context_last_error(ctx));
    kern_tape_destroy(t);
    kern_context_release(ctx);
}

/* ---- y = A x on the host, with x.grad += A^T y.grad --------------------------------- */

enum { N = 13, M = 7 };

typedef struct matvec {
    kern_buffer *x, *y;
    float a[M][N];
    int calls;
} matvec;

static void matvec_forward(matvec *mv) {
    float x[N], y[M];
    readf(mv->x, x, N);
    for (int i = 0; i < M; i++) {
        y[i] = 0;
        for (int j = 0; j < N; j++)
            y[i] += mv->a[i][j] * x[j];
    }
    cr_assert_eq(kern_buffer_write(mv->y, y, sizeof y), KERN_OK);
}

static kern_status matvec_backward(kern_tape *t, void *user) {
    matvec *mv = user;
    mv->calls++;
    kern_buffer *gx, *gy;
    kern_status s;
    if ((s = kern_tape_grad(t, mv->x, &gx)) != KERN_OK ||
        (s = kern_tape_grad(t, mv->y, &gy)) != KERN_OK)
        return s;
    float dx[N], dy[M];
    if ((s = kern_buffer_read(gx, dx, sizeof dx)) != KERN_OK ||
        (s = kern_buffer_read(gy, dy, sizeof dy)) != KERN_OK)
        return s;
    for (int j = 0; j < N; j++)
        for (int i = 0; i < M; i++)
            dx[j] += mv->a[i][j] * dy[i];
    /* y is written, not read: its adjoint before the step is zero (as K.grad leaves it) */
    float zero[M] = {0};
    if ((s = kern_buffer_write(gx, dx, sizeof dx)) != KERN_OK)
        return s;
    return kern_buffer_write(gy, zero, sizeof zero);
}

Test(tape, host_step_between_kernels_against_c) {
    kern_context *ctx = new_ctx();
    kern_kernel *sq = find(compile(ctx), "sq");
    float x0[N], w[M];
    matvec mv = {0};
    for (int j = 0; j < N; j++)
        x0[j] = 0.15f * (float)(j % 5) - 0.3f;
    for (int i = 0; i < M; i++) {
        w[i] = 1.0f - 0.25f * (float)i;
        for (int j = 0; j < N; j++)
            mv.a[i][j] = (float)((i * 3 + j * 5) % 7) * 0.25f - 0.75f;
    }
    const float a1 = 1.25f, a2 = -0.5f;
    kern_buffer *b0 = fbuf(ctx, N, x0), *b1 = fbuf(ctx, N, NULL), *y = fbuf(ctx, M, NULL),
                *z = fbuf(ctx, M, NULL), *gz = fbuf(ctx, M, w);
    mv.x = b1;
    mv.y = y;
    kern_tape *t;
    cr_assert_eq(kern_tape_create(ctx, &t), KERN_OK);
    cr_assert_eq(kern_tape_set_grad(t, z, gz), KERN_OK);
    /* x1 = a1 x0^2; y = A x1 (host); z = a2 y^2; L = sum w z */
    kern_arg l1[3] = {kern_arg_buffer(b0), kern_arg_buffer(b1), kern_arg_f32(a1)};
    kern_arg l2[3] = {kern_arg_buffer(y), kern_arg_buffer(z), kern_arg_f32(a2)};
    cr_assert_eq(kern_tape_launch(t, sq, l1, 3), KERN_OK, "%s", kern_context_last_error(ctx));
    matvec_forward(&mv);
    kern_buffer *bufs[2] = {b1, y};
    cr_assert_eq(kern_tape_record_func(t, matvec_backward, &mv, NULL, bufs, 2), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    cr_assert_eq(kern_tape_launch(t, sq, l2, 3), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_tape_record_count(t), 3);
    cr_assert_eq(mv.calls, 0);
    cr_assert_eq(kern_tape_backward(t), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(mv.calls, 1);

    double x1[N], yy[M], gy[M], gx1[N] = {0}, gx0[N], ga1 = 0, ga2 = 0;
    for (int j = 0; j < N; j++)
        x1[j] = (double)a1 * x0[j] * x0[j];
    for (int i = 0; i < M; i++) {
        yy[i] = 0;
        for (int j = 0; j < N; j++)
            yy[i] += (double)mv.a[i][j] * x1[j];
        gy[i] = w[i] * 2.0 * a2 * yy[i];
        ga2 += w[i] * yy[i] * yy[i];
        for (int j = 0; j < N; j++)
            gx1[j] += mv.a[i][j] * gy[i];
    }
    for (int j = 0; j < N; j++) {
        gx0[j] = gx1[j] * 2.0 * a1 * x0[j];
        ga1 += gx1[j] * x0[j] * x0[j];
    }
    kern_buffer *g0;
    cr_assert_eq(kern_tape_grad(t, b0, &g0), KERN_OK);
    float r[N];
    readf(g0, r, N);
    for (int j = 0; j < N; j++)
        cr_assert(fabs(r[j] - gx0[j]) <= 1e-5 * (1 + fabs(gx0[j])), "x0.grad[%d] = %g, want %g", j,
                  r[j], gx0[j]);
    double d;
    cr_assert_eq(kern_tape_scalar_grad(t, 0, 2, &d), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert(fabs(d - ga1) <= 1e-4 * (1 + fabs(ga1)), "a1.grad = %g, want %g", d, ga1);
    cr_assert_eq(kern_tape_scalar_grad(t, 2, 2, &d), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert(fabs(d - ga2) <= 1e-4 * (1 + fabs(ga2)), "a2.grad = %g, want %g", d, ga2);
    /* a host step has no scalar parameters */
    cr_assert_eq(kern_tape_scalar_grad(t, 1, 0, &d), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kern_tape_scalar_grad: record 1 is a host step (kern_tape_record_func), "
                     "which has no scalar parameters");
    kern_tape_destroy(t);
    kern_context_release(ctx);
}

/* A host step that ran sq with kern_launch (unrecorded) and whose backward launches
 * sq.grad itself gives what recording sq gives. */
typedef struct via_grad {
    kern_kernel *grad;
    kern_buffer *x, *y, *ga;
    float a;
} via_grad;

static kern_status launch_grad(kern_tape *t, void *user) {
    via_grad *v = user;
    kern_buffer *gx, *gy;
    kern_status s;
    if ((s = kern_tape_grad(t, v->x, &gx)) != KERN_OK ||
        (s = kern_tape_grad(t, v->y, &gy)) != KERN_OK)
        return s;
    kern_arg args[6] = {kern_arg_buffer(v->x), kern_arg_buffer(v->y), kern_arg_f32(v->a),
                        kern_arg_buffer(gx),   kern_arg_buffer(gy),   kern_arg_buffer(v->ga)};
    return kern_launch(v->grad, args, 6);
}

Test(tape, host_step_may_launch_gradient_kernels) {
    kern_context *ctx = new_ctx();
    kern_module *mod = compile(ctx);
    kern_kernel *sq = find(mod, "sq"), *sqg = find(mod, "sq.grad");
    float x0[N], w[N];
    for (int j = 0; j < N; j++) {
        x0[j] = 0.1f * (float)j - 0.5f;
        w[j] = 0.5f + 0.125f * (float)j;
    }
    float want[N], got[N];
    for (int variant = 0; variant < 2; variant++) {
        kern_buffer *b0 = fbuf(ctx, N, x0), *b1 = fbuf(ctx, N, NULL), *b2 = fbuf(ctx, N, NULL),
                    *g2 = fbuf(ctx, N, w);
        kern_tape *t;
        cr_assert_eq(kern_tape_create(ctx, &t), KERN_OK);
        cr_assert_eq(kern_tape_set_grad(t, b2, g2), KERN_OK);
        kern_arg l1[3] = {kern_arg_buffer(b0), kern_arg_buffer(b1), kern_arg_f32(0.75f)};
        kern_arg l2[3] = {kern_arg_buffer(b1), kern_arg_buffer(b2), kern_arg_f32(2.0f)};
        cr_assert_eq(kern_tape_launch(t, sq, l1, 3), KERN_OK);
        /* sq.grad takes the scalar adjoint a.grad as an f32[1] too */
        via_grad v = {NULL, b1, b2, fbuf(ctx, 1, NULL), 2.0f};
        if (variant == 0) {
            cr_assert_eq(kern_tape_launch(t, sq, l2, 3), KERN_OK);
        } else {
            cr_assert_eq(kern_launch(sq, l2, 3), KERN_OK);
            v.grad = sqg;
            kern_buffer *bufs[2] = {b1, b2};
            cr_assert_eq(kern_tape_record_func(t, launch_grad, &v, NULL, bufs, 2), KERN_OK);
        }
        cr_assert_eq(kern_tape_backward(t), KERN_OK, "%s", kern_context_last_error(ctx));
        kern_buffer *g0;
        cr_assert_eq(kern_tape_grad(t, b0, &g0), KERN_OK);
        readf(g0, variant ? got : want, N);
        kern_tape_destroy(t);
    }
    for (int j = 0; j < N; j++)
        cr_assert_float_eq(got[j], want[j], 1e-6f * (1 + fabsf(want[j])), "[%d] %g vs %g", j,
                           got[j], want[j]);
    kern_context_release(ctx);
}

/* ---- errors --------------------------------------------------------------------------- */

typedef struct failing {
    int mode; /* 0: kern_tape_error; 1: a bare status; 2: a failed kern call's status */
    kern_buffer *b;
    int calls;
} failing;

static kern_status fail_step(kern_tape *t, void *user) {
    failing *f = user;
    f->calls++;
    if (f->mode == 0)
        return kern_tape_error(t, KERN_ERR_CALLBACK, "the solver diverged");
    if (f->mode == 1)
        return KERN_ERR_DEVICE;
    float one;
    return kern_buffer_read(f->b, &one, sizeof one); /* the wrong size */
}

static kern_status count_step(kern_tape *t, void *user) {
    (void)t;
    ++*(int *)user;
    return KERN_OK;
}

Test(tape, callback_error_stops_backward_naming_the_record) {
    kern_context *ctx = new_ctx();
    kern_buffer *b = fbuf(ctx, 4, NULL);
    const char *want[3] = {
        "kern_tape_backward: record 1 (host callback) failed: the solver diverged",
        "kern_tape_backward: record 1 (host callback) failed: the callback returned "
        "KERN_ERR_DEVICE",
        "kern_tape_backward: record 1 (host callback) failed: kern_buffer_read: ",
    };
    kern_status status[3] = {KERN_ERR_CALLBACK, KERN_ERR_DEVICE, KERN_ERR_ARGUMENT};
    for (int mode = 0; mode < 3; mode++) {
        kern_tape *t;
        cr_assert_eq(kern_tape_create(ctx, &t), KERN_OK);
        int older = 0;
        failing f = {mode, b, 0};
        cr_assert_eq(kern_tape_record_func(t, count_step, &older, NULL, &b, 1), KERN_OK);
        cr_assert_eq(kern_tape_record_func(t, fail_step, &f, NULL, &b, 1), KERN_OK);
        cr_assert_eq(kern_tape_backward(t), status[mode], "mode %d: %s", mode,
                     kern_context_last_error(ctx));
        const char *msg = kern_context_last_error(ctx);
        cr_assert(strncmp(msg, want[mode], strlen(want[mode])) == 0, "mode %d: %s", mode, msg);
        cr_assert_eq(f.calls, 1);
        cr_assert_eq(older, 0, "the pass stops at the failing record");
        kern_tape_destroy(t);
    }
    cr_assert_str_eq(kern_status_name(KERN_ERR_CALLBACK), "KERN_ERR_CALLBACK");
    kern_context_release(ctx);
}

Test(tape, released_buffer_is_an_error_before_the_callback) {
    kern_context *ctx = new_ctx();
    kern_buffer *a = fbuf(ctx, 4, NULL), *b = fbuf(ctx, 4, NULL);
    kern_tape *t;
    cr_assert_eq(kern_tape_create(ctx, &t), KERN_OK);
    int calls = 0;
    kern_buffer *bufs[2] = {a, b};
    cr_assert_eq(kern_tape_record_func(t, count_step, &calls, NULL, bufs, 2), KERN_OK);
    kern_buffer_release(b);
    cr_assert_eq(kern_tape_backward(t), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kern_tape_backward: record 0 (host callback): its buffer 1 was released");
    cr_assert_eq(calls, 0);
    /* recording a released or NULL buffer is refused */
    cr_assert_eq(kern_tape_clear(t), KERN_OK);
    cr_assert_eq(kern_tape_record_func(t, count_step, &calls, NULL, bufs, 2), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kern_tape_record_func: buffer 1 is not a live buffer of the tape's context");
    bufs[1] = NULL;
    cr_assert_eq(kern_tape_record_func(t, count_step, &calls, NULL, bufs, 2), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx), "kern_tape_record_func: buffer 1 is NULL");
    cr_assert_eq(kern_tape_record_func(t, NULL, &calls, NULL, bufs, 1), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx), "kern_tape_record_func: backward is NULL");
    cr_assert_eq(kern_tape_record_count(t), 0);
    kern_tape_destroy(t);
    kern_context_release(ctx);
}

/* ---- free_user ------------------------------------------------------------------------ */

static void count_free(void *user) { ++*(int *)user; }

Test(tape, free_user_runs_exactly_once) {
    kern_context *ctx = new_ctx();
    kern_buffer *b = fbuf(ctx, 4, NULL);
    kern_tape *t;
    cr_assert_eq(kern_tape_create(ctx, &t), KERN_OK);
    int freed[8] = {0};
    /* clear, then destroy: once */
    cr_assert_eq(kern_tape_record_func(t, count_step, &freed[0], count_free, &b, 1), KERN_OK);
    cr_assert_eq(freed[0], 0);
    cr_assert_eq(kern_tape_clear(t), KERN_OK);
    cr_assert_eq(freed[0], 1);
    /* after backward (which calls it, not frees it), then destroy */
    int calls = 0;
    cr_assert_eq(kern_tape_record_func(t, count_step, &calls, count_free, &b, 1), KERN_OK);
    cr_assert_eq(kern_tape_backward(t), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(calls, 1);
    /* failed recordings free at once: the tape has run backward, NULL backward, bad count */
    cr_assert_eq(kern_tape_record_func(t, count_step, &freed[1], count_free, &b, 1),
                 KERN_ERR_ARGUMENT);
    cr_assert_eq(freed[1], 1);
    cr_assert_eq(kern_tape_clear(t), KERN_OK);
    cr_assert_eq(calls, 2, "freed with the clear, having been called once");
    cr_assert_eq(kern_tape_record_func(t, NULL, &freed[2], count_free, &b, 1), KERN_ERR_ARGUMENT);
    cr_assert_eq(freed[2], 1);
    cr_assert_eq(kern_tape_record_func(t, count_step, &freed[3], count_free, NULL, 1),
                 KERN_ERR_ARGUMENT);
    cr_assert_eq(freed[3], 1);
    cr_assert_eq(kern_tape_record_func(NULL, count_step, &freed[4], count_free, &b, 1),
                 KERN_ERR_ARGUMENT);
    cr_assert_eq(freed[4], 1);
    /* destroy */
    cr_assert_eq(kern_tape_record_func(t, count_step, &freed[5], count_free, &b, 1), KERN_OK);
    kern_tape_destroy(t);
    cr_assert_eq(freed[5], 1);
    /* the context's release */
    cr_assert_eq(kern_tape_create(ctx, &t), KERN_OK);
    cr_assert_eq(kern_tape_record_func(t, count_step, &freed[6], count_free, &b, 1), KERN_OK);
    cr_assert_eq(kern_tape_record_func(t, count_step, &freed[6], count_free, &b, 1), KERN_OK);
    kern_context_release(ctx);
    cr_assert_eq(freed[6], 2);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(freed[i], 1, "freed[%d] = %d", i, freed[i]);
}

/* ---- what a callback may and may not do with its tape --------------------------------- */

typedef struct meddler {
    kern_context *ctx;
    kern_kernel *sq;
    kern_buffer *x, *y, *ints;
    int freed, refused;
    char msgs[3][512];
} meddler;

static kern_status meddle(kern_tape *t, void *user) {
    meddler *m = user;
    kern_arg a[3] = {kern_arg_buffer(m->x), kern_arg_buffer(m->y), kern_arg_f32(1.0f)};
    kern_context *ctx = m->ctx;
    m->refused +=
        kern_tape_record_func(t, count_step, &m->freed, count_free, &m->x, 1) == KERN_ERR_ARGUMENT;
    m->refused += kern_tape_backward(t) == KERN_ERR_ARGUMENT;
    m->refused += kern_tape_launch(t, m->sq, a, 3) == KERN_ERR_ARGUMENT;
    snprintf(m->msgs[0], sizeof m->msgs[0], "%s", kern_context_last_error(ctx));
    m->refused += kern_tape_clear(t) == KERN_ERR_ARGUMENT;
    snprintf(m->msgs[1], sizeof m->msgs[1], "%s", kern_context_last_error(ctx));
    kern_tape_destroy(t);
    snprintf(m->msgs[2], sizeof m->msgs[2], "%s", kern_context_last_error(ctx));
    /* the declared buffers have adjoints, zeroed; the i32 one has none */
    kern_buffer *g;
    if (kern_tape_grad(t, m->x, &g) != KERN_OK)
        return KERN_ERR_INTERNAL;
    float v[4] = {1, 1, 1, 1};
    kern_buffer_read(g, v, sizeof v);
    for (int i = 0; i < 4; i++)
        if (v[i] != 0)
            return kern_tape_error(t, KERN_ERR_INTERNAL, "x.grad was not zeroed");
    if (kern_tape_grad(t, m->ints, &g) != KERN_ERR_NOT_FOUND)
        return kern_tape_error(t, KERN_ERR_INTERNAL, "an i32 buffer got an adjoint");
    return KERN_OK;
}

Test(tape, callback_cannot_change_its_own_tape) {
    kern_context *ctx = new_ctx();
    kern_kernel *sq = find(compile(ctx), "sq");
    kern_buffer *ints = NULL;
    int64_t four = 4;
    cr_assert_eq(kern_buffer_create(ctx, KERN_I32, 1, &four, NULL, &ints), KERN_OK);
    meddler m = {ctx, sq, fbuf(ctx, 4, NULL), fbuf(ctx, 4, NULL), ints, 0, 0, {{0}}};
    kern_tape *t;
    cr_assert_eq(kern_tape_create(ctx, &t), KERN_OK);
    kern_buffer *bufs[2] = {m.x, ints};
    cr_assert_eq(kern_tape_record_func(t, meddle, &m, NULL, bufs, 2), KERN_OK);
    cr_assert_eq(kern_tape_backward(t), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(m.refused, 4);
    cr_assert_eq(m.freed, 1, "the refused recording freed its user data");
    const char *why = "the tape is running its backward pass (a host step's callback cannot "
                      "record on, clear, destroy or run backward its own tape)";
    const char *fns[3] = {"kern_tape_launch", "kern_tape_clear", "kern_tape_destroy"};
    for (int i = 0; i < 3; i++) {
        char want[512];
        snprintf(want, sizeof want, "%s: %s", fns[i], why);
        cr_assert_str_eq(m.msgs[i], want);
    }
    cr_assert_eq(kern_tape_record_count(t), 1);
    kern_tape_destroy(t);
    kern_context_release(ctx);
}

/* ---- the forward tape -------------------------------------------------------------- */

static const char seq_src[] = "kernel k1(x0: f64[], x1: f64[], a: f64) {\n"
                              "    for i in 0..len(x0) {\n"
                              "        x1[i] = sin(x0[i]) * a;\n"
                              "    }\n"
                              "}\n"
                              "kernel k2(x1: f64[], b: f64[], x: f64[,]) {\n"
                              "    for i in 0..len(x1) {\n"
                              "        x[0, i] = x1[i] * x1[i] + b[i];\n"
                              "    }\n"
                              "}\n"
                              "kernel step(x: f64[,], t: i32, dt: f64) {\n"
                              "    for i in 0..shape(x, 1) {\n"
                              "        x[t + 1, i] = x[t, i] + dt * cos(x[t, i]);\n"
                              "    }\n"
                              "}\n"
                              /* forward mode recomputes an atomic_max loop, which must
                                 then read no array it writes (y here) */
                              "kernel amax(x: f32[], g: i32[], hi: f32[], y: f32[]) {\n"
                              "    for i in 0..len(x) {\n"
                              "        y[i] = x[i];\n"
                              "        atomic_max(hi[g[i]], y[i]);\n"
                              "    }\n"
                              "}\n";

enum { SN = 9, T = 5 };

static kern_buffer *dbuf(kern_context *ctx, int rank, const int64_t *shape, const double *data) {
    kern_buffer *b = NULL;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F64, rank, shape, data, &b), KERN_OK);
    return b;
}

static void readd(kern_buffer *b, double *out, size_t n) {
    cr_assert_eq(kern_buffer_read(b, out, n * sizeof *out), KERN_OK);
}

/* The inputs and a direction in them. */
typedef struct inputs {
    double x0[SN], b[SN], a, dt;
} inputs;

static void make_inputs(inputs *in, inputs *v) {
    for (int i = 0; i < SN; i++) {
        in->x0[i] = 0.37 * i - 1.1;
        in->b[i] = 0.2 - 0.05 * i;
        v->x0[i] = 0.5 - 0.125 * (i % 4);
        v->b[i] = 0.25 * ((i * 3) % 5) - 0.5;
    }
    in->a = 1.3;
    in->dt = 0.15;
    v->a = -0.7;
    v->dt = 0.9;
}

/* The sequence as a plain C loop: the final state x[T, :]. */
static void reference(const inputs *in, double out[SN]) {
    for (int i = 0; i < SN; i++) {
        double x1 = sin(in->x0[i]) * in->a, x = x1 * x1 + in->b[i];
        for (int t = 0; t < T; t++)
            x = x + in->dt * cos(x);
        out[i] = x;
    }
}

/* in + h v */
static inputs along(const inputs *in, const inputs *v, double h) {
    inputs r = *in;
    for (int i = 0; i < SN; i++) {
        r.x0[i] += h * v->x0[i];
        r.b[i] += h * v->b[i];
    }
    r.a += h * v->a;
    r.dt += h * v->dt;
    return r;
}

/* The buffers of one run of the sequence. */
typedef struct run {
    kern_buffer *x0, *x1, *b, *x;
    kern_arg l1[3], l2[3], steps[T][3];
} run;

static void setup_run(kern_context *ctx, const inputs *in, run *r) {
    int64_t n = SN, shape[2] = {T + 1, SN};
    r->x0 = dbuf(ctx, 1, &n, in->x0);
    r->x1 = dbuf(ctx, 1, &n, NULL);
    r->b = dbuf(ctx, 1, &n, in->b);
    r->x = dbuf(ctx, 2, shape, NULL);
    r->l1[0] = kern_arg_buffer(r->x0);
    r->l1[1] = kern_arg_buffer(r->x1);
    r->l1[2] = kern_arg_f64(in->a);
    r->l2[0] = kern_arg_buffer(r->x1);
    r->l2[1] = kern_arg_buffer(r->b);
    r->l2[2] = kern_arg_buffer(r->x);
    for (int t = 0; t < T; t++) {
        r->steps[t][0] = kern_arg_buffer(r->x);
        r->steps[t][1] = kern_arg_i32(t);
        r->steps[t][2] = kern_arg_f64(in->dt);
    }
}

Test(tape, forward_tape_against_finite_differences) {
    kern_context *ctx = new_ctx();
    kern_module *m = compile_source(ctx, seq_src, "seq.kern");
    kern_kernel *k1 = find(m, "k1"), *k2 = find(m, "k2"), *step = find(m, "step");
    inputs in, v;
    make_inputs(&in, &v);
    run r;
    setup_run(ctx, &in, &r);
    int64_t n = SN;
    kern_buffer *v0 = dbuf(ctx, 1, &n, v.x0), *vb = dbuf(ctx, 1, &n, v.b);

    kern_tape *t;
    cr_assert_eq(kern_tape_create_forward(ctx, &t), KERN_OK);
    cr_assert_eq(kern_tape_set_tan(t, r.x0, v0), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_tape_set_tan(t, r.b, vb), KERN_OK);
    /* scalar tangents per launch, indexed as the arguments */
    double tan1[3] = {0, 0, v.a}, tan_step[3] = {0, 0, v.dt};
    cr_assert_eq(kern_tape_launch_jvp(t, k1, r.l1, 3, tan1), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    cr_assert_eq(kern_tape_launch(t, k2, r.l2, 3), KERN_OK, "%s", kern_context_last_error(ctx));
    for (int s = 0; s < T; s++)
        cr_assert_eq(kern_tape_launch_jvp(t, step, r.steps[s], 3, tan_step), KERN_OK, "%s",
                     kern_context_last_error(ctx));
    cr_assert_eq(kern_tape_record_count(t), 2 + T);

    /* the primal state, as K would have left it */
    double x[(T + 1) * SN], want[SN];
    readd(r.x, x, (T + 1) * SN);
    reference(&in, want);
    for (int i = 0; i < SN; i++)
        cr_assert(fabs(x[T * SN + i] - want[i]) <= 1e-12 * (1 + fabs(want[i])), "x[%d]: %g vs %g",
                  i, x[T * SN + i], want[i]);

    /* the tangent of x1 by hand: a cos(x0) v0 + sin(x0) va (tape-created: x1's tangent) */
    kern_buffer *tx1, *tx, *got;
    cr_assert_eq(kern_tape_tan(t, r.x1, &tx1), KERN_OK, "%s", kern_context_last_error(ctx));
    double dx1[SN];
    readd(tx1, dx1, SN);
    for (int i = 0; i < SN; i++) {
        double d = in.a * cos(in.x0[i]) * v.x0[i] + sin(in.x0[i]) * v.a;
        cr_assert(fabs(dx1[i] - d) <= 1e-12, "x1.tan[%d]: %.15g vs %.15g", i, dx1[i], d);
    }
    /* the set tangent is the one returned */
    cr_assert_eq(kern_tape_tan(t, r.x0, &got), KERN_OK);
    cr_assert_eq(got, v0);

    /* J v against f64 central differences of the C loop */
    cr_assert_eq(kern_tape_tan(t, r.x, &tx), KERN_OK);
    double dx[(T + 1) * SN], fp[SN], fm[SN];
    readd(tx, dx, (T + 1) * SN);
    const double h = 1e-6;
    inputs p = along(&in, &v, h), q = along(&in, &v, -h);
    reference(&p, fp);
    reference(&q, fm);
    double maxerr = 0;
    for (int i = 0; i < SN; i++) {
        double fd = (fp[i] - fm[i]) / (2 * h), err = fabs(dx[T * SN + i] - fd) / (1 + fabs(fd));
        maxerr = err > maxerr ? err : maxerr;
        cr_assert(err <= 1e-7, "x.tan[%d, %d]: %.12g, finite differences %.12g", T, i,
                  dx[T * SN + i], fd);
    }
    cr_log_info("forward tape vs finite differences: max relative error %.3g\n", maxerr);

    /* clear releases the tape's own tangents, keeps the set ones */
    cr_assert_eq(kern_tape_clear(t), KERN_OK);
    cr_assert_eq(kern_tape_record_count(t), 0);
    cr_assert_eq(kern_tape_tan(t, r.x, &got), KERN_ERR_NOT_FOUND);
    cr_assert(strstr(kern_context_last_error(ctx), "no tangent"), "%s",
              kern_context_last_error(ctx));
    cr_assert_eq(kern_tape_tan(t, r.x0, &got), KERN_OK);
    cr_assert_eq(got, v0);
    kern_tape_destroy(t);
    kern_context_release(ctx);
}

Test(tape, forward_and_reverse_tapes_agree) {
    kern_context *ctx = new_ctx();
    kern_module *m = compile_source(ctx, seq_src, "seq.kern");
    kern_kernel *k1 = find(m, "k1"), *k2 = find(m, "k2"), *step = find(m, "step");
    inputs in, v;
    make_inputs(&in, &v);
    int64_t n = SN, shape[2] = {T + 1, SN};
    double u[(T + 1) * SN] = {0};
    for (int i = 0; i < SN; i++)
        u[T * SN + i] = 1.0 - 0.3 * (i % 3);

    /* J v on a forward tape */
    run f;
    setup_run(ctx, &in, &f);
    kern_tape *ft;
    cr_assert_eq(kern_tape_create_forward(ctx, &ft), KERN_OK);
    cr_assert_eq(kern_tape_set_tan(ft, f.x0, dbuf(ctx, 1, &n, v.x0)), KERN_OK);
    cr_assert_eq(kern_tape_set_tan(ft, f.b, dbuf(ctx, 1, &n, v.b)), KERN_OK);
    double tan1[3] = {0, 0, v.a}, tan_step[3] = {0, 0, v.dt};
    cr_assert_eq(kern_tape_launch_jvp(ft, k1, f.l1, 3, tan1), KERN_OK);
    cr_assert_eq(kern_tape_launch_jvp(ft, k2, f.l2, 3, NULL), KERN_OK);
    for (int s = 0; s < T; s++)
        cr_assert_eq(kern_tape_launch_jvp(ft, step, f.steps[s], 3, tan_step), KERN_OK);
    kern_buffer *tx;
    double jv[(T + 1) * SN];
    cr_assert_eq(kern_tape_tan(ft, f.x, &tx), KERN_OK);
    readd(tx, jv, (T + 1) * SN);

    /* J^T u on a reverse tape over fresh buffers */
    run r;
    setup_run(ctx, &in, &r);
    kern_tape *rt;
    cr_assert_eq(kern_tape_create(ctx, &rt), KERN_OK);
    cr_assert_eq(kern_tape_set_grad(rt, r.x, dbuf(ctx, 2, shape, u)), KERN_OK);
    cr_assert_eq(kern_tape_launch(rt, k1, r.l1, 3), KERN_OK);
    cr_assert_eq(kern_tape_launch(rt, k2, r.l2, 3), KERN_OK);
    for (int s = 0; s < T; s++)
        cr_assert_eq(kern_tape_launch(rt, step, r.steps[s], 3), KERN_OK);
    cr_assert_eq(kern_tape_backward(rt), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_buffer *gx0, *gb;
    double g0[SN], gbv[SN], ga, gdt = 0;
    cr_assert_eq(kern_tape_grad(rt, r.x0, &gx0), KERN_OK);
    cr_assert_eq(kern_tape_grad(rt, r.b, &gb), KERN_OK);
    readd(gx0, g0, SN);
    readd(gb, gbv, SN);
    cr_assert_eq(kern_tape_scalar_grad(rt, 0, 2, &ga), KERN_OK);
    for (int s = 0; s < T; s++) {
        double d;
        cr_assert_eq(kern_tape_scalar_grad(rt, 2 + s, 2, &d), KERN_OK);
        gdt += d;
    }

    double lhs = 0, rhs = v.a * ga + v.dt * gdt;
    for (int i = 0; i < (T + 1) * SN; i++)
        lhs += jv[i] * u[i];
    for (int i = 0; i < SN; i++)
        rhs += v.x0[i] * g0[i] + v.b[i] * gbv[i];
    cr_log_info("<J v, u> = %.15g, <v, J^T u> = %.15g\n", lhs, rhs);
    cr_assert(fabs(lhs - rhs) <= 1e-12 * (1 + fabs(lhs)), "<J v, u> = %.15g, <v, J^T u> = %.15g",
              lhs, rhs);
    kern_context_release(ctx); /* destroys both tapes */
}

static kern_status no_backward(kern_tape *t, void *user) {
    (void)t;
    (void)user;
    return KERN_OK;
}

Test(tape, forward_tape_errors) {
    kern_context *ctx = new_ctx();
    kern_module *m = compile_source(ctx, seq_src, "seq.kern");
    kern_kernel *k1 = find(m, "k1"), *amax = find(m, "amax");
    inputs in, v;
    make_inputs(&in, &v);
    run r;
    setup_run(ctx, &in, &r);
    int64_t n = SN;
    kern_tape *t, *rev;
    cr_assert_eq(kern_tape_create_forward(ctx, &t), KERN_OK);
    cr_assert_eq(kern_tape_create(ctx, &rev), KERN_OK);
    const char *msg;

    /* what a forward tape does not have */
    cr_assert_eq(kern_tape_backward(t), KERN_ERR_ARGUMENT);
    msg = kern_context_last_error(ctx);
    cr_assert(strstr(msg, "kern_tape_backward: the tape is a forward tape"), "%s", msg);
    kern_buffer *g = dbuf(ctx, 1, &n, NULL), *out;
    cr_assert_eq(kern_tape_set_grad(t, r.x0, g), KERN_ERR_ARGUMENT);
    cr_assert(strstr(kern_context_last_error(ctx), "kern_tape_set_grad: the tape is a forward"));
    cr_assert_eq(kern_tape_grad(t, r.x0, &out), KERN_ERR_ARGUMENT);
    double d;
    cr_assert_eq(kern_tape_scalar_grad(t, 0, 2, &d), KERN_ERR_ARGUMENT);
    int freed = 0;
    kern_buffer *bufs[1] = {r.x0};
    cr_assert_eq(kern_tape_record_func(t, no_backward, &freed, count_free, bufs, 1),
                 KERN_ERR_ARGUMENT);
    cr_assert_eq(freed, 1);
    cr_assert(strstr(kern_context_last_error(ctx), "kern_tape_record_func: the tape is a forward"));
    /* and a reverse tape has no tangents */
    cr_assert_eq(kern_tape_set_tan(rev, r.x0, g), KERN_ERR_ARGUMENT);
    msg = kern_context_last_error(ctx);
    cr_assert(strstr(msg, "kern_tape_set_tan: the tape is a reverse tape"), "%s", msg);
    cr_assert_eq(kern_tape_tan(rev, r.x0, &out), KERN_ERR_ARGUMENT);
    cr_assert_eq(kern_tape_launch_jvp(rev, k1, r.l1, 3, NULL), KERN_ERR_ARGUMENT);

    /* a tangent that does not match, one that was released */
    int64_t n2 = SN + 1;
    kern_buffer *bad = dbuf(ctx, 1, &n2, NULL);
    cr_assert_eq(kern_tape_set_tan(t, r.x0, bad), KERN_ERR_ARGUMENT);
    msg = kern_context_last_error(ctx);
    cr_assert(strstr(msg, "kern_tape_set_tan: the tangent"), "%s", msg);
    cr_assert_eq(kern_tape_set_tan(t, r.x0, g), KERN_OK);
    kern_buffer_release(g);
    cr_assert_eq(kern_tape_launch(t, k1, r.l1, 3), KERN_ERR_ARGUMENT);
    msg = kern_context_last_error(ctx);
    cr_assert(strstr(msg, "kern_tape_launch: kernel 'k1': the tangent buffer of parameter 'x0' "
                          "was released"),
              "%s", msg);
    cr_assert_eq(kern_tape_record_count(t), 0);
    /* a wrong argument count names the kernel */
    cr_assert_eq(kern_tape_launch(t, k1, r.l1, 2), KERN_ERR_ARGUMENT);
    msg = kern_context_last_error(ctx);
    cr_assert(strstr(msg, "kernel 'k1' takes 3 arguments, got 2"), "%s", msg);

    /* a kernel whose K.jvp is refused: nothing runs, the message names the kernel */
    float xs[4] = {1, 5, 2, 7}, hi[2] = {-1, -1};
    int32_t gi[4] = {0, 1, 0, 1};
    int64_t four = 4, two = 2;
    kern_buffer *bx, *bg, *bh, *by;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &four, xs, &bx), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_I32, 1, &four, gi, &bg), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &two, hi, &bh), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &four, NULL, &by), KERN_OK);
    kern_arg la[4] = {kern_arg_buffer(bx), kern_arg_buffer(bg), kern_arg_buffer(bh),
                      kern_arg_buffer(by)};
    kern_status s = kern_tape_launch(t, amax, la, 4);
    cr_assert_neq(s, KERN_OK);
    msg = kern_context_last_error(ctx);
    cr_assert(strstr(msg, "kern_tape_launch: kernel 'amax' has no forward-mode kernel "
                          "'amax.jvp'"),
              "%s", msg);
    cr_assert(strstr(msg, "atomic_max"), "%s", msg);
    float after[2];
    cr_assert_eq(kern_buffer_read(bh, after, sizeof after), KERN_OK);
    cr_assert(after[0] == -1 && after[1] == -1, "amax ran: %g %g", after[0], after[1]);
    cr_assert_eq(kern_tape_record_count(t), 0);
    /* the same kernel is fine on a reverse tape */
    cr_assert_eq(kern_tape_launch(rev, amax, la, 4), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_buffer_read(bh, after, sizeof after), KERN_OK);
    cr_assert(after[0] == 2 && after[1] == 7);
    kern_tape_destroy(t);
    kern_tape_destroy(rev);
    kern_context_release(ctx);
}
