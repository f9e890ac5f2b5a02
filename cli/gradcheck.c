/* gradcheck.c - K.grad against central finite differences in f64 (gradcheck.h,
 * docs/reference.md section 10, docs/cli.md).
 *
 * Algorithm:
 *   1. compile the source twice with K.grad (KC_GRAD_ALL, grad_only = K): promoted to f64
 *      (kc_options.promote_f64) and as written; JIT both into one CPU context (the f64
 *      IR is kept for the interpreter of step 5);
 *   2. make the inputs: bound ones from NAME=VALUE, the others random from --seed
 *      (float arrays uniform in [-1, 1] and f32-representable, so that both modules see
 *      the same point; integer arrays in [0, size); bools; integer scalars = size); an
 *      unbound array takes the shape of the first bound array of its rank, else size in
 *      every dimension; the trailing extents of a vector, matrix or struct parameter
 *      are always its own; random weights w_p in [-1, 1] for every differentiable array p;
 *   3. analytic, as a user runs it: run K (or the --steps sequence of K) of each module
 *      through a tape, then the tape's backward pass, which runs K.grad on the state K
 *      left with p.grad = w_p for arrays (scalars start at 0: L does not read them after
 *      K); that gives dL/d(input) (docs/reference.md section 8);
 *   4. numeric: for a sample of the input elements of the differentiable parameters
 *      (all of them up to max_checks, else evenly spaced, shifted within each gap so that
 *      every component of a vector or struct is reached), run the f64 K from the restored
 *      inputs with the element at x + h and at x - h and take
 *      sum_p w_p . (p+ - p-) / ((x + h) - (x - h)); summing the differences of the
 *      states, not the two losses, keeps the rounding of unaffected elements out of it;
 *   5. an element beyond tolerance is run in the IR interpreter (ir/interp.h) at x - h,
 *      x and x + h; when the loops' trip counts differ between them the step crossed a
 *      non-smooth point, and the element is reported as such instead of compared;
 *   6. report the worst relative error of each precision (gradcheck_relerr).
 * The f64 module's buffers live for the whole check and are rewritten from the host
 * copies before every run, so a kernel that updates its arrays in place always starts
 * from the same state. */
#include "gradcheck.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../compiler/driver.h"
#include "../include/kern.h"
#include "../ir/interp.h"
#include "../jit/jit.h"
#include "../runtime/npy.h"
#include "cmds.h"

void gradcheck_options_default(gradcheck_options *o) {
    memset(o, 0, sizeof *o);
    kc_options_default(&o->copts);
    o->seed = 1;
    o->size = 8;
    o->eps = 1e-6;
    o->rtol = 1e-6;
    o->rtol_f32 = 1e-2;
    o->max_checks = 200;
    o->device = -1;
}

bool kernc_int_syntax(const char *s) {
    if (*s == '-')
        s++;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
        if (!*s)
            return false;
        for (; *s; s++)
            if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f') || (*s >= 'A' && *s <= 'F')))
                return false;
        return true;
    }
    if (!*s || (s[0] == '0' && s[1]))
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

double gradcheck_relerr(double a, double f) {
    if (isnan(a) || isnan(f))
        return isnan(a) && isnan(f) ? 0 : INFINITY;
    if (isinf(a) || isinf(f))
        return a == f ? 0 : INFINITY;
    return fabs(a - f) / fmax(fmax(fabs(a), fabs(f)), GRADCHECK_FLOOR);
}

/* ---- State ------------------------------------------------------------------------- */

typedef struct gc_param {
    kern_param_info info; /* as declared (the module as written) */
    bool is_float, diff;
    int64_t shape[KERN_MAX_DIMS];
    int64_t count;        /* elements; 1 for a scalar */
    double *f;            /* float parameters: the values */
    void *raw;            /* other arrays: the bytes, in info.dtype */
    kern_arg scalar;      /* other scalars */
    double *w;            /* differentiable arrays: the weights w_p */
    const char *wpath;    /* P.grad=PATH.npy: the weights' file */
    kern_buffer *b;       /* arrays: the f64 module's buffer */
    double *plus, *minus; /* differentiable arrays: state after the runs at x + h, x - h */
    double *g64, *g32;    /* differentiable: K.grad's result in each precision */
    double *v;            /* differentiable: the tangent K.jvp starts from */
    double *t64, *t32;    /* differentiable: K.jvp's tangent of the state after */
    bool *intword;        /* a struct array stored as float words: which of the struct's
                             words (the last dimension) hold integer fields; those are not
                             perturbed nor summed (their bits are not numbers); NULL: none */
    int nwords;           /* 0: no integer words */
} gc_param;

/* Reads the leaf types of the declared type `view` (docs/runtime.md: `P{a:vec3,n:i32}[]`)
 * into p->intword; false when the view is not a struct with integer fields. */
static const char *view_leaves(gc_param *p, const char *s, int *k) {
    const char *name = s;
    while (*s && *s != '{' && *s != ',' && *s != '}' && *s != '[')
        s++;
    if (*s == '{') { /* a struct: name{field:type,...} */
        s++;
        while (*s && *s != '}') {
            while (*s && *s != ':')
                s++;
            if (!*s || !(s = view_leaves(p, s + 1, k)))
                return NULL;
            if (*s == ',')
                s++;
        }
        return *s == '}' ? s + 1 : NULL;
    }
    const kern_type *v = ty_vector_named(name, (int)(s - name));
    const kern_type *t = v ? v->elem : ty_parse(name, (int)(s - name));
    if (!t)
        return NULL;
    for (int i = 0; i < (v ? ty_leaves(v) : 1); i++, (*k)++)
        if (*k < p->info.tail[0])
            p->intword[*k] = !ty_is_float(t);
    return s;
}

static void find_integer_words(gc_param *p) {
    p->nwords = 0;
    if (!p->info.type_name || p->info.ntail != 1 || !strchr(p->info.type_name, '{'))
        return;
    p->intword = calloc((size_t)p->info.tail[0] + 1, sizeof *p->intword); /* a struct's words */
    if (!p->intword)
        return;
    int k = 0;
    if (!view_leaves(p, p->info.type_name, &k) || k != p->info.tail[0])
        return;
    for (int i = 0; i < k; i++)
        if (p->intword[i])
            p->nwords = k;
}

static bool integer_word(const gc_param *p, int64_t e) {
    return p->nwords > 0 && p->intword && p->intword[e % p->nwords];
}

typedef struct gc {
    const gradcheck_options *o;
    const char *path, *name; /* name: K */
    FILE *err;
    kern_context *ctx;
    kern_kernel *k64, *gk64, *k32, *gk32;
    kern_kernel *jk64, *jk32; /* K.jvp, NULL when forward mode refused K (res->jvp_skipped) */
    ir_module *ir64; /* the f64 module's IR, for the interpreter */
    gc_param *p;
    int np;
    int step; /* the step argument's parameter, or -1 */
    uint64_t rng;
} gc;

static gradcheck_status gc_fail(gc *g, gradcheck_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static gradcheck_status gc_fail(gc *g, gradcheck_status st, const char *fmt, ...) {
    if (g->err) {
        va_list ap;
        va_start(ap, fmt);
        fputs("kernc gradcheck: error: ", g->err);
        vfprintf(g->err, fmt, ap);
        fputc('\n', g->err);
        va_end(ap);
    }
    return st;
}

/* splitmix64 */
static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1], rounded to f32 so that both precisions run at the same point. */
static double rng_pm1(uint64_t *s) {
    double u = (double)(rng_next(s) >> 11) * 0x1p-53;
    return (double)(float)(2 * u - 1);
}

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p)
        kern_oom(n * size);
    return p;
}

/* ---- Compiling ---------------------------------------------------------------------- */

/* Compiles with K.grad and JITs into g->ctx; diagnostics go to err when print_diags. */
static gradcheck_status compile(gc *g, const char *text, size_t len, bool promote, bool print_diags,
                                kern_module **out, ir_module **keep) {
    kc_ctx *cc = kc_ctx_new();
    cc->opts = g->o->copts;
    /* random inputs may index out of range: check, never corrupt (the default code path,
     * SIMD included, as kern.gradcheck in Python runs it) */
    cc->opts.checks = true;
    cc->opts.grad = KC_GRAD_ALL;
    cc->opts.grad_only = g->name;
    cc->opts.jvp = true; /* K.jvp too, when forward mode can build it */
    cc->opts.promote_f64 = promote;
    ir_module *m = kc_compile_source(cc, g->path, text, len);
    if (g->err && (print_diags || !m))
        diag_print_all(g->err, &cc->diags);
    gradcheck_status st = GRADCHECK_OK;
    if (!m) {
        st = GRADCHECK_USER;
    } else {
        if (jit_module_from_ir(g->ctx, m, &cc->opts, g->path, out) != KERN_OK)
            st = gc_fail(g, GRADCHECK_USER, "%s", kern_context_last_error(g->ctx));
        if (keep)
            *keep = m;
        else
            ir_module_free(m);
    }
    kc_ctx_free(cc);
    return st;
}

static gradcheck_status find_kernels(gc *g, kern_module *mod, kern_kernel **k, kern_kernel **gk,
                                     kern_kernel **jk) {
    if (kern_kernel_find(mod, g->name, k) != KERN_OK) {
        int nk = kern_module_kernel_count(mod);
        const char **names = xcalloc((size_t)nk + 1, sizeof *names);
        for (int i = 0; i < nk; i++)
            names[i] = kern_module_kernel_name(mod, i);
        char hint[300];
        kernc_kernel_hint(hint, sizeof hint, g->name, names, nk);
        free(names);
        return gc_fail(g, GRADCHECK_USER, "no kernel named '%s' in %s%s%s", g->name, g->path,
                       nk ? "" : ", which has no kernels", hint);
    }
    char gname[512];
    snprintf(gname, sizeof gname, "%s.grad", g->name);
    if (kern_kernel_find(mod, gname, gk) != KERN_OK)
        return gc_fail(g, GRADCHECK_USER, "no gradient kernel '%s' was built for %s", gname,
                       g->path);
    snprintf(gname, sizeof gname, "%s.jvp", g->name);
    if (kern_kernel_find(mod, gname, jk) != KERN_OK)
        *jk = NULL; /* forward mode refused K: reported, not an error of K.grad */
    return GRADCHECK_OK;
}

/* ---- Inputs ------------------------------------------------------------------------ */

static bool parse_scalar(const char *s, kern_dtype t, double *f, kern_arg *a) {
    char *end;
    errno = 0;
    if (t == KERN_F32 || t == KERN_F64) {
        *f = strtod(s, &end);
        return *s && !*end;
    }
    const char *why; /* the same rules as kernc run's */
    return kernc_parse_scalar(s, t, a, &why);
}

static double *to_doubles(const void *data, kern_dtype t, int64_t n) {
    double *d = xcalloc((size_t)n, sizeof *d);
    for (int64_t i = 0; i < n; i++)
        d[i] = t == KERN_F32 ? (double)((const float *)data)[i] : ((const double *)data)[i];
    return d;
}

/* Values of doubles in dtype t (f32 or f64), malloc'd. */
static void *pack(const double *f, int64_t n, kern_dtype t) {
    if (t == KERN_F64) {
        double *d = xcalloc((size_t)n, sizeof *d);
        memcpy(d, f, (size_t)n * sizeof *d);
        return d;
    }
    float *d = xcalloc((size_t)n, sizeof *d);
    for (int64_t i = 0; i < n; i++)
        d[i] = (float)f[i];
    return d;
}

static gradcheck_status read_npy(gc *g, const char *name, const char *path, kern_npy *arr) {
    char err[512];
    kern_status st = kern_npy_read(path, arr, err, sizeof err);
    if (st == KERN_OK)
        return GRADCHECK_OK;
    return gc_fail(g, st == KERN_ERR_NOT_FOUND || st == KERN_ERR_IO ? GRADCHECK_IO : GRADCHECK_USER,
                   "%s=%s: %s", name, path, err);
}

/* Bound value (or NULL) of parameter p; an unbound array takes the shape `like` (NULL:
 * size in every dimension). */
static gradcheck_status bind_param(gc *g, gc_param *p, const char *value, const int64_t *like) {
    kern_param_info *in = &p->info;
    if (!in->is_array) {
        p->count = 1;
        if (p->is_float) {
            p->f = xcalloc(1, sizeof *p->f);
            if (value && !parse_scalar(value, in->dtype, p->f, &p->scalar))
                return gc_fail(g, GRADCHECK_USER, "%s=%s: not a number (parameter '%s' is %s)",
                               in->name, value, in->name, kern_dtype_name(in->dtype));
            if (!value)
                p->f[0] = rng_pm1(&g->rng);
        } else if (value) {
            double unused;
            if (!parse_scalar(value, in->dtype, &unused, &p->scalar))
                return gc_fail(g, GRADCHECK_USER, "%s=%s: not a value of the parameter's type %s",
                               in->name, value, kern_dtype_name(in->dtype));
        } else {
            int s = g->o->size;
            p->scalar = in->dtype == KERN_BOOL  ? kern_arg_bool(rng_next(&g->rng) & 1)
                        : in->dtype == KERN_I32 ? kern_arg_i32(s)
                        : in->dtype == KERN_U32 ? kern_arg_u32((uint32_t)s)
                                                : kern_arg_i64(s);
        }
        return GRADCHECK_OK;
    }
    if (value && kernc_is_inline(in, value)) { /* g=0.1,0.2,0.3 for a by-value vec3 */
        char err[256];
        void *data = kernc_parse_inline(in, value, &p->count, err, sizeof err);
        if (!data)
            return gc_fail(g, GRADCHECK_USER, "%s=%s: %s", in->name, value, err);
        for (int d = 0; d < KERN_MAX_DIMS; d++)
            p->shape[d] = d < in->rank ? in->tail[d] : 1;
        if (p->is_float) {
            p->f = to_doubles(data, in->dtype, p->count);
            free(data);
        } else {
            p->raw = data;
        }
        return GRADCHECK_OK;
    }
    if (value) {
        kern_npy arr;
        gradcheck_status st = read_npy(g, in->name, value, &arr);
        if (st)
            return st;
        char why[1024];
        if (!kernc_npy_fields_match(in, &arr, why, sizeof why)) {
            st = gc_fail(g, GRADCHECK_USER, "%s=%s: %s", in->name, value, why);
            kern_npy_free(&arr);
            return st;
        }
        if (arr.dtype != in->dtype || arr.rank != in->rank ||
            !kernc_tail_fits(in, arr.rank, arr.shape)) {
            char shape[96] = "";
            if (in->ntail > 0)
                kernc_shape_text(shape, sizeof shape, in);
            if (in->ntail > 0)
                st = gc_fail(g, GRADCHECK_USER,
                             "%s=%s: the file holds %s with %d dimension%s, but parameter '%s' "
                             "is %s, in memory %s of shape %s",
                             in->name, value, kern_dtype_name(arr.dtype), arr.rank,
                             arr.rank == 1 ? "" : "s", in->name, in->type_name,
                             kern_dtype_name(in->dtype), shape);
            else
                st = gc_fail(g, GRADCHECK_USER,
                             "%s=%s: the file holds %s with %d dimension%s, but parameter '%s' "
                             "is %s with %d",
                             in->name, value, kern_dtype_name(arr.dtype), arr.rank,
                             arr.rank == 1 ? "" : "s", in->name, kern_dtype_name(in->dtype),
                             in->rank);
            kern_npy_free(&arr);
            return st;
        }
        memcpy(p->shape, arr.shape, sizeof p->shape);
        p->count = arr.count;
        if (p->is_float) {
            p->f = to_doubles(arr.data, arr.dtype, arr.count);
            kern_npy_free(&arr);
        } else {
            p->raw = arr.data; /* taken over */
        }
        return GRADCHECK_OK;
    }
    p->count = 1;
    for (int d = 0; d < KERN_MAX_DIMS; d++) {
        int t = d - (in->rank - in->ntail); /* a vector's, matrix's or struct's extents */
        p->shape[d] = d >= in->rank ? 1 : t >= 0 ? in->tail[t] : like ? like[d] : g->o->size;
        p->count *= p->shape[d];
    }
    if (p->is_float) {
        p->f = xcalloc((size_t)p->count, sizeof *p->f);
        for (int64_t i = 0; i < p->count; i++)
            p->f[i] = rng_pm1(&g->rng);
        return GRADCHECK_OK;
    }
    size_t es = kern_dtype_size(in->dtype);
    unsigned char *raw = xcalloc((size_t)p->count, es);
    for (int64_t i = 0; i < p->count; i++) {
        uint64_t r = rng_next(&g->rng);
        int64_t v = in->dtype == KERN_BOOL ? (int64_t)(r & 1) : (int64_t)(r % (uint64_t)g->o->size);
        if (in->dtype == KERN_BOOL)
            raw[i] = (unsigned char)v;
        else if (in->dtype == KERN_I64)
            ((int64_t *)raw)[i] = v;
        else if (in->dtype == KERN_U32)
            ((uint32_t *)raw)[i] = (uint32_t)v;
        else
            ((int32_t *)raw)[i] = (int32_t)v;
    }
    p->raw = raw;
    return GRADCHECK_OK;
}

static gradcheck_status make_weights(gc *g, gc_param *p) {
    if (!p->diff || !p->info.is_array)
        return GRADCHECK_OK;
    if (!p->wpath) {
        p->w = xcalloc((size_t)p->count, sizeof *p->w);
        for (int64_t i = 0; i < p->count; i++)
            p->w[i] = rng_pm1(&g->rng);
        return GRADCHECK_OK;
    }
    char name[300];
    snprintf(name, sizeof name, "%s.grad", p->info.name);
    kern_npy arr;
    gradcheck_status st = read_npy(g, name, p->wpath, &arr);
    if (st)
        return st;
    bool same = (arr.dtype == KERN_F32 || arr.dtype == KERN_F64) && arr.rank == p->info.rank;
    for (int d = 0; same && d < KERN_MAX_DIMS; d++)
        same = arr.shape[d] == p->shape[d];
    if (!same)
        st = gc_fail(g, GRADCHECK_USER,
                     "%s=%s: the weights must be a float array of the shape of '%s'", name,
                     p->wpath, p->info.name);
    else
        p->w = to_doubles(arr.data, arr.dtype, arr.count);
    kern_npy_free(&arr);
    return st;
}

static gradcheck_status setup_params(gc *g, const char *const *bindings, int nb) {
    g->np = kern_kernel_param_count(g->k32);
    g->p = xcalloc((size_t)g->np, sizeof *g->p);
    for (int i = 0; i < g->np; i++) {
        gc_param *p = &g->p[i];
        kern_kernel_param(g->k32, i, &p->info);
        p->is_float = p->info.dtype == KERN_F32 || p->info.dtype == KERN_F64;
        p->diff = p->is_float && !p->info.nograd;
        find_integer_words(p);
    }
    gradcheck_status st = GRADCHECK_OK;
    const char **values = xcalloc((size_t)g->np, sizeof *values);
    for (int j = 0; j < nb && !st; j++) {
        const char *b = bindings[j], *eq = strchr(b, '=');
        if (!eq || eq == b || !eq[1]) {
            st = gc_fail(g, GRADCHECK_USAGE, "binding '%s' is not of the form NAME=VALUE", b);
            break;
        }
        size_t n = (size_t)(eq - b);
        bool weights = n > 5 && !strncmp(eq - 5, ".grad", 5);
        size_t base = weights ? n - 5 : n;
        int found = -1;
        for (int i = 0; i < g->np; i++)
            if (strlen(g->p[i].info.name) == base && !strncmp(g->p[i].info.name, b, base))
                found = i;
        if (found < 0 || (weights && !(g->p[found].diff && g->p[found].info.is_array))) {
            char hint[300] = "", *name = strndup(b, n);
            if (found < 0 && name)
                kernc_param_hint(hint, sizeof hint, g->k32, name);
            free(name);
            st = gc_fail(g, GRADCHECK_USER,
                         found < 0 ? "kernel '%s' has no parameter named '%.*s'%s"
                                   : "kernel '%s': '%.*s' has no weights (only differentiable "
                                     "arrays do)%s",
                         g->name, (int)n, b, hint);
            break;
        }
        const char **slot = weights ? &g->p[found].wpath : &values[found];
        if (*slot) {
            st = gc_fail(g, GRADCHECK_USAGE, "parameter '%.*s' is bound twice", (int)n, b);
            break;
        }
        *slot = eq + 1;
    }
    g->step = -1;
    for (int i = 0; i < g->np && !st && g->o->steps; i++)
        if (!strcmp(g->p[i].info.name, g->o->step_arg))
            g->step = i;
    if (!st && g->o->steps) {
        const kern_param_info *in = g->step >= 0 ? &g->p[g->step].info : NULL;
        char hint[300];
        if (!in)
            st = gc_fail(g, GRADCHECK_USER,
                         "--step-arg %s: kernel '%s' has no parameter named '%s'%s", g->o->step_arg,
                         g->name, g->o->step_arg,
                         kernc_param_hint(hint, sizeof hint, g->k32, g->o->step_arg));
        else if (in->is_array ||
                 (in->dtype != KERN_I32 && in->dtype != KERN_U32 && in->dtype != KERN_I64))
            st = gc_fail(g, GRADCHECK_USER,
                         "--step-arg %s: parameter '%s' of kernel '%s' is not an integer scalar",
                         in->name, in->name, g->name);
        else if (values[g->step])
            st =
                gc_fail(g, GRADCHECK_USAGE, "%s=%s: the step argument is set by --steps, not bound",
                        in->name, values[g->step]);
    }
    /* the bound parameters first: unbound arrays take the shape of a bound one */
    for (int i = 0; i < g->np && !st; i++)
        if (values[i])
            st = bind_param(g, &g->p[i], values[i], NULL);
    for (int i = 0; i < g->np && !st; i++) {
        if (values[i])
            continue;
        const int64_t *like = NULL;
        for (int j = 0; j < g->np && !like; j++)
            if (values[j] && g->p[j].info.is_array && g->p[j].info.rank == g->p[i].info.rank &&
                !kernc_by_value(&g->p[j].info)) /* a by-value vector's shape is no size */
                like = g->p[j].shape;
        st = bind_param(g, &g->p[i], NULL, like);
    }
    for (int i = 0; i < g->np && !st; i++)
        st = make_weights(g, &g->p[i]);
    free(values);
    return st;
}

/* ---- Runs -------------------------------------------------------------------------- */

static kern_status buffer_of(gc *g, const gc_param *p, kern_dtype ft, kern_buffer **out) {
    kern_dtype t = p->is_float ? ft : p->info.dtype;
    void *packed = p->is_float ? pack(p->f, p->count, t) : NULL;
    kern_status st =
        kern_buffer_create(g->ctx, t, p->info.rank, p->shape, p->is_float ? packed : p->raw, out);
    free(packed);
    return st;
}

static kern_arg scalar_of(const gc_param *p, kern_dtype ft, double x) {
    if (!p->is_float)
        return p->scalar;
    return ft == KERN_F64 ? kern_arg_f64(x) : kern_arg_f32((float)x);
}

/* The step argument of launch s of a --steps sequence: step_start + s. */
static kern_arg step_value(const gc *g, const gc_param *p, int s) {
    int64_t t = g->o->step_start + s;
    return p->info.dtype == KERN_I32   ? kern_arg_i32((int32_t)t)
           : p->info.dtype == KERN_U32 ? kern_arg_u32((uint32_t)t)
                                       : kern_arg_i64(t);
}

/* K as the user runs it: once, or --steps times with the step argument = step_start,
 * step_start + 1, ...; through the tape when there is one. */
static gradcheck_status forward(gc *g, kern_kernel *k, kern_arg *args, kern_tape *tape) {
    int steps = g->o->steps > 0 ? g->o->steps : 1;
    kern_status st = KERN_OK;
    for (int s = 0; s < steps && st == KERN_OK; s++) {
        if (g->step >= 0)
            args[g->step] = step_value(g, &g->p[g->step], s);
        st = tape ? kern_tape_launch(tape, k, args, g->np) : kern_launch(k, args, g->np);
    }
    if (st == KERN_OK)
        st = kern_sync(g->ctx);
    if (st != KERN_OK)
        return gc_fail(g, GRADCHECK_USER,
                       "%s\n(the inputs that were not bound are random: integer scalars = "
                       "--size, integer arrays in [0, size); bind NAME=VALUE to choose them, or\n"
                       "give a time step's range: --steps A..B --step-arg NAME)",
                       kern_context_last_error(g->ctx));
    return GRADCHECK_OK;
}

static gradcheck_status read_doubles(gc *g, kern_buffer *b, kern_dtype t, double *out, int64_t n) {
    size_t bytes = kern_buffer_bytes(b);
    void *data = xcalloc(bytes, 1);
    kern_status st = kern_buffer_read(b, data, bytes);
    if (st == KERN_OK)
        for (int64_t i = 0; i < n; i++)
            out[i] = t == KERN_F32 ? (double)((float *)data)[i] : ((double *)data)[i];
    free(data);
    if (st != KERN_OK)
        return gc_fail(g, GRADCHECK_USER, "%s", kern_context_last_error(g->ctx));
    return GRADCHECK_OK;
}

/* The bytes of buffer b, malloc'd (NULL when it cannot be read). */
static void *snapshot(kern_buffer *b) {
    size_t bytes = kern_buffer_bytes(b);
    void *data = xcalloc(bytes, 1);
    if (kern_buffer_read(b, data, bytes) != KERN_OK) {
        free(data);
        return NULL;
    }
    return data;
}

/* args[i] for parameter i in one precision: its scalar, or a new buffer bufs[i] holding it. */
static gradcheck_status input_arg(gc *g, int i, bool f64, kern_arg *args, kern_buffer **bufs) {
    gc_param *p = &g->p[i];
    kern_dtype ft = f64 ? KERN_F64 : p->info.dtype;
    if (!p->info.is_array)
        args[i] = scalar_of(p, ft, p->is_float ? p->f[0] : 0);
    else if (buffer_of(g, p, ft, &bufs[i]) != KERN_OK)
        return gc_fail(g, GRADCHECK_USER, "%s", kern_context_last_error(g->ctx));
    else
        args[i] = kern_arg_buffer(bufs[i]);
    return GRADCHECK_OK;
}

/* K (or its --steps sequence) of one precision on the inputs through a tape, then the
 * tape's backward pass: K.grad on the state K left, with p.grad = w_p. The adjoints land
 * in p->g64 / p->g32, the name of a primal array that K.grad changed in
 * res->primal_written. */
static gradcheck_status run_grad(gc *g, bool f64, gradcheck_result *res) {
    kern_kernel *k = f64 ? g->k64 : g->k32;
    kern_arg *args = xcalloc((size_t)g->np, sizeof *args);
    kern_buffer **bufs = xcalloc((size_t)g->np, sizeof *bufs);
    kern_buffer **grads = xcalloc((size_t)g->np, sizeof *grads);
    void **after = xcalloc((size_t)g->np, sizeof *after); /* the state K left */
    kern_tape *tape = NULL;
    gradcheck_status st = GRADCHECK_OK;
    if (kern_tape_create(g->ctx, &tape) != KERN_OK)
        st = gc_fail(g, GRADCHECK_USER, "%s", kern_context_last_error(g->ctx));
    for (int i = 0; i < g->np && !st; i++)
        st = input_arg(g, i, f64, args, bufs);
    if (!st)
        st = forward(g, k, args, tape);
    for (int i = 0; i < g->np && !st; i++) {
        gc_param *p = &g->p[i];
        if (!p->info.is_array)
            continue;
        after[i] = snapshot(bufs[i]);
        if (!p->diff)
            continue;
        kern_dtype ft = f64 ? KERN_F64 : p->info.dtype;
        void *w = pack(p->w, p->count, ft);
        if (kern_buffer_create(g->ctx, ft, p->info.rank, p->shape, w, &grads[i]) != KERN_OK ||
            kern_tape_set_grad(tape, bufs[i], grads[i]) != KERN_OK)
            st = gc_fail(g, GRADCHECK_USER, "%s", kern_context_last_error(g->ctx));
        free(w);
    }
    if (!st && (kern_tape_backward(tape) != KERN_OK || kern_sync(g->ctx) != KERN_OK))
        st = gc_fail(g, GRADCHECK_USER, "%s", kern_context_last_error(g->ctx));
    for (int i = 0; i < g->np && !st; i++) {
        gc_param *p = &g->p[i];
        if (p->info.is_array && !res->primal_written[0]) {
            void *now = snapshot(bufs[i]);
            if (!now || !after[i] || memcmp(now, after[i], kern_buffer_bytes(bufs[i])) != 0)
                snprintf(res->primal_written, sizeof res->primal_written, "%s", p->info.name);
            free(now);
        }
        if (!p->diff)
            continue;
        double **out = f64 ? &p->g64 : &p->g32;
        *out = xcalloc((size_t)p->count, sizeof **out);
        if (p->info.is_array) {
            st = read_doubles(g, grads[i], f64 ? KERN_F64 : p->info.dtype, *out, p->count);
            continue;
        }
        for (int r = 0; r < kern_tape_record_count(tape) && !st; r++) {
            double d;
            if (kern_tape_scalar_grad(tape, r, i, &d) != KERN_OK)
                st = gc_fail(g, GRADCHECK_USER, "%s", kern_context_last_error(g->ctx));
            else
                (*out)[0] += d;
        }
    }
    kern_tape_destroy(tape);
    for (int i = 0; i < g->np; i++) {
        kern_buffer_release(bufs[i]);
        kern_buffer_release(grads[i]);
        free(after[i]);
    }
    free(after);
    free(grads);
    free(bufs);
    free(args);
    return st;
}

/* The f64 K from the inputs with element e of parameter q at x (q < 0: none) and every
 * differentiable input moved by dh times its tangent p->v; the differentiable arrays'
 * states after it land in `plus` or `minus`. */
static gradcheck_status run_primal_along(gc *g, int q, int64_t e, double x, double dh, bool plus) {
    kern_arg *args = xcalloc((size_t)g->np, sizeof *args);
    gradcheck_status st = GRADCHECK_OK;
    for (int i = 0; i < g->np && !st; i++) {
        gc_param *p = &g->p[i];
        double old = i == q ? p->f[e] : 0;
        if (i == q)
            p->f[e] = x;
        double *moved = NULL;
        if (dh != 0 && p->diff) {
            moved = xcalloc((size_t)p->count, sizeof *moved);
            for (int64_t j = 0; j < p->count; j++)
                moved[j] = p->f[j] + (integer_word(p, j) ? 0 : dh * p->v[j]);
        }
        const double *f = moved ? moved : p->f;
        if (!p->info.is_array) {
            args[i] = scalar_of(p, KERN_F64, p->is_float ? f[0] : 0);
        } else {
            kern_status ks = p->is_float
                                 ? kern_buffer_write(p->b, f, (size_t)p->count * sizeof(double))
                                 : kern_buffer_write(p->b, p->raw, kern_buffer_bytes(p->b));
            if (ks != KERN_OK)
                st = gc_fail(g, GRADCHECK_USER, "%s", kern_context_last_error(g->ctx));
            args[i] = kern_arg_buffer(p->b);
        }
        free(moved);
        if (i == q)
            p->f[e] = old;
    }
    if (!st)
        st = forward(g, g->k64, args, NULL);
    for (int i = 0; i < g->np && !st; i++) {
        gc_param *p = &g->p[i];
        if (p->diff && p->info.is_array)
            st = read_doubles(g, p->b, KERN_F64, plus ? p->plus : p->minus, p->count);
    }
    free(args);
    return st;
}

static gradcheck_status run_primal(gc *g, int q, int64_t e, double x, bool plus) {
    return run_primal_along(g, q, e, x, 0, plus);
}

/* The loop-trip fingerprint (ir_interp_options.loop_trips) of the f64 K, in the
 * interpreter, from the inputs with element e of parameter q at x, summed over the
 * steps; false when the interpreter stops with an error. */
static bool trips_along(gc *g, int q, int64_t e, double x, double dh, uint64_t *out) {
    ir_interp_arg *args = xcalloc((size_t)g->np, sizeof *args);
    void **data = xcalloc((size_t)g->np, sizeof *data);
    bool ok = true;
    for (int i = 0; i < g->np; i++) {
        gc_param *p = &g->p[i];
        kern_tykind kind = (kern_tykind)(p->is_float ? KERN_F64 : p->info.dtype);
        if (p->info.is_array) {
            size_t es = p->is_float ? sizeof(double) : kern_dtype_size(p->info.dtype);
            data[i] = xcalloc((size_t)p->count, es);
            memcpy(data[i], p->is_float ? (void *)p->f : p->raw, (size_t)p->count * es);
            if (i == q)
                ((double *)data[i])[e] = x;
            for (int64_t j = 0; dh != 0 && p->diff && j < p->count; j++)
                ((double *)data[i])[j] += integer_word(p, j) ? 0 : dh * p->v[j];
            args[i] = ir_interp_array(kind, data[i], p->info.rank, p->shape[0], p->shape[1],
                                      p->shape[2], p->shape[3]);
            for (int d = p->info.rank; d < KERN_MAX_RANK; d++)
                args[i].shape[d] = 0;
        } else if (p->is_float) {
            args[i] = ir_interp_float(kind, (i == q ? x : p->f[0]) + (p->diff ? dh * p->v[0] : 0));
        } else {
            const kern_arg *a = &p->scalar;
            args[i] = ir_interp_int(kind, a->dtype == KERN_BOOL  ? a->u.b
                                          : a->dtype == KERN_I32 ? a->u.i32
                                          : a->dtype == KERN_U32 ? a->u.u32
                                                                 : a->u.i64);
        }
    }
    *out = 0;
    int steps = g->o->steps > 0 ? g->o->steps : 1;
    for (int s = 0; s < steps && ok; s++) {
        if (g->step >= 0)
            args[g->step].i = g->o->step_start + s;
        ir_interp_options io = {0};
        char err[256];
        ok = ir_interp_run_opts(g->ir64, g->name, args, g->np, &io, err, sizeof err);
        *out += io.loop_trips;
    }
    for (int i = 0; i < g->np; i++)
        free(data[i]);
    free(data);
    free(args);
    return ok;
}

/* Whether a step of +-h at element e of parameter q changes how often some loop of K
 * runs (a non-smooth point of K, where finite differences mean nothing). */
/* trips_along without a direction */
static bool trips_at(gc *g, int q, int64_t e, double x, uint64_t *out) {
    return trips_along(g, q, e, x, 0, out);
}

static bool nonsmooth(gc *g, int q, int64_t e, double xm, double x, double xp) {
    uint64_t a, b, c;
    return trips_at(g, q, e, xm, &a) && trips_at(g, q, e, x, &b) && trips_at(g, q, e, xp, &c) &&
           (a != b || b != c);
}

static void describe(char *buf, size_t size, const gc_param *p, int64_t e) {
    if (!p->info.is_array) {
        snprintf(buf, size, "%s", p->info.name);
        return;
    }
    int64_t idx[KERN_MAX_DIMS];
    for (int d = p->info.rank - 1; d >= 0; d--) {
        idx[d] = e % p->shape[d];
        e /= p->shape[d];
    }
    int n = snprintf(buf, size, "%s[", p->info.name);
    for (int d = 0; d < p->info.rank && n > 0 && (size_t)n < size; d++)
        n += snprintf(buf + n, size - (size_t)n, "%s%lld", d ? ", " : "", (long long)idx[d]);
    if (n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "]");
}

static void note(gradcheck_worst *w, double a, double fd, const gc_param *p, int64_t e) {
    double err = gradcheck_relerr(a, fd);
    if (err <= w->err) /* the first of equal errors stays */
        return;
    w->err = err;
    w->analytic = a;
    w->fd = fd;
    describe(w->where, sizeof w->where, p, e);
}

/* ---- Forward mode: K.jvp ----------------------------------------------------------- */

/* K.jvp (or its --steps sequence) of one precision from the inputs, the tangents starting
 * at p->v; the tangents of the state after land in p->t64 / p->t32. */
static gradcheck_status run_jvp(gc *g, bool f64) {
    kern_kernel *k = f64 ? g->jk64 : g->jk32;
    int n = kern_kernel_param_count(k);
    kern_arg *args = xcalloc((size_t)n, sizeof *args);
    kern_buffer **bufs = xcalloc((size_t)n, sizeof *bufs);
    gradcheck_status st = GRADCHECK_OK;
    int t = g->np;
    for (int i = 0; i < g->np && !st; i++) {
        gc_param *p = &g->p[i];
        kern_dtype ft = f64 ? KERN_F64 : p->info.dtype;
        st = input_arg(g, i, f64, args, bufs);
        if (st || !p->diff)
            continue;
        int64_t one = 1;
        void *v = pack(p->v, p->count, ft);
        if (kern_buffer_create(g->ctx, ft, p->info.is_array ? p->info.rank : 1,
                               p->info.is_array ? p->shape : &one, v, &bufs[t]) != KERN_OK)
            st = gc_fail(g, GRADCHECK_USER, "%s", kern_context_last_error(g->ctx));
        else
            args[t] = kern_arg_buffer(bufs[t]);
        free(v);
        t++;
    }
    int steps = g->o->steps > 0 ? g->o->steps : 1;
    for (int s = 0; s < steps && !st; s++) {
        if (g->step >= 0)
            args[g->step] = step_value(g, &g->p[g->step], s);
        if (kern_launch(k, args, n) != KERN_OK)
            st = gc_fail(g, GRADCHECK_USER, "%s", kern_context_last_error(g->ctx));
    }
    if (!st && kern_sync(g->ctx) != KERN_OK)
        st = gc_fail(g, GRADCHECK_USER, "%s", kern_context_last_error(g->ctx));
    t = g->np;
    for (int i = 0; i < g->np && !st; i++) {
        gc_param *p = &g->p[i];
        if (!p->diff)
            continue;
        double **out = f64 ? &p->t64 : &p->t32;
        *out = xcalloc((size_t)p->count, sizeof **out);
        st = read_doubles(g, bufs[t++], f64 ? KERN_F64 : p->info.dtype, *out, p->count);
    }
    for (int i = 0; i < n; i++)
        kern_buffer_release(bufs[i]);
    free(bufs);
    free(args);
    return st;
}

/* K.jvp against central finite differences of the f64 K along the tangent v (every
 * differentiable input at once), element by element of the state after, and against
 * K.grad by the dot-product identity <K.jvp(v), w> = <v, K.grad(w)> in f64. */
static gradcheck_status check_jvp(gc *g, gradcheck_result *res) {
    res->jvp.f64.err = res->jvp.f32.err = -1;
    if (!g->jk64 || !g->jk32) {
        const ir_kernel *k = ir_kernel_find(g->ir64, g->name);
        snprintf(res->jvp.skipped, sizeof res->jvp.skipped, "%s",
                 k && k->jvp_error ? k->jvp_error : "forward mode did not build it");
        return GRADCHECK_OK;
    }
    res->jvp.checked = true;
    for (int i = 0; i < g->np; i++) {
        gc_param *p = &g->p[i];
        if (!p->diff)
            continue;
        p->v = xcalloc((size_t)p->count, sizeof *p->v);
        for (int64_t j = 0; j < p->count; j++)
            p->v[j] = integer_word(p, j) ? 0 : (double)(float)rng_pm1(&g->rng);
    }
    gradcheck_status st = run_jvp(g, true);
    if (!st)
        st = run_jvp(g, false);
    double h = g->o->eps;
    for (int i = 0; i < g->np; i++)
        for (int64_t j = 0; g->p[i].diff && j < g->p[i].count; j++)
            h = fmin(h, g->o->eps * fmax(1, fabs(g->p[i].f[j])));
    /* Richardson's extrapolation of two central differences, (4 D(h/2) - D(h)) / 3: every
     * input moves at once, so the h^2 term of one difference sums the curvature along v
     * over all of them */
    double **half = xcalloc((size_t)g->np, sizeof *half);
    for (int r = 0; r < 2 && !st; r++) {
        double hr = r ? h : h / 2;
        st = run_primal_along(g, -1, 0, 0, hr, true);
        if (!st)
            st = run_primal_along(g, -1, 0, 0, -hr, false);
        for (int i = 0; i < g->np && !st; i++) {
            gc_param *p = &g->p[i];
            if (!p->diff || !p->info.is_array)
                continue;
            if (!r)
                half[i] = xcalloc((size_t)p->count, sizeof **half);
            for (int64_t j = 0; j < p->count; j++) {
                double d = (p->plus[j] - p->minus[j]) / (2 * hr);
                half[i][j] = r ? (4 * half[i][j] - d) / 3 : d;
            }
        }
    }
    double lhs = 0, rhs = 0, mag = 0;
    for (int i = 0; i < g->np && !st; i++) {
        gc_param *p = &g->p[i];
        if (!p->diff)
            continue;
        for (int64_t j = 0; j < p->count; j++) {
            if (integer_word(p, j))
                continue;
            /* K leaves a scalar as it is: its tangent passes through */
            double fd = p->info.is_array ? half[i][j] : p->v[j];
            note(&res->jvp.f64, p->t64[j], fd, p, j);
            note(&res->jvp.f32, p->t32[j], fd, p, j);
            res->jvp.elements++;
            rhs += p->v[j] * p->g64[j];
            mag += fabs(p->v[j] * p->g64[j]);
            if (p->info.is_array) {
                lhs += p->w[j] * p->t64[j];
                mag += fabs(p->w[j] * p->t64[j]);
            }
        }
    }
    /* beyond tolerance where a loop of K runs a different number of times at x - h v, x and
     * x + h v: the difference jumped; K.jvp is then held to the dot-product identity only */
    uint64_t a, b, c;
    if (!st && (res->jvp.f64.err > g->o->rtol || res->jvp.f32.err > g->o->rtol_f32) &&
        trips_along(g, -1, 0, 0, -h, &a) && trips_along(g, -1, 0, 0, 0, &b) &&
        trips_along(g, -1, 0, 0, h, &c) && (a != b || b != c))
        res->jvp.nonsmooth = true;
    for (int i = 0; i < g->np; i++)
        free(half[i]);
    free(half);
    res->jvp.dot_jvp = lhs;
    res->jvp.dot_grad = rhs;
    res->jvp.dot_err = fabs(lhs - rhs) / fmax(mag, 1e-300);
    return st;
}

/* Finite differences at the sampled elements, compared with both gradients. */
static gradcheck_status check_elements(gc *g, gradcheck_result *res) {
    int64_t total = 0;
    for (int i = 0; i < g->np; i++)
        if (g->p[i].diff)
            total += g->p[i].count;
    int64_t nchecks = total < g->o->max_checks ? total : g->o->max_checks;
    res->elements = (int)nchecks;
    res->f64.err = res->f32.err = -1;
    gradcheck_status st = GRADCHECK_OK;
    for (int64_t c = 0; c < nchecks && !st; c++) {
        /* evenly spaced, shifted by c mod the spacing inside each gap, so that a spacing
         * that is a multiple of a vector's or struct's extent still reaches every component */
        int64_t gap = total / nchecks;
        int64_t flat = (int64_t)((double)c * (double)total / (double)nchecks) + c % gap, e = flat;
        int q = 0;
        while (!g->p[q].diff || e >= g->p[q].count) {
            if (g->p[q].diff)
                e -= g->p[q].count;
            q++;
        }
        gc_param *pq = &g->p[q];
        if (integer_word(pq, e)) { /* an integer field's bits: nothing to differentiate */
            res->elements--;
            continue;
        }
        double x = pq->f[e], h = g->o->eps * fmax(1, fabs(x));
        double xp = x + h, xm = x - h;
        st = run_primal(g, q, e, xp, true);
        if (!st)
            st = run_primal(g, q, e, xm, false);
        if (st)
            break;
        double sum = 0;
        for (int i = 0; i < g->np; i++) {
            gc_param *p = &g->p[i];
            if (p->diff && p->info.is_array)
                for (int64_t j = 0; j < p->count; j++)
                    if (!integer_word(p, j) &&
                        !(isnan(p->plus[j]) && isnan(p->minus[j])))  /* NaN either way: */
                        sum += p->w[j] * (p->plus[j] - p->minus[j]); /* unaffected */
        }
        double fd = sum / (xp - xm);
        if ((gradcheck_relerr(pq->g64[e], fd) > g->o->rtol ||
             gradcheck_relerr(pq->g32[e], fd) > g->o->rtol_f32) &&
            nonsmooth(g, q, e, xm, x, xp)) {
            if (!res->nonsmooth++)
                describe(res->nonsmooth_at, sizeof res->nonsmooth_at, pq, e);
            continue;
        }
        note(&res->f64, pq->g64[e], fd, pq, e);
        note(&res->f32, pq->g32[e], fd, pq, e);
    }
    res->ok = !st && res->f64.err <= g->o->rtol && res->f32.err <= g->o->rtol_f32 &&
              !res->primal_written[0] && res->nonsmooth < res->elements;
    return st;
}

gradcheck_status gradcheck_source(const char *path, const char *text, size_t len,
                                  const char *kernel, const char *const *bindings, int nbindings,
                                  const gradcheck_options *o, gradcheck_result *res, FILE *err) {
    memset(res, 0, sizeof *res);
    gc g = {.o = o, .path = path ? path : "<source>", .err = err, .rng = o->seed};
    size_t kn = strlen(kernel);
    char *name = strdup(kernel);
    if (kn > 5 && !strcmp(kernel + kn - 5, ".grad"))
        name[kn - 5] = 0; /* K.grad checks K's gradient too */
    g.name = name;
    kern_module *mod64 = NULL, *mod32 = NULL;
    gradcheck_status st = GRADCHECK_OK;
    if (o->size < 1 || o->max_checks < 1 || !(o->eps > 0)) {
        st = gc_fail(&g, GRADCHECK_USAGE, "--size, --max-checks and --eps must be positive");
        goto done;
    }
    kern_context_options co = kern_context_options_default();
    co.no_checks = false;
    co.backend = (kern_backend)o->backend;
    co.device = o->device;
    if (o->ad_budget)
        co.ad_memory_budget = o->ad_budget;
    if (o->ad_strategy)
        co.ad_strategy = o->ad_strategy;
    if (kern_context_create(&co, &g.ctx) != KERN_OK) {
        st = gc_fail(&g, GRADCHECK_USER, "%s",
                     g.ctx ? kern_context_last_error(g.ctx) : "out of memory");
        goto done;
    }
    st = compile(&g, text, len, true, true, &mod64, &g.ir64);
    if (!st)
        st = compile(&g, text, len, false, false, &mod32, NULL);
    if (!st)
        st = find_kernels(&g, mod64, &g.k64, &g.gk64, &g.jk64);
    if (!st)
        st = find_kernels(&g, mod32, &g.k32, &g.gk32, &g.jk32);
    if (!st)
        st = setup_params(&g, bindings, nbindings);
    bool any = false;
    for (int i = 0; i < g.np && !st; i++) {
        gc_param *p = &g.p[i];
        any |= p->diff && p->count > 0;
        if (p->info.is_array && buffer_of(&g, p, KERN_F64, &p->b) != KERN_OK)
            st = gc_fail(&g, GRADCHECK_USER, "%s", kern_context_last_error(g.ctx));
        if (p->diff && p->info.is_array) {
            p->plus = xcalloc((size_t)p->count, sizeof *p->plus);
            p->minus = xcalloc((size_t)p->count, sizeof *p->minus);
        }
    }
    if (!st && !any)
        st = gc_fail(&g, GRADCHECK_USER,
                     "kernel '%s' has no differentiable parameter with elements (f32 or f64, "
                     "not nograd): nothing to check",
                     g.name);
    if (!st)
        st = run_grad(&g, true, res);
    if (!st)
        st = run_grad(&g, false, res);
    if (!st)
        st = check_elements(&g, res);
    if (!st)
        st = check_jvp(&g, res);
    if (!st && res->jvp.checked) /* K.jvp's tangents carry the same noise as K.grad's */
        res->ok = res->ok && res->jvp.dot_err <= 1e-9 &&
                  (res->jvp.nonsmooth ||
                   (res->jvp.f64.err <= o->rtol && res->jvp.f32.err <= o->rtol_f32));
done:
    for (int i = 0; i < g.np; i++) {
        gc_param *p = &g.p[i];
        kern_buffer_release(p->b);
        free(p->f);
        free(p->raw);
        free(p->w);
        free(p->plus);
        free(p->minus);
        free(p->g64);
        free(p->g32);
        free(p->v);
        free(p->t64);
        free(p->t32);
        free(p->intword);
    }
    free(g.p);
    kern_module_release(mod64);
    kern_module_release(mod32);
    kern_context_release(g.ctx);
    if (g.ir64)
        ir_module_free(g.ir64);
    free(name);
    return st;
}

/* "K" of "K" or "K.grad", in a static buffer */
static const char *base_name(const char *kernel) {
    static char buf[512];
    size_t n = strlen(kernel);
    snprintf(buf, sizeof buf, "%.*s", (int)(n > 5 && !strcmp(kernel + n - 5, ".grad") ? n - 5 : n),
             kernel);
    return buf;
}

void gradcheck_print(FILE *f, const char *kernel, const gradcheck_options *o,
                     const gradcheck_result *res) {
    fprintf(f,
            "gradcheck %s: %d elements, worst relative error %.2g (f64, tol %g), %.2g (f32, "
            "tol %g): %s\n",
            kernel, res->elements, res->f64.err, o->rtol, res->f32.err, o->rtol_f32,
            res->ok ? "ok" : "FAILED");
    if (res->nonsmooth)
        fprintf(f,
                "  %d element%s at a non-smooth point, not compared (first: %s): a step of "
                "+-h changed how often a loop of %s runs\n",
                res->nonsmooth, res->nonsmooth == 1 ? "" : "s", res->nonsmooth_at, kernel);
    if (res->jvp.checked)
        fprintf(f,
                "gradcheck %s.jvp: %d elements, worst relative error %.2g (f64), %.2g (f32); "
                "<jvp(v), w> %.12g against <v, grad(w)> %.12g (relative %.2g, tol 1e-9)\n",
                base_name(kernel), res->jvp.elements, res->jvp.f64.err, res->jvp.f32.err,
                res->jvp.dot_jvp, res->jvp.dot_grad, res->jvp.dot_err);
    else
        fprintf(f, "gradcheck %s.jvp: not checked: %s\n", base_name(kernel), res->jvp.skipped);
    if (res->jvp.nonsmooth)
        fprintf(f,
                "  the tangent's finite difference crosses a non-smooth point (a step of +-h "
                "along it changed how often a loop of %s runs): K.jvp is compared with K.grad "
                "only\n",
                base_name(kernel));
    if (res->ok)
        return;
    if (res->jvp.checked && !res->jvp.nonsmooth &&
        (res->jvp.f64.err > o->rtol || res->jvp.f32.err > o->rtol_f32))
        for (int i = 0; i < 2; i++) {
            const gradcheck_worst *w = i ? &res->jvp.f32 : &res->jvp.f64;
            fprintf(f, "  %s: worst at %s.tan: K.jvp %.9g, finite difference %.9g\n",
                    i ? "f32" : "f64", w->where, w->analytic, w->fd);
        }
    if (res->nonsmooth == res->elements) {
        fprintf(f, "  no element could be compared: bind inputs away from the non-smooth "
                   "points\n");
        return;
    }
    const gradcheck_worst *w[2] = {&res->f64, &res->f32};
    for (int i = 0; i < 2; i++)
        fprintf(f, "  %s: worst at %s: K.grad %.9g, finite difference %.9g\n", i ? "f32" : "f64",
                w[i]->where, w[i]->analytic, w[i]->fd);
    if (res->primal_written[0])
        fprintf(f,
                "  the gradient kernel changed the primal array '%s' (it must only update "
                "adjoints)\n",
                res->primal_written);
}
