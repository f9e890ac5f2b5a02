// baseline.cu - the hand-written CUDA side of the GPU benchmark (bench/gpu-bench/README.md):
// the workloads "loop", "ragged", "divergent" and "kepler" (the `while` workload) of
// workload.h written the way a CUDA programmer would.
//
//   forward:  one thread per work item, T_i steps in registers, out[i] = x.
//   fwd+rev:  a forward kernel that also stores every x_t (the input of step t) slot-major,
//             xs[t * n + i] (neighbouring threads write neighbouring words), into a buffer
//             allocated once; then a reverse kernel that walks t down from T_i - 1, reloads
//             x_t, and carries the adjoint a: w.grad[t] += a * 0.5 sin(x_t),
//             a *= 0.5 cos(x_t) w[t] + 0.4; x0.grad[i] = a at the end. w's gradient is summed
//             per warp (shuffles), then per block in shared memory (a shared float atomic per
//             warp and step), then one global atomicAdd per block and step.
//             ragged and divergent: the reverse runs the warp to its longest item, lanes
//             past their own count idle, so that the lanes of a warp share the step t.
//   kepler:   the forward stores x of every iteration slot-major and the item's iteration
//             count; the reverse walks k down from the warp's largest count, aligned the same
//             way; each item adds 0.6 dL/de into w.grad[i mod T] with one atomicAdd.
//   forward_fast_ms: the forward kernels again with __sinf instead of sinf (a template
//             parameter), the counterpart of kern's --fast-math (check_fast_out: its out
//             against the double-precision reference, tolerance GB_FAST_TOL).
//
// Build and run on the GPU machine (run.sh does both):
//   nvcc -O3 -arch=sm_90 -o baseline bench/gpu-bench/baseline.cu
//   ./baseline [--n N] [--steps T] [--reps N] [--warmup N] [--check N] [--only PARTS]
//              [--ckpt K] [--dump DIR]
// PARTS: a comma-separated list of loop, ragged, ckpt (loop_ckptK), huge (kern's alone:
// nothing here), divergent and kepler; all by default.
// Prints `baseline WORKLOAD METRIC VALUE` lines ('#' lines are comments): forward_ms, fwdrev_ms
// (the two kernels of fwd+rev together), fwdstore_ms and rev_ms (each alone), medians of
// --reps runs after --warmup runs, timed with cudaEvents around the kernels only (w.grad is
// zeroed before the start event, as kern-bench re-seeds its adjoints outside its window);
// forward_b2b_ms, fwdrev_b2b_ms and forward_fast_b2b_ms: 16 runs back to back, one cudaDeviceSynchronize after
// the last, host clock, per run (median of 5), as kern-bench measures its own *_b2b_ms;
// check_* (the gradient with g kept on a subset of items against workload.h's
// double-precision reference). --dump DIR writes the full-size results of the seed g as raw
// float32 files DIR/baseline_WORKLOAD_{out,x0grad,wgrad}.f32, which kern-bench --compare DIR
// and jax_bench.py --compare DIR read.
//
// loop_ckptK (--only ckpt; K = --ckpt, 32 by default; 8, 16, 32 or 64): the loop workload
// with checkpoints, as a CUDA programmer would write it under a memory limit: the forward
// kernel stores x every K steps only (cp[s * n + i] = x_{sK}, slot-major: n * ceil(T/K)
// floats, 1/K of the store-all buffer); the reverse kernel walks the segments down, recomputes
// each segment's K values of x from its checkpoint into registers (a fully unrolled array),
// then runs the segment's reverse steps as k_reverse does. Metrics as for loop, and
// saved_bytes (the buffer of saved x), vs_store_all (its fwdrev_ms over loop's, when loop
// ran) and vs_store_all_maxrel (its results against loop's: the same arithmetic, so 0 or
// last-bit differences).
// Exit status: 0 when every check passed, 1 when one failed or CUDA failed, 2 bad usage,
// 3 no CUDA device.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "workload.h"

#define CK(call)                                                                    \
    do {                                                                            \
        cudaError_t e_ = (call);                                                    \
        if (e_ != cudaSuccess) {                                                    \
            fprintf(stderr, "baseline: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                    cudaGetErrorString(e_));                                        \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

enum { BLOCK = 256, B2B = 16 };

// count == nullptr: every item runs `steps` steps. FAST: __sinf (the forward at equal math
// with kern's --fast-math), else sinf (kern's default)
template <bool FAST>
__global__ void __launch_bounds__(BLOCK)
    k_forward(const float *__restrict__ x0, const float *__restrict__ w,
              const int *__restrict__ count, float *__restrict__ out, int n, int steps) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n)
        return;
    int T = count ? count[i] : steps;
    float x = x0[i];
    for (int t = 0; t < T; t++)
        x = 0.5f * (FAST ? __sinf(x) : sinf(x)) * w[t] + 0.4f * x + 0.1f;
    out[i] = x;
}

// kepler (workload.h): x = m + e sin(x) from x = m until |d| <= GB_KEPLER_TOL or `steps`
// iterations; FAST as in k_forward
template <bool FAST>
__global__ void __launch_bounds__(BLOCK)
    k_kepler(const float *__restrict__ x0, const float *__restrict__ w, float *__restrict__ out,
             int n, int steps) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n)
        return;
    float m = x0[i], e = 0.6f * w[i % steps], x = m, d = 1.0f;
    for (int k = 0; k < steps && fabsf(d) > (float)GB_KEPLER_TOL; k++) {
        float xn = m + e * (FAST ? __sinf(x) : sinf(x));
        d = xn - x;
        x = xn;
    }
    out[i] = x;
}

// kepler's forward that keeps what the reverse needs: x of every iteration k slot-major,
// xs[k * n + i], and the item's iteration count
__global__ void __launch_bounds__(BLOCK)
    k_kepler_store(const float *__restrict__ x0, const float *__restrict__ w,
                   float *__restrict__ out, float *__restrict__ xs, int *__restrict__ iters, int n,
                   int steps) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n)
        return;
    float m = x0[i], e = 0.6f * w[i % steps], x = m, d = 1.0f;
    int k = 0;
    while (k < steps && fabsf(d) > (float)GB_KEPLER_TOL) {
        xs[(size_t)k * n + i] = x;
        float xn = m + e * sinf(x);
        d = xn - x;
        x = xn;
        k++;
    }
    out[i] = x;
    iters[i] = k;
}

// kepler's reverse, aligned as k_reverse: the warp walks k down from its largest count, lanes
// past their own count idle, so the lanes of a warp load row k of xs together. Each item adds
// 0.6 dL/de into w.grad[i mod steps] (neighbouring items, neighbouring elements).
__global__ void __launch_bounds__(BLOCK)
    k_kepler_reverse(const float *__restrict__ xs, const float *__restrict__ w,
                     const int *__restrict__ iters, const float *__restrict__ g,
                     float *__restrict__ x0grad, float *__restrict__ wgrad, int n, int steps) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    bool valid = i < n;
    int K = valid ? iters[i] : 0;
    int wmax = __reduce_max_sync(0xffffffffu, K);
    float e = valid ? 0.6f * w[i % steps] : 0.0f, a = valid ? g[i] : 0.0f, am = 0.0f, ae = 0.0f;
    for (int k = wmax - 1; k >= 0; k--) {
        if (k < K) {
            float s, co;
            sincosf(xs[(size_t)k * n + i], &s, &co);
            am += a;
            ae += a * s;
            a *= e * co;
        }
    }
    if (valid) {
        x0grad[i] = am + a;
        atomicAdd(&wgrad[i % steps], 0.6f * ae);
    }
}

__global__ void __launch_bounds__(BLOCK)
    k_forward_store(const float *__restrict__ x0, const float *__restrict__ w,
                    const int *__restrict__ count, float *__restrict__ out, float *__restrict__ xs,
                    int n, int steps) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n)
        return;
    int T = count ? count[i] : steps;
    float x = x0[i];
    for (int t = 0; t < T; t++) {
        xs[(size_t)t * n + i] = x;
        x = 0.5f * sinf(x) * w[t] + 0.4f * x + 0.1f;
    }
    out[i] = x;
}

// dynamic shared memory: `steps` floats, the block's share of w.grad
__global__ void __launch_bounds__(BLOCK)
    k_reverse(const float *__restrict__ xs, const float *__restrict__ w,
              const int *__restrict__ count, const float *__restrict__ g,
              float *__restrict__ x0grad, float *__restrict__ wgrad, int n, int steps) {
    extern __shared__ float wsum[];
    __shared__ int tmax;
    int i = blockIdx.x * BLOCK + threadIdx.x, lane = threadIdx.x & 31;
    bool valid = i < n;
    int T = valid ? (count ? count[i] : steps) : 0;
    for (int t = threadIdx.x; t < steps; t += BLOCK)
        wsum[t] = 0.0f;
    if (threadIdx.x == 0)
        tmax = 0;
    __syncthreads();
    // the warp runs to its longest item; lanes past their own count add 0 and keep a
    int wmax = __reduce_max_sync(0xffffffffu, T);
    if (lane == 0)
        atomicMax(&tmax, wmax);
    float a = valid ? g[i] : 0.0f;
    for (int t = wmax - 1; t >= 0; t--) {
        float c = 0.0f;
        if (t < T) {
            float x = xs[(size_t)t * n + i], s, co;
            sincosf(x, &s, &co);
            c = a * 0.5f * s;
            a = a * (0.5f * co * w[t] + 0.4f);
        }
        for (int off = 16; off > 0; off >>= 1)
            c += __shfl_down_sync(0xffffffffu, c, off);
        if (lane == 0)
            atomicAdd(&wsum[t], c);
    }
    if (valid)
        x0grad[i] = a;
    __syncthreads();
    for (int t = threadIdx.x; t < tmax; t += BLOCK)
        atomicAdd(&wgrad[t], wsum[t]);
}

// loop_ckptK's forward: x every K steps into cp (slot-major), out[i] = x
template <int K>
__global__ void __launch_bounds__(BLOCK)
    k_forward_ckpt(const float *__restrict__ x0, const float *__restrict__ w,
                   float *__restrict__ out, float *__restrict__ cp, int n, int steps) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n)
        return;
    float x = x0[i];
    for (int t0 = 0, s = 0; t0 < steps; t0 += K, s++) {
        cp[(size_t)s * n + i] = x;
        int len = min(K, steps - t0);
        for (int j = 0; j < len; j++)
            x = 0.5f * sinf(x) * w[t0 + j] + 0.4f * x + 0.1f;
    }
    out[i] = x;
}

// loop_ckptK's reverse: per segment, from the last: x of its K steps recomputed from the
// checkpoint into xs[] (registers: the loops are unrolled), then the segment's reverse steps
// with w.grad summed as in k_reverse. Every item runs `steps` steps, so `len` is the same
// for the whole grid; lanes past n keep a = 0 and take part in the shuffles.
template <int K>
__global__ void __launch_bounds__(BLOCK)
    k_reverse_ckpt(const float *__restrict__ cp, const float *__restrict__ w,
                   const float *__restrict__ g, float *__restrict__ x0grad,
                   float *__restrict__ wgrad, int n, int steps) {
    extern __shared__ float wsum[];
    int i = blockIdx.x * BLOCK + threadIdx.x, lane = threadIdx.x & 31;
    bool valid = i < n;
    for (int t = threadIdx.x; t < steps; t += BLOCK)
        wsum[t] = 0.0f;
    __syncthreads();
    float a = valid ? g[i] : 0.0f;
    int nseg = (steps + K - 1) / K;
    for (int s = nseg - 1; s >= 0; s--) {
        int t0 = s * K, len = min(K, steps - t0);
        float xs[K];
        float x = valid ? cp[(size_t)s * n + i] : 0.0f;
#pragma unroll
        for (int j = 0; j < K; j++) {
            xs[j] = x;
            if (j < len)
                x = 0.5f * sinf(x) * w[t0 + j] + 0.4f * x + 0.1f;
        }
#pragma unroll
        for (int j = K - 1; j >= 0; j--) {
            if (j >= len)
                continue;
            float sn, co;
            sincosf(xs[j], &sn, &co);
            float c = a * 0.5f * sn;
            a = a * (0.5f * co * w[t0 + j] + 0.4f);
            for (int off = 16; off > 0; off >>= 1)
                c += __shfl_down_sync(0xffffffffu, c, off);
            if (lane == 0)
                atomicAdd(&wsum[t0 + j], c);
        }
    }
    if (valid)
        x0grad[i] = a;
    __syncthreads();
    for (int t = threadIdx.x; t < steps; t += BLOCK)
        atomicAdd(&wgrad[t], wsum[t]);
}

struct Opts {
    long long n = 1 << 20, steps = 1024;
    int reps = 20, warmup = 3, check = 4096, ckpt = 32;
    unsigned only = PART_ALL; // PART_*
    const char *dump = nullptr;
};

struct Dev {
    float *x0, *w, *g, *gsub, *out, *xs, *x0grad, *wgrad;
    int *count, *dcount, *iters; // ragged's and divergent's counts, kepler's iterations
};

static int g_failed = 0;

static float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    size_t k = v.size();
    return k % 2 ? v[k / 2] : 0.5f * (v[k / 2 - 1] + v[k / 2]);
}

static void write_f32(const char *path, const std::vector<float> &v) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(v.data(), 4, v.size(), f) != v.size() || fclose(f) != 0) {
        fprintf(stderr, "baseline: cannot write %s\n", path);
        exit(1);
    }
}

// the check lines of `name`: the results of the seed on the check subset against the
// reference (r*, filled on the subset); a failed check makes the exit status 1
static void check_print(const char *name, const std::vector<float> &out,
                        const std::vector<float> &x0g, const std::vector<float> &wg,
                        const std::vector<double> &rout, const std::vector<double> &rx0g,
                        const std::vector<double> &rwg, long long n, int steps, long long stride) {
    double e_out = gb_maxrel_f32(out.data(), rout.data(), n, stride);
    double e_x0g = gb_maxrel_f32(x0g.data(), rx0g.data(), n, stride);
    double e_wg = gb_maxrel_f32(wg.data(), rwg.data(), steps, 1);
    double e = std::max(e_out, std::max(e_x0g, e_wg));
    if (e_out != e_out || e_x0g != e_x0g || e_wg != e_wg)
        e = NAN;
    printf("# baseline %s: check on %lld items (every %lld-th), w.grad from those items\n", name,
           (n + stride - 1) / stride, stride);
    printf("baseline %s check_out %.3g\nbaseline %s check_x0grad %.3g\n", name, e_out, name, e_x0g);
    printf("baseline %s check_wgrad %.3g\nbaseline %s check_maxrel %.3g\n", name, e_wg, name, e);
    bool ok = e <= GB_CHECK_TOL;
    printf("baseline %s check %s\n", name, ok ? "ok" : "FAILED");
    if (!ok) {
        fprintf(stderr, "baseline: CHECK FAILED: %s: largest error %.3g (tolerance %g)\n", name, e,
                GB_CHECK_TOL);
        g_failed = 1;
    }
}

// a workload of workload.h (GB_LOOP, GB_RAGGED, GB_DIVERGENT, GB_KEPLER) with every x_t
// stored; returns fwdrev_ms
static float run(const Opts &o, const char *name, int kind, Dev &d) {
    int n = (int)o.n, steps = (int)o.steps, grid = (n + BLOCK - 1) / BLOCK;
    const int *count = kind == GB_RAGGED ? d.count : kind == GB_DIVERGENT ? d.dcount : nullptr;
    size_t smem = (size_t)steps * sizeof(float);
    cudaEvent_t e0, e1, e2;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventCreate(&e2));
    auto forward = [&](bool fast) {
        if (kind == GB_KEPLER && fast)
            k_kepler<true><<<grid, BLOCK>>>(d.x0, d.w, d.out, n, steps);
        else if (kind == GB_KEPLER)
            k_kepler<false><<<grid, BLOCK>>>(d.x0, d.w, d.out, n, steps);
        else if (fast)
            k_forward<true><<<grid, BLOCK>>>(d.x0, d.w, count, d.out, n, steps);
        else
            k_forward<false><<<grid, BLOCK>>>(d.x0, d.w, count, d.out, n, steps);
        CK(cudaGetLastError());
    };
    // fwd+rev with seed g; w.grad zeroed before the start event; returns {store, rev} ms
    auto fwdrev = [&](const float *g, float *ms_store, float *ms_rev) {
        CK(cudaMemsetAsync(d.wgrad, 0, smem));
        CK(cudaEventRecord(e0));
        if (kind == GB_KEPLER)
            k_kepler_store<<<grid, BLOCK>>>(d.x0, d.w, d.out, d.xs, d.iters, n, steps);
        else
            k_forward_store<<<grid, BLOCK>>>(d.x0, d.w, count, d.out, d.xs, n, steps);
        CK(cudaGetLastError());
        CK(cudaEventRecord(e1));
        if (kind == GB_KEPLER)
            k_kepler_reverse<<<grid, BLOCK>>>(d.xs, d.w, d.iters, g, d.x0grad, d.wgrad, n, steps);
        else
            k_reverse<<<grid, BLOCK, smem>>>(d.xs, d.w, count, g, d.x0grad, d.wgrad, n, steps);
        CK(cudaGetLastError());
        CK(cudaEventRecord(e2));
        CK(cudaEventSynchronize(e2));
        CK(cudaEventElapsedTime(ms_store, e0, e1));
        CK(cudaEventElapsedTime(ms_rev, e1, e2));
    };

    // the check: g kept on every stride-th item
    long long stride = gb_stride(o.n, o.check), work_steps = 0;
    std::vector<float> out(n), x0g(n), wg(steps), w(steps), gsub(n);
    for (int t = 0; t < steps; t++)
        w[t] = gb_w(t);
    std::vector<double> rout(n), rx0g(n), rwg(steps), xs(steps);
    for (long long i = 0; i < n; i++) {
        if (kind == GB_KEPLER) {
            double xg, eg;
            int64_t iters;
            gb_kepler_reference(gb_x0(i), gb_kepler_e(i, w.data(), steps), steps, 1.0, &xg, &eg,
                                &iters, xs.data());
            work_steps += iters;
        } else {
            work_steps += gb_trips(kind, i, steps);
        }
    }
    printf("# baseline %s: %d items, %d steps (%s), %.4g steps in all\n", name, n, steps,
           kind == GB_LOOP     ? "every item"
           : kind == GB_KEPLER ? "the cap; iterations to convergence, in double"
                               : "item i runs count[i]",
           (double)work_steps);
    float s0, s1;
    fwdrev(d.gsub, &s0, &s1);
    CK(cudaMemcpy(gsub.data(), d.gsub, 4 * (size_t)n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(out.data(), d.out, 4 * (size_t)n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(x0g.data(), d.x0grad, 4 * (size_t)n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(wg.data(), d.wgrad, smem, cudaMemcpyDeviceToHost));
    for (long long i = 0; i < n; i += stride)
        rout[i] =
            gb_item_reference(kind, i, w.data(), steps, gsub[i], &rx0g[i], rwg.data(), xs.data());
    check_print(name, out, x0g, wg, rout, rx0g, rwg, n, steps, stride);
    // the forward kernel alone must agree with the storing one
    forward(false);
    CK(cudaDeviceSynchronize());
    std::vector<float> out2(n);
    CK(cudaMemcpy(out2.data(), d.out, 4 * (size_t)n, cudaMemcpyDeviceToHost));
    if (memcmp(out.data(), out2.data(), 4 * (size_t)n) != 0)
        printf("# baseline %s: the forward kernels differ (max rel %.3g)\n", name,
               gb_maxrel_ff(out2.data(), out.data(), n));
    // the __sinf forward: its out on the check subset against the reference
    forward(true);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(out2.data(), d.out, 4 * (size_t)n, cudaMemcpyDeviceToHost));
    double e_fast = gb_maxrel_f32(out2.data(), rout.data(), n, stride);
    printf("baseline %s check_fast_out %.3g\n", name, e_fast);
    if (!(e_fast <= GB_FAST_TOL)) {
        fprintf(stderr,
                "baseline: CHECK FAILED: %s: the __sinf forward is %.3g off (tolerance %g)\n", name,
                e_fast, GB_FAST_TOL);
        g_failed = 1;
    }

    // timing
    std::vector<float> tf, tff, ts, tr, tfr;
    for (int fast = 0; fast < 2; fast++)
        for (int r = 0; r < o.warmup + o.reps; r++) {
            float ms;
            CK(cudaEventRecord(e0));
            forward(fast);
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (r >= o.warmup)
                (fast ? tff : tf).push_back(ms);
        }
    for (int r = 0; r < o.warmup + o.reps; r++) {
        float a, b;
        fwdrev(d.g, &a, &b);
        if (r >= o.warmup) {
            ts.push_back(a);
            tr.push_back(b);
            tfr.push_back(a + b);
        }
    }
    // the same runs back to back (B2B of them, one synchronization after the last; host
    // clock, as kern-bench's *_b2b_ms): the GPU's time per run without the events
    std::vector<float> bf, bfr, bff;
    for (int r = 0; r < 6; r++) {
        for (int part = 0; part < 3; part++) {
            CK(cudaDeviceSynchronize());
            auto t0 = std::chrono::steady_clock::now();
            for (int b = 0; b < B2B; b++) {
                if (part != 1) {
                    forward(part == 2);
                } else if (kind == GB_KEPLER) {
                    k_kepler_store<<<grid, BLOCK>>>(d.x0, d.w, d.out, d.xs, d.iters, n, steps);
                    k_kepler_reverse<<<grid, BLOCK>>>(d.xs, d.w, d.iters, d.g, d.x0grad, d.wgrad, n,
                                                      steps);
                } else {
                    k_forward_store<<<grid, BLOCK>>>(d.x0, d.w, count, d.out, d.xs, n, steps);
                    k_reverse<<<grid, BLOCK, smem>>>(d.xs, d.w, count, d.g, d.x0grad, d.wgrad, n,
                                                     steps);
                }
            }
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - t0;
            if (r > 0) // the first is the warm-up
                (part == 0 ? bf : part == 1 ? bfr : bff).push_back((float)(ms.count() / B2B));
        }
    }
    float a_clean, b_clean; // w.grad summed over the runs above: one clean run for --dump
    fwdrev(d.g, &a_clean, &b_clean);
    printf("baseline %s forward_ms %.3f\n", name, median(tf));
    printf("baseline %s forward_b2b_ms %.3f\n", name, median(bf));
    printf("baseline %s fwdrev_b2b_ms %.3f\n", name, median(bfr));
    printf("baseline %s forward_fast_b2b_ms %.3f\n", name, median(bff));
    printf("baseline %s forward_fast_ms %.3f\n", name, median(tff));
    printf("baseline %s fwdrev_ms %.3f\n", name, median(tfr));
    printf("baseline %s fwdstore_ms %.3f\n", name, median(ts));
    printf("baseline %s rev_ms %.3f\n", name, median(tr));
    printf("baseline %s saved_bytes %.0f\n", name, 4.0 * (double)n * steps); // the xs buffer
    double bytes = 8.0 * (double)work_steps; // every x_t written once, read once
    printf("# baseline %s: x_t store %.3g GB, written and read back at %.0f GB/s effective\n", name,
           bytes * 0.5e-9, bytes / (median(tfr) * 1e-3) * 1e-9);

    // full-size results of the seed g (the last fwdrev ran with it)
    if (o.dump) {
        CK(cudaMemcpy(out.data(), d.out, 4 * (size_t)n, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(x0g.data(), d.x0grad, 4 * (size_t)n, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(wg.data(), d.wgrad, smem, cudaMemcpyDeviceToHost));
        char path[4096];
        snprintf(path, sizeof path, "%s/baseline_%s_out.f32", o.dump, name);
        write_f32(path, out);
        snprintf(path, sizeof path, "%s/baseline_%s_x0grad.f32", o.dump, name);
        write_f32(path, x0g);
        snprintf(path, sizeof path, "%s/baseline_%s_wgrad.f32", o.dump, name);
        write_f32(path, wg);
        printf("# baseline %s: results written to %s/baseline_%s_*.f32\n", name, o.dump, name);
    }
    fflush(stdout);
    cudaEventDestroy(e0), cudaEventDestroy(e1), cudaEventDestroy(e2);
    return median(tfr);
}

// loop_ckptK. store_ms > 0: loop ran just before (its fwdrev_ms), and d.out, d.x0grad and
// d.wgrad still hold its full-size results, which this one's are compared with.
template <int K> static void run_ckpt(const Opts &o, Dev &d, float store_ms) {
    char name[32];
    snprintf(name, sizeof name, "loop_ckpt%d", K);
    int n = (int)o.n, steps = (int)o.steps, grid = (n + BLOCK - 1) / BLOCK;
    int nseg = (steps + K - 1) / K;
    size_t smem = (size_t)steps * sizeof(float);
    std::vector<float> s_out, s_x0g, s_wg; // loop's (store-all) full-size results
    if (store_ms > 0) {
        s_out.resize(n), s_x0g.resize(n), s_wg.resize(steps);
        CK(cudaMemcpy(s_out.data(), d.out, 4 * (size_t)n, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(s_x0g.data(), d.x0grad, 4 * (size_t)n, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(s_wg.data(), d.wgrad, smem, cudaMemcpyDeviceToHost));
    }
    float *cp;
    size_t cp_bytes = 4 * (size_t)n * nseg;
    CK(cudaMalloc(&cp, cp_bytes));
    cudaEvent_t e0, e1, e2;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventCreate(&e2));
    auto fwdrev = [&](const float *g, float *ms_store, float *ms_rev) {
        CK(cudaMemsetAsync(d.wgrad, 0, smem));
        CK(cudaEventRecord(e0));
        k_forward_ckpt<K><<<grid, BLOCK>>>(d.x0, d.w, d.out, cp, n, steps);
        CK(cudaGetLastError());
        CK(cudaEventRecord(e1));
        k_reverse_ckpt<K><<<grid, BLOCK, smem>>>(cp, d.w, g, d.x0grad, d.wgrad, n, steps);
        CK(cudaGetLastError());
        CK(cudaEventRecord(e2));
        CK(cudaEventSynchronize(e2));
        CK(cudaEventElapsedTime(ms_store, e0, e1));
        CK(cudaEventElapsedTime(ms_rev, e1, e2));
    };
    printf("# baseline %s: %d items, %d steps, x saved every %d steps: %.4g bytes (every step: "
           "%.4g)\n",
           name, n, steps, K, (double)cp_bytes, 4.0 * n * steps);

    long long stride = gb_stride(o.n, o.check);
    std::vector<float> out(n), x0g(n), wg(steps), w(steps), gsub(n);
    for (int t = 0; t < steps; t++)
        w[t] = gb_w(t);
    float s0, s1;
    fwdrev(d.gsub, &s0, &s1);
    CK(cudaMemcpy(gsub.data(), d.gsub, 4 * (size_t)n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(out.data(), d.out, 4 * (size_t)n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(x0g.data(), d.x0grad, 4 * (size_t)n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(wg.data(), d.wgrad, smem, cudaMemcpyDeviceToHost));
    std::vector<double> rout(n), rx0g(n), rwg(steps), xs(steps);
    for (long long i = 0; i < n; i += stride)
        rout[i] = gb_reference(gb_x0(i), w.data(), steps, gsub[i], &rx0g[i], rwg.data(), xs.data());
    check_print(name, out, x0g, wg, rout, rx0g, rwg, n, steps, stride);

    std::vector<float> ts, tr, tfr;
    for (int r = 0; r < o.warmup + o.reps; r++) {
        float a, b;
        fwdrev(d.g, &a, &b);
        if (r >= o.warmup) {
            ts.push_back(a);
            tr.push_back(b);
            tfr.push_back(a + b);
        }
    }
    printf("baseline %s fwdrev_ms %.3f\n", name, median(tfr));
    printf("baseline %s fwdstore_ms %.3f\n", name, median(ts));
    printf("baseline %s rev_ms %.3f\n", name, median(tr));
    printf("baseline %s saved_bytes %.0f\n", name, (double)cp_bytes);
    if (store_ms > 0) {
        printf("baseline %s vs_store_all %.3f\n", name, median(tfr) / store_ms);
        // the last fwdrev ran with the full seed g, as loop's last one did
        CK(cudaMemcpy(out.data(), d.out, 4 * (size_t)n, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(x0g.data(), d.x0grad, 4 * (size_t)n, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(wg.data(), d.wgrad, smem, cudaMemcpyDeviceToHost));
        double e = std::max(gb_maxrel_ff(out.data(), s_out.data(), n),
                            std::max(gb_maxrel_ff(x0g.data(), s_x0g.data(), n),
                                     gb_maxrel_ff(wg.data(), s_wg.data(), steps)));
        printf("baseline %s vs_store_all_maxrel %.3g\n", name, e);
        if (!(e <= GB_AGREE_TOL))
            fprintf(stderr, "baseline: %s and loop differ by %.3g\n", name, e);
    }
    fflush(stdout);
    CK(cudaFree(cp));
    cudaEventDestroy(e0), cudaEventDestroy(e1), cudaEventDestroy(e2);
}

static void usage(FILE *to) {
    fprintf(to,
            "usage: baseline [--n N] [--steps T] [--reps N] [--warmup N] [--check N]\n"
            "                [--only loop,ragged,ckpt,huge,divergent,kepler] [--ckpt 8|16|32|64]\n"
            "                [--dump DIR]\n"
            "defaults: --n 1048576 --steps 1024 --reps 20 --warmup 3 --check 4096\n"
            "          --ckpt 32\n");
}

int main(int argc, char **argv) {
    Opts o;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            usage(stderr);
            return 2;
        }
        char *end = nullptr;
        long long x = strtoll(v, &end, 10);
        bool num = *v && !*end;
        if (!strcmp(a, "--n") && num && x >= 1 && x <= (1ll << 30))
            o.n = x;
        else if (!strcmp(a, "--steps") && num && x >= 2 && x <= 12288) // shared w.grad: 48 KB
            o.steps = x;
        else if (!strcmp(a, "--reps") && num && x >= 1)
            o.reps = (int)x;
        else if (!strcmp(a, "--warmup") && num && x >= 0)
            o.warmup = (int)x;
        else if (!strcmp(a, "--check") && num && x >= 0)
            o.check = (int)x;
        else if (!strcmp(a, "--only") && gb_parse_parts(v))
            o.only = gb_parse_parts(v);
        else if (!strcmp(a, "--ckpt") && num && (x == 8 || x == 16 || x == 32 || x == 64))
            o.ckpt = (int)x;
        else if (!strcmp(a, "--dump"))
            o.dump = v;
        else {
            fprintf(stderr, "baseline: bad option %s %s\n", a, v);
            usage(stderr);
            return 2;
        }
        i++;
    }
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        fprintf(stderr, "baseline: no CUDA device: %s\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        printf("# baseline: no CUDA device\n");
        return 3;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    printf("# baseline: %s (sm_%d%d, %d SMs), CUDA runtime %d, driver %d; n %lld, steps %lld, "
           "reps %d, warmup %d\n",
           prop.name, prop.major, prop.minor, prop.multiProcessorCount, rt, drv, o.n, o.steps,
           o.reps, o.warmup);

    size_t n = (size_t)o.n, T = (size_t)o.steps;
    std::vector<float> x0(n), w(T), g(n), gsub(n);
    std::vector<int> count(n), dcount(n);
    long long stride = gb_stride(o.n, o.check);
    for (size_t i = 0; i < n; i++) {
        x0[i] = gb_x0((int64_t)i);
        g[i] = gb_g((int64_t)i);
        gsub[i] = (long long)i % stride == 0 ? g[i] : 0.0f;
        count[i] = gb_count((int64_t)i, o.steps);
        dcount[i] = gb_count_uniform((int64_t)i, o.steps);
    }
    for (size_t t = 0; t < T; t++)
        w[t] = gb_w((int64_t)t);
    Dev d;
    CK(cudaMalloc(&d.x0, 4 * n));
    CK(cudaMalloc(&d.w, 4 * T));
    CK(cudaMalloc(&d.g, 4 * n));
    CK(cudaMalloc(&d.gsub, 4 * n));
    CK(cudaMalloc(&d.count, 4 * n));
    CK(cudaMalloc(&d.dcount, 4 * n));
    CK(cudaMalloc(&d.iters, 4 * n));
    CK(cudaMalloc(&d.out, 4 * n));
    CK(cudaMalloc(&d.x0grad, 4 * n));
    CK(cudaMalloc(&d.wgrad, 4 * T));
    CK(cudaMalloc(&d.xs, 4 * n * T)); // every x_t: 4 GiB at the default size
    CK(cudaMemcpy(d.x0, x0.data(), 4 * n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.w, w.data(), 4 * T, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.g, g.data(), 4 * n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.gsub, gsub.data(), 4 * n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.count, count.data(), 4 * n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.dcount, dcount.data(), 4 * n, cudaMemcpyHostToDevice));
    float store_ms = 0;
    if (o.only & PART_LOOP)
        store_ms = run(o, "loop", GB_LOOP, d);
    if (o.only & PART_CKPT) {
        switch (o.ckpt) {
        case 8: run_ckpt<8>(o, d, store_ms); break;
        case 16: run_ckpt<16>(o, d, store_ms); break;
        case 32: run_ckpt<32>(o, d, store_ms); break;
        default: run_ckpt<64>(o, d, store_ms); break;
        }
    }
    if (o.only & PART_RAGGED)
        run(o, "ragged", GB_RAGGED, d);
    if (o.only & PART_DIVERGENT)
        run(o, "divergent", GB_DIVERGENT, d);
    if (o.only & PART_KEPLER)
        run(o, "kepler", GB_KEPLER, d);
    if (o.only == PART_HUGE)
        printf("# baseline: nothing to run (loop_huge is kern's alone)\n");
    return g_failed;
}
