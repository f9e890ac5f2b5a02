/* test_adversarial.c - kern as a careless or hostile user meets it (issue 9): each case is
 * a mistake or an attack, and asserts the clear error (status, and the words that name the
 * problem) or the right result. Classes: sources, bindings, outputs, modules, the C API
 * misused, limits. docs/testing.md lists the classes; a new hardening fix adds its case.
 *
 * The command-line cases run kernc through /bin/sh in a fresh directory holding copies of
 * examples/simulate.kern (s.kern) and its data (x0.npy, w.npy, out.npy); `setup` prepares
 * more files there, `post` is a shell test on the directory afterwards (exit 0 = pass). */
#include <criterion/criterion.h>
#include <elf.h>
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

/* ---- modules: truncated, corrupt, foreign, rebuilt ----------------------------------- */

/* Builds src with `kernc build` (target, or cpu) into dir/name; returns the path. */
static char *build_module(const char *dir, const char *name, const char *src, const char *target) {
    kern_buf b = {0};
    buf_printf(&b, "%s/%s.kern", dir, name);
    FILE *f = fopen(b.data, "w");
    cr_assert(f);
    fputs(src, f);
    fclose(f);
    kern_buf cmd = {0}, path = {0};
    buf_printf(&path, "%s/%s", dir, name);
    buf_printf(&cmd, "'%s' build '%s' --target=%s -o '%s'", KERNC_PATH, b.data,
               target ? target : "cpu", path.data);
    cr_assert_eq(system(cmd.data), 0, "%s", cmd.data);
    buf_free(&cmd);
    buf_free(&b);
    return buf_take(&path);
}

static void write_bytes(const char *path, const char *data, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

static const char *const scale_src = "kernel scale(x: f32[], y: f32[], a: f32) {\n"
                                     "    for i in 0..len(x) { y[i] = a * x[i]; }\n"
                                     "}\n";

/* Every truncation of a module, and of its GPU container, is KERN_ERR_FORMAT naming the
 * file: never a crash inside the dynamic loader, never a success. */
Test(adversarial, truncated_modules) {
    char dir[] = "/tmp/kern-adv-mod-XXXXXX";
    cr_assert(mkdtemp(dir));
    const char *targets[] = {"cpu", "vulkan"};
    kern_context *ctx;
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    for (int t = 0; t < 2; t++) {
        char *path = build_module(dir, targets[t], scale_src, targets[t]);
        size_t len;
        char *img = kern_read_file(path, &len);
        cr_assert(img && len > 64);
        char cut[300];
        snprintf(cut, sizeof cut, "%s/cut", dir);
        int checked = 0;
        for (size_t n = 0; n < len; n += n < 256 ? 1 : 61) {
            write_bytes(cut, img, n);
            kern_module *m = NULL;
            kern_status s = kern_module_load_file(ctx, cut, &m);
            cr_expect_eq(s, KERN_ERR_FORMAT, "%s module cut to %zu of %zu bytes: %s (%s)",
                         targets[t], n, len, kern_status_name(s), kern_context_last_error(ctx));
            cr_expect(strstr(kern_context_last_error(ctx), cut) != NULL, "%s",
                      kern_context_last_error(ctx));
            kern_module_release(m);
            checked++;
        }
        cr_expect_gt(checked, 300);
        free(img);
        free(path);
    }
    kern_context_release(ctx);
    char rm[200];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    cr_assert_eq(system(rm), 0);
}

/* Damaged headers of a real module: each is refused by the checks before dlopen. */
Test(adversarial, corrupt_elf_headers) {
    char dir[] = "/tmp/kern-adv-elf-XXXXXX";
    cr_assert(mkdtemp(dir));
    char *path = build_module(dir, "m.so", scale_src, "cpu");
    size_t len;
    char *img = kern_read_file(path, &len);
    cr_assert(img);
    struct {
        const char *what;
        size_t off;
        int size;
        uint64_t value;
        const char *needle;
    } damage[] = {
        {"32-bit class", 4, 1, 1, "not a 64-bit little-endian ELF file"},
        {"big-endian", 5, 1, 2, "not a 64-bit little-endian ELF file"},
        {"an executable", 16, 2, 2, "not a shared object"},
        {"another machine", 18, 2, 40 /* ARM */, "a shared object for another machine"},
        {"program headers past the end", 32, 8, 1u << 30, "program headers lie outside"},
        {"program header size", 54, 2, 17, "program headers lie outside"},
        {"program header count", 56, 2, 0xfffe, "program headers lie outside"},
        {"section headers past the end", 40, 8, 1ull << 40, "section headers lie outside"},
    };
    kern_context *ctx;
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    char bad[300];
    snprintf(bad, sizeof bad, "%s/bad.so", dir);
    for (size_t i = 0; i < sizeof damage / sizeof *damage; i++) {
        char *copy = malloc(len);
        memcpy(copy, img, len);
        memcpy(copy + damage[i].off, &damage[i].value, (size_t)damage[i].size);
        write_bytes(bad, copy, len);
        free(copy);
        kern_module *m = NULL;
        cr_expect_eq(kern_module_load_file(ctx, bad, &m), KERN_ERR_FORMAT, "%s", damage[i].what);
        cr_expect(strstr(kern_context_last_error(ctx), damage[i].needle) != NULL, "%s: %s",
                  damage[i].what, kern_context_last_error(ctx));
        kern_module_release(m);
    }
    /* each loadable segment's offset moved past the end of the file */
    Elf64_Ehdr eh;
    memcpy(&eh, img, sizeof eh);
    for (int p = 0; p < eh.e_phnum; p++) {
        Elf64_Phdr ph;
        memcpy(&ph, img + eh.e_phoff + (size_t)p * sizeof ph, sizeof ph);
        if (ph.p_type != PT_LOAD && ph.p_type != PT_DYNAMIC)
            continue;
        char *copy = malloc(len);
        memcpy(copy, img, len);
        ph.p_offset = len - 8;
        ph.p_filesz += 64;
        memcpy(copy + eh.e_phoff + (size_t)p * sizeof ph, &ph, sizeof ph);
        write_bytes(bad, copy, len);
        free(copy);
        kern_module *m = NULL;
        cr_expect_eq(kern_module_load_file(ctx, bad, &m), KERN_ERR_FORMAT, "segment %d", p);
        cr_expect(strstr(kern_context_last_error(ctx), "outside the file") != NULL, "%s",
                  kern_context_last_error(ctx));
        kern_module_release(m);
    }
    kern_context_release(ctx);
    free(img);
    free(path);
    char rm[200];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    cr_assert_eq(system(rm), 0);
}

/* A module rebuilt at the same path while the old one is still loaded: the second load
 * gets the new code (glibc would hand back the loaded object of that name). */
Test(adversarial, rebuilt_module_is_new_code) {
    char dir[] = "/tmp/kern-adv-re-XXXXXX";
    cr_assert(mkdtemp(dir));
    char *path = build_module(dir, "m.so", scale_src, "cpu");
    kern_context *ctx;
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    kern_module *old = NULL, *fresh = NULL;
    cr_assert_eq(kern_module_load_file(ctx, path, &old), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    char *again = build_module(dir, "m.so",
                               "kernel shift(x: f32[], y: f32[], a: f32) {\n"
                               "    for i in 0..len(x) { y[i] = a + x[i]; }\n"
                               "}\n",
                               "cpu");
    cr_assert_eq(kern_module_load_file(ctx, path, &fresh), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    kern_kernel *k = NULL;
    cr_expect_eq(kern_kernel_find(fresh, "shift", &k), KERN_OK, "the rebuilt module's kernel");
    cr_expect_neq(kern_kernel_find(fresh, "scale", &k), KERN_OK, "the old module's kernel");
    cr_expect_eq(kern_kernel_find(old, "scale", &k), KERN_OK, "the old module still works");
    /* and the new code runs: y = 2 + x */
    cr_assert_eq(kern_kernel_find(fresh, "shift", &k), KERN_OK);
    float xv[3] = {1, 2, 3}, yv[3] = {0};
    int64_t n = 3;
    kern_buffer *x, *y;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, xv, &x), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, NULL, &y), KERN_OK);
    kern_arg args[] = {kern_arg_buffer(x), kern_arg_buffer(y), kern_arg_f32(2)};
    cr_assert_eq(kern_launch(k, args, 3), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_buffer_read(y, yv, sizeof yv), KERN_OK);
    for (int i = 0; i < 3; i++)
        cr_expect_float_eq(yv[i], 2 + xv[i], 0, "y[%d]", i);
    kern_module_release(old);
    kern_module_release(fresh);
    kern_context_release(ctx);
    free(path);
    free(again);
    char rm[200];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    cr_assert_eq(system(rm), 0);
}
