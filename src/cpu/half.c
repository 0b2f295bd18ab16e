/*
 * half.c - bfloat16 / float16 rows to float32 and back (half.h).
 */
#include "half.h"

#include <string.h>

#include "cpu.h"
#include "tpexport/run.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TP_F16C 1
__attribute__((target("avx,f16c"))) static void f16c_widen(const uint16_t *s, int64_t n, float *d) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(d + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + j))));
    for (; j < n; j++) d[j] = tp__f16_to_f32(s[j]);
}
__attribute__((target("avx,f16c"))) static void f16c_round(const float *s, int64_t n, uint16_t *d) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm_storeu_si128((__m128i *)(d + j),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; j < n; j++) d[j] = tp__f32_to_f16(s[j]);
}
#else
#define TP_F16C 0
static void f16c_widen(const uint16_t *s, int64_t n, float *d) {
    for (int64_t j = 0; j < n; j++) d[j] = tp__f16_to_f32(s[j]);
}
static void f16c_round(const float *s, int64_t n, uint16_t *d) {
    for (int64_t j = 0; j < n; j++) d[j] = tp__f32_to_f16(s[j]);
}
#endif

int tp__half_kind(tp_dtype dtype, int cpu_level) {
    if (dtype == TP_BFLOAT16) return TP_HALF_BF16;
    if (dtype != TP_FLOAT16) return -1;
    return TP_F16C && cpu_level >= TP_CPU_AVX2 && tp__cpu_has_f16c() ? TP_HALF_F16C : TP_HALF_F16;
}

void tp__half_widen(const uint16_t *s, int64_t n, int kind, float *d) {
    if (kind == TP_HALF_F16C) {
        f16c_widen(s, n, d);
    } else if (kind == TP_HALF_BF16) { /* a shift: vectorised by the compiler */
        for (int64_t j = 0; j < n; j++) {
            uint32_t x = (uint32_t)s[j] << 16;
            memcpy(&d[j], &x, 4);
        }
    } else {
        for (int64_t j = 0; j < n; j++) d[j] = tp__f16_to_f32(s[j]);
    }
}

void tp__half_round(const float *s, int64_t n, int kind, uint16_t *d) {
    if (kind == TP_HALF_F16C) {
        f16c_round(s, n, d);
    } else if (kind == TP_HALF_BF16) {
        for (int64_t j = 0; j < n; j++) {
            uint32_t x;
            memcpy(&x, &s[j], 4);
            d[j] = (x & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((x >> 16) | 0x40u)
                                                   : (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
        }
    } else {
        for (int64_t j = 0; j < n; j++) d[j] = tp__f32_to_f16(s[j]);
    }
}
