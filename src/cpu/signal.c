/*
 * signal.c - ops added for ONNX import with ONNX's own semantics (issue
 * #14), named onnx_* because PyTorch's namesakes (torchvision's roi_align,
 * torch.stft, torch.fft) take other arguments:
 *
 *  - onnx_roi_align: ONNX RoiAlign (opset 10 / 16): for every region of
 *    interest an output_height x output_width grid of bins, each the average
 *    (mode 'avg') or the maximum (mode 'max') of a sampling grid of bilinear
 *    samples; sampling_ratio 0 = adaptive (ceil(roi size / bins)); aligned =
 *    coordinate_transformation_mode 'half_pixel' (rois shifted by -0.5
 *    pixel), else 'output_half_pixel' (regions forced to at least 1x1). As
 *    in the ONNX reference (and onnxruntime), the maximum is taken over the
 *    weighted corner values w_i * x_i of each sample.
 *  - onnx_dft: ONNX DFT (opset 17, axis an attribute): a real [..., 1] or
 *    complex [..., 2] input along `axis`, zero-padded or cut to dft_length;
 *    onesided keeps bins 0..n/2; inverse divides by n; inverse with
 *    onesided is the real inverse of a one-sided spectrum (output [..., 1]).
 *  - onnx_stft: ONNX STFT: frames of frame_length every frame_step samples
 *    along dim 1 of [batch, length, 1 | 2], each multiplied by the window
 *    (ones when absent) and transformed; output [batch, frames, bins, 2].
 *  - onnx_mel_weight_matrix: ONNX MelWeightMatrix: [dft_length / 2 + 1,
 *    num_mel_bins] triangular filters on the mel scale, in any numeric
 *    dtype (ONNX's output_datatype; float32 by default).
 *
 * The transforms are accumulated in double with the twiddle factors
 * exp(-2 pi i m / n) tabulated once per call for m in [0, n): a radix-2
 * FFT when n is a power of two, else the direct O(n^2) sum (the index
 * f * k reduced mod n, so no precision is lost to large products). They
 * are the reference kernels; no mixed-radix or Bluestein path yet.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "kernel_util.h"

/* Element at element offset `off` (in strides) of t, as a double. */
static inline double ld(const tp_tensor *t, int64_t off) {
    return tp__load_f64(tp__tensor_base(t) + off * (int64_t)tp_dtype_size(t->dtype), t->dtype);
}

static inline void st(tp_tensor *t, int64_t i, double v) {
    tp__store_f64(tp__tensor_base(t) + i * (int64_t)tp_dtype_size(t->dtype), t->dtype, v);
}

/* ---- onnx_roi_align ---------------------------------------------------------------- */

static tp_status roi_align_check(const tp_value *args, int64_t *oh, int64_t *ow, bool *is_max) {
    const tp_tensor *x = tp__arg_tensor(args, 0), *rois = tp__arg_tensor(args, 1), *bi = tp__arg_tensor(args, 2);
    TP_CHECK(tp_dtype_is_float(x->dtype), TP_ERR_TYPE, "input must be a float tensor, got %s", tp_dtype_name(x->dtype));
    TP_CHECK(x->ndim == 4, TP_ERR_SHAPE, "input must be 4-D [N, C, H, W], got %d-D", x->ndim);
    TP_CHECK(tp_dtype_is_float(rois->dtype), TP_ERR_TYPE, "rois must be a float tensor, got %s",
             tp_dtype_name(rois->dtype));
    TP_CHECK(rois->ndim == 2 && rois->sizes[1] == 4, TP_ERR_SHAPE, "rois must be [num_rois, 4], got %d-D with %" PRId64
             " values in its last dim", rois->ndim, rois->ndim ? rois->sizes[rois->ndim - 1] : 0);
    TP_CHECK(!tp_dtype_is_float(bi->dtype) && bi->dtype != TP_BOOL, TP_ERR_TYPE,
             "batch_indices must be an integer tensor, got %s", tp_dtype_name(bi->dtype));
    TP_CHECK(bi->ndim == 1 && bi->sizes[0] == rois->sizes[0], TP_ERR_SHAPE,
             "batch_indices must be [num_rois] (%" PRId64 "), got %d-D", rois->sizes[0], bi->ndim);
    *oh = tp__arg_int(args, 3);
    *ow = tp__arg_int(args, 4);
    TP_CHECK(*oh >= 1 && *ow >= 1, TP_ERR_INVALID_ARG,
             "output_height and output_width must be positive, got %" PRId64 " and %" PRId64, *oh, *ow);
    TP_CHECK(tp__arg_int(args, 5) >= 0, TP_ERR_INVALID_ARG, "sampling_ratio must be >= 0 (0: adaptive), got %" PRId64,
             tp__arg_int(args, 5));
    double scale = tp__arg_f64(args, 6);
    TP_CHECK(isfinite(scale), TP_ERR_INVALID_ARG, "spatial_scale must be finite, got %g", scale);
    const char *mode = tp__arg_str(args, 7);
    TP_CHECK(mode && (!strcmp(mode, "avg") || !strcmp(mode, "max")), TP_ERR_INVALID_ARG,
             "mode must be 'avg' or 'max', got '%s'", mode ? mode : "?");
    *is_max = !strcmp(mode, "max");
    return TP_OK;
}

static tp_status roi_align_infer(const tp_value *args, tp_value *out) {
    int64_t oh = 0, ow = 0;
    bool is_max = false;
    TP_TRY(roi_align_check(args, &oh, &ow, &is_max));
    const tp_tensor *x = tp__arg_tensor(args, 0), *rois = tp__arg_tensor(args, 1);
    return tp__out_tensor(out, x->dtype, 4, (int64_t[]){rois->sizes[0], x->sizes[1], oh, ow});
}

/* Sampling points per bin side beyond this are refused (bounded work). */
#define ROI_MAX_GRID 65536

static tp_status roi_align_kernel(const tp_value *args, tp_value *out) {
    int64_t oh = 0, ow = 0;
    bool is_max = false;
    TP_TRY(roi_align_check(args, &oh, &ow, &is_max));
    const tp_tensor *x = tp__arg_tensor(args, 0), *rois = tp__arg_tensor(args, 1), *bi = tp__arg_tensor(args, 2);
    TP_TRY(tp__has_data(x, "input"));
    TP_TRY(tp__has_data(rois, "rois"));
    TP_TRY(tp__has_data(bi, "batch_indices"));
    tp_tensor *y = tp__out_at(out, 0);
    int64_t R = rois->sizes[0], N = x->sizes[0], C = x->sizes[1], H = x->sizes[2], W = x->sizes[3];
    int64_t ratio = tp__arg_int(args, 5);
    double scale = tp__arg_f64(args, 6);
    bool aligned = tp__arg_bool(args, 8);
    if (tp_tensor_numel(y) == 0) return TP_OK;
    double *acc = tp_malloc(sizeof(double) * (size_t)C);
    TP_CHECK(acc, TP_ERR_NOMEM, "out of memory for %" PRId64 " channels", C);
    const size_t bies = tp_dtype_size(bi->dtype);
    tp_status status = TP_OK;
    for (int64_t r = 0; r < R && status == TP_OK; r++) {
        int64_t b = tp__load_i64(tp__tensor_base(bi) + r * bi->strides[0] * (int64_t)bies, bi->dtype);
        if (b < 0 || b >= N) {
            status = tp_error(TP_ERR_INDEX, "batch_indices[%" PRId64 "] = %" PRId64 " is out of range for %" PRId64
                              " images", r, b, N);
            break;
        }
        double off = aligned ? 0.5 : 0.0, c4[4];
        for (int k = 0; k < 4; k++) c4[k] = ld(rois, r * rois->strides[0] + k * rois->strides[1]) * scale - off;
        double rw = c4[2] - c4[0], rh = c4[3] - c4[1];
        if (!aligned) { /* malformed regions forced to 1x1 */
            rw = rw > 1.0 ? rw : 1.0;
            rh = rh > 1.0 ? rh : 1.0;
        }
        if (!isfinite(c4[0]) || !isfinite(c4[1]) || !isfinite(rw) || !isfinite(rh)) {
            status = tp_error(TP_ERR_INVALID_ARG, "rois row %" PRId64 " holds a non-finite coordinate (after scaling)", r);
            break;
        }
        double bh = rh / (double)oh, bw = rw / (double)ow;
        double gh_d = ratio > 0 ? (double)ratio : ceil(bh), gw_d = ratio > 0 ? (double)ratio : ceil(bw);
        if (gh_d < 0) gh_d = 0; /* inverted regions (half_pixel): no samples */
        if (gw_d < 0) gw_d = 0;
        if (gh_d > ROI_MAX_GRID || gw_d > ROI_MAX_GRID) {
            status = tp_error(TP_ERR_INVALID_ARG,
                              "sampling grid of %g x %g points per bin (rois row %" PRId64 ", sampling_ratio %" PRId64
                              ") exceeds %d per side",
                              gh_d, gw_d, r, ratio, ROI_MAX_GRID);
            break;
        }
        int64_t gh = (int64_t)gh_d, gw = (int64_t)gw_d;
        double count = gh * gw > 1 ? (double)(gh * gw) : 1.0;
        const char *xb = tp__tensor_base(x) + b * x->strides[0] * (int64_t)tp_dtype_size(x->dtype);
        size_t xes = tp_dtype_size(x->dtype);
        for (int64_t ph = 0; ph < oh; ph++) {
            for (int64_t pw = 0; pw < ow; pw++) {
                for (int64_t ch = 0; ch < C; ch++) acc[ch] = 0.0;
                bool first = true;
                for (int64_t iy = 0; iy < gh; iy++) {
                    double yy = c4[1] + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                    for (int64_t ix = 0; ix < gw; ix++) {
                        double xx = c4[0] + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                        int64_t pos[4] = {0, 0, 0, 0};
                        double w[4] = {0, 0, 0, 0};
                        if (!(yy < -1.0 || yy > (double)H || xx < -1.0 || xx > (double)W) && H > 0 && W > 0) {
                            double yv = yy > 0 ? yy : 0, xv = xx > 0 ? xx : 0;
                            int64_t yl = (int64_t)yv, xl = (int64_t)xv, yh, xh;
                            if (yl >= H - 1) {
                                yh = yl = H - 1;
                                yv = (double)yl;
                            } else {
                                yh = yl + 1;
                            }
                            if (xl >= W - 1) {
                                xh = xl = W - 1;
                                xv = (double)xl;
                            } else {
                                xh = xl + 1;
                            }
                            double ly = yv - (double)yl, lx = xv - (double)xl, hy = 1.0 - ly, hx = 1.0 - lx;
                            w[0] = hy * hx, w[1] = hy * lx, w[2] = ly * hx, w[3] = ly * lx;
                            pos[0] = yl * x->strides[2] + xl * x->strides[3];
                            pos[1] = yl * x->strides[2] + xh * x->strides[3];
                            pos[2] = yh * x->strides[2] + xl * x->strides[3];
                            pos[3] = yh * x->strides[2] + xh * x->strides[3];
                        }
                        for (int64_t ch = 0; ch < C; ch++) {
                            const char *cb = xb + ch * x->strides[1] * (int64_t)xes;
                            double v[4];
                            for (int k = 0; k < 4; k++) v[k] = w[k] * tp__load_f64(cb + pos[k] * (int64_t)xes, x->dtype);
                            if (!is_max) {
                                acc[ch] += v[0] + v[1] + v[2] + v[3];
                                continue;
                            }
                            double m = v[0];
                            for (int k = 1; k < 4; k++)
                                if (v[k] > m) m = v[k];
                            if (first || m > acc[ch]) acc[ch] = m;
                        }
                        first = false;
                    }
                }
                for (int64_t ch = 0; ch < C; ch++)
                    st(y, ((r * C + ch) * oh + ph) * ow + pw, is_max ? acc[ch] : acc[ch] / count);
            }
        }
    }
    tp_free(acc);
    return status;
}

/* ---- the transform shared by onnx_dft and onnx_stft ------------------------------- */

/* cos / sin of -2 pi m / n for m in [0, n) (sign +1 for the inverse). */
static tp_status twiddles(int64_t n, double sign, double **out) {
    *out = NULL;
    TP_CHECK(n > 0 && (uint64_t)n <= SIZE_MAX / (2 * sizeof(double)), TP_ERR_NOMEM, "out of memory for a %" PRId64
             "-point transform", n);
    double *t = tp_malloc((size_t)n * 2 * sizeof(double));
    TP_CHECK(t, TP_ERR_NOMEM, "out of memory for a %" PRId64 "-point transform", n);
    const double two_pi = 6.283185307179586476925286766559;
    for (int64_t m = 0; m < n; m++) {
        double a = two_pi * (double)m / (double)n;
        t[2 * m] = cos(a);
        t[2 * m + 1] = sign * -sin(a);
    }
    *out = t;
    return TP_OK;
}

/* In-place radix-2 transform of re/im (n a power of two >= 2): the
 * iterative Cooley-Tukey form, bit-reversed order first, then log2(n)
 * butterfly passes with the twiddles w^(k n / len) of the table. */
static void fft_pow2(double *re, double *im, int64_t n, const double *tw) {
    for (int64_t i = 1, j = 0; i < n; i++) {
        int64_t bit = n >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j) {
            double t = re[i];
            re[i] = re[j], re[j] = t;
            t = im[i];
            im[i] = im[j], im[j] = t;
        }
    }
    for (int64_t len = 2; len <= n; len <<= 1) {
        int64_t half = len >> 1, step = n / len;
        for (int64_t i = 0; i < n; i += len) {
            for (int64_t k = 0; k < half; k++) {
                double wr = tw[2 * k * step], wi = tw[2 * k * step + 1];
                int64_t a = i + k, b = a + half;
                double vr = re[b] * wr - im[b] * wi, vi = re[b] * wi + im[b] * wr;
                re[b] = re[a] - vr, im[b] = im[a] - vi;
                re[a] += vr, im[a] += vi;
            }
        }
    }
}

/* One line: in_re/in_im (in_im NULL: real) of in_len values, out_len bins
 * of the n-point transform into out_re/out_im: X_f = sum_k x_k w^(f k).
 * out_re/out_im hold at least n values when n is a power of two (the
 * radix-2 path transforms the whole zero-padded line there); other
 * lengths take the direct sum. */
static void dft_line(const double *in_re, const double *in_im, int64_t in_len, int64_t n, const double *tw,
                     int64_t out_len, double *out_re, double *out_im) {
    int64_t len = in_len < n ? in_len : n;
    if (n >= 2 && (n & (n - 1)) == 0) {
        for (int64_t k = 0; k < n; k++) {
            out_re[k] = k < len ? in_re[k] : 0.0;
            out_im[k] = k < len && in_im ? in_im[k] : 0.0;
        }
        fft_pow2(out_re, out_im, n, tw);
        return;
    }
    for (int64_t f = 0; f < out_len; f++) {
        double sr = 0, si = 0;
        int64_t m = 0, step = f % n;
        for (int64_t k = 0; k < len; k++) {
            double c = tw[2 * m], s = tw[2 * m + 1], xr = in_re[k], xi = in_im ? in_im[k] : 0.0;
            sr += xr * c - xi * s;
            si += xr * s + xi * c;
            m += step;
            if (m >= n) m -= n;
        }
        out_re[f] = sr;
        out_im[f] = si;
    }
}

/* ---- onnx_dft ------------------------------------------------------------------------ */

typedef struct dft_plan {
    int axis;
    int64_t in_len, n, out_len;
    bool inverse, onesided, real_in, real_out;
} dft_plan;

static tp_status dft_check(const tp_value *args, dft_plan *p) {
    const tp_tensor *x = tp__arg_tensor(args, 0);
    TP_CHECK(tp_dtype_is_float(x->dtype), TP_ERR_TYPE, "input must be a float tensor, got %s", tp_dtype_name(x->dtype));
    TP_CHECK(x->ndim >= 2, TP_ERR_SHAPE, "input must have rank >= 2 (the last dim holds [real] or [real, imag]), got %d",
             x->ndim);
    int64_t last = x->sizes[x->ndim - 1];
    TP_CHECK(last == 1 || last == 2, TP_ERR_SHAPE, "the last dim of input must be 1 (real) or 2 (complex), got %" PRId64,
             last);
    int64_t axis = tp__arg_int(args, 2);
    TP_CHECK(axis >= -x->ndim && axis < x->ndim, TP_ERR_INDEX, "axis %" PRId64 " out of range for rank %d", axis,
             x->ndim);
    p->axis = (int)(axis < 0 ? axis + x->ndim : axis);
    TP_CHECK(p->axis != x->ndim - 1, TP_ERR_INDEX, "axis %" PRId64 " is the last dim (real / imaginary parts)", axis);
    p->inverse = tp__arg_bool(args, 3);
    p->onesided = tp__arg_bool(args, 4);
    p->in_len = x->sizes[p->axis];
    p->real_in = last == 1;
    if (!tp__arg_is_none(args, 1)) {
        p->n = tp__arg_int(args, 1);
        TP_CHECK(p->n >= 1, TP_ERR_INVALID_ARG, "dft_length must be positive, got %" PRId64, p->n);
    } else {
        TP_CHECK(p->in_len <= INT64_MAX / 2, TP_ERR_SHAPE, "input dim %d is too long (%" PRId64 ")", p->axis, p->in_len);
        p->n = p->inverse && p->onesided ? 2 * (p->in_len - 1) : p->in_len;
        TP_CHECK(p->n >= 1, TP_ERR_INVALID_ARG, "a transform of length %" PRId64 " (input dim %d has size %" PRId64 ")",
                 p->n, p->axis, p->in_len);
    }
    p->real_out = p->inverse && p->onesided;
    p->out_len = p->onesided && !p->inverse ? p->n / 2 + 1 : p->n;
    return TP_OK;
}

static tp_status dft_infer(const tp_value *args, tp_value *out) {
    dft_plan p = {0};
    TP_TRY(dft_check(args, &p));
    const tp_tensor *x = tp__arg_tensor(args, 0);
    int64_t sizes[TP_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) sizes[i] = x->sizes[i];
    sizes[p.axis] = p.out_len;
    sizes[x->ndim - 1] = p.real_out ? 1 : 2;
    return tp__out_tensor(out, x->dtype, x->ndim, sizes);
}

static tp_status dft_kernel(const tp_value *args, tp_value *out) {
    dft_plan p = {0};
    TP_TRY(dft_check(args, &p));
    const tp_tensor *x = tp__arg_tensor(args, 0);
    TP_TRY(tp__has_data(x, "input"));
    tp_tensor *y = tp__out_at(out, 0);
    if (tp_tensor_numel(y) == 0) return TP_OK;
    int nd = x->ndim, ax = p.axis;
    /* Bins read from the input: the one-sided real inverse uses n/2 + 1. */
    int64_t use = p.real_out ? p.n / 2 + 1 : p.n;
    int64_t len = p.in_len < use ? p.in_len : use;
    double *tw = NULL;
    TP_TRY(twiddles(p.n, p.inverse ? -1.0 : 1.0, &tw));
    size_t line = (size_t)(p.n > p.in_len ? p.n : p.in_len);
    double *buf = tp_malloc(sizeof(double) * 4 * line);
    if (!buf) {
        tp_free(tw);
        return tp_error(TP_ERR_NOMEM, "out of memory for a %" PRId64 "-point transform", p.n);
    }
    double *ire = buf, *iim = buf + line, *ore = buf + 2 * line, *oim = buf + 3 * line;
    /* y strides (contiguous) */
    int64_t ystr[TP_MAX_DIMS], s = 1;
    for (int i = nd - 1; i >= 0; i--) ystr[i] = s, s *= y->sizes[i];
    int64_t outer[TP_MAX_DIMS], n_outer = 1;
    for (int i = 0; i < nd - 1; i++) outer[i] = i == ax ? 1 : x->sizes[i], n_outer *= outer[i];
    int64_t idx[TP_MAX_DIMS] = {0};
    double inv_n = 1.0 / (double)p.n;
    for (int64_t o = 0; o < n_outer; o++) {
        int64_t xo = 0, yo = 0;
        for (int i = 0; i < nd - 1; i++) xo += idx[i] * x->strides[i], yo += idx[i] * ystr[i];
        int64_t lstr = x->strides[nd - 1];
        for (int64_t k = 0; k < len; k++) {
            int64_t e = xo + k * x->strides[ax];
            ire[k] = ld(x, e);
            iim[k] = p.real_in ? 0.0 : ld(x, e + lstr);
        }
        if (p.real_out) {
            /* the Hermitian extension Y_f = conj(X_(n-f)) for f > n/2; the real part of the inverse */
            for (int64_t k = len; k < use; k++) ire[k] = iim[k] = 0.0;
            for (int64_t f = use; f < p.n; f++) ire[f] = ire[p.n - f], iim[f] = -iim[p.n - f];
            dft_line(ire, iim, p.n, p.n, tw, p.n, ore, oim);
            for (int64_t f = 0; f < p.n; f++) st(y, yo + f * ystr[ax], ore[f] * inv_n);
        } else {
            dft_line(ire, p.real_in ? NULL : iim, len, p.n, tw, p.out_len, ore, oim);
            double sc = p.inverse ? inv_n : 1.0;
            for (int64_t f = 0; f < p.out_len; f++) {
                st(y, yo + f * ystr[ax], ore[f] * sc);
                st(y, yo + f * ystr[ax] + 1, oim[f] * sc);
            }
        }
        for (int i = nd - 2; i >= 0; i--) {
            if (++idx[i] < outer[i]) break;
            idx[i] = 0;
        }
    }
    tp_free(buf);
    tp_free(tw);
    return TP_OK;
}

/* ---- onnx_stft ----------------------------------------------------------------------- */

typedef struct stft_plan {
    int64_t len, frame_length, step, frames, bins;
} stft_plan;

static tp_status stft_check(const tp_value *args, stft_plan *p) {
    const tp_tensor *x = tp__arg_tensor(args, 0), *win = tp__arg_tensor(args, 2);
    TP_CHECK(tp_dtype_is_float(x->dtype), TP_ERR_TYPE, "signal must be a float tensor, got %s", tp_dtype_name(x->dtype));
    TP_CHECK(x->ndim == 3 && (x->sizes[2] == 1 || x->sizes[2] == 2), TP_ERR_SHAPE,
             "signal must be [batch, length, 1] (real) or [batch, length, 2] (complex), got %d-D", x->ndim);
    p->len = x->sizes[1];
    p->step = tp__arg_int(args, 1);
    TP_CHECK(p->step >= 1, TP_ERR_INVALID_ARG, "frame_step must be positive, got %" PRId64, p->step);
    if (win) {
        TP_CHECK(tp_dtype_is_float(win->dtype), TP_ERR_TYPE, "window must be a float tensor, got %s",
                 tp_dtype_name(win->dtype));
        TP_CHECK(win->ndim == 1, TP_ERR_SHAPE, "window must be 1-D, got %d-D", win->ndim);
    }
    if (!tp__arg_is_none(args, 3)) {
        p->frame_length = tp__arg_int(args, 3);
        TP_CHECK(!win || win->sizes[0] == p->frame_length, TP_ERR_SHAPE,
                 "window has %" PRId64 " values for frame_length %" PRId64, win ? win->sizes[0] : 0, p->frame_length);
    } else {
        p->frame_length = win ? win->sizes[0] : p->len;
    }
    TP_CHECK(p->frame_length >= 1 && p->frame_length <= p->len, TP_ERR_INVALID_ARG,
             "frame_length must be in [1, %" PRId64 "] (the signal length), got %" PRId64, p->len, p->frame_length);
    p->frames = 1 + (p->len - p->frame_length) / p->step;
    p->bins = tp__arg_bool(args, 4) ? p->frame_length / 2 + 1 : p->frame_length;
    return TP_OK;
}

static tp_status stft_infer(const tp_value *args, tp_value *out) {
    stft_plan p = {0};
    TP_TRY(stft_check(args, &p));
    const tp_tensor *x = tp__arg_tensor(args, 0);
    return tp__out_tensor(out, x->dtype, 4, (int64_t[]){x->sizes[0], p.frames, p.bins, 2});
}

static tp_status stft_kernel(const tp_value *args, tp_value *out) {
    stft_plan p = {0};
    TP_TRY(stft_check(args, &p));
    const tp_tensor *x = tp__arg_tensor(args, 0), *win = tp__arg_tensor(args, 2);
    TP_TRY(tp__has_data(x, "signal"));
    TP_TRY(tp__has_data(win, "window"));
    tp_tensor *y = tp__out_at(out, 0);
    if (tp_tensor_numel(y) == 0) return TP_OK;
    int64_t n = p.frame_length;
    bool real = x->sizes[2] == 1;
    double *tw = NULL;
    TP_TRY(twiddles(n, 1.0, &tw));
    double *buf = tp_malloc(sizeof(double) * 4 * (size_t)n);
    if (!buf) {
        tp_free(tw);
        return tp_error(TP_ERR_NOMEM, "out of memory for a %" PRId64 "-point transform", n);
    }
    double *ire = buf, *iim = buf + n, *ore = buf + 2 * n, *oim = buf + 3 * n;
    for (int64_t b = 0; b < x->sizes[0]; b++) {
        for (int64_t fr = 0; fr < p.frames; fr++) {
            for (int64_t k = 0; k < n; k++) {
                int64_t e = b * x->strides[0] + (fr * p.step + k) * x->strides[1];
                double w = win ? ld(win, k * win->strides[0]) : 1.0;
                ire[k] = w * ld(x, e);
                iim[k] = real ? 0.0 : w * ld(x, e + x->strides[2]);
            }
            dft_line(ire, real ? NULL : iim, n, n, tw, p.bins, ore, oim);
            int64_t yo = (b * p.frames + fr) * p.bins * 2;
            for (int64_t f = 0; f < p.bins; f++) {
                st(y, yo + 2 * f, ore[f]);
                st(y, yo + 2 * f + 1, oim[f]);
            }
        }
    }
    tp_free(buf);
    tp_free(tw);
    return TP_OK;
}

/* ---- stft (torch.stft, issue #13) ---------------------------------------------------
 * PyTorch's semantics for a real 1-D [L] or 2-D [B, L] signal with
 * return_complex=False (tpexport has no complex dtype): center pads n_fft / 2
 * on both sides with pad_mode (reflect, constant, replicate, circular, as
 * F.pad does on the [1, B, L] view); frames of n_fft samples every
 * hop_length (default n_fft / 4), each multiplied by the window of
 * win_length (default n_fft; ones when absent) centred in the frame, then
 * transformed (n_fft bins, n_fft / 2 + 1 when onesided, the default);
 * normalized multiplies by 1 / sqrt(n_fft). Output [B?, bins, frames, 2] in
 * the promoted dtype of input and window. align_to_window=True is refused. */

enum { STFT_CONSTANT, STFT_REFLECT, STFT_REPLICATE, STFT_CIRCULAR };

typedef struct tstft_plan {
    int64_t n_fft, hop, win, pad, bins;
    int mode;
    bool center, normalized;
    tp_dtype dtype;
} tstft_plan;

/* The checks that need no sizes of the signal's length, in PyTorch's order. */
static tp_status tstft_check(const tp_value *args, tstft_plan *p) {
    const tp_tensor *x = tp__arg_tensor(args, 0), *win = tp__arg_tensor(args, 4);
    if (tp__arg_is_none(args, 9))
        return tp_error(TP_ERR_INVALID_ARG, "stft requires the return_complex parameter be given for real inputs, and "
                                            "will further require that return_complex=True in a future PyTorch "
                                            "release.");
    TP_CHECK(!tp__arg_bool(args, 9), TP_ERR_UNSUPPORTED,
             "stft: return_complex=True gives a complex tensor and tpexport has no complex dtype; "
             "return_complex=False gives the real [..., 2] layout");
    p->center = tp__arg_bool(args, 5);
    if (!tp__arg_is_none(args, 10) && tp__arg_bool(args, 10)) {
        TP_CHECK(!p->center, TP_ERR_INVALID_ARG, "stft: align_to_window should only be set when center = false");
        return tp_error(TP_ERR_UNSUPPORTED, "stft: align_to_window=True is not supported");
    }
    TP_CHECK(tp_dtype_is_float(x->dtype), TP_ERR_TYPE, "stft: expected a tensor of floating point or complex values");
    TP_CHECK(x->ndim == 1 || x->ndim == 2, TP_ERR_SHAPE, "stft: expected a 1D or 2D tensor");
    const char *mode = tp__arg_str(args, 6);
    p->mode = STFT_CONSTANT;
    if (p->center) {
        if (mode && strcmp(mode, "reflect") == 0) p->mode = STFT_REFLECT;
        else if (mode && strcmp(mode, "replicate") == 0) p->mode = STFT_REPLICATE;
        else if (mode && strcmp(mode, "circular") == 0) p->mode = STFT_CIRCULAR;
        else TP_CHECK(mode && strcmp(mode, "constant") == 0, TP_ERR_INVALID_ARG, "Unrecognised padding mode %s",
                      mode ? mode : "None");
    }
    p->n_fft = tp__arg_int(args, 1);
    p->pad = p->center && p->n_fft > 0 ? p->n_fft / 2 : 0;
    p->hop = tp__arg_is_none(args, 2) ? p->n_fft >> 2 : tp__arg_int(args, 2);
    p->win = tp__arg_is_none(args, 3) ? p->n_fft : tp__arg_int(args, 3);
    p->normalized = tp__arg_bool(args, 7);
    p->bins = tp__arg_is_none(args, 8) || tp__arg_bool(args, 8) ? p->n_fft / 2 + 1 : p->n_fft;
    p->dtype = win ? tp_promote_types(x->dtype, win->dtype) : x->dtype;
    return TP_OK;
}

/* The checks on the signal's (padded) length and the frame count. */
static tp_status tstft_frames(const tp_value *args, const tstft_plan *p, tp_sdim *frames) {
    const tp_tensor *x = tp__arg_tensor(args, 0), *win = tp__arg_tensor(args, 4);
    tp_sdim len = tp__dim(x, x->ndim - 1);
    int64_t nb = x->ndim == 2 ? x->sizes[0] : 1;
    if (p->center && p->mode == STFT_REFLECT)
        TP_CHECK(tp__dim_ge(tp__dim_addk(len, -(p->pad + 1)), 0, "stft: reflect padding below the signal length"),
                 TP_ERR_SHAPE,
                 "Argument #4: Padding size should be less than the corresponding input dimension, but got: padding "
                 "(%" PRId64 ", %" PRId64 ") at dimension 2 of input [1, %" PRId64 ", %" PRId64 "]",
                 p->pad, p->pad, nb, len.v);
    if (p->center && p->mode == STFT_CIRCULAR)
        TP_CHECK(tp__dim_ge(tp__dim_addk(len, -p->pad), 0, "stft: circular padding within the signal length"),
                 TP_ERR_SHAPE, "Padding value causes wrapping around more than once.");
    if (p->center && p->mode == STFT_REPLICATE)
        TP_CHECK(tp__dim_ge(len, 1, "stft: a signal to replicate"), TP_ERR_SHAPE,
                 "Expected 2D or 3D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for "
                 "input, but got: [1, %" PRId64 ", 0]",
                 nb);
    tp_sdim plen = tp__dim_addk(len, 2 * p->pad);
    TP_CHECK(p->n_fft > 0 && tp__dim_ge(tp__dim_addk(plen, -p->n_fft), 0, "stft: n_fft within the padded signal"),
             TP_ERR_INVALID_ARG, "stft: expected 0 < n_fft < %" PRId64 ", but got n_fft=%" PRId64, plen.v, p->n_fft);
    TP_CHECK(p->hop > 0, TP_ERR_INVALID_ARG, "stft: expected hop_length > 0, but got hop_length=%" PRId64, p->hop);
    TP_CHECK(p->win > 0 && p->win <= p->n_fft, TP_ERR_INVALID_ARG,
             "stft: expected 0 < win_length <= n_fft, but got win_length=%" PRId64, p->win);
    if (win && (win->ndim != 1 || win->sizes[0] != p->win)) {
        char dims[128] = "";
        size_t n = 0;
        for (int d = 0; d < win->ndim && n < sizeof dims - 24; d++)
            n += (size_t)snprintf(dims + n, sizeof dims - n, "%s%" PRId64, d ? ", " : "", win->sizes[d]);
        return tp_error(TP_ERR_SHAPE,
                        "stft: expected a 1D window tensor of size equal to win_length=%" PRId64
                        ", but got window with size [%s]",
                        p->win, dims);
    }
    *frames = tp__dim_addk(tp__dim_floordiv(tp__dim_addk(plen, -p->n_fft), p->hop), 1);
    return TP_OK;
}

static tp_status tstft_infer(const tp_value *args, tp_value *out) {
    tstft_plan p;
    TP_TRY(tstft_check(args, &p));
    tp_sdim frames;
    TP_TRY(tstft_frames(args, &p, &frames));
    const tp_tensor *x = tp__arg_tensor(args, 0);
    tp_sdim dims[4];
    int nd = 0;
    if (x->ndim == 2) dims[nd++] = tp__dim(x, 0);
    dims[nd++] = tp__dimk(p.bins);
    dims[nd++] = frames;
    dims[nd++] = tp__dimk(2);
    return tp__out_dims(out, p.dtype, nd, dims);
}

/* Index i of the padded signal (i - pad in the signal) read with the padding mode; -1: a zero. */
static int64_t tstft_src(int64_t i, int64_t len, int mode) {
    if (i >= 0 && i < len) return i;
    switch (mode) {
    case STFT_REFLECT: return i < 0 ? -i : 2 * (len - 1) - i;
    case STFT_REPLICATE: return i < 0 ? 0 : len - 1;
    case STFT_CIRCULAR: return i < 0 ? i + len : i - len;
    default: return -1;
    }
}

static tp_status tstft_kernel(const tp_value *args, tp_value *out) {
    tstft_plan p;
    TP_TRY(tstft_check(args, &p));
    tp_sdim fr;
    TP_TRY(tstft_frames(args, &p, &fr));
    const tp_tensor *x = tp__arg_tensor(args, 0), *win = tp__arg_tensor(args, 4);
    TP_TRY(tp__has_data(x, "input"));
    TP_TRY(tp__has_data(win, "window"));
    tp_tensor *y = tp__out_at(out, 0);
    if (tp_tensor_numel(y) == 0) return TP_OK;
    int64_t n = p.n_fft, frames = fr.v, nb = x->ndim == 2 ? x->sizes[0] : 1, len = x->sizes[x->ndim - 1];
    int64_t bstr = x->ndim == 2 ? x->strides[0] : 0, lstr = x->strides[x->ndim - 1];
    int64_t left = (n - p.win) / 2;
    double scale = p.normalized ? 1.0 / sqrt((double)n) : 1.0;
    double *tw = NULL;
    TP_TRY(twiddles(n, 1.0, &tw));
    double *buf = tp_malloc(sizeof(double) * 4 * (size_t)n);
    if (!buf) {
        tp_free(tw);
        return tp_error(TP_ERR_NOMEM, "out of memory for a %" PRId64 "-point transform", n);
    }
    double *w = buf, *ire = buf + n, *ore = buf + 2 * n, *oim = buf + 3 * n;
    for (int64_t k = 0; k < n; k++)
        w[k] = k < left || k >= left + p.win ? 0.0 : win ? ld(win, (k - left) * win->strides[0]) : 1.0;
    for (int64_t b = 0; b < nb; b++) {
        for (int64_t f = 0; f < frames; f++) {
            for (int64_t k = 0; k < n; k++) {
                int64_t i = k < left || k >= left + p.win ? -1 : tstft_src(f * p.hop + k - p.pad, len, p.mode);
                ire[k] = i < 0 ? 0.0 : w[k] * ld(x, b * bstr + i * lstr);
            }
            dft_line(ire, NULL, n, n, tw, p.bins, ore, oim);
            for (int64_t q = 0; q < p.bins; q++) {
                int64_t yo = ((b * p.bins + q) * frames + f) * 2;
                st(y, yo, ore[q] * scale);
                st(y, yo + 1, oim[q] * scale);
            }
        }
    }
    tp_free(buf);
    tp_free(tw);
    return TP_OK;
}

/* ---- onnx_mel_weight_matrix ------------------------------------------------------------ */

static tp_status mel_check(const tp_value *args, tp_dtype *dtype) {
    int64_t m = tp__arg_int(args, 0), n = tp__arg_int(args, 1), sr = tp__arg_int(args, 2);
    double lo = tp__arg_f64(args, 3), hi = tp__arg_f64(args, 4);
    TP_CHECK(m >= 1, TP_ERR_INVALID_ARG, "num_mel_bins must be positive, got %" PRId64, m);
    TP_CHECK(n >= 1, TP_ERR_INVALID_ARG, "dft_length must be positive, got %" PRId64, n);
    TP_CHECK(sr >= 1, TP_ERR_INVALID_ARG, "sample_rate must be positive, got %" PRId64, sr);
    TP_CHECK(lo >= 0 && hi >= lo && isfinite(hi), TP_ERR_INVALID_ARG,
             "need 0 <= lower_edge_hertz <= upper_edge_hertz (finite), got %g and %g", lo, hi);
    *dtype = args[5].kind == TP_VAL_DTYPE ? args[5].u.dtype : TP_FLOAT32;
    TP_CHECK(*dtype != TP_BOOL, TP_ERR_TYPE, "dtype must be a numeric dtype, got %s", tp_dtype_name(*dtype));
    return TP_OK;
}

static tp_status mel_infer(const tp_value *args, tp_value *out) {
    tp_dtype dt;
    TP_TRY(mel_check(args, &dt));
    return tp__out_tensor(out, dt, 2, (int64_t[]){tp__arg_int(args, 1) / 2 + 1, tp__arg_int(args, 0)});
}

static tp_status mel_kernel(const tp_value *args, tp_value *out) {
    tp_dtype dt;
    TP_TRY(mel_check(args, &dt));
    int64_t m = tp__arg_int(args, 0), n = tp__arg_int(args, 1), sr = tp__arg_int(args, 2);
    int64_t nsb = n / 2 + 1;
    double lo = tp__arg_f64(args, 3), hi = tp__arg_f64(args, 4);
    tp_tensor *y = tp__out_at(out, 0);
    int64_t total = nsb * m;
    for (int64_t i = 0; i < total; i++) st(y, i, 0.0);
    /* the band edges: m + 2 points evenly spaced on the mel scale (as the
     * ONNX reference spaces them: step (high - low) / (m + 2)), as bins
     * floor((n + 1) * hz / sample_rate) */
    double lmel = 2595.0 * log1p(lo / 700.0) / log(10.0), hmel = 2595.0 * log1p(hi / 700.0) / log(10.0);
    double step = (hmel - lmel) / (double)(m + 2);
    int64_t prev2 = 0, prev1 = 0;
    for (int64_t i = 0; i < m + 2; i++) {
        double hz = 700.0 * expm1(((double)i * step + lmel) / 2595.0 * log(10.0));
        double fb = floor((double)(n + 1) * hz / (double)sr);
        TP_CHECK(fb >= 0 && fb <= (double)nsb, TP_ERR_INVALID_ARG,
                 "upper_edge_hertz %g maps past the last spectrogram bin (%" PRId64 ") for dft_length %" PRId64
                 " and sample_rate %" PRId64,
                 hi, nsb - 1, n, sr);
        int64_t bin = (int64_t)fb;
        if (i >= 2) { /* filter i - 2 on [prev2, prev1, bin] */
            int64_t lw = prev2, c = prev1, h = bin, col = i - 2;
            TP_CHECK(c < nsb, TP_ERR_INVALID_ARG,
                     "upper_edge_hertz %g puts a filter centre past the last spectrogram bin (%" PRId64 ")", hi,
                     nsb - 1);
            if (c == lw) st(y, c * m + col, 1.0);
            else
                for (int64_t j = lw; j <= c; j++) st(y, j * m + col, (double)(j - lw) / (double)(c - lw));
            for (int64_t j = c; j < h; j++) st(y, j * m + col, (double)(h - j) / (double)(h - c));
        }
        prev2 = prev1;
        prev1 = bin;
    }
    return TP_OK;
}

void tp__register_signal_ops(void) {
    tp__register_op(TP_OP_ONNX_ROI_ALIGN,
                    "onnx_roi_align(Tensor input, Tensor rois, Tensor batch_indices, int output_height=1, "
                    "int output_width=1, int sampling_ratio=0, float spatial_scale=1.0, str mode='avg', "
                    "bool aligned=False) -> Tensor",
                    0, roi_align_infer, roi_align_kernel);
    tp__register_op(TP_OP_ONNX_DFT,
                    "onnx_dft(Tensor input, int? dft_length=None, int axis=1, bool inverse=False, "
                    "bool onesided=False) -> Tensor",
                    0, dft_infer, dft_kernel);
    tp__register_op(TP_OP_ONNX_STFT,
                    "onnx_stft(Tensor signal, int frame_step, Tensor? window=None, int? frame_length=None, "
                    "bool onesided=True) -> Tensor",
                    0, stft_infer, stft_kernel);
    tp__register_op(TP_OP_ONNX_MEL_WEIGHT_MATRIX,
                    "onnx_mel_weight_matrix(int num_mel_bins, int dft_length, int sample_rate, "
                    "float lower_edge_hertz, float upper_edge_hertz, *, ScalarType? dtype=None) -> Tensor",
                    0, mel_infer, mel_kernel);
    tp__register_op(TP_OP_STFT,
                    "stft(Tensor self, int n_fft, int? hop_length=None, int? win_length=None, Tensor? window=None, "
                    "bool center=True, str pad_mode='reflect', bool normalized=False, bool? onesided=None, "
                    "bool? return_complex=None, bool? align_to_window=None) -> Tensor",
                    0, tstft_infer, tstft_kernel);
}
