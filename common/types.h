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
    /* Version 1 value types (docs/reference.md section 11). The IR never sees them: the
     * frontend's lowering (compiler/lower_agg.c) splits a value into its scalar leaves and
     * an array of them into an array of its component type with trailing dimensions. */
    TY_VEC,    /* vec2..4, dvec2..4, ivec2..4, quat, dquat: n components of elem */
    TY_MAT,    /* mat2..4, dmat2..4: n x n of elem, row-major */
    TY_STRUCT, /* a user struct: fields */
    TY_LOCAL,  /* a local array of fixed extents dims[0..rank) of elem */
    TY_NAMED,  /* the parser's placeholder for a struct name (sema resolves it) */
} kern_tykind;

enum { KERN_MAX_RANK = 4, KERN_NUM_SCALARS = 13 };

typedef struct kern_field kern_field;

typedef struct kern_type {
    kern_tykind kind;
    uint8_t rank;                 /* 1..4 for arrays and local arrays, 0 otherwise */
    const struct kern_type *elem; /* element type of an array; the component type of a
                                     vector or matrix; NULL otherwise */
    const char *name;             /* "f32", "f32[]", "i32[,]", "void", "vec3", "P[]" */
    uint8_t n;                    /* TY_VEC: components; TY_MAT: rows (= columns) */
    bool quat;                    /* TY_VEC: a quaternion (x, y, z, w) */
    const kern_field *fields;     /* TY_STRUCT: in declared order */
    int nfields;
    int leaves;                   /* TY_STRUCT, TY_LOCAL: scalar leaves of one value */
    int size, align;              /* TY_STRUCT: bytes and alignment of the C layout */
    const struct kern_type *arrays; /* TY_STRUCT: its array types, ranks 1..4 */
    int dims[4];                  /* TY_LOCAL: the extents */
    const void *pending;          /* parser placeholders (TY_LOCAL): the extents' fe_expr
                                     array until sema resolves the type */
} kern_type;

/* A field of a struct: its leaves start at leaf `leaf` of the struct's leaves, its bytes
 * at `offset` of the C layout. */
struct kern_field {
    const char *name;
    const kern_type *type;
    int leaf;
    int offset;
};

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
/* An array of a scalar, vector, matrix or struct type (structs: from t->arrays). */
const kern_type *ty_array_of(const kern_type *elem, int rank);
/* The vector and matrix types: kind TY_VEC or TY_MAT, elem f32, f64 (or i32 for vectors),
 * n 2..4; NULL when there is no such type. */
const kern_type *ty_vec(const kern_type *elem, int n);
const kern_type *ty_mat(const kern_type *elem, int n);
const kern_type *ty_quat(const kern_type *elem);
/* The vector or matrix type called name ("vec3", "dmat2", "quat"); NULL if none. */
const kern_type *ty_vector_named(const char *name, int len);
/* The scalar type an array of the vector, matrix or struct type t is stored as: its
 * leaves' type, or for a struct whose leaves differ but have one size (f32 and i32, say),
 * the float type of that size (the others are bitcast); NULL when the leaves have
 * different sizes or include bool (no such array). */
const kern_type *ty_storage_leaf(const kern_type *t);
/* Scalar leaves of one value of t (1 for a scalar). */
int ty_leaves(const kern_type *t);
/* The scalar type of leaf i of a value of t. */
const kern_type *ty_leaf_type(const kern_type *t, int i);
static inline bool ty_is_aggregate(const kern_type *t) {
    return t->kind >= TY_VEC && t->kind <= TY_LOCAL;
}
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
