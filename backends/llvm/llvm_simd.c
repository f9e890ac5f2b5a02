/* llvm_simd.c - SIMD across work items for CPU parallel tasks (the SPMD-on-SIMD model of
 * ISPC): each lane of a W-wide vector runs one work item. This file decides which tasks run
 * so and with how many lanes, and holds the vector math; llvm_simd_emit.c emits the task.
 *
 * Which tasks: the parallel tasks of every build but debug ones; in a task over several
 * dimensions the innermost one runs across the lanes and the outer ones are scalar loops.
 * Checked builds (kc_options.checks, the front ends' default) keep the vector code: each
 * access tests its lanes' indices (llvm_simd_emit.c, "checks"). Serial tasks, debug builds
 * (--debug: scalar code) and --simd=off / KERN_SIMD=off
 * take the scalar path of llvm_cpu.c. The choice is per task and shows in `kernc emit
 * --emit=llvm` as the task function's attribute "kern-simd" ("16 lanes", or "scalar: "
 * and the reason).
 *
 * Lanes: o->simd (kernc --simd, $KERN_SIMD: off, sse = 4, avx2 = 8, avx512 = 16, or 4 to 64), else
 * two vectors of the host's widest registers for f32: 32 with AVX-512, 16 with AVX2, 8
 * otherwise (SSE, NEON), four for a task with a uniform loop of vector math; independent
 * vectors hide the latency of serial dependencies (a loop of sin calls runs twice as fast
 * with two as with one).
 *
 * Uniform and varying values. The task's divergence (passes/divergence.c) marks the values
 * that may differ
 * between lanes (varying): the parallel index, everything computed from a varying value,
 * loads from varying addresses, atomics' old values, adstack pops, the results of an
 * `if` on a varying condition, and the carried values of loops whose trip count or exit
 * differs between lanes (masked loops). Uniform values stay scalars; varying ones are
 * <W x T> vectors. It also marks the varying values that are the parallel index plus a
 * uniform offset (linear): accesses whose last index is linear and whose other indices
 * are uniform are contiguous, one (masked) vector load or store; other varying accesses
 * are gathers and scatters.
 *
 * Math: glibc's vector math library (libmvec: _ZGV<isa>N<lanes>v_<name>) for sin, cos,
 * tan, asin, acos, atan, sinh, cosh, tanh, exp, exp2, log, log2, pow, atan2, in pieces of
 * the ISA's width; its documented accuracy is 4 ulp (docs/backend-cpu.md). Without
 * libmvec (not x86-64, or libmvec.so.1 missing) the libm function runs lane by lane.
 * sqrt, floor, ceil, round, fma, fabs are vector instructions. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llvm_simd.h"

/* ---- the host's vectors and the vector math library --------------------------------- */

/* Facts of the machine, the same for every compile: set once (pthread_once), then only
 * read, by any thread. Whether a compile uses libmvec is its own option (no_vector_math). */
static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static unsigned host_bits; /* the widest vector registers: 128, 256 or 512 */
static void *mvec_lib;     /* libmvec.so.1, or NULL */

static void host_init(void) {
    llvm_init_native();
    char *f = LLVMGetHostCPUFeatures();
    host_bits = 128;
#if defined(__x86_64__)
    if (f && strstr(f, "+avx512f"))
        host_bits = 512;
    else if (f && strstr(f, "+avx2"))
        host_bits = 256;
    mvec_lib = dlopen("libmvec.so.1", RTLD_NOW | RTLD_LOCAL);
#endif
    LLVMDisposeMessage(f);
}

bool llvm_simd_is_vector_math(const char *name) { return strncmp(name, "_ZGV", 4) == 0; }

unsigned llvm_simd_host_bits(void) {
    pthread_once(&host_once, host_init);
    return host_bits;
}

void *llvm_simd_vector_math_address(const char *name) {
    pthread_once(&host_once, host_init);
    return mvec_lib ? dlsym(mvec_lib, name) : NULL;
}

bool llvm_simd_is_math_op(ir_opcode c) { return (ir_info(c)->flags & OPF_LIBM) != 0; }

/* ---- what suits SIMD: the costs of a task, from its divergence ---------------------- */

/* An access at varying indices that is not contiguous (a gather or a scatter). */
static bool scattered(const llvm_emitter *em, const ir_op *op) {
    if (op->code != IR_LOAD && op->code != IR_STORE)
        return false;
    int rank = op->operands[0]->type->rank;
    if (!any_index_varying(em, op))
        return false;
    for (int d = 0; d + 1 < rank; d++)
        if (is_v(em, op->operands[1 + d]))
            return true;
    return !is_lin(em, op->operands[rank]);
}

/* Counts, in r and its nested regions, the scattered accesses and the varying vector
 * math ops. */
static void loop_cost(const llvm_emitter *em, const ir_region *r, int *gathers, int *math) {
    ir_foreach_op(op, r) {
        if (scattered(em, op))
            (*gathers)++;
        if (llvm_simd_is_math_op(op->code) && is_v(em, op->results[0]))
            (*math)++;
        for (uint32_t i = 0; i < op->nregions; i++)
            loop_cost(em, op->regions[i], gathers, math);
    }
}

/* A loop whose varying accesses are gathers or scatters and that computes no vector math:
 * each item walks its own elements, which the scalar path's loop vectorizer does with
 * contiguous vectors (a sum over an item's chunk, a row of 3 coordinates per item). */
static bool memory_bound_loop(const llvm_emitter *em, const ir_region *r) {
    ir_foreach_op(op, r) {
        if (op->code == IR_FOR || op->code == IR_WHILE) {
            int gathers = 0, math = 0;
            for (uint32_t i = 0; i < op->nregions; i++)
                loop_cost(em, op->regions[i], &gathers, &math);
            if (gathers > 0 && math == 0)
                return true;
        }
        for (uint32_t i = 0; i < op->nregions; i++)
            if (memory_bound_loop(em, op->regions[i]))
                return true;
    }
    return false;
}

/* Counts, in r and its nested regions, the contiguous accesses at varying indices. */
static int contiguous_accesses(const llvm_emitter *em, const ir_region *r) {
    int n = 0;
    ir_foreach_op(op, r) {
        if ((op->code == IR_LOAD || op->code == IR_STORE) && any_index_varying(em, op) &&
            !scattered(em, op))
            n++;
        for (uint32_t i = 0; i < op->nregions; i++)
            n += contiguous_accesses(em, op->regions[i]);
    }
    return n;
}

/* Whether r or a region nested in it pushes or pops an adstack. */
static bool uses_adstack(const ir_region *r) {
    ir_foreach_op(op, r) {
        if (op->code == IR_ADPUSH || op->code == IR_ADPOP)
            return true;
        for (uint32_t i = 0; i < op->nregions; i++)
            if (uses_adstack(op->regions[i]))
                return true;
    }
    return false;
}

/* A loop in r that the lanes run under a mask (masked: its trip count differs between
 * them) or alike (not masked) and, with `math`, that computes vector math. */
static bool has_loop(const llvm_emitter *em, const ir_region *r, bool masked, bool math) {
    ir_foreach_op(op, r) {
        if ((op->code == IR_FOR || op->code == IR_WHILE) && masked_loop(em, op) == masked) {
            int gathers = 0, nmath = 0;
            for (uint32_t i = 0; i < op->nregions; i++)
                loop_cost(em, op->regions[i], &gathers, &nmath);
            if (!math || nmath > 0)
                return true;
        }
        for (uint32_t i = 0; i < op->nregions; i++)
            if (has_loop(em, op->regions[i], masked, math))
                return true;
    }
    return false;
}

bool llvm_simd_sort_plan(const llvm_emitter *em, const ir_region *body, ir_trip_sort *s) {
    return !em->opts->no_trip_sort && ir_trip_sort_plan(&llvm_cpu(em)->div, body, s);
}

/* The divergence of the task (em->div, passes/divergence.c), and whether SIMD suits it
 * (*why says why not). */
static bool analyze_task(llvm_emitter *em, const ir_op *task, const char **why) {
    const ir_region *body = task->regions[0];
    ir_divergence_task(&llvm_cpu(em)->div, em->kernel, task);
    if (memory_bound_loop(em, body)) {
        *why = "a loop over each item's own elements (gathers, no vector math): the scalar "
               "loop vectorizes better";
        return false;
    }
    int gathers = 0, math = 0;
    loop_cost(em, body, &gathers, &math);
    if (math == 0 && contiguous_accesses(em, body) == 0) {
        /* a border copy dst[i, 0] = src[i, 0]: lanes would only load and store one by one
         * (and LLVM's loop vectorizer would only add a copy of the loop for a stride of 1) */
        *why = "no contiguous access and no vector math: nothing for vectors to do";
        llvm_cpu(em)->plain_loop = true;
        return false;
    }
    return true;
}

/* Straight-line bodies of at most this many ops (nested ones included) get two vectors. */
enum { SIMD_WIDE_OPS = 64 };

unsigned llvm_simd_lanes(llvm_emitter *em, const ir_op *task, const char **why) {
    pthread_once(&host_once, host_init);
    llvm_cpu(em)->plain_loop = false;
    int want = em->opts->simd;
    if (task->code != IR_PARALLEL) {
        *why = "a serial task";
        return 0;
    }
    if (want < 0) {
        *why = "SIMD is off (--simd=off or KERN_SIMD=off)";
        return 0;
    }
    if (task->attr & IR_PAR_SCALAR) {
        *why = "a pass of forward mode's atomic_min/max, whose values must equal another "
               "pass's bit for bit (vector and scalar math may differ in the last bit)";
        return 0;
    }
    if (em->opts->debug) {
        *why = "a debug build (--debug) runs on the scalar path";
        return 0;
    }
    if (!analyze_task(em, task, why))
        return 0;
    *why = NULL;
    if (want > 0)
        return (unsigned)want;
    /* auto: a loop is a serial chain per work item, and independent vectors hide its
     * latency: four vectors of the widest registers when it computes vector math (x =
     * sin(x) * w[t] + x per step), also where the trip count differs between lanes (the
     * wider vector idles longer, its last lane decides, but a vector of one register waits
     * on its math's latency every step: grad-bench's trips, K with trip counts uniform in
     * 0..T, 7.0 -> 2.6 ms at 16 lanes per register, and 6.4 -> 2.7 ms where one item in 16
     * runs 16 times longer), but not in a task with adstacks (K.grad: its per-lane
     * adstacks' gathers and scatters grow with the vector, and it gained nothing from
     * four); two for another loop that every lane runs alike; one for another masked
     * loop. A straight-line body runs about 20% faster with two
     * (fewer loop trips, more independent work), but the code LLVM compiles doubles with
     * them: two up to SIMD_WIDE_OPS ops, one above (a gradient's gather task: 200 ops). */
    const ir_region *body = task->regions[0];
    bool stacks = uses_adstack(body);
    unsigned vectors = has_loop(em, body, false, true)             ? 4
                       : has_loop(em, body, true, true) && !stacks ? 4
                       : has_loop(em, body, false, false)          ? 2
                       : has_loop(em, body, true, false)           ? 1
                       : llvm_count_ops(body) <= SIMD_WIDE_OPS     ? 2
                                                                   : 1;
    return vectors * host_bits / 32;
}

/* ---- math --------------------------------------------------------------------------- */

static const char *math_name(ir_opcode c, unsigned *nargs) {
    *nargs = 1;
    switch (c) {
    case IR_SIN: return "sin";
    case IR_COS: return "cos";
    case IR_TAN: return "tan";
    case IR_ASIN: return "asin";
    case IR_ACOS: return "acos";
    case IR_ATAN: return "atan";
    case IR_SINH: return "sinh";
    case IR_COSH: return "cosh";
    case IR_TANH: return "tanh";
    case IR_EXP: return "exp";
    case IR_EXP2: return "exp2";
    case IR_LOG: return "log";
    case IR_LOG2: return "log2";
    case IR_POW: *nargs = 2; return "pow";
    case IR_ATAN2: *nargs = 2; return "atan2";
    default: return NULL;
    }
}

/* Lanes [from, from + n) of x. */
static LLVMValueRef lanes_of(llvm_emitter *em, LLVMValueRef x, unsigned from, unsigned n) {
    LLVMValueRef idx[64];
    for (unsigned i = 0; i < n; i++)
        idx[i] = LLVMConstInt(em->t_i32, from + i, 0);
    return LLVMBuildShuffleVector(em->b, x, LLVMGetPoison(LLVMTypeOf(x)), LLVMConstVector(idx, n),
                                  "");
}

LLVMValueRef llvm_simd_math(llvm_emitter *em, const ir_op *op, LLVMValueRef *x) {
    unsigned nargs;
    const char *base = math_name(op->code, &nargs);
    if (!base)
        return NULL;
    bool f32 = op->operands[0]->type->kind == TY_F32;
    LLVMTypeRef et = f32 ? em->t_f32 : em->t_f64;
    unsigned w = em->simd_w, ebits = f32 ? 32 : 64;
    char name[64];
    /* the widest libmvec variant the host runs that is not wider than w lanes */
    static const struct {
        char isa;
        unsigned bits;
    } isas[] = {{'e', 512}, {'d', 256}, {'b', 128}};
    for (size_t i = 0; mvec_lib && !em->opts->no_vector_math && i < sizeof isas / sizeof *isas;
         i++) {
        unsigned n = isas[i].bits / ebits;
        if (isas[i].bits > host_bits || n > w || w % n)
            continue;
        snprintf(name, sizeof name, "_ZGV%cN%u%s_%s%s", isas[i].isa, n, nargs == 2 ? "vv" : "v",
                 base, f32 ? "f" : "");
        if (!dlsym(mvec_lib, name))
            continue;
        LLVMTypeRef fty;
        LLVMValueRef fn = llvm_declare_math(em, name, LLVMVectorType(et, n), nargs, &fty);
        LLVMValueRef parts[64]; /* w / n <= 64 / 2 */
        for (unsigned p = 0; p < w / n; p++) {
            LLVMValueRef a[2];
            for (unsigned j = 0; j < nargs; j++)
                a[j] = n == w ? x[j] : lanes_of(em, x[j], p * n, n);
            parts[p] = LLVMBuildCall2(em->b, fty, fn, a, nargs, "");
        }
        /* concatenate the pieces pairwise */
        for (unsigned cnt = w / n, width = n; cnt > 1; cnt /= 2, width *= 2) {
            for (unsigned p = 0; p < cnt / 2; p++) {
                LLVMValueRef idx[64];
                for (unsigned k = 0; k < 2 * width; k++)
                    idx[k] = LLVMConstInt(em->t_i32, k, 0);
                parts[p] = LLVMBuildShuffleVector(em->b, parts[2 * p], parts[2 * p + 1],
                                                  LLVMConstVector(idx, 2 * width), "");
            }
        }
        return parts[0];
    }
    /* lane by lane through libm */
    snprintf(name, sizeof name, "%s%s", base, f32 ? "f" : "");
    LLVMTypeRef fty;
    LLVMValueRef fn = llvm_declare_math(em, name, et, nargs, &fty);
    LLVMValueRef r = LLVMGetPoison(LLVMVectorType(et, w));
    for (unsigned l = 0; l < w; l++) {
        LLVMValueRef li = LLVMConstInt(em->t_i32, l, 0), a[2];
        for (unsigned j = 0; j < nargs; j++)
            a[j] = LLVMBuildExtractElement(em->b, x[j], li, "");
        r = LLVMBuildInsertElement(em->b, r, LLVMBuildCall2(em->b, fty, fn, a, nargs, ""), li, "");
    }
    return r;
}
