/* test_llvm_adstack.c - the LLVM CPU backend: adstacks and atomic_xchg, built with the IR
 * builder (suite `llvm_adstack`). */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../backends/llvm/llvm_backend.h"
#include "../compiler/driver.h"
#include "../passes/passes.h"
#include "../backends/meta_ir.h"
#include "../runtime/abi.h"
#include "../runtime/meta.h"
#include "llvm_util.h"

/* ---- adstacks and atomic_xchg (built with the IR builder) ----------------------------- */

static kern_loc LOC(uint32_t line, uint32_t col) { return (kern_loc){line, col}; }

static const int AD_OPT_LEVELS[] = {0, 2};

static llvm_jit *jit_ir(ir_module *m, int opt, bool debug) {
    kc_options o;
    kc_options_default(&o);
    o.opt_level = opt;
    o.debug = debug;
    /* these tests lay slices out by hand for the scalar ABI (runtime/abi.h: one item's
     * stacks per slice); SIMD adstacks are tested through the runtime (test_simd.c) */
    o.simd = -1;
    if (!m->lowered) /* IR built by hand: the rules lowered as kc_compile_source does */
        ir_lower_semantics(m, debug);
    char err[1024];
    llvm_jit *j = llvm_jit_compile(m, &o, err, sizeof err);
    cr_assert(j, "JIT failed: %s", err);
    return j;
}

/* A slice of `bytes` bytes filled with the canary 0xAB, 64-byte aligned. */
static unsigned char *canary_slice(size_t bytes) {
    size_t n = (bytes + 63) / 64 * 64;
    unsigned char *s = aligned_alloc(64, n ? n : 64);
    cr_assert(s);
    memset(s, 0xAB, n ? n : 64);
    return s;
}

/* The value item i pushes at step t on the stack of kind k: IR below, C here. */
static scalar ad_ref(kern_tykind k, int32_t i, int32_t t) {
    scalar s;
    memset(&s, 0, sizeof s);
    int32_t v = i * 1000 + t;
    switch (k) {
    case TY_BOOL: s.b = (uint8_t)((i + t) & 1); break;
    case TY_I32: s.i32 = v * -3; break;
    case TY_U32: s.u32 = (uint32_t)v ^ 0x80000000u; break;
    case TY_I64: s.i64 = (int64_t)v * ((int64_t)1 << 33) + 7; break;
    case TY_F32: s.f32 = (float)v * 0.25f + 0.5f; break;
    default: s.f64 = (double)v + 0.125; break;
    }
    return s;
}

static ir_value *ad_ir_value(ir_builder *b, kern_tykind k, ir_value *i, ir_value *t) {
    const kern_type *ti = ty_i32();
    ir_value *v = ir_binop(b, IR_ADD, ir_binop(b, IR_MUL, i, ir_const_int(b, ti, 1000)), t);
    switch (k) {
    case TY_BOOL:
        return ir_binop(b, IR_NE,
                        ir_binop(b, IR_AND, ir_binop(b, IR_ADD, i, t), ir_const_int(b, ti, 1)),
                        ir_const_int(b, ti, 0));
    case TY_I32: return ir_binop(b, IR_MUL, v, ir_const_int(b, ti, -3));
    case TY_U32:
        return ir_binop(b, IR_XOR, ir_cast(b, ty_u32(), v),
                        ir_const_int(b, ty_u32(), 0x80000000ll));
    case TY_I64:
        return ir_binop(b, IR_ADD,
                        ir_binop(b, IR_MUL, ir_cast(b, ty_i64(), v),
                                 ir_const_int(b, ty_i64(), (int64_t)1 << 33)),
                        ir_const_int(b, ty_i64(), 7));
    case TY_F32:
        return ir_binop(
            b, IR_ADD,
            ir_binop(b, IR_MUL, ir_cast(b, ty_f32(), v), ir_const_float(b, ty_f32(), 0.25)),
            ir_const_float(b, ty_f32(), 0.5));
    default:
        return ir_binop(b, IR_ADD, ir_cast(b, ty_f64(), v), ir_const_float(b, ty_f64(), 0.125));
    }
}

/* kernel lifo(items: i32, n: i32, push_line: i32, out_k: K[] for the 6 kinds):
 *   parallel i in 0..items {
 *     for t in 0..n { push_k(value_k(i, t)) for every kind }        (adpush at 7:9)
 *     for t in 0..n { out_k[i * n + t] = pop_k() for every kind }
 *   }
 * or, with `serial`, the same body once with i = 0 in a serial task. One adstack per
 * kind, in the order of ALL_KINDS. */
static ir_module *build_lifo(bool serial) {
    ir_module *m = ir_module_new("lifo.kern");
    ir_param ps[3 + NKINDS] = {{.name = "items", .type = ty_i32(), .nograd = false, .loc = LOC(1, 1)},
                               {.name = "n", .type = ty_i32(), .nograd = false, .loc = LOC(1, 2)},
                               {.name = "unused", .type = ty_i32(), .nograd = false, .loc = LOC(1, 3)}};
    static const char *names[NKINDS] = {"ob", "oi", "ou", "ol", "of", "od"};
    for (int k = 0; k < NKINDS; k++)
        ps[3 + k] = (ir_param){.name = names[k], .type = ty_array(ty_scalar(ALL_KINDS[k]), 1), .nograd = false, .loc = LOC(1, 4)};
    ir_kernel *kn = ir_kernel_new(m, "lifo", LOC(1, 1), ps, 3 + NKINDS);
    for (int k = 0; k < NKINDS; k++)
        ir_kernel_add_adstack(kn, ty_scalar(ALL_KINDS[k]), sz_param(&m->mem, 1), LOC(6, 5));
    ir_value *items = kn->body->args[0], *n = kn->body->args[1];
    ir_builder top = ir_builder_at_end(m, kn->body);
    ir_value *zero = ir_const_int(&top, ty_i32(), 0);
    ir_region *body;
    ir_value *i;
    if (serial) {
        body = ir_serial(&top)->regions[0];
        ir_builder sb = ir_builder_at_end(m, body);
        i = ir_const_int(&sb, ty_i32(), 0);
    } else {
        ir_value *bounds[2] = {zero, items};
        body = ir_parallel(&top, bounds, 1)->regions[0];
        i = body->args[0];
    }
    ir_builder b = ir_builder_at_end(m, body);
    ir_op *f1 = ir_for(&b, zero, n, NULL, 0, false);
    ir_builder lb = ir_builder_at_end(m, f1->regions[0]);
    ir_value *t = f1->regions[0]->args[0];
    for (int k = 0; k < NKINDS; k++) {
        ir_value *v = ad_ir_value(&lb, ALL_KINDS[k], i, t);
        lb.loc = LOC(7, 9);
        ir_adpush(&lb, (uint32_t)k, v);
        lb.loc = LOC(0, 0);
    }
    ir_yield(&lb, NULL, 0);
    ir_op *f2 = ir_for(&b, zero, n, NULL, 0, false);
    lb = ir_builder_at_end(m, f2->regions[0]);
    t = f2->regions[0]->args[0];
    ir_value *idx = ir_binop(&lb, IR_ADD, ir_binop(&lb, IR_MUL, i, n), t);
    for (int k = 0; k < NKINDS; k++)
        ir_store(&lb, kn->body->args[3 + k], &idx, 1, ir_adpop(&lb, (uint32_t)k));
    ir_yield(&lb, NULL, 0);
    return m;
}

/* Lays out the 6 stacks of lifo with capacity cap each, back to back in the order
 * f64 i64 f32 i32 u32 bool (descending size keeps them aligned), then `gap` canary
 * bytes. Returns the slice size. */
static size_t lifo_layout(int64_t layout[2 * NKINDS], int64_t cap, size_t gap) {
    static const int order[NKINDS] = {5, 3, 4, 1, 2, 0}; /* indices into ALL_KINDS */
    size_t off = 0;
    for (int o = 0; o < NKINDS; o++) {
        int k = order[o];
        layout[2 * k] = (int64_t)off;
        layout[2 * k + 1] = cap;
        off += (size_t)cap * ksize(ALL_KINDS[k]);
    }
    return off + gap;
}

Test(llvm_adstack, adstack_lifo_every_type_chunked) {
    enum { ITEMS = 7, NPUSH = 9 };
    for (int serial = 0; serial < 2; serial++) {
        for (int l = 0; l < 2; l++) {
            ir_module *m = build_lifo(serial);
            llvm_jit *j = jit_ir(m, AD_OPT_LEVELS[l], false);
            kern_task_fn body = (kern_task_fn)llvm_jit_lookup(j, "kern_lifo__t0");
            kern_count_fn count = (kern_count_fn)llvm_jit_lookup(j, "kern_lifo__t0_count");
            cr_assert(body && count);
            int32_t items = ITEMS, n = NPUSH, unused = 0;
            void *bufs[NKINDS];
            kern_array_desc d[NKINDS];
            void *args[3 + NKINDS] = {&items, &n, &unused};
            for (int k = 0; k < NKINDS; k++) {
                bufs[k] = calloc(ITEMS * NPUSH, ksize(ALL_KINDS[k]));
                d[k] = desc(bufs[k], ITEMS * NPUSH, 1, 1);
                args[3 + k] = &d[k];
            }
            int64_t layout[2 * NKINDS];
            enum { GAP = 40 };
            size_t bytes = lifo_layout(layout, NPUSH, GAP);
            unsigned char *slice = canary_slice(bytes);
            kern_err_record e = {0};
            int64_t cnt = count(args);
            cr_assert_eq(cnt, serial ? 1 : ITEMS);
            /* several items per call, one slice for all of them */
            for (int64_t b0 = 0; b0 < cnt; b0 += 3)
                body(args, b0, b0 + 3 < cnt ? b0 + 3 : cnt, &e, slice, layout);
            cr_expect_eq(e.code, 0, "no error: code %d", e.code);
            int nitems = serial ? 1 : ITEMS;
            for (int k = 0; k < NKINDS; k++) {
                kern_tykind kk = ALL_KINDS[k];
                for (int i = 0; i < nitems; i++) {
                    for (int t = 0; t < NPUSH; t++) {
                        scalar got = get(bufs[k], kk, i * NPUSH + t);
                        scalar want = ad_ref(kk, i, NPUSH - 1 - t); /* last in, first out */
                        char g[64], w[64];
                        show(g, sizeof g, kk, got);
                        show(w, sizeof w, kk, want);
                        cr_expect(same(kk, got, want, 0), "%s O%d %s item %d pop %d: %s, want %s",
                                  serial ? "serial" : "parallel", AD_OPT_LEVELS[l], kname(kk), i, t,
                                  g, w);
                    }
                }
                /* the stack's entries hold the last item's pushes, in order: the stacks
                 * lie where the layout says and do not overlap */
                for (int t = 0; t < NPUSH; t++) {
                    scalar got = get(slice + layout[2 * k], kk, t);
                    cr_expect(same(kk, got, ad_ref(kk, nitems - 1, t), 0),
                              "%s entry %d of its stack", kname(kk), t);
                }
            }
            for (size_t x = bytes - GAP; x < bytes; x++)
                cr_expect_eq(slice[x], 0xAB, "canary byte %zu after the stacks", x);
            for (int k = 0; k < NKINDS; k++)
                free(bufs[k]);
            free(slice);
            llvm_jit_free(j);
            ir_module_free(m);
        }
    }
}

/* Per-item reset: every item pushes 3 values and pops only 1. Capacity 3 fits one item;
 * without the reset at the start of each item the second item of a call would overflow. */
Test(llvm_adstack, adstack_reset_per_item) {
    for (int l = 0; l < 2; l++) {
        ir_module *m = ir_module_new("reset.kern");
        ir_param ps[2] = {{.name = "items", .type = ty_i32(), .nograd = false, .loc = LOC(1, 1)},
                          {.name = "out", .type = ty_array(ty_f32(), 2), .nograd = false, .loc = LOC(1, 2)}};
        ir_kernel *kn = ir_kernel_new(m, "reset", LOC(1, 1), ps, 2);
        uint32_t s = ir_kernel_add_adstack(kn, ty_f32(), sz_const(&m->mem, 3), LOC(3, 5));
        ir_builder top = ir_builder_at_end(m, kn->body);
        ir_value *zero = ir_const_int(&top, ty_i32(), 0), *two = ir_const_int(&top, ty_i32(), 2);
        ir_value *bounds[4] = {zero, kn->body->args[0], zero, two}; /* 2-D: items x 2 */
        ir_region *body = ir_parallel(&top, bounds, 2)->regions[0];
        ir_value *i = body->args[0], *jj = body->args[1];
        ir_builder b = ir_builder_at_end(m, body);
        ir_value *three = ir_const_int(&b, ty_i32(), 3);
        ir_op *f = ir_for(&b, zero, three, NULL, 0, false);
        ir_builder lb = ir_builder_at_end(m, f->regions[0]);
        ir_value *t = f->regions[0]->args[0];
        ir_value *v =
            ir_binop(&lb, IR_ADD, ir_binop(&lb, IR_MUL, i, ir_const_int(&lb, ty_i32(), 10)),
                     ir_binop(&lb, IR_ADD, t, ir_binop(&lb, IR_MUL, jj, three)));
        ir_adpush(&lb, s, ir_cast(&lb, ty_f32(), v));
        ir_yield(&lb, NULL, 0);
        ir_value *idx[2] = {i, jj};
        ir_store(&b, kn->body->args[1], idx, 2, ir_adpop(&b, s));

        llvm_jit *j = jit_ir(m, AD_OPT_LEVELS[l], true);
        kern_task_fn fn = (kern_task_fn)llvm_jit_lookup(j, "kern_reset__t0");
        int32_t items = 6;
        float out[6][2];
        memset(out, 0, sizeof out);
        kern_array_desc d = desc(out, 6, 2, 1);
        void *args[2] = {&items, &d};
        int64_t layout[2] = {8, 3};
        unsigned char *slice = canary_slice(8 + 12 + 8);
        kern_err_record e = {0};
        fn(args, 0, 4, &e, slice, layout);
        fn(args, 4, 6, &e, slice, layout);
        cr_expect_eq(e.code, 0, "O%d: code %d (a %lld)", AD_OPT_LEVELS[l], e.code, (long long)e.a);
        for (int x = 0; x < 6; x++)
            for (int y = 0; y < 2; y++)
                cr_expect_eq(out[x][y], (float)(10 * x + 3 * y + 2), "out[%d][%d] = %g", x, y,
                             (double)out[x][y]);
        float last[3];
        memcpy(last, slice + 8, sizeof last);
        cr_expect(last[0] == 53 && last[1] == 54 && last[2] == 55, "the last item's entries");
        for (int x = 0; x < 8; x++)
            cr_expect(slice[x] == 0xAB && slice[20 + x] == 0xAB, "canaries around the stack");
        free(slice);
        llvm_jit_free(j);
        ir_module_free(m);
    }
}

/* The body of kernel kn's parallel task over 0..items: its builder, the constant 0 and the
 * item index. */
static ir_builder item_body(ir_module *m, ir_kernel *kn, ir_value *items, ir_value **zero,
                            ir_value **i) {
    ir_builder top = ir_builder_at_end(m, kn->body);
    *zero = ir_const_int(&top, ty_i32(), 0);
    ir_value *bounds[2] = {*zero, items};
    ir_region *body = ir_parallel(&top, bounds, 1)->regions[0];
    *i = body->args[0];
    return ir_builder_at_end(m, body);
}

/* for t in 0..end { out[idx] = pop of stack s } in b, idx = i * n + t, or with t_major
 * t * n + i. */
static void pop_loop(ir_module *m, ir_builder *b, ir_value *end, uint32_t s, ir_value *out,
                     ir_value *i, ir_value *n, bool t_major) {
    ir_op *f = ir_for(b, ir_const_int(b, ty_i32(), 0), end, NULL, 0, false);
    ir_builder lb = ir_builder_at_end(m, f->regions[0]);
    ir_value *t = f->regions[0]->args[0];
    ir_value *idx = t_major ? ir_binop(&lb, IR_ADD, ir_binop(&lb, IR_MUL, t, n), i)
                            : ir_binop(&lb, IR_ADD, ir_binop(&lb, IR_MUL, i, n), t);
    ir_store(&lb, out, &idx, 1, ir_adpop(&lb, s));
    ir_yield(&lb, NULL, 0);
}

/* kernel ovf(items: i32, npush: i32, out: i64[]): per item i, with c = npush + i % 4,
 * push 100 * i + t for t in 0..c (adpush at 12:34), then out[8 * i + t] = pop for t in
 * 0..c. One i64 stack. */
static ir_module *build_overflow(void) {
    ir_module *m = ir_module_new("ovf.kern");
    ir_param ps[3] = {{.name = "items", .type = ty_i32(), .nograd = false, .loc = LOC(1, 1)},
                      {.name = "npush", .type = ty_i32(), .nograd = false, .loc = LOC(1, 2)},
                      {.name = "out", .type = ty_array(ty_i64(), 1), .nograd = false, .loc = LOC(1, 3)}};
    ir_kernel *kn = ir_kernel_new(m, "ovf", LOC(1, 1), ps, 3);
    uint32_t s = ir_kernel_add_adstack(kn, ty_i64(), sz_param(&m->mem, 1), LOC(12, 5));
    ir_value *items = kn->body->args[0], *np = kn->body->args[1], *out = kn->body->args[2];
    ir_value *zero, *i;
    ir_builder b = item_body(m, kn, items, &zero, &i);
    ir_value *c = ir_binop(&b, IR_ADD, np, ir_binop(&b, IR_REM, i, ir_const_int(&b, ty_i32(), 4)));
    ir_op *f = ir_for(&b, zero, c, NULL, 0, false);
    ir_builder lb = ir_builder_at_end(m, f->regions[0]);
    ir_value *t = f->regions[0]->args[0];
    ir_value *v =
        ir_binop(&lb, IR_ADD, ir_binop(&lb, IR_MUL, i, ir_const_int(&lb, ty_i32(), 100)), t);
    lb.loc = LOC(12, 34);
    ir_adpush(&lb, s, ir_cast(&lb, ty_i64(), v));
    ir_yield(&lb, NULL, 0);
    pop_loop(m, &b, c, s, out, i, ir_const_int(&b, ty_i32(), 8), false);
    return m;
}

/* Capacity 3, 5 pushes: the record says ADSTACK at the push's line:col, b = 3, a = 5;
 * nothing is written past the capacity; pops from beyond it give 0. */
Test(llvm_adstack, adstack_overflow_record_and_no_write) {
    for (int l = 0; l < 2; l++) {
        ir_module *m = build_overflow();
        llvm_jit *j = jit_ir(m, AD_OPT_LEVELS[l], false); /* release: checked all the same */
        kern_task_fn fn = (kern_task_fn)llvm_jit_lookup(j, "kern_ovf__t0");
        int32_t items = 1, np = 5;
        int64_t out[5] = {-1, -1, -1, -1, -1};
        kern_array_desc d = desc(out, 5, 1, 1);
        void *args[3] = {&items, &np, &d};
        int64_t layout[2] = {16, 3};
        enum { BYTES = 16 + 3 * 8 + 32 };
        unsigned char *slice = canary_slice(BYTES);
        kern_err_record e = {0};
        fn(args, 0, 1, &e, slice, layout);
        cr_expect_eq(e.code, KERN_DEVERR_ADSTACK);
        cr_expect(e.line == 12 && e.col == 34, "at %u:%u", e.line, e.col);
        cr_expect_eq(e.b, 3, "capacity %lld", (long long)e.b);
        cr_expect_eq(e.a, 5, "depth needed %lld", (long long)e.a);
        int64_t want[5] = {0, 0, 2, 1, 0};
        for (int t = 0; t < 5; t++)
            cr_expect_eq(out[t], want[t], "O%d pop %d: %lld", AD_OPT_LEVELS[l], t,
                         (long long)out[t]);
        for (int x = 0; x < BYTES; x++)
            if (x < 16 || x >= 16 + 24)
                cr_expect_eq(slice[x], 0xAB, "byte %d outside the stack written", x);

        /* a record that already holds another error is left as it is */
        kern_err_record other = {.code = KERN_DEVERR_BOUNDS, .line = 1, .col = 2, .a = 9, .b = 10};
        fn(args, 0, 1, &other, slice, layout);
        cr_expect(other.code == KERN_DEVERR_BOUNDS && other.line == 1 && other.col == 2 &&
                      other.a == 9 && other.b == 10,
                  "another error's record is kept");

        /* a caller without a slice: every push overflows (capacity 0), nothing crashes */
        kern_err_record none = {0};
        np = 4;
        fn(args, 0, 1, &none, NULL, NULL);
        cr_expect(none.code == KERN_DEVERR_ADSTACK && none.b == 0 && none.a == 4,
                  "no slice: code %d b %lld a %lld", none.code, (long long)none.b,
                  (long long)none.a);
        cr_expect(out[0] == 0 && out[3] == 0, "pops without a slice give 0");
        free(slice);
        llvm_jit_free(j);
        ir_module_free(m);
    }
}

/* kernel mix(items: i32, out: i64[]): per item i, with c = i % 4: push 100 i + t for t in
 * 0..c (the lanes of a vector enter at depth 0, so the active ones push at one depth: one
 * masked vector store), then 1000 i + t for t in 0..3 (now at depths c + t, which differ
 * between the lanes: a scatter), then out[u items + i] = pop for u in 0..c + 3 (gathers;
 * the stores contiguous, so that the task runs in SIMD lanes). One i64 stack of capacity
 * 6. */
static ir_module *build_mixed_depths(void) {
    ir_module *m = ir_module_new("mix.kern");
    ir_param ps[2] = {
        {.name = "items", .type = ty_i32(), .nograd = false, .loc = LOC(1, 1)},
        {.name = "out", .type = ty_array(ty_i64(), 1), .nograd = false, .loc = LOC(1, 2)}};
    ir_kernel *kn = ir_kernel_new(m, "mix", LOC(1, 1), ps, 2);
    uint32_t s = ir_kernel_add_adstack(kn, ty_i64(), sz_const(&m->mem, 6), LOC(2, 5));
    ir_value *items = kn->body->args[0], *out = kn->body->args[1];
    ir_value *zero, *i;
    ir_builder b = item_body(m, kn, items, &zero, &i);
    ir_value *c = ir_binop(&b, IR_REM, i, ir_const_int(&b, ty_i32(), 4));
    const int32_t mul[2] = {100, 1000};
    ir_value *ends[2] = {c, ir_const_int(&b, ty_i32(), 3)};
    for (int k = 0; k < 2; k++) {
        ir_op *f = ir_for(&b, zero, ends[k], NULL, 0, false);
        ir_builder lb = ir_builder_at_end(m, f->regions[0]);
        ir_value *t = f->regions[0]->args[0];
        ir_value *v =
            ir_binop(&lb, IR_ADD, ir_binop(&lb, IR_MUL, i, ir_const_int(&lb, ty_i32(), mul[k])), t);
        ir_adpush(&lb, s, ir_cast(&lb, ty_i64(), v));
        ir_yield(&lb, NULL, 0);
    }
    pop_loop(m, &b, ir_binop(&b, IR_ADD, c, ends[1]), s, out, i, items, true);
    return m;
}

/* kernel gap(items: i32, pre: i32, n: i32, cap: i32, out: i64[]): per item i, push t for t
 * in 0..pre, then 100 + t for t in 0..n (adpush at 9:9), then out[16 i + u] = pop for u
 * in 0..pre + n. One i64 stack of capacity cap. */
static ir_module *build_gap(void) {
    ir_module *m = ir_module_new("gap.kern");
    ir_param ps[5] = {
        {.name = "items", .type = ty_i32(), .nograd = false, .loc = LOC(1, 1)},
        {.name = "pre", .type = ty_i32(), .nograd = false, .loc = LOC(1, 2)},
        {.name = "n", .type = ty_i32(), .nograd = false, .loc = LOC(1, 3)},
        {.name = "cap", .type = ty_i32(), .nograd = false, .loc = LOC(1, 4)},
        {.name = "out", .type = ty_array(ty_i64(), 1), .nograd = false, .loc = LOC(1, 5)}};
    ir_kernel *kn = ir_kernel_new(m, "gap", LOC(1, 1), ps, 5);
    uint32_t s = ir_kernel_add_adstack(kn, ty_i64(), sz_param(&m->mem, 3), LOC(2, 5));
    ir_value *items = kn->body->args[0], *out = kn->body->args[4];
    ir_value *zero, *i;
    ir_builder b = item_body(m, kn, items, &zero, &i);
    for (int k = 0; k < 2; k++) {
        ir_op *f = ir_for(&b, zero, kn->body->args[1 + k], NULL, 0, false);
        ir_builder lb = ir_builder_at_end(m, f->regions[0]);
        ir_value *t = f->regions[0]->args[0];
        ir_value *v = k ? ir_binop(&lb, IR_ADD, t, ir_const_int(&lb, ty_i32(), 100)) : t;
        lb.loc = LOC(8 + k, 9);
        ir_adpush(&lb, s, ir_cast(&lb, ty_i64(), v));
        ir_yield(&lb, NULL, 0);
    }
    pop_loop(m, &b, ir_binop(&b, IR_ADD, kn->body->args[1], kn->body->args[2]), s, out, i,
             ir_const_int(&b, ty_i32(), 16), false);
    return m;
}

/* A loop's test of a stack's capacity counts the depth the loop starts at: pre entries on
 * the stack, then a loop of n pushes with room for pre + n - 1 overflows at the loop's push
 * (depth pre + n), writes nothing past the capacity, and the pops give back what fit; with
 * room for pre + n every value comes back. (Each push count alone is below the capacity:
 * only the test's d + pushes <= cap catches it.) */
Test(llvm_adstack, loop_test_counts_the_depth_it_starts_at) {
    for (int l = 0; l < 2; l++) {
        ir_module *m = build_gap();
        llvm_jit *j = jit_ir(m, AD_OPT_LEVELS[l], false);
        kern_task_fn fn = (kern_task_fn)llvm_jit_lookup(j, "kern_gap__t0");
        cr_assert(fn);
        enum { PRE = 5, NPUSH = 6 };
        for (int room = PRE + NPUSH - 1; room <= PRE + NPUSH; room++) {
            int32_t items = 1, pre = PRE, n = NPUSH, cap = room;
            int64_t out[16];
            for (int x = 0; x < 16; x++)
                out[x] = -1;
            kern_array_desc d = desc(out, 16, 1, 1);
            void *args[5] = {&items, &pre, &n, &cap, &d};
            int64_t layout[2] = {16, room};
            size_t bytes = 16 + (size_t)room * 8 + 32;
            unsigned char *slice = canary_slice(bytes);
            kern_err_record e = {0};
            fn(args, 0, 1, &e, slice, layout);
            bool fits = room == PRE + NPUSH;
            if (fits) {
                cr_expect_eq(e.code, 0, "O%d room %d: error %d", AD_OPT_LEVELS[l], room, e.code);
            } else {
                cr_expect_eq(e.code, KERN_DEVERR_ADSTACK, "O%d: code %d", AD_OPT_LEVELS[l], e.code);
                cr_expect(e.line == 9 && e.col == 9, "at %u:%u", e.line, e.col);
                cr_expect_eq(e.b, room, "capacity %lld", (long long)e.b);
                cr_expect_eq(e.a, PRE + NPUSH, "depth needed %lld", (long long)e.a);
            }
            for (int u = 0; u < PRE + NPUSH; u++) {
                /* pops from the top: 100 + NPUSH - 1 .. 100, then PRE - 1 .. 0; past the
                 * capacity a pop gives 0 */
                int depth = PRE + NPUSH - 1 - u; /* the entry this pop reads */
                int64_t want = depth >= room ? 0 : depth >= PRE ? 100 + depth - PRE : depth;
                cr_expect_eq(out[u], want, "O%d room %d pop %d: %lld, want %lld", AD_OPT_LEVELS[l],
                             room, u, (long long)out[u], (long long)want);
            }
            for (size_t x = 0; x < bytes; x++)
                if (x < 16 || x >= 16 + (size_t)room * 8)
                    cr_expect_eq(slice[x], 0xAB, "room %d: byte %zu outside the stack written",
                                 room, x);
            free(slice);
        }
        llvm_jit_free(j);
        ir_module_free(m);
    }
}

/* SIMD pushes and pops (4 lanes, entry k of lane l at k * 4 + l of the slice) whose lanes
 * are at one depth and at different ones: every value comes back in reverse order. */
Test(llvm_adstack, simd_pushes_at_one_depth_and_at_different_ones) {
    for (int l = 0; l < 2; l++) {
        ir_module *m = build_mixed_depths();
        kc_options o;
        kc_options_default(&o);
        o.opt_level = AD_OPT_LEVELS[l];
        o.simd = 4;
        ir_lower_semantics(m, false);
        char err[1024];
        llvm_jit *j = llvm_jit_compile(m, &o, err, sizeof err);
        cr_assert(j, "JIT failed: %s", err);
        kern_task_fn fn = (kern_task_fn)llvm_jit_lookup(j, "kern_mix__t0");
        cr_assert(fn);
        enum { ITEMS = 11 }; /* two vectors and a partial one */
        int32_t items = ITEMS;
        int64_t out[6 * ITEMS];
        for (int x = 0; x < 6 * ITEMS; x++)
            out[x] = -1;
        kern_array_desc d = desc(out, 6 * ITEMS, 1, 1);
        void *args[2] = {&items, &d};
        int64_t layout[2] = {0, 6};
        unsigned char *slice = canary_slice(6 * 4 * 8);
        kern_err_record e = {0};
        fn(args, 0, ITEMS, &e, slice, layout);
        cr_expect_eq(e.code, 0, "error %d", e.code);
        for (int it = 0; it < ITEMS; it++) {
            int c = it % 4;
            for (int u = 0; u < 6; u++) {
                int64_t want = u < 3       ? 1000 * it + (2 - u)
                               : u < c + 3 ? 100 * it + (c - 1 - (u - 3))
                                           : -1;
                cr_expect_eq(out[u * ITEMS + it], want, "O%d item %d pop %d: %lld, want %lld",
                             AD_OPT_LEVELS[l], it, u, (long long)out[u * ITEMS + it],
                             (long long)want);
            }
        }
        free(slice);
        llvm_jit_free(j);
        ir_module_free(m);
    }
}

typedef struct ad_worker {
    kern_task_fn body;
    void *const *args;
    int64_t count, chunk;
    atomic_llong *next;
    kern_err_record *err;
    unsigned char *slice;
    const int64_t *layout;
} ad_worker;

static void *ad_work(void *arg) {
    ad_worker *w = arg;
    for (;;) {
        int64_t b = atomic_fetch_add(w->next, w->chunk);
        if (b >= w->count)
            return NULL;
        int64_t e = b + w->chunk < w->count ? b + w->chunk : w->count;
        w->body(w->args, b, e, w->err, w->slice, w->layout);
    }
}

/* 8 threads, each with its own slice, overflow at different depths (items push 4..7
 * values onto a stack of capacity 3): the record ends with the deepest, 7. */
Test(llvm_adstack, adstack_overflow_many_threads_deepest) {
    ir_module *m = build_overflow();
    llvm_jit *j = jit_ir(m, 2, false);
    kern_task_fn fn = (kern_task_fn)llvm_jit_lookup(j, "kern_ovf__t0");
    enum { ITEMS = 64, THREADS = 8, NP = 4, CAP = 3 };
    int32_t items = ITEMS, np = NP;
    int64_t *out = calloc(ITEMS * 8, sizeof *out);
    kern_array_desc d = desc(out, ITEMS * 8, 1, 1);
    void *args[3] = {&items, &np, &d};
    int64_t layout[2] = {0, CAP};
    kern_err_record e = {0};
    atomic_llong next = 0;
    ad_worker w[THREADS];
    pthread_t th[THREADS];
    for (int k = 0; k < THREADS; k++) {
        w[k] = (ad_worker){fn, args, ITEMS, 1, &next, &e, canary_slice(CAP * 8 + 8), layout};
        pthread_create(&th[k], NULL, ad_work, &w[k]);
    }
    for (int k = 0; k < THREADS; k++)
        pthread_join(th[k], NULL);
    cr_expect(e.code == KERN_DEVERR_ADSTACK && e.a == NP + 3 && e.b == CAP && e.line == 12,
              "code %d a %lld b %lld line %u", e.code, (long long)e.a, (long long)e.b, e.line);
    for (int i = 0; i < ITEMS; i++) {
        int c = NP + i % 4; /* pops c - 1 .. 0: the first c - CAP are beyond the capacity */
        for (int t = 0; t < c; t++) {
            int64_t want = t < c - CAP ? 0 : 100 * i + (c - 1 - t);
            cr_expect_eq(out[i * 8 + t], want, "item %d pop %d", i, t);
        }
    }
    for (int k = 0; k < THREADS; k++) {
        for (int x = CAP * 8; x < CAP * 8 + 8; x++)
            cr_expect_eq(w[k].slice[x], 0xAB, "thread %d canary", k);
        free(w[k].slice);
    }
    free(out);
    llvm_jit_free(j);
    ir_module_free(m);
}

/* The checks stay in optimized release code, and the depth counters become registers. */
Test(llvm_adstack, adstack_release_code_checked_counters_promoted) {
    ir_module *m = build_lifo(false);
    kc_options o;
    kc_options_default(&o);
    o.opt_level = 2;
    o.debug = false;
    ir_lower_semantics(m, false);
    char err[512];
    char *text = llvm_emit_text(m, &o, err, sizeof err);
    cr_assert(text, "%s", err);
    cr_expect(has(text, "define void @kern_lifo__t0(ptr ") && has(text, "ptr noalias nocapture"),
              "6 parameters, the slice noalias");
    cr_expect(has(text, "@kern.adstack_overflow"), "the overflow path is kept at -O2");
    cr_expect(has(text, "cmpxchg") && has(text, "atomicrmw max"), "the overflow record");
    cr_expect(!has(text, "alloca"), "depth counters promoted to registers");
    free(text);
    ir_module_free(m);
}

/* atomic_xchg from 8 threads: every value written is returned exactly once as an old
 * value or left in the cell, so the olds and the final value are a permutation of
 * 0..N (the cell starts at 0, item i writes i + 1). */
Test(llvm_adstack, atomic_xchg_threads_i32_f32) {
    enum { NX = 20000, THREADS = 8 };
    for (int l = 0; l < 2; l++) {
        for (int debug = 0; debug < 2; debug++) {
            ir_module *m = ir_module_new("xchg.kern");
            ir_param ps[4] = {{.name = "ci", .type = ty_array(ty_i32(), 1), .nograd = false, .loc = LOC(1, 1)},
                              {.name = "cf", .type = ty_array(ty_f32(), 1), .nograd = false, .loc = LOC(1, 2)},
                              {.name = "oi", .type = ty_array(ty_i32(), 1), .nograd = false, .loc = LOC(1, 3)},
                              {.name = "of", .type = ty_array(ty_f32(), 1), .nograd = false, .loc = LOC(1, 4)}};
            ir_kernel *kn = ir_kernel_new(m, "xchg", LOC(1, 1), ps, 4);
            ir_value **a = kn->body->args;
            ir_builder top = ir_builder_at_end(m, kn->body);
            ir_value *zero = ir_const_int(&top, ty_i32(), 0);
            ir_value *bounds[2] = {zero, ir_dim(&top, a[2], 0)};
            ir_region *body = ir_parallel(&top, bounds, 1)->regions[0];
            ir_value *i = body->args[0];
            ir_builder b = ir_builder_at_end(m, body);
            ir_value *v = ir_binop(&b, IR_ADD, i, ir_const_int(&b, ty_i32(), 1));
            /* the cell index is i - i (0, but not a constant for LLVM before folding) */
            ir_value *c0 = ir_binop(&b, IR_SUB, i, i);
            b.loc = LOC(5, 7);
            ir_store(&b, a[2], &i, 1, ir_atomic(&b, IR_ATOMIC_XCHG, a[0], &c0, 1, v));
            ir_store(&b, a[3], &i, 1,
                     ir_atomic(&b, IR_ATOMIC_XCHG, a[1], &c0, 1, ir_cast(&b, ty_f32(), v)));

            llvm_jit *j = jit_ir(m, AD_OPT_LEVELS[l], debug);
            kern_task_fn fn = (kern_task_fn)llvm_jit_lookup(j, "kern_xchg__t0");
            int32_t ci = 0, *oi = calloc(NX, sizeof *oi);
            float cf = 0, *of = calloc(NX, sizeof *of);
            kern_array_desc d[4] = {desc(&ci, 1, 1, 1), desc(&cf, 1, 1, 1), desc(oi, NX, 1, 1),
                                    desc(of, NX, 1, 1)};
            void *args[4] = {&d[0], &d[1], &d[2], &d[3]};
            kern_err_record e = {0};
            atomic_llong next = 0;
            ad_worker w[THREADS];
            pthread_t th[THREADS];
            for (int k = 0; k < THREADS; k++) {
                w[k] = (ad_worker){fn, args, NX, 7, &next, &e, NULL, NULL};
                pthread_create(&th[k], NULL, ad_work, &w[k]);
            }
            for (int k = 0; k < THREADS; k++)
                pthread_join(th[k], NULL);
            cr_expect_eq(e.code, 0);
            unsigned char *seen_i = calloc(NX + 1, 1), *seen_f = calloc(NX + 1, 1);
            int64_t sum_i = ci, bad = 0;
            double sum_f = cf;
            for (int x = 0; x < NX; x++) {
                sum_i += oi[x];
                sum_f += of[x];
                bad += oi[x] < 0 || oi[x] > NX || seen_i[oi[x]]++;
                bad += !(of[x] >= 0 && of[x] <= NX && of[x] == (float)(int)of[x]) ||
                       seen_f[(int)of[x]]++;
            }
            bad += seen_i[ci]++ || seen_f[(int)cf]++;
            int64_t total = (int64_t)NX * (NX + 1) / 2;
            cr_expect_eq(sum_i, total, "O%d i32: olds + final = %lld", AD_OPT_LEVELS[l],
                         (long long)sum_i);
            cr_expect(sum_f == (double)total, "O%d f32: olds + final = %.17g", AD_OPT_LEVELS[l],
                      sum_f);
            cr_expect_eq(bad, 0, "each of 0..N appears once among the olds and the final value");
            free(seen_i);
            free(seen_f);
            free(oi);
            free(of);
            llvm_jit_free(j);
            ir_module_free(m);
        }
    }
}

/* atomic_xchg in debug mode: an index out of bounds is recorded and the exchange skipped
 * (yields 0); also i64, f64 and u32 cells in one thread. */
Test(llvm_adstack, atomic_xchg_bounds_and_types) {
    for (int l = 0; l < 2; l++) {
        ir_module *m = ir_module_new("xchg2.kern");
        ir_param ps[4] = {{.name = "cl", .type = ty_array(ty_i64(), 1), .nograd = false, .loc = LOC(1, 1)},
                          {.name = "cd", .type = ty_array(ty_f64(), 1), .nograd = false, .loc = LOC(1, 2)},
                          {.name = "cb", .type = ty_array(ty_u32(), 1), .nograd = false, .loc = LOC(1, 3)},
                          {.name = "old", .type = ty_array(ty_f64(), 1), .nograd = false, .loc = LOC(1, 4)}};
        ir_kernel *kn = ir_kernel_new(m, "x2", LOC(1, 1), ps, 4);
        ir_value **a = kn->body->args;
        ir_builder top = ir_builder_at_end(m, kn->body);
        ir_region *body = ir_serial(&top)->regions[0];
        ir_builder b = ir_builder_at_end(m, body);
        ir_value *z = ir_const_int(&b, ty_i32(), 0), *one = ir_const_int(&b, ty_i32(), 1),
                 *two = ir_const_int(&b, ty_i32(), 2), *three = ir_const_int(&b, ty_i32(), 3);
        ir_value *ol = ir_atomic(&b, IR_ATOMIC_XCHG, a[0], &z, 1,
                                 ir_const_int(&b, ty_i64(), -((int64_t)1 << 40)));
        ir_store(&b, a[3], &z, 1, ir_cast(&b, ty_f64(), ol));
        ir_value *od =
            ir_atomic(&b, IR_ATOMIC_XCHG, a[1], &z, 1, ir_const_float(&b, ty_f64(), -2.5));
        ir_store(&b, a[3], &one, 1, od);
        ir_value *ob =
            ir_atomic(&b, IR_ATOMIC_XCHG, a[2], &z, 1, ir_const_int(&b, ty_u32(), 0x80000001ll));
        ir_store(&b, a[3], &two, 1, ir_cast(&b, ty_f64(), ob));
        b.loc = LOC(9, 3);
        ir_value *bad =
            ir_atomic(&b, IR_ATOMIC_XCHG, a[1], &three, 1, ir_const_float(&b, ty_f64(), 7.0));
        ir_store(&b, a[3], &three, 1, bad);

        llvm_jit *j = jit_ir(m, AD_OPT_LEVELS[l], true);
        kern_task_fn fn = (kern_task_fn)llvm_jit_lookup(j, "kern_x2__t0");
        int64_t cl = 123456789012345ll;
        double cd = 0.75, old[4] = {-1, -1, -1, -1};
        uint32_t cb = 0xFFFFFFFFu;
        kern_array_desc d[4] = {desc(&cl, 1, 1, 1), desc(&cd, 1, 1, 1), desc(&cb, 1, 1, 1),
                                desc(old, 4, 1, 1)};
        void *args[4] = {&d[0], &d[1], &d[2], &d[3]};
        kern_err_record e = {0};
        fn(args, 0, 1, &e, NULL, NULL);
        cr_expect(cl == -((int64_t)1 << 40) && cd == -2.5 && cb == 0x80000001u,
                  "new values stored");
        cr_expect(old[0] == 123456789012345.0 && old[1] == 0.75 && old[2] == 4294967295.0,
                  "old values %g %g %g", old[0], old[1], old[2]);
        cr_expect(e.code == KERN_DEVERR_BOUNDS && e.line == 9 && e.col == 3 && e.a == 3 && e.b == 1,
                  "bounds record %d %u:%u", e.code, e.line, e.col);
        cr_expect_eq(old[3], 0.0, "the skipped exchange yields 0");
        llvm_jit_free(j);
        ir_module_free(m);
    }
}

/* llvm_reduce.c: atomic adds into uniform elements accumulate per task call. The sums
 * must equal a C loop's (integers exactly; floats within rounding), from several
 * threads and chunk sizes, and the emitted code must hold one atomic per reduction
 * instead of one per work item (release), or keep the per-item atomics (debug). */
static int count_of(const char *text, const char *s) {
    int n = 0;
    for (const char *p = strstr(text, s); p; p = strstr(p + 1, s))
        n++;
    return n;
}

Test(llvm_adstack, reductions_accumulate_per_call) {
    const char *src = "kernel red(x: f64[], n: i64[], s: f64[], t: f64[], m: i32[], k: i32) {\n"
                      "    for i in 0..len(x) {\n"
                      "        s[k] += x[i] * x[i];\n" /* uniform index: reduced */
                      "        n[0] += i64(i);\n"      /* integer: reduced, exact */
                      "        if x[i] > 0.0 { s[k] -= 0.5 * x[i]; }\n" /* under control flow */
                      "        t[i % 2] += x[i];\n" /* not uniform: stays atomic */
                      "        m[0] += 1;\n"
                      "        m[1] = 7;\n" /* m accessed otherwise: stays atomic */
                      "    }\n"
                      "}\n";
    enum { NRED = 10007 };
    double *x = malloc(NRED * sizeof *x);
    double ref_s = 0, ref_t[2] = {0, 0};
    int64_t ref_n = 0;
    for (int i = 0; i < NRED; i++) {
        x[i] = sin(0.37 * i) * 3.0;
        ref_s += x[i] * x[i] - (x[i] > 0 ? 0.5 * x[i] : 0.0);
        ref_t[i % 2] += x[i];
        ref_n += i;
    }
    for (int l = 0; l < 4; l++) { /* -O0, -O3; unchecked, then checked code */
        for (int threads = 1; threads <= 4; threads += 3) {
            build_checks = l >= 2;
            prog p = build(src, OPT_LEVELS[l % 2], false);
            build_checks = false;
            double s[3] = {0, 1.0, 0}, t[2] = {0, 0};
            int64_t n[1] = {5};
            int32_t m[2] = {0, 0}, k = 1;
            kern_array_desc dx = desc(x, NRED, 1, 1), dn = desc(n, 1, 1, 1), ds = desc(s, 3, 1, 1),
                            dt = desc(t, 2, 1, 1), dm = desc(m, 2, 1, 1);
            void *args[6] = {&dx, &dn, &ds, &dt, &dm, &k};
            kern_err_record e = run_mt(&p, "red", args, 97, threads);
            cr_expect_eq(e.code, 0);
            cr_expect_eq(n[0], 5 + ref_n, "-O%d %d threads: n = %lld", OPT_LEVELS[l % 2], threads,
                         (long long)n[0]);
            cr_expect_eq(m[0], NRED);
            cr_expect(fabs(s[1] - (1.0 + ref_s)) <= 1e-9 * fabs(ref_s), "s = %.17g, C %.17g", s[1],
                      1.0 + ref_s);
            cr_expect(s[0] == 0 && s[2] == 0, "other elements untouched");
            cr_expect(fabs(t[0] - ref_t[0]) <= 1e-9 && fabs(t[1] - ref_t[1]) <= 1e-9);
            release(&p);
        }
    }
    free(x);
    for (int dbg = 0; dbg < 2; dbg++) {
        kc_ctx *c = kc_ctx_new();
        c->opts.debug = dbg;
        c->opts.opt_level = 0; /* the code as emitted */
        ir_module *m = kc_compile_source(c, "t.kern", src, strlen(src));
        cr_assert(m);
        char err[512];
        char *text = llvm_emit_text(m, &c->opts, err, sizeof err);
        cr_assert(text, "%s", err);
        /* an accumulator (\"red\" alloca) per reduced atomic: s[k] +=, s[k] -= and
         * n[0] +=; t and m keep their per-item atomics. Checked code (debug) also has a
         * flag per accumulator, whether its add ran (its error is recorded at the end). */
        int acc = count_of(text, "%red");
        int allocas = count_of(text, "= alloca");
        int ran = count_of(text, "%red.ran");
        cr_expect(allocas >= 3 && acc >= 3, "%s: 3 accumulators, got %d", dbg ? "debug" : "release",
                  acc);
        if (dbg)
            cr_expect(ran >= 3, "debug: 3 flags, got %d", ran);
        else
            cr_expect_eq(ran, 0, "release: no flags, got %d", ran);
        free(text);
        ir_module_free(m);
        kc_ctx_free(c);
    }
}
