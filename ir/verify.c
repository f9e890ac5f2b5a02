/* verify.c - the IR verifier: checks every invariant of ir.h / ops.def and reports every
 * violation, not just the first (nir_validate).
 *
 * One walk per kernel in print order keeps a scope of the values defined so far (region
 * arguments, then the results of each op once its regions are done), so dominance is the
 * structured kind: a use must see its value earlier in its own region or in an enclosing
 * one. Per op it checks the counts of ops.def, the type rule, the shape of its regions and
 * their terminators, and where it may stand (tasks and pure ops only at a kernel's top
 * level, adpush/adpop only inside a task). Each kernel's adstack table is checked too
 * (scalar types, a capacity string), and adpush/adpop against it. An op whose counts are wrong gets no type checks, so one mistake gives one
 * message. Messages name the kernel, the op and the value the printer would show:
 *     @simulate: 'add' (%5): operand 1 has type i32 but operand 0 has f32
 *
 * ir_verify_or_die prints the module with each error as a `// error:` line under its op
 * (a printer hook) and aborts. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir_priv.h"

enum { MAX_VERIFY_DEPTH = 2000 };

typedef struct verr {
    const ir_kernel *k; /* NULL: about the module */
    const ir_op *op;    /* NULL: about the kernel */
    kern_loc loc;
    char *msg;
} verr;

typedef struct verifier {
    const ir_module *m;
    const ir_kernel *k;
    ir_namer nm;
    bool *visible;  /* by namer number */
    int64_t *scope; /* numbers made visible, innermost last */
    uint32_t nscope, scope_cap;
    int isolated; /* inside a region of a 'custom' op (isolated from above) */
    arena mem; /* messages */
    verr *errs;
    int nerrs, cap;
} verifier;

/* ---- Reporting -------------------------------------------------------------------- */

static void add_err(verifier *v, const ir_kernel *k, const ir_op *op, kern_loc loc, char *msg) {
    if (v->nerrs == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 16;
        v->errs = kern_xrealloc(v->errs, sizeof(verr) * (size_t)v->cap);
    }
    v->errs[v->nerrs++] = (verr){k, op, loc, msg};
}

static void vkerr(verifier *v, const ir_kernel *k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void vkerr(verifier *v, const ir_kernel *k, const char *fmt, ...) {
    kern_buf b = {0};
    if (k)
        buf_printf(&b, "@%s: ", k->name ? k->name : "<unnamed>");
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&b, fmt, ap);
    va_end(ap);
    add_err(v, k, NULL, k ? k->loc : (kern_loc){0, 0}, arena_strdup(&v->mem, b.data));
    buf_free(&b);
}

static const char *opname(const ir_op *op) {
    return (unsigned)op->code < IR__COUNT ? ir_info(op->code)->name : "<bad opcode>";
}

static void operr(verifier *v, const ir_op *op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void operr(verifier *v, const ir_op *op, const char *fmt, ...) {
    kern_buf b = {0};
    buf_printf(&b, "@%s: '%s'", v->k->name ? v->k->name : "<unnamed>", opname(op));
    if (op->nresults && op->results && op->results[0]) {
        int64_t num;
        int param;
        if (ir_namer_get(&v->nm, op->results[0], &num, &param) && param < 0)
            buf_printf(&b, " (%%%lld)", (long long)num);
    }
    buf_puts(&b, ": ");
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&b, fmt, ap);
    va_end(ap);
    add_err(v, v->k, op, op->loc, arena_strdup(&v->mem, b.data));
    buf_free(&b);
}

/* A value's text name, for messages (in the verifier's arena). */
static const char *vname(verifier *v, const ir_value *val) {
    kern_buf b = {0};
    ir_namer_put(&b, &v->nm, val);
    const char *s = arena_strdup(&v->mem, b.data);
    buf_free(&b);
    return s;
}

static const char *tname(const kern_type *t) { return t ? t->name : "<no type>"; }

/* ---- Scope ------------------------------------------------------------------------ */

static void make_visible(verifier *v, const ir_value *val) {
    int64_t num;
    int param;
    if (!val || !ir_namer_get(&v->nm, val, &num, &param) || param >= 0)
        return;
    if (v->nscope == v->scope_cap) {
        v->scope_cap = v->scope_cap ? v->scope_cap * 2 : 64;
        v->scope = kern_xrealloc(v->scope, sizeof(int64_t) * v->scope_cap);
    }
    v->scope[v->nscope++] = num;
    v->visible[num] = true;
}

static void pop_scope(verifier *v, uint32_t mark) {
    while (v->nscope > mark)
        v->visible[v->scope[--v->nscope]] = false;
}

/* ---- Types ------------------------------------------------------------------------ */

static const kern_type *otype(const ir_op *op, uint32_t i) { return op->operands[i]->type; }
static const kern_type *rtype(const ir_op *op, uint32_t i) { return op->results[i]->type; }

static bool is_bool(const kern_type *t) { return t && t->kind == TY_BOOL; }
static bool is_int(const kern_type *t) { return t && ty_is_int(t); }
static bool is_scalar(const kern_type *t) { return t && ty_is_scalar(t); }

/* The operand class named by an op's flags; NULL when t belongs to it. */
static const char *class_violation(unsigned flags, const kern_type *t) {
    if ((flags & OPF_FLOAT) && !ty_is_float(t))
        return "float";
    if ((flags & OPF_INT) && !ty_is_int(t))
        return "integer";
    if ((flags & OPF_NUM) && !ty_is_number(t))
        return "number (not bool)";
    if ((flags & OPF_INTBOOL) && !(ty_is_int(t) || t->kind == TY_BOOL))
        return "integer or bool";
    return NULL;
}

/* T_SAME / T_BOOL: operands of one scalar type in the op's class. */
static void check_uniform(verifier *v, const ir_op *op) {
    const ir_opinfo *in = ir_info(op->code);
    const kern_type *t0 = otype(op, 0);
    if (!is_scalar(t0)) {
        operr(v, op, "operand 0 has type %s, expected a scalar", tname(t0));
        return;
    }
    for (uint32_t i = 1; i < op->noperands; i++)
        if (otype(op, i) != t0)
            operr(v, op, "operand %u has type %s but operand 0 has %s", i, tname(otype(op, i)),
                  tname(t0));
    if (ty_is_narrow(t0)) {
        operr(v, op, "operands of storage type %s: only load, store, cast and bitcast take "
                     "i8, u8, i16, u16, f16 and bf16 values",
              tname(t0));
        return;
    }
    const char *cls = class_violation(in->flags, t0);
    if (cls)
        operr(v, op, "operands must be of %s type, not %s", cls, tname(t0));
    const kern_type *want = in->rule == T_BOOL ? ty_bool() : t0;
    if (rtype(op, 0) != want)
        operr(v, op, "result has type %s, expected %s%s", tname(rtype(op, 0)), tname(want),
              in->rule == T_BOOL ? "" : " (the operands' type)");
}

static void check_const(verifier *v, const ir_op *op) {
    const kern_type *t = rtype(op, 0);
    if (!is_scalar(t)) {
        operr(v, op, "a constant has a scalar type, not %s", tname(t));
        return;
    }
    if (ty_is_narrow(t)) {
        operr(v, op, "no constants of storage type %s: cast one of type %s", tname(t),
              tname(ty_arith(t)));
        return;
    }
    int64_t i = op->imm.i;
    double f = op->imm.f;
    switch (t->kind) {
    case TY_BOOL:
        if (i != 0 && i != 1)
            operr(v, op, "bool constant holds %lld, expected 0 or 1", (long long)i);
        break;
    case TY_I32:
        if (i < INT32_MIN || i > INT32_MAX)
            operr(v, op, "i32 constant %lld is out of range", (long long)i);
        break;
    case TY_U32:
        if (i < 0 || i > (int64_t)UINT32_MAX)
            operr(v, op, "u32 constant %lld is out of range (u32 is stored zero-extended)",
                  (long long)i);
        break;
    case TY_F32: {
        /* bit for bit, so a NaN must carry a payload a float can hold */
        double back = (double)(float)f;
        if (memcmp(&back, &f, sizeof f) != 0)
            operr(v, op, "f32 constant %.17g is not exactly representable as f32", f);
        break;
    }
    default: break;
    }
}

/* Array access: operand 0 an array, `nidx` integer indices, one per dimension. */
static const kern_type *check_access(verifier *v, const ir_op *op, uint32_t nidx) {
    const kern_type *a = otype(op, 0);
    if (!a || !ty_is_array(a)) {
        operr(v, op, "operand 0 has type %s, expected an array", tname(a));
        return NULL;
    }
    if (nidx != a->rank)
        operr(v, op, "%u ind%s for %s of rank %d", nidx, nidx == 1 ? "ex" : "ices",
              vname(v, op->operands[0]), a->rank);
    for (uint32_t i = 1; i <= nidx; i++)
        if (!is_int(otype(op, i)))
            operr(v, op, "index %u has type %s, expected an integer", i - 1, tname(otype(op, i)));
    return a->elem;
}

static bool is_half(const kern_type *t) { return t && (t->kind == TY_F16 || t->kind == TY_BF16); }

/* atomic_cas: array, indices, expected, desired, all of the 16-bit element type. */
static void check_cas(verifier *v, const ir_op *op) {
    if (op->noperands < 3) {
        operr(v, op, "expects at least 3 operands (the array, its indices, expected and desired)");
        return;
    }
    const kern_type *elem = check_access(v, op, op->noperands - 3);
    if (!elem)
        return;
    if (!ty_is_number(elem) || ty_size(elem) != 2)
        operr(v, op, "atomic_cas applies to 16-bit elements, not %s", elem->name);
    for (uint32_t i = op->noperands - 2; i < op->noperands; i++)
        if (otype(op, i) != elem)
            operr(v, op, "operand %u has type %s, the array's elements %s", i, tname(otype(op, i)),
                  elem->name);
    if (rtype(op, 0) != elem)
        operr(v, op, "result has type %s, expected the element type %s", tname(rtype(op, 0)),
              elem->name);
}

static void check_array_op(verifier *v, const ir_op *op) {
    bool has_value = op->code != IR_LOAD;
    uint32_t min = has_value ? 2 : 1;
    if (op->noperands < min) {
        operr(v, op, "expects at least %u operands (the array%s), has %u", min,
              has_value ? ", its indices and the value" : " and its indices", op->noperands);
        return;
    }
    const kern_type *elem = check_access(v, op, op->noperands - min);
    if (!elem)
        return;
    /* the reverse sweep's atomic add of an f32 adjoint into an f16/bf16 adjoint array */
    bool half_add = op->code == IR_ATOMIC_ADD && is_half(elem);
    if (half_add && otype(op, op->noperands - 1) != ty_f32())
        operr(v, op, "the value has type %s, expected f32 (an atomic add into %s elements)",
              tname(otype(op, op->noperands - 1)), tname(elem));
    else if (has_value && !half_add && otype(op, op->noperands - 1) != elem)
        operr(v, op, "the value has type %s, the array's elements %s",
              tname(otype(op, op->noperands - 1)), tname(elem));
    if (op->code != IR_LOAD && op->code != IR_STORE && elem->kind == TY_BOOL)
        operr(v, op, "atomics do not apply to bool arrays");
    else if (op->code != IR_LOAD && op->code != IR_STORE && ty_is_narrow(elem) && !half_add)
        operr(v, op, "atomics do not apply to %s arrays", elem->name);
    if (op->nresults == 1 && rtype(op, 0) != elem)
        operr(v, op, "result has type %s, expected the element type %s", tname(rtype(op, 0)),
              elem->name);
}

/* ---- Regions and terminators ------------------------------------------------------ */

static const char *region_name(const ir_op *op, uint32_t i) {
    switch (op->code) {
    case IR_IF: return i == 0 ? "then-region" : "else-region";
    case IR_WHILE: return i == 0 ? "before-region" : "after-region";
    case IR_CUSTOM: return i == 0 ? "primal region" : "adjoint region";
    default: return "body";
    }
}

/* The terminator that must end region i of op (IR__COUNT: none allowed). */
static ir_opcode expected_term(const ir_op *owner, uint32_t i) {
    if (!owner)
        return IR__COUNT;
    switch (owner->code) {
    case IR_IF:
    case IR_FOR:
    case IR_CUSTOM: return IR_YIELD;
    case IR_WHILE: return i == 0 ? IR_CONDITION : IR_YIELD;
    default: return IR_SERIAL; /* tasks and ops that should have no region: none */
    }
}

/* Region argument count and types; types[i] NULL skips the type of argument i. */
static void check_args(verifier *v, const ir_op *op, uint32_t ri, const kern_type *const *types,
                       uint32_t n, const char *what) {
    const ir_region *r = op->regions[ri];
    if (r->nargs != n) {
        operr(v, op, "the %s has %u argument%s, expected %u (%s)", region_name(op, ri), r->nargs,
              r->nargs == 1 ? "" : "s", n, what);
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        if (types[i] && r->args[i] && r->args[i]->type != types[i])
            operr(v, op, "argument %u of the %s has type %s, expected %s", i, region_name(op, ri),
                  tname(r->args[i]->type), tname(types[i]));
}

/* The values a region's terminator passes on against the types wanted; `skip` leading
 * operands (a condition, a "go on" flag) are checked by the caller. */
static void check_term(verifier *v, const ir_op *op, uint32_t ri, ir_opcode term,
                       const kern_type *const *types, uint32_t n, uint32_t skip, const char *what) {
    const ir_op *t = op->regions[ri]->last;
    if (!t || t->code != term)
        return; /* reported by the region walk */
    if (t->noperands != n + skip) {
        operr(v, op, "the %s's '%s' passes %u value%s, expected %u (%s)", region_name(op, ri),
              ir_info(term)->name, t->noperands, t->noperands == 1 ? "" : "s", n + skip, what);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        const ir_value *val = t->operands[skip + i];
        if (val && types[i] && val->type != types[i])
            operr(v, op, "the %s's '%s' passes %s of type %s as value %u, expected %s",
                  region_name(op, ri), ir_info(term)->name, vname(v, val), tname(val->type), i,
                  tname(types[i]));
    }
}

static const kern_type **result_types(verifier *v, const ir_op *op) {
    const kern_type **t = ARENA_ARRAY(&v->mem, const kern_type *, op->nresults);
    for (uint32_t i = 0; i < op->nresults; i++) {
        t[i] = rtype(op, i);
        if (!is_scalar(t[i]))
            operr(v, op, "result %u has type %s, expected a scalar", i, tname(t[i]));
    }
    return t;
}

static void check_if(verifier *v, const ir_op *op) {
    if (!is_bool(otype(op, 0)))
        operr(v, op, "the condition has type %s, expected bool", tname(otype(op, 0)));
    const kern_type **rt = result_types(v, op);
    for (uint32_t ri = 0; ri < 2; ri++) {
        check_args(v, op, ri, NULL, 0, "none");
        check_term(v, op, ri, IR_YIELD, rt, op->nresults, 0, "one per result of the 'if'");
    }
}

static void check_for(verifier *v, const ir_op *op) {
    if (op->noperands < 2) {
        operr(v, op, "expects at least 2 operands (lo, hi), has %u", op->noperands);
        return;
    }
    const kern_type *lo = otype(op, 0), *hi = otype(op, 1);
    if (!is_int(lo) || lo != hi)
        operr(v, op, "the bounds have types %s and %s, expected one integer type", tname(lo),
              tname(hi));
    uint32_t n = op->noperands - 2;
    if (op->nresults != n) {
        operr(v, op, "has %u result%s for %u carried value%s", op->nresults,
              op->nresults == 1 ? "" : "s", n, n == 1 ? "" : "s");
        return;
    }
    const kern_type **carried = ARENA_ARRAY(&v->mem, const kern_type *, n + 1);
    carried[0] = ty_bool();
    for (uint32_t i = 0; i < n; i++) {
        carried[i + 1] = otype(op, i + 2);
        if (!is_scalar(carried[i + 1]))
            operr(v, op, "carried value %u has type %s, expected a scalar", i,
                  tname(carried[i + 1]));
        else if (rtype(op, i) != carried[i + 1])
            operr(v, op, "result %u has type %s but carried value %u has %s", i,
                  tname(rtype(op, i)), i, tname(carried[i + 1]));
    }
    carried[0] = lo;
    check_args(v, op, 0, carried, n + 1, "the index, then one per carried value");
    carried[0] = ty_bool();
    bool early = op->attr & IR_FOR_EARLY_EXIT;
    const ir_op *t = op->regions[0]->last;
    if (early && t && t->code == IR_YIELD && t->noperands >= 1 && t->operands[0] &&
        !is_bool(t->operands[0]->type))
        operr(v, op,
              "the body's 'yield' passes %s of type %s first, expected the bool 'go on' "
              "of an early-exit loop",
              vname(v, t->operands[0]), tname(t->operands[0]->type));
    if (early)
        check_term(v, op, 0, IR_YIELD, carried + 1, n, 1,
                   "early exit: the bool 'go on', then the carried values");
    else
        check_term(v, op, 0, IR_YIELD, carried + 1, n, 0, "the carried values");
}

static void check_while(verifier *v, const ir_op *op) {
    uint32_t n = op->noperands;
    const kern_type **init = ARENA_ARRAY(&v->mem, const kern_type *, n);
    for (uint32_t i = 0; i < n; i++) {
        init[i] = otype(op, i);
        if (!is_scalar(init[i]))
            operr(v, op, "carried value %u has type %s, expected a scalar", i, tname(init[i]));
    }
    const kern_type **rt = result_types(v, op);
    check_args(v, op, 0, init, n, "one per carried value");
    check_args(v, op, 1, rt, op->nresults, "one per result");
    const ir_op *c = op->regions[0]->last;
    if (c && c->code == IR_CONDITION && c->noperands >= 1) {
        check_term(v, op, 0, IR_CONDITION, rt, op->nresults, 1,
                   "the condition, then one per result");
    }
    check_term(v, op, 1, IR_YIELD, init, n, 0, "one per carried value");
}

/* The type of the adjoint of a value of type t: f32 for f16/bf16 (autodiff accumulates
 * them in f32), t itself otherwise (a non-float's "adjoint" is a zero of its type). */
static const kern_type *adj_type(const kern_type *t) { return is_half(t) ? ty_f32() : t; }

/* custom: operands and results scalars; primal(operands) -> yield results; adjoint(operands,
 * results, adj(results)) -> yield adj(operands). */
static void check_custom(verifier *v, const ir_op *op) {
    uint32_t n = op->noperands, m = op->nresults;
    const kern_type **t = ARENA_ARRAY(&v->mem, const kern_type *, n + 2 * m + 1);
    for (uint32_t i = 0; i < n; i++) {
        t[i] = otype(op, i);
        if (!is_scalar(t[i]))
            operr(v, op, "operand %u has type %s, expected a scalar", i, tname(t[i]));
    }
    const kern_type **rt = result_types(v, op);
    for (uint32_t i = 0; i < m; i++) {
        t[n + i] = rt[i];
        t[n + m + i] = adj_type(rt[i]);
    }
    check_args(v, op, 0, t, n, "one per operand, of its type");
    check_term(v, op, 0, IR_YIELD, rt, m, 0, "one per result");
    check_args(v, op, 1, t, n + 2 * m, "the operands, the results, then one adjoint per result");
    for (uint32_t i = 0; i < n; i++)
        t[i] = adj_type(t[i]);
    check_term(v, op, 1, IR_YIELD, t, n, 0, "one adjoint per operand");
}

static void check_parallel(verifier *v, const ir_op *op) {
    uint32_t n = op->noperands;
    if (n < 2 || n % 2) {
        operr(v, op, "expects pairs of bounds (lo, hi per dimension), has %u operand%s", n,
              n == 1 ? "" : "s");
        return;
    }
    const kern_type **idx = ARENA_ARRAY(&v->mem, const kern_type *, n / 2);
    for (uint32_t d = 0; d < n / 2; d++) {
        const kern_type *lo = otype(op, 2 * d), *hi = otype(op, 2 * d + 1);
        if (!is_int(lo) || lo != hi)
            operr(v, op,
                  "the bounds of dimension %u have types %s and %s, expected one "
                  "integer type",
                  d, tname(lo), tname(hi));
        idx[d] = lo;
    }
    check_args(v, op, 0, idx, n / 2, "one index per dimension");
}

/* adpush / adpop: imm.i names an entry of the kernel's adstack table, and the value
 * pushed or popped has the stack's type. */
static void check_adstack_op(verifier *v, const ir_op *op) {
    const ir_kernel *k = v->k;
    int64_t s = op->imm.i;
    if (s < 0 || (uint64_t)s >= k->nadstacks || !k->adstacks) {
        operr(v, op, "adstack %lld does not exist: the kernel has %u adstack%s", (long long)s,
              k->nadstacks, k->nadstacks == 1 ? "" : "s");
        return;
    }
    const kern_type *t = k->adstacks[s].type;
    if (op->code == IR_ADPUSH && otype(op, 0) != t)
        operr(v, op, "pushes %s of type %s on adstack %lld, which holds %s",
              vname(v, op->operands[0]), tname(otype(op, 0)), (long long)s, tname(t));
    if (op->code == IR_ADPOP && rtype(op, 0) != t)
        operr(v, op, "result has type %s, but adstack %lld holds %s", tname(rtype(op, 0)),
              (long long)s, tname(t));
}

/* Type rules of one op whose counts match ops.def and whose operands are all present. */
static void check_types(verifier *v, const ir_op *op) {
    const ir_opinfo *in = ir_info(op->code);
    if (in->rule == T_SAME || in->rule == T_BOOL) {
        check_uniform(v, op);
        return;
    }
    switch (op->code) {
    case IR_CONST: check_const(v, op); break;
    case IR_CAST:
        if (!is_scalar(otype(op, 0)) || !is_scalar(rtype(op, 0)))
            operr(v, op, "casts a scalar to a scalar, not %s to %s", tname(otype(op, 0)),
                  tname(rtype(op, 0)));
        break;
    case IR_BITCAST:
        if (!is_scalar(otype(op, 0)) || !is_scalar(rtype(op, 0)) ||
            otype(op, 0)->kind == TY_BOOL || ty_size(otype(op, 0)) != ty_size(rtype(op, 0)))
            operr(v, op, "bitcasts between numbers of one size, not %s to %s",
                  tname(otype(op, 0)), tname(rtype(op, 0)));
        break;
    case IR_SELECT:
        if (!is_bool(otype(op, 0)))
            operr(v, op, "the condition has type %s, expected bool", tname(otype(op, 0)));
        if (!is_scalar(otype(op, 1)) || otype(op, 1) != otype(op, 2))
            operr(v, op, "the arms have types %s and %s, expected one scalar type",
                  tname(otype(op, 1)), tname(otype(op, 2)));
        else if (rtype(op, 0) != otype(op, 1))
            operr(v, op, "result has type %s, expected %s (the arms' type)", tname(rtype(op, 0)),
                  tname(otype(op, 1)));
        else if (ty_is_narrow(otype(op, 1)))
            operr(v, op, "select of storage type %s", tname(otype(op, 1)));
        break;
    case IR_DIM: {
        const kern_type *a = otype(op, 0);
        if (!a || !ty_is_array(a))
            operr(v, op, "operand 0 has type %s, expected an array", tname(a));
        else if (op->imm.i < 0 || op->imm.i >= a->rank)
            operr(v, op, "dimension %lld of %s, which has rank %d", (long long)op->imm.i,
                  vname(v, op->operands[0]), a->rank);
        if (rtype(op, 0) != ty_i32())
            operr(v, op, "result has type %s, expected i32", tname(rtype(op, 0)));
        break;
    }
    case IR_LOAD:
    case IR_STORE:
    case IR_ATOMIC_ADD:
    case IR_ATOMIC_SUB:
    case IR_ATOMIC_MIN:
    case IR_ATOMIC_MAX:
    case IR_ATOMIC_XCHG: check_array_op(v, op); break;
    case IR_ATOMIC_CAS: check_cas(v, op); break;
    case IR_ADPUSH:
    case IR_ADPOP: check_adstack_op(v, op); break;
    case IR_CHECK:
        if (!is_bool(otype(op, 0)))
            operr(v, op, "the condition has type %s, expected bool", tname(otype(op, 0)));
        if (otype(op, 1) != ty_i64() || otype(op, 2) != ty_i64())
            operr(v, op, "the recorded values have types %s and %s, expected i64",
                  tname(otype(op, 1)), tname(otype(op, 2)));
        if (op->imm.i <= 0 || op->imm.i > INT32_MAX)
            operr(v, op, "error code %lld, expected a positive 32-bit code",
                  (long long)op->imm.i);
        break;
    case IR_IF: check_if(v, op); break;
    case IR_FOR: check_for(v, op); break;
    case IR_WHILE: check_while(v, op); break;
    case IR_PARALLEL: check_parallel(v, op); break;
    case IR_CUSTOM: check_custom(v, op); break;
    case IR_SERIAL: check_args(v, op, 0, NULL, 0, "none"); break;
    case IR_CONDITION:
        if (op->noperands < 1)
            operr(v, op, "expects at least 1 operand (the condition)");
        else if (!is_bool(otype(op, 0)))
            operr(v, op, "the condition has type %s, expected bool", tname(otype(op, 0)));
        break;
    default: break;
    }
}

/* ---- The walk --------------------------------------------------------------------- */

static void verify_region(verifier *v, const ir_region *r, const ir_op *owner, uint32_t ri,
                          int depth);

/* Structure (counts, operands present and visible, results) of one op; true when the type
 * rules can be checked. */
static bool check_shape(verifier *v, const ir_op *op) {
    const ir_opinfo *in = ir_info(op->code);
    bool ok = true;
    if (in->nops >= 0 && op->noperands != (uint32_t)in->nops) {
        operr(v, op, "expects %d operand%s, has %u", in->nops, in->nops == 1 ? "" : "s",
              op->noperands);
        ok = false;
    }
    if (in->nres >= 0 && op->nresults != (uint32_t)in->nres) {
        operr(v, op, "expects %d result%s, has %u", in->nres, in->nres == 1 ? "" : "s",
              op->nresults);
        ok = false;
    }
    if (op->nregions != (uint32_t)in->nregions) {
        operr(v, op, "expects %d region%s, has %u", in->nregions, in->nregions == 1 ? "" : "s",
              op->nregions);
        ok = false;
    }
    uint32_t known = op->code == IR_FOR        ? (uint32_t)IR_FOR_EARLY_EXIT
                     : op->code == IR_PARALLEL ? (uint32_t)IR_PAR_SCALAR
                                               : 0;
    if (op->attr & ~known) {
        operr(v, op, "has unknown attribute bits 0x%x", op->attr);
    }
    if ((op->noperands && !op->operands) || (op->nresults && !op->results) ||
        (op->nregions && !op->regions)) {
        operr(v, op, "has a missing operand, result or region array");
        return false;
    }
    for (uint32_t i = 0; i < op->noperands; i++) {
        const ir_value *val = op->operands[i];
        int64_t num;
        int param;
        if (!val) {
            operr(v, op, "operand %u is missing", i);
            ok = false;
        } else if (!val->type) {
            operr(v, op, "operand %u (%s) has no type", i, vname(v, val));
            ok = false;
        } else if (!ir_namer_get(&v->nm, val, &num, &param)) {
            operr(v, op,
                  "operand %u is not a value of this kernel (its definition was removed "
                  "or lives in another kernel)",
                  i);
        } else if (v->isolated && (param >= 0 || !v->visible[num])) {
            operr(v, op,
                  "operand %u (%s) is defined outside the 'custom' op around it: its regions "
                  "use only their own arguments and values defined in them",
                  i, vname(v, val));
        } else if (param < 0 && !v->visible[num]) {
            operr(v, op,
                  "operand %u (%s) is not defined here: a value is visible after its "
                  "definition in its region and the regions nested in it",
                  i, vname(v, val));
        }
    }
    for (uint32_t i = 0; i < op->nresults; i++) {
        const ir_value *res = op->results[i];
        if (!res) {
            operr(v, op, "result %u is missing", i);
            ok = false;
        } else if (res->def != op || res->index != i) {
            operr(v, op, "result %u does not point back to its op", i);
        } else if (!res->type) {
            operr(v, op, "result %u has no type", i);
            ok = false;
        }
    }
    for (uint32_t i = 0; i < op->nregions; i++) {
        const ir_region *r = op->regions[i];
        if (!r) {
            operr(v, op, "region %u is missing", i);
            ok = false;
        } else if (r->parent != op || r->kernel != v->k) {
            operr(v, op, "region %u does not point back to its op and kernel", i);
        }
    }
    return ok;
}

/* Whether an op whose enclosing op is `owner` lies in a task's body, at any depth. */
static bool inside_task(const ir_op *owner) {
    for (int n = 0; owner && n <= MAX_VERIFY_DEPTH + 1; n++) {
        if (owner->code == IR_PARALLEL || owner->code == IR_SERIAL)
            return true;
        owner = owner->parent ? owner->parent->parent : NULL;
    }
    return false;
}

static void verify_op(verifier *v, const ir_op *op, const ir_op *owner, int depth) {
    if ((unsigned)op->code >= IR__COUNT) {
        operr(v, op, "unknown opcode %d", (int)op->code);
        return;
    }
    const ir_opinfo *in = ir_info(op->code);
    bool top = owner == NULL;
    bool task = op->code == IR_PARALLEL || op->code == IR_SERIAL;
    if (op->code == IR_ADPUSH || op->code == IR_ADPOP) {
        if (!inside_task(owner))
            operr(v, op,
                  "stands outside a task: adstacks belong to a work item, so '%s' may only "
                  "stand in a parallel or serial body (at any depth)",
                  opname(op));
    } else if (top && !(in->flags & OPF_TERM) && !(in->flags & OPF_PURE) && !task &&
               op->code != IR_LOAD && op->code != IR_CHECK)
        /* a check may (the debug check of a top-level division or shift); a load may: the bound of a parallel for read from an array (`for i in 0..c[0]`),
         * evaluated once before the task's first iteration like every top-level value
         * (each backend recomputes a task's top-level values when the task starts) */
        operr(v, op,
              "only pure ops, loads and parallel/serial tasks may stand at the top level of "
              "a kernel");
    if (!top && task)
        operr(v, op, "tasks may only stand at the top level of a kernel, not in the %s of '%s'",
              region_name(owner, 0), opname(owner));
    if ((in->flags & OPF_TERM) && op->next)
        operr(v, op, "a terminator must be the last op of its region");
    bool ok = check_shape(v, op);
    if (ok)
        check_types(v, op);
    /* the regions of a custom op see nothing from outside: hide what is visible */
    bool isolate = op->code == IR_CUSTOM;
    uint32_t outer = v->nscope;
    if (isolate) {
        for (uint32_t i = 0; i < outer; i++)
            v->visible[v->scope[i]] = false;
        v->isolated++;
    }
    for (uint32_t i = 0; i < op->nregions && op->regions; i++)
        if (op->regions[i])
            verify_region(v, op->regions[i], op, i, depth + 1);
    if (isolate) {
        v->isolated--;
        for (uint32_t i = 0; i < outer; i++)
            v->visible[v->scope[i]] = true;
    }
    for (uint32_t i = 0; i < op->nresults && op->results; i++)
        if (op->results[i] && op->results[i]->def == op)
            make_visible(v, op->results[i]);
}

static void verify_region(verifier *v, const ir_region *r, const ir_op *owner, uint32_t ri,
                          int depth) {
    if (depth > MAX_VERIFY_DEPTH) {
        operr(v, owner, "regions nested more than %d deep", MAX_VERIFY_DEPTH);
        return;
    }
    uint32_t mark = v->nscope;
    if (r->nargs && !r->args) {
        if (owner)
            operr(v, owner, "the %s has no argument array", region_name(owner, ri));
        return;
    }
    for (uint32_t i = 0; i < r->nargs; i++) {
        const ir_value *a = r->args[i];
        if (!a || a->region != r || a->index != i || a->def) {
            if (owner)
                operr(v, owner, "argument %u of the %s does not point back to its region", i,
                      region_name(owner, ri));
            continue;
        }
        if (!is_scalar(a->type) && owner)
            operr(v, owner, "argument %u of the %s has type %s, expected a scalar", i,
                  region_name(owner, ri), tname(a->type));
        make_visible(v, a);
    }
    const ir_op *prev = NULL;
    bool broken = false;
    for (const ir_op *op = r->first; op; prev = op, op = op->next) {
        if (op->parent != r || op->prev != prev) {
            operr(v, op, "is not linked into its region properly");
            broken = true;
            break; /* the list may be cyclic: stop here */
        }
        verify_op(v, op, owner, depth);
    }
    if (!broken && r->last != prev) {
        if (owner)
            operr(v, owner, "the %s's last-op pointer is wrong", region_name(owner, ri));
        else
            vkerr(v, v->k, "the body's last-op pointer is wrong");
    }
    /* terminators */
    ir_opcode want = expected_term(owner, ri);
    const ir_op *last = r->last;
    if (want == IR_YIELD || want == IR_CONDITION) {
        if (!last || last->code != want)
            operr(v, owner, "the %s must end in '%s'", region_name(owner, ri), ir_info(want)->name);
    } else if (last && (unsigned)last->code < IR__COUNT &&
               (ir_info(last->code)->flags & OPF_TERM)) {
        if (owner)
            operr(v, last, "a '%s' cannot end the %s of '%s'", opname(last), region_name(owner, ri),
                  opname(owner));
        else
            operr(v, last, "a '%s' cannot stand at the top level of a kernel", opname(last));
    }
    pop_scope(v, mark);
}

/* Each adstack holds a scalar type and has a capacity (a SizeExpr tree, well formed by
 * construction; the runtime checks its leaves against the parameters when it makes the
 * module, kern_meta_check_adstacks). Errors carry the adstack's location. */
static void check_adstack_table(verifier *v, const ir_kernel *k) {
    if (k->nadstacks && !k->adstacks) {
        vkerr(v, k, "%u adstacks but no adstack table", k->nadstacks);
        return;
    }
    for (uint32_t i = 0; i < k->nadstacks; i++) {
        const ir_adstack *a = &k->adstacks[i];
        int before = v->nerrs;
        if (!is_scalar(a->type))
            vkerr(v, k, "adstack %u has type %s, expected a scalar", i, tname(a->type));
        if (!a->cap)
            vkerr(v, k, "adstack %u has no capacity", i);
        for (int e = before; e < v->nerrs; e++)
            v->errs[e].loc = a->loc;
    }
}

static void verify_kernel(verifier *v, const ir_kernel *k) {
    v->k = k;
    if (!k->name)
        vkerr(v, k, "kernel without a name");
    if (k->module != v->m)
        vkerr(v, k, "kernel does not point back to its module");
    for (const ir_kernel *o = v->m->kernels; o && o != k; o = o->next)
        if (o->name && k->name && strcmp(o->name, k->name) == 0)
            vkerr(v, k, "a second kernel named @%s", k->name);
    if (!k->body) {
        vkerr(v, k, "kernel without a body");
        return;
    }
    const ir_region *body = k->body;
    if (body->parent || body->kernel != k)
        vkerr(v, k, "the body does not point back to its kernel");
    if (k->nparams && !k->params) {
        vkerr(v, k, "parameters missing");
        return;
    }
    for (uint32_t i = 0; i < k->nparams; i++) {
        const kern_type *t = k->params[i].type;
        const char *name = k->params[i].name;
        if (!t || t->kind == TY_VOID)
            vkerr(v, k, "parameter %u has type %s", i, tname(t));
        /* the text form names parameters: the names must read back as themselves */
        if (!name || !ir_is_plain_name(name, strlen(name))) {
            vkerr(v, k, "parameter %u has no usable name (%s): names are [A-Za-z_.][A-Za-z0-9_.]*",
                  i, name ? name : "NULL");
            continue;
        }
        for (uint32_t j = 0; j < i; j++)
            if (k->params[j].name && strcmp(k->params[j].name, name) == 0)
                vkerr(v, k, "parameters %u and %u are both named %%%s", j, i, name);
    }
    if (body->nargs != k->nparams || (body->nargs && !body->args)) {
        vkerr(v, k, "the body has %u argument%s for %u parameter%s", body->nargs,
              body->nargs == 1 ? "" : "s", k->nparams, k->nparams == 1 ? "" : "s");
    } else {
        for (uint32_t i = 0; i < k->nparams; i++) {
            const ir_value *a = body->args[i];
            if (!a || a->region != body || a->index != i || a->def)
                vkerr(v, k, "body argument %u does not point back to the body", i);
            else if (a->type != k->params[i].type)
                vkerr(v, k, "body argument %u has type %s, parameter %s has %s", i, tname(a->type),
                      k->params[i].name ? k->params[i].name : "?", tname(k->params[i].type));
        }
    }
    check_adstack_table(v, k);
    ir_namer_init(&v->nm, k);
    v->visible = calloc(v->nm.next + 1, sizeof(bool));
    if (!v->visible)
        kern_oom(v->nm.next + 1);
    v->nscope = 0;
    verify_region(v, body, NULL, 0, 0);
    free(v->visible);
    v->visible = NULL;
    ir_namer_free(&v->nm);
}

static void verify_module(verifier *v, const ir_module *m) {
    memset(v, 0, sizeof *v);
    arena_init(&v->mem);
    v->m = m;
    uint32_t n = 0;
    const ir_kernel *last = NULL;
    ir_foreach_kernel(k, m) {
        if (++n > m->nkernels + 1000000u)
            break; /* a cyclic list */
        verify_kernel(v, k);
        last = k;
    }
    v->k = NULL;
    if (n != m->nkernels)
        vkerr(v, NULL, "the module counts %u kernels but lists %u", m->nkernels, n);
    if (m->last_kernel != last)
        vkerr(v, NULL, "the module's last-kernel pointer is wrong");
}

static void verifier_free(verifier *v) {
    free(v->errs);
    free(v->scope);
    arena_free(&v->mem);
}

bool ir_verify(const ir_module *m, diag_sink *sink) {
    verifier v;
    verify_module(&v, m);
    if (v.nerrs && sink) {
        kern_source *src = ARENA_NEW(sink->mem, kern_source);
        src->path = arena_strdup(sink->mem, m->source_path ? m->source_path : "<ir>");
        src->text = "";
        src->len = 0;
        for (int i = 0; i < v.nerrs; i++)
            diag_report(sink, DIAG_ERROR, src, v.errs[i].loc, "%s", v.errs[i].msg);
    }
    bool ok = v.nerrs == 0;
    verifier_free(&v);
    return ok;
}

/* Writes the errors of op (kernel-level ones for op NULL) under its line. */
static void annotate(kern_buf *out, const ir_kernel *k, const ir_op *op, int indent, void *user) {
    const verifier *v = user;
    for (int i = 0; i < v->nerrs; i++) {
        if (v->errs[i].k != k || v->errs[i].op != op)
            continue;
        for (int j = 0; j < indent; j++)
            buf_puts(out, "  ");
        buf_printf(out, "// error: %s\n", v->errs[i].msg);
    }
}

void ir_verify_or_die(const ir_module *m, const char *after_pass) {
    verifier v;
    verify_module(&v, m);
    if (!v.nerrs) {
        verifier_free(&v);
        return;
    }
    kern_buf b = {0};
    buf_printf(&b, "kern: IR verification failed%s%s%s: %d error%s\n",
               after_pass ? " after pass '" : "", after_pass ? after_pass : "",
               after_pass ? "'" : "", v.nerrs, v.nerrs == 1 ? "" : "s");
    for (int i = 0; i < v.nerrs; i++)
        if (!v.errs[i].k)
            buf_printf(&b, "// error: %s\n", v.errs[i].msg);
    ir_print_hooked(&b, m, NULL, annotate, &v);
    fputs(b.data, stderr);
    fflush(stderr);
    buf_free(&b);
    verifier_free(&v);
    abort();
}
