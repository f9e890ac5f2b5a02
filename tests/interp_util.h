/* interp_util.h - what the interp suites share (test_interp*.c): deterministic inputs,
 * interpreter arguments, compiling a program at -O0 and -O2, running it and comparing the
 * two levels and a C reference, and wrapping integer helpers for the references. */
#ifndef KERN_TEST_INTERP_UTIL_H
#define KERN_TEST_INTERP_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../compiler/driver.h"
#include "../ir/interp.h"

/* ---- Deterministic inputs (splitmix64) --------------------------------------------- */

typedef struct rng {
    uint64_t s;
} rng;

uint64_t rng_next(rng *r);
/* Uniform integer in [lo, hi]. */
int64_t rng_int(rng *r, int64_t lo, int64_t hi);
double rng_unit(rng *r);
float rng_f32(rng *r, float lo, float hi);
/* ---- Arguments --------------------------------------------------------------------- */

size_t kind_size(kern_tykind k);
size_t arg_len(const ir_interp_arg *a);
/* A zeroed array argument. */
ir_interp_arg arr(kern_tykind k, int rank, int64_t d0, int64_t d1, int64_t d2);
ir_interp_arg clone_arg(const ir_interp_arg *a);
void clone_args(ir_interp_arg *dst, const ir_interp_arg *src, int n);
void free_args(ir_interp_arg *a, int n);
#define F32(a) ((float *)(a).data)
#define F64(a) ((double *)(a).data)
#define I32(a) ((int32_t *)(a).data)
#define U32(a) ((uint32_t *)(a).data)
#define I64(a) ((int64_t *)(a).data)
#define BOOL(a) ((bool *)(a).data)
/* ---- Compiling and comparing ------------------------------------------------------- */

enum { MAXARGS = 12 };

typedef struct compiled {
    const char *name;
    ir_module *m[2]; /* -O0, -O2 */
} compiled;

extern const int opt_levels[2]; /* -O0, -O2 */
ir_module *compile_at(const char *name, const char *src, int opt);
compiled compile_src(const char *name, const char *src);
compiled compile_golden(const char *name);
void compiled_free(compiled *c);
/* Element i of array a as a double (for messages). */
double elem_value(const ir_interp_arg *a, size_t i);
/* Equal bits, or (not bitwise) floats within tol; two NaNs are equal (their sign and
 * payload are not portable: see the KNOWN_BUG test of simplify below). */
bool elem_equal(const ir_interp_arg *a, const ir_interp_arg *b, size_t i, double tol, bool bitwise);
/* Number of differing elements over all arrays; prints the first few. */
int compare_args(const ir_interp_arg *got, const ir_interp_arg *exp, int n, double tol,
                 bool bitwise, const char *what);
/* Runs c's kernel at -O0 and -O2, each on a copy of `in`; compares every array with `ref`
 * (the C reference's result on a copy of `in`), then the two runs bit for bit. */
void check_runs(const compiled *c, const char *kernel, const ir_interp_arg *in,
                const ir_interp_arg *ref, int n, double tol, const char *label);
/* The error message of running c's kernel at optimization level index l. */
void run_expect_error(const compiled *c, int l, const char *kernel, ir_interp_arg *in, int n,
                      ir_interp_options *opts, char *err, size_t errlen);
/* Wrapping and shifting helpers for the references (C's signed overflow is undefined). */
int32_t add32(int32_t a, int32_t b);
int32_t neg32(int32_t a);
int32_t shl32(int32_t a, int s);
int32_t sar32(int32_t a, int s);
int64_t add64(int64_t a, int64_t b);
int64_t sub64(int64_t a, int64_t b);
int64_t mul64(int64_t a, int64_t b);
int64_t sar64(int64_t a, int s);
/* ---- Hand-written IR and float bits ----------------------------------------------- */

ir_module *parse_ir(const char *text);
uint32_t f32_bits(float f);
float sign_f32(float v);

#endif
