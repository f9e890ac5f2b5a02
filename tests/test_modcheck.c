/* test_modcheck.c - the checks a module's code passes before a loader or driver sees it
 * (runtime/gpu.h, rt_code_check; docs/runtime.md, "Loading modules safely") and the module
 * file's checksum (common/modfile.h); issue 23, "Nothing crashes the host". Suite
 * `modcheck`, without a GPU:
 *   - the pure checks on modules compiled here: untouched they pass; damaged in each way a
 *     check exists for they are refused, the message naming the kernel and the fault:
 *     SPIR-V (rt_spirv_check), PTX (rt_ptx_check), AMDGPU code objects (rt_hsaco_check);
 *   - module files loaded into a context whose device stands in for a GPU (the fake device
 *     of fake_device.c, told that it runs vulkan, cuda or amdgpu code): damaged code is
 *     KERN_ERR_FORMAT and the device's load_code is never called; 300 random byte flips
 *     over the code of a .vkmod, a .kmod and an .hsaco each are refused ("checksum
 *     mismatch"), and with the checksum made right again each is refused with a message
 *     or loads.
 * Suite `vulkan` (lavapipe in CI; skipped without a Vulkan device): the damaged
 * .vkmod files (a DescriptorSet changed to 213, which is valid SPIR-V; an enlarged word
 * count; an id past the bound) are KERN_ERR_FORMAT, and 300 byte flips (checksum made
 * right) each are refused or load: none crashes the driver. */
#include <criterion/criterion.h>
#include <elf.h>
#include <spirv/unified1/spirv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../backends/codegen.h"
#include "../backends/meta_ir.h"
#include "../backends/spirv/spv_emit.h"
#include "../common/modfile.h"
#include "../compiler/driver.h"
#include "../runtime/gpu.h"
#include "fake_device.h"
#include "test_backend.h"

/* ---- helpers ------------------------------------------------------------------------- */

static const char saxpy_src[] = "kernel saxpy(a: f32, x: f32[], y: f32[]) {\n"
                                "    for i in 0..len(x) { y[i] += a * x[i]; }\n"
                                "}\n";

/* A module compiled here: its metadata (as the compiler makes it, and as text) and code. */
typedef struct built {
    kern_meta *meta;
    kern_buf text;
    char *code;
    size_t len;
} built;

/* src compiled for target with the gradients `kernc build` makes (no K.jvp); false
 * (nothing built) when this build has no code generator for it. */
static bool build(const char *src, const char *target, built *b) {
    memset(b, 0, sizeof *b);
    const kc_codegen *cg = kc_codegen_find(target);
    if (!cg)
        return false;
    kc_ctx *cc = kc_ctx_new();
    cc->opts.grad = KC_GRAD_POSSIBLE;
    ir_module *m = kc_compile_source(cc, "t.kern", src, strlen(src));
    cr_assert(m, "the test kernel does not compile");
    char err[1024] = "";
    b->code = cg->code(m, &cc->opts, &b->len, err, sizeof err);
    cr_assert(b->code, "%s: %s", target, err);
    b->meta = kc_meta_from_ir(m);
    kern_meta_print(&b->text, b->meta);
    ir_module_free(m);
    kc_ctx_free(cc);
    return true;
}

static void built_free(built *b) {
    kern_meta_free(b->meta);
    buf_free(&b->text);
    free(b->code);
}

/* The check of `code` (len bytes, of target's kind) against b's metadata. */
static bool check(const built *b, const char *target, const void *code, size_t len, char *err,
                  size_t errlen) {
    kern_code_image img = {
        .kind = (kern_code_kind)kern_target_find(target)->code_kind, .bytes = code, .len = len};
    err[0] = '\0';
    return rt_code_check(b->meta, &img, err, errlen);
}

/* Refused, with a message holding want. */
static void expect_refused(const built *b, const char *target, const void *code, size_t len,
                           const char *what, const char *want) {
    char err[1024];
    cr_expect(!check(b, target, code, len, err, sizeof err), "%s: passed", what);
    cr_expect(strstr(err, want), "%s: '%s' lacks '%s'", what, err, want);
}

/* Loads the module file held in file (n bytes) into ctx: its status, the message in msg
 * (with the file's path replaced by FILE). */
static kern_status load_file(kern_context *ctx, const char *file, size_t n, char *msg,
                             size_t msglen) {
    char path[] = "/tmp/kern-modcheck-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, file, n), (ssize_t)n);
    close(fd);
    kern_module *m = NULL;
    kern_status s = kern_module_load_file(ctx, path, &m);
    const char *e = kern_context_last_error(ctx), *at = strstr(e, path);
    if (at)
        snprintf(msg, msglen, "%.*sFILE%s", (int)(at - e), e, at + strlen(path));
    else
        snprintf(msg, msglen, "%s", e);
    kern_module_release(m);
    unlink(path);
    return s;
}

/* The module file of b's metadata and the given code, malloc'd (*n bytes). */
static char *module_file(const built *b, const char *target, const void *code, size_t len,
                         size_t *n) {
    char *file = kern_modfile_build(target, b->text.data, b->text.len, code, len, n);
    cr_assert(file);
    return file;
}

/* Loads the module file of b's metadata and `code` into ctx (see load_file). */
static kern_status load(kern_context *ctx, const built *b, const char *target, const void *code,
                        size_t len, char *msg, size_t msglen) {
    size_t n;
    char *file = module_file(b, target, code, len, &n);
    kern_status s = load_file(ctx, file, n, msg, msglen);
    free(file);
    return s;
}

/* A context on the fake device, told that it runs target's code (its load_code counts),
 * and saxpy built for target. */
typedef struct spy {
    fake_device *f;
    rt_device_ops ops;
    kern_context *ctx;
    built b;
} spy;

/* False (nothing made) when this build has no code generator for target. */
static bool spy_open(spy *s, const char *target) {
    if (!build(saxpy_src, target, &s->b))
        return false;
    s->f = fake_device_new((fake_device_config){0});
    cr_assert(s->f);
    s->ops = *s->f->base.ops;
    s->ops.target = kern_target_find(target);
    s->f->base.ops = &s->ops;
    s->ctx = fake_context(s->f);
    cr_assert(s->ctx);
    return true;
}

static void spy_close(spy *s) {
    kern_context_release(s->ctx);
    fake_device_free(s->f);
    built_free(&s->b);
}

/* A deterministic generator of byte flips. */
static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* ---- SPIR-V -------------------------------------------------------------------------- */

/* The words of a module (a copy, aligned). */
static uint32_t *words(const built *b) {
    uint32_t *w = malloc(b->len);
    cr_assert(w);
    memcpy(w, b->code, b->len);
    return w;
}

/* The word index of the first instruction op whose word `at` is `value` (any when at is 0),
 * from word `from` on; 0 when there is none. */
static size_t find_op(const uint32_t *w, size_t n, uint32_t op, size_t at, uint32_t value,
                      size_t from) {
    for (size_t i = from > 5 ? from : 5; i < n; i += w[i] >> 16) {
        if ((w[i] >> 16) == 0)
            return 0;
        if ((w[i] & 0xffffu) == op && (at == 0 || (at < (w[i] >> 16) && w[i + at] == value)))
            return i;
    }
    return 0;
}

/* The DescriptorSet decoration of the first storage buffer: the variable's id in *var. */
static size_t first_set(const uint32_t *w, size_t n, uint32_t *var) {
    size_t i = find_op(w, n, SpvOpDecorate, 2, SpvDecorationDescriptorSet, 0);
    cr_assert(i);
    *var = w[i + 1];
    return i;
}

/* Instruction `i` takes in the words of the instruction after it: a larger word count that
 * stays inside the module (the words after it are still instructions). */
static void swallow_next(uint32_t *w, size_t i) {
    uint32_t next = w[i + (w[i] >> 16)] >> 16;
    w[i] += next << 16;
}

Test(modcheck, built_modules_pass) {
    static const char *const examples[] = {"saxpy", "heat",      "particles", "bounce",
                                           "loss",  "stencil2d", "newton",    "simulate"};
    static const char *const targets[] = {"vulkan", "cuda", "amdgpu"};
    for (size_t e = 0; e < sizeof examples / sizeof *examples; e++) {
        char path[256];
        snprintf(path, sizeof path, "%s/examples/%s.kern", KERN_SOURCE_ROOT, examples[e]);
        size_t n;
        char *src = kern_read_file(path, &n);
        cr_assert(src, "%s", path);
        for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
            built b;
            const kc_codegen *cg = kc_codegen_find(targets[t]);
            if (!cg)
                continue;
            cr_assert(build(src, targets[t], &b));
            char err[1024];
            cr_expect(check(&b, targets[t], b.code, b.len, err, sizeof err), "%s for %s: %s",
                      examples[e], targets[t], err);
            built_free(&b);
        }
        free(src);
    }
}

/* The module: one DescriptorSet 0 changed to 213 is still valid SPIR-V (spirv-val
 * passes it) and is refused, naming the kernel, the variable and the set. */
Test(modcheck, spirv_descriptor_set_213) {
    built b;
    cr_assert(build(saxpy_src, "vulkan", &b));
    uint32_t *w = words(&b), var;
    size_t n = b.len / 4, i = first_set(w, n, &var);
    w[i + 3] = 213;
    char err[1024], want[256];
    cr_assert(kc_spirv_validate(w, n, err, sizeof err), "spirv-val refuses it: %s", err);
    cr_assert(!check(&b, "vulkan", w, b.len, err, sizeof err));
    snprintf(want, sizeof want,
             "kernel 'saxpy' (entry point 'kern_saxpy__t0'): variable %%%u is in descriptor set "
             "213; kern's layout has set 0 only",
             var);
    cr_expect_str_eq(err, want);
    free(w);
    built_free(&b);
}

Test(modcheck, spirv_damage_refused) {
    built b;
    cr_assert(build(saxpy_src, "vulkan", &b));
    size_t n = b.len / 4;
    uint32_t var;
    enum { NCASES = 9 };
    for (int c = 0; c < NCASES; c++) {
        uint32_t *w = words(&b);
        const char *what = "", *want = "";
        size_t i;
        switch (c) {
        case 0: /* the binding of x (parameter 1: 6) moved to a's (a scalar: no binding) */
            i = find_op(w, n, SpvOpDecorate, 2, SpvDecorationBinding, 0);
            i = find_op(w, n, SpvOpDecorate, 3, 6, i);
            cr_assert(i && w[i + 2] == SpvDecorationBinding);
            w[i + 3] = 5;
            what = "binding of a scalar parameter";
            want = "is at binding 5, which kern's layout of the kernel lacks";
            break;
        case 1:
            i = find_op(w, n, SpvOpDecorate, 3, 6, first_set(w, n, &var));
            w[i + 3] = 40;
            what = "binding beyond the parameters";
            want = "is at binding 40, which kern's layout of the kernel lacks";
            break;
        case 2:
            i = find_op(w, n, SpvOpExecutionMode, 2, SpvExecutionModeLocalSize, 0);
            w[i + 3] = 64;
            what = "LocalSize 64";
            want = "an entry point of LocalSize 64 1 1; kern's kernels run 128 1 1";
            break;
        case 3:
            i = find_op(w, n, SpvOpEntryPoint, 0, 0, 0);
            ((char *)&w[i + 3])[10] = 'z'; /* kern_saxpy__t0 -> kern_saxpz__t0 */
            what = "an entry point renamed";
            want = "kernel 'saxpy', task 0: no entry point 'kern_saxpy__t0'";
            break;
        case 4:
            i = find_op(w, n, SpvOpDecorate, 0, 0, 0);
            w[i + 1] = w[3] + 5;
            what = "an id past the bound";
            want = "invalid SPIR-V: ";
            break;
        case 5:
            swallow_next(w, find_op(w, n, SpvOpTypePointer, 0, 0, 0));
            what = "an enlarged word count";
            want = "invalid SPIR-V: ";
            break;
        case 6:
            w[1] = 0x00010300u;
            what = "version 1.3";
            want = "SPIR-V version 1.3; kern's modules are 1.4 or later";
            break;
        case 7:
            i = first_set(w, n, &var);
            i = find_op(w, n, SpvOpVariable, 2, var, 0);
            w[i + 3] = SpvStorageClassUniform;
            what = "a storage buffer made a uniform buffer";
            want = "invalid SPIR-V: ";
            break;
        default: /* the metadata without its last kernel: an entry point of no kernel */
            b.meta->nkernels--;
            what = "an entry point no kernel names";
            want = "' is no task of a kernel of the metadata";
        }
        expect_refused(&b, "vulkan", w, b.len, what, want);
        if (c == NCASES - 1)
            b.meta->nkernels++;
        free(w);
    }
    built_free(&b);
}

/* A kernel whose work items run their own trip counts sorts each workgroup's items in
 * workgroup arrays of 256 u32 (backends/spirv/spv_emit.c, sort_group): grown to 8192, past
 * the 16 KiB kern's kernels use, the module is refused naming the kernel. */
Test(modcheck, spirv_workgroup_memory_beyond_16k_refused) {
    static const char src[] = "kernel r(x: f32[], n: i32[], w: f32[]) {\n"
                              "    for i in 0..len(x) {\n"
                              "        var v = x[i];\n"
                              "        for t in 0..n[i] { v = sin(v) * w[t]; }\n"
                              "        x[i] = v;\n"
                              "    }\n"
                              "}\n";
    built b;
    cr_assert(build(src, "vulkan", &b));
    uint32_t *w = words(&b);
    size_t n = b.len / 4, len = 0;
    for (size_t a = 0; (a = find_op(w, n, SpvOpVariable, 3, SpvStorageClassWorkgroup,
                                    a ? a + (w[a] >> 16) : 0));) {
        size_t ptr = find_op(w, n, SpvOpTypePointer, 1, w[a + 1], 0);
        size_t arr = ptr ? find_op(w, n, SpvOpTypeArray, 1, w[ptr + 3], 0) : 0;
        size_t c = arr ? find_op(w, n, SpvOpConstant, 2, w[arr + 3], 0) : 0;
        if (c && w[c + 3] == 256) {
            len = c;
            break;
        }
    }
    cr_assert(len, "no workgroup array of 256 elements in r");
    w[len + 3] = 8192;
    expect_refused(&b, "vulkan", w, b.len, "workgroup memory beyond 16 KiB",
                   "kernel 'r' (entry point 'kern_r__t0'): ");
    expect_refused(&b, "vulkan", w, b.len, "workgroup memory beyond 16 KiB",
                   " bytes of workgroup memory; kern's kernels use at most 16384");
    free(w);
    built_free(&b);
}

/* ---- PTX ----------------------------------------------------------------------------- */

/* text with the first `find` replaced by `repl`, malloc'd (*n bytes). */
static char *edit(const char *text, size_t len, const char *find, const char *repl, size_t *n) {
    const char *at = memmem(text, len, find, strlen(find));
    cr_assert(at, "'%s' is not in the code", find);
    size_t pre = (size_t)(at - text), fl = strlen(find), rl = strlen(repl);
    char *out = malloc(len - fl + rl + 1);
    cr_assert(out);
    memcpy(out, text, pre);
    memcpy(out + pre, repl, rl);
    memcpy(out + pre + rl, at + fl, len - pre - fl);
    *n = len - fl + rl;
    return out;
}

Test(modcheck, ptx_damage_refused) {
    built b;
    cr_assert(build(saxpy_src, "cuda", &b));
    static const struct {
        const char *find, *repl, *want;
    } cases[] = {
        {".version", ".versiom", "malformed PTX: it does not start with .version"},
        {".target", "// .target", "malformed PTX: .target does not follow .version"},
        {".address_size 64", ".address_size 32",
         "malformed PTX: .address_size 64 does not follow .target"},
        {"ld.param", "ld\x01param", "malformed PTX: control character 0x01 at offset "},
        {".entry kern_saxpy__t0(", ".entry kern_saxpz__t0(",
         "kernel 'saxpy', task 0: no .entry 'kern_saxpy__t0' in the PTX"},
        {",\n\t.param .u64 kern_saxpy__t0_param_7", "",
         "kernel 'saxpy', task 0: .entry 'kern_saxpy__t0' has 7 parameters; kern passes 8"},
        {".param .u64 kern_saxpy__t0_param_1", ".param .u64 kern_saxpy__t0_param_1[4]",
         "kernel 'saxpy', task 0: parameter 1 of .entry 'kern_saxpy__t0' has 32 bytes; kern "
         "passes 8"},
        {".param .f32 kern_saxpy__t0_param_0", ".param .f64 kern_saxpy__t0_param_0",
         "kernel 'saxpy', task 0: parameter 0 of .entry 'kern_saxpy__t0' has 8 bytes; kern "
         "passes 4"},
        {".param .u64 kern_saxpy__t0_param_7",
         ".param .u64 kern_saxpy__t0_param_7,\n\t.param "
         ".u64 extra",
         "kernel 'saxpy', task 0: .entry 'kern_saxpy__t0' has 9 parameters; kern passes 8"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t n;
        char *code = edit(b.code, b.len, cases[c].find, cases[c].repl, &n);
        expect_refused(&b, "cuda", code, n, cases[c].find, cases[c].want);
        free(code);
    }
    /* no entry point at all */
    static const char header[] = ".version 7.0\n.target sm_75\n.address_size 64\n";
    expect_refused(&b, "cuda", header, sizeof header - 1, "no .entry",
                   "kernel 'saxpy', task 0: no .entry 'kern_saxpy__t0' in the PTX");
    /* a NUL anywhere: cuModuleLoadDataEx would stop reading there */
    char *code = malloc(b.len);
    memcpy(code, b.code, b.len);
    code[b.len / 2] = '\0';
    char want[64];
    snprintf(want, sizeof want, "malformed PTX: a NUL byte at offset %zu", b.len / 2);
    expect_refused(&b, "cuda", code, b.len, "a NUL", want);
    free(code);
    built_free(&b);
}

/* A kernel whose adstack capacity reads an array element has a sizer entry point per such
 * adstack on the GPUs (rt_gpu_needs_sizer), which the PTX must have. */
Test(modcheck, ptx_needs_its_sizers) {
    static const char src[] = "kernel k(n: i32[], x: f32[], y: f32[]) {\n"
                              "    for i in 0..len(x) {\n"
                              "        var s = x[i];\n"
                              "        for j in 0..n[0] { s = sin(s); }\n"
                              "        y[i] = s;\n"
                              "    }\n"
                              "}\n";
    built b;
    cr_assert(build(src, "cuda", &b));
    int sizers = 0;
    for (int k = 0; k < b.meta->nkernels; k++)
        for (int s = 0; s < b.meta->kernels[k].nadstacks; s++)
            sizers += rt_gpu_needs_sizer(&b.meta->kernels[k], s);
    if (sizers == 0) {
        built_free(&b);
        cr_skip_test("the compiler sized this adstack without reading memory");
    }
    char err[1024];
    cr_assert(check(&b, "cuda", b.code, b.len, err, sizeof err), "%s", err);
    size_t n;
    char *code = edit(b.code, b.len, ".entry kern_k__grad__s0", ".entry kern_k__grad__q0", &n);
    expect_refused(&b, "cuda", code, n, "a sizer renamed",
                   "kernel 'k.grad', adstack 0's sizer: no .entry 'kern_k__grad__s0' in the PTX");
    free(code);
    built_free(&b);
}

/* ---- HSACO --------------------------------------------------------------------------- */

/* The file offset of the value of dynamic symbol `name` of an ELF image. */
static size_t elf_symbol_offset(const unsigned char *d, const char *name) {
    Elf64_Ehdr eh;
    memcpy(&eh, d, sizeof eh);
    for (int s = 0; s < eh.e_shnum; s++) {
        Elf64_Shdr sh, str;
        memcpy(&sh, d + eh.e_shoff + s * sizeof sh, sizeof sh);
        if (sh.sh_type != SHT_DYNSYM)
            continue;
        memcpy(&str, d + eh.e_shoff + sh.sh_link * sizeof str, sizeof str);
        for (size_t i = 0; i < sh.sh_size / sizeof(Elf64_Sym); i++) {
            Elf64_Sym sym;
            memcpy(&sym, d + sh.sh_offset + i * sizeof sym, sizeof sym);
            if (strcmp((const char *)d + str.sh_offset + sym.st_name, name))
                continue;
            for (int p = 0; p < eh.e_phnum; p++) {
                Elf64_Phdr ph;
                memcpy(&ph, d + eh.e_phoff + p * sizeof ph, sizeof ph);
                if (ph.p_type == PT_LOAD && sym.st_value >= ph.p_vaddr &&
                    sym.st_value < ph.p_vaddr + ph.p_filesz)
                    return ph.p_offset + (sym.st_value - ph.p_vaddr);
            }
        }
    }
    cr_assert_fail("no symbol %s", name);
    return 0;
}

Test(modcheck, hsaco_damage_refused) {
    built b;
    if (!build(saxpy_src, "amdgpu", &b))
        cr_skip_test("this build has no AMDGPU code generator (-Damdgpu=false)");
    unsigned char *d = malloc(b.len);
    cr_assert(d);
    enum { NCASES = 7 };
    for (int c = 0; c < NCASES; c++) {
        memcpy(d, b.code, b.len);
        size_t n = b.len;
        Elf64_Ehdr eh;
        memcpy(&eh, d, sizeof eh);
        const char *what = "", *want = "";
        switch (c) {
        case 0:
            n = b.len / 2;
            what = "truncated";
            want = "malformed code object: ";
            break;
        case 1:
            eh.e_machine = EM_X86_64;
            what = "another machine";
            want = "malformed code object: not an AMDGPU HSA ELF file";
            break;
        case 2:
            eh.e_shoff = b.len - 8;
            what = "section headers past the end";
            want = "malformed code object: the section headers lie outside the file";
            break;
        case 3:
            eh.e_phoff = b.len + 64;
            what = "program headers past the end";
            want = "malformed code object: the program headers lie outside the file";
            break;
        case 4: { /* every name kern_saxpy__t0.kd made kern_saxpy__t0.kx */
            for (unsigned char *p = d; (p = memmem(p, b.len - (size_t)(p - d), "__t0.kd", 7));)
                p[6] = 'x';
            what = "a kernel descriptor renamed";
            want = "kernel 'saxpy', task 0: no kernel descriptor 'kern_saxpy__t0.kd' in the code "
                   "object";
            break;
        }
        case 5: {
            int64_t far = (int64_t)1 << 40;
            memcpy(d + elf_symbol_offset(d, "kern_saxpy__t0.kd") + 16, &far, sizeof far);
            what = "a descriptor entering nowhere";
            want = "kernel 'saxpy', task 0: the kernel descriptor 'kern_saxpy__t0.kd' enters code "
                   "outside the executable segment";
            break;
        }
        default:
            b.meta->kernels[0].ntasks++; /* a task the code object lacks */
            what = "a task without a descriptor";
            want = "kernel 'saxpy', task 1: no kernel descriptor 'kern_saxpy__t1.kd'";
        }
        if (c >= 1 && c <= 3)
            memcpy(d, &eh, sizeof eh);
        expect_refused(&b, "amdgpu", d, n, what, want);
        if (c == NCASES - 1)
            b.meta->kernels[0].ntasks--;
    }
    free(d);
    built_free(&b);
}

/* ---- loading: never reaching the device ---------------------------------------------- */

/* Damaged code (behind a right checksum) is KERN_ERR_FORMAT naming the file, and the
 * device's load_code never runs; untouched code loads. */
Test(modcheck, damaged_code_never_reaches_the_device) {
    static const char *const targets[] = {"vulkan", "cuda", "amdgpu"};
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        spy s;
        if (!spy_open(&s, targets[t]))
            continue;
        const built *b = &s.b;
        char msg[1024];
        kern_status st = load(s.ctx, b, targets[t], b->code, b->len, msg, sizeof msg);
        cr_expect_eq(st, KERN_OK, "%s: %s", targets[t], msg);
        cr_expect_eq(s.f->code_loads, 1, "%s", targets[t]);
        char *bad = malloc(b->len);
        memcpy(bad, b->code, b->len);
        const char *want;
        if (!strcmp(targets[t], "vulkan")) {
            uint32_t *w = (uint32_t *)(void *)bad, var;
            w[first_set(w, b->len / 4, &var) + 3] = 213;
            want = "FILE': kernel 'saxpy' (entry point 'kern_saxpy__t0'): variable %";
        } else if (!strcmp(targets[t], "cuda")) {
            memcpy(memmem(bad, b->len, ".entry kern_saxpy__t0(", 22), ".entry kern_saxpz", 17);
            want = "FILE': kernel 'saxpy', task 0: no .entry 'kern_saxpy__t0' in the PTX";
        } else {
            for (char *p = bad; (p = memmem(p, b->len - (size_t)(p - bad), "__t0.kd", 7));)
                p[6] = 'x';
            want = "FILE': kernel 'saxpy', task 0: no kernel descriptor 'kern_saxpy__t0.kd'";
        }
        st = load(s.ctx, b, targets[t], bad, b->len, msg, sizeof msg);
        cr_expect_eq(st, KERN_ERR_FORMAT, "%s: %s: %s", targets[t], kern_status_name(st), msg);
        cr_expect(strstr(msg, want), "%s: '%s' lacks '%s'", targets[t], msg, want);
        cr_expect_eq(s.f->code_loads, 1, "%s: the damaged code reached the device", targets[t]);
        free(bad);
        spy_close(&s);
    }
}

/* flips random bytes of b's code, one at a time, and loads each into ctx: with the file's
 * checksum as written (always "checksum mismatch"), and with it made right (refused with a
 * message, or loaded). Returns how many of the latter loaded. */
static int flips(kern_context *ctx, const built *b, const char *target, int count, uint64_t seed) {
    size_t n;
    char *good = module_file(b, target, b->code, b->len, &n), *file = malloc(n), msg[1024];
    char *code = file + n - KERN_MODFILE_SUM_LEN - 1 - b->len; /* the code in the file */
    cr_assert(file && !memcmp(good + (code - file), b->code, b->len));
    int loaded = 0;
    for (int i = 0; i < count; i++) {
        memcpy(file, good, n);
        size_t at = lcg(&seed) % b->len;
        code[at] ^= (char)(1 + lcg(&seed) % 255);
        kern_status s = load_file(ctx, file, n, msg, sizeof msg);
        cr_expect_eq(s, KERN_ERR_FORMAT, "%s flip %d (byte %zu): %s", target, i, at,
                     kern_status_name(s));
        cr_expect(strstr(msg, "checksum mismatch"), "%s flip %d: %s", target, i, msg);
        /* the same code behind a right checksum: the code checks see it, or the driver
         * refuses what SPIR-V's validator accepts (a decoration on an id that its compiler
         * does not expect) with an error, never a crash */
        s = load(ctx, b, target, code, b->len, msg, sizeof msg);
        bool driver = s == KERN_ERR_DEVICE && strstr(msg, "vkCreateComputePipelines failed");
        cr_expect(s == KERN_OK || ((s == KERN_ERR_FORMAT || driver) && msg[0]),
                  "%s flip %d (byte %zu): %s: %s", target, i, at, kern_status_name(s), msg);
        loaded += s == KERN_OK;
    }
    free(good);
    free(file);
    return loaded;
}

Test(modcheck, byte_flips_never_crash) {
    static const char *const targets[] = {"vulkan", "cuda", "amdgpu"};
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        spy s;
        if (!spy_open(&s, targets[t]))
            continue;
        int loaded = flips(s.ctx, &s.b, targets[t], 300, 23 + t);
        fprintf(stderr,
                "modcheck: %s: of 300 byte flips behind a right checksum, %d passed the "
                "checks\n",
                targets[t], loaded);
        spy_close(&s);
    }
}

/* ---- on lavapipe --------------------------------------------------------------------- */

static kern_context *vulkan_or_skip(void) {
    kern_context *ctx = kern_test_vulkan_or_null();
    if (!ctx)
        cr_skip_test("no Vulkan device");
    return ctx;
}

/* The damaged .vkmod files, each behind a right checksum: KERN_ERR_FORMAT with
 * what is wrong, never a crash in the driver (a DescriptorSet of 213 crashed lavapipe in
 * vkCreateComputePipelines; an id past the bound was KERN_ERR_DEVICE). */
Test(vulkan, damaged_spirv_is_a_format_error) {
    kern_context *ctx = vulkan_or_skip();
    built b;
    cr_assert(build(saxpy_src, "vulkan", &b));
    size_t n = b.len / 4;
    char msg[1024];
    for (int c = 0; c < 3; c++) {
        uint32_t *w = words(&b), var;
        const char *want;
        char set[128];
        if (c == 0) {
            w[first_set(w, n, &var) + 3] = 213;
            snprintf(set, sizeof set,
                     "variable %%%u is in descriptor set 213; kern's layout has set 0 only", var);
            want = set;
        } else if (c == 1) {
            swallow_next(w, find_op(w, n, SpvOpTypePointer, 0, 0, 0));
            want = "invalid SPIR-V: ";
        } else {
            w[find_op(w, n, SpvOpDecorate, 0, 0, 0) + 1] = w[3] + 5;
            want = "invalid SPIR-V: ";
        }
        kern_status s = load(ctx, &b, "vulkan", w, b.len, msg, sizeof msg);
        cr_expect_eq(s, KERN_ERR_FORMAT, "case %d: %s: %s", c, kern_status_name(s), msg);
        cr_expect(strstr(msg, want) && !strncmp(msg, "'FILE': ", 8), "case %d: %s", c, msg);
        free(w);
    }
    built_free(&b);
    kern_context_release(ctx);
}

/* Without the validation layer: it holds a SPIR-V validator of its own (in CI a newer
 * SPIRV-Tools than the one kern links, which refuses a few modules kern's accepts, and
 * aborts the test under KERN_VULKAN_VALIDATION=fatal); what is tested is the driver. */
Test(vulkan, byte_flips_never_crash_the_driver) {
    setenv("KERN_VULKAN_VALIDATION", "0", 1); /* this test's process only */
    kern_context *ctx = vulkan_or_skip();
    built b;
    cr_assert(build(saxpy_src, "vulkan", &b));
    int loaded = flips(ctx, &b, "vulkan", 300, 23);
    fprintf(stderr, "vulkan: of 300 byte flips behind a right checksum, %d loaded\n", loaded);
    built_free(&b);
    kern_context_release(ctx);
}
