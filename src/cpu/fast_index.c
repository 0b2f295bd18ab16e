/*
 * fast_index.c - fast variants (contract v2) of the row gathers: index_select
 * and embedding (the token and position lookups of every language model).
 *
 * Both copy whole contiguous runs with memcpy, any dtype, where the
 * reference kernels copy through a strided view per index (index_select)
 * or per element (embedding): GPT-2's token lookup (128 rows of 256
 * floats) 31-38 -> 12 us a call, the rest being the rows' trip from
 * memory. Indices are checked in the reference's order, on one thread, so
 * the first bad one gives the reference's status and message.
 */
#include <inttypes.h>
#include <string.h>

#include "fast.h"
#include "kernel_util.h"

/* ---- index_select(Tensor self, int dim, Tensor index) -------------------
 * self and out contiguous with no empty dim, index 0-D or 1-D: out is
 * outer x n x inner, self outer x limit x inner (in elements of es bytes);
 * plan->i: [0] outer, [1] limit, [2] inner bytes, [3] dim. */
static tp_status index_select_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out,
                                  const tp_exec *ex) {
    (void)ex;
    const tp_tensor *self = in[0], *index = in[1];
    const char *src = tp__tensor_base(self), *ib = tp__tensor_base(index);
    char *dst = tp__tensor_base(out[0]);
    const int64_t outer = plan->i[0], limit = plan->i[1], inner = plan->i[2];
    const int64_t n = tp_tensor_numel(index), istride = index->ndim ? index->strides[0] : 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t idx = tp__load_i64(ib + k * istride * (int64_t)tp_dtype_size(index->dtype), index->dtype);
        TP_CHECK(idx >= 0 && idx < limit, TP_ERR_INDEX,
                 "index %" PRId64 " out of range in self (dimension %d has size %" PRId64 ")", idx, (int)plan->i[3],
                 limit);
        for (int64_t o = 0; o < outer; o++)
            memcpy(dst + (o * n + k) * inner, src + (o * limit + idx) * inner, (size_t)inner);
    }
    return TP_OK;
}

static tp_status index_select_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *outv,
                                      tp_op_plan *plan) {
    (void)info;
    tp_tensor *self = tp__arg_tensor(bound, 0), *index = tp__arg_tensor(bound, 2), *o = tp__fast_out(outv);
    if (!self || !index || !o || self->ndim == 0 || index->ndim > 1 || o->dtype != self->dtype) return TP_ERR_UNSUPPORTED;
    if (index->dtype != TP_INT64 && index->dtype != TP_INT32) return TP_ERR_UNSUPPORTED;
    if (!tp_tensor_is_contiguous(self) || !tp_tensor_is_contiguous(o) || tp_tensor_numel(self) == 0)
        return TP_ERR_UNSUPPORTED;
    int dim;
    if (tp__wrap_dim(tp__arg_int(bound, 1), self->ndim, &dim) != TP_OK) {
        tp_clear_error();
        return TP_ERR_UNSUPPORTED;
    }
    int64_t outer = 1, inner = (int64_t)tp_dtype_size(self->dtype);
    for (int d = 0; d < dim; d++) outer *= self->sizes[d];
    for (int d = dim + 1; d < self->ndim; d++) inner *= self->sizes[d];
    plan->i[0] = outer;
    plan->i[1] = self->sizes[dim];
    plan->i[2] = inner;
    plan->i[3] = dim;
    plan->variant = "rows";
    plan->run = index_select_run;
    plan->max_threads = 1;
    return TP_OK;
}

/* ---- embedding(Tensor weight, Tensor indices, ...) ----------------------
 * weight 2-D with contiguous rows (any row stride), out contiguous: one
 * memcpy of a row per index, indices walked in C order whatever their
 * strides. plan->i: [0] rows, [1] row bytes, [2] weight row stride bytes. */
static tp_status embedding_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out,
                               const tp_exec *ex) {
    (void)ex;
    const tp_tensor *w = in[0], *idx = in[1];
    const char *wb = tp__tensor_base(w), *ib = tp__tensor_base(idx);
    char *yb = tp__tensor_base(out[0]);
    const int64_t rows = plan->i[0], row_bytes = plan->i[1], wstride = plan->i[2];
    tp_walk it;
    tp__walk_init(&it, idx->ndim, idx->sizes, 1, (const int64_t *[]){idx->strides});
    for (int64_t k = 0; tp__walk_next(&it); k++) {
        int64_t r = tp__load_i64(ib + it.off[0] * (int64_t)tp_dtype_size(idx->dtype), idx->dtype);
        TP_CHECK(r >= 0 && r < rows, TP_ERR_INDEX, "index out of range in self (index %" PRId64 ", %" PRId64 " rows)", r,
                 rows);
        memcpy(yb + k * row_bytes, wb + r * wstride, (size_t)row_bytes);
    }
    return TP_OK;
}

static tp_status embedding_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *outv,
                                   tp_op_plan *plan) {
    (void)info;
    tp_tensor *w = tp__arg_tensor(bound, 0), *idx = tp__arg_tensor(bound, 1), *o = tp__fast_out(outv);
    if (!w || !idx || !o || w->ndim != 2 || o->dtype != w->dtype || !tp_tensor_is_contiguous(o)) return TP_ERR_UNSUPPORTED;
    if (idx->dtype != TP_INT64 && idx->dtype != TP_INT32) return TP_ERR_UNSUPPORTED;
    if (w->sizes[1] > 1 && w->strides[1] != 1) return TP_ERR_UNSUPPORTED;
    int64_t es = (int64_t)tp_dtype_size(w->dtype);
    plan->i[0] = w->sizes[0];
    plan->i[1] = w->sizes[1] * es;
    plan->i[2] = w->strides[0] * es;
    plan->variant = "rows";
    plan->run = embedding_run;
    plan->max_threads = 1;
    return TP_OK;
}

void tp__register_fast_index(void) {
    tp__register_variant(TP_OP_INDEX_SELECT, "rows", TP_CPU_SCALAR, index_select_prepare);
    tp__register_variant(TP_OP_EMBEDDING, "rows", TP_CPU_SCALAR, embedding_prepare);
}
