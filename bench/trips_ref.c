/* trips_ref.c - the hand-written SIMD-across-items C side of grad-bench's "trips" part:
 * see trips_ref.h. Built apart from the project's flags (bench/meson.build): -O3
 * -march=native -mavx2 -fopenmp -ffp-contract=off (kern fuses no multiply-add either).
 *
 * A block of VECS vectors of LANES items runs the time loop together: at step t, vector v
 * takes the step when t is below its largest count, with the lanes past their own count
 * masked (they keep x, and in the reverse they keep the adjoint and add 0 to w.grad[t]);
 * the VECS independent vectors give the CPU several sin calls to overlap. The gradient
 * keeps x of every step of the block (steps x VECS vectors per thread), then walks t down
 * from the block's largest count. w.grad is summed per thread, then over the threads. */
#include "trips_ref.h"

#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TRIPS_REF_FLAGS
#define TRIPS_REF_FLAGS "?"
#endif

/* glibc's vector math (libmvec): the AVX2 variants, 8 lanes */
__m256 _ZGVdN8v_sinf(__m256 x);
__m256 _ZGVdN8v_cosf(__m256 x);

enum { LANES = 8, VECS = 16, BLOCK = LANES * VECS };

const char *trips_ref_compiler(void) { return "cc " __VERSION__ ", " TRIPS_REF_FLAGS; }

bool trips_ref_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}

int trips_ref_set_threads(int n) {
    omp_set_num_threads(n);
    return omp_get_max_threads();
}

/* A block's items from `first`: x (x0, then the running value) and the counts in vectors,
 * lanes past n with count 0; the largest count of each vector and of the block. */
typedef struct block {
    __m256 x[VECS];
    __m256i c[VECS];
    int vmax[VECS], bmax;
} block;

static void block_load(block *b, int64_t first, int64_t n, const float *x0, const int32_t *count) {
    b->bmax = 0;
    for (int v = 0; v < VECS; v++) {
        float xl[LANES];
        int32_t cl[LANES];
        int m = 0;
        for (int l = 0; l < LANES; l++) {
            int64_t i = first + v * LANES + l;
            xl[l] = i < n ? x0[i] : 0.0f;
            cl[l] = i < n ? count[i] : 0;
            m = cl[l] > m ? cl[l] : m;
        }
        b->x[v] = _mm256_loadu_ps(xl);
        b->c[v] = _mm256_loadu_si256((const __m256i *)cl);
        b->vmax[v] = m;
        b->bmax = m > b->bmax ? m : b->bmax;
    }
}

/* the lanes below n of vectors src[0 .. VECS-1] into dst[first ..] */
static void block_store(const __m256 *src, int64_t first, int64_t n, float *dst) {
    for (int v = 0; v < VECS; v++) {
        float l8[LANES];
        _mm256_storeu_ps(l8, src[v]);
        for (int l = 0; l < LANES && first + v * LANES + l < n; l++)
            dst[first + v * LANES + l] = l8[l];
    }
}

/* the lanes whose count is above t */
static inline __m256 active(__m256i c, __m256i t) {
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(c, t));
}

static inline __m256 step(__m256 x, __m256 wt) {
    return 0.5f * _ZGVdN8v_sinf(x) * wt + 0.4f * x + 0.1f;
}

/* the block's steps; with xs, x of every step first (xs[t * VECS + v]) */
static inline void block_forward(block *b, const float *w, __m256 *xs) {
    for (int t = 0; t < b->bmax; t++) {
        __m256 wt = _mm256_set1_ps(w[t]);
        __m256i tv = _mm256_set1_epi32(t);
        for (int v = 0; v < VECS; v++)
            if (t < b->vmax[v]) {
                if (xs)
                    xs[t * VECS + v] = b->x[v];
                b->x[v] = _mm256_blendv_ps(b->x[v], step(b->x[v], wt), active(b->c[v], tv));
            }
    }
}

void trips_ref_forward(int64_t n, int64_t steps, const float *x0, const float *w,
                       const int32_t *count, float *out) {
    (void)steps;
    int64_t nb = (n + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bi = 0; bi < nb; bi++) {
        block b;
        block_load(&b, bi * BLOCK, n, x0, count);
        block_forward(&b, w, NULL);
        block_store(b.x, bi * BLOCK, n, out);
    }
}

static float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void trips_ref_grad(int64_t n, int64_t steps, const float *x0, const float *w, const int32_t *count,
                    const float *g, float *out, float *x0grad, float *wgrad) {
    int64_t nb = (n + BLOCK - 1) / BLOCK;
    int threads = omp_get_max_threads();
    float *wpart = calloc((size_t)threads * (size_t)steps, sizeof *wpart);
    if (!wpart) {
        fprintf(stderr, "trips_ref: out of memory\n");
        exit(1);
    }
#pragma omp parallel
    {
        float *wg = wpart + (size_t)omp_get_thread_num() * (size_t)steps;
        __m256 *xs = aligned_alloc(32, (size_t)steps * VECS * sizeof *xs);
        if (!xs) {
            fprintf(stderr, "trips_ref: out of memory\n");
            exit(1);
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t bi = 0; bi < nb; bi++) {
            block b;
            block_load(&b, bi * BLOCK, n, x0, count);
            block_forward(&b, w, xs);
            block_store(b.x, bi * BLOCK, n, out);
            block a; /* the adjoints of x, from the seed */
            block_load(&a, bi * BLOCK, n, g, count);
            for (int t = b.bmax - 1; t >= 0; t--) {
                __m256 wt = _mm256_set1_ps(w[t]), wsum = _mm256_setzero_ps();
                __m256i tv = _mm256_set1_epi32(t);
                for (int v = 0; v < VECS; v++)
                    if (t < b.vmax[v]) {
                        __m256 x = xs[t * VECS + v], m = active(b.c[v], tv);
                        __m256 s = _ZGVdN8v_sinf(x), co = _ZGVdN8v_cosf(x);
                        wsum += _mm256_and_ps(m, a.x[v] * 0.5f * s);
                        a.x[v] = _mm256_blendv_ps(a.x[v], a.x[v] * (0.5f * co * wt + 0.4f), m);
                    }
                wg[t] += hsum(wsum);
            }
            block_store(a.x, bi * BLOCK, n, x0grad);
        }
        free(xs);
    }
    for (int64_t t = 0; t < steps; t++) {
        float s = 0;
        for (int th = 0; th < threads; th++)
            s += wpart[(size_t)th * (size_t)steps + (size_t)t];
        wgrad[t] = s;
    }
    free(wpart);
}
