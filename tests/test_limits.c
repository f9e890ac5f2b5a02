/* test_limits.c - the compiler's limits (issue 9, item 4; compiler/driver.h,
 * docs/language.md "Limits"): sources built to exhaust the stack, the memory or the time
 * of a compiler end in a diagnostic that names the limit, never a crash; what `check`
 * accepts, the whole pipeline compiles to IR that verifies; results of the kernels near
 * the limits (run by the IR interpreter) equal the same computation in plain C. No test
 * measures time: the numbers are in the report of the change. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../backends/codegen.h"
#include "../common/util.h"
#include "../compiler/driver.h"
#include "../ir/interp.h"

/* ---- Helpers ------------------------------------------------------------------------ */

typedef struct result {
    kc_ctx *ctx;
    ir_module *m; /* NULL when compilation failed */
    char *diags;  /* "L:C: message\n" per error */
} result;

static char *diag_text(const kc_ctx *ctx) {
    kern_buf b = {0};
    for (int i = 0; i < ctx->diags.len; i++) {
        const diag *d = &ctx->diags.items[i];
        if (d->severity == DIAG_ERROR)
            buf_printf(&b, "%u:%u: %s\n", d->loc.line, d->loc.col, d->message);
    }
    return b.data ? buf_take(&b) : strdup("");
}

/* Checks, then (when the check passes) compiles the whole pipeline with every gradient
 * (KC_GRAD_POSSIBLE), and verifies the module: what check accepts must compile. */
static result compile(const char *text, size_t len) {
    result r = {kc_ctx_new(), NULL, NULL};
    fe_file *f = kc_check_source(r.ctx, "t.kern", text, len);
    if (f) {
        kc_ctx *cc = kc_ctx_new();
        cc->opts.grad = KC_GRAD_POSSIBLE;
        r.m = kc_compile_source(cc, "t.kern", text, len);
        char *d = diag_text(cc);
        cr_assert(r.m, "check accepted the source but compiling it failed:\n%s", d);
        free(d);
        diag_sink sink;
        diag_init(&sink, &cc->mem);
        cr_assert(ir_verify(r.m, &sink), "the compiled module does not verify");
        diag_free(&sink);
        kc_ctx_free(cc);
    }
    r.diags = diag_text(r.ctx);
    return r;
}

static void expect_error(const char *text, size_t len, const char *needle) {
    result r = compile(text, len);
    cr_expect_null(r.m, "expected an error containing '%s'", needle);
    cr_expect(strstr(r.diags, needle) != NULL, "expected '%s' in:\n%.2000s", needle, r.diags);
    if (r.m)
        ir_module_free(r.m);
    kc_ctx_free(r.ctx);
    free(r.diags);
}

static void done(result *r) {
    if (r->m)
        ir_module_free(r->m);
    kc_ctx_free(r->ctx);
    free(r->diags);
}

/* kernel k(x: f64[]) { for i in 0..len(x) { x[i] = EXPR; } } around a prefix of items. */
static char *kernel_around(kern_buf *items, const char *expr) {
    buf_printf(items,
               "kernel k(x: f64[]) {\n    for i in 0..len(x) {\n        x[i] = %s;\n"
               "    }\n}\n",
               expr);
    return buf_take(items);
}

/* Runs kernel k(x: f64[]) of m on x (n elements) in the interpreter. */
static void run_k(const ir_module *m, double *x, int64_t n) {
    ir_interp_arg a = ir_interp_array(TY_F64, x, 1, n, 0, 0, 0);
    char err[256];
    cr_assert(ir_interp_run(m, "k", &a, 1, err, sizeof err), "%s", err);
}

/* ---- The parser's nesting limits ----------------------------------------------------- */

static char *repeat3(const char *pre, int n, const char *mid, const char *post) {
    kern_buf b = {0};
    for (int i = 0; i < n; i++)
        buf_puts(&b, pre);
    buf_puts(&b, mid);
    for (int i = 0; i < n; i++)
        buf_puts(&b, post);
    return buf_take(&b);
}

Test(limits, deep_expressions_and_blocks) {
    struct {
        const char *pre, *mid, *post, *needle;
        int n;
    } cases[] = {
        {"(", "1.0", ")", "nested too deeply", 100000},
        {"-", "1.0", "", "nested too deeply", 100000},
        {"x[i] + ", "1.0", "", "expression too complex", 100000},
        {"sin(", "1.0", ")", "nested too deeply", 100000},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char *e = repeat3(cases[c].pre, cases[c].n, cases[c].mid, cases[c].post);
        kern_buf b = {0};
        char *src = kernel_around(&b, e);
        expect_error(src, strlen(src), cases[c].needle);
        free(src);
        free(e);
    }
    const char *blocks[][2] = {{"if x[i] > 0.0 {\n", "}\n"},
                               {"{\n", "}\n"},
                               {"while x[i] > 0.0 {\n", "}\n"},
                               {"for j in 0..2 {\n", "}\n"}};
    for (size_t c = 0; c < sizeof blocks / sizeof *blocks; c++) {
        char *body = repeat3(blocks[c][0], 10000, "x[i] = 1.0;\n", blocks[c][1]);
        kern_buf b = {0};
        buf_printf(&b, "kernel k(x: f64[]) {\n    for i in 0..len(x) {\n%s    }\n}\n", body);
        expect_error(b.data, b.len, "blocks nested too deeply");
        buf_free(&b);
        free(body);
    }
}

/* ---- Inlining ------------------------------------------------------------------------ */

/* fn0(a) = a + 1, fnJ(a) = fn(J-1)(a) + 1: the kernel calls fn(depth - 1), a chain of
 * `depth` calls. */
static char *call_chain(int depth) {
    kern_buf b = {0};
    buf_puts(&b, "func fn0(a: f64) -> f64 { return a + 1.0; }\n");
    for (int j = 1; j < depth; j++)
        buf_printf(&b, "func fn%d(a: f64) -> f64 { return fn%d(a) + 1.0; }\n", j, j - 1);
    char call[64];
    snprintf(call, sizeof call, "fn%d(x[i])", depth - 1);
    return kernel_around(&b, call);
}

Test(limits, inline_depth) {
    /* at the limit: compiles, and x + depth is what the chain computes */
    char *src = call_chain(KC_MAX_INLINE_DEPTH);
    result r = compile(src, strlen(src));
    cr_assert(r.m, "%s", r.diags);
    double x[3] = {0.5, -2, 10};
    run_k(r.m, x, 3);
    cr_expect_eq(x[0], 0.5 + KC_MAX_INLINE_DEPTH);
    cr_expect_eq(x[1], -2.0 + KC_MAX_INLINE_DEPTH);
    cr_expect_eq(x[2], 10.0 + KC_MAX_INLINE_DEPTH);
    done(&r);
    free(src);
    /* one more, and a chain of 100000: an error naming the depth and the limit */
    src = call_chain(KC_MAX_INLINE_DEPTH + 1);
    expect_error(src, strlen(src), "calls nested 65 deep once inlined (k -> fn64 -> fn63");
    free(src);
    src = call_chain(100000);
    expect_error(src, strlen(src), "calls nested 100000 deep once inlined");
    expect_error(src, strlen(src), "more than the limit of 64");
    free(src);
}

/* g0(a) = a + 1, gJ(a) = g(J-1)(a) + g(J-1)(2a): 2^J copies of g0 once inlined. */
static char *doubling(int levels) {
    kern_buf b = {0};
    buf_puts(&b, "func g0(a: f64) -> f64 { return a + 1.0; }\n");
    for (int j = 1; j <= levels; j++)
        buf_printf(&b, "func g%d(a: f64) -> f64 { return g%d(a) + g%d(a * 2.0); }\n", j, j - 1,
                   j - 1);
    char call[64];
    snprintf(call, sizeof call, "g%d(x[i])", levels);
    return kernel_around(&b, call);
}

static double g_ref(int j, double a) {
    return j == 0 ? a + 1.0 : g_ref(j - 1, a) + g_ref(j - 1, a * 2.0);
}

Test(limits, exponential_inlining) {
    char *src = doubling(10); /* 1024 copies: well within the limit */
    result r = compile(src, strlen(src));
    cr_assert(r.m, "%s", r.diags);
    double x[2] = {0.25, -1.5};
    run_k(r.m, x, 2);
    cr_expect(fabs(x[0] - g_ref(10, 0.25)) <= 1e-9 * fabs(g_ref(10, 0.25)), "%g", x[0]);
    cr_expect(fabs(x[1] - g_ref(10, -1.5)) <= 1e-9 * fabs(g_ref(10, -1.5)), "%g", x[1]);
    done(&r);
    free(src);
    /* 2^40 copies: an error at check time, not an allocation of terabytes */
    src = doubling(40);
    expect_error(src, strlen(src), "inlining the funcs that kernel 'k' calls would add more than");
    expect_error(src, strlen(src), "this call of 'g40' alone adds");
    free(src);
}

/* fnJ nests its call of fn(J-1) in `levels` ifs: inlined, the nesting adds up. */
static char *nested_chain(int depth, int levels) {
    kern_buf b = {0};
    buf_puts(&b, "func fn0(a: f64) -> f64 { return a + 1.0; }\n");
    for (int j = 1; j < depth; j++) {
        buf_printf(&b, "func fn%d(a: f64) -> f64 {\n", j);
        for (int l = 0; l < levels; l++)
            buf_puts(&b, "if a > -100.0 {\n");
        buf_printf(&b, "return fn%d(a) + 1.0;\n", j - 1);
        for (int l = 0; l < levels; l++)
            buf_puts(&b, "}\n");
        buf_puts(&b, "return a;\n}\n");
    }
    char call[64];
    snprintf(call, sizeof call, "fn%d(x[i])", depth - 1);
    return kernel_around(&b, call);
}

Test(limits, inlined_nesting) {
    char *src = nested_chain(4, 150); /* about 3 x 300 levels: compiles */
    result r = compile(src, strlen(src));
    cr_assert(r.m, "%s", r.diags);
    double x[2] = {1, 2};
    run_k(r.m, x, 2);
    cr_expect_eq(x[0], 5.0);
    cr_expect_eq(x[1], 6.0);
    done(&r);
    free(src);
    src = nested_chain(20, 190); /* each level is within the parser's limit, the sum is not */
    expect_error(src, strlen(src), "levels deep, more than the limit of 1500");
    free(src);
}

/* ---- Source size --------------------------------------------------------------------- */

Test(limits, source_size) {
    const char *k = "kernel k(x: f64[]) { for i in 0..len(x) { x[i] = 1.0; } }\n";
    size_t n = KC_MAX_SOURCE_BYTES;
    char *text = malloc(n + 2);
    memset(text, ' ', n + 1);
    memcpy(text, k, strlen(k));
    text[n + 1] = 0;
    result r = compile(text, n); /* exactly the limit: fine */
    cr_expect(r.m != NULL, "%s", r.diags);
    done(&r);
    expect_error(text, n + 1, "the source is longer than the limit of 8388608 bytes");
    /* kc_read_source stops one byte past the limit, and the check reports it */
    char path[] = "/tmp/kern-limits-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    for (int i = 0; i < 3; i++) /* three times the limit on disk */
        cr_assert_eq(write(fd, text, n), (ssize_t)n);
    close(fd);
    size_t len = 0;
    char *read = kc_read_source(path, &len);
    cr_assert_not_null(read);
    cr_expect_eq(len, n + 1);
    expect_error(read, len, "longer than the limit");
    free(read);
    unlink(path);
    free(text);
}

/* ---- Parallel loops and ranges ------------------------------------------------------- */

/* n ranges of 0..2 in one parallel for, each thread adding 1 to x[0] */
static char *grid(int n) {
    kern_buf b = {0};
    buf_puts(&b, "kernel k(x: f64[]) {\n    for ");
    for (int d = 0; d < n; d++)
        buf_printf(&b, "%sa%d in 0..2", d ? ", " : "", d);
    buf_puts(&b, " {\n        x[0] += 1.0;\n    }\n}\n");
    return buf_take(&b);
}

Test(limits, parallel_ranges) {
    char *src = grid(8);
    result r = compile(src, strlen(src));
    cr_assert(r.m, "%s", r.diags);
    double x[1] = {0};
    run_k(r.m, x, 1);
    cr_expect_eq(x[0], 256.0, "2^8 threads, got %g", x[0]);
    done(&r);
    free(src);
    src = grid(9); /* the lowering used to stop on an assertion here */
    expect_error(src, strlen(src), "a parallel for has at most 8 ranges, this one has 9");
    free(src);
}

/* A top-level range read from an array used to lower to a `load` at the kernel's top
 * level, which the verifier rejects: the grid is sized before the threads start, so the
 * bounds must be known to the host, and the check says so. */
Test(limits, parallel_bounds_from_memory) {
    const char *srcs[] = {
        "kernel k(c: i32[], x: f32[]) {\n    for i in 0..c[0] {\n        x[i] = 1.0;\n    }\n}\n",
        "func half(n: i32) -> i32 { return n / 2; }\n"
        "kernel k(x: f32[]) {\n    for i in 0..half(len(x)) {\n        x[i] = 1.0;\n    }\n}\n",
        "kernel k(c: i32[], x: f32[]) {\n    for i in 0..len(x), j in c[1]..4 {\n"
        "        x[i] = 1.0;\n    }\n}\n",
    };
    /* a func call in a bound is an error; array reads are top-level loads, evaluated when
     * the task starts (tests/grad/top_level_array_bound.kern runs one on every backend) */
    expect_error(srcs[1], strlen(srcs[1]), "the bounds of a parallel for may not call funcs");
    for (size_t i = 0; i < sizeof srcs / sizeof *srcs; i += 2) {
        result rr = compile(srcs[i], strlen(srcs[i]));
        cr_expect(rr.m != NULL, "%s", rr.diags);
        done(&rr);
    }
    /* the count as a scalar, or an element read inside the loop: fine */
    const char *ok = "kernel k(c: i32[], x: f64[], n: i32) {\n"
                     "    for i in 0..n {\n"
                     "        if i < c[0] {\n"
                     "            x[i] = 1.0;\n"
                     "        }\n"
                     "    }\n"
                     "}\n";
    result r = compile(ok, strlen(ok));
    cr_expect(r.m != NULL, "%s", r.diags);
    done(&r);
    /* a serial loop may still read its bound from memory */
    const char *serial = "kernel k(c: i32[], x: f64[]) {\n"
                         "    for i in 0..len(x) {\n"
                         "        for j in 0..c[i] {\n"
                         "            x[i] += 1.0;\n"
                         "        }\n"
                         "    }\n"
                         "}\n";
    r = compile(serial, strlen(serial));
    cr_expect(r.m != NULL, "%s", r.diags);
    done(&r);
}

Test(limits, range_length) {
    const char *bad[] = {"-2147483647..2147483647", "-1..2147483647",
                         "i64(-1)..9223372036854775807"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        kern_buf b = {0};
        buf_printf(&b,
                   "kernel k(x: f64[]) {\n    for i in 0..len(x) {\n        for t in %s {\n"
                   "            x[i] += 1.0;\n        }\n    }\n}\n",
                   bad[i]);
        expect_error(b.data, b.len, "index can count");
        buf_free(&b);
    }
    /* the longest i32 range still counts: 0..2^31 - 1 */
    const char *ok = "kernel k(x: f64[]) {\n    for i in 0..len(x) {\n"
                     "        for t in 0..2147483647 {\n            break;\n        }\n    }\n}\n";
    result r = compile(ok, strlen(ok));
    cr_expect(r.m != NULL, "%s", r.diags);
    done(&r);
}

Test(limits, integer_literals) {
    const char *src = "kernel k(x: i32[]) {\n    for i in 0..len(x) {\n        x[i] = 010;\n"
                      "    }\n}\n";
    expect_error(src, strlen(src), "no octal literals");
    const char *ok = "kernel k(x: i32[]) {\n    for i in 0..len(x) {\n        x[i] = 10 + 0x10 + 0;"
                     "\n    }\n}\n";
    result r = compile(ok, strlen(ok));
    cr_assert(r.m, "%s", r.diags);
    int32_t v[2] = {0, 0};
    ir_interp_arg a = ir_interp_array(TY_I32, v, 1, 2, 0, 0, 0);
    char err[256];
    cr_assert(ir_interp_run(r.m, "k", &a, 1, err, sizeof err), "%s", err);
    cr_expect_eq(v[0], 26);
    cr_expect_eq(v[1], 26);
    done(&r);
}

/* ---- Long straight-line code -------------------------------------------------------- */

/* 20000 statements v = v * c + x[i] * x[i] (CSE merges the repeated products and loads
 * of each statement, a removed value used by the next statement) and y[i] += v every
 * 100 statements (atomics that private_atomics turns into plain code, one use
 * replacement each): the result equals the same recurrence in C, and so does the
 * gradient of x. These are the passes that were quadratic; the timing is not tested. */
Test(limits, long_straight_line) {
    enum { L = 20000, N = 3 };
    kern_buf b = {0};
    buf_puts(&b, "kernel k(x: f64[], y: f64[]) {\n    for i in 0..len(x) {\n"
                 "        var v = x[i];\n");
    for (int s = 0; s < L; s++) {
        buf_puts(&b, "        v = v * 0.9999 + x[i] * x[i] * 0.0001;\n");
        if (s % 100 == 99)
            buf_puts(&b, "        y[i] += v;\n");
    }
    buf_puts(&b, "    }\n}\n");
    result r = compile(b.data, b.len);
    cr_assert(r.m, "%s", r.diags);
    double x[N] = {0.5, -1.25, 2}, y[N] = {1, 2, 3}, want[N];
    for (int i = 0; i < N; i++) {
        double v = x[i];
        want[i] = y[i];
        for (int s = 0; s < L; s++) {
            v = v * 0.9999 + x[i] * x[i] * 0.0001;
            if (s % 100 == 99)
                want[i] += v;
        }
    }
    ir_interp_arg a[2] = {ir_interp_array(TY_F64, x, 1, N, 0, 0, 0),
                          ir_interp_array(TY_F64, y, 1, N, 0, 0, 0)};
    char err[256];
    cr_assert(ir_interp_run(r.m, "k", a, 2, err, sizeof err), "%s", err);
    for (int i = 0; i < N; i++)
        cr_expect(fabs(y[i] - want[i]) <= 1e-9 * fabs(want[i]), "y[%d] = %.17g, want %.17g", i,
                  y[i], want[i]);
    /* the gradient: dL/dx with L = sum y, by f64 central differences of the C recurrence */
    double gx[N] = {0}, gy[N] = {1, 1, 1};
    ir_interp_arg ga[4] = {a[0], a[1], ir_interp_array(TY_F64, gx, 1, N, 0, 0, 0),
                           ir_interp_array(TY_F64, gy, 1, N, 0, 0, 0)};
    cr_assert(ir_interp_run(r.m, "k.grad", ga, 4, err, sizeof err), "%s", err);
    for (int i = 0; i < N; i++) {
        double h = 1e-6, sum[2];
        for (int side = 0; side < 2; side++) {
            double xi = x[i] + (side ? -h : h), v = xi;
            sum[side] = 0;
            for (int s = 0; s < L; s++) {
                v = v * 0.9999 + xi * xi * 0.0001;
                if (s % 100 == 99)
                    sum[side] += v;
            }
        }
        double fd = (sum[0] - sum[1]) / (2 * h);
        cr_expect(fabs(gx[i] - fd) <= 1e-5 * fmax(1, fabs(fd)), "x.grad[%d] = %.12g, fd %.12g", i,
                  gx[i], fd);
    }
    done(&r);
    buf_free(&b);
}

/* Everything the examples and golden programs hold that `check` accepts compiles, with
 * every gradient it can have, to a module that verifies. */
Test(limits, check_accepts_only_what_compiles) {
    const char *files[] = {
        "examples/simulate.kern",  "examples/saxpy.kern",   "examples/loss.kern",
        "examples/heat.kern",      "examples/bounce.kern",  "examples/stencil2d.kern",
        "examples/particles.kern", "examples/springs.kern", "examples/elastic.kern"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", KERN_SOURCE_ROOT, files[i]);
        size_t len;
        char *text = kc_read_source(path, &len);
        cr_assert_not_null(text, "%s", path);
        result r = compile(text, len); /* asserts that it compiles when it checks */
        cr_expect(r.m != NULL, "%s: %s", files[i], r.diags);
        done(&r);
        free(text);
    }
}

/* ---- Every limit, at it and one past it, on every code generator -------------------- */

/* A source at a limit compiles (with every gradient) and every code generator of this
 * build turns it into code or refuses it with a message, never a crash (issue 23: the
 * SPIR-V emitter once aborted on a kernel of 62 arrays, which the frontend accepted). */
static void emit_everywhere(const char *what, const char *src) {
    result r = compile(src, strlen(src));
    cr_assert(r.m, "%s: %s", what, r.diags);
    kc_ctx *cc = kc_ctx_new(); /* the default options */
    const char *targets[] = {"cpu", "cuda", "vulkan", "amdgpu"};
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        const kc_codegen *cg = kc_codegen_find(targets[t]);
        if (!cg)
            continue; /* not in this build */
        char err[1024] = "";
        size_t len = 0;
        char *code = cg->code ? cg->code(r.m, &cc->opts, &len, err, sizeof err)
                              : cg->emit(r.m, &cc->opts, "llvm", err, sizeof err);
        cr_expect(code || err[0], "%s on %s: refused without a message", what, targets[t]);
        if (!code)
            cr_expect_fail("%s on %s: %s", what, targets[t], err);
        free(code);
    }
    kc_ctx_free(cc);
    done(&r);
}

static char *local_array(int n) {
    kern_buf b = {0};
    buf_printf(&b,
               "kernel k(x: f32[], out: f32[]) {\n    for i in 0..len(x) {\n"
               "        var h: f32[%d];\n        for j in 0..%d { h[j] = x[i] * f32(j); }\n"
               "        var s = 0.0;\n        for j in 0..%d { s += h[j] * h[(j + 1) %% %d]; }\n"
               "        out[i] = s;\n    }\n}\n",
               n, n, n, n);
    return buf_take(&b);
}

static char *named(int len) {
    kern_buf b = {0};
    buf_puts(&b, "kernel ");
    for (int i = 0; i < len; i++)
        buf_putc(&b, (char)('a' + i % 26));
    buf_puts(&b, "(x: f32[]) {\n    for i in 0..len(x) { x[i] = x[i] * 2.0; }\n}\n");
    return buf_take(&b);
}

static char *scalars(int n) {
    kern_buf b = {0};
    buf_puts(&b, "kernel k(x: f32[]");
    for (int i = 0; i < n; i++)
        buf_printf(&b, ", s%d: f32", i);
    buf_puts(&b, ") {\n    for i in 0..len(x) {\n        var y = x[i];\n");
    for (int i = 0; i < n; i++)
        buf_printf(&b, "        y = y * 0.5 + s%d;\n", i);
    buf_puts(&b, "        x[i] = y;\n    }\n}\n");
    return buf_take(&b);
}

static char *arrays_and_loops(int narrays, int nloops) {
    kern_buf b = {0};
    buf_puts(&b, "kernel k(out: f32[], n: i32");
    for (int a = 0; a < narrays; a++)
        buf_printf(&b, ", a%d: f32[]", a);
    buf_puts(&b, ") {\n    for i in 0..len(out) {\n        var y = 0.0;\n");
    for (int a = 0; a < narrays; a++)
        buf_printf(&b, "        y = y + a%d[i];\n", a);
    for (int l = 0; l < nloops; l++)
        buf_printf(&b,
                   "        var k%d = 0;\n        while k%d < n { y = y * 0.9 + 0.1; k%d += 1; }\n",
                   l, l, l);
    buf_puts(&b, "        out[i] = y;\n    }\n}\n");
    return buf_take(&b);
}

Test(limits, each_limit_at_it_and_past_it) {
    char *src = local_array(256);
    emit_everywhere("a local array of 256 scalars", src);
    free(src);
    src = local_array(257);
    expect_error(src, strlen(src), "holds more than 256 scalars");
    free(src);

    src = named(KERN_MAX_NAME);
    emit_everywhere("a kernel name of 255 characters", src);
    free(src);
    src = named(KERN_MAX_NAME + 1);
    expect_error(src, strlen(src), "the longest allowed is 255");
    free(src);

    const char *dims4 = "kernel k(v: vec3[,,], out: f32[]) {\n    for i in 0..len(out) {\n"
                        "        out[i] = length(v[i, 0, 0]);\n    }\n}\n";
    emit_everywhere("a parameter of 4 dimensions in memory", dims4);
    const char *dims5 = "kernel k(v: vec3[,,,], out: f32[]) {\n    for i in 0..len(out) {\n"
                        "        out[i] = length(v[i, 0, 0, 0]);\n    }\n}\n";
    expect_error(dims5, strlen(dims5), "has 5 dimensions in memory");

    src = grid(8);
    emit_everywhere("a parallel for of 8 ranges", src);
    free(src);

    /* no limits: parameters, arrays, adstacks (each grows what the emitters hold) */
    src = arrays_and_loops(70, 30);
    emit_everywhere("70 arrays and 30 while loops", src);
    free(src);
    src = scalars(300);
    emit_everywhere("300 scalar parameters", src);
    free(src);
}
