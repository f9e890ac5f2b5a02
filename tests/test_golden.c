/* test_golden.c - the golden-file runner for the frontend and the lowering.
 *
 *   tests/golden/syntax/NAME.kern + NAME.err   diagnostics of `kernc check` (syntax errors)
 *   tests/golden/errors/NAME.kern + NAME.err   diagnostics of `kernc check` (semantic errors)
 *   tests/golden/ast/NAME.kern    + NAME.ast   `kernc emit --emit=ast` of a parse-only tree
 *   tests/golden/ir/NAME.kern     + NAME.ir    `kernc emit --emit=ir -O0`: the lowering; the
 *                                              IR must also verify and round-trip
 *   tests/golden/ir-grad/NAME.kern + NAME.ir   `kernc emit --emit=ir-grad` (default -O2): the
 *                                              gradient kernels K.grad; they must verify and
 *                                              round-trip (tests/golden/ir-grad/README.md)
 * The source path in diagnostics is printed as NAME.kern. UPDATE=1 rewrites expectations
 * (review the diff before committing). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compiler/ast.h"
#include "../compiler/driver.h"
#include "../ir/ir.h"
#include "golden.h"

/* Runs `kernc check` on DIR/NAME and returns what it prints on stderr. */
static char *check_output(const char *dir, const char *name, bool *failed) {
    size_t len;
    char *src = golden_read(dir, name, &len);
    cr_assert(src, "cannot read %s/%s", dir, name);
    kc_ctx *ctx = kc_ctx_new();
    fe_file *f = kc_check_source(ctx, name, src, len);
    *failed = f == NULL;
    char *out = NULL;
    size_t outlen = 0;
    FILE *mem = open_memstream(&out, &outlen);
    diag_print_all(mem, &ctx->diags);
    fclose(mem);
    kc_ctx_free(ctx);
    free(src);
    return out;
}

static int run_diag_dir(const char *dir) {
    char **names;
    int n = golden_list(dir, ".kern", &names), bad = 0;
    for (int i = 0; i < n; i++) {
        bool failed;
        char *out = check_output(dir, names[i], &failed);
        char *exp = golden_sibling(names[i], ".err");
        if (!golden_check(dir, exp, out))
            bad++;
        else if (!failed) {
            fprintf(stderr, "golden %s/%s: expected the check to fail\n", dir, names[i]);
            bad++;
        }
        free(exp);
        free(out);
    }
    golden_free_list(names, n);
    cr_assert(n > 0, "no golden files in tests/golden/%s", dir);
    return bad;
}

Test(golden, syntax_errors) {
    int bad = run_diag_dir("syntax");
    cr_assert_eq(bad, 0, "%d syntax golden file(s) differ (details above)", bad);
}

Test(golden, semantic_errors) {
    int bad = run_diag_dir("errors");
    cr_assert_eq(bad, 0, "%d semantic-error golden file(s) differ (details above)", bad);
}

Test(golden, ast) {
    char **names;
    int n = golden_list("ast", ".kern", &names), bad = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        char *src = golden_read("ast", names[i], &len);
        kc_ctx *ctx = kc_ctx_new();
        fe_file *f = kc_parse_source(ctx, names[i], src, len);
        if (!f) {
            fprintf(stderr, "golden ast/%s: does not parse\n", names[i]);
            diag_print_all(stderr, &ctx->diags);
            bad++;
        } else {
            kern_buf out = {0};
            fe_print_ast(&out, f, NULL);
            char *exp = golden_sibling(names[i], ".ast");
            if (!golden_check("ast", exp, out.data ? out.data : ""))
                bad++;
            free(exp);
            buf_free(&out);
        }
        kc_ctx_free(ctx);
        free(src);
    }
    golden_free_list(names, n);
    cr_assert(n > 0, "no golden files in tests/golden/ast");
    cr_assert_eq(bad, 0, "%d AST golden file(s) differ (details above)", bad);
}

Test(golden, lowering) {
    char **names;
    int n = golden_list("ir", ".kern", &names), bad = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        char *src = golden_read("ir", names[i], &len);
        kc_ctx *ctx = kc_ctx_new();
        ctx->opts.opt_level = 0;
        ctx->opts.keep_rules = true; /* as kernc emit --emit=ir -O0 */
        ir_module *m = kc_compile_source(ctx, names[i], src, len);
        if (!m) {
            fprintf(stderr, "golden ir/%s: does not compile\n", names[i]);
            diag_print_all(stderr, &ctx->diags);
            bad++;
            goto next;
        }
        diag_sink sink;
        diag_init(&sink, &ctx->mem);
        if (!ir_verify(m, &sink)) {
            fprintf(stderr, "golden ir/%s: lowered IR does not verify\n", names[i]);
            diag_print_all(stderr, &sink);
            bad++;
        }
        kern_buf out = {0};
        ir_print(&out, m, NULL);
        const char *text = out.data ? out.data : "";
        char *exp = golden_sibling(names[i], ".ir");
        if (!golden_check("ir", exp, text))
            bad++;
        /* print -> parse -> print is the identity */
        kern_source isrc = {exp, text, out.len};
        ir_module *m2 = ir_parse(text, out.len, &isrc, &sink);
        if (!m2) {
            fprintf(stderr, "golden ir/%s: printed IR does not parse back\n", names[i]);
            diag_print_all(stderr, &sink);
            bad++;
        } else {
            kern_buf again = {0};
            ir_print(&again, m2, NULL);
            if (strcmp(again.data ? again.data : "", text) != 0) {
                fprintf(stderr, "golden ir/%s: print -> parse -> print differs\n", names[i]);
                bad++;
            }
            buf_free(&again);
            ir_module_free(m2);
        }
        free(exp);
        buf_free(&out);
        diag_free(&sink);
        ir_module_free(m);
    next:
        kc_ctx_free(ctx);
        free(src);
    }
    golden_free_list(names, n);
    cr_assert(n > 0, "no golden files in tests/golden/ir");
    cr_assert_eq(bad, 0, "%d lowering golden file(s) differ (details above)", bad);
}

/* The gradient transform: every K.grad of DIR/NAME.kern, as `kernc emit NAME.kern
 * --emit=ir-grad` prints it (default options: -O2, --ad-stack-size 1024; the kernels
 * separated by an empty line), against NAME.ir. The whole module must verify, and the
 * printed text must parse back and print to the same bytes. */
static int check_grad_golden(const char *dir, const char *name) {
    int bad = 0;
    size_t len;
    char *src = golden_read(dir, name, &len);
    cr_assert(src, "cannot read %s/%s", dir, name);
    kc_ctx *ctx = kc_ctx_new();
    ctx->opts.grad = KC_GRAD_ALL;
    ir_module *m = kc_compile_source(ctx, name, src, len);
    if (!m) {
        fprintf(stderr, "golden %s/%s: K.grad does not compile\n", dir, name);
        diag_print_all(stderr, &ctx->diags);
        kc_ctx_free(ctx);
        free(src);
        return 1;
    }
    if (ctx->diags.len > 0) { /* warnings: the cases are meant to be clean */
        fprintf(stderr, "golden %s/%s: unexpected diagnostics\n", dir, name);
        diag_print_all(stderr, &ctx->diags);
        bad++;
    }
    diag_sink sink;
    diag_init(&sink, &ctx->mem);
    if (!ir_verify(m, &sink)) {
        fprintf(stderr, "golden %s/%s: gradient IR does not verify\n", dir, name);
        diag_print_all(stderr, &sink);
        bad++;
    }
    kern_buf out = {0};
    int ngrad = 0;
    ir_foreach_kernel(k, m) {
        size_t n = strlen(k->name);
        if (n <= 5 || strcmp(k->name + n - 5, ".grad") != 0)
            continue;
        if (ngrad++)
            buf_putc(&out, '\n');
        ir_print(&out, m, k->name);
    }
    const char *text = out.data ? out.data : "";
    if (ngrad == 0) {
        fprintf(stderr, "golden %s/%s: no gradient kernel\n", dir, name);
        bad++;
    }
    char *exp = golden_sibling(name, ".ir");
    if (!golden_check(dir, exp, text))
        bad++;
    kern_source isrc = {exp, text, out.len};
    ir_module *m2 = ir_parse(text, out.len, &isrc, &sink);
    if (!m2) {
        fprintf(stderr, "golden %s/%s: printed gradient IR does not parse back\n", dir, name);
        diag_print_all(stderr, &sink);
        bad++;
    } else {
        kern_buf again = {0};
        ir_print(&again, m2, NULL);
        if (strcmp(again.data ? again.data : "", text) != 0) {
            fprintf(stderr, "golden %s/%s: print -> parse -> print differs\n", dir, name);
            bad++;
        }
        buf_free(&again);
        ir_module_free(m2);
    }
    free(exp);
    buf_free(&out);
    diag_free(&sink);
    ir_module_free(m);
    kc_ctx_free(ctx);
    free(src);
    return bad;
}

Test(golden, gradient) {
    char **names;
    int n = golden_list("ir-grad", ".kern", &names), bad = 0;
    for (int i = 0; i < n; i++)
        bad += check_grad_golden("ir-grad", names[i]);
    golden_free_list(names, n);
    cr_assert(n > 0, "no golden files in tests/golden/ir-grad");
    cr_assert_eq(bad, 0, "%d gradient golden file(s) differ or fail (details above)", bad);
}
