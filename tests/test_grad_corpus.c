/* test_grad_corpus.c - the gradient corpus: every .kern file in tests/grad is compiled twice
 * by the JIT (the placeholder type REAL replaced by f64, then by f32), and the gradient kernel
 * K.grad is compared with central finite differences of K computed in f64.
 *
 * The reference is independent of the code under test: it only launches the primal kernel
 * K. With L = sum over differentiable array parameters p of w_p . (p after the launches),
 * w_p fixed random weights, the finite difference of L in an input element is
 * dL/d(that element before the launches), which is what K.grad leaves in p.grad when it
 * starts from p.grad = w_p (docs/reference.md section 8: read-only
 * adjoints accumulate, overwritten elements are replaced, += passes through, scalars sum).
 * Differentiable scalars s pass through K unchanged, so L also has a term w_s s and s.grad
 * starts at w_s: K.grad must add to it, not overwrite it.
 * A launch sequence (`// seq:`) is run forward, then the K.grad launches run in reverse
 * order on the same adjoint buffers with no zeroing in between.
 *
 * Tolerances (docs/testing-grad.md): f64 gradients within RTOL64 = 1e-5, f32 gradients
 * (same inputs, all of which are f32 values) within RTOL32 = 2e-3, both relative to
 * max(M_p, 1e-3 M), M_p the largest |FD| of the parameter, M the largest over all.
 *
 * Besides the corpus: exact values at the kinks the reference fixes (abs'(0) = 0, min/max ties
 * go to the first argument, sqrt'(0) = +inf), and a self-test of the harness against a
 * hand-written adjoint kernel (and one with a planted error that it must catch). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <ctype.h>
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/kern.h"
#include "golden.h"
#include "test_backend.h"

#ifndef KERN_SOURCE_ROOT
#define KERN_SOURCE_ROOT "."
#endif

enum { MAX_PARAMS = 24, MAX_SEQ = 16, FD_SAMPLES = 64, MSG_CAP = 8192 };
static const double RTOL64 = 1e-5, RTOL32 = 2e-3;
/* Hessian-vector products against differences of K.grad (docs/testing-grad.md) */
static const double HVP_RTOL = 1e-4;
/* Errors are relative per element, to |FD| but at least FLOOR times the parameter's scale
 * (so that elements whose gradient is near zero are not held to a relative bound). */
static const double FLOOR = 1e-4;

/* ---- small utilities ---------------------------------------------------------------- */

typedef struct rng_t {
    uint64_t s;
} rng_t;

static uint64_t rng_next(rng_t *r) { /* xorshift64 */
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}

static double rng_unit(rng_t *r) {
    return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

static uint64_t hash_str(const char *s) { /* FNV-1a */
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h ? h : 1;
}

typedef struct msgbuf {
    char text[MSG_CAP];
    size_t len;
} msgbuf;

static void msg_add(msgbuf *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void msg_add(msgbuf *m, const char *fmt, ...) {
    if (m->len + 1 >= MSG_CAP)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(m->text + m->len, MSG_CAP - m->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        m->len += (size_t)n < MSG_CAP - m->len ? (size_t)n : MSG_CAP - m->len - 1;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = 0;
    fclose(f);
    return s;
}

/* src with every whole-word REAL replaced by type (f64 or f32), and the vector placeholders
 * VEC2 VEC3 VEC4 MAT2 MAT3 MAT4 QUAT by the types of that precision (golden.c). */
static char *subst_real(const char *src, const char *type) { return golden_with_type(src, type); }

/* ---- a corpus case: the source and its header directives ----------------------------- */

typedef struct gcase {
    const char *name; /* for messages */
    const char *src;  /* with REAL */
    char kernel[64];  /* "// kernel: K"; default: the module's first kernel */
    char args[2048];  /* "// args: a=1 x=rand(8) ...", several lines concatenated */
    int nseq;         /* "// seq: t=1 | t=2": per-launch overrides of scalar arguments */
    char seq[MAX_SEQ][128];
    double rtol64, rtol32;
    const char *grad_name; /* NULL: "K.grad"; the self-test names a hand-written adjoint */
    char jvp_refused[160]; /* "// jvp-refused: TEXT": K.jvp is refused with a message holding it */
} gcase;

static void trim(char *s) {
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
    size_t i = 0;
    while (isspace((unsigned char)s[i]))
        i++;
    memmove(s, s + i, strlen(s + i) + 1);
}

/* Reads the `// key: value` lines of the source (anywhere, one directive a line). */
static void parse_directives(gcase *c) {
    c->kernel[0] = 0;
    c->args[0] = 0;
    c->nseq = 0;
    c->rtol64 = RTOL64;
    c->rtol32 = RTOL32;
    c->jvp_refused[0] = 0;
    const char *p = c->src;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char line[2048];
        if (n >= sizeof line)
            n = sizeof line - 1;
        memcpy(line, p, n);
        line[n] = 0;
        trim(line);
        if (!strncmp(line, "//", 2)) {
            char *body = line + 2;
            trim(body);
            if (!strncmp(body, "kernel:", 7)) {
                snprintf(c->kernel, sizeof c->kernel, "%.63s", body + 7);
                trim(c->kernel);
            } else if (!strncmp(body, "args:", 5)) {
                strncat(c->args, " ", sizeof c->args - strlen(c->args) - 1);
                strncat(c->args, body + 5, sizeof c->args - strlen(c->args) - 1);
            } else if (!strncmp(body, "seq:", 4)) {
                char *s = body + 4;
                while (s && c->nseq < MAX_SEQ) {
                    char *bar = strchr(s, '|');
                    if (bar)
                        *bar = 0;
                    snprintf(c->seq[c->nseq], sizeof c->seq[0], "%.127s", s);
                    trim(c->seq[c->nseq]);
                    c->nseq++;
                    s = bar ? bar + 1 : NULL;
                }
            } else if (!strncmp(body, "jvp-refused:", 12)) {
                snprintf(c->jvp_refused, sizeof c->jvp_refused, "%.159s", body + 12);
                trim(c->jvp_refused);
            } else if (!strncmp(body, "rtol64:", 7)) {
                c->rtol64 = strtod(body + 7, NULL);
            } else if (!strncmp(body, "rtol32:", 7)) {
                c->rtol32 = strtod(body + 7, NULL);
            }
        }
        p = e ? e + 1 : p + strlen(p);
    }
}

/* ---- argument values ----------------------------------------------------------------- */

typedef struct aval {
    kern_param_info info;
    bool diff; /* differentiable: float and not nograd */
    int rank;  /* 0 for scalars */
    int64_t shape[KERN_MAX_DIMS];
    int64_t count; /* elements (1 for scalars) */
    double *data;  /* values, all exactly representable in the parameter's dtype and in f32 */
} aval;

static bool is_float(kern_dtype t) { return t == KERN_F32 || t == KERN_F64; }

/* The value text of parameter `name` in a whitespace-separated "k=v" list, or NULL. */
static bool find_kv(const char *list, const char *name, char *out, size_t cap) {
    size_t nl = strlen(name);
    const char *p = list;
    while (*p) {
        while (isspace((unsigned char)*p))
            p++;
        const char *e = p;
        while (*e && !isspace((unsigned char)*e))
            e++;
        if ((size_t)(e - p) > nl && !strncmp(p, name, nl) && p[nl] == '=') {
            size_t n = (size_t)(e - p) - nl - 1;
            if (n >= cap)
                n = cap - 1;
            memcpy(out, p + nl + 1, n);
            out[n] = 0;
            return true;
        }
        p = e;
    }
    return false;
}

static double round_to(kern_dtype t, double v) {
    switch (t) {
    case KERN_F32:
    case KERN_F64: return (double)(float)v; /* the same point for the f32 and the f64 runs */
    case KERN_BOOL: return v != 0;
    default: return trunc(v);
    }
}

/* Parses a scalar literal ("16", "-0.5", "true"). */
static bool parse_scalar(const char *t, double *v) {
    if (!strcmp(t, "true") || !strcmp(t, "false")) {
        *v = !strcmp(t, "true");
        return true;
    }
    char *end;
    *v = strtod(t, &end);
    return end != t && *end == 0;
}

/* Fills a from a generator: rand(d0,..;lo,hi) uniform, randint(d..;lo,hi) integers in
 * [lo, hi), randbool(d..), zeros(d..), fill(d..;v), list(v0,v1,...) (rank 1). */
static bool gen_array(aval *a, const char *spec, rng_t *r, msgbuf *m) {
    char fn[32];
    const char *lp = strchr(spec, '(');
    const char *rp = strrchr(spec, ')');
    if (!lp || !rp || rp < lp || (size_t)(lp - spec) >= sizeof fn) {
        msg_add(m, "bad array spec '%s' for %s\n", spec, a->info.name);
        return false;
    }
    memcpy(fn, spec, (size_t)(lp - spec));
    fn[lp - spec] = 0;
    char inner[512];
    snprintf(inner, sizeof inner, "%.*s", (int)(rp - lp - 1), lp + 1);
    char *semi = strchr(inner, ';');
    double extra[2] = {0, 0};
    int nextra = 0;
    if (semi) {
        *semi = 0;
        char *s = semi + 1;
        while (*s && nextra < 2) {
            extra[nextra++] = strtod(s, &s);
            if (*s == ',')
                s++;
        }
    }
    double vals[512];
    int nv = 0;
    for (char *s = inner; *s && nv < 512;) {
        char *end;
        vals[nv++] = strtod(s, &end);
        if (end == s) {
            msg_add(m, "bad number in '%s' for %s\n", spec, a->info.name);
            return false;
        }
        s = end;
        while (*s == ',' || isspace((unsigned char)*s))
            s++;
    }
    bool is_list = !strcmp(fn, "list");
    if (is_list) {
        a->shape[0] = nv;
        for (int d = 1; d < KERN_MAX_DIMS; d++)
            a->shape[d] = 1;
        if (a->info.rank != 1) {
            msg_add(m, "list() for %s of rank %d\n", a->info.name, a->info.rank);
            return false;
        }
    } else {
        if (nv != a->info.rank) {
            msg_add(m, "%s has rank %d but '%s' gives %d extents\n", a->info.name, a->info.rank,
                    spec, nv);
            return false;
        }
        for (int d = 0; d < KERN_MAX_DIMS; d++)
            a->shape[d] = d < nv ? (int64_t)vals[d] : 1;
    }
    a->rank = a->info.rank;
    a->count = 1;
    for (int d = 0; d < a->rank; d++)
        a->count *= a->shape[d];
    a->data = calloc((size_t)(a->count ? a->count : 1), sizeof(double));
    for (int64_t i = 0; i < a->count; i++) {
        double v;
        if (is_list)
            v = vals[i];
        else if (!strcmp(fn, "rand"))
            v = nextra == 2 ? extra[0] + (extra[1] - extra[0]) * rng_unit(r) : 2 * rng_unit(r) - 1;
        else if (!strcmp(fn, "randint"))
            v = nextra == 2 ? floor(extra[0] + (extra[1] - extra[0]) * rng_unit(r))
                            : floor(8 * rng_unit(r));
        else if (!strcmp(fn, "randbool"))
            v = rng_unit(r) < 0.5;
        else if (!strcmp(fn, "zeros"))
            v = 0;
        else if (!strcmp(fn, "fill"))
            v = extra[0];
        else {
            msg_add(m, "unknown generator '%s' for %s\n", fn, a->info.name);
            return false;
        }
        a->data[i] = round_to(a->info.dtype, v);
    }
    return true;
}

/* The argument values of kernel k from the case's args line (the same values for both
 * precisions: the generator runs on a generator seeded by the case name). */
static bool make_args(const gcase *c, kern_kernel *k, aval *vals, int *np, msgbuf *m) {
    rng_t r = {hash_str(c->name)};
    *np = kern_kernel_param_count(k);
    if (*np > MAX_PARAMS) {
        msg_add(m, "too many parameters\n");
        return false;
    }
    for (int i = 0; i < *np; i++) {
        aval *a = &vals[i];
        memset(a, 0, sizeof *a);
        kern_kernel_param(k, i, &a->info);
        a->diff = is_float(a->info.dtype) && !a->info.nograd;
        char spec[512];
        if (!find_kv(c->args, a->info.name, spec, sizeof spec)) {
            msg_add(m, "%s: no value for parameter %s in // args:\n", c->name, a->info.name);
            return false;
        }
        if (!a->info.is_array) {
            a->rank = 0;
            a->count = 1;
            a->data = calloc(1, sizeof(double));
            if (!parse_scalar(spec, &a->data[0])) {
                msg_add(m, "bad scalar '%s' for %s\n", spec, a->info.name);
                return false;
            }
            a->data[0] = round_to(a->info.dtype, a->data[0]);
        } else if (!gen_array(a, spec, &r, m)) {
            return false;
        }
    }
    return true;
}

static void free_args(aval *vals, int np) {
    for (int i = 0; i < np; i++)
        free(vals[i].data);
}

/* ---- launching ----------------------------------------------------------------------- */

static void *pack(kern_dtype t, const double *v, int64_t n) {
    void *p = calloc((size_t)(n ? n : 1), kern_dtype_size(t));
    for (int64_t i = 0; i < n; i++) {
        switch (t) {
        case KERN_BOOL: ((uint8_t *)p)[i] = v[i] != 0; break;
        case KERN_I32: ((int32_t *)p)[i] = (int32_t)v[i]; break;
        case KERN_U32: ((uint32_t *)p)[i] = (uint32_t)v[i]; break;
        case KERN_I64: ((int64_t *)p)[i] = (int64_t)v[i]; break;
        case KERN_F32: ((float *)p)[i] = (float)v[i]; break;
        case KERN_F64: ((double *)p)[i] = v[i]; break;
        default: break; /* the corpus uses the version-0 types */
        }
    }
    return p;
}

static void unpack(kern_dtype t, const void *p, double *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        switch (t) {
        case KERN_BOOL: v[i] = ((const uint8_t *)p)[i]; break;
        case KERN_I32: v[i] = ((const int32_t *)p)[i]; break;
        case KERN_U32: v[i] = ((const uint32_t *)p)[i]; break;
        case KERN_I64: v[i] = (double)((const int64_t *)p)[i]; break;
        case KERN_F32: v[i] = ((const float *)p)[i]; break;
        case KERN_F64: v[i] = ((const double *)p)[i]; break;
        default: break; /* the corpus uses the version-0 types */
        }
    }
}

static kern_arg scalar_arg(kern_dtype t, double v) {
    switch (t) {
    case KERN_BOOL: return kern_arg_bool(v != 0);
    case KERN_I32: return kern_arg_i32((int32_t)v);
    case KERN_U32: return kern_arg_u32((uint32_t)v);
    case KERN_I64: return kern_arg_i64((int64_t)v);
    case KERN_F32: return kern_arg_f32((float)v);
    default: return kern_arg_f64(v);
    }
}

static kern_buffer *make_buffer(kern_context *ctx, kern_dtype t, int rank, const int64_t *shape,
                                const double *v, int64_t n, msgbuf *m) {
    void *p = pack(t, v, n);
    kern_buffer *b = NULL;
    kern_status st = kern_buffer_create(ctx, t, rank, shape, p, &b);
    free(p);
    if (st != KERN_OK) {
        msg_add(m, "buffer: %s\n", kern_context_last_error(ctx));
        return NULL;
    }
    return b;
}

static bool read_buffer(kern_buffer *b, double *v, msgbuf *m) {
    size_t bytes = kern_buffer_bytes(b);
    void *p = malloc(bytes ? bytes : 1);
    kern_status st = kern_buffer_read(b, p, bytes);
    if (st == KERN_OK)
        unpack(kern_buffer_dtype(b), p, v, kern_buffer_count(b));
    free(p);
    if (st != KERN_OK)
        msg_add(m, "read: %s\n", kern_status_name(st));
    return st == KERN_OK;
}

/* The scalar value of parameter i in launch s of the sequence. */
static double scalar_in_launch(const gcase *c, const aval *a, int s) {
    char v[64];
    double x = a->data[0];
    if (c->nseq && find_kv(c->seq[s], a->info.name, v, sizeof v) && parse_scalar(v, &x))
        x = round_to(a->info.dtype, x);
    return x; /* unrounded otherwise: the finite differences perturb it by h */
}

/* A module compiled for one precision, with its primal buffers for one evaluation. */
typedef struct run {
    kern_context *ctx;
    kern_kernel *k, *kg;
    kern_kernel *kj; /* K.jvp, or NULL with jvp_error saying why */
    kern_module *mod;
    char jvp_error[1024];
    kern_buffer *buf[MAX_PARAMS];
    int want_strategy; /* $KERN_AD_STRATEGY forced: what K.grad's launches must report */
} run;

/* With $KERN_AD_STRATEGY forcing a strategy (.ci/run runs the corpus with each), a launch
 * of K.grad with adstacks must have used it: recompute where the module has K.grad.ckpt,
 * store-all otherwise (docs/autodiff.md). */
static bool check_strategy(const gcase *c, run *r, msgbuf *m) {
    kern_adstack_info in;
    if (!r->want_strategy || kern_kernel_adstack_count(r->kg) <= 0)
        return true;
    if (kern_context_adstack_info(r->ctx, &in) != KERN_OK || in.last_strategy != r->want_strategy) {
        msg_add(m, "%s: %s ran with adstack strategy %d, not the forced %d\n", c->name,
                kern_kernel_name(r->kg), in.last_strategy, r->want_strategy);
        return false;
    }
    return true;
}

static bool launch_seq(const gcase *c, run *r, const aval *vals, int np, kern_dtype real,
                       msgbuf *m) {
    int nl = c->nseq ? c->nseq : 1;
    for (int s = 0; s < nl; s++) {
        kern_arg args[MAX_PARAMS];
        for (int i = 0; i < np; i++)
            args[i] = vals[i].info.is_array
                          ? kern_arg_buffer(r->buf[i])
                          : scalar_arg(vals[i].info.dtype, scalar_in_launch(c, &vals[i], s));
        kern_status st = kern_launch(r->k, args, np);
        if (st != KERN_OK) {
            msg_add(m, "%s (%s): launch %d of %s failed: %s\n", c->name, kern_dtype_name(real), s,
                    kern_kernel_name(r->k), kern_context_last_error(r->ctx));
            return false;
        }
    }
    return true;
}

static bool make_primal_buffers(run *r, const aval *vals, int np, msgbuf *m) {
    for (int i = 0; i < np; i++) {
        r->buf[i] = NULL;
        if (vals[i].info.is_array &&
            !(r->buf[i] = make_buffer(r->ctx, vals[i].info.dtype, vals[i].rank, vals[i].shape,
                                      vals[i].data, vals[i].count, m)))
            return false;
    }
    return true;
}

static void release_buffers(run *r, int np) {
    for (int i = 0; i < np; i++) {
        kern_buffer_release(r->buf[i]);
        r->buf[i] = NULL;
    }
}

/* L = sum over differentiable arrays of w_p . (p after the sequence), in f64. */
static bool eval_loss(const gcase *c, run *r, const aval *vals, int np, double *const *w,
                      double *loss, msgbuf *m) {
    bool ok = make_primal_buffers(r, vals, np, m) && launch_seq(c, r, vals, np, KERN_F64, m);
    double L = 0;
    for (int i = 0; ok && i < np; i++) {
        if (!vals[i].diff)
            continue;
        if (!vals[i].info.is_array) { /* K does not change a scalar: it passes through */
            L += w[i][0] * vals[i].data[0];
            continue;
        }
        double *after = malloc(sizeof(double) * (size_t)(vals[i].count ? vals[i].count : 1));
        ok = read_buffer(r->buf[i], after, m);
        for (int64_t j = 0; ok && j < vals[i].count; j++)
            L += w[i][j] * after[j];
        free(after);
    }
    release_buffers(r, np);
    *loss = L;
    return ok;
}

static bool compile(const gcase *c, const char *type, run *r, msgbuf *m) {
    memset(r, 0, sizeof *r);
    kern_context_options o = kern_context_options_default();
    o.threads = getenv("KERN_GRAD_THREADS") ? atoi(getenv("KERN_GRAD_THREADS")) : 2;
    o.debug = true; /* bounds, division and shift checks in K and K.grad */
    o.backend = kern_test_backend();
    if (kern_context_create(&o, &r->ctx) != KERN_OK) {
        msg_add(m, "%s (%s): no context: %s\n", c->name, type,
                r->ctx ? kern_context_last_error(r->ctx) : "out of memory");
        return false;
    }
    char *src = subst_real(c->src, type);
    kern_module *mod;
    kern_status st = kern_module_from_source(r->ctx, src, strlen(src), c->name, &mod);
    free(src);
    if (st != KERN_OK) {
        msg_add(m, "%s (%s): compile failed: %s\n", c->name, type, kern_context_last_error(r->ctx));
        return false;
    }
    const char *kname = c->kernel[0] ? c->kernel : kern_module_kernel_name(mod, 0);
    if (kern_kernel_find(mod, kname, &r->k) != KERN_OK) {
        msg_add(m, "%s (%s): no kernel %s\n", c->name, type, kname);
        return false;
    }
    char gname[128];
    snprintf(gname, sizeof gname, "%s.grad", kname);
    if (c->grad_name)
        snprintf(gname, sizeof gname, "%s", c->grad_name);
    if (kern_kernel_find(mod, gname, &r->kg) != KERN_OK) {
        msg_add(m, "%s (%s): no gradient kernel %s: %s\n", c->name, type, gname,
                kern_context_last_error(r->ctx));
        return false;
    }
    r->want_strategy = o.ad_strategy;
    if (o.ad_strategy == KERN_AD_RECOMPUTE) {
        kern_kernel *ck;
        char cname[160];
        snprintf(cname, sizeof cname, "%s.ckpt", gname);
        if (kern_kernel_find(mod, cname, &ck) != KERN_OK)
            r->want_strategy = KERN_AD_STORE_ALL;
    }
    snprintf(gname, sizeof gname, "%s.jvp", kname);
    if (kern_kernel_find(mod, gname, &r->kj) != KERN_OK)
        snprintf(r->jvp_error, sizeof r->jvp_error, "%s", kern_context_last_error(r->ctx));
    r->mod = mod;
    return true;
}

/* Checks K.grad's signature against the reference (section 8): K's parameters, then p.grad for each
 * differentiable p (arrays: same dtype and rank; scalars: rank 1). */
static bool check_signature(const gcase *c, run *r, const aval *vals, int np, msgbuf *m) {
    int ndiff = 0;
    for (int i = 0; i < np; i++)
        ndiff += vals[i].diff;
    if (kern_kernel_param_count(r->kg) != np + ndiff) {
        msg_add(m, "%s: %s has %d parameters, want %d\n", c->name, kern_kernel_name(r->kg),
                kern_kernel_param_count(r->kg), np + ndiff);
        return false;
    }
    int g = np;
    for (int i = 0; i < np; i++) {
        if (!vals[i].diff)
            continue;
        kern_param_info pi;
        kern_kernel_param(r->kg, g++, &pi);
        char want[96];
        snprintf(want, sizeof want, "%s.grad", vals[i].info.name);
        bool name_ok = c->grad_name || (pi.name && !strcmp(pi.name, want));
        if (!name_ok || !pi.is_array || pi.dtype != vals[i].info.dtype ||
            pi.rank != (vals[i].info.is_array ? vals[i].info.rank : 1)) {
            msg_add(m, "%s: adjoint parameter %d is %s (%s, rank %d), want %s\n", c->name, g - 1,
                    pi.name ? pi.name : "?", kern_dtype_name(pi.dtype), pi.rank, want);
            return false;
        }
    }
    return true;
}

/* Runs the sequence forward and the gradient kernels backward in one precision; grads[i]
 * receives p.grad (arrays: count elements; scalars: 1). Also checks that K.grad left the
 * primal arrays as the forward sequence left them. */
static bool analytic(const gcase *c, run *r, const aval *vals_in, int np, double *const *w,
                     kern_dtype real, double **grads, msgbuf *m) {
    /* The parameters of this precision's kernel: REAL arrays take `real`. */
    aval vals[MAX_PARAMS];
    for (int i = 0; i < np; i++) {
        vals[i] = vals_in[i];
        kern_kernel_param(r->k, i, &vals[i].info);
    }
    if (!check_signature(c, r, vals, np, m))
        return false;
    bool ok = make_primal_buffers(r, vals, np, m) && launch_seq(c, r, vals, np, real, m);
    double *after[MAX_PARAMS] = {0};
    kern_buffer *adj[MAX_PARAMS] = {0};
    for (int i = 0; ok && i < np; i++) {
        if (vals[i].info.is_array) {
            after[i] = malloc(sizeof(double) * (size_t)(vals[i].count ? vals[i].count : 1));
            ok = read_buffer(r->buf[i], after[i], m);
        }
        if (ok && vals[i].diff) {
            int64_t one = 1;
            adj[i] = vals[i].info.is_array
                         ? make_buffer(r->ctx, vals[i].info.dtype, vals[i].rank, vals[i].shape,
                                       w[i], vals[i].count, m)
                         : make_buffer(r->ctx, vals[i].info.dtype, 1, &one, w[i], 1, m);
            ok = adj[i] != NULL;
        }
    }
    int nl = c->nseq ? c->nseq : 1;
    for (int s = nl - 1; ok && s >= 0; s--) {
        kern_arg args[2 * MAX_PARAMS];
        int na = 0;
        for (int i = 0; i < np; i++)
            args[na++] = vals[i].info.is_array
                             ? kern_arg_buffer(r->buf[i])
                             : scalar_arg(vals[i].info.dtype, scalar_in_launch(c, &vals[i], s));
        for (int i = 0; i < np; i++)
            if (vals[i].diff)
                args[na++] = kern_arg_buffer(adj[i]);
        kern_status st = kern_launch(r->kg, args, na);
        if (st != KERN_OK) {
            msg_add(m, "%s (%s): launch %d of %s failed: %s\n", c->name, kern_dtype_name(real), s,
                    kern_kernel_name(r->kg), kern_context_last_error(r->ctx));
            ok = false;
        }
        ok = ok && check_strategy(c, r, m);
    }
    for (int i = 0; ok && i < np; i++) {
        if (vals[i].diff)
            ok = read_buffer(adj[i], grads[i], m);
        if (ok && vals[i].info.is_array) {
            double *now = malloc(sizeof(double) * (size_t)(vals[i].count ? vals[i].count : 1));
            ok = read_buffer(r->buf[i], now, m);
            for (int64_t j = 0; ok && j < vals[i].count; j++) {
                if (!(now[j] == after[i][j] || (isnan(now[j]) && isnan(after[i][j])))) {
                    msg_add(m,
                            "%s (%s): the gradient kernel wrote primal %s[%lld]: %.17g -> %.17g\n",
                            c->name, kern_dtype_name(real), vals[i].info.name, (long long)j,
                            after[i][j], now[j]);
                    ok = false;
                }
            }
            free(now);
        }
    }
    for (int i = 0; i < np; i++) {
        free(after[i]);
        kern_buffer_release(adj[i]);
    }
    release_buffers(r, np);
    return ok;
}

/* The indices of a parameter that the finite differences probe: all of them up to
 * FD_SAMPLES, else FD_SAMPLES distinct ones drawn at random (first and last included). */
static int sample_indices(int64_t count, rng_t *r, int64_t *idx) {
    if (count <= FD_SAMPLES) {
        for (int64_t j = 0; j < count; j++)
            idx[j] = j;
        return (int)count;
    }
    int n = 0;
    idx[n++] = 0;
    idx[n++] = count - 1;
    while (n < FD_SAMPLES) {
        int64_t j = (int64_t)(rng_unit(r) * (double)count);
        bool dup = false;
        for (int q = 0; q < n; q++)
            dup |= idx[q] == j;
        if (!dup)
            idx[n++] = j;
    }
    return n;
}

static bool check_jvp(const gcase *c, run *r64, run *r32, aval *vals, int np, double *const *w,
                      double *const *g64, msgbuf *m);

/* The whole check of one case. Returns true when every probed gradient element is within
 * tolerance in both precisions; m gets a report either way. With jvp, K.jvp's check
 * (check_jvp) replaces the finite differences of K.grad. */
static bool check_case(const gcase *c, msgbuf *m, bool jvp) {
    run r64 = {0}, r32 = {0};
    bool ok = compile(c, "f64", &r64, m) && compile(c, "f32", &r32, m);
    aval vals[MAX_PARAMS];
    int np = 0;
    double *w[MAX_PARAMS] = {0}, *g64[MAX_PARAMS] = {0}, *g32[MAX_PARAMS] = {0};
    double *fd[MAX_PARAMS] = {0};
    int64_t *idx[MAX_PARAMS] = {0};
    int nidx[MAX_PARAMS] = {0};
    if (ok)
        ok = make_args(c, r64.k, vals, &np, m);
    rng_t rw = {hash_str(c->name) ^ 0x9e3779b97f4a7c15ull};
    int ndiff = 0;
    for (int i = 0; ok && i < np; i++) {
        if (vals[i].info.dtype != KERN_F64 && is_float(vals[i].info.dtype)) {
            msg_add(m, "%s: parameter %s is %s in the f64 build (use REAL)\n", c->name,
                    vals[i].info.name, kern_dtype_name(vals[i].info.dtype));
            ok = false;
        }
        if (!vals[i].diff)
            continue;
        ndiff++;
        size_t n = (size_t)(vals[i].count ? vals[i].count : 1);
        w[i] = calloc(n, sizeof(double));
        g64[i] = calloc(n, sizeof(double));
        g32[i] = calloc(n, sizeof(double));
        fd[i] = calloc(n, sizeof(double));
        idx[i] = calloc(n, sizeof(int64_t));
        for (size_t j = 0; j < n; j++)
            w[i][j] = (double)(float)(2 * rng_unit(&rw) - 1);
        for (int q = 0; !vals[i].info.is_array && q < c->nseq; q++) {
            char v[64];
            if (find_kv(c->seq[q], vals[i].info.name, v, sizeof v)) {
                msg_add(m, "%s: // seq: overrides the differentiable scalar %s\n", c->name,
                        vals[i].info.name);
                ok = false;
            }
        }
        nidx[i] = sample_indices(vals[i].count, &rw, idx[i]);
    }
    if (ok && ndiff == 0) {
        msg_add(m, "%s: no differentiable parameter\n", c->name);
        ok = false;
    }
    if (ok)
        ok = analytic(c, &r64, vals, np, w, KERN_F64, g64, m);
    bool ok32 = ok && analytic(c, &r32, vals, np, w, KERN_F32, g32, m);
    if (jvp) { /* K.jvp against finite differences and K.grad (g64) instead */
        ok = ok && ok32 && check_jvp(c, &r64, &r32, vals, np, w, g64, m);
        nidx[0] = 0;
        for (int i = 0; i < np; i++)
            nidx[i] = 0;
    }
    /* Finite differences in f64, central, h = 1e-6 max(1, |x|). lmag: the largest |L|
     * seen, for the rounding noise of a difference (atomic float sums run in thread
     * order, so two evaluations of one L may differ in the last bits). */
    double lmag = 0;
    for (int i = 0; ok && i < np; i++) {
        for (int q = 0; ok && q < nidx[i]; q++) {
            int64_t j = idx[i][q];
            double x = vals[i].data[j];
            double h = 1e-6 * fmax(1.0, fabs(x));
            double lp = 0, lm = 0;
            vals[i].data[j] = x + h;
            ok = eval_loss(c, &r64, vals, np, w, &lp, m);
            vals[i].data[j] = x - h;
            ok = ok && eval_loss(c, &r64, vals, np, w, &lm, m);
            vals[i].data[j] = x;
            fd[i][j] = (lp - lm) / (2 * h);
            lmag = fmax(lmag, fmax(fabs(lp), fabs(lm)));
        }
    }
    /* Compare. */
    double mall = 0;
    for (int i = 0; ok && i < np; i++)
        for (int q = 0; q < nidx[i]; q++)
            mall = fmax(mall, fabs(fd[i][idx[i][q]]));
    int bad = 0;
    for (int i = 0; ok && i < np; i++) {
        if (!vals[i].diff)
            continue;
        double mp = 0;
        for (int q = 0; q < nidx[i]; q++)
            mp = fmax(mp, fabs(fd[i][idx[i][q]]));
        double scale = fmax(mp, 1e-3 * mall);
        if (scale == 0)
            scale = 1;
        for (int prec = 0; prec < 2; prec++) {
            if (prec == 1 && !ok32)
                continue;
            double *g = prec ? g32[i] : g64[i];
            double rtol = prec ? c->rtol32 : c->rtol64;
            double worst = 0;
            int nbad = 0;
            for (int q = 0; q < nidx[i]; q++) {
                int64_t j = idx[i][q];
                double err = fabs(g[j] - fd[i][j]) / fmax(fabs(fd[i][j]), FLOOR * scale);
                /* below the noise of the difference itself: 64 ulps of L over 2h */
                double h = 1e-6 * fmax(1.0, fabs(vals[i].data[j]));
                if (fabs(g[j] - fd[i][j]) <= 64 * DBL_EPSILON * fmax(1.0, lmag) / (2 * h))
                    err = 0;
                if (!(err <= rtol)) {
                    if (nbad < 4)
                        msg_add(
                            m, "%s (%s): %s.grad[%lld] = %.9g, finite difference %.9g (x = %.9g)\n",
                            c->name, prec ? "f32" : "f64", vals[i].info.name, (long long)j, g[j],
                            fd[i][j], vals[i].data[j]);
                    nbad++;
                }
                if (!(err <= worst))
                    worst = err;
            }
            msg_add(m,
                    "%s (%s): %s: %d probed, %d wrong, worst error %.3g (scale %.3g, rtol %.1g)\n",
                    c->name, prec ? "f32" : "f64", vals[i].info.name, nidx[i], nbad, worst, scale,
                    rtol);
            bad += nbad;
        }
    }
    for (int i = 0; i < np; i++) {
        free(w[i]);
        free(g64[i]);
        free(g32[i]);
        free(fd[i]);
        free(idx[i]);
    }
    free_args(vals, np);
    kern_context_release(r64.ctx);
    kern_context_release(r32.ctx);
    return ok && ok32 && bad == 0;
}

/* ---- forward mode: K.jvp (reference section 11.6) ------------------------------------- */

/* The state after the sequence run by K (jvp NULL) or by K.jvp with the tangents tan (in
 * and out: the tangents of the state after); state[i] receives array i after the run
 * (scalars: their value, which K does not change). */
static bool run_forward(const gcase *c, run *r, kern_kernel *jvp, const aval *vals_in, int np,
                        kern_dtype real, double **state, double **tan, msgbuf *m) {
    aval vals[MAX_PARAMS] = {0}; /* the parameters of this precision's kernel */
    for (int i = 0; i < np; i++) {
        vals[i] = vals_in[i];
        kern_kernel_param(r->k, i, &vals[i].info);
    }
    bool ok = make_primal_buffers(r, vals, np, m);
    kern_buffer *tb[MAX_PARAMS] = {0};
    for (int i = 0; ok && jvp && i < np; i++) {
        if (!vals[i].diff)
            continue;
        int64_t one = 1;
        tb[i] = vals[i].info.is_array ? make_buffer(r->ctx, vals[i].info.dtype, vals[i].rank,
                                                    vals[i].shape, tan[i], vals[i].count, m)
                                      : make_buffer(r->ctx, vals[i].info.dtype, 1, &one, tan[i],
                                                    1, m);
        ok = tb[i] != NULL;
    }
    int nl = c->nseq ? c->nseq : 1;
    for (int s = 0; ok && s < nl; s++) {
        kern_arg args[2 * MAX_PARAMS];
        int na = 0;
        for (int i = 0; i < np; i++)
            args[na++] = vals[i].info.is_array
                             ? kern_arg_buffer(r->buf[i])
                             : scalar_arg(vals[i].info.dtype, scalar_in_launch(c, &vals[i], s));
        for (int i = 0; jvp && i < np; i++)
            if (vals[i].diff)
                args[na++] = kern_arg_buffer(tb[i]);
        kern_kernel *k = jvp ? jvp : r->k;
        if (kern_launch(k, args, na) != KERN_OK) {
            msg_add(m, "%s (%s): launch %d of %s failed: %s\n", c->name, kern_dtype_name(real), s,
                    kern_kernel_name(k), kern_context_last_error(r->ctx));
            ok = false;
        }
    }
    for (int i = 0; ok && i < np; i++) {
        if (vals[i].info.is_array)
            ok = read_buffer(r->buf[i], state[i], m);
        else
            state[i][0] = vals[i].data[0];
        if (ok && tb[i])
            ok = read_buffer(tb[i], tan[i], m);
    }
    for (int i = 0; i < np; i++)
        kern_buffer_release(tb[i]);
    release_buffers(r, np);
    return ok;
}

/* K.jvp of one case, in f64 and f32, against (1) central finite differences in f64 of the
 * state after K along the same random tangent v, element by element, (2) the primal state
 * K leaves (K.jvp updates it exactly as K does), and (3) K.grad by the dot-product identity
 * <K.jvp(v), w> = <v, K.grad(w)>, with w the adjoint seeds of check_case and g64 the
 * adjoints K.grad returned for them (f64). */
static bool check_hvp(const gcase *c, run *r, const aval *vals_in, int np, double *const *w,
                      double *const *v, msgbuf *m);

static bool check_jvp(const gcase *c, run *r64, run *r32, aval *vals, int np, double *const *w,
                      double *const *g64, msgbuf *m) {
    kern_kernel *j64 = r64->kj, *j32 = r32->kj;
    char jname[128];
    snprintf(jname, sizeof jname, "%s.jvp", kern_kernel_name(r64->k));
    if (c->jvp_refused[0]) { /* forward mode refuses this kernel, saying why */
        bool said = !j64 && !j32 && strstr(r64->jvp_error, c->jvp_refused) &&
                    strstr(r32->jvp_error, c->jvp_refused);
        msg_add(m, "%s: %s %s\n", c->name, jname,
                said ? "refused as expected" : "was not refused as the case says");
        if (!said)
            msg_add(m, "  (message: %s)\n", r64->jvp_error);
        return said;
    }
    if (!j64 || !j32) {
        msg_add(m, "%s: no %s: %s\n", c->name, jname, j64 ? r32->jvp_error : r64->jvp_error);
        return false;
    }
    rng_t rv = {hash_str(c->name) ^ 0x5851f42d4c957f2dull};
    double *v[MAX_PARAMS] = {0}, *t[2][MAX_PARAMS] = {{0}}, *base[MAX_PARAMS] = {0};
    double *sp[MAX_PARAMS] = {0}, *sm[MAX_PARAMS] = {0}, *s2[2][MAX_PARAMS] = {{0}};
    for (int i = 0; i < np; i++) {
        size_t n = (size_t)(vals[i].count ? vals[i].count : 1);
        base[i] = calloc(n, sizeof(double));
        sp[i] = calloc(n, sizeof(double));
        sm[i] = calloc(n, sizeof(double));
        for (int p = 0; p < 2; p++) {
            s2[p][i] = calloc(n, sizeof(double));
            t[p][i] = calloc(n, sizeof(double));
        }
        v[i] = calloc(n, sizeof(double));
        for (size_t q = 0; vals[i].diff && q < n; q++)
            v[i][q] = t[0][i][q] = t[1][i][q] = (double)(float)(2 * rng_unit(&rv) - 1);
    }
    bool ok = run_forward(c, r64, NULL, vals, np, KERN_F64, base, NULL, m) &&
              run_forward(c, r64, j64, vals, np, KERN_F64, s2[0], t[0], m) &&
              run_forward(c, r32, j32, vals, np, KERN_F32, s2[1], t[1], m);
    /* the primal state: K.jvp's is K's (in f64, up to the order of atomic float sums) */
    for (int i = 0; ok && i < np; i++)
        for (int64_t q = 0; vals[i].info.is_array && q < vals[i].count; q++)
            if (!(fabs(s2[0][i][q] - base[i][q]) <= 1e-12 * fmax(1.0, fabs(base[i][q])) ||
                  (isnan(base[i][q]) && isnan(s2[0][i][q])))) {
                msg_add(m, "%s: %s left %s[%lld] = %.17g, K left %.17g\n", c->name, jname,
                        vals[i].info.name, (long long)q, s2[0][i][q], base[i][q]);
                ok = false;
                break;
            }
    /* finite differences along v: x +- h v for every differentiable input at once */
    double h = 1e-6, smag = 0;
    for (int i = 0; i < np; i++)
        for (int64_t q = 0; vals[i].diff && q < vals[i].count; q++)
            h = fmin(h, 1e-6 * fmax(1.0, fabs(vals[i].data[q])) / fmax(1.0, fabs(v[i][q])));
    for (int sign = 0; ok && sign < 2; sign++) {
        aval pert[MAX_PARAMS];
        double *data[MAX_PARAMS] = {0};
        for (int i = 0; i < np; i++) {
            pert[i] = vals[i];
            size_t n = (size_t)(vals[i].count ? vals[i].count : 1);
            data[i] = malloc(n * sizeof(double));
            for (size_t q = 0; q < n; q++)
                data[i][q] = vals[i].data[q] + (vals[i].diff ? (sign ? -h : h) * v[i][q] : 0);
            pert[i].data = data[i];
        }
        ok = run_forward(c, r64, NULL, pert, np, KERN_F64, sign ? sm : sp, NULL, m);
        for (int i = 0; i < np; i++)
            free(data[i]);
    }
    int bad = 0;
    for (int i = 0; ok && i < np; i++)
        for (int64_t q = 0; vals[i].diff && q < vals[i].count; q++)
            smag = fmax(smag, fmax(fabs(sp[i][q]), fabs(sm[i][q])));
    for (int i = 0; ok && i < np; i++) {
        if (!vals[i].diff)
            continue;
        double mp = 0;
        for (int64_t q = 0; q < vals[i].count; q++)
            mp = fmax(mp, fabs((sp[i][q] - sm[i][q]) / (2 * h)));
        for (int p = 0; p < 2; p++) {
            double rtol = p ? c->rtol32 : c->rtol64, worst = 0;
            int nbad = 0;
            for (int64_t q = 0; q < vals[i].count; q++) {
                double fd = (sp[i][q] - sm[i][q]) / (2 * h);
                double diff = fabs(t[p][i][q] - fd);
                /* f32 tangents carry the rounding of f32 primal values (cancellations in
                 * loops): held to rtol32 relative to at least 1% of the largest tangent */
                double err = diff / fmax(fabs(fd), (p ? 1e-2 : FLOOR) * fmax(mp, 1e-12));
                if (diff <= 64 * DBL_EPSILON * fmax(1.0, smag) / (2 * h))
                    err = 0;
                if (!(err <= rtol)) {
                    if (nbad < 4)
                        msg_add(m, "%s (%s): %s.tan[%lld] = %.9g, finite difference %.9g\n",
                                c->name, p ? "f32" : "f64", vals[i].info.name, (long long)q,
                                t[p][i][q], fd);
                    nbad++;
                }
                if (!(err <= worst))
                    worst = err;
            }
            msg_add(m, "%s (%s): %s.tan: %lld elements, %d wrong, worst error %.3g\n", c->name,
                    p ? "f32" : "f64", vals[i].info.name, (long long)vals[i].count, nbad, worst);
            bad += nbad;
        }
    }
    /* the dot-product identity, f64 */
    if (ok) {
        double lhs = 0, rhs = 0, mag = 0;
        for (int i = 0; i < np; i++)
            for (int64_t q = 0; vals[i].diff && q < vals[i].count; q++) {
                lhs += w[i][q] * t[0][i][q];
                rhs += v[i][q] * g64[i][q];
                mag += fabs(w[i][q] * t[0][i][q]) + fabs(v[i][q] * g64[i][q]);
            }
        double err = fabs(lhs - rhs) / fmax(mag, 1e-300);
        msg_add(m, "%s: <jvp(v), w> = %.15g, <v, grad(w)> = %.15g, relative %.3g\n", c->name,
                lhs, rhs, err);
        if (!(err <= 1e-9)) {
            msg_add(m, "%s: the dot-product identity fails\n", c->name);
            bad++;
        }
    }
    if (ok && !check_hvp(c, r64, vals, np, w, v, m))
        bad++;
    for (int i = 0; i < np; i++) {
        free(v[i]);
        free(base[i]);
        free(sp[i]);
        free(sm[i]);
        for (int p = 0; p < 2; p++) {
            free(t[p][i]);
            free(s2[p][i]);
        }
    }
    return ok && bad == 0;
}

/* K.grad.jvp (forward over reverse), f64: K.jvp runs the sequence from (x, v), then
 * K.grad.jvp the launches in reverse on the state and tangents it left, from the adjoint
 * seeds w and zero adjoint tangents; the adjoint tangents it leaves, (d/de) K.grad(w) at
 * x + e v (the Hessian-vector product of L = w . state), are compared with central
 * differences of K.grad itself (analytic() at x +- h v, Richardson-extrapolated). */
static bool check_hvp(const gcase *c, run *r, const aval *vals_in, int np, double *const *w,
                      double *const *v, msgbuf *m) {
    char hname[128];
    snprintf(hname, sizeof hname, "%s.grad.jvp", kern_kernel_name(r->k));
    kern_kernel *kh;
    if (kern_kernel_find(r->mod, hname, &kh) != KERN_OK) {
        const char *why = kern_context_last_error(r->ctx);
        /* twice K's arrays and their adjoints: a device may not bind that many (lavapipe
         * allows 32 storage buffers); the device's limit, said, is not kern's error */
        bool limit = strstr(why, "maxPerStageDescriptorStorageBuffers") != NULL;
        msg_add(m, "%s: %s %s: %s\n", c->name, hname,
                limit ? "not checked on this device" : "missing", why);
        return limit;
    }    aval vals[MAX_PARAMS] = {0};
    for (int i = 0; i < np; i++) {
        vals[i] = vals_in[i];
        kern_kernel_param(r->k, i, &vals[i].info);
    }
    bool ok = make_primal_buffers(r, vals, np, m);
    kern_buffer *tan[MAX_PARAMS] = {0}, *adj[MAX_PARAMS] = {0}, *adjt[MAX_PARAMS] = {0};
    double *hv[MAX_PARAMS] = {0}, *fd[MAX_PARAMS] = {0}, *g[MAX_PARAMS] = {0};
    double *gp[MAX_PARAMS] = {0}, *gm[MAX_PARAMS] = {0}, *g0[MAX_PARAMS] = {0};
    for (int i = 0; ok && i < np; i++) {
        if (!vals[i].diff)
            continue;
        int64_t one = 1, n = vals[i].count ? vals[i].count : 1;
        const int64_t *shape = vals[i].info.is_array ? vals[i].shape : &one;
        int rank = vals[i].info.is_array ? vals[i].rank : 1;
        double *zeros = calloc((size_t)n, sizeof(double));
        tan[i] = make_buffer(r->ctx, KERN_F64, rank, shape, v[i], vals[i].count, m);
        adj[i] = make_buffer(r->ctx, KERN_F64, rank, shape, w[i], vals[i].count, m);
        adjt[i] = make_buffer(r->ctx, KERN_F64, rank, shape, zeros, vals[i].count, m);
        free(zeros);
        hv[i] = calloc((size_t)n, sizeof(double));
        fd[i] = calloc((size_t)n, sizeof(double));
        g[i] = calloc((size_t)n, sizeof(double));
        gp[i] = calloc((size_t)n, sizeof(double));
        gm[i] = calloc((size_t)n, sizeof(double));
        g0[i] = calloc((size_t)n, sizeof(double));
        ok = tan[i] && adj[i] && adjt[i];
    }
    int nl = c->nseq ? c->nseq : 1;
    for (int pass = 0; pass < 2 && ok; pass++) { /* K.jvp forward, then K.grad.jvp back */
        for (int q = 0; q < nl && ok; q++) {
            int s = pass ? nl - 1 - q : q;
            kern_arg args[4 * MAX_PARAMS];
            int na = 0;
            for (int i = 0; i < np; i++)
                args[na++] = vals[i].info.is_array
                                 ? kern_arg_buffer(r->buf[i])
                                 : scalar_arg(vals[i].info.dtype, scalar_in_launch(c, &vals[i], s));
            kern_buffer **lists[3] = {pass ? adj : tan, tan, adjt};
            for (int l = 0; l < (pass ? 3 : 1); l++)
                for (int i = 0; i < np; i++)
                    if (vals[i].diff)
                        args[na++] = kern_arg_buffer(lists[l][i]);
            kern_kernel *k = pass ? kh : r->kj;
            if (kern_launch(k, args, na) != KERN_OK) {
                msg_add(m, "%s: launch %d of %s failed: %s\n", c->name, s, kern_kernel_name(k),
                        kern_context_last_error(r->ctx));
                ok = false;
            }
        }
    }
    for (int i = 0; ok && i < np; i++)
        if (vals[i].diff)
            ok = read_buffer(adjt[i], hv[i], m);
    for (int i = 0; i < np; i++) {
        kern_buffer_release(tan[i]);
        kern_buffer_release(adj[i]);
        kern_buffer_release(adjt[i]);
    }
    release_buffers(r, np);
    /* central differences of K.grad along v */
    double h = 1e-5;
    for (int i = 0; i < np; i++)
        for (int64_t q = 0; vals[i].diff && q < vals[i].count; q++)
            h = fmin(h, 1e-5 * fmax(1.0, fabs(vals[i].data[q])));
    double *dfull[MAX_PARAMS] = {0}; /* the difference at h alone */
    for (int i = 0; i < np; i++)
        dfull[i] = calloc((size_t)(vals[i].count ? vals[i].count : 1), sizeof(double));
    for (int rr = 0; rr < 2 && ok; rr++) {
        double hr = rr ? h : h / 2;
        for (int sign = 0; sign < 2 && ok; sign++) {
            aval pert[MAX_PARAMS];
            double *data[MAX_PARAMS] = {0};
            for (int i = 0; i < np; i++) {
                pert[i] = vals_in[i];
                size_t n = (size_t)(vals[i].count ? vals[i].count : 1);
                data[i] = malloc(n * sizeof(double));
                for (size_t q = 0; q < n; q++)
                    data[i][q] =
                        vals[i].data[q] + (vals[i].diff ? (sign ? -hr : hr) * v[i][q] : 0);
                pert[i].data = data[i];
            }
            ok = analytic(c, r, pert, np, w, KERN_F64, g, m);
            for (int i = 0; i < np; i++) {
                free(data[i]);
                for (int64_t q = 0; vals[i].diff && q < vals[i].count; q++) {
                    if (rr == 0)
                        (sign ? gm : gp)[i][q] = g[i][q];
                    double d = (sign ? -g[i][q] : g[i][q]) / (2 * hr);
                    if (rr == 0) {
                        fd[i][q] += 4 * d / 3;
                    } else {
                        fd[i][q] -= d / 3;
                        dfull[i][q] += d;
                    }
                }
            }
        }
    }
    if (ok) /* K.grad at x: one-sided differences that disagree mark a kink (min, max, abs) */
        ok = analytic(c, r, vals_in, np, w, KERN_F64, g0, m);
    int bad = 0, kinks = 0, compared = 0;
    double mall = 0, gmag = 0; /* gmag: the largest |K.grad|, for the differences' noise */
    for (int i = 0; ok && i < np; i++)
        for (int64_t q = 0; vals[i].diff && q < vals[i].count; q++)
            gmag = fmax(gmag, fabs(g0[i][q]));
    for (int i = 0; ok && i < np; i++)
        for (int64_t q = 0; vals[i].diff && q < vals[i].count; q++)
            mall = fmax(mall, fabs(fd[i][q]));
    for (int i = 0; ok && i < np; i++) {
        if (!vals[i].diff)
            continue;
        double mp = 0, worst = 0;
        for (int64_t q = 0; q < vals[i].count; q++)
            mp = fmax(mp, fabs(fd[i][q]));
        double scale = fmax(mp, 1e-3 * mall);
        int nbad = 0;
        for (int64_t q = 0; q < vals[i].count; q++) {
            double err = fabs(hv[i][q] - fd[i][q]) / fmax(fabs(fd[i][q]), FLOOR * fmax(scale, 1e-12));
            if (fabs(hv[i][q] - fd[i][q]) <= 64 * DBL_EPSILON * fmax(1.0, gmag) / h)
                err = 0; /* below the rounding noise of the differences of K.grad */
            /* one-sided differences, or the differences at h and h/2, that disagree */
            double dp = (gp[i][q] - g0[i][q]) / (h / 2), dm = (g0[i][q] - gm[i][q]) / (h / 2);
            double dh = (gp[i][q] - gm[i][q]) / h, floor = FLOOR * fmax(scale, 1e-12);
            if (!(err <= HVP_RTOL) &&
                (fabs(dp - dm) > 1e-2 * fmax(fmax(fabs(dp), fabs(dm)), floor) ||
                 fabs(dfull[i][q] - dh) > 1e-3 * fmax(fmax(fabs(dh), fabs(dfull[i][q])), floor))) {
                kinks++; /* K.grad jumps between x - h v and x + h v: not a derivative */
                continue;
            }
            compared++;
            if (!(err <= HVP_RTOL)) {
                if (nbad < 4)
                    msg_add(m, "%s: %s.grad.tan[%lld] = %.12g (Hv), central difference of K.grad "
                               "%.12g\n",
                            c->name, vals[i].info.name, (long long)q, hv[i][q], fd[i][q]);
                nbad++;
            }
            if (!(err <= worst))
                worst = err;
        }
        msg_add(m, "%s (f64): %s.grad.tan (Hv): %lld elements, %d wrong, worst error %.3g\n",
                c->name, vals[i].info.name, (long long)vals[i].count, nbad, worst);
        bad += nbad;
    }
    if (kinks)
        msg_add(m, "%s: %d elements of Hv at a kink of K.grad, not compared (%d compared)\n",
                c->name, kinks, compared);
    if (ok && compared == 0) {
        msg_add(m, "%s: no element of Hv could be compared\n", c->name);
        bad++;
    }
    for (int i = 0; i < np; i++) {
        free(hv[i]);
        free(fd[i]);
        free(g[i]);
        free(gp[i]);
        free(gm[i]);
        free(g0[i]);
        free(dfull[i]);
    }
    return ok && bad == 0;
}

/* ---- the corpus ---------------------------------------------------------------------- */

typedef struct corpus_param {
    char file[128];
} corpus_param;

static int cmp_param(const void *a, const void *b) {
    return strcmp(((const corpus_param *)a)->file, ((const corpus_param *)b)->file);
}

static int list_corpus(corpus_param *out, int cap) {
    DIR *d = opendir(KERN_SOURCE_ROOT "/tests/grad");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    const char *only = getenv("KERN_GRAD_ONLY"); /* a developer aid: one file */
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".kern") || l >= sizeof out[0].file)
            continue;
        if (only && *only && !strstr(e->d_name, only))
            continue;
        if (n < cap)
            snprintf(out[n++].file, sizeof out[0].file, "%s", e->d_name);
    }
    closedir(d);
    qsort(out, (size_t)n, sizeof *out, cmp_param);
    return n;
}

static void free_params(struct criterion_test_params *p) { cr_free(p->params); }

static struct criterion_test_params corpus_params(void) {
    corpus_param tmp[256];
    int n = list_corpus(tmp, 256);
    corpus_param *p = cr_malloc(sizeof(corpus_param) * (size_t)(n ? n : 1));
    memcpy(p, tmp, sizeof(corpus_param) * (size_t)n);
    return cr_make_param_array(corpus_param, p, (size_t)n, free_params);
}

/* One corpus file: K.grad (check_case), or with jvp K.jvp and K.grad.jvp (check_jvp). */
static void corpus_case(const corpus_param *p, bool jvp) {
    char path[512];
    snprintf(path, sizeof path, "%s/tests/grad/%s", KERN_SOURCE_ROOT, p->file);
    char *src = read_text(path);
    cr_assert(src, "cannot read %s", path);
    gcase c = {0};
    c.name = p->file;
    c.src = src;
    parse_directives(&c);
    static msgbuf report;
    report.len = 0;
    report.text[0] = 0;
    bool ok = check_case(&c, &report, jvp);
    cr_log_info("%s", report.text);
    cr_assert(ok, "%s", report.text);
    free(src);
}

ParameterizedTestParameters(grad_corpus, kernel) { return corpus_params(); }
ParameterizedTest(corpus_param *p, grad_corpus, kernel) { corpus_case(p, false); }

/* Forward mode on the same corpus: K.jvp against finite differences along a random tangent,
 * K.grad by the dot-product identity, and K.grad.jvp against differences of K.grad. */
ParameterizedTestParameters(jvp_corpus, kernel) { return corpus_params(); }
ParameterizedTest(corpus_param *p, jvp_corpus, kernel) { corpus_case(p, true); }

/* The corpus is not silently small: the issue asks for at least 40 kernels. */
Test(grad_corpus, size) {
    static corpus_param tmp[256];
    if (getenv("KERN_GRAD_ONLY"))
        cr_skip_test("KERN_GRAD_ONLY is set");
    int n = list_corpus(tmp, 256);
    cr_assert_geq(n, 40, "tests/grad has %d kernels", n);
}

/* ---- the harness checked against hand-written adjoints ------------------------------ */

static const char *MANUAL_SRC =
    "kernel k(x: REAL[], y: REAL[], c: REAL[], a: REAL, n: i32) {\n"
    "    for i in 0..len(x) {\n"
    "        y[i] = sin(x[i]) * a;\n"
    "        c[i % n] += x[i] * x[i];\n"
    "    }\n"
    "}\n"
    /* the adjoint written by hand from reference section 8: y is overwritten (its adjoint is
       replaced by 0), c is += (passes through), x and a accumulate. */
    "kernel k_adj(x: REAL[], y: REAL[], c: REAL[], a: REAL, n: i32,\n"
    "             gx: REAL[], gy: REAL[], gc: REAL[], ga: REAL[]) {\n"
    "    for i in 0..len(x) {\n"
    "        let dy = gy[i];\n"
    "        gx[i] += dy * cos(x[i]) * a + gc[i % n] * 2.0 * x[i];\n"
    "        ga[0] += dy * sin(x[i]);\n"
    "        gy[i] = 0.0;\n"
    "    }\n"
    "}\n"
    /* the same with one planted mistake: the adjoint of the overwritten y is kept */
    "kernel k_bad(x: REAL[], y: REAL[], c: REAL[], a: REAL, n: i32,\n"
    "             gx: REAL[], gy: REAL[], gc: REAL[], ga: REAL[]) {\n"
    "    for i in 0..len(x) {\n"
    "        let dy = gy[i];\n"
    "        gx[i] += dy * cos(x[i]) * a + gc[i % n] * 2.0 * x[i];\n"
    "        ga[0] += dy * sin(x[i]);\n"
    "    }\n"
    "}\n"
    "// kernel: k\n"
    "// args: x=rand(100) y=rand(100) c=rand(7) a=0.75 n=7\n";

Test(grad_harness, manual_adjoint_passes) {
    gcase c = {0};
    c.name = "manual";
    c.src = MANUAL_SRC;
    parse_directives(&c);
    c.grad_name = "k_adj";
    static msgbuf m;
    m.len = 0;
    cr_assert(check_case(&c, &m, false), "%s", m.text);
    /* x has 100 elements: 64 probed; y and c and the scalar a too. */
    cr_assert(strstr(m.text, "manual (f64): x: 64 probed, 0 wrong"), "%s", m.text);
    cr_assert(strstr(m.text, "manual (f32): a: 1 probed, 0 wrong"), "%s", m.text);
}

Test(grad_harness, planted_error_is_caught) {
    gcase c = {0};
    c.name = "manual";
    c.src = MANUAL_SRC;
    parse_directives(&c);
    c.grad_name = "k_bad";
    static msgbuf m;
    m.len = 0;
    cr_assert_not(check_case(&c, &m, false), "%s", m.text);
    cr_assert(strstr(m.text, "manual (f64): y: 64 probed, 64 wrong"), "%s", m.text);
}

Test(grad_harness, subst_real_whole_words) {
    char *s = subst_real("REAL REAL_X xREAL REAL[] f(REAL)", "f32");
    cr_assert_str_eq(s, "f32 REAL_X xREAL f32[] f(f32)");
    free(s);
}

/* ---- exact values at the kinks the reference fixes ----------------------------------- */

/* Compiles src (REAL = type), runs K.grad for kernel "k" once with out.grad = 1 and the
 * other adjoints 0, and returns a.grad[0], b.grad[0] of k(a: T[], b: T[], out: T[]). */
static void kink_grads(const char *body, const char *type, double av, double bv, double *ga,
                       double *gb) {
    char src[1024];
    snprintf(src, sizeof src,
             "kernel k(a: REAL[], b: REAL[], out: REAL[]) {\n"
             "    for i in 0..1 { out[i] = %s; }\n"
             "}\n",
             body);
    char *s = subst_real(src, type);
    kern_dtype t = !strcmp(type, "f64") ? KERN_F64 : KERN_F32;
    kern_context *ctx;
    cr_assert_eq(kern_context_create(NULL, &ctx), KERN_OK);
    kern_module *mod;
    cr_assert_eq(kern_module_from_source(ctx, s, strlen(s), "kink", &mod), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    free(s);
    kern_kernel *kg;
    cr_assert_eq(kern_kernel_find(mod, "k.grad", &kg), KERN_OK, "%s: no k.grad: %s", body,
                 kern_context_last_error(ctx));
    int64_t one = 1;
    double va[1] = {av}, vb[1] = {bv}, z[1] = {0}, o[1] = {1};
    msgbuf m = {.len = 0};
    kern_buffer *B[6] = {
        make_buffer(ctx, t, 1, &one, va, 1, &m), make_buffer(ctx, t, 1, &one, vb, 1, &m),
        make_buffer(ctx, t, 1, &one, z, 1, &m),  make_buffer(ctx, t, 1, &one, z, 1, &m),
        make_buffer(ctx, t, 1, &one, z, 1, &m),  make_buffer(ctx, t, 1, &one, o, 1, &m),
    };
    kern_arg args[6];
    for (int i = 0; i < 6; i++) {
        cr_assert(B[i], "%s", m.text);
        args[i] = kern_arg_buffer(B[i]);
    }
    cr_assert_eq(kern_launch(kg, args, 6), KERN_OK, "%s", kern_context_last_error(ctx));
    cr_assert(read_buffer(B[3], ga, &m) && read_buffer(B[4], gb, &m), "%s", m.text);
    kern_context_release(ctx);
}

static void expect_kink(const char *body, double av, double bv, double want_a, double want_b) {
    const char *types[2] = {"f64", "f32"};
    for (int t = 0; t < 2; t++) {
        double ga, gb;
        kink_grads(body, types[t], av, bv, &ga, &gb);
        cr_expect(ga == want_a || (isnan(want_a) && isnan(ga)),
                  "%s at a=%g b=%g (%s): a.grad = %.17g, want %.17g", body, av, bv, types[t], ga,
                  want_a);
        cr_expect(gb == want_b || (isnan(want_b) && isnan(gb)),
                  "%s at a=%g b=%g (%s): b.grad = %.17g, want %.17g", body, av, bv, types[t], gb,
                  want_b);
    }
}

Test(grad_kinks, abs_at_zero_is_zero) {
    expect_kink("abs(a[i])", 0.0, 0.0, 0.0, 0.0);
    expect_kink("abs(a[i]) * b[i]", -0.0, 3.0, 0.0, 0.0);
    expect_kink("abs(a[i])", 2.0, 0.0, 1.0, 0.0);
    expect_kink("abs(a[i])", -2.0, 0.0, -1.0, 0.0);
}

Test(grad_kinks, min_max_ties_go_to_first_argument) {
    expect_kink("min(a[i], b[i])", 1.5, 1.5, 1.0, 0.0);
    expect_kink("max(a[i], b[i])", 1.5, 1.5, 1.0, 0.0);
    expect_kink("min(b[i], a[i])", 1.5, 1.5, 0.0, 1.0);
    expect_kink("max(b[i], a[i])", -0.5, -0.5, 0.0, 1.0);
    /* off the tie: the smaller / larger one */
    expect_kink("min(a[i], b[i])", 1.0, 2.0, 1.0, 0.0);
    expect_kink("min(a[i], b[i])", 3.0, 2.0, 0.0, 1.0);
    expect_kink("max(a[i], b[i])", 1.0, 2.0, 0.0, 1.0);
    expect_kink("max(a[i], b[i])", 3.0, 2.0, 1.0, 0.0);
    /* a tie reached through arithmetic: 2 * 0.75 == 1.5 exactly */
    expect_kink("max(2.0 * a[i], b[i])", 0.75, 1.5, 2.0, 0.0);
}

Test(grad_kinks, sqrt_at_zero_is_inf) {
    expect_kink("sqrt(a[i])", 0.0, 0.0, INFINITY, 0.0);
    expect_kink("sqrt(a[i])", 4.0, 0.0, 0.25, 0.0);
}

Test(grad_kinks, piecewise_constant_builtins_have_zero_gradient) {
    expect_kink("floor(a[i]) + ceil(b[i])", 1.25, -0.5, 0.0, 0.0);
    expect_kink("round(a[i]) * sign(b[i])", 1.7, -2.0, 0.0, 0.0);
    expect_kink("REAL(i32(a[i] * 3.0)) + b[i]", 1.7, 0.5, 0.0, 1.0);
    expect_kink("select(a[i] > b[i], a[i], b[i])", 2.0, 1.0, 1.0, 0.0);
    expect_kink("select(a[i] > b[i], a[i], b[i])", 1.0, 2.0, 0.0, 1.0);
}

Test(grad_kinks, builtins_v1_exact_gradients) {
    /* stop_gradient: the value passes, the gradient does not (hand-derived) */
    expect_kink("stop_gradient(a[i] * b[i]) + a[i] * b[i]", 2.0, 3.0, 3.0, 2.0);
    expect_kink("a[i] * stop_gradient(a[i]) + stop_gradient(b[i])", 3.0, 5.0, 3.0, 0.0);
    /* float %: 1 to the dividend, -trunc(a / b) to the divisor */
    expect_kink("a[i] % b[i]", 7.5, 2.0, 1.0, -3.0);
    expect_kink("a[i] % b[i]", -7.5, 2.0, 1.0, 3.0);
    expect_kink("a[i] % b[i]", 1.5, -4.0, 1.0, 0.0);
    /* copysign: +-1 as the signs agree, none to the sign's source */
    expect_kink("copysign(a[i], b[i])", 2.0, -3.0, -1.0, 0.0);
    expect_kink("copysign(a[i], b[i])", -2.0, -3.0, 1.0, 0.0);
    /* hypot: a / h and b / h, 0 at the origin */
    expect_kink("hypot(a[i], b[i])", -2.0, 0.0, -1.0, 0.0);
    expect_kink("hypot(a[i], b[i])", 0.0, 0.5, 0.0, 1.0);
    expect_kink("hypot(a[i], b[i])", 0.0, 0.0, 0.0, 0.0);
    /* piecewise constant */
    expect_kink("trunc(a[i]) + rint(b[i]) + step(a[i], b[i])", 1.25, -0.5, 0.0, 0.0);
    expect_kink("frac(a[i]) + lerp(a[i], b[i], 0.25)", 1.25, -0.5, 1.75, 0.25);
}
