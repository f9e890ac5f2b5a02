/* ir.h - kern's structured SSA IR.
 *
 *   module  -> kernels (in source order)
 *   kernel  -> one body region whose arguments are the kernel's parameters; the top level
 *              holds pure "uniform" ops (consts, dim, arithmetic on parameters) and task ops
 *   task    -> PARALLEL (1-D or n-D range; body args are the indices) or SERIAL
 *   region  -> one block: arguments, then a list of ops; regions of if/for/while end in a
 *              terminator (yield / condition)
 *   op      -> opcode (ops.def), operands (SSA values), results, nested regions, location
 *
 * Control flow is structured (MLIR scf style):
 *   %r... = if %c { ... yield %a... } else { ... yield %b... }
 *   %r... = for %i = %lo to %hi iter(%x = %init, ...) { ... yield %x2, ... }
 *           With IR_FOR_EARLY_EXIT the body yields a leading bool "go on" first; the loop
 *           ends after an iteration that yields false (lowered `break`).
 *   %r... = while (%x = %init, ...) { before: ... condition %c, %v... }
 *                                    do { after(%v...): ... yield %x2, ... }
 *           The before region gets the carried values; `condition` decides whether to run
 *           the after region (with the forwarded values) or to leave the loop, whose
 *           results are then the forwarded values.
 * Values are defined once; a value may be used in the region that defines it and in any
 * region nested inside (after its definition).
 *
 * All IR memory belongs to the module's arena: passes never free; ir_module_free() does.
 * The text form is specified in docs/ir.md; ir_print / ir_parse round-trip byte for byte. */
#ifndef KERN_IR_H
#define KERN_IR_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/arena.h"
#include "../common/diag.h"
#include "../common/sizeexpr.h"
#include "../common/types.h"
#include "../common/util.h"

typedef enum ir_opcode {
#define IR_OP(e, text, nops, nres, nreg, rule, flags) IR_##e,
#include "ops.def"
#undef IR_OP
    IR__COUNT
} ir_opcode;

typedef enum ir_type_rule { T_SAME, T_BOOL, T_ANY, T_NONE, T_CUSTOM } ir_type_rule;

enum {
    OPF_PURE = 1 << 0,
    OPF_COMMUT = 1 << 1,
    OPF_TERM = 1 << 2,
    OPF_FLOAT = 1 << 3,
    OPF_INT = 1 << 4,
    OPF_NUM = 1 << 5,
    OPF_INTBOOL = 1 << 6,
    OPF_LIBM = 1 << 7, /* a function of a math library (sin, exp, pow, ...): libm, libmvec,
                          libdevice, or kern's own (passes/lower_libm.c) */
};

typedef struct ir_opinfo {
    const char *name;
    int nops, nres, nregions; /* -1: variable */
    ir_type_rule rule;
    unsigned flags;
} ir_opinfo;

extern const ir_opinfo ir_opinfos[IR__COUNT]; /* const table generated from ops.def */
static inline const ir_opinfo *ir_info(ir_opcode c) { return &ir_opinfos[c]; }
/* An atomic read-modify-write of an array element (its result is the old value). */
static inline bool ir_is_atomic(ir_opcode c) {
    return c == IR_ATOMIC_ADD || c == IR_ATOMIC_SUB || c == IR_ATOMIC_MIN || c == IR_ATOMIC_MAX ||
           c == IR_ATOMIC_XCHG || c == IR_ATOMIC_CAS;
}
/* An access of an array element: operands array, indices..., (value). */
static inline bool ir_is_access(ir_opcode c) {
    return c == IR_LOAD || c == IR_STORE || ir_is_atomic(c);
}
/* Opcode by its text name; IR__COUNT when unknown. */
ir_opcode ir_opcode_lookup(const char *name, int len);

typedef struct ir_op ir_op;
typedef struct ir_region ir_region;
typedef struct ir_value ir_value;
typedef struct ir_kernel ir_kernel;
typedef struct ir_module ir_module;

struct ir_value {
    const kern_type *type;
    ir_op *def;         /* defining op; NULL for a region argument */
    ir_region *region;  /* for a region argument: its region */
    uint32_t index;     /* result index in def, or argument index in region */
    uint32_t id;        /* scratch number (printer numbering, pass maps) */
    const char *name;   /* optional hint for printing (source variable name); may be NULL */
};

struct ir_region {
    ir_op *parent;        /* owning op (NULL for a kernel body) */
    ir_kernel *kernel;    /* kernel this region belongs to */
    ir_value **args;
    uint32_t nargs;
    ir_op *first, *last;  /* doubly linked list of ops */
};

/* Attribute bits of ir_op.attr. */
enum {
    IR_FOR_EARLY_EXIT = 1 << 0, /* FOR: body yields a leading bool "go on" */
    IR_PAR_SCALAR = 1 << 1,     /* PARALLEL: no SIMD lanes on the CPU, so that a task that
                                   recomputes another's values gets them bit for bit (the two
                                   passes of forward mode's atomic_min/max, ad_jvp.c); not
                                   in the text form */
};

typedef union ir_imm {
    int64_t i; /* CONST of bool/int types (u32 zero-extended); DIM's dimension */
    double f;  /* CONST of f32 (exactly representable as float) / f64 */
} ir_imm;

struct ir_op {
    ir_opcode code;
    kern_loc loc;
    ir_op *prev, *next;
    ir_region *parent;      /* region that holds this op */
    ir_value **operands;
    uint32_t noperands;
    ir_value **results;
    uint32_t nresults;
    ir_region **regions;
    uint32_t nregions;
    ir_imm imm;
    uint32_t attr;          /* IR_FOR_EARLY_EXIT, ... */
    uint32_t id;            /* scratch, for passes */
};

typedef struct ir_param {
    const char *name;
    const kern_type *type;
    bool nograd;
    kern_loc loc;
    /* A parameter of a version-1 type (docs/reference.md section 11), whose IR type is an
     * array of its component type: the declared type ("vec3[]", "P{pos:vec3,m:f32}[]")
     * and the extents of its trailing dimensions, which the runtime checks at launch.
     * NULL and 0 for other parameters. Not part of the IR's text form. */
    const char *view;
    uint8_t ntail;
    int32_t tail[2];
} ir_param;

/* An adstack of a gradient kernel: a per-thread stack of one scalar type that the
 * forward sweep of a loop pushes its carried values on and the reverse sweep pops.
 * Text form (docs/ir.md), first in the kernel body: adstack TYPE "SIZEEXPR" LOC */
typedef struct ir_adstack {
    const kern_type *type; /* a scalar type */
    const sz_expr *cap;    /* capacity in entries: a SizeExpr (common/sizeexpr.h) in the
                            * module's arena; prints as its text form */
    kern_loc loc;          /* the loop it belongs to (for overflow errors) */
} ir_adstack;

struct ir_kernel {
    ir_module *module;
    const char *name;
    kern_loc loc;
    ir_param *params;
    uint32_t nparams;
    ir_region *body;        /* args = one value per parameter */
    ir_adstack *adstacks;   /* gradient kernels: the adstack table (ADPUSH/ADPOP imm.i) */
    uint32_t nadstacks, capadstacks;
    const char *grad_error; /* primal kernels: why K.grad was not built (NULL: it was, or
                               was not asked for) */
    const char *jvp_error;  /* why K.jvp was not built when it was asked for quietly (NULL:
                               it was, or was not asked for); not in module metadata */
    const char *grad_kernel; /* primal kernels: the kernel of a `grad G` clause, whose IR
                                K.grad is (NULL: K.grad is derived); not in the text form */
    sz_expr **extents;      /* after ir_lower_semantics: ad_task_extent of each dimension of
                               each parallel task, in order, computed before the lowering */
    uint32_t nextents;
    ir_kernel *next;
};

/* What the pass runner does after each pass (passes/runner.c; KERN_DEBUG). */
enum { IR_DEBUG_PRINT = 1, IR_DEBUG_ROUNDTRIP = 2, IR_DEBUG_VERIFY = 4 };

struct ir_module {
    arena mem;
    const char *source_path; /* for locations; may be NULL */
    ir_kernel *kernels, *last_kernel;
    uint32_t nkernels;
    unsigned debug; /* IR_DEBUG_* bits, from kc_options.pass_debug (compiler/driver.c) */
    bool lowered;   /* ir_lower_semantics has run: div/rem/shl/shr divide and shift safely,
                       no min/max/clamp/sign is left (what every emitter requires) */
};

/* ---- Module construction ---------------------------------------------------------- */

ir_module *ir_module_new(const char *source_path);
void ir_module_free(ir_module *m);
ir_kernel *ir_kernel_new(ir_module *m, const char *name, kern_loc loc, const ir_param *params,
                         uint32_t nparams);
ir_kernel *ir_kernel_find(const ir_module *m, const char *name);
/* Appends an adstack to k's table and returns its index. cap is copied into the
 * module's arena. */
uint32_t ir_kernel_add_adstack(ir_kernel *k, const kern_type *type, const sz_expr *cap,
                               kern_loc loc);

/* A copy of kernel src (body, nested regions, adstack table) appended to src's module as
 * a kernel called name with the given parameters, which must have src's parameter types
 * in order (names and flags may differ). */
ir_kernel *ir_kernel_clone(ir_kernel *src, const char *name, const ir_param *params,
                           uint32_t nparams);
/* A copy of module src (its kernels, their tables, extents and errors) in a module of its
 * own. Uses the scratch ids of src's values. */
ir_module *ir_module_copy(const ir_module *src);

/* Creates a detached op with room for the given operands, results (typed) and regions
 * (each region created empty, with no arguments). */
ir_op *ir_op_new(ir_module *m, ir_opcode code, kern_loc loc, ir_value *const *operands,
                 uint32_t noperands, const kern_type *const *result_types, uint32_t nresults,
                 uint32_t nregions);
ir_value *ir_region_add_arg(ir_module *m, ir_region *r, const kern_type *type);
void ir_op_set_operand(ir_op *op, uint32_t i, ir_value *v);

/* List surgery. */
void ir_insert_before(ir_op *before, ir_op *op);
void ir_insert_after(ir_op *after, ir_op *op);
void ir_append(ir_region *r, ir_op *op);
void ir_remove(ir_op *op); /* unlinks; memory stays in the arena */
/* Replaces every use of `from` with `to` inside region r and its nested regions. One
 * walk of r per call: a pass that replaces many values uses an ir_subst instead. */
void ir_replace_uses(ir_region *r, ir_value *from, ir_value *to);

/* Batched use replacement, linear in the IR however many values are replaced (the IR has
 * no use lists): record replacements with ir_subst_add, then rewrite operands with
 * ir_subst_op as a walk in program order reaches each op (every use comes after its
 * definition), or all at once with ir_subst_apply. Uses the values' scratch `id` from
 * ir_subst_begin to ir_subst_free: 0 kept, n replaced by to[n - 1]. */
typedef struct ir_subst {
    ir_value **to;
    uint32_t len, cap;
} ir_subst;
/* Empties s and clears the ids of every value of kernel k (parameters, arguments and
 * results, nested too). */
void ir_subst_begin(ir_subst *s, ir_kernel *k);
/* From now on, uses of `from` (a value of the kernel given to begin) read `to`. */
void ir_subst_add(ir_subst *s, ir_value *from, ir_value *to);
/* Rewrites op's operands (not those of its nested regions). */
void ir_subst_op(const ir_subst *s, ir_op *op);
/* Rewrites every op of r and its nested regions. */
void ir_subst_apply(const ir_subst *s, ir_region *r);
void ir_subst_free(ir_subst *s);

/* ---- Iteration -------------------------------------------------------------------- */

#define ir_foreach_op(op, region) for (ir_op *op = (region)->first; op; op = op->next)
/* Safe against removal of `op` inside the loop body. */
#define ir_foreach_op_safe(op, tmp, region)                                                \
    for (ir_op *op = (region)->first, *tmp = op ? op->next : NULL; op;                     \
         op = tmp, tmp = op ? op->next : NULL)
#define ir_foreach_kernel(k, module) for (ir_kernel *k = (module)->kernels; k; k = k->next)

/* Whether v is an operand of an op of r or of its nested regions (a walk: the IR has no
 * use lists). */
bool ir_region_uses(const ir_region *r, const ir_value *v);
/* The ops of r and of its nested regions. */
uint32_t ir_region_count_ops(const ir_region *r);
/* Whether r or a region nested in it holds a for or while loop. */
bool ir_region_has_loop(const ir_region *r);

/* Calls fn on every op of r, pre-order, descending into nested regions. */
void ir_walk(ir_region *r, void (*fn)(ir_op *op, void *user), void *user);

/* ---- Builder ---------------------------------------------------------------------- */

/* A cursor: new ops go into `region` before `before` (at the end when NULL). */
typedef struct ir_builder {
    ir_module *m;
    ir_region *region;
    ir_op *before;
    kern_loc loc; /* location given to new ops */
} ir_builder;

ir_builder ir_builder_at_end(ir_module *m, ir_region *r);
ir_builder ir_builder_before(ir_module *m, ir_op *op);
/* Inserts a new op at the cursor. */
ir_op *ir_build(ir_builder *b, ir_opcode code, ir_value *const *operands, uint32_t noperands,
                const kern_type *const *result_types, uint32_t nresults, uint32_t nregions);

ir_value *ir_const_int(ir_builder *b, const kern_type *t, int64_t v);  /* bool/int types */
ir_value *ir_const_float(ir_builder *b, const kern_type *t, double v); /* f32/f64 */
ir_value *ir_const_bool(ir_builder *b, bool v);
/* One-operand / two-operand / three-operand pure ops with T_SAME or T_BOOL typing. */
ir_value *ir_unop(ir_builder *b, ir_opcode code, ir_value *a);
ir_value *ir_binop(ir_builder *b, ir_opcode code, ir_value *x, ir_value *y);
ir_value *ir_triop(ir_builder *b, ir_opcode code, ir_value *x, ir_value *y, ir_value *z);
ir_value *ir_cast(ir_builder *b, const kern_type *to, ir_value *v);
ir_value *ir_bitcast(ir_builder *b, const kern_type *to, ir_value *v); /* same size */
ir_value *ir_select(ir_builder *b, ir_value *c, ir_value *x, ir_value *y);
ir_value *ir_dim(ir_builder *b, ir_value *array, int d);
ir_value *ir_load(ir_builder *b, ir_value *array, ir_value *const *idx, uint32_t nidx);
void ir_store(ir_builder *b, ir_value *array, ir_value *const *idx, uint32_t nidx, ir_value *v);
/* The number of indices of access op: its operands less the array and the values. */
static inline uint32_t ir_access_nidx(const ir_op *op) {
    uint32_t values = op->code == IR_LOAD ? 0 : op->code == IR_ATOMIC_CAS ? 2 : 1;
    return op->noperands - 1 - values;
}
ir_value *ir_atomic(ir_builder *b, ir_opcode code, ir_value *array, ir_value *const *idx,
                    uint32_t nidx, ir_value *v);
/* old = array[idx]; array[idx] = desired where old's bits equal expected's (a 16-bit
 * element; made by ir_lower_narrow). */
ir_value *ir_atomic_cas(ir_builder *b, ir_value *array, ir_value *const *idx, uint32_t nidx,
                        ir_value *expected, ir_value *desired);
/* Adstacks: push v on adstack `stack` of the kernel; pop the last value pushed. */
void ir_adpush(ir_builder *b, uint32_t stack, ir_value *v);
ir_value *ir_adpop(ir_builder *b, uint32_t stack);
void ir_yield(ir_builder *b, ir_value *const *vals, uint32_t n);
void ir_condition(ir_builder *b, ir_value *cond, ir_value *const *vals, uint32_t n);
/* Control flow: the op is created with its regions (and region arguments: the loop index
 * and carried values for FOR, carried values for both WHILE regions, indices for PARALLEL);
 * the caller fills the regions and their terminators. */
ir_op *ir_if(ir_builder *b, ir_value *cond, const kern_type *const *result_types, uint32_t n);
ir_op *ir_for(ir_builder *b, ir_value *lo, ir_value *hi, ir_value *const *inits, uint32_t n,
              bool early_exit);
ir_op *ir_while(ir_builder *b, ir_value *const *inits, uint32_t n);
ir_op *ir_parallel(ir_builder *b, ir_value *const *bounds /* lo0,hi0,lo1,hi1.. */,
                   uint32_t ndims);
ir_op *ir_serial(ir_builder *b);

/* ---- Text form, verifier ---------------------------------------------------------- */

/* Prints the module (or only the kernel named `only`) in the text form of docs/ir.md. */
void ir_print(kern_buf *out, const ir_module *m, const char *only);
/* Parses the text form; on error reports to sink (src names the text) and returns NULL. */
ir_module *ir_parse(const char *text, size_t len, const kern_source *src, diag_sink *sink);
/* Checks every invariant; reports each violation to sink (src may be NULL) and returns
 * false if any. Never aborts. */
bool ir_verify(const ir_module *m, diag_sink *sink);
/* Verifies; on failure prints the IR with each error next to its op, and aborts
 * (debug-build pass runner). */
void ir_verify_or_die(const ir_module *m, const char *after_pass);

#endif
