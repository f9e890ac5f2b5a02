/* rt.h - the runtime's internal objects behind the opaque handles of kern.h, and the
 * error-message helpers every API function uses. Not installed; the JIT library does not
 * include it (provider.h declares what it needs).
 *
 * Every API function follows one shape: clear the context's message, check arguments,
 * do the work with one `goto cleanup` path, and return a status; failures set the
 * message through rt_error. */
#ifndef KERN_RT_H
#define KERN_RT_H

#include <stdbool.h>
#include <stdint.h>

#include "../include/kern.h"
#include "abi.h"
#include "adstack.h"
#include "device.h"
#include "meta.h"
#include "provider.h"
#include "retire.h"

enum { RT_MSG_SIZE = 2048 };

typedef struct rt_list {
    struct rt_list *prev, *next;
} rt_list;

/* A launch whose completion has not been observed yet (or a graph's replay: its errors
 * are the graph's records). */
typedef struct rt_pending {
    uint64_t point;
    const kern_kernel *kernel;
    kern_err_record rec;
    kern_graph *graph; /* a replay of copy `set` of this graph */
    int set;
} rt_pending;

/* A launch checked and sized, ready to submit: what kern_launch computed, kept by a graph
 * for its replays (graph.c). */
typedef struct rt_ready {
    kern_kernel *k;
    rt_launch_arg *la;
    kern_buffer **bufs; /* per argument: its buffer, or NULL for a scalar */
    int nargs;
    int64_t *counts; /* per task: host-known work items, -1 unknown */
    int64_t *layout; /* 2 x nadstacks */
    int64_t stride, slots;
} rt_ready;

/* A new pending entry, with room for it in ctx->pending (the caller appends it once its
 * submission succeeded); NULL when host memory runs out. */
rt_pending *rt_pending_new(kern_context *ctx);
/* Submits r (its adstacks in the context's heap) and stamps its buffers, module and the
 * heap with the completion point; the caller collects. */
kern_status rt_submit(kern_context *ctx, const rt_ready *r);
/* Records r in the graph being captured (a deep copy). */
kern_status rt_graph_record(kern_graph *g, const rt_ready *r);
/* Frees every graph of the context (it is idle). */
void rt_graphs_fini(kern_context *ctx);
/* Frees a tape (the context's release), whatever it is doing. */
void rt_tape_destroy(kern_tape *t);
/* The error records of a replay of copy `set` of a graph that completed: formats the
 * first into msg and counts the others. */
int rt_graph_errors(const kern_graph *g, int set, char *msg, size_t size);

struct kern_graph {
    rt_list link;
    kern_context *ctx;
    rt_ready *launches;
    int n, cap;
    void *dev;             /* the device's graph (NULL: replayed launch by launch) */
    int nsets;             /* its copies, each with its own records */
    int used;              /* the copies replayed so far (0 .. used - 1) */
    kern_err_record *recs; /* nsets x n records (host view) */
    uint64_t set_point[RT_GRAPH_MAX_SETS]; /* completion point of each copy's last replay */
    uint64_t last_point; /* completion point of its last replay */
    bool ended;
};

struct kern_context {
    kern_context_options opts;
    rt_device *dev;        /* NULL when creation failed */
    char msg[RT_MSG_SIZE]; /* the last failure's message */
    rt_retire_queue retired;
    rt_pending **pending; /* launches in flight, oldest first */
    int npending, cappending;
    /* a device error observed without being reported yet (by a release, say) */
    bool deferred;
    int deferred_more; /* further device errors observed with it */
    char deferred_msg[RT_MSG_SIZE];
    rt_list buffers, modules, tapes; /* everything made from the context, freed with it */
    rt_adstack_heap adheap;          /* the adstack heap of the context's device (adstack.h) */
    uint64_t write_clock;            /* stamps kern_buffer.written */
    kern_graph *capture;             /* the graph being captured (kern_graph_begin) */
    rt_list graphs;
    int64_t device_sizings; /* sizer kernels run (kern_context_adstack_info) */
    uintptr_t owner;        /* checked mode: the thread inside the API (handles.c) */
    int depth;              /* checked mode: its nested API calls */
    char *cache_dir;        /* opts.cache_dir's copy (NULL: none) */
};

struct kern_buffer {
    rt_list link;
    kern_context *ctx;
    kern_dtype dtype;
    int rank;
    int64_t shape[KERN_MAX_DIMS]; /* unused dimensions 1 */
    int64_t count;
    size_t bytes;
    void *mem;         /* the device allocation */
    uint64_t last_use; /* completion point of the last launch that used it */
    uint64_t written;  /* the context's write clock when it was last written (or may have
                          been: a launch of a kernel that writes it, kern_buffer_write) */
    int pins;          /* graphs that use it: released only with the last of them */
    bool released;     /* kern_buffer_release came while it was pinned */
    bool wrapped;      /* mem is not the device's (kern_buffer_wrap): never freed by kern */
    void (*release)(void *user); /* wrapped: the owner's release, after retirement */
    void *user;
    int views;        /* DLPack tensors made from it (kern_buffer_to_dlpack) still alive */
    bool view_orphan; /* released while views remain: the last view destroys it */
    struct rt_orphans *orphans; /* its context was released while views remained: the
                                   device it lives on (rt_buffer_outlive_context) */
};

/* The device of a released context, kept while DLPack views of its buffers live: the
 * last view's deleter frees the buffer and, with the last such buffer, the device. */
typedef struct rt_orphans {
    rt_device *dev;
    int buffers; /* buffers still viewed */
} rt_orphans;

/* A device sizer's result for one adstack of a kernel, kept while the arguments it read
 * are unchanged (runtime contract 3 of docs/runtime-contracts.md: no round trip when
 * nothing was written). */
typedef struct rt_sized {
    bool valid;
    int64_t value;
    int nargs;
    rt_launch_arg *args; /* the launch's arguments when it was sized */
    uint64_t *written;   /* per array argument: its buffer's write clock then */
} rt_sized;

struct kern_kernel {
    kern_module *mod;
    const kern_meta_kernel *meta;
    void *handle;    /* the device's (get_kernel) */
    rt_sized *sized; /* per adstack: the last device sizing (NULL until one) */
    /* K.grad: its checkpointed variant K.grad.ckpt in the same module, looked up at the
     * first launch over the memory budget (ckpt_looked); NULL when there is none */
    struct kern_kernel *ckpt;
    bool ckpt_looked;
};

/* The gradients of a JIT module, each built the first time it is looked up (jit.c). */
typedef struct rt_lazy_grads {
    /* compiles `grad` ("K.grad", "K.jvp", "K.grad.jvp") alone into a module of ctx, *out; on failure the context's
     * message says why */
    kern_status (*build)(kern_context *ctx, void *state, const char *grad, kern_module **out);
    void (*free)(void *state);
    void *state;
    char **names;        /* K.jvp of each kernel; K.grad and K.grad.jvp of each kernel that
                            passed the global-access check */
    kern_module **built; /* per name: its module once built, owned by this one */
    int nnames;
    /* per primal kernel: K.grad.ckpt's module once built (rt_module_lazy_ckpt), owned */
    kern_module **ckpt;
    bool *ckpt_tried;
} rt_lazy_grads;

/* K.grad.ckpt for K.grad of the lazy module `parent` (docs/autodiff.md): built alone the
 * first time a launch needs it; NULL when the kernel has none or it cannot be built (the
 * context's message is left as it was). */
kern_kernel *rt_module_lazy_ckpt(kern_module *parent, const char *name);

struct kern_module {
    rt_list link;
    kern_context *ctx;
    kern_meta *meta;
    void *code;           /* the device's code object (load_code) */
    kern_kernel *kernels; /* one per meta kernel, same order */
    int nkernels;
    uint64_t last_use;
    int pins;                 /* graphs that use its kernels */
    bool released;            /* kern_module_release came while it was pinned */
    rt_lazy_grads *lazy;      /* JIT modules: gradients built on first lookup */
    kern_module *lazy_parent; /* the module whose lazy gradients this one is */
};

/* Checked mode (handles.c, KERN_RUNTIME_CHECKS=1): a registry of live handles, a
 * quarantine for released objects, one thread per context at a time. Off checked mode each
 * call is a test of a flag. */
enum { RT_H_CONTEXT = 1, RT_H_BUFFER, RT_H_MODULE, RT_H_KERNEL, RT_H_GRAPH, RT_H_TAPE };
bool rt_checks_enabled(void);
const char *rt_handle_kind_name(int kind);
/* A handle handed out (ctx: the context that made it, or the context itself). */
void rt_handle_add(const void *p, int kind, const kern_context *ctx);
/* A handle released whose memory is freed elsewhere (the kernels of a module). */
void rt_handle_released(const void *p);
/* free(p) for an object that was a handle: in checked mode it waits in the quarantine. */
void rt_handle_free(void *p);
/* Whether p is a live handle of kind (always true off checked mode, and for NULL);
 * otherwise says so (on stderr, and in the context that made it when that is alive). */
bool rt_handle_check(const void *p, int kind, const char *fn);
/* Checked mode: enters the API on ctx from this thread; false (said on stderr) when
 * another thread is inside it. Every true is matched by rt_leave. */
bool rt_enter(kern_context *ctx, const char *fn);
void rt_leave(kern_context *ctx);

/* Checks a shared object's image before dlopen (elfcheck.c): false with the reason when
 * the dynamic loader could read outside it. */
bool rt_elf_check(const void *data, size_t size, char *err, size_t errlen);
/* Whether [vaddr, vaddr + len) lies in a loadable segment's memory of a checked image. */
bool rt_elf_in_memory(const void *data, size_t size, uint64_t vaddr, uint64_t len);

/* rt_error (provider.h) sets the context's message and returns its status. */
void rt_clear_error(kern_context *ctx);
/* The file, line and column part of messages: "FILE:L:C" or "L:C" without a source. */
void rt_format_loc(char *buf, size_t size, const kern_meta *m, uint32_t line, uint32_t col);
/* The bytes the adstack heap and a tape's saved ranges may take now (docs/autodiff.md):
 * kern_context_options.ad_memory_budget, else 3/4 of the device's free memory plus the
 * heap it holds (CPU: the free physical memory); INT64_MAX when the device cannot tell. */
int64_t rt_ad_budget(kern_context *ctx);
/* The bytes the context's tapes keep of overwritten ranges (tape_save.c): the budget's too. */
int64_t rt_tapes_saved(kern_context *ctx);
/* $KERN_AD_STRATEGY as a kern_ad_strategy (auto when unset; -1 when unknown). */
int rt_ad_strategy_env(void);
/* Formats a device error record of kernel k into buf. */
void rt_format_device_error(char *buf, size_t size, const kern_kernel *k,
                            const kern_err_record *rec);
/* Collects the launches whose completion points have passed (wait_all: after waiting
 * for all of them); the first device error among them becomes the context's message and
 * status (KERN_ERR_DEVICE), or is deferred when `report` is false. Returns the status. */
kern_status rt_collect(kern_context *ctx, bool report);
kern_dtype rt_dtype_of(const kern_type *t);
/* kern_buffer_wrap's work (also for DLPack tensors), fn naming the caller in messages. */
kern_status rt_buffer_wrap(kern_context *ctx, const char *fn, kern_dtype dtype, int rank,
                           const int64_t *shape, void *data, void (*release)(void *user),
                           void *user, kern_buffer **out);
/* Frees a buffer (unlinking it from its context); unless device_idle, memory that a
 * launch in flight may use is retired. */
void rt_buffer_destroy(kern_buffer *b, bool device_idle);
/* Context release, b still viewed by DLPack tensors: b leaves the context and keeps its
 * memory; o (shared by such buffers of one context) keeps the device. */
void rt_buffer_outlive_context(kern_buffer *b, rt_orphans *o);
/* A view's deleter on such a buffer: frees it, and the device with the last one. */
void rt_orphan_destroy(kern_buffer *b);
/* Frees a module; the caller has waited for its launches. */
void rt_module_destroy(kern_module *m);
/* Waits for the last launch that used b (its completion point); the device's error as the
 * context's message. */
kern_status rt_buffer_wait(kern_buffer *b);
/* Sets every byte of b to zero, after the launches that use it (kern_buffer_write's
 * ordering, without a host copy). */
kern_status rt_buffer_zero(kern_buffer *b);
/* "f32[3, 4]" */
void rt_format_buffer(char *buf, size_t size, const kern_buffer *b);

void rt_list_init(rt_list *l);
void rt_list_push(rt_list *head, rt_list *node);
void rt_list_remove(rt_list *node);

#endif
