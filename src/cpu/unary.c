/*
 * unary.c - elementwise unary ops and activations: schemas, shape/dtype rules
 * and reference kernels.
 *
 * Every op maps one input element to one output element (clamp also reads
 * broadcast min/max tensors). Dtype rules follow PyTorch:
 *  - floating functions (exp, log, sin, sigmoid, reciprocal, asinh, erfinv,
 *    lgamma, deg2rad, ...) keep a floating input's dtype and turn integer and
 *    bool inputs into float32; frac takes floating inputs only;
 *  - rounding (floor, ceil, round, trunc) is the identity on integers and
 *    rejects bool;
 *  - neg/abs/sign/square keep the dtype (square of bool gives int64; neg and
 *    abs reject bool); integer arithmetic wraps like the dtype does;
 *  - angle (of real numbers: 0 or pi) is a floating function;
 *  - sinc, logit, digamma, polygamma, mvlgamma, i0, i0e, erfcx, entr and the
 *    torch.special functions (ndtri, log_ndtr, i1, i1e, the Bessel
 *    functions, airy_ai) are floating functions without a float16/bfloat16
 *    kernel (as in PyTorch 1.13; ndtr has bfloat16, not float16); nan_to_num keeps the
 *    dtype (integers unchanged);
 *  - logical_not, isnan, isinf, isfinite, signbit, isposinf, isneginf give
 *    bool; bitwise_not takes ints
 *    and bool;
 *  - relu, relu6, hardtanh, threshold and clamp also work on integers; the
 *    other activations need a floating input. rrelu is the eval-mode
 *    (deterministic) function: slope (lower + upper) / 2; training=True is
 *    unsupported (it draws random slopes).
 * Floating results are computed in double and rounded once on store (round
 * with `decimals` computes in float for 32-bit and smaller floats, as PyTorch
 * does, so that halfway cases round the same way). NaN propagates through
 * relu, clamp and friends; sign(NaN) is 0 as in PyTorch.
 *
 * Kernels accept any input strides through tp_iter; contiguous float32 takes
 * a direct loop.
 */
#include <float.h>
#include <inttypes.h>

#include "kernel_util.h"

/* Scalar parameters of one call, read from the bound arguments. */
typedef struct unary_params {
    double a, b, c;
} unary_params;

typedef double (*f64_fn)(double x, const unary_params *p);
typedef int64_t (*i64_fn)(int64_t x, const unary_params *p);

/* ---- shared checks and shape rules ------------------------------------- */

static tp_status self_tensor(const tp_value *args, tp_tensor **out) {
    tp_tensor *t = tp__arg_tensor(args, 0);
    TP_CHECK(t != NULL, TP_ERR_TYPE, "argument 'self' must be a tensor, not %s", tp_value_kind_name(args[0].kind));
    *out = t;
    return TP_OK;
}

static tp_status out_like(tp_value *out, const tp_tensor *x, tp_dtype dtype) {
    return tp__out_like(out, dtype, x);
}

static tp_status require_float(const tp_tensor *x) {
    TP_CHECK(tp_dtype_is_float(x->dtype), TP_ERR_TYPE,
             "expected a floating-point tensor for 'self', got %s (integer and bool inputs are not supported)",
             tp_dtype_name(x->dtype));
    return TP_OK;
}

static tp_status reject_bool(const tp_tensor *x) {
    TP_CHECK(x->dtype != TP_BOOL, TP_ERR_TYPE, "bool tensors are not supported for 'self'");
    return TP_OK;
}

/* Floating functions: floats keep their dtype, ints and bool become float32. */
static tp_status infer_float(const tp_value *args, tp_value *out) {
    tp_tensor *x = NULL;
    TP_TRY(self_tensor(args, &x));
    return out_like(out, x, tp_dtype_is_float(x->dtype) ? x->dtype : TP_DEFAULT_FLOAT);
}

/* Same dtype, any input. */
static tp_status infer_same(const tp_value *args, tp_value *out) {
    tp_tensor *x = NULL;
    TP_TRY(self_tensor(args, &x));
    return out_like(out, x, x->dtype);
}

/* Same dtype, bool rejected (floor, ceil, trunc, abs, relu). */
static tp_status infer_same_no_bool(const tp_value *args, tp_value *out) {
    tp_tensor *x = NULL;
    TP_TRY(self_tensor(args, &x));
    TP_TRY(reject_bool(x));
    return out_like(out, x, x->dtype);
}

/* Same dtype, floating inputs only (most activations). */
static tp_status infer_float_only(const tp_value *args, tp_value *out) {
    tp_tensor *x = NULL;
    TP_TRY(self_tensor(args, &x));
    TP_TRY(require_float(x));
    return out_like(out, x, x->dtype);
}

/* softsign (x / (1 + |x|)) and tanhshrink (x - tanh(x)): floats keep their
 * dtype, ints become float32, bool is refused as PyTorch's abs / sub do. */
static tp_status infer_softsign(const tp_value *args, tp_value *out) {
    tp_tensor *x = NULL;
    TP_TRY(self_tensor(args, &x));
    TP_CHECK(x->dtype != TP_BOOL, TP_ERR_TYPE, "\"abs_cpu\" not implemented for 'Bool'");
    return infer_float(args, out);
}

static tp_status infer_tanhshrink(const tp_value *args, tp_value *out) {
    tp_tensor *x = NULL;
    TP_TRY(self_tensor(args, &x));
    TP_CHECK(x->dtype != TP_BOOL, TP_ERR_TYPE, "Subtraction, the `-` operator, with a bool tensor is not supported");
    return infer_float(args, out);
}

/* Bool result (logical_not, isnan, isinf). */
static tp_status infer_bool(const tp_value *args, tp_value *out) {
    tp_tensor *x = NULL;
    TP_TRY(self_tensor(args, &x));
    return out_like(out, x, TP_BOOL);
}

static tp_status infer_neg(const tp_value *args, tp_value *out) {
    tp_tensor *x = NULL;
    TP_TRY(self_tensor(args, &x));
    TP_CHECK(x->dtype != TP_BOOL, TP_ERR_TYPE,
             "negation of a bool tensor is not supported; use logical_not() or bitwise_not() instead");
    return out_like(out, x, x->dtype);
}

static tp_status infer_square(const tp_value *args, tp_value *out) {
    tp_tensor *x = NULL;
    TP_TRY(self_tensor(args, &x));
    return out_like(out, x, x->dtype == TP_BOOL ? TP_INT64 : x->dtype);
}

static tp_status infer_bitwise_not(const tp_value *args, tp_value *out) {
    tp_tensor *x = NULL;
    TP_TRY(self_tensor(args, &x));
    TP_CHECK(!tp_dtype_is_float(x->dtype), TP_ERR_TYPE,
             "expected an integer or bool tensor for 'self', got %s", tp_dtype_name(x->dtype));
    return out_like(out, x, x->dtype);
}

static tp_status infer_round(const tp_value *args, tp_value *out) {
    tp_tensor *x = NULL;
    TP_TRY(self_tensor(args, &x));
    TP_TRY(reject_bool(x));
    int64_t decimals = tp__arg_int(args, 1);
    TP_CHECK(decimals == 0 || tp_dtype_is_float(x->dtype), TP_ERR_TYPE,
             "decimals=%" PRId64 " needs a floating-point tensor, got %s", decimals, tp_dtype_name(x->dtype));
    return out_like(out, x, x->dtype);
}

/* ---- element loops ------------------------------------------------------- */

/* y = fn(x) with x read as double (any dtype) and stored into y's dtype. */
static void map_f64(const tp_tensor *x, tp_tensor *y, f64_fn fn, const unary_params *p) {
    if (x->dtype == TP_FLOAT32 && y->dtype == TP_FLOAT32 && tp_tensor_is_contiguous(x)) {
        const float *src = (const float *)tp__tensor_base(x);
        float *dst = (float *)tp__tensor_base(y);
        int64_t n = tp_tensor_numel(y);
        for (int64_t i = 0; i < n; i++) dst[i] = (float)fn(src[i], p);
        return;
    }
    tp_iter it;
    tp__iter_init(&it, y->ndim, y->sizes, 2, (const tp_tensor *[]){y, x});
    while (tp__iter_next(&it)) tp__store_f64(it.ptr[0], y->dtype, fn(tp__load_f64(it.ptr[1], x->dtype), p));
}

/* y = fn(x) in int64 arithmetic; the store wraps to y's dtype. */
static void map_i64(const tp_tensor *x, tp_tensor *y, i64_fn fn, const unary_params *p) {
    tp_iter it;
    tp__iter_init(&it, y->ndim, y->sizes, 2, (const tp_tensor *[]){y, x});
    while (tp__iter_next(&it)) tp__store_i64(it.ptr[0], y->dtype, fn(tp__load_i64(it.ptr[1], x->dtype), p));
}

/* Run a float function when x is floating, an int function otherwise. */
static tp_status run_mixed(const tp_value *args, tp_value *out, f64_fn ffn, i64_fn ifn, const unary_params *p) {
    tp_tensor *x = tp__arg_tensor(args, 0), *y = tp__out_at(out, 0);
    TP_CHECK(x && y, TP_ERR_INTERNAL, "missing input or output tensor");
    if (tp_dtype_is_float(x->dtype) || !ifn) map_f64(x, y, ffn, p);
    else map_i64(x, y, ifn, p);
    return TP_OK;
}

static tp_status run_float(const tp_value *args, tp_value *out, f64_fn fn, const unary_params *p) {
    return run_mixed(args, out, fn, NULL, p);
}

/* ---- scalar functions ---------------------------------------------------- */

/* NaN-propagating max/min (like PyTorch's clamp and relu). */
static double max_nan(double x, double lo) { return (isnan(x) || isnan(lo)) ? NAN : (x < lo ? lo : x); }
static double min_nan(double x, double hi) { return (isnan(x) || isnan(hi)) ? NAN : (x > hi ? hi : x); }

#define F64_FN(name, expr)                                                                                             \
    static double name(double x, const unary_params *p) {                                                              \
        TP_UNUSED(p);                                                                                                  \
        return (expr);                                                                                                 \
    }
#define I64_FN(name, expr)                                                                                             \
    static int64_t name(int64_t x, const unary_params *p) {                                                            \
        TP_UNUSED(p);                                                                                                  \
        return (expr);                                                                                                 \
    }

F64_FN(f_neg, -x)
F64_FN(f_abs, fabs(x))
F64_FN(f_exp, exp(x))
F64_FN(f_log, log(x))
F64_FN(f_log1p, log1p(x))
F64_FN(f_expm1, expm1(x))
F64_FN(f_sqrt, sqrt(x))
F64_FN(f_rsqrt, 1.0 / sqrt(x))
F64_FN(f_sin, sin(x))
F64_FN(f_cos, cos(x))
F64_FN(f_tan, tan(x))
F64_FN(f_tanh, tanh(x))
F64_FN(f_sigmoid, 1.0 / (1.0 + exp(-x)))
F64_FN(f_erf, erf(x))
F64_FN(f_reciprocal, 1.0 / x)
F64_FN(f_floor, floor(x))
F64_FN(f_ceil, ceil(x))
F64_FN(f_trunc, trunc(x))
F64_FN(f_rint, nearbyint(x))
F64_FN(f_sign, (double)((0.0 < x) - (x < 0.0))) /* NaN -> 0, as PyTorch */
F64_FN(f_square, x * x)
F64_FN(f_relu, max_nan(x, 0.0))
F64_FN(f_silu, x / (1.0 + exp(-x)))
F64_FN(f_mish, x * tanh(log1p(exp(x))))
F64_FN(f_hardsigmoid, min_nan(max_nan(x + 3.0, 0.0), 6.0) / 6.0)
F64_FN(f_hardswish, x * min_nan(max_nan(x + 3.0, 0.0), 6.0) / 6.0)
F64_FN(f_gelu, 0.5 * x * (1.0 + erf(x * M_SQRT1_2)))
F64_FN(f_sinh, sinh(x))
F64_FN(f_cosh, cosh(x))
F64_FN(f_asin, asin(x))
F64_FN(f_acos, acos(x))
F64_FN(f_atan, atan(x))
F64_FN(f_asinh, asinh(x))
F64_FN(f_acosh, acosh(x))
F64_FN(f_atanh, atanh(x))
F64_FN(f_erfc, erfc(x))
F64_FN(f_log2, log2(x))
F64_FN(f_log10, log10(x))
F64_FN(f_exp2, exp2(x))
F64_FN(f_deg2rad, x * (M_PI / 180.0))
F64_FN(f_frac, isinf(x) ? NAN : x - trunc(x))
F64_FN(f_sinc, x == 0 ? 1.0 : sin(M_PI * x) / (M_PI * x))
F64_FN(f_rad2deg, x * (180.0 / M_PI))
/* angle of a real number: pi for negatives, 0 otherwise, NaN stays NaN (PyTorch) */
F64_FN(f_angle, isnan(x) ? x : x < 0 ? M_PI : 0.0)
/* entr: -x ln x for x > 0, 0 at 0, -inf for negatives */
F64_FN(f_entr, isnan(x) ? x : x > 0 ? -x * log(x) : x == 0 ? 0.0 : -INFINITY)

/* logit: log(x / (1 - x)), x clamped to [eps, 1 - eps] when eps (in p->b)
 * is given (p->a != 0) and not negative. */
static double f_logit(double x, const unary_params *p) {
    if (p->a != 0 && p->b >= 0) x = x < p->b ? p->b : x > 1.0 - p->b ? 1.0 - p->b : x;
    return log(x / (1.0 - x));
}

/* digamma: recurrence up to x >= 10, then the asymptotic series; negative
 * x by reflection; poles give NaN (negative integers) or -+inf (at +-0). */
static double digamma_pos(double x) {
    double r = 0;
    while (x < 10.0) {
        r -= 1.0 / x;
        x += 1.0;
    }
    if (x == INFINITY) return x;
    double z = 1.0 / (x * x);
    /* B2k / (2k): 1/12, -1/120, 1/252, -1/240, 1/132, -691/32760, 1/12 */
    double s = z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z * (1.0 / 132 -
                                                                                  z * (691.0 / 32760 - z / 12))))));
    return r + log(x) - 0.5 / x - s;
}
static double f_digamma(double x, const unary_params *p) {
    TP_UNUSED(p);
    if (isnan(x) || x == -INFINITY) return NAN;
    if (x == 0) return copysign(INFINITY, -x);
    if (x < 0) {
        if (x == trunc(x)) return NAN;
        /* psi(1 - x) - pi / tan(pi x), with pi x reduced exactly */
        double frac = x - floor(x);
        return digamma_pos(1.0 - x) - M_PI / tan(M_PI * frac);
    }
    return digamma_pos(x);
}

/* Hurwitz zeta(s, q) = sum_k (k + q)^-s for s > 1: direct terms up to
 * q + k > 9, then the Euler-Maclaurin tail with Bernoulli coefficients
 * ((2j)! / B2j). Poles (q a non-positive integer) give inf. Deviation:
 * PyTorch's trigamma (n = 1) at negative integers gives large finite
 * values from sin(pi x) rounding; this gives inf there. */
double tp__hurwitz_zeta(double s, double q) {
    static const double A[] = {12.0,
                               -720.0,
                               30240.0,
                               -1209600.0,
                               47900160.0,
                               -1.8924375803183791606e9,
                               7.47242496e10,
                               -2.950130727918164224e12,
                               1.1646782814350067249e14,
                               -4.5979787224074726105e15,
                               1.8152105401943546773e17,
                               -7.1661652561756670113e18};
    if (isnan(q)) return NAN;
    if (q <= 0 && q == floor(q)) return INFINITY;
    if (q == INFINITY) return NAN; /* as PyTorch's polygamma(n >= 2, inf) */
    double sum = pow(q, -s), a = q, b = 0.0;
    int i = 0;
    while (i < 9 || a <= 9.0) {
        i++;
        a += 1.0;
        b = pow(a, -s);
        sum += b;
        if (fabs(b / sum) < 1.1102230246251565e-16) return sum;
    }
    double w = a, k = 0.0, f = 1.0;
    sum += b * w / (s - 1.0) - 0.5 * b;
    for (int j = 0; j < 12; j++) {
        f *= s + k;
        b /= w;
        double t = f * b / A[j];
        sum += t;
        if (fabs(t / sum) < 1.1102230246251565e-16) break;
        k += 1.0;
        f *= s + k;
        b /= w;
        k += 1.0;
    }
    return sum;
}

/* polygamma(n, x): digamma for n = 0, else (-1)^(n+1) n! zeta(n + 1, x);
 * the order n is in p->a. */
static double f_polygamma(double x, const unary_params *p) {
    double n = p->a;
    if (n == 0) return f_digamma(x, p);
    if (n == 1 && x == INFINITY) return 0.0;
    double sign = fmod(n, 2.0) == 1.0 ? 1.0 : -1.0;
    return sign * exp(lgamma(n + 1.0)) * tp__hurwitz_zeta(n + 1.0, x);
}

/* i0: the power series sum (x^2/4)^k / (k!)^2 (all terms positive, so it
 * keeps full relative precision). Like PyTorch's exp(|x|) * series form it
 * is inf once exp(|x|) overflows in double (|x| > 709.78) and NaN at +-inf.
 * Deviation: PyTorch's float32 kernel overflows past |x| = 88.72, where
 * this one still gives the finite float32 value (up to |x| ~ 91.9). */
static double f_i0(double x, const unary_params *p) {
    TP_UNUSED(p);
    if (isnan(x) || isinf(x)) return NAN;
    if (fabs(x) > 709.782712893384) return INFINITY;
    double q = x * x / 4.0, term = 1.0, sum = 1.0;
    for (int k = 1; k < 2000; k++) {
        term *= q / ((double)k * (double)k);
        sum += term;
        if (term < sum * 1e-17) break;
    }
    return sum;
}

/* i0e: exp(-|x|) i0(x); past |x| = 700 (where the series overflows) the
 * asymptotic series 1/sqrt(2 pi x) sum_k ((2k-1)!!)^2 / (k! (8x)^k). */
static double f_i0e(double x, const unary_params *p) {
    if (isnan(x)) return x;
    double ax = fabs(x);
    if (ax == INFINITY) return 0.0;
    if (ax <= 700.0) return f_i0(x, p) * exp(-ax);
    double term = 1.0, sum = 1.0;
    for (int k = 1; k < 10; k++) {
        term *= (2.0 * k - 1.0) * (2.0 * k - 1.0) / (k * 8.0 * ax);
        sum += term;
    }
    return sum / sqrt(2.0 * M_PI * ax);
}

/* mvlgamma(x, p): sum_{j < p} lgamma(x - j/2) + p (p - 1) / 4 log(pi); p in p->a */
static double f_mvlgamma(double x, const unary_params *p) {
    double r = p->a * (p->a - 1.0) / 4.0 * log(M_PI);
    for (int64_t j = 0; j < (int64_t)p->a; j++) r += lgamma(x - (double)j / 2.0);
    return r;
}

/* erfcx: exp(x^2) erfc(x); past x = 26 (where erfc underflows) the
 * asymptotic series 1/(x sqrt(pi)) (1 - 1/(2x^2) + 3/(2x^2)^2 - ...). */
static double f_erfcx(double x, const unary_params *p) {
    TP_UNUSED(p);
    if (isnan(x)) return x;
    if (x < 26.0) {
        if (x < -26.7) return INFINITY;
        return exp(x * x) * erfc(x);
    }
    if (x == INFINITY) return 0.0;
    double z = 1.0 / (2.0 * x * x), term = 1.0, sum = 1.0;
    for (int k = 1; k < 12; k++) {
        term *= -(2.0 * k - 1.0) * z;
        sum += term;
    }
    return sum / (x * 1.7724538509055160273);
}
F64_FN(f_log_sigmoid, (x < 0.0 ? x : 0.0) - log1p(exp(-fabs(x))))
F64_FN(f_softsign, x / (1.0 + fabs(x)))
F64_FN(f_tanhshrink, x - tanh(x))

static double f_gelu_tanh(double x, const unary_params *p) {
    TP_UNUSED(p);
    const double beta = M_SQRT2 * M_2_SQRTPI * 0.5, kappa = 0.044715;
    return 0.5 * x * (1.0 + tanh(beta * (x + kappa * x * x * x)));
}

/* Integer versions; arithmetic in uint64 so that overflow wraps without
 * undefined behaviour (abs(INT64_MIN) == INT64_MIN, as in PyTorch). */
I64_FN(i_neg, (int64_t)(0u - (uint64_t)x))
I64_FN(i_abs, x < 0 ? (int64_t)(0u - (uint64_t)x) : x)
I64_FN(i_identity, x)
I64_FN(i_sign, (int64_t)((0 < x) - (x < 0)))
I64_FN(i_square, (int64_t)((uint64_t)x * (uint64_t)x))
I64_FN(i_relu, x < 0 ? 0 : x)
I64_FN(i_bitwise_not, ~x)

/* params: a = negative_slope */
static double f_leaky_relu(double x, const unary_params *p) { return x > 0.0 ? x : x * p->a; }
/* params: a = alpha, b = scale, c = input_scale */
static double f_elu(double x, const unary_params *p) {
    return x <= 0.0 ? expm1(x * p->c) * p->a * p->b : x * p->b;
}
/* params: a = beta, b = threshold */
static double f_softplus(double x, const unary_params *p) {
    return x * p->a > p->b ? x : log1p(exp(x * p->a)) / p->a;
}
/* params: a = min, b = max */
static double f_hardtanh(double x, const unary_params *p) { return min_nan(max_nan(x, p->a), p->b); }
static int64_t i_hardtanh(int64_t x, const unary_params *p) {
    int64_t lo = (int64_t)p->a, hi = (int64_t)p->b;
    return x < lo ? (lo > hi ? hi : lo) : (x > hi ? hi : x);
}

/* lgamma: +inf at the poles 0, -1, -2, ... lgamma() also writes the global
 * signgam, a data race when programs run on several threads; glibc's
 * lgamma_r returns the sign instead. */
double tp__lgamma(double x) {
#if defined(__GLIBC__)
    int sign;
    return lgamma_r(x, &sign);
#else
    return lgamma(x);
#endif
}
static double f_lgamma(double x, const unary_params *p) {
    TP_UNUSED(p);
    return tp__lgamma(x);
}

/* erfinv: a closed-form first guess (Winitzki's approximation, relative
 * error ~2e-3), refined by Halley steps on erf(y) = x in double; the residual
 * uses erfc near |x| = 1, where erf has no digits left. */
static double f_erfinv(double x, const unary_params *p) {
    TP_UNUSED(p);
    if (isnan(x) || x < -1.0 || x > 1.0) return NAN;
    if (x == 1.0) return INFINITY;
    if (x == -1.0) return -INFINITY;
    if (x == 0.0) return x;
    double ax = fabs(x);
    double l = log((1.0 - ax) * (1.0 + ax));
    const double a = 0.147;
    double c = 2.0 / (M_PI * a) + 0.5 * l;
    double y = sqrt(sqrt(c * c - l / a) - c);
    if (!(y > 0.0)) y = ax * (0.5 * sqrt(M_PI)); /* tiny x: the guess cancels to 0 */
    for (int i = 0; i < 4; i++) {
        double f = ax > 0.5 ? (1.0 - ax) - erfc(y) : erf(y) - ax;
        double df = (2.0 / sqrt(M_PI)) * exp(-y * y);
        if (f == 0.0 || df == 0.0) break;
        y -= f / (df + y * f);
    }
    return x < 0.0 ? -y : y;
}
/* params: a = lambd. NaN gives 0 (PyTorch 1.13's softshrink; hardshrink
 * keeps NaN). */
static double f_softshrink(double x, const unary_params *p) {
    return x > p->a ? x - p->a : (x < -p->a ? x + p->a : 0.0);
}
static double f_hardshrink(double x, const unary_params *p) { return (x >= -p->a && x <= p->a) ? 0.0 : x; }
/* params: a = threshold, b = value */
static double f_threshold(double x, const unary_params *p) { return x <= p->a ? p->b : x; }
static int64_t i_threshold(int64_t x, const unary_params *p) { return x <= (int64_t)p->a ? (int64_t)p->b : x; }

/* ---- kernels: plain floating functions ---------------------------------- */

/* ---- special functions (torch.special) ------------------------------------
 * Written from the series, continued fractions and asymptotic expansions
 * of Abramowitz & Stegun (chapters 9, 10, 26) in double; the edge values
 * (NaN, inf, signs, domains) are PyTorch's. Accuracy against PyTorch's
 * Cephes kernels is what tests/fixtures/gen_specmath.py checks (float64
 * within rtol 1e-9 / atol 1e-12 unless a case says otherwise). */

static const double EULER_GAMMA = 0.57721566490153286061;

/* ndtr: PyTorch's (1 + erf(x / sqrt 2)) / 2 (so the far lower tail rounds
 * to 0 there too, instead of erfc's tiny values). */
static double f_ndtr(double x, const unary_params *p) {
    TP_UNUSED(p);
    return 0.5 * (1.0 + erf(x * M_SQRT1_2));
}

/* log_ndtr: log(erfcx(-x / sqrt 2) / 2) - x^2 / 2 below -1, log1p(-erfc(x /
 * sqrt 2) / 2) above (PyTorch's split). */
static double f_log_ndtr(double x, const unary_params *p) {
    double t = x * M_SQRT1_2;
    if (x < -1.0) return log(f_erfcx(-t, p) / 2.0) - t * t;
    return log1p(-erfc(t) / 2.0);
}

/* ndtri for 0 < y <= 1/2: A&S 26.2.23 as the first guess (|error| < 4.5e-4),
 * then Halley steps on 0.5 erfc(-x / sqrt 2) - y, which keeps relative
 * accuracy in the lower tail. */
static double ndtri_lower(double y) {
    double t = sqrt(-2.0 * log(y));
    double num = 2.515517 + t * (0.802853 + t * 0.010328);
    double x = -(t - num / (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))));
    for (int i = 0; i < 8; i++) {
        double phi = exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
        if (phi == 0.0) break;
        double u = (0.5 * erfc(-x * M_SQRT1_2) - y) / phi;
        double dx = u / (1.0 + 0.5 * x * u);
        x -= dx;
        if (fabs(dx) <= 1e-16 * fabs(x)) break;
    }
    return x;
}
static double f_ndtri(double y, const unary_params *p) {
    TP_UNUSED(p);
    if (isnan(y) || y < 0.0 || y > 1.0) return NAN;
    if (y == 0.0) return -INFINITY;
    if (y == 1.0) return INFINITY;
    if (y > 0.5) return -ndtri_lower(1.0 - y); /* 1 - y is exact there */
    return ndtri_lower(y);
}

/* I1 by its power series (x/2) sum (x^2/4)^k / (k! (k+1)!) (positive terms:
 * full relative precision). Like PyTorch: inf once exp(|x|) overflows in
 * double, NaN at +-inf. */
static double f_i1(double x, const unary_params *p) {
    TP_UNUSED(p);
    if (isnan(x) || isinf(x)) return NAN;
    if (fabs(x) > 709.782712893384) return copysign(INFINITY, x);
    double q = x * x / 4.0, term = 1.0, sum = 1.0;
    for (int k = 1; k < 2000; k++) {
        term *= q / ((double)k * (double)(k + 1));
        sum += term;
        if (term < sum * 1e-17) break;
    }
    return 0.5 * x * sum;
}

/* i1e: exp(-|x|) I1(x); past |x| = 700 the asymptotic (Hankel) series
 * 1/sqrt(2 pi x) sum_k (-1)^k prod_{j<=k} (4 - (2j-1)^2) / (k! (8x)^k). */
static double f_i1e(double x, const unary_params *p) {
    if (isnan(x)) return x;
    double ax = fabs(x);
    if (ax == INFINITY) return copysign(0.0, x);
    if (ax <= 700.0) return f_i1(x, p) * exp(-ax);
    double term = 1.0, sum = 1.0;
    for (int k = 1; k < 12; k++) {
        term *= -(4.0 - (2.0 * k - 1.0) * (2.0 * k - 1.0)) / (k * 8.0 * ax);
        sum += term;
    }
    return copysign(sum / sqrt(2.0 * M_PI * ax), x);
}

/* K0 and K1 for 0 < x <= 2 by A&S 9.6.13 / 9.6.11:
 *   K0 = -(ln(x/2) + gamma) I0 + sum_{k>=1} H_k q^k / (k!)^2,
 *   K1 = 1/x + ln(x/2) I1 - (x/4) sum_k (psi(k+1) + psi(k+2)) q^k / (k! (k+1)!),
 * q = x^2 / 4, H_k the harmonic numbers. */
static void bessel_k01_series(double x, double *k0, double *k1) {
    double q = x * x / 4.0, l = log(x / 2.0);
    double t0 = 1.0, t1 = 1.0, i0 = 1.0, i1 = 1.0, h = 0.0, s0 = 0.0;
    double s1 = 1.0 - 2.0 * EULER_GAMMA; /* k = 0: psi(1) + psi(2) = 1 - 2 gamma */
    for (int k = 1; k < 200; k++) {
        t0 *= q / ((double)k * k);
        t1 *= q / ((double)k * (k + 1));
        h += 1.0 / k;
        i0 += t0;
        i1 += t1;
        s0 += h * t0;
        s1 += (2.0 * h + 1.0 / (k + 1) - 2.0 * EULER_GAMMA) * t1;
        if (t0 < 1e-18 * i0 && t1 < 1e-18 * i1) break;
    }
    *k0 = -(l + EULER_GAMMA) * i0 + s0;
    *k1 = 1.0 / x + l * 0.5 * x * i1 - 0.25 * x * s1;
}

/* e^x K_mu(x) and e^x K_{mu+1}(x) for |mu| <= 1/2 and x >= ~2, by Steed's
 * continued fraction for K (Thompson & Barnett; Temme's normalisation
 * sum s): K_mu = sqrt(pi / 2x) e^-x / s, K_{mu+1} = K_mu (mu + x + 1/2 -
 * (1/4 - mu^2) h) / x. */
static void bessel_k_cf2(double mu, double x, double *kmu, double *kmu1) {
    double b = 2.0 * (1.0 + x), d = 1.0 / b, h = d, delh = d, q1 = 0.0, q2 = 1.0;
    double a1 = 0.25 - mu * mu, q = a1, c = a1, a = -a1, s = 1.0 + q * delh;
    for (int i = 2; i < 100000; i++) {
        a -= 2.0 * (i - 1);
        c = -a * c / i;
        double qnew = (q1 - b * q2) / a;
        q1 = q2;
        q2 = qnew;
        q += c * qnew;
        b += 2.0;
        d = 1.0 / (b + a * d);
        delh = (b * d - 1.0) * delh;
        h += delh;
        double dels = q * delh;
        s += dels;
        if (fabs(dels / s) < 1e-17) break;
    }
    *kmu = sqrt(M_PI / (2.0 * x)) / s;
    *kmu1 = *kmu * (mu + x + 0.5 - a1 * h) / x;
}

/* K0 / K1, scaled (times e^x) or not, with PyTorch's edges: NaN below 0,
 * inf at 0, 0 at inf. */
static double bessel_k(double x, int order, bool scaled) {
    if (isnan(x) || x < 0.0) return NAN;
    if (x == 0.0) return INFINITY;
    if (x == INFINITY) return 0.0;
    double k0, k1;
    if (x <= 2.0) {
        bessel_k01_series(x, &k0, &k1);
        double r = order ? k1 : k0;
        return scaled ? r * exp(x) : r;
    }
    bessel_k_cf2(0.0, x, &k0, &k1);
    double r = order ? k1 : k0;
    return scaled ? r : r * exp(-x);
}
static double f_k0(double x, const unary_params *p) {
    TP_UNUSED(p);
    return bessel_k(x, 0, false);
}
static double f_k1(double x, const unary_params *p) {
    TP_UNUSED(p);
    return bessel_k(x, 1, false);
}
static double f_k0e(double x, const unary_params *p) {
    TP_UNUSED(p);
    return bessel_k(x, 0, true);
}
static double f_k1e(double x, const unary_params *p) {
    TP_UNUSED(p);
    return bessel_k(x, 1, true);
}

/* J0, J1, Y0, Y1 at x > 0 (Y only where `want_y`):
 *  - x < 2: the power series (A&S 9.1.10, 9.1.11; q = x^2 / 4)
 *      J0 = sum (-q)^k / (k!)^2,  J1 = (x/2) sum (-q)^k / (k! (k+1)!),
 *      Y0 = (2/pi)(ln(x/2) + gamma) J0 + (2/pi) sum_{k>=1} (-1)^(k+1) H_k q^k / (k!)^2,
 *      Y1 = -2/(pi x) + (2/pi) ln(x/2) J1 - (x / 2pi) sum (psi(k+1) + psi(k+2)) (-q)^k / (k! (k+1)!);
 *  - 2 <= x < 25: Miller's backward recurrence J_{k-1} = (2k/x) J_k - J_{k+1},
 *    normalised by J0 + 2 sum J_2m = 1, with Neumann's series
 *      Y0 = (2/pi)(ln(x/2) + gamma) J0 - (4/pi) sum_{m>=1} (-1)^m J_2m / m
 *    and its derivative for Y1 = -Y0';
 *  - x >= 25: Hankel's asymptotic expansion (A&S 9.2.5-10), cos/sin of
 *    x - (2n+1) pi/4 expanded so that no rounded multiple of pi is subtracted. */
static void bessel_jy(double x, bool want_y, double *j0, double *j1, double *y0, double *y1) {
    if (x < 2.0) {
        double q = x * x / 4.0, l = log(x / 2.0);
        double t0 = 1.0, t1 = 1.0, sj0 = 1.0, sj1 = 1.0, h = 0.0, sy0 = 0.0;
        double sy1 = 1.0 - 2.0 * EULER_GAMMA;
        for (int k = 1; k < 200; k++) {
            t0 *= -q / ((double)k * k);
            t1 *= -q / ((double)k * (k + 1));
            h += 1.0 / k;
            sj0 += t0;
            sj1 += t1;
            sy0 -= h * t0; /* (-1)^(k+1) H_k q^k / (k!)^2 = -H_k t0 */
            sy1 += (2.0 * h + 1.0 / (k + 1) - 2.0 * EULER_GAMMA) * t1;
            if (fabs(t0) < 1e-18 && fabs(t1) < 1e-18) break;
        }
        *j0 = sj0;
        *j1 = 0.5 * x * sj1;
        if (want_y) {
            *y0 = M_2_PI * ((l + EULER_GAMMA) * sj0 + sy0);
            *y1 = -M_2_PI / x + M_2_PI * l * *j1 - x / (2.0 * M_PI) * sy1;
        }
        return;
    }
    if (x < 25.0) {
        int n = 2 * (int)((1.5 * x + 30.0) / 2.0);
        double jp1 = 0.0, jk = 1e-30, norm = 0.0, s0 = 0.0, s1 = 0.0, jm1 = 0.0;
        for (int k = n; k >= 1; k--) {
            jm1 = 2.0 * k / x * jk - jp1;
            if (k % 2 == 0) {
                int m = k / 2;
                double sg = m % 2 ? -1.0 : 1.0;
                norm += 2.0 * jk;
                s0 += sg * jk / m;
                s1 += sg * (jm1 - jp1) / m;
            }
            jp1 = jk;
            jk = jm1;
            if (fabs(jk) > 1e250) {
                jk *= 1e-250;
                jp1 *= 1e-250;
                norm *= 1e-250;
                s0 *= 1e-250;
                s1 *= 1e-250;
            }
        }
        /* now jk = J0, jp1 = J1 (unnormalised) */
        norm += jk;
        *j0 = jk / norm;
        *j1 = jp1 / norm;
        if (want_y) {
            double l = log(x / 2.0) + EULER_GAMMA;
            *y0 = M_2_PI * (l * *j0 - 2.0 * s0 / norm);
            *y1 = M_2_PI * (-*j0 / x + l * *j1 + s1 / norm);
        }
        return;
    }
    double pq[2][2] = {{0, 0}, {0, 0}}; /* [order][P, Q] */
    for (int nu = 0; nu < 2; nu++) {
        double mu = 4.0 * nu * nu, t = 1.0, prev = INFINITY;
        pq[nu][0] = 1.0;
        for (int k = 1; k < 200; k++) {
            t *= (mu - (2.0 * k - 1.0) * (2.0 * k - 1.0)) / (k * 8.0 * x);
            if (fabs(t) >= prev || fabs(t) < 1e-18) break;
            prev = fabs(t);
            /* P = t0 - t2 + t4 ..., Q = t1 - t3 + t5 ... */
            double sg = (k / 2) % 2 ? -1.0 : 1.0;
            pq[nu][k % 2] += sg * t;
        }
    }
    double s = sin(x), c = cos(x), r = sqrt(2.0 / (M_PI * x)) * M_SQRT1_2;
    /* nu = 0: cos chi = (c + s)/sqrt2, sin chi = (s - c)/sqrt2;
     * nu = 1: cos chi = (s - c)/sqrt2, sin chi = -(s + c)/sqrt2 */
    *j0 = r * (pq[0][0] * (c + s) - pq[0][1] * (s - c));
    *j1 = r * (pq[1][0] * (s - c) + pq[1][1] * (s + c));
    if (want_y) {
        *y0 = r * (pq[0][0] * (s - c) + pq[0][1] * (c + s));
        *y1 = r * (-pq[1][0] * (s + c) + pq[1][1] * (s - c));
    }
}

static double f_bessel_j0(double x, const unary_params *p) {
    TP_UNUSED(p);
    if (isnan(x) || isinf(x)) return NAN;
    double j0, j1, y0, y1;
    bessel_jy(fabs(x), false, &j0, &j1, &y0, &y1);
    return j0;
}
static double f_bessel_j1(double x, const unary_params *p) {
    TP_UNUSED(p);
    if (isnan(x) || isinf(x)) return NAN;
    if (x == 0.0) return x;
    double j0, j1, y0, y1;
    bessel_jy(fabs(x), false, &j0, &j1, &y0, &y1);
    return copysign(1.0, x) * j1;
}
static double bessel_y(double x, int order) {
    if (isnan(x) || x < 0.0 || x == INFINITY) return NAN;
    if (x == 0.0) return -INFINITY;
    double j0, j1, y0, y1;
    bessel_jy(x, true, &j0, &j1, &y0, &y1);
    return order ? y1 : y0;
}
static double f_bessel_y0(double x, const unary_params *p) {
    TP_UNUSED(p);
    return bessel_y(x, 0);
}
static double f_bessel_y1(double x, const unary_params *p) {
    TP_UNUSED(p);
    return bessel_y(x, 1);
}

/* spherical j0 = sin(x) / x; its Taylor series below |x| = 0.5; 0 at +-inf */
static double f_spherical_j0(double x, const unary_params *p) {
    TP_UNUSED(p);
    if (isinf(x)) return 0.0;
    if (fabs(x) < 0.5) {
        double z = -x * x, t = 1.0, s = 1.0;
        for (int k = 1; k < 12; k++) {
            t *= z / ((2.0 * k) * (2.0 * k + 1.0));
            s += t;
        }
        return s;
    }
    return sin(x) / x;
}

/* Airy Ai (A&S 10.4):
 *  - x > 103.892: 0, +-inf: NaN (PyTorch's edges);
 *  - x >= 2.08 (zeta = 2/3 x^1.5 >= 2): Ai = sqrt(x/3) / pi K_{1/3}(zeta),
 *    K by Steed's continued fraction;
 *  - -9 <= x < 2.08: the Maclaurin series Ai = c1 f - c2 g (10.4.2), summed
 *    in long double (the terms grow to about e^zeta before cancelling);
 *  - x < -9: the asymptotic expansion 10.4.60 (smallest term near e^-2zeta). */
static double f_airy_ai(double x, const unary_params *p) {
    TP_UNUSED(p);
    if (isnan(x) || isinf(x)) return NAN;
    if (x > 103.892) return 0.0;
    if (x >= 2.08) {
        double z = 2.0 / 3.0 * x * sqrt(x), k, k1;
        bessel_k_cf2(1.0 / 3.0, z, &k, &k1);
        return sqrt(x / 3.0) / M_PI * k * exp(-z);
    }
    if (x >= -9.0) {
        const long double c1 = 0.355028053887817239260063186004183176L;
        const long double c2 = 0.258819403792806798405183560189203963L;
        long double x3 = (long double)x * x * x, t = 1.0L, u = x, f = 1.0L, g = x;
        for (int k = 1; k < 200; k++) {
            t *= x3 / ((3.0L * k) * (3.0L * k - 1.0L));
            u *= x3 / ((3.0L * k + 1.0L) * (3.0L * k));
            f += t;
            g += u;
            if (fabsl(t) < 1e-22L * fabsl(f) && fabsl(u) < 1e-22L * (fabsl(g) + 1e-300L)) break;
        }
        return (double)(c1 * f - c2 * g);
    }
    double ax = -x, z = 2.0 / 3.0 * ax * sqrt(ax), u = 1.0, zk = 1.0, P = 1.0, Q = 0.0, prev = INFINITY;
    for (int k = 1; k < 200; k++) {
        u *= (6.0 * k - 5.0) * (6.0 * k - 3.0) * (6.0 * k - 1.0) / ((2.0 * k - 1.0) * 216.0 * k);
        zk /= z;
        double t = u * zk;
        if (t >= prev || t < 1e-18) break;
        prev = t;
        double sg = (k / 2) % 2 ? -1.0 : 1.0; /* P: +t0 - t2 + t4, Q: +t1 - t3 */
        if (k % 2) Q += sg * t;
        else P += sg * t;
    }
    double ph = z + M_PI / 4.0;
    return (sin(ph) * P - cos(ph) * Q) / (sqrt(M_PI) * sqrt(sqrt(ax)));
}

#define FLOAT_KERNEL(name, fn)                                                                                         \
    static tp_status kernel_##name(const tp_value *args, tp_value *out) { return run_float(args, out, fn, NULL); }
#define MIXED_KERNEL(name, ffn, ifn)                                                                                   \
    static tp_status kernel_##name(const tp_value *args, tp_value *out) {                                              \
        return run_mixed(args, out, ffn, ifn, NULL);                                                                   \
    }

FLOAT_KERNEL(exp, f_exp)
FLOAT_KERNEL(log, f_log)
FLOAT_KERNEL(log1p, f_log1p)
FLOAT_KERNEL(expm1, f_expm1)
FLOAT_KERNEL(sqrt, f_sqrt)
FLOAT_KERNEL(rsqrt, f_rsqrt)
FLOAT_KERNEL(sin, f_sin)
FLOAT_KERNEL(cos, f_cos)
FLOAT_KERNEL(tan, f_tan)
FLOAT_KERNEL(tanh, f_tanh)
FLOAT_KERNEL(sinh, f_sinh)
FLOAT_KERNEL(cosh, f_cosh)
FLOAT_KERNEL(asin, f_asin)
FLOAT_KERNEL(acos, f_acos)
FLOAT_KERNEL(atan, f_atan)
FLOAT_KERNEL(asinh, f_asinh)
FLOAT_KERNEL(acosh, f_acosh)
FLOAT_KERNEL(atanh, f_atanh)
FLOAT_KERNEL(erfc, f_erfc)
FLOAT_KERNEL(erfinv, f_erfinv)
FLOAT_KERNEL(lgamma, f_lgamma)
FLOAT_KERNEL(log2, f_log2)
FLOAT_KERNEL(log10, f_log10)
FLOAT_KERNEL(exp2, f_exp2)
FLOAT_KERNEL(deg2rad, f_deg2rad)
FLOAT_KERNEL(frac, f_frac)
FLOAT_KERNEL(sinc, f_sinc)
FLOAT_KERNEL(rad2deg, f_rad2deg)
FLOAT_KERNEL(angle, f_angle)
FLOAT_KERNEL(entr, f_entr)
FLOAT_KERNEL(digamma, f_digamma)
FLOAT_KERNEL(i0, f_i0)
FLOAT_KERNEL(erfcx, f_erfcx)
FLOAT_KERNEL(i0e, f_i0e)
FLOAT_KERNEL(log_sigmoid, f_log_sigmoid)
FLOAT_KERNEL(softsign, f_softsign)
FLOAT_KERNEL(tanhshrink, f_tanhshrink)
FLOAT_KERNEL(sigmoid, f_sigmoid)
FLOAT_KERNEL(erf, f_erf)
FLOAT_KERNEL(reciprocal, f_reciprocal)
FLOAT_KERNEL(silu, f_silu)
FLOAT_KERNEL(mish, f_mish)
FLOAT_KERNEL(hardsigmoid, f_hardsigmoid)
FLOAT_KERNEL(hardswish, f_hardswish)
FLOAT_KERNEL(ndtr, f_ndtr)
FLOAT_KERNEL(ndtri, f_ndtri)
FLOAT_KERNEL(log_ndtr, f_log_ndtr)
FLOAT_KERNEL(i1, f_i1)
FLOAT_KERNEL(i1e, f_i1e)
FLOAT_KERNEL(bessel_j0, f_bessel_j0)
FLOAT_KERNEL(bessel_j1, f_bessel_j1)
FLOAT_KERNEL(bessel_y0, f_bessel_y0)
FLOAT_KERNEL(bessel_y1, f_bessel_y1)
FLOAT_KERNEL(modified_bessel_k0, f_k0)
FLOAT_KERNEL(modified_bessel_k1, f_k1)
FLOAT_KERNEL(scaled_modified_bessel_k0, f_k0e)
FLOAT_KERNEL(scaled_modified_bessel_k1, f_k1e)
FLOAT_KERNEL(spherical_bessel_j0, f_spherical_j0)
FLOAT_KERNEL(airy_ai, f_airy_ai)

MIXED_KERNEL(neg, f_neg, i_neg)
MIXED_KERNEL(abs, f_abs, i_abs)
MIXED_KERNEL(floor, f_floor, i_identity)
MIXED_KERNEL(ceil, f_ceil, i_identity)
MIXED_KERNEL(trunc, f_trunc, i_identity)
MIXED_KERNEL(sign, f_sign, i_sign)
MIXED_KERNEL(square, f_square, i_square)
MIXED_KERNEL(relu, f_relu, i_relu)

/* Integers and bool only (infer rejects floats); on bool it is logical
 * negation, not ~1. */
static tp_status kernel_bitwise_not(const tp_value *args, tp_value *out) {
    tp_tensor *x = tp__arg_tensor(args, 0), *y = tp__out_at(out, 0);
    TP_CHECK(x && y, TP_ERR_INTERNAL, "missing input or output tensor");
    TP_CHECK(!tp_dtype_is_float(x->dtype), TP_ERR_TYPE, "expected an integer or bool tensor for 'self', got %s",
             tp_dtype_name(x->dtype));
    if (x->dtype != TP_BOOL) {
        map_i64(x, y, i_bitwise_not, NULL);
        return TP_OK;
    }
    tp_iter it;
    tp__iter_init(&it, y->ndim, y->sizes, 2, (const tp_tensor *[]){y, x});
    while (tp__iter_next(&it)) *(uint8_t *)it.ptr[0] = *(const uint8_t *)it.ptr[1] ? 0 : 1;
    return TP_OK;
}

/* ---- kernels: predicates -------------------------------------------------- */

enum predicate { PRED_LOGICAL_NOT, PRED_ISNAN, PRED_ISINF, PRED_ISFINITE, PRED_SIGNBIT, PRED_ISPOSINF, PRED_ISNEGINF };

static tp_status run_predicate(const tp_value *args, tp_value *out, enum predicate pred) {
    tp_tensor *x = tp__arg_tensor(args, 0), *y = tp__out_at(out, 0);
    TP_CHECK(x && y, TP_ERR_INTERNAL, "missing input or output tensor");
    bool is_float = tp_dtype_is_float(x->dtype);
    tp_iter it;
    tp__iter_init(&it, y->ndim, y->sizes, 2, (const tp_tensor *[]){y, x});
    while (tp__iter_next(&it)) {
        bool r = false;
        if (is_float) {
            double v = tp__load_f64(it.ptr[1], x->dtype);
            r = pred == PRED_LOGICAL_NOT ? v == 0.0
                : pred == PRED_ISNAN     ? isnan(v)
                : pred == PRED_ISINF     ? isinf(v)
                : pred == PRED_SIGNBIT   ? signbit(v) != 0
                : pred == PRED_ISPOSINF  ? v == INFINITY
                : pred == PRED_ISNEGINF  ? v == -INFINITY
                                         : isfinite(v);
        } else if (pred == PRED_LOGICAL_NOT) {
            r = tp__load_i64(it.ptr[1], x->dtype) == 0;
        } else if (pred == PRED_SIGNBIT) {
            r = tp__load_i64(it.ptr[1], x->dtype) < 0;
        } else {
            r = pred == PRED_ISFINITE; /* integers are finite, never NaN or inf */
        }
        *(uint8_t *)it.ptr[0] = r ? 1 : 0;
    }
    return TP_OK;
}

static tp_status kernel_logical_not(const tp_value *args, tp_value *out) {
    return run_predicate(args, out, PRED_LOGICAL_NOT);
}
static tp_status kernel_isnan(const tp_value *args, tp_value *out) { return run_predicate(args, out, PRED_ISNAN); }
static tp_status kernel_isinf(const tp_value *args, tp_value *out) { return run_predicate(args, out, PRED_ISINF); }
static tp_status kernel_signbit(const tp_value *args, tp_value *out) { return run_predicate(args, out, PRED_SIGNBIT); }
static tp_status kernel_isposinf(const tp_value *args, tp_value *out) {
    return run_predicate(args, out, PRED_ISPOSINF);
}
static tp_status kernel_isneginf(const tp_value *args, tp_value *out) {
    return run_predicate(args, out, PRED_ISNEGINF);
}

/* Floating functions without a float16/bfloat16 kernel in PyTorch. */
static tp_status infer_float_no_half(const tp_value *args, tp_value *out) {
    tp_tensor *x = NULL;
    TP_TRY(self_tensor(args, &x));
    TP_CHECK(x->dtype != TP_FLOAT16 && x->dtype != TP_BFLOAT16, TP_ERR_TYPE, "not implemented for %s",
             tp_dtype_name(x->dtype));
    return infer_float(args, out);
}

/* ndtr is erf-based in PyTorch: bfloat16 works, float16 has no erf kernel */
static tp_status infer_ndtr(const tp_value *args, tp_value *out) {
    tp_tensor *x = NULL;
    TP_TRY(self_tensor(args, &x));
    TP_CHECK(x->dtype != TP_FLOAT16, TP_ERR_TYPE, "\"erf_vml_cpu\" not implemented for 'Half'");
    return infer_float(args, out);
}

/* frexp(Tensor self) -> (mantissa, exponent): self = mantissa * 2^exponent,
 * |mantissa| in [0.5, 1) (int32 exponents; 0, inf and NaN give exponent 0). */
static tp_status infer_frexp(const tp_value *args, tp_value *out) {
    tp_tensor *x = NULL;
    TP_TRY(self_tensor(args, &x));
    TP_CHECK(tp_dtype_is_float(x->dtype), TP_ERR_TYPE, "torch.frexp() only supports floating-point dtypes");
    TP_TRY(tp__out_tuple(out, 2));
    TP_TRY(out_like(tp_value_at(out, 0), x, x->dtype));
    return out_like(tp_value_at(out, 1), x, TP_INT32);
}

static tp_status kernel_frexp(const tp_value *args, tp_value *out) {
    tp_tensor *x = tp__arg_tensor(args, 0), *m = tp__out_at(out, 0), *e = tp__out_at(out, 1);
    TP_CHECK(x && m && e, TP_ERR_INTERNAL, "missing input or output tensor");
    tp_iter it;
    tp__iter_init(&it, x->ndim, x->sizes, 3, (const tp_tensor *[]){m, e, x});
    while (tp__iter_next(&it)) {
        double v = tp__load_f64(it.ptr[2], x->dtype);
        int ex = 0;
        double mant = isfinite(v) ? frexp(v, &ex) : v;
        tp__store_f64(it.ptr[0], m->dtype, mant);
        tp__store_i64(it.ptr[1], TP_INT32, ex);
    }
    return TP_OK;
}

/* mvlgamma(Tensor self, int p): the multivariate log-gamma of dimension p */
static tp_status infer_mvlgamma(const tp_value *args, tp_value *out) {
    TP_CHECK(tp__arg_int(args, 1) >= 1, TP_ERR_INVALID_ARG, "p has to be greater than or equal to 1");
    TP_CHECK(tp__arg_int(args, 1) <= 1000000, TP_ERR_INVALID_ARG, "mvlgamma: p = %" PRId64 " is too large",
             tp__arg_int(args, 1));
    return infer_float_no_half(args, out);
}

static tp_status kernel_mvlgamma(const tp_value *args, tp_value *out) {
    unary_params p = {(double)tp__arg_int(args, 1), 0, 0};
    return run_float(args, out, f_mvlgamma, &p);
}

/* polygamma(Tensor self, int n): the n-th derivative of digamma */
static tp_status infer_polygamma(const tp_value *args, tp_value *out) {
    TP_CHECK(tp__arg_int(args, 1) >= 0, TP_ERR_INVALID_ARG, "polygamma(n, x) does not support negative n.");
    return infer_float_no_half(args, out);
}

static tp_status kernel_polygamma(const tp_value *args, tp_value *out) {
    unary_params p = {(double)tp__arg_int(args, 1), 0, 0};
    return run_float(args, out, f_polygamma, &p);
}

static tp_status kernel_logit(const tp_value *args, tp_value *out) {
    unary_params p = {tp__arg_is_none(args, 1) ? 0.0 : 1.0, tp__arg_is_none(args, 1) ? 0.0 : tp__arg_f64(args, 1), 0};
    return run_float(args, out, f_logit, &p);
}

/* nan_to_num: NaN -> nan (0 when None), +-inf -> posinf/neginf (the dtype's
 * largest/lowest finite value when None), stored in self's dtype (so a too
 * large replacement becomes inf in float16); integer and bool tensors are
 * copied unchanged. */
static double f_nan_to_num(double x, const unary_params *p) {
    return isnan(x) ? p->a : x == INFINITY ? p->b : x == -INFINITY ? p->c : x;
}
static double dtype_max(tp_dtype dt) {
    switch (dt) {
    case TP_FLOAT16: return 65504.0;
    case TP_BFLOAT16: return 3.3895313892515355e38;
    case TP_FLOAT32: return FLT_MAX;
    default: return DBL_MAX;
    }
}
static tp_status kernel_nan_to_num(const tp_value *args, tp_value *out) {
    tp_tensor *x = tp__arg_tensor(args, 0), *y = tp__out_at(out, 0);
    TP_CHECK(x && y, TP_ERR_INTERNAL, "missing input or output tensor");
    double mx = dtype_max(x->dtype);
    unary_params p = {tp__arg_is_none(args, 1) ? 0.0 : tp__arg_f64(args, 1),
                      tp__arg_is_none(args, 2) ? mx : tp__arg_f64(args, 2),
                      tp__arg_is_none(args, 3) ? -mx : tp__arg_f64(args, 3)};
    if (tp_dtype_is_float(x->dtype)) map_f64(x, y, f_nan_to_num, &p);
    else map_i64(x, y, i_identity, &p);
    return TP_OK;
}
static tp_status kernel_isfinite(const tp_value *args, tp_value *out) {
    return run_predicate(args, out, PRED_ISFINITE);
}

/* ---- round ---------------------------------------------------------------- */

/* PyTorch's round(decimals): nearbyint(x * 10^d) / 10^d, or for d < 0
 * nearbyint(x / 10^-d) * 10^-d; computed in the float's "opmath" type. */
static tp_status kernel_round(const tp_value *args, tp_value *out) {
    tp_tensor *x = tp__arg_tensor(args, 0), *y = tp__out_at(out, 0);
    TP_CHECK(x && y, TP_ERR_INTERNAL, "missing input or output tensor");
    int64_t decimals = tp__arg_int(args, 1);
    if (decimals == 0 || !tp_dtype_is_float(x->dtype)) return run_mixed(args, out, f_rint, i_identity, NULL);
    bool neg = decimals < 0;
    double ten_pow = pow(10.0, neg ? -(double)decimals : (double)decimals);
    bool in_double = x->dtype == TP_FLOAT64;
    float ten_pow_f = (float)ten_pow;
    tp_iter it;
    tp__iter_init(&it, y->ndim, y->sizes, 2, (const tp_tensor *[]){y, x});
    while (tp__iter_next(&it)) {
        double v = tp__load_f64(it.ptr[1], x->dtype), r;
        if (in_double) {
            r = neg ? nearbyint(v / ten_pow) * ten_pow : nearbyint(v * ten_pow) / ten_pow;
        } else {
            float f = (float)v;
            r = neg ? nearbyintf(f / ten_pow_f) * ten_pow_f : nearbyintf(f * ten_pow_f) / ten_pow_f;
        }
        tp__store_f64(it.ptr[0], y->dtype, r);
    }
    return TP_OK;
}

/* ---- activations with parameters ----------------------------------------- */

static tp_status kernel_leaky_relu(const tp_value *args, tp_value *out) {
    unary_params p = {tp__arg_f64(args, 1), 0, 0};
    return run_float(args, out, f_leaky_relu, &p);
}

static tp_status kernel_elu(const tp_value *args, tp_value *out) {
    unary_params p = {tp__arg_f64(args, 1), tp__arg_f64(args, 2), tp__arg_f64(args, 3)};
    return run_float(args, out, f_elu, &p);
}

static tp_status kernel_selu(const tp_value *args, tp_value *out) {
    unary_params p = {1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1.0};
    return run_float(args, out, f_elu, &p);
}

static tp_status kernel_softplus(const tp_value *args, tp_value *out) {
    unary_params p = {tp__arg_f64(args, 1), tp__arg_f64(args, 2), 0};
    return run_float(args, out, f_softplus, &p);
}

static tp_status gelu_mode(const tp_value *args, bool *use_tanh) {
    const char *mode = tp__arg_str(args, 1);
    TP_CHECK(mode && (strcmp(mode, "none") == 0 || strcmp(mode, "tanh") == 0), TP_ERR_INVALID_ARG,
             "approximate must be 'none' or 'tanh', got '%s'", mode ? mode : "?");
    *use_tanh = strcmp(mode, "tanh") == 0;
    return TP_OK;
}

static tp_status infer_gelu(const tp_value *args, tp_value *out) {
    bool use_tanh = false;
    TP_TRY(gelu_mode(args, &use_tanh));
    return infer_float_only(args, out);
}

static tp_status kernel_gelu(const tp_value *args, tp_value *out) {
    bool use_tanh = false;
    TP_TRY(gelu_mode(args, &use_tanh));
    return run_float(args, out, use_tanh ? f_gelu_tanh : f_gelu, NULL);
}

/* hardtanh / relu6 limits. Integer inputs use the limits truncated to
 * integers (PyTorch: "boundaries do not cause type promotion"). */
static tp_status hardtanh_limits(const tp_tensor *x, double min_val, double max_val, unary_params *p) {
    TP_CHECK(x != NULL, TP_ERR_INTERNAL, "missing input tensor");
    TP_CHECK(x->dtype != TP_BOOL, TP_ERR_TYPE, "bool tensors are not supported for 'self'");
    if (!tp_dtype_is_float(x->dtype)) {
        TP_CHECK(isfinite(min_val) && isfinite(max_val) && fabs(min_val) < 9.2e18 && fabs(max_val) < 9.2e18,
                 TP_ERR_INVALID_ARG, "limits min_val=%g, max_val=%g do not fit an integer tensor", min_val, max_val);
        min_val = trunc(min_val);
        max_val = trunc(max_val);
        TP_CHECK(x->dtype != TP_UINT8 || (min_val >= 0 && max_val >= 0), TP_ERR_INVALID_ARG,
                 "negative limits (min_val=%g, max_val=%g) are not supported for a uint8 tensor", min_val, max_val);
    }
    p->a = min_val;
    p->b = max_val;
    p->c = 0;
    return TP_OK;
}

static tp_status infer_hardtanh(const tp_value *args, tp_value *out) {
    tp_tensor *x = NULL;
    unary_params p;
    TP_TRY(self_tensor(args, &x));
    TP_TRY(hardtanh_limits(x, tp__arg_f64(args, 1), tp__arg_f64(args, 2), &p));
    return out_like(out, x, x->dtype);
}

static tp_status kernel_hardtanh(const tp_value *args, tp_value *out) {
    unary_params p;
    TP_TRY(hardtanh_limits(tp__arg_tensor(args, 0), tp__arg_f64(args, 1), tp__arg_f64(args, 2), &p));
    return run_mixed(args, out, f_hardtanh, i_hardtanh, &p);
}

static tp_status infer_relu6(const tp_value *args, tp_value *out) {
    tp_tensor *x = NULL;
    unary_params p;
    TP_TRY(self_tensor(args, &x));
    TP_TRY(hardtanh_limits(x, 0.0, 6.0, &p));
    return out_like(out, x, x->dtype);
}

static tp_status kernel_relu6(const tp_value *args, tp_value *out) {
    unary_params p;
    TP_TRY(hardtanh_limits(tp__arg_tensor(args, 0), 0.0, 6.0, &p));
    return run_mixed(args, out, f_hardtanh, i_hardtanh, &p);
}

/* celu(x, alpha) = elu(x, alpha, scale=1, input_scale=1/alpha), as PyTorch. */
static tp_status celu_alpha(const tp_value *args, unary_params *p) {
    double alpha = tp__arg_f64(args, 1);
    TP_CHECK(alpha != 0.0, TP_ERR_INVALID_ARG, "ZeroDivisionError: alpha cannot be 0 for CELU");
    p->a = alpha;
    p->b = 1.0;
    p->c = 1.0 / alpha;
    return TP_OK;
}

static tp_status infer_celu(const tp_value *args, tp_value *out) {
    unary_params p;
    TP_TRY(celu_alpha(args, &p));
    return infer_float_only(args, out);
}

static tp_status kernel_celu(const tp_value *args, tp_value *out) {
    unary_params p;
    TP_TRY(celu_alpha(args, &p));
    return run_float(args, out, f_elu, &p);
}

/* A scalar compared with elements, rounded to the floating dtype first as
 * PyTorch converts it (0.3 vs a float32 0.3 compares equal). */
static double scalar_as(double v, tp_dtype dtype) {
    if (!tp_dtype_is_float(dtype) || dtype == TP_FLOAT64) return v;
    char elem[8];
    tp__store_f64(elem, dtype, v);
    return tp__load_f64(elem, dtype);
}

static tp_status softshrink_lambd(const tp_value *args, unary_params *p) {
    double lambd = tp__arg_f64(args, 1);
    TP_CHECK(!(lambd < 0.0), TP_ERR_INVALID_ARG, "lambda must be greater or equal to 0, but found to be %g.", lambd);
    const tp_tensor *x = tp__arg_tensor(args, 0);
    p->a = x ? scalar_as(lambd, x->dtype) : lambd;
    p->b = p->c = 0;
    return TP_OK;
}

static tp_status infer_softshrink(const tp_value *args, tp_value *out) {
    unary_params p;
    TP_TRY(softshrink_lambd(args, &p));
    return infer_float_only(args, out);
}

static tp_status kernel_softshrink(const tp_value *args, tp_value *out) {
    unary_params p;
    TP_TRY(softshrink_lambd(args, &p));
    return run_float(args, out, f_softshrink, &p);
}

static tp_status kernel_hardshrink(const tp_value *args, tp_value *out) {
    const tp_tensor *x = tp__arg_tensor(args, 0);
    TP_CHECK(x != NULL, TP_ERR_INTERNAL, "missing input tensor");
    unary_params p = {scalar_as(tp__arg_f64(args, 1), x->dtype), 0, 0};
    return run_float(args, out, f_hardshrink, &p);
}

/* threshold / value: integer inputs use them truncated to integers (PyTorch
 * converts both scalars to the tensor's dtype). */
static tp_status threshold_params(const tp_tensor *x, double thr, double value, unary_params *p) {
    TP_CHECK(x != NULL, TP_ERR_INTERNAL, "missing input tensor");
    TP_CHECK(x->dtype != TP_BOOL, TP_ERR_TYPE, "bool tensors are not supported for 'self'");
    if (!tp_dtype_is_float(x->dtype)) {
        TP_CHECK(isfinite(thr) && isfinite(value) && fabs(thr) < 9.2e18 && fabs(value) < 9.2e18, TP_ERR_INVALID_ARG,
                 "threshold=%g, value=%g do not fit an integer tensor", thr, value);
        thr = trunc(thr);
        value = trunc(value);
        TP_CHECK(x->dtype != TP_UINT8 || (thr >= 0 && value >= 0), TP_ERR_INVALID_ARG,
                 "negative threshold=%g or value=%g is not supported for a uint8 tensor", thr, value);
    } else {
        thr = scalar_as(thr, x->dtype);
    }
    p->a = thr;
    p->b = value;
    p->c = 0;
    return TP_OK;
}

static tp_status infer_threshold(const tp_value *args, tp_value *out) {
    tp_tensor *x = NULL;
    unary_params p;
    TP_TRY(self_tensor(args, &x));
    TP_TRY(threshold_params(x, tp__arg_f64(args, 1), tp__arg_f64(args, 2), &p));
    return out_like(out, x, x->dtype);
}

static tp_status kernel_threshold(const tp_value *args, tp_value *out) {
    unary_params p;
    TP_TRY(threshold_params(tp__arg_tensor(args, 0), tp__arg_f64(args, 1), tp__arg_f64(args, 2), &p));
    return run_mixed(args, out, f_threshold, i_threshold, &p);
}

/* rrelu in eval mode: leaky_relu with slope (lower + upper) / 2. */
static tp_status rrelu_slope(const tp_value *args, unary_params *p) {
    TP_CHECK(!tp__arg_bool(args, 3), TP_ERR_UNSUPPORTED,
             "rrelu with training=True draws random slopes; only training=False is supported");
    double lower = tp__arg_f64(args, 1), upper = tp__arg_f64(args, 2);
    TP_CHECK(!(lower > upper), TP_ERR_INVALID_ARG,
             "Lower bound should be less than or equal to the upper bound (lower=%g, upper=%g)", lower, upper);
    p->a = (lower + upper) / 2.0;
    p->b = p->c = 0;
    return TP_OK;
}

static tp_status infer_rrelu(const tp_value *args, tp_value *out) {
    unary_params p;
    TP_TRY(rrelu_slope(args, &p));
    return infer_float_only(args, out);
}

static tp_status kernel_rrelu(const tp_value *args, tp_value *out) {
    unary_params p;
    TP_TRY(rrelu_slope(args, &p));
    return run_float(args, out, f_leaky_relu, &p);
}

/* ---- clamp ------------------------------------------------------------------
 * min and max are each None, a number or a tensor (tensors broadcast with
 * self). Result dtype: PyTorch's result_type(self, min, max). */

static tp_status clamp_check_bound(const tp_value *v, const char *name) {
    TP_CHECK(v->kind == TP_VAL_NONE || v->kind == TP_VAL_TENSOR || tp_value_is_number(v), TP_ERR_TYPE,
             "argument '%s' must be a number, a tensor or None, not %s", name, tp_value_kind_name(v->kind));
    return TP_OK;
}

static tp_status clamp_shape(const tp_value *args, tp_dtype *dtype, int *ndim, tp_sdim *dims) {
    tp_tensor *x = NULL;
    TP_TRY(self_tensor(args, &x));
    TP_TRY(clamp_check_bound(&args[1], "min"));
    TP_TRY(clamp_check_bound(&args[2], "max"));
    TP_CHECK(!tp__arg_is_none(args, 1) || !tp__arg_is_none(args, 2), TP_ERR_INVALID_ARG,
             "At least one of 'min' or 'max' must not be None");
    *ndim = tp__dims(x, dims);
    for (int i = 1; i <= 2; i++) {
        const tp_tensor *b = tp__arg_tensor(args, i);
        tp_sdim bd[TP_MAX_DIMS];
        if (b) TP_TRY(tp__dims_broadcast(*ndim, dims, tp__dims(b, bd), bd, ndim, dims));
    }
    *dtype = tp__result_type((const tp_value *[]){&args[0], &args[1], &args[2]}, 3);
    return TP_OK;
}

static tp_status infer_clamp(const tp_value *args, tp_value *out) {
    tp_dtype dtype = TP_FLOAT32;
    int ndim;
    tp_sdim dims[TP_MAX_DIMS];
    TP_TRY(clamp_shape(args, &dtype, &ndim, dims));
    return tp__out_dims(out, dtype, ndim, dims);
}

static tp_status kernel_clamp(const tp_value *args, tp_value *out) {
    tp_tensor *x = tp__arg_tensor(args, 0), *y = tp__out_at(out, 0);
    TP_CHECK(x && y, TP_ERR_INTERNAL, "missing input or output tensor");
    /* Bounds as tensors: numbers become 0-d int64/float64 tensors so that one
     * loop handles both; a missing bound is NULL. */
    tp_tensor *bound[2] = {NULL, NULL};
    tp_status st = TP_OK;
    for (int i = 0; i < 2 && st == TP_OK; i++) {
        const tp_value *v = &args[1 + i];
        if (v->kind == TP_VAL_NONE) continue;
        st = tp__as_tensor(v, v->kind == TP_VAL_FLOAT ? TP_FLOAT64 : TP_INT64, &bound[i]);
    }
    if (st == TP_OK) {
        const tp_tensor *ops[4] = {y, x, bound[0] ? bound[0] : x, bound[1] ? bound[1] : x};
        bool has_lo = bound[0] != NULL, has_hi = bound[1] != NULL;
        tp_dtype dl = ops[2]->dtype, dh = ops[3]->dtype;
        tp_iter it;
        tp__iter_init(&it, y->ndim, y->sizes, 4, ops);
        if (tp_dtype_is_float(y->dtype)) {
            while (tp__iter_next(&it)) {
                double v = tp__load_f64(it.ptr[1], x->dtype);
                if (has_lo) v = max_nan(v, tp__load_f64(it.ptr[2], dl));
                if (has_hi) v = min_nan(v, tp__load_f64(it.ptr[3], dh));
                tp__store_f64(it.ptr[0], y->dtype, v);
            }
        } else {
            while (tp__iter_next(&it)) {
                int64_t v = tp__load_i64(it.ptr[1], x->dtype);
                if (has_lo) {
                    int64_t lo = tp__load_i64(it.ptr[2], dl);
                    if (v < lo) v = lo;
                }
                if (has_hi) {
                    int64_t hi = tp__load_i64(it.ptr[3], dh);
                    if (v > hi) v = hi;
                }
                tp__store_i64(it.ptr[0], y->dtype, v);
            }
        }
    }
    tp_tensor_free(bound[0]);
    tp_tensor_free(bound[1]);
    return st;
}

/* ---- registration --------------------------------------------------------- */

void tp__register_unary_ops(void) {
    tp__register_op(TP_OP_NEG, "neg(Tensor self) -> Tensor", 0, infer_neg, kernel_neg);
    tp__register_op(TP_OP_ABS, "abs(Tensor self) -> Tensor", 0, infer_same_no_bool, kernel_abs);
    tp__register_op(TP_OP_EXP, "exp(Tensor self) -> Tensor", 0, infer_float, kernel_exp);
    tp__register_op(TP_OP_LOG, "log(Tensor self) -> Tensor", 0, infer_float, kernel_log);
    tp__register_op(TP_OP_LOG1P, "log1p(Tensor self) -> Tensor", 0, infer_float, kernel_log1p);
    tp__register_op(TP_OP_EXPM1, "expm1(Tensor self) -> Tensor", 0, infer_float, kernel_expm1);
    tp__register_op(TP_OP_SQRT, "sqrt(Tensor self) -> Tensor", 0, infer_float, kernel_sqrt);
    tp__register_op(TP_OP_RSQRT, "rsqrt(Tensor self) -> Tensor", 0, infer_float, kernel_rsqrt);
    tp__register_op(TP_OP_SIN, "sin(Tensor self) -> Tensor", 0, infer_float, kernel_sin);
    tp__register_op(TP_OP_COS, "cos(Tensor self) -> Tensor", 0, infer_float, kernel_cos);
    tp__register_op(TP_OP_TAN, "tan(Tensor self) -> Tensor", 0, infer_float, kernel_tan);
    tp__register_op(TP_OP_TANH, "tanh(Tensor self) -> Tensor", 0, infer_float, kernel_tanh);
    tp__register_op(TP_OP_SIGMOID, "sigmoid(Tensor self) -> Tensor", 0, infer_float, kernel_sigmoid);
    tp__register_op(TP_OP_ERF, "erf(Tensor self) -> Tensor", 0, infer_float, kernel_erf);
    tp__register_op(TP_OP_RECIPROCAL, "reciprocal(Tensor self) -> Tensor", 0, infer_float, kernel_reciprocal);
    tp__register_op(TP_OP_FLOOR, "floor(Tensor self) -> Tensor", 0, infer_same_no_bool, kernel_floor);
    tp__register_op(TP_OP_CEIL, "ceil(Tensor self) -> Tensor", 0, infer_same_no_bool, kernel_ceil);
    tp__register_op(TP_OP_ROUND, "round(Tensor self, *, int decimals=0) -> Tensor", 0, infer_round, kernel_round);
    tp__register_op(TP_OP_TRUNC, "trunc(Tensor self) -> Tensor", 0, infer_same_no_bool, kernel_trunc);
    tp__register_op(TP_OP_SIGN, "sign(Tensor self) -> Tensor", 0, infer_same, kernel_sign);
    tp__register_op(TP_OP_SQUARE, "square(Tensor self) -> Tensor", 0, infer_square, kernel_square);
    tp__register_op(TP_OP_LOGICAL_NOT, "logical_not(Tensor self) -> Tensor", 0, infer_bool, kernel_logical_not);
    tp__register_op(TP_OP_BITWISE_NOT, "bitwise_not(Tensor self) -> Tensor", 0, infer_bitwise_not,
                    kernel_bitwise_not);
    tp__register_op(TP_OP_ISNAN, "isnan(Tensor self) -> Tensor", 0, infer_bool, kernel_isnan);
    tp__register_op(TP_OP_ISINF, "isinf(Tensor self) -> Tensor", 0, infer_bool, kernel_isinf);

    tp__register_op(TP_OP_RELU, "relu(Tensor self) -> Tensor", 0, infer_same_no_bool, kernel_relu);
    tp__register_op(TP_OP_RELU6, "relu6(Tensor self) -> Tensor", 0, infer_relu6, kernel_relu6);
    tp__register_op(TP_OP_LEAKY_RELU, "leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor", 0,
                    infer_float_only, kernel_leaky_relu);
    tp__register_op(TP_OP_ELU, "elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor", 0,
                    infer_float_only, kernel_elu);
    tp__register_op(TP_OP_SELU, "selu(Tensor self) -> Tensor", 0, infer_float_only, kernel_selu);
    tp__register_op(TP_OP_GELU, "gelu(Tensor self, *, str approximate='none') -> Tensor", 0, infer_gelu, kernel_gelu);
    tp__register_op(TP_OP_SILU, "silu(Tensor self) -> Tensor", 0, infer_float_only, kernel_silu);
    tp__register_op(TP_OP_MISH, "mish(Tensor self) -> Tensor", 0, infer_float_only, kernel_mish);
    tp__register_op(TP_OP_SOFTPLUS, "softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor", 0,
                    infer_float_only, kernel_softplus);
    tp__register_op(TP_OP_HARDTANH, "hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor", 0,
                    infer_hardtanh, kernel_hardtanh);
    tp__register_op(TP_OP_HARDSIGMOID, "hardsigmoid(Tensor self) -> Tensor", 0, infer_float_only, kernel_hardsigmoid);
    tp__register_op(TP_OP_HARDSWISH, "hardswish(Tensor self) -> Tensor", 0, infer_float_only, kernel_hardswish);
    tp__register_op(TP_OP_CLAMP, "clamp(Tensor self, Any min=None, Any max=None) -> Tensor", 0, infer_clamp,
                    kernel_clamp);

    tp__register_op(TP_OP_SINH, "sinh(Tensor self) -> Tensor", 0, infer_float, kernel_sinh);
    tp__register_op(TP_OP_COSH, "cosh(Tensor self) -> Tensor", 0, infer_float, kernel_cosh);
    tp__register_op(TP_OP_ASIN, "asin(Tensor self) -> Tensor", 0, infer_float, kernel_asin);
    tp__register_op(TP_OP_ACOS, "acos(Tensor self) -> Tensor", 0, infer_float, kernel_acos);
    tp__register_op(TP_OP_ATAN, "atan(Tensor self) -> Tensor", 0, infer_float, kernel_atan);
    tp__register_op(TP_OP_ASINH, "asinh(Tensor self) -> Tensor", 0, infer_float, kernel_asinh);
    tp__register_op(TP_OP_ACOSH, "acosh(Tensor self) -> Tensor", 0, infer_float, kernel_acosh);
    tp__register_op(TP_OP_ATANH, "atanh(Tensor self) -> Tensor", 0, infer_float, kernel_atanh);
    tp__register_op(TP_OP_ERFC, "erfc(Tensor self) -> Tensor", 0, infer_float, kernel_erfc);
    tp__register_op(TP_OP_ERFINV, "erfinv(Tensor self) -> Tensor", 0, infer_float, kernel_erfinv);
    tp__register_op(TP_OP_LGAMMA, "lgamma(Tensor self) -> Tensor", 0, infer_float, kernel_lgamma);
    tp__register_op(TP_OP_LOG2, "log2(Tensor self) -> Tensor", 0, infer_float, kernel_log2);
    tp__register_op(TP_OP_LOG10, "log10(Tensor self) -> Tensor", 0, infer_float, kernel_log10);
    tp__register_op(TP_OP_EXP2, "exp2(Tensor self) -> Tensor", 0, infer_float, kernel_exp2);
    tp__register_op(TP_OP_DEG2RAD, "deg2rad(Tensor self) -> Tensor", 0, infer_float, kernel_deg2rad);
    tp__register_op(TP_OP_SINC, "sinc(Tensor self) -> Tensor", 0, infer_float_no_half, kernel_sinc);
    tp__register_op(TP_OP_RAD2DEG, "rad2deg(Tensor self) -> Tensor", 0, infer_float, kernel_rad2deg);
    tp__register_op(TP_OP_SIGNBIT, "signbit(Tensor self) -> Tensor", 0, infer_bool, kernel_signbit);
    tp__register_op(TP_OP_ISPOSINF, "isposinf(Tensor self) -> Tensor", 0, infer_bool, kernel_isposinf);
    tp__register_op(TP_OP_ISNEGINF, "isneginf(Tensor self) -> Tensor", 0, infer_bool, kernel_isneginf);
    tp__register_op(TP_OP_NAN_TO_NUM,
                    "nan_to_num(Tensor self, float? nan=None, float? posinf=None, float? neginf=None) -> Tensor", 0,
                    infer_same, kernel_nan_to_num);
    tp__register_op(TP_OP_LOGIT, "logit(Tensor self, float? eps=None) -> Tensor", 0, infer_float_no_half,
                    kernel_logit);
    tp__register_op(TP_OP_DIGAMMA, "digamma(Tensor self) -> Tensor", 0, infer_float_no_half, kernel_digamma);
    tp__register_op(TP_OP_I0, "i0(Tensor self) -> Tensor", 0, infer_float_no_half, kernel_i0);
    tp__register_op(TP_OP_ERFCX, "erfcx(Tensor self) -> Tensor", 0, infer_float_no_half, kernel_erfcx);
    tp__register_op(TP_OP_ANGLE, "angle(Tensor self) -> Tensor", 0, infer_float, kernel_angle);
    tp__register_op(TP_OP_ENTR, "entr(Tensor self) -> Tensor", 0, infer_float_no_half, kernel_entr);
    tp__register_op(TP_OP_I0E, "i0e(Tensor self) -> Tensor", 0, infer_float_no_half, kernel_i0e);
    tp__register_op(TP_OP_MVLGAMMA, "mvlgamma(Tensor self, int p) -> Tensor", 0, infer_mvlgamma, kernel_mvlgamma);
    tp__register_op(TP_OP_FREXP, "frexp(Tensor self) -> (Tensor, Tensor)", 0, infer_frexp, kernel_frexp);
    tp__register_op(TP_OP_POLYGAMMA, "polygamma(Tensor self, int n) -> Tensor", 0, infer_polygamma,
                    kernel_polygamma);
    tp__register_op(TP_OP_FRAC, "frac(Tensor self) -> Tensor", 0, infer_float_only, kernel_frac);
    tp__register_op(TP_OP_ISFINITE, "isfinite(Tensor self) -> Tensor", 0, infer_bool, kernel_isfinite);

    tp__register_op(TP_OP_CELU, "celu(Tensor self, Scalar alpha=1.0) -> Tensor", 0, infer_celu, kernel_celu);
    tp__register_op(TP_OP_LOG_SIGMOID, "log_sigmoid(Tensor self) -> Tensor", 0, infer_float_only, kernel_log_sigmoid);
    tp__register_op(TP_OP_SOFTSHRINK, "softshrink(Tensor self, Scalar lambd=0.5) -> Tensor", 0, infer_softshrink,
                    kernel_softshrink);
    tp__register_op(TP_OP_HARDSHRINK, "hardshrink(Tensor self, Scalar lambd=0.5) -> Tensor", 0, infer_float_only,
                    kernel_hardshrink);
    tp__register_op(TP_OP_THRESHOLD, "threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor", 0,
                    infer_threshold, kernel_threshold);
    tp__register_op(TP_OP_RRELU,
                    "rrelu(Tensor self, Scalar lower=0.125, Scalar upper=0.3333333333333333, bool training=False) "
                    "-> Tensor",
                    0, infer_rrelu, kernel_rrelu);
    tp__register_op(TP_OP_SOFTSIGN, "softsign(Tensor self) -> Tensor", 0, infer_softsign, kernel_softsign);
    tp__register_op(TP_OP_TANHSHRINK, "tanhshrink(Tensor self) -> Tensor", 0, infer_tanhshrink, kernel_tanhshrink);
    /* torch.special functions (issue #13): modified_bessel_i1 is i1 */
    tp__register_op(TP_OP_NDTR, "ndtr(Tensor self) -> Tensor", 0, infer_ndtr, kernel_ndtr);
    tp__register_op(TP_OP_NDTRI, "ndtri(Tensor self) -> Tensor", 0, infer_float_no_half, kernel_ndtri);
    tp__register_op(TP_OP_LOG_NDTR, "log_ndtr(Tensor self) -> Tensor", 0, infer_float_no_half, kernel_log_ndtr);
    tp__register_op(TP_OP_I1, "i1(Tensor self) -> Tensor", 0, infer_float_no_half, kernel_i1);
    tp__register_op(TP_OP_I1E, "i1e(Tensor self) -> Tensor", 0, infer_float_no_half, kernel_i1e);
    tp__register_op(TP_OP_BESSEL_J0, "bessel_j0(Tensor self) -> Tensor", 0, infer_float_no_half, kernel_bessel_j0);
    tp__register_op(TP_OP_BESSEL_J1, "bessel_j1(Tensor self) -> Tensor", 0, infer_float_no_half, kernel_bessel_j1);
    tp__register_op(TP_OP_BESSEL_Y0, "bessel_y0(Tensor self) -> Tensor", 0, infer_float_no_half, kernel_bessel_y0);
    tp__register_op(TP_OP_BESSEL_Y1, "bessel_y1(Tensor self) -> Tensor", 0, infer_float_no_half, kernel_bessel_y1);
    tp__register_op(TP_OP_MODIFIED_BESSEL_K0, "modified_bessel_k0(Tensor self) -> Tensor", 0, infer_float_no_half,
                    kernel_modified_bessel_k0);
    tp__register_op(TP_OP_MODIFIED_BESSEL_K1, "modified_bessel_k1(Tensor self) -> Tensor", 0, infer_float_no_half,
                    kernel_modified_bessel_k1);
    tp__register_op(TP_OP_SCALED_MODIFIED_BESSEL_K0, "scaled_modified_bessel_k0(Tensor x) -> Tensor", 0,
                    infer_float_no_half, kernel_scaled_modified_bessel_k0);
    tp__register_op(TP_OP_SCALED_MODIFIED_BESSEL_K1, "scaled_modified_bessel_k1(Tensor x) -> Tensor", 0,
                    infer_float_no_half, kernel_scaled_modified_bessel_k1);
    tp__register_op(TP_OP_SPHERICAL_BESSEL_J0, "spherical_bessel_j0(Tensor x) -> Tensor", 0, infer_float_no_half,
                    kernel_spherical_bessel_j0);
    tp__register_op(TP_OP_AIRY_AI, "airy_ai(Tensor x) -> Tensor", 0, infer_float_no_half, kernel_airy_ai);
}
