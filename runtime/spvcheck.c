/* spvcheck.c - the check of a SPIR-V module before the Vulkan driver sees it (gpu.h,
 * rt_spirv_check; docs/runtime.md, "Loading modules safely").
 *
 * A driver trusts its SPIR-V: a module that is valid SPIR-V but whose variable sits in a
 * descriptor set the pipeline layout lacks crashes lavapipe inside
 * vkCreateComputePipelines. So a module is checked in two steps, once per load:
 *   1. SPIRV-Tools' validator, in the emitter's environment (SPV_ENV_VULKAN_1_2, default
 *      options): every instruction lies inside the module, every id is below the bound
 *      and defined before use, the types and decorations make sense, and (SPIR-V 1.4 and
 *      later, required here) each entry point's interface lists every global variable its
 *      functions use.
 *   2. kern's own layout (docs/spirv-abi.md): only the capabilities, extensions and
 *      instruction sets kern's emitter uses; `Logical GLSL450`; every entry point is a
 *      task of a kernel of the metadata (kern_meta_symbol), GLCompute, with `LocalSize
 *      128 1 1` and no other execution mode; no specialization constants or decoration
 *      groups; a WorkgroupSize built-in only as the constant 128 1 1; global variables
 *      only storage buffers (one struct each, descriptor set 0), built-in inputs,
 *      workgroup and private memory; each entry point's storage buffers at bindings of its
 *      kernel's layout (rt_spirv_binding_in_layout, which vk_get_kernel builds the layout
 *      from) and at most 16 KiB of workgroup memory (what Vulkan guarantees, and the most
 *      the emitter uses).
 * What passes makes the driver see the layout kern creates; it may still be a program
 * that computes nonsense (a module is code: load only modules you trust). */
#include <spirv/unified1/spirv.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/spvblock.h"
#include "../common/spvtools.h"
#include "gpu.h"

enum { WORKGROUP_BYTES = 16384 };

enum { HAS_SET = 1, HAS_BINDING = 2, HAS_BUILTIN = 4 };

/* What the walk learns of an id. */
typedef struct spv_id {
    uint32_t def;                   /* word index of the instruction defining it (0: none) */
    uint32_t set, binding, builtin; /* its decorations' values, where `has` says */
    uint32_t size;                  /* a type: its size in bytes, saturated at UINT32_MAX */
    unsigned has;                   /* HAS_*: the decorations it has */
} spv_id;

typedef struct spv_entry {
    const char *name;
    uint32_t iface, niface; /* its interface: words iface .. iface + niface - 1 */
    bool used;              /* a task of the metadata is this entry point */
} spv_entry;

typedef struct spv_check {
    const uint32_t *w;
    size_t n;
    uint32_t bound;
    spv_id *ids; /* bound of them */
    spv_id none; /* what an id at or past the bound reads and writes (never, once valid) */
    spv_entry *entries;
    size_t nentries;
    uint32_t *vars; /* the global variables */
    size_t nvars;
    char *err;
    size_t errlen;
} spv_check;

__attribute__((format(printf, 2, 3))) static bool fail(spv_check *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    return false;
}

static spv_id *id_of(spv_check *c, uint32_t id) {
    if (id < c->bound)
        return &c->ids[id];
    memset(&c->none, 0, sizeof c->none);
    return &c->none;
}

/* The opcode of the instruction that defines id (0: none). */
static uint32_t def_op(spv_check *c, uint32_t id) {
    uint32_t d = id_of(c, id)->def;
    return d ? c->w[d] & 0xffffu : 0;
}

static uint32_t sat_add(uint32_t a, uint32_t b) { return a > UINT32_MAX - b ? UINT32_MAX : a + b; }
static uint32_t sat_mul(uint64_t a, uint64_t b) {
    return a && b > UINT32_MAX / a ? UINT32_MAX : (uint32_t)(a * b);
}

/* The capabilities kern's emitter declares: Shader and the device features of vk_code.c's
 * vk_features table, which load_code checks against the device. */
static bool known_capability(uint32_t cap) {
    static const uint32_t caps[] = {
        SpvCapabilityShader,
        SpvCapabilityFloat64,
        SpvCapabilityInt64,
        SpvCapabilityInt64Atomics,
        SpvCapabilityInt16,
        SpvCapabilityInt8,
        SpvCapabilityGroupNonUniform,
        SpvCapabilityGroupNonUniformVote,
        SpvCapabilityGroupNonUniformArithmetic,
        SpvCapabilityStorageBuffer16BitAccess,
        SpvCapabilityStorageBuffer8BitAccess,
        SpvCapabilityAtomicFloat32AddEXT,
        SpvCapabilitySignedZeroInfNanPreserve, /* the float controls (spv_emit.c), which */
        SpvCapabilityDenormPreserve,           /* vk_code.c drops where the device lacks them */
    };
    for (size_t i = 0; i < sizeof caps / sizeof *caps; i++)
        if (caps[i] == cap)
            return true;
    return false;
}

static bool known_extension(const char *name) {
    return !strcmp(name, "SPV_KHR_8bit_storage") || !strcmp(name, "SPV_KHR_16bit_storage") ||
           !strcmp(name, "SPV_EXT_shader_atomic_float_add");
}

/* The literal string at word i of an instruction ending before word end (NULL when it does
 * not end inside it); *words gets the words it takes. */
static const char *string_at(const spv_check *c, size_t i, size_t end, size_t *words) {
    if (i >= end)
        return NULL;
    const char *s = (const char *)&c->w[i];
    size_t max = (end - i) * 4, len = strnlen(s, max);
    if (len == max)
        return NULL;
    *words = len / 4 + 1;
    return s;
}

/* The value of the 32- or 64-bit integer constant id (false when it is none). */
static bool constant(spv_check *c, uint32_t id, uint64_t *v) {
    if (def_op(c, id) != SpvOpConstant)
        return false;
    uint32_t d = id_of(c, id)->def;
    uint32_t len = c->w[d] >> 16;
    *v = len >= 4 ? c->w[d + 3] : 0;
    if (len >= 5)
        *v |= (uint64_t)c->w[d + 4] << 32;
    return len == 4 || len == 5;
}

/* A type's size in bytes from the sizes of the types it is made of (defined before it). */
static uint32_t type_size(spv_check *c, size_t i, uint32_t op, uint32_t len) {
    const uint32_t *w = c->w;
#define SIZE(id) ((id) < c->bound ? c->ids[id].size : UINT32_MAX)
    uint64_t count;
    switch (op) {
    case SpvOpTypeBool: return 4;
    case SpvOpTypeInt:
    case SpvOpTypeFloat: return len >= 3 ? w[i + 2] / 8 : UINT32_MAX;
    case SpvOpTypeVector:
    case SpvOpTypeMatrix: return len >= 4 ? sat_mul(SIZE(w[i + 2]), w[i + 3]) : UINT32_MAX;
    case SpvOpTypeArray:
        if (len < 4 || !constant(c, w[i + 3], &count))
            return UINT32_MAX;
        return sat_mul(SIZE(w[i + 2]), count);
    case SpvOpTypeStruct: {
        uint32_t s = 0;
        for (uint32_t m = 2; m < len; m++)
            s = sat_add(s, SIZE(w[i + m]));
        return s;
    }
    case SpvOpTypePointer: return 8;
    default: return UINT32_MAX; /* runtime arrays, opaque types: never in workgroup memory */
    }
#undef SIZE
}

static bool decorate(spv_check *c, size_t i, uint32_t len) {
    uint32_t id = c->w[i + 1], dec = c->w[i + 2];
    static const struct {
        uint32_t dec;
        unsigned has;
        const char *name;
    } kept[] = {{SpvDecorationDescriptorSet, HAS_SET, "DescriptorSet"},
                {SpvDecorationBinding, HAS_BINDING, "Binding"},
                {SpvDecorationBuiltIn, HAS_BUILTIN, "BuiltIn"}};
    spv_id *x = id_of(c, id);
    for (size_t k = 0; k < sizeof kept / sizeof *kept; k++) {
        if (kept[k].dec != dec || len < 4)
            continue;
        if (x->has & kept[k].has)
            return fail(c, "%%%u has two %s decorations", id, kept[k].name);
        x->has |= kept[k].has;
        *(k == 0 ? &x->set : k == 1 ? &x->binding : &x->builtin) = c->w[i + 3];
    }
    return true;
}

/* Walks the module once: the module-level rules, and what the later checks need. The
 * module is valid (validate) by now; the length checks keep the walk inside each
 * instruction all the same. */
static bool walk(spv_check *c) {
    const uint32_t *w = c->w;
    bool in_function = false;
    for (size_t i = 5; i < c->n;) {
        uint32_t len = w[i] >> 16, op = w[i] & 0xffffu;
        if (len == 0 || len > c->n - i)
            return fail(c, "an instruction at word %zu overruns the module", i);
        size_t end = i + len, sl = 0;
        const char *s;
        switch (op) {
        case SpvOpCapability:
            if (len == 2 && !known_capability(w[i + 1]))
                return fail(c, "the module declares capability %u, which kern's emitter never does",
                            w[i + 1]);
            break;
        case SpvOpExtension:
            if (!(s = string_at(c, i + 1, end, &sl)) || !known_extension(s))
                return fail(c, "the module uses extension '%.64s', which kern's emitter never does",
                            s ? s : "?");
            break;
        case SpvOpExtInstImport:
            if (!(s = string_at(c, i + 2, end, &sl)) || strcmp(s, "GLSL.std.450"))
                return fail(c,
                            "the module imports instruction set '%.64s'; kern's emitter imports "
                            "GLSL.std.450 only",
                            s ? s : "?");
            break;
        case SpvOpMemoryModel:
            if (len != 3 || w[i + 1] != SpvAddressingModelLogical ||
                w[i + 2] != SpvMemoryModelGLSL450)
                return fail(c, "the module's memory model is not Logical GLSL450");
            break;
        case SpvOpEntryPoint: {
            if (len < 4 || !(s = string_at(c, i + 3, end, &sl)))
                return fail(c, "a malformed OpEntryPoint at word %zu", i);
            if (w[i + 1] != SpvExecutionModelGLCompute)
                return fail(c, "entry point '%.200s' is not GLCompute", s);
            spv_entry *e = &c->entries[c->nentries++];
            *e = (spv_entry){s, (uint32_t)(i + 3 + sl), (uint32_t)(len - 3 - sl), false};
            break;
        }
        case SpvOpExecutionMode:
            if (len < 3)
                return fail(c, "a malformed OpExecutionMode at word %zu", i);
            if (w[i + 2] == SpvExecutionModeSignedZeroInfNanPreserve ||
                w[i + 2] == SpvExecutionModeDenormPreserve) {
                if (len != 4 || (w[i + 3] != 32 && w[i + 3] != 64))
                    return fail(c, "a float-control execution mode of width %u",
                                len > 3 ? w[i + 3] : 0);
                break;
            }
            if (w[i + 2] != SpvExecutionModeLocalSize)
                return fail(c,
                            "the module uses execution mode %u; kern's kernels have LocalSize "
                            "and the float controls only",
                            w[i + 2]);
            if (len != 6 || w[i + 3] != KERN_SPV_GROUP || w[i + 4] != 1 || w[i + 5] != 1)
                return fail(c, "an entry point of LocalSize %u %u %u; kern's kernels run %d 1 1",
                            len > 3 ? w[i + 3] : 0, len > 4 ? w[i + 4] : 0, len > 5 ? w[i + 5] : 0,
                            KERN_SPV_GROUP);
            break;
        case SpvOpExecutionModeId:
            return fail(c,
                        "the module sets an execution mode by id, which kern's emitter never does");
        case SpvOpDecorate:
            if (len < 3)
                return fail(c, "a malformed OpDecorate at word %zu", i);
            if (!decorate(c, i, len))
                return false;
            break;
        case SpvOpDecorationGroup:
        case SpvOpGroupDecorate:
        case SpvOpGroupMemberDecorate:
            return fail(c, "the module uses decoration groups, which kern's emitter never does");
        case SpvOpSpecConstantTrue:
        case SpvOpSpecConstantFalse:
        case SpvOpSpecConstant:
        case SpvOpSpecConstantComposite:
        case SpvOpSpecConstantOp:
            return fail(
                c, "the module uses specialization constants, which kern's emitter never does");
        case SpvOpConstant:
        case SpvOpConstantComposite:
            if (len >= 3)
                id_of(c, w[i + 2])->def = (uint32_t)i;
            break;
        case SpvOpVariable:
            if (in_function)
                break;
            if (len < 4)
                return fail(c, "a malformed OpVariable at word %zu", i);
            id_of(c, w[i + 2])->def = (uint32_t)i;
            if (w[i + 3] != SpvStorageClassStorageBuffer && w[i + 3] != SpvStorageClassInput &&
                w[i + 3] != SpvStorageClassWorkgroup && w[i + 3] != SpvStorageClassPrivate)
                return fail(c,
                            "variable %%%u of storage class %u; kern's layout has storage "
                            "buffers, built-in inputs, workgroup and private memory only",
                            w[i + 2], w[i + 3]);
            c->vars[c->nvars++] = w[i + 2];
            break;
        case SpvOpFunction: in_function = true; break;
        default:
            if (op >= SpvOpTypeVoid && op <= SpvOpTypePipe && len >= 2) { /* id in word 1 */
                uint32_t size = type_size(c, i, op, len);
                id_of(c, w[i + 1])->def = (uint32_t)i;
                id_of(c, w[i + 1])->size = size;
            }
        }
        i = end;
    }
    return true;
}

/* The type a global variable points to (its OpTypePointer's pointee; 0: none). */
static uint32_t pointee(spv_check *c, uint32_t var) {
    uint32_t ptr = c->w[id_of(c, var)->def + 1];
    if (def_op(c, ptr) != SpvOpTypePointer || (c->w[id_of(c, ptr)->def] >> 16) != 4)
        return 0;
    return c->w[id_of(c, ptr)->def + 3];
}

/* The storage class of global variable var. */
static uint32_t storage(spv_check *c, uint32_t var) { return c->w[id_of(c, var)->def + 3]; }

/* Where a storage buffer is not in set 0, says so (with `who`, naming the kernel or not). */
static bool in_set0(spv_check *c, uint32_t var, const char *who) {
    const spv_id *x = id_of(c, var);
    if (!(x->has & HAS_SET))
        return fail(c, "%svariable %%%u has no DescriptorSet", who, var);
    if (x->set != 0)
        return fail(c, "%svariable %%%u is in descriptor set %u; kern's layout has set 0 only", who,
                    var, x->set);
    return true;
}

/* Storage buffers in set 0, each one struct; inputs built-ins; a WorkgroupSize only 128 1 1. */
static bool check_variables(spv_check *c) {
    for (size_t v = 0; v < c->nvars; v++) {
        uint32_t id = c->vars[v], sc = storage(c, id);
        if (sc == SpvStorageClassInput && !(id_of(c, id)->has & HAS_BUILTIN))
            return fail(c, "variable %%%u is an input that is not a built-in", id);
        if (sc != SpvStorageClassStorageBuffer)
            continue;
        if (!in_set0(c, id, ""))
            return false;
        if (def_op(c, pointee(c, id)) != SpvOpTypeStruct)
            return fail(c, "variable %%%u is not one buffer (kern binds one buffer per binding)",
                        id);
    }
    for (uint32_t id = 1; id < c->bound; id++) {
        if (!(c->ids[id].has & HAS_BUILTIN) || c->ids[id].builtin != SpvBuiltInWorkgroupSize)
            continue;
        uint32_t d = c->ids[id].def;
        uint64_t x = 0, y = 0, z = 0;
        if (def_op(c, id) != SpvOpConstantComposite || (c->w[d] >> 16) != 6 ||
            !constant(c, c->w[d + 3], &x) || !constant(c, c->w[d + 4], &y) ||
            !constant(c, c->w[d + 5], &z) || x != KERN_SPV_GROUP || y != 1 || z != 1)
            return fail(c, "a WorkgroupSize other than the constant %d 1 1", KERN_SPV_GROUP);
    }
    return true;
}

/* Entry point e is task `sym` of kernel mk: its storage buffers at bindings of mk's
 * layout, at most WORKGROUP_BYTES of workgroup memory. */
static bool check_entry(spv_check *c, spv_entry *e, const kern_meta_kernel *mk) {
    char who[1400];
    snprintf(who, sizeof who, "kernel '%s' (entry point '%s'): ", mk->name, e->name);
    uint32_t shared = 0;
    e->used = true;
    for (uint32_t k = 0; k < e->niface; k++) {
        uint32_t id = c->w[e->iface + k];
        if (def_op(c, id) != SpvOpVariable)
            return fail(c, "%sinterface %%%u is no global variable", who, id);
        uint32_t sc = storage(c, id);
        const spv_id *x = id_of(c, id);
        if (sc == SpvStorageClassStorageBuffer && !in_set0(c, id, who))
            return false;
        if (sc == SpvStorageClassStorageBuffer && !(x->has & HAS_BINDING))
            return fail(c, "%svariable %%%u has no Binding", who, id);
        if (sc == SpvStorageClassStorageBuffer && !rt_spirv_binding_in_layout(mk, x->binding))
            return fail(c,
                        "%svariable %%%u is at binding %u, which kern's layout of the kernel "
                        "lacks (bindings 0-4, 5 + p for each array parameter p, and the "
                        "scratch buffer's)",
                        who, id, x->binding);
        if (sc == SpvStorageClassWorkgroup)
            shared = sat_add(shared, id_of(c, pointee(c, id))->size);
    }
    if (shared > WORKGROUP_BYTES)
        return fail(c, "%s%u bytes of workgroup memory; kern's kernels use at most %d", who, shared,
                    WORKGROUP_BYTES);
    return true;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const spv_entry *)a)->name, ((const spv_entry *)b)->name);
}

/* Every task of every kernel is an entry point, and every entry point a task, the sizer
 * of an adstack whose capacity reads arrays (kern_<K>__s<s>) or the replica sum of a
 * parallel task that adds floats (kern_<K>__r<t>). */
static bool check_entries(spv_check *c, const kern_meta *meta) {
    qsort(c->entries, c->nentries, sizeof *c->entries, by_name);
    for (size_t e = 1; e < c->nentries; e++)
        if (!strcmp(c->entries[e - 1].name, c->entries[e].name))
            return fail(c, "two entry points named '%.200s'", c->entries[e].name);
    for (int k = 0; k < meta->nkernels; k++) {
        const kern_meta_kernel *mk = &meta->kernels[k];
        for (int t = 0; t < mk->ntasks; t++) {
            char sym[1024];
            kern_meta_symbol(sym, sizeof sym, mk->name, t, false);
            spv_entry key = {.name = sym};
            spv_entry *e = bsearch(&key, c->entries, c->nentries, sizeof *c->entries, by_name);
            if (!e)
                return fail(c, "kernel '%s', task %d: no entry point '%s'", mk->name, t, sym);
            if (!check_entry(c, e, mk))
                return false;
            if (!mk->tasks[t].parallel || mk->tasks[t].spread)
                continue;
            kern_meta_replica_sum_symbol(sym, sizeof sym, mk->name, t); /* optional */
            e = bsearch(&key, c->entries, c->nentries, sizeof *c->entries, by_name);
            if (e && !check_entry(c, e, mk))
                return false;
        }
        for (int s = 0; s < mk->nadstacks; s++) { /* sizers: optional (older modules lack them) */
            if (!sz_reads_memory(mk->adstacks[s].expr))
                continue;
            char sym[1024];
            kern_meta_sizer_symbol(sym, sizeof sym, mk->name, s);
            spv_entry key = {.name = sym};
            spv_entry *e = bsearch(&key, c->entries, c->nentries, sizeof *c->entries, by_name);
            if (e && !check_entry(c, e, mk))
                return false;
        }
    }
    for (size_t e = 0; e < c->nentries; e++)
        if (!c->entries[e].used)
            return fail(c,
                        "entry point '%.200s' is no task of a kernel of the metadata, nor the "
                        "sizer of an adstack whose capacity reads arrays, nor the replica sum "
                        "of a task that adds floats",
                        c->entries[e].name);
    return true;
}

bool rt_spirv_binding_in_layout(const kern_meta_kernel *mk, uint32_t binding) {
    if (binding < KERN_SPV_BIND_PARAM0)
        return true;
    if ((int)binding == kern_spv_scratch_binding(mk->nparams))
        return rt_spirv_has_scratch(mk);
    uint32_t p = binding - KERN_SPV_BIND_PARAM0;
    return p < (uint32_t)mk->nparams && ty_is_array(mk->params[p].type);
}

bool rt_spirv_has_scratch(const kern_meta_kernel *mk) {
    if (kern_spv_scratch_binding(mk->nparams) < 0)
        return false;
    for (int t = 0; t < mk->ntasks; t++)
        if (mk->tasks[t].parallel && !mk->tasks[t].spread)
            return true;
    return false;
}

bool rt_spirv_check(const void *code, size_t len, const kern_meta *meta, char *err, size_t errlen) {
    if (len < 20 || len % 4 != 0) {
        snprintf(err, errlen,
                 "malformed SPIR-V: %zu bytes (a module is at least 20 bytes, a "
                 "multiple of 4)",
                 len);
        return false;
    }
    spv_check c = {.n = len / 4, .err = err, .errlen = errlen};
    uint32_t *w = malloc(len); /* aligned words (the container's code may be at any offset) */
    if (!w) {
        snprintf(err, errlen, "out of host memory to check the module's SPIR-V");
        return false;
    }
    memcpy(w, code, len);
    c.w = w;
    bool ok = false;
    if (w[0] != SpvMagicNumber) {
        fail(&c, "malformed SPIR-V: bad magic number 0x%08x", w[0]);
        goto done;
    }
    if (w[4] != 0) {
        fail(&c, "malformed SPIR-V: the header's reserved word is %u, not 0", w[4]);
        goto done;
    }
    if (w[1] < 0x00010400u) {
        fail(&c,
             "SPIR-V version %u.%u; kern's modules are 1.4 or later (their entry points list "
             "every variable they use)",
             w[1] >> 16 & 0xff, w[1] >> 8 & 0xff);
        goto done;
    }
    if (!kern_spirv_validate(w, c.n, err, errlen))
        goto done;
    c.bound = w[3]; /* the validator checked every id against it */
    c.ids = calloc(c.bound, sizeof *c.ids);
    c.entries = calloc(c.n / 4 + 1, sizeof *c.entries); /* an OpEntryPoint has 4 words or more */
    c.vars = calloc(c.n / 4 + 1, sizeof *c.vars);       /* an OpVariable too */
    if (!c.ids || !c.entries || !c.vars) {
        fail(&c, "out of host memory to check the module's SPIR-V");
        goto done;
    }
    ok = walk(&c) && check_entries(&c, meta) && check_variables(&c);
done:
    free(c.ids);
    free(c.entries);
    free(c.vars);
    free(w);
    return ok;
}
