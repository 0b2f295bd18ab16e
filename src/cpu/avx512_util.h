/*
 * avx512_util.h - small AVX-512 helpers shared by the kernels built with
 * -mavx512f (gemm_avx512.c, gemm_bf16_avx512.c, conv_direct_avx512.c,
 * conv_wino_avx512.c) and by onednn.c's pooling, whose AVX-512 functions
 * carry target("avx512f"): the helpers carry it too, so they inline into
 * either (a function built without AVX-512 cannot inline them: the build
 * fails instead).
 */
#ifndef TPEXPORT_CPU_AVX512_UTIL_H
#define TPEXPORT_CPU_AVX512_UTIL_H

#include <immintrin.h>
#include <stdint.h>

#define TP__AVX512_INLINE __attribute__((target("avx512f"), always_inline)) static inline

/* The first `left` lanes of 16 (none for left <= 0, all for left >= 16):
 * the mask of a row's last, partial vector. */
TP__AVX512_INLINE __mmask16 tp__avx512_lanes(int64_t left) {
    if (left >= 16) return (__mmask16)0xFFFF;
    if (left <= 0) return 0;
    return (__mmask16)((1u << left) - 1u);
}

/* The activation of tp__relu_mode: mode 1 relu (+0 below zero, a NaN
 * kept: v > 0 unordered), mode 2 relu6 (max(0, .) and min(6, .) return
 * their second operand, v, for a NaN v, and -0 for -0), else v. */
TP__AVX512_INLINE __m512 tp__avx512_relu(__m512 v, int mode) {
    if (mode == 1) return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NLE_UQ), v);
    if (mode == 2) return _mm512_min_ps(_mm512_set1_ps(6.0f), _mm512_max_ps(_mm512_setzero_ps(), v));
    return v;
}

/* The max pool's step (the reference's rule): m takes v where v > m or v
 * is NaN, so a NaN in a window wins and stays. */
TP__AVX512_INLINE __m512 tp__avx512_max_take(__m512 m, __m512 v) {
    return _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask(v, m, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v);
}

#endif
