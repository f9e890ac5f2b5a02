/* pool.h - a persistent pool of worker threads that runs index ranges in chunks.
 *
 * rt_pool_run(p, count, chunk, fn, user) calls fn(user, worker, begin, end) on consecutive chunks
 * [begin, end) of [0, count), each of at most `chunk` indices, claimed by the workers and
 * the calling thread from one atomic counter, and returns when every chunk has finished
 * (a barrier: a later run never overlaps an earlier one). Every index is covered by
 * exactly one call. A pool of n threads has n - 1 workers; the caller is the n-th.
 * `worker` says which thread makes the call: 0 for the caller, 1..n-1 for the workers,
 * so per-thread scratch (the adstack heap's slots) can be indexed by it: two calls with
 * the same worker index never overlap in time.
 *
 * Workers spin briefly on the job counter before sleeping on a condition variable, so
 * back-to-back runs (the tasks of a kernel) do not pay a wake-up each. One thread at a
 * time may call rt_pool_run. */
#ifndef KERN_RT_POOL_H
#define KERN_RT_POOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct rt_pool rt_pool;
typedef void (*rt_range_fn)(void *user, int worker, int64_t begin, int64_t end);

/* threads >= 1. NULL with a message when a thread cannot be started. */
rt_pool *rt_pool_create(int threads, char *err, size_t errlen);
void rt_pool_destroy(rt_pool *p);
int rt_pool_threads(const rt_pool *p);
/* chunk >= 1; count >= 0 (0 calls nothing). */
void rt_pool_run(rt_pool *p, int64_t count, int64_t chunk, rt_range_fn fn, void *user);
/* The chunk size the CPU device uses: about 8 chunks per thread, at least 1. */
int64_t rt_pool_chunk(int64_t count, int threads);

#endif
