/* spv_emit_priv.h - what the files of the SPIR-V emitter share (not an API: spv_emit.h is).
 *
 *   spv_emit.c        the module: the value map, register types, the launch block, one
 *                     GLCompute entry point per task, kc_spirv_emit
 *   spv_emit_ctrl.c   structured control flow: regions, if, for, while, strided loops
 *   spv_emit_arith.c  scalar ops: arithmetic, comparisons, casts, constants, float math
 *   spv_emit_mem.c    storage buffers, array loads, stores and atomics, adstack push and pop
 *   spv_emit_adds.c   f32 adds whose old value nobody reads: combined per subgroup, and
 *                     summed per workgroup in block copies
 *   spv_emit_check.c  debug checks (guards) and the error record's helper functions
 *
 * The one-line helpers every file uses (labels, branches, phis, constants) are static
 * inline here; everything else is static in the file that uses it. */
#ifndef KERN_SPV_EMIT_PRIV_H
#define KERN_SPV_EMIT_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/spvblock.h"
#include "../../passes/passes.h"
#include "spv_builder.h"
#include "spv_emit.h"

/* ---- the emitter's state ---------------------------------------------------------------- */

/* An ir_value -> SPIR-V id map (open addressing on the pointer; spv_emit.c). */
typedef struct spv_valmap {
    const ir_value **keys;
    uint32_t *vals;
    size_t cap, len;
} spv_valmap;

/* The state of emitting one module. */
typedef struct spv_emitter {
    spv_builder b;
    const kc_options *opts;
    char *err;
    size_t errlen;
    bool failed;
    uint32_t t_void, t_bool, t_u32, t_u64, t_f32, t_f64;
    /* module-wide globals and helpers (0 until used) */
    uint32_t v_gid, v_nwg;        /* GlobalInvocationId, NumWorkgroups */
    uint32_t v_err, t_err;        /* binding 1 and its struct */
    uint32_t v_heap[3];           /* bindings 2, 3, 4: the heap as u8, u32, u64 */
    uint32_t fn_error, fn_ovf;    /* record_error, adstack_overflow */
    uint32_t v_res[2];            /* sizer results: Coherent u32 and u64 views of the heap */
    uint32_t arr_struct[2][4];    /* per (float?, 8/16/32/64 bits) the Block struct */
    /* per kernel */
    const ir_kernel *kernel;
    uint32_t v_block;
    uint32_t *block_member; /* per parameter: its first member in the launch block */
    uint32_t *block_type;   /* per member: its type */
    uint32_t nmembers;
    uint32_t *v_arr, *v_alias; /* per parameter: the array's variable and its integer alias */
    /* per entry point */
    spv_valmap map;
    spv_valmap used; /* the values some op of the current task uses */
    uint32_t *iface; /* the entry point's interface: the globals its code uses */
    int niface, iface_cap;
    uint32_t (*shape)[KERN_MAX_RANK];      /* per parameter: extents (u64) */
    /* per adstack: the heap element of this work item's next push (a u64 variable: entry
     * 0 at ad_base, each entry ad_slots further), the base, the capacity, and cap *
     * ad_slots (u64 values of the entry point) */
    uint32_t *ad_pos, *ad_base, *ad_cap, *ad_span;
    /* replicas (a parallel task, spv_emit_adds.c): f32 arrays it only adds into, whose
     * adds go to one of KERN_SPV_REPLICAS copies in the scratch buffer when the array fits
     * one (rep_on, uniform) */
    int nrep;
    int rep_param[KERN_SPV_REPLICA_ARRAYS];
    uint32_t rep_on[KERN_SPV_REPLICA_ARRAYS]; /* bool */
    uint32_t rep_n[KERN_SPV_REPLICA_ARRAYS];  /* the array's elements (u64) */
    uint32_t rep_at[KERN_SPV_REPLICA_ARRAYS]; /* this invocation's copy: its first word (u64) */
    uint32_t v_scr;                           /* the kernel's scratch buffer (f32 words) */
    /* the replicated arrays of the task just emitted, for its sum entry point */
    int nsum;
    int sum_param[KERN_SPV_REPLICA_ARRAYS];
    uint32_t v_lid;                          /* LocalInvocationId */
    /* a one-dimensional parallel task's divergence (have_div): the invocations of a
     * subgroup differ in its index only, so what it finds uniform is one value in every
     * invocation that runs an operation together (one dynamic instance) */
    ir_divergence div;
    bool have_div;
    /* the accesses whose bounds the loop test of the copy being emitted has checked
     * (spv_emit_ctrl.c, emit_for) */
    const ir_op **tested;
    int ntested;
    uint32_t ad_slots;
    bool checks;
    uint32_t cur; /* the current block's label */
} spv_emitter;

void spv_map_put(spv_valmap *m, const ir_value *v, uint32_t id);
/* The id of v; v must have been emitted. */
uint32_t spv_map_get(const spv_valmap *m, const ir_value *v);

/* The debug checks of one operation (spv_emit_check.c): spv_guard_add per check, then
 * spv_guard_begin opens the selection under which the operation runs and spv_guard_end
 * closes it. A zeroed spv_guard has no checks, and then the three emit nothing. */
typedef struct spv_guard {
    uint32_t ok;              /* bool: every check passed (0: no checks) */
    uint32_t code, dim, a, b; /* the first failing check's record (selected) */
    uint32_t l_merge, l_pre;
} spv_guard;

/* A loop i = start, start + step, ... while i < end (u64): spv_strided_begin opens it
 * and positions in its body (returning i), spv_strided_end closes it after the body. */
typedef struct spv_strided {
    uint32_t l_head, l_cont, l_merge, at;
} spv_strided;

/* ---- helpers ---------------------------------------------------------------------------- */

/* The id of an emitted value, and setting it. */
static inline uint32_t val(spv_emitter *em, const ir_value *v) { return spv_map_get(&em->map, v); }
static inline void set_val(spv_emitter *em, const ir_value *v, uint32_t id) {
    spv_map_put(&em->map, v, id);
}

/* Starts block l. */
static inline uint32_t label(spv_emitter *em, uint32_t l) {
    spv_label(&em->b, l);
    em->cur = l;
    return l;
}

static inline void branch(spv_emitter *em, uint32_t to) {
    spv_instv(&em->b.funcs, SpvOpBranch, 1, to);
}

static inline void branch_cond(spv_emitter *em, uint32_t c, uint32_t t, uint32_t f) {
    spv_instv(&em->b.funcs, SpvOpBranchConditional, 3, c, t, f);
}

static inline void selection_merge(spv_emitter *em, uint32_t merge) {
    spv_instv(&em->b.funcs, SpvOpSelectionMerge, 2, merge, SpvSelectionControlMaskNone);
}

static inline uint32_t phi2(spv_emitter *em, uint32_t type, uint32_t a, uint32_t la, uint32_t c,
                            uint32_t lc) {
    uint32_t ops[4] = {a, la, c, lc};
    return spv_op(&em->b, SpvOpPhi, type, ops, 4);
}

static inline uint32_t u64t(spv_emitter *em) { return spv_type_uint(&em->b, 64); }
static inline uint32_t cu32(spv_emitter *em, uint32_t v) { return spv_const_u32(&em->b, v); }
static inline uint32_t cu64(spv_emitter *em, uint64_t v) { return spv_const_u64(&em->b, v); }
static inline uint32_t atomic_scope(spv_emitter *em) { return cu32(em, SpvScopeDevice); }
static inline uint32_t relaxed(spv_emitter *em) { return cu32(em, SpvMemorySemanticsMaskNone); }
/* A 64-bit integer (i64, u64). */
static inline bool is_i64(const kern_type *t) { return t->kind == TY_I64 || t->kind == TY_U64; }

static inline int param_of(spv_emitter *em, const ir_value *a) {
    kern_assert(!a->def && a->region == em->kernel->body);
    return (int)a->index;
}

/* ---- spv_emit.c ------------------------------------------------------------------------- */

/* Adds a global variable to the interface of the entry point being emitted. */
void spv_use_global(spv_emitter *em, uint32_t id);
/* Whether some op of the current task uses v. */
bool spv_value_used(const spv_emitter *em, const ir_value *v);
/* The SPIR-V type of a register of scalar type t. */
uint32_t spv_reg_type(spv_emitter *em, const kern_type *t);
/* v, a signed integer of `bits` bits (8, 16, 32), sign-extended to 64 bits by shifts, not
 * OpSConvert: lavapipe (Mesa 22.3.6) miscompiles a signed comparison of an OpSConvert'ed
 * 32-bit value with 0 (`i64(steps) > 0` was true for steps = 0 and -5). */
uint32_t spv_sext64(spv_emitter *em, uint32_t v, int bits);
/* v of integer or bool type t widened to u64 (sign-extended for signed types). */
uint32_t spv_to_u64(spv_emitter *em, uint32_t v, const kern_type *t);
/* OpFunction of a void function id of type fnty; spv_function_end returns and closes it. */
void spv_function_begin(spv_emitter *em, uint32_t id, uint32_t fnty);
void spv_function_end(spv_emitter *em);
/* An Input variable of the u32 vector built-in bi. */
uint32_t spv_builtin_var(spv_emitter *em, SpvBuiltIn bi);
/* Member `member` of the kernel's launch block, loaded. */
uint32_t spv_block_load(spv_emitter *em, uint32_t member);
/* An entry point of the current kernel: begin (returns the function), the launch block's
 * parameters (the invocation, the grid's invocations, extents and scalars), end (declares
 * it as kern_<K>__<kind><index>). */
uint32_t spv_entry_begin(spv_emitter *em);
void spv_entry_params(spv_emitter *em, uint32_t *w, uint32_t *nthreads);
void spv_entry_end(spv_emitter *em, uint32_t fn, char kind, int index);

/* ---- spv_emit_ctrl.c -------------------------------------------------------------------- */

/* Emits the ops of r up to its terminator, which it returns (yield or condition; NULL when
 * r has none). */
const ir_op *spv_emit_region(spv_emitter *em, const ir_region *r);
uint32_t spv_strided_begin(spv_emitter *em, uint32_t start, uint32_t end, spv_strided *st);
void spv_strided_end(spv_emitter *em, const spv_strided *st, uint32_t i, uint32_t step);

/* ---- spv_emit_arith.c ------------------------------------------------------------------- */

/* An op that is neither control flow nor an adstack op: its result is set in the map. */
void spv_emit_simple(spv_emitter *em, const ir_op *op);
/* The bool of comparison code (IR_EQ ... IR_GE) of a and b of type t. */
uint32_t spv_emit_compare(spv_emitter *em, ir_opcode code, const kern_type *t, uint32_t a,
                          uint32_t b);

/* ---- spv_emit_mem.c --------------------------------------------------------------------- */

/* A load, store or atomic of an array element; returns its result (0 for a store). */
uint32_t spv_emit_access(spv_emitter *em, const ir_op *op);
/* A pointer to element lin of array parameter p (as_int: through its integer alias). */
uint32_t spv_element_ptr(spv_emitter *em, int p, bool as_int, uint32_t lin);
/* A load whose element is read only where every index is in bounds, else 0, with no check
 * and no error (a trip count computed ahead, spv_emit.c): the value in its register type. */
uint32_t spv_emit_load_in_bounds(spv_emitter *em, const ir_op *op);
/* The invocation's index in its workgroup (u64), and a barrier of the workgroup (its
 * memory included), in uniform control flow only (spv_emit_adds.c). */
uint32_t spv_local_x(spv_emitter *em);
void spv_workgroup_barrier(spv_emitter *em);
void spv_emit_adpush(spv_emitter *em, const ir_op *op);
void spv_emit_adpop(spv_emitter *em, const ir_op *op);

/* The storage buffer of a sizer's result (the heap's binding of 32- or 64-bit words,
 * bits), decorated Coherent: a second variable of that binding. */
uint32_t spv_sizer_result_var(spv_emitter *em, int bits);

/* ---- spv_emit_sizer.c ------------------------------------------------------------------- */

/* The sizer entry point kern_<K>__s<s> of adstack s of the current kernel, whose capacity
 * e reads array elements. */
struct sz_expr;
void spv_emit_sizer(spv_emitter *em, uint32_t s, const struct sz_expr *e);

/* ---- spv_emit_adds.c -------------------------------------------------------------------- */

/* if (c) { then }: spv_begin_if returns the merge label; the caller emits the then-part
 * and calls spv_end_if with it (spv_emit.c). */
uint32_t spv_begin_if(spv_emitter *em, uint32_t c);
void spv_end_if(spv_emitter *em, uint32_t l_j);
/* Replicas around a parallel task's grid-stride loop (w: the invocation's index; the
 * task's divergence in em->div, have_div), then the task's sum entry point (after its own);
 * spv_replica_of: parameter p's replica index, or -1. */
void spv_replicas_begin(spv_emitter *em, const ir_op *task, uint32_t w);
void spv_replicas_end(spv_emitter *em);
void spv_emit_replica_sum(spv_emitter *em, int t);
int spv_replica_of(const spv_emitter *em, int p);
/* An f32 add of v at element lin of array p whose old value nobody uses, combined per
 * subgroup, into replica ri (-1: none) or the array. uniform: lin is one for the subgroup. */
void spv_emit_combined_fadd(spv_emitter *em, int ri, int p, uint32_t lin, uint32_t v, bool uniform);
/* lanemax of x (op's operand): the maximum over the subgroup's active invocations. */
uint32_t spv_emit_lanemax(spv_emitter *em, const ir_op *op, uint32_t x);
/* Whether access op's element is one for the whole subgroup (the divergence analysis). */
bool spv_uniform_access(const spv_emitter *em, const ir_op *op);

/* ---- spv_emit_check.c ------------------------------------------------------------------- */

void spv_guard_add(spv_emitter *em, spv_guard *g, uint32_t cond, uint32_t code, uint32_t dim,
                   uint32_t a64, uint32_t b64);
void spv_guard_begin(spv_emitter *em, spv_guard *g, const ir_op *op);
uint32_t spv_guard_end(spv_emitter *em, spv_guard *g, uint32_t v, uint32_t zero, uint32_t type);
/* A call of adstack_overflow(line, col, cap, depth). */
void spv_call_overflow(spv_emitter *em, kern_loc loc, uint32_t cap, uint32_t depth);
/* The bodies of record_error and adstack_overflow, when called (after the entry points). */
void spv_emit_helpers(spv_emitter *em);

#endif
