/* meta.c - module metadata: the text form's parser and printer (see meta.h).
 *
 * Memory: every string and array of a kern_meta is its own malloc allocation and
 * kern_meta_free frees them all; whoever builds a kern_meta by hand (the compiler, for JIT
 * modules) allocates it the same way.
 *
 * The parser is strict, since the text is machine-written: lines end with '\n' (the last
 * one may not), fields are separated by exactly one space, numbers are unsigned decimal
 * without signs, a kernel line is followed by exactly NPARAMS param lines and then NTASKS
 * task lines (a parallel task's line followed by none or NDIMS extent lines), then any
 * adstack lines, at most one graderror line and any access lines, and `end` is the
 * last line. A single NUL byte may follow the text (C
 * strings embedded in a module file may count their terminator). Kernel names are unique,
 * parameter names unique within their kernel. Every error names the line. */
#include "meta.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { META_MAX_FIELDS = 8, META_MAX_COUNT = 100000 };

typedef struct meta_field {
    const char *s;
    int len;
} meta_field;

typedef struct meta_parser {
    const char *p, *end;
    int line; /* of the line last read */
    char *err;
    size_t errlen;
    meta_field f[META_MAX_FIELDS];
    int nf;
} meta_parser;

static bool fail(meta_parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool fail(meta_parser *ps, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ps->err && ps->errlen)
        snprintf(ps->err, ps->errlen, "metadata line %d: %s", ps->line, msg);
    return false;
}

/* Reads the next line and splits it into fields; false at the end of the text or on a
 * malformed line (with a message). */
static bool next_line(meta_parser *ps, bool *eof) {
    *eof = false;
    if (ps->p >= ps->end) {
        *eof = true;
        ps->line++;
        return false;
    }
    ps->line++;
    const char *s = ps->p;
    const char *nl = memchr(s, '\n', (size_t)(ps->end - s));
    const char *e = nl ? nl : ps->end;
    ps->p = nl ? nl + 1 : ps->end;
    ps->nf = 0;
    if (e == s)
        return fail(ps, "empty line");
    const char *q = s;
    for (;;) {
        const char *b = q;
        while (q < e && *q != ' ') {
            unsigned char c = (unsigned char)*q;
            if (c < 0x20 || c == 0x7f)
                return fail(ps, "control character 0x%02x", c);
            q++;
        }
        if (q == b)
            return fail(ps, "empty field (fields are separated by one space)");
        if (ps->nf == META_MAX_FIELDS)
            return fail(ps, "too many fields");
        ps->f[ps->nf++] = (meta_field){b, (int)(q - b)};
        if (q == e)
            break;
        q++; /* the space */
        if (q == e)
            return fail(ps, "trailing space");
    }
    return true;
}

static bool field_is(const meta_field *f, const char *s) {
    return (size_t)f->len == strlen(s) && memcmp(f->s, s, (size_t)f->len) == 0;
}

static bool parse_u32(meta_parser *ps, const meta_field *f, const char *what, uint32_t max,
                      uint32_t *out) {
    uint64_t v = 0;
    if (f->len == 0 || f->len > 10)
        return fail(ps, "%s '%.*s' is not a number", what, f->len, f->s);
    for (int i = 0; i < f->len; i++) {
        if (f->s[i] < '0' || f->s[i] > '9')
            return fail(ps, "%s '%.*s' is not a number", what, f->len, f->s);
        v = v * 10 + (uint64_t)(f->s[i] - '0');
    }
    if (v > max)
        return fail(ps, "%s %llu is too large (at most %u)", what, (unsigned long long)v, max);
    *out = (uint32_t)v;
    return true;
}

/* identifier ('.' identifier)*, at most KERN_MAX_NAME + 9 characters (a name and
 * ".grad.jvp": symbols are built from it in fixed buffers) */
static bool is_name(const meta_field *f) {
    if (f->len > KERN_MAX_NAME + 9)
        return false;
    bool start = true;
    for (int i = 0; i < f->len; i++) {
        char c = f->s[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        bool digit = c >= '0' && c <= '9';
        if (c == '.') {
            if (start)
                return false;
            start = true;
        } else if (start) {
            if (!alpha)
                return false;
            start = false;
        } else if (!alpha && !digit) {
            return false;
        }
    }
    return f->len > 0 && !start;
}

/* The source path as the `source` line holds it: a backslash and the bytes that would
 * end or garble a line (below 0x20, 0x7f) as \HH, two hex digits, as the IR's text form
 * quotes strings; every other byte as it is. */
static void escape_path(kern_buf *out, const char *path) {
    for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
        if (*c < 0x20 || *c == 0x7f || *c == '\\')
            buf_printf(out, "\\%02x", *c);
        else
            buf_putc(out, (char)*c);
    }
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The path of the `source` line [s, e), malloc'd: \HH is byte HH (not NUL); a backslash
 * before anything else is itself, as metadata written before the escapes held it. */
static char *unescape_path(const char *s, const char *e) {
    char *d = malloc((size_t)(e - s) + 1), *q = d;
    for (; d && s < e; s++) {
        int hi = s + 2 < e && *s == '\\' ? hex_digit(s[1]) : -1;
        int lo = hi >= 0 ? hex_digit(s[2]) : -1;
        if (lo >= 0 && (hi | lo)) {
            *q++ = (char)(hi << 4 | lo);
            s += 2;
        } else {
            *q++ = *s;
        }
    }
    if (d)
        *q = '\0';
    return d;
}

static char *dup_field(const meta_field *f) {
    char *s = malloc((size_t)f->len + 1);
    if (s) {
        memcpy(s, f->s, (size_t)f->len);
        s[f->len] = '\0';
    }
    return s;
}

void kern_meta_free(kern_meta *m) {
    if (!m)
        return;
    for (int k = 0; k < m->nkernels; k++) {
        kern_meta_kernel *kk = &m->kernels[k];
        for (int i = 0; i < kk->nparams; i++) {
            free(kk->params[i].name);
            free(kk->params[i].view);
        }
        free(kk->params);
        for (int i = 0; i < kk->ntasks; i++)
            for (int d = 0; d < KERN_META_MAX_TASK_DIMS; d++)
                free(kk->tasks[i].extent[d]);
        free(kk->tasks);
        for (int i = 0; i < kk->nadstacks; i++)
            free(kk->adstacks[i].cap);
        free(kk->adstacks);
        free(kk->grad_error);
        free(kk->access);
        free(kk->name);
    }
    free(m->kernels);
    free(m->source);
    arena_free(&m->mem);
    free(m);
}

/* VIEW TAIL: the declared type (no spaces) and the trailing extents, "3" or "3x3", which
 * must be within the array's rank. */
static bool parse_view(meta_parser *ps, kern_meta_param *p) {
    const meta_field *v = &ps->f[5], *t = &ps->f[6];
    if (!ty_is_array(p->type))
        return fail(ps, "param '%s': a VIEW needs an array type, not %s", p->name, p->type->name);
    int n = 0;
    int64_t tail[2] = {0, 0};
    for (int i = 0; i < t->len;) {
        if (n == 2)
            return fail(ps, "param '%s': TAIL '%.*s' has more than 2 extents", p->name, t->len, t->s);
        int64_t x = 0;
        int start = i;
        while (i < t->len && t->s[i] >= '0' && t->s[i] <= '9' && x < 1000000)
            x = x * 10 + (t->s[i++] - '0');
        if (i == start || x < 1 || x >= 1000000 || (i < t->len && t->s[i] != 'x'))
            return fail(ps, "param '%s': bad TAIL '%.*s' (extents like 3 or 3x3)", p->name, t->len,
                        t->s);
        tail[n++] = x;
        if (i < t->len && ++i == t->len)
            return fail(ps, "param '%s': bad TAIL '%.*s'", p->name, t->len, t->s);
    }
    if (n == 0 || n > p->type->rank)
        return fail(ps, "param '%s': TAIL '%.*s' does not fit rank %d", p->name, t->len, t->s,
                    p->type->rank);
    p->view = dup_field(v);
    if (!p->view)
        return fail(ps, "out of memory");
    p->ntail = n;
    p->tail[0] = tail[0];
    p->tail[1] = tail[1];
    return true;
}

static bool parse_param(meta_parser *ps, kern_meta_kernel *k, int i) {
    bool eof;
    if (!next_line(ps, &eof))
        return eof ? fail(ps, "kernel '%s' ends after %d of its %d params", k->name, i, k->nparams)
                   : false;
    if (!field_is(&ps->f[0], "param"))
        return fail(ps, "expected param %d of %d of kernel '%s', found '%.*s'", i + 1, k->nparams,
                    k->name, ps->f[0].len, ps->f[0].s);
    if (ps->nf != 4 && ps->nf != 5 && ps->nf != 7)
        return fail(ps, "param: expected 'param NAME TYPE NOGRAD [WRITTEN [VIEW TAIL]]'");
    if (!is_name(&ps->f[1]))
        return fail(ps, "param: bad name '%.*s'", ps->f[1].len, ps->f[1].s);
    const kern_type *t = ty_parse(ps->f[2].s, ps->f[2].len);
    if (!t || t->kind == TY_VOID)
        return fail(ps, "param '%.*s': bad type '%.*s'", ps->f[1].len, ps->f[1].s, ps->f[2].len,
                    ps->f[2].s);
    bool nograd;
    if (field_is(&ps->f[3], "0"))
        nograd = false;
    else if (field_is(&ps->f[3], "1"))
        nograd = true;
    else
        return fail(ps, "param '%.*s': NOGRAD must be 0 or 1, not '%.*s'", ps->f[1].len, ps->f[1].s,
                    ps->f[3].len, ps->f[3].s);
    bool readonly = false; /* older files: no WRITTEN field, taken as written */
    if (ps->nf == 5 && field_is(&ps->f[4], "0"))
        readonly = true;
    else if (ps->nf == 5 && !field_is(&ps->f[4], "1"))
        return fail(ps, "param '%.*s': WRITTEN must be 0 or 1, not '%.*s'", ps->f[1].len,
                    ps->f[1].s, ps->f[4].len, ps->f[4].s);
    for (int j = 0; j < i; j++)
        if (field_is(&ps->f[1], k->params[j].name))
            return fail(ps, "kernel '%s' has two params named '%s'", k->name, k->params[j].name);
    kern_meta_param *p = &k->params[i];
    p->readonly = readonly;
    p->name = dup_field(&ps->f[1]);
    if (!p->name)
        return fail(ps, "out of memory");
    p->type = t;
    p->nograd = nograd;
    return ps->nf == 7 ? parse_view(ps, p) : true;
}

static bool raw_line(meta_parser *ps, const char *prefix, const char **s, const char **e,
                     bool *found);
static bool check_leaves(const sz_expr *e, const kern_meta_kernel *k, char *msg, size_t len);

/* extent D SIZEEXPR | extent D ?   (none, or one per dimension in order) */
static bool parse_extents(meta_parser *ps, kern_meta *m, kern_meta_kernel *k, kern_meta_task *t,
                          int ti) {
    for (int d = 0;; d++) {
        const char *s, *e;
        bool found;
        if (!raw_line(ps, "extent ", &s, &e, &found))
            return false;
        if (!found) {
            if (d == 0 || d == t->ndims)
                return true;
            return fail(ps, "task %d of kernel '%s' has %d dimensions but %d extent lines", ti,
                        k->name, t->ndims, d);
        }
        if (!t->parallel)
            return fail(ps, "extent: task %d of kernel '%s' is serial (it has no extents)", ti,
                        k->name);
        const char *sp = memchr(s, ' ', (size_t)(e - s));
        if (!sp || sp + 1 >= e)
            return fail(ps, "extent: expected 'extent D SIZEEXPR' or 'extent D ?'");
        uint32_t dim;
        if (!parse_u32(ps, &(meta_field){s, (int)(sp - s)}, "D", UINT32_MAX, &dim))
            return false;
        if (d >= t->ndims)
            return fail(ps, "extent: task %d of kernel '%s' has %d dimensions, not more", ti,
                        k->name, t->ndims);
        if (dim != (uint32_t)d)
            return fail(ps, "extent: expected dimension %d, found %u (dimensions in order)", d,
                        dim);
        const char *x = sp + 1;
        if (e - x == 1 && *x == '?')
            continue;
        char err[256];
        sz_expr *ex = sz_parse(&m->mem, x, (size_t)(e - x), err, sizeof err);
        if (!ex)
            return fail(ps, "extent %d: bad SizeExpr '%.*s': %s", d, (int)(e - x), x, err);
        if (!check_leaves(ex, k, err, sizeof err))
            return fail(ps, "extent %d: SizeExpr %s", d, err);
        if (!(t->extent[d] = dup_field(&(meta_field){x, (int)(e - x)})))
            return fail(ps, "out of memory");
        t->extent_expr[d] = ex;
    }
}

static bool parse_task(meta_parser *ps, kern_meta *m, kern_meta_kernel *k, int i) {
    bool eof;
    if (!next_line(ps, &eof))
        return eof ? fail(ps, "kernel '%s' ends after %d of its %d tasks", k->name, i, k->ntasks)
                   : false;
    if (!field_is(&ps->f[0], "task"))
        return fail(ps, "expected task %d of %d of kernel '%s', found '%.*s'", i + 1, k->ntasks,
                    k->name, ps->f[0].len, ps->f[0].s);
    if (ps->nf != 5 && !(ps->nf == 6 && field_is(&ps->f[5], "spread")))
        return fail(ps, "task: expected 'task parallel|serial NDIMS LINE COL [spread]'");
    kern_meta_task *t = &k->tasks[i];
    t->spread = ps->nf == 6;
    if (field_is(&ps->f[1], "parallel"))
        t->parallel = true;
    else if (field_is(&ps->f[1], "serial"))
        t->parallel = false;
    else
        return fail(ps, "task: expected parallel or serial, found '%.*s'", ps->f[1].len,
                    ps->f[1].s);
    uint32_t nd;
    if (!parse_u32(ps, &ps->f[2], "NDIMS", 8, &nd) ||
        !parse_u32(ps, &ps->f[3], "LINE", UINT32_MAX, &t->line) ||
        !parse_u32(ps, &ps->f[4], "COL", UINT32_MAX, &t->col))
        return false;
    if (t->parallel && nd < 1)
        return fail(ps, "a parallel task has 1 to 8 dimensions, not 0");
    if (!t->parallel && nd != 0)
        return fail(ps, "a serial task has 0 dimensions, not %u", nd);
    if (!t->parallel && t->spread)
        return fail(ps, "a serial task is not spread over threads");
    t->ndims = (int)nd;
    return parse_extents(ps, m, k, t, i);
}

/* If the next line starts with `prefix` (which ends with a space), consumes it and
 * returns its rest in [*s, *e): non-empty, without control characters. */
static bool raw_line(meta_parser *ps, const char *prefix, const char **s, const char **e,
                     bool *found) {
    size_t n = strlen(prefix);
    *found = false;
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, prefix, n) != 0)
        return true;
    *found = true;
    ps->line++;
    const char *b = ps->p + n;
    const char *nl = memchr(b, '\n', (size_t)(ps->end - b));
    *s = b;
    *e = nl ? nl : ps->end;
    ps->p = nl ? nl + 1 : ps->end;
    if (*e == b)
        return fail(ps, "%.*s: nothing after it", (int)n - 1, prefix);
    for (const char *q = b; q < *e; q++) {
        unsigned char c = (unsigned char)*q;
        if (c < 0x20 || c == 0x7f)
            return fail(ps, "control character 0x%02x", c);
    }
    return true;
}

/* Splits the next space-terminated field off [*s, e) (of a line of the form `usage`). */
static bool take_field(meta_parser *ps, const char **s, const char *e, meta_field *f,
                       const char *usage, const char *what) {
    const char *b = *s;
    const char *q = b;
    while (q < e && *q != ' ')
        q++;
    if (q == b || q == e)
        return fail(ps, "%.*s: expected '%s' (no %s)", (int)strcspn(usage, " "), usage, usage,
                    what);
    *f = (meta_field){b, (int)(q - b)};
    *s = q + 1;
    return true;
}

/* adstack TYPE LINE COL SIZEEXPR-to-end-of-line */
static bool parse_adstack(meta_parser *ps, kern_meta *m, kern_meta_kernel *k, const char *s,
                          const char *e) {
    static const char usage[] = "adstack TYPE LINE COL SIZEEXPR";
    meta_field ft = {0}, fl = {0}, fc = {0};
    if (!take_field(ps, &s, e, &ft, usage, "TYPE") || !take_field(ps, &s, e, &fl, usage, "LINE") ||
        !take_field(ps, &s, e, &fc, usage, "COL"))
        return false;
    const kern_type *t = ty_parse(ft.s, ft.len);
    if (!t || !ty_is_scalar(t))
        return fail(ps, "adstack: bad element type '%.*s' (a scalar type)", ft.len, ft.s);
    uint32_t line, col;
    if (!parse_u32(ps, &fl, "LINE", UINT32_MAX, &line) ||
        !parse_u32(ps, &fc, "COL", UINT32_MAX, &col))
        return false;
    if (s >= e)
        return fail(ps, "adstack: empty SizeExpr");
    if (k->nadstacks >= META_MAX_COUNT)
        return fail(ps, "kernel '%s' has too many adstacks", k->name);
    char err[256];
    sz_expr *x = sz_parse(&m->mem, s, (size_t)(e - s), err, sizeof err);
    if (!x)
        return fail(ps, "adstack: bad SizeExpr '%.*s': %s", (int)(e - s), s, err);
    if (!check_leaves(x, k, err, sizeof err))
        return fail(ps, "adstack: SizeExpr %s", err);
    kern_meta_adstack *na = realloc(k->adstacks, ((size_t)k->nadstacks + 1) * sizeof *na);
    if (!na)
        return fail(ps, "out of memory");
    k->adstacks = na;
    kern_meta_adstack *a = &k->adstacks[k->nadstacks];
    a->cap = dup_field(&(meta_field){s, (int)(e - s)});
    if (!a->cap)
        return fail(ps, "out of memory");
    k->nadstacks++;
    a->type = t;
    a->line = line;
    a->col = col;
    a->expr = x;
    return true;
}

/* The end of the SizeExpr that starts at s: a parenthesized group with its nested ones, or
 * a token up to the next space (an unbalanced group runs to e; sz_parse says why). */
static const char *expr_end(const char *s, const char *e) {
    if (s < e && *s == '(') {
        int depth = 0;
        for (const char *q = s; q < e; q++)
            if (*q == '(')
                depth++;
            else if (*q == ')' && --depth == 0)
                return q + 1;
        return e;
    }
    while (s < e && *s != ' ')
        s++;
    return s;
}

/* One SizeExpr of an access line, from *s up to a space or e, into *out; its leaves are
 * checked against k, and it may not read array elements (the tape evaluates it for any
 * device). */
static bool access_expr(meta_parser *ps, kern_meta *m, const kern_meta_kernel *k, const char **s,
                        const char *e, sz_expr **out) {
    const char *b = *s, *q = expr_end(b, e);
    char err[256];
    if (q == b)
        return fail(ps, "access: a range needs LO and HI");
    if (!(*out = sz_parse(&m->mem, b, (size_t)(q - b), err, sizeof err)))
        return fail(ps, "access: bad SizeExpr '%.*s': %s", (int)(q - b), b, err);
    if (!check_leaves(*out, k, err, sizeof err))
        return fail(ps, "access: SizeExpr %s", err);
    if (sz_reads_memory(*out))
        return fail(ps, "access: SizeExpr '%.*s' reads array elements", (int)(q - b), b);
    if (q < e && *q != ' ')
        return fail(ps, "access: expected a space after '%.*s'", (int)(q - b), b);
    *s = q < e ? q + 1 : q;
    return true;
}

/* access P read|write none | access P read|write RANGE... (RANGE: * or LO HI, one per
 * dimension of P) */
static bool parse_access(meta_parser *ps, kern_meta *m, kern_meta_kernel *k, const char *s,
                         const char *e) {
    static const char usage[] = "access P read|write none|RANGE...";
    meta_field fp = {0}, fk = {0};
    uint32_t p;
    if (!take_field(ps, &s, e, &fp, usage, "P") || !take_field(ps, &s, e, &fk, usage, "kind") ||
        !parse_u32(ps, &fp, "P", UINT32_MAX, &p))
        return false;
    if (p >= (uint32_t)k->nparams || !ty_is_array(k->params[p].type))
        return fail(ps, "access: parameter %u of kernel '%s' is not an array parameter", p,
                    k->name);
    if (!field_is(&fk, "read") && !field_is(&fk, "write"))
        return fail(ps, "access: kind '%.*s' (read or write)", fk.len, fk.s);
    bool write = field_is(&fk, "write");
    if (kern_meta_access_of(k, (int)p, write))
        return fail(ps, "access: a second '%s' line for parameter '%s'", write ? "write" : "read",
                    k->params[p].name);
    kern_meta_access a = {.param = (int)p, .write = write};
    int rank = k->params[p].type->rank;
    if ((size_t)(e - s) == 4 && memcmp(s, "none", 4) == 0) {
        a.none = true;
        s = e;
    }
    for (int d = 0; !a.none && d < rank; d++) {
        if (s >= e)
            return fail(ps, "access: '%s' has %d dimensions: %d ranges, not %d", k->params[p].name,
                        rank, rank, d);
        if (*s == '*' && (s + 1 == e || s[1] == ' ')) {
            s += s + 1 == e ? 1 : 2;
            continue;
        }
        if (!access_expr(ps, m, k, &s, e, &a.lo[d]) || !access_expr(ps, m, k, &s, e, &a.hi[d]))
            return false;
    }
    if (s < e)
        return fail(ps, "access: '%s' has %d dimensions: text after its ranges", k->params[p].name,
                    rank);
    if (k->naccess >= META_MAX_COUNT)
        return fail(ps, "kernel '%s' has too many access lines", k->name);
    kern_meta_access *na = realloc(k->access, ((size_t)k->naccess + 1) * sizeof *na);
    if (!na)
        return fail(ps, "out of memory");
    k->access = na;
    k->access[k->naccess++] = a;
    return true;
}

static bool parse_kernel(meta_parser *ps, kern_meta *m) {
    /* the kernel line is in ps->f */
    if (ps->nf != 6)
        return fail(ps, "kernel: expected 'kernel NAME LINE COL NPARAMS NTASKS'");
    if (!is_name(&ps->f[1]))
        return fail(ps, "kernel: bad name '%.*s'", ps->f[1].len, ps->f[1].s);
    for (int k = 0; k < m->nkernels; k++)
        if (field_is(&ps->f[1], m->kernels[k].name))
            return fail(ps, "two kernels named '%s'", m->kernels[k].name);
    uint32_t line, col, np, nt;
    if (!parse_u32(ps, &ps->f[2], "LINE", UINT32_MAX, &line) ||
        !parse_u32(ps, &ps->f[3], "COL", UINT32_MAX, &col) ||
        !parse_u32(ps, &ps->f[4], "NPARAMS", META_MAX_COUNT, &np) ||
        !parse_u32(ps, &ps->f[5], "NTASKS", META_MAX_COUNT, &nt))
        return false;
    /* every param and task takes a line of at least 10 bytes: a cheap bound that keeps a
     * corrupt count from asking for a huge allocation */
    size_t left = (size_t)(ps->end - ps->p);
    if ((size_t)np + nt > left / 10 + 1)
        return fail(ps,
                    "kernel '%.*s' declares %u params and %u tasks but the text ends "
                    "before them",
                    ps->f[1].len, ps->f[1].s, np, nt);
    kern_meta_kernel *nk = realloc(m->kernels, ((size_t)m->nkernels + 1) * sizeof *nk);
    if (!nk)
        return fail(ps, "out of memory");
    m->kernels = nk;
    kern_meta_kernel *k = &m->kernels[m->nkernels++];
    memset(k, 0, sizeof *k);
    k->name = dup_field(&ps->f[1]);
    k->params = calloc(np ? np : 1, sizeof *k->params);
    k->tasks = calloc(nt ? nt : 1, sizeof *k->tasks);
    if (!k->name || !k->params || !k->tasks)
        return fail(ps, "out of memory");
    k->line = line;
    k->col = col;
    /* params are freed by count: grow nparams as they are filled */
    for (uint32_t i = 0; i < np; i++) {
        k->nparams = (int)np; /* for the messages */
        bool ok = parse_param(ps, k, (int)i);
        /* a param refused for its VIEW has its name already: counted, so it is freed */
        k->nparams = ok || k->params[i].name ? (int)i + 1 : (int)i;
        if (!ok)
            return false;
    }
    k->ntasks = (int)nt;
    for (uint32_t i = 0; i < nt; i++)
        if (!parse_task(ps, m, k, (int)i))
            return false;
    const char *s, *e;
    bool found = true;
    while (found) {
        if (!raw_line(ps, "adstack ", &s, &e, &found))
            return false;
        if (found && !parse_adstack(ps, m, k, s, e))
            return false;
    }
    if (!raw_line(ps, "graderror ", &s, &e, &found))
        return false;
    if (found && !(k->grad_error = dup_field(&(meta_field){s, (int)(e - s)})))
        return fail(ps, "out of memory");
    for (found = true; found;) {
        if (!raw_line(ps, "access ", &s, &e, &found))
            return false;
        if (found && !parse_access(ps, m, k, s, e))
            return false;
    }
    return true;
}

kern_meta *kern_meta_parse(const char *text, size_t len, char *err, size_t errlen) {
    if (err && errlen)
        err[0] = '\0';
    if (!text)
        text = "", len = 0;
    if (len > 0 && text[len - 1] == '\0')
        len--;
    meta_parser ps = {.p = text, .end = text + len, .line = 0, .err = err, .errlen = errlen};
    if (memchr(text, '\0', len)) {
        ps.line = 1;
        for (const char *q = text; *q; q++)
            ps.line += *q == '\n';
        fail(&ps, "NUL byte in the text");
        return NULL;
    }
    kern_meta *m = calloc(1, sizeof *m);
    if (!m) {
        fail(&ps, "out of memory");
        return NULL;
    }
    bool eof;
    if (!next_line(&ps, &eof)) {
        if (eof)
            fail(&ps, "empty text (expected 'kern-meta 1')");
        goto fail;
    }
    if (ps.nf != 2 || !field_is(&ps.f[0], "kern-meta")) {
        fail(&ps, "not kern metadata (expected 'kern-meta 1')");
        goto fail;
    }
    if (!field_is(&ps.f[1], "1")) {
        fail(&ps, "unsupported metadata version '%.*s' (this runtime reads version 1)", ps.f[1].len,
             ps.f[1].s);
        goto fail;
    }
    bool ended = false;
    while (!ended) {
        /* the source line keeps its spaces: read it before splitting */
        if ((size_t)(ps.end - ps.p) >= 7 && memcmp(ps.p, "source ", 7) == 0) {
            ps.line++;
            if (m->source || m->nkernels) {
                fail(&ps, "'source' must come once, before the kernels");
                goto fail;
            }
            const char *s = ps.p + 7;
            const char *nl = memchr(s, '\n', (size_t)(ps.end - s));
            const char *e = nl ? nl : ps.end;
            ps.p = nl ? nl + 1 : ps.end;
            if (e == s) {
                fail(&ps, "empty source path");
                goto fail;
            }
            m->source = unescape_path(s, e);
            if (!m->source) {
                fail(&ps, "out of memory");
                goto fail;
            }
            continue;
        }
        if (!next_line(&ps, &eof)) {
            if (eof)
                fail(&ps, "missing 'end'");
            goto fail;
        }
        if (field_is(&ps.f[0], "kernel")) {
            if (!parse_kernel(&ps, m))
                goto fail;
        } else if (field_is(&ps.f[0], "end") && ps.nf == 1) {
            ended = true;
        } else if (field_is(&ps.f[0], "adstack") || field_is(&ps.f[0], "graderror") ||
                   field_is(&ps.f[0], "access")) {
            fail(&ps,
                 "'%.*s' must follow a kernel's tasks (adstacks first, then graderror, then "
                 "access)",
                 ps.f[0].len, ps.f[0].s);
            goto fail;
        } else {
            fail(&ps, "unexpected '%.*s' (expected kernel, source or end)", ps.f[0].len, ps.f[0].s);
            goto fail;
        }
    }
    if (ps.p != ps.end) {
        ps.line++;
        fail(&ps, "text after 'end'");
        goto fail;
    }
    return m;
fail:
    kern_meta_free(m);
    return NULL;
}

static void print_access(kern_buf *out, const kern_meta_kernel *k, const kern_meta_access *a) {
    buf_printf(out, "access %d %s", a->param, a->write ? "write" : "read");
    if (a->none)
        buf_puts(out, " none");
    for (int d = 0; !a->none && d < k->params[a->param].type->rank; d++) {
        if (!a->lo[d] || !a->hi[d]) {
            buf_puts(out, " *");
            continue;
        }
        buf_putc(out, ' ');
        sz_print(out, a->lo[d]);
        buf_putc(out, ' ');
        sz_print(out, a->hi[d]);
    }
    buf_putc(out, '\n');
}

void kern_meta_print(kern_buf *out, const kern_meta *m) {
    buf_puts(out, "kern-meta 1\n");
    if (m->source) {
        buf_puts(out, "source ");
        escape_path(out, m->source);
        buf_putc(out, '\n');
    }
    for (int k = 0; k < m->nkernels; k++) {
        const kern_meta_kernel *kk = &m->kernels[k];
        buf_printf(out, "kernel %s %u %u %d %d\n", kk->name, kk->line, kk->col, kk->nparams,
                   kk->ntasks);
        for (int i = 0; i < kk->nparams; i++) {
            const kern_meta_param *p = &kk->params[i];
            /* WRITTEN is printed only as 0: absent means the kernel may write it */
            if (p->view && p->ntail > 0) {
                buf_printf(out, "param %s %s %d %d %s %lld", p->name, p->type->name,
                           p->nograd ? 1 : 0, p->readonly ? 0 : 1, p->view, (long long)p->tail[0]);
                if (p->ntail > 1)
                    buf_printf(out, "x%lld", (long long)p->tail[1]);
                buf_puts(out, "\n");
            } else {
                buf_printf(out, "param %s %s %d%s\n", p->name, p->type->name, p->nograd ? 1 : 0,
                           p->readonly ? " 0" : "");
            }
        }
        for (int i = 0; i < kk->ntasks; i++) {
            const kern_meta_task *t = &kk->tasks[i];
            buf_printf(out, "task %s %d %u %u%s\n", t->parallel ? "parallel" : "serial", t->ndims,
                       t->line, t->col, t->spread ? " spread" : "");
            bool any = false;
            for (int d = 0; d < t->ndims && d < KERN_META_MAX_TASK_DIMS; d++)
                any |= t->extent[d] != NULL;
            for (int d = 0; any && d < t->ndims && d < KERN_META_MAX_TASK_DIMS; d++)
                buf_printf(out, "extent %d %s\n", d, t->extent[d] ? t->extent[d] : "?");
        }
        for (int i = 0; i < kk->nadstacks; i++)
            buf_printf(out, "adstack %s %u %u %s\n", kk->adstacks[i].type->name,
                       kk->adstacks[i].line, kk->adstacks[i].col, kk->adstacks[i].cap);
        if (kk->grad_error)
            buf_printf(out, "graderror %s\n", kk->grad_error);
        for (int i = 0; i < kk->naccess; i++)
            print_access(out, kk, &kk->access[i]);
    }
    buf_puts(out, "end\n");
}

const kern_meta_kernel *kern_meta_find(const kern_meta *m, const char *name) {
    for (int k = 0; k < m->nkernels; k++)
        if (strcmp(m->kernels[k].name, name) == 0)
            return &m->kernels[k];
    return NULL;
}

const kern_meta_access *kern_meta_access_of(const kern_meta_kernel *k, int param, bool write) {
    for (int i = 0; i < k->naccess; i++)
        if (k->access[i].param == param && k->access[i].write == write)
            return &k->access[i];
    return NULL;
}

void kern_meta_symbol(char *buf, size_t size, const char *kernel, int task, bool count) {
    kern_code_symbol(buf, size, kernel, 't', task, count);
}

void kern_meta_sizer_symbol(char *buf, size_t size, const char *kernel, int s) {
    kern_code_symbol(buf, size, kernel, 's', s, false);
}

void kern_meta_replica_sum_symbol(char *buf, size_t size, const char *kernel, int t) {
    kern_code_symbol(buf, size, kernel, 'r', t, false);
}

/* Checks the leaves of e against k's parameters (see meta.h). */
static bool check_leaves(const sz_expr *e, const kern_meta_kernel *k, char *msg, size_t len) {
    const kern_meta_param *p = NULL;
    if (e->op == SZ_PARAM || e->op == SZ_DIM || e->op == SZ_READ) {
        if (e->v < 0 || e->v >= k->nparams) {
            snprintf(msg, len, "parameter %lld does not exist (the kernel has %d)", (long long)e->v,
                     k->nparams);
            return false;
        }
        p = &k->params[e->v];
    }
    switch (e->op) {
    case SZ_PARAM:
        if (!(ty_is_int(p->type) || p->type->kind == TY_BOOL)) {
            snprintf(msg, len, "(param %lld) names '%s' of type %s, not a scalar integer",
                     (long long)e->v, p->name, p->type->name);
            return false;
        }
        break;
    case SZ_DIM:
        if (!ty_is_array(p->type) || e->d < 0 || e->d >= p->type->rank) {
            snprintf(msg, len, "(dim %lld %d) names '%s' of type %s: no such dimension",
                     (long long)e->v, e->d, p->name, p->type->name);
            return false;
        }
        break;
    case SZ_READ:
        if (!ty_is_array(p->type) || !ty_is_int(p->type->elem) || e->nkids != p->type->rank) {
            snprintf(msg, len,
                     "(read %lld ...) with %d indices names '%s' of type %s, not an integer "
                     "array of that rank",
                     (long long)e->v, e->nkids, p->name, p->type->name);
            return false;
        }
        break;
    default: break;
    }
    for (int i = 0; i < e->nkids; i++)
        if (!check_leaves(e->kids[i], k, msg, len))
            return false;
    return true;
}

/* Parses (when not parsed yet) and checks the extents of task ti of kk. */
static bool check_task(kern_meta *m, kern_meta_kernel *kk, int ti, char *err, size_t errlen) {
    kern_meta_task *t = &kk->tasks[ti];
    char msg[256];
    if (t->parallel ? t->ndims < 1 || t->ndims > KERN_META_MAX_TASK_DIMS : t->ndims != 0) {
        snprintf(err, errlen, "kernel '%s', task %d: %d dimensions (parallel 1 to %d, serial 0)",
                 kk->name, ti, t->ndims, KERN_META_MAX_TASK_DIMS);
        return false;
    }
    for (int d = 0; d < KERN_META_MAX_TASK_DIMS; d++) {
        if (!t->extent[d]) {
            t->extent_expr[d] = NULL;
            continue;
        }
        if (d >= t->ndims) {
            snprintf(err, errlen, "kernel '%s', task %d: an extent for dimension %d of %d",
                     kk->name, ti, d, t->ndims);
            return false;
        }
        if (!t->extent_expr[d]) {
            t->extent_expr[d] =
                sz_parse(&m->mem, t->extent[d], strlen(t->extent[d]), msg, sizeof msg);
            if (!t->extent_expr[d]) {
                snprintf(err, errlen, "kernel '%s', task %d, extent %d: bad SizeExpr '%s': %s",
                         kk->name, ti, d, t->extent[d], msg);
                return false;
            }
        }
        if (!check_leaves(t->extent_expr[d], kk, msg, sizeof msg)) {
            snprintf(err, errlen, "kernel '%s', task %d (at %u:%u), extent %d: SizeExpr %s",
                     kk->name, ti, t->line, t->col, d, msg);
            return false;
        }
    }
    return true;
}

bool kern_meta_check_adstacks(kern_meta *m, char *err, size_t errlen) {
    for (int k = 0; k < m->nkernels; k++) {
        kern_meta_kernel *kk = &m->kernels[k];
        for (int i = 0; i < kk->ntasks; i++)
            if (!check_task(m, kk, i, err, errlen))
                return false;
        for (int i = 0; i < kk->nadstacks; i++) {
            kern_meta_adstack *a = &kk->adstacks[i];
            char msg[256];
            if (!a->type || !ty_is_scalar(a->type) || !a->cap) {
                snprintf(err, errlen, "kernel '%s', adstack %d: bad element type or no SizeExpr",
                         kk->name, i);
                return false;
            }
            if (!a->expr) {
                a->expr = sz_parse(&m->mem, a->cap, strlen(a->cap), msg, sizeof msg);
                if (!a->expr) {
                    snprintf(err, errlen, "kernel '%s', adstack %d: bad SizeExpr '%s': %s",
                             kk->name, i, a->cap, msg);
                    return false;
                }
            }
            if (!check_leaves(a->expr, kk, msg, sizeof msg)) {
                snprintf(err, errlen, "kernel '%s', adstack %d (the loop at %u:%u): SizeExpr %s",
                         kk->name, i, a->line, a->col, msg);
                return false;
            }
        }
    }
    return true;
}
