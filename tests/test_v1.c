/* test_v1.c - the version-1 value types (docs/reference.md section 11) end to end, on the
 * device of KERN_TEST_BACKEND: vectors, matrices and quaternions against plain C written
 * here (products, inverses, rotations), arrays of structs against a C array of the same
 * struct (the layout), local arrays against C (sorting with dynamic indices), parameters
 * passed by value, the launch-time shape check, and the compile errors of misuse. The
 * gradients of the same features are in the gradient corpus (tests/grad/vec_*.kern, ...). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compiler/driver.h"
#include "../include/kern.h"
#include "../ir/ir.h"
#include "test_backend.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(float lo, float hi) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 11) * (1.0 / 9007199254740992.0));
}

static kern_context *ctx_new(void) {
    kern_context_options o = kern_context_options_default();
    o.backend = kern_test_backend();
    kern_context *ctx;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    return ctx;
}

static kern_module *compile(kern_context *ctx, const char *src) {
    kern_module *m = NULL;
    kern_status st = kern_module_from_source(ctx, src, strlen(src), "v1.kern", &m);
    cr_assert_eq(st, KERN_OK, "%s", kern_context_last_error(ctx));
    return m;
}

static kern_kernel *find(kern_module *m, const char *name) {
    kern_kernel *k;
    cr_assert_eq(kern_kernel_find(m, name, &k), KERN_OK, "kernel %s", name);
    return k;
}

static kern_buffer *buf(kern_context *ctx, kern_dtype t, int rank, const int64_t *shape,
                        const void *d) {
    kern_buffer *b;
    cr_assert_eq(kern_buffer_create(ctx, t, rank, shape, d, &b), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    return b;
}

static void launch(kern_context *ctx, kern_kernel *k, kern_arg *a, int n) {
    cr_assert_eq(kern_launch(k, a, n), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_sync(ctx), KERN_OK, "%s", kern_context_last_error(ctx));
}

static void expect_close(const float *got, const double *want, size_t n, double tol,
                         const char *what) {
    for (size_t i = 0; i < n; i++)
        cr_assert(fabs(got[i] - want[i]) <= tol * fmax(1.0, fabs(want[i])),
                  "%s[%zu]: got %.9g, want %.9g", what, i, (double)got[i], want[i]);
}

/* ---- vectors and matrices -------------------------------------------------------------- */

static void matvec(const double m[9], const double v[3], double out[3]) {
    for (int r = 0; r < 3; r++)
        out[r] = m[3 * r] * v[0] + m[3 * r + 1] * v[1] + m[3 * r + 2] * v[2];
}

static void vecmat(const double v[3], const double m[9], double out[3]) {
    for (int c = 0; c < 3; c++)
        out[c] = v[0] * m[c] + v[1] * m[3 + c] + v[2] * m[6 + c];
}

static double det3(const double m[9]) {
    return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
           m[2] * (m[3] * m[7] - m[4] * m[6]);
}

/* Gauss-Jordan with partial pivoting: independent of the compiler's cofactor formula. */
static void inverse3(const double m[9], double inv[9]) {
    double a[3][6];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 6; c++)
            a[r][c] = c < 3 ? m[3 * r + c] : (c - 3 == r);
    for (int c = 0; c < 3; c++) {
        int p = c;
        for (int r = c + 1; r < 3; r++)
            if (fabs(a[r][c]) > fabs(a[p][c]))
                p = r;
        for (int k = 0; k < 6; k++) {
            double t = a[c][k];
            a[c][k] = a[p][k];
            a[p][k] = t;
        }
        double d = a[c][c];
        for (int k = 0; k < 6; k++)
            a[c][k] /= d;
        for (int r = 0; r < 3; r++)
            if (r != c) {
                double f = a[r][c];
                for (int k = 0; k < 6; k++)
                    a[r][k] -= f * a[c][k];
            }
    }
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            inv[3 * r + c] = a[r][c + 3];
}

static const char *VEC_SRC =
    "kernel vm(m: mat3[], a: vec3[], b: vec3[], o: f32[,], k: i32) {\n"
    "    for i in 0..len(m) {\n"
    "        let M = m[i];\n"
    "        let mv = M * a[i];\n"
    "        let vm = a[i] * M;\n"
    "        let mm = M * transpose(M);\n"
    "        let inv = inverse(M);\n"
    "        let c = cross(a[i], b[i]);\n"
    "        var w = vec4(c, dot(a[i], b[i]));\n"
    "        w.y = w.y * 2.0;\n"
    "        w[k] += 1.0;\n"
    "        o[i, 0] = mv.x; o[i, 1] = mv.y; o[i, 2] = mv.z;\n"
    "        o[i, 3] = vm[0]; o[i, 4] = vm[1]; o[i, 5] = vm[2];\n"
    "        o[i, 6] = mm[0, 1]; o[i, 7] = mm[2][2];\n"
    "        o[i, 8] = inv[1][0]; o[i, 9] = inv[2, 1];\n"
    "        o[i, 10] = determinant(M); o[i, 11] = trace(M);\n"
    "        o[i, 12] = w.x; o[i, 13] = w.y; o[i, 14] = w.z; o[i, 15] = w.w;\n"
    "        o[i, 16] = length(c); o[i, 17] = normalize(b[i]).y;\n"
    "        o[i, 18] = (outer(a[i], b[i]) * 2.0 - mat3(1.0))[1][2];\n"
    "        o[i, 19] = select(a[i] == a[i], 1.0, 0.0) + select(a[i] != b[i], 2.0, 0.0);\n"
    "        o[i, 20] = (-M + diag(a[i]))[2][0] + cmul(M, M)[0][0];\n"
    "        o[i, 21] = clamp(a[i] * 3.0, -1.0, 1.0).z + max(a[i], b[i]).x;\n"
    "    }\n"
    "}\n";

Test(v1, vectors_and_matrices_match_c) {
    enum { N = 37, O = 22 };
    kern_context *ctx = ctx_new();
    kern_module *mod = compile(ctx, VEC_SRC);
    float m[N][9], a[N][3], b[N][3], o[N][O];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < 9; j++)
            m[i][j] = frand(-1, 1) + (j % 4 == 0 ? 2.0f : 0.0f);
        for (int j = 0; j < 3; j++) {
            a[i][j] = frand(-1, 1);
            b[i][j] = frand(-1, 1);
        }
    }
    int64_t sm[3] = {N, 3, 3}, sv[2] = {N, 3}, so[2] = {N, O};
    kern_buffer *bm = buf(ctx, KERN_F32, 3, sm, m), *ba = buf(ctx, KERN_F32, 2, sv, a),
                *bb = buf(ctx, KERN_F32, 2, sv, b), *bo = buf(ctx, KERN_F32, 2, so, NULL);
    int k = 2;
    kern_arg args[5] = {kern_arg_buffer(bm), kern_arg_buffer(ba), kern_arg_buffer(bb),
                        kern_arg_buffer(bo), kern_arg_i32(k)};
    launch(ctx, find(mod, "vm"), args, 5);
    cr_assert_eq(kern_buffer_read(bo, o, sizeof o), KERN_OK);
    for (int i = 0; i < N; i++) {
        double M[9], A[3], B[3], want[O], t[3], inv[9], mmT[9];
        for (int j = 0; j < 9; j++)
            M[j] = m[i][j];
        for (int j = 0; j < 3; j++) {
            A[j] = a[i][j];
            B[j] = b[i][j];
        }
        matvec(M, A, want);
        vecmat(A, M, want + 3);
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++)
                mmT[3 * r + c] = M[3 * r] * M[3 * c] + M[3 * r + 1] * M[3 * c + 1] +
                                 M[3 * r + 2] * M[3 * c + 2];
        want[6] = mmT[1];
        want[7] = mmT[8];
        inverse3(M, inv);
        want[8] = inv[3];
        want[9] = inv[7];
        want[10] = det3(M);
        want[11] = M[0] + M[4] + M[8];
        t[0] = A[1] * B[2] - A[2] * B[1];
        t[1] = A[2] * B[0] - A[0] * B[2];
        t[2] = A[0] * B[1] - A[1] * B[0];
        double w[4] = {t[0], t[1] * 2, t[2], A[0] * B[0] + A[1] * B[1] + A[2] * B[2]};
        w[k] += 1;
        memcpy(want + 12, w, sizeof w);
        want[16] = sqrt(t[0] * t[0] + t[1] * t[1] + t[2] * t[2]);
        want[17] = B[1] / sqrt(B[0] * B[0] + B[1] * B[1] + B[2] * B[2]);
        want[18] = 2 * A[1] * B[2];
        want[19] = 1 + 2;
        want[20] = -M[6] + M[0] * M[0];
        want[21] = fmin(fmax(A[2] * 3, -1), 1) + fmax(A[0], B[0]);
        char what[32];
        snprintf(what, sizeof what, "item %d", i);
        expect_close(o[i], want, O, 2e-4, what);
    }
    kern_context_release(ctx);
}

/* ---- quaternions ------------------------------------------------------------------------ */

static void qmul(const double a[4], const double b[4], double o[4]) {
    /* (x, y, z, w): w the real part; Hamilton's product written from its definition */
    double aw = a[3], bw = b[3];
    o[3] = aw * bw - (a[0] * b[0] + a[1] * b[1] + a[2] * b[2]);
    for (int i = 0; i < 3; i++) {
        int j = (i + 1) % 3, k = (i + 2) % 3;
        o[i] = aw * b[i] + bw * a[i] + (a[j] * b[k] - a[k] * b[j]);
    }
}

Test(v1, quaternions_rotate_like_c) {
    enum { N = 20 };
    static const char *src =
        "kernel q(axis: vec3[], ang: f32[], p: vec3[], o: f32[,]) {\n"
        "    for i in 0..len(ang) {\n"
        "        let q = quat_from_axis_angle(normalize(axis[i]), ang[i]);\n"
        "        let r = quat(0.5, -0.5, 0.5, 0.5);\n"
        "        let v = quat_rotate(q, p[i]);\n"
        "        let m = quat_to_mat3(q) * p[i];\n"
        "        let qr = q * conjugate(r);\n"
        "        o[i, 0] = v.x; o[i, 1] = v.y; o[i, 2] = v.z;\n"
        "        o[i, 3] = m.x; o[i, 4] = m.y; o[i, 5] = m.z;\n"
        "        o[i, 6] = qr.x; o[i, 7] = qr.y; o[i, 8] = qr.z; o[i, 9] = qr.w;\n"
        "    }\n"
        "}\n";
    kern_context *ctx = ctx_new();
    kern_module *mod = compile(ctx, src);
    float axis[N][3], ang[N], p[N][3], o[N][10];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < 3; j++) {
            axis[i][j] = frand(-1, 1) + (j == 0 ? 1.5f : 0.0f);
            p[i][j] = frand(-2, 2);
        }
        ang[i] = frand(-3, 3);
    }
    int64_t s3[2] = {N, 3}, s1[1] = {N}, so[2] = {N, 10};
    kern_buffer *bx = buf(ctx, KERN_F32, 2, s3, axis), *ban = buf(ctx, KERN_F32, 1, s1, ang),
                *bp = buf(ctx, KERN_F32, 2, s3, p), *bo = buf(ctx, KERN_F32, 2, so, NULL);
    kern_arg args[4] = {kern_arg_buffer(bx), kern_arg_buffer(ban), kern_arg_buffer(bp),
                        kern_arg_buffer(bo)};
    launch(ctx, find(mod, "q"), args, 4);
    cr_assert_eq(kern_buffer_read(bo, o, sizeof o), KERN_OK);
    for (int i = 0; i < N; i++) {
        double n = sqrt(axis[i][0] * axis[i][0] + axis[i][1] * axis[i][1] + axis[i][2] * axis[i][2]);
        double u[3] = {axis[i][0] / n, axis[i][1] / n, axis[i][2] / n}, th = ang[i];
        /* Rodrigues' formula: the rotation by th about u */
        double P[3] = {p[i][0], p[i][1], p[i][2]}, c = cos(th), s = sin(th);
        double ud = u[0] * P[0] + u[1] * P[1] + u[2] * P[2];
        double uxp[3] = {u[1] * P[2] - u[2] * P[1], u[2] * P[0] - u[0] * P[2], u[0] * P[1] - u[1] * P[0]};
        double want[10];
        for (int j = 0; j < 3; j++)
            want[j] = want[3 + j] = P[j] * c + uxp[j] * s + u[j] * ud * (1 - c);
        double q[4] = {u[0] * sin(th / 2), u[1] * sin(th / 2), u[2] * sin(th / 2), cos(th / 2)};
        double rc[4] = {-0.5, 0.5, -0.5, 0.5};
        qmul(q, rc, want + 6);
        char what[32];
        snprintf(what, sizeof what, "item %d", i);
        expect_close(o[i], want, 10, 1e-4, what);
    }
    kern_context_release(ctx);
}

/* ---- structs ----------------------------------------------------------------------------- */

typedef struct particle {
    float pos[3];
    float vel[3];
    float mass;
} particle;

Test(v1, struct_arrays_have_the_c_layout) {
    enum { N = 50 };
    static const char *src =
        "struct Particle { pos: vec3, vel: vec3, mass: f32 }\n"
        "func kinetic(p: Particle) -> f32 { return 0.5 * p.mass * length_sq(p.vel); }\n"
        "kernel step(ps: Particle[], e: f32[], dt: f32, g: vec3) {\n"
        "    for i in 0..len(ps) {\n"
        "        var p = ps[i];\n"
        "        p.vel += g * dt;\n"
        "        p.pos += p.vel * dt;\n"
        "        ps[i] = p;\n"
        "        ps[i].mass *= 2.0;\n"
        "        e[i] = kinetic(p);\n"
        "        let q = Particle { mass: 1.0, pos: vec3(0.0), vel: p.pos };\n"
        "        e[i] += q.vel.y * q.mass;\n"
        "    }\n"
        "}\n";
    kern_context *ctx = ctx_new();
    kern_module *mod = compile(ctx, src);
    particle ps[N], got[N];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < 3; j++) {
            ps[i].pos[j] = frand(-1, 1);
            ps[i].vel[j] = frand(-1, 1);
        }
        ps[i].mass = frand(0.5, 2);
    }
    cr_assert_eq(sizeof(particle), 7 * sizeof(float));
    int64_t sp[2] = {N, 7}, se[1] = {N}, sg[1] = {3};
    float gv[3] = {0, -9.8f, 0.5f}, e[N];
    kern_buffer *bp = buf(ctx, KERN_F32, 2, sp, ps), *be = buf(ctx, KERN_F32, 1, se, NULL),
                *bg = buf(ctx, KERN_F32, 1, sg, gv);
    float dt = 0.01f;
    kern_arg args[4] = {kern_arg_buffer(bp), kern_arg_buffer(be), kern_arg_f32(dt),
                        kern_arg_buffer(bg)};
    launch(ctx, find(mod, "step"), args, 4);
    cr_assert_eq(kern_buffer_read(bp, got, sizeof got), KERN_OK);
    cr_assert_eq(kern_buffer_read(be, e, sizeof e), KERN_OK);
    for (int i = 0; i < N; i++) {
        double v[3], x[3], want[7], ke = 0;
        for (int j = 0; j < 3; j++) {
            v[j] = ps[i].vel[j] + (double)gv[j] * dt;
            x[j] = ps[i].pos[j] + v[j] * dt;
            ke += v[j] * v[j];
            want[j] = x[j];
            want[3 + j] = v[j];
        }
        want[6] = 2.0 * ps[i].mass;
        double we = 0.5 * ps[i].mass * ke + x[1];
        expect_close(got[i].pos, want, 7, 1e-5, "particle");
        expect_close(&e[i], &we, 1, 1e-5, "energy");
    }
    kern_context_release(ctx);
}

/* ---- local arrays ---------------------------------------------------------------------- */

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

Test(v1, local_arrays_sort_and_index_dynamically) {
    enum { N = 40, L = 8 };
    static const char *src =
        "kernel sort(x: f32[,], y: f32[,], s: f32[]) {\n"
        "    for i in 0..shape(x, 0) {\n"
        "        var a: f32[8];\n"
        "        for k in 0..len(a) { a[k] = x[i, k]; }\n"
        "        for p in 0..len(a) {\n"
        "            for q in 0..len(a) - 1 - p {\n"
        "                if a[q] > a[q + 1] {\n"
        "                    let t = a[q];\n"
        "                    a[q] = a[q + 1];\n"
        "                    a[q + 1] = t;\n"
        "                }\n"
        "            }\n"
        "        }\n"
        "        for k in 0..8 { y[i, k] = a[k]; }\n"
        "        var g: f32[2, 3];\n"
        "        let w = [1.0, 10.0, 100.0];\n"
        "        for k in 0..6 { g[k / 3, k % 3] = a[k] * w[k % 3]; }\n"
        "        s[i] = g[1, 2] + g[0, 1] + f32(len(w));\n"
        "    }\n"
        "}\n";
    kern_context *ctx = ctx_new();
    kern_module *mod = compile(ctx, src);
    float x[N][L], y[N][L], s[N];
    for (int i = 0; i < N; i++)
        for (int k = 0; k < L; k++)
            x[i][k] = frand(-5, 5);
    int64_t sx[2] = {N, L}, ss[1] = {N};
    kern_buffer *bx = buf(ctx, KERN_F32, 2, sx, x), *by = buf(ctx, KERN_F32, 2, sx, NULL),
                *bs = buf(ctx, KERN_F32, 1, ss, NULL);
    kern_arg args[3] = {kern_arg_buffer(bx), kern_arg_buffer(by), kern_arg_buffer(bs)};
    launch(ctx, find(mod, "sort"), args, 3);
    cr_assert_eq(kern_buffer_read(by, y, sizeof y), KERN_OK);
    cr_assert_eq(kern_buffer_read(bs, s, sizeof s), KERN_OK);
    for (int i = 0; i < N; i++) {
        float want[L];
        memcpy(want, x[i], sizeof want);
        qsort(want, L, sizeof(float), cmp_float);
        for (int k = 0; k < L; k++)
            cr_assert_eq(y[i][k], want[k], "row %d, element %d: got %g, want %g", i, k,
                         (double)y[i][k], (double)want[k]);
        double ws = (double)want[5] * 100 + (double)want[1] * 10 + 3;
        expect_close(&s[i], &ws, 1, 1e-6, "s");
    }
    kern_context_release(ctx);
}

/* ---- parameters by value, gradients and the launch-time shape check ---------------------- */

Test(v1, vector_parameters_by_value_and_their_gradients) {
    static const char *src = "kernel f(x: vec3[], g: vec3, m: mat2, out: f32[]) {\n"
                             "    for i in 0..len(x) {\n"
                             "        out[i] = dot(x[i], g) + m[0][1] * x[i].z;\n"
                             "    }\n"
                             "}\n";
    enum { N = 6 };
    kern_context *ctx = ctx_new();
    kern_module *mod = compile(ctx, src);
    float x[N][3], g[3] = {1, 2, 3}, m[4] = {0, 5, 0, 0}, out[N];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < 3; j++)
            x[i][j] = frand(-1, 1);
    int64_t sx[2] = {N, 3}, sg[1] = {3}, sm[2] = {2, 2}, so[1] = {N};
    kern_buffer *bx = buf(ctx, KERN_F32, 2, sx, x), *bg = buf(ctx, KERN_F32, 1, sg, g),
                *bm = buf(ctx, KERN_F32, 2, sm, m), *bo = buf(ctx, KERN_F32, 1, so, NULL);
    kern_arg args[8] = {kern_arg_buffer(bx), kern_arg_buffer(bg), kern_arg_buffer(bm),
                        kern_arg_buffer(bo)};
    launch(ctx, find(mod, "f"), args, 4);
    cr_assert_eq(kern_buffer_read(bo, out, sizeof out), KERN_OK);
    for (int i = 0; i < N; i++) {
        double want = x[i][0] + 2.0 * x[i][1] + 3.0 * x[i][2] + 5.0 * x[i][2];
        expect_close(&out[i], &want, 1, 1e-6, "out");
    }
    /* f.grad with out.grad = 1: g.grad = sum of x (shape (3,), like g), m.grad[0][1] = sum
     * of x.z, x.grad[i] = g + (0, 0, 5) */
    float ones[N], zeros3[N][3] = {{0}}, zg[3] = {0}, zm[4] = {0};
    for (int i = 0; i < N; i++)
        ones[i] = 1;
    kern_buffer *gx = buf(ctx, KERN_F32, 2, sx, zeros3), *gg = buf(ctx, KERN_F32, 1, sg, zg),
                *gm = buf(ctx, KERN_F32, 2, sm, zm), *go = buf(ctx, KERN_F32, 1, so, ones);
    args[4] = kern_arg_buffer(gx);
    args[5] = kern_arg_buffer(gg);
    args[6] = kern_arg_buffer(gm);
    args[7] = kern_arg_buffer(go);
    launch(ctx, find(mod, "f.grad"), args, 8);
    float rx[N][3], rg[3], rm[4];
    cr_assert_eq(kern_buffer_read(gx, rx, sizeof rx), KERN_OK);
    cr_assert_eq(kern_buffer_read(gg, rg, sizeof rg), KERN_OK);
    cr_assert_eq(kern_buffer_read(gm, rm, sizeof rm), KERN_OK);
    double sum[3] = {0, 0, 0};
    for (int i = 0; i < N; i++) {
        double want[3] = {1, 2, 3 + 5};
        expect_close(rx[i], want, 3, 1e-6, "x.grad");
        for (int j = 0; j < 3; j++)
            sum[j] += x[i][j];
    }
    expect_close(rg, sum, 3, 1e-5, "g.grad");
    double wm[4] = {0, sum[2], 0, 0};
    expect_close(rm, wm, 4, 1e-5, "m.grad");
    kern_context_release(ctx);
}

Test(v1, a_wrong_trailing_extent_is_refused_at_launch) {
    static const char *src = "kernel f(x: vec3[], m: mat2[]) { for i in 0..len(x) { x[i].x = "
                             "m[i][1][0]; } }\n";
    kern_context *ctx = ctx_new();
    kern_module *mod = compile(ctx, src);
    int64_t s4[2] = {5, 4}, sm[3] = {5, 2, 2}, sm_bad[3] = {5, 2, 3};
    kern_buffer *x4 = buf(ctx, KERN_F32, 2, s4, NULL), *m = buf(ctx, KERN_F32, 3, sm, NULL),
                *mb = buf(ctx, KERN_F32, 3, sm_bad, NULL);
    kern_arg args[2] = {kern_arg_buffer(x4), kern_arg_buffer(m)};
    cr_assert_eq(kern_launch(find(mod, "f"), args, 2), KERN_ERR_ARGUMENT);
    cr_assert(strstr(kern_context_last_error(ctx), "parameter 'x' (vec3[])") &&
                  strstr(kern_context_last_error(ctx), "last extent is 3"),
              "%s", kern_context_last_error(ctx));
    int64_t s3[2] = {5, 3};
    kern_buffer *x3 = buf(ctx, KERN_F32, 2, s3, NULL);
    args[0] = kern_arg_buffer(x3);
    args[1] = kern_arg_buffer(mb);
    cr_assert_eq(kern_launch(find(mod, "f"), args, 2), KERN_ERR_ARGUMENT);
    cr_assert(strstr(kern_context_last_error(ctx), "two extents are 2 x 2"), "%s",
              kern_context_last_error(ctx));
    kern_context_release(ctx);
}

/* ---- misuse: clear compile errors ------------------------------------------------------ */

typedef struct bad_case {
    const char *src, *want;
} bad_case;

Test(v1, misuse_gets_clear_compile_errors) {
    static const bad_case cases[] = {
        {"kernel k(x: vec3[]) { for i in 0..len(x) { let v = x[i]; x[i] = v.q; } }",
         "vec3 has no component 'q'"},
        {"kernel k(x: vec2[]) { for i in 0..len(x) { x[i].z = 1.0; } }",
         "vec2 has no component 'z'"},
        {"kernel k(x: vec3[]) { for i in 0..len(x) { x[i] = vec3(1.0, 2.0); } }",
         "vec3(...) needs 3 components"},
        {"kernel k(x: vec3[], y: vec2[]) { for i in 0..len(x) { x[i] = x[i] + y[i]; } }",
         "must have one type"},
        {"kernel k(x: vec3[]) { for i in 0..len(x) { x[i] = x[i] < x[i]; } }",
         "operator '<' does not apply"},
        {"kernel k(x: vec3[], d: dvec3[]) { for i in 0..len(x) { x[i] = x[i] * d[i]; } }",
         "different component types"},
        {"kernel k(x: vec3[]) { for i in 0..len(x) { let v = x[i]; v.x = 1.0; } }",
         "declared with let"},
        {"kernel k(x: vec3[]) { for i in 0..len(x) { x[i] = x[i][3] * x[i]; } }",
         "index 3 is out of range"},
        {"kernel k(x: f32[]) { for i in 0..len(x) { var a: f32[4]; x[i] = a[i, 0]; } }",
         "has rank 1 but is indexed with 2"},
        {"kernel k(x: f32[]) { var a: f32[0]; }", "must be at least 1"},
        {"kernel k(x: f32[], n: i32) { for i in 0..len(x) { var a: f32[n]; } }",
         "must be an integer constant"},
        {"kernel k(x: f32[]) { for i in 0..len(x) { var a: f32[100000]; } }",
         "the limit of a local array"},
        {"struct S { a: f32, b: S }\nkernel k(x: f32[]) { }", "contains itself"},
        {"struct S { a: f32, a: f32 }\nkernel k(x: f32[]) { }", "two fields named 'a'"},
        {"struct S { a: f32, b: f32[] }\nkernel k(x: f32[]) { }", "not allowed here"},
        {"struct S { a: f32, b: f32 }\nkernel k(x: f32[]) { for i in 0..len(x) { let s = S { a: "
         "1.0 }; x[i] = s.a; } }",
         "does not give field 'b'"},
        {"struct S { a: f32 }\nkernel k(x: f32[]) { for i in 0..len(x) { let s = S { a: 1.0, c: "
         "2.0 }; x[i] = s.a; } }",
         "has no field 'c'"},
        {"struct S { a: f64, n: i32 }\nkernel k(s: S[]) { }", "must have one size and no bools"},
        {"struct S { a: f32, b: bool }\nkernel k(s: S[]) { }", "must have one size and no bools"},
        {"struct S { a: f32, n: i32 }\nkernel k(s: S[]) { for i in 0..len(s) { s[i].n += 1; } }",
         "'+=' on a field of type i32 in array 's'"},
        {"struct S { a: f32, n: i32 }\nkernel k(s: S[]) { for i in 0..len(s) { "
         "atomic_max(s[i].n, 1); } }",
         "'atomic_max' on a field of type i32 in array 's'"},
        {"kernel k(m: mat3[,,]) { }", "the most is 4"},
        {"kernel k(x: Nope[]) { }", "unknown type 'Nope'"},
        {"kernel k(x: vec3[]) { for i in 0..len(x) { x[i] = cross(x[i], 1.0); } }",
         "'cross' needs a second vec3"},
        {"kernel k(x: vec4[]) { for i in 0..len(x) { x[i] = cross(x[i], x[i]); } }",
         "3-D float vectors"},
        {"kernel k(x: vec3[]) { for i in 0..len(x) { let v = x[i]; atomic_add(v, v); } }",
         "must be an array element"},
        {"kernel k(a: f32[4]) { }", "cannot be a local array"},
        {"kernel k(x: f32[]) { var a: f32; }", "needs an initial value"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kern_context_options o = kern_context_options_default();
        kern_context *ctx;
        cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK);
        kern_module *m = NULL;
        kern_status st = kern_module_from_source(ctx, cases[i].src, strlen(cases[i].src), "v1.kern", &m);
        cr_expect_eq(st, KERN_ERR_COMPILE, "case %zu (%s): status %d", i, cases[i].src, (int)st);
        cr_expect(strstr(kern_context_last_error(ctx), cases[i].want) != NULL,
                  "case %zu: '%s' not in: %s", i, cases[i].want, kern_context_last_error(ctx));
        kern_context_release(ctx);
    }
}

Test(v1, a_func_takes_a_vector_builtins_name) {
    static const char *src = "func length(x: f32) -> f32 { return 2.0 * x; }\n"
                             "func dot(a: f32, b: f32) -> f32 { return a - b; }\n"
                             "kernel k(x: f32[]) { for i in 0..len(x) { x[i] = length(x[i]) + "
                             "dot(x[i], 1.0); } }\n";
    kern_context *ctx = ctx_new();
    kern_module *mod = compile(ctx, src);
    float x[3] = {1, 2, 3}, got[3];
    int64_t s[1] = {3};
    kern_buffer *bx = buf(ctx, KERN_F32, 1, s, x);
    kern_arg a[1] = {kern_arg_buffer(bx)};
    launch(ctx, find(mod, "k"), a, 1);
    cr_assert_eq(kern_buffer_read(bx, got, sizeof got), KERN_OK);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(got[i], 3 * x[i] - 1, "x[%d] = %g", i, (double)got[i]);
    kern_context_release(ctx);
}

Test(v1, dynamic_indices_into_values_are_checked_in_debug_builds) {
    static const char *src = "kernel k(x: f32[], idx: i32[], y: f32[]) {\n"
                             "    for i in 0..len(x) {\n"
                             "        var a: f32[4];\n"
                             "        var v = vec3(x[i]);\n"
                             "        for t in 0..3 { a[t] = x[i] * f32(t); v[t] *= a[t]; }\n"
                             "        y[i] = a[idx[i]] + v[idx[i] % 3];\n"
                             "    }\n"
                             "}\n";
    kern_context_options o = kern_context_options_default();
    o.backend = kern_test_backend();
    o.debug = true;
    kern_context *ctx;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    kern_module *mod = compile(ctx, src);
    float x[4] = {1, 2, 3, 4}, y[4];
    int32_t good[4] = {0, 1, 2, 3}, bad[4] = {0, 1, 7, 3};
    int64_t s[1] = {4};
    kern_buffer *bx = buf(ctx, KERN_F32, 1, s, x), *bg = buf(ctx, KERN_I32, 1, s, good),
                *bb = buf(ctx, KERN_I32, 1, s, bad), *by = buf(ctx, KERN_F32, 1, s, NULL);
    kern_arg a[3] = {kern_arg_buffer(bx), kern_arg_buffer(bg), kern_arg_buffer(by)};
    launch(ctx, find(mod, "k"), a, 3);
    cr_assert_eq(kern_buffer_read(by, y, sizeof y), KERN_OK);
    for (int i = 0; i < 4; i++) {
        double ai = (double)x[i] * i, want = (i < 3 ? ai : 0.0) + x[i] * (double)x[i] * (i % 3);
        expect_close(&y[i], &want, 1, 1e-6, "y");
    }
    a[1] = kern_arg_buffer(bb);
    kern_status st = kern_launch(find(mod, "k"), a, 3);
    if (st == KERN_OK)
        st = kern_sync(ctx);
    cr_assert_eq(st, KERN_ERR_DEVICE, "status %d: %s", (int)st, kern_context_last_error(ctx));
    cr_assert(strstr(kern_context_last_error(ctx), "index 7 out of bounds"), "%s",
              kern_context_last_error(ctx));
    kern_context_release(ctx);
}

Test(v1, a_literal_where_a_vector_is_needed_is_an_error_not_a_crash) {
    static const bad_case cases[] = {
        {"kernel k(x: vec3[]) { for i in 0..len(x) { x[i] = 1.0; } }",
         "expected a value of type vec3, got float literal 1.0; write vec3(...)"},
        {"kernel k(x: f32[]) { for i in 0..len(x) { var a: f32[16] = 5.0; x[i] = a[0]; } }",
         "expected a value of type f32[16]"},
        {"struct S { a: f32 }\nkernel S(x: f32[]) { }", "(a struct at line 1)"},
        {"struct S { a: f32 }\nkernel k(x: f32[]) { for i in 0..len(x) { x[i] = S(1.0).a; } }",
         "'S' is a struct, not a function"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kern_context_options o = kern_context_options_default();
        kern_context *ctx;
        cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK);
        kern_module *m = NULL;
        kern_status st =
            kern_module_from_source(ctx, cases[i].src, strlen(cases[i].src), "v1.kern", &m);
        cr_expect_eq(st, KERN_ERR_COMPILE, "case %zu: status %d", i, (int)st);
        cr_expect(strstr(kern_context_last_error(ctx), cases[i].want) != NULL,
                  "case %zu: '%s' not in: %s", i, cases[i].want, kern_context_last_error(ctx));
        kern_context_release(ctx);
    }
}

/* A struct of f32 and 32-bit integer fields: stored as f32 words, the integer fields bitcast,
 * so the array has the C layout; its gradient flows through the float fields only. */
typedef struct mixed {
    float pos[3];
    int32_t id;
    float w;
    uint32_t flags;
} mixed;

Test(v1, structs_of_floats_and_ints_keep_the_c_layout_and_their_gradients) {
    enum { N = 9 };
    static const char *src = "struct P { pos: vec3, id: i32, w: f32, flags: u32 }\n"
                             "kernel k(ps: P[], out: P[], y: f32[]) {\n"
                             "    for i in 0..len(ps) {\n"
                             "        var p = ps[i];\n"
                             "        y[i] = p.pos.y * p.w + f32(p.id);\n"
                             "        p.id = p.id * 2 + i32(p.flags);\n"
                             "        p.pos *= p.w;\n"
                             "        out[i] = p;\n"
                             "    }\n"
                             "}\n";
    kern_context *ctx = ctx_new();
    kern_module *mod = compile(ctx, src);
    mixed ps[N], out[N];
    float y[N];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < 3; j++)
            ps[i].pos[j] = frand(-1, 1);
        ps[i].id = 1000 * i - 3;
        ps[i].w = frand(0.5f, 2);
        ps[i].flags = 0x80000000u + (uint32_t)i;
    }
    int64_t sp[2] = {N, 6}, sy[1] = {N};
    kern_buffer *bp = buf(ctx, KERN_F32, 2, sp, ps), *bo = buf(ctx, KERN_F32, 2, sp, NULL),
                *by = buf(ctx, KERN_F32, 1, sy, NULL);
    kern_arg a[6] = {kern_arg_buffer(bp), kern_arg_buffer(bo), kern_arg_buffer(by)};
    launch(ctx, find(mod, "k"), a, 3);
    cr_assert_eq(kern_buffer_read(bo, out, sizeof out), KERN_OK);
    cr_assert_eq(kern_buffer_read(by, y, sizeof y), KERN_OK);
    for (int i = 0; i < N; i++) {
        /* i32 arithmetic wraps in kern: the reference wraps in u32 (no C overflow) */
        int32_t want_id = (int32_t)(2u * (uint32_t)ps[i].id + ps[i].flags);
        cr_assert_eq(out[i].id, want_id, "id of %d", i);
        cr_assert_eq(out[i].flags, ps[i].flags, "flags of %d", i);
        double want[3], wy = (double)ps[i].pos[1] * ps[i].w + ps[i].id;
        for (int j = 0; j < 3; j++)
            want[j] = (double)ps[i].pos[j] * ps[i].w;
        expect_close(out[i].pos, want, 3, 1e-6, "pos");
        expect_close(&y[i], &wy, 1, 1e-6, "y");
    }
    /* k.grad with out.grad = 0 and y.grad = 1: ps.grad.pos.y += w, ps.grad.w += pos.y; the
     * integer words of ps.grad stay as they were */
    mixed g[N], z[N];
    memset(z, 0, sizeof z);
    float ones[N];
    for (int i = 0; i < N; i++) {
        ones[i] = 1;
        z[i].id = 77; /* left alone */
    }
    kern_buffer *gp = buf(ctx, KERN_F32, 2, sp, z), *go = buf(ctx, KERN_F32, 2, sp, NULL),
                *gy = buf(ctx, KERN_F32, 1, sy, ones);
    a[3] = kern_arg_buffer(gp);
    a[4] = kern_arg_buffer(go);
    a[5] = kern_arg_buffer(gy);
    launch(ctx, find(mod, "k.grad"), a, 6);
    cr_assert_eq(kern_buffer_read(gp, g, sizeof g), KERN_OK);
    for (int i = 0; i < N; i++) {
        double want[6] = {0, ps[i].w, 0, 0, ps[i].pos[1], 0};
        float got[6] = {g[i].pos[0], g[i].pos[1], g[i].pos[2], 0, g[i].w, 0};
        expect_close(got, want, 6, 1e-6, "ps.grad");
        cr_assert_eq(g[i].id, 77, "the integer field's adjoint word is left alone");
    }
    kern_context_release(ctx);
}

/* A short loop over the components of a value is unrolled (lower.c, lw_unroll_for): the IR
 * holds no loop, no select and, in K.grad, no adstack; the result is a matrix-vector
 * product written with loops, against C. */
Test(v1, short_loops_over_components_are_unrolled) {
    static const char *src = "kernel k(x: vec3[], m: mat3[], y: vec3[]) {\n"
                             "    for i in 0..len(x) {\n"
                             "        var v: vec3;\n"
                             "        for r in 0..3 {\n"
                             "            for c in 0..3 { v[r] += m[i][r][c] * x[i][c]; }\n"
                             "        }\n"
                             "        y[i] = v;\n"
                             "    }\n"
                             "}\n";
    kc_ctx *cc = kc_ctx_new();
    ir_module *ir = kc_compile_source(cc, "unroll.kern", src, strlen(src));
    cr_assert(ir, "does not compile");
    kern_buf text = {0};
    ir_print(&text, ir, NULL);
    cr_expect(!strstr(text.data, " for ") && !strstr(text.data, "select"), "%s", text.data);
    cr_expect(!strstr(text.data, "adstack"), "%s", text.data);
    buf_free(&text);
    ir_module_free(ir);
    kc_ctx_free(cc);

    enum { N = 7 };
    kern_context *ctx = ctx_new();
    kern_module *mod = compile(ctx, src);
    float x[N][3], m[N][9], y[N][3];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < 9; j++) {
            m[i][j] = frand(-1, 1);
            if (j < 3)
                x[i][j] = frand(-1, 1);
        }
    int64_t sx[2] = {N, 3}, sm[3] = {N, 3, 3};
    kern_buffer *bx = buf(ctx, KERN_F32, 2, sx, x), *bm = buf(ctx, KERN_F32, 3, sm, m),
                *by = buf(ctx, KERN_F32, 2, sx, NULL);
    kern_arg a[3] = {kern_arg_buffer(bx), kern_arg_buffer(bm), kern_arg_buffer(by)};
    launch(ctx, find(mod, "k"), a, 3);
    cr_assert_eq(kern_buffer_read(by, y, sizeof y), KERN_OK);
    for (int i = 0; i < N; i++) {
        double M[9], X[3], want[3];
        for (int j = 0; j < 9; j++)
            M[j] = m[i][j];
        for (int j = 0; j < 3; j++)
            X[j] = x[i][j];
        matvec(M, X, want);
        expect_close(y[i], want, 3, 1e-6, "y");
    }
    kern_context_release(ctx);
}
