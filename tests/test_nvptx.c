/* test_nvptx.c - the NVPTX code generator (backends/llvm/llvm_nvptx.c, docs/gpu-abi.md)
 * without a GPU: every kernel of the examples, of the compiler's valid test programs and of
 * the gradient corpus (REAL as f32 and as f64), forward and K.grad, in release and debug
 * builds, compiles to PTX that NVIDIA's assembler accepts (`ptxas -arch=sm_90`), with one
 * entry point per task of every kernel. ptxas is looked for at $PTXAS, then
 * /usr/local/cuda/bin/ptxas, then on PATH; where there is none the ptxas tests skip and say
 * so (the PTX is still generated and checked for its entry points).
 *
 * The release pass also builds every file's AMDGPU code object (gfx90a, linked by ld.lld)
 * and checks it with llvm-readelf-19: an AMDGPU ELF for gfx90a with a kernel symbol and a
 * kernel descriptor per task; files whose builtins the AMDGPU target refuses must get the
 * error that says so.
 *
 * Also: --arch validation, the libdevice search (a clear error naming the places searched),
 * kernels without transcendental math need no libdevice, and `kernc emit --emit=ptx`. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "adds_cases.h"
#include "../common/env.h"
#include "../backends/codegen.h"
#include "../backends/llvm/llvm_backend.h"
#include "../common/util.h"
#include "../compiler/driver.h"
#include "../backends/meta_ir.h"
#include "../runtime/meta.h"
#include "golden.h"

#include <llvm/Config/llvm-config.h>

#ifndef KERN_SOURCE_ROOT
#define KERN_SOURCE_ROOT "."
#endif

extern char **environ;

static const char *find_ptxas(void) {
    static char path[4096];
    const char *env = getenv("PTXAS");
    if (env && access(env, X_OK) == 0)
        return env;
    if (access("/usr/local/cuda/bin/ptxas", X_OK) == 0)
        return "/usr/local/cuda/bin/ptxas";
    const char *p = getenv("PATH");
    while (p && *p) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        snprintf(path, sizeof path, "%.*s/ptxas", (int)n, p);
        if (n && access(path, X_OK) == 0)
            return path;
        p = e ? e + 1 : NULL;
    }
    return NULL;
}

/* Runs argv (argv[0] the program's path) with stdout and stderr into a file; returns the
 * exit status and, when out is not NULL, the output (malloc'd). */
static int run_tool(char *const *argv, char **out) {
    char log[] = "/tmp/kern-tool-XXXXXX";
    int fd = mkstemp(log);
    cr_assert(fd >= 0);
    close(fd);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int st = -1;
    if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) == 0 && waitpid(pid, &st, 0) == pid)
        st = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    posix_spawn_file_actions_destroy(&fa);
    size_t n;
    char *text = kern_read_file(log, &n);
    remove(log);
    if (out)
        *out = text ? text : calloc(1, 1);
    else
        free(text);
    return st;
}

/* Writes data to a new temporary file named like tmpl (its XXXXXX replaced). */
static void temp_write(char *tmpl, int suffix, const char *data, size_t len) {
    int fd = mkstemps(tmpl, suffix);
    cr_assert(fd >= 0);
    cr_assert(write(fd, data, len) == (ssize_t)len);
    close(fd);
}

/* Runs ptxas for arch on the PTX text; returns its exit status (its messages are printed on
 * failure). */
static int run_ptxas_arch(const char *ptxas, const char *ptx, const char *arch, const char *what) {
    char in[] = "/tmp/kern-ptx-XXXXXX.ptx", out[64], archopt[32];
    temp_write(in, 4, ptx, strlen(ptx));
    snprintf(out, sizeof out, "%s.cubin", in);
    snprintf(archopt, sizeof archopt, "-arch=%s", arch);
    char *argv[] = {(char *)ptxas, archopt, in, "-o", out, NULL};
    char *log;
    int st = run_tool(argv, &log);
    if (st != 0)
        fprintf(stderr, "ptxas rejected the PTX of %s:\n%s\n", what, log);
    free(log);
    remove(in);
    remove(out);
    return st;
}

static int run_ptxas(const char *ptxas, const char *ptx, const char *what) {
    return run_ptxas_arch(ptxas, ptx, "sm_90", what);
}

/* The AMDGPU code object of m (gfx90a): llvm-readelf-19 finds an AMDGPU ELF for that
 * target with a kernel symbol and a kernel descriptor (.kd) per task. Every builtin builds
 * (kern's own math, passes/lower_libm.c). Returns 1 when checked, 0 when it failed. */
static int check_hsaco(const char *path, const ir_module *m, kc_options *o) {
    o->arch = "gfx90a";
    char err[2048] = "";
    size_t len = 0;
    char *code = kc_codegen_find("amdgpu")->code(m, o, &len, err, sizeof err);
    o->arch = "sm_90";
    if (!code) {
        cr_expect_fail("%s: no AMDGPU code object: %s", path, err);
        return 0;
    }
    char file[] = "/tmp/kern-hsaco-XXXXXX.hsaco";
    temp_write(file, 6, code, len);
    free(code);
    char *argv[] = {
        "/usr/bin/llvm-readelf-19", "--file-header", "--symbols", "--notes", file, NULL};
    char *out;
    int st = run_tool(argv, &out);
    cr_expect_eq(st, 0, "llvm-readelf-19 on the code object of %s: %s", path, out);
    cr_expect(strstr(out, "EM_AMDGPU"), "%s: not an AMDGPU ELF:\n%.600s", path, out);
    cr_expect(strstr(out, "amdgcn-amd-amdhsa--gfx90a"), "%s: no gfx90a target note", path);
    kern_meta *meta = kc_meta_from_ir(m);
    for (int k = 0; k < meta->nkernels; k++)
        for (int t = 0; t < meta->kernels[k].ntasks; t++) {
            char sym[600], kd[640];
            kern_meta_symbol(sym, sizeof sym, meta->kernels[k].name, t, false);
            snprintf(kd, sizeof kd, "%s.kd", sym);
            cr_expect(strstr(out, kd), "%s: no kernel descriptor %s", path, kd);
            snprintf(kd, sizeof kd, "FUNC    GLOBAL PROTECTED %s", sym);
            cr_expect(strstr(out, sym), "%s: no kernel symbol %s", path, sym);
        }
    kern_meta_free(meta);
    free(out);
    remove(file);
    return 1;
}

typedef struct ptx_stats {
    int files, kernels, entries, ptxas_runs, hsacos, refused, no_libdevice;
    bool amdgpu; /* also build and check AMDGPU code objects */
} ptx_stats;

/* Compiles one source (with every gradient that can be built) to PTX, checks an entry per
 * task, and runs ptxas when there is one. */
static void check_source(const char *path, const char *text, bool debug, const char *ptxas,
                         ptx_stats *st) {
    kc_ctx *cc = kc_ctx_new();
    cc->opts.grad = KC_GRAD_POSSIBLE;
    cc->opts.debug = debug;
    cc->opts.arch = "sm_90";
    ir_module *m = kc_compile_source(cc, path, text, strlen(text));
    if (!m) {
        diag_print_all(stderr, &cc->diags);
        cr_assert_fail("%s does not compile", path);
    }
    char err[2048] = "";
    char *ptx = llvm_emit_ptx(m, &cc->opts, err, sizeof err);
    if (!ptx && strstr(err, "libdevice not found")) { /* a machine without CUDA's libdevice */
        st->no_libdevice++;
        ir_module_free(m);
        kc_ctx_free(cc);
        return;
    }
    cr_assert(ptx, "%s: %s", path, err);
    kern_meta *meta = kc_meta_from_ir(m);
    for (int k = 0; k < meta->nkernels; k++) {
        st->kernels++;
        for (int t = 0; t < meta->kernels[k].ntasks; t++) {
            char sym[600], entry[640];
            kern_meta_symbol(sym, sizeof sym, meta->kernels[k].name, t, false);
            snprintf(entry, sizeof entry, ".entry %s(", sym);
            cr_expect(strstr(ptx, entry), "%s: no entry point %s in the PTX", path, sym);
            st->entries++;
        }
    }
    kern_meta_free(meta);
    if (ptxas) {
        char what[4200];
        snprintf(what, sizeof what, "%s (%s)", path, debug ? "debug" : "release");
        cr_expect_eq(run_ptxas(ptxas, ptx, what), 0, "ptxas rejected %s", what);
        st->ptxas_runs++;
    }
    if (st->amdgpu) {
        if (check_hsaco(path, m, &cc->opts))
            st->hsacos++;
        else
            st->refused++;
    }
    st->files++;
    free(ptx);
    ir_module_free(m);
    kc_ctx_free(cc);
}

static void check_dir(const char *dir, const char *type, bool debug, const char *ptxas,
                      ptx_stats *st) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", KERN_SOURCE_ROOT, dir);
    DIR *d = opendir(path);
    cr_assert(d, "cannot open %s", path);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".kern") != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s/%s", KERN_SOURCE_ROOT, dir, e->d_name);
        size_t len;
        char *text = kern_read_file(path, &len);
        cr_assert(text, "cannot read %s", path);
        char *src = type ? golden_with_type(text, type) : text;
        check_source(path, src, debug, ptxas, st);
        if (src != text)
            free(src);
        free(text);
    }
    closedir(d);
}

static void corpus(bool debug) {
    const char *ptxas = find_ptxas();
    if (!ptxas)
        fprintf(stderr, "nvptx: no ptxas ($PTXAS, /usr/local/cuda/bin, PATH): PTX is generated "
                        "and checked for its entry points, not assembled\n");
    ptx_stats st = {.amdgpu = !debug && kc_codegen_find("amdgpu") &&
                              access("/usr/bin/llvm-readelf-19", X_OK) == 0};
    check_dir("examples", NULL, debug, ptxas, &st);
    check_dir("tests/golden/ir", NULL, debug, ptxas, &st);
    check_dir("tests/golden/passes", NULL, debug, ptxas, &st);
    check_dir("tests/grad", debug ? "f32" : "f64", debug, ptxas, &st);
    cr_log_info("nvptx: %d files, %d kernels, %d entry points, %d ptxas runs; amdgpu: %d code "
                "objects checked, %d failed",
                st.files, st.kernels, st.entries, st.ptxas_runs, st.hsacos, st.refused);
    if (st.amdgpu) /* every file, its math too */
        cr_assert(st.hsacos > 70 && st.refused == 0, "%d code objects, %d failed", st.hsacos,
                  st.refused);
    cr_assert_gt(st.files + st.no_libdevice, 70);
    cr_assert_gt(st.entries, st.kernels); /* gradients included: more tasks than kernels */
    if (!ptxas)
        cr_skip_test("no ptxas on this machine: the PTX was not assembled");
    if (st.no_libdevice)
        cr_skip_test("no libdevice on this machine: %d files with transcendental math were not "
                     "compiled (the others were)",
                     st.no_libdevice);
}

Test(nvptx, corpus_release_ptxas_accepts) { corpus(false); }
Test(nvptx, corpus_debug_ptxas_accepts) { corpus(true); }

static ir_module *compile(kc_ctx *cc, const char *src) {
    ir_module *m = kc_compile_source(cc, "t.kern", src, strlen(src));
    if (!m)
        diag_print_all(stderr, &cc->diags);
    cr_assert(m);
    return m;
}

Test(nvptx, arch_validation) {
    cr_expect(llvm_nvptx_arch_valid("sm_90"));
    cr_expect(llvm_nvptx_arch_valid("sm_90a"));
    cr_expect(llvm_nvptx_arch_valid("sm_70"));
    cr_expect(llvm_nvptx_arch_valid("sm_50"));
    cr_expect(!llvm_nvptx_arch_valid("sm_"));
    cr_expect(!llvm_nvptx_arch_valid("sm_9x"));
    cr_expect(!llvm_nvptx_arch_valid("gfx90a"));
    cr_expect(!llvm_nvptx_arch_valid("sm_a"));
    cr_expect(!llvm_nvptx_arch_valid(NULL));
    cr_expect(!llvm_nvptx_arch_valid(""));
    /* names LLVM 19 does not know, and those below what kern's code needs */
    static const char *const unknown[] = {"sm_99",  "sm_100", "sm_100a", "sm_91",
                                          "sm_89a", "sm_20",  "sm_37",   "sm_90, sm_99"};
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++)
        cr_expect(!llvm_nvptx_arch_valid(unknown[i]), "%s", unknown[i]);
    cr_expect(kern_target_arch_valid(&kern_target_cuda, kern_target_cuda.default_arch));
#ifdef KERN_HAVE_AMDGPU
    cr_expect(llvm_amdgpu_arch_valid("gfx90a") && llvm_amdgpu_arch_valid("gfx1201") &&
              llvm_amdgpu_arch_valid("gfx700"));
    static const char *const unknown_amd[] = {"gfx9999",      "gfx000", "gfx90b", "gfx600",
                                              "gfx9-generic", "tahiti", "gfx",    "sm_90"};
    for (size_t i = 0; i < sizeof unknown_amd / sizeof *unknown_amd; i++)
        cr_expect(!llvm_amdgpu_arch_valid(unknown_amd[i]), "%s", unknown_amd[i]);
    cr_expect(kern_target_arch_valid(&kern_target_amdgpu, kern_target_amdgpu.default_arch));
#endif
    kc_ctx *cc = kc_ctx_new();
    ir_module *m = compile(cc, "kernel k(a: f32[]) { for i in 0..len(a) { a[i] = 1.0; } }");
    cc->opts.arch = "sm_9x";
    char err[512] = "";
    cr_expect_null(llvm_emit_ptx(m, &cc->opts, err, sizeof err));
    cr_expect(strstr(err, "unknown CUDA architecture 'sm_9x'"), "%s", err);
    cc->opts.arch = "sm_99"; /* LLVM warned and went on, to an abort for some kernels */
    cr_expect_null(llvm_emit_ptx(m, &cc->opts, err, sizeof err));
    cr_expect(strstr(err, "unknown CUDA architecture 'sm_99' (this kern compiles for sm_50, "),
              "%s", err);
    cc->opts.arch = NULL;
    char *ptx = llvm_emit_ptx(m, &cc->opts, err, sizeof err);
    cr_assert(ptx, "%s", err);
    char want[64];
    snprintf(want, sizeof want, ".target %s", kern_target_cuda.default_arch);
    cr_expect(strstr(ptx, want), "%s", want);
    free(ptx);
    ir_module_free(m);
    kc_ctx_free(cc);
}

/* Every architecture kern accepts can take every intrinsic the backend emits (warp
 * shuffles and votes of the combined atomics, f64 atomics): the PTX of a gradient with
 * shared adjoints, for the oldest and the newest architectures, is assembled. */
Test(nvptx, every_arch_takes_the_gradient_code) {
    char *list = strdup(kern_target_cuda.arches), *archs[32];
    size_t narchs = 0;
    for (char *a = strtok(list, ", "); a && narchs < 32; a = strtok(NULL, ", "))
        archs[narchs++] = a;
    cr_assert_geq(narchs, 15);
    const char *ptxas = find_ptxas();
    for (size_t i = 0; i < narchs; i++) {
        kc_ctx *cc = kc_ctx_new();
        cc->opts.grad = KC_GRAD_POSSIBLE;
        ir_module *m = compile(cc, "kernel k(x: f32[], w: f32[], d: f64[], out: f32[]) {\n"
                                   "  for i in 0..len(x) {\n"
                                   "    var v = x[i];\n"
                                   "    for t in 0..len(w) { v = v * w[t] + f32(d[t]); }\n"
                                   "    out[i] = v;\n"
                                   "  }\n"
                                   "}\n");
        cc->opts.arch = archs[i];
        char err[1024] = "";
        char *ptx = llvm_emit_ptx(m, &cc->opts, err, sizeof err);
        cr_assert(ptx, "%s: %s", archs[i], err);
        cr_expect(strstr(ptx, "shfl.sync.bfly"), "%s: no combined atomics", archs[i]);
        if (ptxas && strcmp(archs[i], "sm_75") >= 0) { /* CUDA 13's ptxas: sm_75 on */
            char what[64];
            snprintf(what, sizeof what, "the gradient for %s", archs[i]);
            cr_expect_eq(run_ptxas_arch(ptxas, ptx, archs[i], what), 0);
        }
        free(ptx);
        ir_module_free(m);
        kc_ctx_free(cc);
    }
    free(list);
    if (!ptxas)
        cr_skip_test("no ptxas on this machine: the PTX was not assembled");
}

/* A combined adjoint add whose index the divergence analysis finds uniform (w.grad[t] in
 * a one-dimensional task) skips comparing the lanes' addresses; one at a per-item index
 * (w.grad[j[i]]) keeps the comparison (shuffles of the address, a vote). */
Test(nvptx, uniform_adjoint_adds_skip_the_address_vote) {
    const adds_case *cases = adds_cases;
    size_t ncases = sizeof adds_cases / sizeof *adds_cases;
    for (size_t i = 0; i < ncases; i++) {
        kc_ctx *cc = kc_ctx_new();
        cc->opts.grad = KC_GRAD_POSSIBLE;
        ir_module *m = compile(cc, cases[i].src);
        char err[1024] = "";
        char *ptx = llvm_emit_ptx(m, &cc->opts, err, sizeof err);
        cr_assert(ptx, "case %zu: %s", i, err);
        char *grad = strstr(ptx, ".entry kern_k__grad__t0");
        cr_assert(grad, "case %zu: no k.grad entry point", i);
        char *next = strstr(grad + 1, ".entry "); /* a sizer's reduction votes */
        if (next)
            *next = 0;
        cr_expect(strstr(grad, "shfl.sync.bfly"), "case %zu: the adds are not combined", i);
        cr_expect_eq(strstr(grad, "shfl.sync.idx") != NULL, cases[i].vote,
                     "case %zu: address comparison %s", i, cases[i].vote ? "missing" : "kept");
        cr_expect_eq(strstr(grad, "vote.sync.all") != NULL, cases[i].vote, "case %zu: vote", i);
        free(ptx);
        ir_module_free(m);
        kc_ctx_free(cc);
    }
}

/* Checked CUDA code tests each work item's accesses whose ranges are known at its start
 * once (x0[i], w[t] of a loop with uniform bounds, out[i]): the item is emitted twice,
 * behind one branch; unchecked code has no such test. The run on the GPU: suite
 * `checked` with KERN_TEST_BACKEND=cuda. */
Test(nvptx, checked_items_test_their_ranges_once) {
    const char *src = "kernel k(x0: f32[], w: f32[], out: f32[]) {\n"
                      "  for i in 0..len(x0) { var x = x0[i];\n"
                      "    for t in 0..len(w) { x = 0.5 * sin(x) * w[t] + 0.4 * x; }\n"
                      "    out[i] = x; } }\n";
    for (int checks = 0; checks < 2; checks++) {
        kc_ctx *cc = kc_ctx_new();
        cc->opts.checks = checks;
        ir_module *m = compile(cc, src);
        char err[1024] = "";
        char *ir = llvm_emit_nvptx_ir(m, &cc->opts, err, sizeof err);
        cr_assert(ir, "%s", err);
        cr_expect_eq(strstr(ir, "chunk.unchecked") != NULL, checks, "checks %d", checks);
        cr_expect_eq(strstr(ir, "chunk.checked") != NULL, checks, "checks %d", checks);
        free(ir);
        ir_module_free(m);
        kc_ctx_free(cc);
    }
    /* a loop bound read from an array: the loop tests w[t] before it instead */
    const char *ragged = "kernel k(x0: f32[], w: f32[], n: i32[], out: f32[]) {\n"
                         "  for i in 0..len(x0) { var x = x0[i];\n"
                         "    for t in 0..n[i] { x = 0.5 * sin(x) * w[t] + 0.4 * x; }\n"
                         "    out[i] = x; } }\n";
    kc_ctx *cc = kc_ctx_new();
    cc->opts.checks = true;
    cc->opts.opt_level = 0; /* the blocks keep their names */
    ir_module *m = compile(cc, ragged);
    char err[1024] = "";
    char *ir = llvm_emit_nvptx_ir(m, &cc->opts, err, sizeof err);
    cr_assert(ir, "%s", err);
    cr_expect(strstr(ir, "loop.unchecked") && strstr(ir, "loop.checked"),
              "the ragged loop's w[t] is tested before the loop");
    free(ir);
    ir_module_free(m);
    kc_ctx_free(cc);
}

/* The number of times s occurs in text. */
static int occurrences(const char *text, const char *s) {
    int n = 0;
    for (const char *p = strstr(text, s); p; p = strstr(p + 1, s))
        n++;
    return n;
}

/* Whether the PTX of entry name holds `.maxnreg 32` (between its name and its body). */
static bool capped(const char *ptx, const char *name) {
    const char *e = strstr(ptx, name), *body = e ? strchr(e, '{') : NULL;
    cr_assert(body, "no entry %s", name);
    const char *m = strstr(e, ".maxnreg 32");
    return m && m < body;
}

/* The pushes and pops of an innermost for loop of K.grad (or a while loop whose condition
 * bounds a counter: k < 10) are tested once before it against
 * the depth and the capacity, in every build (--no-checks too): the loop is emitted twice,
 * and the blocks of the per-push and per-pop tests (ad.overflow, ad.popped) are in the
 * checked copy only. The forward sweep's pushes and the reverse sweep's pops, with a bound
 * of len(w), and with a bound read from n[i] (an aligned reverse loop: its pops under
 * `if r >= N - n`, counted over the iterations that `if` allows). Kernels whose loops are
 * such small tested loops have their registers capped at full occupancy; a while loop's
 * kernel and a loop-free one keep theirs. The numbers on the GPU: the corpus and
 * adstack_rt with KERN_TEST_BACKEND=cuda. */
Test(nvptx, adstack_loops_test_the_capacity_once) {
    static const char *const loops[2] = {
        "kernel k(x0: f32[], w: f32[], out: f32[]) {\n"
        "  for i in 0..len(x0) { var x = x0[i];\n"
        "    for t in 0..len(w) { x = 0.5 * sin(x) * w[t] + 0.4 * x; }\n"
        "    out[i] = x; } }\n",
        "kernel k(x0: f32[], w: f32[], n: i32[], out: f32[]) {\n"
        "  for i in 0..len(x0) { var x = x0[i];\n"
        "    for t in 0..n[i] { x = 0.5 * sin(x) * w[t] + 0.4 * x; }\n"
        "    out[i] = x; } }\n",
    };
    for (int i = 0; i < 2; i++) {
        for (int checks = 0; checks < 2; checks++) {
            kc_ctx *cc = kc_ctx_new();
            cc->opts.grad = KC_GRAD_POSSIBLE;
            cc->opts.checks = checks;
            cc->opts.opt_level = 0; /* the blocks keep their names */
            ir_module *m = compile(cc, loops[i]);
            char err[1024] = "";
            char *text = llvm_emit_nvptx_ir(m, &cc->opts, err, sizeof err);
            cr_assert(text, "%s", err);
            /* K.grad's function alone (the module has the variants of other strategies) */
            char *ir = strstr(text, "define void @kern_k__grad__t0(");
            cr_assert(ir, "loop %d: no K.grad", i);
            char *end = strstr(ir, "\ndefine ");
            if (end)
                *end = 0;
            /* checked code: also the item's checked copy (chunk.checked), untested */
            int copies = 1 + (checks && strstr(ir, "chunk.checked"));
            cr_expect_geq(occurrences(ir, "\nloop.unchecked"), 2, "loop %d checks %d", i, checks);
            cr_expect_eq(occurrences(ir, "\nad.overflow"), copies, "loop %d checks %d: pushes", i,
                         checks);
            cr_expect_eq(occurrences(ir, "\nad.popped"), copies, "loop %d checks %d: pops", i,
                         checks);
            free(text);
            char *ptx = llvm_emit_ptx(m, &cc->opts, err, sizeof err);
            cr_assert(ptx, "%s", err);
            cr_expect(capped(ptx, ".entry kern_k__grad__t0"), "loop %d checks %d: registers", i,
                      checks);
            free(ptx);
            ir_module_free(m);
            kc_ctx_free(cc);
        }
    }
    static const char *const uncapped[2] = {
        "kernel k(x0: f32[], out: f32[]) {\n"
        "  for i in 0..len(x0) { var x = x0[i]; var k = 0;\n"
        "    while k < 10 && x > 0.1 { x = 0.5 * sin(x) + 0.3 * x; k += 1; }\n"
        "    out[i] = x; } }\n",
        "kernel k(x: f32[], w: f32[], out: f32[]) {\n"
        "  for i in 0..len(x) { out[i] = sin(x[i]) * w[i % len(w)]; } }\n",
    };
    for (int i = 0; i < 2; i++) {
        kc_ctx *cc = kc_ctx_new();
        cc->opts.grad = KC_GRAD_POSSIBLE;
        ir_module *m = compile(cc, uncapped[i]);
        char err[1024] = "";
        char *ptx = llvm_emit_ptx(m, &cc->opts, err, sizeof err);
        cr_assert(ptx, "%s", err);
        cr_expect(!capped(ptx, ".entry kern_k__grad__t0"), "kernel %d: registers capped", i);
        free(ptx);
        if (i == 0) { /* the while loop's counter bounds its pushes: tested all the same */
            cc->opts.opt_level = 0;
            cc->opts.checks = false;
            char *ir = llvm_emit_nvptx_ir(m, &cc->opts, err, sizeof err);
            cr_assert(ir, "%s", err);
            char *g = strstr(ir, "define void @kern_k__grad__t0(");
            cr_assert(g, "no K.grad");
            char *end = strstr(g, "\ndefine ");
            if (end)
                *end = 0;
            cr_expect_eq(occurrences(g, "\nwhile.before"), 2, "the while loop's two copies");
            cr_expect_eq(occurrences(g, "\nad.overflow"), 1, "the pushes' tests");
            free(ir);
        }
        ir_module_free(m);
        kc_ctx_free(cc);
    }
}

/* sin and cos of one argument share libdevice's sincos: K.grad of x = sin(x) w[t] pops x
 * and takes sin x and cos x (one argument reduction instead of two), f32 and f64, the
 * fast-math variant too; a lone sin stays sin, and sin and cos of different arguments stay
 * apart. Checked code emits the reverse loop more than once (tested and checked copies):
 * each copy makes its own call. */
Test(nvptx, sin_and_cos_of_one_argument_share_sincos) {
    const struct {
        const char *type;
        bool fast;
        const char *sincos, *sin, *cos;
    } cases[] = {
        {"f32", false, "call void @__nv_sincosf(", "call float @__nv_sinf(",
         "call float @__nv_cosf("},
        {"f32", true, "call void @__nv_fast_sincosf(", "call float @__nv_fast_sinf(",
         "call float @__nv_fast_cosf("},
        {"f64", false, "call void @__nv_sincos(", "call double @__nv_sin(",
         "call double @__nv_cos("},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int checks = 0; checks < 2; checks++) {
            char src[512];
            snprintf(src, sizeof src,
                     "kernel k(x0: %s[], w: %s[], out: %s[]) {\n"
                     "  for i in 0..len(x0) { var x = x0[i];\n"
                     "    for t in 0..len(w) { x = sin(x) * w[t]; }\n"
                     "    out[i] = x; } }\n"
                     "kernel f(x0: %s[], y: %s[]) {\n"
                     "  for i in 0..len(x0) { y[i] = sin(x0[i]) + cos(2.0 * x0[i]); } }\n",
                     cases[i].type, cases[i].type, cases[i].type, cases[i].type, cases[i].type);
            kc_ctx *cc = kc_ctx_new();
            cc->opts.grad = KC_GRAD_POSSIBLE;
            cc->opts.fast_math = cases[i].fast;
            cc->opts.checks = checks;
            ir_module *m = compile(cc, src);
            char *ir = llvm_emit_nvptx_own_ir(m, &cc->opts);
            char *fwd = strstr(ir, "define void @kern_k__t0(");
            char *grad = strstr(ir, "define void @kern_k__grad__t0(");
            char *other = strstr(ir, "define void @kern_f__t0(");
            cr_assert(fwd && grad && other, "case %zu: entry points", i);
            for (char *d = strstr(ir, "\ndefine "); d; d = strstr(d + 1, "\ndefine "))
                *d = 0; /* one function per string */
            /* the forward: a lone sin in the loop; sin(x0) and cos(2 x0) apart */
            cr_expect(!strstr(fwd, cases[i].sincos) && strstr(fwd, cases[i].sin), "case %zu", i);
            cr_expect(!strstr(other, cases[i].sincos) && strstr(other, cases[i].sin) &&
                          strstr(other, cases[i].cos),
                      "case %zu", i);
            /* K.grad: its reverse sweep takes sin and cos of the popped x in one call (per
               copy of the loop) and no cos of its own; the forward sweep keeps its sin */
            cr_expect(occurrences(grad, cases[i].sincos) >= 1, "case %zu checks %d: %s", i, checks,
                      cases[i].sincos);
            cr_expect_eq(occurrences(grad, cases[i].cos), 0, "case %zu checks %d", i, checks);
            cr_expect(occurrences(grad, cases[i].sin) >= 1, "case %zu: the forward sweep's", i);
            free(ir);
            ir_module_free(m);
            kc_ctx_free(cc);
        }
    /* -O0 keeps duplicates (no CSE): sin, cos, sin of one argument in one region make one
       call, whose results the later two take (this emitted a use of an unset value) */
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char src[512];
        snprintf(src, sizeof src,
                 "kernel g(x0: %s[], y: %s[]) {\n"
                 "  for i in 0..len(y) { let a = x0[i]; var s = sin(a);\n"
                 "    if a > 0.0 { s = 2.0 * s; }\n"
                 "    y[i] = s + cos(a) * sin(a); } }\n",
                 cases[i].type, cases[i].type);
        kc_ctx *cc = kc_ctx_new();
        cc->opts.opt_level = 0;
        cc->opts.fast_math = cases[i].fast;
        ir_module *m = compile(cc, src);
        char *ir = llvm_emit_nvptx_own_ir(m, &cc->opts);
        cr_expect_eq(occurrences(ir, cases[i].sincos), 1, "case %zu: one sincos", i);
        cr_expect(!strstr(ir, cases[i].sin) && !strstr(ir, cases[i].cos), "case %zu", i);
        free(ir);
        ir_module_free(m);
        kc_ctx_free(cc);
    }
}

/* --fast-math lets a * b + c become one fma on CUDA and AMDGPU (as nvcc does by default, and
 * as a Vulkan driver may without NoContraction); kern's default keeps IEEE operations, one
 * rounding each (the CPU's results, and kern's own math relies on them). */
Test(nvptx, fast_math_contracts_mul_add) {
    const char *src = "kernel k(a: f32[], b: f32[], c: f64[], y: f32[], z: f64[]) {\n"
                      "  for i in 0..len(y) { y[i] = a[i] * b[i] + 0.5;\n"
                      "    z[i] = c[i] * c[i] - 1.0; } }\n";
    for (int fast = 0; fast < 2; fast++) {
        kc_ctx *cc = kc_ctx_new();
        cc->opts.fast_math = fast;
        ir_module *m = compile(cc, src);
        char err[1024] = "";
        char *ptx = llvm_emit_ptx(m, &cc->opts, err, sizeof err);
        cr_assert(ptx, "%s", err);
        cr_expect_eq(strstr(ptx, "fma.rn.f32") != NULL, fast, "fast %d: f32 fma", fast);
        cr_expect_eq(strstr(ptx, "fma.rn.f64") != NULL, fast, "fast %d: f64 fma", fast);
        cr_expect_eq(strstr(ptx, "mul.rn.f32") != NULL, !fast, "fast %d: f32 mul", fast);
        free(ptx);
#ifdef KERN_HAVE_AMDGPU /* AMDGPU alike (gfx90a's v_fma_f32 / v_fma_f64) */
        char *gcn = llvm_emit_amdgcn(m, &cc->opts, err, sizeof err);
        cr_assert(gcn, "%s", err);
        cr_expect_eq(strstr(gcn, "v_fma_f32") != NULL, fast, "fast %d: AMDGPU f32 fma", fast);
        cr_expect_eq(strstr(gcn, "v_fma_f64") != NULL, fast, "fast %d: AMDGPU f64 fma", fast);
        cr_expect_eq(strstr(gcn, "v_mul_f32") != NULL, !fast, "fast %d: AMDGPU f32 mul", fast);
        free(gcn);
#endif
        ir_module_free(m);
        kc_ctx_free(cc);
    }
}

#ifdef KERN_HAVE_AMDGPU
/* AMDGPU's lanemax (the trip count of K.grad's aligned reverse loops) is the largest count
 * over the wavefront's active lanes: llvm.amdgcn.wave.reduce.umax, which gfx90a runs as a
 * loop over the exec mask (s_ff1, v_readlane, s_max_u32), for i32, i64 (two halves) and
 * u32 counts; without it every lane ran its own count (no s_max_u32 anywhere). */
Test(nvptx, amdgpu_lanemax_is_a_wave_reduction) {
    static const char *const types[] = {"i32", "i64", "u32"};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        char src[512];
        snprintf(src, sizeof src,
                 "kernel r(x: f32[], n: %s[], w: f32[], out: f32[]) {\n"
                 "  for i in 0..len(x) { var v = x[i];\n"
                 "    for t in 0..n[i] { v = sin(v) * w[t]; }\n"
                 "    out[i] = v; } }\n",
                 types[i]);
        kc_ctx *cc = kc_ctx_new();
        cc->opts.grad = KC_GRAD_POSSIBLE;
        ir_module *m = compile(cc, src);
        char err[1024] = "";
        char *gcn = llvm_emit_amdgcn(m, &cc->opts, err, sizeof err);
        cr_assert(gcn, "%s: %s", types[i], err);
        const char *g = strstr(gcn, "kern_r__grad__t0:");
        cr_assert(g, "%s: no r.grad", types[i]);
        cr_expect(strstr(g, "s_max_u32") && strstr(g, "v_readlane_b32") && strstr(g, "s_ff1"),
                  "%s: r.grad has no wave reduction", types[i]);
        const char *f = strstr(gcn, "kern_r__t0:");
        cr_assert(f && f < g, "%s: r's entry point before r.grad's", types[i]);
        cr_expect(!memmem(f, (size_t)(g - f), "s_max_u32", 9), "%s: r has a reduction", types[i]);
        free(gcn);
        ir_module_free(m);
        kc_ctx_free(cc);
    }
}
#endif

/* The processors `llc -mcpu=help` lists for triple, as " name name ... " (malloc'd), or
 * NULL where there is no llc-19. */
static char *llc_processors(const char *triple) {
    const char *llc = "/usr/lib/llvm-19/bin/llc";
    if (access(llc, X_OK) != 0)
        return NULL;
    char opt[64];
    snprintf(opt, sizeof opt, "-mtriple=%s", triple);
    char *argv[] = {(char *)llc, opt, "-mcpu=help", NULL}, *out;
    cr_assert_eq(run_tool(argv, &out), 0, "%s", out);
    kern_buf names = {0};
    buf_putc(&names, ' ');
    const char *p = strstr(out, "Available CPUs for this target:");
    const char *end = p ? strstr(p, "Available features") : NULL;
    cr_assert(p && end, "%s", out);
    for (p = strchr(p, '\n'); p && p < end; p = strchr(p + 1, '\n')) {
        const char *w = p + 1 + strspn(p + 1, " ");
        size_t n = strcspn(w, " \n");
        if (n && w < end)
            buf_printf(&names, "%.*s ", (int)n, w);
    }
    free(out);
    return buf_take(&names);
}

/* Checks a target's architectures against LLVM's processors: each one is a processor LLVM
 * knows, and each processor LLVM knows is one of them or left out for a reason (keep). */
static void arches_match_llvm(const kern_target *t, const char *triple,
                              bool (*left_out)(const char *)) {
    char *llvm = llc_processors(triple);
    if (!llvm)
        return;
    char *list = strdup(t->arches);
    for (char *a = strtok(list, ", "); a; a = strtok(NULL, ", ")) {
        char word[64];
        snprintf(word, sizeof word, " %s ", a);
        cr_expect(strstr(llvm, word), "%s: LLVM 19 has no processor '%s' (it has:%s)", t->name, a,
                  llvm);
    }
    free(list);
    for (char *w = strtok(llvm, " "); w; w = strtok(NULL, " "))
        cr_expect(kern_target_arch_valid(t, w) || left_out(w),
                  "%s: LLVM 19's processor '%s' is not in common/target.c's list", t->name, w);
    free(llvm);
}

static bool nvptx_left_out(const char *p) { return atoi(p + 3) < 50; } /* below sm_50 */

static bool amdgpu_left_out(const char *p) {
    return strncmp(p, "gfx", 3) != 0 || strchr(p, '-') || !strncmp(p, "gfx6", 4);
}

/* --arch takes the processors LLVM 19 knows (common/target.c): `kernc build --arch=sm_99`
 * made LLVM warn six times, write `.target sm_99` PTX of ISA 6.0 and, for some kernels,
 * abort in instruction selection; gfx9999 aborted (issue 23). The lists are checked against
 * `llc -mcpu=help` where llc-19 is installed. */
Test(nvptx, arches_are_llvm_processors) {
#if LLVM_VERSION_MAJOR == 19
    arches_match_llvm(&kern_target_cuda, "nvptx64-nvidia-cuda", nvptx_left_out);
#ifdef KERN_HAVE_AMDGPU
    arches_match_llvm(&kern_target_amdgpu, "amdgcn-amd-amdhsa", amdgpu_left_out);
#endif
    if (access("/usr/lib/llvm-19/bin/llc", X_OK) != 0)
        cr_skip_test("no /usr/lib/llvm-19/bin/llc: the lists were not compared");
#else
    cr_skip_test("the architecture lists are LLVM 19's; this is LLVM %d", LLVM_VERSION_MAJOR);
#endif
}

Test(nvptx, libdevice_missing_is_a_clear_error) {
    kc_ctx *cc = kc_ctx_new();
    ir_module *m = compile(cc, "kernel k(a: f32[]) { for i in 0..len(a) { a[i] = sin(a[i]); } }");
    cc->opts.libdevice = "/nonexistent/libdevice.10.bc";
    char err[1024] = "";
    cr_expect_null(llvm_emit_ptx(m, &cc->opts, err, sizeof err));
    cr_expect(strstr(err, "libdevice not found") && strstr(err, "/nonexistent/libdevice.10.bc"),
              "%s", err);
    ir_module_free(m);
    /* no transcendental math: no libdevice needed, even when it is missing */
    m = compile(cc, "kernel k(a: f32[]) { for i in 0..len(a) { a[i] = sqrt(a[i]) * 2.0; } }");
    char *ptx = llvm_emit_ptx(m, &cc->opts, err, sizeof err);
    cr_expect(ptx, "%s", err);
    free(ptx);
    ir_module_free(m);
    kc_ctx_free(cc);
}

/* A file that is not bitcode, or damaged bitcode, given as libdevice: an error naming the
 * file and what LLVM found, and the process goes on (LLVM's own diagnostic handler printed
 * "error: ..." and called exit(1) inside the library, issue 23). */
Test(nvptx, damaged_libdevice_is_an_error_not_an_exit) {
    kc_ctx *cc = kc_ctx_new();
    ir_module *m = compile(cc, "kernel k(a: f32[]) { for i in 0..len(a) { a[i] = sin(a[i]); } }");
    char empty[] = "/tmp/kern-libdevice-XXXXXX", junk[] = "/tmp/kern-libdevice-XXXXXX";
    temp_write(empty, 0, "", 0);
    /* the bitcode magic, then words that no bitcode stream holds */
    const char bad[] = "BC\xc0\xde\xff\xff\xff\xff\x01\x02\x03\x04\xff\xff\xff\xff";
    temp_write(junk, 0, bad, sizeof bad - 1);
    const char *paths[] = {empty, junk};
    for (int i = 0; i < 2; i++) {
        cc->opts.libdevice = paths[i];
        char err[1024] = "";
        cr_expect_null(llvm_emit_ptx(m, &cc->opts, err, sizeof err));
        cr_expect(strstr(err, "is not a valid LLVM bitcode file") && strstr(err, paths[i]), "%s",
                  err);
        unlink(paths[i]);
    }
    ir_module_free(m);
    kc_ctx_free(cc);
}

Test(nvptx, libdevice_search_names_the_places) {
    const char *old = getenv("KERN_LIBDEVICE");
    char *saved = old ? strdup(old) : NULL;
    setenv("KERN_LIBDEVICE", "/nowhere/ld.bc", 1);
    kc_ctx *cc = kc_ctx_new();
    kc_options_from_env(&cc->opts); /* what kernc and the JIT do at their boundary */
    ir_module *m = compile(cc, "kernel k(a: f64[]) { for i in 0..len(a) { a[i] = exp(a[i]); } }");
    char err[1024] = "";
    cr_expect_null(llvm_emit_ptx(m, &cc->opts, err, sizeof err));
    cr_expect(strstr(err, "/nowhere/ld.bc") && strstr(err, "KERN_LIBDEVICE"), "%s", err);
    if (saved) {
        setenv("KERN_LIBDEVICE", saved, 1);
        free(saved);
    } else {
        unsetenv("KERN_LIBDEVICE");
    }
    ir_module_free(m);
    kc_ctx_free(cc);
}

Test(nvptx, codegen_table) {
    const kc_codegen *cpu = kc_codegen_find("cpu"), *cuda = kc_codegen_find("cuda");
    cr_assert(cpu && cuda);
    cr_expect_null(kc_codegen_find("metal"));
    cr_expect_eq(kc_codegen_find("vulkan")->t, &kern_target_vulkan);
    cr_expect_null(kc_codegen_find(NULL));
    cr_expect_null(cpu->code);
    cr_expect(cpu->object);
    cr_expect(cuda->code && cuda->arch_valid);
    cr_expect_eq(kc_codegen_for_backend(cuda->t->backend), cuda);
    char names[128];
    cr_expect_str_eq(kc_codegen_targets(names, sizeof names),
                     kc_codegen_find("amdgpu") ? "cpu, cuda, vulkan, amdgpu" : "cpu, cuda, vulkan");
}

/* The target registry (common/target.h): every lookup agrees with the entries, emit kinds
 * are matched as words, and the tables keyed by it cover what they must. */
Test(nvptx, target_registry) {
    size_t n;
    const kern_target *const *t = kern_target_list(&n);
    cr_assert_eq(n, 5);
    for (size_t i = 0; i < n; i++) {
        cr_expect_eq(kern_target_find(t[i]->name), t[i], "%s", t[i]->name);
        cr_expect_eq(kern_target_of_backend(t[i]->backend), t[i], "%s", t[i]->name);
        cr_expect_str_eq(kern_backend_name(t[i]->backend), t[i]->name);
        if (t[i]->code_kind != KERN_CODE_NONE)
            cr_expect_eq(kern_target_of_code(t[i]->code_kind), t[i], "%s", t[i]->name);
        /* a target whose device the runtime has must be one the JIT compiles for */
        if (t[i]->caps & KERN_TARGET_DEVICE)
            cr_expect(kc_codegen_for_backend(t[i]->backend), "%s has no codegen", t[i]->name);
        /* DLPack needs a DLPack device type */
        cr_expect_eq(!!(t[i]->caps & KERN_TARGET_DLPACK), t[i]->dlpack_device != 0, "%s",
                     t[i]->name);
    }
    cr_expect_null(kern_target_find("CPU"));
    cr_expect_null(kern_target_of_backend((kern_backend)5));
    cr_expect_null(kern_target_of_code(KERN_CODE_NONE));
    cr_expect_eq(kern_target_of_emit("llvm"), &kern_target_cpu);
    cr_expect_eq(kern_target_of_emit("ptx"), &kern_target_cuda);
    cr_expect_eq(kern_target_of_emit("amdgcn"), &kern_target_amdgpu);
    cr_expect_eq(kern_target_of_emit("spirv-asm"), &kern_target_vulkan);
    cr_expect_eq(kern_target_of_emit("msl"), &kern_target_vulkan);
    /* words, not substrings: "asm" is no kind (it once matched inside "spirv-asm") */
    cr_expect_null(kern_target_of_emit("asm"));
    cr_expect_null(kern_target_of_emit("spirv-"));
    cr_expect_null(kern_target_of_emit(""));
    cr_expect(kern_target_list_has("spirv, spirv-asm, msl", "spirv"));
    cr_expect(!kern_target_list_has("spirv, spirv-asm, msl", "spir"));
    char names[128];
    cr_expect_str_eq(kern_target_names(0, names, sizeof names), "cpu, cuda, amdgpu, vulkan, metal");
    cr_expect_str_eq(kern_target_names(KERN_TARGET_DEVICE, names, sizeof names),
                     "cpu, cuda, vulkan");
    cr_expect_str_eq(kern_target_names(KERN_TARGET_DLPACK, names, sizeof names), "cpu, cuda");
    cr_expect_str_eq(kern_target_names(0, names, 8), "cpu, cu"); /* truncated, terminated */
}

/* The metadata carries each parallel task's extents (what the CUDA device sizes its grid
 * from), and `?` where the range cannot be expressed on the host. */
Test(nvptx, metadata_extents) {
    kc_ctx *cc = kc_ctx_new();
    ir_module *m = compile(cc, "kernel k(a: f32[,], n: i32) {\n"
                               "  for i in 0..shape(a, 0), j in 1..n { a[i, j] = 1.0; }\n"
                               "  for i in 0..i32(f32(n) * 0.5) { a[0, i] = 2.0; }\n"
                               "  a[0, 0] = 3.0;\n"
                               "}\n");
    kern_meta *meta = kc_meta_from_ir(m);
    cr_assert_eq(meta->nkernels, 1);
    const kern_meta_kernel *k = &meta->kernels[0];
    cr_assert_eq(k->ntasks, 3);
    cr_expect_str_eq(k->tasks[0].extent[0], "(dim 0 0)");
    cr_expect_str_eq(k->tasks[0].extent[1], "(max 0 (sub (param 1) 1))");
    cr_expect_null(k->tasks[1].extent[0]);
    cr_expect_null(k->tasks[2].extent[0]); /* serial */
    kern_buf text = {0};
    kern_meta_print(&text, meta);
    cr_expect(strstr(text.data, "task parallel 1 3 3 spread\ntask serial"), "%s", text.data);
    buf_free(&text);
    kern_meta_free(meta);
    ir_module_free(m);
    kc_ctx_free(cc);
}

/* Work items sorted by trip count (passes/trip_sort.c): a task whose loop runs n[i] steps
 * sorts each block's items in shared memory (its array kern.sort.order, which PTX spells
 * kern_$_sort_$_order, and its barriers), K and
 * K.grad alike; with no_trip_sort, and for a loop of len(w) steps, it does not. The
 * results: e2e/items_sorted_* with KERN_TEST_BACKEND=cuda on the GPU machine. */
Test(nvptx, blocks_sort_their_items_by_trip_count) {
    static const struct {
        const char *src;
        bool sorts;
    } cases[] = {
        {"kernel k(x0: f32[], w: f32[], n: i32[], out: f32[]) {\n"
         "  for i in 0..len(x0) { var x = x0[i];\n"
         "    for t in 0..n[i] { x = 0.5 * sin(x) * w[t] + 0.4 * x; }\n"
         "    out[i] = x; } }\n",
         true},
        {"kernel k(x0: f32[], w: f32[], out: f32[]) {\n"
         "  for i in 0..len(x0) { var x = x0[i];\n"
         "    for t in 0..len(w) { x = 0.5 * sin(x) * w[t] + 0.4 * x; }\n"
         "    out[i] = x; } }\n",
         false},
    };
    for (int c = 0; c < 2; c++) {
        for (int off = 0; off < 2; off++) {
            kc_ctx *cc = kc_ctx_new();
            cc->opts.grad = KC_GRAD_POSSIBLE;
            cc->opts.no_trip_sort = off;
            ir_module *m = compile(cc, cases[c].src);
            char err[1024] = "";
            char *ptx = llvm_emit_ptx(m, &cc->opts, err, sizeof err);
            cr_assert(ptx, "%s", err);
            bool want = cases[c].sorts && !off;
            for (int g = 0; g < 2; g++) {
                const char *e = strstr(ptx, g ? ".entry kern_k__grad__t0" : ".entry kern_k__t0");
                cr_assert(e, "case %d: no entry %d", c, g);
                const char *next = strstr(e + 1, ".entry");
                size_t len = next ? (size_t)(next - e) : strlen(e);
                char *body = strndup(e, len);
                cr_expect_eq(strstr(body, "kern_$_sort_$_order") != NULL, want,
                             "case %d, no_trip_sort %d, %s", c, off, g ? "K.grad" : "K");
                int bars = occurrences(body, "bar.sync");
                cr_expect_eq(bars >= 5, want, "case %d, no_trip_sort %d, %s: %d barriers", c, off,
                             g ? "K.grad" : "K", bars);
                free(body);
            }
            free(ptx);
            ir_module_free(m);
            kc_ctx_free(cc);
        }
    }
}

/* An innermost for loop around libdevice's sinf is unrolled four times on NVPTX (the
 * forward of gpu-bench's loop ran 20% faster than at LLVM's choice of two); not with fast
 * math (sin.approx), not a loop without math, not a loop holding a loop, not on the CPU. */
Test(nvptx, math_loops_unroll_four_times) {
    static const struct {
        const char *src;
        bool fast, unrolled;
    } cases[] = {
        {"kernel k(x: f32[], w: f32[]) { for i in 0..len(x) { var v = x[i];\n"
         "  for t in 0..len(w) { v = sin(v) * w[t]; } x[i] = v; } }\n",
         false, true},
        {"kernel k(x: f32[], w: f32[]) { for i in 0..len(x) { var v = x[i];\n"
         "  for t in 0..len(w) { v = sin(v) * w[t]; } x[i] = v; } }\n",
         true, false},
        {"kernel k(x: f32[], w: f32[]) { for i in 0..len(x) { var v = x[i];\n"
         "  for t in 0..len(w) { v = v * w[t] + 1.0; } x[i] = v; } }\n",
         false, false},
        {"kernel k(x: f32[], w: f32[]) { for i in 0..len(x) { var v = x[i];\n"
         "  for s in 0..2 { for t in 0..len(w) { v = v * w[t]; } v = sin(v); } x[i] = v; } }\n",
         false, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        kc_ctx *cc = kc_ctx_new();
        cc->opts.fast_math = cases[c].fast;
        cc->opts.opt_level = 0; /* the metadata as emitted */
        ir_module *m = compile(cc, cases[c].src);
        char err[1024] = "";
        char *ir = llvm_emit_nvptx_ir(m, &cc->opts, err, sizeof err);
        cr_assert(ir, "%s", err);
        bool has = strstr(ir, "!\"llvm.loop.unroll.count\", i32 4") != NULL;
        cr_expect_eq(has, cases[c].unrolled, "case %zu", c);
        free(ir);
        if (c == 0) {
            char *cpu = llvm_emit_text(m, &cc->opts, err, sizeof err);
            cr_assert(cpu, "%s", err);
            cr_expect(!strstr(cpu, "llvm.loop.unroll.count"), "the CPU keeps LLVM's choice");
            free(cpu);
        }
        ir_module_free(m);
        kc_ctx_free(cc);
    }
}

/* Counts the lines of text that hold both a and b. */
static int lines_with(const char *text, const char *a, const char *b) {
    int n = 0;
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char *line = strndup(l, len);
        n += strstr(line, a) && strstr(line, b);
        free(line);
        l = e ? e + 1 : NULL;
    }
    return n;
}

/* Block copies (llvm_gpu.c): an array gets one where its adds may meet: inside a loop of
 * the task (loop.grad's w.grad[t]), at an element uniform over the warp (a sum into s[0]),
 * at a data-dependent one (a histogram's h[b[i]]); not where each item adds once at an
 * index that differs in every thread of a warp (h[i + 3], kepler.grad's w.grad[i %
 * len(w)], x.grad[i] after a loop). A two-dimensional task (no divergence analysis) keeps
 * them. */
Test(nvptx, block_copies_only_where_adds_meet) {
    static const struct {
        const char *src, *entry;
        int copies;
    } cases[] = {
        {"kernel k(x: f32[], h: f32[], b: i32[]) { for i in 0..len(x) { h[b[i]] += x[i]; } }\n",
         "@kern_k__t0(", 1},
        {"kernel k(x: f32[], h: f32[]) { for i in 0..len(x) { h[i + 3] += x[i]; } }\n",
         "@kern_k__t0(", 0},
        {"kernel k(x: f32[], h: f32[]) { for i in 0..len(x) { h[i % len(h)] += x[i]; } }\n",
         "@kern_k__t0(", 0},
        {"kernel k(x: f32[], h: f32[]) { for i in 0..len(x) { h[(i * 7) % len(h)] += x[i]; } }\n",
         "@kern_k__t0(", 1},
        {"kernel k(x: f32[], s: f32[]) { for i in 0..len(x) { s[0] += x[i] * x[i]; } }\n",
         "@kern_k__t0(", 1},
        {"kernel k(x: f32[,], s: f32[]) { for i in 0..shape(x, 0), j in 0..shape(x, 1) {\n"
         "  s[0] += x[i, j]; } }\n",
         "@kern_k__t0(", 1},
        {"kernel k(x: f32[], h: f32[]) { for i in 0..len(x) {\n"
         "  for t in 0..len(h) { h[t] += x[i]; } } }\n",
         "@kern_k__t0(", 1},
        /* w.grad added into after the while loop (none), x.grad (x[i] read in it) inside */
        {"kernel k(x: f32[], w: f32[], out: f32[]) { for i in 0..len(x) {\n"
         "  let e = 0.6 * w[i % len(w)]; var v = x[i]; var n = 0;\n"
         "  while n < 8 { v = x[i] + e * sin(v); n += 1; } out[i] = v; } }\n",
         "@kern_k__grad__t0(", 1},
        /* w.grad in the reverse loop, x.grad after it (none) */
        {"kernel k(x: f32[], w: f32[], out: f32[]) { for i in 0..len(x) { var v = x[i];\n"
         "  for t in 0..len(w) { v = sin(v) * w[t]; } out[i] = v; } }\n",
         "@kern_k__grad__t0(", 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        kc_ctx *cc = kc_ctx_new();
        cc->opts.opt_level = 0; /* the names as emitted */
        cc->opts.grad = KC_GRAD_POSSIBLE;
        ir_module *m = compile(cc, cases[c].src);
        char err[1024] = "";
        char *ir = llvm_emit_nvptx_ir(m, &cc->opts, err, sizeof err);
        cr_assert(ir, "%s", err);
        const char *at = strstr(ir, cases[c].entry);
        cr_assert(at, "case %zu: no entry point %s", c, cases[c].entry);
        const char *end = strstr(at, "\n}\n");
        cr_assert(end);
        char *fn = strndup(at, (size_t)(end - at));
        cr_expect_eq(lines_with(fn, "%blk.fits", "= icmp ule"), cases[c].copies, "case %zu", c);
        free(fn);
        free(ir);
        ir_module_free(m);
        kc_ctx_free(cc);
    }
}

/* The metadata's `spread` (a thread per work item on the GPUs): a parallel task that adds
 * no floats into arrays has it; one that does (a histogram, K.grad's w.grad, which the
 * GPUs may sum per block) and a serial task do not. */
Test(nvptx, tasks_that_add_floats_are_not_spread) {
    static const char src[] = "kernel k(x: f32[], w: f32[], h: f32[], b: i32[], out: f32[]) {\n"
                              "  for i in 0..len(x) { out[i] = sin(x[i]) * w[i % len(w)]; }\n"
                              "  for i in 0..len(x) { h[b[i]] += x[i]; }\n"
                              "  out[0] = 1.0; }\n";
    kc_ctx *cc = kc_ctx_new();
    cc->opts.grad = KC_GRAD_POSSIBLE;
    ir_module *m = compile(cc, src);
    kern_meta *meta = kc_meta_from_ir(m);
    const kern_meta_kernel *k = kern_meta_find(meta, "k"), *g = kern_meta_find(meta, "k.grad");
    cr_assert(k && g);
    cr_assert_eq(k->ntasks, 3);
    cr_expect(k->tasks[0].spread, "elementwise: spread");
    cr_expect(!k->tasks[1].spread, "a histogram adds floats: not spread");
    cr_expect(!k->tasks[2].spread, "serial");
    bool adds = false;
    for (int t = 0; t < g->ntasks; t++)
        adds |= g->tasks[t].parallel && !g->tasks[t].spread;
    cr_expect(adds, "K.grad adds into w.grad: some task not spread");
    kern_meta_free(meta);
    ir_module_free(m);
    kc_ctx_free(cc);
}
