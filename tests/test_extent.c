/* test_extent.c - task extents in the module metadata (suite `extent`): the `extent`
 * lines of runtime/meta.h (parse, print round trip, older metadata without them,
 * malformed lines, leaf checks, metadata built in memory) and rt_task_count
 * (runtime/adstack.h), the host-side work-item count a GPU launch sizes its grid with.
 *
 * Expected counts are products worked out by hand from the arguments below. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/adstack.h"
#include "../runtime/meta.h"

static const char ext_meta[] = "kern-meta 1\n"
                               "kernel blur 1 1 4 3\n"
                               "param img f32[,] 0\n"
                               "param n i32 0\n"
                               "param cnt i32[] 0\n"
                               "param s f32 0\n"
                               "task parallel 2 2 5\n"
                               "extent 0 (sub (dim 0 0) 2)\n"
                               "extent 1 (dim 0 1)\n"
                               "task serial 0 3 5\n"
                               "task parallel 2 4 5\n"
                               "extent 0 ?\n"
                               "extent 1 (param 1)\n"
                               "kernel scan 5 1 2 2\n"
                               "param n i32 0\n"
                               "param cnt i32[] 0\n"
                               "task parallel 1 6 5\n"
                               "extent 0 (read 1 0)\n"
                               "task parallel 3 7 5\n"
                               "extent 0 (param 0)\n"
                               "extent 1 (mul (param 0) 3)\n"
                               "extent 2 7\n"
                               "end\n";

static kern_meta *parse_ok(const char *text) {
    char err[512];
    kern_meta *m = kern_meta_parse(text, strlen(text), err, sizeof err);
    cr_assert(m, "%s", err);
    return m;
}

static void parse_fails(const char *text, const char *want) {
    char err[512];
    kern_meta *m = kern_meta_parse(text, strlen(text), err, sizeof err);
    cr_assert_null(m, "parsed: %s", text);
    cr_assert_str_eq(err, want);
}

Test(extent, parse_and_print_round_trip) {
    kern_meta *m = parse_ok(ext_meta);
    const kern_meta_kernel *b = kern_meta_find(m, "blur");
    cr_assert_str_eq(b->tasks[0].extent[0], "(sub (dim 0 0) 2)");
    cr_assert_eq(b->tasks[0].extent_expr[0]->op, SZ_SUB);
    cr_assert_str_eq(b->tasks[0].extent[1], "(dim 0 1)");
    cr_assert_eq(b->tasks[0].extent_expr[1]->op, SZ_DIM);
    cr_assert_null(b->tasks[0].extent[2]);
    cr_assert_null(b->tasks[1].extent[0]);
    cr_assert_null(b->tasks[2].extent[0], "'?' is unknown");
    cr_assert_null(b->tasks[2].extent_expr[0]);
    cr_assert_str_eq(b->tasks[2].extent[1], "(param 1)");
    const kern_meta_kernel *s = kern_meta_find(m, "scan");
    cr_assert_eq(s->tasks[1].extent_expr[2]->op, SZ_CONST);
    cr_assert_eq(s->tasks[1].extent_expr[2]->v, 7);
    kern_buf out = {0};
    kern_meta_print(&out, m);
    cr_assert_eq(out.len, strlen(ext_meta));
    cr_assert(memcmp(out.data, ext_meta, out.len) == 0, "%.*s", (int)out.len, out.data);
    buf_free(&out);
    kern_meta_free(m);
}

Test(extent, older_metadata_has_unknown_extents) {
    static const char old[] = "kern-meta 1\nkernel k 1 1 1 2\nparam x f32[,] 0\n"
                              "task parallel 2 2 5\ntask serial 0 3 5\nend\n";
    static const char all_unknown[] = "kern-meta 1\nkernel k 1 1 1 2\nparam x f32[,] 0\n"
                                      "task parallel 2 2 5\nextent 0 ?\nextent 1 ?\n"
                                      "task serial 0 3 5\nend\n";
    kern_meta *u = parse_ok(all_unknown);
    kern_buf ub = {0};
    kern_meta_print(&ub, u);
    cr_assert_str_eq(ub.data, old, "extents that are all unknown print as none");
    buf_free(&ub);
    kern_meta_free(u);
    kern_meta *m = parse_ok(old);
    for (int d = 0; d < KERN_META_MAX_TASK_DIMS; d++)
        cr_assert_null(m->kernels[0].tasks[0].extent[d]);
    sz_arg a = {.type = m->kernels[0].params[0].type, .shape = {4, 5}};
    cr_assert_eq(rt_task_count(&m->kernels[0].tasks[0], &a, 1), -1);
    cr_assert_eq(rt_task_count(&m->kernels[0].tasks[1], &a, 1), 1, "serial: one item");
    kern_buf out = {0};
    kern_meta_print(&out, m);
    cr_assert_eq(out.len, strlen(old), "no extent lines are printed when all are unknown");
    buf_free(&out);
    kern_meta_free(m);
}

#define HEAD "kern-meta 1\nkernel k 1 1 2 1\nparam x f32[,] 0\nparam n i32 0\n"

Test(extent, malformed_lines_name_the_line) {
    parse_fails(HEAD "task parallel 2 2 5\nextent 0 (param 1)\nend\n",
                "metadata line 6: task 0 of kernel 'k' has 2 dimensions but 1 extent lines");
    parse_fails(HEAD "task parallel 1 2 5\nextent 0 (param 1)\nextent 1 (param 1)\nend\n",
                "metadata line 7: extent: task 0 of kernel 'k' has 1 dimensions, not more");
    parse_fails(HEAD "task parallel 2 2 5\nextent 1 (param 1)\nextent 0 3\nend\n",
                "metadata line 6: extent: expected dimension 0, found 1 (dimensions in order)");
    parse_fails(HEAD "task parallel 1 2 5\nextent x (param 1)\nend\n",
                "metadata line 6: D 'x' is not a number");
    parse_fails(HEAD "task parallel 1 2 5\nextent 0\nend\n",
                "metadata line 6: extent: expected 'extent D SIZEEXPR' or 'extent D ?'");
    parse_fails(HEAD "task parallel 1 2 5\nextent 0 (param 1\nend\n",
                "metadata line 6: extent 0: bad SizeExpr '(param 1': SizeExpr offset 8: "
                "expected ')', found the end of the text");
    parse_fails(HEAD "task parallel 1 2 5\nextent 0 (dim 0 2)\nend\n",
                "metadata line 6: extent 0: SizeExpr (dim 0 2) names 'x' of type f32[,]: no "
                "such dimension");
    parse_fails(HEAD "task parallel 1 2 5\nextent 0 (read 0 1 1)\nend\n",
                "metadata line 6: extent 0: SizeExpr (read 0 ...) with 2 indices names 'x' of "
                "type f32[,], not an integer array of that rank");
    parse_fails(HEAD "task serial 0 2 5\nextent 0 4\nend\n",
                "metadata line 6: extent: task 0 of kernel 'k' is serial (it has no extents)");
    parse_fails(HEAD "task parallel 1 2 5\nend\nextent 0 4\n", "metadata line 7: text after 'end'");
}

Test(extent, task_count_from_launch_arguments) {
    kern_meta *m = parse_ok(ext_meta);
    const kern_meta_kernel *b = kern_meta_find(m, "blur");
    sz_arg a[4] = {0};
    for (int i = 0; i < 4; i++) {
        a[i].type = b->params[i].type;
        for (int d = 0; d < KERN_MAX_RANK; d++)
            a[i].shape[d] = 1;
    }
    a[0].shape[0] = 10, a[0].shape[1] = 7; /* img: 10 x 7 */
    a[1].scalar = 3;
    cr_assert_eq(rt_task_count(&b->tasks[0], a, 4), (10 - 2) * 7);
    cr_assert_eq(rt_task_count(&b->tasks[1], a, 4), 1);
    cr_assert_eq(rt_task_count(&b->tasks[2], a, 4), -1, "an unknown extent");
    a[0].shape[0] = 1; /* 1 - 2 < 0: no work items */
    cr_assert_eq(rt_task_count(&b->tasks[0], a, 4), 0);
    a[0].shape[0] = 0, a[0].shape[1] = 0;
    cr_assert_eq(rt_task_count(&b->tasks[0], a, 4), 0);

    const kern_meta_kernel *s = kern_meta_find(m, "scan");
    sz_arg c[2] = {{.type = s->params[0].type, .scalar = 5},
                   {.type = s->params[1].type, .shape = {3, 1, 1, 1}}};
    /* cnt's data on the device: not readable on the host */
    cr_assert_eq(rt_task_count(&s->tasks[0], c, 2), -1);
    int32_t cnt[3] = {42, 1, 2};
    c[1].data = cnt;
    cr_assert_eq(rt_task_count(&s->tasks[0], c, 2), 42);
    cnt[0] = -9;
    cr_assert_eq(rt_task_count(&s->tasks[0], c, 2), 0);
    c[1].shape[0] = 0; /* the read is out of bounds: cannot be evaluated */
    cr_assert_eq(rt_task_count(&s->tasks[0], c, 2), -1);
    cr_assert_eq(rt_task_count(&s->tasks[1], c, 2), 5 * 15 * 7);
    c[0].scalar = -1;
    cr_assert_eq(rt_task_count(&s->tasks[1], c, 2), 0);
    c[0].scalar = INT32_MAX; /* 2^31 x 3 x 2^31 x 7 overflows int64: an error, not unknown */
    cr_assert_eq(rt_task_count(&s->tasks[1], c, 2), RT_COUNT_OVERFLOW);
    kern_meta_free(m);
}

Test(extent, in_memory_metadata_is_parsed_and_checked) {
    kern_meta *m = parse_ok(HEAD "task parallel 2 2 5\nend\n");
    kern_meta_task *t = &m->kernels[0].tasks[0];
    char err[512];
    t->extent[1] = strdup("(mul (param 1) (dim 0 0))");
    cr_assert(kern_meta_check_adstacks(m, err, sizeof err), "%s", err);
    cr_assert_null(t->extent_expr[0]);
    cr_assert_not_null(t->extent_expr[1]);
    sz_arg a[2] = {{.type = m->kernels[0].params[0].type, .shape = {6, 2, 1, 1}},
                   {.type = m->kernels[0].params[1].type, .scalar = 4}};
    cr_assert_eq(rt_task_count(t, a, 2), -1, "dimension 0 is unknown");
    t->extent[0] = strdup("(dim 0 1)");
    cr_assert(kern_meta_check_adstacks(m, err, sizeof err), "%s", err);
    cr_assert_eq(rt_task_count(t, a, 2), 2 * 24);
    t->extent[2] = strdup("3");
    cr_assert(!kern_meta_check_adstacks(m, err, sizeof err));
    cr_assert_str_eq(err, "kernel 'k', task 0: an extent for dimension 2 of 2");
    free(t->extent[2]);
    t->extent[2] = NULL;
    free(t->extent[0]);
    t->extent[0] = strdup("(param 0)");
    t->extent_expr[0] = NULL;
    cr_assert(!kern_meta_check_adstacks(m, err, sizeof err));
    cr_assert_str_eq(err, "kernel 'k', task 0 (at 2:5), extent 0: SizeExpr (param 0) names 'x' "
                          "of type f32[,], not a scalar integer");
    free(t->extent[0]);
    t->extent[0] = strdup("(add 1");
    t->extent_expr[0] = NULL;
    cr_assert(!kern_meta_check_adstacks(m, err, sizeof err));
    cr_assert(strncmp(err, "kernel 'k', task 0, extent 0: bad SizeExpr '(add 1': ", 53) == 0, "%s",
              err);
    t->ndims = 9;
    cr_assert(!kern_meta_check_adstacks(m, err, sizeof err));
    cr_assert_str_eq(err, "kernel 'k', task 0: 9 dimensions (parallel 1 to 8, serial 0)");
    t->ndims = 2;
    kern_meta_free(m);
}

/* `spread` on a task line (kern_meta_task.spread): parsed, printed back, absent in older
 * metadata; a serial task or another word there is an error naming the line. */
Test(extent, spread_tasks_round_trip_and_bad_ones_are_named) {
    static const char text[] = "kern-meta 1\nkernel k 1 1 2 2\nparam x f32[,] 0\n"
                               "param n i32 0\ntask parallel 1 2 5 spread\nextent 0 (param 1)\n"
                               "task parallel 1 3 5\nend\n";
    kern_meta *m = parse_ok(text);
    cr_assert(m->kernels[0].tasks[0].spread);
    cr_assert(!m->kernels[0].tasks[1].spread, "no word: not spread (older metadata)");
    kern_buf out = {0};
    kern_meta_print(&out, m);
    cr_assert_str_eq(out.data, text);
    buf_free(&out);
    kern_meta_free(m);
    parse_fails(HEAD "task serial 0 2 5 spread\nend\n",
                "metadata line 5: a serial task is not spread over threads");
    parse_fails(HEAD "task parallel 1 2 5 wide\nend\n",
                "metadata line 5: task: expected 'task parallel|serial NDIMS LINE COL [spread]'");
}
