/*
 * test_vmath.c - error bounds of the float32 math in src/cpu/vmath.h.
 *
 * Each function is compared with the double-precision libm value of the same
 * formula rounded to float, over (a) a strided sweep of all 2^32 bit
 * patterns, (b) a dense sweep of every k-th float of the interesting range
 * and (c) special values (+-0, +-inf, NaN, denormals, overflow thresholds).
 * exp/log/tanh/sigmoid/erf are held to a ULP bound (distance in
 * representable floats, so 0 and the denormals count); gelu, gelu_tanh and
 * silu to |err| <= abs_tol + rel_tol*|ref| (cancellation near the zeros of
 * the argument of erf/tanh makes ULPs the wrong measure there). The array
 * versions must match the scalar ones bitwise (NaN payloads aside), and tp__vexp_sub_sum_f32 must
 * sum in its documented order.
 *
 * Measured (gcc 12, x86-64; every 1021st bit pattern plus 2^22 floats of
 * the range, identical at -O2 and -O3 since the scalar formula is the same
 * IEEE operations; TP_VMATH_EXHAUSTIVE=1 runs
 * all 2^32 patterns, about 20 CPU-minutes):
 *   exp 1 ULP, log 1 ULP, tanh 2 ULP, sigmoid 2 ULP, erf 2 ULP;
 *   silu      |err| <= 1e-37 + 3e-7*|ref| holds with margin (max 0.68 of it,
 *             i.e. relative error 2.1e-7 above the denormals);
 *   gelu      |err| <= 1e-9 + 1e-6*|ref| (max 0.51 of it, near x = -2.9:
 *             the rounding of x^2/2 and of the erfc exponent sets the
 *             relative error of the negative tail, and for x < -5.7,
 *             |gelu| < 5e-8, only the absolute bound is met);
 *   gelu_tanh |err| <= 1e-9 + 1e-6*|ref| (max 0.69 of it; the rounding of
 *             the cubic argument sets the relative error of the tail).
 * Built with AVX-512 (test_vmath_avx512), the 16-lane intrinsic sigmoid is
 * held to the scalar form's bound too (measured: 2 ULP) and the 16-lane
 * silu, x / (1 + exp(-x)) as PyTorch computes it, to |err| <= 3e-37 +
 * 3e-7*|ref| (max relative error 1.8e-7; -0 for x < -88.72 as PyTorch's
 * float result, 2.7e-37 from the true value at most), and the 16-lane gelu
 * (its own arrangement of the scalar form's steps, vmath.h) to gelu's bound
 * (max 0.75 of it, near x = -2.97), their arrays matched against them at
 * every tail length.
 * test_vmath_fma runs the same checks built with -O3 -ffp-contract=fast
 * -mavx2 -mfma, as the avx2/avx512 elementwise loops are (their polynomials
 * then use fused multiply-adds); the bounds above hold there too, and it
 * holds the 8-lane AVX2 silu and gelu to the 16-lane forms' bounds (silu's
 * values the same bit for bit; gelu_v8 follows the scalar form's steps), their
 * arrays at every tail length.
 * The sweep is sparser when built without optimisation (the -O0 sanitizer
 * build) so it stays within a few seconds there.
 */
#include <float.h>
#include <inttypes.h>
#include <stdint.h>

#include "cpu/vmath.h"
#include "test_util.h"

#ifdef __OPTIMIZE__
enum { ALL_STRIDE = 1021, RANGE_COUNT = 1 << 22 };
#else
enum { ALL_STRIDE = 4099, RANGE_COUNT = 1 << 20 };
#endif

/* ---- references (double libm, same formula) ---- */
static double ref_exp(double x) { return exp(x); }
static double ref_log(double x) { return log(x); }
static double ref_tanh(double x) { return tanh(x); }
static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ref_erf(double x) { return erf(x); }
static double ref_silu(double x) {
    if (x == -INFINITY) return -0.0;
    return x / (1.0 + exp(-x));
}
static double ref_gelu(double x) {
    if (x == -INFINITY) return -0.0;
    return 0.5 * x * erfc(-x / sqrt(2.0));
}
/* 0.5*x*(1+tanh(u)) == x/(1+exp(-2u)): the second form does not cancel. */
static double ref_gelu_tanh(double x) {
    if (x == -INFINITY) return -0.0;
    double u = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-2.0 * u));
}

typedef struct {
    const char *name;
    float (*fn)(float);
    void (*vfn)(float *, const float *, int64_t);
    double (*ref)(double);
    float lo, hi;      /* the dense-sweep range */
    int ulp_bound;     /* > 0: a ULP bound */
    double abs_tol;    /* else |err| <= abs_tol + rel_tol*|ref| */
    double rel_tol;
} vm_case;

/* The scalar functions are static inline; take them through wrappers. */
#define WRAP(name)                                                                  \
    static float s_##name(float x) { return tp__##name##_f32(x); }                 \
    static void v_##name(float *d, const float *s, int64_t n) { tp__v##name##_f32(d, s, n); }
WRAP(exp)
WRAP(log)
WRAP(tanh)
WRAP(sigmoid)
WRAP(erf)
WRAP(silu)
WRAP(gelu)
WRAP(gelu_tanh)

#ifdef __AVX512F__
/* The 16-lane AVX-512 sigmoid / silu / gelu (vmath.h): lane 0 of x broadcast; the
 * array forms are their loops with the masked tail. silu_v16(-inf) and
 * gelu_v16(-inf) are NaN (PyTorch's -inf * 0), not the scalar forms' limits. */
static float s_sigmoid_v16(float x) {
    __m512 v[TP__VM_V16_K], y[TP__VM_V16_K];
    for (int j = 0; j < TP__VM_V16_K; j++) v[j] = _mm512_set1_ps(x);
    tp__sigmoid_v16(v, y);
    return _mm512_cvtss_f32(y[0]);
}
static float s_silu_v16(float x) {
    __m512 v[TP__VM_V16_K], y[TP__VM_V16_K];
    for (int j = 0; j < TP__VM_V16_K; j++) v[j] = _mm512_set1_ps(x);
    tp__silu_v16(v, y);
    return _mm512_cvtss_f32(y[0]);
}
static float s_gelu_v16(float x) {
    __m512 v[TP__VM_V16_K], y[TP__VM_V16_K];
    for (int j = 0; j < TP__VM_V16_K; j++) v[j] = _mm512_set1_ps(x);
    tp__gelu_v16(v, y);
    return _mm512_cvtss_f32(y[0]);
}
static void v_sigmoid_v16(float *d, const float *s, int64_t n) { tp__vsigmoid_v16(d, s, n); }
static void v_gelu_v16(float *d, const float *s, int64_t n) { tp__vgelu_v16(d, s, n); }
static void v_silu_v16(float *d, const float *s, int64_t n) { tp__vsilu_v16(d, s, n); }
static double ref_silu_v16(double x) { return x == -INFINITY ? NAN : ref_silu(x); }
static double ref_gelu_v16(double x) { return x == -INFINITY ? NAN : ref_gelu(x); }
#endif
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
/* The 8-lane AVX2 silu and gelu (vmath.h): lane 0 of x broadcast; the array
 * forms the 32-float loop with the buffered tail. silu_v8(-inf) and
 * gelu_v8(-inf) are NaN, as the 16-lane forms'. */
#define WRAP_V8(name)                                                                 \
    static float s_##name##_v8(float x) {                                             \
        __m256 v[4], y[4];                                                            \
        for (int j = 0; j < 4; j++) v[j] = _mm256_set1_ps(x);                        \
        tp__##name##_v8(v, y);                                                        \
        return _mm256_cvtss_f32(y[0]);                                                \
    }                                                                                 \
    static void v_##name##_v8(float *d, const float *s, int64_t n) { tp__v##name##_v8(d, s, n); }
WRAP_V8(silu)
WRAP_V8(gelu)
static double ref_silu_v8(double x) { return x == -INFINITY ? NAN : ref_silu(x); }
static double ref_gelu_v8(double x) { return x == -INFINITY ? NAN : ref_gelu(x); }
#endif

static const vm_case cases[] = {
    {"exp", s_exp, v_exp, ref_exp, -104.0f, 89.0f, 1, 0, 0},
    {"log", s_log, v_log, ref_log, 0.0f, 16.0f, 1, 0, 0},
    {"tanh", s_tanh, v_tanh, ref_tanh, -10.0f, 10.0f, 2, 0, 0},
    {"sigmoid", s_sigmoid, v_sigmoid, ref_sigmoid, -105.0f, 20.0f, 2, 0, 0},
    {"erf", s_erf, v_erf, ref_erf, -4.5f, 4.5f, 2, 0, 0},
    {"silu", s_silu, v_silu, ref_silu, -105.0f, 20.0f, 0, 1e-37, 3e-7},
    {"gelu", s_gelu, v_gelu, ref_gelu, -15.0f, 10.0f, 0, 1e-9, 1e-6},
    {"gelu_tanh", s_gelu_tanh, v_gelu_tanh, ref_gelu_tanh, -15.0f, 10.0f, 0, 1e-9, 1e-6},
#ifdef __AVX512F__
    {"sigmoid_v16", s_sigmoid_v16, v_sigmoid_v16, ref_sigmoid, -105.0f, 20.0f, 2, 0, 0},
    {"silu_v16", s_silu_v16, v_silu_v16, ref_silu_v16, -105.0f, 20.0f, 0, 3e-37, 3e-7},
    {"gelu_v16", s_gelu_v16, v_gelu_v16, ref_gelu_v16, -15.0f, 10.0f, 0, 1e-9, 1e-6},
#endif
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
    {"silu_v8", s_silu_v8, v_silu_v8, ref_silu_v8, -105.0f, 20.0f, 0, 3e-37, 3e-7},
    {"gelu_v8", s_gelu_v8, v_gelu_v8, ref_gelu_v8, -15.0f, 10.0f, 0, 1e-9, 1e-6},
#endif
};

/* Floats mapped to integers in the same order (-0 and +0 coincide). */
static int64_t ordered(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x80000000u) ? -(int64_t)(u & 0x7FFFFFFFu) : (int64_t)u;
}
static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

typedef struct {
    int64_t max_ulp;
    float worst_ulp_x;
    double max_excess; /* max of err / (abs_tol + rel_tol*|ref|) */
    float worst_excess_x;
    double max_rel;    /* max relative error where |ref| >= FLT_MIN */
    int64_t n_checked;
    int64_t n_nan_bad;
} vm_stats;

static void check_one(const vm_case *c, float x, vm_stats *st) {
    float y = c->fn(x);
    double rd = c->ref((double)x);
    float rf = (float)rd;
    st->n_checked++;
    if (isnan(rf) || isnan(y)) {
        if (isnan(rf) != isnan(y)) {
            if (st->n_nan_bad++ < 5)
                fprintf(stderr, "  %s(%a): got %a, expected %a\n", c->name, x, y, rf);
        }
        return;
    }
    int64_t d = ordered(y) - ordered(rf);
    if (d < 0) d = -d;
    if (d > st->max_ulp) {
        st->max_ulp = d;
        st->worst_ulp_x = x;
    }
    if (!isinf(rf) || !isinf(y)) {
        double err = fabs((double)y - rd);
        if (isinf(rd) || isinf(y)) err = INFINITY;
        double tol = c->abs_tol + c->rel_tol * fabs(rd);
        double ex = c->ulp_bound > 0 ? 0 : (tol > 0 ? err / tol : (err > 0 ? INFINITY : 0));
        if (ex > st->max_excess) {
            st->max_excess = ex;
            st->worst_excess_x = x;
        }
        if (fabs(rd) >= FLT_MIN && err / fabs(rd) > st->max_rel) st->max_rel = err / fabs(rd);
    }
}

static void sweep(const vm_case *c, vm_stats *st, uint64_t all_stride, int64_t range_count) {
    for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += all_stride) check_one(c, from_bits((uint32_t)u), st);
    /* every k-th float of [lo, hi], walking the ordered integers */
    int64_t a = ordered(c->lo), b = ordered(c->hi);
    int64_t step = (b - a) / range_count;
    if (step < 1) step = 1;
    for (int64_t o = a; o <= b; o += step) {
        uint32_t u = o < 0 ? (uint32_t)(-o) | 0x80000000u : (uint32_t)o;
        check_one(c, from_bits(u), st);
    }
}

static const float specials[] = {
    0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 0x1p-149f, -0x1p-149f, 0x1p-130f, -0x1p-130f,
    0x1.fffffcp-127f, -0x1.fffffcp-127f, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX, 1.0f, -1.0f,
    88.72283f, 88.72284f, 88.7229f, 88.8f, 89.0f, -87.33654f, -87.5f, -103.97208f, -103.9721f,
    -104.0f, -110.0f, 9.01f, -9.01f, 9.1f, 3.92f, -3.92f, 4.0f, 1.0f - 0x1p-24f, 1.0f + 0x1p-23f,
    0.5f, 1e-8f, -1e-8f, 1e30f, -1e30f, 12.0f, -12.0f, 20.0f, -20.0f,
};

static void run_case(const vm_case *c) {
    vm_stats st = {0};
    const char *full = getenv("TP_VMATH_EXHAUSTIVE");
    if (full && full[0] == '1') sweep(c, &st, 1, 0x7FFFFFFF);
    else sweep(c, &st, ALL_STRIDE, RANGE_COUNT);
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) check_one(c, specials[i], &st);
    printf("  %-10s %" PRId64 " values: max %" PRId64 " ULP (at %a)", c->name, st.n_checked, st.max_ulp,
           st.worst_ulp_x);
    if (c->ulp_bound <= 0)
        printf(", max err/(%.0e+%.0e|ref|) %.3f (at %a), max rel %.3g", c->abs_tol, c->rel_tol,
               st.max_excess, st.worst_excess_x, st.max_rel);
    printf("\n");
    CHECK_MSG(st.n_nan_bad == 0, "%s: %" PRId64 " NaN mismatches", c->name, st.n_nan_bad);
    if (c->ulp_bound > 0)
        CHECK_MSG(st.max_ulp <= c->ulp_bound, "%s: %" PRId64 " ULP > %d", c->name, st.max_ulp, c->ulp_bound);
    else
        CHECK_MSG(st.max_excess <= 1.0, "%s: error %.3f times the tolerance at %a", c->name, st.max_excess,
                  st.worst_excess_x);
}

#define CASE_TEST(i, name) \
    TEST(name) { run_case(&cases[i]); }
CASE_TEST(0, test_exp_bound)
CASE_TEST(1, test_log_bound)
CASE_TEST(2, test_tanh_bound)
CASE_TEST(3, test_sigmoid_bound)
CASE_TEST(4, test_erf_bound)
CASE_TEST(5, test_silu_bound)
CASE_TEST(6, test_gelu_bound)
CASE_TEST(7, test_gelu_tanh_bound)
#ifdef __AVX512F__
CASE_TEST(8, test_sigmoid_v16_bound)
CASE_TEST(9, test_silu_v16_bound)
CASE_TEST(10, test_gelu_v16_bound)
#define V16_TESTS                                                                                     \
    , T(test_sigmoid_v16_bound), T(test_silu_v16_bound), T(test_gelu_v16_bound), T(test_v16_tails_and_limits)
#else
#define V16_TESTS
#endif
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
CASE_TEST(8, test_silu_v8_bound)
CASE_TEST(9, test_gelu_v8_bound)
#define V8_TESTS , T(test_silu_v8_bound), T(test_gelu_v8_bound), T(test_v8_tails_and_limits)
#else
#define V8_TESTS
#endif

/* Exact limits and signs the sweep's ULP bound would let slip by one. */
TEST(test_special_values) {
    CHECK(tp__exp_f32(-INFINITY) == 0.0f && tp__exp_f32(INFINITY) == INFINITY);
    CHECK(tp__exp_f32(0.0f) == 1.0f && tp__exp_f32(-0.0f) == 1.0f);
    CHECK(tp__exp_f32(89.0f) == INFINITY && tp__exp_f32(-104.0f) == 0.0f);
    CHECK(isnan(tp__exp_f32(NAN)));
    CHECK(tp__log_f32(0.0f) == -INFINITY && tp__log_f32(-0.0f) == -INFINITY);
    CHECK(isnan(tp__log_f32(-1.0f)) && isnan(tp__log_f32(-INFINITY)) && isnan(tp__log_f32(NAN)));
    CHECK(tp__log_f32(INFINITY) == INFINITY && tp__log_f32(1.0f) == 0.0f);
    CHECK(tp__log_f32(0x1p-149f) == (float)log(0x1p-149));
    CHECK(tp__tanh_f32(INFINITY) == 1.0f && tp__tanh_f32(-INFINITY) == -1.0f);
    CHECK(tp__tanh_f32(-0.0f) == 0.0f && signbit(tp__tanh_f32(-0.0f)));
    CHECK(tp__sigmoid_f32(-INFINITY) == 0.0f && tp__sigmoid_f32(INFINITY) == 1.0f);
    CHECK(tp__sigmoid_f32(0.0f) == 0.5f && isnan(tp__sigmoid_f32(NAN)));
    CHECK(tp__erf_f32(INFINITY) == 1.0f && tp__erf_f32(-INFINITY) == -1.0f);
    CHECK(signbit(tp__erf_f32(-0.0f)) && tp__erf_f32(-0.0f) == 0.0f);
    CHECK(tp__gelu_f32(-INFINITY) == 0.0f && tp__gelu_f32(INFINITY) == INFINITY);
    CHECK(tp__gelu_tanh_f32(-INFINITY) == 0.0f && tp__gelu_tanh_f32(INFINITY) == INFINITY);
    CHECK(tp__silu_f32(-INFINITY) == 0.0f && tp__silu_f32(INFINITY) == INFINITY);
    CHECK(tp__gelu_f32(-1e30f) == 0.0f && tp__silu_f32(-1e30f) == 0.0f && tp__gelu_tanh_f32(-1e30f) == 0.0f);
    const float nans[] = {NAN, -NAN};
    for (int i = 0; i < 2; i++)
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
            CHECK_MSG(isnan(cases[k].fn(nans[i])), "%s(NaN)", cases[k].name);
}

/* xorshift; values spread over [-scale, scale] plus a few specials. */
static uint32_t rng_state = 2463534242u;
static uint32_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}
static void random_array(float *a, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) a[i] = ((float)rng() / 4294967296.0f * 2.0f - 1.0f) * scale;
    a[3] = INFINITY;
    a[7] = -INFINITY;
    a[11] = NAN;
    a[13] = 0x1p-140f;
    a[n - 1] = -0.0f; /* lands in the scalar tail */
}

/* Bitwise equality, except that any two NaNs are equal: which operand's NaN
 * an instruction returns (sign, payload) depends on operand order, which the
 * vectoriser may swap. */
static int same_bits(float a, float b) { return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0; }

TEST(test_array_matches_scalar) {
    enum { N = 1000 + 13 }; /* not a multiple of 16: exercises the tail */
    static float src[N], dst[N], inplace[N];
    const float scales[] = {1.0f, 10.0f, 100.0f};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        for (int s = 0; s < 3; s++) {
            random_array(src, N, scales[s]);
            cases[k].vfn(dst, src, N);
            memcpy(inplace, src, sizeof src);
            cases[k].vfn(inplace, inplace, N);
            int bad = 0;
            for (int i = 0; i < N; i++) {
                float want = cases[k].fn(src[i]);
                if (!same_bits(dst[i], want) || !same_bits(inplace[i], want)) {
                    if (bad++ < 3)
                        fprintf(stderr, "  %s[%d](%a): array %a, in place %a, scalar %a\n", cases[k].name, i,
                                src[i], dst[i], inplace[i], want);
                }
            }
            CHECK_MSG(bad == 0, "%s: %d array/scalar mismatches", cases[k].name, bad);
        }
    }
}

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
/* An intrinsic array form against its one-vector form at every length
 * 0-200 (every tail past its steps), nothing written past n. */
static void check_array_tails(const char *name, void (*vfn)(float *, const float *, int64_t), float (*sfn)(float)) {
    static float src[200], dst[200];
    for (int n = 0; n <= 200; n++) {
        for (int i = 0; i < 200; i++) {
            src[i] = (float)(i * 37 % 101) * 0.25f - 12.0f;
            dst[i] = 1234.5f;
        }
        vfn(dst, src, n);
        int bad = 0;
        for (int i = 0; i < 200; i++) {
            const float want = i < n ? sfn(src[i]) : 1234.5f;
            if (!same_bits(dst[i], want)) bad++;
        }
        CHECK_MSG(bad == 0, "%s array, n = %d: %d elements wrong (or written past n)", name, n, bad);
    }
}
#endif

#ifdef __AVX512F__
/* Every tail length of the array forms (0-63 past the 64-float steps) and
 * the limits the ULP sweep would let slip. */
TEST(test_v16_tails_and_limits) {
    check_array_tails("silu_v16", v_silu_v16, s_silu_v16);
    check_array_tails("gelu_v16", v_gelu_v16, s_gelu_v16);
    CHECK(isnan(s_gelu_v16(-INFINITY)) && s_gelu_v16(INFINITY) == INFINITY);
    CHECK(isnan(s_gelu_v16(NAN)) && s_gelu_v16(0.0f) == 0.0f && s_gelu_v16(-1e30f) == 0.0f && s_gelu_v16(1e30f) == 1e30f);
    /* past z = 4 the 16-lane form's exp runs on (no select): x's tail within
     * 2e-37 of the limits, never past them */
    CHECK(s_gelu_v16(13.5f) == 13.5f && s_gelu_v16(-13.5f) <= 0.0f && s_gelu_v16(-13.5f) > -2e-37f);
    CHECK(s_gelu_v16(-13.0f) <= 0.0f && s_gelu_v16(-13.0f) > -2e-37f && s_gelu_v16(-20.0f) == 0.0f);
    CHECK(s_gelu_v16(FLT_MAX) == FLT_MAX && s_gelu_v16(-FLT_MAX) == 0.0f);
    CHECK(s_sigmoid_v16(-INFINITY) == 0.0f && s_sigmoid_v16(INFINITY) == 1.0f && s_sigmoid_v16(0.0f) == 0.5f);
    CHECK(isnan(s_silu_v16(-INFINITY)) && s_silu_v16(INFINITY) == INFINITY);
    CHECK(s_silu_v16(-1e30f) == 0.0f && signbit(s_silu_v16(-1e30f)) && s_silu_v16(1e30f) == 1e30f);
    CHECK(s_silu_v16(20.0f) == 20.0f * (float)(1.0 / (1.0 + exp(-20.0))));
}
#endif

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
/* Every tail length of the 8-lane array forms (0-31 past the 32-float
 * steps) and the limits: silu's clamp to [-89, 87] with 2^n built in the
 * exponent bits must still give inf (-> -0) below -88.72, exactly x above
 * 87 and NaN for NaN and -inf; gelu's tail -0 and its limits. */
TEST(test_v8_tails_and_limits) {
    check_array_tails("silu_v8", v_silu_v8, s_silu_v8);
    check_array_tails("gelu_v8", v_gelu_v8, s_gelu_v8);
    CHECK(isnan(s_gelu_v8(-INFINITY)) && s_gelu_v8(INFINITY) == INFINITY);
    CHECK(isnan(s_gelu_v8(NAN)) && s_gelu_v8(0.0f) == 0.0f && s_gelu_v8(-1e30f) == 0.0f && s_gelu_v8(1e30f) == 1e30f);
    CHECK(s_gelu_v8(13.5f) == 13.5f && s_gelu_v8(-13.5f) == 0.0f && signbit(s_gelu_v8(-13.5f)));
    CHECK(isnan(s_silu_v8(-INFINITY)) && s_silu_v8(INFINITY) == INFINITY && isnan(s_silu_v8(NAN)));
    CHECK(s_silu_v8(-1e30f) == 0.0f && signbit(s_silu_v8(-1e30f)) && s_silu_v8(1e30f) == 1e30f);
    CHECK(s_silu_v8(-88.8f) == 0.0f && signbit(s_silu_v8(-88.8f)) && s_silu_v8(-88.7f) < 0.0f);
    CHECK(s_silu_v8(87.5f) == 87.5f && s_silu_v8(0.0f) == 0.0f);
    CHECK(s_silu_v8(20.0f) == 20.0f * (float)(1.0 / (1.0 + exp(-20.0))));
}
#endif

TEST(test_exp_sub_sum) {
    const int64_t lens[] = {0, 1, 15, 16, 17, 1000, 1024, 1025, 3000 + 7};
    static float src[3007], dst[3007], other[3007];
    /* each length without and with a row to prefetch (smaller blocks: the
     * same documented order) */
    for (size_t l = 0; l < 2 * (sizeof lens / sizeof lens[0]); l++) {
        int64_t n = lens[l / 2];
        const float *pf = l % 2 ? other : NULL;
        /* [-110, 10): a tail of terms below FLT_MIN, flushed to 0, and -inf (masked) entries */
        for (int64_t i = 0; i < n; i++) src[i] = i % 7 == 3 ? -INFINITY : ((float)rng() / 4294967296.0f) * 120.0f - 110.0f;
        float max = 10.0f;
        if (n > 0) src[n / 2] = max; /* as in softmax: the row holds its max */
        float sum = tp__vexp_sub_sum_f32(dst, src, n, max, pf);
        /* the documented order, written out */
        float lane[16] = {0};
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            float x = src[i] - max;
            float e = x < -87.33f ? 0.0f : tp__exp_f32(x);
            if (!same_bits(e, dst[i])) bad++;
            lane[i % 16] += e;
        }
        for (int w = 8; w >= 1; w /= 2)
            for (int j = 0; j < w; j++) lane[j] += lane[j + w];
        double exact = 0;
        for (int64_t i = 0; i < n; i++) exact += exp((double)src[i] - max);
        CHECK_MSG(bad == 0, "n=%" PRId64 ": %d dst values differ from tp__exp_f32 (0 below -87.33)", n, bad);
        CHECK_MSG(same_bits(sum, lane[0]), "n=%" PRId64 ": sum %a, documented order gives %a", n, sum, lane[0]);
        CHECK_MSG(fabs(sum - exact) <= 1e-5 * exact, "n=%" PRId64 ": sum %g vs %g", n, sum, exact);
    }
    /* in place */
    for (int64_t i = 0; i < 100; i++) src[i] = (float)i * 0.1f;
    /* the inputs as memory the compiler cannot see into: built with FMA
     * contraction, gcc otherwise fused i * 0.1f - 9.9f into one rounding in
     * one of the two calls (1 ULP apart at i = 46) */
    __asm__ volatile("" ::: "memory");
    float s1 = tp__vexp_sub_sum_f32(dst, src, 100, 9.9f, NULL);
    float s2 = tp__vexp_sub_sum_f32(src, src, 100, 9.9f, NULL);
    int differ = 0;
    for (int i = 0; i < 100; i++)
        if (!same_bits(src[i], dst[i]) && differ++ < 3) fprintf(stderr, "  [%d] in place %a, out of place %a\n", i, src[i], dst[i]);
    CHECK_MSG(same_bits(s1, s2) && differ == 0, "in place: sum %a vs %a, %d of 100 values differ", s2, s1, differ);
}

/* The softmax exp: tp__exp_f32's bits on [-87.33, 0] (every 61st float and
 * every float next to the cut), +0 below, NaN through. */
TEST(test_exp_nonpos_ftz) {
    const float cut = -87.33f;
    int bad = 0;
    uint32_t lo = 0x80000000u, hi = 0;
    memcpy(&hi, &cut, sizeof hi);
    for (uint64_t u = lo; u <= hi; u += 61) {
        float x = from_bits((uint32_t)u);
        if (!same_bits(tp__vm_exp_nonpos_ftz(x), tp__exp_f32(x)) && bad++ < 3)
            fprintf(stderr, "  exp_nonpos_ftz(%a) = %a, tp__exp_f32 %a\n", x, tp__vm_exp_nonpos_ftz(x), tp__exp_f32(x));
    }
    for (uint32_t d = 0; d < 4096; d++) {
        float at_or_above = from_bits(hi - d), below = from_bits(hi + 1 + d);
        if (!same_bits(tp__vm_exp_nonpos_ftz(at_or_above), tp__exp_f32(at_or_above))) bad++;
        if (!same_bits(tp__vm_exp_nonpos_ftz(below), 0.0f)) bad++;
        CHECK(tp__exp_f32(at_or_above) >= FLT_MIN); /* the cut keeps every kept result normal */
    }
    CHECK_MSG(bad == 0, "%d exp_nonpos_ftz mismatches", bad);
    CHECK(same_bits(tp__vm_exp_nonpos_ftz(-INFINITY), 0.0f) && same_bits(tp__vm_exp_nonpos_ftz(-100.0f), 0.0f));
    CHECK(tp__exp_f32(-100.0f) > 0.0f); /* the full exp's denormal, which this one flushes */
    CHECK(same_bits(tp__vm_exp_nonpos_ftz(0.0f), 1.0f) && isnan(tp__vm_exp_nonpos_ftz(NAN)));
}

#ifdef TP_TEST_VMATH_FMA
/* Built with -mavx2 -mfma: refuse to run (exit 77, "skipped") on a CPU
 * without them, before any of that code runs; this check is compiled for
 * the baseline ISA. */
__attribute__((constructor, target("arch=x86-64"))) static void require_avx2_fma(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        fprintf(stderr, "SKIP test_vmath_fma: this CPU has no AVX2+FMA\n");
        exit(77);
    }
}
#endif
#ifdef TP_TEST_VMATH_AVX512
/* Built as eltwise_avx512.c is (masked loads in softmax's row tail, one
 * blend per select in gelu): the same, for AVX-512 F/DQ/BW/VL. */
__attribute__((constructor, target("arch=x86-64"))) static void require_avx512(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512dq") ||
        !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("fma")) {
        fprintf(stderr, "SKIP test_vmath_avx512: this CPU has no AVX-512 F/DQ/BW/VL\n");
        exit(77);
    }
}
#endif

TEST_MAIN(T(test_exp_bound), T(test_log_bound), T(test_tanh_bound), T(test_sigmoid_bound), T(test_erf_bound),
          T(test_silu_bound), T(test_gelu_bound), T(test_gelu_tanh_bound), T(test_special_values),
          T(test_array_matches_scalar), T(test_exp_sub_sum), T(test_exp_nonpos_ftz) V16_TESTS V8_TESTS)
