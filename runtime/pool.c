/* pool.c - the worker pool (see pool.h).
 *
 * A run publishes a job (fn, user, count, chunk), resets the shared chunk counter and the
 * number of workers still busy, and bumps the generation under the mutex. Each worker
 * notices the new generation (spinning a little, then on the `wake` condition), claims
 * chunks with an atomic fetch-add until the range is exhausted and checks out; the last
 * one to check out signals `done`. The caller claims chunks too, then waits until every
 * worker has checked out, so the job may not change under a late worker. */
#include "pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SPIN_ITERS = 4000 };

struct rt_pool {
    int nthreads;
    int nworkers; /* started worker threads (nthreads - 1 when all started) */
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* a new generation or stop */
    pthread_cond_t done; /* busy reached 0 */
    atomic_uint_fast64_t gen;
    atomic_bool stop;
    /* the current job */
    rt_range_fn fn;
    void *user;
    int64_t count, chunk;
    atomic_int_fast64_t next; /* first unclaimed index */
    atomic_int busy;          /* workers that have not checked out of the current job */
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void run_chunks(rt_pool *p) {
    for (;;) {
        int64_t b = atomic_fetch_add_explicit(&p->next, p->chunk, memory_order_relaxed);
        if (b >= p->count)
            break;
        int64_t e = p->count - b < p->chunk ? p->count : b + p->chunk;
        p->fn(p->user, b, e);
    }
}

static void *worker_main(void *arg) {
    rt_pool *p = arg;
    uint64_t seen = 0;
    for (;;) {
        uint64_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
        for (int i = 0; g == seen && i < SPIN_ITERS; i++) {
            if (atomic_load_explicit(&p->stop, memory_order_relaxed))
                break;
            cpu_relax();
            g = atomic_load_explicit(&p->gen, memory_order_acquire);
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
                   !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (g == seen) /* woken for stop with no new job */
            return NULL;
        seen = g;
        run_chunks(p);
        if (atomic_fetch_sub_explicit(&p->busy, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

rt_pool *rt_pool_create(int threads, char *err, size_t errlen) {
    if (threads < 1) {
        snprintf(err, errlen, "thread count %d must be at least 1", threads);
        return NULL;
    }
    rt_pool *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of host memory for the thread pool");
        return NULL;
    }
    p->nthreads = threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->stop, false);
    atomic_init(&p->next, 0);
    atomic_init(&p->busy, 0);
    if (threads > 1) {
        p->workers = calloc((size_t)threads - 1, sizeof *p->workers);
        if (!p->workers) {
            snprintf(err, errlen, "out of host memory for the thread pool");
            rt_pool_destroy(p);
            return NULL;
        }
    }
    for (int i = 0; i < threads - 1; i++) {
        int rc = pthread_create(&p->workers[i], NULL, worker_main, p);
        if (rc != 0) {
            snprintf(err, errlen, "cannot start worker thread %d of %d: %s", i + 1,
                     threads - 1, strerror(rc));
            rt_pool_destroy(p);
            return NULL;
        }
        p->nworkers++;
    }
    return p;
}

void rt_pool_destroy(rt_pool *p) {
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nworkers; i++)
        pthread_join(p->workers[i], NULL);
    free(p->workers);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int rt_pool_threads(const rt_pool *p) { return p->nthreads; }

int64_t rt_pool_chunk(int64_t count, int threads) {
    int64_t pieces = (int64_t)threads * 8;
    int64_t c = count / pieces;
    return c < 1 ? 1 : c;
}

void rt_pool_run(rt_pool *p, int64_t count, int64_t chunk, rt_range_fn fn, void *user) {
    if (count <= 0)
        return;
    if (chunk < 1)
        chunk = 1;
    if (p->nworkers == 0 || count <= chunk) { /* one chunk: no hand-off */
        for (int64_t b = 0; b < count; b += chunk)
            fn(user, b, count - b < chunk ? count : b + chunk);
        return;
    }
    p->fn = fn;
    p->user = user;
    p->count = count;
    p->chunk = chunk;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->busy, p->nworkers, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);

    run_chunks(p);

    for (int i = 0; i < SPIN_ITERS; i++) {
        if (atomic_load_explicit(&p->busy, memory_order_acquire) == 0)
            return;
        cpu_relax();
    }
    pthread_mutex_lock(&p->mu);
    while (atomic_load_explicit(&p->busy, memory_order_acquire) != 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
