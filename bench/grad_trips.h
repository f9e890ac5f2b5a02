/* grad_trips.h - grad-bench's "trips" part (bench/grad_trips.c, bench/README.md). */
#ifndef KERN_BENCH_GRAD_TRIPS_H
#define KERN_BENCH_GRAD_TRIPS_H

#include <stdbool.h>

typedef struct trips_opts {
    int threads, reps, warmup;
    int shrink;         /* items / shrink (--quick) */
    const char *dir;    /* bench/gpu-bench: loop.kern and divergent.kern */
} trips_opts;

/* Runs the part and prints its table; false when a check failed. */
bool grad_trips_run(const trips_opts *o);

#endif
