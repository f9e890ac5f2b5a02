/* llvm_obj.c - ahead-of-time output: relocatable object files and LLVM IR text.
 *
 * The object is position-independent code for the host CPU (its triple, name and
 * features), ready for `cc -shared obj.o -lm` into a module the runtime loads without
 * LLVM. Optionally a constant byte array with a given symbol is added (the module
 * metadata text, runtime/meta.h). The text form is the optimized module as
 * LLVMPrintModuleToString prints it (kernc emit --emit=llvm). */
#include <stdlib.h>
#include <string.h>

#include "llvm_backend.h"
#include "llvm_internal.h"

static void add_blob(LLVMModuleRef mod, const char *sym, const void *blob, size_t len) {
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMValueRef init = LLVMConstStringInContext2(ctx, blob ? blob : "", len, 0); /* + NUL */
    LLVMValueRef g = LLVMAddGlobal(mod, LLVMTypeOf(init), sym);
    LLVMSetInitializer(g, init);
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMExternalLinkage);
    LLVMSetAlignment(g, 1);
}

bool llvm_emit_object_blob(const ir_module *m, const kc_options *o, const char *path,
                           const char *blob_symbol, const void *blob, size_t blob_len, char *err,
                           size_t errlen) {
    LLVMTargetMachineRef tm = llvm_host_target_machine(o->opt_level, LLVMRelocPIC, err, errlen);
    if (!tm)
        return false;
    LLVMContextRef ctx = llvm_context_new();
    LLVMModuleRef mod = llvm_build_module(ctx, m, o, tm, err, errlen);
    bool ok = false;
    if (mod) {
        if (blob_symbol)
            add_blob(mod, blob_symbol, blob, blob_len);
        char *msg = NULL;
        /* the C API takes a non-const path */
        char *p = strdup(path);
        if (!p)
            kern_oom(strlen(path) + 1);
        if (LLVMTargetMachineEmitToFile(tm, mod, p, LLVMObjectFile, &msg))
            llvm_errf(err, errlen, "cannot write the object file %s: %s", path, msg ? msg : "");
        else
            ok = true;
        free(p);
        LLVMDisposeMessage(msg);
        LLVMDisposeModule(mod);
    }
    llvm_context_free(ctx);
    LLVMDisposeTargetMachine(tm);
    return ok;
}

bool llvm_emit_object(const ir_module *m, const kc_options *o, const char *path, char *err,
                      size_t errlen) {
    return llvm_emit_object_blob(m, o, path, NULL, NULL, 0, err, errlen);
}

char *llvm_emit_text(const ir_module *m, const kc_options *o, char *err, size_t errlen) {
    LLVMTargetMachineRef tm = llvm_host_target_machine(o->opt_level, LLVMRelocPIC, err, errlen);
    if (!tm)
        return NULL;
    LLVMContextRef ctx = llvm_context_new();
    LLVMModuleRef mod = llvm_build_module(ctx, m, o, tm, err, errlen);
    char *text = NULL;
    if (mod) {
        char *s = LLVMPrintModuleToString(mod);
        text = strdup(s);
        if (!text)
            kern_oom(strlen(s) + 1);
        LLVMDisposeMessage(s);
        LLVMDisposeModule(mod);
    }
    llvm_context_free(ctx);
    LLVMDisposeTargetMachine(tm);
    return text;
}
