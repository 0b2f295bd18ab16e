/*
 * conv.c - convolution ops: convolution (aten.convolution), conv1d/2d/3d and
 * conv_transpose1d/2d/3d. Schemas, shape rules and reference kernels.
 *
 * Every variant goes through one argument parser (conv_setup), which fills a
 * conv_params describing the problem as 3-D: 1-D and 2-D convolutions get
 * leading spatial dims of size 1 (stride 1, padding 0, dilation 1). The
 * reference kernels are direct loops over strided tensors that accumulate in
 * double and round once on store; they accept any input strides, unbatched
 * inputs (C, L...) and every float dtype. An optimised im2col + GEMM variant
 * can be registered later with tp__register_fast_kernel.
 */
#include <inttypes.h>
#include <stdio.h>

#include "kernel_util.h"

#define CONV_MAX_SPATIAL 3

typedef enum conv_kind {
    CONV_KIND_CONVOLUTION, /* aten.convolution: spatial rank from the weight */
    CONV_KIND_FORWARD,     /* conv1d/2d/3d */
    CONV_KIND_TRANSPOSED   /* conv_transpose1d/2d/3d */
} conv_kind;

/* A convolution problem, spatial dims padded to 3 on the left. */
typedef struct conv_params {
    int n_spatial;   /* 1, 2 or 3 */
    bool batched;    /* false: input is (C, spatial...) */
    bool transposed;
    int64_t groups;
    int64_t batch;        /* N (1 when unbatched) */
    int64_t in_channels;  /* C_in */
    int64_t out_channels; /* C_out */
    int64_t in_size[CONV_MAX_SPATIAL];
    int64_t kernel[CONV_MAX_SPATIAL];
    int64_t out_size[CONV_MAX_SPATIAL];
    int64_t stride[CONV_MAX_SPATIAL];
    int64_t pad_left[CONV_MAX_SPATIAL];  /* padding before the input */
    int64_t pad_right[CONV_MAX_SPATIAL]; /* forward only: padding after the input */
    int64_t dilation[CONV_MAX_SPATIAL];
    int64_t output_padding[CONV_MAX_SPATIAL]; /* transposed only */
    tp_dtype dtype;
    int out_ndim;
    int64_t out_sizes[CONV_MAX_SPATIAL + 2];
    tp_sdim out_dims[CONV_MAX_SPATIAL + 2]; /* out_sizes as the shape rule gives them (dim.h) */
} conv_params;

/* Argument positions per schema. */
typedef struct conv_arg_layout {
    int stride, padding, dilation, transposed, output_padding, groups;
} conv_arg_layout;

static const conv_arg_layout layout_convolution = {3, 4, 5, 6, 7, 8};
static const conv_arg_layout layout_forward = {3, 4, 5, -1, -1, 6};
static const conv_arg_layout layout_transposed = {3, 4, 7, -1, 5, 6};

/* "(2 x 3)"-style list of n values into buf. */
static const char *size_tuple(int n, const int64_t *v, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, i ? " x %" PRId64 : "%" PRId64, v[i]);
    if (used < size) snprintf(buf + used, size - used, ")");
    return buf;
}

/* Read an int list argument with one entry per spatial dim (a single value
 * is repeated) into the last n_spatial slots of out[3]; the leading slots get
 * `fill`. */
static tp_status read_spatial_ints(const tp_value *args, int i, const char *what, int n_spatial, int64_t fill,
                                   int64_t *out) {
    int64_t vals[CONV_MAX_SPATIAL];
    int n;
    TP_TRY(tp__arg_ints(args, i, what, vals, CONV_MAX_SPATIAL, n_spatial, &n));
    int lead = CONV_MAX_SPATIAL - n_spatial;
    for (int d = 0; d < lead; d++) out[d] = fill;
    for (int d = 0; d < n_spatial; d++) out[lead + d] = vals[d];
    return TP_OK;
}

/* Parse and validate the arguments of any conv op; fills *p (including the
 * output shape). Uses only dtypes and shapes. */
static tp_status conv_setup(const tp_value *args, conv_kind kind, int n_spatial_op, conv_params *p) {
    const conv_arg_layout *lay = kind == CONV_KIND_CONVOLUTION ? &layout_convolution
                                 : kind == CONV_KIND_FORWARD   ? &layout_forward
                                                               : &layout_transposed;
    memset(p, 0, sizeof *p);
    const tp_tensor *input = tp__arg_tensor(args, 0);
    const tp_tensor *weight = tp__arg_tensor(args, 1);
    const tp_tensor *bias = tp__arg_tensor(args, 2);
    TP_CHECK(input, TP_ERR_TYPE, "argument 'input' must be a tensor");
    TP_CHECK(weight, TP_ERR_TYPE, "argument 'weight' must be a tensor");
    char s1[128], s2[128];

    /* dtypes */
    TP_CHECK(tp_dtype_is_float(input->dtype), TP_ERR_TYPE,
             "expected a floating point input, but got %s (integer convolution is not supported)",
             tp_dtype_name(input->dtype));
    TP_CHECK(weight->dtype == input->dtype, TP_ERR_TYPE,
             "input type (%s) and weight type (%s) should be the same", tp_dtype_name(input->dtype),
             tp_dtype_name(weight->dtype));
    TP_CHECK(!bias || bias->dtype == input->dtype, TP_ERR_TYPE,
             "input type (%s) and bias type (%s) should be the same", tp_dtype_name(input->dtype),
             tp_dtype_name(bias->dtype));
    p->dtype = input->dtype;

    /* ranks */
    int n_spatial = n_spatial_op;
    if (kind == CONV_KIND_CONVOLUTION) {
        TP_CHECK(weight->ndim >= 3 && weight->ndim <= 5, TP_ERR_SHAPE,
                 "expected a 3-D, 4-D or 5-D weight (1 to 3 spatial dims), but got weight of size %s",
                 tp__shape_str(weight->ndim, weight->sizes, s1, sizeof s1));
        n_spatial = weight->ndim - 2;
        TP_CHECK(input->ndim == weight->ndim, TP_ERR_SHAPE,
                 "Expected %d-dimensional input for %d-dimensional weight %s, but got %d-dimensional input of "
                 "size %s instead",
                 weight->ndim, weight->ndim, tp__shape_str(weight->ndim, weight->sizes, s1, sizeof s1), input->ndim,
                 tp__shape_str(input->ndim, input->sizes, s2, sizeof s2));
        p->transposed = tp__arg_bool(args, lay->transposed);
    } else {
        p->transposed = kind == CONV_KIND_TRANSPOSED;
        TP_CHECK(input->ndim == n_spatial + 1 || input->ndim == n_spatial + 2, TP_ERR_SHAPE,
                 "Expected %dD (unbatched) or %dD (batched) input, but got input of size: %s", n_spatial + 1,
                 n_spatial + 2, tp__shape_str(input->ndim, input->sizes, s1, sizeof s1));
        TP_CHECK(weight->ndim == n_spatial + 2, TP_ERR_SHAPE, "expected a %dD weight, but got weight of size %s",
                 n_spatial + 2, tp__shape_str(weight->ndim, weight->sizes, s1, sizeof s1));
    }
    p->n_spatial = n_spatial;
    p->batched = input->ndim == n_spatial + 2;
    int lead = CONV_MAX_SPATIAL - n_spatial;
    int in_sp = input->ndim - n_spatial; /* index of the first spatial dim of input */
    p->batch = p->batched ? input->sizes[0] : 1;
    p->in_channels = input->sizes[in_sp - 1];
    tp_sdim in_dims[CONV_MAX_SPATIAL]; /* the spatial dims of input */
    for (int d = 0; d < CONV_MAX_SPATIAL; d++) {
        in_dims[d] = d < lead ? tp__dimk(1) : tp__dim(input, in_sp + d - lead);
        p->in_size[d] = in_dims[d].v;
        p->kernel[d] = d < lead ? 1 : weight->sizes[2 + d - lead];
        if (d >= lead && !tp__dim_is_const(tp__dim(weight, 2 + d - lead))) tp__dim_give_up(); /* a static kernel */
    }

    /* scalar parameters */
    p->groups = tp__arg_int(args, lay->groups);
    TP_CHECK(p->groups > 0, TP_ERR_INVALID_ARG, "non-positive groups is not supported (groups=%" PRId64 ")",
             p->groups);
    TP_TRY(read_spatial_ints(args, lay->stride, "stride", n_spatial, 1, p->stride));
    TP_TRY(read_spatial_ints(args, lay->dilation, "dilation", n_spatial, 1, p->dilation));
    if (p->transposed) TP_TRY(read_spatial_ints(args, lay->output_padding, "output_padding", n_spatial, 0,
                                                p->output_padding));
    bool pad_same = false;
    const tp_value *pad_arg = &args[lay->padding];
    if (pad_arg->kind == TP_VAL_STR) {
        if (strcmp(pad_arg->u.s, "valid") == 0) {
            for (int d = 0; d < CONV_MAX_SPATIAL; d++) p->pad_left[d] = 0;
        } else if (strcmp(pad_arg->u.s, "same") == 0) {
            pad_same = true;
        } else {
            return tp_error(TP_ERR_INVALID_ARG, "Invalid padding string: '%s' (expected 'valid' or 'same')",
                            pad_arg->u.s);
        }
    } else {
        TP_CHECK(pad_arg->kind == TP_VAL_INT || tp_value_is_seq(pad_arg), TP_ERR_TYPE,
                 "padding must be an int, a list of ints, 'valid' or 'same', not %s",
                 tp_value_kind_name(pad_arg->kind));
        TP_TRY(read_spatial_ints(args, lay->padding, "padding", n_spatial, 0, p->pad_left));
    }
    for (int d = lead; d < CONV_MAX_SPATIAL; d++) {
        TP_CHECK(p->stride[d] > 0, TP_ERR_INVALID_ARG, "non-positive stride is not supported, but got stride=%s",
                 size_tuple(n_spatial, p->stride + lead, s1, sizeof s1));
        TP_CHECK(p->dilation[d] > 0, TP_ERR_INVALID_ARG, "dilation should be greater than zero, but got dilation=%s",
                 size_tuple(n_spatial, p->dilation + lead, s1, sizeof s1));
        TP_CHECK(p->pad_left[d] >= 0, TP_ERR_INVALID_ARG, "negative padding is not supported, but got padding=%s",
                 size_tuple(n_spatial, p->pad_left + lead, s1, sizeof s1));
        TP_CHECK(p->output_padding[d] >= 0, TP_ERR_INVALID_ARG, "negative output_padding is not supported");
    }
    if (pad_same) {
        for (int d = lead; d < CONV_MAX_SPATIAL; d++)
            TP_CHECK(p->stride[d] == 1, TP_ERR_INVALID_ARG,
                     "padding='same' is not supported for strided convolutions (stride=%s)",
                     size_tuple(n_spatial, p->stride + lead, s1, sizeof s1));
        /* torch pads total = dilation*(k-1), the odd extra element on the right */
        for (int d = 0; d < CONV_MAX_SPATIAL; d++) {
            int64_t total;
            TP_CHECK(tp_mul_overflow_i64(p->dilation[d], p->kernel[d] - 1, &total), TP_ERR_SHAPE,
                     "dilated kernel size overflows");
            p->pad_left[d] = total / 2;
            p->pad_right[d] = total - total / 2;
        }
    } else {
        for (int d = 0; d < CONV_MAX_SPATIAL; d++) p->pad_right[d] = p->pad_left[d];
    }

    /* channels and groups */
    TP_CHECK(weight->sizes[0] >= 1, TP_ERR_SHAPE,
             "Given groups=%" PRId64 ", expected weight to be at least 1 at dimension 0, but got weight of size %s "
             "instead",
             p->groups, tp__shape_str(weight->ndim, weight->sizes, s1, sizeof s1));
    TP_CHECK(tp__dim_divisible(tp__dim(weight, 0), p->groups, "weight.shape[0] divisible by groups"), TP_ERR_SHAPE,
             "Given groups=%" PRId64 ", expected weight to be divisible by %" PRId64
             " at dimension 0, but got weight of size %s instead",
             p->groups, p->groups, tp__shape_str(weight->ndim, weight->sizes, s1, sizeof s1));
    tp_sdim in_channels = tp__dim(input, in_sp - 1), out_channels;
    if (!p->transposed) {
        int64_t expected = weight->sizes[1] * p->groups;
        TP_CHECK(tp__dim_eq(in_channels, tp__dim_mulk(tp__dim(weight, 1), p->groups),
                            "input channels == weight.shape[1] * groups"),
                 TP_ERR_SHAPE,
                 "Given groups=%" PRId64 ", weight of size %s, expected input%s to have %" PRId64
                 " channels, but got %" PRId64 " channels instead",
                 p->groups, tp__shape_str(weight->ndim, weight->sizes, s1, sizeof s1),
                 tp__shape_str(input->ndim, input->sizes, s2, sizeof s2), expected, p->in_channels);
        p->out_channels = weight->sizes[0];
        out_channels = tp__dim(weight, 0);
    } else {
        TP_CHECK(tp__dim_eq(in_channels, tp__dim(weight, 0), "input channels == weight.shape[0]"), TP_ERR_SHAPE,
                 "Given transposed=1, weight of size %s, expected input%s to have %" PRId64
                 " channels, but got %" PRId64 " channels instead",
                 tp__shape_str(weight->ndim, weight->sizes, s1, sizeof s1),
                 tp__shape_str(input->ndim, input->sizes, s2, sizeof s2), weight->sizes[0], p->in_channels);
        TP_CHECK(tp_mul_overflow_i64(weight->sizes[1], p->groups, &p->out_channels), TP_ERR_SHAPE,
                 "output channel count overflows");
        out_channels = tp__dim_mulk(tp__dim(weight, 1), p->groups);
    }
    if (bias)
        TP_CHECK(bias->ndim == 1 && tp__dim_eq(tp__dim(bias, 0), out_channels, "bias size == output channels"),
                 TP_ERR_SHAPE,
                 "Given weight of size %s, expected bias to be 1-dimensional with %" PRId64
                 " elements, but got bias of size %s instead",
                 tp__shape_str(weight->ndim, weight->sizes, s1, sizeof s1), p->out_channels,
                 tp__shape_str(bias->ndim, bias->sizes, s2, sizeof s2));

    /* output sizes; the spatial ones >= 1 (guards: the relations relied on) */
    tp_sdim out_dims[CONV_MAX_SPATIAL];
    char what[64];
    if (!p->transposed) {
        int64_t padded[CONV_MAX_SPATIAL], kext[CONV_MAX_SPATIAL];
        bool fits = true;
        for (int d = 0; d < CONV_MAX_SPATIAL; d++) {
            if (!tp_add_overflow_i64(p->in_size[d], p->pad_left[d], &padded[d]) ||
                !tp_add_overflow_i64(padded[d], p->pad_right[d], &padded[d]) ||
                !tp_mul_overflow_i64(p->dilation[d], p->kernel[d] - 1, &kext[d]))
                return tp_error(TP_ERR_SHAPE, "padded input or dilated kernel size overflows");
            kext[d] += 1;
            if (d < lead) continue;
            /* floor((L + 2p - d(k-1) - 1) / s) + 1 >= 1 is padded >= kext */
            out_dims[d] = tp__dim_addk(
                tp__dim_floordiv(tp__dim_addk(in_dims[d], p->pad_left[d] + p->pad_right[d] - kext[d]), p->stride[d]),
                1);
            snprintf(what, sizeof what, "output size of spatial dim %d", d - lead);
            if (!tp__dim_ge(out_dims[d], 1, what)) fits = false;
        }
        TP_CHECK(fits, TP_ERR_SHAPE,
                 "Calculated padded input size per channel: %s. Kernel size: %s. Kernel size can't be greater than "
                 "actual input size",
                 size_tuple(n_spatial, padded + lead, s1, sizeof s1), size_tuple(n_spatial, kext + lead, s2, sizeof s2));
        for (int d = 0; d < CONV_MAX_SPATIAL; d++) p->out_size[d] = (padded[d] - kext[d]) / p->stride[d] + 1;
    } else {
        bool op_ok = true, positive = true;
        for (int d = lead; d < CONV_MAX_SPATIAL; d++)
            if (p->output_padding[d] >= p->stride[d] && p->output_padding[d] >= p->dilation[d]) op_ok = false;
        if (!op_ok) {
            char s3[128];
            return tp_error(TP_ERR_INVALID_ARG,
                            "output padding must be smaller than either stride or dilation, but got "
                            "output_padding=%s, stride=%s, dilation=%s",
                            size_tuple(n_spatial, p->output_padding + lead, s1, sizeof s1),
                            size_tuple(n_spatial, p->stride + lead, s2, sizeof s2),
                            size_tuple(n_spatial, p->dilation + lead, s3, sizeof s3));
        }
        for (int d = 0; d < CONV_MAX_SPATIAL; d++) {
            int64_t a, b;
            if (!tp_mul_overflow_i64(p->in_size[d] - 1, p->stride[d], &a) ||
                !tp_mul_overflow_i64(p->dilation[d], p->kernel[d] - 1, &b))
                return tp_error(TP_ERR_SHAPE, "transposed convolution output size overflows");
            if (!tp_add_overflow_i64(a, b, &a) || !tp_add_overflow_i64(a, p->output_padding[d] + 1, &a) ||
                !tp_mul_overflow_i64(p->pad_left[d], 2, &b))
                return tp_error(TP_ERR_SHAPE, "transposed convolution output size overflows");
            p->out_size[d] = a - b;
            if (d < lead) continue;
            /* (L - 1) s - 2p + d(k-1) + output_padding + 1 */
            out_dims[d] = tp__dim_addk(tp__dim_mulk(tp__dim_addk(in_dims[d], -1), p->stride[d]),
                                       p->dilation[d] * (p->kernel[d] - 1) + p->output_padding[d] + 1 - b);
            snprintf(what, sizeof what, "output size of spatial dim %d", d - lead);
            if (!tp__dim_ge(out_dims[d], 1, what)) positive = false;
        }
        TP_CHECK(positive, TP_ERR_SHAPE,
                 "Given input size per channel: %s. Calculated output size per channel: %s. Output size is too small",
                 size_tuple(n_spatial, p->in_size + lead, s1, sizeof s1),
                 size_tuple(n_spatial, p->out_size + lead, s2, sizeof s2));
    }

    int k = 0;
    if (p->batched) p->out_dims[k++] = tp__dim(input, 0);
    p->out_dims[k++] = out_channels;
    for (int d = lead; d < CONV_MAX_SPATIAL; d++) p->out_dims[k++] = out_dims[d];
    p->out_ndim = k;
    for (int i = 0; i < k; i++) p->out_sizes[i] = p->out_dims[i].v;
    return TP_OK;
}

/* ---- reference kernels ------------------------------------------------- */

/* A tensor seen as [A, B, D, H, W] with element strides (missing dims have
 * size 1 and stride 0). */
typedef struct view5 {
    const char *base;
    tp_dtype dtype;
    int64_t esize;
    int64_t stride[5];
} view5;

/* Describe t, whose last n_spatial dims are spatial and which has `lead`
 * (1 or 2) leading dims, as a view5. */
static void make_view5(const tp_tensor *t, int n_spatial, view5 *v) {
    v->base = tp__tensor_base(t);
    v->dtype = t->dtype;
    v->esize = (int64_t)tp_dtype_size(t->dtype);
    for (int d = 0; d < 5; d++) v->stride[d] = 0;
    int first_spatial = t->ndim - n_spatial;
    /* channel-like dim just before the spatial dims goes to slot 1, batch to slot 0 */
    if (first_spatial >= 1) v->stride[1] = t->strides[first_spatial - 1];
    if (first_spatial >= 2) v->stride[0] = t->strides[first_spatial - 2];
    for (int d = 0; d < n_spatial; d++) v->stride[5 - n_spatial + d] = t->strides[first_spatial + d];
}

static inline double load_elem(const char *p, tp_dtype dtype) {
    if (dtype == TP_FLOAT32) {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    if (dtype == TP_FLOAT64) {
        double f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    return tp__load_f64(p, dtype);
}

static inline void store_elem(char *p, tp_dtype dtype, double v) {
    if (dtype == TP_FLOAT32) {
        float f = (float)v;
        memcpy(p, &f, sizeof f);
    } else {
        tp__store_f64(p, dtype, v);
    }
}

/* Valid kernel taps [*lo, *hi) for a forward convolution: input index
 * o*stride - pad + k*dil must lie in [0, in). */
static void forward_tap_range(int64_t o, int64_t stride, int64_t pad, int64_t dil, int64_t kernel, int64_t in,
                              int64_t *lo, int64_t *hi) {
    int64_t start = o * stride - pad;
    int64_t l = 0, h = kernel;
    if (start < 0) l = (-start + dil - 1) / dil;
    if (start + (kernel - 1) * dil >= in) {
        /* largest k with start + k*dil <= in-1 */
        int64_t last = in - 1 - start;
        h = last < 0 ? 0 : last / dil + 1;
    }
    if (h > kernel) h = kernel;
    *lo = l;
    *hi = h < l ? l : h;
}

static void conv_forward_ref(const conv_params *p, const view5 *x, const view5 *w, const tp_tensor *bias,
                             tp_tensor *out) {
    char *optr = tp__tensor_base(out);
    int64_t oesize = (int64_t)tp_dtype_size(out->dtype);
    int64_t oc_per_group = p->out_channels / p->groups;
    int64_t ic_per_group = p->in_channels / p->groups;
    const char *bias_base = bias ? tp__tensor_base(bias) : NULL;
    int64_t bias_stride = bias ? bias->strides[0] * (int64_t)tp_dtype_size(bias->dtype) : 0;
    int64_t flat = 0;
    for (int64_t n = 0; n < p->batch; n++) {
        for (int64_t oc = 0; oc < p->out_channels; oc++) {
            int64_t g = oc / oc_per_group;
            double b = bias_base ? load_elem(bias_base + oc * bias_stride, bias->dtype) : 0.0;
            const char *xg = x->base + (n * x->stride[0] + g * ic_per_group * x->stride[1]) * x->esize;
            const char *wo = w->base + oc * w->stride[0] * w->esize;
            for (int64_t od = 0; od < p->out_size[0]; od++) {
                int64_t kd_lo, kd_hi;
                forward_tap_range(od, p->stride[0], p->pad_left[0], p->dilation[0], p->kernel[0], p->in_size[0],
                                  &kd_lo, &kd_hi);
                for (int64_t oh = 0; oh < p->out_size[1]; oh++) {
                    int64_t kh_lo, kh_hi;
                    forward_tap_range(oh, p->stride[1], p->pad_left[1], p->dilation[1], p->kernel[1],
                                      p->in_size[1], &kh_lo, &kh_hi);
                    for (int64_t ow = 0; ow < p->out_size[2]; ow++) {
                        int64_t kw_lo, kw_hi;
                        forward_tap_range(ow, p->stride[2], p->pad_left[2], p->dilation[2], p->kernel[2],
                                          p->in_size[2], &kw_lo, &kw_hi);
                        double acc = b;
                        for (int64_t ic = 0; ic < ic_per_group; ic++) {
                            const char *xc = xg + ic * x->stride[1] * x->esize;
                            const char *wc = wo + ic * w->stride[1] * w->esize;
                            for (int64_t kd = kd_lo; kd < kd_hi; kd++) {
                                int64_t id = od * p->stride[0] - p->pad_left[0] + kd * p->dilation[0];
                                for (int64_t kh = kh_lo; kh < kh_hi; kh++) {
                                    int64_t ih = oh * p->stride[1] - p->pad_left[1] + kh * p->dilation[1];
                                    const char *xrow = xc + (id * x->stride[2] + ih * x->stride[3]) * x->esize;
                                    const char *wrow = wc + (kd * w->stride[2] + kh * w->stride[3]) * w->esize;
                                    for (int64_t kw = kw_lo; kw < kw_hi; kw++) {
                                        int64_t iw = ow * p->stride[2] - p->pad_left[2] + kw * p->dilation[2];
                                        acc += load_elem(xrow + iw * x->stride[4] * x->esize, x->dtype) *
                                               load_elem(wrow + kw * w->stride[4] * w->esize, w->dtype);
                                    }
                                }
                            }
                        }
                        store_elem(optr + flat * oesize, out->dtype, acc);
                        flat++;
                    }
                }
            }
        }
    }
}

/* Input index for output o and tap k of a transposed convolution, or -1. */
static inline int64_t transposed_source(int64_t o, int64_t k, int64_t stride, int64_t pad, int64_t dil,
                                        int64_t in) {
    int64_t num = o + pad - k * dil;
    if (num < 0 || num % stride != 0) return -1;
    int64_t i = num / stride;
    return i < in ? i : -1;
}

/* Transposed convolution as a gather: out[n, oc, o] = bias[oc] + sum over the
 * input channels of oc's group and taps k with o = i*stride - pad + k*dil of
 * x[n, ic, i] * w[ic, oc % C_out_g, k]. The weight is (C_in, C_out/groups, k...). */
static void conv_transposed_ref(const conv_params *p, const view5 *x, const view5 *w, const tp_tensor *bias,
                                tp_tensor *out) {
    char *optr = tp__tensor_base(out);
    int64_t oesize = (int64_t)tp_dtype_size(out->dtype);
    int64_t oc_per_group = p->out_channels / p->groups;
    int64_t ic_per_group = p->in_channels / p->groups;
    const char *bias_base = bias ? tp__tensor_base(bias) : NULL;
    int64_t bias_stride = bias ? bias->strides[0] * (int64_t)tp_dtype_size(bias->dtype) : 0;
    int64_t flat = 0;
    for (int64_t n = 0; n < p->batch; n++) {
        for (int64_t oc = 0; oc < p->out_channels; oc++) {
            int64_t g = oc / oc_per_group, ocl = oc % oc_per_group;
            double b = bias_base ? load_elem(bias_base + oc * bias_stride, bias->dtype) : 0.0;
            for (int64_t od = 0; od < p->out_size[0]; od++) {
                for (int64_t oh = 0; oh < p->out_size[1]; oh++) {
                    for (int64_t ow = 0; ow < p->out_size[2]; ow++) {
                        double acc = b;
                        for (int64_t kd = 0; kd < p->kernel[0]; kd++) {
                            int64_t id = transposed_source(od, kd, p->stride[0], p->pad_left[0], p->dilation[0],
                                                           p->in_size[0]);
                            if (id < 0) continue;
                            for (int64_t kh = 0; kh < p->kernel[1]; kh++) {
                                int64_t ih = transposed_source(oh, kh, p->stride[1], p->pad_left[1],
                                                               p->dilation[1], p->in_size[1]);
                                if (ih < 0) continue;
                                for (int64_t kw = 0; kw < p->kernel[2]; kw++) {
                                    int64_t iw = transposed_source(ow, kw, p->stride[2], p->pad_left[2],
                                                                   p->dilation[2], p->in_size[2]);
                                    if (iw < 0) continue;
                                    int64_t xoff = n * x->stride[0] + id * x->stride[2] + ih * x->stride[3] +
                                                   iw * x->stride[4];
                                    int64_t woff = ocl * w->stride[1] + kd * w->stride[2] + kh * w->stride[3] +
                                                   kw * w->stride[4];
                                    for (int64_t icl = 0; icl < ic_per_group; icl++) {
                                        int64_t ic = g * ic_per_group + icl;
                                        acc += load_elem(x->base + (xoff + ic * x->stride[1]) * x->esize, x->dtype) *
                                               load_elem(w->base + (woff + ic * w->stride[0]) * w->esize, w->dtype);
                                    }
                                }
                            }
                        }
                        store_elem(optr + flat * oesize, out->dtype, acc);
                        flat++;
                    }
                }
            }
        }
    }
}

static tp_status conv_run(const tp_value *args, tp_value *out, conv_kind kind, int n_spatial) {
    conv_params p;
    TP_TRY(conv_setup(args, kind, n_spatial, &p));
    tp_tensor *o = tp__out_at(out, 0);
    TP_CHECK(o && o->ndim == p.out_ndim, TP_ERR_INTERNAL, "output tensor does not match the shape rule");
    if (tp_tensor_numel(o) == 0) return TP_OK;
    const tp_tensor *input = tp__arg_tensor(args, 0), *weight = tp__arg_tensor(args, 1);
    TP_CHECK(!tp_tensor_is_meta(input) && !tp_tensor_is_meta(weight), TP_ERR_STATE,
             "cannot run on meta tensors (no data)");
    view5 x, w;
    make_view5(input, p.n_spatial, &x);
    make_view5(weight, p.n_spatial, &w);
    if (!p.batched) x.stride[0] = 0; /* (C, spatial...): slot 1 is C, batch of one */
    const tp_tensor *bias = tp__arg_tensor(args, 2);
    if (p.transposed) conv_transposed_ref(&p, &x, &w, bias, o);
    else conv_forward_ref(&p, &x, &w, bias, o);
    return TP_OK;
}

static tp_status conv_infer(const tp_value *args, tp_value *out, conv_kind kind, int n_spatial) {
    conv_params p;
    TP_TRY(conv_setup(args, kind, n_spatial, &p));
    return tp__out_dims(out, p.dtype, p.out_ndim, p.out_dims);
}

/* ---- registration ------------------------------------------------------ */

#define CONV_OP_FNS(name, kind, n_spatial)                                                                    \
    static tp_status name##_infer(const tp_value *args, tp_value *out) {                                     \
        return conv_infer(args, out, kind, n_spatial);                                                        \
    }                                                                                                         \
    static tp_status name##_kernel(const tp_value *args, tp_value *out) { return conv_run(args, out, kind, n_spatial); }

CONV_OP_FNS(convolution, CONV_KIND_CONVOLUTION, 0)
CONV_OP_FNS(conv1d, CONV_KIND_FORWARD, 1)
CONV_OP_FNS(conv2d, CONV_KIND_FORWARD, 2)
CONV_OP_FNS(conv3d, CONV_KIND_FORWARD, 3)
CONV_OP_FNS(conv_transpose1d, CONV_KIND_TRANSPOSED, 1)
CONV_OP_FNS(conv_transpose2d, CONV_KIND_TRANSPOSED, 2)
CONV_OP_FNS(conv_transpose3d, CONV_KIND_TRANSPOSED, 3)

#define CONV_FORWARD_ARGS                                                                                     \
    "(Tensor input, Tensor weight, Tensor? bias=None, int[] stride=1, Any padding=0, int[] dilation=1, "     \
    "int groups=1) -> Tensor"
#define CONV_TRANSPOSED_ARGS                                                                                  \
    "(Tensor input, Tensor weight, Tensor? bias=None, int[] stride=1, int[] padding=0, "                     \
    "int[] output_padding=0, int groups=1, int[] dilation=1) -> Tensor"

void tp__register_conv_ops(void) {
    tp__register_op(TP_OP_CONVOLUTION,
                    "convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, "
                    "int[] dilation, bool transposed, int[] output_padding, int groups) -> Tensor",
                    0, convolution_infer, convolution_kernel);
    tp__register_op(TP_OP_CONV1D, "conv1d" CONV_FORWARD_ARGS, 0, conv1d_infer, conv1d_kernel);
    tp__register_op(TP_OP_CONV2D, "conv2d" CONV_FORWARD_ARGS, 0, conv2d_infer, conv2d_kernel);
    tp__register_op(TP_OP_CONV3D, "conv3d" CONV_FORWARD_ARGS, 0, conv3d_infer, conv3d_kernel);
    tp__register_op(TP_OP_CONV_TRANSPOSE1D, "conv_transpose1d" CONV_TRANSPOSED_ARGS, 0, conv_transpose1d_infer,
                    conv_transpose1d_kernel);
    tp__register_op(TP_OP_CONV_TRANSPOSE2D, "conv_transpose2d" CONV_TRANSPOSED_ARGS, 0, conv_transpose2d_infer,
                    conv_transpose2d_kernel);
    tp__register_op(TP_OP_CONV_TRANSPOSE3D, "conv_transpose3d" CONV_TRANSPOSED_ARGS, 0, conv_transpose3d_infer,
                    conv_transpose3d_kernel);
}
