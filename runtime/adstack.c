/* adstack.c - per-launch sizing of the adstack heap (see adstack.h). No device code here:
 * the CPU device and later the GPU devices share it. */
#include "adstack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

void rt_adstack_args(const kern_meta_kernel *k, const rt_launch_arg *la, bool host_memory,
                     sz_arg *args) {
    for (int i = 0; i < k->nparams; i++) {
        const kern_type *t = k->params[i].type;
        sz_arg *a = &args[i];
        memset(a, 0, sizeof *a);
        a->type = t;
        for (int d = 0; d < KERN_MAX_RANK; d++)
            a->shape[d] = 1;
        if (la[i].is_array) {
            for (int d = 0; d < KERN_MAX_RANK && d < KERN_MAX_DIMS; d++)
                a->shape[d] = la[i].shape[d];
            a->data = host_memory ? la[i].mem : NULL;
            continue;
        }
        switch (t->kind) {
        case TY_BOOL: a->scalar = la[i].scalar.b; break;
        case TY_I32: a->scalar = la[i].scalar.i32; break;
        case TY_U32: a->scalar = la[i].scalar.u32; break;
        case TY_I64: a->scalar = la[i].scalar.i64; break;
        case TY_I8: a->scalar = la[i].scalar.i8; break;
        case TY_U8: a->scalar = la[i].scalar.u8; break;
        case TY_I16: a->scalar = la[i].scalar.i16; break;
        case TY_U16: a->scalar = la[i].scalar.u16; break;
        case TY_U64: a->scalar = (int64_t)la[i].scalar.u64; break;
        default: break; /* floats are never SizeExpr leaves */
        }
    }
}

int64_t rt_task_count(const kern_meta_task *t, const sz_arg *args, int nargs) {
    if (!t->parallel)
        return 1;
    int64_t count = 1;
    char msg[256];
    bool unknown = false;
    for (int d = 0; d < t->ndims && d < KERN_META_MAX_TASK_DIMS; d++) {
        int64_t e;
        if (!t->extent_expr[d]) {
            unknown = true;
            continue;
        }
        if (!sz_eval(t->extent_expr[d], args, nargs, &e, msg, sizeof msg)) {
            if (strstr(msg, "overflows")) /* hi - lo itself does not fit */
                return RT_COUNT_OVERFLOW;
            unknown = true;
            continue;
        }
        if (e < 0)
            e = 0;
        if (__builtin_mul_overflow(count, e, &count))
            return RT_COUNT_OVERFLOW;
    }
    return unknown ? -1 : count;
}

/* Evaluates the capacity of stack s of k (negative counts as 0). */
static kern_status stack_capacity(const kern_meta *m, const kern_meta_kernel *k, int s,
                                  const sz_arg *args, int nargs, const int64_t *known, int64_t *cap,
                                  char *err, size_t errlen) {
    const kern_meta_adstack *a = &k->adstacks[s];
    char loc[1024], msg[512];
    if (known && known[s] != RT_ADSTACK_UNKNOWN) { /* sized on the device */
        *cap = known[s] < 0 ? 0 : known[s];
        return KERN_OK;
    }
    if (!a->expr || !sz_eval(a->expr, args, nargs, cap, msg, sizeof msg)) {
        rt_format_loc(loc, sizeof loc, m, a->line, a->col);
        snprintf(err, errlen,
                 "kernel '%s': cannot size the adstack of the loop at %s (capacity %s): %s",
                 k->name, loc, a->cap, a->expr ? msg : "not parsed");
        return KERN_ERR_ARGUMENT;
    }
    if (*cap < 0)
        *cap = 0;
    return KERN_OK;
}

/* Slot slices: see adstack.h. */
static kern_status layout_slices(const kern_meta *m, const kern_meta_kernel *k, const sz_arg *args,
                                 int nargs, const int64_t *known, int64_t *layout, int64_t *stride,
                                 char *err, size_t errlen) {
    int64_t end = 0;
    char loc[1024];
    for (int s = 0; s < k->nadstacks; s++) {
        const kern_meta_adstack *a = &k->adstacks[s];
        int64_t cap;
        kern_status st = stack_capacity(m, k, s, args, nargs, known, &cap, err, errlen);
        if (st != KERN_OK)
            return st;
        int64_t esize = (int64_t)kern_dtype_size(rt_dtype_of(a->type));
        int64_t off = (end + esize - 1) / esize * esize, bytes, e,
                lanes = k->ad_lanes > 1 ? k->ad_lanes : 1;
        if (end > INT64_MAX - esize || __builtin_mul_overflow(cap, esize * lanes, &bytes) ||
            __builtin_add_overflow(off, bytes, &e) || e > INT64_MAX - 63) {
            rt_format_loc(loc, sizeof loc, m, a->line, a->col);
            char per[64] = "";
            if (lanes > 1)
                snprintf(per, sizeof per, " for each of %lld SIMD lanes", (long long)lanes);
            snprintf(err, errlen,
                     "kernel '%s': the adstack of the loop at %s needs %lld entries of %s%s: the "
                     "per-thread slice does not fit in 2^63 bytes",
                     k->name, loc, (long long)cap, a->type->name, per);
            return KERN_ERR_OUT_OF_MEMORY;
        }
        layout[2 * s] = off;
        layout[2 * s + 1] = cap;
        end = e;
    }
    *stride = (end + 63) / 64 * 64;
    return KERN_OK;
}

enum { RT_SLOT_MAJOR_ALIGN = 256 };

/* Slot-major: see adstack.h. */
static kern_status layout_slot_major(const kern_meta *m, const kern_meta_kernel *k,
                                     const sz_arg *args, int nargs, const int64_t *known,
                                     int64_t slots, int64_t *layout, int64_t *stride,
                                     int64_t *total, char *err, size_t errlen) {
    const int64_t al = RT_SLOT_MAJOR_ALIGN;
    int64_t end = 0, per_slot = 0;
    char loc[1024];
    for (int s = 0; s < k->nadstacks; s++) {
        const kern_meta_adstack *a = &k->adstacks[s];
        int64_t cap;
        kern_status st = stack_capacity(m, k, s, args, nargs, known, &cap, err, errlen);
        if (st != KERN_OK)
            return st;
        int64_t esize = (int64_t)kern_dtype_size(rt_dtype_of(a->type));
        int64_t off = (end + al - 1) / al * al, row, region, e;
        if (__builtin_mul_overflow(cap, esize, &row) ||
            __builtin_add_overflow(per_slot, row, &per_slot) ||
            __builtin_mul_overflow(row, slots, &region) ||
            __builtin_add_overflow(off, region, &e) || e > INT64_MAX - al) {
            rt_format_loc(loc, sizeof loc, m, a->line, a->col);
            snprintf(err, errlen,
                     "kernel '%s': the adstack of the loop at %s needs %lld entries of %s for "
                     "each of %lld threads: the heap does not fit in 2^63 bytes",
                     k->name, loc, (long long)cap, a->type->name, (long long)slots);
            return KERN_ERR_OUT_OF_MEMORY;
        }
        layout[2 * s] = off;
        layout[2 * s + 1] = cap;
        end = e;
    }
    *stride = per_slot;
    *total = (end + al - 1) / al * al;
    return KERN_OK;
}

kern_status rt_adstack_layout(const kern_meta *m, const kern_meta_kernel *k, const sz_arg *args,
                              int nargs, bool slot_major, int64_t slots, int64_t *layout,
                              int64_t *stride, size_t *bytes, char *err, size_t errlen) {
    return rt_adstack_layout_known(m, k, args, nargs, NULL, slot_major, slots, layout, stride,
                                   bytes, err, errlen);
}

kern_status rt_adstack_layout_known(const kern_meta *m, const kern_meta_kernel *k,
                                    const sz_arg *args, int nargs, const int64_t *known,
                                    bool slot_major, int64_t slots, int64_t *layout,
                                    int64_t *stride, size_t *bytes, char *err, size_t errlen) {
    *stride = 0;
    if (slots < 1)
        slots = 1;
    if (!slot_major) {
        kern_status s = layout_slices(m, k, args, nargs, known, layout, stride, err, errlen);
        if (s != KERN_OK || !bytes)
            return s;
        return rt_adstack_heap_size(k->name, *stride, slots, bytes, err, errlen);
    }
    int64_t total = 0;
    kern_status s =
        layout_slot_major(m, k, args, nargs, known, slots, layout, stride, &total, err, errlen);
    if (s != KERN_OK || !bytes)
        return s;
    if ((uint64_t)total > (uint64_t)PTRDIFF_MAX || (uint64_t)total > SIZE_MAX) {
        snprintf(err, errlen,
                 "kernel '%s': the adstack heap of %lld bytes per thread x %lld threads does not "
                 "fit in the address space",
                 k->name, (long long)*stride, (long long)slots);
        return KERN_ERR_OUT_OF_MEMORY;
    }
    *bytes = (size_t)total;
    return KERN_OK;
}

kern_status rt_adstack_heap_size(const char *kernel, int64_t stride, int64_t slots, size_t *bytes,
                                 char *err, size_t errlen) {
    int64_t n;
    if (stride < 0 || slots < 0 || __builtin_mul_overflow(stride, slots, &n) ||
        (uint64_t)n > (uint64_t)PTRDIFF_MAX || (uint64_t)n > SIZE_MAX) {
        snprintf(err, errlen,
                 "kernel '%s': the adstack heap of %lld bytes per thread x %lld threads does not "
                 "fit in the address space",
                 kernel, (long long)stride, (long long)slots);
        return KERN_ERR_OUT_OF_MEMORY;
    }
    *bytes = (size_t)n;
    return KERN_OK;
}

kern_status rt_adstack_reserve(rt_adstack_heap *h, rt_device *d, rt_retire_queue *q,
                               const char *kernel, size_t bytes, int64_t stride, int64_t slots,
                               char *err, size_t errlen) {
    if (h->mem && bytes <= h->bytes)
        return KERN_OK;
    if (h->pins > 0) {
        snprintf(err, errlen,
                 "kernel '%s': the adstack heap would have to grow to %zu bytes (%lld bytes per "
                 "thread x %lld threads; it has %zu), but %d captured graph%s use%s it at its "
                 "address: release the graph%s, or capture after a launch with the largest sizes",
                 kernel, bytes, (long long)stride, (long long)slots, h->bytes, h->pins,
                 h->pins == 1 ? "" : "s", h->pins == 1 ? "s" : "", h->pins == 1 ? "" : "s");
        return KERN_ERR_OUT_OF_MEMORY;
    }
    size_t want = bytes;
    if (h->mem && h->bytes <= (size_t)PTRDIFF_MAX / 2 && 2 * h->bytes > bytes &&
        (h->limit <= 0 || 2 * h->bytes <= (uint64_t)h->limit))
        want = 2 * h->bytes;
    void *mem = NULL;
    char derr[512];
    kern_status s = d->ops->alloc(d, want, &mem, derr, sizeof derr);
    if (s != KERN_OK && want != bytes) /* the doubled size failed: try the exact one */
        s = d->ops->alloc(d, want = bytes, &mem, derr, sizeof derr);
    if (s != KERN_OK) {
        snprintf(err, errlen,
                 "kernel '%s': cannot allocate the adstack heap: %zu bytes (%lld bytes per "
                 "thread x %lld threads): %s",
                 kernel, bytes, (long long)stride, (long long)slots, derr);
        return KERN_ERR_OUT_OF_MEMORY;
    }
    /* a launch in flight may still use the old heap: retire it (the push frees it even
     * when its wait fails, which means the device is lost) */
    if (h->mem)
        s = rt_retire_push(q, d, h->mem, h->last_use, derr, sizeof derr);
    h->mem = mem;
    h->bytes = want;
    h->last_use = 0;
    h->allocs++;
    if (s != KERN_OK)
        snprintf(err, errlen, "kernel '%s': device %s: %s", kernel, d->ops->name, derr);
    return s;
}

bool rt_adstack_remember(rt_adstack_heap *h, const int64_t *layout, int n, int64_t stride,
                         int64_t slots) {
    h->last_stride = stride;
    h->last_slots = slots;
    if (n > h->last_cap) {
        int64_t *nl = realloc(h->last_layout, (size_t)n * 2 * sizeof *nl);
        if (!nl) {
            h->last_n = 0;
            return false;
        }
        h->last_layout = nl;
        h->last_cap = n;
    }
    if (n)
        memcpy(h->last_layout, layout, (size_t)n * 2 * sizeof *layout);
    h->last_n = n;
    return true;
}

void rt_adstack_heap_fini(rt_adstack_heap *h, rt_device *d) {
    if (h->mem)
        d->ops->free(d, h->mem);
    free(h->last_layout);
    memset(h, 0, sizeof *h);
}
