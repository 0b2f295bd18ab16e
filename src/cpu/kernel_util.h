/*
 * kernel_util.h - helpers shared by the reference kernels and shape rules:
 * argument accessors, output construction, type promotion, broadcasting.
 */
#ifndef TPEXPORT_KERNEL_UTIL_H
#define TPEXPORT_KERNEL_UTIL_H

#include <math.h>
#include <string.h>

#include "../ops/dim.h"
#include "../ops/ops_impl.h"

/* ---- bound-argument accessors (args come from tp_op_bind: types already
 * checked against the schema, so these do not fail) ---- */
static inline tp_tensor *tp__arg_tensor(const tp_value *args, int i) {
    return args[i].kind == TP_VAL_TENSOR ? args[i].u.tensor : NULL;
}
static inline bool tp__arg_is_none(const tp_value *args, int i) { return args[i].kind == TP_VAL_NONE; }
static inline int64_t tp__arg_int(const tp_value *args, int i) { return tp_value_as_i64(&args[i]); }
static inline double tp__arg_f64(const tp_value *args, int i) { return tp_value_as_f64(&args[i]); }
static inline bool tp__arg_bool(const tp_value *args, int i) { return tp_value_as_i64(&args[i]) != 0; }
static inline const char *tp__arg_str(const tp_value *args, int i) {
    return args[i].kind == TP_VAL_STR ? args[i].u.s : NULL;
}

/* Read an int list argument into out[max]; *n receives its length. A list of
 * one element is expanded to `expand_to` copies when expand_to > 1 (PyTorch's
 * int[2] accepting a single int). TP_ERR_INVALID_ARG if longer than max or
 * of the wrong length when expand_to > 0. `what` names the argument. */
TP_HIDDEN tp_status tp__arg_ints(const tp_value *args, int i, const char *what, int64_t *out, int max,
                                 int expand_to, int *n);

/* tp__arg_ints as dims (dim.h): symbolic ints keep their expressions. */
TP_HIDDEN tp_status tp__arg_sdims(const tp_value *args, int i, const char *what, tp_sdim *out, int max, int expand_to,
                                  int *n);

/* ---- outputs ---- */
/* Set *out to a meta tensor value (infer) - replaces what *out held. Rules
 * that the symbolic pass can follow use tp__out_dims / tp__out_like (dim.h). */
TP_HIDDEN tp_status tp__out_tensor(tp_value *out, tp_dtype dtype, int ndim, const int64_t *sizes);
/* Set *out to a tuple/list of n None items; fill each with tp__out_tensor. */
TP_HIDDEN tp_status tp__out_tuple(tp_value *out, int n);
TP_HIDDEN tp_status tp__out_list(tp_value *out, int64_t n);
/* The i-th output tensor of a kernel's *out (tensor, or item i of a tuple). */
static inline tp_tensor *tp__out_at(tp_value *out, int i) {
    if (out->kind == TP_VAL_TENSOR) return i == 0 ? out->u.tensor : NULL;
    tp_value *v = tp_value_at(out, i);
    return v && v->kind == TP_VAL_TENSOR ? v->u.tensor : NULL;
}

/* ---- broadcasting ---- */
/* Element strides of t's leading nt dims against nb broadcast dims of
 * sizes batch (right-aligned): 0 where t lacks the dim or has size 1.
 * Kernels walking a broadcast batch (matrix products, attention, the
 * elementwise variants with nt = ndim) share it. */
static inline void tp__broadcast_strides(const tp_tensor *t, int nt, int nb, const int64_t *batch, int64_t *strides) {
    for (int i = 0; i < nb; i++) {
        int ti = nt - nb + i;
        strides[i] = (ti >= 0 && t->sizes[ti] != 1 && batch[i] != 1) ? t->strides[ti] : 0;
    }
}

/* ---- dtypes ---- */
/* PyTorch's result_type over tensors and Python scalars (None values are
 * skipped): dimensioned tensors > 0-d tensors > scalars, by category. */
TP_HIDDEN tp_dtype tp__result_type(const tp_value *const *vals, int n);
/* Default float dtype (float32) used when an int op produces a float. */
#define TP_DEFAULT_FLOAT TP_FLOAT32
/* The dtype a scalar value would have as a tensor: bool, int64, float32. */
TP_HIDDEN tp_dtype tp__scalar_dtype(const tp_value *v);

/* A tensor holding value v (a number) as a 0-d tensor of dtype; or v's
 * tensor retained when it already is one. Caller frees. */
TP_HIDDEN tp_status tp__as_tensor(const tp_value *v, tp_dtype dtype, tp_tensor **out);

/* Convert a number value (bool, int, float) or a one-element tensor value to
 * one element of `dtype`, written to `elem` (tp_dtype_size(dtype) bytes), with
 * PyTorch's checked Scalar conversion (as in fill_ / full / masked_fill):
 * float -> int truncates; values outside the target's range (and NaN or inf
 * into an integer type) give TP_ERR_INVALID_ARG "value V cannot be converted
 * to type T without overflow"; uint8 accepts ints down to -255 (wrapping);
 * bool targets take (v != 0). */
TP_HIDDEN tp_status tp__scalar_to_elem(const tp_value *v, tp_dtype dtype, void *elem);


/* Argument i as a tensor (*out set on every path); TP_ERR_TYPE naming
 * `what` otherwise. */
static inline tp_status tp__need_tensor(const tp_value *args, int i, const char *what, tp_tensor **out) {
    tp_tensor *t = tp__arg_tensor(args, i);
    *out = t;
    TP_CHECK(t != NULL, TP_ERR_TYPE, "%s must be a Tensor, not %s", what, tp_value_kind_name(args[i].kind));
    return TP_OK;
}

/* Shared scalar functions of unary.c: the Hurwitz zeta sum_k (k + q)^-s for
 * s > 1 (Euler-Maclaurin; inf at the poles q = 0, -1, ...; NaN at q = inf),
 * and a thread-safe lgamma (no write to the global signgam). */
TP_HIDDEN double tp__hurwitz_zeta(double s, double q);
TP_HIDDEN double tp__lgamma(double x);

/* Kernels read data: refuse meta tensors (shape-only) instead of crashing. */
static inline tp_status tp__has_data(const tp_tensor *t, const char *what) {
    TP_CHECK(!t || !tp_tensor_is_meta(t), TP_ERR_INVALID_ARG, "%s is a meta tensor (it has no data)", what);
    return TP_OK;
}

#endif
