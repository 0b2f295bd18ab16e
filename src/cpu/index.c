/*
 * index.c - index ops: schemas, shape rules and reference kernels for
 * index_select, gather, scatter and scatter_add (out of place),
 * take_along_dim, take and put (flat indices), one_hot, masked_fill, tril
 * and triu. Advanced indexing (index, index_put, nonzero, masked_select)
 * is advindex.c.
 *
 * Index tensors hold int64 (index_select also takes int32, as PyTorch does);
 * an index outside its dimension is TP_ERR_INDEX, found while the kernel
 * runs (shape rules see only metadata). Outputs have the input's dtype and
 * every dtype is supported, since these ops only move elements.
 */
#include <inttypes.h>

#include "kernel_util.h"


/* PyTorch's "ensure_nonempty": a 0-d tensor counts as one dim of size 1. */
static int nonempty_dim(const tp_tensor *t) { return t->ndim ? t->ndim : 1; }
static int64_t nonempty_size(const tp_tensor *t, int d) { return t->ndim ? t->sizes[d] : 1; }
static int64_t nonempty_stride(const tp_tensor *t, int d) { return t->ndim ? t->strides[d] : 0; }

/* ---- index_select(Tensor self, int dim, Tensor index) ------------------- */

static tp_status index_select_plan(const tp_value *args, tp_tensor **self, tp_tensor **index, int *dim,
                                   int64_t *sizes) {
    TP_TRY(tp__need_tensor(args, 0, "self", self));
    TP_TRY(tp__need_tensor(args, 2, "index", index));
    tp_tensor *s = *self, *ix = *index;
    TP_CHECK(ix->dtype == TP_INT64 || ix->dtype == TP_INT32, TP_ERR_TYPE,
             "expected dtype int32 or int64 for index, got %s", tp_dtype_name(ix->dtype));
    TP_CHECK(ix->ndim <= 1, TP_ERR_SHAPE, "index is supposed to be a vector, got a tensor with %d dims", ix->ndim);
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), s->ndim, dim));
    int64_t n = tp_tensor_numel(ix);
    if (s->ndim == 0) {
        TP_CHECK(n == 1, TP_ERR_SHAPE, "index into a 0-dim tensor can have only 1 value, got %" PRId64, n);
    } else {
        memcpy(sizes, s->sizes, (size_t)s->ndim * sizeof *sizes);
        sizes[*dim] = n;
    }
    return TP_OK;
}

static tp_status infer_index_select(const tp_value *args, tp_value *out) {
    tp_tensor *self, *index;
    int dim;
    int64_t sizes[TP_MAX_DIMS];
    TP_TRY(index_select_plan(args, &self, &index, &dim, sizes));
    return tp__out_tensor(out, self->dtype, self->ndim, sizes);
}

static tp_status kernel_index_select(const tp_value *args, tp_value *out) {
    tp_tensor *self, *index, *o = tp__out_at(out, 0);
    int dim;
    int64_t sizes[TP_MAX_DIMS];
    TP_TRY(index_select_plan(args, &self, &index, &dim, sizes));
    TP_TRY(tp__has_data(self, "self"));
    TP_TRY(tp__has_data(index, "index"));
    int64_t n = tp_tensor_numel(index), limit = nonempty_size(self, dim);
    int64_t istride = index->ndim ? index->strides[0] : 0;
    size_t ies = tp_dtype_size(index->dtype);
    const char *ibase = tp__tensor_base(index);
    for (int64_t k = 0; k < n; k++) {
        int64_t idx = tp__load_i64(ibase + k * istride * (int64_t)ies, index->dtype);
        TP_CHECK(idx >= 0 && idx < limit, TP_ERR_INDEX,
                 "index %" PRId64 " out of range in self (dimension %d has size %" PRId64 ")", idx, dim, limit);
        if (self->ndim == 0) {
            memcpy(tp__tensor_base(o), tp__tensor_base(self), tp_dtype_size(self->dtype));
            continue;
        }
        tp_tensor *src = NULL, *dst = NULL;
        TP_TRY(tp_tensor_select(self, dim, idx, &src));
        tp_status st = tp_tensor_select(o, dim, k, &dst);
        if (st == TP_OK) st = tp_tensor_copy_(dst, src);
        tp_tensor_free(src);
        tp_tensor_free(dst);
        TP_TRY(st);
    }
    return TP_OK;
}

/* ---- gather(Tensor self, int dim, Tensor index) ------------------------- */

static tp_status gather_plan(const tp_value *args, tp_tensor **self, tp_tensor **index, int *dim) {
    TP_TRY(tp__need_tensor(args, 0, "self", self));
    TP_TRY(tp__need_tensor(args, 2, "index", index));
    tp_tensor *s = *self, *ix = *index;
    TP_CHECK(ix->dtype == TP_INT64, TP_ERR_TYPE, "expected dtype int64 for index, got %s", tp_dtype_name(ix->dtype));
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), s->ndim, dim));
    if (tp_tensor_numel(ix) == 0) return TP_OK;
    TP_CHECK(nonempty_dim(s) == nonempty_dim(ix), TP_ERR_SHAPE,
             "index tensor must have the same number of dimensions as input tensor (%d vs %d)", ix->ndim, s->ndim);
    char b1[256], b2[256];
    for (int d = 0; d < nonempty_dim(s); d++) {
        TP_CHECK(d == *dim || nonempty_size(ix, d) <= nonempty_size(s, d), TP_ERR_SHAPE,
                 "Size does not match at dimension %d expected index %s to be smaller than self %s apart from "
                 "dimension %d",
                 d, tp__shape_str(ix->ndim, ix->sizes, b1, sizeof b1), tp__shape_str(s->ndim, s->sizes, b2, sizeof b2),
                 *dim);
    }
    return TP_OK;
}

static tp_status infer_gather(const tp_value *args, tp_value *out) {
    tp_tensor *self, *index;
    int dim;
    TP_TRY(gather_plan(args, &self, &index, &dim));
    return tp__out_tensor(out, self->dtype, index->ndim, index->sizes);
}

static tp_status kernel_gather(const tp_value *args, tp_value *out) {
    tp_tensor *self, *index, *o = tp__out_at(out, 0);
    int dim;
    TP_TRY(gather_plan(args, &self, &index, &dim));
    TP_TRY(tp__has_data(self, "self"));
    TP_TRY(tp__has_data(index, "index"));
    size_t es = tp_dtype_size(self->dtype);
    int64_t limit = nonempty_size(self, dim), dstride = nonempty_stride(self, dim);
    const char *base = tp__tensor_base(self);
    tp_iter it;
    tp__iter_init(&it, index->ndim, index->sizes, 2, (const tp_tensor *[]){o, index});
    while (tp__iter_next(&it)) {
        int64_t idx = tp__load_i64(it.ptr[1], TP_INT64);
        TP_CHECK(idx >= 0 && idx < limit, TP_ERR_INDEX,
                 "index %" PRId64 " is out of bounds for dimension %d with size %" PRId64, idx, dim, limit);
        int64_t off = idx * dstride;
        if (self->ndim)
            for (int d = 0; d < index->ndim; d++)
                if (d != dim) off += it.index[d] * self->strides[d];
        memcpy(it.ptr[0], base + off * (int64_t)es, es);
    }
    return TP_OK;
}

/* ---- scatter(Tensor self, int dim, Tensor index, Tensor|Scalar src) -----
 * Out of place: a copy of self with out[..., index[i], ...] = src[i] along
 * dim. With duplicate indices the last write wins (PyTorch leaves the
 * order unspecified). */

static tp_status scatter_plan(const tp_value *args, tp_tensor **self, tp_tensor **index, int *dim) {
    TP_TRY(tp__need_tensor(args, 0, "self", self));
    TP_TRY(tp__need_tensor(args, 2, "index", index));
    tp_tensor *s = *self, *ix = *index, *src = tp__arg_tensor(args, 3);
    TP_CHECK(ix->dtype == TP_INT64, TP_ERR_TYPE, "expected dtype int64 for index, got %s", tp_dtype_name(ix->dtype));
    TP_CHECK(src || tp_value_is_number(&args[3]), TP_ERR_TYPE, "src must be a Tensor or a number, not %s",
             tp_value_kind_name(args[3].kind));
    TP_CHECK(!src || src->dtype == s->dtype, TP_ERR_TYPE, "expected self.dtype to be equal to src.dtype (%s vs %s)",
             tp_dtype_name(s->dtype), tp_dtype_name(src->dtype));
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), s->ndim, dim));
    if (tp_tensor_numel(ix) == 0) return TP_OK;
    TP_CHECK(nonempty_dim(s) == nonempty_dim(ix), TP_ERR_SHAPE,
             "index tensor must have the same number of dimensions as self tensor (%d vs %d)", ix->ndim, s->ndim);
    TP_CHECK(!src || nonempty_dim(src) == nonempty_dim(ix), TP_ERR_SHAPE,
             "index tensor must have the same number of dimensions as src tensor (%d vs %d)", ix->ndim, src->ndim);
    bool wrong = false;
    for (int d = 0; d < nonempty_dim(s); d++) {
        if (d != *dim && nonempty_size(ix, d) > nonempty_size(s, d)) wrong = true;
        if (src && nonempty_size(ix, d) > nonempty_size(src, d)) wrong = true;
    }
    if (wrong) {
        char b1[256], b2[256], b3[256] = "";
        if (src) {
            char b4[200];
            snprintf(b3, sizeof b3, " and to be smaller size than src %s",
                     tp__shape_str(src->ndim, src->sizes, b4, sizeof b4));
        }
        return tp_error(TP_ERR_SHAPE, "Expected index %s to be smaller than self %s apart from dimension %d%s",
                        tp__shape_str(ix->ndim, ix->sizes, b1, sizeof b1),
                        tp__shape_str(s->ndim, s->sizes, b2, sizeof b2), *dim, b3);
    }
    return TP_OK;
}

static tp_status infer_scatter(const tp_value *args, tp_value *out) {
    tp_tensor *self, *index;
    int dim;
    TP_TRY(scatter_plan(args, &self, &index, &dim));
    return tp__out_tensor(out, self->dtype, self->ndim, self->sizes);
}

static tp_status kernel_scatter(const tp_value *args, tp_value *out) {
    tp_tensor *self, *index, *o = tp__out_at(out, 0), *src = tp__arg_tensor(args, 3);
    int dim;
    TP_TRY(scatter_plan(args, &self, &index, &dim));
    TP_TRY(tp__has_data(self, "self"));
    TP_TRY(tp__has_data(index, "index"));
    TP_TRY(tp__has_data(src, "src"));
    TP_TRY(tp_tensor_copy_(o, self));
    char value[8];
    if (!src) TP_TRY(tp__scalar_to_elem(&args[3], self->dtype, value));
    if (tp_tensor_numel(index) == 0) return TP_OK;
    size_t es = tp_dtype_size(self->dtype);
    int64_t limit = nonempty_size(self, dim), dstride = nonempty_stride(o, dim);
    char *obase = tp__tensor_base(o);
    tp_iter it;
    /* src (when a tensor) is at least as large as index in every dim, so
     * walking index's shape with src's strides reads the matching element */
    tp__iter_init(&it, index->ndim, index->sizes, src ? 2 : 1, (const tp_tensor *[]){index, src});
    while (tp__iter_next(&it)) {
        int64_t idx = tp__load_i64(it.ptr[0], TP_INT64);
        TP_CHECK(idx >= 0 && idx < limit, TP_ERR_INDEX,
                 "index %" PRId64 " is out of bounds for dimension %d with size %" PRId64, idx, dim, limit);
        int64_t off = idx * dstride;
        if (o->ndim)
            for (int d = 0; d < index->ndim; d++)
                if (d != dim) off += it.index[d] * o->strides[d];
        memcpy(obase + off * (int64_t)es, src ? it.ptr[1] : value, es);
    }
    return TP_OK;
}

/* ---- scatter_add(Tensor self, int dim, Tensor index, Tensor src) -------
 * Out of place: a copy of self with src[i] added at out[..., index[i], ...]
 * along dim, duplicates accumulating in index order (bool: logical or). */

static tp_status infer_scatter_add(const tp_value *args, tp_value *out) { return infer_scatter(args, out); }

static tp_status kernel_scatter_add(const tp_value *args, tp_value *out) {
    tp_tensor *self, *index, *o = tp__out_at(out, 0), *src = tp__arg_tensor(args, 3);
    int dim;
    TP_TRY(scatter_plan(args, &self, &index, &dim));
    TP_TRY(tp__has_data(self, "self"));
    TP_TRY(tp__has_data(index, "index"));
    TP_TRY(tp__has_data(src, "src"));
    TP_TRY(tp_tensor_copy_(o, self));
    if (tp_tensor_numel(index) == 0) return TP_OK;
    tp_dtype dt = o->dtype;
    size_t es = tp_dtype_size(dt);
    bool is_float = tp_dtype_is_float(dt);
    int64_t limit = nonempty_size(self, dim), dstride = nonempty_stride(o, dim);
    char *obase = tp__tensor_base(o);
    tp_iter it;
    tp__iter_init(&it, index->ndim, index->sizes, 2, (const tp_tensor *[]){index, src});
    while (tp__iter_next(&it)) {
        int64_t idx = tp__load_i64(it.ptr[0], TP_INT64);
        TP_CHECK(idx >= 0 && idx < limit, TP_ERR_INDEX,
                 "index %" PRId64 " is out of bounds for dimension %d with size %" PRId64, idx, dim, limit);
        int64_t off = idx * dstride;
        if (o->ndim)
            for (int d = 0; d < index->ndim; d++)
                if (d != dim) off += it.index[d] * o->strides[d];
        char *p = obase + off * (int64_t)es;
        if (dt == TP_BOOL) *(uint8_t *)p = (uint8_t)(*(uint8_t *)p || *(const uint8_t *)it.ptr[1]);
        else if (is_float) tp__store_f64(p, dt, tp__load_f64(p, dt) + tp__load_f64(it.ptr[1], dt));
        else
            tp__store_i64(p, dt, (int64_t)((uint64_t)tp__load_i64(p, dt) + (uint64_t)tp__load_i64(it.ptr[1], dt)));
    }
    return TP_OK;
}

/* ---- take_along_dim(Tensor self, Tensor indices, int? dim=None) ---------
 * dim None: the flattened self gathered at the flattened indices. With a
 * dim: self and indices broadcast against each other except along dim,
 * then gather along dim. */

typedef struct take_plan {
    bool flat;
    int dim;
    int ndim;
    int64_t sizes[TP_MAX_DIMS];
} take_plan;

static tp_status take_plan_make(const tp_value *args, tp_tensor **self, tp_tensor **indices, take_plan *p) {
    TP_TRY(tp__need_tensor(args, 0, "self", self));
    TP_TRY(tp__need_tensor(args, 1, "indices", indices));
    tp_tensor *s = *self, *ix = *indices;
    TP_CHECK(ix->dtype == TP_INT64, TP_ERR_TYPE, "dtype of indices should be Long but got %s",
             tp_dtype_name(ix->dtype));
    p->flat = tp__arg_is_none(args, 2);
    if (p->flat) {
        p->dim = 0;
        p->ndim = 1;
        p->sizes[0] = tp_tensor_numel(ix);
        return TP_OK;
    }
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 2), s->ndim, &p->dim));
    TP_CHECK(s->ndim == ix->ndim, TP_ERR_SHAPE,
             "input and indices should have the same number of dimensions, but got %d dimensions for input, and %d "
             "dimensions for indices",
             s->ndim, ix->ndim);
    int64_t ssizes[TP_MAX_DIMS];
    memcpy(ssizes, s->sizes, (size_t)s->ndim * sizeof *ssizes);
    if (s->ndim) ssizes[p->dim] = ix->sizes[p->dim];
    return tp__broadcast_shapes(s->ndim, ssizes, ix->ndim, ix->sizes, &p->ndim, p->sizes);
}

static tp_status infer_take_along_dim(const tp_value *args, tp_value *out) {
    tp_tensor *self, *indices;
    take_plan p;
    TP_TRY(take_plan_make(args, &self, &indices, &p));
    return tp__out_tensor(out, self->dtype, p.ndim, p.sizes);
}

static tp_status kernel_take_along_dim(const tp_value *args, tp_value *out) {
    tp_tensor *self, *ix, *o = tp__out_at(out, 0);
    take_plan p;
    TP_TRY(take_plan_make(args, &self, &ix, &p));
    TP_TRY(tp__has_data(self, "self"));
    TP_TRY(tp__has_data(ix, "indices"));
    if (tp_tensor_numel(o) == 0) return TP_OK;
    size_t es = tp_dtype_size(self->dtype);
    const char *sbase = tp__tensor_base(self);
    char *obase = tp__tensor_base(o);
    tp_iter it;
    if (p.flat) { /* o is contiguous: element k takes flat element indices[k] of self */
        int64_t limit = tp_tensor_numel(self), k = 0;
        tp__iter_init(&it, ix->ndim, ix->sizes, 1, (const tp_tensor *[]){ix});
        while (tp__iter_next(&it)) {
            int64_t v = tp__load_i64(it.ptr[0], TP_INT64), off = 0;
            TP_CHECK(v >= 0 && v < limit, TP_ERR_INDEX,
                     "index %" PRId64 " is out of bounds for dimension 0 with size %" PRId64, v, limit);
            for (int d = self->ndim - 1; d >= 0; d--) {
                off += (v % self->sizes[d]) * self->strides[d];
                v /= self->sizes[d];
            }
            memcpy(obase + k++ * (int64_t)es, sbase + off * (int64_t)es, es);
        }
        return TP_OK;
    }
    int64_t limit = nonempty_size(self, p.dim), dstride = nonempty_stride(self, p.dim);
    const char *ibase = tp__tensor_base(ix);
    tp__iter_init(&it, o->ndim, o->sizes, 1, (const tp_tensor *[]){o});
    while (tp__iter_next(&it)) {
        int64_t ioff = 0, soff = 0;
        for (int d = 0; d < o->ndim; d++) {
            if (ix->sizes[d] != 1) ioff += it.index[d] * ix->strides[d];
            if (d != p.dim && self->sizes[d] != 1) soff += it.index[d] * self->strides[d];
        }
        int64_t v = tp__load_i64(ibase + ioff * 8, TP_INT64);
        TP_CHECK(v >= 0 && v < limit, TP_ERR_INDEX,
                 "index %" PRId64 " is out of bounds for dimension %d with size %" PRId64, v, p.dim, limit);
        memcpy(it.ptr[0], sbase + (soff + v * dstride) * (int64_t)es, es);
    }
    return TP_OK;
}

/* ---- masked_fill(Tensor self, Tensor mask, Tensor|Scalar value) ---------
 * The result has the broadcast shape of self and mask (as PyTorch's
 * out-of-place masked_fill) and self's dtype. */

static tp_status masked_fill_plan(const tp_value *args, tp_tensor **self, tp_tensor **mask, int *ndim, int64_t *sizes) {
    TP_TRY(tp__need_tensor(args, 0, "self", self));
    TP_TRY(tp__need_tensor(args, 1, "mask", mask));
    TP_CHECK((*mask)->dtype == TP_BOOL, TP_ERR_TYPE, "only boolean masks are supported, but got mask with dtype %s",
             tp_dtype_name((*mask)->dtype));
    const tp_tensor *value = tp__arg_tensor(args, 2);
    TP_CHECK(value || tp_value_is_number(&args[2]), TP_ERR_TYPE, "value must be a Tensor or a number, not %s",
             tp_value_kind_name(args[2].kind));
    TP_CHECK(!value || value->ndim == 0, TP_ERR_SHAPE,
             "only a 0-dimensional value tensor is supported, but got tensor with %d dimension(s)",
             value ? value->ndim : 0);
    return tp__broadcast_shapes((*self)->ndim, (*self)->sizes, (*mask)->ndim, (*mask)->sizes, ndim, sizes);
}

static tp_status infer_masked_fill(const tp_value *args, tp_value *out) {
    tp_tensor *self, *mask;
    int ndim;
    int64_t sizes[TP_MAX_DIMS];
    TP_TRY(masked_fill_plan(args, &self, &mask, &ndim, sizes));
    return tp__out_tensor(out, self->dtype, ndim, sizes);
}

static tp_status kernel_masked_fill(const tp_value *args, tp_value *out) {
    tp_tensor *self, *mask, *o = tp__out_at(out, 0);
    int ndim;
    int64_t sizes[TP_MAX_DIMS];
    TP_TRY(masked_fill_plan(args, &self, &mask, &ndim, sizes));
    TP_TRY(tp__has_data(self, "self"));
    TP_TRY(tp__has_data(mask, "mask"));
    char value[8];
    TP_TRY(tp__scalar_to_elem(&args[2], self->dtype, value));
    size_t es = tp_dtype_size(self->dtype);
    tp_iter it;
    tp__iter_init(&it, o->ndim, o->sizes, 3, (const tp_tensor *[]){o, self, mask});
    while (tp__iter_next(&it)) memcpy(it.ptr[0], *(const uint8_t *)it.ptr[2] ? value : it.ptr[1], es);
    return TP_OK;
}

/* ---- tril / triu(Tensor self, int diagonal=0) -------------------------- */

static tp_status infer_tri(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_CHECK(self->ndim >= 2, TP_ERR_SHAPE, "input tensor must have at least 2 dimensions, got %d", self->ndim);
    return tp__out_tensor(out, self->dtype, self->ndim, self->sizes);
}

/* lower: keep j - i <= diagonal (tril); else keep j - i >= diagonal (triu) */
static tp_status tri_run(const tp_value *args, tp_value *out, bool lower) {
    tp_tensor *self, *o = tp__out_at(out, 0);
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(tp__has_data(self, "self"));
    TP_CHECK(self->ndim >= 2, TP_ERR_SHAPE, "input tensor must have at least 2 dimensions, got %d", self->ndim);
    int64_t diagonal = tp__arg_int(args, 1);
    int nd = self->ndim;
    size_t es = tp_dtype_size(self->dtype);
    tp_iter it;
    tp__iter_init(&it, nd, self->sizes, 2, (const tp_tensor *[]){o, self});
    while (tp__iter_next(&it)) {
        int64_t offset = it.index[nd - 1] - it.index[nd - 2];
        bool keep = lower ? offset <= diagonal : offset >= diagonal;
        if (keep)
            memcpy(it.ptr[0], it.ptr[1], es);
        else
            memset(it.ptr[0], 0, es);
    }
    return TP_OK;
}

static tp_status kernel_tril(const tp_value *args, tp_value *out) { return tri_run(args, out, true); }
static tp_status kernel_triu(const tp_value *args, tp_value *out) { return tri_run(args, out, false); }

/* ---- take(Tensor self, Tensor index): self flattened (C order) at index,
 * shaped like index; negative indices count from the end. */

static tp_status infer_take(const tp_value *args, tp_value *out) {
    tp_tensor *self, *index;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(tp__need_tensor(args, 1, "index", &index));
    TP_CHECK(index->dtype == TP_INT64, TP_ERR_TYPE, "take(): Expected a long tensor for index, but got %s",
             tp_dtype_name(index->dtype));
    return tp__out_tensor(out, self->dtype, index->ndim, index->sizes);
}

static tp_status kernel_take(const tp_value *args, tp_value *out) {
    tp_tensor *self = tp__arg_tensor(args, 0), *index = tp__arg_tensor(args, 1), *o = tp__out_at(out, 0);
    int64_t n = tp_tensor_numel(self), es = (int64_t)tp_dtype_size(self->dtype);
    tp_iter it;
    tp__iter_init(&it, o->ndim, o->sizes, 2, (const tp_tensor *[]){o, index});
    while (tp__iter_next(&it)) {
        int64_t k = *(const int64_t *)it.ptr[1];
        TP_CHECK(k >= -n && k < n, TP_ERR_INDEX, "out of range: tried to access index %" PRId64
                 " on a tensor of %" PRId64 " elements.", k, n);
        if (k < 0) k += n;
        int64_t off = 0;
        for (int d = self->ndim - 1; d >= 0; d--) {
            off += (k % self->sizes[d]) * self->strides[d];
            k /= self->sizes[d];
        }
        memcpy(it.ptr[0], tp__tensor_base(self) + off * es, (size_t)es);
    }
    return TP_OK;
}

/* ---- put(Tensor self, Tensor index, Tensor source, bool accumulate=False):
 * a copy of self with self.flatten()[index[i]] = source[i] (+= with
 * accumulate), index and source walked in C order (a repeated index keeps
 * the last value); negative indices count from the end. */

static tp_status put_check(const tp_value *args) {
    tp_tensor *self, *index, *source;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(tp__need_tensor(args, 1, "index", &index));
    TP_TRY(tp__need_tensor(args, 2, "source", &source));
    TP_CHECK(index->dtype == TP_INT64, TP_ERR_TYPE, "put_(): Expected a long tensor for index, but got %s",
             tp_dtype_name(index->dtype));
    TP_CHECK(self->dtype == source->dtype, TP_ERR_TYPE,
             "put_(): self and source expected to have the same dtype, but got self.dtype = %s and "
             "source.dtype = %s",
             tp_dtype_name(self->dtype), tp_dtype_name(source->dtype));
    TP_CHECK(tp_tensor_numel(index) == tp_tensor_numel(source), TP_ERR_INDEX,
             "put_(): Expected source and index to have the same number of elements, but got "
             "source.numel() = %" PRId64 ", index.numel() = %" PRId64,
             tp_tensor_numel(source), tp_tensor_numel(index));
    return TP_OK;
}

static tp_status infer_put(const tp_value *args, tp_value *out) {
    TP_TRY(put_check(args));
    const tp_tensor *self = tp__arg_tensor(args, 0);
    return tp__out_tensor(out, self->dtype, self->ndim, self->sizes);
}

static tp_status kernel_put(const tp_value *args, tp_value *out) {
    TP_TRY(put_check(args));
    tp_tensor *self = tp__arg_tensor(args, 0), *index = tp__arg_tensor(args, 1), *source = tp__arg_tensor(args, 2);
    tp_tensor *o = tp__out_at(out, 0);
    bool acc = tp__arg_bool(args, 3);
    TP_TRY(tp_tensor_copy_(o, self));
    int64_t n = tp_tensor_numel(o), es = (int64_t)tp_dtype_size(o->dtype), m = tp_tensor_numel(index);
    tp_tensor *iflat, *sflat;
    TP_TRY(tp_tensor_reshape(index, 1, &m, &iflat));
    tp_status st = tp_tensor_reshape(source, 1, &m, &sflat);
    if (st != TP_OK) {
        tp_tensor_free(iflat);
        return st;
    }
    for (int64_t i = 0; i < m && st == TP_OK; i++) {
        int64_t k = *(const int64_t *)(tp__tensor_base(iflat) + i * iflat->strides[0] * 8);
        if (k < -n || k >= n) {
            st = tp_error(TP_ERR_INDEX, "out of range: tried to access index %" PRId64 " on a tensor of %" PRId64 " elements.",
                          k, n);
            break;
        }
        if (k < 0) k += n;
        int64_t off = 0;
        for (int d = o->ndim - 1; d >= 0; d--) {
            off += (k % o->sizes[d]) * o->strides[d];
            k /= o->sizes[d];
        }
        char *d = tp__tensor_base(o) + off * es;
        const char *s = tp__tensor_base(sflat) + i * sflat->strides[0] * es;
        tp_dtype dt = o->dtype;
        if (!acc) {
            memcpy(d, s, (size_t)es);
        } else if (tp_dtype_is_float(dt)) {
            tp__store_f64(d, dt, tp__load_f64(d, dt) + tp__load_f64(s, dt));
        } else if (dt == TP_BOOL) {
            tp__store_i64(d, dt, tp__load_i64(d, dt) || tp__load_i64(s, dt));
        } else {
            tp__store_i64(d, dt, (int64_t)((uint64_t)tp__load_i64(d, dt) + (uint64_t)tp__load_i64(s, dt)));
        }
    }
    tp_tensor_free(iflat);
    tp_tensor_free(sflat);
    return st;
}

/* ---- bucketize(Tensor self, Tensor boundaries, *, bool out_int32=False, bool right=False):
 * for each element the index of its bucket in the sorted 1-d boundaries: the first i with
 * boundaries[i] >= x (right: > x), as PyTorch's binary search decides it (NaN past the end). */
static tp_status bucketize_check(const tp_value *args, tp_tensor **self, tp_tensor **bd) {
    TP_TRY(tp__need_tensor(args, 0, "self", self));
    TP_TRY(tp__need_tensor(args, 1, "boundaries", bd));
    TP_CHECK((*bd)->ndim == 1, TP_ERR_SHAPE, "boundaries tensor must be 1 dimension, but got dim(%d)", (*bd)->ndim);
    TP_CHECK((*self)->dtype != TP_BOOL && (*bd)->dtype != TP_BOOL, TP_ERR_TYPE,
             "bucketize: bool input or boundaries are not supported");
    return TP_OK;
}

static tp_status infer_bucketize(const tp_value *args, tp_value *out) {
    tp_tensor *self, *bd;
    TP_TRY(bucketize_check(args, &self, &bd));
    return tp__out_tensor(out, tp__arg_bool(args, 2) ? TP_INT32 : TP_INT64, self->ndim, self->sizes);
}

static tp_status kernel_bucketize(const tp_value *args, tp_value *out) {
    tp_tensor *self, *bd;
    TP_TRY(bucketize_check(args, &self, &bd));
    bool right = tp__arg_bool(args, 3);
    tp_tensor *o = tp__out_at(out, 0);
    int64_t nb = bd->sizes[0], bs = bd->strides[0] * (int64_t)tp_dtype_size(bd->dtype);
    const char *bb = tp__tensor_base(bd);
    bool ints = !tp_dtype_is_float(self->dtype) && !tp_dtype_is_float(bd->dtype);
    tp_iter it;
    tp__iter_init(&it, self->ndim, self->sizes, 2, (const tp_tensor *[]){o, self});
    while (tp__iter_next(&it)) {
        int64_t lo = 0, hi = nb;
        if (ints) {
            int64_t v = tp__load_i64(it.ptr[1], self->dtype);
            while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2, b = tp__load_i64(bb + mid * bs, bd->dtype);
                if (right ? !(b > v) : !(v <= b)) lo = mid + 1;
                else hi = mid;
            }
        } else {
            double v = tp__load_f64(it.ptr[1], self->dtype);
            while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2;
                double b = tp__load_f64(bb + mid * bs, bd->dtype);
                if (right ? !(b > v) : !(v <= b)) lo = mid + 1;
                else hi = mid;
            }
        }
        tp__store_i64(it.ptr[0], o->dtype, lo);
    }
    return TP_OK;
}

/* ---- registration ------------------------------------------------------ */

/* ---- one_hot(Tensor self, int num_classes) ------------------------------
 * int64 result of shape self.shape + [num_classes]. num_classes=-1 (the
 * largest class + 1) makes the shape depend on the values: refused. */

static tp_status one_hot_plan(const tp_value *args, tp_tensor **self, int64_t *classes) {
    TP_TRY(tp__need_tensor(args, 0, "self", self));
    TP_CHECK((*self)->dtype == TP_INT64, TP_ERR_TYPE, "one_hot is only applicable to index tensor.");
    *classes = tp__arg_int(args, 1);
    TP_CHECK(*classes != -1, TP_ERR_UNSUPPORTED,
             "one_hot with num_classes=-1 takes the number of classes from the values (a data-dependent shape); "
             "pass num_classes");
    TP_CHECK(*classes >= 0, TP_ERR_INVALID_ARG, "num_classes should be positive, got %" PRId64, *classes);
    TP_CHECK(*classes > 0 || tp_tensor_numel(*self) > 0, TP_ERR_INVALID_ARG,
             "Can not infer total number of classes from empty tensor.");
    TP_CHECK((*self)->ndim < TP_MAX_DIMS, TP_ERR_SHAPE, "one_hot of a %d-d tensor would exceed %d dims",
             (*self)->ndim, TP_MAX_DIMS);
    return TP_OK;
}

static tp_status infer_one_hot(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    int64_t classes, sizes[TP_MAX_DIMS];
    TP_TRY(one_hot_plan(args, &self, &classes));
    memcpy(sizes, self->sizes, (size_t)self->ndim * sizeof *sizes);
    sizes[self->ndim] = classes;
    return tp__out_tensor(out, TP_INT64, self->ndim + 1, sizes);
}

static tp_status kernel_one_hot(const tp_value *args, tp_value *out) {
    tp_tensor *self, *o = tp__out_at(out, 0);
    int64_t classes;
    TP_TRY(one_hot_plan(args, &self, &classes));
    TP_TRY(tp__has_data(self, "self"));
    int nd = self->ndim;
    int64_t cs = o->strides[nd];
    char *obase = tp__tensor_base(o);
    tp_iter it;
    tp__iter_init(&it, nd, self->sizes, 1, (const tp_tensor *[]){self});
    while (tp__iter_next(&it)) {
        int64_t v = tp__load_i64(it.ptr[0], TP_INT64);
        TP_CHECK(v >= 0, TP_ERR_INDEX, "Class values must be non-negative.");
        TP_CHECK(v < classes, TP_ERR_INDEX, "Class values must be smaller than num_classes.");
        int64_t off = 0;
        for (int d = 0; d < nd; d++) off += it.index[d] * o->strides[d];
        for (int64_t k = 0; k < classes; k++) {
            int64_t one = k == v;
            memcpy(obase + (off + k * cs) * 8, &one, 8);
        }
    }
    return TP_OK;
}

void tp__register_index_ops(void) {
    tp__register_op(TP_OP_ONE_HOT, "one_hot(Tensor self, int num_classes=-1) -> Tensor", 0, infer_one_hot,
                    kernel_one_hot);
    tp__register_op(TP_OP_INDEX_SELECT, "index_select(Tensor self, int dim, Tensor index) -> Tensor", 0,
                    infer_index_select, kernel_index_select);
    tp__register_op(TP_OP_GATHER, "gather(Tensor self, int dim, Tensor index) -> Tensor", 0, infer_gather,
                    kernel_gather);
    tp__register_op(TP_OP_SCATTER, "scatter(Tensor self, int dim, Tensor index, Tensor|Scalar src) -> Tensor", 0,
                    infer_scatter, kernel_scatter);
    tp__register_op(TP_OP_SCATTER_ADD, "scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", 0,
                    infer_scatter_add, kernel_scatter_add);
    tp__register_op(TP_OP_TAKE, "take(Tensor self, Tensor index) -> Tensor", 0, infer_take, kernel_take);
    tp__register_op(TP_OP_PUT, "put(Tensor self, Tensor index, Tensor source, bool accumulate=False) -> Tensor", 0,
                    infer_put, kernel_put);
    tp__register_op(TP_OP_BUCKETIZE,
                    "bucketize(Tensor self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor", 0,
                    infer_bucketize, kernel_bucketize);
    tp__register_op(TP_OP_TAKE_ALONG_DIM, "take_along_dim(Tensor self, Tensor indices, int? dim=None) -> Tensor", 0,
                    infer_take_along_dim, kernel_take_along_dim);
    tp__register_op(TP_OP_MASKED_FILL, "masked_fill(Tensor self, Tensor mask, Tensor|Scalar value) -> Tensor", 0,
                    infer_masked_fill, kernel_masked_fill);
    tp__register_op(TP_OP_TRIL, "tril(Tensor self, int diagonal=0) -> Tensor", 0, infer_tri, kernel_tril);
    tp__register_op(TP_OP_TRIU, "triu(Tensor self, int diagonal=0) -> Tensor", 0, infer_tri, kernel_triu);
}
