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
/* bfloat16 8 at a time: a shift each way, and round to nearest even with
 * a NaN kept quiet, as the scalar loops below (the same bits). */
__attribute__((target("avx2"))) static int64_t bf16_widen_avx2(const uint16_t *s, int64_t n, float *d) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + j)));
        _mm256_storeu_si256((__m256i *)(d + j), _mm256_slli_epi32(v, 16));
    }
    return j;
}
__attribute__((target("avx2"))) static int64_t bf16_round_avx2(const float *s, int64_t n, uint16_t *d) {
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i half = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x40);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(s + j));
        const __m256i hi = _mm256_srli_epi32(x, 16);
        const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, half), _mm256_and_si256(hi, one)), 16);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs), inf); /* both below 2^31: signed works */
        const __m256i v = _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), nan);
        /* 8 values below 2^16: pack the two 128-bit halves */
        const __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        _mm_storeu_si128((__m128i *)(d + j), p);
    }
    return j;
}
#else
#define TP_F16C 0
static int64_t bf16_widen_avx2(const uint16_t *s, int64_t n, float *d) {
    (void)s, (void)n, (void)d;
    return 0;
}
static int64_t bf16_round_avx2(const float *s, int64_t n, uint16_t *d) {
    (void)s, (void)n, (void)d;
    return 0;
}
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

/* The bfloat16 conversions take AVX2 where the CPU has it, whatever the
 * plan's level: they give the same bits at every width. */
static bool bf16_avx2(void) { return tp_cpu_level_supported() >= TP_CPU_AVX2; }

void tp__half_widen(const uint16_t *s, int64_t n, int kind, float *d) {
    if (kind == TP_HALF_F16C) {
        f16c_widen(s, n, d);
    } else if (kind == TP_HALF_BF16) { /* a shift */
        for (int64_t j = bf16_avx2() ? bf16_widen_avx2(s, n, d) : 0; j < n; j++) {
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
        for (int64_t j = bf16_avx2() ? bf16_round_avx2(s, n, d) : 0; j < n; j++) {
            uint32_t x;
            memcpy(&x, &s[j], 4);
            d[j] = (x & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((x >> 16) | 0x40u)
                                                   : (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
        }
    } else {
        for (int64_t j = 0; j < n; j++) d[j] = tp__f32_to_f16(s[j]);
    }
}
