/* buffer.c - buffers: a device allocation with a dtype and a row-major shape of rank 1..4
 * (extents below 2^31: len() is i32 in the language). Reads and writes wait for the last
 * launch that used the buffer; a release while in flight retires the memory (retire.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

void rt_format_buffer(char *buf, size_t size, const kern_buffer *b) {
    int n = snprintf(buf, size, "%s[", kern_dtype_name(b->dtype));
    for (int d = 0; d < b->rank && n >= 0 && (size_t)n < size; d++)
        n += snprintf(buf + n, size - (size_t)n, "%s%lld", d ? ", " : "", (long long)b->shape[d]);
    if (n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "]");
}

/* Checks a buffer's dtype, rank and shape (fn names the caller in messages); sets the
 * element count and byte size. */
static kern_status check_shape(kern_context *ctx, const char *fn, kern_dtype dtype, int rank,
                               const int64_t *shape, int64_t *count_out, size_t *bytes_out) {
    if (!kern_dtype_name(dtype))
        return rt_error(ctx, KERN_ERR_ARGUMENT, "%s: invalid dtype %d", fn, (int)dtype);
    if (rank < 1 || rank > KERN_MAX_DIMS)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "%s: rank %d is not supported (rank 1 to %d)", fn,
                        rank, KERN_MAX_DIMS);
    if (!shape)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "%s: shape is NULL", fn);
    int64_t count = 1;
    for (int d = 0; d < rank; d++) {
        if (shape[d] < 0)
            return rt_error(ctx, KERN_ERR_ARGUMENT, "%s: extent %lld of dimension %d is negative",
                            fn, (long long)shape[d], d);
        if (shape[d] > INT32_MAX)
            return rt_error(ctx, KERN_ERR_ARGUMENT,
                            "%s: extent %lld of dimension %d is too large "
                            "(at most %d: len() is i32)",
                            fn, (long long)shape[d], d, INT32_MAX);
        if (__builtin_mul_overflow(count, shape[d], &count))
            count = INT64_MAX; /* caught below */
    }
    size_t esize = kern_dtype_size(dtype), bytes;
    if (count == INT64_MAX || (uint64_t)count > SIZE_MAX / esize ||
        __builtin_mul_overflow((size_t)count, esize, &bytes) || bytes > (size_t)PTRDIFF_MAX)
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "%s: the array is too large to address", fn);
    *count_out = count;
    *bytes_out = bytes;
    return KERN_OK;
}

/* A buffer struct for ctx with its shape (no memory yet); NULL when out of host memory. */
static kern_buffer *new_buffer(kern_context *ctx, kern_dtype dtype, int rank, const int64_t *shape,
                               int64_t count, size_t bytes) {
    kern_buffer *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->ctx = ctx;
    b->written = ++ctx->write_clock;
    b->dtype = dtype;
    b->rank = rank;
    for (int d = 0; d < KERN_MAX_DIMS; d++)
        b->shape[d] = d < rank ? shape[d] : 1;
    b->count = count;
    b->bytes = bytes;
    return b;
}

static void add_buffer(kern_context *ctx, kern_buffer *b) {
    rt_list_init(&b->link);
    rt_list_push(&ctx->buffers, &b->link);
    rt_handle_add(b, RT_H_BUFFER, ctx);
}

kern_status kern_buffer_create(kern_context *ctx, kern_dtype dtype, int rank, const int64_t *shape,
                               const void *data, kern_buffer **out) {
    if (!ctx || !rt_handle_check(ctx, RT_H_CONTEXT, "kern_buffer_create"))
        return KERN_ERR_ARGUMENT;
    rt_clear_error(ctx);
    if (!out)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_buffer_create: out is NULL");
    *out = NULL;
    if (!ctx->dev)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "the context was not created successfully");
    int64_t count;
    size_t bytes;
    kern_status cs = check_shape(ctx, "kern_buffer_create", dtype, rank, shape, &count, &bytes);
    if (cs != KERN_OK)
        return cs;

    char err[512];
    kern_status s = KERN_OK;
    kern_buffer *b = new_buffer(ctx, dtype, rank, shape, count, bytes);
    if (!b)
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory for a buffer");
    s = ctx->dev->ops->alloc(ctx->dev, bytes, &b->mem, err, sizeof err);
    if (s != KERN_OK) {
        char what[128];
        rt_format_buffer(what, sizeof what, b);
        s = rt_error(ctx, s, "cannot create buffer %s (%zu bytes): %s", what, bytes, err);
        goto cleanup;
    }
    if (data)
        s = ctx->dev->ops->copy_in(ctx->dev, b->mem, 0, data, bytes, err, sizeof err);
    else
        s = ctx->dev->ops->zero(ctx->dev, b->mem, 0, bytes, err, sizeof err);
    if (s != KERN_OK) {
        s = rt_error(ctx, s, "cannot initialize a buffer: %s", err);
        goto cleanup;
    }
    add_buffer(ctx, b);
    *out = b;
    return KERN_OK;
cleanup:
    if (b->mem)
        ctx->dev->ops->free(ctx->dev, b->mem);
    free(b);
    return s;
}

kern_status rt_buffer_wait(kern_buffer *b) {
    kern_context *ctx = b->ctx;
    char err[512];
    if (b->last_use > ctx->dev->ops->poll(ctx->dev)) {
        kern_status s = ctx->dev->ops->wait(ctx->dev, b->last_use, err, sizeof err);
        if (s != KERN_OK)
            return rt_error(ctx, s, "device %s: %s", ctx->dev->ops->name, err);
    }
    return KERN_OK;
}

static kern_status check_transfer(kern_buffer *b, const void *host, size_t size, const char *fn) {
    char what[128];
    if (size != b->bytes) {
        rt_format_buffer(what, sizeof what, b);
        return rt_error(b->ctx, KERN_ERR_ARGUMENT,
                        "%s: size %zu does not match the %zu bytes of buffer %s", fn, size,
                        b->bytes, what);
    }
    if (!host && size)
        return rt_error(b->ctx, KERN_ERR_ARGUMENT, "%s: host pointer is NULL", fn);
    return KERN_OK;
}

kern_status kern_buffer_read(kern_buffer *b, void *dst, size_t size) {
    if (!b || !rt_handle_check(b, RT_H_BUFFER, "kern_buffer_read"))
        return KERN_ERR_ARGUMENT;
    kern_context *ctx = b->ctx;
    if (!rt_enter(ctx, "kern_buffer_read"))
        return KERN_ERR_ARGUMENT;
    rt_clear_error(ctx);
    char err[512];
    kern_status s = check_transfer(b, dst, size, "kern_buffer_read");
    if (s == KERN_OK)
        s = rt_buffer_wait(b);
    if (s == KERN_OK) {
        s = ctx->dev->ops->copy_out(ctx->dev, dst, b->mem, 0, size, err, sizeof err);
        if (s != KERN_OK)
            s = rt_error(ctx, s, "cannot read a buffer: %s", err);
    }
    kern_status c = rt_collect(ctx, s == KERN_OK);
    rt_retire_poll(&ctx->retired, ctx->dev);
    rt_leave(ctx);
    return s != KERN_OK ? s : c;
}

kern_status kern_buffer_write(kern_buffer *b, const void *src, size_t size) {
    if (!b || !rt_handle_check(b, RT_H_BUFFER, "kern_buffer_write"))
        return KERN_ERR_ARGUMENT;
    kern_context *ctx = b->ctx;
    if (!rt_enter(ctx, "kern_buffer_write"))
        return KERN_ERR_ARGUMENT;
    rt_clear_error(ctx);
    char err[512];
    kern_status s = check_transfer(b, src, size, "kern_buffer_write");
    if (s == KERN_OK)
        s = rt_buffer_wait(b);
    if (s == KERN_OK) {
        s = ctx->dev->ops->copy_in(ctx->dev, b->mem, 0, src, size, err, sizeof err);
        if (s != KERN_OK)
            s = rt_error(ctx, s, "cannot write a buffer: %s", err);
        b->written = ++ctx->write_clock;
    }
    kern_status c = rt_collect(ctx, s == KERN_OK);
    rt_retire_poll(&ctx->retired, ctx->dev);
    rt_leave(ctx);
    return s != KERN_OK ? s : c;
}

kern_status rt_buffer_zero(kern_buffer *b) {
    kern_context *ctx = b->ctx;
    char err[512];
    kern_status s = rt_buffer_wait(b);
    if (s == KERN_OK && b->bytes) {
        s = ctx->dev->ops->zero(ctx->dev, b->mem, 0, b->bytes, err, sizeof err);
        if (s != KERN_OK)
            s = rt_error(ctx, s, "cannot zero a buffer: %s", err);
        b->written = ++ctx->write_clock;
    }
    return s;
}

enum { RT_STAGING_BYTES = 16 << 20 }; /* a cross-device copy's host chunk */

/* src's contents into dst, two buffers of the same size whose launches have completed:
 * in one device (its copy op), between two devices of one kind (copy_peer: CUDA to CUDA),
 * directly where one side's memory is the host's, else through host memory in chunks. */
static kern_status copy_between(kern_buffer *dst, kern_buffer *src, char *err, size_t errlen) {
    rt_device *dd = dst->ctx->dev, *sd = src->ctx->dev;
    size_t n = src->bytes;
    if (dd == sd && dd->ops->copy)
        return dd->ops->copy(dd, dst->mem, 0, src->mem, 0, n, err, errlen);
    if (dd->ops == sd->ops && sd->ops->copy_peer) {
        kern_status s = sd->ops->copy_peer(sd, src->mem, dd, dst->mem, n, err, errlen);
        if (s != KERN_ERR_UNSUPPORTED)
            return s;
    }
    if (sd->host_memory)
        return dd->ops->copy_in(dd, dst->mem, 0, src->mem, n, err, errlen);
    if (dd->host_memory)
        return sd->ops->copy_out(sd, dst->mem, src->mem, 0, n, err, errlen);
    size_t chunk = n < RT_STAGING_BYTES ? n : RT_STAGING_BYTES;
    void *host = malloc(chunk ? chunk : 1);
    if (!host) {
        snprintf(err, errlen, "out of host memory for a staging copy of %zu bytes", chunk);
        return KERN_ERR_OUT_OF_MEMORY;
    }
    kern_status s = KERN_OK;
    for (size_t off = 0; off < n && s == KERN_OK; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        s = sd->ops->copy_out(sd, host, src->mem, off, k, err, errlen);
        if (s == KERN_OK) /* copy_in never reads host after it returns */
            s = dd->ops->copy_in(dd, dst->mem, off, host, k, err, errlen);
    }
    free(host);
    return s;
}

kern_status kern_buffer_copy_from(kern_buffer *dst, kern_buffer *src) {
    const char *fn = "kern_buffer_copy_from";
    if (!dst || !rt_handle_check(dst, RT_H_BUFFER, fn))
        return KERN_ERR_ARGUMENT;
    kern_context *ctx = dst->ctx;
    if (!ctx)
        return KERN_ERR_ARGUMENT; /* a DLPack view's buffer whose context is gone */
    rt_clear_error(ctx);
    if (!src || !rt_handle_check(src, RT_H_BUFFER, fn))
        return rt_error(ctx, KERN_ERR_ARGUMENT, "%s: the source is %s", fn,
                        src ? "not a live buffer" : "NULL");
    kern_context *sctx = src->ctx;
    if (!sctx)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "%s: the source's context was released", fn);
    if (src->dtype != dst->dtype || src->rank != dst->rank ||
        memcmp(src->shape, dst->shape, sizeof src->shape) != 0) {
        char a[128], b[128];
        rt_format_buffer(a, sizeof a, src);
        rt_format_buffer(b, sizeof b, dst);
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "%s: the source is %s, the destination %s (the dtype and shape must "
                        "be the same)",
                        fn, a, b);
    }
    if (!rt_enter(ctx, fn))
        return KERN_ERR_ARGUMENT;
    if (sctx != ctx && !rt_enter(sctx, fn)) {
        rt_leave(ctx);
        return rt_error(ctx, KERN_ERR_ARGUMENT, "%s: another thread is using the source's context",
                        fn);
    }
    char err[512];
    kern_status s = rt_buffer_wait(src); /* its writers first; a failure is sctx's message */
    if (s != KERN_OK && sctx != ctx)
        s = rt_error(ctx, s, "%s: the source's context: %s", fn, sctx->msg);
    if (s == KERN_OK)
        s = rt_buffer_wait(dst); /* and the readers of what is overwritten */
    if (s == KERN_OK && dst != src) {
        s = copy_between(dst, src, err, sizeof err);
        if (s != KERN_OK)
            s = rt_error(ctx, s, "%s: copying %zu bytes from %s to %s: %s", fn, src->bytes,
                         sctx->dev->desc, ctx->dev->desc, err);
        dst->written = ++ctx->write_clock;
    }
    kern_status c = rt_collect(ctx, s == KERN_OK);
    rt_retire_poll(&ctx->retired, ctx->dev);
    if (sctx != ctx) {
        rt_collect(sctx, false); /* its device errors stay its own, for its next call */
        rt_retire_poll(&sctx->retired, sctx->dev);
        rt_leave(sctx);
    }
    rt_leave(ctx);
    return s != KERN_OK ? s : c;
}

void rt_buffer_destroy(kern_buffer *b, bool device_idle) {
    kern_context *ctx = b->ctx;
    rt_list_remove(&b->link);
    if (b->wrapped && !b->release) {
        /* nothing of kern's to free: the owner keeps the memory alive */
    } else if (device_idle) {
        if (b->wrapped)
            b->release(b->user);
        else
            ctx->dev->ops->free(ctx->dev, b->mem);
    } else {
        char err[512];
        rt_retired e = {b->mem, b->last_use, b->wrapped ? b->release : NULL, b->user};
        if (rt_retire_push_entry(&ctx->retired, ctx->dev, e, err, sizeof err) != KERN_OK)
            rt_error(ctx, KERN_ERR_DEVICE, "device %s: %s", ctx->dev->ops->name, err);
    }
    rt_handle_free(b);
}

void rt_buffer_outlive_context(kern_buffer *b, rt_orphans *o) {
    rt_list_remove(&b->link);
    b->view_orphan = true;
    b->orphans = o;
    b->ctx = NULL;
    o->buffers++;
}

void rt_orphan_destroy(kern_buffer *b) {
    rt_orphans *o = b->orphans;
    if (b->wrapped) {
        if (b->release)
            b->release(b->user);
    } else {
        o->dev->ops->free(o->dev, b->mem); /* the device was idle when the context went */
    }
    rt_handle_free(b);
    if (--o->buffers == 0) {
        o->dev->ops->destroy(o->dev);
        free(o);
    }
}

void kern_buffer_release(kern_buffer *b) {
    if (!b || !rt_handle_check(b, RT_H_BUFFER, "kern_buffer_release"))
        return;
    kern_context *ctx = b->ctx;
    rt_clear_error(ctx);
    rt_handle_released(b);
    rt_retire_poll(&ctx->retired, ctx->dev);
    if (b->pins > 0) { /* a graph uses it: freed with the last such graph */
        b->released = true;
        return;
    }
    if (b->views > 0) { /* DLPack tensors view it: freed with the last of them */
        b->view_orphan = true;
        return;
    }
    rt_buffer_destroy(b, false);
}

kern_status rt_buffer_wrap(kern_context *ctx, const char *fn, kern_dtype dtype, int rank,
                           const int64_t *shape, void *data, void (*release)(void *user),
                           void *user, kern_buffer **out) {
    int64_t count;
    size_t bytes;
    kern_status s = check_shape(ctx, fn, dtype, rank, shape, &count, &bytes);
    if (s != KERN_OK)
        return s;
    if (!(rt_device_caps(ctx->dev) & KERN_TARGET_POINTERS)) {
        char names[128];
        return rt_error(ctx, KERN_ERR_UNSUPPORTED,
                        "%s: the %s device cannot use memory it did not allocate (%s can)", fn,
                        ctx->dev->ops->name,
                        kern_target_names(KERN_TARGET_DEVICE | KERN_TARGET_POINTERS, names,
                                          sizeof names));
    }
    if (!data && bytes)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "%s: data is NULL", fn);
    if ((uintptr_t)data % kern_dtype_size(dtype) != 0)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "%s: data %p is not aligned to the %zu bytes of a %s element", fn, data,
                        kern_dtype_size(dtype), kern_dtype_name(dtype));
    kern_buffer *b = new_buffer(ctx, dtype, rank, shape, count, bytes);
    if (!b)
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory for a buffer");
    b->mem = data;
    b->wrapped = true;
    b->release = release;
    b->user = user;
    add_buffer(ctx, b);
    *out = b;
    return KERN_OK;
}

kern_status kern_buffer_wrap(kern_context *ctx, kern_dtype dtype, int rank, const int64_t *shape,
                             void *data, void (*release)(void *user), void *user,
                             kern_buffer **out) {
    if (!ctx || !rt_handle_check(ctx, RT_H_CONTEXT, "kern_buffer_wrap"))
        return KERN_ERR_ARGUMENT;
    rt_clear_error(ctx);
    if (!out)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_buffer_wrap: out is NULL");
    *out = NULL;
    if (!ctx->dev)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "the context was not created successfully");
    return rt_buffer_wrap(ctx, "kern_buffer_wrap", dtype, rank, shape, data, release, user, out);
}

void *kern_buffer_pointer(const kern_buffer *b) {
    if (!b || !rt_handle_check(b, RT_H_BUFFER, "kern_buffer_pointer"))
        return NULL;
    return rt_device_caps(b->ctx->dev) & KERN_TARGET_POINTERS ? b->mem : NULL;
}

bool kern_buffer_is_wrapped(const kern_buffer *b) {
    return b && rt_handle_check(b, RT_H_BUFFER, "kern_buffer_is_wrapped") && b->wrapped;
}

/* The getters answer 0 for NULL and, in checked mode, for a released buffer. */
static bool live(const kern_buffer *b, const char *fn) {
    return b && rt_handle_check(b, RT_H_BUFFER, fn);
}
kern_dtype kern_buffer_dtype(const kern_buffer *b) {
    return live(b, "kern_buffer_dtype") ? b->dtype : (kern_dtype)0;
}
int kern_buffer_rank(const kern_buffer *b) { return live(b, "kern_buffer_rank") ? b->rank : 0; }
int64_t kern_buffer_extent(const kern_buffer *b, int dim) {
    if (!live(b, "kern_buffer_extent") || dim < 0)
        return 0;
    return dim < KERN_MAX_DIMS ? b->shape[dim] : 1;
}
int64_t kern_buffer_count(const kern_buffer *b) {
    return live(b, "kern_buffer_count") ? b->count : 0;
}
size_t kern_buffer_bytes(const kern_buffer *b) {
    return live(b, "kern_buffer_bytes") ? b->bytes : 0;
}
