/* driver.c - the compiler library's pipeline: source -> AST -> checked AST -> IR.
 *
 * Each step reports user errors to the context's sink and stops the pipeline at the
 * first step that reported one, so later steps only ever see well-formed input. */
#include "driver.h"

#include "../passes/passes.h"
#include "lower.h"

fe_file *kc_parse_source(kc_ctx *ctx, const char *path, const char *text, size_t len) {
    const kern_source *src = kc_add_source(ctx, path, text, len);
    int before = diag_errors(&ctx->diags);
    fe_file *f = fe_parse(ctx, src);
    return diag_errors(&ctx->diags) > before ? NULL : f;
}

fe_file *kc_check_source(kc_ctx *ctx, const char *path, const char *text, size_t len) {
    const kern_source *src = kc_add_source(ctx, path, text, len);
    int before = diag_errors(&ctx->diags);
    fe_file *f = fe_parse(ctx, src);
    /* Sema runs only on a tree without syntax errors: a recovered parse leaves holes
     * that would only produce follow-on errors. */
    if (diag_errors(&ctx->diags) > before)
        return NULL;
    if (!fe_check(ctx, f) || diag_errors(&ctx->diags) > before)
        return NULL;
    return f;
}

ir_module *kc_compile_source(kc_ctx *ctx, const char *path, const char *text, size_t len) {
    fe_file *f = kc_check_source(ctx, path, text, len);
    if (!f)
        return NULL;
    ir_module *m = fe_lower(ctx, f);
    if (!m)
        return NULL;
    ir_pass_after(m, "lower", true);
    ir_optimize(m, ctx->opts.opt_level);
    return m;
}
