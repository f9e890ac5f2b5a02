/* test_sizer.c - the GPU sizer kernels (backends/llvm/llvm_sizer.c) against the host
 * evaluator (common/sizeexpr.c, sz_eval).
 *
 * Both evaluate each maxover by the rule sz_maxover_rule gives it; what applies the rule is
 * written twice, once in C and once as LLVM IR, so this suite runs both on the same
 * arguments. Sources: the gradient corpus (tests/grad/\*.kern, REAL as f64, the files
 * test_grad_corpus.c reads), the .kern sources of the golden suites (tests/golden/ir-grad)
 * and examples/, and tests/sizer/shapes.kern (loop shapes the others lack), compiled
 * with every possible K.grad. The sizers of every adstack of
 * every gradient kernel are compiled for the host CPU (llvm_jit_host_sizers: the code of
 * llvm_gpu_emit_sizer, for a grid of two globals) and each is run as 3 threads one after
 * another, for 12 random argument sets: it must report an error
 * exactly when sz_eval fails, and otherwise the same value. A table of SizeExpr texts over
 * one kernel's parameters adds the shapes the compiler does not produce (SZ_RULE_POINT,
 * deeper nests), so that every rule is run; the suite checks that each was. The arguments
 * are small (ranges of a few points), where the host's SZ_RULE_OTHER scans and is exact;
 * over more than 4096 points it may return a larger bound (docs/sizeexpr.md). */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backends/llvm/llvm_backend.h"
#include "../common/sizeexpr.h"
#include "../compiler/driver.h"
#include "../runtime/meta.h"
#include "golden.h"
#include "sizer_cases.h"

#ifndef KERN_SOURCE_ROOT
#define KERN_SOURCE_ROOT "."
#endif

enum { THREADS = 3, ARG_SETS = 12, MAX_SLOTS = 128, MAX_ELEMS = 64 };

/* ---- What the suite saw --------------------------------------------------------------- */

typedef struct tally {
    int caps, reading, runs, errors;
    int rules[SZ_RULE_OTHER + 1];
} tally;

static void count_rules(const sz_expr *e, tally *t) {
    if (e->op == SZ_MAXOVER)
        t->rules[sz_maxover_rule(e)]++;
    for (int i = 0; i < e->nkids; i++)
        count_rules(e->kids[i], t);
}

/* ---- One module: its sizers, JIT-compiled --------------------------------------------- */

/* A capacity to compare: adstack s of kernel k, whose capacity is e. */
typedef struct sizer_case {
    const ir_kernel *k;
    uint32_t s;
    const sz_expr *e;
    char what[160]; /* for messages */
} sizer_case;

typedef struct jitted {
    llvm_jit *jit;
    int64_t *tid, *nthreads;
} jitted;

static void *lookup(jitted *j, const char *sym) {
    void *p = llvm_jit_lookup(j->jit, sym);
    cr_assert_not_null(p, "no symbol %s", sym);
    return p;
}

/* ---- Random arguments ------------------------------------------------------------------ */

typedef struct rng_t {
    uint64_t s;
} rng_t;

static int64_t rng_in(rng_t *r, int64_t lo, int64_t hi) { /* xorshift64, [lo, hi] */
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return lo + (int64_t)(r->s % (uint64_t)(hi - lo + 1));
}

static uint64_t hash_str(const char *s) { /* FNV-1a */
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

typedef struct launch_args {
    sz_arg host[MAX_SLOTS];
    int64_t slots[MAX_SLOTS]; /* the sizer's parameters, one per 8 bytes; then res */
    int nslots;
    int64_t data[MAX_SLOTS][MAX_ELEMS]; /* every array's elements (8 bytes is enough room) */
} launch_args;

/* Integer parameters and elements small, so that ranges have a few points and reads
 * through a variable sometimes fall out of bounds. */
static void random_args(rng_t *r, const ir_kernel *k, launch_args *a) {
    memset(a, 0, sizeof *a);
    int n = 0;
    for (uint32_t i = 0; i < k->nparams; i++) {
        const kern_type *t = k->params[i].type;
        sz_arg *h = &a->host[i];
        h->type = t;
        if (ty_is_array(t)) {
            int64_t elems = 1;
            for (int d = 0; d < KERN_MAX_RANK; d++) {
                h->shape[d] = d < t->rank ? rng_in(r, 0,
                                                   t->rank == 1  ? 7
                                                   : t->rank < 4 ? 3
                                                                 : 2)
                                          : 1;
                elems *= h->shape[d];
            }
            cr_assert(elems <= MAX_ELEMS);
            void *data = a->data[i];
            for (int64_t e = 0; e < elems; e++) {
                int64_t v = rng_in(r, -2, 8);
                switch (t->elem->kind) {
                case TY_I32: ((int32_t *)data)[e] = (int32_t)v; break;
                case TY_U32: ((uint32_t *)data)[e] = (uint32_t)(v < 0 ? -v : v); break;
                case TY_I64: ((int64_t *)data)[e] = v; break;
                case TY_BOOL: ((uint8_t *)data)[e] = v > 3; break;
                default: break; /* floats: never read by a SizeExpr */
                }
            }
            h->data = data;
            a->slots[n++] = (int64_t)(uintptr_t)data;
            for (int d = 0; d < t->rank; d++)
                a->slots[n++] = h->shape[d];
        } else {
            switch (t->kind) {
            case TY_BOOL: h->scalar = rng_in(r, 0, 1); break;
            case TY_U32: h->scalar = rng_in(r, 0, 12); break;
            case TY_I32:
            case TY_I64: h->scalar = rng_in(r, -3, 12); break;
            default: break; /* floats: the slot is 0.0 */
            }
            a->slots[n++] = h->scalar;
        }
        cr_assert(n < MAX_SLOTS - 1);
    }
    a->nslots = n;
}

/* ---- The comparison --------------------------------------------------------------------- */

static void compare(jitted *j, const sizer_case *c, rng_t *r, tally *t) {
    char sym[600];
    kern_meta_sizer_symbol(sym, sizeof sym, c->k->name, (int)c->s);
    void (*call)(int64_t *) = (void (*)(int64_t *))lookup(j, sym);
    static launch_args a; /* large: not on the stack */
    for (int set = 0; set < ARG_SETS; set++) {
        random_args(r, c->k, &a);
        int64_t res[4] = {INT64_MIN, 0, 0, 0};
        a.slots[a.nslots] = (int64_t)(uintptr_t)res;
        *j->nthreads = THREADS;
        for (int w = 0; w < THREADS; w++) {
            *j->tid = w;
            call(a.slots);
        }
        /* the runtime's reading: INT64_MIN is an empty outermost range, a negative
         * capacity counts as 0 (runtime/launch.c, runtime/adstack.c) */
        int64_t device = res[0] < 0 ? 0 : res[0], host = 0;
        char err[256];
        bool ok = sz_eval(c->e, a.host, (int)c->k->nparams, &host, err, sizeof err);
        kern_buf text = {0};
        sz_print(&text, c->e);
        cr_assert_eq(ok, res[1] == 0, "%s: %s: the host %s, the sizer %s (error %lld)", c->what,
                     text.data, ok ? "evaluates" : err, res[1] ? "fails" : "evaluates",
                     (long long)res[1]);
        if (ok && host < 0)
            host = 0;
        if (ok)
            cr_assert_eq(host, device, "%s: %s: the host gives %lld, the sizer %lld", c->what,
                         text.data, (long long)host, (long long)device);
        buf_free(&text);
        t->runs++;
        t->errors += !ok;
    }
}

/* Compiles the sizers of every adstack of m for the host and compares each with sz_eval. */
static void compare_module(const ir_module *m, const kc_options *o, const char *name, tally *t) {
    int n = 0;
    ir_foreach_kernel(k, m) n += (int)k->nadstacks;
    if (n == 0)
        return;
    char err[1024];
    jitted j = {.jit = llvm_jit_host_sizers(m, o, err, sizeof err)};
    cr_assert_not_null(j.jit, "%s: %s", name, err);
    j.tid = lookup(&j, "kern_sizer_tid");
    j.nthreads = lookup(&j, "kern_sizer_nthreads");
    rng_t r = {hash_str(name) | 1};
    ir_foreach_kernel(k, m) {
        for (uint32_t s = 0; s < k->nadstacks; s++) {
            sizer_case c = {.k = k, .s = s, .e = k->adstacks[s].cap};
            snprintf(c.what, sizeof c.what, "%s, %s, adstack %u", name, k->name, s);
            compare(&j, &c, &r, t);
            t->caps++;
            t->reading += sz_reads_memory(c.e);
            count_rules(c.e, t);
        }
    }
    llvm_jit_free(j.jit);
}

/* ---- The sources ------------------------------------------------------------------------ */

static char *read_source(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)len + 1);
    cr_assert(s && fread(s, 1, (size_t)len, f) == (size_t)len);
    s[len] = 0;
    fclose(f);
    char *typed = golden_with_type(s, "f64"); /* the corpus's placeholders */
    free(s);
    return typed;
}

/* Every adstack of every gradient kernel of one source file; the arguments are drawn from
 * a seed made from name. */
static void compare_file(const char *path, const char *name, tally *t) {
    char *src = read_source(path);
    kc_ctx *ctx = kc_ctx_new();
    ctx->opts.grad = KC_GRAD_POSSIBLE;
    ir_module *m = kc_compile_source(ctx, path, src, strlen(src));
    if (!m)
        diag_print_all(stderr, &ctx->diags);
    cr_assert_not_null(m, "%s does not compile", path);
    compare_module(m, &ctx->opts, name, t);
    ir_module_free(m);
    kc_ctx_free(ctx);
    free(src);
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every .kern file of dir (relative to the source root), in name order. */
static int compare_dir(const char *dir, tally *t) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", KERN_SOURCE_ROOT, dir);
    DIR *d = opendir(path);
    cr_assert_not_null(d, "cannot open %s", path);
    char *names[512];
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".kern") == 0) {
            cr_assert(n < 512);
            names[n++] = strdup(e->d_name);
        }
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s/%s", KERN_SOURCE_ROOT, dir, names[i]);
        compare_file(path, names[i], t);
        free(names[i]);
    }
    return n;
}

static void report(const char *what, const tally *t) {
    cr_log_info("%s: %d capacities (%d read arrays), %d runs (%d host errors); maxovers by "
                "rule: point %d, endpoints %d, scan %d, piecewise %d, other %d",
                what, t->caps, t->reading, t->runs, t->errors, t->rules[SZ_RULE_POINT],
                t->rules[SZ_RULE_ENDPOINTS], t->rules[SZ_RULE_SCAN], t->rules[SZ_RULE_PIECEWISE],
                t->rules[SZ_RULE_OTHER]);
}

/* The gradient corpus, the ir-grad goldens, the examples and this suite's loop shapes. */
Test(sizer, agrees_with_host_on_test_sources, .timeout = 600) {
    tally t = {0};
    int files = compare_dir("tests/grad", &t) + compare_dir("tests/golden/ir-grad", &t) +
                compare_dir("examples", &t) + compare_dir("tests/sizer", &t);
    report("test sources", &t);
    cr_assert_geq(files, 80, "only %d source files found", files);
    cr_assert_geq(t.caps, 50, "only %d capacities compared", t.caps);
    cr_assert_geq(t.reading, 5, "only %d capacities read arrays", t.reading);
    for (int r = SZ_RULE_ENDPOINTS; r <= SZ_RULE_OTHER; r++) /* the compiler makes no POINT */
        cr_assert_gt(t.rules[r], 0, "rule %d never ran", r);
}

Test(sizer, agrees_with_host_on_hand_written_shapes) {
    kc_ctx *ctx = kc_ctx_new();
    ir_module *m =
        kc_compile_source(ctx, "shapes.kern", SIZER_SHAPES_SRC, strlen(SIZER_SHAPES_SRC));
    cr_assert_not_null(m);
    ir_kernel *k = ir_kernel_find(m, "k");
    /* adstacks that hold nothing */
    for (size_t i = 0; i < sizeof SIZER_TEXTS / sizeof *SIZER_TEXTS; i++) {
        char err[256];
        const sz_expr *e =
            sz_parse(&m->mem, SIZER_TEXTS[i], strlen(SIZER_TEXTS[i]), err, sizeof err);
        cr_assert_not_null(e, "%s: %s", SIZER_TEXTS[i], err);
        ir_kernel_add_adstack(k, ty_f32(), e, k->loc);
    }
    tally t = {0};
    compare_module(m, &ctx->opts, "hand-written shapes", &t);
    report("hand-written shapes", &t);
    for (int r = 0; r <= SZ_RULE_OTHER; r++)
        cr_assert_gt(t.rules[r], 0, "rule %d never ran", r);
    cr_assert_gt(t.errors, 0, "no argument set made the host fail");
    ir_module_free(m);
    kc_ctx_free(ctx);
}
