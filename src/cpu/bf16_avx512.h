/*
 * bf16_avx512.h - bfloat16 <-> float32 for 16 lanes of AVX-512, for the
 * files built with it (gemm_bf16_avx512.c, conv_dw16_avx512.c); the same
 * bits as tp__f32_to_bf16 / tp__bf16_to_f32 (test_bf16_conversions).
 */
#ifndef TPEXPORT_CPU_BF16_AVX512_H
#define TPEXPORT_CPU_BF16_AVX512_H

#include <immintrin.h>

/* float32 -> bfloat16 bits to nearest even, each in the low half of its
 * 32 (a NaN stays a quiet NaN). */
static inline __m512i tp__bf16_bits_avx512(__m512 r) {
    const __m512i x = _mm512_castps_si512(r);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    __m512i v = _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    const __mmask16 nan = _mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q);
    v = _mm512_mask_mov_epi32(v, nan, _mm512_or_si512(x, _mm512_set1_epi32(0x00400000)));
    return _mm512_srli_epi32(v, 16);
}

/* bfloat16 bits, each zero-extended to 32, -> float32. */
static inline __m512 tp__bf16_widen_avx512(__m512i v) { return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)); }

#endif
