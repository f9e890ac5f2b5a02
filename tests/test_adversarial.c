/* test_adversarial.c - kern as a careless or hostile user meets it (issue 9): each case is
 * a mistake or an attack, and asserts the clear error (status, and the words that name the
 * problem) or the right result. Classes: sources, bindings, outputs, modules, the C API
 * misused, limits. docs/testing.md lists the classes; a new hardening fix adds its case.
 *
 * The command-line cases run kernc through /bin/sh in a fresh directory holding copies of
 * examples/simulate.kern (s.kern) and its data (x0.npy, w.npy, out.npy); `setup` prepares
 * more files there, `post` is a shell test on the directory afterwards (exit 0 = pass). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/util.h"
#include "../include/kern.h"

#ifndef KERNC_PATH
#define KERNC_PATH "kernc"
#endif

typedef struct cli_case {
    const char *name;
    const char *setup; /* shell commands run first in the directory, or NULL */
    const char *args;  /* kernc's arguments (shell words) */
    int status;
    const char *needle; /* in stdout + stderr, or NULL */
    const char *post;   /* a shell test run afterwards, or NULL */
} cli_case;

/* The run of one case; returns whether it held, printing why not. */
static bool run_case(const cli_case *c) {
    char dir[] = "/tmp/kern-adv-XXXXXX";
    cr_assert(mkdtemp(dir));
    kern_buf cmd = {0};
    buf_printf(&cmd,
               "cd '%s' && cp '%s/examples/simulate.kern' s.kern && cp '%s/examples/data/x0.npy' "
               "'%s/examples/data/w.npy' '%s/examples/data/out.npy' . && K='%s' && E='%s' && "
               "export K E && { %s ; } >/dev/null 2>&1 && { \"$K\" %s ; } 2>&1",
               dir, KERN_SOURCE_ROOT, KERN_SOURCE_ROOT, KERN_SOURCE_ROOT, KERN_SOURCE_ROOT,
               KERNC_PATH, KERN_SOURCE_ROOT, c->setup ? c->setup : "true", c->args);
    FILE *p = popen(cmd.data, "r");
    cr_assert(p);
    kern_buf out = {0};
    char tmp[4096];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, p)) > 0)
        buf_putn(&out, tmp, n);
    int st = pclose(p);
    int status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    buf_putc(&out, '\0');
    bool ok = status == c->status && (!c->needle || strstr(out.data, c->needle));
    if (!ok)
        cr_log_error("case '%s': kernc %s: status %d (expected %d), output%s%s%s:\n%s", c->name,
                     c->args, status, c->status, c->needle ? " lacks '" : "",
                     c->needle ? c->needle : "", c->needle ? "'" : "", out.data);
    if (ok && c->post) {
        kern_buf post = {0};
        buf_printf(&post, "cd '%s' && E='%s' && { %s ; }", dir, KERN_SOURCE_ROOT, c->post);
        int ps = system(post.data);
        if (ps != 0) {
            ok = false;
            cr_log_error("case '%s': the check afterwards failed: %s\noutput:\n%s", c->name,
                         c->post, out.data);
        }
        buf_free(&post);
    }
    kern_buf rm = {0};
    buf_printf(&rm, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
    cr_assert_eq(system(rm.data), 0);
    buf_free(&rm);
    buf_free(&out);
    buf_free(&cmd);
    return ok;
}

static void run_table(const cli_case *cases, size_t n) {
    int failed = 0;
    for (size_t i = 0; i < n; i++)
        if (!run_case(&cases[i]))
            failed++;
    cr_expect_eq(failed, 0, "%d of %zu cases failed (logged above)", failed, n);
}

#define RUN_S "run s.kern simulate x0=x0.npy w=w.npy out=out.npy steps=16"

/* ---- outputs: --save, emit -o, build -o, stdout -------------------------------------- */

static const cli_case output_cases[] = {
    {"emit to a full disk", NULL, "emit s.kern --emit=ir -o /dev/full", 3,
     "cannot write '/dev/full': No space left on device", NULL},
    {"stdout on a full disk", NULL, "emit s.kern --emit=ir >/dev/full", 3,
     "cannot write the standard output", NULL},
    {"--version on a full disk", NULL, "--version >/dev/full", 3,
     "cannot write the standard output", NULL},
    {"--help on a full disk", NULL, "--help >/dev/full", 3, "cannot write the standard output",
     NULL},
    {"printed arrays on a full disk", NULL, RUN_S " >/dev/full", 3,
     "cannot write the standard output", NULL},
    {"--save to a full disk", NULL, RUN_S " --save out=/dev/full", 3,
     "--save out=/dev/full: cannot write '/dev/full': No space left on device", NULL},
    {"build to a full disk", NULL, "build s.kern -o /dev/full", 3, "cannot write '/dev/full'",
     NULL},
    {"vulkan module to a full disk", NULL, "build s.kern --target=vulkan -o /dev/full", 3,
     "cannot write '/dev/full'", NULL},
    {"a symbolic link is written through", "echo old > real.txt && ln -s real.txt link.txt",
     "emit s.kern --emit=ir -o link.txt", 0, NULL,
     "test -L link.txt && grep -q 'kernel @simulate' real.txt"},
    {"a dangling link creates its target", "ln -s made.txt dangling",
     "emit s.kern --emit=ir -o dangling", 0, NULL, "test -L dangling && test -s made.txt"},
    {"a link into another directory", "mkdir sub && ln -s sub/t.npy l.npy",
     RUN_S " --save out=l.npy", 0, NULL, "test -L l.npy && test -s sub/t.npy"},
    {"a FIFO is written in place", "mkfifo ff && (cat ff > got.txt &)",
     "emit s.kern --emit=ir -o ff", 0, NULL,
     "sleep 0.2; test -p ff && grep -q 'kernel @simulate' got.txt"},
    {"/dev/null stays a device", NULL, "emit s.kern --emit=ir -o /dev/null", 0, NULL,
     "test -c /dev/null"},
    {"/dev/stdout is written in place", NULL, "emit s.kern --emit=ir -o /dev/stdout", 0,
     "kernel @simulate", NULL},
    {"/dev/stdout into a file appends", "echo first > f.txt",
     "emit s.kern --emit=ir -o /dev/stdout >>f.txt", 0, NULL,
     "head -1 f.txt | grep -qx first && grep -q 'kernel @simulate' f.txt"},
    {"a directory is refused", "mkdir d", "emit s.kern --emit=ir -o d", 3,
     "cannot write 'd': Is a directory", "test -d d"},
    {"a missing directory", NULL, "emit s.kern --emit=ir -o nodir/x.ir", 3,
     "cannot write 'nodir/x.ir': No such file or directory", NULL},
    {"a directory no one may write", NULL, "emit s.kern --emit=ir -o /sys/x.ir", 3,
     "cannot write '/sys/x.ir'", NULL},
    {"two --save to one path", NULL, RUN_S " --save out=o.npy --save x0=./o.npy", 2,
     "write one file", "test ! -e o.npy"},
    {"two --save to one file through a link", "ln -s o2.npy lnk.npy",
     RUN_S " --save out=lnk.npy --save x0=o2.npy", 2, "write one file", "test ! -e o2.npy"},
    {"two --save to one existing file", "touch o.npy && ln o.npy hard.npy",
     RUN_S " --save out=o.npy --save x0=hard.npy", 2, "write one file", "test ! -s o.npy"},
    {"two --save to /dev/null are fine", NULL, RUN_S " --save out=/dev/null --save x0=/dev/null", 0,
     NULL, NULL},
    {"a failed compile leaves the old output", "echo keep > o.ir && echo 'kernel (' > bad.kern",
     "emit bad.kern --emit=ir -o o.ir", 1, NULL, "grep -qx keep o.ir"},
    {"a failed write leaves no temporary file", "mkdir d", "emit s.kern --emit=ir -o d", 3, NULL,
     "[ \"$(ls -A | grep -c tmp)\" = 0 ]"},
    {"the replaced file keeps its mode", "touch o.ir && chmod 640 o.ir",
     "emit s.kern --emit=ir -o o.ir", 0, NULL,
     "[ \"$(stat -c %a o.ir)\" = 640 ] && grep -q 'kernel @simulate' o.ir"},
    {"no temporary file is left after success", NULL, "build s.kern -o m.so", 0, NULL,
     "[ \"$(ls -A | grep -c tmp)\" = 0 ] && test -s m.so"},
    {"an output path is never a shell command", NULL, "build s.kern -o 'a;touch pwned;.so'", 0,
     NULL, "test ! -e pwned && test -s 'a;touch pwned;.so'"},
    {"an output path with quotes and spaces", NULL, "build s.kern -o \"it's a module.so\"", 0, NULL,
     "test -s \"it's a module.so\""},
    {"--save over its own input", NULL, RUN_S " --save x0=x0.npy", 0, NULL,
     "cmp -s x0.npy \"$E/examples/data/x0.npy\""},
    {"--save of a result to an input's path", NULL, RUN_S " --save out=w.npy", 0, NULL,
     "! cmp -s w.npy \"$E/examples/data/w.npy\""},
};

Test(adversarial, outputs) { run_table(output_cases, sizeof output_cases / sizeof *output_cases); }
