/* cpu_ref.h - the hand-written C versions of the cpu-bench kernels (bench/cpu_ref.c).
 *
 * Each function computes exactly what the kernel of the same name in bench/kernels/ does,
 * with the same floating-point operations in the same order (no contraction into fma), so
 * that results can be compared element by element. They run on OpenMP threads; the
 * number and the loops' schedule are set once with cpu_ref_set_threads and
 * cpu_ref_set_schedule. Arrays are row-major, as kern's buffers.
 * Like kern's array parameters, pointers may alias (no `restrict`). */
#ifndef KERN_BENCH_CPU_REF_H
#define KERN_BENCH_CPU_REF_H

#include <stdint.h>

/* The compiler and flags this file was built with, for the benchmark's header. */
const char *cpu_ref_compiler(void);
/* omp_set_num_threads(n); returns omp_get_max_threads() afterwards. */
int cpu_ref_set_threads(int n);
/* The schedule of every loop: "static" (an even split) or "guided" (chunks claimed at run
 * time, shrinking), with the runtime's default chunk (omp_set_schedule(kind, 0)); -1 for
 * another name. */
int cpu_ref_set_schedule(const char *kind);

/* y[i] = a * x[i] + y[i], i < n */
void cpu_ref_saxpy(int64_t n, float a, const float *x, float *y);
/* one Jacobi sweep of an n x m grid: interior 0.25 * (N + S + W + E), border copied */
void cpu_ref_jacobi(int64_t n, int64_t m, const float *src, float *dst);
/* out[i] = x0[i] after `steps` iterations of x = sinf(x) * w[t] + x */
void cpu_ref_simulate(int64_t n, int32_t steps, const float *x0, const float *w, float *out);
/* s[0] += sum of x[i] * x[i]: an OpenMP reduction (per-thread partial sums) */
void cpu_ref_sumsq_reduction(int64_t n, const float *x, float *s);
/* s[0] += x[i] * x[i] for every i with `#pragma omp atomic`, as kern's `+=` does */
void cpu_ref_sumsq_atomic(int64_t n, const float *x, float *s);
/* the particle steps t = 1 .. nt-1 on x, v of shape [nt, np, nd] */
void cpu_ref_particles(int64_t nt, int64_t np, int64_t nd, float k, float dt, float *x, float *v);

#endif
