/* trips_ref.h - the hand-written SIMD-across-items C side of grad-bench's "trips" part
 * (bench/trips_ref.c, bench/README.md).
 *
 * The workload of bench/gpu-bench/divergent.kern: item i runs count[i] steps of
 * x = 0.5 sin(x) w[t] + 0.4 x + 0.1 from x0[i], out[i] = x; the gradient of
 * L = sum_i out[i] g[i] with respect to x0 and w. Eight items share the lanes of an AVX2
 * vector, and their time loop runs to the largest count of the eight with the lanes past
 * their own count masked, so that the lanes share the step index t (as the CUDA baseline
 * aligns a warp). sin and cos are glibc's vector functions (libmvec, _ZGVdN8v_sinf,
 * _ZGVdN8v_cosf), called explicitly: no -ffast-math. OpenMP threads take blocks of items. */
#ifndef KERN_BENCH_TRIPS_REF_H
#define KERN_BENCH_TRIPS_REF_H

#include <stdbool.h>
#include <stdint.h>

/* The compiler and flags, for the benchmark's header. */
const char *trips_ref_compiler(void);
/* Whether this CPU runs the AVX2 code (false: the hand side is not measured). */
bool trips_ref_supported(void);
/* omp_set_num_threads(n); returns omp_get_max_threads() afterwards. */
int trips_ref_set_threads(int n);
/* out[i] for every item */
void trips_ref_forward(int64_t n, int64_t steps, const float *x0, const float *w,
                       const int32_t *count, float *out);
/* out[i], and the gradient with seed g: x0grad[i] = dL/dx0[i], wgrad[t] = dL/dw[t] (set,
 * not added to). x of every step is kept, per thread, for a block of items. */
void trips_ref_grad(int64_t n, int64_t steps, const float *x0, const float *w, const int32_t *count,
                    const float *g, float *out, float *x0grad, float *wgrad);

#endif
