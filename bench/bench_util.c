/* bench_util.c - see bench_util.h. */
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double bench_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

char *bench_read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb)
                free(buf);
            buf = nb;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

void bench_load_average(char *buf, size_t size) {
    snprintf(buf, size, "?");
    FILE *f = fopen("/proc/loadavg", "r");
    if (f && fgets(buf, (int)size, f))
        buf[strcspn(buf, "\n")] = 0;
    if (f)
        fclose(f);
}

void bench_settle(void) { usleep(300 * 1000); }

void bench_measure(bench_side *sides, int n, int reps, int warmup) {
    int per = (reps + BENCH_ROUNDS - 1) / BENCH_ROUNDS;
    double *t = malloc(sizeof *t * (size_t)(n * per * BENCH_ROUNDS));
    if (!t) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    for (int r = 0; r < BENCH_ROUNDS; r++) {
        for (int s = 0; s < n; s++) {
            for (int i = 0; i < warmup; i++)
                sides[s].f(sides[s].u);
            for (int i = 0; i < per; i++)
                t[(s * BENCH_ROUNDS + r) * per + i] = sides[s].f(sides[s].u);
            bench_settle();
        }
    }
    for (int s = 0; s < n; s++)
        sides[s].ms = bench_median(t + s * BENCH_ROUNDS * per, BENCH_ROUNDS * per);
    free(t);
}
