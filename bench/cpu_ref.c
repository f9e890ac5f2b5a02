/* cpu_ref.c - hand-written C + OpenMP versions of the cpu-bench kernels (cpu_ref.h).
 *
 * Built apart from the project's flags (bench/meson.build): by clang-19 with
 * `-O3 -march=native -fopenmp -ffp-contract=off` where clang-19 exists, else by the project
 * compiler with the same flags. -ffp-contract=off because kern never fuses a multiply and
 * an add into an fma; with contraction the results would differ in the last bits and the
 * comparison would be unfair in the C code's favour.
 *
 * This is what a careful C programmer writes for each algorithm: a `parallel for` over the
 * outermost index, the inner loops left to the auto-vectorizer (no `restrict`, no `simd`
 * pragmas that would permit reassociation, no intrinsics). The loops say
 * schedule(runtime) so that the benchmark can choose the schedule (cpu_ref_set_schedule);
 * it uses `static` (an even split, OpenMP's usual default) unless told otherwise. */
#include "cpu_ref.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#ifndef CPU_REF_FLAGS /* set by bench/meson.build */
#define CPU_REF_FLAGS "(flags unknown)"
#endif

const char *cpu_ref_compiler(void) {
#if defined(__clang__)
    return "clang " __clang_version__ ", " CPU_REF_FLAGS;
#elif defined(__GNUC__)
    return "gcc " __VERSION__ ", " CPU_REF_FLAGS;
#else
    return "cc, " CPU_REF_FLAGS;
#endif
}

int cpu_ref_set_threads(int n) {
    omp_set_num_threads(n);
    return omp_get_max_threads();
}

int cpu_ref_set_schedule(const char *kind) {
    if (strcmp(kind, "static") == 0)
        omp_set_schedule(omp_sched_static, 0);
    else if (strcmp(kind, "guided") == 0)
        omp_set_schedule(omp_sched_guided, 0);
    else
        return -1;
    return 0;
}

void cpu_ref_saxpy(int64_t n, float a, const float *x, float *y) {
#pragma omp parallel for schedule(runtime)
    for (int64_t i = 0; i < n; i++)
        y[i] = a * x[i] + y[i];
}

void cpu_ref_jacobi(int64_t n, int64_t m, const float *src, float *dst) {
    /* the interior as one 2-D loop nest, the border copied apart. (A first version went
     * row by row through row pointers, with the border test per row: with src and dst at
     * the same offset modulo 4096, as two large allocations are, it ran at half the speed,
     * the stores of a row aliasing the loads of the next in the CPU's 4K disambiguation.) */
#pragma omp parallel
    {
#pragma omp for schedule(runtime) nowait
        for (int64_t i = 1; i < n - 1; i++)
            for (int64_t j = 1; j < m - 1; j++)
                dst[i * m + j] = 0.25f * (src[(i - 1) * m + j] + src[(i + 1) * m + j] +
                                          src[i * m + j - 1] + src[i * m + j + 1]);
#pragma omp for schedule(runtime) nowait
        for (int64_t i = 0; i < n; i++) {
            dst[i * m] = src[i * m];
            dst[i * m + m - 1] = src[i * m + m - 1];
        }
#pragma omp for schedule(runtime)
        for (int64_t j = 1; j < m - 1; j++) {
            dst[j] = src[j];
            dst[(n - 1) * m + j] = src[(n - 1) * m + j];
        }
    }
}

void cpu_ref_simulate(int64_t n, int32_t steps, const float *x0, const float *w, float *out) {
#pragma omp parallel for schedule(runtime)
    for (int64_t i = 0; i < n; i++) {
        float x = x0[i];
        for (int32_t t = 0; t < steps; t++)
            x = sinf(x) * w[t] + x;
        out[i] = x;
    }
}

void cpu_ref_sumsq_reduction(int64_t n, const float *x, float *s) {
    float sum = 0.0f;
#pragma omp parallel for schedule(runtime) reduction(+ : sum)
    for (int64_t i = 0; i < n; i++)
        sum += x[i] * x[i];
    s[0] += sum;
}

void cpu_ref_sumsq_atomic(int64_t n, const float *x, float *s) {
#pragma omp parallel for schedule(runtime)
    for (int64_t i = 0; i < n; i++) {
        float v = x[i] * x[i];
#pragma omp atomic
        s[0] += v;
    }
}

void cpu_ref_particles(int64_t nt, int64_t np, int64_t nd, float k, float dt, float *x, float *v) {
    /* one parallel region for the whole trajectory; the implicit barrier of each `for`
     * orders the steps */
#pragma omp parallel
    for (int64_t t = 1; t < nt; t++) {
#pragma omp for schedule(runtime)
        for (int64_t p = 0; p < np; p++) {
            for (int64_t d = 0; d < nd; d++) {
                int64_t prev = ((t - 1) * np + p) * nd + d;
                int64_t cur = (t * np + p) * nd + d;
                float a = -k * x[prev];
                float vn = v[prev] + dt * a;
                v[cur] = vn;
                x[cur] = x[prev] + dt * vn;
            }
        }
    }
}
