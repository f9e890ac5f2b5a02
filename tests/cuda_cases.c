/* cuda_cases.c - end-to-end cases of the CUDA device (see cuda_cases.h): a module file
 * (the container of docs/gpu-abi.md) with hand-written PTX for four kernels, loaded with
 * kern_module_load_file and launched through the public API; results are compared with
 * values computed here by plain C loops.
 *   saxpy(a: f32, x: f32[], y: f32[])   y[i] = a * x[i] + y[i] (one parallel task)
 *   oob(x: f32[])                       a serial task that records an index error at 7:9
 *   steps(out: i64[])                   serial out[0] = 7; parallel over len - 1 items
 *                                       out[n + 1] = out[0] * (n + 1); serial out[0] =
 *                                       out[1] + out[len - 1]: tasks run in order
 *   stk.grad(n: i32, out: i64[])        per item m, pushes m*1000+k (i64) and m+k (i32)
 *                                       for k < n onto two slot-major adstacks, pops them
 *                                       and stores the sum: any overlap between slots or
 *                                       stacks shows up as a wrong sum */
#include "cuda_cases.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/modfile.h"
#include "../include/kern.h"

static const char cases_meta[] = "kern-meta 1\n"
                                 "source tests/cuda.kern\n"
                                 "kernel saxpy 1 1 3 1\n"
                                 "param a f32 0\nparam x f32[] 0\nparam y f32[] 0\n"
                                 "task parallel 1 2 5\nextent 0 (dim 1 0)\n"
                                 "kernel oob 6 1 1 1\nparam x f32[] 0\ntask serial 0 7 5\n"
                                 "kernel steps 9 1 1 3\nparam out i64[] 0\n"
                                 "task serial 0 10 5\n"
                                 "task parallel 1 11 5\nextent 0 (sub (dim 0 0) 1)\n"
                                 "task serial 0 12 5\n"
                                 "kernel stk.grad 20 1 2 1\nparam n i32 0\nparam out i64[] 0\n"
                                 "task parallel 1 21 5\nextent 0 (dim 1 0)\n"
                                 "adstack i64 22 9 (param 0)\nadstack i32 23 9 (param 0)\n"
                                 "end\n";

/* w (thread index) in %rd_w and T (threads) in %rd_T */
#define PTX_THREAD(w, T)                                                                \
    "mov.u32 %r1, %ctaid.x;\nmov.u32 %r2, %ntid.x;\nmov.u32 %r3, %tid.x;\n"             \
    "mov.u32 %r4, %nctaid.x;\nmul.wide.u32 " w ", %r1, %r2;\ncvt.u64.u32 %rd30, %r3;\n" \
    "add.u64 " w ", " w ", %rd30;\nmul.wide.u32 " T ", %r4, %r2;\n"

static const char cases_ptx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    /* saxpy */
    ".visible .entry kern_saxpy__t0(.param .f32 p_a, .param .u64 p_x, .param .u64 p_x0,\n"
    "    .param .u64 p_y, .param .u64 p_y0, .param .u64 p_err, .param .u64 p_heap,\n"
    "    .param .u64 p_slots)\n{\n"
    ".reg .pred %p<2>;\n.reg .f32 %f<4>;\n.reg .b32 %r<8>;\n.reg .b64 %rd<32>;\n"
    "ld.param.f32 %f0, [p_a];\nld.param.u64 %rd0, [p_x];\nld.param.u64 %rd1, [p_x0];\n"
    "ld.param.u64 %rd2, [p_y];\ncvta.to.global.u64 %rd0, %rd0;\n"
    "cvta.to.global.u64 %rd2, %rd2;\n" PTX_THREAD(
        "%rd3",
        "%rd5") "SAXPY_LOOP:\n"
                "setp.ge.s64 %p0, %rd3, %rd1;\n@%p0 bra SAXPY_DONE;\nshl.b64 %rd6, %rd3, 2;\n"
                "add.u64 %rd7, %rd0, %rd6;\nadd.u64 %rd8, %rd2, %rd6;\nld.global.f32 %f1, [%rd7];\n"
                "ld.global.f32 %f2, [%rd8];\nfma.rn.f32 %f3, %f0, %f1, %f2;\n"
                "st.global.f32 [%rd8], %f3;\nadd.u64 %rd3, %rd3, %rd5;\nbra SAXPY_LOOP;\n"
                "SAXPY_DONE:\nret;\n}\n"
                /* oob: records KERN_DEVERR_BOUNDS at 7:9, index 5, extent len(x) */
                ".visible .entry kern_oob__t0(.param .u64 p_x, .param .u64 p_x0, .param .u64 "
                "p_err,\n"
                "    .param .u64 p_heap, .param .u64 p_slots)\n{\n"
                ".reg .pred %p<2>;\n.reg .b32 %r<8>;\n.reg .b64 %rd<8>;\n"
                "ld.param.u64 %rd0, [p_err];\nld.param.u64 %rd1, [p_x0];\n"
                "cvta.to.global.u64 %rd0, %rd0;\nmov.u32 %r1, 0;\nmov.u32 %r2, 1;\n"
                "atom.global.cas.b32 %r0, [%rd0], %r1, %r2;\nsetp.ne.u32 %p0, %r0, 0;\n"
                "@%p0 bra OOB_DONE;\nmov.u32 %r3, 7;\nst.global.u32 [%rd0+4], %r3;\nmov.u32 %r3, "
                "9;\n"
                "st.global.u32 [%rd0+8], %r3;\nmov.u32 %r3, 0;\nst.global.u32 [%rd0+12], %r3;\n"
                "mov.u64 %rd2, 5;\nst.global.u64 [%rd0+16], %rd2;\nst.global.u64 [%rd0+24], %rd1;\n"
                "OOB_DONE:\nret;\n}\n"
                /* steps: three tasks */
                ".visible .entry kern_steps__t0(.param .u64 p_out, .param .u64 p_out0, .param .u64 "
                "p_err,\n"
                "    .param .u64 p_heap, .param .u64 p_slots)\n{\n"
                ".reg .b64 %rd<4>;\nld.param.u64 %rd0, [p_out];\ncvta.to.global.u64 %rd0, %rd0;\n"
                "mov.u64 %rd1, 7;\nst.global.u64 [%rd0], %rd1;\nret;\n}\n"
                ".visible .entry kern_steps__t1(.param .u64 p_out, .param .u64 p_out0, .param .u64 "
                "p_err,\n"
                "    .param .u64 p_heap, .param .u64 p_slots)\n{\n"
                ".reg .pred %p<2>;\n.reg .b32 %r<8>;\n.reg .b64 %rd<32>;\n"
                "ld.param.u64 %rd0, [p_out];\ncvta.to.global.u64 %rd0, %rd0;\n"
                "ld.param.u64 %rd1, [p_out0];\nsub.s64 %rd1, %rd1, 1;\n"
                "ld.global.u64 %rd2, [%rd0];\n" PTX_THREAD(
                    "%rd3",
                    "%rd5") "STEPS_LOOP:\n"
                            "setp.ge.s64 %p0, %rd3, %rd1;\n@%p0 bra STEPS_DONE;\nadd.s64 %rd6, "
                            "%rd3, 1;\n"
                            "mul.lo.s64 %rd7, %rd2, %rd6;\nshl.b64 %rd8, %rd6, 3;\nadd.u64 %rd8, "
                            "%rd8, %rd0;\n"
                            "st.global.u64 [%rd8], %rd7;\nadd.u64 %rd3, %rd3, %rd5;\nbra "
                            "STEPS_LOOP;\n"
                            "STEPS_DONE:\nret;\n}\n"
                            ".visible .entry kern_steps__t2(.param .u64 p_out, .param .u64 p_out0, "
                            ".param .u64 p_err,\n"
                            "    .param .u64 p_heap, .param .u64 p_slots)\n{\n"
                            ".reg .b64 %rd<8>;\nld.param.u64 %rd0, [p_out];\ncvta.to.global.u64 "
                            "%rd0, %rd0;\n"
                            "ld.param.u64 %rd1, [p_out0];\nld.global.u64 %rd2, [%rd0+8];\nshl.b64 "
                            "%rd3, %rd1, 3;\n"
                            "add.u64 %rd3, %rd3, %rd0;\nld.global.u64 %rd4, [%rd3+-8];\nadd.s64 "
                            "%rd2, %rd2, %rd4;\n"
                            "st.global.u64 [%rd0], %rd2;\nret;\n}\n"
                            /* stk.grad: two slot-major adstacks */
                            ".visible .entry kern_stk__grad__t0(.param .u32 p_n, .param .u64 "
                            "p_out,\n"
                            "    .param .u64 p_out0, .param .u64 p_err, .param .u64 p_heap, .param "
                            ".u64 p_slots,\n"
                            "    .param .u64 p_off0, .param .u64 p_cap0, .param .u64 p_off1, "
                            ".param .u64 p_cap1)\n{\n"
                            ".reg .pred %p<4>;\n.reg .b32 %r<8>;\n.reg .b64 %rd<32>;\n"
                            "ld.param.u32 %r0, [p_n];\ncvt.s64.s32 %rd0, %r0;\n"
                            "ld.param.u64 %rd1, [p_out];\ncvta.to.global.u64 %rd1, %rd1;\n"
                            "ld.param.u64 %rd2, [p_out0];\nld.param.u64 %rd3, [p_heap];\n"
                            "cvta.to.global.u64 %rd3, %rd3;\nld.param.u64 %rd4, [p_slots];\n"
                            "ld.param.u64 %rd5, [p_off0];\nld.param.u64 %rd6, "
                            "[p_off1];\n" PTX_THREAD(
                                "%rd7", "%rd9") "mov.u64 %rd10, %rd7;\n"
                                                "shl.b64 %rd11, %rd7, 3;\nadd.u64 %rd11, %rd11, "
                                                "%rd5;\nadd.u64 %rd11, %rd11, %rd3;\n"
                                                "shl.b64 %rd12, %rd4, 3;\n"
                                                "shl.b64 %rd13, %rd7, 2;\nadd.u64 %rd13, %rd13, "
                                                "%rd6;\nadd.u64 %rd13, %rd13, %rd3;\n"
                                                "shl.b64 %rd14, %rd4, 2;\n"
                                                "STK_ITEM:\nsetp.ge.s64 %p0, %rd10, %rd2;\n@%p0 "
                                                "bra STK_DONE;\n"
                                                "mov.u64 %rd15, 0;\nmov.u64 %rd16, %rd11;\nmov.u64 "
                                                "%rd17, %rd13;\n"
                                                "mul.lo.s64 %rd18, %rd10, 1000;\n"
                                                "STK_PUSH:\nsetp.ge.s64 %p1, %rd15, %rd0;\n@%p1 "
                                                "bra STK_POPS;\n"
                                                "add.s64 %rd19, %rd18, %rd15;\nst.global.u64 "
                                                "[%rd16], %rd19;\n"
                                                "add.s64 %rd20, %rd10, %rd15;\ncvt.u32.u64 %r5, "
                                                "%rd20;\nst.global.u32 [%rd17], %r5;\n"
                                                "add.u64 %rd16, %rd16, %rd12;\nadd.u64 %rd17, "
                                                "%rd17, %rd14;\nadd.s64 %rd15, %rd15, 1;\n"
                                                "bra STK_PUSH;\n"
                                                "STK_POPS:\nmov.u64 %rd21, 0;\n"
                                                "STK_POP:\nsetp.le.s64 %p2, %rd15, 0;\n@%p2 bra "
                                                "STK_STORE;\n"
                                                "sub.s64 %rd15, %rd15, 1;\nsub.u64 %rd16, %rd16, "
                                                "%rd12;\nsub.u64 %rd17, %rd17, %rd14;\n"
                                                "ld.global.u64 %rd22, [%rd16];\nld.global.u32 %r6, "
                                                "[%rd17];\ncvt.u64.u32 %rd23, %r6;\n"
                                                "add.s64 %rd21, %rd21, %rd22;\nadd.s64 %rd21, "
                                                "%rd21, %rd23;\nbra STK_POP;\n"
                                                "STK_STORE:\nshl.b64 %rd24, %rd10, 3;\nadd.u64 "
                                                "%rd24, %rd24, %rd1;\n"
                                                "st.global.u64 [%rd24], %rd21;\nadd.u64 %rd10, "
                                                "%rd10, %rd9;\nbra STK_ITEM;\n"
                                                "STK_DONE:\nret;\n}\n";

/* Writes a module file (common/modfile.h) for target `target` with the given metadata and
 * code; the path goes to path (a temporary file the caller unlinks). */
static int write_module(char *path, size_t plen, const char *target, const char *meta, size_t mlen,
                        const char *code, size_t clen) {
    size_t n;
    char *file = kern_modfile_build(target, meta, mlen, code, clen, &n);
    snprintf(path, plen, "/tmp/kern-cuda-case-XXXXXX");
    int fd = file ? mkstemp(path) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        free(file);
        return 0;
    }
    size_t put = fwrite(file, 1, n, f);
    free(file);
    return (fclose(f) == 0) & (put == n);
}

typedef struct cuda_env {
    kern_context *ctx;
    kern_module *m;
} cuda_env;

/* A CUDA context and the cases' module; -1 without a CUDA device. */
static int env_open(cuda_env *e, char *msg, size_t len) {
    memset(e, 0, sizeof *e);
    kern_context_options o = kern_context_options_default();
    o.backend = KERN_BACKEND_CUDA;
    kern_status s = kern_context_create(&o, &e->ctx);
    if (s != KERN_OK) {
        snprintf(msg, len, "no CUDA device: %s", kern_context_last_error(e->ctx));
        kern_context_release(e->ctx);
        e->ctx = NULL;
        return s == KERN_ERR_UNSUPPORTED ? -1 : 0;
    }
    char path[64];
    /* the PTX is passed without its terminating NUL: the device must add one */
    if (!write_module(path, sizeof path, "cuda", cases_meta, sizeof cases_meta - 1, cases_ptx,
                      sizeof cases_ptx - 1)) {
        snprintf(msg, len, "cannot write a module file in /tmp");
        return 0;
    }
    s = kern_module_load_file(e->ctx, path, &e->m);
    unlink(path);
    if (s != KERN_OK) {
        snprintf(msg, len, "loading the module: %s: %s", kern_status_name(s),
                 kern_context_last_error(e->ctx));
        return 0;
    }
    return 1;
}

static void env_close(cuda_env *e) { kern_context_release(e->ctx); }

static kern_kernel *kernel(cuda_env *e, const char *name) {
    kern_kernel *k = NULL;
    kern_kernel_find(e->m, name, &k);
    return k;
}

#define FAIL(...)                        \
    do {                                 \
        snprintf(msg, len, __VA_ARGS__); \
        ok = 0;                          \
        goto done;                       \
    } while (0)

#define CHECK(call)                                                                          \
    do {                                                                                     \
        kern_status s_ = (call);                                                             \
        if (s_ != KERN_OK)                                                                   \
            FAIL("%s: %s: %s", #call, kern_status_name(s_), kern_context_last_error(e.ctx)); \
    } while (0)

int cuda_case_saxpy(char *msg, size_t len) {
    cuda_env e;
    int ok = env_open(&e, msg, len);
    if (ok != 1)
        return ok;
    /* sizes around the block and around the resident grid (a grid-stride loop) */
    static const int64_t sizes[] = {1, 255, 256, 257, 100000, 3000001, 0};
    float *x = NULL, *y = NULL, *want = NULL;
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        int64_t n = sizes[c];
        size_t bytes = (size_t)(n ? n : 1) * sizeof(float);
        free(x), free(y), free(want);
        x = malloc(bytes), y = malloc(bytes), want = malloc(bytes);
        if (!x || !y || !want)
            FAIL("out of host memory");
        for (int64_t i = 0; i < n; i++) {
            x[i] = (float)(i % 1000) * 0.5f;
            y[i] = (float)(i % 7) - 3.0f;
            want[i] = 1.5f * x[i] + y[i]; /* exact in f32: a fused multiply-add agrees */
        }
        kern_buffer *bx = NULL, *by = NULL;
        CHECK(kern_buffer_create(e.ctx, KERN_F32, 1, &n, x, &bx));
        CHECK(kern_buffer_create(e.ctx, KERN_F32, 1, &n, y, &by));
        kern_arg a[3] = {kern_arg_f32(1.5f), kern_arg_buffer(bx), kern_arg_buffer(by)};
        CHECK(kern_launch(kernel(&e, "saxpy"), a, 3));
        CHECK(kern_buffer_read(by, y, (size_t)n * sizeof(float)));
        for (int64_t i = 0; i < n; i++)
            if (y[i] != want[i])
                FAIL("saxpy of %lld: y[%lld] = %g, expected %g", (long long)n, (long long)i,
                     (double)y[i], (double)want[i]);
        kern_buffer_release(bx);
        kern_buffer_release(by);
    }
    CHECK(kern_sync(e.ctx));
    if (strncmp(kern_context_device_name(e.ctx), "cuda: ", 6) != 0)
        FAIL("device name '%s'", kern_context_device_name(e.ctx));
    snprintf(msg, len, "saxpy ok on %s", kern_context_device_name(e.ctx));
done:
    free(x), free(y), free(want);
    env_close(&e);
    return ok;
}

int cuda_case_task_order(char *msg, size_t len) {
    cuda_env e;
    int ok = env_open(&e, msg, len);
    if (ok != 1)
        return ok;
    int64_t *out = NULL;
    static const int64_t sizes[] = {2, 3, 1000, 1000003}; /* n = 1 would read out[1] */
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        int64_t n = sizes[c];
        free(out);
        out = calloc((size_t)n, sizeof *out);
        if (!out)
            FAIL("out of host memory");
        kern_buffer *b = NULL;
        CHECK(kern_buffer_create(e.ctx, KERN_I64, 1, &n, NULL, &b));
        kern_arg a[1] = {kern_arg_buffer(b)};
        CHECK(kern_launch(kernel(&e, "steps"), a, 1));
        CHECK(kern_buffer_read(b, out, (size_t)n * sizeof *out));
        /* out[i] = 7 i for i >= 1, out[0] = out[1] + out[n - 1] */
        int64_t w0 = 7 + 7 * (n - 1);
        if (out[0] != w0)
            FAIL("steps of %lld: out[0] = %lld, expected %lld", (long long)n, (long long)out[0],
                 (long long)w0);
        for (int64_t i = 1; i < n; i++)
            if (out[i] != 7 * i)
                FAIL("steps of %lld: out[%lld] = %lld, expected %lld", (long long)n, (long long)i,
                     (long long)out[i], (long long)(7 * i));
        kern_buffer_release(b);
    }
done:
    free(out);
    env_close(&e);
    return ok;
}

int cuda_case_error_record(char *msg, size_t len) {
    cuda_env e;
    int ok = env_open(&e, msg, len);
    if (ok != 1)
        return ok;
    int64_t n = 5;
    kern_buffer *b = NULL;
    CHECK(kern_buffer_create(e.ctx, KERN_F32, 1, &n, NULL, &b));
    kern_arg a[1] = {kern_arg_buffer(b)};
    /* the error comes with the call that observes the launch's completion: the launch
     * itself when the kernel finished before it returned, else the sync */
    for (int round = 0; round < 3; round++) {
        kern_status s = kern_launch(kernel(&e, "oob"), a, 1);
        if (s == KERN_OK)
            s = kern_sync(e.ctx);
        const char *want = "kernel 'oob' (tests/cuda.kern:7:9): index 5 out of bounds for "
                           "dimension 0 of extent 5";
        if (s != KERN_ERR_DEVICE || strcmp(kern_context_last_error(e.ctx), want) != 0)
            FAIL("round %d: %s '%s', expected KERN_ERR_DEVICE '%s'", round, kern_status_name(s),
                 kern_context_last_error(e.ctx), want);
        CHECK(kern_sync(e.ctx)); /* reported once */
    }
    /* many launches in flight: more than the record pool holds, every error counted; each
     * over 2^24 elements, so that the queue is still busy when the next oob launch returns
     * (over 5 elements an H200 kept pace with the launches, and the oob launch returned
     * its own error) */
    int64_t nbig = (int64_t)1 << 24;
    kern_buffer *big = NULL;
    CHECK(kern_buffer_create(e.ctx, KERN_F32, 1, &nbig, NULL, &big));
    kern_arg sa[3] = {kern_arg_f32(1), kern_arg_buffer(big), kern_arg_buffer(big)};
    for (int i = 0; i < 1500; i++)
        CHECK(kern_launch(kernel(&e, "saxpy"), sa, 3));
    CHECK(kern_launch(kernel(&e, "oob"), a, 1));
    kern_status s2 = kern_launch(kernel(&e, "oob"), a, 1);
    if (s2 == KERN_ERR_DEVICE) {
        /* the first one had completed: observed before the second launch (which then is not
         * launched) or right after it (then the second's error comes with the sync) */
        if (!strstr(kern_context_last_error(e.ctx), "which was not launched") &&
            kern_sync(e.ctx) != KERN_ERR_DEVICE)
            FAIL("second launch: '%s'", kern_context_last_error(e.ctx));
    } else if (s2 != KERN_OK || kern_sync(e.ctx) != KERN_ERR_DEVICE ||
               !strstr(kern_context_last_error(e.ctx),
                       "(and 1 more device error in later launches)")) {
        FAIL("two errors in flight: '%s'", kern_context_last_error(e.ctx));
    }
done:
    env_close(&e);
    return ok;
}

int cuda_case_adstack_slot_major(char *msg, size_t len) {
    cuda_env e;
    int ok = env_open(&e, msg, len);
    if (ok != 1)
        return ok;
    int64_t *out = NULL;
    static const int64_t sizes[] = {1000, 5000000};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        int64_t n = sizes[c];
        int32_t depth = c == 0 ? 3 : 8;
        free(out);
        out = calloc((size_t)n, sizeof *out);
        if (!out)
            FAIL("out of host memory");
        kern_buffer *b = NULL;
        CHECK(kern_buffer_create(e.ctx, KERN_I64, 1, &n, NULL, &b));
        kern_arg a[2] = {kern_arg_i32(depth), kern_arg_buffer(b)};
        CHECK(kern_launch(kernel(&e, "stk.grad"), a, 2));
        CHECK(kern_buffer_read(b, out, (size_t)n * sizeof *out));
        for (int64_t m = 0; m < n; m++) {
            /* sum over k < depth of (1000 m + k) + (m + k) */
            int64_t want = (int64_t)depth * 1001 * m + (int64_t)depth * (depth - 1);
            if (out[m] != want)
                FAIL("stk.grad over %lld items, depth %d: out[%lld] = %lld, expected %lld",
                     (long long)n, depth, (long long)m, (long long)out[m], (long long)want);
        }
        kern_adstack_info info;
        CHECK(kern_context_adstack_info(e.ctx, &info));
        int64_t slots_want = (n + 255) / 256 * 256;
        if (c == 0 && info.last_slots != slots_want)
            FAIL("%lld items: %lld slots, expected %lld", (long long)n, (long long)info.last_slots,
                 (long long)slots_want);
        if (info.last_slots % 256 != 0 || info.last_slots > slots_want)
            FAIL("%lld items: %lld slots", (long long)n, (long long)info.last_slots);
        if (info.last_stride != (int64_t)depth * 12)
            FAIL("stride %lld, expected %d", (long long)info.last_stride, depth * 12);
        kern_buffer_release(b);
    }
done:
    free(out);
    env_close(&e);
    return ok;
}

int cuda_case_bad_ptx(char *msg, size_t len) {
    cuda_env e;
    int ok = env_open(&e, msg, len);
    if (ok != 1)
        return ok;
    /* the entry point kern's check requires (rt_ptx_check), with an instruction only the
     * driver's compiler refuses */
    static const char meta[] = "kern-meta 1\nkernel saxpy 1 1 3 1\n"
                               "param a f32 0\nparam x f32[] 0\nparam y f32[] 0\n"
                               "task parallel 1 2 5\nend\n";
    static const char bad[] =
        ".version 7.0\n.target sm_70\n.address_size 64\n"
        ".visible .entry kern_saxpy__t0(.param .f32 p_a, .param .u64 p_x, .param .u64 p_x0,\n"
        "    .param .u64 p_y, .param .u64 p_y0, .param .u64 p_err, .param .u64 p_heap,\n"
        "    .param .u64 p_slots)\n{\nfrobnicate.u32 %r0;\n}\n";
    char path[64];
    if (!write_module(path, sizeof path, "cuda", meta, sizeof meta - 1, bad, sizeof bad - 1))
        FAIL("cannot write a module file");
    kern_module *m = NULL;
    kern_status s = kern_module_load_file(e.ctx, path, &m);
    unlink(path);
    const char *got = kern_context_last_error(e.ctx);
    if (s != KERN_ERR_FORMAT ||
        !strstr(got, "loading the module's PTX (cuModuleLoadDataEx) "
                     "failed: ") ||
        !strstr(got, "frobnicate"))
        FAIL("bad PTX: %s '%s'", kern_status_name(s), got);
    snprintf(msg, len, "%s", got);
done:
    env_close(&e);
    return ok;
}

int cuda_case_missing_symbol(char *msg, size_t len) {
    cuda_env e;
    int ok = env_open(&e, msg, len);
    if (ok != 1)
        return ok;
    static const char meta[] = "kern-meta 1\nkernel saxpy 1 1 3 2\n"
                               "param a f32 0\nparam x f32[] 0\nparam y f32[] 0\n"
                               "task parallel 1 2 5\ntask serial 0 3 5\nend\n";
    char path[64];
    if (!write_module(path, sizeof path, "cuda", meta, sizeof meta - 1, cases_ptx,
                      sizeof cases_ptx - 1))
        FAIL("cannot write a module file");
    kern_module *m = NULL;
    kern_status s = kern_module_load_file(e.ctx, path, &m);
    unlink(path);
    char want[256];
    snprintf(want, sizeof want,
             "'%s': kernel 'saxpy', task 1: no .entry 'kern_saxpy__t1' in the PTX", path);
    if (s != KERN_ERR_FORMAT || strcmp(kern_context_last_error(e.ctx), want) != 0)
        FAIL("missing symbol: %s '%s'", kern_status_name(s), kern_context_last_error(e.ctx));
done:
    env_close(&e);
    return ok;
}

const char *cuda_cases_ptx(size_t *len) {
    *len = sizeof cases_ptx - 1;
    return cases_ptx;
}

const cuda_case cuda_cases[] = {
    {"saxpy", cuda_case_saxpy},
    {"task_order", cuda_case_task_order},
    {"error_record", cuda_case_error_record},
    {"adstack_slot_major", cuda_case_adstack_slot_major},
    {"bad_ptx", cuda_case_bad_ptx},
    {"missing_symbol", cuda_case_missing_symbol},
};
const int cuda_ncases = (int)(sizeof cuda_cases / sizeof cuda_cases[0]);
