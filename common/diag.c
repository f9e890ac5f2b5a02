/* diag.c - diagnostics sink and printer (see diag.h). */
#include "diag.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

void diag_init(diag_sink *s, arena *mem) {
    memset(s, 0, sizeof *s);
    s->mem = mem;
}

void diag_free(diag_sink *s) {
    free(s->items);
    s->items = NULL;
    s->len = s->cap = 0;
}

void diag_vreport(diag_sink *s, diag_severity sev, const kern_source *src, kern_loc loc,
                  const char *fmt, va_list ap) {
    if (sev == DIAG_WARNING && s->werror)
        sev = DIAG_ERROR;
    int max = s->max_errors ? s->max_errors : 100;
    if (sev == DIAG_ERROR && s->errors >= max) {
        s->errors++;
        return;
    }
    if (s->len == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->items = kern_xrealloc(s->items, sizeof(diag) * (size_t)s->cap);
    }
    kern_buf b = {0};
    buf_vprintf(&b, fmt, ap);
    diag *d = &s->items[s->len++];
    d->severity = sev;
    d->src = src;
    d->loc = loc;
    d->message = arena_strdup(s->mem, b.data ? b.data : "");
    buf_free(&b);
    if (sev == DIAG_ERROR)
        s->errors++;
    else if (sev == DIAG_WARNING)
        s->warnings++;
    if (s->echo)
        diag_print(s->echo, d);
}

void diag_report(diag_sink *s, diag_severity sev, const kern_source *src, kern_loc loc,
                 const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_vreport(s, sev, src, loc, fmt, ap);
    va_end(ap);
}

static const char *sev_name(diag_severity s) {
    switch (s) {
    case DIAG_ERROR: return "error";
    case DIAG_WARNING: return "warning";
    case DIAG_NOTE: return "note";
    }
    return "error";
}

/* The end of the line starting at p: its '\n', '\r' or end. */
static const char *line_end(const char *p, const char *end) {
    while (p < end && *p != '\n' && *p != '\r')
        p++;
    return p;
}

/* The start of line `line` (1-based) of [text, end): lines end at "\n", "\r\n" or a lone
 * "\r", as the lexer counts them; end when the text has fewer lines. */
static const char *line_start(const char *text, const char *end, uint32_t line) {
    const char *p = text;
    for (uint32_t l = 1; l < line; l++) {
        p = line_end(p, end);
        if (p == end)
            return end;
        p += p[0] == '\r' && p + 1 < end && p[1] == '\n' ? 2 : 1;
    }
    return p;
}

void diag_print(FILE *f, const diag *d) {
    if (!d->src) {
        fprintf(f, "kernc: %s: %s\n", sev_name(d->severity), d->message);
        return;
    }
    if (d->loc.line == 0) {
        fprintf(f, "%s: %s: %s\n", d->src->path, sev_name(d->severity), d->message);
        return;
    }
    fprintf(f, "%s:%u:%u: %s: %s\n", d->src->path, d->loc.line, d->loc.col,
            sev_name(d->severity), d->message);
    const char *end = d->src->text + d->src->len;
    const char *p = line_start(d->src->text, end, d->loc.line);
    const char *e = line_end(p, end);
    if (p >= end && d->loc.line > 1)
        return; /* location past the end of the file: no line to show */
    fprintf(f, "    %.*s\n    ", (int)(e - p), p);
    for (uint32_t c = 1; c < d->loc.col && p + c - 1 < e; c++)
        fputc(p[c - 1] == '\t' ? '\t' : ' ', f);
    fputs("^\n", f);
}

void diag_print_all(FILE *f, const diag_sink *s) {
    for (int i = 0; i < s->len; i++)
        diag_print(f, &s->items[i]);
}
