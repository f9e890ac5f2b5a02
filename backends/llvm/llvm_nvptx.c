/* llvm_nvptx.c - NVIDIA GPUs: the GPU ABI (llvm_gpu.c) for NVPTX, libdevice math, PTX.
 *
 * Thread indexing reads the PTX special registers (%ctaid.x * %ntid.x + %tid.x, and
 * %nctaid.x * %ntid.x threads); entry points are marked through !nvvm.annotations.
 * Transcendental math (sin cos tan asin acos atan sinh cosh tanh atan2 exp exp2 log log2
 * pow, f32 and f64) calls libdevice's __nv_* functions, whose accuracy NVIDIA documents
 * (CUDA Math API, within 1-4 ulp; with fast math, f32 sin cos tan exp log log2 pow call
 * __nv_fast_*, the approximations of CUDA's __sinf class); sqrt, fabs, floor, ceil, round and fma are LLVM
 * intrinsics that NVPTX lowers to the exact PTX instructions. A module that calls
 * libdevice gets libdevice.10.bc linked in (its functions internalized, so the pipeline
 * drops those the kernels do not call) and "nvvm-reflect-ftz" = 0 (no flush to zero).
 * libdevice is found, in order, at kc_options.libdevice, $KERN_LIBDEVICE, and under
 * $CUDA_HOME, $CUDA_PATH and the standard CUDA install locations; a module that needs it
 * when none is found fails with a message listing every place searched. Modules without
 * transcendental math need no libdevice.
 *
 * Float atomic adds whose old value is unused (the adjoints of values that many threads
 * read) are combined per warp when the whole warp adds to one address (nv_atomic_fadd).
 *
 * The default architecture is sm_75 (Turing: the oldest that CUDA 13 still supports; sm_50
 * to sm_90a are accepted, kern_target_cuda.arches); PTX is for the ISA version LLVM 19 picks for the
 * architecture, at least 6.3 (for the warp intrinsics). A driver JIT-compiles the PTX for
 * newer GPUs. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <llvm-c/BitReader.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Target.h>

#include "llvm_backend.h"
#include "llvm_gpu.h"

#define NVPTX_TRIPLE "nvptx64-nvidia-cuda"

/* ---- the GPU target ----------------------------------------------------------------- */

static LLVMValueRef sreg(llvm_emitter *em, const char *name) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    kern_assert(id != 0);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(em->mod, id, NULL, 0);
    LLVMTypeRef fty = LLVMIntrinsicGetType(em->ctx, id, NULL, 0);
    return LLVMBuildZExt(em->b, LLVMBuildCall2(em->b, fty, fn, NULL, 0, ""), em->t_i64, "");
}

/* A call of a non-overloaded NVVM intrinsic. */
static LLVMValueRef nvvm(llvm_emitter *em, const char *name, LLVMValueRef *args, unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    kern_assert(id != 0);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(em->mod, id, NULL, 0);
    return LLVMBuildCall2(em->b, LLVMIntrinsicGetType(em->ctx, id, NULL, 0), fn, args, n, "");
}

static LLVMValueRef i32c(llvm_emitter *em, long long v) {
    return LLVMConstInt(em->t_i32, (unsigned long long)v, 1);
}

/* The sum of v over the 32 lanes of a full warp, in every lane (butterfly shuffles). */
static LLVMValueRef warp_sum(llvm_emitter *em, LLVMValueRef v) {
    bool f64 = LLVMTypeOf(v) == em->t_f64;
    for (int k = 16; k >= 1; k /= 2) {
        LLVMValueRef other;
        if (!f64) {
            LLVMValueRef a[4] = {i32c(em, -1), v, i32c(em, k), i32c(em, 31)};
            other = nvvm(em, "llvm.nvvm.shfl.sync.bfly.f32", a, 4);
        } else { /* two 32-bit halves */
            LLVMValueRef bits = LLVMBuildBitCast(em->b, v, em->t_i64, "");
            LLVMValueRef lo = LLVMBuildTrunc(em->b, bits, em->t_i32, "");
            LLVMValueRef hi = LLVMBuildTrunc(
                em->b, LLVMBuildLShr(em->b, bits, LLVMConstInt(em->t_i64, 32, 0), ""), em->t_i32,
                "");
            LLVMValueRef al[4] = {i32c(em, -1), lo, i32c(em, k), i32c(em, 31)};
            LLVMValueRef ah[4] = {i32c(em, -1), hi, i32c(em, k), i32c(em, 31)};
            LLVMValueRef olo = LLVMBuildZExt(em->b, nvvm(em, "llvm.nvvm.shfl.sync.bfly.i32", al, 4),
                                             em->t_i64, "");
            LLVMValueRef ohi = LLVMBuildZExt(em->b, nvvm(em, "llvm.nvvm.shfl.sync.bfly.i32", ah, 4),
                                             em->t_i64, "");
            ohi = LLVMBuildShl(em->b, ohi, LLVMConstInt(em->t_i64, 32, 0), "");
            other = LLVMBuildBitCast(em->b, LLVMBuildOr(em->b, ohi, olo, ""), em->t_f64, "");
        }
        v = LLVMBuildFAdd(em->b, v, other, "");
    }
    return v;
}

/* A float atomic add whose old value is unused: when the whole warp is active and adds to
 * one address (the adjoint of a value every thread reads, w[t] in a converged loop), the
 * warp sums its values with shuffles and lane 0 adds once; otherwise each lane adds. An
 * add the divergence analysis finds uniform skips comparing the addresses. */
static void nv_warp_fadd(llvm_emitter *em, LLVMValueRef ptr, LLVMValueRef v, unsigned align,
                         bool uniform_addr) {
    LLVMValueRef mask = nvvm(em, "llvm.nvvm.activemask", NULL, 0);
    LLVMValueRef full = LLVMBuildICmp(em->b, LLVMIntEQ, mask, i32c(em, -1), "");
    LLVMBasicBlockRef warp = llvm_new_block(em, "wadd.warp"),
                      lane0 = llvm_new_block(em, "wadd.lane0"),
                      plain = llvm_new_block(em, "wadd.plain"),
                      done = llvm_new_block(em, "wadd.done");
    if (uniform_addr) {
        LLVMBuildCondBr(em->b, full, warp, plain);
    } else {
        LLVMValueRef addr = LLVMBuildPtrToInt(em->b, ptr, em->t_i64, "");
        LLVMValueRef lo = LLVMBuildTrunc(em->b, addr, em->t_i32, "");
        LLVMValueRef hi = LLVMBuildTrunc(
            em->b, LLVMBuildLShr(em->b, addr, LLVMConstInt(em->t_i64, 32, 0), ""), em->t_i32, "");
        LLVMValueRef sl[4] = {mask, lo, i32c(em, 0), i32c(em, 31)};
        LLVMValueRef sh[4] = {mask, hi, i32c(em, 0), i32c(em, 31)};
        LLVMValueRef same = LLVMBuildAnd(
            em->b,
            LLVMBuildICmp(em->b, LLVMIntEQ, lo, nvvm(em, "llvm.nvvm.shfl.sync.idx.i32", sl, 4), ""),
            LLVMBuildICmp(em->b, LLVMIntEQ, hi, nvvm(em, "llvm.nvvm.shfl.sync.idx.i32", sh, 4), ""),
            "");
        LLVMValueRef va[2] = {mask, same};
        LLVMValueRef uniform = nvvm(em, "llvm.nvvm.vote.all.sync", va, 2);
        LLVMBuildCondBr(em->b, LLVMBuildAnd(em->b, full, uniform, ""), warp, plain);
    }

    LLVMPositionBuilderAtEnd(em->b, warp);
    LLVMValueRef sum = warp_sum(em, v);
    LLVMValueRef lane = nvvm(em, "llvm.nvvm.read.ptx.sreg.laneid", NULL, 0);
    LLVMBuildCondBr(em->b, LLVMBuildICmp(em->b, LLVMIntEQ, lane, i32c(em, 0), ""), lane0, done);
    LLVMPositionBuilderAtEnd(em->b, lane0);
    LLVMSetAlignment(
        LLVMBuildAtomicRMW(em->b, LLVMAtomicRMWBinOpFAdd, ptr, sum, LLVMAtomicOrderingMonotonic, 0),
        align);
    LLVMBuildBr(em->b, done);

    LLVMPositionBuilderAtEnd(em->b, plain);
    LLVMSetAlignment(
        LLVMBuildAtomicRMW(em->b, LLVMAtomicRMWBinOpFAdd, ptr, v, LLVMAtomicOrderingMonotonic, 0),
        align);
    LLVMBuildBr(em->b, done);
    LLVMPositionBuilderAtEnd(em->b, done);
}

/* In a block copy of the array when it has one, else combined per warp. */
static bool nv_atomic_fadd(llvm_emitter *em, const ir_op *op, LLVMValueRef ptr, LLVMValueRef lin,
                           LLVMValueRef v, unsigned align) {
    if (!llvm_gpu_block_fadd(em, op, ptr, lin, v, align, nv_warp_fadd))
        nv_warp_fadd(em, ptr, v, align, llvm_gpu_uniform_access(em, op));
    return true;
}

/* lanemax: the largest x over the warp's active threads (__activemask), in each of them.
 * sm_80 and later reduce with redux.sync.max (a 64-bit x: its high halves, then the low
 * halves of the lanes with the largest high half); before, one vote per bit from
 * the top, in the unsigned order (a signed x with its sign bit flipped): the bit is in
 * the maximum when a candidate has it, and then the candidates without it drop out. */
static LLVMValueRef nv_lanemax(llvm_emitter *em, const ir_op *op, LLVMValueRef x) {
    const char *arch = em->opts->arch ? em->opts->arch : kern_target_cuda.default_arch;
    bool uns = ty_is_unsigned(op->operands[0]->type);
    LLVMTypeRef t = LLVMTypeOf(x);
    unsigned bits = LLVMGetIntTypeWidth(t);
    LLVMValueRef mask = nvvm(em, "llvm.nvvm.activemask", NULL, 0);
    if (atoi(arch + 3) >= 80) {
        const char *top = uns ? "llvm.nvvm.redux.sync.umax" : "llvm.nvvm.redux.sync.max";
        if (bits == 32) {
            LLVMValueRef a[2] = {x, mask};
            return nvvm(em, top, a, 2);
        }
        /* 64 bits: the high halves' maximum, then the low halves' among the lanes with it */
        LLVMValueRef sh = LLVMConstInt(t, 32, 0);
        LLVMValueRef hi = LLVMBuildTrunc(em->b, LLVMBuildLShr(em->b, x, sh, ""), em->t_i32, "");
        LLVMValueRef lo = LLVMBuildTrunc(em->b, x, em->t_i32, "");
        LLVMValueRef ah[2] = {hi, mask};
        LLVMValueRef mh = nvvm(em, top, ah, 2);
        LLVMValueRef al[2] = {LLVMBuildSelect(em->b, LLVMBuildICmp(em->b, LLVMIntEQ, hi, mh, ""),
                                              lo, i32c(em, 0), ""),
                              mask};
        LLVMValueRef ml = nvvm(em, "llvm.nvvm.redux.sync.umax", al, 2);
        return LLVMBuildOr(em->b, LLVMBuildShl(em->b, LLVMBuildZExt(em->b, mh, t, ""), sh, ""),
                           LLVMBuildZExt(em->b, ml, t, ""), "");
    }
    LLVMValueRef flip = LLVMConstInt(t, uns ? 0 : 1ULL << (bits - 1), 0);
    LLVMValueRef u = LLVMBuildXor(em->b, x, flip, ""), r = LLVMConstNull(t);
    LLVMValueRef cand = LLVMConstInt(em->t_i1, 1, 0), zero = LLVMConstNull(t);
    for (int b = (int)bits - 1; b >= 0; b--) {
        LLVMValueRef bit = LLVMConstInt(t, 1ULL << b, 0);
        LLVMValueRef has =
            LLVMBuildICmp(em->b, LLVMIntNE, LLVMBuildAnd(em->b, u, bit, ""), zero, "");
        LLVMValueRef a[2] = {mask, LLVMBuildAnd(em->b, cand, has, "")};
        LLVMValueRef some = LLVMBuildICmp(
            em->b, LLVMIntNE, nvvm(em, "llvm.nvvm.vote.ballot.sync", a, 2), i32c(em, 0), "");
        r = LLVMBuildOr(em->b, r, LLVMBuildSelect(em->b, some, bit, zero, ""), "");
        cand = LLVMBuildAnd(em->b, cand, LLVMBuildOr(em->b, has, LLVMBuildNot(em->b, some, ""), ""),
                            "");
    }
    return LLVMBuildXor(em->b, r, flip, "");
}

static void nv_barrier(llvm_emitter *em) { nvvm(em, "llvm.nvvm.barrier0", NULL, 0); }

static LLVMValueRef nv_block_index(llvm_emitter *em) {
    return sreg(em, "llvm.nvvm.read.ptx.sreg.tid.x");
}

static LLVMValueRef nv_block_size(llvm_emitter *em) {
    return sreg(em, "llvm.nvvm.read.ptx.sreg.ntid.x");
}

static LLVMValueRef nv_thread_index(llvm_emitter *em) {
    LLVMValueRef b = sreg(em, "llvm.nvvm.read.ptx.sreg.ctaid.x");
    LLVMValueRef n = sreg(em, "llvm.nvvm.read.ptx.sreg.ntid.x");
    LLVMValueRef t = sreg(em, "llvm.nvvm.read.ptx.sreg.tid.x");
    return LLVMBuildNUWAdd(em->b, LLVMBuildNUWMul(em->b, b, n, ""), t, "tid");
}

static LLVMValueRef nv_thread_count(llvm_emitter *em) {
    LLVMValueRef g = sreg(em, "llvm.nvvm.read.ptx.sreg.nctaid.x");
    LLVMValueRef n = sreg(em, "llvm.nvvm.read.ptx.sreg.ntid.x");
    return LLVMBuildNUWMul(em->b, g, n, "nthreads");
}

/* !nvvm.annotations: {fn, key, value} */
static void nv_annotate(llvm_emitter *em, LLVMValueRef fn, const char *key, unsigned value) {
    LLVMMetadataRef md[3] = {
        LLVMValueAsMetadata(fn),
        LLVMMDStringInContext2(em->ctx, key, strlen(key)),
        LLVMValueAsMetadata(LLVMConstInt(em->t_i32, value, 0)),
    };
    LLVMAddNamedMetadataOperand(em->mod, "nvvm.annotations",
                                LLVMMetadataAsValue(em->ctx, LLVMMDNodeInContext2(em->ctx, md, 3)));
}

static void nv_mark_kernel(llvm_emitter *em, LLVMValueRef fn) { nv_annotate(em, fn, "kernel", 1); }

/* 32 registers per thread: 2048 threads, an SM's most, fit its 64 Ki registers (sm_50 to
 * sm_90), at any block size */
static void nv_limit_registers(llvm_emitter *em, LLVMValueRef fn) {
    nv_annotate(em, fn, "maxnreg", 32);
}

/* Whether o takes sin or cos of x. */
static bool sincos_of(const ir_op *o, const ir_value *x) {
    return (o->code == IR_SIN || o->code == IR_COS) && o->operands[0] == x;
}

/* sin and cos of one argument x in one region (the reverse sweep of sin(x) takes both):
 * one call of libdevice's __nv_sincos[f], one argument reduction. The first sin or cos of x
 * in the region makes the call and sets the value of every later sin and cos of x there
 * (duplicates too: -O0 keeps them), which then return it; the emitter emits a region's ops
 * in order, in each copy of the region it makes. NULL where op is not such an op, or the
 * region takes only sin or only cos of x (the plain calls). */
static LLVMValueRef nv_sincos(llvm_emitter *em, const ir_op *op, LLVMValueRef x, bool fast) {
    if (op->code != IR_SIN && op->code != IR_COS)
        return NULL;
    const ir_value *arg = op->operands[0];
    const ir_op *first = op;
    for (const ir_op *o = op->prev; o; o = o->prev)
        if (sincos_of(o, arg))
            first = o;
    bool has_sin = false, has_cos = false;
    for (const ir_op *o = first; o; o = o->next)
        if (sincos_of(o, arg))
            has_sin |= o->code == IR_SIN, has_cos |= o->code == IR_COS;
    if (!has_sin || !has_cos)
        return NULL;
    if (first != op)
        return llvm_val(em, op->results[0]); /* set by the first */
    bool f32 = arg->type->kind == TY_F32;
    LLVMTypeRef t = f32 ? em->t_f32 : em->t_f64;
    const char *name = !f32 ? "__nv_sincos" : fast ? "__nv_fast_sincosf" : "__nv_sincosf";
    LLVMTypeRef ps[3] = {t, em->t_ptr, em->t_ptr};
    LLVMTypeRef fty = LLVMFunctionType(LLVMVoidTypeInContext(em->ctx), ps, 3, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(em->mod, name);
    if (!fn) {
        fn = LLVMAddFunction(em->mod, name, fty);
        llvm_add_attr(em, fn, LLVMAttributeFunctionIndex, "nounwind");
    }
    LLVMBuilderRef eb = llvm_entry_builder(em);
    LLVMValueRef ps_ = LLVMBuildAlloca(eb, t, "sin"), pc = LLVMBuildAlloca(eb, t, "cos");
    LLVMDisposeBuilder(eb);
    LLVMValueRef args[3] = {x, ps_, pc};
    LLVMBuildCall2(em->b, fty, fn, args, 3, "");
    LLVMValueRef s = LLVMBuildLoad2(em->b, t, ps_, ""), c = LLVMBuildLoad2(em->b, t, pc, "");
    for (const ir_op *o = op->next; o; o = o->next)
        if (sincos_of(o, arg))
            llvm_set_val(em, o->results[0], o->code == IR_SIN ? s : c);
    return op->code == IR_SIN ? s : c;
}

static LLVMValueRef nv_math(llvm_emitter *em, const ir_op *op, LLVMValueRef *x) {
    const char *base;
    unsigned nargs = 1;
    switch (op->code) {
    case IR_SIN: base = "sin"; break;
    case IR_COS: base = "cos"; break;
    case IR_TAN: base = "tan"; break;
    case IR_ASIN: base = "asin"; break;
    case IR_ACOS: base = "acos"; break;
    case IR_ATAN: base = "atan"; break;
    case IR_SINH: base = "sinh"; break;
    case IR_COSH: base = "cosh"; break;
    case IR_TANH: base = "tanh"; break;
    case IR_EXP: base = "exp"; break;
    case IR_EXP2: base = "exp2"; break;
    case IR_LOG: base = "log"; break;
    case IR_LOG2: base = "log2"; break;
    case IR_ATAN2:
        base = "atan2";
        nargs = 2;
        break;
    case IR_POW:
        base = "pow";
        nargs = 2;
        break;
    case IR_REM: /* fmod, exact (LLVM's frem on NVPTX is x - y trunc(x / y)) */
        base = "fmod";
        nargs = 2;
        break;
    default: return NULL;
    }
    bool f32 = op->operands[0]->type->kind == TY_F32;
    /* fast math: libdevice's __nv_fast_* (the __sinf class: sin.approx, ex2.approx,
     * lg2.approx) where it has one */
    bool fast =
        f32 && em->opts->fast_math &&
        (op->code == IR_SIN || op->code == IR_COS || op->code == IR_TAN || op->code == IR_EXP ||
         op->code == IR_LOG || op->code == IR_LOG2 || op->code == IR_POW);
    LLVMValueRef sc = nv_sincos(em, op, x[0], fast);
    if (sc)
        return sc;
    char name[32];
    snprintf(name, sizeof name, "__nv_%s%s%s", fast ? "fast_" : "", base, f32 ? "f" : "");
    LLVMTypeRef t = f32 ? em->t_f32 : em->t_f64;
    LLVMTypeRef ps[2] = {t, t};
    LLVMTypeRef fty = LLVMFunctionType(t, ps, nargs, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(em->mod, name);
    if (!fn) {
        fn = LLVMAddFunction(em->mod, name, fty);
        llvm_add_attr(em, fn, LLVMAttributeFunctionIndex, "nounwind");
    }
    return LLVMBuildCall2(em->b, fty, fn, x, nargs, "");
}

static const llvm_gpu_target nvptx_target = {
    .hooks = {.math = nv_math,
              .atomic_fadd = nv_atomic_fadd,
              .lanemax = nv_lanemax,
              .fast_contract = true,
              .math_loop_unroll = 4},
    .thread_index = nv_thread_index,
    .thread_count = nv_thread_count,
    .mark_kernel = nv_mark_kernel,
    .barrier = nv_barrier,
    .block_index = nv_block_index,
    .block_size = nv_block_size,
    .limit_registers = nv_limit_registers,
};

/* ---- libdevice ---------------------------------------------------------------------- */

static bool uses_libdevice(LLVMModuleRef mod) {
    /* the kernels are the only external functions: everything else may go */
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
        size_t n;
        const char *name = LLVMGetValueName2(f, &n);
        if (LLVMIsDeclaration(f) && n > 5 && strncmp(name, "__nv_", 5) == 0)
            return true;
    }
    return false;
}

/* Finds libdevice.10.bc; on failure writes the places searched into err. */
static bool find_libdevice(const kc_options *o, char *path, size_t size, char *err, size_t errlen) {
    kern_buf tried = {0};
    const char *explicit_ = o->libdevice;
    if (explicit_ && *explicit_) {
        if (access(explicit_, R_OK) == 0) {
            snprintf(path, size, "%s", explicit_);
            return true;
        }
        llvm_errf(err, errlen, "libdevice not found: cannot read '%s' (--libdevice or "
                  "$KERN_LIBDEVICE)", explicit_);
        return false;
    }
    const char *roots[] = {
        o->cuda_home, "/usr/local/cuda", "/usr/lib/cuda", "/usr/lib/nvidia-cuda-toolkit", "/opt/cuda"};
    for (size_t i = 0; i < sizeof roots / sizeof *roots; i++) {
        if (!roots[i] || !*roots[i])
            continue;
        const char *subs[] = {"nvvm/libdevice/libdevice.10.bc", "libdevice/libdevice.10.bc"};
        for (size_t j = 0; j < 2; j++) {
            snprintf(path, size, "%s/%s", roots[i], subs[j]);
            if (access(path, R_OK) == 0) {
                buf_free(&tried);
                return true;
            }
            buf_printf(&tried, "%s%s", tried.len ? ", " : "", path);
        }
    }
    llvm_errf(err, errlen,
              "libdevice not found (the NVPTX math functions need libdevice.10.bc): searched "
              "%s; give its path with --libdevice or $KERN_LIBDEVICE",
              tried.data ? tried.data : "nothing");
    buf_free(&tried);
    return false;
}

/* Links libdevice into mod and internalizes everything but the kernel entry points. */
static bool link_libdevice(LLVMModuleRef mod, const kc_options *o, char *err, size_t errlen) {
    char path[4096];
    if (!find_libdevice(o, path, sizeof path, err, errlen))
        return false;
    LLVMMemoryBufferRef buf = NULL;
    char *msg = NULL;
    if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buf, &msg)) {
        llvm_errf(err, errlen, "cannot read libdevice '%s': %s", path, msg ? msg : "");
        LLVMDisposeMessage(msg);
        return false;
    }
    LLVMModuleRef lib = NULL;
    bool bad = LLVMParseBitcodeInContext2(LLVMGetModuleContext(mod), buf, &lib);
    LLVMDisposeMemoryBuffer(buf);
    if (bad) {
        llvm_errf(err, errlen, "libdevice '%s' is not a valid LLVM bitcode file: %s", path,
                  llvm_context_error(LLVMGetModuleContext(mod)));
        return false;
    }
    /* libdevice's own triple and layout differ only in name: take the module's */
    LLVMSetTarget(lib, LLVMGetTarget(mod));
    LLVMSetDataLayout(lib, LLVMGetDataLayoutStr(mod));
    if (LLVMLinkModules2(mod, lib)) {
        llvm_errf(err, errlen, "cannot link libdevice '%s' into the module", path);
        return false;
    }
    /* the kernels are the only external functions: everything else may go */
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
        size_t n;
        const char *name = LLVMGetValueName2(f, &n);
        if (!LLVMIsDeclaration(f) && strncmp(name, "kern_", 5) != 0)
            LLVMSetLinkage(f, LLVMInternalLinkage);
    }
    for (LLVMValueRef g = LLVMGetFirstGlobal(mod); g; g = LLVMGetNextGlobal(g))
        if (!LLVMIsDeclaration(g))
            LLVMSetLinkage(g, LLVMInternalLinkage);
    return true;
}

/* ---- target machine and PTX --------------------------------------------------------- */

static pthread_once_t nvptx_once = PTHREAD_ONCE_INIT;

static void init_nvptx_once(void) {
    llvm_install_fatal_handler();
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
}

bool llvm_nvptx_arch_valid(const char *arch) {
    return kern_target_arch_valid(&kern_target_cuda, arch);
}

static LLVMTargetMachineRef nvptx_machine(const kc_options *o, char *err, size_t errlen) {
    pthread_once(&nvptx_once, init_nvptx_once);
    const char *arch = o->arch ? o->arch : kern_target_cuda.default_arch;
    if (!llvm_nvptx_arch_valid(arch)) {
        llvm_errf(err, errlen, "unknown CUDA architecture '%s' (this kern compiles for %s)", arch,
                  kern_target_cuda.arches);
        return NULL;
    }
    LLVMTargetRef target;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(NVPTX_TRIPLE, &target, &msg)) {
        llvm_errf(err, errlen, "this LLVM has no NVPTX target: %s", msg ? msg : "");
        LLVMDisposeMessage(msg);
        return NULL;
    }
    /* warp votes and shuffles with masks (nv_atomic_fadd) need PTX 6.2; below sm_75 LLVM
     * would pick 6.0 or 6.1 */
    const char *features = atoi(arch + 3) < 75 ? "+ptx63" : "";
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, NVPTX_TRIPLE, arch, features,
                                                      llvm_codegen_level(o->opt_level),
                                                      LLVMRelocDefault, LLVMCodeModelDefault);
    if (!tm)
        llvm_errf(err, errlen, "cannot create an NVPTX target machine for %s", arch);
    return tm;
}

/* The optimized NVPTX module of m in ctx, or NULL with a message. */
static LLVMModuleRef nvptx_module(LLVMContextRef ctx, const ir_module *m, const kc_options *o,
                                  LLVMTargetMachineRef tm, char *err, size_t errlen) {
    LLVMModuleRef mod = llvm_gpu_emit_module(ctx, m, o, &nvptx_target);
    LLVMSetTarget(mod, NVPTX_TRIPLE);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(mod, dl);
    LLVMDisposeTargetData(dl);
    LLVMAddModuleFlag(mod, LLVMModuleFlagBehaviorOverride, "nvvm-reflect-ftz", 16,
                      LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(ctx), 0, 0)));
    if (uses_libdevice(mod) && !link_libdevice(mod, o, err, errlen)) {
        LLVMDisposeModule(mod);
        return NULL;
    }
    return llvm_finish_module(mod, o, tm, err, errlen);
}

/* Emits m as PTX (asm) or optimized LLVM IR text (!asm). */
static char *nvptx_text(const ir_module *m, const kc_options *o, bool assembly, char *err,
                        size_t errlen) {
    LLVMTargetMachineRef tm = nvptx_machine(o, err, errlen);
    if (!tm)
        return NULL;
    LLVMContextRef ctx = llvm_context_new();
    LLVMModuleRef mod = nvptx_module(ctx, m, o, tm, err, errlen);
    char *text = NULL;
    if (mod && !assembly) {
        char *s = LLVMPrintModuleToString(mod);
        text = strdup(s);
        LLVMDisposeMessage(s);
    } else if (mod) {
        LLVMMemoryBufferRef buf = NULL;
        char *msg = NULL;
        if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMAssemblyFile, &msg, &buf)) {
            llvm_errf(err, errlen, "NVPTX code generation failed: %s", msg ? msg : "");
            LLVMDisposeMessage(msg);
        } else {
            size_t n = LLVMGetBufferSize(buf);
            text = malloc(n + 1);
            if (text) {
                memcpy(text, LLVMGetBufferStart(buf), n);
                text[n] = 0;
            }
            LLVMDisposeMemoryBuffer(buf);
        }
    }
    if (mod && !text && err && !err[0])
        llvm_errf(err, errlen, "out of memory for the PTX text");
    if (mod)
        LLVMDisposeModule(mod);
    llvm_context_free(ctx);
    LLVMDisposeTargetMachine(tm);
    return text;
}

char *llvm_emit_ptx(const ir_module *m, const kc_options *o, char *err, size_t errlen) {
    return nvptx_text(m, o, true, err, errlen);
}

char *llvm_emit_nvptx_ir(const ir_module *m, const kc_options *o, char *err, size_t errlen) {
    return nvptx_text(m, o, false, err, errlen);
}

char *llvm_emit_nvptx_own_ir(const ir_module *m, const kc_options *o) {
    LLVMContextRef ctx = llvm_context_new();
    LLVMModuleRef mod = llvm_gpu_emit_module(ctx, m, o, &nvptx_target);
    char *s = LLVMPrintModuleToString(mod);
    size_t n = strlen(s) + 1;
    char *text = malloc(n);
    if (!text)
        kern_oom(n);
    memcpy(text, s, n);
    LLVMDisposeMessage(s);
    LLVMDisposeModule(mod);
    llvm_context_free(ctx);
    return text;
}
