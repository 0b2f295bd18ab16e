/*
 * nn.c - nn ops: normalisation (batch_norm, layer_norm, group_norm,
 * instance_norm, rms_norm, local_response_norm),
 * softmax / log_softmax, prelu, embedding, dropout,
 * scaled_dot_product_attention, glu and the RNN cells (rnn_tanh_cell,
 * rnn_relu_cell, gru_cell, lstm_cell), im2col / col2im (unfold / fold),
 * pdist, bilinear and conv_tbc: schemas, shape rules and reference
 * kernels.
 *
 * Semantics are torch.nn.functional's. Every kernel reads its inputs through
 * explicit element strides (any layout, broadcast stride 0, 0-d tensors),
 * computes in double and rounds on store into the contiguous outputs that
 * the dispatcher allocates. Float ops accept float32/float64/float16/bfloat16;
 * norm parameters must have the input's dtype, or float32 for a float16 or
 * bfloat16 input (PyTorch's mixed-precision CPU norms).
 *
 * batch_norm with training=True and instance_norm with use_input_stats=True
 * update running_mean/running_var in place (registered TP_OPF_MUTATES |
 * TP_OPF_EFFECTFUL). dropout and
 * scaled_dot_product_attention's dropout_p draw from a small seeded
 * generator of our own (TP_OPF_RANDOM): the kept/dropped pattern does not
 * reproduce torch.manual_seed streams, only their distribution.
 */
#include <float.h>
#include <inttypes.h>

#include "kernel_util.h"
#include "rng.h"

/* ---- element access ---------------------------------------------------- */

/* Element `off` (in elements) from `base`, as a double. */
static inline double load_at(const char *base, int64_t off, tp_dtype dtype) {
    switch (dtype) {
    case TP_FLOAT32: {
        float v;
        memcpy(&v, base + off * 4, 4);
        return v;
    }
    case TP_FLOAT64: {
        double v;
        memcpy(&v, base + off * 8, 8);
        return v;
    }
    default: return tp__load_f64(base + off * (int64_t)tp_dtype_size(dtype), dtype);
    }
}

static inline void store_at(char *base, int64_t off, tp_dtype dtype, double v) {
    switch (dtype) {
    case TP_FLOAT32: {
        float f = (float)v;
        memcpy(base + off * 4, &f, 4);
        return;
    }
    case TP_FLOAT64: memcpy(base + off * 8, &v, 8); return;
    default: tp__store_f64(base + off * (int64_t)tp_dtype_size(dtype), dtype, v); return;
    }
}

/* v rounded to what a tensor of `dtype` would hold (float dtypes). */
static double round_to_dtype(double v, tp_dtype dtype) {
    switch (dtype) {
    case TP_FLOAT32: return (float)v;
    case TP_FLOAT16: return tp__f16_to_f32(tp__f32_to_f16((float)v));
    case TP_BFLOAT16: return tp__bf16_to_f32(tp__f32_to_bf16((float)v));
    default: return v;
    }
}

/* Element i of a 0-d or 1-d parameter tensor (i is ignored for one element). */
static double param_at(const tp_tensor *p, int64_t i) {
    int64_t off = p->ndim == 0 || p->sizes[0] == 1 ? 0 : i * p->strides[0];
    return load_at(tp__tensor_base(p), off, p->dtype);
}

/* Copy the dims [first, last) of a and b (same shape) into sizes and the two
 * stride arrays; returns the number of dims copied. */
static int pick_dims(const tp_tensor *a, const tp_tensor *b, int first, int last, int skip, int64_t *sizes,
                     int64_t *sa, int64_t *sb) {
    int n = 0;
    for (int d = first; d < last; d++) {
        if (d == skip) continue;
        sizes[n] = a->sizes[d];
        sa[n] = a->strides[d];
        sb[n] = b->strides[d];
        n++;
    }
    return n;
}

/* A parameter tensor's values as doubles in C order (caller tp_frees).
 * NULL tensor gives a NULL buffer. */
static tp_status load_all(const tp_tensor *t, double **out) {
    *out = NULL;
    if (!t) return TP_OK;
    int64_t n = tp_tensor_numel(t);
    double *buf = tp_calloc((size_t)(n > 0 ? n : 1), sizeof *buf);
    TP_CHECK(buf, TP_ERR_NOMEM, "out of memory (%" PRId64 " parameter values)", n);
    tp_walk w;
    tp__walk_init(&w, t->ndim, t->sizes, 2, (const int64_t *[]){t->strides, NULL});
    const char *base = tp__tensor_base(t);
    for (int64_t i = 0; tp__walk_next(&w); i++) buf[i] = load_at(base, w.off[0], t->dtype);
    *out = buf;
    return TP_OK;
}

static tp_status alloc_f64(int64_t n, double **out) {
    *out = tp_calloc((size_t)(n > 0 ? n : 1), sizeof **out);
    TP_CHECK(*out, TP_ERR_NOMEM, "out of memory (scratch of %" PRId64 " values)", n);
    return TP_OK;
}

/* Mean and biased variance of x[0..n) (two passes; n > 0). */
static void mean_var(const double *x, int64_t n, double *mean, double *var) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    double m = s / (double)n, ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (x[i] - m) * (x[i] - m);
    *mean = m;
    *var = ss / (double)n;
}

/* ---- argument checks shared by the shape rules ------------------------- */

static tp_status arg_tensor(const tp_value *args, int i, const char *what, tp_tensor **out) {
    *out = tp__arg_tensor(args, i);
    TP_CHECK(*out, TP_ERR_TYPE, "argument '%s' must be a Tensor, not %s", what, tp_value_kind_name(args[i].kind));
    return TP_OK;
}

/* An optional tensor: NULL for None. */
static tp_status arg_opt_tensor(const tp_value *args, int i, const char *what, tp_tensor **out) {
    *out = NULL;
    if (tp__arg_is_none(args, i)) return TP_OK;
    return arg_tensor(args, i, what, out);
}

static tp_status check_float(const tp_tensor *t, const char *what) {
    TP_CHECK(tp_dtype_is_float(t->dtype), TP_ERR_TYPE, "expected a floating-point %s, got %s", what,
             tp_dtype_name(t->dtype));
    return TP_OK;
}

/* A norm parameter's dtype: the input's, or float32 for a reduced-precision
 * input. */
static tp_status check_param_dtype(const tp_tensor *p, const char *what, tp_dtype input) {
    if (!p) return TP_OK;
    bool mixed = p->dtype == TP_FLOAT32 && (input == TP_FLOAT16 || input == TP_BFLOAT16);
    TP_CHECK(p->dtype == input || mixed, TP_ERR_TYPE, "expected %s to have dtype %s (as the input), got %s", what,
             tp_dtype_name(input), tp_dtype_name(p->dtype));
    return TP_OK;
}

/* A 1-d per-channel parameter of `channels` elements. */
static tp_status check_channel_param(const tp_tensor *p, const char *what, tp_sdim channels) {
    if (!p) return TP_OK;
    int64_t n = tp_tensor_numel(p);
    bool ok = p->ndim == 1 ? tp__dim_eq(tp__dim(p, 0), channels, "per-channel parameters match the channels")
                           : n == channels.v;
    TP_CHECK(ok, TP_ERR_SHAPE, "%s should contain %" PRId64 " elements not %" PRId64, what, channels.v, n);
    char buf[128];
    TP_CHECK(p->ndim == 1, TP_ERR_SHAPE, "%s must be 1-D, got shape %s", what,
             tp__shape_str(p->ndim, p->sizes, buf, sizeof buf));
    return TP_OK;
}

static tp_status check_probability(double p) {
    TP_CHECK(p >= 0.0 && p <= 1.0, TP_ERR_INVALID_ARG, "dropout probability has to be between 0 and 1, but got %g", p);
    return TP_OK;
}

static tp_status out_like(tp_value *out, const tp_tensor *t, tp_dtype dtype) { return tp__out_like(out, dtype, t); }

/* The product of t's dims except dim `skip` (-1: none) from dim `from` on. */
static tp_sdim dims_prod(const tp_tensor *t, int from, int skip) {
    tp_sdim n = tp__dimk(1);
    for (int d = from; d < t->ndim; d++)
        if (d != skip) n = tp__dim_mul(n, tp__dim(t, d));
    return n;
}

/* n != 1 where the op needs more than one value: relied on as n >= 2. */
static bool more_than_one(tp_sdim n, const char *what) { return n.v != 1 && (n.v < 2 || tp__dim_ge(n, 2, what)); }

/* ---- batch_norm --------------------------------------------------------- */

enum { BN_INPUT, BN_RUNNING_MEAN, BN_RUNNING_VAR, BN_WEIGHT, BN_BIAS, BN_TRAINING, BN_MOMENTUM, BN_EPS };

static tp_status batch_norm_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x, *rm, *rv, *w, *b;
    TP_TRY(arg_tensor(args, BN_INPUT, "input", &x));
    TP_TRY(arg_opt_tensor(args, BN_RUNNING_MEAN, "running_mean", &rm));
    TP_TRY(arg_opt_tensor(args, BN_RUNNING_VAR, "running_var", &rv));
    TP_TRY(arg_opt_tensor(args, BN_WEIGHT, "weight", &w));
    TP_TRY(arg_opt_tensor(args, BN_BIAS, "bias", &b));
    bool training = tp__arg_bool(args, BN_TRAINING);
    char buf[128];
    TP_TRY(check_float(x, "input"));
    TP_CHECK(x->ndim >= 2, TP_ERR_SHAPE, "expected input of shape (N, C, ...) with at least 2 dims, got shape %s",
             tp__shape_str(x->ndim, x->sizes, buf, sizeof buf));
    tp_sdim channels = tp__dim(x, 1);
    const tp_tensor *params[] = {rm, rv, w, b};
    const char *names[] = {"running_mean", "running_var", "weight", "bias"};
    for (int i = 0; i < 4; i++) {
        TP_TRY(check_param_dtype(params[i], names[i], x->dtype));
        TP_TRY(check_channel_param(params[i], names[i], channels));
    }
    if (!training) {
        TP_CHECK(rm, TP_ERR_MISSING, "running_mean must be defined in evaluation mode");
        TP_CHECK(rv, TP_ERR_MISSING, "running_var must be defined in evaluation mode");
    } else {
        /* the product of all sizes but dim 1 is 1 */
        bool one_value = !more_than_one(dims_prod(x, 0, 1), "more than 1 value per channel when training");
        TP_CHECK(!one_value, TP_ERR_INVALID_ARG,
                 "Expected more than 1 value per channel when training, got input size %s",
                 tp__shape_str(x->ndim, x->sizes, buf, sizeof buf));
    }
    return out_like(out, x, x->dtype);
}

static tp_status batch_norm_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *x = tp__arg_tensor(args, BN_INPUT), *rm = tp__arg_tensor(args, BN_RUNNING_MEAN),
              *rv = tp__arg_tensor(args, BN_RUNNING_VAR), *w = tp__arg_tensor(args, BN_WEIGHT),
              *b = tp__arg_tensor(args, BN_BIAS), *y = tp__out_at(out, 0);
    bool training = tp__arg_bool(args, BN_TRAINING);
    double momentum = tp__arg_f64(args, BN_MOMENTUM), eps = tp__arg_f64(args, BN_EPS);
    if (tp_tensor_numel(x) == 0) return TP_OK; /* PyTorch leaves running stats alone */

    int64_t channels = x->sizes[1], count = tp_tensor_numel(x) / channels;
    int64_t sizes[TP_MAX_DIMS], xs[TP_MAX_DIMS], ys[TP_MAX_DIMS];
    int nd = pick_dims(x, y, 0, x->ndim, 1, sizes, xs, ys);
    double *vals;
    TP_TRY(alloc_f64(count, &vals));
    const char *xb = tp__tensor_base(x);
    char *yb = tp__tensor_base(y);
    for (int64_t c = 0; c < channels; c++) {
        tp_walk it;
        tp__walk_init(&it, nd, sizes, 2, (const int64_t *[]){xs, ys});
        int64_t xc = c * x->strides[1], yc = c * y->strides[1];
        for (int64_t i = 0; tp__walk_next(&it); i++) vals[i] = load_at(xb, xc + it.off[0], x->dtype);
        double mean, var;
        if (training) {
            mean_var(vals, count, &mean, &var);
            if (rm) {
                char *p = tp__tensor_base(rm);
                int64_t off = c * rm->strides[0];
                store_at(p, off, rm->dtype, (1.0 - momentum) * load_at(p, off, rm->dtype) + momentum * mean);
            }
            if (rv) {
                char *p = tp__tensor_base(rv);
                int64_t off = c * rv->strides[0];
                double unbiased = var * (double)count / (double)(count - 1);
                store_at(p, off, rv->dtype, (1.0 - momentum) * load_at(p, off, rv->dtype) + momentum * unbiased);
            }
        } else {
            mean = param_at(rm, c);
            var = param_at(rv, c);
        }
        double scale = 1.0 / sqrt(var + eps);
        if (w) scale *= param_at(w, c);
        double shift = b ? param_at(b, c) : 0.0;
        tp__walk_init(&it, nd, sizes, 2, (const int64_t *[]){xs, ys});
        for (int64_t i = 0; tp__walk_next(&it); i++) store_at(yb, yc + it.off[1], y->dtype, (vals[i] - mean) * scale + shift);
    }
    tp_free(vals);
    return TP_OK;
}

/* ---- layer_norm --------------------------------------------------------- */

enum { LN_INPUT, LN_SHAPE, LN_WEIGHT, LN_BIAS, LN_EPS };

static tp_status layer_norm_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x, *w, *b;
    TP_TRY(arg_tensor(args, LN_INPUT, "input", &x));
    TP_TRY(arg_opt_tensor(args, LN_WEIGHT, "weight", &w));
    TP_TRY(arg_opt_tensor(args, LN_BIAS, "bias", &b));
    int64_t shape[TP_MAX_DIMS];
    tp_sdim sd[TP_MAX_DIMS];
    int k;
    TP_TRY(tp__arg_sdims(args, LN_SHAPE, "normalized_shape", sd, TP_MAX_DIMS, 0, &k));
    for (int i = 0; i < k; i++) shape[i] = sd[i].v;
    char sbuf[128], xbuf[128], pbuf[128];
    tp__shape_str(k, shape, sbuf, sizeof sbuf);
    TP_CHECK(k >= 1, TP_ERR_INVALID_ARG,
             "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but "
             "got normalized_shape = %s",
             sbuf);
    TP_TRY(check_float(x, "input"));
    bool match = k <= x->ndim;
    for (int i = 0; match && i < k; i++) match = tp__dim_eq(tp__dim(x, x->ndim - k + i), sd[i], "normalized_shape");
    TP_CHECK(match, TP_ERR_SHAPE, "Given normalized_shape=%s, expected input with shape [*, %.*s], but got input of size%s",
             sbuf, (int)(strlen(sbuf) - 2), sbuf + 1, tp__shape_str(x->ndim, x->sizes, xbuf, sizeof xbuf));
    const tp_tensor *params[] = {w, b};
    const char *names[] = {"weight", "bias"};
    for (int i = 0; i < 2; i++) {
        const tp_tensor *p = params[i];
        if (!p) continue;
        TP_TRY(check_param_dtype(p, names[i], x->dtype));
        bool same = p->ndim == k;
        for (int d = 0; same && d < k; d++) same = tp__dim_eq(tp__dim(p, d), sd[d], "normalized_shape");
        TP_CHECK(same, TP_ERR_SHAPE,
                 "Expected %s to be of same shape as normalized_shape, but got %s of shape %s and normalized_shape = %s",
                 names[i], names[i], tp__shape_str(p->ndim, p->sizes, pbuf, sizeof pbuf), sbuf);
    }
    return out_like(out, x, x->dtype);
}

static tp_status layer_norm_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *x = tp__arg_tensor(args, LN_INPUT), *w = tp__arg_tensor(args, LN_WEIGHT),
              *b = tp__arg_tensor(args, LN_BIAS), *y = tp__out_at(out, 0);
    double eps = tp__arg_f64(args, LN_EPS);
    int k = (int)tp_value_len(&args[LN_SHAPE]);
    if (args[LN_SHAPE].kind == TP_VAL_INT) k = 1;
    int lead = x->ndim - k;
    int64_t osz[TP_MAX_DIMS], oxs[TP_MAX_DIMS], oys[TP_MAX_DIMS];
    int64_t isz[TP_MAX_DIMS], ixs[TP_MAX_DIMS], iys[TP_MAX_DIMS];
    int no = pick_dims(x, y, 0, lead, -1, osz, oxs, oys);
    int ni = pick_dims(x, y, lead, x->ndim, -1, isz, ixs, iys);
    int64_t inner = 1;
    for (int d = 0; d < ni; d++) inner *= isz[d];
    if (inner == 0 || tp_tensor_numel(x) == 0) return TP_OK;

    double *wv = NULL, *bv = NULL, *vals = NULL;
    tp_status st = load_all(w, &wv);
    if (st == TP_OK) st = load_all(b, &bv);
    if (st == TP_OK) st = alloc_f64(inner, &vals);
    if (st == TP_OK) {
        const char *xb = tp__tensor_base(x);
        char *yb = tp__tensor_base(y);
        tp_walk outer;
        tp__walk_init(&outer, no, osz, 2, (const int64_t *[]){oxs, oys});
        while (tp__walk_next(&outer)) {
            tp_walk it;
            tp__walk_init(&it, ni, isz, 2, (const int64_t *[]){ixs, iys});
            for (int64_t j = 0; tp__walk_next(&it); j++) vals[j] = load_at(xb, outer.off[0] + it.off[0], x->dtype);
            double mean, var;
            mean_var(vals, inner, &mean, &var);
            double rstd = 1.0 / sqrt(var + eps);
            tp__walk_init(&it, ni, isz, 2, (const int64_t *[]){ixs, iys});
            for (int64_t j = 0; tp__walk_next(&it); j++) {
                double v = (vals[j] - mean) * rstd;
                if (wv) v *= wv[j];
                if (bv) v += bv[j];
                store_at(yb, outer.off[1] + it.off[1], y->dtype, v);
            }
        }
    }
    tp_free(wv);
    tp_free(bv);
    tp_free(vals);
    return st;
}

/* ---- group_norm --------------------------------------------------------- */

enum { GN_INPUT, GN_GROUPS, GN_WEIGHT, GN_BIAS, GN_EPS };

static tp_status group_norm_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x, *w, *b;
    TP_TRY(arg_tensor(args, GN_INPUT, "input", &x));
    TP_TRY(arg_opt_tensor(args, GN_WEIGHT, "weight", &w));
    TP_TRY(arg_opt_tensor(args, GN_BIAS, "bias", &b));
    int64_t groups = tp__arg_int(args, GN_GROUPS);
    char xbuf[128], pbuf[128];
    tp__shape_str(x->ndim, x->sizes, xbuf, sizeof xbuf);
    TP_TRY(check_float(x, "input"));
    TP_CHECK(x->ndim >= 2, TP_ERR_SHAPE, "Expected at least 2 dimensions for input tensor but received %d", x->ndim);
    TP_CHECK(groups > 0, TP_ERR_INVALID_ARG, "num_groups must be positive, got %" PRId64, groups);
    tp_sdim channels = tp__dim(x, 1);
    TP_CHECK(tp__dim_divisible(channels, groups, "channels divisible by num_groups"), TP_ERR_SHAPE,
             "Expected number of channels in input to be divisible by num_groups, but got input of shape %s and "
             "num_groups=%" PRId64,
             xbuf, groups);
    const tp_tensor *params[] = {w, b};
    const char *names[] = {"weight", "bias"};
    for (int i = 0; i < 2; i++) {
        const tp_tensor *p = params[i];
        if (!p) continue;
        TP_TRY(check_param_dtype(p, names[i], x->dtype));
        TP_CHECK(p->ndim == 1 && tp__dim_eq(tp__dim(p, 0), channels, "per-channel parameters match the channels"),
                 TP_ERR_SHAPE,
                 "Expected %s to be a vector of size equal to the number of channels in input, but got %s of shape %s "
                 "and input of shape %s",
                 names[i], names[i], tp__shape_str(p->ndim, p->sizes, pbuf, sizeof pbuf), xbuf);
    }
    /* F.group_norm's _verify_batch_size on [N * C / G, G, *spatial]: one
     * value per group (N * C / G * prod(spatial) == 1) is an error. */
    tp_sdim per_group = tp__dim_mul(tp__dim_mul(tp__dim(x, 0), tp__dim_floordiv(channels, groups)), dims_prod(x, 2, -1));
    bool one_value = !more_than_one(per_group, "more than 1 value per group when training");
    if (one_value) {
        int64_t v[TP_MAX_DIMS];
        memcpy(v, x->sizes, sizeof v);
        v[0] = 1;
        return tp_error(TP_ERR_INVALID_ARG, "Expected more than 1 value per channel when training, got input size %s",
                        tp__shape_str(x->ndim, v, pbuf, sizeof pbuf));
    }
    return out_like(out, x, x->dtype);
}

static tp_status group_norm_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *x = tp__arg_tensor(args, GN_INPUT), *w = tp__arg_tensor(args, GN_WEIGHT),
              *b = tp__arg_tensor(args, GN_BIAS), *y = tp__out_at(out, 0);
    int64_t groups = tp__arg_int(args, GN_GROUPS);
    double eps = tp__arg_f64(args, GN_EPS);
    if (tp_tensor_numel(x) == 0) return TP_OK;
    int64_t batch = x->sizes[0], per_group = x->sizes[1] / groups;
    /* block of one group: [channels of the group, spatial...] */
    int64_t sizes[TP_MAX_DIMS], xs[TP_MAX_DIMS], ys[TP_MAX_DIMS];
    int nd = pick_dims(x, y, 1, x->ndim, -1, sizes, xs, ys);
    sizes[0] = per_group;
    int64_t count = tp_tensor_numel(x) / (batch * groups);

    double *vals = NULL;
    TP_TRY(alloc_f64(count, &vals));
    const char *xb = tp__tensor_base(x);
    char *yb = tp__tensor_base(y);
    for (int64_t n = 0; n < batch; n++) {
        for (int64_t g = 0; g < groups; g++) {
            int64_t c0 = g * per_group;
            int64_t xo = n * x->strides[0] + c0 * x->strides[1], yo = n * y->strides[0] + c0 * y->strides[1];
            tp_walk it;
            tp__walk_init(&it, nd, sizes, 2, (const int64_t *[]){xs, ys});
            for (int64_t i = 0; tp__walk_next(&it); i++) vals[i] = load_at(xb, xo + it.off[0], x->dtype);
            double mean, var;
            mean_var(vals, count, &mean, &var);
            double rstd = 1.0 / sqrt(var + eps);
            tp__walk_init(&it, nd, sizes, 2, (const int64_t *[]){xs, ys});
            for (int64_t i = 0; tp__walk_next(&it); i++) {
                int64_t c = c0 + it.index[0];
                double v = (vals[i] - mean) * rstd;
                if (w) v *= param_at(w, c);
                if (b) v += param_at(b, c);
                store_at(yb, yo + it.off[1], y->dtype, v);
            }
        }
    }
    tp_free(vals);
    return TP_OK;
}

/* ---- instance_norm ------------------------------------------------------
 * Each (n, c) plane is normalised over its spatial dims. With
 * use_input_stats and running stats, those are updated in place with the
 * batch mean of the instance means / unbiased variances (what PyTorch's
 * batch_norm over the (1, N*C, ...) view followed by .mean(0) gives). */

enum { IN_INPUT, IN_WEIGHT, IN_BIAS, IN_RUNNING_MEAN, IN_RUNNING_VAR, IN_USE_INPUT_STATS, IN_MOMENTUM, IN_EPS };

static tp_status instance_norm_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x, *rm, *rv, *w, *b;
    TP_TRY(arg_tensor(args, IN_INPUT, "input", &x));
    TP_TRY(arg_opt_tensor(args, IN_WEIGHT, "weight", &w));
    TP_TRY(arg_opt_tensor(args, IN_BIAS, "bias", &b));
    TP_TRY(arg_opt_tensor(args, IN_RUNNING_MEAN, "running_mean", &rm));
    TP_TRY(arg_opt_tensor(args, IN_RUNNING_VAR, "running_var", &rv));
    bool use_input_stats = tp__arg_bool(args, IN_USE_INPUT_STATS);
    char buf[128];
    TP_TRY(check_float(x, "input"));
    TP_CHECK(x->ndim >= 2, TP_ERR_SHAPE, "expected input of shape (N, C, ...) with at least 2 dims, got shape %s",
             tp__shape_str(x->ndim, x->sizes, buf, sizeof buf));
    tp_sdim channels = tp__dim(x, 1);
    const tp_tensor *params[] = {rm, rv, w, b};
    const char *names[] = {"running_mean", "running_var", "weight", "bias"};
    for (int i = 0; i < 4; i++) {
        TP_TRY(check_param_dtype(params[i], names[i], x->dtype));
        TP_TRY(check_channel_param(params[i], names[i], channels));
    }
    if (use_input_stats) {
        TP_CHECK(more_than_one(dims_prod(x, 2, -1), "more than 1 spatial element when training"), TP_ERR_INVALID_ARG,
                 "Expected more than 1 spatial element when training, got input size %s",
                 tp__shape_str(x->ndim, x->sizes, buf, sizeof buf));
    } else {
        TP_CHECK(rm && rv, TP_ERR_MISSING,
                 "Expected running_mean and running_var to be defined when use_input_stats is false");
    }
    return out_like(out, x, x->dtype);
}

static tp_status instance_norm_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *x = tp__arg_tensor(args, IN_INPUT), *w = tp__arg_tensor(args, IN_WEIGHT),
              *b = tp__arg_tensor(args, IN_BIAS), *rm = tp__arg_tensor(args, IN_RUNNING_MEAN),
              *rv = tp__arg_tensor(args, IN_RUNNING_VAR), *y = tp__out_at(out, 0);
    bool use_input_stats = tp__arg_bool(args, IN_USE_INPUT_STATS);
    double momentum = tp__arg_f64(args, IN_MOMENTUM), eps = tp__arg_f64(args, IN_EPS);
    if (tp_tensor_numel(x) == 0) return TP_OK;
    int64_t batch = x->sizes[0], channels = x->sizes[1], count = tp_tensor_numel(x) / (batch * channels);
    int64_t sizes[TP_MAX_DIMS], xs[TP_MAX_DIMS], ys[TP_MAX_DIMS];
    int nd = pick_dims(x, y, 2, x->ndim, -1, sizes, xs, ys);
    double *vals = NULL, *sums = NULL;
    tp_status st = alloc_f64(count, &vals);
    if (st == TP_OK) st = alloc_f64(2 * channels, &sums); /* per channel: sum of means, of unbiased variances */
    if (st != TP_OK) {
        tp_free(vals);
        return st;
    }
    const char *xb = tp__tensor_base(x);
    char *yb = tp__tensor_base(y);
    for (int64_t n = 0; n < batch; n++) {
        for (int64_t c = 0; c < channels; c++) {
            int64_t xo = n * x->strides[0] + c * x->strides[1], yo = n * y->strides[0] + c * y->strides[1];
            tp_walk it;
            tp__walk_init(&it, nd, sizes, 2, (const int64_t *[]){xs, ys});
            for (int64_t i = 0; tp__walk_next(&it); i++) vals[i] = load_at(xb, xo + it.off[0], x->dtype);
            double mean, var;
            if (use_input_stats) {
                mean_var(vals, count, &mean, &var);
                sums[2 * c] += mean;
                sums[2 * c + 1] += count > 1 ? var * (double)count / (double)(count - 1) : NAN;
            } else {
                mean = param_at(rm, c);
                var = param_at(rv, c);
            }
            double scale = 1.0 / sqrt(var + eps);
            if (w) scale *= param_at(w, c);
            double shift = b ? param_at(b, c) : 0.0;
            tp__walk_init(&it, nd, sizes, 2, (const int64_t *[]){xs, ys});
            for (int64_t i = 0; tp__walk_next(&it); i++)
                store_at(yb, yo + it.off[1], y->dtype, (vals[i] - mean) * scale + shift);
        }
    }
    if (use_input_stats) {
        for (int64_t c = 0; c < channels; c++) {
            if (rm) {
                char *p = tp__tensor_base(rm);
                int64_t off = c * rm->strides[0];
                store_at(p, off, rm->dtype,
                         (1.0 - momentum) * load_at(p, off, rm->dtype) + momentum * sums[2 * c] / (double)batch);
            }
            if (rv) {
                char *p = tp__tensor_base(rv);
                int64_t off = c * rv->strides[0];
                store_at(p, off, rv->dtype,
                         (1.0 - momentum) * load_at(p, off, rv->dtype) + momentum * sums[2 * c + 1] / (double)batch);
            }
        }
    }
    tp_free(vals);
    tp_free(sums);
    return TP_OK;
}

/* ---- rms_norm -----------------------------------------------------------
 * x / sqrt(mean(x^2 over the normalized dims) + eps) * weight; eps None is
 * the machine epsilon of the type PyTorch computes in (float for float16
 * and bfloat16 inputs, which are upcast). */

enum { RMS_INPUT, RMS_SHAPE, RMS_WEIGHT, RMS_EPS };

static tp_status rms_norm_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x, *w;
    TP_TRY(arg_tensor(args, RMS_INPUT, "input", &x));
    TP_TRY(arg_opt_tensor(args, RMS_WEIGHT, "weight", &w));
    int64_t shape[TP_MAX_DIMS];
    tp_sdim sd[TP_MAX_DIMS];
    int k;
    TP_TRY(tp__arg_sdims(args, RMS_SHAPE, "normalized_shape", sd, TP_MAX_DIMS, 0, &k));
    for (int i = 0; i < k; i++) shape[i] = sd[i].v;
    char sbuf[128], xbuf[128], pbuf[128];
    tp__shape_str(k, shape, sbuf, sizeof sbuf);
    TP_CHECK(k >= 1, TP_ERR_INVALID_ARG,
             "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but "
             "got normalized_shape = %s",
             sbuf);
    TP_TRY(check_float(x, "input"));
    bool match = k <= x->ndim;
    for (int i = 0; match && i < k; i++) match = tp__dim_eq(tp__dim(x, x->ndim - k + i), sd[i], "normalized_shape");
    TP_CHECK(match, TP_ERR_SHAPE, "Given normalized_shape=%s, expected input with shape [*, %.*s], but got input of size%s",
             sbuf, (int)(strlen(sbuf) - 2), sbuf + 1, tp__shape_str(x->ndim, x->sizes, xbuf, sizeof xbuf));
    if (w) {
        TP_TRY(check_param_dtype(w, "weight", x->dtype));
        bool same = w->ndim == k;
        for (int d = 0; same && d < k; d++) same = tp__dim_eq(tp__dim(w, d), sd[d], "normalized_shape");
        TP_CHECK(same, TP_ERR_SHAPE,
                 "Expected weight to be of same shape as normalized_shape, but got weight of shape %s and "
                 "normalized_shape = %s",
                 tp__shape_str(w->ndim, w->sizes, pbuf, sizeof pbuf), sbuf);
    }
    return out_like(out, x, x->dtype);
}

static tp_status rms_norm_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *x = tp__arg_tensor(args, RMS_INPUT), *w = tp__arg_tensor(args, RMS_WEIGHT), *y = tp__out_at(out, 0);
    double eps = x->dtype == TP_FLOAT64 ? DBL_EPSILON : FLT_EPSILON;
    if (!tp__arg_is_none(args, RMS_EPS)) eps = tp__arg_f64(args, RMS_EPS);
    int k = (int)tp_value_len(&args[RMS_SHAPE]);
    if (args[RMS_SHAPE].kind == TP_VAL_INT) k = 1;
    int lead = x->ndim - k;
    int64_t osz[TP_MAX_DIMS], oxs[TP_MAX_DIMS], oys[TP_MAX_DIMS];
    int64_t isz[TP_MAX_DIMS], ixs[TP_MAX_DIMS], iys[TP_MAX_DIMS];
    int no = pick_dims(x, y, 0, lead, -1, osz, oxs, oys);
    int ni = pick_dims(x, y, lead, x->ndim, -1, isz, ixs, iys);
    int64_t inner = 1;
    for (int d = 0; d < ni; d++) inner *= isz[d];
    if (inner == 0 || tp_tensor_numel(x) == 0) return TP_OK;

    double *wv = NULL, *vals = NULL;
    tp_status st = load_all(w, &wv);
    if (st == TP_OK) st = alloc_f64(inner, &vals);
    if (st == TP_OK) {
        const char *xb = tp__tensor_base(x);
        char *yb = tp__tensor_base(y);
        tp_walk outer;
        tp__walk_init(&outer, no, osz, 2, (const int64_t *[]){oxs, oys});
        while (tp__walk_next(&outer)) {
            tp_walk it;
            tp__walk_init(&it, ni, isz, 2, (const int64_t *[]){ixs, iys});
            double ss = 0.0;
            for (int64_t j = 0; tp__walk_next(&it); j++) {
                vals[j] = load_at(xb, outer.off[0] + it.off[0], x->dtype);
                ss += vals[j] * vals[j];
            }
            double rstd = 1.0 / sqrt(ss / (double)inner + eps);
            tp__walk_init(&it, ni, isz, 2, (const int64_t *[]){ixs, iys});
            for (int64_t j = 0; tp__walk_next(&it); j++) {
                double v = vals[j] * rstd;
                if (wv) v *= wv[j];
                store_at(yb, outer.off[1] + it.off[1], y->dtype, v);
            }
        }
    }
    tp_free(wv);
    tp_free(vals);
    return st;
}

/* ---- local_response_norm ------------------------------------------------
 * y[n, c, ...] = x[n, c, ...] / (k + alpha / size * sum of x[n, c', ...]^2
 *   over c' in [c - size / 2, c + (size - 1) / 2] within the channels)^beta
 * (F.local_response_norm: an average pool of x^2 over zero-padded
 * channels, the divisor always size). */

enum { LRN_INPUT, LRN_SIZE, LRN_ALPHA, LRN_BETA, LRN_K };

static tp_status lrn_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x;
    TP_TRY(arg_tensor(args, LRN_INPUT, "input", &x));
    TP_TRY(check_float(x, "input"));
    TP_CHECK(x->ndim >= 3, TP_ERR_SHAPE, "Expected 3D or higher dimensionality input (got %d dimensions)", x->ndim);
    int64_t size = tp__arg_int(args, LRN_SIZE);
    TP_CHECK(size >= 1, TP_ERR_INVALID_ARG, "size must be positive, got %" PRId64, size);
    return out_like(out, x, x->dtype);
}

static tp_status lrn_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *x = tp__arg_tensor(args, LRN_INPUT), *y = tp__out_at(out, 0);
    int64_t size = tp__arg_int(args, LRN_SIZE);
    double alpha = tp__arg_f64(args, LRN_ALPHA), beta = tp__arg_f64(args, LRN_BETA), k = tp__arg_f64(args, LRN_K);
    if (tp_tensor_numel(x) == 0) return TP_OK;
    int64_t channels = x->sizes[1], lo_ext = size / 2, hi_ext = (size - 1) / 2;
    int64_t sizes[TP_MAX_DIMS], xs[TP_MAX_DIMS], ys[TP_MAX_DIMS];
    int nd = pick_dims(x, y, 0, x->ndim, 1, sizes, xs, ys);
    double *sq;
    TP_TRY(alloc_f64(channels, &sq));
    const char *xb = tp__tensor_base(x);
    char *yb = tp__tensor_base(y);
    tp_walk it;
    tp__walk_init(&it, nd, sizes, 2, (const int64_t *[]){xs, ys});
    while (tp__walk_next(&it)) {
        for (int64_t c = 0; c < channels; c++) {
            double v = load_at(xb, it.off[0] + c * x->strides[1], x->dtype);
            sq[c] = v * v;
        }
        for (int64_t c = 0; c < channels; c++) {
            int64_t c0 = c - lo_ext < 0 ? 0 : c - lo_ext, c1 = c + hi_ext >= channels ? channels - 1 : c + hi_ext;
            double s = 0.0;
            for (int64_t j = c0; j <= c1; j++) s += sq[j];
            double div = pow(s / (double)size * alpha + k, beta);
            double v = load_at(xb, it.off[0] + c * x->strides[1], x->dtype);
            store_at(yb, it.off[1] + c * y->strides[1], y->dtype, v / div);
        }
    }
    tp_free(sq);
    return TP_OK;
}

/* ---- softmax / log_softmax ---------------------------------------------- */

enum { SM_SELF, SM_DIM, SM_DTYPE };

/* The softmax dim; None (softmin's dim=None) is PyTorch's legacy choice:
 * 0 for 0-, 1- and 3-d inputs, else 1. */
static tp_status softmax_dim(const tp_value *args, const tp_tensor *x, int *dim) {
    int64_t d = tp__arg_is_none(args, SM_DIM) ? (x->ndim == 0 || x->ndim == 1 || x->ndim == 3 ? 0 : 1)
                                              : tp__arg_int(args, SM_DIM);
    return tp__wrap_dim(d, x->ndim, dim);
}

static tp_status softmax_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x;
    TP_TRY(arg_tensor(args, SM_SELF, "self", &x));
    int dim;
    TP_TRY(softmax_dim(args, x, &dim));
    tp_dtype dtype = x->dtype;
    if (args[SM_DTYPE].kind == TP_VAL_DTYPE) {
        dtype = args[SM_DTYPE].u.dtype;
        TP_CHECK(tp_dtype_is_float(dtype), TP_ERR_TYPE, "expected a floating-point dtype, got %s",
                 tp_dtype_name(dtype));
    }
    TP_CHECK(tp_dtype_is_float(dtype), TP_ERR_TYPE,
             "expected a floating-point input, got %s (pass dtype= to compute in a floating-point type)",
             tp_dtype_name(dtype));
    return out_like(out, x, dtype);
}

/* softmax, log_softmax, and softmin (negate: softmax of -x). */
static tp_status softmax_common(const tp_value *args, tp_value *out, bool log_space, bool negate) {
    tp_tensor *x = tp__arg_tensor(args, SM_SELF), *y = tp__out_at(out, 0);
    int dim;
    TP_TRY(softmax_dim(args, x, &dim));
    bool cast = y->dtype != x->dtype; /* dtype=: the input is converted first */
    int64_t len = 1, xs = 0, ys = 0;
    if (x->ndim > 0) {
        len = x->sizes[dim];
        xs = x->strides[dim];
        ys = y->strides[dim];
    }
    if (len == 0 || tp_tensor_numel(x) == 0) return TP_OK;
    int64_t sizes[TP_MAX_DIMS], oxs[TP_MAX_DIMS], oys[TP_MAX_DIMS];
    int nd = pick_dims(x, y, 0, x->ndim, dim, sizes, oxs, oys);
    double *vals;
    TP_TRY(alloc_f64(len, &vals));
    const char *xb = tp__tensor_base(x);
    char *yb = tp__tensor_base(y);
    tp_walk outer;
    tp__walk_init(&outer, nd, sizes, 2, (const int64_t *[]){oxs, oys});
    while (tp__walk_next(&outer)) {
        double max = -INFINITY;
        for (int64_t i = 0; i < len; i++) {
            double v = load_at(xb, outer.off[0] + i * xs, x->dtype);
            if (cast) v = round_to_dtype(v, y->dtype);
            if (negate) v = -v;
            vals[i] = v;
            if (v > max || isnan(v)) max = isnan(max) ? max : v;
        }
        double sum = 0.0;
        for (int64_t i = 0; i < len; i++) sum += exp(vals[i] - max);
        if (log_space) {
            double lse = log(sum);
            for (int64_t i = 0; i < len; i++) store_at(yb, outer.off[1] + i * ys, y->dtype, vals[i] - max - lse);
        } else {
            for (int64_t i = 0; i < len; i++) store_at(yb, outer.off[1] + i * ys, y->dtype, exp(vals[i] - max) / sum);
        }
    }
    tp_free(vals);
    return TP_OK;
}

static tp_status softmax_kernel(const tp_value *args, tp_value *out) { return softmax_common(args, out, false, false); }
static tp_status log_softmax_kernel(const tp_value *args, tp_value *out) {
    return softmax_common(args, out, true, false);
}
static tp_status softmin_kernel(const tp_value *args, tp_value *out) { return softmax_common(args, out, false, true); }

/* ---- glu ------------------------------------------------------------------
 * glu(x, dim) = a * sigmoid(b), a and b the first and second halves of x
 * along dim (its size must be even). */

static tp_status glu_shape(const tp_value *args, tp_tensor **x, int *dim) {
    TP_TRY(arg_tensor(args, 0, "self", x));
    TP_CHECK((*x)->ndim > 0, TP_ERR_SHAPE, "glu does not support scalars because halving size must be even");
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), (*x)->ndim, dim));
    TP_CHECK(tp__dim_divisible(tp__dim(*x, *dim), 2, "glu's halved dim is even"), TP_ERR_SHAPE,
             "Halving dimension must be even, but dimension %d is size %" PRId64, *dim, (*x)->sizes[*dim]);
    return check_float(*x, "input");
}

static tp_status glu_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x;
    int dim;
    TP_TRY(glu_shape(args, &x, &dim));
    tp_sdim dims[TP_MAX_DIMS];
    tp__dims(x, dims);
    dims[dim] = tp__dim_floordiv(dims[dim], 2);
    return tp__out_dims(out, x->dtype, x->ndim, dims);
}

static tp_status glu_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *x, *y = tp__out_at(out, 0);
    int dim;
    TP_TRY(glu_shape(args, &x, &dim));
    TP_CHECK(y != NULL, TP_ERR_INTERNAL, "missing output tensor");
    int64_t half = y->sizes[dim] * x->strides[dim]; /* offset from a to b */
    const char *xb = tp__tensor_base(x);
    char *yb = tp__tensor_base(y);
    tp_walk w;
    tp__walk_init(&w, y->ndim, y->sizes, 2, (const int64_t *[]){x->strides, y->strides});
    while (tp__walk_next(&w)) {
        double a = load_at(xb, w.off[0], x->dtype), b = load_at(xb, w.off[0] + half, x->dtype);
        store_at(yb, w.off[1], y->dtype, a / (1.0 + exp(-b)));
    }
    return TP_OK;
}

/* ---- prelu -------------------------------------------------------------- */

static tp_status prelu_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x, *w;
    TP_TRY(arg_tensor(args, 0, "self", &x));
    TP_TRY(arg_tensor(args, 1, "weight", &w));
    TP_TRY(check_float(x, "input"));
    TP_CHECK(w->dtype == x->dtype, TP_ERR_TYPE, "type promotion is not supported: weight has dtype %s, input has %s",
             tp_dtype_name(w->dtype), tp_dtype_name(x->dtype));
    TP_CHECK(w->ndim <= 1, TP_ERR_SHAPE, "Expected `weight` to be a scalar or 1D tensor, but got ndim = %d", w->ndim);
    int64_t n = tp_tensor_numel(w);
    if (n != 1) {
        TP_CHECK(x->ndim > 0, TP_ERR_SHAPE, "Not allow zero-dim input tensor.");
        tp_sdim channels = x->ndim > 1 ? tp__dim(x, 1) : tp__dimk(1);
        TP_CHECK(tp__dim_eq(channels, w->ndim == 1 ? tp__dim(w, 0) : tp__dimk(n), "prelu weight matches the channels"),
                 TP_ERR_SHAPE,
                 "Mismatch of parameter numbers and input channel size. Found parameter numbers = %" PRId64
                 " and channel size = %" PRId64 ".",
                 n, channels.v);
    }
    return out_like(out, x, x->dtype);
}

static tp_status prelu_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *x = tp__arg_tensor(args, 0), *w = tp__arg_tensor(args, 1), *y = tp__out_at(out, 0);
    const char *xb = tp__tensor_base(x);
    char *yb = tp__tensor_base(y);
    tp_walk it;
    tp__walk_init(&it, x->ndim, x->sizes, 2, (const int64_t *[]){x->strides, y->strides});
    while (tp__walk_next(&it)) {
        double v = load_at(xb, it.off[0], x->dtype);
        if (!(v > 0.0)) v *= param_at(w, x->ndim > 1 ? it.index[1] : 0);
        store_at(yb, it.off[1], y->dtype, v);
    }
    return TP_OK;
}

/* ---- embedding ---------------------------------------------------------- */

static tp_status embedding_infer(const tp_value *args, tp_value *out) {
    tp_tensor *w, *idx;
    TP_TRY(arg_tensor(args, 0, "weight", &w));
    TP_TRY(arg_tensor(args, 1, "indices", &idx));
    TP_CHECK(w->ndim == 2, TP_ERR_SHAPE, "'weight' must be 2-D, got %d dims", w->ndim);
    TP_CHECK(idx->dtype == TP_INT64 || idx->dtype == TP_INT32, TP_ERR_TYPE,
             "Expected tensor for argument 'indices' to have one of the following scalar types: int64, int32; but "
             "got %s",
             tp_dtype_name(idx->dtype));
    TP_CHECK(idx->ndim < TP_MAX_DIMS, TP_ERR_SHAPE, "indices have %d dims; the result would exceed %d dims", idx->ndim,
             TP_MAX_DIMS);
    tp_sdim dims[TP_MAX_DIMS];
    tp__dims(idx, dims);
    dims[idx->ndim] = tp__dim(w, 1);
    return tp__out_dims(out, w->dtype, idx->ndim + 1, dims);
}

static tp_status embedding_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *w = tp__arg_tensor(args, 0), *idx = tp__arg_tensor(args, 1), *y = tp__out_at(out, 0);
    int64_t rows = w->sizes[0], dim = w->sizes[1];
    size_t es = tp_dtype_size(w->dtype);
    const char *wb = tp__tensor_base(w), *ib = tp__tensor_base(idx);
    char *yb = tp__tensor_base(y);
    size_t ies = tp_dtype_size(idx->dtype);
    tp_walk it;
    tp__walk_init(&it, idx->ndim, idx->sizes, 2, (const int64_t *[]){idx->strides, y->strides});
    while (tp__walk_next(&it)) {
        int64_t r = tp__load_i64(ib + it.off[0] * (int64_t)ies, idx->dtype);
        TP_CHECK(r >= 0 && r < rows, TP_ERR_INDEX, "index out of range in self (index %" PRId64 ", %" PRId64 " rows)", r,
                 rows);
        for (int64_t j = 0; j < dim; j++)
            memcpy(yb + (it.off[1] + j * y->strides[idx->ndim]) * (int64_t)es,
                   wb + (r * w->strides[0] + j * w->strides[1]) * (int64_t)es, es);
    }
    return TP_OK;
}

/* embedding_renorm_(Tensor self, Tensor indices, float max_norm, float
 * norm_type): in place, each row of self named in indices (once, however
 * often named) whose norm_type-norm exceeds max_norm is scaled by max_norm
 * / (norm + 1e-7), as F.embedding's max_norm does; returns self. */
static tp_status renorm_check(const tp_value *args) {
    tp_tensor *w, *idx;
    TP_TRY(arg_tensor(args, 0, "self", &w));
    TP_TRY(arg_tensor(args, 1, "indices", &idx));
    TP_CHECK(w->ndim == 2, TP_ERR_SHAPE,
             "Expected 2-dimensional tensor, but got %d-dimensional tensor for argument #1 'self' (while checking "
             "arguments for embedding_renorm_)",
             w->ndim);
    TP_CHECK(idx->dtype == TP_INT64 || idx->dtype == TP_INT32, TP_ERR_TYPE,
             "Expected tensor for argument #2 'indices' to have one of the following scalar types: int64, int32; but "
             "got %s instead (while checking arguments for embedding_renorm_)",
             tp_dtype_name(idx->dtype));
    TP_TRY(check_float(w, "self"));
    return TP_OK;
}

static tp_status embedding_renorm_infer(const tp_value *args, tp_value *out) {
    TP_TRY(renorm_check(args));
    return tp_value_copy(&args[0], out);
}

static tp_status embedding_renorm_kernel(const tp_value *args, tp_value *out) {
    TP_TRY(renorm_check(args));
    tp_tensor *w = tp__arg_tensor(args, 0), *idx = tp__arg_tensor(args, 1);
    TP_TRY(tp__has_data(w, "self"));
    double max_norm = tp__arg_f64(args, 2), p = tp__arg_f64(args, 3);
    int64_t rows = w->sizes[0], dim = w->sizes[1];
    uint8_t *seen = tp_calloc((size_t)(rows > 0 ? rows : 1), 1);
    TP_CHECK(seen, TP_ERR_NOMEM, "out of memory (%" PRId64 " rows)", rows);
    const char *ib = tp__tensor_base(idx);
    char *wb = tp__tensor_base(w);
    size_t ies = tp_dtype_size(idx->dtype);
    tp_status st = TP_OK;
    tp_walk it;
    tp__walk_init(&it, idx->ndim, idx->sizes, 1, (const int64_t *[]){idx->strides});
    while (st == TP_OK && tp__walk_next(&it)) {
        int64_t r = tp__load_i64(ib + it.off[0] * (int64_t)ies, idx->dtype);
        if (r < 0 || r >= rows) {
            st = tp_error(TP_ERR_INDEX, "select(): index %" PRId64 " out of range for tensor of size [%" PRId64 ", %" PRId64
                                        "] at dimension 0", r, rows, dim);
            break;
        }
        if (seen[r]) continue;
        seen[r] = 1;
        double norm = 0.0;
        for (int64_t j = 0; j < dim; j++) {
            double v = fabs(load_at(wb, r * w->strides[0] + j * w->strides[1], w->dtype));
            if (isinf(p)) norm = p > 0 ? fmax(norm, v) : (j == 0 ? v : fmin(norm, v));
            else if (p == 0) norm += v != 0.0;
            else norm += pow(v, p);
        }
        if (!isinf(p) && p != 0) norm = pow(norm, 1.0 / p);
        if (!(norm > max_norm)) continue;
        double scale = max_norm / (norm + 1e-7);
        for (int64_t j = 0; j < dim; j++) {
            int64_t off = r * w->strides[0] + j * w->strides[1];
            store_at(wb, off, w->dtype, load_at(wb, off, w->dtype) * scale);
        }
    }
    tp_free(seen);
    if (st != TP_OK) return st;
    tp_value_clear(out);
    return tp_value_copy(&args[0], out);
}

/* ---- embedding_bag (issue #13) -------------------------------------------
 * F.embedding_bag's semantics: bags of rows of weight, a 1-D input cut by
 * offsets (the last offset closing the last bag when include_last_offset),
 * or a 2-D input of fixed-length bags; mode sum (optionally weighted by
 * per_sample_weights), mean or max; entries equal to padding_idx are left
 * out (mean divides by the bag's other entries); an empty bag gives zeros.
 * Sums in double, the result rounded once to weight's dtype. The checks
 * and messages are PyTorch 2's (F.embedding_bag's and the native kernel's);
 * the old (weight, input) argument order is accepted as PyTorch does. */

enum { EB_INPUT, EB_WEIGHT, EB_OFFSETS, EB_MODE, EB_PSW, EB_LAST, EB_PAD };
enum { EB_SUM, EB_MEAN, EB_MAX };

typedef struct eb_plan {
    const tp_tensor *in, *w, *off, *psw;
    int mode;
    bool last;
    int64_t pad; /* -1: none */
} eb_plan;

static void eb_shape(const tp_tensor *t, char *buf, size_t size) {
    size_t n = (size_t)snprintf(buf, size, "torch.Size([");
    for (int d = 0; d < t->ndim && n < size - 24; d++)
        n += (size_t)snprintf(buf + n, size - n, "%s%" PRId64, d ? ", " : "", t->sizes[d]);
    snprintf(buf + n, size - n, "])");
}

/* PyTorch's legacy tensor type name ("torch.FloatTensor") of a dtype. */
static const char *eb_type(tp_dtype d) {
    static const char *const names[TP_DTYPE_COUNT] = {
        "torch.FloatTensor", "torch.DoubleTensor", "torch.HalfTensor", "torch.BFloat16Tensor", "torch.LongTensor",
        "torch.IntTensor",   "torch.ShortTensor",  "torch.CharTensor", "torch.ByteTensor",     "torch.BoolTensor"};
    return (unsigned)d < TP_DTYPE_COUNT ? names[d] : "?";
}

static tp_status eb_check(const tp_value *args, eb_plan *p) {
    p->in = tp__arg_tensor(args, EB_INPUT);
    p->w = tp__arg_tensor(args, EB_WEIGHT);
    p->off = tp__arg_tensor(args, EB_OFFSETS);
    p->psw = tp__arg_tensor(args, EB_PSW);
    TP_CHECK(p->in && p->w, TP_ERR_TYPE, "embedding_bag: input and weight must be tensors");
    if (p->w->dtype == TP_INT64 && tp_dtype_is_float(p->in->dtype)) { /* the old (weight, input) order */
        const tp_tensor *t = p->in;
        p->in = p->w;
        p->w = t;
    }
    if (p->psw) {
        bool same = p->psw->ndim == p->in->ndim;
        for (int d = 0; same && d < p->in->ndim; d++) same = p->psw->sizes[d] == p->in->sizes[d];
        if (!same) {
            char a[160], b[160];
            eb_shape(p->psw, a, sizeof a);
            eb_shape(p->in, b, sizeof b);
            return tp_error(TP_ERR_SHAPE,
                            "embedding_bag: If per_sample_weights (%s) is not None, then it must have the same shape "
                            "as the input (%s)",
                            a, b);
        }
    }
    TP_CHECK(p->w->ndim == 2, TP_ERR_SHAPE, "weight has to be a 2D Tensor, but got Tensor of dimension %d", p->w->ndim);
    const char *mode = tp__arg_str(args, EB_MODE);
    if (mode && strcmp(mode, "sum") == 0) p->mode = EB_SUM;
    else if (mode && strcmp(mode, "mean") == 0) p->mode = EB_MEAN;
    else if (mode && strcmp(mode, "max") == 0) p->mode = EB_MAX;
    else return tp_error(TP_ERR_INVALID_ARG, "mode has to be one of sum, mean or max");
    TP_CHECK(!p->psw || p->mode == EB_SUM, TP_ERR_INVALID_ARG,
             "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for mode='sum' "
             "(got mode='%s'). Please open a feature request on GitHub.",
             mode);
    int64_t rows = p->w->sizes[0];
    p->pad = -1;
    if (!tp__arg_is_none(args, EB_PAD)) {
        int64_t pi = tp__arg_int(args, EB_PAD);
        TP_CHECK(pi >= -rows && pi < rows, TP_ERR_INDEX,
                 "padding_idx must be within the number of embeddings, %" PRId64 " through %" PRId64
                 ", but got %" PRId64,
                 -rows, rows - 1, pi);
        p->pad = pi < 0 ? pi + rows : pi;
    }
    p->last = tp__arg_bool(args, EB_LAST);
    if (p->in->ndim == 2) {
        TP_CHECK(!p->off, TP_ERR_INVALID_ARG,
                 "if input is 2D, then offsets has to be None, as input is treated is a mini-batch of fixed length "
                 "sequences. However, found offsets of type <class 'torch.Tensor'>");
        p->last = false;
    } else if (p->in->ndim == 1) {
        TP_CHECK(p->off, TP_ERR_INVALID_ARG, "offsets has to be a 1D Tensor but got None");
        TP_CHECK(p->off->ndim == 1, TP_ERR_SHAPE, "offsets has to be a 1D Tensor");
    } else {
        return tp_error(TP_ERR_SHAPE, "input has to be 1D or 2D Tensor, but got Tensor of dimension %d", p->in->ndim);
    }
    const char *which = NULL;
    if (p->in->dtype != TP_INT64 && p->in->dtype != TP_INT32)
        which = eb_type(p->in->dtype);
    else if (p->off && p->off->dtype != TP_INT64 && p->off->dtype != TP_INT32)
        which = eb_type(p->off->dtype);
    TP_CHECK(!which, TP_ERR_TYPE,
             "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got "
             "%s instead (while checking arguments for embedding_bag)",
             which);
    TP_CHECK(tp_dtype_is_float(p->w->dtype), TP_ERR_TYPE,
             "Expected tensor for argument #1 'weight' to have one of the following scalar types: Half, Float, Double; "
             "but got %s instead (while checking arguments for embedding_bag)",
             eb_type(p->w->dtype));
    TP_CHECK(!p->psw || p->psw->dtype == p->w->dtype, TP_ERR_TYPE,
             "Expected tensor for argument #1 'weight' to have the same type as tensor for argument #1 "
             "'per_sample_weights'; but type %s does not equal %s (while checking arguments for embedding_bag)",
             eb_type(p->w->dtype), eb_type(p->psw->dtype));
    return TP_OK;
}

static tp_status embedding_bag_infer(const tp_value *args, tp_value *out) {
    eb_plan p;
    TP_TRY(eb_check(args, &p));
    tp_sdim dims[2];
    if (p.in->ndim == 2) {
        dims[0] = tp__dim(p.in, 0);
    } else {
        dims[0] = tp__dim(p.off, 0);
        if (p.last) {
            TP_CHECK(tp__dim_ge(dims[0], 1, "embedding_bag: include_last_offset with an offset"), TP_ERR_SHAPE,
                     "include_last_offset: numBags should be at least 1");
            dims[0] = tp__dim_addk(dims[0], -1);
        }
    }
    dims[1] = tp__dim(p.w, 1);
    return tp__out_dims(out, p.w->dtype, 2, dims);
}

/* Element k (row-major) of the 1-D or 2-D t. */
static int64_t eb_elem(const tp_tensor *t, int64_t k) {
    if (t->ndim == 1) return k * t->strides[0];
    int64_t n = t->sizes[1];
    return (k / n) * t->strides[0] + (k % n) * t->strides[1];
}

static tp_status embedding_bag_kernel(const tp_value *args, tp_value *out) {
    eb_plan p;
    TP_TRY(eb_check(args, &p));
    TP_TRY(tp__has_data(p.in, "input"));
    TP_TRY(tp__has_data(p.off, "offsets"));
    TP_TRY(tp__has_data(p.psw, "per_sample_weights"));
    tp_tensor *y = tp__out_at(out, 0);
    int64_t numel = tp_tensor_numel(p.in), rows = p.w->sizes[0], dim = p.w->sizes[1], bags = y->sizes[0];
    int64_t seq = p.in->ndim == 2 ? p.in->sizes[1] : 0, n_off = p.off ? p.off->sizes[0] : 0;
    const char *ib = tp__tensor_base(p.in), *ob = p.off ? tp__tensor_base(p.off) : NULL;
    size_t ies = tp_dtype_size(p.in->dtype), oes = p.off ? tp_dtype_size(p.off->dtype) : 0;
#define EB_OFF(k) tp__load_i64(ob + (k) * p.off->strides[0] * (int64_t)oes, p.off->dtype)
    if (p.off && n_off > 0) {
        int64_t first = EB_OFF(0), lastv = EB_OFF(n_off - 1);
        TP_CHECK(first == 0, TP_ERR_INVALID_ARG,
                 "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. "
                 "However, got %" PRId64,
                 first);
        TP_CHECK(lastv <= numel, TP_ERR_INDEX,
                 "offsets[-1] can not be greater than input's length %" PRId64 " but got offsets[-1] of %" PRId64,
                 numel, lastv);
    }
    for (int64_t k = 0; k < numel; k++) {
        int64_t r = tp__load_i64(ib + eb_elem(p.in, k) * (int64_t)ies, p.in->dtype);
        TP_CHECK(r >= 0 && r < rows, TP_ERR_INDEX,
                 "Index %" PRId64 " is out of bounds: %" PRId64 ", range 0 to %" PRId64, k, r, rows);
    }
    double *acc = tp_malloc(sizeof(double) * (size_t)(dim > 0 ? dim : 1));
    TP_CHECK(acc, TP_ERR_NOMEM, "out of memory for embedding_bag");
    size_t wes = tp_dtype_size(p.w->dtype);
    const char *wb = tp__tensor_base(p.w);
    for (int64_t b = 0; b < bags; b++) {
        int64_t start, end;
        if (p.in->ndim == 2) {
            start = b * seq, end = start + seq;
        } else {
            start = EB_OFF(b);
            end = b + 1 < n_off ? EB_OFF(b + 1) : numel;
            if (start < 0) start = 0;
            if (end > numel) end = numel;
        }
        int64_t count = 0;
        for (int64_t j = 0; j < dim; j++) acc[j] = 0.0;
        for (int64_t k = start; k < end; k++) {
            int64_t r = tp__load_i64(ib + eb_elem(p.in, k) * (int64_t)ies, p.in->dtype);
            if (r == p.pad) continue;
            double sw = p.psw ? load_at(tp__tensor_base(p.psw), eb_elem(p.psw, k), p.psw->dtype) : 1.0;
            for (int64_t j = 0; j < dim; j++) {
                double v = tp__load_f64(wb + (r * p.w->strides[0] + j * p.w->strides[1]) * (int64_t)wes, p.w->dtype);
                if (p.mode == EB_MAX) acc[j] = count == 0 || v > acc[j] || v != v ? v : acc[j];
                else acc[j] += v * sw;
            }
            count++;
        }
        for (int64_t j = 0; j < dim; j++) {
            double v = p.mode == EB_MEAN && count > 0 ? acc[j] / (double)count : acc[j];
            tp__store_f64(tp__tensor_base(y) + (b * y->strides[0] + j * y->strides[1]) * (int64_t)wes, y->dtype, v);
        }
    }
#undef EB_OFF
    tp_free(acc);
    return TP_OK;
}

/* ---- multi_head_attention_forward (issue #13) ----------------------------
 * F.multi_head_attention_forward in eval (dropout_p = 0 or training False):
 * the packed in_proj_weight / in_proj_bias or separate q/k/v projection
 * weights (key and value of their own widths), bias_k / bias_v appended to
 * the projected keys and values, add_zero_attn's zero key and value,
 * key_padding_mask [N, S] and attn_mask [L, S] or [N * H, L, S] (bool:
 * True masks out, float: added), softmax(q k^T / sqrt(head_dim)) v per head,
 * then out_proj. need_weights gives the attention weights [N, H, L, S'],
 * averaged over the heads with average_attn_weights; else None. Unbatched
 * query / key / value [L, E] work as a batch of one. In double, rounded once
 * to query's dtype. static_k / static_v are refused, as is dropout in
 * training (random); is_causal is a hint that needs attn_mask, as in
 * PyTorch. */

enum {
    MHA_Q, MHA_K, MHA_V, MHA_E, MHA_H, MHA_IN_W, MHA_IN_B, MHA_BIAS_K, MHA_BIAS_V, MHA_ZERO_ATTN, MHA_P, MHA_OUT_W,
    MHA_OUT_B, MHA_TRAINING, MHA_KPM, MHA_NEED_W, MHA_MASK, MHA_SEPARATE, MHA_QW, MHA_KW, MHA_VW, MHA_STATIC_K,
    MHA_STATIC_V, MHA_AVERAGE, MHA_CAUSAL
};

typedef struct mha_plan {
    const tp_tensor *q, *k, *v, *in_w, *in_b, *bk, *bv, *out_w, *out_b, *kpm, *mask, *qw, *kw, *vw;
    bool batched, zero_attn, need_w, average, separate;
    int64_t L, S, N, E, H, hd, kdim, vdim, S2; /* S2: keys after bias_k and add_zero_attn */
} mha_plan;

static void mha_dims(const tp_tensor *t, char *buf, size_t size) {
    size_t n = (size_t)snprintf(buf, size, "torch.Size([");
    for (int d = 0; d < t->ndim && n < size - 24; d++)
        n += (size_t)snprintf(buf + n, size - n, "%s%" PRId64, d ? ", " : "", t->sizes[d]);
    snprintf(buf + n, size - n, "])");
}

static bool mha_is_mask_type(tp_dtype d) { return d == TP_BOOL || tp_dtype_is_float(d); }

static tp_status mha_check(const tp_value *args, mha_plan *p) {
    memset(p, 0, sizeof *p);
    p->q = tp__arg_tensor(args, MHA_Q), p->k = tp__arg_tensor(args, MHA_K), p->v = tp__arg_tensor(args, MHA_V);
    TP_CHECK(p->q && p->k && p->v, TP_ERR_TYPE, "multi_head_attention_forward: query, key and value must be tensors");
    p->in_w = tp__arg_tensor(args, MHA_IN_W), p->in_b = tp__arg_tensor(args, MHA_IN_B);
    p->bk = tp__arg_tensor(args, MHA_BIAS_K), p->bv = tp__arg_tensor(args, MHA_BIAS_V);
    p->out_w = tp__arg_tensor(args, MHA_OUT_W), p->out_b = tp__arg_tensor(args, MHA_OUT_B);
    p->kpm = tp__arg_tensor(args, MHA_KPM), p->mask = tp__arg_tensor(args, MHA_MASK);
    p->qw = tp__arg_tensor(args, MHA_QW), p->kw = tp__arg_tensor(args, MHA_KW), p->vw = tp__arg_tensor(args, MHA_VW);
    int qd = p->q->ndim, kd = p->k->ndim, vd = p->v->ndim;
    if (qd == 3) {
        TP_CHECK(kd == 3 && vd == 3, TP_ERR_SHAPE,
                 "For batched (3-D) `query`, expected `key` and `value` to be 3-D but found %d-D and %d-D tensors "
                 "respectively",
                 kd, vd);
    } else if (qd == 2) {
        TP_CHECK(kd == 2 && vd == 2, TP_ERR_SHAPE,
                 "For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found %d-D and %d-D tensors "
                 "respectively",
                 kd, vd);
    } else {
        return tp_error(TP_ERR_SHAPE, "query should be unbatched 2D or batched 3D tensor but received %d-D query tensor",
                        qd);
    }
    p->batched = qd == 3;
    TP_CHECK(p->q->dtype == TP_FLOAT32 || p->q->dtype == TP_FLOAT64, TP_ERR_TYPE,
             "multi_head_attention_forward: expected a float32 or float64 query, got %s", tp_dtype_name(p->q->dtype));
    TP_CHECK(tp_dtype_is_float(p->k->dtype) && tp_dtype_is_float(p->v->dtype), TP_ERR_TYPE,
             "multi_head_attention_forward: expected floating-point key and value");
    p->L = p->q->sizes[0];
    p->S = p->k->sizes[0];
    p->N = p->batched ? p->q->sizes[1] : 1;
    p->E = p->q->sizes[qd - 1];
    p->kdim = p->k->sizes[kd - 1];
    p->vdim = p->v->sizes[vd - 1];
    p->H = tp__arg_int(args, MHA_H);
    int64_t check = tp__arg_int(args, MHA_E);
    TP_CHECK(p->E == check, TP_ERR_SHAPE, "was expecting embedding dimension of %" PRId64 ", but got %" PRId64, check,
             p->E);
    TP_CHECK(p->H > 0 && p->E % p->H == 0, TP_ERR_SHAPE, "embed_dim %" PRId64 " not divisible by num_heads %" PRId64,
             p->E, p->H);
    p->hd = p->E / p->H;
    p->separate = tp__arg_bool(args, MHA_SEPARATE);
    if (p->batched)
        TP_CHECK(p->k->sizes[1] == p->N && p->v->sizes[1] == p->N, TP_ERR_SHAPE,
                 "multi_head_attention_forward: query, key and value must have the same batch size");
    if (p->separate) {
        TP_CHECK(p->k->sizes[0] == p->v->sizes[0] && (!p->batched || p->k->sizes[1] == p->v->sizes[1]), TP_ERR_SHAPE,
                 "key's sequence and batch dims do not match value's");
        TP_CHECK(p->qw && p->kw && p->vw, TP_ERR_INVALID_ARG,
                 "use_separate_proj_weight is True but q_proj_weight, k_proj_weight or v_proj_weight is None");
        TP_CHECK(p->qw->ndim == 2 && p->qw->sizes[0] == p->E && p->qw->sizes[1] == p->E && p->kw->ndim == 2 &&
                     p->kw->sizes[0] == p->E && p->kw->sizes[1] == p->kdim && p->vw->ndim == 2 &&
                     p->vw->sizes[0] == p->E && p->vw->sizes[1] == p->vdim,
                 TP_ERR_SHAPE, "multi_head_attention_forward: q/k/v_proj_weight must be [E, E], [E, kdim], [E, vdim]");
    } else {
        bool same = p->k->ndim == p->v->ndim;
        for (int d = 0; same && d < kd; d++) same = p->k->sizes[d] == p->v->sizes[d];
        if (!same) {
            char a[160], b[160];
            mha_dims(p->k, a, sizeof a);
            mha_dims(p->v, b, sizeof b);
            return tp_error(TP_ERR_SHAPE, "key shape %s does not match value shape %s", a, b);
        }
        TP_CHECK(p->in_w, TP_ERR_INVALID_ARG, "use_separate_proj_weight is False but in_proj_weight is None");
        TP_CHECK(p->in_w->ndim == 2 && p->in_w->sizes[0] == 3 * p->E && p->in_w->sizes[1] == p->E && p->kdim == p->E,
                 TP_ERR_SHAPE, "multi_head_attention_forward: in_proj_weight must be [3 * E, E] with E-wide key and value");
    }
    TP_CHECK(!p->in_b || (p->in_b->ndim == 1 && p->in_b->sizes[0] == 3 * p->E), TP_ERR_SHAPE,
             "multi_head_attention_forward: in_proj_bias must be [3 * E]");
    TP_CHECK(p->out_w && p->out_w->ndim == 2 && p->out_w->sizes[0] == p->E && p->out_w->sizes[1] == p->E, TP_ERR_SHAPE,
             "multi_head_attention_forward: out_proj_weight must be [E, E]");
    TP_CHECK(!p->out_b || (p->out_b->ndim == 1 && p->out_b->sizes[0] == p->E), TP_ERR_SHAPE,
             "multi_head_attention_forward: out_proj_bias must be [E]");
    TP_CHECK(!p->bk == !p->bv, TP_ERR_INVALID_ARG, "bias_k and bias_v must both be given or both be None");
    TP_CHECK(!p->bk || (tp_tensor_numel(p->bk) == p->E && tp_tensor_numel(p->bv) == p->E), TP_ERR_SHAPE,
             "multi_head_attention_forward: bias_k and bias_v must be [1, 1, E]");
    TP_CHECK(tp__arg_is_none(args, MHA_STATIC_K) && tp__arg_is_none(args, MHA_STATIC_V), TP_ERR_UNSUPPORTED,
             "multi_head_attention_forward: static_k / static_v are not supported");
    double dp = tp__arg_f64(args, MHA_P);
    TP_CHECK(!(tp__arg_bool(args, MHA_TRAINING) && dp > 0.0), TP_ERR_UNSUPPORTED,
             "multi_head_attention_forward: dropout_p > 0 in training mode is random; export in eval mode "
             "(training=False) or with dropout_p=0");
    p->zero_attn = tp__arg_bool(args, MHA_ZERO_ATTN);
    p->need_w = tp__arg_bool(args, MHA_NEED_W);
    p->average = tp__arg_bool(args, MHA_AVERAGE);
    TP_CHECK(!tp__arg_bool(args, MHA_CAUSAL) || p->mask, TP_ERR_INVALID_ARG,
             "Need attn_mask if specifying the is_causal hint. You may use the Transformer module method "
             "`generate_square_subsequent_mask` to create this mask.");
    if (p->mask) {
        TP_CHECK(mha_is_mask_type(p->mask->dtype), TP_ERR_TYPE, "only bool and floating types of attn_mask are supported");
        char a[160];
        mha_dims(p->mask, a, sizeof a);
        if (p->mask->ndim == 2) {
            TP_CHECK(p->mask->sizes[0] == p->L && p->mask->sizes[1] == p->S, TP_ERR_SHAPE,
                     "The shape of the 2D attn_mask is %s, but should be (%" PRId64 ", %" PRId64 ").", a, p->L, p->S);
        } else if (p->mask->ndim == 3) {
            TP_CHECK(p->mask->sizes[0] == p->N * p->H && p->mask->sizes[1] == p->L && p->mask->sizes[2] == p->S,
                     TP_ERR_SHAPE, "The shape of the 3D attn_mask is %s, but should be (%" PRId64 ", %" PRId64
                     ", %" PRId64 ").", a, p->N * p->H, p->L, p->S);
        } else {
            return tp_error(TP_ERR_SHAPE, "attn_mask's dimension %d is not supported", p->mask->ndim);
        }
    }
    if (p->kpm) {
        TP_CHECK(mha_is_mask_type(p->kpm->dtype), TP_ERR_TYPE,
                 "only bool and floating types of key_padding_mask are supported");
        bool ok = p->batched ? p->kpm->ndim == 2 && p->kpm->sizes[0] == p->N && p->kpm->sizes[1] == p->S
                             : p->kpm->ndim == 1 && p->kpm->sizes[0] == p->S;
        char a[160];
        mha_dims(p->kpm, a, sizeof a);
        TP_CHECK(ok, TP_ERR_SHAPE, "expecting key_padding_mask shape of (%" PRId64 ", %" PRId64 "), but got %s",
                 p->N, p->S, a);
    }
    p->S2 = p->S + (p->bk ? 1 : 0) + (p->zero_attn ? 1 : 0);
    return TP_OK;
}

static tp_status mha_infer(const tp_value *args, tp_value *out) {
    mha_plan p;
    TP_TRY(mha_check(args, &p));
    TP_TRY(tp__out_tuple(out, 2));
    TP_TRY(tp__out_like(tp_value_at(out, 0), p.q->dtype, p.q));
    if (!p.need_w) return TP_OK; /* None */
    tp_sdim d[4];
    int nd = 0;
    if (p.batched) d[nd++] = tp__dim(p.q, 1);
    if (!p.average) d[nd++] = tp__dimk(p.H);
    d[nd++] = tp__dim(p.q, 0);
    d[nd++] = p.bk || p.zero_attn ? tp__dimk(p.S2) : tp__dim(p.k, 0);
    if ((p.bk || p.zero_attn) && !tp__dim_is_const(tp__dim(p.k, 0))) d[nd - 1] = tp__dim_addk(tp__dim(p.k, 0), p.S2 - p.S);
    return tp__out_dims(tp_value_at(out, 1), p.q->dtype, nd, d);
}

/* Element (i, j) of the 2-D t, or element i of the 1-D t (j = 0). */
static double mha_at2(const tp_tensor *t, int64_t i, int64_t j) {
    int64_t off = t->ndim == 1 ? i * t->strides[0] : i * t->strides[0] + j * t->strides[1];
    return load_at(tp__tensor_base(t), off, t->dtype);
}

/* Row (s, n) of the sequence tensor x ([S, N, D] or [S, D]) into r. */
static void mha_row(const tp_tensor *x, bool batched, int64_t s, int64_t n, double *r) {
    int64_t d = x->sizes[x->ndim - 1], base = s * x->strides[0] + (batched ? n * x->strides[1] : 0);
    for (int64_t i = 0; i < d; i++)
        r[i] = load_at(tp__tensor_base(x), base + i * x->strides[x->ndim - 1], x->dtype);
}

/* y[E] = W[row0 .. row0 + E) x + b[row0 ..] */
static void mha_proj(const tp_tensor *w, int64_t row0, const tp_tensor *b, const double *x, int64_t in, int64_t e,
                     double *y) {
    for (int64_t o = 0; o < e; o++) {
        double acc = b ? mha_at2(b, row0 + o, 0) : 0.0;
        for (int64_t i = 0; i < in; i++) acc += mha_at2(w, row0 + o, i) * x[i];
        y[o] = acc;
    }
}

/* A mask value as an additive term: bool True -inf, float as is. */
static double mha_mask_term(const tp_tensor *m, int64_t off) {
    double v = load_at(tp__tensor_base(m), off, m->dtype);
    return m->dtype == TP_BOOL ? (v != 0.0 ? -INFINITY : 0.0) : v;
}

static tp_status mha_kernel(const tp_value *args, tp_value *out) {
    mha_plan p;
    TP_TRY(mha_check(args, &p));
    int64_t L = p.L, S = p.S, S2 = p.S2, N = p.N, E = p.E, H = p.H, hd = p.hd;
    size_t need = (size_t)(L * E + 2 * S2 * E + L * E + S2 + (E > p.kdim ? E : p.kdim) + p.vdim + E + H * L * S2);
    double *buf = tp_malloc(sizeof(double) * need);
    TP_CHECK(buf, TP_ERR_NOMEM, "out of memory for multi_head_attention_forward");
    double *Q = buf, *K = Q + L * E, *V = K + S2 * E, *C = V + S2 * E, *sc = C + L * E, *x = sc + S2;
    double *xv = x + (E > p.kdim ? E : p.kdim), *row = xv + p.vdim, *W = row + E;
    tp_tensor *y = tp__out_at(out, 0), *aw = p.need_w ? tp__out_at(out, 1) : NULL;
    const tp_tensor *wq = p.separate ? p.qw : p.in_w, *wk = p.separate ? p.kw : p.in_w, *wv = p.separate ? p.vw : p.in_w;
    int64_t rq = 0, rk = p.separate ? 0 : E, rv = p.separate ? 0 : 2 * E;
    double scale = 1.0 / sqrt((double)hd);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t l = 0; l < L; l++) {
            mha_row(p.q, p.batched, l, n, x);
            double *q = Q + l * E;
            for (int64_t o = 0; o < E; o++) {
                double acc = p.in_b ? mha_at2(p.in_b, o, 0) : 0.0;
                for (int64_t i = 0; i < E; i++) acc += mha_at2(wq, rq + o, i) * x[i];
                q[o] = acc;
            }
        }
        for (int64_t s = 0; s < S; s++) {
            mha_row(p.k, p.batched, s, n, x);
            double *kr = K + s * E, *vr = V + s * E;
            for (int64_t o = 0; o < E; o++) {
                double acc = p.in_b ? mha_at2(p.in_b, E + o, 0) : 0.0;
                for (int64_t i = 0; i < p.kdim; i++) acc += mha_at2(wk, rk + o, i) * x[i];
                kr[o] = acc;
            }
            mha_row(p.v, p.batched, s, n, xv);
            for (int64_t o = 0; o < E; o++) {
                double acc = p.in_b ? mha_at2(p.in_b, 2 * E + o, 0) : 0.0;
                for (int64_t i = 0; i < p.vdim; i++) acc += mha_at2(wv, rv + o, i) * xv[i];
                vr[o] = acc;
            }
        }
        int64_t s_next = S;
        if (p.bk) {
            for (int64_t o = 0; o < E; o++) {
                K[s_next * E + o] = load_at(tp__tensor_base(p.bk), o * p.bk->strides[p.bk->ndim - 1], p.bk->dtype);
                V[s_next * E + o] = load_at(tp__tensor_base(p.bv), o * p.bv->strides[p.bv->ndim - 1], p.bv->dtype);
            }
            s_next++;
        }
        if (p.zero_attn) {
            for (int64_t o = 0; o < E; o++) K[s_next * E + o] = V[s_next * E + o] = 0.0;
            s_next++;
        }
        for (int64_t h = 0; h < H; h++) {
            for (int64_t l = 0; l < L; l++) {
                double mx = -INFINITY;
                for (int64_t s = 0; s < S2; s++) {
                    double acc = 0.0;
                    for (int64_t i = 0; i < hd; i++) acc += Q[l * E + h * hd + i] * scale * K[s * E + h * hd + i];
                    if (s < S && p.mask) {
                        int64_t off = p.mask->ndim == 2
                                          ? l * p.mask->strides[0] + s * p.mask->strides[1]
                                          : (n * H + h) * p.mask->strides[0] + l * p.mask->strides[1] +
                                                s * p.mask->strides[2];
                        acc += mha_mask_term(p.mask, off);
                    }
                    if (s < S && p.kpm)
                        acc += mha_mask_term(p.kpm, p.batched ? n * p.kpm->strides[0] + s * p.kpm->strides[1]
                                                              : s * p.kpm->strides[0]);
                    sc[s] = acc;
                    if (acc > mx) mx = acc;
                }
                double sum = 0.0;
                for (int64_t s = 0; s < S2; s++) sum += sc[s] = exp(sc[s] - mx);
                for (int64_t s = 0; s < S2; s++) sc[s] /= sum;
                for (int64_t i = 0; i < hd; i++) {
                    double acc = 0.0;
                    for (int64_t s = 0; s < S2; s++) acc += sc[s] * V[s * E + h * hd + i];
                    C[l * E + h * hd + i] = acc;
                }
                for (int64_t s = 0; s < S2; s++) W[(h * L + l) * S2 + s] = sc[s];
            }
        }
        for (int64_t l = 0; l < L; l++) {
            mha_proj(p.out_w, 0, p.out_b, C + l * E, E, E, row);
            int64_t base = l * y->strides[0] + (p.batched ? n * y->strides[1] : 0);
            for (int64_t o = 0; o < E; o++)
                tp__store_f64(tp__tensor_base(y) + (base + o * y->strides[y->ndim - 1]) * (int64_t)tp_dtype_size(y->dtype),
                              y->dtype, row[o]);
        }
        if (aw) {
            size_t es = tp_dtype_size(aw->dtype);
            int nb = p.batched ? 1 : 0;
            for (int64_t l = 0; l < L; l++)
                for (int64_t s = 0; s < S2; s++) {
                    if (p.average) {
                        double a = 0.0;
                        for (int64_t h = 0; h < H; h++) a += W[(h * L + l) * S2 + s];
                        int64_t off = (nb ? n * aw->strides[0] : 0) + l * aw->strides[nb] + s * aw->strides[nb + 1];
                        tp__store_f64(tp__tensor_base(aw) + off * (int64_t)es, aw->dtype, a / (double)H);
                    } else {
                        for (int64_t h = 0; h < H; h++) {
                            int64_t off = (nb ? n * aw->strides[0] : 0) + h * aw->strides[nb] +
                                          l * aw->strides[nb + 1] + s * aw->strides[nb + 2];
                            tp__store_f64(tp__tensor_base(aw) + off * (int64_t)es, aw->dtype, W[(h * L + l) * S2 + s]);
                        }
                    }
                }
        }
    }
    tp_free(buf);
    return TP_OK;
}

/* ---- dropout ------------------------------------------------------------ */

enum { DO_INPUT, DO_P, DO_TRAIN };

static tp_status dropout_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x;
    TP_TRY(arg_tensor(args, DO_INPUT, "input", &x));
    double p = tp__arg_f64(args, DO_P);
    TP_TRY(check_probability(p));
    bool random = tp__arg_bool(args, DO_TRAIN) && p > 0.0 && p < 1.0 && tp_tensor_numel(x) > 0;
    TP_CHECK(!random || tp_dtype_is_float(x->dtype), TP_ERR_TYPE,
             "result type float can't be cast to the desired output type %s (dropout with train=True needs a "
             "floating-point input)",
             tp_dtype_name(x->dtype));
    return out_like(out, x, x->dtype);
}

static tp_status dropout_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *x = tp__arg_tensor(args, DO_INPUT), *y = tp__out_at(out, 0);
    double p = tp__arg_f64(args, DO_P);
    if (!tp__arg_bool(args, DO_TRAIN) || p == 0.0) return tp_tensor_copy_(y, x);
    const char *xb = tp__tensor_base(x);
    char *yb = tp__tensor_base(y);
    tp_walk it;
    tp__walk_init(&it, x->ndim, x->sizes, 2, (const int64_t *[]){x->strides, y->strides});
    if (p == 1.0) { /* input * 0: zeros, NaN stays NaN */
        while (tp__walk_next(&it)) store_at(yb, it.off[1], y->dtype, load_at(xb, it.off[0], x->dtype) * 0.0);
        return TP_OK;
    }
    uint64_t state = tp__rng_seed();
    double keep = 1.0 - p, scale = 1.0 / keep;
    while (tp__walk_next(&it)) {
        double m = tp__rng_uniform(&state) < keep ? scale : 0.0;
        store_at(yb, it.off[1], y->dtype, load_at(xb, it.off[0], x->dtype) * m);
    }
    return TP_OK;
}

/* alpha_dropout, feature_dropout, feature_alpha_dropout (and through
 * feature_dropout dropout1d/2d/3d). With train=False (or p=0, or no
 * elements, where PyTorch also returns the input) they are the identity;
 * train=True draws a random mask (per feature map for the feature forms,
 * with alpha dropout's affine correction for the alpha forms): random.c's
 * tp__dropout_draw, as native_dropout & co. */
static tp_status dropout_train_infer(const tp_value *args, tp_value *out, tp_dropout_kind kind) {
    tp_tensor *x;
    TP_TRY(arg_tensor(args, DO_INPUT, "input", &x));
    double p = tp__arg_f64(args, DO_P);
    TP_TRY(check_probability(p));
    bool random = tp__arg_bool(args, DO_TRAIN) && p > 0.0 && tp_tensor_numel(x) > 0;
    TP_CHECK(!random || tp_dtype_is_float(x->dtype), TP_ERR_TYPE,
             "dropout with training=True needs a floating-point input, got %s", tp_dtype_name(x->dtype));
    TP_CHECK(!random || kind == TP_DROPOUT_ALPHA || x->ndim >= 2, TP_ERR_SHAPE,
             "Feature dropout requires at least 2 dimensions in the input, got %d", x->ndim);
    return out_like(out, x, x->dtype);
}

static tp_status dropout_train_kernel(const tp_value *args, tp_value *out, tp_dropout_kind kind) {
    tp_tensor *x = tp__arg_tensor(args, DO_INPUT);
    double p = tp__arg_f64(args, DO_P);
    if (!tp__arg_bool(args, DO_TRAIN) || p == 0.0 || tp_tensor_numel(x) == 0)
        return tp_tensor_copy_(tp__out_at(out, 0), x);
    return tp__dropout_draw(kind, x, p, true, tp__out_at(out, 0), NULL);
}

static tp_status alpha_dropout_infer(const tp_value *args, tp_value *out) {
    return dropout_train_infer(args, out, TP_DROPOUT_ALPHA);
}
static tp_status alpha_dropout_kernel(const tp_value *args, tp_value *out) {
    return dropout_train_kernel(args, out, TP_DROPOUT_ALPHA);
}
static tp_status feature_dropout_infer(const tp_value *args, tp_value *out) {
    return dropout_train_infer(args, out, TP_DROPOUT_FEATURE);
}
static tp_status feature_dropout_kernel(const tp_value *args, tp_value *out) {
    return dropout_train_kernel(args, out, TP_DROPOUT_FEATURE);
}
static tp_status feature_alpha_dropout_infer(const tp_value *args, tp_value *out) {
    return dropout_train_infer(args, out, TP_DROPOUT_FEATURE_ALPHA);
}
static tp_status feature_alpha_dropout_kernel(const tp_value *args, tp_value *out) {
    return dropout_train_kernel(args, out, TP_DROPOUT_FEATURE_ALPHA);
}

/* ---- scaled_dot_product_attention --------------------------------------- */

enum { SDPA_Q, SDPA_K, SDPA_V, SDPA_MASK, SDPA_DROPOUT, SDPA_CAUSAL, SDPA_SCALE };

/* Broadcast batch shape of q, k, v (all dims but the last two). */
static tp_status sdpa_batch_shape(const tp_tensor *q, const tp_tensor *k, const tp_tensor *v, int *nb,
                                  int64_t *batch, tp_sdim *dims) {
    int n;
    tp_sdim b[TP_MAX_DIMS], kd[TP_MAX_DIMS], vd[TP_MAX_DIMS];
    tp__dims(q, b);
    tp__dims(k, kd);
    tp__dims(v, vd);
    TP_TRY(tp__dims_broadcast(q->ndim - 2, b, k->ndim - 2, kd, &n, b));
    TP_TRY(tp__dims_broadcast(n, b, v->ndim - 2, vd, &n, b));
    *nb = n;
    for (int i = 0; i < n; i++) {
        batch[i] = b[i].v;
        if (dims) dims[i] = b[i];
    }
    return TP_OK;
}

static tp_status sdpa_infer(const tp_value *args, tp_value *out) {
    tp_tensor *q, *k, *v, *mask;
    TP_TRY(arg_tensor(args, SDPA_Q, "query", &q));
    TP_TRY(arg_tensor(args, SDPA_K, "key", &k));
    TP_TRY(arg_tensor(args, SDPA_V, "value", &v));
    TP_TRY(arg_opt_tensor(args, SDPA_MASK, "attn_mask", &mask));
    char qb[128], kb[128], vb[128];
    tp__shape_str(q->ndim, q->sizes, qb, sizeof qb);
    tp__shape_str(k->ndim, k->sizes, kb, sizeof kb);
    tp__shape_str(v->ndim, v->sizes, vb, sizeof vb);
    TP_TRY(check_float(q, "query"));
    TP_CHECK(k->dtype == q->dtype && v->dtype == q->dtype, TP_ERR_TYPE,
             "Expected query, key, and value to have the same dtype, but got query.dtype: %s key.dtype: %s and "
             "value.dtype: %s instead.",
             tp_dtype_name(q->dtype), tp_dtype_name(k->dtype), tp_dtype_name(v->dtype));
    TP_CHECK(q->ndim >= 2 && k->ndim >= 2 && v->ndim >= 2, TP_ERR_SHAPE,
             "expected query, key and value with at least 2 dims (..., L, E), got shapes %s, %s and %s", qb, kb, vb);
    TP_CHECK(tp__dim_eq(tp__dim(q, q->ndim - 1), tp__dim(k, k->ndim - 1), "query and key embedding dims"), TP_ERR_SHAPE,
             "expected query and key to have the same embedding size (last dim), got query shape %s and key shape %s",
             qb, kb);
    TP_CHECK(tp__dim_eq(tp__dim(k, k->ndim - 2), tp__dim(v, v->ndim - 2), "key and value sequence lengths"),
             TP_ERR_SHAPE,
             "expected key and value to have the same sequence length (dim -2), got key shape %s and value shape %s", kb,
             vb);
    int nb;
    int64_t sizes[TP_MAX_DIMS + 2];
    tp_sdim dims[TP_MAX_DIMS + 2];
    TP_TRY(sdpa_batch_shape(q, k, v, &nb, sizes, dims));
    TP_CHECK(nb + 2 <= TP_MAX_DIMS, TP_ERR_SHAPE, "too many batch dims");
    tp_sdim L = tp__dim(q, q->ndim - 2), S = tp__dim(k, k->ndim - 2);
    TP_TRY(check_probability(tp__arg_f64(args, SDPA_DROPOUT)));
    if (mask) {
        TP_CHECK(!tp__arg_bool(args, SDPA_CAUSAL), TP_ERR_INVALID_ARG,
                 "Explicit attn_mask should not be set when is_causal=True");
        TP_CHECK(mask->dtype == TP_BOOL || mask->dtype == TP_FLOAT32 || mask->dtype == q->dtype, TP_ERR_TYPE,
                 "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: %s and "
                 "query.dtype: %s instead.",
                 tp_dtype_name(mask->dtype), tp_dtype_name(q->dtype));
        dims[nb] = L;
        dims[nb + 1] = S;
        sizes[nb] = L.v;
        sizes[nb + 1] = S.v;
        bool ok = mask->ndim <= nb + 2;
        for (int i = 0; ok && i < mask->ndim; i++) {
            tp_sdim m = tp__dim(mask, mask->ndim - 1 - i), t = dims[nb + 1 - i], r;
            ok = tp__dim_broadcast(m, t, &r) && r.v == t.v; /* the mask broadcasts to the weights' shape */
        }
        char mb[128], ab[128];
        TP_CHECK(ok, TP_ERR_SHAPE, "attn_mask of shape %s cannot be broadcast to the attention weights' shape %s",
                 tp__shape_str(mask->ndim, mask->sizes, mb, sizeof mb), tp__shape_str(nb + 2, sizes, ab, sizeof ab));
    }
    dims[nb] = L;
    dims[nb + 1] = tp__dim(v, v->ndim - 1);
    return tp__out_dims(out, q->dtype, nb + 2, dims);
}

/* Strides (elements) of t's leading `nt` dims right-aligned to a batch shape
 * of `nb` dims; broadcast dims get 0. */
/* Stride of t's dim counted from the end (1 = last), 0 if absent or size 1. */
static int64_t tail_stride(const tp_tensor *t, int from_end) {
    int d = t->ndim - from_end;
    return d >= 0 && t->sizes[d] != 1 ? t->strides[d] : 0;
}

static tp_status sdpa_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *q = tp__arg_tensor(args, SDPA_Q), *k = tp__arg_tensor(args, SDPA_K), *v = tp__arg_tensor(args, SDPA_V),
              *mask = tp__arg_tensor(args, SDPA_MASK), *y = tp__out_at(out, 0);
    double dropout_p = tp__arg_f64(args, SDPA_DROPOUT);
    bool causal = tp__arg_bool(args, SDPA_CAUSAL);
    int64_t L = q->sizes[q->ndim - 2], E = q->sizes[q->ndim - 1];
    int64_t S = k->sizes[k->ndim - 2], Ev = v->sizes[v->ndim - 1];
    double scale = tp__arg_is_none(args, SDPA_SCALE) ? 1.0 / sqrt((double)E) : tp__arg_f64(args, SDPA_SCALE);
    if (tp_tensor_numel(y) == 0) return TP_OK;

    int nb;
    int64_t batch[TP_MAX_DIMS];
    TP_TRY(sdpa_batch_shape(q, k, v, &nb, batch, NULL));
    int64_t qbs[TP_MAX_DIMS], kbs[TP_MAX_DIMS], vbs[TP_MAX_DIMS], mbs[TP_MAX_DIMS], ybs[TP_MAX_DIMS];
    tp__broadcast_strides(q, q->ndim - 2, nb, batch, qbs);
    tp__broadcast_strides(k, k->ndim - 2, nb, batch, kbs);
    tp__broadcast_strides(v, v->ndim - 2, nb, batch, vbs);
    tp__broadcast_strides(y, nb, nb, batch, ybs);
    int64_t mls = 0, mss = 0;
    if (mask) {
        tp__broadcast_strides(mask, mask->ndim - 2, nb, batch, mbs);
        mls = tail_stride(mask, 2);
        mss = tail_stride(mask, 1);
    }
    int64_t qls = q->strides[q->ndim - 2], qes = q->strides[q->ndim - 1];
    int64_t kss = k->strides[k->ndim - 2], kes = k->strides[k->ndim - 1];
    int64_t vss = v->strides[v->ndim - 2], ves = v->strides[v->ndim - 1];
    int64_t yls = y->strides[nb], yes = y->strides[nb + 1];
    const char *qb = tp__tensor_base(q), *kb = tp__tensor_base(k), *vb = tp__tensor_base(v);
    const char *mb = mask ? tp__tensor_base(mask) : NULL;
    char *yb = tp__tensor_base(y);
    uint64_t rng = dropout_p > 0.0 ? tp__rng_seed() : 0;

    double *w;
    TP_TRY(alloc_f64(S, &w));
    /* Walk the batch: offsets of q, k in slot 0/1, then v, mask, y in a
     * second walk kept in step. */
    tp_walk wqk, wvy, wm;
    tp__walk_init(&wqk, nb, batch, 2, (const int64_t *[]){qbs, kbs});
    tp__walk_init(&wvy, nb, batch, 2, (const int64_t *[]){vbs, ybs});
    tp__walk_init(&wm, nb, batch, 2, (const int64_t *[]){mask ? mbs : NULL, NULL});
    while (tp__walk_next(&wqk)) {
        tp__walk_next(&wvy);
        tp__walk_next(&wm);
        for (int64_t l = 0; l < L; l++) {
            bool all_masked = true;
            for (int64_t s = 0; s < S; s++) {
                double score = 0.0;
                for (int64_t e = 0; e < E; e++)
                    score += load_at(qb, wqk.off[0] + l * qls + e * qes, q->dtype) *
                             load_at(kb, wqk.off[1] + s * kss + e * kes, k->dtype);
                if (E > 0) score *= scale;
                if (causal && s > l) score = -INFINITY;
                if (mask) {
                    double m = load_at(mb, wm.off[0] + l * mls + s * mss, mask->dtype);
                    if (mask->dtype == TP_BOOL) score = m != 0.0 ? score : -INFINITY;
                    else score += m;
                }
                w[s] = score;
                if (!(isinf(score) && score < 0)) all_masked = false;
            }
            /* Fully masked rows give zeros (PyTorch's _safe_softmax). */
            if (!all_masked) {
                double max = -INFINITY, sum = 0.0;
                for (int64_t s = 0; s < S; s++)
                    if (w[s] > max || isnan(w[s])) max = isnan(max) ? max : w[s];
                for (int64_t s = 0; s < S; s++) sum += (w[s] = exp(w[s] - max));
                for (int64_t s = 0; s < S; s++) w[s] /= sum;
                if (dropout_p > 0.0)
                    for (int64_t s = 0; s < S; s++)
                        w[s] *= tp__rng_uniform(&rng) < 1.0 - dropout_p ? 1.0 / (1.0 - dropout_p) : 0.0;
            }
            for (int64_t e = 0; e < Ev; e++) {
                double acc = 0.0;
                if (!all_masked)
                    for (int64_t s = 0; s < S; s++) acc += w[s] * load_at(vb, wvy.off[0] + s * vss + e * ves, v->dtype);
                store_at(yb, wvy.off[1] + l * yls + e * yes, y->dtype, acc);
            }
        }
    }
    tp_free(w);
    return TP_OK;
}

/* ---- registration ------------------------------------------------------- */

/* ---- RNN cells -----------------------------------------------------------
 * rnn_tanh_cell / rnn_relu_cell / gru_cell(input, hx, w_ih, w_hh, b_ih, b_hh)
 * and lstm_cell(input, hx, cx, w_ih, w_hh, b_ih, b_hh) -> (hy, cy): one time
 * step, PyTorch's gate layout (w_ih rows: GRU r, z, n; LSTM i, f, g, o).
 * input is (batch, input_size), the states (batch, hidden_size); weights
 * (gates * hidden, input_size) and (gates * hidden, hidden_size), biases
 * (gates * hidden). The matrix products run in double. */

typedef enum { CELL_TANH, CELL_RELU, CELL_GRU, CELL_LSTM } rnn_cell_kind;

static int cell_gates(rnn_cell_kind k) { return k == CELL_GRU ? 3 : k == CELL_LSTM ? 4 : 1; }

typedef struct {
    tp_tensor *x, *h, *c, *wih, *whh, *bih, *bhh;
} rnn_cell_args;

static tp_status cell_args(const tp_value *args, rnn_cell_kind k, rnn_cell_args *a) {
    int i = 0;
    memset(a, 0, sizeof *a);
    TP_TRY(arg_tensor(args, i++, "input", &a->x));
    TP_TRY(arg_tensor(args, i++, "hx", &a->h));
    if (k == CELL_LSTM) TP_TRY(arg_tensor(args, i++, "cx", &a->c));
    TP_TRY(arg_tensor(args, i++, "w_ih", &a->wih));
    TP_TRY(arg_tensor(args, i++, "w_hh", &a->whh));
    TP_TRY(arg_opt_tensor(args, i++, "b_ih", &a->bih));
    TP_TRY(arg_opt_tensor(args, i, "b_hh", &a->bhh));
    return TP_OK;
}

/* One state against the input: PyTorch's check_rnn_cell_forward_hidden. */
static tp_status check_cell_state(const tp_tensor *x, const tp_tensor *h, int64_t hidden, int label) {
    TP_CHECK(h->ndim == 2, TP_ERR_SHAPE, "hidden%d must be 2-D (batch, hidden_size), got %d dims", label, h->ndim);
    TP_CHECK(tp__dim_eq(tp__dim(x, 0), tp__dim(h, 0), "input batch == hidden batch"), TP_ERR_SHAPE,
             "Input batch size %" PRId64 " doesn't match hidden%d batch size %" PRId64, x->sizes[0], label,
             h->sizes[0]);
    TP_CHECK(tp__dim_eqk(tp__dim(h, 1), hidden, "hidden_size"), TP_ERR_SHAPE,
             "hidden%d has inconsistent hidden_size: got %" PRId64 ", expected %" PRId64, label, h->sizes[1], hidden);
    return TP_OK;
}

static tp_status cell_check(const tp_value *args, rnn_cell_kind k, rnn_cell_args *a, int64_t *hidden_out) {
    TP_TRY(cell_args(args, k, a));
    const tp_tensor *x = a->x;
    TP_TRY(check_float(x, "input"));
    const tp_tensor *all[] = {a->h, a->c, a->wih, a->whh, a->bih, a->bhh};
    static const char *names[] = {"hx", "cx", "w_ih", "w_hh", "b_ih", "b_hh"};
    for (int i = 0; i < 6; i++)
        TP_CHECK(!all[i] || all[i]->dtype == x->dtype, TP_ERR_TYPE, "expected %s to have dtype %s (as the input), got %s",
                 names[i], tp_dtype_name(x->dtype), tp_dtype_name(all[i]->dtype));
    TP_CHECK(x->ndim >= 2, TP_ERR_INDEX, "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
    TP_CHECK(x->ndim == 2, TP_ERR_SHAPE, "input must be 2-D (batch, input_size), got %d dims", x->ndim);
    TP_CHECK(a->wih->ndim == 2 && a->whh->ndim == 2, TP_ERR_SHAPE, "w_ih and w_hh must be 2-D, got %d and %d dims",
             a->wih->ndim, a->whh->ndim);
    TP_CHECK(tp__dim_eq(tp__dim(x, 1), tp__dim(a->wih, 1), "input_size"), TP_ERR_SHAPE,
             "input has inconsistent input_size: got %" PRId64 " expected %" PRId64, x->sizes[1], a->wih->sizes[1]);
    int g = cell_gates(k);
    int64_t rows = a->wih->sizes[0], hidden = k == CELL_LSTM ? rows / 4 : a->whh->sizes[1];
    TP_TRY(check_cell_state(x, a->h, hidden, 0));
    if (a->c) TP_TRY(check_cell_state(x, a->c, hidden, 1));
    TP_CHECK(rows == g * hidden && a->whh->sizes[0] == g * hidden && a->whh->sizes[1] == hidden, TP_ERR_SHAPE,
             "w_ih of shape [%" PRId64 ", %" PRId64 "] and w_hh of shape [%" PRId64 ", %" PRId64
             "] do not fit %d gate(s) of hidden_size %" PRId64,
             a->wih->sizes[0], a->wih->sizes[1], a->whh->sizes[0], a->whh->sizes[1], g, hidden);
    const tp_tensor *b[2] = {a->bih, a->bhh};
    for (int i = 0; i < 2; i++)
        TP_CHECK(!b[i] || (b[i]->ndim == 1 && b[i]->sizes[0] == g * hidden), TP_ERR_SHAPE,
                 "%s must be 1-D of %" PRId64 " elements", i == 0 ? "b_ih" : "b_hh", g * hidden);
    *hidden_out = hidden;
    return TP_OK;
}

static tp_status cell_infer(const tp_value *args, tp_value *out, rnn_cell_kind k) {
    rnn_cell_args a;
    int64_t hidden;
    TP_TRY(cell_check(args, k, &a, &hidden));
    if (k != CELL_LSTM) return out_like(out, a.h, a.x->dtype);
    TP_TRY(tp__out_tuple(out, 2));
    TP_TRY(out_like(tp_value_at(out, 0), a.h, a.x->dtype));
    return out_like(tp_value_at(out, 1), a.h, a.x->dtype);
}

/* dst[b][j] = sum_k m[b][k] * w[j][k] + bias[j] for b < nb, j < nj. */
static void cell_product(const double *m, const double *w, const double *bias, int64_t nb, int64_t nj, int64_t nk,
                         double *dst) {
    for (int64_t b = 0; b < nb; b++)
        for (int64_t j = 0; j < nj; j++) {
            double s = bias ? bias[j] : 0.0;
            for (int64_t q = 0; q < nk; q++) s += m[b * nk + q] * w[j * nk + q];
            dst[b * nj + j] = s;
        }
}

static double sigmoid_d(double v) { return 1.0 / (1.0 + exp(-v)); }

/* Unit j of one step from the gate pre-activations pi (input side) and ph
 * (recurrent side) of one batch entry: the new hidden value; for the LSTM
 * *c is the cell value, replaced by the new one (rounded to dtype). */
static double cell_unit(rnn_cell_kind k, const double *pi, const double *ph, int64_t hidden, int64_t j, double hv,
                        double *c, tp_dtype dtype) {
    switch (k) {
    case CELL_TANH: return tanh(pi[j] + ph[j]);
    case CELL_RELU: return pi[j] + ph[j] > 0.0 ? pi[j] + ph[j] : 0.0;
    case CELL_GRU: {
        double r = sigmoid_d(pi[j] + ph[j]), z = sigmoid_d(pi[hidden + j] + ph[hidden + j]);
        double n = tanh(pi[2 * hidden + j] + r * ph[2 * hidden + j]);
        return (1.0 - z) * n + z * hv;
    }
    default: {
        double ig = sigmoid_d(pi[j] + ph[j]), fg = sigmoid_d(pi[hidden + j] + ph[hidden + j]);
        double cg = tanh(pi[2 * hidden + j] + ph[2 * hidden + j]), og = sigmoid_d(pi[3 * hidden + j] + ph[3 * hidden + j]);
        *c = round_to_dtype(fg * *c + ig * cg, dtype);
        return og * tanh(*c);
    }
    }
}

static tp_status cell_kernel(const tp_value *args, tp_value *out, rnn_cell_kind k) {
    rnn_cell_args a;
    int64_t hidden;
    TP_TRY(cell_check(args, k, &a, &hidden));
    int64_t nb = a.x->sizes[0], nin = a.x->sizes[1], gh = cell_gates(k) * hidden;
    double *buf[8] = {0};
    const tp_tensor *src[6] = {a.x, a.h, a.c, a.wih, a.whh, a.bih};
    tp_status st = TP_OK;
    for (int i = 0; i < 6 && st == TP_OK; i++) st = load_all(src[i], &buf[i]);
    if (st == TP_OK) st = load_all(a.bhh, &buf[6]);
    double *gi = NULL, *gg = NULL;
    if (st == TP_OK) st = alloc_f64(nb * gh, &gi);
    if (st == TP_OK) st = alloc_f64(nb * gh, &gg);
    if (st == TP_OK) {
        const double *x = buf[0], *h = buf[1], *c = buf[2];
        cell_product(x, buf[3], buf[5], nb, gh, nin, gi);
        cell_product(h, buf[4], buf[6], nb, gh, hidden, gg);
        tp_tensor *hy = tp__out_at(out, 0), *cy = k == CELL_LSTM ? tp__out_at(out, 1) : NULL;
        char *hb = tp__tensor_base(hy), *cb = cy ? tp__tensor_base(cy) : NULL;
        for (int64_t b = 0; b < nb; b++)
            for (int64_t j = 0; j < hidden; j++) {
                int64_t o = b * hy->strides[0] + j * hy->strides[1];
                double cv = k == CELL_LSTM ? c[b * hidden + j] : 0.0;
                double v = cell_unit(k, gi + b * gh, gg + b * gh, hidden, j, h[b * hidden + j], &cv, hy->dtype);
                if (k == CELL_LSTM) store_at(cb, b * cy->strides[0] + j * cy->strides[1], cy->dtype, cv);
                store_at(hb, o, hy->dtype, v);
            }
    }
    for (int i = 0; i < 8; i++) tp_free(buf[i]);
    tp_free(gi);
    tp_free(gg);
    return st;
}

static tp_status rnn_tanh_cell_infer(const tp_value *args, tp_value *out) { return cell_infer(args, out, CELL_TANH); }
static tp_status rnn_tanh_cell_kernel(const tp_value *args, tp_value *out) { return cell_kernel(args, out, CELL_TANH); }
static tp_status rnn_relu_cell_infer(const tp_value *args, tp_value *out) { return cell_infer(args, out, CELL_RELU); }
static tp_status rnn_relu_cell_kernel(const tp_value *args, tp_value *out) { return cell_kernel(args, out, CELL_RELU); }
static tp_status gru_cell_infer(const tp_value *args, tp_value *out) { return cell_infer(args, out, CELL_GRU); }
static tp_status gru_cell_kernel(const tp_value *args, tp_value *out) { return cell_kernel(args, out, CELL_GRU); }
static tp_status lstm_cell_infer(const tp_value *args, tp_value *out) { return cell_infer(args, out, CELL_LSTM); }
static tp_status lstm_cell_kernel(const tp_value *args, tp_value *out) { return cell_kernel(args, out, CELL_LSTM); }

/* ---- whole-sequence RNNs --------------------------------------------------
 * lstm(input, hx[h0, c0], params, has_biases, num_layers, dropout, train,
 * bidirectional, batch_first) -> (output, h_n, c_n); gru / rnn_tanh /
 * rnn_relu(input, hx, params, ...) -> (output, h_n): PyTorch's aten.lstm /
 * gru / rnn_* .input. input (T, B, I) ((B, T, I) batch_first; nn.LSTM's
 * unbatched form is the module's, not the op's); states (L*D, B, H); params per
 * layer and direction w_ih (G*H, I_l), w_hh (G*H, H), then b_ih, b_hh when
 * has_biases (I_l = I for layer 0, D*H after); output (T, B, D*H) with the
 * directions side by side. The cells' arithmetic (the gate products in
 * double, every state rounded to the dtype after each step, as a run of
 * the cell ops would). Dropout between layers only acts in training mode,
 * where it is random: refused. LSTM projections (proj_size) are not
 * supported. */

typedef struct {
    rnn_cell_kind kind;
    const tp_tensor *x, *h0, *c0;
    const tp_value *params;
    bool biases, bidir, batch_first;
    int64_t layers, dirs, per, T, B, I, H, G;
} rnn_seq;

static tp_status rnn_seq_check(const tp_value *args, rnn_cell_kind k, rnn_seq *r) {
    memset(r, 0, sizeof *r);
    r->kind = k;
    r->x = tp__arg_tensor(args, 0);
    const tp_value *hx = &args[1];
    r->params = &args[2];
    r->biases = tp__arg_bool(args, 3);
    r->layers = tp__arg_int(args, 4);
    double dropout = tp__arg_f64(args, 5);
    bool train = tp__arg_bool(args, 6);
    r->bidir = tp__arg_bool(args, 7);
    r->batch_first = tp__arg_bool(args, 8);
    const char *name = k == CELL_LSTM ? "lstm" : k == CELL_GRU ? "gru" : k == CELL_TANH ? "rnn_tanh" : "rnn_relu";
    TP_TRY(check_float(r->x, "input"));
    TP_CHECK(r->x->ndim == 3, TP_ERR_SHAPE, "%s: input must be 3-D (%s), got %d dims", name,
             r->batch_first ? "batch, seq, feature" : "seq, batch, feature", r->x->ndim);
    TP_CHECK(r->layers >= 1 && r->layers <= 1024, TP_ERR_INVALID_ARG, "%s: num_layers must be 1 to 1024, got %" PRId64,
             name, r->layers);
    TP_CHECK(!(train && dropout > 0 && r->layers > 1), TP_ERR_UNSUPPORTED,
             "%s: dropout %g between layers in training mode is random: not supported", name, dropout);
    r->dirs = r->bidir ? 2 : 1;
    r->G = cell_gates(k);
    r->per = r->biases ? 4 : 2;
    int64_t n_params = tp_value_len(r->params);
    TP_CHECK(n_params == r->layers * r->dirs * r->per, TP_ERR_SHAPE,
             "%s: expected %" PRId64 " parameter tensors (%" PRId64 " layer(s), %" PRId64 " direction(s), %" PRId64
             " each), got %" PRId64 "%s",
             name, r->layers * r->dirs * r->per, r->layers, r->dirs, r->per, n_params,
             k == CELL_LSTM && n_params == r->layers * r->dirs * (r->per + 1) ? " (LSTM projections are not supported)"
                                                                               : "");
    if (k == CELL_LSTM) {
        TP_CHECK(hx->kind == TP_VAL_LIST || hx->kind == TP_VAL_TUPLE, TP_ERR_TYPE, "lstm: hx must be a list (h0, c0)");
        TP_CHECK(tp_value_len(hx) == 2, TP_ERR_SHAPE, "lstm: hx must hold two tensors (h0, c0), got %" PRId64,
                 tp_value_len(hx));
        r->h0 = tp_value_at(hx, 0)->u.tensor;
        r->c0 = tp_value_at(hx, 1)->u.tensor;
    } else {
        r->h0 = hx->u.tensor;
    }
    const tp_tensor *w0 = tp_value_at(r->params, 0)->u.tensor;
    TP_CHECK(w0->ndim == 2, TP_ERR_SHAPE, "%s: w_ih must be 2-D, got %d dims", name, w0->ndim);
    r->H = w0->sizes[0] / r->G;
    int tdim = r->batch_first ? 1 : 0, bdim = r->batch_first ? 0 : 1;
    r->T = r->x->sizes[tdim];
    r->B = r->x->sizes[bdim];
    r->I = r->x->sizes[2];
    TP_CHECK(tp__dim_ge(tp__dim(r->x, tdim), 1, "rnn sequence length"), TP_ERR_SHAPE,
             "Expected sequence length to be larger than 0 in RNN");
    const tp_tensor *states[2] = {r->h0, r->c0};
    for (int s = 0; s < 2; s++) {
        const tp_tensor *h = states[s];
        if (!h) continue;
        TP_CHECK(h->dtype == r->x->dtype, TP_ERR_TYPE, "%s: expected hx to have dtype %s (as the input), got %s", name,
                 tp_dtype_name(r->x->dtype), tp_dtype_name(h->dtype));
        bool ok = h->ndim == 3 && h->sizes[0] == r->layers * r->dirs && h->sizes[2] == r->H &&
                  tp__dim_eq(tp__dim(h, 1), tp__dim(r->x, bdim), "rnn state batch");
        if (!ok) {
            char want[96];
            snprintf(want, sizeof want, "[%" PRId64 ", %" PRId64 ", %" PRId64 "]", r->layers * r->dirs, r->B, r->H);
            char got[96];
            int at = snprintf(got, sizeof got, "[");
            for (int d = 0; d < h->ndim && at < (int)sizeof got - 24; d++)
                at += snprintf(got + at, sizeof got - (size_t)at, "%s%" PRId64, d ? ", " : "", h->sizes[d]);
            snprintf(got + at, sizeof got - (size_t)at, "]");
            return tp_error(TP_ERR_SHAPE, "%s: expected hidden size %s, got %s", name, want, got);
        }
    }
    for (int64_t l = 0; l < r->layers; l++)
        for (int64_t d = 0; d < r->dirs; d++) {
            int64_t in = l == 0 ? r->I : r->dirs * r->H, base = (l * r->dirs + d) * r->per;
            static const char *const pn[4] = {"w_ih", "w_hh", "b_ih", "b_hh"};
            for (int q = 0; q < r->per; q++) {
                const tp_tensor *p = tp_value_at(r->params, base + q)->u.tensor;
                TP_CHECK(p->dtype == r->x->dtype, TP_ERR_TYPE, "%s: expected %s of layer %" PRId64 " to have dtype %s, got %s",
                         name, pn[q], l, tp_dtype_name(r->x->dtype), tp_dtype_name(p->dtype));
                bool ok = q == 0   ? p->ndim == 2 && p->sizes[0] == r->G * r->H && p->sizes[1] == in
                          : q == 1 ? p->ndim == 2 && p->sizes[0] == r->G * r->H && p->sizes[1] == r->H
                                   : p->ndim == 1 && p->sizes[0] == r->G * r->H;
                if (!ok && q < 2)
                    return tp_error(TP_ERR_SHAPE, "%s: %s of layer %" PRId64 " direction %" PRId64 " must be [%" PRId64
                                    ", %" PRId64 "]", name, pn[q], l, d, r->G * r->H, q == 0 ? in : r->H);
                TP_CHECK(ok, TP_ERR_SHAPE, "%s: %s of layer %" PRId64 " direction %" PRId64 " must be [%" PRId64 "]",
                         name, pn[q], l, d, r->G * r->H);
            }
        }
    return TP_OK;
}

static tp_status rnn_seq_infer(const tp_value *args, tp_value *out, rnn_cell_kind k) {
    rnn_seq r;
    TP_TRY(rnn_seq_check(args, k, &r));
    int n_out = k == CELL_LSTM ? 3 : 2;
    TP_TRY(tp__out_tuple(out, n_out));
    tp_sdim od[3];
    for (int d = 0; d < r.x->ndim; d++) od[d] = tp__dim(r.x, d);
    od[r.x->ndim - 1] = tp__dimk(r.dirs * r.H);
    TP_TRY(tp__out_dims(tp_value_at(out, 0), r.x->dtype, r.x->ndim, od));
    for (int i = 1; i < n_out; i++) TP_TRY(out_like(tp_value_at(out, i), r.h0, r.x->dtype));
    return TP_OK;
}

/* Element offset of x[t][b][i] (any layout, strides of the tensor). */
static int64_t seq_off(const rnn_seq *r, const tp_tensor *x, int64_t t, int64_t b, int64_t i) {
    int td = r->batch_first ? 1 : 0, bd = r->batch_first ? 0 : 1;
    return t * x->strides[td] + b * x->strides[bd] + i * x->strides[2];
}

/* Element offset of state s[k][b][j]. */
static int64_t state_off(const tp_tensor *s, int64_t k, int64_t b, int64_t j) {
    return k * s->strides[0] + b * s->strides[1] + j * s->strides[2];
}

static tp_status rnn_seq_kernel(const tp_value *args, tp_value *out, rnn_cell_kind k) {
    rnn_seq r;
    TP_TRY(rnn_seq_check(args, k, &r));
    int64_t T = r.T, B = r.B, H = r.H, D = r.dirs, GH = r.G * H, W = D * H;
    int64_t maxin = r.I > W ? r.I : W;
    tp_tensor *yo = tp__out_at(out, 0), *hn = tp__out_at(out, 1), *cn = k == CELL_LSTM ? tp__out_at(out, 2) : NULL;
    tp_dtype dt = r.x->dtype;
    double *in = NULL, *nx = NULL, *h = NULL, *c = NULL, *gi = NULL, *gg = NULL, *xt = NULL;
    double *w[4] = {0};
    tp_status st = alloc_f64(T * B * maxin, &in);
    if (st == TP_OK) st = alloc_f64(T * B * W, &nx);
    if (st == TP_OK) st = alloc_f64(B * H, &h);
    if (st == TP_OK) st = alloc_f64(B * H, &c);
    if (st == TP_OK) st = alloc_f64(B * GH, &gi);
    if (st == TP_OK) st = alloc_f64(B * GH, &gg);
    if (st == TP_OK) st = alloc_f64(B * maxin, &xt);
    const char *xb = tp__tensor_base(r.x);
    for (int64_t t = 0; st == TP_OK && t < T; t++) /* the input as [T][B][I] */
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < r.I; i++) in[(t * B + b) * maxin + i] = load_at(xb, seq_off(&r, r.x, t, b, i), dt);
    int64_t nin = r.I;
    for (int64_t l = 0; st == TP_OK && l < r.layers; l++) {
        for (int64_t d = 0; st == TP_OK && d < D; d++) {
            int64_t kk = l * D + d, base = kk * r.per;
            for (int q = 0; q < 4; q++) {
                tp_free(w[q]);
                w[q] = NULL;
            }
            for (int q = 0; st == TP_OK && q < r.per; q++) st = load_all(tp_value_at(r.params, base + q)->u.tensor, &w[q]);
            if (st != TP_OK) break;
            const char *hb = tp__tensor_base(r.h0), *cb = r.c0 ? tp__tensor_base(r.c0) : NULL;
            for (int64_t b = 0; b < B; b++)
                for (int64_t j = 0; j < H; j++) {
                    h[b * H + j] = load_at(hb, state_off(r.h0, kk, b, j), dt);
                    c[b * H + j] = cb ? load_at(cb, state_off(r.c0, kk, b, j), dt) : 0.0;
                }
            for (int64_t step = 0; step < T; step++) {
                int64_t t = d ? T - 1 - step : step;
                for (int64_t b = 0; b < B; b++) memcpy(xt + b * nin, in + (t * B + b) * maxin, (size_t)nin * sizeof *xt);
                cell_product(xt, w[0], w[2], B, GH, nin, gi);
                cell_product(h, w[1], w[3], B, GH, H, gg);
                for (int64_t b = 0; b < B; b++)
                    for (int64_t j = 0; j < H; j++) {
                        double v = cell_unit(k, gi + b * GH, gg + b * GH, H, j, h[b * H + j], &c[b * H + j], dt);
                        nx[(t * B + b) * W + d * H + j] = round_to_dtype(v, dt);
                    }
                for (int64_t b = 0; b < B; b++)
                    for (int64_t j = 0; j < H; j++) h[b * H + j] = nx[(t * B + b) * W + d * H + j];
            }
            char *hnb = tp__tensor_base(hn), *cnb = cn ? tp__tensor_base(cn) : NULL;
            for (int64_t b = 0; b < B; b++)
                for (int64_t j = 0; j < H; j++) {
                    store_at(hnb, state_off(hn, kk, b, j), dt, h[b * H + j]);
                    if (cnb) store_at(cnb, state_off(cn, kk, b, j), dt, c[b * H + j]);
                }
        }
        for (int64_t t = 0; st == TP_OK && t < T; t++) /* this layer's output feeds the next */
            for (int64_t b = 0; b < B; b++) memcpy(in + (t * B + b) * maxin, nx + (t * B + b) * W, (size_t)W * sizeof *in);
        nin = W;
    }
    char *yb = st == TP_OK ? tp__tensor_base(yo) : NULL;
    for (int64_t t = 0; st == TP_OK && t < T; t++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < W; j++) store_at(yb, seq_off(&r, yo, t, b, j), dt, in[(t * B + b) * maxin + j]);
    tp_free(in);
    tp_free(nx);
    tp_free(h);
    tp_free(c);
    tp_free(gi);
    tp_free(gg);
    tp_free(xt);
    for (int q = 0; q < 4; q++) tp_free(w[q]);
    return st;
}

static tp_status lstm_infer(const tp_value *args, tp_value *out) { return rnn_seq_infer(args, out, CELL_LSTM); }
static tp_status lstm_kernel(const tp_value *args, tp_value *out) { return rnn_seq_kernel(args, out, CELL_LSTM); }
static tp_status gru_infer(const tp_value *args, tp_value *out) { return rnn_seq_infer(args, out, CELL_GRU); }
static tp_status gru_kernel(const tp_value *args, tp_value *out) { return rnn_seq_kernel(args, out, CELL_GRU); }
static tp_status rnn_tanh_infer(const tp_value *args, tp_value *out) { return rnn_seq_infer(args, out, CELL_TANH); }
static tp_status rnn_tanh_kernel(const tp_value *args, tp_value *out) { return rnn_seq_kernel(args, out, CELL_TANH); }
static tp_status rnn_relu_infer(const tp_value *args, tp_value *out) { return rnn_seq_infer(args, out, CELL_RELU); }
static tp_status rnn_relu_kernel(const tp_value *args, tp_value *out) { return rnn_seq_kernel(args, out, CELL_RELU); }

/* ---- im2col / col2im (nn.functional unfold / fold) ------------------------
 * im2col(Tensor self, int[] kernel_size, int[] dilation=1, int[] padding=0,
 * int[] stride=1): (N, C, H, W) or (C, H, W) -> (N, C*kh*kw, L) of the
 * sliding blocks (zero outside the input); col2im(Tensor self, int[2]
 * output_size, ...) sums them back into (N, C, H, W). PyTorch's checks and
 * messages (im2col_shape_check / col2im_shape_check). */

typedef struct {
    int64_t k[2], d[2], p[2], s[2];
} block_params;

static tp_status block_params_read(const tp_value *args, int first, block_params *b) {
    int n;
    TP_TRY(tp__arg_ints(args, first, "kernel_size", b->k, 2, 2, &n));
    TP_TRY(tp__arg_ints(args, first + 1, "dilation", b->d, 2, 2, &n));
    TP_TRY(tp__arg_ints(args, first + 2, "padding", b->p, 2, 2, &n));
    TP_TRY(tp__arg_ints(args, first + 3, "stride", b->s, 2, 2, &n));
    TP_CHECK(b->k[0] > 0 && b->k[1] > 0, TP_ERR_INVALID_ARG,
             "kernel size should be greater than zero, but got kernel_height: %" PRId64 " kernel_width: %" PRId64,
             b->k[0], b->k[1]);
    TP_CHECK(b->s[0] > 0 && b->s[1] > 0, TP_ERR_INVALID_ARG,
             "stride should be greater than zero, but got stride_height: %" PRId64 " stride_width: %" PRId64, b->s[0],
             b->s[1]);
    TP_CHECK(b->d[0] > 0 && b->d[1] > 0, TP_ERR_INVALID_ARG,
             "dilation should be greater than zero, but got dilation_height: %" PRId64 " dilation_width: %" PRId64,
             b->d[0], b->d[1]);
    TP_CHECK(b->p[0] >= 0 && b->p[1] >= 0, TP_ERR_INVALID_ARG,
             "padding should be non-negative, but got pad_height: %" PRId64 " pad_width: %" PRId64, b->p[0], b->p[1]);
    const int64_t lim = (int64_t)1 << 31;
    for (int i = 0; i < 2; i++)
        TP_CHECK(b->k[i] < lim && b->d[i] < lim && b->p[i] < lim && b->s[i] < lim, TP_ERR_INVALID_ARG,
                 "kernel_size, dilation, padding and stride must be below 2^31");
    return TP_OK;
}

/* Number of blocks along one dim of size `in`. */
static int64_t block_count(int64_t in, const block_params *b, int i) {
    return (in + 2 * b->p[i] - (b->d[i] * (b->k[i] - 1) + 1)) / b->s[i] + 1;
}

/* block_count over a dim (floor division: a negative numerator, where C's
 * truncating division differs, has no expression). */
static tp_sdim block_dim(tp_sdim in, const block_params *b, int i) {
    tp_sdim num = tp__dim_addk(in, 2 * b->p[i] - (b->d[i] * (b->k[i] - 1) + 1));
    if (num.v < 0) {
        tp__dim_give_up();
        return tp__dimk(block_count(in.v, b, i));
    }
    return tp__dim_addk(tp__dim_floordiv(num, b->s[i]), 1);
}

/* blocks (may be NULL): the block counts as dims. */
static tp_status im2col_check(const tp_value *args, tp_tensor **x, block_params *b, int64_t *oh, int64_t *ow,
                              tp_sdim *blocks) {
    TP_TRY(arg_tensor(args, 0, "self", x));
    TP_TRY(block_params_read(args, 1, b));
    const tp_tensor *t = *x;
    char s1[128];
    TP_CHECK(tp_dtype_is_float(t->dtype), TP_ERR_TYPE, "\"im2col_out_cpu\" not implemented for '%s'",
             tp_dtype_name(t->dtype));
    TP_CHECK(t->ndim == 3 || t->ndim == 4, TP_ERR_SHAPE,
             "Expected 3D or 4D (batch mode) tensor with optional 0 size batch dimension for input, but got: %s",
             tp__shape_str(t->ndim, t->sizes, s1, sizeof s1));
    for (int d = t->ndim - 3; d < t->ndim; d++)
        TP_CHECK(tp__dim_ge(tp__dim(t, d), 1, "im2col: non-empty input dims"), TP_ERR_SHAPE,
                 "Expected 3D or 4D (batch mode) tensor with optional 0 size batch dimension for input, but got: %s",
                 tp__shape_str(t->ndim, t->sizes, s1, sizeof s1));
    int64_t h = t->sizes[t->ndim - 2], w = t->sizes[t->ndim - 1];
    tp_sdim bl[2] = {block_dim(tp__dim(t, t->ndim - 2), b, 0), block_dim(tp__dim(t, t->ndim - 1), b, 1)};
    *oh = bl[0].v;
    *ow = bl[1].v;
    if (blocks) memcpy(blocks, bl, sizeof bl);
    TP_CHECK(tp__dim_ge(bl[0], 1, "im2col: at least one sliding block") &&
                 tp__dim_ge(bl[1], 1, "im2col: at least one sliding block"),
             TP_ERR_SHAPE,
             "Given input with spatial size (%" PRId64 ", %" PRId64 "), kernel_size=(%" PRId64 ", %" PRId64
             "), dilation=(%" PRId64 ", %" PRId64 "), padding=(%" PRId64 ", %" PRId64
             "), calculated shape of the array of sliding blocks as (%" PRId64 ", %" PRId64
             "), but its components must be at least one.",
             h, w, b->k[0], b->k[1], b->d[0], b->d[1], b->p[0], b->p[1], *oh, *ow);
    return TP_OK;
}

static tp_status im2col_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x;
    block_params b;
    int64_t oh, ow;
    tp_sdim blocks[2], dims[3];
    TP_TRY(im2col_check(args, &x, &b, &oh, &ow, blocks));
    tp_sdim c = tp__dim(x, x->ndim - 3);
    int64_t ck;
    int nd = 0;
    if (x->ndim == 4) dims[nd++] = tp__dim(x, 0);
    TP_CHECK(tp_mul_overflow_i64(c.v, b.k[0] * b.k[1], &ck), TP_ERR_INVALID_ARG, "im2col: output too large");
    dims[nd] = tp__dim_mulk(c, b.k[0] * b.k[1]);
    dims[nd + 1] = tp__dim_mul(blocks[0], blocks[1]);
    return tp__out_dims(out, x->dtype, nd + 2, dims);
}

static tp_status im2col_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *x;
    block_params b;
    int64_t oh, ow;
    TP_TRY(im2col_check(args, &x, &b, &oh, &ow, NULL));
    tp_tensor *y = tp__out_at(out, 0);
    bool batched = x->ndim == 4;
    int64_t nb = batched ? x->sizes[0] : 1, c = x->sizes[x->ndim - 3];
    int64_t h = x->sizes[x->ndim - 2], w = x->sizes[x->ndim - 1];
    int64_t xs_n = batched ? x->strides[0] : 0, xs_c = x->strides[x->ndim - 3], xs_h = x->strides[x->ndim - 2],
            xs_w = x->strides[x->ndim - 1];
    const char *xb = tp__tensor_base(x);
    char *yb = tp__tensor_base(y);
    int64_t flat = 0;
    for (int64_t n = 0; n < nb; n++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t i = 0; i < b.k[0]; i++)
                for (int64_t j = 0; j < b.k[1]; j++)
                    for (int64_t oy = 0; oy < oh; oy++)
                        for (int64_t ox = 0; ox < ow; ox++) {
                            int64_t iy = oy * b.s[0] - b.p[0] + i * b.d[0], ix = ox * b.s[1] - b.p[1] + j * b.d[1];
                            double v = 0.0;
                            if (iy >= 0 && iy < h && ix >= 0 && ix < w)
                                v = load_at(xb, n * xs_n + ch * xs_c + iy * xs_h + ix * xs_w, x->dtype);
                            store_at(yb, flat++, y->dtype, v);
                        }
    return TP_OK;
}

static tp_status col2im_check(const tp_value *args, tp_tensor **x, block_params *b, int64_t *osz, int64_t *oh,
                              int64_t *ow) {
    TP_TRY(arg_tensor(args, 0, "self", x));
    int n;
    TP_TRY(tp__arg_ints(args, 1, "output_size", osz, 2, 2, &n));
    TP_TRY(block_params_read(args, 2, b));
    const tp_tensor *t = *x;
    char s1[128];
    TP_CHECK(tp_dtype_is_float(t->dtype), TP_ERR_TYPE, "\"col2im_out_cpu\" not implemented for '%s'",
             tp_dtype_name(t->dtype));
    TP_CHECK(osz[0] > 0 && osz[1] > 0, TP_ERR_INVALID_ARG,
             "output_size should be greater than zero, but got output_height: %" PRId64 " output_width: %" PRId64,
             osz[0], osz[1]);
    TP_CHECK(osz[0] < ((int64_t)1 << 31) && osz[1] < ((int64_t)1 << 31), TP_ERR_INVALID_ARG,
             "output_size must be below 2^31");
    TP_CHECK((t->ndim == 2 || t->ndim == 3) && tp__dim_ge(tp__dim(t, t->ndim - 2), 1, "col2im: non-empty input dims") &&
                 tp__dim_ge(tp__dim(t, t->ndim - 1), 1, "col2im: non-empty input dims"),
             TP_ERR_SHAPE,
             "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions "
             "for input, but got: %s",
             tp__shape_str(t->ndim, t->sizes, s1, sizeof s1));
    int64_t cols = t->sizes[t->ndim - 2], kk = b->k[0] * b->k[1];
    TP_CHECK(tp__dim_divisible(tp__dim(t, t->ndim - 2), kk, "col2im: channels divisible by the kernel size"),
             TP_ERR_SHAPE,
             "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got "
             "input.size(1)=%" PRId64 " and kernel_size=(%" PRId64 ", %" PRId64 ").",
             cols, b->k[0], b->k[1]);
    *oh = block_count(osz[0], b, 0);
    *ow = block_count(osz[1], b, 1);
    int64_t l = t->sizes[t->ndim - 1];
    TP_CHECK(*oh >= 1 && *ow >= 1 && tp__dim_eqk(tp__dim(t, t->ndim - 1), *oh * *ow, "col2im: the sliding blocks"),
             TP_ERR_SHAPE,
             "Given output_size=(%" PRId64 ", %" PRId64 "), kernel_size=(%" PRId64 ", %" PRId64 "), dilation=(%" PRId64
             ", %" PRId64 "), padding=(%" PRId64 ", %" PRId64 "), stride=(%" PRId64 ", %" PRId64
             "), expected size of input's dimension 2 to match the calculated number of sliding blocks %" PRId64
             " * %" PRId64 " = %" PRId64 ", but got input.size(2)=%" PRId64 ".",
             osz[0], osz[1], b->k[0], b->k[1], b->d[0], b->d[1], b->p[0], b->p[1], b->s[0], b->s[1], *oh, *ow,
             *oh * *ow, l);
    return TP_OK;
}

static tp_status col2im_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x;
    block_params b;
    int64_t osz[2], oh, ow;
    TP_TRY(col2im_check(args, &x, &b, osz, &oh, &ow));
    tp_sdim dims[4];
    int nd = 0;
    if (x->ndim == 3) dims[nd++] = tp__dim(x, 0);
    dims[nd++] = tp__dim_floordiv(tp__dim(x, x->ndim - 2), b.k[0] * b.k[1]);
    dims[nd++] = tp__dimk(osz[0]);
    dims[nd++] = tp__dimk(osz[1]);
    return tp__out_dims(out, x->dtype, nd, dims);
}

static tp_status col2im_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *x;
    block_params b;
    int64_t osz[2], oh = 0, ow = 0;
    TP_TRY(col2im_check(args, &x, &b, osz, &oh, &ow));
    tp_tensor *y = tp__out_at(out, 0);
    bool batched = x->ndim == 3;
    int64_t nb = batched ? x->sizes[0] : 1, c = x->sizes[x->ndim - 2] / (b.k[0] * b.k[1]);
    int64_t xs_n = batched ? x->strides[0] : 0, xs_r = x->strides[x->ndim - 2], xs_l = x->strides[x->ndim - 1];
    int64_t plane = osz[0] * osz[1];
    double *acc;
    TP_TRY(alloc_f64(nb * c * plane, &acc));
    const char *xb = tp__tensor_base(x);
    for (int64_t n = 0; n < nb; n++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t i = 0; i < b.k[0]; i++)
                for (int64_t j = 0; j < b.k[1]; j++) {
                    int64_t row = (ch * b.k[0] + i) * b.k[1] + j;
                    for (int64_t oy = 0; oy < oh; oy++)
                        for (int64_t ox = 0; ox < ow; ox++) {
                            int64_t iy = oy * b.s[0] - b.p[0] + i * b.d[0], ix = ox * b.s[1] - b.p[1] + j * b.d[1];
                            if (iy < 0 || iy >= osz[0] || ix < 0 || ix >= osz[1]) continue;
                            acc[(n * c + ch) * plane + iy * osz[1] + ix] +=
                                load_at(xb, n * xs_n + row * xs_r + (oy * ow + ox) * xs_l, x->dtype);
                        }
                }
    char *yb = tp__tensor_base(y);
    for (int64_t q = 0; q < nb * c * plane; q++) store_at(yb, q, y->dtype, acc[q]);
    tp_free(acc);
    return TP_OK;
}

/* ---- pdist(Tensor self, float p=2) -----------------------------------------
 * The p-norm distances between the rows i < j of a 2-D input, in row-major
 * pair order: N*(N-1)/2 values (p = 0 counts differing entries, p = inf the
 * largest difference). */
static tp_status pdist_check(const tp_value *args, tp_tensor **x, double *p) {
    TP_TRY(arg_tensor(args, 0, "self", x));
    *p = tp__arg_f64(args, 1);
    TP_CHECK((*x)->ndim == 2, TP_ERR_SHAPE, "pdist only supports 2D tensors, got: %dD", (*x)->ndim);
    TP_CHECK(tp_dtype_is_float((*x)->dtype), TP_ERR_TYPE, "pdist only supports floating-point dtypes");
    TP_CHECK(*p >= 0.0, TP_ERR_INVALID_ARG, "pdist only supports non-negative p values");
    TP_CHECK((*x)->sizes[0] < ((int64_t)1 << 31), TP_ERR_INVALID_ARG, "pdist: too many rows");
    return TP_OK;
}

static tp_status pdist_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x;
    double p;
    TP_TRY(pdist_check(args, &x, &p));
    tp_sdim n = tp__dim(x, 0); /* N * (N - 1) / 2 (0 for N = 0 and 1 too) */
    tp_sdim sz = tp__dim_floordiv(tp__dim_mul(n, tp__dim_addk(n, -1)), 2);
    return tp__out_dims(out, x->dtype, 1, &sz);
}

static tp_status pdist_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *x;
    double p;
    TP_TRY(pdist_check(args, &x, &p));
    tp_tensor *y = tp__out_at(out, 0);
    int64_t n = x->sizes[0], m = x->sizes[1], k = 0;
    const char *xb = tp__tensor_base(x);
    char *yb = tp__tensor_base(y);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i + 1; j < n; j++) {
            double acc = 0.0;
            for (int64_t q = 0; q < m; q++) {
                double d = fabs(load_at(xb, i * x->strides[0] + q * x->strides[1], x->dtype) -
                                load_at(xb, j * x->strides[0] + q * x->strides[1], x->dtype));
                if (p == 0.0) acc += d != 0.0;
                else if (isinf(p)) acc = d > acc || isnan(d) ? d : acc;
                else if (p == 1.0) acc += d;
                else if (p == 2.0) acc += d * d;
                else acc += pow(d, p);
            }
            if (p == 2.0) acc = sqrt(acc);
            else if (p != 0.0 && p != 1.0 && !isinf(p)) acc = pow(acc, 1.0 / p);
            store_at(yb, k++, y->dtype, acc);
        }
    return TP_OK;
}

/* ---- bilinear(Tensor input1, Tensor input2, Tensor weight, Tensor? bias) ---
 * y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j]
 * + bias[o]; the inputs share their leading dims. */
static tp_status bilinear_check(const tp_value *args, tp_tensor **a, tp_tensor **b, tp_tensor **w, tp_tensor **bias) {
    TP_TRY(arg_tensor(args, 0, "input1", a));
    TP_TRY(arg_tensor(args, 1, "input2", b));
    TP_TRY(arg_tensor(args, 2, "weight", w));
    TP_TRY(arg_opt_tensor(args, 3, "bias", bias));
    const tp_tensor *x1 = *a, *x2 = *b, *wt = *w, *bs = *bias;
    TP_TRY(check_float(x1, "input1"));
    const tp_tensor *all[3] = {x2, wt, bs};
    static const char *names[3] = {"input2", "weight", "bias"};
    for (int i = 0; i < 3; i++)
        TP_CHECK(!all[i] || all[i]->dtype == x1->dtype, TP_ERR_TYPE,
                 "expected %s to have dtype %s (as input1), got %s", names[i], tp_dtype_name(x1->dtype),
                 tp_dtype_name(all[i]->dtype));
    TP_CHECK(x1->ndim == x2->ndim, TP_ERR_SHAPE, "bilinear(): input dimensions do not match: got %d and %d", x1->ndim,
             x2->ndim);
    TP_CHECK(x1->ndim >= 1, TP_ERR_SHAPE, "bilinear(): inputs must have at least one dim");
    for (int d = 0; d < x1->ndim - 1; d++)
        TP_CHECK(tp__dim_eq(tp__dim(x1, d), tp__dim(x2, d), "bilinear: inputs' batch dims match"), TP_ERR_SHAPE,
                 "bilinear(): input batch dimensions do not match at dim %d: got %" PRId64 " and %" PRId64, d,
                 x1->sizes[d], x2->sizes[d]);
    TP_CHECK(wt->ndim == 3, TP_ERR_SHAPE, "bilinear(): weight must be 3-D, got %d dims", wt->ndim);
    TP_CHECK(tp__dim_eq(tp__dim(x1, x1->ndim - 1), tp__dim(wt, 1), "bilinear: input1 features == weight.shape[1]"),
             TP_ERR_SHAPE,
             "bilinear(): input1 size does not match weight size: got %" PRId64 " but expected %" PRId64,
             x1->sizes[x1->ndim - 1], wt->sizes[1]);
    TP_CHECK(tp__dim_eq(tp__dim(x2, x2->ndim - 1), tp__dim(wt, 2), "bilinear: input2 features == weight.shape[2]"),
             TP_ERR_SHAPE,
             "bilinear(): input2 size does not match weight size: got %" PRId64 " but expected %" PRId64,
             x2->sizes[x2->ndim - 1], wt->sizes[2]);
    TP_CHECK(!bs || (bs->ndim == 1 && tp__dim_eq(tp__dim(bs, 0), tp__dim(wt, 0), "bilinear: bias size")), TP_ERR_SHAPE,
             "bilinear(): bias size does not match weight size: got %" PRId64 " but expected %" PRId64,
             bs ? (bs->ndim >= 1 ? bs->sizes[bs->ndim - 1] : 1) : 0, wt->sizes[0]);
    return TP_OK;
}

static tp_status bilinear_infer(const tp_value *args, tp_value *out) {
    tp_tensor *a, *b, *w, *bias;
    TP_TRY(bilinear_check(args, &a, &b, &w, &bias));
    tp_sdim dims[TP_MAX_DIMS];
    tp__dims(a, dims);
    dims[a->ndim - 1] = tp__dim(w, 0);
    return tp__out_dims(out, a->dtype, a->ndim, dims);
}

static tp_status bilinear_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *a, *b, *w, *bias;
    TP_TRY(bilinear_check(args, &a, &b, &w, &bias));
    tp_tensor *y = tp__out_at(out, 0);
    int64_t n1 = a->sizes[a->ndim - 1], n2 = b->sizes[b->ndim - 1], no = w->sizes[0];
    int64_t rows = n1 > 0 ? tp_tensor_numel(a) / n1 : 0;
    if (n1 == 0) rows = no > 0 ? tp_tensor_numel(y) / no : 0;
    double *x1, *x2, *wt, *bs;
    tp_status st = load_all(a, &x1);
    if (st != TP_OK) return st;
    st = load_all(b, &x2);
    if (st == TP_OK) st = load_all(w, &wt);
    else wt = NULL;
    bs = NULL;
    if (st == TP_OK) st = load_all(bias, &bs);
    if (st == TP_OK) {
        char *yb = tp__tensor_base(y);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t o = 0; o < no; o++) {
                double acc = bs ? bs[o] : 0.0;
                for (int64_t i = 0; i < n1; i++) {
                    double inner = 0.0;
                    for (int64_t j = 0; j < n2; j++) inner += wt[(o * n1 + i) * n2 + j] * x2[r * n2 + j];
                    acc += x1[r * n1 + i] * inner;
                }
                store_at(yb, r * no + o, y->dtype, acc);
            }
    }
    tp_free(x1);
    tp_free(x2);
    tp_free(wt);
    tp_free(bs);
    return st;
}

/* ---- conv_tbc(Tensor self, Tensor weight, Tensor? bias=None, int pad=0) ------
 * A 1-d convolution over time of a (time, batch, in) input with a (kernel,
 * in, out) weight: out[t][b][o] = bias[o] + sum_k sum_c x[t + k - pad][b][c] *
 * w[k][c][o], time T + 2 * pad - K + 1 (PyTorch's checks and messages). */
static tp_status conv_tbc_check(const tp_value *args, tp_tensor **x, tp_tensor **w, tp_tensor **b, tp_sdim *tout) {
    TP_TRY(arg_tensor(args, 0, "self", x));
    TP_TRY(arg_tensor(args, 1, "weight", w));
    TP_TRY(arg_opt_tensor(args, 2, "bias", b));
    TP_TRY(check_float(*x, "input"));
    const tp_tensor *all[2] = {*w, *b};
    for (int i = 0; i < 2; i++)
        TP_CHECK(!all[i] || all[i]->dtype == (*x)->dtype, TP_ERR_TYPE,
                 "expected %s to have dtype %s (as the input), got %s", i ? "bias" : "weight",
                 tp_dtype_name((*x)->dtype), tp_dtype_name(all[i]->dtype));
    TP_CHECK((*x)->ndim == 3, TP_ERR_SHAPE, "Input must have 3 dims: time, batch, in_channel");
    TP_CHECK((*w)->ndim == 3, TP_ERR_SHAPE, "Weight tensor must have 3 dims: kernel_width, in_channels, out_channels.");
    TP_CHECK(!*b || (*b)->ndim == 1, TP_ERR_SHAPE, "Bias must be 1-D");
    TP_CHECK(tp__dim_eq(tp__dim(*x, 2), tp__dim(*w, 1), "conv_tbc: input channels == weight.shape[1]"), TP_ERR_SHAPE,
             "Input dim 2 (input channels) is not == dim 1 in the weight tensor");
    TP_CHECK(!*b || tp__dim_eq(tp__dim(*b, 0), tp__dim(*w, 2), "conv_tbc: bias size"), TP_ERR_SHAPE,
             "Bias size must equal dim 2 in the weight tensor (output channels).");
    int64_t pad = tp__arg_int(args, 3);
    TP_CHECK(pad >= 0 && pad < ((int64_t)1 << 40), TP_ERR_INVALID_ARG, "conv_tbc: pad must be in [0, 2^40), got %" PRId64,
             pad);
    *tout = tp__dim_sub(tp__dim_addk(tp__dim(*x, 0), 2 * pad + 1), tp__dim(*w, 0));
    TP_CHECK(tp__dim_ge(*tout, 0, "conv_tbc: output time"), TP_ERR_SHAPE,
             "Trying to create tensor with negative dimension %" PRId64 ": [%" PRId64 ", %" PRId64 ", %" PRId64 "]",
             tout->v, tout->v, (*x)->sizes[1], (*w)->sizes[2]);
    return TP_OK;
}

static tp_status conv_tbc_infer(const tp_value *args, tp_value *out) {
    tp_tensor *x, *w, *b;
    tp_sdim t = tp__dimk(0);
    TP_TRY(conv_tbc_check(args, &x, &w, &b, &t));
    return tp__out_dims(out, x->dtype, 3, (tp_sdim[]){t, tp__dim(x, 1), tp__dim(w, 2)});
}

static tp_status conv_tbc_kernel(const tp_value *args, tp_value *out) {
    tp_tensor *x, *w, *b;
    tp_sdim td = tp__dimk(0);
    TP_TRY(conv_tbc_check(args, &x, &w, &b, &td));
    int64_t t = td.v;
    tp_tensor *y = tp__out_at(out, 0);
    int64_t nt = x->sizes[0], nb = x->sizes[1], nc = x->sizes[2], nk = w->sizes[0], no = w->sizes[2];
    int64_t pad = tp__arg_int(args, 3);
    const char *xb = tp__tensor_base(x), *wb = tp__tensor_base(w), *bb = b ? tp__tensor_base(b) : NULL;
    char *yb = tp__tensor_base(y);
    for (int64_t ot = 0; ot < t; ot++)
        for (int64_t ib = 0; ib < nb; ib++)
            for (int64_t o = 0; o < no; o++) {
                double acc = bb ? load_at(bb, o * b->strides[0], b->dtype) : 0.0;
                for (int64_t k = 0; k < nk; k++) {
                    int64_t it = ot + k - pad;
                    if (it < 0 || it >= nt) continue;
                    for (int64_t c = 0; c < nc; c++)
                        acc += load_at(xb, it * x->strides[0] + ib * x->strides[1] + c * x->strides[2], x->dtype) *
                               load_at(wb, k * w->strides[0] + c * w->strides[1] + o * w->strides[2], w->dtype);
                }
                store_at(yb, (ot * nb + ib) * no + o, y->dtype, acc);
            }
    return TP_OK;
}

void tp__register_nn_ops(void) {
    tp__register_op(TP_OP_BATCH_NORM,
                    "batch_norm(Tensor input, Tensor? running_mean, Tensor? running_var, Tensor? weight=None, "
                    "Tensor? bias=None, bool training=False, float momentum=0.1, float eps=1e-05) -> Tensor",
                    TP_OPF_MUTATES | TP_OPF_EFFECTFUL, batch_norm_infer, batch_norm_kernel);
    tp__register_op(TP_OP_LAYER_NORM,
                    "layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
                    "float eps=1e-05) -> Tensor",
                    0, layer_norm_infer, layer_norm_kernel);
    tp__register_op(TP_OP_GROUP_NORM,
                    "group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, "
                    "float eps=1e-05) -> Tensor",
                    0, group_norm_infer, group_norm_kernel);
    tp__register_op(TP_OP_SOFTMAX, "softmax(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", 0,
                    softmax_infer, softmax_kernel);
    tp__register_op(TP_OP_LOG_SOFTMAX, "log_softmax(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", 0,
                    softmax_infer, log_softmax_kernel);
    tp__register_op(TP_OP_PRELU, "prelu(Tensor self, Tensor weight) -> Tensor", 0, prelu_infer, prelu_kernel);
    tp__register_op(TP_OP_GLU, "glu(Tensor self, int dim=-1) -> Tensor", 0, glu_infer, glu_kernel);
    tp__register_op(TP_OP_EMBEDDING_RENORM_,
                    "embedding_renorm_(Tensor self, Tensor indices, float max_norm, float norm_type) -> Tensor",
                    TP_OPF_INPLACE | TP_OPF_MUTATES, embedding_renorm_infer, embedding_renorm_kernel);
    tp__register_op(TP_OP_EMBEDDING,
                    "embedding(Tensor weight, Tensor indices, int padding_idx=-1, bool scale_grad_by_freq=False, "
                    "bool sparse=False) -> Tensor",
                    0, embedding_infer, embedding_kernel);
    tp__register_op(TP_OP_EMBEDDING_BAG,
                    "embedding_bag(Tensor input, Tensor weight, Tensor? offsets=None, str mode='mean', "
                    "Tensor? per_sample_weights=None, bool include_last_offset=False, int? padding_idx=None) -> Tensor",
                    0, embedding_bag_infer, embedding_bag_kernel);
    tp__register_op(TP_OP_MULTI_HEAD_ATTENTION_FORWARD,
                    "multi_head_attention_forward(Tensor query, Tensor key, Tensor value, int embed_dim_to_check, "
                    "int num_heads, Tensor? in_proj_weight, Tensor? in_proj_bias, Tensor? bias_k, Tensor? bias_v, "
                    "bool add_zero_attn, float dropout_p, Tensor out_proj_weight, Tensor? out_proj_bias, "
                    "bool training=True, Tensor? key_padding_mask=None, bool need_weights=True, "
                    "Tensor? attn_mask=None, bool use_separate_proj_weight=False, Tensor? q_proj_weight=None, "
                    "Tensor? k_proj_weight=None, Tensor? v_proj_weight=None, Tensor? static_k=None, "
                    "Tensor? static_v=None, bool average_attn_weights=True, bool is_causal=False) -> (Tensor, Tensor)",
                    0, mha_infer, mha_kernel);
    tp__register_op(TP_OP_DROPOUT, "dropout(Tensor input, float p=0.5, bool train=False) -> Tensor", TP_OPF_RANDOM,
                    dropout_infer, dropout_kernel);
    tp__register_op(TP_OP_SOFTMIN, "softmin(Tensor self, int? dim=None, ScalarType? dtype=None) -> Tensor", 0,
                    softmax_infer, softmin_kernel);
    tp__register_op(TP_OP_ALPHA_DROPOUT, "alpha_dropout(Tensor input, float p, bool train) -> Tensor", TP_OPF_RANDOM,
                    alpha_dropout_infer, alpha_dropout_kernel);
    tp__register_op(TP_OP_FEATURE_DROPOUT, "feature_dropout(Tensor input, float p, bool train) -> Tensor",
                    TP_OPF_RANDOM, feature_dropout_infer, feature_dropout_kernel);
    tp__register_op(TP_OP_FEATURE_ALPHA_DROPOUT, "feature_alpha_dropout(Tensor input, float p, bool train) -> Tensor",
                    TP_OPF_RANDOM, feature_alpha_dropout_infer, feature_alpha_dropout_kernel);
    tp__register_op(TP_OP_SCALED_DOT_PRODUCT_ATTENTION,
                    "scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, "
                    "float dropout_p=0.0, bool is_causal=False, *, float? scale=None) -> Tensor",
                    TP_OPF_RANDOM, sdpa_infer, sdpa_kernel);
    tp__register_op(TP_OP_INSTANCE_NORM,
                    "instance_norm(Tensor input, Tensor? weight=None, Tensor? bias=None, Tensor? running_mean=None, "
                    "Tensor? running_var=None, bool use_input_stats=True, float momentum=0.1, float eps=1e-05) -> Tensor",
                    TP_OPF_MUTATES | TP_OPF_EFFECTFUL, instance_norm_infer, instance_norm_kernel);
    tp__register_op(TP_OP_RMS_NORM,
                    "rms_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor", 0,
                    rms_norm_infer, rms_norm_kernel);
    tp__register_op(TP_OP_LOCAL_RESPONSE_NORM,
                    "local_response_norm(Tensor input, int size, float alpha=0.0001, float beta=0.75, float k=1.0) -> "
                    "Tensor",
                    0, lrn_infer, lrn_kernel);
    tp__register_op(TP_OP_RNN_TANH_CELL,
                    "rnn_tanh_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, "
                    "Tensor? b_hh=None) -> Tensor",
                    0, rnn_tanh_cell_infer, rnn_tanh_cell_kernel);
    tp__register_op(TP_OP_RNN_RELU_CELL,
                    "rnn_relu_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, "
                    "Tensor? b_hh=None) -> Tensor",
                    0, rnn_relu_cell_infer, rnn_relu_cell_kernel);
    tp__register_op(TP_OP_GRU_CELL,
                    "gru_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, "
                    "Tensor? b_hh=None) -> Tensor",
                    0, gru_cell_infer, gru_cell_kernel);
    tp__register_op(TP_OP_LSTM_CELL,
                    "lstm_cell(Tensor input, Tensor hx, Tensor cx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, "
                    "Tensor? b_hh=None) -> (Tensor, Tensor)",
                    0, lstm_cell_infer, lstm_cell_kernel);
#define RNN_SEQ_ARGS "Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, bool bidirectional, " \
                     "bool batch_first"
    tp__register_op(TP_OP_LSTM, "lstm(Tensor input, Tensor[] hx, " RNN_SEQ_ARGS ") -> (Tensor, Tensor, Tensor)", 0,
                    lstm_infer, lstm_kernel);
    tp__register_op(TP_OP_GRU, "gru(Tensor input, Tensor hx, " RNN_SEQ_ARGS ") -> (Tensor, Tensor)", 0, gru_infer,
                    gru_kernel);
    tp__register_op(TP_OP_RNN_TANH, "rnn_tanh(Tensor input, Tensor hx, " RNN_SEQ_ARGS ") -> (Tensor, Tensor)", 0,
                    rnn_tanh_infer, rnn_tanh_kernel);
    tp__register_op(TP_OP_RNN_RELU, "rnn_relu(Tensor input, Tensor hx, " RNN_SEQ_ARGS ") -> (Tensor, Tensor)", 0,
                    rnn_relu_infer, rnn_relu_kernel);
#undef RNN_SEQ_ARGS
    tp__register_op(TP_OP_IM2COL,
                    "im2col(Tensor self, int[] kernel_size, int[] dilation=1, int[] padding=0, int[] stride=1) -> "
                    "Tensor",
                    0, im2col_infer, im2col_kernel);
    tp__register_op(TP_OP_COL2IM,
                    "col2im(Tensor self, int[] output_size, int[] kernel_size, int[] dilation=1, int[] padding=0, "
                    "int[] stride=1) -> Tensor",
                    0, col2im_infer, col2im_kernel);
    tp__register_op(TP_OP_PDIST, "pdist(Tensor self, float p=2) -> Tensor", 0, pdist_infer, pdist_kernel);
    tp__register_op(TP_OP_BILINEAR, "bilinear(Tensor input1, Tensor input2, Tensor weight, Tensor? bias=None) -> Tensor",
                    0, bilinear_infer, bilinear_kernel);
    tp__register_op(TP_OP_CONV_TBC, "conv_tbc(Tensor self, Tensor weight, Tensor? bias=None, int pad=0) -> Tensor", 0,
                    conv_tbc_infer, conv_tbc_kernel);
}
