/* pool.c - the worker pool (see pool.h).
 *
 * A run publishes a job: its parameters go into one of two slots (by the parity of the
 * job's generation), then one 64-bit word `state` = generation << 32 | next chunk index is
 * set, then the generation is announced (spinning workers see it at once, sleeping ones
 * are woken through the `wake` condition). Everyone, the caller included, claims chunks by
 * compare-and-swap on `state`, which fails as soon as the generation moved on, so a worker
 * that wakes late can never take a chunk of a later job with the parameters of an earlier
 * one; the parameters it read are used only after a claim with the same generation has
 * succeeded, and the job cannot end (nor its slot be reused two jobs later) while one of
 * its chunks is unfinished. Completion is counted in items: the caller returns when
 * `done` reaches the count, spinning a little and then waiting on the `done_cv`
 * condition, signalled by whoever finishes the last chunk. The caller never waits for a
 * worker that has not taken part, so a descheduled worker (an oversubscribed machine)
 * does not hold up a run that the others can finish. */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SPIN_ITERS = 4000 };

typedef struct pool_job {
    _Atomic(rt_range_fn) fn;
    _Atomic(void *) user;
    atomic_int_fast64_t count, chunk, nchunks;
} pool_job;

typedef struct pool_worker {
    struct rt_pool *pool;
    int index; /* 1..nthreads-1 */
} pool_worker;

struct rt_pool {
    int nthreads;
    pool_worker *wargs; /* per worker thread */
    int nworkers;       /* started worker threads (nthreads - 1 when all started) */
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t wake;    /* a new generation, or stop */
    pthread_cond_t done_cv; /* done reached the count */
    atomic_uint_fast32_t gen;
    atomic_bool stop;
    atomic_uint_fast64_t state; /* gen << 32 | next unclaimed chunk */
    atomic_int_fast64_t done;   /* items finished in the current job */
    atomic_bool waiting;        /* the caller sleeps on done_cv */
    pool_job jobs[2];
    uint32_t last_gen; /* the caller's: generation of the latest job */
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Runs chunks of job `g` until none is left or the pool moved on to another job. */
static void run_chunks(rt_pool *p, uint32_t g, int worker) {
    const pool_job *j = &p->jobs[g & 1];
    rt_range_fn fn = atomic_load_explicit(&j->fn, memory_order_relaxed);
    void *user = atomic_load_explicit(&j->user, memory_order_relaxed);
    int64_t count = atomic_load_explicit(&j->count, memory_order_relaxed);
    int64_t chunk = atomic_load_explicit(&j->chunk, memory_order_relaxed);
    int64_t nchunks = atomic_load_explicit(&j->nchunks, memory_order_relaxed);
    uint64_t s = atomic_load_explicit(&p->state, memory_order_acquire);
    for (;;) {
        if ((uint32_t)(s >> 32) != g || (int64_t)(uint32_t)s >= nchunks)
            return;
        if (!atomic_compare_exchange_weak_explicit(&p->state, &s, s + 1, memory_order_acquire,
                                                   memory_order_acquire))
            continue;
        int64_t b = (int64_t)(uint32_t)s * chunk;
        int64_t e = count - b < chunk ? count : b + chunk;
        fn(user, worker, b, e);
        /* seq_cst with the load of `waiting`, against the caller's store of `waiting` and
         * load of `done` (either it sees the count or we see it waiting) */
        int64_t was = atomic_fetch_add(&p->done, e - b);
        if (was + (e - b) == count && atomic_load(&p->waiting)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done_cv);
            pthread_mutex_unlock(&p->mu);
        }
        s = atomic_load_explicit(&p->state, memory_order_acquire);
    }
}

static void *worker_main(void *arg) {
    const pool_worker *w = arg;
    rt_pool *p = w->pool;
    uint32_t seen = 0;
    for (;;) {
        uint32_t g = (uint32_t)atomic_load_explicit(&p->gen, memory_order_acquire);
        for (int i = 0; g == seen && i < SPIN_ITERS; i++) {
            if (atomic_load_explicit(&p->stop, memory_order_relaxed))
                break;
            cpu_relax();
            g = (uint32_t)atomic_load_explicit(&p->gen, memory_order_acquire);
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while ((g = (uint32_t)atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
                   !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (g == seen) /* woken for stop with no new job */
            return NULL;
        seen = g;
        run_chunks(p, g, w->index);
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
    pthread_cond_init(&p->done_cv, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->stop, false);
    atomic_init(&p->state, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->waiting, false);
    for (int i = 0; i < 2; i++) {
        atomic_init(&p->jobs[i].fn, NULL);
        atomic_init(&p->jobs[i].user, NULL);
        atomic_init(&p->jobs[i].count, 0);
        atomic_init(&p->jobs[i].chunk, 1);
        atomic_init(&p->jobs[i].nchunks, 0);
    }
    if (threads > 1) {
        p->workers = calloc((size_t)threads - 1, sizeof *p->workers);
        p->wargs = calloc((size_t)threads - 1, sizeof *p->wargs);
        if (!p->workers || !p->wargs) {
            snprintf(err, errlen, "out of host memory for the thread pool");
            rt_pool_destroy(p);
            return NULL;
        }
    }
    for (int i = 0; i < threads - 1; i++) {
        p->wargs[i] = (pool_worker){p, i + 1};
        int rc = pthread_create(&p->workers[i], NULL, worker_main, &p->wargs[i]);
        if (rc != 0) {
            snprintf(err, errlen, "cannot start worker thread %d of %d: %s", i + 1, threads - 1,
                     strerror(rc));
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
    free(p->wargs);
    pthread_cond_destroy(&p->done_cv);
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
    int64_t nchunks = count / chunk + (count % chunk != 0);
    /* one chunk, no workers, or more chunks than the state word counts: no hand-off */
    if (p->nworkers == 0 || nchunks == 1 || nchunks > (int64_t)UINT32_MAX) {
        for (int64_t b = 0; b < count; b += chunk)
            fn(user, 0, b, count - b < chunk ? count : b + chunk);
        return;
    }
    uint32_t g = ++p->last_gen;
    if (g == 0) /* 0 is the workers' "seen nothing yet" */
        g = ++p->last_gen;
    pool_job *j = &p->jobs[g & 1];
    atomic_store_explicit(&j->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&j->user, user, memory_order_relaxed);
    atomic_store_explicit(&j->count, count, memory_order_relaxed);
    atomic_store_explicit(&j->chunk, chunk, memory_order_relaxed);
    atomic_store_explicit(&j->nchunks, nchunks, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->state, (uint64_t)g << 32, memory_order_release);
    pthread_mutex_lock(&p->mu);
    atomic_store_explicit(&p->gen, g, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);

    run_chunks(p, g, 0);

    for (int i = 0; i < SPIN_ITERS; i++) {
        if (atomic_load_explicit(&p->done, memory_order_acquire) == count)
            return;
        cpu_relax();
    }
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->waiting, true);
    while (atomic_load(&p->done) != count)
        pthread_cond_wait(&p->done_cv, &p->mu);
    atomic_store(&p->waiting, false);
    pthread_mutex_unlock(&p->mu);
}
