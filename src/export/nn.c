/*
 * nn.c - the layer library (nn.h): constructors registering PyTorch-named
 * state with PyTorch's default initialisation from tp_rng, C forwards on
 * the export op API (the same code runs eagerly and under export), and
 * state-dict loading with PyTorch-style error reports.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "export_impl.h"
#include "tpexport/nn.h"

/* ---- random numbers ---------------------------------------------------------- */

void tp_rng_seed(tp_rng *rng, uint64_t seed) { rng->state = seed ^ 0x9E3779B97F4A7C15ull; }

static uint64_t next_u64(tp_rng *rng) {
    uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double tp_rng_uniform(tp_rng *rng, double lo, double hi) {
    double u = (double)(next_u64(rng) >> 11) * (1.0 / 9007199254740992.0);
    return lo + (hi - lo) * u;
}

double tp_rng_normal(tp_rng *rng, double mean, double std) {
    double u1 = tp_rng_uniform(rng, 0.0, 1.0), u2 = tp_rng_uniform(rng, 0.0, 1.0);
    if (u1 < 1e-300) u1 = 1e-300;
    return mean + std * sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

static tp_status fill_with(tp_rng *rng, tp_tensor *t, double a, double b, bool normal) {
    TP_CHECK(tp_tensor_is_contiguous(t) && tp_tensor_dtype(t) == TP_FLOAT32, TP_ERR_TYPE,
             "random fill needs a contiguous float32 tensor");
    float *d = tp_tensor_data(t);
    for (int64_t i = 0; i < tp_tensor_numel(t); i++)
        d[i] = (float)(normal ? tp_rng_normal(rng, a, b) : tp_rng_uniform(rng, a, b));
    return TP_OK;
}

tp_status tp_rng_fill_uniform(tp_rng *rng, tp_tensor *t, double lo, double hi) { return fill_with(rng, t, lo, hi, false); }
tp_status tp_rng_fill_normal(tp_rng *rng, tp_tensor *t, double mean, double std) {
    return fill_with(rng, t, mean, std, true);
}

/* ---- helpers ---------------------------------------------------------------------- */

static const char *const ARG_INPUT[] = {"input"};

static tp_status new_module(const char *type, tp_forward_fn fn, int n_args, const char *const *names, void *cfg,
                            tp_module **out) {
    *out = NULL;
    tp_module *m;
    tp_status st = tp_module_new(type, &m);
    if (st != TP_OK) {
        tp_free(cfg);
        return st;
    }
    tp_forward_decl d = {fn, n_args, names, NULL, NULL};
    st = tp_module_set_forward(m, &d);
    if (st == TP_OK && cfg) st = tp_module_set_user_data(m, cfg, tp_free);
    else if (cfg && st != TP_OK) tp_free(cfg);
    if (st != TP_OK) {
        tp_module_free(m);
        return st;
    }
    *out = m;
    return TP_OK;
}

/* Register a new float32 tensor of the given shape, filled by `init`:
 * 'u' uniform(-a, a), 'n' normal(0, a), '1' ones, '0' zeros. */
static tp_status add_tensor(tp_module *m, tp_state_kind kind, const char *name, int ndim, const int64_t *sizes,
                            tp_rng *rng, char init, double a) {
    tp_tensor *t;
    TP_TRY(tp_tensor_zeros(TP_FLOAT32, ndim, sizes, &t));
    tp_status st = TP_OK;
    if (init == 'u') st = tp_rng_fill_uniform(rng, t, -a, a);
    else if (init == 'n') st = tp_rng_fill_normal(rng, t, 0.0, a);
    else if (init == '1') st = tp_tensor_fill(t, 1.0);
    if (st == TP_OK) st = tp_module_register(m, kind, name, t, true);
    tp_tensor_free(t);
    return st;
}

static tp_status add_child(tp_module *m, const char *name, tp_status made, tp_module *child) {
    if (made != TP_OK) return made;
    return tp_module_add_child(m, name, child);
}

/* add_made(m, name, constructor(..., &c), &c): *cp is read inside, after the
 * constructor (an argument) has run. */
static tp_status add_made(tp_module *m, const char *name, tp_status made, tp_module **cp) {
    return made == TP_OK ? tp_module_add_child(m, name, *cp) : made;
}

static tp_t *opt_state(tp_ctx *ctx, tp_module *self, const char *name) {
    return tp_module_own_state(self, name) ? tp_state(ctx, self, name) : NULL;
}

static void *cfg_of(tp_module *m) { return tp_module_user_data(m); }

/* ---- Linear ------------------------------------------------------------------------------ */

static tp_status linear_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_t *x = tp_arg(ctx, &args[0]);
    return tp_return(ctx, tp_linear(ctx, x, tp_param(ctx, self, "weight"), opt_state(ctx, self, "bias")), out);
}

tp_status tp_nn_linear(tp_rng *rng, int64_t in, int64_t outf, bool bias, tp_module **out) {
    TP_CHECK(in > 0 && outf > 0, TP_ERR_INVALID_ARG, "Linear needs positive sizes, got %lld -> %lld", (long long)in,
             (long long)outf);
    TP_TRY(new_module("Linear", linear_fwd, 1, ARG_INPUT, NULL, out));
    double bound = 1.0 / sqrt((double)in);
    tp_status st = add_tensor(*out, TP_STATE_PARAMETER, "weight", 2, (int64_t[]){outf, in}, rng, 'u', bound);
    if (st == TP_OK && bias) st = add_tensor(*out, TP_STATE_PARAMETER, "bias", 1, (int64_t[]){outf}, rng, 'u', bound);
    if (st != TP_OK) {
        tp_module_free(*out);
        *out = NULL;
    }
    return st;
}

/* ---- convolutions ----------------------------------------------------------------------------- */

tp_conv_config tp_conv_defaults(int n_spatial, int64_t in, int64_t outc, int64_t k) {
    tp_conv_config c;
    memset(&c, 0, sizeof c);
    c.n_spatial = n_spatial;
    c.in_channels = in;
    c.out_channels = outc;
    for (int i = 0; i < 3; i++) {
        c.kernel[i] = k;
        c.stride[i] = 1;
        c.dilation[i] = 1;
    }
    c.groups = 1;
    c.bias = true;
    return c;
}

typedef struct conv_cfg {
    tp_conv_config c;
    bool transposed;
} conv_cfg;

static tp_status conv_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    const conv_cfg *cfg = cfg_of(self);
    int n = cfg->c.n_spatial;
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_t *w = tp_param(ctx, self, "weight"), *b = opt_state(ctx, self, "bias");
    if (tp_is_poison(x) || tp_is_poison(w)) return tp_return(ctx, NULL, out);
    if (cfg->transposed) {
        tp_value a[8] = {tp_v(x), tp_v(w), b ? tp_v(b) : tp_value_none(), tp_ints(ctx, n, cfg->c.stride),
                         tp_ints(ctx, n, cfg->c.padding), tp_ints(ctx, n, cfg->c.output_padding),
                         tp_value_int(cfg->c.groups), tp_ints(ctx, n, cfg->c.dilation)};
        return tp_return(ctx, tp_call(ctx, TP_OP_CONV_TRANSPOSE2D, a, 8, NULL), out);
    }
    tp_op op = n == 1 ? TP_OP_CONV1D : n == 2 ? TP_OP_CONV2D : TP_OP_CONV3D;
    tp_value a[7] = {tp_v(x), tp_v(w), b ? tp_v(b) : tp_value_none(), tp_ints(ctx, n, cfg->c.stride),
                     tp_ints(ctx, n, cfg->c.padding), tp_ints(ctx, n, cfg->c.dilation), tp_value_int(cfg->c.groups)};
    return tp_return(ctx, tp_call(ctx, op, a, 7, NULL), out);
}

static tp_status make_conv(tp_rng *rng, const tp_conv_config *c, bool transposed, tp_module **out) {
    TP_CHECK(c && c->n_spatial >= 1 && c->n_spatial <= 3, TP_ERR_INVALID_ARG, "convolution needs 1 to 3 spatial dims");
    TP_CHECK(c->groups >= 1 && c->in_channels % c->groups == 0 && c->out_channels % c->groups == 0,
             TP_ERR_INVALID_ARG, "in_channels and out_channels must be divisible by groups");
    conv_cfg *cfg = tp_calloc(1, sizeof *cfg);
    TP_CHECK(cfg != NULL, TP_ERR_NOMEM, "out of memory");
    cfg->c = *c;
    cfg->transposed = transposed;
    const char *type = transposed ? "ConvTranspose2d" : c->n_spatial == 1 ? "Conv1d" : c->n_spatial == 2 ? "Conv2d" : "Conv3d";
    TP_TRY(new_module(type, conv_fwd, 1, ARG_INPUT, cfg, out));
    int64_t sizes[5];
    sizes[0] = transposed ? c->in_channels : c->out_channels;
    sizes[1] = transposed ? c->out_channels / c->groups : c->in_channels / c->groups;
    int64_t receptive = 1;
    for (int i = 0; i < c->n_spatial; i++) {
        sizes[2 + i] = c->kernel[i];
        receptive *= c->kernel[i];
    }
    double bound = 1.0 / sqrt((double)(sizes[1] * receptive));
    tp_status st = add_tensor(*out, TP_STATE_PARAMETER, "weight", 2 + c->n_spatial, sizes, rng, 'u', bound);
    if (st == TP_OK && c->bias)
        st = add_tensor(*out, TP_STATE_PARAMETER, "bias", 1, (int64_t[]){c->out_channels}, rng, 'u', bound);
    if (st != TP_OK) {
        tp_module_free(*out);
        *out = NULL;
    }
    return st;
}

tp_status tp_nn_conv(tp_rng *rng, const tp_conv_config *cfg, tp_module **out) { return make_conv(rng, cfg, false, out); }
tp_status tp_nn_conv_transpose2d(tp_rng *rng, const tp_conv_config *cfg, tp_module **out) {
    TP_CHECK(cfg && cfg->n_spatial == 2, TP_ERR_INVALID_ARG, "ConvTranspose2d needs n_spatial = 2");
    return make_conv(rng, cfg, true, out);
}

/* ---- normalisation ------------------------------------------------------------------------------- */

typedef struct norm_cfg {
    double eps, momentum;
    int64_t groups;
    int n_shape;
    int64_t shape[TP_MAX_DIMS];
    bool track;
} norm_cfg;

static tp_status batch_norm_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    const norm_cfg *cfg = cfg_of(self);
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_t *w = opt_state(ctx, self, "weight"), *b = opt_state(ctx, self, "bias");
    tp_t *rm = opt_state(ctx, self, "running_mean"), *rv = opt_state(ctx, self, "running_var");
    bool training = tp_module_is_training(self);
    bool use_batch = training || !rm;
    if (tp_is_poison(x)) return tp_return(ctx, NULL, out);
    if (training && cfg->track && rm) {
        tp_add_scalar_(ctx, tp_buffer(ctx, self, "num_batches_tracked"), 1);
        /* running statistics: (1 - m) * running + m * batch (unbiased variance) */
        int nd = tp_ndim(x);
        int64_t dims[TP_MAX_DIMS];
        int nr = 0;
        for (int d = 0; d < nd; d++)
            if (d != 1) dims[nr++] = d;
        tp_t *mean = tp_mean_dims(ctx, x, nr, dims, false);
        tp_value va[2] = {tp_v(x), tp_ints(ctx, nr, dims)};
        tp_value kw = tp_value_none();
        tp_value_dict(&kw);
        tp_value one = tp_value_int(1);
        tp_value_dict_set(&kw, "correction", &one);
        tp_t *var = tp_call(ctx, TP_OP_VAR, va, 2, &kw);
        tp_value_clear(&kw);
        tp_mul_scalar_(ctx, rm, 1.0 - cfg->momentum);
        tp_add_(ctx, rm, tp_mul_scalar(ctx, mean, cfg->momentum));
        tp_mul_scalar_(ctx, rv, 1.0 - cfg->momentum);
        tp_add_(ctx, rv, tp_mul_scalar(ctx, var, cfg->momentum));
    }
    tp_value a[8] = {tp_v(x),
                     use_batch ? tp_value_none() : tp_v(rm),
                     use_batch ? tp_value_none() : tp_v(rv),
                     w ? tp_v(w) : tp_value_none(),
                     b ? tp_v(b) : tp_value_none(),
                     tp_value_bool(use_batch),
                     tp_value_float(cfg->momentum),
                     tp_value_float(cfg->eps)};
    return tp_return(ctx, tp_call(ctx, TP_OP_BATCH_NORM, a, 8, NULL), out);
}

tp_status tp_nn_batch_norm(int64_t features, double eps, double momentum, bool affine, bool track, tp_module **out) {
    TP_CHECK(features > 0, TP_ERR_INVALID_ARG, "BatchNorm needs num_features > 0");
    norm_cfg *cfg = tp_calloc(1, sizeof *cfg);
    TP_CHECK(cfg != NULL, TP_ERR_NOMEM, "out of memory");
    cfg->eps = eps;
    cfg->momentum = momentum;
    cfg->track = track;
    TP_TRY(new_module("BatchNorm", batch_norm_fwd, 1, ARG_INPUT, cfg, out));
    tp_status st = TP_OK;
    int64_t c[1] = {features};
    if (affine) st = add_tensor(*out, TP_STATE_PARAMETER, "weight", 1, c, NULL, '1', 0);
    if (st == TP_OK && affine) st = add_tensor(*out, TP_STATE_PARAMETER, "bias", 1, c, NULL, '0', 0);
    if (st == TP_OK && track) st = add_tensor(*out, TP_STATE_BUFFER, "running_mean", 1, c, NULL, '0', 0);
    if (st == TP_OK && track) st = add_tensor(*out, TP_STATE_BUFFER, "running_var", 1, c, NULL, '1', 0);
    if (st == TP_OK && track) {
        tp_tensor *n;
        st = tp_tensor_zeros(TP_INT64, 0, NULL, &n);
        if (st == TP_OK) st = tp_module_register(*out, TP_STATE_BUFFER, "num_batches_tracked", n, true);
        tp_tensor_free(n);
    }
    if (st != TP_OK) {
        tp_module_free(*out);
        *out = NULL;
    }
    return st;
}

static tp_status layer_norm_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    const norm_cfg *cfg = cfg_of(self);
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_t *w = opt_state(ctx, self, "weight"), *b = opt_state(ctx, self, "bias");
    if (tp_is_poison(x)) return tp_return(ctx, NULL, out);
    tp_value a[5] = {tp_v(x), tp_ints(ctx, cfg->n_shape, cfg->shape), w ? tp_v(w) : tp_value_none(),
                     b ? tp_v(b) : tp_value_none(), tp_value_float(cfg->eps)};
    return tp_return(ctx, tp_call(ctx, TP_OP_LAYER_NORM, a, 5, NULL), out);
}

tp_status tp_nn_layer_norm(int n, const int64_t *shape, double eps, bool affine, tp_module **out) {
    TP_CHECK(n >= 1 && n <= TP_MAX_DIMS && shape, TP_ERR_INVALID_ARG, "LayerNorm needs a normalized_shape");
    norm_cfg *cfg = tp_calloc(1, sizeof *cfg);
    TP_CHECK(cfg != NULL, TP_ERR_NOMEM, "out of memory");
    cfg->eps = eps;
    cfg->n_shape = n;
    memcpy(cfg->shape, shape, (size_t)n * sizeof *shape);
    TP_TRY(new_module("LayerNorm", layer_norm_fwd, 1, ARG_INPUT, cfg, out));
    tp_status st = TP_OK;
    if (affine) st = add_tensor(*out, TP_STATE_PARAMETER, "weight", n, shape, NULL, '1', 0);
    if (st == TP_OK && affine) st = add_tensor(*out, TP_STATE_PARAMETER, "bias", n, shape, NULL, '0', 0);
    if (st != TP_OK) {
        tp_module_free(*out);
        *out = NULL;
    }
    return st;
}

static tp_status group_norm_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    const norm_cfg *cfg = cfg_of(self);
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_t *w = opt_state(ctx, self, "weight"), *b = opt_state(ctx, self, "bias");
    if (tp_is_poison(x)) return tp_return(ctx, NULL, out);
    tp_value a[5] = {tp_v(x), tp_value_int(cfg->groups), w ? tp_v(w) : tp_value_none(), b ? tp_v(b) : tp_value_none(),
                     tp_value_float(cfg->eps)};
    return tp_return(ctx, tp_call(ctx, TP_OP_GROUP_NORM, a, 5, NULL), out);
}

tp_status tp_nn_group_norm(int64_t groups, int64_t channels, double eps, bool affine, tp_module **out) {
    TP_CHECK(groups > 0 && channels % groups == 0, TP_ERR_INVALID_ARG, "num_channels must be divisible by num_groups");
    norm_cfg *cfg = tp_calloc(1, sizeof *cfg);
    TP_CHECK(cfg != NULL, TP_ERR_NOMEM, "out of memory");
    cfg->eps = eps;
    cfg->groups = groups;
    TP_TRY(new_module("GroupNorm", group_norm_fwd, 1, ARG_INPUT, cfg, out));
    tp_status st = TP_OK;
    if (affine) st = add_tensor(*out, TP_STATE_PARAMETER, "weight", 1, &channels, NULL, '1', 0);
    if (st == TP_OK && affine) st = add_tensor(*out, TP_STATE_PARAMETER, "bias", 1, &channels, NULL, '0', 0);
    if (st != TP_OK) {
        tp_module_free(*out);
        *out = NULL;
    }
    return st;
}

/* ---- embedding, dropout, activations, pooling, flatten ------------------------------------------------ */

typedef struct misc_cfg {
    int64_t a, b, c;
    double p;
    int kind;
} misc_cfg;

static misc_cfg *new_misc(int64_t a, int64_t b, int64_t c, double p, int kind) {
    misc_cfg *m = tp_calloc(1, sizeof *m);
    if (m) *m = (misc_cfg){a, b, c, p, kind};
    return m;
}

static tp_status embedding_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    const misc_cfg *cfg = cfg_of(self);
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_t *w = tp_param(ctx, self, "weight");
    if (tp_is_poison(x) || tp_is_poison(w)) return tp_return(ctx, NULL, out);
    tp_value a[3] = {tp_v(w), tp_v(x), tp_value_int(cfg->a)};
    return tp_return(ctx, tp_call(ctx, TP_OP_EMBEDDING, a, 3, NULL), out);
}

tp_status tp_nn_embedding(tp_rng *rng, int64_t num, int64_t dim, int64_t padding_idx, tp_module **out) {
    TP_CHECK(num > 0 && dim > 0, TP_ERR_INVALID_ARG, "Embedding needs positive sizes");
    TP_CHECK(padding_idx < num, TP_ERR_INVALID_ARG, "padding_idx must be within num_embeddings");
    misc_cfg *cfg = new_misc(padding_idx, 0, 0, 0, 0);
    TP_CHECK(cfg != NULL, TP_ERR_NOMEM, "out of memory");
    TP_TRY(new_module("Embedding", embedding_fwd, 1, ARG_INPUT, cfg, out));
    tp_status st = add_tensor(*out, TP_STATE_PARAMETER, "weight", 2, (int64_t[]){num, dim}, rng, 'n', 1.0);
    if (st == TP_OK && padding_idx >= 0) {
        float *d = tp_tensor_data(tp_module_own_state(*out, "weight"));
        memset(d + padding_idx * dim, 0, (size_t)dim * sizeof(float));
    }
    if (st != TP_OK) {
        tp_module_free(*out);
        *out = NULL;
    }
    return st;
}

static tp_status dropout_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    const misc_cfg *cfg = cfg_of(self);
    tp_t *x = tp_arg(ctx, &args[0]);
    return tp_return(ctx, tp_dropout(ctx, x, cfg->p, tp_module_is_training(self)), out);
}

tp_status tp_nn_dropout(double p, tp_module **out) {
    TP_CHECK(p >= 0.0 && p <= 1.0, TP_ERR_INVALID_ARG, "dropout probability has to be between 0 and 1, but got %g", p);
    misc_cfg *cfg = new_misc(0, 0, 0, p, 0);
    TP_CHECK(cfg != NULL, TP_ERR_NOMEM, "out of memory");
    return new_module("Dropout", dropout_fwd, 1, ARG_INPUT, cfg, out);
}

static tp_t *activate(tp_ctx *ctx, tp_activation kind, tp_t *x) {
    switch (kind) {
    case TP_ACT_RELU: return tp_relu(ctx, x);
    case TP_ACT_GELU: return tp_gelu(ctx, x);
    case TP_ACT_SILU: return tp_silu(ctx, x);
    case TP_ACT_TANH: return tp_tanh(ctx, x);
    case TP_ACT_SIGMOID: return tp_sigmoid(ctx, x);
    }
    return tp_relu(ctx, x);
}

static tp_status activation_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    const misc_cfg *cfg = cfg_of(self);
    return tp_return(ctx, activate(ctx, (tp_activation)cfg->kind, tp_arg(ctx, &args[0])), out);
}

tp_status tp_nn_activation(tp_activation kind, tp_module **out) {
    static const char *const names[] = {"ReLU", "GELU", "SiLU", "Tanh", "Sigmoid"};
    TP_CHECK((unsigned)kind <= TP_ACT_SIGMOID, TP_ERR_INVALID_ARG, "unknown activation %d", (int)kind);
    misc_cfg *cfg = new_misc(0, 0, 0, 0, (int)kind);
    TP_CHECK(cfg != NULL, TP_ERR_NOMEM, "out of memory");
    return new_module(names[kind], activation_fwd, 1, ARG_INPUT, cfg, out);
}

static tp_status pool_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    const misc_cfg *cfg = cfg_of(self);
    tp_t *x = tp_arg(ctx, &args[0]);
    if (tp_is_poison(x)) return tp_return(ctx, NULL, out);
    int64_t k[2] = {cfg->a, cfg->a}, s[2] = {cfg->b, cfg->b}, p[2] = {cfg->c, cfg->c};
    if (cfg->kind == 2) {
        int64_t os[2] = {cfg->a, cfg->b};
        tp_value a[2] = {tp_v(x), tp_ints(ctx, 2, os)};
        return tp_return(ctx, tp_call(ctx, TP_OP_ADAPTIVE_AVG_POOL2D, a, 2, NULL), out);
    }
    tp_value a[4] = {tp_v(x), tp_ints(ctx, 2, k), tp_ints(ctx, 2, s), tp_ints(ctx, 2, p)};
    return tp_return(ctx, tp_call(ctx, cfg->kind == 0 ? TP_OP_MAX_POOL2D : TP_OP_AVG_POOL2D, a, 4, NULL), out);
}

static tp_status make_pool(const char *type, int kind, int64_t a, int64_t b, int64_t c, tp_module **out) {
    TP_CHECK(a > 0 && b >= 0 && c >= 0, TP_ERR_INVALID_ARG, "%s needs a positive size", type);
    misc_cfg *cfg = new_misc(a, kind == 2 ? b : (b ? b : a), c, 0, kind);
    TP_CHECK(cfg != NULL, TP_ERR_NOMEM, "out of memory");
    return new_module(type, pool_fwd, 1, ARG_INPUT, cfg, out);
}

tp_status tp_nn_max_pool2d(int64_t k, int64_t s, int64_t p, tp_module **out) { return make_pool("MaxPool2d", 0, k, s, p, out); }
tp_status tp_nn_avg_pool2d(int64_t k, int64_t s, int64_t p, tp_module **out) { return make_pool("AvgPool2d", 1, k, s, p, out); }
tp_status tp_nn_adaptive_avg_pool2d(int64_t h, int64_t w, tp_module **out) {
    return make_pool("AdaptiveAvgPool2d", 2, h, w, 0, out);
}

static tp_status flatten_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    const misc_cfg *cfg = cfg_of(self);
    return tp_return(ctx, tp_flatten(ctx, tp_arg(ctx, &args[0]), cfg->a, cfg->b), out);
}

tp_status tp_nn_flatten(int64_t start, int64_t end, tp_module **out) {
    misc_cfg *cfg = new_misc(start, end, 0, 0, 0);
    TP_CHECK(cfg != NULL, TP_ERR_NOMEM, "out of memory");
    return new_module("Flatten", flatten_fwd, 1, ARG_INPUT, cfg, out);
}

/* ---- Sequential -------------------------------------------------------------------------------------------- */

static tp_status sequential_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_t *x = tp_arg(ctx, &args[0]);
    for (int i = 0; i < tp_module_num_children(self); i++) x = tp_forward(ctx, tp_module_child_at(self, i, NULL), x);
    return tp_return(ctx, x, out);
}

tp_status tp_nn_sequential(tp_module **out) { return new_module("Sequential", sequential_fwd, 1, ARG_INPUT, NULL, out); }

tp_status tp_nn_sequential_add(tp_module *seq, tp_module *child) {
    char name[32];
    snprintf(name, sizeof name, "%d", tp_module_num_children(seq));
    return tp_module_add_child(seq, name, child);
}

/* ---- MultiheadAttention -------------------------------------------------------------------------------------- */

typedef struct mha_cfg {
    int64_t embed_dim, num_heads;
    bool batch_first;
} mha_cfg;

static const char *const MHA_ARGS[] = {"query",          "key",       "value",
                                       "key_padding_mask", "need_weights", "attn_mask",
                                       "average_attn_weights"};
enum { MHA_NARGS = 7 };

static bool flag_arg(const tp_value *v, bool dflt) {
    return v->kind == TP_VAL_BOOL || v->kind == TP_VAL_INT ? tp_value_as_i64(v) != 0 : dflt;
}

/* scores + mask: a bool mask (True = not allowed) fills -inf, a float mask
 * is added (PyTorch's convention for both masks). */
static tp_t *apply_mask(tp_ctx *ctx, tp_t *scores, tp_t *mask, const char *what) {
    if (tp_is_poison(scores) || tp_is_poison(mask)) return tp_add(ctx, scores, mask);
    tp_dtype dt = tp_dtype_of(mask);
    if (dt == TP_BOOL) {
        tp_value a[3] = {tp_v(scores), tp_v(mask), tp_value_float(-INFINITY)};
        return tp_call(ctx, TP_OP_MASKED_FILL, a, 3, NULL);
    }
    if (!tp_dtype_is_float(dt)) {
        tp_ctx_fail(ctx, TP_ERR_TYPE, "only bool and floating types of %s are supported, got %s", what,
                    tp_dtype_name(dt));
        return tp_add(ctx, NULL, NULL);
    }
    return tp_add(ctx, scores, mask);
}

/* Explicit attention over heads (N, H, L, d) with masks; *weights the
 * softmaxed scores (N, H, L, S). */
static tp_t *masked_attention(tp_ctx *ctx, const mha_cfg *cfg, tp_t *qh, tp_t *kh, tp_t *vh, const tp_value *kpm_v,
                              const tp_value *mask_v, tp_t **weights) {
    double scale = 1.0 / sqrt((double)(cfg->embed_dim / cfg->num_heads));
    tp_t *scores = tp_matmul(ctx, tp_mul_scalar(ctx, qh, scale), tp_transpose(ctx, kh, -2, -1));
    if (mask_v->kind != TP_VAL_NONE) {
        tp_t *m = tp_arg(ctx, mask_v);
        if (!tp_is_poison(m) && tp_ndim(m) == 3) {
            /* (N*H, L, S) -> (N, H, L, S) */
            tp_t *dims[4] = {tp_int(ctx, -1), tp_int(ctx, cfg->num_heads), tp_dim(ctx, m, 1), tp_dim(ctx, m, 2)};
            tp_value a[2] = {tp_v(m), tp_ints_sym(ctx, 4, dims)};
            m = tp_call(ctx, TP_OP_RESHAPE, a, 2, NULL);
        } else if (!tp_is_poison(m) && tp_ndim(m) != 2) {
            tp_ctx_fail(ctx, TP_ERR_SHAPE, "attn_mask's dimension %d is not supported (2 or 3)", tp_ndim(m));
            m = NULL;
        }
        scores = apply_mask(ctx, scores, m, "attn_mask");
    }
    if (kpm_v->kind != TP_VAL_NONE) {
        tp_t *m = tp_arg(ctx, kpm_v);
        if (!tp_is_poison(m) && tp_ndim(m) != 2) {
            tp_ctx_fail(ctx, TP_ERR_SHAPE, "key_padding_mask must be 2-dimensional (batch, source length), got %d dims",
                        tp_ndim(m));
            m = NULL;
        } else if (!tp_is_poison(m)) {
            /* (N, S) -> (N, 1, 1, S) */
            tp_t *dims[4] = {tp_dim(ctx, m, 0), tp_int(ctx, 1), tp_int(ctx, 1), tp_dim(ctx, m, 1)};
            tp_value a[2] = {tp_v(m), tp_ints_sym(ctx, 4, dims)};
            m = tp_call(ctx, TP_OP_RESHAPE, a, 2, NULL);
        }
        scores = apply_mask(ctx, scores, m, "key_padding_mask");
    }
    *weights = tp_softmax(ctx, scores, -1);
    return tp_matmul(ctx, *weights, vh);
}

/* (N, L, E) -> (N, H, L, E/H) without reading sizes. */
static tp_t *split_heads(tp_ctx *ctx, tp_t *x, int64_t heads) {
    tp_t *parts[64];
    int n = tp_chunk(ctx, x, (int)heads, -1, parts);
    if (n != heads) return tp_stack(ctx, 0, NULL, 1); /* poison: the failure is recorded */
    return tp_stack(ctx, n, parts, 1);
}

static tp_status mha_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    const mha_cfg *cfg = cfg_of(self);
    bool self_k = args[1].kind == TP_VAL_NONE, self_v = args[2].kind == TP_VAL_NONE;
    tp_t *q = tp_arg(ctx, &args[0]);
    tp_t *k = self_k ? q : tp_arg(ctx, &args[1]);
    tp_t *v = self_v ? k : tp_arg(ctx, &args[2]);
    if (!cfg->batch_first) {
        q = tp_transpose(ctx, q, 0, 1);
        k = self_k ? q : tp_transpose(ctx, k, 0, 1);
        v = self_v ? k : tp_transpose(ctx, v, 0, 1);
    }
    tp_t *w = tp_param(ctx, self, "in_proj_weight"), *b = opt_state(ctx, self, "in_proj_bias");
    tp_t *wq[3], *bq[3] = {NULL, NULL, NULL};
    if (tp_chunk(ctx, w, 3, 0, wq) != 3) return tp_return(ctx, NULL, out);
    if (b && tp_chunk(ctx, b, 3, 0, bq) != 3) return tp_return(ctx, NULL, out);
    tp_t *qp = tp_linear(ctx, q, wq[0], bq[0]);
    tp_t *kp = tp_linear(ctx, k, wq[1], bq[1]);
    tp_t *vp = tp_linear(ctx, v, wq[2], bq[2]);
    tp_t *qh = split_heads(ctx, qp, cfg->num_heads), *kh = split_heads(ctx, kp, cfg->num_heads),
         *vh = split_heads(ctx, vp, cfg->num_heads);
    if (tp_is_poison(qh) || tp_is_poison(kh) || tp_is_poison(vh)) return tp_return(ctx, NULL, out);
    bool need_weights = flag_arg(&args[4], false), average = flag_arg(&args[6], true);
    tp_t *att, *weights = NULL;
    if (need_weights || args[3].kind != TP_VAL_NONE || args[5].kind != TP_VAL_NONE) {
        att = masked_attention(ctx, cfg, qh, kh, vh, &args[3], &args[5], &weights);
    } else {
        tp_value a[3] = {tp_v(qh), tp_v(kh), tp_v(vh)};
        att = tp_call(ctx, TP_OP_SCALED_DOT_PRODUCT_ATTENTION, a, 3, NULL);
    }
    tp_t *heads[64];
    for (int64_t h = 0; h < cfg->num_heads; h++) heads[h] = tp_select(ctx, att, 1, h);
    tp_t *merged = tp_cat(ctx, (int)cfg->num_heads, heads, -1);
    const tp_value *res;
    tp_value ma[1] = {tp_v(merged)};
    if (tp_is_poison(merged) || tp_call_module(ctx, tp_module_child(self, "out_proj"), ma, 1, NULL, &res) != TP_OK)
        return tp_return(ctx, NULL, out);
    tp_t *y = tp_arg(ctx, res);
    if (!cfg->batch_first) y = tp_transpose(ctx, y, 0, 1);
    if (!need_weights) return tp_return(ctx, y, out);
    /* (output, weights): weights averaged over heads (N, L, S) by default */
    if (average) weights = tp_mean_dims(ctx, weights, 1, (int64_t[]){1}, false);
    tp_value wv;
    TP_TRY(tp_return(ctx, weights, &wv));
    tp_status st = tp_return(ctx, y, out);
    tp_value tup = tp_value_none();
    if (st == TP_OK) st = tp_value_tuple(2, &tup);
    if (st == TP_OK) st = tp_value_seq_set(&tup, 0, out);
    if (st == TP_OK) st = tp_value_seq_set(&tup, 1, &wv);
    tp_value_clear(&wv);
    tp_value_clear(out);
    if (st != TP_OK) {
        tp_value_clear(&tup);
        return tp_ctx_fail(ctx, st, "%s", tp_last_error());
    }
    *out = tup;
    return TP_OK;
}

tp_status tp_nn_multihead_attention(tp_rng *rng, int64_t e, int64_t heads, bool bias, bool batch_first,
                                    tp_module **out) {
    TP_CHECK(e > 0 && heads > 0 && heads <= 64 && e % heads == 0, TP_ERR_INVALID_ARG,
             "embed_dim must be divisible by num_heads (at most 64 heads)");
    mha_cfg *cfg = tp_calloc(1, sizeof *cfg);
    TP_CHECK(cfg != NULL, TP_ERR_NOMEM, "out of memory");
    *cfg = (mha_cfg){e, heads, batch_first};
    tp_module *m;
    TP_TRY(new_module("MultiheadAttention", mha_fwd, MHA_NARGS, MHA_ARGS, cfg, &m));
    /* key/value default to None (self-attention), no masks, output only */
    tp_value defs[MHA_NARGS] = {tp_value_none(),       tp_value_none(), tp_value_none(),     tp_value_none(),
                                tp_value_bool(false), tp_value_none(), tp_value_bool(true)};
    bool has[MHA_NARGS] = {false, true, true, true, true, true, true};
    tp_forward_decl d = {mha_fwd, MHA_NARGS, MHA_ARGS, defs, has};
    tp_status st = tp_module_set_forward(m, &d);
    double xb = sqrt(6.0 / (double)(e + 3 * e));
    if (st == TP_OK) st = add_tensor(m, TP_STATE_PARAMETER, "in_proj_weight", 2, (int64_t[]){3 * e, e}, rng, 'u', xb);
    if (st == TP_OK && bias) st = add_tensor(m, TP_STATE_PARAMETER, "in_proj_bias", 1, (int64_t[]){3 * e}, rng, '0', 0);
    tp_module *proj = NULL;
    if (st == TP_OK) st = tp_nn_linear(rng, e, e, bias, &proj);
    if (st == TP_OK && bias) tp_tensor_fill(tp_module_own_state(proj, "bias"), 0.0);
    if (st == TP_OK) st = tp_module_add_child(m, "out_proj", proj);
    if (st != TP_OK) {
        tp_module_free(m);
        return st;
    }
    *out = m;
    return TP_OK;
}

/* ---- TransformerEncoderLayer ------------------------------------------------------------------------------------ */

typedef struct tel_cfg {
    tp_activation act;
    bool norm_first;
} tel_cfg;

static const char *const SRC_ARG[] = {"src"};

static tp_t *child_fwd(tp_ctx *ctx, tp_module *self, const char *name, tp_t *x) {
    return tp_forward(ctx, tp_module_child(self, name), x);
}

static tp_t *self_attention(tp_ctx *ctx, tp_module *self, tp_t *x) {
    tp_t *y = child_fwd(ctx, self, "self_attn", x);
    return child_fwd(ctx, self, "dropout1", y);
}

static tp_t *feed_forward(tp_ctx *ctx, tp_module *self, const tel_cfg *cfg, tp_t *x) {
    tp_t *h = activate(ctx, cfg->act, child_fwd(ctx, self, "linear1", x));
    h = child_fwd(ctx, self, "linear2", child_fwd(ctx, self, "dropout", h));
    return child_fwd(ctx, self, "dropout2", h);
}

static tp_status tel_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    const tel_cfg *cfg = cfg_of(self);
    tp_t *x = tp_arg(ctx, &args[0]);
    if (cfg->norm_first) {
        x = tp_add(ctx, x, self_attention(ctx, self, child_fwd(ctx, self, "norm1", x)));
        x = tp_add(ctx, x, feed_forward(ctx, self, cfg, child_fwd(ctx, self, "norm2", x)));
    } else {
        x = child_fwd(ctx, self, "norm1", tp_add(ctx, x, self_attention(ctx, self, x)));
        x = child_fwd(ctx, self, "norm2", tp_add(ctx, x, feed_forward(ctx, self, cfg, x)));
    }
    return tp_return(ctx, x, out);
}

tp_status tp_nn_transformer_encoder_layer(tp_rng *rng, int64_t d_model, int64_t nhead, int64_t dim_ff, double dropout,
                                          tp_activation act, double eps, bool batch_first, bool norm_first,
                                          tp_module **out) {
    tel_cfg *cfg = tp_calloc(1, sizeof *cfg);
    TP_CHECK(cfg != NULL, TP_ERR_NOMEM, "out of memory");
    *cfg = (tel_cfg){act, norm_first};
    tp_module *m;
    TP_TRY(new_module("TransformerEncoderLayer", tel_fwd, 1, SRC_ARG, cfg, &m));
    tp_module *c = NULL;
    tp_status st = tp_nn_multihead_attention(rng, d_model, nhead, true, batch_first, &c);
    st = add_child(m, "self_attn", st, c);
    if (st == TP_OK) st = add_made(m, "linear1", tp_nn_linear(rng, d_model, dim_ff, true, &c), &c);
    if (st == TP_OK) st = add_made(m, "dropout", tp_nn_dropout(dropout, &c), &c);
    if (st == TP_OK) st = add_made(m, "linear2", tp_nn_linear(rng, dim_ff, d_model, true, &c), &c);
    if (st == TP_OK) st = add_made(m, "norm1", tp_nn_layer_norm(1, &d_model, eps, true, &c), &c);
    if (st == TP_OK) st = add_made(m, "norm2", tp_nn_layer_norm(1, &d_model, eps, true, &c), &c);
    if (st == TP_OK) st = add_made(m, "dropout1", tp_nn_dropout(dropout, &c), &c);
    if (st == TP_OK) st = add_made(m, "dropout2", tp_nn_dropout(dropout, &c), &c);
    if (st != TP_OK) {
        tp_module_free(m);
        return st;
    }
    *out = m;
    return TP_OK;
}

/* ---- ResNet BasicBlock -------------------------------------------------------------------------------------------- */

static tp_status block_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_t *y = child_fwd(ctx, self, "relu", child_fwd(ctx, self, "bn1", child_fwd(ctx, self, "conv1", x)));
    y = child_fwd(ctx, self, "bn2", child_fwd(ctx, self, "conv2", y));
    tp_t *identity = tp_module_child(self, "downsample") ? child_fwd(ctx, self, "downsample", x) : x;
    return tp_return(ctx, tp_relu(ctx, tp_add(ctx, y, identity)), out);
}

static tp_status conv3x3(tp_rng *rng, int64_t in, int64_t outc, int64_t k, int64_t stride, tp_module **out) {
    tp_conv_config c = tp_conv_defaults(2, in, outc, k);
    c.stride[0] = c.stride[1] = stride;
    c.padding[0] = c.padding[1] = k / 2;
    c.bias = false;
    return tp_nn_conv(rng, &c, out);
}

tp_status tp_nn_basic_block(tp_rng *rng, int64_t inplanes, int64_t planes, int64_t stride, tp_module **out) {
    tp_module *m;
    TP_TRY(new_module("BasicBlock", block_fwd, 1, ARG_INPUT, NULL, &m));
    tp_module *c = NULL;
    tp_status st = add_made(m, "conv1", conv3x3(rng, inplanes, planes, 3, stride, &c), &c);
    if (st == TP_OK) st = add_made(m, "bn1", tp_nn_batch_norm(planes, 1e-5, 0.1, true, true, &c), &c);
    if (st == TP_OK) st = add_made(m, "relu", tp_nn_activation(TP_ACT_RELU, &c), &c);
    if (st == TP_OK) st = add_made(m, "conv2", conv3x3(rng, planes, planes, 3, 1, &c), &c);
    if (st == TP_OK) st = add_made(m, "bn2", tp_nn_batch_norm(planes, 1e-5, 0.1, true, true, &c), &c);
    if (st == TP_OK && (stride != 1 || inplanes != planes)) {
        tp_module *seq = NULL;
        st = tp_nn_sequential(&seq);
        if (st == TP_OK) st = add_child(m, "downsample", st, seq);
        if (st == TP_OK) {
            tp_status s2 = conv3x3(rng, inplanes, planes, 1, stride, &c);
            st = s2 == TP_OK ? tp_nn_sequential_add(seq, c) : s2;
        }
        if (st == TP_OK) {
            tp_status s2 = tp_nn_batch_norm(planes, 1e-5, 0.1, true, true, &c);
            st = s2 == TP_OK ? tp_nn_sequential_add(seq, c) : s2;
        }
    }
    if (st != TP_OK) {
        tp_module_free(m);
        return st;
    }
    *out = m;
    return TP_OK;
}

/* ---- state dicts ------------------------------------------------------------------------------------------------- */

static void shape_text(const tp_tensor *t, tp_sb *sb) {
    tp__sb_puts(sb, "[");
    for (int i = 0; i < tp_tensor_ndim(t); i++)
        tp__sb_printf(sb, "%s%lld", i ? ", " : "", (long long)tp_tensor_sizes(t)[i]);
    tp__sb_puts(sb, "]");
}

tp_status tp_module_load_state_dict(tp_module *m, const char *const *names, tp_tensor *const *tensors, int n,
                                    bool strict) {
    tp_named_state sd;
    TP_TRY(tp_module_named_state(m, TP_FILTER_STATE_DICT, &sd));
    tp_sb missing = {0}, unexpected = {0}, sizes = {0};
    int n_missing = 0, n_unexpected = 0, n_sizes = 0;
    for (int i = 0; i < sd.n; i++) {
        int k = -1;
        for (int j = 0; j < n && k < 0; j++)
            if (strcmp(names[j], sd.items[i].name) == 0) k = j;
        if (k < 0) {
            if (strict) tp__sb_printf(&missing, "%s\"%s\"", n_missing++ ? ", " : "", sd.items[i].name);
            continue;
        }
        const tp_tensor *a = sd.items[i].tensor, *b = tensors[k];
        if (tp_tensor_ndim(a) != tp_tensor_ndim(b) ||
            memcmp(tp_tensor_sizes(a), tp_tensor_sizes(b), (size_t)tp_tensor_ndim(a) * sizeof(int64_t)) != 0) {
            tp__sb_printf(&sizes, "\n\tsize mismatch for %s: copying a param with shape ", sd.items[i].name);
            shape_text(b, &sizes);
            tp__sb_puts(&sizes, " from checkpoint, the shape in current model is ");
            shape_text(a, &sizes);
            tp__sb_puts(&sizes, ".");
            n_sizes++;
        }
    }
    for (int j = 0; strict && j < n; j++) {
        bool known = false;
        for (int i = 0; i < sd.n && !known; i++) known = strcmp(names[j], sd.items[i].name) == 0;
        if (!known) tp__sb_printf(&unexpected, "%s\"%s\"", n_unexpected++ ? ", " : "", names[j]);
    }
    tp_status st = TP_OK;
    if (n_missing || n_unexpected || n_sizes) {
        char *a = NULL, *b = NULL, *c = NULL;
        tp__sb_finish(&missing, &a);
        tp__sb_finish(&unexpected, &b);
        tp__sb_finish(&sizes, &c);
        st = tp_error(n_sizes ? TP_ERR_SHAPE : TP_ERR_NOT_FOUND, "Error(s) in loading state_dict for %s:%s%s%s%s%s%s%s",
                      tp_module_type_name(m), n_missing ? "\n\tMissing key(s) in state_dict: " : "", n_missing ? a : "",
                      n_missing ? "." : "", n_unexpected ? "\n\tUnexpected key(s) in state_dict: " : "",
                      n_unexpected ? b : "", n_unexpected ? "." : "", c ? c : "");
        tp_free(a);
        tp_free(b);
        tp_free(c);
    } else {
        for (int i = 0; st == TP_OK && i < sd.n; i++)
            for (int j = 0; st == TP_OK && j < n; j++)
                if (strcmp(names[j], sd.items[i].name) == 0) st = tp_tensor_copy_(sd.items[i].tensor, tensors[j]);
    }
    tp__sb_free(&missing);
    tp__sb_free(&unexpected);
    tp__sb_free(&sizes);
    tp_named_state_free(&sd);
    return st;
}
