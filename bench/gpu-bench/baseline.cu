// baseline.cu - the hand-written CUDA side of the GPU benchmark (bench/gpu-bench/README.md):
// the workloads "loop" and "ragged" of workload.h written the way a CUDA programmer would.
//
//   forward:  one thread per work item, T_i steps in registers, out[i] = x.
//   fwd+rev:  a forward kernel that also stores every x_t (the input of step t) slot-major,
//             xs[t * n + i] (neighbouring threads write neighbouring words), into a buffer
//             allocated once; then a reverse kernel that walks t down from T_i - 1, reloads
//             x_t, and carries the adjoint a: w.grad[t] += a * 0.5 sin(x_t),
//             a *= 0.5 cos(x_t) w[t] + 0.4; x0.grad[i] = a at the end. w's gradient is summed
//             per warp (shuffles), then per block in shared memory (a shared float atomic per
//             warp and step), then one global atomicAdd per block and step.
//
// Build and run on the GPU machine (run.sh does both):
//   nvcc -O3 -arch=sm_90 -o baseline bench/gpu-bench/baseline.cu
//   ./baseline [--n N] [--steps T] [--reps N] [--warmup N] [--check N] [--only loop|ragged]
//              [--dump DIR]
// Prints `baseline WORKLOAD METRIC VALUE` lines ('#' lines are comments): forward_ms, fwdrev_ms
// (the two kernels of fwd+rev together), fwdstore_ms and rev_ms (each alone), medians of
// --reps runs after --warmup runs, timed with cudaEvents around the kernels only (w.grad is
// zeroed before the start event, as kern-bench re-seeds its adjoints outside its window);
// check_* (the gradient with g kept on a subset of items against workload.h's
// double-precision reference). --dump DIR writes the full-size results of the seed g as raw
// float32 files DIR/baseline_WORKLOAD_{out,x0grad,wgrad}.f32, which kern-bench --compare DIR
// and jax_bench.py --compare DIR read.
// Exit status: 0 when every check passed, 1 when one failed or CUDA failed, 2 bad usage,
// 3 no CUDA device.
#include <cuda_runtime.h>

#include <algorithm>
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

enum { BLOCK = 256 };

// count == nullptr: every item runs `steps` steps
__global__ void __launch_bounds__(BLOCK)
    k_forward(const float *__restrict__ x0, const float *__restrict__ w,
              const int *__restrict__ count, float *__restrict__ out, int n, int steps) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n)
        return;
    int T = count ? count[i] : steps;
    float x = x0[i];
    for (int t = 0; t < T; t++)
        x = 0.5f * sinf(x) * w[t] + 0.4f * x + 0.1f;
    out[i] = x;
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

struct Opts {
    long long n = 1 << 20, steps = 1024;
    int reps = 20, warmup = 3, check = 4096;
    const char *only = nullptr, *dump = nullptr;
};

struct Dev {
    float *x0, *w, *g, *gsub, *out, *xs, *x0grad, *wgrad;
    int *count;
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

static void run(const Opts &o, const char *name, bool ragged, Dev &d) {
    int n = (int)o.n, steps = (int)o.steps, grid = (n + BLOCK - 1) / BLOCK;
    const int *count = ragged ? d.count : nullptr;
    size_t smem = (size_t)steps * sizeof(float);
    cudaEvent_t e0, e1, e2;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventCreate(&e2));
    auto forward = [&]() {
        k_forward<<<grid, BLOCK>>>(d.x0, d.w, count, d.out, n, steps);
        CK(cudaGetLastError());
    };
    // fwd+rev with seed g; w.grad zeroed before the start event; returns {store, rev} ms
    auto fwdrev = [&](const float *g, float *ms_store, float *ms_rev) {
        CK(cudaMemsetAsync(d.wgrad, 0, smem));
        CK(cudaEventRecord(e0));
        k_forward_store<<<grid, BLOCK>>>(d.x0, d.w, count, d.out, d.xs, n, steps);
        CK(cudaGetLastError());
        CK(cudaEventRecord(e1));
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
    for (long long i = 0; i < n; i++)
        work_steps += ragged ? gb_count(i, steps) : steps;
    printf("# baseline %s: %d items, %d steps (%s), %.4g steps in all\n", name, n, steps,
           ragged ? "item i runs count[i]" : "every item", (double)work_steps);
    float s0, s1;
    fwdrev(d.gsub, &s0, &s1);
    CK(cudaMemcpy(gsub.data(), d.gsub, 4 * (size_t)n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(out.data(), d.out, 4 * (size_t)n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(x0g.data(), d.x0grad, 4 * (size_t)n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(wg.data(), d.wgrad, smem, cudaMemcpyDeviceToHost));
    std::vector<double> rout(n), rx0g(n), rwg(steps), xs(steps);
    for (long long i = 0; i < n; i += stride) {
        long long ti = ragged ? gb_count(i, steps) : steps;
        rout[i] = gb_reference(gb_x0(i), w.data(), ti, gsub[i], &rx0g[i], rwg.data(), xs.data());
    }
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
    // the forward kernel alone must agree with the storing one
    forward();
    CK(cudaDeviceSynchronize());
    std::vector<float> out2(n);
    CK(cudaMemcpy(out2.data(), d.out, 4 * (size_t)n, cudaMemcpyDeviceToHost));
    if (memcmp(out.data(), out2.data(), 4 * (size_t)n) != 0)
        printf("# baseline %s: the forward kernels differ (max rel %.3g)\n", name,
               gb_maxrel_ff(out2.data(), out.data(), n));

    // timing
    std::vector<float> tf, ts, tr, tfr;
    for (int r = 0; r < o.warmup + o.reps; r++) {
        float ms;
        CK(cudaEventRecord(e0));
        forward();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= o.warmup)
            tf.push_back(ms);
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
    printf("baseline %s forward_ms %.3f\n", name, median(tf));
    printf("baseline %s fwdrev_ms %.3f\n", name, median(tfr));
    printf("baseline %s fwdstore_ms %.3f\n", name, median(ts));
    printf("baseline %s rev_ms %.3f\n", name, median(tr));
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
}

static void usage(FILE *to) {
    fprintf(to, "usage: baseline [--n N] [--steps T] [--reps N] [--warmup N] [--check N]\n"
                "                [--only loop|ragged] [--dump DIR]\n"
                "defaults: --n 1048576 --steps 1024 --reps 20 --warmup 3 --check 4096\n");
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
        else if (!strcmp(a, "--only") && (!strcmp(v, "loop") || !strcmp(v, "ragged")))
            o.only = v;
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
    std::vector<int> count(n);
    long long stride = gb_stride(o.n, o.check);
    for (size_t i = 0; i < n; i++) {
        x0[i] = gb_x0((int64_t)i);
        g[i] = gb_g((int64_t)i);
        gsub[i] = (long long)i % stride == 0 ? g[i] : 0.0f;
        count[i] = gb_count((int64_t)i, o.steps);
    }
    for (size_t t = 0; t < T; t++)
        w[t] = gb_w((int64_t)t);
    Dev d;
    CK(cudaMalloc(&d.x0, 4 * n));
    CK(cudaMalloc(&d.w, 4 * T));
    CK(cudaMalloc(&d.g, 4 * n));
    CK(cudaMalloc(&d.gsub, 4 * n));
    CK(cudaMalloc(&d.count, 4 * n));
    CK(cudaMalloc(&d.out, 4 * n));
    CK(cudaMalloc(&d.x0grad, 4 * n));
    CK(cudaMalloc(&d.wgrad, 4 * T));
    CK(cudaMalloc(&d.xs, 4 * n * T)); // every x_t: 4 GiB at the default size
    CK(cudaMemcpy(d.x0, x0.data(), 4 * n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.w, w.data(), 4 * T, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.g, g.data(), 4 * n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.gsub, gsub.data(), 4 * n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.count, count.data(), 4 * n, cudaMemcpyHostToDevice));
    if (!o.only || !strcmp(o.only, "loop"))
        run(o, "loop", false, d);
    if (!o.only || !strcmp(o.only, "ragged"))
        run(o, "ragged", true, d);
    return g_failed;
}
