/* jit.c - the JIT entry points of include/kern.h: kern source -> IR -> LLVM ORC -> a
 * runtime module. This library (libkern-jit) joins the compiler library (with LLVM) to
 * the runtime (libkern, which never links LLVM): the runtime only sees a code provider
 * (runtime/provider.h) whose lookups go to the JIT's session. Modules compiled from source
 * carry K.grad for every kernel that passes the global-access check (KC_GRAD_POSSIBLE);
 * jit_module_from_ir (jit.h) serves tools that compile with their own options.
 * Every compile of a source (a module, or one lazily built gradient) goes through the
 * compile cache (cache.h) first: compile_cached loads the entry of its key when the cache
 * has a sound one, else compiles and writes the entry (module_from_ir keeps the metadata
 * text and the code it hands the runtime). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../backends/codegen.h"
#include "../backends/llvm/llvm_backend.h"
#include "../backends/meta_ir.h"
#include "../common/context.h"
#include "../common/env.h"
#include "../common/util.h"
#include "../compiler/driver.h"
#include "../include/kern.h"
#include "../runtime/provider.h"
#include "cache.h"
#include "jit.h"

static void *jit_lookup(void *user, const char *symbol) {
    return llvm_jit_lookup((llvm_jit *)user, symbol);
}

static void jit_release(void *user) { llvm_jit_free((llvm_jit *)user); }

/* The diagnostics of a failed compilation, as kernc prints them. */
static char *diagnostics_text(const kc_ctx *cc) {
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return NULL;
    diag_print_all(mem, &cc->diags);
    fclose(mem);
    /* drop the trailing newline: the context message is one string */
    while (len > 0 && text[len - 1] == '\n')
        text[--len] = 0;
    return text;
}

static kern_status no_codegen(kern_context *ctx, kern_backend b) {
    char names[128];
    return rt_error(ctx, KERN_ERR_UNSUPPORTED,
                    "the JIT has no code generator for the %s backend (it has: %s)",
                    kern_backend_name(b) ? kern_backend_name(b) : "?",
                    kc_codegen_targets(names, sizeof names));
}

/* What a compiled module's cache entry holds (cache.h): its metadata text and its code. */
typedef struct jit_entry {
    kern_buf meta, code;
} jit_entry;

/* jit_module_from_ir, and the module's metadata text and code into *keep (NULL: none). */
static kern_status module_from_ir(kern_context *ctx, const ir_module *m, const kc_options *o,
                                  const char *name, jit_entry *keep, kern_module **out) {
    if (!ctx)
        return KERN_ERR_ARGUMENT;
    if (!m || !o || !out)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "jit_module_from_ir: a NULL argument");
    *out = NULL;
    kern_context_options co = kern_context_get_options(ctx);
    const kc_codegen *cg = kc_codegen_for_backend(co.backend);
    if (!cg)
        return no_codegen(ctx, co.backend);
    char err[2048] = "";
    if (cg->code) { /* a GPU: the device loads the image */
        size_t len = 0;
        char *code = cg->code(m, o, &len, err, sizeof err);
        if (!code)
            return rt_error(ctx, KERN_ERR_COMPILE, "compilation of %s for %s failed: %s",
                            name ? name : "<source>", cg->t->name, err);
        kern_code_image img = {.kind = (kern_code_kind)cg->t->code_kind, .bytes = code, .len = len};
        kern_meta *meta = kc_meta_from_ir(m);
        if (keep) {
            kern_meta_print(&keep->meta, meta);
            buf_putn(&keep->code, code, len);
        }
        kern_status s = rt_module_create(ctx, meta, img, out);
        free(code);
        return s;
    }
    llvm_jit *j = llvm_jit_compile_keep(m, o, keep ? &keep->code : NULL, err, sizeof err);
    if (!j)
        return rt_error(ctx, KERN_ERR_INTERNAL, "JIT compilation of %s failed: %s",
                        name ? name : "<source>", err);
    kern_meta *meta = kc_meta_from_ir(m);
    if (keep)
        kern_meta_print(&keep->meta, meta);
    kern_code_provider p = {j, jit_lookup, jit_release};
    return rt_module_create(ctx, meta, (kern_code_image){.kind = KERN_CODE_HOST, .host = p}, out);
}

kern_status jit_module_from_ir(kern_context *ctx, const ir_module *m, const kc_options *o,
                               const char *name, kern_module **out) {
    return module_from_ir(ctx, m, o, name, NULL, out);
}

/* The module of a cache entry (mf): its metadata parsed, its code loaded as the device's
 * image or, for the CPU, linked from its objects. KERN_ERR_FORMAT for an entry that does
 * not load (the caller removes it and compiles). */
static kern_status module_from_entry(kern_context *ctx, const kc_codegen *cg, const rt_modfile *mf,
                                     const kc_options *o, kern_module **out) {
    char err[512];
    kern_meta *meta = kern_meta_parse(mf->meta, mf->meta_len, err, sizeof err);
    if (!meta)
        return KERN_ERR_FORMAT;
    if (cg->code) {
        kern_code_image img = {
            .kind = (kern_code_kind)cg->t->code_kind, .bytes = mf->code, .len = mf->code_len};
        return rt_module_create(ctx, meta, img, out);
    }
    llvm_jit *j = llvm_jit_load(mf->code, mf->code_len, o, err, sizeof err);
    if (!j) {
        kern_meta_free(meta);
        return KERN_ERR_FORMAT;
    }
    kern_code_provider p = {j, jit_lookup, jit_release};
    return rt_module_create(ctx, meta, (kern_code_image){.kind = KERN_CODE_HOST, .host = p}, out);
}

/* Compiles source (named name) with o into a module of ctx; grad names the derived kernel
 * ("K.grad", ...) that is kept alone, NULL keeps every kernel. */
static kern_status compile_source(kern_context *ctx, const char *name, const char *source,
                                  size_t len, const kc_options *o, const char *grad,
                                  jit_entry *keep, kern_module **out) {
    kc_ctx *cc = kc_ctx_new();
    cc->opts = *o;
    kern_status st;
    ir_module *m = kc_compile_source(cc, name, source, len);
    ir_kernel *kept = NULL;
    for (ir_kernel *k = m && grad ? m->kernels : NULL; k; k = k->next)
        if (!strcmp(k->name, grad))
            kept = k;
    if (!m || (grad && !kept)) {
        char *msg = diagnostics_text(cc);
        if (grad)
            st = rt_error(ctx, KERN_ERR_COMPILE, "building %s of %s: %s", grad, name,
                          msg && *msg ? msg : "the gradient was not built");
        else
            st = rt_error(ctx, KERN_ERR_COMPILE, "%s", msg ? msg : "compilation failed");
        free(msg);
    } else {
        if (kept) { /* the kernels live in the module's arena: unlinking frees nothing */
            kept->next = NULL;
            m->kernels = m->last_kernel = kept;
            m->nkernels = 1;
        }
        st = module_from_ir(ctx, m, &cc->opts, name, keep, out);
    }
    ir_module_free(m);
    kc_ctx_free(cc);
    return st;
}

/* The cache directory and key of compiling source with o on ctx (false: no cache). */
static bool cache_key(const kern_context_options *co, const kc_codegen *cg, const char *name,
                      const char *source, size_t len, const kc_options *o, char *dir, size_t size,
                      char key[JIT_CACHE_KEY_HEX + 1]) {
    if (!cg || !jit_cache_usable(o) || !jit_cache_dir(co, dir, size))
        return false;
    jit_cache_key(cg->t->name, name, source, len, o, key);
    return true;
}

/* The module of the entry of key in dir, if there is one that loads (else it is removed);
 * KERN_ERR_NOT_FOUND otherwise, with no message. */
static kern_status load_cached(kern_context *ctx, const kc_codegen *cg, const char *dir,
                               const char *key, const kc_options *o, kern_module **out) {
    rt_modfile mf;
    char *data = jit_cache_read(dir, key, cg->t->name, &mf);
    if (!data)
        return KERN_ERR_NOT_FOUND;
    kern_status st = module_from_entry(ctx, cg, &mf, o, out);
    free(data);
    if (st == KERN_OK)
        return st;
    jit_cache_remove(dir, key);       /* it does not load: the caller compiles */
    rt_error(ctx, KERN_OK, "%s", ""); /* and the failed load leaves no message */
    return KERN_ERR_NOT_FOUND;
}

/* Writes the entry of key in dir from what module_from_ir kept; frees it. */
static void keep_entry(const kc_codegen *cg, const char *dir, const char *key, jit_entry *keep,
                       bool write) {
    if (write)
        jit_cache_write(dir, key, cg->t->name, keep->meta.data, keep->meta.len, keep->code.data,
                        keep->code.len);
    buf_free(&keep->meta);
    buf_free(&keep->code);
}

/* compile_source through the compile cache (cache.h): the module of an entry for the same
 * source, options, target and build when there is one, else compiled and kept. */
static kern_status compile_cached(kern_context *ctx, const char *name, const char *source,
                                  size_t len, const kc_options *o, const char *grad,
                                  kern_module **out) {
    kern_context_options co = kern_context_get_options(ctx);
    const kc_codegen *cg = kc_codegen_for_backend(co.backend);
    char dir[4096], key[JIT_CACHE_KEY_HEX + 1];
    if (!cache_key(&co, cg, name, source, len, o, dir, sizeof dir, key))
        return compile_source(ctx, name, source, len, o, grad, NULL, out);
    if (load_cached(ctx, cg, dir, key, o, out) == KERN_OK)
        return KERN_OK;
    jit_entry keep = {{0}, {0}};
    kern_status st = compile_source(ctx, name, source, len, o, grad, &keep, out);
    keep_entry(cg, dir, key, &keep, st == KERN_OK);
    return st;
}

bool jit_cache_has(const kern_context_options *co, const char *target, const char *name,
                   const char *source, size_t len, const kc_options *o) {
    const kc_codegen *cg = kc_codegen_find(target);
    char dir[4096], key[JIT_CACHE_KEY_HEX + 1], path[4200];
    if (!cache_key(co, cg, name, source, len, o, dir, sizeof dir, key))
        return false;
    snprintf(path, sizeof path, "%s/%s.kmod", dir, key);
    return access(path, R_OK) == 0;
}

kern_status jit_module_cached(kern_context *ctx, const char *name, const char *source, size_t len,
                              const kc_options *o, kern_module **out) {
    kern_context_options co = kern_context_get_options(ctx);
    const kc_codegen *cg = kc_codegen_for_backend(co.backend);
    char dir[4096], key[JIT_CACHE_KEY_HEX + 1];
    if (!cache_key(&co, cg, name, source, len, o, dir, sizeof dir, key))
        return KERN_ERR_NOT_FOUND;
    return load_cached(ctx, cg, dir, key, o, out);
}

kern_status jit_module_from_ir_keep(kern_context *ctx, const ir_module *m, const kc_options *o,
                                    const char *name, const char *source, size_t len,
                                    kern_module **out) {
    kern_context_options co = kern_context_get_options(ctx);
    const kc_codegen *cg = kc_codegen_for_backend(co.backend);
    char dir[4096], key[JIT_CACHE_KEY_HEX + 1];
    if (!cache_key(&co, cg, name, source, len, o, dir, sizeof dir, key))
        return module_from_ir(ctx, m, o, name, NULL, out);
    jit_entry keep = {{0}, {0}};
    kern_status st = module_from_ir(ctx, m, o, name, &keep, out);
    keep_entry(cg, dir, key, &keep, st == KERN_OK);
    return st;
}

/* What a JIT module keeps to build its gradients later (rt_module_set_lazy_grads): the
 * source and the options it was compiled with. */
typedef struct lazy_source {
    char *source, *name;
    size_t len;
    kc_options opts;
} lazy_source;

static void lazy_source_free(void *p) {
    lazy_source *l = p;
    free(l->source);
    free(l->name);
    free(l);
}

/* Compiles the source again with the one derived kernel `grad` ("K.grad", "K.jvp" or
 * "K.grad.jvp"), and JIT-compiles that kernel alone (the primal kernels are dropped from
 * the IR before code generation): the module of one lazy gradient, built (or loaded from
 * the compile cache) the first time it is looked up. */
static kern_status build_grad(kern_context *ctx, void *p, const char *grad, kern_module **out) {
    lazy_source *l = p;
    kc_options o = l->opts;
    o.grad = KC_GRAD_POSSIBLE;
    o.grad_only = grad;
    /* K.grad.ckpt is built on its own, when a launch needs it (rt_module_lazy_ckpt) */
    size_t gl = strlen(grad);
    o.no_ckpt = gl < 10 || strcmp(grad + gl - 10, ".grad.ckpt") != 0;
    return compile_cached(ctx, l->name, l->source, l->len, &o, grad, out);
}

kern_status kern_module_from_source(kern_context *ctx, const char *source, size_t len,
                                    const char *name, kern_module **out) {
    if (!ctx || !rt_context_check(ctx, "kern_module_from_source"))
        return KERN_ERR_ARGUMENT;
    if (!out)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_module_from_source: out is NULL");
    *out = NULL;
    if (!source)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_module_from_source: source is NULL");
    kern_context_options o = kern_context_get_options(ctx);
    if (!kc_codegen_for_backend(o.backend))
        return no_codegen(ctx, o.backend);
    kc_options opts;
    kc_options_default(&opts);
    opts.debug = o.debug;
    opts.fast_math = o.fast_math;
    opts.checks = !o.no_checks;
    opts.promote_f64 = o.promote_f64;
    if (o.ad_stack_size > 0)
        opts.ad_stack_size = (uint32_t)o.ad_stack_size;
    /* The primal kernels now; K.grad, for every kernel that passes the global-access check
     * (the others record why in grad_error), the first time one is looked up. */
    kc_options_from_env(&opts); /* the public API's boundary: the environment, once */
    opts.grad = opts.eager_grads ? KC_GRAD_POSSIBLE : KC_GRAD_CHECK;
    opts.jvp = opts.eager_grads;
    const char *srcname = name ? name : "<source>";
    kern_status st = compile_cached(ctx, srcname, source, len, &opts, NULL, out);
    if (st == KERN_OK && opts.grad == KC_GRAD_CHECK) {
        lazy_source *l = calloc(1, sizeof *l);
        if (l) {
            l->source = malloc(len + 1);
            l->name = strdup(srcname);
            l->len = len;
            l->opts = opts;
        }
        if (!l || !l->source || !l->name) {
            if (l)
                lazy_source_free(l);
            kern_module_release(*out);
            *out = NULL;
            st = rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory for a module");
        } else {
            memcpy(l->source, source, len);
            l->source[len] = '\0';
            st = rt_module_set_lazy_grads(*out, build_grad, lazy_source_free, l);
            if (st != KERN_OK) {
                kern_module_release(*out);
                *out = NULL;
            }
        }
    }
    return st;
}

kern_status jit_module_lazy_ckpt(kern_module *mod, const kc_options *o, const char *name,
                                 const char *source, size_t len) {
    lazy_source *l = calloc(1, sizeof *l);
    if (l) {
        l->source = malloc(len + 1);
        l->name = strdup(name ? name : "<source>");
        l->len = len;
        l->opts = *o;
        l->opts.no_ckpt = false;
        l->opts.grad_only = NULL;
    }
    if (!l || !l->source || !l->name) {
        if (l)
            lazy_source_free(l);
        return KERN_ERR_OUT_OF_MEMORY;
    }
    memcpy(l->source, source, len);
    l->source[len] = '\0';
    return rt_module_set_lazy_ckpt(mod, build_grad, lazy_source_free, l);
}

kern_status kern_module_from_file_source(kern_context *ctx, const char *path, kern_module **out) {
    if (!ctx || !rt_context_check(ctx, "kern_module_from_file_source"))
        return KERN_ERR_ARGUMENT;
    if (!path || !out)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_module_from_file_source: %s is NULL",
                        path ? "out" : "path");
    *out = NULL;
    size_t len;
    char *text = kc_read_source(path, &len);
    if (!text)
        return rt_error(ctx, KERN_ERR_NOT_FOUND, "cannot read '%s'", path);
    kern_status st = kern_module_from_source(ctx, text, len, path, out);
    free(text);
    return st;
}
