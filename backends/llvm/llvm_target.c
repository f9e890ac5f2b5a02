/* llvm_target.c - verification and the optimization pipeline, for every target.
 *
 * The pipeline is the new pass manager's default<On>
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
#include <llvm-c/ErrorHandling.h>
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

static void fatal_handler(const char *reason) {
    fprintf(stderr,
            "kern: internal error in LLVM's code generation: %s\n"
            "kern: this is a bug in kern; please report it with the .kern file and the command\n",
            reason ? reason : "?");
}

static pthread_once_t handler_once = PTHREAD_ONCE_INIT;

static void install_handler(void) { LLVMInstallFatalErrorHandler(fatal_handler); }

void llvm_install_fatal_handler(void) { pthread_once(&handler_once, install_handler); }

LLVMCodeGenOptLevel llvm_codegen_level(int opt_level) {
    switch (opt_level < 0 ? 0 : opt_level) {
    case 0: return LLVMCodeGenLevelNone;
    case 1: return LLVMCodeGenLevelLess;
    case 2: return LLVMCodeGenLevelDefault;
    default: return LLVMCodeGenLevelAggressive;
    }
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
