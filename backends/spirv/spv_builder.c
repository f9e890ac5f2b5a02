/* spv_builder.c - SPIR-V words, ids, deduplicated types and constants (spv_builder.h). */
#include "spv_builder.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"

/* ---- words ---------------------------------------------------------------------------- */

static void words_push(spv_words *s, uint32_t w) {
    if (s->n == s->cap) {
        size_t ncap = s->cap ? 2 * s->cap : 256;
        uint32_t *nw = realloc(s->w, ncap * sizeof *nw);
        if (!nw)
            kern_oom(ncap * sizeof *nw);
        s->w = nw;
        s->cap = ncap;
    }
    s->w[s->n++] = w;
}

void spv_inst(spv_words *s, SpvOp op, const uint32_t *ops, size_t n) {
    words_push(s, (uint32_t)((n + 1) << SpvWordCountShift) | (uint32_t)op);
    for (size_t i = 0; i < n; i++)
        words_push(s, ops[i]);
}

void spv_instv(spv_words *s, SpvOp op, int n, ...) {
    uint32_t ops[16];
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n && i < 16; i++)
        ops[i] = va_arg(ap, uint32_t);
    va_end(ap);
    spv_inst(s, op, ops, (size_t)n);
}

void spv_inst_str(spv_words *s, SpvOp op, const uint32_t *pre, size_t npre, const char *str,
                  const uint32_t *post, size_t npost) {
    size_t len = strlen(str), nstr = len / 4 + 1; /* the NUL, padded to a word */
    words_push(s, (uint32_t)((1 + npre + nstr + npost) << SpvWordCountShift) | (uint32_t)op);
    for (size_t i = 0; i < npre; i++)
        words_push(s, pre[i]);
    for (size_t i = 0; i < nstr; i++) {
        uint32_t w = 0;
        for (size_t k = 0; k < 4; k++) {
            size_t at = 4 * i + k;
            if (at < len)
                w |= (uint32_t)(unsigned char)str[at] << (8 * k);
        }
        words_push(s, w);
    }
    for (size_t i = 0; i < npost; i++)
        words_push(s, post[i]);
}

/* ---- the type and constant table ------------------------------------------------------ */

typedef struct dedup_entry {
    uint32_t *key; /* opcode, operands (without the result id) */
    size_t n;
    uint32_t id;
} dedup_entry;

struct spv_dedup {
    dedup_entry *e;
    size_t cap, len; /* cap a power of two */
};

static size_t hash_words(const uint32_t *k, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ k[i]) * 1099511628211ull;
    return (size_t)(h ^ (h >> 31));
}

static void dedup_grow(spv_dedup *d) {
    size_t ncap = d->cap ? 2 * d->cap : 64;
    dedup_entry *ne = calloc(ncap, sizeof *ne);
    if (!ne)
        kern_oom(ncap * sizeof *ne);
    for (size_t i = 0; i < d->cap; i++) {
        if (!d->e[i].key)
            continue;
        size_t h = hash_words(d->e[i].key, d->e[i].n) & (ncap - 1);
        while (ne[h].key)
            h = (h + 1) & (ncap - 1);
        ne[h] = d->e[i];
    }
    free(d->e);
    d->e = ne;
    d->cap = ncap;
}

/* The id of the type or constant OP KEY..., declared in globals when new: the result id is
 * operand `at` (0 for types, 1 for constants, after the result type). */
static uint32_t dedup(spv_builder *b, SpvOp op, const uint32_t *ops, size_t n, size_t at) {
    spv_dedup *d = b->dedup;
    uint32_t key[24];
    kern_assert(n + 1 <= sizeof key / sizeof *key);
    key[0] = (uint32_t)op;
    if (n)
        memcpy(key + 1, ops, n * sizeof *ops);
    if (2 * (d->len + 1) > d->cap)
        dedup_grow(d);
    size_t h = hash_words(key, n + 1) & (d->cap - 1);
    while (d->e[h].key) {
        if (d->e[h].n == n + 1 && !memcmp(d->e[h].key, key, (n + 1) * sizeof *key))
            return d->e[h].id;
        h = (h + 1) & (d->cap - 1);
    }
    uint32_t id = spv_id(b);
    uint32_t full[25];
    if (at)
        memcpy(full, ops, at * sizeof *ops);
    full[at] = id;
    if (n > at)
        memcpy(full + at + 1, ops + at, (n - at) * sizeof *ops);
    spv_inst(&b->globals, op, full, n + 1);
    d->e[h].key = malloc((n + 1) * sizeof *key);
    if (!d->e[h].key)
        kern_oom((n + 1) * sizeof *key);
    memcpy(d->e[h].key, key, (n + 1) * sizeof *key);
    d->e[h].n = n + 1;
    d->e[h].id = id;
    d->len++;
    return id;
}

/* ---- the module ----------------------------------------------------------------------- */

void spv_init(spv_builder *b) {
    memset(b, 0, sizeof *b);
    b->bound = 1;
    b->dedup = calloc(1, sizeof *b->dedup);
    if (!b->dedup)
        kern_oom(sizeof *b->dedup);
    spv_capability(b, SpvCapabilityShader);
    spv_instv(&b->memmodel, SpvOpMemoryModel, 2, SpvAddressingModelLogical, SpvMemoryModelGLSL450);
}

void spv_free(spv_builder *b) {
    spv_words *s[] = {&b->caps,  &b->exts,  &b->imports, &b->memmodel, &b->entries,
                      &b->modes, &b->names, &b->annots,  &b->globals,  &b->funcs};
    for (size_t i = 0; i < sizeof s / sizeof *s; i++)
        free(s[i]->w);
    if (b->dedup) {
        for (size_t i = 0; i < b->dedup->cap; i++)
            free(b->dedup->e[i].key);
        free(b->dedup->e);
        free(b->dedup);
    }
    memset(b, 0, sizeof *b);
}

uint32_t spv_id(spv_builder *b) { return b->bound++; }

void spv_capability(spv_builder *b, SpvCapability c) {
    /* the capabilities kern uses are below 64, except the extensions' (by number) */
    uint64_t bit = (unsigned)c < 64 ? 1ull << (unsigned)c : 0;
    if (bit && (b->capset & bit))
        return;
    if (!bit) { /* a large number: look for it in the section */
        for (size_t i = 0; i + 1 < b->caps.n; i += 2)
            if (b->caps.w[i + 1] == (uint32_t)c)
                return;
    }
    b->capset |= bit;
    spv_instv(&b->caps, SpvOpCapability, 1, (uint32_t)c);
}

void spv_extension(spv_builder *b, const char *name) {
    static const char *known[] = {"SPV_KHR_8bit_storage", "SPV_EXT_shader_atomic_float_add",
                                  "SPV_KHR_16bit_storage"};
    for (unsigned i = 0; i < sizeof known / sizeof *known; i++) {
        if (strcmp(name, known[i]) != 0)
            continue;
        if (b->extset & (1u << i))
            return;
        b->extset |= 1u << i;
        spv_inst_str(&b->exts, SpvOpExtension, NULL, 0, name, NULL, 0);
        return;
    }
    kern_unreachable("spv_extension: an extension kern does not know");
}

uint32_t spv_glsl(spv_builder *b) {
    if (!b->glsl) {
        b->glsl = spv_id(b);
        spv_inst_str(&b->imports, SpvOpExtInstImport, &b->glsl, 1, "GLSL.std.450", NULL, 0);
    }
    return b->glsl;
}

/* ---- types ---------------------------------------------------------------------------- */

uint32_t spv_type_void(spv_builder *b) { return dedup(b, SpvOpTypeVoid, NULL, 0, 0); }
uint32_t spv_type_bool(spv_builder *b) { return dedup(b, SpvOpTypeBool, NULL, 0, 0); }

uint32_t spv_type_uint(spv_builder *b, int bits) {
    if (bits == 64)
        spv_capability(b, SpvCapabilityInt64);
    if (bits == 8)
        spv_capability(b, SpvCapabilityInt8);
    if (bits == 16)
        spv_capability(b, SpvCapabilityInt16);
    uint32_t ops[2] = {(uint32_t)bits, 0};
    return dedup(b, SpvOpTypeInt, ops, 2, 0);
}

uint32_t spv_type_float(spv_builder *b, int bits) {
    if (bits == 64)
        spv_capability(b, SpvCapabilityFloat64);
    uint32_t ops[1] = {(uint32_t)bits};
    return dedup(b, SpvOpTypeFloat, ops, 1, 0);
}

uint32_t spv_type_vec(spv_builder *b, uint32_t elem, int n) {
    uint32_t ops[2] = {elem, (uint32_t)n};
    return dedup(b, SpvOpTypeVector, ops, 2, 0);
}

uint32_t spv_type_ptr(spv_builder *b, SpvStorageClass sc, uint32_t type) {
    uint32_t ops[2] = {(uint32_t)sc, type};
    return dedup(b, SpvOpTypePointer, ops, 2, 0);
}

uint32_t spv_type_fn(spv_builder *b, uint32_t ret, const uint32_t *params, size_t n) {
    uint32_t ops[16];
    kern_assert(n < 16);
    ops[0] = ret;
    if (n)
        memcpy(ops + 1, params, n * sizeof *params);
    return dedup(b, SpvOpTypeFunction, ops, n + 1, 0);
}

uint32_t spv_type_array_of(spv_builder *b, uint32_t elem, uint32_t n) {
    uint32_t ops[2] = {elem, spv_const_u32(b, n)};
    return dedup(b, SpvOpTypeArray, ops, 2, 0);
}

uint32_t spv_type_rtarray(spv_builder *b, uint32_t elem, uint32_t stride) {
    size_t before = b->bound;
    uint32_t id = dedup(b, SpvOpTypeRuntimeArray, &elem, 1, 0);
    if (id >= before) /* new: its stride */
        spv_decorate(b, id, SpvDecorationArrayStride, &stride, 1);
    return id;
}

uint32_t spv_type_struct(spv_builder *b, const uint32_t *members, const uint32_t *offsets, size_t n,
                         bool block) {
    uint32_t id = spv_id(b);
    /* any number of members: a launch block has one per scalar parameter, array extent
     * and adstack (a kernel of 62 scalars, a K.grad of 30 while loops) */
    uint32_t *ops = malloc((n + 1) * sizeof *ops);
    if (!ops)
        kern_oom((n + 1) * sizeof *ops);
    ops[0] = id;
    memcpy(ops + 1, members, n * sizeof *members);
    spv_inst(&b->globals, SpvOpTypeStruct, ops, n + 1);
    free(ops);
    for (size_t i = 0; i < n; i++)
        spv_member_decorate(b, id, (uint32_t)i, SpvDecorationOffset, &offsets[i], 1);
    if (block)
        spv_decorate(b, id, SpvDecorationBlock, NULL, 0);
    return id;
}

/* ---- constants ------------------------------------------------------------------------ */

uint32_t spv_const_bool(spv_builder *b, bool v) {
    uint32_t t = spv_type_bool(b);
    return dedup(b, v ? SpvOpConstantTrue : SpvOpConstantFalse, &t, 1, 1);
}

uint32_t spv_const_bits(spv_builder *b, uint32_t type, int bits, uint64_t v) {
    uint32_t ops[3] = {type, (uint32_t)v, (uint32_t)(v >> 32)};
    if (bits < 32)
        ops[1] &= (1u << bits) - 1;
    return dedup(b, SpvOpConstant, ops, bits == 64 ? 3 : 2, 1);
}

uint32_t spv_const_u32(spv_builder *b, uint32_t v) {
    return spv_const_bits(b, spv_type_uint(b, 32), 32, v);
}
uint32_t spv_const_u64(spv_builder *b, uint64_t v) {
    return spv_const_bits(b, spv_type_uint(b, 64), 64, v);
}
uint32_t spv_const_u8(spv_builder *b, uint8_t v) {
    return spv_const_bits(b, spv_type_uint(b, 8), 8, v);
}

uint32_t spv_const_f32(spv_builder *b, float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return spv_const_bits(b, spv_type_float(b, 32), 32, bits);
}

uint32_t spv_const_f64(spv_builder *b, double v) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return spv_const_bits(b, spv_type_float(b, 64), 64, bits);
}

/* ---- globals and decorations ----------------------------------------------------------- */

uint32_t spv_global(spv_builder *b, uint32_t ptr_type, SpvStorageClass sc, int set, int binding) {
    uint32_t id = spv_id(b);
    spv_instv(&b->globals, SpvOpVariable, 3, ptr_type, id, (uint32_t)sc);
    if (binding >= 0) {
        uint32_t s = (uint32_t)set, bi = (uint32_t)binding;
        spv_decorate(b, id, SpvDecorationDescriptorSet, &s, 1);
        spv_decorate(b, id, SpvDecorationBinding, &bi, 1);
    }
    return id;
}

void spv_decorate(spv_builder *b, uint32_t id, SpvDecoration d, const uint32_t *args, size_t n) {
    uint32_t ops[8] = {id, (uint32_t)d};
    kern_assert(n <= 6);
    if (n)
        memcpy(ops + 2, args, n * sizeof *args);
    spv_inst(&b->annots, SpvOpDecorate, ops, n + 2);
}

void spv_name(spv_builder *b, uint32_t id, int member, const char *name) {
    uint32_t pre[2] = {id, (uint32_t)member};
    spv_inst_str(&b->names, member < 0 ? SpvOpName : SpvOpMemberName, pre, member < 0 ? 1 : 2, name,
                 NULL, 0);
}

void spv_member_decorate(spv_builder *b, uint32_t id, uint32_t member, SpvDecoration d,
                         const uint32_t *args, size_t n) {
    uint32_t ops[8] = {id, member, (uint32_t)d};
    kern_assert(n <= 5);
    if (n)
        memcpy(ops + 3, args, n * sizeof *args);
    spv_inst(&b->annots, SpvOpMemberDecorate, ops, n + 3);
}

/* ---- functions ------------------------------------------------------------------------- */

uint32_t spv_here(const spv_builder *b) { return (uint32_t)b->funcs.n; }

void spv_patch(spv_builder *b, uint32_t at, uint32_t word) {
    kern_assert(at < b->funcs.n);
    b->funcs.w[at] = word;
}

void spv_label(spv_builder *b, uint32_t label) { spv_instv(&b->funcs, SpvOpLabel, 1, label); }

uint32_t spv_op(spv_builder *b, SpvOp op, uint32_t type, const uint32_t *ops, size_t n) {
    uint32_t id = spv_id(b);
    words_push(&b->funcs, (uint32_t)((n + 3) << SpvWordCountShift) | (uint32_t)op);
    words_push(&b->funcs, type);
    words_push(&b->funcs, id);
    for (size_t i = 0; i < n; i++)
        words_push(&b->funcs, ops[i]);
    return id;
}

uint32_t spv_op1(spv_builder *b, SpvOp op, uint32_t type, uint32_t a) {
    return spv_op(b, op, type, &a, 1);
}
uint32_t spv_op2(spv_builder *b, SpvOp op, uint32_t type, uint32_t a, uint32_t c) {
    uint32_t ops[2] = {a, c};
    return spv_op(b, op, type, ops, 2);
}
uint32_t spv_op3(spv_builder *b, SpvOp op, uint32_t type, uint32_t a, uint32_t c, uint32_t d) {
    uint32_t ops[3] = {a, c, d};
    return spv_op(b, op, type, ops, 3);
}

uint32_t spv_ext(spv_builder *b, uint32_t type, enum GLSLstd450 inst, const uint32_t *args,
                 size_t n) {
    uint32_t ops[8] = {spv_glsl(b), (uint32_t)inst};
    kern_assert(n <= 6);
    if (n)
        memcpy(ops + 2, args, n * sizeof *args);
    return spv_op(b, SpvOpExtInst, type, ops, n + 2);
}

uint32_t *spv_finish(spv_builder *b, size_t *n) {
    spv_words out = {0};
    words_push(&out, SpvMagicNumber);
    words_push(&out, 0x00010500u); /* SPIR-V 1.5 */
    words_push(&out, 0);           /* generator: unregistered */
    words_push(&out, b->bound);
    words_push(&out, 0);
    spv_words *s[] = {&b->caps,  &b->exts,  &b->imports, &b->memmodel, &b->entries,
                      &b->modes, &b->names, &b->annots,  &b->globals,  &b->funcs};
    for (size_t i = 0; i < sizeof s / sizeof *s; i++)
        for (size_t k = 0; k < s[i]->n; k++)
            words_push(&out, s[i]->w[k]);
    *n = out.n;
    return out.w;
}
