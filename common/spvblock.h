/* spvblock.h - the launch block of the SPIR-V kernel ABI (docs/spirv-abi.md): where each
 * parameter's extents or value, the adstack slots and each adstack's offset and capacity
 * sit in binding 0. Shared by the SPIR-V emitter (from the IR kernel) and the Vulkan
 * device (from the metadata), so the two cannot disagree. */
#ifndef KERN_SPVBLOCK_H
#define KERN_SPVBLOCK_H

#include <stddef.h>

#include "types.h"

enum {
    KERN_SPV_GROUP = 128,     /* LocalSize x of every entry point */
    KERN_SPV_BIND_BLOCK = 0,  /* the launch block (dynamic offset) */
    KERN_SPV_BIND_ERR = 1,    /* the kern_err_record */
    KERN_SPV_BIND_HEAP8 = 2,  /* the adstack heap as bytes */
    KERN_SPV_BIND_HEAP32 = 3, /* ... as 32-bit words */
    KERN_SPV_BIND_HEAP64 = 4, /* ... as 64-bit words */
    KERN_SPV_BIND_PARAM0 = 5, /* parameter p (an array) is binding 5 + p */
};

/* A sizer entry point kern_<K>__s<s> (backends/spirv/spv_emit_sizer.c, docs/spirv-abi.md)
 * runs with a result buffer bound in place of the adstack heap (bindings 2 to 4); in
 * 64-bit words: */
enum {
    KERN_SPV_SIZER_RES = 0,      /* res[4]: value, error code (a u32 in the low half), a, b */
    KERN_SPV_SIZER_TICKET = 4,   /* a u32 in the low half: the invocations that finished */
    KERN_SPV_SIZER_PART = 8,     /* invocation w's maximum at word 8 + w */
    KERN_SPV_SIZER_GROUPS = 256, /* the most groups of a sizer's launch */
};

/* Replicas (backends/spirv/spv_emit_adds.c, docs/spirv-abi.md): a parallel task adds the
 * adjoints of arrays of at most KERN_SPV_REPLICA_ELEMS f32 elements (w.grad) into one of
 * KERN_SPV_REPLICAS copies in a scratch buffer, picked by subgroup, so that fewer adds meet
 * at one address; the task's sum entry point kern_<K>__r<t>, which the runtime runs after
 * it, adds the copies to the arrays and zeroes them. The buffer is binding
 * KERN_SPV_BIND_PARAM0 + nparams of a kernel of at most KERN_SPV_SCRATCH_MAX_PARAMS
 * parameters, in 32-bit words: */
enum {
    KERN_SPV_REPLICAS = 8,
    KERN_SPV_REPLICA_ELEMS = 2048,
    KERN_SPV_REPLICA_ARRAYS = 2,      /* arrays per task */
    KERN_SPV_SCRATCH_COPIES = 64,     /* words 0 to 63 reserved; copy r of the task's array a
                                       * from word 64 + (a KERN_SPV_REPLICAS + r)
                                       * KERN_SPV_REPLICA_ELEMS */
    KERN_SPV_SCRATCH_MAX_PARAMS = 26, /* 5 + 26 + 1 = 32 bindings, lavapipe's limit */
};

/* The word of the scratch buffer where copy r of a task's replicated array a begins. */
static inline uint64_t kern_spv_replica_word(int a, int r) {
    return KERN_SPV_SCRATCH_COPIES +
           ((uint64_t)a * KERN_SPV_REPLICAS + (uint64_t)r) * KERN_SPV_REPLICA_ELEMS;
}

/* The scratch buffer's size in bytes. */
static inline size_t kern_spv_scratch_bytes(void) {
    return 4 * ((size_t)KERN_SPV_SCRATCH_COPIES +
                (size_t)KERN_SPV_REPLICA_ARRAYS * KERN_SPV_REPLICAS * KERN_SPV_REPLICA_ELEMS);
}

/* The scratch buffer's binding in a kernel of nparams parameters, or -1: it has none. */
static inline int kern_spv_scratch_binding(int nparams) {
    return nparams <= KERN_SPV_SCRATCH_MAX_PARAMS ? KERN_SPV_BIND_PARAM0 + nparams : -1;
}

/* Fills off[] (nparams + 1 + 2 * nadstacks entries) with byte offsets in the launch
 * block: off[p] for parameter p (an array: its extent 0, extent d at off[p] + 8 d; a
 * scalar: its value, bool as a u32), off[nparams] for ad_slots, off[nparams + 1 + 2 s]
 * for ad_off[s] and off[nparams + 2 + 2 s] for ad_cap[s]. Returns the block's size in
 * bytes, a multiple of 16. */
size_t kern_spv_block_layout(const kern_type *const *params, int nparams, int nadstacks,
                             size_t *off);

#endif
