/* npy.c - the strict .npy reader and writer (see npy.h; the format is that of
 * numpy/lib/format.py, "NEP 1").
 *
 * Reading goes through one small byte source (a memory block or a FILE), so the in-memory
 * parser that the fuzz target drives and the file reader are the same code:
 *   preamble  "\x93NUMPY" MAJOR MINOR, then the header length (u16 LE for 1.0, u32 LE
 *             for 2.0);
 *   header    a Python dict literal: {'descr': '<f4', 'fortran_order': False,
 *             'shape': (3, 4), } with optional spaces, single or double quotes without
 *             escapes, an optional trailing comma, then spaces and one final '\n';
 *             exactly the three keys, each once;
 *   data      exactly count * itemsize bytes, nothing after them.
 * The size of the data is checked against what the source has left before anything is
 * allocated for it, so a corrupt shape cannot ask for a huge buffer. */
#include "npy.h"

#include "../common/outfile.h"
#include "../common/types.h"
#include "../common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

static const struct {
    const char *descr;
    kern_dtype dtype;
} npy_dtypes[] = {
    {"<f4", KERN_F32}, {"<f8", KERN_F64}, {"<i4", KERN_I32}, {"<u4", KERN_U32},
    {"<i8", KERN_I64}, {"|b1", KERN_BOOL}, {"|i1", KERN_I8},  {"|u1", KERN_U8},
    {"<i2", KERN_I16}, {"<u2", KERN_U16},  {"<u8", KERN_U64}, {"<f2", KERN_F16},
    /* NumPy has no bfloat16: its bits, read back as <u2 (kern_npy_descr only) */
    {"<u2", KERN_BF16},
};

const char *kern_npy_descr(kern_dtype dtype) {
    for (size_t i = 0; i < sizeof npy_dtypes / sizeof npy_dtypes[0]; i++)
        if (npy_dtypes[i].dtype == dtype)
            return npy_dtypes[i].descr;
    return NULL;
}

void kern_npy_free(kern_npy *a) {
    if (!a)
        return;
    free(a->data);
    free(a->fields);
    memset(a, 0, sizeof *a);
}

/* ---- errors ------------------------------------------------------------------------ */

typedef struct npy_err {
    const char *name;
    char *buf;
    size_t len;
} npy_err;

static kern_status npy_fail(npy_err *e, kern_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static kern_status npy_fail(npy_err *e, kern_status s, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (e->buf && e->len)
        snprintf(e->buf, e->len, "%s: %s", e->name, msg);
    return s;
}

/* "(3,)", "(3, 4)", "()" */
static void format_shape(char *buf, size_t size, int rank, const uint64_t *shape) {
    size_t n = 0;
    n += (size_t)snprintf(buf, size, "(");
    for (int d = 0; d < rank && n < size; d++)
        n += (size_t)snprintf(buf + n, size - n, "%s%llu", d ? ", " : "",
                              (unsigned long long)shape[d]);
    if (n < size)
        snprintf(buf + n, size - n, rank == 1 ? ",)" : ")");
}

/* ---- the byte source --------------------------------------------------------------- */

typedef struct npy_src {
    const unsigned char *mem; /* memory source */
    size_t len, pos;
    FILE *f;        /* or a file */
    int64_t left;   /* bytes left in the file when known, else -1 */
    int read_errno; /* a read error on the file */
} npy_src;

static size_t src_read(npy_src *s, void *dst, size_t n) {
    if (!s->f) {
        size_t k = s->len - s->pos < n ? s->len - s->pos : n;
        if (k)
            memcpy(dst, s->mem + s->pos, k);
        s->pos += k;
        return k;
    }
    size_t k = fread(dst, 1, n, s->f);
    if (k < n && ferror(s->f) && !s->read_errno)
        s->read_errno = errno ? errno : EIO;
    if (s->left >= 0)
        s->left -= (int64_t)k;
    return k;
}

/* Bytes left, or -1 when unknown. */
static int64_t src_left(const npy_src *s) {
    if (!s->f)
        return (int64_t)(s->len - s->pos);
    return s->left;
}

/* Counts the bytes left by reading them (for the trailing-bytes message). */
static uint64_t src_drain(npy_src *s) {
    int64_t known = src_left(s);
    if (known >= 0)
        return (uint64_t)known;
    unsigned char tmp[4096];
    uint64_t n = 0;
    size_t k;
    while ((k = src_read(s, tmp, sizeof tmp)) > 0)
        n += k;
    return n;
}

/* ---- the header dict --------------------------------------------------------------- */

enum { NPY_MAX_FIELDS_TEXT = 2048 };

typedef struct npy_header {
    char descr[16];                   /* a structured dtype: the one descr of all its leaves */
    char fields[NPY_MAX_FIELDS_TEXT]; /* a structured dtype: its descr, reprinted; else "" */
    int64_t leaves;                   /* a structured dtype: scalars in one record */
    bool has_descr, has_fortran, has_shape;
    bool fortran;
    int rank;          /* entries in shape (may exceed 4: then an error) */
    uint64_t shape[8]; /* capped values; shape_big marks an extent >= 2^63 */
    bool shape_big;
} npy_header;

typedef struct hparser {
    const char *s;
    size_t n, i;
    npy_err *e;
} hparser;

static void skip_ws(hparser *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t'))
        p->i++;
}

static kern_status syntax(hparser *p, const char *expected) {
    if (p->i >= p->n)
        return npy_fail(p->e, KERN_ERR_FORMAT, "bad header: expected %s, found the end", expected);
    unsigned char c = (unsigned char)p->s[p->i];
    if (c >= 0x20 && c < 0x7f)
        return npy_fail(p->e, KERN_ERR_FORMAT, "bad header: expected %s at offset %zu, found '%c'",
                        expected, p->i, (char)c);
    return npy_fail(p->e, KERN_ERR_FORMAT,
                    "bad header: expected %s at offset %zu, found byte 0x%02x", expected, p->i, c);
}

static bool accept(hparser *p, char c) {
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == c) {
        p->i++;
        return true;
    }
    return false;
}

/* A string literal without escapes, into buf (truncated to size - 1 bytes: the caller
 * compares against short names, and a truncated one matches none). */
static kern_status parse_string(hparser *p, char *buf, size_t size, size_t *len) {
    skip_ws(p);
    if (p->i >= p->n || (p->s[p->i] != '\'' && p->s[p->i] != '"'))
        return syntax(p, "a string");
    char q = p->s[p->i++];
    size_t start = p->i;
    while (p->i < p->n && p->s[p->i] != q) {
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '\\')
            return npy_fail(p->e, KERN_ERR_FORMAT,
                            "bad header: escape sequences in strings are not supported "
                            "(offset %zu)",
                            p->i);
        if (c < 0x20 || c >= 0x7f)
            return syntax(p, "a printable character in a string");
        p->i++;
    }
    if (p->i >= p->n)
        return syntax(p, "the end of a string");
    size_t k = p->i - start;
    *len = k;
    if (k > size - 1)
        k = size - 1;
    memcpy(buf, p->s + start, k);
    buf[k] = '\0';
    p->i++;
    return KERN_OK;
}

static bool accept_word(hparser *p, const char *w) {
    skip_ws(p);
    size_t k = strlen(w);
    if (p->n - p->i >= k && memcmp(p->s + p->i, w, k) == 0) {
        char next = p->i + k < p->n ? p->s[p->i + k] : ' ';
        if ((next >= 'a' && next <= 'z') || (next >= 'A' && next <= 'Z') ||
            (next >= '0' && next <= '9') || next == '_')
            return false;
        p->i += k;
        return true;
    }
    return false;
}

/* '(' [int (',' int)* [',']] ')' with a comma required after a single element */
static kern_status parse_shape(hparser *p, npy_header *h) {
    if (!accept(p, '('))
        return syntax(p, "a shape tuple '('");
    h->rank = 0;
    bool comma_after_last = false;
    for (;;) {
        skip_ws(p);
        if (accept(p, ')'))
            break;
        if (h->rank > 0 && !comma_after_last)
            return syntax(p, "',' or ')' in the shape");
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == '-')
            return npy_fail(p->e, KERN_ERR_FORMAT, "negative extent in shape (offset %zu)", p->i);
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
            return syntax(p, "an integer in the shape");
        uint64_t v = 0;
        bool big = false;
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
            unsigned d = (unsigned)(p->s[p->i] - '0');
            if (v > (UINT64_MAX - d) / 10)
                big = true;
            else
                v = v * 10 + d;
            p->i++;
        }
        if (p->i < p->n && (p->s[p->i] == 'L' || p->s[p->i] == '_' || p->s[p->i] == '.'))
            return syntax(p, "',' or ')' after an extent");
        if (h->rank < 8)
            h->shape[h->rank] = big ? UINT64_MAX : v;
        h->shape_big |= big;
        h->rank++;
        if (h->rank > 64)
            return npy_fail(p->e, KERN_ERR_FORMAT, "bad header: the shape has too many extents");
        comma_after_last = accept(p, ',');
    }
    if (h->rank == 1 && !comma_after_last)
        return npy_fail(p->e, KERN_ERR_FORMAT,
                        "bad header: shape (%llu) is not a tuple (a 1-tuple is written (%llu,))",
                        (unsigned long long)h->shape[0], (unsigned long long)h->shape[0]);
    return KERN_OK;
}

/* A structured dtype's descr, the list NumPy writes (dtype.descr):
 *   fields := '[' field (',' field)* [','] ']'
 *   field  := '(' STRING ',' (STRING | fields) [',' shape] [','] ')'
 * reprinted into h->fields in NumPy's own spelling, "[('pos', '<f4', (3,)), ('m', '<f4')]",
 * so that two spellings of one dtype compare equal; the leaves must have one size and no
 * bool (kern's struct arrays), h->descr is their float descr if any (else the first: the
 * words the array is read as), and h->leaves counts them. */
static kern_status parse_fields(hparser *p, npy_header *h, kern_buf *out, int64_t *leaves,
                                int depth) {
    kern_status st;
    if (depth > 8)
        return npy_fail(p->e, KERN_ERR_FORMAT, "bad header: structured dtype nested too deeply");
    if (!accept(p, '['))
        return syntax(p, "'['");
    buf_putc(out, '[');
    *leaves = 0;
    for (int nf = 0;; nf++) {
        if (accept(p, ']')) {
            if (nf == 0)
                return npy_fail(p->e, KERN_ERR_FORMAT,
                                "bad header: a structured dtype with no "
                                "fields");
            break;
        }
        if (nf > 0)
            buf_puts(out, ", ");
        char name[128], descr[16];
        size_t len;
        if (!accept(p, '('))
            return syntax(p, "'(' of a field");
        if ((st = parse_string(p, name, sizeof name, &len)) != KERN_OK)
            return st;
        if (len == 0 || len >= sizeof name)
            return npy_fail(p->e, KERN_ERR_FORMAT,
                            len ? "unsupported structured dtype: a field name longer than %d"
                                : "unsupported structured dtype: an unnamed field (padding: "
                                  "kern's structs have none)",
                            (int)sizeof name - 1);
        if (!accept(p, ','))
            return syntax(p, "',' after a field name");
        buf_printf(out, "('%s', ", name);
        int64_t n = 1;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == '[') {
            if ((st = parse_fields(p, h, out, &n, depth + 1)) != KERN_OK)
                return st;
        } else {
            if ((st = parse_string(p, descr, sizeof descr, &len)) != KERN_OK)
                return st;
            if (len >= sizeof descr)
                return npy_fail(p->e, KERN_ERR_FORMAT, "unsupported dtype '%s...' of field '%s'",
                                descr, name);
            if (!h->descr[0]) {
                snprintf(h->descr, sizeof h->descr, "%s", descr);
            } else if (strcmp(h->descr, descr) != 0) {
                /* fields of one size, no bool: stored as words of the float type if there is
                 * one (common/types.h, ty_storage_leaf), the integers' bits reinterpreted */
                bool one_size = strlen(h->descr) == 3 && strlen(descr) == 3 &&
                                h->descr[0] == descr[0] && h->descr[2] == descr[2] &&
                                h->descr[1] != 'b' && descr[1] != 'b';
                if (!one_size)
                    return npy_fail(p->e, KERN_ERR_FORMAT,
                                    "unsupported structured dtype: field '%s' is '%s', an "
                                    "earlier one '%s' (kern's struct arrays hold fields of one "
                                    "size, no bools)",
                                    name, descr, h->descr);
                if (descr[1] == 'f')
                    snprintf(h->descr, sizeof h->descr, "%s", descr);
            }
            buf_printf(out, "'%s'", descr);
        }
        bool comma = accept(p, ','), closed = accept(p, ')');
        if (!comma && !closed)
            return syntax(p, "')' after a field");
        if (!closed) { /* a subarray: the shape */
            npy_header sub = {0};
            if ((st = parse_shape(p, &sub)) != KERN_OK)
                return st;
            buf_puts(out, ", (");
            for (int d = 0; d < sub.rank && d < 8; d++) {
                if (sub.shape_big || sub.shape[d] > 64)
                    return npy_fail(p->e, KERN_ERR_FORMAT,
                                    "unsupported structured dtype: field '%s' has an extent "
                                    "above 64",
                                    name);
                n *= (int64_t)sub.shape[d];
                buf_printf(out, "%s%llu", d ? ", " : "", (unsigned long long)sub.shape[d]);
            }
            buf_puts(out, sub.rank == 1 ? ",)" : ")");
            accept(p, ',');
            if (!accept(p, ')'))
                return syntax(p, "')' after a field");
        }
        buf_putc(out, ')');
        *leaves += n;
        if (*leaves > 4096)
            return npy_fail(p->e, KERN_ERR_FORMAT, "unsupported structured dtype: too many fields");
        if (accept(p, ']'))
            break;
        if (!accept(p, ','))
            return syntax(p, "',' or ']' after a field");
    }
    buf_putc(out, ']');
    return KERN_OK;
}

static kern_status parse_dict(const char *s, size_t n, npy_err *e, npy_header *h) {
    memset(h, 0, sizeof *h);
    if (n == 0 || s[n - 1] != '\n')
        return npy_fail(e, KERN_ERR_FORMAT, "bad header: it does not end with a newline");
    hparser p = {s, n - 1, 0, e};
    kern_status st;
    if (!accept(&p, '{'))
        return syntax(&p, "'{'");
    for (;;) {
        if (accept(&p, '}'))
            break;
        char key[32];
        size_t klen;
        if ((st = parse_string(&p, key, sizeof key, &klen)) != KERN_OK)
            return st;
        if (!accept(&p, ':'))
            return syntax(&p, "':' after a key");
        bool *seen;
        if (klen == 5 && strcmp(key, "descr") == 0) {
            seen = &h->has_descr;
        } else if (klen == 13 && strcmp(key, "fortran_order") == 0) {
            seen = &h->has_fortran;
        } else if (klen == 5 && strcmp(key, "shape") == 0) {
            seen = &h->has_shape;
        } else {
            return npy_fail(e, KERN_ERR_FORMAT,
                            "bad header: unexpected key '%s' (the keys are 'descr', "
                            "'fortran_order' and 'shape')",
                            key);
        }
        if (*seen)
            return npy_fail(e, KERN_ERR_FORMAT, "bad header: key '%s' appears twice", key);
        *seen = true;
        if (seen == &h->has_descr) {
            size_t dlen;
            skip_ws(&p);
            if (p.i < p.n && p.s[p.i] == '[') {
                kern_buf text = {0};
                st = parse_fields(&p, h, &text, &h->leaves, 0);
                if (st == KERN_OK && text.len >= sizeof h->fields)
                    st = npy_fail(e, KERN_ERR_FORMAT, "unsupported structured dtype: too long");
                if (st == KERN_OK)
                    memcpy(h->fields, text.data, text.len + 1);
                buf_free(&text);
                if (st != KERN_OK)
                    return st;
            } else {
                if ((st = parse_string(&p, h->descr, sizeof h->descr, &dlen)) != KERN_OK)
                    return st;
                if (dlen >= sizeof h->descr)
                    return npy_fail(e, KERN_ERR_FORMAT,
                                    "unsupported dtype '%s...' (supported: <f4 <f8 <f2 <i4 <u4 <i8 "
                                    "<u8 <i2 <u2 |i1 |u1 "
                                    "|b1)",
                                    h->descr);
            }
        } else if (seen == &h->has_fortran) {
            if (accept_word(&p, "True"))
                h->fortran = true;
            else if (accept_word(&p, "False"))
                h->fortran = false;
            else
                return syntax(&p, "True or False for 'fortran_order'");
        } else if ((st = parse_shape(&p, h)) != KERN_OK) {
            return st;
        }
        if (accept(&p, '}'))
            break;
        if (!accept(&p, ','))
            return syntax(&p, "',' or '}' after a value");
    }
    skip_ws(&p);
    if (p.i != p.n)
        return syntax(&p, "only spaces after '}'");
    if (!h->has_descr || !h->has_fortran || !h->has_shape)
        return npy_fail(e, KERN_ERR_FORMAT, "bad header: the key '%s' is missing",
                        !h->has_descr     ? "descr"
                        : !h->has_fortran ? "fortran_order"
                                          : "shape");
    return KERN_OK;
}

/* Checks the header's meaning and fills out's dtype, rank, shape, count and nbytes. */
static kern_status check_header(const npy_header *h, npy_err *e, kern_npy *out) {
    kern_dtype dtype = 0;
    for (size_t i = 0; i < sizeof npy_dtypes / sizeof npy_dtypes[0]; i++)
        if (!dtype && strcmp(h->descr, npy_dtypes[i].descr) == 0)
            dtype = npy_dtypes[i].dtype; /* the first: <u2 reads as u16 */
    if (!dtype) {
        if (h->descr[0] == '>')
            return npy_fail(e, KERN_ERR_FORMAT,
                            "big-endian dtype '%s' is not supported (only little-endian: "
                            "<f4 <f8 <f2 <i4 <u4 <i8 <u8 <i2 <u2 |i1 |u1 |b1)",
                            h->descr);
        return npy_fail(e, KERN_ERR_FORMAT,
                        "unsupported dtype '%s' (supported: <f4 <f8 <f2 <i4 <u4 <i8 <u8 <i2 <u2 "
                        "|i1 |u1 |b1)",
                        h->descr);
    }
    if (h->fortran)
        return npy_fail(e, KERN_ERR_FORMAT,
                        "fortran_order True (column-major data) is not supported: write a "
                        "C-ordered array");
    npy_header flat;
    if (h->fields[0]) { /* records of `leaves` scalars: one trailing dimension more */
        if (h->rank >= KERN_MAX_DIMS)
            return npy_fail(e, KERN_ERR_FORMAT,
                            "rank %d is not supported for a structured dtype: arrays of "
                            "records have rank 0 to 3",
                            h->rank);
        flat = *h;
        flat.shape[flat.rank++] = (uint64_t)h->leaves;
        flat.fields[0] = '\0';
        kern_status st = check_header(&flat, e, out);
        if (st == KERN_OK && !(out->fields = strdup(h->fields)))
            st = npy_fail(e, KERN_ERR_OUT_OF_MEMORY, "out of memory");
        return st;
    }
    char shp[160];
    format_shape(shp, sizeof shp, h->rank < 8 ? h->rank : 8, h->shape);
    if (h->rank == 0)
        return npy_fail(e, KERN_ERR_FORMAT,
                        "rank 0 (shape ()) is not supported: arrays have rank 1 to 4");
    if (h->rank > KERN_MAX_DIMS)
        return npy_fail(e, KERN_ERR_FORMAT, "rank %d is not supported: arrays have rank 1 to 4",
                        h->rank);
    uint64_t count = 1;
    for (int d = 0; d < h->rank; d++) {
        if (h->shape_big || h->shape[d] > INT32_MAX)
            return npy_fail(e, KERN_ERR_FORMAT,
                            "shape %s: extent of dimension %d is too large (at most %d)", shp, d,
                            INT32_MAX);
        count *= h->shape[d]; /* < 2^124 cannot happen: each factor < 2^31, checked below */
        if (count > (uint64_t)PTRDIFF_MAX)
            return npy_fail(e, KERN_ERR_FORMAT, "shape %s is too large", shp);
    }
    size_t esize = kern_dtype_size(dtype);
    if (count > (uint64_t)PTRDIFF_MAX / esize)
        return npy_fail(e, KERN_ERR_FORMAT, "shape %s is too large", shp);
    out->dtype = dtype;
    out->rank = h->rank;
    for (int d = 0; d < KERN_MAX_DIMS; d++)
        out->shape[d] = d < h->rank ? (int64_t)h->shape[d] : 1;
    out->count = (int64_t)count;
    out->nbytes = (size_t)count * esize;
    return KERN_OK;
}

static kern_status read_npy(npy_src *src, npy_err *e, kern_npy *out) {
    kern_status s = KERN_OK;
    char *hbuf = NULL;
    kern_npy a = {0};
    unsigned char pre[12];
    memset(out, 0, sizeof *out);

    size_t got = src_read(src, pre, 8);
    if (got < 8 || memcmp(pre, npy_magic, sizeof npy_magic) != 0) {
        if (src->read_errno)
            s = npy_fail(e, KERN_ERR_IO, "read error: %s", strerror(src->read_errno));
        else if (got < 8 && memcmp(pre, npy_magic, got < 6 ? got : 6) == 0 && got > 0)
            s = npy_fail(e, KERN_ERR_FORMAT, "truncated header: the file ends after %zu bytes",
                         got);
        else if (got == 0)
            s = npy_fail(e, KERN_ERR_FORMAT, "not a .npy file (it is empty)");
        else
            s = npy_fail(e, KERN_ERR_FORMAT,
                         "not a .npy file (wrong magic: it does not start with \\x93NUMPY)");
        goto cleanup;
    }
    int major = pre[6], minor = pre[7];
    size_t lenbytes;
    if (major == 1 && minor == 0)
        lenbytes = 2;
    else if (major == 2 && minor == 0)
        lenbytes = 4;
    else {
        s = npy_fail(e, KERN_ERR_FORMAT,
                     "unsupported .npy format version %d.%d (this reader supports 1.0 and 2.0)",
                     major, minor);
        goto cleanup;
    }
    if (src_read(src, pre + 8, lenbytes) < lenbytes) {
        s = src->read_errno ? npy_fail(e, KERN_ERR_IO, "read error: %s", strerror(src->read_errno))
                            : npy_fail(e, KERN_ERR_FORMAT,
                                       "truncated header: the file ends inside the header "
                                       "length");
        goto cleanup;
    }
    uint32_t hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
    if (lenbytes == 4)
        hlen |= (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
    if (hlen > KERN_NPY_MAX_HEADER) {
        s = npy_fail(e, KERN_ERR_FORMAT, "header length %u is too large (at most %d)", hlen,
                     KERN_NPY_MAX_HEADER);
        goto cleanup;
    }
    hbuf = malloc(hlen ? hlen : 1);
    if (!hbuf) {
        s = npy_fail(e, KERN_ERR_OUT_OF_MEMORY, "out of memory");
        goto cleanup;
    }
    got = src_read(src, hbuf, hlen);
    if (got < hlen) {
        s = src->read_errno
                ? npy_fail(e, KERN_ERR_IO, "read error: %s", strerror(src->read_errno))
                : npy_fail(e, KERN_ERR_FORMAT,
                           "truncated header: %u header bytes declared, %zu present", hlen, got);
        goto cleanup;
    }
    npy_header h;
    if ((s = parse_dict(hbuf, hlen, e, &h)) != KERN_OK)
        goto cleanup;
    if ((s = check_header(&h, e, &a)) != KERN_OK)
        goto cleanup;

    char shp[160];
    format_shape(shp, sizeof shp, h.rank, h.shape);
    const char *what = h.fields[0] ? h.fields : h.descr;
    int64_t left = src_left(src);
    if (left >= 0 && (uint64_t)left < a.nbytes) {
        s = npy_fail(e, KERN_ERR_FORMAT,
                     "truncated data: shape %s of %s needs %zu bytes, the file has %lld", shp, what,
                     a.nbytes, (long long)left);
        goto cleanup;
    }
    a.data = malloc(a.nbytes ? a.nbytes : 1);
    if (!a.data) {
        s = npy_fail(e, KERN_ERR_OUT_OF_MEMORY, "out of memory for %zu bytes of data", a.nbytes);
        goto cleanup;
    }
    got = src_read(src, a.data, a.nbytes);
    if (src->read_errno) {
        s = npy_fail(e, KERN_ERR_IO, "read error: %s", strerror(src->read_errno));
        goto cleanup;
    }
    if (got < a.nbytes) {
        s = npy_fail(e, KERN_ERR_FORMAT,
                     "truncated data: shape %s of %s needs %zu bytes, the file has %zu", shp, what,
                     a.nbytes, got);
        goto cleanup;
    }
    uint64_t extra = src_drain(src);
    if (extra) {
        s = npy_fail(e, KERN_ERR_FORMAT,
                     "%llu unexpected byte%s after the data (shape %s of %s needs %zu bytes)",
                     (unsigned long long)extra, extra == 1 ? "" : "s", shp, what, a.nbytes);
        goto cleanup;
    }
    if (a.dtype == KERN_BOOL) {
        const unsigned char *b = a.data;
        for (size_t i = 0; i < a.nbytes; i++) {
            if (b[i] > 1) {
                s = npy_fail(e, KERN_ERR_FORMAT,
                             "bool element %zu has the byte value %u (not 0 or 1)", i, b[i]);
                goto cleanup;
            }
        }
    }
    *out = a;
    a.data = NULL;
    a.fields = NULL;
cleanup:
    free(a.data);
    free(a.fields);
    free(hbuf);
    return s;
}

kern_status kern_npy_parse(const void *bytes, size_t len, const char *name, kern_npy *out,
                           char *err, size_t errlen) {
    npy_err e = {name ? name : "<memory>", err, errlen};
    if (err && errlen)
        err[0] = '\0';
    npy_src src = {.mem = bytes, .len = bytes ? len : 0, .left = -1};
    return read_npy(&src, &e, out);
}

kern_status kern_npy_read(const char *path, kern_npy *out, char *err, size_t errlen) {
    npy_err e = {path, err, errlen};
    if (err && errlen)
        err[0] = '\0';
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return npy_fail(&e, errno == ENOENT ? KERN_ERR_NOT_FOUND : KERN_ERR_IO, "%s",
                        strerror(errno));
    struct stat st;
    npy_src src = {.f = f, .left = -1};
    if (fstat(fileno(f), &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            fclose(f);
            return npy_fail(&e, KERN_ERR_IO, "is a directory");
        }
        if (S_ISREG(st.st_mode))
            src.left = (int64_t)st.st_size;
    }
    kern_status s = read_npy(&src, &e, out);
    fclose(f);
    return s;
}

/* ---- structs ----------------------------------------------------------------------- */

/* The descr of a component type name ("f32"), or NULL. */
static const char *scalar_descr(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof npy_dtypes / sizeof npy_dtypes[0]; i++) {
        const char *n = kern_dtype_name(npy_dtypes[i].dtype);
        if (n && strlen(n) == len && !strncmp(n, name, len))
            return npy_dtypes[i].descr;
    }
    return NULL;
}

/* type := NAME ['{' NAME ':' type (',' NAME ':' type)* '}'] (runtime/meta.h's VIEW) */
static bool view_fields(const char **s, kern_buf *out, bool top) {
    const char *name = *s;
    while (**s && **s != '{' && **s != '}' && **s != ',' && **s != '[' && **s != ':')
        (*s)++;
    size_t len = (size_t)(*s - name);
    if (**s == '{') {
        buf_puts(out, top ? "[" : ", [");
        for (int i = 0; **s == '{' || **s == ','; i++) {
            (*s)++;
            const char *f = *s;
            while (**s && **s != ':')
                (*s)++;
            if (**s != ':')
                return false;
            buf_printf(out, "%s('%.*s'", i ? ", " : "", (int)(*s - f), f);
            (*s)++;
            if (!view_fields(s, out, false))
                return false;
            buf_putc(out, ')');
        }
        if (**s != '}')
            return false;
        (*s)++;
        buf_putc(out, ']');
        return true;
    }
    if (top)
        return false; /* not a struct */
    const kern_type *v = ty_vector_named(name, (int)len);
    const char *d =
        v ? scalar_descr(v->elem->name, strlen(v->elem->name)) : scalar_descr(name, len);
    if (!d)
        return false;
    buf_printf(out, ", '%s'", d);
    if (v && v->kind == TY_MAT)
        buf_printf(out, ", (%d, %d)", v->n, v->n);
    else if (v)
        buf_printf(out, ", (%d,)", v->n);
    return true;
}

bool kern_npy_struct_fields(const char *view, kern_buf *out) {
    const char *s = view;
    size_t start = out->len;
    bool ok = view && view_fields(&s, out, true) && (!*s || *s == '[');
    if (!ok && out->data) {
        out->len = start;
        out->data[start] = '\0';
    }
    return ok;
}

/* ---- writing ----------------------------------------------------------------------- */

/* The header of an array: descr is the dict's value as written ("'<f4'" or a list), the
 * shape rank extents (0 for a record); into out, padded to 64 bytes. False for a bad
 * extent. */
static bool header(kern_buf *out, const char *descr, int rank, const int64_t *shape) {
    kern_buf dict = {0};
    buf_printf(&dict, "{'descr': %s, 'fortran_order': False, 'shape': (", descr);
    for (int d = 0; d < rank; d++) {
        if (shape[d] < 0 || shape[d] > INT32_MAX) {
            buf_free(&dict);
            return false;
        }
        buf_printf(&dict, "%s%lld", d ? ", " : "", (long long)shape[d]);
    }
    buf_printf(&dict, "%s), }", rank == 1 ? "," : "");
    size_t total = 10 + dict.len + 1; /* preamble, dict, '\n' */
    size_t padded = (total + 63) / 64 * 64;
    size_t hlen = padded - 10;
    char pre[10];
    memcpy(pre, npy_magic, sizeof npy_magic);
    pre[6] = 1;
    pre[7] = 0;
    pre[8] = (char)(hlen & 0xff);
    pre[9] = (char)(hlen >> 8);
    buf_putn(out, pre, sizeof pre);
    buf_putn(out, dict.data, dict.len);
    for (size_t i = total; i < padded; i++)
        buf_putc(out, ' ');
    buf_putc(out, '\n');
    buf_free(&dict);
    return true;
}

size_t kern_npy_header(char *buf, kern_dtype dtype, int rank, const int64_t *shape) {
    const char *descr = kern_npy_descr(dtype);
    if (!descr || rank < 1 || rank > KERN_MAX_DIMS || !shape)
        return 0;
    char quoted[16];
    snprintf(quoted, sizeof quoted, "'%s'", descr);
    kern_buf h = {0};
    size_t n = header(&h, quoted, rank, shape) && h.len <= KERN_NPY_HEADER_MAX ? h.len : 0;
    if (n)
        memcpy(buf, h.data, n);
    buf_free(&h);
    return n;
}

kern_status kern_npy_write(const char *path, kern_dtype dtype, int rank, const int64_t *shape,
                           const void *data, char *err, size_t errlen) {
    return kern_npy_write_fields(path, NULL, dtype, rank, shape, data, err, errlen);
}

kern_status kern_npy_write_fields(const char *path, const char *fields, kern_dtype dtype, int rank,
                                  const int64_t *shape, const void *data, char *err,
                                  size_t errlen) {
    npy_err e = {path ? path : "<null>", err, errlen};
    if (err && errlen)
        err[0] = '\0';
    if (!path)
        return npy_fail(&e, KERN_ERR_ARGUMENT, "no path");
    if (!kern_npy_descr(dtype))
        return npy_fail(&e, KERN_ERR_ARGUMENT, "invalid dtype %d", (int)dtype);
    if (rank < 1 || rank > KERN_MAX_DIMS || !shape)
        return npy_fail(&e, KERN_ERR_ARGUMENT, "rank %d is not supported (rank 1 to 4)", rank);
    uint64_t count = 1;
    for (int d = 0; d < rank; d++) {
        if (shape[d] < 0 || shape[d] > INT32_MAX)
            return npy_fail(&e, KERN_ERR_ARGUMENT, "extent %lld of dimension %d is out of range",
                            (long long)shape[d], d);
        count *= (uint64_t)shape[d];
        if (count > (uint64_t)PTRDIFF_MAX / 8)
            return npy_fail(&e, KERN_ERR_ARGUMENT, "the array is too large");
    }
    size_t nbytes = (size_t)count * kern_dtype_size(dtype);
    if (!data && nbytes)
        return npy_fail(&e, KERN_ERR_ARGUMENT, "no data");
    char quoted[16];
    snprintf(quoted, sizeof quoted, "'%s'", kern_npy_descr(dtype));
    kern_buf h = {0};
    header(&h, fields ? fields : quoted, fields ? rank - 1 : rank, shape); /* extents checked */

    kern_outfile o;
    char why[512];
    bool ok = kern_outfile_open(&o, path, why, sizeof why);
    if (ok) {
        kern_outfile_write(&o, h.data, h.len);
        kern_outfile_write(&o, data, nbytes);
        ok = kern_outfile_commit(&o, path, why, sizeof why);
    }
    buf_free(&h);
    if (!ok && err && errlen)
        snprintf(err, errlen, "%s", why); /* the message names the path */
    return ok ? KERN_OK : KERN_ERR_IO;
}
