/* types.c - the interned type table (see types.h). */
#include "types.h"

#include <string.h>

#include "util.h"

#define SCALAR(k, nm) \
    { .kind = k, .name = nm }

static const kern_type scalars[KERN_NUM_SCALARS + 1] = {
    SCALAR(TY_VOID, "void"), SCALAR(TY_BOOL, "bool"), SCALAR(TY_I32, "i32"), SCALAR(TY_U32, "u32"),
    SCALAR(TY_I64, "i64"),   SCALAR(TY_F32, "f32"),   SCALAR(TY_F64, "f64"),
    SCALAR(TY_I8, "i8"),     SCALAR(TY_U8, "u8"),   SCALAR(TY_I16, "i16"), SCALAR(TY_U16, "u16"),
    SCALAR(TY_U64, "u64"),   SCALAR(TY_F16, "f16"), SCALAR(TY_BF16, "bf16"),
};

#define ARRAY(r, e, nm) \
    { .kind = TY_ARRAY, .rank = r, .elem = e, .name = nm }
#define ARR(e, n) \
    ARRAY(1, e, n "[]"), ARRAY(2, e, n "[,]"), ARRAY(3, e, n "[,,]"), ARRAY(4, e, n "[,,,]")

static const kern_type arrays[KERN_NUM_SCALARS][KERN_MAX_RANK] = {
    {ARR(&scalars[TY_BOOL], "bool")}, {ARR(&scalars[TY_I32], "i32")},
    {ARR(&scalars[TY_U32], "u32")},   {ARR(&scalars[TY_I64], "i64")},
    {ARR(&scalars[TY_F32], "f32")},   {ARR(&scalars[TY_F64], "f64")},
    {ARR(&scalars[TY_I8], "i8")},     {ARR(&scalars[TY_U8], "u8")},
    {ARR(&scalars[TY_I16], "i16")},   {ARR(&scalars[TY_U16], "u16")},
    {ARR(&scalars[TY_U64], "u64")},   {ARR(&scalars[TY_F16], "f16")},
    {ARR(&scalars[TY_BF16], "bf16")},
};

/* The vector, matrix and quaternion types, and their arrays (ranks 1..4). */
#define VECTOR(k, e, nm, cnt, q) \
    { .kind = k, .elem = &scalars[e], .name = nm, .n = cnt, .quat = q }
enum { NUM_VECTORS = 17 };
static const kern_type vectors[NUM_VECTORS] = {
    VECTOR(TY_VEC, TY_F32, "vec2", 2, false),  VECTOR(TY_VEC, TY_F32, "vec3", 3, false),
    VECTOR(TY_VEC, TY_F32, "vec4", 4, false),  VECTOR(TY_VEC, TY_F64, "dvec2", 2, false),
    VECTOR(TY_VEC, TY_F64, "dvec3", 3, false), VECTOR(TY_VEC, TY_F64, "dvec4", 4, false),
    VECTOR(TY_VEC, TY_I32, "ivec2", 2, false), VECTOR(TY_VEC, TY_I32, "ivec3", 3, false),
    VECTOR(TY_VEC, TY_I32, "ivec4", 4, false), VECTOR(TY_MAT, TY_F32, "mat2", 2, false),
    VECTOR(TY_MAT, TY_F32, "mat3", 3, false),  VECTOR(TY_MAT, TY_F32, "mat4", 4, false),
    VECTOR(TY_MAT, TY_F64, "dmat2", 2, false), VECTOR(TY_MAT, TY_F64, "dmat3", 3, false),
    VECTOR(TY_MAT, TY_F64, "dmat4", 4, false), VECTOR(TY_VEC, TY_F32, "quat", 4, true),
    VECTOR(TY_VEC, TY_F64, "dquat", 4, true),
};

static const kern_type vector_arrays[NUM_VECTORS][KERN_MAX_RANK] = {
    {ARR(&vectors[0], "vec2")},   {ARR(&vectors[1], "vec3")},   {ARR(&vectors[2], "vec4")},
    {ARR(&vectors[3], "dvec2")},  {ARR(&vectors[4], "dvec3")},  {ARR(&vectors[5], "dvec4")},
    {ARR(&vectors[6], "ivec2")},  {ARR(&vectors[7], "ivec3")},  {ARR(&vectors[8], "ivec4")},
    {ARR(&vectors[9], "mat2")},   {ARR(&vectors[10], "mat3")},  {ARR(&vectors[11], "mat4")},
    {ARR(&vectors[12], "dmat2")}, {ARR(&vectors[13], "dmat3")}, {ARR(&vectors[14], "dmat4")},
    {ARR(&vectors[15], "quat")},  {ARR(&vectors[16], "dquat")},
};

const kern_type *ty_void(void) { return &scalars[TY_VOID]; }
const kern_type *ty_bool(void) { return &scalars[TY_BOOL]; }
const kern_type *ty_i32(void) { return &scalars[TY_I32]; }
const kern_type *ty_u32(void) { return &scalars[TY_U32]; }
const kern_type *ty_i64(void) { return &scalars[TY_I64]; }
const kern_type *ty_f32(void) { return &scalars[TY_F32]; }
const kern_type *ty_f64(void) { return &scalars[TY_F64]; }
const kern_type *ty_u64(void) { return &scalars[TY_U64]; }

bool ty_kind_is_scalar(kern_tykind k) { return k >= TY_BOOL && k <= TY_BF16 && k != TY_ARRAY; }

const kern_type *ty_scalar(kern_tykind kind) {
    kern_assert(ty_kind_is_scalar(kind));
    return &scalars[kind];
}

const kern_type *ty_array(const kern_type *elem, int rank) {
    kern_assert(ty_is_scalar(elem) && rank >= 1 && rank <= KERN_MAX_RANK);
    return &arrays[elem->kind - TY_BOOL][rank - 1];
}

const kern_type *ty_array_of(const kern_type *elem, int rank) {
    kern_assert(rank >= 1 && rank <= KERN_MAX_RANK);
    if (ty_is_scalar(elem))
        return ty_array(elem, rank);
    if (elem->kind == TY_STRUCT)
        return &elem->arrays[rank - 1];
    kern_assert(elem >= vectors && elem < vectors + NUM_VECTORS);
    return &vector_arrays[elem - vectors][rank - 1];
}

static const kern_type *find_vector(kern_tykind kind, const kern_type *elem, int n, bool quat) {
    for (int i = 0; i < NUM_VECTORS; i++)
        if (vectors[i].kind == kind && vectors[i].elem == elem && vectors[i].n == n &&
            vectors[i].quat == quat)
            return &vectors[i];
    return NULL;
}

const kern_type *ty_vec(const kern_type *elem, int n) {
    return find_vector(TY_VEC, elem, n, false);
}
const kern_type *ty_mat(const kern_type *elem, int n) {
    return find_vector(TY_MAT, elem, n, false);
}
const kern_type *ty_quat(const kern_type *elem) { return find_vector(TY_VEC, elem, 4, true); }

const kern_type *ty_vector_named(const char *name, int len) {
    for (int i = 0; i < NUM_VECTORS; i++)
        if ((int)strlen(vectors[i].name) == len && !memcmp(vectors[i].name, name, (size_t)len))
            return &vectors[i];
    return NULL;
}

const kern_type *ty_storage_leaf(const kern_type *t) {
    const kern_type *first = ty_leaf_type(t, 0), *fl = NULL;
    for (int i = 0; i < ty_leaves(t); i++) {
        const kern_type *l = ty_leaf_type(t, i);
        if (l->kind == TY_BOOL || ty_size(l) != ty_size(first))
            return NULL;
        if (!fl && ty_is_float(l))
            fl = l;
    }
    return fl ? fl : first;
}

int ty_leaves(const kern_type *t) {
    switch (t->kind) {
    case TY_VEC: return t->n;
    case TY_MAT: return t->n * t->n;
    case TY_STRUCT:
    case TY_LOCAL: return t->leaves;
    default: return 1;
    }
}

const kern_type *ty_leaf_type(const kern_type *t, int i) {
    switch (t->kind) {
    case TY_VEC:
    case TY_MAT: return t->elem;
    case TY_LOCAL: return ty_leaf_type(t->elem, i % ty_leaves(t->elem));
    case TY_STRUCT:
        for (int f = t->nfields - 1; f >= 0; f--)
            if (i >= t->fields[f].leaf)
                return ty_leaf_type(t->fields[f].type, i - t->fields[f].leaf);
        kern_unreachable("leaf of an empty struct");
    default: return t;
    }
}

const kern_type *ty_parse(const char *s, int len) {
    for (int k = TY_VOID; k <= TY_BF16; k++) {
        int n = (int)strlen(scalars[k].name);
        if (len < n || memcmp(s, scalars[k].name, (size_t)n) != 0)
            continue;
        if (len == n)
            return &scalars[k];
        if (k == TY_VOID || s[n] != '[' || s[len - 1] != ']')
            continue;
        int commas = 0;
        for (int i = n + 1; i < len - 1; i++) {
            if (s[i] != ',')
                return NULL;
            commas++;
        }
        if (commas + 1 > KERN_MAX_RANK)
            return NULL;
        return ty_array(&scalars[k], commas + 1);
    }
    return NULL;
}

int ty_size(const kern_type *t) {
    switch (t->kind) {
    case TY_BOOL:
    case TY_I8:
    case TY_U8: return 1;
    case TY_I16:
    case TY_U16:
    case TY_F16:
    case TY_BF16: return 2;
    case TY_I32:
    case TY_U32:
    case TY_F32: return 4;
    case TY_I64:
    case TY_U64:
    case TY_F64: return 8;
    default: kern_unreachable("ty_size of a non-scalar");
    }
}

int ty_bits(const kern_type *t) { return t->kind == TY_BOOL ? 1 : ty_size(t) * 8; }

const kern_type *ty_arith(const kern_type *t) {
    switch (t->kind) {
    case TY_I8:
    case TY_U8:
    case TY_I16:
    case TY_U16: return ty_i32();
    case TY_F16:
    case TY_BF16: return ty_f32();
    default: return t;
    }
}

/* The position in bool < i32 < u32 < i64 < u64 < f32 < f64 of a promoted type. */
static int rank(const kern_type *t) {
    switch (t->kind) {
    case TY_BOOL: return 0;
    case TY_I32: return 1;
    case TY_U32: return 2;
    case TY_I64: return 3;
    case TY_U64: return 4;
    case TY_F32: return 5;
    case TY_F64: return 6;
    default: kern_unreachable("rank of a narrow or non-scalar type");
    }
}

const kern_type *ty_promote(const kern_type *a, const kern_type *b) {
    kern_assert(ty_is_scalar(a) && ty_is_scalar(b));
    a = ty_arith(a), b = ty_arith(b);
    return rank(a) >= rank(b) ? a : b;
}
