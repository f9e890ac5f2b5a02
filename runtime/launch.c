/* launch.c - kern_launch: typed arguments checked against the kernel's signature, the
 * submission to the device, and the observation of completed launches.
 *
 * Order of a launch: check every argument (count, then per parameter: kind, dtype, rank)
 * without side effects; collect launches that completed earlier and return a device
 * error among them without submitting (the message names the kernel that faulted); poll
 * the retirement queue; compute each task's work-item count where the host can
 * (rt_task_count) and, for a kernel with adstacks, size the adstack heap (adstack.h);
 * submit; stamp the buffers, the module and the heap with the completion point; collect
 * again, which on the CPU observes this launch's own error record. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static kern_status arg_error(kern_kernel *k, const kern_meta_param *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static kern_status arg_error(kern_kernel *k, const kern_meta_param *p, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return rt_error(k->mod->ctx, KERN_ERR_ARGUMENT, "kernel '%s', parameter '%s' (%s): %s",
                    k->meta->name, p->name, p->view ? p->view : p->type->name, what);
}

static kern_status check_arg(kern_kernel *k, int i, const kern_arg *a, rt_launch_arg *out) {
    const kern_meta_param *p = &k->meta->params[i];
    kern_dtype want = rt_dtype_of(p->type);
    memset(out, 0, sizeof *out);
    if (p->type->kind == TY_ARRAY) {
        if (a->kind == KERN_ARG_SCALAR)
            return arg_error(k, p, "needs a buffer, got a scalar %s",
                             kern_dtype_name(a->dtype) ? kern_dtype_name(a->dtype) : "?");
        if (a->kind != KERN_ARG_BUFFER)
            return arg_error(k, p, "invalid argument kind %d", (int)a->kind);
        const kern_buffer *b = a->u.buffer;
        if (!b)
            return arg_error(k, p, "the buffer is NULL");
        if (!rt_handle_check(b, RT_H_BUFFER, "kern_launch"))
            return arg_error(k, p,
                             "the buffer was released, or is not a buffer "
                             "(KERN_RUNTIME_CHECKS)");
        if (b->ctx != k->mod->ctx)
            return arg_error(k, p, "the buffer belongs to another context");
        if (b->dtype != want)
            return arg_error(k, p, "buffer dtype is %s, expected %s", kern_dtype_name(b->dtype),
                             kern_dtype_name(want));
        if (b->rank != p->type->rank)
            return arg_error(k, p, "buffer rank is %d, expected %d", b->rank, p->type->rank);
        for (int j = 0; j < p->ntail; j++) {
            int d = b->rank - p->ntail + j;
            if (b->shape[d] != p->tail[j]) {
                char need[48];
                if (p->ntail == 2)
                    snprintf(need, sizeof need, "two extents are %lld x %lld",
                             (long long)p->tail[0], (long long)p->tail[1]);
                else
                    snprintf(need, sizeof need, "extent is %lld", (long long)p->tail[0]);
                return arg_error(k, p,
                                 "a %s is passed as an array whose last %s; dimension %d of the "
                                 "buffer is %lld",
                                 p->view, need, d, (long long)b->shape[d]);
            }
        }
        out->is_array = true;
        out->mem = b->mem;
        memcpy(out->shape, b->shape, sizeof out->shape);
        return KERN_OK;
    }
    if (a->kind == KERN_ARG_BUFFER)
        return arg_error(k, p, "needs a scalar %s, got a buffer", kern_dtype_name(want));
    if (a->kind != KERN_ARG_SCALAR)
        return arg_error(k, p, "invalid argument kind %d", (int)a->kind);
    if (!kern_dtype_name(a->dtype))
        return arg_error(k, p, "invalid scalar dtype %d", (int)a->dtype);
    if (a->dtype != want)
        return arg_error(k, p, "scalar dtype is %s, expected %s", kern_dtype_name(a->dtype),
                         kern_dtype_name(want));
    switch (want) {
    case KERN_BOOL: out->scalar.b = a->u.b ? 1 : 0; break;
    case KERN_I32: out->scalar.i32 = a->u.i32; break;
    case KERN_U32: out->scalar.u32 = a->u.u32; break;
    case KERN_I64: out->scalar.i64 = a->u.i64; break;
    case KERN_F32: out->scalar.f32 = a->u.f32; break;
    case KERN_F64: out->scalar.f64 = a->u.f64; break;
    case KERN_I8: out->scalar.i8 = a->u.i8; break;
    case KERN_U8: out->scalar.u8 = a->u.u8; break;
    case KERN_I16: out->scalar.i16 = a->u.i16; break;
    case KERN_U16: out->scalar.u16 = a->u.u16; break;
    case KERN_U64: out->scalar.u64 = a->u.u64; break;
    case KERN_F16:
    case KERN_BF16: return arg_error(k, p, "no scalar parameters of dtype %s", kern_dtype_name(want));
    }
    return KERN_OK;
}

/* Whether e reads elements of parameter p. */
static bool reads_param(const sz_expr *e, int64_t p) {
    if (e->op == SZ_READ && e->v == p)
        return true;
    for (int i = 0; i < e->nkids; i++)
        if (reads_param(e->kids[i], p))
            return true;
    return false;
}

/* Whether the sizing kept in z holds for this launch of a kernel whose adstack capacity is
 * e: the same arguments, and none of the arrays e reads written since. */
static bool sized_still(const rt_sized *z, const sz_expr *e, const kern_arg *args,
                        const rt_launch_arg *la, int n) {
    if (!z->valid || z->nargs != n)
        return false;
    for (int i = 0; i < n; i++) {
        const rt_launch_arg *a = &la[i], *b = &z->args[i];
        if (a->is_array != b->is_array)
            return false;
        if (a->is_array) {
            if (a->mem != b->mem || memcmp(a->shape, b->shape, sizeof a->shape) != 0 ||
                (args[i].u.buffer->written != z->written[i] && reads_param(e, i)))
                return false;
        } else if (memcmp(&a->scalar, &b->scalar, sizeof a->scalar) != 0) {
            return false;
        }
    }
    return true;
}

static kern_status sized_keep(rt_sized *z, const kern_arg *args, const rt_launch_arg *la, int n,
                              int64_t value) {
    rt_launch_arg *na = realloc(z->args, (size_t)(n ? n : 1) * sizeof *na);
    if (na)
        z->args = na;
    uint64_t *nw = realloc(z->written, (size_t)(n ? n : 1) * sizeof *nw);
    if (nw)
        z->written = nw;
    if (!na || !nw) {
        z->valid = false;
        return KERN_ERR_OUT_OF_MEMORY;
    }
    memcpy(z->args, la, (size_t)n * sizeof *la);
    for (int i = 0; i < n; i++)
        z->written[i] = la[i].is_array ? args[i].u.buffer->written : 0;
    z->nargs = n;
    z->value = value;
    z->valid = true;
    return KERN_OK;
}

/* The capacities of k's adstacks whose SizeExprs read device memory, from the device's
 * sizer kernels (runtime contract 3, docs/runtime-contracts.md), or from the last sizing
 * when no argument changed since; known[s] = RT_ADSTACK_UNKNOWN for the stacks the host
 * evaluates. */
static kern_status size_on_device(kern_kernel *k, const kern_arg *args, const rt_launch_arg *la,
                                  int64_t *known) {
    kern_context *ctx = k->mod->ctx;
    const kern_meta_kernel *mk = k->meta;
    rt_device *d = ctx->dev;
    char err[1024], loc[1024];
    for (int s = 0; s < mk->nadstacks; s++)
        known[s] = RT_ADSTACK_UNKNOWN;
    if (!d->ops->size_adstack)
        return rt_error(ctx, KERN_ERR_UNSUPPORTED,
                        "kernel '%s': an adstack capacity reads array elements, and device %s "
                        "can neither read them on the host nor size on the device",
                        mk->name, d->ops->name);
    if (mk->nadstacks <= 0)
        return KERN_OK;
    if (!k->sized && !(k->sized = calloc((size_t)mk->nadstacks, sizeof *k->sized)))
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory");
    for (int s = 0; s < mk->nadstacks; s++) {
        const kern_meta_adstack *a = &mk->adstacks[s];
        if (!sz_reads_memory(a->expr))
            continue;
        rt_sized *z = &k->sized[s];
        if (sized_still(z, a->expr, args, la, mk->nparams)) {
            known[s] = z->value;
            continue;
        }
        int64_t res[4] = {0};
        kern_status st = d->ops->size_adstack(d, k->handle, mk, s, la, res, err, sizeof err);
        ctx->device_sizings++;
        if (st != KERN_OK)
            return rt_error(ctx, st, "kernel '%s': sizing the adstack on device %s: %s", mk->name,
                            d->ops->name, err);
        if (res[1] != 0) {
            rt_format_loc(loc, sizeof loc, k->mod->meta, a->line, a->col);
            if (res[1] == 1)
                snprintf(err, sizeof err,
                         "SizeExpr reads parameter %lld ('%s') out of bounds: index %lld",
                         (long long)res[2],
                         res[2] >= 0 && res[2] < mk->nparams ? mk->params[res[2]].name : "?",
                         (long long)res[3]);
            else
                snprintf(err, sizeof err, "%s",
                         res[1] == 2 ? "division by zero" : "the value overflows int64");
            return rt_error(ctx, KERN_ERR_ARGUMENT,
                            "kernel '%s': cannot size the adstack of the loop at %s (capacity "
                            "%s): %s (evaluated on device %s)",
                            mk->name, loc, a->cap, err, d->ops->name);
        }
        /* INT64_MIN: the outermost range was empty, which is 0 */
        int64_t v = res[0] == INT64_MIN ? 0 : res[0];
        if (sized_keep(z, args, la, mk->nparams, v) != KERN_OK)
            return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory");
        known[s] = v;
    }
    return KERN_OK;
}

/* What a launch of k needs computed on the host from its arguments: per task the
 * work-item count when the host knows it (counts, -1 otherwise), and for a kernel with
 * adstacks the layout (2 x nadstacks entries), a slot's bytes and the slots, with the
 * heap reserved (adstack.h). Array elements that a SizeExpr or an extent reads are read
 * on the host only where the device's memory is host memory, after waiting for the
 * launches that may write them. */
static kern_status size_launch(kern_kernel *k, const kern_arg *args, const rt_launch_arg *la,
                               int64_t want_slots, int64_t *counts, int64_t *layout,
                               int64_t *stride, int64_t *slots, size_t *bytes) {
    kern_context *ctx = k->mod->ctx;
    const kern_meta_kernel *mk = k->meta;
    rt_device *d = ctx->dev;
    char err[1024];
    kern_status s = KERN_OK;
    sz_arg small[16];
    sz_arg *sa = small;
    if (mk->nparams > 16 && !(sa = calloc((size_t)mk->nparams, sizeof *sa)))
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory");
    bool ad_reads = false, reads = false;
    for (int i = 0; i < mk->nadstacks; i++)
        ad_reads |= sz_reads_memory(mk->adstacks[i].expr);
    reads = ad_reads;
    for (int t = 0; t < mk->ntasks; t++)
        for (int e = 0; e < mk->tasks[t].ndims && e < KERN_META_MAX_TASK_DIMS; e++)
            reads |= mk->tasks[t].extent_expr[e] && sz_reads_memory(mk->tasks[t].extent_expr[e]);
    int64_t known_small[16];
    int64_t *known = known_small;
    if (ad_reads && !d->host_memory) {
        if (mk->nadstacks > 16 && !(known = calloc((size_t)mk->nadstacks, sizeof *known))) {
            s = rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory");
            goto cleanup;
        }
        if ((s = size_on_device(k, args, la, known)) != KERN_OK)
            goto cleanup;
    }
    for (int i = 0; reads && d->host_memory && i < mk->nparams; i++) {
        /* the host reads the arrays: wait for the launches that may write them */
        if (args[i].kind != KERN_ARG_BUFFER || args[i].u.buffer->last_use <= d->ops->poll(d))
            continue;
        if ((s = d->ops->wait(d, args[i].u.buffer->last_use, err, sizeof err)) != KERN_OK) {
            s = rt_error(ctx, s, "device %s: %s", d->ops->name, err);
            goto cleanup;
        }
    }
    rt_adstack_args(mk, la, d->host_memory, sa);
    int64_t max_items = 0;
    for (int t = 0; t < mk->ntasks; t++) {
        counts[t] = rt_task_count(&mk->tasks[t], sa, mk->nparams);
        if (counts[t] == RT_COUNT_OVERFLOW) {
            char loc[512];
            rt_format_loc(loc, sizeof loc, k->mod->meta, mk->tasks[t].line, mk->tasks[t].col);
            s = rt_error(ctx, KERN_ERR_ARGUMENT,
                         "kernel '%s': the parallel for at %s has more iterations than a 64-bit "
                         "count holds (the length of a range, hi - lo, or the product of the "
                         "ranges' lengths overflows int64)",
                         mk->name, loc);
            goto cleanup;
        }
        if (counts[t] < 0 || max_items < 0)
            max_items = -1;
        else if (counts[t] > max_items)
            max_items = counts[t];
    }
    *slots = 0;
    *stride = 0;
    if (mk->nadstacks == 0)
        goto cleanup;
    *slots = want_slots > 0 ? want_slots : d->ops->ad_slots ? d->ops->ad_slots(d, max_items) : 1;
    if (*slots < 1)
        *slots = 1;
    if ((s = rt_adstack_layout_known(k->mod->meta, mk, sa, mk->nparams,
                                     ad_reads && !d->host_memory ? known : NULL, d->ad_slot_major,
                                     *slots, layout, stride, bytes, err, sizeof err)) != KERN_OK)
        s = rt_error(ctx, s, "%s", err);
cleanup:
    if (sa != small)
        free(sa);
    if (known != known_small)
        free(known);
    return s;
}

rt_pending *rt_pending_new(kern_context *ctx) {
    if (ctx->npending == ctx->cappending) {
        int cap = ctx->cappending ? ctx->cappending * 2 : 16;
        rt_pending **np = realloc(ctx->pending, (size_t)cap * sizeof *np);
        if (!np)
            return NULL;
        ctx->pending = np;
        ctx->cappending = cap;
    }
    return calloc(1, sizeof(rt_pending));
}

kern_status rt_submit(kern_context *ctx, const rt_ready *r) {
    kern_kernel *k = r->k;
    const kern_meta_kernel *mk = k->meta;
    char err[512];
    rt_pending *p = rt_pending_new(ctx);
    if (!p)
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory");
    p->kernel = k;
    rt_launch l = {
        .name = mk->name,
        .meta = mk,
        .kernel = k->handle,
        .tasks = mk->tasks,
        .ntasks = mk->ntasks,
        .args = r->la,
        .nargs = r->nargs,
        .err = &p->rec,
        .counts = r->counts,
        .ad_heap = mk->nadstacks > 0 ? ctx->adheap.mem : NULL,
        .ad_slots = r->slots,
        .ad_stride = r->stride,
        .ad_layout = mk->nadstacks > 0 ? r->layout : NULL,
    };
    kern_status s = ctx->dev->ops->launch(ctx->dev, &l, &p->point, err, sizeof err);
    if (s != KERN_OK) {
        free(p);
        return rt_error(ctx, s, "cannot launch kernel '%s': %s", mk->name, err);
    }
    ctx->pending[ctx->npending++] = p;
    for (int i = 0; i < r->nargs; i++) {
        kern_buffer *b = r->bufs[i];
        if (!b)
            continue;
        b->last_use = p->point;
        if (!mk->params[i].readonly) /* it may have been written: device sizings are stale */
            b->written = ++ctx->write_clock;
    }
    k->mod->last_use = p->point;
    if (mk->nadstacks > 0)
        ctx->adheap.last_use = p->point;
    return KERN_OK;
}

/* ---- the memory budget (docs/autodiff.md, "Memory budget and checkpointing") ---------- */

/* A k larger than any trip count: the variant's segment stacks then size as K.grad's. */
enum { RT_CKPT_PROBE = 1 << 30 };
/* The expected cost of a checkpointed K.grad against storing every iteration: one more
 * forward pass over each checkpointed loop (measured in bench/gpu-bench). */
#define RT_RECOMPUTE_COST 1.3

/* K.grad.ckpt of K.grad k, when its module has one whose parameters extend k's by i64
 * scalars (looked up once). */
static kern_kernel *ckpt_of(kern_kernel *k) {
    if (k->ckpt_looked)
        return k->ckpt;
    k->ckpt_looked = true;
    const kern_meta_kernel *mk = k->meta;
    size_t n = strlen(mk->name);
    if (n < 6 || strcmp(mk->name + n - 5, ".grad") != 0)
        return NULL;
    kern_kernel *v = NULL;
    if (k->mod->lazy_parent) { /* a JIT module's gradient: the variant is built now */
        char name[KERN_MAX_NAME + 32];
        snprintf(name, sizeof name, "%s.ckpt", mk->name);
        v = rt_module_lazy_ckpt(k->mod->lazy_parent, name);
    }
    for (int i = 0; !v && i < k->mod->nkernels; i++) {
        const kern_meta_kernel *c = k->mod->kernels[i].meta;
        if (!strncmp(c->name, mk->name, n) && !strcmp(c->name + n, ".ckpt"))
            v = &k->mod->kernels[i];
    }
    if (!v && k->mod->lazy) { /* kernc run's module: K.grad.ckpt from the source, now */
        char name[KERN_MAX_NAME + 32];
        snprintf(name, sizeof name, "%s.ckpt", mk->name);
        v = rt_module_lazy_ckpt(k->mod, name);
    }
    const kern_meta_kernel *c = v ? v->meta : NULL;
    bool ok = c && c->nparams > mk->nparams;
    for (int p = 0; ok && p < c->nparams; p++)
        ok = p < mk->nparams ? !strcmp(c->params[p].type->name, mk->params[p].type->name)
                             : c->params[p].type->kind == TY_I64;
    k->ckpt = ok ? v : NULL;
    return k->ckpt;
}

static bool uses_param(const sz_expr *e, int64_t p) {
    if (e->op == SZ_PARAM && e->v == p)
        return true;
    for (int i = 0; i < e->nkids; i++)
        if (uses_param(e->kids[i], p))
            return true;
    return false;
}

/* The most slots (a multiple of the device's granule g, at most full) whose heap of
 * `stride` bytes each fits in budget; 0 when not even g fit. */
static int64_t fit_slots(int64_t budget, int64_t stride, int64_t g, int64_t full) {
    int64_t n = stride > 0 ? budget / stride : full;
    n = n / g * g;
    return n > full ? full : n;
}

typedef struct ad_option {
    kern_kernel *k; /* NULL: not possible */
    int strategy;
    int64_t slots;
    size_t bytes;
    double cost;
    int64_t stride; /* > 0: sized already (store all: layout and counts hold its sizing) */
} ad_option;

/* K.grad.ckpt's arguments (K.grad's, then its ckpt.kN) and room for its layout and task
 * counts; NULL arrays until a launch needs the variant. */
typedef struct ad_variant {
    kern_kernel *k;
    kern_arg *args;
    rt_launch_arg *la;
    kern_buffer **bufs;
    int64_t *layout, *counts;
} ad_variant;

static void variant_free(ad_variant *v) {
    free(v->args);
    free(v->la);
    free(v->bufs);
    free(v->layout);
    free(v->counts);
}

static bool variant_alloc(ad_variant *v, kern_kernel *k, const kern_arg *args,
                          const rt_launch_arg *la, kern_buffer *const *bufs, int nargs) {
    const kern_meta_kernel *mv = v->k->meta;
    size_t np = (size_t)mv->nparams;
    v->args = calloc(np, sizeof *v->args);
    v->la = calloc(np, sizeof *v->la);
    v->bufs = calloc(np, sizeof *v->bufs);
    v->layout = calloc(2 * (size_t)mv->nadstacks + 2, sizeof *v->layout);
    v->counts = calloc((size_t)mv->ntasks + 1, sizeof *v->counts);
    if (!v->args || !v->la || !v->bufs || !v->layout || !v->counts)
        return false;
    memcpy(v->args, args, (size_t)nargs * sizeof *args);
    memcpy(v->la, la, (size_t)nargs * sizeof *la);
    memcpy(v->bufs, bufs, (size_t)nargs * sizeof *bufs);
    (void)k;
    return true;
}

static int64_t isqrt_up(int64_t n) {
    int64_t r = 1;
    while (r < 3037000499 && r * r < n)
        r++;
    return r;
}

/* The checkpoint lengths of variant v (parameters nargs.. of la): each loop's k =
 * ceil(sqrt(N)) for its trip count N (what stores the least: N / k checkpoints plus a
 * segment of k), from a sizing with k beyond every N. */
static kern_status ckpt_lengths(kern_kernel *v, kern_arg *args, rt_launch_arg *la, int nargs,
                                int64_t slots, int64_t *counts, int64_t *layout) {
    const kern_meta_kernel *mv = v->meta;
    for (int j = nargs; j < mv->nparams; j++) {
        memset(&la[j], 0, sizeof la[j]);
        la[j].scalar.i64 = RT_CKPT_PROBE;
        args[j] = kern_arg_i64(RT_CKPT_PROBE);
    }
    int64_t stride, sl;
    size_t bytes;
    kern_status s = size_launch(v, args, la, slots, counts, layout, &stride, &sl, &bytes);
    if (s != KERN_OK)
        return s;
    for (int j = nargs; j < mv->nparams; j++) {
        int64_t n = 0;
        for (int a = 0; a < mv->nadstacks; a++)
            if (mv->adstacks[a].expr && uses_param(mv->adstacks[a].expr, j) &&
                layout[2 * a + 1] > n)
                n = layout[2 * a + 1];
        la[j].scalar.i64 = isqrt_up(n);
        args[j] = kern_arg_i64(la[j].scalar.i64);
    }
    return KERN_OK;
}

/* What a launch of k (with adstacks) runs: K.grad storing everything for the device's
 * slots when that fits the budget; else the cheapest of K.grad for fewer slots and
 * K.grad.ckpt (for all slots or fewer) that fits; ctx->opts.ad_strategy forces one. The
 * arrays args, la hold room for K.grad.ckpt's parameters after k's nargs. */
static kern_status plan_adstacks(kern_kernel *k, const kern_arg *args, const rt_launch_arg *la,
                                 kern_buffer *const *bufs, int nargs, int64_t *counts,
                                 int64_t *layout, ad_variant *var, ad_option *out) {
    kern_context *ctx = k->mod->ctx;
    rt_device *d = ctx->dev;
    rt_adstack_heap *h = &ctx->adheap;
    int forced = ctx->opts.ad_strategy;
    int64_t full, stride;
    size_t store;
    kern_status s = size_launch(k, args, la, 0, counts, layout, &stride, &full, &store);
    if (s != KERN_OK)
        return s;
    int64_t budget = ctx->opts.ad_memory_budget > 0 ? ctx->opts.ad_memory_budget
                     : store <= h->bytes            ? INT64_MAX
                                                    : rt_ad_budget(ctx);
    if (budget < INT64_MAX) /* what the tapes keep of overwritten ranges counts too */
        budget -= rt_tapes_saved(ctx);
    h->last_store_all = (int64_t)store;
    h->last_budget = budget;
    *out = (ad_option){k, KERN_AD_STORE_ALL, full, store, 1.0, stride > 0 ? stride : 0};
    if (forced == KERN_AD_STORE_ALL || (forced == KERN_AD_AUTO && (int64_t)store <= budget))
        return KERN_OK;
    int64_t g = d->host_memory || !d->ops->ad_slots ? 1 : d->ops->ad_slots(d, 1);
    if (g < 1)
        g = 1;
    ad_option fewer = {0}, ckpt = {0};
    int64_t ck_stride = INT64_MAX;
    int64_t fs = fit_slots(budget, stride, g, full);
    if (forced == KERN_AD_FEWER_SLOTS && fs >= full) /* forced: half the slots at most */
        fs = full / 2 / g * g > 0 ? full / 2 / g * g : g;
    if (fs >= 1 && (fs < full || forced == KERN_AD_FEWER_SLOTS))
        fewer = (ad_option){k, KERN_AD_FEWER_SLOTS, fs, (size_t)(stride * fs),
                            (double)full / (double)fs, 0};
    kern_kernel *v = ckpt_of(k);
    if (v) {
        var->k = v;
        if (!variant_alloc(var, k, args, la, bufs, nargs))
            return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory");
        if ((s = ckpt_lengths(v, var->args, var->la, nargs, full, var->counts, var->layout)) !=
            KERN_OK)
            return s;
        int64_t cs, cslots; /* K.grad.ckpt's bytes per slot, its slots */
        size_t cbytes;
        if ((s = size_launch(v, var->args, var->la, full, var->counts, var->layout, &cs, &cslots,
                             &cbytes)) != KERN_OK)
            return s;
        ck_stride = cs;
        if ((int64_t)cbytes <= budget) {
            ckpt = (ad_option){v, KERN_AD_RECOMPUTE, full, cbytes, RT_RECOMPUTE_COST, 0};
        } else {
            int64_t f2 = fit_slots(budget, cs, g, full);
            if (f2 >= 1)
                ckpt = (ad_option){v, KERN_AD_RECOMPUTE, f2, (size_t)(cs * f2),
                                   RT_RECOMPUTE_COST * (double)full / (double)f2, 0};
        }
    }
    if (forced == KERN_AD_FEWER_SLOTS && fewer.k) {
        *out = fewer;
    } else if (forced == KERN_AD_RECOMPUTE && (ckpt.k || !v)) {
        if (ckpt.k) /* a kernel without checkpointable loops stores everything */
            *out = ckpt;
    } else if (fewer.k && (!ckpt.k || fewer.cost <= ckpt.cost)) {
        *out = fewer;
    } else if (ckpt.k) {
        *out = ckpt;
    } else {
        /* nothing fits: name the loop with the largest stacks */
        const kern_meta_kernel *mk = k->meta;
        int big = 0;
        int64_t most = -1;
        for (int a = 0; a < mk->nadstacks; a++) {
            int64_t b =
                layout[2 * a + 1] * (int64_t)kern_dtype_size(rt_dtype_of(mk->adstacks[a].type));
            if (b > most) {
                most = b;
                big = a;
            }
        }
        char loc[512], least[160];
        rt_format_loc(loc, sizeof loc, k->mod->meta, mk->adstacks[big].line, mk->adstacks[big].col);
        /* the least any strategy takes: g slots (one group), checkpointed when it can be */
        int64_t per = ck_stride < stride ? ck_stride : stride;
        snprintf(least, sizeof least, "; the least it can take is %lld bytes (%s, %lld thread%s)",
                 (long long)(per * g), per < stride ? "checkpointed" : "storing every iteration",
                 (long long)g, g == 1 ? "" : "s");
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY,
                        "kernel '%s': its adstacks need %lld bytes storing every iteration (%lld "
                        "bytes per thread x %lld threads; the loop at %s is the largest)%s, and "
                        "the memory budget is %lld bytes; raise "
                        "kern_context_options.ad_memory_budget (kernc --ad-memory-budget), or "
                        "run fewer items per launch",
                        mk->name, (long long)store, (long long)stride, (long long)full, loc, least,
                        (long long)budget);
    }
    return KERN_OK;
}

static kern_status launch_(kern_kernel *k, const kern_arg *args, int nargs) {
    kern_context *ctx = k->mod->ctx;
    rt_clear_error(ctx);
    const kern_meta_kernel *mk = k->meta;
    kern_status s = KERN_OK;
    if (nargs != mk->nparams)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kernel '%s' takes %d argument%s, got %d", mk->name,
                        mk->nparams, mk->nparams == 1 ? "" : "s", nargs);
    if (nargs > 0 && !args)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kernel '%s': the argument array is NULL",
                        mk->name);
    rt_launch_arg small[16];
    kern_buffer *bsmall[16];
    rt_launch_arg *la = small;
    kern_buffer **bufs = bsmall;
    int64_t layout_small[32];
    int64_t *layout = layout_small;
    int64_t counts_small[16];
    int64_t *counts = counts_small;
    ad_variant var = {0}; /* K.grad.ckpt, when the plan looks at it */
    if (nargs > (int)(sizeof small / sizeof small[0])) {
        la = calloc((size_t)nargs, sizeof *la);
        bufs = calloc((size_t)nargs, sizeof *bufs);
        if (!la || !bufs) {
            s = rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory");
            goto cleanup;
        }
    }
    for (int i = 0; i < nargs; i++) {
        if ((s = check_arg(k, i, &args[i], &la[i])) != KERN_OK)
            goto cleanup;
        bufs[i] = args[i].kind == KERN_ARG_BUFFER ? args[i].u.buffer : NULL;
    }

    if ((s = rt_collect(ctx, true)) != KERN_OK) {
        rt_error(ctx, s, "%s (observed before launching '%s', which was not launched)", ctx->msg,
                 mk->name);
        goto cleanup;
    }
    rt_retire_poll(&ctx->retired, ctx->dev);
    if ((mk->nadstacks > 16 && !(layout = calloc((size_t)mk->nadstacks * 2, sizeof *layout))) ||
        (mk->ntasks > 16 && !(counts = calloc((size_t)mk->ntasks, sizeof *counts)))) {
        s = rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory");
        goto cleanup;
    }
    int64_t stride = 0, slots = 0;
    size_t bytes = 0;
    kern_kernel *run = k;
    rt_ready r = {k, la, bufs, nargs, counts, layout, 0, 0};
    if (mk->nadstacks == 0) {
        if ((s = size_launch(k, args, la, 0, counts, layout, &stride, &slots, &bytes)) != KERN_OK)
            goto cleanup;
    } else {
        ad_option o;
        if ((s = plan_adstacks(k, args, la, bufs, nargs, counts, layout, &var, &o)) != KERN_OK)
            goto cleanup;
        run = o.k;
        if (run == var.k) /* K.grad.ckpt, with its own arguments */
            r = (rt_ready){run, var.la, var.bufs, run->meta->nparams, var.counts, var.layout, 0, 0};
        /* the chosen kernel's layout (the plan sized others after it, unless it stores
         * all: that sizing is the plan's first) and its heap */
        if (o.stride > 0) {
            stride = o.stride;
            slots = o.slots;
            bytes = o.bytes;
        } else if ((s = size_launch(run, run == k ? args : var.args, r.la, o.slots, r.counts,
                                    r.layout, &stride, &slots, &bytes)) != KERN_OK) {
            goto cleanup;
        }
        rt_adstack_heap *h = &ctx->adheap;
        char err[1024];
        h->limit = h->last_budget < INT64_MAX ? h->last_budget : 0;
        if ((s = rt_adstack_reserve(h, ctx->dev, &ctx->retired, run->meta->name, bytes, stride,
                                    slots, err, sizeof err)) != KERN_OK) {
            s = rt_error(ctx, s, "%s", err);
            goto cleanup;
        }
        rt_adstack_remember(h, r.layout, run->meta->nadstacks, stride, slots);
        h->last_strategy = o.strategy;
        h->last_needed = (int64_t)bytes;
        h->last_recompute = o.cost;
    }
    r.stride = stride;
    r.slots = slots;
    if (ctx->capture) { /* recorded for the graph's replays, not run now */
        s = rt_graph_record(ctx->capture, &r);
        goto cleanup;
    }
    if ((s = rt_submit(ctx, &r)) == KERN_OK)
        s = rt_collect(ctx, true);
cleanup:
    if (la != small)
        free(la);
    if (bufs != bsmall)
        free(bufs);
    variant_free(&var);
    if (layout != layout_small)
        free(layout);
    if (counts != counts_small)
        free(counts);
    return s;
}

kern_status kern_launch(kern_kernel *k, const kern_arg *args, int nargs) {
    if (!k || !rt_handle_check(k, RT_H_KERNEL, "kern_launch"))
        return KERN_ERR_ARGUMENT;
    kern_context *ctx = k->mod->ctx;
    if (!rt_enter(ctx, "kern_launch"))
        return KERN_ERR_ARGUMENT;
    kern_status s = launch_(k, args, nargs);
    rt_leave(ctx);
    return s;
}
