/* dlpack.c - DLPack exchange (kern.h: kern_buffer_from_dlpack, kern_buffer_to_dlpack;
 * docs/runtime.md "Wrapped memory and DLPack"), with Debian's dlpack.h (0.6: the
 * unversioned DLManagedTensor that NumPy, PyTorch, JAX and CuPy exchange).
 *
 * Import wraps the tensor's memory (rt_buffer_wrap): the buffer owns the tensor and calls
 * its deleter through the retirement rules, once the buffer is released and no launch
 * in flight uses it. Export makes a tensor that views the buffer: the buffer counts its
 * views, and a buffer released while views remain is freed by the deleter of the last. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#ifdef KERN_HAVE_DLPACK
#include <dlpack/dlpack.h>

enum { DL_BOOL = 6 }; /* kDLBool of DLPack 0.8, which 0.6's header lacks */

/* kern's dtypes and their DLPack codes, both ways; bf16 is kDLBfloat. */
static const struct {
    kern_dtype d;
    uint8_t code, bits;
} dl_codes[] = {
    {KERN_F32, kDLFloat, 32},   {KERN_F64, kDLFloat, 64}, {KERN_I32, kDLInt, 32},
    {KERN_U32, kDLUInt, 32},    {KERN_I64, kDLInt, 64},   {KERN_BOOL, DL_BOOL, 8},
    {KERN_I8, kDLInt, 8},       {KERN_U8, kDLUInt, 8},    {KERN_I16, kDLInt, 16},
    {KERN_U16, kDLUInt, 16},    {KERN_U64, kDLUInt, 64},  {KERN_F16, kDLFloat, 16},
    {KERN_BF16, kDLBfloat, 16},
};

static bool dtype_of(DLDataType t, kern_dtype *out) {
    if (t.lanes != 1)
        return false;
    for (size_t i = 0; i < sizeof dl_codes / sizeof *dl_codes; i++)
        if (t.code == dl_codes[i].code && t.bits == dl_codes[i].bits) {
            *out = dl_codes[i].d;
            return true;
        }
    return false;
}

static DLDataType dl_dtype(kern_dtype d) {
    for (size_t i = 0; i < sizeof dl_codes / sizeof *dl_codes; i++)
        if (dl_codes[i].d == d)
            return (DLDataType){dl_codes[i].code, dl_codes[i].bits, 1};
    return (DLDataType){DL_BOOL, 8, 1};
}

static void call_deleter(void *user) {
    DLManagedTensor *t = user;
    if (t->deleter)
        t->deleter(t);
}

/* Where a DLPack device type keeps its memory, in words. */
static const char *memory_name(DLDeviceType type) {
    switch ((int)type) {
    case kDLCPU: return "host memory";
    case kDLCUDA: return "CUDA memory";
    case kDLCUDAHost: return "pinned host memory";
    case kDLVulkan: return "Vulkan memory";
    default: return "another device's memory";
    }
}

kern_status kern_buffer_from_dlpack(kern_context *ctx, void *managed_tensor, kern_buffer **out) {
    if (!ctx || !rt_handle_check(ctx, RT_H_CONTEXT, "kern_buffer_from_dlpack"))
        return KERN_ERR_ARGUMENT;
    rt_clear_error(ctx);
    const char *fn = "kern_buffer_from_dlpack";
    if (!out || !managed_tensor)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "%s: NULL tensor or out", fn);
    *out = NULL;
    if (!ctx->dev)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "the context was not created successfully");
    DLManagedTensor *mt = managed_tensor;
    const DLTensor *t = &mt->dl_tensor;
    const char *dev = ctx->dev->ops->name;
    /* the registry's DLPack device of the context's target: host memory (kDLCPU, which
     * also takes pinned kDLCUDAHost memory) or the context's GPU's (kDLCUDA, its ordinal) */
    int home = rt_device_caps(ctx->dev) & KERN_TARGET_DLPACK ? ctx->dev->ops->target->dlpack_device
                                                              : 0;
    bool usable = home == kDLCPU
                      ? t->device.device_type == kDLCPU || t->device.device_type == kDLCUDAHost
                      : home != 0 && (int)t->device.device_type == home &&
                            t->device.device_id == ctx->dev->ordinal;
    if (!usable)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "%s: a tensor in %s (DLPack device %d:%d) cannot be used in place by the "
                        "%s device %d, which %s",
                        fn, memory_name(t->device.device_type), (int)t->device.device_type,
                        t->device.device_id, dev, ctx->dev->ordinal,
                        home == kDLCPU    ? "takes host memory (kDLCPU, kDLCUDAHost)"
                        : home == kDLCUDA ? "takes CUDA memory of its own device (kDLCUDA, "
                                            "device N for cuda device N)"
                                          : "uses no DLPack memory in place (a kern buffer "
                                            "holds a copy)");
    kern_dtype d;
    if (!dtype_of(t->dtype, &d))
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "%s: DLPack dtype (code %u, %u bits, %u lanes) is not a kern dtype (f32, "
                        "f64, i32, u32, i64, bool, i8, u8, i16, u16, u64, f16, bf16)",
                        fn, t->dtype.code, t->dtype.bits, t->dtype.lanes);
    if (t->ndim < 1 || t->ndim > KERN_MAX_DIMS || !t->shape)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "%s: rank %d is not supported (rank 1 to %d)", fn,
                        t->ndim, KERN_MAX_DIMS);
    if (t->strides) { /* C order: each stride the product of the later extents */
        int64_t want = 1;
        for (int i = t->ndim - 1; i >= 0; i--) {
            if (t->shape[i] != 1 && t->strides[i] != want)
                return rt_error(ctx, KERN_ERR_ARGUMENT,
                                "%s: the tensor is not C-contiguous (stride %lld of dimension "
                                "%d, %lld expected)",
                                fn, (long long)t->strides[i], i, (long long)want);
            if (t->shape[i] < 0 || __builtin_mul_overflow(want, t->shape[i], &want))
                break; /* such extents are refused by the shape check below */
        }
    }
    void *data = (char *)t->data + t->byte_offset;
    return rt_buffer_wrap(ctx, fn, d, t->ndim, t->shape, data, call_deleter, mt, out);
}

/* The tensor kern_buffer_to_dlpack makes: the managed tensor, its shape, its buffer. */
typedef struct view {
    DLManagedTensor mt;
    int64_t shape[KERN_MAX_DIMS];
    kern_buffer *b;
} view;

static void view_deleter(DLManagedTensor *mt) {
    view *v = mt->manager_ctx;
    kern_buffer *b = v->b;
    free(v);
    if (--b->views == 0 && b->orphans)
        rt_orphan_destroy(b); /* its context is gone */
    else if (b->views == 0 && b->view_orphan)
        rt_buffer_destroy(b, false);
}

kern_status kern_buffer_to_dlpack(kern_buffer *b, void **managed_tensor) {
    if (!b || !rt_handle_check(b, RT_H_BUFFER, "kern_buffer_to_dlpack"))
        return KERN_ERR_ARGUMENT;
    kern_context *ctx = b->ctx;
    rt_clear_error(ctx);
    if (!managed_tensor)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_buffer_to_dlpack: out is NULL");
    *managed_tensor = NULL;
    if (!(rt_device_caps(ctx->dev) & KERN_TARGET_DLPACK)) {
        char names[128];
        return rt_error(ctx, KERN_ERR_UNSUPPORTED,
                        "kern_buffer_to_dlpack: the %s device's memory cannot be shared (%s can)",
                        ctx->dev->ops->name,
                        kern_target_names(KERN_TARGET_DEVICE | KERN_TARGET_DLPACK, names,
                                          sizeof names));
    }
    DLDevice where = {(DLDeviceType)ctx->dev->ops->target->dlpack_device, ctx->dev->ordinal};
    /* the consumer reads the memory on its own stream: the launches that use it first */
    char err[512];
    if (b->last_use > ctx->dev->ops->poll(ctx->dev)) {
        kern_status s = ctx->dev->ops->wait(ctx->dev, b->last_use, err, sizeof err);
        if (s != KERN_OK)
            return rt_error(ctx, s, "device %s: %s", ctx->dev->ops->name, err);
    }
    view *v = calloc(1, sizeof *v);
    if (!v)
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory for a DLPack tensor");
    memcpy(v->shape, b->shape, sizeof v->shape);
    v->b = b;
    v->mt.dl_tensor = (DLTensor){.data = b->mem,
                                 .device = where,
                                 .ndim = b->rank,
                                 .dtype = dl_dtype(b->dtype),
                                 .shape = v->shape,
                                 .strides = NULL,
                                 .byte_offset = 0};
    v->mt.manager_ctx = v;
    v->mt.deleter = view_deleter;
    b->views++;
    *managed_tensor = &v->mt;
    return KERN_OK;
}

#else /* no dlpack.h at build time */

kern_status kern_buffer_from_dlpack(kern_context *ctx, void *managed_tensor, kern_buffer **out) {
    (void)managed_tensor;
    if (out)
        *out = NULL;
    return ctx ? rt_error(ctx, KERN_ERR_UNSUPPORTED,
                          "kern_buffer_from_dlpack: this runtime was built without DLPack "
                          "(libdlpack-dev)")
               : KERN_ERR_ARGUMENT;
}

kern_status kern_buffer_to_dlpack(kern_buffer *b, void **managed_tensor) {
    if (managed_tensor)
        *managed_tensor = NULL;
    return b ? rt_error(b->ctx, KERN_ERR_UNSUPPORTED,
                        "kern_buffer_to_dlpack: this runtime was built without DLPack "
                        "(libdlpack-dev)")
             : KERN_ERR_ARGUMENT;
}

#endif
