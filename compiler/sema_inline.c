/* sema_inline.c - the limits of inlining (driver.h: KC_MAX_INLINE_DEPTH,
 * KC_MAX_INLINED_NODES), checked on the call graph once the recursion check has found no
 * cycle, so that `check` rejects what the lowering could not finish. Funcs are inlined at
 * every call, so each call copies the callee's body with its own calls inlined: a chain
 * `g(x) + g(2 * x)` doubles the code per level.
 *
 * Algorithm: a post-order walk of the call graph with an explicit stack (10^5 chained
 * funcs must not overflow the C stack) computes per item its inline depth (1 + that of
 * the deepest callee) and its inlined size (its own statements and expressions, counted
 * by sema, plus the inlined size of the callee of every call site), saturating just past
 * 2^62, and its nesting (the deepest statement or expression of its own body, or the
 * nesting at a call plus the callee's). A kernel whose chain of calls is deeper than the limit, whose calls add
 * more nodes than the limit, or whose inlined code nests deeper than the limit, is an error at its first call on the way. Linear in items
 * plus call sites. */
#include <stdlib.h>

#include "../common/util.h"
#include "driver.h"
#include "sema.h"

#define SATURATE ((int64_t)1 << 62) /* sizes stop growing here, far past the limit */

typedef struct walk {
    fe_sema *s;
    int *depth;    /* per item: 1 + the longest chain of calls below (0: not computed) */
    int64_t *size; /* per item: its nodes with every call inlined (saturating) */
    int *via;      /* per item: the call site (index in sites) of its deepest callee */
    int *nest;     /* per item: its deepest nesting with every call inlined */
    int *nest_via; /* per item: the call site that gives it (-1: its own code) */
    int *stack, *next;
} walk;

static int64_t sat_add(int64_t a, int64_t b) { return a + b > SATURATE ? SATURATE : a + b; }

static int callee(const walk *w, int i, int site) {
    const fe_expr *call = w->s->info[i].sites.data[site];
    return fe_sema_item_index(w->s, call->call.func);
}

static void compute(walk *w, int root) {
    fe_sema *s = w->s;
    int sp = 0;
    w->stack[sp] = root;
    w->next[sp++] = 0;
    while (sp > 0) {
        int i = w->stack[sp - 1];
        int nsites = s->info[i].sites.len;
        if (w->next[sp - 1] < nsites) {
            int j = callee(w, i, w->next[sp - 1]++);
            if (w->depth[j] == 0) { /* the graph has no cycle: j is not on the stack */
                w->stack[sp] = j;
                w->next[sp++] = 0;
            }
            continue;
        }
        int depth = 1, via = -1, nest = s->info[i].max_depth, nest_via = -1;
        int64_t size = s->info[i].nodes;
        for (int c = 0; c < nsites; c++) {
            int j = callee(w, i, c);
            if (w->depth[j] + 1 > depth) {
                depth = w->depth[j] + 1;
                via = c;
            }
            size = sat_add(size, w->size[j]);
            int n = s->info[i].site_depth[c] + w->nest[j];
            if (n > nest) {
                nest = n > KC_MAX_NESTING * 2 ? KC_MAX_NESTING * 2 : n;
                nest_via = c;
            }
        }
        w->depth[i] = depth;
        w->via[i] = via;
        w->size[i] = size;
        w->nest[i] = nest;
        w->nest_via[i] = nest_via;
        sp--;
    }
}

static void report_depth(walk *w, int k) {
    fe_sema *s = w->s;
    kern_buf chain = {0};
    buf_printf(&chain, "%s", s->file->items[k]->name);
    int i = k, shown = 0;
    while (w->via[i] >= 0) {
        i = callee(w, i, w->via[i]);
        if (shown++ < 6)
            buf_printf(&chain, " -> %s", s->file->items[i]->name);
    }
    if (shown > 6)
        buf_printf(&chain, " -> ... (%d more)", shown - 6);
    const fe_expr *first = s->info[k].sites.data[w->via[k]];
    fe_sema_error(s, first->call.name_loc,
                  "calls nested %d deep once inlined (%s), more than the limit of %d; funcs "
                  "are inlined at every call",
                  w->depth[k] - 1, chain.data, KC_MAX_INLINE_DEPTH);
    buf_free(&chain);
}

static void report_size(walk *w, int k) {
    fe_sema *s = w->s;
    int biggest = 0;
    for (int c = 1; c < s->info[k].sites.len; c++)
        if (w->size[callee(w, k, c)] > w->size[callee(w, k, biggest)])
            biggest = c;
    const fe_expr *call = s->info[k].sites.data[biggest];
    int64_t n = w->size[callee(w, k, biggest)];
    fe_sema_error(s, call->call.name_loc,
                  "inlining the funcs that kernel '%s' calls would add more than %d statements "
                  "and expressions (this call of '%s' alone adds %s%lld); funcs are inlined at "
                  "every call, so a func that calls another twice doubles per level",
                  s->file->items[k]->name, KC_MAX_INLINED_NODES, call->call.func->name,
                  n >= SATURATE ? "more than " : "", (long long)n);
}

static void report_nesting(walk *w, int k) {
    fe_sema *s = w->s;
    const fe_expr *call = s->info[k].sites.data[w->nest_via[k]];
    fe_sema_error(s, call->call.name_loc,
                  "with its funcs inlined, kernel '%s' nests statements and expressions %s%d "
                  "levels deep, more than the limit of %d (this call leads there); funcs are "
                  "inlined at every call, so their nesting adds up",
                  s->file->items[k]->name, w->nest[k] >= 2 * KC_MAX_NESTING ? "over " : "",
                  w->nest[k], KC_MAX_NESTING);
}

void fe_sema_check_inlining(fe_sema *s) {
    int n = s->file->nitems;
    size_t cnt = n > 0 ? (size_t)n : 1;
    walk w = {s,
              calloc(cnt, sizeof(int)),
              calloc(cnt, sizeof(int64_t)),
              calloc(cnt, sizeof(int)),
              calloc(cnt, sizeof(int)),
              calloc(cnt, sizeof(int)),
              calloc(cnt, sizeof(int)),
              calloc(cnt, sizeof(int))};
    if (!w.depth || !w.size || !w.via || !w.nest || !w.nest_via || !w.stack || !w.next)
        kern_oom(cnt * sizeof(int64_t));
    for (int k = 0; k < n; k++) {
        const fe_item *it = s->file->items[k];
        if (!it || it->kind != IT_KERNEL || s->info[k].sites.len == 0)
            continue;
        compute(&w, k);
        int64_t added = 0;
        for (int c = 0; c < s->info[k].sites.len; c++)
            added = sat_add(added, w.size[callee(&w, k, c)]);
        if (w.depth[k] - 1 > KC_MAX_INLINE_DEPTH)
            report_depth(&w, k);
        else if (added > KC_MAX_INLINED_NODES)
            report_size(&w, k);
        else if (w.nest[k] > KC_MAX_NESTING && w.nest_via[k] >= 0)
            report_nesting(&w, k);
    }
    free(w.depth);
    free(w.size);
    free(w.via);
    free(w.nest);
    free(w.nest_via);
    free(w.stack);
    free(w.next);
}
