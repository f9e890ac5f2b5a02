/* test_runtime.c - tests of the runtime library (suite `runtime`): metadata, buffers,
 * modules from a hand-written code provider and from AOT shared objects, launches
 * compared with plain C loops, argument checking, device-error reporting, the worker
 * pool's chunking, the retirement queue, and the asynchronous paths of the API through a
 * fake device that completes work only when the test says so (tests/fake_device.h).
 *
 * Expected messages are written out in full here, from docs/runtime.md, not taken from
 * the code under test. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../include/kern.h"
#include "../runtime/abi.h"
#include "../runtime/meta.h"
#include "../runtime/pool.h"
#include "../runtime/provider.h"
#include "../runtime/retire.h"
#include "../runtime/rt.h"
#include "fake_device.h"

#ifndef KERN_SOURCE_ROOT
#define KERN_SOURCE_ROOT "."
#endif

/* ---- metadata ----------------------------------------------------------------------- */

static const char meta_text[] = "kern-meta 1\n"
                                "source tests/fake dir/fake.kern\n"
                                "kernel saxpy 1 1 3 1\n"
                                "param a f32 1\n"
                                "param x f32[] 0\n"
                                "param y f32[] 0\n"
                                "task parallel 1 2 5\n"
                                "kernel simulate.grad 10 1 2 3\n"
                                "param img f64[,] 0\n"
                                "param out.grad i64[,,,] 0\n"
                                "task serial 0 11 3\n"
                                "task parallel 2 12 3\n"
                                "task serial 0 20 3\n"
                                "kernel empty 30 1 0 0\n"
                                "end\n";

/* The header's version macros, the library's kern_version and meson's project version are
 * one version. */
Test(runtime, version_is_the_project_version) {
    const char *text = NULL;
    int v = kern_version(&text);
    cr_assert_str_eq(text, KERN_PROJECT_VERSION);
    cr_assert_str_eq(KERN_VERSION_STRING, KERN_PROJECT_VERSION);
    int major, minor, patch;
    cr_assert_eq(sscanf(KERN_PROJECT_VERSION, "%d.%d.%d", &major, &minor, &patch), 3);
    cr_assert_eq(v, KERN_VERSION_NUMBER(major, minor, patch));
    cr_assert_eq(KERN_VERSION_MAJOR, major);
    cr_assert_eq(KERN_VERSION_MINOR, minor);
    cr_assert_eq(KERN_VERSION_PATCH, patch);
    cr_assert_eq(kern_version(NULL), v);
}

Test(runtime, meta_parse_fields) {
    char err[256];
    kern_meta *m = kern_meta_parse(meta_text, strlen(meta_text), err, sizeof err);
    cr_assert(m, "%s", err);
    cr_assert_str_eq(m->source, "tests/fake dir/fake.kern");
    cr_assert_eq(m->nkernels, 3);
    const kern_meta_kernel *k = &m->kernels[0];
    cr_assert_str_eq(k->name, "saxpy");
    cr_assert_eq(k->nparams, 3);
    cr_assert_eq(k->ntasks, 1);
    cr_assert_str_eq(k->params[0].name, "a");
    cr_assert_eq(k->params[0].type, ty_f32());
    cr_assert(k->params[0].nograd);
    cr_assert_eq(k->params[1].type, ty_array(ty_f32(), 1));
    cr_assert(!k->params[1].nograd);
    cr_assert(k->tasks[0].parallel);
    cr_assert_eq(k->tasks[0].ndims, 1);
    cr_assert_eq(k->tasks[0].line, 2);
    cr_assert_eq(k->tasks[0].col, 5);
    k = kern_meta_find(m, "simulate.grad");
    cr_assert(k);
    cr_assert_eq(k->line, 10);
    cr_assert_eq(k->params[1].type, ty_array(ty_i64(), 4));
    cr_assert_str_eq(k->params[1].name, "out.grad");
    cr_assert(!k->tasks[0].parallel);
    cr_assert_eq(k->tasks[0].ndims, 0);
    cr_assert_eq(k->tasks[1].ndims, 2);
    cr_assert_eq(kern_meta_find(m, "empty")->nparams, 0);
    cr_assert_null(kern_meta_find(m, "simulate"));
    kern_meta_free(m);
}

Test(runtime, meta_print_round_trip) {
    char err[256];
    kern_meta *m = kern_meta_parse(meta_text, strlen(meta_text), err, sizeof err);
    cr_assert(m, "%s", err);
    kern_buf b = {0};
    kern_meta_print(&b, m);
    cr_assert_eq(b.len, strlen(meta_text));
    cr_assert(memcmp(b.data, meta_text, b.len) == 0, "printed:\n%.*s", (int)b.len, b.data);
    kern_meta_free(m);
    /* no source line, no trailing newline after end, a trailing NUL */
    const char t2[] = "kern-meta 1\nkernel k 1 2 0 1\ntask serial 0 3 4\nend";
    m = kern_meta_parse(t2, sizeof t2, err, sizeof err); /* sizeof counts the NUL */
    cr_assert(m, "%s", err);
    cr_assert_null(m->source);
    buf_free(&b);
    kern_meta_print(&b, m);
    cr_assert_str_eq(b.data, "kern-meta 1\nkernel k 1 2 0 1\ntask serial 0 3 4\nend\n");
    buf_free(&b);
    kern_meta_free(m);
}

Test(runtime, meta_symbols) {
    char buf[64];
    kern_meta_symbol(buf, sizeof buf, "saxpy", 0, false);
    cr_assert_str_eq(buf, "kern_saxpy__t0");
    kern_meta_symbol(buf, sizeof buf, "simulate.grad", 12, true);
    cr_assert_str_eq(buf, "kern_simulate__grad__t12_count");
    kern_meta_symbol(buf, 8, "simulate", 0, false);
    cr_assert_str_eq(buf, "kern_si");
}

static const struct {
    const char *text;
    const char *msg;
} bad_metas[] = {
    {"", "metadata line 1: empty text (expected 'kern-meta 1')"},
    {"kern-meta 2\nend\n",
     "metadata line 1: unsupported metadata version '2' (this runtime reads version 1)"},
    {"hello\n", "metadata line 1: not kern metadata (expected 'kern-meta 1')"},
    {"kern-meta 1\n", "metadata line 2: missing 'end'"},
    {"kern-meta 1\nkernel k 1 1 0 0\n", "metadata line 3: missing 'end'"},
    {"kern-meta 1\nkernel k 1 1 1 0\nend\n",
     "metadata line 3: expected param 1 of 1 of kernel 'k', found 'end'"},
    {"kern-meta 1\nkernel k 1 1 1 0\n", "metadata line 3: kernel 'k' ends after 0 of its 1 params"},
    {"kern-meta 1\nkernel k 1 1 0 1\nparam a f32 0\nend\n",
     "metadata line 3: expected task 1 of 1 of kernel 'k', found 'param'"},
    {"kern-meta 1\nkernel k 1 1 1 0\nparam a f8 0\nend\n",
     "metadata line 3: param 'a': bad type 'f8'"},
    {"kern-meta 1\nkernel k 1 1 1 0\nparam a void 0\nend\n",
     "metadata line 3: param 'a': bad type 'void'"},
    {"kern-meta 1\nkernel k 1 1 1 0\nparam a f32[,,,,] 0\nend\n",
     "metadata line 3: param 'a': bad type 'f32[,,,,]'"},
    {"kern-meta 1\nkernel k 1 1 1 0\nparam a f32 2\nend\n",
     "metadata line 3: param 'a': NOGRAD must be 0 or 1, not '2'"},
    {"kern-meta 1\nkernel k 1 1 2 0\nparam a f32 0\nparam a i32 0\nend\n",
     "metadata line 4: kernel 'k' has two params named 'a'"},
    {"kern-meta 1\nkernel k 1 1 1 0\nparam 9a f32 0\nend\n",
     "metadata line 3: param: bad name '9a'"},
    {"kern-meta 1\nkernel k. 1 1 0 0\nend\n", "metadata line 2: kernel: bad name 'k.'"},
    {"kern-meta 1\nkernel k 1 1 0 0\nkernel k 2 1 0 0\nend\n",
     "metadata line 3: two kernels named 'k'"},
    {"kern-meta 1\nkernel k 1 1 0 1\ntask parallel 0 1 1\nend\n",
     "metadata line 3: a parallel task has 1 to 8 dimensions, not 0"},
    {"kern-meta 1\nkernel k 1 1 0 1\ntask parallel 9 1 1\nend\n",
     "metadata line 3: NDIMS 9 is too large (at most 8)"},
    {"kern-meta 1\nkernel k 1 1 0 1\ntask serial 1 1 1\nend\n",
     "metadata line 3: a serial task has 0 dimensions, not 1"},
    {"kern-meta 1\nkernel k 1 1 0 1\ntask sideways 1 1 1\nend\n",
     "metadata line 3: task: expected parallel or serial, found 'sideways'"},
    {"kern-meta 1\nkernel k -1 1 0 0\nend\n", "metadata line 2: LINE '-1' is not a number"},
    {"kern-meta 1\nkernel k 99999999999 1 0 0\nend\n",
     "metadata line 2: LINE '99999999999' is not a number"},
    {"kern-meta 1\nkernel k 4294967296 1 0 0\nend\n",
     "metadata line 2: LINE 4294967296 is too large (at most 4294967295)"},
    {"kern-meta 1\nkernel k 1 1 0 99999\nend\n",
     "metadata line 2: kernel 'k' declares 0 params and 99999 tasks but the text ends before them"},
    {"kern-meta 1\nkernel k 1 1 0 100001\nend\n",
     "metadata line 2: NTASKS 100001 is too large (at most 100000)"},
    {"kern-meta 1\nkernel k 1 1 0\nend\n",
     "metadata line 2: kernel: expected 'kernel NAME LINE COL NPARAMS NTASKS'"},
    {"kern-meta 1\nkernel  k 1 1 0 0\nend\n",
     "metadata line 2: empty field (fields are separated by one space)"},
    {"kern-meta 1\nkernel k 1 1 0 0 \nend\n", "metadata line 2: trailing space"},
    {"kern-meta 1\n\nend\n", "metadata line 2: empty line"},
    {"kern-meta 1\nend\nkernel k 1 1 0 0\n", "metadata line 3: text after 'end'"},
    {"kern-meta 1\nkernel k 1 1 0 0\nsource a.kern\nend\n",
     "metadata line 3: 'source' must come once, before the kernels"},
    {"kern-meta 1\nbogus\nend\n",
     "metadata line 2: unexpected 'bogus' (expected kernel, source or end)"},
    {"kern-meta 1\nkernel k\t1 1 0 0\nend\n", "metadata line 2: control character 0x09"},
    {"kern-meta 1\r\nend\n", "metadata line 1: control character 0x0d"},
    /* a param refused for its VIEW after its name was kept (freed: fuzz-module found it) */
    {"kern-meta 1\nkernel k 1 1 1 0\nparam n i32 0 (read 1 0))\nend\n",
     "metadata line 3: param 'n': a VIEW needs an array type, not i32"},
};

Test(runtime, meta_malformed) {
    for (size_t i = 0; i < sizeof bad_metas / sizeof bad_metas[0]; i++) {
        char err[256] = "unset";
        kern_meta *m =
            kern_meta_parse(bad_metas[i].text, strlen(bad_metas[i].text), err, sizeof err);
        cr_expect_null(m, "case %zu parsed", i);
        kern_meta_free(m);
        cr_expect_str_eq(err, bad_metas[i].msg, "case %zu", i);
    }
    char err[256];
    const char nul[] = "kern-meta 1\nkern\0el k 1 1 0 0\nend\n";
    cr_assert_null(kern_meta_parse(nul, sizeof nul - 1, err, sizeof err));
    cr_assert_str_eq(err, "metadata line 2: NUL byte in the text");
}

/* Every prefix and every single-byte change of a valid text: never a crash, and what
 * parses prints back to what it parsed from when nothing was cut. */
Test(runtime, meta_mutations) {
    size_t n = strlen(meta_text);
    char *t = malloc(n + 1);
    char err[256];
    for (size_t len = 0; len < n; len++) {
        kern_meta *m = kern_meta_parse(meta_text, len, err, sizeof err);
        cr_expect(m == NULL || len >= n - 1, "prefix of %zu bytes parsed", len);
        kern_meta_free(m);
    }
    const char subst[] = {'\0', ' ', '\n', '0', '9', 'x', '.', '[', ','};
    for (size_t i = 0; i < n; i++) {
        for (size_t s = 0; s < sizeof subst; s++) {
            memcpy(t, meta_text, n + 1);
            t[i] = subst[s];
            kern_meta *m = kern_meta_parse(t, n, err, sizeof err);
            if (m) {
                kern_buf b = {0};
                kern_meta_print(&b, m);
                kern_meta *m2 = kern_meta_parse(b.data, b.len, err, sizeof err);
                cr_expect(m2, "reprint does not parse: %s", err);
                kern_meta_free(m2);
                buf_free(&b);
            }
            kern_meta_free(m);
        }
    }
    free(t);
}

/* ---- contexts and buffers ----------------------------------------------------------- */

static kern_context *make_ctx(int threads) {
    kern_context_options o = kern_context_options_default();
    o.threads = threads;
    kern_context *ctx = NULL;
    kern_status s = kern_context_create(&o, &ctx);
    cr_assert_eq(s, KERN_OK, "%s", kern_context_last_error(ctx));
    return ctx;
}

Test(runtime, context_options) {
    kern_context *ctx = make_ctx(3);
    cr_assert_eq(kern_context_threads(ctx), 3);
    cr_assert_eq(kern_context_get_options(ctx).threads, 3);
    cr_assert_str_eq(kern_context_last_error(ctx), "");
    cr_assert_eq(kern_sync(ctx), KERN_OK);
    kern_context_release(ctx);

    kern_context *dflt = NULL;
    cr_assert_eq(kern_context_create(NULL, &dflt), KERN_OK);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cr_assert_eq(kern_context_threads(dflt), n < 1 ? 1 : (int)n);
    char want[64];
    snprintf(want, sizeof want, "cpu (%d thread%s)", kern_context_threads(dflt),
             kern_context_threads(dflt) == 1 ? "" : "s");
    cr_assert_str_eq(kern_context_device_name(dflt), want);
    kern_context_release(dflt);

    kern_context_options o = kern_context_options_default();
    o.backend = KERN_BACKEND_METAL;
    kern_context *bad = NULL;
    cr_assert_eq(kern_context_create(&o, &bad), KERN_ERR_UNSUPPORTED);
    cr_assert_not_null(bad);
    cr_assert_str_eq(kern_context_last_error(bad),
                     "backend 'metal' is not available in this runtime (it has: cpu, cuda, "
                     "vulkan)");
    /* the registry's answer, as the Python package reads it */
    cr_expect(kern_backend_available(KERN_BACKEND_CPU) && kern_backend_available(KERN_BACKEND_CUDA) &&
              kern_backend_available(KERN_BACKEND_VULKAN));
    cr_expect(!kern_backend_available(KERN_BACKEND_METAL) &&
              !kern_backend_available(KERN_BACKEND_AMDGPU) && !kern_backend_available(99));
    cr_assert_str_eq(kern_context_device_name(bad), "");
    /* a failed context refuses work */
    kern_buffer *b = NULL;
    int64_t shape[1] = {4};
    cr_assert_eq(kern_buffer_create(bad, KERN_F32, 1, shape, NULL, &b), KERN_ERR_ARGUMENT);
    cr_assert_null(b);
    kern_context_release(bad);

    o = kern_context_options_default();
    o.threads = -2;
    cr_assert_eq(kern_context_create(&o, &bad), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(bad), "thread count -2 is out of range (0 to 1024)");
    kern_context_release(bad);
    o = kern_context_options_default();
    o.backend = (kern_backend)17;
    cr_assert_eq(kern_context_create(&o, &bad), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(bad), "invalid backend 17");
    kern_context_release(bad);
    cr_assert_eq(kern_context_create(NULL, NULL), KERN_ERR_ARGUMENT);
}

Test(runtime, names) {
    cr_assert_str_eq(kern_status_name(KERN_ERR_DEVICE), "KERN_ERR_DEVICE");
    cr_assert_str_eq(kern_status_name((kern_status)99), "KERN_ERR_?");
    cr_assert_str_eq(kern_dtype_name(KERN_U32), "u32");
    cr_assert_null(kern_dtype_name((kern_dtype)0));
    cr_assert_eq(kern_dtype_size(KERN_BOOL), 1);
    cr_assert_eq(kern_dtype_size(KERN_I64), 8);
    cr_assert_eq(kern_dtype_size(KERN_F32), 4);
    cr_assert_str_eq(kern_backend_name(KERN_BACKEND_VULKAN), "vulkan");
}

Test(runtime, buffers_every_dtype_and_rank) {
    kern_context *ctx = make_ctx(2);
    static const kern_dtype dts[] = {KERN_BOOL, KERN_I32, KERN_U32, KERN_I64, KERN_F32, KERN_F64};
    for (size_t t = 0; t < 6; t++) {
        for (int rank = 1; rank <= 4; rank++) {
            int64_t shape[4] = {3, 2, 4, 5};
            size_t count = 1;
            for (int d = 0; d < rank; d++)
                count *= (size_t)shape[d];
            size_t es = kern_dtype_size(dts[t]);
            unsigned char *in = malloc(count * es), *back = malloc(count * es);
            for (size_t i = 0; i < count * es; i++)
                in[i] =
                    dts[t] == KERN_BOOL ? (unsigned char)(i % 3 == 0) : (unsigned char)(i * 7 + t);
            kern_buffer *b = NULL;
            cr_assert_eq(kern_buffer_create(ctx, dts[t], rank, shape, in, &b), KERN_OK);
            cr_assert_eq(kern_buffer_dtype(b), dts[t]);
            cr_assert_eq(kern_buffer_rank(b), rank);
            cr_assert_eq(kern_buffer_count(b), (int64_t)count);
            cr_assert_eq(kern_buffer_bytes(b), count * es);
            for (int d = 0; d < 4; d++)
                cr_assert_eq(kern_buffer_extent(b, d), d < rank ? shape[d] : 1);
            memset(back, 0xAB, count * es);
            cr_assert_eq(kern_buffer_read(b, back, count * es), KERN_OK);
            cr_assert(memcmp(in, back, count * es) == 0);
            kern_buffer_release(b);
            free(in);
            free(back);
        }
    }
    /* zeroed, then written */
    int64_t shape[2] = {7, 3};
    kern_buffer *b = NULL;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F64, 2, shape, NULL, &b), KERN_OK);
    double v[21];
    memset(v, 0x55, sizeof v);
    cr_assert_eq(kern_buffer_read(b, v, sizeof v), KERN_OK);
    for (int i = 0; i < 21; i++)
        cr_assert_eq(v[i], 0.0);
    for (int i = 0; i < 21; i++)
        v[i] = i * 0.5;
    cr_assert_eq(kern_buffer_write(b, v, sizeof v), KERN_OK);
    double w[21];
    cr_assert_eq(kern_buffer_read(b, w, sizeof w), KERN_OK);
    cr_assert(memcmp(v, w, sizeof v) == 0);
    /* size mismatch */
    cr_assert_eq(kern_buffer_read(b, w, sizeof w - 8), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kern_buffer_read: size 160 does not match the 168 bytes of buffer f64[7, 3]");
    cr_assert_eq(kern_buffer_write(b, NULL, sizeof w), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx), "kern_buffer_write: host pointer is NULL");
    /* an empty buffer */
    int64_t zero[1] = {0};
    kern_buffer *e = NULL;
    cr_assert_eq(kern_buffer_create(ctx, KERN_I32, 1, zero, NULL, &e), KERN_OK);
    cr_assert_eq(kern_buffer_bytes(e), 0);
    cr_assert_eq(kern_buffer_read(e, NULL, 0), KERN_OK);
    kern_buffer_release(e);
    /* b is released with the context */
    kern_context_release(ctx);
}

Test(runtime, buffers_bad_shapes) {
    kern_context *ctx = make_ctx(1);
    kern_buffer *b = (kern_buffer *)1;
    int64_t ok[4] = {2, 2, 2, 2};
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 0, ok, NULL, &b), KERN_ERR_ARGUMENT);
    cr_assert_null(b);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kern_buffer_create: rank 0 is not supported (rank 1 to 4)");
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 5, ok, NULL, &b), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kern_buffer_create: rank 5 is not supported (rank 1 to 4)");
    int64_t neg[2] = {3, -1};
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 2, neg, NULL, &b), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kern_buffer_create: extent -1 of dimension 1 is negative");
    int64_t big[1] = {(int64_t)1 << 31};
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, big, NULL, &b), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kern_buffer_create: extent 2147483648 of dimension 0 is too large (at "
                     "most 2147483647: len() is i32)");
    cr_assert_eq(kern_buffer_create(ctx, (kern_dtype)99, 1, ok, NULL, &b), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx), "kern_buffer_create: invalid dtype 99");
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, NULL, NULL, &b), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx), "kern_buffer_create: shape is NULL");
    /* 2^31-1 to the 4th: each extent is legal but the array is not addressable */
    int64_t huge[4] = {INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX};
    cr_assert_eq(kern_buffer_create(ctx, KERN_F64, 4, huge, NULL, &b), KERN_ERR_OUT_OF_MEMORY);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kern_buffer_create: the array is too large to address");
    /* a later success clears the message */
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 4, ok, NULL, &b), KERN_OK);
    cr_assert_str_eq(kern_context_last_error(ctx), "");
    kern_buffer_release(b);
    kern_context_release(ctx);
}

/* ---- a hand-written code provider --------------------------------------------------- */

#define F32(args, i) (*(const float *)(args)[i])
#define I32(args, i) (*(const int32_t *)(args)[i])
#define DESC(args, i) ((const kern_array_desc *)(args)[i])

/* kernel saxpy(a: f32, x: f32[], y: f32[]) { for i in 0..len(x) { y[i] = a * x[i] + y[i] } } */
static int64_t saxpy_t0_count(void *const *args) { return DESC(args, 1)->shape[0]; }
static void saxpy_t0(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
                     void *ad_slice, const int64_t *ad_layout) {
    float a = F32(args, 0);
    const float *x = DESC(args, 1)->data;
    float *y = DESC(args, 2)->data;
    for (int64_t i = begin; i < end; i++)
        y[i] = a * x[i] + y[i];
}

/* kernel grid(src: f64[,], dst: f64[,], k: i32) {
 *   for i in 0..shape(src,0), j in 1..shape(src,1) { dst[i,j] = src[i,j] * k + src[i,j-1] - i } } */
static int64_t grid_t0_count(void *const *args) { return DESC(args, 0)->shape[0]; }
static void grid_t0(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
                    void *ad_slice, const int64_t *ad_layout) {
    const kern_array_desc *s = DESC(args, 0), *d = DESC(args, 1);
    int32_t k = I32(args, 2);
    const double *src = s->data;
    double *dst = d->data;
    int64_t m = s->shape[1];
    for (int64_t i = begin; i < end; i++)
        for (int64_t j = 1; j < m; j++)
            dst[i * m + j] = src[i * m + j] * k + src[i * m + j - 1] - (double)i;
}

/* kernel steps(out: i64[], flag: bool) {
 *   out[0] = flag ? 100 : 7;                          (serial)
 *   for i in 1..len(out) { out[i] = out[0] + i }      (parallel: needs the serial task done)
 *   for i in 0..len(out) - 1 ... a serial sum into out[0] after the barrier } */
static int64_t one_count(void *const *args) { return 1; }
static void steps_t0(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
                     void *ad_slice, const int64_t *ad_layout) {
    int64_t *out = DESC(args, 0)->data;
    bool flag = *(const bool *)args[1];
    out[0] = flag ? 100 : 7;
}
static int64_t steps_t1_count(void *const *args) {
    int64_t n = DESC(args, 0)->shape[0] - 1;
    return n < 0 ? 0 : n;
}
static void steps_t1(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
                     void *ad_slice, const int64_t *ad_layout) {
    int64_t *out = DESC(args, 0)->data;
    for (int64_t i = begin + 1; i < end + 1; i++)
        out[i] = out[0] + i;
}
static void steps_t2(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
                     void *ad_slice, const int64_t *ad_layout) {
    int64_t *out = DESC(args, 0)->data;
    int64_t n = DESC(args, 0)->shape[0], s = 0;
    for (int64_t i = 1; i < n; i++)
        s += out[i];
    out[0] = s;
}

/* Device errors as debug-mode code reports them (abi.h: first error wins by CAS). */
static void report(kern_err_record *err, int32_t code, uint32_t line, uint32_t col, int32_t dim,
                   int64_t a, int64_t b) {
    int32_t zero = 0;
    if (atomic_compare_exchange_strong((_Atomic int32_t *)&err->code, &zero, code)) {
        err->line = line;
        err->col = col;
        err->dim = dim;
        err->a = a;
        err->b = b;
    }
}

/* kernel oob(x: f32[]) { for i in 0..len(x) { x[i] = x[i + 1] } }  (line 7, col 9) */
static int64_t oob_t0_count(void *const *args) { return DESC(args, 0)->shape[0]; }
static void oob_t0(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
                   void *ad_slice, const int64_t *ad_layout) {
    const kern_array_desc *x = DESC(args, 0);
    float *d = x->data;
    for (int64_t i = begin; i < end; i++) {
        if (i + 1 >= x->shape[0]) {
            report(err, KERN_DEVERR_BOUNDS, 7, 9, 0, i + 1, x->shape[0]);
            continue;
        }
        d[i] = d[i + 1];
    }
}
/* kernel divz(q: i32[], d: i32) { q[0] = q[0] / d } (line 3, col 14); a second task that
 * must not run after the error */
static void divz_t0(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
                    void *ad_slice, const int64_t *ad_layout) {
    int32_t *q = DESC(args, 0)->data;
    int32_t d = I32(args, 1);
    if (d == 0)
        report(err, KERN_DEVERR_DIV_ZERO, 3, 14, 0, 0, 0);
    else
        q[0] /= d;
}
static void divz_t1(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
                    void *ad_slice, const int64_t *ad_layout) {
    int32_t *q = DESC(args, 0)->data;
    q[1] = 1234;
}
/* kernel shl(x: u32[], s: i32) { x[0] = x[0] << s } (line 4, col 2) */
static void shl_t0(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
                   void *ad_slice, const int64_t *ad_layout) {
    uint32_t *x = DESC(args, 0)->data;
    int32_t s = I32(args, 1);
    if (s < 0 || s >= 32)
        report(err, KERN_DEVERR_SHIFT, 4, 2, 0, s, 32);
    else
        x[0] <<= s;
}
/* kernel simulate.grad(v: f32[]) { for i in 0..len(v) { v[i] = v[i] * 2 } } */
static int64_t sg_t0_count(void *const *args) { return DESC(args, 0)->shape[0]; }
static void sg_t0(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
                  void *ad_slice, const int64_t *ad_layout) {
    float *v = DESC(args, 0)->data;
    for (int64_t i = begin; i < end; i++)
        v[i] *= 2;
}

/* kernel many(out: i64[], p0: i32, ..., p19: i32) { out[0] = p0 + 2*p1 + ... + 20*p19 }:
 * more arguments than the launch path keeps on the stack */
static void many_t0(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
                    void *ad_slice, const int64_t *ad_layout) {
    int64_t *out = DESC(args, 0)->data, s = 0;
    for (int i = 0; i < 20; i++)
        s += (int64_t)(i + 1) * I32(args, i + 1);
    out[0] = s;
}

static const char test_meta[] =
    "kern-meta 1\n"
    "source tests/fake.kern\n"
    "kernel saxpy 1 1 3 1\nparam a f32 0\nparam x f32[] 0\nparam y f32[] 0\n"
    "task parallel 1 2 5\n"
    "kernel grid 5 1 3 1\nparam src f64[,] 0\nparam dst f64[,] 0\nparam k i32 0\n"
    "task parallel 2 6 5\n"
    "kernel steps 9 1 2 3\nparam out i64[] 0\nparam flag bool 0\n"
    "task serial 0 10 5\ntask parallel 1 11 5\ntask serial 0 12 5\n"
    "kernel oob 6 1 1 1\nparam x f32[] 0\ntask parallel 1 7 5\n"
    "kernel divz 2 1 2 2\nparam q i32[] 0\nparam d i32 0\ntask serial 0 3 5\ntask serial 0 4 5\n"
    "kernel shl 4 1 2 1\nparam x u32[] 0\nparam s i32 0\ntask serial 0 4 2\n"
    "kernel simulate.grad 20 1 1 1\nparam v f32[] 0\ntask parallel 1 21 5\n"
    "kernel many 30 1 21 1\nparam out i64[] 0\n"
    "param p0 i32 0\nparam p1 i32 0\nparam p2 i32 0\nparam p3 i32 0\nparam p4 i32 0\n"
    "param p5 i32 0\nparam p6 i32 0\nparam p7 i32 0\nparam p8 i32 0\nparam p9 i32 0\n"
    "param p10 i32 0\nparam p11 i32 0\nparam p12 i32 0\nparam p13 i32 0\nparam p14 i32 0\n"
    "param p15 i32 0\nparam p16 i32 0\nparam p17 i32 0\nparam p18 i32 0\nparam p19 i32 0\n"
    "task serial 0 31 5\n"
    "end\n";

typedef struct sym_entry {
    const char *name;
    void *fn;
} sym_entry;

#define SYM(n, f) \
    { n, (void *)(f) }
static const sym_entry test_syms[] = {
    SYM("kern_saxpy__t0_count", saxpy_t0_count),
    SYM("kern_saxpy__t0", saxpy_t0),
    SYM("kern_grid__t0_count", grid_t0_count),
    SYM("kern_grid__t0", grid_t0),
    SYM("kern_steps__t0_count", one_count),
    SYM("kern_steps__t0", steps_t0),
    SYM("kern_steps__t1_count", steps_t1_count),
    SYM("kern_steps__t1", steps_t1),
    SYM("kern_steps__t2_count", one_count),
    SYM("kern_steps__t2", steps_t2),
    SYM("kern_oob__t0_count", oob_t0_count),
    SYM("kern_oob__t0", oob_t0),
    SYM("kern_divz__t0_count", one_count),
    SYM("kern_divz__t0", divz_t0),
    SYM("kern_divz__t1_count", one_count),
    SYM("kern_divz__t1", divz_t1),
    SYM("kern_shl__t0_count", one_count),
    SYM("kern_shl__t0", shl_t0),
    SYM("kern_simulate__grad__t0_count", sg_t0_count),
    SYM("kern_simulate__grad__t0", sg_t0),
    SYM("kern_many__t0_count", one_count),
    SYM("kern_many__t0", many_t0),
};

typedef struct test_provider {
    int releases;
    int lookups;
    const char *hide; /* a symbol to pretend is missing */
} test_provider;

static void *tp_lookup(void *user, const char *symbol) {
    test_provider *tp = user;
    tp->lookups++;
    if (tp->hide && strcmp(symbol, tp->hide) == 0)
        return NULL;
    for (size_t i = 0; i < sizeof test_syms / sizeof test_syms[0]; i++)
        if (strcmp(test_syms[i].name, symbol) == 0)
            return test_syms[i].fn;
    return NULL;
}

static void tp_release(void *user) { ((test_provider *)user)->releases++; }

static kern_module *make_module(kern_context *ctx, test_provider *tp) {
    char err[256];
    kern_meta *meta = kern_meta_parse(test_meta, strlen(test_meta), err, sizeof err);
    cr_assert(meta, "%s", err);
    kern_module *m = NULL;
    kern_code_image p = {.kind = KERN_CODE_HOST, .host = {tp, tp_lookup, tp_release}};
    kern_status s = rt_module_create(ctx, meta, p, &m);
    cr_assert_eq(s, KERN_OK, "%s", kern_context_last_error(ctx));
    return m;
}

static kern_kernel *find(kern_module *m, const char *name) {
    kern_kernel *k = NULL;
    cr_assert_eq(kern_kernel_find(m, name, &k), KERN_OK, "%s", name);
    return k;
}

static kern_buffer *buf1(kern_context *ctx, kern_dtype t, int64_t n, const void *data) {
    kern_buffer *b = NULL;
    cr_assert_eq(kern_buffer_create(ctx, t, 1, &n, data, &b), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    return b;
}

Test(runtime, module_lookup_and_introspection) {
    kern_context *ctx = make_ctx(2);
    test_provider tp = {0};
    kern_module *m = make_module(ctx, &tp);
    cr_assert_eq(tp.lookups, 2 * 11); /* two symbols per task */
    cr_assert_eq(kern_module_kernel_count(m), 8);
    cr_assert_str_eq(kern_module_kernel_name(m, 6), "simulate.grad");
    cr_assert_null(kern_module_kernel_name(m, 8));
    kern_kernel *k = find(m, "grid");
    cr_assert_str_eq(kern_kernel_name(k), "grid");
    cr_assert_eq(kern_kernel_param_count(k), 3);
    kern_param_info pi;
    cr_assert_eq(kern_kernel_param(k, 0, &pi), KERN_OK);
    cr_assert_str_eq(pi.name, "src");
    cr_assert(pi.is_array);
    cr_assert_eq(pi.dtype, KERN_F64);
    cr_assert_eq(pi.rank, 2);
    cr_assert(!pi.nograd);
    cr_assert_eq(kern_kernel_param(k, 2, &pi), KERN_OK);
    cr_assert_str_eq(pi.name, "k");
    cr_assert(!pi.is_array);
    cr_assert_eq(pi.dtype, KERN_I32);
    cr_assert_eq(pi.rank, 0);
    cr_assert_eq(kern_kernel_param(k, 3, &pi), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kernel 'grid' has 3 parameters: index 3 is out of range");
    cr_assert_eq(kern_kernel_find(m, "simulate", &k), KERN_ERR_NOT_FOUND);
    cr_assert_null(k);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "no kernel 'simulate' in the module (it has: saxpy, grid, steps, oob, "
                     "divz, shl, simulate.grad, many)");
    cr_assert_not_null(find(m, "simulate.grad"));
    kern_module_release(m);
    cr_assert_eq(tp.releases, 1);
    kern_context_release(ctx);
}

Test(runtime, module_missing_symbol) {
    kern_context *ctx = make_ctx(1);
    test_provider tp = {.hide = "kern_divz__t1_count"};
    char err[256];
    kern_meta *meta = kern_meta_parse(test_meta, strlen(test_meta), err, sizeof err);
    kern_module *m = (kern_module *)1;
    kern_code_image p = {.kind = KERN_CODE_HOST, .host = {&tp, tp_lookup, tp_release}};
    cr_assert_eq(rt_module_create(ctx, meta, p, &m), KERN_ERR_FORMAT);
    cr_assert_null(m);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kernel 'divz', task 1: missing symbol 'kern_divz__t1_count'");
    cr_assert_eq(tp.releases, 1);
    kern_context_release(ctx);
}

Test(runtime, launch_saxpy_matches_c_loop) {
    for (int threads = 1; threads <= 4; threads++) {
        kern_context *ctx = make_ctx(threads);
        test_provider tp = {0};
        kern_module *m = make_module(ctx, &tp);
        kern_kernel *k = find(m, "saxpy");
        static const int64_t sizes[] = {0, 1, 5, 97, 1000, 100003};
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int64_t n = sizes[si];
            float *x = malloc(sizeof(float) * (size_t)(n + 1));
            float *y = malloc(sizeof(float) * (size_t)(n + 1));
            float *want = malloc(sizeof(float) * (size_t)(n + 1));
            float *got = malloc(sizeof(float) * (size_t)(n + 1));
            for (int64_t i = 0; i < n; i++) {
                x[i] = (float)(i % 17) * 0.25f;
                y[i] = (float)(i % 5) - 2.0f;
            }
            float a = 1.5f;
            for (int64_t i = 0; i < n; i++)
                want[i] = a * x[i] + y[i];
            kern_buffer *bx = buf1(ctx, KERN_F32, n, x), *by = buf1(ctx, KERN_F32, n, y);
            kern_arg args[3] = {kern_arg_f32(a), kern_arg_buffer(bx), kern_arg_buffer(by)};
            cr_assert_eq(kern_launch(k, args, 3), KERN_OK, "%s", kern_context_last_error(ctx));
            cr_assert_eq(kern_sync(ctx), KERN_OK);
            cr_assert_eq(kern_buffer_read(by, got, sizeof(float) * (size_t)n), KERN_OK);
            for (int64_t i = 0; i < n; i++)
                cr_assert_eq(got[i], want[i], "n=%lld i=%lld", (long long)n, (long long)i);
            kern_buffer_release(bx);
            kern_buffer_release(by);
            free(x);
            free(y);
            free(want);
            free(got);
        }
        kern_module_release(m);
        kern_context_release(ctx);
    }
}

Test(runtime, launch_2d_and_task_order) {
    kern_context *ctx = make_ctx(4);
    test_provider tp = {0};
    kern_module *m = make_module(ctx, &tp);
    int64_t shape[2] = {37, 11};
    double src[37 * 11], want[37 * 11], got[37 * 11];
    for (int i = 0; i < 37 * 11; i++)
        src[i] = sin(i * 0.1);
    memset(want, 0, sizeof want);
    for (int i = 0; i < 37; i++)
        for (int j = 1; j < 11; j++)
            want[i * 11 + j] = src[i * 11 + j] * 3 + src[i * 11 + j - 1] - i;
    kern_buffer *bs = NULL, *bd = NULL;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F64, 2, shape, src, &bs), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F64, 2, shape, NULL, &bd), KERN_OK);
    kern_arg ga[3] = {kern_arg_buffer(bs), kern_arg_buffer(bd), kern_arg_i32(3)};
    cr_assert_eq(kern_launch(find(m, "grid"), ga, 3), KERN_OK);
    cr_assert_eq(kern_buffer_read(bd, got, sizeof got), KERN_OK);
    for (int i = 0; i < 37 * 11; i++)
        cr_assert_eq(got[i], want[i], "%d", i);

    /* serial, parallel, serial: the parallel task sees the serial write, the last task
     * sees every parallel write */
    for (int flag = 0; flag < 2; flag++) {
        int64_t n = 5001;
        kern_buffer *bo = buf1(ctx, KERN_I64, n, NULL);
        kern_arg sa[2] = {kern_arg_buffer(bo), kern_arg_bool(flag)};
        cr_assert_eq(kern_launch(find(m, "steps"), sa, 2), KERN_OK);
        int64_t *out = malloc(sizeof(int64_t) * (size_t)n);
        cr_assert_eq(kern_buffer_read(bo, out, sizeof(int64_t) * (size_t)n), KERN_OK);
        int64_t base = flag ? 100 : 7, sum = 0;
        for (int64_t i = 1; i < n; i++) {
            cr_assert_eq(out[i], base + i);
            sum += base + i;
        }
        cr_assert_eq(out[0], sum);
        free(out);
        kern_buffer_release(bo);
    }
    kern_context_release(ctx); /* releases the module and buffers too */
    cr_assert_eq(tp.releases, 1);
}

Test(runtime, launch_many_arguments) {
    kern_context *ctx = make_ctx(2);
    test_provider tp = {0};
    kern_module *m = make_module(ctx, &tp);
    kern_buffer *out = buf1(ctx, KERN_I64, 1, NULL);
    kern_arg a[21];
    a[0] = kern_arg_buffer(out);
    int64_t want = 0;
    for (int i = 0; i < 20; i++) {
        a[i + 1] = kern_arg_i32(1000 * i - 7);
        want += (int64_t)(i + 1) * (1000 * i - 7);
    }
    cr_assert_eq(kern_launch(find(m, "many"), a, 21), KERN_OK, "%s", kern_context_last_error(ctx));
    int64_t got;
    cr_assert_eq(kern_buffer_read(out, &got, sizeof got), KERN_OK);
    cr_assert_eq(got, want);
    a[20] = kern_arg_u32(1);
    cr_assert_eq(kern_launch(find(m, "many"), a, 21), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kernel 'many', parameter 'p19' (i32): scalar dtype is u32, expected i32");
    kern_context_release(ctx);
}

Test(runtime, module_rejects_bad_in_memory_metadata) {
    kern_context *ctx = make_ctx(1);
    kern_meta *meta = calloc(1, sizeof *meta);
    meta->nkernels = 1;
    meta->kernels = calloc(1, sizeof *meta->kernels);
    meta->kernels[0].name = strdup("k");
    meta->kernels[0].nparams = 1;
    meta->kernels[0].params = calloc(1, sizeof *meta->kernels[0].params);
    meta->kernels[0].params[0].name = strdup("x");
    meta->kernels[0].params[0].type = ty_void();
    test_provider tp = {0};
    kern_module *m = NULL;
    kern_code_image p = {.kind = KERN_CODE_HOST, .host = {&tp, tp_lookup, tp_release}};
    cr_assert_eq(rt_module_create(ctx, meta, p, &m), KERN_ERR_FORMAT); /* frees meta */
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "invalid module metadata: kernel 'k': parameter 0 has no name or a bad type");
    cr_assert_eq(tp.releases, 1);
    kern_context_release(ctx);
}

Test(runtime, launch_argument_errors) {
    kern_context *ctx = make_ctx(2);
    test_provider tp = {0};
    kern_module *m = make_module(ctx, &tp);
    kern_kernel *saxpy = find(m, "saxpy"), *grid = find(m, "grid");
    float data[4] = {1, 2, 3, 4};
    kern_buffer *f32 = buf1(ctx, KERN_F32, 4, data);
    kern_buffer *f64 = buf1(ctx, KERN_F64, 4, NULL);
    int64_t sh2[2] = {2, 2};
    kern_buffer *f32_2d = NULL, *f64_2d = NULL;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 2, sh2, NULL, &f32_2d), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F64, 2, sh2, NULL, &f64_2d), KERN_OK);
    kern_context *other = make_ctx(1);
    kern_buffer *foreign = buf1(other, KERN_F32, 4, NULL);

    static const struct {
        int which; /* argument set */
        const char *msg;
    } cases[] = {
        {0, "kernel 'saxpy' takes 3 arguments, got 2"},
        {1, "kernel 'saxpy', parameter 'x' (f32[]): needs a buffer, got a scalar f32"},
        {2, "kernel 'saxpy', parameter 'a' (f32): needs a scalar f32, got a buffer"},
        {3, "kernel 'saxpy', parameter 'y' (f32[]): buffer dtype is f64, expected f32"},
        {4, "kernel 'saxpy', parameter 'a' (f32): scalar dtype is f64, expected f32"},
        {5, "kernel 'saxpy', parameter 'x' (f32[]): buffer rank is 2, expected 1"},
        {6, "kernel 'saxpy', parameter 'x' (f32[]): the buffer is NULL"},
        {7, "kernel 'saxpy', parameter 'y' (f32[]): the buffer belongs to another context"},
        {8, "kernel 'grid', parameter 'k' (i32): scalar dtype is i64, expected i32"},
        {9, "kernel 'grid', parameter 'src' (f64[,]): buffer rank is 1, expected 2"},
        {10, "kernel 'saxpy', parameter 'a' (f32): invalid scalar dtype 0"},
        {11, "kernel 'saxpy', parameter 'x' (f32[]): invalid argument kind 0"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        kern_arg a[3] = {kern_arg_f32(2), kern_arg_buffer(f32), kern_arg_buffer(f32)};
        kern_kernel *k = saxpy;
        int n = 3;
        switch (cases[c].which) {
        case 0: n = 2; break;
        case 1: a[1] = kern_arg_f32(1); break;
        case 2: a[0] = kern_arg_buffer(f32); break;
        case 3: a[2] = kern_arg_buffer(f64); break;
        case 4: a[0] = kern_arg_f64(2); break;
        case 5: a[1] = kern_arg_buffer(f32_2d); break;
        case 6: a[1] = kern_arg_buffer(NULL); break;
        case 7: a[2] = kern_arg_buffer(foreign); break;
        case 8:
            k = grid;
            a[0] = kern_arg_buffer(f64_2d);
            a[1] = kern_arg_buffer(f64_2d);
            a[2] = kern_arg_i64(1);
            break;
        case 9:
            k = grid;
            a[0] = kern_arg_buffer(f64);
            a[1] = kern_arg_buffer(f64);
            a[2] = kern_arg_i32(1);
            break;
        case 10: a[0].dtype = (kern_dtype)0; break;
        case 11: a[1].kind = (kern_arg_kind)0; break;
        }
        cr_expect_eq(kern_launch(k, a, n), KERN_ERR_ARGUMENT, "case %zu", c);
        cr_expect_str_eq(kern_context_last_error(ctx), cases[c].msg, "case %zu", c);
    }
    /* nothing ran: x is unchanged */
    float back[4];
    cr_assert_eq(kern_buffer_read(f32, back, sizeof back), KERN_OK);
    cr_assert(memcmp(back, data, sizeof back) == 0);
    cr_assert_eq(kern_launch(saxpy, NULL, 3), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx), "kernel 'saxpy': the argument array is NULL");
    kern_context_release(other);
    kern_context_release(ctx);
}

Test(runtime, device_errors_name_kernel_and_line) {
    /* one thread: oob's x[i] = x[i + 1] would race across chunks */
    kern_context *ctx = make_ctx(1);
    test_provider tp = {0};
    kern_module *m = make_module(ctx, &tp);
    float xs[5] = {1, 2, 3, 4, 5};
    kern_buffer *x = buf1(ctx, KERN_F32, 5, xs);
    kern_arg a[1] = {kern_arg_buffer(x)};
    cr_assert_eq(kern_launch(find(m, "oob"), a, 1), KERN_ERR_DEVICE);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kernel 'oob' (tests/fake.kern:7:9): index 5 out of bounds for dimension 0 "
                     "of extent 5");
    /* reported once: the next calls succeed */
    cr_assert_eq(kern_sync(ctx), KERN_OK);
    float back[5];
    cr_assert_eq(kern_buffer_read(x, back, sizeof back), KERN_OK);
    for (int i = 0; i < 4; i++) /* the faulting item was skipped, the others ran */
        cr_assert_eq(back[i], xs[i + 1]);

    int32_t qs[2] = {17, 0};
    kern_buffer *q = buf1(ctx, KERN_I32, 2, qs);
    kern_arg d[2] = {kern_arg_buffer(q), kern_arg_i32(0)};
    cr_assert_eq(kern_launch(find(m, "divz"), d, 2), KERN_ERR_DEVICE);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kernel 'divz' (tests/fake.kern:3:14): integer division by zero");
    int32_t qb[2];
    cr_assert_eq(kern_buffer_read(q, qb, sizeof qb), KERN_OK);
    cr_assert_eq(qb[1], 0, "the task after the faulting one must not run");
    d[1] = kern_arg_i32(4);
    cr_assert_eq(kern_launch(find(m, "divz"), d, 2), KERN_OK);
    cr_assert_eq(kern_buffer_read(q, qb, sizeof qb), KERN_OK);
    cr_assert_eq(qb[0], 4);
    cr_assert_eq(qb[1], 1234);

    uint32_t us[1] = {3};
    kern_buffer *u = buf1(ctx, KERN_U32, 1, us);
    kern_arg s[2] = {kern_arg_buffer(u), kern_arg_i32(40)};
    cr_assert_eq(kern_launch(find(m, "shl"), s, 2), KERN_ERR_DEVICE);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kernel 'shl' (tests/fake.kern:4:2): shift by 40 >= 32 bits");
    s[1] = kern_arg_i32(-3);
    cr_assert_eq(kern_launch(find(m, "shl"), s, 2), KERN_ERR_DEVICE);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kernel 'shl' (tests/fake.kern:4:2): shift by negative amount -3");
    kern_context_release(ctx);
}

Test(runtime, device_error_record_formats) {
    /* adstack, unknown codes, no location, no source file */
    kern_meta meta = {0};
    kern_meta_kernel mk = {.name = "k"};
    kern_module mod = {.meta = &meta};
    kern_kernel k = {.mod = &mod, .meta = &mk};
    char buf[256];
    kern_err_record r = {KERN_DEVERR_ADSTACK, 12, 3, 0, 65, 64};
    rt_format_device_error(buf, sizeof buf, &k, &r);
    cr_assert_str_eq(buf, "kernel 'k': adstack overflow in the loop at 12:3: it needs 65 entries, "
                          "the capacity is 64; raise it with --ad-stack-size N (kernc) or "
                          "kern_context_options.ad_stack_size");
    meta.source = "a b.kern";
    r = (kern_err_record){42, 0, 0, 0, 1, 2};
    rt_format_device_error(buf, sizeof buf, &k, &r);
    cr_assert_str_eq(buf, "kernel 'k': device error code 42 (a=1, b=2)");
    r = (kern_err_record){KERN_DEVERR_BOUNDS, 2, 8, 3, -1, 9};
    rt_format_device_error(buf, sizeof buf, &k, &r);
    cr_assert_str_eq(
        buf, "kernel 'k' (a b.kern:2:8): index -1 out of bounds for dimension 3 of extent 9");
}

/* ---- the worker pool ---------------------------------------------------------------- */

typedef struct cover {
    _Atomic int *hits;
    atomic_int calls;
    atomic_int bad;
    int64_t count, chunk;
    int threads;
    atomic_int busy[16]; /* per worker index: a call in progress */
} cover;

static void cover_fn(void *user, int worker, int64_t b, int64_t e) {
    cover *c = user;
    atomic_fetch_add(&c->calls, 1);
    if (b < 0 || e > c->count || b >= e || e - b > c->chunk)
        atomic_fetch_add(&c->bad, 1);
    /* worker indices are 0..threads-1 and two calls with one index never overlap */
    if (worker < 0 || worker >= c->threads || atomic_exchange(&c->busy[worker], 1) != 0) {
        atomic_fetch_add(&c->bad, 1);
        return;
    }
    for (int64_t i = b; i < e && i < c->count && i >= 0; i++)
        atomic_fetch_add_explicit(&c->hits[i], 1, memory_order_relaxed);
    atomic_store(&c->busy[worker], 0);
}

Test(runtime, pool_covers_every_index_once) {
    static const int64_t counts[] = {0, 1, 2, 3, 7, 8, 13, 64, 97, 1000, 1009, 65537, 1000003};
    static const int threads[] = {1, 2, 3, 4, 8, 16};
    char err[256];
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        rt_pool *p = rt_pool_create(threads[t], err, sizeof err);
        cr_assert(p, "%s", err);
        cr_assert_eq(rt_pool_threads(p), threads[t]);
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            int64_t n = counts[ci];
            int64_t chunks[] = {rt_pool_chunk(n, threads[t]), 1, 3, 1000};
            for (int k = 0; k < 4; k++) {
                if (chunks[k] == 1 && n > 100000)
                    continue; /* keep the test fast */
                cover c = {calloc((size_t)n + 1, sizeof(int)), 0, 0, n, chunks[k], threads[t], {0}};
                rt_pool_run(p, n, chunks[k], cover_fn, &c);
                int64_t want_calls = (n + chunks[k] - 1) / chunks[k];
                cr_assert_eq(atomic_load(&c.calls), want_calls, "threads %d n %lld chunk %lld",
                             threads[t], (long long)n, (long long)chunks[k]);
                cr_assert_eq(atomic_load(&c.bad), 0);
                for (int64_t i = 0; i < n; i++)
                    cr_assert_eq(atomic_load(&c.hits[i]), 1, "threads %d n %lld index %lld",
                                 threads[t], (long long)n, (long long)i);
                free(c.hits);
            }
        }
        rt_pool_destroy(p);
    }
}

Test(runtime, pool_chunk_sizes) {
    cr_assert_eq(rt_pool_chunk(0, 4), 1);
    cr_assert_eq(rt_pool_chunk(31, 4), 1);
    cr_assert_eq(rt_pool_chunk(64, 4), 2);
    cr_assert_eq(rt_pool_chunk(1000000, 4), 31250); /* 8 chunks per thread */
    cr_assert_eq(rt_pool_chunk(1000000, 1), 125000);
}

static void slow_fn(void *user, int worker, int64_t b, int64_t e) {
    atomic_int *done = user;
    usleep(200);
    atomic_fetch_add(done, (int)(e - b));
}

Test(runtime, pool_runs_are_barriers) {
    char err[256];
    rt_pool *p = rt_pool_create(4, err, sizeof err);
    for (int r = 0; r < 200; r++) {
        atomic_int done = 0;
        rt_pool_run(p, 8, 1, slow_fn, &done);
        cr_assert_eq(atomic_load(&done), 8, "run %d returned before its chunks finished", r);
    }
    rt_pool_destroy(p);
    cr_assert_null(rt_pool_create(0, err, sizeof err));
    cr_assert_str_eq(err, "thread count 0 must be at least 1");
}

Test(runtime, module_code_belongs_to_the_device) {
    kern_context *ctx = make_ctx(1);
    char err[256];
    /* the CPU device resolves each task's _count and body into the kernel's handle */
    test_provider tp = {0};
    kern_module *m = make_module(ctx, &tp);
    const rt_host_kernel *hk = find(m, "steps")->handle;
    cr_assert_eq(hk->ntasks, 3);
    cr_assert_eq((void *)hk->count[1], (void *)steps_t1_count);
    cr_assert_eq((void *)hk->body[0], (void *)steps_t0);
    cr_assert_eq((void *)hk->body[2], (void *)steps_t2);
    cr_assert_eq((void *)hk->count[2], (void *)one_count);
    kern_module_release(m);
    cr_assert_eq(tp.releases, 1);
    /* code for another device is refused, naming what the module holds and the device */
    static const char ptx[] = ".version 8.0\n.target sm_90\n"; /* not NUL-terminated below */
    const struct {
        kern_code_kind kind;
        const char *msg;
    } cases[] = {
        {KERN_CODE_PTX, "the module holds PTX for cuda; the context's device is cpu"},
        {KERN_CODE_HSACO,
         "the module holds an HSACO code object for amdgpu; the context's device is cpu"},
    };
    for (int i = 0; i < 2; i++) {
        kern_meta *meta = kern_meta_parse(test_meta, strlen(test_meta), err, sizeof err);
        cr_assert(meta, "%s", err);
        m = (kern_module *)1;
        kern_code_image img = {.kind = cases[i].kind, .bytes = ptx, .len = sizeof ptx - 1};
        cr_assert_eq(rt_module_create(ctx, meta, img, &m), KERN_ERR_UNSUPPORTED);
        cr_assert_null(m);
        cr_assert_str_eq(kern_context_last_error(ctx), cases[i].msg);
    }
    kern_context_release(ctx);
    /* a context that failed to be created makes no modules (and releases the provider) */
    kern_context_options o = kern_context_options_default();
    o.threads = -1;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_ERR_ARGUMENT);
    kern_meta *meta = kern_meta_parse(test_meta, strlen(test_meta), err, sizeof err);
    test_provider tp2 = {0};
    kern_code_image img = {.kind = KERN_CODE_HOST, .host = {&tp2, tp_lookup, tp_release}};
    cr_assert_eq(rt_module_create(ctx, meta, img, &m), KERN_ERR_ARGUMENT);
    cr_assert_str_eq(kern_context_last_error(ctx), "the context was not created successfully");
    cr_assert_eq(tp2.releases, 1);
    cr_assert_eq(tp2.lookups, 0);
    kern_context_release(ctx);
}

/* ---- the fake asynchronous device (tests/fake_device.h) ----------------------------- */

/* The fake as these tests use it: memory the runtime does not read, one adstack slot. */
static fake_device *new_fake(void) {
    fake_device *f = fake_device_new((fake_device_config){.resident = 1});
    cr_assert_not_null(f);
    return f;
}

Test(runtime, retire_queue_unit) {
    fake_device *f = new_fake();
    rt_device *d = &f->base;
    d->submitted = 12; /* the points up to 12 were submitted */
    rt_retire_queue q;
    rt_retire_init(&q, 4);
    char err[128];
    void *m[8];
    for (int i = 0; i < 8; i++)
        cr_assert_eq(d->ops->alloc(d, 8, &m[i], err, sizeof err), KERN_OK);
    /* a point that has passed: freed at once */
    fake_complete(f, 3);
    cr_assert_eq(rt_retire_push(&q, d, m[0], 3, err, sizeof err), KERN_OK);
    cr_assert(fake_was_freed(f, m[0]));
    cr_assert_eq(q.len, 0);
    /* out of order points; polling frees exactly what has passed, keeping the rest */
    rt_retire_push(&q, d, m[1], 9, err, sizeof err);
    rt_retire_push(&q, d, m[2], 5, err, sizeof err);
    rt_retire_push(&q, d, m[3], 7, err, sizeof err);
    cr_assert_eq(q.len, 3);
    rt_retire_poll(&q, d);
    cr_assert_eq(q.len, 3);
    fake_complete(f, 6);
    rt_retire_poll(&q, d);
    cr_assert_eq(q.len, 2);
    cr_assert(fake_was_freed(f, m[2]));
    cr_assert(!fake_was_freed(f, m[1]) && !fake_was_freed(f, m[3]));
    cr_assert_eq(q.items[0].mem, m[1], "the order of what stays is kept");
    cr_assert_eq(f->waits, 0, "polling never blocks");
    /* beyond the depth: wait for the oldest only */
    rt_retire_push(&q, d, m[4], 10, err, sizeof err);
    rt_retire_push(&q, d, m[5], 11, err, sizeof err);
    cr_assert_eq(q.len, 4);
    cr_assert_eq(f->waits, 0);
    rt_retire_push(&q, d, m[6], 12, err, sizeof err);
    cr_assert_eq(f->waits, 1);
    cr_assert_eq(f->completed, 9, "waited for the oldest entry's point, no further");
    cr_assert(fake_was_freed(f, m[1]));
    cr_assert(fake_was_freed(f, m[3]), "point 7 passed with 9");
    cr_assert_eq(q.len, 3);
    cr_assert_eq(q.waits, 1);
    /* a drain frees everything */
    cr_assert_eq(d->ops->sync(d, err, sizeof err), KERN_OK);
    rt_retire_drain(&q, d);
    cr_assert_eq(q.len, 0);
    cr_assert(fake_was_freed(f, m[4]) && fake_was_freed(f, m[5]) && fake_was_freed(f, m[6]));
    d->submitted = 100; /* a later submission */
    rt_retire_push(&q, d, m[7], 100, err, sizeof err);
    rt_retire_fini(&q, d); /* frees what is left */
    cr_assert(fake_was_freed(f, m[7]));
    cr_assert_eq(f->frees, 8);
    fake_device_free(f);
}

static kern_context *new_fake_ctx(fake_device **f) {
    *f = new_fake();
    kern_context *ctx = fake_context(*f);
    cr_assert_not_null(ctx);
    return ctx;
}

Test(runtime, async_release_retires_until_completion) {
    fake_device *f;
    kern_context *ctx = new_fake_ctx(&f);
    test_provider tp = {0};
    kern_module *m = make_module(ctx, &tp);
    kern_buffer *x = buf1(ctx, KERN_F32, 8, NULL), *y = buf1(ctx, KERN_F32, 8, NULL);
    void *xmem = x->mem, *ymem = y->mem;
    kern_arg a[3] = {kern_arg_f32(1), kern_arg_buffer(x), kern_arg_buffer(y)};
    cr_assert_eq(kern_launch(find(m, "saxpy"), a, 3), KERN_OK);
    cr_assert_eq(ctx->npending, 1);
    kern_buffer_release(x); /* in flight: retired, not freed */
    cr_assert(!fake_was_freed(f, xmem));
    cr_assert_eq(ctx->retired.len, 1);
    cr_assert_eq(f->waits, 0);
    /* completion, then the next launch's poll frees it */
    fake_complete(f, 1);
    kern_buffer *x2 = buf1(ctx, KERN_F32, 8, NULL);
    a[1] = kern_arg_buffer(x2);
    cr_assert_eq(kern_launch(find(m, "saxpy"), a, 3), KERN_OK);
    cr_assert(fake_was_freed(f, xmem));
    cr_assert_eq(ctx->retired.len, 0);
    /* a read waits for the buffer's last launch */
    float back[8];
    cr_assert_eq(kern_buffer_read(y, back, sizeof back), KERN_OK);
    cr_assert_eq(f->waits, 1);
    cr_assert_eq(f->completed, 2);
    /* released after completion: freed at once */
    kern_buffer_release(y);
    cr_assert(fake_was_freed(f, ymem));
    /* a write waits for the buffer's last launch too */
    a[2] = kern_arg_buffer(x2);
    cr_assert_eq(kern_launch(find(m, "saxpy"), a, 3), KERN_OK);
    cr_assert_eq(f->completed, 2);
    cr_assert_eq(kern_buffer_write(x2, back, sizeof back), KERN_OK);
    cr_assert_eq(f->waits, 2);
    cr_assert_eq(f->completed, 3);
    kern_context_release(ctx);
    fake_device_free(f);
}

Test(runtime, async_retirement_is_bounded) {
    fake_device *f;
    kern_context *ctx = new_fake_ctx(&f);
    test_provider tp = {0};
    kern_module *m = make_module(ctx, &tp);
    kern_kernel *k = find(m, "simulate.grad");
    /* RT_RETIRE_DEPTH + 1 buffers released while their launches are in flight: the last
     * release waits for the oldest entry only */
    kern_buffer *bs[RT_RETIRE_DEPTH + 1];
    for (int i = 0; i <= RT_RETIRE_DEPTH; i++) {
        bs[i] = buf1(ctx, KERN_F32, 4, NULL);
        kern_arg a[1] = {kern_arg_buffer(bs[i])};
        cr_assert_eq(kern_launch(k, a, 1), KERN_OK);
    }
    void *first = bs[0]->mem, *second = bs[1]->mem;
    for (int i = 0; i < RT_RETIRE_DEPTH; i++)
        kern_buffer_release(bs[i]);
    cr_assert_eq(f->waits, 0);
    cr_assert_eq(ctx->retired.len, RT_RETIRE_DEPTH);
    kern_buffer_release(bs[RT_RETIRE_DEPTH]);
    cr_assert_eq(f->waits, 1);
    cr_assert_eq(f->completed, 1, "waited for the oldest launch only");
    cr_assert(fake_was_freed(f, first));
    cr_assert(!fake_was_freed(f, second));
    cr_assert_eq(ctx->retired.len, RT_RETIRE_DEPTH);
    cr_assert_eq(kern_sync(ctx), KERN_OK);
    cr_assert_eq(ctx->retired.len, 0, "a sync drains the queue");
    kern_context_release(ctx);
    fake_device_free(f);

    fake_device *g;
    ctx = new_fake_ctx(&g);
    m = make_module(ctx, &tp);
    k = find(m, "simulate.grad");
    for (int i = 0; i <= RT_RETIRE_DEPTH; i++) {
        bs[i] = buf1(ctx, KERN_F32, 4, NULL);
        kern_arg a[1] = {kern_arg_buffer(bs[i])};
        if (i < 60)
            cr_assert_eq(kern_launch(k, a, 1), KERN_OK);
    }
    /* 60 launches in flight; release 60 in-flight buffers and 5 idle ones */
    for (int i = 0; i <= RT_RETIRE_DEPTH; i++)
        kern_buffer_release(bs[i]);
    cr_assert_eq(g->waits, 0, "the queue never grew past its depth");
    cr_assert_eq(ctx->retired.len, 60);
    cr_assert_eq(kern_sync(ctx), KERN_OK);
    cr_assert_eq(ctx->retired.len, 0, "a sync drains the queue");
    kern_context_release(ctx);
    fake_device_free(g);
}

Test(runtime, async_device_error_reported_once_by_observer) {
    fake_device *f;
    kern_context *ctx = new_fake_ctx(&f);
    test_provider tp = {0};
    kern_module *m = make_module(ctx, &tp);
    kern_buffer *x = buf1(ctx, KERN_F32, 5, NULL);
    kern_arg a[1] = {kern_arg_buffer(x)};
    /* launch 1 will fail, launch 2 too; neither call sees it (not complete yet) */
    fake_set_error(f, 0, (kern_err_record){KERN_DEVERR_BOUNDS, 7, 9, 0, 5, 5});
    fake_set_error(f, 1, (kern_err_record){KERN_DEVERR_DIV_ZERO, 3, 14, 0, 0, 0});
    cr_assert_eq(kern_launch(find(m, "oob"), a, 1), KERN_OK);
    cr_assert_eq(kern_launch(find(m, "oob"), a, 1), KERN_OK);
    cr_assert_eq(kern_sync(ctx), KERN_ERR_DEVICE);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kernel 'oob' (tests/fake.kern:7:9): index 5 out of bounds for dimension 0 "
                     "of extent 5 (and 1 more device error in later launches)");
    cr_assert_eq(kern_sync(ctx), KERN_OK);
    cr_assert_eq(ctx->npending, 0);
    /* an error observed by a later launch: that launch is not submitted */
    fake_set_error(f, 2, (kern_err_record){KERN_DEVERR_SHIFT, 4, 2, 0, 33, 32});
    cr_assert_eq(kern_launch(find(m, "oob"), a, 1), KERN_OK);
    fake_complete(f, 3);
    uint64_t before = f->base.submitted;
    cr_assert_eq(kern_launch(find(m, "simulate.grad"), a, 1), KERN_ERR_DEVICE);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kernel 'oob' (tests/fake.kern:4:2): shift by 33 >= 32 bits (observed "
                     "before launching 'simulate.grad', which was not launched)");
    cr_assert_eq(f->base.submitted, before);
    /* an error observed by a release (which returns nothing) is reported by the next call */
    fake_set_error(f, 3, (kern_err_record){KERN_DEVERR_DIV_ZERO, 3, 14, 0, 0, 0});
    cr_assert_eq(kern_launch(find(m, "oob"), a, 1), KERN_OK);
    kern_module_release(m); /* waits for the module's launches and collects them */
    cr_assert_eq(kern_sync(ctx), KERN_ERR_DEVICE);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "kernel 'oob' (tests/fake.kern:3:14): integer division by zero");
    kern_context_release(ctx);
    fake_device_free(f);
}

/* ---- AOT shared objects ------------------------------------------------------------- */

#ifdef KERN_TEST_AOT_GOOD
Test(runtime, aot_module_loads_and_runs) {
    kern_context *ctx = make_ctx(2);
    kern_module *m = NULL;
    cr_assert_eq(kern_module_load_file(ctx, KERN_TEST_AOT_GOOD, &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    kern_kernel *k = find(m, "saxpy");
    float x[100], y[100], want[100];
    for (int i = 0; i < 100; i++) {
        x[i] = (float)i;
        y[i] = (float)(100 - i);
        want[i] = 0.5f * x[i] + y[i];
    }
    kern_buffer *bx = buf1(ctx, KERN_F32, 100, x), *by = buf1(ctx, KERN_F32, 100, y);
    kern_arg a[3] = {kern_arg_f32(0.5f), kern_arg_buffer(bx), kern_arg_buffer(by)};
    cr_assert_eq(kern_launch(k, a, 3), KERN_OK);
    cr_assert_eq(kern_buffer_read(by, y, sizeof y), KERN_OK);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(y[i], want[i]);
    kern_module_release(m);
    kern_context_release(ctx);
}

Test(runtime, aot_module_errors) {
    kern_context *ctx = make_ctx(1);
    kern_module *m = (kern_module *)1;
    cr_assert_eq(kern_module_load_file(ctx, "/nonexistent/mod.so", &m), KERN_ERR_NOT_FOUND);
    cr_assert_null(m);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "cannot open module '/nonexistent/mod.so': No such file or directory");

    const char *text = KERN_SOURCE_ROOT "/tests/test_runtime.c";
    cr_assert_eq(kern_module_load_file(ctx, text, &m), KERN_ERR_FORMAT);
    char want[1024];
    snprintf(want, sizeof want, "'%s' is not a loadable module: ", text);
    cr_assert(strncmp(kern_context_last_error(ctx), want, strlen(want)) == 0, "%s",
              kern_context_last_error(ctx));

    cr_assert_eq(kern_module_load_file(ctx, KERN_SOURCE_ROOT "/tests", &m), KERN_ERR_FORMAT);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "module '" KERN_SOURCE_ROOT "/tests' is not a regular file");

    cr_assert_eq(kern_module_load_file(ctx, KERN_TEST_AOT_NOTKERN, &m), KERN_ERR_FORMAT);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "'" KERN_TEST_AOT_NOTKERN "' is not a kern module (it does not define "
                     "kern_module_meta and kern_module_meta_size)");

    cr_assert_eq(kern_module_load_file(ctx, KERN_TEST_AOT_BADMETA, &m), KERN_ERR_FORMAT);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "'" KERN_TEST_AOT_BADMETA "': corrupt module metadata: metadata line 7: "
                     "task: expected parallel or serial, found 'sideways'");

    cr_assert_eq(kern_module_load_file(ctx, KERN_TEST_AOT_NOSYM, &m), KERN_ERR_FORMAT);
    cr_assert_str_eq(kern_context_last_error(ctx),
                     "'" KERN_TEST_AOT_NOSYM "': kernel 'saxpy', task 0: missing symbol "
                     "'kern_saxpy__t0'");
    cr_assert_null(m);
    kern_context_release(ctx);
}
#endif

/* JIT modules build K.grad lazily (issue 11, item 3): the kernels listed include the
 * gradients that may be built, the first lookup of one builds them all once, a kernel whose
 * gradient fails the global-access check says why without a build, and the gradient that is
 * built lazily computes what an eager build computes (KERN_JIT_EAGER_GRADS=1). */
Test(runtime, jit_gradients_are_built_on_first_lookup) {
    const char *src = "kernel sq(x: f32[], y: f32[]) {\n"
                      "    for i in 0..len(x) { y[i] = x[i] * x[i]; }\n"
                      "}\n"
                      "kernel inplace(x: f32[]) {\n"
                      "    for i in 0..len(x) { x[i] = x[i] * x[i]; }\n"
                      "}\n";
    kern_context *ctx;
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "lazy.kern", &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    cr_assert_eq(kern_module_kernel_count(m), 6,
                 "sq, inplace, sq.grad, sq.jvp, sq.grad.jvp, inplace.jvp");
    cr_expect_str_eq(kern_module_kernel_name(m, 2), "sq.grad");
    cr_expect_str_eq(kern_module_kernel_name(m, 3), "sq.jvp");
    cr_expect_str_eq(kern_module_kernel_name(m, 4), "sq.grad.jvp");
    cr_expect_str_eq(kern_module_kernel_name(m, 5), "inplace.jvp");
    cr_expect_null(kern_module_kernel_name(m, 6));
    cr_expect_null(m->lazy->built[0], "nothing built before a lookup");
    kern_kernel *g1, *g2, *k;
    cr_assert_eq(kern_kernel_find(m, "sq.grad", &g1), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_module *built = m->lazy->built[0];
    cr_assert_not_null(built);
    cr_expect_eq(kern_module_kernel_count(built), 1, "the gradient alone");
    cr_assert_eq(kern_kernel_find(m, "sq.grad", &g2), KERN_OK);
    cr_expect_eq(g1, g2, "built once");
    cr_expect_eq(m->lazy->built[0], built);
    cr_expect_eq(kern_kernel_find(m, "inplace.grad", &k), KERN_ERR_NOT_FOUND);
    cr_expect(strstr(kern_context_last_error(ctx), "kernel 'inplace.grad' was not built: "
                                                   "lazy.kern:5:"),
              "%s", kern_context_last_error(ctx));
    cr_expect_eq(kern_kernel_find(m, "inplace.grad.jvp", &k), KERN_ERR_NOT_FOUND);
    cr_expect(strstr(kern_context_last_error(ctx), "kernel 'inplace.grad.jvp' was not built: "
                                                   "lazy.kern:5:"),
              "%s", kern_context_last_error(ctx));
    cr_expect_eq(kern_kernel_find(m, "nosuch.grad", &k), KERN_ERR_NOT_FOUND);
    cr_expect(strstr(kern_context_last_error(ctx), "no kernel 'nosuch.grad' in the module"), "%s",
              kern_context_last_error(ctx));
    /* the lazy gradient: dL/dx = 2 x y.grad, against a C loop */
    float xv[4] = {1, -2, 0.5f, 3}, yg[4] = {1, 1, 2, -1}, xg[4] = {0}, yv[4] = {0};
    int64_t n = 4;
    kern_buffer *x, *y, *xgb, *ygb;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, xv, &x), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, yv, &y), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, xg, &xgb), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, yg, &ygb), KERN_OK);
    kern_arg args[] = {kern_arg_buffer(x), kern_arg_buffer(y), kern_arg_buffer(xgb),
                       kern_arg_buffer(ygb)};
    cr_assert_eq(kern_launch(g1, args, 4), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_buffer_read(xgb, xg, sizeof xg), KERN_OK);
    for (int i = 0; i < 4; i++)
        cr_expect_float_eq(xg[i], 2 * xv[i] * yg[i], 1e-6, "x.grad[%d]", i);
    /* released with its module; the module's release with the context's */
    kern_module_release(m);
    kern_context_release(ctx);
}

/* kern_kernel_param_written: 0 for an array the kernel only reads, 1 for one it stores to or
 * updates atomically, -1 for scalars, bad indices and NULL. */
/* A CPU context and the JIT module of src (both asserted to work). */
static kern_module *jit_module(const char *src, const char *name, kern_context **ctx) {
    cr_assert_eq(kern_context_create(NULL, ctx), KERN_OK);
    kern_module *m;
    cr_assert_eq(kern_module_from_source(*ctx, src, strlen(src), name, &m), KERN_OK, "%s",
                 kern_context_last_error(*ctx));
    return m;
}

Test(runtime, param_written_says_which_arrays_a_kernel_writes) {
    const char *src = "kernel k(x: f32[], y: f32[], z: f32[], n: i32) {\n"
                      "    for i in 0..len(x) { y[i] = x[i]; atomic_add(z[0], x[i]); }\n"
                      "}\n";
    kern_context *ctx;
    kern_module *m = jit_module(src, "w.kern", &ctx);
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, "k", &k), KERN_OK);
    cr_expect_eq(kern_kernel_param_written(k, 0), 0, "x is only read");
    cr_expect_eq(kern_kernel_param_written(k, 1), 1, "y is stored to");
    cr_expect_eq(kern_kernel_param_written(k, 2), 1, "z is updated atomically");
    cr_expect_eq(kern_kernel_param_written(k, 3), -1, "n is a scalar");
    cr_expect_eq(kern_kernel_param_written(k, 4), -1);
    cr_expect_eq(kern_kernel_param_written(NULL, 0), -1);
    kern_context_release(ctx);
}

static void expect_param(kern_kernel *k, int i, const char *name, kern_dtype dtype, int rank,
                         const char *type_name, int ntail, int64_t t0, int64_t t1) {
    kern_param_info pi;
    memset(&pi, 0x5a, sizeof pi);
    cr_assert_eq(kern_kernel_param(k, i, &pi), KERN_OK);
    cr_expect_str_eq(pi.name, name);
    cr_expect_eq(pi.dtype, dtype, "%s", name);
    cr_expect_eq(pi.rank, rank, "%s", name);
    cr_expect_eq(pi.is_array, rank > 0, "%s", name);
    cr_expect_str_eq(pi.type_name, type_name);
    cr_expect_eq(pi.ntail, ntail, "%s", name);
    cr_expect_eq(pi.tail[0], t0, "%s", name);
    cr_expect_eq(pi.tail[1], t1, "%s", name);
}

Test(runtime, param_info_gives_declared_types_and_trailing_extents) {
    const char *src = "struct P { pos: vec3, vel: vec3, mass: f32 }\n"
                      "kernel k(x: vec3[], m: mat3[], ps: P[], g: vec3, d: dmat2[,], n: i32,\n"
                      "         y: f32[,]) {\n"
                      "    for i in 0..len(x) {\n"
                      "        ps[i].vel += m[i] * x[i] + g;\n"
                      "        y[i, 0] = f32(d[0, 0][1][1]) + f32(n);\n"
                      "    }\n"
                      "}\n";
    kern_context *ctx;
    kern_module *m = jit_module(src, "v.kern", &ctx);
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, "k", &k), KERN_OK);
    const char *pt = "P{pos:vec3,vel:vec3,mass:f32}[]";
    expect_param(k, 0, "x", KERN_F32, 2, "vec3[]", 1, 3, 0);
    expect_param(k, 1, "m", KERN_F32, 3, "mat3[]", 2, 3, 3);
    expect_param(k, 2, "ps", KERN_F32, 2, pt, 1, 7, 0);
    expect_param(k, 3, "g", KERN_F32, 1, "vec3", 1, 3, 0);
    expect_param(k, 4, "d", KERN_F64, 4, "dmat2[,]", 2, 2, 2);
    expect_param(k, 5, "n", KERN_I32, 0, "i32", 0, 0, 0);
    expect_param(k, 6, "y", KERN_F32, 2, "f32[,]", 0, 0, 0);
    /* the adjoints have the primal's declared type; a scalar's is f32[] of length 1 */
    cr_assert_eq(kern_kernel_find(m, "k.grad", &k), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_kernel_param_count(k), 7 + 6);
    expect_param(k, 7, "x.grad", KERN_F32, 2, "vec3[]", 1, 3, 0);
    expect_param(k, 9, "ps.grad", KERN_F32, 2, pt, 1, 7, 0);
    expect_param(k, 10, "g.grad", KERN_F32, 1, "vec3", 1, 3, 0);
    expect_param(k, 11, "d.grad", KERN_F64, 4, "dmat2[,]", 2, 2, 2);
    expect_param(k, 12, "y.grad", KERN_F32, 2, "f32[,]", 0, 0, 0);
    kern_module_release(m);
    kern_context_release(ctx);
}
