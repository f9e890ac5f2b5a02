/* test_npy.c - tests of the .npy reader and writer (suite `npy`, runtime/npy.h).
 *
 * Files are built here byte by byte from the format's description (numpy's format.py:
 * magic, version, little-endian header length, a dict literal padded with spaces and a
 * final newline, the data), not with the writer under test; the writer's output is
 * compared with bytes written out by hand. Every malformed case is checked with its full
 * message. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../runtime/npy.h"

/* A .npy image: preamble for version major.0, the dict, `pad` spaces, '\n', then data. */
static unsigned char *make_npy(int major, int minor, const char *dict, size_t pad, const void *data,
                               size_t ndata, size_t *len) {
    size_t hl = strlen(dict) + pad + 1;
    size_t pre = major == 1 ? 10 : 12;
    *len = pre + hl + ndata;
    unsigned char *b = malloc(*len);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = (unsigned char)minor;
    b[8] = (unsigned char)(hl & 0xff);
    b[9] = (unsigned char)(hl >> 8);
    if (major != 1) {
        b[10] = (unsigned char)(hl >> 16);
        b[11] = (unsigned char)(hl >> 24);
    }
    memcpy(b + pre, dict, strlen(dict));
    memset(b + pre + strlen(dict), ' ', pad);
    b[pre + hl - 1] = '\n';
    if (ndata)
        memcpy(b + pre + hl, data, ndata);
    return b;
}

static char tmpdir[64];

static void make_tmpdir(void) {
    strcpy(tmpdir, "/tmp/kern-npy-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void remove_tmpdir(void) {
    DIR *d = opendir(tmpdir);
    if (!d)
        return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        if (remove(p) != 0)
            rmdir(p);
    }
    closedir(d);
    rmdir(tmpdir);
}

static int count_entries(void) {
    DIR *d = opendir(tmpdir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*len + 1);
    cr_assert_eq(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

TestSuite(npy, .init = make_tmpdir, .fini = remove_tmpdir);

Test(npy, writer_bytes_match_numpy_layout) {
    char path[128];
    snprintf(path, sizeof path, "%s/a.npy", tmpdir);
    float v[12];
    for (int i = 0; i < 12; i++)
        v[i] = (float)i - 2.5f;
    int64_t shape[2] = {3, 4};
    char err[256];
    cr_assert_eq(kern_npy_write(path, KERN_F32, 2, shape, v, err, sizeof err), KERN_OK, "%s", err);
    size_t len;
    unsigned char *b = slurp(path, &len);
    /* what np.save(np.zeros((3, 4), np.float32)) writes: a 128-byte header */
    const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
    cr_assert_eq(len, 128 + sizeof v);
    cr_assert(memcmp(b, "\x93NUMPY\x01\x00", 8) == 0);
    cr_assert_eq(b[8], 118);
    cr_assert_eq(b[9], 0);
    cr_assert(memcmp(b + 10, dict, strlen(dict)) == 0, "%.*s", 118, (char *)b + 10);
    for (size_t i = 10 + strlen(dict); i < 127; i++)
        cr_assert_eq(b[i], ' ', "padding at %zu", i);
    cr_assert_eq(b[127], '\n');
    cr_assert(memcmp(b + 128, v, sizeof v) == 0);
    free(b);

    /* 1-D: the 1-tuple keeps its comma; bool is |b1; i64 */
    bool flags[3] = {true, false, true};
    int64_t n3 = 3;
    cr_assert_eq(kern_npy_write(path, KERN_BOOL, 1, &n3, flags, err, sizeof err), KERN_OK);
    b = slurp(path, &len);
    const char d1[] = "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }";
    cr_assert_eq(len, 128 + 3);
    cr_assert(memcmp(b + 10, d1, strlen(d1)) == 0);
    cr_assert_eq(b[128], 1);
    cr_assert_eq(b[129], 0);
    cr_assert_eq(b[130], 1);
    free(b);
    char hdr[KERN_NPY_HEADER_MAX];
    int64_t s4[4] = {2147483647, 2147483647, 2147483647, 2147483647};
    size_t hl = kern_npy_header(hdr, KERN_I64, 4, s4);
    cr_assert_eq(hl % 64, 0);
    cr_assert_eq(hl, 128, "%zu", hl); /* 10 + 101 + '\n', padded */
    const char d4[] = "{'descr': '<i8', 'fortran_order': False, 'shape': (2147483647, "
                      "2147483647, 2147483647, 2147483647), }";
    cr_assert(memcmp(hdr + 10, d4, strlen(d4)) == 0);
    cr_assert_eq(kern_npy_header(hdr, KERN_I64, 0, s4), 0);
    cr_assert_eq(count_entries(), 1, "no temporary files are left behind");
}

Test(npy, round_trip_every_dtype_and_rank) {
    static const kern_dtype dts[] = {KERN_BOOL, KERN_I32, KERN_U32, KERN_I64, KERN_F32, KERN_F64};
    static const char *descrs[] = {"|b1", "<i4", "<u4", "<i8", "<f4", "<f8"};
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/r.npy", tmpdir);
    for (int t = 0; t < 6; t++) {
        cr_assert_str_eq(kern_npy_descr(dts[t]), descrs[t]);
        for (int rank = 1; rank <= 4; rank++) {
            int64_t shape[4] = {5, 1, 3, 2};
            if (rank == 2)
                shape[1] = 0; /* an empty array too */
            size_t count = 1;
            for (int d = 0; d < rank; d++)
                count *= (size_t)shape[d];
            size_t es = kern_dtype_size(dts[t]);
            unsigned char *data = malloc(count * es + 1);
            for (size_t i = 0; i < count * es; i++)
                data[i] =
                    dts[t] == KERN_BOOL ? (unsigned char)(i & 1) : (unsigned char)(i * 31 + 7);
            cr_assert_eq(kern_npy_write(path, dts[t], rank, shape, data, err, sizeof err), KERN_OK,
                         "%s", err);
            kern_npy a;
            cr_assert_eq(kern_npy_read(path, &a, err, sizeof err), KERN_OK, "%s", err);
            cr_assert_eq(a.dtype, dts[t]);
            cr_assert_eq(a.rank, rank);
            for (int d = 0; d < 4; d++)
                cr_assert_eq(a.shape[d], d < rank ? shape[d] : 1);
            cr_assert_eq(a.count, (int64_t)count);
            cr_assert_eq(a.nbytes, count * es);
            cr_assert(count == 0 || memcmp(a.data, data, count * es) == 0);
            kern_npy_free(&a);
            /* the same bytes through the in-memory parser */
            size_t len;
            unsigned char *img = slurp(path, &len);
            cr_assert_eq(len % 1, 0);
            cr_assert_eq(kern_npy_parse(img, len, "img", &a, err, sizeof err), KERN_OK, "%s", err);
            cr_assert_eq(a.nbytes, count * es);
            kern_npy_free(&a);
            free(img);
            free(data);
        }
    }
}

Test(npy, reads_hand_made_files) {
    char err[256];
    kern_npy a;
    size_t len;
    /* version 2.0, double quotes, no trailing comma, extra spaces, unaligned header */
    double v[3] = {1.5, -2, 3e10};
    unsigned char *b =
        make_npy(2, 0, "{ \"shape\" : ( 3 , ) , \"fortran_order\":False,'descr':'<f8'}", 3, v,
                 sizeof v, &len);
    cr_assert_eq(kern_npy_parse(b, len, "v2.npy", &a, err, sizeof err), KERN_OK, "%s", err);
    cr_assert_eq(a.dtype, KERN_F64);
    cr_assert_eq(a.rank, 1);
    cr_assert_eq(a.shape[0], 3);
    cr_assert(memcmp(a.data, v, sizeof v) == 0);
    kern_npy_free(&a);
    free(b);
    /* the header numpy 1.x writes for a (2, 3) int32 array, by hand */
    int32_t w[6] = {1, 2, 3, -4, 5, 6};
    const char *d = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
    b = make_npy(1, 0, d, 128 - 10 - strlen(d) - 1, w, sizeof w, &len);
    cr_assert_eq(len, 128 + sizeof w);
    cr_assert_eq(kern_npy_parse(b, len, "w.npy", &a, err, sizeof err), KERN_OK, "%s", err);
    cr_assert_eq(a.rank, 2);
    cr_assert_eq(a.shape[0], 2);
    cr_assert_eq(a.shape[1], 3);
    cr_assert_eq(((int32_t *)a.data)[3], -4);
    kern_npy_free(&a);
    free(b);
}

typedef struct bad_case {
    const char *name;
    int major, minor;
    const char *dict;
    size_t ndata;
    const char *msg;
} bad_case;

static const bad_case bad_cases[] = {
    {"fortran", 1, 0, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16,
     "fortran_order True (column-major data) is not supported: write a C-ordered array"},
    {"bigendian", 1, 0, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8,
     "big-endian dtype '>f4' is not supported (only little-endian: <f4 <f8 <f2 <i4 <u4 <i8 <u8 <i2 "
     "<u2 |i1 |u1 |b1)"},
    {"c8", 1, 0, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16,
     "unsupported dtype '<c8' (supported: <f4 <f8 <f2 <i4 <u4 <i8 <u8 <i2 <u2 |i1 |u1 |b1)"},
    {"f1", 1, 0, "{'descr': '|f1', 'fortran_order': False, 'shape': (2,), }", 2,
     "unsupported dtype '|f1' (supported: <f4 <f8 <f2 <i4 <u4 <i8 <u8 <i2 <u2 |i1 |u1 |b1)"},
    {"longdescr", 1, 0, "{'descr': '<f4<f4<f4<f4<f4<f4', 'fortran_order': False, 'shape': (2,), }",
     8,
     "unsupported dtype '<f4<f4<f4<f4<f4...' (supported: <f4 <f8 <f2 <i4 <u4 <i8 <u8 <i2 <u2 |i1 "
     "|u1 |b1)"},
    {"structmixed", 1, 0,
     "{'descr': [('a', '<f8'), ('b', '<i4')], 'fortran_order': False, 'shape': (2,), }", 24,
     "unsupported structured dtype: field 'b' is '<i4', an earlier one '<f8' (kern's struct "
     "arrays hold fields of one size, no bools)"},
    {"structbool", 1, 0,
     "{'descr': [('a', '|u1'), ('b', '|b1')], 'fortran_order': False, 'shape': (2,), }", 4,
     "unsupported structured dtype: field 'b' is '|b1', an earlier one '|u1' (kern's struct "
     "arrays hold fields of one size, no bools)"},
    {"structpad", 1, 0,
     "{'descr': [('a', '<f4'), ('', '|V4')], 'fortran_order': False, 'shape': (2,), }", 16,
     "unsupported structured dtype: an unnamed field (padding: kern's structs have none)"},
    {"structempty", 1, 0, "{'descr': [], 'fortran_order': False, 'shape': (2,), }", 0,
     "bad header: a structured dtype with no fields"},
    {"structrank", 1, 0,
     "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1, 1, 1, 1), }", 4,
     "rank 4 is not supported for a structured dtype: arrays of records have rank 0 to 3"},
    {"structsize", 1, 0, "{'descr': [('a', '<f4', (3,))], 'fortran_order': False, 'shape': (2,), }",
     8, "truncated data: shape (2,) of [('a', '<f4', (3,))] needs 24 bytes, the file has 8"},
    {"structfield", 1, 0, "{'descr': [('a' '<f4')], 'fortran_order': False, 'shape': (2,), }", 8,
     "bad header: expected ',' after a field name at offset 16, found '''"},
    {"rank0", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4,
     "rank 0 (shape ()) is not supported: arrays have rank 1 to 4"},
    {"rank5", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1), }", 4,
     "rank 5 is not supported: arrays have rank 1 to 4"},
    {"extent", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2147483648), }", 0,
     "shape (2, 2147483648): extent of dimension 1 is too large (at most 2147483647)"},
    {"hugeint", 1, 0,
     "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }", 0,
     "shape (18446744073709551615,): extent of dimension 0 is too large (at most 2147483647)"},
    {"negative", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 0,
     "negative extent in shape (offset 51)"},
    {"notuple", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", 12,
     "bad header: shape (3) is not a tuple (a 1-tuple is written (3,))"},
    {"truncdata", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 40,
     "truncated data: shape (3, 4) of <f4 needs 48 bytes, the file has 40"},
    {"extra", 1, 0, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", 17,
     "1 unexpected byte after the data (shape (2,) of <i8 needs 16 bytes)"},
    {"missingkey", 1, 0, "{'descr': '<f4', 'fortran_order': False, }", 0,
     "bad header: the key 'shape' is missing"},
    {"dupkey", 1, 0, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4,
     "bad header: key 'descr' appears twice"},
    {"unknownkey", 1, 0, "{'descr': '<f4', 'order': 'C', 'fortran_order': False, 'shape': (1,), }",
     4, "bad header: unexpected key 'order' (the keys are 'descr', 'fortran_order' and 'shape')"},
    {"nocolon", 1, 0, "{'descr' '<f4', 'fortran_order': False, 'shape': (1,), }", 4,
     "bad header: expected ':' after a key at offset 9, found '''"},
    {"nobrace", 1, 0, "'descr': '<f4', 'fortran_order': False, 'shape': (1,)", 4,
     "bad header: expected '{' at offset 0, found '''"},
    {"unclosed", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", 4,
     "bad header: expected ',' or '}' after a value, found the end"},
    {"junkafter", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x", 4,
     "bad header: expected only spaces after '}' at offset 58, found 'x'"},
    {"badbool", 1, 0, "{'descr': '<f4', 'fortran_order': false, 'shape': (1,), }", 4,
     "bad header: expected True or False for 'fortran_order' at offset 34, found 'f'"},
    {"truestr", 1, 0, "{'descr': '<f4', 'fortran_order': Trueish, 'shape': (1,), }", 4,
     "bad header: expected True or False for 'fortran_order' at offset 34, found 'T'"},
    {"escape", 1, 0, "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (1,), }", 4,
     "bad header: escape sequences in strings are not supported (offset 13)"},
    {"unterminated", 1, 0, "{'descr: '<f4', 'fortran_order': False, 'shape': (1,), }", 4,
     "bad header: expected ':' after a key at offset 10, found '<'"},
    {"shapecomma", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1 2), }", 4,
     "bad header: expected ',' or ')' in the shape at offset 53, found '2'"},
    {"shapefloat", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1.0,), }", 4,
     "bad header: expected ',' or ')' after an extent at offset 52, found '.'"},
    {"shapelong", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1L,), }", 4,
     "bad header: expected ',' or ')' after an extent at offset 52, found 'L'"},
    {"shapelist", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': [1], }", 4,
     "bad header: expected a shape tuple '(' at offset 50, found '['"},
    {"version3", 3, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4,
     "unsupported .npy format version 3.0 (this reader supports 1.0 and 2.0)"},
    {"version11", 1, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4,
     "unsupported .npy format version 1.1 (this reader supports 1.0 and 2.0)"},
};

Test(npy, malformed_files) {
    unsigned char zeros[64] = {0};
    char path[128], err[512], want[768];
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        size_t len;
        unsigned char *b = make_npy(c->major, c->minor, c->dict, 5, zeros, c->ndata, &len);
        kern_npy a = {0};
        kern_status s = kern_npy_parse(b, len, c->name, &a, err, sizeof err);
        cr_expect_eq(s, KERN_ERR_FORMAT, "%s", c->name);
        cr_expect_null(a.data);
        snprintf(want, sizeof want, "%s: %s", c->name, c->msg);
        cr_expect_str_eq(err, want, "%s: got [%s]", c->name, err);
        /* the file reader says the same, naming the path */
        snprintf(path, sizeof path, "%s/%s.npy", tmpdir, c->name);
        write_file(path, b, len);
        s = kern_npy_read(path, &a, err, sizeof err);
        cr_expect_eq(s, KERN_ERR_FORMAT, "%s", c->name);
        snprintf(want, sizeof want, "%s: %s", path, c->msg);
        cr_expect_str_eq(err, want, "%s (file): got [%s]", c->name, err);
        free(b);
    }
}

Test(npy, malformed_preambles) {
    char err[256];
    kern_npy a;
    static const struct {
        const char *bytes;
        size_t len;
        const char *msg;
    } cases[] = {
        {"", 0, "p: not a .npy file (it is empty)"},
        {"\x93NUM", 4, "p: truncated header: the file ends after 4 bytes"},
        {"\x93NUMPY\x01", 7, "p: truncated header: the file ends after 7 bytes"},
        {"PK\x03\x04 a zip file, say", 21,
         "p: not a .npy file (wrong magic: it does not start with \\x93NUMPY)"},
        {"\x93NUMPY\x01\x00\x10", 9, "p: truncated header: the file ends inside the header length"},
        {"\x93NUMPY\x02\x00\x10\x00\x00", 11,
         "p: truncated header: the file ends inside the header length"},
        {"\x93NUMPY\x01\x00\x40\x00{'descr'", 17,
         "p: truncated header: 64 header bytes declared, 7 present"},
        {"\x93NUMPY\x02\x00\x00\x00\x01\x00", 12,
         "p: header length 65536 is too large (at most 65536)"},
        {"\x93NUMPY\x02\x00\x01\x00\x01\x00", 12,
         "p: header length 65537 is too large (at most 65536)"},
        {"\x93NUMPY\x01\x00\x00\x00", 10, "p: bad header: it does not end with a newline"},
        {"\x93NUMPY\x01\x00\x03\x00{}\n", 13, "p: bad header: the key 'descr' is missing"},
        {"\x93NUMPY\x01\x00\x03\x00{}x", 13, "p: bad header: it does not end with a newline"},
        {"\x93NUMPY\x01\x00\x04\x00{\n}\n", 14,
         "p: bad header: expected a string at offset 1, found byte 0x0a"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kern_status s = kern_npy_parse(cases[i].bytes, cases[i].len, "p", &a, err, sizeof err);
        if (i == 7) { /* 65536 is allowed: it fails later, on the missing bytes */
            cr_expect_eq(s, KERN_ERR_FORMAT);
            cr_expect_str_eq(err, "p: truncated header: 65536 header bytes declared, 0 present");
            continue;
        }
        cr_expect_eq(s, KERN_ERR_FORMAT, "case %zu", i);
        cr_expect_str_eq(err, cases[i].msg, "case %zu", i);
    }
}

Test(npy, bool_bytes_must_be_0_or_1) {
    unsigned char v[4] = {0, 1, 2, 1};
    size_t len;
    unsigned char *b =
        make_npy(1, 0, "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }", 0, v, 4, &len);
    char err[256];
    kern_npy a;
    cr_assert_eq(kern_npy_parse(b, len, "b.npy", &a, err, sizeof err), KERN_ERR_FORMAT);
    cr_assert_str_eq(err, "b.npy: bool element 2 has the byte value 2 (not 0 or 1)");
    free(b);
}

Test(npy, file_errors) {
    char path[128], err[512], want[512];
    kern_npy a;
    snprintf(path, sizeof path, "%s/missing.npy", tmpdir);
    cr_assert_eq(kern_npy_read(path, &a, err, sizeof err), KERN_ERR_NOT_FOUND);
    snprintf(want, sizeof want, "%s: No such file or directory", path);
    cr_assert_str_eq(err, want);
    cr_assert_eq(kern_npy_read(tmpdir, &a, err, sizeof err), KERN_ERR_IO);
    snprintf(want, sizeof want, "%s: is a directory", tmpdir);
    cr_assert_str_eq(err, want);

    float v[2] = {1, 2};
    int64_t n = 2;
    snprintf(path, sizeof path, "%s/no/such/dir.npy", tmpdir);
    cr_assert_eq(kern_npy_write(path, KERN_F32, 1, &n, v, err, sizeof err), KERN_ERR_IO);
    snprintf(want, sizeof want, "cannot write '%s': No such file or directory", path);
    cr_assert_str_eq(err, want);

    /* the target is a directory: the rename fails, and nothing is left behind */
    snprintf(path, sizeof path, "%s/adir.npy", tmpdir);
    cr_assert_eq(mkdir(path, 0755), 0);
    int before = count_entries();
    cr_assert_eq(kern_npy_write(path, KERN_F32, 1, &n, v, err, sizeof err), KERN_ERR_IO);
    snprintf(want, sizeof want, "cannot write '%s': Is a directory", path);
    cr_assert_str_eq(err, want);
    cr_assert_eq(count_entries(), before, "the temporary file was removed");

    /* bad arguments */
    snprintf(path, sizeof path, "%s/x.npy", tmpdir);
    cr_assert_eq(kern_npy_write(path, KERN_F32, 0, &n, v, err, sizeof err), KERN_ERR_ARGUMENT);
    snprintf(want, sizeof want, "%s: rank 0 is not supported (rank 1 to 4)", path);
    cr_assert_str_eq(err, want);
    int64_t neg = -1;
    cr_assert_eq(kern_npy_write(path, KERN_F32, 1, &neg, v, err, sizeof err), KERN_ERR_ARGUMENT);
    snprintf(want, sizeof want, "%s: extent -1 of dimension 0 is out of range", path);
    cr_assert_str_eq(err, want);
    cr_assert_eq(kern_npy_write(path, (kern_dtype)0, 1, &n, v, err, sizeof err), KERN_ERR_ARGUMENT);
    cr_assert_eq(access(path, F_OK), -1, "nothing was written");

    /* overwriting replaces the old contents whole */
    cr_assert_eq(kern_npy_write(path, KERN_F32, 1, &n, v, err, sizeof err), KERN_OK);
    int64_t n1 = 1;
    double d = 7;
    cr_assert_eq(kern_npy_write(path, KERN_F64, 1, &n1, &d, err, sizeof err), KERN_OK);
    cr_assert_eq(kern_npy_read(path, &a, err, sizeof err), KERN_OK);
    cr_assert_eq(a.dtype, KERN_F64);
    cr_assert_eq(((double *)a.data)[0], 7.0);
    kern_npy_free(&a);
}

/* Every truncation and every single-byte change of a valid file: an error or a result,
 * never a crash (ASan watches the reads). */
Test(npy, mutations_never_crash) {
    char hdr[KERN_NPY_HEADER_MAX];
    int64_t shape[2] = {2, 3};
    size_t hl = kern_npy_header(hdr, KERN_I32, 2, shape);
    size_t len = hl + 24;
    unsigned char *img = malloc(len), *t = malloc(len);
    memcpy(img, hdr, hl);
    memset(img + hl, 1, 24);
    char err[512];
    kern_npy a;
    for (size_t cut = 0; cut <= len; cut++) {
        kern_status s = kern_npy_parse(img, cut, "m", &a, err, sizeof err);
        cr_expect_eq(s == KERN_OK, cut == len, "cut %zu: %s", cut, err);
        kern_npy_free(&a);
    }
    const unsigned char subst[] = {0, ' ', '\n', '(', ')', ',', '\'', '9', 'T', 0x80, 0xff};
    for (size_t i = 0; i < hl; i++) {
        for (size_t s = 0; s < sizeof subst; s++) {
            memcpy(t, img, len);
            t[i] = subst[s];
            if (kern_npy_parse(t, len, "m", &a, err, sizeof err) == KERN_OK)
                cr_expect_eq(a.nbytes, 24);
            else
                cr_expect(strncmp(err, "m: ", 3) == 0 && strlen(err) > 3);
            kern_npy_free(&a);
        }
    }
    free(img);
    free(t);
}

/* A source whose size is unknown (a pipe): truncation and trailing bytes are found by
 * reading, with the same messages. */
static kern_status read_through_pipe(const unsigned char *b, size_t len, char *err, size_t errlen,
                                     kern_npy *a, char *path, size_t pathlen) {
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    cr_assert_eq(write(fds[1], b, len), (ssize_t)len);
    close(fds[1]);
    snprintf(path, pathlen, "/proc/self/fd/%d", fds[0]);
    kern_status s = kern_npy_read(path, a, err, errlen);
    close(fds[0]);
    return s;
}

Test(npy, unknown_size_sources) {
    char err[512], want[600], path[64];
    kern_npy a;
    int32_t v[6] = {1, 2, 3, 4, 5, 6};
    size_t len;
    const char *d = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
    unsigned char *b = make_npy(1, 0, d, 3, v, sizeof v, &len);
    cr_assert_eq(read_through_pipe(b, len, err, sizeof err, &a, path, sizeof path), KERN_OK, "%s",
                 err);
    cr_assert_eq(((int32_t *)a.data)[5], 6);
    kern_npy_free(&a);
    cr_assert_eq(read_through_pipe(b, len - 5, err, sizeof err, &a, path, sizeof path),
                 KERN_ERR_FORMAT);
    snprintf(want, sizeof want,
             "%s: truncated data: shape (2, 3) of <i4 needs 24 bytes, the file has 19", path);
    cr_assert_str_eq(err, want);
    free(b);
    unsigned char big[30] = {0};
    b = make_npy(1, 0, d, 3, big, sizeof big, &len);
    cr_assert_eq(read_through_pipe(b, len, err, sizeof err, &a, path, sizeof path),
                 KERN_ERR_FORMAT);
    snprintf(want, sizeof want,
             "%s: 6 unexpected bytes after the data (shape (2, 3) of <i4 needs 24 bytes)", path);
    cr_assert_str_eq(err, want);
    free(b);
}

/* Structured dtypes of one scalar type (kern's structs): records read as a trailing
 * dimension of their scalars, the descr list reprinted in NumPy's spelling (so that two
 * spellings compare equal), written back the same; the list from a declared type. */
Test(npy, structured_dtypes) {
    float v[2 * 3 * 7];
    for (int i = 0; i < 42; i++)
        v[i] = (float)i;
    size_t len;
    unsigned char *b =
        make_npy(1, 0,
                 "{'descr': [ ( 'pos' ,'<f4',(3 ,) ),(\"vel\", '<f4', (3,)), ('mass', '<f4',)], "
                 "'fortran_order': False, 'shape': (2, 3), }",
                 5, v, sizeof v, &len);
    kern_npy a;
    char err[512];
    cr_assert_eq(kern_npy_parse(b, len, "p", &a, err, sizeof err), KERN_OK, "%s", err);
    free(b);
    cr_expect_eq(a.dtype, KERN_F32);
    cr_expect(a.rank == 3 && a.shape[0] == 2 && a.shape[1] == 3 && a.shape[2] == 7);
    cr_expect_eq(a.count, 42);
    cr_expect_str_eq(a.fields, "[('pos', '<f4', (3,)), ('vel', '<f4', (3,)), ('mass', '<f4')]");
    cr_expect_eq(((float *)a.data)[41], 41.0f);
    /* the declared type gives the same list */
    kern_buf want = {0};
    cr_assert(kern_npy_struct_fields("P{pos:vec3,vel:vec3,mass:f32}[,]", &want));
    cr_expect_str_eq(want.data, a.fields);
    buf_free(&want);
    /* written back: NumPy's header, the same bytes read again */
    char path[128];
    snprintf(path, sizeof path, "%s/struct.npy", tmpdir);
    cr_assert_eq(
        kern_npy_write_fields(path, a.fields, a.dtype, a.rank, a.shape, a.data, err, sizeof err),
        KERN_OK, "%s", err);
    unsigned char *file = slurp(path, &len);
    cr_expect(strstr((char *)file + 10, "{'descr': [('pos', '<f4', (3,)), ('vel', '<f4', (3,)), "
                                        "('mass', '<f4')], 'fortran_order': False, 'shape': "
                                        "(2, 3), }") != NULL);
    cr_expect_eq((len - 42 * 4) % 64, 0, "the data starts at a multiple of 64");
    free(file);
    kern_npy c;
    cr_assert_eq(kern_npy_read(path, &c, err, sizeof err), KERN_OK, "%s", err);
    cr_expect_str_eq(c.fields, a.fields);
    cr_expect(c.rank == 3 && !memcmp(c.data, a.data, a.nbytes));
    kern_npy_free(&c);
    kern_npy_free(&a);
    cr_expect_null(a.fields);
    /* a single record (shape ()), nested structs and matrix fields */
    double d[12] = {0};
    b = make_npy(1, 0,
                 "{'descr': [('a', [('x', '<f8'), ('y', '<f8', (3,))]), ('m', '<f8', (2, 2)), "
                 "('s', '<f8')], 'fortran_order': False, 'shape': (), }",
                 5, d, 9 * sizeof(double), &len);
    cr_assert_eq(kern_npy_parse(b, len, "q", &a, err, sizeof err), KERN_OK, "%s", err);
    free(b);
    cr_expect(a.dtype == KERN_F64 && a.rank == 1 && a.shape[0] == 9);
    kern_buf q = {0};
    cr_assert(kern_npy_struct_fields("Q{a:R{x:f64,y:dvec3},m:dmat2,s:f64}", &q));
    cr_expect_str_eq(q.data, a.fields);
    buf_free(&q);
    kern_npy_free(&a);
    /* not structs */
    kern_buf none = {0};
    cr_expect(!kern_npy_struct_fields("vec3[]", &none));
    cr_expect(!kern_npy_struct_fields("f32", &none));
    cr_expect(!kern_npy_struct_fields("P{a:nosuch}[]", &none));
    cr_expect(!kern_npy_struct_fields("P{a:f32", &none));
    cr_expect_eq(none.len, 0);
    buf_free(&none);
}
