/* test_cli.c - the kernc command line: exit statuses, options, outputs (docs/cli.md).
 * Runs the built kernc binary (KERNC_PATH) through the shell. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/util.h"

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
    cr_expect_eq(r.status, status, "kernc %s: status %d, expected %d; output:\n%s", args,
                 r.status, status, r.out);
    if (needle)
        cr_expect(strstr(r.out, needle) != NULL, "kernc %s: output lacks '%s':\n%s", args,
                  needle, r.out);
    free(r.out);
}

Test(cli, version_and_help) {
    expect("--version", 0, "kernc 0.");
    expect("--help", 0, "usage: kernc");
    expect("check --help", 0, "usage: kernc");
    expect("", 2, "usage: kernc");
}

Test(cli, usage_errors) {
    expect("frobnicate x.kern", 2, "unknown command 'frobnicate'");
    expect("check", 2, "missing FILE.kern");
    expect("check tests/golden/ir/saxpy.kern --bogus", 2, "unknown option '--bogus'");
    expect("emit tests/golden/ir/saxpy.kern", 2, "--emit=WHAT is required");
    expect("emit tests/golden/ir/saxpy.kern --emit=nonsense", 2, "unknown --emit kind");
    expect("emit tests/golden/ir/saxpy.kern --emit=ptx", 2, "not available");
    expect("emit tests/golden/ir/saxpy.kern --emit=llvm --target=vulkan", 2, "not available");
    expect("check tests/golden/ir/saxpy.kern --ad-stack-size=0", 2, "--ad-stack-size");
    expect("check tests/golden/ir/saxpy.kern --ad-stack-size abc", 2, "--ad-stack-size");
    expect("check tests/golden/ir/saxpy.kern --target=gpu", 2, "unknown target 'gpu'");
    expect("check tests/golden/ir/saxpy.kern --emit", 2, "needs a value");
    expect("gradcheck tests/golden/ir/saxpy.kern saxpy", 2, "not available");
    expect("run tests/golden/ir/saxpy.kern", 2, "missing KERNEL");
    expect("run tests/golden/ir/saxpy.kern saxpy a", 2, "not of the form NAME=VALUE");
    expect("run tests/golden/ir/saxpy.kern saxpy a=1 a=2", 2, "bound twice");
    expect("run tests/golden/ir/saxpy.kern saxpy --target=cuda", 2, "not available");
    expect("build tests/golden/ir/saxpy.kern -o /tmp/x.so", 2, "--target=T is required");
    expect("build tests/golden/ir/saxpy.kern --target=cpu", 2, "-o OUT is required");
}

Test(cli, run_errors) {
    expect("run tests/golden/ir/saxpy.kern saxpy", 1, "parameter 'a: f32' of kernel 'saxpy' "
                                                     "is not bound");
    expect("run tests/golden/ir/saxpy.kern nope a=1", 1, "no kernel named 'nope'");
    expect("run tests/golden/ir/saxpy.kern saxpy a=x1 x=a.npy y=b.npy", 1, "a=x1: not a number");
    expect("run tests/golden/ir/saxpy.kern saxpy a=1 x=/no/such.npy y=/no/such.npy", 3,
           "x=/no/such.npy");
    expect("run tests/golden/ir/saxpy.kern saxpy a=1 b=2", 1, "no parameter named 'b'");
    expect("run tests/golden/ir/saxpy.kern saxpy a=1 --save a=o.npy", 1,
           "only arrays can be saved");
    expect("run tests/golden/ir/saxpy.kern saxpy.grad", 1, "gradient kernels are not available");
    expect("run tests/golden/ir/types_casts.kern mix a=1", 3, "not bound");
}

Test(cli, io_errors) {
    expect("check no/such/file.kern", 3, "cannot read 'no/such/file.kern'");
    expect("emit tests/golden/ir/saxpy.kern --emit=ir -o /no/such/dir/out.ir", 3,
           "cannot write");
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
