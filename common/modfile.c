/* modfile.c - the GPU module file's framing and checksum (modfile.h). */
#include "modfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t sum_step(uint64_t h, uint64_t w) {
    h = (h ^ w) * 0x100000001b3ull;
    return h ^ (h >> 32);
}

uint64_t kern_modfile_sum(const void *data, size_t len) {
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w = 0;
        for (int b = 0; b < 8; b++) /* little-endian on every host */
            w |= (uint64_t)p[i + b] << (8 * b);
        h = sum_step(h, w);
    }
    uint64_t w = 0;
    for (int b = 0; i + (size_t)b < len; b++)
        w |= (uint64_t)p[i + b] << (8 * b);
    return sum_step(sum_step(h, w), (uint64_t)len);
}

char *kern_modfile_build(const char *target, const char *meta, size_t metalen, const void *code,
                         size_t codelen, size_t *len) {
    char head[160], mid[48];
    int hn = snprintf(head, sizeof head, "kern-module %d %s\nmeta %zu\n", KERN_MODFILE_VERSION,
                      target, metalen);
    int mn = snprintf(mid, sizeof mid, "\ncode %zu\n", codelen);
    if (hn < 0 || (size_t)hn >= sizeof head || mn < 0)
        return NULL;
    size_t body = (size_t)hn + metalen + (size_t)mn + codelen + 1;
    char *f = malloc(body + KERN_MODFILE_SUM_LEN + 1);
    if (!f)
        return NULL;
    char *p = f;
    memcpy(p, head, (size_t)hn);
    p += hn;
    if (metalen)
        memcpy(p, meta, metalen);
    p += metalen;
    memcpy(p, mid, (size_t)mn);
    p += mn;
    if (codelen)
        memcpy(p, code, codelen);
    p += codelen;
    *p++ = '\n';
    snprintf(p, KERN_MODFILE_SUM_LEN + 1, "sum %016llx\n",
             (unsigned long long)kern_modfile_sum(f, body));
    *len = body + KERN_MODFILE_SUM_LEN;
    return f;
}
