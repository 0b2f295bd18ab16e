/*
 * conv_wino_avx512.c - the Winograd transforms of conv_nhwc (conv_wino.h)
 * 16 floats wide. Built with -mavx512f; conv_nhwc_avx2.c takes them only
 * for convolutions prepared at the AVX-512 level, which the oneDNN layout
 * pass asks for only after cpuid and xgetbv said the CPU and the OS support
 * AVX-512.
 */
#include "conv_nhwc.h"

#if defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>
#define WX_V __m512
#define WX_W 16
#define WX_LD(p) _mm512_loadu_ps(p)
#define WX_ST(p, v) _mm512_storeu_ps(p, v)
#define WX_ADD(a, b) _mm512_add_ps(a, b)
#define WX_SUB(a, b) _mm512_sub_ps(a, b)
#define WX_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define WX_SET1(x) _mm512_set1_ps(x)
#define WX_RELU(v) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NLE_UQ), v)
#define WX_NAME(n) wx_avx512_##n
#include "conv_wino.h"

tp_wino_tx tp__wino_tx_avx512(int m) { return wx_avx512_tx(m); }
#endif
