/* llvm_sizer_host.c - the GPU sizer kernels (llvm_sizer.c) built for the host CPU, so that
 * a test can run the device's sizing code against the host evaluator (common/sizeexpr.c)
 * on the same arguments (tests/test_sizer.c; llvm_jit_host_sizers compiles the module).
 *
 * The sizers are emitted by llvm_gpu_emit_sizer unchanged, for a stand-in GPU target whose
 * grid is two i64 globals, kern_sizer_tid and kern_sizer_nthreads, that the caller sets
 * before each call (one thread after another: the atomics are real ones). Every adstack of
 * every kernel gets its sizer, whether its capacity reads arrays or not. Each sizer is
 * renamed "<symbol>.sizer" and called by a trampoline under the sizer symbol itself:
 *   void kern_<K>__s<s>(const int64_t *slots)
 * which loads the sizer's parameters (docs/gpu-abi.md: the kernel's, then res) from
 * consecutive 8-byte slots (a value of fewer bytes from the slot's first bytes:
 * little-endian hosts). Not used by any target. */
#include <stdio.h>
#include <stdlib.h>

#include "llvm_gpu.h"

static LLVMValueRef grid_global(llvm_emitter *em, const char *name) {
    LLVMValueRef g = LLVMGetNamedGlobal(em->mod, name);
    if (!g) {
        g = LLVMAddGlobal(em->mod, em->t_i64, name);
        LLVMSetInitializer(g, LLVMConstInt(em->t_i64, 0, 0));
    }
    return LLVMBuildLoad2(em->b, em->t_i64, g, name);
}

static LLVMValueRef host_thread_index(llvm_emitter *em) {
    return grid_global(em, "kern_sizer_tid");
}

static LLVMValueRef host_thread_count(llvm_emitter *em) {
    return grid_global(em, "kern_sizer_nthreads");
}

static void host_mark_kernel(llvm_emitter *em, LLVMValueRef fn) { (void)em, (void)fn; }

static const llvm_gpu_target HOST_GRID = {
    .thread_index = host_thread_index,
    .thread_count = host_thread_count,
    .mark_kernel = host_mark_kernel,
};

/* void sym(ptr slots): the parameters of fn from their slots, then fn. */
static void emit_trampoline(llvm_emitter *em, LLVMValueRef fn, const char *sym) {
    LLVMTypeRef fty = LLVMGlobalGetValueType(fn);
    unsigned n = LLVMCountParamTypes(fty);
    LLVMTypeRef *ps = calloc(n + 1, sizeof *ps);
    LLVMValueRef *args = calloc(n + 1, sizeof *args);
    if (!ps || !args)
        kern_oom((n + 1) * sizeof *ps);
    LLVMGetParamTypes(fty, ps);
    LLVMValueRef t =
        llvm_function_begin(em, sym, LLVMFunctionType(em->t_void, &em->t_ptr, 1, 0), NULL);
    for (unsigned i = 0; i < n; i++) {
        LLVMValueRef idx = LLVMConstInt(em->t_i64, i, 0);
        LLVMValueRef slot = LLVMBuildGEP2(em->b, em->t_i64, LLVMGetParam(t, 0), &idx, 1, "");
        args[i] = LLVMBuildLoad2(em->b, ps[i], slot, "");
    }
    LLVMBuildCall2(em->b, fty, fn, args, n, "");
    LLVMBuildRetVoid(em->b);
    free(ps);
    free(args);
}

LLVMModuleRef llvm_host_sizers(LLVMContextRef ctx, const ir_module *m, const kc_options *o) {
    static const llvm_target_hooks no_hooks = {0};
    llvm_emitter em;
    llvm_emitter_init(&em, ctx, m, o, &no_hooks);
    ir_foreach_kernel(k, m) {
        llvm_kernel_begin(&em, k);
        for (uint32_t s = 0; s < k->nadstacks; s++) {
            char sym[600], renamed[620];
            llvm_gpu_emit_sizer(&em, &HOST_GRID, s, k->adstacks[s].cap);
            llvm_sizer_symbol(sym, sizeof sym, k->name, (int)s);
            LLVMValueRef fn = LLVMGetNamedFunction(em.mod, sym);
            snprintf(renamed, sizeof renamed, "%s.sizer", sym);
            LLVMSetValueName2(fn, renamed, strlen(renamed));
            LLVMSetLinkage(fn, LLVMInternalLinkage);
            emit_trampoline(&em, fn, sym);
        }
        llvm_kernel_end(&em);
    }
    return llvm_emitter_fini(&em);
}
