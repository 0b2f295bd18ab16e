/*
 * dtype.c - dtype names, sizes, promotion, and scalar element conversion
 * (including float16 / bfloat16 with round-to-nearest-even).
 */
#include <math.h>
#include <string.h>

#include "internal.h"

static const char *const dtype_names[TP_DTYPE_COUNT] = {
    "float32", "float64", "float16", "bfloat16", "int64",
    "int32",   "int16",   "int8",    "uint8",    "bool"};
static const size_t dtype_sizes[TP_DTYPE_COUNT] = {4, 8, 2, 2, 8, 4, 2, 1, 1, 1};
_Static_assert(TP_DTYPE_COUNT == 10, "dtype tables need updating");

const char *tp_dtype_name(tp_dtype dtype) {
    return (unsigned)dtype < TP_DTYPE_COUNT ? dtype_names[dtype] : "?";
}

size_t tp_dtype_size(tp_dtype dtype) { return (unsigned)dtype < TP_DTYPE_COUNT ? dtype_sizes[dtype] : 0; }

bool tp_dtype_is_float(tp_dtype d) {
    return d == TP_FLOAT32 || d == TP_FLOAT64 || d == TP_FLOAT16 || d == TP_BFLOAT16;
}

bool tp_dtype_is_int(tp_dtype d) {
    return d == TP_INT64 || d == TP_INT32 || d == TP_INT16 || d == TP_INT8 || d == TP_UINT8;
}

tp_status tp_dtype_from_name(const char *name, tp_dtype *out) {
    static const struct { const char *name; tp_dtype dtype; } aliases[] = {
        {"float32", TP_FLOAT32}, {"float", TP_FLOAT32},   {"float64", TP_FLOAT64},
        {"double", TP_FLOAT64},  {"float16", TP_FLOAT16}, {"half", TP_FLOAT16},
        {"bfloat16", TP_BFLOAT16}, {"int64", TP_INT64},   {"long", TP_INT64},
        {"int32", TP_INT32},     {"int", TP_INT32},       {"int16", TP_INT16},
        {"short", TP_INT16},     {"int8", TP_INT8},       {"uint8", TP_UINT8},
        {"bool", TP_BOOL}};
    TP_CHECK(name != NULL, TP_ERR_INVALID_ARG, "dtype name is NULL");
    const char *n = name;
    if (strncmp(n, "torch.", 6) == 0) n += 6;
    for (size_t i = 0; i < TP_ARRAY_LEN(aliases); i++) {
        if (strcmp(n, aliases[i].name) == 0) {
            *out = aliases[i].dtype;
            return TP_OK;
        }
    }
    return tp_error(TP_ERR_UNSUPPORTED, "unknown dtype '%s'", name);
}

/* PyTorch's promotion lattice, indexed by our enum order:
 * f32 f64 f16 bf16 i64 i32 i16 i8 u8 b */
tp_dtype tp_promote_types(tp_dtype a, tp_dtype b) {
    enum { F4 = TP_FLOAT32, F8 = TP_FLOAT64, F2 = TP_FLOAT16, BF = TP_BFLOAT16, I8 = TP_INT64,
           I4 = TP_INT32, I2 = TP_INT16, I1 = TP_INT8, U1 = TP_UINT8, B1 = TP_BOOL };
    static const unsigned char table[TP_DTYPE_COUNT][TP_DTYPE_COUNT] = {
        /*        f32 f64 f16 bf16 i64 i32 i16 i8  u8  b */
        /* f32 */ {F4, F8, F4, F4, F4, F4, F4, F4, F4, F4},
        /* f64 */ {F8, F8, F8, F8, F8, F8, F8, F8, F8, F8},
        /* f16 */ {F4, F8, F2, F4, F2, F2, F2, F2, F2, F2},
        /* bf16*/ {F4, F8, F4, BF, BF, BF, BF, BF, BF, BF},
        /* i64 */ {F4, F8, F2, BF, I8, I8, I8, I8, I8, I8},
        /* i32 */ {F4, F8, F2, BF, I8, I4, I4, I4, I4, I4},
        /* i16 */ {F4, F8, F2, BF, I8, I4, I2, I2, I2, I2},
        /* i8  */ {F4, F8, F2, BF, I8, I4, I2, I1, I2, I1},
        /* u8  */ {F4, F8, F2, BF, I8, I4, I2, I2, U1, U1},
        /* b   */ {F4, F8, F2, BF, I8, I4, I2, I1, U1, B1},
    };
    if ((unsigned)a >= TP_DTYPE_COUNT || (unsigned)b >= TP_DTYPE_COUNT) return TP_FLOAT32;
    return (tp_dtype)table[a][b];
}

/* ---- half precision ---------------------------------------------------- */

uint16_t tp__f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t mant = x & 0x7fffffu;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++; /* may carry into exp: ok */
    return (uint16_t)half;
}

float tp__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t x;
    if (exp == 0) {
        if (mant == 0) {
            x = sign;
        } else {
            int e = -1;
            do {
                e++;
                mant <<= 1;
            } while (!(mant & 0x400u));
            x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        x = sign | 0x7f800000u | (mant << 13);
    } else {
        x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

uint16_t tp__f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)((x + rounding) >> 16);
}

float tp__bf16_to_f32(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* ---- element access ---------------------------------------------------- */

double tp__load_f64(const void *p, tp_dtype dtype) {
    switch (dtype) {
    case TP_FLOAT32: { float v; memcpy(&v, p, 4); return v; }
    case TP_FLOAT64: { double v; memcpy(&v, p, 8); return v; }
    case TP_FLOAT16: { uint16_t v; memcpy(&v, p, 2); return tp__f16_to_f32(v); }
    case TP_BFLOAT16: { uint16_t v; memcpy(&v, p, 2); return tp__bf16_to_f32(v); }
    case TP_INT64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case TP_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case TP_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case TP_INT8: return *(const int8_t *)p;
    case TP_UINT8: return *(const uint8_t *)p;
    case TP_BOOL: return *(const uint8_t *)p ? 1.0 : 0.0;
    default: return 0.0;
    }
}

/* double -> int64 as x86 does it for out-of-range and NaN (INT64_MIN),
 * without undefined behaviour. */
static int64_t f64_to_i64(double v) {
    if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) return INT64_MIN;
    return (int64_t)v;
}

int64_t tp__load_i64(const void *p, tp_dtype dtype) {
    switch (dtype) {
    case TP_INT64: { int64_t v; memcpy(&v, p, 8); return v; }
    case TP_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case TP_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case TP_INT8: return *(const int8_t *)p;
    case TP_UINT8: return *(const uint8_t *)p;
    case TP_BOOL: return *(const uint8_t *)p ? 1 : 0;
    default: return f64_to_i64(tp__load_f64(p, dtype));
    }
}

void tp__store_f64(void *p, tp_dtype dtype, double v) {
    switch (dtype) {
    case TP_FLOAT32: { float f = (float)v; memcpy(p, &f, 4); return; }
    case TP_FLOAT64: memcpy(p, &v, 8); return;
    case TP_FLOAT16: { uint16_t h = tp__f32_to_f16((float)v); memcpy(p, &h, 2); return; }
    case TP_BFLOAT16: { uint16_t h = tp__f32_to_bf16((float)v); memcpy(p, &h, 2); return; }
    case TP_BOOL: *(uint8_t *)p = (v != 0.0) ? 1 : 0; return; /* NaN != 0 -> true */
    default: tp__store_i64(p, dtype, f64_to_i64(v)); return;
    }
}

/* int64 -> float32 with one round-to-nearest-even, in integer arithmetic
 * (the same as the CPU's conversion; spelled out so that emulators that
 * convert through double, such as valgrind, agree). */
static float i64_to_f32(int64_t v) {
    if (v >= -(INT64_C(1) << 24) && v <= (INT64_C(1) << 24)) return (float)v; /* exact */
    uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    int shift = 64 - 24 - __builtin_clzll(m); /* bits below the 24-bit significand */
    uint64_t q = m >> shift, rem = m & ((UINT64_C(1) << shift) - 1), half = UINT64_C(1) << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    float f = ldexpf((float)q, shift); /* q <= 2^24: both steps exact */
    return v < 0 ? -f : f;
}

void tp__store_i64(void *p, tp_dtype dtype, int64_t v) {
    switch (dtype) {
    case TP_INT64: memcpy(p, &v, 8); return;
    case TP_INT32: { int32_t x = (int32_t)(uint32_t)(uint64_t)v; memcpy(p, &x, 4); return; }
    case TP_INT16: { int16_t x = (int16_t)(uint16_t)(uint64_t)v; memcpy(p, &x, 2); return; }
    case TP_INT8: *(int8_t *)p = (int8_t)(uint8_t)(uint64_t)v; return;
    case TP_UINT8: *(uint8_t *)p = (uint8_t)(uint64_t)v; return;
    case TP_BOOL: *(uint8_t *)p = v != 0; return;
    /* int64 -> float32 rounds once (not through double); half types go
     * through float32 as c10::Half / c10::BFloat16 do */
    case TP_FLOAT32: { float f = i64_to_f32(v); memcpy(p, &f, 4); return; }
    case TP_FLOAT16: { uint16_t h = tp__f32_to_f16(i64_to_f32(v)); memcpy(p, &h, 2); return; }
    case TP_BFLOAT16: { uint16_t h = tp__f32_to_bf16(i64_to_f32(v)); memcpy(p, &h, 2); return; }
    default: tp__store_f64(p, dtype, (double)v); return;
    }
}
