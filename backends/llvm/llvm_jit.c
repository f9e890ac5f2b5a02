/* llvm_jit.c - JIT compilation of an IR module through ORC LLJIT.
 *
 * One LLJIT per compiled module: the module is emitted into the JIT's thread-safe
 * context, optimized with a host target machine (llvm_target.c), and handed to LLJIT with
 * a JIT target-machine builder made from that same machine, so that the data layout and
 * the CPU features agree. Symbols the code calls resolve, in order, from the module, from
 * the libm functions listed below (defined as absolute symbols, so that they resolve even
 * when the process has not loaded libm by itself), and from the process (memset, memcpy
 * and anything else that LLVM's lowering calls). llvm_jit_compile looks up the first task
 * symbol, so the machine code is generated before it returns (LLJIT compiles a whole
 * module at its first lookup). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>

#include "llvm_backend.h"
#include "llvm_internal.h"

struct llvm_jit {
    LLVMOrcLLJITRef jit;
    llvm_jit_times times;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool take_error(LLVMErrorRef e, const char *what, char *err, size_t errlen) {
    if (!e)
        return false;
    char *msg = LLVMGetErrorMessage(e);
    llvm_errf(err, errlen, "%s: %s", what, msg);
    LLVMDisposeErrorMessage(msg);
    return true;
}

/* The libm functions the generated code may call (libm calls of llvm_emit_ops.c, and the
 * calls that LLVM lowers its math intrinsics to). */
#define LIBM_FUNCS(X)                                                                              \
    X(sinf)                                                                                        \
    X(sin)                                                                                         \
    X(cosf)                                                                                        \
    X(cos)                                                                                         \
    X(tanf)                                                                                        \
    X(tan)                                                                                         \
    X(asinf) X(asin) X(acosf) X(acos) X(atanf) X(atan) X(sinhf) X(sinh) X(coshf) X(cosh) X(tanhf)  \
        X(tanh) X(atan2f) X(atan2) X(expf) X(exp) X(exp2f) X(exp2) X(logf) X(log) X(log2f) X(log2) \
            X(powf) X(pow) X(fmaf) X(fma) X(roundf) X(round) X(floorf) X(floor) X(ceilf) X(ceil)   \
                X(sqrtf) X(sqrt)

static void define_libm(LLVMOrcLLJITRef jit, LLVMOrcJITDylibRef jd) {
    struct {
        const char *name;
        void (*addr)(void);
    } fns[] = {
#define X(f) {#f, (void (*)(void))f},
        LIBM_FUNCS(X)
#undef X
    };
    enum { N = sizeof fns / sizeof *fns };
    LLVMOrcCSymbolMapPair pairs[N];
    for (size_t i = 0; i < N; i++) {
        pairs[i].Name = LLVMOrcLLJITMangleAndIntern(jit, fns[i].name);
        pairs[i].Sym.Address = (LLVMOrcJITTargetAddress)(uintptr_t)fns[i].addr;
        pairs[i].Sym.Flags.GenericFlags =
            LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable;
        pairs[i].Sym.Flags.TargetFlags = 0;
    }
    LLVMErrorRef e = LLVMOrcJITDylibDefine(jd, LLVMOrcAbsoluteSymbols(pairs, N));
    if (e) /* a duplicate cannot happen in a fresh JITDylib; nothing to report */
        LLVMConsumeError(e);
}

/* The vector math functions (libmvec, llvm_simd.c) the module calls, as absolute symbols. */
static void define_vector_math(LLVMOrcLLJITRef jit, LLVMOrcJITDylibRef jd, LLVMModuleRef mod) {
    LLVMOrcCSymbolMapPair pairs[64];
    size_t n = 0;
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
        size_t len;
        const char *name = LLVMGetValueName2(f, &len);
        if (!LLVMIsDeclaration(f) || !llvm_simd_is_vector_math(name) || n == 64)
            continue;
        void *addr = llvm_simd_vector_math_address(name);
        if (!addr)
            continue; /* the lookup reports it */
        pairs[n].Name = LLVMOrcLLJITMangleAndIntern(jit, name);
        pairs[n].Sym.Address = (LLVMOrcJITTargetAddress)(uintptr_t)addr;
        pairs[n].Sym.Flags.GenericFlags =
            LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable;
        pairs[n].Sym.Flags.TargetFlags = 0;
        n++;
    }
    if (!n)
        return;
    LLVMErrorRef e = LLVMOrcJITDylibDefine(jd, LLVMOrcAbsoluteSymbols(pairs, n));
    if (e)
        LLVMConsumeError(e);
}

static const char *first_symbol(const ir_module *m, char *buf, size_t size) {
    ir_foreach_kernel(k, m) {
        ir_foreach_op(op, k->body) {
            if (op->code == IR_PARALLEL || op->code == IR_SERIAL) {
                llvm_task_symbol(buf, size, k->name, 0, false);
                return buf;
            }
        }
    }
    return NULL;
}

llvm_jit *llvm_jit_compile(const ir_module *m, const kc_options *o, char *err, size_t errlen) {
    double t0 = now_s();
    LLVMTargetMachineRef tm = llvm_host_target_machine(o->opt_level, LLVMRelocPIC, err, errlen);
    if (!tm)
        return NULL;
    LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
    LLVMModuleRef mod = llvm_cpu_emit_module(LLVMOrcThreadSafeContextGetContext(tsc), m, o);
    double t1 = now_s();
    mod = llvm_finish_module(mod, o, tm, err, errlen);
    double t2 = now_s();
    if (!mod) {
        LLVMOrcDisposeThreadSafeContext(tsc);
        LLVMDisposeTargetMachine(tm);
        return NULL;
    }

    LLVMOrcLLJITBuilderRef jb = LLVMOrcCreateLLJITBuilder();
    LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
        jb, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm)); /* takes tm */
    LLVMOrcLLJITRef jit = NULL;
    if (take_error(LLVMOrcCreateLLJIT(&jit, jb), "cannot create the LLVM JIT", err, errlen)) {
        LLVMDisposeModule(mod);
        LLVMOrcDisposeThreadSafeContext(tsc);
        return NULL;
    }
    LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(jit);
    define_libm(jit, jd);
    define_vector_math(jit, jd, mod);
    LLVMOrcDefinitionGeneratorRef gen = NULL;
    LLVMErrorRef e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
        &gen, LLVMOrcLLJITGetGlobalPrefix(jit), NULL, NULL);
    if (e)
        LLVMConsumeError(e); /* without it only libm resolves; lookups report the rest */
    else
        LLVMOrcJITDylibAddGenerator(jd, gen);

    llvm_jit *j = calloc(1, sizeof *j);
    if (!j)
        kern_oom(sizeof *j);
    j->jit = jit;
    LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(mod, tsc);
    LLVMOrcDisposeThreadSafeContext(tsc); /* the module keeps the context alive */
    if (take_error(LLVMOrcLLJITAddLLVMIRModule(jit, jd, tsm), "cannot add the module to the JIT",
                   err, errlen)) {
        LLVMOrcDisposeThreadSafeModule(tsm);
        llvm_jit_free(j);
        return NULL;
    }
    char sym[512];
    if (first_symbol(m, sym, sizeof sym)) {
        LLVMOrcExecutorAddress addr = 0;
        if (take_error(LLVMOrcLLJITLookup(jit, &addr, sym), "JIT compilation failed", err,
                       errlen)) {
            llvm_jit_free(j);
            return NULL;
        }
    }
    double t3 = now_s();
    j->times.emit_s = t1 - t0;
    j->times.opt_s = t2 - t1;
    j->times.codegen_s = t3 - t2;
    j->times.total_s = t3 - t0;
    return j;
}

void *llvm_jit_lookup(llvm_jit *j, const char *sym) {
    LLVMOrcExecutorAddress addr = 0;
    LLVMErrorRef e = LLVMOrcLLJITLookup(j->jit, &addr, sym);
    if (e) {
        LLVMConsumeError(e);
        return NULL;
    }
    return (void *)(uintptr_t)addr;
}

llvm_jit_times llvm_jit_get_times(const llvm_jit *j) { return j->times; }

void llvm_jit_free(llvm_jit *j) {
    if (!j)
        return;
    if (j->jit) {
        LLVMErrorRef e = LLVMOrcDisposeLLJIT(j->jit);
        if (e)
            LLVMConsumeError(e);
    }
    free(j);
}
