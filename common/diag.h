/* diag.h - source files, locations and the diagnostics sink.
 *
 * Every token, AST node and IR op carries a kern_loc. Diagnostics are collected on a
 * sink (owned by the compiler context) and printed as
 *     FILE:LINE:COL: error: MESSAGE
 *         <the source line>
 *         ^
 * Library code never exits: callers check diag_errors() and return a status. */
#ifndef KERN_DIAG_H
#define KERN_DIAG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "arena.h"

typedef struct kern_loc {
    uint32_t line; /* 1-based; 0 means "no location" */
    uint32_t col;  /* 1-based, in bytes */
} kern_loc;

typedef struct kern_source {
    const char *path; /* as given by the user; "<string>" for in-memory sources */
    const char *text; /* NUL-terminated */
    size_t len;
} kern_source;

typedef enum { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } diag_severity;

typedef struct diag {
    diag_severity severity;
    const kern_source *src; /* may be NULL for errors without a file */
    kern_loc loc;
    char *message; /* in the sink's arena */
} diag;

typedef struct diag_sink {
    arena *mem;
    diag *items;
    int len, cap;
    int errors, warnings;
    int max_errors;   /* stop recording errors after this many (0: 100) */
    bool werror;      /* warnings count as errors */
    FILE *echo;       /* if set, each diagnostic is also printed here as it arrives */
} diag_sink;

void diag_init(diag_sink *s, arena *mem);
void diag_free(diag_sink *s);
void diag_report(diag_sink *s, diag_severity sev, const kern_source *src, kern_loc loc,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void diag_vreport(diag_sink *s, diag_severity sev, const kern_source *src, kern_loc loc,
                  const char *fmt, va_list ap);
static inline int diag_errors(const diag_sink *s) { return s->errors; }
/* Prints one diagnostic with its source line and caret. */
void diag_print(FILE *f, const diag *d);
/* Prints every diagnostic in arrival order. */
void diag_print_all(FILE *f, const diag_sink *s);

#endif
