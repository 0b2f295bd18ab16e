/*
 * index.c - index ops: schemas, shape rules and reference kernels for
 * index_select, gather, scatter and scatter_add (out of place),
 * take_along_dim, take and put (flat indices), one_hot, masked_fill, tril
 * and triu, index_add / index_copy / index_fill / index_reduce, scatter_reduce,
 * masked_scatter, searchsorted, histc, histogram, nonzero_static, combinations
 * and fill_diagonal_ (in place).
 * Advanced indexing (index, index_put, nonzero, masked_select) is advindex.c.
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
                                   tp_sdim *sizes) {
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
        tp__dims(s, sizes);
        sizes[*dim] = ix->ndim ? tp__dim(ix, 0) : tp__dimk(1);
    }
    return TP_OK;
}

static tp_status infer_index_select(const tp_value *args, tp_value *out) {
    tp_tensor *self, *index;
    int dim;
    tp_sdim sizes[TP_MAX_DIMS];
    TP_TRY(index_select_plan(args, &self, &index, &dim, sizes));
    return tp__out_dims(out, self->dtype, self->ndim, sizes);
}

static tp_status kernel_index_select(const tp_value *args, tp_value *out) {
    tp_tensor *self, *index, *o = tp__out_at(out, 0);
    int dim;
    tp_sdim sizes[TP_MAX_DIMS];
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
        tp_tensor src, dst; /* views on the stack: no allocation per index */
        tp__view_select(self, dim, idx, &src);
        tp__view_select(o, dim, k, &dst);
        TP_TRY(tp_tensor_copy_(&dst, &src));
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
    if (index->ndim == self->ndim)
        for (int d = 0; d < self->ndim; d++)
            if (d != dim) tp__dim_le(tp__dim(index, d), tp__dim(self, d), "index.size(d) <= self.size(d)");
    return tp__out_like(out, self->dtype, index);
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
    return tp__out_like(out, self->dtype, self);
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
    tp_sdim dims[TP_MAX_DIMS]; /* sizes for the shape rule (dim.h) */
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
        p->dims[0] = tp__dimk(1);
        for (int i = 0; i < ix->ndim; i++) p->dims[0] = tp__dim_mul(p->dims[0], tp__dim(ix, i));
        p->sizes[0] = p->dims[0].v;
        return TP_OK;
    }
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 2), s->ndim, &p->dim));
    TP_CHECK(s->ndim == ix->ndim, TP_ERR_SHAPE,
             "input and indices should have the same number of dimensions, but got %d dimensions for input, and %d "
             "dimensions for indices",
             s->ndim, ix->ndim);
    tp_sdim sd[TP_MAX_DIMS], xd[TP_MAX_DIMS];
    tp__dims(s, sd);
    tp__dims(ix, xd);
    if (s->ndim) sd[p->dim] = xd[p->dim];
    TP_TRY(tp__dims_broadcast(s->ndim, sd, ix->ndim, xd, &p->ndim, p->dims));
    for (int i = 0; i < p->ndim; i++) p->sizes[i] = p->dims[i].v;
    return TP_OK;
}

static tp_status infer_take_along_dim(const tp_value *args, tp_value *out) {
    tp_tensor *self, *indices;
    take_plan p;
    TP_TRY(take_plan_make(args, &self, &indices, &p));
    return tp__out_dims(out, self->dtype, p.ndim, p.dims);
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

static tp_status masked_fill_plan(const tp_value *args, tp_tensor **self, tp_tensor **mask, int *ndim, int64_t *sizes,
                                  tp_sdim *dims) {
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
    tp_sdim a[TP_MAX_DIMS], b[TP_MAX_DIMS];
    TP_TRY(tp__dims_broadcast(tp__dims(*self, a), a, tp__dims(*mask, b), b, ndim, dims));
    for (int i = 0; i < *ndim; i++) sizes[i] = dims[i].v;
    return TP_OK;
}

static tp_status infer_masked_fill(const tp_value *args, tp_value *out) {
    tp_tensor *self, *mask;
    int ndim;
    int64_t sizes[TP_MAX_DIMS];
    tp_sdim dims[TP_MAX_DIMS];
    TP_TRY(masked_fill_plan(args, &self, &mask, &ndim, sizes, dims));
    return tp__out_dims(out, self->dtype, ndim, dims);
}

static tp_status kernel_masked_fill(const tp_value *args, tp_value *out) {
    tp_tensor *self, *mask, *o = tp__out_at(out, 0);
    int ndim;
    int64_t sizes[TP_MAX_DIMS];
    tp_sdim dims[TP_MAX_DIMS];
    TP_TRY(masked_fill_plan(args, &self, &mask, &ndim, sizes, dims));
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
    return tp__out_like(out, self->dtype, self);
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
    return tp__out_like(out, self->dtype, index);
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
    return tp__out_like(out, self->dtype, self);
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
    return tp__out_like(out, tp__arg_bool(args, 2) ? TP_INT32 : TP_INT64, self);
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

/* ---- index_add, index_copy, index_fill, index_reduce ---------------------
 * Out of place: a copy of self whose slices self.select(dim, index[k]) take
 * source.select(dim, k) (index_copy), have it added (index_add, times alpha;
 * the source slice broadcasts as add_ does), are filled with a value
 * (index_fill) or reduced with it (index_reduce: prod, mean, amax, amin; with
 * include_self=False the indexed slices start from the reduction's identity).
 * Repeated indices accumulate in index order (index_copy: the last wins).
 * mean divides by the number of contributions (floor division for integers),
 * amax/amin propagate NaN, as PyTorch does. */

static const char *torch_type_name(tp_dtype dtype) {
    static const char *const names[TP_DTYPE_COUNT] = {"Float", "Double", "Half", "BFloat16", "Long",
                                                      "Int",   "Short",  "Char", "Byte",     "Bool"};
    return (unsigned)dtype < TP_DTYPE_COUNT ? names[dtype] : "?";
}

typedef enum red_kind { RED_SUM, RED_PROD, RED_MEAN, RED_AMAX, RED_AMIN, RED_COPY } red_kind;

static int64_t floor_div_i64(int64_t a, int64_t b) {
    if (b == -1) return (int64_t)(0 - (uint64_t)a);
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}

/* *d = *d (op) *s for one element of dtype dt; scale multiplies s (index_add's alpha). */
static void red_elem(char *d, const char *s, tp_dtype dt, red_kind k, double fscale, int64_t iscale) {
    if (k == RED_COPY) {
        memcpy(d, s, tp_dtype_size(dt));
    } else if (dt == TP_BOOL) {
        uint8_t a = *(uint8_t *)d, b = *(const uint8_t *)s;
        *(uint8_t *)d = (uint8_t)(k == RED_PROD || k == RED_AMIN ? (a && b) : (a || b));
    } else if (tp_dtype_is_float(dt)) {
        double a = tp__load_f64(d, dt), b = tp__load_f64(s, dt), r;
        switch (k) {
        case RED_PROD: r = a * b; break;
        case RED_AMAX: r = isnan(a) || isnan(b) ? NAN : a > b ? a : b; break;
        case RED_AMIN: r = isnan(a) || isnan(b) ? NAN : a < b ? a : b; break;
        default: r = a + (fscale == 1.0 ? b : fscale * b); break;
        }
        tp__store_f64(d, dt, r);
    } else {
        int64_t a = tp__load_i64(d, dt), b = tp__load_i64(s, dt), r;
        switch (k) {
        case RED_PROD: r = (int64_t)((uint64_t)a * (uint64_t)b); break;
        case RED_AMAX: r = a > b ? a : b; break;
        case RED_AMIN: r = a < b ? a : b; break;
        default: r = (int64_t)((uint64_t)a + (uint64_t)b * (uint64_t)iscale); break;
        }
        tp__store_i64(d, dt, r);
    }
}

/* The identity of a reduction (include_self=False starts from it). */
static void red_identity(char *d, tp_dtype dt, red_kind k) {
    if (dt == TP_BOOL) *(uint8_t *)d = k == RED_PROD || k == RED_AMIN;
    else if (tp_dtype_is_float(dt))
        tp__store_f64(d, dt, k == RED_PROD ? 1.0 : k == RED_AMAX ? -INFINITY : k == RED_AMIN ? INFINITY : 0.0);
    else {
        int64_t lo = dt == TP_INT64 ? INT64_MIN : dt == TP_INT32 ? INT32_MIN : dt == TP_INT16 ? INT16_MIN
                     : dt == TP_INT8 ? INT8_MIN : 0;
        int64_t hi = dt == TP_INT64 ? INT64_MAX : dt == TP_INT32 ? INT32_MAX : dt == TP_INT16 ? INT16_MAX
                     : dt == TP_INT8 ? INT8_MAX : 255;
        tp__store_i64(d, dt, k == RED_PROD ? 1 : k == RED_AMAX ? lo : k == RED_AMIN ? hi : 0);
    }
}

/* *d /= count (mean's division: floor division for integers). */
static void red_divide(char *d, tp_dtype dt, int64_t count) {
    if (tp_dtype_is_float(dt)) tp__store_f64(d, dt, tp__load_f64(d, dt) / (double)count);
    else tp__store_i64(d, dt, floor_div_i64(tp__load_i64(d, dt), count));
}

static tp_status parse_reduce(const char *s, bool scatter, red_kind *k) {
    if (s && strcmp(s, "prod") == 0) *k = RED_PROD;
    else if (s && strcmp(s, "mean") == 0) *k = RED_MEAN;
    else if (s && strcmp(s, "amax") == 0) *k = RED_AMAX;
    else if (s && strcmp(s, "amin") == 0) *k = RED_AMIN;
    else if (s && scatter && strcmp(s, "sum") == 0) *k = RED_SUM;
    else if (scatter)
        return tp_error(TP_ERR_INVALID_ARG, "reduce argument must be either sum, prod, mean, amax or amin, got %s",
                        s ? s : "None");
    else
        return tp_error(TP_ERR_INVALID_ARG, "Expected reduce to be one of prod, mean, amax or amin but got %s.",
                        s ? s : "None");
    return TP_OK;
}

typedef enum index_kind { IX_ADD, IX_COPY, IX_FILL, IX_REDUCE } index_kind;

/* The checks of index_add / index_copy / index_fill / index_reduce, in
 * PyTorch's order and words. src is NULL for index_fill. */
static tp_status index_func_plan(index_kind kind, const tp_value *args, tp_tensor **self, tp_tensor **index,
                                 tp_tensor **src, int *dim) {
    TP_TRY(tp__need_tensor(args, 0, "self", self));
    TP_TRY(tp__need_tensor(args, 2, "index", index));
    tp_tensor *s = *self, *ix = *index, *so = NULL;
    if (kind != IX_FILL) TP_TRY(tp__need_tensor(args, 3, "source", &so));
    *src = so;
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), s->ndim, dim));
    int64_t n = tp_tensor_numel(ix);
    char b1[256], b2[256];
    if (kind == IX_FILL) {
        TP_CHECK(ix->dtype == TP_INT64, TP_ERR_TYPE, "Expected dtype int64 for index.");
        TP_CHECK(ix->ndim <= 1, TP_ERR_SHAPE, "Index has to be a vector/scalar");
        const tp_tensor *value = tp__arg_tensor(args, 3);
        TP_CHECK(value || tp_value_is_number(&args[3]), TP_ERR_TYPE, "value must be a Tensor or a number, not %s",
                 tp_value_kind_name(args[3].kind));
        TP_CHECK(!value || value->ndim == 0, TP_ERR_SHAPE,
                 "only supports a 0-dimensional value tensor, but got tensor with %d dimension(s).",
                 value ? value->ndim : 0);
        return TP_OK;
    }
    if (kind == IX_COPY) {
        TP_CHECK(ix->ndim <= 1, TP_ERR_INDEX, "Index should have dimension 1 or 0 (got %d)", ix->ndim);
        int64_t ns = so->ndim ? so->sizes[*dim < so->ndim ? *dim : 0] : 1;
        TP_CHECK(so->ndim == 0 || *dim < so->ndim, TP_ERR_INDEX,
                 "Indexing dim %d is out of bounds of the source tensor with dim %d", *dim, so->ndim);
        TP_CHECK(n == ns, TP_ERR_INDEX,
                 "Number of indices (%" PRId64 ") should be equal to source.size(dim) (%" PRId64 ")", n, ns);
        TP_CHECK(ix->dtype == TP_INT64, TP_ERR_TYPE, "Expected a long tensor for index, but got %s",
                 torch_type_name(ix->dtype));
        TP_CHECK(s->dtype == so->dtype, TP_ERR_TYPE,
                 "self and source expected to have the same dtype, but got (self) %s and (source) %s",
                 torch_type_name(s->dtype), torch_type_name(so->dtype));
        TP_CHECK(s->ndim == 0 || so->ndim == 0 || s->ndim == so->ndim, TP_ERR_INDEX,
                 "When source and destination are not scalars, their dimensionality must match. Source "
                 "dimensionality (%d), destination dimensionality (%d)",
                 so->ndim, s->ndim);
        if (s->ndim && so->ndim)
            for (int d = 0; d < s->ndim; d++)
                TP_CHECK(d == *dim || s->sizes[d] == so->sizes[d], TP_ERR_SHAPE,
                         "Source/destination tensor must have same slice shapes. Destination slice shape: %s at "
                         "dimension %d and source slice shape: %s at dimension %d.",
                         tp__shape_str(1, &s->sizes[d], b1, sizeof b1), *dim,
                         tp__shape_str(1, &so->sizes[d], b2, sizeof b2), *dim);
        return TP_OK;
    }
    TP_CHECK(ix->ndim <= 1, TP_ERR_INDEX, "Index is supposed to be a vector, but got dim: %d with type: %s and size: %s",
             ix->ndim, torch_type_name(ix->dtype), tp__shape_str(ix->ndim, ix->sizes, b1, sizeof b1));
    TP_CHECK(ix->dtype == TP_INT64 || ix->dtype == TP_INT32, TP_ERR_TYPE,
             "Expected dtype int32/int64 for index but got: %s", torch_type_name(ix->dtype));
    TP_CHECK(s->dtype == so->dtype, TP_ERR_TYPE, "self (%s) and source (%s) must have the same scalar type",
             torch_type_name(s->dtype), torch_type_name(so->dtype));
    TP_CHECK(*dim == 0 || *dim < so->ndim, TP_ERR_INDEX,
             "Indexing dim %d is out of bounds of the source tensor with dim %d", *dim, so->ndim);
    int64_t ns = so->ndim ? so->sizes[*dim] : 1;
    TP_CHECK(n == ns, TP_ERR_SHAPE,
             "Number of indices (%" PRId64 ") should be equal to source.size(dim): (%" PRId64 "), for dim: %d", n, ns,
             *dim);
    if (kind == IX_REDUCE) {
        red_kind rk;
        TP_TRY(parse_reduce(tp__arg_str(args, 4), false, &rk));
        /* PyTorch 1.13 reduces bool tensors of 2+ dims with prod/amax/amin over self only */
        TP_CHECK(s->dtype != TP_BOOL || (rk != RED_MEAN && tp__arg_bool(args, 5)), TP_ERR_TYPE,
                 "\"index_reduce\" not implemented for 'Bool' (%s)", rk == RED_MEAN ? "mean" : "include_self=False");
    }
    /* the source slice must broadcast to self's slice (index_add is add_ on them) */
    int sn = s->ndim ? s->ndim - 1 : 0, on = so->ndim ? so->ndim - 1 : 0;
    int64_t ssl[TP_MAX_DIMS], osl[TP_MAX_DIMS];
    for (int d = 0, k = 0; d < s->ndim; d++)
        if (d != *dim) ssl[k++] = s->sizes[d];
    for (int d = 0, k = 0; d < so->ndim; d++)
        if (d != *dim) osl[k++] = so->sizes[d];
    if (s->ndim == 0) sn = 0;
    if (so->ndim == 0) on = 0;
    TP_CHECK(on <= sn, TP_ERR_SHAPE, "source slice of shape %s cannot be broadcast to self's slice of shape %s",
             tp__shape_str(on, osl, b1, sizeof b1), tp__shape_str(sn, ssl, b2, sizeof b2));
    for (int i = 0; i < on; i++) {
        int64_t a = ssl[sn - on + i], b = osl[i];
        TP_CHECK(b == a || b == 1, TP_ERR_SHAPE,
                 "The size of tensor a (%" PRId64 ") must match the size of tensor b (%" PRId64
                 ") at non-singleton dimension %d",
                 a, b, i + sn - on);
    }
    return TP_OK;
}

static tp_status infer_index_func(index_kind kind, const tp_value *args, tp_value *out) {
    tp_tensor *self, *index, *src;
    int dim;
    TP_TRY(index_func_plan(kind, args, &self, &index, &src, &dim));
    return tp__out_like(out, self->dtype, self);
}

/* A view of t's slice at position i along dim (t itself, retained, when 0-d). */
static tp_status slice_at(tp_tensor *t, int dim, int64_t i, tp_tensor **out) {
    if (t->ndim == 0) {
        *out = tp_tensor_retain(t);
        return TP_OK;
    }
    return tp_tensor_select(t, dim, i, out);
}

/* dst (op)= src elementwise, src broadcast to dst's shape. */
static void red_slices(tp_tensor *dst, const tp_tensor *src, red_kind k, double fs, int64_t is) {
    tp_tensor sb = *src;
    sb.ndim = dst->ndim;
    for (int d = 0; d < dst->ndim; d++) {
        int sd = d - (dst->ndim - src->ndim);
        sb.sizes[d] = dst->sizes[d];
        sb.strides[d] = sd >= 0 && src->sizes[sd] != 1 ? src->strides[sd] : 0;
    }
    tp_iter it;
    tp__iter_init(&it, dst->ndim, dst->sizes, 2, (const tp_tensor *[]){dst, &sb});
    while (tp__iter_next(&it)) red_elem(it.ptr[0], it.ptr[1], dst->dtype, k, fs, is);
}

static void fill_slice(tp_tensor *dst, const char *value) {
    size_t es = tp_dtype_size(dst->dtype);
    tp_iter it;
    tp__iter_init(&it, dst->ndim, dst->sizes, 1, (const tp_tensor *[]){dst});
    while (tp__iter_next(&it)) memcpy(it.ptr[0], value, es);
}

static tp_status kernel_index_func(index_kind kind, const tp_value *args, tp_value *out) {
    tp_tensor *self, *index, *src, *o = tp__out_at(out, 0);
    int dim;
    TP_TRY(index_func_plan(kind, args, &self, &index, &src, &dim));
    TP_TRY(tp__has_data(self, "self"));
    TP_TRY(tp__has_data(index, "index"));
    TP_TRY(tp__has_data(src, "source"));
    TP_TRY(tp_tensor_copy_(o, self));
    red_kind rk = kind == IX_COPY ? RED_COPY : RED_SUM;
    bool include_self = true;
    double fs = 1.0;
    int64_t is = 1;
    char value[8];
    if (kind == IX_REDUCE) {
        TP_TRY(parse_reduce(tp__arg_str(args, 4), false, &rk));
        include_self = tp__arg_bool(args, 5);
    } else if (kind == IX_ADD) {
        fs = tp__arg_f64(args, 4);
        is = tp__arg_int(args, 4);
    } else if (kind == IX_FILL) {
        TP_TRY(tp__scalar_to_elem(&args[3], self->dtype, value));
    }
    int64_t n = tp_tensor_numel(index), limit = self->ndim ? self->sizes[dim] : 1;
    int64_t istride = index->ndim ? index->strides[0] : 0;
    size_t ies = tp_dtype_size(index->dtype);
    const char *ibase = tp__tensor_base(index);
    int64_t *counts = NULL;
    if (rk == RED_MEAN) {
        counts = tp_calloc((size_t)limit, sizeof *counts);
        TP_CHECK(counts != NULL, TP_ERR_NOMEM, "out of memory for %" PRId64 " counts", limit);
    }
    tp_status st = TP_OK;
    /* pass 0 (include_self=False): the indexed slices start at the identity */
    for (int pass = include_self ? 1 : 0; pass < 2 && st == TP_OK; pass++) {
        for (int64_t k = 0; k < n && st == TP_OK; k++) {
            int64_t given = tp__load_i64(ibase + k * istride * (int64_t)ies, index->dtype), idx = given;
            if (kind == IX_FILL && idx < 0) idx += limit;
            if (idx < 0 || idx >= limit) {
                if (kind == IX_ADD || kind == IX_REDUCE) st = tp_error(TP_ERR_INDEX, "index out of range in self");
                else
                    st = tp_error(TP_ERR_INDEX, "index %" PRId64 " is out of bounds for dimension %d with size %" PRId64,
                                  given, dim, limit);
                break;
            }
            tp_tensor *dst = NULL, *sv = NULL;
            st = slice_at(o, dim, idx, &dst);
            if (st == TP_OK && src) st = slice_at(src, dim, k, &sv);
            if (st == TP_OK) {
                if (kind == IX_FILL) fill_slice(dst, value);
                else if (pass == 0) {
                    char id[8];
                    red_identity(id, o->dtype, rk);
                    fill_slice(dst, id);
                } else {
                    red_slices(dst, sv, rk, fs, is);
                    if (counts) counts[idx]++;
                }
            }
            tp_tensor_free(dst);
            tp_tensor_free(sv);
        }
    }
    for (int64_t i = 0; counts && st == TP_OK && i < limit; i++) {
        int64_t c = counts[i] + (include_self ? 1 : 0);
        if (counts[i] == 0 || c <= 1) continue;
        tp_tensor *dst = NULL;
        st = slice_at(o, dim, i, &dst);
        if (st != TP_OK) break;
        tp_iter it;
        tp__iter_init(&it, dst->ndim, dst->sizes, 1, (const tp_tensor *[]){dst});
        while (tp__iter_next(&it)) red_divide(it.ptr[0], o->dtype, c);
        tp_tensor_free(dst);
    }
    tp_free(counts);
    return st;
}

#define INDEX_FUNC_OP(nm, kind)                                                                                \
    static tp_status infer_##nm(const tp_value *args, tp_value *out) { return infer_index_func(kind, args, out); } \
    static tp_status kernel_##nm(const tp_value *args, tp_value *out) { return kernel_index_func(kind, args, out); }
INDEX_FUNC_OP(index_add, IX_ADD)
INDEX_FUNC_OP(index_copy, IX_COPY)
INDEX_FUNC_OP(index_fill, IX_FILL)
INDEX_FUNC_OP(index_reduce, IX_REDUCE)

/* ---- scatter_reduce(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True)
 * Out of place: scatter_add's walk with sum, prod, mean, amax or amin; with
 * include_self=False the scattered positions start at the identity; mean
 * divides by the number of contributions (floor division for integers). */

static tp_status scatter_reduce_plan(const tp_value *args, tp_tensor **self, tp_tensor **index, int *dim,
                                     red_kind *rk) {
    TP_TRY(tp__need_tensor(args, 3, "src", &(tp_tensor *){NULL}));
    TP_TRY(scatter_plan(args, self, index, dim));
    TP_TRY(parse_reduce(tp__arg_str(args, 4), true, rk));
    TP_CHECK(*rk != RED_MEAN || (*self)->dtype != TP_BOOL, TP_ERR_TYPE,
             "\"scatter_reduce\" with reduce='mean' not implemented for 'Bool'");
    return TP_OK;
}

static tp_status infer_scatter_reduce(const tp_value *args, tp_value *out) {
    tp_tensor *self, *index;
    int dim;
    red_kind rk;
    TP_TRY(scatter_reduce_plan(args, &self, &index, &dim, &rk));
    return tp__out_like(out, self->dtype, self);
}

static tp_status kernel_scatter_reduce(const tp_value *args, tp_value *out) {
    tp_tensor *self, *index, *o = tp__out_at(out, 0), *src = tp__arg_tensor(args, 3);
    int dim;
    red_kind rk;
    TP_TRY(scatter_reduce_plan(args, &self, &index, &dim, &rk));
    TP_TRY(tp__has_data(self, "self"));
    TP_TRY(tp__has_data(index, "index"));
    TP_TRY(tp__has_data(src, "src"));
    TP_TRY(tp_tensor_copy_(o, self));
    if (tp_tensor_numel(index) == 0) return TP_OK;
    bool include_self = tp__arg_bool(args, 5);
    tp_dtype dt = o->dtype;
    size_t es = tp_dtype_size(dt);
    int64_t limit = nonempty_size(self, dim), dstride = nonempty_stride(o, dim), numel = tp_tensor_numel(o);
    char *obase = tp__tensor_base(o);
    int64_t *counts = NULL, cs[TP_MAX_DIMS];
    tp__contiguous_strides(o->ndim, o->sizes, cs); /* mean's counts are kept by C-order position */
    if (rk == RED_MEAN) {
        counts = tp_calloc((size_t)numel, sizeof *counts);
        TP_CHECK(counts != NULL, TP_ERR_NOMEM, "out of memory for %" PRId64 " counts", numel);
    }
    for (int pass = include_self ? 1 : 0; pass < 2; pass++) {
        tp_iter it;
        tp__iter_init(&it, index->ndim, index->sizes, 2, (const tp_tensor *[]){index, src});
        while (tp__iter_next(&it)) {
            int64_t idx = tp__load_i64(it.ptr[0], TP_INT64);
            if (idx < 0 || idx >= limit) {
                tp_free(counts);
                return tp_error(TP_ERR_INDEX, "index %" PRId64 " is out of bounds for dimension %d with size %" PRId64,
                                idx, dim, limit);
            }
            int64_t off = idx * dstride, lin = o->ndim ? idx * cs[dim] : 0;
            if (o->ndim)
                for (int d = 0; d < index->ndim; d++)
                    if (d != dim) {
                        off += it.index[d] * o->strides[d];
                        lin += it.index[d] * cs[d];
                    }
            char *p = obase + off * (int64_t)es;
            if (pass == 0) {
                red_identity(p, dt, rk);
            } else {
                red_elem(p, it.ptr[1], dt, rk, 1.0, 1);
                if (counts) counts[lin]++;
            }
        }
    }
    if (counts) {
        tp_iter it;
        int64_t i = 0;
        tp__iter_init(&it, o->ndim, o->sizes, 1, (const tp_tensor *[]){o});
        while (tp__iter_next(&it)) {
            int64_t c = counts[i] + (include_self ? 1 : 0);
            if (counts[i++] > 0 && c > 1) red_divide(it.ptr[0], dt, c);
        }
    }
    tp_free(counts);
    return TP_OK;
}

/* ---- masked_scatter(Tensor self, Tensor mask, Tensor source) ------------
 * self and mask broadcast; the positions where mask is true take source's
 * elements in order (source read in C order). */

static tp_status masked_scatter_plan(const tp_value *args, tp_tensor **self, tp_tensor **mask, tp_tensor **source,
                                     int *ndim, int64_t *sizes, tp_sdim *dims) {
    TP_TRY(tp__need_tensor(args, 0, "self", self));
    TP_TRY(tp__need_tensor(args, 1, "mask", mask));
    TP_TRY(tp__need_tensor(args, 2, "source", source));
    TP_CHECK((*mask)->dtype == TP_BOOL, TP_ERR_TYPE,
             "only supports boolean masks, but got mask with dtype %s", tp_dtype_name((*mask)->dtype));
    TP_CHECK((*self)->dtype == (*source)->dtype, TP_ERR_TYPE,
             "expected self and source to have same dtypes but got %s and %s",
             torch_type_name((*self)->dtype), torch_type_name((*source)->dtype));
    tp_sdim a[TP_MAX_DIMS], b[TP_MAX_DIMS];
    TP_TRY(tp__dims_broadcast(tp__dims(*self, a), a, tp__dims(*mask, b), b, ndim, dims));
    for (int i = 0; i < *ndim; i++) sizes[i] = dims[i].v;
    return TP_OK;
}

static tp_status infer_masked_scatter(const tp_value *args, tp_value *out) {
    tp_tensor *self, *mask, *source;
    int ndim;
    int64_t sizes[TP_MAX_DIMS];
    tp_sdim dims[TP_MAX_DIMS];
    TP_TRY(masked_scatter_plan(args, &self, &mask, &source, &ndim, sizes, dims));
    return tp__out_dims(out, self->dtype, ndim, dims);
}

static tp_status kernel_masked_scatter(const tp_value *args, tp_value *out) {
    tp_tensor *self, *mask, *source, *o = tp__out_at(out, 0);
    int ndim;
    int64_t sizes[TP_MAX_DIMS];
    tp_sdim dims[TP_MAX_DIMS];
    TP_TRY(masked_scatter_plan(args, &self, &mask, &source, &ndim, sizes, dims));
    TP_TRY(tp__has_data(self, "self"));
    TP_TRY(tp__has_data(mask, "mask"));
    TP_TRY(tp__has_data(source, "source"));
    int64_t ones = 0, n = tp_tensor_numel(source);
    tp_iter it;
    tp__iter_init(&it, o->ndim, o->sizes, 2, (const tp_tensor *[]){o, mask});
    while (tp__iter_next(&it)) ones += *(const uint8_t *)it.ptr[1] != 0;
    TP_CHECK(ones <= n, TP_ERR_SHAPE, "Number of elements of source < number of ones in mask");
    size_t es = tp_dtype_size(self->dtype);
    tp_iter is;
    tp__iter_init(&is, source->ndim, source->sizes, 1, (const tp_tensor *[]){source});
    tp__iter_init(&it, o->ndim, o->sizes, 3, (const tp_tensor *[]){o, self, mask});
    while (tp__iter_next(&it)) {
        if (*(const uint8_t *)it.ptr[2]) {
            tp__iter_next(&is);
            memcpy(it.ptr[0], is.ptr[0], es);
        } else {
            memcpy(it.ptr[0], it.ptr[1], es);
        }
    }
    return TP_OK;
}

/* ---- searchsorted(Tensor sorted_sequence, Tensor self, *, bool out_int32=False, bool right=False,
 * str? side=None, Tensor? sorter=None) (and a Scalar self): for each value the index of its place in
 * the sorted innermost dim of sorted_sequence (1-d, or matching self's leading dims): the first i
 * with seq[i] >= v (right / side='right': > v), through sorter when given. */

typedef struct ss_plan {
    tp_tensor *seq, *self, *sorter;
    bool right, scalar;
} ss_plan;

static tp_status searchsorted_plan(const tp_value *args, ss_plan *p) {
    char b1[256], b2[256];
    TP_TRY(tp__need_tensor(args, 0, "sorted_sequence", &p->seq));
    p->self = tp__arg_tensor(args, 1);
    p->scalar = p->self == NULL;
    TP_CHECK(p->self || tp_value_is_number(&args[1]), TP_ERR_TYPE, "self must be a Tensor or a number, not %s",
             tp_value_kind_name(args[1].kind));
    const char *side = tp__arg_str(args, 4);
    p->right = tp__arg_bool(args, 3);
    p->sorter = tp__arg_tensor(args, 5);
    tp_tensor *sq = p->seq;
    if (side) {
        TP_CHECK(strcmp(side, "left") == 0 || strcmp(side, "right") == 0, TP_ERR_INVALID_ARG,
                 "side can only be 'left' or 'right' but got %s", side);
        bool is_right = strcmp(side, "right") == 0;
        TP_CHECK(!p->right || is_right, TP_ERR_INVALID_ARG,
                 "side and right can't be set to opposites, got side of %s while right was True",
                 side);
        p->right = is_right;
    }
    TP_CHECK(sq->ndim > 0, TP_ERR_SHAPE,
             "boundaries tensor should have positive dimension, but got 0 dimension");
    if (p->sorter) {
        TP_CHECK(p->sorter->dtype == TP_INT64, TP_ERR_TYPE,
                 "sorter must be a tensor of long dtype but got dtype %s",
                 torch_type_name(p->sorter->dtype));
        TP_CHECK(p->sorter->ndim == sq->ndim && !memcmp(p->sorter->sizes, sq->sizes, (size_t)sq->ndim * 8),
                 TP_ERR_SHAPE,
                 "boundary and sorter must have the same size, but got boundary tensor %sand "
                 "got sorter tensor %s",
                 tp__shape_str(sq->ndim, sq->sizes, b1, sizeof b1),
                 tp__shape_str(p->sorter->ndim, p->sorter->sizes, b2, sizeof b2));
    }
    if (p->self && sq->ndim != 1) {
        bool ok = p->self->ndim == sq->ndim &&
                  !memcmp(p->self->sizes, sq->sizes, (size_t)(sq->ndim - 1) * sizeof *sq->sizes);
        TP_CHECK(ok, TP_ERR_SHAPE,
                 "boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                 "boundaries tensor and input value tensor must match, but we got boundaries tensor %s and input "
                 "value tensor %s",
                 tp__shape_str(sq->ndim, sq->sizes, b1, sizeof b1),
                 tp__shape_str(p->self->ndim, p->self->sizes, b2, sizeof b2));
    }
    TP_CHECK(!p->scalar || sq->ndim == 1, TP_ERR_SHAPE,
             "input value can be a scalar only when boundaries tensor dimension is 1, but we "
             "got boundaries tensor dim(%d) and input value's dim(0) numel(1)",
             sq->ndim);
    TP_CHECK(sq->dtype != TP_BOOL && (!p->self || p->self->dtype != TP_BOOL), TP_ERR_TYPE,
             "\"searchsorted_out_cpu\" not implemented for 'Bool'");
    return TP_OK;
}

static tp_status infer_searchsorted(const tp_value *args, tp_value *out) {
    ss_plan p;
    TP_TRY(searchsorted_plan(args, &p));
    tp_dtype dt = tp__arg_bool(args, 2) ? TP_INT32 : TP_INT64;
    return p.scalar ? tp__out_dims(out, dt, 0, NULL) : tp__out_like(out, dt, p.self);
}

static tp_status kernel_searchsorted(const tp_value *args, tp_value *out) {
    ss_plan p;
    TP_TRY(searchsorted_plan(args, &p));
    TP_TRY(tp__has_data(p.seq, "sorted_sequence"));
    TP_TRY(tp__has_data(p.self, "self"));
    TP_TRY(tp__has_data(p.sorter, "sorter"));
    tp_tensor *o = tp__out_at(out, 0), *vals = p.self, *tmp = NULL;
    if (p.scalar) {
        /* PyTorch wraps the scalar as a double (or long) tensor */
        TP_TRY(tp__as_tensor(&args[1], args[1].kind == TP_VAL_FLOAT ? TP_FLOAT64 : TP_INT64, &tmp));
        vals = tmp;
    }
    tp_tensor *sq = p.seq;
    int nd = sq->ndim;
    int64_t nb = sq->sizes[nd - 1], bs = sq->strides[nd - 1] * (int64_t)tp_dtype_size(sq->dtype);
    int64_t ss = p.sorter ? p.sorter->strides[nd - 1] * 8 : 0;
    bool ints = !tp_dtype_is_float(vals->dtype) && !tp_dtype_is_float(sq->dtype);
    tp_status st = TP_OK;
    tp_iter it;
    tp__iter_init(&it, vals->ndim, vals->sizes, 2, (const tp_tensor *[]){o, vals});
    while (tp__iter_next(&it) && st == TP_OK) {
        /* the row of sorted_sequence (and sorter) for this value */
        int64_t roff = 0, soff = 0;
        for (int d = 0; nd > 1 && d < nd - 1; d++) {
            roff += it.index[d] * sq->strides[d];
            if (p.sorter) soff += it.index[d] * p.sorter->strides[d];
        }
        const char *bb = tp__tensor_base(sq) + roff * (int64_t)tp_dtype_size(sq->dtype);
        const char *sb = p.sorter ? tp__tensor_base(p.sorter) + soff * 8 : NULL;
        int64_t lo = 0, hi = nb;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2, j = mid;
            if (sb) {
                j = tp__load_i64(sb + mid * ss, TP_INT64);
                if (j < 0 || j >= nb) {
                    st = tp_error(TP_ERR_INDEX, "sorter index %" PRId64
                                  " is out of bounds for the boundaries' size %" PRId64, j, nb);
                    break;
                }
            }
            bool go_right;
            if (ints) {
                int64_t v = tp__load_i64(it.ptr[1], vals->dtype), b = tp__load_i64(bb + j * bs, sq->dtype);
                go_right = p.right ? !(b > v) : !(v <= b);
            } else {
                double v = tp__load_f64(it.ptr[1], vals->dtype), b = tp__load_f64(bb + j * bs, sq->dtype);
                go_right = p.right ? !(b > v) : !(v <= b);
            }
            if (go_right) lo = mid + 1;
            else hi = mid;
        }
        tp__store_i64(it.ptr[0], o->dtype, lo);
    }
    tp_tensor_free(tmp);
    return st;
}

/* ---- histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) and
 * histogram(Tensor self, Tensor|Scalar bins=100, *, float[]? range=None, Tensor? weight=None,
 * bool density=False) -> (hist, bin_edges) ---------------------------------
 * Equal-width bins over [min, max] as torch.linspace(min, max, bins + 1)
 * makes them in the dtype, or (histogram) the given edges. Values outside
 * (and NaN) are left out, the last edge falls in the last bin. histc: min
 * and max both 0 take the input's range, equal bounds widen to
 * [min - 1, max + 1]; histogram: no range takes the input's ([0, 1] when
 * empty), equal bounds widen by 0.5. PyTorch's binning: histc's bin is the
 * linear guess (x - min) * bins / (max - min) computed in the dtype;
 * histogram refines that guess against the edges; given edges are found by
 * binary search. (PyTorch 1.13's histc bins NaN by an undefined
 * float-to-int conversion; here NaN is left out.) Floating inputs, no
 * float16 (PyTorch 1.13 has no half kernel). */

typedef enum hist_kind { HIST_LINEAR, HIST_LOCAL_SEARCH, HIST_EDGES } hist_kind;

/* The bin of v among edges[0..bins] (-1 outside them or NaN): PyTorch's
 * linear guess computed in dt, refined by a search unless kind is
 * HIST_LINEAR; the last edge falls in the last bin. */
static int64_t hist_bin(double v, const double *edges, int64_t bins, hist_kind kind, tp_dtype dt) {
    double lo = edges[0], hi = edges[bins];
    if (!(v >= lo && v <= hi)) return -1;
    int64_t pos, a = 0, b = bins + 1;
    if (kind != HIST_EDGES) {
        pos = dt == TP_FLOAT32 ? (int64_t)(((float)v - (float)lo) * (float)bins / ((float)hi - (float)lo))
                               : (int64_t)((v - lo) * (double)bins / (hi - lo));
        if (kind == HIST_LINEAR) return pos == bins ? pos - 1 : pos >= 0 && pos < bins ? pos : -1;
        a = pos - 1 > 0 ? pos - 1 : 0;
        b = pos + 2 < bins + 1 ? pos + 2 : bins + 1;
    }
    while (a < b) { /* std::upper_bound over edges[a, b) */
        int64_t m = a + (b - a) / 2;
        if (!(v < edges[m])) a = m + 1;
        else b = m;
    }
    pos = a - 1;
    if (pos == bins) pos -= 1;
    return pos >= 0 && pos < bins ? pos : -1;
}

/* hist[bins] (zeroed by the caller) += the weights (1 without) of self's values. */
static void hist_fill(const tp_tensor *self, const tp_tensor *weight, const double *edges, int64_t bins,
                      hist_kind kind, double *hist) {
    tp_iter it;
    tp__iter_init(&it, self->ndim, self->sizes, weight ? 2 : 1, (const tp_tensor *[]){self, weight});
    while (tp__iter_next(&it)) {
        int64_t pos = hist_bin(tp__load_f64(it.ptr[0], self->dtype), edges, bins, kind, self->dtype);
        if (pos >= 0) hist[pos] += weight ? tp__load_f64(it.ptr[1], weight->dtype) : 1.0;
    }
}

/* edges[0..bins] as torch.linspace(lo, hi, bins + 1) in dtype dt. */
static void hist_linspace(double lo, double hi, int64_t bins, tp_dtype dt, double *edges) {
    int64_t half = (bins + 1) / 2;
    if (dt == TP_FLOAT32) {
        float step = ((float)hi - (float)lo) / (float)bins;
        for (int64_t i = 0; i <= bins; i++)
            edges[i] = i < half ? (float)lo + step * (float)i : (float)hi - step * (float)(bins - i);
    } else {
        double step = (hi - lo) / (double)bins;
        for (int64_t i = 0; i <= bins; i++) edges[i] = i < half ? lo + step * (double)i : hi - step * (double)(bins - i);
    }
}

/* The input's range (NaN when it holds one). */
static void hist_minmax(const tp_tensor *self, double *lo, double *hi) {
    double mn = INFINITY, mx = -INFINITY;
    bool nan = false;
    tp_iter it;
    tp__iter_init(&it, self->ndim, self->sizes, 1, (const tp_tensor *[]){self});
    while (tp__iter_next(&it)) {
        double v = tp__load_f64(it.ptr[0], self->dtype);
        if (isnan(v)) nan = true;
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
    }
    *lo = nan ? NAN : mn;
    *hi = nan ? NAN : mx;
}

static tp_status hist_dtype(tp_dtype dt, const char *what) {
    TP_CHECK(dt == TP_FLOAT32 || dt == TP_FLOAT64, TP_ERR_TYPE, "\"%s\" not implemented for '%s'", what,
             torch_type_name(dt));
    return TP_OK;
}

static tp_status hist_bins(int64_t bins) {
    TP_CHECK(bins > 0, TP_ERR_INVALID_ARG, "bins must be > 0, but got %" PRId64 " for dimension 0", bins);
    TP_CHECK(bins < ((int64_t)1 << 40), TP_ERR_NOMEM, "%" PRId64 " bins are too many", bins);
    return TP_OK;
}

static tp_status histc_check(const tp_value *args, tp_tensor **self) {
    TP_TRY(tp__need_tensor(args, 0, "self", self));
    TP_TRY(hist_dtype((*self)->dtype, "histogram_cpu"));
    TP_TRY(hist_bins(tp__arg_int(args, 1)));
    TP_CHECK(!(tp__arg_f64(args, 3) < tp__arg_f64(args, 2)), TP_ERR_INVALID_ARG, "max must be larger than min");
    return TP_OK;
}

static tp_status infer_histc(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    TP_TRY(histc_check(args, &self));
    return tp__out_dims(out, self->dtype, 1, (tp_sdim[]){tp__dimk(tp__arg_int(args, 1))});
}

/* Write hist[bins] into the 1-d o (density: divided by scale and widths[i]). */
static void hist_store(tp_tensor *o, const double *hist, int64_t bins, double scale, const double *widths) {
    char *ob = tp__tensor_base(o);
    int64_t bs = o->strides[0] * (int64_t)tp_dtype_size(o->dtype);
    for (int64_t i = 0; i < bins; i++)
        tp__store_f64(ob + i * bs, o->dtype, widths ? hist[i] / scale / widths[i] : hist[i]);
}

static tp_status kernel_histc(const tp_value *args, tp_value *out) {
    tp_tensor *self, *o = tp__out_at(out, 0);
    TP_TRY(histc_check(args, &self));
    TP_TRY(tp__has_data(self, "self"));
    int64_t bins = tp__arg_int(args, 1);
    double lo = tp__arg_f64(args, 2), hi = tp__arg_f64(args, 3);
    if (lo == hi && tp_tensor_numel(self) > 0) hist_minmax(self, &lo, &hi);
    if (lo == hi) {
        lo -= 1;
        hi += 1;
    }
    TP_CHECK(isfinite(lo) && isfinite(hi), TP_ERR_INVALID_ARG, "range of [%g, %g] is not finite", lo, hi);
    double *buf = tp_calloc((size_t)(2 * bins + 1), sizeof *buf);
    TP_CHECK(buf != NULL, TP_ERR_NOMEM, "out of memory for %" PRId64 " bins", bins);
    hist_linspace(lo, hi, bins, self->dtype, buf + bins);
    hist_fill(self, NULL, buf + bins, bins, HIST_LINEAR, buf);
    hist_store(o, buf, bins, 1.0, NULL);
    tp_free(buf);
    return TP_OK;
}

typedef struct hist_plan {
    tp_tensor *self, *edges, *weight;
    int64_t bins;
    bool has_range;
    double lo, hi;
} hist_plan;

static tp_status histogram_plan(const tp_value *args, hist_plan *p) {
    char b1[256], b2[256];
    TP_TRY(tp__need_tensor(args, 0, "self", &p->self));
    TP_TRY(hist_dtype(p->self->dtype, "histogramdd"));
    p->edges = tp__arg_tensor(args, 1);
    p->weight = tp__arg_tensor(args, 3);
    if (p->edges) {
        TP_CHECK(p->edges->ndim == 1, TP_ERR_SHAPE,
                 "bins tensor should have one dimension, but got %d dimensions in the bins tensor for dimension 0",
                 p->edges->ndim);
        TP_CHECK(p->edges->dtype == p->self->dtype, TP_ERR_TYPE,
                 "input tensor and bins tensors should have the same dtype, but got input with dtype %s and bins for "
                 "dimension 0 with dtype %s",
                 tp_dtype_name(p->self->dtype), tp_dtype_name(p->edges->dtype));
        p->bins = p->edges->sizes[0] - 1;
        TP_CHECK(p->bins > 0, TP_ERR_INVALID_ARG, "bins must be > 0, but got %" PRId64 " for dimension 0", p->bins);
    } else {
        TP_CHECK(args[1].kind == TP_VAL_INT, TP_ERR_TYPE, "bins must be an int or a Tensor, not %s",
                 tp_value_kind_name(args[1].kind));
        p->bins = args[1].u.i;
        TP_TRY(hist_bins(p->bins));
    }
    p->has_range = !tp__arg_is_none(args, 2);
    if (p->has_range) {
        const tp_value *r = &args[2];
        TP_CHECK(tp_value_is_seq(r), TP_ERR_TYPE, "range must be a list of floats, not %s", tp_value_kind_name(r->kind));
        TP_CHECK(tp_value_len(r) == 2, TP_ERR_INVALID_ARG,
                 "for a 1-dimensional histogram range should have 2 elements, but got %" PRId64, tp_value_len(r));
        for (int k = 0; k < 2; k++)
            TP_CHECK(tp_value_is_number(tp_value_at(r, k)), TP_ERR_TYPE, "range[%d] must be a number, not %s", k,
                     tp_value_kind_name(tp_value_at(r, k)->kind));
        p->lo = tp_value_as_f64(tp_value_at(r, 0));
        p->hi = tp_value_as_f64(tp_value_at(r, 1));
    }
    if (p->weight) {
        bool same = p->weight->ndim == p->self->ndim &&
                    !memcmp(p->weight->sizes, p->self->sizes, (size_t)p->self->ndim * sizeof *p->self->sizes);
        TP_CHECK(same, TP_ERR_SHAPE,
                 "if weight tensor is provided it should have the same shape as the input tensor, but got input with "
                 "shape %s and weight with shape %s",
                 tp__shape_str(p->self->ndim, p->self->sizes, b1, sizeof b1),
                 tp__shape_str(p->weight->ndim, p->weight->sizes, b2, sizeof b2));
        TP_CHECK(p->weight->dtype == p->self->dtype, TP_ERR_TYPE,
                 "if weight tensor is provided, input tensor and weight tensor should have the same dtype, but got "
                 "input(%s), and weight(%s)",
                 tp_dtype_name(p->self->dtype), tp_dtype_name(p->weight->dtype));
    }
    return TP_OK;
}

static tp_status infer_histogram(const tp_value *args, tp_value *out) {
    hist_plan p;
    TP_TRY(histogram_plan(args, &p));
    tp_sdim bins = p.edges ? tp__dim_addk(tp__dim(p.edges, 0), -1) : tp__dimk(p.bins);
    TP_TRY(tp__out_tuple(out, 2));
    TP_TRY(tp__out_dims(&out->u.seq.items[0], p.self->dtype, 1, &bins));
    return tp__out_dims(&out->u.seq.items[1], p.self->dtype, 1, (tp_sdim[]){tp__dim_addk(bins, 1)});
}

static tp_status kernel_histogram(const tp_value *args, tp_value *out) {
    hist_plan p;
    TP_TRY(histogram_plan(args, &p));
    TP_TRY(tp__has_data(p.self, "self"));
    TP_TRY(tp__has_data(p.edges, "bins"));
    TP_TRY(tp__has_data(p.weight, "weight"));
    int64_t bins = p.bins;
    double *buf = tp_calloc((size_t)(3 * bins + 2), sizeof *buf), *hist = buf, *edges = buf + bins;
    double *widths = edges + bins + 1;
    TP_CHECK(buf != NULL, TP_ERR_NOMEM, "out of memory for %" PRId64 " bins", bins);
    if (p.edges) {
        const char *eb = tp__tensor_base(p.edges);
        int64_t es = p.edges->strides[0] * (int64_t)tp_dtype_size(p.edges->dtype);
        for (int64_t i = 0; i <= bins; i++) edges[i] = tp__load_f64(eb + i * es, p.edges->dtype);
    } else {
        double lo = 0.0, hi = 1.0;
        if (p.has_range) {
            lo = p.lo;
            hi = p.hi;
        } else if (tp_tensor_numel(p.self) > 0) {
            hist_minmax(p.self, &lo, &hi);
        }
        tp_status st = TP_OK;
        if (!(isfinite(lo) && isfinite(hi)))
            st = tp_error(TP_ERR_INVALID_ARG, "dimension 0's range [%g, %g] is not finite", lo, hi);
        else if (lo > hi)
            st = tp_error(TP_ERR_INVALID_ARG, "min should not exceed max, but got min %g max %g for dimension 0", lo,
                          hi);
        if (st != TP_OK) {
            tp_free(buf);
            return st;
        }
        if (lo == hi) {
            lo -= 0.5;
            hi += 0.5;
        }
        hist_linspace(lo, hi, bins, p.self->dtype, edges);
    }
    hist_fill(p.self, p.weight, edges, bins, p.edges ? HIST_EDGES : HIST_LOCAL_SEARCH, hist);
    bool density = tp__arg_bool(args, 4);
    double total = 0.0;
    for (int64_t i = 0; density && i < bins; i++) {
        total += hist[i];
        widths[i] = edges[i + 1] - edges[i];
    }
    hist_store(tp__out_at(out, 0), hist, bins, total, density ? widths : NULL);
    tp_tensor *oe = tp__out_at(out, 1);
    char *ob = tp__tensor_base(oe);
    int64_t bs = oe->strides[0] * (int64_t)tp_dtype_size(oe->dtype);
    for (int64_t i = 0; i <= bins; i++) tp__store_f64(ob + i * bs, oe->dtype, edges[i]);
    tp_free(buf);
    return TP_OK;
}

/* ---- histogramdd(Tensor self, Any bins, float[]? range=None, Tensor?
 * weight=None, bool density=False) -> (hist, [bin_edges per dim]) ---------
 * self (..., D): points in D dims; bins one count per dim (or one for all)
 * or one tensor of edges per dim; range [lo0, hi0, lo1, hi1, ...]. Per dim
 * the edges and bin of each coordinate follow histogram's rules (above); a
 * point counts (its weight, 1 without) when every coordinate falls in a
 * bin. density divides by the total and each bin's volume. */
typedef struct hdd_plan {
    tp_tensor *self, *weight;
    int D;
    int64_t bins[TP_MAX_DIMS];
    const tp_tensor *edges[TP_MAX_DIMS];
    bool has_range;
    double range[2 * TP_MAX_DIMS];
} hdd_plan;

static tp_status histogramdd_plan(const tp_value *args, hdd_plan *p) {
    memset(p, 0, sizeof *p);
    TP_TRY(tp__need_tensor(args, 0, "self", &p->self));
    TP_TRY(hist_dtype(p->self->dtype, "histogramdd"));
    TP_CHECK(p->self->ndim >= 2, TP_ERR_SHAPE,
             "torch.histogramdd: input tensor should have at least 2 dimensions, but got %d", p->self->ndim);
    int64_t D = p->self->sizes[p->self->ndim - 1];
    TP_CHECK(D >= 1 && D <= TP_MAX_DIMS, TP_ERR_SHAPE, "histogramdd: %" PRId64 " dimensions (1 to %d are supported)", D,
             TP_MAX_DIMS);
    p->D = (int)D;
    const tp_value *b = &args[1];
    if (b->kind == TP_VAL_INT) {
        for (int d = 0; d < p->D; d++) p->bins[d] = b->u.i;
    } else {
        TP_CHECK(tp_value_is_seq(b), TP_ERR_TYPE, "histogramdd: bins must be an int, a list of ints or a list of tensors");
        TP_CHECK(tp_value_len(b) == D, TP_ERR_INVALID_ARG,
                 "histogramdd: expected %d bin counts for a %d-dimensional histogram but got %" PRId64, p->D, p->D,
                 tp_value_len(b));
        for (int d = 0; d < p->D; d++) {
            const tp_value *v = tp_value_at(b, d);
            if (v->kind == TP_VAL_TENSOR) {
                const tp_tensor *e = v->u.tensor;
                TP_CHECK(e->ndim == 1, TP_ERR_SHAPE,
                         "bins tensor should have one dimension, but got %d dimensions in the bins tensor for dimension %d",
                         e->ndim, d);
                TP_CHECK(e->dtype == p->self->dtype, TP_ERR_TYPE,
                         "input tensor and bins tensors should have the same dtype, but got input with dtype %s and bins "
                         "for dimension %d with dtype %s",
                         tp_dtype_name(p->self->dtype), d, tp_dtype_name(e->dtype));
                p->edges[d] = e;
                p->bins[d] = e->sizes[0] - 1;
            } else {
                TP_CHECK(v->kind == TP_VAL_INT, TP_ERR_TYPE, "histogramdd: bins must be ints or tensors");
                p->bins[d] = v->u.i;
            }
        }
    }
    for (int d = 0; d < p->D; d++) {
        TP_CHECK(p->bins[d] > 0, TP_ERR_INVALID_ARG, "bins must be > 0, but got %" PRId64 " for dimension %d", p->bins[d], d);
        TP_CHECK(p->bins[d] < ((int64_t)1 << 30), TP_ERR_NOMEM, "%" PRId64 " bins are too many", p->bins[d]);
    }
    p->has_range = !tp__arg_is_none(args, 2);
    if (p->has_range) {
        const tp_value *r = &args[2];
        TP_CHECK(tp_value_is_seq(r) && tp_value_len(r) == 2 * D, TP_ERR_INVALID_ARG,
                 "for a %d-dimensional histogram range should have %d elements, but got %" PRId64, p->D, 2 * p->D,
                 tp_value_is_seq(r) ? tp_value_len(r) : 0);
        for (int k = 0; k < 2 * p->D; k++) {
            TP_CHECK(tp_value_is_number(tp_value_at(r, k)), TP_ERR_TYPE, "range[%d] must be a number", k);
            p->range[k] = tp_value_as_f64(tp_value_at(r, k));
        }
    }
    p->weight = tp__arg_tensor(args, 3);
    if (p->weight) {
        bool same = p->weight->ndim == p->self->ndim - 1 &&
                    !memcmp(p->weight->sizes, p->self->sizes, (size_t)p->weight->ndim * sizeof *p->self->sizes);
        TP_CHECK(same, TP_ERR_SHAPE,
                 "if weight tensor is provided it should have the same shape as the input tensor excluding its "
                 "innermost dimension");
        TP_CHECK(p->weight->dtype == p->self->dtype, TP_ERR_TYPE,
                 "if weight tensor is provided, input tensor and weight tensor should have the same dtype, but got "
                 "input(%s), and weight(%s)",
                 tp_dtype_name(p->self->dtype), tp_dtype_name(p->weight->dtype));
    }
    int64_t cells = 1;
    for (int d = 0; d < p->D; d++) {
        TP_CHECK(cells <= ((int64_t)1 << 32) / p->bins[d], TP_ERR_NOMEM, "histogramdd: too many cells");
        cells *= p->bins[d];
    }
    return TP_OK;
}

static tp_status infer_histogramdd(const tp_value *args, tp_value *out) {
    hdd_plan p;
    TP_TRY(histogramdd_plan(args, &p));
    TP_TRY(tp__out_tuple(out, 2));
    tp_sdim hd[TP_MAX_DIMS];
    for (int d = 0; d < p.D; d++) hd[d] = tp__dimk(p.bins[d]);
    TP_TRY(tp__out_dims(&out->u.seq.items[0], p.self->dtype, p.D, hd));
    TP_TRY(tp__out_list(&out->u.seq.items[1], p.D));
    for (int d = 0; d < p.D; d++)
        TP_TRY(tp__out_dims(&out->u.seq.items[1].u.seq.items[d], p.self->dtype, 1,
                            (tp_sdim[]){tp__dimk(p.bins[d] + 1)}));
    return TP_OK;
}

static tp_status kernel_histogramdd(const tp_value *args, tp_value *out) {
    hdd_plan p;
    TP_TRY(histogramdd_plan(args, &p));
    TP_TRY(tp__has_data(p.self, "self"));
    tp_tensor *pts = NULL;
    TP_TRY(tp_tensor_to(p.self, TP_FLOAT64, &pts));
    tp_tensor *wt = NULL;
    tp_status st = p.weight ? tp_tensor_to(p.weight, TP_FLOAT64, &wt) : TP_OK;
    int64_t npts = tp_tensor_numel(pts) / p.D, cells = 1, nedges = 0;
    for (int d = 0; d < p.D; d++) {
        cells *= p.bins[d];
        nedges += p.bins[d] + 1;
    }
    double *hist = st == TP_OK ? tp_calloc((size_t)(cells + nedges), sizeof *hist) : NULL;
    if (st == TP_OK && !hist) st = tp_error(TP_ERR_NOMEM, "out of memory for %" PRId64 " cells", cells);
    const double *x = pts ? tp_tensor_data(pts) : NULL, *w = wt ? tp_tensor_data(wt) : NULL;
    double *edges[TP_MAX_DIMS];
    for (int d = 0, at = 0; st == TP_OK && d < p.D; at += (int)p.bins[d] + 1, d++) {
        edges[d] = hist + cells + at;
        int64_t nb = p.bins[d];
        if (p.edges[d]) {
            const char *eb = tp__tensor_base(p.edges[d]);
            int64_t es = p.edges[d]->strides[0] * (int64_t)tp_dtype_size(p.edges[d]->dtype);
            for (int64_t i = 0; i <= nb; i++) edges[d][i] = tp__load_f64(eb + i * es, p.edges[d]->dtype);
            continue;
        }
        double lo = 0.0, hi = 1.0;
        if (p.has_range) {
            lo = p.range[2 * d];
            hi = p.range[2 * d + 1];
        } else if (npts > 0) {
            lo = INFINITY;
            hi = -INFINITY;
            for (int64_t i = 0; i < npts; i++) {
                double v = x[i * p.D + d];
                if (isnan(v)) lo = hi = NAN;
                if (!(v >= lo)) lo = isnan(lo) ? lo : v;
                if (!(v <= hi)) hi = isnan(hi) ? hi : v;
            }
        }
        if (!(isfinite(lo) && isfinite(hi)))
            st = tp_error(TP_ERR_INVALID_ARG, "dimension %d's range [%g, %g] is not finite", d, lo, hi);
        else if (lo > hi)
            st = tp_error(TP_ERR_INVALID_ARG, "min should not exceed max, but got min %g max %g for dimension %d", lo,
                          hi, d);
        if (st != TP_OK) break;
        if (lo == hi) {
            lo -= 0.5;
            hi += 0.5;
        }
        hist_linspace(lo, hi, nb, p.self->dtype, edges[d]);
    }
    for (int64_t i = 0; st == TP_OK && i < npts; i++) {
        int64_t cell = 0;
        bool in = true;
        for (int d = 0; d < p.D && in; d++) {
            int64_t pos = hist_bin(x[i * p.D + d], edges[d], p.bins[d], p.edges[d] ? HIST_EDGES : HIST_LOCAL_SEARCH,
                                   p.self->dtype);
            in = pos >= 0;
            cell = cell * p.bins[d] + pos;
        }
        if (in) hist[cell] += w ? w[i] : 1.0;
    }
    if (st == TP_OK && tp__arg_bool(args, 4)) { /* density */
        double total = 0.0;
        for (int64_t c = 0; c < cells; c++) total += hist[c];
        for (int64_t c = 0; c < cells; c++) {
            double vol = 1.0;
            int64_t rem = c;
            for (int d = p.D - 1; d >= 0; d--) {
                int64_t k = rem % p.bins[d];
                rem /= p.bins[d];
                vol *= edges[d][k + 1] - edges[d][k];
            }
            hist[c] = hist[c] / total / vol;
        }
    }
    if (st == TP_OK) {
        tp_tensor *h = tp__out_at(out, 0), *tmp = NULL;
        int64_t hs[TP_MAX_DIMS];
        for (int d = 0; d < p.D; d++) hs[d] = p.bins[d];
        st = tp_tensor_from_data(TP_FLOAT64, p.D, hs, hist, &tmp);
        if (st == TP_OK) st = tp_tensor_copy_(h, tmp);
        tp_tensor_free(tmp);
        tp_value *el = &out->u.seq.items[1];
        for (int d = 0; st == TP_OK && d < p.D; d++) {
            tp_tensor *e = el->u.seq.items[d].u.tensor;
            char *ob = tp__tensor_base(e);
            int64_t bs = e->strides[0] * (int64_t)tp_dtype_size(e->dtype);
            for (int64_t i = 0; i <= p.bins[d]; i++) tp__store_f64(ob + i * bs, e->dtype, edges[d][i]);
        }
    }
    tp_free(hist);
    tp_tensor_free(pts);
    tp_tensor_free(wt);
    return st;
}

/* ---- nonzero_static(Tensor self, *, int size, int fill_value=-1) --------
 * nonzero's [n, ndim] int64 indices (C order) cut or padded to size rows,
 * padding rows filled with fill_value: a shape known before it runs. */

static tp_status nonzero_static_check(const tp_value *args, tp_tensor **self, int64_t *size) {
    TP_TRY(tp__need_tensor(args, 0, "self", self));
    *size = tp__arg_int(args, 1);
    TP_CHECK(*size >= 0, TP_ERR_INVALID_ARG, "'size' must be an non-negative integer, but got %" PRId64, *size);
    return TP_OK;
}

static tp_status infer_nonzero_static(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    int64_t size;
    TP_TRY(nonzero_static_check(args, &self, &size));
    return tp__out_dims(out, TP_INT64, 2, (tp_sdim[]){tp__dimk(size), tp__dimk(self->ndim)});
}

static tp_status kernel_nonzero_static(const tp_value *args, tp_value *out) {
    tp_tensor *self, *o = tp__out_at(out, 0);
    int64_t size, fill = tp__arg_int(args, 2), row = 0;
    TP_TRY(nonzero_static_check(args, &self, &size));
    TP_TRY(tp__has_data(self, "self"));
    int nd = self->ndim;
    char *ob = tp__tensor_base(o);
    int64_t rs = o->strides[0] * 8, cs = nd ? o->strides[1] * 8 : 0;
    size_t es = tp_dtype_size(self->dtype);
    tp_iter it;
    tp__iter_init(&it, nd, self->sizes, 1, (const tp_tensor *[]){self});
    while (row < size && tp__iter_next(&it)) {
        bool nz = false;
        for (size_t b = 0; b < es && !nz; b++) nz = ((const uint8_t *)it.ptr[0])[b] != 0;
        if (nz && tp_dtype_is_float(self->dtype)) nz = tp__load_f64(it.ptr[0], self->dtype) != 0.0; /* -0.0 */
        if (!nz) continue;
        for (int d = 0; d < nd; d++) memcpy(ob + row * rs + d * cs, &it.index[d], 8);
        row++;
    }
    for (; row < size; row++)
        for (int d = 0; d < nd; d++) memcpy(ob + row * rs + d * cs, &fill, 8);
    return TP_OK;
}

/* ---- combinations(Tensor self, int r=2, bool with_replacement=False) ----
 * The r-element combinations of a 1-d tensor's elements (with_replacement:
 * with repetition) in lexicographic order of positions, as rows of an
 * [count, r] tensor; r = 0 gives an empty 1-d tensor. */

static tp_status combinations_plan(const tp_value *args, tp_tensor **self, int64_t *r, int64_t *count) {
    TP_TRY(tp__need_tensor(args, 0, "self", self));
    char b1[256];
    TP_CHECK((*self)->ndim == 1, TP_ERR_SHAPE, "Expect a 1D vector, but got shape %s",
             tp__shape_str((*self)->ndim, (*self)->sizes, b1, sizeof b1));
    *r = tp__arg_int(args, 1);
    TP_CHECK(*r >= 0, TP_ERR_INVALID_ARG, "Expect a non-negative number, but got %" PRId64, *r);
    bool rep = tp__arg_bool(args, 2);
    int64_t n = (*self)->sizes[0], top = n;
    TP_CHECK(!rep || n == 0 || tp_add_overflow_i64(n - 1, *r, &top), TP_ERR_NOMEM,
             "combinations: C(%" PRId64 " + %" PRId64 " - 1, %" PRId64 ") rows are too many", n, *r, *r);
    if (*r == 0) {
        *count = 0;
        return TP_OK;
    }
    if (top < *r || (rep && n == 0)) {
        *count = 0;
        return TP_OK;
    }
    /* C(top, r) = C(top, top - r), built up exactly (each partial product divides) */
    int64_t k = *r < top - *r ? *r : top - *r, c = 1;
    for (int64_t i = 1; i <= k; i++) {
        __int128 v = (__int128)c * (top - k + i) / i;
        TP_CHECK(v <= ((int64_t)1 << 40), TP_ERR_NOMEM, "combinations: C(%" PRId64 ", %" PRId64 ") rows are too many",
                 top, *r);
        c = (int64_t)v;
    }
    *count = c;
    return TP_OK;
}

static tp_status infer_combinations(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    int64_t r = 0, count = 0;
    TP_TRY(combinations_plan(args, &self, &r, &count));
    if (!tp__dim_is_const(tp__dim(self, 0))) tp__dim_give_up(); /* C(n, r) of a dynamic n has no expression */
    if (r == 0) return tp__out_dims(out, self->dtype, 1, (tp_sdim[]){tp__dimk(0)});
    return tp__out_dims(out, self->dtype, 2, (tp_sdim[]){tp__dimk(count), tp__dimk(r)});
}

static tp_status kernel_combinations(const tp_value *args, tp_value *out) {
    tp_tensor *self, *o = tp__out_at(out, 0);
    int64_t r, count;
    TP_TRY(combinations_plan(args, &self, &r, &count));
    TP_TRY(tp__has_data(self, "self"));
    if (count == 0) return TP_OK;
    bool rep = tp__arg_bool(args, 2);
    int64_t n = self->sizes[0], *pos = tp_malloc((size_t)r * sizeof *pos);
    TP_CHECK(pos != NULL, TP_ERR_NOMEM, "out of memory for %" PRId64 " positions", r);
    for (int64_t j = 0; j < r; j++) pos[j] = rep ? 0 : j;
    size_t es = tp_dtype_size(self->dtype);
    const char *sb = tp__tensor_base(self);
    char *ob = tp__tensor_base(o);
    int64_t ss = self->strides[0], r0 = o->strides[0], r1 = o->strides[1];
    for (int64_t row = 0; row < count; row++) {
        for (int64_t j = 0; j < r; j++) memcpy(ob + (row * r0 + j * r1) * (int64_t)es, sb + pos[j] * ss * (int64_t)es, es);
        /* the next combination: bump the last position that can move, reset the ones after it */
        int64_t j = r - 1;
        while (j >= 0 && pos[j] == (rep ? n - 1 : n - r + j)) j--;
        if (j < 0) break;
        pos[j]++;
        for (int64_t k = j + 1; k < r; k++) pos[k] = rep ? pos[j] : pos[k - 1] + 1;
    }
    tp_free(pos);
    return TP_OK;
}

/* ---- fill_diagonal_(Tensor self, Scalar fill_value, bool wrap=False) ------
 * In place: self[i, i, ..., i] = value for i < min(sizes) (all dims equal
 * beyond 2-d); a tall matrix with wrap restarts the diagonal every
 * cols + 1 rows, as PyTorch's flat-stride walk does. */

static tp_status fill_diagonal_check(const tp_value *args, tp_tensor **self) {
    TP_TRY(tp__need_tensor(args, 0, "self", self));
    tp_tensor *s = *self;
    TP_CHECK(s->ndim >= 2, TP_ERR_SHAPE, "dimensions must larger than 1");
    if (s->ndim > 2)
        for (int d = 1; d < s->ndim; d++)
            TP_CHECK(s->sizes[d] == s->sizes[0], TP_ERR_SHAPE, "all dimensions of input must be of equal length");
    return TP_OK;
}

static tp_status infer_fill_diagonal_(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    TP_TRY(fill_diagonal_check(args, &self));
    char value[8];
    TP_TRY(tp__scalar_to_elem(&args[1], self->dtype, value));
    return tp_value_copy(&args[0], out);
}

static tp_status kernel_fill_diagonal_(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    TP_TRY(fill_diagonal_check(args, &self));
    TP_TRY(tp__has_data(self, "self"));
    char value[8];
    TP_TRY(tp__scalar_to_elem(&args[1], self->dtype, value));
    size_t es = tp_dtype_size(self->dtype);
    int64_t n = self->sizes[0], stride = 0;
    for (int d = 0; d < self->ndim; d++) {
        if (self->sizes[d] < n) n = self->sizes[d];
        stride += self->strides[d];
    }
    char *base = tp__tensor_base(self);
    for (int64_t i = 0; i < n; i++) memcpy(base + i * stride * (int64_t)es, value, es);
    if (self->ndim == 2 && tp__arg_bool(args, 2) && self->sizes[0] > self->sizes[1] + 1) {
        /* wrap: the diagonal restarts at row (cols + 1) * k */
        int64_t rows = self->sizes[0], cols = self->sizes[1];
        for (int64_t r0 = cols + 1; r0 < rows; r0 += cols + 1)
            for (int64_t i = 0; i < cols && r0 + i < rows; i++)
                memcpy(base + ((r0 + i) * self->strides[0] + i * self->strides[1]) * (int64_t)es, value, es);
    }
    tp_value_clear(out);
    return tp_value_copy(&args[0], out);
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
    int64_t classes;
    tp_sdim sizes[TP_MAX_DIMS];
    TP_TRY(one_hot_plan(args, &self, &classes));
    tp__dims(self, sizes);
    sizes[self->ndim] = tp__dimk(classes);
    return tp__out_dims(out, TP_INT64, self->ndim + 1, sizes);
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
    tp__register_op(TP_OP_INDEX_ADD,
                    "index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor", 0,
                    infer_index_add, kernel_index_add);
    tp__register_op(TP_OP_INDEX_COPY, "index_copy(Tensor self, int dim, Tensor index, Tensor source) -> Tensor", 0,
                    infer_index_copy, kernel_index_copy);
    tp__register_op(TP_OP_INDEX_FILL, "index_fill(Tensor self, int dim, Tensor index, Tensor|Scalar value) -> Tensor",
                    0, infer_index_fill, kernel_index_fill);
    tp__register_op(TP_OP_INDEX_REDUCE,
                    "index_reduce(Tensor self, int dim, Tensor index, Tensor source, str reduce, *, "
                    "bool include_self=True) -> Tensor",
                    0, infer_index_reduce, kernel_index_reduce);
    tp__register_op(TP_OP_SCATTER_REDUCE,
                    "scatter_reduce(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, "
                    "bool include_self=True) -> Tensor",
                    0, infer_scatter_reduce, kernel_scatter_reduce);
    tp__register_op(TP_OP_MASKED_SCATTER, "masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor", 0,
                    infer_masked_scatter, kernel_masked_scatter);
    tp__register_op(TP_OP_SEARCHSORTED,
                    "searchsorted(Tensor sorted_sequence, Tensor|Scalar self, *, bool out_int32=False, "
                    "bool right=False, str? side=None, Tensor? sorter=None) -> Tensor",
                    0, infer_searchsorted, kernel_searchsorted);
    tp__register_op(TP_OP_HISTC, "histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor", 0,
                    infer_histc, kernel_histc);
    tp__register_op(TP_OP_HISTOGRAMDD,
                    "histogramdd(Tensor self, Any bins, Any range=None, Tensor? weight=None, bool density=False) -> Any",
                    0, infer_histogramdd, kernel_histogramdd);
    tp__register_op(TP_OP_HISTOGRAM,
                    "histogram(Tensor self, Tensor|Scalar bins=100, *, Any range=None, Tensor? weight=None, "
                    "bool density=False) -> (Tensor, Tensor)",
                    0, infer_histogram, kernel_histogram);
    tp__register_op(TP_OP_NONZERO_STATIC, "nonzero_static(Tensor self, *, int size, int fill_value=-1) -> Tensor", 0,
                    infer_nonzero_static, kernel_nonzero_static);
    tp__register_op(TP_OP_COMBINATIONS, "combinations(Tensor self, int r=2, bool with_replacement=False) -> Tensor", 0,
                    infer_combinations, kernel_combinations);
    tp__register_op(TP_OP_FILL_DIAGONAL_, "fill_diagonal_(Tensor self, Scalar fill_value, bool wrap=False) -> Tensor",
                    TP_OPF_INPLACE | TP_OPF_MUTATES, infer_fill_diagonal_, kernel_fill_diagonal_);
}
