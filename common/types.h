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
    TY_ARRAY,
} kern_tykind;

enum { KERN_MAX_RANK = 4, KERN_NUM_SCALARS = 6 };

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
/* kind must be a scalar kind (TY_BOOL..TY_F64). */
const kern_type *ty_scalar(kern_tykind kind);
/* elem must be a scalar type; 1 <= rank <= 4. */
const kern_type *ty_array(const kern_type *elem, int rank);
/* Parses "f32", "i64[,]" and so on; NULL if not a type name. */
const kern_type *ty_parse(const char *s, int len);

static inline bool ty_is_scalar(const kern_type *t) { return t->kind >= TY_BOOL && t->kind <= TY_F64; }
static inline bool ty_is_float(const kern_type *t) { return t->kind == TY_F32 || t->kind == TY_F64; }
static inline bool ty_is_int(const kern_type *t) { return t->kind >= TY_I32 && t->kind <= TY_I64; }
static inline bool ty_is_number(const kern_type *t) { return t->kind >= TY_I32 && t->kind <= TY_F64; }
static inline bool ty_is_unsigned(const kern_type *t) { return t->kind == TY_U32; }
static inline bool ty_is_array(const kern_type *t) { return t->kind == TY_ARRAY; }
/* Size in bytes of a scalar (bool is 1). */
int ty_size(const kern_type *t);
/* Bit width of an integer type (bool: 1). */
int ty_bits(const kern_type *t);
/* The usual arithmetic conversion: the wider of two scalars in the order
 * bool < i32 < u32 < i64 < f32 < f64. */
const kern_type *ty_promote(const kern_type *a, const kern_type *b);

#endif
