/*
 * binary.c - elementwise ops over two or three broadcast operands: schemas,
 * shape/dtype rules and reference kernels.
 *
 *  - arithmetic: add sub mul div remainder fmod pow maximum minimum atan2,
 *    hypot copysign, addcmul addcdiv lerp; xlogy xlog1py logaddexp
 *    logaddexp2 heaviside fmax fmin (NaN-ignoring) gcd lcm (integers only)
 *    nextafter float_power (always float64) ldexp (an integer exponent
 *    computes in float32, as pow(2., other) does); isclose and allclose
 *    (one dtype; allclose gives a 0-d bool tensor where PyTorch gives a
 *    Python bool); zeta (the Hurwitz zeta; integers compute in float32,
 *    no float16/bfloat16) and igamma / igammac (regularised incomplete
 *    gammas: floating operands only, float16 included, as in PyTorch); the
 *    Chebyshev (and shifted), Hermite, Laguerre and Legendre polynomials
 *    of torch.special (x, n);
 *  - comparisons eq ne lt le gt ge and logical_and/or/xor (bool results);
 *  - bitwise_and/or/xor (integer and bool tensors only), bitwise_left_shift
 *    and bitwise_right_shift (integer tensors only);
 *  - where (condition ? self : other, three-way broadcast);
 *  - the in-place add_ mul_ copy_ fill_ zero_, which write into `self`.
 *
 * Semantics follow PyTorch. Operands broadcast; the computation dtype is
 * PyTorch's result_type over the operands (tp__result_type: dimensioned
 * tensors over 0-d tensors over Python scalars), and every operand - a
 * Python scalar becomes a 0-d tensor - is converted to it before the op, so
 * an int scalar wraps to a uint8 tensor's range and a float32 0-d tensor
 * rounds to float16. True division, atan2 and copysign of integers compute in
 * float32 (hypot takes floating operands only);
 * comparisons and logical ops compute in the common dtype and give bool.
 * Floating math runs in double and rounds once on store; integer math runs
 * in int64 (unsigned where it can overflow) so results wrap as in PyTorch.
 * Integer division, remainder and fmod by zero fail with "ZeroDivisionError".
 * Scalar parameters (alpha, value, weight, fill value) are converted with
 * PyTorch's overflow check (tp__scalar_to_elem).
 *
 * Kernels accept any strides through tp_iter. The two-operand ops also have
 * an optimised variant for contiguous float32 operands (direct loops for
 * add/sub/mul/div) that gives results identical to the reference.
 *
 * Deviations from PyTorch 1.13: float16 atan2/lerp/addcmul/addcdiv work (1.13
 * has no CPU half kernel for them); an in-place op whose other operand
 * partially overlaps self reads it from a copy instead of failing.
 */
#include <inttypes.h>

#include "kernel_util.h"

/* ---- dtypes ------------------------------------------------------------ */

/* PyTorch's ScalarType names, for messages that mirror PyTorch's. */
static const char *torch_type_name(tp_dtype dtype) {
    static const char *const names[TP_DTYPE_COUNT] = {"Float", "Double", "Half", "BFloat16", "Long",
                                                      "Int",   "Short",  "Char", "Byte",     "Bool"};
    return (unsigned)dtype < TP_DTYPE_COUNT ? names[dtype] : "?";
}

static tp_status not_implemented(tp_dtype dtype) {
    return tp_error(TP_ERR_TYPE, "not implemented for '%s' (dtype %s)", torch_type_name(dtype),
                    tp_dtype_name(dtype));
}

/* PyTorch's canCast: no float -> integer/bool, no non-bool -> bool. */
static bool can_cast(tp_dtype from, tp_dtype to) {
    if (tp_dtype_is_float(from) && !tp_dtype_is_float(to)) return false;
    if (from != TP_BOOL && to == TP_BOOL) return false;
    return true;
}

/* v converted to the integer (or bool) dtype `ct`, wrapping like a C cast. */
static int64_t wrap_int(int64_t v, tp_dtype ct) {
    switch (ct) {
    case TP_INT32: return (int32_t)(uint32_t)(uint64_t)v;
    case TP_INT16: return (int16_t)(uint16_t)(uint64_t)v;
    case TP_INT8: return (int8_t)(uint8_t)(uint64_t)v;
    case TP_UINT8: return (uint8_t)(uint64_t)v;
    case TP_BOOL: return v != 0;
    default: return v;
    }
}

/* v rounded to the floating dtype `ct` (through float for the 16-bit types). */
static double round_float(double v, tp_dtype ct) {
    switch (ct) {
    case TP_FLOAT32: return (float)v;
    case TP_FLOAT16: return tp__f16_to_f32(tp__f32_to_f16((float)v));
    case TP_BFLOAT16: return tp__bf16_to_f32(tp__f32_to_bf16((float)v));
    default: return v;
    }
}

/* Element at p (dtype dt) converted to the floating computation dtype ct. */
static inline double load_float(const char *p, tp_dtype dt, tp_dtype ct) {
    if (dt == ct) return tp__load_f64(p, dt);
    if (tp_dtype_is_float(dt)) return round_float(tp__load_f64(p, dt), ct);
    int64_t v = tp__load_i64(p, dt);
    return ct == TP_FLOAT64 ? (double)v : round_float((double)(float)v, ct);
}

/* Element at p (dtype dt) converted to the integer/bool computation dtype ct. */
static inline int64_t load_int(const char *p, tp_dtype dt, tp_dtype ct) {
    int64_t v = tp__load_i64(p, dt);
    return dt == ct ? v : wrap_int(v, ct);
}

static inline int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline int64_t wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* ---- element functions -------------------------------------------------
 * x holds the operands converted to the computation dtype. */

typedef struct ew_params {
    tp_dtype ct;        /* computation dtype */
    double scale_f;     /* alpha (add, sub), value (addcmul, addcdiv), weight (lerp) */
    int64_t scale_i;    /* the same, converted to an integer computation dtype */
    bool zero_division; /* set by integer division/remainder by zero */
    double rtol, atol;  /* isclose / allclose */
    bool equal_nan;
} ew_params;

typedef double (*ew_float_fn)(const double *x, ew_params *p);
typedef int64_t (*ew_int_fn)(const int64_t *x, ew_params *p);

static double add_f(const double *x, ew_params *p) { return x[0] + p->scale_f * x[1]; }
static int64_t add_i(const int64_t *x, ew_params *p) { return wrap_add(x[0], wrap_mul(p->scale_i, x[1])); }
static double sub_f(const double *x, ew_params *p) { return x[0] - p->scale_f * x[1]; }
static int64_t sub_i(const int64_t *x, ew_params *p) { return wrap_sub(x[0], wrap_mul(p->scale_i, x[1])); }
static double mul_f(const double *x, ew_params *p) { return x[0] * x[1]; }
static int64_t mul_i(const int64_t *x, ew_params *p) { return wrap_mul(x[0], x[1]); }

static double div_true_f(const double *x, ew_params *p) { return x[0] / x[1]; }

/* The rounding divisions round each intermediate to the computation dtype,
 * as PyTorch's kernels (which compute in that dtype) do: the quotient
 * 559.76 rounds to 560 in float16 before trunc/floor see it. */
static double div_trunc_f(const double *x, ew_params *p) { return trunc(round_float(x[0] / x[1], p->ct)); }

/* PyTorch's div_floor_floating: floor of the exact quotient, computed from
 * fmod so that it is consistent with remainder. */
static double div_floor_f(const double *x, ew_params *p) {
    tp_dtype ct = p->ct;
    double a = x[0], b = x[1];
    if (b == 0) return a / b;
    double mod = fmod(a, b); /* exact in every precision */
    double div = round_float(round_float(a - mod, ct) / b, ct);
    if (mod != 0 && (b < 0) != (mod < 0)) div = round_float(div - 1.0, ct);
    if (div == 0) return copysign(0.0, a / b);
    double floordiv = floor(div);
    if (round_float(div - floordiv, ct) > 0.5) floordiv = round_float(floordiv + 1.0, ct);
    return floordiv;
}

static int64_t div_trunc_i(const int64_t *x, ew_params *p) {
    int64_t a = x[0], b = x[1];
    if (b == 0) {
        p->zero_division = true;
        return 0;
    }
    if (b == -1) return wrap_sub(0, a); /* INT64_MIN / -1 wraps */
    return a / b;
}

static int64_t div_floor_i(const int64_t *x, ew_params *p) {
    int64_t a = x[0], b = x[1];
    if (b == 0) {
        p->zero_division = true;
        return 0;
    }
    if (b == -1) return wrap_sub(0, a);
    int64_t q = a / b;
    if ((a < 0) != (b < 0) && q * b != a) q -= 1;
    return q;
}

/* Python's remainder: the result has the sign of the divisor. */
static double remainder_f(const double *x, ew_params *p) {
    double a = x[0], b = x[1];
    double mod = fmod(a, b);
    if (mod != 0 && (b < 0) != (mod < 0)) mod += b;
    return mod;
}

static int64_t remainder_i(const int64_t *x, ew_params *p) {
    int64_t a = x[0], b = x[1];
    if (b == 0) {
        p->zero_division = true;
        return 0;
    }
    if (b == -1) return 0;
    int64_t r = a % b;
    if (r != 0 && (r < 0) != (b < 0)) r += b;
    return r;
}

/* C's fmod: the result has the sign of the dividend. */
static double fmod_f(const double *x, ew_params *p) { return fmod(x[0], x[1]); }

static int64_t fmod_i(const int64_t *x, ew_params *p) {
    if (x[1] == 0) {
        p->zero_division = true;
        return 0;
    }
    return x[1] == -1 ? 0 : x[0] % x[1];
}

static double pow_f(const double *x, ew_params *p) { return pow(x[0], x[1]); }

/* Tensor ** Python number: PyTorch special-cases these exponents. */
static double pow_scalar_f(const double *x, ew_params *p) {
    double a = x[0], e = x[1];
    if (e == 0.5) return sqrt(a);
    if (e == 2.0) return a * a;
    if (e == 3.0) return a * a * a;
    if (e == -0.5) return 1.0 / sqrt(a);
    if (e == -1.0) return 1.0 / a;
    if (e == -2.0) return 1.0 / (a * a);
    return pow(a, e);
}

/* Integer power by squaring, wrapping; negative exponents give 0 except for
 * bases 1 and -1 (PyTorch's powi). */
static int64_t pow_i(const int64_t *x, ew_params *p) {
    int64_t base = x[0], e = x[1];
    if (e < 0) {
        if (base == 1) return 1;
        if (base == -1) return (e % 2 == 0) ? 1 : -1;
        return 0;
    }
    uint64_t result = 1, b = (uint64_t)base;
    while (e) {
        if (e & 1) result *= b;
        b *= b;
        e >>= 1;
    }
    return (int64_t)result;
}

static double maximum_f(const double *x, ew_params *p) {
    if (isnan(x[0]) || isnan(x[1])) return NAN;
    return x[0] < x[1] ? x[1] : x[0];
}
static double minimum_f(const double *x, ew_params *p) {
    if (isnan(x[0]) || isnan(x[1])) return NAN;
    return x[1] < x[0] ? x[1] : x[0];
}
static int64_t maximum_i(const int64_t *x, ew_params *p) { return x[0] < x[1] ? x[1] : x[0]; }
static int64_t minimum_i(const int64_t *x, ew_params *p) { return x[1] < x[0] ? x[1] : x[0]; }
static double atan2_f(const double *x, ew_params *p) { return atan2(x[0], x[1]); }
static double hypot_f(const double *x, ew_params *p) { return hypot(x[0], x[1]); }
static double copysign_f(const double *x, ew_params *p) { return copysign(x[0], x[1]); }
/* xlogy / xlog1py: 0 where x is 0 unless y is NaN. */
static double xlogy_f(const double *x, ew_params *p) {
    if (isnan(x[1])) return NAN;
    return x[0] == 0 ? 0.0 : x[0] * log(x[1]);
}
static double xlog1py_f(const double *x, ew_params *p) {
    if (isnan(x[1])) return NAN;
    return x[0] == 0 ? 0.0 : x[0] * log1p(x[1]);
}
/* zeta(x, q) (torch.special.zeta, the Hurwitz zeta): PyTorch's domain
 * checks, then the Euler-Maclaurin sum of unary.c. */
static double zeta_f(const double *v, ew_params *p) {
    double x = v[0], q = v[1];
    if (x == 1.0) return INFINITY;
    if (x < 1.0) return NAN;
    if (q <= 0.0) {
        if (q == floor(q)) return INFINITY;
        if (x != floor(x)) return NAN; /* q^-x undefined */
    }
    return tp__hurwitz_zeta(x, q);
}
/* Regularised incomplete gamma P(a, x) (igamma) and Q = 1 - P (igammac):
 * the series x^a e^-x / Gamma(a + 1) sum_n x^n / ((a+1)..(a+n)) below
 * x = a + 1, Legendre's continued fraction for Q above (modified Lentz),
 * the other one as the complement; prefactors through lgamma. The edge
 * values follow PyTorch's order of checks (x or a negative: NaN; a = 0;
 * x = 0; a = inf; x = inf). */
static double igam_series(double a, double x) {
    double ap = a, del = 1.0 / a, sum = del;
    for (int n = 0; n < 100000; n++) {
        ap += 1.0;
        del *= x / ap;
        sum += del;
        if (fabs(del) < fabs(sum) * 1e-17) break;
    }
    return sum * exp(a * log(x) - x - tp__lgamma(a));
}
static double igamc_cf(double a, double x) {
    const double tiny = 1e-300;
    double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
    for (int i = 1; i < 100000; i++) {
        double an = -i * (i - a);
        b += 2.0;
        d = an * d + b;
        if (fabs(d) < tiny) d = tiny;
        c = b + an / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1.0) < 1e-16) break;
    }
    return exp(a * log(x) - x - tp__lgamma(a)) * h;
}
static double igamma_pq(double a, double x, bool upper) {
    if (x < 0.0 || a < 0.0) return NAN;
    if (a == 0.0) return x > 0.0 ? (upper ? 0.0 : 1.0) : NAN;
    if (x == 0.0) return upper ? 1.0 : 0.0;
    if (isinf(a)) return isinf(x) ? NAN : (upper ? 1.0 : 0.0);
    if (isinf(x)) return upper ? 0.0 : 1.0;
    if (isnan(a) || isnan(x)) return NAN;
    if (x < a + 1.0) {
        double P = igam_series(a, x);
        return upper ? 1.0 - P : P;
    }
    double Q = igamc_cf(a, x);
    return upper ? Q : 1.0 - Q;
}
static double igamma_f(const double *v, ew_params *p) { return igamma_pq(v[0], v[1], false); }
static double igammac_f(const double *v, ew_params *p) { return igamma_pq(v[0], v[1], true); }
/* The orthogonal polynomials of torch.special at (x, n), n truncated to an
 * integer (NaN or out of int64's range reads as PyTorch's x86 conversion
 * does: INT64_MIN, so 0): their three-term recurrences from P_0 and P_1,
 * with PyTorch's shortcuts - 0 for n < 0, the closed values at the ends of
 * the interval, and for Chebyshev kinds of larger n inside it the
 * trigonometric forms (T_n = cos(n t), U_n = sin((n+1) t) / sin t, V_n =
 * cos((n+1/2) t) / cos(t/2), W_n = sin((n+1/2) t) / sin(t/2), t = acos x;
 * shifted kinds at 2x - 1). */
enum { P_CHEB_T, P_CHEB_U, P_CHEB_V, P_CHEB_W, P_SCHEB_T, P_SCHEB_U, P_SCHEB_V, P_SCHEB_W, P_HERM_H, P_HERM_HE,
       P_LAGUERRE, P_LEGENDRE };

static double cheb_ends(int kind, bool at_one, int64_t n) {
    double odd = n % 2 ? -1.0 : 1.0, n1 = (double)n + 1.0, n2 = 2.0 * (double)n + 1.0;
    switch (kind) {
    case P_CHEB_T: return at_one ? 1.0 : odd;
    case P_CHEB_U: return at_one ? n1 : odd * n1;
    case P_CHEB_V: return at_one ? 1.0 : odd * n2;
    default: return at_one ? n2 : odd; /* W */
    }
}

static double orth_poly(int kind, double x, double nf) {
    int64_t n = (isnan(nf) || nf >= 9.2e18 || nf <= -9.2e18) ? INT64_MIN : (int64_t)nf;
    if (n < 0) return 0.0;
    double y = x, p0 = 1.0, p1, step = 2.0; /* P_{k+1} = step y P_k - P_{k-1} for the Chebyshev kinds */
    int limit = 6;
    if (kind <= P_SCHEB_W) {
        int base = kind >= P_SCHEB_T ? kind - P_SCHEB_T : kind;
        if (kind >= P_SCHEB_T) {
            if (x == 1.0) return cheb_ends(base, true, n);
            if (x == 0.0) return cheb_ends(base, false, n);
            y = x + x - 1.0;
            limit = base == 3 ? 4 : 6;
        } else {
            if (fabs(x) == 1.0) return cheb_ends(base, x > 0, n);
            limit = base == 0 ? 6 : 8;
        }
        if (n > limit && fabs(y) < 1.0) {
            double t = acos(y);
            switch (base) {
            case 0: return cos((double)n * t);
            case 1:
                return sin(t) != 0.0 ? sin(((double)n + 1.0) * t) / sin(t)
                                     : ((double)n + 1.0) * cos(((double)n + 1.0) * t) / y;
            case 2: return sin(t / 2.0) != 1.0 ? cos(((double)n + 0.5) * t) / cos(t / 2.0) : cheb_ends(2, false, n);
            default:
                return cos(t / 2.0) != 1.0 ? sin(((double)n + 0.5) * t) / sin(t / 2.0) : cheb_ends(3, y > 0, n);
            }
        }
        p1 = base == 0 ? y : base == 1 ? 2.0 * y : base == 2 ? 2.0 * y - 1.0 : 2.0 * y + 1.0;
    } else if (kind == P_HERM_H || kind == P_HERM_HE) {
        p1 = kind == P_HERM_H ? 2.0 * x : x;
    } else if (kind == P_LAGUERRE) {
        if (x == 0.0) return 1.0;
        p1 = 1.0 - x;
    } else { /* Legendre */
        if (fabs(x) == 1.0) return x > 0 || n % 2 == 0 ? 1.0 : -1.0;
        p1 = x;
    }
    if (n == 0) return p0;
    for (int64_t k = 1; k < n && !isnan(p1); k++) {
        double kd = (double)k, r;
        switch (kind) {
        case P_HERM_H: r = 2.0 * x * p1 - 2.0 * kd * p0; break;
        case P_HERM_HE: r = x * p1 - kd * p0; break;
        case P_LAGUERRE: r = ((2.0 * kd + 1.0 - x) * p1 - kd * p0) / (kd + 1.0); break;
        case P_LEGENDRE: r = ((2.0 * kd + 1.0) * x * p1 - kd * p0) / (kd + 1.0); break;
        default: r = step * y * p1 - p0; break;
        }
        p0 = p1;
        p1 = r;
    }
    return p1;
}
#define POLY_F(name, kind)                                                                                     \
    static double name##_f(const double *v, ew_params *p) { return orth_poly(kind, v[0], v[1]); }
POLY_F(chebyshev_polynomial_t, P_CHEB_T)
POLY_F(chebyshev_polynomial_u, P_CHEB_U)
POLY_F(chebyshev_polynomial_v, P_CHEB_V)
POLY_F(chebyshev_polynomial_w, P_CHEB_W)
POLY_F(shifted_chebyshev_polynomial_t, P_SCHEB_T)
POLY_F(shifted_chebyshev_polynomial_u, P_SCHEB_U)
POLY_F(shifted_chebyshev_polynomial_v, P_SCHEB_V)
POLY_F(shifted_chebyshev_polynomial_w, P_SCHEB_W)
POLY_F(hermite_polynomial_h, P_HERM_H)
POLY_F(hermite_polynomial_he, P_HERM_HE)
POLY_F(laguerre_polynomial_l, P_LAGUERRE)
POLY_F(legendre_polynomial_p, P_LEGENDRE)
/* log(exp(a) + exp(b)) without overflow; equal infinities give themselves. */
static double logaddexp_f(const double *x, ew_params *p) {
    double a = x[0], b = x[1];
    if (isinf(a) && a == b) return a;
    double m = a < b ? b : a;
    return m + log1p(exp(-fabs(a - b)));
}
static double logaddexp2_f(const double *x, ew_params *p) {
    double a = x[0], b = x[1];
    if (isinf(a) && a == b) return a;
    double m = a < b ? b : a;
    return m + log1p(exp2(-fabs(a - b))) / M_LN2;
}
/* heaviside: values where self is 0, else self > 0 (NaN gives 0). */
static double heaviside_f(const double *x, ew_params *p) { return x[0] == 0 ? x[1] : (double)(x[0] > 0); }
static int64_t heaviside_i(const int64_t *x, ew_params *p) { return x[0] == 0 ? x[1] : x[0] > 0; }
/* fmax / fmin: a NaN operand gives the other one. */
static double fmax_f(const double *x, ew_params *p) {
    if (isnan(x[0]) || isnan(x[1])) return isnan(x[0]) ? x[1] : x[0];
    return x[0] < x[1] ? x[1] : x[0];
}
static double fmin_f(const double *x, ew_params *p) {
    if (isnan(x[0]) || isnan(x[1])) return isnan(x[0]) ? x[1] : x[0];
    return x[1] < x[0] ? x[1] : x[0];
}
/* gcd (non-negative, wrapping like PyTorch's for INT64_MIN) and lcm = |a / gcd * b|. */
static int64_t gcd_i(const int64_t *x, ew_params *p) {
    uint64_t a = x[0] < 0 ? 0 - (uint64_t)x[0] : (uint64_t)x[0];
    uint64_t b = x[1] < 0 ? 0 - (uint64_t)x[1] : (uint64_t)x[1];
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return (int64_t)a;
}
static int64_t lcm_i(const int64_t *x, ew_params *p) {
    int64_t g = gcd_i(x, p);
    if (g == 0) return 0;
    int64_t r = wrap_mul(x[0] / g, x[1]);
    return r < 0 ? wrap_sub(0, r) : r;
}
/* nextafter in the computation dtype (float32 or float64). */
static double nextafter_f(const double *x, ew_params *p) {
    return p->ct == TP_FLOAT32 ? (double)nextafterf((float)x[0], (float)x[1]) : nextafter(x[0], x[1]);
}
/* isclose: equal (infinities included), both NaN with equal_nan, or finite
 * |a - b| <= atol + |rtol * b| computed in the computation dtype (integers:
 * in float32, as PyTorch's integer * float scalar). */
static double isclose_f(const double *x, ew_params *p) {
    double a = x[0], b = x[1];
    if (a == b) return 1.0;
    if (p->equal_nan && isnan(a) && isnan(b)) return 1.0;
    tp_dtype ct = p->ct;
    double err = round_float(fabs(a - b), ct);
    double allowed = round_float(round_float(p->atol, ct) + round_float(fabs(round_float(p->rtol, ct) * b), ct), ct);
    return isfinite(err) && err <= allowed;
}
static int64_t isclose_i(const int64_t *x, ew_params *p) {
    if (x[0] == x[1]) return 1;
    if (p->rtol == 0 && p->atol == 0) return 0;
    double b = (float)x[1], err = (float)fabs((double)(float)x[0] - b);
    double allowed = (float)((float)p->atol + (float)fabs((float)p->rtol * b));
    return err <= allowed;
}
/* ldexp: self * 2 ** other. */
static double ldexp_f(const double *x, ew_params *p) { return x[0] * exp2(x[1]); }

static double eq_f(const double *x, ew_params *p) { return x[0] == x[1]; }
static double ne_f(const double *x, ew_params *p) { return x[0] != x[1]; }
static double lt_f(const double *x, ew_params *p) { return x[0] < x[1]; }
static double le_f(const double *x, ew_params *p) { return x[0] <= x[1]; }
static double gt_f(const double *x, ew_params *p) { return x[0] > x[1]; }
static double ge_f(const double *x, ew_params *p) { return x[0] >= x[1]; }
static int64_t eq_i(const int64_t *x, ew_params *p) { return x[0] == x[1]; }
static int64_t ne_i(const int64_t *x, ew_params *p) { return x[0] != x[1]; }
static int64_t lt_i(const int64_t *x, ew_params *p) { return x[0] < x[1]; }
static int64_t le_i(const int64_t *x, ew_params *p) { return x[0] <= x[1]; }
static int64_t gt_i(const int64_t *x, ew_params *p) { return x[0] > x[1]; }
static int64_t ge_i(const int64_t *x, ew_params *p) { return x[0] >= x[1]; }

/* NaN counts as true, as in C and PyTorch. */
static double logical_and_f(const double *x, ew_params *p) { return x[0] != 0 && x[1] != 0; }
static double logical_or_f(const double *x, ew_params *p) { return x[0] != 0 || x[1] != 0; }
static double logical_xor_f(const double *x, ew_params *p) { return (x[0] != 0) != (x[1] != 0); }
static int64_t logical_and_i(const int64_t *x, ew_params *p) { return x[0] != 0 && x[1] != 0; }
static int64_t logical_or_i(const int64_t *x, ew_params *p) { return x[0] != 0 || x[1] != 0; }
static int64_t logical_xor_i(const int64_t *x, ew_params *p) { return (x[0] != 0) != (x[1] != 0); }

static int64_t bitwise_and_i(const int64_t *x, ew_params *p) { return x[0] & x[1]; }
static int64_t bitwise_or_i(const int64_t *x, ew_params *p) { return x[0] | x[1]; }
static int64_t bitwise_xor_i(const int64_t *x, ew_params *p) { return x[0] ^ x[1]; }

/* Shifts as PyTorch 2 defines them for counts outside [0, bits of the
 * computation dtype): a left shift gives 0, a right shift the sign (0 for
 * uint8). PyTorch 1.13 leaves those counts to the hardware. In range, the
 * left shift wraps on store like the other integer ops. */
static int shift_bits(const ew_params *p) { return (int)tp_dtype_size(p->ct) * 8; }
static int64_t bitwise_left_shift_i(const int64_t *x, ew_params *p) {
    if (x[1] < 0 || x[1] >= shift_bits(p)) return 0;
    return (int64_t)((uint64_t)x[0] << x[1]);
}
static int64_t bitwise_right_shift_i(const int64_t *x, ew_params *p) {
    int64_t s = x[1] < 0 || x[1] >= shift_bits(p) ? 63 : x[1];
    return x[0] < 0 ? ~(~x[0] >> s) : x[0] >> s; /* arithmetic shift without relying on the compiler */
}

/* lerp(self, end, weight) in PyTorch 1.13's numerically stable form (the
 * test is weight < 0.5, not |weight| < 0.5: it matters for infinite ends). */
static double lerp_formula(double self, double end, double weight) {
    return weight < 0.5 ? self + weight * (end - self) : end - (end - self) * (1.0 - weight);
}
static double lerp_f(const double *x, ew_params *p) { return lerp_formula(x[0], x[1], x[2]); }
static double lerp_scalar_f(const double *x, ew_params *p) { return lerp_formula(x[0], x[1], p->scale_f); }

static double addcmul_f(const double *x, ew_params *p) { return x[0] + p->scale_f * x[1] * x[2]; }
static int64_t addcmul_i(const int64_t *x, ew_params *p) {
    return wrap_add(x[0], wrap_mul(wrap_mul(p->scale_i, x[1]), x[2]));
}
static double addcdiv_f(const double *x, ew_params *p) { return x[0] + p->scale_f * x[1] / x[2]; }

/* ---- the elementwise engine -------------------------------------------- */

/* What one call computes: computation dtype, result dtype and shape, the
 * element functions and their scalar parameters. */
typedef struct ew_plan {
    tp_dtype ct;
    tp_dtype out_dtype;
    int ndim;
    int64_t sizes[TP_MAX_DIMS];
    tp_sdim dims[TP_MAX_DIMS]; /* sizes as the shape rule gives them (dim.h) */
    ew_float_fn ff; /* used when ct is floating */
    ew_int_fn fi;   /* used when ct is an integer type or bool */
    ew_params params;
} ew_plan;

static bool same_sizes(const tp_tensor *t, int ndim, const int64_t *sizes) {
    return t->ndim == ndim && (ndim == 0 || memcmp(t->sizes, sizes, (size_t)ndim * sizeof *sizes) == 0);
}

/* Optimised variant of run_elementwise: contiguous float32 operands of the
 * output's shape (or with one element) need no dtype dispatch and no strided
 * iteration. Returns false, doing nothing, for anything else. */
static bool run_contiguous_f32(tp_tensor *out, int n_in, tp_tensor *const *in, ew_plan *pl) {
    bool bool_out = out->dtype == TP_BOOL;
    if (pl->ct != TP_FLOAT32 || (out->dtype != TP_FLOAT32 && !bool_out) || !out->storage ||
        !tp_tensor_is_contiguous(out))
        return false;
    int64_t n = tp_tensor_numel(out);
    const float *src[3];
    int64_t step[3];
    for (int k = 0; k < n_in; k++) {
        const tp_tensor *t = in[k];
        if (t->dtype != TP_FLOAT32 || !t->storage || !tp_tensor_is_contiguous(t)) return false;
        if (same_sizes(t, out->ndim, out->sizes)) step[k] = 1;
        else if (tp_tensor_numel(t) == 1) step[k] = 0;
        else return false;
        src[k] = (const float *)tp__tensor_base(t);
    }
    char *dst = tp__tensor_base(out);
    double x[3];
    pl->params.ct = TP_FLOAT32;
    for (int64_t i = 0; i < n; i++) {
        for (int k = 0; k < n_in; k++) x[k] = src[k][i * step[k]];
        double r = pl->ff(x, &pl->params);
        if (bool_out) ((uint8_t *)dst)[i] = r != 0;
        else ((float *)dst)[i] = (float)r;
    }
    return true;
}

/* out[i] = f(in[0][i], in[1][i], ...) over out's shape; inputs broadcast
 * to it and are converted to pl->ct; results are converted to out's dtype.
 * `out` may be one of the inputs (in-place ops write element by element). */
static tp_status run_elementwise(tp_tensor *out, int n_in, tp_tensor *const *in, ew_plan *pl) {
    const tp_tensor *ops[4] = {out};
    tp_dtype dts[3];
    TP_CHECK(out->storage != NULL, TP_ERR_INVALID_ARG, "output tensor has no data (meta tensor)");
    for (int k = 0; k < n_in; k++) {
        TP_CHECK(in[k]->storage != NULL || tp_tensor_numel(in[k]) == 0, TP_ERR_INVALID_ARG,
                 "input tensor %d has no data (meta tensor)", k);
        ops[k + 1] = in[k];
        dts[k] = in[k]->dtype;
    }
    tp_dtype ct = pl->ct, od = out->dtype;
    pl->params.ct = ct;
    pl->params.zero_division = false;
    if (tp_dtype_is_float(ct)) {
        tp_iter it;
        tp__iter_init(&it, out->ndim, out->sizes, n_in + 1, ops);
        double x[3];
        while (tp__iter_next(&it)) {
            for (int k = 0; k < n_in; k++) x[k] = load_float(it.ptr[k + 1], dts[k], ct);
            tp__store_f64(it.ptr[0], od, pl->ff(x, &pl->params));
        }
    } else {
        tp_iter it;
        tp__iter_init(&it, out->ndim, out->sizes, n_in + 1, ops);
        int64_t x[3];
        while (tp__iter_next(&it)) {
            for (int k = 0; k < n_in; k++) x[k] = load_int(it.ptr[k + 1], dts[k], ct);
            tp__store_i64(it.ptr[0], od, pl->fi(x, &pl->params));
        }
        TP_CHECK(!pl->params.zero_division, TP_ERR_INVALID_ARG,
                 "ZeroDivisionError: integer division or remainder by zero");
    }
    return TP_OK;
}

/* Broadcast the shapes of the tensor values among vals (numbers are 0-d). */
static tp_status broadcast_values(const tp_value *const *vals, int n, int *ndim, int64_t *sizes, tp_sdim *dims) {
    tp_sdim d[TP_MAX_DIMS];
    *ndim = 0;
    for (int k = 0; k < n; k++) {
        if (vals[k]->kind != TP_VAL_TENSOR) continue;
        const tp_tensor *t = vals[k]->u.tensor;
        tp_sdim td[TP_MAX_DIMS];
        TP_TRY(tp__dims_broadcast(*ndim, d, tp__dims(t, td), td, ndim, d));
    }
    for (int i = 0; i < *ndim; i++) {
        sizes[i] = d[i].v;
        if (dims) dims[i] = d[i];
    }
    return TP_OK;
}

/* Convert scalar argument v (`what`) to dtype ct with PyTorch's overflow
 * check; floating dtypes keep the value at opmath precision (double for
 * float64, float otherwise), integer dtypes truncate and wrap. */
static tp_status scalar_param(const tp_value *v, tp_dtype ct, const char *what, ew_params *p) {
    char elem[8];
    tp_status st = tp__scalar_to_elem(v, ct, elem);
    if (st != TP_OK) {
        tp_error_context("argument '%s'", what);
        return st;
    }
    double f = tp_value_as_f64(v);
    p->scale_f = ct == TP_FLOAT64 ? f : (double)(float)f;
    p->scale_i = tp_dtype_is_float(ct) ? 0 : tp__load_i64(elem, ct);
    return TP_OK;
}

/* ---- two-operand ops: self (Tensor) and other (Tensor or Scalar) ------- */

enum {
    EW_NO_BOOL = 1u << 0,       /* bool computation: "not implemented for 'Bool'" */
    EW_INT_TO_FLOAT = 1u << 1,  /* integer/bool operands compute in float32 */
    EW_BOOL_OUT = 1u << 2,      /* result dtype is bool */
    EW_ALPHA = 1u << 3,         /* keyword `alpha` in args[2] scales other */
    EW_NO_HALF = 1u << 4,       /* float16/bfloat16 computation: "not implemented" */
    EW_DOUBLE = 1u << 5,        /* every operand computes in float64 (float_power) */
    EW_SAME_DTYPE = 1u << 6     /* both operands must have one dtype (heaviside) */
};

typedef struct binary_desc {
    tp_op op;
    ew_float_fn ff; /* NULL: floating dtypes unsupported */
    ew_int_fn fi;   /* NULL: integer and bool dtypes unsupported */
    unsigned flags;
} binary_desc;

static tp_status sub_check(const tp_value *args) {
    tp_dtype a = tp__arg_tensor(args, 0)->dtype;
    tp_dtype b = args[1].kind == TP_VAL_TENSOR ? args[1].u.tensor->dtype : tp__scalar_dtype(&args[1]);
    TP_CHECK(a != TP_BOOL || b != TP_BOOL, TP_ERR_TYPE,
             "Subtraction, the `-` operator, with two bool tensors is not supported. "
             "Use the `^` or `logical_xor()` operator instead.");
    TP_CHECK(a != TP_BOOL && b != TP_BOOL, TP_ERR_TYPE,
             "Subtraction, the `-` operator, with a bool tensor is not supported. "
             "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
    return TP_OK;
}

static tp_status alpha_check(const tp_value *alpha, tp_dtype ct, ew_params *p) {
    TP_CHECK(alpha->kind != TP_VAL_BOOL || ct == TP_BOOL, TP_ERR_TYPE,
             "Boolean alpha only supported for Boolean results.");
    TP_CHECK(tp_dtype_is_float(ct) || alpha->kind != TP_VAL_FLOAT, TP_ERR_TYPE,
             "For integral input tensors, argument alpha must not be a floating point number.");
    return scalar_param(alpha, ct, "alpha", p);
}

static tp_status plan_binary(const binary_desc *d, const tp_value *args, ew_plan *pl) {
    memset(pl, 0, sizeof *pl);
    const tp_value *vals[2] = {&args[0], &args[1]};
    tp_dtype ct = tp__result_type(vals, 2);
    TP_TRY(broadcast_values(vals, 2, &pl->ndim, pl->sizes, pl->dims));
    unsigned flags = d->flags;
    pl->ff = d->ff;
    pl->fi = d->fi;
    switch (d->op) {
    case TP_OP_SUB: TP_TRY(sub_check(args)); break;
    case TP_OP_DIV: {
        const char *mode = tp__arg_str(args, 2);
        if (!mode) {
            pl->ff = div_true_f;
            pl->fi = NULL;
            flags |= EW_INT_TO_FLOAT;
        } else if (strcmp(mode, "trunc") == 0) {
            pl->ff = div_trunc_f;
            pl->fi = div_trunc_i;
        } else if (strcmp(mode, "floor") == 0) {
            pl->ff = div_floor_f;
            pl->fi = div_floor_i;
        } else {
            return tp_error(TP_ERR_INVALID_ARG,
                            "expected rounding_mode to be one of None, 'trunc', or 'floor' but found '%s'", mode);
        }
        break;
    }
    case TP_OP_POW:
        TP_CHECK(!(args[1].kind == TP_VAL_INT && args[1].u.i < 0 && !tp_dtype_is_float(ct)), TP_ERR_INVALID_ARG,
                 "Integers to negative integer powers are not allowed.");
        if (args[1].kind != TP_VAL_TENSOR) {
            /* a number exponent converts to the tensor's dtype with a check */
            char elem[8];
            tp_status st = tp__scalar_to_elem(&args[1], ct, elem);
            if (st != TP_OK) {
                tp_error_context("argument 'exponent'");
                return st;
            }
            pl->ff = pow_scalar_f;
        }
        break;
    case TP_OP_ISCLOSE:
    case TP_OP_ALLCLOSE: {
        tp_dtype a = tp__arg_tensor(args, 0)->dtype, b = tp__arg_tensor(args, 1)->dtype;
        TP_CHECK(a == b, TP_ERR_TYPE, "%s did not match %s", torch_type_name(a), torch_type_name(b));
        pl->params.rtol = tp_value_as_f64(&args[2]);
        pl->params.atol = tp_value_as_f64(&args[3]);
        pl->params.equal_nan = tp_value_as_i64(&args[4]) != 0;
        TP_CHECK(pl->params.rtol >= 0, TP_ERR_INVALID_ARG, "rtol must be greater than or equal to zero, but got %g",
                 pl->params.rtol);
        TP_CHECK(pl->params.atol >= 0, TP_ERR_INVALID_ARG, "atol must be greater than or equal to zero, but got %g",
                 pl->params.atol);
        break;
    }
    case TP_OP_LDEXP: {
        /* self * pow(2., other): an integer exponent computes in float32 */
        tp_dtype od = tp__arg_tensor(args, 1)->dtype;
        ct = tp_promote_types(tp__arg_tensor(args, 0)->dtype, tp_dtype_is_float(od) ? od : TP_DEFAULT_FLOAT);
        break;
    }
    default: break;
    }
    if (flags & EW_SAME_DTYPE) {
        TP_CHECK(args[1].kind != TP_VAL_TENSOR || args[1].u.tensor->dtype == tp__arg_tensor(args, 0)->dtype,
                 TP_ERR_TYPE, "heaviside is not yet implemented for tensors with different dtypes.");
    }
    if ((flags & EW_INT_TO_FLOAT) && !tp_dtype_is_float(ct)) ct = TP_DEFAULT_FLOAT;
    if (flags & EW_DOUBLE) ct = TP_FLOAT64;
    if ((flags & EW_NO_HALF) && (ct == TP_FLOAT16 || ct == TP_BFLOAT16)) return not_implemented(ct);
    if (ct == TP_BOOL && (flags & EW_NO_BOOL)) return not_implemented(ct);
    if (tp_dtype_is_float(ct) ? !pl->ff : !pl->fi) return not_implemented(ct);
    if (flags & EW_ALPHA) TP_TRY(alpha_check(&args[2], ct, &pl->params));
    pl->ct = ct;
    pl->out_dtype = (flags & EW_BOOL_OUT) ? TP_BOOL : ct;
    return TP_OK;
}

static tp_status binary_infer(const binary_desc *d, const tp_value *args, tp_value *out) {
    ew_plan pl;
    TP_TRY(plan_binary(d, args, &pl));
    return tp__out_dims(out, pl.out_dtype, pl.ndim, pl.dims);
}

static tp_status run_binary(const binary_desc *d, const tp_value *args, tp_value *out, bool fast) {
    ew_plan pl;
    TP_TRY(plan_binary(d, args, &pl));
    tp_tensor *other;
    TP_TRY(tp__as_tensor(&args[1], pl.ct, &other));
    tp_tensor *in[2] = {tp__arg_tensor(args, 0), other};
    tp_tensor *result = tp__out_at(out, 0);
    tp_status st = TP_OK;
    if (!fast || !run_contiguous_f32(result, 2, in, &pl)) st = run_elementwise(result, 2, in, &pl);
    tp_tensor_free(other);
    return st;
}

static tp_status binary_fast(const binary_desc *d, const tp_value *args, tp_value *out);

#define BINARY_OP(name, op_id, ff, fi, flags)                                                       \
    static const binary_desc name##_desc = {op_id, ff, fi, flags};                                  \
    static tp_status name##_infer(const tp_value *args, tp_value *out) {                            \
        return binary_infer(&name##_desc, args, out);                                               \
    }                                                                                               \
    static tp_status name##_kernel(const tp_value *args, tp_value *out) {                           \
        return run_binary(&name##_desc, args, out, false);                                          \
    }                                                                                               \
    static tp_status name##_fast(const tp_value *args, tp_value *out) {                             \
        return binary_fast(&name##_desc, args, out);                                                \
    }

BINARY_OP(add, TP_OP_ADD, add_f, add_i, EW_ALPHA)
BINARY_OP(sub, TP_OP_SUB, sub_f, sub_i, EW_ALPHA)
BINARY_OP(mul, TP_OP_MUL, mul_f, mul_i, 0)
BINARY_OP(div, TP_OP_DIV, NULL, NULL, EW_NO_BOOL) /* functions chosen by rounding_mode */
BINARY_OP(remainder, TP_OP_REMAINDER, remainder_f, remainder_i, EW_NO_BOOL)
BINARY_OP(fmod, TP_OP_FMOD, fmod_f, fmod_i, EW_NO_BOOL)
BINARY_OP(pow, TP_OP_POW, pow_f, pow_i, EW_NO_BOOL)
BINARY_OP(maximum, TP_OP_MAXIMUM, maximum_f, maximum_i, 0)
BINARY_OP(minimum, TP_OP_MINIMUM, minimum_f, minimum_i, 0)
BINARY_OP(atan2, TP_OP_ATAN2, atan2_f, NULL, EW_INT_TO_FLOAT)
/* Ops with the reference kernel only (no fast variant). */
#define BINARY_OP_REF(name, op_id, ff, fi, flags)                                                   \
    static const binary_desc name##_desc = {op_id, ff, fi, flags};                                  \
    static tp_status name##_infer(const tp_value *args, tp_value *out) {                            \
        return binary_infer(&name##_desc, args, out);                                               \
    }                                                                                               \
    static tp_status name##_kernel(const tp_value *args, tp_value *out) {                           \
        return run_binary(&name##_desc, args, out, false);                                          \
    }

BINARY_OP_REF(hypot, TP_OP_HYPOT, hypot_f, NULL, 0)
BINARY_OP_REF(copysign, TP_OP_COPYSIGN, copysign_f, NULL, EW_INT_TO_FLOAT)
BINARY_OP_REF(bitwise_left_shift, TP_OP_BITWISE_LEFT_SHIFT, NULL, bitwise_left_shift_i, EW_NO_BOOL)
BINARY_OP_REF(bitwise_right_shift, TP_OP_BITWISE_RIGHT_SHIFT, NULL, bitwise_right_shift_i, EW_NO_BOOL)
BINARY_OP_REF(xlogy, TP_OP_XLOGY, xlogy_f, NULL, EW_INT_TO_FLOAT)
BINARY_OP_REF(xlog1py, TP_OP_XLOG1PY, xlog1py_f, NULL, EW_INT_TO_FLOAT)
BINARY_OP_REF(logaddexp, TP_OP_LOGADDEXP, logaddexp_f, NULL, EW_NO_HALF)
BINARY_OP_REF(logaddexp2, TP_OP_LOGADDEXP2, logaddexp2_f, NULL, EW_NO_HALF)
BINARY_OP_REF(heaviside, TP_OP_HEAVISIDE, heaviside_f, heaviside_i, EW_SAME_DTYPE)
BINARY_OP_REF(fmax, TP_OP_FMAX, fmax_f, maximum_i, 0)
BINARY_OP_REF(fmin, TP_OP_FMIN, fmin_f, minimum_i, 0)
BINARY_OP_REF(gcd, TP_OP_GCD, NULL, gcd_i, EW_NO_BOOL)
BINARY_OP_REF(lcm, TP_OP_LCM, NULL, lcm_i, EW_NO_BOOL)
BINARY_OP_REF(nextafter, TP_OP_NEXTAFTER, nextafter_f, NULL, EW_NO_HALF)
BINARY_OP_REF(float_power, TP_OP_FLOAT_POWER, pow_f, NULL, EW_DOUBLE)
BINARY_OP_REF(ldexp, TP_OP_LDEXP, ldexp_f, NULL, 0)
BINARY_OP_REF(isclose, TP_OP_ISCLOSE, isclose_f, isclose_i, EW_BOOL_OUT)
BINARY_OP_REF(zeta, TP_OP_ZETA, zeta_f, NULL, EW_INT_TO_FLOAT | EW_NO_HALF)
BINARY_OP_REF(igamma, TP_OP_IGAMMA, igamma_f, NULL, 0)
BINARY_OP_REF(igammac, TP_OP_IGAMMAC, igammac_f, NULL, 0)
#define POLY_OP(name, id) BINARY_OP_REF(name, TP_OP_##id, name##_f, NULL, EW_INT_TO_FLOAT | EW_NO_HALF)
POLY_OP(chebyshev_polynomial_t, CHEBYSHEV_POLYNOMIAL_T)
POLY_OP(chebyshev_polynomial_u, CHEBYSHEV_POLYNOMIAL_U)
POLY_OP(chebyshev_polynomial_v, CHEBYSHEV_POLYNOMIAL_V)
POLY_OP(chebyshev_polynomial_w, CHEBYSHEV_POLYNOMIAL_W)
POLY_OP(shifted_chebyshev_polynomial_t, SHIFTED_CHEBYSHEV_POLYNOMIAL_T)
POLY_OP(shifted_chebyshev_polynomial_u, SHIFTED_CHEBYSHEV_POLYNOMIAL_U)
POLY_OP(shifted_chebyshev_polynomial_v, SHIFTED_CHEBYSHEV_POLYNOMIAL_V)
POLY_OP(shifted_chebyshev_polynomial_w, SHIFTED_CHEBYSHEV_POLYNOMIAL_W)
POLY_OP(hermite_polynomial_h, HERMITE_POLYNOMIAL_H)
POLY_OP(hermite_polynomial_he, HERMITE_POLYNOMIAL_HE)
POLY_OP(laguerre_polynomial_l, LAGUERRE_POLYNOMIAL_L)
POLY_OP(legendre_polynomial_p, LEGENDRE_POLYNOMIAL_P)

/* allclose: every element isclose, as a 0-d bool tensor (tensorplay and
 * PyTorch give a Python bool). */
static const binary_desc allclose_desc = {TP_OP_ALLCLOSE, isclose_f, isclose_i, EW_BOOL_OUT};

static tp_status allclose_infer(const tp_value *args, tp_value *out) {
    ew_plan pl;
    TP_TRY(plan_binary(&allclose_desc, args, &pl));
    return tp__out_dims(out, TP_BOOL, 0, NULL);
}

static tp_status allclose_kernel(const tp_value *args, tp_value *out) {
    ew_plan pl;
    TP_TRY(plan_binary(&allclose_desc, args, &pl));
    tp_tensor *tmp;
    TP_TRY(tp_tensor_empty(TP_BOOL, pl.ndim, pl.sizes, &tmp));
    tp_tensor *in[2] = {tp__arg_tensor(args, 0), tp__arg_tensor(args, 1)};
    tp_status st = run_elementwise(tmp, 2, in, &pl);
    if (st == TP_OK) {
        const uint8_t *v = tp_tensor_data(tmp);
        bool all = true;
        for (int64_t i = 0, n = tp_tensor_numel(tmp); i < n && all; i++) all = v[i] != 0;
        *(uint8_t *)tp_tensor_data(tp__out_at(out, 0)) = all;
    }
    tp_tensor_free(tmp);
    return st;
}
BINARY_OP(eq, TP_OP_EQ, eq_f, eq_i, EW_BOOL_OUT)
BINARY_OP(ne, TP_OP_NE, ne_f, ne_i, EW_BOOL_OUT)
BINARY_OP(lt, TP_OP_LT, lt_f, lt_i, EW_BOOL_OUT)
BINARY_OP(le, TP_OP_LE, le_f, le_i, EW_BOOL_OUT)
BINARY_OP(gt, TP_OP_GT, gt_f, gt_i, EW_BOOL_OUT)
BINARY_OP(ge, TP_OP_GE, ge_f, ge_i, EW_BOOL_OUT)
BINARY_OP(logical_and, TP_OP_LOGICAL_AND, logical_and_f, logical_and_i, EW_BOOL_OUT)
BINARY_OP(logical_or, TP_OP_LOGICAL_OR, logical_or_f, logical_or_i, EW_BOOL_OUT)
BINARY_OP(logical_xor, TP_OP_LOGICAL_XOR, logical_xor_f, logical_xor_i, EW_BOOL_OUT)
BINARY_OP(bitwise_and, TP_OP_BITWISE_AND, NULL, bitwise_and_i, 0)
BINARY_OP(bitwise_or, TP_OP_BITWISE_OR, NULL, bitwise_or_i, 0)
BINARY_OP(bitwise_xor, TP_OP_BITWISE_XOR, NULL, bitwise_xor_i, 0)

/* ---- where ------------------------------------------------------------- */

static tp_status plan_where(const tp_value *args, tp_dtype *ct, int *ndim, int64_t *sizes, tp_sdim *dims) {
    const tp_tensor *cond = tp__arg_tensor(args, 0);
    TP_CHECK(cond->dtype == TP_BOOL || cond->dtype == TP_UINT8, TP_ERR_TYPE,
             "expected condition to be a boolean tensor, but got a tensor with dtype %s",
             torch_type_name(cond->dtype));
    const tp_value *vals[3] = {&args[0], &args[1], &args[2]};
    *ct = tp__result_type(vals + 1, 2);
    for (int k = 1; k < 3; k++) {
        char elem[8];
        if (args[k].kind != TP_VAL_TENSOR) TP_TRY(tp__scalar_to_elem(&args[k], *ct, elem));
    }
    return broadcast_values(vals, 3, ndim, sizes, dims);
}

/* A where() operand as a tensor: tensors as they are, numbers as 0-d
 * tensors of ct converted with PyTorch's overflow check (where(c, u8, 300)
 * fails, unlike u8 + 300 which wraps). */
static tp_status where_operand(const tp_value *v, tp_dtype ct, tp_tensor **out) {
    if (v->kind == TP_VAL_TENSOR) {
        *out = tp_tensor_retain(v->u.tensor);
        return TP_OK;
    }
    tp_tensor *t;
    TP_TRY(tp_tensor_empty(ct, 0, NULL, &t));
    tp_status st = tp__scalar_to_elem(v, ct, tp__tensor_base(t));
    if (st != TP_OK) {
        tp_tensor_free(t);
        return st;
    }
    *out = t;
    return TP_OK;
}

static tp_status where_infer(const tp_value *args, tp_value *out) {
    tp_dtype ct = TP_FLOAT32;
    int ndim = 0;
    int64_t sizes[TP_MAX_DIMS];
    tp_sdim dims[TP_MAX_DIMS];
    TP_TRY(plan_where(args, &ct, &ndim, sizes, dims));
    return tp__out_dims(out, ct, ndim, dims);
}

static tp_status where_kernel(const tp_value *args, tp_value *out) {
    tp_dtype ct = TP_FLOAT32;
    int ndim = 0;
    int64_t sizes[TP_MAX_DIMS];
    TP_TRY(plan_where(args, &ct, &ndim, sizes, NULL));
    tp_tensor *result = tp__out_at(out, 0), *cond = tp__arg_tensor(args, 0), *x = NULL, *y = NULL;
    tp_status st = where_operand(&args[1], ct, &x);
    if (st == TP_OK) st = where_operand(&args[2], ct, &y);
    if (st == TP_OK && (!cond->storage || !x->storage || !y->storage) && tp_tensor_numel(result) > 0)
        st = tp_error(TP_ERR_INVALID_ARG, "input tensor has no data (meta tensor)");
    if (st == TP_OK) {
        tp_iter it;
        tp__iter_init(&it, result->ndim, result->sizes, 4, (const tp_tensor *[]){result, cond, x, y});
        tp_dtype cd = cond->dtype, xd = x->dtype, yd = y->dtype;
        bool is_float = tp_dtype_is_float(ct);
        while (tp__iter_next(&it)) {
            bool c = tp__load_i64(it.ptr[1], cd) != 0;
            const char *src = c ? it.ptr[2] : it.ptr[3];
            tp_dtype sd = c ? xd : yd;
            if (is_float) tp__store_f64(it.ptr[0], ct, load_float(src, sd, ct));
            else tp__store_i64(it.ptr[0], ct, load_int(src, sd, ct));
        }
    }
    tp_tensor_free(x);
    tp_tensor_free(y);
    return st;
}

/* ---- lerp -------------------------------------------------------------- */

static tp_status plan_lerp(const tp_value *args, ew_plan *pl) {
    memset(pl, 0, sizeof *pl);
    const tp_tensor *self = tp__arg_tensor(args, 0), *end = tp__arg_tensor(args, 1);
    const tp_value *weight = &args[2];
    TP_CHECK(end->dtype == self->dtype, TP_ERR_TYPE, "expected dtype %s for `end` but got dtype %s",
             tp_dtype_name(self->dtype), tp_dtype_name(end->dtype));
    if (weight->kind == TP_VAL_TENSOR)
        TP_CHECK(weight->u.tensor->dtype == self->dtype, TP_ERR_TYPE,
                 "expected dtype %s for `weight` but got dtype %s", tp_dtype_name(self->dtype),
                 tp_dtype_name(weight->u.tensor->dtype));
    if (!tp_dtype_is_float(self->dtype)) return not_implemented(self->dtype);
    const tp_value *vals[3] = {&args[0], &args[1], &args[2]};
    TP_TRY(broadcast_values(vals, 3, &pl->ndim, pl->sizes, pl->dims));
    pl->ct = pl->out_dtype = self->dtype;
    if (weight->kind == TP_VAL_TENSOR) {
        pl->ff = lerp_f;
    } else {
        pl->ff = lerp_scalar_f;
        TP_TRY(scalar_param(weight, self->dtype, "weight", &pl->params));
    }
    return TP_OK;
}

static tp_status lerp_infer(const tp_value *args, tp_value *out) {
    ew_plan pl;
    TP_TRY(plan_lerp(args, &pl));
    return tp__out_dims(out, pl.out_dtype, pl.ndim, pl.dims);
}

static tp_status lerp_kernel(const tp_value *args, tp_value *out) {
    ew_plan pl;
    TP_TRY(plan_lerp(args, &pl));
    tp_tensor *in[3] = {tp__arg_tensor(args, 0), tp__arg_tensor(args, 1), tp__arg_tensor(args, 2)};
    return run_elementwise(tp__out_at(out, 0), in[2] ? 3 : 2, in, &pl);
}

/* ---- addcmul / addcdiv: self + value * tensor1 (* or /) tensor2 -------- */

static tp_status plan_addc(const tp_value *args, bool is_div, ew_plan *pl) {
    memset(pl, 0, sizeof *pl);
    const tp_value *vals[3] = {&args[0], &args[1], &args[2]};
    const tp_tensor *t1 = tp__arg_tensor(args, 1), *t2 = tp__arg_tensor(args, 2);
    if (is_div)
        TP_CHECK(tp_dtype_is_float(t1->dtype) || tp_dtype_is_float(t2->dtype), TP_ERR_TYPE,
                 "Integer division with addcdiv is no longer supported (tensor1 is %s, tensor2 is %s); "
                 "use (input + value * tensor1 / tensor2) with a floating tensor",
                 tp_dtype_name(t1->dtype), tp_dtype_name(t2->dtype));
    tp_dtype ct = tp__result_type(vals, 3);
    if (ct == TP_BOOL) return not_implemented(ct);
    TP_TRY(broadcast_values(vals, 3, &pl->ndim, pl->sizes, pl->dims));
    TP_TRY(scalar_param(&args[3], ct, "value", &pl->params));
    pl->ct = pl->out_dtype = ct;
    pl->ff = is_div ? addcdiv_f : addcmul_f;
    pl->fi = is_div ? NULL : addcmul_i;
    return TP_OK;
}

static tp_status addc_kernel(const tp_value *args, tp_value *out, bool is_div) {
    ew_plan pl;
    TP_TRY(plan_addc(args, is_div, &pl));
    tp_tensor *in[3] = {tp__arg_tensor(args, 0), tp__arg_tensor(args, 1), tp__arg_tensor(args, 2)};
    return run_elementwise(tp__out_at(out, 0), 3, in, &pl);
}

static tp_status addc_infer(const tp_value *args, tp_value *out, bool is_div) {
    ew_plan pl;
    TP_TRY(plan_addc(args, is_div, &pl));
    return tp__out_dims(out, pl.out_dtype, pl.ndim, pl.dims);
}

static tp_status addcmul_infer(const tp_value *args, tp_value *out) { return addc_infer(args, out, false); }
static tp_status addcdiv_infer(const tp_value *args, tp_value *out) { return addc_infer(args, out, true); }
static tp_status addcmul_kernel(const tp_value *args, tp_value *out) { return addc_kernel(args, out, false); }
static tp_status addcdiv_kernel(const tp_value *args, tp_value *out) { return addc_kernel(args, out, true); }

/* ---- in-place ops ------------------------------------------------------
 * They write into args[0] and return it. Their shape rule returns a meta
 * tensor like self after the same checks. */

static tp_status inplace_result(const tp_tensor *self, tp_value *out) { return tp__out_like(out, self->dtype, self); }

/* self must have data and no two elements at one address (PyTorch refuses
 * to write into an expanded tensor). */
static tp_status check_writable(const tp_tensor *self) {
    TP_CHECK(self->storage != NULL, TP_ERR_INVALID_ARG, "self has no data (meta tensor)");
    for (int i = 0; i < self->ndim; i++)
        TP_CHECK(self->sizes[i] <= 1 || self->strides[i] != 0, TP_ERR_INVALID_ARG,
                 "unsupported operation: more than one element of the written-to tensor refers to a single "
                 "memory location. Please clone() the tensor before performing the operation.");
    return TP_OK;
}

/* The broadcast shape of self and the other operands must be self's. */
static tp_status check_out_shape(const tp_tensor *self, int ndim, const int64_t *sizes) {
    char b1[128], b2[128];
    TP_CHECK(same_sizes(self, ndim, sizes), TP_ERR_SHAPE, "output with shape %s doesn't match the broadcast shape %s",
             tp__shape_str(self->ndim, self->sizes, b1, sizeof b1), tp__shape_str(ndim, sizes, b2, sizeof b2));
    return TP_OK;
}

static tp_status plan_inplace_binary(const binary_desc *d, const tp_value *args, ew_plan *pl) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    TP_TRY(plan_binary(d, args, pl));
    TP_CHECK(can_cast(pl->ct, self->dtype), TP_ERR_TYPE, "result type %s can't be cast to the desired output type %s",
             torch_type_name(pl->ct), torch_type_name(self->dtype));
    return check_out_shape(self, pl->ndim, pl->sizes);
}

static bool same_view(const tp_tensor *a, const tp_tensor *b) {
    return a->storage == b->storage && a->offset == b->offset && a->dtype == b->dtype && same_sizes(a, b->ndim, b->sizes) &&
           (a->ndim == 0 || memcmp(a->strides, b->strides, (size_t)a->ndim * sizeof *a->strides) == 0);
}

static tp_status inplace_binary_infer(const binary_desc *d, const tp_value *args, tp_value *out) {
    ew_plan pl;
    TP_TRY(plan_inplace_binary(d, args, &pl));
    return inplace_result(tp__arg_tensor(args, 0), out);
}

static tp_status inplace_binary_kernel(const binary_desc *d, const tp_value *args, tp_value *out) {
    tp_tensor *self = tp__arg_tensor(args, 0);
    ew_plan pl;
    TP_TRY(check_writable(self));
    TP_TRY(plan_inplace_binary(d, args, &pl));
    tp_tensor *other;
    TP_TRY(tp__as_tensor(&args[1], pl.ct, &other));
    tp_status st = TP_OK;
    if (other->storage == self->storage && !same_view(self, other)) {
        /* other overlaps self differently: read it from a copy */
        tp_tensor *copy;
        st = tp_tensor_clone(other, &copy);
        tp_tensor_free(other);
        other = st == TP_OK ? copy : NULL;
    }
    if (st == TP_OK) st = run_elementwise(self, 2, (tp_tensor *[]){self, other}, &pl);
    tp_tensor_free(other);
    if (st == TP_OK) *out = tp_value_tensor(tp_tensor_retain(self));
    return st;
}

static tp_status add__infer(const tp_value *args, tp_value *out) { return inplace_binary_infer(&add_desc, args, out); }
static tp_status mul__infer(const tp_value *args, tp_value *out) { return inplace_binary_infer(&mul_desc, args, out); }
static tp_status add__kernel(const tp_value *args, tp_value *out) { return inplace_binary_kernel(&add_desc, args, out); }
static tp_status mul__kernel(const tp_value *args, tp_value *out) { return inplace_binary_kernel(&mul_desc, args, out); }

/* copy_: src broadcasts to self's shape; any dtype converts. */
static tp_status check_copy(const tp_tensor *self, const tp_tensor *src) {
    int ndim;
    int64_t sizes[TP_MAX_DIMS];
    tp_sdim a[TP_MAX_DIMS], b[TP_MAX_DIMS];
    TP_TRY(tp__dims_broadcast(tp__dims(self, a), a, tp__dims(src, b), b, &ndim, a));
    for (int i = 0; i < ndim; i++) sizes[i] = a[i].v;
    return check_out_shape(self, ndim, sizes);
}

static tp_status copy__infer(const tp_value *args, tp_value *out) {
    TP_TRY(check_copy(tp__arg_tensor(args, 0), tp__arg_tensor(args, 1)));
    return inplace_result(tp__arg_tensor(args, 0), out);
}

static tp_status copy__kernel(const tp_value *args, tp_value *out) {
    tp_tensor *self = tp__arg_tensor(args, 0), *src = tp__arg_tensor(args, 1);
    TP_TRY(check_writable(self));
    TP_TRY(check_copy(self, src));
    TP_CHECK(src->storage != NULL || tp_tensor_numel(src) == 0, TP_ERR_INVALID_ARG, "src has no data (meta tensor)");
    if (tp_tensor_numel(self) > 0) TP_TRY(tp_tensor_copy_(self, src));
    *out = tp_value_tensor(tp_tensor_retain(self));
    return TP_OK;
}

/* fill_: a number or a 0-d tensor, converted with PyTorch's overflow check. */
static tp_status check_fill_value(const tp_value *value) {
    if (value->kind == TP_VAL_TENSOR)
        TP_CHECK(value->u.tensor->ndim == 0, TP_ERR_SHAPE,
                 "only supports a 0-dimension value tensor, but got a tensor with %d dimensions",
                 value->u.tensor->ndim);
    return TP_OK;
}

static tp_status fill_elements(tp_tensor *self, const void *elem) {
    size_t es = tp_dtype_size(self->dtype);
    tp_iter it;
    tp__iter_init(&it, self->ndim, self->sizes, 1, (const tp_tensor *[]){self});
    while (tp__iter_next(&it)) memcpy(it.ptr[0], elem, es);
    return TP_OK;
}

static tp_status fill__infer(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    TP_TRY(check_fill_value(&args[1]));
    if (args[1].kind != TP_VAL_TENSOR) {
        char elem[8];
        TP_TRY(tp__scalar_to_elem(&args[1], self->dtype, elem));
    }
    return inplace_result(self, out);
}

static tp_status fill__kernel(const tp_value *args, tp_value *out) {
    tp_tensor *self = tp__arg_tensor(args, 0);
    TP_CHECK(self->storage != NULL, TP_ERR_INVALID_ARG, "self has no data (meta tensor)");
    TP_TRY(check_fill_value(&args[1]));
    char elem[8];
    TP_TRY(tp__scalar_to_elem(&args[1], self->dtype, elem));
    TP_TRY(fill_elements(self, elem));
    *out = tp_value_tensor(tp_tensor_retain(self));
    return TP_OK;
}

static tp_status zero__infer(const tp_value *args, tp_value *out) {
    return inplace_result(tp__arg_tensor(args, 0), out);
}

static tp_status zero__kernel(const tp_value *args, tp_value *out) {
    tp_tensor *self = tp__arg_tensor(args, 0);
    TP_CHECK(self->storage != NULL, TP_ERR_INVALID_ARG, "self has no data (meta tensor)");
    static const char zero[8] = {0}; /* all-zero bits are 0 in every dtype */
    TP_TRY(fill_elements(self, zero));
    *out = tp_value_tensor(tp_tensor_retain(self));
    return TP_OK;
}

/* ---- optimised variants ------------------------------------------------
 * add/sub/mul/div: direct loops when self and other are contiguous float32
 * tensors of the output's shape (or other is a number or a one-element
 * float32 tensor). Other two-operand ops: run_contiguous_f32 without dtype
 * dispatch. Anything else takes the reference path. Results are identical
 * to the reference (same double arithmetic, one rounding). */
static tp_status binary_fast(const binary_desc *d, const tp_value *args, tp_value *out) {
    const tp_tensor *a = tp__arg_tensor(args, 0), *bt = tp__arg_tensor(args, 1);
    tp_tensor *result = tp__out_at(out, 0);
    bool ok = a->dtype == TP_FLOAT32 && a->storage && result && result->dtype == TP_FLOAT32 &&
              tp_tensor_is_contiguous(a) && same_sizes(a, result->ndim, result->sizes);
    if (ok && bt) ok = bt->dtype == TP_FLOAT32 && bt->storage && tp_tensor_is_contiguous(bt) &&
                       (same_sizes(bt, result->ndim, result->sizes) || tp_tensor_numel(bt) == 1);
    if (ok && !bt) ok = args[1].kind == TP_VAL_FLOAT || args[1].kind == TP_VAL_INT;
    if (ok && (d->flags & EW_ALPHA)) ok = args[2].kind == TP_VAL_INT || args[2].kind == TP_VAL_FLOAT;
    if (ok && d->op == TP_OP_DIV) ok = tp__arg_is_none(args, 2);
    if (ok) ok = d->op == TP_OP_ADD || d->op == TP_OP_SUB || d->op == TP_OP_MUL || d->op == TP_OP_DIV;
    if (!ok) return run_binary(d, args, out, true);

    ew_plan pl; /* validates alpha as the reference does */
    TP_TRY(plan_binary(d, args, &pl));
    int64_t n = tp_tensor_numel(result);
    const float *x = (const float *)tp__tensor_base(a);
    float *y = (float *)tp__tensor_base(result);
    const float *b = bt ? (const float *)tp__tensor_base(bt) : NULL;
    float scalar = bt ? 0.0f : (float)tp_value_as_f64(&args[1]);
    int64_t bstep = bt && tp_tensor_numel(bt) == n ? 1 : 0;
    if (!b) b = &scalar;
    double alpha = pl.params.scale_f;
    switch (d->op) {
    case TP_OP_ADD:
        for (int64_t i = 0; i < n; i++) y[i] = (float)((double)x[i] + alpha * (double)b[i * bstep]);
        break;
    case TP_OP_SUB:
        for (int64_t i = 0; i < n; i++) y[i] = (float)((double)x[i] - alpha * (double)b[i * bstep]);
        break;
    case TP_OP_MUL:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * b[i * bstep];
        break;
    default:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] / b[i * bstep];
        break;
    }
    return TP_OK;
}

/* ---- registration ------------------------------------------------------ */

void tp__register_binary_ops(void) {
    const unsigned inplace = TP_OPF_INPLACE | TP_OPF_MUTATES | TP_OPF_EFFECTFUL;
    tp__register_op(TP_OP_ADD, "add(Tensor self, Tensor|Scalar other, *, Scalar alpha=1) -> Tensor", 0, add_infer,
                    add_kernel);
    tp__register_op(TP_OP_SUB, "sub(Tensor self, Tensor|Scalar other, *, Scalar alpha=1) -> Tensor", 0, sub_infer,
                    sub_kernel);
    tp__register_op(TP_OP_MUL, "mul(Tensor self, Tensor|Scalar other) -> Tensor", 0, mul_infer, mul_kernel);
    tp__register_op(TP_OP_DIV, "div(Tensor self, Tensor|Scalar other, *, str? rounding_mode=None) -> Tensor", 0,
                    div_infer, div_kernel);
    tp__register_op(TP_OP_REMAINDER, "remainder(Tensor self, Tensor|Scalar other) -> Tensor", 0, remainder_infer,
                    remainder_kernel);
    tp__register_op(TP_OP_FMOD, "fmod(Tensor self, Tensor|Scalar other) -> Tensor", 0, fmod_infer, fmod_kernel);
    tp__register_op(TP_OP_POW, "pow(Tensor self, Tensor|Scalar exponent) -> Tensor", 0, pow_infer, pow_kernel);
    tp__register_op(TP_OP_MAXIMUM, "maximum(Tensor self, Tensor other) -> Tensor", 0, maximum_infer, maximum_kernel);
    tp__register_op(TP_OP_MINIMUM, "minimum(Tensor self, Tensor other) -> Tensor", 0, minimum_infer, minimum_kernel);
    tp__register_op(TP_OP_ATAN2, "atan2(Tensor self, Tensor other) -> Tensor", 0, atan2_infer, atan2_kernel);
    tp__register_op(TP_OP_HYPOT, "hypot(Tensor self, Tensor other) -> Tensor", 0, hypot_infer, hypot_kernel);
    tp__register_op(TP_OP_COPYSIGN, "copysign(Tensor self, Tensor|Scalar other) -> Tensor", 0, copysign_infer,
                    copysign_kernel);
    tp__register_op(TP_OP_BITWISE_LEFT_SHIFT, "bitwise_left_shift(Tensor self, Tensor|Scalar other) -> Tensor", 0,
                    bitwise_left_shift_infer, bitwise_left_shift_kernel);
    tp__register_op(TP_OP_BITWISE_RIGHT_SHIFT, "bitwise_right_shift(Tensor self, Tensor|Scalar other) -> Tensor", 0,
                    bitwise_right_shift_infer, bitwise_right_shift_kernel);
    tp__register_op(TP_OP_XLOGY, "xlogy(Tensor self, Tensor|Scalar other) -> Tensor", 0, xlogy_infer, xlogy_kernel);
    tp__register_op(TP_OP_XLOG1PY, "xlog1py(Tensor self, Tensor|Scalar other) -> Tensor", 0, xlog1py_infer,
                    xlog1py_kernel);
    tp__register_op(TP_OP_LOGADDEXP, "logaddexp(Tensor self, Tensor other) -> Tensor", 0, logaddexp_infer,
                    logaddexp_kernel);
    tp__register_op(TP_OP_LOGADDEXP2, "logaddexp2(Tensor self, Tensor other) -> Tensor", 0, logaddexp2_infer,
                    logaddexp2_kernel);
    tp__register_op(TP_OP_HEAVISIDE, "heaviside(Tensor self, Tensor values) -> Tensor", 0, heaviside_infer,
                    heaviside_kernel);
    tp__register_op(TP_OP_FMAX, "fmax(Tensor self, Tensor other) -> Tensor", 0, fmax_infer, fmax_kernel);
    tp__register_op(TP_OP_FMIN, "fmin(Tensor self, Tensor other) -> Tensor", 0, fmin_infer, fmin_kernel);
    tp__register_op(TP_OP_GCD, "gcd(Tensor self, Tensor other) -> Tensor", 0, gcd_infer, gcd_kernel);
    tp__register_op(TP_OP_LCM, "lcm(Tensor self, Tensor other) -> Tensor", 0, lcm_infer, lcm_kernel);
    tp__register_op(TP_OP_NEXTAFTER, "nextafter(Tensor self, Tensor other) -> Tensor", 0, nextafter_infer,
                    nextafter_kernel);
    tp__register_op(TP_OP_FLOAT_POWER, "float_power(Tensor self, Tensor|Scalar exponent) -> Tensor", 0,
                    float_power_infer, float_power_kernel);
    tp__register_op(TP_OP_LDEXP, "ldexp(Tensor self, Tensor other) -> Tensor", 0, ldexp_infer, ldexp_kernel);
    tp__register_op(TP_OP_ISCLOSE,
                    "isclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False) -> "
                    "Tensor",
                    0, isclose_infer, isclose_kernel);
    tp__register_op(TP_OP_ALLCLOSE,
                    "allclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False) -> "
                    "Tensor",
                    0, allclose_infer, allclose_kernel);
    tp__register_op(TP_OP_EQ, "eq(Tensor self, Tensor|Scalar other) -> Tensor", 0, eq_infer, eq_kernel);
    tp__register_op(TP_OP_NE, "ne(Tensor self, Tensor|Scalar other) -> Tensor", 0, ne_infer, ne_kernel);
    tp__register_op(TP_OP_LT, "lt(Tensor self, Tensor|Scalar other) -> Tensor", 0, lt_infer, lt_kernel);
    tp__register_op(TP_OP_LE, "le(Tensor self, Tensor|Scalar other) -> Tensor", 0, le_infer, le_kernel);
    tp__register_op(TP_OP_GT, "gt(Tensor self, Tensor|Scalar other) -> Tensor", 0, gt_infer, gt_kernel);
    tp__register_op(TP_OP_GE, "ge(Tensor self, Tensor|Scalar other) -> Tensor", 0, ge_infer, ge_kernel);
    tp__register_op(TP_OP_LOGICAL_AND, "logical_and(Tensor self, Tensor other) -> Tensor", 0, logical_and_infer,
                    logical_and_kernel);
    tp__register_op(TP_OP_LOGICAL_OR, "logical_or(Tensor self, Tensor other) -> Tensor", 0, logical_or_infer,
                    logical_or_kernel);
    tp__register_op(TP_OP_LOGICAL_XOR, "logical_xor(Tensor self, Tensor other) -> Tensor", 0, logical_xor_infer,
                    logical_xor_kernel);
    tp__register_op(TP_OP_BITWISE_AND, "bitwise_and(Tensor self, Tensor|Scalar other) -> Tensor", 0,
                    bitwise_and_infer, bitwise_and_kernel);
    tp__register_op(TP_OP_BITWISE_OR, "bitwise_or(Tensor self, Tensor|Scalar other) -> Tensor", 0, bitwise_or_infer,
                    bitwise_or_kernel);
    tp__register_op(TP_OP_BITWISE_XOR, "bitwise_xor(Tensor self, Tensor|Scalar other) -> Tensor", 0,
                    bitwise_xor_infer, bitwise_xor_kernel);
    tp__register_op(TP_OP_WHERE, "where(Tensor condition, Tensor|Scalar self, Tensor|Scalar other) -> Tensor", 0,
                    where_infer, where_kernel);
    tp__register_op(TP_OP_LERP, "lerp(Tensor self, Tensor end, Tensor|Scalar weight) -> Tensor", 0, lerp_infer,
                    lerp_kernel);
    tp__register_op(TP_OP_ADDCMUL, "addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
                    0, addcmul_infer, addcmul_kernel);
    tp__register_op(TP_OP_ADDCDIV, "addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
                    0, addcdiv_infer, addcdiv_kernel);
    tp__register_op(TP_OP_ADD_, "add_(Tensor self, Tensor|Scalar other, *, Scalar alpha=1) -> Tensor", inplace,
                    add__infer, add__kernel);
    tp__register_op(TP_OP_MUL_, "mul_(Tensor self, Tensor|Scalar other) -> Tensor", inplace, mul__infer, mul__kernel);
    tp__register_op(TP_OP_COPY_, "copy_(Tensor self, Tensor src, bool non_blocking=False) -> Tensor", inplace,
                    copy__infer, copy__kernel);
    tp__register_op(TP_OP_FILL_, "fill_(Tensor self, Tensor|Scalar value) -> Tensor", inplace, fill__infer,
                    fill__kernel);
    tp__register_op(TP_OP_ZERO_, "zero_(Tensor self) -> Tensor", inplace, zero__infer, zero__kernel);

    tp__register_fast_kernel(TP_OP_ADD, add_fast);
    tp__register_fast_kernel(TP_OP_SUB, sub_fast);
    tp__register_fast_kernel(TP_OP_MUL, mul_fast);
    tp__register_fast_kernel(TP_OP_DIV, div_fast);
    tp__register_fast_kernel(TP_OP_REMAINDER, remainder_fast);
    tp__register_fast_kernel(TP_OP_FMOD, fmod_fast);
    tp__register_fast_kernel(TP_OP_POW, pow_fast);
    tp__register_fast_kernel(TP_OP_MAXIMUM, maximum_fast);
    tp__register_fast_kernel(TP_OP_MINIMUM, minimum_fast);
    tp__register_fast_kernel(TP_OP_ATAN2, atan2_fast);
    tp__register_fast_kernel(TP_OP_EQ, eq_fast);
    tp__register_fast_kernel(TP_OP_NE, ne_fast);
    tp__register_fast_kernel(TP_OP_LT, lt_fast);
    tp__register_fast_kernel(TP_OP_LE, le_fast);
    tp__register_fast_kernel(TP_OP_GT, gt_fast);
    tp__register_fast_kernel(TP_OP_GE, ge_fast);
    tp__register_fast_kernel(TP_OP_LOGICAL_AND, logical_and_fast);
    tp__register_fast_kernel(TP_OP_LOGICAL_OR, logical_or_fast);
    tp__register_fast_kernel(TP_OP_LOGICAL_XOR, logical_xor_fast);
    tp__register_fast_kernel(TP_OP_BITWISE_AND, bitwise_and_fast); /* integer: always the reference path */
    tp__register_fast_kernel(TP_OP_BITWISE_OR, bitwise_or_fast);
    tp__register_fast_kernel(TP_OP_BITWISE_XOR, bitwise_xor_fast);
    /* torch.special.zeta and the regularised incomplete gammas (issue #13) */
    tp__register_op(TP_OP_ZETA, "zeta(Tensor self, Tensor|Scalar other) -> Tensor", 0, zeta_infer, zeta_kernel);
    tp__register_op(TP_OP_IGAMMA, "igamma(Tensor self, Tensor other) -> Tensor", 0, igamma_infer, igamma_kernel);
    tp__register_op(TP_OP_IGAMMAC, "igammac(Tensor self, Tensor other) -> Tensor", 0, igammac_infer, igammac_kernel);
    /* the orthogonal polynomials of torch.special */
#define REGISTER_POLY(name, id)                                                                                \
    tp__register_op(TP_OP_##id, #name "(Tensor x, Tensor|Scalar n) -> Tensor", 0, name##_infer, name##_kernel)
    REGISTER_POLY(chebyshev_polynomial_t, CHEBYSHEV_POLYNOMIAL_T);
    REGISTER_POLY(chebyshev_polynomial_u, CHEBYSHEV_POLYNOMIAL_U);
    REGISTER_POLY(chebyshev_polynomial_v, CHEBYSHEV_POLYNOMIAL_V);
    REGISTER_POLY(chebyshev_polynomial_w, CHEBYSHEV_POLYNOMIAL_W);
    REGISTER_POLY(shifted_chebyshev_polynomial_t, SHIFTED_CHEBYSHEV_POLYNOMIAL_T);
    REGISTER_POLY(shifted_chebyshev_polynomial_u, SHIFTED_CHEBYSHEV_POLYNOMIAL_U);
    REGISTER_POLY(shifted_chebyshev_polynomial_v, SHIFTED_CHEBYSHEV_POLYNOMIAL_V);
    REGISTER_POLY(shifted_chebyshev_polynomial_w, SHIFTED_CHEBYSHEV_POLYNOMIAL_W);
    REGISTER_POLY(hermite_polynomial_h, HERMITE_POLYNOMIAL_H);
    REGISTER_POLY(hermite_polynomial_he, HERMITE_POLYNOMIAL_HE);
    REGISTER_POLY(laguerre_polynomial_l, LAGUERRE_POLYNOMIAL_L);
    REGISTER_POLY(legendre_polynomial_p, LEGENDRE_POLYNOMIAL_P);
}
