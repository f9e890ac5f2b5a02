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
#include "../passes/passes.h"

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
        "            if v > 0.5 { v = v * 0.3; h += 1; } else { v = v * (1.0 - 0.01 * f32(h)); }\n"
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

/* A carried value whose pops no adjoint reads has no adstack (passes/dce.c): h only added
 * to v (d(v + 0.2 h)/dv = 1), and a while loop's step d only in its condition; but a loop
 * none of whose values is read (a linear one) keeps one, so that running past
 * --ad-stack-size is still reported. */
Test(ad_grad, values_the_adjoints_do_not_read_are_not_pushed) {
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
        "}\n"
        "kernel k(x0: f32[], out: f32[]) {\n"
        "    for i in 0..len(x0) {\n"
        "        var x = x0[i];\n"
        "        var d = 1.0;\n"
        "        var n = 0;\n"
        "        while n < 100 && abs(d) > 1e-6 { let xn = 0.3 + 0.5 * sin(x); d = xn - x; x = xn; "
        "n += 1; }\n"
        "        out[i] = x;\n"
        "    }\n"
        "}\n"
        "kernel lin(x: f32[], y: f32[]) {\n"
        "    for i in 0..len(x) { var v = x[i]; while v < 100.0 { v = v * 2.0 + 1.0; } y[i] = v; "
        "}\n"
        "}\n";
    kc_ctx *c;
    ir_module *m = grad_of(&c, src);
    char t[32];
    stack_types(m, "b", t);
    cr_expect_str_eq(t, "f", "v only, got \"%s\"", t);
    stack_types(m, "k", t);
    cr_expect_str_eq(t, "f", "x only, not d, got \"%s\"", t);
    /* a loop none of whose values its adjoint reads keeps one stack: its capacity check */
    stack_types(m, "lin", t);
    cr_expect_str_eq(t, "f", "the linear loop keeps v's stack, got \"%s\"", t);
    ir_module_free(m);
    kc_ctx_free(c);
}

static int count_of(const char *text, const char *s) {
    int n = 0;
    for (const char *p = strstr(text, s); p; p = strstr(p + 1, s))
        n++;
    return n;
}

/* In an aligned reverse loop, an adjoint add whose element is the same in every lane
 * (w.grad[t], t from the shared counter) moves after the iteration's if, so that all the
 * lanes add together; one at a lane's own element (w.grad[s + t], s = start[i]) stays
 * inside, where only the lanes that reverse the iteration run it. */
Test(ad_grad, uniform_adjoint_adds_leave_the_aligned_iteration) {
    const char *src = "kernel k(x: f32[], w: f32[], v: f32[], start: i32[], n: i32[], y: f32[]) {\n"
                      "  for i in 0..len(x) { var a = x[i]; let s = start[i];\n"
                      "    for t in 0..n[i] { a = sin(a) * w[t] + v[s + t] * a; }\n"
                      "    y[i] = a; } }\n";
    kc_ctx *c;
    ir_module *m = grad_of(&c, src);
    ir_kernel *k = ir_kernel_find(m, "k.grad");
    cr_assert(k);
    int found = 0;
    /* the reverse loop: the for whose body holds the aligned if */
    for (ir_op *task = k->body->first; task; task = task->next) {
        if (task->code != IR_PARALLEL)
            continue;
        for (ir_op *f = task->regions[0]->first; f; f = f->next) {
            if (f->code != IR_FOR)
                continue;
            for (ir_op *op = f->regions[0]->first; op; op = op->next) {
                if (op->code == IR_ATOMIC_ADD &&
                    strcmp(op->operands[0]->name ? op->operands[0]->name : "", "w.grad") == 0)
                    found |= 1; /* in the loop's body, after the if */
                if (op->code != IR_IF)
                    continue;
                for (ir_op *in = op->regions[0]->first; in; in = in->next) {
                    if (in->code != IR_ATOMIC_ADD)
                        continue;
                    const char *nm = in->operands[0]->name ? in->operands[0]->name : "";
                    if (strcmp(nm, "v.grad") == 0)
                        found |= 2; /* inside the if */
                    if (strcmp(nm, "w.grad") == 0)
                        found |= 4;
                }
            }
        }
    }
    kern_buf b = {0};
    ir_print(&b, m, "k.grad");
    cr_expect(found & 1, "w.grad's add is not in the reverse loop's body:\n%s", b.data);
    cr_expect(found & 2, "v.grad's add left the aligned if:\n%s", b.data);
    cr_expect(!(found & 4), "w.grad's add stayed in the aligned if:\n%s", b.data);
    buf_free(&b);
    ir_module_free(m);
    kc_ctx_free(c);
}

/* The divergence analysis (passes/divergence.c): a for loop's index varies with its start,
 * not with its bound. Under a varying bound (t in 0..n[i]) the lanes that run an iteration
 * together run it at one index, so w[t] is one load per vector (SIMD) and the loop still
 * runs masked; with a varying start (t in i % 3..len(w)) the index varies. The gradients through
 * such loops: the corpus and test_lanes.c. */
Test(ad_grad, divergence_a_for_index_varies_with_its_start_only) {
    const struct {
        const char *head;
        bool index_varies, loop_diverges;
    } cases[] = {
        {"for t in 0..len(w)", false, false},
        {"for t in 0..n[i]", false, true},
        {"for t in i % 3..len(w)", true, true},
        {"for t in n[i] - 4..n[i]", true, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char src[512];
        snprintf(src, sizeof src,
                 "kernel k(x: f32[], w: f32[], n: i32[], y: f32[]) {\n"
                 "  for i in 0..len(x) { var v = x[i];\n"
                 "    %s { v = sin(v) * w[t]; }\n"
                 "    y[i] = v; } }\n",
                 cases[i].head);
        kc_ctx *c;
        ir_module *m = grad_of(&c, src);
        const ir_kernel *k = ir_kernel_find(m, "k");
        cr_assert(k, "%s: no kernel k", cases[i].head);
        const ir_op *task = NULL, *loop = NULL;
        ir_foreach_op(op, k->body) if (op->code == IR_PARALLEL) task = op;
        cr_assert(task);
        ir_foreach_op(op, task->regions[0]) if (op->code == IR_FOR) loop = op;
        cr_assert(loop, "%s: no loop", cases[i].head);
        ir_divergence d = {0};
        ir_divergence_task(&d, k, task);
        cr_expect_eq(ir_div_varying(&d, loop->regions[0]->args[0]), cases[i].index_varies,
                     "%s: the index", cases[i].head);
        cr_expect_eq(ir_div_loop_divergent(&d, loop), cases[i].loop_diverges, "%s: the loop",
                     cases[i].head);
        const ir_op *load = NULL; /* w[t] */
        ir_foreach_op(op, loop->regions[0]) if (op->code == IR_LOAD) load = op;
        cr_assert(load, "%s: no load", cases[i].head);
        cr_expect_eq(ir_div_access_varying(&d, load), cases[i].index_varies, "%s: w[t]",
                     cases[i].head);
        ir_divergence_free(&d);
        ir_module_free(m);
        kc_ctx_free(c);
    }
}

/* Counts the loads of array a in r and its nested regions, and those whose index
 * ir_index_in_dim proves (passes/inbounds.c). */
static void w_loads(const ir_region *r, const ir_value *a, int *n, int *proven) {
    ir_foreach_op(op, r) {
        if (op->code == IR_LOAD && op->operands[0] == a) {
            (*n)++;
            *proven += ir_index_in_dim(op->operands[1], a, 0);
        }
        for (uint32_t i = 0; i < op->nregions; i++)
            w_loads(op->regions[i], a, n, proven);
    }
}

/* Indices in bounds by construction: a loop's or task's index from 0 to the array's own
 * length, and the reverse sweep's len - 1 - r over such an r; nothing else (another
 * array's length, another start, an offset, a per-item bound). */
Test(ad_grad, indices_in_bounds_by_construction) {
    const struct {
        const char *loop, *index;
        bool proven;
    } cases[] = {
        {"for t in 0..len(w)", "t", true},      {"for t in 1..len(w)", "t", false},
        {"for t in 0..len(w)", "t + 1", false}, {"for t in 0..len(x)", "t", false},
        {"for t in 0..n[i]", "t", false},       {"for t in 0..len(w) - 1", "t", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char src[512];
        snprintf(src, sizeof src,
                 "kernel k(x: f32[], w: f32[], n: i32[], y: f32[]) {\n"
                 "  for i in 0..len(x) { var v = x[i];\n"
                 "    %s { v = sin(v) * w[%s]; }\n"
                 "    y[i] = v; } }\n",
                 cases[i].loop, cases[i].index);
        kc_ctx *c;
        ir_module *m = grad_of(&c, src);
        const char *names[2] = {"k", "k.grad"};
        for (int g = 0; g < 2; g++) {
            const ir_kernel *k = ir_kernel_find(m, names[g]);
            cr_assert(k, "no %s", names[g]);
            int n = 0, proven = 0;
            w_loads(k->body, k->body->args[1], &n, &proven);
            cr_assert_gt(n, 0, "%s: no load of w in %s", cases[i].loop, names[g]);
            cr_expect_eq(proven, cases[i].proven ? n : 0, "%s, w[%s] in %s: %d of %d proven",
                         cases[i].loop, cases[i].index, names[g], proven, n);
            /* x[i] of the task over 0..len(x): proven; y[i]: not */
            int nx = 0, px = 0;
            w_loads(k->body, k->body->args[0], &nx, &px);
            cr_expect(nx > 0 && px == nx, "%s: x[i] in %s: %d of %d", cases[i].loop, names[g], px,
                      nx);
        }
        ir_module_free(m);
        kc_ctx_free(c);
    }
}

/* Loops whose trip count differs between work items are reversed over lanemax(n)
 * iterations (passes/ad_grad.c, "Aligned reverse loops"); uniform ones as before. The
 * gradients: test_lanes.c. */
Test(ad_grad, divergent_loops_get_the_aligned_reverse_and_uniform_ones_do_not) {
    const struct {
        const char *src, *why;
        int lanemax; /* in k.grad */
    } cases[] = {
        {"kernel k(x: f32[], w: f32[], n: i32[], y: f32[]) {\n"
         "  for i in 0..len(x) { var v = x[i];\n"
         "    for t in 0..len(w) { v = sin(v) * w[t]; }\n"
         "    y[i] = v; } }\n",
         "a uniform bound", 0},
        {"kernel k(x: f32[], w: f32[], n: i32[], y: f32[]) {\n"
         "  for i in 0..len(x) { var v = x[i];\n"
         "    for t in 0..n[i] { for u in 0..3 { v = sin(v) * w[t + u]; } }\n"
         "    y[i] = v; } }\n",
         "a varying bound around a uniform one", 1},
        {"kernel k(x: f32[], w: f32[], n: i32[], y: f32[]) {\n"
         "  for i in 0..len(x) { var v = x[i];\n"
         "    for t in 0..len(w) { if v > 2.0 { break; } v = sin(v) * w[t] + v; }\n"
         "    y[i] = v; } }\n",
         "a break on a varying value", 1},
        {"kernel k(x: f32[], w: f32[], n: i32[], y: f32[]) {\n"
         "  for i in 0..len(x) { var v = x[i];\n"
         "    while v < 4.0 { v = v * 1.5 + w[0]; }\n"
         "    y[i] = v; } }\n",
         "a while with a data-dependent exit", 1},
        {"kernel k(x: f32[], w: f32[], n: i32, y: f32[]) {\n"
         "  for i in 0..len(x) { var v = x[i]; var k = 0;\n"
         "    while k < n { v = v * 1.5 + w[k]; k += 1; }\n"
         "    y[i] = v; } }\n",
         "a while whose exit is uniform", 0},
        {"kernel k(x: f32[], w: f32[], n: i32[], y: f32[]) {\n"
         "  for i in 0..len(x) { var v = x[i];\n"
         "    if v > 0.0 { for t in 0..n[i] { for u in 0..(n[i] + t) % 5 { v = sin(v) * w[u]; } } "
         "}\n"
         "    while v < 4.0 { v = v * 1.5 + w[0]; }\n"
         "    y[i] = v; } }\n",
         "in a varying if: a for, the for in it; a while", 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kc_ctx *c;
        ir_module *m = grad_of(&c, cases[i].src);
        kern_buf b = {0};
        ir_print(&b, m, "k.grad");
        cr_expect_eq(count_of(b.data, "= lanemax "), cases[i].lanemax, "%s: %d lanemax in\n%s",
                     cases[i].why, count_of(b.data, "= lanemax "), b.data);
        /* the text form parses back to the same text */
        kern_source src = {"<k.grad>", b.data, b.len};
        ir_module *p = ir_parse(b.data, b.len, &src, &c->diags);
        if (!p)
            diag_print_all(stderr, &c->diags);
        cr_assert(p, "%s: the printed IR does not parse", cases[i].why);
        kern_buf b2 = {0};
        ir_print(&b2, p, NULL);
        cr_expect_str_eq(b2.data, b.data, "%s: print -> parse -> print differs", cases[i].why);
        buf_free(&b2);
        ir_module_free(p);
        buf_free(&b);
        ir_module_free(m);
        kc_ctx_free(c);
    }
}
