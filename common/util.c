/* util.c - fatal errors, buffers, file reading (see util.h). */
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Noreturn void kern_unreachable_at(const char *file, int line, const char *msg) {
    fprintf(stderr, "kern: internal error at %s:%d: %s\n", file, line, msg);
    abort();
}

_Noreturn void kern_oom(size_t bytes) {
    fprintf(stderr, "kern: out of host memory (asked for %zu bytes)\n", bytes);
    abort();
}

void *kern_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p)
        kern_oom(n);
    return p;
}

void *kern_xrealloc(void *p, size_t n) {
    p = realloc(p, n ? n : 1);
    if (!p)
        kern_oom(n);
    return p;
}

static void buf_reserve(kern_buf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    b->data = kern_xrealloc(b->data, cap);
    b->cap = cap;
}

void buf_putn(kern_buf *b, const char *s, size_t n) {
    buf_reserve(b, n);
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void buf_puts(kern_buf *b, const char *s) { buf_putn(b, s, strlen(s)); }

void buf_putc(kern_buf *b, char c) { buf_putn(b, &c, 1); }

void buf_vprintf(kern_buf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n > 0) {
        buf_reserve(b, (size_t)n);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
    }
    va_end(ap2);
}

void buf_printf(kern_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void buf_free(kern_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *buf_take(kern_buf *b) {
    char *s = b->data ? b->data : calloc(1, 1);
    if (!s)
        kern_oom(1);
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}

void ptrvec_push(kern_ptrvec *v, void *p) {
    if (v->len == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 8;
        v->data = kern_xrealloc(v->data, sizeof(void *) * (size_t)v->cap);
    }
    v->data[v->len++] = p;
}

void ptrvec_free(kern_ptrvec *v) {
    free(v->data);
    v->data = NULL;
    v->len = v->cap = 0;
}

char *kern_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    kern_buf b = {0};
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        buf_putn(&b, tmp, n);
    int err = ferror(f);
    fclose(f);
    if (err) {
        buf_free(&b);
        errno = EIO;
        return NULL;
    }
    if (len)
        *len = b.len;
    return buf_take(&b);
}

/* kern_<K> (K with '.' written "__") and the suffix printed from fmt, into buf. */
static void symbol_of(char *buf, size_t size, const char *kernel, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void symbol_of(char *buf, size_t size, const char *kernel, const char *fmt, ...) {
    kern_buf b = {0};
    buf_puts(&b, "kern_");
    for (const char *p = kernel; *p; p++) {
        if (*p == '.')
            buf_puts(&b, "__");
        else
            buf_putc(&b, *p);
    }
    va_list ap;
    va_start(ap, fmt);
    char tail[64];
    vsnprintf(tail, sizeof tail, fmt, ap);
    va_end(ap);
    buf_puts(&b, tail);
    if (size) {
        size_t n = b.len < size - 1 ? b.len : size - 1;
        memcpy(buf, b.data, n);
        buf[n] = '\0';
    }
    buf_free(&b);
}

void kern_lanes_symbol(char *buf, size_t size, const char *kernel) {
    symbol_of(buf, size, kernel, "__lanes");
}

void kern_code_symbol(char *buf, size_t size, const char *kernel, char kind, int index,
                      bool count) {
    symbol_of(buf, size, kernel, "__%c%d%s", kind, index, count ? "_count" : "");
}
