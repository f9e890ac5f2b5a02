/* spv_builder.h - the one place that knows SPIR-V's binary encoding (the model: Mesa zink's
 * spirv_builder). A module is built in sections (the order of the SPIR-V spec's logical
 * layout), each a growing array of words; ids are allocated here; types and constants are
 * deduplicated (the same opcode and operands give the same id), except structs, which the
 * decorations make distinct.
 *
 * Functions are written in order, block by block: spv_label starts a block, every
 * instruction goes at the end of the current function. A word's position (spv_here) can be
 * patched later (OpPhi operands of a loop header, whose incoming values are defined after
 * it). */
#ifndef KERN_SPV_BUILDER_H
#define KERN_SPV_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <spirv/unified1/GLSL.std.450.h>
#include <spirv/unified1/spirv.h>

typedef struct spv_words {
    uint32_t *w;
    size_t n, cap;
} spv_words;

typedef struct spv_dedup spv_dedup; /* type/constant table (spv_builder.c) */

typedef struct spv_builder {
    uint32_t bound; /* the next id */
    spv_words caps, exts, imports, memmodel, entries, modes, names, annots, globals, funcs;
    spv_dedup *dedup;
    uint32_t glsl;   /* the GLSL.std.450 import (0 until used) */
    uint64_t capset; /* capabilities declared so far, by bit (see spv_capability) */
    unsigned extset; /* extensions declared so far */
} spv_builder;

void spv_init(spv_builder *b);
void spv_free(spv_builder *b);
uint32_t spv_id(spv_builder *b);

/* Appends an instruction (opcode and operand words) to a section. */
void spv_inst(spv_words *s, SpvOp op, const uint32_t *ops, size_t n);
/* The same, operands as arguments (at most 15). */
void spv_instv(spv_words *s, SpvOp op, int n, ...);
/* An instruction with a string operand after `pre` words and before `post` words. */
void spv_inst_str(spv_words *s, SpvOp op, const uint32_t *pre, size_t npre, const char *str,
                  const uint32_t *post, size_t npost);

/* Declares a capability (once); an extension by name (once; at most 16 distinct). */
void spv_capability(spv_builder *b, SpvCapability c);
void spv_extension(spv_builder *b, const char *name);
uint32_t spv_glsl(spv_builder *b);

/* Types (deduplicated). */
uint32_t spv_type_void(spv_builder *b);
uint32_t spv_type_bool(spv_builder *b);
uint32_t spv_type_uint(spv_builder *b, int bits); /* 8, 32, 64: signedness 0 */
uint32_t spv_type_float(spv_builder *b, int bits);
uint32_t spv_type_vec(spv_builder *b, uint32_t elem, int n);
uint32_t spv_type_ptr(spv_builder *b, SpvStorageClass sc, uint32_t type);
uint32_t spv_type_fn(spv_builder *b, uint32_t ret, const uint32_t *params, size_t n);
/* An array of n elements of elem (no stride: for Workgroup memory). */
uint32_t spv_type_array_of(spv_builder *b, uint32_t elem, uint32_t n);
/* A runtime array of elem with ArrayStride stride (deduplicated with its decoration). */
uint32_t spv_type_rtarray(spv_builder *b, uint32_t elem, uint32_t stride);
/* A new struct (never deduplicated) with members at the given byte offsets, decorated Block
 * when block. */
uint32_t spv_type_struct(spv_builder *b, const uint32_t *members, const uint32_t *offsets, size_t n,
                         bool block);

/* Constants (deduplicated). */
uint32_t spv_const_bool(spv_builder *b, bool v);
uint32_t spv_const_u32(spv_builder *b, uint32_t v);
uint32_t spv_const_u64(spv_builder *b, uint64_t v);
uint32_t spv_const_u8(spv_builder *b, uint8_t v);
uint32_t spv_const_f32(spv_builder *b, float v);
uint32_t spv_const_f64(spv_builder *b, double v);
/* The constant of `type` (one of the above types) with the given bits. */
uint32_t spv_const_bits(spv_builder *b, uint32_t type, int bits, uint64_t v);

/* A global variable (types/globals section) with an optional set/binding (binding < 0: none). */
uint32_t spv_global(spv_builder *b, uint32_t ptr_type, SpvStorageClass sc, int set, int binding);
void spv_decorate(spv_builder *b, uint32_t id, SpvDecoration d, const uint32_t *args, size_t n);
/* A debug name (OpName) for id; member >= 0: OpMemberName of that member. */
void spv_name(spv_builder *b, uint32_t id, int member, const char *name);
void spv_member_decorate(spv_builder *b, uint32_t id, uint32_t member, SpvDecoration d,
                         const uint32_t *args, size_t n);

/* Functions and blocks (the funcs section). */
uint32_t spv_here(const spv_builder *b); /* the index of the next word of funcs */
void spv_patch(spv_builder *b, uint32_t at, uint32_t word);
void spv_label(spv_builder *b, uint32_t label);
/* An instruction with a result: funcs gets OP TYPE NEW-ID OPERANDS...; returns the id. */
uint32_t spv_op(spv_builder *b, SpvOp op, uint32_t type, const uint32_t *ops, size_t n);
uint32_t spv_op1(spv_builder *b, SpvOp op, uint32_t type, uint32_t a);
uint32_t spv_op2(spv_builder *b, SpvOp op, uint32_t type, uint32_t a, uint32_t c);
uint32_t spv_op3(spv_builder *b, SpvOp op, uint32_t type, uint32_t a, uint32_t c, uint32_t d);
/* A GLSL.std.450 instruction. */
uint32_t spv_ext(spv_builder *b, uint32_t type, enum GLSLstd450 inst, const uint32_t *args,
                 size_t n);

/* The module's words (header and sections), malloc'd; *n words. */
uint32_t *spv_finish(spv_builder *b, size_t *n);

#endif
