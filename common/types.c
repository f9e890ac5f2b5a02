/* types.c - the interned type table (see types.h). */
#include "types.h"

#include <string.h>

#include "util.h"

static const kern_type scalars[KERN_NUM_SCALARS + 1] = {
    {TY_VOID, 0, NULL, "void"}, {TY_BOOL, 0, NULL, "bool"}, {TY_I32, 0, NULL, "i32"},
    {TY_U32, 0, NULL, "u32"},   {TY_I64, 0, NULL, "i64"},   {TY_F32, 0, NULL, "f32"},
    {TY_F64, 0, NULL, "f64"},   {TY_I8, 0, NULL, "i8"},     {TY_U8, 0, NULL, "u8"},
    {TY_I16, 0, NULL, "i16"},   {TY_U16, 0, NULL, "u16"},   {TY_U64, 0, NULL, "u64"},
    {TY_F16, 0, NULL, "f16"},   {TY_BF16, 0, NULL, "bf16"},
};

#define ARR(k, n)                                                                          \
    {TY_ARRAY, 1, &scalars[k], n "[]"}, {TY_ARRAY, 2, &scalars[k], n "[,]"},               \
        {TY_ARRAY, 3, &scalars[k], n "[,,]"}, {                                            \
        TY_ARRAY, 4, &scalars[k], n "[,,,]"                                                \
    }

static const kern_type arrays[KERN_NUM_SCALARS][KERN_MAX_RANK] = {
    {ARR(TY_BOOL, "bool")}, {ARR(TY_I32, "i32")}, {ARR(TY_U32, "u32")},
    {ARR(TY_I64, "i64")},   {ARR(TY_F32, "f32")}, {ARR(TY_F64, "f64")},
    {ARR(TY_I8, "i8")},     {ARR(TY_U8, "u8")},   {ARR(TY_I16, "i16")},
    {ARR(TY_U16, "u16")},   {ARR(TY_U64, "u64")}, {ARR(TY_F16, "f16")},
    {ARR(TY_BF16, "bf16")},
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
