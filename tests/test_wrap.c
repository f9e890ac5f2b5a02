/* test_wrap.c - memory kern does not own (kern_buffer_wrap) and DLPack exchange
 * (kern_buffer_from_dlpack, kern_buffer_to_dlpack; docs/runtime.md "Wrapped memory and
 * DLPack"): launches work in place on the caller's memory, the owner's release comes
 * exactly once and only after the release of the buffer, and views outlive the buffer
 * (suite `wrap`). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef KERN_HAVE_DLPACK
#include <dlpack/dlpack.h>
#endif

#include "../include/kern.h"

static const char *const src = "kernel scale(x: f32[], y: f32[], a: f32) {\n"
                               "    for i in 0..len(x) { y[i] = a * x[i]; }\n"
                               "}\n";

typedef struct owner {
    int released;
} owner;

static void release_cb(void *user) { ((owner *)user)->released++; }

static kern_kernel *scale_kernel(kern_context *ctx, kern_module **mod) {
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "wrap.kern", mod), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(*mod, "scale", &k), KERN_OK);
    return k;
}

Test(wrap, launches_work_in_place_and_release_comes_after) {
    kern_context *ctx;
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    kern_module *mod;
    kern_kernel *k = scale_kernel(ctx, &mod);
    float x[5] = {1, 2, 3, 4, 5}, y[5] = {0};
    int64_t n = 5;
    owner ox = {0}, oy = {0};
    kern_buffer *bx, *by;
    cr_assert_eq(kern_buffer_wrap(ctx, KERN_F32, 1, &n, x, release_cb, &ox, &bx), KERN_OK);
    cr_assert_eq(kern_buffer_wrap(ctx, KERN_F32, 1, &n, y, release_cb, &oy, &by), KERN_OK);
    cr_expect(kern_buffer_is_wrapped(bx));
    cr_expect_eq(kern_buffer_pointer(by), (void *)y, "the caller's memory itself");
    kern_arg args[] = {kern_arg_buffer(bx), kern_arg_buffer(by), kern_arg_f32(3)};
    cr_assert_eq(kern_launch(k, args, 3), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_sync(ctx), KERN_OK);
    for (int i = 0; i < 5; i++)
        cr_expect_eq(y[i], 3 * x[i], "y[%d] written in place", i);
    cr_expect_eq(ox.released + oy.released, 0, "nothing released while the buffers live");
    kern_buffer_release(bx);
    kern_sync(ctx);
    cr_expect_eq(ox.released, 1, "released once, after kern_buffer_release");
    kern_context_release(ctx); /* releases by with the context */
    cr_expect_eq(oy.released, 1);
    cr_expect_eq(ox.released, 1, "never twice");
}

Test(wrap, bad_wraps_are_refused_and_keep_ownership) {
    kern_context *ctx;
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    owner o = {0};
    float mem[8];
    int64_t n = 4, neg = -1;
    kern_buffer *b = NULL;
    cr_expect_eq(kern_buffer_wrap(ctx, KERN_F32, 1, &n, NULL, release_cb, &o, &b),
                 KERN_ERR_ARGUMENT);
    cr_expect(strstr(kern_context_last_error(ctx), "data is NULL"));
    cr_expect_eq(kern_buffer_wrap(ctx, KERN_F32, 1, &n, (char *)mem + 1, release_cb, &o, &b),
                 KERN_ERR_ARGUMENT);
    cr_expect(strstr(kern_context_last_error(ctx), "not aligned"), "%s",
              kern_context_last_error(ctx));
    cr_expect_eq(kern_buffer_wrap(ctx, KERN_F32, 1, &neg, mem, release_cb, &o, &b),
                 KERN_ERR_ARGUMENT);
    cr_expect_eq(kern_buffer_wrap(ctx, KERN_F32, 5, &n, mem, release_cb, &o, &b),
                 KERN_ERR_ARGUMENT);
    cr_expect_null(b);
    kern_context_release(ctx);
    cr_expect_eq(o.released, 0, "a failed wrap never calls release");
}

#ifdef KERN_HAVE_DLPACK
typedef struct producer {
    DLManagedTensor mt;
    int64_t shape[2], strides[2];
    float data[6];
    int deleted;
} producer;

static void producer_deleter(DLManagedTensor *mt) { ((producer *)mt->manager_ctx)->deleted++; }

static producer *make_producer(void) {
    producer *p = calloc(1, sizeof *p);
    for (int i = 0; i < 6; i++)
        p->data[i] = (float)i + 0.5f;
    p->shape[0] = 2;
    p->shape[1] = 3;
    p->mt.dl_tensor = (DLTensor){p->data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, p->shape, NULL, 0};
    p->mt.manager_ctx = p;
    p->mt.deleter = producer_deleter;
    return p;
}

Test(wrap, dlpack_import_in_place_then_deleter) {
    kern_context *ctx;
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    producer *p = make_producer();
    kern_buffer *b;
    cr_assert_eq(kern_buffer_from_dlpack(ctx, &p->mt, &b), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    cr_expect_eq(kern_buffer_rank(b), 2);
    cr_expect_eq(kern_buffer_extent(b, 1), 3);
    cr_expect_eq(kern_buffer_pointer(b), (void *)p->data);
    float w[6] = {9, 8, 7, 6, 5, 4};
    cr_assert_eq(kern_buffer_write(b, w, sizeof w), KERN_OK);
    cr_expect_eq(p->data[5], 4.0f, "written into the producer's memory");
    cr_expect_eq(p->deleted, 0);
    kern_buffer_release(b);
    kern_sync(ctx);
    cr_expect_eq(p->deleted, 1, "the deleter once the buffer is released");
    kern_context_release(ctx);
    free(p);
}

Test(wrap, dlpack_refusals) {
    kern_context *ctx;
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    producer *p = make_producer();
    kern_buffer *b = NULL;
    p->mt.dl_tensor.device.device_type = kDLCUDA;
    cr_expect_eq(kern_buffer_from_dlpack(ctx, &p->mt, &b), KERN_ERR_ARGUMENT);
    cr_expect(strstr(kern_context_last_error(ctx), "a tensor in CUDA memory (DLPack device 2:0) "
                                                   "cannot be used in place by the cpu device 0, "
                                                   "which takes host memory"),
              "%s", kern_context_last_error(ctx));
    p->mt.dl_tensor.device.device_type = kDLCPU;
    p->mt.dl_tensor.dtype = (DLDataType){kDLFloat, 8, 1}; /* no 8-bit float in kern */
    cr_expect_eq(kern_buffer_from_dlpack(ctx, &p->mt, &b), KERN_ERR_ARGUMENT);
    cr_expect(strstr(kern_context_last_error(ctx), "is not a kern dtype"));
    p->mt.dl_tensor.dtype = (DLDataType){kDLFloat, 32, 1};
    p->strides[0] = 1;
    p->strides[1] = 2; /* Fortran order */
    p->mt.dl_tensor.strides = p->strides;
    cr_expect_eq(kern_buffer_from_dlpack(ctx, &p->mt, &b), KERN_ERR_ARGUMENT);
    cr_expect(strstr(kern_context_last_error(ctx), "not C-contiguous"), "%s",
              kern_context_last_error(ctx));
    /* extents whose product overflows int64, with C-order strides: the extent check
     * refuses them (the stride check multiplied past int64 first, undefined behaviour
     * that UBSan reports) */
    p->shape[0] = p->shape[1] = (int64_t)1 << 40;
    p->strides[0] = (int64_t)1 << 40;
    p->strides[1] = 1;
    cr_expect_eq(kern_buffer_from_dlpack(ctx, &p->mt, &b), KERN_ERR_ARGUMENT);
    cr_expect(strstr(kern_context_last_error(ctx), "is too large"), "%s",
              kern_context_last_error(ctx));
    p->shape[0] = -((int64_t)1 << 62); /* negative extents, one stride wrapping the product */
    p->shape[1] = 4;
    p->strides[0] = 4;
    cr_expect_eq(kern_buffer_from_dlpack(ctx, &p->mt, &b), KERN_ERR_ARGUMENT);
    cr_expect(strstr(kern_context_last_error(ctx), "is negative"), "%s",
              kern_context_last_error(ctx));
    p->shape[0] = 2;
    p->shape[1] = 3;
    p->strides[0] = 3;
    p->strides[1] = 1; /* C order, given explicitly */
    cr_expect_eq(kern_buffer_from_dlpack(ctx, &p->mt, &b), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    kern_context_release(ctx);
    cr_expect_eq(p->deleted, 1, "only the accepted import owns the tensor");
    free(p);
}

Test(wrap, dlpack_export_views_outlive_the_buffer) {
    kern_context *ctx;
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    float v[4] = {1, 2, 3, 4};
    int64_t n = 4;
    kern_buffer *b;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, v, &b), KERN_OK);
    void *p1, *p2;
    cr_assert_eq(kern_buffer_to_dlpack(b, &p1), KERN_OK);
    cr_assert_eq(kern_buffer_to_dlpack(b, &p2), KERN_OK);
    DLManagedTensor *t1 = p1, *t2 = p2;
    cr_expect_eq(t1->dl_tensor.ndim, 1);
    cr_expect_eq(t1->dl_tensor.shape[0], 4);
    cr_expect_eq(t1->dl_tensor.dtype.code, kDLFloat);
    cr_expect_eq(t1->dl_tensor.data, kern_buffer_pointer(b));
    kern_buffer_release(b); /* the views keep the memory */
    cr_expect_eq(((float *)t2->dl_tensor.data)[3], 4.0f);
    t1->deleter(t1);
    cr_expect_eq(((float *)t2->dl_tensor.data)[2], 3.0f, "the last view still reads it");
    t2->deleter(t2); /* frees the buffer (ASan would see a leak or a use after free) */
    kern_context_release(ctx);
}

/* The context released while views of its buffers live (Python drops the context before
 * the tensors): the views keep the memory, and the last one frees it and the device. */
Test(wrap, dlpack_views_outlive_the_context) {
    kern_context *ctx;
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    int64_t n = 1000;
    float v[1000];
    for (int i = 0; i < 1000; i++)
        v[i] = (float)i;
    kern_buffer *a, *b, *c;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, v, &a), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, v, &b), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, v, &c), KERN_OK); /* not viewed */
    void *pa, *pb, *pb2;
    cr_assert_eq(kern_buffer_to_dlpack(a, &pa), KERN_OK);
    cr_assert_eq(kern_buffer_to_dlpack(b, &pb), KERN_OK);
    cr_assert_eq(kern_buffer_to_dlpack(b, &pb2), KERN_OK);
    kern_buffer_release(a); /* released before the context, b with it */
    kern_context_release(ctx);
    DLManagedTensor *ta = pa, *tb = pb, *tb2 = pb2;
    cr_expect_eq(((float *)ta->dl_tensor.data)[999], 999.0f);
    ((float *)tb->dl_tensor.data)[5] = -1.0f; /* still the tensor's memory */
    ta->deleter(ta);
    tb->deleter(tb);
    cr_expect_eq(((float *)tb2->dl_tensor.data)[5], -1.0f, "the last view still reads it");
    tb2->deleter(tb2); /* the last: frees b and the device (ASan checks both) */
}
#endif
