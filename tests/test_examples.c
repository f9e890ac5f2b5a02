/* test_examples.c - the vector and matrix examples (examples/springs.kern, examples/elastic.kern,
 * examples/README.md) run through the C API on the test device (KERN_TEST_BACKEND), forward
 * and K.grad, against references written here in plain C: the forward in the same float
 * operations, the gradients against central finite differences of a double-precision
 * forward (springs, elastic's rest.grad) and against the closed-form Neo-Hookean forces
 * (elastic's x.grad). The last tests run `kernc gradcheck` on the data the examples ship. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../include/kern.h"
#include "test_backend.h"

#ifndef KERNC_PATH
#define KERNC_PATH "kernc"
#endif

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double drand(double lo, double hi) { /* xorshift64, deterministic */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (double)((rng >> 11) * (1.0 / 9007199254740992.0));
}

static kern_context *ctx_new(void) {
    kern_context_options o = kern_context_options_default();
    o.backend = kern_test_backend();
    kern_context *ctx;
    cr_assert_eq(kern_context_create(&o, &ctx), KERN_OK, "%s", kern_context_last_error(ctx));
    return ctx;
}

static kern_module *jit_example(kern_context *ctx, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/examples/%s", KERN_SOURCE_ROOT, name);
    kern_module *m;
    cr_assert_eq(kern_module_from_file_source(ctx, path, &m), KERN_OK, "%s: %s", name,
                 kern_context_last_error(ctx));
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

static void launch(kern_context *ctx, kern_kernel *k, const kern_arg *a, int n) {
    cr_assert_eq(kern_launch(k, a, n), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert_eq(kern_sync(ctx), KERN_OK, "%s", kern_context_last_error(ctx));
}

static void read_f32(kern_buffer *b, float *out, size_t n) {
    cr_assert_eq(kern_buffer_read(b, out, n * sizeof(float)), KERN_OK);
}

/* |got - want| <= rtol (|want| + scale), scale the largest |want| of the array: a relative
 * error, with entries near zero measured against the array's magnitude */
static void expect_close(const float *got, const double *want, size_t n, double rtol,
                         const char *what) {
    double scale = 0;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++)
        cr_assert(fabs(got[i] - want[i]) <= rtol * (fabs(want[i]) + scale),
                  "%s[%zu]: got %.9g, want %.9g (largest |want| %.3g)", what, i, (double)got[i],
                  want[i], scale);
}

/* ---- examples/springs.kern ------------------------------------------------------------- */

enum { SB = 3, SP = 8, SS = 28, STEPS = 50 }; /* systems, particles (the kernel's P), springs */
static const double SK = 40.0, SDT = 0.01, DAMPING = 0.99;

typedef struct springs_in {
    double x0[SB][SP][3], v0[SB][SP][3], rest[SS], k, target[3];
    int32_t pairs[SS][2];
} springs_in;

/* the example's forward in the same float operations (f32) */
static void springs_f32(const springs_in *in, float xT[SB][SP][3], float *loss) {
    const float k = (float)in->k, dt = (float)SDT, damping = (float)DAMPING;
    *loss = 0;
    for (int b = 0; b < SB; b++) {
        float x[SP][3], v[SP][3], f[SP][3];
        for (int p = 0; p < SP; p++)
            for (int c = 0; c < 3; c++)
                x[p][c] = (float)in->x0[b][p][c], v[p][c] = (float)in->v0[b][p][c];
        for (int t = 0; t < STEPS; t++) {
            for (int p = 0; p < SP; p++)
                f[p][0] = 0.0f, f[p][1] = -9.8f, f[p][2] = 0.0f;
            for (int s = 0; s < SS; s++) {
                int i = in->pairs[s][0], j = in->pairs[s][1];
                float d[3] = {x[j][0] - x[i][0], x[j][1] - x[i][1], x[j][2] - x[i][2]};
                float l = sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
                float a = k * (l - (float)in->rest[s]) / l;
                for (int c = 0; c < 3; c++) {
                    f[i][c] += a * d[c];
                    f[j][c] -= a * d[c];
                }
            }
            for (int p = 0; p < SP; p++)
                for (int c = 0; c < 3; c++) {
                    v[p][c] = (v[p][c] + dt * f[p][c]) * damping;
                    x[p][c] += dt * v[p][c];
                }
        }
        float cm[3] = {0, 0, 0};
        for (int p = 0; p < SP; p++)
            for (int c = 0; c < 3; c++) {
                xT[b][p][c] = x[p][c];
                cm[c] += x[p][c];
            }
        float l2 = 0;
        for (int c = 0; c < 3; c++) {
            float e = cm[c] / (float)SP - (float)in->target[c];
            l2 += e * e;
        }
        *loss += l2;
    }
}

/* the same in double precision, reduced to the scalar L = loss + sum(u * xT) whose
 * gradient simulate.grad computes when seeded with loss.grad = 1, xT.grad = u */
static double springs_f64(const springs_in *in, const double u[SB][SP][3]) {
    double L = 0;
    for (int b = 0; b < SB; b++) {
        double x[SP][3], v[SP][3], f[SP][3];
        memcpy(x, in->x0[b], sizeof x);
        memcpy(v, in->v0[b], sizeof v);
        for (int t = 0; t < STEPS; t++) {
            for (int p = 0; p < SP; p++)
                f[p][0] = 0, f[p][1] = -9.8, f[p][2] = 0;
            for (int s = 0; s < SS; s++) {
                int i = in->pairs[s][0], j = in->pairs[s][1];
                double d[3] = {x[j][0] - x[i][0], x[j][1] - x[i][1], x[j][2] - x[i][2]};
                double l = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
                double a = in->k * (l - in->rest[s]) / l;
                for (int c = 0; c < 3; c++) {
                    f[i][c] += a * d[c];
                    f[j][c] -= a * d[c];
                }
            }
            for (int p = 0; p < SP; p++)
                for (int c = 0; c < 3; c++) {
                    v[p][c] = (v[p][c] + SDT * f[p][c]) * DAMPING;
                    x[p][c] += SDT * v[p][c];
                }
        }
        double cm[3] = {0, 0, 0};
        for (int p = 0; p < SP; p++)
            for (int c = 0; c < 3; c++) {
                L += u[b][p][c] * x[p][c];
                cm[c] += x[p][c] / SP;
            }
        for (int c = 0; c < 3; c++)
            L += (cm[c] - in->target[c]) * (cm[c] - in->target[c]);
    }
    return L;
}

/* central difference of springs_f64 in *x (which must point into *in) */
static double springs_fd(springs_in *in, double *x, const double u[SB][SP][3]) {
    double x0 = *x, h = 1e-6 * fmax(1.0, fabs(x0));
    *x = x0 + h;
    double lp = springs_f64(in, u);
    *x = x0 - h;
    double lm = springs_f64(in, u);
    *x = x0;
    return (lp - lm) / (2 * h);
}

/* what examples/make_data.py does: unit cubes, every pair of corners a spring, shifted,
 * squashed, thrown */
static void springs_input(springs_in *in) {
    int s = 0;
    for (int i = 0; i < SP; i++)
        for (int j = i + 1; j < SP; j++, s++) {
            in->pairs[s][0] = i, in->pairs[s][1] = j;
            double d2 = 0;
            for (int c = 0; c < 3; c++) {
                int e = ((j >> c) & 1) - ((i >> c) & 1);
                d2 += e * e;
            }
            in->rest[s] = (float)sqrt(d2);
        }
    for (int b = 0; b < SB; b++) {
        double shift[3], scale[3], vel[3];
        for (int c = 0; c < 3; c++) {
            shift[c] = drand(-1, 1) + (c == 1 ? 2 : 0);
            scale[c] = drand(0.85, 1.15);
            vel[c] = drand(-1, 1);
        }
        for (int p = 0; p < SP; p++)
            for (int c = 0; c < 3; c++) {
                in->x0[b][p][c] =
                    (float)((((p >> c) & 1) - 0.5) * scale[c] + shift[c] + drand(-0.03, 0.03));
                in->v0[b][p][c] = (float)(vel[c] + drand(-0.1, 0.1));
            }
    }
    in->k = SK;
    in->target[0] = 0.0, in->target[1] = 1.5, in->target[2] = 0.0;
}

static void to_f32(float *dst, const double *src, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = (float)src[i];
}

Test(examples, springs_forward_and_gradient) {
    static springs_in in;
    springs_input(&in);
    kern_context *ctx = ctx_new();
    kern_module *m = jit_example(ctx, "springs.kern");
    enum { NX = SB * SP * 3 };
    static float x0[NX], v0[NX], rest[SS], target[3], zeros[NX], u32[NX], xT[NX];
    static double u[SB][SP][3];
    to_f32(x0, &in.x0[0][0][0], NX);
    to_f32(v0, &in.v0[0][0][0], NX);
    to_f32(rest, in.rest, SS);
    to_f32(target, in.target, 3);
    for (int i = 0; i < NX; i++) {
        (&u[0][0][0])[i] = (float)drand(-1, 1);
        u32[i] = (float)(&u[0][0][0])[i];
    }
    int64_t sx[3] = {SB, SP, 3}, sp[2] = {SS, 2}, ss[1] = {SS}, s3[1] = {3}, s1[1] = {1};
    kern_buffer *bx0 = buf(ctx, KERN_F32, 3, sx, x0), *bv0 = buf(ctx, KERN_F32, 3, sx, v0),
                *bpairs = buf(ctx, KERN_I32, 2, sp, in.pairs),
                *brest = buf(ctx, KERN_F32, 1, ss, rest),
                *btarget = buf(ctx, KERN_F32, 1, s3, target),
                *bxT = buf(ctx, KERN_F32, 3, sx, NULL), *bloss = buf(ctx, KERN_F32, 1, s1, NULL);
    kern_arg a[17] = {kern_arg_buffer(bx0),   kern_arg_buffer(bv0),     kern_arg_buffer(bpairs),
                      kern_arg_buffer(brest), kern_arg_f32((float)SK),  kern_arg_f32((float)SDT),
                      kern_arg_i32(STEPS),    kern_arg_buffer(btarget), kern_arg_buffer(bxT),
                      kern_arg_buffer(bloss)};
    launch(ctx, find(m, "simulate"), a, 10);

    /* forward: the same float operations; the loss is an atomic sum over the systems */
    static float wxT[SB][SP][3];
    float wloss, loss;
    springs_f32(&in, wxT, &wloss);
    read_f32(bxT, xT, NX);
    read_f32(bloss, &loss, 1);
    static double want[NX];
    for (int i = 0; i < NX; i++)
        want[i] = (&wxT[0][0][0])[i];
    expect_close(xT, want, NX, 1e-5, "xT");
    double wl = wloss;
    expect_close(&loss, &wl, 1, 1e-5, "loss");

    /* simulate.grad seeded with loss.grad = 1, xT.grad = u: the gradient of
     * L = loss + sum(u * xT), against central differences of the f64 forward */
    float one = 1, zero = 0;
    kern_buffer *gx0 = buf(ctx, KERN_F32, 3, sx, zeros), *gv0 = buf(ctx, KERN_F32, 3, sx, zeros),
                *grest = buf(ctx, KERN_F32, 1, ss, zeros), *gk = buf(ctx, KERN_F32, 1, s1, &zero),
                *gtarget = buf(ctx, KERN_F32, 1, s3, zeros), *gxT = buf(ctx, KERN_F32, 3, sx, u32),
                *gloss = buf(ctx, KERN_F32, 1, s1, &one);
    kern_buffer *grads[7] = {gx0, gv0, grest, gk, gtarget, gxT, gloss};
    for (int i = 0; i < 7; i++)
        a[10 + i] = kern_arg_buffer(grads[i]);
    launch(ctx, find(m, "simulate.grad"), a, 17);
    static float g[NX];
    static double fd[NX];
    struct {
        const char *name;
        kern_buffer *b;
        double *x;
        int n;
    } checks[] = {{"x0.grad", gx0, &in.x0[0][0][0], NX},
                  {"v0.grad", gv0, &in.v0[0][0][0], NX},
                  {"rest.grad", grest, in.rest, SS},
                  {"k.grad", gk, &in.k, 1},
                  {"target.grad", gtarget, in.target, 3}};
    for (size_t c = 0; c < sizeof checks / sizeof *checks; c++) {
        read_f32(checks[c].b, g, (size_t)checks[c].n);
        for (int i = 0; i < checks[c].n; i++)
            fd[i] = springs_fd(&in, &checks[c].x[i], u);
        expect_close(g, fd, (size_t)checks[c].n, 2e-3, checks[c].name);
    }
    kern_context_release(ctx);
}

/* ---- examples/elastic.kern ------------------------------------------------------------- */

enum { EN = 3, EV = EN * EN * EN, EE = 6 * (EN - 1) * (EN - 1) * (EN - 1) };
static const double MU = 1.0, LAMBDA = 10.0;

typedef double m3[3][3];

static double det3(const m3 a) {
    return a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) -
           a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0]) +
           a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]);
}

static void inv3(const m3 a, m3 r) { /* the adjugate over the determinant */
    double d = det3(a);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            int i1 = (j + 1) % 3, i2 = (j + 2) % 3, j1 = (i + 1) % 3, j2 = (i + 2) % 3;
            r[i][j] = (a[i1][j1] * a[i2][j2] - a[i1][j2] * a[i2][j1]) / d;
        }
}

static void mul3(const m3 a, const m3 b, m3 r) {
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            r[i][j] = a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j];
}

/* the edge matrix: columns b - a, c - a, d - a */
static void edges(const double (*x)[3], const int32_t *q, m3 r) {
    for (int c = 0; c < 3; c++)
        for (int k = 0; k < 3; k++)
            r[k][c] = x[q[c + 1]][k] - x[q[0]][k];
}

/* the total energy in f64 */
static double elastic_f64(const double (*rest)[3], const double (*x)[3], const int32_t (*tets)[4]) {
    double e = 0;
    for (int t = 0; t < EE; t++) {
        m3 dm, ds, dmi, f;
        edges(rest, tets[t], dm);
        edges(x, tets[t], ds);
        inv3(dm, dmi);
        mul3(ds, dmi, f);
        double logj = log(det3(f)), i1 = 0;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                i1 += f[i][j] * f[i][j];
        e += fabs(det3(dm)) / 6 * (0.5 * MU * (i1 - 3) - MU * logj + 0.5 * LAMBDA * logj * logj);
    }
    return e;
}

/* dE/dx in closed form: the first Piola-Kirchhoff stress P = mu (F - F^-T) + lambda log J F^-T,
 * H = vol P Dm^-T; column c of H is the gradient at vertex c + 1, minus their sum at vertex 0 */
static void elastic_grad_x(const double (*rest)[3], const double (*x)[3], const int32_t (*tets)[4],
                           double (*g)[3]) {
    memset(g, 0, sizeof(double) * 3 * EV);
    for (int t = 0; t < EE; t++) {
        m3 dm, ds, dmi, f, fi, p, h, dmit;
        edges(rest, tets[t], dm);
        edges(x, tets[t], ds);
        inv3(dm, dmi);
        mul3(ds, dmi, f);
        inv3(f, fi);
        double vol = fabs(det3(dm)) / 6, logj = log(det3(f));
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                p[i][j] = MU * (f[i][j] - fi[j][i]) + LAMBDA * logj * fi[j][i];
                dmit[i][j] = dmi[j][i];
            }
        mul3(p, dmit, h);
        for (int c = 0; c < 3; c++)
            for (int k = 0; k < 3; k++) {
                g[tets[t][c + 1]][k] += vol * h[k][c];
                g[tets[t][0]][k] -= vol * h[k][c];
            }
    }
}

Test(examples, elastic_energy_and_forces) {
    static double rest[EV][3], x[EV][3], gx[EV][3], fd[EV * 3];
    static int32_t tets[EE][4];
    static const int kuhn[6][2] = {{1, 3}, {1, 5}, {2, 3}, {2, 6}, {4, 5}, {4, 6}};
    int v = 0, t = 0;
    for (int i = 0; i < EN; i++)
        for (int j = 0; j < EN; j++)
            for (int k = 0; k < EN; k++, v++) {
                double r[3] = {0.5 * i, 0.5 * j, 0.5 * k};
                for (int c = 0; c < 3; c++)
                    rest[v][c] = (float)r[c];
                /* stretched, sheared and jiggled; every element keeps det F > 0 */
                double y[3] = {1.1 * r[0] + 0.05 * r[1], 0.95 * r[1] + 0.03 * r[2],
                               r[2] + 0.02 * r[0]};
                for (int c = 0; c < 3; c++)
                    x[v][c] = (float)(y[c] + drand(-0.02, 0.02));
            }
    for (int i = 0; i + 1 < EN; i++)
        for (int j = 0; j + 1 < EN; j++)
            for (int k = 0; k + 1 < EN; k++)
                for (int s = 0; s < 6; s++, t++) {
                    int c0 = (i * EN + j) * EN + k;
                    int corner[8];
                    for (int n = 0; n < 8; n++)
                        corner[n] = c0 + ((n >> 2) & 1) * EN * EN + ((n >> 1) & 1) * EN + (n & 1);
                    tets[t][0] = corner[0], tets[t][1] = corner[kuhn[s][0]];
                    tets[t][2] = corner[kuhn[s][1]], tets[t][3] = corner[7];
                }
    kern_context *ctx = ctx_new();
    kern_module *m = jit_example(ctx, "elastic.kern");
    static float rest32[EV * 3], x32[EV * 3], zeros[EV * 3], g[EV * 3];
    to_f32(rest32, &rest[0][0], EV * 3);
    to_f32(x32, &x[0][0], EV * 3);
    int64_t sv[2] = {EV, 3}, st[2] = {EE, 4}, s1[1] = {1};
    float zero = 0, one = 1, e;
    kern_buffer *br = buf(ctx, KERN_F32, 2, sv, rest32), *bx = buf(ctx, KERN_F32, 2, sv, x32),
                *bt = buf(ctx, KERN_I32, 2, st, tets), *be = buf(ctx, KERN_F32, 1, s1, &zero);
    kern_arg a[9] = {kern_arg_buffer(br),     kern_arg_buffer(bx),         kern_arg_buffer(bt),
                     kern_arg_f32((float)MU), kern_arg_f32((float)LAMBDA), kern_arg_buffer(be)};
    launch(ctx, find(m, "energy"), a, 6);
    read_f32(be, &e, 1);
    double we = elastic_f64(rest, x, tets);
    cr_assert(we > 1e-3, "the deformation must store energy (%g)", we);
    expect_close(&e, &we, 1, 1e-4, "e");

    /* energy.grad with e.grad = 1: x.grad = dE/dx (minus the forces), rest.grad = dE/drest */
    kern_buffer *grest = buf(ctx, KERN_F32, 2, sv, zeros), *gxb = buf(ctx, KERN_F32, 2, sv, zeros),
                *ge = buf(ctx, KERN_F32, 1, s1, &one);
    a[6] = kern_arg_buffer(grest), a[7] = kern_arg_buffer(gxb), a[8] = kern_arg_buffer(ge);
    launch(ctx, find(m, "energy.grad"), a, 9);
    elastic_grad_x(rest, x, tets, gx);
    read_f32(gxb, g, EV * 3);
    expect_close(g, &gx[0][0], EV * 3, 1e-3, "x.grad (closed-form forces)");
    /* the closed form against finite differences too, so that both references agree */
    for (int i = 0; i < EV * 3; i++) {
        double *p = &x[0][0] + i, x0 = *p, h = 1e-6;
        *p = x0 + h;
        double ep = elastic_f64(rest, x, tets);
        *p = x0 - h;
        double em = elastic_f64(rest, x, tets);
        *p = x0;
        fd[i] = (ep - em) / (2 * h);
        cr_assert(fabs(fd[i] - (&gx[0][0])[i]) <= 1e-6 * (1 + fabs(fd[i])),
                  "closed form %g, finite difference %g", (&gx[0][0])[i], fd[i]);
    }
    for (int i = 0; i < EV * 3; i++) {
        double *p = &rest[0][0] + i, r0 = *p, h = 1e-6;
        *p = r0 + h;
        double ep = elastic_f64(rest, x, tets);
        *p = r0 - h;
        double em = elastic_f64(rest, x, tets);
        *p = r0;
        fd[i] = (ep - em) / (2 * h);
    }
    read_f32(grest, g, EV * 3);
    expect_close(g, fd, EV * 3, 1e-3, "rest.grad");
    kern_context_release(ctx);
}

/* ---- kernc gradcheck on the shipped data ------------------------------------------------ */

static int sh(const char *cmd) {
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void gradcheck(const char *args) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' gradcheck %s --target=%s", KERN_SOURCE_ROOT,
             KERNC_PATH, args, kern_backend_name(kern_test_backend()));
    cr_assert_eq(sh(cmd), 0, "%s", cmd);
}

/* --eps 1e-4: the loss is an atomic sum over the systems, whose order (so its last bits in
 * f64) changes from run to run; a step of 1e-6 turns that into errors of 1e-6 */
Test(examples, springs_gradcheck_on_the_shipped_data, .timeout = 300) {
    gradcheck("examples/springs.kern simulate x0=examples/data/springs_x0.npy "
              "v0=examples/data/springs_v0.npy springs=examples/data/springs_pairs.npy "
              "rest=examples/data/springs_rest.npy k=40 dt=0.01 steps=50 "
              "target=examples/data/springs_target.npy xT=examples/data/springs_xT.npy "
              "loss=examples/data/springs_loss.npy --eps 1e-4 --max-checks 60");
}

Test(examples, elastic_gradcheck_on_the_shipped_data, .timeout = 300) {
    gradcheck("examples/elastic.kern energy rest=examples/data/elastic_rest.npy "
              "x=examples/data/elastic_x.npy tets=examples/data/elastic_tets.npy mu=1 lambda=10 "
              "e=examples/data/elastic_e.npy");
}
