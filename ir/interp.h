/* interp.h - the reference interpreter of the IR.
 *
 * Runs one kernel of a module on host data, exactly as docs/ir.md specifies each op, so
 * that the lowering and the passes can be tested by running what they produce and
 * comparing with plain C (tests/test_interp.c). It is a reference, not a runtime: every
 * behaviour the language leaves undefined (an out-of-bounds index, an integer division
 * by zero, a shift by the bit width or more, a while loop that does not stop) is
 * reported as an error naming the op's source location, never executed. A float -> int
 * cast out of range gives an undefined value (poison, since casts are speculated) whose
 * use where it matters (stored, an index, a condition, ...) is such an error.
 * docs/interp.md lists the choices.
 *
 * Execution order: the kernel body's top-level ops in order; a `parallel` task runs its
 * iterations one after the other in row-major index order (the first dimension
 * outermost). Any order is a valid execution of a parallel task; this one is fixed so
 * that results are deterministic.
 *
 * Adstacks (adpush/adpop) are per work item: emptied at the start of each parallel
 * index and each serial task. They grow without bound: the interpreter does not model
 * adstack capacities (SizeExprs), so it never reports an overflow; a pop from an empty
 * stack is a run-time error.
 *
 * The interpreter verifies the module first (ir_verify) and refuses IR that does not
 * verify. It numbers the kernel's values in the scratch fields ir_value.id; it changes
 * nothing else in the module. */
#ifndef KERN_IR_INTERP_H
#define KERN_IR_INTERP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir.h"

/* One kernel argument, bound to the kernel parameter of the same position.
 *   scalar: kind is the parameter's scalar kind; the value is in `i` (bool 0/1, i32, u32,
 *           i64) or `f` (f32, f64; an f32 is rounded to float when bound);
 *   array:  kind is the element kind, rank 1..4, shape[0..rank-1] the extents (each
 *           0..INT32_MAX), data points to the elements, row-major, in their C types:
 *           bool (one byte, 0 or 1), int32_t, uint32_t, int64_t, float, double. The
 *           interpreter reads and writes the elements in place. */
typedef struct ir_interp_arg {
    kern_tykind kind;
    int rank;  /* 0: a scalar */
    int64_t i; /* scalar value of a bool/integer parameter */
    double f;  /* scalar value of a float parameter */
    int64_t shape[KERN_MAX_RANK];
    void *data;
} ir_interp_arg;

static inline ir_interp_arg ir_interp_int(kern_tykind kind, int64_t v) {
    ir_interp_arg a = {kind, 0, v, 0.0, {0, 0, 0, 0}, NULL};
    return a;
}
static inline ir_interp_arg ir_interp_float(kern_tykind kind, double v) {
    ir_interp_arg a = {kind, 0, 0, v, {0, 0, 0, 0}, NULL};
    return a;
}
/* An array of the given element kind; unused extents are 0. */
static inline ir_interp_arg ir_interp_array(kern_tykind elem, void *data, int rank, int64_t d0,
                                            int64_t d1, int64_t d2, int64_t d3) {
    ir_interp_arg a = {elem, rank, 0, 0.0, {d0, d1, d2, d3}, data};
    return a;
}

typedef struct ir_interp_options {
    uint64_t max_while_iters; /* iterations of one while loop before "did not terminate";
                                 0: the default, 10^8 */
    uint64_t ops_executed;    /* out: ops executed by the run (for benchmarks) */
    uint64_t max_ops;         /* ops executed before "exceeded the limit"; 0: none */
    uint64_t loop_trips;      /* out: a fingerprint of the trip counts of every for and while
                                 loop run (a sum over runs of a hash of the loop op and its
                                 trip count): runs of one kernel that differ in it took some
                                 loop a different number of times (gradcheck's non-smooth
                                 points) */
} ir_interp_options;

/* Runs kernel `kernel` of m with nargs arguments (one per parameter). Returns true on
 * success; otherwise writes a message to err (when errlen > 0) and returns false.
 * Run-time errors read "LINE:COL: @kernel: what", e.g.
 *   "4:9: @k: index 10 is out of bounds for dimension 0 of %x (extent 10) in store".
 * Arrays written before an error keep what was written. opts may be NULL. */
bool ir_interp_run(const ir_module *m, const char *kernel, ir_interp_arg *args, int nargs,
                   char *err, size_t errlen);
bool ir_interp_run_opts(const ir_module *m, const char *kernel, ir_interp_arg *args, int nargs,
                        ir_interp_options *opts, char *err, size_t errlen);

#endif
