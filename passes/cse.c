/* cse.c - common subexpression elimination of pure ops (ir_opt_cse).
 *
 * What: a pure op (OPF_PURE, no regions: constants, arithmetic, comparisons, select,
 * casts, math, dim) that computes the same thing as an op available at its position is
 * removed and its result replaced by the earlier one. "The same thing" means: the same
 * opcode, the same operand values (for a commutative two-operand op, in either order),
 * the same imm (bit-exact, so the constants -0.0 and 0.0 stay apart) and attr, and the
 * same result types. Loads are not pure (a store may come between two of them) and are
 * never merged; dim is pure.
 *
 * Scoping follows the structured IR: walking a region in order, an op becomes available
 * to the rest of its region and to the regions nested in it; it is forgotten when its
 * region ends. So an op may be replaced by one defined earlier in the same region or in
 * an enclosing region, never by one in a sibling region (the other branch of an if, the
 * before/after regions of a while, an earlier task). The regions of a `custom` op are
 * isolated from above: they start with an empty table of their own.
 *
 * Algorithm: a scoped hash table (an array of entries chained per bucket; entries are
 * pushed in walk order and popped when a region ends, so each bucket's head is always its
 * newest live entry). A removed op's results are not replaced in the rest of the region
 * at once (the IR has no use lists, so that would walk the region once per removed op:
 * quadratic in straight-line code); they are recorded instead in an ir_subst (ir/ir.h),
 * and every op visited later has its operands rewritten before it is hashed. Every use of a value comes after its definition in the
 * walk (the rest of its region and the regions nested there), so each use is rewritten.
 * Linear in the number of ops.
 *
 * Where: ir_optimize()'s fixed-point loop, after fold and simplify. Requires a verified
 * module. Keeps valid: the verifier's invariants (the replacement dominates every use of
 * the replaced value). Never frees IR memory (the table is malloc'd scratch). */
#include <stdlib.h>
#include <string.h>

#include "opt_util.h"
#include "passes.h"

typedef struct entry {
    ir_op *op;
    uint64_t hash;
    int prev; /* previous entry in the same bucket, -1 at the end */
} entry;

typedef struct table {
    entry *entries;
    int len, cap;
    int *buckets; /* index of the newest entry of each bucket, -1 when empty */
    int nbuckets; /* a power of two */
} table;

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static uint64_t ptr_hash(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static bool commutative_pair(const ir_op *op) {
    return (ir_info(op->code)->flags & OPF_COMMUT) && op->noperands == 2;
}

static uint64_t op_hash(const ir_op *op) {
    uint64_t h = mix(op->code, op->attr);
    uint64_t imm;
    memcpy(&imm, &op->imm, sizeof imm);
    h = mix(h, imm);
    for (uint32_t i = 0; i < op->nresults; i++)
        h = mix(h, ptr_hash(op->results[i]->type));
    if (commutative_pair(op)) /* order-independent */
        return mix(h, ptr_hash(op->operands[0]) + ptr_hash(op->operands[1]));
    for (uint32_t i = 0; i < op->noperands; i++)
        h = mix(h, ptr_hash(op->operands[i]));
    return h;
}

static bool op_equal(const ir_op *a, const ir_op *b) {
    if (a->code != b->code || a->attr != b->attr || a->noperands != b->noperands ||
        a->nresults != b->nresults || memcmp(&a->imm, &b->imm, sizeof a->imm) != 0)
        return false;
    for (uint32_t i = 0; i < a->nresults; i++)
        if (a->results[i]->type != b->results[i]->type)
            return false;
    bool same = true;
    for (uint32_t i = 0; i < a->noperands && same; i++)
        same = a->operands[i] == b->operands[i];
    if (!same && commutative_pair(a))
        same = a->operands[0] == b->operands[1] && a->operands[1] == b->operands[0];
    return same;
}

static bool candidate(const ir_op *op) {
    return (ir_info(op->code)->flags & OPF_PURE) && op->nregions == 0 && op->nresults >= 1;
}

static void table_grow(table *t) {
    int n = t->nbuckets ? t->nbuckets * 2 : 256;
    free(t->buckets);
    t->buckets = kern_xmalloc(sizeof(int) * (size_t)n);
    t->nbuckets = n;
    for (int i = 0; i < n; i++)
        t->buckets[i] = -1;
    for (int i = 0; i < t->len; i++) { /* rechain in push order: heads stay newest */
        int b = (int)(t->entries[i].hash & (uint64_t)(n - 1));
        t->entries[i].prev = t->buckets[b];
        t->buckets[b] = i;
    }
}

static ir_op *table_find(const table *t, const ir_op *op, uint64_t h) {
    for (int i = t->buckets[h & (uint64_t)(t->nbuckets - 1)]; i >= 0; i = t->entries[i].prev)
        if (t->entries[i].hash == h && op_equal(t->entries[i].op, op))
            return t->entries[i].op;
    return NULL;
}

static void table_push(table *t, ir_op *op, uint64_t h) {
    if (t->len >= t->nbuckets)
        table_grow(t);
    if (t->len == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 256;
        t->entries = kern_xrealloc(t->entries, sizeof(entry) * (size_t)t->cap);
    }
    int b = (int)(h & (uint64_t)(t->nbuckets - 1));
    t->entries[t->len] = (entry){op, h, t->buckets[b]};
    t->buckets[b] = t->len++;
}

/* Forgets every entry pushed after `mark` (newest first, so bucket heads unwind). */
static void table_pop(table *t, int mark) {
    while (t->len > mark) {
        entry *e = &t->entries[--t->len];
        t->buckets[e->hash & (uint64_t)(t->nbuckets - 1)] = e->prev;
    }
}

static bool cse_region(table *t, ir_subst *rp, ir_region *r) {
    bool changed = false;
    int mark = t->len;
    ir_foreach_op_safe(op, tmp, r) {
        ir_subst_op(rp, op);
        if (op->code == IR_CUSTOM) { /* isolated regions: nothing from outside is available */
            table inner = {0};
            for (uint32_t i = 0; i < op->nregions; i++)
                changed |= cse_region(&inner, rp, op->regions[i]);
            free(inner.entries);
            free(inner.buckets);
        } else {
            for (uint32_t i = 0; i < op->nregions; i++)
                changed |= cse_region(t, rp, op->regions[i]);
        }
        if (!candidate(op))
            continue;
        uint64_t h = op_hash(op);
        ir_op *prev = t->nbuckets ? table_find(t, op, h) : NULL;
        if (prev) {
            for (uint32_t i = 0; i < op->nresults; i++)
                ir_subst_add(rp, op->results[i], prev->results[i]);
            ir_remove(op);
            changed = true;
        } else
            table_push(t, op, h);
    }
    table_pop(t, mark);
    return changed;
}

bool ir_opt_cse(ir_module *m) {
    bool changed = false;
    table t = {0};
    ir_subst rp = {0};
    ir_foreach_kernel(k, m) {
        ir_subst_begin(&rp, k);
        changed |= cse_region(&t, &rp, k->body);
        kern_assert(t.len == 0);
    }
    ir_subst_free(&rp);
    free(t.entries);
    free(t.buckets);
    return changed;
}
