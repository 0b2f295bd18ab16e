/*
 * pool.c - pooling and resampling ops: max_pool1d/2d/3d (and their
 * _with_indices forms), avg_pool1d/2d/3d,
 * max_unpool1d/2d/3d, lp_pool1d/2d/3d, adaptive_avg_pool1d/2d/3d,
 * adaptive_max_pool1d/2d/3d, interpolate, grid_sample and affine_grid.
 * Schemas, shape rules and reference kernels.
 *
 * Inputs are (N, C, spatial...) or unbatched (C, spatial...) for the pools,
 * (N, C, spatial...) for interpolate. Like conv.c, every op is treated as
 * 3-D: 1-D and 2-D problems get leading spatial dims of size 1 (kernel 1,
 * stride 1, padding 0), and the input is read through a 5-D strided
 * description [N, C, D, H, W], so any input strides work. Float math is done
 * in double and rounded once on store, except where PyTorch's own float
 * arithmetic decides the result (interpolate's source indices and weights,
 * which are computed in float for float32/16 inputs exactly as torch does).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "kernel_util.h"

#define POOL_MAX_SPATIAL 3

/* ---- shared helpers ---------------------------------------------------- */

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

/* A tensor seen as [N, C, D, H, W]: element strides (missing dims: 0). */
typedef struct view5 {
    const char *base;
    tp_dtype dtype;
    int64_t esize;
    int64_t stride[5];
} view5;

/* t's last n_spatial dims are spatial; the dim before them is C, the one
 * before that (if any) N. */
static void make_view5(const tp_tensor *t, int n_spatial, view5 *v) {
    v->base = tp__tensor_base(t);
    v->dtype = t->dtype;
    v->esize = (int64_t)tp_dtype_size(t->dtype);
    for (int d = 0; d < 5; d++) v->stride[d] = 0;
    int first_spatial = t->ndim - n_spatial;
    if (first_spatial >= 1) v->stride[1] = t->strides[first_spatial - 1];
    if (first_spatial >= 2) v->stride[0] = t->strides[first_spatial - 2];
    for (int d = 0; d < n_spatial; d++) v->stride[5 - n_spatial + d] = t->strides[first_spatial + d];
}

static inline const char *view5_at(const view5 *v, int64_t n, int64_t c, int64_t d, int64_t h, int64_t w) {
    return v->base + (n * v->stride[0] + c * v->stride[1] + d * v->stride[2] + h * v->stride[3] + w * v->stride[4]) *
                         v->esize;
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

/* Floor division (b > 0). */
static inline int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* The input's layout: batched (N, C, spatial...) or unbatched (C, spatial...);
 * sizes padded to 3 spatial dims. */
typedef struct pool_input {
    int n_spatial;
    bool batched;
    int64_t batch, channels;
    int64_t in_size[POOL_MAX_SPATIAL];
    tp_sdim in_dims[POOL_MAX_SPATIAL]; /* in_size as dims (dim.h) */
} pool_input;

/* Check the input rank (n_spatial + 1 or + 2) and that every non-batch dim is
 * non-empty. */
static tp_status pool_input_setup(const tp_tensor *input, int n_spatial, pool_input *in) {
    char s1[128];
    TP_CHECK(input, TP_ERR_TYPE, "argument 'self' must be a tensor");
    TP_CHECK(input->ndim == n_spatial + 1 || input->ndim == n_spatial + 2, TP_ERR_SHAPE,
             "expected %dD (unbatched) or %dD (batched) input, but got input of size %s", n_spatial + 1,
             n_spatial + 2, tp__shape_str(input->ndim, input->sizes, s1, sizeof s1));
    in->n_spatial = n_spatial;
    in->batched = input->ndim == n_spatial + 2;
    for (int d = in->batched ? 1 : 0; d < input->ndim; d++)
        TP_CHECK(tp__dim_ge(tp__dim(input, d), 1, "pooling: non-empty non-batch dims"), TP_ERR_SHAPE,
                 "expected input to have non-zero size for non-batch dimensions, but got input of size %s with "
                 "dimension %d being empty",
                 tp__shape_str(input->ndim, input->sizes, s1, sizeof s1), d);
    in->batch = in->batched ? input->sizes[0] : 1;
    in->channels = input->sizes[input->ndim - n_spatial - 1];
    int lead = POOL_MAX_SPATIAL - n_spatial;
    for (int d = 0; d < POOL_MAX_SPATIAL; d++) {
        in->in_dims[d] = d < lead ? tp__dimk(1) : tp__dim(input, input->ndim - n_spatial + d - lead);
        in->in_size[d] = in->in_dims[d].v;
    }
    return TP_OK;
}

/* The result: the input's leading dims followed by out_dims' spatial ones;
 * with_indices also int64 indices of that shape. */
static tp_status pool_out(tp_value *out, const tp_tensor *input, const pool_input *in, const tp_sdim *out_dims,
                          bool with_indices) {
    tp_sdim dims[TP_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < input->ndim - in->n_spatial; d++) dims[k++] = tp__dim(input, d);
    for (int d = POOL_MAX_SPATIAL - in->n_spatial; d < POOL_MAX_SPATIAL; d++) dims[k++] = out_dims[d];
    if (!with_indices) return tp__out_dims(out, input->dtype, k, dims);
    TP_TRY(tp__out_tuple(out, 2));
    TP_TRY(tp__out_dims(&out->u.seq.items[0], input->dtype, k, dims));
    return tp__out_dims(&out->u.seq.items[1], TP_INT64, k, dims);
}

/* Constant output sizes as dims. */
static void const_dims(const int64_t *sizes, tp_sdim *dims) {
    for (int d = 0; d < POOL_MAX_SPATIAL; d++) dims[d] = tp__dimk(sizes[d]);
}

/* Read an int list with one entry per spatial dim (one value repeats) into the
 * last n_spatial slots of out[3]; leading slots get `fill`. */
static tp_status read_spatial_ints(const tp_value *args, int i, const char *what, int n_spatial, int64_t fill,
                                   int64_t *out) {
    int64_t vals[POOL_MAX_SPATIAL];
    int n;
    TP_TRY(tp__arg_ints(args, i, what, vals, POOL_MAX_SPATIAL, n_spatial, &n));
    int lead = POOL_MAX_SPATIAL - n_spatial;
    for (int d = 0; d < lead; d++) out[d] = fill;
    for (int d = 0; d < n_spatial; d++) out[lead + d] = vals[d];
    return TP_OK;
}

/* ---- max_pool / avg_pool: shape rule ----------------------------------- */

typedef struct window_params {
    pool_input in;
    int64_t kernel[POOL_MAX_SPATIAL], stride[POOL_MAX_SPATIAL], pad[POOL_MAX_SPATIAL],
        dilation[POOL_MAX_SPATIAL];
    int64_t out_size[POOL_MAX_SPATIAL];
    tp_sdim out_dims[POOL_MAX_SPATIAL];
    bool ceil_mode;
} window_params;

/* PyTorch's pooling_output_shape: with ceil_mode the last window must start
 * inside the input or the left padding. */
static tp_status pooling_output_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode,
                                     int64_t *out) {
    int64_t kext, num;
    if (!tp_mul_overflow_i64(dil, k - 1, &kext) || !tp_mul_overflow_i64(pad, 2, &num) ||
        !tp_add_overflow_i64(in, num, &num) ||
        !tp_add_overflow_i64(num, -kext - 1 + (ceil_mode ? stride - 1 : 0), &num))
        return tp_error(TP_ERR_SHAPE, "pooling window size overflows");
    int64_t o = floor_div(num, stride) + 1;
    if (ceil_mode && (o - 1) * stride >= in + pad) o--;
    *out = o;
    return TP_OK;
}

/* Kernel, stride, padding (and dilation when dilation_arg >= 0) from args
 * 1..; checks them and computes the output size. */
static tp_status window_setup(const tp_value *args, int n_spatial, int dilation_arg, int ceil_arg,
                              window_params *p) {
    memset(p, 0, sizeof *p);
    const tp_tensor *input = tp__arg_tensor(args, 0);
    TP_TRY(pool_input_setup(input, n_spatial, &p->in));
    int lead = POOL_MAX_SPATIAL - n_spatial;
    char s1[128], s2[128], s3[128];
    TP_TRY(read_spatial_ints(args, 1, "kernel_size", n_spatial, 1, p->kernel));
    if (tp_value_len(&args[2]) == 0 && args[2].kind != TP_VAL_INT)
        memcpy(p->stride, p->kernel, sizeof p->stride);
    else
        TP_TRY(read_spatial_ints(args, 2, "stride", n_spatial, 1, p->stride));
    TP_TRY(read_spatial_ints(args, 3, "padding", n_spatial, 0, p->pad));
    if (dilation_arg >= 0) TP_TRY(read_spatial_ints(args, dilation_arg, "dilation", n_spatial, 1, p->dilation));
    else
        for (int d = 0; d < POOL_MAX_SPATIAL; d++) p->dilation[d] = 1;
    p->ceil_mode = tp__arg_bool(args, ceil_arg);
    for (int d = lead; d < POOL_MAX_SPATIAL; d++) {
        TP_CHECK(p->kernel[d] > 0, TP_ERR_INVALID_ARG, "kernel_size must be greater than zero, but got %s",
                 size_tuple(n_spatial, p->kernel + lead, s1, sizeof s1));
        TP_CHECK(p->stride[d] > 0, TP_ERR_INVALID_ARG, "stride must be greater than zero, but got %s",
                 size_tuple(n_spatial, p->stride + lead, s1, sizeof s1));
        TP_CHECK(p->dilation[d] > 0, TP_ERR_INVALID_ARG, "dilation must be greater than zero, but got %s",
                 size_tuple(n_spatial, p->dilation + lead, s1, sizeof s1));
        TP_CHECK(p->pad[d] >= 0, TP_ERR_INVALID_ARG, "padding must be non-negative, but got %s",
                 size_tuple(n_spatial, p->pad + lead, s1, sizeof s1));
    }
    for (int d = lead; d < POOL_MAX_SPATIAL; d++) {
        int64_t kext;
        TP_CHECK(tp_mul_overflow_i64(p->kernel[d] - 1, p->dilation[d], &kext), TP_ERR_SHAPE,
                 "dilated kernel size overflows");
        TP_CHECK(p->pad[d] <= kext / 2 + kext % 2, TP_ERR_INVALID_ARG, /* (kext + 1) / 2 */
                 "pad should be at most half of effective kernel size, but got pad=%s, kernel_size=%s and "
                 "dilation=%s",
                 size_tuple(n_spatial, p->pad + lead, s1, sizeof s1),
                 size_tuple(n_spatial, p->kernel + lead, s2, sizeof s2),
                 size_tuple(n_spatial, p->dilation + lead, s3, sizeof s3));
    }
    int64_t window = 1; /* the divisor of avg_pool must fit int64 */
    for (int d = 0; d < POOL_MAX_SPATIAL; d++)
        TP_CHECK(tp_mul_overflow_i64(window, p->kernel[d], &window), TP_ERR_INVALID_ARG,
                 "kernel_size %s is too large", size_tuple(n_spatial, p->kernel + lead, s1, sizeof s1));
    bool positive = true;
    for (int d = 0; d < POOL_MAX_SPATIAL; d++) {
        TP_TRY(pooling_output_size(p->in.in_size[d], p->kernel[d], p->pad[d], p->stride[d], p->dilation[d],
                                   p->ceil_mode, &p->out_size[d]));
        tp_sdim in = p->in.in_dims[d];
        p->out_dims[d] = tp__dimk(p->out_size[d]);
        if (d >= lead && !tp__dim_is_const(in)) {
            if (p->ceil_mode) tp__dim_give_up(); /* ceil mode's last-window rule is not affine */
            else /* floor((L + 2p - d(k-1) - 1) / s) + 1 */
                p->out_dims[d] = tp__dim_addk(
                    tp__dim_floordiv(tp__dim_addk(in, 2 * p->pad[d] - p->dilation[d] * (p->kernel[d] - 1) - 1),
                                     p->stride[d]),
                    1);
        }
        char what[64];
        snprintf(what, sizeof what, "output size of spatial dim %d", d - lead);
        if (d >= lead && !tp__dim_ge(p->out_dims[d], 1, what)) positive = false;
    }
    if (!positive) {
        int64_t a[POOL_MAX_SPATIAL + 1], b[POOL_MAX_SPATIAL + 1];
        a[0] = b[0] = p->in.channels;
        for (int d = 0; d < n_spatial; d++) {
            a[1 + d] = p->in.in_size[lead + d];
            b[1 + d] = p->out_size[lead + d];
        }
        return tp_error(TP_ERR_SHAPE, "Given input size: %s. Calculated output size: %s. Output size is too small",
                        size_tuple(n_spatial + 1, a, s1, sizeof s1), size_tuple(n_spatial + 1, b, s2, sizeof s2));
    }
    return TP_OK;
}

/* ---- max_pool ----------------------------------------------------------- */

/* max_pool(Tensor self, int[] kernel_size, int[] stride, int[] padding, int[] dilation, bool ceil_mode) */
static tp_status max_pool_setup(const tp_value *args, int n_spatial, window_params *p) {
    const tp_tensor *input = tp__arg_tensor(args, 0);
    TP_CHECK(input, TP_ERR_TYPE, "argument 'self' must be a tensor");
    TP_CHECK(tp_dtype_is_float(input->dtype), TP_ERR_TYPE, "expected a floating point input, but got %s",
             tp_dtype_name(input->dtype));
    return window_setup(args, n_spatial, 4, 5, p);
}

static tp_status max_pool_infer(const tp_value *args, tp_value *out, int n_spatial) {
    window_params p;
    TP_TRY(max_pool_setup(args, n_spatial, &p));
    return pool_out(out, tp__arg_tensor(args, 0), &p.in, p.out_dims, false);
}

/* Taps [*lo, *hi) of a window starting at `start` whose positions
 * start + k*dil lie in [0, in). */
static void tap_range(int64_t start, int64_t dil, int64_t kernel, int64_t in, int64_t *lo, int64_t *hi) {
    int64_t l = 0, h = kernel;
    if (start < 0) l = (-start + dil - 1) / dil;
    int64_t last = in - 1 - start;
    if (last < 0) h = 0;
    else if (last / dil + 1 < h) h = last / dil + 1;
    *lo = l;
    *hi = h < l ? l : h;
}

/* max_pool*_with_indices: (values, int64 indices). */
static tp_status max_pool_indices_infer(const tp_value *args, tp_value *out, int n_spatial) {
    window_params p;
    TP_TRY(max_pool_setup(args, n_spatial, &p));
    return pool_out(out, tp__arg_tensor(args, 0), &p.in, p.out_dims, true);
}

/* Values, and with_indices the flat index of each maximum in its input
 * plane (d * H * W + h * W + w), as PyTorch's CPU kernel picks it: the first
 * valid tap of the window, replaced by every later larger value and by every
 * NaN (so the last NaN wins). */
static tp_status max_pool_kernel_common(const tp_value *args, tp_value *out, int n_spatial, bool with_indices) {
    window_params p;
    TP_TRY(max_pool_setup(args, n_spatial, &p));
    const tp_tensor *input = tp__arg_tensor(args, 0);
    tp_tensor *o = tp__out_at(out, 0), *oi = with_indices ? tp__out_at(out, 1) : NULL;
    if (tp_tensor_numel(o) == 0) return TP_OK;
    int64_t *iptr = oi ? (int64_t *)tp__tensor_base(oi) : NULL;
    view5 x;
    make_view5(input, n_spatial, &x);
    char *optr = tp__tensor_base(o);
    int64_t oes = (int64_t)tp_dtype_size(o->dtype), flat = 0;
    for (int64_t n = 0; n < p.in.batch; n++)
        for (int64_t c = 0; c < p.in.channels; c++)
            for (int64_t od = 0; od < p.out_size[0]; od++) {
                int64_t sd = od * p.stride[0] - p.pad[0], d_lo, d_hi;
                tap_range(sd, p.dilation[0], p.kernel[0], p.in.in_size[0], &d_lo, &d_hi);
                for (int64_t oh = 0; oh < p.out_size[1]; oh++) {
                    int64_t sh = oh * p.stride[1] - p.pad[1], h_lo, h_hi;
                    tap_range(sh, p.dilation[1], p.kernel[1], p.in.in_size[1], &h_lo, &h_hi);
                    for (int64_t ow = 0; ow < p.out_size[2]; ow++) {
                        int64_t sw = ow * p.stride[2] - p.pad[2], w_lo, w_hi;
                        tap_range(sw, p.dilation[2], p.kernel[2], p.in.in_size[2], &w_lo, &w_hi);
                        double best = -INFINITY;
                        int64_t best_at = ((sd + d_lo * p.dilation[0]) * p.in.in_size[1] + sh + h_lo * p.dilation[1]) *
                                              p.in.in_size[2] +
                                          sw + w_lo * p.dilation[2];
                        for (int64_t kd = d_lo; kd < d_hi; kd++)
                            for (int64_t kh = h_lo; kh < h_hi; kh++)
                                for (int64_t kw = w_lo; kw < w_hi; kw++) {
                                    int64_t id = sd + kd * p.dilation[0], ih = sh + kh * p.dilation[1],
                                            iw = sw + kw * p.dilation[2];
                                    double v = load_elem(view5_at(&x, n, c, id, ih, iw), x.dtype);
                                    if (v > best || isnan(v)) { /* NaN propagates */
                                        best = v;
                                        best_at = (id * p.in.in_size[1] + ih) * p.in.in_size[2] + iw;
                                    }
                                }
                        store_elem(optr + flat * oes, o->dtype, best);
                        if (iptr) iptr[flat] = best_at;
                        flat++;
                    }
                }
            }
    return TP_OK;
}

static tp_status max_pool_kernel(const tp_value *args, tp_value *out, int n_spatial) {
    return max_pool_kernel_common(args, out, n_spatial, false);
}

static tp_status max_pool_indices_kernel(const tp_value *args, tp_value *out, int n_spatial) {
    return max_pool_kernel_common(args, out, n_spatial, true);
}

/* ---- avg_pool ----------------------------------------------------------- */

/* avg_pool(Tensor self, int[] kernel_size, int[] stride, int[] padding, bool ceil_mode,
 *          bool count_include_pad, int? divisor_override) */
static tp_status avg_pool_setup(const tp_value *args, int n_spatial, window_params *p) {
    const tp_tensor *input = tp__arg_tensor(args, 0);
    TP_CHECK(input, TP_ERR_TYPE, "argument 'self' must be a tensor");
    TP_CHECK(tp_dtype_is_float(input->dtype) || input->dtype == TP_INT64, TP_ERR_TYPE,
             "expected a floating point or int64 input, but got %s", tp_dtype_name(input->dtype));
    TP_CHECK(tp__arg_is_none(args, 6) || tp__arg_int(args, 6) != 0, TP_ERR_INVALID_ARG,
             "divisor must be not zero");
    return window_setup(args, n_spatial, -1, 4, p);
}

static tp_status avg_pool_infer(const tp_value *args, tp_value *out, int n_spatial) {
    window_params p;
    TP_TRY(avg_pool_setup(args, n_spatial, &p));
    return pool_out(out, tp__arg_tensor(args, 0), &p.in, p.out_dims, false);
}

/* Window [*lo, *hi) clipped to the input and its padded size (PyTorch's
 * rule: the divisor with count_include_pad counts padding but not the part
 * of a ceil_mode window past the right padding). */
static void avg_window(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t in, int64_t *lo, int64_t *hi,
                       int64_t *padded_len) {
    int64_t start = o * stride - pad;
    int64_t end = start + k;
    if (end > in + pad) end = in + pad;
    *padded_len = end - start;
    if (start < 0) start = 0;
    if (end > in) end = in;
    *lo = start;
    *hi = end;
}

static tp_status avg_pool_kernel(const tp_value *args, tp_value *out, int n_spatial) {
    window_params p;
    TP_TRY(avg_pool_setup(args, n_spatial, &p));
    const tp_tensor *input = tp__arg_tensor(args, 0);
    bool count_include_pad = tp__arg_bool(args, 5);
    int64_t divisor_override = tp__arg_is_none(args, 6) ? 0 : tp__arg_int(args, 6);
    tp_tensor *o = tp__out_at(out, 0);
    if (tp_tensor_numel(o) == 0) return TP_OK;
    view5 x;
    make_view5(input, n_spatial, &x);
    bool is_int = input->dtype == TP_INT64;
    char *optr = tp__tensor_base(o);
    int64_t oes = (int64_t)tp_dtype_size(o->dtype), flat = 0;
    for (int64_t n = 0; n < p.in.batch; n++)
        for (int64_t c = 0; c < p.in.channels; c++)
            for (int64_t od = 0; od < p.out_size[0]; od++) {
                int64_t d0, d1, dlen;
                avg_window(od, p.stride[0], p.pad[0], p.kernel[0], p.in.in_size[0], &d0, &d1, &dlen);
                for (int64_t oh = 0; oh < p.out_size[1]; oh++) {
                    int64_t h0, h1, hlen;
                    avg_window(oh, p.stride[1], p.pad[1], p.kernel[1], p.in.in_size[1], &h0, &h1, &hlen);
                    for (int64_t ow = 0; ow < p.out_size[2]; ow++) {
                        int64_t w0, w1, wlen;
                        avg_window(ow, p.stride[2], p.pad[2], p.kernel[2], p.in.in_size[2], &w0, &w1, &wlen);
                        char *dst = optr + flat * oes;
                        flat++;
                        if (d0 >= d1 || h0 >= h1 || w0 >= w1) {
                            store_elem(dst, o->dtype, 0.0);
                            continue;
                        }
                        int64_t divisor = divisor_override ? divisor_override
                                          : count_include_pad ? dlen * hlen * wlen
                                                              : (d1 - d0) * (h1 - h0) * (w1 - w0);
                        if (is_int) {
                            uint64_t sum = 0; /* wraps like torch's int64 accumulation */
                            for (int64_t id = d0; id < d1; id++)
                                for (int64_t ih = h0; ih < h1; ih++)
                                    for (int64_t iw = w0; iw < w1; iw++)
                                        sum += (uint64_t)tp__load_i64(view5_at(&x, n, c, id, ih, iw), x.dtype);
                            int64_t s = (int64_t)sum;
                            /* C division truncates toward zero, as torch's integer path does */
                            int64_t q = divisor == -1 ? (int64_t)(0 - sum) : s / divisor;
                            tp__store_i64(dst, o->dtype, q);
                        } else {
                            double sum = 0.0;
                            for (int64_t id = d0; id < d1; id++)
                                for (int64_t ih = h0; ih < h1; ih++)
                                    for (int64_t iw = w0; iw < w1; iw++)
                                        sum += load_elem(view5_at(&x, n, c, id, ih, iw), x.dtype);
                            store_elem(dst, o->dtype, sum / (double)divisor);
                        }
                    }
                }
            }
    return TP_OK;
}

/* ---- lp_pool ------------------------------------------------------------
 * lp_pool(Tensor input, float norm_type, int[] kernel_size, int[]? stride=None,
 * bool ceil_mode=False): PyTorch's (sum over the window of x^p) * K / n,
 * to the power 1/p, where n is the window clipped to the input (avg_pool
 * with no padding) and K the full kernel size; norm_type +-inf is
 * tensorplay's max (min) of |x| over the window. */
static tp_status lp_pool_setup(const tp_value *args, int n_spatial, window_params *p, double *norm) {
    const tp_tensor *input = tp__arg_tensor(args, 0);
    TP_CHECK(input, TP_ERR_TYPE, "argument 'input' must be a tensor");
    TP_CHECK(tp_dtype_is_float(input->dtype), TP_ERR_TYPE, "expected a floating point input, but got %s",
             tp_dtype_name(input->dtype));
    *norm = tp__arg_f64(args, 1);
    TP_CHECK(*norm != 0.0, TP_ERR_INVALID_ARG, "norm_type must be a non-zero value, but got %g", *norm);
    /* avg_pool's argument layout: self, kernel_size, stride, padding=0, ceil_mode */
    tp_value a[5] = {args[0], args[2], args[3], tp_value_int(0), args[4]};
    return window_setup(a, n_spatial, -1, 4, p);
}

static tp_status lp_pool_infer(const tp_value *args, tp_value *out, int n_spatial) {
    window_params p;
    double norm;
    TP_TRY(lp_pool_setup(args, n_spatial, &p, &norm));
    return pool_out(out, tp__arg_tensor(args, 0), &p.in, p.out_dims, false);
}

static tp_status lp_pool_kernel(const tp_value *args, tp_value *out, int n_spatial) {
    window_params p;
    double norm;
    TP_TRY(lp_pool_setup(args, n_spatial, &p, &norm));
    const tp_tensor *input = tp__arg_tensor(args, 0);
    tp_tensor *o = tp__out_at(out, 0);
    if (tp_tensor_numel(o) == 0) return TP_OK;
    view5 x;
    make_view5(input, n_spatial, &x);
    char *optr = tp__tensor_base(o);
    int64_t oes = (int64_t)tp_dtype_size(o->dtype), flat = 0;
    double kprod = (double)(p.kernel[0] * p.kernel[1] * p.kernel[2]);
    bool inf = isinf(norm);
    for (int64_t n = 0; n < p.in.batch; n++)
        for (int64_t c = 0; c < p.in.channels; c++)
            for (int64_t od = 0; od < p.out_size[0]; od++) {
                int64_t d0, d1, dlen;
                avg_window(od, p.stride[0], 0, p.kernel[0], p.in.in_size[0], &d0, &d1, &dlen);
                for (int64_t oh = 0; oh < p.out_size[1]; oh++) {
                    int64_t h0, h1, hlen;
                    avg_window(oh, p.stride[1], 0, p.kernel[1], p.in.in_size[1], &h0, &h1, &hlen);
                    for (int64_t ow = 0; ow < p.out_size[2]; ow++) {
                        int64_t w0, w1, wlen;
                        avg_window(ow, p.stride[2], 0, p.kernel[2], p.in.in_size[2], &w0, &w1, &wlen);
                        double acc = inf ? (norm > 0 ? -INFINITY : INFINITY) : 0.0;
                        for (int64_t id = d0; id < d1; id++)
                            for (int64_t ih = h0; ih < h1; ih++)
                                for (int64_t iw = w0; iw < w1; iw++) {
                                    double v = load_elem(view5_at(&x, n, c, id, ih, iw), x.dtype);
                                    if (!inf) acc += pow(v, norm);
                                    else if (isnan(v) || (norm > 0 ? fabs(v) > acc : fabs(v) < acc)) acc = fabs(v);
                                }
                        if (!inf) acc = pow(acc / (double)(dlen * hlen * wlen) * kprod, 1.0 / norm);
                        store_elem(optr + flat * oes, o->dtype, acc);
                        flat++;
                    }
                }
            }
    return TP_OK;
}

/* ---- max_unpool -----------------------------------------------------------
 * max_unpoolNd(Tensor self, Tensor indices, int[]? kernel_size, int[]? stride,
 * int[]? padding (None: 0), int[]? output_size=None): zeros of the output size with
 * self's values written at their flat in-plane indices (a repeated index
 * keeps the last value, as PyTorch's serial CPU loop does). With a kernel
 * size (nn.functional's form) the output size defaults to
 * (in - 1) * stride + kernel - 2 * padding and a given one must lie strictly
 * within stride of that; without (aten's max_unpool2d / max_unpool3d) the
 * output size is required. */
typedef struct unpool_params {
    pool_input in;
    int64_t out_size[POOL_MAX_SPATIAL];
    tp_sdim out_dims[POOL_MAX_SPATIAL];
} unpool_params;

static tp_status unpool_setup(const tp_value *args, int n_spatial, unpool_params *p) {
    memset(p, 0, sizeof *p);
    const tp_tensor *input = tp__arg_tensor(args, 0), *indices = tp__arg_tensor(args, 1);
    TP_CHECK(input && indices, TP_ERR_TYPE, "max_unpool: self and indices must be tensors");
    TP_CHECK(indices->dtype == TP_INT64, TP_ERR_TYPE, "elements in indices should be type int64 but got: %s",
             tp_dtype_name(indices->dtype));
    TP_CHECK(tp_dtype_is_float(input->dtype), TP_ERR_TYPE, "expected a floating point input, but got %s",
             tp_dtype_name(input->dtype));
    char s1[128], s2[128];
    bool same = input->ndim == indices->ndim;
    for (int d = 0; same && d < input->ndim; d++)
        same = tp__dim_eq(tp__dim(input, d), tp__dim(indices, d), "max_unpool: indices shaped like the input");
    TP_CHECK(same, TP_ERR_SHAPE,
             "Expected shape of indices to be same as that of the input tensor (%s) but got indices tensor with "
             "shape: %s",
             tp__shape_str(input->ndim, input->sizes, s1, sizeof s1),
             tp__shape_str(indices->ndim, indices->sizes, s2, sizeof s2));
    TP_TRY(pool_input_setup(input, n_spatial, &p->in));
    int lead = POOL_MAX_SPATIAL - n_spatial;
    int64_t k[POOL_MAX_SPATIAL], st[POOL_MAX_SPATIAL], pad[POOL_MAX_SPATIAL], dflt[POOL_MAX_SPATIAL];
    tp_sdim dflt_dims[POOL_MAX_SPATIAL]; /* (L - 1) * stride + kernel - 2 * padding */
    bool has_kernel = !tp__arg_is_none(args, 2);
    if (has_kernel) TP_TRY(read_spatial_ints(args, 2, "kernel_size", n_spatial, 1, k));
    if (tp_value_len(&args[3]) == 0 && args[3].kind != TP_VAL_INT) { /* None / []: the kernel size */
        for (int d = 0; d < POOL_MAX_SPATIAL; d++) st[d] = has_kernel ? k[d] : 1;
    } else {
        TP_TRY(read_spatial_ints(args, 3, "stride", n_spatial, 1, st));
    }
    if (tp__arg_is_none(args, 4)) /* None: 0 */
        for (int d = 0; d < POOL_MAX_SPATIAL; d++) pad[d] = 0;
    else
        TP_TRY(read_spatial_ints(args, 4, "padding", n_spatial, 0, pad));
    for (int d = lead; d < POOL_MAX_SPATIAL; d++) {
        TP_CHECK(st[d] > 0, TP_ERR_INVALID_ARG, "strides should be greater than zero, but got stride: %s",
                 size_tuple(n_spatial, st + lead, s1, sizeof s1));
        TP_CHECK(pad[d] >= 0, TP_ERR_INVALID_ARG, "padding should be non-negative, but got padding: %s",
                 size_tuple(n_spatial, pad + lead, s1, sizeof s1));
        if (has_kernel) {
            TP_CHECK(k[d] > 0 && k[d] < ((int64_t)1 << 40) && st[d] < ((int64_t)1 << 20) &&
                         pad[d] < ((int64_t)1 << 40),
                     TP_ERR_INVALID_ARG, "max_unpool: kernel_size, stride or padding out of range");
            dflt_dims[d] = tp__dim_addk(tp__dim_mulk(tp__dim_addk(p->in.in_dims[d], -1), st[d]), k[d] - 2 * pad[d]);
            dflt[d] = dflt_dims[d].v;
        }
    }
    if (tp__arg_is_none(args, 5)) {
        TP_CHECK(has_kernel, TP_ERR_INVALID_ARG, "max_unpool: output_size is required without a kernel_size");
        for (int d = 0; d < POOL_MAX_SPATIAL; d++) p->out_dims[d] = d < lead ? tp__dimk(1) : dflt_dims[d];
    } else {
        int64_t os[POOL_MAX_SPATIAL + 2];
        int n;
        TP_TRY(tp__arg_ints(args, 5, "output_size", os, POOL_MAX_SPATIAL + 2, 0, &n));
        int skip = n == n_spatial + 2 && has_kernel ? 2 : 0;
        TP_CHECK(n - skip == n_spatial, TP_ERR_INVALID_ARG,
                 has_kernel ? "output_size should be a sequence containing %d or %d elements, but it has a length of "
                              "'%d'"
                            : "There should be exactly %d elements but got %d",
                 n_spatial, has_kernel ? n_spatial + 2 : n, n);
        for (int d = 0; d < POOL_MAX_SPATIAL; d++) p->out_size[d] = d < lead ? 1 : os[skip + d - lead];
        const_dims(p->out_size, p->out_dims);
        /* dflt - stride < output_size < dflt + stride */
        if (has_kernel)
            for (int d = lead; d < POOL_MAX_SPATIAL; d++)
                TP_CHECK(tp__dim_ge(tp__dim_addk(tp__dim_mulk(dflt_dims[d], -1), p->out_size[d] + st[d]), 1,
                                    "max_unpool: output_size within a stride of the default") &&
                             tp__dim_ge(tp__dim_addk(dflt_dims[d], st[d] - p->out_size[d]), 1,
                                        "max_unpool: output_size within a stride of the default"),
                         TP_ERR_INVALID_ARG,
                         "invalid output_size %s (dim %d must be between %" PRId64 " and %" PRId64 ")",
                         size_tuple(n_spatial, p->out_size + lead, s1, sizeof s1), d - lead, dflt[d] - st[d],
                         dflt[d] + st[d]);
    }
    for (int d = 0; d < POOL_MAX_SPATIAL; d++) p->out_size[d] = p->out_dims[d].v;
    int64_t plane = 1;
    for (int d = lead; d < POOL_MAX_SPATIAL; d++) {
        TP_CHECK(tp__dim_ge(p->out_dims[d], 0, "max_unpool: output size"), TP_ERR_INVALID_ARG,
                 "max_unpooling: output_size must contain non-negative spatial dimensions, but got output_size[%d]=%" PRId64,
                 d - lead, p->out_size[d]);
        TP_CHECK(tp_mul_overflow_i64(plane, p->out_size[d], &plane), TP_ERR_INVALID_ARG, "output_size %s is too large",
                 size_tuple(n_spatial, p->out_size + lead, s1, sizeof s1));
    }
    return TP_OK;
}

static tp_status unpool_infer(const tp_value *args, tp_value *out, int n_spatial) {
    unpool_params p;
    TP_TRY(unpool_setup(args, n_spatial, &p));
    return pool_out(out, tp__arg_tensor(args, 0), &p.in, p.out_dims, false);
}

static tp_status unpool_kernel(const tp_value *args, tp_value *out, int n_spatial) {
    unpool_params p;
    TP_TRY(unpool_setup(args, n_spatial, &p));
    const tp_tensor *input = tp__arg_tensor(args, 0), *indices = tp__arg_tensor(args, 1);
    tp_tensor *o = tp__out_at(out, 0);
    int64_t oes = (int64_t)tp_dtype_size(o->dtype), numel = tp_tensor_numel(o);
    char *optr = tp__tensor_base(o);
    memset(optr, 0, (size_t)(numel * oes)); /* contiguous output */
    int64_t plane = p.out_size[0] * p.out_size[1] * p.out_size[2];
    view5 x, ix;
    make_view5(input, n_spatial, &x);
    make_view5(indices, n_spatial, &ix);
    char s1[128];
    for (int64_t n = 0; n < p.in.batch; n++)
        for (int64_t c = 0; c < p.in.channels; c++) {
            char *dst = optr + (n * p.in.channels + c) * plane * oes;
            for (int64_t id = 0; id < p.in.in_size[0]; id++)
                for (int64_t ih = 0; ih < p.in.in_size[1]; ih++)
                    for (int64_t iw = 0; iw < p.in.in_size[2]; iw++) {
                        int64_t at = tp__load_i64(view5_at(&ix, n, c, id, ih, iw), TP_INT64);
                        TP_CHECK(at >= 0 && at < plane, TP_ERR_INDEX,
                                 "Found an invalid max index: %" PRId64 " (output volumes are of size %s)", at,
                                 size_tuple(n_spatial, p.out_size + POOL_MAX_SPATIAL - n_spatial, s1, sizeof s1));
                        store_elem(dst + at * oes, o->dtype, load_elem(view5_at(&x, n, c, id, ih, iw), x.dtype));
                    }
        }
    return TP_OK;
}

/* ---- adaptive pools ----------------------------------------------------- */

typedef struct adaptive_params {
    pool_input in;
    int64_t out_size[POOL_MAX_SPATIAL];
} adaptive_params;

static tp_status adaptive_setup(const tp_value *args, int n_spatial, adaptive_params *p) {
    memset(p, 0, sizeof *p);
    const tp_tensor *input = tp__arg_tensor(args, 0);
    TP_CHECK(input, TP_ERR_TYPE, "argument 'self' must be a tensor");
    TP_CHECK(tp_dtype_is_float(input->dtype), TP_ERR_TYPE, "expected a floating point input, but got %s",
             tp_dtype_name(input->dtype));
    TP_TRY(pool_input_setup(input, n_spatial, &p->in));
    TP_TRY(read_spatial_ints(args, 1, "output_size", n_spatial, 1, p->out_size));
    int lead = POOL_MAX_SPATIAL - n_spatial;
    char s1[128];
    for (int d = lead; d < POOL_MAX_SPATIAL; d++) {
        int64_t span; /* adaptive windows compute (o + 1) * in */
        TP_CHECK(p->out_size[d] >= 0, TP_ERR_INVALID_ARG,
                 "elements of output_size must be greater than or equal to 0, but got output_size=%s",
                 size_tuple(n_spatial, p->out_size + lead, s1, sizeof s1));
        TP_CHECK(p->out_size[d] < INT64_MAX && tp_mul_overflow_i64(p->out_size[d] + 1, p->in.in_size[d], &span),
                 TP_ERR_INVALID_ARG,
                 "output_size %s is too large", size_tuple(n_spatial, p->out_size + lead, s1, sizeof s1));
    }
    return TP_OK;
}

static tp_status adaptive_infer(const tp_value *args, tp_value *out, int n_spatial) {
    adaptive_params p;
    TP_TRY(adaptive_setup(args, n_spatial, &p));
    tp_sdim dims[POOL_MAX_SPATIAL];
    const_dims(p.out_size, dims);
    return pool_out(out, tp__arg_tensor(args, 0), &p.in, dims, false);
}

/* Adaptive window for output o: [floor(o*in/out), ceil((o+1)*in/out)). */
static inline void adaptive_window(int64_t o, int64_t in, int64_t out, int64_t *lo, int64_t *hi) {
    *lo = (o * in) / out;
    *hi = ((o + 1) * in + out - 1) / out;
}

/* Average (is_max false) or maximum over adaptive windows of x into the
 * contiguous tensor o of shape [batch, channels, out_size...]; with oi (max
 * only) also the flat in-plane index of each maximum (PyTorch's CPU rule:
 * the window's first element, replaced by every larger value and every NaN). */
static void adaptive_pool_run(const view5 *x, const pool_input *in, const int64_t *out_size, bool is_max,
                              tp_tensor *o, tp_tensor *oi) {
    int64_t *iptr = oi ? (int64_t *)tp__tensor_base(oi) : NULL;
    char *optr = tp__tensor_base(o);
    int64_t oes = (int64_t)tp_dtype_size(o->dtype), flat = 0;
    for (int64_t n = 0; n < in->batch; n++)
        for (int64_t c = 0; c < in->channels; c++)
            for (int64_t od = 0; od < out_size[0]; od++) {
                int64_t d0, d1;
                adaptive_window(od, in->in_size[0], out_size[0], &d0, &d1);
                for (int64_t oh = 0; oh < out_size[1]; oh++) {
                    int64_t h0, h1;
                    adaptive_window(oh, in->in_size[1], out_size[1], &h0, &h1);
                    for (int64_t ow = 0; ow < out_size[2]; ow++) {
                        int64_t w0, w1;
                        adaptive_window(ow, in->in_size[2], out_size[2], &w0, &w1);
                        double acc = is_max ? -INFINITY : 0.0;
                        int64_t at = (d0 * in->in_size[1] + h0) * in->in_size[2] + w0;
                        for (int64_t id = d0; id < d1; id++)
                            for (int64_t ih = h0; ih < h1; ih++)
                                for (int64_t iw = w0; iw < w1; iw++) {
                                    double v = load_elem(view5_at(x, n, c, id, ih, iw), x->dtype);
                                    if (!is_max) {
                                        acc += v;
                                    } else if (v > acc || isnan(v)) {
                                        acc = v;
                                        at = (id * in->in_size[1] + ih) * in->in_size[2] + iw;
                                    }
                                }
                        if (!is_max) acc /= (double)((d1 - d0) * (h1 - h0) * (w1 - w0));
                        store_elem(optr + flat * oes, o->dtype, acc);
                        if (iptr) iptr[flat] = at;
                        flat++;
                    }
                }
            }
}

static tp_status adaptive_kernel(const tp_value *args, tp_value *out, int n_spatial, bool is_max) {
    adaptive_params p;
    TP_TRY(adaptive_setup(args, n_spatial, &p));
    tp_tensor *o = tp__out_at(out, 0);
    if (tp_tensor_numel(o) == 0) return TP_OK;
    view5 x;
    make_view5(tp__arg_tensor(args, 0), n_spatial, &x);
    adaptive_pool_run(&x, &p.in, p.out_size, is_max, o, NULL);
    return TP_OK;
}

/* adaptive_max_pool*_with_indices: (values, int64 indices). */
static tp_status adaptive_indices_infer(const tp_value *args, tp_value *out, int n_spatial) {
    adaptive_params p;
    TP_TRY(adaptive_setup(args, n_spatial, &p));
    tp_sdim dims[POOL_MAX_SPATIAL];
    const_dims(p.out_size, dims);
    return pool_out(out, tp__arg_tensor(args, 0), &p.in, dims, true);
}

static tp_status adaptive_indices_kernel(const tp_value *args, tp_value *out, int n_spatial) {
    adaptive_params p;
    TP_TRY(adaptive_setup(args, n_spatial, &p));
    tp_tensor *o = tp__out_at(out, 0), *oi = tp__out_at(out, 1);
    if (tp_tensor_numel(o) == 0) return TP_OK;
    view5 x;
    make_view5(tp__arg_tensor(args, 0), n_spatial, &x);
    adaptive_pool_run(&x, &p.in, p.out_size, true, o, oi);
    return TP_OK;
}

/* ---- interpolate -------------------------------------------------------- */

typedef enum interp_mode { INTERP_NEAREST, INTERP_NEAREST_EXACT, INTERP_LINEAR, INTERP_AREA, INTERP_BICUBIC } interp_mode;

typedef struct interp_params {
    interp_mode mode;
    bool align_corners;
    bool has_scale;                 /* scale_factor given: torch uses 1/scale for coordinates */
    double scale[POOL_MAX_SPATIAL]; /* valid when has_scale (1 in padded dims) */
    pool_input in;
    int64_t out_size[POOL_MAX_SPATIAL];
    tp_sdim out_dims[POOL_MAX_SPATIAL];
} interp_params;

/* floor(in * scale) over a dynamic in: floor(in * p / q) for a scale p/q
 * (q <= 1000), when it agrees with the double product o; otherwise in is
 * specialised to its size (a non-rational scale) or the rule gives up. */
static tp_sdim scaled_dim(tp_sdim in, double scale, int64_t o) {
    if (tp__dim_is_const(in)) return tp__dimk(o);
    int64_t q = 0, p = 0;
    for (int64_t qq = 1; qq <= 1000 && !q; qq++) {
        double pp = scale * (double)qq;
        if (fabs(pp - round(pp)) < 1e-9 && pp > 0 && pp < 1e9) {
            q = qq;
            p = (int64_t)round(pp);
        }
    }
    if (!q) {
        tp__dim_eqk(in, in.v, "non-rational scale factor");
        return tp__dimk(o);
    }
    tp_sdim r = tp__dim_floordiv(tp__dim_mulk(in, p), q);
    if (r.v != o) {
        tp__dim_give_up();
        return tp__dimk(o);
    }
    return r;
}

/* interpolate(Tensor input, int[]? size, Any scale_factor, str mode, bool? align_corners) */
static tp_status interp_setup(const tp_value *args, interp_params *p) {
    memset(p, 0, sizeof *p);
    const tp_tensor *input = tp__arg_tensor(args, 0);
    TP_CHECK(input, TP_ERR_TYPE, "argument 'input' must be a tensor");
    const char *mode = tp__arg_str(args, 3);
    TP_CHECK(mode, TP_ERR_TYPE, "argument 'mode' must be a string");
    char s1[128], s2[128];
    TP_CHECK(input->ndim >= 3 && input->ndim <= 5, TP_ERR_SHAPE,
             "only 3D, 4D and 5D input tensors (N, C, spatial...) are supported, but got input of size %s",
             tp__shape_str(input->ndim, input->sizes, s1, sizeof s1));
    int n_spatial = input->ndim - 2;
    int needed = 0;
    if (strcmp(mode, "nearest") == 0) p->mode = INTERP_NEAREST;
    else if (strcmp(mode, "nearest-exact") == 0) p->mode = INTERP_NEAREST_EXACT;
    else if (strcmp(mode, "area") == 0) p->mode = INTERP_AREA;
    else if (strcmp(mode, "linear") == 0) p->mode = INTERP_LINEAR, needed = 1;
    else if (strcmp(mode, "bilinear") == 0) p->mode = INTERP_LINEAR, needed = 2;
    else if (strcmp(mode, "trilinear") == 0) p->mode = INTERP_LINEAR, needed = 3;
    else if (strcmp(mode, "bicubic") == 0) p->mode = INTERP_BICUBIC, needed = 2;
    else
        return tp_error(TP_ERR_INVALID_ARG,
                        "unknown mode '%s' (expected nearest, nearest-exact, linear, bilinear, bicubic, trilinear or "
                        "area)",
                        mode);
    TP_CHECK(needed == 0 || needed == n_spatial, TP_ERR_SHAPE, "Got %dD input, but %s mode needs %dD input",
             input->ndim, mode, needed + 2);
    if (p->mode == INTERP_NEAREST || p->mode == INTERP_NEAREST_EXACT)
        TP_CHECK(tp_dtype_is_float(input->dtype) || input->dtype == TP_UINT8, TP_ERR_TYPE,
                 "expected a floating point or uint8 input for mode '%s', but got %s", mode,
                 tp_dtype_name(input->dtype));
    else
        TP_CHECK(tp_dtype_is_float(input->dtype), TP_ERR_TYPE,
                 "expected a floating point input for mode '%s', but got %s", mode, tp_dtype_name(input->dtype));
    if (p->mode == INTERP_LINEAR || p->mode == INTERP_BICUBIC) {
        p->align_corners = !tp__arg_is_none(args, 4) && tp__arg_bool(args, 4);
    } else {
        TP_CHECK(tp__arg_is_none(args, 4), TP_ERR_INVALID_ARG,
                 "align_corners option can only be set with the interpolating modes: linear | bilinear | "
                 "bicubic | trilinear");
    }

    int lead = POOL_MAX_SPATIAL - n_spatial;
    bool has_size = !tp__arg_is_none(args, 1);
    const tp_value *sf = &args[2];
    p->has_scale = sf->kind != TP_VAL_NONE;
    TP_CHECK(!(has_size && p->has_scale), TP_ERR_INVALID_ARG, "only one of size or scale_factor should be defined");
    TP_CHECK(has_size || p->has_scale, TP_ERR_MISSING, "either size or scale_factor should be defined");

    /* the input: (N, C, spatial...), channels and spatial non-empty */
    p->in.n_spatial = n_spatial;
    p->in.batched = true;
    p->in.batch = input->sizes[0];
    p->in.channels = input->sizes[1];
    TP_CHECK(tp__dim_ge(tp__dim(input, 1), 1, "interpolate: non-empty channels"), TP_ERR_SHAPE,
             "expected a non-empty channel dimension, but got input of size %s",
             tp__shape_str(input->ndim, input->sizes, s1, sizeof s1));
    for (int d = 0; d < POOL_MAX_SPATIAL; d++) {
        p->in.in_dims[d] = d < lead ? tp__dimk(1) : tp__dim(input, 2 + d - lead);
        p->in.in_size[d] = p->in.in_dims[d].v;
        p->scale[d] = 1.0;
        p->out_dims[d] = tp__dimk(1);
    }

    if (has_size) {
        tp_sdim vals[POOL_MAX_SPATIAL];
        int n = 0;
        int64_t len = tp_value_len(&args[1]);
        TP_CHECK(len == 1 || len == n_spatial, TP_ERR_SHAPE,
                 "Input and output must have the same number of spatial dimensions, but got input with spatial "
                 "dimensions of %s and output size with %" PRId64 " entries",
                 tp__shape_str(n_spatial, input->sizes + 2, s1, sizeof s1), len);
        TP_TRY(tp__arg_sdims(args, 1, "size", vals, POOL_MAX_SPATIAL, n_spatial, &n));
        for (int d = 0; d < n_spatial; d++) p->out_dims[lead + d] = vals[d];
    } else {
        double scales[POOL_MAX_SPATIAL];
        if (tp_value_is_number(sf)) {
            for (int d = 0; d < n_spatial; d++) scales[d] = tp_value_as_f64(sf);
        } else {
            TP_CHECK(tp_value_is_seq(sf), TP_ERR_TYPE, "scale_factor must be a number or a list of numbers, not %s",
                     tp_value_kind_name(sf->kind));
            TP_CHECK(tp_value_len(sf) == n_spatial, TP_ERR_SHAPE,
                     "Input and scale_factor must have the same number of spatial dimensions, but got input with "
                     "spatial dimensions of %s and scale_factor with %" PRId64 " entries",
                     tp__shape_str(n_spatial, input->sizes + 2, s1, sizeof s1), tp_value_len(sf));
            for (int d = 0; d < n_spatial; d++) {
                const tp_value *e = tp_value_at(sf, d);
                TP_CHECK(tp_value_is_number(e), TP_ERR_TYPE, "scale_factor[%d] must be a number, not %s", d,
                         tp_value_kind_name(e->kind));
                scales[d] = tp_value_as_f64(e);
            }
        }
        for (int d = 0; d < n_spatial; d++) {
            double o = floor((double)p->in.in_size[lead + d] * scales[d]);
            TP_CHECK(o == o && o < 4611686018427387904.0, TP_ERR_INVALID_ARG,
                     "scale_factor %g gives an invalid output size", scales[d]);
            p->out_dims[lead + d] = scaled_dim(p->in.in_dims[lead + d], scales[d], o < 0 ? -1 : (int64_t)o);
            p->scale[lead + d] = scales[d];
        }
    }
    for (int d = 0; d < POOL_MAX_SPATIAL; d++) p->out_size[d] = p->out_dims[d].v;
    bool positive = true;
    for (int d = lead; d < POOL_MAX_SPATIAL; d++)
        if (!tp__dim_ge(p->in.in_dims[d], 1, "interpolate: input size") ||
            !tp__dim_ge(p->out_dims[d], 1, "interpolate: output size"))
            positive = false;
    TP_CHECK(positive, TP_ERR_SHAPE,
             "Input and output sizes should be greater than 0, but got input size %s and output size %s",
             tp__shape_str(n_spatial, p->in.in_size + lead, s1, sizeof s1),
             tp__shape_str(n_spatial, p->out_size + lead, s2, sizeof s2));
    return TP_OK;
}

static tp_status interp_infer(const tp_value *args, tp_value *out) {
    interp_params p;
    TP_TRY(interp_setup(args, &p));
    return pool_out(out, tp__arg_tensor(args, 0), &p.in, p.out_dims, false);
}

/* torch's compute_scales_value<float>: 1/scale when a scale was given, else
 * in/out. */
static float scale_value_f32(bool has_scale, double scale, int64_t in, int64_t out) {
    return (has_scale && scale > 0.0) ? (float)(1.0 / scale) : (float)in / (float)out;
}

/* Source index of output o for nearest modes (torch's nearest_idx /
 * nearest_exact_idx, float arithmetic). */
static int64_t nearest_source(const interp_params *p, int d, int64_t o) {
    int64_t in = p->in.in_size[d], out = p->out_size[d];
    float scale = scale_value_f32(p->has_scale, p->scale[d], in, out);
    int64_t src;
    if (p->mode == INTERP_NEAREST) {
        if (out == in) return o;
        if (out == 2 * in) return o >> 1;
        src = (int64_t)floorf((float)o * scale);
    } else {
        /* (o + 0.5) is a double in torch; the product is rounded to float by floorf */
        src = (int64_t)floorf((float)(((double)o + 0.5) * (double)scale));
    }
    return src < in - 1 ? src : in - 1;
}

/* Round to float when computing in single precision (each float op of torch
 * is a double op rounded to float: exact for + - * /). */
static inline double fround(double v, bool single) { return single ? (double)(float)v : v; }

/* Linear interpolation indices and weights for output o along dim d (torch's
 * area_pixel_compute_scale / compute_source_index_and_lambda). */
static void linear_source(const interp_params *p, int d, int64_t o, bool single, int64_t *i0, int64_t *i1,
                          double *l0, double *l1) {
    int64_t in = p->in.in_size[d], out = p->out_size[d];
    if (in == out) {
        *i0 = *i1 = o;
        *l0 = 1.0;
        *l1 = 0.0;
        return;
    }
    double scale, src;
    if (p->align_corners) {
        scale = out > 1 ? fround((double)fround((double)(in - 1), single) / (double)(out - 1), single) : 0.0;
        src = fround(scale * fround((double)o, single), single);
    } else {
        if (p->has_scale && p->scale[d] > 0.0) scale = fround(1.0 / p->scale[d], single);
        else scale = fround(fround((double)in, single) / (double)out, single);
        src = fround(fround(scale * ((double)o + 0.5), single) - 0.5, single);
        if (src < 0.0) src = 0.0;
    }
    int64_t idx = (int64_t)src;
    if (idx > in - 1) idx = in - 1;
    *i0 = idx;
    *i1 = idx + (idx < in - 1 ? 1 : 0);
    double lambda = fround(src - (double)idx, single);
    if (lambda < 0.0) lambda = 0.0;
    if (lambda > 1.0) lambda = 1.0;
    *l1 = lambda;
    *l0 = fround(1.0 - lambda, single);
}

/* Bicubic source coordinate of output o along dim d (torch's
 * area_pixel_compute_source_index with cubic=true: not clamped at 0). */
static double cubic_source(const interp_params *p, int d, int64_t o, bool single) {
    int64_t in = p->in.in_size[d], out = p->out_size[d];
    if (p->align_corners) {
        double scale = out > 1 ? fround((double)(in - 1) / (double)(out - 1), single) : 0.0;
        return fround(scale * (double)o, single);
    }
    double scale = p->has_scale && p->scale[d] > 0.0 ? fround(1.0 / p->scale[d], single)
                                                      : fround((double)in / (double)out, single);
    return fround(fround(scale * ((double)o + 0.5), single) - 0.5, single);
}

/* The four cubic convolution weights (Keys, A = -0.75) of fraction t, in
 * torch's order of operations (in float for single precision). */
static void cubic_weights(double t, bool single, double w[4]) {
    const double a = -0.75;
    double x = fround(t + 1.0, single);
    w[0] = fround(fround(fround(fround(fround(a * x, single) - 5.0 * a, single) * x, single) + 8.0 * a, single) * x,
                  single) - 4.0 * a;
    w[1] = fround(fround(fround(fround((a + 2.0) * t, single) - (a + 3.0), single) * t, single) * t, single) + 1.0;
    x = fround(1.0 - t, single);
    w[2] = fround(fround(fround(fround((a + 2.0) * x, single) - (a + 3.0), single) * x, single) * x, single) + 1.0;
    x = fround(x + 1.0, single);
    w[3] = fround(fround(fround(fround(fround(a * x, single) - 5.0 * a, single) * x, single) + 8.0 * a, single) * x,
                  single) - 4.0 * a;
    for (int i = 0; i < 4; i++) w[i] = fround(w[i], single);
}

/* x0 w0 + x1 w1 + x2 w2 + x3 w3, left to right. */
static double cubic_dot(const double v[4], const double w[4], bool single) {
    double acc = fround(v[0] * w[0], single);
    for (int i = 1; i < 4; i++) acc = fround(acc + fround(v[i] * w[i], single), single);
    return acc;
}

/* Bicubic interpolation of (N, C, H, W) (torch's upsample_bicubic2d): 4 x 4
 * taps around the source point, indices clamped to the input (border
 * replication), rows interpolated first, then the column of row results. */
static void bicubic_run(const view5 *x, const interp_params *p, tp_tensor *o) {
    bool single = x->dtype != TP_FLOAT64;
    int64_t ih = p->in.in_size[1], iw = p->in.in_size[2], oh = p->out_size[1], ow = p->out_size[2];
    char *optr = tp__tensor_base(o);
    int64_t oes = (int64_t)tp_dtype_size(o->dtype), flat = 0;
    for (int64_t n = 0; n < p->in.batch; n++)
        for (int64_t c = 0; c < p->in.channels; c++)
            for (int64_t y = 0; y < oh; y++) {
                double ry = ih == oh ? (double)y : cubic_source(p, 1, y, single);
                double fy = floor(ry), wy[4];
                cubic_weights(ih == oh ? 0.0 : fround(ry - fy, single), single, wy);
                for (int64_t xo = 0; xo < ow; xo++) {
                    char *dst = optr + flat++ * oes;
                    if (ih == oh && iw == ow) { /* torch copies when the sizes match */
                        store_elem(dst, o->dtype, load_elem(view5_at(x, n, c, 0, y, xo), x->dtype));
                        continue;
                    }
                    double rx = cubic_source(p, 2, xo, single), fx = floor(rx), wx[4];
                    cubic_weights(fround(rx - fx, single), single, wx);
                    double rows[4];
                    for (int i = 0; i < 4; i++) {
                        int64_t yy = (int64_t)fy - 1 + i;
                        yy = yy < 0 ? 0 : yy > ih - 1 ? ih - 1 : yy;
                        double v[4];
                        for (int j = 0; j < 4; j++) {
                            int64_t xx = (int64_t)fx - 1 + j;
                            xx = xx < 0 ? 0 : xx > iw - 1 ? iw - 1 : xx;
                            v[j] = load_elem(view5_at(x, n, c, 0, yy, xx), x->dtype);
                        }
                        rows[i] = cubic_dot(v, wx, single);
                    }
                    store_elem(dst, o->dtype, cubic_dot(rows, wy, single));
                }
            }
}

static tp_status interp_kernel(const tp_value *args, tp_value *out) {
    interp_params p;
    TP_TRY(interp_setup(args, &p));
    const tp_tensor *input = tp__arg_tensor(args, 0);
    tp_tensor *o = tp__out_at(out, 0);
    if (tp_tensor_numel(o) == 0) return TP_OK;
    view5 x;
    make_view5(input, p.in.n_spatial, &x);
    if (p.mode == INTERP_AREA) {
        adaptive_pool_run(&x, &p.in, p.out_size, false, o, NULL);
        return TP_OK;
    }
    if (p.mode == INTERP_BICUBIC) {
        bicubic_run(&x, &p, o);
        return TP_OK;
    }
    int lead = POOL_MAX_SPATIAL - p.in.n_spatial;
    int64_t total = p.out_size[0] + p.out_size[1] + p.out_size[2];
    /* per-dim tables, laid out dim after dim */
    int64_t *idx0 = tp_malloc((size_t)total * 2 * sizeof(int64_t));
    double *lam = tp_malloc((size_t)total * 2 * sizeof(double));
    if (!idx0 || !lam) {
        tp_free(idx0);
        tp_free(lam);
        return tp_error(TP_ERR_NOMEM, "out of memory for interpolation tables");
    }
    int64_t *idx1 = idx0 + total;
    double *lam0 = lam, *lam1 = lam + total;
    int64_t off[POOL_MAX_SPATIAL] = {0, p.out_size[0], p.out_size[0] + p.out_size[1]};
    bool single = input->dtype != TP_FLOAT64;
    for (int d = 0; d < POOL_MAX_SPATIAL; d++)
        for (int64_t i = 0; i < p.out_size[d]; i++) {
            int64_t k = off[d] + i;
            if (p.mode == INTERP_LINEAR) {
                linear_source(&p, d, i, single, &idx0[k], &idx1[k], &lam0[k], &lam1[k]);
            } else {
                idx0[k] = idx1[k] = nearest_source(&p, d, i);
                lam0[k] = 1.0;
                lam1[k] = 0.0;
            }
        }
    /* padded leading dims (and nearest modes) use one tap */
    int taps[POOL_MAX_SPATIAL];
    for (int d = 0; d < POOL_MAX_SPATIAL; d++) taps[d] = (p.mode == INTERP_LINEAR && d >= lead) ? 2 : 1;

    char *optr = tp__tensor_base(o);
    int64_t oes = (int64_t)tp_dtype_size(o->dtype), flat = 0;
    for (int64_t n = 0; n < p.in.batch; n++)
        for (int64_t c = 0; c < p.in.channels; c++)
            for (int64_t od = 0; od < p.out_size[0]; od++) {
                int64_t kd = off[0] + od;
                for (int64_t oh = 0; oh < p.out_size[1]; oh++) {
                    int64_t kh = off[1] + oh;
                    for (int64_t ow = 0; ow < p.out_size[2]; ow++) {
                        int64_t kw = off[2] + ow;
                        char *dst = optr + flat * oes;
                        flat++;
                        if (p.mode != INTERP_LINEAR) {
                            memcpy(dst, view5_at(&x, n, c, idx0[kd], idx0[kh], idx0[kw]), (size_t)oes);
                            continue;
                        }
                        /* nested like torch: outer dim outermost, sum of (value * weight) */
                        double vd = 0.0;
                        for (int a = 0; a < taps[0]; a++) {
                            int64_t id = a ? idx1[kd] : idx0[kd];
                            double vh = 0.0;
                            for (int b = 0; b < taps[1]; b++) {
                                int64_t ih = b ? idx1[kh] : idx0[kh];
                                double vw = 0.0;
                                for (int e = 0; e < taps[2]; e++) {
                                    int64_t iw = e ? idx1[kw] : idx0[kw];
                                    double v = load_elem(view5_at(&x, n, c, id, ih, iw), x.dtype);
                                    double t = fround(v * (e ? lam1[kw] : lam0[kw]), single);
                                    vw = e ? fround(vw + t, single) : t;
                                }
                                double t = taps[1] == 1 ? vw : fround(vw * (b ? lam1[kh] : lam0[kh]), single);
                                vh = b ? fround(vh + t, single) : t;
                            }
                            double t = taps[0] == 1 ? vh : fround(vh * (a ? lam1[kd] : lam0[kd]), single);
                            vd = a ? fround(vd + t, single) : t;
                        }
                        store_elem(dst, o->dtype, vd);
                    }
                }
            }
    tp_free(idx0);
    tp_free(lam);
    return TP_OK;
}

/* ---- registration ------------------------------------------------------ */

/* ---- grid_sample / affine_grid --------------------------------------------- */

/* grid_sample(input [N, C, H, W], grid [N, Ho, Wo, 2] of (x, y) in [-1, 1])
 * with PyTorch's coordinate rules (GridSampler.h): unnormalise, then clip
 * (border) or reflect and clip (reflection); bilinear weights the four
 * neighbours inside the input, nearest rounds half to even, bicubic uses
 * the 4x4 neighbourhood with A = -0.75, the padding applied per tap. 5-D
 * (volumetric) inputs sample with a grid of (x, y, z), trilinear or nearest. */
typedef enum gs_mode { GS_BILINEAR, GS_NEAREST, GS_BICUBIC } gs_mode;
typedef enum gs_pad { GS_ZEROS, GS_BORDER, GS_REFLECTION } gs_pad;

typedef struct gs_params {
    gs_mode mode;
    gs_pad pad;
    bool align;
} gs_params;

static tp_status gs_setup(const tp_value *args, gs_params *p, tp_sdim *sizes) {
    const tp_tensor *x = tp__arg_tensor(args, 0), *g = tp__arg_tensor(args, 1);
    TP_CHECK(x && g, TP_ERR_TYPE, "grid_sampler(): input and grid must be tensors");
    char s1[128], s2[128];
    const char *mode = tp__arg_str(args, 2), *pad = tp__arg_str(args, 3);
    mode = mode ? mode : "bilinear";
    pad = pad ? pad : "zeros";
    if (strcmp(mode, "bilinear") == 0) p->mode = GS_BILINEAR;
    else if (strcmp(mode, "nearest") == 0) p->mode = GS_NEAREST;
    else if (strcmp(mode, "bicubic") == 0) p->mode = GS_BICUBIC;
    else
        return tp_error(TP_ERR_INVALID_ARG,
                        "nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                        "got: '%s'",
                        mode);
    if (strcmp(pad, "zeros") == 0) p->pad = GS_ZEROS;
    else if (strcmp(pad, "border") == 0) p->pad = GS_BORDER;
    else if (strcmp(pad, "reflection") == 0) p->pad = GS_REFLECTION;
    else
        return tp_error(TP_ERR_INVALID_ARG,
                        "nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                        "'reflection', but got: '%s'",
                        pad);
    p->align = !tp__arg_is_none(args, 4) && tp__arg_bool(args, 4);
    TP_CHECK(tp_dtype_is_float(x->dtype), TP_ERR_TYPE, "grid_sampler(): expected a floating point input, but got %s",
             tp_dtype_name(x->dtype));
    TP_CHECK(x->dtype == g->dtype, TP_ERR_TYPE,
             "grid_sampler(): expected input and grid to have same dtype, but input has %s and grid has %s",
             tp_dtype_name(x->dtype), tp_dtype_name(g->dtype));
    TP_CHECK((x->ndim == 4 || x->ndim == 5) && g->ndim == x->ndim, TP_ERR_SHAPE,
             "grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but got input with "
             "sizes %s and grid with sizes %s",
             tp__shape_str(x->ndim, x->sizes, s1, sizeof s1), tp__shape_str(g->ndim, g->sizes, s2, sizeof s2));
    TP_CHECK(tp__dim_eq(tp__dim(x, 0), tp__dim(g, 0), "grid_sample: input and grid batch sizes"), TP_ERR_SHAPE,
             "grid_sampler(): expected grid and input to have same batch size, but got input with sizes %s and "
             "grid with sizes %s",
             tp__shape_str(x->ndim, x->sizes, s1, sizeof s1), tp__shape_str(g->ndim, g->sizes, s2, sizeof s2));
    int sp = x->ndim - 2;
    TP_CHECK(tp__dim_eqk(tp__dim(g, g->ndim - 1), sp, "grid_sample: grid's last dim"), TP_ERR_SHAPE,
             "grid_sampler(): expected grid to have size %d in last dimension, but got grid with sizes %s", sp,
             tp__shape_str(g->ndim, g->sizes, s1, sizeof s1));
    bool nonempty = true;
    for (int d = 2; d < x->ndim; d++) nonempty = nonempty && tp__dim_ge(tp__dim(x, d), 1, "grid_sample: non-empty spatial dims");
    TP_CHECK(nonempty, TP_ERR_SHAPE,
             "grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes %s",
             tp__shape_str(x->ndim, x->sizes, s1, sizeof s1));
    TP_CHECK(!(sp == 3 && p->mode == GS_BICUBIC), TP_ERR_INVALID_ARG,
             "grid_sampler(): bicubic interpolation only supports 4D input");
    sizes[0] = tp__dim(x, 0);
    sizes[1] = tp__dim(x, 1);
    for (int d = 1; d <= sp; d++) sizes[1 + d] = tp__dim(g, d);
    return TP_OK;
}

static tp_status grid_sample_infer(const tp_value *args, tp_value *out) {
    gs_params p;
    tp_sdim sizes[5];
    TP_TRY(gs_setup(args, &p, sizes));
    const tp_tensor *x = tp__arg_tensor(args, 0);
    return tp__out_dims(out, x->dtype, x->ndim, sizes);
}

static double gs_unnormalize(double c, int64_t size, bool align) {
    return align ? (c + 1) / 2 * (double)(size - 1) : ((c + 1) * (double)size - 1) / 2;
}

static double gs_clip(double c, int64_t size) { return fmin((double)(size - 1), fmax(c, 0.0)); }

static double gs_reflect(double c, int64_t twice_low, int64_t twice_high) {
    if (twice_low == twice_high) return 0;
    double mn = (double)twice_low / 2, span = (double)(twice_high - twice_low) / 2;
    c = fabs(c - mn);
    double extra = fmod(c, span);
    int64_t flips = (int64_t)floor(c / span);
    return flips % 2 == 0 ? extra + mn : span - extra + mn;
}

/* Padding applied to an unnormalised coordinate; NaN / huge values go far
 * outside (PyTorch's safe_downgrade_to_int_range). */
static double gs_pad_coord(double c, int64_t size, gs_pad pad, bool align) {
    if (pad == GS_BORDER) c = gs_clip(c, size);
    else if (pad == GS_REFLECTION) {
        c = align ? gs_reflect(c, 0, 2 * (size - 1)) : gs_reflect(c, -1, 2 * size - 1);
        c = gs_clip(c, size);
    }
    if (!isfinite(c) || c > (double)INT32_MAX - 1 || c < (double)INT32_MIN + 1) return -100.0;
    return c;
}

static double gs_at(const view5 *v, int64_t n, int64_t c, int64_t y, int64_t x, int64_t h, int64_t w) {
    if (x < 0 || y < 0 || x >= w || y >= h) return 0.0;
    return load_elem(view5_at(v, n, c, 0, y, x), v->dtype);
}

static double gs_cubic1(double x, double a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
static double gs_cubic2(double x, double a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

static double gs_cubic_interp(double x0, double x1, double x2, double x3, double t) {
    const double a = -0.75;
    return x0 * gs_cubic2(t + 1, a) + x1 * gs_cubic1(t, a) + x2 * gs_cubic1(1 - t, a) + x3 * gs_cubic2(2 - t, a);
}

/* The volumetric form: input [N, C, D, H, W], grid [N, Do, Ho, Wo, 3] of
 * (x, y, z); trilinear ("bilinear") weights the eight neighbours, nearest
 * rounds half to even. */
static double gs_at3(const view5 *v, int64_t n, int64_t c, int64_t z, int64_t y, int64_t x, const int64_t *in) {
    if (x < 0 || y < 0 || z < 0 || x >= in[2] || y >= in[1] || z >= in[0]) return 0.0;
    return load_elem(view5_at(v, n, c, z, y, x), v->dtype);
}

static tp_status grid_sample3d_kernel(const gs_params *p, const tp_tensor *x, const tp_tensor *g, tp_tensor *o) {
    view5 xv;
    make_view5(x, 3, &xv);
    const int64_t in[3] = {x->sizes[2], x->sizes[3], x->sizes[4]};
    int64_t esz = (int64_t)tp_dtype_size(g->dtype), oes = (int64_t)tp_dtype_size(o->dtype);
    const char *gb = tp__tensor_base(g);
    char *ob = tp__tensor_base(o);
    for (int64_t n = 0; n < o->sizes[0]; n++)
        for (int64_t c = 0; c < o->sizes[1]; c++)
            for (int64_t oz = 0; oz < o->sizes[2]; oz++)
                for (int64_t oy = 0; oy < o->sizes[3]; oy++)
                    for (int64_t ox = 0; ox < o->sizes[4]; ox++) {
                        const char *gp =
                            gb + (n * g->strides[0] + oz * g->strides[1] + oy * g->strides[2] + ox * g->strides[3]) * esz;
                        double ix = gs_pad_coord(gs_unnormalize(load_elem(gp, g->dtype), in[2], p->align), in[2], p->pad,
                                                 p->align);
                        double iy = gs_pad_coord(gs_unnormalize(load_elem(gp + g->strides[4] * esz, g->dtype), in[1],
                                                                p->align),
                                                 in[1], p->pad, p->align);
                        double iz = gs_pad_coord(gs_unnormalize(load_elem(gp + 2 * g->strides[4] * esz, g->dtype), in[0],
                                                                p->align),
                                                 in[0], p->pad, p->align);
                        double v = 0;
                        if (p->mode == GS_NEAREST) {
                            v = gs_at3(&xv, n, c, (int64_t)nearbyint(iz), (int64_t)nearbyint(iy), (int64_t)nearbyint(ix),
                                       in);
                        } else {
                            int64_t x0 = (int64_t)floor(ix), y0 = (int64_t)floor(iy), z0 = (int64_t)floor(iz);
                            double wx = ix - (double)x0, wy = iy - (double)y0, wz = iz - (double)z0;
                            for (int k = 0; k < 8; k++) {
                                int dz = k >> 2, dy = (k >> 1) & 1, dx = k & 1;
                                double wgt = (dx ? wx : 1 - wx) * (dy ? wy : 1 - wy) * (dz ? wz : 1 - wz);
                                v += gs_at3(&xv, n, c, z0 + dz, y0 + dy, x0 + dx, in) * wgt;
                            }
                        }
                        int64_t off = n * o->strides[0] + c * o->strides[1] + oz * o->strides[2] + oy * o->strides[3] +
                                      ox * o->strides[4];
                        store_elem(ob + off * oes, o->dtype, v);
                    }
    return TP_OK;
}

static tp_status grid_sample_kernel(const tp_value *args, tp_value *out) {
    gs_params p;
    tp_sdim dims[5];
    TP_TRY(gs_setup(args, &p, dims));
    int64_t sizes[4] = {dims[0].v, dims[1].v, dims[2].v, dims[3].v};
    const tp_tensor *x = tp__arg_tensor(args, 0), *g = tp__arg_tensor(args, 1);
    tp_tensor *o = tp__out_at(out, 0);
    if (tp_tensor_numel(o) == 0) return TP_OK;
    if (x->ndim == 5) return grid_sample3d_kernel(&p, x, g, o);
    view5 xv;
    make_view5(x, 2, &xv);
    int64_t h = x->sizes[2], w = x->sizes[3], esz = (int64_t)tp_dtype_size(g->dtype);
    const char *gb = tp__tensor_base(g);
    char *ob = tp__tensor_base(o);
    int64_t oes = (int64_t)tp_dtype_size(o->dtype), flat = 0;
    for (int64_t n = 0; n < sizes[0]; n++)
        for (int64_t c = 0; c < sizes[1]; c++)
            for (int64_t oy = 0; oy < sizes[2]; oy++)
                for (int64_t ox = 0; ox < sizes[3]; ox++) {
                    const char *gp = gb + (n * g->strides[0] + oy * g->strides[1] + ox * g->strides[2]) * esz;
                    double gx = load_elem(gp, g->dtype), gy = load_elem(gp + g->strides[3] * esz, g->dtype), v = 0;
                    if (p.mode == GS_BICUBIC) {
                        double ix = gs_unnormalize(gx, w, p.align), iy = gs_unnormalize(gy, h, p.align);
                        double fx = floor(ix), fy = floor(iy), tx = ix - fx, ty = iy - fy, rows[4];
                        for (int i = 0; i < 4; i++) {
                            double t[4];
                            for (int j = 0; j < 4; j++) {
                                double cx = gs_pad_coord(fx - 1 + j, w, p.pad, p.align);
                                double cy = gs_pad_coord(fy - 1 + i, h, p.pad, p.align);
                                t[j] = gs_at(&xv, n, c, (int64_t)cy, (int64_t)cx, h, w);
                            }
                            rows[i] = gs_cubic_interp(t[0], t[1], t[2], t[3], tx);
                        }
                        v = gs_cubic_interp(rows[0], rows[1], rows[2], rows[3], ty);
                    } else {
                        double ix = gs_pad_coord(gs_unnormalize(gx, w, p.align), w, p.pad, p.align);
                        double iy = gs_pad_coord(gs_unnormalize(gy, h, p.align), h, p.pad, p.align);
                        if (p.mode == GS_NEAREST) {
                            v = gs_at(&xv, n, c, (int64_t)nearbyint(iy), (int64_t)nearbyint(ix), h, w);
                        } else {
                            int64_t x0 = (int64_t)floor(ix), y0 = (int64_t)floor(iy);
                            double wx = ix - (double)x0, wy = iy - (double)y0;
                            v = gs_at(&xv, n, c, y0, x0, h, w) * (1 - wx) * (1 - wy) +
                                gs_at(&xv, n, c, y0, x0 + 1, h, w) * wx * (1 - wy) +
                                gs_at(&xv, n, c, y0 + 1, x0, h, w) * (1 - wx) * wy +
                                gs_at(&xv, n, c, y0 + 1, x0 + 1, h, w) * wx * wy;
                        }
                    }
                    store_elem(ob + flat * oes, o->dtype, v);
                    flat++;
                }
    return TP_OK;
}

/* affine_grid(theta [N, 2, 3] or [N, 3, 4], size [N, C, H, W] or [N, C, D, H, W], align_corners)
 * -> [N, H, W, 2] / [N, D, H, W, 3]: the base grid of (x, y[, z], 1) per
 * output pixel times theta's transpose. */
static tp_status affine_setup(const tp_value *args, int64_t *size, tp_sdim *dims, int *nd) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_CHECK(t, TP_ERR_TYPE, "affine_grid(): theta must be a tensor");
    TP_CHECK(tp_dtype_is_float(t->dtype), TP_ERR_TYPE,
             "Expected theta to have floating point type, but got %s", tp_dtype_name(t->dtype));
    int n;
    TP_TRY(tp__arg_sdims(args, 1, "size", dims, 5, -1, &n));
    for (int d = 0; d < n; d++) size[d] = dims[d].v;
    char s1[128], s2[128];
    if (n == 4) {
        TP_CHECK(t->ndim == 3 && tp__dim_eq(tp__dim(t, 0), dims[0], "affine_grid: theta's batch == size[0]") &&
                     tp__dim_eqk(tp__dim(t, 1), 2, "affine_grid: theta's shape") &&
                     tp__dim_eqk(tp__dim(t, 2), 3, "affine_grid: theta's shape"),
                 TP_ERR_SHAPE,
                 "Expected a batch of 2D affine matrices of shape Nx2x3 for size %s. Got %s.",
                 tp__shape_str(n, size, s1, sizeof s1), tp__shape_str(t->ndim, t->sizes, s2, sizeof s2));
    } else if (n == 5) {
        TP_CHECK(t->ndim == 3 && tp__dim_eq(tp__dim(t, 0), dims[0], "affine_grid: theta's batch == size[0]") &&
                     tp__dim_eqk(tp__dim(t, 1), 3, "affine_grid: theta's shape") &&
                     tp__dim_eqk(tp__dim(t, 2), 4, "affine_grid: theta's shape"),
                 TP_ERR_SHAPE,
                 "Expected a batch of 3D affine matrices of shape Nx3x4 for size %s. Got %s.",
                 tp__shape_str(n, size, s1, sizeof s1), tp__shape_str(t->ndim, t->sizes, s2, sizeof s2));
    } else {
        return tp_error(TP_ERR_SHAPE, "affine_grid only supports 4D and 5D sizes, for 2D and 3D affine "
                                      "transforms, respectively. Got size %s.",
                        tp__shape_str(n, size, s1, sizeof s1));
    }
    for (int d = 0; d < n; d++)
        TP_CHECK(tp__dim_ge(dims[d], 1, "affine_grid: output size"), TP_ERR_INVALID_ARG,
                 "Expected non-zero, positive output size. Got %s",
                 tp__shape_str(n, size, s1, sizeof s1));
    *nd = n;
    return TP_OK;
}

static tp_status affine_grid_infer(const tp_value *args, tp_value *out) {
    int64_t size[5];
    tp_sdim dims[5], osz[5];
    int nd = 0;
    TP_TRY(affine_setup(args, size, dims, &nd));
    osz[0] = dims[0];
    for (int d = 2; d < nd; d++) osz[d - 1] = dims[d];
    osz[nd - 1] = tp__dimk(nd - 2);
    return tp__out_dims(out, tp__arg_tensor(args, 0)->dtype, nd, osz);
}

/* PyTorch's linspace_from_neg_one: step i of n in [-1, 1], scaled by
 * (n - 1) / n without align_corners; 0 for one step. */
static double affine_base(int64_t i, int64_t n, bool align) {
    if (n <= 1) return 0.0;
    double v = -1.0 + 2.0 * (double)i / (double)(n - 1);
    return align ? v : v * (double)(n - 1) / (double)n;
}

static tp_status affine_grid_kernel(const tp_value *args, tp_value *out) {
    int64_t size[5];
    tp_sdim dims[5];
    int nd = 0;
    TP_TRY(affine_setup(args, size, dims, &nd));
    const tp_tensor *t = tp__arg_tensor(args, 0);
    bool align = !tp__arg_is_none(args, 2) && tp__arg_bool(args, 2);
    tp_tensor *o = tp__out_at(out, 0);
    int k = nd - 2; /* coordinates per point */
    int64_t d = nd == 5 ? size[2] : 1, h = size[nd - 2], w = size[nd - 1];
    int64_t tes = (int64_t)tp_dtype_size(t->dtype), oes = (int64_t)tp_dtype_size(o->dtype), flat = 0;
    const char *tb = tp__tensor_base(t);
    char *ob = tp__tensor_base(o);
    for (int64_t n = 0; n < size[0]; n++)
        for (int64_t iz = 0; iz < d; iz++)
            for (int64_t iy = 0; iy < h; iy++)
                for (int64_t ix = 0; ix < w; ix++) {
                    double base[4] = {affine_base(ix, w, align), affine_base(iy, h, align), 0, 0};
                    if (k == 3) base[2] = affine_base(iz, d, align);
                    base[k] = 1.0;
                    for (int r = 0; r < k; r++) {
                        double acc = 0;
                        for (int c = 0; c <= k; c++)
                            acc += base[c] * load_elem(tb + (n * t->strides[0] + r * t->strides[1] + c * t->strides[2]) * tes,
                                                       t->dtype);
                        store_elem(ob + flat * oes, o->dtype, acc);
                        flat++;
                    }
                }
    return TP_OK;
}

#define POOL_OP_FNS(name, infer_call, kernel_call)                                                            \
    static tp_status name##_infer(const tp_value *args, tp_value *out) { return infer_call; }                 \
    static tp_status name##_kernel(const tp_value *args, tp_value *out) { return kernel_call; }

POOL_OP_FNS(max_pool1d, max_pool_infer(args, out, 1), max_pool_kernel(args, out, 1))
POOL_OP_FNS(max_pool2d, max_pool_infer(args, out, 2), max_pool_kernel(args, out, 2))
POOL_OP_FNS(max_pool3d, max_pool_infer(args, out, 3), max_pool_kernel(args, out, 3))
POOL_OP_FNS(max_pool1d_with_indices, max_pool_indices_infer(args, out, 1), max_pool_indices_kernel(args, out, 1))
POOL_OP_FNS(max_pool2d_with_indices, max_pool_indices_infer(args, out, 2), max_pool_indices_kernel(args, out, 2))
POOL_OP_FNS(max_pool3d_with_indices, max_pool_indices_infer(args, out, 3), max_pool_indices_kernel(args, out, 3))
POOL_OP_FNS(avg_pool1d, avg_pool_infer(args, out, 1), avg_pool_kernel(args, out, 1))
POOL_OP_FNS(avg_pool2d, avg_pool_infer(args, out, 2), avg_pool_kernel(args, out, 2))
POOL_OP_FNS(avg_pool3d, avg_pool_infer(args, out, 3), avg_pool_kernel(args, out, 3))
POOL_OP_FNS(adaptive_avg_pool1d, adaptive_infer(args, out, 1), adaptive_kernel(args, out, 1, false))
POOL_OP_FNS(adaptive_avg_pool2d, adaptive_infer(args, out, 2), adaptive_kernel(args, out, 2, false))
POOL_OP_FNS(adaptive_avg_pool3d, adaptive_infer(args, out, 3), adaptive_kernel(args, out, 3, false))
POOL_OP_FNS(adaptive_max_pool1d, adaptive_infer(args, out, 1), adaptive_kernel(args, out, 1, true))
POOL_OP_FNS(adaptive_max_pool2d, adaptive_infer(args, out, 2), adaptive_kernel(args, out, 2, true))
POOL_OP_FNS(adaptive_max_pool3d, adaptive_infer(args, out, 3), adaptive_kernel(args, out, 3, true))
POOL_OP_FNS(adaptive_max_pool1d_with_indices, adaptive_indices_infer(args, out, 1), adaptive_indices_kernel(args, out, 1))
POOL_OP_FNS(adaptive_max_pool2d_with_indices, adaptive_indices_infer(args, out, 2), adaptive_indices_kernel(args, out, 2))
POOL_OP_FNS(adaptive_max_pool3d_with_indices, adaptive_indices_infer(args, out, 3), adaptive_indices_kernel(args, out, 3))
POOL_OP_FNS(max_unpool1d, unpool_infer(args, out, 1), unpool_kernel(args, out, 1))
POOL_OP_FNS(max_unpool2d, unpool_infer(args, out, 2), unpool_kernel(args, out, 2))
POOL_OP_FNS(max_unpool3d, unpool_infer(args, out, 3), unpool_kernel(args, out, 3))
POOL_OP_FNS(lp_pool1d, lp_pool_infer(args, out, 1), lp_pool_kernel(args, out, 1))
POOL_OP_FNS(lp_pool2d, lp_pool_infer(args, out, 2), lp_pool_kernel(args, out, 2))
POOL_OP_FNS(lp_pool3d, lp_pool_infer(args, out, 3), lp_pool_kernel(args, out, 3))

#define MAX_POOL_ARGS                                                                                         \
    "(Tensor self, int[] kernel_size, int[] stride=[], int[] padding=0, int[] dilation=1, "                   \
    "bool ceil_mode=False) -> Tensor"
#define MAX_POOL_INDICES_ARGS                                                                                 \
    "(Tensor self, int[] kernel_size, int[] stride=[], int[] padding=0, int[] dilation=1, "                   \
    "bool ceil_mode=False) -> (Tensor, Tensor)"
#define AVG_POOL_ARGS                                                                                         \
    "(Tensor self, int[] kernel_size, int[] stride=[], int[] padding=0, bool ceil_mode=False, "               \
    "bool count_include_pad=True, int? divisor_override=None) -> Tensor"
#define ADAPTIVE_ARGS "(Tensor self, int[] output_size) -> Tensor"
#define ADAPTIVE_INDICES_ARGS "(Tensor self, int[] output_size) -> (Tensor, Tensor)"
#define MAX_UNPOOL_ARGS                                                                                       \
    "(Tensor self, Tensor indices, int[]? kernel_size=None, int[]? stride=None, int[]? padding=None, "                \
    "int[]? output_size=None) -> Tensor"
#define LP_POOL_ARGS                                                                                          \
    "(Tensor input, float norm_type, int[] kernel_size, int[]? stride=None, bool ceil_mode=False) -> Tensor"

/* ---- fractional_max_pool2d / 3d (issue #13) -------------------------------
 * F.fractional_max_pool2d / 3d with _random_samples given (without them the
 * windows are random: refused): output_size, or output_ratio (int(size *
 * ratio)); per plane, the window starts of each spatial dim are PyTorch's
 * int((i + u) alpha) - int(u alpha), alpha = (in - pool) / (out - 1) in the
 * input's precision, the last at in - pool; u the plane's sample (samples
 * [N, C, nd]: 2-D [0] for the width, [1] the height; 3-D [0] the time,
 * [1] the height, [2] the width, as PyTorch's kernels read them). The
 * maximum (NaN wins) and its index within the plane, as max_pool's. */

enum { FMP_INPUT, FMP_KERNEL, FMP_OUTPUT_SIZE, FMP_OUTPUT_RATIO, FMP_SAMPLES };

typedef struct fmp_plan {
    int nd; /* spatial dims: 2 or 3 */
    bool batched;
    int64_t k[3], out[3];
    const tp_tensor *x, *u;
} fmp_plan;

static tp_status fmp_check(const tp_value *args, int nd, fmp_plan *p) {
    const char *nm = nd == 2 ? "fractional_max_pool2d" : "fractional_max_pool3d";
    static const char *const what[3][3] = {{"height", "width", ""}, {"time", "height", "width"}};
    p->nd = nd;
    p->x = tp__arg_tensor(args, FMP_INPUT);
    p->u = tp__arg_tensor(args, FMP_SAMPLES);
    const tp_tensor *x = p->x;
    TP_CHECK(x && (x->ndim == nd + 1 || x->ndim == nd + 2), TP_ERR_SHAPE,
             "%s(): non-empty %dD or %dD (batch mode) tensor expected for input", nm, nd + 1, nd + 2);
    TP_CHECK(tp_dtype_is_float(x->dtype), TP_ERR_TYPE, "\"%s_out_frame\" not implemented for '%s'", nm,
             tp_dtype_name(x->dtype));
    p->batched = x->ndim == nd + 2;
    int n;
    TP_TRY(tp__arg_ints(args, FMP_KERNEL, "kernel_size", p->k, 3, nd, &n));
    if (!tp__arg_is_none(args, FMP_OUTPUT_SIZE)) {
        TP_TRY(tp__arg_ints(args, FMP_OUTPUT_SIZE, "output_size", p->out, 3, nd, &n));
    } else {
        const tp_value *r = &args[FMP_OUTPUT_RATIO];
        TP_CHECK(r->kind != TP_VAL_NONE, TP_ERR_INVALID_ARG,
                 "%s requires specifying either an output_size or an output_ratio", nm);
        bool seq = r->kind == TP_VAL_LIST || r->kind == TP_VAL_TUPLE;
        TP_CHECK(!seq || tp_value_len(r) == nd || tp_value_len(r) == 1, TP_ERR_INVALID_ARG,
                 "%s: output_ratio must be a number or %d numbers", nm, nd);
        for (int d = 0; d < nd; d++) {
            double ratio = seq ? tp_value_as_f64(tp_value_at(r, tp_value_len(r) == 1 ? 0 : d)) : tp_value_as_f64(r);
            p->out[d] = (int64_t)((double)x->sizes[x->ndim - nd + d] * ratio);
        }
    }
    TP_CHECK(p->u, TP_ERR_UNSUPPORTED,
             "%s: without _random_samples the pooling windows are random; export with _random_samples", nm);
    int64_t nb = p->batched ? x->sizes[0] : 1, ch = x->sizes[x->ndim - nd - 1];
    TP_CHECK(p->u->ndim == 3, TP_ERR_SHAPE, "Expect _random_samples to have 3 dimensions, got %d", p->u->ndim);
    TP_CHECK(p->u->sizes[0] >= nb, TP_ERR_SHAPE, "Expect _random_samples.size(0) no less then input batch size.");
    TP_CHECK(p->u->sizes[1] == ch, TP_ERR_SHAPE, "Expect _random_samples.size(1) equals to input channel size.");
    TP_CHECK(p->u->sizes[2] == nd, TP_ERR_SHAPE, "Expect _random_samples.size(2) equals to %d", nd);
    TP_CHECK(p->u->dtype == x->dtype, TP_ERR_TYPE, "%s: _random_samples must have the input's dtype (%s), got %s", nm,
             tp_dtype_name(x->dtype), tp_dtype_name(p->u->dtype));
    for (int d = 0; d < nd; d++) {
        int64_t in = x->sizes[x->ndim - nd + d];
        TP_CHECK(p->k[d] > 0 && p->out[d] > 0, TP_ERR_INVALID_ARG,
                 "%s(): kernel_size and output_size must be greater than zero", nm);
        TP_CHECK(p->out[d] + p->k[d] - 1 <= in, TP_ERR_SHAPE,
                 "%s(): pool %s %" PRId64 " too large relative to input %s %" PRId64, nm, what[nd - 2][d], p->k[d],
                 what[nd - 2][d], in);
    }
    return TP_OK;
}

static tp_status fmp_infer(const tp_value *args, tp_value *out, int nd, bool indices) {
    fmp_plan p;
    TP_TRY(fmp_check(args, nd, &p));
    tp_sdim dims[TP_MAX_DIMS];
    tp__dims(p.x, dims);
    for (int d = 0; d < nd; d++) dims[p.x->ndim - nd + d] = tp__dimk(p.out[d]);
    if (!indices) return tp__out_dims(out, p.x->dtype, p.x->ndim, dims);
    TP_TRY(tp__out_tuple(out, 2));
    TP_TRY(tp__out_dims(tp_value_at(out, 0), p.x->dtype, p.x->ndim, dims));
    return tp__out_dims(tp_value_at(out, 1), TP_INT64, p.x->ndim, dims);
}

/* Window starts of one dim, alpha in the input's precision. */
static void fmp_intervals(double u, int64_t in, int64_t outn, int64_t k, bool f32, int64_t *seq) {
    if (outn > 1) {
        if (f32) {
            float alpha = (float)(in - k) / (float)(outn - 1), fu = (float)u;
            for (int64_t i = 0; i < outn - 1; i++) seq[i] = (int64_t)(int)(((float)i + fu) * alpha) - (int)(fu * alpha);
        } else {
            double alpha = (double)(in - k) / (double)(outn - 1);
            for (int64_t i = 0; i < outn - 1; i++) seq[i] = (int64_t)(int)(((double)i + u) * alpha) - (int)(u * alpha);
        }
    }
    seq[outn - 1] = in - k;
}

static tp_status fmp_kernel(const tp_value *args, tp_value *out, int nd, bool indices) {
    fmp_plan p;
    TP_TRY(fmp_check(args, nd, &p));
    TP_TRY(tp__has_data(p.u, "_random_samples"));
    const tp_tensor *x = p.x, *u = p.u;
    tp_tensor *y = indices ? tp__out_at(out, 0) : tp__out_at(out, 0), *yi = indices ? tp__out_at(out, 1) : NULL;
    int64_t nb = p.batched ? x->sizes[0] : 1, ch = x->sizes[x->ndim - nd - 1];
    int64_t in[3] = {1, 1, 1}, on[3] = {1, 1, 1}, k[3] = {1, 1, 1}, xs[3] = {0, 0, 0};
    int off = 3 - nd; /* dims padded at the front to (t, h, w) */
    for (int d = 0; d < nd; d++) {
        in[off + d] = x->sizes[x->ndim - nd + d];
        on[off + d] = p.out[d];
        k[off + d] = p.k[d];
        xs[off + d] = x->strides[x->ndim - nd + d];
    }
    int64_t total = on[0] + on[1] + on[2];
    int64_t *seq = tp_malloc(sizeof(int64_t) * (size_t)total);
    TP_CHECK(seq, TP_ERR_NOMEM, "out of memory for fractional max pooling");
    int64_t *sq[3] = {seq, seq + on[0], seq + on[0] + on[1]};
    size_t es = tp_dtype_size(x->dtype), ues = tp_dtype_size(u->dtype);
    const char *xb = tp__tensor_base(x), *ub = tp__tensor_base(u);
    bool f32 = x->dtype == TP_FLOAT32;
    int64_t plane_out = on[0] * on[1] * on[2];
    for (int64_t b = 0; b < nb; b++)
        for (int64_t c = 0; c < ch; c++) {
            for (int d = 0; d < 3; d++) {
                if (d < off) {
                    sq[d][0] = 0;
                    continue;
                }
                /* samples: 2-D [0] width, [1] height; 3-D [0] time, [1] height, [2] width (PyTorch's) */
                int64_t si = nd == 2 ? 1 - (d - off) : d - off;
                double uv = tp__load_f64(ub + (b * u->strides[0] + c * u->strides[1] + si * u->strides[2]) * (int64_t)ues,
                                         u->dtype);
                fmp_intervals(uv, in[d], on[d], k[d], f32, sq[d]);
            }
            int64_t xo = (p.batched ? b * x->strides[0] : 0) + c * x->strides[x->ndim - nd - 1];
            int64_t yo = (b * ch + c) * plane_out;
            for (int64_t ot = 0; ot < on[0]; ot++)
                for (int64_t oh = 0; oh < on[1]; oh++)
                    for (int64_t ow = 0; ow < on[2]; ow++) {
                        int64_t t0 = sq[0][ot], h0 = sq[1][oh], w0 = sq[2][ow];
                        double mx = -INFINITY;
                        int64_t mi = (t0 * in[1] + h0) * in[2] + w0;
                        for (int64_t t = t0; t < t0 + k[0]; t++)
                            for (int64_t h = h0; h < h0 + k[1]; h++)
                                for (int64_t w = w0; w < w0 + k[2]; w++) {
                                    double v = tp__load_f64(xb + (xo + t * xs[0] + h * xs[1] + w * xs[2]) * (int64_t)es,
                                                            x->dtype);
                                    if (v > mx || isnan(v)) {
                                        mx = v;
                                        mi = (t * in[1] + h) * in[2] + w;
                                    }
                                }
                        int64_t o = yo + (ot * on[1] + oh) * on[2] + ow;
                        tp__store_f64(tp__tensor_base(y) + o * (int64_t)es, y->dtype, mx);
                        if (yi) tp__store_i64(tp__tensor_base(yi) + o * 8, TP_INT64, mi);
                    }
        }
    tp_free(seq);
    return TP_OK;
}

static tp_status fmp2_infer(const tp_value *a, tp_value *o) { return fmp_infer(a, o, 2, false); }
static tp_status fmp2i_infer(const tp_value *a, tp_value *o) { return fmp_infer(a, o, 2, true); }
static tp_status fmp3_infer(const tp_value *a, tp_value *o) { return fmp_infer(a, o, 3, false); }
static tp_status fmp3i_infer(const tp_value *a, tp_value *o) { return fmp_infer(a, o, 3, true); }
static tp_status fmp2_kernel(const tp_value *a, tp_value *o) { return fmp_kernel(a, o, 2, false); }
static tp_status fmp2i_kernel(const tp_value *a, tp_value *o) { return fmp_kernel(a, o, 2, true); }
static tp_status fmp3_kernel(const tp_value *a, tp_value *o) { return fmp_kernel(a, o, 3, false); }
static tp_status fmp3i_kernel(const tp_value *a, tp_value *o) { return fmp_kernel(a, o, 3, true); }

#define FMP_ARGS "(Tensor input, int[] kernel_size, int[]? output_size=None, Any output_ratio=None, " \
                    "Tensor? _random_samples=None)"

void tp__register_pool_ops(void) {
    tp__register_op(TP_OP_MAX_POOL1D, "max_pool1d" MAX_POOL_ARGS, 0, max_pool1d_infer, max_pool1d_kernel);
    tp__register_op(TP_OP_MAX_POOL2D, "max_pool2d" MAX_POOL_ARGS, 0, max_pool2d_infer, max_pool2d_kernel);
    tp__register_op(TP_OP_MAX_POOL3D, "max_pool3d" MAX_POOL_ARGS, 0, max_pool3d_infer, max_pool3d_kernel);
    tp__register_op(TP_OP_MAX_POOL1D_WITH_INDICES, "max_pool1d_with_indices" MAX_POOL_INDICES_ARGS, 0,
                    max_pool1d_with_indices_infer, max_pool1d_with_indices_kernel);
    tp__register_op(TP_OP_MAX_POOL2D_WITH_INDICES, "max_pool2d_with_indices" MAX_POOL_INDICES_ARGS, 0,
                    max_pool2d_with_indices_infer, max_pool2d_with_indices_kernel);
    tp__register_op(TP_OP_MAX_POOL3D_WITH_INDICES, "max_pool3d_with_indices" MAX_POOL_INDICES_ARGS, 0,
                    max_pool3d_with_indices_infer, max_pool3d_with_indices_kernel);
    tp__register_op(TP_OP_AVG_POOL1D, "avg_pool1d" AVG_POOL_ARGS, 0, avg_pool1d_infer, avg_pool1d_kernel);
    tp__register_op(TP_OP_AVG_POOL2D, "avg_pool2d" AVG_POOL_ARGS, 0, avg_pool2d_infer, avg_pool2d_kernel);
    tp__register_op(TP_OP_AVG_POOL3D, "avg_pool3d" AVG_POOL_ARGS, 0, avg_pool3d_infer, avg_pool3d_kernel);
    tp__register_op(TP_OP_ADAPTIVE_AVG_POOL1D, "adaptive_avg_pool1d" ADAPTIVE_ARGS, 0, adaptive_avg_pool1d_infer,
                    adaptive_avg_pool1d_kernel);
    tp__register_op(TP_OP_ADAPTIVE_AVG_POOL2D, "adaptive_avg_pool2d" ADAPTIVE_ARGS, 0, adaptive_avg_pool2d_infer,
                    adaptive_avg_pool2d_kernel);
    tp__register_op(TP_OP_ADAPTIVE_AVG_POOL3D, "adaptive_avg_pool3d" ADAPTIVE_ARGS, 0, adaptive_avg_pool3d_infer,
                    adaptive_avg_pool3d_kernel);
    tp__register_op(TP_OP_ADAPTIVE_MAX_POOL1D, "adaptive_max_pool1d" ADAPTIVE_ARGS, 0, adaptive_max_pool1d_infer,
                    adaptive_max_pool1d_kernel);
    tp__register_op(TP_OP_ADAPTIVE_MAX_POOL2D, "adaptive_max_pool2d" ADAPTIVE_ARGS, 0, adaptive_max_pool2d_infer,
                    adaptive_max_pool2d_kernel);
    tp__register_op(TP_OP_GRID_SAMPLE,
                    "grid_sample(Tensor input, Tensor grid, str mode='bilinear', str padding_mode='zeros', "
                    "bool? align_corners=None) -> Tensor",
                    0, grid_sample_infer, grid_sample_kernel);
    tp__register_op(TP_OP_AFFINE_GRID, "affine_grid(Tensor theta, int[] size, bool? align_corners=None) -> Tensor", 0,
                    affine_grid_infer, affine_grid_kernel);
    tp__register_op(TP_OP_ADAPTIVE_MAX_POOL3D, "adaptive_max_pool3d" ADAPTIVE_ARGS, 0, adaptive_max_pool3d_infer,
                    adaptive_max_pool3d_kernel);
    tp__register_op(TP_OP_ADAPTIVE_MAX_POOL1D_WITH_INDICES, "adaptive_max_pool1d_with_indices" ADAPTIVE_INDICES_ARGS,
                    0, adaptive_max_pool1d_with_indices_infer, adaptive_max_pool1d_with_indices_kernel);
    tp__register_op(TP_OP_ADAPTIVE_MAX_POOL2D_WITH_INDICES, "adaptive_max_pool2d_with_indices" ADAPTIVE_INDICES_ARGS,
                    0, adaptive_max_pool2d_with_indices_infer, adaptive_max_pool2d_with_indices_kernel);
    tp__register_op(TP_OP_ADAPTIVE_MAX_POOL3D_WITH_INDICES, "adaptive_max_pool3d_with_indices" ADAPTIVE_INDICES_ARGS,
                    0, adaptive_max_pool3d_with_indices_infer, adaptive_max_pool3d_with_indices_kernel);
    tp__register_op(TP_OP_MAX_UNPOOL1D, "max_unpool1d" MAX_UNPOOL_ARGS, 0, max_unpool1d_infer, max_unpool1d_kernel);
    tp__register_op(TP_OP_MAX_UNPOOL2D, "max_unpool2d" MAX_UNPOOL_ARGS, 0, max_unpool2d_infer, max_unpool2d_kernel);
    tp__register_op(TP_OP_MAX_UNPOOL3D, "max_unpool3d" MAX_UNPOOL_ARGS, 0, max_unpool3d_infer, max_unpool3d_kernel);
    tp__register_op(TP_OP_LP_POOL1D, "lp_pool1d" LP_POOL_ARGS, 0, lp_pool1d_infer, lp_pool1d_kernel);
    tp__register_op(TP_OP_LP_POOL2D, "lp_pool2d" LP_POOL_ARGS, 0, lp_pool2d_infer, lp_pool2d_kernel);
    tp__register_op(TP_OP_LP_POOL3D, "lp_pool3d" LP_POOL_ARGS, 0, lp_pool3d_infer, lp_pool3d_kernel);
    tp__register_op(TP_OP_INTERPOLATE,
                    "interpolate(Tensor input, int[]? size=None, Any scale_factor=None, str mode='nearest', "
                    "bool? align_corners=None) -> Tensor",
                    0, interp_infer, interp_kernel);
    tp__register_op(TP_OP_FRACTIONAL_MAX_POOL2D, "fractional_max_pool2d" FMP_ARGS " -> Tensor", 0, fmp2_infer,
                    fmp2_kernel);
    tp__register_op(TP_OP_FRACTIONAL_MAX_POOL2D_WITH_INDICES,
                    "fractional_max_pool2d_with_indices" FMP_ARGS " -> (Tensor, Tensor)", 0, fmp2i_infer,
                    fmp2i_kernel);
    tp__register_op(TP_OP_FRACTIONAL_MAX_POOL3D, "fractional_max_pool3d" FMP_ARGS " -> Tensor", 0, fmp3_infer,
                    fmp3_kernel);
    tp__register_op(TP_OP_FRACTIONAL_MAX_POOL3D_WITH_INDICES,
                    "fractional_max_pool3d_with_indices" FMP_ARGS " -> (Tensor, Tensor)", 0, fmp3i_infer,
                    fmp3i_kernel);
}
