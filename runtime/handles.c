/* handles.c - the runtime's checked mode (KERN_RUNTIME_CHECKS=1; docs/runtime.md
 * "Checked mode"): released handles and one context used from two threads at once are
 * detected and reported instead of corrupting memory.
 *
 * Handles are pointers, so a released one cannot be told from a live one by looking at it
 * (its memory is freed, and may hold a new object). In checked mode every handle the
 * runtime hands out is entered in a registry (a hash set of pointers with their kind and
 * context) and marked released when released; the API checks its handle arguments against
 * the registry without dereferencing them. Released objects' memory goes to a quarantine of
 * the last RT_QUARANTINE releases before it is freed, so that a new object cannot take the
 * address of a recently released one (the way AddressSanitizer finds use after free). The
 * quarantine is emptied when the last context is released. Off checked mode, every check
 * is one test of a global flag. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

enum { RT_QUARANTINE = 4096 };

typedef struct entry {
    const void *p; /* NULL: empty slot; TOMBSTONE: removed */
    const kern_context *ctx;
    unsigned char kind;
    bool released;
} entry;

#define TOMBSTONE ((const void *)1)

/* Process-wide on purpose, the one registry of the runtime: a handle may reach any call
 * (a buffer of one context passed with another, a pointer that never was a handle), so
 * it is looked up in one table of every context's handles, under one lock. The mode is
 * decided once per process, before the first handle exists (KERN_RUNTIME_CHECKS, read by
 * the pthread_once below: a context created later cannot turn it on for handles that
 * were never entered). */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool checks;
static entry *table;
static size_t cap, used; /* used counts live, released and tombstone slots */
static void *quarantine[RT_QUARANTINE];
static int qnext, qcount;
static int live_contexts;

static void init(void) {
    const char *e = getenv("KERN_RUNTIME_CHECKS");
    checks = e && *e && strcmp(e, "0") != 0;
}

bool rt_checks_enabled(void) {
    pthread_once(&once, init);
    return checks;
}

static const char *const kind_names[] = {"",       "context", "buffer", "module",
                                         "kernel", "graph",   "tape"};

const char *rt_handle_kind_name(int kind) {
    return kind > 0 && kind < (int)(sizeof kind_names / sizeof *kind_names) ? kind_names[kind]
                                                                            : "handle";
}

static size_t slot_of(const void *p) {
    uintptr_t h = (uintptr_t)p;
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 7);
}

static entry *find(const void *p) {
    if (!cap)
        return NULL;
    for (size_t i = slot_of(p) & (cap - 1), n = 0; n < cap; i = (i + 1) & (cap - 1), n++) {
        if (table[i].p == NULL)
            return NULL;
        if (table[i].p == p)
            return &table[i];
    }
    return NULL;
}

static void insert(const void *p, int kind, const kern_context *ctx);

static void grow(void) {
    entry *old = table;
    size_t ocap = cap;
    cap = cap ? cap * 2 : 1024;
    table = calloc(cap, sizeof *table);
    if (!table) { /* out of memory: checks stop rather than fail the program */
        table = old;
        cap = ocap;
        checks = false;
        return;
    }
    used = 0;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].p && old[i].p != TOMBSTONE) {
            insert(old[i].p, old[i].kind, old[i].ctx);
            entry *e = find(old[i].p);
            e->released = old[i].released;
        }
    free(old);
}

static void insert(const void *p, int kind, const kern_context *ctx) {
    if ((used + 1) * 2 > cap)
        grow();
    if (!cap)
        return;
    entry *e = find(p);
    if (!e) {
        size_t i = slot_of(p) & (cap - 1);
        while (table[i].p && table[i].p != TOMBSTONE)
            i = (i + 1) & (cap - 1);
        if (!table[i].p)
            used++;
        e = &table[i];
    }
    *e = (entry){p, ctx, (unsigned char)kind, false};
}

void rt_handle_add(const void *p, int kind, const kern_context *ctx) {
    if (!rt_checks_enabled() || !p)
        return;
    pthread_mutex_lock(&lock);
    insert(p, kind, ctx);
    if (kind == RT_H_CONTEXT)
        live_contexts++;
    pthread_mutex_unlock(&lock);
}

void rt_handle_released(const void *p) {
    if (!rt_checks_enabled() || !p)
        return;
    pthread_mutex_lock(&lock);
    entry *e = find(p);
    if (e)
        e->released = true;
    pthread_mutex_unlock(&lock);
}

/* Frees the quarantine's oldest object; its entry leaves the registry. Under the lock. */
static void evict(int slot) {
    void *p = quarantine[slot];
    if (!p)
        return;
    entry *e = find(p);
    if (e)
        e->p = TOMBSTONE;
    free(p);
    quarantine[slot] = NULL;
    qcount--;
}

void rt_handle_free(void *p) {
    if (!p)
        return;
    if (!rt_checks_enabled()) {
        free(p);
        return;
    }
    pthread_mutex_lock(&lock);
    entry *e = find(p);
    if (!e) { /* never handed out (an object that failed to be made) */
        pthread_mutex_unlock(&lock);
        free(p);
        return;
    }
    e->released = true;
    evict(qnext);
    quarantine[qnext] = p;
    qnext = (qnext + 1) % RT_QUARANTINE;
    qcount++;
    if (e->kind == RT_H_CONTEXT && --live_contexts == 0) {
        /* the last context: nothing can be used any more, so nothing is kept */
        for (int i = 0; i < RT_QUARANTINE; i++)
            evict(i);
        free(table);
        table = NULL;
        cap = used = 0;
    }
    pthread_mutex_unlock(&lock);
}

bool rt_handle_check(const void *p, int kind, const char *fn) {
    if (!rt_checks_enabled() || !p)
        return true; /* NULL handles have their own errors */
    pthread_mutex_lock(&lock);
    entry *e = find(p);
    bool ok = e && e->kind == kind && !e->released;
    const kern_context *ctx = e ? e->ctx : NULL;
    bool ctx_live = false;
    if (!ok && ctx && ctx != p) {
        entry *c = find(ctx);
        ctx_live = c && !c->released;
    }
    char msg[RT_MSG_SIZE];
    if (!ok) {
        if (!e)
            snprintf(msg, sizeof msg,
                     "%s: not a %s that kern made (or released long ago) (KERN_RUNTIME_CHECKS)", fn,
                     rt_handle_kind_name(kind));
        else if (e->kind != kind)
            snprintf(msg, sizeof msg, "%s: a %s passed where a %s belongs (KERN_RUNTIME_CHECKS)",
                     fn, rt_handle_kind_name(e->kind), rt_handle_kind_name(kind));
        else
            snprintf(msg, sizeof msg, "%s: use of a released %s (KERN_RUNTIME_CHECKS)", fn,
                     rt_handle_kind_name(kind));
        /* the context that made it keeps the message when it is alive; stderr always, as
         * the caller may hold no live context to ask */
        if (ctx_live)
            snprintf(((kern_context *)ctx)->msg, RT_MSG_SIZE, "%s", msg);
        fprintf(stderr, "kern: error: %s\n", msg);
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

/* ---- one context, one thread at a time ---------------------------------------------- */

bool rt_enter(kern_context *ctx, const char *fn) {
    if (!rt_checks_enabled() || !ctx)
        return true;
    uintptr_t self = (uintptr_t)pthread_self();
    uintptr_t owner = 0;
    if (__atomic_compare_exchange_n(&ctx->owner, &owner, self, false, __ATOMIC_ACQUIRE,
                                    __ATOMIC_RELAXED) ||
        owner == self) {
        ctx->depth++;
        return true;
    }
    char msg[RT_MSG_SIZE];
    snprintf(msg, sizeof msg,
             "%s: the context is in use by another thread (a context is used by one thread at "
             "a time; KERN_RUNTIME_CHECKS)",
             fn);
    fprintf(stderr, "kern: error: %s\n", msg);
    return false;
}

void rt_leave(kern_context *ctx) {
    if (!rt_checks_enabled() || !ctx)
        return;
    if (--ctx->depth == 0)
        __atomic_store_n(&ctx->owner, 0, __ATOMIC_RELEASE);
}

bool rt_context_check(const kern_context *ctx, const char *fn) {
    return rt_handle_check(ctx, RT_H_CONTEXT, fn);
}
