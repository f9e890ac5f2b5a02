/* compile_cache.c - compile-cache-bench (bench/README.md, "compile-cache"): what the
 * compile cache (docs/runtime.md) saves a process. For every .kern file of bench/kernels, a first
 * process compiles the file into an empty cache directory (kern_module_from_file_source,
 * then the first lookup of its first K.grad, which builds the gradient) and a second,
 * fresh process does the same with the entries the first one wrote; each is timed inside
 * its process (LLVM's start-up included), milliseconds, the median of --reps pairs.
 *
 *     build/bench/compile-cache-bench [--target cpu|cuda|vulkan] [--reps N] [FILE.kern ...]
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../include/kern.h"
#include "bench_util.h"

/* One process's times: the module, its first K.grad (-1: none), and whether it worked. */
typedef struct times {
    double module_ms, grad_ms;
    int ok;
} times;

static times one_process(kern_backend b, const char *dir, const char *path) {
    times t = {0, -1, 0};
    kern_context_options o = kern_context_options_default();
    o.backend = b;
    o.threads = 1;
    o.cache_dir = dir;
    o.no_cache = false;
    kern_context *ctx;
    kern_module *m = NULL;
    if (kern_context_create(&o, &ctx) != KERN_OK) {
        fprintf(stderr, "compile-cache-bench: %s\n", kern_context_last_error(ctx));
        kern_context_release(ctx);
        return t;
    }
    double t0 = bench_now_ms();
    if (kern_module_from_file_source(ctx, path, &m) == KERN_OK) {
        t.module_ms = bench_now_ms() - t0;
        t.ok = 1;
        for (int i = 0; i < kern_module_kernel_count(m); i++) {
            const char *n = kern_module_kernel_name(m, i);
            size_t l = strlen(n);
            kern_kernel *k;
            if (l > 5 && !strcmp(n + l - 5, ".grad")) {
                double t1 = bench_now_ms();
                t.ok = kern_kernel_find(m, n, &k) == KERN_OK;
                t.grad_ms = bench_now_ms() - t1;
                break;
            }
        }
    }
    if (!t.ok)
        fprintf(stderr, "compile-cache-bench: %s: %s\n", path, kern_context_last_error(ctx));
    kern_context_release(ctx);
    return t;
}

/* one_process in a fresh process (fork: the parent never starts LLVM). */
static times in_child(kern_backend b, const char *dir, const char *path) {
    int fd[2];
    times t = {0, -1, 0};
    if (pipe(fd) != 0)
        return t;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        times r = one_process(b, dir, path);
        _exit(write(fd[1], &r, sizeof r) == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fd[1]);
    if (pid > 0 && read(fd[0], &t, sizeof t) != (ssize_t)sizeof t)
        t.ok = 0;
    close(fd[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return t;
}

static void rm_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[4096];
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.' || (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    kern_backend b = KERN_BACKEND_CPU;
    int reps = 3;
    const char *files[256];
    int nfiles = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--target") && i + 1 < argc) {
            const char *t = argv[++i];
            b = !strcmp(t, "cuda")     ? KERN_BACKEND_CUDA
                : !strcmp(t, "vulkan") ? KERN_BACKEND_VULKAN
                : !strcmp(t, "cpu")    ? KERN_BACKEND_CPU
                                       : (kern_backend)-1;
            if ((int)b < 0) {
                fprintf(stderr, "compile-cache-bench: --target %s is not cpu, cuda or vulkan\n", t);
                return 2;
            }
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (nfiles < 256) {
            files[nfiles++] = argv[i];
        }
    }
    if (reps < 1 || reps > 99)
        reps = 3;
    if (!nfiles) { /* every benchmark kernel */
        DIR *d = opendir(KERN_BENCH_KERNELS_DIR);
        struct dirent *e;
        while (d && (e = readdir(d)) && nfiles < 256) {
            size_t l = strlen(e->d_name);
            if (l > 5 && !strcmp(e->d_name + l - 5, ".kern")) {
                char *p = malloc(strlen(KERN_BENCH_KERNELS_DIR) + l + 2);
                sprintf(p, "%s/%s", KERN_BENCH_KERNELS_DIR, e->d_name);
                files[nfiles++] = p;
            }
        }
        if (d)
            closedir(d);
        qsort(files, (size_t)nfiles, sizeof *files, by_name);
    }
    printf("compile-cache: %s, first and second process, median of %d (ms)\n", kern_backend_name(b),
           reps);
    printf("%-22s %12s %12s %14s %14s\n", "file", "1st module", "2nd module", "1st K.grad",
           "2nd K.grad");
    int bad = 0;
    for (int f = 0; f < nfiles; f++) {
        double m1[99], m2[99], g1[99], g2[99];
        for (int r = 0; r < reps; r++) {
            char dir[] = "/tmp/kern-cache-bench.XXXXXX";
            if (!mkdtemp(dir))
                return 2;
            times a = in_child(b, dir, files[f]), c = in_child(b, dir, files[f]);
            rm_dir(dir);
            bad |= !a.ok || !c.ok;
            m1[r] = a.module_ms;
            m2[r] = c.module_ms;
            g1[r] = a.grad_ms;
            g2[r] = c.grad_ms;
        }
        const char *base = strrchr(files[f], '/') ? strrchr(files[f], '/') + 1 : files[f];
        printf("%-22s %12.2f %12.2f %14.2f %14.2f\n", base, bench_median(m1, reps),
               bench_median(m2, reps), bench_median(g1, reps), bench_median(g2, reps));
    }
    return bad;
}
