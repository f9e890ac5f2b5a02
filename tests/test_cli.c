/* test_cli.c - the kernc command line: exit statuses, options, outputs (docs/cli.md),
 * reverse mode's tools included (emit --emit=ir-grad, run K.grad, gradcheck).
 * Runs the built kernc binary (KERNC_PATH) through the shell. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../backends/codegen.h"
#include "../common/suggest.h"
#include "../common/util.h"
#include "../compiler/driver.h"
#include "../include/kern.h"
#include "../runtime/npy.h"

#ifndef KERNC_PATH
#define KERNC_PATH "kernc"
#endif

typedef struct run_result {
    int status;
    char *out; /* stdout and stderr, together */
} run_result;

static run_result run(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s 2>&1", KERN_SOURCE_ROOT, KERNC_PATH, args);
    FILE *p = popen(cmd, "r");
    cr_assert(p, "popen failed");
    kern_buf b = {0};
    char tmp[4096];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, p)) > 0)
        buf_putn(&b, tmp, n);
    int st = pclose(p);
    run_result r = {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), buf_take(&b)};
    return r;
}

static void expect(const char *args, int status, const char *needle) {
    run_result r = run(args);
    cr_expect_eq(r.status, status, "kernc %s: status %d, expected %d; output:\n%s", args, r.status,
                 status, r.out);
    if (needle)
        cr_expect(strstr(r.out, needle) != NULL, "kernc %s: output lacks '%s':\n%s", args, needle,
                  r.out);
    free(r.out);
}

Test(cli, version_and_help) {
    expect("--version", 0, "kernc 0.");
    expect("--help", 0, "usage: kernc");
    expect("check --help", 0, "usage: kernc");
    expect("", 2, "usage: kernc");
}

/* The Vulkan target's outputs: SPIR-V that validates (binary, never to a terminal: a pipe
 * is fine), its text form, Metal source, and a module file. */
Test(cli, vulkan_outputs) {
    expect("emit examples/simulate.kern --emit=spirv-asm", 0,
           "\"kern_simulate__t0\" %gl_GlobalInvocationID");
    expect("emit examples/simulate.kern --emit=msl", 0, "kernel void kern_simulate_t0(");
    char dir[] = "/tmp/kern-cli-vk-XXXXXX";
    cr_assert(mkdtemp(dir));
    char args[4400], path[200];
    snprintf(path, sizeof path, "%s/s.spv", dir);
    snprintf(args, sizeof args, "emit examples/simulate.kern --emit=spirv -o '%s'", path);
    expect(args, 0, NULL);
    size_t len;
    char *spv = kern_read_file(path, &len);
    cr_assert(spv && len > 20 && len % 4 == 0, "%s: %zu bytes", path, len);
    cr_expect_eq(*(uint32_t *)spv, 0x07230203u, "the SPIR-V magic number");
    free(spv);
    remove(path);
    snprintf(path, sizeof path, "%s/s.vkmod", dir);
    snprintf(args, sizeof args, "build examples/simulate.kern --target=vulkan -o '%s'", path);
    expect(args, 0, NULL);
    char *mod = kern_read_file(path, &len);
    cr_assert(mod && !strncmp(mod, "kern-module 2 vulkan\n", 21), "%s", path);
    cr_expect(strstr(mod, "kernel simulate.grad"), "the module has the gradient");
    free(mod);
    remove(path);
    rmdir(dir);
}

/* kernc run and gradcheck on the Vulkan device, where there is one (lavapipe in CI). */
Test(cli, run_and_gradcheck_on_vulkan) {
    /* lavapipe keeps one-time allocations that it drops when the loader unloads it at exit:
     * under LeakSanitizer (CI) the kernc processes would report them, so leak checking is
     * off for these two children (the test binary's own Vulkan tests keep it on: see
     * test_spirv.c's keep_vulkan_driver_mapped) */
    const char *old = getenv("ASAN_OPTIONS");
    char *saved = old ? strdup(old) : NULL;
    char opts[1024];
    snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", old ? old : "", old && *old ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    run_result probe =
        run("run examples/saxpy.kern saxpy --target=vulkan a=1 x=examples/data/x0.npy "
            "y=examples/data/x0.npy");
    if (probe.status != 0 && strstr(probe.out, "cannot create the vulkan device")) {
        free(probe.out);
        cr_skip_test("no Vulkan device here");
    }
    cr_expect_eq(probe.status, 0, "%s", probe.out);
    free(probe.out);
    expect("gradcheck examples/simulate.kern simulate --target=vulkan x0=examples/data/x0.npy "
           "w=examples/data/w.npy out=examples/data/out.npy steps=16",
           0, ": ok");
    /* --device N: Vulkan device 0 by number; one beyond the loader's devices named */
    expect("gradcheck examples/simulate.kern simulate --target=vulkan --device 0 "
           "x0=examples/data/x0.npy w=examples/data/w.npy out=examples/data/out.npy steps=16",
           0, ": ok");
    expect("run examples/saxpy.kern saxpy --target=vulkan --device 0 a=2 x=examples/data/x0.npy "
           "y=examples/data/x0.npy",
           0, "y: f32[8] = -3 ");
    expect("run examples/saxpy.kern saxpy --target=vulkan --device 99 a=1 x=examples/data/x0.npy "
           "y=examples/data/x0.npy",
           1, "cannot create the vulkan device: there is no device 99: the loader sees ");
    if (saved)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

/* Symbols are built from kernel names (runtime/abi.h: '.' written "__"): a kernel named like
 * a derived gradient is an error, and names are bounded so symbols never truncate. */
Test(cli, kernel_names_cannot_collide) {
    char dir[] = "/tmp/kern-cli-names-XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[256], args[1024];
    snprintf(path, sizeof path, "%s/a.kern", dir);
    write_text(path, "kernel a(x: f32[]) { for i in 0..len(x) { x[i] = 1.0; } }\n"
                     "kernel a__grad(x: f32[]) { for i in 0..len(x) { x[i] = 2.0; } }\n");
    snprintf(args, sizeof args, "check '%s'", path);
    expect(args, 1,
           "kernel 'a__grad' would have the symbols of 'a.grad', derived from kernel 'a' "
           "(line 1); rename it");
    write_text(path, "kernel a(x: f32[]) { for i in 0..len(x) { x[i] = 1.0; } }\n"
                     "kernel a__grad__jvp(x: f32[]) { for i in 0..len(x) { x[i] = 2.0; } }\n");
    expect(args, 1,
           "kernel 'a__grad__jvp' would have the symbols of 'a.grad.jvp', derived from kernel "
           "'a' (line 1); rename it");
    write_text(path, "kernel a(x: f32[]) { for i in 0..len(x) { x[i] = 1.0; } }\n"
                     "kernel a__jvp(x: f32[]) { for i in 0..len(x) { x[i] = 2.0; } }\n");
    expect(args, 1,
           "kernel 'a__jvp' would have the symbols of 'a.jvp', derived from kernel 'a' (line 1); "
           "rename it");
    write_text(path, "kernel a(x: f32[]) { for i in 0..len(x) { x[i] = 1.0; } }\n"
                     "kernel a__grad(x: f32[]) { for i in 0..len(x) { x[i] = 2.0; } }\n");
    /* without a kernel `a`, the name is free */
    write_text(path, "kernel a__grad(x: f32[]) { for i in 0..len(x) { x[i] = 2.0; } }\n");
    expect(args, 0, NULL);
    /* the longest name works end to end (with its gradient); one more character is an error */
    kern_buf src = {0};
    buf_puts(&src, "kernel ");
    for (int i = 0; i < KERN_MAX_NAME; i++)
        buf_putc(&src, (char)('a' + i % 26));
    buf_puts(&src, "(x: f32[], y: f32[]) { for i in 0..len(x) { y[i] = 3.0 * x[i]; } }\n");
    write_text(path, src.data);
    char so[256];
    snprintf(so, sizeof so, "%s/a.so", dir);
    snprintf(args, sizeof args, "build '%s' --target=cpu -o '%s'", path, so);
    expect(args, 0, NULL);
    kern_context *ctx;
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    kern_module *m;
    cr_assert_eq(kern_module_load_file(ctx, so, &m), KERN_OK, "%s", kern_context_last_error(ctx));
    char name[KERN_MAX_NAME + 16];
    memcpy(name, src.data + 7, KERN_MAX_NAME);
    name[KERN_MAX_NAME] = '\0';
    kern_kernel *k, *g;
    cr_assert_eq(kern_kernel_find(m, name, &k), KERN_OK, "%s", kern_context_last_error(ctx));
    strcat(name, ".grad");
    cr_assert_eq(kern_kernel_find(m, name, &g), KERN_OK, "%s", kern_context_last_error(ctx));
    strcat(name, ".jvp"); /* the longest derived name */
    cr_assert_eq(kern_kernel_find(m, name, &g), KERN_OK, "%s", kern_context_last_error(ctx));
    float x[3] = {1, 2, 3}, y[3];
    int64_t n = 3;
    kern_buffer *bx, *by;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, x, &bx), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, NULL, &by), KERN_OK);
    kern_arg a[2] = {kern_arg_buffer(bx), kern_arg_buffer(by)};
    cr_assert_eq(kern_launch(k, a, 2), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_buffer_read(by, y, sizeof y), KERN_OK);
    cr_expect(y[0] == 3 && y[1] == 6 && y[2] == 9, "%g %g %g", y[0], y[1], y[2]);
    kern_context_release(ctx);
    buf_free(&src);
    buf_puts(&src, "kernel ");
    for (int i = 0; i <= KERN_MAX_NAME; i++)
        buf_putc(&src, 'b');
    buf_puts(&src, "(x: f32[]) { for i in 0..len(x) { x[i] = 1.0; } }\n");
    write_text(path, src.data);
    buf_free(&src);
    snprintf(args, sizeof args, "check '%s'", path);
    expect(args, 1, "characters long; the longest allowed is 255");
    remove(path);
    remove(so);
    rmdir(dir);
}

/* Integer arguments mean what the language's literals mean: decimal or 0x hex, no octal. */
Test(cli, integer_arguments_are_not_octal) {
    const char *base = "run examples/simulate.kern simulate x0=examples/data/x0.npy "
                       "w=examples/data/w.npy out=examples/data/out.npy ";
    char args[512];
    snprintf(args, sizeof args, "%ssteps=010", base);
    expect(args, 1, "steps=010: not an integer (decimal without leading zeros, or 0x hex)");
    snprintf(args, sizeof args, "%s'steps= 16'", base);
    expect(args, 1, "not an integer");
    /* 16 and 0x10 are one value: the same output line */
    snprintf(args, sizeof args, "%ssteps=16", base);
    run_result a = run(args);
    snprintf(args, sizeof args, "%ssteps=0x10", base);
    run_result b = run(args);
    cr_expect_eq(a.status, 0, "%s", a.out);
    cr_expect_str_eq(a.out, b.out);
    free(a.out);
    free(b.out);
}

/* A parallel for has at most 8 ranges: 9 is a check error (it used to pass check and crash
 * the compiler in emit), 8 compiles and runs: every x[h] gets 2^7 adds. */
Test(cli, parallel_for_range_limit) {
    char dir[] = "/tmp/kern-cli-ranges-XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[256], npy[256], args[1024];
    snprintf(path, sizeof path, "%s/r.kern", dir);
    write_text(path, "kernel k(x: f32[]) {\n  for a in 0..2, b in 0..2, c in 0..2, d in 0..2, "
                     "e in 0..2, f in 0..2, g in 0..2, q in 0..2, h in 0..len(x) { "
                     "atomic_add(x[h], 1.0); }\n}\n");
    snprintf(args, sizeof args, "check '%s'", path);
    expect(args, 1, "a parallel for has at most 8 ranges, this one has 9");
    snprintf(args, sizeof args, "emit '%s' --emit=llvm", path);
    expect(args, 1, "a parallel for has at most 8 ranges");
    write_text(path, "kernel k(x: f32[]) {\n  for a in 0..2, b in 0..2, c in 0..2, d in 0..2, "
                     "e in 0..2, f in 0..2, g in 0..2, h in 0..len(x) { "
                     "atomic_add(x[h], 1.0); }\n}\n");
    snprintf(npy, sizeof npy, "%s/x.npy", dir);
    float zero[5] = {0};
    int64_t n = 5;
    char err[256];
    cr_assert_eq(kern_npy_write(npy, KERN_F32, 1, &n, zero, err, sizeof err), KERN_OK, "%s", err);
    snprintf(args, sizeof args, "run '%s' k x='%s'", path, npy);
    expect(args, 0, "x: f32[5] = 128 128 128 128 128");
    remove(path);
    remove(npy);
    rmdir(dir);
}

Test(cli, usage_errors) {
    expect("frobnicate x.kern", 2, "unknown command 'frobnicate'");
    expect("check", 2, "missing FILE.kern");
    expect("check tests/golden/ir/saxpy.kern --bogus", 2, "unknown option '--bogus'");
    expect("emit tests/golden/ir/saxpy.kern", 2, "--emit=WHAT is required");
    expect("emit tests/golden/ir/saxpy.kern --emit=nonsense", 2, "unknown --emit kind");
    expect("emit tests/golden/ir/saxpy.kern --emit=msl --target=cuda", 2,
           "--emit=msl is not code of target cuda");
    expect("emit tests/golden/ir/saxpy.kern --emit=ptx --arch=sm_9x", 2,
           "'sm_9x' is not an architecture of target cuda");
    expect("emit tests/golden/ir/saxpy.kern --emit=ptx --target=cpu", 2,
           "--emit=ptx is not code of target cpu");
    expect("emit tests/golden/ir/saxpy.kern --emit=llvm --arch=sm_90", 2,
           "target cpu takes no architecture");
    expect("check tests/golden/ir/saxpy.kern --arch=sm_90", 2, "--arch applies to code");
    expect("build tests/golden/ir/saxpy.kern --target=cuda", 2, "-o OUT is required");
    expect("emit tests/golden/ir/saxpy.kern --emit=llvm --target=vulkan", 2,
           "--emit=llvm is not code of target vulkan");
    expect("check tests/golden/ir/saxpy.kern --ad-stack-size=0", 2, "--ad-stack-size");
    expect("check tests/golden/ir/saxpy.kern --ad-stack-size abc", 2, "--ad-stack-size");
    expect("check tests/golden/ir/saxpy.kern --target=gpu", 2, "unknown target 'gpu'");
    expect("check tests/golden/ir/saxpy.kern --emit", 2, "needs a value");
    expect("run tests/golden/ir/saxpy.kern", 2, "missing KERNEL");
    expect("run tests/golden/ir/saxpy.kern saxpy a", 2, "not of the form NAME=VALUE");
    expect("run tests/golden/ir/saxpy.kern saxpy a=1 a=2", 2, "bound twice");
    expect("run tests/golden/ir/saxpy.kern saxpy --target=metal", 2, "not available");
    expect("build tests/golden/ir/saxpy.kern", 2, "-o OUT is required");
    expect("build tests/golden/ir/saxpy.kern --target=cpu", 2, "-o OUT is required");
}

Test(cli, run_errors) {
    expect("run tests/golden/ir/saxpy.kern saxpy", 1,
           "parameter 'a: f32' of kernel 'saxpy' "
           "is not bound");
    expect("run tests/golden/ir/saxpy.kern nope a=1", 1, "no kernel named 'nope'");
    expect("run tests/golden/ir/saxpy.kern saxpy a=x1 x=a.npy y=b.npy", 1, "a=x1: not a number");
    expect("run tests/golden/ir/saxpy.kern saxpy a=1 x=/no/such.npy y=/no/such.npy", 3,
           "x=/no/such.npy");
    expect("run tests/golden/ir/saxpy.kern saxpy a=1 b=2", 1, "no parameter named 'b'");
    expect("run tests/golden/ir/saxpy.kern saxpy a=1 --save a=o.npy", 1,
           "only arrays can be saved");
    /* y[i] is read, then overwritten: saxpy.grad fails the global-access check */
    expect("run tests/golden/ir/saxpy.kern saxpy.grad", 1, "tests/golden/ir/saxpy.kern:4:");
    expect("run tests/golden/ir/types_casts.kern mix a=1", 3, "not bound");
}

Test(cli, io_errors) {
    expect("check no/such/file.kern", 3, "cannot read 'no/such/file.kern'");
    expect("emit tests/golden/ir/saxpy.kern --emit=ir -o /no/such/dir/out.ir", 3, "cannot write");
}

Test(cli, check_ok_and_errors) {
    expect("check tests/golden/ir/simulate.kern", 0, NULL);
    /* options anywhere after the command, in both spellings */
    expect("check -O3 --debug tests/golden/ir/simulate.kern --ad-stack-size 64", 0, NULL);
    char path[] = "/tmp/kern-cli-XXXXXX.kern";
    int fd = mkstemps(path, 5);
    cr_assert(fd >= 0);
    const char *bad = "kernel k(x: f32[]) {\n    for i in 0..len(x) {\n        x[i] = y;\n"
                      "    }\n}\n";
    cr_assert(write(fd, bad, strlen(bad)) == (ssize_t)strlen(bad));
    close(fd);
    char args[512];
    snprintf(args, sizeof args, "check %s", path);
    run_result r = run(args);
    cr_expect_eq(r.status, 1);
    char want[600];
    snprintf(want, sizeof want, "%s:3:16: error:", path);
    cr_expect(strstr(r.out, want) != NULL, "expected a located error, got:\n%s", r.out);
    cr_expect(strstr(r.out, "        x[i] = y;\n") != NULL, "source line missing:\n%s", r.out);
    cr_expect(strstr(r.out, "^\n") != NULL, "caret missing:\n%s", r.out);
    free(r.out);
    snprintf(args, sizeof args, "emit %s --emit=ir", path);
    expect(args, 1, "error:");
    unlink(path);
}

Test(cli, emit_outputs) {
    run_result r = run("emit tests/golden/ir/saxpy.kern --emit=ir");
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "kernel @saxpy(") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "parallel") != NULL, "%s", r.out);
    free(r.out);
    r = run("emit tests/golden/ir/saxpy.kern --emit=llvm");
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "define") != NULL && strstr(r.out, "kern_saxpy__t0") != NULL, "%s",
              r.out);
    free(r.out);
    r = run("emit tests/golden/ir/tasks.kern --emit ast --kernel normalize");
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "normalize") != NULL, "%s", r.out);
    free(r.out);
    expect("emit tests/golden/ir/tasks.kern --emit=ir --kernel nope", 1, "no kernel named 'nope'");
    char path[] = "/tmp/kern-cli-out-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    char args[512];
    snprintf(args, sizeof args, "emit tests/golden/ir/saxpy.kern --emit=ir -O0 -o %s", path);
    r = run(args);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect_eq(r.out[0], 0, "nothing on stdout with -o, got:\n%s", r.out);
    free(r.out);
    size_t len;
    char *text = kern_read_file(path, &len);
    cr_assert(text);
    cr_expect(strstr(text, "kernel @saxpy(") != NULL, "%s", text);
    free(text);
    unlink(path);
}

/* ---- Reverse mode: emit --emit=ir-grad, run K.grad, gradcheck ----------------------- */

/* Writes text to a new temporary file "/tmp/kern-cli-XXXXXX<suffix>"; path must hold 64. */
static void temp_file(char *path, const char *suffix, const char *text) {
    snprintf(path, 64, "/tmp/kern-cli-XXXXXX%s", suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    cr_assert(fd >= 0);
    if (text)
        cr_assert(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
}

static void temp_npy_f32(char *path, const float *v, int64_t n) {
    temp_file(path, ".npy", NULL);
    char err[256];
    int64_t shape[KERN_MAX_DIMS] = {n, 1, 1, 1};
    cr_assert_eq(kern_npy_write(path, KERN_F32, 1, shape, v, err, sizeof err), KERN_OK, "%s", err);
}

static void read_npy_f32(const char *path, float *v, int64_t n) {
    kern_npy a;
    char err[256];
    cr_assert_eq(kern_npy_read(path, &a, err, sizeof err), KERN_OK, "%s", err);
    cr_assert_eq(a.dtype, KERN_F32);
    cr_assert_eq(a.count, n);
    memcpy(v, a.data, (size_t)n * sizeof *v);
    kern_npy_free(&a);
}

static const char *const square_src = "kernel square(x: f32[], y: f32[]) {\n"
                                      "    for i in 0..len(x) {\n"
                                      "        y[i] = x[i] * x[i];\n"
                                      "    }\n"
                                      "}\n"
                                      "kernel scale(a: f32, x: f32[], y: f32[]) {\n"
                                      "    for i in 0..len(x) {\n"
                                      "        y[i] += a * x[i];\n"
                                      "    }\n"
                                      "}\n";

Test(cli_grad, emit_ir_grad) {
    run_result r = run("emit tests/golden/ir/simulate.kern --emit=ir-grad");
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "kernel @simulate.grad(") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "kernel @simulate(") == NULL, "primal kernel printed:\n%s", r.out);
    /* the serial loop carries x: its values go on an adstack */
    cr_expect(strstr(r.out, "adpush") != NULL && strstr(r.out, "adpop") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "%x0.grad: f32[]") != NULL, "%s", r.out);
    free(r.out);
    /* --kernel K and --kernel K.grad name the same gradient, and only that one */
    char src[64], args[512];
    temp_file(src, ".kern", square_src);
    const char *names[] = {"scale", "scale.grad"};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "emit %s --emit=ir-grad --kernel %s", src, names[i]);
        r = run(args);
        cr_expect_eq(r.status, 0, "%s", r.out);
        cr_expect(strstr(r.out, "kernel @scale.grad(%a: f32, %x: f32[], %y: f32[], "
                                "%a.grad: f32[], %x.grad: f32[], %y.grad: f32[])") != NULL,
                  "%s", r.out);
        int nkernels = 0;
        for (const char *t = r.out; (t = strstr(t, "kernel @")) != NULL; t++)
            nkernels++;
        cr_expect_eq(nkernels, 1, "%s", r.out);
        free(r.out);
    }
    /* without --kernel: every gradient, no primal kernel */
    snprintf(args, sizeof args, "emit %s --emit=ir-grad", src);
    r = run(args);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "kernel @square.grad(") && strstr(r.out, "kernel @scale.grad(") &&
                  !strstr(r.out, "kernel @square(") && !strstr(r.out, "kernel @scale("),
              "%s", r.out);
    free(r.out);
    snprintf(args, sizeof args, "emit %s --emit=ir --kernel square.grad", src);
    expect(args, 0, "kernel @square.grad(%x: f32[], %y: f32[], %x.grad: f32[], %y.grad: f32[])");
    snprintf(args, sizeof args, "emit %s --emit=ir-grad --kernel nope", src);
    expect(args, 1, "no kernel named 'nope'");
    unlink(src);
}

/* y[i] = x[i]^2: x.grad += 2 x y.grad, y.grad = 0 (y is overwritten); the primal arrays
 * stay as they were. */
Test(cli_grad, run_square_grad) {
    enum { N = 5 };
    float x[N] = {1.5f, -2.0f, 0.25f, 3.0f, -0.5f}, y[N] = {9, 9, 9, 9, 9};
    float gx[N] = {0.5f, 1.0f, -1.0f, 0.0f, 2.0f}, gy[N] = {1.0f, -3.0f, 0.5f, 2.0f, 4.0f};
    char src[64], px[64], py[64], pgx[64], pgy[64], ogx[64], ogy[64], ox[64];
    temp_file(src, ".kern", square_src);
    temp_npy_f32(px, x, N);
    temp_npy_f32(py, y, N);
    temp_npy_f32(pgx, gx, N);
    temp_npy_f32(pgy, gy, N);
    temp_file(ogx, ".npy", NULL);
    temp_file(ogy, ".npy", NULL);
    temp_file(ox, ".npy", NULL);
    char args[1024];
    snprintf(args, sizeof args,
             "run %s square.grad x=%s y=%s x.grad=%s y.grad=%s --save x.grad=%s "
             "--save y.grad=%s --save x=%s",
             src, px, py, pgx, pgy, ogx, ogy, ox);
    run_result r = run(args);
    cr_assert_eq(r.status, 0, "%s", r.out);
    free(r.out);
    float rx[N], rgx[N], rgy[N];
    read_npy_f32(ogx, rgx, N);
    read_npy_f32(ogy, rgy, N);
    read_npy_f32(ox, rx, N);
    for (int i = 0; i < N; i++) {
        float want = gx[i] + 2.0f * x[i] * gy[i];
        cr_expect(fabsf(rgx[i] - want) <= 1e-6f * (1 + fabsf(want)), "x.grad[%d] = %g, want %g", i,
                  (double)rgx[i], (double)want);
        cr_expect_eq(rgy[i], 0.0f, "y.grad[%d] = %g, want 0 (overwritten)", i, (double)rgy[i]);
        cr_expect_eq(rx[i], x[i], "x[%d] changed by square.grad", i);
    }
    /* y += a x: the adjoint of y passes through, a.grad (length 1) accumulates x . y.grad */
    float ga[1] = {0.75f};
    char pga[64];
    temp_npy_f32(pga, ga, 1);
    snprintf(args, sizeof args,
             "run %s scale.grad a=-1.5 x=%s y=%s a.grad=%s x.grad=%s y.grad=%s "
             "--save a.grad=%s --save x.grad=%s --save y.grad=%s",
             src, px, py, pga, pgx, pgy, ox, ogx, ogy);
    r = run(args);
    cr_assert_eq(r.status, 0, "%s", r.out);
    free(r.out);
    float rga[1];
    read_npy_f32(ox, rga, 1);
    read_npy_f32(ogx, rgx, N);
    read_npy_f32(ogy, rgy, N);
    double dot = 0;
    for (int i = 0; i < N; i++) {
        dot += (double)x[i] * gy[i];
        float want = gx[i] + -1.5f * gy[i];
        cr_expect(fabsf(rgx[i] - want) <= 1e-6f * (1 + fabsf(want)), "x.grad[%d] = %g, want %g", i,
                  (double)rgx[i], (double)want);
        cr_expect_eq(rgy[i], gy[i], "y.grad[%d] = %g, want %g (+= passes it through)", i,
                     (double)rgy[i], (double)gy[i]);
    }
    cr_expect(fabs(rga[0] - (0.75 + dot)) <= 1e-5 * (1 + fabs(dot)), "a.grad = %g, want %g",
              (double)rga[0], 0.75 + dot);
    /* an unbound adjoint starts as zeros of its primal's shape, and can be saved: with
     * y.grad = 0, x.grad keeps its bound value; a scalar's adjoint has one element */
    snprintf(args, sizeof args, "run %s square.grad x=%s y=%s x.grad=%s --save y.grad=%s", src, px,
             py, pgx, ogy);
    r = run(args);
    cr_expect_eq(r.status, 0, "%s", r.out);
    free(r.out);
    read_npy_f32(ogy, rgy, N);
    for (int i = 0; i < N; i++)
        cr_expect_eq(rgy[i], 0.0f, "unbound y.grad[%d] = %g, want 0", i, (double)rgy[i]);
    snprintf(args, sizeof args,
             "run %s scale.grad a=2 x=%s y=%s y.grad=%s --save a.grad=%s "
             "--save x.grad=%s",
             src, px, py, pgy, ox, ogx);
    r = run(args);
    cr_expect_eq(r.status, 0, "%s", r.out);
    free(r.out);
    read_npy_f32(ox, rga, 1);
    read_npy_f32(ogx, rgx, N);
    double dot2 = 0;
    for (int i = 0; i < N; i++) {
        dot2 += (double)x[i] * gy[i];
        cr_expect(fabsf(rgx[i] - 2.0f * gy[i]) <= 1e-6f * (1 + fabsf(gy[i])),
                  "x.grad[%d] = %g, want %g (from zero)", i, (double)rgx[i], 2.0 * gy[i]);
    }
    cr_expect(fabs(rga[0] - dot2) <= 1e-5 * (1 + fabs(dot2)), "a.grad = %g, want %g",
              (double)rga[0], dot2);
    const char *files[] = {src, px, py, pgx, pgy, ogx, ogy, ox, pga};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        unlink(files[i]);
}

/* A kernel whose gradient is another kernel of the program (`grad G`): the implicit-
 * function adjoint of a Newton solve agrees with finite differences. */
Test(cli_grad, gradcheck_custom_gradient_kernel) {
    expect("gradcheck tests/custom/implicit.kern solve --seed 3", 0,
           "gradcheck solve: 24 elements");
}

Test(cli_grad, gradcheck_ok) {
    run_result r = run("gradcheck tests/golden/ir/simulate.kern simulate");
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "gradcheck simulate: ") != NULL && strstr(r.out, "(f64, tol 1e-06)") &&
                  strstr(r.out, "(f32, tol 0.01): ok"),
              "%s", r.out);
    free(r.out);
    char src[64], args[512];
    temp_file(src, ".kern", square_src);
    /* 8 elements of x and 8 of y: all 16 checked */
    snprintf(args, sizeof args, "gradcheck %s square --seed 7", src);
    expect(args, 0, "gradcheck square: 16 elements");
    /* a scalar parameter is one element: 1 + 4 + 4, given inputs, K.grad as the name */
    snprintf(args, sizeof args, "gradcheck %s scale.grad a=0.5 --size=4", src);
    expect(args, 0, "gradcheck scale.grad: 9 elements");
    snprintf(args, sizeof args, "gradcheck %s square --size 100 --max-checks 10", src);
    expect(args, 0, "gradcheck square: 10 elements");
    unlink(src);
}

/* floor has a zero derivative but jumps every 1e-7: the finite difference sees the jumps,
 * so the check must fail, with exit status 1 and the worst element named. */
Test(cli_grad, gradcheck_detects_mismatch) {
    char src[64], args[512];
    temp_file(src, ".kern",
              "kernel saw(x: f64[], y: f64[]) {\n"
              "    for i in 0..len(x) {\n"
              "        y[i] = floor(x[i] * 10000000.0);\n"
              "    }\n"
              "}\n");
    snprintf(args, sizeof args, "gradcheck %s saw", src);
    run_result r = run(args);
    cr_expect_eq(r.status, 1, "%s", r.out);
    cr_expect(strstr(r.out, ": FAILED") != NULL && strstr(r.out, "worst at x[") != NULL, "%s",
              r.out);
    free(r.out);
    unlink(src);
}

Test(cli_grad, usage_errors) {
    expect("gradcheck tests/golden/ir/simulate.kern", 2, "missing KERNEL");
    expect("gradcheck tests/golden/ir/simulate.kern simulate bogus=1", 1,
           "no parameter named 'bogus'");
    expect("gradcheck tests/golden/ir/simulate.kern simulate steps", 2, "NAME=VALUE");
    expect("gradcheck tests/golden/ir/simulate.kern simulate steps=1 steps=2", 2, "bound twice");
    expect("gradcheck tests/golden/ir/simulate.kern nope", 1, "no kernel named 'nope'");
    expect("gradcheck tests/golden/ir/simulate.kern simulate --eps -1", 2, "--eps");
    expect("gradcheck tests/golden/ir/simulate.kern simulate --size 0", 2, "--size");
    expect("gradcheck tests/golden/ir/simulate.kern simulate --save a=b.npy", 2, "--save");
    expect("run tests/golden/ir/simulate.kern simulate --seed 3", 2, "option of gradcheck");
    expect("gradcheck tests/golden/ir/simulate.kern simulate x0=/no/such.npy", 3,
           "x0=/no/such.npy");
    expect("run tests/golden/ir/simulate.kern nope.grad", 1, "no kernel named 'nope.grad'");
}

/* reference section 8: x[i - 1] is read and x[i] written by another thread of the same task;
 * K.grad would re-read the new value. An error at the read with a note at the write. */
Test(cli_grad, global_access_check) {
    char src[64], args[512];
    temp_file(src, ".kern",
              "kernel shift(x: f32[]) {\n"
              "    for i in 1..len(x) {\n"
              "        let v = x[i - 1];\n"
              "        x[i] = v * 2.0;\n"
              "    }\n"
              "}\n");
    char at_read[96], at_write[96];
    snprintf(at_read, sizeof at_read, "%s:3:", src);
    snprintf(at_write, sizeof at_write, "%s:4:", src);
    const char *cmds[] = {"run %s shift.grad x=a.npy x.grad=b.npy", "gradcheck %s shift",
                          "emit %s --emit=ir-grad"};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        snprintf(args, sizeof args, cmds[i], src);
        run_result r = run(args);
        cr_expect_eq(r.status, 1, "kernc %s:\n%s", args, r.out);
        cr_expect(strstr(r.out, at_read) && strstr(r.out, at_write) && strstr(r.out, "error:"),
                  "kernc %s: both locations expected:\n%s", args, r.out);
        free(r.out);
    }
    /* the forward kernel compiles; --no-grad-check turns the error into a warning */
    snprintf(args, sizeof args, "emit %s --emit=ir", src);
    expect(args, 0, "kernel @shift(");
    snprintf(args, sizeof args, "emit %s --emit=ir-grad --no-grad-check", src);
    expect(args, 0, "warning:");
    unlink(src);
}

/* ad_promote_f64 through kc_options.promote_f64: no f32 left anywhere, the casts between
 * f32 and f64 gone, the module still verifies, and the constants keep their values. */
Test(cli_grad, promote_f64) {
    const char *src = "kernel k(x: f32[], y: f64[], z: f32[], n: i32, s: f32) {\n"
                      "    for i in 0..len(x) {\n"
                      "        y[i] = f64(x[i]) * 2.0;\n"
                      "        z[i] = f32(y[i]) + f32(n) * s + 0.5;\n"
                      "    }\n"
                      "}\n";
    for (int promote = 0; promote < 2; promote++) {
        kc_ctx *cc = kc_ctx_new();
        cc->opts.promote_f64 = promote;
        cc->opts.grad = KC_GRAD_ALL;
        ir_module *m = kc_compile_source(cc, "p.kern", src, strlen(src));
        if (!m)
            diag_print_all(stderr, &cc->diags);
        cr_assert(m, "compilation failed");
        diag_sink sink;
        diag_init(&sink, &cc->mem);
        cr_expect(ir_verify(m, &sink), "the module does not verify");
        cr_expect(ir_kernel_find(m, "k.grad") != NULL, "no k.grad");
        kern_buf b = {0};
        ir_print(&b, m, "k");
        int casts = 0;
        for (const char *t = b.data; (t = strstr(t, "= cast ")) != NULL; t++)
            casts++;
        if (promote) {
            kern_buf all = {0};
            ir_print(&all, m, NULL); /* k.grad included */
            cr_expect(strstr(all.data, "f32") == NULL, "f32 left after promotion:\n%s", all.data);
            buf_free(&all);
            cr_expect(
                strstr(b.data, "kernel @k(%x: f64[], %y: f64[], %z: f64[], %n: i32, %s: f64)"),
                "%s", b.data);
            cr_expect_eq(casts, 1, "only i32 -> f64 stays a cast:\n%s", b.data);
            cr_expect(strstr(b.data, "const 0.5 : f64"), "%s", b.data);
        } else {
            cr_expect_eq(casts, 3, "%s", b.data);
        }
        buf_free(&b);
        diag_free(&sink);
        ir_module_free(m);
        kc_ctx_free(cc);
    }
}

static const char *const mixed_src = "kernel square(x: f32[], y: f32[]) {\n"
                                     "    for i in 0..len(x) {\n"
                                     "        y[i] = x[i] * x[i];\n"
                                     "    }\n"
                                     "}\n"
                                     "kernel inplace(x: f32[]) {\n"
                                     "    for i in 0..len(x) {\n"
                                     "        x[i] = x[i] * 2.0;\n"
                                     "    }\n"
                                     "}\n";

/* square.grad on x = [1, -2, 3], y.grad = [1, 1, 0.5], x.grad = 0: x.grad = 2 x y.grad. */
static void check_square_grad(kern_context *ctx, kern_module *m) {
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, "square.grad", &k), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    int64_t shape[1] = {3};
    float x[3] = {1, -2, 3}, gy[3] = {1, 1, 0.5f};
    kern_buffer *bx, *by, *bgx, *bgy;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, shape, x, &bx), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, shape, NULL, &by), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, shape, NULL, &bgx), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, shape, gy, &bgy), KERN_OK);
    kern_arg args[4] = {kern_arg_buffer(bx), kern_arg_buffer(by), kern_arg_buffer(bgx),
                        kern_arg_buffer(bgy)};
    cr_assert_eq(kern_launch(k, args, 4), KERN_OK, "%s", kern_context_last_error(ctx));
    float gx[3];
    cr_assert_eq(kern_buffer_read(bgx, gx, sizeof gx), KERN_OK);
    cr_expect(gx[0] == 2.0f && gx[1] == -4.0f && gx[2] == 3.0f, "x.grad = %g %g %g", (double)gx[0],
              (double)gx[1], (double)gx[2]);
    /* the check rejects inplace (x[i] read, then overwritten): no gradient, no error */
    cr_expect_eq(kern_kernel_find(m, "inplace", &k), KERN_OK);
    cr_expect_eq(kern_kernel_find(m, "inplace.grad", &k), KERN_ERR_NOT_FOUND);
}

/* --emit=ptx: PTX for the requested architecture, an entry point per task, K.grad in the
 * module that kernc build writes for cuda (docs/gpu-abi.md: header, metadata, code). */
Test(cli, emit_ptx_and_build_cuda) {
    expect("emit tests/golden/ir/saxpy.kern --emit=ptx --arch=sm_90", 0,
           ".visible .entry kern_saxpy__t0(");
    expect("emit tests/golden/ir/saxpy.kern --emit=ptx", 0, ".target sm_75");
    expect("emit tests/golden/ir/saxpy.kern --emit=llvm --target=cuda", 0,
           "target triple = \"nvptx64-nvidia-cuda\"");
    char out[64], args[256];
    temp_file(out, ".kmod", NULL);
    snprintf(args, sizeof args, "build examples/simulate.kern --target=cuda --arch=sm_90 -o %s",
             out);
    expect(args, 0, NULL);
    size_t len;
    char *text = kern_read_file(out, &len);
    cr_assert(text);
    static const char head[] = "kern-module 2 cuda\nmeta ";
    cr_expect(!strncmp(text, head, sizeof head - 1), "%.40s", text);
    cr_expect(strstr(text, "kernel simulate.grad "), "no gradient in the module");
    cr_expect(strstr(text, "\ncode ") && strstr(text, ".entry kern_simulate__grad__t0("));
    free(text);
    unlink(out);
}

/* AMDGPU: assembly for the requested architecture; a module file with a code object; math
 * builtins build too (kern's own library: no call left in the assembly). */
Test(cli, emit_amdgcn_and_build_amdgpu) {
    if (!kc_codegen_find("amdgpu"))
        cr_skip_test("this build has no AMDGPU code generator (-Damdgpu=false)");
    expect("emit tests/golden/ir/saxpy.kern --emit=amdgcn --arch=gfx942", 0,
           ".amdgcn_target \"amdgcn-amd-amdhsa--gfx942\"");
    expect("emit tests/golden/ir/saxpy.kern --emit=amdgcn --arch=sm_90", 2,
           "'sm_90' is not an architecture of target amdgpu");
    expect("emit examples/simulate.kern --emit=amdgcn", 0, "amdhsa.kernels");
    char out[64], args[256];
    temp_file(out, ".kmod", NULL);
    snprintf(args, sizeof args, "build examples/saxpy.kern --target=amdgpu -o %s", out);
    expect(args, 0, NULL);
    size_t len;
    char *text = kern_read_file(out, &len);
    cr_assert(text);
    static const char head[] = "kern-module 2 amdgpu\nmeta ";
    cr_expect(!strncmp(text, head, sizeof head - 1), "%.40s", text);
    const char *code = strstr(text, "\ncode ");
    cr_assert(code);
    code = strchr(code + 1, '\n') + 1;
    cr_expect(!memcmp(code,
                      "\x7f"
                      "ELF",
                      4),
              "the code is an ELF object");
    free(text);
    unlink(out);
}

/* An --arch that LLVM 19 does not know (or kern's code cannot run on) is a usage error
 * listing the architectures, in every command that takes one: `build --arch=sm_99` exited 0
 * after LLVM's warnings with `.target sm_99` PTX (or aborted), gfx9999 aborted (issue 23). */
Test(cli, unknown_arches_are_usage_errors) {
    char out[64];
    temp_file(out, ".kmod", NULL);
    unlink(out);
    static const char *const cases[][2] = {
        {"cuda", "sm_99"},    {"cuda", "sm_100a"},  {"cuda", "sm_20"},    {"amdgpu", "gfx9999"},
        {"amdgpu", "gfx000"}, {"amdgpu", "gfx90b"}, {"amdgpu", "gfx600"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        bool cuda = !strcmp(cases[i][0], "cuda");
        if (!kc_codegen_find(cases[i][0]))
            continue;
        const char *list =
            cuda ? "(its architectures: sm_50, sm_52, " : "(its architectures: gfx700, ";
        char args[512], want[160];
        snprintf(want, sizeof want, "'%s' is not an architecture of target %s", cases[i][1],
                 cases[i][0]);
        snprintf(args, sizeof args, "build examples/elastic.kern --target=%s --arch=%s -o %s",
                 cases[i][0], cases[i][1], out);
        run_result r = run(args);
        cr_expect(r.status == 2 && strstr(r.out, want) && strstr(r.out, list) &&
                      !strstr(r.out, "not a recognized processor"),
                  "kernc %s: status %d:\n%s", args, r.status, r.out);
        cr_expect(access(out, F_OK) != 0, "%s was written", out);
        free(r.out);
        snprintf(args, sizeof args, "emit examples/elastic.kern --emit=%s --arch=%s",
                 cuda ? "ptx" : "amdgcn", cases[i][1]);
        expect(args, 2, want);
        snprintf(args, sizeof args, "emit examples/elastic.kern --emit=llvm --target=%s --arch=%s",
                 cases[i][0], cases[i][1]);
        expect(args, 2, want);
    }
    /* run and gradcheck check it before they look for a device */
    expect("run examples/saxpy.kern saxpy --target=cuda --arch=sm_99", 2,
           "'sm_99' is not an architecture of target cuda");
    expect("gradcheck examples/saxpy.kern saxpy --target=cuda --arch=sm_100a", 2,
           "'sm_100a' is not an architecture of target cuda");
}

/* kernc build links with an argument vector, never a shell: an output path with quotes,
 * spaces and a command substitution is just a path; $CC may carry options; a driver that
 * does not exist is a clear error. */
Test(cli, build_links_without_a_shell) {
    char dir[] = "/tmp/kern-cli-XXXXXX";
    cr_assert(mkdtemp(dir));
    char sub[512], out[600], flag[600], args[1400];
    snprintf(sub, sizeof sub, "%s/q'uote $(touch injected)", dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    snprintf(out, sizeof out, "%s/sax'py.so", sub);
    snprintf(flag, sizeof flag, "%s/injected", dir);
    /* the path goes through the shell of run() quoted with double quotes */
    snprintf(args, sizeof args, "build examples/saxpy.kern --target=cpu -o \"%s\"", out);
    char *esc = malloc(strlen(args) * 2 + 1), *q = esc;
    for (const char *p = args; *p; p++) {
        if (*p == '$')
            *q++ = '\\';
        *q++ = *p;
    }
    *q = 0;
    expect(esc, 0, NULL);
    free(esc);
    cr_expect(access(flag, F_OK) != 0 && access("injected", F_OK) != 0, "a command ran");
    kern_context *ctx;
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    kern_module *m;
    cr_expect_eq(kern_module_load_file(ctx, out, &m), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_context_release(ctx);
    unlink(out);
    snprintf(args, sizeof args,
             "CC='cc -O0' '%s' build examples/saxpy.kern --target=cpu -o '%s/b.so'", KERNC_PATH,
             dir);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && %s 2>&1", KERN_SOURCE_ROOT, args);
    cr_expect_eq(system(cmd), 0, "$CC with an option");
    snprintf(args, sizeof args, "%s/b.so", dir);
    unlink(args);
    snprintf(
        cmd, sizeof cmd,
        "cd '%s' && CC=kern-no-such-cc '%s' build examples/saxpy.kern --target=cpu -o '%s/c.so' "
        ">/dev/null 2>&1",
        KERN_SOURCE_ROOT, KERNC_PATH, dir);
    int st = system(cmd);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 3, "a missing driver: status 3");
    snprintf(args, sizeof args, "%s/c.so", dir);
    cr_expect(access(args, F_OK) != 0, "nothing written");
    rmdir(sub);
    rmdir(dir);
}

/* kernc build and the JIT build K.grad where the global-access check allows it. */
Test(cli_grad, build_and_jit_carry_grads) {
    char src[64], so[64], args[256];
    temp_file(src, ".kern", mixed_src);
    temp_file(so, ".so", NULL);
    snprintf(args, sizeof args, "build %s --target=cpu -o %s", src, so);
    run_result r = run(args);
    cr_assert_eq(r.status, 0, "%s", r.out);
    free(r.out);
    kern_context *ctx;
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    kern_module *m;
    cr_assert_eq(kern_module_load_file(ctx, so, &m), KERN_OK, "%s", kern_context_last_error(ctx));
    check_square_grad(ctx, m);
    kern_module_release(m);
    cr_assert_eq(kern_module_from_source(ctx, mixed_src, strlen(mixed_src), "mixed.kern", &m),
                 KERN_OK, "%s", kern_context_last_error(ctx));
    check_square_grad(ctx, m);
    kern_context_release(ctx);
    unlink(src);
    unlink(so);
}

/* gradcheck's random t = size indexes past a time-indexed array: with its forced debug
 * checks that is a clear error (not a corruption); a bound t passes. */
Test(cli_grad, gradcheck_time_index) {
    char src[64], args[256];
    temp_file(src, ".kern",
              "kernel step(x: f32[,], t: i32) {\n"
              "    for i in 0..shape(x, 1) {\n"
              "        x[t, i] = sin(x[t - 1, i]) * 2.0;\n"
              "    }\n"
              "}\n");
    snprintf(args, sizeof args, "gradcheck %s step", src);
    run_result r = run(args);
    cr_expect_eq(r.status, 1, "%s", r.out);
    cr_expect(strstr(r.out, "out of bounds") && strstr(r.out, "bind NAME=VALUE"), "%s", r.out);
    free(r.out);
    /* x is 8 x 8: all 64 elements checked, row 3 overwritten from row 2 */
    snprintf(args, sizeof args, "gradcheck %s step t=3", src);
    expect(args, 0, "gradcheck step: 64 elements");
    unlink(src);
}

/* ---- issue 9, item 8: the command line people expect --------------------------------- */

Test(cli, subcommand_help) {
    const char *cmds[][2] = {{"check --help", "usage: kernc check"},
                             {"emit --help", "usage: kernc emit"},
                             {"build --help", "usage: kernc build"},
                             {"run --help", "--threads N"},
                             {"run -h", "--no-checks"},
                             {"gradcheck --help", "--steps N"}};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
        expect(cmds[i][0], 0, cmds[i][1]);
    /* a command's help is its own: run's options are not in check's */
    run_result r = run("check --help");
    cr_expect(strstr(r.out, "--threads") == NULL, "%s", r.out);
    free(r.out);
}

/* Integer bindings are decimal or 0x hex, as docs/cli.md says: a leading zero is an
 * error (never octal), in run and in gradcheck alike. */
Test(cli, integer_bindings_are_not_octal) {
    char src[64], px[64], args[512];
    temp_file(src, ".kern",
              "kernel k(x: f32[], n: i32) {\n"
              "    for i in 0..len(x) {\n"
              "        x[i] = f32(n);\n"
              "    }\n"
              "}\n");
    float v[2] = {0, 0};
    temp_npy_f32(px, v, 2);
    const char *bad[] = {"010", "08", " 5", "0x", "1e3"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(args, sizeof args, "run %s k x=%s 'n=%s'", src, px, bad[i]);
        expect(args, 1, "not an integer (decimal without leading zeros, or 0x hex)");
        snprintf(args, sizeof args, "gradcheck %s k 'n=%s'", src, bad[i]);
        expect(args, 1, "not a value of the parameter's type i32");
    }
    const char *good[][2] = {{"10", "10"}, {"0x1F", "31"}, {"-0x10", "-16"}, {"0", "0"}};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        snprintf(args, sizeof args, "run %s k x=%s n=%s --save x=%s", src, px, good[i][0], px);
        expect(args, 0, NULL);
        float out[2];
        read_npy_f32(px, out, 2);
        cr_expect_eq(out[0], (float)atof(good[i][1]), "n=%s: %g", good[i][0], (double)out[0]);
    }
    unlink(src);
    unlink(px);
}

Test(cli, run_options_usage) {
    expect("run tests/golden/ir/saxpy.kern saxpy --threads 0", 2, "--threads");
    expect("run tests/golden/ir/saxpy.kern saxpy --threads x", 2, "--threads");
    expect("check tests/golden/ir/saxpy.kern --time", 2, "--time is an option of run only");
    expect("gradcheck tests/golden/ir/saxpy.kern saxpy --no-checks", 2, "gradcheck always checks");
    expect("run tests/golden/ir/saxpy.kern saxpy --debug --no-checks", 2, "contradict");
    expect("run tests/golden/ir/saxpy.kern saxpy --steps 3", 2, "go together");
    expect("run tests/golden/ir/saxpy.kern saxpy --step-arg a", 2, "go together");
    expect("build tests/golden/ir/saxpy.kern --steps 2 --step-arg a -o x.so", 2,
           "option of run and gradcheck only");
}

/* --device N (docs/cli.md): a number, of run and gradcheck only; the CPU has device 0. */
Test(cli, device_option) {
    expect("run tests/golden/ir/saxpy.kern saxpy --device x", 2,
           "--device needs a device number from 0 to 1023, got 'x'");
    expect("run tests/golden/ir/saxpy.kern saxpy --device -1", 2, "got '-1'");
    expect("build tests/golden/ir/saxpy.kern --device 0 -o x.so", 2,
           "--device is an option of run and gradcheck only");
    expect("run examples/saxpy.kern saxpy --device 1 a=1 x=examples/data/x0.npy "
           "y=examples/data/x0.npy",
           1, "there is no cpu device 1: the cpu backend has one device (0)");
    expect("run examples/saxpy.kern saxpy --device 0 a=2 x=examples/data/x0.npy "
           "y=examples/data/x0.npy",
           0, "y: f32[8] = -3 ");
}

/* An option the command would ignore is a usage error: `run -o` was silently dropped
 * (issue 23), as were --emit and --kernel outside emit and -o outside emit and build. */
Test(cli, options_a_command_ignores_are_errors) {
    static const char *const cases[][2] = {
        {"run tests/golden/ir/saxpy.kern saxpy a=1 -o out.npy",
         "run: -o is an option of emit and build only (run writes arrays with --save"},
        {"gradcheck tests/golden/ir/saxpy.kern saxpy -o x",
         "gradcheck: -o is an option of emit and build only"},
        {"check tests/golden/ir/saxpy.kern -o x", "check: -o is an option of emit and build"},
        {"check tests/golden/ir/saxpy.kern --emit=ir", "check: --emit is an option of emit"},
        {"build tests/golden/ir/saxpy.kern -o x.so --emit=ir",
         "build: --emit is an option of emit"},
        {"run tests/golden/ir/saxpy.kern saxpy --emit=ir", "--emit is an option of emit"},
        {"build tests/golden/ir/saxpy.kern -o x.so --kernel saxpy",
         "build: --kernel is an option of emit only"},
        {"run tests/golden/ir/saxpy.kern saxpy --kernel saxpy",
         "run: --kernel is an option of emit only (run and gradcheck take KERNEL after the file)"},
        {"check tests/golden/ir/saxpy.kern --kernel saxpy", "--kernel is an option of emit"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect(cases[i][0], 2, cases[i][1]);
    cr_expect(access(KERN_SOURCE_ROOT "/x.so", F_OK) != 0 &&
              access(KERN_SOURCE_ROOT "/x", F_OK) != 0);
}

/* A file without kernels says so: check and build warn (status 0), run and gradcheck name
 * it ("kernels:" followed by nothing, issue 23). */
Test(cli, a_file_without_kernels_says_so) {
    char src[64], mod[64], args[256];
    temp_file(src, ".kern", "const A = 1;\nfunc f(x: f32) -> f32 { return x; }\n");
    temp_file(mod, ".so", NULL);
    snprintf(args, sizeof args, "check %s", src);
    expect(args, 0, "warning: no kernels in /tmp/kern-cli-");
    snprintf(args, sizeof args, "run %s k", src);
    run_result r = run(args);
    cr_expect(r.status == 1 && strstr(r.out, ", which has no kernels") &&
                  !strstr(r.out, "kernels:"),
              "%s", r.out);
    free(r.out);
    snprintf(args, sizeof args, "gradcheck %s k", src);
    expect(args, 1, ", which has no kernels");
    snprintf(args, sizeof args, "build %s -o %s", src, mod);
    expect(args, 0, "no kernels in /tmp/kern-cli-");
    expect("check /dev/null", 0, "warning: no kernels in /dev/null");
    unlink(src);
    unlink(mod);
}

/* The command line takes any number of bindings and --save options: it took a KERNEL and
 * 63 bindings, then "too many arguments" (issue 23). A kernel of 100 parameters runs. */
Test(cli, run_takes_any_number_of_bindings) {
    kern_buf src = {0}, args = {0};
    buf_puts(&src, "kernel k(x: f32[]");
    for (int i = 0; i < 99; i++)
        buf_printf(&src, ", p%d: f32", i);
    buf_puts(&src, ") { for i in 0..len(x) { x[i] = 0.0");
    for (int i = 0; i < 99; i++)
        buf_printf(&src, " + p%d", i);
    buf_puts(&src, "; } }\n");
    char path[64], npy[64];
    temp_file(path, ".kern", src.data);
    temp_npy_f32(npy, (const float[]){0, 0}, 2);
    buf_printf(&args, "run %s k x=%s", path, npy);
    for (int i = 0; i < 99; i++)
        buf_printf(&args, " p%d=%d", i, i % 3);
    for (int i = 0; i < 70; i++)
        buf_puts(&args, " --save x=/dev/null");
    expect(args.data, 0, NULL);
    buf_free(&args);
    buf_printf(&args, "run %s k x=%s", path, npy);
    for (int i = 0; i < 99; i++)
        buf_printf(&args, " p%d=%d", i, i % 3);
    expect(args.data, 0, "x: f32[2] = 99 99"); /* 33 * (0 + 1 + 2) */
    buf_free(&args);
    buf_printf(&args, "gradcheck %s k", path);
    for (int i = 0; i < 99; i++)
        buf_printf(&args, " p%d=1", i);
    expect(args.data, 0, "gradcheck k: ");
    buf_free(&args);
    buf_free(&src);
    unlink(path);
    unlink(npy);
}

/* y[i + 1] = x[i] writes one past the end of y: run checks bounds by default, so it is an
 * error naming the store, not a heap corruption. */
Test(cli, run_checks_bounds_by_default) {
    char src[64], px[64], py[64], args[512];
    temp_file(src, ".kern",
              "kernel off(x: f32[], y: f32[]) {\n"
              "    for i in 0..len(x) {\n"
              "        y[i + 1] = x[i];\n"
              "    }\n"
              "}\n"
              "kernel ok(x: f32[], y: f32[]) {\n"
              "    for i in 0..len(x) {\n"
              "        y[i] = x[i] + 1.0;\n"
              "    }\n"
              "}\n");
    float v[4] = {1, 2, 3, 4};
    temp_npy_f32(px, v, 4);
    temp_npy_f32(py, v, 4);
    snprintf(args, sizeof args, "run %s off x=%s y=%s", src, px, py);
    expect(args, 1, "out of bounds");
    /* --no-checks compiles without them: a correct kernel gives the same result */
    snprintf(args, sizeof args, "run %s ok x=%s y=%s --no-checks --save y=%s", src, px, py, py);
    expect(args, 0, NULL);
    float out[4];
    read_npy_f32(py, out, 4);
    for (int i = 0; i < 4; i++)
        cr_expect_eq(out[i], v[i] + 1.0f, "y[%d] = %g", i, (double)out[i]);
    unlink(src);
    unlink(px);
    unlink(py);
}

Test(cli, run_threads_and_time) {
    char src[64], px[64], py[64], args[512];
    temp_file(src, ".kern", square_src);
    float v[3] = {1, -2, 3};
    temp_npy_f32(px, v, 3);
    temp_npy_f32(py, v, 3);
    snprintf(args, sizeof args, "run %s square x=%s y=%s --threads 3 --time --save y=%s", src, px,
             py, py);
    run_result r = run(args);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "kernc run: square: compile ") && strstr(r.out, " ms, run ") &&
                  strstr(r.out, "(1 launch, 3 threads)"),
              "%s", r.out);
    free(r.out);
    float out[3];
    read_npy_f32(py, out, 3);
    for (int i = 0; i < 3; i++)
        cr_expect_eq(out[i], v[i] * v[i]);
    unlink(src);
    unlink(px);
    unlink(py);
}

/* kernc build without --target builds for the CPU, and names the gradient it left out
 * with the reason; the JIT's lookup of that gradient says why too. */
Test(cli_grad, build_default_target_and_left_out_grads) {
    char src[64], so[64], args[256];
    temp_file(src, ".kern", mixed_src);
    temp_file(so, ".so", NULL);
    snprintf(args, sizeof args, "build %s -o %s", src, so);
    run_result r = run(args);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "warning: no gradient 'inplace.grad'") &&
                  strstr(r.out, "'x' is read here and may be written afterwards"),
              "%s", r.out);
    cr_expect(strstr(r.out, "square.grad") == NULL, "square.grad was built:\n%s", r.out);
    free(r.out);
    kern_context *ctx;
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    kern_module *m;
    cr_assert_eq(kern_module_load_file(ctx, so, &m), KERN_OK, "%s", kern_context_last_error(ctx));
    check_square_grad(ctx, m);
    kern_module_release(m);
    cr_assert_eq(kern_module_from_source(ctx, mixed_src, strlen(mixed_src), "mixed.kern", &m),
                 KERN_OK);
    kern_kernel *k;
    cr_expect_neq(kern_kernel_find(m, "inplace.grad", &k), KERN_OK);
    cr_expect(strstr(kern_context_last_error(ctx), "may be written afterwards"), "%s",
              kern_context_last_error(ctx));
    kern_context_release(ctx);
    unlink(src);
    unlink(so);
}

/* A time loop from the command line: x[t + 1] = sin(x[t]) a + x[t] for t = 0 .. S-1, and
 * its gradient through the tape, against the same recurrence and its chain rule written
 * as plain C loops in f64. */
static const char *const steps_src = "kernel step(x: f32[,], a: f32, t: i32) {\n"
                                     "    for i in 0..shape(x, 1) {\n"
                                     "        x[t + 1, i] = sin(x[t, i]) * a + x[t, i];\n"
                                     "    }\n"
                                     "}\n";

static void temp_npy_2d(char *path, const float *v, int64_t n0, int64_t n1) {
    temp_file(path, ".npy", NULL);
    char err[256];
    int64_t shape[KERN_MAX_DIMS] = {n0, n1, 1, 1};
    cr_assert_eq(kern_npy_write(path, KERN_F32, 2, shape, v, err, sizeof err), KERN_OK, "%s", err);
}

Test(cli_grad, run_steps_and_their_gradient) {
    enum { S = 4, M = 3 };
    const double a = 0.75;
    float x[(S + 1) * M] = {0}, g[(S + 1) * M] = {0};
    for (int i = 0; i < M; i++) {
        x[i] = 0.3f * (float)i - 0.2f;
        g[S * M + i] = 1.0f + (float)i; /* dL/d(last row) */
    }
    double ref[S + 1][M], gref[S + 1][M] = {{0}}, ga = 0.25; /* a.grad starts at 0.25 */
    for (int i = 0; i < M; i++)
        ref[0][i] = x[i];
    for (int t = 0; t < S; t++)
        for (int i = 0; i < M; i++)
            ref[t + 1][i] = sin(ref[t][i]) * a + ref[t][i];
    for (int i = 0; i < M; i++)
        gref[S][i] = g[S * M + i];
    for (int t = S - 1; t >= 0; t--)
        for (int i = 0; i < M; i++) {
            gref[t][i] += gref[t + 1][i] * (cos(ref[t][i]) * a + 1);
            ga += gref[t + 1][i] * sin(ref[t][i]);
            gref[t + 1][i] = 0; /* overwritten by step t */
        }
    char src[64], px[64], pg[64], pga[64], ox[64], og[64], oga[64], args[1024];
    temp_file(src, ".kern", steps_src);
    temp_npy_2d(px, x, S + 1, M);
    temp_npy_2d(pg, g, S + 1, M);
    float ga0 = 0.25f;
    temp_npy_f32(pga, &ga0, 1);
    temp_file(ox, ".npy", NULL);
    temp_file(og, ".npy", NULL);
    temp_file(oga, ".npy", NULL);
    snprintf(args, sizeof args, "run %s step x=%s a=0.75 --steps %d --step-arg t --save x=%s", src,
             px, S, ox);
    expect(args, 0, NULL);
    float rx[(S + 1) * M], rg[(S + 1) * M], rga;
    read_npy_f32(ox, rx, (S + 1) * M);
    for (int t = 0; t <= S; t++)
        for (int i = 0; i < M; i++)
            cr_expect(fabs(rx[t * M + i] - ref[t][i]) <= 1e-5, "x[%d, %d] = %g, want %g", t, i,
                      (double)rx[t * M + i], ref[t][i]);
    snprintf(args, sizeof args,
             "run %s step.grad x=%s a=0.75 x.grad=%s a.grad=%s --steps %d --step-arg t "
             "--save x.grad=%s --save a.grad=%s --save x=%s",
             src, px, pg, pga, S, og, oga, ox);
    expect(args, 0, NULL);
    read_npy_f32(og, rg, (S + 1) * M);
    read_npy_f32(oga, &rga, 1);
    read_npy_f32(ox, rx, (S + 1) * M);
    for (int t = 0; t <= S; t++)
        for (int i = 0; i < M; i++) {
            cr_expect(fabs(rg[t * M + i] - gref[t][i]) <= 1e-5 * (1 + fabs(gref[t][i])),
                      "x.grad[%d, %d] = %g, want %g", t, i, (double)rg[t * M + i], gref[t][i]);
            cr_expect(fabs(rx[t * M + i] - ref[t][i]) <= 1e-5, "x after the steps");
        }
    cr_expect(fabs(rga - ga) <= 1e-5 * (1 + fabs(ga)), "a.grad = %g, want %g", (double)rga, ga);
    /* gradcheck of the sequence, and the errors of the step argument */
    snprintf(args, sizeof args, "gradcheck %s step x=%s --steps %d --step-arg t", src, px, S);
    expect(args, 0, "gradcheck step: 16 elements");
    snprintf(args, sizeof args, "run %s step x=%s a=1 t=0 --steps 2 --step-arg t", src, px);
    expect(args, 2, "the step argument is set by --steps");
    snprintf(args, sizeof args, "run %s step x=%s t=0 --steps 2 --step-arg a", src, px);
    expect(args, 1, "'a' of kernel 'step' is not an integer scalar");
    snprintf(args, sizeof args, "gradcheck %s step --steps 2 --step-arg nope", src);
    expect(args, 1, "no parameter named 'nope'");
    const char *files[] = {src, px, pg, pga, ox, og, oga};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        unlink(files[i]);
}

/* ---- issue 9, item 3: gradcheck checks what users run -------------------------------- */

/* K.grad of atomic_max/atomic_min finds the winner in the state K left: checked on the
 * inputs instead, it looked wrong. K then K.grad is what users run, and it is right. */
Test(cli_grad, gradcheck_atomic_min_max) {
    char src[64], args[256];
    temp_file(src, ".kern",
              "kernel amax(x: f32[], m: f32[]) {\n"
              "    for i in 0..len(x) {\n"
              "        atomic_max(m[0], x[i] * 2.0);\n"
              "    }\n"
              "}\n"
              "kernel amin(x: f64[], m: f64[]) {\n"
              "    for i in 0..len(x) {\n"
              "        atomic_min(m[i % 2], x[i] * x[i] - 0.5);\n"
              "    }\n"
              "}\n");
    for (int seed = 1; seed <= 3; seed++) {
        snprintf(args, sizeof args, "gradcheck %s amax --seed %d", src, seed);
        expect(args, 0, ": ok");
        snprintf(args, sizeof args, "gradcheck %s amin --seed %d", src, seed);
        expect(args, 0, ": ok");
    }
    unlink(src);
}

/* An in-place update run as users run it (K, then K.grad on what K left) re-reads the
 * squared value: the gradient is wrong there, and gradcheck must say so, even though
 * K.grad run on the inputs would look right. */
Test(cli_grad, gradcheck_in_place_fails) {
    char src[64], args[256];
    temp_file(src, ".kern",
              "kernel sq(x: f32[]) {\n"
              "    for i in 0..len(x) {\n"
              "        x[i] = x[i] * x[i];\n"
              "    }\n"
              "}\n");
    snprintf(args, sizeof args, "gradcheck %s sq --no-grad-check", src);
    run_result r = run(args);
    cr_expect_eq(r.status, 1, "%s", r.out);
    cr_expect(strstr(r.out, ": FAILED") && strstr(r.out, "worst at x["), "%s", r.out);
    free(r.out);
    unlink(src);
}

/* An unbound array takes the shape of the bound array of its rank: y gets x's 20
 * elements (with --size 8 it would be indexed out of bounds). */
Test(cli_grad, gradcheck_sizes_from_bound_arrays) {
    char src[64], px[64], args[256];
    temp_file(src, ".kern", square_src);
    float v[20];
    for (int i = 0; i < 20; i++)
        v[i] = 0.1f * (float)i - 1.0f;
    temp_npy_f32(px, v, 20);
    snprintf(args, sizeof args, "gradcheck %s square x=%s", src, px);
    expect(args, 0, "gradcheck square: 40 elements");
    unlink(src);
    unlink(px);
}

/* while v < 3: v += 1 runs a data-dependent number of times; at x = 0 (and 1) a step of
 * -h adds an iteration, so the finite difference jumps: gradcheck names the point as
 * non-smooth and checks the rest (y's elements among them). With every checked element
 * non-smooth nothing is compared,
 * which is a failure. A jump without a loop (floor) is still a failure. */
Test(cli_grad, gradcheck_nonsmooth_while) {
    char src[64], px[64], p2[64], args[256];
    temp_file(src, ".kern",
              "kernel count(x: f32[], y: f32[]) {\n"
              "    for i in 0..len(x) {\n"
              "        var v = x[i];\n"
              "        while v < 3.0 {\n"
              "            v = v + 1.0;\n"
              "        }\n"
              "        y[i] = v * v;\n"
              "    }\n"
              "}\n");
    float v[4] = {0.5f, 0.0f, 1.25f, -0.5f}, w[2] = {0.0f, 1.0f};
    temp_npy_f32(px, v, 4);
    temp_npy_f32(p2, w, 2);
    snprintf(args, sizeof args, "gradcheck %s count x=%s", src, px);
    run_result r = run(args);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "gradcheck count: 8 elements") && strstr(r.out, ": ok") &&
                  strstr(r.out, "1 element at a non-smooth point, not compared (first: x[1])"),
              "%s", r.out);
    free(r.out);
    /* --max-checks 1 checks x[0] alone */
    snprintf(args, sizeof args, "gradcheck %s count x=%s --max-checks 1", src, p2);
    r = run(args);
    cr_expect_eq(r.status, 1, "%s", r.out);
    cr_expect(strstr(r.out, "FAILED") && strstr(r.out, "1 element at a non-smooth point") &&
                  strstr(r.out, "no element could be compared"),
              "%s", r.out);
    free(r.out);
    unlink(src);
    unlink(px);
    unlink(p2);
}

/* A check-time warning when a thread of a parallel for reads what other threads write,
 * naming the parallel index; none where each element belongs to one thread or the
 * accesses never meet. Status 0 either way: a warning. */
Test(cli, check_warns_parallel_races) {
    struct {
        const char *body; /* in kernel k(x: f32[], y: f32[], u: f32[,], t: i32) */
        const char *warn; /* NULL: no warning */
    } cases[] = {
        {"for i in 0..len(x) - 1 {\n        x[i] = x[i + 1];\n    }", "over 'i'"},
        {"for i in 0..len(x) {\n        for j in 0..len(x) {\n            y[i] += x[j];\n"
         "        }\n        x[i] = y[i];\n    }",
         "'x' is read here and written (line 6)"},
        {"for i in 0..len(x), j in 0..len(x) {\n        u[i, j] = u[j, i];\n    }",
         "over 'i', 'j'"},
        {"for i in 0..len(x) {\n        let m = atomic_max(x[0], 1.0);\n        y[i] = x[i] + m;"
         "\n    }",
         "'x' is read here"},
        {"for i in 0..len(x) {\n        x[i] = x[i] * 2.0;\n        x[i] *= 3.0;\n    }", NULL},
        {"for i in 0..shape(u, 1) {\n        u[t, i] = u[t - 1, i] + u[t - 1, i + 1];\n    }",
         NULL},
        {"for i in 0..len(x) {\n        y[i] = x[i] + x[0];\n    }", NULL},
        {"for i in 0..len(x) {\n        y[0] += x[i];\n    }", NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char src[64], args[128], text[1024];
        snprintf(text, sizeof text,
                 "kernel k(x: f32[], y: f32[], u: f32[,], t: i32) {\n    %s\n}\n", cases[c].body);
        temp_file(src, ".kern", text);
        snprintf(args, sizeof args, "check %s", src);
        run_result r = run(args);
        cr_expect_eq(r.status, 0, "%s\n%s", text, r.out);
        if (cases[c].warn)
            cr_expect(strstr(r.out, "warning:") && strstr(r.out, cases[c].warn) &&
                          strstr(r.out, "run in no order"),
                      "case %zu: expected a warning with '%s':\n%s\n%s", c, cases[c].warn, text,
                      r.out);
        else
            cr_expect(strstr(r.out, "warning") == NULL, "case %zu: no warning expected:\n%s\n%s", c,
                      text, r.out);
        free(r.out);
        unlink(src);
    }
}

/* The gradcheck of a sequence checks what the tape computes: a ping-pong kernel whose
 * second step overwrites the x that the first step read passes alone (each launch's
 * K.grad is right), and fails as a sequence of 2 or 3 steps, since the tape keeps no
 * copies (docs/cli.md: a step must not overwrite what an earlier step read). */
Test(cli_grad, gradcheck_steps_detects_overwritten_inputs) {
    char src[64], args[256];
    temp_file(src, ".kern",
              "kernel pp(x: f32[], y: f32[], t: i32) {\n"
              "    for i in 0..len(x) {\n"
              "        if t % 2 == 0 {\n"
              "            y[i] = sin(x[i]) * 1.5;\n"
              "        } else {\n"
              "            x[i] = sin(y[i]) * 1.5;\n"
              "        }\n"
              "    }\n"
              "}\n");
    snprintf(args, sizeof args, "gradcheck %s pp --steps 1 --step-arg t", src);
    expect(args, 0, ": ok");
    for (int steps = 2; steps <= 3; steps++) {
        snprintf(args, sizeof args, "gradcheck %s pp --steps %d --step-arg t", src, steps);
        run_result r = run(args);
        cr_expect_eq(r.status, 1, "%s", r.out);
        cr_expect(strstr(r.out, ": FAILED") && strstr(r.out, "worst at x["), "%s", r.out);
        free(r.out);
    }
    unlink(src);
}

/* ---- Vectors, matrices and structs ------------------------------------------------- */

static const char *const particles_src =
    "struct P { pos: vec3, vel: vec3, mass: f32 }\n"
    "kernel step(ps: P[], dt: f32, g: vec3, m: mat2, x: vec3[]) {\n"
    "    for i in 0..len(ps) {\n"
    "        ps[i].vel += g * dt + vec3(m[1][0]);\n"
    "        ps[i].pos += ps[i].vel * dt;\n"
    "        x[i] = ps[i].pos * ps[i].mass;\n"
    "    }\n"
    "}\n";

static void temp_npy_shaped(char *path, kern_dtype t, int rank, const int64_t *shape,
                            const void *data) {
    temp_file(path, ".npy", NULL);
    char err[256];
    cr_assert_eq(kern_npy_write(path, t, rank, shape, data, err, sizeof err), KERN_OK, "%s", err);
}

/* INT_MIN / -1 is defined: it wraps to INT_MIN, and INT_MIN % -1 is 0, with the checks
 * of --debug too (which report a division by zero only), as docs/backend-cpu.md and
 * docs/passes.md say (passes.md said debug builds reported it: issue 23). */
Test(cli, int_min_by_minus_one_wraps_under_debug) {
    char src[64], o32[64], o64[64], args[512];
    temp_file(src, ".kern",
              "kernel d(a: i32, b: i32, o: i32[]) {\n"
              "    for i in 0..1 { o[0] = a / b; o[1] = a % b; }\n"
              "}\n"
              "kernel d64(a: i64, b: i64, o: i64[]) {\n"
              "    for i in 0..1 { o[0] = a / b; o[1] = a % b; }\n"
              "}\n");
    int64_t two = 2, zeros[2] = {0, 0};
    temp_npy_shaped(o32, KERN_I32, 1, &two, zeros);
    temp_npy_shaped(o64, KERN_I64, 1, &two, zeros);
    static const struct {
        const char *kernel, *a, *b, *option;
        int status;
        const char *want;
    } cases[] = {
        {"d", "-2147483648", "-1", "", 0, "o: i32[2] = -2147483648 0"},
        {"d", "-2147483648", "-1", "--debug", 0, "o: i32[2] = -2147483648 0"},
        {"d64", "-9223372036854775808", "-1", "", 0, "o: i64[2] = -9223372036854775808 0"},
        {"d", "5", "0", "", 1, "integer division by zero"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(args, sizeof args, "run %s %s a=%s b=%s o=%s %s", src, cases[i].kernel, cases[i].a,
                 cases[i].b, strcmp(cases[i].kernel, "d") ? o64 : o32, cases[i].option);
        expect(args, cases[i].status, cases[i].want);
    }
    unlink(src);
    unlink(o32);
    unlink(o64);
}

/* By-value vectors and matrices inline (g=0,-10,0), a struct array as its (N, 7)
 * components, a vec3[] saved with shape (N, 3); the results against a C loop. */
Test(cli_v1, run_binds_vectors_matrices_and_structs) {
    enum { N = 5 };
    float ps[N][7], x[N][3] = {{0}};
    for (int i = 0; i < N; i++)
        for (int c = 0; c < 7; c++)
            ps[i][c] = (float)(i + 1) * 0.25f - (float)c * 0.5f;
    char src[64], pps[64], px[64], ox[64], ops[64], args[1024];
    temp_file(src, ".kern", particles_src);
    temp_npy_shaped(pps, KERN_F32, 2, (int64_t[]){N, 7, 1, 1}, ps);
    temp_npy_shaped(px, KERN_F32, 2, (int64_t[]){N, 3, 1, 1}, x);
    temp_file(ox, ".npy", NULL);
    temp_file(ops, ".npy", NULL);
    snprintf(args, sizeof args,
             "run %s step ps=%s dt=0.5 g=0.5,-10,2e-1 m=1,2,3,-4 x=%s --save x=%s --save ps=%s",
             src, pps, px, ox, ops);
    expect(args, 0, NULL);
    kern_npy a, b;
    char err[256];
    cr_assert_eq(kern_npy_read(ox, &a, err, sizeof err), KERN_OK, "%s", err);
    cr_assert_eq(kern_npy_read(ops, &b, err, sizeof err), KERN_OK, "%s", err);
    cr_expect(a.dtype == KERN_F32 && a.rank == 2 && a.shape[0] == N && a.shape[1] == 3);
    cr_expect(b.dtype == KERN_F32 && b.rank == 2 && b.shape[0] == N && b.shape[1] == 7);
    const float g[3] = {0.5f, -10.0f, 0.2f}, dt = 0.5f, m10 = 3.0f;
    for (int i = 0; i < N; i++) {
        float *p = ps[i], *pa = (float *)a.data + 3 * i, *pb = (float *)b.data + 7 * i;
        for (int c = 0; c < 3; c++) {
            float vel = p[3 + c] + (g[c] * dt + m10);
            float pos = p[c] + vel * dt;
            cr_expect(fabsf(pb[3 + c] - vel) <= 1e-5f * (1 + fabsf(vel)), "vel[%d][%d]", i, c);
            cr_expect(fabsf(pb[c] - pos) <= 1e-5f * (1 + fabsf(pos)), "pos[%d][%d]", i, c);
            cr_expect(fabsf(pa[c] - pos * p[6]) <= 1e-5f * (1 + fabsf(pos * p[6])), "x[%d][%d]", i,
                      c);
        }
        cr_expect_eq(pb[6], p[6], "mass[%d]", i);
    }
    kern_npy_free(&a);
    kern_npy_free(&b);
    /* the same vector as a .npy file of shape (3,); step.grad with g inline and its
     * adjoint g.grad zeros of shape (3,), saved */
    char pg[64], og[64];
    temp_npy_shaped(pg, KERN_F32, 1, (int64_t[]){3, 1, 1, 1}, g);
    snprintf(args, sizeof args, "run %s step ps=%s dt=0.5 g=%s m=1,2,3,-4 x=%s", src, pps, pg, px);
    expect(args, 0, "x: f32[5, 3] =");
    temp_file(og, ".npy", NULL);
    snprintf(args, sizeof args,
             "run %s step.grad ps=%s dt=0.5 g=1,2,3 m=1,2,3,-4 x=%s x.grad=%s --save g.grad=%s",
             src, pps, px, px, og);
    expect(args, 0, NULL);
    cr_assert_eq(kern_npy_read(og, &a, err, sizeof err), KERN_OK, "%s", err);
    cr_expect(a.rank == 1 && a.shape[0] == 3, "g.grad has g's shape");
    kern_npy_free(&a);
    const char *files[] = {src, pps, px, ox, ops, pg, og};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        unlink(files[i]);
}

Test(cli_v1, run_errors_name_the_declared_type) {
    float zeros[4 * 7] = {0};
    char src[64], pps[64], px4[64], pg4[64], args[1024], base[512];
    temp_file(src, ".kern", particles_src);
    temp_npy_shaped(pps, KERN_F32, 2, (int64_t[]){4, 7, 1, 1}, zeros);
    temp_npy_shaped(px4, KERN_F32, 2, (int64_t[]){4, 4, 1, 1}, zeros);
    temp_npy_shaped(pg4, KERN_F32, 1, (int64_t[]){4, 1, 1, 1}, zeros);
    snprintf(base, sizeof base, "run %s step ps=%s dt=0.5", src, pps);
    snprintf(args, sizeof args, "%s g=0,-10 m=1,2,3,4 x=%s", base, px4);
    expect(args, 1, "g=0,-10: vec3 has 3 components, comma-separated; got 2");
    snprintf(args, sizeof args, "%s g=0,-10,1,2 m=1,2,3,4 x=%s", base, px4);
    expect(args, 1, "g=0,-10,1,2: vec3 has 3 components, comma-separated; got 4");
    snprintf(args, sizeof args, "%s g=0,,1 m=1,2,3,4 x=%s", base, px4);
    expect(args, 1, "g=0,,1: component 2 '': not a number (vec3 is of f32)");
    snprintf(args, sizeof args, "%s g=1,2,3 m=1,2,3,x x=%s", base, px4);
    expect(args, 1, "m=1,2,3,x: component 4 'x': not a number (mat2 is of f32)");
    snprintf(args, sizeof args, "%s g=1,2,3 m=1,2,3,4 x=%s", base, px4);
    expect(args, 1,
           "the file's shape is (4, 4), but parameter 'x' is vec3[], in memory f32 of shape "
           "(N, 3)");
    snprintf(args, sizeof args, "%s g=%s m=1,2,3,4 x=%s", base, pg4, px4);
    expect(args, 1, "but parameter 'g' is vec3, in memory f32 of shape (3,)");
    snprintf(args, sizeof args, "%s g=%s m=1,2,3,4 x=%s", base, px4, px4);
    expect(args, 1,
           "the file holds f32 with 2 dimensions, but parameter 'g' is vec3, in memory f32 of "
           "shape (3,)");
    snprintf(args, sizeof args, "%s m=1,2,3,4 x=%s", base, px4);
    expect(args, 1,
           "parameter 'g: vec3' of kernel 'step' is not bound (add g=X,Y,... with its 3 "
           "components, or g=FILE.npy)");
    /* a struct array of 4 components per element: the runtime's launch check would
     * catch it too; the binding says it first */
    snprintf(args, sizeof args, "run %s step ps=%s dt=0.5 g=1,2,3 m=1,2,3,4 x=%s", src, px4, pps);
    expect(args, 1,
           "but parameter 'ps' is P{pos:vec3,vel:vec3,mass:f32}[], in memory f32 of shape "
           "(N, 7)");
    const char *files[] = {src, pps, px4, pg4};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        unlink(files[i]);
}

/* gradcheck gives unbound vector, matrix and struct parameters their trailing extents and
 * checks every component: 8 particles x 7 + dt + g + m + 8 x 3 elements. */
Test(cli_v1, gradcheck_vectors_matrices_and_structs) {
    char src[64], args[512];
    temp_file(src, ".kern", particles_src);
    snprintf(args, sizeof args, "gradcheck %s step", src);
    expect(args, 0, "gradcheck step: 88 elements");
    snprintf(args, sizeof args, "gradcheck %s step g=0.1,0.2,0.3 m=1,0,0,1 --size 3", src);
    expect(args, 0, "gradcheck step: 38 elements");
    snprintf(args, sizeof args, "gradcheck %s step g=0.1,0.2", src);
    expect(args, 1, "g=0.1,0.2: vec3 has 3 components, comma-separated; got 2");
    unlink(src);
}

/* A struct of f32 and i32 fields is stored as f32 words: gradcheck leaves the integer words
 * alone (24 + 24 + 4 words, 16 of them integers' bits), and finds a wrong float gradient. */
Test(cli_v1, gradcheck_skips_integer_fields_of_structs) {
    /* P of 6 words, and of 70 (its integer words were perturbed as floats beyond 64: a
     * finite difference of 2.5e36 against the gradient, FAILED) */
    static const char *const fields[][3] = {
        {"", "", "gradcheck k: 36 elements"},
        {", m0: mat4, m1: mat4, m2: mat4, m3: mat4", " + p.m3[1][2]", "): ok"},
    };
    for (int i = 0; i < 2; i++) {
        char src[64], args[512], text[1024];
        snprintf(text, sizeof text,
                 "struct P { pos: vec3, id: i32, w: f32, flags: u32%s }\n"
                 "kernel k(ps: P[], out: P[], y: f32[]) {\n"
                 "    for i in 0..len(ps) {\n"
                 "        var p = ps[i];\n"
                 "        y[i] = p.pos.y * p.w + f32(p.id %% 7)%s;\n"
                 "        p.id = p.id * 2 + i32(p.flags %% 5);\n"
                 "        p.pos *= p.w;\n"
                 "        out[i] = p;\n"
                 "    }\n"
                 "}\n",
                 fields[i][0], fields[i][1]);
        temp_file(src, ".kern", text);
        snprintf(args, sizeof args, "gradcheck %s k --size 4", src);
        expect(args, 0, fields[i][2]);
        unlink(src);
    }
}

/* A structured .npy of i32, f32 and u32 fields binds to a struct of those fields (stored as
 * f32 words, the integers' bits kept) and is saved back with its structured dtype. */
Test(cli_v1, structured_npy_of_floats_and_ints) {
    struct rec {
        int32_t id;
        float w;
        uint32_t flags;
    } recs[3] = {{1, 2.0f, 7u}, {-5, 0.5f, 0x80000000u}, {100, -1.0f, 3u}}, back[3];
    const char *fields = "[('id', '<i4'), ('w', '<f4'), ('flags', '<u4')]";
    char src[64], pr[64], py[64], pout[64], args[1024], err[256];
    temp_file(src, ".kern",
              "struct R { id: i32, w: f32, flags: u32 }\n"
              "kernel k(rs: R[], y: f32[]) {\n"
              "    for i in 0..len(rs) {\n"
              "        y[i] = rs[i].w * f32(rs[i].id);\n"
              "        rs[i].id = rs[i].id + i32(rs[i].flags);\n"
              "    }\n"
              "}\n");
    temp_file(pr, ".npy", NULL);
    temp_file(pout, ".npy", NULL);
    cr_assert_eq(kern_npy_write_fields(pr, fields, KERN_F32, 2, (int64_t[]){3, 3, 1, 1}, recs, err,
                                       sizeof err),
                 KERN_OK, "%s", err);
    float y0[3] = {0, 0, 0};
    temp_npy_shaped(py, KERN_F32, 1, (int64_t[]){3, 1, 1, 1}, y0);
    snprintf(args, sizeof args, "run %s k rs=%s y=%s --save rs=%s", src, pr, py, pout);
    expect(args, 0, NULL);
    kern_npy a;
    cr_assert_eq(kern_npy_read(pout, &a, err, sizeof err), KERN_OK, "%s", err);
    cr_expect_str_eq(a.fields ? a.fields : "(none)", fields);
    memcpy(back, a.data, sizeof back);
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(back[i].id, (int32_t)((uint32_t)recs[i].id + recs[i].flags), "id %d", i);
        cr_expect_eq(back[i].flags, recs[i].flags);
        cr_expect_eq(back[i].w, recs[i].w);
    }
    kern_npy_free(&a);
    unlink(src), unlink(pr), unlink(py), unlink(pout);
}

/* With more elements than --max-checks, the sample still reaches every field of a struct:
 * here the spacing (7) is the struct's size, and only the last field's gradient is wrong
 * (floor's steps, as in gradcheck_detects_mismatch). */
Test(cli_v1, gradcheck_samples_every_struct_field) {
    char src[64], args[512];
    temp_file(src, ".kern",
              "struct P { pos: dvec3, vel: dvec3, mass: f64 }\n"
              "kernel jump(ps: P[], y: f64[]) {\n"
              "    for i in 0..len(ps) {\n"
              "        y[i] = ps[i].pos.x + floor(ps[i].mass * 10000000.0) * 0.0000001;\n"
              "    }\n"
              "}\n");
    snprintf(args, sizeof args, "gradcheck %s jump --size 175 --max-checks 200", src);
    run_result r = run(args);
    cr_expect_eq(r.status, 1, "%s", r.out);
    cr_expect(strstr(r.out, ": FAILED") && strstr(r.out, ", 6]: K.grad"), "%s", r.out);
    free(r.out);
    unlink(src);
}

/* A struct array from a .npy file of the struct's structured dtype, saved back with it; a
 * structured dtype of another layout is an error that shows both. */
Test(cli_v1, structured_npy_files) {
    enum { N = 3 };
    float ps[N][7];
    for (int i = 0; i < N * 7; i++)
        ps[i / 7][i % 7] = (float)i;
    const char *fields = "[('pos', '<f4', (3,)), ('vel', '<f4', (3,)), ('mass', '<f4')]";
    char src[64], pps[64], pbad[64], px[64], ops[64], args[1024], err[256];
    temp_file(src, ".kern", particles_src);
    temp_file(pps, ".npy", NULL);
    temp_file(pbad, ".npy", NULL);
    temp_file(ops, ".npy", NULL);
    cr_assert_eq(kern_npy_write_fields(pps, fields, KERN_F32, 2, (int64_t[]){N, 7, 1, 1}, ps, err,
                                       sizeof err),
                 KERN_OK, "%s", err);
    cr_assert_eq(kern_npy_write_fields(pbad, "[('pos', '<f4', (3,)), ('mass', '<f4', (4,))]",
                                       KERN_F32, 2, (int64_t[]){N, 7, 1, 1}, ps, err, sizeof err),
                 KERN_OK, "%s", err);
    float x[N][3] = {{0}};
    temp_npy_shaped(px, KERN_F32, 2, (int64_t[]){N, 3, 1, 1}, x);
    snprintf(args, sizeof args, "run %s step ps=%s dt=1 g=0,0,0 m=0,0,0,0 x=%s --save ps=%s", src,
             pps, px, ops);
    expect(args, 0, NULL);
    kern_npy a;
    cr_assert_eq(kern_npy_read(ops, &a, err, sizeof err), KERN_OK, "%s", err);
    cr_expect_str_eq(a.fields ? a.fields : "(none)", fields);
    cr_expect(a.rank == 2 && a.shape[0] == N && a.shape[1] == 7);
    for (int i = 0; i < N; i++)
        for (int c = 0; c < 3; c++) /* pos += vel * dt, dt = 1 */
            cr_expect_eq(((float *)a.data)[7 * i + c], ps[i][c] + ps[i][3 + c]);
    kern_npy_free(&a);
    snprintf(args, sizeof args, "run %s step ps=%s dt=1 g=0,0,0 m=0,0,0,0 x=%s", src, pbad, px);
    expect(args, 1,
           "the file's structured dtype [('pos', '<f4', (3,)), ('mass', '<f4', (4,))] is not the "
           "layout of parameter 'ps' (P{pos:vec3,vel:vec3,mass:f32}[]), which is [('pos', "
           "'<f4', (3,)), ('vel', '<f4', (3,)), ('mass', '<f4')]");
    snprintf(args, sizeof args, "run %s step ps=%s dt=1 g=0,0,0 m=0,0,0,0 x=%s", src, px, pps);
    expect(args, 1, "but parameter 'x' is vec3[], not a struct");
    snprintf(args, sizeof args, "gradcheck %s step ps=%s", src, pps);
    expect(args, 0, "gradcheck step: 38 elements");
    const char *files[] = {src, pps, pbad, px, ops};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        unlink(files[i]);
}

/* ---- forward mode from the command line (reference section 11.6) ---------------------- */

/* kernc run K.jvp: y = sin(x) * a, so y.tan = cos(x) a x.tan + sin(x) a.tan; unbound
 * tangents are zero, x.tan passes through unchanged (K only reads x). */
Test(cli_grad, run_jvp_binds_tangents) {
    char src[64], px[64], pxt[64], pyt[96], py[64], args[512];
    temp_file(src, ".kern",
              "kernel k(x: f32[], y: f32[], a: f32) {\n"
              "    for i in 0..len(x) { y[i] = sin(x[i]) * a; }\n"
              "}\n");
    float x[3] = {0.5f, -1.0f, 2.0f}, xt[3] = {1.0f, 2.0f, -0.5f}, y[3], yt[3];
    temp_npy_f32(px, x, 3);
    temp_npy_f32(pxt, xt, 3);
    temp_npy_f32(py, x, 3);
    snprintf(pyt, sizeof pyt, "%s.out.npy", pxt);
    snprintf(args, sizeof args,
             "run %s k.jvp x=%s y=%s a=1.5 x.tan=%s a.tan=%s --save y.tan=%s "
             "--save y=%s",
             src, px, py, pxt, "/dev/null", pyt, py);
    run_result r = run(args); /* a.tan must be an array of length 1: /dev/null is no .npy */
    cr_expect_neq(r.status, 0, "%s", r.out);
    free(r.out);
    snprintf(args, sizeof args, "run %s k.jvp x=%s y=%s a=1.5 x.tan=%s --save y.tan=%s --save y=%s",
             src, px, py, pxt, pyt, py);
    r = run(args);
    cr_assert_eq(r.status, 0, "%s", r.out);
    free(r.out);
    read_npy_f32(pyt, yt, 3);
    read_npy_f32(py, y, 3);
    for (int i = 0; i < 3; i++) {
        cr_expect_float_eq(y[i], sinf(x[i]) * 1.5f, 1e-6, "y[%d]", i);
        cr_expect_float_eq(yt[i], cos((double)x[i]) * 1.5 * xt[i], 1e-5, "y.tan[%d]", i);
    }
    unlink(pyt);
}

/* kernc run K.grad.jvp: Hessian-vector products of three kernels with known Hessians, from
 * x.tan = v and x.grad.tan = 0 with the adjoint seed of the loss 1:
 *   loss += sum x_i^3 w_i / 3      H = diag(2 w_i x_i)
 *   loss += (sum x_i)^2            H = 2 * ones            (an atomic reduction, then a
 *                                                           serial square)
 *   loss += sum exp(x_i) x_{i+1}   H couples neighbours   (a loop over a neighbour) */
Test(cli_grad, run_grad_jvp_hessian_vector_products) {
    static const char *const srcs[3] = {
        "kernel k(x: f64[], w: f64[], loss: f64[]) {\n"
        "    for i in 0..len(x) { loss[0] += x[i] * x[i] * x[i] * w[i] / 3.0; }\n"
        "}\n",
        "kernel k(x: f64[], w: f64[], loss: f64[]) {\n"
        "    for i in 0..len(x) { w[i] = x[i]; }\n"
        "    for t in 0..1 {\n"
        "        var s: f64 = 0.0;\n"
        "        for j in 0..len(x) { s += w[j]; }\n"
        "        loss[0] += s * s;\n"
        "    }\n"
        "}\n",
        "kernel k(x: f64[], w: f64[], loss: f64[]) {\n"
        "    for i in 0..len(x) - 1 {\n"
        "        var acc: f64 = 0.0;\n"
        "        for j in 0..2 { acc += exp(x[i]) * x[i + 1] * f64(j); }\n"
        "        loss[0] += acc;\n"
        "    }\n"
        "}\n"};
    double x[4] = {0.5, -1.0, 2.0, 0.25}, w[4] = {1.0, 2.0, -1.0, 0.5};
    double v[4] = {1.0, -2.0, 0.5, 3.0};
    for (int c = 0; c < 3; c++) {
        double hv[4] = {0};
        for (int i = 0; i < 4; i++) {
            if (c == 0)
                hv[i] = 2 * w[i] * x[i] * v[i];
            else if (c == 1)
                hv[i] = 2 * (v[0] + v[1] + v[2] + v[3]);
        }
        if (c == 2) /* f = sum_i exp(x_i) x_{i+1} (acc sums j = 0, 1: one term) */
            for (int i = 0; i < 3; i++) {
                hv[i] += exp(x[i]) * x[i + 1] * v[i] + exp(x[i]) * v[i + 1];
                hv[i + 1] += exp(x[i]) * v[i];
            }
        char src[64], px[64], pw[64], pl[64], pv[64], pg[64], pz[64], pout[96], args[1024];
        temp_file(src, ".kern", srcs[c]);
        int64_t sh4[1] = {4}, sh1[1] = {1};
        double one = 1, zero4[4] = {0};
        temp_npy_shaped(px, KERN_F64, 1, sh4, x);
        temp_npy_shaped(pw, KERN_F64, 1, sh4, w);
        temp_npy_shaped(pl, KERN_F64, 1, sh1, zero4);
        temp_npy_shaped(pv, KERN_F64, 1, sh4, v);
        temp_npy_shaped(pg, KERN_F64, 1, sh1, &one);
        temp_npy_shaped(pz, KERN_F64, 1, sh4, zero4);
        snprintf(pout, sizeof pout, "%s.hv.npy", pz);
        /* K.grad reads the state K left, so K.grad.jvp takes that state and its tangent (as
         * K.jvp leaves them): the second kernel has overwritten w with x */
        snprintf(args, sizeof args,
                 "run %s k.grad.jvp x=%s w=%s loss=%s loss.grad=%s x.tan=%s x.grad=%s "
                 "x.grad.tan=%s --save x.grad.tan=%s%s%s",
                 src, px, c == 1 ? px : pw, pl, pg, pv, pz, pz, pout, c == 1 ? " w.tan=" : "",
                 c == 1 ? pv : "");
        run_result r = run(args);
        cr_assert_eq(r.status, 0, "case %d: %s", c, r.out);
        free(r.out);
        FILE *f = fopen(pout, "rb");
        cr_assert(f);
        char hdr[128];
        cr_assert_eq(fread(hdr, 1, 128, f), 128); /* the npy header of a small 1-d array */
        double got[4];
        cr_assert_eq(fread(got, sizeof(double), 4, f), 4);
        fclose(f);
        unlink(pout);
        for (int i = 0; i < 4; i++)
            cr_expect(fabs(got[i] - hv[i]) <= 1e-12 * fmax(1, fabs(hv[i])),
                      "case %d: (H v)[%d] = %.17g, want %.17g", c, i, got[i], hv[i]);
    }
}

/* gradcheck checks K.jvp too: a line of its own; a custom gradient that is wrong fails by
 * the finite differences and by the dot-product identity with the automatic K.jvp; a
 * kernel that forward mode refuses (an atomic_max loop that reads an array it writes) says
 * why and passes on K.grad alone. */
Test(cli_grad, gradcheck_checks_jvp) {
    char src[64], args[256];
    temp_file(src, ".kern",
              "kernel k(x: f32[], y: f32[], a: f32) {\n"
              "    for i in 0..len(x) { y[i] = sin(x[i]) * a + x[i] * x[i]; }\n"
              "}\n");
    snprintf(args, sizeof args, "gradcheck %s k", src);
    run_result r = run(args);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "gradcheck k.jvp: 17 elements") && strstr(r.out, "<jvp(v), w>"), "%s",
              r.out);
    free(r.out);
    temp_file(src, ".kern",
              "kernel k(x: f32[], y: f32[]) grad kg {\n"
              "    for i in 0..len(x) { y[i] = x[i] * x[i]; }\n"
              "}\n"
              "kernel kg(x: f32[], y: f32[], xg: f32[], yg: f32[]) {\n"
              "    for i in 0..len(x) { xg[i] += 3.0 * x[i] * yg[i]; yg[i] = 0.0; }\n"
              "}\n");
    snprintf(args, sizeof args, "gradcheck %s k", src);
    r = run(args);
    cr_expect_neq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "FAILED") && strstr(r.out, "gradcheck k.jvp"), "%s", r.out);
    free(r.out);
    temp_file(src, ".kern",
              "kernel k(x: f32[], hi: f32[], g: i32[], y: f32[]) {\n"
              "    for i in 0..len(x) { y[i] = x[i] * 2.0; atomic_max(hi[g[i]], y[i]); }\n"
              "}\n");
    snprintf(args, sizeof args, "gradcheck %s k", src);
    r = run(args);
    cr_expect(strstr(r.out, "gradcheck k.jvp: not checked:") &&
                  strstr(r.out, "atomic_max in a parallel loop by recomputing the loop"),
              "%s", r.out);
    free(r.out);
}

/* AOT modules carry K.jvp and K.grad.jvp: square.jvp from a built .so gives
 * y.tan = 2 x x.tan (against the formula); a kernel forward mode refuses is named with why,
 * and its module still has K and K.grad. */
Test(cli_grad, build_includes_forward_mode) {
    char src[64], so[64], args[256];
    temp_file(src, ".kern", square_src);
    temp_file(so, ".so", NULL);
    snprintf(args, sizeof args, "build %s -o %s", src, so);
    run_result r = run(args);
    cr_assert_eq(r.status, 0, "%s", r.out);
    free(r.out);
    kern_context *ctx;
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    kern_module *m;
    cr_assert_eq(kern_module_load_file(ctx, so, &m), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_kernel *j, *h;
    cr_assert_eq(kern_kernel_find(m, "square.jvp", &j), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    cr_assert_eq(kern_kernel_find(m, "square.grad.jvp", &h), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    cr_expect_eq(kern_kernel_param_count(h), 8, "x y x.grad y.grad x.tan y.tan x.grad.tan ...");
    /* --no-jvp leaves them out (K.grad stays); run refuses the option */
    char so2[64], args2[256];
    temp_file(so2, ".so", NULL);
    snprintf(args2, sizeof args2, "build %s -o %s --no-jvp", src, so2);
    r = run(args2);
    cr_assert_eq(r.status, 0, "%s", r.out);
    free(r.out);
    kern_module *m2;
    cr_assert_eq(kern_module_load_file(ctx, so2, &m2), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    kern_kernel *g2;
    cr_expect_eq(kern_kernel_find(m2, "square.grad", &g2), KERN_OK);
    cr_expect_eq(kern_kernel_find(m2, "square.jvp", &g2), KERN_ERR_NOT_FOUND);
    kern_module_release(m2);
    unlink(so2);
    snprintf(args2, sizeof args2, "run %s square --no-jvp", src);
    expect(args2, 2, "--no-jvp is an option of build only");
    float x[3] = {1.5f, -2.0f, 0.25f}, xt[3] = {1.0f, 0.5f, -4.0f}, yt[3] = {9, 9, 9}, y[3];
    int64_t n = 3;
    kern_buffer *b[4];
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, x, &b[0]), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, NULL, &b[1]), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, xt, &b[2]), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, yt, &b[3]), KERN_OK);
    kern_arg a[4] = {kern_arg_buffer(b[0]), kern_arg_buffer(b[1]), kern_arg_buffer(b[2]),
                     kern_arg_buffer(b[3])};
    cr_assert_eq(kern_launch(j, a, 4), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_buffer_read(b[3], yt, sizeof yt), KERN_OK);
    cr_assert_eq(kern_buffer_read(b[1], y, sizeof y), KERN_OK);
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(y[i], x[i] * x[i]);
        cr_expect_float_eq(yt[i], 2.0f * x[i] * xt[i], 1e-6, "y.tan[%d]", i);
    }
    kern_context_release(ctx);
    temp_file(src, ".kern",
              "kernel k(x: f32[], hi: f32[], g: i32[], y: f32[]) {\n"
              "    for i in 0..len(x) { y[i] = x[i] * 2.0; atomic_max(hi[g[i]], y[i]); }\n"
              "}\n");
    snprintf(args, sizeof args, "build %s -o %s", src, so);
    r = run(args);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "warning: no forward-mode kernel 'k.jvp' in the module") &&
                  strstr(r.out, "atomic_max in a parallel loop by recomputing the loop"),
              "%s", r.out);
    free(r.out);
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    cr_assert_eq(kern_module_load_file(ctx, so, &m), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_expect_eq(kern_kernel_find(m, "k.grad", &j), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_expect_eq(kern_kernel_find(m, "k.jvp", &j), KERN_ERR_NOT_FOUND);
    kern_context_release(ctx);
    unlink(src);
    unlink(so);
}

/* emit --emit=CODE --kernel NAME: that kernel's code alone; a name the file does not have is
 * an error, not the whole module (issue 23) */
Test(cli, emit_code_of_one_kernel) {
    char src[64], args[256];
    temp_file(src, ".kern",
              "kernel one(x: f32[]) { for i in 0..len(x) { x[i] = 1.0; } }\n"
              "kernel two(x: f32[]) { for i in 0..len(x) { x[i] = 2.0 * x[i]; } }\n");
    static const char *const kinds[] = {"llvm", "ptx", "spirv-asm"};
    for (int k = 0; k < 3; k++) {
        snprintf(args, sizeof args, "emit %s --emit=%s --kernel nosuch", src, kinds[k]);
        expect(args, 1, "no kernel named 'nosuch'");
        snprintf(args, sizeof args, "emit %s --emit=%s --kernel two", src, kinds[k]);
        run_result r = run(args);
        cr_expect_eq(r.status, 0, "%s", r.out);
        cr_expect(strstr(r.out, "kern_two__t0") && !strstr(r.out, "kern_one__t0"), "%s: %.400s",
                  kinds[k], r.out);
        free(r.out);
        snprintf(args, sizeof args, "emit %s --emit=%s --kernel two.jvp", src, kinds[k]);
        r = run(args);
        cr_expect_eq(r.status, 0, "%s", r.out);
        cr_expect(strstr(r.out, "kern_two__jvp__t0") && !strstr(r.out, "kern_two__t0\""),
                  "%s: %.400s", kinds[k], r.out);
        free(r.out);
    }
    unlink(src);
}

/* --ad-memory-budget, --ad-strategy and --verbose (docs/cli.md): the strategy a gradient
 * run took, a budget nothing fits, and the usage errors. */
Test(cli_grad, adstack_budget_options) {
    static const char walk_src[] = "kernel walk(x0: f32[], w: f32[], out: f32[]) {\n"
                                   "    for i in 0..len(x0) {\n"
                                   "        var x = x0[i];\n"
                                   "        for t in 0..len(w) {\n"
                                   "            x = 0.5 * sin(x) * w[t] + 0.4 * x;\n"
                                   "        }\n"
                                   "        out[i] = x;\n"
                                   "    }\n"
                                   "}\n";
    float x[4] = {0.1f, 0.2f, 0.3f, 0.4f}, w[400];
    for (int t = 0; t < 400; t++)
        w[t] = 1.0f + (float)(t % 3) / 3.0f;
    char src[64], px[64], pw[64], po[64], args[1024];
    temp_file(src, ".kern", walk_src);
    temp_npy_f32(px, x, 4);
    temp_npy_f32(pw, w, 400);
    temp_npy_f32(po, x, 4);
    const char *run_args = "run %s walk.grad x0=%s w=%s out=%s --threads 2 --simd=off --verbose %s";
    /* storing all: 401 floats x 2 threads (scalar code: a thread is one slot); 2K holds the
     * checkpoints (2 x 21 floats) only */
    snprintf(args, sizeof args, run_args, src, px, pw, po, "");
    expect(args, 0, "adstacks: store all");
    snprintf(args, sizeof args, run_args, src, px, pw, po, "--ad-memory-budget 2K");
    expect(args, 0, "adstacks: recompute");
    snprintf(args, sizeof args, run_args, src, px, pw, po, "--ad-strategy slots");
    expect(args, 0, "adstacks: fewer slots");
    snprintf(args, sizeof args, run_args, src, px, pw, po, "--ad-memory-budget 16");
    expect(args, 1, "the memory budget is 16 bytes");
    snprintf(args, sizeof args, "gradcheck %s walk --ad-strategy recompute", src);
    expect(args, 0, "ok");
    expect("run examples/saxpy.kern saxpy --ad-strategy sometimes", 2,
           "--ad-strategy needs auto, store, slots or recompute");
    expect("run examples/saxpy.kern saxpy --ad-memory-budget 12X", 2,
           "--ad-memory-budget needs a positive number of bytes");
    expect("run examples/saxpy.kern saxpy --ad-memory-budget 0", 2, "--ad-memory-budget");
    expect("run examples/saxpy.kern saxpy --ad-memory-budget 99999999999T", 2,
           "--ad-memory-budget");
    expect("build examples/saxpy.kern -o /dev/null --ad-strategy store", 2,
           "--ad-strategy is an option of run and gradcheck only");
    expect("gradcheck examples/saxpy.kern saxpy --verbose", 2,
           "--verbose is an option of run only");
    expect("run examples/saxpy.kern saxpy --no-ckpt", 2, "--no-ckpt is an option of build only");
    /* a module without K.grad.ckpt is smaller */
    char with[64], without[64];
    temp_file(with, ".so", NULL);
    temp_file(without, ".so", NULL);
    snprintf(args, sizeof args, "build %s -o %s --no-jvp", src, with);
    expect(args, 0, NULL);
    snprintf(args, sizeof args, "build %s -o %s --no-jvp --no-ckpt", src, without);
    expect(args, 0, NULL);
    struct stat sw, so;
    cr_assert_eq(stat(with, &sw), 0);
    cr_assert_eq(stat(without, &so), 0);
    cr_expect_lt(so.st_size, sw.st_size, "--no-ckpt: %lld bytes, without it %lld",
                 (long long)so.st_size, (long long)sw.st_size);
}

/* ---- issue 25, item 5: the command line's frictions ---------------------------------- */

/* The optimal-string-alignment distance by its definition, the whole table, as a reference
 * for kern_suggest (which bounds it and keeps three rows). */
static size_t osa_reference(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b), d[16][16];
    cr_assert(n < 16 && m < 16);
    for (size_t i = 0; i <= n; i++)
        for (size_t j = 0; j <= m; j++) {
            if (!i || !j) {
                d[i][j] = i + j;
                continue;
            }
            size_t v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            v = d[i - 1][j] + 1 < v ? d[i - 1][j] + 1 : v;
            v = d[i][j - 1] + 1 < v ? d[i][j - 1] + 1 : v;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

/* kern_suggest against the reference on random words over a small alphabet (so that near
 * words are common): the first name at the least distance, within a third of the longer
 * length; nothing for an exact match. */
Test(cli, suggest_matches_its_definition) {
    unsigned seed = 25;
    for (int trial = 0; trial < 3000; trial++) {
        char words[6][12];
        const char *names[5];
        for (int w = 0; w < 6; w++) {
            seed = seed * 1103515245u + 12345u;
            int len = 1 + (int)(seed >> 16) % 10;
            for (int c = 0; c < len; c++) {
                seed = seed * 1103515245u + 12345u;
                words[w][c] = "abcd"[(seed >> 16) % 4];
            }
            words[w][len] = 0;
            if (w < 5)
                names[w] = words[w];
        }
        const char *word = words[5], *want = NULL;
        size_t best = 0;
        bool exact = false;
        for (int i = 0; i < 5; i++) {
            size_t d = osa_reference(word, names[i]), n = strlen(word), m = strlen(names[i]);
            exact |= d == 0;
            if (d > 0 && d <= (n > m ? n : m) / 3 && (!want || d < best)) {
                want = names[i];
                best = d;
            }
        }
        const char *got = kern_suggest(word, names, 5);
        cr_assert_eq(got, exact ? NULL : want, "'%s' among %s %s %s %s %s: got '%s', want '%s'",
                     word, names[0], names[1], names[2], names[3], names[4], got ? got : "-",
                     exact  ? "-"
                     : want ? want
                            : "-");
    }
    const char *const cmds[] = {"check", "emit", "build", "run", "gradcheck"};
    cr_expect_str_eq(kern_suggest("rn", cmds, 5), "run");
    cr_expect_str_eq(kern_suggest("gradchek", cmds, 5), "gradcheck");
    cr_expect_str_eq(kern_suggest("ebmit", cmds, 5), "emit"); /* a swap is one edit */
    cr_expect_null(kern_suggest("x", cmds, 5));
    cr_expect_null(kern_suggest("", cmds, 5));
    cr_expect_null(kern_suggest("frobnicate", cmds, 5));
    const char *const with_null[] = {NULL, "steps"};
    cr_expect_str_eq(kern_suggest("stepz", with_null, 2), "steps");
    /* a UTF-8 character is one edit; bytes that are not UTF-8 count one each */
    const char *const names[] = {"saxpy", "run"};
    cr_expect_str_eq(kern_suggest("s\xc3\xa1xpy", names, 2), "saxpy");
    cr_expect_str_eq(kern_suggest("r\xc3\xbcn", names, 2), "run");
    cr_expect_null(kern_suggest("r\xc3\xbc\xc3\xbc", names, 2));
    cr_expect_str_eq(kern_suggest("sax\xffy", names, 2), "saxpy");
    cr_expect_null(kern_suggest("\xbc\xbc\xbc\xff", names, 2));
}

/* Commands, options, targets and --emit kinds. */
Test(cli, did_you_mean) {
    static const char *const cases[][3] = {
        {"rn examples/saxpy.kern", "2", "unknown command 'rn' (did you mean 'run'?)"},
        {"gradchek examples/saxpy.kern", "2", "(did you mean 'gradcheck'?)"},
        {"frobnicate x.kern", "2", "unknown command 'frobnicate' (commands: check, emit"},
        {"run examples/saxpy.kern saxpy --thread 2", "2",
         "unknown option '--thread' (did you mean '--threads'?)"},
        {"run examples/saxpy.kern saxpy --thread=2", "2",
         "unknown option '--thread=2' (did you mean '--threads'?)"},
        {"run examples/saxpy.kern saxpy --step-strat 1", "2", "(did you mean '--step-start'?)"},
        {"--verison", "2", "unknown option '--verison' (did you mean '--version'?)"},
        {"--threads 2 run examples/saxpy.kern", "2", "'--threads': the command comes first"},
        {"check examples/saxpy.kern --target=cdua", "2",
         "unknown target 'cdua' (did you mean 'cuda'?)"},
        {"emit examples/saxpy.kern --emit=ptz", "2",
         "unknown --emit kind 'ptz' (did you mean 'ptx'?)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect(cases[i][0], atoi(cases[i][1]), cases[i][2]);
    /* nothing near: no suggestion */
    const char *far[] = {"frobnicate x.kern", "run examples/saxpy.kern saxpy --zzzzzz"};
    for (size_t i = 0; i < sizeof far / sizeof *far; i++) {
        run_result r = run(far[i]);
        cr_expect(r.status == 2 && !strstr(r.out, "did you mean"), "%s: %s", far[i], r.out);
        free(r.out);
    }
}

/* The names of a file: kernels (K.grad keeps its suffix) and parameters, in run,
 * gradcheck and emit. */
Test(cli, did_you_mean_names) {
    static const char *const cases[][3] = {
        {"run examples/simulate.kern simulat", "1",
         "no kernel named 'simulat' in examples/simulate.kern (did you mean 'simulate'?); "
         "kernels: simulate"},
        {"run examples/simulate.kern simulat.grad", "1", "(did you mean 'simulate.grad'?)"},
        {"run examples/simulate.kern simulate x0=examples/data/x0.npy w=examples/data/w.npy "
         "out=examples/data/out.npy stepz=3",
         "1", "kernel 'simulate' has no parameter named 'stepz' (did you mean 'steps'?)"},
        {"run examples/simulate.kern simulate x0=examples/data/x0.npy w=examples/data/w.npy "
         "out=examples/data/out.npy steps=3 --save outt=/dev/null",
         "1", "--save outt: kernel 'simulate' has no parameter named 'outt' (did you mean 'out'?)"},
        {"run examples/simulate.kern simulate --steps 1..3 --step-arg stepz", "1",
         "--step-arg stepz: kernel 'simulate' has no parameter named 'stepz' (did you mean "
         "'steps'?)"},
        {"gradcheck examples/simulate.kern simulat", "1", "(did you mean 'simulate'?)"},
        {"emit examples/simulate.kern --emit=ir --kernel simulat", "1",
         "(did you mean 'simulate'?)"},
        {"emit examples/simulate.kern --emit=ir-grad --kernel simulat", "1",
         "(did you mean 'simulate'?)"},
        {"emit examples/simulate.kern --emit=llvm --kernel simulat.grad", "1",
         "(did you mean 'simulate.grad'?)"},
        {"emit examples/simulate.kern --emit=ast --kernel simulat", "1",
         "no kernel or func named 'simulat' in examples/simulate.kern (did you mean 'simulate'?)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect(cases[i][0], atoi(cases[i][1]), cases[i][2]);
    /* gradcheck's parameters (a small kernel: gradcheck compiles K in two precisions) */
    char src[64], args[256];
    temp_file(src, ".kern",
              "kernel scale(values: f32[], out: f32[], factor: f32, step: i32) {\n"
              "    for i in 0..len(values) {\n"
              "        out[i] = values[i] * factor;\n"
              "    }\n"
              "}\n");
    snprintf(args, sizeof args, "gradcheck %s scale valuez=1", src);
    expect(args, 1, "no parameter named 'valuez' (did you mean 'values'?)");
    snprintf(args, sizeof args, "gradcheck %s scale --steps 2 --step-arg stepp", src);
    expect(args, 1,
           "--step-arg stepp: kernel 'scale' has no parameter named 'stepp' (did you "
           "mean 'step'?)");
    unlink(src);
    run_result r = run("run examples/simulate.kern qqqqqq");
    cr_expect(r.status == 1 && !strstr(r.out, "did you mean"), "%s", r.out);
    free(r.out);
}

/* Empty names, a name of 200 characters and UTF-8 names: clear errors, never a crash. */
Test(cli, hostile_names) {
    char long_name[201], args[600];
    memset(long_name, 'q', 200);
    long_name[200] = 0;
    expect("''", 2, "unknown command ''");
    expect("run examples/saxpy.kern ''", 1, "no kernel named '' in examples/saxpy.kern");
    expect("run examples/saxpy.kern saxpy =1", 2, "'=1' is not of the form NAME=VALUE");
    expect("run examples/heat.kern heat --steps 1..2 --step-arg ''", 2, "--step-arg needs a value");
    snprintf(args, sizeof args, "%s examples/saxpy.kern", long_name);
    expect(args, 2, long_name);
    snprintf(args, sizeof args, "run examples/saxpy.kern saxpy --%s", long_name);
    expect(args, 2, long_name);
    snprintf(args, sizeof args, "run examples/saxpy.kern %s", long_name);
    expect(args, 1, long_name);
    snprintf(args, sizeof args,
             "run examples/saxpy.kern saxpy a=1 x=examples/data/x0.npy y=examples/data/x0.npy "
             "%s=1",
             long_name);
    expect(args, 1, long_name);
    snprintf(args, sizeof args, "gradcheck examples/saxpy.kern %s", long_name);
    expect(args, 1, long_name);
    /* a 200-character name one edit from a kernel's is still suggested */
    char src[64], ksrc[512];
    snprintf(ksrc, sizeof ksrc, "kernel %s(x: f32[]) {\n    x[0] = 1.0;\n}\n", long_name);
    temp_file(src, ".kern", ksrc);
    long_name[100] = 'r';
    snprintf(args, sizeof args, "run %s %s", src, long_name);
    run_result r = run(args);
    long_name[100] = 'q';
    char want[300];
    snprintf(want, sizeof want, "(did you mean '%s'?)", long_name);
    cr_expect(r.status == 1 && strstr(r.out, want), "%s", r.out);
    free(r.out);
    unlink(src);
    /* UTF-8: a character is one edit ('sáxpy' is one from 'saxpy'); 'ü' is near nothing */
    expect("run examples/saxpy.kern sáxpy", 1,
           "no kernel named 'sáxpy' in examples/saxpy.kern "
           "(did you mean 'saxpy'?)");
    expect("run examples/saxpy.kern saxpy a=1 x=examples/data/x0.npy y=examples/data/x0.npy ü=2", 1,
           "no parameter named 'ü'");
    expect("rün examples/saxpy.kern", 2, "(did you mean 'run'?)");
    expect("check examples/saxpy.kern --tärget=cpu", 2, "(did you mean '--target'?)");
}

Test(cli, help_command) {
    const char *cmds[][2] = {{"help run", "usage: kernc run"},
                             {"help gradcheck", "--steps A..B"},
                             {"help check", "usage: kernc check"},
                             {"help", "usage: kernc COMMAND"},
                             {"help help", "usage: kernc COMMAND"}};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
        expect(cmds[i][0], 0, cmds[i][1]);
    run_result r = run("help run");
    cr_expect(!strstr(r.out, "usage: kernc COMMAND"), "help run is run's help:\n%s", r.out);
    free(r.out);
    expect("help rn", 2, "unknown command 'rn' (did you mean 'run'?)");
    expect("frob --help", 2, "unknown command 'frob'");
    expect("help run check", 2, "help: one COMMAND at most");
}

/* run and gradcheck without KERNEL list the file's kernels with their parameters. */
Test(cli, run_without_kernel_lists_kernels) {
    run_result r = run("run examples/heat.kern");
    cr_expect(r.status == 2 && strstr(r.out, "run: missing KERNEL") &&
                  strstr(r.out, "  heat(u: f32[,], nograd k: f32[], t: i32)\n"),
              "%s", r.out);
    free(r.out);
    char src[64], args[256];
    temp_file(src, ".kern",
              "struct P { pos: vec3, m: f32 }\n"
              "kernel first(x: f32[]) {\n    x[0] = 1.0;\n}\n"
              "func helper(v: f32) -> f32 {\n    return v;\n}\n"
              "kernel second(ps: P[], nograd g: vec3, n: i64) {\n    ps[0].m = g.x;\n}\n");
    snprintf(args, sizeof args, "gradcheck %s", src);
    r = run(args);
    cr_expect(r.status == 2 && strstr(r.out, "gradcheck: missing KERNEL") &&
                  strstr(r.out, "  first(x: f32[])\n") &&
                  strstr(r.out, "  second(ps: P[], nograd g: vec3, n: i64)\n") &&
                  !strstr(r.out, "helper"),
              "%s", r.out);
    free(r.out);
    unlink(src);
    temp_file(src, ".kern", "const A = 1;\n");
    snprintf(args, sizeof args, "run %s", src);
    expect(args, 2, "has no kernels");
    unlink(src);
    temp_file(src, ".kern", "kernel k(x: f32[]) {\n    x[0] = ;\n}\n");
    snprintf(args, sizeof args, "run %s", src);
    expect(args, 1, ":2:12: error:");
    unlink(src);
    expect("run /no/such/file.kern", 3, "cannot read '/no/such/file.kern'");
}

#include <llvm/Config/llvm-config.h>

/* --version names kern's version, the LLVM it was built with and every target's state. */
Test(cli, version_names_llvm_and_targets) {
    run_result r = run("--version");
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "kernc " KERN_PROJECT_VERSION) != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "LLVM " LLVM_VERSION_STRING "\n") != NULL, "%s", r.out);
    size_t n;
    const kern_target *const *t = kern_target_list(&n);
    for (size_t i = 0; i < n; i++) {
        char line[128];
        bool code = kc_codegen_find(t[i]->name) != NULL;
        snprintf(line, sizeof line, "  %-7s %s", t[i]->name,
                 !code                                   ? "not in this build"
                 : kern_backend_available(t[i]->backend) ? "code and device"
                                                         : "code (");
        cr_expect(strstr(r.out, line) != NULL, "no '%s' in:\n%s", line, r.out);
    }
    cr_expect(strstr(r.out, "  cpu     code and device") != NULL, "%s", r.out);
    free(r.out);
}

/* heat.kern's recurrence for t = t0 .. t1-1, in f64. */
static void heat_reference(double *u, const float *k, int rows, int n, int t0, int t1) {
    for (int t = t0; t < t1; t++)
        for (int i = 0; i < n; i++) {
            const double *p = u + (t - 1) * n;
            u[t * n + i] = i == 0 || i == n - 1
                               ? p[i]
                               : p[i] + 0.25 * k[i] * (p[i - 1] - 2.0 * p[i] + p[i + 1]);
        }
    (void)rows;
}

/* --steps A..B and --step-start S: a time loop that reads row t - 1 starts at t = 1 (run,
 * its gradient, gradcheck of examples/heat.kern and particles.kern). */
Test(cli_grad, steps_from_a_start) {
    enum { T = 6, N = 7 };
    float u[T * N] = {0}, kk[N];
    double ref[T * N];
    for (int i = 0; i < N; i++) {
        u[i] = (float)((i * 37) % 11) / 11.0f;
        kk[i] = 0.5f + 0.1f * (float)i;
    }
    for (int i = 0; i < T * N; i++)
        ref[i] = u[i];
    heat_reference(ref, kk, T, N, 1, T);
    char pu[64], pk[64], out[64], args[1024];
    temp_npy_2d(pu, u, T, N);
    temp_npy_f32(pk, kk, N);
    temp_file(out, ".npy", NULL);
    const char *forms[] = {"--steps 1..6", "--steps 5 --step-start 1", "--step-start=1 --steps=5"};
    for (size_t f = 0; f < sizeof forms / sizeof *forms; f++) {
        snprintf(args, sizeof args,
                 "run examples/heat.kern heat u=%s k=%s %s --step-arg t --save u=%s --time", pu, pk,
                 forms[f], out);
        expect(args, 0, "(5 launches");
        float got[T * N];
        read_npy_f32(out, got, T * N);
        for (int i = 0; i < T * N; i++)
            cr_expect(fabs(got[i] - ref[i]) <= 1e-6, "%s: u[%d, %d] = %g, want %g", forms[f], i / N,
                      i % N, (double)got[i], ref[i]);
    }
    /* from t = 0 it reads row -1: the error says where the steps started */
    snprintf(args, sizeof args, "run examples/heat.kern heat u=%s k=%s --steps 5 --step-arg t", pu,
             pk);
    run_result r = run(args);
    cr_expect(r.status == 1 && strstr(r.out, "index -1 out of bounds") &&
                  strstr(r.out, "(the steps ran t = 0, 1, ...; --steps A..B"),
              "%s", r.out);
    free(r.out);
    /* K.grad from t = 1: x[t + 1] = sin(x[t]) a + x[t] for t = 1 .. S-1; row 0 and its
     * adjoint are never touched */
    enum { S = 4, M = 3 };
    const double a = 0.75;
    float x[(S + 1) * M] = {0}, g[(S + 1) * M] = {0};
    double xr[S + 1][M], gr[S + 1][M];
    for (int i = 0; i < M; i++) {
        x[i] = 9.0f;                       /* row 0: never read */
        x[M + i] = 0.3f * (float)i - 0.2f; /* row 1: the state the steps start from */
        g[i] = 0.5f;                       /* row 0's adjoint: never changed */
        g[S * M + i] = 1.0f + (float)i;
    }
    for (int t = 0; t <= S; t++)
        for (int i = 0; i < M; i++) {
            xr[t][i] = x[t * M + i];
            gr[t][i] = g[t * M + i];
        }
    double ga = 0;
    for (int t = 1; t < S; t++)
        for (int i = 0; i < M; i++)
            xr[t + 1][i] = sin(xr[t][i]) * a + xr[t][i];
    for (int t = S - 1; t >= 1; t--)
        for (int i = 0; i < M; i++) {
            gr[t][i] += gr[t + 1][i] * (cos(xr[t][i]) * a + 1);
            ga += gr[t + 1][i] * sin(xr[t][i]);
            gr[t + 1][i] = 0;
        }
    char src[64], px[64], pg[64], og[64], oga[64];
    temp_file(src, ".kern", steps_src);
    temp_npy_2d(px, x, S + 1, M);
    temp_npy_2d(pg, g, S + 1, M);
    temp_file(og, ".npy", NULL);
    temp_file(oga, ".npy", NULL);
    snprintf(args, sizeof args,
             "run %s step.grad x=%s a=0.75 x.grad=%s --steps 1..%d --step-arg t --save x.grad=%s "
             "--save a.grad=%s",
             src, px, pg, S, og, oga);
    expect(args, 0, NULL);
    float rg[(S + 1) * M], rga;
    read_npy_f32(og, rg, (S + 1) * M);
    read_npy_f32(oga, &rga, 1);
    for (int t = 0; t <= S; t++)
        for (int i = 0; i < M; i++)
            cr_expect(fabs(rg[t * M + i] - gr[t][i]) <= 1e-5 * (1 + fabs(gr[t][i])),
                      "x.grad[%d, %d] = %g, want %g", t, i, (double)rg[t * M + i], gr[t][i]);
    cr_expect(fabs(rga - ga) <= 1e-5 * (1 + fabs(ga)), "a.grad = %g, want %g", (double)rga, ga);
    /* gradcheck of the examples that need t >= 1 (the issue's `gradcheck heat.kern heat`) */
    expect("gradcheck examples/heat.kern heat --steps 1..8 --step-arg t", 0,
           "gradcheck heat: 64 elements");
    expect("gradcheck examples/particles.kern step --size 4 --steps 1..4 --step-arg t", 0, ": ok");
    expect("gradcheck examples/heat.kern heat", 1, "--steps A..B --step-arg NAME");
    /* usage errors */
    static const char *const bad[][2] = {
        {"--steps 3..3 --step-arg t", "--steps needs N (a positive integer up to 2^24) or A..B"},
        {"--steps 5..2 --step-arg t", "got '5..2'"},
        {"--steps 1.. --step-arg t", "got '1..'"},
        {"--steps ..4 --step-arg t", "got '..4'"},
        {"--steps -1..3 --step-arg t", "got '-1..3'"},
        {"--steps 1..2..3 --step-arg t", "got '1..2..3'"},
        {"--steps 0..16777217 --step-arg t", "at most 2^24 steps"},
        {"--steps 1..2147483648 --step-arg t", "B < 2^31"},
        {"--step-start 1", "--step-start S goes with --steps N"},
        {"--step-start 1 --steps 1..3 --step-arg t", "--step-start and --steps A..B both"},
        {"--step-start -1 --steps 3 --step-arg t", "--step-start needs a non-negative integer"},
        {"--step-start 2147483647 --steps 2 --step-arg t", "must be below 2^31"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(args, sizeof args, "run examples/heat.kern heat %s", bad[i][0]);
        expect(args, 2, bad[i][1]);
    }
    expect("check examples/heat.kern --step-start 1", 2,
           "--step-start is an option of run and gradcheck only");
    const char *files[] = {pu, pk, out, src, px, pg, og, oga};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        unlink(files[i]);
}

#include <pty.h>

/* kernc with a pseudo-terminal as its standard output and error, as in an interactive
 * shell (the terminal turns "\n" into "\r\n"). */
static run_result run_pty(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && exec '%s' %s", KERN_SOURCE_ROOT, KERNC_PATH, args);
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    cr_assert(pid >= 0, "forkpty failed");
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    kern_buf b = {0};
    char tmp[4096];
    ssize_t n;
    while ((n = read(master, tmp, sizeof tmp)) > 0) /* EIO once the child has gone */
        buf_putn(&b, tmp, (size_t)n);
    close(master);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    run_result r = {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), buf_take(&b)};
    if (!r.out)
        r.out = strdup("");
    return r;
}

static const char *const spin_src = "kernel spin(x: f32[], n: i32, t: i32) {\n"
                                    "    for i in 0..len(x) {\n"
                                    "        var v = x[i] + f32(t);\n"
                                    "        var j = 0;\n"
                                    "        while j < n {\n"
                                    "            v = v * 0.999 + 0.001;\n"
                                    "            j = j + 1;\n"
                                    "        }\n"
                                    "        x[i] = v;\n"
                                    "    }\n"
                                    "}\n";

/* $KERNC_PROGRESS=0 reports from the start, also into a pipe: one line per report and a
 * last line; on a terminal one line rewritten in place and erased at the end. */
Test(cli, progress_when_asked) {
    char src[64], px[64], args[512];
    float x[16] = {0};
    temp_file(src, ".kern", spin_src);
    temp_npy_f32(px, x, 16);
    snprintf(args, sizeof args, "run %s spin x=%s n=10 --steps 2..7 --step-arg t", src, px);
    setenv("KERNC_PROGRESS", "0", 1);
    run_result r = run(args);
    cr_expect(r.status == 0 && strstr(r.out, "kernc run: spin: compiling, 0 s\n") &&
                  strstr(r.out, "kernc run: spin: done in ") && strstr(r.out, " s (5 steps)\n") &&
                  !strstr(r.out, "\033"),
              "%s", r.out);
    free(r.out);
    r = run_pty(args);
    cr_expect(r.status == 0 && strstr(r.out, "\r\033[Kkernc run: spin: compiling, 0 s\r\033[K") &&
                  !strstr(r.out, "done in") && strstr(r.out, "x: f32[16] = "),
              "%s", r.out);
    free(r.out);
    setenv("KERNC_PROGRESS", "off", 1);
    r = run_pty(args);
    cr_expect(r.status == 0 && !strstr(r.out, "kernc run:"), "%s", r.out);
    free(r.out);
    setenv("KERNC_PROGRESS", "soon", 1);
    r = run(args);
    cr_expect(r.status == 0 && strstr(r.out, "$KERNC_PROGRESS='soon' is neither 'off' nor") &&
                  !strstr(r.out, "kernc run: spin"),
              "%s", r.out);
    free(r.out);
    unsetenv("KERNC_PROGRESS");
    /* a short run on a terminal says nothing */
    r = run_pty(args);
    cr_expect(r.status == 0 && !strstr(r.out, "kernc run:"), "%s", r.out);
    free(r.out);
    unlink(src);
    unlink(px);
}

/* By default a run past 1 s reports its steps when standard error is a terminal, and
 * stays silent into a pipe. The run is sized from a measured launch to last about 1.5 s. */
Test(cli, progress_on_a_terminal_after_a_second) {
    unsetenv("KERNC_PROGRESS");
    char src[64], px[64], args[512];
    float x[64] = {0};
    temp_file(src, ".kern", spin_src);
    temp_npy_f32(px, x, 64);
    const long n0 = 100000;
    snprintf(args, sizeof args, "run %s spin x=%s n=%ld t=0 --threads 1 --time", src, px, n0);
    run_result r = run(args);
    const char *at = strstr(r.out, ", run ");
    double ms = at ? atof(at + 6) : 0;
    cr_assert(r.status == 0 && ms > 0, "%s", r.out);
    free(r.out);
    double n = (double)n0 * 300.0 / ms; /* five launches of 0.3 s */
    /* a busier machine at the calibration than now could make it shorter: then longer */
    for (int attempt = 0;; attempt++, n *= 2) {
        snprintf(args, sizeof args,
                 "run %s spin x=%s n=%.0f --threads 1 --steps 5 --step-arg t --time", src, px,
                 n < INT32_MAX ? n : INT32_MAX);
        r = run_pty(args);
        at = strstr(r.out, ", run ");
        cr_assert(r.status == 0 && at, "%s", r.out);
        if (atof(at + 6) > 1000)
            break;
        cr_assert(attempt < 3, "not past 1 s: %s", r.out);
        free(r.out);
    }
    const char *report = strstr(r.out, "\r\033[Kkernc run: spin: step ");
    const char *last = report;
    for (const char *s = report; s; s = strstr(s + 1, "\r\033[Kkernc run: spin: step "))
        last = s;
    cr_expect(report && strstr(report, " of 5 (t = ") && !strstr(r.out, "done in"), "%s", r.out);
    /* the last report is erased before anything else is written */
    cr_expect(last && strstr(last + 4, "\r\033[K") &&
                  strstr(last + 4, "\r\033[K") < strstr(last, "x: f32[64]"),
              "%s", r.out);
    free(r.out);
    r = run(args);
    at = strstr(r.out, ", run ");
    cr_expect(r.status == 0 && at && !strstr(r.out, "kernc run: spin: step") &&
                  !strstr(r.out, "\033"),
              "%s", r.out);
    cr_expect(at && atof(at + 6) > 900, "the silent run was short: %s", r.out);
    free(r.out);
    unlink(src);
    unlink(px);
}
