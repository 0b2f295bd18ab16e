/*
 * fast_nn.c - fast variants (contract v2) of float32 normalisation,
 * softmax, trailing-dim reductions and 2-D max, average and adaptive
 * average pooling.
 *
 * Each works on rows: the input is contiguous and the op runs over its
 * trailing `n` elements (softmax over the last dim, layer_norm over the
 * normalised shape, group_norm over a group's block, sum/mean/amax over
 * trailing dims), so threads split
 * rows and a row's result never depends on the thread count. Batch norm in
 * eval mode is a per-channel scale and shift, computed at plan time when
 * the statistics and affine parameters are constants. Loops come from the
 * per-ISA tables of eltwise_loops.h. softmax, log_softmax, layer_norm and
 * the trailing-dim sum / mean / amax also take bfloat16 / float16 tensors:
 * rows widened (into the thread's workspace, or by blocks into L1),
 * computed in float32 and rounded once (half.h), as PyTorch computes them
 * on CPUs.
 */
#include <math.h>

#include "eltwise.h"
#include "fast.h"
#include "half.h"
#include "kernel_util.h"
#include "../threadpool.h"

static const char *level_name(int level) {
    return level >= TP_CPU_AVX512 ? "avx512" : level >= TP_CPU_AVX2 ? "avx2" : "scalar";
}

/* a * b for sizes (>= 0), saturated: work estimates of hostile shapes must not overflow. */
static int64_t sat_mul(int64_t a, int64_t b) {
    int64_t r;
    return tp_mul_overflow_i64(a, b, &r) ? r : INT64_MAX;
}

static int row_threads(int64_t rows, int64_t n, int max) {
    int64_t t = sat_mul(rows, n) / 16384;
    if (t < 1) t = 1;
    if (t > rows) t = rows;
    return t < max ? (int)t : max;
}

/* Rows of n floats handed out at run time (threadpool.h): each thread's
 * part of the rows in up to ROW_UNITS pieces of at least ROW_UNIT_MIN
 * floats; a thread done with its own rows takes the end of the other's.
 * Every row is computed the same way whichever thread takes it. */
enum { ROW_UNITS = 8, ROW_UNIT_MIN = 8192 };
static void row_walk(tp_range_walk *w, int64_t rows, int64_t n, const tp_exec *ex) {
    tp__range_walk_init(w, ex->claims, ex->ith, ex->nth, rows, 1, n, ROW_UNIT_MIN, ROW_UNITS);
}

/* plan->i: [0] rows, [1] n, [2] mode/flags; plan->f[0] eps */

/* ---- softmax / log_softmax over the last dim ---------------------------- */

/* An output past tp__stream_min_bytes (cpu.h) with rows of at most this
 * many floats is computed a row at a time into an L1 buffer and copied out
 * with non-temporal stores (as the elementwise ops do, fast_eltwise.c): its
 * lines are not read from memory before being overwritten. */
enum { SOFTMAX_STREAM_ROW = 4096 };

static tp_status softmax_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const tp_eltwise_table *tab = plan->fn;
    const float *a = (const float *)tp__tensor_base(in[0]);
    float *o = (float *)tp__tensor_base(out[0]);
    const int64_t n = plan->i[1];
    tp_range_walk w;
    row_walk(&w, plan->i[0], n, ex);
    /* rows up to 64 KiB pull the next one of the piece into cache while computing */
    const bool pf = n <= 16384;
    if (plan->stream_out) { /* rows computed in L1, then stored non-temporally */
        _Alignas(64) float buf[SOFTMAX_STREAM_ROW];
        for (int64_t r = -1, end = 0; tp__range_next_item(&w, &r, &end);) {
            tab->softmax(buf, a + r * n, n, plan->i[2] != 0, pf && r + 1 < end ? a + (r + 1) * n : NULL);
            tab->stream(o + r * n, buf, n);
        }
        tab->stream_fence();
        return TP_OK;
    }
    for (int64_t r = -1, end = 0; tp__range_next_item(&w, &r, &end);)
        tab->softmax(o + r * n, a + r * n, n, plan->i[2] != 0, pf && r + 1 < end ? a + (r + 1) * n : NULL);
    return TP_OK;
}

/* 16-bit rows: plan->i[5] TP_HALF_*, workspace 2 rows of floats a thread
 * (the widened input and the float32 result). */
static size_t half_row_bytes(int64_t n) { return ((size_t)n * sizeof(float) + 63) & ~(size_t)63; }

static tp_status softmax_run_half(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out,
                                  const tp_exec *ex) {
    const tp_eltwise_table *tab = plan->fn;
    const int kind = (int)plan->i[5];
    const uint16_t *a = (const uint16_t *)tp__tensor_base(in[0]);
    uint16_t *o = (uint16_t *)tp__tensor_base(out[0]);
    const int64_t n = plan->i[1];
    tp_range_walk w;
    row_walk(&w, plan->i[0], n, ex);
    float *x = (float *)((char *)ex->workspace + (size_t)ex->ith * 2 * half_row_bytes(n));
    float *y = (float *)((char *)x + half_row_bytes(n));
    for (int64_t r = -1, end = 0; tp__range_next_item(&w, &r, &end);) {
        tp__half_widen(a + r * n, n, kind, x);
        tab->softmax(y, x, n, plan->i[2] != 0, NULL);
        tp__half_round(y, n, kind, o + r * n);
    }
    return TP_OK;
}

static tp_status softmax_like(const tp_prepare_info *info, const tp_value *bound, const tp_value *out, tp_op_plan *plan,
                              bool log) {
    tp_tensor *x = tp__arg_tensor(bound, 0), *o = tp__fast_out(out);
    if (!x || !o || x->dtype != o->dtype || !tp_tensor_is_contiguous(x) || x->ndim < 1) return TP_ERR_UNSUPPORTED;
    const int half = tp__half_kind(x->dtype, info->cpu_level);
    if (x->dtype != TP_FLOAT32 && half < 0) return TP_ERR_UNSUPPORTED;
    int dim;
    if (tp__wrap_dim(tp__arg_int(bound, 1), x->ndim, &dim) != TP_OK) {
        tp_clear_error();
        return TP_ERR_UNSUPPORTED;
    }
    if (dim != x->ndim - 1) return TP_ERR_UNSUPPORTED;
    int64_t n = x->sizes[dim], rows = n ? tp_tensor_numel(x) / n : 0;
    if (n == 0) return TP_ERR_UNSUPPORTED;
    plan->i[0] = rows;
    plan->i[1] = n;
    plan->i[2] = log;
    plan->fn = tp__eltwise_table(info->cpu_level);
    plan->variant = level_name(info->cpu_level);
    plan->run = softmax_run;
    plan->stream_out = n <= SOFTMAX_STREAM_ROW && sat_mul(tp_tensor_numel(o), 4) >= tp__stream_min_bytes();
    plan->max_threads = row_threads(rows, sat_mul(n, 4), info->max_threads);
    plan->inplace_ok = !log; /* log_softmax reads its input again after writing exp() to the output */
    if (half >= 0) {
        plan->i[5] = half;
        plan->run = softmax_run_half;
        plan->stream_out = false;
        plan->inplace_ok = true; /* each row is read whole before it is written */
        plan->workspace = (size_t)plan->max_threads * 2 * half_row_bytes(n);
    }
    return TP_OK;
}

static tp_status softmax_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,
                                 tp_op_plan *plan) {
    return softmax_like(info, bound, out, plan, false);
}
static tp_status log_softmax_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,
                                     tp_op_plan *plan) {
    return softmax_like(info, bound, out, plan, true);
}

/* ---- layer_norm(input, normalized_shape, weight=None, bias=None, eps) ---- */

static tp_status layer_norm_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out,
                                const tp_exec *ex) {
    const tp_eltwise_table *tab = plan->fn;
    const float *a = (const float *)tp__tensor_base(in[0]);
    const float *w = plan->i[3] >= 0 ? (const float *)tp__tensor_base(in[plan->i[3]]) : NULL;
    const float *b = plan->i[4] >= 0 ? (const float *)tp__tensor_base(in[plan->i[4]]) : NULL;
    float *o = (float *)tp__tensor_base(out[0]);
    const int64_t n = plan->i[1];
    tp_range_walk rw;
    row_walk(&rw, plan->i[0], n, ex);
    for (int64_t r = -1, end = 0; tp__range_next_item(&rw, &r, &end);)
        tab->layer_norm(o + r * n, a + r * n, n, w, b, (float)plan->f[0]);
    return TP_OK;
}

/* 16-bit: weight and bias widened once per call into the thread's
 * workspace, then rows as softmax's. */
static tp_status layer_norm_run_half(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out,
                                     const tp_exec *ex) {
    const tp_eltwise_table *tab = plan->fn;
    const int kind = (int)plan->i[5];
    const uint16_t *a = (const uint16_t *)tp__tensor_base(in[0]);
    uint16_t *o = (uint16_t *)tp__tensor_base(out[0]);
    const int64_t n = plan->i[1];
    tp_range_walk rw;
    row_walk(&rw, plan->i[0], n, ex);
    int64_t r, end;
    if (!tp__range_next(&rw, &r, &end)) return TP_OK; /* no rows for this thread */
    const size_t row = half_row_bytes(n);
    float *x = (float *)((char *)ex->workspace + (size_t)ex->ith * 4 * row);
    float *y = (float *)((char *)x + row), *w = NULL, *b = NULL;
    if (plan->i[3] >= 0) {
        w = (float *)((char *)x + 2 * row);
        tp__half_widen((const uint16_t *)tp__tensor_base(in[plan->i[3]]), n, kind, w);
    }
    if (plan->i[4] >= 0) {
        b = (float *)((char *)x + 3 * row);
        tp__half_widen((const uint16_t *)tp__tensor_base(in[plan->i[4]]), n, kind, b);
    }
    /* the first piece is [r, end): step back one so that the item walk starts at r */
    for (r--; tp__range_next_item(&rw, &r, &end);) {
        tp__half_widen(a + r * n, n, kind, x);
        tab->layer_norm(y, x, n, w, b, (float)plan->f[0]);
        tp__half_round(y, n, kind, o + r * n);
    }
    return TP_OK;
}

static tp_status layer_norm_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,
                                    tp_op_plan *plan) {
    tp_tensor *x = tp__arg_tensor(bound, 0), *w = tp__arg_tensor(bound, 2), *b = tp__arg_tensor(bound, 3), *o = tp__fast_out(out);
    if (!x || !o || o->dtype != x->dtype || !tp_tensor_is_contiguous(x)) return TP_ERR_UNSUPPORTED;
    const int half = tp__half_kind(x->dtype, info->cpu_level);
    if (x->dtype != TP_FLOAT32 && half < 0) return TP_ERR_UNSUPPORTED;
    int64_t shape[TP_MAX_DIMS];
    int ns;
    if (tp__arg_ints(bound, 1, "normalized_shape", shape, TP_MAX_DIMS, 0, &ns) != TP_OK) {
        tp_clear_error();
        return TP_ERR_UNSUPPORTED;
    }
    if (ns < 1 || ns > x->ndim) return TP_ERR_UNSUPPORTED;
    int64_t n = 1;
    for (int k = 0; k < ns; k++) {
        if (x->sizes[x->ndim - ns + k] != shape[k]) return TP_ERR_UNSUPPORTED;
        n *= shape[k];
    }
    const tp_tensor *aff[2] = {w, b};
    for (int k = 0; k < 2; k++)
        if (aff[k] && (aff[k]->dtype != x->dtype || !tp_tensor_is_contiguous(aff[k]) || tp_tensor_numel(aff[k]) != n))
            return TP_ERR_UNSUPPORTED;
    if (n == 0) return TP_ERR_UNSUPPORTED;
    int leaf = 1;
    plan->i[0] = tp_tensor_numel(x) / n;
    plan->i[1] = n;
    plan->i[3] = w ? leaf++ : -1;
    plan->i[4] = b ? leaf++ : -1;
    plan->f[0] = tp__arg_f64(bound, 4);
    plan->fn = tp__eltwise_table(info->cpu_level);
    plan->variant = level_name(info->cpu_level);
    plan->run = layer_norm_run;
    plan->max_threads = row_threads(plan->i[0], sat_mul(n, 4), info->max_threads);
    plan->inplace_ok = true;
    if (half >= 0) {
        plan->i[5] = half;
        plan->run = layer_norm_run_half;
        plan->workspace = (size_t)plan->max_threads * 4 * half_row_bytes(n);
    }
    return TP_OK;
}

/* ---- batch_norm in eval mode: y = x * scale[c] + shift[c] ---------------- */

typedef struct bn_plan {
    int64_t n, c, inner;
    int imean, ivar, iw, ib; /* leaf indices (-1 none) */
    float eps;
    float *scale, *shift;    /* precomputed when every parameter is constant */
} bn_plan;

static void bn_free(void *data) {
    bn_plan *bp = data;
    if (!bp) return;
    tp_free(bp->scale);
    tp_free(bp);
}

static void bn_coeffs(const bn_plan *bp, tp_tensor *const *in, int64_t c, float *scale, float *shift) {
    float mean = ((const float *)tp__tensor_base(in[bp->imean]))[c];
    float var = ((const float *)tp__tensor_base(in[bp->ivar]))[c];
    float w = bp->iw >= 0 ? ((const float *)tp__tensor_base(in[bp->iw]))[c] : 1.0f;
    float b = bp->ib >= 0 ? ((const float *)tp__tensor_base(in[bp->ib]))[c] : 0.0f;
    float inv = 1.0f / sqrtf(var + bp->eps);
    *scale = w * inv;
    *shift = b - mean * w * inv;
}

static tp_status bn_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const tp_eltwise_table *tab = plan->fn;
    const bn_plan *bp = plan->data;
    const float *a = (const float *)tp__tensor_base(in[0]);
    float *o = (float *)tp__tensor_base(out[0]);
    tp_range_walk w;
    row_walk(&w, sat_mul(bp->n, bp->c), bp->inner, ex);
    for (int64_t r = -1, end = 0; tp__range_next_item(&w, &r, &end);) {
        int64_t c = r % bp->c;
        float scale, shift;
        if (bp->scale) {
            scale = bp->scale[c];
            shift = bp->shift[c];
        } else {
            bn_coeffs(bp, in, c, &scale, &shift);
        }
        tab->scale_shift(o + r * bp->inner, a + r * bp->inner, bp->inner, scale, shift);
    }
    return TP_OK;
}

static tp_status batch_norm_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,
                                    tp_op_plan *plan) {
    tp_tensor *x = tp__arg_tensor(bound, 0), *o = tp__fast_out(out);
    if (!x || !o || x->dtype != TP_FLOAT32 || x->ndim < 2 || !tp_tensor_is_contiguous(x) || tp__arg_bool(bound, 5))
        return TP_ERR_UNSUPPORTED;
    tp_tensor *p[4];
    int idx[4], leaf = 1;
    bool all_const = true;
    for (int k = 0; k < 4; k++) {
        p[k] = tp__arg_tensor(bound, 1 + k);
        idx[k] = p[k] ? leaf++ : -1;
        if (p[k] && (p[k]->dtype != TP_FLOAT32 || p[k]->ndim != 1 || p[k]->sizes[0] != x->sizes[1] ||
                     p[k]->strides[0] != 1))
            return TP_ERR_UNSUPPORTED;
        if (p[k] && !info->is_const[idx[k]]) all_const = false;
    }
    if (!p[0] || !p[1]) return TP_ERR_UNSUPPORTED; /* eval mode needs running statistics */
    bn_plan *bp = tp_calloc(1, sizeof *bp);
    TP_CHECK(bp != NULL, TP_ERR_NOMEM, "out of memory preparing batch_norm");
    bp->n = x->sizes[0];
    bp->c = x->sizes[1];
    bp->inner = (bp->n != 0 && bp->c != 0) ? tp_tensor_numel(x) / (bp->n * bp->c) : 0;
    bp->imean = idx[0];
    bp->ivar = idx[1];
    bp->iw = idx[2];
    bp->ib = idx[3];
    bp->eps = (float)tp__arg_f64(bound, 7);
    plan->data = bp;
    plan->free_data = bn_free;
    if (all_const) {
        bp->scale = tp_malloc((size_t)(2 * bp->c + 1) * sizeof(float));
        TP_CHECK(bp->scale != NULL, TP_ERR_NOMEM, "out of memory preparing batch_norm");
        bp->shift = bp->scale + bp->c;
        tp_tensor *leaves[5] = {x, p[0], p[1], p[2], p[3]};
        tp_tensor *in[5];
        int n = 0;
        for (int k = 0; k < 5; k++)
            if (leaves[k]) in[n++] = leaves[k];
        for (int64_t c = 0; c < bp->c; c++) bn_coeffs(bp, in, c, &bp->scale[c], &bp->shift[c]);
        plan->data_bytes = (size_t)(2 * bp->c) * sizeof(float);
        plan->channel_scale = bp->scale;
        plan->channel_shift = bp->shift;
        plan->channels = bp->c;
    }
    plan->fn = tp__eltwise_table(info->cpu_level);
    plan->variant = level_name(info->cpu_level);
    plan->run = bn_run;
    plan->max_threads = row_threads(bp->n * bp->c, bp->inner, info->max_threads);
    plan->inplace_ok = true;
    return TP_OK;
}

/* ---- group_norm(input, num_groups, weight=None, bias=None, eps) ---------
 * A group of a contiguous [N, C, *] input is one contiguous block of
 * C/G * inner floats: mean and variance (two passes, 64 partial sums), then
 * a scale and shift per channel. plan->i: [0] N*G blocks, [1] C/G, [2]
 * inner, [3] G, [4]/[5] leaf of weight/bias or -1. */
static tp_status group_norm_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out,
                                const tp_exec *ex) {
    const tp_eltwise_table *tab = plan->fn;
    const float *a = (const float *)tp__tensor_base(in[0]);
    const float *w = plan->i[4] >= 0 ? (const float *)tp__tensor_base(in[plan->i[4]]) : NULL;
    const float *b = plan->i[5] >= 0 ? (const float *)tp__tensor_base(in[plan->i[5]]) : NULL;
    float *o = (float *)tp__tensor_base(out[0]);
    int64_t cpg = plan->i[1], inner = plan->i[2], groups = plan->i[3], n = cpg * inner;
    tp_range_walk rw;
    row_walk(&rw, plan->i[0], n, ex);
    for (int64_t blk = -1, end = 0; tp__range_next_item(&rw, &blk, &end);) {
        const float *x = a + blk * n;
        float *y = o + blk * n;
        float mean, rstd;
        tab->moments(x, n, (float)plan->f[0], &mean, &rstd);
        int64_t c0 = (blk % groups) * cpg;
        for (int64_t c = 0; c < cpg; c++) {
            float sc = rstd * (w ? w[c0 + c] : 1.0f);
            float sh = (b ? b[c0 + c] : 0.0f) - mean * sc;
            tab->scale_shift(y + c * inner, x + c * inner, inner, sc, sh);
        }
    }
    return TP_OK;
}

static tp_status group_norm_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,
                                    tp_op_plan *plan) {
    tp_tensor *x = tp__arg_tensor(bound, 0), *w = tp__arg_tensor(bound, 2), *b = tp__arg_tensor(bound, 3), *o = tp__fast_out(out);
    if (!x || !o || x->dtype != TP_FLOAT32 || x->ndim < 2 || !tp_tensor_is_contiguous(x)) return TP_ERR_UNSUPPORTED;
    int64_t groups = tp__arg_int(bound, 1), c = x->sizes[1];
    if (groups <= 0 || c % groups != 0 || tp_tensor_numel(x) == 0) return TP_ERR_UNSUPPORTED;
    const tp_tensor *aff[2] = {w, b};
    for (int k = 0; k < 2; k++)
        if (aff[k] && (aff[k]->dtype != TP_FLOAT32 || aff[k]->ndim != 1 || aff[k]->sizes[0] != c || aff[k]->strides[0] != 1))
            return TP_ERR_UNSUPPORTED;
    int leaf = 1;
    plan->i[0] = x->sizes[0] * groups;
    plan->i[1] = c / groups;
    plan->i[2] = tp_tensor_numel(x) / (x->sizes[0] * c);
    plan->i[3] = groups;
    plan->i[4] = w ? leaf++ : -1;
    plan->i[5] = b ? leaf++ : -1;
    plan->f[0] = tp__arg_f64(bound, 4);
    plan->fn = tp__eltwise_table(info->cpu_level);
    plan->variant = level_name(info->cpu_level);
    plan->run = group_norm_run;
    plan->max_threads = row_threads(plan->i[0], sat_mul(sat_mul(plan->i[1], plan->i[2]), 2), info->max_threads);
    return TP_OK;
}

/* ---- sum / mean / amax over trailing dims of a contiguous tensor --------- */

static tp_status reduce_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const tp_eltwise_table *tab = plan->fn;
    const float *a = (const float *)tp__tensor_base(in[0]);
    float *o = (float *)tp__tensor_base(out[0]);
    const int64_t n = plan->i[1];
    tp_range_walk w;
    row_walk(&w, plan->i[0], n, ex);
    int mode = (int)plan->i[2];
    for (int64_t r = -1, end = 0; tp__range_next_item(&w, &r, &end);) {
        if (mode == 2) o[r] = tab->max(a + r * n, n);
        else {
            float s = tab->sum(a + r * n, n);
            o[r] = mode == 1 ? s / (float)n : s;
        }
    }
    return TP_OK;
}

/* 16-bit rows (plan->i[5] TP_HALF_*): widened a block of 1024 at a time
 * into an L1 buffer, the blocks' sums (maxima) combined in float32 in
 * order, the result rounded once. */
static tp_status reduce_run_half(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out,
                                 const tp_exec *ex) {
    enum { STEP = 1024 };
    const tp_eltwise_table *tab = plan->fn;
    const int kind = (int)plan->i[5], mode = (int)plan->i[2];
    const uint16_t *a = (const uint16_t *)tp__tensor_base(in[0]);
    uint16_t *o = (uint16_t *)tp__tensor_base(out[0]);
    const int64_t n = plan->i[1];
    tp_range_walk w;
    row_walk(&w, plan->i[0], n, ex);
    _Alignas(64) float buf[STEP];
    for (int64_t r = -1, end = 0; tp__range_next_item(&w, &r, &end);) {
        float acc = 0.0f;
        for (int64_t q = 0; q < n; q += STEP) {
            const int64_t m = n - q < STEP ? n - q : STEP;
            tp__half_widen(a + r * n + q, m, kind, buf);
            if (mode == 2) {
                const float v = tab->max(buf, m);
                if (q == 0 || (acc == acc && (v > acc || v != v))) acc = v; /* a NaN stays */
            } else {
                acc += tab->sum(buf, m);
            }
        }
        if (mode == 1) acc /= (float)n;
        tp__half_round(&acc, 1, kind, o + r);
    }
    return TP_OK;
}

static tp_status reduce_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,
                                tp_op_plan *plan, int mode) {
    tp_tensor *x = tp__arg_tensor(bound, 0), *o = tp__fast_out(out);
    if (!x || !o || x->dtype != o->dtype || !tp_tensor_is_contiguous(x)) return TP_ERR_UNSUPPORTED;
    const int half = tp__half_kind(x->dtype, info->cpu_level);
    if (x->dtype != TP_FLOAT32 && half < 0) return TP_ERR_UNSUPPORTED;
    if (mode != 2 && !tp__arg_is_none(bound, 3)) return TP_ERR_UNSUPPORTED; /* dtype= */
    int64_t dims[TP_MAX_DIMS];
    int nd;
    if (tp__arg_is_none(bound, 1)) return TP_ERR_UNSUPPORTED;
    if (tp__arg_ints(bound, 1, "dim", dims, TP_MAX_DIMS, 0, &nd) != TP_OK) {
        tp_clear_error();
        return TP_ERR_UNSUPPORTED;
    }
    if (nd == 0) return TP_ERR_UNSUPPORTED;
    bool reduced[TP_MAX_DIMS] = {false};
    for (int k = 0; k < nd; k++) {
        int d;
        if (tp__wrap_dim(dims[k], x->ndim, &d) != TP_OK) {
            tp_clear_error();
            return TP_ERR_UNSUPPORTED;
        }
        reduced[d] = true;
    }
    /* the reduced dims must be the trailing ones */
    int first = x->ndim;
    while (first > 0 && reduced[first - 1]) first--;
    for (int d = 0; d < first; d++)
        if (reduced[d]) return TP_ERR_UNSUPPORTED;
    /* empty: nothing to run fast (and the trailing dims of an empty tensor
     * may multiply past int64) */
    if (tp_tensor_numel(x) == 0) return TP_ERR_UNSUPPORTED;
    int64_t n = 1;
    for (int d = first; d < x->ndim; d++) n *= x->sizes[d];
    plan->i[0] = tp_tensor_numel(x) / n;
    plan->i[1] = n;
    plan->i[2] = mode;
    plan->fn = tp__eltwise_table(info->cpu_level);
    plan->variant = level_name(info->cpu_level);
    plan->run = reduce_run;
    plan->max_threads = row_threads(plan->i[0], n, info->max_threads);
    if (half >= 0) {
        plan->i[5] = half;
        plan->run = reduce_run_half;
    }
    return TP_OK;
}

static tp_status sum_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out, tp_op_plan *plan) {
    return reduce_prepare(info, bound, out, plan, 0);
}
static tp_status mean_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out, tp_op_plan *plan) {
    return reduce_prepare(info, bound, out, plan, 1);
}
static tp_status amax_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out, tp_op_plan *plan) {
    return reduce_prepare(info, bound, out, plan, 2);
}

/* ---- max_pool2d(self, kernel_size, stride=[], padding=0, dilation=1, ceil_mode) ---- */

/* NaN-propagating max; `|`, not `||`, so the loops using it vectorise. */
static inline float nanmax(float m, float v) { return ((v > m) | (v != v)) ? v : m; }

/* dst[ox] = max(dst[ox], src[ox * sw]) for ox in [lo, hi), NaN propagating */
static void max_row(float *restrict dst, const float *restrict src, int64_t lo, int64_t hi, int64_t sw) {
    if (sw == 1) {
        for (int64_t ox = lo; ox < hi; ox++) dst[ox] = nanmax(dst[ox], src[ox]);
    } else {
        for (int64_t ox = lo; ox < hi; ox++) dst[ox] = nanmax(dst[ox], src[ox * sw]);
    }
}

/* The common 2x2 window, stride 2, no padding or dilation: one output row
 * from two input rows in one pass. The comparison order is the reference's
 * (taps in row-major order), so NaN choices match. */
static void max_row_2x2(float *restrict dst, const float *restrict r0, const float *restrict r1, int64_t ow) {
    for (int64_t ox = 0; ox < ow; ox++) {
        float m = nanmax(-INFINITY, r0[2 * ox]);
        m = nanmax(m, r0[2 * ox + 1]);
        m = nanmax(m, r1[2 * ox]);
        dst[ox] = nanmax(m, r1[2 * ox + 1]);
    }
}

/* One plane of a max pool: src h x w, dst oh x ow (q: plan->i). */
static void maxpool_plane(const int64_t *q, const float *src, float *dst) {
    int64_t h = q[0], w = q[1], oh = q[2], ow = q[3], sw = q[7];
    {
        bool two = q[4] == 2 && q[5] == 2 && q[6] == 2 && sw == 2 && q[8] == 0 && q[9] == 0 && q[10] == 1 &&
                   q[11] == 1;
        for (int64_t y = 0; y < oh; y++) {
            float *row = dst + y * ow;
            if (two && 2 * y + 1 < h && 2 * ow <= w) {
                max_row_2x2(row, src + 2 * y * w, src + (2 * y + 1) * w, ow);
                continue;
            }
            for (int64_t x = 0; x < ow; x++) row[x] = -INFINITY;
            for (int64_t i = 0; i < q[4]; i++) {
                int64_t yy = y * q[6] - q[8] + i * q[10];
                if (yy < 0 || yy >= h) continue;
                const float *srow = src + yy * w;
                for (int64_t j = 0; j < q[5]; j++) {
                    int64_t off = j * q[11] - q[9]; /* input column of output column 0 */
                    /* ceil(-off / sw) without overflow for huge strides */
                    int64_t l = off < 0 ? (-off - 1) / sw + 1 : 0;
                    int64_t r = w - 1 - off < 0 ? 0 : (w - 1 - off) / sw + 1;
                    if (r > ow) r = ow;
                    if (l < r) max_row(row, srow + off, l, r, sw);
                }
            }
        }
    }
}

static tp_status maxpool_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const int64_t *q = plan->i; /* h w oh ow kh kw sh sw ph pw dh dw planes */
    const float *a = (const float *)tp__tensor_base(in[0]);
    float *o = (float *)tp__tensor_base(out[0]);
    tp_range_walk w;
    row_walk(&w, q[12], sat_mul(q[0], q[1]), ex);
    for (int64_t pl = -1, end = 0; tp__range_next_item(&w, &pl, &end);)
        maxpool_plane(q, a + pl * q[0] * q[1], o + pl * q[2] * q[3]);
    return TP_OK;
}

bool tp__maxpool_info(const tp_op_plan *plan, int64_t q[12]) {
    if (plan->run != maxpool_run) return false;
    memcpy(q, plan->i, 12 * sizeof *q);
    return true;
}

/* ---- avg_pool2d / adaptive_avg_pool2d ---------------------------------- */

/* plan->i: 0..11 as max pooling (h, w, oh, ow, kh, kw, sh, sw, ph, pw, 1, 1),
 * 12 planes, 13 count_include_pad, 14 divisor override (0 none),
 * 15 adaptive (windows [floor(o*in/out), ceil((o+1)*in/out))). */
enum { AP_PLANES = 12, AP_INCLUDE = 13, AP_DIVISOR = 14, AP_ADAPTIVE = 15 };

/* Window of output o along an axis: [*lo, *hi) inside the input and the
 * divisor's length with padding (PyTorch's rules, as the reference). */
static void avg_axis(const int64_t *q, int axis, int64_t o, int64_t *lo, int64_t *hi, int64_t *padded) {
    int64_t in = q[axis], out = q[2 + axis], k = q[4 + axis], s = q[6 + axis], p = q[8 + axis];
    if (q[AP_ADAPTIVE]) {
        *lo = (o * in) / out;
        *hi = ((o + 1) * in + out - 1) / out;
        *padded = *hi - *lo;
        return;
    }
    int64_t start = o * s - p, end = start + k;
    if (end > in + p) end = in + p;
    *padded = end - start;
    *lo = start < 0 ? 0 : start;
    *hi = end > in ? in : end;
}

/* One plane of an average pool: src h x w, dst oh x ow (q: plan->i). */
static void avgpool_plane(const int64_t *q, const float *src, float *dst) {
    int64_t w = q[1], oh = q[2], ow = q[3];
    {
        for (int64_t oy = 0; oy < oh; oy++) {
            int64_t y0, y1, ylen;
            avg_axis(q, 0, oy, &y0, &y1, &ylen);
            for (int64_t ox = 0; ox < ow; ox++) {
                int64_t x0, x1, xlen;
                avg_axis(q, 1, ox, &x0, &x1, &xlen);
                float sum = 0.0f;
                for (int64_t iy = y0; iy < y1; iy++) {
                    const float *row = src + iy * w;
                    for (int64_t ix = x0; ix < x1; ix++) sum += row[ix];
                }
                int64_t div = q[AP_DIVISOR] ? q[AP_DIVISOR] : q[AP_INCLUDE] ? ylen * xlen : (y1 - y0) * (x1 - x0);
                dst[oy * ow + ox] = y0 < y1 && x0 < x1 ? sum / (float)div : 0.0f;
            }
        }
    }
}

static tp_status avgpool_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const int64_t *q = plan->i;
    const float *x = (const float *)tp__tensor_base(in[0]);
    float *y = (float *)tp__tensor_base(out[0]);
    tp_range_walk w;
    row_walk(&w, q[AP_PLANES], sat_mul(q[0], q[1]), ex);
    for (int64_t pl = -1, end = 0; tp__range_next_item(&w, &pl, &end);)
        avgpool_plane(q, x + pl * q[0] * q[1], y + pl * q[2] * q[3]);
    return TP_OK;
}

/* 16-bit pools (plan->i[P_HALF] TP_HALF_*, [P_HALF + 1] 1 for average):
 * each plane widened into the thread's workspace, pooled in float32 into
 * the workspace, rounded into the output (a max is exact either way). */
enum { P_HALF = 16 };

static size_t pool_half_bytes(const int64_t *q, size_t *in_bytes) {
    *in_bytes = ((size_t)(q[0] * q[1]) * sizeof(float) + 63) & ~(size_t)63;
    return *in_bytes + (((size_t)(q[2] * q[3]) * sizeof(float) + 63) & ~(size_t)63);
}

static tp_status pool_run_half(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const int64_t *q = plan->i;
    const int kind = (int)q[P_HALF];
    const uint16_t *x = (const uint16_t *)tp__tensor_base(in[0]);
    uint16_t *y = (uint16_t *)tp__tensor_base(out[0]);
    size_t in_bytes, per = pool_half_bytes(q, &in_bytes);
    float *xin = (float *)((char *)ex->workspace + (size_t)ex->ith * per), *dst = (float *)((char *)xin + in_bytes);
    const int64_t hw = sat_mul(q[0], q[1]), np = sat_mul(q[2], q[3]);
    tp_range_walk w;
    row_walk(&w, q[q[P_HALF + 1] ? AP_PLANES : 12], hw, ex);
    for (int64_t pl = -1, end = 0; tp__range_next_item(&w, &pl, &end);) {
        tp__half_widen(x + pl * hw, hw, kind, xin);
        if (q[P_HALF + 1]) avgpool_plane(q, xin, dst);
        else maxpool_plane(q, xin, dst);
        tp__half_round(dst, np, kind, y + pl * np);
    }
    return TP_OK;
}

/* Makes a pool plan of x's dtype its 16-bit form (or leaves a float32 one). */
static tp_status pool_half(const tp_prepare_info *info, const tp_tensor *x, tp_op_plan *plan, bool avg) {
    const int half = tp__half_kind(x->dtype, info->cpu_level);
    if (half < 0) return TP_OK;
    plan->i[P_HALF] = half;
    plan->i[P_HALF + 1] = avg;
    size_t in_bytes;
    plan->workspace = pool_half_bytes(plan->i, &in_bytes) * (size_t)plan->max_threads;
    plan->run = pool_run_half;
    return TP_OK;
}

bool tp__avgpool_info(const tp_op_plan *plan, int64_t q[12], bool *include_pad, bool *exact) {
    if (plan->run != avgpool_run) return false;
    const int64_t *p = plan->i;
    memcpy(q, p, 12 * sizeof *q);
    *include_pad = p[AP_INCLUDE] != 0;
    /* oneDNN divides by the whole window (include) or the part inside the
     * input (exclude): PyTorch agrees unless a divisor is given or a
     * ceil-mode window runs past the right padding */
    *exact = p[AP_DIVISOR] == 0;
    if (p[AP_ADAPTIVE]) *exact = *exact && p[0] % p[2] == 0 && p[1] % p[3] == 0;
    for (int a = 0; a < 2 && *exact && !p[AP_ADAPTIVE]; a++)
        if (*include_pad && (p[2 + a] - 1) * p[6 + a] + p[4 + a] > p[a] + 2 * p[8 + a]) *exact = false;
    if (p[AP_ADAPTIVE]) { /* equal windows: kernel = stride = in / out */
        q[4] = q[6] = p[0] / p[2];
        q[5] = q[7] = p[1] / p[3];
    }
    return true;
}

static tp_status avgpool_common(const tp_prepare_info *info, const tp_tensor *x, const tp_tensor *o, tp_op_plan *plan) {
    int64_t *q = plan->i;
    q[0] = x->sizes[x->ndim - 2];
    q[1] = x->sizes[x->ndim - 1];
    q[2] = o->sizes[o->ndim - 2];
    q[3] = o->sizes[o->ndim - 1];
    q[10] = q[11] = 1;
    /* a nonzero element count bounds q[0] * q[1] (an empty input may have huge dims) */
    q[AP_PLANES] = tp_tensor_numel(x) != 0 ? tp_tensor_numel(x) / (q[0] * q[1]) : 0;
    plan->run = avgpool_run;
    plan->variant = level_name(info->cpu_level);
    plan->max_threads = row_threads(q[AP_PLANES], sat_mul(sat_mul(q[2], q[3]), 4), info->max_threads);
    return pool_half(info, x, plan, true);
}

/* A pool's input: float32, or bfloat16 / float16 with elements (then its
 * planes are sized by real data, not a meta tensor's huge empty dims). */
static bool pool_dtype_ok(const tp_prepare_info *info, const tp_tensor *x, const tp_tensor *o) {
    if (x->dtype != o->dtype) return false;
    return x->dtype == TP_FLOAT32 || (tp__half_kind(x->dtype, info->cpu_level) >= 0 && tp_tensor_numel(x) > 0);
}

/* avg_pool2d(self, kernel_size, stride=[], padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None) */
static tp_status avg_pool2d_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,
                                    tp_op_plan *plan) {
    tp_tensor *x = tp__arg_tensor(bound, 0), *o = tp__fast_out(out);
    if (!x || !o || !pool_dtype_ok(info, x, o) || (x->ndim != 4 && x->ndim != 3) || !tp_tensor_is_contiguous(x))
        return TP_ERR_UNSUPPORTED;
    int64_t k[2], s[2], p[2];
    int n;
    if (tp__arg_ints(bound, 1, "kernel_size", k, 2, 2, &n) != TP_OK) goto decline;
    if (tp_value_len(&bound[2]) == 0 && bound[2].kind != TP_VAL_INT) {
        s[0] = k[0];
        s[1] = k[1];
    } else if (tp__arg_ints(bound, 2, "stride", s, 2, 2, &n) != TP_OK) goto decline;
    if (tp__arg_ints(bound, 3, "padding", p, 2, 2, &n) != TP_OK) goto decline;
    int64_t *q = plan->i;
    q[4] = k[0], q[5] = k[1], q[6] = s[0], q[7] = s[1], q[8] = p[0], q[9] = p[1];
    q[AP_INCLUDE] = tp__arg_bool(bound, 5);
    q[AP_DIVISOR] = tp__arg_is_none(bound, 6) ? 0 : tp__arg_int(bound, 6);
    return avgpool_common(info, x, o, plan);
decline:
    tp_clear_error();
    return TP_ERR_UNSUPPORTED;
}

/* adaptive_avg_pool2d(self, output_size) */
static tp_status adaptive_avg_pool2d_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,
                                             tp_op_plan *plan) {
    tp_tensor *x = tp__arg_tensor(bound, 0), *o = tp__fast_out(out);
    if (!x || !o || !pool_dtype_ok(info, x, o) || (x->ndim != 4 && x->ndim != 3) || !tp_tensor_is_contiguous(x))
        return TP_ERR_UNSUPPORTED;
    if (o->sizes[o->ndim - 2] < 1 || o->sizes[o->ndim - 1] < 1) return TP_ERR_UNSUPPORTED;
    plan->i[AP_ADAPTIVE] = 1;
    return avgpool_common(info, x, o, plan);
}

static tp_status max_pool2d_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,
                                    tp_op_plan *plan) {
    tp_tensor *x = tp__arg_tensor(bound, 0), *o = tp__fast_out(out);
    if (!x || !o || !pool_dtype_ok(info, x, o) || (x->ndim != 4 && x->ndim != 3) || !tp_tensor_is_contiguous(x))
        return TP_ERR_UNSUPPORTED;
    int64_t k[2], s[2], p[2], d[2];
    int n;
    if (tp__arg_ints(bound, 1, "kernel_size", k, 2, 2, &n) != TP_OK) goto decline;
    if (tp_value_len(&bound[2]) == 0) {
        s[0] = k[0];
        s[1] = k[1];
    } else if (tp__arg_ints(bound, 2, "stride", s, 2, 2, &n) != TP_OK) goto decline;
    if (tp__arg_ints(bound, 3, "padding", p, 2, 2, &n) != TP_OK) goto decline;
    if (tp__arg_ints(bound, 4, "dilation", d, 2, 2, &n) != TP_OK) goto decline;
    int64_t *q = plan->i;
    q[0] = x->sizes[x->ndim - 2];
    q[1] = x->sizes[x->ndim - 1];
    q[2] = o->sizes[o->ndim - 2];
    q[3] = o->sizes[o->ndim - 1];
    q[4] = k[0], q[5] = k[1], q[6] = s[0], q[7] = s[1], q[8] = p[0], q[9] = p[1], q[10] = d[0], q[11] = d[1];
    q[12] = tp_tensor_numel(x) != 0 ? tp_tensor_numel(x) / (q[0] * q[1]) : 0; /* as in avgpool_common */
    plan->run = maxpool_run;
    plan->variant = level_name(info->cpu_level);
    plan->max_threads = row_threads(q[12], sat_mul(sat_mul(q[2], q[3]), sat_mul(k[0], k[1])), info->max_threads);
    return pool_half(info, x, plan, false);
decline:
    tp_clear_error();
    return TP_ERR_UNSUPPORTED;
}

void tp__register_fast_nn(void) {
    tp__register_variant(TP_OP_SOFTMAX, "rows", TP_CPU_SCALAR, softmax_prepare);
    tp__register_variant(TP_OP_LOG_SOFTMAX, "rows", TP_CPU_SCALAR, log_softmax_prepare);
    tp__register_variant(TP_OP_LAYER_NORM, "rows", TP_CPU_SCALAR, layer_norm_prepare);
    tp__register_variant(TP_OP_BATCH_NORM, "rows", TP_CPU_SCALAR, batch_norm_prepare);
    tp__register_variant(TP_OP_GROUP_NORM, "rows", TP_CPU_SCALAR, group_norm_prepare);
    tp__register_variant(TP_OP_SUM, "rows", TP_CPU_SCALAR, sum_prepare);
    tp__register_variant(TP_OP_MEAN, "rows", TP_CPU_SCALAR, mean_prepare);
    tp__register_variant(TP_OP_AMAX, "rows", TP_CPU_SCALAR, amax_prepare);
    tp__register_variant(TP_OP_MAX_POOL2D, "direct", TP_CPU_SCALAR, max_pool2d_prepare);
    tp__register_variant(TP_OP_AVG_POOL2D, "direct", TP_CPU_SCALAR, avg_pool2d_prepare);
    tp__register_variant(TP_OP_ADAPTIVE_AVG_POOL2D, "direct", TP_CPU_SCALAR, adaptive_avg_pool2d_prepare);
}
