/* retire.c - the retirement queue (see retire.h). A small array, oldest first: polling
 * scans it once and keeps the order of what stays. */
#include "retire.h"

#include <stdlib.h>

/* Frees a retired entry: the device's memory, or the owner's release of wrapped memory. */
static void drop(rt_device *d, const rt_retired *r) {
    if (r->release)
        r->release(r->user);
    else
        d->ops->free(d, r->mem);
}

void rt_retire_init(rt_retire_queue *q, int depth) {
    q->items = NULL;
    q->len = q->cap = 0;
    q->depth = depth < 1 ? 1 : depth;
    q->waits = 0;
}

void rt_retire_poll(rt_retire_queue *q, rt_device *d) {
    if (q->len == 0)
        return;
    uint64_t passed = d->ops->poll(d);
    int n = 0;
    for (int i = 0; i < q->len; i++) {
        if (q->items[i].point <= passed)
            drop(d, &q->items[i]);
        else
            q->items[n++] = q->items[i];
    }
    q->len = n;
}

void rt_retire_drain(rt_retire_queue *q, rt_device *d) {
    for (int i = 0; i < q->len; i++)
        drop(d, &q->items[i]);
    q->len = 0;
}

void rt_retire_fini(rt_retire_queue *q, rt_device *d) {
    rt_retire_drain(q, d);
    free(q->items);
    q->items = NULL;
    q->cap = 0;
}

kern_status rt_retire_push(rt_retire_queue *q, rt_device *d, void *mem, uint64_t point, char *err,
                           size_t errlen) {
    return rt_retire_push_entry(q, d, (rt_retired){mem, point, NULL, NULL}, err, errlen);
}

kern_status rt_retire_push_entry(rt_retire_queue *q, rt_device *d, rt_retired e, char *err,
                                 size_t errlen) {
    uint64_t point = e.point;
    if (point <= d->ops->poll(d)) {
        drop(d, &e);
        return KERN_OK;
    }
    if (q->len == q->cap) {
        /* the queue holds at most depth + 1 entries, so this grows only up to that */
        int cap = q->cap ? q->cap * 2 : 8;
        rt_retired *items = realloc(q->items, (size_t)cap * sizeof *items);
        if (!items) {
            /* no room to remember it: wait for it instead */
            kern_status s = d->ops->wait(d, point, err, errlen);
            drop(d, &e);
            return s;
        }
        q->items = items;
        q->cap = cap;
    }
    q->items[q->len++] = e;
    kern_status s = KERN_OK;
    if (q->len > q->depth) {
        q->waits++;
        s = d->ops->wait(d, q->items[0].point, err, errlen);
        if (s != KERN_OK) { /* the device is gone: nothing will use the oldest any more */
            drop(d, &q->items[0]);
            for (int i = 1; i < q->len; i++)
                q->items[i - 1] = q->items[i];
            q->len--;
        }
        rt_retire_poll(q, d);
    }
    return s;
}
