/* valset.c - a set of IR values (valset.h). */
#include "valset.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

static size_t slot(const ir_value *v, size_t cap) {
    uintptr_t x = (uintptr_t)v;
    x ^= x >> 17;
    x *= 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 29)) & (cap - 1);
}

static void grow(ir_valset *s) {
    size_t nc = s->cap ? 2 * s->cap : 64;
    const ir_value **nk = calloc(nc, sizeof *nk);
    if (!nk)
        kern_oom(nc * sizeof *nk);
    for (size_t i = 0; i < s->cap; i++) {
        if (!s->keys[i])
            continue;
        size_t h = slot(s->keys[i], nc);
        while (nk[h])
            h = (h + 1) & (nc - 1);
        nk[h] = s->keys[i];
    }
    free(s->keys);
    s->keys = nk;
    s->cap = nc;
}

bool ir_valset_add(ir_valset *s, const ir_value *v) {
    if (2 * (s->len + 1) > s->cap)
        grow(s);
    size_t h = slot(v, s->cap);
    while (s->keys[h] && s->keys[h] != v)
        h = (h + 1) & (s->cap - 1);
    if (s->keys[h])
        return false;
    s->keys[h] = v;
    s->len++;
    return true;
}

bool ir_valset_has(const ir_valset *s, const ir_value *v) {
    if (!s->cap)
        return false;
    for (size_t h = slot(v, s->cap); s->keys[h]; h = (h + 1) & (s->cap - 1))
        if (s->keys[h] == v)
            return true;
    return false;
}

void ir_valset_clear(ir_valset *s) {
    if (s->cap)
        memset(s->keys, 0, s->cap * sizeof *s->keys);
    s->len = 0;
}

void ir_valset_free(ir_valset *s) {
    free(s->keys);
    memset(s, 0, sizeof *s);
}
