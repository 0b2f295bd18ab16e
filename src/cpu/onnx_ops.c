/*
 * onnx_ops.c - ops added for ONNX import that have no composition from
 * the core ops: topk (values and int64 indices of the k largest or
 * smallest elements along a dim, PyTorch's torch.topk; ties keep the lower
 * index first, as ONNX TopK requires, and NaN counts as the largest value,
 * as in PyTorch); and, sharing its line sorter, sort and argsort.
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

void tp__register_onnx_ops_ops(void) {
    tp__register_op(TP_OP_TOPK, "topk(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor, Tensor)",
                    0, topk_infer, topk_kernel);
    tp__register_op(TP_OP_SORT,
                    "sort(Tensor self, int dim=-1, bool descending=False, *, bool? stable=None) -> (Tensor, Tensor)", 0,
                    sort_infer, sort_kernel);
    tp__register_op(TP_OP_ARGSORT, "argsort(Tensor self, int dim=-1, bool descending=False, *, bool? stable=None) -> Tensor",
                    0, argsort_infer, argsort_kernel);
}
