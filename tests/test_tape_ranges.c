/* test_tape_ranges.c - what the gradient tape saves (suite `tape_ranges`): a launch that
 * overwrites an array an earlier record read (the gradient against an f64 reference in
 * plain C, and the array put back after backward); time-indexed steps, which save nothing;
 * a save over the adstack budget, refused with the kernels, parameter and bytes named
 * and nothing launched; a partial overlap (rows 2..4 of rows 0..8 read) saving exactly
 * those rows; a kernel with a data-dependent index, read whole; a kernel without access
 * lines (older metadata), treated as touching every array whole. And the metadata's
 * access lines: what the compiler writes for affine and data-dependent indices, the
 * parser's round trip and its errors, older text without them.
 *
 * The contexts are on $KERN_TEST_BACKEND (test_backend.h): the copies go through the
 * device's copy op or through host memory. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "../include/kern.h"
#include "../runtime/meta.h"
#include "../runtime/rt.h"
#include "test_backend.h"

static const char src[] = "kernel sq(x: f32[], y: f32[], a: f32) {\n"
                          "    for i in 0..len(x) {\n"
                          "        y[i] = a * x[i] * x[i];\n"
                          "    }\n"
                          "}\n"
                          "kernel neg(src: f32[], dst: f32[]) {\n"
                          "    for i in 0..len(src) {\n"
                          "        dst[i] = -src[i];\n"
                          "    }\n"
                          "}\n"
                          "kernel mulsin(x: f32[], y: f32[], z: f32[]) {\n"
                          "    for i in 0..len(x) {\n"
                          "        z[i] = x[i] * sin(y[i]);\n"
                          "    }\n"
                          "}\n"
                          "kernel step(x: f32[,], t: i32, dt: f32) {\n"
                          "    for i in 0..shape(x, 1) {\n"
                          "        x[t + 1, i] = x[t, i] + dt * sin(x[t, i]);\n"
                          "    }\n"
                          "}\n"
                          "kernel colsum(x: f32[,], s: f32[]) {\n"
                          "    for r in 0..shape(x, 0), j in 0..shape(x, 1) {\n"
                          "        atomic_add(s[j], x[r, j] * x[r, j]);\n"
                          "    }\n"
                          "}\n"
                          "kernel setrows(x: f32[,], r0: i32, v: f32[]) {\n"
                          "    for k in 0..3, j in 0..shape(x, 1) {\n"
                          "        x[r0 + k, j] = 2.0 * v[j];\n"
                          "    }\n"
                          "}\n"
                          "kernel gath(x: f32[], idx: i32[], y: f32[]) {\n"
                          "    for i in 0..len(y) {\n"
                          "        y[i] = x[idx[i]] * x[idx[i]];\n"
                          "    }\n"
                          "}\n"
                          "kernel put2(x: f32[], o: i32) {\n"
                          "    for i in 0..2 {\n"
                          "        x[o + i] = 0.5;\n"
                          "    }\n"
                          "}\n";

static kern_context *new_ctx(int64_t budget) {
    kern_context_options o = kern_context_options_default();
    o.threads = 2;
    o.backend = kern_test_backend();
    o.ad_memory_budget = budget;
    kern_context *ctx = NULL;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    return ctx;
}

static kern_module *compile(kern_context *ctx) {
    kern_module *m = NULL;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "ranges.kern", &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    return m;
}

static kern_kernel *find(kern_module *m, const char *name) {
    kern_kernel *k = NULL;
    cr_assert_eq(kern_kernel_find(m, name, &k), KERN_OK);
    return k;
}

static kern_buffer *fbuf(kern_context *ctx, int rank, const int64_t *shape, const float *data) {
    kern_buffer *b = NULL;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, rank, shape, data, &b), KERN_OK);
    return b;
}

static kern_buffer *vec(kern_context *ctx, int64_t n, const float *data) {
    return fbuf(ctx, 1, &n, data);
}

static void readf(kern_buffer *b, float *out, size_t n) {
    cr_assert_eq(kern_buffer_read(b, out, n * sizeof *out), KERN_OK);
}

static void launch(kern_tape *t, kern_kernel *k, const kern_arg *args, int n) {
    cr_assert_eq(kern_tape_launch(t, k, args, n), KERN_OK, "%s",
                 kern_context_last_error(k->mod->ctx));
}

static kern_buffer *grad_of(kern_tape *t, kern_buffer *b) {
    kern_buffer *g = NULL;
    cr_assert_eq(kern_tape_grad(t, b, &g), KERN_OK);
    return g;
}

static void expect_close(const float *got, const double *want, int n, const char *what) {
    for (int i = 0; i < n; i++)
        cr_expect(fabs(got[i] - want[i]) <= 1e-4 * (1 + fabs(want[i])), "%s[%d]: %g, want %g", what,
                  i, got[i], want[i]);
}

/* ---- an overwritten input ------------------------------------------------------------ */

enum { N = 13 };

/* y = a x^2; x = -c (overwriting x, which sq read); z = x sin(y); L = sum w z */
Test(tape_ranges, overwritten_input_gives_the_right_gradient) {
    kern_context *ctx = new_ctx(0);
    kern_module *m = compile(ctx);
    float x0[N], c[N], w[N];
    for (int i = 0; i < N; i++) {
        x0[i] = 0.1f * (float)(i % 7) - 0.25f;
        c[i] = 0.3f + 0.05f * (float)i;
        w[i] = 1.0f - 0.1f * (float)(i % 4);
    }
    const float a = 1.5f;
    kern_buffer *x = vec(ctx, N, x0), *y = vec(ctx, N, NULL), *cb = vec(ctx, N, c),
                *z = vec(ctx, N, NULL), *gz = vec(ctx, N, w);
    kern_tape *t;
    cr_assert_eq(kern_tape_create(ctx, &t), KERN_OK);
    cr_assert_eq(kern_tape_set_grad(t, z, gz), KERN_OK);
    launch(t, find(m, "sq"), (kern_arg[]){kern_arg_buffer(x), kern_arg_buffer(y), kern_arg_f32(a)},
           3);
    cr_expect_eq(kern_tape_saved_bytes(t), 0);
    launch(t, find(m, "neg"), (kern_arg[]){kern_arg_buffer(cb), kern_arg_buffer(x)}, 2);
    cr_expect_eq(kern_tape_saved_bytes(t), N * sizeof(float), "saved %lld",
                 (long long)kern_tape_saved_bytes(t));
    launch(t, find(m, "mulsin"),
           (kern_arg[]){kern_arg_buffer(x), kern_arg_buffer(y), kern_arg_buffer(z)}, 3);
    cr_assert_eq(kern_tape_backward(t), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_expect_eq(kern_tape_saved_bytes(t), 0, "backward releases what it put back");

    double gx[N], gc[N], ga = 0;
    for (int i = 0; i < N; i++) {
        double yv = (double)a * x0[i] * x0[i], xv = -(double)c[i];
        double gy = w[i] * xv * cos(yv); /* dL/dy from mulsin */
        gx[i] = gy * 2.0 * a * x0[i];    /* sq.grad with x as sq read it */
        gc[i] = -(double)w[i] * sin(yv); /* neg.grad of mulsin's dL/dx */
        ga += gy * x0[i] * x0[i];
    }
    float got[N];
    readf(grad_of(t, x), got, N);
    expect_close(got, gx, N, "x.grad");
    readf(grad_of(t, cb), got, N);
    expect_close(got, gc, N, "c.grad");
    double da;
    cr_assert_eq(kern_tape_scalar_grad(t, 0, 2, &da), KERN_OK);
    cr_expect(fabs(da - ga) <= 1e-4 * (1 + fabs(ga)), "a.grad %g, want %g", da, ga);
    /* after backward x holds what sq read */
    readf(x, got, N);
    for (int i = 0; i < N; i++)
        cr_expect_eq(got[i], x0[i]);
    kern_context_release(ctx);
}

/* The same launches with a budget too small for the copy: the overwriting launch fails,
 * runs nothing and records nothing. */
Test(tape_ranges, save_over_the_budget_fails_and_launches_nothing) {
    kern_context *ctx = new_ctx(40);
    kern_module *m = compile(ctx);
    float x0[N], c[N];
    for (int i = 0; i < N; i++) {
        x0[i] = (float)i;
        c[i] = 100.0f;
    }
    kern_buffer *x = vec(ctx, N, x0), *y = vec(ctx, N, NULL), *cb = vec(ctx, N, c);
    kern_tape *t;
    cr_assert_eq(kern_tape_create(ctx, &t), KERN_OK);
    launch(t, find(m, "sq"), (kern_arg[]){kern_arg_buffer(x), kern_arg_buffer(y), kern_arg_f32(2)},
           3);
    kern_status s = kern_tape_launch(t, find(m, "neg"),
                                     (kern_arg[]){kern_arg_buffer(cb), kern_arg_buffer(x)}, 2);
    cr_assert_eq(s, KERN_ERR_OUT_OF_MEMORY);
    const char *msg = kern_context_last_error(ctx);
    cr_expect_str_eq(msg,
                     "kern_tape_launch: kernel 'neg' writes elements 0 to 12 of parameter 'dst' "
                     "(f32[13]), which record 0 (kernel 'sq', parameter 'x') read: the tape must "
                     "keep them for its backward pass, 52 bytes, and the adstack budget has 40 of "
                     "its 40 bytes left (kern_context_options.ad_memory_budget); nothing was "
                     "launched");
    cr_expect_eq(kern_tape_record_count(t), 1);
    cr_expect_eq(kern_tape_saved_bytes(t), 0);
    float got[N];
    readf(x, got, N);
    for (int i = 0; i < N; i++)
        cr_expect_eq(got[i], x0[i], "x[%d] was overwritten", i);
    /* the tape goes on: its one record runs backward */
    cr_assert_eq(kern_tape_backward(t), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_context_release(ctx);
}

/* ---- time-indexed steps: nothing to save ---------------------------------------------- */

enum { T = 6, W = 5 };

Test(tape_ranges, time_indexed_steps_save_nothing) {
    kern_context *ctx = new_ctx(0);
    kern_module *m = compile(ctx);
    kern_kernel *step = find(m, "step");
    float xs[T + 1][W] = {{0}}, w[T + 1][W] = {{0}};
    for (int i = 0; i < W; i++) {
        xs[0][i] = 0.2f * (float)i - 0.3f;
        w[T][i] = 0.5f + 0.25f * (float)i;
    }
    const float dt = 0.3f;
    int64_t shape[2] = {T + 1, W};
    kern_buffer *x = fbuf(ctx, 2, shape, &xs[0][0]), *gx = fbuf(ctx, 2, shape, &w[0][0]);
    kern_tape *t;
    cr_assert_eq(kern_tape_create(ctx, &t), KERN_OK);
    cr_assert_eq(kern_tape_set_grad(t, x, gx), KERN_OK);
    for (int s = 0; s < T; s++) {
        launch(t, step, (kern_arg[]){kern_arg_buffer(x), kern_arg_i32(s), kern_arg_f32(dt)}, 3);
        cr_expect_eq(kern_tape_saved_bytes(t), 0, "step %d saved %lld bytes", s,
                     (long long)kern_tape_saved_bytes(t));
    }
    cr_assert_eq(kern_tape_backward(t), KERN_OK, "%s", kern_context_last_error(ctx));

    double xr[T + 1][W], g[W], gdt[T];
    for (int i = 0; i < W; i++)
        xr[0][i] = xs[0][i];
    for (int s = 0; s < T; s++)
        for (int i = 0; i < W; i++)
            xr[s + 1][i] = xr[s][i] + dt * sin(xr[s][i]);
    for (int i = 0; i < W; i++)
        g[i] = w[T][i];
    for (int s = T - 1; s >= 0; s--) {
        gdt[s] = 0;
        for (int i = 0; i < W; i++) {
            gdt[s] += g[i] * sin(xr[s][i]);
            g[i] *= 1 + dt * cos(xr[s][i]);
        }
    }
    float got[T + 1][W];
    readf(gx, &got[0][0], (T + 1) * W);
    expect_close(got[0], g, W, "x.grad[0]");
    for (int s = 0; s < T; s++) {
        double d;
        cr_assert_eq(kern_tape_scalar_grad(t, s, 2, &d), KERN_OK);
        cr_expect(fabs(d - gdt[s]) <= 1e-4 * (1 + fabs(gdt[s])), "dt.grad of step %d: %g, want %g",
                  s, d, gdt[s]);
    }
    kern_context_release(ctx);
}

/* ---- a partial overlap ----------------------------------------------------------------- */

enum { R = 9, C = 4 };

/* s = colsum(x^2) reads rows 0..8; setrows writes rows 2..4; s2 = colsum(x^2) again;
 * L = sum w1 s + sum w2 s2. Only rows 2..4 are saved. */
Test(tape_ranges, partial_overlap_saves_only_the_rows_overwritten) {
    kern_context *ctx = new_ctx(0);
    kern_module *m = compile(ctx);
    float x0[R][C], v[C], w1[C], w2[C];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < C; j++)
            x0[r][j] = 0.1f * (float)(r - j) + 0.05f;
    for (int j = 0; j < C; j++) {
        v[j] = 0.3f - 0.2f * (float)j;
        w1[j] = 1.0f + 0.5f * (float)j;
        w2[j] = 0.75f - 0.25f * (float)j;
    }
    int64_t shape[2] = {R, C};
    kern_buffer *x = fbuf(ctx, 2, shape, &x0[0][0]), *vb = vec(ctx, C, v), *s1 = vec(ctx, C, NULL),
                *s2 = vec(ctx, C, NULL), *g1 = vec(ctx, C, w1), *g2 = vec(ctx, C, w2);
    kern_kernel *colsum = find(m, "colsum");
    kern_tape *t;
    cr_assert_eq(kern_tape_create(ctx, &t), KERN_OK);
    cr_assert_eq(kern_tape_set_grad(t, s1, g1), KERN_OK);
    cr_assert_eq(kern_tape_set_grad(t, s2, g2), KERN_OK);
    launch(t, colsum, (kern_arg[]){kern_arg_buffer(x), kern_arg_buffer(s1)}, 2);
    launch(t, find(m, "setrows"),
           (kern_arg[]){kern_arg_buffer(x), kern_arg_i32(2), kern_arg_buffer(vb)}, 3);
    cr_expect_eq(kern_tape_saved_bytes(t), 3 * C * sizeof(float), "saved %lld",
                 (long long)kern_tape_saved_bytes(t));
    launch(t, colsum, (kern_arg[]){kern_arg_buffer(x), kern_arg_buffer(s2)}, 2);
    cr_expect_eq(kern_tape_saved_bytes(t), 3 * C * sizeof(float));
    cr_assert_eq(kern_tape_backward(t), KERN_OK, "%s", kern_context_last_error(ctx));

    double x1[R][C], gx[R * C], gv[C] = {0};
    for (int r = 0; r < R; r++)
        for (int j = 0; j < C; j++)
            x1[r][j] = r >= 2 && r < 5 ? 2.0 * v[j] : x0[r][j];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < C; j++) {
            bool over = r >= 2 && r < 5;
            double d2 = 2 * x1[r][j] * w2[j]; /* dL/dx1 */
            gx[r * C + j] = 2 * x0[r][j] * w1[j] + (over ? 0 : d2);
            if (over)
                gv[j] += 2 * d2;
        }
    float got[R * C];
    readf(grad_of(t, x), got, R * C);
    expect_close(got, gx, R * C, "x.grad");
    readf(grad_of(t, vb), got, C);
    expect_close(got, gv, C, "v.grad");
    readf(x, got, R * C);
    for (int r = 0; r < R; r++)
        for (int j = 0; j < C; j++)
            cr_expect_eq(got[r * C + j], x0[r][j], "x[%d, %d] after backward", r, j);
    kern_context_release(ctx);
}

/* ---- whole arrays ----------------------------------------------------------------------- */

/* gath reads x through idx (any element): a later launch writing two elements saves them. */
Test(tape_ranges, data_dependent_index_reads_the_whole_array) {
    kern_context *ctx = new_ctx(0);
    kern_module *m = compile(ctx);
    kern_kernel *gath = find(m, "gath");
    const kern_meta_access *ax = kern_meta_access_of(gath->meta, 0, false);
    const kern_meta_access *ai = kern_meta_access_of(gath->meta, 1, false);
    cr_assert(ax && ai);
    cr_expect(!ax->none && !ax->lo[0] && !ax->hi[0], "x[idx[i]]: the whole dimension");
    cr_expect(ai->lo[0] && ai->hi[0], "idx[i]: a range");
    cr_expect(kern_meta_access_of(gath->meta, 0, true)->none, "x is not written");

    float x0[N], xv[N];
    int32_t idx[N];
    for (int i = 0; i < N; i++) {
        x0[i] = 0.5f + 0.1f * (float)i;
        idx[i] = (i * 5) % N;
    }
    kern_buffer *x = vec(ctx, N, x0), *y = vec(ctx, N, NULL), *ib = NULL;
    int64_t n = N;
    cr_assert_eq(kern_buffer_create(ctx, KERN_I32, 1, &n, idx, &ib), KERN_OK);
    float ones[N];
    for (int i = 0; i < N; i++)
        ones[i] = 1;
    kern_tape *t;
    cr_assert_eq(kern_tape_create(ctx, &t), KERN_OK);
    cr_assert_eq(kern_tape_set_grad(t, y, vec(ctx, N, ones)), KERN_OK);
    launch(t, gath, (kern_arg[]){kern_arg_buffer(x), kern_arg_buffer(ib), kern_arg_buffer(y)}, 3);
    launch(t, find(m, "put2"), (kern_arg[]){kern_arg_buffer(x), kern_arg_i32(6)}, 2);
    cr_expect_eq(kern_tape_saved_bytes(t), 2 * sizeof(float));
    cr_assert_eq(kern_tape_backward(t), KERN_OK, "%s", kern_context_last_error(ctx));
    double gx[N] = {0};
    for (int i = 0; i < N; i++)
        gx[idx[i]] += 2.0 * x0[idx[i]];
    readf(grad_of(t, x), xv, N);
    /* put2 wrote x[6], x[7] without reading them: their adjoint before it is zero, and
     * gath's contributions come after */
    expect_close(xv, gx, N, "x.grad");
    kern_context_release(ctx);
}

/* A kernel without access lines (metadata from before them) counts as reading and writing
 * every array whole. */
Test(tape_ranges, kernel_without_access_lines_touches_whole_arrays) {
    kern_context *ctx = new_ctx(0);
    kern_module *m = compile(ctx);
    kern_kernel *put2 = find(m, "put2");
    kern_meta_kernel *mk = (kern_meta_kernel *)put2->meta;
    int naccess = mk->naccess;
    mk->naccess = 0; /* as older metadata parses */
    float x0[N], ones[N];
    for (int i = 0; i < N; i++) {
        x0[i] = 0.25f * (float)i;
        ones[i] = 1;
    }
    kern_buffer *x = vec(ctx, N, x0), *y = vec(ctx, N, NULL);
    kern_tape *t;
    cr_assert_eq(kern_tape_create(ctx, &t), KERN_OK);
    cr_assert_eq(kern_tape_set_grad(t, y, vec(ctx, N, ones)), KERN_OK);
    launch(t, find(m, "sq"), (kern_arg[]){kern_arg_buffer(x), kern_arg_buffer(y), kern_arg_f32(1)},
           3);
    launch(t, put2, (kern_arg[]){kern_arg_buffer(x), kern_arg_i32(0)}, 2);
    cr_expect_eq(kern_tape_saved_bytes(t), N * sizeof(float), "saved %lld",
                 (long long)kern_tape_saved_bytes(t));
    cr_assert_eq(kern_tape_backward(t), KERN_OK, "%s", kern_context_last_error(ctx));
    float got[N];
    readf(grad_of(t, x), got, N);
    for (int i = 0; i < N; i++)
        cr_expect(fabsf(got[i] - 2 * x0[i]) <= 1e-5f * (1 + 2 * x0[i]), "x.grad[%d] %g", i, got[i]);
    mk->naccess = naccess;
    kern_context_release(ctx);
}

/* ---- the metadata lines ------------------------------------------------------------------ */

static const char meta_head[] = "kern-meta 1\n"
                                "kernel k 1 1 3 1\n"
                                "param x f32[,] 0\n"
                                "param t i32 0\n"
                                "param y f32[] 0 0\n"
                                "task parallel 1 2 5\n";

Test(tape_ranges, compiler_writes_affine_ranges) {
    kern_context *ctx = new_ctx(0);
    kern_module *m = compile(ctx);
    const kern_meta_kernel *mk = find(m, "step")->meta;
    cr_assert_eq(mk->naccess, 2);
    kern_meta text = {.kernels = (kern_meta_kernel *)mk, .nkernels = 1};
    kern_buf b = {0};
    kern_meta_print(&b, &text);
    cr_expect(strstr(b.data, "access 0 read (param 1) (add (param 1) 1) 0 (dim 0 1)\n"
                             "access 0 write (add (param 1) 1) (add (param 1) 2) 0 (dim 0 1)\n"),
              "%s", b.data);
    buf_free(&b);
    cr_expect_null(find(m, "step.grad")->meta->access, "derived kernels have no access lines");
    kern_context_release(ctx);
}

Test(tape_ranges, access_lines_parse_and_print_back) {
    char text[1024], err[256];
    snprintf(text, sizeof text,
             "%saccess 0 read (param 1) (add (param 1) 1) *\naccess 0 write none\n"
             "access 2 read (max 0 (sub (dim 0 1) 3)) (dim 0 1)\nend\n",
             meta_head);
    kern_meta *m = kern_meta_parse(text, strlen(text), err, sizeof err);
    cr_assert(m, "%s", err);
    const kern_meta_kernel *k = &m->kernels[0];
    cr_assert_eq(k->naccess, 3);
    const kern_meta_access *r = kern_meta_access_of(k, 0, false);
    cr_assert(r && !r->none && r->lo[0] && r->hi[0] && !r->lo[1] && !r->hi[1]);
    cr_expect(kern_meta_access_of(k, 0, true)->none);
    cr_expect_null(kern_meta_access_of(k, 2, true), "no line: the whole array");
    sz_arg args[3] = {{.type = k->params[0].type, .shape = {4, 7, 1, 1}},
                      {.type = k->params[1].type, .scalar = 5},
                      {.type = k->params[2].type, .shape = {3, 1, 1, 1}}};
    int64_t lo, hi;
    cr_assert(sz_eval(r->lo[0], args, 3, &lo, err, sizeof err));
    cr_assert(sz_eval(r->hi[0], args, 3, &hi, err, sizeof err));
    cr_expect(lo == 5 && hi == 6);
    kern_buf b = {0};
    kern_meta_print(&b, m);
    cr_expect_str_eq(b.data, text);
    buf_free(&b);
    kern_meta_free(m);

    /* older metadata: no access lines */
    snprintf(text, sizeof text, "%send\n", meta_head);
    cr_assert((m = kern_meta_parse(text, strlen(text), err, sizeof err)), "%s", err);
    cr_expect_eq(m->kernels[0].naccess, 0);
    cr_expect_null(kern_meta_access_of(&m->kernels[0], 0, false));
    kern_meta_free(m);
}

static const struct {
    const char *tail;
    const char *msg;
} bad_access[] = {
    {"access 1 read *\n", "metadata line 7: access: parameter 1 of kernel 'k' is not an array "
                          "parameter"},
    {"access 3 read *\n", "metadata line 7: access: parameter 3 of kernel 'k' is not an array "
                          "parameter"},
    {"access 0 reed * *\n", "metadata line 7: access: kind 'reed' (read or write)"},
    {"access 0 read\n", "metadata line 7: access: expected 'access P read|write none|RANGE...' "
                        "(no kind)"},
    {"access 0 read *\n", "metadata line 7: access: 'x' has 2 dimensions: 2 ranges, not 1"},
    {"access 0 read * * *\n", "metadata line 7: access: 'x' has 2 dimensions: text after its "
                              "ranges"},
    {"access 2 read 0\n", "metadata line 7: access: a range needs LO and HI"},
    {"access 2 read (param 1 2\n", "metadata line 7: access: bad SizeExpr '(param 1 2': "},
    {"access 2 read (param 2) 1\n", "metadata line 7: access: SizeExpr (param 2) names 'y' of "
                                    "type f32[], not a scalar integer"},
    {"access 2 read 0  1\n", "metadata line 7: access: a range needs LO and HI"},
    {"access 2 read 0 1x\n", "metadata line 7: access: bad SizeExpr '1x': "},
    {"access 2 read (dim 2 0)x 1\n", "metadata line 7: access: expected a space after "
                                     "'(dim 2 0)'"},
    {"access 2 write none\naccess 2 write none\n",
     "metadata line 8: access: a second 'write' line for parameter 'y'"},
    {"access 2 write none\ngraderror x\n",
     "metadata line 8: 'graderror' must follow a kernel's tasks"},
};

Test(tape_ranges, access_line_errors_name_the_line) {
    for (size_t i = 0; i < sizeof bad_access / sizeof bad_access[0]; i++) {
        char text[1024], err[512];
        /* the task line is line 6: the first access line is line 7 */
        snprintf(text, sizeof text, "%s%send\n", meta_head, bad_access[i].tail);
        kern_meta *m = kern_meta_parse(text, strlen(text), err, sizeof err);
        cr_expect_null(m, "case %zu parsed", i);
        kern_meta_free(m);
        const char *want = bad_access[i].msg;
        cr_expect(strncmp(err, want, strlen(want)) == 0, "case %zu: got '%s', want '%s'", i, err,
                  want);
    }
    /* an access line before any kernel */
    const char *t = "kern-meta 1\naccess 0 read *\nend\n";
    char err[512];
    cr_assert_null(kern_meta_parse(t, strlen(t), err, sizeof err));
    cr_expect_str_eq(err, "metadata line 2: 'access' must follow a kernel's tasks (adstacks "
                          "first, then graderror, then access)");
}
