/* retire.h - the retirement queue: device memory released while in flight.
 *
 * Runtime contracts 5 and 6 (docs/runtime-contracts.md): memory that a submission in
 * flight may still use (a buffer the user released right after a launch, a superseded heap) is not
 * freed but retired with the completion point of the last submission that used it, and
 * freed once that point has passed. rt_retire_poll frees what has passed without blocking
 * (the runtime calls it at each launch); rt_retire_drain, after a full drain of the device,
 * frees everything; and when a push makes the queue longer than its depth, the runtime
 * waits for the oldest entry only (then polls). Entries need not be pushed in the order of
 * their points. */
#ifndef KERN_RT_RETIRE_H
#define KERN_RT_RETIRE_H

#include <stdint.h>

#include "device.h"

enum { RT_RETIRE_DEPTH = 64 };

typedef struct rt_retired {
    void *mem;
    uint64_t point;
    void (*release)(void *user); /* wrapped memory (kern_buffer_wrap): its owner's release, */
    void *user;                  /* called instead of the device's free; NULL otherwise */
} rt_retired;

typedef struct rt_retire_queue {
    rt_retired *items; /* oldest first */
    int len, cap;
    int depth;      /* a push beyond this many entries waits for the oldest */
    uint64_t waits; /* statistics: blocking waits made by pushes */
} rt_retire_queue;

void rt_retire_init(rt_retire_queue *q, int depth);
/* Frees whatever is left without waiting: call only after the device is idle. */
void rt_retire_fini(rt_retire_queue *q, rt_device *d);
/* Retires mem until `point` has passed; frees it at once when it already has. Returns
 * the status of a blocking wait (the memory is freed even if the wait failed: a failed
 * wait means the device is lost). */
kern_status rt_retire_push(rt_retire_queue *q, rt_device *d, void *mem, uint64_t point, char *err,
                           size_t errlen);
/* rt_retire_push for any entry: wrapped memory is released by e.release(e.user). */
kern_status rt_retire_push_entry(rt_retire_queue *q, rt_device *d, rt_retired e, char *err,
                                 size_t errlen);
/* Frees every entry whose point has passed; never blocks. */
void rt_retire_poll(rt_retire_queue *q, rt_device *d);
/* Frees every entry; the caller has synchronized the device. */
void rt_retire_drain(rt_retire_queue *q, rt_device *d);

#endif
