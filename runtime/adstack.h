/* adstack.h - per-launch sizing of the adstack heap (runtime contracts 1, 2, 4 and 8 of
 * docs/runtime-contracts.md), shared by every device.
 *
 * Before each launch of a kernel with adstacks (a gradient kernel) the runtime
 *   1. evaluates each adstack's SizeExpr with the launch's arguments (rt_adstack_args,
 *      rt_adstack_layout): scalar integer arguments, shapes, and array elements where the
 *      device's memory is host memory (the CPU); a negative value means capacity 0;
 *   2. lays the stacks out for `slots` thread slots (the device's ad_slots), in table
 *      order, every step checked for int64 overflow (contract 8), in one of two ways:
 *      slot slices (the CPU): one slice per slot, stack s at an offset aligned to its
 *        element size (1, 4 or 8 bytes) holding capacity x element size bytes; the
 *        stride (bytes per slot) is the end of the last stack rounded up to 64 bytes, so
 *        slices never share a cache line; the heap is stride x slots bytes;
 *      slot-major (GPUs, rt_device.ad_slot_major, docs/gpu-abi.md): stack s takes
 *        capacity x slots x element size bytes at an offset aligned to 256 bytes, entry
 *        k of slot w at offset + (k x slots + w) x element size, so neighbouring threads
 *        touch neighbouring addresses; the heap is the end of the last stack rounded up
 *        to 256 bytes, and the stride reported is the sum of capacity x element size;
 *   3. makes sure the context's heap holds those bytes (rt_adstack_reserve):
 *      the heap grows to max(2 x old, needed), or exactly `needed` when that doubled
 *      allocation fails, and is kept for later launches; the superseded heap is retired
 *      with the completion point of its last launch (retire.h), never freed while a
 *      launch may still use it.
 * The layout goes to the device by value (rt_launch.ad_layout: offset and capacity per
 * stack). */
#ifndef KERN_RT_ADSTACK_H
#define KERN_RT_ADSTACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/sizeexpr.h"
#include "device.h"
#include "meta.h"
#include "retire.h"

/* The context's adstack heap on its device, and what the last sized launch asked for. */
typedef struct rt_adstack_heap {
    void *mem;         /* the device allocation; NULL before the first launch with adstacks */
    size_t bytes;      /* its size */
    uint64_t last_use; /* completion point of the last launch that used it */
    int64_t allocs;    /* heap allocations made so far (the first one included) */
    int pins;          /* graphs that use it: it may not grow or move (contract 9) */
    /* the last launch with adstacks */
    int64_t last_stride, last_slots;
    int last_n;
    int64_t *last_layout; /* 2 x last_n: offset, capacity (malloc'd, grows) */
    int last_cap;
    /* how the last launch with adstacks kept them (kern_adstack_info) */
    int last_strategy;
    int64_t last_store_all, last_needed, last_budget;
    int64_t limit; /* growth by doubling stays at or below it (the budget; 0: none) */
    double last_recompute;
} rt_adstack_heap;

/* Fills args[i] for parameter i of k from the launch's arguments: an integer or bool
 * scalar's value, an array's shape, and its data when host_memory (the device's
 * allocations are host pointers), else NULL. */
void rt_adstack_args(const kern_meta_kernel *k, const rt_launch_arg *la, bool host_memory,
                     sz_arg *args);

/* The number of work items of task t for a launch's arguments (args as filled by
 * rt_adstack_args): 1 for a serial task; for a parallel task the product over its
 * dimensions of max(0, extent) (meta.h), evaluated on the host. -1 when it is not known
 * there: an extent is unknown (`?`, or metadata without extents), reads array elements
 * whose data is not host-readable (args[i].data NULL: the device's memory is not host
 * memory) or cannot be evaluated. RT_COUNT_OVERFLOW when a range's length (hi - lo) or
 * the product of the lengths does not fit in int64: the launch is an error, never a loop
 * that silently runs no iterations (a dimension of 0 items makes the product 0 only when
 * it comes before the overflow). */
enum { RT_COUNT_OVERFLOW = -2 };
int64_t rt_task_count(const kern_meta_task *t, const sz_arg *args, int nargs);

/* Evaluates k's SizeExprs and lays the stacks out for `slots` slots (see the top of this
 * file; slot_major picks the layout): layout[2s] = offset of stack s (in a slot's slice,
 * or in the heap when slot-major), layout[2s + 1] = its capacity in entries, *stride =
 * a slot's bytes (0 when k has no adstacks) and, when bytes is not NULL, *bytes = the
 * heap's size. m (may be NULL) gives the source file for messages. KERN_ERR_ARGUMENT
 * when an expression cannot be evaluated (an array read out of bounds, a division by
 * zero, a value that overflows) and KERN_ERR_OUT_OF_MEMORY when the slice or the heap
 * does not fit in int64 bytes (or the address space); the message names the kernel and
 * the loop, or the stride and the slots. */
kern_status rt_adstack_layout(const kern_meta *m, const kern_meta_kernel *k, const sz_arg *args,
                              int nargs, bool slot_major, int64_t slots, int64_t *layout,
                              int64_t *stride, size_t *bytes, char *err, size_t errlen);
/* rt_adstack_layout with capacities already known for some stacks: known[s] (when known is
 * not NULL and known[s] != RT_ADSTACK_UNKNOWN) is used instead of evaluating stack s's
 * SizeExpr (a device sizer's result; negative counts as 0). */
#define RT_ADSTACK_UNKNOWN INT64_MIN
kern_status rt_adstack_layout_known(const kern_meta *m, const kern_meta_kernel *k,
                                    const sz_arg *args, int nargs, const int64_t *known,
                                    bool slot_major, int64_t slots, int64_t *layout,
                                    int64_t *stride, size_t *bytes, char *err, size_t errlen);

/* stride x slots, checked: KERN_ERR_OUT_OF_MEMORY with a message naming the kernel, the
 * stride and the slots when it does not fit in a size_t (or in PTRDIFF_MAX). */
kern_status rt_adstack_heap_size(const char *kernel, int64_t stride, int64_t slots, size_t *bytes,
                                 char *err, size_t errlen);

/* Makes sure h holds at least `bytes` (see the top of this file). On failure the old heap
 * stays and the status is KERN_ERR_OUT_OF_MEMORY with a message naming the kernel, the
 * bytes asked, the stride and the slots. */
kern_status rt_adstack_reserve(rt_adstack_heap *h, rt_device *d, rt_retire_queue *q,
                               const char *kernel, size_t bytes, int64_t stride, int64_t slots,
                               char *err, size_t errlen);

/* Records the layout of the launch just sized (for kern_context_adstack_info); false when
 * host memory runs out (the record is then left empty). */
bool rt_adstack_remember(rt_adstack_heap *h, const int64_t *layout, int n, int64_t stride,
                         int64_t slots);

/* Frees the heap; the device is idle. */
void rt_adstack_heap_fini(rt_adstack_heap *h, rt_device *d);

#endif
