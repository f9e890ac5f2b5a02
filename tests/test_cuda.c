/* test_cuda.c - the CUDA device (suite `cuda`). Without a GPU: the driver library that
 * cannot be opened or lacks entry points (clear KERN_ERR_UNSUPPORTED messages), the
 * kernel parameters of docs/gpu-abi.md packed against a byte layout worked out by hand,
 * the grid of a task, the module-file container (good files, 18 malformed ones with their
 * messages, every truncation and byte substitution, each caught by the checksum), and
 * module files loaded into a CPU context (refused with the right message). With a GPU (skipped with a message where
 * cuInit finds none): the end-to-end cases of tests/cuda_cases.c. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/modfile.h"
#include "../include/kern.h"
#include "../runtime/gpu.h"
#include "../runtime/rt.h"
#include "cuda_cases.h"

/* ---- the driver library ------------------------------------------------------------- */

Test(cuda, driver_that_cannot_be_opened) {
    rt_device *d = (rt_device *)1;
    char err[512];
    kern_status s =
        rt_cuda_device_create("libkern-no-such-cuda-driver.so.1", 0, &d, err, sizeof err);
    cr_assert_eq(s, KERN_ERR_UNSUPPORTED);
    cr_assert_null(d);
    const char *want = "CUDA driver not found: dlopen(libkern-no-such-cuda-driver.so.1): ";
    cr_assert(strncmp(err, want, strlen(want)) == 0, "%s", err);
    cr_assert(strstr(err, "cannot open shared object file"), "%s", err);
}

Test(cuda, driver_without_the_entry_points) {
    rt_device *d = (rt_device *)1;
    char err[512];
    cr_assert_eq(rt_cuda_device_create("libm.so.6", 0, &d, err, sizeof err), KERN_ERR_UNSUPPORTED);
    cr_assert_null(d);
    cr_assert_str_eq(err, "the CUDA driver libm.so.6 lacks cuInit (too old a driver?)");
}

/* The CUDA toolkit's stub driver (present where the toolkit is installed) exports every
 * entry point with its real name, and its cuInit fails: the names the device loads all
 * exist, and the failure is a clear error. */
Test(cuda, stub_driver_has_every_entry_point_and_fails_cuinit) {
    const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
    if (access(stub, R_OK) != 0)
        cr_skip_test("no CUDA toolkit stub driver at %s", stub);
    rt_device *d = (rt_device *)1;
    char err[512];
    cr_assert_eq(rt_cuda_device_create(stub, 0, &d, err, sizeof err), KERN_ERR_UNSUPPORTED);
    cr_assert_null(d);
    cr_assert(strncmp(err, "CUDA driver: cuInit failed: ", 28) == 0, "%s", err);
}

Test(cuda, context_without_a_device_is_a_clear_error) {
    kern_context_options o = kern_context_options_default();
    o.backend = KERN_BACKEND_CUDA;
    kern_context *ctx = NULL;
    kern_status s = kern_context_create(&o, &ctx);
    cr_assert_not_null(ctx);
    if (s == KERN_OK) { /* a machine with a GPU */
        cr_assert(strncmp(kern_context_device_name(ctx), "cuda: ", 6) == 0);
        cr_assert_eq(kern_context_threads(ctx), 1);
        kern_context_release(ctx);
        return;
    }
    cr_assert_eq(s, KERN_ERR_UNSUPPORTED, "%s", kern_context_last_error(ctx));
    const char *msg = kern_context_last_error(ctx);
    cr_assert(strncmp(msg,
                      "cannot create the cuda device: CUDA driver not found: "
                      "dlopen(libcuda.so.1): ",
                      76) == 0 ||
                  strncmp(msg, "cannot create the cuda device: CUDA driver: cuInit failed: ", 59) ==
                      0,
              "%s", msg);
    cr_assert_str_eq(kern_context_device_name(ctx), "");
    int64_t n = 4;
    kern_buffer *b = NULL;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, NULL, &b), KERN_ERR_ARGUMENT);
    kern_context_release(ctx);
}

/* ---- kernel parameters -------------------------------------------------------------- */

static kern_meta *parse_ok(const char *text) {
    char err[512];
    kern_meta *m = kern_meta_parse(text, strlen(text), err, sizeof err);
    cr_assert(m, "%s", err);
    return m;
}

#define AT(p, i, T) (*(const T *)((p).buf + (p).offsets[i]))

Test(cuda, params_packed_as_the_abi_says) {
    kern_meta *m = parse_ok("kern-meta 1\nkernel k.grad 1 1 7 1\n"
                            "param flag bool 0\nparam x f32[,] 0\nparam n i32 0\n"
                            "param s f64 0\nparam y i64[] 0\nparam u u32 0\nparam a f32 0\n"
                            "task parallel 1 2 5\n"
                            "adstack f64 3 5 (param 2)\nadstack i32 4 5 7\nend\n");
    const kern_meta_kernel *k = &m->kernels[0];
    rt_launch_arg la[7] = {0};
    la[0].scalar.b = 1;
    la[1].is_array = true;
    la[1].mem = (void *)(uintptr_t)0x7f0000001000ull;
    la[1].shape[0] = 3, la[1].shape[1] = 4, la[1].shape[2] = 1, la[1].shape[3] = 1;
    la[2].scalar.i32 = -5;
    la[3].scalar.f64 = 2.25;
    la[4].is_array = true;
    la[4].mem = (void *)(uintptr_t)0x7f0000002000ull;
    la[4].shape[0] = 9, la[4].shape[1] = la[4].shape[2] = la[4].shape[3] = 1;
    la[5].scalar.u32 = 0xdeadbeefu;
    la[6].scalar.f32 = -0.5f;
    int64_t layout[4] = {0, 12, 512, 7};
    rt_gpu_params p;
    char err[256];
    cr_assert_eq(rt_gpu_pack_params(k, la, 0xa000, 0xb000, 1024, layout, &p, err, sizeof err),
                 KERN_OK, "%s", err);
    /* by hand: flag i8 @0; x ptr @8, 3 @16, 4 @24; n i32 @32; s f64 @40; y ptr @48, 9 @56;
     * u u32 @64; a f32 @68; err @72; heap @80; slots @88; 0 @96, 12 @104, 512 @112,
     * 7 @120: 17 parameters in 128 bytes */
    static const size_t off[17] = {0,  8,  16, 24, 32, 40,  48,  56, 64,
                                   68, 72, 80, 88, 96, 104, 112, 120};
    static const size_t size[17] = {1, 8, 8, 8, 4, 8, 8, 8, 4, 4, 8, 8, 8, 8, 8, 8, 8};
    cr_assert_eq(p.n, 17);
    cr_assert_eq(p.len, 128);
    for (int i = 0; i < 17; i++) {
        cr_assert_eq(p.offsets[i], off[i], "parameter %d at %zu, expected %zu", i, p.offsets[i],
                     off[i]);
        cr_assert_eq(p.sizes[i], size[i], "parameter %d", i);
        cr_assert_eq(p.ptrs[i], (void *)(p.buf + off[i]));
    }
    cr_assert_eq(AT(p, 0, uint8_t), 1);
    cr_assert_eq(AT(p, 1, uint64_t), 0x7f0000001000ull);
    cr_assert_eq(AT(p, 2, int64_t), 3);
    cr_assert_eq(AT(p, 3, int64_t), 4);
    cr_assert_eq(AT(p, 4, int32_t), -5);
    cr_assert_eq(AT(p, 5, double), 2.25);
    cr_assert_eq(AT(p, 6, uint64_t), 0x7f0000002000ull);
    cr_assert_eq(AT(p, 7, int64_t), 9);
    cr_assert_eq(AT(p, 8, uint32_t), 0xdeadbeefu);
    cr_assert_eq(AT(p, 9, float), -0.5f);
    cr_assert_eq(AT(p, 10, uint64_t), 0xa000);
    cr_assert_eq(AT(p, 11, uint64_t), 0xb000);
    cr_assert_eq(AT(p, 12, int64_t), 1024);
    cr_assert_eq(AT(p, 13, int64_t), 0);
    cr_assert_eq(AT(p, 14, int64_t), 12);
    cr_assert_eq(AT(p, 15, int64_t), 512);
    cr_assert_eq(AT(p, 16, int64_t), 7);
    /* the padding between parameters is zero */
    for (size_t b = 1; b < 8; b++)
        cr_assert_eq(p.buf[b], 0);
    rt_gpu_params_free(&p);
    kern_meta_free(m);

    /* no adstacks: the parameters, err, a null heap and 0 slots */
    m = parse_ok("kern-meta 1\nkernel saxpy 1 1 3 1\nparam a f32 0\nparam x f32[] 0\n"
                 "param y f32[] 0\ntask parallel 1 2 5\nend\n");
    rt_launch_arg sa[3] = {0};
    sa[0].scalar.f32 = 2.0f;
    sa[1].is_array = sa[2].is_array = true;
    sa[1].mem = (void *)(uintptr_t)0x1000, sa[1].shape[0] = 5;
    sa[2].mem = (void *)(uintptr_t)0x2000, sa[2].shape[0] = 5;
    cr_assert_eq(rt_gpu_pack_params(&m->kernels[0], sa, 0xe000, 0, 0, NULL, &p, err, sizeof err),
                 KERN_OK);
    /* a f32 @0; x @8, 5 @16; y @24, 5 @32; err @40; heap 0 @48; slots 0 @56 */
    static const size_t off2[8] = {0, 8, 16, 24, 32, 40, 48, 56};
    cr_assert_eq(p.n, 8);
    cr_assert_eq(p.len, 64);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(p.offsets[i], off2[i]);
    cr_assert_eq(AT(p, 0, float), 2.0f);
    cr_assert_eq(AT(p, 3, uint64_t), 0x2000);
    cr_assert_eq(AT(p, 5, uint64_t), 0xe000);
    cr_assert_eq(AT(p, 6, uint64_t), 0);
    cr_assert_eq(AT(p, 7, int64_t), 0);
    rt_gpu_params_free(&p);
    kern_meta_free(m);
}

Test(cuda, grid_of_a_task) {
    unsigned b, t;
    /* H100: 132 SMs x 2048 threads / 256 = 1056 resident blocks */
    rt_gpu_grid(false, false, 5000, 1056, 0, &b, &t);
    cr_assert(b == 1 && t == 1, "serial: one thread");
    rt_gpu_grid(true, false, 0, 1056, 0, &b, &t);
    cr_assert_eq(b, 0, "no items: nothing to launch");
    rt_gpu_grid(true, false, 1, 1056, 0, &b, &t);
    cr_assert(b == 1 && t == 256);
    rt_gpu_grid(true, false, 1000, 1056, 0, &b, &t);
    cr_assert(b == 4 && t == 256, "ceil(1000 / 256) = 4");
    rt_gpu_grid(true, false, 1024, 1056, 0, &b, &t);
    cr_assert_eq(b, 4);
    rt_gpu_grid(true, false, 100000000, 1056, 0, &b, &t);
    cr_assert_eq(b, 1056, "at most the resident grid: threads stride over the rest");
    rt_gpu_grid(true, false, -1, 1056, 0, &b, &t);
    cr_assert_eq(b, 1056, "an unknown count: the resident grid");
    /* with adstacks, never more threads than slots */
    rt_gpu_grid(true, false, -1, 1056, 1024, &b, &t);
    cr_assert(b == 4 && t == 256);
    rt_gpu_grid(true, false, 100, 1056, 100, &b, &t);
    cr_assert(b == 1 && t == 100);
    rt_gpu_grid(true, false, 5000, 1056, 270336, &b, &t);
    cr_assert_eq(b, 20);
    /* spread: a thread per item where the count is known and there is no adstack limit */
    rt_gpu_grid(true, true, 100000000, 1056, 0, &b, &t);
    cr_assert(b == 390625 && t == 256, "ceil(1e8 / 256) blocks, not the resident 1056: %u", b);
    rt_gpu_grid(true, true, 1000, 1056, 0, &b, &t);
    cr_assert_eq(b, 4);
    rt_gpu_grid(true, true, -1, 1056, 0, &b, &t);
    cr_assert_eq(b, 1056, "spread with an unknown count: the resident grid");
    rt_gpu_grid(true, true, 100000000, 1056, 270336, &b, &t);
    cr_assert_eq(b, 1056, "spread but with adstack slots: never more threads than slots");
    rt_gpu_grid(true, true, (int64_t)1 << 50, 1056, 0, &b, &t);
    cr_assert_eq(b, INT32_MAX, "gridDim.x stays below 2^31");
}

/* ---- module files -------------------------------------------------------------------- */

static const char good_meta[] = "kern-meta 1\nkernel k 1 1 1 1\nparam x f32[] 0\n"
                                "task parallel 1 2 5\nextent 0 (dim 0 0)\nend\n";

/* The container's checksum as docs/gpu-abi.md defines it, written out here byte by byte
 * as the reference kern_modfile_sum must match: 8-byte little-endian words, the last
 * partial one zero-padded, then the length, each through h = (h ^ w) * P; h ^= h >> 32. */
static uint64_t sum_ref(const void *data, size_t n) {
    const unsigned char *p = data;
    uint64_t h = 14695981039346656037ull;
    size_t nw = n / 8 + 2; /* the full words, the partial one (maybe empty), the length */
    for (size_t k = 0; k < nw; k++) {
        uint64_t w = 0;
        if (k == nw - 1)
            w = n;
        else
            for (size_t b = 0; b < 8 && 8 * k + b < n; b++)
                w += (uint64_t)p[8 * k + b] * ((uint64_t)1 << (8 * b));
        h = (h ^ w) * 1099511628211ull;
        h ^= h >> 32;
    }
    return h;
}

/* n bytes of text followed by their checksum line, in buf (size bytes; nothing is written
 * past the line); returns the file's length. */
static size_t seal(char *buf, size_t size, const char *text, size_t n) {
    cr_assert_leq(n + KERN_MODFILE_SUM_LEN, size);
    char sum[KERN_MODFILE_SUM_LEN + 1];
    memmove(buf, text, n);
    snprintf(sum, sizeof sum, "sum %016llx\n", (unsigned long long)sum_ref(buf, n));
    memcpy(buf + n, sum, KERN_MODFILE_SUM_LEN);
    return n + KERN_MODFILE_SUM_LEN;
}

static size_t make_file(char *buf, size_t size, const char *target, const char *code) {
    size_t n;
    char *f = kern_modfile_build(target, good_meta, strlen(good_meta), code, strlen(code), &n);
    cr_assert(f && n <= size);
    memcpy(buf, f, n);
    free(f);
    return n;
}

Test(cuda, module_file_parses) {
    char f[1024], want[1024];
    size_t n = make_file(f, sizeof f, "cuda", ".version 7.0\n// no NUL\n");
    int wn = snprintf(want, sizeof want,
                      "kern-module 2 cuda\nmeta %zu\n%s\ncode 23\n.version "
                      "7.0\n// no NUL\n\n",
                      strlen(good_meta), good_meta);
    cr_assert_eq(n, seal(want, sizeof want, want, (size_t)wn), "the writer's framing");
    cr_assert(!memcmp(f, want, n), "%.*s", (int)n, f);
    rt_modfile mf;
    char err[256];
    cr_assert(rt_modfile_is(f, n));
    cr_assert(rt_modfile_parse(f, n, &mf, err, sizeof err), "%s", err);
    cr_assert_str_eq(mf.target, "cuda");
    cr_assert_eq(mf.meta_len, strlen(good_meta));
    cr_assert(memcmp(mf.meta, good_meta, mf.meta_len) == 0);
    cr_assert_eq(mf.code_len, strlen(".version 7.0\n// no NUL\n"));
    cr_assert(memcmp(mf.code, ".version 7.0\n// no NUL\n", mf.code_len) == 0);
    /* binary code with newlines and NULs, an empty section */
    char *bin = kern_modfile_build("amdgpu", "", 0, "\x7f\n\0\n\0", 5, &n);
    cr_assert(bin);
    cr_assert(rt_modfile_parse(bin, n, &mf, err, sizeof err), "%s", err);
    cr_assert_str_eq(mf.target, "amdgpu");
    cr_assert_eq(mf.meta_len, 0);
    cr_assert_eq(mf.code_len, 5);
    cr_assert(memcmp(mf.code, "\x7f\n\0\n\0", 5) == 0);
    free(bin);
    cr_assert(!rt_modfile_is("\x7f"
                             "ELF",
                             4));
    cr_assert(!rt_modfile_is("kern-mod", 8));
}

Test(cuda, module_file_malformed) {
    static const struct {
        const char *text;
        bool sealed; /* followed by its checksum line */
        const char *msg;
    } bad[] = {
        {"kern-modulo 2 cuda\n", false,
         "not a kern module file (it does not start with 'kern-module ')"},
        {"kern-module 2 cuda", false, "the first line does not end"},
        {"kern-module 1 cuda\nmeta 0\n\ncode 0\n\n", false,
         "module file version 1 has no checksum; rebuild the module with this kernc (kernc "
         "build), which writes version 2"},
        {"kern-module 3 cuda\nmeta 0\n\ncode 0\n\n", true,
         "unsupported module file version '3' (this runtime reads 2)"},
        {"kern-module 12 cuda\n", false,
         "unsupported module file version '12' (this runtime reads 2)"},
        {"kern-module 2\n", false, "the first line is not 'kern-module VERSION TARGET'"},
        {"kern-module 2 \n", false, "bad target ''"},
        {"kern-module 2 CUDA\nmeta 0\n\ncode 0\n\n", true, "bad target 'CUDA'"},
        {"kern-module 2 cuda\nmeta 0\n\n", false, "the file ends after its first line (truncated)"},
        {"kern-module 2 cuda\nmeta 0\n\ncode 0\n\nsum 0123456789abcdeF\n", false,
         "the file does not end with its checksum line 'sum HEX' (truncated, or damaged)"},
        {"kern-module 2 cuda\nmeta 0\n\ncode 0\n\nsum 0123456789abcdef\n", false,
         "checksum mismatch: the file says 0123456789abcdef, its bytes hash to "
         "SUM (the file is damaged; rebuild it with kernc build)"},
        {"kern-module 2 cuda\ncode 0\n\n", true, "expected 'meta LEN' at byte 19"},
        {"kern-module 2 cuda\nmeta x\n", true,
         "the meta length at byte 24 is not a decimal number and a newline"},
        {"kern-module 2 cuda\nmeta 3 \nabc\n", true,
         "the meta length at byte 24 is not a decimal number and a newline"},
        {"kern-module 2 cuda\nmeta 30\nabc\n", true,
         "the meta section says 30 bytes and a newline, but the file has 4 bytes left"},
        {"kern-module 2 cuda\nmeta 3\nabcd\n", true,
         "the meta section of 3 bytes is not followed by a newline"},
        {"kern-module 2 cuda\nmeta 1\na\ncode 99999999999999999999\n", true,
         "the code length at byte 52 is too long"},
        {"kern-module 2 cuda\nmeta 1\na\ncode 2\nxy\nextra", true,
         "5 bytes between the code section and the checksum"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rt_modfile mf;
        char err[256] = "", f[256];
        size_t n = strlen(bad[i].text);
        if (bad[i].sealed)
            n = seal(f, sizeof f, bad[i].text, n);
        else
            memcpy(f, bad[i].text, n);
        cr_assert(!rt_modfile_parse(f, n, &mf, err, sizeof err), "case %zu parsed", i);
        char want[256];
        const char *at = strstr(bad[i].msg, "SUM"); /* the sum of the bytes before the line */
        if (at)
            snprintf(want, sizeof want, "%.*s%016llx%s", (int)(at - bad[i].msg), bad[i].msg,
                     (unsigned long long)sum_ref(f, n - KERN_MODFILE_SUM_LEN), at + 3);
        else
            snprintf(want, sizeof want, "%s", bad[i].msg);
        cr_assert_str_eq(err, want, "case %zu", i);
    }
}

/* Every truncation and every changed byte is refused (the checksum tells any one changed byte);
 * with the checksum made right again, what parses stays inside the file. */
Test(cuda, module_file_mutations_never_crash) {
    char f[1024];
    size_t n = make_file(f, sizeof f, "cuda", ".version 7.0\n");
    rt_modfile mf;
    char err[256];
    for (size_t cut = 0; cut < n; cut++) {
        /* a copy of exactly `cut` bytes, so ASan sees any read past it */
        char *p = malloc(cut ? cut : 1);
        memcpy(p, f, cut);
        cr_assert(!rt_modfile_parse(p, cut, &mf, err, sizeof err), "prefix %zu parsed", cut);
        free(p);
    }
    static const char subst[] = {'\0', '\n', ' ', '9', 'x', '\xff'};
    for (size_t i = 0; i < n; i++) {
        for (size_t s = 0; s < sizeof subst; s++) {
            char *p = malloc(n);
            memcpy(p, f, n);
            p[i] = subst[s];
            if (p[i] != f[i])
                cr_assert(!rt_modfile_parse(p, n, &mf, err, sizeof err),
                          "byte %zu changed to 0x%02x parsed", i, (unsigned char)subst[s]);
            if (i < n - KERN_MODFILE_SUM_LEN)
                seal(p, n, p, n - KERN_MODFILE_SUM_LEN);
            if (rt_modfile_parse(p, n, &mf, err, sizeof err)) {
                cr_assert_leq(mf.meta_len + mf.code_len, n);
                cr_assert_geq(mf.meta, p);
                cr_assert_leq(mf.meta + mf.meta_len, p + n);
                cr_assert_leq((const char *)mf.code + mf.code_len, p + n);
            }
            free(p);
        }
    }
}

static void write_file(const char *path, const char *data, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

Test(cuda, module_files_in_a_cpu_context) {
    kern_context *ctx = NULL;
    kern_context_options o = kern_context_options_default();
    o.threads = 1;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK);
    char path[] = "/tmp/kern-modfile-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    char f[1024], want[512];
    kern_module *m = (kern_module *)1;
    /* PTX: the CPU refuses it, naming both */
    size_t n = make_file(f, sizeof f, "cuda", ".version 7.0\n");
    write_file(path, f, n);
    cr_assert_eq(kern_module_load_file(ctx, path, &m), KERN_ERR_UNSUPPORTED);
    cr_assert_null(m);
    snprintf(want, sizeof want, "'%s': the module holds PTX for cuda; the context's device is cpu",
             path);
    cr_assert_str_eq(kern_context_last_error(ctx), want);
    n = make_file(f, sizeof f, "amdgpu",
                  "\x7f"
                  "ELF");
    write_file(path, f, n);
    cr_assert_eq(kern_module_load_file(ctx, path, &m), KERN_ERR_UNSUPPORTED);
    snprintf(want, sizeof want,
             "'%s': the module holds an HSACO code object for amdgpu; the context's device is "
             "cpu",
             path);
    cr_assert_str_eq(kern_context_last_error(ctx), want);
    /* an unknown target, a broken container, broken metadata */
    n = make_file(f, sizeof f, "metal", "x");
    write_file(path, f, n);
    cr_assert_eq(kern_module_load_file(ctx, path, &m), KERN_ERR_FORMAT);
    snprintf(want, sizeof want,
             "'%s': a module for target 'metal', which this runtime does not know (cuda, amdgpu, "
             "vulkan)",
             path);
    cr_assert_str_eq(kern_context_last_error(ctx), want);
    write_file(path, f, n - 1);
    cr_assert_eq(kern_module_load_file(ctx, path, &m), KERN_ERR_FORMAT);
    snprintf(want, sizeof want,
             "'%s': corrupt module file: the file does not end with its checksum line 'sum HEX' "
             "(truncated, or damaged)",
             path);
    cr_assert_str_eq(kern_context_last_error(ctx), want);
    static const char badmeta[] = "kern-module 2 cuda\nmeta 12\nkern-meta 2\n\ncode 1\nx\n";
    n = seal(f, sizeof f, badmeta, sizeof badmeta - 1);
    write_file(path, f, n);
    cr_assert_eq(kern_module_load_file(ctx, path, &m), KERN_ERR_FORMAT);
    snprintf(want, sizeof want,
             "'%s': corrupt module metadata: metadata line 1: unsupported metadata version '2' "
             "(this runtime reads version 1)",
             path);
    cr_assert_str_eq(kern_context_last_error(ctx), want);
    unlink(path);
    kern_context_release(ctx);
}

/* ---- on a GPU ------------------------------------------------------------------------ */

/* The hand-written PTX of the GPU cases assembles for the H100 (where ptxas is). */
Test(cuda, cases_ptx_assembles) {
    const char *ptxas = "/usr/local/cuda/bin/ptxas";
    if (access(ptxas, X_OK) != 0)
        cr_skip_test("no ptxas at %s", ptxas);
    char path[] = "/tmp/kern-cases-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    size_t n;
    const char *ptx = cuda_cases_ptx(&n);
    write_file(path, ptx, n);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s -arch=sm_90 %s -o /dev/null 2>&1", ptxas, path);
    int rc = system(cmd);
    unlink(path);
    cr_assert_eq(rc, 0, "ptxas rejected the cases' PTX");
}

static void run_case(cuda_case_fn fn) {
    char msg[4096] = "";
    int r = fn(msg, sizeof msg);
    if (r < 0)
        cr_skip_test("%s", msg);
    cr_assert_eq(r, 1, "%s", msg);
}

Test(cuda, gpu_saxpy) { run_case(cuda_case_saxpy); }
Test(cuda, gpu_task_order) { run_case(cuda_case_task_order); }
Test(cuda, gpu_error_record) { run_case(cuda_case_error_record); }
Test(cuda, gpu_adstack_slot_major) { run_case(cuda_case_adstack_slot_major); }
Test(cuda, gpu_bad_ptx) { run_case(cuda_case_bad_ptx); }
Test(cuda, gpu_missing_symbol) { run_case(cuda_case_missing_symbol); }
