/* context.c - compiler context (see context.h). */
#include "context.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

void kc_options_default(kc_options *o) {
    memset(o, 0, sizeof *o);
    o->opt_level = 2;
    o->ad_stack_size = 1024;
}

kc_ctx *kc_ctx_new(void) {
    kc_ctx *c = kern_xmalloc(sizeof *c);
    memset(c, 0, sizeof *c);
    arena_init(&c->mem);
    diag_init(&c->diags, &c->mem);
    kc_options_default(&c->opts);
    return c;
}

void kc_ctx_free(kc_ctx *c) {
    if (!c)
        return;
    diag_free(&c->diags);
    arena_free(&c->mem);
    free(c);
}

const kern_source *kc_add_source(kc_ctx *c, const char *path, const char *text, size_t len) {
    kern_source *s = ARENA_NEW(&c->mem, kern_source);
    s->path = arena_strdup(&c->mem, path);
    s->text = arena_strndup(&c->mem, text, len);
    s->len = len;
    return s;
}

void kc_error(kc_ctx *c, const kern_source *src, kern_loc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_vreport(&c->diags, DIAG_ERROR, src, loc, fmt, ap);
    va_end(ap);
}

void kc_warning(kc_ctx *c, const kern_source *src, kern_loc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_vreport(&c->diags, DIAG_WARNING, src, loc, fmt, ap);
    va_end(ap);
}
