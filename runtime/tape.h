/* tape.h - the tape's records, shared by tape.c (recording, backward) and tape_save.c (the
 * ranges a reverse tape saves so that each K.grad reads what K read). Internal. */
#ifndef KERN_RT_TAPE_H
#define KERN_RT_TAPE_H

#include "rt.h"

/* Elements [lo, hi) (row-major element indices) of buffer b: what a launch may read or
 * write of one argument, the span from the first to the last element of the box its
 * access line gives (runtime/meta.h). */
typedef struct tape_span {
    kern_buffer *b;
    int64_t lo, hi;
    int param; /* the kernel's parameter (a host step's: its buffer index) */
} tape_span;

/* Elements [lo, hi) of b as they were before a launch wrote them, in copy (a buffer of the
 * tape's, of b's dtype, hi - lo elements). */
typedef struct tape_save {
    kern_buffer *b, *copy;
    int64_t lo, hi;
    int64_t bytes; /* copy's */
} tape_save;

typedef struct tape_grad {
    kern_buffer *primal, *grad; /* grad: the adjoint, or on a forward tape the tangent */
    bool owned;                 /* created by the tape */
} tape_grad;

typedef struct tape_record {
    kern_kernel *k; /* NULL for a host step */
    kern_arg *args; /* a host step's: its declared buffers */
    int nargs;
    kern_buffer **scalar_grads;     /* per parameter: the scalar's adjoint (forward: tangent) */
    kern_tape_backward_fn backward; /* a host step's */
    void *user;
    void (*free_user)(void *user);
    tape_span *reads; /* reverse tapes: what the record read, which later launches save */
    int nreads;
    tape_save *saves; /* reverse tapes: what the launch overwrote of earlier records' reads */
    int nsaves;
} tape_record;

struct kern_tape {
    rt_list link; /* in the context's list of tapes */
    kern_context *ctx;
    tape_record *recs;
    int nrecs, caprecs;
    tape_grad *grads;
    int ngrads, capgrads;
    bool forward;        /* launches run K.jvp; grads holds tangents */
    bool ran;            /* backward has run over the records (until zero or clear) */
    bool ran_once;       /* backward has run since the last clear: no more records */
    bool restored;       /* a backward pass put saves back: the arrays no longer hold the
                            state the records left, so backward cannot run again */
    bool running;        /* backward is running (a host step's callback may be on the stack) */
    int64_t saved_bytes; /* the bytes of the records' saves */
};

bool rt_tape_buffer_alive(kern_context *ctx, const kern_buffer *b);

/* The spans of the array arguments of a launch of k: what it may read (write false) or
 * write, in *out (malloc'd, *n of them; NULL and 0 when there are none). False, with no
 * spans, when the arguments do not match k's parameters (kern_launch then refuses them);
 * KERN_ERR_OUT_OF_MEMORY is reported as false with *n = -1. */
bool rt_tape_spans(const kern_kernel *k, const kern_arg *args, int nargs, bool write,
                   tape_span **out, int *n);
/* The spans of a host step: every buffer whole. NULL when host memory runs out. */
tape_span *rt_tape_whole_spans(kern_buffer *const *buffers, int n);
/* Before a launch of k that writes `writes`: saves what they overwrite of the reads of
 * t's records, into *out (*n saves), within the adstack budget. On failure nothing is
 * kept, and the message names the kernels, the parameter, the bytes and the budget. */
kern_status rt_tape_save(kern_tape *t, const kern_kernel *k, const tape_span *writes, int nwrites,
                         tape_save **out, int *n);
/* Puts rec's saves back into their buffers, newest first, and releases them. */
kern_status rt_tape_restore(kern_tape *t, tape_record *rec);
/* Releases saves (without putting them back) and frees the array. */
void rt_tape_drop(kern_tape *t, tape_save *saves, int n);

#endif
