/*
 * attention.c - ONNX Attention (opset 23 on; nonpad_kv_seqlen from 24, the
 * sliding window from 25).
 *
 * The common case - no cache, no padding lengths, no mask (is_causal
 * allowed), no window, no softcap, no qk_matmul_output, no
 * softmax_precision, as many key/value heads as query heads - is one
 * scaled_dot_product_attention node (the engine's fused kernel). Everything
 * else is composed as ONNX defines it: 3-D inputs split into heads, Q and K
 * each scaled by sqrt(scale), the past cache concatenated in front of K and
 * V (present_key / present_value), the additive bias built from the mask
 * (a bool mask: 0 where True, -inf where False; a short last dim padded
 * with -inf), the bottom-right causal frontier (j <= i + offset, offset the
 * past length or nonpad_kv_seqlen - q), the sliding window and the padding
 * lengths, K and V repeated per head for grouped-query attention, softcap
 * (c * tanh(s / c)) before the bias, softmax (in softmax_precision when
 * given), rows whose bias is -inf everywhere set to 0, then P @ V.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "onnx_impl.h"

static const tp_value *scalar(rb *b, tp_dtype dt, double v) {
    tp_value t = tp_value_none();
    tp_status st = b->st != TP_OK ? b->st : ox_scalar_tensor(dt, v, &t);
    return rb_keep(b, st, &t);
}

static const tp_value *permute4(rb *b, const tp_value *x, int64_t p0, int64_t p1, int64_t p2, int64_t p3) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ints(&A, (int64_t[]){p0, p1, p2, p3}, 4);
    return rb_call(b, TP_OP_PERMUTE, &A);
}

/* Dim d of x as an int or a sym_size number, kept. */
static const tp_value *dim_of(rb *b, const tp_value *x, int d) {
    tp_value v = tp_value_none();
    tp_status st = b->st != TP_OK ? b->st : ox_dim(b->c, x, d, &v);
    return rb_keep(b, st, &v);
}

/* [B, S, heads * h] -> [B, heads, S, h]. */
static const tp_value *split_heads(rb *b, const tp_value *x, int64_t heads, const char *what) {
    const tp_tensor *m = ox_meta(x);
    int64_t hidden = tp_tensor_sizes(m)[2];
    if (b->st == TP_OK && (heads <= 0 || hidden % heads != 0))
        rb_fail(b, ox_bad(b->c, "%s's hidden size %" PRId64 " is not a multiple of %" PRId64 " heads", what, hidden, heads));
    tp_value hv = tp_value_int(heads), hs = tp_value_int(heads > 0 ? hidden / heads : 0);
    const tp_value *sizes[4] = {dim_of(b, x, 0), dim_of(b, x, 1), &hv, &hs};
    return permute4(b, rb_reshape(b, x, 4, sizes), 0, 2, 1, 3);
}

/* arange(n) as int64, n an int or a number known when it runs. */
static const tp_value *arange(rb *b, const tp_value *n) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, n);
    ox_kw(&A, "dtype", tp_value_dtype(TP_INT64));
    return rb_call(b, TP_OP_ARANGE, &A);
}

tp_status tp__onnx_attention(ox_ctx *c) {
    const tp_value *q = ox_in(c, 0), *k = ox_in(c, 1), *v = ox_in(c, 2), *mask = ox_in(c, 3);
    const tp_value *past_k = ox_in(c, 4), *past_v = ox_in(c, 5), *nonpad = ox_opset(c) >= 24 ? ox_in(c, 6) : NULL;
    if (!q || !k || !v || !ox_meta(q) || !ox_meta(k) || !ox_meta(v)) return ox_bad(c, "needs Q, K and V");
    int rank = tp_tensor_ndim(ox_meta(q));
    if (rank != tp_tensor_ndim(ox_meta(k)) || rank != tp_tensor_ndim(ox_meta(v)) || (rank != 3 && rank != 4))
        return ox_bad(c, "Q, K and V must all be 3-D or all 4-D");
    if (!past_k != !past_v) return ox_bad(c, "past_key and past_value must be given together");
    if (nonpad && past_k) return ox_bad(c, "nonpad_kv_seqlen cannot be combined with past_key / past_value");
    tp_dtype dt = tp_tensor_dtype(ox_meta(q));
    if (!tp_dtype_is_float(dt)) return ox_bad(c, "Q must be a float tensor");
    bool causal = ox_attr_i(c, "is_causal", 0) != 0;
    int64_t qh = ox_attr_i(c, "q_num_heads", 0), kvh = ox_attr_i(c, "kv_num_heads", 0);
    int64_t mode = ox_attr_i(c, "qk_matmul_output_mode", 0);
    int64_t left = ox_attr_i(c, "left_window_size", -1), right = ox_attr_i(c, "right_window_size", -1);
    double softcap = ox_attr_f(c, "softcap", 0.0);
    if (mode < 0 || mode > 3) return ox_bad(c, "qk_matmul_output_mode %" PRId64 " (0 to 3)", mode);
    if (left < -1 || right < -1) return ox_bad(c, "window sizes must be -1 or non-negative");
    if (rank == 3 && (qh <= 0 || kvh <= 0)) return ox_bad(c, "3-D inputs need q_num_heads and kv_num_heads");
    if (rank == 4 && ox_opset(c) >= 25 && (ox_attr(c, "q_num_heads") || ox_attr(c, "kv_num_heads")))
        return ox_bad(c, "q_num_heads and kv_num_heads must not be given for 4-D inputs");
    tp_dtype sm_dt = dt;
    const Onnx__AttributeProto *sp = ox_attr(c, "softmax_precision");
    if (sp && sp->has_i) {
        int32_t et = (int32_t)sp->i;
        if ((int64_t)et != sp->i || tp__onnx_dtype(et, &sm_dt) != TP_OK || !tp_dtype_is_float(sm_dt))
            return ox_bad(c, "softmax_precision %" PRId64 " is not a float type", sp->i);
    }
    bool want_qk = ox_out_used(c, 3), window = left >= 0 || right >= 0;
    rb b;
    rb_init(&b, c);
    const tp_value *Q = q, *K = k, *V = v;
    if (rank == 3) {
        Q = split_heads(&b, q, qh, "Q");
        K = split_heads(&b, k, kvh, "K");
        V = split_heads(&b, v, kvh, "V");
    }
    int64_t head = b.st == TP_OK ? tp_tensor_sizes(ox_meta(Q))[3] : 1;
    int64_t n_qh = b.st == TP_OK ? tp_tensor_sizes(ox_meta(Q))[1] : 1, n_kvh = b.st == TP_OK ? tp_tensor_sizes(ox_meta(K))[1] : 1;
    double scale = ox_attr(c, "scale") ? ox_attr_f(c, "scale", 1.0) : 1.0 / sqrt((double)head);
    if (past_k) { /* the cache in front: present_key / present_value */
        K = rb_cat(&b, past_k, K, 2);
        V = rb_cat(&b, past_v, V, 2);
    }
    const tp_value *PK = K, *PV = V; /* present_key, present_value */
    bool fused = !mask && !past_k && !nonpad && !window && softcap <= 0 && !want_qk && sm_dt == dt && n_qh == n_kvh;
    const tp_value *y;
    if (fused) { /* one scaled_dot_product_attention node */
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, Q);
        ox_arg_ref(&A, K);
        ox_arg_ref(&A, V);
        ox_arg(&A, tp_value_none());
        ox_arg(&A, tp_value_float(0.0));
        ox_arg(&A, tp_value_bool(causal));
        ox_kw(&A, "scale", tp_value_float(scale));
        y = rb_call(&b, TP_OP_SCALED_DOT_PRODUCT_ATTENTION, &A);
    } else {
        const tp_value *zero = scalar(&b, dt, 0), *ninf = scalar(&b, dt, -INFINITY);
        const tp_value *qlen = dim_of(&b, Q, 2), *kvlen = dim_of(&b, K, 2);
        /* the additive bias, broadcastable to [B, heads, q, kv]; NULL: none */
        const tp_value *bias = NULL;
        if (mask) {
            const tp_tensor *mm = ox_meta(mask);
            int mr = tp_tensor_ndim(mm);
            bool is_bool = tp_tensor_dtype(mm) == TP_BOOL;
            bias = is_bool ? rb_where(&b, mask, zero, ninf) : rb_cast(&b, mask, dt);
            const tp_tensor *km = b.st == TP_OK ? ox_meta(K) : NULL;
            if (km && mr >= 1 && !ox_in_dyn(c, 3) && !ox_in_dyn(c, 1) &&
                tp_tensor_sizes(mm)[mr - 1] < tp_tensor_sizes(km)[2]) { /* short: padded with -inf */
                tp_value mode_s = tp_value_none();
                tp_status st = tp_value_str("constant", &mode_s);
                ox_args A;
                ox_args_init(&A);
                ox_arg_ref(&A, bias);
                ox_arg_ints(&A, (int64_t[]){0, tp_tensor_sizes(km)[2] - tp_tensor_sizes(mm)[mr - 1]}, 2);
                ox_arg(&A, mode_s);
                ox_arg(&A, tp_value_float(-INFINITY));
                if (st != TP_OK) rb_fail(&b, st);
                bias = rb_call(&b, TP_OP_PAD, &A);
            }
        }
        if (causal || window) { /* j <= i + offset (causal); the window around i + offset */
            const tp_value *i = rb_dim(&b, TP_OP_UNSQUEEZE, arange(&b, qlen), 1); /* [q, 1] */
            const tp_value *j = rb_dim(&b, TP_OP_UNSQUEEZE, arange(&b, kvlen), 0); /* [1, kv] */
            const tp_value *pos = i;                                                  /* i + offset */
            if (past_k) {
                pos = rb2(&b, TP_OP_ADD, i, dim_of(&b, past_k, 2));
            } else if (nonpad) { /* per batch: nonpad[b] - q, shaped [B, 1, 1, 1] */
                const tp_value *np = rb_cast(&b, nonpad, TP_INT64);
                tp_value m1 = tp_value_int(-1), one = tp_value_int(1);
                const tp_value *sz[4] = {&m1, &one, &one, &one};
                const tp_value *off = rb2(&b, TP_OP_SUB, rb_reshape(&b, np, 4, sz), qlen);
                pos = rb2(&b, TP_OP_ADD, i, off);
            }
            const tp_value *diff = rb2(&b, TP_OP_SUB, pos, j); /* >= 0: key j at or before the query */
            const tp_value *ok = NULL;
            if (causal) ok = rb2(&b, TP_OP_GE, diff, rb_i64(&b, 0));
            if (left >= 0) {
                const tp_value *w = rb2(&b, TP_OP_LE, diff, rb_i64(&b, left));
                ok = ok ? rb2(&b, TP_OP_LOGICAL_AND, ok, w) : w;
            }
            if (right >= 0) {
                const tp_value *w = rb2(&b, TP_OP_LE, rb1(&b, TP_OP_NEG, diff), rb_i64(&b, right));
                ok = ok ? rb2(&b, TP_OP_LOGICAL_AND, ok, w) : w;
            }
            const tp_value *cb = rb_where(&b, ok, zero, ninf);
            bias = bias ? rb2(&b, TP_OP_ADD, bias, cb) : cb;
        }
        if (nonpad) { /* keys at or past nonpad_kv_seqlen[b] are padding */
            tp_value m1 = tp_value_int(-1), one = tp_value_int(1);
            const tp_value *sz[4] = {&m1, &one, &one, &one};
            const tp_value *lim = rb_reshape(&b, rb_cast(&b, nonpad, TP_INT64), 4, sz);
            const tp_value *pad = rb_where(&b, rb2(&b, TP_OP_LT, arange(&b, kvlen), lim), zero, ninf);
            bias = bias ? rb2(&b, TP_OP_ADD, bias, pad) : pad;
        }
        if (n_qh != n_kvh && n_kvh > 0 && n_qh % n_kvh == 0) { /* grouped-query: each KV head repeated in place */
            for (int t = 0; t < 2; t++) {
                ox_args A;
                ox_args_init(&A);
                ox_arg_ref(&A, t ? V : K);
                ox_arg(&A, tp_value_int(n_qh / n_kvh));
                ox_arg(&A, tp_value_int(1));
                const tp_value *r = rb_call(&b, TP_OP_REPEAT_INTERLEAVE, &A);
                if (t) V = r;
                else K = r;
            }
        } else if (b.st == TP_OK && n_qh != n_kvh) {
            rb_fail(&b, ox_bad(c, "%" PRId64 " query heads are not a multiple of %" PRId64 " key/value heads", n_qh, n_kvh));
        }
        const tp_value *s = scalar(&b, dt, sqrt(scale));
        const tp_value *kt = permute4(&b, rb2(&b, TP_OP_MUL, K, s), 0, 1, 3, 2);
        const tp_value *scores = rb2(&b, TP_OP_MATMUL, rb2(&b, TP_OP_MUL, Q, s), kt);
        if (softcap > 0) {
            const tp_value *cap = scalar(&b, dt, softcap);
            scores = rb2(&b, TP_OP_MUL, rb1(&b, TP_OP_TANH, rb2(&b, TP_OP_DIV, scores, cap)), cap);
        }
        const tp_value *biased = bias ? rb2(&b, TP_OP_ADD, scores, bias) : scores;
        const tp_value *qk = mode == 2 ? biased : scores;
        const tp_value *p = rb_cast(&b, biased, sm_dt);
        p = rb_cast(&b, rb_dim(&b, TP_OP_SOFTMAX, p, -1), dt);
        if (bias) { /* rows with no key to attend: 0 (softmax of all -inf is NaN) */
            ox_args A;
            ox_args_init(&A);
            ox_arg_ref(&A, bias);
            ox_arg_ints(&A, (int64_t[]){-1}, 1);
            ox_arg(&A, tp_value_bool(true));
            const tp_value *none_left = rb1(&b, TP_OP_ISNEGINF, rb_call(&b, TP_OP_AMAX, &A));
            p = rb_where(&b, none_left, zero, p);
        }
        if (mode == 3) qk = p;
        y = rb2(&b, TP_OP_MATMUL, p, V);
        if (want_qk) {
            tp_value o = tp_value_none();
            tp_status st = b.st;
            if (st == TP_OK) st = tp_value_copy(qk, &o);
            if (st == TP_OK) st = ox_set_out(c, 3, &o);
            rb_fail(&b, st);
        }
    }
    if (rank == 3) { /* [B, heads, S, hv] -> [B, S, heads * hv] */
        tp_value m1 = tp_value_int(-1);
        const tp_value *sz[3] = {dim_of(&b, q, 0), dim_of(&b, q, 1), &m1};
        y = rb_reshape(&b, permute4(&b, y, 0, 2, 1, 3), 3, sz);
    }
    const tp_value *outs[3] = {y, PK, PV};
    for (int i = 0; i < 3 && b.st == TP_OK; i++) {
        if (!ox_out_used(c, i)) continue;
        tp_value o = tp_value_none();
        tp_status st = tp_value_copy(outs[i], &o);
        if (st == TP_OK) st = ox_set_out(c, i, &o);
        rb_fail(&b, st);
    }
    tp_status st = b.st;
    rb_clear(&b);
    return st;
}

/* TensorScatter (opset 24): the update written into a copy of the cache
 * along `axis` (>= 1) at per-batch positions write_indices[b] + s (modulo
 * the cache length in circular mode): scatter with an index tensor shaped
 * like the update. */
tp_status tp__onnx_tensor_scatter(ox_ctx *c) {
    const tp_value *past = ox_in(c, 0), *upd = ox_in(c, 1), *wi = ox_in(c, 2);
    if (!past || !upd || !ox_meta(past) || !ox_meta(upd)) return ox_bad(c, "needs past_cache and update");
    const tp_tensor *pm = ox_meta(past), *um = ox_meta(upd);
    int r = tp_tensor_ndim(pm);
    int64_t axis = ox_attr_i(c, "axis", -2);
    if (axis < -r || axis >= r) return ox_bad(c, "axis %" PRId64 " out of range for rank %d", axis, r);
    if (axis < 0) axis += r;
    if (axis == 0) return ox_bad(c, "axis must not be the batch dim");
    char buf[16];
    const char *mode = ox_attr_s(c, "mode", "linear", buf, sizeof buf);
    if (strcmp(mode, "linear") && strcmp(mode, "circular")) return ox_bad(c, "mode '%s' (linear or circular)", mode);
    if (tp_tensor_ndim(um) != r || ox_in_dyn(c, 0) || ox_in_dyn(c, 1))
        return ox_unsupported(c, "past_cache and update of static shapes and the same rank");
    for (int d = 0; d < r; d++)
        if (d == axis ? tp_tensor_sizes(um)[d] > tp_tensor_sizes(pm)[d] : tp_tensor_sizes(um)[d] != tp_tensor_sizes(pm)[d])
            return ox_bad(c, "update's dim %d (%" PRId64 ") does not fit past_cache's (%" PRId64 ")", d,
                          tp_tensor_sizes(um)[d], tp_tensor_sizes(pm)[d]);
    int64_t batch = tp_tensor_sizes(pm)[0], seq = tp_tensor_sizes(um)[axis], cap = tp_tensor_sizes(pm)[axis];
    if (wi && (!ox_meta(wi) || tp_tensor_numel(ox_meta(wi)) != batch || !tp_dtype_is_int(tp_tensor_dtype(ox_meta(wi)))))
        return ox_bad(c, "write_indices must hold one integer per batch entry (%" PRId64 ")", batch);
    rb b;
    rb_init(&b, c);
    int64_t bshape[TP_MAX_DIMS], sshape[TP_MAX_DIMS], steps[4096];
    if (seq > 4096) return ox_unsupported(c, "an update of %" PRId64 " positions (at most 4096)", seq);
    for (int d = 0; d < r; d++) bshape[d] = d == 0 ? batch : 1, sshape[d] = d == axis ? seq : 1;
    for (int64_t i = 0; i < seq; i++) steps[i] = i;
    /* positions [B, 1.., S (at axis), 1..] = write_indices[b] + s */
    const tp_value *pos = rb_i64s(&b, (int)seq, steps);
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, pos);
    ox_arg_ints(&A, sshape, r);
    pos = rb_call(&b, TP_OP_RESHAPE, &A);
    if (wi) {
        ox_args_init(&A);
        ox_arg_ref(&A, rb_cast(&b, wi, TP_INT64));
        ox_arg_ints(&A, bshape, r);
        pos = rb2(&b, TP_OP_ADD, rb_call(&b, TP_OP_RESHAPE, &A), pos);
    }
    if (!strcmp(mode, "circular")) pos = rb2(&b, TP_OP_REMAINDER, pos, rb_i64(&b, cap));
    ox_args_init(&A);
    ox_arg_ref(&A, pos);
    ox_arg_ints(&A, tp_tensor_sizes(um), r);
    const tp_value *idx = rb1(&b, TP_OP_CONTIGUOUS, rb_call(&b, TP_OP_EXPAND, &A));
    ox_args_init(&A);
    ox_arg_ref(&A, past);
    ox_arg(&A, tp_value_int(axis));
    ox_arg_ref(&A, idx);
    ox_arg_ref(&A, upd);
    const tp_value *y = rb_call(&b, TP_OP_SCATTER, &A);
    tp_value o = tp_value_none();
    tp_status st = b.st;
    if (st == TP_OK) st = tp_value_copy(y, &o);
    if (st == TP_OK) st = ox_set_out(c, 0, &o);
    rb_clear(&b);
    return st;
}
