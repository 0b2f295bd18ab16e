/*
 * kernel_util.c - shared helpers for shape rules and reference kernels.
 */
#include <inttypes.h>

#include "kernel_util.h"

/* tp__arg_ints and tp__arg_sdims: the list into iv (plain ints) or dv (dims). */
static tp_status arg_ints(const tp_value *args, int i, const char *what, int64_t *iv, tp_sdim *dv, int max,
                          int expand_to, int *n) {
    const tp_value *v = &args[i];
    int64_t len = tp_value_len(v);
    if (v->kind == TP_VAL_INT) {
        if (dv) dv[0] = tp__value_sdim(v);
        else iv[0] = v->u.i;
        len = 1;
    } else {
        TP_CHECK(tp_value_is_seq(v), TP_ERR_TYPE, "%s must be a list of ints", what);
        TP_CHECK(len <= max, TP_ERR_INVALID_ARG, "%s has %" PRId64 " entries (at most %d allowed)", what, len, max);
        for (int64_t k = 0; k < len; k++) {
            const tp_value *e = &v->u.seq.items[k];
            TP_CHECK(e->kind == TP_VAL_INT || e->kind == TP_VAL_BOOL, TP_ERR_TYPE, "%s[%" PRId64 "] must be an int, not %s",
                     what, k, tp_value_kind_name(e->kind));
            if (dv) dv[k] = tp__value_sdim(e);
            else iv[k] = tp_value_as_i64(e);
        }
    }
    if (expand_to > 0) {
        if (len == 1 && expand_to > 1) {
            TP_CHECK(expand_to <= max, TP_ERR_INVALID_ARG, "%s: too many entries", what);
            for (int k = 1; k < expand_to; k++) {
                if (dv) dv[k] = dv[0];
                else iv[k] = iv[0];
            }
            len = expand_to;
        }
        TP_CHECK(len == expand_to, TP_ERR_INVALID_ARG, "%s must have %d entries, got %" PRId64, what, expand_to, len);
    }
    *n = (int)len;
    return TP_OK;
}

tp_status tp__arg_ints(const tp_value *args, int i, const char *what, int64_t *out, int max, int expand_to,
                       int *n) {
    return arg_ints(args, i, what, out, NULL, max, expand_to, n);
}

tp_status tp__arg_sdims(const tp_value *args, int i, const char *what, tp_sdim *out, int max, int expand_to, int *n) {
    return arg_ints(args, i, what, NULL, out, max, expand_to, n);
}

tp_status tp__out_tensor(tp_value *out, tp_dtype dtype, int ndim, const int64_t *sizes) {
    tp_sym_env *env = tp__sym_env();
    if (env) env->fail = true; /* plain sizes: not a rule the symbolic pass can follow (dim.h) */
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

tp_status tp__scalar_to_elem(const tp_value *v, tp_dtype dtype, void *elem) {
    bool is_float;
    double f = 0.0;
    int64_t i = 0;
    if (v->kind == TP_VAL_TENSOR) {
        const tp_tensor *t = v->u.tensor;
        TP_CHECK(t->storage != NULL, TP_ERR_INVALID_ARG, "value tensor has no data");
        int64_t numel = tp_tensor_numel(t);
        TP_CHECK(numel == 1, TP_ERR_SHAPE, "value tensor must have exactly one element, got %" PRId64, numel);
        is_float = tp_dtype_is_float(t->dtype);
        if (is_float) f = tp__load_f64(tp__tensor_base(t), t->dtype);
        else i = tp__load_i64(tp__tensor_base(t), t->dtype);
    } else {
        TP_CHECK(tp_value_is_number(v), TP_ERR_TYPE, "expected a number, got %s", tp_value_kind_name(v->kind));
        is_float = v->kind == TP_VAL_FLOAT;
        if (is_float) f = v->u.f;
        else i = tp_value_as_i64(v);
    }
    char shown[64];
    if (is_float) snprintf(shown, sizeof shown, "%.17g", f);
    else snprintf(shown, sizeof shown, "%" PRId64, i);
    if (dtype == TP_BOOL) {
        *(uint8_t *)elem = is_float ? (f != 0.0) : (i != 0);
        return TP_OK;
    }
    if (tp_dtype_is_float(dtype)) {
        double x = is_float ? f : (double)i;
        double max = dtype == TP_FLOAT16 ? 65504.0
                     : dtype == TP_BFLOAT16 ? 3.3895313892515355e38
                     : dtype == TP_FLOAT32 ? 3.4028234663852886e38
                                           : INFINITY;
        TP_CHECK(!isfinite(x) || fabs(x) <= max, TP_ERR_INVALID_ARG,
                 "value %s cannot be converted to type %s without overflow", shown, tp_dtype_name(dtype));
        tp__store_f64(elem, dtype, x);
        return TP_OK;
    }
    int64_t lo, hi;
    switch (dtype) {
    case TP_INT32: lo = INT32_MIN, hi = INT32_MAX; break;
    case TP_INT16: lo = INT16_MIN, hi = INT16_MAX; break;
    case TP_INT8: lo = INT8_MIN, hi = INT8_MAX; break;
    case TP_UINT8: lo = is_float ? 0 : -255, hi = UINT8_MAX; break; /* PyTorch lets negative ints wrap */
    case TP_INT64: lo = INT64_MIN, hi = INT64_MAX; break;
    default: return tp_error(TP_ERR_TYPE, "unsupported dtype %s", tp_dtype_name(dtype));
    }
    if (is_float) {
        bool ok = f >= (double)lo && (dtype == TP_INT64 ? f < 9223372036854775808.0 : f <= (double)hi);
        TP_CHECK(ok, TP_ERR_INVALID_ARG, "value %s cannot be converted to type %s without overflow", shown,
                 tp_dtype_name(dtype));
        i = (int64_t)f; /* truncates toward zero */
    } else {
        TP_CHECK(i >= lo && i <= hi, TP_ERR_INVALID_ARG, "value %s cannot be converted to type %s without overflow",
                 shown, tp_dtype_name(dtype));
    }
    tp__store_i64(elem, dtype, i);
    return TP_OK;
}
