/* sha256.h - SHA-256 (FIPS 180-4), for the keys of the compile cache (jit/cache.c): a key
 * names a cache entry by everything that changes the code, so two different inputs must
 * not share a name. Streaming: init, update any number of times, final. */
#ifndef KERN_SHA256_H
#define KERN_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct kern_sha256 {
    uint32_t h[8];
    uint64_t len;          /* bytes hashed so far */
    unsigned char blk[64]; /* the block being filled */
    size_t fill;           /* its bytes */
} kern_sha256;

void kern_sha256_init(kern_sha256 *s);
void kern_sha256_update(kern_sha256 *s, const void *data, size_t len);
/* The digest's 32 bytes into out; s is spent. */
void kern_sha256_final(kern_sha256 *s, unsigned char out[32]);

#endif
