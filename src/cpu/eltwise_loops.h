/*
 * eltwise_loops.h - the float32 loops behind tp_eltwise_table, included
 * by one file per ISA level with TP_ELT_TABLE naming the table to define.
 * Plain C loops that gcc vectorises at -O3 for the including file's ISA
 * (and, where it does not - the NaN-propagating max - GCC vector extensions
 * of the ISA's width, TP_ELT_VLANES); math functions come from vmath.h
 * (branch-free, same formula at every width; the avx2/avx512 builds contract
 * multiply-adds into FMAs, so their last bits may differ from the scalar
 * build's, within the bounds test_vmath_fma checks). Row sums keep 64
 * partial sums combined in a fixed order (sum, below; softmax's exp sum has
 * 16, vmath.h), so a result does not depend on how many threads split the
 * rows.
 */
#include <math.h>
#include <string.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "eltwise.h"
#include "vmath.h"

#ifndef TP_ELT_TABLE
#error "define TP_ELT_TABLE before including eltwise_loops.h"
#endif

#define LOOP(expr)                                                                 \
    do {                                                                           \
        for (int64_t i = 0; i < n; i++) {                                          \
            float x = a[i];                                                        \
            o[i] = (expr);                                                         \
        }                                                                          \
    } while (0)

/* LOOP for the ops bound by their arithmetic (exp, gelu, ...): 64 floats
 * (one vector at a time at most 16 wide) per step, each step prefetching
 * the input 4 KiB ahead. With the core busy on ~40 operations per vector
 * the hardware prefetcher alone left a 64 MiB gelu waiting on memory for a
 * third of its time (64 MiB, AVX-512 Xeon, old and new alternating:
 * 19.2-19.5 -> 14.6-19.2 ms in a quiet minute, 21.1-22.4 -> 19.7-20.8 in a
 * busy one; 2 or 8 KiB ahead gained less). The same arithmetic per element
 * as LOOP, so the same results. */
#define TP__ELT_PF_STEP 64
#define LOOP_PF(expr)                                                                  \
    do {                                                                               \
        int64_t i0 = 0;                                                                \
        for (; i0 + TP__ELT_PF_STEP <= n; i0 += TP__ELT_PF_STEP) {                     \
            for (int q = 0; q < TP__ELT_PF_STEP; q += 16)                              \
                __builtin_prefetch(a + i0 + TP__VM_PF_AHEAD + q, 0, 3);                \
            for (int64_t i = i0; i < i0 + TP__ELT_PF_STEP; i++) {                      \
                float x = a[i];                                                        \
                o[i] = (expr);                                                         \
            }                                                                          \
        }                                                                              \
        for (int64_t i = i0; i < n; i++) {                                             \
            float x = a[i];                                                            \
            o[i] = (expr);                                                             \
        }                                                                              \
    } while (0)

/* NaN-propagating max/min; `|` rather than `||` keeps them branch-free so
 * the loops using them vectorise (a short-circuit makes gcc emit scalar
 * compare-and-branch code). */
static inline float max_nan(float x, float y) { return tp__vm_sel((x > y) | (x != x), x, y); }
static inline float min_nan(float x, float y) { return tp__vm_sel((x < y) | (x != x), x, y); }

#define BIN_CASES(A, B)                                                                 \
    switch (op) {                                                                       \
    case TP_ELT_ADD: for (int64_t i = 0; i < n; i++) o[i] = A + alpha * B; break;       \
    case TP_ELT_SUB: for (int64_t i = 0; i < n; i++) o[i] = A - alpha * B; break;       \
    case TP_ELT_MUL: for (int64_t i = 0; i < n; i++) o[i] = A * B; break;               \
    case TP_ELT_DIV: for (int64_t i = 0; i < n; i++) o[i] = A / B; break;               \
    case TP_ELT_MAX: for (int64_t i = 0; i < n; i++) o[i] = max_nan(A, B); break;       \
    case TP_ELT_MIN: for (int64_t i = 0; i < n; i++) o[i] = min_nan(A, B); break;       \
    default: break;                                                                     \
    }

static void binary(int op, float *o, const float *a, int64_t sa, const float *b, int64_t sb, int64_t n, float alpha) {
    if (alpha == 1.0f && (op == TP_ELT_ADD || op == TP_ELT_SUB)) {
        /* the common case without the multiply (keeps results exact as a + b) */
        float sign = op == TP_ELT_ADD ? 1.0f : -1.0f;
        if (sa && sb) {
            if (sign > 0) for (int64_t i = 0; i < n; i++) o[i] = a[i] + b[i];
            else for (int64_t i = 0; i < n; i++) o[i] = a[i] - b[i];
        } else if (sa) {
            float y = b[0];
            if (sign > 0) for (int64_t i = 0; i < n; i++) o[i] = a[i] + y;
            else for (int64_t i = 0; i < n; i++) o[i] = a[i] - y;
        } else if (sb) {
            float x = a[0];
            if (sign > 0) for (int64_t i = 0; i < n; i++) o[i] = x + b[i];
            else for (int64_t i = 0; i < n; i++) o[i] = x - b[i];
        } else {
            float v = sign > 0 ? a[0] + b[0] : a[0] - b[0];
            for (int64_t i = 0; i < n; i++) o[i] = v;
        }
        return;
    }
    if (sa && sb) {
        BIN_CASES(a[i], b[i])
    } else if (sa) {
        float y = b[0];
        BIN_CASES(a[i], y)
    } else if (sb) {
        float x = a[0];
        BIN_CASES(x, b[i])
    } else {
        float x = a[0], y = b[0];
        BIN_CASES(x, y)
    }
}

static void unary(int op, float *o, const float *a, int64_t n, const float *params) {
    switch (op) {
    case TP_ELT_RELU: LOOP(x > 0.0f ? x : (x != x ? x : 0.0f)); break;
    case TP_ELT_NEG: LOOP(-x); break;
    case TP_ELT_ABS: LOOP(fabsf(x)); break;
    case TP_ELT_EXP: LOOP_PF(tp__exp_f32(x)); break;
    case TP_ELT_TANH: LOOP_PF(tp__tanh_f32(x)); break;
#if TP_ELT_VLANES == 16 && defined(__AVX512F__)
    case TP_ELT_SIGMOID: tp__vsigmoid_v16(o, a, n); break;
    case TP_ELT_SILU: tp__vsilu_v16(o, a, n); break; /* silu(-inf) NaN, as PyTorch */
    case TP_ELT_GELU: tp__vgelu_v16(o, a, n); break;  /* gelu(-inf) NaN, as PyTorch */
#else
    case TP_ELT_SIGMOID: LOOP_PF(tp__sigmoid_f32(x)); break;
#if TP_ELT_VLANES == 8 && defined(__AVX2__) && defined(__FMA__)
    case TP_ELT_SILU: tp__vsilu_v8(o, a, n); break; /* silu(-inf) NaN, as PyTorch */
    case TP_ELT_GELU: tp__vgelu_v8(o, a, n); break;  /* gelu(-inf) NaN, as PyTorch */
#else
    case TP_ELT_GELU: LOOP_PF(tp__vm_blend(x == -INFINITY, NAN, tp__gelu_f32(x))); break;
    case TP_ELT_SILU: LOOP_PF(tp__vm_sel(x == -INFINITY, NAN, tp__silu_f32(x))); break; /* -inf * 0, as PyTorch */
#endif
#endif
    case TP_ELT_SQRT: LOOP(sqrtf(x)); break;
    case TP_ELT_RSQRT: LOOP(1.0f / sqrtf(x)); break;
    case TP_ELT_RECIPROCAL: LOOP(1.0f / x); break;
    case TP_ELT_SQUARE: LOOP(x * x); break;
    case TP_ELT_ERF: LOOP_PF(tp__erf_f32(x)); break;
    case TP_ELT_LOG: LOOP_PF(tp__log_f32(x)); break;
    case TP_ELT_RELU6: LOOP(x != x ? x : x < 0.0f ? 0.0f : x > 6.0f ? 6.0f : x); break;
    case TP_ELT_HARDSWISH: LOOP(x * (x + 3.0f < 0.0f ? 0.0f : x + 3.0f > 6.0f ? 6.0f : x + 3.0f) / 6.0f); break;
    case TP_ELT_HARDSIGMOID: LOOP(tp__vm_sel(x + 3.0f < 0.0f, 0.0f, tp__vm_sel(x + 3.0f > 6.0f, 6.0f, x + 3.0f)) / 6.0f); break;
    case TP_ELT_GELU_TANH: LOOP_PF(tp__vm_sel(x == -INFINITY, NAN, tp__gelu_tanh_f32(x))); break;
    case TP_ELT_LEAKY_RELU: {
        float s = params[0];
        LOOP(tp__vm_sel(x > 0.0f, x, x * s));
        break;
    }
    case TP_ELT_CLAMP: {
        float lo = params[0], hi = params[1];
        /* min(max(x, lo), hi) as PyTorch: with lo > hi every result is hi */
        LOOP(x != x ? x : (x < lo ? lo : x) > hi ? hi : (x < lo ? lo : x));
        break;
    }
    default: break;
    }
}

/* Row sums keep 64 partial sums: element i is added to part[(i / 16) % 4]
 * [i % 16] in increasing i (four independent chains of vector adds, where
 * one chain waited on each add's latency), the parts are combined lane by
 * lane as ((p0 + p1) + p2) + p3, and the 16 lanes are folded pairwise (lane
 * k += lane k + 8, then + 4, + 2, + 1). The same order at every level. */
enum { PARTS = 4 };

static float fold_parts(float part[PARTS][16]) {
    for (int q = 1; q < PARTS; q++)
        for (int k = 0; k < 16; k++) part[0][k] += part[q][k];
    for (int w = 8; w >= 1; w /= 2)
        for (int k = 0; k < w; k++) part[0][k] += part[0][k + w];
    return part[0][0];
}

static float sum(const float *a, int64_t n) {
    float part[PARTS][16] = {{0}};
    int64_t i = 0;
    for (; i + 16 * PARTS <= n; i += 16 * PARTS)
        for (int q = 0; q < PARTS; q++)
            for (int k = 0; k < 16; k++) part[q][k] += a[i + 16 * q + k];
    int q = 0;
    for (; i + 16 <= n; i += 16, q++)
        for (int k = 0; k < 16; k++) part[q][k] += a[i + k];
    for (int k = 0; i + k < n; k++) part[q][k] += a[i + k];
    return fold_parts(part);
}

/* Native-width vectors (GCC/clang vector extensions) for the loops gcc
 * does not vectorise by itself: TP_ELT_VLANES floats per vector, set by the
 * including file to its ISA's register width (4 for the portable build). */
#ifndef TP_ELT_VLANES
#define TP_ELT_VLANES 4
#endif
typedef float tp__vf __attribute__((vector_size(TP_ELT_VLANES * 4)));
typedef int32_t tp__vi __attribute__((vector_size(TP_ELT_VLANES * 4)));

static inline tp__vf vmax_nan(tp__vf acc, tp__vf x) {
    tp__vi m = (x > acc) | (x != x); /* take x when larger or NaN */
    return (tp__vf)(((tp__vi)x & m) | ((tp__vi)acc & ~m));
}

/* max of n floats, NaN if any is NaN (which NaN is unspecified); -inf for n = 0. */
static float max_of(const float *a, int64_t n) {
    enum { W = TP_ELT_VLANES };
    tp__vf acc0 = (tp__vf){0} - INFINITY, acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W) {
        tp__vf x0, x1, x2, x3;
        memcpy(&x0, a + i, sizeof x0);
        memcpy(&x1, a + i + W, sizeof x1);
        memcpy(&x2, a + i + 2 * W, sizeof x2);
        memcpy(&x3, a + i + 3 * W, sizeof x3);
        acc0 = vmax_nan(acc0, x0);
        acc1 = vmax_nan(acc1, x1);
        acc2 = vmax_nan(acc2, x2);
        acc3 = vmax_nan(acc3, x3);
    }
    acc0 = vmax_nan(vmax_nan(acc0, acc1), vmax_nan(acc2, acc3));
    for (; i + W <= n; i += W) {
        tp__vf x;
        memcpy(&x, a + i, sizeof x);
        acc0 = vmax_nan(acc0, x);
    }
    if (i < n) { /* the tail as one vector padded with -inf (a scalar tail cost ~10 cycles an element) */
        tp__vf x;
#if TP_ELT_VLANES == 16 && defined(__AVX512F__)
        __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tp__avx512_lanes(n - i), a + i);
        memcpy(&x, &v, sizeof x);
#else
        float t[W];
        for (int k = 0; k < W; k++) t[k] = i + k < n ? a[i + k] : -INFINITY;
        memcpy(&x, t, sizeof x);
#endif
        acc0 = vmax_nan(acc0, x);
    }
    /* fold lanes in vector registers (lane k takes lane k + w): a scalar
     * fold of 16 lanes cost more than the loop for rows of 128 */
#if TP_ELT_VLANES >= 16
    acc0 = vmax_nan(acc0, __builtin_shufflevector(acc0, acc0, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
    acc0 = vmax_nan(acc0, __builtin_shufflevector(acc0, acc0, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3));
    acc0 = vmax_nan(acc0, __builtin_shufflevector(acc0, acc0, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1));
    acc0 = vmax_nan(acc0, __builtin_shufflevector(acc0, acc0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0));
#elif TP_ELT_VLANES == 8
    acc0 = vmax_nan(acc0, __builtin_shufflevector(acc0, acc0, 4, 5, 6, 7, 0, 1, 2, 3));
    acc0 = vmax_nan(acc0, __builtin_shufflevector(acc0, acc0, 2, 3, 0, 1, 2, 3, 0, 1));
    acc0 = vmax_nan(acc0, __builtin_shufflevector(acc0, acc0, 1, 0, 1, 0, 1, 0, 1, 0));
#else
    acc0 = vmax_nan(acc0, __builtin_shufflevector(acc0, acc0, 2, 3, 0, 1));
    acc0 = vmax_nan(acc0, __builtin_shufflevector(acc0, acc0, 1, 0, 1, 0));
#endif
    return acc0[0];
}

#if TP_ELT_VLANES == 16 && defined(__AVX512F__)
/* Lane 0 of V folded by OP (add, max) with lane k + 8, then k + 4, k + 2,
 * k + 1: the pairwise order the generic loops' folds use. */
#define TP__FOLD16(V, OP)                                                              \
    __extension__({                                                                    \
        __m512 f_ = (V);                                                               \
        f_ = OP(f_, _mm512_shuffle_f32x4(f_, f_, _MM_SHUFFLE(1, 0, 3, 2)));            \
        f_ = OP(f_, _mm512_shuffle_f32x4(f_, f_, _MM_SHUFFLE(2, 3, 0, 1)));            \
        f_ = OP(f_, _mm512_permute_ps(f_, _MM_SHUFFLE(1, 0, 3, 2)));                   \
        f_ = OP(f_, _mm512_permute_ps(f_, _MM_SHUFFLE(2, 3, 0, 1)));                   \
        _mm512_cvtss_f32(f_);                                                          \
    })

/* softmax's exp(a - m) into o and the sum of what it stored, 16 lanes:
 * tp__vm_exp_nonpos_ftz's steps through vmath.h's tp__vm_exp_parts_v16n
 * (the same reduction and polynomial), a vector at a time (four at a
 * time, the tail one by one, measured 0.41 ns an element on rows of 197
 * against 0.40), 2^n
 * applied by vscalefps, which rounds a denormal product once as the
 * scalar form's multiply does; results below 2^-126 before the scaling
 * flushed to +0. The last vector is masked (its -inf padding adds +0);
 * lane j sums elements j, j + 16, ... in order as
 * tp__vexp_sub_sum_f32 does, then folded pairwise 8, 4, 2, 1. The next
 * row's lines are fetched on the way. Every row length takes it: with the
 * generic loops' peeled prologues, scalar epilogues and folds through
 * memory, rows of 197 (ViT's attention) cost 0.61 ns an element against
 * 0.34 for rows of 4096 (Zen 4, one thread, rows in L2); with this and
 * max_v16, 0.39-0.40 and 0.31. */
static float exp_sub_sum_v16(float *o, const float *a, int64_t n, float max, const float *next) {
    const __m512 mv = _mm512_set1_ps(max), lo = _mm512_set1_ps(-87.33f);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tp__avx512_lanes(n - i);
        if (next) _mm_prefetch((const char *)(next + i), _MM_HINT_T0);
        const __m512 y = _mm512_sub_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k, a + i), mv);
        const __mmask16 keep = _mm512_cmp_ps_mask(y, lo, _CMP_GE_OQ); /* else exp flushes to +0 */
        const __m512 x = _mm512_max_ps(y, lo);
        __m512 nn, q;
        tp__vm_exp_parts_v16n(1, &x, &nn, &q);
        const __m512 e = _mm512_maskz_scalef_ps(keep, _mm512_add_ps(_mm512_set1_ps(1.0f), q), nn);
        _mm512_mask_storeu_ps(o + i, k, e);
        acc = _mm512_add_ps(acc, e);
    }
    return TP__FOLD16(acc, _mm512_add_ps);
}

/* max of n floats as max_of (NaN if any is NaN, -inf for n = 0) with
 * vmaxps and the NaN test on the side: two chains of one operation a
 * vector (max_of's NaN-propagating max is five), folded by shuffles. */
static float max_v16(const float *a, int64_t n) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 m0 = ninf, m1 = ninf;
    __mmask16 nan = 0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 x0 = _mm512_loadu_ps(a + i), x1 = _mm512_loadu_ps(a + i + 16);
        nan |= _mm512_cmp_ps_mask(x0, x1, _CMP_UNORD_Q);
        m0 = _mm512_max_ps(m0, x0);
        m1 = _mm512_max_ps(m1, x1);
    }
    for (; i < n; i += 16) {
        const __mmask16 k = tp__avx512_lanes(n - i);
        const __m512 x = _mm512_mask_loadu_ps(ninf, k, a + i);
        nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
        m0 = _mm512_max_ps(m0, x);
    }
    if (nan) return NAN;
    m0 = _mm512_max_ps(m0, m1);
    return TP__FOLD16(m0, _mm512_max_ps);
}

/* o[0, n) *= s, the tail as a masked vector. */
static void scale_v16(float *o, int64_t n, float s) {
    const __m512 sv = _mm512_set1_ps(s);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(o + i, _mm512_mul_ps(_mm512_loadu_ps(o + i), sv));
    if (i < n) {
        const __mmask16 k = tp__avx512_lanes(n - i);
        _mm512_mask_storeu_ps(o + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, o + i), sv));
    }
}
#endif

#if TP_ELT_VLANES == 8 && defined(__AVX2__) && defined(__FMA__)
/* The AVX-512 row kernels above at 8 lanes (AVX2 + FMA): each 16-lane
 * vector of theirs is two ymm halves here (elements i..i+7 and i+8..i+15),
 * with the same operations in the same order, masked lanes padded as
 * theirs are, and TP__FOLD8X2 folding as TP__FOLD16 does, so the results
 * are theirs bit for bit (test_eltwise_rows checks it where both run). 2^n
 * of exp is built in the exponent bits (n lies in [-126, 0] after the
 * clamp at -87.33), and the product rounds once, as vscalefps does. Zen 4,
 * one thread, rows in L2, against the generic loops: softmax rows of 197
 * 0.79 -> 0.50 ns an element, of 128 0.65 -> 0.45; layer_norm rows of 384
 * 0.29 -> 0.22, of 256 0.42 -> 0.26 (the AVX-512 rows: 0.39, 0.37, 0.18,
 * 0.17). */

/* All bits set in lanes k < left (left may be <= 0 or > 8). */
static inline __m256i tp__elt_mask8(int64_t left) {
    const int l = left < 0 ? 0 : left > 8 ? 8 : (int)left;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(l), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* TP__FOLD16 of the 16-lane vector (LO, HI): lane k with k + 8, then k + 4,
 * k + 2, k + 1. */
#define TP__FOLD8X2(LO, HI, OP)                                                        \
    __extension__({                                                                    \
        __m256 f_ = OP((LO), (HI));                                                    \
        f_ = OP(f_, _mm256_permute2f128_ps(f_, f_, 1));                                \
        f_ = OP(f_, _mm256_permute_ps(f_, _MM_SHUFFLE(1, 0, 3, 2)));                   \
        f_ = OP(f_, _mm256_permute_ps(f_, _MM_SHUFFLE(2, 3, 0, 1)));                   \
        _mm256_cvtss_f32(f_);                                                          \
    })

/* exp(a - max) of H halves (8 H elements) from a + i into o + i, even
 * halves added to acc[0], odd ones to acc[1] (exp_sub_sum_v16's lanes);
 * masked (the row's tail, H 2): only lanes k < n - i are read and
 * written, the rest padded with -inf (adding +0). AMD's vmaskmovps stores
 * are slow (Zen 4: masking every vector took softmax rows of 197 to 0.86
 * ns an element, against 0.53 with plain loads and stores for whole
 * vectors); four halves a step rather than two, 0.53 -> 0.50. */
static inline __attribute__((always_inline)) void exp_sub_block_v8(float *o, const float *a, int64_t i, int64_t n,
                                                                   __m256 mv, __m256 acc[2], const bool masked, const int H) {
    const __m256 lo = _mm256_set1_ps(-87.33f), ninf = _mm256_set1_ps(-INFINITY);
    __m256i k[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    __m256 y[4], x[4], keep[4], nn[4], q[4];
    for (int h = 0; h < H; h++) {
        __m256 v;
        if (masked) {
            k[h] = tp__elt_mask8(n - i - 8 * h);
            v = _mm256_blendv_ps(ninf, _mm256_maskload_ps(a + i + 8 * h, k[h]), _mm256_castsi256_ps(k[h]));
        } else {
            v = _mm256_loadu_ps(a + i + 8 * h);
        }
        y[h] = _mm256_sub_ps(v, mv);
        keep[h] = _mm256_cmp_ps(y[h], lo, _CMP_GE_OQ); /* else exp flushes to +0 */
        x[h] = _mm256_max_ps(y[h], lo);
    }
    tp__vm_exp_parts_v8n(H, x, nn, q);
    for (int h = 0; h < H; h++) {
        const __m256 e = _mm256_and_ps(keep[h], tp__vm_scale_pow2_v8(_mm256_add_ps(_mm256_set1_ps(1.0f), q[h]), nn[h]));
        if (!masked) _mm256_storeu_ps(o + i + 8 * h, e);
        else if (n - i - 8 * h > 0) _mm256_maskstore_ps(o + i + 8 * h, k[h], e);
        acc[h & 1] = _mm256_add_ps(acc[h & 1], e);
    }
}

/* exp_sub_sum_v16 at 8 lanes. */
static float exp_sub_sum_v8(float *o, const float *a, int64_t n, float max, const float *next) {
    const __m256 mv = _mm256_set1_ps(max);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        if (next) _mm_prefetch((const char *)(next + i), _MM_HINT_T0);
        if (next) _mm_prefetch((const char *)(next + i + 16), _MM_HINT_T0);
        exp_sub_block_v8(o, a, i, n, mv, acc, false, 4);
    }
    for (; i + 16 <= n; i += 16) {
        if (next) _mm_prefetch((const char *)(next + i), _MM_HINT_T0);
        exp_sub_block_v8(o, a, i, n, mv, acc, false, 2);
    }
    if (i < n) {
        if (next) _mm_prefetch((const char *)(next + i), _MM_HINT_T0);
        exp_sub_block_v8(o, a, i, n, mv, acc, true, 2);
    }
    return TP__FOLD8X2(acc[0], acc[1], _mm256_add_ps);
}

/* max_v16 at 8 lanes (NaN if any is NaN, -inf for n = 0). */
static float max_v8(const float *a, int64_t n) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 m0l = ninf, m0h = ninf, m1l = ninf, m1h = ninf, nan = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256 x0l = _mm256_loadu_ps(a + i), x0h = _mm256_loadu_ps(a + i + 8);
        const __m256 x1l = _mm256_loadu_ps(a + i + 16), x1h = _mm256_loadu_ps(a + i + 24);
        nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(x0l, x1l, _CMP_UNORD_Q), _mm256_cmp_ps(x0h, x1h, _CMP_UNORD_Q)));
        m0l = _mm256_max_ps(m0l, x0l);
        m0h = _mm256_max_ps(m0h, x0h);
        m1l = _mm256_max_ps(m1l, x1l);
        m1h = _mm256_max_ps(m1h, x1h);
    }
    for (; i < n; i += 16) {
        const __m256i kl = tp__elt_mask8(n - i), kh = tp__elt_mask8(n - i - 8);
        const __m256 xl = _mm256_blendv_ps(ninf, _mm256_maskload_ps(a + i, kl), _mm256_castsi256_ps(kl));
        const __m256 xh = _mm256_blendv_ps(ninf, _mm256_maskload_ps(a + i + 8, kh), _mm256_castsi256_ps(kh));
        nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(xl, xl, _CMP_UNORD_Q), _mm256_cmp_ps(xh, xh, _CMP_UNORD_Q)));
        m0l = _mm256_max_ps(m0l, xl);
        m0h = _mm256_max_ps(m0h, xh);
    }
    if (_mm256_movemask_ps(nan)) return NAN;
    m0l = _mm256_max_ps(m0l, m1l);
    m0h = _mm256_max_ps(m0h, m1h);
    return TP__FOLD8X2(m0l, m0h, _mm256_max_ps);
}

/* o[0, n) *= s, the tail masked. */
static void scale_v8(float *o, int64_t n, float s) {
    const __m256 sv = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_loadu_ps(o + i), sv));
    if (i < n) {
        const __m256i k = tp__elt_mask8(n - i);
        _mm256_maskstore_ps(o + i, k, _mm256_mul_ps(_mm256_maskload_ps(o + i, k), sv));
    }
}
#endif

static void softmax(float *o, const float *a, int64_t n, bool log, const float *next) {
#if TP_ELT_VLANES == 16 && defined(__AVX512F__)
    float m = max_v16(a, n);
#elif TP_ELT_VLANES == 8 && defined(__AVX2__) && defined(__FMA__)
    float m = max_v8(a, n);
#else
    float m = max_of(a, n);
#endif
    if (m != m) { /* a NaN in the row: NaN everywhere, as PyTorch */
        for (int64_t i = 0; i < n; i++) o[i] = m;
        return;
    }
    if (m == -INFINITY) m = 0.0f; /* an all -inf row: exp(-inf - 0) = 0, 0/0 = NaN as PyTorch */
#if TP_ELT_VLANES == 16 && defined(__AVX512F__)
    if (!log) {
        scale_v16(o, n, 1.0f / exp_sub_sum_v16(o, a, n, m, next));
        return;
    }
#elif TP_ELT_VLANES == 8 && defined(__AVX2__) && defined(__FMA__)
    if (!log) {
        scale_v8(o, n, 1.0f / exp_sub_sum_v8(o, a, n, m, next));
        return;
    }
#endif
    if (log) {
        float s = tp__vexp_sub_sum_f32(o, a, n, m, next);
        float l = tp__log_f32(s); /* (a - max) - log(sum): exact where a == max */
        for (int64_t i = 0; i < n; i++) o[i] = (a[i] - m) - l;
        return;
    }
    float inv = 1.0f / tp__vexp_sub_sum_f32(o, a, n, m, next);
    for (int64_t i = 0; i < n; i++) o[i] *= inv;
}

/* Mean and 1/sqrt(variance + eps) of n floats: two passes, each summed in
 * sum's order. */
static void moments(const float *a, int64_t n, float eps, float *mean_out, float *rstd_out) {
    float mean = sum(a, n) / (float)n;
    float part[PARTS][16] = {{0}};
    int64_t i = 0;
    for (; i + 16 * PARTS <= n; i += 16 * PARTS)
        for (int q = 0; q < PARTS; q++)
            for (int k = 0; k < 16; k++) {
                float d = a[i + 16 * q + k] - mean;
                part[q][k] += d * d;
            }
    int q = 0;
    for (; i + 16 <= n; i += 16, q++)
        for (int k = 0; k < 16; k++) {
            float d = a[i + k] - mean;
            part[q][k] += d * d;
        }
    for (int k = 0; i + k < n; k++) {
        float d = a[i + k] - mean;
        part[q][k] += d * d;
    }
    *mean_out = mean;
    *rstd_out = 1.0f / sqrtf(fold_parts(part) / (float)n + eps);
}

#if TP_ELT_VLANES == 16 && defined(__AVX512F__)
/* Sum over lanes of 4 partial vectors, (p0 + p1) + (p2 + p3), then the
 * lanes folded pairwise 8, 4, 2, 1. */
static float fold4_v16(__m512 p0, __m512 p1, __m512 p2, __m512 p3) {
    __m512 s = _mm512_add_ps(_mm512_add_ps(p0, p1), _mm512_add_ps(p2, p3));
    return TP__FOLD16(s, _mm512_add_ps);
}

/* layer_norm's row at AVX-512: the mean, then the mean of squared
 * deviations (two passes, as moments), each summed in four vector chains
 * (element i into chain (i / 16) mod 4 over whole blocks of 64 floats,
 * the rest into chain 0, the last vector masked), then the
 * normalised row. Rows of a few hundred floats are bound by the chain of
 * passes: the generic loops (sums through 4 x 16-float arrays in memory)
 * took 0.29-0.30 ns an element for rows of 384 and 0.33 for rows of 256,
 * this 0.19 and 0.17 (Zen 4, one thread, rows in L1; 0.19 -> 0.18 for
 * rows of 4096). */
static void layer_norm_v16(float *o, const float *a, int64_t n, const float *w, const float *b, float eps) {
    __m512 p0 = _mm512_setzero_ps(), p1 = p0, p2 = p0, p3 = p0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        p0 = _mm512_add_ps(p0, _mm512_loadu_ps(a + i));
        p1 = _mm512_add_ps(p1, _mm512_loadu_ps(a + i + 16));
        p2 = _mm512_add_ps(p2, _mm512_loadu_ps(a + i + 32));
        p3 = _mm512_add_ps(p3, _mm512_loadu_ps(a + i + 48));
    }
    for (; i < n; i += 16) {
        const __mmask16 k = tp__avx512_lanes(n - i);
        p0 = _mm512_add_ps(p0, _mm512_maskz_loadu_ps(k, a + i));
    }
    const float mean = fold4_v16(p0, p1, p2, p3) / (float)n;
    const __m512 mv = _mm512_set1_ps(mean);
    p0 = p1 = p2 = p3 = _mm512_setzero_ps();
    for (i = 0; i + 64 <= n; i += 64) {
        const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(a + i), mv), d1 = _mm512_sub_ps(_mm512_loadu_ps(a + i + 16), mv);
        const __m512 d2 = _mm512_sub_ps(_mm512_loadu_ps(a + i + 32), mv), d3 = _mm512_sub_ps(_mm512_loadu_ps(a + i + 48), mv);
        p0 = _mm512_fmadd_ps(d0, d0, p0);
        p1 = _mm512_fmadd_ps(d1, d1, p1);
        p2 = _mm512_fmadd_ps(d2, d2, p2);
        p3 = _mm512_fmadd_ps(d3, d3, p3);
    }
    for (; i < n; i += 16) {
        const __mmask16 k = tp__avx512_lanes(n - i);
        const __m512 d = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, a + i), mv);
        p0 = _mm512_fmadd_ps(d, d, p0);
    }
    const __m512 rv = _mm512_set1_ps(1.0f / sqrtf(fold4_v16(p0, p1, p2, p3) / (float)n + eps));
    for (i = 0; i < n; i += 16) {
        const __mmask16 k = tp__avx512_lanes(n - i);
        /* bias alone as an explicit FMA: gcc contracts a multiply and add
         * written apart in one build and not in another */
        const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, a + i), mv);
        __m512 y;
        if (w && b) y = _mm512_fmadd_ps(_mm512_mul_ps(d, rv), _mm512_maskz_loadu_ps(k, w + i), _mm512_maskz_loadu_ps(k, b + i));
        else if (w) y = _mm512_mul_ps(_mm512_mul_ps(d, rv), _mm512_maskz_loadu_ps(k, w + i));
        else if (b) y = _mm512_fmadd_ps(d, rv, _mm512_maskz_loadu_ps(k, b + i));
        else y = _mm512_mul_ps(d, rv);
        _mm512_mask_storeu_ps(o + i, k, y);
    }
}
#endif

#if TP_ELT_VLANES == 8 && defined(__AVX2__) && defined(__FMA__)
/* layer_norm_v16 at 8 lanes: its chain c is the ymm pair (p[2c], p[2c+1]). */
static void layer_norm_v8(float *o, const float *a, int64_t n, const float *w, const float *b, float eps) {
    __m256 p[8];
    for (int c = 0; c < 8; c++) p[c] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int c = 0; c < 8; c++) p[c] = _mm256_add_ps(p[c], _mm256_loadu_ps(a + i + 8 * c));
    for (; i < n; i += 16)
        for (int h = 0; h < 2; h++) p[h] = _mm256_add_ps(p[h], _mm256_maskload_ps(a + i + 8 * h, tp__elt_mask8(n - i - 8 * h)));
#define TP__ELT_FOLD4(p)                                                                                         \
    TP__FOLD8X2(_mm256_add_ps(_mm256_add_ps(p[0], p[2]), _mm256_add_ps(p[4], p[6])),                              \
                _mm256_add_ps(_mm256_add_ps(p[1], p[3]), _mm256_add_ps(p[5], p[7])), _mm256_add_ps)
    const float mean = TP__ELT_FOLD4(p) / (float)n;
    const __m256 mv = _mm256_set1_ps(mean);
    for (int c = 0; c < 8; c++) p[c] = _mm256_setzero_ps();
    for (i = 0; i + 64 <= n; i += 64)
        for (int c = 0; c < 8; c++) {
            const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(a + i + 8 * c), mv);
            p[c] = _mm256_fmadd_ps(d, d, p[c]);
        }
    for (; i < n; i += 16)
        for (int h = 0; h < 2; h++) {
            const __m256i k = tp__elt_mask8(n - i - 8 * h);
            const __m256 d = _mm256_and_ps(_mm256_castsi256_ps(k), _mm256_sub_ps(_mm256_maskload_ps(a + i + 8 * h, k), mv));
            p[h] = _mm256_fmadd_ps(d, d, p[h]);
        }
    const __m256 rv = _mm256_set1_ps(1.0f / sqrtf(TP__ELT_FOLD4(p) / (float)n + eps));
#undef TP__ELT_FOLD4
    for (i = 0; i + 8 <= n; i += 8) { /* whole vectors: plain loads and stores (see exp_sub_block_v8) */
        const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(a + i), mv);
        __m256 y;
        if (w && b) y = _mm256_fmadd_ps(_mm256_mul_ps(d, rv), _mm256_loadu_ps(w + i), _mm256_loadu_ps(b + i));
        else if (w) y = _mm256_mul_ps(_mm256_mul_ps(d, rv), _mm256_loadu_ps(w + i));
        else if (b) y = _mm256_fmadd_ps(d, rv, _mm256_loadu_ps(b + i)); /* explicit, as layer_norm_v16 */
        else y = _mm256_mul_ps(d, rv);
        _mm256_storeu_ps(o + i, y);
    }
    if (i < n) {
        const __m256i k = tp__elt_mask8(n - i);
        const __m256 d = _mm256_sub_ps(_mm256_maskload_ps(a + i, k), mv);
        __m256 y;
        if (w && b) y = _mm256_fmadd_ps(_mm256_mul_ps(d, rv), _mm256_maskload_ps(w + i, k), _mm256_maskload_ps(b + i, k));
        else if (w) y = _mm256_mul_ps(_mm256_mul_ps(d, rv), _mm256_maskload_ps(w + i, k));
        else if (b) y = _mm256_fmadd_ps(d, rv, _mm256_maskload_ps(b + i, k)); /* explicit, as layer_norm_v16 */
        else y = _mm256_mul_ps(d, rv);
        _mm256_maskstore_ps(o + i, k, y);
    }
}
#endif

static void layer_norm(float *o, const float *a, int64_t n, const float *w, const float *b, float eps) {
#if TP_ELT_VLANES == 16 && defined(__AVX512F__)
    if (n > 0) {
        layer_norm_v16(o, a, n, w, b, eps);
        return;
    }
#elif TP_ELT_VLANES == 8 && defined(__AVX2__) && defined(__FMA__)
    if (n > 0) {
        layer_norm_v8(o, a, n, w, b, eps);
        return;
    }
#endif
    float mean, rstd;
    moments(a, n, eps, &mean, &rstd);
    if (w && b) for (int64_t j = 0; j < n; j++) o[j] = (a[j] - mean) * rstd * w[j] + b[j];
    else if (w) for (int64_t j = 0; j < n; j++) o[j] = (a[j] - mean) * rstd * w[j];
    else if (b) for (int64_t j = 0; j < n; j++) o[j] = (a[j] - mean) * rstd + b[j];
    else for (int64_t j = 0; j < n; j++) o[j] = (a[j] - mean) * rstd;
}

static void scale_shift(float *o, const float *a, int64_t n, float scale, float shift) {
    for (int64_t i = 0; i < n; i++) o[i] = a[i] * scale + shift;
}

/* Both operands are loaded whatever c says, so the select vectorises. */
static void where_rows(float *o, const uint8_t *c, const float *x, int64_t sx, const float *y, int64_t sy, int64_t n) {
    if (sx && sy) {
        for (int64_t i = 0; i < n; i++) {
            float xv = x[i], yv = y[i];
            o[i] = c[i] != 0 ? xv : yv;
        }
    } else if (sy) {
        const float xv = x[0];
        for (int64_t i = 0; i < n; i++) {
            float yv = y[i];
            o[i] = c[i] != 0 ? xv : yv;
        }
    } else if (sx) {
        const float yv = y[0];
        for (int64_t i = 0; i < n; i++) {
            float xv = x[i];
            o[i] = c[i] != 0 ? xv : yv;
        }
    } else {
        const float xv = x[0], yv = y[0];
        for (int64_t i = 0; i < n; i++) o[i] = c[i] != 0 ? xv : yv;
    }
}

/* Non-temporal copy at the build's vector width (SSE2 in the portable
 * x86-64 build; plain memcpy elsewhere). */
#if defined(__AVX512F__)
#define STREAM_LANES 16
#define STREAM_STORE(p, q) _mm512_stream_ps((p), _mm512_loadu_ps(q))
#elif defined(__AVX__)
#define STREAM_LANES 8
#define STREAM_STORE(p, q) _mm256_stream_ps((p), _mm256_loadu_ps(q))
#elif defined(__SSE2__)
#define STREAM_LANES 4
#define STREAM_STORE(p, q) _mm_stream_ps((p), _mm_loadu_ps(q))
#endif

static void stream(float *dst, const float *src, int64_t n) {
#ifdef STREAM_LANES
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 63) != 0; i++) dst[i] = src[i];
    for (; i + STREAM_LANES <= n; i += STREAM_LANES) STREAM_STORE(dst + i, src + i);
    for (; i < n; i++) dst[i] = src[i];
#else
    memcpy(dst, src, (size_t)n * sizeof *dst);
#endif
}

/* o[i] = f(a[i]) (o may equal a) for an op bound by its arithmetic
 * (tp__eltwise_transcendental), stored as stream() does: gelu, silu and
 * sigmoid at AVX-512 straight from their vector loops, the others a
 * 64-float block at a time through an L1 buffer. */
static void unary_stream(int op, float *o, const float *a, int64_t n, const float *params) {
#if TP_ELT_VLANES == 16 && defined(__AVX512F__)
    switch (op) {
    case TP_ELT_GELU: tp__vgelu_v16_nt(o, a, n); return;
    case TP_ELT_SILU: tp__vsilu_v16_nt(o, a, n); return;
    case TP_ELT_SIGMOID: tp__vsigmoid_v16_nt(o, a, n); return;
    default: break;
    }
#endif
    _Alignas(64) float buf[64];
    for (int64_t i = 0; i < n; i += 64) {
        const int64_t m = n - i < 64 ? n - i : 64;
        unary(op, buf, a + i, m, params);
        stream(o + i, buf, m);
    }
}

static void stream_fence(void) {
#ifdef STREAM_LANES
    _mm_sfence();
#endif
}

const tp_eltwise_table TP_ELT_TABLE = {
    .binary = binary,
    .unary = unary,
    .softmax = softmax,
    .layer_norm = layer_norm,
    .scale_shift = scale_shift,
    .moments = moments,
    .sum = sum,
    .max = max_of,
    .where = where_rows,
    .stream = stream,
    .unary_stream = unary_stream,
    .stream_fence = stream_fence,
};
