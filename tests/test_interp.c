/* test_interp.c - the golden programs of tests/golden/ir, each compiled at -O0 and -O2,
 * run by the reference interpreter on deterministic inputs with edge cases, and compared
 * with a plain C reference of the same computation (floats exactly) and between the two
 * levels bit for bit (suite `interp`). The helpers are in interp_util.h; the other interp
 * suites: interp_programs, interp_ops, interp_adstack, interp_errors, interp_passes. */
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

/* ======================================================================================
 * The golden programs of tests/golden/ir
 * ==================================================================================== */

Test(interp, golden_saxpy) {
    compiled c = compile_golden("saxpy.kern");
    rng r = {1};
    int64_t sizes[] = {0, 1, 37};
    for (int s = 0; s < 3; s++) {
        int64_t n = sizes[s];
        ir_interp_arg in[3] = {ir_interp_float(TY_F32, -1.75), arr(TY_F32, 1, n, 0, 0),
                               arr(TY_F32, 1, n, 0, 0)};
        for (int64_t i = 0; i < n; i++) {
            F32(in[1])[i] = rng_f32(&r, -10, 10);
            F32(in[2])[i] = rng_f32(&r, -10, 10);
        }
        ir_interp_arg ref[3];
        clone_args(ref, in, 3);
        for (int64_t i = 0; i < n; i++)
            F32(ref[2])[i] = -1.75f * F32(ref[1])[i] + F32(ref[2])[i];
        check_runs(&c, "saxpy", in, ref, 3, 0, "n varies");
        free_args(in, 3);
        free_args(ref, 3);
    }
    compiled_free(&c);
}

Test(interp, golden_atomics) {
    compiled c = compile_golden("atomics.kern");
    rng r = {2};
    int64_t n = 50, nb = 10;
    ir_interp_arg in[5] = {arr(TY_F32, 1, n, 0, 0), arr(TY_I32, 1, nb, 0, 0),
                           arr(TY_F32, 1, 1, 0, 0), arr(TY_F32, 1, 1, 0, 0),
                           arr(TY_F32, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++) {
        F32(in[0])[i] = i % 9 == 0 ? 0.0f : rng_f32(&r, -2, 2); /* clamps at both ends */
        F32(in[4])[i] = rng_f32(&r, -5, 5);
    }
    for (int64_t i = 0; i < nb; i++)
        I32(in[1])[i] = (int32_t)rng_int(&r, 0, 5);
    F32(in[2])[0] = 0.5f;
    F32(in[3])[0] = 0.75f;
    ir_interp_arg ref[5];
    clone_args(ref, in, 5);
    float *v = F32(ref[0]), *hi = F32(ref[2]), *lo = F32(ref[3]), *prod = F32(ref[4]);
    int32_t *bins = I32(ref[1]);
    for (int64_t i = 0; i < n; i++) {
        int32_t t = (int32_t)(v[i] * 10.0f);
        int32_t x = 0 > t ? 0 : t;
        int32_t b = (int32_t)(nb - 1) < x ? (int32_t)(nb - 1) : x;
        bins[b] += 1;
        float old = hi[0];
        hi[0] = v[i] > old ? v[i] : old;
        lo[0] = old < lo[0] ? old : lo[0];
        prod[i] = prod[i] * 2.0f;
        prod[i] = prod[i] / 3.0f;
    }
    check_runs(&c, "histogram", in, ref, 5, 0, "random");
    free_args(in, 5);
    free_args(ref, 5);
    compiled_free(&c);
}

Test(interp, golden_break_continue) {
    compiled c = compile_golden("break_continue.kern");
    rng r = {3};
    int64_t R = 12, C = 9;
    ir_interp_arg in[3] = {arr(TY_F32, 2, R, C, 0), arr(TY_I32, 1, R, 0, 0),
                           arr(TY_F32, 1, R, 0, 0)};
    for (int64_t i = 0; i < R * C; i++) {
        uint64_t k = rng_next(&r) % 10;
        F32(in[0])[i] = k < 3 ? 0.0f : k == 3 ? rng_f32(&r, -4, -0.5f) : rng_f32(&r, 0.5f, 4);
    }
    for (int64_t j = 0; j < C; j++) /* a row without negatives, a row of zeros */
        F32(in[0])[0 * C + j] = (float)(j + 1), F32(in[0])[1 * C + j] = 0.0f;
    F32(in[0])[2 * C + 0] = -1.0f; /* break at once */
    ir_interp_arg ref[3];
    clone_args(ref, in, 3);
    for (int64_t i = 0; i < R; i++) {
        int32_t found = -1;
        float sum = 0.0f;
        for (int64_t j = 0; j < C; j++) {
            float v = F32(ref[0])[i * C + j];
            if (v == 0.0f)
                continue;
            sum += v;
            if (v < 0.0f) {
                found = (int32_t)j;
                break;
            }
        }
        I32(ref[1])[i] = found;
        F32(ref[2])[i] = sum;
    }
    check_runs(&c, "first_negative", in, ref, 3, 0, "random");
    free_args(in, 3);
    free_args(ref, 3);
    compiled_free(&c);
}

static int32_t ref_find(const int32_t *a, int64_t n, int32_t key) {
    for (int64_t k = 0; k < n; k++)
        if (a[k] == key)
            return (int32_t)k;
    return -1;
}

Test(interp, golden_early_return) {
    compiled c = compile_golden("early_return.kern");
    rng r = {4};
    int64_t na_list[] = {15, 0};
    for (int s = 0; s < 2; s++) {
        int64_t na = na_list[s], nk = 20;
        ir_interp_arg in[4] = {arr(TY_I32, 1, na, 0, 0), arr(TY_I32, 1, nk, 0, 0),
                               arr(TY_I32, 1, nk, 0, 0), arr(TY_F32, 1, nk + 3, 0, 0)};
        for (int64_t i = 0; i < na; i++)
            I32(in[0])[i] = (int32_t)rng_int(&r, -5, 10); /* duplicates: the first wins */
        for (int64_t i = 0; i < nk; i++)
            I32(in[1])[i] = (int32_t)rng_int(&r, -8, 14);
        for (int64_t i = 0; i < nk + 3; i++)
            F32(in[3])[i] = i % 5 == 0 ? 1.0f : rng_f32(&r, -3, 3);
        F32(in[3])[2] = NAN;
        ir_interp_arg ref[4];
        clone_args(ref, in, 4);
        for (int64_t i = 0; i < nk; i++) {
            I32(ref[2])[i] = ref_find(I32(ref[0]), na, I32(ref[1])[i]);
            float x = F32(ref[3])[i];
            F32(ref[3])[i] = x > 1.0f ? 1.0f : x;
        }
        check_runs(&c, "lookup", in, ref, 4, 0, s ? "empty table" : "random");
        free_args(in, 4);
        free_args(ref, 4);
    }
    compiled_free(&c);
}

Test(interp, golden_if_else) {
    compiled c = compile_golden("if_else.kern");
    rng r = {5};
    int64_t n = 40;
    ir_interp_arg in[2] = {arr(TY_F32, 1, n, 0, 0), arr(TY_I32, 1, n, 0, 0)};
    float special[] = {0.0f, -0.0f, 10.0f, 10.5f, -10.5f, NAN, INFINITY, -INFINITY};
    for (int64_t i = 0; i < n; i++)
        F32(in[0])[i] = i < 8 ? special[i] : rng_f32(&r, -20, 20);
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int64_t i = 0; i < n; i++) {
        int32_t cl = 0;
        float s = F32(ref[0])[i];
        if (s < 0.0f) {
            cl = -1;
            s = -s;
        } else if (s == 0.0f) {
            cl = 0;
        } else {
            cl = 1;
            if (s > 10.0f)
                cl = 2;
        }
        I32(ref[1])[i] = cl;
    }
    check_runs(&c, "classify", in, ref, 2, 0, "random");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

Test(interp, golden_math) {
    compiled c = compile_golden("math.kern");
    rng r = {6};
    int64_t n = 48;
    ir_interp_arg in[2] = {arr(TY_F32, 1, n, 0, 0), arr(TY_F32, 1, n, 0, 0)};
    float special[] = {0.0f, -0.0f, 0.5f, -0.5f, 1.0f, -1.0f, 2.5f, 1e-3f, 0.25f, -2.0f};
    for (int64_t i = 0; i < n; i++)
        F32(in[0])[i] = i < 10 ? special[i] : rng_f32(&r, -1.2f, 1.2f);
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int64_t i = 0; i < n; i++) {
        float v = F32(ref[0])[i];
        float s = sinf(v) + cosf(v) + tanf(v) + asinf(v) + acosf(v) + atanf(v);
        s += sinhf(v) + coshf(v) + tanhf(v) + expf(v) + exp2f(v) + logf(v) + log2f(v);
        s += sqrtf(v) + 1.0f / sqrtf(v) + fabsf(v) + floorf(v) + ceilf(v) + roundf(v) + sign_f32(v);
        float mn = 1.0f < v ? 1.0f : v, mx = 0.0f > v ? 0.0f : v;
        s += atan2f(v, 2.0f) + powf(v, 3.0f) + mn + mx + fmaf(v, 2.0f, 1.0f);
        float cl = -1.0f > v ? -1.0f : v;
        cl = 1.0f < cl ? 1.0f : cl;
        s += cl;
        F32(ref[1])[i] = s + 3.0f + -1.0f + 2.0f;
    }
    check_runs(&c, "math", in, ref, 2, 0, "random in [-1.2, 1.2]");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

Test(interp, golden_multirange_serial) {
    compiled c = compile_golden("multirange_serial.kern");
    rng r = {7};
    int64_t R = 5, C = 6;
    ir_interp_arg in[2] = {arr(TY_F32, 2, R, C, 0), arr(TY_F32, 1, 2, 0, 0)};
    for (int64_t i = 0; i < R * C; i++)
        F32(in[0])[i] = rng_f32(&r, -3, 3);
    F32(in[1])[1] = 42.0f;
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    float s = 0.0f;
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < i; j++)
            s += F32(ref[0])[i * C + j];
    F32(ref[1])[0] = s;
    check_runs(&c, "tri", in, ref, 2, 0, "5x6");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

Test(interp, golden_nested_loops_var) {
    compiled c = compile_golden("nested_loops_var.kern");
    rng r = {8};
    int64_t n = 9, m = 6;
    int32_t steps_list[] = {3, 0, -2, 1};
    for (int s = 0; s < 4; s++) {
        int32_t steps = steps_list[s];
        ir_interp_arg in[4] = {arr(TY_I32, 1, n, 0, 0), arr(TY_F32, 2, n, m, 0),
                               ir_interp_int(TY_I32, steps), arr(TY_F32, 1, n, 0, 0)};
        for (int64_t i = 0; i < n; i++)
            I32(in[0])[i] = (int32_t)rng_int(&r, -1, m); /* -1 and 0: no trips */
        for (int64_t i = 0; i < n * m; i++)
            F32(in[1])[i] = rng_f32(&r, -2, 2);
        ir_interp_arg ref[4];
        clone_args(ref, in, 4);
        for (int64_t i = 0; i < n; i++) {
            float a = 0.0f, b = 1.0f;
            for (int32_t t = 0; t < steps; t++) {
                for (int32_t j = 0; j < I32(ref[0])[i]; j++)
                    a = a + F32(ref[1])[i * m + j] * b;
                b = b * 0.5f;
            }
            F32(ref[3])[i] = a + b;
        }
        char label[32];
        snprintf(label, sizeof label, "steps=%d", steps);
        check_runs(&c, "ragged", in, ref, 4, 0, label);
        free_args(in, 4);
        free_args(ref, 4);
    }
    compiled_free(&c);
}

Test(interp, golden_parallel_continue) {
    compiled c = compile_golden("parallel_continue.kern");
    rng r = {9};
    int64_t n = 30;
    ir_interp_arg in[2] = {arr(TY_F32, 1, n, 0, 0), arr(TY_F32, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++) {
        F32(in[0])[i] = rng_f32(&r, -4, 4);
        F32(in[1])[i] = 100.0f + (float)i;
    }
    F32(in[0])[0] = -0.0f;
    F32(in[0])[1] = NAN;
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int64_t i = 0; i < n; i++) {
        if (F32(ref[0])[i] < 0.0f)
            continue;
        F32(ref[1])[i] = sqrtf(F32(ref[0])[i]);
    }
    check_runs(&c, "skip_neg", in, ref, 2, 0, "random");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

Test(interp, golden_serial_top) {
    compiled c = compile_golden("serial_top.kern");
    rng r = {10};
    int64_t sizes[] = {0, 17};
    for (int s = 0; s < 2; s++) {
        int64_t n = sizes[s];
        ir_interp_arg in[2] = {arr(TY_F32, 1, n, 0, 0), arr(TY_F32, 1, n, 0, 0)};
        for (int64_t i = 0; i < n; i++)
            F32(in[0])[i] = rng_f32(&r, -1, 1);
        ir_interp_arg ref[2];
        clone_args(ref, in, 2);
        float acc = 0.0f;
        for (int64_t k = 0; k < n; k++) {
            acc += F32(ref[0])[k];
            F32(ref[1])[k] = acc;
        }
        check_runs(&c, "prefix", in, ref, 2, 0, n ? "17" : "empty");
        free_args(in, 2);
        free_args(ref, 2);
    }
    compiled_free(&c);
}

Test(interp, golden_shadowing_blocks) {
    compiled c = compile_golden("shadowing_blocks.kern");
    rng r = {11};
    int64_t n = 21;
    ir_interp_arg in[1] = {arr(TY_F32, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++)
        F32(in[0])[i] = rng_f32(&r, -8, 8);
    ir_interp_arg ref[1];
    clone_args(ref, in, 1);
    for (int64_t i = 0; i < n; i++) {
        float v = F32(ref[0])[i];
        float v2 = v * 2.0f;
        float inner = v2 + 1.0f;
        inner += 1.0f;
        F32(ref[0])[i] = inner;
        v -= 1.0f;
        F32(ref[0])[i] = F32(ref[0])[i] + v;
    }
    check_runs(&c, "shadow", in, ref, 1, 0, "random");
    free_args(in, 1);
    free_args(ref, 1);
    compiled_free(&c);
}

Test(interp, golden_simulate) {
    compiled c = compile_golden("simulate.kern");
    rng r = {12};
    int64_t n = 13, nw = 25;
    int32_t steps_list[] = {25, 0, -1, 3};
    for (int s = 0; s < 4; s++) {
        int32_t steps = steps_list[s];
        ir_interp_arg in[4] = {arr(TY_F32, 1, n, 0, 0), arr(TY_F32, 1, nw, 0, 0),
                               arr(TY_F32, 1, n, 0, 0), ir_interp_int(TY_I32, steps)};
        for (int64_t i = 0; i < n; i++)
            F32(in[0])[i] = rng_f32(&r, -3, 3);
        for (int64_t i = 0; i < nw; i++)
            F32(in[1])[i] = rng_f32(&r, -1, 1);
        ir_interp_arg ref[4];
        clone_args(ref, in, 4);
        for (int64_t i = 0; i < n; i++) {
            float x = F32(ref[0])[i];
            int32_t T = steps < 4096 ? steps : 4096;
            for (int32_t t = 0; t < T; t++)
                x = sinf(x) * F32(ref[1])[t] + x;
            F32(ref[2])[i] = x;
        }
        char label[32];
        snprintf(label, sizeof label, "steps=%d", steps);
        check_runs(&c, "simulate", in, ref, 4, 0, label);
        free_args(in, 4);
        free_args(ref, 4);
    }
    compiled_free(&c);
}

Test(interp, golden_stencil2d) {
    compiled c = compile_golden("stencil2d.kern");
    rng r = {13};
    int64_t shapes[][2] = {{6, 7}, {2, 5}, {1, 1}, {3, 3}};
    for (int s = 0; s < 4; s++) {
        int64_t R = shapes[s][0], C = shapes[s][1];
        ir_interp_arg in[2] = {arr(TY_F32, 2, R, C, 0), arr(TY_F32, 2, R, C, 0)};
        for (int64_t i = 0; i < R * C; i++) {
            F32(in[0])[i] = rng_f32(&r, -5, 5);
            F32(in[1])[i] = -99.0f;
        }
        ir_interp_arg ref[2];
        clone_args(ref, in, 2);
        float *src = F32(ref[0]), *dst = F32(ref[1]);
        for (int64_t i = 1; i < R - 1; i++)
            for (int64_t j = 1; j < C - 1; j++)
                dst[i * C + j] = 0.25f * (src[(i - 1) * C + j] + src[(i + 1) * C + j] +
                                          src[i * C + j - 1] + src[i * C + j + 1]);
        char label[32];
        snprintf(label, sizeof label, "%dx%d", (int)R, (int)C);
        check_runs(&c, "blur", in, ref, 2, 0, label);
        free_args(in, 2);
        free_args(ref, 2);
    }
    compiled_free(&c);
}

Test(interp, golden_tasks) {
    compiled c = compile_golden("tasks.kern");
    rng r = {14};
    int64_t n = 19;
    ir_interp_arg in[3] = {arr(TY_F32, 1, n, 0, 0), arr(TY_F32, 1, 1, 0, 0),
                           ir_interp_float(TY_F32, 2.5)};
    for (int64_t i = 0; i < n; i++)
        F32(in[0])[i] = rng_f32(&r, 0.1f, 3);
    F32(in[1])[0] = 1234.0f; /* overwritten by the first serial task */
    ir_interp_arg ref[3];
    clone_args(ref, in, 3);
    float *x = F32(ref[0]), *total = F32(ref[1]);
    total[0] = 0.0f;
    for (int64_t i = 0; i < n; i++)
        total[0] += x[i];
    int32_t half = (int32_t)n / 2;
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] * 2.5f / total[0] + (float)half;
    check_runs(&c, "normalize", in, ref, 3, 0, "random");
    free_args(in, 3);
    free_args(ref, 3);
    compiled_free(&c);
}

Test(interp, golden_ternary_lazy) {
    compiled c = compile_golden("ternary_lazy.kern");
    rng r = {15};
    /* x has exactly n elements and out more: x[i] with i >= n would be out of bounds, so
     * the run only succeeds if && and ?: are lazy. n < 0: no load at all. */
    int32_t n_list[] = {7, 0, -3};
    for (int s = 0; s < 3; s++) {
        int32_t n = n_list[s];
        int64_t nx = n > 0 ? n : 0, nout = 11;
        ir_interp_arg in[3] = {arr(TY_F32, 1, nx, 0, 0), ir_interp_int(TY_I32, n),
                               arr(TY_F32, 1, nout, 0, 0)};
        for (int64_t i = 0; i < nx; i++)
            F32(in[0])[i] = rng_f32(&r, -2, 2);
        ir_interp_arg ref[3];
        clone_args(ref, in, 3);
        for (int32_t i = 0; i < nout; i++) {
            bool inb = i < n && F32(ref[0])[i] > 0.0f;
            float v = i < n ? F32(ref[0])[i] : 0.0f;
            float w = i < n ? 1.0f : 2.0f;
            F32(ref[2])[i] = inb ? v + w : w;
        }
        char label[32];
        snprintf(label, sizeof label, "n=%d", n);
        check_runs(&c, "guard", in, ref, 3, 0, label);
        free_args(in, 3);
        free_args(ref, 3);
    }
    compiled_free(&c);
}

Test(interp, golden_types_casts) {
    compiled c = compile_golden("types_casts.kern");
    rng r = {16};
    int64_t n = 40;
    ir_interp_arg in[6] = {arr(TY_I32, 1, n, 0, 0),  arr(TY_U32, 1, n, 0, 0),
                           arr(TY_I64, 1, n, 0, 0),  arr(TY_F64, 1, n, 0, 0),
                           arr(TY_BOOL, 1, n, 0, 0), arr(TY_F32, 1, n, 0, 0)};
    for (int64_t i = 0; i < n; i++) {
        I32(in[0])[i] = (int32_t)(uint32_t)rng_next(&r);
        U32(in[1])[i] = (uint32_t)rng_next(&r);
        I64(in[2])[i] = (int64_t)rng_next(&r);
        F64(in[3])[i] = (rng_unit(&r) - 0.5) * 1e6;
        BOOL(in[4])[i] = rng_next(&r) & 1;
    }
    int32_t xs[] = {0, -1, 1, INT32_MIN, INT32_MAX, 7, -8};
    uint32_t ys[] = {0, UINT32_MAX, 1, 3, 5, 0x80000000u, 14};
    int64_t zs[] = {0, -1, INT64_MIN, INT64_MAX, 1, 3, -3};
    double ws[] = {1.0, 0.5, -0.0, INFINITY, NAN, 1e300, -2.0};
    for (int i = 0; i < 7; i++) {
        I32(in[0])[i] = xs[i], U32(in[1])[i] = ys[i], I64(in[2])[i] = zs[i];
        F64(in[3])[i] = ws[i];
    }
    ir_interp_arg ref[6];
    clone_args(ref, in, 6);
    for (int64_t i = 0; i < n; i++) {
        int32_t x = I32(ref[0])[i];
        uint32_t y = U32(ref[1])[i];
        int64_t z = I64(ref[2])[i];
        double w = F64(ref[3])[i];
        bool p = BOOL(ref[4])[i];
        int32_t q =
            (int32_t)((((uint32_t)shl32(x, 2) | (uint32_t)sar32(x, 1)) & ~(uint32_t)x) ^ 7u);
        uint32_t rr = y / 3u + y % 5u;
        F32(ref[5])[i] = (float)x + (float)w * 0.5f;
        F64(ref[3])[i] = w + (double)z + (double)y + (double)q + (double)rr;
        I64(ref[2])[i] = sub64(mul64((int64_t)x, z), (int64_t)y);
        BOOL(ref[4])[i] = !p || (x > 0 && w < 1.0);
        I32(ref[0])[i] = add32(p ? x : neg32(x), 1);
    }
    check_runs(&c, "mix", in, ref, 6, 0, "random and edge values");
    free_args(in, 6);
    free_args(ref, 6);
    compiled_free(&c);
}

Test(interp, golden_void_func) {
    compiled c = compile_golden("void_func.kern");
    rng r = {17};
    double by_list[] = {1.5, 0.0, -0.0, -2.25};
    for (int s = 0; s < 4; s++) {
        int64_t n = 12;
        ir_interp_arg in[2] = {arr(TY_F32, 1, n, 0, 0), ir_interp_float(TY_F32, by_list[s])};
        for (int64_t i = 0; i < n; i++)
            F32(in[0])[i] = rng_f32(&r, -3, 3);
        ir_interp_arg ref[2];
        clone_args(ref, in, 2);
        float by = (float)by_list[s];
        for (int64_t i = 0; i < n; i++) {
            if (by == 0.0f)
                continue;
            F32(ref[0])[i] = F32(ref[0])[i] + by;
        }
        char label[32];
        snprintf(label, sizeof label, "by=%g", by_list[s]);
        check_runs(&c, "bump_all", in, ref, 2, 0, label);
        free_args(in, 2);
        free_args(ref, 2);
    }
    compiled_free(&c);
}

Test(interp, golden_while_break) {
    compiled c = compile_golden("while_break.kern");
    rng r = {18};
    int64_t n = 40;
    ir_interp_arg in[2] = {arr(TY_I64, 1, n, 0, 0), arr(TY_I32, 1, n, 0, 0)};
    int64_t special[] = {1, 2, 27, 0, -1, -7, INT64_MAX, INT64_MIN, 97, 871};
    for (int64_t i = 0; i < n; i++)
        I64(in[0])[i] = i < 10 ? special[i] : rng_int(&r, 1, 1000000);
    ir_interp_arg ref[2];
    clone_args(ref, in, 2);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = I64(ref[0])[i];
        int32_t k = 0;
        while (v != 1) {
            if (k >= 1000)
                break;
            if (v % 2 == 0)
                v = v / 2;
            else
                v = add64(mul64(3, v), 1);
            k += 1;
        }
        I32(ref[1])[i] = k;
    }
    check_runs(&c, "collatz", in, ref, 2, 0, "random and cycles");
    free_args(in, 2);
    free_args(ref, 2);
    compiled_free(&c);
}

Test(interp, golden_while_converge) {
    compiled c = compile_golden("while_converge.kern");
    rng r = {19};
    int64_t n = 30;
    ir_interp_arg in[3] = {arr(TY_F64, 1, n, 0, 0), arr(TY_F64, 1, n, 0, 0),
                           ir_interp_float(TY_F64, 1e-12)};
    double special[] = {0.0, 1.0, 4.0, -4.0, 1e-6, 1e6, 2.0};
    for (int64_t i = 0; i < n; i++)
        F64(in[0])[i] = i < 7 ? special[i] : rng_unit(&r) * 100.0;
    ir_interp_arg ref[3];
    clone_args(ref, in, 3);
    for (int64_t i = 0; i < n; i++) {
        double a = F64(ref[0])[i], x = a;
        int32_t it = 0;
        while (fabs(x * x - a) > 1e-12 && it < 100) {
            x = 0.5 * (x + a / x);
            it += 1;
        }
        F64(ref[1])[i] = x;
    }
    check_runs(&c, "newton", in, ref, 3, 0, "random, zero, negative");
    free_args(in, 3);
    free_args(ref, 3);
    compiled_free(&c);
}

/* Every golden lowering program has a test above: a new one needs a reference too. */
Test(interp, every_golden_program_is_covered) {
    static const char *const covered[] = {
        "atomics.kern",
        "break_continue.kern",
        "early_return.kern",
        "if_else.kern",
        "math.kern",
        "multirange_serial.kern",
        "nested_loops_var.kern",
        "parallel_continue.kern",
        "saxpy.kern",
        "serial_top.kern",
        "shadowing_blocks.kern",
        "simulate.kern",
        "stencil2d.kern",
        "tasks.kern",
        "ternary_lazy.kern",
        "types_casts.kern",
        "void_func.kern",
        "while_break.kern",
        "while_converge.kern",
    };
    char **names;
    int n = golden_list("ir", ".kern", &names);
    cr_assert(n > 0);
    for (int i = 0; i < n; i++) {
        bool found = false;
        for (size_t j = 0; j < sizeof covered / sizeof covered[0]; j++)
            found |= !strcmp(names[i], covered[j]);
        cr_expect(found, "tests/golden/ir/%s has no interpreter test in test_interp.c", names[i]);
    }
    golden_free_list(names, n);
}

/* ======================================================================================
 * Inline programs that stress the lowering
 * ==================================================================================== */
