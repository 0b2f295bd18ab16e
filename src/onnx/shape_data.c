/*
 * shape_data.c - ONNX inputs that carry shape data known only when the
 * program runs.
 *
 * Many ONNX ops take their shapes, axes, counts and sizes as tensor inputs:
 * Reshape's shape, Expand's shape, Tile's repeats, Pad's pads, Slice's
 * starts/ends/axes/steps, Split's sizes, Unsqueeze/Squeeze's axes, TopK's
 * k, ConstantOfShape's shape, the window functions' size. When such an
 * input is a constant the ordinary mapping (op_map.c) uses its values, and
 * when it is computed from dynamic dims shape_values.c keeps it symbolic.
 * Here it is a graph input or a tensor computed from data: the values are
 * read when the program runs. The arithmetic ONNX defines on them (0 in a
 * Reshape shape, negative axes, Slice's clamping, Expand's two-way
 * broadcasting) is done on the int64 tensor with ordinary ops, each
 * resulting number is read with item(), and the op receives those numbers
 * as its int arguments. The result's sizes are data-dependent: its node
 * gets hint metadata (ox_dd_meta) and the engine interprets the program.
 *
 * Axes given at run time become a mask over the dims (any(axes == k) with
 * negative axes wrapped; an axis out of range fails when it runs); an op whose output rank depends only on the
 * number of axes (Unsqueeze, Squeeze, a reduction) then computes each
 * output size from the mask and reshapes, so the program's ranks stay
 * static.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "onnx_impl.h"

/* Did input i arrive as a tensor known only when the program runs? */
static bool run_time(ox_ctx *c, int i) {
    const tp_value *v = ox_in(c, i);
    return v && !ox_const(v) && !ox_in_shape(c, i, NULL) && ox_meta(v);
}

static const int64_t ones_hint[TP_MAX_DIMS] = {1, 1, 1, 1, 1, 1, 1, 1};

/* x's static sizes as a 1-D int64 constant. */
static const tp_value *rb_sizes(rb *b, const tp_value *x) {
    const tp_tensor *m = ox_meta(x);
    return rb_i64s(b, tp_tensor_ndim(m), tp_tensor_sizes(m));
}

/* axes (1-D int64, n values) wrapped for rank r: where(axes < 0, axes + r,
 * axes), then looked up in arange(r) so that an axis out of range is an
 * error when the program runs. */
static const tp_value *rb_wrap(rb *b, const tp_value *axes, int64_t r) {
    if (b->st == TP_OK && (r < 0 || r > TP_MAX_DIMS)) rb_fail(b, tp_error(TP_ERR_INTERNAL, "rank %" PRId64, r));
    if (b->st != TP_OK) return &b->none;
    int64_t ks[TP_MAX_DIMS];
    for (int64_t k = 0; k < r; k++) ks[k] = k;
    const tp_value *neg = rb2(b, TP_OP_LT, axes, rb_i64(b, 0));
    const tp_value *w = rb_where(b, neg, rb2(b, TP_OP_ADD, axes, rb_i64(b, r)), axes);
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, rb_i64s(b, (int)r, ks));
    ox_arg(&A, tp_value_int(0));
    ox_arg_ref(&A, w);
    return rb_call(b, TP_OP_INDEX_SELECT, &A);
}

/* bool [r]: is dim k among the (wrapped) axes. */
static const tp_value *rb_axes_mask(rb *b, const tp_value *axes, int64_t r) {
    if (b->st == TP_OK && (r < 0 || r > TP_MAX_DIMS)) rb_fail(b, tp_error(TP_ERR_INTERNAL, "rank %" PRId64, r));
    if (b->st != TP_OK) return &b->none;
    int64_t ks[TP_MAX_DIMS] = {0};
    for (int64_t k = 0; k < r; k++) ks[k] = k;
    const tp_value *w = rb_dim(b, TP_OP_UNSQUEEZE, rb_wrap(b, axes, r), 1); /* [n, 1] */
    return rb_dim(b, TP_OP_ANY, rb2(b, TP_OP_EQ, w, rb_i64s(b, (int)r, ks)), 0);
}

/* ---- Reshape, Expand, Tile, ConstantOfShape -------------------------------------- */

/* Reshape: ONNX's 0 (copy the input's dim, unless allowzero) resolved with
 * where, then each size read with item(). */
static tp_status do_reshape(rb *b) {
    ox_ctx *c = b->c;
    const tp_value *x = ox_in(c, 0);
    int64_t n;
    const tp_value *s = rb_int_input(b, ox_in(c, 1), "shape", TP_MAX_DIMS, &n);
    if (b->st == TP_OK && !ox_attr_i(c, "allowzero", 0)) {
        const tp_tensor *xm = ox_meta(x);
        int64_t dims[TP_MAX_DIMS] = {0};
        for (int64_t i = 0; i < n && i < tp_tensor_ndim(xm); i++) dims[i] = tp_tensor_sizes(xm)[i];
        s = rb_where(b, rb2(b, TP_OP_EQ, s, rb_i64(b, 0)), rb_i64s(b, (int)n, dims), s);
    }
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ref(&A, rb_items(b, s, n));
    return rb_out(b, 0, rb_call(b, TP_OP_RESHAPE, &A), tp_tensor_dtype(ox_meta(x)), (int)n, ones_hint);
}

/* Expand: ONNX broadcasts both ways, so each output size is where(shape ==
 * 1, the input's dim, shape) over the right-aligned dims. */
static tp_status do_expand(rb *b) {
    ox_ctx *c = b->c;
    const tp_value *x = ox_in(c, 0);
    const tp_tensor *xm = ox_meta(x);
    int64_t n;
    const tp_value *s = rb_int_input(b, ox_in(c, 1), "shape", TP_MAX_DIMS, &n);
    int r = tp_tensor_ndim(xm), out_rank = r > n ? r : (int)n;
    int64_t xd[TP_MAX_DIMS], lead[TP_MAX_DIMS];
    for (int j = 0; j < out_rank; j++) {
        int di = j - (out_rank - r);
        xd[j] = di >= 0 ? tp_tensor_sizes(xm)[di] : 1;
        lead[j] = 1;
    }
    if (out_rank > n) /* the shape is shorter: its missing leading dims are 1 */
        s = rb_cat(b, rb_i64s(b, out_rank - (int)n, lead), s, 0);
    s = rb_where(b, rb2(b, TP_OP_EQ, s, rb_i64(b, 1)), rb_i64s(b, out_rank, xd), s);
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ref(&A, rb_items(b, s, out_rank));
    const tp_value *e = rb_call(b, TP_OP_EXPAND, &A);
    return rb_out(b, 0, rb1(b, TP_OP_CONTIGUOUS, e), tp_tensor_dtype(xm), out_rank, ones_hint);
}

static tp_status do_tile(rb *b) {
    ox_ctx *c = b->c;
    const tp_value *x = ox_in(c, 0);
    const tp_tensor *xm = ox_meta(x);
    int64_t n;
    const tp_value *s = rb_int_input(b, ox_in(c, 1), "repeats", TP_MAX_DIMS, &n);
    if (b->st == TP_OK && n != tp_tensor_ndim(xm)) return ox_bad(c, "repeats must have one value per dim");
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ref(&A, rb_items(b, s, n));
    return rb_out(b, 0, rb_call(b, TP_OP_REPEAT, &A), tp_tensor_dtype(xm), (int)n, ones_hint);
}

static tp_status do_constant_of_shape(rb *b) {
    int64_t n;
    const tp_value *s = rb_int_input(b, ox_in(b->c, 0), "input", TP_MAX_DIMS, &n);
    tp_dtype dt;
    double value;
    TP_TRY(ox_fill_value(b->c, &dt, &value));
    tp_value sizes = tp_value_none(), r = tp_value_none();
    const tp_value *l = rb_items(b, s, n);
    tp_status st = b->st;
    if (st == TP_OK) st = tp_value_copy(l, &sizes);
    if (st == TP_OK) st = ox_constant_of_shape_call(b->c, &sizes, &r);
    tp_value_clear(&sizes);
    return rb_out(b, 0, rb_keep(b, st, &r), dt, (int)n, ones_hint);
}

/* ---- Unsqueeze, Squeeze: reshapes to sizes computed from an axes mask -------------- */

/* sizes [out_rank] of x with the dims in `drop` (bool [r]) removed. */
static const tp_value *rb_kept_sizes(rb *b, const tp_value *x, const tp_value *drop, int64_t out_rank) {
    if (b->st == TP_OK && (out_rank < 0 || out_rank > TP_MAX_DIMS))
        rb_fail(b, tp_error(TP_ERR_INTERNAL, "rank %" PRId64, out_rank));
    if (b->st != TP_OK) return &b->none;
    int64_t js[TP_MAX_DIMS];
    for (int64_t j = 0; j < out_rank; j++) js[j] = j;
    const tp_value *keep = rb1(b, TP_OP_LOGICAL_NOT, drop);
    /* position of each kept dim among the kept ones */
    const tp_value *pos = rb2(b, TP_OP_SUB, rb_dim(b, TP_OP_CUMSUM, rb_cast(b, keep, TP_INT64), 0), rb_i64(b, 1));
    /* M[j, k]: kept dim k is output dim j */
    const tp_value *m = rb2(b, TP_OP_LOGICAL_AND, rb_dim(b, TP_OP_UNSQUEEZE, keep, 0),
                            rb2(b, TP_OP_EQ, rb_dim(b, TP_OP_UNSQUEEZE, pos, 0),
                                rb_dim(b, TP_OP_UNSQUEEZE, rb_i64s(b, (int)out_rank, js), 1)));
    const tp_value *sz = rb_where(b, m, rb_dim(b, TP_OP_UNSQUEEZE, rb_sizes(b, x), 0), rb_i64(b, 0));
    return rb_dim(b, TP_OP_SUM, sz, 1);
}

static tp_status do_unsqueeze(rb *b, bool squeeze) {
    ox_ctx *c = b->c;
    const tp_value *x = ox_in(c, 0);
    const tp_tensor *xm = ox_meta(x);
    int64_t n, r = tp_tensor_ndim(xm);
    const tp_value *axes = rb_int_input(b, ox_in(c, 1), "axes", TP_MAX_DIMS, &n);
    int64_t out_rank = squeeze ? r - n : r + n;
    if (b->st == TP_OK && (out_rank < 0 || out_rank > TP_MAX_DIMS))
        return ox_bad(c, "%" PRId64 " axes for rank %" PRId64, n, r);
    const tp_value *sizes;
    if (squeeze) {
        sizes = rb_kept_sizes(b, x, rb_axes_mask(b, axes, r), out_rank);
    } else {
        /* each output dim is 1 where listed, else the next input dim */
        const tp_value *ins = rb_axes_mask(b, axes, out_rank);
        const tp_value *pos = rb_dim(b, TP_OP_CUMSUM, rb_cast(b, rb1(b, TP_OP_LOGICAL_NOT, ins), TP_INT64), 0);
        pos = rb2(b, TP_OP_SUB, pos, rb_i64(b, 1));
        if (r > 0) {
            pos = rb2(b, TP_OP_MAXIMUM, rb2(b, TP_OP_MINIMUM, pos, rb_i64(b, r - 1)), rb_i64(b, 0));
            ox_args A;
            ox_args_init(&A);
            ox_arg_ref(&A, rb_sizes(b, x));
            ox_arg(&A, tp_value_int(0));
            ox_arg_ref(&A, pos);
            sizes = rb_where(b, ins, rb_i64(b, 1), rb_call(b, TP_OP_INDEX_SELECT, &A));
        } else {
            sizes = rb2(b, TP_OP_ADD, rb2(b, TP_OP_MUL, pos, rb_i64(b, 0)), rb_i64(b, 1));
        }
    }
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ref(&A, rb_items(b, sizes, out_rank));
    return rb_out(b, 0, rb_call(b, TP_OP_RESHAPE, &A), tp_tensor_dtype(xm), (int)out_rank, ones_hint);
}

/* ---- Slice: per axis, indices arange(start, end, step) after ONNX's clamping ------- */

static tp_status do_slice(rb *b) {
    ox_ctx *c = b->c;
    const tp_value *x = ox_in(c, 0);
    const tp_tensor *xm = ox_meta(x);
    int64_t r = tp_tensor_ndim(xm), ns, ne, na = -1, nst = -1;
    const tp_value *starts = rb_int_input(b, ox_in(c, 1), "starts", TP_MAX_DIMS, &ns);
    const tp_value *ends = rb_int_input(b, ox_in(c, 2), "ends", TP_MAX_DIMS, &ne);
    const tp_value *axes = ox_in(c, 3) ? rb_int_input(b, ox_in(c, 3), "axes", TP_MAX_DIMS, &na) : NULL;
    const tp_value *steps = ox_in(c, 4) ? rb_int_input(b, ox_in(c, 4), "steps", TP_MAX_DIMS, &nst) : NULL;
    TP_TRY(b->st);
    if (ne != ns) return ox_bad(c, "starts and ends must have the same length");
    if (na >= 0 && na != ns) return ox_bad(c, "axes must match starts");
    if (nst >= 0 && nst != ns) return ox_bad(c, "steps must match starts");
    if (ns > r) return ox_bad(c, "%" PRId64 " starts for rank %" PRId64, ns, r);
    if (!axes) { /* axes 0 .. ns-1 */
        int64_t ks[TP_MAX_DIMS];
        for (int64_t k = 0; k < ns; k++) ks[k] = k;
        axes = rb_i64s(b, (int)ns, ks);
    }
    if (!steps) {
        int64_t one[TP_MAX_DIMS] = {1, 1, 1, 1, 1, 1, 1, 1};
        steps = rb_i64s(b, (int)ns, one);
    }
    const tp_value *wax = rb_wrap(b, axes, r), *v = x;
    for (int64_t k = 0; k < r; k++) {
        int64_t d = tp_tensor_sizes(xm)[k];
        /* this dim's start/end/step, or the whole dim when no axis names it */
        const tp_value *m = rb2(b, TP_OP_EQ, wax, rb_i64(b, k));
        const tp_value *has = rb_dim(b, TP_OP_ANY, m, 0);
        const tp_value *st = rb_where(b, has, rb_dim(b, TP_OP_SUM, rb_where(b, m, steps, rb_i64(b, 0)), 0), rb_i64(b, 1));
        const tp_value *s0 = rb_where(b, has, rb_dim(b, TP_OP_SUM, rb_where(b, m, starts, rb_i64(b, 0)), 0), rb_i64(b, 0));
        const tp_value *e0 = rb_where(b, has, rb_dim(b, TP_OP_SUM, rb_where(b, m, ends, rb_i64(b, 0)), 0), rb_i64(b, d));
        const tp_value *pos = rb2(b, TP_OP_GT, st, rb_i64(b, 0));
        const tp_value *zero = rb_i64(b, 0);
        /* negative values count from the end, then clamp: [0, d] going forward, [-1, d - 1] backward */
        s0 = rb_where(b, rb2(b, TP_OP_LT, s0, zero), rb2(b, TP_OP_ADD, s0, rb_i64(b, d)), s0);
        e0 = rb_where(b, rb2(b, TP_OP_LT, e0, zero), rb2(b, TP_OP_ADD, e0, rb_i64(b, d)), e0);
        const tp_value *lo = rb_where(b, pos, zero, rb_i64(b, -1)), *hi = rb_where(b, pos, rb_i64(b, d), rb_i64(b, d - 1));
        s0 = rb2(b, TP_OP_MINIMUM, rb2(b, TP_OP_MAXIMUM, s0, zero), hi);
        e0 = rb2(b, TP_OP_MINIMUM, rb2(b, TP_OP_MAXIMUM, e0, lo), hi);
        /* an empty range: end = start (arange refuses a range against its step) */
        e0 = rb_where(b, pos, rb2(b, TP_OP_MAXIMUM, e0, s0), rb2(b, TP_OP_MINIMUM, e0, s0));
        tp_value si, ei, ti;
        tp_status stt = rb_item(b, rb_dim(b, TP_OP_UNSQUEEZE, s0, 0), 0, &si);
        if (stt == TP_OK) {
            stt = rb_item(b, rb_dim(b, TP_OP_UNSQUEEZE, e0, 0), 0, &ei);
            if (stt != TP_OK) tp_value_clear(&si);
        }
        if (stt == TP_OK) {
            stt = rb_item(b, rb_dim(b, TP_OP_UNSQUEEZE, st, 0), 0, &ti);
            if (stt != TP_OK) {
                tp_value_clear(&si);
                tp_value_clear(&ei);
            }
        }
        if (stt != TP_OK) {
            rb_fail(b, stt);
            break;
        }
        ox_args A;
        ox_args_init(&A);
        ox_arg(&A, si);
        ox_arg(&A, ei);
        ox_arg(&A, ti);
        ox_kw(&A, "dtype", tp_value_dtype(TP_INT64));
        const tp_value *idx = rb_call(b, TP_OP_ARANGE, &A);
        ox_args_init(&A);
        ox_arg_ref(&A, v);
        ox_arg(&A, tp_value_int(k));
        ox_arg_ref(&A, idx);
        v = rb_call(b, TP_OP_INDEX_SELECT, &A);
    }
    return rb_out(b, 0, v, tp_tensor_dtype(xm), (int)r, tp_tensor_sizes(xm));
}

/* ---- Split, TopK, Pad ----------------------------------------------------------- */

/* Output i: x[start:end] along axis (start, end: ints or numbers known
 * when it runs, consumed), contiguous. */
static void slice_out(rb *b, int i, const tp_value *x, int64_t axis, tp_value start, tp_value end, tp_dtype dt, int r,
                      const int64_t *hint) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(axis));
    ox_arg(&A, start);
    ox_arg(&A, end);
    rb_out(b, i, rb1(b, TP_OP_CONTIGUOUS, rb_call(b, TP_OP_SLICE, &A)), dt, r, hint);
}

/* Split with sizes given at run time: output i is x[cs[i] - sizes[i] : cs[i]]
 * along the axis (cs the running sum). */
static tp_status do_split(rb *b) {
    ox_ctx *c = b->c;
    const tp_value *x = ox_in(c, 0);
    const tp_tensor *xm = ox_meta(x);
    int r = tp_tensor_ndim(xm);
    int64_t axis = ox_attr_i(c, "axis", 0), n;
    if (axis < -r || axis >= r) return ox_bad(c, "axis %" PRId64 " out of range for rank %d", axis, r);
    if (axis < 0) axis += r;
    const tp_value *s = rb_int_input(b, ox_in(c, 1), "split", 1024, &n);
    TP_TRY(b->st);
    if (n != ox_n_out(c)) return ox_bad(c, "%" PRId64 " split sizes for %d outputs", n, ox_n_out(c));
    const tp_value *cs = rb_dim(b, TP_OP_CUMSUM, s, 0), *start = rb2(b, TP_OP_SUB, cs, s);
    int64_t hint[TP_MAX_DIMS];
    memcpy(hint, tp_tensor_sizes(xm), (size_t)r * sizeof *hint);
    for (int64_t i = 0; i < n && b->st == TP_OK; i++) {
        tp_value a, e;
        tp_status st = rb_item(b, start, i, &a);
        if (st == TP_OK && (st = rb_item(b, cs, i, &e)) != TP_OK) tp_value_clear(&a);
        if (st != TP_OK) {
            rb_fail(b, st);
            break;
        }
        if (ox_out_used(c, (int)i)) {
            slice_out(b, (int)i, x, axis, a, e, tp_tensor_dtype(xm), r, hint);
        } else {
            tp_value_clear(&a);
            tp_value_clear(&e);
        }
    }
    return b->st;
}

/* TopK with k given at run time: a stable sort along the axis (equal values
 * keep their order, as ONNX asks), its first k. */
static tp_status do_topk(rb *b) {
    ox_ctx *c = b->c;
    const tp_value *x = ox_in(c, 0);
    const tp_tensor *xm = ox_meta(x);
    int r = tp_tensor_ndim(xm);
    int64_t axis = ox_attr_i(c, "axis", -1), n;
    if (axis < -r || axis >= r) return ox_bad(c, "axis %" PRId64 " out of range for rank %d", axis, r);
    if (axis < 0) axis += r;
    const tp_value *k = rb_int_input(b, ox_in(c, 1), "K", 1, &n);
    TP_TRY(b->st);
    if (n != 1) return ox_bad(c, "input 'K' must hold one value");
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(axis));
    ox_arg(&A, tp_value_bool(ox_attr_i(c, "largest", 1) != 0));
    ox_kw(&A, "stable", tp_value_bool(true));
    const tp_value *sorted = rb_call(b, TP_OP_SORT, &A);
    TP_TRY(b->st);
    int64_t hint[TP_MAX_DIMS];
    memcpy(hint, tp_tensor_sizes(xm), (size_t)r * sizeof *hint);
    for (int i = 0; i < 2 && b->st == TP_OK; i++) {
        if (!ox_out_used(c, i)) continue;
        tp_value kv;
        tp_status st = rb_item(b, k, 0, &kv);
        if (st != TP_OK) {
            rb_fail(b, st);
            break;
        }
        slice_out(b, i, tp_value_at(sorted, i), axis, tp_value_int(0), kv, i ? TP_INT64 : tp_tensor_dtype(xm), r, hint);
    }
    return b->st;
}

/* Pad with pads (and the constant value) given at run time; axes must be
 * known at import. torch's order: last dim first, (begin, end) pairs. A
 * run-time constant value: padded with 0, then where(padded region, value). */
static tp_status do_pad(rb *b) {
    ox_ctx *c = b->c;
    const tp_value *x = ox_in(c, 0);
    const tp_tensor *xm = ox_meta(x);
    int r = tp_tensor_ndim(xm);
    const char *tmode;
    TP_TRY(ox_pad_mode(c, &tmode));
    int64_t axes[TP_MAX_DIMS], na = r;
    for (int i = 0; i < r; i++) axes[i] = i;
    const tp_value *av = ox_in(c, 3);
    if (av) {
        tp_tensor *at = ox_const(av);
        if (!at) {
            ox_note_need_constant(c, av);
            return ox_unsupported(c, "input 'axes' must be a constant (known when importing)");
        }
        if (tp_tensor_ndim(at) != 1 || tp_tensor_numel(at) > r || !tp_dtype_is_int(tp_tensor_dtype(at)))
            return ox_bad(c, "input 'axes' must be 1-D with at most %d values", r);
        na = tp_tensor_numel(at);
        for (int64_t i = 0; i < na; i++) {
            int64_t a = (int64_t)tp_tensor_item_f64(at, i);
            if (a < -r || a >= r) return ox_bad(c, "axis %" PRId64 " out of range for rank %d", a, r);
            axes[i] = a < 0 ? a + r : a;
        }
    }
    int64_t n = 0;
    const tp_value *pads = NULL;
    if (run_time(c, 1)) {
        pads = rb_int_input(b, ox_in(c, 1), "pads", 2 * TP_MAX_DIMS, &n);
    } else {
        tp_tensor *pt = ox_const(ox_in(c, 1));
        if (!pt) return ox_bad(c, "missing input 'pads'");
        tp_value pv = tp_value_none();
        TP_TRY(ox_cast(c, ox_in(c, 1), TP_INT64, &pv));
        pads = rb_keep(b, TP_OK, &pv);
        n = tp_tensor_numel(pt);
    }
    TP_TRY(b->st);
    if (n != 2 * na) return ox_bad(c, "pads has %" PRId64 " values for %" PRId64 " axes", n, na);
    tp_value l = tp_value_none();
    TP_TRY(tp_value_list(2 * r, &l));
    for (int i = 0; i < 2 * r; i++) {
        tp_value z = tp_value_int(0);
        tp_value_seq_set(&l, i, &z);
    }
    tp_status st = TP_OK;
    for (int64_t i = 0; i < na && st == TP_OK; i++) {
        int d = (int)axes[i];
        for (int e = 0; e < 2 && st == TP_OK; e++) {
            tp_value it;
            st = rb_item(b, pads, e ? na + i : i, &it);
            if (st == TP_OK) st = tp_value_seq_set(&l, 2 * (r - 1 - d) + e, &it);
        }
    }
    const tp_value *lv = rb_keep(b, st, &l);
    const tp_value *cv = ox_in(c, 2);
    bool rt_value = !strcmp(tmode, "constant") && cv && !ox_const(cv);
    double value = 0;
    if (!strcmp(tmode, "constant") && cv && ox_const(cv)) {
        if (tp_tensor_numel(ox_const(cv)) != 1) return ox_bad(c, "input 'constant_value' must hold one value");
        value = tp_tensor_item_f64(ox_const(cv), 0);
    }
    tp_value mv;
    TP_TRY(tp_value_str(tmode, &mv));
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ref(&A, lv);
    ox_arg(&A, mv);
    if (!strcmp(tmode, "constant")) ox_arg(&A, tp_value_float(value));
    const tp_value *p = rb_call(b, TP_OP_PAD, &A);
    if (rt_value) { /* where(pad(ones, 0), padded, value) */
        tp_value mode2;
        TP_TRY(tp_value_str("constant", &mode2));
        ox_args_init(&A);
        ox_arg_ref(&A, rb_cast(b, rb1(b, TP_OP_ONES_LIKE, x), TP_BOOL));
        ox_arg_ref(&A, lv);
        ox_arg(&A, mode2);
        ox_arg(&A, tp_value_float(0));
        const tp_value *inside = rb_call(b, TP_OP_PAD, &A);
        p = rb_where(b, inside, p, rb_cast(b, cv, tp_tensor_dtype(xm)));
    }
    return rb_out(b, 0, p, tp_tensor_dtype(xm), r, tp_tensor_sizes(xm));
}

/* ---- window functions ------------------------------------------------------------ */

/* HannWindow ('n'), HammingWindow ('m'), BlackmanWindow ('b') of a size
 * given at run time: the same formulas as the constant case (op_map.c),
 * on arange(size) in float64, N = size (periodic) or size - 1. */
static tp_status do_window(rb *b, char kind) {
    ox_ctx *c = b->c;
    int64_t n;
    const tp_value *size = rb_int_input(b, ox_in(c, 0), "size", 1, &n);
    tp_value item;
    TP_TRY(b->st);
    TP_TRY(rb_item(b, size, 0, &item));
    ox_args A;
    ox_args_init(&A);
    ox_arg(&A, item);
    ox_kw(&A, "dtype", tp_value_dtype(TP_FLOAT64));
    const tp_value *x = rb_call(b, TP_OP_ARANGE, &A);
    const tp_value *N = rb_cast(b, rb_select(b, size, 0), TP_FLOAT64);
    if (ox_attr_i(c, "periodic", 1) == 0) N = rb2(b, TP_OP_SUB, N, rb_i64(b, 1));
    tp_value tw = tp_value_none(), pi = tp_value_none();
    tp_status st = ox_scalar_tensor(TP_FLOAT64, 2 * M_PI, &tw);
    if (st == TP_OK) st = ox_scalar_tensor(TP_FLOAT64, M_PI, &pi);
    const tp_value *twp = rb_keep(b, st, &tw), *pip = rb_keep(b, st, &pi);
    const tp_value *w;
    if (kind == 'n') {
        const tp_value *sn = rb1(b, TP_OP_SIN, rb2(b, TP_OP_DIV, rb2(b, TP_OP_MUL, x, pip), N));
        w = rb2(b, TP_OP_MUL, sn, sn);
    } else {
        const tp_value *c1 = rb1(b, TP_OP_COS, rb2(b, TP_OP_DIV, rb2(b, TP_OP_MUL, x, twp), N));
        double a0 = kind == 'm' ? 25.0 / 46.0 : 0.42, a1 = kind == 'm' ? 1 - 25.0 / 46.0 : 0.5;
        tp_value va = tp_value_none(), vb = tp_value_none();
        st = ox_scalar_tensor(TP_FLOAT64, a0, &va);
        if (st == TP_OK) st = ox_scalar_tensor(TP_FLOAT64, a1, &vb);
        const tp_value *pa = rb_keep(b, st, &va), *pb = rb_keep(b, st, &vb);
        w = rb2(b, TP_OP_SUB, pa, rb2(b, TP_OP_MUL, pb, c1));
        if (kind == 'b') {
            tp_value v4 = tp_value_none(), v8 = tp_value_none();
            st = ox_scalar_tensor(TP_FLOAT64, 4 * M_PI, &v4);
            if (st == TP_OK) st = ox_scalar_tensor(TP_FLOAT64, 0.08, &v8);
            const tp_value *p4 = rb_keep(b, st, &v4), *p8 = rb_keep(b, st, &v8);
            const tp_value *c2 = rb1(b, TP_OP_COS, rb2(b, TP_OP_DIV, rb2(b, TP_OP_MUL, x, p4), N));
            w = rb2(b, TP_OP_ADD, w, rb2(b, TP_OP_MUL, p8, c2));
        }
    }
    tp_dtype dt = TP_FLOAT32;
    int64_t odt = ox_attr_i(c, "output_datatype", 1);
    int32_t et = (int32_t)odt;
    if (odt != et || tp__onnx_dtype(et, &dt) != TP_OK)
        return ox_unsupported(c, "output_datatype %" PRId64 " (%s)", odt, tp__onnx_dtype_name(et));
    if (!tp_dtype_is_float(dt)) w = rb1(b, TP_OP_TRUNC, w);
    int64_t hint = 1;
    return rb_out(b, 0, rb_cast(b, w, dt), dt, 1, &hint);
}

/* ---- entry ----------------------------------------------------------------------- */

tp_status tp__onnx_convert_shape_data(ox_ctx *c, const char *op, bool *done) {
    *done = false;
    int64_t opset = ox_opset(c);
    int which = -1; /* 1: handled here when input `at` is a run-time tensor */
    int at = 1;
    char kind = 0;
    if (!strcmp(op, "Reshape") && opset >= 5) which = 0;
    else if (!strcmp(op, "Expand")) which = 1;
    else if (!strcmp(op, "Tile") && opset >= 6) which = 2;
    else if (!strcmp(op, "ConstantOfShape")) which = 3, at = 0;
    else if (!strcmp(op, "Unsqueeze") && opset >= 13) which = 4;
    else if (!strcmp(op, "Squeeze") && opset >= 13) which = 5;
    else if (!strcmp(op, "Slice") && opset >= 10) which = 6;
    else if (!strcmp(op, "Split") && opset >= 13) which = 7;
    else if (!strcmp(op, "TopK") && opset >= 10) which = 8;
    else if (!strcmp(op, "Pad") && opset >= 11) which = 9;
    else if (!strcmp(op, "HannWindow")) which = 10, at = 0, kind = 'n';
    else if (!strcmp(op, "HammingWindow")) which = 10, at = 0, kind = 'm';
    else if (!strcmp(op, "BlackmanWindow")) which = 10, at = 0, kind = 'b';
    if (which < 0) return TP_OK;
    bool any = run_time(c, at);
    if (which == 6)
        for (int i = 2; i <= 4; i++) any |= run_time(c, i);
    if (which == 9) any |= run_time(c, 2) && ox_meta(ox_in(c, 2)) && ox_in(c, 1);
    if (!any) return TP_OK;
    /* the data input's sizes are used as numbers: it must be statically shaped */
    if (at == 1 && (ox_in_dyn(c, 0) || !ox_meta(ox_in(c, 0)) || ox_in_shape(c, 0, NULL))) return TP_OK;
    rb b;
    rb_init(&b, c);
    tp_status st;
    switch (which) {
    case 0: st = do_reshape(&b); break;
    case 1: st = do_expand(&b); break;
    case 2: st = do_tile(&b); break;
    case 3: st = do_constant_of_shape(&b); break;
    case 4: st = do_unsqueeze(&b, false); break;
    case 5: st = do_unsqueeze(&b, true); break;
    case 6: st = do_slice(&b); break;
    case 7: st = do_split(&b); break;
    case 8: st = do_topk(&b); break;
    case 9: st = do_pad(&b); break;
    default: st = do_window(&b, kind); break;
    }
    if (st == TP_OK) st = b.st;
    rb_clear(&b);
    if (st == TP_OK) *done = true;
    return st;
}

/* ---- for op_map.c ----------------------------------------------------------------- */

tp_status ox_run_time_ints(ox_ctx *c, const tp_value *t, const char *what, int64_t max, tp_value *list, int64_t *n) {
    rb b;
    rb_init(&b, c);
    const tp_value *v = rb_int_input(&b, t, what, max, n);
    const tp_value *l = rb_items(&b, v, *n);
    tp_status st = b.st;
    if (st == TP_OK) st = tp_value_copy(l, list);
    rb_clear(&b);
    return st;
}

tp_status ox_run_time_axes_mask(ox_ctx *c, const tp_value *axes, int64_t rank, tp_value *mask, int64_t *n) {
    rb b;
    rb_init(&b, c);
    const tp_value *v = rb_int_input(&b, axes, "axes", TP_MAX_DIMS, n);
    const tp_value *m = rb_axes_mask(&b, v, rank);
    tp_status st = b.st;
    if (st == TP_OK) st = tp_value_copy(m, mask);
    rb_clear(&b);
    return st;
}

/* Reduce `in` with op (sum, mean, amax, amin, prod, logsumexp: op(x, [dim],
 * keepdim)) over axes given at run time: each dim reduced where the mask
 * names it (the result broadcast back with where), then cut to size 1
 * there, and without keepdims reshaped to the remaining sizes. */
tp_status ox_run_time_reduce(ox_ctx *c, const tp_value *in, const tp_value *axes, tp_op op, bool keep, tp_value *out) {
    const tp_tensor *xm = ox_meta(in);
    int64_t r = tp_tensor_ndim(xm), n;
    for (int64_t k = 0; k < r; k++)
        if (tp_tensor_sizes(xm)[k] == 0) return ox_unsupported(c, "axes given at run time on an input with an empty dim");
    rb b;
    rb_init(&b, c);
    const tp_value *v = rb_int_input(&b, axes, "axes", TP_MAX_DIMS, &n);
    const tp_value *mask = rb_axes_mask(&b, v, r), *y = in;
    if (b.st == TP_OK && n > r) rb_fail(&b, ox_bad(c, "%" PRId64 " axes for rank %" PRId64, n, r));
    for (int64_t k = 0; k < r; k++) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, y);
        ox_arg_ints(&A, &k, 1);
        ox_arg(&A, tp_value_bool(true));
        y = rb_where(&b, rb_select(&b, mask, k), rb_call(&b, op, &A), y);
    }
    for (int64_t k = 0; k < r; k++) {
        const tp_value *len = rb_where(&b, rb_select(&b, mask, k), rb_i64(&b, 1), rb_i64(&b, tp_tensor_sizes(xm)[k]));
        tp_value e;
        tp_status st = rb_item(&b, rb_dim(&b, TP_OP_UNSQUEEZE, len, 0), 0, &e);
        if (st != TP_OK) {
            rb_fail(&b, st);
            break;
        }
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, y);
        ox_arg(&A, tp_value_int(k));
        ox_arg(&A, tp_value_int(0));
        ox_arg(&A, e);
        y = rb_call(&b, TP_OP_SLICE, &A);
    }
    int64_t out_rank = keep ? r : r - n;
    if (!keep) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, y);
        ox_arg_ref(&A, rb_items(&b, rb_kept_sizes(&b, in, mask, out_rank), out_rank));
        y = rb_call(&b, TP_OP_RESHAPE, &A);
    } else {
        y = rb1(&b, TP_OP_CONTIGUOUS, y);
    }
    tp_status st = b.st;
    if (st == TP_OK) st = ox_dd_meta(c, y, tp_tensor_dtype(xm), (int)out_rank, keep ? tp_tensor_sizes(xm) : ones_hint);
    if (st == TP_OK) st = tp_value_copy(y, out);
    rb_clear(&b);
    return st;
}

/* ---- Resize with scales, sizes or roi given at run time ---------------------------- */

/* Element i of a 1-D tensor as a 0-d float64 tensor. */
static const tp_value *rb_elem_f64(rb *b, const tp_value *t, int64_t i) { return rb_cast(b, rb_select(b, t, i), TP_FLOAT64); }

/* [out] -> [out, 1, ..., 1] (k trailing ones) to broadcast along one dim. */
static const tp_value *rb_col(rb *b, const tp_value *w, const tp_value *out_item, int k) {
    tp_value l = tp_value_none(), it = tp_value_none();
    tp_status st = b->st != TP_OK ? b->st : tp_value_list(k + 1, &l);
    if (st == TP_OK) st = tp_value_copy(out_item, &it);
    if (st == TP_OK) st = tp_value_seq_set(&l, 0, &it);
    for (int i = 1; i <= k && st == TP_OK; i++) {
        tp_value one = tp_value_int(1);
        st = tp_value_seq_set(&l, i, &one);
    }
    const tp_value *lv = rb_keep(b, st, &l);
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, w);
    ox_arg_ref(&A, lv);
    return rb_call(b, TP_OP_RESHAPE, &A);
}

tp_status ox_run_time_resize(ox_ctx *c, const tp_value *x, const ox_resize *rz, tp_value *out) {
    const tp_tensor *xm = ox_meta(x);
    int nd = tp_tensor_ndim(xm);
    tp_dtype xdt = tp_tensor_dtype(xm);
    rb b;
    rb_init(&b, c);
    const tp_value *scales = rz->scales ? rb_cast(&b, rz->scales, TP_FLOAT64) : NULL;
    const tp_value *sizes = NULL, *roi = rz->roi ? rb_cast(&b, rz->roi, TP_FLOAT64) : NULL;
    /* the dims resized: rz->axes, or all */
    int na = rz->n_axes > 0 ? rz->n_axes : nd, at[TP_MAX_DIMS]; /* at[d]: position of dim d among the axes, or -1 */
    for (int d = 0; d < nd; d++) at[d] = rz->n_axes > 0 ? -1 : d;
    for (int i = 0; i < rz->n_axes; i++) at[rz->axes[i]] = i;
    if (rz->sizes) {
        int64_t n;
        sizes = rb_int_input(&b, rz->sizes, "sizes", TP_MAX_DIMS, &n);
        if (b.st == TP_OK && n != na) rb_fail(&b, ox_bad(c, "input 'sizes' has %" PRId64 " values for %d axes", n, na));
    } else if (scales && b.st == TP_OK && tp_tensor_numel(ox_meta(scales)) != na) {
        rb_fail(&b, ox_bad(c, "input 'scales' has %" PRId64 " values for %d axes", tp_tensor_numel(ox_meta(scales)), na));
    }
    if (roi && b.st == TP_OK && tp_tensor_numel(ox_meta(roi)) != 2 * na)
        rb_fail(&b, ox_bad(c, "tf_crop_and_resize needs input 'roi' with %d values", 2 * na));
    int taps = !strcmp(rz->mode, "nearest") ? 1 : !strcmp(rz->mode, "linear") ? 2 : 4;
    const char *ctm = rz->ctm;
    const tp_value *v = x, *mask = NULL, *zero = rb_f64(&b, 0), *one = rb_f64(&b, 1);
    /* keep_aspect_ratio_policy: one scale for the axes, the min (not_larger)
     * or max (not_smaller) of sizes / input sizes; each size then
     * round-half-up(scale * input size) */
    const tp_value *kept = NULL;
    if (sizes && rz->keep_policy) {
        for (int d = 0; d < nd; d++) {
            if (at[d] < 0) continue;
            const tp_value *r = rb2(&b, TP_OP_DIV, rb_cast(&b, rb_select(&b, sizes, at[d]), TP_FLOAT64),
                                    rb_f64(&b, (double)tp_tensor_sizes(xm)[d]));
            kept = !kept ? r : rb2(&b, rz->keep_policy == 1 ? TP_OP_MINIMUM : TP_OP_MAXIMUM, kept, r);
        }
    }
    for (int d = 0; d < nd && b.st == TP_OK; d++) {
        int64_t in = tp_tensor_sizes(xm)[d];
        const tp_value *fin = rb_f64(&b, (double)in), *scale, *outn;
        if (at[d] < 0) { /* not among the axes: unchanged */
            scale = one;
            outn = rb_i64(&b, in);
        } else if (kept) {
            scale = kept;
            outn = rb_cast(&b, rb1(&b, TP_OP_FLOOR, rb2(&b, TP_OP_ADD, rb2(&b, TP_OP_MUL, kept, fin), rb_f64(&b, 0.5))),
                           TP_INT64);
        } else if (sizes) {
            outn = rb_select(&b, sizes, at[d]);
            scale = rb2(&b, TP_OP_DIV, rb_cast(&b, outn, TP_FLOAT64), fin);
        } else {
            scale = rb_elem_f64(&b, scales, at[d]);
            outn = rb_cast(&b, rb1(&b, TP_OP_FLOOR, rb2(&b, TP_OP_MUL, fin, scale)), TP_INT64);
        }
        if (at[d] < 0) continue; /* not resized (roi [0, 1] would map it onto itself) */
        if (b.st == TP_OK && in == 0) {
            rb_fail(&b, ox_bad(c, "dim %d of the input is empty", d));
            break;
        }
        tp_value out_item;
        tp_status st = rb_item(&b, rb_dim(&b, TP_OP_UNSQUEEZE, outn, 0), 0, &out_item);
        if (st != TP_OK) {
            rb_fail(&b, st);
            break;
        }
        const tp_value *oi = rb_keep(&b, TP_OK, &out_item);
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, oi);
        ox_kw(&A, "dtype", tp_value_dtype(TP_FLOAT64));
        const tp_value *o = rb_call(&b, TP_OP_ARANGE, &A), *fout = rb_cast(&b, outn, TP_FLOAT64);
        const tp_value *half = rb_f64(&b, 0.5), *crd;
        /* the coordinate in the input of each output position */
        if (roi) {
            const tp_value *s0 = at[d] < 0 ? zero : rb_elem_f64(&b, roi, at[d]);
            const tp_value *e0 = at[d] < 0 ? one : rb_elem_f64(&b, roi, na + at[d]);
            const tp_value *span = rb_f64(&b, (double)(in - 1));
            const tp_value *many = rb2(&b, TP_OP_ADD, rb2(&b, TP_OP_MUL, s0, span),
                                       rb2(&b, TP_OP_DIV, rb2(&b, TP_OP_MUL, rb2(&b, TP_OP_MUL, o, rb2(&b, TP_OP_SUB, e0, s0)), span),
                                           rb2(&b, TP_OP_SUB, fout, one)));
            const tp_value *single = rb2(&b, TP_OP_MUL, rb2(&b, TP_OP_MUL, half, rb2(&b, TP_OP_ADD, s0, e0)), span);
            crd = rb_where(&b, rb2(&b, TP_OP_GT, fout, one), many, single);
            const tp_value *ok = rb2(&b, TP_OP_LOGICAL_AND, rb2(&b, TP_OP_GE, crd, zero), rb2(&b, TP_OP_LE, crd, span));
            crd = rb_where(&b, ok, crd, zero); /* any in-range taps: the value is replaced */
            ok = rb_col(&b, ok, oi, nd - d - 1);
            mask = mask ? rb2(&b, TP_OP_LOGICAL_AND, mask, ok) : ok;
        } else if (!strcmp(ctm, "half_pixel_symmetric")) { /* the output's centre on the input's */
            const tp_value *adj = rb2(&b, TP_OP_DIV, fout, rb2(&b, TP_OP_MUL, fin, scale));
            const tp_value *off = rb2(&b, TP_OP_MUL, rb_f64(&b, (double)in / 2), rb2(&b, TP_OP_SUB, one, adj));
            crd = rb2(&b, TP_OP_ADD, off, rb2(&b, TP_OP_SUB, rb2(&b, TP_OP_DIV, rb2(&b, TP_OP_ADD, o, half), scale), half));
        } else if (!strcmp(ctm, "half_pixel") || !strcmp(ctm, "pytorch_half_pixel")) {
            crd = rb2(&b, TP_OP_SUB, rb2(&b, TP_OP_DIV, rb2(&b, TP_OP_ADD, o, half), scale), half);
            if (ctm[0] == 'p') crd = rb_where(&b, rb2(&b, TP_OP_GT, fout, one), crd, zero);
        } else if (!strcmp(ctm, "align_corners")) {
            const tp_value *len = rb2(&b, TP_OP_MUL, fin, scale);
            crd = rb2(&b, TP_OP_DIV, rb2(&b, TP_OP_MUL, o, rb_f64(&b, (double)(in - 1))), rb2(&b, TP_OP_SUB, len, one));
            crd = rb_where(&b, rb2(&b, TP_OP_EQ, len, one), zero, crd);
        } else if (!strcmp(ctm, "tf_half_pixel_for_nn")) {
            crd = rb2(&b, TP_OP_DIV, rb2(&b, TP_OP_ADD, o, half), scale);
        } else { /* asymmetric */
            crd = rb2(&b, TP_OP_DIV, o, scale);
        }
        const tp_value *fl = rb1(&b, TP_OP_FLOOR, crd), *lim = rb_f64(&b, (double)(in - 1));
        const tp_value *idx[4], *w[4] = {NULL, NULL, NULL, NULL};
        if (taps == 1) {
            const char *nm = rz->nearest_mode;
            const tp_value *i;
            if (!strcmp(nm, "floor")) i = fl;
            else if (!strcmp(nm, "ceil")) i = rb1(&b, TP_OP_CEIL, crd);
            else { /* round half to even, except exactly .5: floor or ceil as asked */
                const tp_value *tie = rb2(&b, TP_OP_EQ, rb2(&b, TP_OP_SUB, crd, fl), half);
                i = rb_where(&b, tie, !strcmp(nm, "round_prefer_ceil") ? rb2(&b, TP_OP_ADD, fl, one) : fl, rb1(&b, TP_OP_ROUND, crd));
            }
            idx[0] = i;
        } else {
            const tp_value *r = rb2(&b, TP_OP_SUB, crd, fl);
            if (taps == 2) {
                idx[0] = fl, idx[1] = rb2(&b, TP_OP_ADD, fl, one);
                w[0] = rb2(&b, TP_OP_SUB, one, r), w[1] = r;
            } else { /* cubic: taps floor - 1 .. floor + 2, Keys' coefficients with A */
                const tp_value *a = rb_f64(&b, rz->cubic_a);
                const tp_value *dist[4] = {rb2(&b, TP_OP_ADD, r, one), r, rb2(&b, TP_OP_SUB, one, r),
                                           rb2(&b, TP_OP_SUB, rb_f64(&b, 2), r)};
                for (int t = 0; t < 4; t++) {
                    const tp_value *s = dist[t];
                    idx[t] = rb2(&b, TP_OP_ADD, fl, rb_f64(&b, (double)(t - 1)));
                    if (t == 1 || t == 2) { /* ((A + 2) s - (A + 3)) s^2 + 1 */
                        const tp_value *p = rb2(&b, TP_OP_SUB, rb2(&b, TP_OP_MUL, rb_f64(&b, rz->cubic_a + 2), s),
                                                rb_f64(&b, rz->cubic_a + 3));
                        w[t] = rb2(&b, TP_OP_ADD, rb2(&b, TP_OP_MUL, rb2(&b, TP_OP_MUL, p, s), s), one);
                    } else { /* ((A s - 5A) s + 8A) s - 4A */
                        const tp_value *p = rb2(&b, TP_OP_SUB, rb2(&b, TP_OP_MUL, a, s), rb_f64(&b, 5 * rz->cubic_a));
                        p = rb2(&b, TP_OP_ADD, rb2(&b, TP_OP_MUL, p, s), rb_f64(&b, 8 * rz->cubic_a));
                        w[t] = rb2(&b, TP_OP_SUB, rb2(&b, TP_OP_MUL, p, s), rb_f64(&b, 4 * rz->cubic_a));
                    }
                }
                if (rz->exclude_outside) { /* taps outside the input weigh 0, the rest renormalised */
                    const tp_value *sum = NULL;
                    for (int t = 0; t < 4; t++) {
                        const tp_value *out_of = rb2(&b, TP_OP_LOGICAL_OR, rb2(&b, TP_OP_LT, idx[t], zero), rb2(&b, TP_OP_GT, idx[t], lim));
                        w[t] = rb_where(&b, out_of, zero, w[t]);
                        sum = sum ? rb2(&b, TP_OP_ADD, sum, w[t]) : w[t];
                    }
                    const tp_value *nz = rb2(&b, TP_OP_NE, sum, zero), *den = rb_where(&b, nz, sum, one);
                    for (int t = 0; t < 4; t++) w[t] = rb2(&b, TP_OP_DIV, w[t], den);
                }
            }
        }
        const tp_value *acc = NULL;
        for (int t = 0; t < taps; t++) {
            const tp_value *ii = rb_cast(&b, rb2(&b, TP_OP_MINIMUM, rb2(&b, TP_OP_MAXIMUM, idx[t], zero), lim), TP_INT64);
            ox_args_init(&A);
            ox_arg_ref(&A, v);
            ox_arg(&A, tp_value_int(d));
            ox_arg_ref(&A, ii);
            const tp_value *sel = rb_call(&b, TP_OP_INDEX_SELECT, &A);
            if (w[t]) sel = rb2(&b, TP_OP_MUL, sel, rb_col(&b, rb_cast(&b, w[t], xdt), oi, nd - d - 1));
            acc = acc ? rb2(&b, TP_OP_ADD, acc, sel) : sel;
        }
        v = acc;
    }
    if (mask) v = rb_where(&b, mask, v, rb_cast(&b, rb_f64(&b, rz->extrapolation), xdt));
    tp_status st = b.st;
    if (st == TP_OK) st = ox_dd_meta(c, v, xdt, nd, tp_tensor_sizes(xm));
    if (st == TP_OK) st = tp_value_copy(v, out);
    rb_clear(&b);
    return st;
}

/* ---- CenterCropPad ----------------------------------------------------------------- */

/* x // 2 for a non-negative int64 tensor. */
static const tp_value *half_of(rb *b, const tp_value *x) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(2));
    tp_value mode = tp_value_none();
    tp_status st = tp_value_str("floor", &mode);
    ox_kw(&A, "rounding_mode", mode);
    if (st != TP_OK) rb_fail(b, st);
    return rb_call(b, TP_OP_DIV, &A);
}

/* Element i of a 1-D int64 tensor as a number (kept). */
static const tp_value *item_at(rb *b, const tp_value *t, int64_t i) {
    tp_value v = tp_value_none();
    tp_status st = b->st != TP_OK ? b->st : rb_item(b, t, i, &v);
    return rb_keep(b, st, &v);
}

/* CenterCropPad (opset 18): each listed dim cropped or zero-padded to its
 * target size around the centre (the odd element at the end); the target
 * shape may be given at run time (then read with item()). */
tp_status tp__onnx_center_crop_pad(ox_ctx *c) {
    const tp_value *x = ox_in(c, 0), *shape = ox_in(c, 1);
    if (!x || !shape || !ox_meta(x) || !ox_meta(shape)) return ox_bad(c, "needs input_data and shape");
    if (ox_in_dyn(c, 0)) return ox_unsupported(c, "CenterCropPad of a dynamically shaped input");
    const tp_tensor *xm = ox_meta(x);
    int r = tp_tensor_ndim(xm);
    int64_t axes[TP_MAX_DIMS];
    int na;
    TP_TRY(ox_attr_ints(c, "axes", axes, TP_MAX_DIMS, &na));
    if (na < 0) {
        na = r;
        for (int i = 0; i < r; i++) axes[i] = i;
    }
    for (int i = 0; i < na; i++) {
        if (axes[i] < -r || axes[i] >= r) return ox_bad(c, "axis %" PRId64 " out of range for rank %d", axes[i], r);
        if (axes[i] < 0) axes[i] += r;
    }
    rb b;
    rb_init(&b, c);
    int64_t n;
    const tp_value *t = rb_int_input(&b, shape, "shape", TP_MAX_DIMS, &n);
    if (b.st == TP_OK && n != na) rb_fail(&b, ox_bad(c, "shape has %" PRId64 " values for %d axes", n, na));
    const tp_value *v = x, *zero = rb_i64(&b, 0);
    tp_value pads = tp_value_none();
    tp_status st = b.st != TP_OK ? b.st : tp_value_list(2 * r, &pads);
    for (int i = 0; st == TP_OK && i < 2 * r; i++) {
        tp_value z = tp_value_int(0);
        st = tp_value_seq_set(&pads, i, &z);
    }
    rb_fail(&b, st);
    for (int i = 0; i < na && b.st == TP_OK; i++) {
        int a = (int)axes[i];
        const tp_value *d = rb_i64(&b, tp_tensor_sizes(xm)[a]), *want = rb_select(&b, t, i);
        const tp_value *start = half_of(&b, rb2(&b, TP_OP_MAXIMUM, rb2(&b, TP_OP_SUB, d, want), zero));
        const tp_value *end = rb2(&b, TP_OP_ADD, start, rb2(&b, TP_OP_MINIMUM, want, d));
        const tp_value *grow = rb2(&b, TP_OP_MAXIMUM, rb2(&b, TP_OP_SUB, want, d), zero), *before = half_of(&b, grow);
        const tp_value *s_i = item_at(&b, rb_dim(&b, TP_OP_UNSQUEEZE, start, 0), 0);
        const tp_value *e_i = item_at(&b, rb_dim(&b, TP_OP_UNSQUEEZE, end, 0), 0);
        const tp_value *b_i = item_at(&b, rb_dim(&b, TP_OP_UNSQUEEZE, before, 0), 0);
        const tp_value *a_i = item_at(&b, rb_dim(&b, TP_OP_UNSQUEEZE, rb2(&b, TP_OP_SUB, grow, before), 0), 0);
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, v);
        ox_arg(&A, tp_value_int(a));
        ox_arg_ref(&A, s_i);
        ox_arg_ref(&A, e_i);
        v = rb_call(&b, TP_OP_SLICE, &A);
        tp_value bc = tp_value_none(), ac = tp_value_none();
        st = b.st;
        if (st == TP_OK) st = tp_value_copy(b_i, &bc);
        if (st == TP_OK) st = tp_value_seq_set(&pads, 2 * (r - 1 - a), &bc);
        if (st == TP_OK) st = tp_value_copy(a_i, &ac);
        if (st == TP_OK) st = tp_value_seq_set(&pads, 2 * (r - 1 - a) + 1, &ac);
        tp_value_clear(&bc);
        tp_value_clear(&ac);
        rb_fail(&b, st);
    }
    const tp_value *pv = rb_keep(&b, b.st, &pads);
    tp_value mode = tp_value_none();
    st = b.st != TP_OK ? b.st : tp_value_str("constant", &mode);
    rb_fail(&b, st);
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, v);
    ox_arg_ref(&A, pv);
    ox_arg(&A, mode);
    ox_arg(&A, tp_value_float(0));
    const tp_value *y = rb_call(&b, TP_OP_PAD, &A);
    st = rb_out(&b, 0, y, tp_tensor_dtype(xm), r, tp_tensor_sizes(xm));
    rb_clear(&b);
    return st;
}
