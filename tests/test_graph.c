/* test_graph.c - graphs (include/kern.h, runtime contract 9 of docs/runtime-contracts.md)
 * on the device of KERN_TEST_BACKEND: a captured forward + backward step replays with the
 * results of the same launches made eagerly; what a graph uses stays alive and in place
 * (released buffers and modules, the adstack heap, which may not grow while a graph
 * lives); device errors of a replay name the kernel and line; misuse gets clear errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../include/kern.h"
#include "../runtime/rt.h"
#include "test_backend.h"

static const char src[] = "kernel step(x: f32[], w: f32[], y: f32[], steps: i32) {\n"
                          "    for i in 0..len(x) {\n"
                          "        var v = x[i];\n"
                          "        for t in 0..steps { v = sin(v) * w[t] + 0.25 * v; }\n"
                          "        y[i] = v;\n"
                          "    }\n"
                          "}\n"
                          "kernel bad(x: f32[], t: i32) {\n"
                          "    for i in 0..len(x) { x[i] = x[t]; }\n"
                          "}\n";

static kern_context *ctx_new(void) {
    kern_context_options o = kern_context_options_default();
    o.backend = kern_test_backend();
    o.threads = 2;
    o.debug = true;
    kern_context *ctx = NULL;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    return ctx;
}

static kern_buffer *buf(kern_context *ctx, int64_t n, const float *data) {
    kern_buffer *b = NULL;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, data, &b), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    return b;
}

enum { N = 1000, T = 16, REPLAYS = 5 };

typedef struct state {
    kern_buffer *x, *w, *y, *gx, *gw, *gy;
} state;

static void state_new(kern_context *ctx, state *s) {
    float x[N], w[T], one[N];
    for (int i = 0; i < N; i++)
        x[i] = 0.002f * (float)i - 1.0f, one[i] = 1.0f;
    for (int t = 0; t < T; t++)
        w[t] = 0.5f + 0.03f * (float)t;
    s->x = buf(ctx, N, x);
    s->w = buf(ctx, T, w);
    s->y = buf(ctx, N, NULL);
    s->gx = buf(ctx, N, NULL);
    s->gw = buf(ctx, T, NULL);
    s->gy = buf(ctx, N, one);
}

static void launch_step(kern_kernel *k, kern_kernel *g, state *s) {
    kern_arg a[4] = {kern_arg_buffer(s->x), kern_arg_buffer(s->w), kern_arg_buffer(s->y),
                     kern_arg_i32(T)};
    cr_assert_eq(kern_launch(k, a, 4), KERN_OK);
    kern_arg ga[7] = {kern_arg_buffer(s->x), kern_arg_buffer(s->w),  kern_arg_buffer(s->y),
                      kern_arg_i32(T),       kern_arg_buffer(s->gx), kern_arg_buffer(s->gw),
                      kern_arg_buffer(s->gy)};
    cr_assert_eq(kern_launch(g, ga, 7), KERN_OK);
}

static void read(kern_buffer *b, float *out, size_t n) {
    cr_assert_eq(kern_buffer_read(b, out, n * sizeof(float)), KERN_OK);
}

Test(graph, replay_matches_eager_launches) {
    kern_context *ctx = ctx_new();
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "g.kern", &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    kern_kernel *k, *g;
    cr_assert_eq(kern_kernel_find(m, "step", &k), KERN_OK);
    cr_assert_eq(kern_kernel_find(m, "step.grad", &g), KERN_OK);
    state e, c;
    state_new(ctx, &e);
    state_new(ctx, &c);
    for (int r = 0; r < REPLAYS; r++)
        launch_step(k, g, &e);

    cr_assert_eq(kern_graph_begin(ctx), KERN_OK);
    cr_assert_eq(kern_graph_begin(ctx), KERN_ERR_ARGUMENT);
    launch_step(k, g, &c); /* recorded, not run */
    kern_graph *gr;
    cr_assert_eq(kern_graph_end(ctx, &gr), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_graph_launch_count(gr), 2);
    float y[N], want[N], gx[N], gxw[N], gw[T], gww[T];
    read(c.y, y, N);
    for (int i = 0; i < N; i++)
        cr_assert_eq(y[i], 0.0f, "a captured launch does not run");
    /* released while the graph lives: kept for it */
    kern_buffer_release(c.gy);
    for (int r = 0; r < REPLAYS; r++)
        cr_assert_eq(kern_graph_launch(gr), KERN_OK, "%s", kern_context_last_error(ctx));
    read(e.y, want, N);
    read(c.y, y, N);
    read(e.gx, gxw, N);
    read(c.gx, gx, N);
    read(e.gw, gww, T);
    read(c.gw, gw, T);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(y[i], want[i], "y[%d]", i);
        cr_assert_eq(gx[i], gxw[i], "x.grad[%d]: %d replays, %d eager step pairs", i, REPLAYS,
                     REPLAYS);
    }
    /* sums of N x REPLAYS = 5000 f32 atomic adds of terms of both signs: the order differs
     * between runs on a GPU (seen: 1.4e-4 apart on an H100 through Vulkan) */
    for (int t = 0; t < T; t++)
        cr_assert(fabsf(gw[t] - gww[t]) <= 1e-3f * (fabsf(gww[t]) + 1.0f), "w.grad[%d] %g vs %g", t,
                  (double)gw[t], (double)gww[t]);

    /* the heap is pinned: a launch needing more fails and says why */
    kern_arg big[7] = {kern_arg_buffer(e.x), kern_arg_buffer(e.w),  kern_arg_buffer(e.y),
                       kern_arg_i32(T),      kern_arg_buffer(e.gx), kern_arg_buffer(e.gw),
                       kern_arg_buffer(e.gy)};
    float wbig[4 * T];
    for (int t = 0; t < 4 * T; t++)
        wbig[t] = 0.5f;
    kern_buffer *bw = buf(ctx, 4 * T, wbig), *bgw = buf(ctx, 4 * T, NULL);
    big[1] = kern_arg_buffer(bw);
    big[3] = kern_arg_i32(4 * T);
    big[5] = kern_arg_buffer(bgw);
    kern_adstack_info info;
    cr_assert_eq(kern_context_adstack_info(ctx, &info), KERN_OK);
    kern_status st = kern_launch(g, big, 7);
    if (info.heap_bytes < info.last_stride * 4 * info.last_slots) {
        cr_assert_eq(st, KERN_ERR_OUT_OF_MEMORY);
        cr_assert(strstr(kern_context_last_error(ctx), "captured graph"), "%s",
                  kern_context_last_error(ctx));
    }
    kern_module_release(m); /* kept for the graph too */
    cr_assert_eq(kern_graph_launch(gr), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_sync(ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_graph_release(gr);
    /* the heap may grow again */
    kern_context_release(ctx);
}

Test(graph, replay_errors_name_the_kernel) {
    kern_context *ctx = ctx_new();
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "g.kern", &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    kern_kernel *b;
    cr_assert_eq(kern_kernel_find(m, "bad", &b), KERN_OK);
    kern_buffer *x = buf(ctx, 8, NULL);
    kern_arg a[2] = {kern_arg_buffer(x), kern_arg_i32(8)}; /* x[8]: out of bounds */
    cr_assert_eq(kern_graph_begin(ctx), KERN_OK);
    cr_assert_eq(kern_launch(b, a, 2), KERN_OK, "captured: %s", kern_context_last_error(ctx));
    kern_graph *gr;
    cr_assert_eq(kern_graph_end(ctx, &gr), KERN_OK, "%s", kern_context_last_error(ctx));
    for (int r = 0; r < 3; r++) {
        kern_status st = kern_graph_launch(gr);
        if (st == KERN_OK)
            st = kern_sync(ctx);
        cr_assert_eq(st, KERN_ERR_DEVICE, "replay %d", r);
        cr_assert(strstr(kern_context_last_error(ctx),
                         "kernel 'bad' (g.kern:9:33): index 8 out of bounds"),
                  "%s", kern_context_last_error(ctx));
        cr_assert_eq(kern_sync(ctx), KERN_OK, "reported once");
    }
    kern_graph_release(gr);
    kern_context_release(ctx);
}

/* Replays piled up without a sync (more than a device graph has copies: the runtime takes
 * new copies, a Vulkan graph records them as they are needed, and waits only when every
 * copy is in flight), each after the one before: the counts come out exact, and a replay
 * after a sync reuses a finished copy. */
Test(graph, many_replays_in_flight_stay_in_order) {
    static const char *inc = "kernel inc(x: f32[], y: f32[]) {\n"
                             "    for i in 0..len(x) { x[i] = x[i] + 1.0; y[i] = y[i] + x[i]; }\n"
                             "}\n";
    kern_context *ctx = ctx_new();
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, inc, strlen(inc), "inc.kern", &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, "inc", &k), KERN_OK);
    kern_buffer *x = buf(ctx, N, NULL), *y = buf(ctx, N, NULL);
    kern_arg a[2] = {kern_arg_buffer(x), kern_arg_buffer(y)};
    cr_assert_eq(kern_graph_begin(ctx), KERN_OK);
    cr_assert_eq(kern_launch(k, a, 2), KERN_OK);
    kern_graph *gr;
    cr_assert_eq(kern_graph_end(ctx, &gr), KERN_OK, "%s", kern_context_last_error(ctx));
    enum { R = 150 }; /* more than RT_GRAPH_MAX_SETS (64) */
    for (int r = 0; r < R; r++)
        cr_assert_eq(kern_graph_launch(gr), KERN_OK, "replay %d: %s", r,
                     kern_context_last_error(ctx));
    cr_assert_eq(kern_sync(ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_graph_launch(gr), KERN_OK, "%s", kern_context_last_error(ctx));
    float xs[N], ys[N];
    read(x, xs, N);
    read(y, ys, N);
    for (int i = 0; i < N; i++) { /* x = R + 1, y = 1 + 2 + ... + (R + 1) */
        cr_assert_eq(xs[i], (float)(R + 1), "x[%d] = %g", i, (double)xs[i]);
        cr_assert_eq(ys[i], (float)((R + 1) * (R + 2) / 2), "y[%d] = %g", i, (double)ys[i]);
    }
    kern_graph_release(gr);
    kern_module_release(m);
    kern_context_release(ctx);
}

Test(graph, misuse) {
    kern_context *ctx = ctx_new();
    kern_graph *gr = (kern_graph *)1;
    cr_assert_eq(kern_graph_end(ctx, &gr), KERN_ERR_ARGUMENT);
    cr_assert_null(gr);
    cr_assert(strstr(kern_context_last_error(ctx), "no capture"));
    cr_assert_eq(kern_graph_begin(NULL), KERN_ERR_ARGUMENT);
    cr_assert_eq(kern_graph_launch(NULL), KERN_ERR_ARGUMENT);
    kern_graph_release(NULL);
    cr_assert_eq(kern_graph_begin(ctx), KERN_OK);
    cr_assert_eq(kern_graph_end(ctx, &gr), KERN_OK);
    cr_assert_eq(kern_graph_launch_count(gr), 0);
    cr_assert_eq(kern_graph_launch(gr), KERN_OK, "an empty graph replays");
    /* graphs are released with their context */
    cr_assert_eq(kern_graph_begin(ctx), KERN_OK); /* a capture left open */
    kern_context_release(ctx);
}

/* A replay whose loop bounds outgrew the captured capacities (the count array changed) is
 * an adstack overflow naming the loop and the captured capacity: nothing is written past
 * the heap. */
Test(graph, replay_beyond_the_captured_capacity_is_an_overflow) {
    static const char rag[] = "kernel rag(c: i32[], x: f32[], y: f32[]) {\n"
                              "    for i in 0..len(c) {\n"
                              "        var v = x[i];\n"
                              "        for t in 0..c[i] { v = sin(v) + 0.5 * v; }\n"
                              "        y[i] = v;\n"
                              "    }\n"
                              "}\n";
    kern_context *ctx = ctx_new();
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, rag, strlen(rag), "rag.kern", &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    kern_kernel *g;
    cr_assert_eq(kern_kernel_find(m, "rag.grad", &g), KERN_OK);
    int32_t c[4] = {2, 3, 1, 3};
    float x[4] = {0.1f, 0.2f, 0.3f, 0.4f}, one[4] = {1, 1, 1, 1};
    int64_t n = 4;
    kern_buffer *bc, *bx = buf(ctx, 4, x), *by = buf(ctx, 4, NULL), *gx = buf(ctx, 4, NULL),
                     *gy = buf(ctx, 4, one);
    cr_assert_eq(kern_buffer_create(ctx, KERN_I32, 1, &n, c, &bc), KERN_OK);
    kern_arg ga[5] = {kern_arg_buffer(bc), kern_arg_buffer(bx), kern_arg_buffer(by),
                      kern_arg_buffer(gx), kern_arg_buffer(gy)};
    cr_assert_eq(kern_graph_begin(ctx), KERN_OK);
    cr_assert_eq(kern_launch(g, ga, 5), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_graph *gr;
    cr_assert_eq(kern_graph_end(ctx, &gr), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_graph_launch(gr), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_sync(ctx), KERN_OK, "within the captured capacity: %s",
                 kern_context_last_error(ctx));
    c[0] = 9; /* beyond the captured capacity of 3 */
    cr_assert_eq(kern_buffer_write(bc, c, sizeof c), KERN_OK);
    kern_status st = kern_graph_launch(gr);
    if (st == KERN_OK)
        st = kern_sync(ctx);
    cr_assert_eq(st, KERN_ERR_DEVICE);
    cr_assert(strstr(kern_context_last_error(ctx),
                     "kernel 'rag.grad': adstack overflow in the loop at rag.kern:4:9") &&
                  strstr(kern_context_last_error(ctx), "the capacity is 3"),
              "%s", kern_context_last_error(ctx));
    kern_graph_release(gr);
    kern_context_release(ctx);
}
