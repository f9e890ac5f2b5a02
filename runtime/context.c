/* context.c - contexts, messages, enum names, and the collection of completed launches
 * (device errors: runtime contract 7, docs/runtime-contracts.md). See kern.h and rt.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"

enum { RT_MAX_THREADS = 1024 };

_Static_assert((int)KERN_BOOL == (int)TY_BOOL && (int)KERN_F64 == (int)TY_F64 &&
                   (int)KERN_I8 == (int)TY_I8 && (int)KERN_BF16 == (int)TY_BF16,
               "kern_dtype mirrors the scalar kinds of types.h");

/* ---- names ------------------------------------------------------------------------- */

int kern_version(const char **text) {
    if (text)
        *text = KERN_VERSION_STRING;
    return KERN_VERSION_NUMBER(KERN_VERSION_MAJOR, KERN_VERSION_MINOR, KERN_VERSION_PATCH);
}

const char *kern_status_name(kern_status s) {
    switch (s) {
    case KERN_OK: return "KERN_OK";
    case KERN_ERR_ARGUMENT: return "KERN_ERR_ARGUMENT";
    case KERN_ERR_NOT_FOUND: return "KERN_ERR_NOT_FOUND";
    case KERN_ERR_IO: return "KERN_ERR_IO";
    case KERN_ERR_FORMAT: return "KERN_ERR_FORMAT";
    case KERN_ERR_COMPILE: return "KERN_ERR_COMPILE";
    case KERN_ERR_UNSUPPORTED: return "KERN_ERR_UNSUPPORTED";
    case KERN_ERR_DEVICE: return "KERN_ERR_DEVICE";
    case KERN_ERR_OUT_OF_MEMORY: return "KERN_ERR_OUT_OF_MEMORY";
    case KERN_ERR_INTERNAL: return "KERN_ERR_INTERNAL";
    case KERN_ERR_CALLBACK: return "KERN_ERR_CALLBACK";
    }
    return "KERN_ERR_?";
}

const char *kern_dtype_name(kern_dtype t) {
    switch (t) {
    case KERN_BOOL: return "bool";
    case KERN_I32: return "i32";
    case KERN_U32: return "u32";
    case KERN_I64: return "i64";
    case KERN_F32: return "f32";
    case KERN_F64: return "f64";
    case KERN_I8: return "i8";
    case KERN_U8: return "u8";
    case KERN_I16: return "i16";
    case KERN_U16: return "u16";
    case KERN_U64: return "u64";
    case KERN_F16: return "f16";
    case KERN_BF16: return "bf16";
    }
    return NULL;
}

size_t kern_dtype_size(kern_dtype t) {
    switch (t) {
    case KERN_BOOL:
    case KERN_I8:
    case KERN_U8: return 1;
    case KERN_I16:
    case KERN_U16:
    case KERN_F16:
    case KERN_BF16: return 2;
    case KERN_I32:
    case KERN_U32:
    case KERN_F32: return 4;
    case KERN_I64:
    case KERN_U64:
    case KERN_F64: return 8;
    }
    return 0;
}

const char *kern_backend_name(kern_backend b) {
    const kern_target *t = kern_target_of_backend(b);
    return t ? t->name : NULL;
}

bool kern_backend_available(kern_backend b) {
    const kern_target *t = kern_target_of_backend(b);
    return t && (t->caps & KERN_TARGET_DEVICE);
}

kern_dtype rt_dtype_of(const kern_type *t) {
    if (t->kind == TY_ARRAY)
        t = t->elem;
    return (kern_dtype)t->kind;
}

/* ---- lists and messages ------------------------------------------------------------ */

void rt_list_init(rt_list *l) { l->prev = l->next = l; }

void rt_list_push(rt_list *head, rt_list *node) {
    node->prev = head->prev;
    node->next = head;
    head->prev->next = node;
    head->prev = node;
}

void rt_list_remove(rt_list *node) {
    node->prev->next = node->next;
    node->next->prev = node->prev;
    node->prev = node->next = node;
}

kern_status rt_error(kern_context *ctx, kern_status s, const char *fmt, ...) {
    if (!ctx)
        return s;
    char tmp[RT_MSG_SIZE]; /* fmt's arguments may point into ctx->msg */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(ctx->msg, tmp, sizeof tmp);
    return s;
}

void rt_clear_error(kern_context *ctx) {
    if (ctx)
        ctx->msg[0] = '\0';
}

void rt_format_loc(char *buf, size_t size, const kern_meta *m, uint32_t line, uint32_t col) {
    if (m && m->source)
        snprintf(buf, size, "%s:%u:%u", m->source, line, col);
    else
        snprintf(buf, size, "%u:%u", line, col);
}

/* Whether the overflowing stack of rec got its capacity from the adstack size option (a
 * while loop, or bounds the compiler could not follow: ad_stack_size + 1 entries, the
 * iterations and the final test; passes/ad_grad.c) of the context that compiled it. */
static bool option_sized(const kern_kernel *k, const kern_err_record *rec) {
    if (!k->mod || !k->mod->ctx)
        return false;
    int64_t opt = k->mod->ctx->opts.ad_stack_size > 0 ? k->mod->ctx->opts.ad_stack_size : 1024;
    for (int s = 0; s < k->meta->nadstacks; s++) {
        const kern_meta_adstack *a = &k->meta->adstacks[s];
        if (a->line == rec->line && a->col == rec->col && a->expr && a->expr->op == SZ_CONST &&
            a->expr->v == opt + 1 && rec->b == opt + 1)
            return true;
    }
    return false;
}

static bool has_const(const sz_expr *e, int64_t v) {
    if (e->op == SZ_CONST && e->v == v)
        return true;
    for (int i = 0; i < e->nkids; i++)
        if (has_const(e->kids[i], v))
            return true;
    return false;
}

/* The same for K.grad.ckpt, whose stacks hold checkpoints and segments of a loop sized by
 * the option: its message is in iterations too, without the count it reached (a
 * checkpoint stands for k of them). */
static bool option_sized_ckpt(const kern_kernel *k, const kern_err_record *rec, int64_t *opt) {
    size_t n = strlen(k->meta->name);
    if (!k->mod || !k->mod->ctx || n < 10 || strcmp(k->meta->name + n - 10, ".grad.ckpt") != 0)
        return false;
    *opt = k->mod->ctx->opts.ad_stack_size > 0 ? k->mod->ctx->opts.ad_stack_size : 1024;
    for (int s = 0; s < k->meta->nadstacks; s++) {
        const kern_meta_adstack *a = &k->meta->adstacks[s];
        if (a->line == rec->line && a->col == rec->col && a->expr && has_const(a->expr, *opt + 1))
            return true;
    }
    return false;
}

void rt_format_device_error(char *buf, size_t size, const kern_kernel *k,
                            const kern_err_record *rec) {
    char what[256], loc[1024];
    switch (rec->code) {
    case KERN_DEVERR_BOUNDS:
        snprintf(what, sizeof what, "index %lld out of bounds for dimension %d of extent %lld",
                 (long long)rec->a, (int)rec->dim, (long long)rec->b);
        break;
    case KERN_DEVERR_DIV_ZERO: snprintf(what, sizeof what, "integer division by zero"); break;
    case KERN_DEVERR_SHIFT:
        if (rec->a < 0)
            snprintf(what, sizeof what, "shift by negative amount %lld", (long long)rec->a);
        else
            snprintf(what, sizeof what, "shift by %lld >= %lld bits", (long long)rec->a,
                     (long long)rec->b);
        break;
    case KERN_DEVERR_ADSTACK:
        /* the loop's location goes inside the sentence */
        if (rec->line == 0)
            snprintf(loc, sizeof loc, "a loop");
        else {
            char at[900];
            rt_format_loc(at, sizeof at, k->mod->meta, rec->line, rec->col);
            snprintf(loc, sizeof loc, "the loop at %s", at);
        }
        if (option_sized(k, rec)) { /* in the option's units: iterations */
            snprintf(buf, size,
                     "kernel '%s': adstack overflow in %s: the loop runs more than %lld "
                     "iterations (--ad-stack-size %lld); it needs --ad-stack-size %lld or more "
                     "(kernc), or kern_context_options.ad_stack_size = %lld",
                     k->meta->name, loc, (long long)rec->b - 1, (long long)rec->b - 1,
                     (long long)rec->a - 1, (long long)rec->a - 1);
            return;
        }
        int64_t opt;
        if (option_sized_ckpt(k, rec, &opt)) {
            snprintf(buf, size,
                     "kernel '%s': adstack overflow in %s: the loop runs more than %lld "
                     "iterations (--ad-stack-size %lld; checkpointed: the gradient ran as "
                     "K.grad.ckpt under the memory budget); raise --ad-stack-size N (kernc) or "
                     "kern_context_options.ad_stack_size",
                     k->meta->name, loc, (long long)opt, (long long)opt);
            return;
        }
        snprintf(buf, size,
                 "kernel '%s': adstack overflow in %s: it needs %lld entries, the capacity is "
                 "%lld; raise it with --ad-stack-size N (kernc) or "
                 "kern_context_options.ad_stack_size",
                 k->meta->name, loc, (long long)rec->a, (long long)rec->b);
        return;
    default:
        snprintf(what, sizeof what, "device error code %d (a=%lld, b=%lld)", (int)rec->code,
                 (long long)rec->a, (long long)rec->b);
        break;
    }
    if (rec->line == 0) {
        snprintf(buf, size, "kernel '%s': %s", k->meta->name, what);
        return;
    }
    rt_format_loc(loc, sizeof loc, k->mod->meta, rec->line, rec->col);
    snprintf(buf, size, "kernel '%s' (%s): %s", k->meta->name, loc, what);
}

kern_status rt_collect(kern_context *ctx, bool report) {
    if (ctx->npending) {
        uint64_t passed = ctx->dev->ops->poll(ctx->dev);
        int n = 0;
        for (int i = 0; i < ctx->npending; i++) {
            rt_pending *p = ctx->pending[i];
            if (p->point > passed) {
                ctx->pending[n++] = p;
                continue;
            }
            if (p->graph) { /* a replay: its records */
                char msg[RT_MSG_SIZE];
                int errs = rt_graph_errors(p->graph, p->set, msg, sizeof msg);
                if (errs > 0 && !ctx->deferred) {
                    ctx->deferred = true;
                    ctx->deferred_more = errs - 1;
                    snprintf(ctx->deferred_msg, sizeof ctx->deferred_msg, "%s", msg);
                } else if (errs > 0) {
                    ctx->deferred_more += errs;
                }
            } else if (p->rec.code != 0) {
                if (!ctx->deferred) {
                    ctx->deferred = true;
                    ctx->deferred_more = 0;
                    rt_format_device_error(ctx->deferred_msg, sizeof ctx->deferred_msg, p->kernel,
                                           &p->rec);
                } else {
                    ctx->deferred_more++;
                }
            }
            free(p);
        }
        ctx->npending = n;
    }
    if (!report || !ctx->deferred)
        return KERN_OK;
    ctx->deferred = false;
    if (ctx->deferred_more)
        return rt_error(ctx, KERN_ERR_DEVICE, "%s (and %d more device error%s in later launches)",
                        ctx->deferred_msg, ctx->deferred_more, ctx->deferred_more == 1 ? "" : "s");
    return rt_error(ctx, KERN_ERR_DEVICE, "%s", ctx->deferred_msg);
}

/* ---- contexts ---------------------------------------------------------------------- */

/* A set variable other than "" and "0". */
static bool env_on(const char *name) {
    const char *e = getenv(name);
    return e && *e && strcmp(e, "0") != 0;
}

kern_context_options kern_context_options_default(void) {
    /* the runtime's environment, read here and in kern_context_create only */
    const char *v = getenv("KERN_VULKAN_VALIDATION");
    kern_context_options o = {
        .backend = KERN_BACKEND_CPU,
        .device = -1,
        .validation = !env_on("KERN_VULKAN_VALIDATION") ? KERN_VALIDATION_OFF
                      : !strcmp(v, "fatal")             ? KERN_VALIDATION_FATAL
                                                        : KERN_VALIDATION_ON,
        .staging = env_on("KERN_VULKAN_STAGING"),
        .ad_strategy = rt_ad_strategy_env(),
        .fast_math = env_on("KERN_FAST_MATH"),
        .no_checks = env_on("KERN_NO_CHECKS"),
        .no_cache = getenv("KERN_CACHE") && !strcmp(getenv("KERN_CACHE"), "0"),
        .cache_dir =
            getenv("KERN_CACHE_DIR") && *getenv("KERN_CACHE_DIR") ? getenv("KERN_CACHE_DIR") : NULL,
    };
    return o;
}

int rt_ad_strategy_env(void) {
    const char *v = getenv("KERN_AD_STRATEGY");
    static const char *const names[] = {"auto", "store", "slots", "recompute"};
    for (int i = 0; v && i < 4; i++)
        if (!strcmp(v, names[i]))
            return i;
    return v && *v ? -1 : KERN_AD_AUTO; /* an unknown name: refused at creation */
}

int64_t rt_ad_budget(kern_context *ctx) {
    if (ctx->opts.ad_memory_budget > 0)
        return ctx->opts.ad_memory_budget;
    int64_t free_bytes = ctx->dev->ops->mem_free ? ctx->dev->ops->mem_free(ctx->dev) : -1;
    if (free_bytes < 0)
        return INT64_MAX;
    int64_t have = (int64_t)ctx->adheap.bytes; /* the heap's memory is the budget's too */
    return free_bytes / 4 * 3 + (have > INT64_MAX / 2 ? INT64_MAX / 2 : have);
}

/* The device of o->backend: o->device, else (-1) the backend's own choice; a Vulkan
 * context's default is $KERN_VULKAN_DEVICE when it is set. */
static kern_status device_ordinal(kern_context *ctx, int *ordinal) {
    *ordinal = ctx->opts.device;
    if (*ordinal < -1)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "device %d is out of range (-1 for the default, "
                        "or 0 to the number of devices - 1)", *ordinal);
    const char *env = getenv("KERN_VULKAN_DEVICE");
    if (*ordinal == -1 && ctx->opts.backend == KERN_BACKEND_VULKAN && env && *env) {
        char *end;
        long n = strtol(env, &end, 10);
        if (*end || n < 0 || n > 1000)
            return rt_error(ctx, KERN_ERR_ARGUMENT,
                            "cannot create the vulkan device: KERN_VULKAN_DEVICE='%s' is not a "
                            "device number",
                            env);
        *ordinal = (int)n;
    }
    if (*ordinal == -1 && ctx->opts.backend == KERN_BACKEND_CUDA)
        *ordinal = 0;
    if (*ordinal > 0 && ctx->opts.backend == KERN_BACKEND_CPU)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "there is no cpu device %d: the cpu backend has one device (0)",
                        *ordinal);
    return KERN_OK;
}

kern_status kern_context_create(const kern_context_options *opts, kern_context **out) {
    if (!out)
        return KERN_ERR_ARGUMENT;
    *out = NULL;
    kern_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return KERN_ERR_OUT_OF_MEMORY;
    *out = ctx;
    rt_handle_add(ctx, RT_H_CONTEXT, ctx);
    ctx->opts = opts ? *opts : kern_context_options_default();
    if (ctx->opts.cache_dir) { /* the caller's string need not outlive the call */
        if (!(ctx->cache_dir = strdup(ctx->opts.cache_dir)))
            ctx->opts.no_cache = true;
        ctx->opts.cache_dir = ctx->cache_dir;
    }
    rt_list_init(&ctx->buffers);
    rt_list_init(&ctx->modules);
    rt_list_init(&ctx->tapes);
    rt_list_init(&ctx->graphs);
    rt_retire_init(&ctx->retired, RT_RETIRE_DEPTH);
    const char *bname = kern_backend_name(ctx->opts.backend);
    if (!bname)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "invalid backend %d", (int)ctx->opts.backend);
    if (!kern_backend_available(ctx->opts.backend)) {
        char names[128];
        return rt_error(ctx, KERN_ERR_UNSUPPORTED,
                        "backend '%s' is not available in this runtime (it has: %s)", bname,
                        kern_target_names(KERN_TARGET_DEVICE, names, sizeof names));
    }
    if (ctx->opts.threads < 0 || ctx->opts.threads > RT_MAX_THREADS)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "thread count %d is out of range (0 to %d)",
                        ctx->opts.threads, RT_MAX_THREADS);
    if (ctx->opts.ad_stack_size < 0 || ctx->opts.ad_stack_size > ((int64_t)1 << 31))
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "adstack size %lld is out of range (0 for the default, or 1 to 2^31 "
                        "entries, as kernc's --ad-stack-size)",
                        (long long)ctx->opts.ad_stack_size);
    if (ctx->opts.ad_memory_budget < 0)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "adstack memory budget %lld is negative (0 for the default, or bytes)",
                        (long long)ctx->opts.ad_memory_budget);
    if (ctx->opts.ad_strategy < KERN_AD_AUTO || ctx->opts.ad_strategy > KERN_AD_RECOMPUTE)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "adstack strategy %d is not one of KERN_AD_AUTO, KERN_AD_STORE_ALL, "
                        "KERN_AD_FEWER_SLOTS, KERN_AD_RECOMPUTE ($KERN_AD_STRATEGY: auto, store, "
                        "slots or recompute)",
                        ctx->opts.ad_strategy);
    char err[512];
    int ordinal;
    kern_status s = device_ordinal(ctx, &ordinal);
    if (s != KERN_OK)
        return s;
    if (ctx->opts.backend == KERN_BACKEND_CUDA) {
        s = rt_cuda_device_create(NULL, ordinal, &ctx->dev, err, sizeof err);
        if (s != KERN_OK)
            return rt_error(ctx, s, "cannot create the cuda device: %s", err);
        return KERN_OK;
    }
    if (ctx->opts.backend == KERN_BACKEND_VULKAN) {
        rt_vulkan_params vp = {ordinal, ctx->opts.validation, ctx->opts.staging};
        s = rt_vulkan_device_create(NULL, &vp, &ctx->dev, err, sizeof err);
        if (s != KERN_OK)
            return rt_error(ctx, s, "cannot create the vulkan device: %s", err);
        return KERN_OK;
    }
    int threads = ctx->opts.threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n < 1 ? 1 : n > RT_MAX_THREADS ? RT_MAX_THREADS : (int)n;
    }
    s = rt_cpu_device_create(threads, &ctx->dev, err, sizeof err);
    if (s != KERN_OK)
        return rt_error(ctx, s, "cannot create the cpu device: %s", err);
    ctx->opts.threads = threads;
    return KERN_OK;
}

static bool live(const kern_context *ctx, const char *fn) {
    return ctx && rt_handle_check(ctx, RT_H_CONTEXT, fn);
}

const char *kern_context_last_error(const kern_context *ctx) {
    if (ctx && !rt_handle_check(ctx, RT_H_CONTEXT, "kern_context_last_error"))
        return "kern_context_last_error: use of a released context (KERN_RUNTIME_CHECKS)";
    return ctx ? ctx->msg : "";
}

kern_context_options kern_context_get_options(const kern_context *ctx) {
    return live(ctx, "kern_context_get_options") ? ctx->opts : kern_context_options_default();
}

int kern_context_threads(const kern_context *ctx) {
    if (!live(ctx, "kern_context_threads") || !ctx->dev)
        return 0;
    return ctx->opts.backend == KERN_BACKEND_CPU ? rt_cpu_device_threads(ctx->dev) : 1;
}

void *kern_context_cuda_stream(const kern_context *ctx) {
    return live(ctx, "kern_context_cuda_stream") ? rt_cuda_stream(ctx->dev) : NULL;
}

const char *kern_context_device_name(const kern_context *ctx) {
    return live(ctx, "kern_context_device_name") && ctx->dev ? ctx->dev->desc : "";
}

int kern_context_device_index(const kern_context *ctx) {
    return live(ctx, "kern_context_device_index") && ctx->dev ? ctx->dev->ordinal : -1;
}

static kern_status sync_(kern_context *ctx) {
    rt_clear_error(ctx);
    if (!ctx->dev)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "the context was not created successfully");
    char err[512];
    kern_status s = ctx->dev->ops->sync(ctx->dev, err, sizeof err);
    if (s != KERN_OK)
        return rt_error(ctx, s, "device %s: %s", ctx->dev->ops->name, err);
    s = rt_collect(ctx, true);
    rt_retire_drain(&ctx->retired, ctx->dev);
    return s;
}

kern_status kern_sync(kern_context *ctx) {
    if (!live(ctx, "kern_sync") || !rt_enter(ctx, "kern_sync"))
        return KERN_ERR_ARGUMENT;
    kern_status s = sync_(ctx);
    rt_leave(ctx);
    return s;
}

kern_status kern_context_adstack_info(kern_context *ctx, kern_adstack_info *out) {
    if (!live(ctx, "kern_context_adstack_info"))
        return KERN_ERR_ARGUMENT;
    rt_clear_error(ctx);
    if (!out)
        return rt_error(ctx, KERN_ERR_ARGUMENT, "kern_context_adstack_info: out is NULL");
    const rt_adstack_heap *h = &ctx->adheap;
    out->heap_bytes = (int64_t)h->bytes;
    out->heap_allocs = h->allocs;
    out->last_stride = h->last_stride;
    out->last_slots = h->last_slots;
    out->last_count = h->last_n;
    out->last_strategy = h->last_strategy;
    out->last_store_all_bytes = h->last_store_all;
    out->last_needed_bytes = h->last_needed;
    out->last_budget = h->last_budget;
    out->last_recompute = h->last_recompute;
    return KERN_OK;
}

kern_status kern_context_adstack_last(kern_context *ctx, int s, int64_t *offset,
                                      int64_t *capacity) {
    if (!live(ctx, "kern_context_adstack_last"))
        return KERN_ERR_ARGUMENT;
    rt_clear_error(ctx);
    const rt_adstack_heap *h = &ctx->adheap;
    if (s < 0 || s >= h->last_n)
        return rt_error(ctx, KERN_ERR_ARGUMENT,
                        "kern_context_adstack_last: adstack %d is out of range (the last launch "
                        "with adstacks had %d)",
                        s, h->last_n);
    if (offset)
        *offset = h->last_layout[2 * s];
    if (capacity)
        *capacity = h->last_layout[2 * s + 1];
    return KERN_OK;
}

void kern_context_release(kern_context *ctx) {
    if (!live(ctx, "kern_context_release"))
        return;
    rt_handle_released(ctx);
    if (ctx->dev) {
        char err[512];
        ctx->dev->ops->sync(ctx->dev, err, sizeof err);
        rt_collect(ctx, false);
        while (ctx->tapes.next != &ctx->tapes)
            rt_tape_destroy((kern_tape *)ctx->tapes.next);
        rt_graphs_fini(ctx); /* before the buffers and modules it pins */
        while (ctx->modules.next != &ctx->modules)
            rt_module_destroy((kern_module *)ctx->modules.next);
        rt_orphans *orphans = NULL; /* buffers DLPack tensors still view outlive it */
        while (ctx->buffers.next != &ctx->buffers) {
            kern_buffer *b = (kern_buffer *)ctx->buffers.next;
            if (b->views > 0) {
                if (!orphans && !(orphans = calloc(1, sizeof *orphans)))
                    kern_oom(sizeof *orphans);
                orphans->dev = ctx->dev;
                rt_buffer_outlive_context(b, orphans);
            } else {
                rt_buffer_destroy(b, true);
            }
        }
        rt_adstack_heap_fini(&ctx->adheap, ctx->dev);
        rt_retire_fini(&ctx->retired, ctx->dev);
        if (!orphans)
            ctx->dev->ops->destroy(ctx->dev); /* else the last view's deleter does */
    }
    for (int i = 0; i < ctx->npending; i++)
        free(ctx->pending[i]);
    free(ctx->pending);
    free(ctx->retired.items);
    free(ctx->cache_dir);
    rt_handle_free(ctx);
}
