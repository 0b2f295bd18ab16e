/*
 * gemm_avx512.c - the AVX-512 micro-kernel of the single-precision GEMM
 * (gemm.h): a 6 x 64 block of C in 24 zmm accumulators, B read as four zmm
 * per k, A broadcast one element per row. Compiled with -mavx512f (and
 * friends); gemm.c calls it only after cpuid and xgetbv said the CPU and
 * the OS support AVX-512.
 *
 * Each element of C is one sequential chain of FMAs over p, whatever m, n
 * or the A layout, so results do not depend on how a caller tiles C; the
 * row kernel (products of one row) sums four chains instead, and gemm.c
 * runs it for every tile of such products only; the dot path (N <= 15,
 * below) sums 16 chains over p mod 16 and a fixed tree, for every element
 * of the products gemm.c gives it.
 */
#include "gemm.h"

#if defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>

#include "avx512_util.h"

enum { MR = TP__GEMM_AVX512_MR, NR = TP__GEMM_AVX512_NR, NV = NR / 16 };

/* relu_y: tp__avx512_relu on 8 lanes (AVX512VL's masked moves) */
static inline __attribute__((always_inline)) __m256 tp__gemm_avx512_relu_y(__m256 v, int mode) {
    if (mode == 1) return _mm256_maskz_mov_ps(_mm256_cmp_ps_mask(v, _mm256_setzero_ps(), _CMP_NLE_UQ), v);
    if (mode == 2) return _mm256_min_ps(_mm256_set1_ps(6.0f), _mm256_max_ps(_mm256_setzero_ps(), v));
    return v;
}

/* C[0:m, 0:n] = alpha * acc + beta * C, then (ep) + bias[j] and relu
 * (unit: alpha 1 and beta 0, C = acc). */
static inline __attribute__((always_inline)) void
tp__gemm_avx512_store_body(const int m, const int nv, __m512 acc[MR][NV], float *c, int64_t ldc, int n, float alpha,
                           float beta, const bool ep, const float *bias, const int relu_in, const bool unit) {
    const __m512 alpha_v = _mm512_set1_ps(alpha), beta_v = _mm512_set1_ps(beta), zero = _mm512_setzero_ps();
    /* the tile's epilogue in registers: + bias, then relu or relu6 */
    const bool has_bias = ep && bias;
    const int relu = ep ? relu_in : 0;
    __m512 bias_v[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; j++)
        bias_v[j] = has_bias && j < nv ? _mm512_maskz_loadu_ps(tp__avx512_lanes(n - 16 * j), bias + 16 * j)
                                       : zero;
#define TP__GEMM_AVX512_TILE_EP(v, j)                                                              \
    do {                                                                                           \
        if (has_bias) v = _mm512_add_ps(v, bias_v[j]);                                             \
        v = tp__avx512_relu(v, relu);                                                              \
    } while (0)
    if (n == 16 * nv) {
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            if (i >= m) continue;
            float *ci = c + i * ldc;
#pragma GCC unroll 4
            for (int j = 0; j < NV; j++) {
                if (j >= nv) continue;
                __m512 v;
                if (unit) v = acc[i][j];
                else if (beta == 0.0f) v = _mm512_mul_ps(alpha_v, acc[i][j]);
                else if (beta == 1.0f) v = _mm512_fmadd_ps(alpha_v, acc[i][j], _mm512_loadu_ps(ci + 16 * j));
                else v = _mm512_fmadd_ps(alpha_v, acc[i][j], _mm512_mul_ps(beta_v, _mm512_loadu_ps(ci + 16 * j)));
                TP__GEMM_AVX512_TILE_EP(v, j);
                _mm512_storeu_ps(ci + 16 * j, v);
            }
        }
        return;
    }
    __mmask16 mask[NV];
    for (int j = 0; j < NV; j++) mask[j] = tp__avx512_lanes(n - 16 * j);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
        if (i >= m) continue;
        float *ci = c + i * ldc;
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) {
            if (j >= nv || !mask[j]) continue;
            __m512 v;
            if (unit) v = acc[i][j];
            else if (beta == 0.0f) v = _mm512_mul_ps(alpha_v, acc[i][j]);
            else if (beta == 1.0f)
                v = _mm512_fmadd_ps(alpha_v, acc[i][j], _mm512_maskz_loadu_ps(mask[j], ci + 16 * j));
            else
                v = _mm512_fmadd_ps(alpha_v, acc[i][j],
                                    _mm512_mul_ps(beta_v, _mm512_maskz_loadu_ps(mask[j], ci + 16 * j)));
            TP__GEMM_AVX512_TILE_EP(v, j);
            _mm512_mask_storeu_ps(ci + 16 * j, mask[j], v);
        }
    }
#undef TP__GEMM_AVX512_TILE_EP
}

/* The store with alpha 1 and beta 0 (C = acc: the product's only K block,
 * or its first) and the activation mode as constants: the same values as
 * the general form (1 * x is x exactly), without its multiply a vector and
 * the mode's tests. */
static inline __attribute__((always_inline)) void tp__gemm_avx512_store(const int m, const int nv, __m512 acc[MR][NV],
                                                                        float *c, int64_t ldc, int n, float alpha,
                                                                        float beta, const bool ep, const float *bias,
                                                                        int relu_in) {
    const int relu = ep ? relu_in : 0;
    if (alpha == 1.0f && beta == 0.0f) {
        if (relu == 2) tp__gemm_avx512_store_body(m, nv, acc, c, ldc, n, alpha, beta, ep, bias, 2, true);
        else if (relu == 1) tp__gemm_avx512_store_body(m, nv, acc, c, ldc, n, alpha, beta, ep, bias, 1, true);
        else tp__gemm_avx512_store_body(m, nv, acc, c, ldc, n, alpha, beta, ep, bias, 0, true);
        return;
    }
    tp__gemm_avx512_store_body(m, nv, acc, c, ldc, n, alpha, beta, ep, bias, relu, false);
}

/* The kernel body for exactly m rows and nv column groups of 16 (n <= 16*nv;
 * narrow tiles at the right edge of C skip the groups they do not need);
 * packed_a selects the packed layout (rs 1, cs MR, known at compile time)
 * over row-major A (cs 1). */
static inline __attribute__((always_inline)) void tp__gemm_avx512_tile(
    const int m, const int nv, const bool packed_a, const bool prefetch, int64_t kc, const float *a, int64_t rs_a, const float *b,
    int64_t ldb, float *c, int64_t ldc, int n, float alpha, float beta, const float *pf, int64_t pf_bytes,
    const tp__gemm_tile_ep *tep) {
    const int64_t rs = packed_a ? 1 : rs_a;
    const int64_t cs = packed_a ? MR : 1;
    __m512 acc[MR][NV];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) acc[i][j] = _mm512_setzero_ps();
    }
    /* C is touched only after the K loop: fetch its lines meanwhile, when
     * the loop is long enough for that to matter (TP__GEMM_C_PREFETCH_KC:
     * on short ones the 30 prefetches only cost; Zen 4, a timing loop over
     * tp__gemm_run (B packed and hot, bias epilogue, 1 thread),
     * 12544x16x96 436 -> 418 us without them, 3136x32x96 -2.8%, K 64-576
     * -0.5 to -1.3%). */
    if (kc >= TP__GEMM_C_PREFETCH_KC) {
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
#pragma GCC unroll 4
            for (int j = 0; j < NV; j++)
                if (i < m && j < nv) _mm_prefetch((const char *)(c + i * ldc + 16 * j), _MM_HINT_T0);
            if (i < m) _mm_prefetch((const char *)(c + i * ldc + 16 * nv - 1), _MM_HINT_T0);
        }
    }
    /* B is read only up to column n (it may be a caller's row-major B). */
    const __mmask16 last_mask = tp__avx512_lanes(n - 16 * (nv - 1));
    const float *a3 = !packed_a && m > 3 ? a + 3 * rs : a; /* rows 3-5 when there are any */
    /* The prefetch hint (a separate instance: its registers and the extra
     * load slow the plain kernel), paced by tp__gemm_pf_step, without a
     * branch. Before, a line a step until the range was covered, then
     * nothing new: B cold (gemm_bench -c, AVX-512 Xeon, 1 thread)
     * 49x4608x512 116-120 -> 133-142 GFLOP/s, 49x512x2048 122-126 ->
     * 132-134, 196x1024x256 144-148 -> 152-154 (2 threads 228-232 ->
     * 243-252, 238-246 -> 256, 276-283 -> 294-295); ResNet-50's last stage
     * 0.96-0.98x the time, the model 0.97-0.99x (alternating runs, 1 and 2
     * threads). Its division costs short calls a little (12544x27x64 hot,
     * AVX2 level: 3-4%), but a division-free counter (Bresenham) gained
     * only a third as much in ResNet-50's last stage. */
    const char *pf_at = (const char *)pf;
    const uint32_t pf_step = prefetch ? tp__gemm_pf_step(pf_bytes, kc) : 0;
    uint32_t pf_q = 0;
#pragma GCC unroll 4
    for (int64_t p = 0; p < kc; p++) {
        __m512 bv[NV];
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) {
            if (j < nv - 1) bv[j] = _mm512_loadu_ps(b + 16 * j);
            else if (j == nv - 1) bv[j] = _mm512_maskz_loadu_ps(last_mask, b + 16 * j);
            else bv[j] = _mm512_setzero_ps();
        }
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            if (i < m) {
                /* rows 0-2 and 3-5 from two bases at 0, 1 and 2 row strides:
                 * x86 addressing (base + rs*4 or rs*8) without a register
                 * per row, which the compiler otherwise spills */
                const float *ap = packed_a ? a + i : (i < 3 ? a : a3) + (i % 3) * rs;
                const __m512 ai = _mm512_set1_ps(*ap);
#pragma GCC unroll 4
                for (int j = 0; j < NV; j++)
                    if (j < nv) acc[i][j] = _mm512_fmadd_ps(ai, bv[j], acc[i][j]);
            }
        }
        if (prefetch) {
            _mm_prefetch(pf_at + ((pf_q >> 16) << 6), _MM_HINT_T1);
            pf_q += pf_step;
        }
        a += cs;
        a3 += cs;
        b += ldb;
        /* opaque to the optimiser: rows stay base + stride addressing
         * instead of one induction variable (register) per row */
        if (!packed_a) __asm__("" : "+r"(a), "+r"(a3));
    }
    /* the store, with the tile's epilogue only in the instance that has one
     * (its tests would otherwise cost the plain GEMM's short-K calls) */
    if (tep) tp__gemm_avx512_store(m, nv, acc, c, ldc, n, alpha, beta, true, tep->bias, tep->relu);
    else tp__gemm_avx512_store(m, nv, acc, c, ldc, n, alpha, beta, false, NULL, false);
}

#define TP__GEMM_AVX512_TILE(M, NVEC)                                                                      \
    case NVEC:                                                                                             \
        if (pf) {                                                                                          \
            if (cs_a == 1) tp__gemm_avx512_tile(M, NVEC, false, true, kc, a, rs_a, b, ldb, c, ldc, n, alpha, beta, pf, pf_bytes, ep); \
            else tp__gemm_avx512_tile(M, NVEC, true, true, kc, a, rs_a, b, ldb, c, ldc, n, alpha, beta, pf, pf_bytes, ep);           \
        } else if (cs_a == 1) {                                                                            \
            tp__gemm_avx512_tile(M, NVEC, false, false, kc, a, rs_a, b, ldb, c, ldc, n, alpha, beta, pf, 0, ep);  \
        } else {                                                                                           \
            tp__gemm_avx512_tile(M, NVEC, true, false, kc, a, rs_a, b, ldb, c, ldc, n, alpha, beta, pf, 0, ep);   \
        }                                                                                                  \
        break;
#define TP__GEMM_AVX512_ROWS(M)                     \
    case M:                                         \
        switch ((n + 15) / 16) {                    \
            TP__GEMM_AVX512_TILE(M, 1)              \
            TP__GEMM_AVX512_TILE(M, 2)              \
            TP__GEMM_AVX512_TILE(M, 3)              \
            TP__GEMM_AVX512_TILE(M, 4)              \
            default: break;                         \
        }                                           \
        break;

TP_HIDDEN void tp__gemm_avx512_microkernel(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a,
                                           const float *b, int64_t ldb, float *c, int64_t ldc, int m, int n,
                                           float alpha, float beta, const float *pf, int64_t pf_bytes,
                                           const tp__gemm_tile_ep *ep) {
    if (pf_bytes <= 0) pf = NULL;
    switch (m) {
        TP__GEMM_AVX512_ROWS(1)
        TP__GEMM_AVX512_ROWS(2)
        TP__GEMM_AVX512_ROWS(3)
        TP__GEMM_AVX512_ROWS(4)
        TP__GEMM_AVX512_ROWS(5)
        TP__GEMM_AVX512_ROWS(6)
        default: break;
    }
}

/* ---- Row-vector products: M = 1 ----
 * One row of C has one chain of FMAs per 16 columns: at N <= 64 that is 1
 * to 4 chains, each step waiting on the FMA's latency (4 cycles) while 2
 * FMAs a cycle could issue - a classifier of 10 outputs over 4096 inputs
 * took 7-8 us, latency-bound. Here each element's sum over p is four
 * interleaved chains (p mod 4), added ((0 + 1) + (2 + 3)) at the end: a
 * different order than the wide kernel's, so gemm.c uses this kernel for
 * whole products of one row (every tile of such a product, whatever the
 * thread split), never for one row of a larger product. */
static inline __attribute__((always_inline)) void tp__gemm_avx512_row_tile(const int nv, int64_t kc, const float *a,
                                                                           int64_t cs_a, const float *b, int64_t ldb,
                                                                           float *c, int n, float alpha, float beta,
                                                                           const float *pf, int64_t pf_bytes,
                                                                           const tp__gemm_tile_ep *tep) {
    __m512 acc[4][NV], sum[MR][NV];
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) acc[u][j] = _mm512_setzero_ps();
    const __mmask16 last_mask = tp__avx512_lanes(n - 16 * (nv - 1));
    const char *pf_at = (const char *)pf;
    const char *pf_last = pf ? pf_at + ((pf_bytes - 1) & ~(int64_t)63) : pf_at;
    int64_t p = 0;
#define TP__GEMM_ROW_STEP(U)                                                                            do {                                                                                                    const __m512 ai = _mm512_set1_ps(a[(p + (U)) * cs_a]);                                              const float *bp = b + (p + (U)) * ldb;                                                              _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++) if (j < nv) {                                      const __m512 bv = j < nv - 1 ? _mm512_loadu_ps(bp + 16 * j)                                                                       : _mm512_maskz_loadu_ps(last_mask, bp + 16 * j);                        acc[U][j] = _mm512_fmadd_ps(ai, bv, acc[U][j]);                                                 }                                                                                               } while (0)
    for (; p + 4 <= kc; p += 4) {
        TP__GEMM_ROW_STEP(0);
        TP__GEMM_ROW_STEP(1);
        TP__GEMM_ROW_STEP(2);
        TP__GEMM_ROW_STEP(3);
        if (pf) {
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
        sum[0][j] = _mm512_add_ps(_mm512_add_ps(acc[0][j], acc[1][j]), _mm512_add_ps(acc[2][j], acc[3][j]));
    if (tep) tp__gemm_avx512_store(1, nv, sum, c, 0, n, alpha, beta, true, tep->bias, tep->relu);
    else tp__gemm_avx512_store(1, nv, sum, c, 0, n, alpha, beta, false, NULL, false);
}

TP_HIDDEN void tp__gemm_avx512_row_microkernel(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a, const float *b,
                                               int64_t ldb, float *c, int64_t ldc, int m, int n, float alpha,
                                               float beta, const float *pf, int64_t pf_bytes,
                                               const tp__gemm_tile_ep *ep) {
    (void)rs_a;
    (void)ldc;
    if (m != 1 || n < 1) return;
    if (pf_bytes <= 0) pf = NULL;
    switch ((n + 15) / 16) {
    case 1: tp__gemm_avx512_row_tile(1, kc, a, cs_a, b, ldb, c, n, alpha, beta, pf, pf_bytes, ep); break;
    case 2: tp__gemm_avx512_row_tile(2, kc, a, cs_a, b, ldb, c, n, alpha, beta, pf, pf_bytes, ep); break;
    case 3: tp__gemm_avx512_row_tile(3, kc, a, cs_a, b, ldb, c, n, alpha, beta, pf, pf_bytes, ep); break;
    default: tp__gemm_avx512_row_tile(4, kc, a, cs_a, b, ldb, c, n, alpha, beta, pf, pf_bytes, ep); break;
    }
}

/* ---- Narrow products: N <= 32 ----
 * A 12 x 32 block of C: column group 0 one zmm per row, group 1 a zmm
 * (N 25-32), a ymm (N 17-24: half a zmm's FMA slot on cores that split
 * 512-bit operations in two) or nothing (N <= 16). The 6 x 64 kernel
 * spends 6 FMAs a k step on N = 16, with 6 accumulators, and masks half
 * of its last zmm at N = 24; MobileNet's and EfficientNet's 16- and
 * 24-channel projections are such products. Same reduction order per
 * element as the wide kernel (one FMA chain over p). */

enum { NMR = TP__GEMM_AVX512_NARROW_MR };

/* V = alpha * ACC + beta * C (C read only when beta is not 0), + bias: the
 * wide kernel's store (tp__gemm_avx512_store) for one vector. */
#define TP__GEMM_NARROW_VALUE(V, ACC, LOADC, MUL, FMA, ADD, SET1, BIASV)        \
    do {                                                                        \
        if (beta == 0.0f) V = MUL(SET1(alpha), ACC);                            \
        else if (beta == 1.0f) V = FMA(SET1(alpha), ACC, LOADC);                \
        else V = FMA(SET1(alpha), ACC, MUL(SET1(beta), LOADC));                 \
        if (has_bias) V = ADD(V, BIASV);                                        \
    } while (0)

/* kind 1: n <= 16; 2: n 17-24 (a zmm and a ymm); 3: n 25-32 (two zmm). */
static inline __attribute__((always_inline)) void tp__gemm_avx512_narrow_tile(
    const int m, const int kind, const bool packed_a, int64_t kc, const float *a, int64_t rs_a, const float *b,
    int64_t ldb, float *c, int64_t ldc, int n, float alpha, float beta, const tp__gemm_tile_ep *tep) {
    const int64_t rs = packed_a ? 1 : rs_a;
    const int64_t cs = packed_a ? NMR : 1;
    const __mmask16 m0 = tp__avx512_lanes(n), m1 = tp__avx512_lanes(n - 16);
    const __mmask8 m1y = (__mmask8)m1;
    __m512 acc0[NMR], acc1[NMR];
    __m256 acc1y[NMR];
#pragma GCC unroll 12
    for (int i = 0; i < NMR; i++) {
        acc0[i] = _mm512_setzero_ps();
        acc1[i] = _mm512_setzero_ps();
        acc1y[i] = _mm256_setzero_ps();
    }
    /* rows 0-2, 3-5, 6-8, 9-11 from four bases at 0, 1 and 2 row strides */
    const float *a3 = !packed_a && m > 3 ? a + 3 * rs : a, *a6 = !packed_a && m > 6 ? a + 6 * rs : a;
    const float *a9 = !packed_a && m > 9 ? a + 9 * rs : a;
#pragma GCC unroll 4
    for (int64_t p = 0; p < kc; p++) {
        const __m512 b0 = kind == 1 ? _mm512_maskz_loadu_ps(m0, b) : _mm512_loadu_ps(b);
        const __m512 b1 = kind == 3 ? _mm512_maskz_loadu_ps(m1, b + 16) : _mm512_setzero_ps();
        const __m256 b1y = kind == 2 ? _mm256_maskz_loadu_ps(m1y, b + 16) : _mm256_setzero_ps();
#pragma GCC unroll 12
        for (int i = 0; i < NMR; i++) {
            if (i < m) {
                const float *base = i < 3 ? a : i < 6 ? a3 : i < 9 ? a6 : a9;
                const float *ap = packed_a ? a + i : base + (i % 3) * rs;
                const __m512 ai = _mm512_set1_ps(*ap);
                acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
                if (kind == 3) acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
                if (kind == 2) acc1y[i] = _mm256_fmadd_ps(_mm512_castps512_ps256(ai), b1y, acc1y[i]);
            }
        }
        a += cs;
        a3 += cs;
        a6 += cs;
        a9 += cs;
        b += ldb;
        /* opaque to the optimiser: rows stay base + stride addressing */
        if (!packed_a) __asm__("" : "+r"(a), "+r"(a3), "+r"(a6), "+r"(a9));
    }
    const bool has_bias = tep && tep->bias;
    const int relu = tep ? tep->relu : 0;
    const __m512 bias0 = has_bias ? _mm512_maskz_loadu_ps(m0, tep->bias) : _mm512_setzero_ps();
    const __m512 bias1 = has_bias && kind == 3 ? _mm512_maskz_loadu_ps(m1, tep->bias + 16) : _mm512_setzero_ps();
    const __m256 bias1y = has_bias && kind == 2 ? _mm256_maskz_loadu_ps(m1y, tep->bias + 16) : _mm256_setzero_ps();
#pragma GCC unroll 12
    for (int i = 0; i < NMR; i++) {
        if (i >= m) continue;
        float *ci = c + i * ldc;
        __m512 v;
        TP__GEMM_NARROW_VALUE(v, acc0[i], _mm512_maskz_loadu_ps(m0, ci), _mm512_mul_ps, _mm512_fmadd_ps,
                              _mm512_add_ps, _mm512_set1_ps, bias0);
        _mm512_mask_storeu_ps(ci, m0, tp__avx512_relu(v, relu));
        if (kind == 3) {
            TP__GEMM_NARROW_VALUE(v, acc1[i], _mm512_maskz_loadu_ps(m1, ci + 16), _mm512_mul_ps, _mm512_fmadd_ps,
                                  _mm512_add_ps, _mm512_set1_ps, bias1);
            _mm512_mask_storeu_ps(ci + 16, m1, tp__avx512_relu(v, relu));
        }
        if (kind == 2) {
            __m256 w;
            TP__GEMM_NARROW_VALUE(w, acc1y[i], _mm256_maskz_loadu_ps(m1y, ci + 16), _mm256_mul_ps, _mm256_fmadd_ps,
                                  _mm256_add_ps, _mm256_set1_ps, bias1y);
            _mm256_mask_storeu_ps(ci + 16, m1y, tp__gemm_avx512_relu_y(w, relu));
        }
    }
}
#undef TP__GEMM_NARROW_VALUE

#define TP__GEMM_NARROW_TILE(M, KIND)                                                                              \
    case KIND:                                                                                                     \
        if (cs_a == 1) tp__gemm_avx512_narrow_tile(M, KIND, false, kc, a, rs_a, b, ldb, c, ldc, n, alpha, beta, ep); \
        else tp__gemm_avx512_narrow_tile(M, KIND, true, kc, a, rs_a, b, ldb, c, ldc, n, alpha, beta, ep);          \
        break;
#define TP__GEMM_NARROW_ROWS(M)                  \
    case M:                                      \
        switch (n <= 16 ? 1 : n <= 24 ? 2 : 3) { \
            TP__GEMM_NARROW_TILE(M, 1)           \
            TP__GEMM_NARROW_TILE(M, 2)           \
            TP__GEMM_NARROW_TILE(M, 3)           \
            default: break;                      \
        }                                        \
        break;

TP_HIDDEN void tp__gemm_avx512_narrow_microkernel(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a,
                                                  const float *b, int64_t ldb, float *c, int64_t ldc, int m, int n,
                                                  float alpha, float beta, const float *pf, int64_t pf_bytes,
                                                  const tp__gemm_tile_ep *ep) {
    (void)pf; /* B of 16 to 32 columns is small: no prefetch hint */
    (void)pf_bytes;
    switch (m) {
        TP__GEMM_NARROW_ROWS(1)
        TP__GEMM_NARROW_ROWS(2)
        TP__GEMM_NARROW_ROWS(3)
        TP__GEMM_NARROW_ROWS(4)
        TP__GEMM_NARROW_ROWS(5)
        TP__GEMM_NARROW_ROWS(6)
        TP__GEMM_NARROW_ROWS(7)
        TP__GEMM_NARROW_ROWS(8)
        TP__GEMM_NARROW_ROWS(9)
        TP__GEMM_NARROW_ROWS(10)
        TP__GEMM_NARROW_ROWS(11)
        TP__GEMM_NARROW_ROWS(12)
        default: break;
    }
}

/* ---- Dot products for N <= 15 (tp__gemm_avx512_dot) ----
 * A block of R <= 4 rows x J <= 4 columns of C: acc[4c + r] sums
 * A[r][p] * BT[c][p] over p in 16 lanes (p mod 16), so every FMA's 16
 * lanes are useful where the 12 x 32 kernel spends one broadcast and a
 * 16-lane FMA per row and k step on N = 10 (a classifier). K runs in
 * blocks of TP__GEMM_DOT_KB for every column group of a row block before
 * the next block, so that the rows' block of A stays in L1 across the
 * groups (8 x 4096 x 10 read A and BT from L2 at 64 bytes a cycle without
 * it); between blocks a group's accumulators wait in acc_buf, stored and
 * loaded exactly, so each lane's chain of FMAs is the same whatever K. */
enum { TP__GEMM_DOT_KB = 512 };
/* One 16-wide step of K at p: A's lanes outside km are zeros (BT is
 * zero-padded to a multiple of 16). */
static inline __attribute__((always_inline)) void tp__gemm_avx512_dot_step(const int R, const int J, const float *a,
                                                                          int64_t rs_a, const float *bt,
                                                                          int64_t ldbt, int64_t p, __mmask16 km,
                                                                          __m512 *acc) {
    __m512 av[4], bv[4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        av[r] = km == 0xFFFF ? _mm512_loadu_ps(a + r * rs_a + p) : _mm512_maskz_loadu_ps(km, a + r * rs_a + p);
#pragma GCC unroll 4
    for (int c = 0; c < J; c++) bv[c] = _mm512_loadu_ps(bt + c * ldbt + p);
#pragma GCC unroll 4
    for (int c = 0; c < J; c++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) acc[4 * c + r] = _mm512_fmadd_ps(av[r], bv[c], acc[4 * c + r]);
}
static inline __attribute__((always_inline)) void tp__gemm_avx512_dot_block(const int R, const int J, int64_t kc,
                                                                           const float *a, int64_t rs_a,
                                                                           const float *bt, int64_t ldbt,
                                                                           __m512 *acc_buf, bool first, bool last,
                                                                           float *out) {
    __m512 acc[16];
#pragma GCC unroll 16
    for (int q = 0; q < 16; q++) acc[q] = first ? _mm512_setzero_ps() : acc_buf[q];
    int64_t p = 0;
    for (; p + 16 <= kc; p += 16) tp__gemm_avx512_dot_step(R, J, a, rs_a, bt, ldbt, p, (__mmask16)0xFFFF, acc);
    if (p < kc) tp__gemm_avx512_dot_step(R, J, a, rs_a, bt, ldbt, p, tp__avx512_lanes(kc - p), acc);
    if (!last) {
#pragma GCC unroll 16
        for (int q = 0; q < 16; q++) acc_buf[q] = acc[q];
        return;
    }
    /* The 16 sums by one tree (the same for every element): 256-bit
     * halves, 128-bit quarters, then pairs and neighbours within them;
     * out[4r + c] = sum of acc[4c + r]'s lanes. */
    __m512 v[8], w[4], x[2];
#pragma GCC unroll 8
    for (int q = 0; q < 8; q++)
        v[q] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * q], acc[2 * q + 1], 0x44),
                             _mm512_shuffle_f32x4(acc[2 * q], acc[2 * q + 1], 0xEE));
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++)
        w[q] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * q], v[2 * q + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(v[2 * q], v[2 * q + 1], _MM_SHUFFLE(3, 1, 3, 1)));
#pragma GCC unroll 2
    for (int q = 0; q < 2; q++)
        x[q] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * q], w[2 * q + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(w[2 * q], w[2 * q + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    _mm512_storeu_ps(out, _mm512_add_ps(_mm512_shuffle_ps(x[0], x[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                        _mm512_shuffle_ps(x[0], x[1], _MM_SHUFFLE(3, 1, 3, 1))));
}

#define TP__GEMM_DOT_J(R, J)                                                                              \
    case J:                                                                                               \
        tp__gemm_avx512_dot_block(R, J, kc, a + p0, rs_a, bt + j0 * ldbt + p0, ldbt, acc_buf[j0 / 4], p0 == 0, \
                                  last, s[j0 / 4]);                                                       \
        break;
#define TP__GEMM_DOT_R(R)                                                                         \
    case R:                                                                                       \
        switch (cols) {                                                                           \
            TP__GEMM_DOT_J(R, 1) TP__GEMM_DOT_J(R, 2) TP__GEMM_DOT_J(R, 3) TP__GEMM_DOT_J(R, 4) \
            default: break;                                                                       \
        }                                                                                         \
        break;

TP_HIDDEN void tp__gemm_avx512_dot(int64_t m, int n, int64_t k, const float *a, int64_t rs_a, const float *bt,
                                   int64_t ldbt, float *c, int64_t ldc, float alpha, float beta,
                                   const tp__gemm_tile_ep *ep) {
    const __mmask16 nm = tp__avx512_lanes(n);
    const bool has_bias = ep && ep->bias;
    const int relu = ep ? ep->relu : 0;
    const __m512 bias = has_bias ? _mm512_maskz_loadu_ps(nm, ep->bias) : _mm512_setzero_ps();
    __m512 acc_buf[4][16];
    float s[4][16]; /* per column group g: s[g][4r + c], all 16 stored by the block's last K step */
    for (int64_t i = 0; i < m; i += 4, a += 4 * rs_a) {
        const int rows = m - i < 4 ? (int)(m - i) : 4;
        for (int64_t p0 = 0; p0 < k; p0 += TP__GEMM_DOT_KB) {
            const int64_t kc = k - p0 < TP__GEMM_DOT_KB ? k - p0 : TP__GEMM_DOT_KB;
            const bool last = p0 + kc >= k;
            for (int j0 = 0; j0 < n; j0 += 4) {
                const int cols = n - j0 < 4 ? n - j0 : 4;
                switch (rows) {
                    TP__GEMM_DOT_R(1)
                    TP__GEMM_DOT_R(2)
                    TP__GEMM_DOT_R(3)
                    TP__GEMM_DOT_R(4)
                    default: break;
                }
            }
        }
        for (int r = 0; r < rows; r++) {
            /* row r's sums: 4 columns from each group's 16 (s[g][4r + c]),
             * put together in registers (from scalar stores, a vector load
             * of them waited on store forwarding: a tenth of the time of
             * 32 x 512 x 10) */
            __m512 sum = _mm512_castps128_ps512(_mm_loadu_ps(&s[0][4 * r]));
            if (n > 4) sum = _mm512_insertf32x4(sum, _mm_loadu_ps(&s[1][4 * r]), 1);
            if (n > 8) sum = _mm512_insertf32x4(sum, _mm_loadu_ps(&s[2][4 * r]), 2);
            if (n > 12) sum = _mm512_insertf32x4(sum, _mm_loadu_ps(&s[3][4 * r]), 3);
            sum = _mm512_maskz_mov_ps(nm, sum);
            float *ci = c + (i + r) * ldc;
            __m512 y;
            if (beta == 0.0f) y = _mm512_mul_ps(_mm512_set1_ps(alpha), sum);
            else if (beta == 1.0f) y = _mm512_fmadd_ps(_mm512_set1_ps(alpha), sum, _mm512_maskz_loadu_ps(nm, ci));
            else
                y = _mm512_fmadd_ps(_mm512_set1_ps(alpha), sum,
                                    _mm512_mul_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(nm, ci)));
            if (has_bias) y = _mm512_add_ps(y, bias);
            _mm512_mask_storeu_ps(ci, nm, tp__avx512_relu(y, relu));
        }
    }
}
#undef TP__GEMM_DOT_R
#undef TP__GEMM_DOT_J
#endif

#define TP__GEMM_FINISH_NAME tp__gemm_avx512_finish
#include "gemm_finish.h"
