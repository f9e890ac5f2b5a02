/* llvm_target.c - verification and the optimization pipeline, for every target.
 *
 * The GPU pipeline is the new pass manager's default<On> (n = kc_options.opt_level, 0..3)
 * with loop and SLP vectorization, loop interleaving and unrolling enabled (as clang does
 * at -O2 and above). On the CPU at -O2 and -O3 it is CPU_PIPELINE below, a third of
 * default<O2>'s passes: kern's own passes have already inlined, folded and simplified the
 * code, and the JIT's compile time is the user's wait. Either runs with the target
 * machine, so that the cost models see the real CPU. Debug builds of kern (KERN_DEBUG_BUILD) verify every
 * emitted module before optimizing and fail with an internal error naming what is wrong. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/ErrorHandling.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "llvm_backend.h"
#include "llvm_internal.h"

char *llvm_version(char *buf, size_t size) {
    unsigned major, minor, patch;
    LLVMGetVersion(&major, &minor, &patch);
    snprintf(buf, size, "%u.%u.%u", major, minor, patch);
    return buf;
}

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

typedef struct llvm_diags {
    char first[512]; /* the first error's text */
} llvm_diags;

static void keep_diagnostic(LLVMDiagnosticInfoRef di, void *user) {
    llvm_diags *d = user;
    if (LLVMGetDiagInfoSeverity(di) != LLVMDSError || d->first[0])
        return; /* warnings, remarks and notes are not kern's to show */
    char *s = LLVMGetDiagInfoDescription(di);
    snprintf(d->first, sizeof d->first, "%s", s && s[0] ? s : "an error without a message");
    LLVMDisposeMessage(s);
}

LLVMContextRef llvm_context_new(void) {
    LLVMContextRef ctx = LLVMContextCreate();
    llvm_diags *d = calloc(1, sizeof *d);
    if (!d)
        kern_oom(sizeof *d);
    LLVMContextSetDiagnosticHandler(ctx, keep_diagnostic, d);
    return ctx;
}

void llvm_context_free(LLVMContextRef ctx) {
    if (!ctx)
        return;
    free(LLVMContextGetDiagnosticContext(ctx));
    LLVMContextDispose(ctx);
}

const char *llvm_context_error(LLVMContextRef ctx) {
    const llvm_diags *d = LLVMContextGetDiagnosticContext(ctx);
    return d ? d->first : "";
}

LLVMCodeGenOptLevel llvm_codegen_level(int opt_level) {
    switch (opt_level < 0 ? 0 : opt_level) {
    case 0: return LLVMCodeGenLevelNone;
    case 1: return LLVMCodeGenLevelLess;
    case 2: return LLVMCodeGenLevelDefault;
    default: return LLVMCodeGenLevelAggressive;
    }
}

/* What default<O2> does that matters for kern's code: promote the allocas, clean up
 * (early-cse, instcombine, simplifycfg), hoist loop invariants, canonicalize loops and
 * unroll those of constant trip count, global value numbering, then the loop and SLP
 * vectorizers for the scalar tasks, and a last clean-up. Its runtime on grad-bench and
 * cpu-bench equals default<O2>'s (bench/README.md, 2026-11-26); its compile time is half. */
static const char CPU_PIPELINE[] =
    "function(sroa,early-cse<memssa>,simplifycfg,instcombine<no-verify-fixpoint>,"
    "loop-mssa(loop-rotate,licm),simplifycfg,loop(indvars,loop-deletion,loop-unroll-full),"
    "gvn,instcombine<no-verify-fixpoint>,loop-vectorize,slp-vectorizer,"
    "instcombine<no-verify-fixpoint>,simplifycfg,loop-mssa(licm))";

static bool is_gpu_triple(LLVMTargetMachineRef tm) {
    char *triple = LLVMGetTargetMachineTriple(tm);
    bool gpu = !strncmp(triple, "nvptx", 5) || !strncmp(triple, "amdgcn", 6);
    LLVMDisposeMessage(triple);
    return gpu;
}

static bool run_pipeline(LLVMModuleRef mod, LLVMTargetMachineRef tm, int opt_level, char *err,
                         size_t errlen) {
    if (opt_level < 0)
        opt_level = 0;
    if (opt_level > 3)
        opt_level = 3;
    char buf[32];
    snprintf(buf, sizeof buf, "default<O%d>", opt_level);
    const char *passes = opt_level >= 2 && !is_gpu_triple(tm) ? CPU_PIPELINE : buf;
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
