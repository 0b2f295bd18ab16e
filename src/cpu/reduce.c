/*
 * reduce.c - reductions and scans: sum, mean, prod, amax/amin, max/min,
 * argmax/argmin, var/std, norm, logsumexp, any/all, count_nonzero, cumsum
 * and cumprod, nansum/nanmean/aminmax, and the lane ops cummax/cummin,
 * logcumsumexp, median/nanmedian, kthvalue, mode, msort, diff; renorm. Schemas,
 * shape rules and reference kernels with PyTorch's semantics.
 *
 * A reduction splits the input's dims into kept ("outer") dims, which index
 * the output in C order, and reduced ("inner") dims, which are walked in C
 * order for every output element. Both work on any strides (broadcast
 * stride-0 dims and 0-d inputs included). Float math runs in double and is
 * rounded on store; integer sums and products run in 64 bits with
 * wrap-around, as PyTorch's do.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <stdlib.h>

#include "kernel_util.h"

/* ---- dims and output shapes ------------------------------------------- */

typedef struct reduce_dims {
    int ndim;                  /* input rank */
    bool reduced[TP_MAX_DIMS]; /* per input dim */
    bool dim_given;            /* false: dim was None or [] (every dim) */
} reduce_dims;

/* Parse the dim argument args[i] (None, an int or a list of ints) of a
 * reduction over a tensor of rank ndim. None and [] reduce every dim. */
static tp_status parse_dims(const tp_value *args, int i, int ndim, reduce_dims *rd) {
    memset(rd, 0, sizeof *rd);
    rd->ndim = ndim;
    int64_t dims[TP_MAX_DIMS];
    int n = 0;
    if (!tp__arg_is_none(args, i)) TP_TRY(tp__arg_ints(args, i, "dim", dims, TP_MAX_DIMS, 0, &n));
    if (n == 0) {
        for (int d = 0; d < ndim; d++) rd->reduced[d] = true;
        return TP_OK;
    }
    rd->dim_given = true;
    bool seen[TP_MAX_DIMS] = {false};
    for (int k = 0; k < n; k++) {
        int d;
        TP_TRY(tp__wrap_dim(dims[k], ndim, &d));
        TP_CHECK(!seen[d], TP_ERR_INVALID_ARG, "dim %d appears multiple times in the list of dims", d);
        seen[d] = true;
        if (ndim > 0) rd->reduced[d] = true;
    }
    return TP_OK;
}

/* Output shape of a reduction: reduced dims dropped, or kept as size 1. */
static void reduced_shape(const tp_tensor *t, const reduce_dims *rd, bool keepdim, int *ndim, tp_sdim *sizes) {
    int n = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (!rd->reduced[d]) sizes[n++] = tp__dim(t, d);
        else if (keepdim) sizes[n++] = tp__dimk(1);
    }
    *ndim = n;
}

/* amax/amin/max/min/argmax/argmin have no identity: reducing an empty
 * extent is an error, as in PyTorch. */
static tp_status check_nonempty_reduction(const tp_tensor *t, const reduce_dims *rd) {
    if (!rd->dim_given) {
        bool empty = false;
        for (int d = 0; d < t->ndim; d++) empty = empty || !tp__dim_ge(tp__dim(t, d), 1, "a reduced dim is not empty");
        TP_CHECK(!empty, TP_ERR_SHAPE,
                 "Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim "
                 "with the 'dim' argument.");
        return TP_OK;
    }
    for (int d = 0; d < t->ndim; d++)
        TP_CHECK(!rd->reduced[d] || tp__dim_ge(tp__dim(t, d), 1, "a reduced dim is not empty"), TP_ERR_SHAPE,
                 "Expected reduction dim %d to have non-zero size.", d);
    return TP_OK;
}

static tp_status infer_reduction(const tp_tensor *self, const reduce_dims *rd, bool keepdim, tp_dtype dtype,
                                 tp_value *out) {
    int ndim;
    tp_sdim sizes[TP_MAX_DIMS];
    reduced_shape(self, rd, keepdim, &ndim, sizes);
    return tp__out_dims(out, dtype, ndim, sizes);
}

/* The optional ScalarType argument args[i]; false when None. */
static bool arg_dtype(const tp_value *args, int i, tp_dtype *out) {
    if (args[i].kind != TP_VAL_DTYPE) return false;
    *out = args[i].u.dtype;
    return true;
}

/* sum/prod/cumsum: bool and integer inputs accumulate in int64. */
static tp_dtype sum_dtype(const tp_value *args, int dtype_arg, tp_dtype in) {
    tp_dtype d;
    if (arg_dtype(args, dtype_arg, &d)) return d;
    return tp_dtype_is_float(in) ? in : TP_INT64;
}

/* ---- walking the reduced sub-space ------------------------------------ */

/* The next byte offset of a one-operand walk (tp_walk, internal.h). */
static inline bool walker_next(tp_walk *w, int64_t *offset) {
    if (!tp__walk_next(w)) return false;
    *offset = w->off[0];
    return true;
}

/* The input's dims split into kept and reduced groups, each coalesced (size-1
 * dims dropped, mergeable neighbours merged; C order is preserved, so the
 * walk order of the reduced group is the flat index PyTorch reports). */
typedef struct reduce_split {
    int n_outer, n_inner;
    int64_t outer_sizes[TP_MAX_DIMS], outer_strides[TP_MAX_DIMS];
    int64_t inner_sizes[TP_MAX_DIMS], inner_strides[TP_MAX_DIMS];
    int64_t inner_numel;
    const char *base;
} reduce_split;

/* Wrapping arithmetic: the dims of an empty tensor may multiply past int64;
 * a group holding a zero dim still ends with a zero size (0 * x = 0), and
 * the other group's product is then either the output's element count
 * (which fits: the output exists) or never used (an empty output). */
static inline int64_t wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
/* Wrapping int64 arithmetic (PyTorch's integer overflow wraps). */
static inline int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }

static void push_dim(int *n, int64_t *sizes, int64_t *strides, int64_t size, int64_t stride) {
    if (size == 1) return;
    if (*n > 0 && strides[*n - 1] == wrap_mul(stride, size)) {
        sizes[*n - 1] = wrap_mul(sizes[*n - 1], size);
        strides[*n - 1] = stride;
        return;
    }
    sizes[*n] = size;
    strides[*n] = stride;
    (*n)++;
}

static void split_dims(const tp_tensor *t, const bool *reduced, reduce_split *s) {
    memset(s, 0, sizeof *s);
    int64_t es = (int64_t)tp_dtype_size(t->dtype);
    s->inner_numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        int64_t size = t->sizes[d], stride = wrap_mul(t->strides[d], es);
        if (reduced[d]) push_dim(&s->n_inner, s->inner_sizes, s->inner_strides, size, stride);
        else push_dim(&s->n_outer, s->outer_sizes, s->outer_strides, size, stride);
    }
    for (int d = 0; d < s->n_inner; d++) s->inner_numel = wrap_mul(s->inner_numel, s->inner_sizes[d]);
    s->base = tp__tensor_base(t);
}

/* What one output element of a reduction computes. */
typedef enum reduce_kind {
    R_SUM,
    R_PROD,
    R_MEAN,
    R_MAX, /* amax, max, argmax */
    R_MIN, /* amin, min, argmin */
    R_VAR,
    R_STD,
    R_NORM,
    R_LOGSUMEXP,
    R_ANY,
    R_ALL,
    R_COUNT_NONZERO,
    R_NANSUM,
    R_NANMEAN
} reduce_kind;

typedef struct reduce_job {
    reduce_kind kind;
    tp_dtype in_dtype;
    tp_dtype compute;  /* input elements are cast to this dtype first */
    tp_tensor *values; /* output (may be NULL for argmax/argmin) */
    tp_tensor *indices; /* int64 indices (max/min/argmax/argmin), or NULL */
    double param;       /* norm: p; var/std: correction */
} reduce_job;

/* Cast a double to what dtype d would hold, and back. */
static double cast_f64(double v, tp_dtype d) {
    unsigned char buf[8];
    tp__store_f64(buf, d, v);
    return tp__load_f64(buf, d);
}

static int64_t cast_i64(int64_t v, tp_dtype d) {
    unsigned char buf[8];
    tp__store_i64(buf, d, v);
    return tp__load_i64(buf, d);
}

static inline double load_as_f64(const char *p, tp_dtype src, tp_dtype dst) {
    if (!tp_dtype_is_float(src) && tp_dtype_is_float(dst)) {
        double v = (double)tp__load_i64(p, src);
        return dst == TP_FLOAT64 ? v : cast_f64(v, dst);
    }
    double v = tp__load_f64(p, src);
    return (src == dst || dst == TP_FLOAT64) ? v : cast_f64(v, dst);
}

static inline int64_t load_as_i64(const char *p, tp_dtype src, tp_dtype dst) {
    int64_t v = tp__load_i64(p, src);
    return (src == dst || dst == TP_INT64) ? v : cast_i64(v, dst);
}

/* sum / prod / mean of one output element. */
static void reduce_sum_prod(const reduce_job *job, const reduce_split *s, const char *base, char *out) {
    tp_walk w;
    int64_t off;
    tp_dtype src = job->in_dtype, dst = job->compute;
    bool prod = job->kind == R_PROD;
    tp__walk_init(&w, s->n_inner, s->inner_sizes, 1, (const int64_t *[]){s->inner_strides});
    if (tp_dtype_is_float(dst) && (job->kind == R_NANSUM || job->kind == R_NANMEAN)) {
        double acc = 0.0;
        int64_t count = 0;
        while (walker_next(&w, &off)) {
            double v = load_as_f64(base + off, src, dst);
            if (isnan(v)) continue;
            acc += v;
            count++;
        }
        if (job->kind == R_NANMEAN) acc /= (double)count; /* 0/0 = nan when every element is NaN */
        tp__store_f64(out, job->values->dtype, acc);
    } else if (tp_dtype_is_float(dst)) {
        double acc = prod ? 1.0 : 0.0;
        if (src == TP_FLOAT32 && dst == TP_FLOAT32 && !prod) {
            while (walker_next(&w, &off)) acc += *(const float *)(base + off);
        } else if (prod) {
            while (walker_next(&w, &off)) acc *= load_as_f64(base + off, src, dst);
        } else {
            while (walker_next(&w, &off)) acc += load_as_f64(base + off, src, dst);
        }
        if (job->kind == R_MEAN) acc /= (double)s->inner_numel; /* 0/0 = nan for empty, as torch */
        tp__store_f64(out, job->values->dtype, acc);
    } else {
        int64_t acc = prod ? 1 : 0;
        if (prod) {
            while (walker_next(&w, &off)) acc = wrap_mul(acc, load_as_i64(base + off, src, dst));
        } else {
            while (walker_next(&w, &off)) acc = wrap_add(acc, load_as_i64(base + off, src, dst));
        }
        tp__store_i64(out, job->values->dtype, acc);
    }
}

/* max/min (values and/or the index of the first extreme; NaN wins and the
 * first NaN's index is reported, as in PyTorch). */
static void reduce_extreme(const reduce_job *job, const reduce_split *s, const char *base, char *out,
                           char *out_index) {
    tp_walk w;
    int64_t off, i = 0, best_i = 0;
    bool want_max = job->kind == R_MAX;
    tp__walk_init(&w, s->n_inner, s->inner_sizes, 1, (const int64_t *[]){s->inner_strides});
    if (tp_dtype_is_float(job->in_dtype)) {
        double best = 0.0;
        for (; walker_next(&w, &off); i++) {
            double v = tp__load_f64(base + off, job->in_dtype);
            if (isnan(v)) {
                best = v;
                best_i = i;
                break;
            }
            if (i == 0 || (want_max ? v > best : v < best)) {
                best = v;
                best_i = i;
            }
        }
        if (out) tp__store_f64(out, job->values->dtype, best);
    } else {
        int64_t best = 0;
        for (; walker_next(&w, &off); i++) {
            int64_t v = tp__load_i64(base + off, job->in_dtype);
            if (i == 0 || (want_max ? v > best : v < best)) {
                best = v;
                best_i = i;
            }
        }
        if (out) tp__store_i64(out, job->values->dtype, best);
    }
    if (out_index) tp__store_i64(out_index, TP_INT64, best_i);
}

/* var / std with a correction (two passes: mean, then squared deviations). */
static void reduce_var(const reduce_job *job, const reduce_split *s, const char *base, char *out) {
    tp_walk w;
    int64_t off;
    double sum = 0.0, ss = 0.0;
    tp__walk_init(&w, s->n_inner, s->inner_sizes, 1, (const int64_t *[]){s->inner_strides});
    while (walker_next(&w, &off)) sum += tp__load_f64(base + off, job->in_dtype);
    double n = (double)s->inner_numel, mean = sum / n;
    tp__walk_init(&w, s->n_inner, s->inner_sizes, 1, (const int64_t *[]){s->inner_strides});
    while (walker_next(&w, &off)) {
        double d = tp__load_f64(base + off, job->in_dtype) - mean;
        ss += d * d;
    }
    double divisor = n - job->param;
    if (divisor < 0) divisor = 0;
    double var = ss / divisor;
    tp__store_f64(out, job->values->dtype, job->kind == R_STD ? sqrt(var) : var);
}

/* Vector p-norm: inf/-inf are max/min |x|, 0 counts non-zeros. */
static void reduce_norm(const reduce_job *job, const reduce_split *s, const char *base, char *out) {
    tp_walk w;
    int64_t off;
    double p = job->param, acc;
    tp_dtype src = job->in_dtype, dst = job->compute;
    tp__walk_init(&w, s->n_inner, s->inner_sizes, 1, (const int64_t *[]){s->inner_strides});
    if (isinf(p)) {
        acc = p > 0 ? 0.0 : INFINITY;
        while (walker_next(&w, &off)) {
            double a = fabs(load_as_f64(base + off, src, dst));
            if (isnan(a)) {
                acc = a;
                break;
            }
            if (p > 0 ? a > acc : a < acc) acc = a;
        }
    } else if (p == 0.0) {
        acc = 0.0;
        while (walker_next(&w, &off)) acc += load_as_f64(base + off, src, dst) != 0.0;
    } else if (p == 1.0) {
        acc = 0.0;
        while (walker_next(&w, &off)) acc += fabs(load_as_f64(base + off, src, dst));
    } else if (p == 2.0) {
        acc = 0.0;
        while (walker_next(&w, &off)) {
            double v = load_as_f64(base + off, src, dst);
            acc += v * v;
        }
        acc = sqrt(acc);
    } else {
        acc = 0.0;
        while (walker_next(&w, &off)) acc += pow(fabs(load_as_f64(base + off, src, dst)), p);
        acc = pow(acc, 1.0 / p);
    }
    tp__store_f64(out, job->values->dtype, acc);
}

/* log(sum(exp(x))) shifted by the max (an infinite max shifts by 0, so
 * all -inf gives -inf and any +inf gives +inf; NaN propagates). */
static void reduce_logsumexp(const reduce_job *job, const reduce_split *s, const char *base, char *out) {
    tp_walk w;
    int64_t off;
    double m = -INFINITY, sum = 0.0;
    tp__walk_init(&w, s->n_inner, s->inner_sizes, 1, (const int64_t *[]){s->inner_strides});
    while (walker_next(&w, &off)) {
        double v = tp__load_f64(base + off, job->in_dtype);
        if (isnan(v) || v > m) m = v;
        if (isnan(m)) break;
    }
    if (isnan(m)) {
        tp__store_f64(out, job->values->dtype, m);
        return;
    }
    double shift = isinf(m) ? 0.0 : m;
    tp__walk_init(&w, s->n_inner, s->inner_sizes, 1, (const int64_t *[]){s->inner_strides});
    while (walker_next(&w, &off)) sum += exp(tp__load_f64(base + off, job->in_dtype) - shift);
    tp__store_f64(out, job->values->dtype, log(sum) + shift);
}

static void reduce_any_all(const reduce_job *job, const reduce_split *s, const char *base, char *out) {
    tp_walk w;
    int64_t off;
    bool any = job->kind == R_ANY, result = !any;
    bool is_float = tp_dtype_is_float(job->in_dtype);
    tp__walk_init(&w, s->n_inner, s->inner_sizes, 1, (const int64_t *[]){s->inner_strides});
    while (walker_next(&w, &off)) {
        bool nz = is_float ? tp__load_f64(base + off, job->in_dtype) != 0.0 : tp__load_i64(base + off, job->in_dtype) != 0;
        if (nz == any) {
            result = any;
            break;
        }
    }
    tp__store_i64(out, job->values->dtype, result ? 1 : 0);
}

static void reduce_count_nonzero(const reduce_job *job, const reduce_split *s, const char *base, char *out) {
    tp_walk w;
    int64_t off, count = 0;
    bool is_float = tp_dtype_is_float(job->in_dtype);
    tp__walk_init(&w, s->n_inner, s->inner_sizes, 1, (const int64_t *[]){s->inner_strides});
    while (walker_next(&w, &off))
        count += is_float ? tp__load_f64(base + off, job->in_dtype) != 0.0
                          : tp__load_i64(base + off, job->in_dtype) != 0;
    tp__store_i64(out, job->values->dtype, count);
}

/* Run a reduction of `self` over rd's dims, writing job->values/indices
 * (contiguous, one element per kept index in C order). */
static tp_status run_reduction(const tp_tensor *self, const reduce_dims *rd, reduce_job *job) {
    reduce_split s;
    split_dims(self, rd->reduced, &s);
    job->in_dtype = self->dtype;
    char *vals = job->values ? (char *)tp_tensor_data(job->values) : NULL;
    char *idx = job->indices ? (char *)tp_tensor_data(job->indices) : NULL;
    size_t ves = job->values ? tp_dtype_size(job->values->dtype) : 0;
    tp_walk w;
    int64_t off, k = 0;
    tp__walk_init(&w, s.n_outer, s.outer_sizes, 1, (const int64_t *[]){s.outer_strides}); /* empty if the output is */
    for (; walker_next(&w, &off); k++) {
        const char *base = s.base + off;
        char *ov = vals ? vals + k * (int64_t)ves : NULL;
        char *oi = idx ? idx + k * 8 : NULL;
        switch (job->kind) {
        case R_SUM:
        case R_PROD:
        case R_MEAN:
        case R_NANSUM:
        case R_NANMEAN: reduce_sum_prod(job, &s, base, ov); break;
        case R_MAX:
        case R_MIN: reduce_extreme(job, &s, base, ov, oi); break;
        case R_VAR:
        case R_STD: reduce_var(job, &s, base, ov); break;
        case R_NORM: reduce_norm(job, &s, base, ov); break;
        case R_LOGSUMEXP: reduce_logsumexp(job, &s, base, ov); break;
        case R_ANY:
        case R_ALL: reduce_any_all(job, &s, base, ov); break;
        case R_COUNT_NONZERO: reduce_count_nonzero(job, &s, base, ov); break;
        }
    }
    return TP_OK;
}

/* ---- sum / prod / mean ------------------------------------------------
 * op(Tensor self, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) */

static tp_status infer_sum(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    TP_TRY(parse_dims(args, 1, self->ndim, &rd));
    return infer_reduction(self, &rd, tp__arg_bool(args, 2), sum_dtype(args, 3, self->dtype), out);
}

static tp_status kernel_sum_prod(const tp_value *args, tp_value *out, reduce_kind kind) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    TP_TRY(parse_dims(args, 1, self->ndim, &rd));
    reduce_job job = {.kind = kind, .values = tp__out_at(out, 0)};
    job.compute = job.values->dtype;
    return run_reduction(self, &rd, &job);
}

static tp_status kernel_sum(const tp_value *args, tp_value *out) { return kernel_sum_prod(args, out, R_SUM); }
static tp_status kernel_prod(const tp_value *args, tp_value *out) { return kernel_sum_prod(args, out, R_PROD); }

static tp_status infer_mean(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    tp_dtype d;
    if (arg_dtype(args, 3, &d)) {
        TP_CHECK(tp_dtype_is_float(d), TP_ERR_TYPE,
                 "could not infer output dtype. Optional dtype must be either a floating point or complex "
                 "dtype. Got: %s",
                 tp_dtype_name(d));
    } else {
        d = self->dtype;
        TP_CHECK(tp_dtype_is_float(d), TP_ERR_TYPE,
                 "could not infer output dtype. Input dtype must be either a floating point or complex "
                 "dtype. Got: %s",
                 tp_dtype_name(d));
    }
    reduce_dims rd;
    TP_TRY(parse_dims(args, 1, self->ndim, &rd));
    return infer_reduction(self, &rd, tp__arg_bool(args, 2), d, out);
}

static tp_status kernel_mean(const tp_value *args, tp_value *out) { return kernel_sum_prod(args, out, R_MEAN); }

/* ---- amax / amin: op(Tensor self, int[] dim=[], bool keepdim=False) ---- */

static tp_status infer_amax(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    TP_TRY(parse_dims(args, 1, self->ndim, &rd));
    TP_TRY(check_nonempty_reduction(self, &rd));
    return infer_reduction(self, &rd, tp__arg_bool(args, 2), self->dtype, out);
}

static tp_status kernel_extreme_values(const tp_value *args, tp_value *out, reduce_kind kind) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    TP_TRY(parse_dims(args, 1, self->ndim, &rd));
    reduce_job job = {.kind = kind, .values = tp__out_at(out, 0)};
    return run_reduction(self, &rd, &job);
}

static tp_status kernel_amax(const tp_value *args, tp_value *out) { return kernel_extreme_values(args, out, R_MAX); }
static tp_status kernel_amin(const tp_value *args, tp_value *out) { return kernel_extreme_values(args, out, R_MIN); }

/* ---- max / min: op(Tensor self, int? dim=None, bool keepdim=False) -> Any
 * Without dim: one 0-d tensor (the full reduction). With dim: a tuple
 * (values, indices). */

static tp_status infer_max(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    TP_TRY(parse_dims(args, 1, self->ndim, &rd));
    TP_TRY(check_nonempty_reduction(self, &rd));
    if (!rd.dim_given) return tp__out_dims(out, self->dtype, 0, NULL);
    int ndim;
    tp_sdim sizes[TP_MAX_DIMS];
    reduced_shape(self, &rd, tp__arg_bool(args, 2), &ndim, sizes);
    TP_TRY(tp__out_tuple(out, 2));
    TP_TRY(tp__out_dims(tp_value_at(out, 0), self->dtype, ndim, sizes));
    return tp__out_dims(tp_value_at(out, 1), TP_INT64, ndim, sizes);
}

static tp_status kernel_max_min(const tp_value *args, tp_value *out, reduce_kind kind) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    TP_TRY(parse_dims(args, 1, self->ndim, &rd));
    reduce_job job = {.kind = kind, .values = tp__out_at(out, 0)};
    if (out->kind == TP_VAL_TUPLE) job.indices = tp__out_at(out, 1);
    return run_reduction(self, &rd, &job);
}

static tp_status kernel_max(const tp_value *args, tp_value *out) { return kernel_max_min(args, out, R_MAX); }
static tp_status kernel_min(const tp_value *args, tp_value *out) { return kernel_max_min(args, out, R_MIN); }

/* ---- argmax / argmin: op(Tensor self, int? dim=None, bool keepdim=False)
 * Without dim: the flat index; keepdim then gives a shape of all ones. */

static tp_status infer_argmax(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    TP_CHECK(self->dtype != TP_BOOL, TP_ERR_TYPE, "not implemented for bool tensors");
    reduce_dims rd;
    TP_TRY(parse_dims(args, 1, self->ndim, &rd));
    TP_TRY(check_nonempty_reduction(self, &rd));
    return infer_reduction(self, &rd, tp__arg_bool(args, 2), TP_INT64, out);
}

static tp_status kernel_argextreme(const tp_value *args, tp_value *out, reduce_kind kind) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    TP_TRY(parse_dims(args, 1, self->ndim, &rd));
    reduce_job job = {.kind = kind, .indices = tp__out_at(out, 0)};
    return run_reduction(self, &rd, &job);
}

static tp_status kernel_argmax(const tp_value *args, tp_value *out) { return kernel_argextreme(args, out, R_MAX); }
static tp_status kernel_argmin(const tp_value *args, tp_value *out) { return kernel_argextreme(args, out, R_MIN); }

/* ---- var / std ----------------------------------------------------------
 * op(Tensor self, int[]? dim=None, *, Scalar? correction=None,
 *    bool keepdim=False, bool? unbiased=None)
 * correction defaults to 1; unbiased=True/False means correction 1/0. */

static tp_status var_correction(const tp_value *args, double *correction) {
    bool has_corr = !tp__arg_is_none(args, 2), has_unbiased = !tp__arg_is_none(args, 4);
    TP_CHECK(!(has_corr && has_unbiased), TP_ERR_INVALID_ARG,
             "cannot specify both 'correction' and 'unbiased'");
    if (has_corr) *correction = tp__arg_f64(args, 2);
    else if (has_unbiased) *correction = tp__arg_bool(args, 4) ? 1.0 : 0.0;
    else *correction = 1.0;
    return TP_OK;
}

static tp_status infer_var(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    TP_CHECK(tp_dtype_is_float(self->dtype), TP_ERR_TYPE,
             "std and var only support floating point and complex dtypes (got %s)", tp_dtype_name(self->dtype));
    double correction;
    TP_TRY(var_correction(args, &correction));
    reduce_dims rd;
    TP_TRY(parse_dims(args, 1, self->ndim, &rd));
    return infer_reduction(self, &rd, tp__arg_bool(args, 3), self->dtype, out);
}

static tp_status kernel_var_std(const tp_value *args, tp_value *out, reduce_kind kind) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    TP_TRY(parse_dims(args, 1, self->ndim, &rd));
    reduce_job job = {.kind = kind, .values = tp__out_at(out, 0)};
    TP_TRY(var_correction(args, &job.param));
    return run_reduction(self, &rd, &job);
}

static tp_status kernel_var(const tp_value *args, tp_value *out) { return kernel_var_std(args, out, R_VAR); }
static tp_status kernel_std(const tp_value *args, tp_value *out) { return kernel_var_std(args, out, R_STD); }

/* ---- norm ---------------------------------------------------------------
 * norm(Tensor self, Scalar? p=2, int[]? dim=None, bool keepdim=False, *,
 *      ScalarType? dtype=None) */

static tp_status infer_norm(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    TP_CHECK(tp_dtype_is_float(self->dtype), TP_ERR_TYPE,
             "input dtype should be either floating point or complex. Got %s instead.", tp_dtype_name(self->dtype));
    tp_dtype d = self->dtype;
    if (arg_dtype(args, 4, &d))
        TP_CHECK(tp_dtype_is_float(d), TP_ERR_TYPE,
                 "the desired output dtype should be either floating point or complex. Got %s instead.",
                 tp_dtype_name(d));
    reduce_dims rd;
    TP_TRY(parse_dims(args, 2, self->ndim, &rd));
    return infer_reduction(self, &rd, tp__arg_bool(args, 3), d, out);
}

static tp_status kernel_norm(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    TP_TRY(parse_dims(args, 2, self->ndim, &rd));
    reduce_job job = {.kind = R_NORM, .values = tp__out_at(out, 0)};
    job.compute = job.values->dtype;
    job.param = tp__arg_is_none(args, 1) ? 2.0 : tp__arg_f64(args, 1);
    return run_reduction(self, &rd, &job);
}

/* ---- logsumexp(Tensor self, int[] dim, bool keepdim=False) -------------
 * Integer and bool inputs give the default float dtype. dim=[] reduces
 * every dim (like sum). */

static tp_status infer_logsumexp(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    TP_TRY(parse_dims(args, 1, self->ndim, &rd));
    tp_dtype d = tp_dtype_is_float(self->dtype) ? self->dtype : TP_DEFAULT_FLOAT;
    return infer_reduction(self, &rd, tp__arg_bool(args, 2), d, out);
}

static tp_status kernel_logsumexp(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    TP_TRY(parse_dims(args, 1, self->ndim, &rd));
    reduce_job job = {.kind = R_LOGSUMEXP, .values = tp__out_at(out, 0)};
    return run_reduction(self, &rd, &job);
}

/* ---- any / all: op(Tensor self, int? dim=None, bool keepdim=False) ------
 * bool result, except uint8 inputs which give uint8 (as PyTorch). */

static tp_status infer_any(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    TP_TRY(parse_dims(args, 1, self->ndim, &rd));
    return infer_reduction(self, &rd, tp__arg_bool(args, 2), self->dtype == TP_UINT8 ? TP_UINT8 : TP_BOOL, out);
}

static tp_status kernel_any_all(const tp_value *args, tp_value *out, reduce_kind kind) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    TP_TRY(parse_dims(args, 1, self->ndim, &rd));
    reduce_job job = {.kind = kind, .values = tp__out_at(out, 0)};
    return run_reduction(self, &rd, &job);
}

static tp_status kernel_any(const tp_value *args, tp_value *out) { return kernel_any_all(args, out, R_ANY); }
static tp_status kernel_all(const tp_value *args, tp_value *out) { return kernel_any_all(args, out, R_ALL); }

/* ---- count_nonzero(Tensor self, int[]? dim=None) -> int64 --------------- */

static tp_status infer_count_nonzero(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    TP_TRY(parse_dims(args, 1, self->ndim, &rd));
    return infer_reduction(self, &rd, false, TP_INT64, out);
}

static tp_status kernel_count_nonzero(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    TP_TRY(parse_dims(args, 1, self->ndim, &rd));
    reduce_job job = {.kind = R_COUNT_NONZERO, .values = tp__out_at(out, 0)};
    return run_reduction(self, &rd, &job);
}

/* ---- cumsum / cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -- */

static tp_status infer_cumsum(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    int d;
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), self->ndim, &d));
    return tp__out_like(out, sum_dtype(args, 2, self->dtype), self);
}

static tp_status scan_run(const tp_value *args, tp_value *out, bool prod) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    tp_tensor *res = tp__out_at(out, 0);
    int dim;
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 1), self->ndim, &dim));
    if (tp_tensor_numel(self) == 0) return TP_OK;
    /* lines along `dim`: outer = the other dims, walked for input and output
     * together (the output is contiguous) */
    int64_t in_es = (int64_t)tp_dtype_size(self->dtype), out_es = (int64_t)tp_dtype_size(res->dtype);
    int64_t osizes[TP_MAX_DIMS], in_strides[TP_MAX_DIMS], out_strides[TP_MAX_DIMS];
    int n_outer = 0;
    for (int d = 0; d < self->ndim; d++) {
        if (d == dim) continue;
        osizes[n_outer] = self->sizes[d];
        in_strides[n_outer] = self->strides[d] * in_es;
        out_strides[n_outer++] = res->strides[d] * out_es;
    }
    int64_t len = self->ndim ? self->sizes[dim] : 1;
    int64_t in_step = self->ndim ? self->strides[dim] * in_es : 0;
    int64_t out_step = self->ndim ? res->strides[dim] * out_es : 0;
    const char *in_base = tp__tensor_base(self);
    char *out_base = tp_tensor_data(res);
    tp_dtype src = self->dtype, dst = res->dtype;
    tp_walk wi, wo;
    int64_t ioff, ooff;
    tp__walk_init(&wi, n_outer, osizes, 1, (const int64_t *[]){in_strides});
    tp__walk_init(&wo, n_outer, osizes, 1, (const int64_t *[]){out_strides});
    while (walker_next(&wi, &ioff) && walker_next(&wo, &ooff)) {
        const char *pi = in_base + ioff;
        char *po = out_base + ooff;
        if (tp_dtype_is_float(dst)) {
            double acc = prod ? 1.0 : 0.0;
            for (int64_t j = 0; j < len; j++) {
                double v = load_as_f64(pi + j * in_step, src, dst);
                acc = prod ? acc * v : acc + v;
                tp__store_f64(po + j * out_step, dst, acc);
            }
        } else {
            int64_t acc = prod ? 1 : 0;
            for (int64_t j = 0; j < len; j++) {
                int64_t v = load_as_i64(pi + j * in_step, src, dst);
                acc = prod ? wrap_mul(acc, v) : wrap_add(acc, v);
                tp__store_i64(po + j * out_step, dst, acc);
            }
        }
    }
    return TP_OK;
}

static tp_status kernel_cumsum(const tp_value *args, tp_value *out) { return scan_run(args, out, false); }
static tp_status kernel_cumprod(const tp_value *args, tp_value *out) { return scan_run(args, out, true); }

/* ---- lane ops: scans and order statistics along one dim -----------------
 * cummax, cummin, logcumsumexp, median, nanmedian, kthvalue, mode, msort,
 * diff. Each lane (the elements along `dim` at one position of the other
 * dims) is read into a buffer, computed, and written to the outputs' lanes.
 * Order statistics sort stably with NaN as the largest value (median: a
 * NaN in the lane gives NaN and the first NaN's index; mode: the last index
 * of the value). Deviation: among equal values median/kthvalue report the
 * index of the stable order, where PyTorch's quickselect may pick another
 * of the equal elements (the values agree). */

typedef enum lane_kind {
    L_CUMMAX,
    L_CUMMIN,
    L_LOGCUMSUMEXP,
    L_MEDIAN,
    L_NANMEDIAN,
    L_KTHVALUE,
    L_MODE,
    L_MSORT,
    L_DIFF
} lane_kind;

typedef struct lane_buf {
    bool is_float, is_bool;
    int64_t n;
    double *f;     /* float values */
    int64_t *i;    /* integer values */
    int64_t *perm; /* sort order */
    int64_t *tmp;
    double *rf;    /* results */
    int64_t *ri;
    int64_t *rx;   /* result indices */
} lane_buf;

static bool lane_less(const lane_buf *b, int64_t x, int64_t y) {
    if (!b->is_float) return b->i[x] < b->i[y];
    double u = b->f[x], v = b->f[y];
    if (isnan(u)) return false;
    if (isnan(v)) return true;
    return u < v;
}

static bool lane_equal(const lane_buf *b, int64_t x, int64_t y) {
    if (!b->is_float) return b->i[x] == b->i[y];
    return b->f[x] == b->f[y] || (isnan(b->f[x]) && isnan(b->f[y]));
}

/* Stable merge sort of perm[0..n). */
static void lane_sort(lane_buf *b) {
    int64_t n = b->n, *a = b->perm, *t = b->tmp;
    for (int64_t j = 0; j < n; j++) a[j] = j;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t p = lo, q = mid, k = lo;
            while (p < mid && q < hi) t[k++] = lane_less(b, a[q], a[p]) ? a[q++] : a[p++];
            while (p < mid) t[k++] = a[p++];
            while (q < hi) t[k++] = a[q++];
        }
        memcpy(a, t, (size_t)n * sizeof *a);
    }
}

/* result 0 := element perm position pos (value and index) */
static void lane_pick(lane_buf *b, int64_t src) {
    if (b->is_float) b->rf[0] = b->f[src];
    else b->ri[0] = b->i[src];
    b->rx[0] = src;
}

static double log_add_exp(double a, double b) {
    if (isnan(a) || isnan(b)) return NAN;
    double mn = a < b ? a : b, mx = a < b ? b : a;
    if (mn != mx || isfinite(mn)) return mx + log1p(exp(mn - mx));
    return a;
}

/* Compute one lane; returns the number of results. */
static int64_t lane_compute(lane_buf *b, lane_kind kind, int64_t param) {
    int64_t n = b->n;
    switch (kind) {
    case L_CUMMAX:
    case L_CUMMIN: {
        bool mx = kind == L_CUMMAX;
        int64_t bi = 0;
        for (int64_t j = 0; j < n; j++) {
            if (b->is_float) {
                double x = b->f[j], best = b->f[bi];
                if (j == 0 || isnan(x) || (!isnan(best) && (mx ? x >= best : x <= best))) bi = j;
                b->rf[j] = b->f[bi];
            } else {
                int64_t x = b->i[j], best = b->i[bi];
                if (j == 0 || (mx ? x >= best : x <= best)) bi = j;
                b->ri[j] = b->i[bi];
            }
            b->rx[j] = bi;
        }
        return n;
    }
    case L_LOGCUMSUMEXP: {
        double acc = -INFINITY;
        for (int64_t j = 0; j < n; j++) b->rf[j] = acc = j == 0 ? b->f[0] : log_add_exp(acc, b->f[j]);
        return n;
    }
    case L_MEDIAN:
    case L_NANMEDIAN: {
        int64_t first_nan = -1, count = n;
        if (b->is_float) {
            count = 0;
            for (int64_t j = 0; j < n; j++) {
                if (isnan(b->f[j])) {
                    if (first_nan < 0) first_nan = j;
                } else {
                    count++;
                }
            }
        }
        if (n == 0) {
            b->rf[0] = NAN;
            b->ri[0] = 0;
            b->rx[0] = 0;
            return 1;
        }
        if (first_nan >= 0 && (kind == L_MEDIAN || count == 0)) {
            lane_pick(b, first_nan);
            return 1;
        }
        lane_sort(b);
        lane_pick(b, b->perm[(count - 1) / 2]);
        return 1;
    }
    case L_KTHVALUE:
        lane_sort(b);
        lane_pick(b, b->perm[param - 1]);
        return 1;
    case L_MODE: {
        lane_sort(b);
        int64_t best_start = 0, best_len = 0;
        for (int64_t s = 0; s < n;) {
            int64_t e = s + 1;
            while (e < n && lane_equal(b, b->perm[e], b->perm[s])) e++;
            if (e - s > best_len) {
                best_len = e - s;
                best_start = s;
            }
            s = e;
        }
        lane_pick(b, b->perm[best_start + best_len - 1]); /* the last occurrence */
        return 1;
    }
    case L_MSORT:
        lane_sort(b);
        for (int64_t j = 0; j < n; j++) {
            if (b->is_float) b->rf[j] = b->f[b->perm[j]];
            else b->ri[j] = b->i[b->perm[j]];
        }
        return n;
    case L_DIFF: {
        int64_t len = n;
        for (int64_t r = 0; r < param && len > 0; r++, len--) {
            for (int64_t j = 0; j + 1 < len; j++) {
                if (b->is_float) b->f[j] = b->f[j + 1] - b->f[j];
                else if (b->is_bool) b->i[j] = b->i[j + 1] != b->i[j];
                else b->i[j] = (int64_t)((uint64_t)b->i[j + 1] - (uint64_t)b->i[j]);
            }
        }
        for (int64_t j = 0; j < len; j++) {
            if (b->is_float) b->rf[j] = b->f[j];
            else b->ri[j] = b->i[j];
        }
        return len;
    }
    }
    return 0;
}

/* Run `kind` over every lane along dim of the concatenation of in[0..n_in)
 * (same rank, same sizes except along dim), into out[0] (values, may be
 * NULL) and out[1] (int64 indices, may be NULL), both of the inputs' rank
 * (a reduced dim kept as size 1). Values are stored in out[0]'s dtype; bool
 * diffs are xor (computed as integer differences, stored as != 0). */
static tp_status run_lanes(int n_in, tp_tensor *const *in, int dim, tp_tensor *values, tp_tensor *indices,
                           lane_kind kind, int64_t param) {
    int nd = in[0]->ndim;
    int64_t total = 0;
    for (int k = 0; k < n_in; k++) total += in[k]->sizes[dim];
    tp_dtype dt = in[0]->dtype;
    lane_buf b = {.is_float = tp_dtype_is_float(dt), .is_bool = dt == TP_BOOL, .n = total};
    size_t cap = (size_t)(total > 0 ? total : 1);
    b.f = tp_malloc(cap * sizeof *b.f);
    b.i = tp_malloc(cap * sizeof *b.i);
    b.perm = tp_malloc(cap * sizeof *b.perm);
    b.tmp = tp_malloc(cap * sizeof *b.tmp);
    b.rf = tp_malloc(cap * sizeof *b.rf);
    b.ri = tp_malloc(cap * sizeof *b.ri);
    b.rx = tp_malloc(cap * sizeof *b.rx);
    tp_status st = TP_OK;
    if (!b.f || !b.i || !b.perm || !b.tmp || !b.rf || !b.ri || !b.rx) {
        st = tp_error(TP_ERR_NOMEM, "out of memory for lanes of %" PRId64 " elements", total);
        goto done;
    }
    int64_t outer[TP_MAX_DIMS], idx[TP_MAX_DIMS] = {0}, n_outer = 1;
    for (int d = 0; d < nd; d++) {
        outer[d] = d == dim ? 1 : in[0]->sizes[d];
        n_outer *= outer[d];
    }
    for (int64_t o = 0; o < n_outer; o++) {
        int64_t j = 0;
        for (int k = 0; k < n_in; k++) {
            const tp_tensor *t = in[k];
            int64_t es = (int64_t)tp_dtype_size(t->dtype), off = 0;
            for (int d = 0; d < nd; d++) off += idx[d] * t->strides[d];
            const char *p = tp__tensor_base(t) + off * es;
            for (int64_t q = 0; q < t->sizes[dim]; q++, j++) {
                const char *e = p + q * t->strides[dim] * es;
                if (b.is_float) b.f[j] = tp__load_f64(e, t->dtype);
                else b.i[j] = tp__load_i64(e, t->dtype);
            }
        }
        int64_t nr = lane_compute(&b, kind, param);
        if (values) {
            int64_t es = (int64_t)tp_dtype_size(values->dtype), off = 0;
            for (int d = 0; d < nd; d++) off += idx[d] * values->strides[d];
            char *p = tp__tensor_base(values) + off * es;
            for (int64_t q = 0; q < nr; q++) {
                char *e = p + q * values->strides[dim] * es;
                if (b.is_float) tp__store_f64(e, values->dtype, b.rf[q]);
                else tp__store_i64(e, values->dtype, b.ri[q]);
            }
        }
        if (indices) {
            int64_t off = 0;
            for (int d = 0; d < nd; d++) off += idx[d] * indices->strides[d];
            int64_t *p = (int64_t *)tp__tensor_base(indices) + off;
            for (int64_t q = 0; q < nr; q++) p[q * indices->strides[dim]] = b.rx[q];
        }
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < outer[d]) break;
            idx[d] = 0;
        }
    }
done:
    tp_free(b.f);
    tp_free(b.i);
    tp_free(b.perm);
    tp_free(b.tmp);
    tp_free(b.rf);
    tp_free(b.ri);
    tp_free(b.rx);
    return st;
}

/* t viewed with rank nd: a 0-d t as [1]; a reduced output without keepdim
 * gets a size-1 dim back at `dim`. */
static tp_status lane_view(tp_tensor *t, int nd, int dim, tp_tensor **out) {
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    if (t->ndim == nd) return tp_tensor_as_strided(t, nd, t->sizes, t->strides, t->offset, out);
    for (int d = 0, k = 0; d < nd; d++) {
        if (d == dim) {
            sizes[d] = 1;
            strides[d] = 0;
        } else {
            sizes[d] = t->sizes[k];
            strides[d] = t->strides[k++];
        }
    }
    return tp_tensor_as_strided(t, nd, sizes, strides, t->offset, out);
}

/* self (as a lane view) along dim into values/indices (NULL to skip). */
static tp_status lanes_of(tp_tensor *self, int dim, tp_tensor *values, tp_tensor *indices, lane_kind kind,
                          int64_t param) {
    if (tp_tensor_numel(self) == 0 && kind != L_MEDIAN && kind != L_NANMEDIAN) return TP_OK;
    int nd = self->ndim ? self->ndim : 1;
    tp_tensor *s = NULL, *v = NULL, *ix = NULL;
    tp_status st = lane_view(self, nd, dim, &s);
    if (st == TP_OK && values) st = lane_view(values, nd, dim, &v);
    if (st == TP_OK && indices) st = lane_view(indices, nd, dim, &ix);
    if (st == TP_OK) st = run_lanes(1, &s, dim, v, ix, kind, param);
    tp_tensor_free(s);
    tp_tensor_free(v);
    tp_tensor_free(ix);
    return st;
}

static tp_status lane_dim(const tp_tensor *self, int64_t dim, int *out) {
    return tp__wrap_dim(dim, self->ndim, out);
}

static const char *torch_dtype_name(tp_dtype dtype) {
    static const char *const names[TP_DTYPE_COUNT] = {"Float", "Double", "Half", "BFloat16", "Long",
                                                      "Int",   "Short",  "Char", "Byte",     "Bool"};
    return (unsigned)dtype < TP_DTYPE_COUNT ? names[dtype] : "?";
}

/* cummax / cummin(Tensor self, int dim) -> (values, indices) */
static tp_status infer_cummax(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    int dim;
    TP_TRY(lane_dim(self, tp__arg_int(args, 1), &dim));
    TP_TRY(tp__out_tuple(out, 2));
    TP_TRY(tp__out_like(tp_value_at(out, 0), self->dtype, self));
    return tp__out_like(tp_value_at(out, 1), TP_INT64, self);
}

static tp_status cum_extreme(const tp_value *args, tp_value *out, lane_kind kind) {
    tp_tensor *self = tp__arg_tensor(args, 0);
    int dim;
    TP_TRY(lane_dim(self, tp__arg_int(args, 1), &dim));
    return lanes_of(self, dim, tp__out_at(out, 0), tp__out_at(out, 1), kind, 0);
}
static tp_status kernel_cummax(const tp_value *args, tp_value *out) { return cum_extreme(args, out, L_CUMMAX); }
static tp_status kernel_cummin(const tp_value *args, tp_value *out) { return cum_extreme(args, out, L_CUMMIN); }

/* logcumsumexp(Tensor self, int dim): floating dtypes only */
static tp_status infer_logcumsumexp(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    int dim;
    TP_TRY(lane_dim(self, tp__arg_int(args, 1), &dim));
    TP_CHECK(tp_dtype_is_float(self->dtype), TP_ERR_TYPE, "\"logcumsumexp_out_cpu\" not implemented for '%s'",
             torch_dtype_name(self->dtype));
    return tp__out_like(out, self->dtype, self);
}

static tp_status kernel_logcumsumexp(const tp_value *args, tp_value *out) {
    tp_tensor *self = tp__arg_tensor(args, 0);
    int dim;
    TP_TRY(lane_dim(self, tp__arg_int(args, 1), &dim));
    return lanes_of(self, dim, tp__out_at(out, 0), NULL, L_LOGCUMSUMEXP, 0);
}

/* Shared shape rule of the (values, indices) order statistics along dim. */
static tp_status infer_order_stat(const tp_tensor *self, int dim, bool keepdim, const char *what, tp_value *out) {
    TP_CHECK(self->ndim == 0 || tp__dim_ge(tp__dim(self, dim), 1, "a reduced dim is not empty"), TP_ERR_INDEX,
             "%s(): Expected reduction dim %d to have non-zero size.", what, dim);
    tp_sdim sizes[TP_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < self->ndim; d++) {
        if (d != dim) sizes[n++] = tp__dim(self, d);
        else if (keepdim) sizes[n++] = tp__dimk(1);
    }
    TP_TRY(tp__out_tuple(out, 2));
    TP_TRY(tp__out_dims(tp_value_at(out, 0), self->dtype, n, sizes));
    return tp__out_dims(tp_value_at(out, 1), TP_INT64, n, sizes);
}

/* median / nanmedian(Tensor self, int? dim=None, bool keepdim=False) -> Any:
 * the lower median; without dim a 0-d tensor over every element (NaN when
 * empty), with dim (values, indices). */
static tp_status infer_median(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    TP_CHECK(self->dtype != TP_BOOL, TP_ERR_TYPE, "\"median_cpu\" not implemented for 'Bool'");
    if (tp__arg_is_none(args, 1)) return tp__out_dims(out, self->dtype, 0, NULL);
    int dim;
    TP_TRY(lane_dim(self, tp__arg_int(args, 1), &dim));
    return infer_order_stat(self, dim, tp__arg_bool(args, 2), "median", out);
}

static tp_status median_run(const tp_value *args, tp_value *out, lane_kind kind) {
    tp_tensor *self = tp__arg_tensor(args, 0);
    if (tp__arg_is_none(args, 1)) {
        tp_tensor *flat;
        int64_t n = tp_tensor_numel(self);
        TP_TRY(tp_tensor_reshape(self, 1, &n, &flat));
        tp_status st = lanes_of(flat, 0, tp__out_at(out, 0), NULL, kind, 0);
        tp_tensor_free(flat);
        return st;
    }
    int dim;
    TP_TRY(lane_dim(self, tp__arg_int(args, 1), &dim));
    return lanes_of(self, dim, tp__out_at(out, 0), tp__out_at(out, 1), kind, 0);
}
static tp_status kernel_median(const tp_value *args, tp_value *out) { return median_run(args, out, L_MEDIAN); }
static tp_status kernel_nanmedian(const tp_value *args, tp_value *out) { return median_run(args, out, L_NANMEDIAN); }

/* kthvalue(Tensor self, int k, int dim=-1, bool keepdim=False) */
static tp_status kth_check(const tp_value *args, int *dim) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    TP_CHECK(self->dtype != TP_BOOL, TP_ERR_TYPE, "\"kthvalue_cpu\" not implemented for 'Bool'");
    TP_TRY(lane_dim(self, tp__arg_int(args, 2), dim));
    int64_t k = tp__arg_int(args, 1), size = self->ndim ? self->sizes[*dim] : 1;
    TP_CHECK(k >= 1 && k <= size, TP_ERR_INDEX, "kthvalue(): selected number k out of range for dimension %d",
             *dim);
    return TP_OK;
}

static tp_status infer_kthvalue(const tp_value *args, tp_value *out) {
    int dim;
    TP_TRY(kth_check(args, &dim));
    return infer_order_stat(tp__arg_tensor(args, 0), dim, tp__arg_bool(args, 3), "kthvalue", out);
}

static tp_status kernel_kthvalue(const tp_value *args, tp_value *out) {
    int dim;
    TP_TRY(kth_check(args, &dim));
    return lanes_of(tp__arg_tensor(args, 0), dim, tp__out_at(out, 0), tp__out_at(out, 1), L_KTHVALUE,
                    tp__arg_int(args, 1));
}

/* mode(Tensor self, int dim=-1, bool keepdim=False): the most frequent value
 * (ties: the smallest) and its last index */
static tp_status infer_mode(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    int dim;
    TP_TRY(lane_dim(self, tp__arg_int(args, 1), &dim));
    return infer_order_stat(self, dim, tp__arg_bool(args, 2), "mode", out);
}

static tp_status kernel_mode(const tp_value *args, tp_value *out) {
    tp_tensor *self = tp__arg_tensor(args, 0);
    int dim;
    TP_TRY(lane_dim(self, tp__arg_int(args, 1), &dim));
    return lanes_of(self, dim, tp__out_at(out, 0), tp__out_at(out, 1), L_MODE, 0);
}

/* msort(Tensor self) = sort(self, dim=0).values (NaN last) */
static tp_status infer_msort(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    return tp__out_like(out, self->dtype, self);
}

static tp_status kernel_msort(const tp_value *args, tp_value *out) {
    return lanes_of(tp__arg_tensor(args, 0), 0, tp__out_at(out, 0), NULL, L_MSORT, 0);
}

/* diff(Tensor self, int n=1, int dim=-1, Tensor? prepend=None, Tensor?
 * append=None): the n-th forward difference along dim (n <= 0: none) of
 * cat([prepend, self, append], dim) (bool: xor). */
static tp_status diff_plan(const tp_value *args, int *dim, int64_t *sizes, tp_sdim *dims) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    char b1[320], b2[320];
    TP_CHECK(self->ndim >= 1, TP_ERR_SHAPE, "diff expects input to be at least one-dimensional");
    int64_t n = tp__arg_int(args, 1);
    if (n < 0) n = 0; /* PyTorch 1.13: a negative order returns the input */
    TP_TRY(lane_dim(self, tp__arg_int(args, 2), dim));
    tp_sdim d_[TP_MAX_DIMS];
    tp__dims(self, d_);
    tp_sdim len = d_[*dim];
    for (int k = 3; k <= 4; k++) {
        if (tp__arg_is_none(args, k)) continue;
        const tp_tensor *t = tp__arg_tensor(args, k);
        TP_CHECK(t && t->ndim == self->ndim, TP_ERR_SHAPE, "diff expects %s to have the same number of dims as input",
                 k == 3 ? "prepend" : "append");
        for (int d = 0; d < self->ndim; d++)
            TP_CHECK(d == *dim || tp__dim_eq(tp__dim(t, d), d_[d], "diff's prepend / append match the input"),
                     TP_ERR_SHAPE,
                     "diff expects the shape of tensor %s to match that of input except along the differencing "
                     "dimension; input shape: %s, %s shape: %s",
                     k == 3 ? "prepend" : "append", tp__shape_str(self->ndim, self->sizes, b1, sizeof b1),
                     k == 3 ? "prepend" : "append", tp__shape_str(t->ndim, t->sizes, b2, sizeof b2));
        TP_CHECK(t->dtype == self->dtype, TP_ERR_TYPE, "diff expects %s to have dtype %s, got %s",
                 k == 3 ? "prepend" : "append", tp_dtype_name(self->dtype), tp_dtype_name(t->dtype));
        len = tp__dim_add(len, tp__dim(t, *dim));
    }
    if (len.v > n) {
        tp__dim_ge(len, n + 1, "diff's order is below the length");
        d_[*dim] = tp__dim_addk(len, -n);
    } else {
        if (!tp__dim_is_const(len)) tp__dim_give_up(); /* an empty result only while len <= n */
        d_[*dim] = tp__dimk(0);
    }
    for (int d = 0; d < self->ndim; d++) {
        sizes[d] = d_[d].v;
        if (dims) dims[d] = d_[d];
    }
    return TP_OK;
}

static tp_status infer_diff(const tp_value *args, tp_value *out) {
    int dim;
    int64_t sizes[TP_MAX_DIMS];
    tp_sdim dims[TP_MAX_DIMS];
    TP_TRY(diff_plan(args, &dim, sizes, dims));
    const tp_tensor *self = tp__arg_tensor(args, 0);
    return tp__out_dims(out, self->dtype, self->ndim, dims);
}

static tp_status kernel_diff(const tp_value *args, tp_value *out) {
    int dim;
    int64_t sizes[TP_MAX_DIMS];
    TP_TRY(diff_plan(args, &dim, sizes, NULL));
    tp_tensor *o = tp__out_at(out, 0), *in[3];
    if (tp_tensor_numel(o) == 0) return TP_OK;
    int n_in = 0;
    if (!tp__arg_is_none(args, 3)) in[n_in++] = tp__arg_tensor(args, 3);
    in[n_in++] = tp__arg_tensor(args, 0);
    if (!tp__arg_is_none(args, 4)) in[n_in++] = tp__arg_tensor(args, 4);
    return run_lanes(n_in, in, dim, o, NULL, L_DIFF, tp__arg_int(args, 1));
}

/* ---- nansum / nanmean / aminmax ------------------------------------------
 * nansum(Tensor self, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)
 * nanmean(same): NaN elements are left out (treated as 0 / not counted).
 * aminmax(Tensor self, *, int[]? dim=None, bool keepdim=False) -> (min, max) */

static tp_status kernel_nansum(const tp_value *args, tp_value *out) { return kernel_sum_prod(args, out, R_NANSUM); }

static tp_status infer_nanmean(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    tp_dtype d;
    bool given = arg_dtype(args, 3, &d);
    TP_CHECK(tp_dtype_is_float(given ? d : self->dtype), TP_ERR_TYPE,
             "nanmean(): expected input to have floating point dtype but got %s", tp_dtype_name(self->dtype));
    return infer_mean(args, out);
}

static tp_status kernel_nanmean(const tp_value *args, tp_value *out) {
    return kernel_sum_prod(args, out, R_NANMEAN);
}

static tp_status aminmax_dims(const tp_value *args, reduce_dims *rd) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    /* int[]? because tensorplay records the default as dim=[]; one dim at most */
    if (args[1].kind != TP_VAL_NONE && args[1].kind != TP_VAL_INT)
        TP_CHECK(tp_value_len(&args[1]) <= 1, TP_ERR_INVALID_ARG, "aminmax(): dim must be one int or None");
    TP_TRY(parse_dims(args, 1, self->ndim, rd));
    if (!rd->dim_given && tp_tensor_numel(self) == 0)
        return tp_error(TP_ERR_INVALID_ARG,
                        "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.");
    return check_nonempty_reduction(self, rd);
}

static tp_status infer_aminmax(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    TP_TRY(aminmax_dims(args, &rd));
    int ndim;
    tp_sdim sizes[TP_MAX_DIMS];
    reduced_shape(self, &rd, tp__arg_bool(args, 2), &ndim, sizes);
    TP_TRY(tp__out_tuple(out, 2));
    TP_TRY(tp__out_dims(tp_value_at(out, 0), self->dtype, ndim, sizes));
    return tp__out_dims(tp_value_at(out, 1), self->dtype, ndim, sizes);
}

static tp_status kernel_aminmax(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    TP_TRY(aminmax_dims(args, &rd));
    reduce_job lo = {.kind = R_MIN, .values = tp__out_at(out, 0)};
    reduce_job hi = {.kind = R_MAX, .values = tp__out_at(out, 1)};
    TP_TRY(run_reduction(self, &rd, &lo));
    return run_reduction(self, &rd, &hi);
}

/* renorm(Tensor self, Scalar p, int dim, Scalar maxnorm): each slice
 * self.select(dim, i) whose p-norm exceeds maxnorm is scaled by
 * maxnorm / (norm + 1e-7); floating dtypes, at least 2 dims. */
static tp_status renorm_check(const tp_value *args, int *dim) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    double p = tp_value_as_f64(&args[1]), maxnorm = tp_value_as_f64(&args[3]);
    TP_CHECK(maxnorm >= 0, TP_ERR_INVALID_ARG, "renorm: expected maxnorm to be >= 0 but got %g", maxnorm);
    TP_CHECK(p > 0, TP_ERR_INVALID_ARG, "renorm: non-positive-norm not supported");
    TP_CHECK(self->ndim > 1, TP_ERR_SHAPE, "renorm: input needs at least 2 dimensions, got %d dimensions", self->ndim);
    TP_CHECK(tp_dtype_is_float(self->dtype), TP_ERR_TYPE,
             "linalg.vector_norm: Expected a floating point or complex tensor as input. Got %s",
             torch_dtype_name(self->dtype));
    return tp__wrap_dim(tp__arg_int(args, 2), self->ndim, dim);
}

static tp_status infer_renorm(const tp_value *args, tp_value *out) {
    int dim;
    TP_TRY(renorm_check(args, &dim));
    const tp_tensor *self = tp__arg_tensor(args, 0);
    return tp__out_like(out, self->dtype, self);
}

static tp_status kernel_renorm(const tp_value *args, tp_value *out) {
    int dim;
    TP_TRY(renorm_check(args, &dim));
    tp_tensor *self = tp__arg_tensor(args, 0), *o = tp__out_at(out, 0);
    double p = tp_value_as_f64(&args[1]), maxnorm = tp_value_as_f64(&args[3]);
    for (int64_t i = 0; i < self->sizes[dim]; i++) {
        tp_tensor *sv = NULL, *ov = NULL;
        tp_status st = tp_tensor_select(self, dim, i, &sv);
        if (st == TP_OK) st = tp_tensor_select(o, dim, i, &ov);
        if (st != TP_OK) {
            tp_tensor_free(sv);
            return st;
        }
        double norm = 0;
        tp_iter it;
        tp__iter_init(&it, sv->ndim, sv->sizes, 1, (const tp_tensor *[]){sv});
        while (tp__iter_next(&it)) {
            double a = fabs(tp__load_f64(it.ptr[0], sv->dtype));
            if (isinf(p)) norm = (a > norm || isnan(a)) ? a : norm;
            else norm += p == 1 ? a : p == 2 ? a * a : pow(a, p);
        }
        if (!isinf(p)) norm = p == 1 ? norm : p == 2 ? sqrt(norm) : pow(norm, 1.0 / p);
        double factor = norm > maxnorm ? maxnorm / (norm + 1e-7) : 1.0;
        tp__iter_init(&it, ov->ndim, ov->sizes, 2, (const tp_tensor *[]){ov, sv});
        while (tp__iter_next(&it)) tp__store_f64(it.ptr[0], ov->dtype, tp__load_f64(it.ptr[1], sv->dtype) * factor);
        tp_tensor_free(sv);
        tp_tensor_free(ov);
    }
    return TP_OK;
}

/* ---- registration ------------------------------------------------------ */

/* ---- sum_to_size(Tensor self, int[] size) ------------------------------
 * Sums self down to `size`, which must expand to self's shape: over the
 * leading dims self has beyond size and over the dims where size is 1 and
 * self's is not. As in PyTorch the sum, with its int64 accumulation of bool
 * and integer inputs, happens only when some dim is summed; otherwise the
 * result is a copy of self in self's dtype. */
static tp_status sum_to_plan(const tp_tensor *self, const tp_value *args, reduce_dims *rd, int *nd, tp_sdim *sizes,
                             bool *summed) {
    const tp_value *s = &args[1];
    TP_CHECK(tp_value_is_seq(s), TP_ERR_TYPE, "argument size must be a list of ints, not %s",
             tp_value_kind_name(s->kind));
    int64_t k = tp_value_len(s);
    for (int64_t i = 0; i < k; i++)
        TP_CHECK(tp_value_at(s, i)->kind == TP_VAL_INT, TP_ERR_TYPE, "argument size[%" PRId64 "] must be an int, not %s",
                 i, tp_value_kind_name(tp_value_at(s, i)->kind));
    bool ok = k <= self->ndim;
    int lead = ok ? self->ndim - (int)k : 0;
    tp_sdim want[TP_MAX_DIMS];
    for (int64_t i = 0; ok && i < k; i++) {
        want[i] = tp__value_sdim(tp_value_at(s, i));
        ok = tp__dim_eq(want[i], tp__dim(self, lead + (int)i), "sum_to_size: the size expands to self's") ||
             tp__dim_eqk(want[i], 1, "sum_to_size: the size expands to self's");
    }
    if (!ok) {
        char a[256], b[256];
        int64_t shown[TP_MAX_DIMS + 1];
        int n = k > TP_MAX_DIMS ? TP_MAX_DIMS + 1 : (int)k;
        for (int i = 0; i < n; i++) shown[i] = tp_value_at(s, i)->u.i;
        return tp_error(TP_ERR_SHAPE, "size {%s%s} is not expandable to size {%s}.", tp__shape_str(n, shown, a, sizeof a),
                        k > n ? " ..." : "", tp__shape_str(self->ndim, self->sizes, b, sizeof b));
    }
    memset(rd, 0, sizeof *rd);
    rd->ndim = self->ndim;
    rd->dim_given = true;
    *summed = false;
    for (int d = 0; d < self->ndim; d++) {
        int64_t w = d < lead ? 0 : want[d - lead].v;
        rd->reduced[d] = d < lead || (w == 1 && self->sizes[d] != 1);
        *summed = *summed || rd->reduced[d];
        if (d >= lead) sizes[d - lead] = want[d - lead];
    }
    *nd = (int)k;
    return TP_OK;
}

static tp_status infer_sum_to_size(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    int nd;
    tp_sdim sizes[TP_MAX_DIMS];
    bool summed;
    TP_TRY(sum_to_plan(self, args, &rd, &nd, sizes, &summed));
    return tp__out_dims(out, summed && !tp_dtype_is_float(self->dtype) ? TP_INT64 : self->dtype, nd, sizes);
}

static tp_status kernel_sum_to_size(const tp_value *args, tp_value *out) {
    const tp_tensor *self = tp__arg_tensor(args, 0);
    reduce_dims rd;
    int nd;
    tp_sdim sizes[TP_MAX_DIMS];
    bool summed;
    TP_TRY(sum_to_plan(self, args, &rd, &nd, sizes, &summed));
    tp_tensor *o = tp__out_at(out, 0);
    if (!summed) return tp_tensor_copy_(o, self);
    /* the kept dims in C order are the output's elements in C order */
    reduce_job job = {.kind = R_SUM, .values = o};
    job.compute = o->dtype;
    return run_reduction(self, &rd, &job);
}

/* ---- quantile / nanquantile, cov / corrcoef (issue #13) -----------------
 * Elements are read in logical (row-major) order into double scratch and
 * results written back the same way, so any strides work. */

static void load_logical(const tp_tensor *t, double *dst) {
    int64_t idx[TP_MAX_DIMS] = {0}, n = tp_tensor_numel(t), es = (int64_t)tp_dtype_size(t->dtype);
    const char *base = tp__tensor_base(t);
    for (int64_t k = 0; k < n; k++) {
        int64_t off = 0;
        for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
        dst[k] = tp__load_f64(base + off * es, t->dtype);
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->sizes[d]) break;
            idx[d] = 0;
        }
    }
}

static void store_logical(tp_tensor *t, const double *src) {
    int64_t idx[TP_MAX_DIMS] = {0}, n = tp_tensor_numel(t), es = (int64_t)tp_dtype_size(t->dtype);
    char *base = tp__tensor_base(t);
    for (int64_t k = 0; k < n; k++) {
        int64_t off = 0;
        for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
        tp__store_f64(base + off * es, t->dtype, src[k]);
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->sizes[d]) break;
            idx[d] = 0;
        }
    }
}

static tp_status stats_scratch(double **p, int64_t n) {
    *p = tp_malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    TP_CHECK(*p != NULL, TP_ERR_NOMEM, "out of memory in a statistics kernel");
    return TP_OK;
}

/* quantile / nanquantile(Tensor self, Tensor|Scalar q, int? dim=None, bool
 * keepdim=False, *, str interpolation='linear'): PyTorch's algorithm - sort
 * each lane (NaN last), rank = q (n - 1) in the input's precision (n the
 * count of non-NaN values for nanquantile; a lane with NaN gives NaN for
 * quantile), then lower / higher / nearest (half to even) pick, linear and
 * midpoint lerp (PyTorch's two-sided lerp formula). A 1-D q puts its dim
 * first. */
enum { Q_LINEAR, Q_LOWER, Q_HIGHER, Q_MIDPOINT, Q_NEAREST };

typedef struct quantile_plan {
    int dim; /* -1: all elements */
    int mode;
    bool q_dim; /* a 1-D q tensor */
    int64_t nq;
    int ndim;
    int64_t sizes[TP_MAX_DIMS + 1];
    tp_sdim dims[TP_MAX_DIMS + 1]; /* sizes for the shape rule (dim.h) */
} quantile_plan;

static tp_status plan_quantile(const tp_value *args, quantile_plan *p) {
    static const char *const modes[] = {"linear", "lower", "higher", "midpoint", "nearest"};
    const tp_tensor *t = tp__arg_tensor(args, 0);
    const char *mode = tp__arg_str(args, 4);
    p->mode = -1;
    for (int i = 0; i < 5 && mode; i++)
        if (strcmp(mode, modes[i]) == 0) p->mode = i;
    TP_CHECK(p->mode >= 0, TP_ERR_INVALID_ARG,
             "quantile() interpolation must be one of linear, lower, higher, midpoint or nearest. Got '%s'",
             mode ? mode : "");
    const tp_tensor *q = tp__arg_tensor(args, 1);
    if (!q) {
        double qv = tp__arg_f64(args, 1);
        TP_CHECK(qv >= 0 && qv <= 1, TP_ERR_INVALID_ARG, "quantile() q must be in the range [0, 1] but got %g", qv);
    }
    TP_CHECK(tp_tensor_numel(t) > 0, TP_ERR_INVALID_ARG, "quantile() input tensor must be non-empty");
    TP_CHECK(!q || q->ndim <= 1, TP_ERR_SHAPE, "quantile() q must be a scalar or 1D tensor");
    TP_CHECK(t->dtype == TP_FLOAT32 || t->dtype == TP_FLOAT64, TP_ERR_TYPE,
             "quantile() input tensor must be either float or double dtype");
    TP_CHECK(!q || q->dtype == t->dtype, TP_ERR_TYPE, "quantile() q tensor must be same dtype as the input tensor");
    p->q_dim = q && q->ndim == 1;
    p->nq = q ? tp_tensor_numel(q) : 1;
    p->dim = -1;
    bool keepdim = tp__arg_bool(args, 3);
    p->ndim = 0;
    if (p->q_dim) p->dims[p->ndim++] = tp__dim(q, 0);
    if (!tp__arg_is_none(args, 2) && t->ndim > 0) {
        int d;
        TP_TRY(tp__wrap_dim(tp__arg_int(args, 2), t->ndim, &d));
        p->dim = d;
        for (int i = 0; i < t->ndim; i++)
            if (i != d) p->dims[p->ndim++] = tp__dim(t, i);
            else if (keepdim) p->dims[p->ndim++] = tp__dimk(1);
    } else if (keepdim) {
        for (int i = 0; i < t->ndim; i++) p->dims[p->ndim++] = tp__dimk(1);
    }
    for (int i = 0; i < p->ndim; i++) p->sizes[i] = p->dims[i].v;
    return TP_OK;
}

static tp_status infer_quantile(const tp_value *args, tp_value *out) {
    quantile_plan p;
    TP_TRY(plan_quantile(args, &p));
    return tp__out_dims(out, tp__arg_tensor(args, 0)->dtype, p.ndim, p.dims);
}

static int cmp_nan_last(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    if (isnan(x)) return isnan(y) ? 0 : 1;
    if (isnan(y)) return -1;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* PyTorch's CPU lerp: a + w (b - a) below w = 1/2, b - (b - a)(1 - w) above. */
static double lerp_pt(double a, double b, double w, bool f32) {
    if (f32) {
        float fa = (float)a, fb = (float)b, fw = (float)w;
        return fw < 0.5f ? fa + fw * (fb - fa) : fb - (fb - fa) * (1.0f - fw);
    }
    return w < 0.5 ? a + w * (b - a) : b - (b - a) * (1.0 - w);
}

static tp_status run_quantile(const tp_value *args, tp_value *out, bool ignore_nan) {
    quantile_plan p;
    TP_TRY(plan_quantile(args, &p));
    const tp_tensor *t = tp__arg_tensor(args, 0), *qt = tp__arg_tensor(args, 1);
    tp_tensor *o = tp__out_at(out, 0);
    bool f32 = t->dtype == TP_FLOAT32;
    int64_t n = tp_tensor_numel(t);
    double *x, *qs, *res;
    TP_TRY(stats_scratch(&x, n));
    tp_status st = stats_scratch(&qs, p.nq);
    if (st != TP_OK) {
        tp_free(x);
        return st;
    }
    if (qt) load_logical(qt, qs);
    else qs[0] = tp__arg_f64(args, 1);
    for (int64_t i = 0; i < p.nq; i++) {
        if (f32) qs[i] = (float)qs[i];
        if (!(qs[i] >= 0 && qs[i] <= 1)) st = tp_error(TP_ERR_INVALID_ARG, "quantile() q values must be in the range [0, 1]");
    }
    int64_t lane = p.dim < 0 ? n : t->sizes[p.dim], post = 1;
    for (int d = p.dim + 1; p.dim >= 0 && d < t->ndim; d++) post *= t->sizes[d];
    int64_t lanes = n / (lane > 0 ? lane : 1);
    if (st == TP_OK) st = stats_scratch(&res, p.nq * lanes + lane);
    if (st != TP_OK) {
        tp_free(x);
        tp_free(qs);
        return st;
    }
    double *buf = res + p.nq * lanes;
    load_logical(t, x);
    for (int64_t l = 0; l < lanes; l++) {
        int64_t pre = l / post, c = l % post, base = pre * lane * post + c;
        for (int64_t i = 0; i < lane; i++) buf[i] = x[base + i * post];
        qsort(buf, (size_t)lane, sizeof(double), cmp_nan_last);
        int64_t valid = lane;
        while (valid > 0 && isnan(buf[valid - 1])) valid--;
        for (int64_t k = 0; k < p.nq; k++) {
            double rank;
            if (ignore_nan) {
                rank = qs[k] * (double)(valid - 1);
                if (rank < 0) rank = 0;
            } else {
                rank = valid < lane ? (double)(lane - 1) : qs[k] * (double)(lane - 1);
            }
            if (f32) rank = (float)rank;
            if (p.mode == Q_LOWER) rank = floor(rank);
            else if (p.mode == Q_HIGHER) rank = ceil(rank);
            else if (p.mode == Q_NEAREST) rank = nearbyint(rank);
            int64_t below = (int64_t)rank;
            double v = buf[below];
            if (p.mode == Q_LINEAR || p.mode == Q_MIDPOINT) {
                double w = p.mode == Q_MIDPOINT ? 0.5 : rank - (double)below;
                v = lerp_pt(v, buf[(int64_t)ceil(rank)], w, f32);
            }
            res[k * lanes + l] = v;
        }
    }
    store_logical(o, res);
    tp_free(x);
    tp_free(qs);
    tp_free(res);
    return TP_OK;
}

static tp_status kernel_quantile(const tp_value *args, tp_value *out) { return run_quantile(args, out, false); }
static tp_status kernel_nanquantile(const tp_value *args, tp_value *out) { return run_quantile(args, out, true); }

/* cov(Tensor self, *, int correction=1, Tensor? fweights=None, Tensor?
 * aweights=None): rows are variables, columns observations (a 1-D input is
 * one variable); weights w = fweights * aweights, the mean sum w x / sum w,
 * normalised by sum w - correction (sum w - correction sum w aweights /
 * sum w with aweights), 0 (so inf / NaN) when that is not positive;
 * squeezed as PyTorch's. corrcoef(Tensor self): cov / (s_i s_j), clipped to
 * [-1, 1]. Integer inputs give float32; aweights' dtype promotes. */
static int float_rank(tp_dtype d) { return d == TP_FLOAT64 ? 3 : d == TP_FLOAT32 ? 2 : 1; }

/* The numel of a 0-d or 1-D tensor as a dim. */
static tp_sdim numel_dim(const tp_tensor *t) { return t->ndim == 0 ? tp__dimk(1) : tp__dim(t, 0); }

static tp_status plan_cov(const tp_value *args, bool weights, tp_dtype *dtype, tp_sdim *vars, int64_t *obs) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_CHECK(t->ndim <= 2, TP_ERR_SHAPE,
             "cov(): expected input to have two or fewer dimensions but got an input with %d dimensions", t->ndim);
    *vars = t->ndim < 2 ? tp__dimk(1) : tp__dim(t, 0);
    tp_sdim nobs = t->ndim == 0 ? tp__dimk(1) : tp__dim(t, t->ndim - 1);
    *obs = nobs.v;
    *dtype = tp_dtype_is_float(t->dtype) ? t->dtype : TP_DEFAULT_FLOAT;
    if (!weights) return TP_OK;
    const tp_tensor *fw = tp__arg_tensor(args, 2), *aw = tp__arg_tensor(args, 3);
    if (fw) {
        TP_CHECK(fw->ndim <= 1, TP_ERR_SHAPE,
                 "cov(): expected fweights to have one or fewer dimensions but got fweights with %d dimensions",
                 fw->ndim);
        TP_CHECK(!tp_dtype_is_float(fw->dtype) && fw->dtype != TP_BOOL, TP_ERR_TYPE,
                 "cov(): expected fweights to have integral dtype but got fweights with %s dtype",
                 torch_dtype_name(fw->dtype));
        TP_CHECK(tp__dim_eq(numel_dim(fw), nobs, "cov(): one weight per observation"), TP_ERR_SHAPE,
                 "cov(): expected fweights to have the same numel as there are observations in the input but got "
                 "%" PRId64 " != %" PRId64,
                 tp_tensor_numel(fw), *obs);
    }
    if (aw) {
        TP_CHECK(aw->ndim <= 1, TP_ERR_SHAPE,
                 "cov(): expected aweights to have one or fewer dimensions but got aweights with %d dimensions",
                 aw->ndim);
        TP_CHECK(tp_dtype_is_float(aw->dtype), TP_ERR_TYPE,
                 "cov(): expected aweights to have floating point dtype but got aweights with %s dtype",
                 torch_dtype_name(aw->dtype));
        TP_CHECK(tp__dim_eq(numel_dim(aw), nobs, "cov(): one weight per observation"), TP_ERR_SHAPE,
                 "cov(): expected aweights to have the same numel as there are observations in the input but got "
                 "%" PRId64 " != %" PRId64,
                 tp_tensor_numel(aw), *obs);
        if (float_rank(aw->dtype) > float_rank(*dtype)) *dtype = aw->dtype;
    }
    return TP_OK;
}

static tp_status infer_cov_like(const tp_value *args, tp_value *out, bool weights) {
    tp_dtype dt = TP_FLOAT32;
    tp_sdim v = tp__dimk(0), sizes[2];
    int64_t nobs = 0;
    TP_TRY(plan_cov(args, weights, &dt, &v, &nobs));
    sizes[0] = sizes[1] = v;
    bool one = tp__dim_eqk(v, 1, "cov() of one variable is 0-d"); /* PyTorch squeezes a 1x1 result */
    return tp__out_dims(out, dt, one ? 0 : 2, sizes);
}

static tp_status infer_cov(const tp_value *args, tp_value *out) { return infer_cov_like(args, out, true); }
static tp_status infer_corrcoef(const tp_value *args, tp_value *out) { return infer_cov_like(args, out, false); }

/* The covariance matrix (v x v) into c. */
static tp_status cov_compute(const tp_value *args, bool weights, double *c, int64_t v, int64_t nobs) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    const tp_tensor *fw = weights ? tp__arg_tensor(args, 2) : NULL, *aw = weights ? tp__arg_tensor(args, 3) : NULL;
    double correction = weights ? (double)tp__arg_int(args, 1) : 1.0;
    double *x, *w;
    TP_TRY(stats_scratch(&x, v * nobs + 2 * nobs + v));
    w = x + v * nobs;
    double *aws = w + nobs, *avg = aws + nobs;
    load_logical(t, x);
    for (int64_t i = 0; i < nobs; i++) w[i] = aws[i] = 1.0;
    if (fw) {
        load_logical(fw, w);
        for (int64_t i = 0; i < nobs; i++)
            if (w[i] < 0) {
                tp_free(x);
                return tp_error(TP_ERR_INVALID_ARG, "cov(): fweights cannot be negative");
            }
    }
    if (aw) {
        load_logical(aw, aws);
        for (int64_t i = 0; i < nobs; i++) {
            if (aws[i] < 0) {
                tp_free(x);
                return tp_error(TP_ERR_INVALID_ARG, "cov(): aweights cannot be negative");
            }
            w[i] *= aws[i];
        }
    }
    double wsum = 0.0, waw = 0.0;
    for (int64_t i = 0; i < nobs; i++) {
        wsum += w[i];
        waw += w[i] * aws[i];
    }
    for (int64_t a = 0; a < v; a++) {
        double s = 0.0;
        for (int64_t i = 0; i < nobs; i++) s += x[a * nobs + i] * w[i];
        avg[a] = s / wsum;
    }
    double norm = aw && correction != 0 ? wsum - correction * waw / wsum : wsum - correction;
    if (!(norm > 0)) norm = 0.0;
    for (int64_t a = 0; a < v; a++)
        for (int64_t b = 0; b < v; b++) {
            double s = 0.0;
            for (int64_t i = 0; i < nobs; i++) s += (x[a * nobs + i] - avg[a]) * (x[b * nobs + i] - avg[b]) * w[i];
            c[a * v + b] = s / norm;
        }
    tp_free(x);
    return TP_OK;
}

static tp_status run_cov(const tp_value *args, tp_value *out, bool corr) {
    tp_dtype dt = TP_FLOAT32;
    int64_t nobs = 0;
    tp_sdim vd = tp__dimk(0);
    TP_TRY(plan_cov(args, !corr, &dt, &vd, &nobs));
    int64_t v = vd.v;
    double *c;
    TP_TRY(stats_scratch(&c, v * v));
    tp_status st = cov_compute(args, !corr, c, v, nobs);
    if (st == TP_OK && corr) {
        if (v == 1) c[0] = c[0] / c[0];
        else {
            double *s = tp_malloc((size_t)v * sizeof(double));
            if (!s) st = tp_error(TP_ERR_NOMEM, "out of memory in corrcoef");
            for (int64_t a = 0; s && a < v; a++) s[a] = sqrt(c[a * v + a]);
            for (int64_t a = 0; s && a < v; a++)
                for (int64_t b = 0; b < v; b++) {
                    double r = c[a * v + b] / s[a] / s[b];
                    c[a * v + b] = isnan(r) ? r : r < -1.0 ? -1.0 : r > 1.0 ? 1.0 : r;
                }
            tp_free(s);
        }
    }
    if (st == TP_OK) store_logical(tp__out_at(out, 0), c);
    tp_free(c);
    return st;
}

static tp_status kernel_cov(const tp_value *args, tp_value *out) { return run_cov(args, out, false); }
static tp_status kernel_corrcoef(const tp_value *args, tp_value *out) { return run_cov(args, out, true); }

/* ---- gradient ---------------------------------------------------------------
 * gradient(self, spacing=None, dim=None, edge_order=1) -> Tensor[]: PyTorch's
 * (numpy's) second-order central differences in the interior and one-sided
 * differences of edge_order 1 or 2 at the ends, one result per dim (dim:
 * None or [] for all, an int, or a list). spacing: None or [] (1), one
 * number for every dim, or a list with one number (a uniform step) or one
 * 1-D coordinate tensor (non-uniform) per dim. Computed in double; integer
 * inputs give float32. */
typedef struct {
    int dims[TP_MAX_DIMS];
    int n;
    double step[TP_MAX_DIMS];
    const tp_tensor *coords[TP_MAX_DIMS];
    int edge;
} grad_args;

static tp_status grad_check(const tp_value *args, grad_args *g) {
    memset(g, 0, sizeof *g);
    const tp_tensor *x = tp__arg_tensor(args, 0);
    const tp_value *sp = &args[1], *dm = &args[2];
    g->edge = (int)tp__arg_int(args, 3);
    TP_CHECK(g->edge == 1 || g->edge == 2, TP_ERR_INVALID_ARG, "torch.gradient only supports edge_order=1 and edge_order=2.");
    TP_CHECK(x->dtype != TP_BOOL, TP_ERR_TYPE, "torch.gradient does not support bool input");
    bool seen[TP_MAX_DIMS] = {false};
    if (dm->kind == TP_VAL_NONE || ((dm->kind == TP_VAL_LIST || dm->kind == TP_VAL_TUPLE) && tp_value_len(dm) == 0)) {
        for (int d = 0; d < x->ndim; d++) g->dims[g->n++] = d;
    } else {
        int64_t cnt = dm->kind == TP_VAL_INT ? 1 : dm->kind == TP_VAL_LIST || dm->kind == TP_VAL_TUPLE ? tp_value_len(dm) : -1;
        TP_CHECK(cnt >= 1 && cnt <= x->ndim, TP_ERR_TYPE, "torch.gradient: dim must be an int or a list of ints");
        for (int64_t i = 0; i < cnt; i++) {
            const tp_value *v = dm->kind == TP_VAL_INT ? dm : tp_value_at(dm, i);
            TP_CHECK(v->kind == TP_VAL_INT, TP_ERR_TYPE, "torch.gradient: dim must be an int or a list of ints");
            int d;
            TP_TRY(tp__wrap_dim(v->u.i, x->ndim, &d));
            TP_CHECK(!seen[d], TP_ERR_INVALID_ARG, "dim %d appears multiple times in the list of dims", d);
            seen[d] = true;
            g->dims[g->n++] = d;
        }
    }
    for (int i = 0; i < g->n; i++) g->step[i] = 1.0;
    bool is_list = sp->kind == TP_VAL_LIST || sp->kind == TP_VAL_TUPLE;
    if (sp->kind == TP_VAL_INT || sp->kind == TP_VAL_FLOAT || (is_list && tp_value_len(sp) == 1 && g->n > 1 &&
                                                               tp_value_at(sp, 0)->kind != TP_VAL_TENSOR)) {
        double h = tp_value_as_f64(is_list ? tp_value_at(sp, 0) : sp);
        for (int i = 0; i < g->n; i++) g->step[i] = h;
    } else if (is_list && tp_value_len(sp) > 0) {
        TP_CHECK(tp_value_len(sp) == g->n, TP_ERR_INVALID_ARG,
                 "torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim arguments to "
                 "have the same length, but got a spacing argument of length %" PRId64 " and a dim argument of length %d.",
                 tp_value_len(sp), g->n);
        for (int i = 0; i < g->n; i++) {
            const tp_value *v = tp_value_at(sp, i);
            if (v->kind == TP_VAL_TENSOR) {
                const tp_tensor *c = v->u.tensor;
                int d = g->dims[i];
                TP_CHECK(c->ndim == 1 && c->sizes[0] == x->sizes[d], TP_ERR_SHAPE,
                         "torch.gradient expected each tensor to be on the same device and a 1-D tensor of the "
                         "dimension's size (%" PRId64 ") as spacing for dim %d",
                         x->sizes[d], d);
                TP_CHECK(c->dtype != TP_BOOL, TP_ERR_TYPE, "torch.gradient: coordinates must be numbers");
                g->coords[i] = c;
            } else {
                TP_CHECK(v->kind == TP_VAL_INT || v->kind == TP_VAL_FLOAT, TP_ERR_TYPE,
                         "torch.gradient: spacing must hold numbers or 1-D tensors");
                g->step[i] = tp_value_as_f64(v);
            }
        }
    } else {
        TP_CHECK(sp->kind == TP_VAL_NONE || is_list, TP_ERR_TYPE, "torch.gradient: spacing must be a number or a list");
    }
    for (int i = 0; i < g->n; i++)
        TP_CHECK(x->sizes[g->dims[i]] >= g->edge + 1, TP_ERR_INVALID_ARG,
                 "torch.gradient expected each dimension size to be at least edge_order+1");
    return TP_OK;
}

static tp_status infer_gradient(const tp_value *args, tp_value *out) {
    grad_args g;
    TP_TRY(grad_check(args, &g));
    const tp_tensor *x = tp__arg_tensor(args, 0);
    tp_dtype dt = tp_dtype_is_float(x->dtype) ? x->dtype : TP_DEFAULT_FLOAT;
    TP_TRY(tp__out_list(out, g.n));
    for (int i = 0; i < g.n; i++) TP_TRY(tp__out_like(tp_value_at(out, i), dt, x));
    return TP_OK;
}

static tp_status kernel_gradient(const tp_value *args, tp_value *out) {
    grad_args g;
    TP_TRY(grad_check(args, &g));
    const tp_tensor *x = tp__arg_tensor(args, 0);
    tp_tensor *xd = NULL, *res = NULL;
    TP_TRY(tp_tensor_to(x, TP_FLOAT64, &xd));
    const double *f = tp_tensor_data(xd);
    int64_t numel = tp_tensor_numel(xd);
    tp_status st = tp_tensor_zeros(TP_FLOAT64, x->ndim, x->sizes, &res);
    double *r = st == TP_OK ? tp_tensor_data(res) : NULL;
    for (int i = 0; i < g.n && st == TP_OK; i++) {
        int d = g.dims[i];
        int64_t n = x->sizes[d], inner = 1;
        for (int q = d + 1; q < x->ndim; q++) inner *= x->sizes[q];
        tp_tensor *ct = NULL; /* the coordinates in double */
        if (g.coords[i] && (st = tp_tensor_to(g.coords[i], TP_FLOAT64, &ct)) != TP_OK) break;
        const double *c = ct ? tp_tensor_data(ct) : NULL;
        double h = g.step[i];
        int64_t lines = numel > 0 ? numel / (n * inner) : 0;
        for (int64_t line = 0; line < lines * inner; line++) { /* each line along d: (outer, inner) */
            int64_t base = (line / inner) * n * inner + line % inner;
            const double *fl = f + base;
            double *rl = r + base;
#define F(j) fl[(j) * inner]
            for (int64_t j = 1; j + 1 < n; j++) {
                if (!c) {
                    rl[j * inner] = (F(j + 1) - F(j - 1)) / (2.0 * h);
                } else {
                    double hl = c[j] - c[j - 1], hr = c[j + 1] - c[j];
                    double a = -hr / (hl * (hl + hr)), b = (hr - hl) / (hl * hr), e = hl / (hr * (hl + hr));
                    rl[j * inner] = a * F(j - 1) + b * F(j) + e * F(j + 1);
                }
            }
            if (g.edge == 1) {
                rl[0] = (F(1) - F(0)) / (c ? c[1] - c[0] : h);
                rl[(n - 1) * inner] = (F(n - 1) - F(n - 2)) / (c ? c[n - 1] - c[n - 2] : h);
            } else if (!c) {
                rl[0] = (-1.5 * F(0) + 2.0 * F(1) - 0.5 * F(2)) / h;
                rl[(n - 1) * inner] = (0.5 * F(n - 3) - 2.0 * F(n - 2) + 1.5 * F(n - 1)) / h;
            } else {
                double d1 = c[1] - c[0], d2 = c[2] - c[1];
                rl[0] = -(2.0 * d1 + d2) / (d1 * (d1 + d2)) * F(0) + (d1 + d2) / (d1 * d2) * F(1) -
                        d1 / (d2 * (d1 + d2)) * F(2);
                d1 = c[n - 2] - c[n - 3];
                d2 = c[n - 1] - c[n - 2];
                rl[(n - 1) * inner] = d2 / (d1 * (d1 + d2)) * F(n - 3) - (d2 + d1) / (d1 * d2) * F(n - 2) +
                                      (2.0 * d2 + d1) / (d2 * (d1 + d2)) * F(n - 1);
            }
#undef F
        }
        tp_tensor_free(ct);
        st = tp_tensor_copy_(tp__out_at(out, i), res);
    }
    tp_tensor_free(xd);
    tp_tensor_free(res);
    return st;
}

/* ---- segment_reduce -------------------------------------------------------
 * segment_reduce(data, reduce, lengths=None, indices=None, offsets=None,
 * axis=0, unsafe=False, initial=None): PyTorch's. lengths (or offsets, one
 * longer, their differences) hold the segment lengths along `axis`, with
 * data's dims before the axis as batch dims (lengths.ndim == axis + 1);
 * the result replaces data's axis by the number of segments. Per segment
 * (in double): sum / prod / max / min of its values, started from initial
 * when given; mean = (initial + sum) / count. An empty segment is initial,
 * else 0 (sum), 1 (prod), NaN (mean), -inf (max), +inf (min). The lengths
 * are checked whatever unsafe says (non-negative, summing to the axis). */
typedef enum { SEG_SUM, SEG_MEAN, SEG_MAX, SEG_MIN, SEG_PROD } seg_kind;

typedef struct {
    const tp_tensor *data, *lengths, *offsets;
    seg_kind kind;
    int axis;
    int64_t S; /* segments per row */
} seg_args;

static tp_status seg_check(const tp_value *args, seg_args *a) {
    memset(a, 0, sizeof *a);
    a->data = tp__arg_tensor(args, 0);
    const char *r = tp__arg_str(args, 1);
    static const char *const names[] = {"sum", "mean", "max", "min", "prod"};
    int k = 0;
    while (k < 5 && strcmp(r, names[k]) != 0) k++;
    TP_CHECK(k < 5, TP_ERR_INVALID_ARG, "unsupported reduction given! %s", r);
    a->kind = (seg_kind)k;
    a->lengths = tp__arg_tensor(args, 2);
    const tp_tensor *indices = tp__arg_tensor(args, 3);
    a->offsets = tp__arg_tensor(args, 4);
    TP_CHECK(!indices, TP_ERR_UNSUPPORTED, "segment_reduce(): indices based reduction is not supported yet.");
    TP_CHECK(a->lengths || a->offsets, TP_ERR_INVALID_ARG, "segment_reduce(): Either lengths or offsets must be defined");
    TP_CHECK(tp_dtype_is_float(a->data->dtype), TP_ERR_TYPE, "\"_segment_reduce_cpu\" not implemented for '%s'",
             tp_dtype_name(a->data->dtype));
    const tp_tensor *l = a->lengths ? a->lengths : a->offsets;
    TP_CHECK(tp_dtype_is_int(l->dtype), TP_ERR_TYPE, "segment_reduce(): %s must be int32 or int64, got %s",
             a->lengths ? "lengths" : "offsets", tp_dtype_name(l->dtype));
    int axis;
    TP_TRY(tp__wrap_dim(tp__arg_int(args, 5), a->data->ndim, &axis));
    a->axis = axis;
    TP_CHECK(l->ndim - 1 == axis, TP_ERR_SHAPE, "segment_reduce(): Expected axis to be the last dimension of %s but got %d.",
             a->lengths ? "lengths" : "offsets", axis);
    for (int d = 0; d < axis; d++)
        TP_CHECK(tp__dim_eq(tp__dim(l, d), tp__dim(a->data, d), "segment_reduce batch"), TP_ERR_SHAPE,
                 "segment_reduce(): %s must have data's dims before the axis (dim %d: %" PRId64 " vs %" PRId64 ")",
                 a->lengths ? "lengths" : "offsets", d, l->sizes[d], a->data->sizes[d]);
    a->S = l->sizes[axis] - (a->lengths ? 0 : 1);
    TP_CHECK(a->S >= 0, TP_ERR_SHAPE, "segment_reduce(): offsets must hold at least one value per row");
    return TP_OK;
}

static tp_status infer_segment_reduce(const tp_value *args, tp_value *out) {
    seg_args a;
    TP_TRY(seg_check(args, &a));
    tp_sdim d[TP_MAX_DIMS];
    for (int i = 0; i < a.data->ndim; i++) d[i] = tp__dim(a.data, i);
    d[a.axis] = tp__dimk(a.S);
    return tp__out_dims(out, a.data->dtype, a.data->ndim, d);
}

static tp_status kernel_segment_reduce(const tp_value *args, tp_value *out) {
    seg_args a;
    TP_TRY(seg_check(args, &a));
    tp_tensor *o = tp__out_at(out, 0);
    bool has_init = !tp__arg_is_none(args, 7);
    double init = has_init ? tp__arg_f64(args, 7) : 0.0;
    tp_tensor *x = NULL, *lt = NULL;
    tp_status st = tp_tensor_to(a.data, TP_FLOAT64, &x);
    if (st == TP_OK) st = tp_tensor_to(a.lengths ? a.lengths : a.offsets, TP_INT64, &lt);
    if (st != TP_OK) {
        tp_tensor_free(x);
        return st;
    }
    const double *xv = tp_tensor_data(x);
    const int64_t *lv = tp_tensor_data(lt);
    int64_t outer = 1, inner = 1, n = a.data->sizes[a.axis];
    for (int d = 0; d < a.axis; d++) outer *= a.data->sizes[d];
    for (int d = a.axis + 1; d < a.data->ndim; d++) inner *= a.data->sizes[d];
    int64_t lrow = a.S + (a.lengths ? 0 : 1);
    char *ob = tp__tensor_base(o);
    for (int64_t r = 0; r < outer && st == TP_OK; r++) {
        const int64_t *row = lv + r * lrow;
        int64_t total = 0;
        for (int64_t s = 0; s < a.S && st == TP_OK; s++) {
            int64_t len = a.lengths ? row[s] : row[s + 1] - row[s];
            if (len < 0) st = tp_error(TP_ERR_INVALID_ARG, a.lengths ? "lengths contains negative value!"
                                                                     : "offsets must be non-decreasing");
            total += len;
        }
        if (st == TP_OK && !a.lengths && row[0] != 0)
            st = tp_error(TP_ERR_INVALID_ARG, "segment_reduce(): offsets must start at 0, got %" PRId64, row[0]);
        if (st == TP_OK && total != n)
            st = tp_error(TP_ERR_INVALID_ARG, "segment_reduce(): Expected all rows of lengths along axis to sum to "
                                              "data.size(lengths.dim()-1) when !unsafe.");
        int64_t start = 0;
        for (int64_t s = 0; s < a.S && st == TP_OK; s++) {
            int64_t len = a.lengths ? row[s] : row[s + 1] - row[s];
            for (int64_t i = 0; i < inner; i++) {
                double acc;
                switch (a.kind) {
                case SEG_MAX: acc = has_init ? init : -INFINITY; break;
                case SEG_MIN: acc = has_init ? init : INFINITY; break;
                case SEG_PROD: acc = has_init ? init : 1.0; break;
                default: acc = has_init ? init : 0.0; break;
                }
                for (int64_t j = start; j < start + len; j++) {
                    double v = xv[(r * n + j) * inner + i];
                    switch (a.kind) {
                    case SEG_MAX: acc = isnan(v) || v > acc ? v : acc; break;
                    case SEG_MIN: acc = isnan(v) || v < acc ? v : acc; break;
                    case SEG_PROD: acc *= v; break;
                    default: acc += v; break;
                    }
                    if (isnan(acc) && (a.kind == SEG_MAX || a.kind == SEG_MIN)) break;
                }
                if (a.kind == SEG_MEAN) acc = len > 0 ? acc / (double)len : has_init ? init : NAN;
                /* the output element [r..., s, i...] through o's strides */
                int64_t off = 0, rem = r;
                for (int d = a.axis - 1; d >= 0; d--) {
                    off += (rem % o->sizes[d]) * o->strides[d];
                    rem /= o->sizes[d];
                }
                off += s * o->strides[a.axis];
                rem = i;
                for (int d = o->ndim - 1; d > a.axis; d--) {
                    off += (rem % o->sizes[d]) * o->strides[d];
                    rem /= o->sizes[d];
                }
                tp__store_f64(ob + off * (int64_t)tp_dtype_size(o->dtype), o->dtype, acc);
            }
            start += len;
        }
    }
    tp_tensor_free(x);
    tp_tensor_free(lt);
    return st;
}

void tp__register_reduce_ops(void) {
    tp__register_op(TP_OP_GRADIENT, "gradient(Tensor self, Any spacing=None, Any dim=None, int edge_order=1) -> Tensor[]",
                    0, infer_gradient, kernel_gradient);
    tp__register_op(TP_OP_SEGMENT_REDUCE,
                    "segment_reduce(Tensor data, str reduce, Tensor? lengths=None, Tensor? indices=None, "
                    "Tensor? offsets=None, int axis=0, bool unsafe=False, Scalar? initial=None) -> Tensor",
                    0, infer_segment_reduce, kernel_segment_reduce);
    tp__register_op(TP_OP_SUM,
                    "sum(Tensor self, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", 0,
                    infer_sum, kernel_sum);
    tp__register_op(TP_OP_MEAN,
                    "mean(Tensor self, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
                    0, infer_mean, kernel_mean);
    tp__register_op(TP_OP_PROD,
                    "prod(Tensor self, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
                    0, infer_sum, kernel_prod);
    tp__register_op(TP_OP_AMAX, "amax(Tensor self, int[] dim=[], bool keepdim=False) -> Tensor", 0, infer_amax,
                    kernel_amax);
    tp__register_op(TP_OP_AMIN, "amin(Tensor self, int[] dim=[], bool keepdim=False) -> Tensor", 0, infer_amax,
                    kernel_amin);
    tp__register_op(TP_OP_MAX, "max(Tensor self, int? dim=None, bool keepdim=False) -> Any", 0, infer_max,
                    kernel_max);
    tp__register_op(TP_OP_MIN, "min(Tensor self, int? dim=None, bool keepdim=False) -> Any", 0, infer_max,
                    kernel_min);
    tp__register_op(TP_OP_ARGMAX, "argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor", 0,
                    infer_argmax, kernel_argmax);
    tp__register_op(TP_OP_ARGMIN, "argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor", 0,
                    infer_argmax, kernel_argmin);
    tp__register_op(TP_OP_VAR,
                    "var(Tensor self, int[]? dim=None, *, Scalar? correction=None, bool keepdim=False, "
                    "bool? unbiased=None) -> Tensor",
                    0, infer_var, kernel_var);
    tp__register_op(TP_OP_STD,
                    "std(Tensor self, int[]? dim=None, *, Scalar? correction=None, bool keepdim=False, "
                    "bool? unbiased=None) -> Tensor",
                    0, infer_var, kernel_std);
    tp__register_op(TP_OP_NORM,
                    "norm(Tensor self, Scalar? p=2, int[]? dim=None, bool keepdim=False, *, "
                    "ScalarType? dtype=None) -> Tensor",
                    0, infer_norm, kernel_norm);
    tp__register_op(TP_OP_LOGSUMEXP, "logsumexp(Tensor self, int[] dim, bool keepdim=False) -> Tensor", 0,
                    infer_logsumexp, kernel_logsumexp);
    tp__register_op(TP_OP_ANY, "any(Tensor self, int? dim=None, bool keepdim=False) -> Tensor", 0, infer_any,
                    kernel_any);
    tp__register_op(TP_OP_ALL, "all(Tensor self, int? dim=None, bool keepdim=False) -> Tensor", 0, infer_any,
                    kernel_all);
    tp__register_op(TP_OP_CUMSUM, "cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", 0,
                    infer_cumsum, kernel_cumsum);
    tp__register_op(TP_OP_CUMPROD, "cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", 0,
                    infer_cumsum, kernel_cumprod);
    tp__register_op(TP_OP_COUNT_NONZERO, "count_nonzero(Tensor self, int[]? dim=None) -> Tensor", 0,
                    infer_count_nonzero, kernel_count_nonzero);
    tp__register_op(TP_OP_SUM_TO_SIZE, "sum_to_size(Tensor self, int[] size) -> Tensor", 0, infer_sum_to_size,
                    kernel_sum_to_size);
    tp__register_op(TP_OP_NANSUM,
                    "nansum(Tensor self, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
                    0, infer_sum, kernel_nansum);
    tp__register_op(TP_OP_NANMEAN,
                    "nanmean(Tensor self, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
                    0, infer_nanmean, kernel_nanmean);
    tp__register_op(TP_OP_AMINMAX,
                    "aminmax(Tensor self, *, int[]? dim=None, bool keepdim=False) -> (Tensor, Tensor)", 0,
                    infer_aminmax, kernel_aminmax);
    tp__register_op(TP_OP_CUMMAX, "cummax(Tensor self, int dim) -> (Tensor, Tensor)", 0, infer_cummax,
                    kernel_cummax);
    tp__register_op(TP_OP_CUMMIN, "cummin(Tensor self, int dim) -> (Tensor, Tensor)", 0, infer_cummax,
                    kernel_cummin);
    tp__register_op(TP_OP_LOGCUMSUMEXP, "logcumsumexp(Tensor self, int dim) -> Tensor", 0, infer_logcumsumexp,
                    kernel_logcumsumexp);
    tp__register_op(TP_OP_MEDIAN, "median(Tensor self, int? dim=None, bool keepdim=False) -> Any", 0, infer_median,
                    kernel_median);
    tp__register_op(TP_OP_NANMEDIAN, "nanmedian(Tensor self, int? dim=None, bool keepdim=False) -> Any", 0,
                    infer_median, kernel_nanmedian);
    tp__register_op(TP_OP_KTHVALUE,
                    "kthvalue(Tensor self, int k, int dim=-1, bool keepdim=False) -> (Tensor, Tensor)", 0,
                    infer_kthvalue, kernel_kthvalue);
    tp__register_op(TP_OP_MODE, "mode(Tensor self, int dim=-1, bool keepdim=False) -> (Tensor, Tensor)", 0,
                    infer_mode, kernel_mode);
    tp__register_op(TP_OP_MSORT, "msort(Tensor self) -> Tensor", 0, infer_msort, kernel_msort);
    tp__register_op(TP_OP_DIFF,
                    "diff(Tensor self, int n=1, int dim=-1, Tensor? prepend=None, Tensor? append=None) -> Tensor", 0,
                    infer_diff, kernel_diff);
    tp__register_op(TP_OP_RENORM, "renorm(Tensor self, Scalar p, int dim, Scalar maxnorm) -> Tensor", 0,
                    infer_renorm, kernel_renorm);
    /* quantiles and covariances (issue #13) */
    tp__register_op(TP_OP_QUANTILE,
                    "quantile(Tensor self, Tensor|Scalar q, int? dim=None, bool keepdim=False, *, "
                    "str interpolation='linear') -> Tensor",
                    0, infer_quantile, kernel_quantile);
    tp__register_op(TP_OP_NANQUANTILE,
                    "nanquantile(Tensor self, Tensor|Scalar q, int? dim=None, bool keepdim=False, *, "
                    "str interpolation='linear') -> Tensor",
                    0, infer_quantile, kernel_nanquantile);
    tp__register_op(TP_OP_COV,
                    "cov(Tensor self, *, int correction=1, Tensor? fweights=None, Tensor? aweights=None) -> Tensor", 0,
                    infer_cov, kernel_cov);
    tp__register_op(TP_OP_CORRCOEF, "corrcoef(Tensor self) -> Tensor", 0, infer_corrcoef, kernel_corrcoef);
}
