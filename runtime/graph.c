/* graph.c - graphs: launches captured once and replayed many times (include/kern.h,
 * runtime contract 9 of docs/runtime-contracts.md).
 *
 * Capture: kern_graph_begin sets ctx->capture; kern_launch then checks and sizes each
 * launch as usual (the adstack heap is reserved for it) and hands it to rt_graph_record,
 * which keeps a deep copy (arguments, task counts, adstack layout) and pins what it uses:
 * its buffers and module (pins: a release while pinned only marks them; the graph frees
 * them with itself). kern_graph_end asks the device to build a graph of the launches
 * (graph_build: a CUDA graph) and pins the adstack heap (ctx->adheap.pins: it may not grow
 * or move while a graph lives, rt_adstack_reserve refuses instead).
 *
 * Replay: errors of earlier work are reported first (and the graph is not replayed); with
 * a device graph, a replay takes a copy (each with its own error records) whose previous
 * replay completed, else one not used yet, and waits only when every copy is in flight
 * (pick_set),
 * its records are zeroed, and one graph launch is one completion point whose pending
 * entry names the graph and copy (rt_collect reads those records); without one, each launch is submitted as kern_launch would. Every
 * launch uses the heap at the address it had when the capture ended. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static void *dup_mem(const void *p, size_t n) {
    void *d = malloc(n ? n : 1);
    if (d && n)
        memcpy(d, p, n);
    return d;
}

static void free_ready(rt_ready *r) {
    free(r->la);
    free(r->bufs);
    free(r->counts);
    free(r->layout);
}

kern_status rt_graph_record(kern_graph *g, const rt_ready *r) {
    kern_context *ctx = g->ctx;
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 8;
        rt_ready *nl = realloc(g->launches, (size_t)cap * sizeof *nl);
        if (!nl)
            return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory for a graph");
        g->launches = nl;
        g->cap = cap;
    }
    const kern_meta_kernel *mk = r->k->meta;
    rt_ready c = *r;
    c.la = dup_mem(r->la, (size_t)r->nargs * sizeof *r->la);
    c.bufs = dup_mem(r->bufs, (size_t)r->nargs * sizeof *r->bufs);
    c.counts = dup_mem(r->counts, (size_t)mk->ntasks * sizeof *r->counts);
    c.layout = dup_mem(r->layout, (size_t)mk->nadstacks * 2 * sizeof *r->layout);
    if (!c.la || !c.bufs || !c.counts || !c.layout) {
        free_ready(&c);
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory for a graph");
    }
    for (int i = 0; i < c.nargs; i++)
        if (c.bufs[i])
            c.bufs[i]->pins++;
    c.k->mod->pins++;
    g->launches[g->n++] = c;
    return KERN_OK;
}

kern_status kern_graph_begin(kern_context *ctx) {
    if (!ctx || !rt_handle_check(ctx, RT_H_CONTEXT, "kern_graph_begin"))
        return KERN_ERR_ARGUMENT;
    rt_clear_error(ctx);
    if (!ctx->dev)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "the context was not created successfully");
    if (ctx->capture)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "kern_graph_begin: a capture is already under way (kern_graph_end it "
                        "first)");
    kern_graph *g = calloc(1, sizeof *g);
    if (!g)
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory for a graph");
    g->ctx = ctx;
    rt_list_init(&g->link);
    rt_list_push(&ctx->graphs, &g->link);
    ctx->capture = g;
    return KERN_OK;
}

/* Unpins what g pinned; frees what was released meanwhile. */
static void graph_destroy(kern_graph *g, bool device_idle) {
    kern_context *ctx = g->ctx;
    rt_device *d = ctx->dev;
    if (g->dev && d->ops->graph_free)
        d->ops->graph_free(d, g->dev);
    if (g->ended && ctx->adheap.pins > 0)
        ctx->adheap.pins--;
    for (int i = 0; i < g->n; i++) {
        rt_ready *r = &g->launches[i];
        for (int a = 0; a < r->nargs; a++) {
            kern_buffer *b = r->bufs[a];
            if (b && --b->pins == 0 && b->released)
                rt_buffer_destroy(b, device_idle);
        }
        kern_module *m = r->k->mod;
        if (--m->pins == 0 && m->released)
            rt_module_destroy(m);
        free_ready(r);
    }
    free(g->launches);
    rt_list_remove(&g->link);
    if (ctx->capture == g)
        ctx->capture = NULL;
    rt_handle_free(g);
}

kern_status kern_graph_end(kern_context *ctx, kern_graph **out) {
    if (!ctx || !rt_handle_check(ctx, RT_H_CONTEXT, "kern_graph_end"))
        return KERN_ERR_ARGUMENT;
    rt_clear_error(ctx);
    if (!out)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_graph_end: out is NULL");
    *out = NULL;
    kern_graph *g = ctx->capture;
    if (!g)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_graph_end: no capture is under way");
    ctx->capture = NULL;
    g->ended = true;
    ctx->adheap.pins++;
    rt_device *d = ctx->dev;
    if (d->ops->graph_build && g->n > 0) {
        rt_launch *ls = calloc((size_t)g->n, sizeof *ls);
        if (!ls) {
            graph_destroy(g, false);
            return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory for a graph");
        }
        for (int i = 0; i < g->n; i++) {
            const rt_ready *r = &g->launches[i];
            const kern_meta_kernel *mk = r->k->meta;
            ls[i] = (rt_launch){
                .name = mk->name,
                .meta = mk,
                .kernel = r->k->handle,
                .tasks = mk->tasks,
                .ntasks = mk->ntasks,
                .args = r->la,
                .nargs = r->nargs,
                .counts = r->counts,
                .ad_heap = mk->nadstacks > 0 ? ctx->adheap.mem : NULL,
                .ad_slots = r->slots,
                .ad_stride = r->stride,
                .ad_layout = mk->nadstacks > 0 ? r->layout : NULL,
            };
        }
        char err[1024];
        kern_status s =
            d->ops->graph_build(d, ls, g->n, &g->dev, &g->nsets, &g->recs, err, sizeof err);
        if (s == KERN_OK && (g->nsets < 1 || g->nsets > RT_GRAPH_MAX_SETS))
            kern_unreachable("graph_build: bad number of copies");
        free(ls);
        if (s != KERN_OK) {
            graph_destroy(g, false);
            return rt_error(ctx, s,
                            "cannot build a graph of the captured launches on device %s: %s",
                            d->ops->name, err);
        }
    }
    rt_handle_add(g, RT_H_GRAPH, ctx);
    *out = g;
    return KERN_OK;
}

int kern_graph_launch_count(const kern_graph *g) {
    return g && rt_handle_check(g, RT_H_GRAPH, "kern_graph_launch_count") ? g->n : 0;
}

int rt_graph_errors(const kern_graph *g, int set, char *msg, size_t size) {
    int n = 0;
    const kern_err_record *recs = g->recs ? g->recs + (size_t)set * (size_t)g->n : NULL;
    for (int i = 0; recs && i < g->n; i++) {
        if (recs[i].code == 0)
            continue;
        if (n++ == 0)
            rt_format_device_error(msg, size, g->launches[i].k, &recs[i]);
    }
    return n;
}

static kern_status graph_launch_(kern_graph *g);

kern_status kern_graph_launch(kern_graph *g) {
    if (!g || !rt_handle_check(g, RT_H_GRAPH, "kern_graph_launch"))
        return KERN_ERR_ARGUMENT;
    if (!rt_enter(g->ctx, "kern_graph_launch"))
        return KERN_ERR_ARGUMENT;
    kern_status s = graph_launch_(g);
    rt_leave(g->ctx);
    return s;
}

/* *set: the copy of g that the next replay uses: one whose last replay completed (its
 * records were collected: `done` was polled before the collection), else a copy not used
 * yet (the device records it then: a Vulkan graph grows only as far as replays pile up),
 * else, all in flight, the oldest, after waiting for it. */
static kern_status pick_set(kern_graph *g, uint64_t done, int *set) {
    kern_context *ctx = g->ctx;
    rt_device *d = ctx->dev;
    int oldest = 0;
    for (int c = 0; c < g->used; c++) {
        if (g->set_point[c] <= done) {
            *set = c;
            return KERN_OK;
        }
        if (g->set_point[c] < g->set_point[oldest])
            oldest = c;
    }
    if (g->used < g->nsets) {
        *set = g->used++;
        return KERN_OK;
    }
    char err[512];
    kern_status s = d->ops->wait(d, g->set_point[oldest], err, sizeof err);
    if (s != KERN_OK)
        return rt_error(ctx, s, "device %s: %s", d->ops->name, err);
    if ((s = rt_collect(ctx, true)) != KERN_OK)
        return rt_error(ctx, s, "%s (observed before replaying a graph, which was not replayed)",
                        ctx->msg);
    *set = oldest;
    return KERN_OK;
}

static kern_status graph_launch_(kern_graph *g) {
    kern_context *ctx = g->ctx;
    rt_clear_error(ctx);
    rt_device *d = ctx->dev;
    char err[512];
    kern_status s;
    if (!g->ended)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "kern_graph_launch: the graph is still being captured (kern_graph_end)");
    if (ctx->capture)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "kern_graph_launch: a capture is under way; graphs are not captured");
    uint64_t done = d->ops->poll(d); /* before the collection: what it has surely seen */
    if ((s = rt_collect(ctx, true)) != KERN_OK)
        return rt_error(ctx, s, "%s (observed before replaying a graph, which was not replayed)",
                        ctx->msg);
    rt_retire_poll(&ctx->retired, d);
    if (!g->dev) { /* launch by launch */
        for (int i = 0; i < g->n; i++)
            if ((s = rt_submit(ctx, &g->launches[i])) != KERN_OK)
                return s;
        g->last_point = d->submitted;
        return rt_collect(ctx, true);
    }
    int set = 0;
    if ((s = pick_set(g, done, &set)) != KERN_OK)
        return s;
    memset(g->recs + (size_t)set * (size_t)g->n, 0, (size_t)g->n * sizeof *g->recs);
    rt_pending *p = rt_pending_new(ctx);
    if (!p)
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory");
    p->graph = g;
    p->set = set;
    if ((s = d->ops->graph_launch(d, g->dev, set, &p->point, err, sizeof err)) != KERN_OK) {
        free(p);
        return rt_error(ctx, s, "cannot replay a graph: %s", err);
    }
    ctx->pending[ctx->npending++] = p;
    g->last_point = g->set_point[set] = p->point;
    for (int i = 0; i < g->n; i++) {
        rt_ready *r = &g->launches[i];
        for (int a = 0; a < r->nargs; a++) {
            kern_buffer *b = r->bufs[a];
            if (!b)
                continue;
            b->last_use = p->point;
            if (!r->k->meta->params[a].readonly)
                b->written = ++ctx->write_clock;
        }
        r->k->mod->last_use = p->point;
        if (r->k->meta->nadstacks > 0)
            ctx->adheap.last_use = p->point;
    }
    return rt_collect(ctx, true);
}

void kern_graph_release(kern_graph *g) {
    if (!g || !rt_handle_check(g, RT_H_GRAPH, "kern_graph_release"))
        return;
    rt_handle_released(g);
    kern_context *ctx = g->ctx;
    rt_clear_error(ctx);
    char err[512];
    rt_device *d = ctx->dev;
    if (g->last_point > d->ops->poll(d) &&
        d->ops->wait(d, g->last_point, err, sizeof err) != KERN_OK)
        rt_error(ctx, KERN_ERR_DEVICE, "device %s: %s", d->ops->name, err);
    rt_collect(ctx, false); /* its errors name its kernels: format them now */
    graph_destroy(g, false);
}

void rt_graphs_fini(kern_context *ctx) {
    while (ctx->graphs.next != &ctx->graphs)
        graph_destroy((kern_graph *)ctx->graphs.next, true);
}
