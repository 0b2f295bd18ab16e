/*
 * shape.c - shape ops: schemas, shape rules and reference kernels.
 *
 * View ops (reshape, view, flatten, permute, transpose, squeeze, unsqueeze,
 * expand, slice, select, narrow, contiguous, to, split, chunk, getitem) share
 * storage with their input. Each is one function that validates the
 * arguments and builds the view with tensor.h's view functions; the shape
 * rule runs it on a storage-less copy of the input's metadata (same sizes
 * and strides), the kernel on the real tensor, so both agree and both report
 * the same errors. reshape, contiguous and to copy when they must.
 *
 * Copying ops (cat, stack, flip, repeat, clone, pad) have an ordinary shape
 * rule and fill the freshly allocated contiguous output.
 */
#include <inttypes.h>

#include "kernel_util.h"

/* ---- small helpers ------------------------------------------------------ */

/* Resolve a requested shape (one entry may be -1) against the dims
 * have[nh] (their product is the element count), with PyTorch's messages.
 * Symbolically the element counts must agree; a -1 is what remains of the
 * input's dims once the requested dynamic sizes are matched to input dims
 * of the same expression, divided by the constant sizes. */
static tp_status resolve_shape(int nh, const tp_sdim *have, int n, const tp_sdim *in, tp_sdim *out) {
    char buf[256];
    int64_t shown[TP_MAX_DIMS];
    int infer = -1;
    int64_t known = 1, numel = 1;
    bool sym = false;
    for (int i = 0; i < nh; i++) {
        numel *= have[i].v; /* the sizes of a tensor: cannot overflow */
        sym = sym || !tp__dim_is_const(have[i]);
    }
    for (int i = 0; i < n; i++) shown[i] = in[i].v;
    for (int i = 0; i < n; i++) {
        sym = sym || !tp__dim_is_const(in[i]);
        if (in[i].v == -1 && tp__dim_is_const(in[i])) {
            TP_CHECK(infer < 0, TP_ERR_SHAPE, "only one dimension can be inferred (shape %s)",
                     tp__shape_str(n, shown, buf, sizeof buf));
            infer = i;
        } else {
            TP_CHECK(in[i].v >= 0, TP_ERR_SHAPE, "invalid shape dimension %" PRId64 " in shape %s", in[i].v,
                     tp__shape_str(n, shown, buf, sizeof buf));
            TP_CHECK(tp_mul_overflow_i64(known, in[i].v, &known), TP_ERR_SHAPE, "shape %s is too large",
                     tp__shape_str(n, shown, buf, sizeof buf));
        }
        out[i] = in[i];
    }
    if (infer < 0) {
        tp_sdim total = tp__dimk(1), count = tp__dimk(1);
        for (int i = 0; i < n; i++) total = tp__dim_mul(total, in[i]);
        for (int i = 0; i < nh; i++) count = tp__dim_mul(count, have[i]);
        TP_CHECK(tp__dim_eq(count, total, "the number of elements must not change"), TP_ERR_SHAPE,
                 "shape '%s' is invalid for input of size %" PRId64, tp__shape_str(n, shown, buf, sizeof buf), numel);
        return TP_OK;
    }
    TP_CHECK(known != 0 || numel != 0, TP_ERR_SHAPE,
             "cannot reshape tensor of 0 elements into shape %s because the unspecified dimension "
             "size -1 can be any value and is ambiguous",
             tp__shape_str(n, shown, buf, sizeof buf));
    TP_CHECK(known != 0 && numel % known == 0, TP_ERR_SHAPE, "shape '%s' is invalid for input of size %" PRId64,
             tp__shape_str(n, shown, buf, sizeof buf), numel);
    if (!sym) {
        out[infer] = tp__dimk(numel / known);
        return TP_OK;
    }
    /* cancel the requested dynamic sizes against input dims */
    bool used[TP_MAX_DIMS] = {false};
    int64_t konst = 1;
    for (int i = 0; i < n; i++) {
        if (i == infer) continue;
        if (tp__dim_is_const(in[i])) {
            konst *= in[i].v;
            continue;
        }
        bool found = false;
        for (int j = 0; j < nh && !found; j++)
            if (!used[j] && tp__dim_same(have[j], in[i])) used[j] = found = true;
        if (!found) tp__dim_give_up(); /* a quotient of dynamic sizes has no expression */
    }
    if (konst == 0) tp__dim_give_up();
    tp_sdim rem = tp__dimk(1);
    for (int j = 0; j < nh; j++)
        if (!used[j]) rem = tp__dim_mul(rem, have[j]);
    if (konst > 0) tp__dim_divisible(rem, konst, "the inferred (-1) size must be whole");
    out[infer] = konst > 0 ? tp__dim_floordiv(rem, konst) : tp__dimk(numel / known);
    out[infer].v = numel / known;
    return TP_OK;
}

static void sizes_of(int n, const tp_sdim *d, int64_t *sizes) {
    for (int i = 0; i < n; i++) sizes[i] = d[i].v;
}

/* reshape to an already resolved shape: a view when possible, else a copy;
 * for a meta tensor simply a meta tensor of that shape. */
static tp_status reshape_to(tp_tensor *self, int n, const tp_sdim *dims, tp_tensor **out) {
    int64_t shape[TP_MAX_DIMS];
    sizes_of(n, dims, shape);
    if (tp_tensor_is_meta(self)) return tp__tensor_make(self->dtype, n, shape, NULL, 0, NULL, out);
    return tp_tensor_reshape(self, n, shape, out);
}


/* ---- view ops: one builder each, shared by shape rule and kernel -------
 * A builder makes the view and gives its dims as the shape rule sees them
 * (dim.h): the shape rule returns those, the kernel the view. */

typedef tp_status (*view_fn)(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *dims);

static tp_status view_infer(const tp_value *args, tp_value *out, view_fn fn) {
    tp_tensor *self, *meta, *r;
    tp_sdim dims[TP_MAX_DIMS];
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(tp__tensor_make(self->dtype, self->ndim, self->sizes, self->strides, self->offset, NULL, &meta));
    tp__tensor_set_sym(meta, tp__tensor_sym(self));
    tp_status st = fn(meta, args, &r, dims);
    tp_tensor_free(meta);
    if (st != TP_OK) return st;
    for (int i = 0; i < r->ndim && st == TP_OK; i++)
        if (dims[i].v != r->sizes[i])
            st = tp_error(TP_ERR_INTERNAL, "shape rule and view disagree at dim %d (%" PRId64 " vs %" PRId64 ")", i,
                          dims[i].v, r->sizes[i]);
    if (st == TP_OK) st = tp__out_dims(out, r->dtype, r->ndim, dims);
    tp_tensor_free(r);
    return st;
}

static tp_status view_kernel(const tp_value *args, tp_value *out, view_fn fn) {
    tp_tensor *self, *r;
    tp_sdim dims[TP_MAX_DIMS];
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(fn(self, args, &r, dims));
    tp_value_clear(out);
    *out = tp_value_tensor(r);
    return TP_OK;
}

#define DEFINE_VIEW_OP(name)                                                                                           \
    static tp_status infer_##name(const tp_value *args, tp_value *out) { return view_infer(args, out, view_##name); }  \
    static tp_status kernel_##name(const tp_value *args, tp_value *out) { return view_kernel(args, out, view_##name); }

/* A new view of t with t's own geometry (an alias); dims: t's. */
static tp_status alias(tp_tensor *t, tp_tensor **out, tp_sdim *dims) {
    tp__dims(t, dims);
    return tp_tensor_as_strided(t, t->ndim, t->sizes, t->strides, t->offset, out);
}

/* reshape(Tensor self, int[] shape) */
static tp_status view_reshape(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *dims) {
    tp_sdim req[TP_MAX_DIMS], have[TP_MAX_DIMS];
    int n;
    TP_TRY(tp__arg_sdims(args, 1, "shape", req, TP_MAX_DIMS, 0, &n));
    TP_TRY(resolve_shape(tp__dims(self, have), have, n, req, dims));
    return reshape_to(self, n, dims, out);
}
DEFINE_VIEW_OP(reshape)

/* view(Tensor self, int[] size): fails when the strides do not allow it. */
static tp_status view_view(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *dims) {
    tp_sdim req[TP_MAX_DIMS], have[TP_MAX_DIMS];
    int64_t shape[TP_MAX_DIMS];
    int n;
    TP_TRY(tp__arg_sdims(args, 1, "size", req, TP_MAX_DIMS, 0, &n));
    TP_TRY(resolve_shape(tp__dims(self, have), have, n, req, dims));
    sizes_of(n, dims, shape);
    tp_status st = tp_tensor_view(self, n, shape, out);
    if (st == TP_ERR_SHAPE) { /* the shape is valid: the strides do not allow it */
        char b1[256], b2[256], b3[256];
        return tp_error(TP_ERR_SHAPE,
                        "size %s is not compatible with input tensor's size %s and stride %s (at least one "
                        "dimension spans across two contiguous subspaces); use reshape instead",
                        tp__shape_str(n, shape, b1, sizeof b1), tp__shape_str(self->ndim, self->sizes, b2, sizeof b2),
                        tp__shape_str(self->ndim, self->strides, b3, sizeof b3));
    }
    return st;
}
DEFINE_VIEW_OP(view)

/* flatten(Tensor self, int start_dim=0, int end_dim=-1) */
static tp_status view_flatten(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *dims) {
    int start, end;
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), self->ndim, &start));
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 2), self->ndim, &end));
    if (self->ndim == 0) {
        dims[0] = tp__dimk(1);
        return reshape_to(self, 1, dims, out);
    }
    TP_CHECK(start <= end, TP_ERR_INVALID_ARG, "start_dim (%d) cannot come after end_dim (%d)", start, end);
    if (start == end) return alias(self, out, dims);
    int n = 0;
    for (int i = 0; i < start; i++) dims[n++] = tp__dim(self, i);
    tp_sdim merged = tp__dimk(1);
    for (int i = start; i <= end; i++) merged = tp__dim_mul(merged, tp__dim(self, i)); /* <= numel: no overflow */
    dims[n++] = merged;
    for (int i = end + 1; i < self->ndim; i++) dims[n++] = tp__dim(self, i);
    return reshape_to(self, n, dims, out);
}
DEFINE_VIEW_OP(flatten)

/* permute(Tensor self, int[] dims) */
static tp_status view_permute(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *odims) {
    int64_t dims[TP_MAX_DIMS];
    int n;
    TP_TRY(tp__arg_ints(args, 1, "dims", dims, TP_MAX_DIMS, 0, &n));
    TP_CHECK(n == self->ndim, TP_ERR_INVALID_ARG,
             "number of dims in the input (%d) does not match the length of the desired ordering of "
             "dimensions (%d)",
             self->ndim, n);
    bool seen[TP_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) {
        int d;
        TP_TRY(tp__wrap_dim(dims[i], self->ndim, &d));
        TP_CHECK(!seen[d], TP_ERR_INVALID_ARG, "duplicate dims are not allowed (dim %d repeated)", d);
        seen[d] = true;
        dims[i] = d;
        odims[i] = tp__dim(self, d);
    }
    return tp_tensor_permute(self, dims, out);
}
DEFINE_VIEW_OP(permute)

/* transpose(Tensor self, int dim0, int dim1) */
static tp_status view_transpose(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *dims) {
    int d0, d1;
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), self->ndim, &d0));
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 2), self->ndim, &d1));
    tp__dims(self, dims);
    if (self->ndim > 0) {
        tp_sdim t = dims[d0];
        dims[d0] = dims[d1];
        dims[d1] = t;
    }
    return tp_tensor_transpose(self, d0, d1, out);
}
DEFINE_VIEW_OP(transpose)

/* squeeze(Tensor self, int[]? dim=None): None removes every size-1 dim; a
 * list removes the listed dims that have size 1. Symbolically a candidate
 * dim is 1 for good or never becomes 1. */
static tp_status view_squeeze(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *odims) {
    bool listed[TP_MAX_DIMS] = {false};
    if (tp__arg_is_none(args, 1)) {
        for (int i = 0; i < self->ndim; i++) listed[i] = true;
    } else {
        int64_t dims[TP_MAX_DIMS];
        int n;
        TP_TRY(tp__arg_ints(args, 1, "dim", dims, TP_MAX_DIMS, 0, &n));
        for (int i = 0; i < n; i++) {
            int d;
            TP_TRY(tp__wrap_dim(dims[i], self->ndim, &d));
            if (self->ndim == 0) continue;
            TP_CHECK(!listed[d], TP_ERR_INVALID_ARG, "dim %d appears multiple times in the list of dims", d);
            listed[d] = true;
        }
    }
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < self->ndim; i++) {
        tp_sdim d = tp__dim(self, i);
        if (listed[i] && tp__dim_eqk(d, 1, "squeezing a dim of size 1")) continue;
        if (listed[i]) tp__dim_ge(d, 2, "a squeezed dim must not become 1");
        odims[k] = d;
        sizes[k] = self->sizes[i];
        strides[k++] = self->strides[i];
    }
    return tp_tensor_as_strided(self, k, sizes, strides, self->offset, out);
}
DEFINE_VIEW_OP(squeeze)

/* unsqueeze(Tensor self, int dim) */
static tp_status view_unsqueeze(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *dims) {
    TP_CHECK(self->ndim < TP_MAX_DIMS, TP_ERR_SHAPE, "the result would have more than %d dims", TP_MAX_DIMS);
    int d;
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), self->ndim + 1, &d));
    for (int i = 0, k = 0; i <= self->ndim; i++) dims[i] = i == d ? tp__dimk(1) : tp__dim(self, k++);
    return tp_tensor_unsqueeze(self, d, out);
}
DEFINE_VIEW_OP(unsqueeze)

/* expand(Tensor self, int[] size): -1 keeps a size; size-1 dims broadcast. */
static tp_status view_expand(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *dims) {
    tp_sdim want[TP_MAX_DIMS];
    int64_t sizes[TP_MAX_DIMS];
    int n;
    char b1[256], b2[256];
    TP_TRY(tp__arg_sdims(args, 1, "size", want, TP_MAX_DIMS, 0, &n));
    sizes_of(n, want, sizes);
    TP_CHECK(n >= self->ndim, TP_ERR_SHAPE,
             "the number of sizes provided (%d) must be greater or equal to the number of dimensions in "
             "the tensor (%d)",
             n, self->ndim);
    for (int i = 0; i < n; i++) {
        int ti = i - (n - self->ndim);
        dims[i] = want[i];
        if (ti < 0) {
            TP_CHECK(want[i].v >= 0, TP_ERR_SHAPE,
                     "the expanded size of the tensor (%" PRId64 ") isn't allowed in a leading, non-existing "
                     "dimension %d",
                     want[i].v, i);
            continue;
        }
        tp_sdim have = tp__dim(self, ti);
        if (want[i].v == -1 && tp__dim_is_const(want[i])) {
            dims[i] = have;
            continue;
        }
        if (tp__dim_is_const(have) && have.v == 1 && want[i].v >= 0) continue; /* broadcasts to any size */
        if (tp__dim_eq(have, want[i],
                       tp__dim_is_const(want[i]) ? "expand to a fixed size" : "expand to a size of the same dim"))
            continue;
        TP_CHECK(have.v == 1 && want[i].v >= 0 && tp__dim_eqk(have, 1, "expanding a dim of size 1"), TP_ERR_SHAPE,
                 "the expanded size of the tensor (%" PRId64 ") must match the existing size (%" PRId64
                 ") at non-singleton dimension %d. Target sizes: %s. Tensor sizes: %s",
                 want[i].v, have.v, i, tp__shape_str(n, sizes, b1, sizeof b1),
                 tp__shape_str(self->ndim, self->sizes, b2, sizeof b2));
    }
    return tp_tensor_expand(self, n, sizes, out);
}
DEFINE_VIEW_OP(expand)

/* A slice bound clamped to [0, n] as Python slicing does (negative counts
 * from the end). Symbolically the side of the clamp seen is required; a
 * dynamic bound must stay non-negative. */
static tp_sdim clamp_bound(tp_sdim b, tp_sdim n, const char *what) {
    if (tp__dim_is_const(b)) {
        int64_t i = b.v;
        if (i >= INT64_MAX / 4) return n; /* "to the end" */
        if (i < 0) {
            tp_sdim v = tp__dim_addk(n, i);
            if (v.v >= 0) {
                tp__dim_ge(v, 0, what);
                return v;
            }
            tp__dim_ge(tp__dim_mulk(v, -1), 0, what);
            return tp__dimk(0);
        }
        if (n.v >= i) {
            tp__dim_ge(tp__dim_addk(n, -i), 0, what);
            return b;
        }
        tp__dim_ge(tp__dim_sub(b, n), 0, what);
        return n;
    }
    if (b.v < 0) tp__dim_give_up();
    tp__dim_ge(b, 0, "a symbolic slice bound stays non-negative");
    return tp__dim_min(b, n, what);
}

/* slice(Tensor self, int dim=0, int? start=None, int? end=None, int step=1):
 * aten.slice.Tensor - start/end clamp to the dim like Python slicing. */
static tp_status view_slice(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *dims) {
    TP_CHECK(self->ndim > 0, TP_ERR_INDEX, "cannot slice a 0-dim tensor");
    int d;
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), self->ndim, &d));
    tp_sdim bs = tp__arg_is_none(args, 2) ? tp__dimk(0) : tp__arg_sdim(args, 2);
    tp_sdim be = tp__arg_is_none(args, 3) ? tp__dimk(INT64_MAX) : tp__arg_sdim(args, 3);
    int64_t start = bs.v, end = be.v;
    int64_t step = tp__arg_int(args, 4);
    TP_CHECK(step > 0, TP_ERR_INVALID_ARG, "step must be positive, got %" PRId64, step);
    tp__dims(self, dims);
    tp_sdim n = dims[d];
    tp_sdim lo = clamp_bound(bs, n, "slice start within the dim"), hi = clamp_bound(be, n, "slice end within the dim");
    tp_sdim len = tp__dim_sub(hi, lo);
    if (len.v > 0) {
        tp__dim_ge(len, 0, "slice length");
        dims[d] = tp__dim_ceildiv(len, step);
    } else {
        tp__dim_ge(tp__dim_mulk(len, -1), 0, "empty slice");
        dims[d] = tp__dimk(0);
    }
    /* A step beyond the dim size selects at most one element; clamp it so
     * the view's stride cannot overflow. */
    int64_t sz = self->sizes[d];
    if (step > sz) step = sz > 0 ? sz : 1;
    return tp_tensor_slice(self, d, start, end, step, out);
}
DEFINE_VIEW_OP(slice)

/* select(Tensor self, int dim, int index) */
static tp_status view_select(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *dims) {
    TP_CHECK(self->ndim > 0, TP_ERR_INDEX, "cannot select from a 0-dim tensor");
    int d;
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), self->ndim, &d));
    int64_t index = tp__arg_int(args, 2);
    tp_sdim n = tp__dim(self, d);
    char buf[256];
    TP_CHECK(tp__dim_ge(tp__dim_addk(n, index < 0 ? index : -index - 1), 0, "select index within the dim"),
             TP_ERR_INDEX, "index %" PRId64 " out of range for tensor of size %s at dimension %d", index,
             tp__shape_str(self->ndim, self->sizes, buf, sizeof buf), d);
    for (int i = 0, k = 0; i < self->ndim; i++)
        if (i != d) dims[k++] = tp__dim(self, i);
    return tp_tensor_select(self, d, index, out);
}
DEFINE_VIEW_OP(select)

/* narrow(Tensor self, int dim, int start, int length) */
static tp_status view_narrow(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *dims) {
    TP_CHECK(self->ndim > 0, TP_ERR_INDEX, "cannot narrow a 0-dim tensor");
    int d;
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), self->ndim, &d));
    tp_sdim st = tp__arg_sdim(args, 2), ln = tp__arg_sdim(args, 3);
    tp__dims(self, dims);
    tp_sdim n = dims[d];
    int64_t start = st.v, length = ln.v;
    TP_CHECK(start >= -n.v && start <= n.v, TP_ERR_INDEX,
             "start out of range (expected to be in range of [%" PRId64 ", %" PRId64 "], but got %" PRId64 ")", -n.v,
             n.v, start);
    if (!tp__dim_is_const(st)) {
        if (start < 0) tp__dim_give_up();
        tp__dim_ge(st, 0, "a symbolic narrow start stays non-negative");
    } else if (start < 0) {
        tp__dim_ge(tp__dim_addk(n, start), 0, "narrow start within the dim");
        st = tp__dim_addk(n, start);
        start += n.v;
    }
    TP_CHECK(length >= 0, TP_ERR_INVALID_ARG, "length must be non-negative, got %" PRId64, length);
    if (!tp__dim_is_const(ln)) tp__dim_ge(ln, 0, "narrow length >= 0");
    TP_CHECK(tp__dim_ge(tp__dim_sub(n, tp__dim_add(st, ln)), 0, "narrow window within the dim"), TP_ERR_INDEX,
             "start (%" PRId64 ") + length (%" PRId64 ") exceeds dimension size (%" PRId64 ")", start, length, n.v);
    dims[d] = ln;
    return tp_tensor_narrow(self, d, start, length, out);
}
DEFINE_VIEW_OP(narrow)

/* contiguous(Tensor self, *, Any memory_format=None): self when already
 * contiguous, else a contiguous copy. */
static tp_status view_contiguous(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *dims) {
    TP_UNUSED(args);
    tp__dims(self, dims);
    if (tp_tensor_is_meta(self) && !tp_tensor_is_contiguous(self))
        return tp__tensor_make(self->dtype, self->ndim, self->sizes, NULL, 0, NULL, out);
    return tp_tensor_contiguous(self, out);
}
DEFINE_VIEW_OP(contiguous)

/* to(Tensor self, ScalarType? dtype=None, bool non_blocking=False,
 * bool copy=False, *, Any memory_format=None, ...): self when the dtype is
 * unchanged and copy is False, else a converted contiguous copy. The
 * layout/device/pin_memory keywords of aten's to() are accepted and
 * ignored (every tensor here is a dense CPU tensor). */
static tp_status view_to(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *dims) {
    tp_dtype dtype = args[1].kind == TP_VAL_DTYPE ? args[1].u.dtype : self->dtype;
    TP_CHECK((unsigned)dtype < TP_DTYPE_COUNT, TP_ERR_TYPE, "invalid dtype %d", (int)dtype);
    tp__dims(self, dims);
    if (dtype == self->dtype && !tp__arg_bool(args, 3)) {
        *out = tp_tensor_retain(self);
        return TP_OK;
    }
    if (tp_tensor_is_meta(self)) return tp__tensor_make(dtype, self->ndim, self->sizes, NULL, 0, NULL, out);
    return tp_tensor_to(self, dtype, out);
}
DEFINE_VIEW_OP(to)

/* ---- split / chunk: lists of views ------------------------------------ */

/* Build the result list: pieces of lens[i] along dim. With meta set, the
 * items are meta tensors (shape rule); otherwise views of self. */
static tp_status split_result(tp_tensor *self, int dim, const tp_sdim *lens, int64_t count, bool meta, tp_value *out) {
    tp_value list;
    TP_TRY(tp_value_list(count, &list));
    int64_t offset = 0;
    for (int64_t i = 0; i < count; i++) {
        tp_status st;
        if (meta) {
            tp_sdim dims[TP_MAX_DIMS];
            tp__dims(self, dims);
            dims[dim] = lens[i];
            st = tp__out_dims(&list.u.seq.items[i], self->dtype, self->ndim, dims);
        } else {
            tp_tensor *piece;
            st = tp_tensor_narrow(self, dim, offset, lens[i].v, &piece);
            if (st == TP_OK) list.u.seq.items[i] = tp_value_tensor(piece);
        }
        if (st != TP_OK) {
            tp_value_clear(&list);
            return st;
        }
        offset += lens[i].v;
    }
    tp_value_clear(out);
    *out = list;
    return TP_OK;
}

/* Pieces of split_size (the last one shorter) along a dim of size n (a
 * constant: how many pieces there are depends on it). */
static tp_status equal_pieces(int64_t n, int64_t split_size, tp_sdim **lens, int64_t *count) {
    int64_t k = split_size == 0 ? 1 : (n == 0 ? 1 : (n - 1) / split_size + 1);
    tp_sdim *l = tp_malloc((size_t)k * sizeof *l);
    TP_CHECK(l != NULL, TP_ERR_NOMEM, "out of memory for %" PRId64 " split sizes", k);
    for (int64_t i = 0; i < k; i++) l[i] = tp__dimk(split_size);
    l[k - 1] = tp__dimk(n - split_size * (k - 1));
    *lens = l;
    *count = k;
    return TP_OK;
}

/* split(Tensor self, Any split_size_or_sections, int dim=0) */
static tp_status split_plan(tp_tensor *self, const tp_value *args, int *dim, tp_sdim **lens, int64_t *count) {
    TP_CHECK(self->ndim > 0, TP_ERR_SHAPE, "expected at least a 1-dimensional tensor");
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 2), self->ndim, dim));
    tp_sdim nd = tp__dim(self, *dim);
    int64_t n = nd.v;
    const tp_value *s = &args[1];
    if (s->kind == TP_VAL_INT) {
        int64_t size = s->u.i;
        TP_CHECK(size >= 0, TP_ERR_INVALID_ARG, "the split size must be non-negative, got %" PRId64, size);
        TP_CHECK(size > 0 || n == 0, TP_ERR_INVALID_ARG,
                 "the split size can only be 0 if dimension size is 0, but got dimension size of %" PRId64, n);
        tp__dim_eqk(nd, n, "the number of splits depends on the size");
        return equal_pieces(n, size, lens, count);
    }
    TP_CHECK(tp_value_is_seq(s), TP_ERR_TYPE,
             "argument split_size_or_sections must be an int or a list of ints, not %s", tp_value_kind_name(s->kind));
    int64_t k = tp_value_len(s), total = 0;
    for (int64_t i = 0; i < k; i++) {
        const tp_value *e = tp_value_at(s, i);
        TP_CHECK(e->kind == TP_VAL_INT, TP_ERR_TYPE,
                 "argument split_size_or_sections[%" PRId64 "] must be an int, not %s", i, tp_value_kind_name(e->kind));
        TP_CHECK(e->u.i >= 0, TP_ERR_INVALID_ARG,
                 "the split sizes must be non-negative, but split_size_or_sections[%" PRId64 "] is %" PRId64, i,
                 e->u.i);
        TP_CHECK(tp_add_overflow_i64(total, e->u.i, &total), TP_ERR_INVALID_ARG, "the split sizes overflow");
    }
    TP_CHECK(tp__dim_eqk(nd, total, "split sections must add up to the size"), TP_ERR_INVALID_ARG,
             "the split sizes must sum exactly to %" PRId64
             " (input tensor's size at dimension %d), but they sum to %" PRId64,
             n, *dim, total);
    tp_sdim *l = tp_malloc((size_t)(k ? k : 1) * sizeof *l);
    TP_CHECK(l != NULL, TP_ERR_NOMEM, "out of memory for %" PRId64 " split sizes", k);
    for (int64_t i = 0; i < k; i++) l[i] = tp__dimk(tp_value_at(s, i)->u.i);
    *lens = l;
    *count = k;
    return TP_OK;
}

/* chunk(Tensor self, int chunks, int dim=0): pieces of ceil(n / chunks).
 * A dynamic size divisible by chunks gives chunks equal dynamic pieces;
 * otherwise the pieces depend on the size, which is specialised. */
static tp_status chunk_plan(tp_tensor *self, const tp_value *args, int *dim, tp_sdim **lens, int64_t *count) {
    TP_CHECK(self->ndim > 0, TP_ERR_SHAPE, "expected at least a 1-dimensional tensor");
    int64_t chunks = tp__arg_int(args, 1);
    TP_CHECK(chunks > 0, TP_ERR_INVALID_ARG, "the number of chunks must be greater than 0, got %" PRId64, chunks);
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 2), self->ndim, dim));
    tp_sdim nd = tp__dim(self, *dim);
    int64_t n = nd.v;
    if (!tp__dim_is_const(nd) && n > 0 && n % chunks == 0) {
        tp__dim_divisible(nd, chunks, "chunk into equal parts");
        tp__dim_ge(nd, chunks, "one element per chunk");
        tp_sdim *l = tp_malloc((size_t)chunks * sizeof *l);
        TP_CHECK(l != NULL, TP_ERR_NOMEM, "out of memory for %" PRId64 " chunks", chunks);
        for (int64_t i = 0; i < chunks; i++) l[i] = tp__dim_floordiv(nd, chunks);
        *lens = l;
        *count = chunks;
        return TP_OK;
    }
    tp__dim_eqk(nd, n, "chunk counts depend on the size");
    if (n == 0) { /* PyTorch returns `chunks` empty pieces */
        tp_sdim *l = tp_calloc((size_t)chunks, sizeof *l);
        TP_CHECK(l != NULL, TP_ERR_NOMEM, "out of memory for %" PRId64 " chunks", chunks);
        *lens = l;
        *count = chunks;
        return TP_OK;
    }
    return equal_pieces(n, (n - 1) / chunks + 1, lens, count);
}

typedef tp_status (*split_plan_fn)(tp_tensor *self, const tp_value *args, int *dim, tp_sdim **lens, int64_t *count);

static tp_status split_run(const tp_value *args, tp_value *out, split_plan_fn plan, bool meta) {
    tp_tensor *self;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    int dim;
    tp_sdim *lens = NULL;
    int64_t count = 0;
    TP_TRY(plan(self, args, &dim, &lens, &count));
    tp_status st = split_result(self, dim, lens, count, meta, out);
    tp_free(lens);
    return st;
}

static tp_status infer_split(const tp_value *args, tp_value *out) { return split_run(args, out, split_plan, true); }
static tp_status kernel_split(const tp_value *args, tp_value *out) { return split_run(args, out, split_plan, false); }
static tp_status infer_chunk(const tp_value *args, tp_value *out) { return split_run(args, out, chunk_plan, true); }
static tp_status kernel_chunk(const tp_value *args, tp_value *out) { return split_run(args, out, chunk_plan, false); }

/* ---- tensor_split / hsplit / vsplit / dsplit: lists of views ----------
 * tensor_split(Tensor self, Any indices_or_sections, int dim=0): an int n
 * gives n pieces, the first size % n of them one longer; a list of indices
 * gives the pieces between them, each bounded as a slice is (negative
 * indices count from the end, an end before its start gives an empty
 * piece), so pieces may overlap. hsplit splits dim 1 (dim 0 of a 1-D
 * tensor), vsplit dim 0, dsplit dim 2; an int for them must divide the
 * size (hsplit and co. take no dim). Tensors of indices are not supported (their values are only known
 * at run time). */
static int64_t slice_bound(int64_t i, int64_t n) {
    if (i < 0) i += n;
    return i < 0 ? 0 : i > n ? n : i;
}

static tp_status tensor_split_run(tp_op op, const tp_value *args, tp_value *out, bool meta) {
    const char *name = op == TP_OP_HSPLIT ? "hsplit" : op == TP_OP_VSPLIT ? "vsplit" : "dsplit";
    int min_dims = op == TP_OP_HSPLIT ? 1 : op == TP_OP_VSPLIT ? 2 : 3, dim = 0;
    tp_tensor *self;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    if (op == TP_OP_TENSOR_SPLIT) {
        TP_CHECK(self->ndim > 0, TP_ERR_SHAPE,
                 "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims");
        TP_TRY(tp__wrap_dim(tp__arg_int(args, 2), self->ndim, &dim));
    } else {
        TP_CHECK(self->ndim >= min_dims, TP_ERR_SHAPE,
                 "torch.%s requires a tensor with at least %d dimension, but got a tensor with %d dimensions!", name,
                 min_dims, self->ndim);
        dim = op == TP_OP_HSPLIT ? (self->ndim == 1 ? 0 : 1) : op == TP_OP_VSPLIT ? 0 : 2;
    }
    int64_t n = self->sizes[dim];
    tp__dim_eqk(tp__dim(self, dim), n, "the pieces depend on the size");
    const tp_value *s = &args[1];
    int64_t count;
    if (s->kind == TP_VAL_INT) {
        if (op != TP_OP_TENSOR_SPLIT)
            TP_CHECK(s->u.i != 0 && n % s->u.i == 0, TP_ERR_INVALID_ARG,
                     "torch.%s attempted to split along dimension %d, but the size of the dimension %" PRId64
                     " is not divisible by the split_size %" PRId64 "!",
                     name, dim, n, s->u.i);
        TP_CHECK(s->u.i > 0, TP_ERR_INVALID_ARG, "number of sections must be larger than 0, got %" PRId64, s->u.i);
        count = s->u.i;
    } else {
        TP_CHECK(tp_value_is_seq(s), TP_ERR_TYPE,
                 "argument indices_or_sections must be an int or a list of ints, not %s", tp_value_kind_name(s->kind));
        for (int64_t i = 0; i < tp_value_len(s); i++)
            TP_CHECK(tp_value_at(s, i)->kind == TP_VAL_INT, TP_ERR_TYPE,
                     "argument indices_or_sections[%" PRId64 "] must be an int, not %s", i,
                     tp_value_kind_name(tp_value_at(s, i)->kind));
        count = tp_value_len(s) + 1;
    }
    tp_value list;
    TP_TRY(tp_value_list(count, &list));
    int64_t start = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t begin, len;
        if (s->kind == TP_VAL_INT) {
            len = n / count + (i < n % count ? 1 : 0);
            begin = start;
            start += len;
        } else {
            begin = slice_bound(start, n);
            int64_t end = i + 1 < count ? slice_bound(tp_value_at(s, i)->u.i, n) : n;
            len = end > begin ? end - begin : 0;
            if (i + 1 < count) start = tp_value_at(s, i)->u.i;
        }
        tp_status st;
        if (meta) {
            tp_sdim dims[TP_MAX_DIMS];
            tp__dims(self, dims);
            dims[dim] = tp__dimk(len);
            st = tp__out_dims(&list.u.seq.items[i], self->dtype, self->ndim, dims);
        } else {
            tp_tensor *piece;
            st = tp_tensor_narrow(self, dim, begin, len, &piece);
            if (st == TP_OK) list.u.seq.items[i] = tp_value_tensor(piece);
        }
        if (st != TP_OK) {
            tp_value_clear(&list);
            return st;
        }
    }
    tp_value_clear(out);
    *out = list;
    return TP_OK;
}

#define TENSOR_SPLIT_OP(nm, op_id)                                                                             \
    static tp_status infer_##nm(const tp_value *args, tp_value *out) {                                         \
        return tensor_split_run(op_id, args, out, true);                                                       \
    }                                                                                                          \
    static tp_status kernel_##nm(const tp_value *args, tp_value *out) {                                        \
        return tensor_split_run(op_id, args, out, false);                                                      \
    }
TENSOR_SPLIT_OP(tensor_split, TP_OP_TENSOR_SPLIT)
TENSOR_SPLIT_OP(hsplit, TP_OP_HSPLIT)
TENSOR_SPLIT_OP(vsplit, TP_OP_VSPLIT)
TENSOR_SPLIT_OP(dsplit, TP_OP_DSPLIT)

/* ---- getitem: operator.getitem on a tuple/list (or a tensor's dim 0) ---- */

/* Copy v, replacing every tensor with a contiguous meta tensor. */
static tp_status copy_as_meta(const tp_value *v, tp_value *out) {
    *out = tp_value_none();
    if (v->kind == TP_VAL_TENSOR) return tp__out_like(out, v->u.tensor->dtype, v->u.tensor);
    if (v->kind != TP_VAL_LIST && v->kind != TP_VAL_TUPLE) return tp_value_copy(v, out);
    int64_t n = tp_value_len(v);
    TP_TRY(v->kind == TP_VAL_LIST ? tp_value_list(n, out) : tp_value_tuple(n, out));
    for (int64_t i = 0; i < n; i++) {
        tp_status st = copy_as_meta(&v->u.seq.items[i], &out->u.seq.items[i]);
        if (st != TP_OK) {
            tp_value_clear(out);
            return st;
        }
    }
    return TP_OK;
}

static tp_status getitem_run(const tp_value *args, tp_value *out, bool meta) {
    const tp_value *self = &args[0];
    if (args[1].kind == TP_VAL_STR) { /* d['key'] of a dict (tensorplay reads dict inputs by key) */
        TP_CHECK(self->kind == TP_VAL_DICT, TP_ERR_TYPE, "indexing by key '%.64s' needs a dict, not %s", args[1].u.s,
                 tp_value_kind_name(self->kind));
        const tp_value *v = tp_value_dict_get(self, args[1].u.s);
        TP_CHECK(v != NULL, TP_ERR_MISSING, "dict has no key '%.64s'", args[1].u.s);
        tp_value item;
        TP_TRY(meta ? copy_as_meta(v, &item) : tp_value_copy(v, &item));
        tp_value_move(out, &item);
        return TP_OK;
    }
    TP_CHECK(args[1].kind == TP_VAL_INT, TP_ERR_TYPE, "getitem(): index must be an int or a str key, not %s",
             tp_value_kind_name(args[1].kind));
    int64_t index = args[1].u.i;
    if (self->kind == TP_VAL_TENSOR) { /* tensor[i]: select along dim 0 */
        tp_tensor *t = self->u.tensor;
        TP_CHECK(t->ndim > 0, TP_ERR_INDEX, "invalid index of a 0-dim tensor");
        int64_t n = t->sizes[0];
        TP_CHECK(tp__dim_ge(tp__dim_addk(tp__dim(t, 0), index < 0 ? index : -index - 1), 0, "index within the dim"),
                 TP_ERR_INDEX, "index %" PRId64 " is out of bounds for dimension 0 with size %" PRId64, index, n);
        if (meta) {
            tp_sdim dims[TP_MAX_DIMS];
            tp__dims(t, dims);
            return tp__out_dims(out, t->dtype, t->ndim - 1, dims + 1);
        }
        tp_tensor *r;
        TP_TRY(tp_tensor_select(t, 0, index, &r));
        tp_value_clear(out);
        *out = tp_value_tensor(r);
        return TP_OK;
    }
    /* dicts are read by position (insertion order): export reads dict inputs this way */
    TP_CHECK(self->kind == TP_VAL_LIST || self->kind == TP_VAL_TUPLE || self->kind == TP_VAL_DICT, TP_ERR_TYPE,
             "self must be a tuple, list or tensor, not %s", tp_value_kind_name(self->kind));
    int64_t n = tp_value_len(self);
    TP_CHECK(index >= -n && index < n, TP_ERR_INDEX, "%s index %" PRId64 " out of range (length %" PRId64 ")",
             tp_value_kind_name(self->kind), index, n);
    if (index < 0) index += n;
    tp_value item;
    TP_TRY(meta ? copy_as_meta(&self->u.seq.items[index], &item) : tp_value_copy(&self->u.seq.items[index], &item));
    tp_value_move(out, &item);
    return TP_OK;
}

static tp_status infer_getitem(const tp_value *args, tp_value *out) { return getitem_run(args, out, true); }
static tp_status kernel_getitem(const tp_value *args, tp_value *out) { return getitem_run(args, out, false); }

/* ---- cat / stack ------------------------------------------------------- */

typedef struct concat_plan {
    tp_dtype dtype;
    int dim;
    int ndim;
    tp_sdim sizes[TP_MAX_DIMS];
} concat_plan;

/* Common checks of a tensor list: non-empty, all tensors; the promoted
 * dtype. */
static tp_status list_dtype(const tp_value *list, tp_dtype *dtype) {
    int64_t n = tp_value_len(list);
    TP_CHECK(n > 0, TP_ERR_INVALID_ARG, "expected a non-empty list of tensors");
    for (int64_t k = 0; k < n; k++) {
        const tp_value *item = tp_value_at(list, k);
        TP_CHECK(item->kind == TP_VAL_TENSOR, TP_ERR_TYPE, "tensors[%" PRId64 "] must be a Tensor, not %s", k,
                 tp_value_kind_name(item->kind));
        *dtype = k ? tp_promote_types(*dtype, item->u.tensor->dtype) : item->u.tensor->dtype;
    }
    return TP_OK;
}

/* PyTorch's legacy rule: 1-d empty tensors are skipped by cat (a dynamic
 * size that is 0 in the example cannot be followed). */
static bool cat_skipped(const tp_tensor *t) {
    if (t->ndim != 1 || t->sizes[0] != 0) return false;
    if (!tp__dim_is_const(tp__dim(t, 0))) tp__dim_give_up();
    return true;
}

static tp_status cat_plan(const tp_value *args, concat_plan *p) {
    const tp_value *list = &args[0];
    TP_TRY(list_dtype(list, &p->dtype));
    int64_t n = tp_value_len(list);
    const tp_tensor *ref = NULL;
    for (int64_t k = 0; k < n; k++) {
        const tp_tensor *t = tp_value_at(list, k)->u.tensor;
        TP_CHECK(t->ndim > 0, TP_ERR_SHAPE, "zero-dimensional tensor (at position %" PRId64 ") cannot be concatenated",
                 k);
        if (!ref && !cat_skipped(t)) ref = t;
    }
    if (!ref) { /* every input is a 1-d empty tensor */
        TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), 1, &p->dim));
        p->ndim = 1;
        p->sizes[0] = tp__dimk(0);
        return TP_OK;
    }
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), ref->ndim, &p->dim));
    p->ndim = tp__dims(ref, p->sizes);
    p->sizes[p->dim] = tp__dimk(0);
    for (int64_t k = 0; k < n; k++) {
        const tp_tensor *t = tp_value_at(list, k)->u.tensor;
        if (cat_skipped(t)) continue;
        TP_CHECK(t->ndim == ref->ndim, TP_ERR_SHAPE, "Tensors must have same number of dimensions: got %d and %d",
                 ref->ndim, t->ndim);
        for (int d = 0; d < t->ndim; d++) {
            TP_CHECK(d == p->dim || t == ref ||
                         tp__dim_eq(tp__dim(t, d), tp__dim(ref, d), "sizes of the non-concatenated dims"),
                     TP_ERR_SHAPE,
                     "Sizes of tensors must match except in dimension %d. Expected size %" PRId64
                     " but got size %" PRId64 " for tensor number %" PRId64 " in the list.",
                     p->dim, ref->sizes[d], t->sizes[d], k);
        }
        int64_t sum;
        TP_CHECK(tp_add_overflow_i64(p->sizes[p->dim].v, t->sizes[p->dim], &sum), TP_ERR_SHAPE,
                 "concatenated size overflows");
        p->sizes[p->dim] = tp__dim_add(p->sizes[p->dim], tp__dim(t, p->dim));
    }
    return TP_OK;
}

static tp_status infer_cat(const tp_value *args, tp_value *out) {
    concat_plan p;
    TP_TRY(cat_plan(args, &p));
    return tp__out_dims(out, p.dtype, p.ndim, p.sizes);
}

static tp_status kernel_cat(const tp_value *args, tp_value *out) {
    concat_plan p;
    TP_TRY(cat_plan(args, &p));
    tp_tensor *o = tp__out_at(out, 0);
    int64_t offset = 0;
    for (int64_t k = 0; k < tp_value_len(&args[0]); k++) {
        tp_tensor *t = tp_value_at(&args[0], k)->u.tensor, dst;
        if (cat_skipped(t)) continue;
        tp__view_narrow(o, p.dim, offset, t->sizes[p.dim], &dst); /* on the stack: no allocation */
        TP_TRY(tp_tensor_copy_(&dst, t));
        offset += t->sizes[p.dim];
    }
    return TP_OK;
}

static tp_status stack_plan(const tp_value *args, concat_plan *p) {
    const tp_value *list = &args[0];
    TP_TRY(list_dtype(list, &p->dtype));
    const tp_tensor *first = tp_value_at(list, 0)->u.tensor;
    int64_t n = tp_value_len(list);
    char b1[256], b2[256];
    for (int64_t k = 1; k < n; k++) {
        const tp_tensor *t = tp_value_at(list, k)->u.tensor;
        bool same = t->ndim == first->ndim;
        for (int d = 0; same && d < t->ndim; d++)
            same = tp__dim_eq(tp__dim(t, d), tp__dim(first, d), "stacked tensors have equal shapes");
        TP_CHECK(same,
                 TP_ERR_SHAPE, "expected each tensor to be equal size, but got %s at entry 0 and %s at entry %" PRId64,
                 tp__shape_str(first->ndim, first->sizes, b1, sizeof b1),
                 tp__shape_str(t->ndim, t->sizes, b2, sizeof b2), k);
    }
    TP_CHECK(first->ndim < TP_MAX_DIMS, TP_ERR_SHAPE, "the result would have more than %d dims", TP_MAX_DIMS);
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), first->ndim + 1, &p->dim));
    p->ndim = first->ndim + 1;
    for (int i = 0, j = 0; i < p->ndim; i++) p->sizes[i] = i == p->dim ? tp__dimk(n) : tp__dim(first, j++);
    return TP_OK;
}

static tp_status infer_stack(const tp_value *args, tp_value *out) {
    concat_plan p;
    TP_TRY(stack_plan(args, &p));
    return tp__out_dims(out, p.dtype, p.ndim, p.sizes);
}

static tp_status kernel_stack(const tp_value *args, tp_value *out) {
    concat_plan p;
    TP_TRY(stack_plan(args, &p));
    tp_tensor *o = tp__out_at(out, 0);
    for (int64_t k = 0; k < tp_value_len(&args[0]); k++) {
        tp_tensor *dst;
        TP_TRY(tp_tensor_select(o, p.dim, k, &dst));
        tp_status st = tp_tensor_copy_(dst, tp_value_at(&args[0], k)->u.tensor);
        tp_tensor_free(dst);
        TP_TRY(st);
    }
    return TP_OK;
}

/* ---- index-mapped copies (flip, repeat, non-constant pad) ---------------
 * maps[d][o] is the source element offset (index * stride) that output
 * index o along dim d reads; the source offset of an element is the sum
 * over dims. */

typedef struct index_maps {
    int64_t *buf;
    int64_t *at[TP_MAX_DIMS];
} index_maps;

static tp_status maps_alloc(index_maps *m, int ndim, const int64_t *sizes) {
    int64_t total = 0;
    for (int d = 0; d < ndim; d++) total += sizes[d];
    m->buf = tp_malloc((size_t)(total ? total : 1) * sizeof *m->buf);
    TP_CHECK(m->buf != NULL, TP_ERR_NOMEM, "out of memory for index maps");
    int64_t pos = 0;
    for (int d = 0; d < ndim; d++) {
        m->at[d] = m->buf + pos;
        pos += sizes[d];
    }
    return TP_OK;
}

static void copy_mapped(tp_tensor *out, const tp_tensor *src, const index_maps *m) {
    size_t es = tp_dtype_size(out->dtype);
    const char *base = tp__tensor_base(src);
    tp_iter it;
    tp__iter_init(&it, out->ndim, out->sizes, 1, (const tp_tensor *[]){out});
    while (tp__iter_next(&it)) {
        int64_t off = 0;
        for (int d = 0; d < out->ndim; d++) off += m->at[d][it.index[d]];
        memcpy(it.ptr[0], base + off * (int64_t)es, es);
    }
}

/* ---- flip / repeat / clone --------------------------------------------- */

/* flip(Tensor self, int[] dims): which dims to reverse. */
static tp_status flip_plan(const tp_tensor *self, const tp_value *args, bool *flipped) {
    int64_t dims[TP_MAX_DIMS];
    int n;
    TP_TRY(tp__arg_ints(args, 1, "dims", dims, TP_MAX_DIMS, 0, &n));
    for (int i = 0; i < TP_MAX_DIMS; i++) flipped[i] = false;
    for (int i = 0; i < n; i++) {
        int d;
        TP_TRY(tp__wrap_dim(dims[i], self->ndim, &d));
        TP_CHECK(!flipped[d], TP_ERR_INVALID_ARG, "dim %d appears multiple times in the list of dims", d);
        flipped[d] = true;
    }
    if (self->ndim == 0) flipped[0] = false;
    return TP_OK;
}

static tp_status infer_flip(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    bool flipped[TP_MAX_DIMS];
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(flip_plan(self, args, flipped));
    return tp__out_like(out, self->dtype, self);
}

static tp_status kernel_flip(const tp_value *args, tp_value *out) {
    tp_tensor *self, *o = tp__out_at(out, 0);
    bool flipped[TP_MAX_DIMS];
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(tp__has_data(self, "self"));
    TP_TRY(flip_plan(self, args, flipped));
    if (tp_tensor_numel(o) == 0) return TP_OK;
    index_maps m;
    TP_TRY(maps_alloc(&m, self->ndim, self->sizes));
    for (int d = 0; d < self->ndim; d++) {
        int64_t n = self->sizes[d];
        for (int64_t i = 0; i < n; i++) m.at[d][i] = (flipped[d] ? n - 1 - i : i) * self->strides[d];
    }
    copy_mapped(o, self, &m);
    tp_free(m.buf);
    return TP_OK;
}

/* ---- pixel_shuffle / pixel_unshuffle / channel_shuffle ------------------
 * Index-mapped copies: each output dim reads a fixed source offset per
 * index, so the maps above express them.
 *   pixel_shuffle(x, r):   [*, C*r*r, H, W] -> [*, C, H*r, W*r],
 *       y[.., c, h*r+i, w*r+j] = x[.., c*r*r + i*r + j, h, w]
 *   pixel_unshuffle(x, r): the inverse
 *   channel_shuffle(x, g): [N, C, *], y[:, k*g + gi] = x[:, gi*(C/g) + k] */

typedef enum { SHUF_PIXEL, SHUF_PIXEL_UN, SHUF_CHANNEL } shuffle_kind;

static tp_status shuffle_plan(const tp_value *args, shuffle_kind kind, tp_tensor **self, tp_sdim *sizes) {
    TP_TRY(tp__need_tensor(args, 0, "self", self));
    const tp_tensor *x = *self;
    int64_t f = tp__arg_int(args, 1);
    int nd = x->ndim;
    if (kind == SHUF_CHANNEL) {
        char buf[256];
        TP_CHECK(nd > 2, TP_ERR_SHAPE, "channel_shuffle expects input with > 2 dims, but got input with sizes %s",
                 tp__shape_str(nd, x->sizes, buf, sizeof buf));
        TP_CHECK(f > 0, TP_ERR_INVALID_ARG,
                 "Number of groups to divide channels in must be positive. Value of groups:%" PRId64, f);
        TP_CHECK(tp__dim_divisible(tp__dim(x, 1), f, "channels divide into groups"), TP_ERR_SHAPE,
                 "Number of channels must be divisible by groups. Got %" PRId64 " channels and %" PRId64 " groups.",
                 x->sizes[1], f);
        tp__dims(x, sizes);
        return TP_OK;
    }
    const char *name = kind == SHUF_PIXEL ? "pixel_shuffle" : "pixel_unshuffle";
    TP_CHECK(nd >= 3, TP_ERR_SHAPE,
             "%s expects input to have at least 3 dimensions, but got input with %d dimension(s)", name, nd);
    TP_CHECK(f > 0, TP_ERR_INVALID_ARG, "%s expects a positive %s, but got %" PRId64, name,
             kind == SHUF_PIXEL ? "upscale_factor" : "downscale_factor", f);
    tp__dims(x, sizes);
    int64_t c = x->sizes[nd - 3], h = x->sizes[nd - 2], w = x->sizes[nd - 1], ff, t;
    TP_CHECK(tp_mul_overflow_i64(f, f, &ff), TP_ERR_INVALID_ARG, "factor %" PRId64 " is too large", f);
    if (kind == SHUF_PIXEL) {
        TP_CHECK(tp__dim_divisible(sizes[nd - 3], ff, "pixel_shuffle: channels divisible by the factor squared"),
                 TP_ERR_SHAPE,
                 "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                 "upscale_factor, but input.size(-3)=%" PRId64 " is not divisible by %" PRId64,
                 c, ff);
        TP_CHECK(tp_mul_overflow_i64(h, f, &t) && tp_mul_overflow_i64(w, f, &t), TP_ERR_SHAPE,
                 "the result is too large");
        sizes[nd - 3] = tp__dim_floordiv(sizes[nd - 3], ff);
        sizes[nd - 2] = tp__dim_mulk(sizes[nd - 2], f);
        sizes[nd - 1] = tp__dim_mulk(sizes[nd - 1], f);
    } else {
        TP_CHECK(tp__dim_divisible(sizes[nd - 2], f, "pixel_unshuffle: height divisible by the factor"), TP_ERR_SHAPE,
                 "pixel_unshuffle expects height to be divisible by downscale_factor, but input.size(-2)=%" PRId64
                 " is not divisible by %" PRId64,
                 h, f);
        TP_CHECK(tp__dim_divisible(sizes[nd - 1], f, "pixel_unshuffle: width divisible by the factor"), TP_ERR_SHAPE,
                 "pixel_unshuffle expects width to be divisible by downscale_factor, but input.size(-1)=%" PRId64
                 " is not divisible by %" PRId64,
                 w, f);
        TP_CHECK(tp_mul_overflow_i64(c, ff, &t), TP_ERR_SHAPE, "the result is too large");
        sizes[nd - 3] = tp__dim_mulk(sizes[nd - 3], ff);
        sizes[nd - 2] = tp__dim_floordiv(sizes[nd - 2], f);
        sizes[nd - 1] = tp__dim_floordiv(sizes[nd - 1], f);
    }
    return TP_OK;
}

static tp_status shuffle_infer(const tp_value *args, tp_value *out, shuffle_kind kind) {
    tp_tensor *self;
    tp_sdim sizes[TP_MAX_DIMS];
    TP_TRY(shuffle_plan(args, kind, &self, sizes));
    return tp__out_dims(out, self->dtype, self->ndim, sizes);
}

static tp_status shuffle_kernel(const tp_value *args, tp_value *out, shuffle_kind kind) {
    tp_tensor *self, *o = tp__out_at(out, 0);
    tp_sdim sizes[TP_MAX_DIMS];
    TP_TRY(shuffle_plan(args, kind, &self, sizes));
    TP_TRY(tp__has_data(self, "self"));
    if (tp_tensor_numel(o) == 0) return TP_OK;
    int64_t f = tp__arg_int(args, 1);
    int nd = self->ndim;
    const int64_t *st = self->strides;
    index_maps m;
    TP_TRY(maps_alloc(&m, nd, o->sizes));
    for (int d = 0; d < nd; d++)
        for (int64_t i = 0; i < o->sizes[d]; i++) m.at[d][i] = i * st[d];
    if (kind == SHUF_CHANNEL) {
        int64_t per = self->sizes[1] / f; /* channels per group */
        for (int64_t i = 0; i < o->sizes[1]; i++) m.at[1][i] = ((i % f) * per + i / f) * st[1];
    } else if (kind == SHUF_PIXEL) {
        int dc = nd - 3, dh = nd - 2, dw = nd - 1;
        for (int64_t c = 0; c < o->sizes[dc]; c++) m.at[dc][c] = c * f * f * st[dc];
        for (int64_t h = 0; h < o->sizes[dh]; h++) m.at[dh][h] = (h / f) * st[dh] + (h % f) * f * st[dc];
        for (int64_t w = 0; w < o->sizes[dw]; w++) m.at[dw][w] = (w / f) * st[dw] + (w % f) * st[dc];
    } else {
        int dc = nd - 3, dh = nd - 2, dw = nd - 1;
        for (int64_t c = 0; c < o->sizes[dc]; c++) {
            int64_t src_c = c / (f * f), i = (c / f) % f, j = c % f;
            m.at[dc][c] = src_c * st[dc] + i * st[dh] + j * st[dw];
        }
        for (int64_t h = 0; h < o->sizes[dh]; h++) m.at[dh][h] = h * f * st[dh];
        for (int64_t w = 0; w < o->sizes[dw]; w++) m.at[dw][w] = w * f * st[dw];
    }
    copy_mapped(o, self, &m);
    tp_free(m.buf);
    return TP_OK;
}

static tp_status infer_pixel_shuffle(const tp_value *args, tp_value *out) {
    return shuffle_infer(args, out, SHUF_PIXEL);
}
static tp_status kernel_pixel_shuffle(const tp_value *args, tp_value *out) {
    return shuffle_kernel(args, out, SHUF_PIXEL);
}
static tp_status infer_pixel_unshuffle(const tp_value *args, tp_value *out) {
    return shuffle_infer(args, out, SHUF_PIXEL_UN);
}
static tp_status kernel_pixel_unshuffle(const tp_value *args, tp_value *out) {
    return shuffle_kernel(args, out, SHUF_PIXEL_UN);
}
static tp_status infer_channel_shuffle(const tp_value *args, tp_value *out) {
    return shuffle_infer(args, out, SHUF_CHANNEL);
}
static tp_status kernel_channel_shuffle(const tp_value *args, tp_value *out) {
    return shuffle_kernel(args, out, SHUF_CHANNEL);
}

/* repeat(Tensor self, int[] repeats) */
static tp_status repeat_plan(const tp_tensor *self, const tp_value *args, int *ndim, int64_t *sizes, tp_sdim *dims) {
    int64_t reps[TP_MAX_DIMS];
    int n;
    TP_TRY(tp__arg_ints(args, 1, "repeats", reps, TP_MAX_DIMS, 0, &n));
    TP_CHECK(n >= self->ndim, TP_ERR_INVALID_ARG,
             "number of dimensions of repeat dims (%d) can not be smaller than number of dimensions of tensor (%d)", n,
             self->ndim);
    for (int i = 0; i < n; i++) {
        int ti = i - (n - self->ndim);
        int64_t s = ti >= 0 ? self->sizes[ti] : 1;
        TP_CHECK(reps[i] >= 0, TP_ERR_INVALID_ARG, "negative repeat count %" PRId64 " at dim %d", reps[i], i);
        TP_CHECK(tp_mul_overflow_i64(s, reps[i], &sizes[i]), TP_ERR_SHAPE, "the repeated size overflows at dim %d", i);
        if (dims) dims[i] = tp__dim_mulk(ti >= 0 ? tp__dim(self, ti) : tp__dimk(1), reps[i]);
    }
    int64_t numel;
    TP_TRY(tp__numel(n, sizes, &numel));
    *ndim = n;
    return TP_OK;
}

static tp_status infer_repeat(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    int n;
    int64_t sizes[TP_MAX_DIMS];
    tp_sdim dims[TP_MAX_DIMS];
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(repeat_plan(self, args, &n, sizes, dims));
    return tp__out_dims(out, self->dtype, n, dims);
}

static tp_status kernel_repeat(const tp_value *args, tp_value *out) {
    tp_tensor *self, *o = tp__out_at(out, 0);
    int n;
    int64_t sizes[TP_MAX_DIMS];
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(tp__has_data(self, "self"));
    TP_TRY(repeat_plan(self, args, &n, sizes, NULL));
    if (tp_tensor_numel(o) == 0) return TP_OK;
    index_maps m;
    TP_TRY(maps_alloc(&m, n, sizes));
    int lead = n - self->ndim;
    for (int d = 0; d < n; d++) {
        int64_t s = d >= lead ? self->sizes[d - lead] : 1, st = d >= lead ? self->strides[d - lead] : 0;
        for (int64_t o2 = 0; o2 < sizes[d]; o2++) m.at[d][o2] = (o2 % s) * st;
    }
    copy_mapped(o, self, &m);
    tp_free(m.buf);
    return TP_OK;
}

/* clone(Tensor self, *, Any memory_format=None): always a contiguous copy. */
static tp_status infer_clone(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    return tp__out_like(out, self->dtype, self);
}

static tp_status kernel_clone(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    return tp_tensor_copy_(tp__out_at(out, 0), self);
}

/* ---- tile / roll / rot90 / repeat_interleave: index-mapped copies ------- */

/* tile(Tensor self, int[] dims): repeat, with dims padded by leading 1s
 * when shorter than self's rank. */
static tp_status tile_plan(const tp_tensor *self, const tp_value *args, tp_value *reps) {
    int64_t dims[TP_MAX_DIMS], padded[TP_MAX_DIMS];
    int n;
    TP_TRY(tp__arg_ints(args, 1, "dims", dims, TP_MAX_DIMS, 0, &n));
    int lead = n < self->ndim ? self->ndim - n : 0;
    for (int i = 0; i < lead; i++) padded[i] = 1;
    for (int i = 0; i < n; i++) padded[lead + i] = dims[i];
    return tp_value_int_list(padded, lead + n, reps);
}

static tp_status tile_run(const tp_value *args, tp_value *out, bool meta) {
    tp_tensor *self;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    tp_value a[2] = {args[0], tp_value_none()};
    TP_TRY(tile_plan(self, args, &a[1]));
    tp_status st = meta ? infer_repeat(a, out) : kernel_repeat(a, out);
    tp_value_clear(&a[1]);
    return st;
}

static tp_status infer_tile(const tp_value *args, tp_value *out) { return tile_run(args, out, true); }
static tp_status kernel_tile(const tp_value *args, tp_value *out) { return tile_run(args, out, false); }

/* roll(Tensor self, int[] shifts, int[] dims=[]): with no dims the
 * flattened tensor is rolled (one shift); otherwise one shift per dim,
 * shifts of a repeated dim adding up. */
typedef struct roll_plan {
    bool flat;
    int64_t flat_shift;          /* in [0, numel) */
    int64_t shift[TP_MAX_DIMS];  /* per dim, in [0, size) */
} roll_plan;

static int64_t mod_size(int64_t v, int64_t n) {
    if (n <= 0) return 0;
    int64_t r = v % n;
    return r < 0 ? r + n : r;
}

static tp_status roll_plan_make(const tp_tensor *self, const tp_value *args, roll_plan *p) {
    int64_t shifts[TP_MAX_DIMS], dims[TP_MAX_DIMS];
    int ns, nd;
    TP_TRY(tp__arg_ints(args, 1, "shifts", shifts, TP_MAX_DIMS, 0, &ns));
    TP_TRY(tp__arg_ints(args, 2, "dims", dims, TP_MAX_DIMS, 0, &nd));
    TP_CHECK(ns > 0, TP_ERR_INVALID_ARG, "`shifts` required");
    memset(p, 0, sizeof *p);
    if (nd == 0 && ns == 1) {
        p->flat = true;
        p->flat_shift = mod_size(shifts[0], tp_tensor_numel(self));
        return TP_OK;
    }
    TP_CHECK(ns == nd, TP_ERR_INVALID_ARG, "shifts and dimensions must align. shifts: %d, dims:%d", ns, nd);
    for (int i = 0; i < nd; i++) {
        int d;
        TP_TRY(tp__wrap_dim(dims[i], self->ndim, &d));
        if (self->ndim == 0) continue;
        int64_t n = self->sizes[d];
        p->shift[d] = mod_size(p->shift[d] + mod_size(shifts[i], n), n);
    }
    return TP_OK;
}

static tp_status infer_roll(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    roll_plan p;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(roll_plan_make(self, args, &p));
    return tp__out_like(out, self->dtype, self);
}

static tp_status kernel_roll(const tp_value *args, tp_value *out) {
    tp_tensor *self, *o = tp__out_at(out, 0);
    roll_plan p;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(tp__has_data(self, "self"));
    TP_TRY(roll_plan_make(self, args, &p));
    int64_t numel = tp_tensor_numel(o);
    if (numel == 0) return TP_OK;
    size_t es = tp_dtype_size(self->dtype);
    const char *base = tp__tensor_base(self);
    if (p.flat) { /* output element k reads flat element (k - shift) mod numel */
        char *dst = tp__tensor_base(o);
        for (int64_t k = 0; k < numel; k++) {
            int64_t src = k - p.flat_shift, off = 0;
            if (src < 0) src += numel;
            for (int d = self->ndim - 1; d >= 0; d--) {
                off += (src % self->sizes[d]) * self->strides[d];
                src /= self->sizes[d];
            }
            memcpy(dst + k * (int64_t)es, base + off * (int64_t)es, es);
        }
        return TP_OK;
    }
    index_maps m;
    TP_TRY(maps_alloc(&m, self->ndim, self->sizes));
    for (int d = 0; d < self->ndim; d++) {
        int64_t n = self->sizes[d];
        for (int64_t i = 0; i < n; i++) {
            int64_t s = i - p.shift[d];
            m.at[d][i] = (s < 0 ? s + n : s) * self->strides[d];
        }
    }
    copy_mapped(o, self, &m);
    tp_free(m.buf);
    return TP_OK;
}

/* rot90(Tensor self, int k=1, int[] dims=[0,1]): k quarter turns from
 * dims[0] towards dims[1]. */
typedef struct rot90_plan {
    int k; /* 0..3 */
    int d0, d1;
    int64_t sizes[TP_MAX_DIMS];
} rot90_plan;

static tp_status rot90_plan_make(const tp_tensor *self, const tp_value *args, rot90_plan *p) {
    int64_t dims[TP_MAX_DIMS];
    int n;
    TP_TRY(tp__arg_ints(args, 2, "dims", dims, TP_MAX_DIMS, 0, &n));
    TP_CHECK(n == 2, TP_ERR_INVALID_ARG, "expected total rotation dims == 2, but got dims = %d", n);
    TP_CHECK(self->ndim >= 2, TP_ERR_SHAPE, "expected total dims >= 2, but got total dims = %d", self->ndim);
    TP_TRY(tp__wrap_dim(dims[0], self->ndim, &p->d0));
    TP_TRY(tp__wrap_dim(dims[1], self->ndim, &p->d1));
    TP_CHECK(p->d0 != p->d1, TP_ERR_INVALID_ARG,
             "expected rotation dims to be different, but got dim0 = %d and dim1 = %d", p->d0, p->d1);
    p->k = (int)mod_size(tp__arg_int(args, 1), 4);
    memcpy(p->sizes, self->sizes, sizeof p->sizes);
    if (p->k & 1) {
        p->sizes[p->d0] = self->sizes[p->d1];
        p->sizes[p->d1] = self->sizes[p->d0];
    }
    return TP_OK;
}

static tp_status infer_rot90(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    rot90_plan p;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(rot90_plan_make(self, args, &p));
    tp_sdim dims[TP_MAX_DIMS];
    tp__dims(self, dims);
    if (p.k & 1) {
        tp_sdim t = dims[p.d0];
        dims[p.d0] = dims[p.d1];
        dims[p.d1] = t;
    }
    return tp__out_dims(out, self->dtype, self->ndim, dims);
}

static tp_status kernel_rot90(const tp_value *args, tp_value *out) {
    tp_tensor *self, *o = tp__out_at(out, 0);
    rot90_plan p;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(tp__has_data(self, "self"));
    TP_TRY(rot90_plan_make(self, args, &p));
    if (tp_tensor_numel(o) == 0) return TP_OK;
    index_maps m;
    TP_TRY(maps_alloc(&m, self->ndim, p.sizes));
    for (int d = 0; d < self->ndim; d++)
        for (int64_t i = 0; i < p.sizes[d]; i++) m.at[d][i] = i * self->strides[d];
    int d0 = p.d0, d1 = p.d1;
    int64_t n0 = self->sizes[d0], n1 = self->sizes[d1], s0 = self->strides[d0], s1 = self->strides[d1];
    switch (p.k) {
    case 1: /* out[.., i, .., j, ..] = self[.., j, .., n1 - 1 - i, ..] */
        for (int64_t i = 0; i < n1; i++) m.at[d0][i] = (n1 - 1 - i) * s1;
        for (int64_t j = 0; j < n0; j++) m.at[d1][j] = j * s0;
        break;
    case 2:
        for (int64_t i = 0; i < n0; i++) m.at[d0][i] = (n0 - 1 - i) * s0;
        for (int64_t j = 0; j < n1; j++) m.at[d1][j] = (n1 - 1 - j) * s1;
        break;
    case 3: /* out[.., i, .., j, ..] = self[.., n0 - 1 - j, .., i, ..] */
        for (int64_t i = 0; i < n1; i++) m.at[d0][i] = i * s1;
        for (int64_t j = 0; j < n0; j++) m.at[d1][j] = (n0 - 1 - j) * s0;
        break;
    default: break;
    }
    copy_mapped(o, self, &m);
    tp_free(m.buf);
    return TP_OK;
}

/* repeat_interleave(Tensor self, Tensor|Scalar repeats, int? dim=None, *,
 * int? output_size=None): each element (slice along dim; of the flattened
 * input when dim is None) repeated. With a tensor of repeats the output
 * size depends on its values: it must be given as output_size. */
typedef struct rinter_plan {
    int dim;     /* in the (flattened when dim is None) input */
    bool flat;
    int64_t reps; /* int repeats; -1 for a tensor of repeats */
    int ndim;
    int64_t sizes[TP_MAX_DIMS];
    tp_sdim dims[TP_MAX_DIMS]; /* sizes for the shape rule (dim.h) */
} rinter_plan;

static tp_status rinter_plan_make(const tp_tensor *self, const tp_value *args, rinter_plan *p) {
    const tp_value *r = &args[1];
    const tp_tensor *rt = tp__arg_tensor(args, 1);
    TP_CHECK(rt || r->kind == TP_VAL_INT || r->kind == TP_VAL_BOOL, TP_ERR_TYPE,
             "repeats must be an int or a Tensor, not %s", tp_value_kind_name(r->kind));
    p->flat = tp__arg_is_none(args, 2);
    if (p->flat) {
        p->dim = 0;
        p->ndim = 1;
        p->dims[0] = tp__dimk(1);
        for (int i = 0; i < self->ndim; i++) p->dims[0] = tp__dim_mul(p->dims[0], tp__dim(self, i));
    } else {
        TP_TRY(tp__wrap_dim(tp__arg_int(args, 2), self->ndim, &p->dim));
        p->ndim = self->ndim ? self->ndim : 1;
        if (self->ndim) tp__dims(self, p->dims);
        else p->dims[0] = tp__dimk(1);
    }
    for (int i = 0; i < p->ndim; i++) p->sizes[i] = p->dims[i].v;
    int64_t n = p->sizes[p->dim];
    bool has_size = !tp__arg_is_none(args, 3);
    int64_t output_size = has_size ? tp__arg_int(args, 3) : 0;
    if (rt) {
        TP_CHECK(rt->dtype == TP_INT64 || rt->dtype == TP_INT32, TP_ERR_TYPE,
                 "repeats has to be Long or Int tensor, got %s", tp_dtype_name(rt->dtype));
        TP_CHECK(rt->ndim <= 1, TP_ERR_SHAPE, "repeats must be 0-dim or 1-dim tensor, got %d dims", rt->ndim);
        int64_t rn = rt->ndim ? rt->sizes[0] : 1;
        TP_CHECK(rn == 1 || tp__dim_eq(rt->ndim ? tp__dim(rt, 0) : tp__dimk(1), p->dims[p->dim], "one repeat per element"),
                 TP_ERR_SHAPE,
                 "repeats must have the same size as input along dim, but got repeats.size(0) = %" PRId64
                 " and input.size(%d) = %" PRId64,
                 rn, p->dim, n);
        TP_CHECK(has_size, TP_ERR_UNSUPPORTED,
                 "a tensor of repeats gives a data-dependent output size: only supported with output_size given");
        TP_CHECK(output_size >= 0, TP_ERR_INVALID_ARG, "output_size must be non-negative, got %" PRId64, output_size);
        p->reps = -1;
        p->sizes[p->dim] = output_size;
        p->dims[p->dim] = tp__arg_sdim(args, 3);
    } else {
        p->reps = tp__arg_int(args, 1);
        TP_CHECK(p->reps >= 0, TP_ERR_INVALID_ARG, "repeats can not be negative");
        TP_CHECK(tp_mul_overflow_i64(n, p->reps, &p->sizes[p->dim]), TP_ERR_SHAPE, "the repeated size overflows");
        p->dims[p->dim] = tp__dim_mulk(p->dims[p->dim], p->reps);
        TP_CHECK(!has_size || tp__dim_eq(tp__arg_sdim(args, 3), p->dims[p->dim], "output_size is the repeated size"),
                 TP_ERR_INVALID_ARG,
                 "allocated size does not match required size (output_size %" PRId64 ", required %" PRId64 ")",
                 output_size, p->sizes[p->dim]);
    }
    int64_t numel;
    return tp__numel(p->ndim, p->sizes, &numel);
}

static tp_status infer_repeat_interleave(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    rinter_plan p;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(rinter_plan_make(self, args, &p));
    return tp__out_dims(out, self->dtype, p.ndim, p.dims);
}

static tp_status kernel_repeat_interleave(const tp_value *args, tp_value *out) {
    tp_tensor *self, *o = tp__out_at(out, 0), *rt = tp__arg_tensor(args, 1);
    rinter_plan p;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(tp__has_data(self, "self"));
    TP_TRY(tp__has_data(rt, "repeats"));
    TP_TRY(rinter_plan_make(self, args, &p));
    /* the source as p.ndim dims: the flattened input, or self (a 0-d self as [1]) */
    tp_tensor *src;
    int64_t flat_n = tp_tensor_numel(self);
    if (p.flat) TP_TRY(tp_tensor_reshape(self, 1, &flat_n, &src));
    else {
        int64_t one = 1, st1 = 0;
        TP_TRY(self->ndim ? tp_tensor_as_strided(self, self->ndim, self->sizes, self->strides, self->offset, &src)
                          : tp_tensor_as_strided(self, 1, &one, &st1, self->offset, &src));
    }
    int64_t n = src->sizes[p.dim], total = p.sizes[p.dim];
    index_maps m;
    tp_status st = maps_alloc(&m, p.ndim, p.sizes);
    if (st != TP_OK) {
        tp_tensor_free(src);
        return st;
    }
    for (int d = 0; d < p.ndim; d++)
        if (d != p.dim)
            for (int64_t i = 0; i < p.sizes[d]; i++) m.at[d][i] = i * src->strides[d];
    int64_t pos = 0;
    const char *rbase = rt ? tp__tensor_base(rt) : NULL;
    int64_t rstride = rt && rt->ndim && rt->sizes[0] != 1 ? rt->strides[0] : 0;
    size_t res = rt ? tp_dtype_size(rt->dtype) : 0;
    for (int64_t i = 0; i < n && st == TP_OK; i++) {
        int64_t r = rt ? tp__load_i64(rbase + i * rstride * (int64_t)res, rt->dtype) : p.reps;
        if (r < 0) {
            st = tp_error(TP_ERR_INVALID_ARG, "repeats can not be negative");
            break;
        }
        if (r > total - pos) {
            st = tp_error(TP_ERR_SHAPE, "allocated size does not match required size (output_size %" PRId64 ")",
                          total);
            break;
        }
        for (int64_t j = 0; j < r; j++) m.at[p.dim][pos++] = i * src->strides[p.dim];
    }
    if (st == TP_OK && pos != total)
        st = tp_error(TP_ERR_SHAPE,
                      "allocated size does not match required size (output_size %" PRId64 ", repeats sum to %" PRId64
                      ")",
                      total, pos);
    if (st == TP_OK && tp_tensor_numel(o) > 0) copy_mapped(o, src, &m);
    tp_free(m.buf);
    tp_tensor_free(src);
    return st;
}

/* ---- unbind: a list of views ------------------------------------------- */

/* unbind(Tensor self, int dim=0) -> Tensor[] */
static tp_status unbind_run(const tp_value *args, tp_value *out, bool meta) {
    tp_tensor *self;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_CHECK(self->ndim > 0, TP_ERR_INDEX, "Dimension specified as %" PRId64 " but tensor has no dimensions",
             tp__arg_int(args, 1));
    int dim;
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), self->ndim, &dim));
    int64_t count = self->sizes[dim];
    tp__dim_eqk(tp__dim(self, dim), count, "unbind's count is the size");
    tp_value list;
    TP_TRY(tp_value_list(count, &list));
    for (int64_t i = 0; i < count; i++) {
        tp_status st;
        if (meta) {
            tp_sdim sizes[TP_MAX_DIMS];
            int k = 0;
            for (int d = 0; d < self->ndim; d++)
                if (d != dim) sizes[k++] = tp__dim(self, d);
            st = tp__out_dims(&list.u.seq.items[i], self->dtype, k, sizes);
        } else {
            tp_tensor *piece;
            st = tp_tensor_select(self, dim, i, &piece);
            if (st == TP_OK) list.u.seq.items[i] = tp_value_tensor(piece);
        }
        if (st != TP_OK) {
            tp_value_clear(&list);
            return st;
        }
    }
    tp_value_clear(out);
    *out = list;
    return TP_OK;
}

static tp_status infer_unbind(const tp_value *args, tp_value *out) { return unbind_run(args, out, true); }
static tp_status kernel_unbind(const tp_value *args, tp_value *out) { return unbind_run(args, out, false); }

/* ---- hstack / vstack: cat of the inputs made at least 1-d / 2-d -------- */

/* args[0]'s tensors as views with at least `nd` dims (leading 1s). */
static tp_status atleast_list(const tp_value *list, int nd, tp_value *out) {
    int64_t n = tp_value_len(list);
    TP_CHECK(tp_value_is_seq(list), TP_ERR_TYPE, "tensors must be a list of tensors");
    TP_TRY(tp_value_list(n, out));
    for (int64_t k = 0; k < n; k++) {
        const tp_value *item = tp_value_at(list, k);
        if (item->kind != TP_VAL_TENSOR) {
            tp_value_clear(out);
            return tp_error(TP_ERR_TYPE, "tensors[%" PRId64 "] must be a Tensor, not %s", k,
                            tp_value_kind_name(item->kind));
        }
        tp_tensor *t = item->u.tensor, *v;
        int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
        int lead = t->ndim < nd ? nd - t->ndim : 0;
        for (int d = 0; d < lead; d++) {
            sizes[d] = 1;
            strides[d] = 1;
        }
        for (int d = 0; d < t->ndim; d++) {
            sizes[lead + d] = t->sizes[d];
            strides[lead + d] = t->strides[d];
        }
        tp_status st = tp_tensor_as_strided(t, lead + t->ndim, sizes, strides, t->offset, &v);
        if (st != TP_OK) {
            tp_value_clear(out);
            return st;
        }
        tp_sdim dims[TP_MAX_DIMS];
        for (int d = 0; d < lead; d++) dims[d] = tp__dimk(1);
        tp__dims(t, dims + lead);
        tp__tensor_set_dims(v, dims);
        out->u.seq.items[k] = tp_value_tensor(v);
    }
    return TP_OK;
}

/* vertical: vstack (cat dim 0 of 2-d views); else hstack (cat of 1-d
 * views along dim 0 when the first is 1-d, else dim 1) */
static tp_status hvstack_run(const tp_value *args, tp_value *out, bool vertical, bool meta) {
    tp_value a[2] = {tp_value_none(), tp_value_none()};
    TP_TRY(atleast_list(&args[0], vertical ? 2 : 1, &a[0]));
    tp_status st = TP_OK;
    if (tp_value_len(&a[0]) == 0) st = tp_error(TP_ERR_INVALID_ARG, "expects a non-empty TensorList");
    if (st == TP_OK) {
        a[1] = tp_value_int(vertical || tp_value_at(&a[0], 0)->u.tensor->ndim == 1 ? 0 : 1);
        st = meta ? infer_cat(a, out) : kernel_cat(a, out);
    }
    tp_value_clear(&a[0]);
    return st;
}

static tp_status infer_hstack(const tp_value *args, tp_value *out) { return hvstack_run(args, out, false, true); }
static tp_status kernel_hstack(const tp_value *args, tp_value *out) { return hvstack_run(args, out, false, false); }
static tp_status infer_vstack(const tp_value *args, tp_value *out) { return hvstack_run(args, out, true, true); }
static tp_status kernel_vstack(const tp_value *args, tp_value *out) { return hvstack_run(args, out, true, false); }

/* ---- unflatten / movedim: views ----------------------------------------- */

/* unflatten(Tensor self, int dim, int[] sizes) */
static tp_status view_unflatten(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *dims) {
    TP_CHECK(self->ndim > 0, TP_ERR_INDEX, "cannot unflatten a 0-dim tensor");
    int d;
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), self->ndim, &d));
    tp_sdim req[TP_MAX_DIMS], parts[TP_MAX_DIMS], have = tp__dim(self, d);
    int n;
    TP_TRY(tp__arg_sdims(args, 2, "sizes", req, TP_MAX_DIMS, 0, &n));
    TP_CHECK(n > 0, TP_ERR_INVALID_ARG, "unflatten: sizes must be non-empty");
    TP_CHECK(self->ndim - 1 + n <= TP_MAX_DIMS, TP_ERR_SHAPE, "the result would have more than %d dims",
             TP_MAX_DIMS);
    TP_TRY(resolve_shape(1, &have, n, req, parts));
    int k = 0;
    for (int i = 0; i < d; i++) dims[k++] = tp__dim(self, i);
    for (int i = 0; i < n; i++) dims[k++] = parts[i];
    for (int i = d + 1; i < self->ndim; i++) dims[k++] = tp__dim(self, i);
    return reshape_to(self, k, dims, out);
}
DEFINE_VIEW_OP(unflatten)

/* movedim(Tensor self, int[] source, int[] destination) */
static tp_status view_movedim(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *dims) {
    int64_t src[TP_MAX_DIMS], dst[TP_MAX_DIMS];
    int ns, nd;
    TP_TRY(tp__arg_ints(args, 1, "source", src, TP_MAX_DIMS, 0, &ns));
    TP_TRY(tp__arg_ints(args, 2, "destination", dst, TP_MAX_DIMS, 0, &nd));
    TP_CHECK(ns == nd, TP_ERR_INVALID_ARG,
             "movedim: Invalid source or destination dims: source (%d dims) should contain the same number of dims "
             "as destination (%d dims)",
             ns, nd);
    int ndim = self->ndim;
    bool src_used[TP_MAX_DIMS] = {false}, dst_used[TP_MAX_DIMS] = {false};
    int64_t order[TP_MAX_DIMS];
    for (int i = 0; i < ns; i++) {
        int s, t;
        TP_TRY(tp__wrap_dim(src[i], ndim, &s));
        TP_TRY(tp__wrap_dim(dst[i], ndim, &t));
        TP_CHECK(!src_used[s], TP_ERR_INVALID_ARG, "movedim: repeated dim in `source` (dim %d)", s);
        TP_CHECK(!dst_used[t], TP_ERR_INVALID_ARG, "movedim: repeated dim in `destination` (dim %d)", t);
        src_used[s] = dst_used[t] = true;
        order[t] = s;
    }
    if (ndim == 0) return alias(self, out, dims);
    for (int t = 0, s = 0; t < ndim; t++) {
        if (dst_used[t]) continue;
        while (src_used[s]) s++;
        order[t] = s++;
    }
    for (int t = 0; t < ndim; t++) dims[t] = tp__dim(self, (int)order[t]);
    return tp_tensor_permute(self, order, out);
}
DEFINE_VIEW_OP(movedim)

/* ---- pad --------------------------------------------------------------- */

enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_REPLICATE, PAD_CIRCULAR };

typedef struct pad_plan {
    enum pad_mode mode;
    int ndim;
    int64_t before[TP_MAX_DIMS], after[TP_MAX_DIMS]; /* per dim (0 where not padded) */
    int64_t sizes[TP_MAX_DIMS];                      /* output sizes */
    tp_sdim dims[TP_MAX_DIMS];                       /* the same for the shape rule (dim.h) */
} pad_plan;

/* pad(Tensor input, int[] pad, str mode='constant', float? value=None):
 * pad pairs (before, after) run from the last dim backwards; negative pads
 * crop. */
static tp_status pad_plan_make(const tp_tensor *self, const tp_value *args, pad_plan *p) {
    int64_t pads[2 * TP_MAX_DIMS];
    int n;
    char buf[256];
    TP_TRY(tp__arg_ints(args, 1, "pad", pads, 2 * TP_MAX_DIMS, 0, &n));
    TP_CHECK(n % 2 == 0, TP_ERR_INVALID_ARG, "Padding length must be divisible by 2, got %d entries", n);
    TP_CHECK(n / 2 <= self->ndim, TP_ERR_INVALID_ARG, "Padding length too large: %d pairs for a tensor of rank %d",
             n / 2, self->ndim);
    const char *mode = tp__arg_str(args, 2);
    if (!mode) mode = "";
    if (strcmp(mode, "constant") == 0)
        p->mode = PAD_CONSTANT;
    else if (strcmp(mode, "reflect") == 0)
        p->mode = PAD_REFLECT;
    else if (strcmp(mode, "replicate") == 0)
        p->mode = PAD_REPLICATE;
    else if (strcmp(mode, "circular") == 0)
        p->mode = PAD_CIRCULAR;
    else
        return tp_error(TP_ERR_INVALID_ARG,
                        "unrecognised padding mode '%s' (expected constant, reflect, replicate or circular)", mode);
    TP_CHECK(p->mode == PAD_CONSTANT || tp__arg_is_none(args, 3) || tp__arg_f64(args, 3) == 0.0, TP_ERR_INVALID_ARG,
             "Padding mode \"%s\" doesn't take in value argument", mode);
    p->ndim = self->ndim;
    for (int d = 0; d < self->ndim; d++) {
        p->before[d] = p->after[d] = 0;
        p->sizes[d] = self->sizes[d];
        p->dims[d] = tp__dim(self, d);
    }
    for (int j = 0; j < n / 2; j++) {
        int d = self->ndim - 1 - j;
        int64_t l = pads[2 * j], r = pads[2 * j + 1], s = self->sizes[d], size;
        TP_CHECK(tp_add_overflow_i64(s, l, &size) && tp_add_overflow_i64(size, r, &size), TP_ERR_SHAPE,
                 "the padded size overflows at dimension %d", d);
        tp_sdim sd = tp__dim(self, d), od = tp__dim_addk(sd, l + r);
        TP_CHECK(tp__dim_ge(od, 0, "padded size"), TP_ERR_SHAPE,
                 "The input size %" PRId64 ", plus negative padding %" PRId64 " and %" PRId64
                 " resulted in a negative output size, which is invalid. Check dimension %d of your input.",
                 s, l, r, d);
        if (p->mode == PAD_REFLECT)
            TP_CHECK(tp__dim_ge(tp__dim_addk(sd, -(l > r ? l : r) - 1), 0, "reflect padding must be smaller than the dim"),
                     TP_ERR_SHAPE,
                     "Padding size should be less than the corresponding input dimension, but got: padding (%" PRId64
                     ", %" PRId64 ") at dimension %d of input %s",
                     l, r, d, tp__shape_str(self->ndim, self->sizes, buf, sizeof buf));
        if (p->mode == PAD_REPLICATE)
            TP_CHECK(tp__dim_ge(sd, 1, "replicate padding needs a non-empty dim") || size == 0, TP_ERR_SHAPE,
                     "cannot replicate-pad dimension %d of size 0", d);
        if (p->mode == PAD_CIRCULAR) {
            TP_CHECK(tp__dim_ge(tp__dim_addk(sd, -(l > r ? l : r)), 0, "circular padding must not exceed the dim"),
                     TP_ERR_SHAPE,
                     "Padding value causes wrapping around more than once (padding (%" PRId64 ", %" PRId64
                     ") at dimension %d of size %" PRId64 ")",
                     l, r, d, s);
            int64_t kept = s - (l < 0 ? -l : 0) - (r < 0 ? -r : 0);
            TP_CHECK(kept > 0 || size == 0, TP_ERR_SHAPE, "circular padding of dimension %d has nothing to wrap", d);
        }
        p->before[d] = l;
        p->after[d] = r;
        p->sizes[d] = size;
        p->dims[d] = od;
    }
    return TP_OK;
}

static tp_status infer_pad(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    pad_plan p;
    TP_TRY(tp__need_tensor(args, 0, "input", &self));
    TP_TRY(pad_plan_make(self, args, &p));
    return tp__out_dims(out, self->dtype, p.ndim, p.dims);
}

/* constant: fill, then copy the kept part of the input into place */
static tp_status pad_constant(tp_tensor *self, const tp_value *args, const pad_plan *p, tp_tensor *o) {
    char elem[8] = {0};
    if (!tp__arg_is_none(args, 3)) TP_TRY(tp__scalar_to_elem(&args[3], o->dtype, elem));
    size_t es = tp_dtype_size(o->dtype);
    tp_iter it;
    tp__iter_init(&it, o->ndim, o->sizes, 1, (const tp_tensor *[]){o});
    while (tp__iter_next(&it)) memcpy(it.ptr[0], elem, es);
    int64_t in_sizes[TP_MAX_DIMS], in_off = self->offset, out_off = o->offset;
    for (int d = 0; d < p->ndim; d++) {
        int64_t l = p->before[d], r = p->after[d];
        /* a crop of the whole dim or more (INT64_MIN included, which has
         * no negation) leaves nothing of the input */
        if ((l < 0 && l <= -self->sizes[d]) || (r < 0 && r <= -self->sizes[d])) return TP_OK;
        int64_t crop_l = l < 0 ? -l : 0, crop_r = r < 0 ? -r : 0;
        in_sizes[d] = self->sizes[d] - crop_l - crop_r;
        if (in_sizes[d] <= 0) return TP_OK; /* nothing of the input survives */
        in_off += crop_l * self->strides[d];
        out_off += (l > 0 ? l : 0) * o->strides[d];
    }
    tp_tensor *src = NULL, *dst = NULL;
    TP_TRY(tp_tensor_as_strided(self, p->ndim, in_sizes, self->strides, in_off, &src));
    tp_status st = tp_tensor_as_strided(o, p->ndim, in_sizes, o->strides, out_off, &dst);
    if (st == TP_OK) st = tp_tensor_copy_(dst, src);
    tp_tensor_free(src);
    tp_tensor_free(dst);
    return st;
}

/* Source index along one dim for output index o (plan already checked). */
static int64_t pad_source(enum pad_mode mode, int64_t o, int64_t l, int64_t r, int64_t s) {
    int64_t i = o - l;
    switch (mode) {
    case PAD_REFLECT:
        if (i < 0) i = -i;
        if (i >= s) i = 2 * (s - 1) - i;
        return i;
    case PAD_REPLICATE:
        return i < 0 ? 0 : (i >= s ? s - 1 : i);
    case PAD_CIRCULAR: {
        /* crop first, then wrap around the kept part */
        int64_t crop_l = l < 0 ? -l : 0, kept = s - crop_l - (r < 0 ? -r : 0);
        int64_t pos = o - (l > 0 ? l : 0);
        pos = ((pos % kept) + kept) % kept;
        return crop_l + pos;
    }
    default:
        return i;
    }
}

static tp_status kernel_pad(const tp_value *args, tp_value *out) {
    tp_tensor *self, *o = tp__out_at(out, 0);
    pad_plan p;
    TP_TRY(tp__need_tensor(args, 0, "input", &self));
    TP_TRY(tp__has_data(self, "input"));
    TP_TRY(pad_plan_make(self, args, &p));
    if (p.mode == PAD_CONSTANT) return pad_constant(self, args, &p, o);
    if (tp_tensor_numel(o) == 0) return TP_OK;
    index_maps m;
    TP_TRY(maps_alloc(&m, p.ndim, p.sizes));
    for (int d = 0; d < p.ndim; d++)
        for (int64_t i = 0; i < p.sizes[d]; i++)
            m.at[d][i] = pad_source(p.mode, i, p.before[d], p.after[d], self->sizes[d]) * self->strides[d];
    copy_mapped(o, self, &m);
    tp_free(m.buf);
    return TP_OK;
}

/* ---- diagonal (a view), diag, diag_embed, diagflat (copies) ------------- */

/* The diagonal of t over dims d1, d2 (offset > 0: above the main one): t's
 * other dims in order, then the diagonal (stride s1 + s2). */
static void diag_geometry(const tp_tensor *t, int64_t offset, int d1, int d2, int *nd, int64_t *sizes,
                          int64_t *strides, int64_t *storage_offset) {
    int n = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (d == d1 || d == d2) continue;
        sizes[n] = t->sizes[d];
        strides[n++] = t->strides[d];
    }
    int64_t s1 = t->sizes[d1], s2 = t->sizes[d2], len;
    if (offset >= 0) len = s2 - offset < s1 ? s2 - offset : s1;
    else len = s1 + offset < s2 ? s1 + offset : s2;
    if (len < 0) len = 0;
    sizes[n] = len;
    strides[n++] = t->strides[d1] + t->strides[d2];
    *nd = n;
    *storage_offset = t->offset;
    if (len > 0) *storage_offset += offset >= 0 ? offset * t->strides[d2] : -offset * t->strides[d1];
}

/* Offsets past +-2^62 would overflow the size arithmetic (no tensor has
 * such dims). */
static tp_status check_offset(int64_t offset) {
    TP_CHECK(offset > -((int64_t)1 << 62) && offset < ((int64_t)1 << 62), TP_ERR_INVALID_ARG,
             "diagonal offset %" PRId64 " is out of range", offset);
    return TP_OK;
}

static tp_status diag_dims(int64_t dim1, int64_t dim2, int nd, int *d1, int *d2) {
    TP_TRY(tp__wrap_dim(dim1, nd, d1));
    TP_TRY(tp__wrap_dim(dim2, nd, d2));
    TP_CHECK(*d1 != *d2, TP_ERR_INVALID_ARG, "diagonal dimensions cannot be identical %" PRId64 ", %" PRId64, dim1,
             dim2);
    return TP_OK;
}

/* The diagonal's length: min(s2 - offset, s1) (offset >= 0) or
 * min(s1 + offset, s2), at least 0. */
static tp_sdim diag_len(tp_sdim s1, tp_sdim s2, int64_t offset) {
    tp_sdim len = offset >= 0 ? tp__dim_min(tp__dim_addk(s2, -offset), s1, "the diagonal's length")
                              : tp__dim_min(tp__dim_addk(s1, offset), s2, "the diagonal's length");
    return tp__dim_max(len, tp__dimk(0), "the diagonal's length");
}

static tp_status diagonal_view(tp_tensor *self, int64_t offset, int64_t dim1, int64_t dim2, tp_tensor **out,
                               tp_sdim *dims) {
    TP_TRY(check_offset(offset));
    int d1, d2, nd;
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS], off;
    TP_TRY(diag_dims(dim1, dim2, self->ndim, &d1, &d2));
    diag_geometry(self, offset, d1, d2, &nd, sizes, strides, &off);
    for (int d = 0, n = 0; d < self->ndim; d++)
        if (d != d1 && d != d2) dims[n++] = tp__dim(self, d);
    dims[nd - 1] = diag_len(tp__dim(self, d1), tp__dim(self, d2), offset);
    return tp_tensor_as_strided(self, nd, sizes, strides, off, out);
}

/* diagonal(Tensor self, int offset=0, int dim1=0, int dim2=1) */
static tp_status view_diagonal(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *dims) {
    return diagonal_view(self, tp__arg_int(args, 1), tp__arg_int(args, 2), tp__arg_int(args, 3), out, dims);
}
DEFINE_VIEW_OP(diagonal)

/* ---- unfold(Tensor self, int dimension, int size, int step): a view -----
 * Every window of `size` elements along dimension, `step` apart, as a new
 * last dim (a 0-d tensor counts as one element). */
static tp_status view_unfold(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *dims) {
    int d;
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), self->ndim, &d));
    int64_t size = tp__arg_int(args, 2), step = tp__arg_int(args, 3);
    int64_t n = self->ndim ? self->sizes[d] : 1, st = self->ndim ? self->strides[d] : 1;
    tp_sdim nd_ = self->ndim ? tp__dim(self, d) : tp__dimk(1);
    TP_CHECK(tp__dim_le(tp__dimk(size), nd_, "the window fits the dim"), TP_ERR_SHAPE,
             "maximum size for tensor at dimension %d is %" PRId64 " but size is %" PRId64, d, n, size);
    TP_CHECK(size >= 0, TP_ERR_INVALID_ARG, "size is %" PRId64 " but must be >= 0", size);
    TP_CHECK(step > 0, TP_ERR_INVALID_ARG, "step is %" PRId64 " but must be > 0", step);
    TP_CHECK(self->ndim < TP_MAX_DIMS, TP_ERR_SHAPE, "unfold of a %d-d tensor would exceed %d dims", self->ndim,
             TP_MAX_DIMS);
    int nd = self->ndim ? self->ndim + 1 : 1;
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    memcpy(sizes, self->sizes, (size_t)self->ndim * sizeof *sizes);
    memcpy(strides, self->strides, (size_t)self->ndim * sizeof *strides);
    if (self->ndim) {
        sizes[d] = (n - size) / step + 1;
        /* more than one window: step <= n - size, so the stride stays within the dim's extent */
        strides[d] = sizes[d] > 1 ? st * step : st;
    }
    sizes[nd - 1] = size;
    strides[nd - 1] = st;
    tp__dims(self, dims);
    if (self->ndim) dims[d] = tp__dim_addk(tp__dim_floordiv(tp__dim_addk(nd_, -size), step), 1);
    dims[nd - 1] = tp__dimk(size);
    return tp_tensor_as_strided(self, nd, sizes, strides, self->offset, out);
}
DEFINE_VIEW_OP(unfold)

/* ---- as_strided(Tensor self, int[] size, int[] stride, int? storage_offset=None): a view ----
 * Explicit geometry on self's storage (storage_offset None: self's own).
 * The storage is the tensor's memory block when it has one; a shape rule
 * (no storage) takes the smallest block holding self. PyTorch's checks.
 * In a planned program the storage of an input or intermediate starts at
 * its first element (an input passed as a view of a larger block is seen
 * from its own start), as for every tensor a program creates. */
static tp_status strided_fits(int n, const int64_t *size, const int64_t *stride, int64_t off, size_t itemsize,
                              int64_t storage_elems) {
    char b1[256], b2[256];
    int64_t need = 1;
    bool empty = false, overflow = false;
    for (int i = 0; i < n; i++) {
        if (size[i] < 0) overflow = true;
        if (size[i] == 0) empty = true;
    }
    if (!overflow && !empty) {
        for (int i = 0; i < n && !overflow; i++) {
            int64_t t;
            overflow = !tp_mul_overflow_i64(size[i] - 1, stride[i], &t) || !tp_add_overflow_i64(need, t, &need);
        }
        overflow = overflow || !tp_add_overflow_i64(need, off, &need) ||
                   !tp_mul_overflow_i64(need, (int64_t)itemsize, &need);
    }
    TP_CHECK(!overflow, TP_ERR_SHAPE, "Storage size calculation overflowed with sizes=%s and strides=%s",
             tp__shape_str(n, size, b1, sizeof b1), tp__shape_str(n, stride, b2, sizeof b2));
    if (empty) return TP_OK;
    int64_t have = storage_elems * (int64_t)itemsize;
    TP_CHECK(need <= have, TP_ERR_SHAPE,
             "setStorage: sizes %s, strides %s, storage offset %" PRId64 ", and itemsize %zu requiring a storage size "
             "of %" PRId64 " are out of bounds for storage of size %" PRId64,
             tp__shape_str(n, size, b1, sizeof b1), tp__shape_str(n, stride, b2, sizeof b2), off, itemsize, need, have);
    return TP_OK;
}

/* The geometry arguments at args[i], args[i + 1], args[i + 2] (size, stride, storage_offset). */
static tp_status strided_args(const tp_value *args, int i, int64_t default_off, int *n, int64_t *size,
                              int64_t *stride, int64_t *off) {
    int m;
    char b1[256];
    TP_TRY(tp__arg_ints(args, i, "size", size, TP_MAX_DIMS, 0, n));
    TP_TRY(tp__arg_ints(args, i + 1, "stride", stride, TP_MAX_DIMS, 0, &m));
    TP_CHECK(*n == m, TP_ERR_SHAPE, "mismatch in length of strides and shape");
    for (int k = 0; k < m; k++)
        TP_CHECK(stride[k] >= 0, TP_ERR_SHAPE, "Negative strides are not supported at the moment, got "
                 "strides: %s", tp__shape_str(m, stride, b1, sizeof b1));
    *off = tp__arg_is_none(args, i + 2) ? default_off : tp__arg_int(args, i + 2);
    TP_CHECK(*off >= 0, TP_ERR_SHAPE, "Tensor: invalid storage offset %" PRId64, *off);
    return TP_OK;
}

/* Elements of the smallest storage holding t (its offset included). */
static int64_t storage_extent(const tp_tensor *t) {
    int64_t e = t->offset + 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->sizes[d] == 0) return t->offset;
        e += (t->sizes[d] - 1) * t->strides[d];
    }
    return e;
}

static tp_status view_as_strided(tp_tensor *self, const tp_value *args, tp_tensor **out, tp_sdim *dims) {
    int n;
    int64_t size[TP_MAX_DIMS], stride[TP_MAX_DIMS], off;
    TP_TRY(strided_args(args, 1, self->offset, &n, size, stride, &off));
    for (int i = 0; i < self->ndim; i++)
        if (!tp__dim_is_const(tp__dim(self, i))) tp__dim_give_up(); /* explicit strides fix the geometry */
    for (int i = 0; i < n; i++) dims[i] = tp__dimk(size[i]);
    size_t es = tp_dtype_size(self->dtype);
    int64_t have = self->storage ? (int64_t)(self->storage->nbytes / es) : storage_extent(self);
    TP_TRY(strided_fits(n, size, stride, off, es, have));
    return tp_tensor_as_strided(self, n, size, stride, off, out);
}
DEFINE_VIEW_OP(as_strided)

/* ---- select_scatter, slice_scatter, diagonal_scatter, as_strided_scatter ----
 * Out of place: a copy of self whose select / slice / diagonal view (same
 * arguments after src) takes src, which must have the view's shape exactly
 * (its dtype is converted). */
static tp_status scatter_view_check(const tp_tensor *view, const tp_sdim *dims, const tp_tensor *src) {
    char b1[256], b2[256];
    bool same = view->ndim == src->ndim;
    for (int i = 0; same && i < src->ndim; i++) same = tp__dim_eq(tp__dim(src, i), dims[i], "src has the view's shape");
    TP_CHECK(same,
             TP_ERR_SHAPE, "expected src to have a size equal to the slice of self. src size = %s, slice size = %s",
             tp__shape_str(src->ndim, src->sizes, b1, sizeof b1), tp__shape_str(view->ndim, view->sizes, b2, sizeof b2));
    return TP_OK;
}

static tp_status view_scatter_run(const tp_value *args, tp_value *out, view_fn fn, bool meta) {
    tp_tensor *self, *src, *base, *v;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(tp__need_tensor(args, 1, "src", &src));
    if (meta) {
        TP_TRY(tp__tensor_make(self->dtype, self->ndim, self->sizes, NULL, 0, NULL, &base));
    } else {
        TP_TRY(tp__has_data(self, "self"));
        TP_TRY(tp__has_data(src, "src"));
        base = tp_tensor_retain(tp__out_at(out, 0));
        tp_status st = tp_tensor_copy_(base, self);
        if (st != TP_OK) {
            tp_tensor_free(base);
            return st;
        }
    }
    /* fn reads its arguments from index 1 on: args + 1 puts the view's arguments there */
    tp_sdim dims[TP_MAX_DIMS];
    if (meta) tp__tensor_set_sym(base, tp__tensor_sym(self));
    tp_status st = fn(base, args + 1, &v, dims);
    tp_tensor_free(base);
    if (st != TP_OK) return st;
    st = scatter_view_check(v, dims, src);
    if (st == TP_OK && !meta) st = tp_tensor_copy_(v, src);
    tp_tensor_free(v);
    if (st == TP_OK && meta) st = tp__out_like(out, self->dtype, self);
    return st;
}

#define DEFINE_SCATTER_OP(name)                                                                                \
    static tp_status infer_##name##_scatter(const tp_value *args, tp_value *out) {                             \
        return view_scatter_run(args, out, view_##name, true);                                                 \
    }                                                                                                          \
    static tp_status kernel_##name##_scatter(const tp_value *args, tp_value *out) {                            \
        return view_scatter_run(args, out, view_##name, false);                                                \
    }
DEFINE_SCATTER_OP(select)
DEFINE_SCATTER_OP(slice)
DEFINE_SCATTER_OP(diagonal)

/* as_strided_scatter(Tensor self, Tensor src, int[] size, int[] stride, int? storage_offset=None):
 * PyTorch clones self (keeping its strides when it is dense and non-overlapping, else
 * contiguous), views the clone's storage (storage_offset None: 0) and copies src in. The
 * storage is built here with that layout, then read back into the contiguous result. */
static bool dense_layout(const tp_tensor *t) {
    int64_t expect = 1;
    bool used[TP_MAX_DIMS] = {false};
    for (int k = 0; k < t->ndim; k++) {
        int best = -1;
        for (int d = 0; d < t->ndim; d++)
            if (!used[d] && t->sizes[d] != 1 && (best < 0 || t->strides[d] < t->strides[best])) best = d;
        if (best < 0) break;
        used[best] = true;
        if (t->sizes[best] == 0) return false;
        if (t->strides[best] != expect) return false;
        expect *= t->sizes[best];
    }
    return true;
}

static tp_status as_strided_scatter_run(const tp_value *args, tp_value *out, bool meta) {
    tp_tensor *self, *src;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(tp__need_tensor(args, 1, "src", &src));
    int n;
    int64_t size[TP_MAX_DIMS], stride[TP_MAX_DIMS], off, numel = tp_tensor_numel(self);
    TP_TRY(strided_args(args, 2, 0, &n, size, stride, &off));
    TP_TRY(strided_fits(n, size, stride, off, tp_dtype_size(self->dtype), numel));
    tp_tensor vm = {.dtype = src->dtype, .ndim = n};
    memcpy(vm.sizes, size, (size_t)n * sizeof *size);
    tp_sdim vdims[TP_MAX_DIMS];
    for (int i = 0; i < n; i++) vdims[i] = tp__dimk(size[i]);
    for (int i = 0; i < self->ndim; i++)
        if (!tp__dim_is_const(tp__dim(self, i))) tp__dim_give_up(); /* explicit strides fix the geometry */
    TP_TRY(scatter_view_check(&vm, vdims, src));
    if (meta) return tp__out_like(out, self->dtype, self);
    TP_TRY(tp__has_data(self, "self"));
    TP_TRY(tp__has_data(src, "src"));
    int64_t layout[TP_MAX_DIMS];
    if (dense_layout(self)) memcpy(layout, self->strides, sizeof layout);
    else tp__contiguous_strides(self->ndim, self->sizes, layout);
    tp_tensor *store, *cl = NULL, *v = NULL;
    TP_TRY(tp_tensor_empty(self->dtype, 1, &numel, &store));
    tp_status st = tp_tensor_as_strided(store, self->ndim, self->sizes, layout, 0, &cl);
    if (st == TP_OK) st = tp_tensor_copy_(cl, self);
    if (st == TP_OK && tp_tensor_numel(src) > 0) st = tp_tensor_as_strided(store, n, size, stride, off, &v);
    if (st == TP_OK && v) st = tp_tensor_copy_(v, src);
    if (st == TP_OK) st = tp_tensor_copy_(tp__out_at(out, 0), cl);
    tp_tensor_free(v);
    tp_tensor_free(cl);
    tp_tensor_free(store);
    return st;
}

static tp_status infer_as_strided_scatter(const tp_value *args, tp_value *out) {
    return as_strided_scatter_run(args, out, true);
}
static tp_status kernel_as_strided_scatter(const tp_value *args, tp_value *out) {
    return as_strided_scatter_run(args, out, false);
}

/* diag_embed(Tensor self, int offset=0, int dim1=-2, int dim2=-1): a result
 * one dim larger whose diagonal over (dim1, dim2) holds self's last dim. */
static tp_status embed_plan(const tp_tensor *self, int64_t offset, int64_t dim1, int64_t dim2, int *d1, int *d2,
                            tp_sdim *sizes) {
    int nd = self->ndim + 1;
    TP_TRY(check_offset(offset));
    TP_CHECK(nd <= TP_MAX_DIMS, TP_ERR_SHAPE, "diag_embed: the result would have %d dims (at most %d)", nd,
             TP_MAX_DIMS);
    TP_TRY(diag_dims(dim1, dim2, nd, d1, d2));
    tp_sdim last = self->ndim ? tp__dim(self, self->ndim - 1) : tp__dimk(1);
    tp_sdim n = tp__dim_addk(last, offset < 0 ? -offset : offset);
    for (int d = 0, k = 0; d < nd; d++) sizes[d] = (d == *d1 || d == *d2) ? n : tp__dim(self, k++);
    return TP_OK;
}

static tp_status embed_fill(tp_tensor *self, int64_t offset, int d1, int d2, tp_tensor *o) {
    TP_TRY(tp_tensor_fill(o, 0.0));
    if (tp_tensor_numel(o) == 0) return TP_OK;
    tp_tensor *dv;
    tp_sdim dims[TP_MAX_DIMS];
    TP_TRY(diagonal_view(o, offset, d1, d2, &dv, dims));
    tp_status st = tp_tensor_copy_(dv, self);
    tp_tensor_free(dv);
    return st;
}

static tp_status infer_diag_embed(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    int d1, d2;
    tp_sdim sizes[TP_MAX_DIMS];
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_CHECK(self->ndim >= 1, TP_ERR_SHAPE, "diag_embed expects a tensor of at least 1 dim, got 0-D");
    TP_TRY(embed_plan(self, tp__arg_int(args, 1), tp__arg_int(args, 2), tp__arg_int(args, 3), &d1, &d2, sizes));
    return tp__out_dims(out, self->dtype, self->ndim + 1, sizes);
}

static tp_status kernel_diag_embed(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    int d1, d2;
    tp_sdim sizes[TP_MAX_DIMS];
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(embed_plan(self, tp__arg_int(args, 1), tp__arg_int(args, 2), tp__arg_int(args, 3), &d1, &d2, sizes));
    return embed_fill(self, tp__arg_int(args, 1), d1, d2, tp__out_at(out, 0));
}

/* diag(Tensor self, int diagonal=0): a vector -> the square matrix with it
 * on the diagonal; a matrix -> a copy of its diagonal (empty when the
 * offset is past the matrix, as later PyTorch versions give). */
static tp_status diag_shape(const tp_tensor *self, int64_t k, int *nd, tp_sdim *sizes) {
    TP_CHECK(self->ndim == 1 || self->ndim == 2, TP_ERR_SHAPE, "matrix or a vector expected");
    if (self->ndim == 1) {
        int d1, d2;
        *nd = 2;
        return embed_plan(self, k, 0, 1, &d1, &d2, sizes);
    }
    TP_TRY(check_offset(k));
    *nd = 1;
    sizes[0] = diag_len(tp__dim(self, 0), tp__dim(self, 1), k);
    return TP_OK;
}

static tp_status infer_diag(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    int nd;
    tp_sdim sizes[TP_MAX_DIMS];
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(diag_shape(self, tp__arg_int(args, 1), &nd, sizes));
    return tp__out_dims(out, self->dtype, nd, sizes);
}

static tp_status diag_run(tp_tensor *self, int64_t k, tp_tensor *o) {
    if (self->ndim == 1) return embed_fill(self, k, 0, 1, o);
    if (tp_tensor_numel(o) == 0) return TP_OK;
    tp_tensor *dv;
    tp_sdim dims[TP_MAX_DIMS];
    TP_TRY(diagonal_view(self, k, 0, 1, &dv, dims));
    tp_status st = tp_tensor_copy_(o, dv);
    tp_tensor_free(dv);
    return st;
}

static tp_status kernel_diag(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(tp__has_data(self, "self"));
    return diag_run(self, tp__arg_int(args, 1), tp__out_at(out, 0));
}

/* diagflat(Tensor self, int offset=0) = diag(self.flatten(), offset) */
static tp_status infer_diagflat(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    int64_t k = tp__arg_int(args, 1);
    TP_TRY(check_offset(k));
    tp_sdim n = tp__dimk(1);
    for (int i = 0; i < self->ndim; i++) n = tp__dim_mul(n, tp__dim(self, i));
    n = tp__dim_addk(n, k < 0 ? -k : k);
    tp_sdim sizes[2] = {n, n};
    return tp__out_dims(out, self->dtype, 2, sizes);
}

static tp_status kernel_diagflat(const tp_value *args, tp_value *out) {
    tp_tensor *self, *flat;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(tp__has_data(self, "self"));
    int64_t n = tp_tensor_numel(self);
    TP_TRY(tp_tensor_reshape(self, 1, &n, &flat));
    tp_status st = diag_run(flat, tp__arg_int(args, 1), tp__out_at(out, 0));
    tp_tensor_free(flat);
    return st;
}

/* ---- registration ------------------------------------------------------ */

void tp__register_shape_ops(void) {
    tp__register_op(TP_OP_RESHAPE, "reshape(Tensor self, int[] shape) -> Tensor", TP_OPF_VIEW, infer_reshape,
                    kernel_reshape);
    tp__register_op(TP_OP_VIEW, "view(Tensor self, int[] size) -> Tensor", TP_OPF_VIEW, infer_view, kernel_view);
    tp__register_op(TP_OP_FLATTEN, "flatten(Tensor self, int start_dim=0, int end_dim=-1) -> Tensor", TP_OPF_VIEW,
                    infer_flatten, kernel_flatten);
    tp__register_op(TP_OP_PERMUTE, "permute(Tensor self, int[] dims) -> Tensor", TP_OPF_VIEW, infer_permute,
                    kernel_permute);
    tp__register_op(TP_OP_TRANSPOSE, "transpose(Tensor self, int dim0, int dim1) -> Tensor", TP_OPF_VIEW,
                    infer_transpose, kernel_transpose);
    tp__register_op(TP_OP_SQUEEZE, "squeeze(Tensor self, int[]? dim=None) -> Tensor", TP_OPF_VIEW, infer_squeeze,
                    kernel_squeeze);
    tp__register_op(TP_OP_UNSQUEEZE, "unsqueeze(Tensor self, int dim) -> Tensor", TP_OPF_VIEW, infer_unsqueeze,
                    kernel_unsqueeze);
    tp__register_op(TP_OP_EXPAND, "expand(Tensor self, int[] size) -> Tensor", TP_OPF_VIEW, infer_expand,
                    kernel_expand);
    tp__register_op(TP_OP_CAT, "cat(Tensor[] tensors, int dim=0) -> Tensor", 0, infer_cat, kernel_cat);
    tp__register_op(TP_OP_STACK, "stack(Tensor[] tensors, int dim=0) -> Tensor", 0, infer_stack, kernel_stack);
    tp__register_op(TP_OP_SPLIT, "split(Tensor self, Any split_size_or_sections, int dim=0) -> Tensor[]", TP_OPF_VIEW,
                    infer_split, kernel_split);
    tp__register_op(TP_OP_CHUNK, "chunk(Tensor self, int chunks, int dim=0) -> Tensor[]", TP_OPF_VIEW, infer_chunk,
                    kernel_chunk);
    tp__register_op(TP_OP_SLICE, "slice(Tensor self, int dim=0, int? start=None, int? end=None, int step=1) -> Tensor",
                    TP_OPF_VIEW, infer_slice, kernel_slice);
    tp__register_op(TP_OP_SELECT, "select(Tensor self, int dim, int index) -> Tensor", TP_OPF_VIEW, infer_select,
                    kernel_select);
    tp__register_op(TP_OP_NARROW, "narrow(Tensor self, int dim, int start, int length) -> Tensor", TP_OPF_VIEW,
                    infer_narrow, kernel_narrow);
    tp__register_op(TP_OP_FLIP, "flip(Tensor self, int[] dims) -> Tensor", 0, infer_flip, kernel_flip);
    tp__register_op(TP_OP_REPEAT, "repeat(Tensor self, int[] repeats) -> Tensor", 0, infer_repeat, kernel_repeat);
    tp__register_op(TP_OP_CONTIGUOUS, "contiguous(Tensor self, *, Any memory_format=None) -> Tensor", TP_OPF_VIEW,
                    infer_contiguous, kernel_contiguous);
    tp__register_op(TP_OP_CLONE, "clone(Tensor self, *, Any memory_format=None) -> Tensor", 0, infer_clone,
                    kernel_clone);
    tp__register_op(TP_OP_TO,
                    "to(Tensor self, ScalarType? dtype=None, bool non_blocking=False, bool copy=False, *, "
                    "Any memory_format=None, Any layout=None, Any device=None, Any pin_memory=None) -> Tensor",
                    TP_OPF_VIEW, infer_to, kernel_to);
    tp__register_op(TP_OP_PAD, "pad(Tensor input, int[] pad, str mode='constant', float? value=None) -> Tensor", 0,
                    infer_pad, kernel_pad);
    tp__register_op(TP_OP_GETITEM, "getitem(Any self, Any index) -> Any", TP_OPF_VIEW, infer_getitem, kernel_getitem);
    tp__register_op(TP_OP_TILE, "tile(Tensor self, int[] dims) -> Tensor", 0, infer_tile, kernel_tile);
    tp__register_op(TP_OP_ROLL, "roll(Tensor self, int[] shifts, int[] dims=[]) -> Tensor", 0, infer_roll, kernel_roll);
    tp__register_op(TP_OP_ROT90, "rot90(Tensor self, int k=1, int[] dims=[0,1]) -> Tensor", 0, infer_rot90,
                    kernel_rot90);
    tp__register_op(TP_OP_REPEAT_INTERLEAVE,
                    "repeat_interleave(Tensor self, Tensor|Scalar repeats, int? dim=None, *, int? output_size=None) "
                    "-> Tensor",
                    0, infer_repeat_interleave, kernel_repeat_interleave);
    tp__register_op(TP_OP_DIAGONAL, "diagonal(Tensor self, int offset=0, int dim1=0, int dim2=1) -> Tensor",
                    TP_OPF_VIEW, infer_diagonal, kernel_diagonal);
    tp__register_op(TP_OP_DIAG, "diag(Tensor self, int diagonal=0) -> Tensor", 0, infer_diag, kernel_diag);
    tp__register_op(TP_OP_UNFOLD, "unfold(Tensor self, int dimension, int size, int step) -> Tensor", TP_OPF_VIEW,
                    infer_unfold, kernel_unfold);
    tp__register_op(TP_OP_AS_STRIDED,
                    "as_strided(Tensor self, int[] size, int[] stride, int? storage_offset=None) -> Tensor", TP_OPF_VIEW,
                    infer_as_strided, kernel_as_strided);
    tp__register_op(TP_OP_SELECT_SCATTER, "select_scatter(Tensor self, Tensor src, int dim, int index) -> Tensor", 0,
                    infer_select_scatter, kernel_select_scatter);
    tp__register_op(TP_OP_SLICE_SCATTER,
                    "slice_scatter(Tensor self, Tensor src, int dim=0, int? start=None, int? end=None, int step=1) "
                    "-> Tensor",
                    0, infer_slice_scatter, kernel_slice_scatter);
    tp__register_op(TP_OP_DIAGONAL_SCATTER,
                    "diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1) -> Tensor", 0,
                    infer_diagonal_scatter, kernel_diagonal_scatter);
    tp__register_op(TP_OP_AS_STRIDED_SCATTER,
                    "as_strided_scatter(Tensor self, Tensor src, int[] size, int[] stride, int? storage_offset=None) "
                    "-> Tensor",
                    0, infer_as_strided_scatter, kernel_as_strided_scatter);
    tp__register_op(TP_OP_DIAG_EMBED, "diag_embed(Tensor self, int offset=0, int dim1=-2, int dim2=-1) -> Tensor", 0,
                    infer_diag_embed, kernel_diag_embed);
    tp__register_op(TP_OP_DIAGFLAT, "diagflat(Tensor self, int offset=0) -> Tensor", 0, infer_diagflat,
                    kernel_diagflat);
    tp__register_op(TP_OP_UNBIND, "unbind(Tensor self, int dim=0) -> Tensor[]", TP_OPF_VIEW, infer_unbind,
                    kernel_unbind);
    tp__register_op(TP_OP_HSTACK, "hstack(Tensor[] tensors) -> Tensor", 0, infer_hstack, kernel_hstack);
    tp__register_op(TP_OP_VSTACK, "vstack(Tensor[] tensors) -> Tensor", 0, infer_vstack, kernel_vstack);
    tp__register_op(TP_OP_UNFLATTEN, "unflatten(Tensor self, int dim, int[] sizes) -> Tensor", TP_OPF_VIEW,
                    infer_unflatten, kernel_unflatten);
    tp__register_op(TP_OP_MOVEDIM, "movedim(Tensor self, int[] source, int[] destination) -> Tensor", TP_OPF_VIEW,
                    infer_movedim, kernel_movedim);
    tp__register_op(TP_OP_TENSOR_SPLIT, "tensor_split(Tensor self, Any indices_or_sections, int dim=0) -> Tensor[]",
                    TP_OPF_VIEW, infer_tensor_split, kernel_tensor_split);
    tp__register_op(TP_OP_HSPLIT, "hsplit(Tensor self, Any indices_or_sections) -> Tensor[]", TP_OPF_VIEW, infer_hsplit,
                    kernel_hsplit);
    tp__register_op(TP_OP_VSPLIT, "vsplit(Tensor self, Any indices_or_sections) -> Tensor[]", TP_OPF_VIEW, infer_vsplit,
                    kernel_vsplit);
    tp__register_op(TP_OP_DSPLIT, "dsplit(Tensor self, Any indices_or_sections) -> Tensor[]", TP_OPF_VIEW, infer_dsplit,
                    kernel_dsplit);
    tp__register_op(TP_OP_PIXEL_SHUFFLE, "pixel_shuffle(Tensor self, int upscale_factor) -> Tensor", 0,
                    infer_pixel_shuffle, kernel_pixel_shuffle);
    tp__register_op(TP_OP_PIXEL_UNSHUFFLE, "pixel_unshuffle(Tensor self, int downscale_factor) -> Tensor", 0,
                    infer_pixel_unshuffle, kernel_pixel_unshuffle);
    tp__register_op(TP_OP_CHANNEL_SHUFFLE, "channel_shuffle(Tensor self, int groups) -> Tensor", 0,
                    infer_channel_shuffle, kernel_channel_shuffle);
}
