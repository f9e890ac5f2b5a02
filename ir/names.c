/* names.c - the namer: text names of a kernel's values in print order (see ir_priv.h).
 *
 * One pre-pass over the kernel numbers everything, so a value that is used before its
 * definition (invalid IR that the printer must still show) already has its number. The
 * map is a pointer-keyed open-addressing table owned by the namer (malloc), not the
 * ir_value.id scratch field, which passes keep for themselves. */
#include <stdlib.h>
#include <string.h>

#include "ir_priv.h"

static uint32_t hash_ptr(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (uint32_t)x;
}

static void map_put(ir_namer *n, const void *key, int64_t val);

static void map_grow(ir_namer *n) {
    uint32_t old_cap = n->cap;
    const void **old_keys = n->keys;
    int64_t *old_vals = n->vals;
    n->cap = old_cap ? old_cap * 2 : 64;
    n->keys = calloc(n->cap, sizeof *n->keys);
    n->vals = calloc(n->cap, sizeof *n->vals);
    if (!n->keys || !n->vals)
        kern_oom(n->cap * sizeof(int64_t));
    n->len = 0;
    for (uint32_t i = 0; i < old_cap; i++)
        if (old_keys[i])
            map_put(n, old_keys[i], old_vals[i]);
    free(old_keys);
    free(old_vals);
}

/* The first binding of a key wins (a value defined twice keeps its first number). */
static void map_put(ir_namer *n, const void *key, int64_t val) {
    if (!key)
        return;
    if (2 * (n->len + 1) > n->cap)
        map_grow(n);
    uint32_t mask = n->cap - 1;
    for (uint32_t i = hash_ptr(key) & mask;; i = (i + 1) & mask) {
        if (n->keys[i] == key)
            return;
        if (!n->keys[i]) {
            n->keys[i] = key;
            n->vals[i] = val;
            n->len++;
            return;
        }
    }
}

static bool map_get(const ir_namer *n, const void *key, int64_t *val) {
    if (!n->cap || !key)
        return false;
    uint32_t mask = n->cap - 1;
    for (uint32_t i = hash_ptr(key) & mask; n->keys[i]; i = (i + 1) & mask) {
        if (n->keys[i] == key) {
            *val = n->vals[i];
            return true;
        }
    }
    return false;
}

static void number_region(ir_namer *n, const ir_region *r, int depth);

static void number_op(ir_namer *n, const ir_op *op, int depth) {
    map_put(n, op, n->next);
    if (op->nresults) {
        int64_t num = n->next++;
        for (uint32_t i = 0; i < op->nresults; i++)
            map_put(n, op->results ? op->results[i] : NULL, num);
    }
    for (uint32_t i = 0; i < op->nregions && op->regions; i++)
        if (op->regions[i])
            number_region(n, op->regions[i], depth + 1);
}

static void number_region(ir_namer *n, const ir_region *r, int depth) {
    if (depth > 10000)
        return; /* a cyclic region structure: leave the rest unnamed */
    for (uint32_t i = 0; i < r->nargs && r->args; i++)
        map_put(n, r->args[i], n->next++);
    for (const ir_op *op = r->first; op; op = op->next)
        number_op(n, op, depth);
}

void ir_namer_init(ir_namer *n, const ir_kernel *k) {
    memset(n, 0, sizeof *n);
    n->k = k;
    if (!k || !k->body)
        return;
    const ir_region *body = k->body;
    for (uint32_t i = 0; i < body->nargs && body->args; i++) {
        if (i < k->nparams)
            map_put(n, body->args[i], -1 - (int64_t)i);
        else
            map_put(n, body->args[i], n->next++);
    }
    for (const ir_op *op = body->first; op; op = op->next)
        number_op(n, op, 0);
}

void ir_namer_free(ir_namer *n) {
    free(n->keys);
    free(n->vals);
    memset(n, 0, sizeof *n);
}

bool ir_namer_get(const ir_namer *n, const ir_value *v, int64_t *num, int *param) {
    int64_t x;
    if (!map_get(n, v, &x))
        return false;
    *param = x < 0 ? (int)(-1 - x) : -1;
    *num = x;
    return true;
}

int64_t ir_namer_op_start(const ir_namer *n, const ir_op *op) {
    int64_t x;
    return map_get(n, op, &x) ? x : -1;
}

bool ir_is_plain_name(const char *s, size_t len) {
    if (!s || len == 0 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.'))
            return false;
    }
    return true;
}

void ir_namer_put(kern_buf *b, const ir_namer *n, const ir_value *v) {
    int64_t num;
    int param;
    if (!v) {
        buf_puts(b, "%<null>");
        return;
    }
    if (!ir_namer_get(n, v, &num, &param)) {
        buf_puts(b, "%<undef>");
        return;
    }
    if (param >= 0) {
        const char *name = n->k->params[param].name;
        if (name && ir_is_plain_name(name, strlen(name)))
            buf_printf(b, "%%%s", name);
        else
            buf_printf(b, "%%_arg%d", param); /* no usable name: still a readable one */
        return;
    }
    if (v->def && v->def->nresults >= 2)
        buf_printf(b, "%%%lld#%u", (long long)num, v->index);
    else
        buf_printf(b, "%%%lld", (long long)num);
}
