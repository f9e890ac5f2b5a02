/* fake_device.h - the fake asynchronous device of the tests (tests/fake_device.c), one
 * implementation of rt_device_ops that every test needing a device other than the CPU
 * builds on, configured at creation (fake_device_config).
 *
 * It behaves like a GPU as far as the runtime can tell: launches are recorded, not run;
 * their completion points pass only when the test says so (fake_complete), or when the
 * runtime blocks on them (wait, sync: a blocking wait is what makes a device finish, so
 * the fake completes up to the point waited for, and counts the wait). When a launch's
 * point passes the fake writes the error record the test set for it (fake_set_error), as
 * a GPU would have written it during the launch, so a record is observable only after
 * completion (runtime contract 7, docs/runtime-contracts.md). Memory is host memory
 * (calloc) so the tests can look at it, whether or not the runtime is told it may read
 * it (host_memory); allocations above a limit fail, and every free is remembered.
 * Adstacks are slot-major or slot slices (slot_major); ad_slots follows docs/gpu-abi.md:
 * min(resident, max_items rounded up to blocks of `block`), the resident threads when
 * max_items is unknown; slot slices: resident. With a sizer the fake has size_adstack.
 * Code of any kind is accepted (a HOST provider is released with the module); a kernel
 * handle is its metadata. The fake keeps no state outside its fake_device. */
#ifndef KERN_TEST_FAKE_DEVICE_H
#define KERN_TEST_FAKE_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "../runtime/rt.h"

enum { FAKE_MAX_LAUNCHES = 512, FAKE_MAX_FREED = 1024, FAKE_MAX_STACKS = 8, FAKE_MAX_TASKS = 8 };

typedef struct fake_launch_rec {
    uint64_t point;
    const char *name;
    kern_err_record *err;   /* the runtime's record; NULL once written */
    kern_err_record result; /* what the launch "wrote" (fake_set_error; zero: no error) */
    void *heap;
    int64_t slots, stride;
    int64_t layout[2 * FAKE_MAX_STACKS];
    int nstacks;
    int64_t counts[FAKE_MAX_TASKS];
    int ntasks;
    void *mem[8]; /* the array arguments' allocations (first 8 arguments) */
} fake_launch_rec;

/* What a fake device is; zero fields give a device of host memory that the runtime does
 * not read, slot slices, one resident thread, no sizer, no allocation limit. */
typedef struct fake_device_config {
    bool host_memory;       /* the runtime may read allocations (rt_device.host_memory) */
    bool slot_major;        /* adstacks slot-major (GPUs) rather than in slot slices */
    int64_t resident;       /* resident threads (0: 1) */
    int64_t block;          /* threads per block (0: 256) */
    size_t fail_alloc_over; /* allocations of more bytes fail (0: none fail) */
    /* device sizing (runtime contract 3): the fake has size_adstack, which evaluates the
     * SizeExpr after completing the work submitted so far, as a sizer kernel on the
     * stream would (counting fake_device.sizings); needs host_memory false */
    bool sizer;
} fake_device_config;

typedef struct fake_device {
    rt_device base;
    uint64_t completed; /* the highest point that has passed */
    /* configuration (from fake_device_config; a test may change them as it goes) */
    int64_t resident;       /* resident threads (slot count without a host-known count) */
    int64_t block;          /* threads per block */
    size_t fail_alloc_over; /* allocations of more bytes fail (0: none fail) */
    bool wait_fails;        /* wait and sync report a lost device */
    /* statistics (allocs: those that succeeded; sizings: size_adstack calls) */
    int allocs, failed_allocs, frees, waits, syncs, code_loads, code_unloads, sizings;
    int64_t live_bytes;
    void *freed[FAKE_MAX_FREED];
    int nfreed;
    fake_launch_rec launches[FAKE_MAX_LAUNCHES];
    int nlaunch;
} fake_device;

/* A fake device as cfg says (NULL for a sizer with host memory, or out of memory). */
fake_device *fake_device_new(fake_device_config cfg);
/* Frees the device struct once the context that used it has been released. */
void fake_device_free(fake_device *f);
/* A context (default options, one thread) whose device is f; f stays the caller's. */
kern_context *fake_context(fake_device *f);
/* Lets every submission up to `point` complete (writing their error records). */
void fake_complete(fake_device *f, uint64_t point);
/* The error record launch i (0-based, in submission order, submitted yet or not) writes
 * when it completes. */
void fake_set_error(fake_device *f, int i, kern_err_record rec);
bool fake_was_freed(const fake_device *f, const void *mem);

#endif
