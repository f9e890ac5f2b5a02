/* bench_util.h - what the CPU benchmarks share: a monotonic clock, medians, reading a
 * file, the load average, and the pause that lets idle worker threads go to sleep. */
#ifndef KERN_BENCH_UTIL_H
#define KERN_BENCH_UTIL_H

#include <stddef.h>

/* Milliseconds of CLOCK_MONOTONIC. */
double bench_now_ms(void);
/* The median of v[0..n-1], n >= 1 (sorts v). */
double bench_median(double *v, int n);
/* The whole file, malloc'd (the caller frees); NULL when it cannot be read. */
char *bench_read_text(const char *path, size_t *len);
/* The first line of /proc/loadavg, or "?". */
void bench_load_average(char *buf, size_t size);
/* 300 ms: idle OpenMP and pool threads stop spinning before the next side is timed. */
void bench_settle(void);

/* One run of a side; returns its time in ms (measured by the side itself, so that
 * untimed preparation such as re-seeding adjoints stays out). */
typedef double (*bench_run_fn)(void *u);

typedef struct bench_side {
    bench_run_fn f;
    void *u;
    double ms; /* bench_measure's result: the median */
} bench_side;

/* The rounds of bench_measure */
enum { BENCH_ROUNDS = 3 };

/* Times the sides in BENCH_ROUNDS rounds that interleave them (side 0, side 1, ..., side 0, ...): in
 * each round every side does `warmup` untimed runs and ceil(reps / BENCH_ROUNDS) timed ones,
 * then
 * bench_settle; sides[s].ms gets the median of its timed runs. */
void bench_measure(bench_side *sides, int n, int reps, int warmup);

#endif
