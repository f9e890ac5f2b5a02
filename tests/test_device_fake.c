/* test_device_fake.c - the runtime over a fake asynchronous device (suite `device_fake`,
 * tests/fake_device.h): what a GPU device relies on, checked without a GPU. Adstack
 * layouts (slot-major with slots from the host-known work-item counts, and slot slices),
 * heap sizing and growth (doubling, the exact-size retry, failure) while launches are in
 * flight, retirement of released buffers and superseded heaps until their launches
 * complete, the bounded retirement queue, extents that read arrays (waiting for their
 * writers on host memory, the full grid otherwise), and device error records observed
 * only after completion (runtime contracts 1, 4, 5, 6, 7 of docs/runtime-contracts.md).
 *
 * Expected offsets, slot counts and heap sizes are worked out by hand (in the comments)
 * from docs/gpu-abi.md and docs/runtime.md, not taken from the code under test. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../include/kern.h"
#include "../runtime/rt.h"
#include "fake_device.h"

static const char gpu_meta[] = "kern-meta 1\n"
                               "source tests/fake-gpu.kern\n"
                               "kernel roll 1 1 3 2\n"
                               "param n i32 0\nparam x f32[] 0\nparam cnt i32[] 0\n"
                               "task parallel 1 2 5\nextent 0 (dim 1 0)\n"
                               "task serial 0 3 5\n"
                               "kernel roll.grad 5 1 3 2\n"
                               "param n i32 0\nparam x f32[] 0\nparam cnt i32[] 0\n"
                               "task parallel 1 6 5\nextent 0 (dim 1 0)\n"
                               "task serial 0 7 5\n"
                               "adstack f64 8 9 (param 0)\n"
                               "adstack i32 9 9 (mul (param 0) 2)\n"
                               "adstack bool 10 9 7\n"
                               "kernel wild.grad 12 1 3 1\n"
                               "param n i32 0\nparam x f32[] 0\nparam cnt i32[] 0\n"
                               "task parallel 2 13 5\nextent 0 (dim 1 0)\nextent 1 ?\n"
                               "adstack f64 14 9 (param 0)\n"
                               "adstack i32 15 9 (mul (param 0) 2)\n"
                               "adstack bool 16 9 7\n"
                               "kernel scan.grad 20 1 3 1\n"
                               "param n i32 0\nparam x f32[] 0\nparam cnt i32[] 0\n"
                               "task parallel 1 21 5\nextent 0 (read 2 0)\n"
                               "adstack f64 22 9 (param 0)\n"
                               "end\n";

typedef struct env {
    fake_device *f;
    kern_context *ctx;
    kern_module *m;
    int releases;
} env;

static void count_release(void *user) { ((env *)user)->releases++; }
static void *no_lookup(void *user, const char *sym) { return NULL; }

static void env_init(env *e, bool slot_major, int64_t resident) {
    memset(e, 0, sizeof *e);
    e->f = fake_device_new(
        (fake_device_config){.host_memory = true, .slot_major = slot_major, .resident = resident});
    cr_assert_not_null(e->f);
    e->ctx = fake_context(e->f);
    cr_assert_not_null(e->ctx);
    char err[512];
    kern_meta *meta = kern_meta_parse(gpu_meta, strlen(gpu_meta), err, sizeof err);
    cr_assert(meta, "%s", err);
    kern_code_image img = {.kind = KERN_CODE_HOST, .host = {e, no_lookup, count_release}};
    cr_assert_eq(rt_module_create(e->ctx, meta, img, &e->m), KERN_OK, "%s",
                 kern_context_last_error(e->ctx));
}

static void env_fini(env *e) {
    kern_context_release(e->ctx);
    cr_assert_eq(e->f->code_loads, 1);
    cr_assert_eq(e->f->code_unloads, 1);
    cr_assert_eq(e->releases, 1, "the host provider is released with the module");
    cr_assert_eq(e->f->allocs, e->f->frees, "everything allocated is freed");
    cr_assert_eq(e->f->live_bytes, 0);
    fake_device_free(e->f);
}

static kern_kernel *find(env *e, const char *name) {
    kern_kernel *k = NULL;
    cr_assert_eq(kern_kernel_find(e->m, name, &k), KERN_OK, "%s", name);
    return k;
}

static kern_buffer *buf(env *e, kern_dtype t, int64_t n, const void *data) {
    kern_buffer *b = NULL;
    cr_assert_eq(kern_buffer_create(e->ctx, t, 1, &n, data, &b), KERN_OK, "%s",
                 kern_context_last_error(e->ctx));
    return b;
}

static kern_status launch(env *e, const char *kernel, int32_t n, kern_buffer *x, kern_buffer *cnt) {
    kern_arg a[3] = {kern_arg_i32(n), kern_arg_buffer(x), kern_arg_buffer(cnt)};
    return kern_launch(find(e, kernel), a, 3);
}

static const fake_launch_rec *last(env *e) { return &e->f->launches[e->f->nlaunch - 1]; }

static void expect_layout(const fake_launch_rec *r, const int64_t *want, int n) {
    cr_assert_eq(r->nstacks, n);
    for (int i = 0; i < 2 * n; i++)
        cr_assert_eq(r->layout[i], want[i], "layout[%d] = %lld, expected %lld", i,
                     (long long)r->layout[i], (long long)want[i]);
}

Test(device_fake, slot_major_layout_from_host_counts) {
    env e;
    env_init(&e, true, 4096);
    kern_buffer *x = buf(&e, KERN_F32, 1000, NULL), *cnt = buf(&e, KERN_I32, 4, NULL);
    cr_assert_eq(launch(&e, "roll.grad", 5, x, cnt), KERN_OK, "%s", kern_context_last_error(e.ctx));
    /* counts 1000 and 1: 1000 items rounded up to blocks of 256 = 1024 slots.
     * f64 x 5: 5 x 1024 x 8 = 40960 at 0; i32 x 10: 40960 at 40960; bool x 7: 7168 at
     * 81920 (to 89088 = 348 x 256) */
    const fake_launch_rec *r = last(&e);
    cr_assert_eq(r->ntasks, 2);
    cr_assert_eq(r->counts[0], 1000);
    cr_assert_eq(r->counts[1], 1);
    cr_assert_eq(r->slots, 1024);
    cr_assert_eq(r->stride, 5 * 8 + 10 * 4 + 7);
    expect_layout(r, (const int64_t[]){0, 5, 40960, 10, 81920, 7}, 3);
    kern_adstack_info info;
    cr_assert_eq(kern_context_adstack_info(e.ctx, &info), KERN_OK);
    cr_assert_eq(info.heap_bytes, 89088);
    cr_assert_eq(info.heap_allocs, 1);
    cr_assert_eq(info.last_slots, 1024);
    cr_assert_eq(info.last_stride, 87);
    cr_assert_eq(r->heap, e.ctx->adheap.mem);

    /* 100 items: 256 slots; 5 x 256 x 8 = 10240 at 0, 10240 at 10240, 1792 at 20480:
     * 22272 bytes, which the heap holds (no new allocation) */
    kern_buffer *x100 = buf(&e, KERN_F32, 100, NULL);
    cr_assert_eq(launch(&e, "roll.grad", 5, x100, cnt), KERN_OK);
    r = last(&e);
    cr_assert_eq(r->slots, 256);
    expect_layout(r, (const int64_t[]){0, 5, 10240, 10, 20480, 7}, 3);
    cr_assert_eq(kern_context_adstack_info(e.ctx, &info), KERN_OK);
    cr_assert_eq(info.heap_allocs, 1);

    /* a task whose extent is unknown: the full resident grid, 4096 slots:
     * 163840 at 0, 163840 at 163840, 28672 at 327680: 356352 bytes, more than twice the
     * heap (178176), so exactly that */
    cr_assert_eq(launch(&e, "wild.grad", 5, x, cnt), KERN_OK);
    r = last(&e);
    cr_assert_eq(r->counts[0], -1);
    cr_assert_eq(r->slots, 4096);
    expect_layout(r, (const int64_t[]){0, 5, 163840, 10, 327680, 7}, 3);
    cr_assert_eq(kern_context_adstack_info(e.ctx, &info), KERN_OK);
    cr_assert_eq(info.heap_bytes, 356352);
    cr_assert_eq(info.heap_allocs, 2);
    env_fini(&e);
}

Test(device_fake, slot_slices_layout_ignores_counts) {
    env e;
    env_init(&e, false, 3);
    kern_buffer *x = buf(&e, KERN_F32, 1000, NULL), *cnt = buf(&e, KERN_I32, 4, NULL);
    cr_assert_eq(launch(&e, "roll.grad", 5, x, cnt), KERN_OK);
    /* slices: f64 x 5 at 0 (40), i32 x 10 at 40 (to 80), bool x 7 at 80 (to 87): stride
     * 128; 3 slots (the resident threads, whatever the count): 384 bytes */
    const fake_launch_rec *r = last(&e);
    cr_assert_eq(r->slots, 3);
    cr_assert_eq(r->stride, 128);
    cr_assert_eq(r->counts[0], 1000);
    expect_layout(r, (const int64_t[]){0, 5, 40, 10, 80, 7}, 3);
    kern_adstack_info info;
    cr_assert_eq(kern_context_adstack_info(e.ctx, &info), KERN_OK);
    cr_assert_eq(info.heap_bytes, 384);
    /* kernels without adstacks get no heap, no slots, no layout */
    cr_assert_eq(launch(&e, "roll", 5, x, cnt), KERN_OK);
    r = last(&e);
    cr_assert_null(r->heap);
    cr_assert_eq(r->slots, 0);
    cr_assert_eq(r->stride, 0);
    cr_assert_eq(r->counts[0], 1000);
    cr_assert_eq(r->counts[1], 1);
    env_fini(&e);
}

Test(device_fake, heap_growth_retires_the_old_heap_until_its_launch_completes) {
    env e;
    env_init(&e, true, 4096);
    kern_buffer *x = buf(&e, KERN_F32, 1000, NULL), *cnt = buf(&e, KERN_I32, 4, NULL);
    cr_assert_eq(launch(&e, "roll.grad", 5, x, cnt), KERN_OK); /* 89088 bytes (above) */
    void *first = e.ctx->adheap.mem;
    /* n = 6 on 1024 slots: 6 x 8192 = 49152 at 0, 12 x 4096 = 49152 at 49152, 7168 at
     * 98304: 105472 needed; the heap doubles to 178176 */
    cr_assert_eq(launch(&e, "roll.grad", 6, x, cnt), KERN_OK);
    kern_adstack_info info;
    kern_context_adstack_info(e.ctx, &info);
    cr_assert_eq(info.heap_bytes, 178176);
    cr_assert_eq(info.heap_allocs, 2);
    void *second = e.ctx->adheap.mem;
    cr_assert_neq(second, first);
    cr_assert_eq(last(&e)->heap, second);
    cr_assert(!fake_was_freed(e.f, first), "launch 1 may still use the first heap");
    cr_assert_eq(e.ctx->retired.len, 1);
    cr_assert_eq(e.ctx->retired.items[0].point, 1, "retired with its last launch's point");
    cr_assert_eq(e.f->waits, 0, "growing never blocks");
    /* n = 12: 12 x 8192 = 98304 at 0, 98304 at 98304, 7168 at 196608: 203776 needed; the
     * doubled 356352 cannot be allocated, the exact size can */
    e.f->fail_alloc_over = 210000;
    cr_assert_eq(launch(&e, "roll.grad", 12, x, cnt), KERN_OK, "%s",
                 kern_context_last_error(e.ctx));
    kern_context_adstack_info(e.ctx, &info);
    cr_assert_eq(info.heap_bytes, 203776);
    cr_assert_eq(info.heap_allocs, 3);
    cr_assert_eq(e.ctx->retired.len, 2);
    /* n = 13 needs more than anything allowed: a clear error, the heap stays */
    void *third = e.ctx->adheap.mem;
    e.f->fail_alloc_over = 203776;
    int before = e.f->nlaunch;
    cr_assert_eq(launch(&e, "roll.grad", 13, x, cnt), KERN_ERR_OUT_OF_MEMORY);
    /* 13 x 8192 = 106496, 26 x 4096 = 106496 at 106496, 7168 at 212992: 220160 bytes;
     * a slot's share 13 x 8 + 26 x 4 + 7 = 215 */
    cr_assert_str_eq(kern_context_last_error(e.ctx),
                     "kernel 'roll.grad': cannot allocate the adstack heap: 220160 bytes (215 "
                     "bytes per thread x 1024 threads): fake: no room for 220160 bytes");
    cr_assert_eq(e.f->nlaunch, before, "not launched");
    cr_assert_eq(e.ctx->adheap.mem, third);
    /* launches 1 and 2 complete: the next launch's poll frees both superseded heaps */
    fake_complete(e.f, 2);
    cr_assert(!fake_was_freed(e.f, first), "freed by a poll, not behind the runtime's back");
    cr_assert_eq(launch(&e, "roll", 5, x, cnt), KERN_OK);
    cr_assert(fake_was_freed(e.f, first) && fake_was_freed(e.f, second));
    cr_assert_eq(e.ctx->retired.len, 0);
    cr_assert_eq(e.f->waits, 0);
    env_fini(&e);
}

Test(device_fake, released_buffers_retire_until_their_launches_complete) {
    env e;
    env_init(&e, true, 4096);
    kern_buffer *x = buf(&e, KERN_F32, 64, NULL), *cnt = buf(&e, KERN_I32, 4, NULL);
    kern_buffer *y = buf(&e, KERN_F32, 64, NULL);
    cr_assert_eq(launch(&e, "roll", 1, x, cnt), KERN_OK); /* point 1 */
    cr_assert_eq(launch(&e, "roll", 1, y, cnt), KERN_OK); /* point 2 */
    void *xmem = x->mem, *ymem = y->mem;
    kern_buffer_release(x);
    cr_assert(!fake_was_freed(e.f, xmem));
    cr_assert_eq(e.ctx->retired.len, 1);
    /* a read of y waits for y's launch only */
    fake_complete(e.f, 0);
    float back[64];
    cr_assert_eq(kern_buffer_read(y, back, sizeof back), KERN_OK);
    cr_assert_eq(e.f->waits, 1);
    cr_assert_eq(e.f->completed, 2);
    cr_assert(fake_was_freed(e.f, xmem), "point 1 passed with point 2; the read polled the queue");
    cr_assert_eq(e.ctx->retired.len, 0);
    kern_buffer_release(y); /* completed: freed at once */
    cr_assert(fake_was_freed(e.f, ymem));
    /* released in flight, then drained by a sync */
    kern_buffer *z = buf(&e, KERN_F32, 64, NULL);
    cr_assert_eq(launch(&e, "roll", 1, z, cnt), KERN_OK); /* point 3 */
    void *zmem = z->mem;
    kern_buffer_release(z);
    cr_assert(!fake_was_freed(e.f, zmem));
    cr_assert_eq(kern_sync(e.ctx), KERN_OK);
    cr_assert(fake_was_freed(e.f, zmem), "a sync drains the queue");
    cr_assert_eq(e.ctx->retired.len, 0);
    env_fini(&e);
}

Test(device_fake, retirement_queue_is_bounded) {
    env e;
    env_init(&e, true, 4096);
    kern_buffer *cnt = buf(&e, KERN_I32, 4, NULL);
    enum { N = RT_RETIRE_DEPTH + 3 };
    kern_buffer *bs[N];
    void *mem[N];
    for (int i = 0; i < N; i++) {
        bs[i] = buf(&e, KERN_F32, 8, NULL);
        mem[i] = bs[i]->mem;
        cr_assert_eq(launch(&e, "roll", 1, bs[i], cnt), KERN_OK); /* point i + 1 */
    }
    for (int i = 0; i < RT_RETIRE_DEPTH; i++)
        kern_buffer_release(bs[i]);
    cr_assert_eq(e.f->waits, 0, "up to the depth, releases never block");
    cr_assert_eq(e.ctx->retired.len, RT_RETIRE_DEPTH);
    /* one more: the runtime waits for the oldest entry only (point 1) */
    kern_buffer_release(bs[RT_RETIRE_DEPTH]);
    cr_assert_eq(e.f->waits, 1);
    cr_assert_eq(e.f->completed, 1);
    cr_assert(fake_was_freed(e.f, mem[0]));
    cr_assert(!fake_was_freed(e.f, mem[1]));
    cr_assert_eq(e.ctx->retired.len, RT_RETIRE_DEPTH);
    /* launches 2..5 complete on their own: the next release polls first and frees them,
     * so it needs no wait */
    fake_complete(e.f, 5);
    kern_buffer_release(bs[RT_RETIRE_DEPTH + 1]);
    cr_assert_eq(e.f->waits, 1);
    cr_assert(fake_was_freed(e.f, mem[4]) && !fake_was_freed(e.f, mem[5]));
    cr_assert_eq(e.ctx->retired.len, RT_RETIRE_DEPTH - 3);
    kern_buffer_release(bs[RT_RETIRE_DEPTH + 2]);
    cr_assert_eq(e.f->waits, 1);
    env_fini(&e);
}

Test(device_fake, error_records_are_observed_after_completion) {
    env e;
    env_init(&e, true, 4096);
    kern_buffer *x = buf(&e, KERN_F32, 10, NULL), *cnt = buf(&e, KERN_I32, 4, NULL);
    cr_assert_eq(launch(&e, "roll", 1, x, cnt), KERN_OK); /* launch 0, point 1 */
    fake_set_error(e.f, 0, (kern_err_record){KERN_DEVERR_BOUNDS, 2, 5, 0, 10, 10});
    cr_assert_eq(launch(&e, "roll.grad", 5, x, cnt), KERN_OK); /* launch 1, point 2 */
    fake_set_error(e.f, 1, (kern_err_record){KERN_DEVERR_ADSTACK, 8, 9, 0, 9, 5});
    cr_assert_eq(e.ctx->npending, 2, "nothing has completed, nothing is reported");
    cr_assert_eq(e.ctx->pending[0]->rec.code, 0, "the record is written at completion");
    /* launch 0 completes: the next launch observes its error and is not submitted */
    fake_complete(e.f, 1);
    cr_assert_eq(launch(&e, "roll", 1, x, cnt), KERN_ERR_DEVICE);
    cr_assert_str_eq(kern_context_last_error(e.ctx),
                     "kernel 'roll' (tests/fake-gpu.kern:2:5): index 10 out of bounds for "
                     "dimension 0 of extent 10 (observed before launching 'roll', which was not "
                     "launched)");
    cr_assert_eq(e.f->nlaunch, 2);
    /* the adstack overflow of launch 1 comes with the sync that waits for it */
    cr_assert_eq(kern_sync(e.ctx), KERN_ERR_DEVICE);
    cr_assert_str_eq(kern_context_last_error(e.ctx),
                     "kernel 'roll.grad': adstack overflow in the loop at "
                     "tests/fake-gpu.kern:8:9: it needs 9 entries, the capacity is 5; raise it "
                     "with --ad-stack-size N (kernc) or kern_context_options.ad_stack_size");
    cr_assert_eq(kern_sync(e.ctx), KERN_OK, "each error is reported once");
    /* a lost device is an error of the call that waits */
    cr_assert_eq(launch(&e, "roll", 1, x, cnt), KERN_OK);
    e.f->wait_fails = true;
    float back[10];
    cr_assert_eq(kern_buffer_read(x, back, sizeof back), KERN_ERR_DEVICE);
    cr_assert_str_eq(kern_context_last_error(e.ctx), "device fake: fake: the device was lost");
    e.f->wait_fails = false;
    env_fini(&e);
}

Test(device_fake, extents_that_read_arrays) {
    env e;
    env_init(&e, true, 4096);
    int32_t c[4] = {300, 0, 0, 0};
    kern_buffer *x = buf(&e, KERN_F32, 10, NULL), *cnt = buf(&e, KERN_I32, 4, c);
    /* host memory: the count reads cnt[0] after waiting for the launch that used cnt */
    cr_assert_eq(launch(&e, "roll", 1, x, cnt), KERN_OK); /* point 1, uses cnt */
    cr_assert_eq(launch(&e, "scan.grad", 2, x, cnt), KERN_OK);
    cr_assert_eq(e.f->waits, 1);
    cr_assert_eq(e.f->completed, 1);
    const fake_launch_rec *r = last(&e);
    cr_assert_eq(r->counts[0], 300);
    cr_assert_eq(r->slots, 512, "300 items rounded up to blocks of 256");
    /* memory the host cannot read: no wait, an unknown count, the resident grid */
    e.f->base.host_memory = false;
    cr_assert_eq(launch(&e, "scan.grad", 2, x, cnt), KERN_OK);
    cr_assert_eq(e.f->waits, 1);
    r = last(&e);
    cr_assert_eq(r->counts[0], -1);
    cr_assert_eq(r->slots, 4096);
    e.f->base.host_memory = true;
    env_fini(&e);
}

/* ---- device sizing (runtime contract 3) --------------------------------------------- */

static const char sizer_meta[] = "kern-meta 1\n"
                                 "kernel ragged.grad 1 1 2 1\n"
                                 "param count i32[] 0 0\nparam y f32[] 0\n"
                                 "task parallel 1 2 5\nextent 0 (dim 0 0)\n"
                                 "adstack f32 3 9 (maxover v0 0 (dim 0 0) (max 0 (read 0 v0)))\n"
                                 "kernel bump 5 1 1 1\n"
                                 "param count i32[] 0\n"
                                 "task parallel 1 6 5\nextent 0 (dim 0 0)\n"
                                 "end\n";

/* A capacity that reads device memory is sized by the device's sizer, once while its
 * arrays stay unchanged, again after kern_buffer_write or a launch that writes them. */
Test(device_fake, device_sizing_runs_only_when_bounds_may_have_changed) {
    fake_device *f =
        fake_device_new((fake_device_config){.slot_major = true, .resident = 4096, .sizer = true});
    cr_assert_not_null(f);
    kern_context *ctx = fake_context(f);
    char err[512];
    kern_meta *meta = kern_meta_parse(sizer_meta, strlen(sizer_meta), err, sizeof err);
    cr_assert(meta, "%s", err);
    kern_module *m;
    kern_code_image img = {.kind = KERN_CODE_HOST, .host = {NULL, no_lookup, NULL}};
    cr_assert_eq(rt_module_create(ctx, meta, img, &m), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_kernel *g, *bump;
    cr_assert_eq(kern_kernel_find(m, "ragged.grad", &g), KERN_OK);
    cr_assert_eq(kern_kernel_find(m, "bump", &bump), KERN_OK);
    int32_t cnt[5] = {3, 9, 0, 4, 1};
    int64_t n = 5;
    kern_buffer *bc, *by;
    cr_assert_eq(kern_buffer_create(ctx, KERN_I32, 1, &n, cnt, &bc), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, NULL, &by), KERN_OK);
    kern_arg a[2] = {kern_arg_buffer(bc), kern_arg_buffer(by)};
    int64_t cap;
    for (int i = 0; i < 3; i++) /* y is written each time; count, read only, is not */
        cr_assert_eq(kern_launch(g, a, 2), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(f->sizings, 1, "one sizing for three launches over unchanged bounds");
    cr_assert_eq(kern_context_adstack_last(ctx, 0, NULL, &cap), KERN_OK);
    cr_assert_eq(cap, 9);
    cnt[3] = 12;
    cr_assert_eq(kern_buffer_write(bc, cnt, sizeof cnt), KERN_OK);
    cr_assert_eq(kern_launch(g, a, 2), KERN_OK);
    cr_assert_eq(f->sizings, 2, "kern_buffer_write invalidates the sizing");
    cr_assert_eq(kern_context_adstack_last(ctx, 0, NULL, &cap), KERN_OK);
    cr_assert_eq(cap, 12);
    cr_assert_eq(kern_launch(bump, a, 1), KERN_OK); /* bump may write count */
    cr_assert_eq(kern_launch(g, a, 2), KERN_OK);
    cr_assert_eq(f->sizings, 3, "a launch that may write count invalidates it");
    kern_buffer *bc2;
    cr_assert_eq(kern_buffer_create(ctx, KERN_I32, 1, &n, cnt, &bc2), KERN_OK);
    a[0] = kern_arg_buffer(bc2);
    cr_assert_eq(kern_launch(g, a, 2), KERN_OK);
    cr_assert_eq(f->sizings, 4, "another buffer is sized anew");
    /* a sizer's error is a clear launch error */
    int64_t n0 = 0;
    kern_buffer *empty;
    cr_assert_eq(kern_buffer_create(ctx, KERN_I32, 1, &n0, NULL, &empty), KERN_OK);
    a[0] = kern_arg_buffer(empty);
    cr_assert_eq(kern_launch(g, a, 2), KERN_OK, "an empty range sizes to 0: %s",
                 kern_context_last_error(ctx));
    cr_assert_eq(kern_context_adstack_last(ctx, 0, NULL, &cap), KERN_OK);
    cr_assert_eq(cap, 0);
    kern_context_release(ctx);
    fake_device_free(f);
}

/* ---- graphs (runtime contract 9) on an asynchronous device without device graphs ------ */

/* A graph keeps its buffers and the heap in place: a buffer released while the graph
 * lives is neither freed nor retired until the graph goes; the heap may not grow (a launch
 * that needs more fails and says why); each replay submits the recorded launches with the
 * heap and layout they were captured with. */
Test(device_fake, graphs_keep_buffers_and_the_heap_in_place) {
    env e;
    env_init(&e, true, 4096);
    kern_buffer *x = buf(&e, KERN_F32, 64, NULL), *cnt = buf(&e, KERN_I32, 4, NULL);
    cr_assert_eq(kern_graph_begin(e.ctx), KERN_OK);
    int before = e.f->nlaunch;
    cr_assert_eq(launch(&e, "roll.grad", 3, x, cnt), KERN_OK, "%s", kern_context_last_error(e.ctx));
    cr_assert_eq(e.f->nlaunch, before, "a captured launch is not submitted");
    kern_graph *g;
    cr_assert_eq(kern_graph_end(e.ctx, &g), KERN_OK);
    void *heap = e.ctx->adheap.mem, *xmem = x->mem;
    size_t heap_bytes = e.ctx->adheap.bytes;
    kern_buffer_release(x); /* the graph still uses it */
    cr_assert(!fake_was_freed(e.f, xmem));
    cr_assert_eq(e.ctx->retired.len, 0, "not retired either: the graph may replay any time");
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(kern_graph_launch(g), KERN_OK, "%s", kern_context_last_error(e.ctx));
        const fake_launch_rec *l = last(&e);
        cr_assert_eq(l->heap, heap, "the captured heap, in place");
        cr_assert_eq(l->mem[1], xmem, "the released buffer, still there");
        int64_t want[6] = {0, 3, 0, 0, 0, 0};
        cr_assert_eq(l->layout[1], want[1], "capacity (param 0) = 3 as captured");
    }
    /* the heap is pinned: a launch needing more fails, one that fits runs */
    kern_buffer *y = buf(&e, KERN_F32, 64, NULL);
    cr_assert_eq(launch(&e, "roll.grad", 100000, y, cnt), KERN_ERR_OUT_OF_MEMORY);
    cr_assert(strstr(kern_context_last_error(e.ctx), "1 captured graph uses it"), "%s",
              kern_context_last_error(e.ctx));
    cr_assert_eq(e.ctx->adheap.mem, heap);
    cr_assert_eq(e.ctx->adheap.bytes, heap_bytes);
    cr_assert_eq(launch(&e, "roll.grad", 3, y, cnt), KERN_OK, "%s", kern_context_last_error(e.ctx));
    /* the graph goes: its released buffer is retired until its replays complete */
    kern_graph_release(g);
    cr_assert(fake_was_freed(e.f, xmem), "freed once the graph's replays completed");
    cr_assert_eq(launch(&e, "roll.grad", 100000, y, cnt), KERN_OK, "the heap grows again: %s",
                 kern_context_last_error(e.ctx));
    env_fini(&e);
}
