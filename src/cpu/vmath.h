/*
 * vmath.h - float32 elementwise math (exp, log, tanh, sigmoid, erf, gelu,
 * gelu_tanh, silu) written so that gcc auto-vectorises the array loops.
 *
 * Each function comes twice: a scalar `tp__<name>_f32(float)` and an array
 * `tp__v<name>_f32(dst, src, n)` whose loop body is that scalar function, so
 * the vector body and its scalar tail compute the same formula and agree
 * bitwise (except which NaN a NaN input yields: sign and payload may differ).
 * dst may equal src; otherwise the two must not overlap.
 * Beside them, intrinsic forms that the elementwise loops take at their ISA
 * level, each with its own tested bound (stated there): sigmoid, silu and
 * gelu on 16 lanes (AVX-512), silu and gelu on 8 (AVX2 + FMA).
 *
 * Method: range reduction plus minimax polynomials (fitted for this file with
 * a Remez exchange), the usual scheme of Cephes, SLEEF and XNNPACK. No libm
 * calls, no branches in the element loops (selects are ternaries on floats
 * built by tp__vm_sel from compare masks), bits are moved with memcpy,
 * and float->int conversions only happen through the "add 1.5*2^23" trick,
 * which is defined for every input, NaN included.
 *
 * Build contract: vectorisation needs -O3 (or -O2 -ftree-vectorize
 * -fvect-cost-model=dynamic); any of no ISA flags (SSE2), -mavx2 -mfma or
 * -mavx512f works. The code assumes IEEE semantics: do not compile it with
 * -ffast-math / -ffinite-math-only (NaN and inf handling is done by compares)
 * and do not enable FMA contraction (-ffp-contract=fast, the gcc default in
 * the GNU dialects but not under -std=c11) if bitwise agreement between
 * builds with and without -mfma matters: the bounds below were measured with
 * -ffp-contract=off. Denormal inputs and outputs are handled exactly as
 * normal ones (no flushing), provided the CPU runs without FTZ/DAZ.
 *
 * Error bounds: measured by tests/test_vmath.c against double-precision libm
 * rounded to float (a strided sweep of all bit patterns plus a dense sweep of
 * the interesting range); stated per function below.
 */
#ifndef TPEXPORT_CPU_VMATH_H
#define TPEXPORT_CPU_VMATH_H

#include <float.h> /* FLT_MAX */
#include <math.h> /* INFINITY, NAN (constants only; no libm calls) */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#if defined(__AVX512F__)
#include <immintrin.h> /* masked loads for softmax's row tail */

#include "avx512_util.h"
#endif

/* ---- bit access ---- */
static inline uint32_t tp__f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float tp__f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* cond ? a : b, written with a mask rather than a ternary: a ternary whose
 * arm is a constant lets gcc's PRE pass fold the rest of the formula along
 * that arm into a separate block (e.g. the overflowing exp(88.8) product),
 * which blocks if-conversion and so vectorisation without AVX-512 masks. */
static inline float tp__vm_sel(int cond, float a, float b) {
    uint32_t m = 0u - (uint32_t)cond;
    return tp__f32_from_bits((tp__f32_bits(a) & m) | (tp__f32_bits(b) & ~m));
}

/* cond ? a : b as a ternary where AVX-512 masks make it one blend (the
 * mask form costs two zero-masked moves and an or there, 3 uops); the mask
 * form elsewhere. For selects whose arms gcc's PRE pass leaves alone:
 * check that the loops still vectorise (-fopt-info-vec) when using it. */
static inline float tp__vm_blend(int cond, float a, float b) {
#ifdef __AVX512F__
    return cond ? a : b;
#else
    return tp__vm_sel(cond, a, b);
#endif
}

/* Loops bound by their arithmetic prefetch their input this many floats (4
 * KiB) ahead (eltwise_loops.h's LOOP_PF, the 16-lane arrays below). */
#define TP__VM_PF_AHEAD 1024

/* 1.5 * 2^23: adding it to |v| < 2^22 rounds v to an integer k held in the
 * low mantissa bits (bits(v + magic) = 0x4B400000 + k, two's complement). */
#define TP__VM_MAGIC 12582912.0f

/* 2^k for an integer-valued float k in [-126, 127] (garbage but no UB for
 * other inputs, NaN included). */
static inline float tp__vm_pow2i(float k) {
    uint32_t u = tp__f32_bits(k + TP__VM_MAGIC);
    return tp__f32_from_bits((u << 23) + 0x3F800000u);
}

/* Round to nearest (ties to even) as a float; |v| < 2^22, NaN passes. */
static inline float tp__vm_rint(float v) { return (v + TP__VM_MAGIC) - TP__VM_MAGIC; }

/* e^r of the reduced argument of x (|x| <= 104): *n = rint(x / ln2) and
 * e^x = return value * 2^n; shared by tp__exp_f32 and
 * tp__vm_exp_nonpos_ftz, so the two agree bit for bit where both are normal. */
static inline float tp__vm_exp_reduced(float x, float *n_out) {
    float n = tp__vm_rint(x * 1.442695041f);
    float r = x - n * 0.693359375f; /* exact: 0.693359375 has 9 bits */
    r = r - n * -2.121944401e-4f;
    float q = 1.381461291e-3f;
    q = q * r + 8.368709833e-3f;
    q = q * r + 4.166838737e-2f;
    q = q * r + 1.666652069e-1f;
    q = q * r + 4.999999345e-1f;
    *n_out = n;
    return 1.0f + (r + (r * r) * q);
}

/* ---- exp ----
 * x = n*ln2 + r, |r| <= ln2/2 (Cody-Waite, two-constant ln2), e^r by a
 * degree-6 minimax polynomial with fixed 1 + r leading terms, then 2^n applied
 * as two factors 2^n1 * 2^n2 so that results in the denormal range round once
 * and exp(x) > FLT_MAX overflows to inf by itself.
 * Bound: 1 ULP; exp(-inf) = 0,
 * exp(inf) = inf, overflow to inf for x > 88.72284, underflow to 0 for
 * x < -103.97 (results in between are correctly rounded denormals +- 1 ULP). */
static inline float tp__exp_f32(float x) {
    x = tp__vm_sel(x > 88.8f, 88.8f, x); /* NaN passes both clamps */
    x = tp__vm_sel(x < -104.0f, -104.0f, x);
    float n;
    float p = tp__vm_exp_reduced(x, &n);
    float n1 = tp__vm_rint(n * 0.5f); /* n in [-150, 128] -> n1, n2 in [-75, 64] */
    float n2 = n - n1;
    return (p * tp__vm_pow2i(n1)) * tp__vm_pow2i(n2);
}

/* expm1(y) for y <= 0 (the core of tanh): y = n*ln2 + r, expm1(r) by a
 * degree-6 polynomial r + r^2*q(r), then 2^n*expm1(r) + (2^n - 1), where
 * 2^n - 1 is exact for n >= -24. y is clamped at -18.5 (expm1 = -1 there to
 * float precision). NaN passes. */
static inline float tp__vm_expm1_neg(float y) {
    y = tp__vm_sel(y < -18.5f, -18.5f, y);
    float n = tp__vm_rint(y * 1.442695041f);
    float r = y - n * 0.693359375f;
    r = r - n * -2.121944401e-4f;
    float q = 1.388252303e-3f;
    q = q * r + 8.366513939e-3f;
    q = q * r + 4.166719964e-2f;
    q = q * r + 1.666654367e-1f;
    q = q * r + 4.999999816e-1f;
    float p = r + (r * r) * q;
    float s = tp__vm_pow2i(n);
    return s * p + (s - 1.0f);
}

/* ---- log ----
 * x = 2^e * m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact),
 * log(1+f) = f - f^2/2 + f^3*P(f) with P of degree 8 (minimax), plus e*ln2
 * in two pieces. Denormal inputs are scaled by 2^23 first.
 * Bound: 1 ULP; log(+-0) = -inf,
 * log(x < 0) = NaN, log(inf) = inf, log(NaN) = NaN. */
static inline float tp__log_f32(float x) {
    int tiny = x < 0x1p-126f;
    float xs = tp__vm_sel(tiny, x * 0x1p23f, x);
    float eadj = tp__vm_sel(tiny, -23.0f, 0.0f);
    /* add (1 - sqrt(1/2)) in the mantissa so the exponent field rounds at
     * sqrt(2); unsigned arithmetic: no overflow for any bit pattern */
    uint32_t t = tp__f32_bits(xs) + (0x3F800000u - 0x3F3504F3u);
    float e = (float)(int32_t)(t >> 23) - 127.0f + eadj;
    float f = tp__f32_from_bits((t & 0x007FFFFFu) + 0x3F3504F3u) - 1.0f;
    float p = 6.937173948e-2f;
    p = p * f + -1.184669074e-1f;
    p = p * f + 1.188882903e-1f;
    p = p * f + -1.237749658e-1f;
    p = p * f + 1.421711464e-1f;
    p = p * f + -1.666948301e-1f;
    p = p * f + 2.000218740e-1f;
    p = p * f + -2.499998386e-1f;
    p = p * f + 3.333331404e-1f;
    float z = f * f;
    float y = (f * z) * p;
    y = y + e * -2.121944401e-4f;
    y = y - 0.5f * z;
    float r = (f + y) + e * 0.693359375f;
    r = tp__vm_sel(x > 0.0f, r, tp__vm_sel(x == 0.0f, -INFINITY, NAN));
    return tp__vm_sel(x < INFINITY, r, x); /* inf -> inf, NaN -> the same NaN */
}

/* ---- tanh ----
 * tanh(|x|) = -em / (em + 2) with em = expm1(-2|x|) in (-1, 0] (no
 * cancellation, no overflow), sign restored from x. |x| is clamped at 9.1,
 * beyond which tanh rounds to 1.
 * Bound: 2 ULP; tanh(+-inf) = +-1,
 * tanh(-0) = -0. */
static inline float tp__tanh_f32(float x) {
    uint32_t sign = tp__f32_bits(x) & 0x80000000u;
    float z = tp__f32_from_bits(tp__f32_bits(x) & 0x7FFFFFFFu);
    z = tp__vm_sel(z > 9.1f, 9.1f, z);
    float em = tp__vm_expm1_neg(-2.0f * z);
    float t = -em / (em + 2.0f);
    return tp__f32_from_bits((tp__f32_bits(t) & 0x7FFFFFFFu) | sign);
}

/* ---- sigmoid ----
 * With e = exp(-|x|) in (0, 1]: sigmoid(x) = e/(1+e) for x < 0 and 1/(1+e)
 * otherwise, so nothing overflows and tiny results keep full precision
 * (down to the denormals).
 * Bound: 2 ULP; sigmoid(-inf) = 0,
 * sigmoid(inf) = 1. */
static inline float tp__sigmoid_f32(float x) {
    float z = tp__f32_from_bits(tp__f32_bits(x) & 0x7FFFFFFFu);
    float e = tp__exp_f32(-z);
    float num = tp__vm_sel(x < 0.0f, e, 1.0f);
    return num / (1.0f + e);
}

/* ---- silu ----
 * x * sigmoid(x); silu(-inf) = -0 (the limit), silu(inf) = inf.
 * Bound: relative error 2.1e-7 (|err| <= 1e-37 + 3e-7*|ref| is tested). */
static inline float tp__silu_f32(float x) {
    float r = x * tp__sigmoid_f32(x);
    return tp__vm_sel(x == -INFINITY, -0.0f, r);
}

/* Step sequences shared by the 16- and 8-lane forms below, over that
 * width's fused multiply-add F(a, b, c) = a*b + c, multiply M, broadcast S
 * and round-to-nearest R; each step runs on every vector (EACH) before the
 * next, so the vectors' independent chains interleave in program order. */
/* exp: tp__exp_f32's reduction and polynomial, n = round(y / ln 2), q = r +
 * r^2 * P(r) with r = y - n ln 2 (in two parts): e^y = 2^n * (1 + q). */
#define TP__VM_EXP_PARTS_STEPS(EACH, F, M, S, R, y, n, r, q)                     \
    EACH n[j_] = R(M(y[j_], S(1.442695041f)));                                   \
    EACH r[j_] = F(n[j_], S(-0.693359375f), y[j_]);                              \
    EACH r[j_] = F(n[j_], S(2.121944401e-4f), r[j_]);                            \
    EACH q[j_] = F(S(1.381461291e-3f), r[j_], S(8.368709833e-3f));              \
    EACH q[j_] = F(q[j_], r[j_], S(4.166838737e-2f));                            \
    EACH q[j_] = F(q[j_], r[j_], S(1.666652069e-1f));                            \
    EACH q[j_] = F(q[j_], r[j_], S(4.999999345e-1f));                            \
    EACH q[j_] = F(M(r[j_], r[j_]), q[j_], r[j_])
/* gelu: tp__gelu_f32's degree-11 g(t) of erfc's exponent by Estrin's
 * scheme (t2, t4, a, b, c scratch). */
#define TP__VM_GELU_G_STEPS_C0(EACH, F, M, S, C0, t, t2, t4, a, b, c, g)                                \
    EACH t2[j_] = M(t[j_], t[j_]);                                                                      \
    EACH t4[j_] = M(t2[j_], t2[j_]);                                                                    \
    EACH a[j_] = F(F(S(-1.646503620e-02f), t[j_], S(7.624871284e-02f)), t2[j_],                        \
                   F(S(-4.181608260e-01f), t[j_], S(C0)));                                             \
    EACH b[j_] = F(F(S(-2.054579636e-05f), t[j_], S(1.338570873e-04f)), t2[j_],                        \
                   F(S(-7.325687911e-04f), t[j_], S(3.572081448e-03f)));                               \
    EACH c[j_] = F(F(S(7.887393849e-08f), t[j_], S(-3.394441990e-07f)), t2[j_],                        \
                   F(S(1.236211631e-07f), t[j_], S(2.674537200e-06f)));                                \
    EACH g[j_] = F(c[j_], M(t4[j_], t4[j_]), F(b[j_], t4[j_], a[j_]))
#define TP__VM_GELU_G_STEPS(EACH, F, M, S, t, t2, t4, a, b, c, g) \
    TP__VM_GELU_G_STEPS_C0(EACH, F, M, S, -1.364941239e+00f, t, t2, t4, a, b, c, g)

#if defined(__AVX512F__)
/* ---- sigmoid and silu, 16 lanes (AVX-512) ----
 * sigmoid: the same formula as tp__sigmoid_f32 with what AVX-512
 * adds: e = exp(-|x|) through tp__vm_exp_reduced's steps with 2^n applied
 * by vscalefps (one rounding, denormals and underflow included, as the
 * two-factor product rounds), and the quotient from vrcp14ps refined by a
 * Newton step where the scalar form divides: a 512-bit divide takes ~10
 * cycles a vector on the Intel cores measured, the whole sigmoid ~14 with
 * this. e takes tp__exp_f32's reduction and polynomial; the quotient may
 * differ from the divide's by an ULP, so these are held to bounds of their
 * own (test_vmath_avx512): sigmoid 2 ULP.
 * |x| is clamped at 110 (e is then 0 exactly, never a garbage reduction).
 * sigmoid(-inf) = 0, NaN -> NaN. silu (below) divides instead. */
/* The steps run on TP__VM_V16_K vectors at a time, step by step, so
 * the compiler keeps independent chains interleaved in program order: one
 * vector's chain is ~20 dependent operations (~80 cycles), and the
 * out-of-order core overlaps only as many of them as its scheduler holds
 * (silu in L1, Ice Lake: 0.42 -> 0.39 ns an element with 4 at a time;
 * 0.59 with the scalar form's divide, 0.34 with all of this). */
enum { TP__VM_V16_K = 4 };
#define TP__VM_V16_EACH for (int j_ = 0; j_ < TP__VM_V16_K; j_++)

/* e^y = 2^n * (1 + q) over cnt vectors (a constant, at most
 * TP__VM_V16_K), tp__exp_f32's reduction and polynomial: n = round(y /
 * ln 2), q = r + r^2 * P(r) with r = y - n ln 2 (in two parts). y must keep
 * the result in range (callers clamp or select away what does not); 2^n
 * is the caller's vscalefps. */
static inline __attribute__((always_inline)) void tp__vm_exp_parts_v16n(const int cnt, const __m512 *y, __m512 *n,
                                                                        __m512 *q) {
    __m512 r[TP__VM_V16_K];
#define TP__VM_V16_CNT for (int j_ = 0; j_ < cnt; j_++)
#define TP__VM_R16(v) _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
    TP__VM_EXP_PARTS_STEPS(TP__VM_V16_CNT, _mm512_fmadd_ps, _mm512_mul_ps, _mm512_set1_ps, TP__VM_R16, y, n, r, q);
#undef TP__VM_R16
#undef TP__VM_V16_CNT
}

/* The same over TP__VM_V16_K vectors. */
static inline __attribute__((always_inline)) void tp__vm_exp_parts_v16(const __m512 *y, __m512 *n, __m512 *q) {
    tp__vm_exp_parts_v16n(TP__VM_V16_K, y, n, q);
}

static inline __attribute__((always_inline)) void tp__vm_exp_negabs_v16(const __m512 *x, __m512 *e) {
    __m512 a[TP__VM_V16_K], n[TP__VM_V16_K], q[TP__VM_V16_K];
    TP__VM_V16_EACH a[j_] = _mm512_max_ps(_mm512_set1_ps(-110.0f), /* NaN passes: max returns its second operand */
                                          _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x[j_]),
                                                                              _mm512_set1_epi32((int)0x80000000u))));
    tp__vm_exp_parts_v16(a, n, q);
    TP__VM_V16_EACH e[j_] = _mm512_scalef_ps(_mm512_add_ps(_mm512_set1_ps(1.0f), q[j_]), n[j_]);
}

/* sigmoid = num / (1 + e) with num = e where x < 0, else 1: vrcp14ps's
 * estimate r of 1/(1 + e) (relative error < 2^-14), q = num*r, and one
 * Newton step on the quotient, q + (num - q*(1 + e))*r (the remainder
 * exact in an FMA): within ~2^-28 of the true quotient before the last
 * rounding, so about as close as the divide's. */
static inline __attribute__((always_inline)) void tp__sigmoid_v16(const __m512 *x, __m512 *y) {
    __m512 e[TP__VM_V16_K], d[TP__VM_V16_K], r[TP__VM_V16_K], num[TP__VM_V16_K], q[TP__VM_V16_K];
    tp__vm_exp_negabs_v16(x, e);
    TP__VM_V16_EACH d[j_] = _mm512_add_ps(_mm512_set1_ps(1.0f), e[j_]);
    TP__VM_V16_EACH r[j_] = _mm512_rcp14_ps(d[j_]);
    TP__VM_V16_EACH num[j_] = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x[j_], _mm512_setzero_ps(), _CMP_LT_OQ),
                                                   _mm512_set1_ps(1.0f), e[j_]);
    TP__VM_V16_EACH q[j_] = _mm512_mul_ps(num[j_], r[j_]);
    TP__VM_V16_EACH y[j_] = _mm512_fmadd_ps(_mm512_fnmadd_ps(q[j_], d[j_], num[j_]), r[j_], q[j_]);
}

/* silu = x / (1 + e), e = exp(-x), one division, the formula PyTorch's
 * vectorised silu computes (13 vector operations where x * sigmoid(x)
 * above takes 22: no |x|, no select, no Newton step; in L1 on Zen 4
 * 0.282 -> 0.207 ns an element; the divide runs beside the FMAs).
 * -x is clamped to [-104, 104] by one vrangeps (|x| limited, sign kept)
 * so the reduction never sees garbage: e is then 0 or inf through
 * vscalefps, and x / inf = -0. Like PyTorch's float result, silu(x) is
 * -0 for x < -88.72 (e overflows), within 2.7e-37 of the true value;
 * elsewhere the relative error is at most 1.8e-7 (the quotient of a 1-ULP
 * e). Bound tested (test_vmath_avx512): |err| <= 3e-37 + 3e-7*|ref|.
 * e takes tp__exp_f32's reduction and polynomial, evaluated by Horner
 * down to 1 in -r (r = x + n ln 2 is the reduced argument of -x, negated).
 * silu(-inf) = -inf / inf = NaN (PyTorch's), silu(inf) = inf, NaN -> NaN. */
static inline __attribute__((always_inline)) void tp__silu_v16(const __m512 *x, __m512 *y) {
    __m512 a[TP__VM_V16_K], n[TP__VM_V16_K], r[TP__VM_V16_K], p[TP__VM_V16_K];
    /* imm 0x02: the smaller magnitude, sign of the first operand (NaN passes) */
    TP__VM_V16_EACH a[j_] = _mm512_range_ps(x[j_], _mm512_set1_ps(104.0f), 0x02);
    TP__VM_V16_EACH n[j_] = _mm512_roundscale_ps(_mm512_mul_ps(a[j_], _mm512_set1_ps(-1.442695041f)),
                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    TP__VM_V16_EACH r[j_] = _mm512_fmadd_ps(n[j_], _mm512_set1_ps(0.693359375f), a[j_]);
    TP__VM_V16_EACH r[j_] = _mm512_fmadd_ps(n[j_], _mm512_set1_ps(-2.121944401e-4f), r[j_]);
    TP__VM_V16_EACH p[j_] = _mm512_fmadd_ps(_mm512_set1_ps(1.381461291e-3f), r[j_], _mm512_set1_ps(-8.368709833e-3f));
    TP__VM_V16_EACH p[j_] = _mm512_fmadd_ps(p[j_], r[j_], _mm512_set1_ps(4.166838737e-2f));
    TP__VM_V16_EACH p[j_] = _mm512_fmadd_ps(p[j_], r[j_], _mm512_set1_ps(-1.666652069e-1f));
    TP__VM_V16_EACH p[j_] = _mm512_fmadd_ps(p[j_], r[j_], _mm512_set1_ps(4.999999345e-1f));
    TP__VM_V16_EACH p[j_] = _mm512_fmadd_ps(p[j_], r[j_], _mm512_set1_ps(-1.0f));
    TP__VM_V16_EACH p[j_] = _mm512_fmadd_ps(p[j_], r[j_], _mm512_set1_ps(1.0f));
    TP__VM_V16_EACH p[j_] = _mm512_add_ps(_mm512_scalef_ps(p[j_], n[j_]), _mm512_set1_ps(1.0f));
    TP__VM_V16_EACH y[j_] = _mm512_div_ps(x[j_], p[j_]);
}

/* gelu (erf form), 16 lanes: tp__gelu_f32's erfc(z) = exp(-z^2 + g(z))
 * (the same degree-11 g by Estrin's scheme, z clamped at 4, the same exp
 * reduction and polynomial, 2^n applied by vscalefps), with 34 vector
 * operations a vector where a step-for-step copy of the scalar form took 42:
 *  - t = min(fma(|x|, 1/sqrt2, -2), 2): z - 2 in one rounding;
 *  - c = exp(g(t) - ln 2 - x^2/2) = erfc(z)/2: ln 2 folded into g's
 *    constant term (-1.364941239 - ln 2 rounded: 1.2e-7 off, a relative
 *    1.2e-7 on c), x^2/2 subtracted by one fnmadd (x^2/2 is exact, so the
 *    same rounding as a product then a difference);
 *  - the exponent clamped at -104, where exp rounds to 0 (vscalefps by
 *    2^-150), so every finite x needs no select of its tail;
 *  - the polynomial by Horner down to 1, as tp__silu_v16's;
 *  - gelu = max(x, 0) - |x| * c in one fnmadd (x - x*erfc(z)/2 for x >= 0,
 *    x*erfc(z)/2 for x < 0), |x| taken of min(x, FLT_MAX) so that +inf
 *    gives inf - FLT_MAX*0 = inf and -inf gives 0 - inf*0 = NaN
 *    (PyTorch's -inf * 0; tp__gelu_f32 returns the limit, -0); NaN -> NaN.
 * Held to tp__gelu_f32's bound (|err| <= 1e-9 + 1e-6*|ref|,
 * test_vmath_avx512); for |x| > 13.04 the value is within 2e-37 of 0 or
 * x where the scalar form selects them exactly.
 * In L1 (Ice Lake, 4096 floats, alternating) the step-for-step form took
 * 0.612-0.616 ns an element (22 cycles of operations on two ports of the
 * 25 measured); on 64 MiB (eltwise_bench) the loop reads every input line
 * prefetched and writes with non-temporal stores (tp__vgelu_v16_nt, below),
 * the arithmetic overlapping the memory traffic only in part. */
static inline __attribute__((always_inline)) void tp__gelu_v16(const __m512 *x, __m512 *y) {
    __m512 v[TP__VM_V16_K], t[TP__VM_V16_K], t2[TP__VM_V16_K], t4[TP__VM_V16_K], g[TP__VM_V16_K];
    __m512 a[TP__VM_V16_K], b[TP__VM_V16_K], c[TP__VM_V16_K], n[TP__VM_V16_K], r[TP__VM_V16_K];
    /* v = |min(x, FLT_MAX)| (min keeps the second operand: NaN -> FLT_MAX,
     * caught below through x^2); t = z - 2 with z = v/sqrt2 clamped at 4 */
    TP__VM_V16_EACH v[j_] = _mm512_abs_ps(_mm512_min_ps(x[j_], _mm512_set1_ps(FLT_MAX)));
    TP__VM_V16_EACH t[j_] = _mm512_min_ps(_mm512_set1_ps(2.0f),
                                          _mm512_fmadd_ps(v[j_], _mm512_set1_ps(0.7071067812f), _mm512_set1_ps(-2.0f)));
    TP__VM_GELU_G_STEPS_C0(TP__VM_V16_EACH, _mm512_fmadd_ps, _mm512_mul_ps, _mm512_set1_ps, -2.058088303e+00f, t,
                           t2, t4, a, b, c, g);
    /* e = g - ln 2 - x^2/2, clamped at -104 (max keeps a NaN e: its second operand) */
    TP__VM_V16_EACH g[j_] = _mm512_max_ps(_mm512_set1_ps(-104.0f),
                                          _mm512_fnmadd_ps(_mm512_mul_ps(x[j_], x[j_]), _mm512_set1_ps(0.5f), g[j_]));
    TP__VM_V16_EACH n[j_] = _mm512_roundscale_ps(_mm512_mul_ps(g[j_], _mm512_set1_ps(1.442695041f)),
                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    TP__VM_V16_EACH r[j_] = _mm512_fmadd_ps(n[j_], _mm512_set1_ps(-0.693359375f), g[j_]);
    TP__VM_V16_EACH r[j_] = _mm512_fmadd_ps(n[j_], _mm512_set1_ps(2.121944401e-4f), r[j_]);
    TP__VM_V16_EACH c[j_] = _mm512_fmadd_ps(_mm512_set1_ps(1.381461291e-3f), r[j_], _mm512_set1_ps(8.368709833e-3f));
    TP__VM_V16_EACH c[j_] = _mm512_fmadd_ps(c[j_], r[j_], _mm512_set1_ps(4.166838737e-2f));
    TP__VM_V16_EACH c[j_] = _mm512_fmadd_ps(c[j_], r[j_], _mm512_set1_ps(1.666652069e-1f));
    TP__VM_V16_EACH c[j_] = _mm512_fmadd_ps(c[j_], r[j_], _mm512_set1_ps(4.999999345e-1f));
    TP__VM_V16_EACH c[j_] = _mm512_fmadd_ps(c[j_], r[j_], _mm512_set1_ps(1.0f));
    TP__VM_V16_EACH c[j_] = _mm512_fmadd_ps(c[j_], r[j_], _mm512_set1_ps(1.0f));
    TP__VM_V16_EACH c[j_] = _mm512_scalef_ps(c[j_], n[j_]);
    /* gelu = max(x, 0) - |x| * erfc(z)/2 */
    TP__VM_V16_EACH y[j_] = _mm512_fnmadd_ps(v[j_], c[j_], _mm512_max_ps(x[j_], _mm512_setzero_ps()));
}

/* dst[i] = f(src[i]) for i < n through the 16-lane functions (dst == src
 * allowed): 64 floats a step, prefetching each of the step's input lines
 * 4 KiB ahead as the elementwise loops do (eltwise_loops.h, LOOP_PF); the
 * rest as up to four vectors, the last one masked (masked-off lanes compute
 * on zeros). A prefetch of one line in four (the hardware prefetcher left
 * to find the rest) left a 64 MiB gelu ~20% slower (Ice Lake, 16.7-19.8 ->
 * 12.5-15.5 ms, alternating).
 * tp__v<f>_v16_nt: the same values stored with non-temporal stores from
 * dst's first 64-byte boundary on (plain stores before it and for the
 * tail), for outputs too large to stay in cache: their lines are not read
 * from memory first (64 MiB gelu 12.5-15.5 -> 11.1-14.3 ms). The caller
 * orders the stores (sfence) before others read dst. */
#define TP__VM_ARRAY_V16(name)                                                                       \
    static inline __attribute__((always_inline)) void tp__v##name##_v16_body(                       \
        float *dst, const float *src, int64_t n, const bool nt) {                                    \
        __m512 x[TP__VM_V16_K], y[TP__VM_V16_K];                                                     \
        int64_t i = 0;                                                                               \
        if (nt) { /* up to dst's first 64-byte boundary: one masked vector, plain stores */          \
            const int64_t head = (int64_t)((64 - ((uintptr_t)dst & 63)) & 63) / 4;                   \
            i = head < n ? head : n;                                                                 \
            if (i > 0) {                                                                             \
                const __mmask16 hm = tp__avx512_lanes(i);                                            \
                TP__VM_V16_EACH x[j_] = j_ ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(hm, src);   \
                tp__##name##_v16(x, y);                                                              \
                _mm512_mask_storeu_ps(dst, hm, y[0]);                                                \
            }                                                                                        \
        }                                                                                            \
        for (; i + 16 * TP__VM_V16_K <= n; i += 16 * TP__VM_V16_K) {                                 \
            TP__VM_V16_EACH __builtin_prefetch(src + i + TP__VM_PF_AHEAD + 16 * j_, 0, 3);           \
            TP__VM_V16_EACH x[j_] = _mm512_loadu_ps(src + i + 16 * j_);                              \
            tp__##name##_v16(x, y);                                                                  \
            if (nt) TP__VM_V16_EACH _mm512_stream_ps(dst + i + 16 * j_, y[j_]);                      \
            else TP__VM_V16_EACH _mm512_storeu_ps(dst + i + 16 * j_, y[j_]);                         \
        }                                                                                            \
        if (i == n) return;                                                                          \
        __mmask16 m[TP__VM_V16_K];                                                                   \
        TP__VM_V16_EACH {                                                                            \
            const int64_t left = n - i - 16 * j_;                                                    \
            m[j_] = tp__avx512_lanes(left);                                                          \
            x[j_] = _mm512_maskz_loadu_ps(m[j_], src + i + 16 * j_);                                 \
        }                                                                                            \
        tp__##name##_v16(x, y);                                                                      \
        TP__VM_V16_EACH _mm512_mask_storeu_ps(dst + i + 16 * j_, m[j_], y[j_]);                      \
    }                                                                                                \
    static inline void tp__v##name##_v16(float *dst, const float *src, int64_t n) {                 \
        tp__v##name##_v16_body(dst, src, n, false);                                                  \
    }                                                                                                \
    static inline void tp__v##name##_v16_nt(float *dst, const float *src, int64_t n) {              \
        tp__v##name##_v16_body(dst, src, n, true);                                                   \
    }
TP__VM_ARRAY_V16(sigmoid)
TP__VM_ARRAY_V16(silu)
TP__VM_ARRAY_V16(gelu)
#undef TP__VM_ARRAY_V16
#endif

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
/* ---- silu and gelu, 8 lanes (AVX2 + FMA) ----
 * tp__silu_v16's formula, x / (1 + exp(-x)), where AVX2 lacks vrangeps
 * and vscalefps: x is clamped to [-89, 87] (vmaxps/vminps with x second,
 * so NaN passes), which keeps n = round(-x / ln 2) in [-126, 128], and 2^n
 * is applied as 2 * 2^(n-1) built in the exponent bits (the polynomial's
 * coefficients doubled, exactly): e = inf where 2^n * e^r overflows (so
 * x / inf = -0 below -88.72, as PyTorch's float result and the AVX-512
 * form), 2^-127 -> 0 for x above 86.6 where 1 + e is 1 anyway. The same
 * values as tp__silu_v16 (the same reduction, polynomial and divide; a
 * product by a power of two rounds only where e is denormal, where
 * 1 + e = 1), held to its bound by test_vmath_fma: |err| <= 3e-37 +
 * 3e-7*|ref|. In L1 on Zen 4 0.71 -> 0.27 ns an element against the
 * auto-vectorised x * sigmoid(x) (18 vector operations for 8 outputs).
 * silu(-inf) NaN (PyTorch's -inf * 0), silu(inf) = inf, NaN -> NaN. */
#include <immintrin.h>
enum { TP__VM_V8_K = 4 };
#define TP__VM_V8_EACH for (int j_ = 0; j_ < TP__VM_V8_K; j_++)

/* e^y = 2^n * (1 + q) over cnt vectors (at most TP__VM_V8_K):
 * tp__vm_exp_parts_v16n's steps at 8 lanes. */
static inline __attribute__((always_inline)) void tp__vm_exp_parts_v8n(const int cnt, const __m256 *y, __m256 *n,
                                                                       __m256 *q) {
    __m256 r[TP__VM_V8_K];
#define TP__VM_V8_CNT for (int j_ = 0; j_ < cnt; j_++)
#define TP__VM_R8(v) _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
    TP__VM_EXP_PARTS_STEPS(TP__VM_V8_CNT, _mm256_fmadd_ps, _mm256_mul_ps, _mm256_set1_ps, TP__VM_R8, y, n, r, q);
#undef TP__VM_R8
#undef TP__VM_V8_CNT
}

/* v * 2^n for n integral in [-126, 127], 2^n built in the exponent bits:
 * one rounding (where the product is denormal), as vscalefps. */
static inline __m256 tp__vm_scale_pow2_v8(__m256 v, __m256 n) {
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(v, _mm256_castsi256_ps(bits));
}
static inline __attribute__((always_inline)) void tp__silu_v8(const __m256 *x, __m256 *y) {
    __m256 a[TP__VM_V8_K], n[TP__VM_V8_K], r[TP__VM_V8_K], p[TP__VM_V8_K];
    TP__VM_V8_EACH a[j_] = _mm256_min_ps(_mm256_set1_ps(87.0f), _mm256_max_ps(_mm256_set1_ps(-89.0f), x[j_]));
    TP__VM_V8_EACH n[j_] = _mm256_round_ps(_mm256_mul_ps(a[j_], _mm256_set1_ps(-1.442695041f)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    TP__VM_V8_EACH r[j_] = _mm256_fmadd_ps(n[j_], _mm256_set1_ps(0.693359375f), a[j_]);
    TP__VM_V8_EACH r[j_] = _mm256_fmadd_ps(n[j_], _mm256_set1_ps(-2.121944401e-4f), r[j_]);
    TP__VM_V8_EACH p[j_] = _mm256_fmadd_ps(_mm256_set1_ps(2 * 1.381461291e-3f), r[j_], _mm256_set1_ps(2 * -8.368709833e-3f));
    TP__VM_V8_EACH p[j_] = _mm256_fmadd_ps(p[j_], r[j_], _mm256_set1_ps(2 * 4.166838737e-2f));
    TP__VM_V8_EACH p[j_] = _mm256_fmadd_ps(p[j_], r[j_], _mm256_set1_ps(2 * -1.666652069e-1f));
    TP__VM_V8_EACH p[j_] = _mm256_fmadd_ps(p[j_], r[j_], _mm256_set1_ps(2 * 4.999999345e-1f));
    TP__VM_V8_EACH p[j_] = _mm256_fmadd_ps(p[j_], r[j_], _mm256_set1_ps(-2.0f));
    TP__VM_V8_EACH p[j_] = _mm256_fmadd_ps(p[j_], r[j_], _mm256_set1_ps(2.0f));
    TP__VM_V8_EACH {
        const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n[j_]), _mm256_set1_epi32(126)), 23);
        p[j_] = _mm256_add_ps(_mm256_mul_ps(p[j_], _mm256_castsi256_ps(bits)), _mm256_set1_ps(1.0f));
    }
    TP__VM_V8_EACH y[j_] = _mm256_div_ps(x[j_], p[j_]);
}

/* gelu (erf form), 8 lanes: tp__gelu_f32's steps with AVX2's means (blends
 * on compare masks, |x| by clearing the sign) and 2^n built in the
 * exponent bits, where n = round((g - z^2) / ln 2) lies in [-126, 0] for
 * every lane the tail select keeps (z^2 <= 85; erfc(z) <= 1), so the
 * product with 2^n rounds once as vscalefps does (test_vmath_fma holds it to
 * tp__gelu_v16's bound; tp__gelu_v16 folds and fuses steps this form keeps
 * apart, and needs vscalefps for its tail without selects). Lanes past the
 * tail or NaN convert to garbage exponents that the selects drop, never a
 * trap. gelu(-inf) NaN (PyTorch's -inf * 0). In L1 on Zen 4 1.05 -> 0.73 ns
 * an element against the auto-vectorised tp__gelu_f32. */
static inline __attribute__((always_inline)) void tp__gelu_v8(const __m256 *x, __m256 *y) {
    __m256 z2[TP__VM_V8_K], t[TP__VM_V8_K], t2[TP__VM_V8_K], t4[TP__VM_V8_K], g[TP__VM_V8_K];
    __m256 a[TP__VM_V8_K], b[TP__VM_V8_K], c[TP__VM_V8_K], n[TP__VM_V8_K];
    /* z = |x|/sqrt2, clamped at 4 (min keeps a NaN z: its second operand) */
    TP__VM_V8_EACH t[j_] = _mm256_sub_ps(
        _mm256_min_ps(_mm256_set1_ps(4.0f), _mm256_mul_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x[j_]),
                                                          _mm256_set1_ps(0.7071067812f))),
        _mm256_set1_ps(2.0f));
    TP__VM_V8_EACH z2[j_] = _mm256_mul_ps(_mm256_mul_ps(x[j_], x[j_]), _mm256_set1_ps(0.5f));
    TP__VM_GELU_G_STEPS(TP__VM_V8_EACH, _mm256_fmadd_ps, _mm256_mul_ps, _mm256_set1_ps, t, t2, t4, a, b, c, g);
    /* exp(g - z^2) */
    TP__VM_V8_EACH g[j_] = _mm256_sub_ps(g[j_], z2[j_]);
    tp__vm_exp_parts_v8n(TP__VM_V8_K, g, n, a);
    TP__VM_V8_EACH c[j_] = tp__vm_scale_pow2_v8(_mm256_add_ps(_mm256_set1_ps(1.0f), a[j_]), n[j_]);
    /* h = 0.5*x*erfc(z) (-0 past the tail); gelu = h for x < 0, else x - h */
    TP__VM_V8_EACH b[j_] = _mm256_blendv_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x[j_]), c[j_]),
                                            _mm256_set1_ps(-0.0f),
                                            _mm256_cmp_ps(z2[j_], _mm256_set1_ps(85.0f), _CMP_GT_OQ));
    TP__VM_V8_EACH y[j_] = _mm256_blendv_ps(_mm256_sub_ps(x[j_], b[j_]), b[j_],
                                            _mm256_cmp_ps(x[j_], _mm256_setzero_ps(), _CMP_LT_OQ));
    TP__VM_V8_EACH y[j_] = _mm256_blendv_ps(y[j_], _mm256_set1_ps(NAN),
                                            _mm256_cmp_ps(x[j_], _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ));
}

/* dst[i] = f(src[i]) through the 8-lane functions (dst == src allowed),
 * 32 floats a step with the input prefetched as the 16-lane loops do, the
 * rest through a zero-padded buffer. */
#define TP__VM_ARRAY_V8(name)                                                         \
    static inline void tp__v##name##_v8(float *dst, const float *src, int64_t n) {    \
        __m256 x[TP__VM_V8_K], y[TP__VM_V8_K];                                        \
        int64_t i = 0;                                                                \
        for (; i + 8 * TP__VM_V8_K <= n; i += 8 * TP__VM_V8_K) {                      \
            __builtin_prefetch(src + i + TP__VM_PF_AHEAD, 0, 3);                      \
            __builtin_prefetch(src + i + TP__VM_PF_AHEAD + 16, 0, 3);                 \
            TP__VM_V8_EACH x[j_] = _mm256_loadu_ps(src + i + 8 * j_);                 \
            tp__##name##_v8(x, y);                                                    \
            TP__VM_V8_EACH _mm256_storeu_ps(dst + i + 8 * j_, y[j_]);                 \
        }                                                                             \
        if (i == n) return;                                                           \
        float buf[8 * TP__VM_V8_K] = {0};                                             \
        memcpy(buf, src + i, (size_t)(n - i) * sizeof(float));                        \
        TP__VM_V8_EACH x[j_] = _mm256_loadu_ps(buf + 8 * j_);                         \
        tp__##name##_v8(x, y);                                                        \
        TP__VM_V8_EACH _mm256_storeu_ps(buf + 8 * j_, y[j_]);                         \
        memcpy(dst + i, buf, (size_t)(n - i) * sizeof(float));                        \
    }
TP__VM_ARRAY_V8(silu)
TP__VM_ARRAY_V8(gelu)
#undef TP__VM_ARRAY_V8
#undef TP__VM_V8_EACH
#endif

/* ---- erf / erfc core ----
 * For z = |x| < 1: erf(z) = z*P(z^2), P of degree 6 (minimax, relative).
 * For z >= 1: erfc(z) = exp(-z^2 + g(z)) with g(z) = log(erfc(z)) + z^2 a
 * degree-8 polynomial in (z - 2.5) fitted on [1, 4] (relative error of erfc
 * ~1.2e-8 there). Beyond 4 g is held at g(4): erf is 1 to float precision
 * there, and erfc keeps its exp(-z^2) decay with a relative error that grows
 * slowly (used only by gelu, whose values there are < 1e-7 * |x|).
 * Writes erf(z) to *erf_out and erfc(z) to *erfc_out; z must be >= 0 or NaN. */
static inline void tp__vm_erf_erfc(float z, float *erf_out, float *erfc_out) {
    float z2 = z * z;
    float ps = 8.254957500e-05f;
    ps = ps * z2 + -8.131801164e-04f;
    ps = ps * z2 + 5.201977037e-03f;
    ps = ps * z2 + -2.686072567e-02f;
    ps = ps * z2 + 1.128373801e-01f;
    ps = ps * z2 + -3.761263751e-01f;
    ps = ps * z2 + 1.128379167e+00f;
    ps = ps * z;
    float zc = tp__vm_sel(z > 4.0f, 4.0f, z);
    zc = tp__vm_sel(zc < 1.0f, 1.0f, zc); /* keep the unused branch in range */
    float t = zc - 2.5f;
    float g = 1.599816001e-06f;
    g = g * t + -1.330170686e-05f;
    g = g * t + 7.745493344e-05f;
    g = g * t + -4.201731329e-04f;
    g = g * t + 2.165081504e-03f;
    g = g * t + -1.085848734e-02f;
    g = g * t + 5.610639165e-02f;
    g = g * t + -3.526806885e-01f;
    g = g * t + -1.556815279e+00f;
    float c = tp__exp_f32(g - z2);
    int small = z < 1.0f;
    *erf_out = tp__vm_sel(small, ps, 1.0f - c);
    *erfc_out = tp__vm_sel(small, 1.0f - ps, c);
}

/* ---- erf ----
 * Bound: 2 ULP; erf(+-inf) = +-1,
 * erf(-0) = -0. */
static inline float tp__erf_f32(float x) {
    uint32_t sign = tp__f32_bits(x) & 0x80000000u;
    float z = tp__f32_from_bits(tp__f32_bits(x) & 0x7FFFFFFFu);
    float e, c;
    tp__vm_erf_erfc(z, &e, &c);
    return tp__f32_from_bits(tp__f32_bits(e) | sign);
}

/* exp(y) for -87.3 <= y <= 0, whose result is normal (>= 1.2e-38), so one
 * 2^n factor suffices. No clamp: for y outside that range (or NaN) the
 * result is garbage, never a trap, and the caller must select it away
 * (gelu's erfc tail, the only user, does so where z^2 > 85). */
static inline float tp__vm_exp_nonpos(float y) {
    float k = y * 1.442695041f + TP__VM_MAGIC; /* bits(k) = 0x4B400000 + n */
    float n = k - TP__VM_MAGIC;
    float r = y - n * 0.693359375f;
    r = r - n * -2.121944401e-4f;
    float p = 1.381461291e-3f;
    p = p * r + 8.368709833e-3f;
    p = p * r + 4.166838737e-2f;
    p = p * r + 1.666652069e-1f;
    p = p * r + 4.999999345e-1f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    return p * tp__f32_from_bits((tp__f32_bits(k) << 23) + 0x3F800000u); /* 2^n, n in [-126, 0] */
}

/* ---- gelu (erf form) ----
 * 0.5*x*(1 + erf(x/sqrt2)) through one erfc for both signs: with
 * z = |x|/sqrt2 and h = 0.5*x*erfc(z), gelu = h for x < 0 (the negative tail
 * keeps its relative precision instead of cancelling in 1 + erf) and x - h
 * for x >= 0 (no cancellation: erfc <= 1). erfc(z) = exp(-z^2 + g(z)) with
 * g(z) = log(erfc(z)) + z^2 a degree-11 polynomial in (z - 2) fitted on
 * [0, 4] (|error of g| 2.4e-8); beyond 4 g is held at g(4), where erfc's
 * relative error grows slowly but gelu is within 1e-7*|x| of x or of 0.
 * For z^2 > 85 (|x| > 13.04) erfc < 1e-38 and h is -0, so gelu is x or -0;
 * below that g - z^2 >= g(4) - 85 > -87.3 (g falls from 0 at z = 0 to
 * -1.99 at z = 4), so the exp needs neither a clamp nor denormals: the
 * lanes the select drops (inf, huge |x|) may compute garbage, never traps.
 * gelu(-inf) = -0, gelu(inf) = inf, NaN -> NaN.
 * Bound: |err| <= 1e-9 + 1e-6*|ref| (the rounding of z^2 and of g limits
 * the relative precision of the negative tail; for x < -5.7 only the
 * absolute bound is met). */
static inline float tp__gelu_f32(float x) {
    float z = tp__f32_from_bits(tp__f32_bits(x) & 0x7FFFFFFFu) * 0.7071067812f;
    float z2 = (x * x) * 0.5f; /* one rounding, where z * z has three */
    float t = tp__vm_blend(z > 4.0f, 4.0f, z) - 2.0f;
    /* Estrin's scheme: pairs, then t^2, t^4, t^8 levels. Four dependent
     * steps where Horner has eleven: the loop is bound by how many
     * iterations the out-of-order core overlaps, and these chains let it
     * overlap more (gelu in L1 0.75-0.79 -> 0.69-0.70 ns an element on an
     * AVX-512 Xeon). */
    const float t2 = t * t, t4 = t2 * t2, t8 = t4 * t4;
    const float p01 = -1.364941239e+00f + -4.181608260e-01f * t, p23 = 7.624871284e-02f + -1.646503620e-02f * t;
    const float p45 = 3.572081448e-03f + -7.325687911e-04f * t, p67 = 1.338570873e-04f + -2.054579636e-05f * t;
    const float p89 = 2.674537200e-06f + 1.236211631e-07f * t, pab = -3.394441990e-07f + 7.887393849e-08f * t;
    const float g = ((p01 + p23 * t2) + (p45 + p67 * t2) * t4) + (p89 + pab * t2) * t8;
    float c = tp__vm_exp_nonpos(g - z2);
    float h = tp__vm_blend(z2 > 85.0f, -0.0f, (0.5f * x) * c);
    return tp__vm_blend(x < 0.0f, h, x - h);
}

/* ---- gelu_tanh ----
 * 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))), evaluated as the
 * identical x * sigmoid(2*sqrt(2/pi)*(x + 0.044715*x^3)) so the negative
 * tail does not cancel. gelu_tanh(-inf) = -0, gelu_tanh(inf) = inf.
 * Bound: |err| <= 1e-9 + 1e-6*|ref| (the float rounding of the cubic
 * argument limits the relative precision of the negative tail). */
static inline float tp__gelu_tanh_f32(float x) {
    float v = x * (1.5957691216f + 7.1354816273e-02f * (x * x));
    float r = x * tp__sigmoid_f32(v);
    return tp__vm_sel(x == -INFINITY, -0.0f, r);
}

/* ---- array versions ----
 * dst[i] = f(src[i]) for 0 <= i < n; dst == src is allowed, partial overlap
 * is not (the loops carry `ivdep`, which drops gcc's runtime alias check;
 * clang gets its own spelling of the same promise). */
#if defined(__clang__)
#define TP__VM_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define TP__VM_IVDEP _Pragma("GCC ivdep")
#else
#define TP__VM_IVDEP
#endif
#define TP__VM_ARRAY(name)                                                                 \
    static inline void tp__v##name##_f32(float *dst, const float *src, int64_t n) {        \
        TP__VM_IVDEP for (int64_t i = 0; i < n; i++) dst[i] = tp__##name##_f32(src[i]);     \
    }
TP__VM_ARRAY(exp)
TP__VM_ARRAY(log)
TP__VM_ARRAY(tanh)
TP__VM_ARRAY(sigmoid)
TP__VM_ARRAY(silu)
TP__VM_ARRAY(erf)
TP__VM_ARRAY(gelu)
TP__VM_ARRAY(gelu_tanh)
#undef TP__VM_ARRAY

/* exp(y) for y <= 0 (or NaN), flushing results below FLT_MIN to 0: the same
 * value as tp__exp_f32 for y >= -87.33 (there the result is normal, so one
 * 2^n factor rounds as the two do), +0 below (exp(-87.33) = 1.2e-38; the
 * true results there are denormals or 0). Denormal results cost a microcode
 * assist of ~100 cycles per instruction on Intel cores: a causal mask's
 * -inf scores made softmax 2.5x slower. NaN passes. */
static inline float tp__vm_exp_nonpos_ftz(float y) {
    const int tiny = y < -87.33f;
    float x = tp__vm_sel(tiny, -87.33f, y); /* keeps 2^n normal: n >= -126 */
    float n;
    float p = tp__vm_exp_reduced(x, &n);
    return tp__vm_sel(tiny, 0.0f, p * tp__vm_pow2i(n));
}

/* ---- softmax helper ----
 * dst[i] = exp(src[i] - max) (the subtraction rounded in float, then
 * tp__vm_exp_nonpos_ftz: terms below FLT_MIN are 0, which moves the sum -
 * at least 1, the max's own term - by at most n * 1.2e-38), returning the
 * float sum of dst[0..n). Summation order, fixed for every ISA: 16 partial
 * sums, lane j accumulating dst[i] for i = j mod 16 in increasing i; then
 * lanes are folded pairwise, lane j += lane j+8, then j+4, j+2, j+1, and
 * lane 0 is the result. dst == src is allowed.
 * pf, when not NULL, is n floats to pull into cache meanwhile (the next
 * softmax row): a block of it is prefetched before each block of exps, so
 * its memory reads overlap the arithmetic instead of stalling the next
 * row's max pass. Blocks are then 256 floats, 16 lines in flight at a time
 * (1024 otherwise); the result does not depend on the block size. */
static inline float tp__vexp_sub_sum_f32(float *dst, const float *src, int64_t n, float max, const float *pf) {
    float acc[16] = {0};
    const int64_t block = pf ? 256 : 1024; /* a multiple of 16: keeps the lane of i at i % 16 */
    for (int64_t b = 0; b < n; b += block) {
        int64_t m = n - b < block ? n - b : block;
        if (pf)
            for (int64_t k = 0; k < m; k += 16) __builtin_prefetch(pf + b + k);
        float *d = dst + b;
        const float *s = src + b;
        const int64_t m16 = m & ~(int64_t)15;
        TP__VM_IVDEP for (int64_t i = 0; i < m16; i++) d[i] = tp__vm_exp_nonpos_ftz(s[i] - max);
        int64_t i = 0;
        for (; i < m16; i += 16)
            for (int j = 0; j < 16; j++) acc[j] += d[i + j];
        if (i < m) {
            /* the tail as one full vector (padding exp(-inf) = +0 adds
             * nothing): rows of 197 spent a third of their time on 5
             * scalar exps */
            float t[16];
#if defined(__AVX512F__)
            /* masked vector load and store: building t element by element
             * cost rows of 197 as much as 190 of their other elements */
            const __mmask16 k = tp__avx512_lanes(m - i);
            _mm512_storeu_ps(t, _mm512_sub_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k, s + i),
                                              _mm512_set1_ps(max)));
            for (int j = 0; j < 16; j++) t[j] = tp__vm_exp_nonpos_ftz(t[j]);
            _mm512_mask_storeu_ps(d + i, k, _mm512_loadu_ps(t));
#else
            for (int j = 0; j < 16; j++) t[j] = i + j < m ? s[i + j] - max : -INFINITY;
            for (int j = 0; j < 16; j++) t[j] = tp__vm_exp_nonpos_ftz(t[j]);
            for (int j = 0; i + j < m; j++) d[i + j] = t[j];
#endif
            for (int j = 0; j < 16; j++) acc[j] += t[j];
        }
    }
    for (int w = 8; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) acc[j] += acc[j + w];
    return acc[0];
}

#endif
