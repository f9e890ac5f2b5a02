/* progress.h - what a long `kernc run` is doing, on standard error (docs/cli.md,
 * "Progress"): after a delay (1 s), once a second, the phase (compiling, running, the
 * gradient's backward pass) or the step of a --steps loop with the time left. On a terminal
 * it is one line, rewritten in place and erased at the end; elsewhere ($KERNC_PROGRESS)
 * one line per report and a last line when it ends. A thread of its own writes the
 * reports, so a single long launch or compile is reported too. */
#ifndef KERN_KERNC_PROGRESS_H
#define KERN_KERNC_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct kernc_progress kernc_progress;

/* How progress is reported: delay < 0 never; else after delay seconds, rewriting one line
 * when terminal is true, one line per report when it is false. */
typedef struct kernc_progress_mode {
    double delay;
    bool terminal;
} kernc_progress_mode;

/* The mode of standard error: $KERNC_PROGRESS ("off", or a delay in seconds, which reports
 * even when standard error is not a terminal), else 1 s on a terminal and never
 * elsewhere. False with *bad the variable's value when it is neither. */
bool kernc_progress_mode_from_env(kernc_progress_mode *m, const char **bad);

/* Starts reporting for what ("kernc run: simulate") in phase ("compiling"); NULL when m
 * says never (every function below takes NULL and does nothing). */
kernc_progress *kernc_progress_start(const kernc_progress_mode *m, const char *what,
                                     const char *phase);
/* A new phase (a string that outlives p), which ends a step loop; it resumes the reports
 * after a pause. */
void kernc_progress_phase(kernc_progress *p, const char *phase);
/* A --steps loop of total launches, done of them finished; the next has its step argument
 * arg (a string that outlives p) = value. Resumes the reports after a pause. */
void kernc_progress_step(kernc_progress *p, int64_t done, int64_t total, const char *arg,
                         int64_t value);
/* Erases the line and holds the reports until the next phase, so that messages printed
 * meanwhile stand on lines of their own. */
void kernc_progress_pause(kernc_progress *p);
/* Stops the reports and frees p: a terminal's line is erased; elsewhere, when anything was
 * reported, a last line says how long it took. */
void kernc_progress_stop(kernc_progress *p);

#endif
