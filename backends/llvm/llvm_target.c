/* llvm_target.c - the host target machine, verification and the optimization pipeline.
 *
 * Code is generated for the host: its triple, CPU name and features (LLVMGetHostCPUName /
 * LLVMGetHostCPUFeatures), like clang's -march=native, so that the vectorizers use the
 * widest vectors the machine has. The pipeline is the new pass manager's default<On>
 * (n = kc_options.opt_level, 0..3) with loop and SLP vectorization, loop interleaving and
 * unrolling enabled (as clang does at -O2 and above), run with the target machine so that
 * the cost models see the real CPU. Debug builds of kern (KERN_DEBUG_BUILD) verify every
 * emitted module before optimizing and fail with an internal error naming what is wrong. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "llvm_internal.h"

void llvm_errf(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static pthread_once_t native_once = PTHREAD_ONCE_INIT;

static void init_native_once(void) {
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    LLVMInitializeNativeAsmParser();
}

void llvm_init_native(void) { pthread_once(&native_once, init_native_once); }

static LLVMCodeGenOptLevel codegen_level(int opt_level) {
    switch (opt_level < 0 ? 0 : opt_level) {
    case 0: return LLVMCodeGenLevelNone;
    case 1: return LLVMCodeGenLevelLess;
    case 2: return LLVMCodeGenLevelDefault;
    default: return LLVMCodeGenLevelAggressive;
    }
}

LLVMTargetMachineRef llvm_host_target_machine(int opt_level, LLVMRelocMode reloc, char *err,
                                              size_t errlen) {
    llvm_init_native();
    char *triple = LLVMGetDefaultTargetTriple();
    char *msg = NULL;
    LLVMTargetRef target;
    if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
        llvm_errf(err, errlen, "LLVM has no target for the host triple %s: %s", triple,
                  msg ? msg : "");
        LLVMDisposeMessage(msg);
        LLVMDisposeMessage(triple);
        return NULL;
    }
    char *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, cpu, features,
                                                      codegen_level(opt_level), reloc,
                                                      LLVMCodeModelDefault);
    if (!tm)
        llvm_errf(err, errlen, "cannot create an LLVM target machine for %s (%s)", triple, cpu);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(features);
    LLVMDisposeMessage(triple);
    return tm;
}

static bool run_pipeline(LLVMModuleRef mod, LLVMTargetMachineRef tm, int opt_level, char *err,
                         size_t errlen) {
    if (opt_level < 0)
        opt_level = 0;
    if (opt_level > 3)
        opt_level = 3;
    char passes[32];
    snprintf(passes, sizeof passes, "default<O%d>", opt_level);
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    bool vec = opt_level >= 2;
    LLVMPassBuilderOptionsSetLoopVectorization(po, vec);
    LLVMPassBuilderOptionsSetSLPVectorization(po, vec);
    LLVMPassBuilderOptionsSetLoopInterleaving(po, vec);
    LLVMPassBuilderOptionsSetLoopUnrolling(po, opt_level >= 1);
    LLVMErrorRef e = LLVMRunPasses(mod, passes, tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (e) {
        char *msg = LLVMGetErrorMessage(e);
        llvm_errf(err, errlen, "LLVM optimization pipeline %s failed: %s", passes, msg);
        LLVMDisposeErrorMessage(msg);
        return false;
    }
    return true;
}

LLVMModuleRef llvm_build_module(LLVMContextRef ctx, const ir_module *m, const kc_options *o,
                                LLVMTargetMachineRef tm, char *err, size_t errlen) {
    return llvm_finish_module(llvm_emit_module(ctx, m, o), o, tm, err, errlen);
}

LLVMModuleRef llvm_finish_module(LLVMModuleRef mod, const kc_options *o, LLVMTargetMachineRef tm,
                                 char *err, size_t errlen) {
    char *triple = LLVMGetTargetMachineTriple(tm);
    LLVMSetTarget(mod, triple);
    LLVMDisposeMessage(triple);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(mod, dl);
    LLVMDisposeTargetData(dl);
#ifdef KERN_DEBUG_BUILD
    char *msg = NULL;
    if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
        llvm_errf(err, errlen, "internal error: the LLVM backend emitted an invalid module: %s",
                  msg ? msg : "");
        LLVMDisposeMessage(msg);
        LLVMDisposeModule(mod);
        return NULL;
    }
    LLVMDisposeMessage(msg);
#endif
    if (!run_pipeline(mod, tm, o->opt_level, err, errlen)) {
        LLVMDisposeModule(mod);
        return NULL;
    }
    return mod;
}
