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
 *   res[0]  the value, raised with an atomic max (INT64_MIN: nothing evaluated, when the
 *           outermost range is empty and the value is 0, or a value of INT64_MIN; the
 *           runtime counts a negative capacity as 0 either way);
 *   res[1]  0, or the first error (compare-and-swap from 0): 1 a read out of bounds
 *           (res[2] = the parameter, res[3] = the index), 2 a division by zero, 3 an int64
 *           overflow;
 * Each maxover is evaluated by the rule that the host evaluator uses for it, the one
 * decision of sz_maxover_rule (common/sizeexpr.c): the body at the range's first point
 * (SZ_RULE_POINT), the larger of the body at its first and last point
 * (SZ_RULE_ENDPOINTS), or a loop over every point (SZ_RULE_SCAN; also SZ_RULE_PIECEWISE
 * and SZ_RULE_OTHER, where the host finds the same maximum from a few points, or scans a
 * short range and bounds a long one by interval arithmetic). When the expression is a
 * maxover whose rule visits every point, its range is split over the grid (a grid-stride
 * loop, each thread folding a local maximum, then one atomic max); anything else is
 * evaluated by thread 0. So the sizes agree with the host's exactly, except that a host
 * interval bound (SZ_RULE_OTHER over more than 4096 points) may be larger than the
 * sizer's exact maximum. tests/test_sizer.c runs these kernels on the CPU against sz_eval
 * for every capacity of the gradient corpus and the test sources. Nested scanning
 * maxovers cost the product of their ranges. */
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

/* The body of maxover e with its variable bound to x. */
static LLVMValueRef body_at(sizer_em *s, const sz_expr *e, LLVMValueRef x) {
    kern_assert(e->v >= 0 && e->v < MAX_VARS);
    LLVMValueRef saved = s->vars[e->v];
    s->vars[e->v] = x;
    LLVMValueRef r = eval(s, e->kids[2]);
    s->vars[e->v] = saved;
    return r;
}

/* Whether the rule of maxover e visits every point of its range (then the sizer's
 * outermost maxover splits its range over the grid). */
static bool scans(const sz_expr *e) {
    sz_rule r = sz_maxover_rule(e);
    return r != SZ_RULE_POINT && r != SZ_RULE_ENDPOINTS;
}

/* The maximum of body over [lo, hi) in one thread, from `from` with step `step`; INT64_MIN
 * when it ran no iteration, which callers tell by from < hi, not by the value (a body may
 * be INT64_MIN). */
static LLVMValueRef fold_max(sizer_em *s, const sz_expr *e, LLVMValueRef from, LLVMValueRef hi,
                             LLVMValueRef step) {
    llvm_emitter *em = s->em;
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
    LLVMValueRef x = body_at(s, e, i);
    LLVMValueRef m2 = LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntSGT, x, m, ""), x, m, "");
    LLVMValueRef next = LLVMBuildAdd(em->b, i, step, ""); /* i < hi <= INT64_MAX - step */
    LLVMBasicBlockRef end = LLVMGetInsertBlock(em->b);
    LLVMBuildBr(em->b, head);
    LLVMAddIncoming(i, &next, &end, 1);
    LLVMAddIncoming(m, &m2, &end, 1);
    LLVMPositionBuilderAtEnd(em->b, exit);
    return m;
}

/* Ends the current block with a branch to done and returns, in done, v when control came
 * from here and 0 when it came from `skipped` (which branches to done itself). */
static LLVMValueRef merge_or_zero(sizer_em *s, LLVMValueRef v, LLVMBasicBlockRef skipped,
                                  LLVMBasicBlockRef done) {
    llvm_emitter *em = s->em;
    LLVMBasicBlockRef here = LLVMGetInsertBlock(em->b);
    LLVMBuildBr(em->b, done);
    LLVMPositionBuilderAtEnd(em->b, done);
    LLVMValueRef phi = LLVMBuildPhi(em->b, em->t_i64, "");
    LLVMValueRef in[2] = {v, c64(em, 0)};
    LLVMBasicBlockRef from[2] = {here, skipped};
    LLVMAddIncoming(phi, in, from, 2);
    return phi;
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
    case TY_I8:
    case TY_I16:
    case TY_I32: v = LLVMBuildSExt(em->b, v, em->t_i64, ""); break;
    case TY_I64:
    case TY_U64: break;
    default: /* u32, and bool as its byte (!= 0) */
        if (t->elem->kind == TY_BOOL)
            v = LLVMBuildICmp(em->b, LLVMIntNE, v, LLVMConstNull(mt), "");
        v = LLVMBuildZExt(em->b, v, em->t_i64, "");
        break;
    }
    return merge_or_zero(s, v, pre, done);
}

/* A maxover by its rule (sz_maxover_rule, the host evaluator's): the body at lo, the
 * larger of the body at lo and hi - 1, or every point; 0 for an empty range, where the
 * body is not evaluated. */
static LLVMValueRef eval_maxover(sizer_em *s, const sz_expr *e) {
    llvm_emitter *em = s->em;
    LLVMValueRef lo = eval(s, e->kids[0]), hi = eval(s, e->kids[1]);
    sz_rule rule = sz_maxover_rule(e);
    if (rule != SZ_RULE_POINT && rule != SZ_RULE_ENDPOINTS) {
        LLVMValueRef m = fold_max(s, e, lo, hi, c64(em, 1));
        return LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntSLT, lo, hi, ""), m, c64(em, 0),
                               "");
    }
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(em->b), some = llvm_new_block(em, "sz.some"),
                      done = llvm_new_block(em, "sz.maxdone");
    LLVMBuildCondBr(em->b, LLVMBuildICmp(em->b, LLVMIntSLT, lo, hi, ""), some, done);
    LLVMPositionBuilderAtEnd(em->b, some);
    LLVMValueRef m = body_at(s, e, lo);
    if (rule == SZ_RULE_ENDPOINTS) {
        LLVMValueRef last = body_at(s, e, LLVMBuildSub(em->b, hi, c64(em, 1), "")); /* hi > lo */
        m = LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntSGT, last, m, ""), last, m, "");
    }
    return merge_or_zero(s, m, pre, done);
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
    case SZ_MAXOVER: return eval_maxover(s, e);
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
    if (e->op == SZ_MAXOVER && scans(e)) { /* the range over the grid */
        LLVMValueRef lo = eval(&s, e->kids[0]), hi = eval(&s, e->kids[1]);
        LLVMValueRef from = arith(&s, "llvm.sadd.with.overflow", lo, w);
        LLVMValueRef m = fold_max(&s, e, from, hi, nthreads);
        LLVMBasicBlockRef any = llvm_new_block(em, "sz.any"), done = llvm_new_block(em, "sz.done");
        LLVMBuildCondBr(em->b, LLVMBuildICmp(em->b, LLVMIntSLT, from, hi, ""), any, done);
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
