/*
 * kernel_util.c - shared helpers for shape rules and reference kernels.
 */
#include <inttypes.h>

#include "kernel_util.h"

tp_status tp__arg_ints(const tp_value *args, int i, const char *what, int64_t *out, int max, int expand_to,
                       int *n) {
    const tp_value *v = &args[i];
    int64_t len = tp_value_len(v);
    if (v->kind == TP_VAL_INT) {
        out[0] = v->u.i;
        len = 1;
    } else {
        TP_CHECK(tp_value_is_seq(v), TP_ERR_TYPE, "%s must be a list of ints", what);
        TP_CHECK(len <= max, TP_ERR_INVALID_ARG, "%s has %" PRId64 " entries (at most %d allowed)", what, len, max);
        for (int64_t k = 0; k < len; k++) {
            const tp_value *e = &v->u.seq.items[k];
            TP_CHECK(e->kind == TP_VAL_INT || e->kind == TP_VAL_BOOL, TP_ERR_TYPE, "%s[%" PRId64 "] must be an int, not %s",
                     what, k, tp_value_kind_name(e->kind));
            out[k] = tp_value_as_i64(e);
        }
    }
    if (expand_to > 0) {
        if (len == 1 && expand_to > 1) {
            TP_CHECK(expand_to <= max, TP_ERR_INVALID_ARG, "%s: too many entries", what);
            for (int k = 1; k < expand_to; k++) out[k] = out[0];
            len = expand_to;
        }
        TP_CHECK(len == expand_to, TP_ERR_INVALID_ARG, "%s must have %d entries, got %" PRId64, what, expand_to, len);
    }
    *n = (int)len;
    return TP_OK;
}

tp_status tp__out_tensor(tp_value *out, tp_dtype dtype, int ndim, const int64_t *sizes) {
    tp_tensor *t;
    TP_TRY(tp_tensor_meta(dtype, ndim, sizes, &t));
    tp_value_clear(out);
    *out = tp_value_tensor(t);
    return TP_OK;
}

tp_status tp__out_tuple(tp_value *out, int n) {
    tp_value_clear(out);
    return tp_value_tuple(n, out);
}

tp_status tp__out_list(tp_value *out, int64_t n) {
    tp_value_clear(out);
    return tp_value_list(n, out);
}

tp_dtype tp__scalar_dtype(const tp_value *v) {
    switch (v->kind) {
    case TP_VAL_BOOL: return TP_BOOL;
    case TP_VAL_INT: return TP_INT64;
    default: return TP_DEFAULT_FLOAT;
    }
}

enum { CAT_NONE = -1 };

static int combine_categories(int higher, int lower) {
    if (higher == CAT_NONE) return lower;
    if (lower == CAT_NONE) return higher;
    if (tp_dtype_is_float((tp_dtype)higher)) return higher;
    if (higher == TP_BOOL || tp_dtype_is_float((tp_dtype)lower))
        return tp_promote_types((tp_dtype)higher, (tp_dtype)lower);
    return higher;
}

static int promote_opt(int a, tp_dtype b) { return a == CAT_NONE ? (int)b : (int)tp_promote_types((tp_dtype)a, b); }

tp_dtype tp__result_type(const tp_value *const *vals, int n) {
    int dim = CAT_NONE, zero = CAT_NONE, wrapped = CAT_NONE;
    for (int i = 0; i < n; i++) {
        const tp_value *v = vals[i];
        if (!v) continue;
        if (v->kind == TP_VAL_TENSOR) {
            const tp_tensor *t = v->u.tensor;
            if (t->ndim > 0) dim = promote_opt(dim, t->dtype);
            else zero = promote_opt(zero, t->dtype);
        } else if (tp_value_is_number(v)) {
            wrapped = promote_opt(wrapped, tp__scalar_dtype(v));
        }
    }
    int r = combine_categories(dim, combine_categories(zero, wrapped));
    return r == CAT_NONE ? TP_DEFAULT_FLOAT : (tp_dtype)r;
}

tp_status tp__as_tensor(const tp_value *v, tp_dtype dtype, tp_tensor **out) {
    if (v->kind == TP_VAL_TENSOR) {
        *out = tp_tensor_retain(v->u.tensor);
        return TP_OK;
    }
    TP_CHECK(tp_value_is_number(v), TP_ERR_TYPE, "expected a tensor or a number, got %s", tp_value_kind_name(v->kind));
    tp_tensor *t;
    TP_TRY(tp_tensor_empty(dtype, 0, NULL, &t));
    if (v->kind == TP_VAL_FLOAT) tp__store_f64(t->storage->data, dtype, v->u.f);
    else tp__store_i64(t->storage->data, dtype, tp_value_as_i64(v));
    *out = t;
    return TP_OK;
}
