/* progress.c - progress reports of kernc run (progress.h). A reporter thread sleeps on a
 * condition variable (the monotonic clock) until the next report or the end; the run's
 * thread only updates the phase and the step under the mutex. */
#include "progress.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/util.h"

struct kernc_progress {
    kernc_progress_mode mode;
    const char *what;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;           /* kernc_progress_stop was called */
    bool paused;         /* no reports until the next phase */
    bool shown;          /* a terminal line is on the screen */
    int reports;         /* reports written */
    const char *phase;   /* "compiling", "running", ... */
    int64_t step, steps; /* of a --steps loop (steps 0: none) */
    const char *arg;     /* its step argument's name */
    int64_t value;       /* the step argument of the next launch */
    int64_t last_steps;  /* the loop's length, for the last line */
    double t0, t_steps;  /* the start, and the start of the step loop (seconds) */
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

bool kernc_progress_mode_from_env(kernc_progress_mode *m, const char **bad) {
    const char *v = getenv("KERNC_PROGRESS");
    m->terminal = isatty(STDERR_FILENO);
    m->delay = m->terminal ? 1.0 : -1.0;
    if (!v || !*v)
        return true;
    if (!strcmp(v, "off")) {
        m->delay = -1;
        return true;
    }
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || *end || !(d >= 0) || d > 1e6) {
        *bad = v;
        return false;
    }
    m->delay = d;
    return true;
}

/* The report line; the caller holds the mutex. */
static void report(kernc_progress *p) {
    double t = now_s(), el = t - p->t0;
    char line[320];
    if (p->steps > 0) {
        double per = p->step > 0 ? (t - p->t_steps) / (double)p->step : 0;
        int n =
            snprintf(line, sizeof line, "%s: step %lld of %lld (%s = %lld), %.0f s", p->what,
                     (long long)p->step + 1, (long long)p->steps, p->arg, (long long)p->value, el);
        double left = per * (double)(p->steps - p->step);
        if (p->step > 0 && left >= 1 && n > 0 && (size_t)n < sizeof line)
            snprintf(line + n, sizeof line - (size_t)n, ", about %.0f s left", left);
    } else {
        snprintf(line, sizeof line, "%s: %s, %.0f s", p->what, p->phase, el);
    }
    if (p->mode.terminal)
        fprintf(stderr, "\r\033[K%s", line);
    else
        fprintf(stderr, "%s\n", line);
    p->shown = p->mode.terminal;
    p->reports++;
}

static void erase(kernc_progress *p) {
    if (p->shown)
        fputs("\r\033[K", stderr);
    p->shown = false;
}

static void *reporter(void *arg) {
    kernc_progress *p = arg;
    pthread_mutex_lock(&p->mu);
    double next = p->t0 + (p->mode.delay > 0 ? p->mode.delay : 1.0);
    while (!p->done) {
        double wait = next - now_s();
        if (wait > 0) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            double s = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + wait;
            ts.tv_sec = (time_t)s;
            ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
            pthread_cond_timedwait(&p->cv, &p->mu, &ts);
            continue; /* woken early, timed out or spuriously: look again */
        }
        if (!p->paused)
            report(p);
        next += 1.0;
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

kernc_progress *kernc_progress_start(const kernc_progress_mode *m, const char *what,
                                     const char *phase) {
    if (!m || m->delay < 0)
        return NULL;
    kernc_progress *p = kern_xmalloc(sizeof *p);
    memset(p, 0, sizeof *p);
    p->mode = *m;
    p->what = what;
    p->phase = phase;
    p->t0 = now_s();
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&p->mu, NULL);
    if (p->mode.delay == 0) /* the first report now, whatever the reporter's scheduling */
        report(p);
    if (pthread_create(&p->thread, NULL, reporter, p) != 0) { /* no reports, not an error */
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    return p;
}

void kernc_progress_phase(kernc_progress *p, const char *phase) {
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->phase = phase;
    p->steps = 0;
    p->paused = false;
    pthread_mutex_unlock(&p->mu);
}

void kernc_progress_step(kernc_progress *p, int64_t done, int64_t total, const char *arg,
                         int64_t value) {
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    if (done == 0 || p->steps != total)
        p->t_steps = now_s();
    p->step = done;
    p->steps = p->last_steps = total;
    p->arg = arg;
    p->value = value;
    p->paused = false;
    pthread_mutex_unlock(&p->mu);
}

void kernc_progress_pause(kernc_progress *p) {
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->paused = true;
    erase(p);
    pthread_mutex_unlock(&p->mu);
}

void kernc_progress_stop(kernc_progress *p) {
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->done = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    erase(p);
    char steps[48] = "";
    if (p->last_steps)
        snprintf(steps, sizeof steps, " (%lld steps)", (long long)p->last_steps);
    if (!p->mode.terminal && p->reports)
        fprintf(stderr, "%s: done in %.1f s%s\n", p->what, now_s() - p->t0, steps);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
