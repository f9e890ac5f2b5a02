/* test_vk_sizer.c - the Vulkan sizer shaders (backends/spirv/spv_emit_sizer.c, launched by
 * runtime/vk_adstack.c) against the host evaluator sz_eval (common/sizeexpr.c), on the
 * Vulkan device the tests' contexts get (lavapipe in CI, with KERN_VULKAN_VALIDATION=fatal;
 * skipped with a message where there is none).
 *
 * The SizeExprs are test_sizer.c's table (sizer_cases.h), those of its shapes that read
 * nothing added to a read (so that the module has a sizer for them: every rule of
 * sz_maxover_rule runs in a shader), and a few of this suite's own. Each is sized on the device with random small
 * arguments (as test_sizer.c draws them) and with chosen ones: empty arrays, an array of
 * 100,000 counts (the grid's 256 groups, several points per invocation), negative counts,
 * reads out of bounds, division by zero and int64 overflow. The device must fail exactly
 * when sz_eval does, with the same error kind where only one is possible, and otherwise
 * give the same value; the module passes the runtime's SPIR-V check (spirv-val included).
 * The device's counters show that no array was copied back; a module without sizer entry
 * points (as built before them) still sizes, by copying back. K.grad of a ragged loop
 * (`for j in 0..count[i]`) runs on Vulkan against central differences of a plain C loop. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backends/meta_ir.h"
#include "../backends/spirv/spv_emit.h"
#include "../common/sizeexpr.h"
#include "../compiler/driver.h"
#include "../runtime/gpu.h"
#include "../runtime/rt.h"
#include "sizer_cases.h"
#include "test_backend.h"

enum { NPARAMS = 7, MAX_CASES = 64 };

/* ---- the module: kernel k of sizer_cases.h with one adstack per SizeExpr ------------- */

typedef struct vk_module {
    kern_context *ctx;
    rt_device *d;
    kc_ctx *kc;
    ir_module *m;
    kern_meta *meta;
    const kern_meta_kernel *mk;
    void *code, *handle;
    const sz_expr *caps[MAX_CASES];
    int ncaps;
} vk_module;

/* The texts the suite sizes: the table's reading ones, and the others read into. */
static int suite_texts(char texts[][512]) {
    int n = 0;
    for (size_t i = 0; i < sizeof SIZER_TEXTS / sizeof *SIZER_TEXTS; i++) {
        bool reads = strstr(SIZER_TEXTS[i], "(read") != NULL;
        if (reads)
            snprintf(texts[n++], 512, "%s", SIZER_TEXTS[i]);
        else
            snprintf(texts[n++], 512, "(add (read 1 0) %s)", SIZER_TEXTS[i]);
    }
    /* the chosen cases' own shapes */
    snprintf(texts[n++], 512, "(maxover v0 0 (dim 1 0) (read 1 v0))"); /* negative stays */
    snprintf(texts[n++], 512, "(maxover v0 0 (dim 2 0) (maxover v1 0 (dim 2 1) (read 2 v0 v1)))");
    snprintf(texts[n++], 512, "(add (read 6 0) 9223372036854775000)"); /* overflow */
    snprintf(texts[n++], 512, "(div (read 1 0) (param 3))");           /* division by 0 */
    snprintf(texts[n++], 512, "(maxover v0 0 (dim 5 0) (read 5 v0))"); /* bools */
    return n;
}

/* Renames the module's sizer entry points (kern_k__s<N> -> kern_k__x<N>): a module as
 * built before sizers existed. */
static void strip_sizers(uint32_t *w, size_t n) {
    for (size_t i = 5; i < n;) {
        uint32_t len = w[i] >> 16;
        if ((w[i] & 0xffffu) == 15 /* OpEntryPoint */) {
            char *name = (char *)&w[i + 3];
            char *s = strstr(name, "__s");
            if (s)
                s[2] = 'x';
        }
        i += len;
    }
}

static void module_load(vk_module *v, bool with_sizers) {
    memset(v, 0, sizeof *v);
    v->ctx = kern_test_vulkan_or_null();
    if (!v->ctx)
        cr_skip_test("no Vulkan device");
    v->d = v->ctx->dev;
    v->kc = kc_ctx_new();
    v->m = kc_compile_source(v->kc, "shapes.kern", SIZER_SHAPES_SRC, strlen(SIZER_SHAPES_SRC));
    cr_assert_not_null(v->m);
    ir_kernel *k = ir_kernel_find(v->m, "k");
    static char texts[MAX_CASES][512];
    v->ncaps = suite_texts(texts);
    char err[1024];
    for (int i = 0; i < v->ncaps; i++) {
        const sz_expr *e = sz_parse(&v->m->mem, texts[i], strlen(texts[i]), err, sizeof err);
        cr_assert_not_null(e, "%s: %s", texts[i], err);
        cr_assert(sz_reads_memory(e), "%s reads no array", texts[i]);
        ir_kernel_add_adstack(k, ty_f32(), e, k->loc);
        v->caps[i] = e;
    }
    size_t n = 0;
    uint32_t *w = kc_spirv_emit(v->m, &v->kc->opts, &n, err, sizeof err);
    cr_assert_not_null(w, "%s", err);
    v->meta = kc_meta_from_ir(v->m);
    cr_assert_not_null(v->meta);
    v->mk = &v->meta->kernels[0];
    cr_assert_str_eq(v->mk->name, "k");
    /* the runtime's check of modules (spirv-val for Vulkan 1.2, kern's layout) */
    cr_assert(rt_spirv_check(w, 4 * n, v->meta, err, sizeof err), "%s", err);
    if (!with_sizers)
        strip_sizers(w, n);
    kern_code_image img = {.kind = KERN_CODE_SPIRV, .bytes = w, .len = 4 * n};
    cr_assert_eq(v->d->ops->load_code(v->d, &img, &v->code, err, sizeof err), KERN_OK, "%s", err);
    free(w);
    cr_assert_eq(v->d->ops->get_kernel(v->d, v->code, v->mk, &v->handle, err, sizeof err), KERN_OK,
                 "%s", err);
}

static void module_free(vk_module *v) {
    const char *first = NULL;
    int msgs = rt_vulkan_validation_messages(v->d, &first);
    cr_expect_eq(msgs, 0, "the validation layer reported %d messages; the first: %s", msgs, first);
    v->d->ops->free_kernel(v->d, v->handle);
    v->d->ops->unload_code(v->d, v->code);
    kern_meta_free(v->meta);
    ir_module_free(v->m);
    kc_ctx_free(v->kc);
    kern_context_release(v->ctx);
}

/* ---- arguments ---------------------------------------------------------------------- */

typedef struct args {
    int64_t shape[NPARAMS][2];
    int64_t scalar[NPARAMS];
    void *data[NPARAMS]; /* the arrays' host copies (the reference reads these) */
} args;

static const int RANK[NPARAMS] = {1, 1, 2, 0, 0, 1, 1};

static int64_t elems(const args *a, int p) {
    return RANK[p] == 2 ? a->shape[p][0] * a->shape[p][1] : a->shape[p][0];
}

static void args_alloc(args *a) {
    for (int p = 0; p < NPARAMS; p++)
        if (RANK[p]) {
            a->data[p] = calloc((size_t)elems(a, p) + 1, 8);
            cr_assert_not_null(a->data[p]);
        }
}

static void args_free(args *a) {
    for (int p = 0; p < NPARAMS; p++)
        free(a->data[p]);
}

static void set_elem(args *a, int p, int64_t i, int64_t v) {
    switch (p) {
    case 1:
    case 2: ((int32_t *)a->data[p])[i] = (int32_t)v; break;
    case 5: ((uint8_t *)a->data[p])[i] = v != 0; break;
    case 6: ((int64_t *)a->data[p])[i] = v; break;
    default: ((float *)a->data[p])[i] = (float)v; break;
    }
}

static uint64_t rng(uint64_t *s) { /* xorshift64 */
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int64_t rng_in(uint64_t *s, int64_t lo, int64_t hi) {
    return lo + (int64_t)(rng(s) % (uint64_t)(hi - lo + 1));
}

/* Small extents and values, as test_sizer.c draws them: ranges of a few points, reads
 * through a variable sometimes out of bounds. */
static void random_args(uint64_t *s, args *a) {
    memset(a, 0, sizeof *a);
    for (int p = 0; p < NPARAMS; p++) {
        for (int d = 0; d < RANK[p]; d++)
            a->shape[p][d] = rng_in(s, 0, RANK[p] == 1 ? 7 : 3);
        if (!RANK[p])
            a->scalar[p] = rng_in(s, -3, 12);
    }
    args_alloc(a);
    for (int p = 0; p < NPARAMS; p++)
        for (int64_t i = 0; RANK[p] && i < elems(a, p); i++)
            set_elem(a, p, i, rng_in(s, -2, 8));
}

/* The device's view of a: arrays copied in. */
static void to_device(vk_module *v, const args *a, rt_launch_arg *la) {
    char err[512];
    static const size_t SIZE[NPARAMS] = {4, 4, 4, 4, 4, 1, 8};
    for (int p = 0; p < NPARAMS; p++) {
        memset(&la[p], 0, sizeof la[p]);
        if (!RANK[p]) {
            la[p].scalar.i32 = (int32_t)a->scalar[p];
            continue;
        }
        la[p].is_array = true;
        for (int d = 0; d < KERN_MAX_DIMS; d++)
            la[p].shape[d] = d < RANK[p] ? a->shape[p][d] : 1;
        size_t n = (size_t)elems(a, p) * SIZE[p];
        cr_assert_eq(v->d->ops->alloc(v->d, n, &la[p].mem, err, sizeof err), KERN_OK, "%s", err);
        if (n)
            cr_assert_eq(v->d->ops->copy_in(v->d, la[p].mem, 0, a->data[p], n, err, sizeof err),
                         KERN_OK, "%s", err);
    }
}

static void free_device(vk_module *v, rt_launch_arg *la) {
    for (int p = 0; p < NPARAMS; p++)
        if (la[p].is_array)
            v->d->ops->free(v->d, la[p].mem);
}

/* ---- the comparison ----------------------------------------------------------------- */

/* The error kind of a host message (the sizer's res[1] codes). */
static int host_code(const char *msg) {
    if (strstr(msg, "out of bounds"))
        return 1;
    if (strstr(msg, "divides by zero"))
        return 2;
    return strstr(msg, "overflows") ? 3 : 0;
}

typedef struct outcome {
    bool ok;        /* the host evaluates */
    int64_t host;   /* its value */
    int64_t res[4]; /* the device's */
    int code;       /* the host's error kind */
} outcome;

static outcome size_one(vk_module *v, const args *a, const rt_launch_arg *la, int s) {
    outcome o = {0};
    char err[512], msg[512];
    cr_assert_eq(v->d->ops->size_adstack(v->d, v->handle, v->mk, s, la, o.res, err, sizeof err),
                 KERN_OK, "%s", err);
    sz_arg sa[NPARAMS];
    memset(sa, 0, sizeof sa);
    for (int p = 0; p < NPARAMS; p++) {
        sa[p].type = v->mk->params[p].type;
        sa[p].scalar = a->scalar[p];
        sa[p].data = a->data[p];
        for (int d = 0; d < KERN_MAX_RANK; d++)
            sa[p].shape[d] = d < RANK[p] ? a->shape[p][d] : 1;
    }
    o.ok = sz_eval(v->caps[s], sa, NPARAMS, &o.host, msg, sizeof msg);
    o.code = o.ok ? 0 : host_code(msg);
    kern_buf text = {0};
    sz_print(&text, v->caps[s]);
    cr_assert_eq(o.ok, o.res[1] == 0, "%s: the host %s, the device %s (error %lld)", text.data,
                 o.ok ? "evaluates" : msg, o.res[1] ? "fails" : "evaluates", (long long)o.res[1]);
    cr_assert(o.res[1] >= 0 && o.res[1] <= 3, "%s: error code %lld", text.data,
              (long long)o.res[1]);
    if (o.ok) /* the runtime's reading: a negative capacity (INT64_MIN: none) counts as 0 */
        cr_assert_eq(o.host < 0 ? 0 : o.host, o.res[0] < 0 ? 0 : o.res[0],
                     "%s (steps %lld, n %lld): the host gives %lld, the device %lld", text.data,
                     (long long)a->scalar[3], (long long)a->scalar[4], (long long)o.host,
                     (long long)o.res[0]);
    buf_free(&text);
    return o;
}

static int case_of(vk_module *v, const char *text) {
    for (int s = 0; s < v->ncaps; s++) {
        kern_buf t = {0};
        sz_print(&t, v->caps[s]);
        bool same = !strcmp(t.data, text);
        buf_free(&t);
        if (same)
            return s;
    }
    cr_assert_fail("no case %s", text);
    return -1;
}

static void sizings(vk_module *v, int64_t *shader, int64_t *copied, int64_t *bytes) {
    rt_vulkan_sizings(v->d, shader, copied, bytes);
}

/* ---- tests -------------------------------------------------------------------------- */

Test(vk_sizer, agrees_with_host_on_random_arguments, .timeout = 300) {
    vk_module v;
    module_load(&v, true);
    int64_t shader0, copied0, bytes0;
    sizings(&v, &shader0, &copied0, &bytes0);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int runs = 0, errors = 0;
    for (int set = 0; set < 12; set++) {
        args a;
        random_args(&seed, &a);
        rt_launch_arg la[NPARAMS];
        to_device(&v, &a, la);
        for (int s = 0; s < v.ncaps; s++) {
            outcome o = size_one(&v, &a, la, s);
            runs++;
            errors += !o.ok;
        }
        free_device(&v, la);
        args_free(&a);
    }
    int64_t shader, copied, bytes;
    sizings(&v, &shader, &copied, &bytes);
    cr_assert_eq(shader - shader0, runs, "%lld of %d sizings ran the shader",
                 (long long)(shader - shader0), runs);
    cr_assert_eq(copied, copied0, "arrays were copied back");
    cr_assert_eq(bytes, bytes0, "%lld bytes were copied back", (long long)(bytes - bytes0));
    cr_assert_gt(errors, 0, "no argument set made the host fail");
    cr_assert_lt(errors, runs, "every sizing failed");
    module_free(&v);
}

Test(vk_sizer, chosen_arguments_large_empty_negative_and_errors, .timeout = 300) {
    vk_module v;
    module_load(&v, true);
    int s_max = case_of(&v, "(maxover v0 0 (dim 1 0) (max 0 (read 1 v0)))");
    int s_neg = case_of(&v, "(maxover v0 0 (dim 1 0) (read 1 v0))");
    int s_2d = case_of(&v, "(maxover v0 0 (dim 2 0) (maxover v1 0 (dim 2 1) (read 2 v0 v1)))");
    int s_oob = case_of(&v, "(maxover v0 0 (param 4) (read 1 v0))");
    int s_ovf = case_of(&v, "(add (read 6 0) 9223372036854775000)");
    int s_mulovf = case_of(&v, "(maxover v0 0 (dim 6 0) (mul (read 6 v0) 4611686018427387904))");
    int s_div = case_of(&v, "(div (read 1 0) (param 3))");
    int s_bool = case_of(&v, "(maxover v0 0 (dim 5 0) (read 5 v0))");
    rt_launch_arg la[NPARAMS];
    args a;

    /* empty arrays: every maxover over them is 0, a read of element 0 out of bounds */
    memset(&a, 0, sizeof a);
    a.scalar[3] = 1;
    args_alloc(&a);
    to_device(&v, &a, la);
    outcome o = size_one(&v, &a, la, s_max);
    cr_assert(o.ok && o.host == 0 && o.res[0] == INT64_MIN, "empty: res %lld", (long long)o.res[0]);
    o = size_one(&v, &a, la, s_2d);
    cr_assert(o.ok && o.host == 0);
    o = size_one(&v, &a, la, s_div);
    cr_assert(!o.ok && o.res[1] == 1 && o.res[2] == 1 && o.res[3] == 0);
    free_device(&v, la);
    args_free(&a);

    /* 100,000 counts (256 groups, a few points per invocation), the largest far inside;
     * c2 300 x 300; negative counts; flags */
    memset(&a, 0, sizeof a);
    a.shape[1][0] = 100000;
    a.shape[2][0] = a.shape[2][1] = 300;
    a.shape[5][0] = 70000;
    a.shape[6][0] = 3;
    a.scalar[3] = 0;
    a.scalar[4] = 100001; /* one read past the end */
    args_alloc(&a);
    uint64_t seed = 12345;
    for (int64_t i = 0; i < 100000; i++)
        set_elem(&a, 1, i, rng_in(&seed, -50, 1000));
    set_elem(&a, 1, 77777, 123456);
    for (int64_t i = 0; i < 90000; i++)
        set_elem(&a, 2, i, -rng_in(&seed, 5, 900));
    set_elem(&a, 2, 89999, -3); /* the largest: the last element */
    set_elem(&a, 5, 65000, 1);
    set_elem(&a, 6, 0, 2);
    set_elem(&a, 6, 1, 1);
    to_device(&v, &a, la);
    o = size_one(&v, &a, la, s_max);
    cr_assert_eq(o.res[0], 123456);
    o = size_one(&v, &a, la, s_2d);
    cr_assert_eq(o.res[0], -3, "the largest of negative counts: %lld", (long long)o.res[0]);
    o = size_one(&v, &a, la, s_bool);
    cr_assert_eq(o.res[0], 1);
    o = size_one(&v, &a, la, s_oob); /* reads count[100000] */
    cr_assert(!o.ok && o.code == 1 && o.res[1] == 1);
    cr_assert_eq(o.res[2], 1, "the parameter: %lld", (long long)o.res[2]);
    cr_assert_eq(o.res[3], 100000, "the index: %lld", (long long)o.res[3]);
    o = size_one(&v, &a, la, s_div); /* steps = 0 */
    cr_assert(!o.ok && o.code == 2 && o.res[1] == 2);
    o = size_one(&v, &a, la, s_ovf); /* 2 + 9223372036854775000 fits; see below */
    cr_assert(o.ok && o.res[0] == 9223372036854775002);
    o = size_one(&v, &a, la, s_mulovf); /* 2 * 2^62 */
    cr_assert(!o.ok && o.code == 3 && o.res[1] == 3);
    free_device(&v, la);
    set_elem(&a, 6, 0, 1000);
    to_device(&v, &a, la);
    o = size_one(&v, &a, la, s_ovf);
    cr_assert(!o.ok && o.code == 3 && o.res[1] == 3);
    free_device(&v, la);

    /* every count negative: the maximum stays negative */
    for (int64_t i = 0; i < 100000; i++)
        set_elem(&a, 1, i, -1 - (i % 97));
    to_device(&v, &a, la);
    o = size_one(&v, &a, la, s_neg);
    cr_assert_eq(o.res[0], -1);
    o = size_one(&v, &a, la, s_max);
    cr_assert(o.ok && o.host == 0 && o.res[0] == 0);
    free_device(&v, la);
    args_free(&a);
    module_free(&v);
}

Test(vk_sizer, modules_without_sizers_copy_back) {
    vk_module v;
    module_load(&v, false);
    int64_t shader0, copied0, bytes0;
    sizings(&v, &shader0, &copied0, &bytes0);
    uint64_t seed = 77;
    args a;
    random_args(&seed, &a);
    a.shape[1][0] = 5;
    for (int64_t i = 0; i < 5; i++)
        set_elem(&a, 1, i, 10 * i);
    rt_launch_arg la[NPARAMS];
    to_device(&v, &a, la);
    int s = case_of(&v, "(maxover v0 0 (dim 1 0) (max 0 (read 1 v0)))");
    outcome o = size_one(&v, &a, la, s);
    cr_assert_eq(o.res[0], 40);
    int64_t shader, copied, bytes;
    sizings(&v, &shader, &copied, &bytes);
    cr_assert_eq(shader, shader0);
    cr_assert_eq(copied, copied0 + 1);
    cr_assert_gt(bytes, bytes0);
    free_device(&v, la);
    args_free(&a);
    module_free(&v);
}

/* ---- K.grad of a ragged loop -------------------------------------------------------- */

static const char ragged_src[] = "kernel ragged(count: i32[], a: f64[], b: f64[], y: f64[]) {\n"
                                 "    for i in 0..len(count) {\n"
                                 "        var s: f64 = 1.0;\n"
                                 "        for j in 0..count[i] {\n"
                                 "            s = s * a[i] + sin(b[j] * s);\n"
                                 "        }\n"
                                 "        y[i] = s;\n"
                                 "    }\n"
                                 "}\n";

enum { RN = 40, RB = 9 };

/* sum_i w[i] y[i], the forward loop in C. */
static double ragged_loss(const int32_t *count, const double *a, const double *b, const double *w) {
    double loss = 0;
    for (int i = 0; i < RN; i++) {
        double s = 1.0;
        for (int j = 0; j < count[i]; j++)
            s = s * a[i] + sin(b[j] * s);
        loss += w[i] * s;
    }
    return loss;
}

/* The gradient g of the loss in element i of x (a or b) against central differences. */
static void check_partial(const int32_t *count, const double *a, const double *b, const double *w,
                          const double *x, int i, double g, const char *name) {
    const double h = 1e-6;
    double ap[RN], am[RN], bp[RB], bm[RB];
    memcpy(ap, a, sizeof ap);
    memcpy(am, a, sizeof am);
    memcpy(bp, b, sizeof bp);
    memcpy(bm, b, sizeof bm);
    double *xp = x == a ? ap : bp, *xm = x == a ? am : bm;
    xp[i] += h, xm[i] -= h;
    double fd = (ragged_loss(count, ap, bp, w) - ragged_loss(count, am, bm, w)) / (2 * h);
    cr_assert(fabs(g - fd) <= 1e-6 * (1 + fabs(fd)), "%s.grad[%d] = %.12g, differences %.12g", name,
              i, g, fd);
}

static kern_buffer *f64buf(kern_context *ctx, int64_t n, const double *data) {
    kern_buffer *b = NULL;
    cr_assert_eq(kern_buffer_create(ctx, KERN_F64, 1, &n, data, &b), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    return b;
}

Test(vk_sizer, ragged_grad_against_central_differences) {
    kern_context *ctx = kern_test_vulkan_or_null();
    if (!ctx)
        cr_skip_test("no Vulkan device");
    kern_module *m = NULL;
    cr_assert_eq(kern_module_from_source(ctx, ragged_src, strlen(ragged_src), "ragged.kern", &m),
                 KERN_OK, "%s", kern_context_last_error(ctx));
    kern_kernel *g;
    cr_assert_eq(kern_kernel_find(m, "ragged.grad", &g), KERN_OK, "%s",
                 kern_context_last_error(ctx));
    int32_t count[RN];
    double a[RN], b[RB], w[RN], zero[RN] = {0};
    uint64_t seed = 4242;
    for (int i = 0; i < RN; i++) {
        count[i] = (int32_t)rng_in(&seed, 0, RB);
        a[i] = 0.3 + 0.6 * (double)rng_in(&seed, 0, 1000) / 1000;
        w[i] = 0.5 + (double)rng_in(&seed, 0, 1000) / 1000;
    }
    count[17] = RB; /* the capacity: the largest count */
    for (int j = 0; j < RB; j++)
        b[j] = (double)rng_in(&seed, -1000, 1000) / 1000;
    int64_t n = RN;
    kern_buffer *bc = NULL;
    cr_assert_eq(kern_buffer_create(ctx, KERN_I32, 1, &n, count, &bc), KERN_OK);
    kern_buffer *ba = f64buf(ctx, RN, a), *bb = f64buf(ctx, RB, b), *by = f64buf(ctx, RN, zero),
                *ga = f64buf(ctx, RN, zero), *gb = f64buf(ctx, RB, zero), *gy = f64buf(ctx, RN, w);
    int64_t shader0, copied0, bytes0;
    rt_vulkan_sizings(ctx->dev, &shader0, &copied0, &bytes0);
    int64_t sizings0 = ctx->device_sizings;
    kern_arg ka[7] = {kern_arg_buffer(bc), kern_arg_buffer(ba), kern_arg_buffer(bb),
                      kern_arg_buffer(by), kern_arg_buffer(ga), kern_arg_buffer(gb),
                      kern_arg_buffer(gy)};
    cr_assert_eq(kern_launch(g, ka, 7), KERN_OK, "%s", kern_context_last_error(ctx));
    double da[RN], db[RB];
    cr_assert_eq(kern_buffer_read(ga, da, sizeof da), KERN_OK);
    cr_assert_eq(kern_buffer_read(gb, db, sizeof db), KERN_OK);
    int64_t shader, copied, bytes;
    rt_vulkan_sizings(ctx->dev, &shader, &copied, &bytes);
    cr_assert_gt(ctx->device_sizings, sizings0, "the capacity was not sized on the device");
    cr_assert_eq(shader - shader0, ctx->device_sizings - sizings0, "not every sizing ran a shader");
    cr_assert_eq(bytes, bytes0, "%lld bytes were copied back", (long long)(bytes - bytes0));
    int64_t cap = 0;
    cr_assert_eq(kern_context_adstack_last(ctx, 0, NULL, &cap), KERN_OK);
    cr_assert_geq(cap, RB, "capacity %lld below the largest count", (long long)cap);
    for (int i = 0; i < RN; i++)
        check_partial(count, a, b, w, a, i, da[i], "a");
    for (int j = 0; j < RB; j++)
        check_partial(count, a, b, w, b, j, db[j], "b");
    kern_context_release(ctx);
}
