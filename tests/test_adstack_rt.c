/* test_adstack_rt.c - the runtime side of reverse mode (suite `adstack_rt`): adstack and
 * graderror metadata, per-launch layout and heap sizing (runtime/adstack.h), heap reuse,
 * doubling growth and the exact-size retry, size overflows and out-of-memory errors,
 * the slices a CPU launch hands to each thread, the overflow message, the K.grad lookup
 * error, and the gradient tape (hand-written kernels and JIT-compiled ones, compared
 * with plain C loops).
 *
 * Expected offsets, capacities and messages are worked out by hand from the rules in
 * docs/runtime.md, not taken from the code under test. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../include/kern.h"
#include "../runtime/abi.h"
#include "../runtime/adstack.h"
#include "../runtime/meta.h"
#include "../runtime/provider.h"
#include "../runtime/rt.h"
#include "fake_device.h"
#include "test_backend.h"

/* ---- metadata ----------------------------------------------------------------------- */

static const char ad_meta[] =
    "kern-meta 1\n"
    "source tests/ad.kern\n"
    "kernel walk 1 1 3 1\nparam n i32 0\nparam x f64[] 0\nparam cnt i32[] 0\n"
    "task parallel 1 2 5\n"
    "graderror x is read at 3:5 and written at 4:9\n"
    "kernel walk.grad 1 1 4 1\nparam n i32 0\nparam x f64[] 0\nparam cnt i32[] 0\n"
    "param x.grad f64[] 0\n"
    "task parallel 1 2 5\n"
    "adstack f64 3 5 (param 0)\n"
    "adstack i32 4 9 (mul (param 0) 2)\n"
    "adstack bool 5 1 (maxover v0 0 (dim 2 0) (max 0 (read 2 v0)))\n"
    "adstack f32 6 2 7\n"
    "end\n";

static kern_meta *parse_ok(const char *text) {
    char err[512];
    kern_meta *m = kern_meta_parse(text, strlen(text), err, sizeof err);
    cr_assert(m, "%s", err);
    return m;
}

Test(adstack_rt, meta_parses_adstacks_and_graderror) {
    kern_meta *m = parse_ok(ad_meta);
    const kern_meta_kernel *p = kern_meta_find(m, "walk");
    const kern_meta_kernel *g = kern_meta_find(m, "walk.grad");
    cr_assert(p && g);
    cr_assert_eq(p->nadstacks, 0);
    cr_assert_str_eq(p->grad_error, "x is read at 3:5 and written at 4:9");
    cr_assert_null(g->grad_error);
    cr_assert_eq(g->nadstacks, 4);
    static const char *types[] = {"f64", "i32", "bool", "f32"};
    static const uint32_t lines[] = {3, 4, 5, 6}, cols[] = {5, 9, 1, 2};
    for (int i = 0; i < 4; i++) {
        cr_assert_str_eq(g->adstacks[i].type->name, types[i]);
        cr_assert_eq(g->adstacks[i].line, lines[i]);
        cr_assert_eq(g->adstacks[i].col, cols[i]);
        cr_assert_not_null(g->adstacks[i].expr);
    }
    cr_assert_str_eq(g->adstacks[2].cap, "(maxover v0 0 (dim 2 0) (max 0 (read 2 v0)))");
    cr_assert_eq(g->adstacks[2].expr->op, SZ_MAXOVER);
    cr_assert_eq(g->adstacks[3].expr->op, SZ_CONST);
    cr_assert_eq(g->adstacks[3].expr->v, 7);
    /* print round trip */
    kern_buf b = {0};
    kern_meta_print(&b, m);
    cr_assert_eq(b.len, strlen(ad_meta));
    cr_assert(memcmp(b.data, ad_meta, b.len) == 0, "%.*s", (int)b.len, b.data);
    buf_free(&b);
    kern_meta_free(m);
}

Test(adstack_rt, meta_mutations_never_crash_and_reprint) {
    size_t n = strlen(ad_meta);
    char *t = malloc(n + 1);
    char err[512];
    for (size_t len = 0; len + 1 < n; len++) {
        kern_meta *m = kern_meta_parse(ad_meta, len, err, sizeof err);
        cr_expect_null(m, "prefix of %zu bytes parsed", len);
        kern_meta_free(m);
    }
    const char subst[] = {'\0', ' ', '\n', '(', ')', '0', '9', '-', 'v', 'x', '\t'};
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < sizeof subst; k++) {
            memcpy(t, ad_meta, n + 1);
            t[i] = subst[k];
            kern_meta *m = kern_meta_parse(t, n, err, sizeof err);
            if (m) {
                kern_buf b = {0};
                kern_meta_print(&b, m);
                kern_meta *m2 = kern_meta_parse(b.data, b.len, err, sizeof err);
                cr_expect(m2, "reprint does not parse: %s", err);
                if (m2) {
                    kern_buf b2 = {0};
                    kern_meta_print(&b2, m2);
                    cr_expect(b2.len == b.len && memcmp(b.data, b2.data, b.len) == 0);
                    buf_free(&b2);
                }
                kern_meta_free(m2);
                buf_free(&b);
            }
            kern_meta_free(m);
        }
    }
    free(t);
}

static const struct {
    const char *tail; /* after "kernel k 1 1 2 1\nparam n i32 0\nparam a i32[,] 0\ntask..." */
    const char *msg;
} bad_meta[] = {
    {"adstack f64 3 5 (param 0\nend\n", "metadata line 6: adstack: bad SizeExpr '(param 0': "},
    {"adstack f64 3 5 \nend\n", "metadata line 6: adstack: empty SizeExpr"},
    {"adstack f64 3 5\nend\n", "metadata line 6: adstack: expected 'adstack TYPE LINE COL "},
    {"adstack f64[] 3 5 1\nend\n", "metadata line 6: adstack: bad element type 'f64[]'"},
    {"adstack void 3 5 1\nend\n", "metadata line 6: adstack: bad element type 'void'"},
    {"adstack f64 x 5 1\nend\n", "metadata line 6: LINE 'x' is not a number"},
    {"adstack f64 3 5 (param 1)\nend\n",
     "metadata line 6: adstack: SizeExpr (param 1) names 'a' of type i32[,], not a scalar "
     "integer"},
    {"adstack f64 3 5 (param 2)\nend\n",
     "metadata line 6: adstack: SizeExpr parameter 2 does not exist (the kernel has 2)"},
    {"adstack f64 3 5 (dim 1 2)\nend\n",
     "metadata line 6: adstack: SizeExpr (dim 1 2) names 'a' of type i32[,]: no such "
     "dimension"},
    {"adstack f64 3 5 (dim 0 0)\nend\n",
     "metadata line 6: adstack: SizeExpr (dim 0 0) names 'n' of type i32: no such dimension"},
    {"adstack f64 3 5 (read 1 0)\nend\n",
     "metadata line 6: adstack: SizeExpr (read 1 ...) with 1 indices names 'a' of type "
     "i32[,], not an integer array of that rank"},
    {"adstack f64 3 5 1\tx\nend\n", "metadata line 6: control character 0x09"},
    {"graderror \nend\n", "metadata line 6: graderror: nothing after it"},
    {"graderror x\nadstack f64 3 5 1\nend\n",
     "metadata line 7: 'adstack' must follow a kernel's tasks (adstacks first, then "
     "graderror, then access)"},
    {"graderror x\ngraderror y\nend\n",
     "metadata line 7: 'graderror' must follow a kernel's tasks"},
};

Test(adstack_rt, meta_errors_name_the_line) {
    for (size_t i = 0; i < sizeof bad_meta / sizeof bad_meta[0]; i++) {
        char text[512], err[512];
        snprintf(text, sizeof text,
                 "kern-meta 1\nkernel k 1 1 2 1\nparam n i32 0\nparam a i32[,] 0\n"
                 "task parallel 1 2 5\n%s",
                 bad_meta[i].tail);
        /* the task line is line 5: the first adstack is line 6 */
        kern_meta *m = kern_meta_parse(text, strlen(text), err, sizeof err);
        cr_assert_null(m, "case %zu parsed", i);
        const char *want = bad_meta[i].msg;
        cr_assert(strncmp(err, want, strlen(want)) == 0, "case %zu: got '%s', want '%s'", i, err,
                  want);
    }
    /* an adstack before any kernel */
    const char *t = "kern-meta 1\nadstack f64 1 1 1\nend\n";
    char err[512];
    cr_assert_null(kern_meta_parse(t, strlen(t), err, sizeof err));
    cr_assert_str_eq(err, "metadata line 2: 'adstack' must follow a kernel's tasks (adstacks "
                          "first, then graderror, then access)");
}

/* ---- layout and sizing -------------------------------------------------------------- */

static void fake_args(const kern_meta_kernel *k, sz_arg *a, int64_t n, const int32_t *cnt,
                      int64_t ncnt) {
    memset(a, 0, sizeof(sz_arg) * (size_t)k->nparams);
    for (int i = 0; i < k->nparams; i++) {
        a[i].type = k->params[i].type;
        for (int d = 0; d < KERN_MAX_RANK; d++)
            a[i].shape[d] = 1;
    }
    a[0].scalar = n;
    a[1].shape[0] = 5;
    a[2].data = cnt;
    a[2].shape[0] = ncnt;
    a[3].shape[0] = 5;
}

Test(adstack_rt, layout_offsets_alignment_stride) {
    kern_meta *m = parse_ok(ad_meta);
    const kern_meta_kernel *g = kern_meta_find(m, "walk.grad");
    sz_arg a[4];
    const int32_t cnt[3] = {3, 7, 2};
    fake_args(g, a, 10, cnt, 3);
    int64_t layout[8], stride = -1;
    char err[512];
    cr_assert_eq(rt_adstack_layout(m, g, a, 4, false, 1, layout, &stride, NULL, err, sizeof err),
                 KERN_OK, "%s", err);
    /* f64 x 10 at 0 (80 bytes); i32 x 20 at 80 (to 160); bool x 7 at 160 (to 167);
     * f32 x 7 aligned to 4: at 168 (to 196); stride rounded up to 64: 256 */
    int64_t want[8] = {0, 10, 80, 20, 160, 7, 168, 7};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(layout[i], want[i], "layout[%d] = %lld", i, (long long)layout[i]);
    cr_assert_eq(stride, 256);

    /* n = 1: f64 x 1 (8), i32 x 2 at 8 (to 16), bool x 7 at 16 (to 23), f32 x 7 at 24
     * (to 52): stride 64 */
    fake_args(g, a, 1, cnt, 3);
    cr_assert_eq(rt_adstack_layout(m, g, a, 4, false, 1, layout, &stride, NULL, err, sizeof err),
                 KERN_OK);
    int64_t want1[8] = {0, 1, 8, 2, 16, 7, 24, 7};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(layout[i], want1[i], "n=1 layout[%d] = %lld", i, (long long)layout[i]);
    cr_assert_eq(stride, 64);

    /* a negative capacity is 0; an empty maxover is 0 */
    fake_args(g, a, -4, cnt, 0);
    cr_assert_eq(rt_adstack_layout(m, g, a, 4, false, 1, layout, &stride, NULL, err, sizeof err),
                 KERN_OK);
    int64_t want2[8] = {0, 0, 0, 0, 0, 0, 0, 7};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(layout[i], want2[i], "n=-4 layout[%d] = %lld", i, (long long)layout[i]);
    cr_assert_eq(stride, 64);
    kern_meta_free(m);
}

Test(adstack_rt, layout_slot_major_offsets_and_heap) {
    kern_meta *m = parse_ok(ad_meta);
    const kern_meta_kernel *g = kern_meta_find(m, "walk.grad");
    sz_arg a[4];
    const int32_t cnt[3] = {3, 7, 2};
    fake_args(g, a, 5, cnt, 3); /* capacities 5 (f64), 10 (i32), 7 (bool), 7 (f32) */
    int64_t layout[8], stride = -1;
    size_t bytes = 0;
    char err[512];
    cr_assert_eq(
        rt_adstack_layout(m, g, a, 4, true, 1000, layout, &stride, &bytes, err, sizeof err),
        KERN_OK, "%s", err);
    /* stack s takes cap x 1000 x size bytes at an offset aligned to 256:
     * f64 5 x 1000 x 8 = 40000 at 0; i32 10 x 1000 x 4 = 40000 at 40192 (157 x 256, to
     * 80192); bool 7 x 1000 = 7000 at 80384 (314 x 256, to 87384); f32 7 x 1000 x 4 =
     * 28000 at 87552 (342 x 256, to 115552); the heap 115712 (452 x 256) */
    int64_t want[8] = {0, 5, 40192, 10, 80384, 7, 87552, 7};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(layout[i], want[i], "layout[%d] = %lld", i, (long long)layout[i]);
    cr_assert_eq(bytes, 115712);
    cr_assert_eq(stride, 5 * 8 + 10 * 4 + 7 + 7 * 4, "a slot's bytes");
    /* any slot count: aligned regions in table order that never overlap, inside the heap */
    static const int esize[4] = {8, 4, 1, 4};
    for (int64_t slots = 1; slots < 3000; slots += 97) {
        cr_assert_eq(
            rt_adstack_layout(m, g, a, 4, true, slots, layout, &stride, &bytes, err, sizeof err),
            KERN_OK);
        int64_t end = 0;
        for (int st = 0; st < 4; st++) {
            cr_assert_eq(layout[2 * st] % 256, 0);
            cr_assert_geq(layout[2 * st], end);
            cr_assert_lt(layout[2 * st] - end, 256, "no gap beyond the alignment");
            end = layout[2 * st] + layout[2 * st + 1] * slots * esize[st];
        }
        cr_assert_geq((int64_t)bytes, end);
        cr_assert_lt((int64_t)bytes - end, 256);
        cr_assert_eq(bytes % 256, 0);
    }
    /* the slice layout is unchanged by the slot count; bytes = stride x slots */
    fake_args(g, a, 10, cnt, 3);
    cr_assert_eq(rt_adstack_layout(m, g, a, 4, false, 3, layout, &stride, &bytes, err, sizeof err),
                 KERN_OK);
    cr_assert_eq(stride, 256);
    cr_assert_eq(bytes, 768);
    cr_assert_eq(layout[6], 168);
    /* a heap that does not fit in int64 bytes: 2^20 entries x 8 bytes x 2^40 slots */
    fake_args(g, a, INT64_C(1) << 20, cnt, 3);
    cr_assert_eq(rt_adstack_layout(m, g, a, 4, true, INT64_C(1) << 40, layout, &stride, &bytes, err,
                                   sizeof err),
                 KERN_ERR_OUT_OF_MEMORY);
    cr_assert_str_eq(err, "kernel 'walk.grad': the adstack of the loop at tests/ad.kern:3:5 needs "
                          "1048576 entries of f64 for each of 1099511627776 threads: the heap "
                          "does not fit in 2^63 bytes");
    /* and a slice heap whose stride x slots overflows */
    cr_assert_eq(rt_adstack_layout(m, g, a, 4, false, INT64_C(1) << 40, layout, &stride, &bytes,
                                   err, sizeof err),
                 KERN_ERR_OUT_OF_MEMORY);
    cr_assert(strstr(err, "x 1099511627776 threads does not fit in the address space"), "%s", err);
    kern_meta_free(m);
}

Test(adstack_rt, layout_evaluation_errors) {
    kern_meta *m = parse_ok(ad_meta);
    const kern_meta_kernel *g = kern_meta_find(m, "walk.grad");
    sz_arg a[4];
    const int32_t cnt[3] = {3, 7, 2};
    int64_t layout[8], stride;
    char err[512];
    /* data not readable here: the read leaf fails, naming kernel and loop */
    fake_args(g, a, 10, NULL, 3);
    cr_assert_eq(rt_adstack_layout(m, g, a, 4, false, 1, layout, &stride, NULL, err, sizeof err),
                 KERN_ERR_ARGUMENT);
    const char *want = "kernel 'walk.grad': cannot size the adstack of the loop at "
                       "tests/ad.kern:5:1 (capacity (maxover v0 0 (dim 2 0) (max 0 (read 2 "
                       "v0)))): ";
    cr_assert(strncmp(err, want, strlen(want)) == 0, "%s", err);
    /* a slice that does not fit in int64 bytes */
    fake_args(g, a, INT64_C(1) << 61, cnt, 3);
    cr_assert_eq(rt_adstack_layout(m, g, a, 4, false, 1, layout, &stride, NULL, err, sizeof err),
                 KERN_ERR_OUT_OF_MEMORY);
    cr_assert_str_eq(err, "kernel 'walk.grad': the adstack of the loop at tests/ad.kern:3:5 needs "
                          "2305843009213693952 entries of f64: the per-thread slice does not fit "
                          "in 2^63 bytes");
    /* (mul (param 0) 2) overflows int64 inside the evaluator */
    fake_args(g, a, INT64_C(1) << 62, cnt, 3);
    kern_status s = rt_adstack_layout(m, g, a, 4, false, 1, layout, &stride, NULL, err, sizeof err);
    cr_assert_neq(s, KERN_OK);
    cr_assert(strstr(err, "kernel 'walk.grad'") && strstr(err, "tests/ad.kern:"), "%s", err);
    kern_meta_free(m);
}

Test(adstack_rt, heap_size_overflow) {
    size_t bytes = 0;
    char err[512];
    cr_assert_eq(rt_adstack_heap_size("k.grad", 256, 4, &bytes, err, sizeof err), KERN_OK);
    cr_assert_eq(bytes, 1024);
    cr_assert_eq(
        rt_adstack_heap_size("k.grad", INT64_C(1) << 40, INT64_C(1) << 30, &bytes, err, sizeof err),
        KERN_ERR_OUT_OF_MEMORY);
    cr_assert_str_eq(err, "kernel 'k.grad': the adstack heap of 1099511627776 bytes per thread x "
                          "1073741824 threads does not fit in the address space");
}

/* ---- heap growth on the fake device with an allocation limit ------------------------ */

Test(adstack_rt, heap_reuse_doubling_exact_retry_and_oom) {
    fake_device *f = fake_device_new((fake_device_config){.fail_alloc_over = 1000});
    cr_assert_not_null(f);
    rt_device *d = &f->base;
    rt_retire_queue q;
    rt_retire_init(&q, 4);
    rt_adstack_heap h = {0};
    char err[512];
    cr_assert_eq(rt_adstack_reserve(&h, d, &q, "k.grad", 100, 50, 2, err, sizeof err), KERN_OK);
    cr_assert_eq(h.bytes, 100);
    cr_assert_eq(h.allocs, 1);
    void *first = h.mem;
    /* same or smaller: reused */
    cr_assert_eq(rt_adstack_reserve(&h, d, &q, "k.grad", 100, 50, 2, err, sizeof err), KERN_OK);
    cr_assert_eq(rt_adstack_reserve(&h, d, &q, "k.grad", 60, 30, 2, err, sizeof err), KERN_OK);
    cr_assert_eq(h.allocs, 1);
    cr_assert_eq(h.mem, first);
    /* a little more: doubled */
    cr_assert_eq(rt_adstack_reserve(&h, d, &q, "k.grad", 150, 75, 2, err, sizeof err), KERN_OK);
    cr_assert_eq(h.bytes, 200);
    cr_assert_eq(h.allocs, 2);
    cr_assert_eq(f->frees, 1, "the superseded heap had no launch in flight: freed at once");
    /* much more: exactly what is needed */
    cr_assert_eq(rt_adstack_reserve(&h, d, &q, "k.grad", 700, 350, 2, err, sizeof err), KERN_OK);
    cr_assert_eq(h.bytes, 700);
    /* a heap in flight is retired, not freed */
    h.last_use = 5;
    d->submitted = 5;
    fake_complete(f, 4); /* point 5 has not passed */
    /* doubled (1400) exceeds the limit: the exact 800 is tried and works */
    cr_assert_eq(rt_adstack_reserve(&h, d, &q, "k.grad", 800, 400, 2, err, sizeof err), KERN_OK);
    cr_assert_eq(h.bytes, 800);
    cr_assert_eq(f->failed_allocs, 1);
    cr_assert_eq(f->frees, 2);
    cr_assert_eq(q.len, 1, "the 700-byte heap waits in the retirement queue");
    fake_complete(f, 5);
    rt_retire_poll(&q, d);
    cr_assert_eq(q.len, 0);
    cr_assert_eq(f->frees, 3);
    /* neither fits: out of memory, the old heap stays */
    void *keep = h.mem;
    cr_assert_eq(rt_adstack_reserve(&h, d, &q, "k.grad", 5000, 2500, 2, err, sizeof err),
                 KERN_ERR_OUT_OF_MEMORY);
    cr_assert_str_eq(err, "kernel 'k.grad': cannot allocate the adstack heap: 5000 bytes (2500 "
                          "bytes per thread x 2 threads): fake: no room for 5000 bytes");
    cr_assert_eq(h.mem, keep);
    cr_assert_eq(h.bytes, 800);
    rt_adstack_heap_fini(&h, d);
    rt_retire_fini(&q, d);
    cr_assert_eq(f->frees, f->allocs);
    fake_device_free(f);
}

/* ---- launches through the API with hand-written kernels ----------------------------- */

#define DESC(args, i) ((const kern_array_desc *)(args)[i])

/* kernel slices.grad(n: i64, out: i64[]) with adstacks f64 x n and i32 x (n + 1):
 * each item records its slice address and the layout it was given, and fills its whole
 * slice (so ASan sees a slice that overruns the heap) */
static atomic_llong seen_layout[4];
static int64_t slices_count(void *const *args) { return DESC(args, 1)->shape[0]; }
static void slices_t0(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
                      void *ad_slice, const int64_t *ad_layout) {
    int64_t *out = DESC(args, 1)->data;
    for (int i = 0; i < 4; i++)
        atomic_store(&seen_layout[i], ad_layout ? ad_layout[i] : -1);
    int64_t stride = ad_layout ? ad_layout[2] + 4 * ad_layout[3] : 0;
    for (int64_t i = begin; i < end; i++) {
        out[i] = (int64_t)(intptr_t)ad_slice;
        if (ad_slice)
            memset(ad_slice, (int)(i & 0xff), (size_t)stride);
    }
}
static int64_t one_count(void *const *args) { return 1; }
static void plain_t0(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
                     void *ad_slice, const int64_t *ad_layout) {
    int64_t *out = DESC(args, 0)->data;
    out[0] = ad_slice || ad_layout ? 1 : 2;
}
/* kernel bounce.grad(): an adstack overflow in the loop at line 7, column 9 */
static void bounce_t0(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
                      void *ad_slice, const int64_t *ad_layout) {
    int32_t z = 0;
    if (atomic_compare_exchange_strong((_Atomic int32_t *)&err->code, &z, KERN_DEVERR_ADSTACK)) {
        err->line = 7;
        err->col = 9;
        err->b = ad_layout[1];
    }
    err->a = 1500;
}

static const char hand_meta[] =
    "kern-meta 1\n"
    "source bounce.kern\n"
    "kernel slices.grad 1 1 2 1\nparam n i64 0\nparam out i64[] 0\ntask parallel 1 2 5\n"
    "adstack f64 3 5 (param 0)\n"
    "adstack i32 4 5 (add (param 0) 1)\n"
    "kernel plain 1 1 1 1\nparam out i64[] 0\ntask serial 0 2 5\n"
    "kernel bounce 5 1 0 0\ngraderror x is read at 6:3 and later written at 8:5\n"
    "kernel bounce.grad 5 1 0 1\ntask serial 0 6 1\nadstack f32 7 9 1024\n"
    "kernel lonely 9 1 0 0\n"
    "end\n";

static void *hand_lookup(void *user, const char *s) {
    static const struct {
        const char *n;
        void *f;
    } syms[] = {
        {"kern_slices__grad__t0_count", (void *)slices_count},
        {"kern_slices__grad__t0", (void *)slices_t0},
        {"kern_plain__t0_count", (void *)one_count},
        {"kern_plain__t0", (void *)plain_t0},
        {"kern_bounce__grad__t0_count", (void *)one_count},
        {"kern_bounce__grad__t0", (void *)bounce_t0},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (strcmp(syms[i].n, s) == 0)
            return syms[i].f;
    return NULL;
}

static kern_context *ctx_threads(int threads) {
    kern_context_options o = kern_context_options_default();
    o.threads = threads;
    kern_context *ctx = NULL;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK);
    return ctx;
}

static kern_code_image host_image(void *user, void *(*lookup)(void *, const char *),
                                  void (*release)(void *)) {
    return (kern_code_image){.kind = KERN_CODE_HOST, .host = {user, lookup, release}};
}

static kern_module *hand_module(kern_context *ctx) {
    char err[512];
    kern_meta *meta = kern_meta_parse(hand_meta, strlen(hand_meta), err, sizeof err);
    cr_assert(meta, "%s", err);
    kern_module *m = NULL;
    kern_code_image p = {.kind = KERN_CODE_HOST, .host = {NULL, hand_lookup, NULL}};
    cr_assert_eq(rt_module_create(ctx, meta, p, &m), KERN_OK, "%s", kern_context_last_error(ctx));
    return m;
}

static int64_t round64(int64_t x) { return (x + 63) / 64 * 64; }

Test(adstack_rt, cpu_slices_layout_reuse_and_growth) {
    for (int threads = 1; threads <= 4; threads++) {
        kern_context *ctx = ctx_threads(threads);
        kern_module *m = hand_module(ctx);
        kern_kernel *k;
        cr_assert_eq(kern_kernel_find(m, "slices.grad", &k), KERN_OK);
        cr_assert_eq(kern_kernel_adstack_count(k), 2);
        int64_t items = 1000;
        kern_buffer *out;
        cr_assert_eq(kern_buffer_create(ctx, KERN_I64, 1, &items, NULL, &out), KERN_OK);
        int64_t *host = malloc((size_t)items * sizeof *host);
        int64_t prev_heap = 0, allocs = 0;
        static const int64_t ns[] = {10, 10, 3, 11, 40, 1000, 1000};
        for (size_t r = 0; r < sizeof ns / sizeof ns[0]; r++) {
            int64_t n = ns[r];
            kern_arg a[2] = {kern_arg_i64(n), kern_arg_buffer(out)};
            cr_assert_eq(kern_launch(k, a, 2), KERN_OK, "%s", kern_context_last_error(ctx));
            /* f64 x n at 0; i32 x (n + 1) at 8n; stride rounded up to 64 */
            int64_t stride = round64(8 * n + 4 * (n + 1));
            cr_assert_eq(atomic_load(&seen_layout[0]), 0);
            cr_assert_eq(atomic_load(&seen_layout[1]), n);
            cr_assert_eq(atomic_load(&seen_layout[2]), 8 * n);
            cr_assert_eq(atomic_load(&seen_layout[3]), n + 1);
            kern_adstack_info info;
            cr_assert_eq(kern_context_adstack_info(ctx, &info), KERN_OK);
            cr_assert_eq(info.last_stride, stride);
            cr_assert_eq(info.last_slots, threads);
            cr_assert_eq(info.last_count, 2);
            int64_t need = stride * threads;
            int64_t want_heap = prev_heap >= need      ? prev_heap
                                : 2 * prev_heap > need ? 2 * prev_heap
                                                       : need;
            allocs += want_heap != prev_heap;
            cr_assert_eq(info.heap_bytes, want_heap, "threads %d n %lld", threads, (long long)n);
            cr_assert_eq(info.heap_allocs, allocs, "threads %d n %lld", threads, (long long)n);
            prev_heap = want_heap;
            int64_t off, cap;
            cr_assert_eq(kern_context_adstack_last(ctx, 1, &off, &cap), KERN_OK);
            cr_assert_eq(off, 8 * n);
            cr_assert_eq(cap, n + 1);
            cr_assert_eq(kern_context_adstack_last(ctx, 2, &off, &cap), KERN_ERR_ARGUMENT);
            /* each item's slice is heap + w x stride, w < threads */
            cr_assert_eq(kern_buffer_read(out, host, (size_t)items * sizeof *host), KERN_OK);
            int64_t lo = INT64_MAX;
            for (int64_t i = 0; i < items; i++)
                lo = host[i] < lo ? host[i] : lo;
            cr_assert_neq(lo, 0);
            for (int64_t i = 0; i < items; i++) {
                int64_t d = host[i] - lo;
                cr_assert(d % stride == 0 && d / stride < threads, "item %lld: slice offset %lld",
                          (long long)i, (long long)d);
            }
        }
        /* kernels without adstacks get NULL, NULL */
        kern_kernel *pk;
        cr_assert_eq(kern_kernel_find(m, "plain", &pk), KERN_OK);
        cr_assert_eq(kern_kernel_adstack_count(pk), 0);
        kern_arg pa[1] = {kern_arg_buffer(out)};
        cr_assert_eq(kern_launch(pk, pa, 1), KERN_OK);
        cr_assert_eq(kern_buffer_read(out, host, (size_t)items * sizeof *host), KERN_OK);
        cr_assert_eq(host[0], 2);
        free(host);
        kern_context_release(ctx);
    }
}

Test(adstack_rt, cpu_heap_overflow_and_oom_are_clear_errors) {
    /* a budget beyond any heap, so that the allocation itself fails (the budget's own
     * refusal is suite adbudget's) */
    kern_context_options o = kern_context_options_default();
    o.threads = 4;
    o.ad_memory_budget = INT64_MAX;
    kern_context *ctx = NULL;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK);
    kern_module *m = hand_module(ctx);
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, "slices.grad", &k), KERN_OK);
    int64_t items = 4;
    kern_buffer *out;
    cr_assert_eq(kern_buffer_create(ctx, KERN_I64, 1, &items, NULL, &out), KERN_OK);
    /* 2^58 entries: 2^61 + 2^60 + 4 bytes -> stride 3458764513820540992, x 4 threads
     * overflows int64 */
    kern_arg a[2] = {kern_arg_i64(INT64_C(1) << 58), kern_arg_buffer(out)};
    cr_assert_eq(kern_launch(k, a, 2), KERN_ERR_OUT_OF_MEMORY);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kernel 'slices.grad': the adstack heap of 3458764513820540992 bytes per "
                     "thread x 4 threads does not fit in the address space");
    /* 2^52 entries: stride 54043195528446016 x 4 fits in int64 but cannot be allocated */
    a[0] = kern_arg_i64(INT64_C(1) << 52);
    cr_assert_eq(kern_launch(k, a, 2), KERN_ERR_OUT_OF_MEMORY);
    const char *want = "kernel 'slices.grad': cannot allocate the adstack heap: "
                       "216172782113784064 bytes (54043195528446016 bytes per thread x 4 "
                       "threads): ";
    cr_assert(strncmp(kern_context_last_error(ctx), want, strlen(want)) == 0, "%s",
              kern_context_last_error(ctx));
    /* the context still works */
    a[0] = kern_arg_i64(3);
    cr_assert_eq(kern_launch(k, a, 2), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_context_release(ctx);
}

Test(adstack_rt, overflow_message_and_grad_lookup) {
    kern_context *ctx = ctx_threads(2);
    kern_module *m = hand_module(ctx);
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, "bounce.grad", &k), KERN_OK);
    cr_assert_eq(kern_launch(k, NULL, 0), KERN_ERR_DEVICE);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kernel 'bounce.grad': adstack overflow in the loop at bounce.kern:7:9: it "
                     "needs 1500 entries, the capacity is 1024; raise it with --ad-stack-size N "
                     "(kernc) or kern_context_options.ad_stack_size");
    /* a K.grad that was not built says why */
    kern_module *m2;
    static const char meta2[] = "kern-meta 1\nkernel bounce 5 1 0 0\n"
                                "graderror x is read at 6:3 and later written at 8:5\n"
                                "kernel lonely 9 1 0 0\nend\n";
    char err[256];
    kern_meta *mm = kern_meta_parse(meta2, strlen(meta2), err, sizeof err);
    cr_assert(mm, "%s", err);
    cr_assert_eq(rt_module_create(ctx, mm, host_image(NULL, hand_lookup, NULL), &m2), KERN_OK);
    cr_assert_eq(kern_kernel_find(m2, "bounce.grad", &k), KERN_ERR_NOT_FOUND);
    cr_assert_str_eq(kern_context_last_error(ctx), "kernel 'bounce.grad' was not built: x is read "
                                                   "at 6:3 and later written at 8:5");
    cr_assert_eq(kern_kernel_find(m2, "lonely.grad", &k), KERN_ERR_NOT_FOUND);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "no kernel 'lonely.grad': the module was compiled without the gradient of "
                     "'lonely'");
    cr_assert_eq(kern_kernel_find(m2, "nothere.grad", &k), KERN_ERR_NOT_FOUND);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "no kernel 'nothere.grad' in the module (it has: bounce, lonely)");
    kern_context_release(ctx);
}

/* ---- end to end: gradient kernels compiled by the JIT ------------------------------- */

static const char jit_src[] = "kernel bounce(x: f32[], y: f32[], n: i32) {\n" /* 1 */
                              "    for i in 0..len(x) {\n"
                              "        var v = x[i];\n"
                              "        var k = 0;\n"
                              "        while k < n {\n" /* 5: the while loop at 5:9 */
                              "            v = v * 0.5 + 0.01 * v * v + 1.0;\n"
                              "            k += 1;\n"
                              "        }\n"
                              "        y[i] = v;\n"
                              "    }\n"
                              "}\n"
                              "kernel roll(x: f32[], y: f32[], steps: i32) {\n"
                              "    for i in 0..len(x) {\n"
                              "        var v = x[i];\n"
                              "        for t in 0..steps {\n"
                              "            v = v * 0.9 + 0.01 * v * v + 0.1;\n"
                              "        }\n"
                              "        y[i] = v;\n"
                              "    }\n"
                              "}\n"
                              "kernel step(x: f32[], y: f32[], a: f32) {\n"
                              "    for i in 0..len(x) {\n"
                              "        y[i] = a * x[i] * x[i];\n"
                              "    }\n"
                              "}\n"
                              "kernel inplace(x: f32[]) {\n"
                              "    for i in 0..len(x) {\n"
                              "        x[i] = x[i] * 2.0;\n"
                              "    }\n"
                              "}\n";

static kern_module *jit_module(kern_context *ctx) {
    kern_module *m = NULL;
    kern_status s = kern_module_from_source(ctx, jit_src, strlen(jit_src), "bounce.kern", &m);
    cr_assert_eq(s, KERN_OK, "%s", kern_context_last_error(ctx));
    return m;
}

static kern_buffer *fbuf(kern_context *ctx, int64_t n, const float *data) {
    kern_buffer *b = NULL;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, data, &b), KERN_OK);
    return b;
}

/* Also the GPU's check (KERN_TEST_BACKEND=cuda): the same message as on the CPU. */
Test(adstack_rt, jit_while_overflow_names_loop_and_option) {
    kern_context_options o = kern_context_options_default();
    o.threads = 2;
    o.ad_stack_size = 16;
    o.backend = kern_test_backend();
    kern_context *ctx = NULL;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_module *m = jit_module(ctx);
    kern_kernel *g;
    cr_assert_eq(kern_kernel_find(m, "bounce.grad", &g), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    cr_assert_gt(kern_kernel_adstack_count(g), 0);
    enum { N = 8 };
    float x[N], one[N];
    for (int i = 0; i < N; i++)
        x[i] = 0.25f * (float)i - 1.0f, one[i] = 1.0f;
    kern_buffer *bx = fbuf(ctx, N, x), *by = fbuf(ctx, N, NULL), *gx = fbuf(ctx, N, NULL),
                *gy = fbuf(ctx, N, one);
    /* within the capacity: dy/dx = 0.5^n */
    kern_arg a[5] = {kern_arg_buffer(bx), kern_arg_buffer(by), kern_arg_i32(10),
                     kern_arg_buffer(gx), kern_arg_buffer(gy)};
    cr_assert_eq(kern_launch(g, a, 5), KERN_OK, "%s", kern_context_last_error(ctx));
    float r[N];
    cr_assert_eq(kern_buffer_read(gx, r, sizeof r), KERN_OK);
    for (int i = 0; i < N; i++) {
        double v = x[i], d = 1; /* the C loop: v's square is why the loop's v is pushed */
        for (int t = 0; t < 10; t++) {
            d *= 0.5 + 0.02 * v;
            v = v * 0.5 + 0.01 * v * v + 1.0;
        }
        cr_assert(fabs(r[i] - d) <= 1e-5 * fabs(d), "x.grad[%d] = %g, want %g", i, r[i], d);
    }
    int64_t cap;
    cr_assert_eq(kern_context_adstack_last(ctx, 0, NULL, &cap), KERN_OK);
    cr_assert_geq(cap, 16);
    cr_assert_lt(cap, 20, "a while loop takes about ad_stack_size entries, not more");
    /* 40 iterations overflow a capacity of 16 (plus the transform's slots) */
    a[2] = kern_arg_i32(40);
    kern_status st = kern_launch(g, a, 5);
    if (st == KERN_OK) /* a GPU reports it when the launch is observed to complete */
        st = kern_sync(ctx);
    cr_assert_eq(st, KERN_ERR_DEVICE);
    /* the message speaks the option's units: iterations, and the value to pass */
    const char *msg = kern_context_last_error(ctx);
    const char *head = "kernel 'bounce.grad': adstack overflow in the loop at bounce.kern:5:9: "
                       "the loop runs more than 16 iterations (--ad-stack-size 16); it needs "
                       "--ad-stack-size ";
    cr_assert(strncmp(msg, head, strlen(head)) == 0, "%s", msg);
    long long needed = atoll(msg + strlen(head));
    char want[256];
    snprintf(want, sizeof want, " or more (kernc), or kern_context_options.ad_stack_size = %lld",
             needed);
    cr_assert(strstr(msg, want), "%s", msg);
    cr_assert(needed > 16 && needed <= 45, "asks for %lld", needed);
    kern_context_release(ctx);
    /* the value it asks for is enough, one less is not */
    for (int more = 0; more < 2; more++) {
        o.ad_stack_size = needed - 1 + more;
        cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
        m = jit_module(ctx);
        cr_assert_eq(kern_kernel_find(m, "bounce.grad", &g), KERN_OK);
        bx = fbuf(ctx, N, x), by = fbuf(ctx, N, NULL), gx = fbuf(ctx, N, NULL),
        gy = fbuf(ctx, N, one);
        kern_arg b[5] = {kern_arg_buffer(bx), kern_arg_buffer(by), kern_arg_i32(40),
                         kern_arg_buffer(gx), kern_arg_buffer(gy)};
        st = kern_launch(g, b, 5);
        if (st == KERN_OK)
            st = kern_sync(ctx);
        cr_assert_eq(st, more ? KERN_OK : KERN_ERR_DEVICE, "ad_stack_size %lld: %s",
                     (long long)o.ad_stack_size, kern_context_last_error(ctx));
        kern_context_release(ctx);
    }
}

/* A for loop inside a while loop: the for loop's pushes are tested once before it against
 * the depth and the capacity (llvm_chunk.c, loop tests of adstacks), and run unchecked when
 * they fit. The boundary: with the --ad-stack-size the overflow message asks for, every
 * push fits and the gradient is right (against a C loop in double precision); with one
 * less, the pushes that do not fit are reported, never written. Also on the GPU
 * (KERN_TEST_BACKEND=cuda). */
static const char nest_src[] = "kernel nest(x: f32[], y: f32[], n: i32, m: i32) {\n"
                               "    for i in 0..len(x) {\n"
                               "        var v = x[i];\n"
                               "        var k = 0;\n"
                               "        while k < n {\n"
                               "            for j in 0..m {\n"
                               "                v = v + 0.05 * sin(v) + 0.01;\n"
                               "            }\n"
                               "            k += 1;\n"
                               "        }\n"
                               "        y[i] = v;\n"
                               "    }\n"
                               "}\n";

/* Launches K.grad of src (a kernel K(x, y, n, m) in file K.kern) with ad_stack_size s; the
 * status, the message and x.grad (NULL: not read) */
static kern_status xy_grad(const char *src, const char *name, int64_t s, int32_t n, int32_t m,
                           const float *x, int items, float *gx_out, char *msg, size_t msglen) {
    kern_context_options o = kern_context_options_default();
    o.threads = 2;
    o.ad_stack_size = s;
    o.backend = kern_test_backend();
    kern_context *ctx = NULL;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_module *mod = NULL;
    char file[64], grad[64];
    snprintf(file, sizeof file, "%s.kern", name);
    snprintf(grad, sizeof grad, "%s.grad", name);
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), file, &mod), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    kern_kernel *g;
    cr_assert_eq(kern_kernel_find(mod, grad, &g), KERN_OK, "%s", kern_context_last_error(ctx));
    float one[64];
    for (int i = 0; i < items; i++)
        one[i] = 1.0f;
    kern_buffer *bx = fbuf(ctx, items, x), *by = fbuf(ctx, items, NULL),
                *gx = fbuf(ctx, items, NULL), *gy = fbuf(ctx, items, one);
    /* the parameters, then the adjoints of the arrays */
    kern_arg a[6] = {kern_arg_buffer(bx), kern_arg_buffer(by), kern_arg_i32(n),
                     kern_arg_i32(m),     kern_arg_buffer(gx), kern_arg_buffer(gy)};
    kern_status st = kern_launch(g, a, 6);
    if (st == KERN_OK)
        st = kern_sync(ctx);
    snprintf(msg, msglen, "%s", st == KERN_OK ? "" : kern_context_last_error(ctx));
    if (st == KERN_OK && gx_out)
        cr_assert_eq(kern_buffer_read(gx, gx_out, (size_t)items * sizeof *gx_out), KERN_OK);
    kern_context_release(ctx);
    return st;
}

/* The overflow's boundary of K.grad of src (xy_grad) with n, m: at ad_stack_size 8 the
 * launch fails with a message that starts with head and asks for a size in lo..hi; one
 * less than that size is reported the same way; with it, the launch succeeds and x.grad
 * goes to gx. The size asked for. */
static long long overflow_boundary(const char *src, const char *name, const char *head, int32_t n,
                                   int32_t m, const float *x, int items, long long lo, long long hi,
                                   float *gx) {
    char msg[1024];
    kern_status st = xy_grad(src, name, 8, n, m, x, items, NULL, msg, sizeof msg);
    cr_assert_eq(st, KERN_ERR_DEVICE, "%s", msg);
    cr_assert(strncmp(msg, head, strlen(head)) == 0, "%s", msg);
    const char *need = strstr(msg, "it needs --ad-stack-size ");
    cr_assert(need, "%s", msg);
    long long needed = atoll(need + strlen("it needs --ad-stack-size "));
    cr_assert(needed >= lo && needed <= hi, "asks for %lld: %s", needed, msg);
    st = xy_grad(src, name, needed - 1, n, m, x, items, NULL, msg, sizeof msg);
    cr_assert_eq(st, KERN_ERR_DEVICE, "ad_stack_size %lld: %s", needed - 1, msg);
    cr_assert(strncmp(msg, head, strlen(head)) == 0, "%s", msg);
    st = xy_grad(src, name, needed, n, m, x, items, gx, msg, sizeof msg);
    cr_assert_eq(st, KERN_OK, "ad_stack_size %lld: %s", needed, msg);
    return needed;
}

/* x.grad of `steps` steps v = v + 0.05 sin(v) + 0.01 from v = x[i] (both kernels' step)
 * against a C loop in double precision */
static void expect_steps_grad(const float *x, const float *gx, int items, int steps) {
    for (int i = 0; i < items; i++) {
        double v = x[i], d = 1.0;
        for (int t = 0; t < steps; t++) {
            d *= 1.0 + 0.05 * cos(v);
            v = v + 0.05 * sin(v) + 0.01;
        }
        cr_assert(fabs(d) > 1e-6 && fabs(gx[i] - d) <= 1e-4 * fabs(d), "x.grad[%d] = %g, want %g",
                  i, gx[i], d);
    }
}

Test(adstack_rt, loop_tested_pushes_meet_the_capacity_exactly) {
    enum { ITEMS = 37, M = 5, N = 24 };
    float x[ITEMS];
    for (int i = 0; i < ITEMS; i++)
        x[i] = 0.1f * (float)i - 1.5f;
    /* 24 iterations of the while loop overflow a capacity of 8; one less than the size
     * asked for is reported; with it every push fits and the gradient is right */
    float gx[ITEMS];
    overflow_boundary(nest_src, "nest",
                      "kernel 'nest.grad': adstack overflow in the loop at nest.kern:", N, M, x,
                      ITEMS, N, N + 2, gx);
    expect_steps_grad(x, gx, ITEMS, N * M);
}

/* A for loop whose trip count doubles with each iteration of the while loop around it: its
 * stack (capacity --ad-stack-size entries per iteration of the while loop: the for loop's
 * count is unknown ahead) overflows while the while loop's own stacks do not. The loop test
 * of the for loop's pushes (llvm_chunk.c; spv_emit_ctrl.c on Vulkan) finds them past the
 * capacity, and the checked copy reports the for loop, with the size it needs; with that
 * size the gradient is right (against a C loop in double precision). */
static const char dbl_src[] = "kernel dbl(x: f32[], y: f32[], n: i32, m: i32) {\n"
                              "    for i in 0..len(x) {\n"
                              "        var v = x[i];\n"
                              "        var k = 0;\n"
                              "        var c = m;\n"
                              "        while k < n {\n"
                              "            for j in 0..c {\n"
                              "                v = v + 0.05 * sin(v) + 0.01;\n"
                              "            }\n"
                              "            c = c * 2;\n"
                              "            k += 1;\n"
                              "        }\n"
                              "        y[i] = v;\n"
                              "    }\n"
                              "}\n";

Test(adstack_rt, a_for_loop_past_its_capacity_is_reported_at_the_for_loop) {
    enum { ITEMS = 29, N = 5, M = 1 };
    float x[ITEMS];
    for (int i = 0; i < ITEMS; i++)
        x[i] = 0.1f * (float)i - 1.2f;
    /* the for loop runs 1, 2, 4, 8, 16 times (31 in all): 16 of them overflow 8 */
    float gx[ITEMS];
    overflow_boundary(dbl_src, "dbl",
                      "kernel 'dbl.grad': adstack overflow in the loop at dbl.kern:7:13: ", N, M, x,
                      ITEMS, 9, 31, gx);
    expect_steps_grad(x, gx, ITEMS, (1 << N) - 1);
}

Test(adstack_rt, jit_heap_tracks_the_loop_bound) {
    kern_context *ctx = ctx_threads(3);
    kern_module *m = jit_module(ctx);
    kern_kernel *g;
    cr_assert_eq(kern_kernel_find(m, "roll.grad", &g), KERN_OK, "%s", kern_context_last_error(ctx));
    enum { N = 64 };
    float x[N], one[N];
    for (int i = 0; i < N; i++)
        x[i] = 0.01f * (float)i, one[i] = 1.0f;
    kern_buffer *bx = fbuf(ctx, N, x), *by = fbuf(ctx, N, NULL), *gx = fbuf(ctx, N, NULL),
                *gy = fbuf(ctx, N, one);
    int64_t caps[4], allocs[4], heap[4];
    static const int32_t steps[4] = {10, 10, 100, 5000};
    for (int r = 0; r < 4; r++) {
        kern_arg a[5] = {kern_arg_buffer(bx), kern_arg_buffer(by), kern_arg_i32(steps[r]),
                         kern_arg_buffer(gx), kern_arg_buffer(gy)};
        cr_assert_eq(kern_launch(g, a, 5), KERN_OK, "%s", kern_context_last_error(ctx));
        kern_adstack_info info;
        cr_assert_eq(kern_context_adstack_info(ctx, &info), KERN_OK);
        cr_assert_eq(info.last_count, kern_kernel_adstack_count(g));
        cr_assert_eq(info.last_slots, 3);
        cr_assert_geq(info.heap_bytes, info.last_stride * 3);
        cr_assert_eq(kern_context_adstack_last(ctx, 0, NULL, &caps[r]), KERN_OK);
        allocs[r] = info.heap_allocs;
        heap[r] = info.heap_bytes;
        /* the gradient of 0.9^steps * x + ...: dx = 0.9^steps */
        float gr[N];
        cr_assert_eq(kern_buffer_read(gx, gr, sizeof gr), KERN_OK);
        double v = x[N - 1], d = 1;
        for (int t = 0; t < steps[r]; t++) {
            d *= 0.9 + 0.02 * v;
            v = v * 0.9 + 0.01 * v * v + 0.1;
        }
        cr_assert_float_eq(gr[N - 1], d, 1e-6, "steps %d: x.grad = %g", steps[r], gr[N - 1]);
        float zero[N] = {0};
        cr_assert_eq(kern_buffer_write(gx, zero, sizeof zero), KERN_OK);
        cr_assert_eq(kern_buffer_write(gy, one, sizeof one), KERN_OK);
    }
    /* tight: the capacity follows steps exactly (constant slots aside) */
    cr_assert_geq(caps[0], 10);
    cr_assert_eq(caps[2] - caps[0], 90);
    cr_assert_eq(caps[3] - caps[0], 4990);
    /* reused for the same size, grown for larger ones */
    cr_assert_eq(allocs[0], 1);
    cr_assert_eq(allocs[1], 1);
    cr_assert_eq(heap[1], heap[0]);
    cr_assert_eq(allocs[2], 2);
    cr_assert_eq(allocs[3], 3);
    cr_assert_geq(heap[2], 2 * heap[0]);
    kern_context_release(ctx);
}

Test(adstack_rt, tape_two_launches_against_c_loop) {
    kern_context *ctx = ctx_threads(2);
    kern_module *m = jit_module(ctx);
    kern_kernel *step;
    cr_assert_eq(kern_kernel_find(m, "step", &step), KERN_OK);
    enum { N = 37 };
    float x0[N];
    for (int i = 0; i < N; i++)
        x0[i] = 0.1f * (float)(i % 11) - 0.4f;
    const float a1 = 1.5f, a2 = -0.75f;
    kern_buffer *b0 = fbuf(ctx, N, x0), *b1 = fbuf(ctx, N, NULL), *b2 = fbuf(ctx, N, NULL);
    kern_tape *t;
    cr_assert_eq(kern_tape_create(ctx, &t), KERN_OK);
    /* the final state's adjoint: dL/dx2 = w */
    float w[N];
    for (int i = 0; i < N; i++)
        w[i] = 1.0f + 0.125f * (float)i;
    kern_buffer *g2 = fbuf(ctx, N, w);
    cr_assert_eq(kern_tape_set_grad(t, b2, g2), KERN_OK);
    kern_arg l1[3] = {kern_arg_buffer(b0), kern_arg_buffer(b1), kern_arg_f32(a1)};
    kern_arg l2[3] = {kern_arg_buffer(b1), kern_arg_buffer(b2), kern_arg_f32(a2)};
    cr_assert_eq(kern_tape_launch(t, step, l1, 3), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_tape_launch(t, step, l2, 3), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_tape_record_count(t), 2);
    double d;
    cr_assert_eq(kern_tape_scalar_grad(t, 0, 2, &d), KERN_ERR_NOT_FOUND);
    cr_assert_eq(kern_tape_backward(t), KERN_OK, "%s", kern_context_last_error(ctx));

    /* reference: x1 = a1 x0^2, x2 = a2 x1^2, L = sum w x2 */
    double gx0[N], ga1 = 0, ga2 = 0;
    for (int i = 0; i < N; i++) {
        double x1 = (double)a1 * x0[i] * x0[i];
        double gx1 = w[i] * a2 * 2 * x1;
        ga2 += w[i] * x1 * x1;
        ga1 += gx1 * x0[i] * x0[i];
        gx0[i] = gx1 * a1 * 2 * x0[i];
    }
    kern_buffer *g0;
    cr_assert_eq(kern_tape_grad(t, b0, &g0), KERN_OK);
    float r[N];
    cr_assert_eq(kern_buffer_read(g0, r, sizeof r), KERN_OK);
    for (int i = 0; i < N; i++)
        cr_assert(fabs(r[i] - gx0[i]) <= 1e-5 * (1 + fabs(gx0[i])), "x0.grad[%d] = %g, want %g", i,
                  r[i], gx0[i]);
    cr_assert_eq(kern_tape_scalar_grad(t, 0, 2, &d), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert(fabs(d - ga1) <= 1e-4 * (1 + fabs(ga1)), "a1.grad = %g, want %g", d, ga1);
    cr_assert_eq(kern_tape_scalar_grad(t, 1, 2, &d), KERN_OK);
    cr_assert(fabs(d - ga2) <= 1e-4 * (1 + fabs(ga2)), "a2.grad = %g, want %g", d, ga2);
    /* x2's adjoint was replaced by the adjoint before the write (x2 is overwritten): 0 */
    cr_assert_eq(kern_buffer_read(g2, r, sizeof r), KERN_OK);
    for (int i = 0; i < N; i++)
        cr_assert_float_eq(r[i], 0.0f, 0.0f);
    /* misuse is an error, not a crash */
    cr_assert_eq(kern_tape_backward(t), KERN_ERR_ARGUMENT);
    cr_assert_eq(kern_tape_scalar_grad(t, 2, 2, &d), KERN_ERR_ARGUMENT);
    cr_assert_eq(kern_tape_scalar_grad(t, 0, 0, &d), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kern_tape_scalar_grad: parameter 'x' (f32[]) of kernel 'step' is not a "
                     "differentiable scalar");
    kern_buffer *bad = NULL;
    int64_t n2 = N + 1;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n2, NULL, &bad), KERN_OK);
    cr_assert_eq(kern_tape_set_grad(t, b0, bad), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kern_tape_set_grad: the adjoint f32[38] does not match the buffer f32[37]");
    /* clear: a new recording; the tape's own adjoint of x0 is gone */
    cr_assert_eq(kern_tape_clear(t), KERN_OK);
    cr_assert_eq(kern_tape_record_count(t), 0);
    cr_assert_eq(kern_tape_grad(t, b0, &g0), KERN_ERR_NOT_FOUND);
    cr_assert_eq(kern_tape_grad(t, b2, &g0), KERN_OK);
    cr_assert_eq(g0, g2);
    kern_tape_destroy(t);
    kern_context_release(ctx);
}

Test(adstack_rt, tape_errors_name_record_and_kernel) {
    kern_context *ctx = ctx_threads(1);
    kern_module *m = jit_module(ctx);
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, "inplace", &k), KERN_OK);
    cr_assert_eq(kern_kernel_find(m, "inplace.grad", &k), KERN_ERR_NOT_FOUND);
    const char *want = "kernel 'inplace.grad' was not built: ";
    cr_assert(strncmp(kern_context_last_error(ctx), want, strlen(want)) == 0, "%s",
              kern_context_last_error(ctx));
    cr_assert_eq(kern_kernel_find(m, "inplace", &k), KERN_OK);
    float x[4] = {1, 2, 3, 4};
    kern_buffer *b = fbuf(ctx, 4, x);
    kern_tape *t;
    cr_assert_eq(kern_tape_create(ctx, &t), KERN_OK);
    kern_arg a[1] = {kern_arg_buffer(b)};
    cr_assert_eq(kern_tape_launch(t, k, a, 1), KERN_OK);
    /* a failed launch is not recorded */
    cr_assert_eq(kern_tape_launch(t, k, a, 0), KERN_ERR_ARGUMENT);
    cr_assert_eq(kern_tape_record_count(t), 1);
    cr_assert_eq(kern_tape_backward(t), KERN_ERR_NOT_FOUND);
    want = "kern_tape_backward: record 0 (kernel 'inplace'): kernel 'inplace.grad' was not "
           "built: ";
    cr_assert(strncmp(kern_context_last_error(ctx), want, strlen(want)) == 0, "%s",
              kern_context_last_error(ctx));
    /* a released buffer is noticed */
    cr_assert_eq(kern_tape_clear(t), KERN_OK);
    kern_kernel *step;
    cr_assert_eq(kern_kernel_find(m, "step", &step), KERN_OK);
    kern_buffer *y = fbuf(ctx, 4, NULL);
    kern_arg s[3] = {kern_arg_buffer(b), kern_arg_buffer(y), kern_arg_f32(2.0f)};
    cr_assert_eq(kern_tape_launch(t, step, s, 3), KERN_OK);
    kern_buffer_release(y);
    cr_assert_eq(kern_tape_backward(t), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kern_tape_backward: record 0 (kernel 'step'): the buffer of parameter 'y' "
                     "was released");
    /* the context's release destroys the tape */
    kern_context_release(ctx);
}

/* ---- an ahead-of-time module: the adstack lines travel through the module file ------ */

#ifdef KERNC_PATH
Test(adstack_rt, aot_module_sizes_from_text_metadata) {
    char dir[] = "/tmp/kern-adstack-XXXXXX";
    cr_assert(mkdtemp(dir));
    char src[256], so[256], cmd[1024];
    snprintf(src, sizeof src, "%s/roll.kern", dir);
    snprintf(so, sizeof so, "%s/roll.so", dir);
    FILE *f = fopen(src, "w");
    cr_assert(f);
    fputs(jit_src, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' build '%s' --target=cpu -o '%s' 2>/dev/null", KERNC_PATH, src,
             so);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    kern_context *ctx = ctx_threads(2);
    kern_module *m;
    cr_assert_eq(kern_module_load_file(ctx, so, &m), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_kernel *g;
    cr_assert_eq(kern_kernel_find(m, "roll.grad", &g), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_kernel_find(m, "inplace.grad", &g), KERN_ERR_NOT_FOUND);
    cr_assert(strstr(kern_context_last_error(ctx), "was not built: "), "%s",
              kern_context_last_error(ctx));
    cr_assert_eq(kern_kernel_find(m, "roll.grad", &g), KERN_OK);
    float x[4] = {1, 2, 3, 4}, one[4] = {1, 1, 1, 1};
    kern_buffer *bx = fbuf(ctx, 4, x), *by = fbuf(ctx, 4, NULL), *gx = fbuf(ctx, 4, NULL),
                *gy = fbuf(ctx, 4, one);
    int64_t c0 = 0;
    for (int32_t steps = 3; steps <= 300; steps *= 10) {
        kern_arg a[5] = {kern_arg_buffer(bx), kern_arg_buffer(by), kern_arg_i32(steps),
                         kern_arg_buffer(gx), kern_arg_buffer(gy)};
        cr_assert_eq(kern_launch(g, a, 5), KERN_OK, "%s", kern_context_last_error(ctx));
        int64_t cap;
        cr_assert_eq(kern_context_adstack_last(ctx, 0, NULL, &cap), KERN_OK);
        if (steps == 3)
            c0 = cap - 3;
        cr_assert_eq(cap, steps + c0, "steps %d: capacity %lld", steps, (long long)cap);
    }
    kern_context_release(ctx);
    remove(so);
    remove(src);
    rmdir(dir);
}
#endif
