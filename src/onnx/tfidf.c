/*
 * tfidf.c - ONNX TfIdfVectorizer (opset 9) over integer input, composed.
 *
 * The pool holds n-grams grouped by size (ngram_counts gives where each
 * size starts in pool_int64s); pool n-gram j counts into output column
 * ngram_indexes[j]. An n-gram of size n (min_gram_length <= n <=
 * max_gram_length) is counted at every start position p of a row and every
 * skip distance s = 1 .. max_skip_count + 1 (unigrams once, at s = 1) where
 * x[p], x[p + s], ..., x[p + (n - 1) s] lie in the row and equal it. Each
 * (n, s) is one comparison of the row's windows (unfold, every s-th
 * element) with the pool's n-grams of that size, summed over positions;
 * the counts go to their columns by a matmul with a constant 0/1 matrix.
 * TF gives the counts, IDF the weight (or 1) where a count is nonzero,
 * TFIDF count times weight (or the count). pool_strings is not supported.
 */
#include <inttypes.h>
#include <string.h>

#include "onnx_impl.h"

#define MAX_POOL ((int64_t)1 << 16)

static const tp_value *const_tensor(rb *b, tp_dtype dt, int nd, const int64_t *sizes, const void *data) {
    tp_tensor *t = NULL;
    tp_status st = b->st != TP_OK ? b->st : tp_tensor_from_data(dt, nd, sizes, data, &t);
    tp_value v = st == TP_OK ? ox_tensor_value(t) : tp_value_none();
    return rb_keep(b, st, &v);
}

tp_status tp__onnx_tfidf(ox_ctx *c) {
    const tp_value *x = ox_in(c, 0);
    if (!x || !ox_meta(x)) return ox_bad(c, "missing input X");
    const tp_tensor *xm = ox_meta(x);
    int rank = tp_tensor_ndim(xm);
    if ((rank != 1 && rank != 2) || !tp_dtype_is_int(tp_tensor_dtype(xm)))
        return ox_bad(c, "X must be a 1-D or 2-D integer tensor");
    if (ox_in_dyn(c, 0)) return ox_unsupported(c, "TfIdfVectorizer of a dynamically shaped input");
    if (ox_attr(c, "pool_strings")) return ox_unsupported(c, "pool_strings (string n-grams)");
    const Onnx__AttributeProto *pool = ox_attr(c, "pool_int64s"), *counts = ox_attr(c, "ngram_counts"),
                               *idx = ox_attr(c, "ngram_indexes"), *wts = ox_attr(c, "weights");
    if (!pool || !counts || !idx) return ox_bad(c, "needs pool_int64s, ngram_counts and ngram_indexes");
    int64_t lo = ox_attr_i(c, "min_gram_length", 0), hi = ox_attr_i(c, "max_gram_length", 0);
    int64_t skip = ox_attr_i(c, "max_skip_count", 0);
    char buf[16];
    const char *mode = ox_attr_s(c, "mode", "", buf, sizeof buf);
    int kind = !strcmp(mode, "TF") ? 0 : !strcmp(mode, "IDF") ? 1 : !strcmp(mode, "TFIDF") ? 2 : -1;
    if (kind < 0) return ox_bad(c, "mode '%s' (TF, IDF or TFIDF)", mode);
    if (lo < 1 || hi < lo || hi > 64 || skip < 0 || skip > 64)
        return ox_bad(c, "gram lengths %" PRId64 "..%" PRId64 " and max_skip_count %" PRId64 " out of range", lo, hi, skip);
    int64_t n_pool = (int64_t)pool->n_ints, n_grams = 0;
    if (n_pool > MAX_POOL) return ox_unsupported(c, "a pool of %" PRId64 " items (at most %" PRId64 ")", n_pool, MAX_POOL);
    /* the pool's n-grams: size n = segment + 1, from counts[n - 1] to the next */
    for (size_t i = 0; i < counts->n_ints; i++) {
        int64_t s = counts->ints[i], e = i + 1 < counts->n_ints ? counts->ints[i + 1] : n_pool;
        if (s < 0 || e < s || e > n_pool || (e - s) % (int64_t)(i + 1))
            return ox_bad(c, "ngram_counts[%zu] = %" PRId64 " does not split the pool into %zu-grams", i, s, i + 1);
        n_grams += (e - s) / (int64_t)(i + 1);
    }
    if ((int64_t)idx->n_ints != n_grams) return ox_bad(c, "%zu ngram_indexes for %" PRId64 " n-grams", idx->n_ints, n_grams);
    int64_t out = 0;
    for (size_t j = 0; j < idx->n_ints; j++) {
        if (idx->ints[j] < 0 || idx->ints[j] >= MAX_POOL) return ox_bad(c, "ngram_indexes[%zu] out of range", j);
        if (idx->ints[j] + 1 > out) out = idx->ints[j] + 1;
    }
    if (wts && (int64_t)wts->n_floats != out && wts->n_floats)
        return ox_bad(c, "%zu weights for %" PRId64 " outputs", wts->n_floats, out);
    int64_t len = tp_tensor_sizes(xm)[rank - 1];
    rb b;
    rb_init(&b, c);
    /* the 0/1 matrix [n_grams, out] from pool n-gram to column */
    tp_status st = ox_check_constant(c, TP_FLOAT32, 2, (int64_t[]){n_grams, out});
    float *m = st == TP_OK ? tp_calloc((size_t)(n_grams ? n_grams : 1) * (size_t)(out ? out : 1), sizeof *m) : NULL;
    if (st == TP_OK && !m) st = tp_error(TP_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; st == TP_OK && j < n_grams; j++) m[j * out + idx->ints[j]] = 1;
    rb_fail(&b, st);
    const tp_value *acc = NULL; /* counts [.., n_grams] in pool order, as float32 */
    for (size_t i = 0; b.st == TP_OK && i < counts->n_ints; i++) {
        int64_t n = (int64_t)i + 1, s0 = counts->ints[i], e0 = i + 1 < counts->n_ints ? counts->ints[i + 1] : n_pool;
        int64_t pn = (e0 - s0) / n;
        if (!pn) continue;
        const tp_value *cnt = NULL;
        if (n >= lo && n <= hi) {
            const tp_value *pv = const_tensor(&b, TP_INT64, 2, (int64_t[]){pn, n}, pool->ints + s0);
            for (int64_t s = 1; s <= (n == 1 ? 1 : skip + 1); s++) {
                int64_t span = s * (n - 1) + 1;
                if (span > len) break;
                ox_args A;
                ox_args_init(&A);
                ox_arg_ref(&A, x);
                ox_arg(&A, tp_value_int(rank - 1));
                ox_arg(&A, tp_value_int(span));
                ox_arg(&A, tp_value_int(1));
                const tp_value *w = rb_call(&b, TP_OP_UNFOLD, &A); /* [.., positions, span] */
                ox_args_init(&A);
                ox_arg_ref(&A, w);
                ox_arg(&A, tp_value_int(-1));
                ox_arg(&A, tp_value_int(0));
                ox_arg(&A, tp_value_int(span));
                ox_arg(&A, tp_value_int(s));
                w = rb_call(&b, TP_OP_SLICE, &A); /* [.., positions, n] */
                const tp_value *eq = rb2(&b, TP_OP_EQ, rb_dim(&b, TP_OP_UNSQUEEZE, w, -2), pv); /* [.., pos, pn, n] */
                const tp_value *k = rb_dim(&b, TP_OP_SUM, rb_cast(&b, rb_dim(&b, TP_OP_ALL, eq, -1), TP_FLOAT32), -2);
                cnt = cnt ? rb2(&b, TP_OP_ADD, cnt, k) : k;
            }
        }
        if (!cnt) { /* not counted: zeros [.., pn] */
            int64_t zs[2] = {tp_tensor_sizes(xm)[0], pn};
            ox_args A;
            ox_args_init(&A);
            ox_arg_ints(&A, rank == 2 ? zs : zs + 1, rank);
            ox_kw(&A, "dtype", tp_value_dtype(TP_FLOAT32));
            cnt = rb_call(&b, TP_OP_ZEROS, &A);
        }
        acc = acc ? rb_cat(&b, acc, cnt, -1) : cnt;
    }
    const tp_value *freq = NULL;
    if (acc) freq = rb2(&b, TP_OP_MATMUL, acc, const_tensor(&b, TP_FLOAT32, 2, (int64_t[]){n_grams, out}, m));
    tp_free(m);
    const tp_value *y = freq;
    if (freq && kind > 0) {
        const tp_value *w = wts && wts->n_floats ? const_tensor(&b, TP_FLOAT32, 1, &out, wts->floats) : NULL;
        if (kind == 1) { /* IDF: the weight (or 1) where counted */
            const tp_value *seen = rb2(&b, TP_OP_GT, freq, rb_f64(&b, 0));
            y = rb_cast(&b, seen, TP_FLOAT32);
            if (w) y = rb2(&b, TP_OP_MUL, y, w);
        } else if (w) { /* TFIDF */
            y = rb2(&b, TP_OP_MUL, freq, w);
        }
    }
    tp_value o = tp_value_none();
    st = b.st;
    if (st == TP_OK && !y) st = ox_bad(c, "empty pool");
    if (st == TP_OK) st = ox_cast(c, y, TP_FLOAT32, &o);
    if (st == TP_OK) st = ox_set_out(c, 0, &o);
    rb_clear(&b);
    return st;
}
