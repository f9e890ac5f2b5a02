/* test_adcheck.c - the global-access check of reverse mode (passes/ad_check.c, suite
 * `adcheck`; docs/grad-check.md).
 *
 * Each program is lowered and optimized to the primal IR that the driver checks, and
 * ad_check_kernel runs on every kernel into a sink of its own, so these tests do not depend
 * on the gradient transform. The expectations come from reference section 8: which read/write
 * pairs must be rejected and which the check must prove safe. Locations in the expected
 * messages were counted by hand from the sources below (a read is located at the array
 * name, a store and `*=` at their operator, an atomic call at its name). A few tests go
 * through the driver with KC_GRAD_ALL, where a rejected kernel fails the compilation. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/context.h"
#include "../compiler/driver.h"
#include "../compiler/lower.h"
#include "../passes/passes.h"

typedef struct checked {
    bool ok; /* every kernel passed */
    int errors, warnings, notes;
    char *diags; /* "L:C: severity: message\n" per diagnostic, in order */
} checked;

static const char *sev_name(diag_severity s) {
    return s == DIAG_ERROR ? "error" : s == DIAG_WARNING ? "warning" : "note";
}

/* The IR that the driver checks (compiler/driver.c): lowered and optimized, before the
 * gradients and before ir_opt_private_atomics turns owned `x[i] += v` into a load and a
 * store. */
static checked run_check_at(const char *text, bool as_warning, int opt_level) {
    checked r = {.ok = true};
    kc_ctx *ctx = kc_ctx_new();
    fe_file *f = kc_check_source(ctx, "t.kern", text, strlen(text));
    ir_module *m = f ? fe_lower(ctx, f) : NULL;
    if (!m)
        diag_print_all(stderr, &ctx->diags);
    cr_assert_not_null(m, "test program does not compile");
    ir_optimize(m, opt_level);
    const kern_source *src = f->src;
    arena mem;
    arena_init(&mem);
    diag_sink sink;
    diag_init(&sink, &mem);
    kern_buf before = {0}, after = {0};
    ir_print(&before, m, NULL);
    ir_foreach_kernel(k, m) {
        if (!ad_check_kernel(k, &sink, src, as_warning))
            r.ok = false;
    }
    ir_print(&after, m, NULL); /* the check only reads the IR */
    cr_expect(before.len == after.len && !memcmp(before.data, after.data, before.len),
              "the check changed the IR");
    buf_free(&before);
    buf_free(&after);
    kern_buf b = {0};
    for (int i = 0; i < sink.len; i++) {
        const diag *d = &sink.items[i];
        buf_printf(&b, "%u:%u: %s: %s\n", d->loc.line, d->loc.col, sev_name(d->severity),
                   d->message);
        r.errors += d->severity == DIAG_ERROR;
        r.warnings += d->severity == DIAG_WARNING;
        r.notes += d->severity == DIAG_NOTE;
    }
    r.diags = b.data ? buf_take(&b) : strdup("");
    diag_free(&sink);
    arena_free(&mem);
    ir_module_free(m);
    kc_ctx_free(ctx);
    return r;
}

static checked run_check(const char *text, bool as_warning) {
    return run_check_at(text, as_warning, 2);
}

/* The proofs must not depend on the optimizer: unoptimized IR keeps `t - 1` as a sub and
 * constants unshared; -O3 is checked as well. */
static void accepts(const char *text) {
    for (int opt = 0; opt <= 3; opt += 3) {
        checked r = run_check_at(text, false, opt);
        cr_expect(r.ok, "-O%d: expected the check to pass, got:\n%s", opt, r.diags);
        cr_expect_eq(r.errors + r.warnings + r.notes, 0, "-O%d: unexpected diagnostics:\n%s", opt,
                     r.diags);
        free(r.diags);
    }
}

/* Expects exactly one error, whose text starts with `first` (location and message), and a
 * note "written here" at `written`. */
static void rejects(const char *text, const char *first, const char *written) {
    checked r = run_check(text, false);
    cr_expect_not(r.ok, "expected the check to fail:\n%s", text);
    cr_expect_eq(r.errors, 1, "expected one error, got:\n%s", r.diags);
    cr_expect_eq(r.warnings, 0);
    cr_expect(!strncmp(r.diags, first, strlen(first)), "expected first line\n  %s\ngot:\n%s", first,
              r.diags);
    char note[64];
    snprintf(note, sizeof note, "\n%s: note: written here\n", written);
    cr_expect(strstr(r.diags, note), "expected note%sgot:\n%s", note, r.diags);
    cr_expect(strstr(r.diags, ": note: keep the value in a local, write a different array, "
                              "or split the kernel; --no-grad-check turns this into a "
                              "warning\n"),
              "no fix note in:\n%s", r.diags);
    free(r.diags);
    r = run_check_at(text, false, 0);
    cr_expect_not(r.ok, "-O0: expected the check to fail:\n%s", text);
    cr_expect(!strncmp(r.diags, first, strlen(first)), "-O0: expected first line\n  %s\ngot:\n%s",
              first, r.diags);
    free(r.diags);
}

/* ---- rejected ------------------------------------------------------------------------ */

Test(adcheck, same_task_unrelated_indices) {
    rejects("kernel k(x: f32[], j: i32[], y: f32[]) {\n"
            "    for i in 0..len(x) {\n"
            "        y[i] = x[i];\n"
            "        x[j[i]] = 1.0;\n"
            "    }\n"
            "}\n",
            "3:16: error: 'x' is read here and may be written afterwards by kernel 'k' "
            "(line 4:17), so k.grad would read changed values\n",
            "4:17");
}

Test(adcheck, read_then_write_same_index_in_loop) {
    rejects("kernel k(x: f32[], steps: i32) {\n"
            "    for i in 0..len(x) {\n"
            "        for t in 0..steps {\n"
            "            let v = x[i];\n"
            "            x[i] = sin(v);\n"
            "        }\n"
            "    }\n"
            "}\n",
            "4:21: error: 'x' is read here", "5:18");
}

/* The condition of a while runs again after its body wrote. */
Test(adcheck, while_condition_then_body_write) {
    rejects("kernel k(x: f32[], v: f32[]) {\n"
            "    for i in 0..len(x) {\n"
            "        while x[i] > 1.0 {\n"
            "            x[i] = v[i];\n"
            "        }\n"
            "    }\n"
            "}\n",
            "3:15: error: 'x' is read here and may be written afterwards by kernel 'k' "
            "(line 4:18)",
            "4:18");
}

/* The two arms of an if inside a loop: the next iteration may take the other arm. */
Test(adcheck, if_arms_inside_loop) {
    rejects("kernel k(x: f32[], y: f32[], steps: i32) {\n"
            "    for i in 0..len(x) {\n"
            "        for t in 0..steps {\n"
            "            if t % 2 == 0 {\n"
            "                y[i] = x[i];\n"
            "            } else {\n"
            "                x[i] = 1.0;\n"
            "            }\n"
            "        }\n"
            "    }\n"
            "}\n",
            "5:24: error: 'x' is read here", "7:22");
}

/* The write comes first in the body, but the next iteration writes again after the read. */
Test(adcheck, write_then_read_inside_loop) {
    rejects("kernel k(x: f32[], y: f32[], v: f32[], steps: i32) {\n"
            "    for i in 0..len(x) {\n"
            "        for t in 0..steps {\n"
            "            x[i] = v[i] * 2.0;\n"
            "            y[i] = sin(x[i]);\n"
            "        }\n"
            "    }\n"
            "}\n",
            "5:24: error: 'x' is read here and may be written afterwards by kernel 'k' "
            "(line 4:18)",
            "4:18");
}

Test(adcheck, mul_assign) {
    rejects("kernel k(a: f32[]) {\n"
            "    for i in 0..len(a) {\n"
            "        a[i] *= 2.0;\n"
            "    }\n"
            "}\n",
            "3:14: error: 'a' is read here and may be written afterwards by kernel 'k' "
            "(line 3:14)",
            "3:14");
}

Test(adcheck, div_assign_serial) {
    rejects("kernel k(a: f64[], s: f64) {\n"
            "    a[0] /= s;\n"
            "}\n",
            "2:10: error: 'a' is read here", "2:10");
}

Test(adcheck, read_in_task1_write_in_task2) {
    rejects("kernel k(x: f32[], y: f32[]) {\n"
            "    for i in 0..len(x) {\n"
            "        y[i] = x[i] * 3.0;\n"
            "    }\n"
            "    for i in 0..len(x) {\n"
            "        x[i] = 0.0;\n"
            "    }\n"
            "}\n",
            "3:16: error: 'x' is read here and may be written afterwards by kernel 'k' "
            "(line 6:14)",
            "6:14");
}

Test(adcheck, atomic_with_used_result) {
    rejects("kernel k(c: f32[], x: f32[], y: f32[]) {\n"
            "    for i in 0..len(y) {\n"
            "        let old = atomic_add(c[0], x[i]);\n"
            "        y[i] = old;\n"
            "    }\n"
            "}\n",
            "3:19: error: 'c' is read here and may be written afterwards by kernel 'k' "
            "(line 3:19)",
            "3:19");
}

/* `+=` is a write: a read of the same array in an earlier task is changed by it. */
Test(adcheck, plus_assign_after_read) {
    rejects("kernel k(x: f32[], y: f32[], j: i32[]) {\n"
            "    for i in 0..len(x) {\n"
            "        y[i] = x[i];\n"
            "    }\n"
            "    for i in 0..len(x) {\n"
            "        x[j[i]] += 1.0;\n"
            "    }\n"
            "}\n",
            "3:16: error: 'x' is read here", "6:17");
}

/* Integer arrays count: K.grad re-reads them for indices and control flow. */
Test(adcheck, int_array_counts) {
    rejects("kernel k(cnt: i32[]) {\n"
            "    for i in 0..len(cnt) {\n"
            "        cnt[i] = cnt[i] + 1;\n"
            "    }\n"
            "}\n",
            "3:18: error: 'cnt' is read here", "3:16");
}

/* nograd arrays count too. */
Test(adcheck, nograd_array_counts) {
    rejects("kernel k(nograd w: f32[], y: f32[], z: f32[]) {\n"
            "    for i in 0..len(y) {\n"
            "        z[i] = w[i];\n"
            "    }\n"
            "    for i in 0..len(y) {\n"
            "        w[i] = 0.0;\n"
            "    }\n"
            "}\n",
            "3:16: error: 'w' is read here", "6:14");
}

/* In a 2-D task, x[i] belongs to every thread (i, j): another thread writes it after this
 * thread read it, even though this thread wrote first. */
Test(adcheck, element_shared_by_threads) {
    rejects("kernel k(x: f32[], y: f32[,]) {\n"
            "    for i in 0..len(x), j in 0..shape(y, 1) {\n"
            "        x[i] = 1.0;\n"
            "        y[i, j] = x[i];\n"
            "    }\n"
            "}\n",
            "4:19: error: 'x' is read here", "3:14");
}

/* An offset over the parallel index is not disjoint across threads: thread i - 1 writes
 * x[i] after (or before) thread i read it. */
Test(adcheck, neighbour_written_by_other_thread) {
    rejects("kernel k(x: f32[]) {\n"
            "    for i in 0..len(x) - 1 {\n"
            "        x[i + 1] = x[i];\n"
            "    }\n"
            "}\n",
            "3:20: error: 'x' is read here", "3:18");
}

/* Same uniform index, later task. */
Test(adcheck, same_uniform_row_later_task) {
    rejects("kernel k(x: f32[,], y: f32[], t: i32) {\n"
            "    for i in 0..shape(x, 1) {\n"
            "        y[i] = x[t, i];\n"
            "    }\n"
            "    for i in 0..shape(x, 1) {\n"
            "        x[t, i] = y[i];\n"
            "    }\n"
            "}\n",
            "3:16: error: 'x' is read here", "6:17");
}

/* ---- accepted ------------------------------------------------------------------------ */

Test(adcheck, different_arrays) {
    accepts("kernel k(x: f32[], y: f32[]) {\n"
            "    for i in 0..len(x) {\n"
            "        y[i] = x[i] * 2.0;\n"
            "    }\n"
            "}\n"
            "kernel k2(x: f32[], y: f32[]) {\n"
            "    for i in 0..len(x) {\n"
            "        y[i] = sin(x[i]);\n"
            "    }\n"
            "}\n");
}

Test(adcheck, different_arrays_only) {
    accepts("kernel k(x: f32[], y: f32[], z: f32[], w: f32[]) {\n"
            "    for i in 0..len(x) {\n"
            "        y[i] = x[i] * w[i];\n"
            "        z[i] = x[i] - w[i];\n"
            "    }\n"
            "}\n");
}

Test(adcheck, write_earlier_task_read_later) {
    accepts("kernel k(x: f32[], y: f32[], a: f32[]) {\n"
            "    for i in 0..len(x) {\n"
            "        x[i] = a[i] * a[i];\n"
            "    }\n"
            "    for i in 0..len(x) {\n"
            "        y[i] = x[len(x) - 1 - i];\n"
            "    }\n"
            "}\n");
}

Test(adcheck, time_step_rows) {
    accepts("kernel k(x: f32[,], t: i32) {\n"
            "    for i in 0..shape(x, 1) {\n"
            "        x[t, i] = x[t - 1, i] * 0.5 + sin(x[t - 1, i]);\n"
            "    }\n"
            "}\n");
}

Test(adcheck, time_step_rows_across_tasks) {
    accepts("kernel k(x: f32[,], v: f32[,], t: i32) {\n"
            "    for i in 0..shape(x, 1) {\n"
            "        v[t + 1, i] = v[t, i] - x[t, i];\n"
            "    }\n"
            "    for i in 0..shape(x, 1) {\n"
            "        x[t + 1, i] = x[t, i] + v[t + 1, i];\n"
            "    }\n"
            "}\n");
}

/* A serial loop that writes ahead of its reads: iteration t reads row t, which iteration
 * t - 1 wrote; no later iteration writes it again. */
Test(adcheck, serial_loop_writes_ahead) {
    accepts("kernel roll(x: f32[,], f: f32[], out: f32[], steps: i32) {\n"
            "    for i in 0..shape(x, 1) {\n"
            "        for t in 0..steps {\n"
            "            x[t + 1, i] = x[t, i] + 0.2 * tanh(x[t, i] * f[t]);\n"
            "        }\n"
            "    }\n"
            "    for i in 0..shape(x, 1) {\n"
            "        out[i] = x[steps, i] * x[steps, i];\n"
            "    }\n"
            "}\n"
            "kernel scan(x: f32[,]) {\n"
            "    for i in 0..shape(x, 0) {\n"
            "        for j in 1..shape(x, 1) {\n"
            "            x[i, j] = x[i, j - 1] * 0.5 + x[i, j - 2];\n"
            "        }\n"
            "    }\n"
            "}\n");
}

/* Writes behind the reads: iteration t + 1 writes the row that iteration t read. */
Test(adcheck, serial_loop_writes_behind) {
    rejects("kernel k(x: f32[,], steps: i32) {\n"
            "    for i in 0..shape(x, 1) {\n"
            "        for t in 0..steps {\n"
            "            x[t, i] = x[t + 1, i] * 0.5;\n"
            "        }\n"
            "    }\n"
            "}\n",
            "4:23: error: 'x' is read here", "4:21");
}

/* The loop that writes ahead runs again (an outer serial loop): the second run rewrites
 * rows the first run read. */
Test(adcheck, serial_loop_writes_ahead_twice) {
    rejects("kernel k(x: f32[,], steps: i32, reps: i32) {\n"
            "    for i in 0..shape(x, 1) {\n"
            "        for r in 0..reps {\n"
            "            for t in 0..steps {\n"
            "                x[t + 1, i] = sin(x[t, i]);\n"
            "            }\n"
            "        }\n"
            "    }\n"
            "}\n",
            "5:35: error: 'x' is read here", "5:29");
}

/* Writing ahead over a loop index but in a row shared by all threads (no parallel index
 * in the write): another thread writes what this one read. */
Test(adcheck, serial_loop_writes_ahead_shared) {
    rejects("kernel k(x: f32[], y: f32[], steps: i32) {\n"
            "    for i in 0..len(y) {\n"
            "        for t in 0..steps {\n"
            "            x[t + 1] = x[t] + y[i];\n"
            "        }\n"
            "    }\n"
            "}\n",
            "4:24: error: 'x' is read here", "4:22");
}

/* `m[i, 0] = m[i, 0] * 2` inside a loop: the next iteration overwrites what this one read. */
Test(adcheck, in_place_update_in_loop) {
    rejects("kernel k(x: f32[], m: f32[,], steps: i32) {\n"
            "    for i in 0..shape(m, 0) {\n"
            "        for t in 0..steps {\n"
            "            m[i, 0] = m[i, 0] * x[i];\n"
            "        }\n"
            "    }\n"
            "}\n",
            "4:23: error: 'm' is read here and may be written afterwards by kernel 'k' "
            "(line 4:21)",
            "4:21");
}

/* Read, then write of the same element in the same iteration (over the loop index too). */
Test(adcheck, read_then_write_loop_index) {
    rejects("kernel k(m: f32[,]) {\n"
            "    for i in 0..shape(m, 0) {\n"
            "        for j in 0..shape(m, 1) {\n"
            "            let v = m[i, j];\n"
            "            m[i, j] = sin(v);\n"
            "        }\n"
            "    }\n"
            "}\n",
            "4:21: error: 'm' is read here", "5:21");
}

/* Iteration j reads m[i, j + 1], which iteration j + 1 writes afterwards. */
Test(adcheck, read_of_later_iteration) {
    rejects("kernel k(x: f32[], m: f32[,], loss: f32[]) {\n"
            "    for i in 0..shape(m, 0) {\n"
            "        var acc = 0.0;\n"
            "        for j in 0..shape(m, 1) - 1 {\n"
            "            m[i, j] = x[i] + acc;\n"
            "            acc += m[i, j + 1];\n"
            "        }\n"
            "        loss[i] = acc;\n"
            "    }\n"
            "}\n",
            "6:20: error: 'm' is read here", "5:21");
}

/* Another thread's element: thread i + 1 writes what thread i reads, loop index or not. */
Test(adcheck, write_then_read_other_thread_in_loop) {
    rejects("kernel k(x: f32[], m: f32[,], loss: f32[]) {\n"
            "    for i in 0..shape(m, 0) - 1 {\n"
            "        var acc = 0.0;\n"
            "        for j in 0..shape(m, 1) {\n"
            "            m[i, j] = x[i];\n"
            "            acc += m[i + 1, j];\n"
            "        }\n"
            "        loss[i] = acc;\n"
            "    }\n"
            "}\n",
            "6:20: error: 'm' is read here", "5:21");
}

/* An outer loop whose index the accesses lack runs the inner pair again. */
Test(adcheck, write_then_read_outer_loop_repeats) {
    rejects("kernel k(x: f32[], m: f32[,], loss: f32[], reps: i32) {\n"
            "    for i in 0..shape(m, 0) {\n"
            "        var acc = 0.0;\n"
            "        for r in 0..reps {\n"
            "            for j in 0..shape(m, 1) {\n"
            "                m[i, j] = x[i] * acc;\n"
            "                acc += m[i, j];\n"
            "            }\n"
            "        }\n"
            "        loss[i] = acc;\n"
            "    }\n"
            "}\n",
            "7:24: error: 'm' is read here", "6:25");
}

/* A while loop has no index that tells its iterations apart. */
Test(adcheck, write_then_read_in_while) {
    rejects("kernel k(x: f32[], m: f32[,], loss: f32[]) {\n"
            "    for i in 0..shape(m, 0) {\n"
            "        var acc = 0.0;\n"
            "        var j = 0;\n"
            "        while j < shape(m, 1) {\n"
            "            m[i, j] = x[i] * acc;\n"
            "            acc += m[i, j];\n"
            "            j += 1;\n"
            "        }\n"
            "        loss[i] = acc;\n"
            "    }\n"
            "}\n",
            "7:20: error: 'm' is read here", "6:21");
}

/* A read in an inner loop over kk, the write in the outer loop over j: iteration j = 1
 * writes m[i, 1], which iteration j = 0 read at kk = 1. */
Test(adcheck, inner_read_outer_write) {
    rejects("kernel k(m: f32[,], loss: f32[]) {\n"
            "    for i in 0..shape(m, 0) {\n"
            "        var acc = 0.0;\n"
            "        for j in 0..shape(m, 1) {\n"
            "            for kk in 0..shape(m, 1) {\n"
            "                acc += m[i, kk];\n"
            "            }\n"
            "            m[i, j] = acc;\n"
            "        }\n"
            "        loss[i] = acc;\n"
            "    }\n"
            "}\n",
            "6:24: error: 'm' is read here", "8:21");
}

/* The uniform base is a computation inside the task, repeated in both indices. */
Test(adcheck, uniform_computed_base) {
    accepts("kernel k(x: f32[,], t: i32) {\n"
            "    for i in 0..shape(x, 1) {\n"
            "        x[2 * t + 1, i] = x[2 * t, i] * 2.0;\n"
            "    }\n"
            "}\n");
}

Test(adcheck, write_then_read_same_thread) {
    accepts("kernel k(x: f32[], y: f32[], v: f32[]) {\n"
            "    for i in 0..len(x) {\n"
            "        x[i] = v[i];\n"
            "        y[i] = x[i];\n"
            "    }\n"
            "}\n");
}

/* The write is inside a loop that ends before the read. */
Test(adcheck, write_in_loop_then_read) {
    accepts("kernel k(x: f32[], y: f32[], v: f32[], steps: i32) {\n"
            "    for i in 0..len(x) {\n"
            "        for t in 0..steps {\n"
            "            x[i] = v[i] * 2.0;\n"
            "        }\n"
            "        y[i] = x[i];\n"
            "    }\n"
            "}\n");
}

Test(adcheck, serial_write_then_read) {
    accepts("kernel k(a: f32[], s: f32) {\n"
            "    a[0] = s;\n"
            "    a[2] = a[0] * 2.0;\n"
            "}\n");
}

Test(adcheck, different_constants) {
    accepts("kernel k(a: f32[]) {\n"
            "    a[1] = a[0];\n"
            "    a[3] = a[2] * a[0];\n"
            "}\n");
}

Test(adcheck, exclusive_if_arms) {
    accepts("kernel k(x: f32[], y: f32[], c: f32) {\n"
            "    for i in 0..len(x) {\n"
            "        if c > 0.0 {\n"
            "            x[i] = c;\n"
            "        } else {\n"
            "            y[i] = x[i];\n"
            "        }\n"
            "    }\n"
            "}\n");
}

/* ---- same thread, inside serial loops (rule 4 over loop indices) ---------------------- */

/* Taichi's test_ad_dynamic_index: iteration (j, kk) writes m[i, j, kk] and reads it back;
 * later iterations write other elements (their j or kk differs). */
Test(adcheck, write_then_read_loop_indices) {
    accepts("kernel k(x: f32[], m: f32[,,], loss: f32[]) {\n"
            "    for i in 0..shape(m, 0) {\n"
            "        var acc = 0.0;\n"
            "        for j in 0..shape(m, 1) {\n"
            "            for kk in 0..shape(m, 2) {\n"
            "                m[i, j, kk] = x[i] * f32(j + kk);\n"
            "                acc += m[i, j, kk];\n"
            "            }\n"
            "        }\n"
            "        loss[i] = acc;\n"
            "    }\n"
            "}\n");
}

/* A serial task: no thread ownership is needed, only the loop index. */
Test(adcheck, write_then_read_loop_serial) {
    accepts("kernel k(x: f32[], s: f32[]) {\n"
            "    if len(x) > 0 {\n"
            "        var acc = 0.0;\n"
            "        for j in 0..len(x) {\n"
            "            x[j] = sin(acc);\n"
            "            acc += x[j];\n"
            "        }\n"
            "        s[0] = acc;\n"
            "    }\n"
            "}\n");
}

/* The write need not dominate the read: where it did not run, the read sees memory as it
 * was before K, and no later write changes that element either. */
Test(adcheck, if_guarded_write_then_read_in_loop) {
    accepts("kernel k(x: f32[], c: f32[,], m: f32[,], loss: f32[]) {\n"
            "    for i in 0..shape(m, 0) {\n"
            "        var acc = 0.0;\n"
            "        for j in 0..shape(m, 1) {\n"
            "            if c[i, j] > 0.0 {\n"
            "                m[i, j] = x[i] * c[i, j];\n"
            "            }\n"
            "            acc += sin(m[i, j]);\n"
            "        }\n"
            "        loss[i] = acc;\n"
            "    }\n"
            "}\n");
}

/* Iteration j reads m[i, j - 1], written by iteration j - 1; the read may also come
 * before the write in the body (q: iteration j writes q[i, j + 2], read three iterations
 * later). */
Test(adcheck, read_of_earlier_iteration) {
    accepts("kernel k(x: f32[], m: f32[,], q: f32[,], loss: f32[]) {\n"
            "    for i in 0..shape(m, 0) {\n"
            "        var acc = 0.0;\n"
            "        for j in 1..shape(m, 1) {\n"
            "            m[i, j] = x[i] * f32(j);\n"
            "            acc += m[i, j - 1] * m[i, j];\n"
            "        }\n"
            "        for j in 1..shape(q, 1) - 2 {\n"
            "            acc += q[i, j - 1];\n"
            "            q[i, j + 2] = acc;\n"
            "        }\n"
            "        loss[i] = acc;\n"
            "    }\n"
            "}\n");
}

/* An outer loop writes ahead (t + 1 over t), so inner loops, even a while, do not matter. */
Test(adcheck, outer_loop_writes_ahead) {
    accepts("kernel k(x: f32[,,], steps: i32, n: i32) {\n"
            "    for i in 0..shape(x, 1) {\n"
            "        for t in 0..steps {\n"
            "            for j in 0..shape(x, 2) {\n"
            "                x[t + 1, i, j] = sin(x[t, i, j]);\n"
            "            }\n"
            "            var c = 0;\n"
            "            while c < n {\n"
            "                x[t + 1, i, c] = x[t, i, c] * 2.0;\n"
            "                c += 1;\n"
            "            }\n"
            "        }\n"
            "    }\n"
            "}\n");
}

/* Written in one inner loop, read in a later one of the same outer iteration; `+=` then
 * a read in the other arm of an if whose first arm writes the element. */
Test(adcheck, write_then_read_sibling_loops) {
    accepts("kernel k(x: f32[], p: f32[,,], s: f32[,], loss: f32[]) {\n"
            "    for i in 0..shape(p, 0) {\n"
            "        var acc = 0.0;\n"
            "        for j in 0..shape(p, 1) {\n"
            "            for kk in 0..shape(p, 2) {\n"
            "                p[i, j, kk] = cos(x[i] * f32(kk));\n"
            "            }\n"
            "            for kk in 0..shape(p, 2) {\n"
            "                acc += p[i, j, kk] * p[i, j, 0];\n"
            "            }\n"
            "            s[i, j] += x[i];\n"
            "            if acc > 0.0 {\n"
            "                s[i, j] = acc;\n"
            "            } else {\n"
            "                acc += s[i, j];\n"
            "            }\n"
            "        }\n"
            "        loss[i] = acc;\n"
            "    }\n"
            "}\n");
}

/* In-place `+=` with the parallel index: an atomic that nothing reads (before
 * ir_opt_private_atomics, which runs after the check, makes it a load and a store). */
Test(adcheck, plus_assign_in_place) {
    accepts("kernel saxpy(a: f32, x: f32[], y: f32[]) {\n"
            "    for i in 0..len(x) {\n"
            "        y[i] += a * x[i];\n"
            "    }\n"
            "}\n");
}

Test(adcheck, atomic_unused_result) {
    accepts("kernel k(x: f32[], y: f32[], j: i32[]) {\n"
            "    for i in 0..len(x) {\n"
            "        y[j[i]] += x[i];\n"
            "        atomic_max(y[0], x[i]);\n"
            "    }\n"
            "}\n");
}

/* ---- diagnostics, options, driver ---------------------------------------------------- */

Test(adcheck, as_warning) {
    checked r = run_check("kernel k(a: f32[]) {\n"
                          "    for i in 0..len(a) {\n"
                          "        a[i] *= 2.0;\n"
                          "    }\n"
                          "}\n",
                          true);
    cr_expect(r.ok, "as_warning must return true");
    cr_expect_eq(r.errors, 0, "%s", r.diags);
    cr_expect_eq(r.warnings, 1, "%s", r.diags);
    cr_expect(strstr(r.diags, "0:0: note: keep the value in a local, write a different array, "
                              "or split the kernel\n"),
              "%s", r.diags);
    cr_expect(!strncmp(r.diags, "3:14: warning: 'a' is read here",
                       strlen("3:14: warning: 'a' is read here")),
              "%s", r.diags);
    free(r.diags);
}

/* Many conflicting reads: a few diagnostics, still a failure. */
Test(adcheck, capped) {
    checked r = run_check("kernel k(a: f32[], b: f32[], c: f32[], d: f32[], e: f32[], f: f32[]) {\n"
                          "    for i in 0..len(a) {\n"
                          "        a[i] *= 2.0;\n"
                          "        b[i] *= 2.0;\n"
                          "        c[i] *= 2.0;\n"
                          "        d[i] *= 2.0;\n"
                          "        e[i] *= 2.0;\n"
                          "        f[i] *= 2.0;\n"
                          "    }\n"
                          "}\n",
                          false);
    cr_expect_not(r.ok);
    cr_expect_geq(r.errors, 1);
    cr_expect_leq(r.errors, 5, "%s", r.diags);
    char more[80];
    snprintf(more, sizeof more, "1:1: note: %d more reads in kernel 'k' may be written afterwards",
             6 - r.errors);
    cr_expect(strstr(r.diags, more), "expected '%s' in:\n%s", more, r.diags);
    free(r.diags);
}

/* One diagnostic per read even when several writes conflict with it. */
Test(adcheck, one_per_read) {
    checked r = run_check("kernel k(x: f32[], j: i32[]) {\n"
                          "    for i in 0..len(x) {\n"
                          "        let s = x[0];\n"
                          "        x[i] = s;\n"
                          "        x[j[i]] = s;\n"
                          "    }\n"
                          "}\n",
                          false);
    cr_expect_not(r.ok);
    cr_expect_eq(r.errors, 1, "%s", r.diags);
    free(r.diags);
}

Test(adcheck, driver_grad_all_rejects) {
    const char *text = "kernel k(a: f32[]) {\n"
                       "    for i in 0..len(a) {\n"
                       "        a[i] *= 2.0;\n"
                       "    }\n"
                       "}\n";
    kc_ctx *ctx = kc_ctx_new();
    ctx->opts.grad = KC_GRAD_ALL;
    ir_module *m = kc_compile_source(ctx, "t.kern", text, strlen(text));
    cr_expect_null(m);
    cr_expect_eq(ctx->diags.errors, 1);
    cr_assert_geq(ctx->diags.len, 1);
    cr_expect_eq(ctx->diags.items[0].loc.line, 3);
    cr_expect_eq(ctx->diags.items[0].loc.col, 14);
    cr_expect(strstr(ctx->diags.items[0].message, "k.grad would read changed values"));
    if (m)
        ir_module_free(m);
    kc_ctx_free(ctx);
}

/* KC_GRAD_POSSIBLE: the kernel compiles, with the reason in grad_error and no K.grad. */
Test(adcheck, driver_grad_possible) {
    const char *text = "kernel k(a: f32[]) {\n"
                       "    for i in 0..len(a) {\n"
                       "        a[i] *= 2.0;\n"
                       "    }\n"
                       "}\n";
    kc_ctx *ctx = kc_ctx_new();
    ctx->opts.grad = KC_GRAD_POSSIBLE;
    ir_module *m = kc_compile_source(ctx, "t.kern", text, strlen(text));
    cr_assert_not_null(m);
    cr_expect_eq(ctx->diags.errors, 0);
    ir_kernel *k = ir_kernel_find(m, "k");
    cr_assert_not_null(k);
    cr_assert_not_null(k->grad_error);
    cr_expect(strstr(k->grad_error, "'a' is read here"), "%s", k->grad_error);
    cr_expect_null(ir_kernel_find(m, "k.grad"));
    ir_module_free(m);
    kc_ctx_free(ctx);
}

/* --no-grad-check through the driver: a warning, and K.grad is built. */
Test(adcheck, driver_no_grad_check) {
    const char *text = "kernel k(a: f32[]) {\n"
                       "    for i in 0..len(a) {\n"
                       "        a[i] *= 2.0;\n"
                       "    }\n"
                       "}\n";
    kc_ctx *ctx = kc_ctx_new();
    ctx->opts.grad = KC_GRAD_ALL;
    ctx->opts.no_grad_check = true;
    ir_module *m = kc_compile_source(ctx, "t.kern", text, strlen(text));
    cr_assert_not_null(m);
    cr_expect_eq(ctx->diags.errors, 0);
    cr_expect_eq(ctx->diags.warnings, 1);
    cr_expect_not_null(ir_kernel_find(m, "k.grad"));
    ir_module_free(m);
    kc_ctx_free(ctx);
}

/* An accepted kernel through the driver: no diagnostics, K.grad is built. */
Test(adcheck, driver_grad_all_accepts) {
    const char *text = "kernel k(x: f32[,], t: i32) {\n"
                       "    for i in 0..shape(x, 1) {\n"
                       "        x[t, i] = sin(x[t - 1, i]);\n"
                       "    }\n"
                       "}\n";
    kc_ctx *ctx = kc_ctx_new();
    ctx->opts.grad = KC_GRAD_ALL;
    ir_module *m = kc_compile_source(ctx, "t.kern", text, strlen(text));
    cr_assert_not_null(m);
    cr_expect_eq(ctx->diags.len, 0);
    cr_expect_not_null(ir_kernel_find(m, "k.grad"));
    ir_module_free(m);
    kc_ctx_free(ctx);
}

/* Through the driver, `y[i] += a * x[i]` passes the check: it runs before
 * ir_opt_private_atomics turns the atomic into a load and a store. */
Test(adcheck, driver_plus_assign_in_place) {
    const char *text = "kernel saxpy(a: f32, x: f32[], y: f32[]) {\n"
                       "    for i in 0..len(x) {\n"
                       "        y[i] += a * x[i];\n"
                       "    }\n"
                       "}\n";
    kc_ctx *ctx = kc_ctx_new();
    ctx->opts.grad = KC_GRAD_ALL;
    ir_module *m = kc_compile_source(ctx, "t.kern", text, strlen(text));
    cr_assert_not_null(m);
    cr_expect_eq(ctx->diags.len, 0);
    cr_expect_not_null(ir_kernel_find(m, "saxpy.grad"));
    ir_module_free(m);
    kc_ctx_free(ctx);
}
