/* npy.h - a small, strict reader and writer of NumPy .npy files (the format of
 * numpy/lib/format.py: magic "\x93NUMPY", version, little-endian header length, a Python
 * dict literal header padded with spaces and ended by '\n', then the raw data).
 *
 * Accepted: format versions 1.0 and 2.0; descr '<f4' '<f8' '<i4' '<u4' '<i8' '|b1';
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

#include "../include/kern.h"

typedef struct kern_npy {
    kern_dtype dtype;
    int rank;                     /* 1..4 */
    int64_t shape[KERN_MAX_DIMS]; /* unused dimensions 1 */
    int64_t count;                /* elements */
    size_t nbytes;
    void *data; /* malloc'd, nbytes (at least 1 byte allocated) */
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
/* The version 1.0 header (magic through '\n') for an array: returns its length (a
 * multiple of 64) or 0 for a bad dtype or shape. buf must hold KERN_NPY_HEADER_MAX. */
enum { KERN_NPY_HEADER_MAX = 256 };
size_t kern_npy_header(char *buf, kern_dtype dtype, int rank, const int64_t *shape);
void kern_npy_free(kern_npy *a);
/* "<f4" and so on; NULL for an invalid dtype. */
const char *kern_npy_descr(kern_dtype dtype);

#endif
