/*
 * tensor.c - tensor and storage lifetime, views, copies and conversion,
 * comparison and printing.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* ---- shapes ------------------------------------------------------------ */

tp_status tp__numel(int ndim, const int64_t *sizes, int64_t *out) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        TP_CHECK(sizes[i] >= 0, TP_ERR_SHAPE, "negative size %" PRId64 " at dim %d", sizes[i], i);
        TP_CHECK(tp_mul_overflow_i64(n, sizes[i], &n), TP_ERR_SHAPE,
                 "element count overflows int64");
    }
    *out = n;
    return TP_OK;
}

void tp__contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides) {
    /* Wrapping arithmetic: a shape with a zero dim may have other dims
     * whose product overflows (its strides are never used to address
     * anything); PyTorch wraps the same way, and signed overflow would be
     * undefined behaviour. */
    uint64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = (int64_t)s;
        s *= sizes[i] > 1 ? (uint64_t)sizes[i] : 1u;
    }
}

tp_status tp__wrap_dim(int64_t dim, int ndim, int *out) {
    int64_t n = ndim > 0 ? ndim : 1; /* a 0-d tensor accepts dim 0 and -1 */
    int64_t d = dim < 0 ? dim + n : dim;
    TP_CHECK(d >= 0 && d < n, TP_ERR_INDEX,
             "dim %" PRId64 " out of range for a tensor of rank %d (expected [%" PRId64 ", %" PRId64 "])",
             dim, ndim, -n, n - 1);
    *out = (int)d;
    return TP_OK;
}

const char *tp__shape_str(int ndim, const int64_t *sizes, char *buf, size_t size) {
    size_t used = 0;
    if (size == 0) return buf;
    buf[0] = '\0';
    used += (size_t)snprintf(buf + used, size - used, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, i ? ", %" PRId64 : "%" PRId64, sizes[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

tp_status tp__broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                               int64_t *out) {
    int n = na > nb ? na : nb;
    int64_t tmp[TP_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
        if (sa == sb || sb == 1) {
            tmp[i] = sa;
        } else if (sa == 1) {
            tmp[i] = sb;
        } else {
            char s1[128], s2[128];
            return tp_error(TP_ERR_SHAPE,
                            "shapes %s and %s cannot be broadcast (size %" PRId64 " vs %" PRId64
                            " at dim %d)",
                            tp__shape_str(na, a, s1, sizeof s1), tp__shape_str(nb, b, s2, sizeof s2),
                            sa, sb, i);
        }
    }
    memcpy(out, tmp, (size_t)n * sizeof *out);
    *nout = n;
    return TP_OK;
}

/* ---- storage ----------------------------------------------------------- */

void tp__storage_retain(tp_storage *s) {
    if (s) atomic_fetch_add(&s->refcount, 1);
}

void tp__storage_release(tp_storage *s) {
    if (!s) return;
    if (atomic_fetch_sub(&s->refcount, 1) != 1) return;
    if (s->alloc_base) tp_free(s->alloc_base);
    else if (s->release) s->release(s->release_ctx, s->data);
    tp_free(s);
}

static tp_status storage_new(size_t nbytes, bool zero, tp_storage **out) {
    size_t total;
    TP_CHECK(tp_add_size(nbytes, 64, &total), TP_ERR_NOMEM, "tensor of %zu bytes is too large", nbytes);
    tp_storage *s = tp_calloc(1, sizeof *s);
    TP_CHECK(s != NULL, TP_ERR_NOMEM, "out of memory allocating a storage");
    s->alloc_base = tp_malloc(total);
    if (!s->alloc_base) {
        tp_free(s);
        return tp_error(TP_ERR_NOMEM, "out of memory allocating %zu bytes of tensor data", nbytes);
    }
    uintptr_t p = ((uintptr_t)s->alloc_base + 63u) & ~(uintptr_t)63u;
    s->data = (void *)p;
    s->nbytes = nbytes;
    if (zero && nbytes) memset(s->data, 0, nbytes);
    atomic_init(&s->refcount, 1);
    *out = s;
    return TP_OK;
}

/* ---- tensor structs ---------------------------------------------------- */

tp_status tp__tensor_make(tp_dtype dtype, int ndim, const int64_t *sizes, const int64_t *strides,
                          int64_t offset, tp_storage *storage, tp_tensor **out) {
    TP_CHECK((unsigned)dtype < TP_DTYPE_COUNT, TP_ERR_TYPE, "invalid dtype %d", (int)dtype);
    TP_CHECK(ndim >= 0 && ndim <= TP_MAX_DIMS, TP_ERR_SHAPE, "rank %d not supported (max %d)", ndim,
             TP_MAX_DIMS);
    int64_t numel = 0;
    TP_TRY(tp__numel(ndim, sizes, &numel));
    tp_tensor *t = tp_calloc(1, sizeof *t);
    TP_CHECK(t != NULL, TP_ERR_NOMEM, "out of memory allocating a tensor");
    atomic_init(&t->refcount, 1);
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim) memcpy(t->sizes, sizes, (size_t)ndim * sizeof *sizes);
    if (strides) {
        if (ndim) memcpy(t->strides, strides, (size_t)ndim * sizeof *strides);
    } else {
        tp__contiguous_strides(ndim, sizes, t->strides);
    }
    t->offset = offset;
    t->storage = storage;
    tp__storage_retain(storage);
    *out = t;
    return TP_OK;
}

static tp_status tensor_alloc(tp_dtype dtype, int ndim, const int64_t *sizes, bool zero,
                              tp_tensor **out) {
    TP_CHECK((unsigned)dtype < TP_DTYPE_COUNT, TP_ERR_TYPE, "invalid dtype %d", (int)dtype);
    TP_CHECK(ndim >= 0 && ndim <= TP_MAX_DIMS, TP_ERR_SHAPE, "rank %d not supported (max %d)", ndim,
             TP_MAX_DIMS);
    TP_CHECK(ndim == 0 || sizes != NULL, TP_ERR_INVALID_ARG, "sizes is NULL");
    int64_t numel = 0, nbytes = 0;
    TP_TRY(tp__numel(ndim, sizes, &numel));
    TP_CHECK(tp_mul_overflow_i64(numel, (int64_t)tp_dtype_size(dtype), &nbytes), TP_ERR_NOMEM,
             "tensor byte size overflows");
    tp_storage *s = NULL;
    TP_TRY(storage_new((size_t)nbytes, zero, &s));
    tp_status st = tp__tensor_make(dtype, ndim, sizes, NULL, 0, s, out);
    tp__storage_release(s);
    return st;
}

tp_status tp_tensor_empty(tp_dtype dtype, int ndim, const int64_t *sizes, tp_tensor **out) {
    return tensor_alloc(dtype, ndim, sizes, false, out);
}

tp_status tp_tensor_zeros(tp_dtype dtype, int ndim, const int64_t *sizes, tp_tensor **out) {
    return tensor_alloc(dtype, ndim, sizes, true, out);
}

tp_status tp_tensor_from_data(tp_dtype dtype, int ndim, const int64_t *sizes, const void *data,
                              tp_tensor **out) {
    tp_tensor *t;
    TP_TRY(tensor_alloc(dtype, ndim, sizes, false, &t));
    if (t->storage->nbytes) {
        if (!data) {
            tp_tensor_free(t);
            return tp_error(TP_ERR_INVALID_ARG, "data is NULL");
        }
        memcpy(t->storage->data, data, t->storage->nbytes);
    }
    *out = t;
    return TP_OK;
}

tp_status tp_tensor_meta(tp_dtype dtype, int ndim, const int64_t *sizes, tp_tensor **out) {
    TP_CHECK(ndim == 0 || sizes != NULL, TP_ERR_INVALID_ARG, "sizes is NULL");
    return tp__tensor_make(dtype, ndim, sizes, NULL, 0, NULL, out);
}

tp_status tp_tensor_scalar(tp_dtype dtype, double value, tp_tensor **out) {
    tp_tensor *t;
    TP_TRY(tensor_alloc(dtype, 0, NULL, false, &t));
    tp__store_f64(t->storage->data, dtype, value);
    *out = t;
    return TP_OK;
}

/* Lowest and highest element offsets a view touches; false if empty. */
static bool view_extent(int ndim, const int64_t *sizes, const int64_t *strides, int64_t offset,
                        int64_t *lo, int64_t *hi, bool *overflow) {
    int64_t l = offset, h = offset;
    *overflow = false;
    for (int i = 0; i < ndim; i++)
        if (sizes[i] == 0) return false;
    for (int i = 0; i < ndim; i++) {
        int64_t span;
        if (!tp_mul_overflow_i64(sizes[i] - 1, strides[i], &span)) {
            *overflow = true;
            return true;
        }
        if (span < 0) {
            if (!tp_add_overflow_i64(l, span, &l)) *overflow = true;
        } else {
            if (!tp_add_overflow_i64(h, span, &h)) *overflow = true;
        }
    }
    *lo = l;
    *hi = h;
    return true;
}

static tp_status check_fits(tp_dtype dtype, int ndim, const int64_t *sizes, const int64_t *strides,
                            int64_t offset, size_t nbytes) {
    int64_t lo, hi;
    bool overflow;
    if (!view_extent(ndim, sizes, strides, offset, &lo, &hi, &overflow)) return TP_OK;
    TP_CHECK(!overflow, TP_ERR_SHAPE, "view extent overflows int64");
    int64_t esize = (int64_t)tp_dtype_size(dtype), end;
    TP_CHECK(lo >= 0, TP_ERR_SHAPE, "view reaches element %" PRId64 " before the start of storage", lo);
    TP_CHECK(tp_add_overflow_i64(hi, 1, &end) && tp_mul_overflow_i64(end, esize, &end) &&
                 (uint64_t)end <= (uint64_t)nbytes,
             TP_ERR_SHAPE, "view reaches element %" PRId64 " beyond storage of %zu bytes", hi, nbytes);
    return TP_OK;
}

tp_status tp_tensor_borrow(tp_dtype dtype, int ndim, const int64_t *sizes, const int64_t *strides,
                           int64_t offset, void *data, size_t nbytes,
                           void (*release)(void *ctx, void *data), void *release_ctx,
                           tp_tensor **out) {
    TP_CHECK((unsigned)dtype < TP_DTYPE_COUNT, TP_ERR_TYPE, "invalid dtype %d", (int)dtype);
    TP_CHECK(ndim >= 0 && ndim <= TP_MAX_DIMS, TP_ERR_SHAPE, "rank %d not supported (max %d)", ndim,
             TP_MAX_DIMS);
    TP_CHECK(ndim == 0 || sizes != NULL, TP_ERR_INVALID_ARG, "sizes is NULL");
    int64_t numel = 0;
    TP_TRY(tp__numel(ndim, sizes, &numel));
    int64_t cstrides[TP_MAX_DIMS];
    if (!strides) {
        tp__contiguous_strides(ndim, sizes, cstrides);
        strides = cstrides;
    }
    TP_CHECK(data != NULL || numel == 0, TP_ERR_INVALID_ARG, "data is NULL");
    TP_TRY(check_fits(dtype, ndim, sizes, strides, offset, nbytes));
    tp_storage *s = tp_calloc(1, sizeof *s);
    TP_CHECK(s != NULL, TP_ERR_NOMEM, "out of memory allocating a storage");
    atomic_init(&s->refcount, 1);
    s->data = data;
    s->nbytes = nbytes;
    s->release = release;
    s->release_ctx = release_ctx;
    tp_status st = tp__tensor_make(dtype, ndim, sizes, strides, offset, s, out);
    if (st != TP_OK) s->release = NULL; /* the caller keeps ownership on failure */
    tp__storage_release(s);
    return st;
}

tp_tensor *tp_tensor_retain(tp_tensor *t) {
    if (t) atomic_fetch_add(&t->refcount, 1);
    return t;
}

void tp_tensor_free(tp_tensor *t) {
    if (!t) return;
    if (atomic_fetch_sub(&t->refcount, 1) != 1) return;
    tp__storage_release(t->storage);
    tp_free(t);
}

/* ---- inspection -------------------------------------------------------- */

tp_dtype tp_tensor_dtype(const tp_tensor *t) { return t->dtype; }
int tp_tensor_ndim(const tp_tensor *t) { return t->ndim; }
const int64_t *tp_tensor_sizes(const tp_tensor *t) { return t->sizes; }
const int64_t *tp_tensor_strides(const tp_tensor *t) { return t->strides; }
int64_t tp_tensor_offset(const tp_tensor *t) { return t->offset; }
bool tp_tensor_is_meta(const tp_tensor *t) { return t->storage == NULL; }
void *tp_tensor_data(const tp_tensor *t) { return tp__tensor_base(t); }

int64_t tp_tensor_size(const tp_tensor *t, int dim) {
    int d = dim < 0 ? dim + t->ndim : dim;
    return (d >= 0 && d < t->ndim) ? t->sizes[d] : -1;
}

int64_t tp_tensor_numel(const tp_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->sizes[i];
    return n;
}

bool tp_tensor_is_contiguous(const tp_tensor *t) {
    /* empty tensors are contiguous (as in PyTorch); this also keeps the
     * product below within the element count, which fits int64 */
    for (int i = 0; i < t->ndim; i++)
        if (t->sizes[i] == 0) return true;
    int64_t expected = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->sizes[i] == 0) return true;
        if (t->sizes[i] != 1 && t->strides[i] != expected) return false;
        expected *= t->sizes[i];
    }
    return true;
}

bool tp_tensor_shares_storage(const tp_tensor *a, const tp_tensor *b) {
    return a && b && a->storage && a->storage == b->storage;
}

static const char *elem_ptr(const tp_tensor *t, const int64_t *index) {
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++) off += index[i] * t->strides[i];
    return tp__tensor_base(t) + off * (int64_t)tp_dtype_size(t->dtype);
}

double tp_tensor_get_f64(const tp_tensor *t, const int64_t *index) {
    return t->storage ? tp__load_f64(elem_ptr(t, index), t->dtype) : 0.0;
}

int64_t tp_tensor_get_i64(const tp_tensor *t, const int64_t *index) {
    return t->storage ? tp__load_i64(elem_ptr(t, index), t->dtype) : 0;
}

double tp_tensor_item_f64(const tp_tensor *t, int64_t i) {
    int64_t index[TP_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        index[d] = t->sizes[d] ? i % t->sizes[d] : 0;
        i = t->sizes[d] ? i / t->sizes[d] : 0;
    }
    return tp_tensor_get_f64(t, index);
}

/* ---- iteration --------------------------------------------------------- */

void tp__iter_init(tp_iter *it, int ndim, const int64_t *sizes, int n_ops,
                   const tp_tensor *const *ops) {
    memset(it, 0, sizeof *it);
    it->ndim = ndim;
    it->n_ops = n_ops;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        it->sizes[i] = sizes[i];
        n *= sizes[i];
    }
    it->remaining = n;
    for (int k = 0; k < n_ops; k++) {
        const tp_tensor *t = ops[k];
        int64_t es = (int64_t)tp_dtype_size(t->dtype);
        for (int i = 0; i < ndim; i++) {
            int ti = t->ndim - ndim + i;
            /* wrapping: an empty tensor's strides may be huge (never used) */
            it->bstrides[k][i] =
                (ti >= 0 && t->sizes[ti] != 1) ? (int64_t)((uint64_t)t->strides[ti] * (uint64_t)es) : 0;
        }
        it->ptr[k] = tp__tensor_base(t);
    }
}

bool tp__iter_next(tp_iter *it) {
    if (it->remaining <= 0) return false;
    if (!it->started) {
        it->started = true;
        it->remaining--;
        return true;
    }
    for (int d = it->ndim - 1; d >= 0; d--) {
        if (++it->index[d] < it->sizes[d]) {
            for (int k = 0; k < it->n_ops; k++) it->ptr[k] += it->bstrides[k][d];
            break;
        }
        for (int k = 0; k < it->n_ops; k++) it->ptr[k] -= it->bstrides[k][d] * (it->sizes[d] - 1);
        it->index[d] = 0;
    }
    it->remaining--;
    return true;
}

void tp__walk_init(tp_walk *w, int ndim, const int64_t *sizes, int n_ops, const int64_t *const *strides) {
    /* only the parts in use: reference kernels start a walk per output element */
    w->ndim = ndim;
    w->n_ops = n_ops;
    w->started = false;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        w->sizes[i] = sizes[i];
        w->index[i] = 0;
        n *= sizes[i];
        for (int k = 0; k < n_ops; k++) w->strides[k][i] = strides[k] ? strides[k][i] : 0;
    }
    for (int k = 0; k < n_ops; k++) w->off[k] = 0;
    w->remaining = n;
}

bool tp__walk_next(tp_walk *w) {
    if (w->remaining <= 0) return false;
    w->remaining--;
    if (!w->started) {
        w->started = true;
        return true;
    }
    for (int d = w->ndim - 1; d >= 0; d--) {
        if (++w->index[d] < w->sizes[d]) {
            for (int k = 0; k < w->n_ops; k++) w->off[k] += w->strides[k][d];
            return true;
        }
        for (int k = 0; k < w->n_ops; k++) w->off[k] -= w->strides[k][d] * (w->sizes[d] - 1);
        w->index[d] = 0;
    }
    return true;
}

/* ---- views ------------------------------------------------------------- */

static tp_status make_view(tp_tensor *t, int ndim, const int64_t *sizes, const int64_t *strides,
                           int64_t offset, tp_tensor **out) {
    return tp__tensor_make(t->dtype, ndim, sizes, strides, offset, t->storage, out);
}

/* Resolve one -1 in a requested shape against numel. */
static tp_status infer_shape(int64_t numel, int ndim, const int64_t *in, int64_t *out) {
    int infer = -1;
    int64_t known = 1;
    char buf[256];
    for (int i = 0; i < ndim; i++) {
        if (in[i] == -1) {
            TP_CHECK(infer < 0, TP_ERR_SHAPE, "only one dimension can be inferred in shape %s",
                     tp__shape_str(ndim, in, buf, sizeof buf));
            infer = i;
        } else {
            TP_CHECK(in[i] >= 0, TP_ERR_SHAPE, "invalid size %" PRId64 " in shape %s", in[i],
                     tp__shape_str(ndim, in, buf, sizeof buf));
            TP_CHECK(tp_mul_overflow_i64(known, in[i], &known), TP_ERR_SHAPE, "shape overflows");
        }
        out[i] = in[i];
    }
    if (infer >= 0) {
        TP_CHECK(known != 0 && numel % known == 0, TP_ERR_SHAPE,
                 "shape %s is invalid for input of size %" PRId64,
                 tp__shape_str(ndim, in, buf, sizeof buf), numel);
        out[infer] = numel / known;
    } else {
        TP_CHECK(known == numel, TP_ERR_SHAPE, "shape %s is invalid for input of size %" PRId64,
                 tp__shape_str(ndim, in, buf, sizeof buf), numel);
    }
    return TP_OK;
}

/* Strides for viewing t with new sizes without copying (PyTorch's
 * computeStride); false if impossible. */
static bool view_strides(const tp_tensor *t, int ndim, const int64_t *sizes, int64_t *strides) {
    if (t->ndim == 0) { /* a scalar views as any all-ones shape */
        for (int i = 0; i < ndim; i++) strides[i] = 1;
        return true;
    }
    int64_t numel = tp_tensor_numel(t);
    if (numel == 0) {
        if (ndim == t->ndim && memcmp(sizes, t->sizes, (size_t)ndim * sizeof *sizes) == 0)
            memcpy(strides, t->strides, (size_t)ndim * sizeof *strides);
        else
            tp__contiguous_strides(ndim, sizes, strides);
        return true;
    }
    int view_d = ndim - 1;
    int64_t chunk_base_stride = t->ndim ? t->strides[t->ndim - 1] : 1;
    int64_t tensor_numel = 1, view_numel = 1;
    for (int td = t->ndim - 1; td >= 0; td--) {
        tensor_numel *= t->sizes[td];
        if (td == 0 || (t->sizes[td - 1] != 1 && t->strides[td - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
                strides[view_d] = view_numel * chunk_base_stride;
                view_numel *= sizes[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (td > 0) {
                chunk_base_stride = t->strides[td - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

tp_status tp_tensor_view(tp_tensor *t, int ndim, const int64_t *sizes, tp_tensor **out) {
    TP_CHECK(ndim >= 0 && ndim <= TP_MAX_DIMS, TP_ERR_SHAPE, "rank %d not supported", ndim);
    int64_t shape[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    TP_TRY(infer_shape(tp_tensor_numel(t), ndim, sizes, shape));
    if (!view_strides(t, ndim, shape, strides)) {
        char b1[128], b2[128];
        return tp_error(TP_ERR_SHAPE,
                        "view size %s is not compatible with input tensor's size %s and stride %s; "
                        "use reshape instead",
                        tp__shape_str(ndim, shape, b1, sizeof b1), tp__shape_str(t->ndim, t->sizes, b2, sizeof b2),
                        tp__shape_str(t->ndim, t->strides, (char[128]){0}, 128));
    }
    return make_view(t, ndim, shape, strides, t->offset, out);
}

tp_status tp_tensor_reshape(tp_tensor *t, int ndim, const int64_t *sizes, tp_tensor **out) {
    TP_CHECK(ndim >= 0 && ndim <= TP_MAX_DIMS, TP_ERR_SHAPE, "rank %d not supported", ndim);
    int64_t shape[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    TP_TRY(infer_shape(tp_tensor_numel(t), ndim, sizes, shape));
    if (view_strides(t, ndim, shape, strides)) return make_view(t, ndim, shape, strides, t->offset, out);
    tp_tensor *c;
    TP_TRY(tp_tensor_clone(t, &c));
    tp_status st = make_view(c, ndim, shape, NULL, 0, out);
    tp_tensor_free(c);
    return st;
}

tp_status tp_tensor_permute(tp_tensor *t, const int64_t *dims, tp_tensor **out) {
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    bool seen[TP_MAX_DIMS] = {false};
    for (int i = 0; i < t->ndim; i++) {
        int d = 0;
        TP_TRY(tp__wrap_dim(dims[i], t->ndim, &d));
        TP_CHECK(!seen[d], TP_ERR_INVALID_ARG, "permute: dim %d repeated", d);
        seen[d] = true;
        sizes[i] = t->sizes[d];
        strides[i] = t->strides[d];
    }
    return make_view(t, t->ndim, sizes, strides, t->offset, out);
}

tp_status tp_tensor_transpose(tp_tensor *t, int64_t dim0, int64_t dim1, tp_tensor **out) {
    int d0 = 0, d1 = 0;
    TP_TRY(tp__wrap_dim(dim0, t->ndim, &d0)); /* a 0-d tensor accepts 0 and -1 */
    TP_TRY(tp__wrap_dim(dim1, t->ndim, &d1));
    if (t->ndim == 0) return make_view(t, 0, NULL, NULL, t->offset, out);
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    memcpy(strides, t->strides, sizeof strides);
    sizes[d0] = t->sizes[d1];
    sizes[d1] = t->sizes[d0];
    strides[d0] = t->strides[d1];
    strides[d1] = t->strides[d0];
    return make_view(t, t->ndim, sizes, strides, t->offset, out);
}

tp_status tp_tensor_expand(tp_tensor *t, int ndim, const int64_t *sizes, tp_tensor **out) {
    char b1[128], b2[128];
    TP_CHECK(ndim >= t->ndim && ndim <= TP_MAX_DIMS, TP_ERR_SHAPE,
             "expand: the number of sizes provided (%d) must be greater or equal to the number of "
             "dimensions in the tensor (%d)", ndim, t->ndim);
    int64_t nsizes[TP_MAX_DIMS], nstrides[TP_MAX_DIMS];
    for (int i = ndim - 1; i >= 0; i--) {
        int ti = t->ndim - ndim + i;
        int64_t want = sizes[i];
        if (ti < 0) {
            TP_CHECK(want >= 0, TP_ERR_SHAPE, "expand: -1 is not allowed in a leading, non-existing dimension %d", i);
            nsizes[i] = want;
            nstrides[i] = 0;
        } else {
            int64_t have = t->sizes[ti];
            if (want == -1) want = have;
            if (have == want) {
                nsizes[i] = have;
                nstrides[i] = t->strides[ti];
            } else {
                TP_CHECK(have == 1 && want >= 0, TP_ERR_SHAPE,
                         "expand: the expanded size of the tensor (%" PRId64 ") must match the existing "
                         "size (%" PRId64 ") at non-singleton dimension %d; target sizes: %s, tensor sizes: %s",
                         want, have, i, tp__shape_str(ndim, sizes, b1, sizeof b1),
                         tp__shape_str(t->ndim, t->sizes, b2, sizeof b2));
                nsizes[i] = want;
                nstrides[i] = 0;
            }
        }
    }
    return make_view(t, ndim, nsizes, nstrides, t->offset, out);
}

tp_status tp_tensor_slice(tp_tensor *t, int64_t dim, int64_t start, int64_t end, int64_t step,
                          tp_tensor **out) {
    int d = 0;
    TP_CHECK(t->ndim > 0, TP_ERR_INDEX, "slice() cannot be applied to a 0-dim tensor");
    TP_TRY(tp__wrap_dim(dim, t->ndim, &d));
    TP_CHECK(step > 0, TP_ERR_INVALID_ARG, "slice step must be positive, got %" PRId64, step);
    int64_t n = t->sizes[d];
    if (start < 0) start += n;
    if (end < 0) end += n;
    if (start < 0) start = 0;
    if (start > n) start = n;
    if (end < start) end = start;
    if (end > n) end = n;
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    memcpy(strides, t->strides, sizeof strides);
    sizes[d] = end > start ? (end - start - 1) / step + 1 : 0; /* no overflow for huge steps */
    if (!tp_mul_overflow_i64(t->strides[d], step, &strides[d])) {
        /* a stride nobody steps over: only one element (or none) is taken */
        TP_CHECK(sizes[d] <= 1, TP_ERR_SHAPE, "slice: stride %" PRId64 " * step %" PRId64 " overflows int64",
                 t->strides[d], step);
        strides[d] = t->strides[d];
    }
    /* PyTorch keeps the clamped start in the offset even for an empty slice */
    /* wrapping: an empty tensor's strides may be huge (the offset is then
     * never used to address anything) */
    int64_t offset = (int64_t)((uint64_t)t->offset + (uint64_t)start * (uint64_t)t->strides[d]);
    return make_view(t, t->ndim, sizes, strides, offset, out);
}

tp_status tp_tensor_select(tp_tensor *t, int64_t dim, int64_t index, tp_tensor **out) {
    int d = 0;
    TP_CHECK(t->ndim > 0, TP_ERR_INDEX, "select() cannot be applied to a 0-dim tensor");
    TP_TRY(tp__wrap_dim(dim, t->ndim, &d));
    int64_t n = t->sizes[d];
    TP_CHECK(index >= -n && index < n, TP_ERR_INDEX,
             "select(): index %" PRId64 " out of range for tensor of size %" PRId64 " at dimension %d",
             index, n, d);
    if (index < 0) index += n;
    tp_tensor v;
    tp__view_select(t, d, index, &v);
    return make_view(t, v.ndim, v.sizes, v.strides, v.offset, out);
}

tp_status tp_tensor_narrow(tp_tensor *t, int64_t dim, int64_t start, int64_t length, tp_tensor **out) {
    int d = 0;
    TP_CHECK(t->ndim > 0, TP_ERR_INDEX, "narrow() cannot be applied to a 0-dim tensor");
    TP_TRY(tp__wrap_dim(dim, t->ndim, &d));
    int64_t n = t->sizes[d];
    TP_CHECK(start >= -n && start <= n, TP_ERR_INDEX,
             "narrow(): start %" PRId64 " out of range for dimension %d of size %" PRId64, start, d, n);
    if (start < 0) start += n;
    TP_CHECK(length >= 0 && start <= n - length, TP_ERR_INDEX,
             "narrow(): start (%" PRId64 ") + length (%" PRId64 ") exceeds dimension size (%" PRId64 ")",
             start, length, n);
    return tp_tensor_slice(t, d, start, start + length, 1, out);
}

tp_status tp_tensor_squeeze(tp_tensor *t, int64_t dim, tp_tensor **out) {
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    int k = 0, d = -1;
    if (dim != TP_ALL_DIMS) TP_TRY(tp__wrap_dim(dim, t->ndim, &d));
    for (int i = 0; i < t->ndim; i++) {
        bool drop = t->sizes[i] == 1 && (dim == TP_ALL_DIMS || i == d);
        if (drop) continue;
        sizes[k] = t->sizes[i];
        strides[k++] = t->strides[i];
    }
    return make_view(t, k, sizes, strides, t->offset, out);
}

tp_status tp_tensor_unsqueeze(tp_tensor *t, int64_t dim, tp_tensor **out) {
    int d = 0;
    TP_CHECK(t->ndim < TP_MAX_DIMS, TP_ERR_SHAPE, "unsqueeze: rank would exceed %d", TP_MAX_DIMS);
    TP_TRY(tp__wrap_dim(dim, t->ndim + 1, &d));
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    for (int i = 0, k = 0; i <= t->ndim; i++) {
        if (i == d) {
            sizes[i] = 1;
            strides[i] = (k < t->ndim) ? t->strides[k] * t->sizes[k] : 1;
        } else {
            sizes[i] = t->sizes[k];
            strides[i] = t->strides[k];
            k++;
        }
    }
    return make_view(t, t->ndim + 1, sizes, strides, t->offset, out);
}

tp_status tp_tensor_as_strided(tp_tensor *t, int ndim, const int64_t *sizes, const int64_t *strides,
                               int64_t offset, tp_tensor **out) {
    TP_CHECK(ndim >= 0 && ndim <= TP_MAX_DIMS, TP_ERR_SHAPE, "rank %d not supported", ndim);
    int64_t numel = 0;
    TP_TRY(tp__numel(ndim, sizes, &numel));
    for (int i = 0; i < ndim; i++)
        TP_CHECK(strides[i] >= 0, TP_ERR_SHAPE,
                 "as_strided: negative strides are not supported (stride %" PRId64 " at dim %d)",
                 strides[i], i);
    TP_CHECK(offset >= 0, TP_ERR_SHAPE, "as_strided: negative storage offset %" PRId64, offset);
    if (t->storage) TP_TRY(check_fits(t->dtype, ndim, sizes, strides, offset, t->storage->nbytes));
    return make_view(t, ndim, sizes, strides, offset, out);
}

/* ---- copies ------------------------------------------------------------ */

/* First and one-past-last byte a non-empty view can address. */
static void byte_extent(const tp_tensor *t, int64_t *lo, int64_t *hi) {
    int64_t first = t->offset, last = t->offset;
    for (int d = 0; d < t->ndim; d++) {
        int64_t span = (t->sizes[d] - 1) * t->strides[d]; /* sizes >= 1 here; a view's extent fits its storage */
        if (span < 0) first += span;
        else last += span;
    }
    int64_t es = (int64_t)tp_dtype_size(t->dtype);
    *lo = first * es;
    *hi = (last + 1) * es;
}

bool tp__tensors_may_overlap(const tp_tensor *a, const tp_tensor *b) {
    if (!a->storage || a->storage != b->storage || tp_tensor_numel(a) == 0 || tp_tensor_numel(b) == 0) return false;
    int64_t alo, ahi, blo, bhi;
    byte_extent(a, &alo, &ahi);
    byte_extent(b, &blo, &bhi);
    return alo < bhi && blo < ahi;
}

void tp__view_select(const tp_tensor *t, int d, int64_t index, tp_tensor *out) {
    *out = *t;
    atomic_init(&out->refcount, 0);
    out->sym = NULL;
    out->offset = t->offset + index * t->strides[d];
    for (int i = d; i + 1 < t->ndim; i++) {
        out->sizes[i] = t->sizes[i + 1];
        out->strides[i] = t->strides[i + 1];
    }
    out->ndim = t->ndim - 1;
}

void tp__view_narrow(const tp_tensor *t, int d, int64_t start, int64_t length, tp_tensor *out) {
    *out = *t;
    atomic_init(&out->refcount, 0);
    out->sym = NULL;
    out->offset = t->offset + start * t->strides[d];
    out->sizes[d] = length;
}

tp_status tp_tensor_copy_(tp_tensor *dst, const tp_tensor *src) {
    TP_CHECK(dst->storage && src->storage, TP_ERR_INVALID_ARG, "copy_: meta tensors have no data");
    int nb;
    int64_t bshape[TP_MAX_DIMS];
    TP_TRY(tp__broadcast_shapes(dst->ndim, dst->sizes, src->ndim, src->sizes, &nb, bshape));
    char b1[128], b2[128];
    TP_CHECK(nb == dst->ndim && memcmp(bshape, dst->sizes, (size_t)nb * sizeof *bshape) == 0,
             TP_ERR_SHAPE, "copy_: source of shape %s cannot be broadcast to destination shape %s",
             tp__shape_str(src->ndim, src->sizes, b1, sizeof b1),
             tp__shape_str(dst->ndim, dst->sizes, b2, sizeof b2));
    /* Overlap: copy through a temporary if src's bytes meet dst's. */
    tp_tensor *tmp = NULL;
    if (tp__tensors_may_overlap(src, dst)) {
        TP_TRY(tp_tensor_clone(src, &tmp));
        src = tmp;
    }
    tp__tensor_copy_disjoint(dst, src);
    tp_tensor_free(tmp);
    return TP_OK;
}

/* Same dtype: walk every dim but the last and copy the last dim's run at
 * once (memcpy when both are contiguous there, else a strided loop). */
static void copy_same_dtype(tp_tensor *dst, const tp_tensor *src) {
    size_t es = tp_dtype_size(dst->dtype);
    if (dst->ndim == 0) {
        memcpy(tp__tensor_base(dst), tp__tensor_base(src), es);
        return;
    }
    int last = dst->ndim - 1;
    int64_t n = dst->sizes[last], ds = dst->strides[last], ss = 0;
    if (n == 0) return;
    /* layout copies (not *dst / *src: the refcount may be changing in another thread) */
    tp_tensor outer_d = {.dtype = dst->dtype, .ndim = last, .offset = dst->offset, .storage = dst->storage};
    tp_tensor outer_s = {.dtype = src->dtype, .ndim = src->ndim, .offset = src->offset, .storage = src->storage};
    memcpy(outer_d.sizes, dst->sizes, sizeof outer_d.sizes);
    memcpy(outer_d.strides, dst->strides, sizeof outer_d.strides);
    memcpy(outer_s.sizes, src->sizes, sizeof outer_s.sizes);
    memcpy(outer_s.strides, src->strides, sizeof outer_s.strides);
    if (src->ndim > 0) {
        /* src broadcasts to dst's shape, right-aligned: its last dim is dst's */
        ss = src->sizes[src->ndim - 1] == 1 ? 0 : src->strides[src->ndim - 1];
        outer_s.ndim = src->ndim - 1;
    }
    tp_iter it;
    tp__iter_init(&it, last, dst->sizes, 2, (const tp_tensor *[]){&outer_d, &outer_s});
    while (tp__iter_next(&it)) {
        char *d = it.ptr[0];
        const char *sp = it.ptr[1];
        if (ds == 1 && ss == 1) {
            memcpy(d, sp, (size_t)n * es);
        } else if (es == 4) {
            for (int64_t i = 0; i < n; i++) memcpy(d + i * ds * 4, sp + i * ss * 4, 4);
        } else if (es == 8) {
            for (int64_t i = 0; i < n; i++) memcpy(d + i * ds * 8, sp + i * ss * 8, 8);
        } else {
            for (int64_t i = 0; i < n; i++) memcpy(d + i * ds * (int64_t)es, sp + i * ss * (int64_t)es, es);
        }
    }
}

void tp__tensor_copy_disjoint(tp_tensor *dst, const tp_tensor *src) {
    tp_dtype dd = dst->dtype, sd = src->dtype;
    if (dd == sd) {
        copy_same_dtype(dst, src);
        return;
    }
    tp_iter it;
    tp__iter_init(&it, dst->ndim, dst->sizes, 2, (const tp_tensor *[]){dst, src});
    if (!tp_dtype_is_float(sd)) {
        /* from int/bool: through int64, so that int64 -> float32 rounds once */
        while (tp__iter_next(&it)) tp__store_i64(it.ptr[0], dd, tp__load_i64(it.ptr[1], sd));
    } else if (tp_dtype_is_float(sd) && !tp_dtype_is_float(dd) && dd != TP_BOOL) {
        /* float -> int: truncate toward zero */
        while (tp__iter_next(&it)) tp__store_f64(it.ptr[0], dd, trunc(tp__load_f64(it.ptr[1], sd)));
    } else {
        while (tp__iter_next(&it)) tp__store_f64(it.ptr[0], dd, tp__load_f64(it.ptr[1], sd));
    }
}

tp_status tp_tensor_clone(const tp_tensor *t, tp_tensor **out) {
    return tp_tensor_to(t, t->dtype, out);
}

tp_status tp_tensor_contiguous(tp_tensor *t, tp_tensor **out) {
    if (tp_tensor_is_contiguous(t)) {
        *out = tp_tensor_retain(t);
        return TP_OK;
    }
    return tp_tensor_clone(t, out);
}

tp_status tp_tensor_to(const tp_tensor *t, tp_dtype dtype, tp_tensor **out) {
    TP_CHECK(t->storage != NULL, TP_ERR_INVALID_ARG, "cannot copy a meta tensor");
    tp_tensor *r;
    TP_TRY(tp_tensor_empty(dtype, t->ndim, t->sizes, &r));
    tp_status st = tp_tensor_copy_(r, t);
    if (st != TP_OK) {
        tp_tensor_free(r);
        return st;
    }
    *out = r;
    return TP_OK;
}

tp_status tp_tensor_fill(tp_tensor *t, double value) {
    TP_CHECK(t->storage != NULL, TP_ERR_INVALID_ARG, "fill: meta tensor has no data");
    char elem[8];
    if (tp_dtype_is_float(t->dtype) || t->dtype == TP_BOOL) tp__store_f64(elem, t->dtype, value);
    else tp__store_f64(elem, t->dtype, trunc(value));
    size_t es = tp_dtype_size(t->dtype);
    tp_iter it;
    tp__iter_init(&it, t->ndim, t->sizes, 1, (const tp_tensor *[]){t});
    while (tp__iter_next(&it)) memcpy(it.ptr[0], elem, es);
    return TP_OK;
}

/* ---- comparison and printing ------------------------------------------- */

bool tp_tensor_allclose(const tp_tensor *a, const tp_tensor *b, double rtol, double atol, char *msg,
                        size_t msg_size) {
    char b1[128], b2[128];
    if (a->ndim != b->ndim || memcmp(a->sizes, b->sizes, (size_t)a->ndim * sizeof(int64_t)) != 0) {
        if (msg) snprintf(msg, msg_size, "shape %s != %s", tp__shape_str(a->ndim, a->sizes, b1, sizeof b1),
                          tp__shape_str(b->ndim, b->sizes, b2, sizeof b2));
        return false;
    }
    if (!a->storage || !b->storage) {
        if (msg) snprintf(msg, msg_size, "meta tensor has no values");
        return false;
    }
    tp_iter it;
    tp__iter_init(&it, a->ndim, a->sizes, 2, (const tp_tensor *[]){a, b});
    int64_t flat = 0;
    bool ints = !tp_dtype_is_float(a->dtype) && !tp_dtype_is_float(b->dtype);
    while (tp__iter_next(&it)) {
        bool ok;
        double x, y;
        if (ints) {
            int64_t xi = tp__load_i64(it.ptr[0], a->dtype), yi = tp__load_i64(it.ptr[1], b->dtype);
            ok = xi == yi;
            x = (double)xi;
            y = (double)yi;
        } else {
            x = tp__load_f64(it.ptr[0], a->dtype);
            y = tp__load_f64(it.ptr[1], b->dtype);
            if (isnan(x) || isnan(y)) ok = isnan(x) && isnan(y);
            else if (isinf(x) || isinf(y)) ok = x == y;
            else ok = fabs(x - y) <= atol + rtol * fabs(y);
        }
        if (!ok) {
            if (msg) snprintf(msg, msg_size, "element %" PRId64 ": %.9g != %.9g (diff %.3g)", flat, x, y, fabs(x - y));
            return false;
        }
        flat++;
    }
    return true;
}

static void print_elem(const tp_tensor *t, const char *p, FILE *f) {
    if (t->dtype == TP_BOOL) fputs(*(const uint8_t *)p ? "True" : "False", f);
    else if (tp_dtype_is_float(t->dtype)) fprintf(f, "%.6g", tp__load_f64(p, t->dtype));
    else fprintf(f, "%" PRId64, tp__load_i64(p, t->dtype));
}

void tp_tensor_print(const tp_tensor *t, FILE *f, int64_t max_elems) {
    char buf[128];
    if (!t->storage) {
        fprintf(f, "tensor(meta, size=%s, dtype=%s)", tp__shape_str(t->ndim, t->sizes, buf, sizeof buf),
                tp_dtype_name(t->dtype));
        return;
    }
    fputs("tensor(", f);
    int64_t numel = tp_tensor_numel(t), shown = 0;
    if (t->ndim == 0) {
        print_elem(t, tp__tensor_base(t), f);
    } else {
        tp_iter it;
        tp__iter_init(&it, t->ndim, t->sizes, 1, (const tp_tensor *[]){t});
        for (int i = 0; i < t->ndim; i++) fputc('[', f);
        if (numel == 0) {
            for (int i = 0; i < t->ndim; i++) fputc(']', f);
        }
        while (tp__iter_next(&it)) {
            if (shown == max_elems) {
                fputs(shown ? ", ..." : "...", f);
                break;
            }
            if (shown) {
                /* count how many dims just wrapped */
                int wrapped = 0;
                for (int d = t->ndim - 1; d > 0 && it.index[d] == 0; d--) wrapped++;
                for (int k = 0; k < wrapped; k++) fputc(']', f);
                fputs(", ", f);
                for (int k = 0; k < wrapped; k++) fputc('[', f);
            }
            print_elem(t, it.ptr[0], f);
            shown++;
        }
        if (numel) for (int i = 0; i < t->ndim; i++) fputc(']', f);
    }
    fprintf(f, ", size=%s, dtype=%s)", tp__shape_str(t->ndim, t->sizes, buf, sizeof buf), tp_dtype_name(t->dtype));
}
