/*
 * strings.c - ONNX string tensors.
 *
 * Our tensors hold numbers, so an ONNX string tensor of shape S is held as
 * its UTF-8 bytes: uint8 [S..., width], each string zero-padded to the
 * width (numpy's fixed-width 'S' layout; a string cannot contain a zero
 * byte). A string graph input gets one more dim, its byte width, which is
 * dynamic ("<input>_bytes"); string constants are as wide as their longest
 * string (reader.c). tp_onnx_report.strings names the graph inputs and
 * outputs held this way, so callers encode and decode them.
 *
 * Strings go only through Identity, StringNormalizer, Equal and
 * StringConcat (import.c refuses them elsewhere). StringNormalizer: stopwords are removed by comparing
 * each string's first L + 1 bytes (L the longest stopword, the input
 * zero-padded by L + 1 so the window always exists) with every stopword
 * and its terminating zero; the kept strings are selected by their
 * positions (a data-dependent count; when none is left the output is one
 * empty string, as ONNX asks); case changes map the ASCII letters A-Z and
 * a-z (other characters, including non-ASCII letters, are left as they
 * are, whatever the `locale` attribute says).
 */
#include <inttypes.h>
#include <string.h>

#include "onnx_impl.h"

#define MAX_STOPWORD 4096

/* ASCII case change of UTF-8 bytes: to lower case (or upper). */
static const tp_value *ascii_case(rb *b, const tp_value *s, bool lower) {
    const tp_value *lo = rb_i64(b, lower ? 'A' : 'a'), *hi = rb_i64(b, lower ? 'Z' : 'z');
    const tp_value *letter = rb2(b, TP_OP_LOGICAL_AND, rb2(b, TP_OP_GE, s, lo), rb2(b, TP_OP_LE, s, hi));
    const tp_value *moved = rb_cast(b, rb2(b, lower ? TP_OP_ADD : TP_OP_SUB, rb_cast(b, s, TP_INT64), rb_i64(b, 32)), TP_UINT8);
    return rb_where(b, letter, moved, s);
}

/* [n, width] uint8 constant of the stopwords (lowered when `lower`), each
 * followed by zeros. */
static tp_status stopword_table(ox_ctx *c, const Onnx__AttributeProto *sw, int64_t width, bool lower, tp_value *out) {
    int64_t dims[2] = {(int64_t)sw->n_strings, width};
    tp_tensor *t;
    TP_TRY(ox_new_tensor(c, TP_UINT8, 2, dims, true, &t));
    uint8_t *p = tp_tensor_data(t);
    for (size_t i = 0; i < sw->n_strings; i++)
        for (size_t k = 0; k < sw->strings[i].len; k++) {
            uint8_t ch = sw->strings[i].data[k];
            p[i * (size_t)width + k] = lower && ch >= 'A' && ch <= 'Z' ? (uint8_t)(ch + 32) : ch;
        }
    *out = ox_tensor_value(t);
    return TP_OK;
}

tp_status tp__onnx_string_normalizer(ox_ctx *c) {
    const tp_value *x = ox_in(c, 0);
    if (!x || !ox_in_str(c, 0)) return ox_bad(c, "input 0 must be a string tensor");
    const tp_tensor *m = ox_meta(x);
    int nd = tp_tensor_ndim(m); /* with the byte dim */
    if (!(nd == 2 || (nd == 3 && tp_tensor_sizes(m)[0] == 1)))
        return ox_bad(c, "input must hold [C] or [1, C] strings");
    char abuf[16];
    const char *action = ox_attr_s(c, "case_change_action", "NONE", abuf, sizeof abuf);
    if (strcmp(action, "NONE") && strcmp(action, "LOWER") && strcmp(action, "UPPER"))
        return ox_bad(c, "case_change_action '%s' (NONE, LOWER or UPPER)", action);
    bool sensitive = ox_attr_i(c, "is_case_sensitive", 0) != 0;
    const Onnx__AttributeProto *sw = ox_attr(c, "stopwords");
    size_t longest = 0;
    for (size_t i = 0; sw && i < sw->n_strings; i++) {
        if (memchr(sw->strings[i].data, 0, sw->strings[i].len)) return ox_bad(c, "stopword %zu holds a zero byte", i);
        if (sw->strings[i].len > longest) longest = sw->strings[i].len;
    }
    if (longest > MAX_STOPWORD) return ox_unsupported(c, "a stopword of %zu bytes (at most %d)", longest, MAX_STOPWORD);
    rb b;
    rb_init(&b, c);
    const tp_value *rows = nd == 3 ? rb_select(&b, x, 0) : x; /* [C, width] */
    if (sw && sw->n_strings) {
        int64_t win = (int64_t)longest + 1;
        const tp_value *cmp = sensitive ? rows : ascii_case(&b, rows, true);
        tp_value mode = tp_value_none();
        tp_status st = tp_value_str("constant", &mode);
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, cmp);
        ox_arg_ints(&A, (int64_t[]){0, win}, 2);
        ox_arg(&A, mode);
        ox_arg(&A, tp_value_float(0));
        if (st != TP_OK) rb_fail(&b, st);
        const tp_value *padded = rb_call(&b, TP_OP_PAD, &A);
        ox_args_init(&A);
        ox_arg_ref(&A, padded);
        ox_arg(&A, tp_value_int(1));
        ox_arg(&A, tp_value_int(0));
        ox_arg(&A, tp_value_int(win));
        const tp_value *head = rb_call(&b, TP_OP_SLICE, &A); /* [C, win] */
        tp_value tab = tp_value_none();
        st = b.st == TP_OK ? stopword_table(c, sw, win, !sensitive, &tab) : b.st;
        const tp_value *words = rb_keep(&b, st, &tab); /* [n, win] */
        const tp_value *eq = rb2(&b, TP_OP_EQ, rb_dim(&b, TP_OP_UNSQUEEZE, head, 1), rb_dim(&b, TP_OP_UNSQUEEZE, words, 0));
        const tp_value *drop = rb_dim(&b, TP_OP_ANY, rb_dim(&b, TP_OP_ALL, eq, 2), 1); /* [C] */
        const tp_value *keep = rb1(&b, TP_OP_LOGICAL_NOT, drop);
        ox_args_init(&A);
        ox_arg_ref(&A, rb1(&b, TP_OP_NONZERO, keep));
        ox_arg(&A, tp_value_int(1));
        ox_arg(&A, tp_value_int(0));
        const tp_value *at = rb_call(&b, TP_OP_SELECT, &A); /* positions of the kept strings: [C'] */
        ox_args_init(&A);
        ox_arg_ref(&A, rows);
        ox_arg(&A, tp_value_int(0));
        ox_arg_ref(&A, at);
        const tp_value *kept = rb_call(&b, TP_OP_INDEX_SELECT, &A);
        /* none left: one empty string (a zero row) */
        ox_args_init(&A);
        ox_arg_ref(&A, rows);
        ox_arg(&A, tp_value_int(0));
        ox_arg(&A, tp_value_int(0));
        ox_arg(&A, tp_value_int(1));
        const tp_value *zero_row = rb1(&b, TP_OP_ZEROS_LIKE, rb_call(&b, TP_OP_SLICE, &A));
        const tp_value *n = rb2(&b, TP_OP_MAXIMUM, rb_dim(&b, TP_OP_SUM, rb_cast(&b, keep, TP_INT64), 0), rb_i64(&b, 1));
        tp_value ni = tp_value_none();
        st = b.st == TP_OK ? rb_item(&b, rb_dim(&b, TP_OP_UNSQUEEZE, n, 0), 0, &ni) : b.st;
        const tp_value *nv = rb_keep(&b, st, &ni);
        const tp_value *cat = rb_cat(&b, kept, zero_row, 0);
        ox_args_init(&A);
        ox_arg_ref(&A, cat);
        ox_arg(&A, tp_value_int(0));
        ox_arg(&A, tp_value_int(0));
        ox_arg_ref(&A, nv);
        rows = rb1(&b, TP_OP_CONTIGUOUS, rb_call(&b, TP_OP_SLICE, &A));
    }
    if (strcmp(action, "NONE")) rows = ascii_case(&b, rows, action[0] == 'L');
    if (nd == 3) rows = rb_dim(&b, TP_OP_UNSQUEEZE, rows, 0);
    tp_status st = rb_out(&b, 0, rows, TP_UINT8, nd, tp_tensor_sizes(m));
    rb_clear(&b);
    if (st == TP_OK) ox_set_out_str(c, 0);
    return st;
}

/* ---- Equal and StringConcat on strings ------------------------------------------- */

/* x and y (strings as bytes) expanded to their broadcast dims, each keeping
 * its own width. */
static tp_status broadcast_strings(rb *b, const tp_value **x, const tp_value **y) {
    ox_ctx *c = b->c;
    const tp_tensor *xm = ox_meta(*x), *ym = ox_meta(*y);
    int nx = tp_tensor_ndim(xm) - 1, ny = tp_tensor_ndim(ym) - 1, nout;
    int64_t out[TP_MAX_DIMS];
    if (tp__broadcast_shapes(nx, tp_tensor_sizes(xm), ny, tp_tensor_sizes(ym), &nout, out) != TP_OK || nout >= TP_MAX_DIMS)
        return ox_bad(c, "string inputs of shapes that do not broadcast");
    for (int k = 0; k < 2; k++) {
        const tp_value *v = k ? *y : *x;
        tp_value l = tp_value_none(), w = tp_value_none();
        tp_status st = tp_value_list(nout + 1, &l);
        for (int i = 0; st == TP_OK && i < nout; i++) {
            tp_value e = tp_value_int(out[i]);
            st = tp_value_seq_set(&l, i, &e);
        }
        if (st == TP_OK) st = ox_dim(c, v, tp_tensor_ndim(ox_meta(v)) - 1, &w);
        if (st == TP_OK) st = tp_value_seq_set(&l, nout, &w);
        const tp_value *lv = rb_keep(b, st, &l);
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, v);
        ox_arg_ref(&A, lv);
        const tp_value *e = rb_call(b, TP_OP_EXPAND, &A);
        if (k) *y = e;
        else *x = e;
    }
    return b->st;
}

/* v zero-padded at the end of its last dim by `by` (an int or a number known when it runs). */
static const tp_value *pad_end(rb *b, const tp_value *v, const tp_value *by) {
    tp_value z = tp_value_int(0), mode = tp_value_none();
    const tp_value *items[2] = {&z, by};
    const tp_value *lv = rb_list(b, 2, items);
    tp_status st = tp_value_str("constant", &mode);
    if (st != TP_OK) rb_fail(b, st);
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, v);
    ox_arg_ref(&A, lv);
    ox_arg(&A, mode);
    ox_arg(&A, tp_value_float(0));
    return rb_call(b, TP_OP_PAD, &A);
}

static const tp_value *width_of(rb *b, const tp_value *v) {
    tp_value w = tp_value_none();
    tp_status st = b->st != TP_OK ? b->st : ox_dim(b->c, v, tp_tensor_ndim(ox_meta(v)) - 1, &w);
    return rb_keep(b, st, &w);
}

/* Equal of two string tensors: both padded to the sum of their widths,
 * equal where every byte is. */
tp_status tp__onnx_string_equal(ox_ctx *c) {
    const tp_value *x = ox_in(c, 0), *y = ox_in(c, 1);
    if (!x || !y || !ox_in_str(c, 0) || !ox_in_str(c, 1)) return ox_bad(c, "Equal of a string and a non-string");
    rb b;
    rb_init(&b, c);
    const tp_value *wx = width_of(&b, x), *wy = width_of(&b, y);
    const tp_value *xp = pad_end(&b, x, wy), *yp = pad_end(&b, y, wx);
    const tp_value *r = rb_dim(&b, TP_OP_ALL, rb2(&b, TP_OP_EQ, xp, yp), -1);
    tp_value o = tp_value_none();
    tp_status st = b.st;
    if (st == TP_OK) st = tp_value_copy(r, &o);
    if (st == TP_OK) st = ox_set_out(c, 0, &o);
    rb_clear(&b);
    return st;
}

/* StringConcat: byte k of x + y is x's while k < len(x), then y's byte
 * k - len(x), then 0; the width is the sum of the two widths. */
tp_status tp__onnx_string_concat(ox_ctx *c) {
    const tp_value *x = ox_in(c, 0), *y = ox_in(c, 1);
    if (!x || !y || !ox_in_str(c, 0) || !ox_in_str(c, 1)) return ox_bad(c, "StringConcat needs two string inputs");
    rb b;
    rb_init(&b, c);
    tp_status st = broadcast_strings(&b, &x, &y);
    const tp_value *wx = width_of(&b, x), *wy = width_of(&b, y);
    const tp_value *len = rb_dim(&b, TP_OP_SUM, rb_cast(&b, rb2(&b, TP_OP_NE, x, rb_i64(&b, 0)), TP_INT64), -1);
    len = rb_dim(&b, TP_OP_UNSQUEEZE, len, -1);                                   /* [..., 1] */
    const tp_value *xp = pad_end(&b, x, wy), *yp = pad_end(&b, y, wx);            /* [..., wx + wy] */
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, width_of(&b, xp));
    ox_kw(&A, "dtype", tp_value_dtype(TP_INT64));
    const tp_value *k = rb_call(&b, TP_OP_ARANGE, &A);                          /* [wx + wy] */
    const tp_value *ky = rb2(&b, TP_OP_SUB, k, len);                               /* position in y */
    const tp_value *idx = rb2(&b, TP_OP_MAXIMUM, ky, rb_i64(&b, 0));               /* < wx + wy: in yp */
    ox_args_init(&A);
    ox_arg_ref(&A, yp);
    ox_arg_ref(&A, idx);
    ox_arg(&A, tp_value_int(-1));
    const tp_value *from_y = rb_call(&b, TP_OP_TAKE_ALONG_DIM, &A);
    const tp_value *r = rb_where(&b, rb2(&b, TP_OP_LT, k, len), xp, from_y);
    tp_value o = tp_value_none();
    st = b.st;
    if (st == TP_OK) st = ox_cast(c, r, TP_UINT8, &o);
    if (st == TP_OK) st = ox_set_out(c, 0, &o);
    rb_clear(&b);
    if (st == TP_OK) ox_set_out_str(c, 0);
    return st;
}
