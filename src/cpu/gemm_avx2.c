/*
 * gemm_avx2.c - the AVX2+FMA micro-kernel of the single-precision GEMM
 * (gemm.h): a 6 x 16 block of C in 12 ymm accumulators, B read as two ymm
 * per k, A broadcast one element per row. Compiled with -mavx2 -mfma;
 * gemm.c calls it only after cpuid and xgetbv said the CPU and the OS
 * support AVX and FMA.
 *
 * Each element of C is one sequential chain of FMAs over p, whatever m, n
 * or the A layout, so results do not depend on how a caller tiles C; the
 * row kernel (products of one row) sums four chains instead, and gemm.c
 * runs it for every tile of such products only.
 */
#include "gemm.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

enum { MR = TP__GEMM_AVX2_MR, NR = TP__GEMM_AVX2_NR, NV = NR / 8 };

/* Lanes of column group j (8 columns each) that hold one of the n columns:
 * all bits set in an active lane, as maskload/maskstore want. */
static inline __m256i tp__gemm_avx2_column_mask(int n, int j) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8 * j), lane);
}

/* C[0:m, 0:n] = alpha * acc + beta * C, then (ep) + bias[j] and relu. */
static inline __attribute__((always_inline)) void tp__gemm_avx2_store(const int m, __m256 acc[MR][NV], float *c,
                                                                      int64_t ldc, int n, float alpha, float beta,
                                                                      const bool ep, const float *bias, int relu_in) {
    const __m256 alpha_v = _mm256_set1_ps(alpha), beta_v = _mm256_set1_ps(beta), zero = _mm256_setzero_ps();
    /* the tile's epilogue in registers: + bias, then relu (NaN kept, else
     * +0) or relu6 (max(0, .) and min(6, .) keep a NaN or -0 v: their
     * second operand) */
    const bool has_bias = ep && bias;
    const int relu = ep ? relu_in : 0;
    const __m256 six = _mm256_set1_ps(6.0f);
    __m256 bias_v[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; j++)
        bias_v[j] = has_bias && n > 8 * j ? _mm256_maskload_ps(bias + 8 * j, tp__gemm_avx2_column_mask(n, j)) : zero;
#define TP__GEMM_AVX2_TILE_EP(v, j)                                                        \
    do {                                                                                   \
        if (has_bias) v = _mm256_add_ps(v, bias_v[j]);                                     \
        if (relu == 1) v = _mm256_and_ps(_mm256_cmp_ps(v, zero, _CMP_NLE_UQ), v);          \
        if (relu == 2) v = _mm256_min_ps(six, _mm256_max_ps(zero, v));                     \
    } while (0)
    if (n == NR) {
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            if (i >= m) continue;
            float *ci = c + i * ldc;
#pragma GCC unroll 4
            for (int j = 0; j < NV; j++) {
                __m256 v;
                if (beta == 0.0f) v = _mm256_mul_ps(alpha_v, acc[i][j]);
                else if (beta == 1.0f) v = _mm256_fmadd_ps(alpha_v, acc[i][j], _mm256_loadu_ps(ci + 8 * j));
                else v = _mm256_fmadd_ps(alpha_v, acc[i][j], _mm256_mul_ps(beta_v, _mm256_loadu_ps(ci + 8 * j)));
                TP__GEMM_AVX2_TILE_EP(v, j);
                _mm256_storeu_ps(ci + 8 * j, v);
            }
        }
        return;
    }
    __m256i mask[NV];
    for (int j = 0; j < NV; j++) mask[j] = tp__gemm_avx2_column_mask(n, j);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
        if (i >= m) continue;
        float *ci = c + i * ldc;
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) {
            if (n <= 8 * j) continue;
            __m256 v;
            if (beta == 0.0f) v = _mm256_mul_ps(alpha_v, acc[i][j]);
            else if (beta == 1.0f)
                v = _mm256_fmadd_ps(alpha_v, acc[i][j], _mm256_maskload_ps(ci + 8 * j, mask[j]));
            else
                v = _mm256_fmadd_ps(alpha_v, acc[i][j],
                                    _mm256_mul_ps(beta_v, _mm256_maskload_ps(ci + 8 * j, mask[j])));
            TP__GEMM_AVX2_TILE_EP(v, j);
            _mm256_maskstore_ps(ci + 8 * j, mask[j], v);
        }
    }
#undef TP__GEMM_AVX2_TILE_EP
}

/* The kernel body for exactly m rows; packed_a selects the packed layout
 * (rs 1, cs MR, known at compile time) over row-major A (cs 1). */
static inline __attribute__((always_inline)) void tp__gemm_avx2_tile(
    const int m, const bool packed_a, const bool prefetch, int64_t kc, const float *a, int64_t rs_a,
    const float *b, int64_t ldb, float *c, int64_t ldc, int n, float alpha, float beta, const float *pf,
    int64_t pf_bytes, const tp__gemm_tile_ep *tep) {
    const int64_t rs = packed_a ? 1 : rs_a;
    const int64_t cs = packed_a ? MR : 1;
    __m256 acc[MR][NV];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) acc[i][j] = _mm256_setzero_ps();
    }
    /* C is touched only after the K loop: fetch its lines meanwhile, when
     * the loop is long enough (as in gemm_avx512.c). */
    if (kc >= TP__GEMM_C_PREFETCH_KC) {
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            if (i < m) _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
            if (i < m) _mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T0);
        }
    }
    const float *a3 = !packed_a && m > 3 ? a + 3 * rs : a; /* rows 3-5 when there are any */
    /* the prefetch hint, spread over the k steps as in gemm_avx512.c (B
     * cold, AVX2 level on an AVX-512 Xeon, 1 thread: 49x4608x512 78-80 ->
     * 94-96 GFLOP/s, 49x512x2048 84 -> 94-97, 32x784x512 74-75 -> 88-89) */
    const char *pf_at = (const char *)pf;
    const uint32_t pf_step = prefetch ? tp__gemm_pf_step(pf_bytes, kc) : 0;
    uint32_t pf_q = 0;
#pragma GCC unroll 4
    for (int64_t p = 0; p < kc; p++) {
        __m256 bv[NV];
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) bv[j] = _mm256_loadu_ps(b + 8 * j);
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            if (i < m) {
                /* rows 0-2 and 3-5 from two bases at 0, 1 and 2 row strides
                 * (see gemm_avx512.c) */
                const float *ap = packed_a ? a + i : (i < 3 ? a : a3) + (i % 3) * rs;
                const __m256 ai = _mm256_broadcast_ss(ap);
#pragma GCC unroll 4
                for (int j = 0; j < NV; j++) acc[i][j] = _mm256_fmadd_ps(ai, bv[j], acc[i][j]);
            }
        }
        if (prefetch) {
            _mm_prefetch(pf_at + ((pf_q >> 16) << 6), _MM_HINT_T1);
            pf_q += pf_step;
        }
        a += cs;
        a3 += cs;
        b += ldb;
        if (!packed_a) __asm__("" : "+r"(a), "+r"(a3));
    }
    /* the store, with the tile's epilogue only in the instance that has one
     * (its tests would otherwise cost the plain GEMM's short-K calls) */
    if (tep) tp__gemm_avx2_store(m, acc, c, ldc, n, alpha, beta, true, tep->bias, tep->relu);
    else tp__gemm_avx2_store(m, acc, c, ldc, n, alpha, beta, false, NULL, false);
}

/* Products of one row (M = 1): each element's sum in four interleaved
 * chains over p mod 4, added ((0 + 1) + (2 + 3)) at the end, so that the
 * FMA's latency does not bound a product of few columns (see
 * gemm_avx512.c's row kernel; gemm.c uses it for whole products of one
 * row only). B's rows are read NR wide, as the 6 x 16 kernel reads them. */
static inline __attribute__((always_inline)) void tp__gemm_avx2_row_tile(const bool prefetch, int64_t kc,
                                                                         const float *a, int64_t cs_a,
                                                                         const float *b, int64_t ldb, float *c,
                                                                         int n, float alpha, float beta,
                                                                         const float *pf, int64_t pf_bytes,
                                                                         const tp__gemm_tile_ep *tep) {
    __m256 acc[4][NV], sum[MR][NV];
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) acc[u][j] = _mm256_setzero_ps();
    const char *pf_at = (const char *)pf;
    const char *pf_last = prefetch ? pf_at + ((pf_bytes - 1) & ~(int64_t)63) : pf_at;
    int64_t p = 0;
#define TP__GEMM_ROW_STEP(U)                                                                    \
    do {                                                                                        \
        const __m256 ai = _mm256_broadcast_ss(a + (p + (U)) * cs_a);                            \
        const float *bp = b + (p + (U)) * ldb;                                                  \
        _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++)                                    \
            acc[U][j] = _mm256_fmadd_ps(ai, _mm256_loadu_ps(bp + 8 * j), acc[U][j]);            \
    } while (0)
    for (; p + 4 <= kc; p += 4) {
        TP__GEMM_ROW_STEP(0);
        TP__GEMM_ROW_STEP(1);
        TP__GEMM_ROW_STEP(2);
        TP__GEMM_ROW_STEP(3);
        if (prefetch) {
            _mm_prefetch(pf_at, _MM_HINT_T1);
            pf_at += pf_at < pf_last ? 64 : 0;
        }
    }
    if (p < kc) TP__GEMM_ROW_STEP(0);
    if (p + 1 < kc) TP__GEMM_ROW_STEP(1);
    if (p + 2 < kc) TP__GEMM_ROW_STEP(2);
#undef TP__GEMM_ROW_STEP
#pragma GCC unroll 4
    for (int j = 0; j < NV; j++)
        sum[0][j] = _mm256_add_ps(_mm256_add_ps(acc[0][j], acc[1][j]), _mm256_add_ps(acc[2][j], acc[3][j]));
    if (tep) tp__gemm_avx2_store(1, sum, c, 0, n, alpha, beta, true, tep->bias, tep->relu);
    else tp__gemm_avx2_store(1, sum, c, 0, n, alpha, beta, false, NULL, false);
}

TP_HIDDEN void tp__gemm_avx2_row_microkernel(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a,
                                             const float *b, int64_t ldb, float *c, int64_t ldc, int m, int n,
                                             float alpha, float beta, const float *pf, int64_t pf_bytes,
                                             const tp__gemm_tile_ep *ep) {
    (void)rs_a;
    (void)ldc;
    if (m != 1 || n < 1) return;
    if (pf && pf_bytes > 0) tp__gemm_avx2_row_tile(true, kc, a, cs_a, b, ldb, c, n, alpha, beta, pf, pf_bytes, ep);
    else tp__gemm_avx2_row_tile(false, kc, a, cs_a, b, ldb, c, n, alpha, beta, NULL, 0, ep);
}

#define TP__GEMM_AVX2_ROWS(M)                                                                               \
    case M:                                                                                                 \
        if (pf) {                                                                                           \
            if (cs_a == 1) tp__gemm_avx2_tile(M, false, true, kc, a, rs_a, b, ldb, c, ldc, n, alpha, beta, pf, pf_bytes, ep); \
            else tp__gemm_avx2_tile(M, true, true, kc, a, rs_a, b, ldb, c, ldc, n, alpha, beta, pf, pf_bytes, ep);           \
        } else if (cs_a == 1) {                                                                             \
            tp__gemm_avx2_tile(M, false, false, kc, a, rs_a, b, ldb, c, ldc, n, alpha, beta, pf, 0, ep);         \
        } else {                                                                                            \
            tp__gemm_avx2_tile(M, true, false, kc, a, rs_a, b, ldb, c, ldc, n, alpha, beta, pf, 0, ep);          \
        }                                                                                                   \
        break;

TP_HIDDEN void tp__gemm_avx2_microkernel(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a,
                                         const float *b, int64_t ldb, float *c, int64_t ldc, int m, int n,
                                         float alpha, float beta, const float *pf, int64_t pf_bytes,
                                         const tp__gemm_tile_ep *ep) {
    if (pf_bytes <= 0) pf = NULL;
    switch (m) {
        TP__GEMM_AVX2_ROWS(1)
        TP__GEMM_AVX2_ROWS(2)
        TP__GEMM_AVX2_ROWS(3)
        TP__GEMM_AVX2_ROWS(4)
        TP__GEMM_AVX2_ROWS(5)
        TP__GEMM_AVX2_ROWS(6)
        default: break;
    }
}
#endif

#define TP__GEMM_FINISH_NAME tp__gemm_avx2_finish
#include "gemm_finish.h"
