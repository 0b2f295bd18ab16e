/*
 * random.c - random fills and samplers: schemas, shape rules and reference
 * kernels for uniform, normal_functional, normal, bernoulli, exponential,
 * cauchy, log_normal, geometric, random, poisson, binomial, multinomial,
 * rand_like, randn_like, randint_like, randint, randperm, rand, randn, the
 * native_*dropout forms (output and mask) and tensorplay's token sampler.
 *
 * The in-place Tensor methods (x.uniform_(a, b), x.normal_(), x.random_(),
 * ...) map onto the functional ops here, which return a new tensor shaped
 * like their input, followed by a copy into it (src/archive/op_map.c). All
 * ops are TP_OPF_RANDOM (passes neither fold nor merge them) and draw from
 * the generator of rng.h: each call gives fresh values with PyTorch's
 * distribution, not torch.manual_seed's or tensorplay's stream, so tests
 * check shapes, dtypes, supports and moments. Argument checks and messages
 * follow PyTorch 1.13 (the same rules tensorplay applies).
 */
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "kernel_util.h"
#include "rng.h"

#define FACTORY_KWARGS "Any layout=None, Any device=None, Any pin_memory=None"

static atomic_uint_fast64_t g_random_calls;

uint64_t tp__rng_seed(void) {
    uint64_t call = (uint64_t)atomic_fetch_add(&g_random_calls, 1);
    uint64_t state = 0x2545F4914F6CDD1DULL ^ call;
    return tp__rng_next(&state);
}

/* ---- samplers ------------------------------------------------------------ */

static double normal01(uint64_t *s) { /* Box-Muller, one value per pair */
    double u1 = tp__rng_uniform_open(s), u2 = tp__rng_uniform(s);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

/* Poisson(lambda): multiplication of uniforms for small lambda, else
 * Hormann's transformed rejection with squeeze (PTRS, 1993), as numpy and
 * PyTorch do. */
static double poisson_draw(uint64_t *s, double lambda) {
    if (!(lambda > 0.0)) return 0.0;
    if (lambda < 10.0) {
        double limit = exp(-lambda), prod = tp__rng_uniform_open(s);
        double k = 0.0;
        while (prod > limit) {
            prod *= tp__rng_uniform_open(s);
            k += 1.0;
        }
        return k;
    }
    double slam = sqrt(lambda), loglam = log(lambda);
    double b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b, invalpha = 1.1239 + 1.1328 / (b - 3.4);
    double vr = 0.9277 - 3.6224 / (b - 2.0);
    for (;;) {
        double u = tp__rng_uniform(s) - 0.5, v = tp__rng_uniform_open(s);
        double us = 0.5 - fabs(u);
        double k = floor((2.0 * a / us + b) * u + lambda + 0.43);
        if (us >= 0.07 && v <= vr) return k;
        if (k < 0.0 || (us < 0.013 && v > us)) continue;
        if (log(v) + log(invalpha) - log(a / (us * us) + b) <= -lambda + k * loglam - tp__lgamma(k + 1.0)) return k;
    }
}

/* ---- helpers ------------------------------------------------------------ */

static tp_status need_float(const tp_tensor *t, const char *what) {
    TP_CHECK(tp_dtype_is_float(t->dtype), TP_ERR_TYPE, "%s expects a floating point tensor, but got %s", what,
             tp_dtype_name(t->dtype));
    return TP_OK;
}

/* Fill y (fresh, contiguous) with draw(state, ctx) per element. */
typedef double (*draw_fn)(uint64_t *s, const double *c);

static void fill(tp_tensor *y, draw_fn draw, const double *c) {
    int64_t n = tp_tensor_numel(y);
    if (n == 0) return;
    char *base = tp__tensor_base(y);
    size_t es = tp_dtype_size(y->dtype);
    uint64_t s = tp__rng_seed();
    for (int64_t i = 0; i < n; i++) tp__store_f64(base + (size_t)i * es, y->dtype, draw(&s, c));
}

/* A result of x's shape with x's dtype, for the fills of floating tensors. */
static tp_status infer_float_like(const tp_value *args, tp_value *out, const char *what) {
    tp_tensor *x;
    TP_TRY(tp__need_tensor(args, 0, "self", &x));
    TP_TRY(need_float(x, what));
    return tp__out_like(out, x->dtype, x);
}

/* ---- uniform(self, from, to) --------------------------------------------- */

static tp_status uniform_infer(const tp_value *args, tp_value *out) {
    double from = tp__arg_f64(args, 1), to = tp__arg_f64(args, 2);
    TP_CHECK(from <= to, TP_ERR_INVALID_ARG, "uniform_ expects to return a [from, to) range, but found from=%g > to=%g",
             from, to);
    TP_CHECK(isfinite(to - from), TP_ERR_INVALID_ARG, "uniform_ expects to-from <= std::numeric_limits<>::max(), but "
             "found to=%g and from=%g", to, from);
    return infer_float_like(args, out, "uniform_");
}

static double draw_uniform(uint64_t *s, const double *c) { return c[0] + (c[1] - c[0]) * tp__rng_uniform(s); }

static tp_status uniform_kernel(const tp_value *args, tp_value *out) {
    double c[2] = {tp__arg_f64(args, 1), tp__arg_f64(args, 2)};
    fill(tp__out_at(out, 0), draw_uniform, c);
    return TP_OK;
}

/* ---- normal_functional(self, mean, std); log_normal(self, mean, std) ---- */

static tp_status normal_infer(const tp_value *args, tp_value *out) {
    double std = tp__arg_f64(args, 2);
    TP_CHECK(std >= 0.0, TP_ERR_INVALID_ARG, "normal expects std >= 0.0, but found std %g", std);
    return infer_float_like(args, out, "normal_");
}

static double draw_normal(uint64_t *s, const double *c) { return c[0] + c[1] * normal01(s); }
static double draw_log_normal(uint64_t *s, const double *c) { return exp(c[0] + c[1] * normal01(s)); }

static tp_status normal_kernel(const tp_value *args, tp_value *out) {
    double c[2] = {tp__arg_f64(args, 1), tp__arg_f64(args, 2)};
    fill(tp__out_at(out, 0), draw_normal, c);
    return TP_OK;
}

static tp_status log_normal_infer(const tp_value *args, tp_value *out) {
    double std = tp__arg_f64(args, 2);
    TP_CHECK(std > 0.0, TP_ERR_INVALID_ARG, "log_normal_ expects std > 0.0, but found std=%g", std);
    return infer_float_like(args, out, "log_normal_");
}

static tp_status log_normal_kernel(const tp_value *args, tp_value *out) {
    double c[2] = {tp__arg_f64(args, 1), tp__arg_f64(args, 2)};
    fill(tp__out_at(out, 0), draw_log_normal, c);
    return TP_OK;
}

/* ---- exponential(self, lambd); cauchy(self, median, sigma) -------------- */

static tp_status exponential_infer(const tp_value *args, tp_value *out) {
    double l = tp__arg_f64(args, 1);
    TP_CHECK(l > 0.0, TP_ERR_INVALID_ARG, "exponential_ expects lambda > 0.0, but found lambda=%g", l);
    return infer_float_like(args, out, "exponential_");
}

static double draw_exponential(uint64_t *s, const double *c) { return -log(tp__rng_uniform_open(s)) / c[0]; }

static tp_status exponential_kernel(const tp_value *args, tp_value *out) {
    double c[1] = {tp__arg_f64(args, 1)};
    fill(tp__out_at(out, 0), draw_exponential, c);
    return TP_OK;
}

static tp_status cauchy_infer(const tp_value *args, tp_value *out) {
    double sigma = tp__arg_f64(args, 2);
    TP_CHECK(sigma > 0.0, TP_ERR_INVALID_ARG, "cauchy_ expects sigma > 0.0, but found sigma=%g", sigma);
    return infer_float_like(args, out, "cauchy_");
}

static double draw_cauchy(uint64_t *s, const double *c) {
    return c[0] + c[1] * tan(3.14159265358979323846 * (tp__rng_uniform_open(s) - 0.5));
}

static tp_status cauchy_kernel(const tp_value *args, tp_value *out) {
    double c[2] = {tp__arg_f64(args, 1), tp__arg_f64(args, 2)};
    fill(tp__out_at(out, 0), draw_cauchy, c);
    return TP_OK;
}

/* ---- geometric(self, p): trials until the first success, >= 1 ----------- */

static tp_status geometric_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x;
    TP_TRY(tp__need_tensor(args, 0, "self", &x));
    double p = tp__arg_f64(args, 1);
    TP_CHECK(p > 0.0 && p < 1.0, TP_ERR_INVALID_ARG, "geometric_ expects p to be in (0, 1), but got p=%g", p);
    TP_CHECK(x->dtype != TP_BOOL, TP_ERR_TYPE, "geometric_ is not implemented for Bool tensors");
    return tp__out_like(out, x->dtype, x);
}

static double draw_geometric(uint64_t *s, const double *c) {
    double k = ceil(log(tp__rng_uniform_open(s)) / c[0]);
    return k < 1.0 ? 1.0 : k;
}

static tp_status geometric_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *y = tp__out_at(out, 0);
    double c[1] = {log1p(-tp__arg_f64(args, 1))};
    /* an integer tensor saturates at its largest value */
    double top = tp_dtype_is_float(y->dtype) ? INFINITY
                 : y->dtype == TP_UINT8     ? 255.0
                 : tp_dtype_size(y->dtype) >= 8 ? 9.2233720368547748e18
                                               : ldexp(1.0, 8 * (int)tp_dtype_size(y->dtype) - 1) - 1.0;
    int64_t n = tp_tensor_numel(y);
    char *base = tp__tensor_base(y);
    size_t es = tp_dtype_size(y->dtype);
    uint64_t s = tp__rng_seed();
    for (int64_t i = 0; i < n; i++) {
        double k = draw_geometric(&s, c);
        tp__store_f64(base + (size_t)i * es, y->dtype, k > top ? top : k);
    }
    return TP_OK;
}

/* ---- random(self, from, to): integers in [from, to) ----------------------
 * to None: up to the largest integer the dtype holds exactly (2^mantissa
 * digits for floating dtypes, the maximum for integers), inclusive. */

static bool random_range(const tp_tensor *x, const tp_value *args, int64_t *lo, double *count, char *msg, size_t len) {
    int64_t from = tp__arg_int(args, 1);
    double top; /* largest value, inclusive */
    switch (x->dtype) {
    case TP_FLOAT32: top = 16777216.0; break;
    case TP_FLOAT64: top = 9007199254740992.0; break;
    case TP_FLOAT16: top = 2048.0; break;
    case TP_BFLOAT16: top = 256.0; break;
    case TP_BOOL: top = 1.0; break;
    case TP_UINT8: top = 255.0; break;
    case TP_INT8: top = 127.0; break;
    case TP_INT16: top = 32767.0; break;
    case TP_INT32: top = 2147483647.0; break;
    default: top = 9223372036854775807.0; break;
    }
    double hi;
    if (tp__arg_is_none(args, 2)) {
        hi = top + 1.0;
        if ((double)from >= hi) {
            snprintf(msg, len, "random_ expects 'from' casted to dtype to be less than or equal to 'to' casted to "
                     "dtype, but got from=%" PRId64 " > to=%.17g", from, top);
            return false;
        }
    } else {
        int64_t to = tp__arg_int(args, 2);
        if (from >= to) {
            snprintf(msg, len, "random_ expects 'from' to be less than 'to', but got from=%" PRId64 " >= to=%" PRId64,
                     from, to);
            return false;
        }
        hi = (double)to;
        if (hi - 1.0 > top || (double)from < -top - 1.0) {
            snprintf(msg, len, "random_ expects 'to' - 1 and 'from' to be within the range of %s, but got from=%" PRId64
                     " and to=%" PRId64, tp_dtype_name(x->dtype), from, to);
            return false;
        }
    }
    *lo = from;
    *count = hi - (double)from;
    return true;
}

static tp_status random_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x;
    TP_TRY(tp__need_tensor(args, 0, "self", &x));
    int64_t lo;
    double count;
    char msg[256];
    TP_CHECK(random_range(x, args, &lo, &count, msg, sizeof msg), TP_ERR_INVALID_ARG, "%s", msg);
    return tp__out_like(out, x->dtype, x);
}

static tp_status random_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *y = tp__out_at(out, 0);
    int64_t lo;
    double count;
    char msg[256];
    TP_CHECK(random_range(y, args, &lo, &count, msg, sizeof msg), TP_ERR_INVALID_ARG, "%s", msg);
    uint64_t range = count >= 18446744073709551615.0 ? 0 : (uint64_t)count; /* 0: every 64-bit value */
    int64_t n = tp_tensor_numel(y);
    char *base = tp__tensor_base(y);
    size_t es = tp_dtype_size(y->dtype);
    uint64_t s = tp__rng_seed();
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = tp__rng_next(&s);
        uint64_t k = range ? r % range : r;
        double v = (double)lo + (double)k;
        if (y->dtype == TP_INT64) {
            int64_t w = (int64_t)((uint64_t)lo + k);
            memcpy(base + (size_t)i * es, &w, 8);
        } else {
            tp__store_f64(base + (size_t)i * es, y->dtype, v);
        }
    }
    return TP_OK;
}

/* ---- bernoulli(self, p): p None (self holds the probabilities), a number
 * or a tensor broadcast to self's shape; result 0/1 in self's dtype ------- */

static tp_status bernoulli_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x;
    TP_TRY(tp__need_tensor(args, 0, "self", &x));
    const tp_value *p = &args[1];
    if (p->kind == TP_VAL_NONE) {
        TP_TRY(need_float(x, "bernoulli (probabilities in self)"));
    } else if (p->kind == TP_VAL_TENSOR) {
        const tp_tensor *pt = p->u.tensor;
        TP_TRY(need_float(pt, "bernoulli (probabilities p)"));
        TP_CHECK(pt->ndim <= x->ndim, TP_ERR_SHAPE, "bernoulli: p of %d dims cannot be broadcast to self of %d dims",
                 pt->ndim, x->ndim);
        for (int d = 0; d < pt->ndim; d++) {
            int64_t ps = pt->sizes[pt->ndim - 1 - d], xs = x->sizes[x->ndim - 1 - d];
            TP_CHECK(ps == 1 || ps == xs, TP_ERR_SHAPE,
                     "bernoulli: p's size %" PRId64 " at dim %d does not broadcast to self's size %" PRId64, ps,
                     pt->ndim - 1 - d, xs);
        }
    } else {
        TP_CHECK(tp_value_is_number(p), TP_ERR_TYPE, "bernoulli: p must be a number or a tensor, not %s",
                 tp_value_kind_name(p->kind));
        double q = tp_value_as_f64(p);
        TP_CHECK(q >= 0.0 && q <= 1.0, TP_ERR_INVALID_ARG, "bernoulli_ expects p to be in [0, 1], but got p=%g", q);
    }
    return tp__out_like(out, x->dtype, x);
}

static tp_status bernoulli_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *x = tp__arg_tensor(args, 0), *y = tp__out_at(out, 0);
    const tp_value *p = &args[1];
    const tp_tensor *pt = p->kind == TP_VAL_NONE ? x : p->kind == TP_VAL_TENSOR ? p->u.tensor : NULL;
    double q = pt ? 0.0 : tp_value_as_f64(p);
    int64_t ps[TP_MAX_DIMS] = {0}, ys[TP_MAX_DIMS];
    for (int d = 0; d < y->ndim; d++) ys[d] = y->strides[d];
    if (pt) tp__broadcast_strides(pt, pt->ndim, y->ndim, y->sizes, ps);
    tp_walk w;
    tp__walk_init(&w, y->ndim, y->sizes, 2, (const int64_t *[]){ps, ys});
    const char *pb = pt ? tp__tensor_base(pt) : NULL;
    char *yb = tp__tensor_base(y);
    size_t es = tp_dtype_size(y->dtype);
    uint64_t s = tp__rng_seed();
    while (tp__walk_next(&w)) {
        double prob = pt ? tp__load_f64(pb + w.off[0] * (int64_t)tp_dtype_size(pt->dtype), pt->dtype) : q;
        TP_CHECK(prob >= 0.0 && prob <= 1.0, TP_ERR_INVALID_ARG,
                 "bernoulli expects all probabilities to be in [0, 1], but got %g", prob);
        tp__store_f64(yb + w.off[1] * (int64_t)es, y->dtype, tp__rng_uniform(&s) < prob ? 1.0 : 0.0);
    }
    return TP_OK;
}

/* ---- poisson(self): a Poisson count per rate ----------------------------- */

static tp_status poisson_infer(const tp_value *args, tp_value *out) { return infer_float_like(args, out, "poisson"); }

static tp_status poisson_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *x = tp__arg_tensor(args, 0), *y = tp__out_at(out, 0);
    int64_t ys[TP_MAX_DIMS];
    for (int d = 0; d < y->ndim; d++) ys[d] = y->strides[d];
    tp_walk w;
    tp__walk_init(&w, y->ndim, y->sizes, 2, (const int64_t *[]){x->strides, ys});
    const char *xb = tp__tensor_base(x);
    char *yb = tp__tensor_base(y);
    size_t xs = tp_dtype_size(x->dtype), es = tp_dtype_size(y->dtype);
    uint64_t s = tp__rng_seed();
    while (tp__walk_next(&w)) {
        double lambda = tp__load_f64(xb + w.off[0] * (int64_t)xs, x->dtype);
        TP_CHECK(lambda >= 0.0 && lambda < 1e15, TP_ERR_INVALID_ARG,
                 "poisson expects rates in [0, 1e15), but got %g", lambda);
        tp__store_f64(yb + w.off[1] * (int64_t)es, y->dtype, poisson_draw(&s, lambda));
    }
    return TP_OK;
}

/* ---- binomial(count, prob): a Binomial(count, prob) draw per element ------
 * PyTorch's samplers: for count * min(p, 1 - p) < 10 counting geometric
 * waiting times (inversion), else Hormann's BTRS (transformed rejection
 * with squeeze), p > 0.5 drawn as count - Binomial(count, 1 - p). */
static double stirling_tail(double k) {
    static const double table[10] = {0.08106146679532726, 0.04134069595540929, 0.02767792568499834,
                                     0.02079067210376509, 0.01664469118982119, 0.01387612882307075,
                                     0.01189670994589177, 0.01041126526197209, 0.009255462182712733,
                                     0.008330563433362871};
    if (k <= 9) return table[(int)k];
    double kp1sq = (k + 1) * (k + 1);
    return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1);
}

static double binomial_draw(uint64_t *s, double n, double p) {
    if (n <= 0.0 || p <= 0.0) return 0.0;
    if (p >= 1.0) return n;
    if (p > 0.5) return n - binomial_draw(s, n, 1.0 - p);
    if (n * p < 10.0) { /* inversion: geometric waiting times until they pass n */
        double logq = log1p(-p), sum = 0.0, k = 0.0;
        for (;;) {
            sum += ceil(log(tp__rng_uniform_open(s)) / logq);
            if (sum > n) return k;
            k += 1.0;
        }
    }
    double m = floor((n + 1) * p), r = p / (1 - p), npq = n * p * (1 - p), sq = sqrt(npq);
    double b = 1.15 + 2.53 * sq, a = -0.0873 + 0.0248 * b + 0.01 * p, c = n * p + 0.5;
    double alpha = (2.83 + 5.1 / b) * sq, vr = 0.92 - 4.2 / b;
    for (;;) {
        double u = tp__rng_uniform(s) - 0.5, v = tp__rng_uniform_open(s), us = 0.5 - fabs(u);
        double k = floor((2 * a / us + b) * u + c);
        if (k < 0 || k > n) continue;
        if (us >= 0.07 && v <= vr) return k;
        v = log(v * alpha / (a / (us * us) + b));
        double bound = (m + 0.5) * log((m + 1) / (r * (n - m + 1))) + (n + 1) * log((n - m + 1) / (n - k + 1)) +
                       (k + 0.5) * log(r * (n - k + 1) / (k + 1)) + stirling_tail(m) + stirling_tail(n - m) -
                       stirling_tail(k) - stirling_tail(n - k);
        if (v <= bound) return k;
    }
}

static tp_status binomial_infer(const tp_value *args, tp_value *out) {
    tp_tensor *n, *p;
    TP_TRY(tp__need_tensor(args, 0, "count", &n));
    TP_TRY(tp__need_tensor(args, 1, "prob", &p));
    TP_TRY(need_float(n, "binomial"));
    TP_CHECK(n->dtype == p->dtype, TP_ERR_TYPE, "binomial: expected count and prob to have the same dtype, got %s and %s",
             tp_dtype_name(n->dtype), tp_dtype_name(p->dtype));
    tp_sdim a[TP_MAX_DIMS], b[TP_MAX_DIMS];
    int nd;
    tp__dims(n, a);
    tp__dims(p, b);
    TP_TRY(tp__dims_broadcast(n->ndim, a, p->ndim, b, &nd, a));
    return tp__out_dims(out, n->dtype, nd, a);
}

static tp_status binomial_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *n = tp__arg_tensor(args, 0), *p = tp__arg_tensor(args, 1), *y = tp__out_at(out, 0);
    tp_iter it;
    tp__iter_init(&it, y->ndim, y->sizes, 3, (const tp_tensor *[]){y, n, p});
    uint64_t s = tp__rng_seed();
    while (tp__iter_next(&it)) {
        double cnt = tp__load_f64(it.ptr[1], n->dtype), pr = tp__load_f64(it.ptr[2], p->dtype);
        TP_CHECK(cnt >= 0.0 && cnt < 1e15 && floor(cnt) == cnt, TP_ERR_INVALID_ARG,
                 "binomial: count must be a non-negative whole number below 1e15, got %g", cnt);
        TP_CHECK(pr >= 0.0 && pr <= 1.0, TP_ERR_INVALID_ARG, "binomial: prob must be in [0, 1], got %g", pr);
        tp__store_f64(it.ptr[0], y->dtype, binomial_draw(&s, cnt, pr));
    }
    return TP_OK;
}

/* ---- native_dropout / native_feature_dropout / native_alpha_dropout ------
 * (input, p, train=None) -> (output, mask): a mask kept with probability
 * 1 - p, per element (native_dropout: a bool mask; native_alpha_dropout: a
 * float mask) or per feature map (native_feature_dropout: a float mask of
 * shape (N, C, 1, ...)); output = input * mask / (1 - p), for the alpha form
 * a * (input * mask + alpha' (1 - mask)) + b with SELU's alpha' = -1.7580993...,
 * a = ((1 - p)(1 + p alpha'^2))^-1/2, b = -a alpha' p, so the mean and variance
 * of a standard normal input are kept. train=False gives the input and an
 * all-ones mask; p = 1 gives input * 0 (NaN stays NaN) and an all-zeros mask. tp__dropout_draw also serves alpha_dropout, feature_dropout
 * and feature_alpha_dropout in training mode (nn.c). */
static tp_status native_dropout_shapes(const tp_value *args, tp_dropout_kind kind, tp_value *out) {
    tp_tensor *x;
    TP_TRY(tp__need_tensor(args, 0, "input", &x));
    double p = tp__arg_f64(args, 1);
    TP_CHECK(p >= 0.0 && p <= 1.0, TP_ERR_INVALID_ARG, "dropout probability has to be between 0 and 1, but got %g", p);
    TP_TRY(need_float(x, "native_dropout"));
    TP_CHECK(kind != TP_DROPOUT_FEATURE || x->ndim >= 2, TP_ERR_SHAPE,
             "Feature dropout requires at least 2 dimensions in the input, got %d", x->ndim);
    TP_TRY(tp__out_tuple(out, 2));
    TP_TRY(tp__out_like(tp_value_at(out, 0), x->dtype, x));
    if (kind != TP_DROPOUT_FEATURE)
        return tp__out_like(tp_value_at(out, 1), kind == TP_DROPOUT_PLAIN ? TP_BOOL : x->dtype, x);
    tp_sdim d[TP_MAX_DIMS];
    tp__dims(x, d);
    for (int i = 2; i < x->ndim; i++) d[i] = tp__dimk(1);
    return tp__out_dims(tp_value_at(out, 1), x->dtype, x->ndim, d);
}

tp_status tp__dropout_draw(tp_dropout_kind kind, const tp_tensor *x, double p, bool train, tp_tensor *y,
                           tp_tensor *mask) {
    bool feature = kind == TP_DROPOUT_FEATURE || kind == TP_DROPOUT_FEATURE_ALPHA;
    bool alpha = kind == TP_DROPOUT_ALPHA || kind == TP_DROPOUT_FEATURE_ALPHA;
    int64_t n_masks = 1;
    for (int d = 0; d < (feature ? 2 : x->ndim) && d < x->ndim; d++) n_masks *= x->sizes[d];
    uint8_t *keep = tp_malloc((size_t)(n_masks > 0 ? n_masks : 1));
    TP_CHECK(keep, TP_ERR_NOMEM, "out of memory (%" PRId64 " dropout masks)", n_masks);
    uint64_t s = tp__rng_seed();
    for (int64_t i = 0; i < n_masks; i++) keep[i] = !train || p == 0.0 || (p < 1.0 && tp__rng_uniform(&s) >= p);
    const double ap = -1.7580993408473766;
    double a = 1.0, b = 0.0, scale = 1.0;
    bool drop_all = train && p == 1.0; /* PyTorch: input * 0, for every form */
    if (alpha && train && p > 0.0 && !drop_all) {
        a = 1.0 / sqrt((1.0 - p) * (1.0 + p * ap * ap));
        b = -a * ap * p;
    } else if (train && p > 0.0 && p < 1.0) {
        scale = 1.0 / (1.0 - p);
    }
    tp_iter it;
    tp__iter_init(&it, x->ndim, x->sizes, 2, (const tp_tensor *[]){y, x});
    int64_t inner = 1, flat = 0;
    if (feature)
        for (int d = 2; d < x->ndim; d++) inner *= x->sizes[d];
    while (tp__iter_next(&it)) {
        bool k = keep[feature ? flat / inner : flat];
        double v = tp__load_f64(it.ptr[1], x->dtype), r;
        if (drop_all) r = v * 0.0;
        else if (alpha && train && p > 0.0) r = a * (k ? v : ap) + b;
        else r = k ? v * scale : 0.0;
        tp__store_f64(it.ptr[0], y->dtype, r);
        flat++;
    }
    if (mask) {
        tp_iter mi;
        tp__iter_init(&mi, mask->ndim, mask->sizes, 1, (const tp_tensor *[]){mask});
        for (int64_t i = 0; tp__iter_next(&mi); i++) tp__store_f64(mi.ptr[0], mask->dtype, keep[i] ? 1.0 : 0.0);
    }
    tp_free(keep);
    return TP_OK;
}

static tp_status native_dropout_run(const tp_value *args, tp_value *out, tp_dropout_kind kind) {
    tp_value shapes = tp_value_none();
    TP_TRY(native_dropout_shapes(args, kind, &shapes));
    tp_value_clear(&shapes);
    bool train = tp__arg_is_none(args, 2) || tp__arg_bool(args, 2);
    return tp__dropout_draw(kind, tp__arg_tensor(args, 0), tp__arg_f64(args, 1), train, tp__out_at(out, 0),
                            tp__out_at(out, 1));
}

static tp_status native_dropout_infer(const tp_value *args, tp_value *out) {
    return native_dropout_shapes(args, TP_DROPOUT_PLAIN, out);
}
static tp_status native_dropout_kernel(const tp_value *args, tp_value *out) {
    return native_dropout_run(args, out, TP_DROPOUT_PLAIN);
}
static tp_status native_feature_dropout_infer(const tp_value *args, tp_value *out) {
    return native_dropout_shapes(args, TP_DROPOUT_FEATURE, out);
}
static tp_status native_feature_dropout_kernel(const tp_value *args, tp_value *out) {
    return native_dropout_run(args, out, TP_DROPOUT_FEATURE);
}
static tp_status native_alpha_dropout_infer(const tp_value *args, tp_value *out) {
    return native_dropout_shapes(args, TP_DROPOUT_ALPHA, out);
}
static tp_status native_alpha_dropout_kernel(const tp_value *args, tp_value *out) {
    return native_dropout_run(args, out, TP_DROPOUT_ALPHA);
}

/* ---- sample(logits, temperature, top_k, top_p, impl): a token per row ----
 * tensorplay's sampler for language models: logits [batch, vocab]; per row
 * softmax(logits / temperature) restricted to the top_k most likely tokens
 * (0: all) and then to the smallest set of most likely tokens whose
 * probability reaches top_p (at least one), renormalised, one draw; int64
 * [batch]. impl picks tensorplay's backend and does not change the law. */
typedef struct {
    double p;
    int64_t i;
} tok;

static int tok_cmp(const void *a, const void *b) {
    const tok *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static tp_status sample_infer(const tp_value *args, tp_value *out) {
    tp_tensor *l;
    TP_TRY(tp__need_tensor(args, 0, "logits", &l));
    TP_TRY(need_float(l, "sample"));
    TP_CHECK(l->ndim == 2, TP_ERR_SHAPE, "sample: logits must be 2D [batch, vocab]");
    TP_CHECK(l->sizes[1] > 0, TP_ERR_SHAPE, "sample: the vocabulary is empty");
    TP_CHECK(tp__arg_f64(args, 1) > 0.0, TP_ERR_INVALID_ARG, "sample: temperature must be > 0");
    TP_CHECK(tp__arg_int(args, 2) >= 0, TP_ERR_INVALID_ARG, "sample: top_k must be >= 0");
    double tp_ = tp__arg_f64(args, 3);
    TP_CHECK(tp_ > 0.0 && tp_ <= 1.0, TP_ERR_INVALID_ARG, "sample: top_p must be in (0, 1]");
    return tp__out_dims(out, TP_INT64, 1, (tp_sdim[]){tp__dim(l, 0)});
}

static tp_status sample_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *l = tp__arg_tensor(args, 0), *y = tp__out_at(out, 0);
    double temp = tp__arg_f64(args, 1), top_p = tp__arg_f64(args, 3);
    int64_t B = l->sizes[0], V = l->sizes[1], top_k = tp__arg_int(args, 2);
    if (top_k == 0 || top_k > V) top_k = V;
    tok *t = tp_malloc((size_t)V * sizeof *t);
    TP_CHECK(t, TP_ERR_NOMEM, "out of memory (a vocabulary of %" PRId64 ")", V);
    const char *lb = tp__tensor_base(l);
    size_t es = tp_dtype_size(l->dtype);
    uint64_t s = tp__rng_seed();
    tp_status st = TP_OK;
    for (int64_t b = 0; b < B && st == TP_OK; b++) {
        double mx = -INFINITY;
        for (int64_t v = 0; v < V; v++) {
            t[v].p = tp__load_f64(lb + (b * l->strides[0] + v * l->strides[1]) * (int64_t)es, l->dtype) / temp;
            t[v].i = v;
            if (isnan(t[v].p)) st = tp_error(TP_ERR_INVALID_ARG, "sample: logits contain NaN");
            mx = t[v].p > mx ? t[v].p : mx;
        }
        if (st != TP_OK) break;
        if (mx == -INFINITY) {
            st = tp_error(TP_ERR_INVALID_ARG, "sample: every logit of row %" PRId64 " is -inf", b);
            break;
        }
        double sum = 0.0;
        for (int64_t v = 0; v < V; v++) sum += t[v].p = exp(t[v].p - mx);
        for (int64_t v = 0; v < V; v++) t[v].p /= sum;
        qsort(t, (size_t)V, sizeof *t, tok_cmp);
        int64_t keep = 0;
        double cum = 0.0;
        while (keep < top_k && (keep == 0 || cum < top_p)) cum += t[keep++].p;
        double u = tp__rng_uniform(&s) * cum, acc = 0.0;
        int64_t pick = keep - 1;
        for (int64_t k = 0; k < keep; k++) {
            acc += t[k].p;
            if (u < acc) {
                pick = k;
                break;
            }
        }
        tp__store_f64(tp__tensor_base(y) + b * y->strides[0] * (int64_t)tp_dtype_size(TP_INT64), TP_INT64,
                      (double)t[pick].i);
    }
    tp_free(t);
    return st;
}

/* ---- multinomial(self, num_samples, replacement) ------------------------- */

static tp_status multinomial_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x;
    TP_TRY(tp__need_tensor(args, 0, "self", &x));
    TP_TRY(need_float(x, "multinomial"));
    TP_CHECK(x->ndim == 1 || x->ndim == 2, TP_ERR_SHAPE, "prob_dist must be 1 or 2 dim, but got %d dims", x->ndim);
    int64_t k = tp__arg_int(args, 1), cats = x->sizes[x->ndim - 1];
    TP_CHECK(k > 0, TP_ERR_INVALID_ARG, "cannot sample n_sample <= 0 samples");
    TP_CHECK(cats > 0, TP_ERR_SHAPE, "multinomial: the number of categories cannot be zero");
    TP_CHECK(tp__arg_bool(args, 2) || k <= cats, TP_ERR_INVALID_ARG,
             "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
    TP_CHECK(k <= ((int64_t)1 << 40), TP_ERR_INVALID_ARG, "multinomial: %" PRId64 " samples exceed the limit", k);
    tp_sdim d[2];
    int nd = 0;
    if (x->ndim == 2) d[nd++] = tp__dim(x, 0);
    d[nd++] = tp__dimk(k);
    return tp__out_dims(out, TP_INT64, nd, d);
}

static tp_status multinomial_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *x = tp__arg_tensor(args, 0), *y = tp__out_at(out, 0);
    int64_t k = tp__arg_int(args, 1), cats = x->sizes[x->ndim - 1], rows = x->ndim == 2 ? x->sizes[0] : 1;
    bool replacement = tp__arg_bool(args, 2);
    int64_t rs = x->ndim == 2 ? x->strides[0] : 0, cs = x->strides[x->ndim - 1];
    double *w = tp_malloc((size_t)cats * sizeof(double));
    TP_CHECK(w != NULL, TP_ERR_NOMEM, "out of memory for multinomial weights");
    const char *xb = tp__tensor_base(x);
    int64_t *yb = (int64_t *)tp__tensor_base(y);
    size_t xs = tp_dtype_size(x->dtype);
    uint64_t s = tp__rng_seed();
    tp_status st = TP_OK;
    for (int64_t r = 0; r < rows && st == TP_OK; r++) {
        double total = 0.0;
        int64_t positive = 0;
        for (int64_t c = 0; c < cats; c++) {
            double v = tp__load_f64(xb + (r * rs + c * cs) * (int64_t)xs, x->dtype);
            if (!(v >= 0.0) || isinf(v)) {
                st = tp_error(TP_ERR_INVALID_ARG, "probability tensor contains either inf, nan or element < 0");
                break;
            }
            w[c] = v;
            total += v;
            positive += v > 0.0;
        }
        if (st != TP_OK) break;
        if (!(total > 0.0)) {
            st = tp_error(TP_ERR_INVALID_ARG, "invalid multinomial distribution (sum of probabilities <= 0)");
            break;
        }
        if (!replacement && k > positive) {
            st = tp_error(TP_ERR_INVALID_ARG,
                          "invalid multinomial distribution (with replacement=False, not enough non-negative category "
                          "to sample)");
            break;
        }
        for (int64_t i = 0; i < k; i++) {
            double u = tp__rng_uniform(&s) * total, acc = 0.0;
            int64_t pick = -1;
            for (int64_t c = 0; c < cats; c++) {
                if (w[c] <= 0.0) continue;
                acc += w[c];
                pick = c;
                if (u < acc) break;
            }
            yb[r * k + i] = pick;
            if (!replacement) { /* drawn without replacement: the category leaves */
                total -= w[pick];
                w[pick] = 0.0;
                if (total <= 0.0) { /* rounding: recompute */
                    total = 0.0;
                    for (int64_t c = 0; c < cats; c++) total += w[c];
                }
            }
        }
    }
    tp_free(w);
    return st;
}

/* ---- rand_like / randn_like / randint_like -------------------------------- */

static tp_status rand_like_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x;
    TP_TRY(tp__need_tensor(args, 0, "self", &x));
    tp_dtype dt = args[1].kind == TP_VAL_DTYPE ? args[1].u.dtype : x->dtype;
    TP_CHECK(tp_dtype_is_float(dt), TP_ERR_TYPE, "\"check_uniform_bounds\" not implemented for '%s'", tp_dtype_name(dt));
    return tp__out_like(out, dt, x);
}

static tp_status rand_like_kernel(const tp_value *args, tp_value *out) {
    double c[2] = {0.0, 1.0};
    TP_UNUSED(args);
    fill(tp__out_at(out, 0), draw_uniform, c);
    return TP_OK;
}

static tp_status randn_like_kernel(const tp_value *args, tp_value *out) {
    double c[2] = {0.0, 1.0};
    TP_UNUSED(args);
    fill(tp__out_at(out, 0), draw_normal, c);
    return TP_OK;
}

/* randint_like(self, low, high=None): [0, low) when high is None. */
static void randint_bounds(const tp_value *args, int lo_i, int64_t *lo, int64_t *hi) {
    if (tp__arg_is_none(args, lo_i + 1)) {
        *lo = 0;
        *hi = tp__arg_int(args, lo_i);
    } else {
        *lo = tp__arg_int(args, lo_i);
        *hi = tp__arg_int(args, lo_i + 1);
    }
}

static tp_status check_randint(int64_t lo, int64_t hi) {
    TP_CHECK(lo < hi, TP_ERR_INVALID_ARG, "random_ expects 'from' to be less than 'to', but got from=%" PRId64
             " >= to=%" PRId64, lo, hi);
    return TP_OK;
}

static tp_status randint_like_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x;
    TP_TRY(tp__need_tensor(args, 0, "self", &x));
    int64_t lo, hi;
    randint_bounds(args, 1, &lo, &hi);
    TP_TRY(check_randint(lo, hi));
    return tp__out_like(out, args[3].kind == TP_VAL_DTYPE ? args[3].u.dtype : x->dtype, x);
}

static void fill_ints(tp_tensor *y, int64_t lo, int64_t hi) {
    uint64_t range = (uint64_t)hi - (uint64_t)lo;
    int64_t n = tp_tensor_numel(y);
    char *base = tp__tensor_base(y);
    size_t es = tp_dtype_size(y->dtype);
    uint64_t s = tp__rng_seed();
    for (int64_t i = 0; i < n; i++) {
        int64_t v = (int64_t)((uint64_t)lo + tp__rng_next(&s) % range);
        if (y->dtype == TP_INT64) memcpy(base + (size_t)i * es, &v, 8);
        else tp__store_f64(base + (size_t)i * es, y->dtype, (double)v);
    }
}

static tp_status randint_like_kernel(const tp_value *args, tp_value *out) {
    int64_t lo, hi;
    randint_bounds(args, 1, &lo, &hi);
    fill_ints(tp__out_at(out, 0), lo, hi);
    return TP_OK;
}

/* randint(low, high, size, *, dtype=int64): a size that may be symbolic. */
static tp_status randint_infer(const tp_value *args, tp_value *out) {
    int64_t lo = tp__arg_int(args, 0), hi = tp__arg_int(args, 1);
    TP_TRY(check_randint(lo, hi));
    tp_sdim dims[TP_MAX_DIMS];
    int nd = 0;
    TP_TRY(tp__arg_sdims(args, 2, "size", dims, TP_MAX_DIMS, 0, &nd));
    for (int d = 0; d < nd; d++)
        TP_CHECK(dims[d].v >= 0, TP_ERR_SHAPE, "Trying to create tensor with negative dimension %" PRId64, dims[d].v);
    return tp__out_dims(out, args[3].kind == TP_VAL_DTYPE ? args[3].u.dtype : TP_INT64, nd, dims);
}

static tp_status randint_kernel(const tp_value *args, tp_value *out) {
    fill_ints(tp__out_at(out, 0), tp__arg_int(args, 0), tp__arg_int(args, 1));
    return TP_OK;
}

/* ---- randperm(n): a random permutation of 0..n-1 (Fisher-Yates) ---------- */

static tp_status randperm_infer(const tp_value *args, tp_value *out) {
    tp_sdim n;
    int nd = 0;
    TP_TRY(tp__arg_sdims(args, 0, "n", &n, 1, 1, &nd));
    TP_CHECK(n.v >= 0, TP_ERR_INVALID_ARG, "n must be non-negative, got %" PRId64, n.v);
    return tp__out_dims(out, args[1].kind == TP_VAL_DTYPE ? args[1].u.dtype : TP_INT64, 1, &n);
}

static tp_status randperm_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *y = tp__out_at(out, 0);
    int64_t n = y->sizes[0];
    int64_t *perm = tp_malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    TP_CHECK(perm != NULL, TP_ERR_NOMEM, "out of memory for randperm");
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    uint64_t s = tp__rng_seed();
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(tp__rng_next(&s) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    char *base = tp__tensor_base(y);
    size_t es = tp_dtype_size(y->dtype);
    for (int64_t i = 0; i < n; i++) tp__store_f64(base + (size_t)i * es, y->dtype, (double)perm[i]);
    tp_free(perm);
    return TP_OK;
}

/* ---- rand(size) / randn(size): a float tensor of the size (may be symbolic) */

static tp_status rand_infer(const tp_value *args, tp_value *out) {
    tp_sdim dims[TP_MAX_DIMS];
    int nd = 0;
    TP_TRY(tp__arg_sdims(args, 0, "size", dims, TP_MAX_DIMS, 0, &nd));
    for (int d = 0; d < nd; d++)
        TP_CHECK(dims[d].v >= 0, TP_ERR_SHAPE, "Trying to create tensor with negative dimension %" PRId64, dims[d].v);
    tp_dtype dt = args[1].kind == TP_VAL_DTYPE ? args[1].u.dtype : TP_FLOAT32;
    TP_CHECK(tp_dtype_is_float(dt), TP_ERR_TYPE, "\"check_uniform_bounds\" not implemented for '%s'", tp_dtype_name(dt));
    return tp__out_dims(out, dt, nd, dims);
}

/* ---- normal(mean, std): tensors (or a number and a tensor), broadcast ---- */

static tp_status normal_tensor_infer(const tp_value *args, tp_value *out) {
    const tp_value *m = &args[0], *sd = &args[1];
    TP_CHECK(m->kind == TP_VAL_TENSOR || sd->kind == TP_VAL_TENSOR, TP_ERR_TYPE,
             "normal(mean, std): mean or std must be a tensor");
    TP_CHECK((m->kind == TP_VAL_TENSOR || tp_value_is_number(m)) && (sd->kind == TP_VAL_TENSOR || tp_value_is_number(sd)),
             TP_ERR_TYPE, "normal(mean, std): mean and std must be tensors or numbers");
    if (tp_value_is_number(sd))
        TP_CHECK(tp_value_as_f64(sd) >= 0.0, TP_ERR_INVALID_ARG, "normal expects std >= 0.0, but found std %g",
                 tp_value_as_f64(sd));
    const tp_tensor *a = m->kind == TP_VAL_TENSOR ? m->u.tensor : NULL, *b = sd->kind == TP_VAL_TENSOR ? sd->u.tensor : NULL;
    if (a) TP_TRY(need_float(a, "normal (mean)"));
    if (b) TP_TRY(need_float(b, "normal (std)"));
    if (a && b) {
        TP_CHECK(a->dtype == b->dtype, TP_ERR_TYPE, "normal: mean is %s but std is %s", tp_dtype_name(a->dtype),
                 tp_dtype_name(b->dtype));
        int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
        tp_sdim d[TP_MAX_DIMS];
        for (int i = 0; i < nd; i++) {
            int ia = a->ndim - nd + i, ib = b->ndim - nd + i;
            int64_t sa = ia >= 0 ? a->sizes[ia] : 1, sb = ib >= 0 ? b->sizes[ib] : 1;
            TP_CHECK(sa == sb || sa == 1 || sb == 1, TP_ERR_SHAPE,
                     "normal: mean of size %" PRId64 " and std of size %" PRId64 " at dim %d do not broadcast", sa, sb, i);
            d[i] = sa != 1 ? tp__dim(a, ia) : ib >= 0 ? tp__dim(b, ib) : tp__dimk(1);
        }
        return tp__out_dims(out, a->dtype, nd, d);
    }
    const tp_tensor *t = a ? a : b;
    return tp__out_like(out, t->dtype, t);
}

static tp_status normal_tensor_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *y = tp__out_at(out, 0);
    const tp_value *m = &args[0], *sd = &args[1];
    const tp_tensor *a = m->kind == TP_VAL_TENSOR ? m->u.tensor : NULL, *b = sd->kind == TP_VAL_TENSOR ? sd->u.tensor : NULL;
    double mc = a ? 0.0 : tp_value_as_f64(m), sc = b ? 0.0 : tp_value_as_f64(sd);
    int64_t as[TP_MAX_DIMS] = {0}, bs[TP_MAX_DIMS] = {0}, ys[TP_MAX_DIMS];
    for (int d = 0; d < y->ndim; d++) ys[d] = y->strides[d];
    if (a) tp__broadcast_strides(a, a->ndim, y->ndim, y->sizes, as);
    if (b) tp__broadcast_strides(b, b->ndim, y->ndim, y->sizes, bs);
    tp_walk w;
    tp__walk_init(&w, y->ndim, y->sizes, 3, (const int64_t *[]){as, bs, ys});
    char *yb = tp__tensor_base(y);
    size_t es = tp_dtype_size(y->dtype);
    uint64_t s = tp__rng_seed();
    while (tp__walk_next(&w)) {
        double mean = a ? tp__load_f64((const char *)tp__tensor_base(a) + w.off[0] * (int64_t)es, a->dtype) : mc;
        double std = b ? tp__load_f64((const char *)tp__tensor_base(b) + w.off[1] * (int64_t)es, b->dtype) : sc;
        TP_CHECK(std >= 0.0, TP_ERR_INVALID_ARG, "normal expects all elements of std >= 0.0");
        tp__store_f64(yb + w.off[2] * (int64_t)es, y->dtype, mean + std * normal01(&s));
    }
    return TP_OK;
}

/* ---- registration ------------------------------------------------------- */

void tp__register_random_ops(void) {
    const unsigned R = TP_OPF_RANDOM;
    tp__register_op(TP_OP_UNIFORM, "uniform(Tensor self, float from=0.0, float to=1.0) -> Tensor", R, uniform_infer,
                    uniform_kernel);
    tp__register_op(TP_OP_NORMAL_FUNCTIONAL, "normal_functional(Tensor self, float mean=0.0, float std=1.0) -> Tensor",
                    R, normal_infer, normal_kernel);
    tp__register_op(TP_OP_LOG_NORMAL, "log_normal(Tensor self, float mean=1.0, float std=2.0) -> Tensor", R,
                    log_normal_infer, log_normal_kernel);
    tp__register_op(TP_OP_EXPONENTIAL, "exponential(Tensor self, float lambd=1.0) -> Tensor", R, exponential_infer,
                    exponential_kernel);
    tp__register_op(TP_OP_CAUCHY, "cauchy(Tensor self, float median=0.0, float sigma=1.0) -> Tensor", R, cauchy_infer,
                    cauchy_kernel);
    tp__register_op(TP_OP_GEOMETRIC, "geometric(Tensor self, float p) -> Tensor", R, geometric_infer, geometric_kernel);
    tp__register_op(TP_OP_RANDOM, "random(Tensor self, int from=0, int? to=None) -> Tensor", R, random_infer,
                    random_kernel);
    tp__register_op(TP_OP_BERNOULLI, "bernoulli(Tensor self, Any p=None) -> Tensor", R, bernoulli_infer,
                    bernoulli_kernel);
    tp__register_op(TP_OP_POISSON, "poisson(Tensor self) -> Tensor", R, poisson_infer, poisson_kernel);
    tp__register_op(TP_OP_BINOMIAL, "binomial(Tensor count, Tensor prob, Any generator=None) -> Tensor", R,
                    binomial_infer, binomial_kernel);
    tp__register_op(TP_OP_NATIVE_DROPOUT, "native_dropout(Tensor input, float p, bool? train=None) -> (Tensor, Tensor)",
                    R, native_dropout_infer, native_dropout_kernel);
    tp__register_op(TP_OP_NATIVE_FEATURE_DROPOUT,
                    "native_feature_dropout(Tensor input, float p, bool? train=None) -> (Tensor, Tensor)", R,
                    native_feature_dropout_infer, native_feature_dropout_kernel);
    tp__register_op(TP_OP_NATIVE_ALPHA_DROPOUT,
                    "native_alpha_dropout(Tensor input, float p, bool? train=None) -> (Tensor, Tensor)", R,
                    native_alpha_dropout_infer, native_alpha_dropout_kernel);
    tp__register_op(TP_OP_SAMPLE, "sample(Tensor logits, float temperature=1.0, int top_k=0, float top_p=1.0, int impl=0) "
                    "-> Tensor", R, sample_infer, sample_kernel);
    tp__register_op(TP_OP_MULTINOMIAL, "multinomial(Tensor self, int num_samples, bool replacement=False) -> Tensor", R,
                    multinomial_infer, multinomial_kernel);
    tp__register_op(TP_OP_RAND_LIKE,
                    "rand_like(Tensor self, *, ScalarType? dtype=None, " FACTORY_KWARGS ", Any memory_format=None) -> "
                    "Tensor",
                    R, rand_like_infer, rand_like_kernel);
    tp__register_op(TP_OP_RANDN_LIKE,
                    "randn_like(Tensor self, *, ScalarType? dtype=None, " FACTORY_KWARGS ", Any memory_format=None) -> "
                    "Tensor",
                    R, rand_like_infer, randn_like_kernel);
    tp__register_op(TP_OP_RANDINT_LIKE,
                    "randint_like(Tensor self, int low, int? high=None, *, ScalarType? dtype=None, " FACTORY_KWARGS
                    ", Any memory_format=None) -> Tensor",
                    R, randint_like_infer, randint_like_kernel);
    tp__register_op(TP_OP_RANDINT,
                    "randint(int low, int high, int[] size, *, ScalarType? dtype=None, " FACTORY_KWARGS ") -> Tensor", R,
                    randint_infer, randint_kernel);
    tp__register_op(TP_OP_RANDPERM, "randperm(int n, *, ScalarType? dtype=None, " FACTORY_KWARGS ") -> Tensor", R,
                    randperm_infer, randperm_kernel);
    tp__register_op(TP_OP_NORMAL, "normal(Any mean, Any std) -> Tensor", R, normal_tensor_infer, normal_tensor_kernel);
    tp__register_op(TP_OP_RAND, "rand(int[] size, *, ScalarType? dtype=None, " FACTORY_KWARGS ") -> Tensor", R, rand_infer,
                    rand_like_kernel);
    tp__register_op(TP_OP_RANDN, "randn(int[] size, *, ScalarType? dtype=None, " FACTORY_KWARGS ") -> Tensor", R,
                    rand_infer, randn_like_kernel);
}
