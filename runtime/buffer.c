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
    if (!kern_dtype_name(dtype))
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_buffer_create: invalid dtype %d", (int)dtype);
    if (rank < 1 || rank > KERN_MAX_DIMS)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "kern_buffer_create: rank %d is not supported (rank 1 to %d)", rank,
                        KERN_MAX_DIMS);
    if (!shape)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_buffer_create: shape is NULL");
    int64_t count = 1;
    for (int d = 0; d < rank; d++) {
        if (shape[d] < 0)
            return rt_error(ctx, KERN_ERR_ARGUMENT,
                            "kern_buffer_create: extent %lld of dimension %d is negative",
                            (long long)shape[d], d);
        if (shape[d] > INT32_MAX)
            return rt_error(ctx, KERN_ERR_ARGUMENT,
                            "kern_buffer_create: extent %lld of dimension %d is too large "
                            "(at most %d: len() is i32)",
                            (long long)shape[d], d, INT32_MAX);
        if (__builtin_mul_overflow(count, shape[d], &count))
            count = INT64_MAX; /* caught below */
    }
    size_t esize = kern_dtype_size(dtype), bytes;
    if (count == INT64_MAX || (uint64_t)count > SIZE_MAX / esize ||
        __builtin_mul_overflow((size_t)count, esize, &bytes) || bytes > (size_t)PTRDIFF_MAX)
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY,
                        "kern_buffer_create: the array is too large to address");

    char err[512];
    kern_status s = KERN_OK;
    kern_buffer *b = calloc(1, sizeof *b);
    if (!b)
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory for a buffer");
    b->ctx = ctx;
    b->written = ++ctx->write_clock;
    b->dtype = dtype;
    b->rank = rank;
    for (int d = 0; d < KERN_MAX_DIMS; d++)
        b->shape[d] = d < rank ? shape[d] : 1;
    b->count = count;
    b->bytes = bytes;
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
    rt_list_init(&b->link);
    rt_list_push(&ctx->buffers, &b->link);
    rt_handle_add(b, RT_H_BUFFER, ctx);
    *out = b;
    return KERN_OK;
cleanup:
    if (b->mem)
        ctx->dev->ops->free(ctx->dev, b->mem);
    free(b);
    return s;
}

/* Waits for the last launch that used b, then collects completed launches. */
static kern_status wait_buffer(kern_buffer *b) {
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
        s = wait_buffer(b);
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
        s = wait_buffer(b);
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

void rt_buffer_destroy(kern_buffer *b, bool device_idle) {
    kern_context *ctx = b->ctx;
    rt_list_remove(&b->link);
    if (device_idle) {
        ctx->dev->ops->free(ctx->dev, b->mem);
    } else {
        char err[512];
        if (rt_retire_push(&ctx->retired, ctx->dev, b->mem, b->last_use, err, sizeof err) !=
            KERN_OK)
            rt_error(ctx, KERN_ERR_DEVICE, "device %s: %s", ctx->dev->ops->name, err);
    }
    rt_handle_free(b);
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
    rt_buffer_destroy(b, false);
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
