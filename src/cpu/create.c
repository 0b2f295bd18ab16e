/*
 * create.c - creation ops: schemas, shape rules and reference kernels for
 * zeros, ones, full, arange, linspace, zeros_like, ones_like, full_like,
 * empty_like, eye, new_zeros, new_ones, new_full, new_empty, new_empty_strided,
 * tril_indices and triu_indices.
 *
 * Default dtypes follow PyTorch 1.13: float32 unless a dtype is given,
 * except full (from the fill value: bool, int64 or float32) and arange
 * (int64 when every bound is an int). Fill values go through PyTorch's
 * checked scalar conversion (tp__scalar_to_elem). The layout, device,
 * pin_memory and memory_format keywords of the aten schemas are accepted and
 * ignored (everything here is a dense CPU tensor).
 */
#include <inttypes.h>

#include "kernel_util.h"

#define FACTORY_KWARGS "Any layout=None, Any device=None, Any pin_memory=None"

/* ---- helpers ------------------------------------------------------------ */

static tp_dtype dtype_arg(const tp_value *args, int i, tp_dtype fallback) {
    return args[i].kind == TP_VAL_DTYPE ? args[i].u.dtype : fallback;
}

/* The size argument args[i] (its entries may be dynamic sizes). */
static tp_status size_arg(const tp_value *args, int i, int *ndim, tp_sdim *dims) {
    int64_t sizes[TP_MAX_DIMS];
    TP_TRY(tp__arg_sdims(args, i, "size", dims, TP_MAX_DIMS, 0, ndim));
    for (int d = 0; d < *ndim; d++) sizes[d] = dims[d].v;
    char buf[256];
    for (int d = 0; d < *ndim; d++)
        TP_CHECK(tp__dim_ge(dims[d], 0, "a size to create stays non-negative"), TP_ERR_SHAPE,
                 "Trying to create tensor with negative dimension %" PRId64 ": %s", sizes[d],
                 tp__shape_str(*ndim, sizes, buf, sizeof buf));
    int64_t numel;
    return tp__numel(*ndim, sizes, &numel);
}

static tp_status need_tensor(const tp_value *args, int i, const char *what, tp_tensor **out) {
    tp_tensor *t = tp__arg_tensor(args, i);
    *out = t; /* set on every path: callers rely on it being initialised */
    TP_CHECK(t != NULL, TP_ERR_TYPE, "%s must be a Tensor, not %s", what, tp_value_kind_name(args[i].kind));
    return TP_OK;
}

/* Set every element of t to the element at `elem`. */
static void fill_elem(tp_tensor *t, const void *elem) {
    size_t es = tp_dtype_size(t->dtype);
    tp_iter it;
    tp__iter_init(&it, t->ndim, t->sizes, 1, (const tp_tensor *[]){t});
    while (tp__iter_next(&it)) memcpy(it.ptr[0], elem, es);
}

static void fill_int(tp_tensor *t, int64_t v) {
    char elem[8];
    tp__store_i64(elem, t->dtype, v);
    fill_elem(t, elem);
}

/* ---- zeros / ones / full ------------------------------------------------ */

static tp_status infer_zeros(const tp_value *args, tp_value *out) {
    int n;
    tp_sdim sizes[TP_MAX_DIMS];
    TP_TRY(size_arg(args, 0, &n, sizes));
    return tp__out_dims(out, dtype_arg(args, 1, TP_DEFAULT_FLOAT), n, sizes);
}

static tp_status kernel_zeros(const tp_value *args, tp_value *out) {
    TP_UNUSED(args);
    fill_int(tp__out_at(out, 0), 0);
    return TP_OK;
}

static tp_status kernel_ones(const tp_value *args, tp_value *out) {
    TP_UNUSED(args);
    fill_int(tp__out_at(out, 0), 1);
    return TP_OK;
}

/* full(int[] size, Scalar fill_value, *, ScalarType? dtype=None) */
static tp_status infer_full(const tp_value *args, tp_value *out) {
    int n;
    tp_sdim sizes[TP_MAX_DIMS];
    TP_TRY(size_arg(args, 0, &n, sizes));
    tp_dtype dtype = dtype_arg(args, 2, tp__scalar_dtype(&args[1]));
    char elem[8];
    TP_TRY(tp__scalar_to_elem(&args[1], dtype, elem)); /* report overflow before running */
    return tp__out_dims(out, dtype, n, sizes);
}

static tp_status kernel_full(const tp_value *args, tp_value *out) {
    tp_tensor *o = tp__out_at(out, 0);
    char elem[8];
    TP_TRY(tp__scalar_to_elem(&args[1], o->dtype, elem));
    fill_elem(o, elem);
    return TP_OK;
}

/* ---- *_like(Tensor self, ..., *, ScalarType? dtype=None) ---------------- */

static tp_status infer_like(const tp_value *args, int dtype_index, tp_value *out) {
    tp_tensor *self;
    TP_TRY(need_tensor(args, 0, "self", &self));
    return tp__out_like(out, dtype_arg(args, dtype_index, self->dtype), self);
}

static tp_status infer_like1(const tp_value *args, tp_value *out) { return infer_like(args, 1, out); }

static tp_status kernel_empty_like(const tp_value *args, tp_value *out) {
    TP_UNUSED(args);
    TP_UNUSED(out);
    return TP_OK; /* values unspecified */
}

/* full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None):
 * the dtype is self's (not inferred from the fill value). */
static tp_status infer_full_like(const tp_value *args, tp_value *out) {
    TP_TRY(infer_like(args, 2, out));
    char elem[8];
    return tp__scalar_to_elem(&args[1], out->u.tensor->dtype, elem);
}

/* ---- new_*(Tensor self, int[] size, ..., *, ScalarType? dtype=None) ----
 * A new tensor of the given size with self's dtype unless one is given. */

static tp_status infer_new(const tp_value *args, int dtype_index, tp_value *out) {
    tp_tensor *self;
    TP_TRY(need_tensor(args, 0, "self", &self));
    int n;
    tp_sdim sizes[TP_MAX_DIMS];
    TP_TRY(size_arg(args, 1, &n, sizes));
    return tp__out_dims(out, dtype_arg(args, dtype_index, self->dtype), n, sizes);
}

static tp_status infer_new2(const tp_value *args, tp_value *out) { return infer_new(args, 2, out); }

/* new_empty_strided(Tensor self, int[] size, int[] stride, *, ScalarType? dtype=None): new_empty
 * with strides given too. The values are unspecified; the result is contiguous (the strides are
 * checked, not kept: an as_strided of it sees a storage of exactly its elements). */
static tp_status infer_new_empty_strided(const tp_value *args, tp_value *out) {
    int n, m;
    int64_t buf[TP_MAX_DIMS];
    TP_TRY(tp__arg_ints(args, 1, "size", buf, TP_MAX_DIMS, 0, &n));
    TP_TRY(tp__arg_ints(args, 2, "stride", buf, TP_MAX_DIMS, 0, &m));
    TP_CHECK(n == m, TP_ERR_SHAPE, "dimensionality of sizes (%d) must match dimensionality of strides (%d)", n, m);
    return infer_new(args, 3, out);
}

/* new_full(Tensor self, int[] size, Scalar fill_value, *, ScalarType? dtype=None) */
static tp_status infer_new_full(const tp_value *args, tp_value *out) {
    TP_TRY(infer_new(args, 3, out));
    char elem[8];
    return tp__scalar_to_elem(&args[2], out->u.tensor->dtype, elem);
}

static tp_status kernel_new_full(const tp_value *args, tp_value *out) {
    tp_tensor *o = tp__out_at(out, 0);
    char elem[8];
    TP_TRY(tp__scalar_to_elem(&args[2], o->dtype, elem));
    fill_elem(o, elem);
    return TP_OK;
}

/* ---- arange(Scalar start, Scalar? end=None, Scalar step=1, *, dtype) ----
 * arange(5) means end=5. Bounds are read in PyTorch's accumulation type
 * (int64 for integer dtypes, double for float32/float64, float for
 * float16/bfloat16); the length is ceil((end - start) / step), computed in
 * int64 for int64 and in double otherwise, as PyTorch does. */

typedef struct arange_plan {
    tp_dtype dtype;
    int64_t n;
    bool is_int;
    int64_t start_i, step_i;
    double start_f, step_f;
} arange_plan;

/* A Scalar value converted to the accumulation type of dtype. */
static tp_status acc_value(const tp_value *v, tp_dtype dtype, int64_t *i, double *f) {
    char elem[8];
    if (tp_dtype_is_float(dtype)) {
        *f = tp_value_as_f64(v);
        if (dtype == TP_FLOAT16 || dtype == TP_BFLOAT16) *f = (float)*f;
        return TP_OK;
    }
    TP_TRY(tp__scalar_to_elem(v, TP_INT64, elem));
    *i = tp__load_i64(elem, TP_INT64);
    *f = (double)*i;
    return TP_OK;
}

static tp_status arange_plan_make(const tp_value *args, arange_plan *p) {
    tp_value zero = tp_value_int(0);
    const tp_value *start = &args[0], *end = &args[1], *step = &args[2];
    if (end->kind == TP_VAL_NONE) {
        end = start;
        start = &zero;
    }
    bool any_float = start->kind == TP_VAL_FLOAT || end->kind == TP_VAL_FLOAT || step->kind == TP_VAL_FLOAT;
    p->dtype = dtype_arg(args, 3, any_float ? TP_DEFAULT_FLOAT : TP_INT64);
    TP_CHECK(p->dtype != TP_BOOL, TP_ERR_TYPE, "not implemented for dtype bool");
    p->is_int = !tp_dtype_is_float(p->dtype);
    int64_t xs_i = 0, xe_i = 0, xst_i = 0;
    double xs, xe, xst;
    TP_TRY(acc_value(start, p->dtype, &xs_i, &xs));
    TP_TRY(acc_value(end, p->dtype, &xe_i, &xe));
    TP_TRY(acc_value(step, p->dtype, &xst_i, &xst));
    TP_CHECK(xst > 0 || xst < 0, TP_ERR_INVALID_ARG, "step must be nonzero");
    TP_CHECK(isfinite(xs) && isfinite(xe), TP_ERR_INVALID_ARG, "unsupported range: %g -> %g", xs, xe);
    TP_CHECK((xst > 0 && xe >= xs) || (xst < 0 && xe <= xs), TP_ERR_INVALID_ARG,
             "upper bound and larger bound inconsistent with step sign");
    double size_d;
    if (p->dtype == TP_INT64) {
        int64_t sgn = xst_i > 0 ? 1 : -1, num;
        bool ok = !__builtin_sub_overflow(xe_i, xs_i, &num) && tp_add_overflow_i64(num, xst_i - sgn, &num) &&
                  !(num == INT64_MIN && xst_i == -1);
        TP_CHECK(ok, TP_ERR_INVALID_ARG, "invalid size, possible overflow?");
        size_d = (double)(num / xst_i);
    } else {
        size_d = ceil((tp_value_as_f64(end) - tp_value_as_f64(start)) / tp_value_as_f64(step));
    }
    TP_CHECK(size_d >= 0 && size_d < 9223372036854775808.0, TP_ERR_INVALID_ARG, "invalid size, possible overflow?");
    p->n = (int64_t)size_d;
    p->start_i = xs_i;
    p->step_i = xst_i;
    p->start_f = xs;
    p->step_f = xst;
    return TP_OK;
}

static tp_status infer_arange(const tp_value *args, tp_value *out) {
    arange_plan p;
    TP_TRY(arange_plan_make(args, &p));
    return tp__out_dims(out, p.dtype, 1, (tp_sdim[]){tp__dimk(p.n)});
}

static tp_status kernel_arange(const tp_value *args, tp_value *out) {
    arange_plan p;
    TP_TRY(arange_plan_make(args, &p));
    tp_tensor *o = tp__out_at(out, 0);
    char *base = tp__tensor_base(o);
    int64_t stride = o->strides[0] * (int64_t)tp_dtype_size(p.dtype);
    bool half = p.dtype == TP_FLOAT16 || p.dtype == TP_BFLOAT16;
    for (int64_t i = 0; i < p.n; i++) {
        char *dst = base + i * stride;
        if (p.is_int) {
            /* wrapping int64 arithmetic, as PyTorch's */
            uint64_t v = (uint64_t)p.start_i + (uint64_t)p.step_i * (uint64_t)i;
            tp__store_i64(dst, p.dtype, (int64_t)v);
        } else if (half) {
            float v = (float)p.start_f + (float)p.step_f * (float)i;
            tp__store_f64(dst, p.dtype, v);
        } else {
            tp__store_f64(dst, p.dtype, p.start_f + p.step_f * (double)i);
        }
    }
    return TP_OK;
}

/* ---- linspace(Scalar start, Scalar end, int steps, *, dtype) -------------
 * PyTorch's symmetric computation: the first half counts up from start,
 * the second half down from end, in the dtype's own arithmetic (double
 * steps for integer dtypes). */

static tp_status linspace_check(const tp_value *args, tp_dtype *dtype, int64_t *steps) {
    *steps = tp__arg_int(args, 2);
    TP_CHECK(*steps >= 0, TP_ERR_INVALID_ARG, "number of steps must be non-negative, got %" PRId64, *steps);
    *dtype = dtype_arg(args, 3, TP_DEFAULT_FLOAT);
    TP_CHECK(*dtype != TP_BOOL, TP_ERR_TYPE, "not implemented for dtype bool");
    return TP_OK;
}

static tp_status infer_linspace(const tp_value *args, tp_value *out) {
    tp_dtype dtype;
    int64_t steps;
    TP_TRY(linspace_check(args, &dtype, &steps));
    return tp__out_dims(out, dtype, 1, (tp_sdim[]){tp__dimk(steps)});
}

static tp_status kernel_linspace(const tp_value *args, tp_value *out) {
    tp_dtype dtype;
    int64_t steps;
    TP_TRY(linspace_check(args, &dtype, &steps));
    tp_tensor *o = tp__out_at(out, 0);
    char start_e[8], end_e[8];
    TP_TRY(tp__scalar_to_elem(&args[0], dtype, start_e));
    TP_TRY(tp__scalar_to_elem(&args[1], dtype, end_e));
    if (steps == 0) return TP_OK;
    if (steps == 1) {
        fill_elem(o, start_e);
        return TP_OK;
    }
    char *base = tp__tensor_base(o);
    int64_t stride = o->strides[0] * (int64_t)tp_dtype_size(dtype), halfway = steps / 2;
    if (dtype == TP_FLOAT64) {
        double s = tp__load_f64(start_e, dtype), e = tp__load_f64(end_e, dtype);
        double step = (e - s) / (double)(steps - 1);
        for (int64_t i = 0; i < steps; i++) {
            double v = i < halfway ? s + step * (double)i : e - step * (double)(steps - i - 1);
            tp__store_f64(base + i * stride, dtype, v);
        }
    } else if (tp_dtype_is_float(dtype)) {
        float s = (float)tp__load_f64(start_e, dtype), e = (float)tp__load_f64(end_e, dtype);
        float step = (e - s) / (float)(steps - 1);
        for (int64_t i = 0; i < steps; i++) {
            float v = i < halfway ? s + step * (float)i : e - step * (float)(steps - i - 1);
            tp__store_f64(base + i * stride, dtype, v);
        }
    } else {
        int64_t s = tp__load_i64(start_e, dtype), e = tp__load_i64(end_e, dtype);
        double step = ((double)e - (double)s) / (double)(steps - 1);
        for (int64_t i = 0; i < steps; i++) {
            double v = i < halfway ? (double)s + step * (double)i : (double)e - step * (double)(steps - i - 1);
            tp__store_f64(base + i * stride, dtype, trunc(v));
        }
    }
    return TP_OK;
}

/* ---- eye(int n, int? m=None, *, ScalarType? dtype=None) ------------------ */

static tp_status eye_sizes(const tp_value *args, int64_t *sizes) {
    int64_t n = tp__arg_int(args, 0), m = tp__arg_is_none(args, 1) ? n : tp__arg_int(args, 1);
    TP_CHECK(n >= 0, TP_ERR_INVALID_ARG, "n must be greater or equal to 0, got %" PRId64, n);
    TP_CHECK(m >= 0, TP_ERR_INVALID_ARG, "m must be greater or equal to 0, got %" PRId64, m);
    sizes[0] = n;
    sizes[1] = m;
    int64_t numel;
    return tp__numel(2, sizes, &numel);
}

static tp_status infer_eye(const tp_value *args, tp_value *out) {
    int64_t sizes[2];
    TP_TRY(eye_sizes(args, sizes));
    return tp__out_dims(out, dtype_arg(args, 2, TP_DEFAULT_FLOAT), 2, (tp_sdim[]){tp__dimk(sizes[0]), tp__dimk(sizes[1])});
}

static tp_status kernel_eye(const tp_value *args, tp_value *out) {
    TP_UNUSED(args);
    tp_tensor *o = tp__out_at(out, 0);
    fill_int(o, 0);
    char one[8];
    tp__store_i64(one, o->dtype, 1);
    size_t es = tp_dtype_size(o->dtype);
    int64_t k = o->sizes[0] < o->sizes[1] ? o->sizes[0] : o->sizes[1];
    char *base = tp__tensor_base(o);
    for (int64_t i = 0; i < k; i++) memcpy(base + (i * o->strides[0] + i * o->strides[1]) * (int64_t)es, one, es);
    return TP_OK;
}

/* ---- registration ------------------------------------------------------ */

/* ---- tril_indices / triu_indices(row, col, offset=0, *, dtype=int64) ----
 * [2, n]: the (row, column) pairs of the lower (upper) triangle of a row x
 * col matrix, diagonal `offset` included, in row-major order. */

static int64_t tri_count(int64_t row, int64_t col, int64_t off, bool lower) {
    int64_t n = 0;
    for (int64_t i = 0; i < row; i++) {
        int64_t lo = lower ? 0 : i + off, hi = lower ? i + off : col - 1; /* columns lo..hi */
        if (lo < 0) lo = 0;
        if (hi > col - 1) hi = col - 1;
        if (hi >= lo) n += hi - lo + 1;
    }
    return n;
}

static tp_status tri_check(const tp_value *args, int64_t *row, int64_t *col, int64_t *off, tp_dtype *dt) {
    *row = tp__arg_int(args, 0);
    *col = tp__arg_int(args, 1);
    *off = tp__arg_int(args, 2);
    *dt = dtype_arg(args, 3, TP_INT64);
    TP_CHECK(*row >= 0, TP_ERR_INVALID_ARG, "row must be non-negative, got%" PRId64, *row);
    TP_CHECK(*col >= 0, TP_ERR_INVALID_ARG, "col must be non-negative, got%" PRId64, *col);
    TP_CHECK(*row <= ((int64_t)1 << 24) && *col <= ((int64_t)1 << 24), TP_ERR_INVALID_ARG,
             "row and col must be at most 2^24, got %" PRId64 " and %" PRId64, *row, *col);
    TP_CHECK(*off > INT64_MIN / 2 && *off < INT64_MAX / 2, TP_ERR_INVALID_ARG, "offset %" PRId64 " out of range", *off);
    TP_CHECK(*dt == TP_INT64 || *dt == TP_INT32, TP_ERR_TYPE, "\"tril_indices\" not implemented for '%s'",
             tp_dtype_name(*dt));
    return TP_OK;
}

static tp_status tri_infer(const tp_value *args, tp_value *out, bool lower) {
    int64_t row, col, off;
    tp_dtype dt;
    TP_TRY(tri_check(args, &row, &col, &off, &dt));
    int64_t sizes[2] = {2, tri_count(row, col, off, lower)};
    return tp__out_tensor(out, dt, 2, sizes);
}

static tp_status tri_kernel(const tp_value *args, tp_value *out, bool lower) {
    int64_t row, col, off;
    tp_dtype dt;
    TP_TRY(tri_check(args, &row, &col, &off, &dt));
    tp_tensor *o = tp__out_at(out, 0);
    int64_t n = o->sizes[1], k = 0;
    char *base = tp__tensor_base(o);
    size_t es = tp_dtype_size(dt);
    for (int64_t i = 0; i < row && k < n; i++) {
        int64_t lo = lower ? 0 : i + off, hi = lower ? i + off : col - 1;
        if (lo < 0) lo = 0;
        if (hi > col - 1) hi = col - 1;
        for (int64_t j = lo; j <= hi && k < n; j++, k++) {
            tp__store_i64(base + (size_t)k * es, dt, i);
            tp__store_i64(base + (size_t)(n + k) * es, dt, j);
        }
    }
    return TP_OK;
}

static tp_status tril_indices_infer(const tp_value *args, tp_value *out) { return tri_infer(args, out, true); }
static tp_status triu_indices_infer(const tp_value *args, tp_value *out) { return tri_infer(args, out, false); }
static tp_status tril_indices_kernel(const tp_value *args, tp_value *out) { return tri_kernel(args, out, true); }
static tp_status triu_indices_kernel(const tp_value *args, tp_value *out) { return tri_kernel(args, out, false); }


void tp__register_create_ops(void) {
    tp__register_op(TP_OP_TRIL_INDICES,
                    "tril_indices(int row, int col, int offset=0, *, ScalarType? dtype=None, " FACTORY_KWARGS ") -> Tensor",
                    0, tril_indices_infer, tril_indices_kernel);
    tp__register_op(TP_OP_TRIU_INDICES,
                    "triu_indices(int row, int col, int offset=0, *, ScalarType? dtype=None, " FACTORY_KWARGS ") -> Tensor",
                    0, triu_indices_infer, triu_indices_kernel);
    tp__register_op(TP_OP_ZEROS, "zeros(int[] size, *, ScalarType? dtype=None, " FACTORY_KWARGS ") -> Tensor", 0,
                    infer_zeros, kernel_zeros);
    tp__register_op(TP_OP_ONES, "ones(int[] size, *, ScalarType? dtype=None, " FACTORY_KWARGS ") -> Tensor", 0,
                    infer_zeros, kernel_ones);
    tp__register_op(TP_OP_FULL,
                    "full(int[] size, Scalar fill_value, *, ScalarType? dtype=None, " FACTORY_KWARGS ") -> Tensor", 0,
                    infer_full, kernel_full);
    tp__register_op(TP_OP_ARANGE,
                    "arange(Scalar start, Scalar? end=None, Scalar step=1, *, ScalarType? dtype=None, " FACTORY_KWARGS
                    ") -> Tensor",
                    0, infer_arange, kernel_arange);
    tp__register_op(TP_OP_LINSPACE,
                    "linspace(Scalar start, Scalar end, int steps, *, ScalarType? dtype=None, " FACTORY_KWARGS
                    ") -> Tensor",
                    0, infer_linspace, kernel_linspace);
    tp__register_op(TP_OP_ZEROS_LIKE,
                    "zeros_like(Tensor self, *, ScalarType? dtype=None, " FACTORY_KWARGS
                    ", Any memory_format=None) -> Tensor",
                    0, infer_like1, kernel_zeros);
    tp__register_op(TP_OP_ONES_LIKE,
                    "ones_like(Tensor self, *, ScalarType? dtype=None, " FACTORY_KWARGS
                    ", Any memory_format=None) -> Tensor",
                    0, infer_like1, kernel_ones);
    tp__register_op(TP_OP_FULL_LIKE,
                    "full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, " FACTORY_KWARGS
                    ", Any memory_format=None) -> Tensor",
                    0, infer_full_like, kernel_full);
    tp__register_op(TP_OP_EMPTY_LIKE,
                    "empty_like(Tensor self, *, ScalarType? dtype=None, " FACTORY_KWARGS
                    ", Any memory_format=None) -> Tensor",
                    0, infer_like1, kernel_empty_like);
    tp__register_op(TP_OP_NEW_ZEROS,
                    "new_zeros(Tensor self, int[] size, *, ScalarType? dtype=None, " FACTORY_KWARGS ") -> Tensor", 0,
                    infer_new2, kernel_zeros);
    tp__register_op(TP_OP_NEW_ONES,
                    "new_ones(Tensor self, int[] size, *, ScalarType? dtype=None, " FACTORY_KWARGS ") -> Tensor", 0,
                    infer_new2, kernel_ones);
    tp__register_op(TP_OP_NEW_FULL,
                    "new_full(Tensor self, int[] size, Scalar fill_value, *, ScalarType? dtype=None, " FACTORY_KWARGS
                    ") -> Tensor",
                    0, infer_new_full, kernel_new_full);
    tp__register_op(TP_OP_NEW_EMPTY,
                    "new_empty(Tensor self, int[] size, *, ScalarType? dtype=None, " FACTORY_KWARGS ") -> Tensor", 0,
                    infer_new2, kernel_empty_like);
    tp__register_op(TP_OP_NEW_EMPTY_STRIDED,
                    "new_empty_strided(Tensor self, int[] size, int[] stride, *, ScalarType? dtype=None, " FACTORY_KWARGS
                    ") -> Tensor",
                    0, infer_new_empty_strided, kernel_empty_like);
    tp__register_op(TP_OP_EYE, "eye(int n, int? m=None, *, ScalarType? dtype=None, " FACTORY_KWARGS ") -> Tensor", 0,
                    infer_eye, kernel_eye);
}
