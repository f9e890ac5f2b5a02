/* llvm_sizer.c - sizer kernels: the device path of adstack sizing (runtime contract 3,
 * docs/runtime-contracts.md; docs/gpu-abi.md).
 *
 * An adstack whose SizeExpr reads array elements ((read P I...), `for j in 0..count[i]`)
 * cannot be sized on the host when the array lives in device memory. For each such
 * adstack s of a kernel K, a GPU module carries an entry point kern_K__s<s> that evaluates
 * the SizeExpr on the device, so that only the final size comes back to the host.
 *
 * Parameters: the kernel's parameters as in docs/gpu-abi.md (arrays: data pointer and
 * extents; scalars by value), then `ptr res`, four i64 the runtime sets to
 * {INT64_MIN, 0, 0, 0} before the launch:
 *   res[0]  the value, raised with an atomic max (INT64_MIN: nothing evaluated, which
 *           only happens when the outermost range is empty, and then the value is 0);
 *   res[1]  0, or the first error (compare-and-swap from 0): 1 a read out of bounds
 *           (res[2] = the parameter, res[3] = the index), 2 a division by zero, 3 an int64
 *           overflow;
 * Evaluation is exact: when the expression is a maxover, its range is split over the
 * grid (a grid-stride loop, each thread folding a local maximum, then one atomic max);
 * nested maxovers are loops in each thread; anything else is evaluated by thread 0. The
 * host evaluator (common/sizeexpr.c) computes the same maxima, except where it falls back
 * to interval bounds (an upper bound), so a device size is never larger than a host one.
 * Nested maxovers cost the product of their ranges. */
#include <stdlib.h>

#include "../../common/sizeexpr.h"
#include "llvm_gpu.h"

enum { SZ_ERR_BOUNDS = 1, SZ_ERR_DIV0 = 2, SZ_ERR_OVERFLOW = 3, MAX_VARS = 64 };

typedef struct sizer_em {
    llvm_emitter *em;
    LLVMValueRef res;
    LLVMValueRef vars[MAX_VARS];
} sizer_em;

static LLVMValueRef c64(llvm_emitter *em, long long v) {
    return LLVMConstInt(em->t_i64, (unsigned long long)v, 1);
}

static LLVMValueRef res_field(sizer_em *s, int i) {
    LLVMValueRef idx = c64(s->em, i);
    return LLVMBuildInBoundsGEP2(s->em->b, s->em->t_i64, s->res, &idx, 1, "");
}

/* if (!ok) record error code with a, b; execution goes on in the ok block either way
 * (the value computed on the failing path is replaced by the caller). */
static void check(sizer_em *s, LLVMValueRef ok, int code, LLVMValueRef a, LLVMValueRef b) {
    llvm_emitter *em = s->em;
    LLVMBasicBlockRef fail = llvm_new_block(em, "sz.fail"), cont = llvm_new_block(em, "sz.ok");
    llvm_likely_first(em, LLVMBuildCondBr(em->b, ok, cont, fail));
    LLVMPositionBuilderAtEnd(em->b, fail);
    LLVMValueRef x = LLVMBuildAtomicCmpXchg(em->b, res_field(s, 1), c64(em, 0), c64(em, code),
                                            LLVMAtomicOrderingSequentiallyConsistent,
                                            LLVMAtomicOrderingSequentiallyConsistent, 0);
    LLVMBasicBlockRef won = llvm_new_block(em, "sz.won");
    LLVMBuildCondBr(em->b, LLVMBuildExtractValue(em->b, x, 1, ""), won, cont);
    LLVMPositionBuilderAtEnd(em->b, won);
    LLVMBuildStore(em->b, a, res_field(s, 2));
    LLVMBuildStore(em->b, b, res_field(s, 3));
    LLVMBuildBr(em->b, cont);
    LLVMPositionBuilderAtEnd(em->b, cont);
}

static LLVMValueRef arith(sizer_em *s, const char *intr, LLVMValueRef x, LLVMValueRef y) {
    llvm_emitter *em = s->em;
    unsigned id = LLVMLookupIntrinsicID(intr, strlen(intr));
    LLVMTypeRef t = em->t_i64;
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(em->mod, id, &t, 1);
    LLVMValueRef args[2] = {x, y};
    LLVMValueRef r =
        LLVMBuildCall2(em->b, LLVMIntrinsicGetType(em->ctx, id, &t, 1), fn, args, 2, "");
    check(s, LLVMBuildNot(em->b, LLVMBuildExtractValue(em->b, r, 1, ""), ""), SZ_ERR_OVERFLOW,
          c64(em, 0), c64(em, 0));
    return LLVMBuildExtractValue(em->b, r, 0, "");
}

static LLVMValueRef eval(sizer_em *s, const sz_expr *e);

/* The maximum of body over [lo, hi) in one thread, from `from` with step `step`; returns
 * INT64_MIN when it ran no iteration. */
static LLVMValueRef fold_max(sizer_em *s, const sz_expr *e, LLVMValueRef from, LLVMValueRef hi,
                             LLVMValueRef step) {
    llvm_emitter *em = s->em;
    kern_assert(e->v >= 0 && e->v < MAX_VARS);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b), head = llvm_new_block(em, "sz.head"),
                      body = llvm_new_block(em, "sz.body"), exit = llvm_new_block(em, "sz.exit");
    LLVMBuildBr(em->b, head);
    LLVMPositionBuilderAtEnd(em->b, head);
    LLVMValueRef i = LLVMBuildPhi(em->b, em->t_i64, "v");
    LLVMValueRef m = LLVMBuildPhi(em->b, em->t_i64, "m");
    LLVMValueRef init = c64(em, INT64_MIN);
    LLVMAddIncoming(i, &from, &pre, 1);
    LLVMAddIncoming(m, &init, &pre, 1);
    LLVMBuildCondBr(em->b, LLVMBuildICmp(em->b, LLVMIntSLT, i, hi, ""), body, exit);
    LLVMPositionBuilderAtEnd(em->b, body);
    LLVMValueRef saved = s->vars[e->v];
    s->vars[e->v] = i;
    LLVMValueRef x = eval(s, e->kids[2]);
    s->vars[e->v] = saved;
    LLVMValueRef m2 = LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntSGT, x, m, ""), x, m, "");
    LLVMValueRef next = LLVMBuildAdd(em->b, i, step, ""); /* i < hi <= INT64_MAX - step */
    LLVMBasicBlockRef end = LLVMGetInsertBlock(em->b);
    LLVMBuildBr(em->b, head);
    LLVMAddIncoming(i, &next, &end, 1);
    LLVMAddIncoming(m, &m2, &end, 1);
    LLVMPositionBuilderAtEnd(em->b, exit);
    return m;
}

static LLVMValueRef eval_read(sizer_em *s, const sz_expr *e) {
    llvm_emitter *em = s->em;
    int p = (int)e->v;
    const kern_type *t = em->kernel->params[p].type;
    LLVMValueRef lin = NULL, ok = LLVMConstInt(em->t_i1, 1, 0), bad_idx = c64(em, 0);
    for (int d = 0; d < e->nkids; d++) {
        LLVMValueRef i = eval(s, e->kids[d]);
        LLVMValueRef in = LLVMBuildICmp(em->b, LLVMIntULT, i, em->arr_shape[p][d], "");
        bad_idx = LLVMBuildSelect(em->b, LLVMBuildAnd(em->b, ok, LLVMBuildNot(em->b, in, ""), ""),
                                  i, bad_idx, "");
        ok = LLVMBuildAnd(em->b, ok, in, "");
        lin = d == 0
                  ? i
                  : LLVMBuildAdd(em->b, LLVMBuildMul(em->b, lin, em->arr_shape[p][d], ""), i, "");
    }
    check(s, ok, SZ_ERR_BOUNDS, c64(em, p), bad_idx);
    /* the failing path reads element 0 of nothing: read index 0 only when in bounds */
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b), rd = llvm_new_block(em, "sz.read"),
                      done = llvm_new_block(em, "sz.readdone");
    LLVMBuildCondBr(em->b, ok, rd, done);
    LLVMPositionBuilderAtEnd(em->b, rd);
    LLVMTypeRef mt = llvm_mem_type(em, t->elem);
    LLVMValueRef v = LLVMBuildLoad2(
        em->b, mt, LLVMBuildInBoundsGEP2(em->b, mt, em->arr_data[p], &lin, 1, ""), "");
    LLVMSetAlignment(v, (unsigned)ty_size(t->elem));
    switch (t->elem->kind) {
    case TY_I32: v = LLVMBuildSExt(em->b, v, em->t_i64, ""); break;
    case TY_I64: break;
    default: /* u32, and bool as its byte (!= 0) */
        if (t->elem->kind == TY_BOOL)
            v = LLVMBuildICmp(em->b, LLVMIntNE, v, LLVMConstNull(mt), "");
        v = LLVMBuildZExt(em->b, v, em->t_i64, "");
        break;
    }
    LLVMBuildBr(em->b, done);
    LLVMPositionBuilderAtEnd(em->b, done);
    LLVMValueRef phi = LLVMBuildPhi(em->b, em->t_i64, "");
    LLVMValueRef in[2] = {v, c64(em, 0)};
    LLVMBasicBlockRef from[2] = {rd, pre};
    LLVMAddIncoming(phi, in, from, 2);
    return phi;
}

static LLVMValueRef eval(sizer_em *s, const sz_expr *e) {
    llvm_emitter *em = s->em;
    switch (e->op) {
    case SZ_CONST: return c64(em, e->v);
    case SZ_VAR: kern_assert(e->v >= 0 && e->v < MAX_VARS && s->vars[e->v]); return s->vars[e->v];
    case SZ_PARAM: {
        const kern_type *t = em->kernel->params[e->v].type;
        LLVMValueRef v = llvm_val(em, em->kernel->body->args[e->v]);
        return llvm_to_i64(em, v, t);
    }
    case SZ_DIM: return em->arr_shape[e->v][e->d];
    case SZ_READ: return eval_read(s, e);
    case SZ_ADD:
        return arith(s, "llvm.sadd.with.overflow", eval(s, e->kids[0]), eval(s, e->kids[1]));
    case SZ_SUB:
        return arith(s, "llvm.ssub.with.overflow", eval(s, e->kids[0]), eval(s, e->kids[1]));
    case SZ_MUL:
        return arith(s, "llvm.smul.with.overflow", eval(s, e->kids[0]), eval(s, e->kids[1]));
    case SZ_DIV: {
        LLVMValueRef x = eval(s, e->kids[0]), y = eval(s, e->kids[1]);
        LLVMValueRef nz = LLVMBuildICmp(em->b, LLVMIntNE, y, c64(em, 0), "");
        check(s, nz, SZ_ERR_DIV0, c64(em, 0), c64(em, 0));
        LLVMValueRef ovf =
            LLVMBuildAnd(em->b, LLVMBuildICmp(em->b, LLVMIntEQ, x, c64(em, INT64_MIN), ""),
                         LLVMBuildICmp(em->b, LLVMIntEQ, y, c64(em, -1), ""), "");
        check(s, LLVMBuildNot(em->b, ovf, ""), SZ_ERR_OVERFLOW, c64(em, 0), c64(em, 0));
        LLVMValueRef safe = LLVMBuildSelect(
            em->b, LLVMBuildAnd(em->b, nz, LLVMBuildNot(em->b, ovf, ""), ""), y, c64(em, 1), "");
        return LLVMBuildSDiv(em->b, x, safe, "");
    }
    case SZ_MIN:
    case SZ_MAX: {
        LLVMValueRef x = eval(s, e->kids[0]), y = eval(s, e->kids[1]);
        LLVMValueRef lt = LLVMBuildICmp(em->b, LLVMIntSLT, x, y, "");
        return e->op == SZ_MIN ? LLVMBuildSelect(em->b, lt, x, y, "")
                               : LLVMBuildSelect(em->b, lt, y, x, "");
    }
    case SZ_MAXOVER: {
        LLVMValueRef lo = eval(s, e->kids[0]), hi = eval(s, e->kids[1]);
        LLVMValueRef m = fold_max(s, e, lo, hi, c64(em, 1));
        /* an empty range is 0 */
        return LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntEQ, m, c64(em, INT64_MIN), ""),
                               c64(em, 0), m, "");
    }
    }
    kern_unreachable("sizer: bad SizeExpr node");
}

static void atomic_max_res(sizer_em *s, LLVMValueRef v) {
    LLVMValueRef r = LLVMBuildAtomicRMW(s->em->b, LLVMAtomicRMWBinOpMax, res_field(s, 0), v,
                                        LLVMAtomicOrderingMonotonic, 0);
    LLVMSetAlignment(r, 8);
}

void llvm_gpu_emit_sizer(llvm_emitter *em, const llvm_gpu_target *gt, uint32_t s_index,
                         const sz_expr *e) {
    char name[600];
    llvm_sizer_symbol(name, sizeof name, em->kernel->name, (int)s_index);
    LLVMValueRef fn = llvm_function_begin(em, name, llvm_gpu_fn_type(em, em->kernel, false), NULL);
    gt->mark_kernel(em, fn);
    unsigned abi = llvm_gpu_bind_params(em, fn);
    sizer_em s = {.em = em, .res = LLVMGetParam(fn, abi)};
    LLVMValueRef w = gt->thread_index(em), nthreads = gt->thread_count(em);
    if (e->op == SZ_MAXOVER) { /* the range over the grid */
        LLVMValueRef lo = eval(&s, e->kids[0]), hi = eval(&s, e->kids[1]);
        LLVMValueRef from = arith(&s, "llvm.sadd.with.overflow", lo, w);
        LLVMValueRef m = fold_max(&s, e, from, hi, nthreads);
        LLVMBasicBlockRef any = llvm_new_block(em, "sz.any"), done = llvm_new_block(em, "sz.done");
        LLVMBuildCondBr(em->b, LLVMBuildICmp(em->b, LLVMIntNE, m, c64(em, INT64_MIN), ""), any,
                        done);
        LLVMPositionBuilderAtEnd(em->b, any);
        atomic_max_res(&s, m);
        LLVMBuildBr(em->b, done);
        LLVMPositionBuilderAtEnd(em->b, done);
    } else {
        LLVMBasicBlockRef first = llvm_new_block(em, "sz.first"),
                          done = llvm_new_block(em, "sz.done");
        LLVMBuildCondBr(em->b, LLVMBuildICmp(em->b, LLVMIntEQ, w, c64(em, 0), ""), first, done);
        LLVMPositionBuilderAtEnd(em->b, first);
        atomic_max_res(&s, eval(&s, e));
        LLVMBuildBr(em->b, done);
        LLVMPositionBuilderAtEnd(em->b, done);
    }
    LLVMBuildRetVoid(em->b);
}
