/* test_cache.c - the compile cache of JIT modules (jit/cache.c, docs/runtime.md "The
 * compile cache"), each test with a cache directory of its own under /tmp: a module loaded
 * from the cache computes what the compiled one computes (against plain C loops), its
 * gradients are cached too, a damaged entry is rebuilt and never loaded, the key changes
 * with every option that changes code, two processes compiling at once leave one whole
 * entry, and the switches turn it off. SHA-256 against FIPS 180-4's examples.
 *
 * The rest of the test binary runs without the cache (no_cache.c): tests never write to
 * the user's home. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../compiler/driver.h"
#include "../include/kern.h"
#include "../jit/cache.h"
#include "../jit/sha256.h"
#include "../runtime/npy.h"

enum { N = 1000 };

/* Two kernels (two JIT parts where two threads compile) with libm calls (libmvec's vector
 * functions where the host has them), and f's lazy gradient. */
static const char *SRC = "kernel f(x: f32[], y: f32[]) {\n"
                         "    for i in 0..len(x) { y[i] = sin(x[i]) * x[i] + 3.0 * x[i]; }\n"
                         "}\n"
                         "kernel g(x: f32[], z: f32[]) {\n"
                         "    for i in 0..len(x) { z[i] = exp(x[i]) - 1.0; }\n"
                         "}\n";

/* A fresh cache directory (mkdtemp), removed with its entries by rm_cache. */
static char *new_cache(void) {
    char *dir = strdup("/tmp/kern-cache-test.XXXXXX");
    cr_assert(dir && mkdtemp(dir));
    return dir;
}
static void rm_cache(char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    if (d)
        closedir(d);
    rmdir(dir);
    free(dir);
}

/* The entries (*.kmod) in dir, their inodes summed into *inodes (NULL: not), and the other
 * files (temporary files left behind) into *others. */
static int entries(const char *dir, unsigned long *inodes, int *others) {
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    struct dirent *e;
    int n = 0;
    if (inodes)
        *inodes = 0;
    if (others)
        *others = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".kmod")) {
            n++;
            if (inodes)
                *inodes += (unsigned long)e->d_ino;
        } else if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && others) {
            (*others)++;
        }
    }
    closedir(d);
    return n;
}

static kern_context *context(kern_backend b, const char *dir, bool no_cache) {
    kern_context_options o = kern_context_options_default();
    o.backend = b;
    o.cache_dir = dir;
    o.no_cache = no_cache;
    kern_context *ctx;
    kern_status s = kern_context_create(&o, &ctx);
    cr_assert_eq(s, KERN_OK, "%s", kern_context_last_error(ctx));
    return ctx;
}

static kern_module *compile(kern_context *ctx, const char *src) {
    kern_module *m;
    cr_assert_eq(kern_module_from_source(ctx, src, strlen(src), "cache.kern", &m), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    return m;
}

/* Runs f, g and f.grad of SRC's module on ctx's device and checks them against C loops;
 * returns whether all matched (for children of a fork, which cannot assert). */
static bool runs_right(kern_context *ctx, kern_module *m) {
    static float x[N], y[N], z[N], yg[N], xg[N];
    for (int i = 0; i < N; i++) {
        x[i] = -2.0f + 4.0f * (float)i / N;
        yg[i] = 1.0f + (float)(i % 7);
    }
    memset(xg, 0, sizeof xg);
    int64_t n = N;
    kern_buffer *bx, *by, *bz, *bxg, *byg;
    bool ok = kern_buffer_create(ctx, KERN_F32, 1, &n, x, &bx) == KERN_OK &&
              kern_buffer_create(ctx, KERN_F32, 1, &n, NULL, &by) == KERN_OK &&
              kern_buffer_create(ctx, KERN_F32, 1, &n, NULL, &bz) == KERN_OK &&
              kern_buffer_create(ctx, KERN_F32, 1, &n, xg, &bxg) == KERN_OK &&
              kern_buffer_create(ctx, KERN_F32, 1, &n, yg, &byg) == KERN_OK;
    kern_kernel *f, *g, *fg;
    ok = ok && kern_kernel_find(m, "f", &f) == KERN_OK && kern_kernel_find(m, "g", &g) == KERN_OK &&
         kern_kernel_find(m, "f.grad", &fg) == KERN_OK;
    kern_arg fa[] = {kern_arg_buffer(bx), kern_arg_buffer(by)};
    kern_arg ga[] = {kern_arg_buffer(bx), kern_arg_buffer(bz)};
    kern_arg gr[] = {kern_arg_buffer(bx), kern_arg_buffer(by), kern_arg_buffer(bxg),
                     kern_arg_buffer(byg)};
    ok = ok && kern_launch(f, fa, 2) == KERN_OK && kern_launch(g, ga, 2) == KERN_OK &&
         kern_launch(fg, gr, 4) == KERN_OK && kern_buffer_read(by, y, sizeof y) == KERN_OK &&
         kern_buffer_read(bz, z, sizeof z) == KERN_OK &&
         kern_buffer_read(bxg, xg, sizeof xg) == KERN_OK;
    if (!ok)
        fprintf(stderr, "cache: %s\n", kern_context_last_error(ctx));
    for (int i = 0; ok && i < N; i++) {
        double xi = x[i];
        double want_y = sin(xi) * xi + 3 * xi, want_z = exp(xi) - 1;
        double want_g = yg[i] * (cos(xi) * xi + sin(xi) + 3);
        if (fabs(y[i] - want_y) > 1e-5 * (1 + fabs(want_y)) ||
            fabs(z[i] - want_z) > 1e-5 * (1 + fabs(want_z)) ||
            fabs(xg[i] - want_g) > 1e-5 * (1 + fabs(want_g))) {
            fprintf(stderr, "cache: element %d: y %g (%g) z %g (%g) x.grad %g (%g)\n", i, y[i],
                    want_y, z[i], want_z, xg[i], want_g);
            ok = false;
        }
    }
    return ok;
}

/* A miss compiles and writes the module's entry and its gradient's; a second context (as a
 * second process would) loads both, rewrites nothing, and computes the same. */
static void hit_equals_miss(kern_backend b) {
    char *dir = new_cache();
    kern_context *ctx = context(b, dir, false);
    kern_module *m = compile(ctx, SRC);
    cr_expect_eq(entries(dir, NULL, NULL), 1, "the primal kernels' entry");
    cr_assert(runs_right(ctx, m));
    unsigned long ino;
    int others;
    cr_expect_eq(entries(dir, &ino, &others), 2, "and f.grad's");
    cr_expect_eq(others, 0, "no temporary file left");
    kern_context_release(ctx);

    ctx = context(b, dir, false);
    m = compile(ctx, SRC);
    cr_assert(runs_right(ctx, m));
    unsigned long ino2;
    cr_expect_eq(entries(dir, &ino2, NULL), 2);
    cr_expect_eq(ino2, ino, "the entries were loaded, not written again");
    kern_context_release(ctx);
    rm_cache(dir);
}

Test(cache, cpu_hit_computes_what_the_miss_computed) { hit_equals_miss(KERN_BACKEND_CPU); }

/* Vulkan (SPIR-V entries) and CUDA (PTX) where the device is there (lavapipe in CI, the
 * GPU machine's scripts/device-run.sh). */
static void gpu_hit_equals_miss(kern_backend b) {
    kern_context_options o = kern_context_options_default();
    o.backend = b;
    o.no_cache = true;
    kern_context *probe;
    bool have = kern_context_create(&o, &probe) == KERN_OK;
    kern_context_release(probe);
    if (!have) {
        fprintf(stderr, "cache: no %s device here: the test is skipped\n", kern_backend_name(b));
        cr_skip_test("no %s device", kern_backend_name(b));
    }
    hit_equals_miss(b);
}
Test(cache, vulkan_hit_computes_what_the_miss_computed) {
    gpu_hit_equals_miss(KERN_BACKEND_VULKAN);
}
Test(cache, cuda_hit_computes_what_the_miss_computed) { gpu_hit_equals_miss(KERN_BACKEND_CUDA); }

/* The one entry (*.kmod) of dir, its path into path. */
static void only_entry(const char *dir, char *path, size_t size) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".kmod")) {
            snprintf(path, size, "%s/%s", dir, e->d_name);
            n++;
        }
    }
    closedir(d);
    cr_assert_eq(n, 1);
}

/* Damages the entry: a flipped byte at `at` (from the end when negative), or cut to `cut`
 * bytes (cut >= 0). */
static void damage(const char *path, long at, long cut) {
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    if (cut >= 0) {
        cr_assert_eq(truncate(path, cut), 0);
        return;
    }
    int fd = open(path, O_RDWR);
    cr_assert(fd >= 0);
    off_t off = at < 0 ? st.st_size + at : at;
    unsigned char c;
    cr_assert_eq(pread(fd, &c, 1, off), 1);
    c ^= 0x20;
    cr_assert_eq(pwrite(fd, &c, 1, off), 1);
    close(fd);
}

/* A truncated entry, one with a flipped byte in its code, in its metadata or in its
 * checksum, and an empty one are each rebuilt (a new entry replaces it), never loaded: the
 * module computes what the C loops compute. */
Test(cache, damaged_entry_is_rebuilt) {
    struct {
        long at, cut;
        const char *what;
    } cases[] = {{0, 100, "truncated"},
                 {-200, -1, "a byte of its code"},
                 {40, -1, "its metadata"},
                 {-3, -1, "its checksum"},
                 {0, 0, "empty"}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char *dir = new_cache();
        kern_context *ctx = context(KERN_BACKEND_CPU, dir, false);
        kern_module_release(compile(ctx, SRC));
        char path[4096];
        only_entry(dir, path, sizeof path);
        struct stat before, after;
        cr_assert_eq(stat(path, &before), 0);
        damage(path, cases[c].at, cases[c].cut);
        kern_module *m = compile(ctx, SRC);
        cr_expect(runs_right(ctx, m), "%s", cases[c].what);
        cr_assert_eq(stat(path, &after), 0, "%s: rebuilt", cases[c].what);
        cr_expect_eq(after.st_size, before.st_size, "%s: a whole entry again", cases[c].what);
        rt_modfile mf;
        char key[65];
        snprintf(key, sizeof key, "%s", strrchr(path, '/') + 1); /* KEY.kmod */
        char *data = jit_cache_read(dir, key, "cpu", &mf);
        cr_expect_not_null(data, "%s: a sound entry again", cases[c].what);
        free(data);
        kern_context_release(ctx);
        rm_cache(dir);
    }
}

/* The key changes with the source, its name, each option that changes code and the
 * target; it is the same for the same inputs. */
Test(cache, key_changes_with_everything_that_changes_code) {
    kc_options base;
    kc_options_default(&base);
    char k0[65], k1[65], k[65];
    jit_cache_key("cpu", "a.kern", SRC, strlen(SRC), &base, k0);
    jit_cache_key("cpu", "a.kern", SRC, strlen(SRC), &base, k1);
    cr_expect_str_eq(k0, k1, "deterministic");
    cr_expect_eq(strlen(k0), 64);
    char *src2 = strdup(SRC);
    src2[strlen(src2) - 5] ^= 1; /* one bit of the source */
    jit_cache_key("cpu", "a.kern", src2, strlen(src2), &base, k);
    cr_expect_str_neq(k, k0, "source");
    free(src2);
    jit_cache_key("cpu", "b.kern", SRC, strlen(SRC), &base, k);
    cr_expect_str_neq(k, k0, "name");
    jit_cache_key("vulkan", "a.kern", SRC, strlen(SRC), &base, k);
    cr_expect_str_neq(k, k0, "target");
    kc_options o;
#define CHANGES(field, value)                                    \
    do {                                                         \
        o = base;                                                \
        o.field = value;                                         \
        jit_cache_key("cpu", "a.kern", SRC, strlen(SRC), &o, k); \
        cr_expect_str_neq(k, k0, #field);                        \
    } while (0)
    CHANGES(opt_level, 1);
    CHANGES(debug, true);
    CHANGES(checks, true);
    CHANGES(ad_stack_size, 77);
    CHANGES(grad, KC_GRAD_POSSIBLE);
    CHANGES(grad_only, "f.grad");
    CHANGES(jvp, true);
    CHANGES(arch, "sm_80");
    CHANGES(libdevice, "/x/libdevice.10.bc");
    CHANGES(simd, -1);
    CHANGES(scatter_adjoints, true);
    CHANGES(no_ckpt, true);
    CHANGES(no_neighbour_adds, true);
    CHANGES(no_vector_math, true);
    CHANGES(no_trip_sort, true);
    CHANGES(fast_math, true);
    CHANGES(own_math, true);
    CHANGES(own_math_fused, true);
    CHANGES(promote_f64, true);
#undef CHANGES
}

/* Options that change code give separate entries, each loading its own code: checked
 * code checks bounds, unchecked code of the same source does not. */
Test(cache, entries_are_per_options) {
    const char *src = "kernel k(x: f32[], i: i32) { x[i] = 1.0; }\n";
    char *dir = new_cache();
    for (int round = 0; round < 2; round++) { /* round 1: both from the cache */
        for (int checked = 0; checked < 2; checked++) {
            kern_context_options o = kern_context_options_default();
            o.cache_dir = dir;
            o.no_cache = false;
            o.no_checks = !checked;
            kern_context *ctx;
            cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK);
            kern_module *m = compile(ctx, src);
            kern_kernel *k;
            cr_assert_eq(kern_kernel_find(m, "k", &k), KERN_OK);
            int64_t n = 4;
            kern_buffer *x;
            cr_assert_eq(kern_buffer_create(ctx, KERN_F32, 1, &n, NULL, &x), KERN_OK);
            kern_arg a[] = {kern_arg_buffer(x), kern_arg_i32(checked ? 9 : 3)};
            kern_status s = kern_launch(k, a, 2);
            if (s == KERN_OK)
                s = kern_sync(ctx);
            if (checked)
                cr_expect_neq(s, KERN_OK, "round %d: the checked entry checks bounds", round);
            else
                cr_expect_eq(s, KERN_OK, "round %d: %s", round, kern_context_last_error(ctx));
            kern_context_release(ctx);
        }
        cr_expect_eq(entries(dir, NULL, NULL), 2, "round %d", round);
    }
    rm_cache(dir);
}

/* Two processes compiling the same module into one empty cache at once: both work, one
 * whole entry per module is left (no temporary file), and a third process loads it. */
Test(cache, concurrent_processes_leave_one_whole_entry) {
    char *dir = new_cache();
    pid_t kids[2];
    for (int i = 0; i < 2; i++) {
        kids[i] = fork();
        cr_assert(kids[i] >= 0);
        if (kids[i] == 0) {
            kern_context_options o = kern_context_options_default();
            o.cache_dir = dir;
            o.no_cache = false;
            kern_context *ctx;
            kern_module *m;
            bool ok = kern_context_create(&o, &ctx) == KERN_OK &&
                      kern_module_from_source(ctx, SRC, strlen(SRC), "cache.kern", &m) == KERN_OK &&
                      runs_right(ctx, m);
            kern_context_release(ctx);
            _exit(ok ? 0 : 1);
        }
    }
    for (int i = 0; i < 2; i++) {
        int st;
        cr_assert_eq(waitpid(kids[i], &st, 0), kids[i]);
        cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "process %d", i);
    }
    unsigned long ino, ino2;
    int others;
    cr_expect_eq(entries(dir, &ino, &others), 2);
    cr_expect_eq(others, 0, "no temporary file left");
    kern_context *ctx = context(KERN_BACKEND_CPU, dir, false);
    cr_expect(runs_right(ctx, compile(ctx, SRC)));
    cr_expect_eq(entries(dir, &ino2, NULL), 2);
    cr_expect_eq(ino2, ino, "loaded, not written");
    kern_context_release(ctx);
    rm_cache(dir);
}

/* no_cache (and $KERN_CACHE=0 through kern_context_options_default) writes nothing. */
Test(cache, off_switch_writes_nothing) {
    char *dir = new_cache();
    kern_context *ctx = context(KERN_BACKEND_CPU, dir, true);
    cr_expect(runs_right(ctx, compile(ctx, SRC)));
    cr_expect_eq(entries(dir, NULL, NULL), 0);
    kern_context_release(ctx);
    setenv("KERN_CACHE", "0", 1);
    cr_expect(kern_context_options_default().no_cache);
    setenv("KERN_CACHE", "1", 1);
    cr_expect(!kern_context_options_default().no_cache);
    setenv("KERN_CACHE_DIR", dir, 1);
    cr_expect_str_eq(kern_context_options_default().cache_dir, dir);
    ctx = context(KERN_BACKEND_CPU, NULL, false); /* the field NULL: $KERN_CACHE_DIR */
    cr_expect(runs_right(ctx, compile(ctx, SRC)));
    cr_expect_eq(entries(dir, NULL, NULL), 2);
    kern_context_release(ctx);
    rm_cache(dir);
}

/* A cache directory that is a file, or below a file, or that cannot be made (/proc), is
 * no cache: the module compiles and runs as without one. */
Test(cache, unusable_directory_is_no_cache) {
    char *dir = new_cache();
    char file[4096], below[4200];
    snprintf(file, sizeof file, "%s/plain", dir);
    FILE *f = fopen(file, "w");
    cr_assert_not_null(f);
    fputs("not a directory\n", f);
    fclose(f);
    snprintf(below, sizeof below, "%s/sub", file);
    const char *dirs[] = {file, below, "/proc/kern-cache-test"};
    for (int i = 0; i < 3; i++) {
        kern_context *ctx = context(KERN_BACKEND_CPU, dirs[i], false);
        cr_expect(runs_right(ctx, compile(ctx, SRC)), "%s", dirs[i]);
        kern_context_release(ctx);
    }
    struct stat st;
    cr_expect(stat(file, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 16, "left alone");
    rm_cache(dir);
}

/* A write that fails (a full disk: here a file size limit of 1000 bytes, below an entry's)
 * leaves nothing behind, not even its temporary file, and the module works. */
Test(cache, failed_write_leaves_nothing) {
    char *dir = new_cache();
    pid_t kid = fork();
    cr_assert(kid >= 0);
    if (kid == 0) {
        signal(SIGXFSZ, SIG_IGN); /* write fails with EFBIG instead */
        struct rlimit lim = {1000, 1000};
        setrlimit(RLIMIT_FSIZE, &lim);
        kern_context_options o = kern_context_options_default();
        o.cache_dir = dir;
        o.no_cache = false;
        kern_context *ctx;
        kern_module *m;
        bool ok = kern_context_create(&o, &ctx) == KERN_OK &&
                  kern_module_from_source(ctx, SRC, strlen(SRC), "cache.kern", &m) == KERN_OK &&
                  runs_right(ctx, m);
        kern_context_release(ctx);
        _exit(ok ? 0 : 1);
    }
    int st;
    cr_assert_eq(waitpid(kid, &st, 0), kid);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    int others;
    cr_expect_eq(entries(dir, NULL, &others), 0);
    cr_expect_eq(others, 0, "no temporary file left");
    rm_cache(dir);
}

/* A compile error is reported as without the cache, and nothing is kept. */
Test(cache, errors_are_not_cached) {
    char *dir = new_cache();
    kern_context *ctx = context(KERN_BACKEND_CPU, dir, false);
    const char *bad = "kernel k(x: f32[]) { x[0] = y; }\n";
    for (int i = 0; i < 2; i++) {
        kern_module *m;
        cr_expect_eq(kern_module_from_source(ctx, bad, strlen(bad), "bad.kern", &m),
                     KERN_ERR_COMPILE);
        cr_expect(strstr(kern_context_last_error(ctx), "bad.kern:1:"), "%s",
                  kern_context_last_error(ctx));
    }
    cr_expect_eq(entries(dir, NULL, NULL), 0);
    kern_context_release(ctx);
    rm_cache(dir);
}

/* kernc run with the cache in dir (KERN_CACHE=1 overrides the test binary's 0) and args;
 * returns the status, and the output (read back from a file in dir's parent: /tmp) into
 * *out (malloc'd). */
static int kernc(const char *dir, const char *args, char **out) {
    char cmd[8192], log[64];
    snprintf(log, sizeof log, "/tmp/kern-cache-test-%d.log", (int)getpid());
    snprintf(cmd, sizeof cmd, "KERN_CACHE=1 KERN_CACHE_DIR='%s' '%s' run %s >'%s' 2>&1", dir,
             KERNC_PATH, args, log);
    int st = system(cmd);
    size_t len;
    *out = kc_read_source(log, &len);
    cr_assert_not_null(*out);
    unlink(log);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* kernc run goes through the cache: a second run loads the entry and computes the same
 * (against 2 x), and a bounds error from it still names the source line; a compile that
 * prints a warning is not kept (so every run prints it); --no-cache keeps nothing. */
Test(cache, kernc_run_uses_the_cache) {
    char *dir = new_cache(), *work = new_cache();
    char src[1024], xs[1024], ys[1024], warn[1024], args[8192], err[256];
    snprintf(src, sizeof src, "%s/k.kern", work);
    snprintf(xs, sizeof xs, "%s/x.npy", work);
    snprintf(ys, sizeof ys, "%s/y.npy", work);
    snprintf(warn, sizeof warn, "%s/w.kern", work);
    FILE *f = fopen(src, "w");
    cr_assert_not_null(f);
    fputs("kernel k(x: f32[], y: f32[], n: i32) {\n"
          "    for i in 0..n { y[i] = x[i] * 2.0; }\n"
          "}\n",
          f);
    fclose(f);
    f = fopen(warn, "w");
    cr_assert_not_null(f);
    fputs("kernel sq(x: f32[]) {\n    for i in 0..len(x) { x[i] = x[i] * x[i]; }\n}\n", f);
    fclose(f);
    float x[4] = {1, -2, 0.5f, 3};
    int64_t n = 4;
    cr_assert_eq(kern_npy_write(xs, KERN_F32, 1, &n, x, err, sizeof err), KERN_OK, "%s", err);
    unsigned long ino0 = 0;
    for (int round = 0; round < 2; round++) { /* round 1: from the cache */
        char *out;
        snprintf(args, sizeof args, "%s k x=%s y=%s n=4 --save y=%s", src, xs, xs, ys);
        cr_expect_eq(kernc(dir, args, &out), 0, "round %d: %s", round, out);
        free(out);
        kern_npy y;
        cr_assert_eq(kern_npy_read(ys, &y, err, sizeof err), KERN_OK, "%s", err);
        for (int i = 0; i < 4; i++)
            cr_expect_eq(((float *)y.data)[i], 2 * x[i], "round %d: y[%d]", round, i);
        kern_npy_free(&y);
        snprintf(args, sizeof args, "%s k x=%s y=%s n=5", src, xs, xs);
        cr_expect_eq(kernc(dir, args, &out), 1, "round %d: %s", round, out);
        cr_expect(strstr(out, "k.kern:2:"), "round %d: the line of the bounds error: %s", round,
                  out);
        free(out);
        unsigned long ino;
        cr_expect_eq(entries(dir, &ino, NULL), 1, "round %d", round);
        if (round == 0)
            ino0 = ino;
        cr_expect_eq(ino, ino0, "round %d: loaded, not written again", round);
        snprintf(args, sizeof args, "%s sq.grad --no-grad-check x=%s", warn, xs);
        cr_expect_eq(kernc(dir, args, &out), 0, "round %d: %s", round, out);
        cr_expect(strstr(out, "warning:"), "round %d: the warning, every time: %s", round, out);
        free(out);
        cr_expect_eq(entries(dir, NULL, NULL), 1, "round %d: nothing kept of a warning", round);
    }
    char *other = new_cache(), *out;
    snprintf(args, sizeof args, "%s k x=%s y=%s n=4 --no-cache", src, xs, xs);
    cr_expect_eq(kernc(other, args, &out), 0, "%s", out);
    free(out);
    cr_expect_eq(entries(other, NULL, NULL), 0, "--no-cache");
    rm_cache(other);
    rm_cache(dir);
    rm_cache(work);
}

static void sha_hex(const void *data, size_t len, size_t reps, char out[65]) {
    kern_sha256 s;
    kern_sha256_init(&s);
    for (size_t r = 0; r < reps; r++)
        kern_sha256_update(&s, data, len);
    unsigned char d[32];
    kern_sha256_final(&s, d);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* FIPS 180-4's examples (and NIST's one million a's, fed 1000 bytes at a time). */
Test(cache, sha256_matches_the_standard) {
    char h[65];
    sha_hex("abc", 3, 1, h);
    cr_expect_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha_hex("", 0, 1, h);
    cr_expect_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha_hex(two, strlen(two), 1, h);
    cr_expect_str_eq(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char a[1000];
    memset(a, 'a', sizeof a);
    sha_hex(a, sizeof a, 1000, h);
    cr_expect_str_eq(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
