/* abi.h - the contract between generated CPU code and the runtime (no LLVM here).
 *
 * A kernel K with tasks 0..n-1 compiles to, per task t, two functions with C linkage:
 *
 *   int64_t kern_<K>__t<t>_count(void *const *args);
 *       the number of work items of the task: for a PARALLEL task the extent of its first
 *       dimension, max(0, hi0 - lo0); for a SERIAL task 1.
 *   void kern_<K>__t<t>(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
 *                       void *ad_slice, const int64_t *ad_layout);
 *       runs work items [begin, end) (0 <= begin <= end <= count): for a PARALLEL task the
 *       indices lo0 + begin .. lo0 + end - 1 of the first dimension, each with the full
 *       ranges of the other dimensions; a SERIAL task is called once with (0, 1).
 *       Kernels with adstacks (gradient kernels): ad_slice is the calling worker's slice of
 *       the adstack heap (one work item runs at a time per worker, and its pushes and pops
 *       balance, so a slice serves every item the worker runs); ad_layout holds, per
 *       adstack s of the kernel's table, ad_layout[2s] = the byte offset of stack s in the
 *       slice and ad_layout[2s + 1] = its capacity in entries (the evaluated SizeExpr).
 *       Each work item starts with every stack empty. Kernels without adstacks ignore both
 *       (the runtime passes NULL).
 *       SIMD code (docs/backend-cpu.md) runs W work items at once per worker; such a module
 *       defines `const int32_t kern_<K>__lanes = W` for every kernel with adstacks and SIMD
 *       tasks, and the runtime sizes each stack of a slice for W items: entry k of lane l
 *       at ad_slice + ad_layout[2s] + (k * W + l) * size, ad_layout[2s + 1] still the
 *       capacity of one item. Without the symbol W is 1 (the layout above).
 *   Both recompute the kernel's uniform values from args; the runtime calls count once per
 *   launch and then the body on chunks from its worker threads, tasks in order, with a
 *   barrier between tasks.
 *
 * <K> is the kernel name with '.' written as "__" (simulate.grad -> simulate__grad).
 *
 * args[i] points at parameter i: for an array a kern_array_desc, for a scalar its value
 * (bool as one byte, i32/u32/f32 as 4 bytes, i64/f64 as 8 bytes).
 *
 * Device-side errors (debug-mode bounds, division by zero, shifts; adstack overflows
 * later) go to *err: the first error wins (an atomic compare-and-swap of code from 0),
 * then line/col/a/b are written. An adstack overflow (a push onto a full stack) records
 * KERN_DEVERR_ADSTACK with line/col of the loop and b = the capacity, and raises a to the
 * depth the stack reached (an atomic max, so the record ends with the deepest push of any
 * thread); the push writes nothing, the depth keeps counting, and a pop from beyond the
 * capacity yields 0. Code that hits an error skips the faulting operation
 * (a load yields 0, a store is dropped) and carries on; the runtime reports the record
 * when the launch completes. */
#ifndef KERN_ABI_H
#define KERN_ABI_H

#include <stdint.h>

typedef struct kern_array_desc {
    void *data;
    int64_t shape[4]; /* extents; unused dimensions are 1 */
} kern_array_desc;

enum kern_device_error {
    KERN_DEVERR_NONE = 0,
    KERN_DEVERR_BOUNDS = 1,   /* a = index, b = extent, dim = the dimension */
    KERN_DEVERR_DIV_ZERO = 2, /* integer division or remainder by zero */
    KERN_DEVERR_SHIFT = 3,    /* a = shift amount, b = bit width */
    KERN_DEVERR_ADSTACK = 4,  /* a = depth needed, b = capacity */
};

typedef struct kern_err_record {
    int32_t code;  /* enum kern_device_error; 0 = no error */
    uint32_t line; /* source location of the faulting operation */
    uint32_t col;
    int32_t dim; /* BOUNDS: the dimension */
    int64_t a, b;
} kern_err_record;

typedef void (*kern_task_fn)(void *const *args, int64_t begin, int64_t end, kern_err_record *err,
                             void *ad_slice, const int64_t *ad_layout);
typedef int64_t (*kern_count_fn)(void *const *args);

#endif
