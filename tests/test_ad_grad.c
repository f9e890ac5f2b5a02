/* test_ad_grad.c - what the gradient transform keeps on adstacks (passes/ad_grad.c).
 *
 * The gradients themselves are checked against finite differences by the corpus
 * (test_grad_corpus.c); these tests pin down the memory side: which loop-carried values
 * get an adstack, of which type and capacity. Integer inductions (n += c) and values a
 * loop never changes are recomputed from the iteration number instead of pushed; anything
 * else the reverse sweep needs is pushed. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "../compiler/driver.h"

static ir_module *grad_of(kc_ctx **out, const char *src) {
    kc_ctx *c = kc_ctx_new();
    c->opts.grad = KC_GRAD_ALL;
    ir_module *m = kc_compile_source(c, "t.kern", src, strlen(src));
    if (!m)
        diag_print_all(stderr, &c->diags);
    cr_assert(m, "does not compile:\n%s", src);
    *out = c;
    return m;
}

/* The adstack types of kernel k.grad, as a string of letters: f (f32), d (f64), i (i32),
 * b (bool), l (i64), u (u32). */
static void stack_types(const ir_module *m, const char *k, char *buf) {
    char name[64];
    snprintf(name, sizeof name, "%s.grad", k);
    const ir_kernel *g = ir_kernel_find(m, name);
    cr_assert(g, "no %s", name);
    uint32_t n = 0;
    for (uint32_t i = 0; i < g->nadstacks; i++) {
        switch (g->adstacks[i].type->kind) {
        case TY_F32: buf[n++] = 'f'; break;
        case TY_F64: buf[n++] = 'd'; break;
        case TY_I32: buf[n++] = 'i'; break;
        case TY_U32: buf[n++] = 'u'; break;
        case TY_I64: buf[n++] = 'l'; break;
        case TY_BOOL: buf[n++] = 'b'; break;
        default: buf[n++] = '?'; break;
        }
    }
    buf[n] = 0;
}

/* The text form of the capacity of adstack s of g, in a static buffer. */
static const char *cap_text(const ir_kernel *g, uint32_t s) {
    static char out[256];
    cr_assert(g && s < g->nadstacks);
    kern_buf b = {0};
    sz_print(&b, g->adstacks[s].cap);
    snprintf(out, sizeof out, "%s", b.data);
    buf_free(&b);
    return out;
}

Test(ad_grad, inductions_are_recomputed) {
    const char *src = "kernel k(x: f32[], y: f32[], steps: i32) {\n"
                      "    for i in 0..len(x) {\n"
                      "        var v = x[i];\n"
                      "        var n = 3;\n"
                      "        var m = 7;\n"
                      "        for t in 0..steps {\n"
                      "            v = sin(v) + f32(n) * 0.01 + f32(m) * 0.001;\n"
                      "            n += 2;\n"
                      "            m -= steps;\n"
                      "        }\n"
                      "        y[i] = v;\n"
                      "    }\n"
                      "}\n";
    kc_ctx *c;
    ir_module *m = grad_of(&c, src);
    char t[32];
    stack_types(m, "k", t);
    cr_expect_str_eq(t, "f", "only v is pushed (n and m are inductions), got \"%s\"", t);
    cr_expect_str_eq(cap_text(ir_kernel_find(m, "k.grad"), 0), "(max 0 (param 2))");
    ir_module_free(m);
    kc_ctx_free(c);
}

Test(ad_grad, while_counter_recomputed_flags_pushed) {
    const char *src = "kernel w(x: f64[], y: f64[]) {\n"
                      "    for i in 0..len(x) {\n"
                      "        var z = x[i];\n"
                      "        var n = 0;\n"
                      "        while abs(z) > 0.001 && n < 40 {\n"
                      "            z = z * 0.5 + 0.1 * sin(z);\n"
                      "            n += 1;\n"
                      "        }\n"
                      "        y[i] = z;\n"
                      "    }\n"
                      "}\n";
    kc_ctx *c;
    ir_module *m = grad_of(&c, src);
    char t[32];
    stack_types(m, "w", t);
    cr_expect_str_eq(t, "d", "z only, got \"%s\"", t);
    /* a while loop: the default capacity plus the slot of the final test */
    cr_expect_str_eq(cap_text(ir_kernel_find(m, "w.grad"), 0), "1025");
    ir_module_free(m);
    kc_ctx_free(c);
}

Test(ad_grad, conditional_counts_are_pushed) {
    const char *src =
        "kernel b(x: f32[], y: f32[], hits: i32[], steps: i32) {\n"
        "    for i in 0..len(x) {\n"
        "        var v = x[i];\n"
        "        var h = 0;\n"
        "        for t in 0..steps {\n"
        "            if v > 0.5 { v = v * 0.3; h += 1; } else { v = v + 0.2 * f32(h); }\n"
        "        }\n"
        "        y[i] = v;\n"
        "        hits[i] = h;\n"
        "    }\n"
        "}\n";
    kc_ctx *c;
    ir_module *m = grad_of(&c, src);
    char t[32];
    stack_types(m, "b", t);
    cr_expect(strchr(t, 'f') && strchr(t, 'i'), "v and h are pushed, got \"%s\"", t);
    ir_module_free(m);
    kc_ctx_free(c);
}
