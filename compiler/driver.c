/* driver.c - the compiler library's pipeline: source -> AST -> checked AST -> IR.
 *
 * Each step reports user errors to the context's sink and stops the pipeline at the
 * first step that reported one, so later steps only ever see well-formed input. */
#include "driver.h"

#include "../passes/passes.h"
#include "lower.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

char *kc_read_source(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        errno = EISDIR;
        return NULL;
    }
    size_t cap = 65536, n = 0;
    char *text = kern_xmalloc(cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap > KC_MAX_SOURCE_BYTES) /* one byte past the limit: enough to report */
                break;
            cap *= 2;
            text = kern_xrealloc(text, cap + 1);
        }
        size_t want = cap - n, got = fread(text + n, 1, want, f);
        n += got;
        if (got < want)
            break;
    }
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (err) {
        free(text);
        errno = err;
        return NULL;
    }
    if (n > (size_t)KC_MAX_SOURCE_BYTES + 1)
        n = (size_t)KC_MAX_SOURCE_BYTES + 1;
    text[n] = 0;
    *len = n;
    return text;
}

/* The source, registered; NULL after an error when it is longer than the limit. */
static const kern_source *add_source(kc_ctx *ctx, const char *path, const char *text, size_t len) {
    if (len > KC_MAX_SOURCE_BYTES) {
        const kern_source *src = kc_add_source(ctx, path, "", 0);
        kc_error(ctx, src, (kern_loc){0, 0},
                 "the source is longer than the limit of %d bytes (8 MiB); split it into "
                 "files",
                 KC_MAX_SOURCE_BYTES);
        return NULL;
    }
    return kc_add_source(ctx, path, text, len);
}

fe_file *kc_parse_source(kc_ctx *ctx, const char *path, const char *text, size_t len) {
    const kern_source *src = add_source(ctx, path, text, len);
    if (!src)
        return NULL;
    int before = diag_errors(&ctx->diags);
    fe_file *f = fe_parse(ctx, src);
    return diag_errors(&ctx->diags) > before ? NULL : f;
}

fe_file *kc_check_source(kc_ctx *ctx, const char *path, const char *text, size_t len) {
    const kern_source *src = add_source(ctx, path, text, len);
    if (!src)
        return NULL;
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

/* Whether grad_only is `name` followed by `suffix` ("" for K itself). */
static bool only_is(const kc_options *o, const char *name, const char *suffix) {
    size_t n = strlen(name);
    return o->grad_only && !strncmp(o->grad_only, name, n) && !strcmp(o->grad_only + n, suffix);
}

/* What grad_only asks of primal kernel `name`: K.grad (also for "K", and as the base of
 * "K.grad.jvp"), K.jvp and K.grad.jvp (kc_options.jvp, or asked for by name). */
static bool grad_wanted(const kc_options *o, const char *name) {
    return !o->grad_only || only_is(o, name, "") || only_is(o, name, ".grad") ||
           only_is(o, name, ".grad.jvp") || only_is(o, name, ".grad.ckpt");
}
static bool jvp_wanted(const kc_options *o, const char *name) {
    return (o->jvp && (!o->grad_only || only_is(o, name, ""))) || only_is(o, name, ".jvp");
}
static bool hvp_wanted(const kc_options *o, const char *name) {
    return (o->jvp && (!o->grad_only || only_is(o, name, ""))) || only_is(o, name, ".grad.jvp");
}

/* Appends K.jvp of kernel k (a primal kernel or a gradient). A kernel that forward mode
 * cannot differentiate is an error when forward mode alone was asked for (KC_GRAD_NONE
 * with jvp) or the kernel was asked for by name; otherwise it gets no K.jvp (the lookup
 * of K.jvp then fails). */
static bool build_jvp(kc_ctx *ctx, const kern_source *src, ir_kernel *k) {
    const kc_options *o = &ctx->opts;
    bool loud = o->grad == KC_GRAD_NONE || only_is(o, k->name, ".jvp");
    if (loud)
        return ad_jvp_kernel(k, &ctx->diags, src) != NULL;
    diag_sink quiet;
    diag_init(&quiet, &k->module->mem);
    if (!ad_jvp_kernel(k, &quiet, src) && quiet.len > 0) {
        const diag *d = &quiet.items[0];
        k->jvp_error =
            arena_printf(&k->module->mem, "%s:%u:%u: %s", d->src ? d->src->path : "<source>",
                         d->loc.line, d->loc.col, d->message);
    }
    diag_free(&quiet);
    return true;
}

/* K.grad for a kernel with a `grad G` clause: G's IR, cloned under K.grad's name and
 * parameter names (sema checked that G's signature is K.grad's). */
static bool custom_grad(kc_ctx *ctx, const kern_source *src, ir_module *m, ir_kernel *k,
                        ir_kernel **out) {
    ir_kernel *g = ir_kernel_find(m, k->grad_kernel);
    uint32_t np;
    ir_param *ps = ad_grad_params(k, &np);
    bool same = g && g->nparams == np;
    for (uint32_t i = 0; same && i < np; i++)
        same = g->params[i].type == ps[i].type;
    if (!same) { /* a type sema compares differently (a vector or struct scalar) */
        const char *msg = arena_printf(&m->mem,
                                       "kernel '%s' does not have the parameters of '%s.grad' "
                                       "in memory; it cannot be the gradient of '%s'",
                                       k->grad_kernel, k->name, k->name);
        if (ctx->opts.grad == KC_GRAD_ALL)
            kc_error(ctx, src, k->loc, "%s", msg);
        else
            k->grad_error = msg;
        return ctx->opts.grad != KC_GRAD_ALL;
    }
    *out = ir_kernel_clone(g, arena_printf(&m->mem, "%s.grad", k->name), ps, np);
    return true;
}

/* Appends K.grad for the primal kernels of m (the mode and grad_only of ctx's options),
 * then optimizes again; then the forward-mode kernels K.jvp and K.grad.jvp that the
 * options ask for (passes/ad_jvp.c), optimized once more. KC_GRAD_ALL: a failed
 * global-access check is an error (a warning with --no-grad-check). KC_GRAD_POSSIBLE: such
 * a kernel keeps the first message in grad_error and gets no gradient. */
static bool build_grads(kc_ctx *ctx, const kern_source *src, ir_module *m) {
    const kc_options *o = &ctx->opts;
    uint32_t nprimal = m->nkernels;
    ir_kernel **grads = calloc(nprimal + 1, sizeof *grads);
    if (!grads)
        kern_oom((nprimal + 1) * sizeof *grads);
    ir_kernel *k = m->kernels;
    bool ok = true, added = false;
    for (uint32_t i = 0; i < nprimal; i++, k = k->next) {
        if (o->grad == KC_GRAD_NONE || !grad_wanted(o, k->name))
            continue;
        if (k->grad_kernel) { /* `grad G`: the user owns K.grad, unchecked */
            if (o->grad != KC_GRAD_CHECK && !custom_grad(ctx, src, m, k, &grads[i]))
                ok = false;
            continue;
        }
        if (o->grad == KC_GRAD_ALL) {
            if (!ad_check_kernel(k, &ctx->diags, src, o->no_grad_check)) {
                ok = false;
                continue;
            }
        } else {
            diag_sink quiet;
            diag_init(&quiet, &m->mem);
            bool pass = ad_check_kernel(k, &quiet, src, o->no_grad_check);
            if (!pass && quiet.len > 0) {
                const diag *d = &quiet.items[0];
                k->grad_error =
                    arena_printf(&m->mem, "%s:%u:%u: %s", d->src ? d->src->path : "<source>",
                                 d->loc.line, d->loc.col, d->message);
            }
            diag_free(&quiet);
            if (!pass || o->grad == KC_GRAD_CHECK)
                continue;
        }
        grads[i] = ad_grad_kernel(k, o->ad_stack_size);
        added = true;
        if (!o->scatter_adjoints)
            ad_gather_kernel(m, grads[i]);
        /* the checkpointed variant the runtime launches instead when K.grad's adstacks
         * do not fit its memory budget (docs/autodiff.md) */
        bool want_ck = !o->no_ckpt && (!o->grad_only || only_is(o, k->name, ".grad") ||
                                       only_is(o, k->name, ".grad.ckpt"));
        ir_kernel *ck = want_ck ? ad_grad_ckpt_kernel(k, o->ad_stack_size) : NULL;
        if (ck && !o->scatter_adjoints)
            ad_gather_kernel(m, ck);
    }
    if (ok && added) {
        ir_pass_after(m, "ad_grad", true);
        ir_optimize(m, o->opt_level);
    }
    if (ok && o->grad != KC_GRAD_CHECK) {
        added = false;
        k = m->kernels;
        for (uint32_t i = 0; i < nprimal; i++, k = k->next) {
            if (jvp_wanted(o, k->name)) {
                ok &= build_jvp(ctx, src, k);
                added = true;
            }
            if (grads[i] && hvp_wanted(o, k->name)) {
                ok &= build_jvp(ctx, src, grads[i]);
                added = true;
            }
        }
        if (ok && added) {
            ir_pass_after(m, "ad_jvp", true);
            ir_optimize(m, o->opt_level);
        }
    }
    free(grads);
    return ok;
}

ir_module *kc_compile_source(kc_ctx *ctx, const char *path, const char *text, size_t len) {
    fe_file *f = kc_check_source(ctx, path, text, len);
    if (!f)
        return NULL;
    ir_module *m = fe_lower(ctx, f);
    if (!m)
        return NULL;
    m->debug = ctx->opts.pass_debug;
    ir_pass_after(m, "lower", true);
    ir_optimize(m, ctx->opts.opt_level);
    if (ctx->opts.promote_f64 && ad_promote_f64(m))
        ir_pass_after(m, "ad_promote_f64", true);
    if ((ctx->opts.grad != KC_GRAD_NONE || ctx->opts.jvp) && !build_grads(ctx, f->src, m)) {
        ir_module_free(m);
        return NULL;
    }
    { /* the gradients are built: calls of funcs with custom adjoints become their bodies */
        bool progress = false;
        IR_PASS(progress, m, ir_inline_custom);
        (void)progress;
    }
    if (ctx->opts.opt_level > 0) {
        bool progress = false;
        IR_PASS(progress, m, ir_opt_private_atomics);
        (void)progress;
    }
    if (!ctx->opts.keep_rules) {
        ir_lower_semantics(m, kc_checks(&ctx->opts));
        ir_pass_after(m, "ir_lower_semantics", true);
        /* kern's own math on every target, in the variant that SPIR-V gets, or with
         * own_math_fused AMDGPU's (the SPIR-V and AMDGPU code generators lower what they
         * need of it themselves) */
        unsigned which = ctx->opts.own_math_fused
                             ? IR_LIBM_F32 | IR_LIBM_F64 | IR_LIBM_KEEP_F32_EXPLOG
                             : IR_LIBM_F32 | IR_LIBM_F64 | IR_LIBM_NO_FMA;
        if (ctx->opts.own_math && ir_lower_libm(m, which))
            ir_pass_after(m, "ir_lower_libm", true);
        if (ctx->opts.opt_level > 0) { /* constant divisors and counts, shared compares */
            bool progress = false;
            IR_PASS(progress, m, ir_opt_fold);
            IR_PASS(progress, m, ir_opt_cse);
            IR_PASS(progress, m, ir_opt_dce);
            (void)progress;
        }
    }
    return m;
}
