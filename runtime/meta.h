/* meta.h - module metadata: what a compiled module holds (kernels, parameters, tasks,
 * source locations), independent of the code. The compiler fills it from the IR; the
 * runtime reads it for JIT modules (in memory) and AOT modules (serialized into the
 * module file as text). No LLVM here.
 *
 * Text form (one record per line, fields separated by single spaces, names are
 * identifiers possibly containing '.'):
 *   kern-meta 1
 *   source PATH-to-end-of-line         (optional) spaces as they are; a backslash and
 *                                     bytes below 0x20 or 0x7f as \HH (two hex digits)
 *   kernel NAME LINE COL NPARAMS NTASKS
 *   param NAME TYPE NOGRAD [WRITTEN]  TYPE as in types.h: f32, i32[], f64[,], ...; NOGRAD 0|1;
 *                                     WRITTEN 0|1: whether the kernel may write the array
 *                                     (absent: it may; printed only as 0)
 *   task parallel|serial NDIMS LINE COL [spread]
 *   extent D SIZEEXPR | extent D ?    after a parallel task: none, or one per dimension
 *   adstack TYPE LINE COL SIZEEXPR    TYPE a scalar type; SIZEEXPR to the end of the line
 *   graderror MESSAGE-to-end-of-line  (optional, at most once)
 *   access P read|write none | access P read|write RANGE...   (optional, see below)
 *   end
 * A kernel's params, tasks, adstacks (gradient kernels: the adstack table in order, LINE
 * COL the loop's location, SIZEEXPR the capacity in the text form of common/sizeexpr.h)
 * and graderror (a primal kernel whose K.grad was not built: why) follow its kernel line
 * in that order. The parser parses every SizeExpr and checks its leaves against the
 * kernel's parameters (kern_meta_check_adstacks). Metadata that the compiler builds in
 * memory (backends/meta_ir.c) carries the trees already (kern_meta_adstack.expr,
 * kern_meta_task.extent_expr) besides their text; only their leaves are checked.
 *
 * A parallel task's `extent` lines (D = 0 .. NDIMS-1 in order) give the number of work
 * items along each dimension (hi - lo of its range; a negative value counts as 0) as a
 * SizeExpr over the kernel's parameters, or `?` where the compiler could not express it,
 * so the runtime can compute the work-item count on the host (rt_task_count, adstack.h).
 * `spread` (parallel tasks only; kern_meta_task.spread) marks a task with no per-block
 * state to amortize: the GPUs launch it with a thread per work item when it has no
 * adstacks. Metadata without it (older files) launches the resident grid.
 * Metadata without extent lines (older files) parses with every extent unknown.
 *
 * `access` lines (after graderror; at most one per array parameter P and kind) give the
 * elements a launch may read or write (stores and atomics write; atomics also read) of
 * array parameter P, for the gradient tape (runtime/tape_save.c): `none`, or one RANGE
 * per dimension of P, `*` for the whole dimension or `LO HI`, two SizeExprs giving the
 * half-open index range [LO, HI) over the kernel's scalar parameters and extents. A
 * parameter and kind without a line (older files) may touch the whole array. */
#ifndef KERN_META_H
#define KERN_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/arena.h"
#include "../common/sizeexpr.h"
#include "../common/types.h"
#include "../common/util.h"

typedef struct kern_meta_param {
    char *name;
    const kern_type *type;
    bool nograd;
    bool readonly; /* an array the kernel never stores to or updates (WRITTEN 0); false when
                      it may, or when the metadata does not say */
    char *view;    /* a parameter of a vector, matrix or struct type: its declared type, and
                      the extents its last ntail dimensions must have (NULL, 0 otherwise) */
    int ntail;
    int64_t tail[2];
} kern_meta_param;

enum { KERN_META_MAX_TASK_DIMS = 8 };

typedef struct kern_meta_task {
    bool parallel;
    /* parallel: the task keeps no per-block state that its work items share (no array it
     * only adds floats into, which the GPUs sum per block): a launch without adstacks
     * gives it a thread per work item (rt_gpu_grid) instead of a resident grid whose
     * threads stride over the items */
    bool spread;
    int ndims; /* parallel: 1..8; serial: 0 */
    uint32_t line, col;
    /* parallel: per dimension d < ndims, the work items along d as SizeExpr text (NULL =
     * unknown) and its tree (in kern_meta.mem: from the compiler, or parsed; NULL until
     * parsed or when unknown) */
    char *extent[KERN_META_MAX_TASK_DIMS];
    sz_expr *extent_expr[KERN_META_MAX_TASK_DIMS];
} kern_meta_task;

typedef struct kern_meta_adstack {
    const kern_type *type; /* a scalar type: the element */
    uint32_t line, col;    /* the loop it belongs to */
    char *cap;             /* SizeExpr text */
    sz_expr *expr;         /* the tree of cap (in kern_meta.mem): from the compiler, or
                            * parsed from cap; NULL until parsed */
} kern_meta_adstack;

/* What a launch may read or write of one array parameter (the `access` lines). */
typedef struct kern_meta_access {
    int param;  /* an array parameter */
    bool write; /* the elements it may write (else read) */
    bool none;  /* it touches no element */
    /* per dimension below the parameter's rank: the range [lo, hi) (trees in
     * kern_meta.mem), both NULL for the whole dimension */
    sz_expr *lo[KERN_MAX_RANK], *hi[KERN_MAX_RANK];
} kern_meta_access;

typedef struct kern_meta_kernel {
    char *name;
    uint32_t line, col;
    kern_meta_param *params;
    int nparams;
    kern_meta_task *tasks;
    int ntasks;
    kern_meta_adstack *adstacks; /* may be NULL when nadstacks is 0 */
    int nadstacks;
    char *grad_error; /* primal kernels: why K.grad was not built; NULL otherwise */
    int ad_lanes;     /* CPU code: work items one worker runs at once (SIMD lanes; 0 or 1:
                         one), read from the code's kern_<K>__lanes when it is loaded; the
                         adstack slices hold that many items' stacks. Not in the text form. */
    kern_meta_access *access; /* the access lines, in order (may be NULL when naccess is 0) */
    int naccess;
} kern_meta_kernel;

typedef struct kern_meta {
    char *source; /* may be NULL */
    kern_meta_kernel *kernels;
    int nkernels;
    arena mem; /* the parsed SizeExprs (zero-initialized is an empty arena) */
} kern_meta;

/* Parses the text form; on error returns NULL and writes a message (with the line
 * number) to err. Never crashes on malformed input. */
kern_meta *kern_meta_parse(const char *text, size_t len, char *err, size_t errlen);
void kern_meta_print(kern_buf *out, const kern_meta *m);
void kern_meta_free(kern_meta *m);
/* Parses every adstack's SizeExpr and every task extent that has no tree yet (metadata
 * read from text) and checks its leaves against the kernel's
 * parameters: (param P) a scalar integer or bool parameter, (dim P D) an array parameter
 * with D below its rank, (read P I...) an integer array parameter read with one index
 * per dimension. Also checks each task's NDIMS (parallel 1..8, serial 0) and that no
 * extent is set beyond them. False with a message naming the kernel and the adstack or
 * task. */
bool kern_meta_check_adstacks(kern_meta *m, char *err, size_t errlen);
const kern_meta_kernel *kern_meta_find(const kern_meta *m, const char *name);
/* The access line of parameter `param` and kind `write` of k; NULL when there is none
 * (then the launch may touch the whole array). */
const kern_meta_access *kern_meta_access_of(const kern_meta_kernel *k, int param, bool write);
/* The symbol of task t of kernel `kernel` (abi.h): writes "kern_<K>__t<t>" or, with
 * count, "kern_<K>__t<t>_count" into buf. */
void kern_meta_symbol(char *buf, size_t size, const char *kernel, int task, bool count);
/* The symbol of the sizer kernel of adstack s of `kernel` on GPUs (docs/gpu-abi.md):
 * "kern_<K>__s<s>". */
void kern_meta_sizer_symbol(char *buf, size_t size, const char *kernel, int s);
/* The symbol of the replica sum of task t of `kernel` on Vulkan (docs/spirv-abi.md):
 * "kern_<K>__r<t>". */
void kern_meta_replica_sum_symbol(char *buf, size_t size, const char *kernel, int t);

#endif
