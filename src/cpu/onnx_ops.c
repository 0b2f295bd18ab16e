/*
 * onnx_ops.c - ops added for ONNX import that have no composition from
 * the core ops: topk (values and int64 indices of the k largest or
 * smallest elements along a dim, PyTorch's torch.topk; ties keep the lower
 * index first, as ONNX TopK requires, and NaN counts as the largest value,
 * as in PyTorch); and, sharing its line sorter, sort and argsort. And two
 * with data-dependent output sizes (TP_OPF_DATA_DEPENDENT: the shape rule
 * checks the arguments, then reads the data, or reports TP_ERR_UNSUPPORTED
 * on metadata): non_max_suppression (ONNX NonMaxSuppression) and onnx_range
 * (ONNX Range with run-time start, limit and delta).
 */
#include <inttypes.h>
#include <stdlib.h>

#include "kernel_util.h"

/* ---- topk(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor, Tensor) ---- */

static tp_status topk_check(const tp_value *args, int *dim_out, int64_t *k_out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    TP_CHECK(self->dtype != TP_BOOL, TP_ERR_TYPE, "\"topk_cpu\" not implemented for 'Bool'");
    int nd = self->ndim;
    int dim;
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 2), nd ? nd : 1, &dim));
    int64_t size = nd ? self->sizes[dim] : 1;
    int64_t k = tp__arg_int(args, 1);
    TP_CHECK(k >= 0 && tp__dim_ge(tp__dim_addk(nd ? tp__dim(self, dim) : tp__dimk(1), -k), 0, "k <= the dim"),
             TP_ERR_INDEX, "selected index k out of range (k = %" PRId64 ", size %" PRId64 ")",
             k, size);
    *dim_out = dim;
    *k_out = k;
    return TP_OK;
}

static tp_status topk_infer(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    int dim;
    int64_t k;
    TP_TRY(topk_check(args, &dim, &k));
    tp_sdim sizes[TP_MAX_DIMS];
    tp__dims(self, sizes);
    if (self->ndim) sizes[dim] = tp__dimk(k);
    TP_TRY(tp__out_tuple(out, 2));
    tp_value *items = out->u.seq.items;
    TP_TRY(tp__out_dims(&items[0], self->dtype, self->ndim, sizes));
    TP_TRY(tp__out_dims(&items[1], TP_INT64, self->ndim, sizes));
    return TP_OK;
}

typedef struct topk_item {
    double f;  /* float dtypes */
    int64_t i; /* integer dtypes */
    int64_t index;
} topk_item;

typedef struct topk_order {
    bool is_float;
    bool largest;
} topk_order;

/* Sort order: "better" first; ties by lower index. */
static _Thread_local topk_order g_order;

static int topk_cmp(const void *pa, const void *pb) {
    const topk_item *a = pa, *b = pb;
    int c = 0;
    if (g_order.is_float) {
        bool na = isnan(a->f), nb = isnan(b->f);
        if (na || nb) c = na && nb ? 0 : na ? 1 : -1; /* NaN is the largest */
        else c = a->f < b->f ? -1 : a->f > b->f ? 1 : 0;
    } else {
        c = a->i < b->i ? -1 : a->i > b->i ? 1 : 0;
    }
    if (g_order.largest) c = -c;
    if (c) return c;
    return a->index < b->index ? -1 : a->index > b->index ? 1 : 0;
}

/* The first k of each line of self along dim in sorted order (largest
 * first when `largest`; ties by lower index, so the order is stable) into
 * values (may be NULL) and indices. */
static tp_status sort_lines(const tp_tensor *self, int dim, int64_t k, bool largest, tp_tensor *values,
                            tp_tensor *indices) {
    int nd = self->ndim;
    int64_t size = nd ? self->sizes[dim] : 1, stride = nd ? self->strides[dim] : 0;
    int64_t vstride = nd && values ? values->strides[dim] : 0, istride = nd ? indices->strides[dim] : 0;
    size_t es = tp_dtype_size(self->dtype);
    topk_item *items = tp_malloc((size_t)(size ? size : 1) * sizeof *items);
    TP_CHECK(items, TP_ERR_NOMEM, "out of memory for %" PRId64 " elements", size);
    g_order.is_float = tp_dtype_is_float(self->dtype);
    g_order.largest = largest;
    /* iterate over all positions with dim fixed at 0 */
    int64_t outer_sizes[TP_MAX_DIMS];
    for (int i = 0; i < nd; i++) outer_sizes[i] = i == dim ? 1 : self->sizes[i];
    int64_t n_outer = 1;
    for (int i = 0; i < nd; i++) n_outer *= outer_sizes[i];
    int64_t idx[TP_MAX_DIMS] = {0};
    for (int64_t o = 0; o < n_outer && size > 0; o++) {
        int64_t off_s = 0, off_v = 0, off_i = 0;
        for (int i = 0; i < nd; i++) {
            off_s += idx[i] * self->strides[i];
            if (values) off_v += idx[i] * values->strides[i];
            off_i += idx[i] * indices->strides[i];
        }
        const char *base = tp__tensor_base(self) + off_s * (int64_t)es;
        for (int64_t j = 0; j < size; j++) {
            const char *p = base + j * stride * (int64_t)es;
            items[j].index = j;
            if (g_order.is_float) items[j].f = tp__load_f64(p, self->dtype);
            else items[j].i = tp__load_i64(p, self->dtype);
        }
        qsort(items, (size_t)size, sizeof *items, topk_cmp);
        char *vb = values ? tp__tensor_base(values) + off_v * (int64_t)es : NULL;
        int64_t *ib = (int64_t *)tp__tensor_base(indices) + off_i;
        for (int64_t j = 0; j < k; j++) {
            if (vb) memcpy(vb + j * vstride * (int64_t)es, base + items[j].index * stride * (int64_t)es, es);
            ib[j * istride] = items[j].index;
        }
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < outer_sizes[i]) break;
            idx[i] = 0;
        }
    }
    tp_free(items);
    return TP_OK;
}

static tp_status topk_kernel(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    int dim;
    int64_t k;
    TP_TRY(topk_check(args, &dim, &k));
    return sort_lines(self, dim, k, tp__arg_bool(args, 3), tp__out_at(out, 0), tp__out_at(out, 1));
}

/* ---- sort(Tensor self, int dim=-1, bool descending=False, *, bool? stable=None) -> (Tensor, Tensor) ----
 * ---- argsort(Tensor self, int dim=-1, bool descending=False, *, bool? stable=None) -> Tensor ----
 * Always stable (equal elements keep their order, descending too); NaN
 * sorts as the largest value (last ascending, first descending), as in
 * PyTorch. */

static tp_status sort_infer(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    int dim;
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), self->ndim, &dim));
    TP_TRY(tp__out_tuple(out, 2));
    tp_value *items = out->u.seq.items;
    TP_TRY(tp__out_like(&items[0], self->dtype, self));
    return tp__out_like(&items[1], TP_INT64, self);
}

static tp_status argsort_infer(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    int dim;
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), self->ndim, &dim));
    return tp__out_like(out, TP_INT64, self);
}

static tp_status sort_run(const tp_value *args, tp_tensor *values, tp_tensor *indices) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    TP_TRY(tp__has_data(self, "self"));
    int dim;
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), self->ndim, &dim));
    if (tp_tensor_numel(self) == 0) return TP_OK;
    return sort_lines(self, dim, self->ndim ? self->sizes[dim] : 1, tp__arg_bool(args, 2), values, indices);
}

static tp_status sort_kernel(const tp_value *args, tp_value *out) {
    return sort_run(args, tp__out_at(out, 0), tp__out_at(out, 1));
}

static tp_status argsort_kernel(const tp_value *args, tp_value *out) {
    return sort_run(args, NULL, tp__out_at(out, 0));
}

/* ---- non_max_suppression(Tensor boxes, Tensor scores, Tensor? max_output_boxes_per_class=None,
 *      Tensor? iou_threshold=None, Tensor? score_threshold=None, int center_point_box=0) -> Tensor ----
 * ONNX NonMaxSuppression: boxes [B, N, 4], scores [B, C, N]; per batch, per
 * class, the boxes with score > score_threshold (every box when it is
 * absent), by descending score (ties: lower box index first; NaN scores rank
 * lowest), each kept unless its IoU with a box already kept for that class
 * is > iou_threshold, at most max_output_boxes_per_class (absent or < 0: 0)
 * per class. Output int64 [num_selected, 3] of (batch, class, box), in that
 * order. center_point_box 0: [y1, x1, y2, x2], any two opposite corners;
 * 1: [x_center, y_center, width, height]. Arithmetic in float64. */

typedef struct nms_args {
    const tp_tensor *boxes, *scores;
    int64_t max_out;
    double iou, score;
    bool has_score;
    int center;
} nms_args;

/* One value of an optional one-element argument (*present false when None
 * or empty). */
static tp_status nms_scalar(const tp_value *args, int i, const char *what, bool want_int, double *out,
                            bool *present) {
    const tp_tensor *t = tp__arg_tensor(args, i);
    *present = false;
    if (!t) {
        TP_CHECK(tp__arg_is_none(args, i), TP_ERR_TYPE, "non_max_suppression: %s must be a Tensor or None", what);
        return TP_OK;
    }
    TP_CHECK(want_int ? tp_dtype_is_int(t->dtype) : tp_dtype_is_float(t->dtype), TP_ERR_TYPE,
             "non_max_suppression: %s must be a%s tensor, got %s", what, want_int ? "n integer" : " float",
             tp_dtype_name(t->dtype));
    int64_t n = tp_tensor_numel(t);
    TP_CHECK(n <= 1 && t->ndim <= 1, TP_ERR_SHAPE, "non_max_suppression: %s must hold one value, got %" PRId64 " (rank %d)",
             what, n, t->ndim);
    if (n == 0 || tp_tensor_is_meta(t)) return TP_OK;
    *out = want_int ? (double)tp__load_i64(tp__tensor_base(t), t->dtype) : tp__load_f64(tp__tensor_base(t), t->dtype);
    *present = true;
    return TP_OK;
}

/* Check the arguments; *has_data false when any tensor is metadata. */
static tp_status nms_check(const tp_value *args, nms_args *a, bool *has_data) {
    tp_tensor *boxes, *scores;
    TP_TRY(tp__need_tensor(args, 0, "boxes", &boxes));
    TP_TRY(tp__need_tensor(args, 1, "scores", &scores));
    TP_CHECK(tp_dtype_is_float(boxes->dtype), TP_ERR_TYPE, "non_max_suppression: boxes must be a float tensor, got %s",
             tp_dtype_name(boxes->dtype));
    TP_CHECK(tp_dtype_is_float(scores->dtype), TP_ERR_TYPE,
             "non_max_suppression: scores must be a float tensor, got %s", tp_dtype_name(scores->dtype));
    TP_CHECK(boxes->ndim == 3 && boxes->sizes[2] == 4, TP_ERR_SHAPE,
             "non_max_suppression: boxes must have shape [num_batches, num_boxes, 4], got rank %d%s", boxes->ndim,
             boxes->ndim == 3 ? " with last dim not 4" : "");
    TP_CHECK(scores->ndim == 3, TP_ERR_SHAPE,
             "non_max_suppression: scores must have shape [num_batches, num_classes, num_boxes], got rank %d",
             scores->ndim);
    TP_CHECK(scores->sizes[0] == boxes->sizes[0] && scores->sizes[2] == boxes->sizes[1], TP_ERR_SHAPE,
             "non_max_suppression: scores [%" PRId64 ", %" PRId64 ", %" PRId64 "] do not match boxes [%" PRId64
             ", %" PRId64 ", 4] (num_batches and num_boxes must agree)",
             scores->sizes[0], scores->sizes[1], scores->sizes[2], boxes->sizes[0], boxes->sizes[1]);
    int64_t cpb = tp__arg_int(args, 5);
    TP_CHECK(cpb == 0 || cpb == 1, TP_ERR_INVALID_ARG, "non_max_suppression: center_point_box must be 0 or 1, got %" PRId64,
             cpb);
    a->boxes = boxes;
    a->scores = scores;
    a->center = (int)cpb;
    double v = 0;
    bool present;
    TP_TRY(nms_scalar(args, 2, "max_output_boxes_per_class", true, &v, &present));
    a->max_out = !present || !(v > 0) ? 0 : v >= 9.0e18 ? INT64_MAX : (int64_t)v;
    TP_TRY(nms_scalar(args, 3, "iou_threshold", false, &v, &present));
    a->iou = present ? v : 0.0;
    TP_CHECK(!present || (v >= 0 && v <= 1), TP_ERR_INVALID_ARG,
             "non_max_suppression: iou_threshold must be in [0, 1], got %g", v);
    TP_TRY(nms_scalar(args, 4, "score_threshold", false, &v, &present));
    a->score = v;
    a->has_score = present;
    *has_data = !tp_tensor_is_meta(boxes) && !tp_tensor_is_meta(scores);
    for (int i = 2; i <= 4; i++) {
        const tp_tensor *t = tp__arg_tensor(args, i);
        if (t && tp_tensor_is_meta(t)) *has_data = false;
    }
    return TP_OK;
}

typedef struct nms_box {
    double lo[2], hi[2]; /* y, x extents */
} nms_box;

static nms_box nms_box_at(const nms_args *a, int64_t b, int64_t k) {
    const tp_tensor *t = a->boxes;
    const char *p = tp__tensor_base(t) + (b * t->strides[0] + k * t->strides[1]) * (int64_t)tp_dtype_size(t->dtype);
    double v[4];
    for (int j = 0; j < 4; j++) v[j] = tp__load_f64(p + j * t->strides[2] * (int64_t)tp_dtype_size(t->dtype), t->dtype);
    nms_box r;
    if (a->center) { /* x_center, y_center, width, height */
        r.lo[0] = v[1] - v[3] / 2, r.hi[0] = v[1] + v[3] / 2;
        r.lo[1] = v[0] - v[2] / 2, r.hi[1] = v[0] + v[2] / 2;
    } else { /* y1, x1, y2, x2 */
        r.lo[0] = fmin(v[0], v[2]), r.hi[0] = fmax(v[0], v[2]);
        r.lo[1] = fmin(v[1], v[3]), r.hi[1] = fmax(v[1], v[3]);
    }
    return r;
}

/* Does box p suppress box q (IoU > threshold)? Empty boxes never do. */
static bool nms_suppresses(const nms_box *p, const nms_box *q, double thr) {
    double inter = 1;
    for (int d = 0; d < 2; d++) {
        double lo = fmax(p->lo[d], q->lo[d]), hi = fmin(p->hi[d], q->hi[d]);
        if (!(hi > lo)) return false;
        inter *= hi - lo;
    }
    double ap = (p->hi[0] - p->lo[0]) * (p->hi[1] - p->lo[1]), aq = (q->hi[0] - q->lo[0]) * (q->hi[1] - q->lo[1]);
    double uni = ap + aq - inter;
    if (!(ap > 0) || !(aq > 0) || !(uni > 0)) return false;
    return inter / uni > thr;
}

/* Run the selection: the number selected into *n, and the rows into dst
 * (int64 [cap, 3]) when dst is not NULL. */
static tp_status nms_run(const nms_args *a, int64_t *dst, int64_t cap, int64_t *n) {
    int64_t B = a->boxes->sizes[0], N = a->boxes->sizes[1], C = a->scores->sizes[1], count = 0;
    *n = 0;
    if (a->max_out == 0 || N == 0 || B == 0 || C == 0) return TP_OK;
    topk_item *items = tp_malloc((size_t)N * sizeof *items);
    nms_box *kept = tp_malloc((size_t)N * sizeof *kept);
    if (!items || !kept) {
        tp_free(items);
        tp_free(kept);
        return tp_error(TP_ERR_NOMEM, "non_max_suppression: out of memory for %" PRId64 " boxes", N);
    }
    const tp_tensor *s = a->scores;
    size_t es = tp_dtype_size(s->dtype);
    g_order.is_float = true;
    g_order.largest = true;
    tp_status st = TP_OK;
    for (int64_t b = 0; b < B && st == TP_OK; b++)
        for (int64_t c = 0; c < C && st == TP_OK; c++) {
            int64_t m = 0;
            for (int64_t k = 0; k < N; k++) {
                double v = tp__load_f64(tp__tensor_base(s) + (b * s->strides[0] + c * s->strides[1] + k * s->strides[2]) *
                                                                 (int64_t)es,
                                        s->dtype);
                if (a->has_score && !(v > a->score)) continue;
                items[m].f = isnan(v) ? -INFINITY : v;
                items[m].index = k;
                m++;
            }
            qsort(items, (size_t)m, sizeof *items, topk_cmp); /* descending, ties by index */
            int64_t n_kept = 0;
            for (int64_t j = 0; j < m && n_kept < a->max_out; j++) {
                nms_box q = nms_box_at(a, b, items[j].index);
                bool keep = true;
                for (int64_t i = 0; i < n_kept && keep; i++) keep = !nms_suppresses(&kept[i], &q, a->iou);
                if (!keep) continue;
                kept[n_kept++] = q;
                if (dst) {
                    if (count >= cap) {
                        st = tp_error(TP_ERR_INTERNAL, "non_max_suppression: the input changed after its output was sized");
                        break;
                    }
                    dst[count * 3] = b, dst[count * 3 + 1] = c, dst[count * 3 + 2] = items[j].index;
                }
                count++;
            }
        }
    tp_free(items);
    tp_free(kept);
    *n = count;
    return st;
}

static tp_status nms_infer(const tp_value *args, tp_value *out) {
    nms_args a;
    bool has_data;
    TP_TRY(nms_check(args, &a, &has_data));
    TP_CHECK(has_data, TP_ERR_UNSUPPORTED, "the output size depends on the input's values (known only when it runs)");
    int64_t n;
    TP_TRY(nms_run(&a, NULL, 0, &n));
    return tp__out_tensor(out, TP_INT64, 2, (int64_t[]){n, 3});
}

static tp_status nms_kernel(const tp_value *args, tp_value *out) {
    nms_args a;
    bool has_data;
    TP_TRY(nms_check(args, &a, &has_data));
    TP_CHECK(has_data, TP_ERR_INVALID_ARG, "non_max_suppression: an input is a meta tensor (it has no data)");
    tp_tensor *o = tp__out_at(out, 0);
    TP_CHECK(o && tp_tensor_is_contiguous(o) && o->dtype == TP_INT64 && o->ndim == 2 && o->sizes[1] == 3,
             TP_ERR_INTERNAL, "non_max_suppression: bad output");
    int64_t n;
    TP_TRY(nms_run(&a, (int64_t *)tp__tensor_base(o), o->sizes[0], &n));
    TP_CHECK(n == o->sizes[0], TP_ERR_INTERNAL, "non_max_suppression: the input changed after its output was sized");
    return TP_OK;
}

/* ---- onnx_range(Tensor start, Tensor limit, Tensor delta) -> Tensor ----
 * ONNX Range: start + i * delta for i < max(ceil((limit - start) / delta), 0),
 * of start's dtype (int16, int32, int64 or a float dtype, as opset 27
 * allows float16 and bfloat16; the three alike); integers exactly, floats
 * computed in float64 and rounded once. At most 2^32
 * elements. */

#define RANGE_MAX_N ((int64_t)1 << 32)

static bool range_dtype_ok(tp_dtype dt) {
    return dt == TP_INT16 || dt == TP_INT32 || dt == TP_INT64 || tp_dtype_is_float(dt);
}

/* Check the arguments; the element count into *n when they hold data
 * (TP_ERR_UNSUPPORTED on metadata). */
static tp_status range_count(const tp_value *args, int64_t *n) {
    static const char *const names[3] = {"start", "limit", "delta"};
    tp_tensor *t[3];
    for (int i = 0; i < 3; i++) {
        TP_TRY(tp__need_tensor(args, i, names[i], &t[i]));
        TP_CHECK(tp_tensor_numel(t[i]) == 1 && t[i]->ndim <= 1, TP_ERR_SHAPE,
                 "onnx_range: %s must hold one value, got %" PRId64 " (rank %d)", names[i], tp_tensor_numel(t[i]),
                 t[i]->ndim);
        TP_CHECK(range_dtype_ok(t[i]->dtype), TP_ERR_TYPE,
                 "onnx_range: %s must be int16, int32, int64 or a float dtype, got %s", names[i],
                 tp_dtype_name(t[i]->dtype));
        TP_CHECK(t[i]->dtype == t[0]->dtype, TP_ERR_TYPE, "onnx_range: %s is %s but start is %s (they must match)",
                 names[i], tp_dtype_name(t[i]->dtype), tp_dtype_name(t[0]->dtype));
    }
    for (int i = 0; i < 3; i++)
        TP_CHECK(!tp_tensor_is_meta(t[i]), TP_ERR_UNSUPPORTED,
                 "the output size depends on the input's values (known only when it runs)");
    tp_dtype dt = t[0]->dtype;
    if (tp_dtype_is_float(dt)) {
        double start = tp__load_f64(tp__tensor_base(t[0]), dt), limit = tp__load_f64(tp__tensor_base(t[1]), dt),
               delta = tp__load_f64(tp__tensor_base(t[2]), dt);
        TP_CHECK(delta != 0, TP_ERR_INVALID_ARG, "onnx_range: delta must be nonzero");
        double cnt = ceil((limit - start) / delta);
        TP_CHECK(cnt <= (double)RANGE_MAX_N || cnt <= 0, TP_ERR_INVALID_ARG,
                 "onnx_range: range [%g, %g) step %g has too many elements (at most %" PRId64 ")", start, limit, delta,
                 RANGE_MAX_N); /* also NaN and inf */
        *n = cnt > 0 ? (int64_t)cnt : 0;
        return TP_OK;
    }
    int64_t start = tp__load_i64(tp__tensor_base(t[0]), dt), limit = tp__load_i64(tp__tensor_base(t[1]), dt),
            delta = tp__load_i64(tp__tensor_base(t[2]), dt);
    TP_CHECK(delta != 0, TP_ERR_INVALID_ARG, "onnx_range: delta must be nonzero");
    uint64_t span = 0, step = 0; /* unsigned: no overflow */
    if (delta > 0 && limit > start) span = (uint64_t)limit - (uint64_t)start, step = (uint64_t)delta;
    if (delta < 0 && limit < start) span = (uint64_t)start - (uint64_t)limit, step = 0 - (uint64_t)delta;
    uint64_t cnt = step ? span / step + (span % step != 0) : 0;
    TP_CHECK(cnt <= (uint64_t)RANGE_MAX_N, TP_ERR_INVALID_ARG,
             "onnx_range: range [%" PRId64 ", %" PRId64 ") step %" PRId64 " has %" PRIu64 " elements (at most %" PRId64
             ")", start, limit, delta, cnt, RANGE_MAX_N);
    *n = (int64_t)cnt;
    return TP_OK;
}

static tp_status range_infer(const tp_value *args, tp_value *out) {
    int64_t n;
    TP_TRY(range_count(args, &n));
    return tp__out_tensor(out, tp__arg_tensor(args, 0)->dtype, 1, &n);
}

static tp_status range_kernel(const tp_value *args, tp_value *out) {
    int64_t n;
    TP_TRY(range_count(args, &n));
    tp_tensor *o = tp__out_at(out, 0);
    const tp_tensor *ts = tp__arg_tensor(args, 0), *td = tp__arg_tensor(args, 2);
    tp_dtype dt = ts->dtype;
    TP_CHECK(o && o->dtype == dt && o->ndim == 1 && o->sizes[0] == n, TP_ERR_INTERNAL,
             "onnx_range: the output does not have the size of the range");
    char *p = tp__tensor_base(o);
    int64_t es = (int64_t)tp_dtype_size(dt), os = o->strides[0];
    if (tp_dtype_is_float(dt)) {
        double start = tp__load_f64(tp__tensor_base(ts), dt), delta = tp__load_f64(tp__tensor_base(td), dt);
        for (int64_t i = 0; i < n; i++) tp__store_f64(p + i * os * es, dt, start + (double)i * delta);
    } else { /* every value lies in [start, limit): the unsigned sum is exact */
        uint64_t start = (uint64_t)tp__load_i64(tp__tensor_base(ts), dt), delta = (uint64_t)tp__load_i64(tp__tensor_base(td), dt);
        for (int64_t i = 0; i < n; i++) tp__store_i64(p + i * os * es, dt, (int64_t)(start + (uint64_t)i * delta));
    }
    return TP_OK;
}

void tp__register_onnx_ops_ops(void) {
    tp__register_op(TP_OP_TOPK, "topk(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor, Tensor)",
                    0, topk_infer, topk_kernel);
    tp__register_op(TP_OP_SORT,
                    "sort(Tensor self, int dim=-1, bool descending=False, *, bool? stable=None) -> (Tensor, Tensor)", 0,
                    sort_infer, sort_kernel);
    tp__register_op(TP_OP_ARGSORT, "argsort(Tensor self, int dim=-1, bool descending=False, *, bool? stable=None) -> Tensor",
                    0, argsort_infer, argsort_kernel);
    tp__register_op(TP_OP_NON_MAX_SUPPRESSION,
                    "non_max_suppression(Tensor boxes, Tensor scores, Tensor? max_output_boxes_per_class=None, "
                    "Tensor? iou_threshold=None, Tensor? score_threshold=None, int center_point_box=0) -> Tensor",
                    TP_OPF_DATA_DEPENDENT, nms_infer, nms_kernel);
    tp__register_op(TP_OP_ONNX_RANGE, "onnx_range(Tensor start, Tensor limit, Tensor delta) -> Tensor",
                    TP_OPF_DATA_DEPENDENT, range_infer, range_kernel);
}
