/* test_interp_programs.c - inline programs that stress the lowering (break, continue and return
 * flags, laziness, carried values, ranges, tasks, integer widths), run by the reference
 * interpreter at -O0 and -O2 against C references (suite `interp_programs`). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../compiler/driver.h"
#include "../ir/interp.h"
#include "../passes/passes.h"
#include "golden.h"
#include "interp_util.h"

/* A break out of a while nested in a for that has its own break. */
static const char nest_break_src[] = "kernel nest_break(x: i32[], out: i32[]) {\n"
                                     "    for i in 0..len(x) {\n"
                                     "        var total = 0;\n"
                                     "        for j in 0..10 {\n"
                                     "            var v = x[i] + j;\n"
                                     "            while v > 0 {\n"
                                     "                if v % 7 == 3 {\n"
                                     "                    break;\n"
                                     "                }\n"
                                     "                v -= 2;\n"
                                     "                total += 1;\n"
                                     "            }\n"
                                     "            total += v;\n"
                                     "            if total > 40 {\n"
                                     "                break;\n"
                                     "            }\n"
                                     "        }\n"
                                     "        out[i] = total;\n"
                                     "    }\n"
                                     "}\n";

Test(interp_programs, nested_break_in_while_in_for) {
    compiled c = compile_src("nest_break", nest_break_src);
    rng r = {101};
    int64_t n = 60;
    ir_interp_arg in[2] = {arr(TY_I32, 1, n, 0, 0), arr(TY_I32, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++)
        I32(in[0])[i] = (int32_t)(i < 30 ? i - 12 : rng_int(&r, -20, 60));
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int64_t i = 0; i < n; i++) {
        int32_t total = 0;
        for (int32_t j = 0; j < 10; j++) {
            int32_t v = I32(ref[0])[i] + j;
            while (v > 0) {
                if (v % 7 == 3)
                    break;
                v -= 2;
                total += 1;
            }
            total += v;
            if (total > 40)
                break;
        }
        I32(ref[1])[i] = total;
    }
    check_runs(&c, "nest_break", in, ref, 2, 0, "x in [-20, 60]");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

/* continue and break in one serial loop. */
static const char cont_break_src[] =
    "kernel cont_break(a: i32[,], lim: i32, s: i32[], cnt: i32[]) {\n"
    "    for i in 0..shape(a, 0) {\n"
    "        var sum = 0;\n"
    "        var c = 0;\n"
    "        for j in 0..shape(a, 1) {\n"
    "            let v = a[i, j];\n"
    "            if v < 0 {\n"
    "                continue;\n"
    "            }\n"
    "            if v > lim {\n"
    "                break;\n"
    "            }\n"
    "            sum += v;\n"
    "            c += 1;\n"
    "        }\n"
    "        s[i] = sum;\n"
    "        cnt[i] = c;\n"
    "    }\n"
    "}\n";

Test(interp_programs, continue_and_break_in_one_loop) {
    compiled c = compile_src("cont_break", cont_break_src);
    rng r = {102};
    int64_t R = 15, C = 8;
    int32_t lims[] = {50, -1, 1000};
    for (int s = 0; s < 3; s++) {
        ir_interp_arg in[4] = {arr(TY_I32, 2, R, C, 0), ir_interp_int(TY_I32, lims[s]),
                               arr(TY_I32, 1, R, 0, 0), arr(TY_I32, 1, R, 0, 0)};
        for (int64_t i = 0; i < R * C; i++)
            I32(in[0])[i] = (int32_t)rng_int(&r, -30, 70);
        ir_interp_arg ref[4];
        clone_args(ref, in, 4);
        for (int64_t i = 0; i < R; i++) {
            int32_t sum = 0, cn = 0;
            for (int64_t j = 0; j < C; j++) {
                int32_t v = I32(ref[0])[i * C + j];
                if (v < 0)
                    continue;
                if (v > lims[s])
                    break;
                sum += v;
                cn += 1;
            }
            I32(ref[2])[i] = sum;
            I32(ref[3])[i] = cn;
        }
        char label[32];
        snprintf(label, sizeof label, "lim=%d", lims[s]);
        check_runs(&c, "cont_break", in, ref, 4, 0, label);
        free_args(in, 4);
        free_args(ref, 4);
    }
    compiled_free(&c);
}

/* A return from inside a while inside a for of a func. */
static const char search_src[] = "func search(a: i32[], lim: i32) -> i32 {\n"
                                 "    for r in 1..4 {\n"
                                 "        var k = 0;\n"
                                 "        while k < len(a) {\n"
                                 "            if a[k] * r > lim {\n"
                                 "                return k + 100 * r;\n"
                                 "            }\n"
                                 "            k += 1;\n"
                                 "        }\n"
                                 "    }\n"
                                 "    return -1;\n"
                                 "}\n"
                                 "\n"
                                 "kernel find_over(a: i32[], lims: i32[], out: i32[]) {\n"
                                 "    for i in 0..len(lims) {\n"
                                 "        out[i] = search(a, lims[i]);\n"
                                 "    }\n"
                                 "}\n";

Test(interp_programs, return_from_while_inside_for_in_func) {
    compiled c = compile_src("find_over", search_src);
    rng r = {103};
    int64_t na = 9, nl = 30;
    ir_interp_arg in[3] = {arr(TY_I32, 1, na, 0, 0), arr(TY_I32, 1, nl, 0, 0),
                           arr(TY_I32, 1, nl, 0, 0)};
    for (int64_t i = 0; i < na; i++)
        I32(in[0])[i] = (int32_t)rng_int(&r, 0, 20);
    for (int64_t i = 0; i < nl; i++)
        I32(in[1])[i] = (int32_t)rng_int(&r, -1, 70); /* > 60: never found */
    ir_interp_arg ref[3];
    clone_args(ref, in, 3);
    for (int64_t i = 0; i < nl; i++) {
        int32_t res = -1, lim = I32(ref[1])[i];
        for (int32_t rr = 1; rr < 4 && res == -1; rr++)
            for (int32_t k = 0; k < na; k++)
                if (I32(ref[0])[k] * rr > lim) {
                    res = k + 100 * rr;
                    break;
                }
        I32(ref[2])[i] = res;
    }
    check_runs(&c, "find_over", in, ref, 3, 0, "random limits");
    free_args(in, 3);
    free_args(ref, 3);
    compiled_free(&c);
}

/* A func called twice in one expression, once nested in itself. */
static const char twice_src[] = "func f(x: f32) -> f32 {\n"
                                "    if x > 1.0 {\n"
                                "        return x * 0.5;\n"
                                "    }\n"
                                "    var y = x;\n"
                                "    y += 2.0;\n"
                                "    return y;\n"
                                "}\n"
                                "\n"
                                "kernel twice(x: f32[], out: f32[]) {\n"
                                "    for i in 0..len(x) {\n"
                                "        out[i] = f(f(x[i])) + f(x[i] - 1.0);\n"
                                "    }\n"
                                "}\n";

static float ref_f(float x) {
    if (x > 1.0f)
        return x * 0.5f;
    float y = x;
    y += 2.0f;
    return y;
}

Test(interp_programs, func_called_twice_and_nested) {
    compiled c = compile_src("twice", twice_src);
    rng r = {104};
    int64_t n = 40;
    ir_interp_arg in[2] = {arr(TY_F32, 1, n, 0, 0), arr(TY_F32, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++)
        F32(in[0])[i] = i == 0 ? 1.0f : i == 1 ? 2.0f : rng_f32(&r, -4, 6);
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int64_t i = 0; i < n; i++) {
        float x = F32(ref[0])[i];
        F32(ref[1])[i] = ref_f(ref_f(x)) + ref_f(x - 1.0f);
    }
    check_runs(&c, "twice", in, ref, 2, 0, "random");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

/* && / || / ?: guarding loads that would be out of bounds and divisions by zero. */
static const char guarded_src[] =
    "kernel guarded(x: f32[], d: i32[], out: f32[], q: i32[]) {\n"
    "    for i in 0..len(out) {\n"
    "        let j = 2 * i - 3;\n"
    "        let pos = j >= 0 && j < len(x) && x[j] > 0.0;\n"
    "        let neg = j < 0 || j >= len(x) || x[j] < -0.5;\n"
    "        out[i] = pos ? x[j] : (neg ? -1.0 : 0.0);\n"
    "        let dv = i < len(d) ? d[i] : 0;\n"
    "        q[i] = dv != 0 ? 1000 / dv : (dv == 0 ? -7 : 1000 % dv);\n"
    "    }\n"
    "}\n";

Test(interp_programs, lazy_and_or_ternary_guard_out_of_bounds) {
    compiled c = compile_src("guarded", guarded_src);
    rng r = {105};
    int64_t nx = 6, nd = 7, nout = 10;
    ir_interp_arg in[4] = {arr(TY_F32, 1, nx, 0, 0), arr(TY_I32, 1, nd, 0, 0),
                           arr(TY_F32, 1, nout, 0, 0), arr(TY_I32, 1, nout, 0, 0)};
    for (int64_t i = 0; i < nx; i++)
        F32(in[0])[i] = rng_f32(&r, -1, 1);
    for (int64_t i = 0; i < nd; i++)
        I32(in[1])[i] = i % 3 == 0 ? 0 : (int32_t)rng_int(&r, -9, 9);
    ir_interp_arg ref[4];
    clone_args(ref, in, 4);
    for (int32_t i = 0; i < nout; i++) {
        int32_t j = 2 * i - 3;
        float *x = F32(ref[0]);
        bool pos = j >= 0 && j < nx && x[j] > 0.0f;
        bool neg = j < 0 || j >= nx || x[j] < -0.5f;
        F32(ref[2])[i] = pos ? x[j] : (neg ? -1.0f : 0.0f);
        int32_t dv = i < nd ? I32(ref[1])[i] : 0;
        I32(ref[3])[i] = dv != 0 ? 1000 / dv : -7;
    }
    check_runs(&c, "guarded", in, ref, 4, 0, "lazy guards");
    free_args(in, 4);
    free_args(ref, 4);
    compiled_free(&c);
}

/* Carried variables assigned in only one branch of nested ifs. */
static const char branches_src[] = "kernel branches(x: i32[,], out: i32[,]) {\n"
                                   "    for i in 0..shape(x, 0) {\n"
                                   "        var a = 0;\n"
                                   "        var b = 1;\n"
                                   "        var c = 2;\n"
                                   "        for j in 0..shape(x, 1) {\n"
                                   "            let v = x[i, j];\n"
                                   "            if v > 0 {\n"
                                   "                if v > 5 {\n"
                                   "                    a += v;\n"
                                   "                } else {\n"
                                   "                    b = b * 3 % 1001;\n"
                                   "                }\n"
                                   "            } else {\n"
                                   "                if v == 0 {\n"
                                   "                    c -= 1;\n"
                                   "                }\n"
                                   "            }\n"
                                   "        }\n"
                                   "        out[i, 0] = a;\n"
                                   "        out[i, 1] = b;\n"
                                   "        out[i, 2] = c;\n"
                                   "    }\n"
                                   "}\n";

Test(interp_programs, carried_values_in_one_branch_of_nested_ifs) {
    compiled c = compile_src("branches", branches_src);
    rng r = {106};
    int64_t R = 12, C = 10;
    ir_interp_arg in[2] = {arr(TY_I32, 2, R, C, 0), arr(TY_I32, 2, R, 3, 0)};
    for (int64_t i = 0; i < R * C; i++)
        I32(in[0])[i] = (int32_t)rng_int(&r, -3, 9);
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int64_t i = 0; i < R; i++) {
        int32_t a = 0, b = 1, cc = 2;
        for (int64_t j = 0; j < C; j++) {
            int32_t v = I32(ref[0])[i * C + j];
            if (v > 0) {
                if (v > 5)
                    a += v;
                else
                    b = b * 3 % 1001;
            } else if (v == 0) {
                cc -= 1;
            }
        }
        I32(ref[1])[i * 3 + 0] = a;
        I32(ref[1])[i * 3 + 1] = b;
        I32(ref[1])[i * 3 + 2] = cc;
    }
    check_runs(&c, "branches", in, ref, 2, 0, "random");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

/* Loops with zero trips and negative ranges (lo > hi), serial and parallel. */
static const char ranges_src[] = "kernel ranges(lo: i32, hi: i32, out: i32[]) {\n"
                                 "    for i in 0..len(out) {\n"
                                 "        var s = 0;\n"
                                 "        for j in lo..hi {\n"
                                 "            s += j;\n"
                                 "        }\n"
                                 "        for j in hi..lo {\n"
                                 "            s += 1000;\n"
                                 "        }\n"
                                 "        for j in 5..5 {\n"
                                 "            s -= 1;\n"
                                 "        }\n"
                                 "        for j in -5..-2 {\n"
                                 "            s += j * 10;\n"
                                 "        }\n"
                                 "        for j in i..i - 3 {\n"
                                 "            s += 99999;\n"
                                 "        }\n"
                                 "        out[i] = s + i;\n"
                                 "    }\n"
                                 "    for k in 3..1 {\n"
                                 "        out[0] = 12345;\n"
                                 "    }\n"
                                 "    for k in hi..lo {\n"
                                 "        out[k - hi] = -k;\n"
                                 "    }\n"
                                 "}\n";

Test(interp_programs, zero_trip_and_negative_ranges) {
    compiled c = compile_src("ranges", ranges_src);
    int32_t bounds[][2] = {{2, 7}, {7, 2}, {-8, -3}, {-3, -8}, {0, 0}, {4, 4}};
    for (int s = 0; s < 6; s++) {
        int32_t lo = bounds[s][0], hi = bounds[s][1];
        int64_t n = 8;
        ir_interp_arg in[3] = {ir_interp_int(TY_I32, lo), ir_interp_int(TY_I32, hi),
                               arr(TY_I32, 1, n, 0, 0)};
        ir_interp_arg ref[3];
        clone_args(ref, in, 3);
        for (int32_t i = 0; i < n; i++) {
            int32_t sm = 0;
            for (int32_t j = lo; j < hi; j++)
                sm += j;
            for (int32_t j = hi; j < lo; j++)
                sm += 1000;
            for (int32_t j = -5; j < -2; j++)
                sm += j * 10;
            I32(ref[2])[i] = sm + i;
        }
        for (int32_t k = hi; k < lo; k++)
            I32(ref[2])[k - hi] = -k;
        char label[32];
        snprintf(label, sizeof label, "lo=%d hi=%d", lo, hi);
        check_runs(&c, "ranges", in, ref, 3, 0, label);
        free_args(in, 3);
        free_args(ref, 3);
    }
    compiled_free(&c);
}

/* Multi-range parallel loops, 3-D and 2-D with offset and negative lower bounds. */
static const char grid_src[] =
    "kernel grid(a: f32[,,], b: f32[,,], c: i32[,], lo: i32) {\n"
    "    for i in 0..shape(a, 0), j in 0..shape(a, 1), k in 0..shape(a, 2) {\n"
    "        b[i, j, k] = a[i, j, k] * f32(i) + f32(j - k);\n"
    "    }\n"
    "    for i in lo..shape(c, 0), j in -2..shape(c, 1) - 2 {\n"
    "        c[i, j + 2] = i * 100 + j;\n"
    "    }\n"
    "}\n";

Test(interp_programs, multi_range_parallel_2d_3d) {
    compiled c = compile_src("grid", grid_src);
    rng r = {107};
    int64_t D0 = 3, D1 = 4, D2 = 5, R = 4, C = 6;
    int32_t lo_list[] = {1, 0, 5};
    for (int s = 0; s < 3; s++) {
        int32_t lo = lo_list[s];
        ir_interp_arg in[4] = {arr(TY_F32, 3, D0, D1, D2), arr(TY_F32, 3, D0, D1, D2),
                               arr(TY_I32, 2, R, C, 0), ir_interp_int(TY_I32, lo)};
        for (int64_t i = 0; i < D0 * D1 * D2; i++)
            F32(in[0])[i] = rng_f32(&r, -2, 2);
        for (int64_t i = 0; i < R * C; i++)
            I32(in[2])[i] = -5;
        ir_interp_arg ref[4];
        clone_args(ref, in, 4);
        for (int32_t i = 0; i < D0; i++)
            for (int32_t j = 0; j < D1; j++)
                for (int32_t k = 0; k < D2; k++) {
                    int64_t o = (i * D1 + j) * D2 + k;
                    F32(ref[1])[o] = F32(ref[0])[o] * (float)i + (float)(j - k);
                }
        for (int32_t i = lo; i < R; i++)
            for (int32_t j = -2; j < C - 2; j++)
                I32(ref[2])[i * C + j + 2] = i * 100 + j;
        char label[32];
        snprintf(label, sizeof label, "lo=%d", lo);
        check_runs(&c, "grid", in, ref, 4, 0, label);
        free_args(in, 4);
        free_args(ref, 4);
    }
    /* an extent of 0 in the middle of a 3-D range: no iteration at all */
    ir_interp_arg in[4] = {arr(TY_F32, 3, 2, 0, 3), arr(TY_F32, 3, 2, 0, 3),
                           arr(TY_I32, 2, 1, 1, 0), ir_interp_int(TY_I32, 3)};
    ir_interp_arg ref[4];
    clone_args(ref, in, 4);
    check_runs(&c, "grid", in, ref, 4, 0, "empty");
    free_args(in, 4);
    free_args(ref, 4);
    compiled_free(&c);
}

/* u32 wraparound, unsigned division, shifts and comparisons. */
static const char u32_src[] =
    "kernel u32ops(u: u32[], v: u32[], out: u32[], f: f32[], flags: bool[]) {\n"
    "    for i in 0..len(u) {\n"
    "        let a = u[i];\n"
    "        let b = v[i];\n"
    "        let big: u32 = 4294967295;\n"
    "        var h = a * 2654435761 + big;\n"
    "        h = h ^ (h >> 13);\n"
    "        h = h - b;\n"
    "        out[i] = h + (b == 0 ? u32(0) : a / b) + a % (b | 1) + (a << (b & 31));\n"
    "        f[i] = f32(a) + f32(b >> 16);\n"
    "        flags[i] = a > b || a - b > 2147483648;\n"
    "    }\n"
    "}\n";

Test(interp_programs, u32_wraparound) {
    compiled c = compile_src("u32ops", u32_src);
    rng r = {108};
    int64_t n = 40;
    ir_interp_arg in[5] = {arr(TY_U32, 1, n, 0, 0), arr(TY_U32, 1, n, 0, 0),
                           arr(TY_U32, 1, n, 0, 0), arr(TY_F32, 1, n, 0, 0),
                           arr(TY_BOOL, 1, n, 0, 0)};
    uint32_t special[][2] = {{0, 0},           {UINT32_MAX, 1}, {1, UINT32_MAX},
                             {0x80000000u, 1}, {5, 0},          {UINT32_MAX, UINT32_MAX}};
    for (int64_t i = 0; i < n; i++) {
        U32(in[0])[i] = i < 6 ? special[i][0] : (uint32_t)rng_next(&r);
        U32(in[1])[i] = i < 6 ? special[i][1] : i % 4 ? (uint32_t)rng_next(&r) : 0;
    }
    ir_interp_arg ref[5];
    clone_args(ref, in, 5);
    for (int64_t i = 0; i < n; i++) {
        uint32_t a = U32(ref[0])[i], b = U32(ref[1])[i];
        uint32_t h = a * 2654435761u + 4294967295u;
        h = h ^ (h >> 13);
        h = h - b;
        U32(ref[2])[i] = h + (b == 0 ? 0u : a / b) + a % (b | 1u) + (a << (b & 31u));
        F32(ref[3])[i] = (float)a + (float)(b >> 16);
        BOOL(ref[4])[i] = a > b || a - b > 2147483648u;
    }
    check_runs(&c, "u32ops", in, ref, 5, 0, "random and edges");
    free_args(in, 5);
    free_args(ref, 5);
    compiled_free(&c);
}

/* i64 arithmetic: wrapping LCG, arithmetic shifts, signed division, abs/sign/min/max. */
static const char i64_src[] =
    "kernel i64ops(x: i64[], y: i32[], out: i64[], g: f64[]) {\n"
    "    for i in 0..len(x) {\n"
    "        let a = x[i];\n"
    "        let b = i64(y[i]);\n"
    "        var h = a * 6364136223846793005 + 1442695040888963407;\n"
    "        h = h ^ (h >> 29);\n"
    "        let q = b != 0 ? a / b : i64(0);\n"
    "        let r = b != 0 ? a % b : i64(-1);\n"
    "        out[i] = h + q * 3 - r + (i64(1) << (y[i] & 63)) + abs(b) * sign(a) - min(a, b)\n"
    "            + max(a >> 40, b);\n"
    "        g[i] = f64(a) * 0.5 + f64(b);\n"
    "    }\n"
    "}\n";

Test(interp_programs, i64_arithmetic) {
    compiled c = compile_src("i64ops", i64_src);
    rng r = {109};
    int64_t n = 40;
    ir_interp_arg in[4] = {arr(TY_I64, 1, n, 0, 0), arr(TY_I32, 1, n, 0, 0),
                           arr(TY_I64, 1, n, 0, 0), arr(TY_F64, 1, n, 0, 0)};
    int64_t xs[] = {0, -1, INT64_MIN, INT64_MAX, 7, -7, 1LL << 40, -(1LL << 41)};
    int32_t ys[] = {0, -1, 3, -1, 2, -2, 63, INT32_MIN};
    for (int64_t i = 0; i < n; i++) {
        I64(in[0])[i] = i < 8 ? xs[i] : (int64_t)rng_next(&r) >> rng_int(&r, 0, 40);
        I32(in[1])[i] = i < 8 ? ys[i] : (int32_t)rng_int(&r, -100, 100);
    }
    ir_interp_arg ref[4];
    clone_args(ref, in, 4);
    for (int64_t i = 0; i < n; i++) {
        int64_t a = I64(ref[0])[i], b = I32(ref[1])[i];
        int64_t h = add64(mul64(a, 6364136223846793005LL), 1442695040888963407LL);
        h = h ^ sar64(h, 29);
        int64_t q = b != 0 ? a / b : 0;
        int64_t rr = b != 0 ? a % b : -1;
        int64_t absb = b < 0 ? -b : b, sg = (a > 0) - (a < 0);
        int64_t mn = b < a ? b : a, sh = sar64(a, 40), mx = b > sh ? b : sh;
        int64_t o = sub64(add64(h, mul64(q, 3)), rr);
        o = add64(o, (int64_t)((uint64_t)1 << (I32(ref[1])[i] & 63)));
        o = sub64(add64(o, mul64(absb, sg)), mn);
        I64(ref[2])[i] = add64(o, mx);
        F64(ref[3])[i] = (double)a * 0.5 + (double)b;
    }
    check_runs(&c, "i64ops", in, ref, 4, 0, "random and edges");
    free_args(in, 4);
    free_args(ref, 4);
    compiled_free(&c);
}

/* Serial top-level statements between parallel tasks that read earlier results. */
static const char staged_src[] = "kernel staged(x: f32[], sum: f32[], y: f32[], cnt: i32[]) {\n"
                                 "    sum[0] = 0.0;\n"
                                 "    for i in 0..len(x) {\n"
                                 "        sum[0] += x[i];\n"
                                 "    }\n"
                                 "    let n = len(x);\n"
                                 "    var mean = sum[0] / f32(n);\n"
                                 "    sum[1] = mean;\n"
                                 "    cnt[0] = 0;\n"
                                 "    for i in 0..n {\n"
                                 "        if x[i] > sum[1] {\n"
                                 "            cnt[0] += 1;\n"
                                 "            y[i] = x[i] - sum[1];\n"
                                 "        } else {\n"
                                 "            y[i] = 0.0;\n"
                                 "        }\n"
                                 "    }\n"
                                 "    cnt[1] = cnt[0] * 2;\n"
                                 "    var k = 0;\n"
                                 "    while k < 3 {\n"
                                 "        sum[2] += f32(k) * sum[1];\n"
                                 "        k += 1;\n"
                                 "    }\n"
                                 "}\n";

Test(interp_programs, serial_statements_between_tasks) {
    compiled c = compile_src("staged", staged_src);
    rng r = {110};
    int64_t n = 23;
    ir_interp_arg in[4] = {arr(TY_F32, 1, n, 0, 0), arr(TY_F32, 1, 3, 0, 0),
                           arr(TY_F32, 1, n, 0, 0), arr(TY_I32, 1, 2, 0, 0)};
    for (int64_t i = 0; i < n; i++)
        F32(in[0])[i] = rng_f32(&r, -1, 3);
    F32(in[1])[0] = 77.0f, F32(in[1])[2] = 0.5f;
    I32(in[3])[0] = 9, I32(in[3])[1] = 9;
    ir_interp_arg ref[4];
    clone_args(ref, in, 4);
    float *x = F32(ref[0]), *sum = F32(ref[1]), *y = F32(ref[2]);
    int32_t *cnt = I32(ref[3]);
    sum[0] = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum[0] += x[i];
    sum[1] = sum[0] / (float)n;
    cnt[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        if (x[i] > sum[1]) {
            cnt[0] += 1;
            y[i] = x[i] - sum[1];
        } else {
            y[i] = 0.0f;
        }
    }
    cnt[1] = cnt[0] * 2;
    for (int32_t k = 0; k < 3; k++)
        sum[2] += (float)k * sum[1];
    check_runs(&c, "staged", in, ref, 4, 0, "random");
    free_args(in, 4);
    free_args(ref, 4);
    compiled_free(&c);
}

/* continue in a while, an inner `while true` left by break, an early return of a void
 * func from inside a for. */
static const char while_cont_src[] = "func put(a: i32[], i: i32, v: i32) {\n"
                                     "    for t in 0..4 {\n"
                                     "        if v + t > 5 {\n"
                                     "            a[i] = t;\n"
                                     "            return;\n"
                                     "        }\n"
                                     "    }\n"
                                     "    a[i] = -1;\n"
                                     "}\n"
                                     "\n"
                                     "kernel wc(x: i32[], out: i32[], tag: i32[]) {\n"
                                     "    for i in 0..len(x) {\n"
                                     "        var k = 0;\n"
                                     "        var s = 0;\n"
                                     "        while k < x[i] {\n"
                                     "            k += 1;\n"
                                     "            if k % 3 == 0 {\n"
                                     "                continue;\n"
                                     "            }\n"
                                     "            var m = k;\n"
                                     "            while true {\n"
                                     "                m -= 4;\n"
                                     "                if m < 0 {\n"
                                     "                    break;\n"
                                     "                }\n"
                                     "                s += 1;\n"
                                     "            }\n"
                                     "            s += k;\n"
                                     "        }\n"
                                     "        out[i] = s;\n"
                                     "        put(tag, i, x[i]);\n"
                                     "    }\n"
                                     "}\n";

Test(interp_programs, while_continue_and_void_func_return) {
    compiled c = compile_src("wc", while_cont_src);
    int64_t n = 16;
    ir_interp_arg in[3] = {arr(TY_I32, 1, n, 0, 0), arr(TY_I32, 1, n, 0, 0),
                           arr(TY_I32, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++)
        I32(in[0])[i] = (int32_t)i - 3;
    ir_interp_arg ref[3];
    clone_args(ref, in, 3);
    for (int64_t i = 0; i < n; i++) {
        int32_t xi = I32(ref[0])[i], k = 0, s = 0;
        while (k < xi) {
            k += 1;
            if (k % 3 == 0)
                continue;
            int32_t m = k;
            for (;;) {
                m -= 4;
                if (m < 0)
                    break;
                s += 1;
            }
            s += k;
        }
        I32(ref[1])[i] = s;
        int32_t tag = -1;
        for (int32_t t = 0; t < 4; t++)
            if (xi + t > 5) {
                tag = t;
                break;
            }
        I32(ref[2])[i] = tag;
    }
    check_runs(&c, "wc", in, ref, 3, 0, "x = -3..12");
    free_args(in, 3);
    free_args(ref, 3);
    compiled_free(&c);
}

/* f64 with promotions from i32, bool arrays, select and float rounding builtins. */
static const char mixed_src[] =
    "kernel mixed(a: f64[], b: i32[], c: bool[], out: f64[]) {\n"
    "    for i in 0..len(a) {\n"
    "        let x = a[i] * b[i] + 0.5;\n"
    "        let y = c[i] ? x : -x;\n"
    "        let z = select(b[i] > 0, floor(y), ceil(y));\n"
    "        out[i] = round(z * 0.75) + sqrt(abs(x)) - clamp(x, -2.0, 2.0)\n"
    "            + pow(2.0, f64(b[i] % 5));\n"
    "        c[i] = c[i] != (b[i] % 2 == 0);\n"
    "    }\n"
    "}\n";

Test(interp_programs, f64_promotions_and_bools) {
    compiled c = compile_src("mixed", mixed_src);
    rng r = {111};
    int64_t n = 40;
    ir_interp_arg in[4] = {arr(TY_F64, 1, n, 0, 0), arr(TY_I32, 1, n, 0, 0),
                           arr(TY_BOOL, 1, n, 0, 0), arr(TY_F64, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++) {
        F64(in[0])[i] = i == 0 ? 0.5 : i == 1 ? -0.5 : (rng_unit(&r) - 0.5) * 10;
        I32(in[1])[i] = (int32_t)rng_int(&r, -7, 7);
        BOOL(in[2])[i] = rng_next(&r) & 1;
    }
    I32(in[1])[0] = 1, I32(in[1])[1] = 1; /* x = 1.0 and 0.0: round(0.75), halves */
    ir_interp_arg ref[4];
    clone_args(ref, in, 4);
    for (int64_t i = 0; i < n; i++) {
        int32_t b = I32(ref[1])[i];
        double x = F64(ref[0])[i] * (double)b + 0.5;
        double y = BOOL(ref[2])[i] ? x : -x;
        double z = b > 0 ? floor(y) : ceil(y);
        double cl = -2.0 > x ? -2.0 : x;
        cl = 2.0 < cl ? 2.0 : cl;
        F64(ref[3])[i] = round(z * 0.75) + sqrt(fabs(x)) - cl + pow(2.0, (double)(b % 5));
        BOOL(ref[2])[i] = BOOL(ref[2])[i] != (b % 2 == 0);
    }
    check_runs(&c, "mixed", in, ref, 4, 0, "random");
    free_args(in, 4);
    free_args(ref, 4);
    compiled_free(&c);
}

/* ======================================================================================
 * The interpreter itself: op semantics on hand-written IR, order, speed, errors
 * ==================================================================================== */
