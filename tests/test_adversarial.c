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

/* Removes a test's temporary directory (made writable first: some cases take rights away). */
static void remove_tree(const char *dir) {
    kern_buf rm = {0};
    buf_printf(&rm, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
    cr_assert_eq(system(rm.data), 0);
    buf_free(&rm);
}

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
    remove_tree(dir);
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
    {"an output path of 5000 bytes: the message keeps the reason", NULL,
     "emit s.kern --emit=ir -o $(printf %05000d 0)/x.ir", 3, "0/x.ir': File name too long", NULL},
    {"a module path of 5000 bytes", NULL, "build s.kern -o $(printf %05000d 0).so", 3,
     "File name too long", NULL},
    {"--save to a path of 5000 bytes", NULL, RUN_S " --save out=$(printf %05000d 0).npy", 3,
     "File name too long", NULL},
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
    remove_tree(dir);
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
    remove_tree(dir);
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
    remove_tree(dir);
}

/* ---- source paths of any bytes --------------------------------------------------------- */

#include "../runtime/meta.h"

/* Runs kernc with args (no shell: the paths hold quotes); returns its exit status, its
 * output (stdout and stderr) in *out. */
static int kernc_argv(const char *const *args, int n, char **out) {
    char log[] = "/tmp/kern-adv-log-XXXXXX";
    int fd = mkstemp(log);
    cr_assert(fd >= 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        char *argv[16] = {(char *)KERNC_PATH};
        for (int i = 0; i < n && i < 14; i++)
            argv[i + 1] = (char *)args[i];
        dup2(fd, 1);
        dup2(fd, 2);
        execv(KERNC_PATH, argv);
        _exit(127);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    close(fd);
    size_t len;
    *out = kern_read_file(log, &len);
    remove(log);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A source path may hold any byte but NUL: the metadata's `source` line escapes a
 * backslash and control characters as \HH. A newline in the path split the line, and
 * kern_module_load_file refused what `kernc build` wrote ("corrupt module metadata:
 * metadata line 3", issue 23). */
Test(adversarial, source_paths_of_any_bytes) {
    char all[256], err[256];
    for (int i = 1; i < 256; i++)
        all[i - 1] = (char)i;
    all[255] = 0;
    kern_meta meta = {.source = all};
    kern_buf text = {0};
    kern_meta_print(&text, &meta);
    kern_meta *back = kern_meta_parse(text.data, text.len, err, sizeof err);
    cr_assert(back, "%s", err);
    cr_expect(back->source && !strcmp(back->source, all), "every byte comes back");
    kern_meta_free(back);
    buf_free(&text);
    /* metadata written before the escapes: a backslash before anything but two hex
     * digits is itself */
    const char old[] = "kern-meta 1\nsource a\\b\\zz\\\nend\n";
    back = kern_meta_parse(old, sizeof old - 1, err, sizeof err);
    cr_assert(back, "%s", err);
    cr_expect_str_eq(back->source, "a\\b\\zz\\");
    kern_meta_free(back);

    /* kernc build from such a path; the module loads, and its errors name the path */
    char dir[] = "/tmp/kern-adv-path-XXXXXX";
    cr_assert(mkdtemp(dir));
    kern_buf sub = {0}, src = {0}, so = {0};
    buf_printf(&sub, "%s/new\nline\ttab \"q\" 'q' \\5c \xff\xfe", dir);
    cr_assert_eq(mkdir(sub.data, 0700), 0);
    buf_printf(&src, "%s/o\n.kern", sub.data);
    buf_printf(&so, "%s/o\nut\t.so", sub.data);
    const char *text_src = "kernel s(x: f32[], y: f32[]) {\n"
                           "    for i in 0..len(x) { y[i + 1] = x[i]; }\n"
                           "}\n";
    write_bytes(src.data, text_src, strlen(text_src));
    const char *build[] = {"build", "--debug", src.data, "-o", so.data};
    char *out;
    int st = kernc_argv(build, 5, &out);
    cr_assert_eq(st, 0, "kernc build: %s", out);
    free(out);
    kern_context *ctx;
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    kern_module *m = NULL;
    cr_assert_eq(kern_module_load_file(ctx, so.data, &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, "s", &k), KERN_OK);
    int64_t n = 4;
    kern_buffer *x, *y;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, NULL, &x), KERN_OK);
    cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, NULL, &y), KERN_OK);
    kern_arg args[] = {kern_arg_buffer(x), kern_arg_buffer(y)};
    kern_status ls = kern_launch(k, args, 2);
    if (ls == KERN_OK)
        ls = kern_sync(ctx);
    kern_buf where = {0};
    buf_printf(&where, "%s:2:", src.data);
    cr_expect(ls != KERN_OK && strstr(kern_context_last_error(ctx), where.data),
              "the bounds error names the file: %s", kern_context_last_error(ctx));
    kern_buffer_release(x);
    kern_buffer_release(y);
    kern_module_release(m);
    kern_context_release(ctx);
    /* and kernc run of the file (the JIT's metadata, never printed) */
    kern_buf xbind = {0}, ybind = {0};
    buf_printf(&xbind, "x=%s/examples/data/x0.npy", KERN_SOURCE_ROOT);
    buf_printf(&ybind, "y=%s/examples/data/x0.npy", KERN_SOURCE_ROOT);
    const char *run[] = {"run", src.data, "s", xbind.data, ybind.data};
    st = kernc_argv(run, 5, &out);
    cr_expect(st == 1 && strstr(out, where.data), "kernc run: status %d: %s", st, out);
    free(out);
    buf_free(&xbind);
    buf_free(&ybind);
    buf_free(&where);
    buf_free(&sub);
    buf_free(&src);
    buf_free(&so);
    remove_tree(dir);
}

/* ---- the C API misused (checked mode, KERN_RUNTIME_CHECKS=1) -------------------------- */

#include "../runtime/rt.h"

typedef struct api {
    kern_context *ctx;
    kern_module *mod;
    kern_kernel *k;
    kern_buffer *x, *y;
} api;

static const char *const api_src = "kernel scale(x: f32[], y: f32[], a: f32) {\n"
                                   "    for i in 0..len(x) { y[i] = a * x[i]; }\n"
                                   "}\n"
                                   "kernel spin(x: f32[], n: i32) {\n"
                                   "    for i in 0..1 {\n"
                                   "        var s = 0.0;\n"
                                   "        for t in 0..n { s = s * 0.5 + sin(s + 1.0); }\n"
                                   "        x[0] = s;\n"
                                   "    }\n"
                                   "}\n";

static api api_open(void) {
    cr_assert_eq(setenv("KERN_RUNTIME_CHECKS", "1", 1), 0);
    cr_assert(rt_checks_enabled(), "checked mode from the environment");
    api a = {0};
    cr_assert_eq(kern_context_create(NULL, &a.ctx), KERN_OK);
    cr_assert_eq(kern_module_from_source(a.ctx, api_src, strlen(api_src), "api.kern", &a.mod),
                 KERN_OK, "%s", kern_context_last_error(a.ctx));
    cr_assert_eq(kern_kernel_find(a.mod, "scale", &a.k), KERN_OK);
    int64_t n = 4;
    cr_assert_eq(kern_buffer_create(a.ctx, KERN_F32, 1, &n, NULL, &a.x), KERN_OK);
    cr_assert_eq(kern_buffer_create(a.ctx, KERN_F32, 1, &n, NULL, &a.y), KERN_OK);
    return a;
}

static kern_status launch_scale(api *a, kern_buffer *x, kern_buffer *y) {
    kern_arg args[] = {kern_arg_buffer(x), kern_arg_buffer(y), kern_arg_f32(2)};
    return kern_launch(a->k, args, 3);
}

#define expect_error(call, needle)                                                             \
    do {                                                                                       \
        kern_status s_ = (call);                                                               \
        cr_expect_eq(s_, KERN_ERR_ARGUMENT, "%s: %s", #call, kern_status_name(s_));            \
        cr_expect(strstr(kern_context_last_error(a.ctx), (needle)) != NULL, "%s: '%s'", #call, \
                  kern_context_last_error(a.ctx));                                             \
    } while (0)

Test(adversarial, released_buffer_read) {
    api a = api_open();
    kern_buffer_release(a.x);
    float v[4];
    expect_error(kern_buffer_read(a.x, v, sizeof v), "kern_buffer_read: use of a released buffer");
    expect_error(kern_buffer_write(a.x, v, sizeof v),
                 "kern_buffer_write: use of a released buffer");
    kern_context_release(a.ctx);
}

Test(adversarial, released_buffer_launched) {
    api a = api_open();
    kern_buffer_release(a.y);
    expect_error(launch_scale(&a, a.x, a.y), "kernel 'scale', parameter 'y'");
    cr_expect(strstr(kern_context_last_error(a.ctx), "released") != NULL);
    cr_expect_eq(launch_scale(&a, a.x, a.x), KERN_OK, "live buffers still launch");
    kern_context_release(a.ctx);
}

Test(adversarial, released_buffer_getters_and_double_release) {
    api a = api_open();
    kern_buffer_release(a.x);
    cr_expect_eq(kern_buffer_rank(a.x), 0);
    cr_expect_eq(kern_buffer_count(a.x), 0);
    cr_expect_eq(kern_buffer_bytes(a.x), 0);
    kern_buffer_release(a.x); /* said on stderr, nothing freed twice */
    cr_expect(strstr(kern_context_last_error(a.ctx), "use of a released buffer") != NULL, "%s",
              kern_context_last_error(a.ctx));
    kern_context_release(a.ctx);
}

Test(adversarial, kernel_of_released_module) {
    api a = api_open();
    kern_module_release(a.mod);
    expect_error(launch_scale(&a, a.x, a.y), "kern_launch: use of a released kernel");
    kern_kernel *k;
    expect_error(kern_kernel_find(a.mod, "scale", &k),
                 "kern_kernel_find: use of a released module");
    cr_expect_null(kern_kernel_name(a.k));
    kern_context_release(a.ctx);
}

Test(adversarial, handles_of_a_released_context) {
    api a = api_open();
    kern_context *keep; /* a live context keeps the quarantine (and the registry) */
    cr_assert_eq(kern_context_create(NULL, &keep), KERN_OK);
    kern_context *ctx = a.ctx;
    kern_buffer *x = a.x;
    kern_kernel *k = a.k;
    kern_context_release(ctx);
    int64_t n = 4;
    kern_buffer *b = NULL;
    /* each use is refused without touching the released objects */
    cr_expect_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, NULL, &b), KERN_ERR_ARGUMENT);
    cr_expect_eq(kern_buffer_rank(x), 0);
    kern_arg args[] = {kern_arg_buffer(x), kern_arg_buffer(x), kern_arg_f32(1)};
    cr_expect_eq(kern_launch(k, args, 3), KERN_ERR_ARGUMENT);
    cr_expect(strstr(kern_context_last_error(ctx), "released context") != NULL);
    kern_context_release(keep);
    /* after the last context, nothing is kept: still refused, as unknown handles */
    cr_expect_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, NULL, &b), KERN_ERR_ARGUMENT);
}

Test(adversarial, released_tape_and_graph) {
    api a = api_open();
    kern_tape *t;
    cr_assert_eq(kern_tape_create(a.ctx, &t), KERN_OK);
    kern_tape_destroy(t);
    expect_error(kern_tape_backward(t), "kern_tape_backward: use of a released tape");
    kern_graph *g;
    cr_assert_eq(kern_graph_begin(a.ctx), KERN_OK);
    cr_assert_eq(launch_scale(&a, a.x, a.y), KERN_OK);
    cr_assert_eq(kern_graph_end(a.ctx, &g), KERN_OK);
    cr_assert_eq(kern_graph_launch(g), KERN_OK);
    kern_graph_release(g);
    expect_error(kern_graph_launch(g), "kern_graph_launch: use of a released graph");
    kern_context_release(a.ctx);
}

Test(adversarial, a_buffer_pinned_by_a_graph_is_still_released) {
    api a = api_open();
    kern_graph *g;
    cr_assert_eq(kern_graph_begin(a.ctx), KERN_OK);
    cr_assert_eq(launch_scale(&a, a.x, a.y), KERN_OK);
    cr_assert_eq(kern_graph_end(a.ctx, &g), KERN_OK);
    kern_buffer_release(a.y); /* the graph keeps its memory */
    cr_expect_eq(kern_graph_launch(g), KERN_OK, "the graph still replays");
    float v[4];
    expect_error(kern_buffer_read(a.y, v, sizeof v), "use of a released buffer");
    kern_graph_release(g);
    kern_context_release(a.ctx);
}

Test(adversarial, wrong_kinds_of_handle) {
    api a = api_open();
    expect_error(kern_launch((kern_kernel *)a.x, NULL, 0),
                 "a buffer passed where a kernel belongs");
    float junk[64] = {0};
    kern_arg args[] = {kern_arg_buffer((kern_buffer *)junk), kern_arg_buffer(a.y), kern_arg_f32(1)};
    expect_error(kern_launch(a.k, args, 3), "kernel 'scale', parameter 'x'");
    cr_expect_eq(kern_buffer_rank((kern_buffer *)junk), 0, "a pointer kern never made");
    kern_context_release(a.ctx);
}

typedef struct spin_arg {
    api *a;
    kern_status s;
} spin_arg;

static void *spin_thread(void *p) {
    spin_arg *sa = p;
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(sa->a->mod, "spin", &k), KERN_OK);
    kern_arg args[] = {kern_arg_buffer(sa->a->x), kern_arg_i32(200000000)};
    sa->s = kern_launch(k, args, 2);
    if (sa->s == KERN_OK)
        sa->s = kern_sync(sa->a->ctx);
    return NULL;
}

/* A second thread that calls in while the first is inside kern_launch is refused; the
 * first is not disturbed. */
Test(adversarial, one_context_two_threads, .timeout = 120) {
    api a = api_open();
    spin_arg sa = {&a, KERN_OK};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, spin_thread, &sa), 0);
    while (__atomic_load_n(&a.ctx->owner, __ATOMIC_ACQUIRE) == 0)
        ;
    float v[4];
    kern_status s = kern_buffer_read(a.y, v, sizeof v);
    int64_t n = 4;
    kern_buffer *b = NULL;
    kern_status s2 = kern_buffer_create(a.ctx, KERN_F32, 1, &n, NULL, &b);
    bool still_inside = __atomic_load_n(&a.ctx->owner, __ATOMIC_ACQUIRE) != 0;
    pthread_join(th, NULL);
    cr_expect_eq(sa.s, KERN_OK, "the first thread's launch: %s", kern_context_last_error(a.ctx));
    if (still_inside) /* (the spin kernel outlasts the two calls on any machine seen) */
        cr_expect_eq(s, KERN_ERR_ARGUMENT, "kern_buffer_read from a second thread");
    (void)s2;
    kern_buffer_release(b);
    /* one thread after the other is fine */
    cr_expect_eq(kern_buffer_read(a.y, v, sizeof v), KERN_OK);
    kern_context_release(a.ctx);
}

/* ---- sources: malformed, hostile and odd .kern files ---------------------------------- */

#define SRC(text) "printf '%s' '" text "' > p.kern"

static const cli_case source_cases[] = {
    {"an empty file has no kernels", "touch p.kern", "check p.kern", 0,
     "warning: no kernels in p.kern", NULL},
    {"/dev/null as a source", NULL, "check /dev/null", 0, "no kernels in /dev/null", NULL},
    {"run of a file without kernels", "touch p.kern", "run p.kern k", 1,
     "no kernel named 'k' in p.kern, which has no kernels", NULL},
    {"a directory as a source", "mkdir d.kern", "check d.kern", 3,
     "cannot read 'd.kern': Is a directory", NULL},
    {"a missing source", NULL, "check nope.kern", 3,
     "cannot read 'nope.kern': No such file or directory", NULL},
    {"an unterminated comment", SRC("/* open"), "check p.kern", 1,
     "p.kern:1:1: error: unterminated comment", NULL},
    {"a NUL byte", "printf 'kernel k(x: f32[]) {\\000 }' > p.kern", "check p.kern", 1,
     "unexpected character 0x00", NULL},
    {"invalid UTF-8", "printf 'kernel k(x: f32[]) { \\377 }' > p.kern", "check p.kern", 1,
     "invalid UTF-8 byte 0xFF", NULL},
    {"a missing semicolon", SRC("kernel k(x: f32[]) { for i in 0..len(x) { x[i] = 1.0 } }"),
     "check p.kern", 1, "expected ';' after statement", NULL},
    {"no octal literals", SRC("kernel k(x: f32[]) { for i in 0..len(x) { x[i] = 017; } }"),
     "check p.kern", 1, "leading zeros are not allowed", NULL},
    {"an integer literal too large",
     SRC("kernel k(x: f32[]) { for i in 0..len(x) { x[i] = 99999999999999999999; } }"),
     "check p.kern", 1, "is too large", NULL},
    {"a float literal out of range",
     SRC("kernel k(x: f32[]) { for i in 0..len(x) { x[i] = 1e999; } }"), "check p.kern", 1,
     "float literal '1e999' is out of range", NULL},
    {"a duplicate parameter", SRC("kernel k(x: f32[], x: f32[]) { }"), "check p.kern", 1,
     "duplicate parameter 'x'", NULL},
    {"a duplicate kernel", SRC("kernel k(x: f32[]) { } kernel k(x: f32[]) { }"), "check p.kern", 1,
     "duplicate definition of 'k'", NULL},
    {"a kernel named like a gradient's symbols",
     SRC("kernel k__grad(x: f32[]) { } kernel k(x: f32[]) { }"), "check p.kern", 1,
     "would have the symbols of 'k.grad'", NULL},
    {"an unknown type", SRC("kernel k(x: q32[]) { }"), "check p.kern", 1, "unknown type 'q32'",
     NULL},
    {"break outside a loop", SRC("kernel k(x: f32[]) { break; }"), "check p.kern", 1,
     "break outside of a loop", NULL},
    {"continue outside a loop", SRC("kernel k(x: f32[]) { continue; }"), "check p.kern", 1,
     "continue outside of a loop", NULL},
    {"an unknown name", SRC("kernel k(x: f32[]) { for i in 0..len(x) { x[i] = y; } }"),
     "check p.kern", 1, "unknown name 'y'", NULL},
    {"recursion",
     SRC("func f(a: f32) -> f32 { return f(a); } kernel k(x: f32[]) { for i in 0..len(x) { "
         "x[i] = f(x[i]); } }"),
     "check p.kern", 1, "recursive call: f -> f", NULL},
    {"a float index", SRC("kernel k(x: f32[]) { for i in 0..len(x) { x[1.5] = 1.0; } }"),
     "check p.kern", 1, "array index must be an integer", NULL},
    {"a builtin's arity",
     SRC("kernel k(x: f32[]) { for i in 0..len(x) { x[i] = sin(1.0, 2.0); } }"), "check p.kern", 1,
     "'sin' takes 1 argument, got 2", NULL},
    {"no implicit float to int", SRC("kernel k(x: i32[]) { for i in 0..len(x) { x[i] = 1.0; } }"),
     "check p.kern", 1, "where an integer (i32) is required", NULL},
    {"a string", SRC("kernel k(x: f32[]) { for i in 0..len(x) { x[i] = \"s\"; } }"), "check p.kern",
     1, "unexpected character", NULL},
    {"return in a kernel", SRC("kernel k(x: f32[]) { return 1.0; }"), "check p.kern", 1,
     "a kernel cannot return", NULL},
    {"assignment to a let",
     SRC("kernel k(x: f32[]) { for i in 0..len(x) { let a = 1.0; a = 2.0; "
         "x[i] = a; } }"),
     "check p.kern", 1, "declared with let", NULL},
    {"assignment to a parameter", SRC("kernel k(n: i32) { n = 3; }"), "check p.kern", 1,
     "cannot assign to parameter 'n'", NULL},
    {"an element indexed again",
     SRC("kernel k(x: f32[]) { for i in 0..len(x) { x[i][0] = 1.0; } }"), "check p.kern", 1,
     "a value of type f32 cannot be indexed", NULL},
    {"a name of 256 characters",
     "printf 'kernel %s(x: f32[]) { }' $(printf '%0256d' 0 | tr 0 a) > p.kern", "check p.kern", 1,
     "255", NULL},
    {"nine ranges in one parallel for",
     SRC("kernel k(x: f32[]) { for a, b, c, d, e, f, g, h, i in 0..1, 0..1, 0..1, 0..1, 0..1, "
         "0..1, 0..1, 0..1, 0..1 { x[0] = 1.0; } }"),
     "check p.kern", 1, NULL, NULL},
    {"run of a file with errors", SRC("kernel k(x: f32[]) { x = 1; }"), "run p.kern k", 1,
     "p.kern:1:", NULL},
};

Test(adversarial, sources) { run_table(source_cases, sizeof source_cases / sizeof *source_cases); }

/* ---- bindings: arguments on the command line ------------------------------------------ */

#define RUN_B "run s.kern simulate x0=x0.npy w=w.npy out=out.npy "
/* NumPy's own writer ($KERN_TEST_PYTHON: the GPU machine's /usr/bin/python3 has no NumPy) */
#define NPY(expr, file)                                                                    \
    "\"${KERN_TEST_PYTHON:-/usr/bin/python3}\" -c 'import numpy as np; np.save(\"" file    \
    "\", " expr ")'"

static const cli_case binding_cases[] = {
    {"a missing scalar", NULL, RUN_B, 1, "parameter 'steps: i32' of kernel 'simulate' is not bound",
     NULL},
    {"an unknown parameter", NULL, RUN_B "steps=16 bogus=1", 1,
     "kernel 'simulate' has no parameter named 'bogus'", NULL},
    {"a parameter bound twice", NULL, RUN_B "steps=16 steps=3", 2,
     "parameter 'steps' is bound twice", NULL},
    {"a float for an i32", NULL, RUN_B "steps=1.5", 1, "steps=1.5: not an integer", NULL},
    {"an i32 out of range", NULL, RUN_B "steps=2147483648", 1, "out of range for i32", NULL},
    {"no octal on the command line", NULL, RUN_B "steps=010", 1, "steps=010: not an integer", NULL},
    {"no spaces in a number", NULL, RUN_B "'steps= 5'", 1, "not an integer", NULL},
    {"an empty value", NULL, RUN_B "steps=", 2, "is not of the form NAME=VALUE", NULL},
    {"an empty name", NULL, RUN_B "steps=16 =1", 2, "is not of the form NAME=VALUE", NULL},
    {"no equals sign", NULL, RUN_B "steps=16 x0", 2, "is not of the form NAME=VALUE", NULL},
    {"a file for a scalar", NULL, RUN_B "steps=x0.npy", 1, "steps=x0.npy: not an integer", NULL},
    {"a number for an array", NULL, "run s.kern simulate x0=5 w=w.npy out=out.npy steps=16", 3,
     "x0=5: 5: No such file or directory", NULL},
    {"a missing .npy", NULL, "run s.kern simulate x0=nope.npy w=w.npy out=out.npy steps=16", 3,
     "nope.npy: No such file or directory", NULL},
    {"an unknown kernel", NULL, "run s.kern nosuch x0=x0.npy", 1,
     "no kernel named 'nosuch' in s.kern; kernels: simulate", NULL},
    {"--threads 0", NULL, RUN_B "steps=16 --threads 0", 2, "--threads needs a positive integer",
     NULL},
    {"--threads too many", NULL, RUN_B "steps=16 --threads 100000", 2,
     "--threads needs a positive integer", NULL},
    {"--save of a scalar", NULL, RUN_B "steps=16 --save steps=a.npy", 1,
     "'steps' is a scalar; only arrays can be saved", "test ! -e a.npy"},
    {"--save of an unknown parameter", NULL, RUN_B "steps=16 --save nope=a.npy", 1,
     "has no parameter named 'nope'", "test ! -e a.npy"},
    {"--ad-stack-size beyond 2^31", NULL, RUN_B "steps=16 --ad-stack-size 4294967296", 2,
     "--ad-stack-size needs a positive integer up to 2^31", NULL},
    {"an unknown target", NULL, RUN_B "steps=16 --target=metal", 2,
     "target 'metal' is not available", NULL},
    {"a truncated .npy", "head -c 50 x0.npy > t.npy",
     "run s.kern simulate x0=t.npy w=w.npy out=out.npy steps=16", 1, "truncated header", NULL},
    {"not a .npy", "printf NOTNPY > b.npy",
     "run s.kern simulate x0=b.npy w=w.npy out=out.npy steps=16", 1, "not a .npy file", NULL},
    {"an empty .npy", NULL, "run s.kern simulate x0=/dev/null w=w.npy out=out.npy steps=16", 1,
     "not a .npy file (it is empty)", NULL},
    {"the wrong dtype", NPY("np.zeros(8)", "f.npy"),
     "run s.kern simulate x0=f.npy w=w.npy out=out.npy steps=16", 1,
     "the file holds f64 with 1 dimension, but parameter 'x0' is f32[]", NULL},
    {"the wrong rank", NPY("np.zeros((2,4), np.float32)", "r.npy"),
     "run s.kern simulate x0=r.npy w=w.npy out=out.npy steps=16", 1,
     "the file holds f32 with 2 dimensions", NULL},
    {"Fortran order", NPY("np.asfortranarray(np.zeros((2,3), np.float32))", "f.npy"),
     "run s.kern simulate x0=f.npy w=w.npy out=out.npy steps=16", 1,
     "fortran_order True (column-major data) is not supported", NULL},
    {"big-endian", NPY("np.zeros(3, \">f4\")", "b.npy"),
     "run s.kern simulate x0=b.npy w=w.npy out=out.npy steps=16", 1,
     "big-endian dtype '>f4' is not supported", NULL},
    {"object arrays", NPY("np.array([1, \"a\"], dtype=object)", "o.npy"),
     "run s.kern simulate x0=o.npy w=w.npy out=out.npy steps=16", 1, "unsupported dtype '|O'",
     NULL},
    {"empty arrays run", NPY("np.zeros(0, np.float32)", "e.npy"),
     "run s.kern simulate x0=e.npy w=w.npy out=e.npy steps=16", 0, "x0: f32[0]", NULL},
    {"an index out of bounds is an error, not corruption", NULL, RUN_B "steps=100", 1,
     "index 16 out of bounds for dimension 0 of extent 16", NULL},
    {"a gradient run with unbound adjoints", NULL,
     "run s.kern simulate.grad x0=x0.npy w=w.npy out=out.npy steps=16", 0, "x0.grad: f32[8]", NULL},
    {"gradcheck with a zero step", NULL,
     "gradcheck s.kern simulate x0=x0.npy w=w.npy out=out.npy steps=16 --eps 0", 2,
     "--eps needs a positive number", NULL},
};

Test(adversarial, bindings) {
    run_table(binding_cases, sizeof binding_cases / sizeof *binding_cases);
}

/* ---- limits ---------------------------------------------------------------------------- */

static const cli_case limit_cases[] = {
    {"a range whose length overflows int64",
     SRC("kernel l(x: f32[], a: i64, b: i64) { for i in a..b { atomic_add(x[0], 1.0); "
         "} }") " && " NPY("np.zeros(1, np.float32)", "one.npy"),
     "run p.kern l x=one.npy a=-9223372036854775808 b=9223372036854775807", 1,
     "has more iterations than a 64-bit count holds", NULL},
    {"a range just inside int64 is fine",
     SRC("kernel l(x: f32[], a: i64, b: i64) { for i in a..b { atomic_add(x[0], 1.0); "
         "} }") " && " NPY("np.zeros(1, np.float32)", "one.npy"),
     "run p.kern l x=one.npy a=-9223372036854775808 b=-9223372036854775800", 0, "= 8", NULL},
    {"a reversed range runs nothing",
     SRC("kernel l(x: f32[], a: i64, b: i64) { for i in a..b { atomic_add(x[0], 1.0); "
         "} }") " && " NPY("np.zeros(1, np.float32)", "one.npy"),
     "run p.kern l x=one.npy a=5 b=3", 0, "= 0", NULL},
    {"a source over 8 MiB", "head -c 9000000 /dev/zero | tr '\\\\0' ' ' > big.kern",
     "check big.kern", 1, "8 MiB", NULL},
    {"deep nesting",
     "{ printf 'kernel k(x: f32[]) {'; for i in $(seq 2000); do printf 'if true {'; "
     "done; "
     "for i in $(seq 2000); do printf '}'; done; printf '}'; } > p.kern",
     "check p.kern", 1, "nest", NULL},
    {"adstack overflow in the option's units",
     SRC("kernel w(x: f32[], o: f32[]) { for i in 0..len(x) { var y = x[i]; while y < "
         "100.0 "
         "{ y = y * 2.0 + 1.0; } o[i] = y; } }") " && " NPY("np.ones(4, np.float32)", "x.npy"),
     "run p.kern w.grad x=x.npy o=x.npy --ad-stack-size 2", 1,
     "(--ad-stack-size 2); it needs --ad-stack-size", NULL},
};

Test(adversarial, limits) { run_table(limit_cases, sizeof limit_cases / sizeof *limit_cases); }

/* The command line has no limit on its arguments, so its checks are n log n: 5000 --save
 * options to /dev/null (allowed: a device is written in place) compared every pair of
 * paths with two stat calls each, about a minute. */
static const cli_case many_argument_cases[] = {
    {"5000 --save options", NULL,
     RUN_S " $(for i in $(seq 5000); do printf ' --save out=/dev/null'; done)", 0, NULL, NULL},
    {"a clash among 5000 --save options", NULL,
     RUN_S " $(for i in $(seq 5000); do printf ' --save out=o%d.npy' $i; done) --save "
           "x0=./o2500.npy",
     2, "--save out=o2500.npy and --save x0=./o2500.npy write one file", NULL},
};

Test(adversarial, many_arguments, .timeout = 60) {
    run_table(many_argument_cases, sizeof many_argument_cases / sizeof *many_argument_cases);
}
