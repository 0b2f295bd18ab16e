/*
 * gemm_bf16_avx512.c - the 6 x 64 bfloat16 micro-kernel of gemm_bf16.h on
 * vdpbf16ps (AVX-512-BF16). Built with -mavx512bf16 where the compiler
 * knows it; called only when tp__gemm_bf16_supported() said the CPU has it.
 */
#include "gemm_bf16.h"

#include <string.h>

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
#include <immintrin.h>

#include "avx512_util.h"
#include "bf16_avx512.h"

/* r rounded, stored to the first n of 16 outputs. */
static inline void store_bf16(uint16_t *o, __m512 r, __mmask16 mask) {
    _mm512_mask_cvtepi32_storeu_epi16(o, mask, tp__bf16_bits_avx512(r));
}

/* r rounded to bfloat16 and widened again (what a separate step reading
 * the rounded value sees). */
static inline __m512 round_trip(__m512 r) { return tp__bf16_widen_avx512(tp__bf16_bits_avx512(r)); }

/* The first n of 16 bfloat16 values at p, widened (zero beyond n). */
static inline __m512 load_bf16(const uint16_t *p, __mmask16 mask) {
    return tp__bf16_widen_avx512(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, p)));
}

static inline __m512i pair_at(const uint16_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32((int)v);
}

/* NV vectors of 16 columns; always 6 rows (rows past m read row 0's A and
 * are not stored). */
static inline __attribute__((always_inline)) void kernel_nv(const int NV, int64_t kc2, bool odd, const uint16_t *a,
                                                           int64_t rs_a, const uint16_t *b, int w, int m, int n,
                                                           float alpha, bool acc, float *c32, int64_t ldc32, bool last,
                                                           const tp__gemm_bf16_ep *ep, uint16_t *out, int64_t ldo) {
    __m512 c[6][4];
    const uint16_t *ar[6];
    for (int i = 0; i < 6; i++) {
        ar[i] = a + (i < m ? i : 0) * rs_a;
        for (int v = 0; v < NV; v++) c[i][v] = _mm512_setzero_ps();
    }
    const int64_t full = kc2 - (odd ? 1 : 0);
    const int64_t bstride = 2 * (int64_t)w;
    for (int64_t q = 0; q < full; q++) {
        const uint16_t *bq = b + q * bstride;
        __m512bh bv[4];
        for (int v = 0; v < NV; v++) bv[v] = (__m512bh)_mm512_loadu_si512((const void *)(bq + 32 * v));
        for (int i = 0; i < 6; i++) {
            const __m512bh av = (__m512bh)pair_at(ar[i] + 2 * q);
            for (int v = 0; v < NV; v++) c[i][v] = _mm512_dpbf16_ps(c[i][v], av, bv[v]);
        }
    }
    if (odd) { /* the last pair holds one element: its other half is zero */
        const uint16_t *bq = b + full * bstride;
        __m512bh bv[4];
        for (int v = 0; v < NV; v++) bv[v] = (__m512bh)_mm512_loadu_si512((const void *)(bq + 32 * v));
        for (int i = 0; i < 6; i++) {
            const __m512bh av = (__m512bh)_mm512_set1_epi32((int)ar[i][2 * full]);
            for (int v = 0; v < NV; v++) c[i][v] = _mm512_dpbf16_ps(c[i][v], av, bv[v]);
        }
    }
    const __m512 va = _mm512_set1_ps(alpha);
    for (int i = 0; i < m; i++)
        for (int v = 0; v < NV; v++) {
            const int cols = n - 16 * v;
            if (cols <= 0) break;
            const __mmask16 mask = tp__avx512_lanes(cols);
            __m512 r = c[i][v];
            float *cp = c32 + i * ldc32 + 16 * v;
            if (acc) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mask, cp));
            if (last) {
                if (alpha != 1.0f) r = _mm512_mul_ps(r, va);
                if (ep->bias)
                    r = _mm512_add_ps(r, ep->bias_row ? _mm512_set1_ps(ep->bias[i])
                                                      : _mm512_maskz_loadu_ps(mask, ep->bias + 16 * v));
                if (ep->bias2) r = _mm512_add_ps(round_trip(r), load_bf16(ep->bias2 + 16 * v, mask));
                if (ep->res) r = _mm512_add_ps(round_trip(r), load_bf16(ep->res + i * ep->ld_res + 16 * v, mask));
                r = tp__avx512_relu(r, ep->relu);
                store_bf16(out + i * ldo + 16 * v, r, mask);
            } else {
                _mm512_mask_storeu_ps(cp, mask, r);
            }
        }
}

void tp__gemm_bf16_avx512_pack_rows(int64_t k, int64_t n, const uint16_t *b, int64_t rs_b, uint16_t *dst) {
    /* lo: columns 0-15 of the two rows' 32 as pairs, hi: columns 16-31 */
    __m512i lo_idx, hi_idx;
    {
        uint16_t lo[32], hi[32];
        for (int i = 0; i < 16; i++) {
            lo[2 * i] = (uint16_t)i, lo[2 * i + 1] = (uint16_t)(32 + i);
            hi[2 * i] = (uint16_t)(16 + i), hi[2 * i + 1] = (uint16_t)(48 + i);
        }
        lo_idx = _mm512_loadu_si512(lo);
        hi_idx = _mm512_loadu_si512(hi);
    }
    const int64_t k2 = (k + 1) / 2;
    for (int64_t p = 0; p * TP__GEMM_BF16_NR < n; p++) {
        const int w = tp__gemm_bf16_panel_width(n, p);
        const int64_t j0 = p * TP__GEMM_BF16_NR;
        for (int64_t q = 0; q < k2; q++) {
            const uint16_t *r0 = b + 2 * q * rs_b, *r1 = 2 * q + 1 < k ? r0 + rs_b : NULL;
            uint16_t *d = dst + p * k2 * 2 * TP__GEMM_BF16_NR + q * 2 * w; /* full panels come first */
            for (int j = 0; j < w; j += 32) {
                const int64_t cols = n - (j0 + j); /* real columns from here (>= 1) */
                const __mmask32 m = cols >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << cols) - 1u);
                const __m512i v0 = _mm512_maskz_loadu_epi16(m, r0 + j0 + j);
                const __m512i v1 = r1 ? _mm512_maskz_loadu_epi16(m, r1 + j0 + j) : _mm512_setzero_si512();
                _mm512_storeu_si512(d + 2 * j, _mm512_permutex2var_epi16(v0, lo_idx, v1));
                if (w - j > 16) _mm512_storeu_si512(d + 2 * j + 32, _mm512_permutex2var_epi16(v0, hi_idx, v1));
            }
        }
    }
}

void tp__gemm_bf16_avx512_kernel(int64_t kc2, bool odd, const uint16_t *a, int64_t rs_a, const uint16_t *b, int w,
                                 int m, int n, float alpha, bool acc, float *c32, int64_t ldc32, bool last,
                                 const tp__gemm_bf16_ep *ep, uint16_t *out, int64_t ldo) {
    switch ((n + 15) / 16) {
    case 1: kernel_nv(1, kc2, odd, a, rs_a, b, w, m, n, alpha, acc, c32, ldc32, last, ep, out, ldo); break;
    case 2: kernel_nv(2, kc2, odd, a, rs_a, b, w, m, n, alpha, acc, c32, ldc32, last, ep, out, ldo); break;
    case 3: kernel_nv(3, kc2, odd, a, rs_a, b, w, m, n, alpha, acc, c32, ldc32, last, ep, out, ldo); break;
    default: kernel_nv(4, kc2, odd, a, rs_a, b, w, m, n, alpha, acc, c32, ldc32, last, ep, out, ldo); break;
    }
}
#else
/* Not built for AVX-512-BF16: tp__gemm_bf16_supported() is false. */
void tp__gemm_bf16_avx512_pack_rows(int64_t k, int64_t n, const uint16_t *b, int64_t rs_b, uint16_t *dst) {
    (void)k, (void)n, (void)b, (void)rs_b, (void)dst;
}
void tp__gemm_bf16_avx512_kernel(int64_t kc2, bool odd, const uint16_t *a, int64_t rs_a, const uint16_t *b, int w,
                                 int m, int n, float alpha, bool acc, float *c32, int64_t ldc32, bool last,
                                 const tp__gemm_bf16_ep *ep, uint16_t *out, int64_t ldo) {
    (void)kc2, (void)ep, (void)odd, (void)a, (void)rs_a, (void)b, (void)w, (void)m, (void)n, (void)alpha, (void)acc;
    (void)c32, (void)ldc32, (void)last, (void)out, (void)ldo;
}
#endif
