/* ptxcheck.c - the check of a module's PTX before the CUDA driver sees it (gpu.h,
 * rt_ptx_check; docs/runtime.md, "Loading modules safely").
 *
 * cuModuleLoadDataEx reads PTX up to a NUL and compiles it; cuLaunchKernel then reads as
 * many parameters from the launch's kernelParams as the entry point declares, and as many
 * bytes from each as its type says. PTX whose entry point declares more or larger
 * parameters than rt_gpu_pack_params passes makes the driver read past the host's
 * buffers. So the text is checked first: printable text (no NUL or other control
 * character but tab, newline and carriage return); `.version`, `.target` and
 * `.address_size 64` as its first directives; and, read with PTX's tokens (comments and
 * strings skipped), an `.entry` for every task of every kernel (kern_meta_symbol) and
 * every sizer it needs (rt_gpu_needs_sizer), whose parameters have the count and sizes
 * of rt_gpu_pack_params (a sizer's: all but the last 2 + 2 nadstacks). The instructions
 * themselves are the driver's to check (a compile error is KERN_ERR_FORMAT there). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"

/* A token of PTX: [p, p + len). */
typedef struct ptx_tok {
    const char *p;
    size_t len;
} ptx_tok;

typedef struct ptx_entry {
    ptx_tok name;
    size_t first, n; /* its parameters' sizes: sizes[first .. first + n - 1] */
} ptx_entry;

typedef struct ptx_check {
    const char *p, *end; /* the text not yet read */
    ptx_entry *entries;
    size_t nentries, capentries;
    size_t *sizes;
    size_t nsizes, capsizes;
    char *err;
    size_t errlen;
} ptx_check;

__attribute__((format(printf, 2, 3))) static bool fail(ptx_check *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    return false;
}

static bool word_char(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '$' || ch == '%' || ch == '.';
}

/* The next token (len 0 at the end): a word (identifiers, directives, numbers), a string,
 * or one character; comments and white space are skipped. */
static ptx_tok next(ptx_check *c) {
    for (;;) {
        while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
            c->p++;
        if (c->end - c->p >= 2 && c->p[0] == '/' && c->p[1] == '/') {
            const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
            c->p = nl ? nl : c->end;
        } else if (c->end - c->p >= 2 && c->p[0] == '/' && c->p[1] == '*') {
            const char *q = c->p + 2;
            while (q < c->end && !(q[0] == '*' && q + 1 < c->end && q[1] == '/'))
                q++;
            c->p = q < c->end ? q + 2 : c->end;
        } else {
            break;
        }
    }
    ptx_tok t = {c->p, 0};
    if (c->p == c->end)
        return t;
    const char *q = c->p;
    if (*q == '"') {
        for (q++; q < c->end && *q != '"' && *q != '\n'; q++)
            if (*q == '\\' && q + 1 < c->end)
                q++;
        if (q < c->end && *q == '"')
            q++;
    } else if (word_char(*q)) {
        while (q < c->end && word_char(*q))
            q++;
    } else {
        q++;
    }
    t.len = (size_t)(q - c->p);
    c->p = q;
    return t;
}

static bool is(ptx_tok t, const char *s) { return t.len == strlen(s) && !memcmp(t.p, s, t.len); }

/* The size in bytes of a parameter's type directive (.u8, .f32, .b64, ...); 0 when t is
 * none. */
static size_t type_size(ptx_tok t) {
    static const struct {
        const char *name;
        size_t size;
    } types[] = {{".b8", 1},  {".u8", 1},  {".s8", 1},    {".b16", 2},    {".u16", 2},
                 {".s16", 2}, {".f16", 2}, {".bf16", 2},  {".b32", 4},    {".u32", 4},
                 {".s32", 4}, {".f32", 4}, {".f16x2", 4}, {".bf16x2", 4}, {".b64", 8},
                 {".u64", 8}, {".s64", 8}, {".f64", 8},   {".b128", 16}};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (is(t, types[i].name))
            return types[i].size;
    return 0;
}

/* p (an array of *cap elements of size bytes, n used) with room for one more: p itself, or
 * a larger copy (*cap updated); NULL with a message when memory runs out (p stays). */
static void *room(ptx_check *c, void *p, size_t *cap, size_t n, size_t size) {
    if (n < *cap)
        return p;
    size_t more = *cap ? 2 * *cap : 16;
    void *q = realloc(p, more * size);
    if (!q) {
        fail(c, "out of host memory to check the module's PTX");
        return NULL;
    }
    *cap = more;
    return q;
}

/* After `.entry`: its name and parameter list, recorded. */
static bool entry(ptx_check *c) {
    ptx_tok name = next(c);
    if (!name.len || !word_char(*name.p))
        return fail(c, "malformed PTX: an .entry without a name");
    ptx_entry *e = room(c, c->entries, &c->capentries, c->nentries, sizeof *e);
    if (!e)
        return false;
    c->entries = e;
    e = &c->entries[c->nentries++];
    *e = (ptx_entry){name, c->nsizes, 0};
    const char *save = c->p;
    if (!is(next(c), "(")) { /* no parameter list */
        c->p = save;
        return true;
    }
    ptx_tok t = next(c);
    while (!is(t, ")")) {
        if (!is(t, ".param"))
            return fail(c, "malformed PTX: .entry '%.*s' has a parameter without .param",
                        (int)(name.len > 200 ? 200 : name.len), name.p);
        size_t size = 0, count = 1;
        for (t = next(c); t.len && !is(t, ",") && !is(t, ")"); t = next(c)) {
            if (type_size(t))
                size = type_size(t);
            if (!is(t, "["))
                continue;
            ptx_tok n = next(c);
            char digits[20] = "", *stop = digits;
            if (n.len < sizeof digits)
                memcpy(digits, n.p, n.len);
            unsigned long long v = strtoull(digits, &stop, 10);
            if (!v || *stop || !n.len || !is(next(c), "]") || count > SIZE_MAX / v)
                return fail(c, "malformed PTX: a parameter array of .entry '%.*s'",
                            (int)(name.len > 200 ? 200 : name.len), name.p);
            count *= (size_t)v;
        }
        if (!t.len)
            return fail(c, "malformed PTX: the parameters of .entry '%.*s' do not end",
                        (int)(name.len > 200 ? 200 : name.len), name.p);
        size_t *sizes = room(c, c->sizes, &c->capsizes, c->nsizes, sizeof *sizes);
        if (!sizes)
            return false;
        c->sizes = sizes;
        c->sizes[c->nsizes++] = size > SIZE_MAX / count ? SIZE_MAX : size * count;
        e->n++;
        if (is(t, ","))
            t = next(c);
    }
    return true;
}

/* The text: no NUL or control character; the header directives; every .entry recorded. */
static bool scan(ptx_check *c, const char *text, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (ch == 0)
            return fail(c, "malformed PTX: a NUL byte at offset %zu", i);
        if ((ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') || ch == 0x7f)
            return fail(c, "malformed PTX: control character 0x%02x at offset %zu", ch, i);
    }
    c->p = text;
    c->end = text + len;
    ptx_tok t = next(c);
    if (!is(t, ".version") || !next(c).len)
        return fail(c, "malformed PTX: it does not start with .version");
    if (!is(next(c), ".target") || !next(c).len)
        return fail(c, "malformed PTX: .target does not follow .version");
    for (t = next(c); is(t, ","); t = next(c)) /* .target sm_90, debug */
        next(c);
    if (!is(t, ".address_size") || !is(next(c), "64"))
        return fail(c, "malformed PTX: .address_size 64 does not follow .target");
    for (t = next(c); t.len; t = next(c))
        if (is(t, ".entry") && !entry(c))
            return false;
    return true;
}

static int by_name(const void *a, const void *b) {
    ptx_tok x = ((const ptx_entry *)a)->name, y = ((const ptx_entry *)b)->name;
    int r = memcmp(x.p, y.p, x.len < y.len ? x.len : y.len);
    return r ? r : (x.len > y.len) - (x.len < y.len);
}

/* The entry point named name (NULL when there is none); the entries are sorted. */
static const ptx_entry *find(const ptx_check *c, const char *name) {
    ptx_entry key = {.name = {name, strlen(name)}};
    if (!c->nentries)
        return NULL;
    return bsearch(&key, c->entries, c->nentries, sizeof *c->entries, by_name);
}

/* Entry point sym of kernel mk (`what`: "task 0", "adstack 1's sizer") takes the first n
 * parameters of p. */
static bool expect(ptx_check *c, const kern_meta_kernel *mk, const char *what, const char *sym,
                   const rt_gpu_params *p, int n) {
    const ptx_entry *e = find(c, sym);
    if (!e)
        return fail(c, "kernel '%s', %s: no .entry '%s' in the PTX", mk->name, what, sym);
    if (!p)
        return true; /* a kernel no GPU launch can pass (rt_gpu_pack_params refuses it) */
    if (e->n != (size_t)n)
        return fail(c, "kernel '%s', %s: .entry '%s' has %zu parameters; kern passes %d", mk->name,
                    what, sym, e->n, n);
    for (int i = 0; i < n; i++)
        if (c->sizes[e->first + (size_t)i] != p->sizes[i])
            return fail(c,
                        "kernel '%s', %s: parameter %d of .entry '%s' has %zu bytes; kern "
                        "passes %zu",
                        mk->name, what, i, sym, c->sizes[e->first + (size_t)i], p->sizes[i]);
    return true;
}

/* Every task and needed sizer of mk has its entry point. */
static bool check_kernel(ptx_check *c, const kern_meta_kernel *mk) {
    rt_launch_arg *args = calloc((size_t)mk->nparams + 1, sizeof *args);
    int64_t *layout = calloc(2 * (size_t)mk->nadstacks + 1, sizeof *layout);
    rt_gpu_params p;
    char perr[256];
    if (!args || !layout) {
        free(args);
        free(layout);
        return fail(c, "out of host memory to check the module's PTX");
    }
    bool packs = rt_gpu_pack_params(mk, args, 0, 0, 0, layout, &p, perr, sizeof perr) == KERN_OK;
    bool ok = true;
    for (int t = 0; ok && t < mk->ntasks; t++) {
        char sym[1024], what[32];
        kern_meta_symbol(sym, sizeof sym, mk->name, t, false);
        snprintf(what, sizeof what, "task %d", t);
        ok = expect(c, mk, what, sym, packs ? &p : NULL, p.n);
    }
    for (int s = 0; ok && s < mk->nadstacks; s++) {
        if (!rt_gpu_needs_sizer(mk, s))
            continue;
        char sym[1024], what[48];
        kern_meta_sizer_symbol(sym, sizeof sym, mk->name, s);
        snprintf(what, sizeof what, "adstack %d's sizer", s);
        ok = expect(c, mk, what, sym, packs ? &p : NULL, p.n - 2 - 2 * mk->nadstacks);
    }
    rt_gpu_params_free(&p);
    free(args);
    free(layout);
    return ok;
}

bool rt_ptx_check(const void *code, size_t len, const kern_meta *meta, char *err, size_t errlen) {
    ptx_check c = {.err = err, .errlen = errlen};
    bool ok = scan(&c, code, len);
    if (ok && c.nentries)
        qsort(c.entries, c.nentries, sizeof *c.entries, by_name);
    for (int k = 0; ok && k < meta->nkernels; k++)
        ok = check_kernel(&c, &meta->kernels[k]);
    free(c.entries);
    free(c.sizes);
    return ok;
}
