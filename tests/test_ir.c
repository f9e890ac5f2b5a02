/* test_ir.c - tests of the IR core (suite `ir`): builder, printer, parser, verifier.
 *
 *   - IR built with the builder, its printed text compared with text written by hand;
 *   - every .ir file of tests/golden/irtext: parses, verifies, prints back byte for byte;
 *   - every tests/golden/verify/NAME.ir: parses, is rejected with exactly the diagnostics
 *     of NAME.err ("LINE:COL: message" per line, LINE:COL being the op's !LINE:COL);
 *     UPDATE=1 rewrites the .err files from the current output (review the diff);
 *   - parser errors on malformed text, with their line:col in the text;
 *   - float constants of random bit patterns survive print -> parse bit for bit;
 *   - mutated golden texts never crash the parser, and what parses and verifies prints
 *     back to the same text;
 *   - invalid IR built in C (what the text cannot express) is reported, printed without
 *     crashing, and ir_verify_or_die aborts. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../ir/ir.h"

#ifndef KERN_SOURCE_ROOT
#define KERN_SOURCE_ROOT "."
#endif

/* ---- Helpers ---------------------------------------------------------------------- */

static char *print_module(const ir_module *m) {
    kern_buf b = {0};
    ir_print(&b, m, NULL);
    return buf_take(&b);
}

/* Diagnostics as "LINE:COL: message\n" lines. */
static char *format_diags(const diag_sink *s) {
    kern_buf b = {0};
    for (int i = 0; i < s->len; i++)
        buf_printf(&b, "%u:%u: %s\n", s->items[i].loc.line, s->items[i].loc.col,
                   s->items[i].message);
    return buf_take(&b);
}

typedef struct parsed {
    ir_module *m;
    char *diags; /* parse diagnostics */
} parsed;

static parsed parse_text(const char *text) {
    arena a;
    arena_init(&a);
    diag_sink s;
    diag_init(&s, &a);
    kern_source src = {"<test>", text, strlen(text)};
    parsed r;
    r.m = ir_parse(text, strlen(text), &src, &s);
    r.diags = format_diags(&s);
    diag_free(&s);
    arena_free(&a);
    return r;
}

/* Verifier diagnostics of m; NULL when it verifies. */
static char *verify_text(const ir_module *m) {
    arena a;
    arena_init(&a);
    diag_sink s;
    diag_init(&s, &a);
    bool ok = ir_verify(m, &s);
    char *d = format_diags(&s);
    cr_assert_eq(ok, s.len == 0, "ir_verify's result disagrees with its diagnostics");
    diag_free(&s);
    arena_free(&a);
    if (ok) {
        free(d);
        return NULL;
    }
    return d;
}

/* Names of the files of dir ending in ext, sorted; NULL-terminated. */
static char **list_files(const char *dir, const char *ext, int *count) {
    DIR *d = opendir(dir);
    cr_assert(d, "cannot open %s", dir);
    kern_ptrvec v = {0};
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name), x = strlen(ext);
        if (n > x && strcmp(e->d_name + n - x, ext) == 0)
            ptrvec_push(&v, strdup(e->d_name));
    }
    closedir(d);
    for (int i = 0; i < v.len; i++) /* insertion sort: a stable order for messages */
        for (int j = i; j > 0 && strcmp(v.data[j - 1], v.data[j]) > 0; j--) {
            void *t = v.data[j];
            v.data[j] = v.data[j - 1];
            v.data[j - 1] = t;
        }
    ptrvec_push(&v, NULL);
    *count = v.len - 1;
    return (char **)v.data;
}

static void free_files(char **f) {
    for (char **p = f; *p; p++)
        free(*p);
    free(f);
}

static char *read_golden(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *t = kern_read_file(path, NULL);
    cr_assert(t, "cannot read %s", path);
    return t;
}

/* ---- The opcode table ------------------------------------------------------------- */

Test(ir, opcode_table_and_lookup) {
    /* A few entries checked against ops.def as documented in docs/ir.md. */
    cr_assert_str_eq(ir_info(IR_ADD)->name, "add");
    cr_assert_eq(ir_info(IR_ADD)->nops, 2);
    cr_assert(ir_info(IR_ADD)->flags & OPF_COMMUT);
    cr_assert_eq(ir_info(IR_LOAD)->nops, -1);
    cr_assert_eq(ir_info(IR_IF)->nregions, 2);
    cr_assert_eq(ir_info(IR_WHILE)->nregions, 2);
    cr_assert(ir_info(IR_YIELD)->flags & OPF_TERM);
    cr_assert_eq(ir_info(IR_LT)->rule, T_BOOL);
    cr_assert_str_eq(ir_info(IR_ATOMIC_MAX)->name, "atomic_max");
    cr_assert_str_eq(ir_info(IR_SERIAL)->name, "serial");
    for (int c = 0; c < IR__COUNT; c++) {
        const char *n = ir_opinfos[c].name;
        cr_assert_eq(ir_opcode_lookup(n, (int)strlen(n)), (ir_opcode)c, "lookup of %s", n);
    }
    cr_assert_eq(ir_opcode_lookup("addx", 4), IR__COUNT);
    cr_assert_eq(ir_opcode_lookup("add", 2), IR__COUNT); /* "ad" */
    cr_assert_eq(ir_opcode_lookup("", 0), IR__COUNT);
    cr_assert_eq(ir_opcode_lookup("atomic_add", 6), IR__COUNT);
}

/* ---- Builder ---------------------------------------------------------------------- */

static kern_loc L(uint32_t line, uint32_t col) { return (kern_loc){line, col}; }

/* The kernel of docs/ir.md's example, built through the builder. */
static ir_module *build_simulate(void) {
    ir_module *m = ir_module_new("examples/simulate.kern");
    ir_param ps[] = {
        {.name = "x0", .type = ty_array(ty_f32(), 1), .nograd = false, .loc = L(9, 17)},
        {.name = "w", .type = ty_array(ty_f32(), 1), .nograd = false, .loc = L(9, 30)},
        {.name = "out", .type = ty_array(ty_f32(), 1), .nograd = false, .loc = L(9, 42)},
        {.name = "steps", .type = ty_i32(), .nograd = false, .loc = L(9, 56)},
        {.name = "k", .type = ty_f32(), .nograd = true, .loc = L(9, 68)},
    };
    ir_kernel *k = ir_kernel_new(m, "simulate", L(9, 1), ps, 5);
    ir_value *x0 = k->body->args[0], *w = k->body->args[1], *out = k->body->args[2],
             *steps = k->body->args[3], *kk = k->body->args[4];
    ir_builder b = ir_builder_at_end(m, k->body);
    b.loc = L(10, 17);
    ir_value *n = ir_dim(&b, x0, 0);
    b.loc = L(10, 14);
    ir_value *zero = ir_const_int(&b, ty_i32(), 0);
    b.loc = L(10, 5);
    ir_value *bounds[2] = {zero, n};
    ir_op *par = ir_parallel(&b, bounds, 1);
    ir_value *i = par->regions[0]->args[0];
    ir_builder in = ir_builder_at_end(m, par->regions[0]);
    in.loc = L(11, 17);
    ir_value *x = ir_load(&in, x0, &i, 1);
    in.loc = L(12, 17);
    ir_value *v0 = ir_const_float(&in, ty_f32(), 0.0);
    in.loc = L(13, 9);
    ir_value *inits[2] = {x, v0};
    ir_op *loop = ir_for(&in, zero, steps, inits, 2, false);
    ir_region *body = loop->regions[0];
    ir_value *t = body->args[0], *xc = body->args[1], *vc = body->args[2];
    ir_builder lb = ir_builder_at_end(m, body);
    lb.loc = L(14, 21);
    ir_value *wt = ir_load(&lb, w, &t, 1);
    lb.loc = L(14, 19);
    ir_value *f = ir_binop(&lb, IR_MUL, wt, xc);
    lb.loc = L(15, 21);
    ir_value *damp = ir_binop(&lb, IR_MUL, kk, vc);
    lb.loc = L(15, 19);
    ir_value *acc = ir_binop(&lb, IR_SUB, f, damp);
    lb.loc = L(16, 17);
    ir_value *v1 = ir_binop(&lb, IR_ADD, vc, acc);
    lb.loc = L(17, 17);
    ir_value *x1 = ir_binop(&lb, IR_ADD, xc, v1);
    lb.loc = L(13, 9);
    ir_value *ys[2] = {x1, v1};
    ir_yield(&lb, ys, 2);
    in.loc = L(19, 9);
    ir_store(&in, out, &i, 1, loop->results[0]);
    return m;
}

static const char *simulate_text =
    "source \"examples/simulate.kern\"\n"
    "\n"
    "kernel @simulate(%x0: f32[], %w: f32[], %out: f32[], %steps: i32, nograd %k: f32) !9:1 {\n"
    "  %0 = dim %x0, 0 : i32 !10:17\n"
    "  %1 = const 0 : i32 !10:14\n"
    "  parallel (%2 = %1 to %0) !10:5 {\n"
    "    %3 = load %x0[%2] : f32 !11:17\n"
    "    %4 = const 0.0 : f32 !12:17\n"
    "    %5:2 = for %6 = %1 to %steps iter(%7 = %3, %8 = %4) : f32, f32 !13:9 {\n"
    "      %9 = load %w[%6] : f32 !14:21\n"
    "      %10 = mul %9, %7 : f32 !14:19\n"
    "      %11 = mul %k, %8 : f32 !15:21\n"
    "      %12 = sub %10, %11 : f32 !15:19\n"
    "      %13 = add %8, %12 : f32 !16:17\n"
    "      %14 = add %7, %13 : f32 !17:17\n"
    "      yield %14, %13 !13:9\n"
    "    }\n"
    "    store %out[%2], %5#0 !19:9\n"
    "  }\n"
    "}\n";

Test(ir, builder_prints_expected_text) {
    ir_module *m = build_simulate();
    cr_assert_null(verify_text(m));
    char *text = print_module(m);
    cr_assert_str_eq(text, simulate_text);
    /* the same text parses back to the same print */
    parsed p = parse_text(text);
    cr_assert_not_null(p.m, "%s", p.diags);
    char *again = print_module(p.m);
    cr_assert_str_eq(again, simulate_text);
    /* only one kernel, by name; no source line for a single kernel */
    kern_buf b = {0};
    ir_print(&b, m, "simulate");
    cr_assert_str_eq(b.data, simulate_text + strlen("source \"examples/simulate.kern\"\n\n"));
    buf_free(&b);
    ir_print(&b, m, "nope");
    cr_assert_null(b.data);
    cr_assert_eq(ir_kernel_find(m, "simulate"), m->kernels);
    cr_assert_null(ir_kernel_find(m, "simulat"));
    free(again);
    free(p.diags);
    ir_module_free(p.m);
    free(text);
    ir_module_free(m);
}

/* Control flow through the builder: while, if with results, early-exit for, 2-D parallel. */
Test(ir, builder_control_flow_prints_expected_text) {
    ir_module *m = ir_module_new(NULL);
    ir_param ps[] = {{.name = "a", .type = ty_array(ty_i64(), 2), .nograd = false, .loc = {0, 0}}, {.name = "n", .type = ty_i64(), .nograd = false, .loc = {0, 0}}};
    ir_kernel *k = ir_kernel_new(m, "cf", L(1, 1), ps, 2);
    ir_value *a = k->body->args[0], *n = k->body->args[1];
    ir_builder top = ir_builder_at_end(m, k->body);
    ir_value *zero = ir_const_int(&top, ty_i64(), 0);
    ir_value *bounds[4] = {zero, n, zero, n};
    top.loc = L(2, 1);
    ir_op *par = ir_parallel(&top, bounds, 2);
    ir_value *i = par->regions[0]->args[0], *j = par->regions[0]->args[1];
    ir_builder b = ir_builder_at_end(m, par->regions[0]);

    ir_op *w = ir_while(&b, &i, 1);
    ir_builder wb = ir_builder_at_end(m, w->regions[0]);
    ir_value *go = ir_binop(&wb, IR_LT, w->regions[0]->args[0], j);
    ir_condition(&wb, go, w->regions[0]->args, 1);
    wb = ir_builder_at_end(m, w->regions[1]);
    ir_value *one = ir_const_int(&wb, ty_i64(), 1);
    ir_value *next = ir_binop(&wb, IR_ADD, w->regions[1]->args[0], one);
    ir_yield(&wb, &next, 1);

    const kern_type *t64 = ty_i64();
    ir_value *c = ir_binop(&b, IR_EQ, w->results[0], j);
    ir_op *iff = ir_if(&b, c, &t64, 1);
    ir_builder tb = ir_builder_at_end(m, iff->regions[0]);
    ir_yield(&tb, &i, 1);
    tb = ir_builder_at_end(m, iff->regions[1]);
    ir_value *ng = ir_unop(&tb, IR_NEG, j);
    ir_yield(&tb, &ng, 1);

    ir_op *loop = ir_for(&b, zero, n, &iff->results[0], 1, true);
    ir_builder lb = ir_builder_at_end(m, loop->regions[0]);
    ir_value *idx[2] = {i, loop->regions[0]->args[0]};
    ir_value *el = ir_load(&lb, a, idx, 2);
    ir_value *sum = ir_binop(&lb, IR_ADD, loop->regions[0]->args[1], el);
    ir_value *more = ir_binop(&lb, IR_LT, sum, n);
    ir_value *ys[2] = {more, sum};
    ir_yield(&lb, ys, 2);
    ir_value *at[2] = {n, zero};
    ir_store(&b, a, at, 2, loop->results[0]);
    cr_assert_null(verify_text(m));
    char *text = print_module(m);
    cr_assert_str_eq(text, "kernel @cf(%a: i64[,], %n: i64) !1:1 {\n"
                           "  %0 = const 0 : i64\n"
                           "  parallel (%1 = %0 to %n, %2 = %0 to %n) !2:1 {\n"
                           "    %3 = while (%4 = %1) : i64 {\n"
                           "      %5 = lt %4, %2 : bool\n"
                           "      condition %5, %4\n"
                           "    } do (%6) {\n"
                           "      %7 = const 1 : i64\n"
                           "      %8 = add %6, %7 : i64\n"
                           "      yield %8\n"
                           "    }\n"
                           "    %9 = eq %3, %2 : bool\n"
                           "    %10 = if %9 : i64 {\n"
                           "      yield %1\n"
                           "    } else {\n"
                           "      %11 = neg %2 : i64\n"
                           "      yield %11\n"
                           "    }\n"
                           "    %12 = for early_exit %13 = %0 to %n iter(%14 = %10) : i64 {\n"
                           "      %15 = load %a[%1, %13] : i64\n"
                           "      %16 = add %14, %15 : i64\n"
                           "      %17 = lt %16, %n : bool\n"
                           "      yield %17, %16\n"
                           "    }\n"
                           "    store %a[%n, %0], %12\n"
                           "  }\n"
                           "}\n");
    free(text);
    ir_module_free(m);
}

typedef struct kfx {
    ir_module *m;
    ir_kernel *k;
    ir_builder top;
    ir_op *task;
    ir_builder b;                               /* inside a serial task */
    ir_value *a2, *f, *d, *i, *l, *u, *bo, *ib; /* f32[,], f32, f64, i32, i64, u32, bool, i32[] */
} kfx;

static kfx kfx_new(void) {
    kfx x;
    x.m = ir_module_new(NULL);
    ir_param ps[] = {
        {.name = "a2", .type = ty_array(ty_f32(), 2), .nograd = false, .loc = {0, 0}},
        {.name = "f", .type = ty_f32(), .nograd = false, .loc = {0, 0}},
        {.name = "d", .type = ty_f64(), .nograd = false, .loc = {0, 0}},
        {.name = "i", .type = ty_i32(), .nograd = false, .loc = {0, 0}},
        {.name = "l", .type = ty_i64(), .nograd = false, .loc = {0, 0}},
        {.name = "u", .type = ty_u32(), .nograd = false, .loc = {0, 0}},
        {.name = "bo", .type = ty_bool(), .nograd = false, .loc = {0, 0}},
        {.name = "ib", .type = ty_array(ty_bool(), 1), .nograd = false, .loc = {0, 0}},
    };
    x.k = ir_kernel_new(x.m, "t", (kern_loc){0, 0}, ps, 8);
    ir_value **a = x.k->body->args;
    x.a2 = a[0], x.f = a[1], x.d = a[2], x.i = a[3], x.l = a[4], x.u = a[5], x.bo = a[6];
    x.ib = a[7];
    x.top = ir_builder_at_end(x.m, x.k->body);
    x.task = ir_serial(&x.top);
    x.b = ir_builder_at_end(x.m, x.task->regions[0]);
    return x;
}

Test(ir, builder_result_types_follow_the_rules) {
    kfx x = kfx_new();
    ir_builder *b = &x.b;
    cr_assert_eq(ir_binop(b, IR_ADD, x.f, x.f)->type, ty_f32());
    cr_assert_eq(ir_binop(b, IR_SHL, x.l, x.l)->type, ty_i64());
    cr_assert_eq(ir_binop(b, IR_LT, x.d, x.d)->type, ty_bool());
    cr_assert_eq(ir_binop(b, IR_EQ, x.bo, x.bo)->type, ty_bool());
    cr_assert_eq(ir_unop(b, IR_NOT, x.bo)->type, ty_bool());
    cr_assert_eq(ir_unop(b, IR_SQRT, x.d)->type, ty_f64());
    cr_assert_eq(ir_triop(b, IR_FMA, x.f, x.f, x.f)->type, ty_f32());
    cr_assert_eq(ir_triop(b, IR_CLAMP, x.u, x.u, x.u)->type, ty_u32());
    cr_assert_eq(ir_triop(b, IR_SELECT, x.bo, x.i, x.i)->type, ty_i32());
    cr_assert_eq(ir_select(b, x.bo, x.d, x.d)->type, ty_f64());
    cr_assert_eq(ir_cast(b, ty_u32(), x.f)->type, ty_u32());
    ir_value *dim = ir_dim(b, x.a2, 1);
    cr_assert_eq(dim->type, ty_i32());
    cr_assert_eq(dim->def->imm.i, 1);
    ir_value *idx[2] = {x.i, x.l};
    cr_assert_eq(ir_load(b, x.a2, idx, 2)->type, ty_f32());
    ir_value *at = ir_atomic(b, IR_ATOMIC_MIN, x.a2, idx, 2, x.f);
    cr_assert_eq(at->type, ty_f32());
    cr_assert_eq(at->def->noperands, 4);
    cr_assert_eq(ir_const_bool(b, true)->type, ty_bool());
    /* constants wrap to their type; f32 constants are rounded to float once */
    cr_assert_eq(ir_const_int(b, ty_i32(), 0x1ffffffffLL)->def->imm.i, -1);
    cr_assert_eq(ir_const_int(b, ty_u32(), -1)->def->imm.i, 4294967295LL);
    cr_assert_eq(ir_const_int(b, ty_bool(), 7)->def->imm.i, 1);
    cr_assert_eq(ir_const_float(b, ty_f32(), 0.1)->def->imm.f, (double)0.1f);
    cr_assert_eq(ir_const_float(b, ty_f64(), 0.1)->def->imm.f, 0.1);

    ir_value *inits[2] = {x.f, x.bo};
    ir_op *loop = ir_for(b, x.l, x.l, inits, 2, true);
    cr_assert(loop->attr & IR_FOR_EARLY_EXIT);
    cr_assert_eq(loop->nresults, 2);
    cr_assert_eq(loop->results[1]->type, ty_bool());
    ir_region *body = loop->regions[0];
    cr_assert_eq(body->nargs, 3);
    cr_assert_eq(body->args[0]->type, ty_i64());
    cr_assert_eq(body->args[1]->type, ty_f32());
    cr_assert_eq(body->args[2]->type, ty_bool());
    cr_assert_eq(body->args[2]->region, body);
    cr_assert_eq(body->args[2]->index, 2);
    cr_assert_eq(body->kernel, x.k);
    ir_builder lb = ir_builder_at_end(x.m, body);
    ir_value *ys[3] = {x.bo, body->args[1], body->args[2]};
    ir_yield(&lb, ys, 3);

    ir_op *w = ir_while(b, inits, 2);
    cr_assert_eq(w->nregions, 2);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(w->regions[r]->nargs, 2);
        cr_assert_eq(w->regions[r]->args[0]->type, ty_f32());
        cr_assert_eq(w->regions[r]->args[1]->type, ty_bool());
    }
    ir_builder wb = ir_builder_at_end(x.m, w->regions[0]);
    ir_condition(&wb, x.bo, w->regions[0]->args, 2);
    cr_assert_eq(w->regions[0]->last->noperands, 3);
    wb = ir_builder_at_end(x.m, w->regions[1]);
    ir_yield(&wb, w->regions[1]->args, 2);

    const kern_type *rt[1] = {ty_i64()};
    ir_op *iff = ir_if(b, x.bo, rt, 1);
    cr_assert_eq(iff->nregions, 2);
    cr_assert_eq(iff->regions[0]->nargs, 0);
    ir_builder tb = ir_builder_at_end(x.m, iff->regions[0]);
    ir_yield(&tb, &x.l, 1);
    tb = ir_builder_at_end(x.m, iff->regions[1]);
    ir_yield(&tb, &x.l, 1);

    ir_value *bounds[6] = {x.i, x.i, x.u, x.u, x.l, x.l};
    ir_op *par = ir_parallel(&x.top, bounds, 3);
    cr_assert_eq(par->regions[0]->nargs, 3);
    cr_assert_eq(par->regions[0]->args[0]->type, ty_i32());
    cr_assert_eq(par->regions[0]->args[1]->type, ty_u32());
    cr_assert_eq(par->regions[0]->args[2]->type, ty_i64());
    cr_assert_null(verify_text(x.m));
    ir_module_free(x.m);
}

/* Builders abort on misuse. */
Test(ir, builder_asserts_on_mixed_operand_types, .signal = SIGABRT) {
    kfx x = kfx_new();
    ir_binop(&x.b, IR_ADD, x.f, x.d);
}

Test(ir, builder_asserts_on_wrong_operand_class, .signal = SIGABRT) {
    kfx x = kfx_new();
    ir_unop(&x.b, IR_SIN, x.i);
}

Test(ir, builder_asserts_on_wrong_arity, .signal = SIGABRT) {
    kfx x = kfx_new();
    ir_binop(&x.b, IR_NEG, x.f, x.f);
}

Test(ir, builder_asserts_on_index_count, .signal = SIGABRT) {
    kfx x = kfx_new();
    ir_load(&x.b, x.a2, &x.i, 1);
}

Test(ir, builder_asserts_on_atomic_bool, .signal = SIGABRT) {
    kfx x = kfx_new();
    ir_atomic(&x.b, IR_ATOMIC_ADD, x.ib, &x.i, 1, x.bo);
}

Test(ir, builder_asserts_on_nested_task, .signal = SIGABRT) {
    kfx x = kfx_new();
    ir_serial(&x.b);
}

Test(ir, builder_asserts_on_float_bounds, .signal = SIGABRT) {
    kfx x = kfx_new();
    ir_for(&x.b, x.f, x.f, NULL, 0, false);
}

/* ---- List surgery and walking ----------------------------------------------------- */

static void collect_names(ir_op *op, void *user) {
    kern_buf *b = user;
    buf_printf(b, "%s ", ir_info(op->code)->name);
}

Test(ir, list_surgery_replace_uses_and_walk) {
    kfx x = kfx_new();
    ir_value *a = ir_binop(&x.b, IR_ADD, x.f, x.f);
    ir_value *c = ir_binop(&x.b, IR_MUL, a, x.f);
    ir_op *add = a->def, *mul = c->def;
    cr_assert_eq(x.task->regions[0]->first, add);
    cr_assert_eq(x.task->regions[0]->last, mul);

    /* a builder before an op inserts there and takes its location */
    mul->loc = (kern_loc){7, 3};
    ir_builder bb = ir_builder_before(x.m, mul);
    ir_value *s = ir_binop(&bb, IR_SUB, x.f, x.f);
    cr_assert_eq(s->def->loc.line, 7);
    cr_assert_eq(add->next, s->def);
    cr_assert_eq(s->def->next, mul);
    cr_assert_eq(mul->prev, s->def);

    ir_replace_uses(x.k->body, a, s);
    cr_assert_eq(mul->operands[0], s);
    ir_op_set_operand(mul, 1, a);
    cr_assert_eq(mul->operands[1], a);

    ir_remove(s->def);
    cr_assert_eq(add->next, mul);
    cr_assert_eq(mul->prev, add);
    cr_assert_null(s->def->parent);
    ir_insert_after(mul, s->def);
    cr_assert_eq(x.task->regions[0]->last, s->def);
    ir_remove(add);
    ir_insert_before(mul, add);
    cr_assert_eq(x.task->regions[0]->first, add);

    /* a detached op with a region gets the kernel when inserted */
    ir_op *det = ir_op_new(x.m, IR_SERIAL, (kern_loc){0, 0}, NULL, 0, NULL, 0, 1);
    cr_assert_null(det->regions[0]->kernel);
    ir_append(x.k->body, det);
    cr_assert_eq(det->regions[0]->kernel, x.k);
    ir_value *arg = ir_region_add_arg(x.m, det->regions[0], ty_i32());
    cr_assert_eq(arg->index, 0);
    cr_assert_eq(det->regions[0]->nargs, 1);

    kern_buf names = {0};
    ir_walk(x.k->body, collect_names, &names);
    cr_assert_str_eq(names.data, "serial add mul sub serial ");
    buf_free(&names);
    ir_module_free(x.m);
}

static void remove_subs(ir_op *op, void *user) {
    (void)user;
    if (op->code == IR_SUB)
        ir_remove(op);
}

Test(ir, walk_survives_removal) {
    kfx x = kfx_new();
    ir_binop(&x.b, IR_SUB, x.f, x.f);
    ir_binop(&x.b, IR_SUB, x.f, x.f);
    ir_binop(&x.b, IR_ADD, x.f, x.f);
    ir_walk(x.k->body, remove_subs, NULL);
    kern_buf names = {0};
    ir_walk(x.k->body, collect_names, &names);
    cr_assert_str_eq(names.data, "serial add ");
    buf_free(&names);
    ir_module_free(x.m);
}

/* A SizeExpr parsed from text into m's arena (test input). */
static const sz_expr *sz_text_in(ir_module *m, const char *text) {
    char err[256];
    const sz_expr *e = sz_parse(&m->mem, text, strlen(text), err, sizeof err);
    cr_assert_not_null(e, "%s: %s", text, err);
    return e;
}

/* The text form of e, in a static buffer. */
static const char *sz_str(const sz_expr *e) {
    static char out[256];
    kern_buf b = {0};
    sz_print(&b, e);
    snprintf(out, sizeof out, "%s", b.data);
    buf_free(&b);
    return out;
}

/* The adstack table prints first in the body, the ops as docs/ir.md writes them, and the
 * text parses back to the same table and ops. */
Test(ir, adstacks_build_print_and_parse) {
    kfx x = kfx_new();
    cr_assert_eq(
        ir_kernel_add_adstack(x.k, ty_f32(), sz_text_in(x.m, "(param 3)"), (kern_loc){4, 5}), 0);
    cr_assert_eq(ir_kernel_add_adstack(x.k, ty_bool(), sz_text_in(x.m, "(max 0 (dim 7 0))"),
                                       (kern_loc){0, 0}),
                 1);
    x.b.loc = (kern_loc){6, 7};
    ir_adpush(&x.b, 1, x.bo);
    ir_adpush(&x.b, 0, x.f);
    ir_value *p0 = ir_adpop(&x.b, 0);
    ir_value *p1 = ir_adpop(&x.b, 1);
    cr_assert_eq(p0->type, ty_f32());
    cr_assert_eq(p1->type, ty_bool());
    cr_assert_eq(p1->def->imm.i, 1);
    ir_value *zero = ir_const_int(&x.b, ty_i32(), 0);
    ir_value *idx[2] = {zero, zero};
    ir_value *old = ir_atomic(&x.b, IR_ATOMIC_XCHG, x.a2, idx, 2, p0);
    cr_assert_eq(old->type, ty_f32());
    cr_assert_null(verify_text(x.m));
    char *out = print_module(x.m);
    const char *want =
        "kernel @t(%a2: f32[,], %f: f32, %d: f64, %i: i32, %l: i64, %u: u32, %bo: bool, "
        "%ib: bool[]) {\n"
        "  adstack f32 \"(param 3)\" !4:5\n"
        "  adstack bool \"(max 0 (dim 7 0))\"\n"
        "  serial {\n"
        "    adpush %bo, 1 !6:7\n"
        "    adpush %f, 0 !6:7\n"
        "    %0 = adpop 0 : f32 !6:7\n"
        "    %1 = adpop 1 : bool !6:7\n"
        "    %2 = const 0 : i32 !6:7\n"
        "    %3 = atomic_xchg %a2[%2, %2], %0 : f32 !6:7\n"
        "  }\n"
        "}\n";
    cr_assert_str_eq(out, want);
    parsed p = parse_text(out);
    cr_assert_not_null(p.m, "%s", p.diags);
    ir_kernel *k = p.m->kernels;
    cr_assert_eq(k->nadstacks, 2);
    cr_assert_eq(k->adstacks[0].type, ty_f32());
    cr_assert_str_eq(sz_str(k->adstacks[0].cap), "(param 3)");
    cr_assert_eq(k->adstacks[0].loc.line, 4);
    cr_assert_eq(k->adstacks[0].loc.col, 5);
    cr_assert_eq(k->adstacks[1].type, ty_bool());
    cr_assert_str_eq(sz_str(k->adstacks[1].cap), "(max 0 (dim 7 0))");
    ir_op *pop = k->body->first->regions[0]->first->next->next;
    cr_assert_eq(pop->code, IR_ADPOP);
    cr_assert_eq(pop->imm.i, 0);
    cr_assert_eq(pop->nresults, 1);
    cr_assert_eq(pop->noperands, 0);
    char *again = print_module(p.m);
    cr_assert_str_eq(again, want);
    free(again);
    free(p.diags);
    ir_module_free(p.m);
    free(out);
    ir_module_free(x.m);
}

/* A table the text cannot express (built in C) is reported at the adstack's location. */
Test(ir, adstack_table_errors_built_in_c) {
    kfx x = kfx_new();
    ir_kernel_add_adstack(x.k, ty_f32(), sz_text_in(x.m, "1"), (kern_loc){3, 4});
    ir_kernel_add_adstack(x.k, ty_i32(), sz_text_in(x.m, "2"), (kern_loc){5, 6});
    x.k->adstacks[0].type = ty_array(ty_f32(), 1);
    x.k->adstacks[1].cap = NULL;
    char *errs = verify_text(x.m);
    cr_assert_not_null(errs);
    cr_assert_str_eq(errs, "3:4: @t: adstack 0 has type f32[], expected a scalar\n"
                           "5:6: @t: adstack 1 has no capacity\n");
    char *out = print_module(x.m); /* prints without crashing */
    cr_assert(strstr(out, "  adstack f32[] \"1\" !3:4\n  adstack i32 <null> !5:6\n"), "%s", out);
    free(out);
    free(errs);
    ir_module_free(x.m);
}

/* ---- Golden round trips ----------------------------------------------------------- */

Test(ir, golden_irtext_round_trip) {
    const char *dir = KERN_SOURCE_ROOT "/tests/golden/irtext";
    int n;
    char **files = list_files(dir, ".ir", &n);
    cr_assert_geq(n, 12, "expected at least 12 golden files in %s", dir);
    for (int i = 0; i < n; i++) {
        char *text = read_golden(dir, files[i]);
        parsed p = parse_text(text);
        cr_assert_not_null(p.m, "%s does not parse:\n%s", files[i], p.diags);
        char *errs = verify_text(p.m);
        cr_assert_null(errs, "%s does not verify:\n%s", files[i], errs);
        char *out = print_module(p.m);
        cr_assert_str_eq(out, text, "%s does not print back identically", files[i]);
        free(out);
        free(p.diags);
        ir_module_free(p.m);
        free(text);
    }
    free_files(files);
}

/* Every op, every scalar type and every array rank appear in the golden files. */
Test(ir, golden_irtext_coverage) {
    const char *dir = KERN_SOURCE_ROOT "/tests/golden/irtext";
    int n;
    char **files = list_files(dir, ".ir", &n);
    bool op_seen[IR__COUNT] = {0}, early = false, nd = false;
    bool ty_seen[TY_ARRAY + 1] = {0}, rank_seen[KERN_MAX_RANK + 1] = {0};
    for (int i = 0; i < n; i++) {
        char *text = read_golden(dir, files[i]);
        parsed p = parse_text(text);
        cr_assert_not_null(p.m);
        ir_foreach_kernel(k, p.m) {
            for (uint32_t a = 0; a < k->nparams; a++) {
                const kern_type *t = k->params[a].type;
                ty_seen[ty_is_array(t) ? t->elem->kind : t->kind] = true;
                rank_seen[t->rank] = true;
            }
            kern_ptrvec stack = {0};
            ptrvec_push(&stack, k->body);
            while (stack.len) {
                ir_region *r = stack.data[--stack.len];
                ir_foreach_op(op, r) {
                    op_seen[op->code] = true;
                    early |= op->code == IR_FOR && (op->attr & IR_FOR_EARLY_EXIT);
                    nd |= op->code == IR_PARALLEL && op->noperands >= 6;
                    for (uint32_t j = 0; j < op->nresults; j++)
                        ty_seen[op->results[j]->type->kind] = true;
                    for (uint32_t j = 0; j < op->nregions; j++)
                        ptrvec_push(&stack, op->regions[j]);
                }
            }
            ptrvec_free(&stack);
        }
        free(p.diags);
        ir_module_free(p.m);
        free(text);
    }
    free_files(files);
    for (int c = 0; c < IR__COUNT; c++)
        cr_expect(op_seen[c], "no golden file uses '%s'", ir_opinfos[c].name);
    for (int t = TY_BOOL; t <= TY_F64; t++)
        cr_expect(ty_seen[t], "no golden file uses %s", ty_scalar((kern_tykind)t)->name);
    for (int r = 1; r <= KERN_MAX_RANK; r++)
        cr_expect(rank_seen[r], "no golden file has an array of rank %d", r);
    cr_expect(early, "no early-exit for");
    cr_expect(nd, "no 3-D parallel");
}

Test(ir, golden_verify_rejections) {
    const char *dir = KERN_SOURCE_ROOT "/tests/golden/verify";
    int n;
    char **files = list_files(dir, ".ir", &n);
    cr_assert_geq(n, 15, "expected at least 15 verifier goldens in %s", dir);
    bool update = getenv("UPDATE") && strcmp(getenv("UPDATE"), "1") == 0;
    for (int i = 0; i < n; i++) {
        char *text = read_golden(dir, files[i]);
        parsed p = parse_text(text);
        cr_assert_not_null(p.m, "%s does not parse:\n%s", files[i], p.diags);
        char *errs = verify_text(p.m);
        cr_assert_not_null(errs, "%s verifies but must be rejected", files[i]);
        char errname[512];
        snprintf(errname, sizeof errname, "%.*s.err", (int)(strlen(files[i]) - 3), files[i]);
        if (update) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dir, errname);
            FILE *f = fopen(path, "w");
            cr_assert(f);
            fputs(errs, f);
            fclose(f);
        }
        char *want = read_golden(dir, errname);
        cr_expect_str_eq(errs, want, "%s: diagnostics differ", files[i]);
        free(want);
        free(errs);
        free(p.diags);
        ir_module_free(p.m);
        free(text);
    }
    free_files(files);
}

/* ---- Parser errors ---------------------------------------------------------------- */

typedef struct bad_text {
    const char *text;
    const char *diag; /* the expected first diagnostic: "LINE:COL: message" prefix */
} bad_text;

static const bad_text bad_texts[] = {
    {"kernel @k() {\n  %0 = frob %1 : i32\n}\n", "2:8: unknown op 'frob'"},
    {"kernel @k(%x: i32) {\n  %0 = add %x, %y : i32\n}\n", "2:16: use of undefined value %y"},
    {"kernel @k(%x: i32) {\n  %x = neg %x : i32\n}\n",
     "2:3: redefinition of %x (first defined at 1:11)"},
    {"kernel @k(%x: i33) {\n}\n", "1:15: unknown type 'i33'"},
    {"kernel @k(%x: i32) {\n  %0 = neg %x : f32[,,,,]\n}\n", "2:17: unknown type 'f32[,,,,]'"},
    {"kernel @k() {\n  %0 = const 1.5 : i32\n}\n",
     "2:14: expected an integer constant, found '1.5'"},
    {"kernel @k() {\n  %0 = const 2147483648 : i32\n}\n",
     "2:14: constant 2147483648 does not fit in i32"},
    {"kernel @k() {\n  %0 = const -1 : u32\n}\n", "2:14: constant -1 does not fit in u32"},
    {"kernel @k() {\n  %0 = const 4294967296 : u32\n}\n",
     "2:14: constant 4294967296 does not fit in u32"},
    {"kernel @k() {\n  %0 = const 9223372036854775808 : i64\n}\n",
     "2:14: constant 9223372036854775808 does not fit in i64"},
    {"kernel @k() {\n  %0 = const 1 : bool\n}\n", "2:14: a bool constant is 'true' or 'false'"},
    {"kernel @k() {\n  %0 = const true : f32\n}\n", "2:14: expected a number for a f32 constant"},
    {"kernel @k() {\n  %0 = const 1e39 : f32\n}\n", "2:14: 1e39 is out of the range of f32"},
    {"kernel @k() {\n  %0 = const 1.5x : f64\n}\n", "2:14: bad number '1.5x'"},
    {"kernel @k() {\n  %0 = const nan(0x7f800000) : f32\n}\n",
     "2:14: nan(0x7f800000) is not the bit pattern of an f32 NaN"},
    {"kernel @k() {\n  %0 = const nan(0x1ffffffff) : f32\n}\n",
     "2:14: nan(0x1ffffffff) is not the bit pattern of an f32 NaN"},
    {"kernel @k() {\n  %0 = const nan(0x3ff0000000000000) : f64\n}\n",
     "2:14: nan(0x3ff0000000000000) is not the bit pattern of an f64 NaN"},
    {"kernel @k(%x: i32) {\n  %0 = add %x, %x : i32, i32\n}\n",
     "2:26: 'add' has 1 result but more types are written"},
    {"kernel @k(%x: i32) {\n  %0:2 = add %x, %x : i32\n}\n",
     "2:10: 'add' has 2 results but 1 type is written"},
    {"kernel @k(%x: i32) {\n  %0 = add %x, %x\n}\n",
     "2:8: 'add' has 1 result but 0 types are written"},
    {"kernel @k(%x: i32) {\n  %0:1 = add %x, %x : i32\n}\n",
     "2:6: a result group %N:K needs K >= 2"},
    {"kernel @k(%x: i32) {\n  %0 add %x, %x : i32\n}\n",
     "2:6: expected '=' after the results, found 'add'"},
    {"kernel @k(%x: i32) {\n  %0 = add %x, : i32\n}\n", "2:16: expected a value, found ':'"},
    {"kernel @k(%x: i32) {\n  %0 = add %x, %x : i32 !3\n}\n",
     "3:1: expected ':' between line and column, found '}'"},
    {"kernel @k(%x: i32) {\n  %0 = neg %x : i32\n", "3:1: expected '}' before the end of input"},
    {"kernel @k(%x: i32) {\n  %0 = neg %x : i32 %1 = neg %x : i32\n}\n",
     "2:21: expected the end of the line after 'neg', found '%1'"},
    {"kernel @k(%x: i32) {\n  %0 = neg %x : i32 $\n}\n", "2:21: unexpected character '$'"},
    {"kernel @k(%x: i32) {\n  %0 = neg % : i32\n}\n", "2:12: expected a name after '%'"},
    {"kernel @k(%x: i32) {\n  %0 = neg %x#z : i32\n}\n",
     "2:12: expected a result number after '#'"},
    {"kernel @k(%x: i32) {\n  %0 = neg %x#0 : i32\n}\n",
     "2:12: %x is a single value: '#0' applies to ops with several results"},
    {"kernel @k(%x: i32) {\n  %0:2 = for %1 = %x to %x iter(%2 = %x, %3 = %x) : i32, i32 {\n    "
     "yield %2, %3\n  }\n  %4 = neg %0 : i32\n}\n",
     "5:12: %0 names 2 results: write %0#0 .. #1"},
    {"kernel @k(%x: i32) {\n  %0 = neg %1#2 : i32\n  %1:2 = for %2 = %x to %x iter(%3 = %x, %4 = "
     "%x) : i32, i32 {\n    yield %3, %4\n  }\n}\n",
     "2:12: %1#2: the op has only 2 results"},
    {"kernel @k(%x: i32) {\n  for %0 = %1 to %x {\n    yield\n  }\n  %1 = neg %x : i32\n}\n",
     "2:7: cannot tell the type of %0: the value it starts from is not defined yet; write '%0: "
     "TYPE'"},
    {"kernel @k(%3: i32) {\n}\n",
     "1:11: a parameter name starts with a letter, '_' or '.' (not '%3')"},
    {"kernel k() {\n}\n", "1:8: expected the kernel's @name, found 'k'"},
    {"kernel @k() {\n}\nkernel @j() {\n  %0 = const 1 : i32\n  %0 = const 2 : i32\n}\n",
     "5:3: redefinition of %0 (first defined at 4:3)"},
    {"source \"abc\n\"", "1:8: unterminated string"},
    {"source \"a\\zz\"\n", "1:10: bad escape in string"},
    {"kernel @k(%c: bool) {\n  serial {\n    if %c {\n      yield\n    }\n  }\n}\n",
     "6:3: expected 'else' after the then-region, found '}'"},
    {"kernel @k() {\n  serial {\n    while () {\n      condition\n    } (%0) {\n    }\n  }\n}\n",
     "5:7: expected 'do' after the before-region, found '('"},
    {"kernel @k(%n: i32) {\n  parallel (%0 = %n, %n) {\n  }\n}\n",
     "2:20: expected 'to' between the bounds, found ','"},
    {"kernel @k() {\n  %0 = dim 9 : i32\n}\n%", "4:1: expected a name after '%'"},
    {"garbage", "1:1: expected 'kernel' to start a kernel, found 'garbage'"},
    {"kernel @k() {\n  %0 = const 1 : i32 !99999999999:1\n}\n",
     "2:23: expected a line number after '!'"},
    /* adstack lines and the adstack ops */
    {"kernel @k() {\n  %0 = const 1 : i32\n  adstack f32 \"1\"\n}\n",
     "3:3: an adstack line stands at the start of a kernel body, before its ops"},
    {"kernel @k() {\n  serial {\n    adstack f32 \"1\"\n  }\n}\n",
     "3:5: an adstack line stands at the start of a kernel body"},
    {"kernel @k() {\n  adstack f32[] \"1\"\n}\n",
     "2:11: an adstack holds a scalar type, not f32[]"},
    {"kernel @k() {\n  adstack f32 (param 0)\n}\n",
     "2:15: expected the adstack's capacity as a string, found '('"},
    {"kernel @k() {\n  adstack \"1\"\n}\n", "2:11: expected a type, found a string"},
    {"kernel @k() {\n  adstack f32 \"(param 0\"\n}\n",
     "2:15: bad adstack capacity: SizeExpr offset 8: expected ')', found the end of the text"},
    {"kernel @k() {\n  adstack f32 \"(max 0 v1)\"\n}\n",
     "2:15: bad adstack capacity: SizeExpr offset 7: variable v1 is not bound by an enclosing "
     "maxover"},
    {"kernel @k() {\n  adstack f32 \"1\" !3\n}\n", "3:1: expected ':' between line and column"},
    {"kernel @k() {\n  adstack f32 \"1\" \"2\"\n}\n",
     "2:19: expected the end of the line after 'adstack', found a string"},
    {"kernel @k(%x: f32) {\n  serial {\n    adpush %x\n  }\n}\n",
     "4:3: expected ',' before the adstack number, found '}'"},
    {"kernel @k(%x: f32) {\n  serial {\n    adpush %x, -1\n  }\n}\n",
     "3:16: expected an adstack number, found '-1'"},
    {"kernel @k() {\n  serial {\n    %0 = adpop : f32\n  }\n}\n",
     "3:16: expected an adstack number, found ':'"},
    {"kernel @k(%a: f32[], %x: f32) {\n  serial {\n    %0 = atomic_xchg %a, %x : f32\n  }\n}\n",
     "3:24: expected '[' before the indices, found ','"},
};

Test(ir, parser_reports_errors_with_text_positions) {
    for (size_t i = 0; i < sizeof bad_texts / sizeof bad_texts[0]; i++) {
        parsed p = parse_text(bad_texts[i].text);
        cr_expect_null(p.m, "case %zu parsed:\n%s", i, bad_texts[i].text);
        cr_expect(strncmp(p.diags, bad_texts[i].diag, strlen(bad_texts[i].diag)) == 0,
                  "case %zu: expected\n  %s\ngot\n  %s", i, bad_texts[i].diag, p.diags);
        free(p.diags);
        ir_module_free(p.m);
    }
}

Test(ir, parser_reports_every_undefined_name) {
    parsed p =
        parse_text("kernel @k(%x: i32) {\n  %0 = add %a, %x : i32\n  %1 = add %b, %a : i32\n}\n");
    cr_assert_null(p.m);
    cr_assert_str_eq(p.diags, "2:12: use of undefined value %a\n"
                              "3:12: use of undefined value %b\n"
                              "3:16: use of undefined value %a\n");
    free(p.diags);
}

Test(ir, parser_accepts_names_comments_and_forward_references) {
    /* names of any kind, comments, !0:0, a forward reference resolved at the end */
    const char *text = "// a comment\n"
                       "kernel @k(%x: f32, %out: f32[]) !0:0 { // trailing comment\n"
                       "  %zero = const 0 : i32\n"
                       "  serial {\n"
                       "    %sq = mul %x, %x : f32 !4:5\n"
                       "    %r.1 = add %sq, %x : f32\n"
                       "    store %out[%zero], %r.1\n"
                       "  }\n"
                       "}\n";
    parsed p = parse_text(text);
    cr_assert_not_null(p.m, "%s", p.diags);
    cr_assert_null(verify_text(p.m));
    char *out = print_module(p.m);
    cr_assert_str_eq(out, "kernel @k(%x: f32, %out: f32[]) {\n"
                          "  %0 = const 0 : i32\n"
                          "  serial {\n"
                          "    %1 = mul %x, %x : f32 !4:5\n"
                          "    %2 = add %1, %x : f32\n"
                          "    store %out[%0], %2\n"
                          "  }\n"
                          "}\n");
    free(out);
    free(p.diags);
    ir_module_free(p.m);

    /* a use before the definition parses (the verifier judges it) and prints in place */
    parsed q =
        parse_text("kernel @k(%x: i32) {\n  %a = add %b, %x : i32\n  %b = neg %x : i32\n}\n");
    cr_assert_not_null(q.m, "%s", q.diags);
    out = print_module(q.m);
    cr_assert_str_eq(out,
                     "kernel @k(%x: i32) {\n  %0 = add %1, %x : i32\n  %1 = neg %x : i32\n}\n");
    char *errs = verify_text(q.m);
    cr_assert_not_null(errs);
    cr_assert(strstr(errs, "operand 0 (%1) is not defined here"), "%s", errs);
    free(errs);
    free(out);
    free(q.diags);
    ir_module_free(q.m);
}

/* Invalid IR that needs written argument types still prints back as written. */
Test(ir, annotated_region_arguments_round_trip) {
    const char *text = "kernel @k(%x: i32, %f: f32) {\n"
                       "  serial {\n"
                       "    %0 = for %1 = %x to %x iter(%2: i32 = %0) : i32 {\n"
                       "      yield %2\n"
                       "    }\n"
                       "    %3 = while (%4: i64 = %x) : f32 {\n"
                       "      %5 = const true : bool\n"
                       "      condition %5, %f\n"
                       "    } do (%6: i32) {\n"
                       "      yield %6\n"
                       "    }\n"
                       "    parallel (%7: u32 = %x to %x) {\n"
                       "    }\n"
                       "  }\n"
                       "}\n";
    parsed p = parse_text(text);
    cr_assert_not_null(p.m, "%s", p.diags);
    ir_region *s = p.m->kernels->body->first->regions[0];
    cr_assert_eq(s->first->regions[0]->args[1]->type, ty_i32());
    cr_assert_eq(s->first->next->regions[0]->args[0]->type, ty_i64());
    cr_assert_eq(s->first->next->regions[1]->args[0]->type, ty_i32());
    cr_assert_eq(s->last->regions[0]->args[0]->type, ty_u32());
    char *out = print_module(p.m);
    cr_assert_str_eq(out, text);
    char *errs = verify_text(p.m);
    cr_assert_str_eq(
        errs, "0:0: @k: 'for' (%0): operand 2 (%0) is not defined here: a value is visible after "
              "its definition in its region and the regions nested in it\n"
              "0:0: @k: 'while' (%3): argument 0 of the before-region has type i64, expected i32\n"
              "0:0: @k: 'while' (%3): argument 0 of the after-region has type i32, expected f32\n"
              "0:0: @k: 'parallel': tasks may only stand at the top level of a kernel, not in the "
              "body of 'serial'\n"
              "0:0: @k: 'parallel': argument 0 of the body has type u32, expected i32\n");
    free(errs);
    free(out);
    free(p.diags);
    ir_module_free(p.m);
}

Test(ir, parser_survives_empty_and_odd_input) {
    const char *texts[] = {"",
                           "   \n\n",
                           "// only a comment",
                           "kernel",
                           "kernel @",
                           "kernel @k(",
                           "kernel @k() {",
                           "kernel @k() { }",
                           "\x01\x02",
                           "kernel @\"",
                           "%0#",
                           "kernel @k() {\n  %0 = const nan( : f32\n}\n"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        parsed p = parse_text(texts[i]);
        bool empty_ok = i < 3 || i == 7;
        cr_expect_eq(p.m != NULL, empty_ok, "case %zu: %s", i, p.diags);
        if (p.m)
            cr_expect_eq(p.m->nkernels, i == 7 ? 1u : 0u);
        free(p.diags);
        ir_module_free(p.m);
    }
    /* NUL bytes inside the text do not end it early and are reported */
    const char with_nul[] = "kernel @k() {\n  \0\n}\n";
    arena a;
    arena_init(&a);
    diag_sink s;
    diag_init(&s, &a);
    cr_assert_null(ir_parse(with_nul, sizeof with_nul - 1, NULL, &s));
    cr_assert_eq(s.len, 1);
    cr_assert_str_eq(s.items[0].message, "unexpected byte 0x00");
    cr_assert_eq(s.items[0].loc.line, 2);
    cr_assert_str_eq(s.items[0].src->path, "<ir>");
    diag_free(&s);
    arena_free(&a);
    /* deep nesting is refused, not a stack overflow */
    kern_buf b = {0};
    buf_puts(&b, "kernel @k(%c: bool) {\n  serial {\n");
    for (int i = 0; i < 100000; i++)
        buf_puts(&b, "if %c {\n");
    parsed p = parse_text(b.data);
    cr_assert_null(p.m);
    cr_assert(strstr(p.diags, "regions nested more than"), "%s", p.diags);
    free(p.diags);
    buf_free(&b);
}

/* ---- Float constants -------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Prints n constants of type t with the given values, parses them back, checks the bits. */
static void check_float_round_trip(const kern_type *t, const double *vals, int n) {
    ir_module *m = ir_module_new(NULL);
    ir_kernel *k = ir_kernel_new(m, "f", (kern_loc){0, 0}, NULL, 0);
    ir_builder b = ir_builder_at_end(m, k->body);
    for (int i = 0; i < n; i++)
        ir_build(&b, IR_CONST, NULL, 0, &t, 1, 0)->imm.f = vals[i];
    cr_assert_null(verify_text(m));
    char *text = print_module(m);
    parsed p = parse_text(text);
    cr_assert_not_null(p.m, "%s\n%s", p.diags, text);
    ir_op *op = p.m->kernels->body->first;
    for (int i = 0; i < n; i++, op = op->next) {
        cr_assert_not_null(op);
        uint64_t want, got;
        memcpy(&want, &vals[i], 8);
        memcpy(&got, &op->imm.f, 8);
        cr_assert_eq(got, want, "%s constant %d: %016llx printed as\n%s", t->name, i,
                     (unsigned long long)want, text);
    }
    char *again = print_module(p.m);
    cr_assert_str_eq(again, text);
    free(again);
    free(p.diags);
    ir_module_free(p.m);
    free(text);
    ir_module_free(m);
}

Test(ir, float_constants_round_trip_bit_for_bit) {
    enum { N = 4000 };
    static double vals[N];
    uint64_t s = 0x9e3779b97f4a7c15ULL;
    /* f64: random bit patterns (all classes, NaN payloads included) and edge values */
    for (int i = 0; i < N; i++) {
        uint64_t bits = rng_next(&s);
        if (i % 4 == 1)
            bits &= 0x800fffffffffffffULL; /* denormals */
        if (i % 4 == 2)
            bits |= 0x7ff0000000000000ULL; /* inf / NaN */
        memcpy(&vals[i], &bits, 8);
    }
    double edge[] = {0.0,
                     -0.0,
                     1.0,
                     -1.0,
                     0.1,
                     1e300,
                     4.9406564584124654e-324,
                     1e7,
                     9999999.0,
                     12345678.9,
                     1e16,
                     1e15,
                     123456789012345678.0,
                     INFINITY,
                     -INFINITY,
                     NAN,
                     -NAN,
                     2.5e-310};
    memcpy(vals, edge, sizeof edge);
    check_float_round_trip(ty_f64(), vals, N);
    /* f32: random float bit patterns, stored as the double of that float */
    for (int i = 0; i < N; i++) {
        uint32_t bits = (uint32_t)rng_next(&s);
        if (i % 4 == 1)
            bits &= 0x807fffffu;
        if (i % 4 == 2)
            bits |= 0x7fc00000u; /* quiet NaNs: a signalling one is quieted as a double */
        float f;
        memcpy(&f, &bits, 4);
        vals[i] = (double)f;
    }
    float fedge[] = {0.0f,        -0.0f,       0.1f,     1e-45f,    3.4028235e38f,
                     16777216.0f, 1.0f / 3.0f, INFINITY, -INFINITY, NAN};
    for (size_t i = 0; i < sizeof fedge / sizeof fedge[0]; i++)
        vals[i] = (double)fedge[i];
    check_float_round_trip(ty_f32(), vals, N);
}

Test(ir, float_constants_print_readably) {
    struct {
        const kern_type *t;
        double v;
        const char *text;
    } cases[] = {
        {ty_f32(), (double)0.1f, "0.1"},
        {ty_f64(), 0.1, "0.1"},
        {ty_f64(), -0.0, "-0.0"},
        {ty_f32(), 100.0, "100.0"},
        {ty_f64(), 1e20, "1e+20"},
        {ty_f64(), 12345678.0, "12345678.0"},
        {ty_f32(), (double)(1.0f / 3.0f), "0.33333334"},
        {ty_f64(), 1.0 / 3.0, "0.3333333333333333"},
        {ty_f64(), INFINITY, "inf"},
        {ty_f32(), -INFINITY, "-inf"},
        {ty_f64(), NAN, "nan"},
        {ty_f32(), (double)NAN, "nan"},
        {ty_f64(), 5e-324, "5e-324"},
        {ty_f64(), 1.5e-5, "1.5e-05"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ir_module *m = ir_module_new(NULL);
        ir_kernel *k = ir_kernel_new(m, "f", (kern_loc){0, 0}, NULL, 0);
        ir_builder b = ir_builder_at_end(m, k->body);
        ir_build(&b, IR_CONST, NULL, 0, &cases[i].t, 1, 0)->imm.f = cases[i].v;
        char *text = print_module(m);
        char want[128];
        snprintf(want, sizeof want, "kernel @f() {\n  %%0 = const %s : %s\n}\n", cases[i].text,
                 cases[i].t->name);
        cr_expect_str_eq(text, want);
        free(text);
        ir_module_free(m);
    }
}

/* ---- Mutations: the parser never crashes ------------------------------------------ */

Test(ir, mutated_golden_texts_never_crash) {
    const char *dir = KERN_SOURCE_ROOT "/tests/golden/irtext";
    int n;
    char **files = list_files(dir, ".ir", &n);
    const char alphabet[] = "%#:=,()[]{}!@\"\n 0123456789-.abcfiloprstuxyz";
    uint64_t s = 12345;
    int parsed_ok = 0, round_trips = 0;
    for (int f = 0; f < n; f++) {
        char *text = read_golden(dir, files[f]);
        size_t len = strlen(text);
        for (int iter = 0; iter < 300; iter++) {
            char *mut = kern_xmalloc(len + 8);
            memcpy(mut, text, len + 1);
            size_t mlen = len;
            int edits = 1 + (int)(rng_next(&s) % 3);
            for (int e = 0; e < edits && mlen > 0; e++) {
                size_t at = rng_next(&s) % mlen;
                switch (rng_next(&s) % 4) {
                case 0: mut[at] = alphabet[rng_next(&s) % (sizeof alphabet - 1)]; break;
                case 1:
                    memmove(mut + at, mut + at + 1, mlen - at);
                    mlen--;
                    break;
                case 2:
                    mlen = at;
                    mut[mlen] = 0;
                    break; /* truncate */
                default: mut[at] = (char)(rng_next(&s) & 0xff); break;
                }
            }
            arena a;
            arena_init(&a);
            diag_sink ds;
            diag_init(&ds, &a);
            ir_module *m = ir_parse(mut, mlen, NULL, &ds);
            if (m) {
                parsed_ok++;
                /* whatever parses can be verified and printed; what verifies round-trips */
                diag_sink vs;
                diag_init(&vs, &a);
                bool ok = ir_verify(m, &vs);
                char *out = print_module(m);
                if (ok) {
                    diag_sink rs;
                    diag_init(&rs, &a);
                    ir_module *m2 = ir_parse(out, strlen(out), NULL, &rs);
                    cr_assert_not_null(m2, "printed valid IR does not parse:\n%s", out);
                    char *out2 = print_module(m2);
                    cr_assert_str_eq(out2, out);
                    round_trips++;
                    free(out2);
                    ir_module_free(m2);
                    diag_free(&rs);
                }
                free(out);
                diag_free(&vs);
                ir_module_free(m);
            } else {
                cr_assert_gt(ds.len, 0, "a failed parse reports nothing");
            }
            diag_free(&ds);
            arena_free(&a);
            free(mut);
        }
        free(text);
    }
    free_files(files);
    cr_assert_gt(parsed_ok, 0);
    cr_assert_gt(round_trips, 0);
}

/* ---- Corrupted IR: the verifier and the printer never crash ------------------------ */

typedef struct corrupt_ctx {
    uint64_t *rng;
    kern_ptrvec values; /* every value seen, to plant as wrong operands */
    int changed;
} corrupt_ctx;

static const kern_type *random_type(uint64_t *s) {
    static const kern_tykind kinds[] = {TY_BOOL, TY_I32, TY_U32, TY_I64, TY_F32, TY_F64};
    uint64_t r = rng_next(s) % 9;
    if (r == 8)
        return NULL;
    if (r >= 6)
        return ty_array(ty_scalar(kinds[rng_next(s) % 6]), 1 + (int)(rng_next(s) % 4));
    return ty_scalar(kinds[r]);
}

static void gather_values(ir_op *op, void *user) {
    corrupt_ctx *c = user;
    for (uint32_t i = 0; i < op->nresults; i++)
        ptrvec_push(&c->values, op->results[i]);
    for (uint32_t r = 0; r < op->nregions; r++)
        for (uint32_t i = 0; i < op->regions[r]->nargs; i++)
            ptrvec_push(&c->values, op->regions[r]->args[i]);
}

static void corrupt_op(ir_op *op, void *user) {
    corrupt_ctx *c = user;
    if (rng_next(c->rng) % 6)
        return;
    c->changed++;
    switch (rng_next(c->rng) % 9) {
    case 0:
        if (op->noperands)
            op->operands[rng_next(c->rng) % op->noperands] = NULL;
        break;
    case 1:
        if (op->noperands && c->values.len)
            op->operands[rng_next(c->rng) % op->noperands] =
                c->values.data[rng_next(c->rng) % (uint64_t)c->values.len];
        break;
    case 2:
        if (op->nresults)
            op->results[rng_next(c->rng) % op->nresults]->type = random_type(c->rng);
        break;
    case 3: op->code = (ir_opcode)(rng_next(c->rng) % IR__COUNT); break;
    case 4:
        if (op->noperands)
            op->noperands--;
        break;
    case 5: op->attr = (uint32_t)(rng_next(c->rng) % 4); break;
    case 6:
        for (uint32_t r = 0; r < op->nregions; r++)
            if (op->regions[r]->nargs)
                op->regions[r]->args[0]->type = random_type(c->rng);
        break;
    case 7:
        for (uint32_t r = 0; r < op->nregions; r++)
            if (op->regions[r]->nargs && rng_next(c->rng) % 2)
                op->regions[r]->nargs--;
        break;
    default:
        if (op->nresults)
            op->nresults--;
        break;
    }
}

Test(ir, corrupted_ir_never_crashes_verifier_or_printer) {
    const char *dir = KERN_SOURCE_ROOT "/tests/golden/irtext";
    int n;
    char **files = list_files(dir, ".ir", &n);
    uint64_t s = 777;
    int rejected = 0;
    for (int f = 0; f < n; f++) {
        char *text = read_golden(dir, files[f]);
        for (int iter = 0; iter < 40; iter++) {
            parsed p = parse_text(text);
            cr_assert_not_null(p.m);
            corrupt_ctx c = {.rng = &s};
            for (ir_kernel *k = p.m->kernels; k; k = k->next)
                ir_walk(k->body, gather_values, &c);
            for (ir_kernel *k = p.m->kernels; k; k = k->next)
                ir_walk(k->body, corrupt_op, &c);
            char *errs = verify_text(p.m);
            rejected += errs != NULL;
            char *out = print_module(p.m);
            cr_assert_not_null(out);
            /* what prints may or may not parse; it must not crash the parser either */
            parsed q = parse_text(out);
            free(q.diags);
            ir_module_free(q.m);
            free(out);
            free(errs);
            ptrvec_free(&c.values);
            free(p.diags);
            ir_module_free(p.m);
        }
        free(text);
    }
    free_files(files);
    cr_assert_gt(rejected, 100);
}

/* ---- Invalid IR built in C -------------------------------------------------------- */

static void expect_error(const ir_module *m, const char *needle) {
    char *errs = verify_text(m);
    cr_assert_not_null(errs, "IR verifies; expected an error with \"%s\"", needle);
    cr_expect(strstr(errs, needle), "expected \"%s\" in:\n%s", needle, errs);
    free(errs);
}

Test(ir, verifier_catches_what_the_text_cannot_say) {
    kfx x = kfx_new();
    ir_value *c = ir_const_int(&x.b, ty_i32(), 1);
    c->def->imm.i = 1LL << 40;
    expect_error(x.m, "i32 constant 1099511627776 is out of range");
    c->def->imm.i = 0;
    ir_value *fc = ir_const_float(&x.b, ty_f32(), 1.0);
    fc->def->imm.f = 0.1;
    expect_error(x.m, "f32 constant 0.10000000000000001 is not exactly representable as f32");
    uint64_t nan_bits = 0x7ff8000000000001ULL; /* a NaN payload no float holds */
    memcpy(&fc->def->imm.f, &nan_bits, 8);
    expect_error(x.m, "f32 constant nan is not exactly representable as f32");
    fc->def->imm.f = 1.0;
    ir_value *bc = ir_const_bool(&x.b, true);
    bc->def->imm.i = 2;
    expect_error(x.m, "bool constant holds 2, expected 0 or 1");
    bc->def->imm.i = 1;
    ir_value *neg = ir_unop(&x.b, IR_NEG, x.f);
    neg->def->attr = 4;
    expect_error(x.m, "'neg' (%3): has unknown attribute bits 0x4");
    neg->def->attr = 0;
    cr_assert_null(verify_text(x.m));

    /* a for without its body arguments */
    ir_value *ops[3] = {x.i, x.i, x.f};
    const kern_type *ft = ty_f32();
    ir_op *loop = ir_build(&x.b, IR_FOR, ops, 3, &ft, 1, 1);
    ir_builder lb = ir_builder_at_end(x.m, loop->regions[0]);
    ir_yield(&lb, &x.f, 1);
    expect_error(x.m,
                 "the body has 0 arguments, expected 2 (the index, then one per carried value)");
    char *text = print_module(x.m); /* prints in the fallback form without crashing */
    cr_assert(strstr(text, "for %i, %i, %f : f32"), "%s", text);
    free(text);
    ir_remove(loop);

    /* a use of a value whose op was removed */
    ir_value *gone = ir_binop(&x.b, IR_ADD, x.f, x.f);
    ir_value *user = ir_binop(&x.b, IR_MUL, gone, x.f);
    ir_remove(gone->def);
    expect_error(x.m, "operand 0 is not a value of this kernel");
    text = print_module(x.m);
    cr_assert(strstr(text, "mul %<undef>, %f : f32"), "%s", text);
    free(text);
    ir_remove(user->def);

    /* a missing operand */
    ir_value *hole = ir_binop(&x.b, IR_ADD, x.f, x.f);
    hole->def->operands[1] = NULL;
    expect_error(x.m, "operand 1 is missing");
    text = print_module(x.m);
    cr_assert(strstr(text, "add %f, %<null> : f32"), "%s", text);
    free(text);
    ir_remove(hole->def);

    /* the body's arguments do not match the parameters */
    cr_assert_null(verify_text(x.m));
    x.k->body->nargs--;
    expect_error(x.m, "@t: the body has 7 arguments for 8 parameters");
    x.k->body->nargs++;
    x.k->body->args[1]->type = ty_f64();
    expect_error(x.m, "@t: body argument 1 has type f64, parameter f has f32");
    x.k->body->args[1]->type = ty_f32();

    /* parameter names must print and read back as themselves */
    x.k->params[2].name = "f";
    expect_error(x.m, "@t: parameters 1 and 2 are both named %f");
    x.k->params[2].name = "9d";
    expect_error(x.m, "@t: parameter 2 has no usable name (9d)");
    x.k->params[2].name = NULL;
    expect_error(x.m, "@t: parameter 2 has no usable name (NULL)");
    x.k->params[2].name = "d";

    /* the module's kernel count */
    x.m->nkernels = 2;
    expect_error(x.m, "the module counts 2 kernels but lists 1");
    x.m->nkernels = 1;
    cr_assert_null(verify_text(x.m));
    ir_module_free(x.m);
}

Test(ir, verify_or_die_passes_valid_ir) {
    ir_module *m = build_simulate();
    ir_verify_or_die(m, "none"); /* returns */
    ir_module_free(m);
}

Test(ir, verify_or_die_aborts_with_annotated_ir, .signal = SIGABRT, .init = cr_redirect_stderr) {
    kfx x = kfx_new();
    ir_value *a = ir_binop(&x.b, IR_ADD, x.f, x.f);
    a->def->operands[1] = x.d; /* f32 + f64 */
    ir_verify_or_die(x.m, "test-pass");
}

Test(ir, verify_or_die_report_text, .init = cr_redirect_stderr) {
    /* the same failure, run in a child: its stderr holds the IR with the error beside the op */
    fflush(stderr);
    FILE *tmp = tmpfile();
    cr_assert(tmp);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fileno(tmp), 2);
        kfx x = kfx_new();
        ir_value *a = ir_binop(&x.b, IR_ADD, x.f, x.f);
        a->def->operands[1] = x.d;
        ir_verify_or_die(x.m, "test-pass");
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    rewind(tmp);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, tmp);
    buf[n] = 0;
    fclose(tmp);
    cr_assert_str_eq(buf,
                     "kern: IR verification failed after pass 'test-pass': 1 error\n"
                     "kernel @t(%a2: f32[,], %f: f32, %d: f64, %i: i32, %l: i64, %u: u32, "
                     "%bo: bool, %ib: bool[]) {\n"
                     "  serial {\n"
                     "    %0 = add %f, %d : f32\n"
                     "    // error: @t: 'add' (%0): operand 1 has type f64 but operand 0 has f32\n"
                     "  }\n"
                     "}\n");
}
