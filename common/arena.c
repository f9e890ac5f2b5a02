/* arena.c - chunked bump allocator (see arena.h). */
#include "arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct arena_chunk {
    arena_chunk *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
};

enum { ARENA_CHUNK = 64 * 1024 };

void arena_init(arena *a) {
    a->head = NULL;
    a->bytes = 0;
}

void arena_free(arena *a) {
    arena_chunk *c = a->head;
    while (c) {
        arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->bytes = 0;
}

void *arena_alloc(arena *a, size_t size) {
    size = (size + 15) & ~(size_t)15;
    arena_chunk *c = a->head;
    if (!c || c->size - c->used < size) {
        size_t cap = size > ARENA_CHUNK ? size : ARENA_CHUNK;
        c = malloc(sizeof(arena_chunk) + cap);
        if (!c)
            kern_oom(sizeof(arena_chunk) + cap);
        c->used = 0;
        c->size = cap;
        /* A large one-off block goes behind the head so the head keeps its free space. */
        if (size > ARENA_CHUNK && a->head) {
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    void *p = c->data + c->used;
    c->used += size;
    a->bytes += size;
    return p;
}

void *arena_zalloc(arena *a, size_t size) {
    void *p = arena_alloc(a, size ? size : 1);
    memset(p, 0, size);
    return p;
}

char *arena_strndup(arena *a, const char *s, size_t n) {
    char *p = arena_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *arena_strdup(arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

char *arena_printf(arena *a, const char *fmt, ...) {
    kern_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&b, fmt, ap);
    va_end(ap);
    char *p = arena_strndup(a, b.data ? b.data : "", b.len);
    buf_free(&b);
    return p;
}
