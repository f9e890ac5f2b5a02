/* util.h - small helpers shared by every layer: fatal internal errors, growable buffers. */
#ifndef KERN_UTIL_H
#define KERN_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Internal impossibilities: print file and line, then abort. Never for user errors. */
_Noreturn void kern_unreachable_at(const char *file, int line, const char *msg);
#define kern_unreachable(msg) kern_unreachable_at(__FILE__, __LINE__, (msg))
#define kern_assert(c)                                                        \
    do {                                                                      \
        if (!(c))                                                             \
            kern_unreachable_at(__FILE__, __LINE__, "assertion failed: " #c); \
    } while (0)

/* Out of host memory in code that cannot return a status (arena growth). */
_Noreturn void kern_oom(size_t bytes);

void *kern_xmalloc(size_t n);
void *kern_xrealloc(void *p, size_t n);

/* A growable byte buffer (malloc-backed), used for text output. */
typedef struct kern_buf {
    char *data;
    size_t len, cap;
} kern_buf;

void buf_putn(kern_buf *b, const char *s, size_t n);
void buf_puts(kern_buf *b, const char *s);
void buf_putc(kern_buf *b, char c);
void buf_printf(kern_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_vprintf(kern_buf *b, const char *fmt, va_list ap);
void buf_free(kern_buf *b);
/* Returns the NUL-terminated contents and resets the buffer; the caller frees. */
char *buf_take(kern_buf *b);

/* Growable array of pointers, malloc-backed. */
typedef struct kern_ptrvec {
    void **data;
    int len, cap;
} kern_ptrvec;
void ptrvec_push(kern_ptrvec *v, void *p);
void ptrvec_free(kern_ptrvec *v);

/* Reads a whole file; returns NULL (errno set) on failure. The caller frees. */
char *kern_read_file(const char *path, size_t *len);

/* The symbol of a kernel's code (runtime/abi.h, docs/gpu-abi.md), truncated to size:
 * "kern_<K>__<kind><index>" plus "_count" when count, with K the kernel's name and each
 * '.' written "__" (simulate.grad -> kern_simulate__grad__t0). kind: 't' a task, 's' a
 * sizer kernel. The one place that knows the naming rule (compiler and runtime). */
/* The longest name (identifier) of the language: kernel names make symbols, which must
 * fit the fixed buffers of the backends and the runtime (docs/language.md). */
enum { KERN_MAX_NAME = 255 };
/* The most ranges of a parallel for (a task's dimensions; runtime/meta.h's
 * KERN_META_MAX_TASK_DIMS and the lowering's bound). */
enum { KERN_MAX_TASK_RANGES = 8 };
void kern_code_symbol(char *buf, size_t size, const char *kernel, char kind, int index, bool count);
/* kern_<K>__lanes (K with '.' written "__"): the CPU module's i32 count of the work items
 * one worker runs at once (SIMD lanes), which its adstack slices are sized for. */
void kern_lanes_symbol(char *buf, size_t size, const char *kernel);

#endif
