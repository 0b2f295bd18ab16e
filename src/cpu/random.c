/*
 * random.c - random fills and samplers: schemas, shape rules and reference
 * kernels for uniform, normal_functional, normal, bernoulli, exponential,
 * cauchy, log_normal, geometric, random, poisson, multinomial, rand_like,
 * randn_like, randint_like, randint, randperm, rand and randn.
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
