/* npy.h - a small, strict reader and writer of NumPy .npy files (the format of
 * numpy/lib/format.py: magic "\x93NUMPY", version, little-endian header length, a Python
 * dict literal header padded with spaces and ended by '\n', then the raw data).
 *
 * Accepted: format versions 1.0 and 2.0; descr '<f4' '<f8' '<i4' '<u4' '<i8' '|b1';
 * structured dtypes whose leaf fields share one of those (kern's structs: read as that
 * dtype with a trailing dimension of a record's scalars, kern_npy.fields);
 * fortran_order False; shape of rank 1 to 4 with extents below 2^31; exactly the data the
 * shape needs, with nothing after it; bool bytes 0 or 1. Everything else is an error
 * whose message names the file and the problem (docs/runtime.md lists them).
 * Written: version 1.0, header padded so the data starts at a multiple of 64 bytes, as
 * numpy writes it; through a temporary file in the same directory renamed over the
 * target, so a failed write never leaves a partial file. No globals; thread-safe. */
#ifndef KERN_RT_NPY_H
#define KERN_RT_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/util.h"
#include "../include/kern.h"

typedef struct kern_npy {
    kern_dtype dtype;
    int rank;                     /* 1..4 */
    int64_t shape[KERN_MAX_DIMS]; /* unused dimensions 1 */
    int64_t count;                /* elements */
    size_t nbytes;
    void *data; /* malloc'd, nbytes (at least 1 byte allocated) */
    /* A structured dtype (records of fields of one size and no bools, kern's struct
     * arrays): its descr list as NumPy prints it, "[('pos', '<f4', (3,)), ('m', '<f4')]"
     * (malloc'd); NULL otherwise. dtype is then the fields' float type if any (else their
     * type: the words a record is read as) and the shape has one trailing dimension more,
     * the words of a record. */
    char *fields;
} kern_npy;

/* The longest header accepted (real ones are under 128 bytes). */
enum { KERN_NPY_MAX_HEADER = 65536 };

/* Parses a whole .npy file held in memory; `name` is used in messages. On failure
 * returns KERN_ERR_FORMAT (or KERN_ERR_OUT_OF_MEMORY) with the message in err, and *out
 * is left empty. */
kern_status kern_npy_parse(const void *bytes, size_t len, const char *name, kern_npy *out,
                           char *err, size_t errlen);
/* Reads a .npy file: KERN_ERR_NOT_FOUND for a missing file, KERN_ERR_IO for a read
 * error, KERN_ERR_FORMAT for malformed contents. */
kern_status kern_npy_read(const char *path, kern_npy *out, char *err, size_t errlen);
/* Writes an array (rank 1..4, extents below 2^31); data holds the product of the extents
 * times kern_dtype_size(dtype) bytes. KERN_ERR_ARGUMENT for a bad dtype or shape,
 * KERN_ERR_IO when the file cannot be written (the target is then untouched). */
kern_status kern_npy_write(const char *path, kern_dtype dtype, int rank, const int64_t *shape,
                           const void *data, char *err, size_t errlen);
/* The same for an array of records of a structured dtype: fields is its descr list (as
 * kern_npy.fields), shape's last extent the scalars of a record (the file's shape is the
 * others: rank 1 writes a single record, shape ()). */
kern_status kern_npy_write_fields(const char *path, const char *fields, kern_dtype dtype, int rank,
                                  const int64_t *shape, const void *data, char *err, size_t errlen);
/* The version 1.0 header (magic through '\n') for an array: returns its length (a
 * multiple of 64) or 0 for a bad dtype or shape. buf must hold KERN_NPY_HEADER_MAX. */
enum { KERN_NPY_HEADER_MAX = 256 };
size_t kern_npy_header(char *buf, kern_dtype dtype, int rank, const int64_t *shape);
void kern_npy_free(kern_npy *a);
/* The NumPy descr list of a struct (kern_npy.fields' spelling) from a parameter's declared
 * type (kern_param_info.type_name, "P{pos:vec3,mass:f32}[]" or by value "P{...}"),
 * appended to out; false (out unchanged) when it is not a struct. */
bool kern_npy_struct_fields(const char *view, kern_buf *out);
/* "<f4" and so on; NULL for an invalid dtype. */
const char *kern_npy_descr(kern_dtype dtype);

#endif
