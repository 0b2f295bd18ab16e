/*
 * builder.c - ox_call results kept in one place until the lowering is
 * done, the first error kept: a lowering of many small ops (shape_data.c,
 * strings.c) reads as expressions instead of a ladder of status checks and
 * clears.
 */
#include <inttypes.h>

#include "onnx_impl.h"

void rb_init(rb *b, ox_ctx *c) {
    b->c = c;
    b->st = TP_OK;
    b->n = 0;
    b->none = tp_value_none();
    for (int i = 0; i < RB_CHUNKS; i++) b->chunk[i] = NULL;
}

void rb_clear(rb *b) {
    for (int i = 0; i < b->n; i++) tp_value_clear(&b->chunk[i / RB_CHUNK][i % RB_CHUNK]);
    for (int i = 0; i < RB_CHUNKS; i++) {
        tp_free(b->chunk[i]);
        b->chunk[i] = NULL;
    }
    b->n = 0;
}

void rb_fail(rb *b, tp_status st) {
    if (b->st == TP_OK) b->st = st;
}

/* Keep *v (taken over) when st is TP_OK; the slot stays valid until rb_clear. */
const tp_value *rb_keep(rb *b, tp_status st, tp_value *v) {
    int k = b->n / RB_CHUNK;
    if (st == TP_OK && b->st == TP_OK && k == RB_CHUNKS) st = tp_error(TP_ERR_INTERNAL, "shape-data builder full");
    if (st == TP_OK && b->st == TP_OK && !b->chunk[k] && !(b->chunk[k] = tp_malloc(RB_CHUNK * sizeof(tp_value))))
        st = tp_error(TP_ERR_NOMEM, "out of memory");
    if (st != TP_OK || b->st != TP_OK) {
        rb_fail(b, st);
        tp_value_clear(v);
        return &b->none;
    }
    tp_value *slot = &b->chunk[k][b->n % RB_CHUNK];
    *slot = *v;
    *v = tp_value_none();
    b->n++;
    return slot;
}

const tp_value *rb_call(rb *b, tp_op op, ox_args *A) {
    tp_value r = tp_value_none();
    if (b->st != TP_OK) {
        ox_args_clear(A);
        return &b->none;
    }
    tp_status st = ox_call(b->c, op, A, &r);
    return rb_keep(b, st, &r);
}

const tp_value *rb1(rb *b, tp_op op, const tp_value *x) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    return rb_call(b, op, &A);
}

const tp_value *rb2(rb *b, tp_op op, const tp_value *x, const tp_value *y) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ref(&A, y);
    return rb_call(b, op, &A);
}

const tp_value *rb_where(rb *b, const tp_value *cond, const tp_value *x, const tp_value *y) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, cond);
    ox_arg_ref(&A, x);
    ox_arg_ref(&A, y);
    return rb_call(b, TP_OP_WHERE, &A);
}

/* op(x, int d) - select / unsqueeze / any / cumsum / sum along d. */
const tp_value *rb_dim(rb *b, tp_op op, const tp_value *x, int64_t d) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(d));
    return rb_call(b, op, &A);
}

const tp_value *rb_select(rb *b, const tp_value *x, int64_t i) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(0));
    ox_arg(&A, tp_value_int(i));
    return rb_call(b, TP_OP_SELECT, &A);
}

/* A constant int64 tensor: 1-D of n values, or 0-d when n < 0 (one value). */
const tp_value *rb_i64s(rb *b, int n, const int64_t *vals) {
    tp_tensor *t = NULL;
    int64_t len = n;
    tp_status st = b->st != TP_OK ? b->st : tp_tensor_from_data(TP_INT64, n < 0 ? 0 : 1, &len, vals, &t);
    tp_value v = st == TP_OK ? ox_tensor_value(t) : tp_value_none();
    return rb_keep(b, st, &v);
}

const tp_value *rb_i64(rb *b, int64_t v) { return rb_i64s(b, -1, &v); }

const tp_value *rb_f64(rb *b, double v) {
    tp_value t = tp_value_none();
    tp_status st = b->st != TP_OK ? b->st : ox_scalar_tensor(TP_FLOAT64, v, &t);
    return rb_keep(b, st, &t);
}

const tp_value *rb_cast(rb *b, const tp_value *x, tp_dtype dt) {
    tp_value r = tp_value_none();
    if (b->st != TP_OK) return &b->none;
    tp_status st = ox_cast(b->c, x, dt, &r);
    return rb_keep(b, st, &r);
}

/* A run-time integer tensor of rank <= 1 as int64, with its length. */
const tp_value *rb_int_input(rb *b, const tp_value *t, const char *what, int64_t max, int64_t *n) {
    const tp_tensor *m = ox_meta(t);
    *n = 0;
    if (b->st != TP_OK) return &b->none;
    if (!m || tp_tensor_ndim(m) > 1 || !tp_dtype_is_int(tp_tensor_dtype(m))) {
        rb_fail(b, ox_bad(b->c, "input '%s' must be an integer scalar or 1-D tensor", what));
        return &b->none;
    }
    int64_t len = tp_tensor_ndim(m) ? tp_tensor_sizes(m)[0] : 1;
    if (len < 0 || len > max) { /* *n stays 0: callers size arrays by it */
        rb_fail(b, ox_unsupported(b->c, "input '%s' has %" PRId64 " values given when the program runs (at most %" PRId64 ")",
                                  what, len, max));
        return &b->none;
    }
    *n = len;
    const tp_value *v = rb_cast(b, t, TP_INT64);
    return tp_tensor_ndim(m) ? v : rb_dim(b, TP_OP_UNSQUEEZE, v, 0);
}

/* Element i of a 1-D int64 tensor as a number known when the program runs. */
tp_status rb_item(rb *b, const tp_value *t, int64_t i, tp_value *out) {
    *out = tp_value_none();
    const tp_value *s = rb_select(b, t, i);
    if (b->st != TP_OK) return b->st;
    return ox_call1(b->c, TP_OP_ITEM, s, out);
}

/* A list of the n elements of a 1-D int64 tensor, each read with item(). */
const tp_value *rb_items(rb *b, const tp_value *t, int64_t n) {
    tp_value l = tp_value_none();
    tp_status st = b->st != TP_OK ? b->st : tp_value_list(n, &l);
    for (int64_t i = 0; st == TP_OK && i < n; i++) {
        tp_value it;
        st = rb_item(b, t, i, &it);
        if (st == TP_OK) st = tp_value_seq_set(&l, i, &it);
    }
    return rb_keep(b, st, &l);
}

const tp_value *rb_list(rb *b, int n, const tp_value *const *items) {
    tp_value l = tp_value_none();
    tp_status st = b->st != TP_OK ? b->st : tp_value_list(n, &l);
    for (int i = 0; st == TP_OK && i < n; i++) {
        tp_value v = tp_value_none();
        st = tp_value_copy(items[i], &v);
        if (st == TP_OK) st = tp_value_seq_set(&l, i, &v);
    }
    return rb_keep(b, st, &l);
}

const tp_value *rb_cat(rb *b, const tp_value *x, const tp_value *y, int64_t dim) {
    const tp_value *items[2] = {x, y};
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, rb_list(b, 2, items));
    ox_arg(&A, tp_value_int(dim));
    return rb_call(b, TP_OP_CAT, &A);
}

const tp_value *rb_reshape(rb *b, const tp_value *x, int n, const tp_value *const *sizes) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ref(&A, rb_list(b, n, sizes));
    return rb_call(b, TP_OP_RESHAPE, &A);
}

/* Finish: r (a data-dependent result) gets hint meta and becomes output i. */
tp_status rb_out(rb *b, int i, const tp_value *r, tp_dtype dt, int ndim, const int64_t *hint) {
    tp_value v = tp_value_none();
    tp_status st = b->st;
    if (st == TP_OK) st = ox_dd_meta(b->c, r, dt, ndim, hint);
    if (st == TP_OK) st = tp_value_copy(r, &v);
    if (st == TP_OK) st = ox_set_out(b->c, i, &v);
    rb_fail(b, st);
    return st;
}

