/* llvm_jit.c - JIT compilation of an IR module through ORC LLJIT.
 *
 * The module's tasks are split into parts (plan_parts: the largest task first into the
 * part with the fewest ops), one per thread up to the online CPUs ($KERN_JIT_THREADS
 * caps them). Each part is emitted into an LLVM context of its own on the calling thread
 * (llvm_cpu_emit_part), then optimized (llvm_target.c) and compiled to an object file on
 * its own thread with its own host target machine; the objects go into one LLJIT, whose
 * JIT target-machine builder is made from the same host machine, so that data layouts and
 * CPU features agree. A module of one task is one part, compiled on the calling thread.
 *
 * Symbols the code calls resolve, in order, from the objects, from the libm functions
 * listed below (defined as absolute symbols, so that they resolve even when the process
 * has not loaded libm by itself), libmvec's vector functions, and the process (memset,
 * memcpy and anything else that LLVM's lowering calls). llvm_jit_compile looks up a task
 * symbol of every part, so that every object is linked, and an unresolved symbol
 * reported, before it returns. llvm_jit_host_sizers loads the GPU sizer kernels built for
 * the host (llvm_sizer_host.c) the same way, as one part. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/TargetMachine.h>

#include "llvm_backend.h"
#include "llvm_cpu.h" /* the vector math library */
#include "llvm_gpu.h"

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
    X(asinf)                                                                                       \
    X(asin) X(acosf) X(acos) X(atanf) X(atan) X(sinhf) X(sinh) X(coshf) X(cosh) X(tanhf) X(tanh)   \
        X(atan2f) X(atan2) X(expf) X(exp) X(exp2f) X(exp2) X(logf) X(log) X(log2f) X(log2) X(powf) \
            X(pow) X(fmaf) X(fma) X(roundf) X(round) X(floorf) X(floor) X(ceilf) X(ceil) X(sqrtf)  \
                X(sqrt)

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

/* The vector math functions (libmvec, llvm_simd.c) that the modules call, each named once
 * however many parts call it (a second definition of a name is an error, and its unit
 * would have to be disposed of): at most MAX_VECMATH names into names[], pointing into the
 * modules. */
enum { MAX_VECMATH = 64 };
static size_t vector_math_names(const LLVMModuleRef *mods, unsigned nmods,
                                const char *names[MAX_VECMATH]) {
    size_t n = 0;
    for (unsigned m = 0; m < nmods; m++)
        for (LLVMValueRef f = LLVMGetFirstFunction(mods[m]); f; f = LLVMGetNextFunction(f)) {
            size_t len;
            const char *name = LLVMGetValueName2(f, &len);
            if (!LLVMIsDeclaration(f) || !llvm_simd_is_vector_math(name) || n == MAX_VECMATH)
                continue;
            bool seen = false;
            for (size_t k = 0; k < n && !seen; k++)
                seen = !strcmp(names[k], name);
            if (!seen)
                names[n++] = name;
        }
    return n;
}

/* Defines the vector math functions names[] as absolute symbols. */
static void define_vector_math(LLVMOrcLLJITRef jit, LLVMOrcJITDylibRef jd, const char *const *names,
                               size_t count) {
    LLVMOrcCSymbolMapPair pairs[MAX_VECMATH];
    size_t n = 0;
    for (size_t i = 0; i < count && n < MAX_VECMATH; i++) {
        void *addr = llvm_simd_vector_math_address(names[i]);
        if (!addr)
            continue; /* the lookup reports it */
        pairs[n].Name = LLVMOrcLLJITMangleAndIntern(jit, names[i]);
        pairs[n].Sym.Address = (LLVMOrcJITTargetAddress)(uintptr_t)addr;
        pairs[n].Sym.Flags.GenericFlags =
            LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable;
        pairs[n].Sym.Flags.TargetFlags = 0;
        n++;
    }
    if (!n)
        return;
    LLVMOrcMaterializationUnitRef mu = LLVMOrcAbsoluteSymbols(pairs, n);
    LLVMErrorRef e = LLVMOrcJITDylibDefine(jd, mu);
    if (e) { /* not consumed on failure */
        LLVMConsumeError(e);
        LLVMOrcDisposeMaterializationUnit(mu);
    }
}

/* ---- parts compiled on several threads --------------------------------------------- */

enum { MAX_PARTS = 8 };

/* One part of the module: emitted on the calling thread, then optimized and compiled to
 * an object file on its own thread. */
typedef struct jit_part {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    const kc_options *o;
    LLVMMemoryBufferRef obj; /* the object file, or NULL on failure */
    char first[512];         /* a task symbol of the part ("": none) */
    double opt_s, codegen_s;
    char err[1024];
} jit_part;

typedef struct task_weight {
    unsigned ops, task;
} task_weight;

/* The larger task first; among equals, the first in the module. */
static int heavier_first(const void *a, const void *b) {
    const task_weight *x = a, *y = b;
    if (x->ops != y->ops)
        return x->ops > y->ops ? -1 : 1;
    return x->task < y->task ? -1 : x->task > y->task;
}

/* How many parts to compile m in (1 .. MAX_PARTS), and each task's part: the largest
 * task first into the part with the fewest ops so far. o->jit_threads caps the parts
 * (default: the online CPUs). */
static unsigned plan_parts(const ir_module *m, const kc_options *o, unsigned **part_of) {
    *part_of = NULL;
    unsigned ntasks = 0;
    ir_foreach_kernel(k, m) {
        ir_foreach_op(op, k->body) {
            if (op->code == IR_PARALLEL || op->code == IR_SERIAL)
                ntasks++;
        }
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (o->jit_threads > 0)
        cpus = o->jit_threads;
    unsigned nparts = cpus < 1 ? 1 : cpus > MAX_PARTS ? MAX_PARTS : (unsigned)cpus;
    if (nparts > ntasks)
        nparts = ntasks;
    if (nparts <= 1)
        return 1;
    task_weight *w = calloc(ntasks, sizeof *w);
    unsigned *of = calloc(ntasks, sizeof *of);
    if (!w || !of)
        kern_oom(ntasks * sizeof *w);
    unsigned t = 0;
    ir_foreach_kernel(k, m) {
        ir_foreach_op(op, k->body) {
            if (op->code == IR_PARALLEL || op->code == IR_SERIAL) {
                w[t].ops = llvm_count_ops(op->regions[0]) + 1;
                w[t].task = t;
                t++;
            }
        }
    }
    qsort(w, ntasks, sizeof *w, heavier_first);
    unsigned load[MAX_PARTS] = {0};
    for (unsigned n = 0; n < ntasks; n++) {
        unsigned least = 0;
        for (unsigned p = 1; p < nparts; p++)
            if (load[p] < load[least])
                least = p;
        of[w[n].task] = least;
        load[least] += w[n].ops;
    }
    free(w);
    *part_of = of;
    return nparts;
}

/* The symbol of the first task of part `part` into buf ("" when it has none). */
static void part_first_symbol(const ir_module *m, const unsigned *part_of, unsigned part, char *buf,
                              size_t size) {
    buf[0] = 0;
    unsigned n = 0;
    ir_foreach_kernel(k, m) {
        int t = 0;
        ir_foreach_op(op, k->body) {
            if (op->code != IR_PARALLEL && op->code != IR_SERIAL)
                continue;
            if (!part_of || part_of[n] == part) {
                llvm_task_symbol(buf, size, k->name, t, false);
                return;
            }
            t++;
            n++;
        }
    }
}

/* Optimizes the part's module and compiles it to an object file, with a target machine
 * of its own (LLVM's target machines are not shared between threads). */
static void *compile_part(void *arg) {
    jit_part *p = arg;
    double t0 = now_s();
    LLVMTargetMachineRef tm =
        llvm_host_target_machine(p->o->opt_level, LLVMRelocPIC, p->err, sizeof p->err);
    if (!tm)
        return NULL;
    p->mod = llvm_finish_module(p->mod, p->o, tm, p->err, sizeof p->err);
    double t1 = now_s();
    if (p->mod) {
        char *msg = NULL;
        if (LLVMTargetMachineEmitToMemoryBuffer(tm, p->mod, LLVMObjectFile, &msg, &p->obj)) {
            llvm_errf(p->err, sizeof p->err, "LLVM code generation failed: %s", msg ? msg : "");
            p->obj = NULL;
        }
        LLVMDisposeMessage(msg);
    }
    LLVMDisposeTargetMachine(tm);
    p->opt_s = t1 - t0;
    p->codegen_s = now_s() - t1;
    return NULL;
}

/* Compiles every part, parts 1.. on threads of their own and part 0 on the calling one
 * (one thread too many, or none to be had, runs its part here after the others). */
static void compile_parts(jit_part *parts, unsigned n) {
    pthread_t th[MAX_PARTS];
    bool started[MAX_PARTS] = {false};
    for (unsigned i = 1; i < n; i++)
        started[i] = pthread_create(&th[i], NULL, compile_part, &parts[i]) == 0;
    compile_part(&parts[0]);
    for (unsigned i = 1; i < n; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        else
            compile_part(&parts[i]);
    }
}

static void free_parts(jit_part *parts, unsigned n) {
    for (unsigned i = 0; i < n; i++) {
        if (parts[i].mod)
            LLVMDisposeModule(parts[i].mod);
        if (parts[i].obj)
            LLVMDisposeMemoryBuffer(parts[i].obj);
        if (parts[i].ctx)
            llvm_context_free(parts[i].ctx);
    }
}

/* Loads n object files (objs[i], owned by the JIT from here on, added or not) into a new
 * LLJIT with the vector math functions vecmath[], and links each by looking up firsts[i]
 * (a task symbol of the object; "" none), so that unresolved symbols are reported here. */
static llvm_jit *load_objects(LLVMMemoryBufferRef *objs, const char *const *firsts, unsigned n,
                              const char *const *vecmath, size_t nvecmath, const kc_options *o,
                              char *err, size_t errlen) {
    LLVMTargetMachineRef tm = llvm_host_target_machine(o->opt_level, LLVMRelocPIC, err, errlen);
    LLVMOrcLLJITRef jit = NULL;
    if (tm) {
        LLVMOrcLLJITBuilderRef jb = LLVMOrcCreateLLJITBuilder();
        LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
            jb, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm)); /* takes tm */
        if (take_error(LLVMOrcCreateLLJIT(&jit, jb), "cannot create the LLVM JIT", err, errlen))
            jit = NULL;
    }
    if (!jit) {
        for (unsigned i = 0; i < n; i++)
            LLVMDisposeMemoryBuffer(objs[i]);
        return NULL;
    }
    LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(jit);
    define_libm(jit, jd);
    define_vector_math(jit, jd, vecmath, nvecmath);
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
    bool ok = true;
    for (unsigned i = 0; i < n; i++) {
        if (ok)
            ok = !take_error(LLVMOrcLLJITAddObjectFile(jit, jd, objs[i]),
                             "cannot add the object code to the JIT", err, errlen);
        else
            LLVMDisposeMemoryBuffer(objs[i]);
    }
    for (unsigned i = 0; i < n && ok; i++) {
        LLVMOrcExecutorAddress addr = 0;
        if (firsts[i][0])
            ok = !take_error(LLVMOrcLLJITLookup(jit, &addr, firsts[i]), "JIT compilation failed",
                             err, errlen);
    }
    if (!ok) {
        llvm_jit_free(j);
        return NULL;
    }
    return j;
}

/* Loads the compiled parts into a new LLJIT and links them; frees the parts either way. */
static llvm_jit *load_parts(jit_part *parts, unsigned nparts, const kc_options *o, char *err,
                            size_t errlen) {
    LLVMModuleRef mods[MAX_PARTS];
    LLVMMemoryBufferRef objs[MAX_PARTS];
    const char *firsts[MAX_PARTS], *vecmath[MAX_VECMATH];
    for (unsigned i = 0; i < nparts; i++) {
        mods[i] = parts[i].mod;
        objs[i] = parts[i].obj;
        parts[i].obj = NULL; /* load_objects owns it now */
        firsts[i] = parts[i].first;
    }
    size_t nvecmath = vector_math_names(mods, nparts, vecmath);
    llvm_jit *j = load_objects(objs, firsts, nparts, vecmath, nvecmath, o, err, errlen);
    free_parts(parts, nparts);
    return j;
}

/* ---- the objects kept for the compile cache ------------------------------------------ */

/* What llvm_jit_load reads back: the vector math names, then every part's object file
 * with the task symbol that links it ("-": none):
 *     kern-jit-objects N\n
 *     vecmath NAME\n             (any number)
 *     object LEN SYMBOL\n<LEN bytes>\n   (N times) */
static void keep_objects(kern_buf *b, const jit_part *parts, unsigned nparts) {
    LLVMModuleRef mods[MAX_PARTS];
    const char *vecmath[MAX_VECMATH];
    for (unsigned i = 0; i < nparts; i++)
        mods[i] = parts[i].mod;
    size_t nvecmath = vector_math_names(mods, nparts, vecmath);
    buf_printf(b, "kern-jit-objects %u\n", nparts);
    for (size_t i = 0; i < nvecmath; i++)
        buf_printf(b, "vecmath %s\n", vecmath[i]);
    for (unsigned i = 0; i < nparts; i++) {
        size_t len = LLVMGetBufferSize(parts[i].obj);
        buf_printf(b, "object %zu %s\n", len, parts[i].first[0] ? parts[i].first : "-");
        buf_putn(b, LLVMGetBufferStart(parts[i].obj), len);
        buf_putc(b, '\n');
    }
}

/* The line at *p (up to its newline, which is skipped) into line (NUL-terminated); false
 * when there is none or it does not fit. */
static bool next_line(const char *d, size_t len, size_t *p, char *line, size_t size) {
    const char *nl = *p < len ? memchr(d + *p, '\n', len - *p) : NULL;
    if (!nl || (size_t)(nl - (d + *p)) >= size)
        return false;
    size_t n = (size_t)(nl - (d + *p));
    memcpy(line, d + *p, n);
    line[n] = 0;
    *p += n + 1;
    return true;
}

llvm_jit *llvm_jit_load(const char *data, size_t len, const kc_options *o, char *err,
                        size_t errlen) {
    llvm_init_native();
    char line[600];
    size_t p = 0;
    unsigned n = 0;
    char trail;
    if (!next_line(data, len, &p, line, sizeof line) ||
        sscanf(line, "kern-jit-objects %u%c", &n, &trail) != 1 || n < 1 || n > MAX_PARTS) {
        llvm_errf(err, errlen, "damaged JIT objects: no 'kern-jit-objects N' line");
        return NULL;
    }
    char names[MAX_VECMATH][96], firsts[MAX_PARTS][512];
    const char *vecmath[MAX_VECMATH], *firstp[MAX_PARTS];
    LLVMMemoryBufferRef objs[MAX_PARTS];
    size_t nvecmath = 0;
    unsigned nobjs = 0;
    bool ok = true;
    while (ok && nobjs < n) {
        ok = next_line(data, len, &p, line, sizeof line);
        size_t olen = 0;
        int used = 0;
        if (ok && !strncmp(line, "vecmath ", 8) && nobjs == 0 && nvecmath < MAX_VECMATH &&
            strlen(line + 8) < sizeof names[0]) {
            strcpy(names[nvecmath], line + 8);
            vecmath[nvecmath] = names[nvecmath];
            nvecmath++;
        } else if (ok && sscanf(line, "object %zu %n", &olen, &used) == 1 && used > 0 &&
                   strlen(line + used) < sizeof firsts[0] && olen <= len - p &&
                   len - p - olen >= 1 && data[p + olen] == '\n') {
            strcpy(firsts[nobjs], strcmp(line + used, "-") ? line + used : "");
            firstp[nobjs] = firsts[nobjs];
            objs[nobjs++] = LLVMCreateMemoryBufferWithMemoryRangeCopy(data + p, olen, "kern-cache");
            p += olen + 1;
        } else {
            ok = false;
        }
    }
    if (!ok || p != len) {
        for (unsigned i = 0; i < nobjs; i++)
            LLVMDisposeMemoryBuffer(objs[i]);
        llvm_errf(err, errlen, "damaged JIT objects (at byte %zu)", p);
        return NULL;
    }
    return load_objects(objs, firstp, n, vecmath, nvecmath, o, err, errlen);
}

llvm_jit *llvm_jit_compile_keep(const ir_module *m, const kc_options *o, kern_buf *objects,
                                char *err, size_t errlen) {
    double t0 = now_s();
    llvm_init_native();
    unsigned *part_of;
    unsigned nparts = plan_parts(m, o, &part_of);
    jit_part parts[MAX_PARTS];
    memset(parts, 0, sizeof parts);
    for (unsigned i = 0; i < nparts; i++) {
        parts[i].o = o;
        parts[i].ctx = llvm_context_new();
        parts[i].mod = llvm_cpu_emit_part(parts[i].ctx, m, o, part_of, i);
        part_first_symbol(m, part_of, i, parts[i].first, sizeof parts[i].first);
    }
    free(part_of);
    double t1 = now_s();
    compile_parts(parts, nparts);
    double t2 = now_s();
    llvm_jit_times times = {.emit_s = t1 - t0, .parts = nparts};
    for (unsigned i = 0; i < nparts; i++) {
        if (!parts[i].obj) {
            llvm_errf(err, errlen, "%s", parts[i].err);
            free_parts(parts, nparts);
            return NULL;
        }
        if (parts[i].opt_s + parts[i].codegen_s > times.opt_s + times.codegen_s) {
            times.opt_s = parts[i].opt_s; /* the longest part's */
            times.codegen_s = parts[i].codegen_s;
        }
    }

    if (objects)
        keep_objects(objects, parts, nparts);
    llvm_jit *j = load_parts(parts, nparts, o, err, errlen);
    if (!j)
        return NULL;
    double t3 = now_s();
    times.codegen_s += t3 - t2; /* and linking */
    times.total_s = t3 - t0;
    j->times = times;
    return j;
}

llvm_jit *llvm_jit_compile(const ir_module *m, const kc_options *o, char *err, size_t errlen) {
    return llvm_jit_compile_keep(m, o, NULL, err, errlen);
}

llvm_jit *llvm_jit_host_sizers(const ir_module *m, const kc_options *o, char *err, size_t errlen) {
    llvm_init_native();
    jit_part part = {.o = o, .ctx = llvm_context_new()};
    part.mod = llvm_host_sizers(part.ctx, m, o);
    ir_foreach_kernel(k, m) {
        if (k->nadstacks && !part.first[0]) /* linked at once, like a task */
            llvm_sizer_symbol(part.first, sizeof part.first, k->name, 0);
    }
    compile_part(&part);
    if (!part.obj) {
        llvm_errf(err, errlen, "%s", part.err);
        free_parts(&part, 1);
        return NULL;
    }
    return load_parts(&part, 1, o, err, errlen);
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
