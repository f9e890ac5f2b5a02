/* llvm_amdgpu.c - AMD GPUs: the GPU ABI (llvm_gpu.c) for AMDGPU, code objects.
 *
 * Thread indexing: workgroup id x * workgroup size x + work-item id x, and the grid's
 * work items from the HSA dispatch packet (workgroup_size_x, a u16 at offset 4;
 * grid_size_x, a u32 at offset 12). Entry points use the amdgpu_kernel calling convention.
 * The code is for `--arch` (gfxNNN, default gfx90a), triple amdgcn-amd-amdhsa, code object
 * v5 (LLVM 19's default).
 *
 * Math: ROCm's device libraries (ocml) are not part of this build (Debian 12 does not
 * package them). sqrt, fma, floor and the like are LLVM intrinsics that AMDGPU lowers to
 * exact code, f32 exp, exp2, log and log2 too (LLVM 19's accurate expansions); every other
 * transcendental builtin (sin, pow, f64 exp, ...) is kern's own, lowered to plain IR on a
 * copy of the module before the emitter sees it (passes/lower_libm.c), with the accuracy of
 * docs/reference.md's table.
 *
 * `kernc build --target=amdgpu` links the relocatable object with ld.lld (ld.lld-19, found
 * at $KERN_LLD, then on PATH and in LLVM 19's directory; started with an argument vector,
 * no shell) into a shared code object (.hsaco) that HIP's module loader takes. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <llvm-c/Target.h>

#include "../../passes/passes.h"
#include "llvm_backend.h"
#include "llvm_gpu.h"

#define AMDGPU_TRIPLE "amdgcn-amd-amdhsa"

extern char **environ;

/* ---- the GPU target ----------------------------------------------------------------- */

static LLVMValueRef amd_intrinsic(llvm_emitter *em, const char *name) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    kern_assert(id != 0);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(em->mod, id, NULL, 0);
    return LLVMBuildCall2(em->b, LLVMIntrinsicGetType(em->ctx, id, NULL, 0), fn, NULL, 0, "");
}

/* A field of the dispatch packet, zero-extended to i64. */
static LLVMValueRef dispatch_field(llvm_emitter *em, unsigned offset, LLVMTypeRef t) {
    LLVMValueRef p = amd_intrinsic(em, "llvm.amdgcn.dispatch.ptr");
    LLVMValueRef off = LLVMConstInt(em->t_i64, offset, 0);
    LLVMValueRef q = LLVMBuildInBoundsGEP2(em->b, em->t_i8, p, &off, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(em->b, t, q, "");
    LLVMSetAlignment(v, (unsigned)(LLVMGetIntTypeWidth(t) / 8));
    return LLVMBuildZExt(em->b, v, em->t_i64, "");
}

static LLVMValueRef amd_thread_index(llvm_emitter *em) {
    LLVMValueRef wg =
        LLVMBuildZExt(em->b, amd_intrinsic(em, "llvm.amdgcn.workgroup.id.x"), em->t_i64, "");
    LLVMValueRef wi =
        LLVMBuildZExt(em->b, amd_intrinsic(em, "llvm.amdgcn.workitem.id.x"), em->t_i64, "");
    LLVMValueRef size = dispatch_field(em, 4, LLVMInt16TypeInContext(em->ctx));
    return LLVMBuildNUWAdd(em->b, LLVMBuildNUWMul(em->b, wg, size, ""), wi, "tid");
}

static LLVMValueRef amd_thread_count(llvm_emitter *em) {
    return dispatch_field(em, 12, em->t_i32); /* grid_size_x: work items */
}

static void amd_mark_kernel(llvm_emitter *em, LLVMValueRef fn) {
    LLVMSetFunctionCallConv(fn, LLVMAMDGPUKERNELCallConv);
}

/* The largest of the 32-bit unsigned v over the wavefront's active lanes, in each of them. */
static LLVMValueRef wave_umax(llvm_emitter *em, LLVMValueRef v) {
    const char *name = "llvm.amdgcn.wave.reduce.umax";
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    kern_assert(id != 0);
    LLVMTypeRef t = em->t_i32; /* overloaded; LLVM 19 lowers i32 only */
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(em->mod, id, &t, 1);
    LLVMValueRef a[2] = {v, LLVMConstInt(em->t_i32, 0, 0)}; /* the target's strategy */
    return LLVMBuildCall2(em->b, LLVMIntrinsicGetType(em->ctx, id, &t, 1), fn, a, 2, "");
}

/* lanemax: the largest x over the wavefront's active lanes, in each of them, with LLVM 19's
 * llvm.amdgcn.wave.reduce.umax (32-bit unsigned only): a signed x with its sign bit
 * flipped (unsigned order is then its order); a 64-bit x as its high halves' maximum,
 * then the low halves' among the lanes that have it. */
static LLVMValueRef amd_lanemax(llvm_emitter *em, const ir_op *op, LLVMValueRef x) {
    bool uns = ty_is_unsigned(op->operands[0]->type);
    LLVMTypeRef t = LLVMTypeOf(x);
    unsigned bits = LLVMGetIntTypeWidth(t);
    LLVMValueRef flip = LLVMConstInt(t, uns ? 0 : 1ULL << (bits - 1), 0);
    LLVMValueRef u = LLVMBuildXor(em->b, x, flip, ""), m;
    if (bits == 32) {
        m = wave_umax(em, u);
    } else {
        LLVMValueRef sh = LLVMConstInt(t, 32, 0);
        LLVMValueRef hi = LLVMBuildTrunc(em->b, LLVMBuildLShr(em->b, u, sh, ""), em->t_i32, "");
        LLVMValueRef lo = LLVMBuildTrunc(em->b, u, em->t_i32, "");
        LLVMValueRef mh = wave_umax(em, hi);
        LLVMValueRef top = LLVMBuildICmp(em->b, LLVMIntEQ, hi, mh, "");
        LLVMValueRef ml =
            wave_umax(em, LLVMBuildSelect(em->b, top, lo, LLVMConstInt(em->t_i32, 0, 0), ""));
        m = LLVMBuildOr(em->b, LLVMBuildShl(em->b, LLVMBuildZExt(em->b, mh, t, ""), sh, ""),
                        LLVMBuildZExt(em->b, ml, t, ""), "");
    }
    return LLVMBuildXor(em->b, m, flip, "");
}

static const llvm_gpu_target amdgpu_target = {
    .hooks = {.fast_contract = true, .lanemax = amd_lanemax},
    .thread_index = amd_thread_index,
    .thread_count = amd_thread_count,
    .mark_kernel = amd_mark_kernel,
};

/* ---- target machine, assembly, objects -------------------------------------------- */

static pthread_once_t amdgpu_once = PTHREAD_ONCE_INIT;

static void init_amdgpu_once(void) {
    llvm_install_fatal_handler();
    LLVMInitializeAMDGPUTargetInfo();
    LLVMInitializeAMDGPUTarget();
    LLVMInitializeAMDGPUTargetMC();
    LLVMInitializeAMDGPUAsmPrinter();
}

bool llvm_amdgpu_arch_valid(const char *arch) {
    return kern_target_arch_valid(&kern_target_amdgpu, arch);
}

static LLVMTargetMachineRef amdgpu_machine(const kc_options *o, char *err, size_t errlen) {
    pthread_once(&amdgpu_once, init_amdgpu_once);
    const char *arch = o->arch ? o->arch : kern_target_amdgpu.default_arch;
    if (!llvm_amdgpu_arch_valid(arch)) {
        llvm_errf(err, errlen, "unknown AMD GPU architecture '%s' (this kern compiles for %s)",
                  arch, kern_target_amdgpu.arches);
        return NULL;
    }
    LLVMTargetRef target;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(AMDGPU_TRIPLE, &target, &msg)) {
        llvm_errf(err, errlen, "this LLVM has no AMDGPU target: %s", msg ? msg : "");
        LLVMDisposeMessage(msg);
        return NULL;
    }
    LLVMTargetMachineRef tm =
        LLVMCreateTargetMachine(target, AMDGPU_TRIPLE, arch, "", llvm_codegen_level(o->opt_level),
                                LLVMRelocPIC, LLVMCodeModelDefault);
    if (!tm)
        llvm_errf(err, errlen, "cannot create an AMDGPU target machine for %s", arch);
    return tm;
}

/* Emits m for AMDGPU as assembly, LLVM IR text or an object; malloc'd, *len bytes. */
static char *amdgpu_output(const ir_module *m, const kc_options *o, int what, size_t *len,
                           char *err, size_t errlen) {
    LLVMTargetMachineRef tm = amdgpu_machine(o, err, errlen);
    if (!tm)
        return NULL;
    ir_module *own = ir_libm_copy(m, IR_LIBM_F32 | IR_LIBM_F64 | IR_LIBM_KEEP_F32_EXPLOG);
    LLVMContextRef ctx = llvm_context_new();
    LLVMModuleRef mod = llvm_finish_module(
        llvm_gpu_emit_module(ctx, own ? own : m, o, &amdgpu_target), o, tm, err, errlen);
    ir_module_free(own);
    char *out = NULL;
    if (mod && what == 2) {
        char *s = LLVMPrintModuleToString(mod);
        out = strdup(s);
        *len = out ? strlen(out) : 0;
        LLVMDisposeMessage(s);
    } else if (mod) {
        LLVMMemoryBufferRef buf = NULL;
        char *msg = NULL;
        if (LLVMTargetMachineEmitToMemoryBuffer(
                tm, mod, what == 0 ? LLVMAssemblyFile : LLVMObjectFile, &msg, &buf)) {
            llvm_errf(err, errlen, "AMDGPU code generation failed: %s", msg ? msg : "");
            LLVMDisposeMessage(msg);
        } else {
            *len = LLVMGetBufferSize(buf);
            out = malloc(*len + 1);
            if (out) {
                memcpy(out, LLVMGetBufferStart(buf), *len);
                out[*len] = 0;
            }
            LLVMDisposeMemoryBuffer(buf);
        }
    }
    if (mod)
        LLVMDisposeModule(mod);
    llvm_context_free(ctx);
    LLVMDisposeTargetMachine(tm);
    return out;
}

char *llvm_emit_amdgcn(const ir_module *m, const kc_options *o, char *err, size_t errlen) {
    size_t len;
    return amdgpu_output(m, o, 0, &len, err, errlen);
}

char *llvm_emit_amdgpu_ir(const ir_module *m, const kc_options *o, char *err, size_t errlen) {
    size_t len;
    return amdgpu_output(m, o, 2, &len, err, errlen);
}

static bool write_file(const char *path, const char *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

char *llvm_emit_hsaco(const ir_module *m, const kc_options *o, size_t *len, char *err,
                      size_t errlen) {
    if (o->lld && access(o->lld, X_OK) != 0) {
        llvm_errf(err, errlen, "cannot run the linker '%s' (KERN_LLD): %s", o->lld,
                  strerror(errno));
        return NULL;
    }
    size_t olen = 0;
    char *obj = amdgpu_output(m, o, 1, &olen, err, errlen);
    if (!obj)
        return NULL;
    char dir[] = "/tmp/kern-hsaco-XXXXXX";
    char *out = NULL;
    if (!mkdtemp(dir)) {
        llvm_errf(err, errlen, "cannot create a temporary directory: %s", strerror(errno));
        free(obj);
        return NULL;
    }
    char in[64], so[64], log[64];
    snprintf(in, sizeof in, "%s/code.o", dir);
    snprintf(so, sizeof so, "%s/code.hsaco", dir);
    snprintf(log, sizeof log, "%s/lld.log", dir);
    if (!write_file(in, obj, olen)) {
        llvm_errf(err, errlen, "cannot write '%s'", in);
    } else {
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        /* o->lld, else ld.lld-19 or ld.lld on PATH (posix_spawnp searches it), else LLVM
         * 19's own directory */
        const char *names[] = {"ld.lld-19", "ld.lld", "/usr/lib/llvm-19/bin/ld.lld"};
        const char *lld = NULL;
        pid_t pid;
        int st = -1, spawned = ENOENT;
        for (size_t n = 0; n < 3 && spawned == ENOENT; n++) {
            lld = o->lld ? o->lld : names[n];
            char *argv[] = {(char *)lld, "-shared", "-o", so, in, NULL};
            spawned = posix_spawnp(&pid, lld, &fa, NULL, argv, environ);
            if (o->lld)
                break;
        }
        if (spawned == 0 && waitpid(pid, &st, 0) == pid)
            st = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
        posix_spawn_file_actions_destroy(&fa);
        size_t n = 0;
        if (spawned == ENOENT && !o->lld) {
            llvm_errf(err, errlen,
                      "ld.lld not found (it links AMDGPU code objects): set $KERN_LLD, or "
                      "install lld-19");
        } else if (spawned != 0) {
            llvm_errf(err, errlen, "cannot run the linker '%s': %s", lld, strerror(spawned));
        } else if (st == 0 && (out = kern_read_file(so, &n)) != NULL) {
            *len = n;
        } else {
            char *text = kern_read_file(log, &n);
            llvm_errf(err, errlen, "linking the code object with %s failed (status %d): %s", lld,
                      st, text ? text : "");
            free(text);
        }
    }
    remove(in);
    remove(so);
    remove(log);
    rmdir(dir);
    free(obj);
    return out;
}
