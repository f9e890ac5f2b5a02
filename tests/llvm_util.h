/* llvm_util.h - what the llvm suites share (test_llvm*.c): a program compiled from source
 * and JIT-compiled, and its kernels run as the runtime runs them (runtime/abi.h). */
#ifndef KERN_TEST_LLVM_UTIL_H
#define KERN_TEST_LLVM_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "../backends/llvm/llvm_backend.h"
#include "../compiler/driver.h"
#include "../runtime/abi.h"
#include "../runtime/meta.h"

typedef struct prog {
    kc_ctx *ctx;
    ir_module *m;
    llvm_jit *jit;
    kern_meta *meta;
} prog;

/* Compiles src at -O`opt` (a debug build when debug) and JIT-compiles it, with
 * kc_options.simd = build_simd (0 unless a test sets it: the default lanes) and
 * kc_options.checks = build_checks (false unless a test sets it). */
prog build(const char *src, int opt, bool debug);
extern int build_simd;
extern bool build_checks;
void release(prog *p);
/* Runs every task of `kernel` as the runtime does (count once, then the body over chunks
 * of `chunk` items on `threads` threads, tasks in order); returns the error record. */
kern_err_record run_mt(prog *p, const char *kernel, void **args, int64_t chunk, int threads);
kern_err_record run(prog *p, const char *kernel, void **args, int64_t chunk);
kern_array_desc desc(void *data, int64_t d0, int64_t d1, int64_t d2);
extern const int OPT_LEVELS[2]; /* -O0, -O3 */

typedef union scalar {
    uint8_t b;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    float f32;
    double f64;
} scalar;

enum { NKINDS = 6, N = 24 };
extern const kern_tykind ALL_KINDS[NKINDS]; /* bool, i32, u32, i64, f32, f64 */

const char *kname(kern_tykind k);

size_t ksize(kern_tykind k);
scalar get(const void *arr, kern_tykind k, int i);
void put(void *arr, kern_tykind k, int i, scalar s);
bool is_float(kern_tykind k);
/* Equal bit for bit, or both NaN; with ulps > 0 floats may differ by that many ulps. */
bool same(kern_tykind k, scalar x, scalar y, int ulps);
void show(char *buf, size_t n, kern_tykind k, scalar s);
extern const double FVALS[N];
extern const int64_t IVALS32[N];
extern const int64_t IVALS64[N];
scalar input(kern_tykind k, int j);

/* Whether text contains s. */
bool has(const char *text, const char *s);

#endif
