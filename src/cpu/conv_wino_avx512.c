/*
 * conv_wino_avx512.c - the Winograd transforms of conv_nhwc (conv_wino.h)
 * and its fused depthwise fill (conv_dw.h) 16 floats wide. Built with -mavx512f; conv_nhwc_avx2.c takes them only
 * for convolutions prepared at the AVX-512 level, which the oneDNN layout
 * pass asks for only after cpuid and xgetbv said the CPU and the OS support
 * AVX-512.
 */
#include "conv_nhwc.h"

#if defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>

#include "avx512_util.h"
#define WX_V __m512
#define WX_W 16
#define WX_LD(p) _mm512_loadu_ps(p)
#define WX_ST(p, v) _mm512_storeu_ps(p, v)
#define WX_ADD(a, b) _mm512_add_ps(a, b)
#define WX_SUB(a, b) _mm512_sub_ps(a, b)
#define WX_MUL(a, b) _mm512_mul_ps(a, b)
#define WX_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define WX_SET1(x) _mm512_set1_ps(x)
#define WX_RELU(v) tp__avx512_relu(v, 1)
#define WX_MAX(a, b) _mm512_max_ps(a, b)
#define WX_MIN(a, b) _mm512_min_ps(a, b)
/* 2 output columns at once: 4 ran 4% slower and 6 and 8 10-20% (14x14 to
 * 112x112 maps, 32-384 channels, one thread, Zen 4) */
#define WX_DW_PX 2
/* 3x3 stride-1 kernels run 3 whole output rows at once (conv_dw.h):
 * Sapphire Rapids, one thread, the fill alone with its input in L2 or L3,
 * one row / 2 / 3 at a time: 56x56x144 3.50 / 2.92-2.99 / 2.43-2.58 ns a
 * vector of outputs, 112x112x32 3.40-3.54 / 2.63-2.64 / 2.53-2.58,
 * 14x14x384 3.40-3.48 / 2.61-2.77 / 2.44-2.45, 7x7x960 3.73-3.81 /
 * 3.07-3.17 / 3.18-3.20; 4 rows was no better than 3. */
#define WX_DW_ROWS 3
/* conv_dw.h's last partial vector of channels */
#define WX_M __mmask16
#define WX_TAIL(n) tp__avx512_lanes(n)
#define WX_LDM(p, m) _mm512_maskz_loadu_ps(m, p)
#define WX_STM(p, m, v) _mm512_mask_storeu_ps(p, m, v)
#define WX_NAME(n) wx_avx512_##n
#include "conv_wino.h"
#include "conv_dw.h"

tp_wino_tx tp__wino_tx_avx512(int m) { return wx_avx512_tx(m); }

void tp__conv_dw_fill_avx512(const tp_conv_dw *dw, const float *x, int64_t cin, int64_t oh, int64_t ow, int64_t i0,
                             int rows, int64_t p0, int64_t kc, float *dst, void *scratch) {
    wx_avx512_dw_fill(dw, x, cin, oh, ow, i0, rows, p0, kc, dst, scratch);
}
#endif
