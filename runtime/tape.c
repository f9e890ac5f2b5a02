/* tape.c - the tapes of kern.h: a reverse tape records launches and runs their gradient
 * kernels in reverse order; a forward tape launches their forward-mode kernels in order.
 *
 * A record keeps the kernel and a copy of the kern_arg array (buffer pointers, scalar
 * values). Backward walks the records newest first and launches "<K>.grad" from K's
 * module with the recorded arguments followed by one adjoint per differentiable
 * parameter of K (docs/reference.md section 8: element type f32 or f64, not nograd): the adjoint
 * buffer associated with an array argument's buffer (set by the user, or created zeroed
 * by the tape on first use), and a fresh zeroed f32[1]/f64[1] per (record, scalar
 * parameter), which K.grad accumulates into. Since K.grad turns dL/d(state after K) into
 * dL/d(state before K) in place, running them newest first gives the gradient of the
 * whole sequence with no zeroing between steps.
 *
 * A host step (kern_tape_record_func) is a record with no kernel: its buffers are kept as
 * buffer arguments, and backward makes sure each float buffer has an adjoint, waits for
 * the launches before (kern_sync), then calls the user's function at the record's
 * position. The tape owns the user pointer from the recording call on and frees it once,
 * when the record is dropped (or at once when recording fails). While backward runs, the
 * calls that would change the record list (record, clear, destroy, backward) refuse.
 *
 * A forward tape (kern_tape_create_forward) launches "<K>.jvp" in place of K, with K's
 * arguments followed by one tangent per differentiable parameter: the tangent associated
 * with an array argument's buffer (set by the user, or created zeroed by the tape), and a
 * fresh f32[1]/f64[1] per (record, scalar parameter) holding the tangent given to
 * kern_tape_launch_jvp (zero by default). K.jvp turns the tangent of the state before K into
 * that of the state after, in place, so launching them in order gives the sequence's JVP
 * as the launches run. The association list is the same one (grads: adjoints on a reverse
 * tape, tangents on a forward one); backward and host steps are refused.
 *
 * Buffers and modules are referenced, not owned; before using a record, backward checks
 * that its module and buffers are still in the context's lists (a released handle is an
 * error, not a use after free, unless its memory was reused for a new one). Tapes are in
 * their context's list, and a context's release destroys them first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tape.h"

static bool differentiable(const kern_meta_param *p) {
    const kern_type *t = ty_is_array(p->type) ? p->type->elem : p->type;
    return ty_is_float(t) && !p->nograd;
}

bool rt_tape_buffer_alive(kern_context *ctx, const kern_buffer *b) {
    for (rt_list *l = ctx->buffers.next; l != &ctx->buffers; l = l->next)
        if ((const kern_buffer *)l == b)
            return true;
    return false;
}

static bool module_alive(kern_context *ctx, const kern_module *m) {
    for (rt_list *l = ctx->modules.next; l != &ctx->modules; l = l->next)
        if ((const kern_module *)l == m)
            return true;
    return false;
}

static kern_status create(kern_context *ctx, bool forward, const char *fn, kern_tape **out) {
    if (!ctx || !rt_handle_check(ctx, RT_H_CONTEXT, fn))
        return KERN_ERR_ARGUMENT;
    rt_clear_error(ctx);
    if (!out)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    if (!ctx->dev)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "the context was not created successfully");
    kern_tape *t = calloc(1, sizeof *t);
    if (!t)
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory for a tape");
    t->ctx = ctx;
    t->forward = forward;
    rt_list_init(&t->link);
    rt_list_push(&ctx->tapes, &t->link);
    rt_handle_add(t, RT_H_TAPE, ctx);
    *out = t;
    return KERN_OK;
}

kern_status kern_tape_create(kern_context *ctx, kern_tape **out) {
    return create(ctx, false, "kern_tape_create", out);
}

kern_status kern_tape_create_forward(kern_context *ctx, kern_tape **out) {
    return create(ctx, true, "kern_tape_create_forward", out);
}

/* KERN_ERR_ARGUMENT (with the message) when fn is for the other mode than t's. */
static kern_status refuse_mode(kern_tape *t, const char *fn, bool forward_fn) {
    if (t->forward == forward_fn)
        return KERN_OK;
    if (t->forward)
        return rt_error(t->ctx, KERN_ERR_ARGUMENT,
                        "%s: the tape is a forward tape (kern_tape_create_forward): it has "
                        "tangents (kern_tape_set_tan, kern_tape_tan), no adjoints, host steps or "
                        "backward pass",
                        fn);
    return rt_error(t->ctx, KERN_ERR_ARGUMENT,
                    "%s: the tape is a reverse tape (kern_tape_create): it has adjoints "
                    "(kern_tape_set_grad, kern_tape_grad), no tangents",
                    fn);
}

static void free_records(kern_tape *t) {
    for (int r = 0; r < t->nrecs; r++) {
        tape_record *rec = &t->recs[r];
        for (int i = 0; rec->scalar_grads && i < rec->nargs; i++)
            if (rec->scalar_grads[i] && rt_tape_buffer_alive(t->ctx, rec->scalar_grads[i]))
                kern_buffer_release(rec->scalar_grads[i]);
        free(rec->scalar_grads);
        free(rec->args);
        free(rec->reads);
        rt_tape_drop(t, rec->saves, rec->nsaves);
        if (rec->free_user)
            rec->free_user(rec->user);
    }
    t->nrecs = 0;
    t->ran = t->ran_once = t->restored = false;
}

/* Releases the tape's own adjoints and drops their associations. */
static void free_owned_grads(kern_tape *t) {
    int n = 0;
    for (int i = 0; i < t->ngrads; i++) {
        if (t->grads[i].owned) {
            if (rt_tape_buffer_alive(t->ctx, t->grads[i].grad))
                kern_buffer_release(t->grads[i].grad);
        } else {
            t->grads[n++] = t->grads[i];
        }
    }
    t->ngrads = n;
}

/* KERN_ERR_ARGUMENT (with the message) when t's backward pass is running: fn would change
 * the record list a host step's callback is called from. */
static kern_status refuse_running(kern_tape *t, const char *fn) {
    if (!t->running)
        return KERN_OK;
    return rt_error(t->ctx, KERN_ERR_ARGUMENT,
                    "%s: the tape is running its backward pass (a host step's callback cannot "
                    "record on, clear, destroy or run backward its own tape)",
                    fn);
}

kern_status kern_tape_clear(kern_tape *t) {
    if (!t || !rt_handle_check(t, RT_H_TAPE, "kern_tape_clear"))
        return KERN_ERR_ARGUMENT;
    if (refuse_running(t, "kern_tape_clear"))
        return KERN_ERR_ARGUMENT;
    free_records(t);
    free_owned_grads(t);
    rt_clear_error(t->ctx);
    return KERN_OK;
}

kern_status kern_tape_zero(kern_tape *t) {
    if (!t || !rt_handle_check(t, RT_H_TAPE, "kern_tape_zero"))
        return KERN_ERR_ARGUMENT;
    kern_context *ctx = t->ctx;
    if (refuse_running(t, "kern_tape_zero"))
        return KERN_ERR_ARGUMENT;
    rt_clear_error(ctx);
    kern_status s = KERN_OK;
    for (int i = 0; i < t->ngrads && s == KERN_OK; i++)
        if (rt_tape_buffer_alive(ctx, t->grads[i].grad))
            s = rt_buffer_zero(t->grads[i].grad);
    /* a forward tape's scalar tangents are the values given per launch, not results */
    for (int r = 0; !t->forward && r < t->nrecs && s == KERN_OK; r++)
        for (int i = 0; t->recs[r].scalar_grads && i < t->recs[r].nargs && s == KERN_OK; i++)
            if (t->recs[r].scalar_grads[i] && rt_tape_buffer_alive(ctx, t->recs[r].scalar_grads[i]))
                s = rt_buffer_zero(t->recs[r].scalar_grads[i]);
    if (s != KERN_OK)
        return rt_error(ctx, s, "kern_tape_zero: %s", ctx->msg);
    t->ran = false;
    return KERN_OK;
}

void rt_tape_destroy(kern_tape *t) {
    rt_list_remove(&t->link);
    free_records(t);
    free_owned_grads(t);
    free(t->recs);
    free(t->grads);
    rt_handle_free(t);
}

void kern_tape_destroy(kern_tape *t) {
    if (!t || !rt_handle_check(t, RT_H_TAPE, "kern_tape_destroy"))
        return;
    if (refuse_running(t, "kern_tape_destroy"))
        return;
    rt_tape_destroy(t);
}

static tape_grad *find_grad(kern_tape *t, const kern_buffer *primal) {
    for (int i = 0; i < t->ngrads; i++)
        if (t->grads[i].primal == primal)
            return &t->grads[i];
    return NULL;
}

/* items (n of size bytes, room for *cap) with room for one more: the same or a larger
 * allocation (*cap doubled from first); NULL, items untouched, when host memory runs out. */
static void *grow(void *items, int n, int *cap, size_t size, int first) {
    if (n < *cap)
        return items;
    int c = *cap ? *cap * 2 : first;
    void *p = realloc(items, (size_t)c * size);
    if (p)
        *cap = c;
    return p;
}

static tape_grad *add_grad(kern_tape *t) {
    tape_grad *g = grow(t->grads, t->ngrads, &t->capgrads, sizeof *g, 8);
    if (!g)
        return NULL;
    t->grads = g;
    return &t->grads[t->ngrads++];
}

/* The word for what t associates with a primal. */
static const char *assoc_word(const kern_tape *t) { return t->forward ? "tangent" : "adjoint"; }

/* kern_tape_set_grad and kern_tape_set_tan (fn, forward_fn: which). */
static kern_status set_assoc(kern_tape *t, kern_buffer *primal, kern_buffer *grad, const char *fn,
                             bool forward_fn) {
    if (!t || !rt_handle_check(t, RT_H_TAPE, fn))
        return KERN_ERR_ARGUMENT;
    kern_context *ctx = t->ctx;
    rt_clear_error(ctx);
    if (refuse_mode(t, fn, forward_fn))
        return KERN_ERR_ARGUMENT;
    const char *word = assoc_word(t);
    if (!primal || !grad)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "%s: NULL buffer", fn);
    if (primal->ctx != ctx || grad->ctx != ctx)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "%s: the buffer belongs to another context", fn);
    char pw[128], gw[128];
    rt_format_buffer(pw, sizeof pw, primal);
    rt_format_buffer(gw, sizeof gw, grad);
    if (primal->dtype != KERN_F32 && primal->dtype != KERN_F64)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "%s: buffer %s has no %s (not f32 or f64)", fn, pw,
                        t->forward ? "tangent" : "gradient");
    if (grad == primal)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "%s: a buffer cannot be its own %s", fn, word);
    if (grad->dtype != primal->dtype || grad->rank != primal->rank ||
        memcmp(grad->shape, primal->shape, sizeof grad->shape) != 0)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "%s: the %s %s does not match the buffer %s", fn,
                        word, gw, pw);
    tape_grad *g = find_grad(t, primal);
    if (g && g->owned && g->grad != grad && rt_tape_buffer_alive(ctx, g->grad))
        kern_buffer_release(g->grad);
    if (!g && !(g = add_grad(t)))
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory");
    *g = (tape_grad){primal, grad, false};
    return KERN_OK;
}

kern_status kern_tape_set_grad(kern_tape *t, kern_buffer *primal, kern_buffer *grad) {
    return set_assoc(t, primal, grad, "kern_tape_set_grad", false);
}

kern_status kern_tape_set_tan(kern_tape *t, kern_buffer *primal, kern_buffer *tan) {
    return set_assoc(t, primal, tan, "kern_tape_set_tan", true);
}

/* kern_tape_grad and kern_tape_tan. */
static kern_status get_assoc(kern_tape *t, kern_buffer *primal, kern_buffer **out, const char *fn,
                             bool forward_fn) {
    if (!t || !rt_handle_check(t, RT_H_TAPE, fn))
        return KERN_ERR_ARGUMENT;
    rt_clear_error(t->ctx);
    if (!out)
        return rt_error(t->ctx, KERN_ERR_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    if (refuse_mode(t, fn, forward_fn))
        return KERN_ERR_ARGUMENT;
    tape_grad *g = primal ? find_grad(t, primal) : NULL;
    if (!g)
        return rt_error(t->ctx, KERN_ERR_NOT_FOUND,
                        "%s: the buffer has no %s on this tape (none was set, and no %s has "
                        "needed one)",
                        fn, assoc_word(t), t->forward ? "launch" : "backward pass");
    *out = g->grad;
    return KERN_OK;
}

kern_status kern_tape_grad(kern_tape *t, kern_buffer *primal, kern_buffer **out) {
    return get_assoc(t, primal, out, "kern_tape_grad", false);
}

kern_status kern_tape_tan(kern_tape *t, kern_buffer *primal, kern_buffer **out) {
    return get_assoc(t, primal, out, "kern_tape_tan", true);
}

/* Whether fn may add a record to t (else the message says why). */
static bool can_record(kern_tape *t, const char *fn) {
    if (refuse_running(t, fn))
        return false;
    if (t->ran_once)
        rt_error(t->ctx, KERN_ERR_ARGUMENT,
                 "%s: the tape has run backward; kern_tape_clear starts a new recording "
                 "(kern_tape_zero keeps the records for another backward pass)",
                 fn);
    return !t->ran_once;
}

/* A zeroed record at the end of the list (not counted until the caller's nrecs++);
 * NULL when host memory runs out. */
static tape_record *new_record(kern_tape *t) {
    tape_record *r = grow(t->recs, t->nrecs, &t->caprecs, sizeof *r, 16);
    if (!r)
        return NULL;
    t->recs = r;
    tape_record *rec = &t->recs[t->nrecs];
    memset(rec, 0, sizeof *rec);
    return rec;
}

static kern_status launch_forward(kern_tape *t, kern_kernel *k, const kern_arg *args, int nargs,
                                  const double *scalar_tans, const char *fn);

kern_status kern_tape_launch(kern_tape *t, kern_kernel *k, const kern_arg *args, int nargs) {
    if (!t || !rt_handle_check(t, RT_H_TAPE, "kern_tape_launch"))
        return KERN_ERR_ARGUMENT;
    kern_context *ctx = t->ctx;
    rt_clear_error(ctx);
    if (!k)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_tape_launch: the kernel is NULL");
    if (k->mod->ctx != ctx)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "kern_tape_launch: kernel '%s' belongs to another context", k->meta->name);
    if (!can_record(t, "kern_tape_launch"))
        return KERN_ERR_ARGUMENT;
    if (t->forward)
        return launch_forward(t, k, args, nargs, NULL, "kern_tape_launch");
    /* what the launch reads, and what it overwrites of earlier records' reads, saved
     * before it runs (tape_save.c); arguments that do not match are kern_launch's error */
    tape_span *reads = NULL, *writes = NULL;
    tape_save *saves = NULL;
    int nreads = 0, nwrites = 0, nsaves = 0;
    kern_status s = KERN_OK;
    if (rt_tape_spans(k, args, nargs, false, &reads, &nreads) &&
        rt_tape_spans(k, args, nargs, true, &writes, &nwrites))
        s = rt_tape_save(t, k, writes, nwrites, &saves, &nsaves);
    else if (nreads < 0 || nwrites < 0)
        s = rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory");
    free(writes);
    if (s == KERN_OK)
        s = kern_launch(k, args, nargs);
    tape_record *rec = s == KERN_OK ? new_record(t) : NULL;
    kern_arg *rargs = rec ? malloc(((size_t)nargs + 1) * sizeof *rargs) : NULL;
    kern_buffer **scalar_grads = rargs ? calloc((size_t)nargs + 1, sizeof *scalar_grads) : NULL;
    if (s == KERN_OK && !scalar_grads)
        s = rt_error(ctx, KERN_ERR_OUT_OF_MEMORY,
                     "out of host memory: kernel '%s' ran but was not recorded", k->meta->name);
    if (s != KERN_OK) {
        free(rargs);
        free(reads);
        rt_tape_drop(t, saves, nsaves);
        return s;
    }
    if (nargs)
        memcpy(rargs, args, (size_t)nargs * sizeof *args);
    *rec = (tape_record){.k = k,
                         .args = rargs,
                         .nargs = nargs,
                         .scalar_grads = scalar_grads,
                         .reads = reads,
                         .nreads = nreads,
                         .saves = saves,
                         .nsaves = nsaves};
    t->nrecs++;
    return KERN_OK;
}

/* The checks of kern_tape_record_func; the caller frees user on failure. */
static kern_status check_record_func(kern_tape *t, kern_tape_backward_fn backward,
                                     kern_buffer *const *buffers, int nbuffers) {
    kern_context *ctx = t->ctx;
    if (refuse_mode(t, "kern_tape_record_func", false))
        return KERN_ERR_ARGUMENT;
    if (!backward)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_tape_record_func: backward is NULL");
    if (nbuffers < 0 || (nbuffers > 0 && !buffers))
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_tape_record_func: %d buffers%s", nbuffers,
                        nbuffers < 0 ? " (a negative count)" : ", and buffers is NULL");
    for (int i = 0; i < nbuffers; i++) {
        if (!buffers[i])
            return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_tape_record_func: buffer %d is NULL", i);
        if (!rt_tape_buffer_alive(ctx, buffers[i]))
            return rt_error(ctx, KERN_ERR_ARGUMENT,
                            "kern_tape_record_func: buffer %d is not a live buffer of the "
                            "tape's context",
                            i);
    }
    return can_record(t, "kern_tape_record_func") ? KERN_OK : KERN_ERR_ARGUMENT;
}

kern_status kern_tape_record_func(kern_tape *t, kern_tape_backward_fn backward, void *user,
                                  void (*free_user)(void *user), kern_buffer *const *buffers,
                                  int nbuffers) {
    if (!t || !rt_handle_check(t, RT_H_TAPE, "kern_tape_record_func")) {
        if (free_user)
            free_user(user);
        return KERN_ERR_ARGUMENT;
    }
    kern_context *ctx = t->ctx;
    rt_clear_error(ctx);
    kern_status s = check_record_func(t, backward, buffers, nbuffers);
    tape_record *rec = s == KERN_OK ? new_record(t) : NULL;
    kern_arg *args = rec ? malloc(((size_t)nbuffers + 1) * sizeof *args) : NULL;
    /* its callback may read any of its buffers: later launches save what they overwrite */
    tape_span *reads = args ? rt_tape_whole_spans(buffers, nbuffers) : NULL;
    if (s == KERN_OK && !reads)
        s = rt_error(ctx, KERN_ERR_OUT_OF_MEMORY,
                     "out of host memory: the host step was not recorded");
    if (s != KERN_OK) {
        free(args);
        if (free_user)
            free_user(user);
        return s;
    }
    for (int i = 0; i < nbuffers; i++)
        args[i] = kern_arg_buffer(buffers[i]);
    *rec = (tape_record){.args = args,
                         .nargs = nbuffers,
                         .reads = reads,
                         .nreads = nbuffers,
                         .backward = backward,
                         .user = user,
                         .free_user = free_user};
    t->nrecs++;
    return KERN_OK;
}

kern_status kern_tape_error(kern_tape *t, kern_status status, const char *message) {
    if (!t || !rt_handle_check(t, RT_H_TAPE, "kern_tape_error"))
        return KERN_ERR_ARGUMENT;
    if (status == KERN_OK)
        status = KERN_ERR_CALLBACK;
    return rt_error(t->ctx, status, "%s", message ? message : "");
}

int64_t kern_tape_saved_bytes(const kern_tape *t) {
    return t && rt_handle_check(t, RT_H_TAPE, "kern_tape_saved_bytes") ? t->saved_bytes : 0;
}

int kern_tape_record_count(const kern_tape *t) {
    return t && rt_handle_check(t, RT_H_TAPE, "kern_tape_record_count") ? t->nrecs : 0;
}

/* A zeroed buffer owned by the tape. */
static kern_status new_zeroed(kern_tape *t, kern_dtype dtype, int rank, const int64_t *shape,
                              kern_buffer **out) {
    return kern_buffer_create(t->ctx, dtype, rank, shape, NULL, out);
}

/* The adjoint of b: the associated one, or a zeroed one the tape creates and owns. what
 * names b in the message when the associated adjoint was released. */
static kern_status ensure_grad(kern_tape *t, kern_buffer *b, const char *what, kern_buffer **out) {
    kern_context *ctx = t->ctx;
    tape_grad *g = find_grad(t, b);
    if (g && !rt_tape_buffer_alive(ctx, g->grad))
        return rt_error(ctx, KERN_ERR_ARGUMENT, "the %s buffer of %s was released", assoc_word(t),
                        what);
    if (!g) {
        kern_buffer *gb;
        kern_status s = new_zeroed(t, b->dtype, b->rank, b->shape, &gb);
        if (s != KERN_OK)
            return s;
        if (!(g = add_grad(t))) {
            kern_buffer_release(gb);
            return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory");
        }
        *g = (tape_grad){b, gb, true};
    }
    *out = g->grad;
    return KERN_OK;
}

/* A host step: its buffers alive and given adjoints, the launches before it complete,
 * then its callback. */
static kern_status backward_host(kern_tape *t, tape_record *rec, bool *in_callback) {
    kern_context *ctx = t->ctx;
    for (int i = 0; i < rec->nargs; i++)
        if (!rt_tape_buffer_alive(ctx, rec->args[i].u.buffer))
            return rt_error(ctx, KERN_ERR_ARGUMENT, "its buffer %d was released", i);
    for (int i = 0; i < rec->nargs; i++) {
        kern_buffer *b = rec->args[i].u.buffer, *g;
        if (b->dtype != KERN_F32 && b->dtype != KERN_F64)
            continue;
        char what[32];
        snprintf(what, sizeof what, "its buffer %d", i);
        kern_status s = ensure_grad(t, b, what, &g);
        if (s != KERN_OK)
            return s;
    }
    /* the callback may touch the adjoints' memory directly (kern_buffer_pointer, another
     * library's stream): the gradient launches before it must be complete */
    kern_status s = kern_sync(ctx);
    if (s != KERN_OK)
        return rt_error(ctx, s, "the gradient launches before it failed: %s", ctx->msg);
    *in_callback = true;
    rt_clear_error(ctx);
    s = rec->backward(t, rec->user);
    if (s != KERN_OK && !ctx->msg[0])
        rt_error(ctx, s, "the callback returned %s", kern_status_name(s));
    return s;
}

/* The kernel "<K><suffix>" (".grad", ".jvp") of K's module, checked to take K's parameters
 * followed by one per differentiable parameter of K. */
static kern_status derived_kernel(kern_context *ctx, const kern_kernel *k, const char *suffix,
                                  kern_kernel **out) {
    const kern_meta_kernel *mk = k->meta;
    size_t nlen = strlen(mk->name), slen = strlen(suffix);
    char *name = malloc(nlen + slen + 1);
    if (!name)
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory");
    memcpy(name, mk->name, nlen);
    memcpy(name + nlen, suffix, slen + 1);
    kern_status s = kern_kernel_find(k->mod, name, out);
    free(name);
    if (s != KERN_OK)
        return s;
    int ndiff = 0;
    for (int i = 0; i < mk->nparams; i++)
        ndiff += differentiable(&mk->params[i]);
    if ((*out)->meta->nparams != mk->nparams + ndiff)
        return rt_error(ctx, KERN_ERR_FORMAT,
                        "kernel '%s' takes %d parameters, but '%s' has %d parameters of which "
                        "%d are differentiable",
                        (*out)->meta->name, (*out)->meta->nparams, mk->name, mk->nparams, ndiff);
    return KERN_OK;
}

static kern_status backward_one(kern_tape *t, int r) {
    kern_context *ctx = t->ctx;
    tape_record *rec = &t->recs[r];
    kern_status s = KERN_OK;
    kern_arg *gargs = NULL;
    if (!module_alive(ctx, rec->k->mod))
        return rt_error(ctx, KERN_ERR_ARGUMENT, "its module was released");
    const kern_meta_kernel *mk = rec->k->meta;
    for (int i = 0; i < rec->nargs; i++)
        if (rec->args[i].kind == KERN_ARG_BUFFER &&
            !rt_tape_buffer_alive(ctx, rec->args[i].u.buffer))
            return rt_error(ctx, KERN_ERR_ARGUMENT, "the buffer of parameter '%s' was released",
                            mk->params[i].name);
    kern_kernel *gk;
    if ((s = derived_kernel(ctx, rec->k, ".grad", &gk)) != KERN_OK)
        return s;
    gargs = calloc((size_t)gk->meta->nparams + 1, sizeof *gargs);
    if (!gargs)
        return rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory");
    memcpy(gargs, rec->args, (size_t)rec->nargs * sizeof *gargs);
    int j = mk->nparams;
    for (int i = 0; i < mk->nparams; i++) {
        const kern_meta_param *p = &mk->params[i];
        if (!differentiable(p))
            continue;
        kern_buffer *gb = NULL;
        if (ty_is_array(p->type)) {
            char what[160];
            snprintf(what, sizeof what, "parameter '%s'", p->name);
            if ((s = ensure_grad(t, rec->args[i].u.buffer, what, &gb)) != KERN_OK)
                goto cleanup;
        } else {
            int64_t one = 1;
            if (!rec->scalar_grads[i] && (s = new_zeroed(t, rt_dtype_of(p->type), 1, &one,
                                                         &rec->scalar_grads[i])) != KERN_OK)
                goto cleanup;
            gb = rec->scalar_grads[i];
        }
        gargs[j++] = kern_arg_buffer(gb);
    }
    s = kern_launch(gk, gargs, j);
cleanup:
    free(gargs);
    return s;
}

/* A forward tape's launch: K.jvp with args and the tangents, then the record. */
static kern_status launch_forward(kern_tape *t, kern_kernel *k, const kern_arg *args, int nargs,
                                  const double *scalar_tans, const char *fn) {
    kern_context *ctx = t->ctx;
    const kern_meta_kernel *mk = k->meta;
    if (nargs != mk->nparams || (nargs > 0 && !args))
        return rt_error(ctx, KERN_ERR_ARGUMENT, "%s: kernel '%s' takes %d arguments, got %d%s", fn,
                        mk->name, mk->nparams, nargs, nargs > 0 && !args ? " (NULL)" : "");
    kern_kernel *jk;
    kern_status s = derived_kernel(ctx, k, ".jvp", &jk);
    if (s != KERN_OK)
        return rt_error(ctx, s, "%s: kernel '%s' has no forward-mode kernel '%s.jvp': %s", fn,
                        mk->name, mk->name, ctx->msg);
    kern_arg *jargs = calloc((size_t)jk->meta->nparams + 1, sizeof *jargs);
    kern_buffer **scalars = calloc((size_t)nargs + 1, sizeof *scalars);
    if (!jargs || !scalars) {
        s = rt_error(ctx, KERN_ERR_OUT_OF_MEMORY, "out of host memory");
        goto fail;
    }
    memcpy(jargs, args, (size_t)nargs * sizeof *jargs);
    int j = nargs;
    for (int i = 0; i < nargs; i++) {
        const kern_meta_param *p = &mk->params[i];
        if (!differentiable(p))
            continue;
        kern_buffer *tb = NULL;
        if (ty_is_array(p->type)) {
            kern_buffer *b = args[i].kind == KERN_ARG_BUFFER ? args[i].u.buffer : NULL;
            if (!b || !rt_tape_buffer_alive(ctx, b)) {
                s = rt_error(ctx, KERN_ERR_ARGUMENT, "%s: kernel '%s', parameter '%s': %s", fn,
                             mk->name, p->name,
                             args[i].kind != KERN_ARG_BUFFER ? "expected a buffer"
                             : !b                            ? "the buffer is NULL"
                                  : "the buffer is released or of another context");
                goto fail;
            }
            char what[160];
            snprintf(what, sizeof what, "parameter '%s'", p->name);
            if ((s = ensure_grad(t, b, what, &tb)) != KERN_OK) {
                rt_error(ctx, s, "%s: kernel '%s': %s", fn, mk->name, ctx->msg);
                goto fail;
            }
        } else {
            int64_t one = 1;
            double d = scalar_tans ? scalar_tans[i] : 0.0;
            float f = (float)d;
            kern_dtype dt = rt_dtype_of(p->type);
            if ((s = kern_buffer_create(ctx, dt, 1, &one, dt == KERN_F32 ? (const void *)&f : &d,
                                        &scalars[i])) != KERN_OK)
                goto fail;
            tb = scalars[i];
        }
        jargs[j++] = kern_arg_buffer(tb);
    }
    if ((s = kern_launch(jk, jargs, j)) != KERN_OK) {
        rt_error(ctx, s, "%s: kernel '%s' (forward mode): %s", fn, mk->name, ctx->msg);
        goto fail;
    }
    tape_record *rec = new_record(t);
    if (!rec) {
        s = rt_error(ctx, KERN_ERR_OUT_OF_MEMORY,
                     "out of host memory: kernel '%s.jvp' ran but was not recorded", mk->name);
        goto fail;
    }
    *rec = (tape_record){.k = k, .args = jargs, .nargs = nargs, .scalar_grads = scalars};
    t->nrecs++;
    return KERN_OK;
fail:
    for (int i = 0; scalars && i < nargs; i++)
        if (scalars[i])
            kern_buffer_release(scalars[i]);
    free(scalars);
    free(jargs);
    return s;
}

kern_status kern_tape_launch_jvp(kern_tape *t, kern_kernel *k, const kern_arg *args, int nargs,
                                 const double *scalar_tans) {
    if (!t || !rt_handle_check(t, RT_H_TAPE, "kern_tape_launch_jvp"))
        return KERN_ERR_ARGUMENT;
    kern_context *ctx = t->ctx;
    rt_clear_error(ctx);
    if (refuse_mode(t, "kern_tape_launch_jvp", true))
        return KERN_ERR_ARGUMENT;
    if (!k)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_tape_launch_jvp: the kernel is NULL");
    if (k->mod->ctx != ctx)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "kern_tape_launch_jvp: kernel '%s' belongs to another context",
                        k->meta->name);
    if (!can_record(t, "kern_tape_launch_jvp"))
        return KERN_ERR_ARGUMENT;
    return launch_forward(t, k, args, nargs, scalar_tans, "kern_tape_launch_jvp");
}

kern_status kern_tape_backward(kern_tape *t) {
    if (!t || !rt_handle_check(t, RT_H_TAPE, "kern_tape_backward"))
        return KERN_ERR_ARGUMENT;
    kern_context *ctx = t->ctx;
    rt_clear_error(ctx);
    if (refuse_running(t, "kern_tape_backward") || refuse_mode(t, "kern_tape_backward", false))
        return KERN_ERR_ARGUMENT;
    if (t->ran)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "kern_tape_backward: the tape has run backward already; "
                        "kern_tape_zero zeroes the adjoints for another backward pass, "
                        "kern_tape_clear starts a new recording");
    if (t->restored)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "kern_tape_backward: the last backward pass put back elements that "
                        "launches had overwritten (saved copies), so the arrays no longer hold "
                        "the state the records left and backward cannot run again; "
                        "kern_tape_clear and record the launches again");
    t->ran = t->ran_once = true;
    t->running = true;
    kern_status s = KERN_OK;
    for (int r = t->nrecs - 1; r >= 0 && s == KERN_OK; r--) {
        tape_record *rec = &t->recs[r];
        if (!rec->k) {
            bool in_callback = false;
            if ((s = backward_host(t, rec, &in_callback)) != KERN_OK)
                rt_error(ctx, s, "kern_tape_backward: record %d (host callback)%s %s", r,
                         in_callback ? " failed:" : ":", ctx->msg);
        } else if ((s = backward_one(t, r)) != KERN_OK) {
            const char *name = module_alive(ctx, rec->k->mod) ? rec->k->meta->name : "?";
            rt_error(ctx, s, "kern_tape_backward: record %d (kernel '%s'): %s", r, name, ctx->msg);
        }
        /* the elements the launch overwrote of earlier records' reads, as they read them */
        t->restored |= rec->nsaves > 0;
        if (s == KERN_OK && (s = rt_tape_restore(t, rec)) != KERN_OK)
            rt_error(ctx, s,
                     "kern_tape_backward: record %d: putting back the elements it "
                     "overwrote: %s",
                     r, ctx->msg);
    }
    t->running = false;
    return s;
}

kern_status kern_tape_scalar_grad(kern_tape *t, int record, int param, double *out) {
    if (!t || !rt_handle_check(t, RT_H_TAPE, "kern_tape_scalar_grad"))
        return KERN_ERR_ARGUMENT;
    kern_context *ctx = t->ctx;
    rt_clear_error(ctx);
    if (!out)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_tape_scalar_grad: out is NULL");
    if (refuse_mode(t, "kern_tape_scalar_grad", false))
        return KERN_ERR_ARGUMENT;
    if (record < 0 || record >= t->nrecs)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "kern_tape_scalar_grad: record %d is out of range (the tape has %d)",
                        record, t->nrecs);
    tape_record *rec = &t->recs[record];
    if (!rec->k)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "kern_tape_scalar_grad: record %d is a host step (kern_tape_record_func), "
                        "which has no scalar parameters",
                        record);
    if (!module_alive(ctx, rec->k->mod))
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "kern_tape_scalar_grad: the module of record %d was released", record);
    const kern_meta_kernel *mk = rec->k->meta;
    if (param < 0 || param >= mk->nparams)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "kern_tape_scalar_grad: kernel '%s' has %d parameters: index %d is out "
                        "of range",
                        mk->name, mk->nparams, param);
    const kern_meta_param *p = &mk->params[param];
    if (ty_is_array(p->type) || !differentiable(p))
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "kern_tape_scalar_grad: parameter '%s' (%s) of kernel '%s' is not a "
                        "differentiable scalar",
                        p->name, p->type->name, mk->name);
    kern_buffer *b = rec->scalar_grads[param];
    if (!b)
        return rt_error(ctx, KERN_ERR_NOT_FOUND,
                        "kern_tape_scalar_grad: record %d has no gradient yet (run "
                        "kern_tape_backward)",
                        record);
    kern_status s;
    if (b->dtype == KERN_F32) {
        float f;
        s = kern_buffer_read(b, &f, sizeof f);
        *out = f;
    } else {
        s = kern_buffer_read(b, out, sizeof *out);
    }
    return s;
}
