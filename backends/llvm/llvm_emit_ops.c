/* llvm_emit_ops.c - the LLVM code of every IR op that is not control flow or a task.
 *
 * Types: bool is i1 in registers and i8 in memory (a byte != 0 reads as true); i32/u32 are
 * i32 (u32 picks the unsigned division, remainder, shift, comparison and conversions);
 * i64, f32 (float), f64 (double). Integer arithmetic wraps (no nsw/nuw).
 *
 * The module is lowered (passes/lower_semantics.c): integer division and remainder get a
 * divisor that is never 0 or -1 where LLVM would trap, shift counts come masked, min, max,
 * clamp and sign are selects already, and the debug checks of divisions and shifts are
 * `check` ops; each maps to one instruction here. What stays here: float -> integer casts
 * saturate (llvm.fptosi.sat / fptoui.sat; NaN gives 0), one instruction on most targets.
 *
 * Math: LLVM intrinsics where LLVM 19 has them (sin cos exp exp2 log log2 sqrt fabs floor
 * ceil round pow fma abs), libm otherwise (tan asin acos atan sinh cosh tanh atan2 and
 * their f64 forms); rsqrt is 1 / sqrt.
 *
 * Arrays: the element of a[i0, .., ik] is at data + ((i0 * n1 + i1) * n2 + i2)..., in
 * 64-bit arithmetic, indices sign-extended (u32: zero-extended). Atomics are monotonic
 * read-modify-writes returning the old value (the runtime's barrier between tasks is what
 * orders them with the rest); float add/sub are atomicrmw fadd/fsub, float min/max a
 * compare-exchange loop with min's rule (`v < old`: the element on ties and NaN), integer min/max atomicrmw (u)min/(u)max,
 * atomic_xchg (made by autodiff) atomicrmw xchg on any element type (bool as its byte);
 * atomic_cas (ir_lower_narrow, 16-bit elements) a strong cmpxchg i16.
 *
 * Checked mode (kc_checks: kc_options.checks or debug, in task bodies): every index is
 * checked 0 <= i < n (SIMD code: llvm_simd_emit.c, lanes at once), and
 * each `check` op (the lowering's checks of divisions and shifts) tests its condition. On a
 * failure the module's helper `kern.record_error` writes the record (first error wins by
 * cmpxchg of code 0 -> code); a failed access is skipped (a load or an atomic yields 0, a
 * store is dropped), while a checked division or shift goes on with the release result. */
#include <string.h>

#include "../../runtime/abi.h"
#include "llvm_internal.h"

/* ---- types and small helpers -------------------------------------------------------- */

static LLVMTypeRef scalar_reg_type(llvm_emitter *em, const kern_type *t) {
    switch (t->kind) {
    case TY_BOOL: return em->t_i1;
    case TY_I8:
    case TY_U8: return em->t_i8;
    case TY_I16:
    case TY_U16:
    case TY_F16: /* f16 and bf16: their bits (passes/lower_narrow.c) */
    case TY_BF16: return LLVMInt16TypeInContext(LLVMGetTypeContext(em->t_i32));
    case TY_I32:
    case TY_U32: return em->t_i32;
    case TY_I64:
    case TY_U64: return em->t_i64;
    case TY_F32: return em->t_f32;
    case TY_F64: return em->t_f64;
    default: kern_unreachable("LLVM backend: not a scalar type");
    }
}

LLVMTypeRef llvm_reg_type(llvm_emitter *em, const kern_type *t) {
    LLVMTypeRef s = scalar_reg_type(em, t);
    return em->vec_ops ? LLVMVectorType(s, em->simd_w) : s;
}

LLVMTypeRef llvm_mem_type(llvm_emitter *em, const kern_type *t) {
    return t->kind == TY_BOOL ? em->t_i8 : scalar_reg_type(em, t);
}

LLVMValueRef llvm_to_i64(llvm_emitter *em, LLVMValueRef v, const kern_type *t) {
    if (t->kind == TY_I64 || t->kind == TY_U64)
        return v;
    LLVMTypeRef vt = LLVMTypeOf(v), to = em->t_i64;
    if (LLVMGetTypeKind(vt) == LLVMVectorTypeKind)
        to = LLVMVectorType(em->t_i64, LLVMGetVectorSize(vt));
    if (ty_is_unsigned(t) || t->kind == TY_BOOL)
        return LLVMBuildZExt(em->b, v, to, "");
    return LLVMBuildSExt(em->b, v, to, "");
}

static LLVMValueRef splat_const(LLVMTypeRef vt, LLVMValueRef c) {
    unsigned n = LLVMGetVectorSize(vt);
    LLVMValueRef lanes[64];
    kern_assert(n <= 64);
    for (unsigned i = 0; i < n; i++)
        lanes[i] = c;
    return LLVMConstVector(lanes, n);
}

LLVMValueRef llvm_const_int(LLVMTypeRef t, long long v) {
    if (LLVMGetTypeKind(t) == LLVMVectorTypeKind)
        return splat_const(t, llvm_const_int(LLVMGetElementType(t), v));
    return LLVMConstInt(t, (unsigned long long)v, 1);
}

LLVMValueRef llvm_const_real(LLVMTypeRef t, double v) {
    if (LLVMGetTypeKind(t) == LLVMVectorTypeKind)
        return splat_const(t, llvm_const_real(LLVMGetElementType(t), v));
    return LLVMConstReal(t, v);
}


static LLVMValueRef call_intrinsic(llvm_emitter *em, const char *name, LLVMTypeRef *types,
                                   size_t ntypes, LLVMValueRef *args, unsigned nargs) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    kern_assert(id != 0);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(em->mod, id, types, ntypes);
    LLVMTypeRef fty = LLVMIntrinsicGetType(em->ctx, id, types, ntypes);
    return LLVMBuildCall2(em->b, fty, fn, args, nargs, "");
}

LLVMValueRef llvm_declare_math(llvm_emitter *em, const char *name, LLVMTypeRef t, unsigned nargs,
                               LLVMTypeRef *fty) {
    LLVMTypeRef params[2] = {t, t};
    *fty = LLVMFunctionType(t, params, nargs, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(em->mod, name);
    if (!fn) {
        fn = LLVMAddFunction(em->mod, name, *fty);
        /* no observable effects for kernels (errno is never read) */
        static const char *const attrs[] = {"nounwind", "willreturn", "memory"};
        for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++) {
            unsigned kind = LLVMGetEnumAttributeKindForName(attrs[i], strlen(attrs[i]));
            LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                    LLVMCreateEnumAttribute(em->ctx, kind, 0));
        }
    }
    return fn;
}

static LLVMValueRef call_libm(llvm_emitter *em, const char *base, bool f32, LLVMValueRef *args,
                              unsigned nargs) {
    char name[32];
    memcpy(name, base, strlen(base) + 1);
    if (f32)
        strcat(name, "f");
    LLVMTypeRef fty;
    LLVMValueRef fn = llvm_declare_math(em, name, f32 ? em->t_f32 : em->t_f64, nargs, &fty);
    return LLVMBuildCall2(em->b, fty, fn, args, nargs, "");
}

static LLVMValueRef unary_intrinsic(llvm_emitter *em, const char *name, LLVMValueRef a) {
    LLVMTypeRef t = LLVMTypeOf(a);
    return call_intrinsic(em, name, &t, 1, &a, 1);
}

/* ---- checks ------------------------------------------------------------------------- */

/* void kern.record_error(ptr err, i32 code, i32 line, i32 col, i32 dim, i64 a, i64 b) */
static LLVMValueRef error_fn(llvm_emitter *em) {
    if (em->err_fn)
        return em->err_fn;
    LLVMTypeRef params[7] = {em->t_ptr, em->t_i32, em->t_i32, em->t_i32,
                             em->t_i32, em->t_i64, em->t_i64};
    LLVMTypeRef fty = LLVMFunctionType(em->t_void, params, 7, 0);
    LLVMValueRef fn = LLVMAddFunction(em->mod, "kern.record_error", fty);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    static const char *const attrs[] = {"nounwind", "noinline", "cold"};
    for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++) {
        unsigned kind = LLVMGetEnumAttributeKindForName(attrs[i], strlen(attrs[i]));
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                LLVMCreateEnumAttribute(em->ctx, kind, 0));
    }
    LLVMBuilderRef b = LLVMCreateBuilderInContext(em->ctx);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(em->ctx, fn, "entry"),
                      write = LLVMAppendBasicBlockInContext(em->ctx, fn, "first"),
                      done = LLVMAppendBasicBlockInContext(em->ctx, fn, "done");
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef err = LLVMGetParam(fn, 0);
    LLVMValueRef x = LLVMBuildAtomicCmpXchg(
        b, err, LLVMConstInt(em->t_i32, 0, 0), LLVMGetParam(fn, 1),
        LLVMAtomicOrderingSequentiallyConsistent, LLVMAtomicOrderingSequentiallyConsistent, 0);
    LLVMSetAlignment(x, 4);
    LLVMBuildCondBr(b, LLVMBuildExtractValue(b, x, 1, ""), write, done);
    LLVMPositionBuilderAtEnd(b, write);
    static const unsigned offs[5] = {offsetof(kern_err_record, line),
                                     offsetof(kern_err_record, col), offsetof(kern_err_record, dim),
                                     offsetof(kern_err_record, a), offsetof(kern_err_record, b)};
    for (unsigned i = 0; i < 5; i++) {
        LLVMValueRef off = LLVMConstInt(em->t_i64, offs[i], 0);
        LLVMValueRef p = LLVMBuildInBoundsGEP2(b, em->t_i8, err, &off, 1, "");
        LLVMValueRef st = LLVMBuildStore(b, LLVMGetParam(fn, 2 + i), p);
        LLVMSetAlignment(st, i < 3 ? 4 : 8);
    }
    LLVMBuildBr(b, done);
    LLVMPositionBuilderAtEnd(b, done);
    LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);
    em->err_fn = fn;
    return fn;
}

void llvm_record_error(llvm_emitter *em, const ir_op *op, int code, LLVMValueRef dim,
                       LLVMValueRef a64, LLVMValueRef b64) {
    LLVMValueRef fn = error_fn(em);
    LLVMValueRef args[7] = {em->err,
                            LLVMConstInt(em->t_i32, (unsigned)code, 0),
                            LLVMConstInt(em->t_i32, op->loc.line, 0),
                            LLVMConstInt(em->t_i32, op->loc.col, 0),
                            dim,
                            a64,
                            b64};
    LLVMBuildCall2(em->b, LLVMGlobalGetValueType(fn), fn, args, 7, "");
}

/* A guarded operation: checks branch to blocks that record an error and go to `skip`. */
typedef struct guard {
    LLVMBasicBlockRef skip;
} guard;

static void guard_check(llvm_emitter *em, guard *g, const ir_op *op, LLVMValueRef ok, int code,
                        int dim, LLVMValueRef a64, LLVMValueRef b64) {
    if (!g->skip)
        g->skip = llvm_new_block(em, "chk.skip");
    LLVMBasicBlockRef pass = llvm_new_block(em, "chk.ok"), fail = llvm_new_block(em, "chk.fail");
    LLVMBuildCondBr(em->b, ok, pass, fail);
    LLVMPositionBuilderAtEnd(em->b, fail);
    llvm_record_error(em, op, code, LLVMConstInt(em->t_i32, (unsigned)dim, 0), a64, b64);
    LLVMBuildBr(em->b, g->skip);
    LLVMPositionBuilderAtEnd(em->b, pass);
}

/* Ends a guarded operation whose checked path produced v (NULL: no value); the result is
 * v, or zero when a check failed. */
static LLVMValueRef guard_end(llvm_emitter *em, guard *g, LLVMValueRef v) {
    if (!g->skip)
        return v;
    LLVMBasicBlockRef ok_end = LLVMGetInsertBlock(em->b), cont = llvm_new_block(em, "chk.cont");
    LLVMBuildBr(em->b, cont);
    LLVMPositionBuilderAtEnd(em->b, g->skip);
    LLVMBuildBr(em->b, cont);
    LLVMPositionBuilderAtEnd(em->b, cont);
    if (!v)
        return NULL;
    LLVMValueRef phi = LLVMBuildPhi(em->b, LLVMTypeOf(v), "");
    LLVMValueRef in[2] = {v, LLVMConstNull(LLVMTypeOf(v))};
    LLVMBasicBlockRef from[2] = {ok_end, g->skip};
    LLVMAddIncoming(phi, in, from, 2);
    return phi;
}

/* ---- arithmetic --------------------------------------------------------------------- */

/* div/rem and shifts of lowered IR (passes/lower_semantics.c): the divisor is never 0 or
 * -1 where the language would trap, and the count is masked. */
static LLVMValueRef emit_divrem(llvm_emitter *em, const ir_op *op, LLVMValueRef a, LLVMValueRef b) {
    const kern_type *t = op->operands[0]->type;
    bool div = op->code == IR_DIV;
    if (ty_is_float(t))
        return LLVMBuildFDiv(em->b, a, b, "");
    if (ty_is_unsigned(t))
        return div ? LLVMBuildUDiv(em->b, a, b, "") : LLVMBuildURem(em->b, a, b, "");
    return div ? LLVMBuildSDiv(em->b, a, b, "") : LLVMBuildSRem(em->b, a, b, "");
}

static LLVMValueRef emit_shift(llvm_emitter *em, const ir_op *op, LLVMValueRef a, LLVMValueRef b) {
    if (op->code == IR_SHL)
        return LLVMBuildShl(em->b, a, b, "");
    return ty_is_unsigned(op->operands[0]->type) ? LLVMBuildLShr(em->b, a, b, "")
                                                 : LLVMBuildAShr(em->b, a, b, "");
}

/* A `check` (lowered debug check): records the error when operand 0 is false; nothing in
 * functions without an error record (the CPU's count functions). */
static void emit_check(llvm_emitter *em, const ir_op *op, LLVMValueRef *x) {
    if (!em->checks)
        return;
    guard g = {0};
    guard_check(em, &g, op, x[0], (int)op->imm.i, 0, x[1], x[2]);
    guard_end(em, &g, NULL);
}

static LLVMValueRef emit_compare(llvm_emitter *em, ir_opcode code, const kern_type *t,
                                 LLVMValueRef a, LLVMValueRef b) {
    if (ty_is_float(t)) {
        LLVMRealPredicate p;
        switch (code) {
        case IR_EQ: p = LLVMRealOEQ; break;
        case IR_NE: p = LLVMRealUNE; break;
        case IR_LT: p = LLVMRealOLT; break;
        case IR_LE: p = LLVMRealOLE; break;
        case IR_GT: p = LLVMRealOGT; break;
        case IR_GE: p = LLVMRealOGE; break;
        default: kern_unreachable("not a comparison");
        }
        return LLVMBuildFCmp(em->b, p, a, b, "");
    }
    bool u = ty_is_unsigned(t);
    LLVMIntPredicate p;
    switch (code) {
    case IR_EQ: p = LLVMIntEQ; break;
    case IR_NE: p = LLVMIntNE; break;
    case IR_LT: p = u ? LLVMIntULT : LLVMIntSLT; break;
    case IR_LE: p = u ? LLVMIntULE : LLVMIntSLE; break;
    case IR_GT: p = u ? LLVMIntUGT : LLVMIntSGT; break;
    case IR_GE: p = u ? LLVMIntUGE : LLVMIntSGE; break;
    default: kern_unreachable("not a comparison");
    }
    return LLVMBuildICmp(em->b, p, a, b, "");
}

static LLVMValueRef emit_cast(llvm_emitter *em, const kern_type *from, const kern_type *to,
                              LLVMValueRef v) {
    LLVMTypeRef rt = llvm_reg_type(em, to);
    if (from == to)
        return v;
    if (ty_is_float(from)) {
        if (ty_is_float(to))
            return to->kind == TY_F64 ? LLVMBuildFPExt(em->b, v, rt, "")
                                      : LLVMBuildFPTrunc(em->b, v, rt, "");
        if (to->kind == TY_BOOL)
            return LLVMBuildFCmp(em->b, LLVMRealUNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
        LLVMTypeRef types[2] = {rt, LLVMTypeOf(v)};
        return call_intrinsic(em, ty_is_unsigned(to) ? "llvm.fptoui.sat" : "llvm.fptosi.sat", types,
                              2, &v, 1);
    }
    /* from bool or an integer (f16/bf16 casts are integer IR by now: lower_narrow.c) */
    bool sgn = from->kind != TY_BOOL && !ty_is_unsigned(from);
    if (ty_is_float(to))
        return sgn ? LLVMBuildSIToFP(em->b, v, rt, "") : LLVMBuildUIToFP(em->b, v, rt, "");
    if (to->kind == TY_BOOL)
        return LLVMBuildICmp(em->b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
    unsigned fw = LLVMGetIntTypeWidth(scalar_reg_type(em, from)),
             tw = LLVMGetIntTypeWidth(scalar_reg_type(em, to));
    if (fw == tw)
        return v; /* i32 <-> u32: the same bits */
    if (fw > tw)
        return LLVMBuildTrunc(em->b, v, rt, "");
    return sgn ? LLVMBuildSExt(em->b, v, rt, "") : LLVMBuildZExt(em->b, v, rt, "");
}

static LLVMValueRef emit_const(llvm_emitter *em, const ir_op *op) {
    const kern_type *t = op->results[0]->type;
    LLVMTypeRef ty = scalar_reg_type(em, t);
    if (t->kind == TY_F32) {
        float f = (float)op->imm.f;
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        if (f != f) /* NaN: keep the payload bits */
            return LLVMConstBitCast(LLVMConstInt(em->t_i32, bits, 0), ty);
        return LLVMConstReal(ty, op->imm.f);
    }
    if (t->kind == TY_F64) {
        uint64_t bits;
        memcpy(&bits, &op->imm.f, sizeof bits);
        if (op->imm.f != op->imm.f)
            return LLVMConstBitCast(LLVMConstInt(em->t_i64, bits, 0), ty);
        return LLVMConstReal(ty, op->imm.f);
    }
    return LLVMConstInt(ty, (unsigned long long)op->imm.i, 0);
}

static LLVMValueRef emit_float_math(llvm_emitter *em, const ir_op *op, LLVMValueRef *x) {
    bool f32 = op->operands[0]->type->kind == TY_F32;
    if (em->hooks->math) {
        LLVMValueRef r = em->hooks->math(em, op, x);
        if (r)
            return r;
    }

    switch (op->code) {
    case IR_SIN: return unary_intrinsic(em, "llvm.sin", x[0]);
    case IR_COS: return unary_intrinsic(em, "llvm.cos", x[0]);
    case IR_EXP: return unary_intrinsic(em, "llvm.exp", x[0]);
    case IR_EXP2: return unary_intrinsic(em, "llvm.exp2", x[0]);
    case IR_LOG: return unary_intrinsic(em, "llvm.log", x[0]);
    case IR_LOG2: return unary_intrinsic(em, "llvm.log2", x[0]);
    case IR_SQRT: return unary_intrinsic(em, "llvm.sqrt", x[0]);
    case IR_FLOOR: return unary_intrinsic(em, "llvm.floor", x[0]);
    case IR_CEIL: return unary_intrinsic(em, "llvm.ceil", x[0]);
    case IR_ROUND: return unary_intrinsic(em, "llvm.round", x[0]); /* half away from zero */
    case IR_REM: return LLVMBuildFRem(em->b, x[0], x[1], "");      /* C's fmod */
    case IR_TRUNC: return unary_intrinsic(em, "llvm.trunc", x[0]);
    case IR_RINT: return unary_intrinsic(em, "llvm.rint", x[0]); /* default mode: to even */
    case IR_COPYSIGN: {
        LLVMTypeRef t = LLVMTypeOf(x[0]);
        return call_intrinsic(em, "llvm.copysign", &t, 1, x, 2);
    }
    case IR_RSQRT:
        return LLVMBuildFDiv(em->b, llvm_const_real(LLVMTypeOf(x[0]), 1.0),
                             unary_intrinsic(em, "llvm.sqrt", x[0]), "");
    case IR_TAN: return call_libm(em, "tan", f32, x, 1);
    case IR_ASIN: return call_libm(em, "asin", f32, x, 1);
    case IR_ACOS: return call_libm(em, "acos", f32, x, 1);
    case IR_ATAN: return call_libm(em, "atan", f32, x, 1);
    case IR_SINH: return call_libm(em, "sinh", f32, x, 1);
    case IR_COSH: return call_libm(em, "cosh", f32, x, 1);
    case IR_TANH: return call_libm(em, "tanh", f32, x, 1);
    case IR_ATAN2: return call_libm(em, "atan2", f32, x, 2);
    case IR_POW: {
        LLVMTypeRef t = LLVMTypeOf(x[0]);
        return call_intrinsic(em, "llvm.pow", &t, 1, x, 2);
    }
    case IR_FMA: {
        LLVMTypeRef t = LLVMTypeOf(x[0]);
        return call_intrinsic(em, "llvm.fma", &t, 1, x, 3);
    }
    default: kern_unreachable("LLVM backend: not a float math op");
    }
}

/* ---- arrays ------------------------------------------------------------------------- */

static int param_of(llvm_emitter *em, const ir_value *a) {
    kern_assert(!a->def && a->region == em->kernel->body);
    return (int)a->index;
}

/* The element pointer of a load/store/atomic (operands: array, indices...), with the
 * debug bounds checks added to g. */
static LLVMValueRef element_ptr(llvm_emitter *em, const ir_op *op, guard *g,
                                LLVMValueRef *lin_out) {
    int p = param_of(em, op->operands[0]);
    const kern_type *at = op->operands[0]->type;
    LLVMValueRef lin = NULL;
    for (int d = 0; d < at->rank; d++) {
        const ir_value *iv = op->operands[1 + d];
        LLVMValueRef i = llvm_to_i64(em, llvm_val(em, iv), iv->type);
        LLVMValueRef n = em->arr_shape[p][d];
        if (llvm_access_checked(em, op))
            guard_check(em, g, op, LLVMBuildICmp(em->b, LLVMIntULT, i, n, ""), KERN_DEVERR_BOUNDS,
                        d, i, n);
        lin = d == 0 ? i : LLVMBuildNSWAdd(em->b, LLVMBuildNSWMul(em->b, lin, n, ""), i, "");
    }
    if (lin_out)
        *lin_out = lin;
    return LLVMBuildInBoundsGEP2(em->b, llvm_mem_type(em, at->elem), em->arr_data[p], &lin, 1, "");
}

static LLVMValueRef emit_float_minmax_atomic(llvm_emitter *em, bool is_min, const kern_type *t,
                                             LLVMValueRef ptr, LLVMValueRef v) {
    LLVMTypeRef ity = t->kind == TY_F32 ? em->t_i32 : em->t_i64, fty = LLVMTypeOf(v);
    unsigned align = (unsigned)ty_size(t);
    LLVMValueRef cur = LLVMBuildLoad2(em->b, ity, ptr, "");
    LLVMSetOrdering(cur, LLVMAtomicOrderingMonotonic);
    LLVMSetAlignment(cur, align);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b), loop = llvm_new_block(em, "amin.loop"),
                      try = llvm_new_block(em, "amin.try"), done = llvm_new_block(em, "amin.done");
    LLVMBuildBr(em->b, loop);
    LLVMPositionBuilderAtEnd(em->b, loop);
    LLVMValueRef oldbits = LLVMBuildPhi(em->b, ity, "");
    LLVMAddIncoming(oldbits, &cur, &pre, 1);
    LLVMValueRef old = LLVMBuildBitCast(em->b, oldbits, fty, "");
    LLVMValueRef take = emit_compare(em, is_min ? IR_LT : IR_GT, t, v, old);
    LLVMBuildCondBr(em->b, take, try, done);
    LLVMPositionBuilderAtEnd(em->b, try);
    LLVMValueRef x =
        LLVMBuildAtomicCmpXchg(em->b, ptr, oldbits, LLVMBuildBitCast(em->b, v, ity, ""),
                               LLVMAtomicOrderingMonotonic, LLVMAtomicOrderingMonotonic, 0);
    LLVMSetAlignment(x, align);
    LLVMValueRef seen = LLVMBuildExtractValue(em->b, x, 0, "");
    LLVMAddIncoming(oldbits, &seen, &try, 1);
    LLVMBuildCondBr(em->b, LLVMBuildExtractValue(em->b, x, 1, ""), done, loop);
    LLVMPositionBuilderAtEnd(em->b, done);
    return old; /* the loop block dominates done */
}

bool llvm_proven(const llvm_emitter *em, const ir_op *op) {
    for (uint32_t i = 0; i < em->nproven; i++)
        if (em->proven[i] == op)
            return true;
    return false;
}

bool llvm_access_checked(const llvm_emitter *em, const ir_op *op) {
    return em->checks && !llvm_proven(em, op);
}

LLVMValueRef llvm_element_ptr(llvm_emitter *em, const ir_op *op) {
    kern_assert(!em->checks);
    guard g = {0};
    return element_ptr(em, op, &g, NULL);
}

static LLVMValueRef emit_access(llvm_emitter *em, const ir_op *op) {
    const kern_type *et = op->operands[0]->type->elem;
    LLVMTypeRef mt = llvm_mem_type(em, et);
    unsigned align = (unsigned)ty_size(et);
    guard g = {0};
    LLVMValueRef lin = NULL;
    LLVMValueRef ptr = element_ptr(em, op, &g, &lin);
    LLVMValueRef r = NULL;
    if (op->code == IR_LOAD) {
        r = LLVMBuildLoad2(em->b, mt, ptr, "");
        LLVMSetAlignment(r, align);
        if (et->kind == TY_BOOL)
            r = LLVMBuildICmp(em->b, LLVMIntNE, r, LLVMConstNull(mt), "");
        return guard_end(em, &g, r);
    }
    LLVMValueRef v = llvm_val(em, op->operands[op->noperands - 1]);
    if (op->code == IR_ATOMIC_CAS) { /* a 16-bit element (ir_lower_narrow's loops) */
        LLVMValueRef e = llvm_val(em, op->operands[op->noperands - 2]);
        r = LLVMBuildAtomicCmpXchg(em->b, ptr, e, v, LLVMAtomicOrderingMonotonic,
                                   LLVMAtomicOrderingMonotonic, 0);
        LLVMSetAlignment(r, align);
        return guard_end(em, &g, LLVMBuildExtractValue(em->b, r, 0, ""));
    }
    if (op->code == IR_STORE) {
        if (et->kind == TY_BOOL)
            v = LLVMBuildZExt(em->b, v, mt, "");
        LLVMSetAlignment(LLVMBuildStore(em->b, v, ptr), align);
        guard_end(em, &g, NULL);
        return NULL;
    }
    bool fl = ty_is_float(et), u = ty_is_unsigned(et);
    LLVMAtomicRMWBinOp rmw;
    switch (op->code) {
    case IR_ATOMIC_ADD: rmw = fl ? LLVMAtomicRMWBinOpFAdd : LLVMAtomicRMWBinOpAdd; break;
    case IR_ATOMIC_SUB: rmw = fl ? LLVMAtomicRMWBinOpFSub : LLVMAtomicRMWBinOpSub; break;
    case IR_ATOMIC_MIN:
        if (fl)
            return guard_end(em, &g, emit_float_minmax_atomic(em, true, et, ptr, v));
        rmw = u ? LLVMAtomicRMWBinOpUMin : LLVMAtomicRMWBinOpMin;
        break;
    case IR_ATOMIC_MAX:
        if (fl)
            return guard_end(em, &g, emit_float_minmax_atomic(em, false, et, ptr, v));
        rmw = u ? LLVMAtomicRMWBinOpUMax : LLVMAtomicRMWBinOpMax;
        break;
    case IR_ATOMIC_XCHG: rmw = LLVMAtomicRMWBinOpXchg; break;
    default: kern_unreachable("LLVM backend: not an array access");
    }
    if (fl && (op->code == IR_ATOMIC_ADD || op->code == IR_ATOMIC_SUB) && em->hooks->atomic_add &&
        em->hooks->atomic_add(em, op, ptr, v, align))
        return guard_end(em, &g, LLVMGetPoison(mt));
    if (fl && (op->code == IR_ATOMIC_ADD || op->code == IR_ATOMIC_SUB) && em->hooks->atomic_fadd &&
        !llvm_value_used(em, op->results[0])) {
        LLVMValueRef add = op->code == IR_ATOMIC_SUB ? LLVMBuildFNeg(em->b, v, "") : v;
        if (em->hooks->atomic_fadd(em, op, ptr, lin, add, align))
            return guard_end(em, &g, LLVMGetPoison(mt));
    }
    if (et->kind == TY_BOOL) /* the builder makes no bool atomics; kept consistent anyway */
        v = LLVMBuildZExt(em->b, v, mt, "");
    r = LLVMBuildAtomicRMW(em->b, rmw, ptr, v, LLVMAtomicOrderingMonotonic, 0);
    LLVMSetAlignment(r, align);
    if (et->kind == TY_BOOL)
        r = LLVMBuildICmp(em->b, LLVMIntNE, r, LLVMConstNull(mt), "");
    return guard_end(em, &g, r);
}

/* ---- dispatch ----------------------------------------------------------------------- */

void llvm_emit_simple_op(llvm_emitter *em, const ir_op *op) {
    LLVMValueRef x[3] = {NULL, NULL, NULL};
    const kern_type *t = op->noperands ? op->operands[0]->type : NULL;
    bool fl = t && ty_is_float(t);
    LLVMValueRef r;
    switch (op->code) {
    case IR_CONST: r = emit_const(em, op); break;
    case IR_DIM: {
        int p = param_of(em, op->operands[0]);
        r = LLVMBuildTrunc(em->b, em->arr_shape[p][op->imm.i], em->t_i32, "");
        break;
    }
    case IR_LOAD:
    case IR_STORE:
    case IR_ATOMIC_ADD:
    case IR_ATOMIC_SUB:
    case IR_ATOMIC_MIN:
    case IR_ATOMIC_MAX:
    case IR_ATOMIC_XCHG:
    case IR_ATOMIC_CAS:
        if (llvm_reduce_emit(em, op)) /* its old value is unused */
            r = LLVMGetPoison(llvm_reg_type(em, op->results[0]->type));
        else
            r = emit_access(em, op);
        break;
    default:
        kern_assert(op->noperands <= 3);
        for (uint32_t i = 0; i < op->noperands; i++)
            x[i] = llvm_val(em, op->operands[i]);
        switch (op->code) {
        case IR_CAST: r = emit_cast(em, t, op->results[0]->type, x[0]); break;
        case IR_BITCAST: {
            LLVMTypeRef rt = llvm_reg_type(em, op->results[0]->type);
            r = LLVMTypeOf(x[0]) == rt ? x[0] : LLVMBuildBitCast(em->b, x[0], rt, "");
            break;
        }
        case IR_ADD:
            r = fl ? LLVMBuildFAdd(em->b, x[0], x[1], "") : LLVMBuildAdd(em->b, x[0], x[1], "");
            break;
        case IR_SUB:
            r = fl ? LLVMBuildFSub(em->b, x[0], x[1], "") : LLVMBuildSub(em->b, x[0], x[1], "");
            break;
        case IR_MUL:
            r = fl ? LLVMBuildFMul(em->b, x[0], x[1], "") : LLVMBuildMul(em->b, x[0], x[1], "");
            break;
        case IR_DIV: r = emit_divrem(em, op, x[0], x[1]); break;
        case IR_REM: r = fl ? emit_float_math(em, op, x) : emit_divrem(em, op, x[0], x[1]); break;
        case IR_NEG: r = fl ? LLVMBuildFNeg(em->b, x[0], "") : LLVMBuildNeg(em->b, x[0], ""); break;
        case IR_AND: r = LLVMBuildAnd(em->b, x[0], x[1], ""); break;
        case IR_OR: r = LLVMBuildOr(em->b, x[0], x[1], ""); break;
        case IR_XOR: r = LLVMBuildXor(em->b, x[0], x[1], ""); break;
        case IR_NOT: r = LLVMBuildNot(em->b, x[0], ""); break;
        case IR_SHL:
        case IR_SHR: r = emit_shift(em, op, x[0], x[1]); break;
        case IR_EQ:
        case IR_NE:
        case IR_LT:
        case IR_LE:
        case IR_GT:
        case IR_GE: r = emit_compare(em, op->code, t, x[0], x[1]); break;
        case IR_SELECT: r = LLVMBuildSelect(em->b, x[0], x[1], x[2], ""); break;
        case IR_ABS:
            if (fl)
                r = unary_intrinsic(em, "llvm.fabs", x[0]);
            else if (ty_is_unsigned(t))
                r = x[0];
            else {
                LLVMTypeRef ty = LLVMTypeOf(x[0]);
                LLVMValueRef args[2] = {x[0], LLVMConstInt(em->t_i1, 0, 0)}; /* INT_MIN wraps */
                r = call_intrinsic(em, "llvm.abs", &ty, 1, args, 2);
            }
            break;
        case IR_CHECK: emit_check(em, op, x); return;
        case IR_LANEMAX: r = em->hooks->lanemax ? em->hooks->lanemax(em, op, x[0]) : x[0]; break;
        case IR_SIGN:
        case IR_MIN:
        case IR_MAX:
        case IR_CLAMP: kern_unreachable("LLVM backend: lowered by ir_lower_semantics");
        default: r = emit_float_math(em, op, x); break;
        }
        if (fl && em->opts->fast_math && em->hooks->fast_contract &&
            (op->code == IR_ADD || op->code == IR_SUB || op->code == IR_MUL) &&
            LLVMIsAInstruction(r))
            LLVMSetFastMathFlags(r, LLVMFastMathAllowContract);
    }
    if (op->nresults)
        llvm_set_val(em, op->results[0], r);
}
