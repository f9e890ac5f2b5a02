/* types.h - the scalar and array types of kern, shared by the frontend and the IR.
 *
 * Types are interned in one immutable table: pointer equality is type equality, and no
 * context is needed to make one. The table is const data, not mutable global state. */
#ifndef KERN_TYPES_H
#define KERN_TYPES_H

#include <stdbool.h>
#include <stdint.h>

typedef enum kern_tykind {
    TY_VOID,
    TY_BOOL,
    TY_I32,
    TY_U32,
    TY_I64,
    TY_F32,
    TY_F64,
    /* version 1's scalars (language.md 11.4), after the first six so that their values
     * stay those of kern_dtype; the "narrow" ones (i8..u16, f16, bf16) are storage types:
     * every expression promotes them (ty_arith). Use the helpers below, not kind ranges. */
    TY_I8,
    TY_U8,
    TY_I16,
    TY_U16,
    TY_U64,
    TY_F16,
    TY_BF16, /* bfloat16: the high half of an f32 */
    TY_ARRAY,
} kern_tykind;

enum { KERN_MAX_RANK = 4, KERN_NUM_SCALARS = 13 };

typedef struct kern_type {
    kern_tykind kind;
    uint8_t rank;                 /* 1..4 for arrays, 0 otherwise */
    const struct kern_type *elem; /* element type of an array; NULL otherwise */
    const char *name;             /* "f32", "f32[]", "i32[,]", "void" */
} kern_type;

const kern_type *ty_void(void);
const kern_type *ty_bool(void);
const kern_type *ty_i32(void);
const kern_type *ty_u32(void);
const kern_type *ty_i64(void);
const kern_type *ty_f32(void);
const kern_type *ty_f64(void);
const kern_type *ty_u64(void);
/* kind must be a scalar kind (ty_kind_is_scalar). */
const kern_type *ty_scalar(kern_tykind kind);
/* elem must be a scalar type; 1 <= rank <= 4. */
const kern_type *ty_array(const kern_type *elem, int rank);
/* Parses "f32", "i64[,]" and so on; NULL if not a type name. */
const kern_type *ty_parse(const char *s, int len);

bool ty_kind_is_scalar(kern_tykind k);
static inline bool ty_is_scalar(const kern_type *t) { return ty_kind_is_scalar(t->kind); }
/* f16 and bf16 included: they are floats, though storage types (ty_is_narrow). */
static inline bool ty_is_float(const kern_type *t) {
    return t->kind == TY_F32 || t->kind == TY_F64 || t->kind == TY_F16 || t->kind == TY_BF16;
}
static inline bool ty_is_int(const kern_type *t) {
    switch (t->kind) {
    case TY_I8: case TY_U8: case TY_I16: case TY_U16: case TY_I32: case TY_U32: case TY_I64:
    case TY_U64: return true;
    default: return false;
    }
}
static inline bool ty_is_number(const kern_type *t) { return ty_is_int(t) || ty_is_float(t); }
static inline bool ty_is_unsigned(const kern_type *t) {
    return t->kind == TY_U32 || t->kind == TY_U8 || t->kind == TY_U16 || t->kind == TY_U64;
}
/* The storage types i8 u8 i16 u16 f16 bf16: in the IR only loads, stores, casts and
 * bitcasts see them; every expression works on ty_arith of them. */
static inline bool ty_is_narrow(const kern_type *t) {
    return (t->kind >= TY_I8 && t->kind <= TY_U16) || t->kind == TY_F16 || t->kind == TY_BF16;
}
static inline bool ty_is_array(const kern_type *t) { return t->kind == TY_ARRAY; }
/* The type a value of scalar type t has in arithmetic: i32 for i8 u8 i16 u16 (C's integer
 * promotion), f32 for f16 and bf16, t itself otherwise. */
const kern_type *ty_arith(const kern_type *t);
/* Size in bytes of a scalar (bool is 1). */
int ty_size(const kern_type *t);
/* Bit width of an integer type (bool: 1). */
int ty_bits(const kern_type *t);
/* The usual arithmetic conversion: both promoted (ty_arith), then the wider in the order
 * bool < i32 < u32 < i64 < u64 < f32 < f64 (as C does). */
const kern_type *ty_promote(const kern_type *a, const kern_type *b);

#endif
