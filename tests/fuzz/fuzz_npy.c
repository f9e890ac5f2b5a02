/* fuzz_npy.c - libFuzzer harness for the .npy reader (runtime/npy.h).
 *
 * Each input is the bytes of a .npy file. kern_npy_parse must either return an array or
 * an error with a message naming the input ("fuzz.npy: ..."), never crash or read out of
 * bounds. An array it accepts must survive the writer's header: header + data parses back
 * to the same dtype, shape and bytes (a mismatch traps). Seeds: any .npy files, or the
 * files test_npy.c builds. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_rewrite(const kern_npy *a) {
    char hdr[KERN_NPY_HEADER_MAX];
    size_t hl = kern_npy_header(hdr, a->dtype, a->rank, a->shape);
    if (hl == 0) {
        fprintf(stderr, "fuzz_npy: the writer refuses an array the reader accepted\n");
        __builtin_trap();
    }
    unsigned char *img = malloc(hl + a->nbytes);
    if (!img)
        return;
    memcpy(img, hdr, hl);
    if (a->nbytes)
        memcpy(img + hl, a->data, a->nbytes);
    kern_npy b;
    char err[512];
    if (kern_npy_parse(img, hl + a->nbytes, "rewritten.npy", &b, err, sizeof err) != KERN_OK) {
        fprintf(stderr, "fuzz_npy: a rewritten array does not parse: %s\n", err);
        __builtin_trap();
    }
    if (b.dtype != a->dtype || b.rank != a->rank || b.nbytes != a->nbytes ||
        memcmp(b.shape, a->shape, sizeof b.shape) != 0 ||
        (a->nbytes && memcmp(b.data, a->data, a->nbytes) != 0)) {
        fprintf(stderr, "fuzz_npy: a rewritten array differs\n");
        __builtin_trap();
    }
    kern_npy_free(&b);
    free(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kern_npy a;
    char err[512];
    kern_status s = kern_npy_parse(data, size, "fuzz.npy", &a, err, sizeof err);
    if (s == KERN_OK) {
        check_rewrite(&a);
        kern_npy_free(&a);
    } else if (strncmp(err, "fuzz.npy: ", 10) != 0 || strlen(err) <= 10) {
        fprintf(stderr, "fuzz_npy: an error without a proper message: '%s'\n", err);
        __builtin_trap();
    }
    return 0;
}
