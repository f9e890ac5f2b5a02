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

static bool utf8_continuation(char c) { return ((unsigned char)c & 0xC0) == 0x80; }

/* Quotes the source line [p, e) with a caret under byte col (1-based). A long line is cut
 * to a window of about DIAG_QUOTE_WIDTH bytes around the caret, marked "..." where cut, so
 * that an error at column 5,000,000 prints a line, not megabytes. Control characters
 * other than tab print as '?'; the caret's indentation counts one column per UTF-8
 * character and copies tabs, so it lands under the character on a terminal. */
static void quote_line(kern_buf *b, const char *p, const char *e, uint32_t col) {
    enum { DIAG_QUOTE_WIDTH = 120 };
    size_t len = (size_t)(e - p), at = col ? col - 1 : 0;
    if (at > len)
        at = len;
    size_t lo = 0, hi = len;
    if (len > DIAG_QUOTE_WIDTH) {
        lo = at > DIAG_QUOTE_WIDTH / 2 ? at - DIAG_QUOTE_WIDTH / 2 : 0;
        hi = lo + DIAG_QUOTE_WIDTH < len ? lo + DIAG_QUOTE_WIDTH : len;
        if (hi == len)
            lo = len - DIAG_QUOTE_WIDTH;
        while (lo > 0 && lo < at && utf8_continuation(p[lo])) /* whole characters */
            lo++;
        while (hi < len && hi > at && utf8_continuation(p[hi]))
            hi--;
    }
    buf_puts(b, lo > 0 ? "    ..." : "    ");
    for (size_t i = lo; i < hi; i++) {
        unsigned char c = (unsigned char)p[i];
        buf_putc(b, (c < 0x20 && c != '\t') || c == 0x7f ? '?' : (char)c);
    }
    buf_puts(b, hi < len ? "...\n    " : "\n    ");
    if (lo > 0)
        buf_puts(b, "   ");
    for (size_t i = lo; i < at; i++)
        if (!utf8_continuation(p[i]))
            buf_putc(b, p[i] == '\t' ? '\t' : ' ');
    buf_puts(b, "^\n");
}

void diag_print(FILE *f, const diag *d) {
    kern_buf b = {0};
    if (!d->src) {
        buf_printf(&b, "kernc: %s: %s\n", sev_name(d->severity), d->message);
    } else if (d->loc.line == 0) {
        buf_printf(&b, "%s: %s: %s\n", d->src->path, sev_name(d->severity), d->message);
    } else {
        buf_printf(&b, "%s:%u:%u: %s: %s\n", d->src->path, d->loc.line, d->loc.col,
                   sev_name(d->severity), d->message);
        const char *end = d->src->text + d->src->len;
        const char *p = line_start(d->src->text, end, d->loc.line);
        if (p < end || d->loc.line == 1) /* past the end of the file: no line to show */
            quote_line(&b, p, line_end(p, end), d->loc.col);
    }
    /* one write: stderr is unbuffered, and a byte per write(2) is slow */
    fwrite(b.data, 1, b.len, f);
    buf_free(&b);
}

void diag_print_all(FILE *f, const diag_sink *s) {
    for (int i = 0; i < s->len; i++)
        diag_print(f, &s->items[i]);
}
