/* arena.h - chunked bump allocator.
 *
 * Everything the compiler builds (AST, IR, interned strings) lives in an arena owned
 * by its context or module; one arena_free() releases it all. Allocations are 16-byte
 * aligned and never moved. */
#ifndef KERN_ARENA_H
#define KERN_ARENA_H

#include <stddef.h>

typedef struct arena_chunk arena_chunk;

typedef struct arena {
    arena_chunk *head; /* newest chunk; older ones follow ->next */
    size_t bytes;      /* total bytes handed out, for statistics */
} arena;

void arena_init(arena *a);
void arena_free(arena *a);
/* Never returns NULL: an allocation failure calls kern_oom(). */
void *arena_alloc(arena *a, size_t size);
void *arena_zalloc(arena *a, size_t size);
char *arena_strndup(arena *a, const char *s, size_t n);
char *arena_strdup(arena *a, const char *s);
char *arena_printf(arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define ARENA_NEW(a, T) ((T *)arena_zalloc((a), sizeof(T)))
#define ARENA_ARRAY(a, T, n) ((T *)arena_zalloc((a), sizeof(T) * (size_t)(n)))

#endif
