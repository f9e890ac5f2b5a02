/* tape_save.c - what a reverse tape saves so that each K.grad reads what K read
 * (docs/autodiff.md, "What the tape saves").
 *
 * K.grad reads the primal arrays when backward runs, so a recorded launch B that
 * overwrites elements an earlier record A read would hand A.grad B's values. The tape
 * keeps an undo log instead: before B launches, it copies the elements B may write that
 * some earlier record may read, as they are, into a buffer of its own (a save of B);
 * backward, going newest first, puts B's saves back right after B.grad ran. Every record
 * r's grad then finds the arrays as they were right after r ran, on every element r read:
 * an element r read that a later launch B overwrote was saved by B (r is earlier than B)
 * and put back before r.grad, newest save first, so the oldest value wins; an element no
 * later launch wrote was never touched.
 *
 * What a launch may read or write of each array argument comes from its kernel's access
 * lines (runtime/meta.h), evaluated with the launch's scalar arguments and shapes: a box
 * per argument, flattened to the span from its first to its last element in row-major
 * order (exact for rows of a time-indexed array, x[t + 1, i]: whole rows). A kernel
 * without access lines, an index range that does not evaluate, and a host step's buffers
 * count as the whole array. A save is the span from the first to the last element of the
 * overlaps of one written span with the earlier reads of the same buffer.
 *
 * The saves count against the context's adstack budget (rt_ad_budget) together with the
 * adstack heap and every tape's saves; a launch whose saves do not fit fails before it
 * runs. Copies go through the device's copy op (device to device on the CPU, CUDA and
 * Vulkan), or through host memory where a device has none (copy_out, then copy_in). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tape.h"

/* An integer or bool scalar argument's value (0 for others: never a SizeExpr leaf). */
static int64_t scalar_value(const kern_arg *a) {
    switch (a->dtype) {
    case KERN_BOOL: return a->u.b;
    case KERN_I32: return a->u.i32;
    case KERN_U32: return a->u.u32;
    case KERN_I64: return a->u.i64;
    case KERN_I8: return a->u.i8;
    case KERN_U8: return a->u.u8;
    case KERN_I16: return a->u.i16;
    case KERN_U16: return a->u.u16;
    case KERN_U64: return (int64_t)a->u.u64;
    default: return 0;
    }
}

/* Fills sa from args; false when they do not match k's parameters the way kern_launch
 * requires (the count, buffers of the context with the dtype and rank, scalar dtypes). */
static bool fill_args(const kern_kernel *k, const kern_arg *args, int nargs, sz_arg *sa) {
    const kern_meta_kernel *mk = k->meta;
    kern_context *ctx = k->mod->ctx;
    if (nargs != mk->nparams || (nargs > 0 && !args))
        return false;
    for (int i = 0; i < nargs; i++) {
        const kern_type *t = mk->params[i].type;
        const kern_arg *a = &args[i];
        sz_arg *s = &sa[i];
        memset(s, 0, sizeof *s);
        s->type = t;
        if (!ty_is_array(t)) {
            if (a->kind != KERN_ARG_SCALAR || a->dtype != rt_dtype_of(t))
                return false;
            s->scalar = scalar_value(a);
            continue;
        }
        const kern_buffer *b = a->kind == KERN_ARG_BUFFER ? a->u.buffer : NULL;
        if (!b || !rt_tape_buffer_alive(ctx, b) || b->dtype != rt_dtype_of(t) || b->rank != t->rank)
            return false;
        for (int d = 0; d < KERN_MAX_RANK; d++)
            s->shape[d] = d < b->rank ? b->shape[d] : 1;
    }
    return true;
}

/* The span of what acc (NULL: the whole array) covers of b; false when it is empty. */
static bool span_of(const kern_meta_access *acc, const kern_buffer *b, const sz_arg *sa, int nargs,
                    int64_t *lo, int64_t *hi) {
    if (acc && acc->none)
        return false;
    int64_t first = 0, last = 0;
    for (int d = 0; d < b->rank; d++) {
        int64_t l = 0, h = b->shape[d], el, eh;
        char err[256];
        if (acc && acc->lo[d] && acc->hi[d] &&
            sz_eval(acc->lo[d], sa, nargs, &el, err, sizeof err) &&
            sz_eval(acc->hi[d], sa, nargs, &eh, err, sizeof err)) {
            l = el > 0 ? el : 0;
            h = eh < h ? eh : h;
        }
        if (l >= h)
            return false;
        /* row-major; within the buffer's element count, so no overflow */
        first = first * b->shape[d] + l;
        last = last * b->shape[d] + (h - 1);
    }
    *lo = first;
    *hi = last + 1;
    return true;
}

bool rt_tape_spans(const kern_kernel *k, const kern_arg *args, int nargs, bool write,
                   tape_span **out, int *n) {
    *out = NULL;
    *n = 0;
    sz_arg small[16], *sa = nargs <= 16 ? small : malloc((size_t)nargs * sizeof *sa);
    tape_span *spans = malloc(((size_t)(nargs > 0 ? nargs : 0) + 1) * sizeof *spans);
    if (!sa || !spans)
        *n = -1;
    bool ok = sa && spans && fill_args(k, args, nargs, sa);
    for (int i = 0; ok && i < nargs; i++) {
        kern_buffer *b = args[i].u.buffer;
        tape_span *sp = &spans[*n];
        if (ty_is_array(k->meta->params[i].type) &&
            span_of(kern_meta_access_of(k->meta, i, write), b, sa, nargs, &sp->lo, &sp->hi)) {
            sp->b = b;
            sp->param = i;
            (*n)++;
        }
    }
    if (sa != small)
        free(sa);
    if (ok)
        *out = spans;
    else
        free(spans);
    return ok;
}

tape_span *rt_tape_whole_spans(kern_buffer *const *buffers, int n) {
    tape_span *spans = malloc(((size_t)n + 1) * sizeof *spans);
    for (int i = 0; spans && i < n; i++)
        spans[i] = (tape_span){buffers[i], 0, buffers[i]->count, i};
    return spans;
}

/* Copies n bytes of src at soff to dst at doff, after the launches that use either. */
static kern_status copy_range(kern_context *ctx, kern_buffer *dst, size_t doff, kern_buffer *src,
                              size_t soff, size_t n) {
    rt_device *d = ctx->dev;
    char err[512] = "";
    kern_status s = rt_buffer_wait(src);
    if (s != KERN_OK || (s = rt_buffer_wait(dst)) != KERN_OK)
        return s;
    if (d->ops->copy) {
        s = d->ops->copy(d, dst->mem, doff, src->mem, soff, n, err, sizeof err);
    } else {
        void *host = malloc(n ? n : 1);
        if (!host)
            return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory (%zu bytes)", n);
        s = d->ops->copy_out(d, host, src->mem, soff, n, err, sizeof err);
        if (s == KERN_OK)
            s = d->ops->copy_in(d, dst->mem, doff, host, n, err, sizeof err);
        free(host);
    }
    if (s != KERN_OK)
        return rt_error(ctx, s, "device %s: %s", d->ops->name, err);
    dst->written = ++ctx->write_clock;
    return KERN_OK;
}

int64_t rt_tapes_saved(kern_context *ctx) {
    int64_t h = 0;
    for (rt_list *l = ctx->tapes.next; l != &ctx->tapes; l = l->next)
        h += ((const kern_tape *)l)->saved_bytes;
    return h;
}

/* The bytes the context's adstack heap and tapes hold now. */
static int64_t held(kern_context *ctx) { return (int64_t)ctx->adheap.bytes + rt_tapes_saved(ctx); }

/* The span from the first to the last element that w overwrites of the reads of t's
 * records; false when it overwrites none. *reader and *rp: the first record whose read
 * overlaps, and its span's parameter. */
static bool overlap(const kern_tape *t, const tape_span *w, int64_t *lo, int64_t *hi, int *reader,
                    int *rp) {
    *lo = INT64_MAX;
    *hi = INT64_MIN;
    for (int r = 0; r < t->nrecs; r++)
        for (int i = 0; i < t->recs[r].nreads; i++) {
            const tape_span *rs = &t->recs[r].reads[i];
            int64_t l = rs->lo > w->lo ? rs->lo : w->lo, h = rs->hi < w->hi ? rs->hi : w->hi;
            if (rs->b != w->b || l >= h)
                continue;
            if (*lo == INT64_MAX) {
                *reader = r;
                *rp = rs->param;
            }
            *lo = l < *lo ? l : *lo;
            *hi = h > *hi ? h : *hi;
        }
    return *lo < *hi;
}

/* The message of a save over the budget. */
static kern_status over_budget(kern_tape *t, const kern_kernel *k, const tape_span *w,
                               const tape_save *sv, int reader, int rp, int64_t left,
                               int64_t budget) {
    const tape_record *rec = &t->recs[reader];
    char who[256], what[128];
    if (rec->k)
        snprintf(who, sizeof who, "record %d (kernel '%s', parameter '%s')", reader,
                 rec->k->meta->name, rec->k->meta->params[rp].name);
    else
        snprintf(who, sizeof who, "record %d (a host step, its buffer %d)", reader, rp);
    rt_format_buffer(what, sizeof what, w->b);
    return rt_error(t->ctx, KERN_ERR_OUT_OF_MEMORY,
                    "kern_tape_launch: kernel '%s' writes elements %lld to %lld of parameter "
                    "'%s' (%s), which %s read: the tape must keep them for its backward pass, "
                    "%lld bytes, and the adstack budget has %lld of its %lld bytes left "
                    "(kern_context_options.ad_memory_budget); nothing was launched",
                    k->meta->name, (long long)sv->lo, (long long)sv->hi - 1,
                    k->meta->params[w->param].name, what, who, (long long)sv->bytes,
                    (long long)(left > 0 ? left : 0), (long long)budget);
}

kern_status rt_tape_save(kern_tape *t, const kern_kernel *k, const tape_span *writes, int nwrites,
                         tape_save **out, int *n) {
    kern_context *ctx = t->ctx;
    *out = NULL;
    *n = 0;
    tape_save *saves = calloc((size_t)nwrites + 1, sizeof *saves);
    if (!saves)
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory");
    int64_t budget = -1, left = 0; /* asked for at the first overlap (a device query) */
    int ns = 0, reader = 0, rp = 0;
    kern_status s = KERN_OK;
    for (int i = 0; i < nwrites && s == KERN_OK; i++) {
        tape_save sv = {writes[i].b, NULL, 0, 0, 0};
        if (!overlap(t, &writes[i], &sv.lo, &sv.hi, &reader, &rp))
            continue;
        int64_t count = sv.hi - sv.lo;
        size_t es = kern_dtype_size(sv.b->dtype);
        sv.bytes = count * (int64_t)es; /* within the buffer's bytes */
        if (budget < 0) {
            budget = rt_ad_budget(ctx);
            left = budget - held(ctx);
        }
        if (sv.bytes > left) {
            s = over_budget(t, k, &writes[i], &sv, reader, rp, left, budget);
            break;
        }
        left -= sv.bytes;
        if ((s = kern_buffer_create(ctx, sv.b->dtype, 1, &count, NULL, &sv.copy)) != KERN_OK)
            break;
        saves[ns++] = sv;
        t->saved_bytes += sv.bytes;
        s = copy_range(ctx, sv.copy, 0, sv.b, (size_t)sv.lo * es, (size_t)count * es);
    }
    if (s != KERN_OK) {
        char msg[sizeof ctx->msg];
        snprintf(msg, sizeof msg, "%s", ctx->msg);
        rt_tape_drop(t, saves, ns);
        return rt_error(ctx, s, "%s", msg);
    }
    *out = saves;
    *n = ns;
    return KERN_OK;
}

kern_status rt_tape_restore(kern_tape *t, tape_record *rec) {
    kern_context *ctx = t->ctx;
    for (int i = rec->nsaves - 1; i >= 0; i--) {
        tape_save *sv = &rec->saves[i];
        if (!rt_tape_buffer_alive(ctx, sv->b) || !rt_tape_buffer_alive(ctx, sv->copy))
            return rt_error(ctx, KERN_ERR_ARGUMENT,
                            "a buffer whose elements the tape saved (or its copy) was released");
        size_t es = kern_dtype_size(sv->b->dtype);
        kern_status s = copy_range(ctx, sv->b, (size_t)sv->lo * es, sv->copy, 0,
                                   (size_t)(sv->hi - sv->lo) * es);
        if (s != KERN_OK)
            return s;
    }
    rt_tape_drop(t, rec->saves, rec->nsaves);
    rec->saves = NULL;
    rec->nsaves = 0;
    return KERN_OK;
}

void rt_tape_drop(kern_tape *t, tape_save *saves, int n) {
    for (int i = 0; i < n; i++) {
        if (saves[i].copy && rt_tape_buffer_alive(t->ctx, saves[i].copy))
            kern_buffer_release(saves[i].copy);
        t->saved_bytes -= saves[i].bytes;
    }
    free(saves);
}
