/*
 * serde_compose.c - tensorplay functions that the reader writes as a few of
 * our ops (TP_SERDE_COMPOSE entries of op_map.c): fused helpers (add_relu,
 * fused_mul_add, silu_mul, rotary_embedding, ...), the ATen forms that
 * return tuples (std_mean, native_layer_norm, ...), the forms taking integer
 * enums (nll_loss's reduction=1, grid_sampler's modes), the *_copy forms of
 * ops returning several tensors, and sequence helpers (atleast_2d,
 * meshgrid, block_diag, tensordot, ...). A result of several tensors
 * cannot be a program's whole output (tensorplay's signature records one
 * tensor for it); its items can.
 *
 * Each function reads the call's arguments by position or keyword (with
 * tensorplay.functional's parameter names and defaults), checks what it
 * needs from the operands' metadata, and adds nodes: intermediate ones
 * under fresh names, the last one under the document node's name. A
 * function returning several tensors leaves the document node a tuple of
 * nodes (its items can be read, as tensorplay's code does). Saved archives
 * write the ops, which tensorplay reads back.
 */
#include <inttypes.h>
#include <string.h>

#include "../cpu/kernel_util.h"
#include "serde_impl.h"

typedef struct cctx {
    reader *r;
    doc_node *d;
    const char *fn; /* the function's name, for messages */
    const tp_value *args, *kwargs;
} cctx;

/* Argument i (positional) or `name` (keyword), or NULL. */
static const tp_value *arg(const cctx *c, int i, const char *name) {
    if (i >= 0 && i < tp_value_len(c->args)) return tp_value_at(c->args, i);
    return name ? tp_value_dict_get(c->kwargs, name) : NULL;
}

static tp_status fail(const cctx *c, tp_status st, const char *what) {
    return tp__sd_report(c->r, st, "node %s: %s: %s", c->d->name, c->fn, what);
}

/* The operand's metadata (a node or a constant tensor), or NULL. */
static const tp_tensor *meta(const tp_value *v) { return v ? tp__sd_ref_meta_tensor(v) : NULL; }

static bool is_tensor(const tp_value *v) { return v && (v->kind == TP_VAL_NODE || v->kind == TP_VAL_TENSOR); }

static tp_status need_meta(const cctx *c, const tp_value *v, const char *what, const tp_tensor **t) {
    *t = meta(v);
    if (*t) return TP_OK;
    return tp__sd_report(c->r, TP_ERR_UNSUPPORTED, "node %s: %s: %s must be a tensor of known shape", c->d->name, c->fn,
                         what);
}

static tp_status need_static(const cctx *c) {
    if (!c->r->dynamic) return TP_OK;
    return tp__sd_report(c->r, TP_ERR_UNSUPPORTED,
                         "node %s: %s needs static shapes, and the program has dynamic dims", c->d->name, c->fn);
}

/* Add op(vals) as a node: the document node's own when last, else under a
 * fresh name. *out receives a reference to it. */
static tp_status node(const cctx *c, bool last, tp_op op, const tp_value *vals, int n, tp_value *out) {
    char *tmp = NULL;
    tp_status st = TP_OK;
    if (!last && (st = tp__sd_fresh_name(c->r, c->d->name, tp_op_name(op), &tmp)) != TP_OK) return tp__sd_note(c->r, st);
    tp_node *nd = NULL;
    st = tp__sd_add_call_values(c->r, last ? c->d->name : tmp, op, vals, n, &nd);
    tp_free(tmp);
    if (st != TP_OK) return st;
    if (last) tp__sd_set_node(c->d, nd);
    *out = tp_value_node(nd);
    return TP_OK;
}

/* The same with keyword arguments (names[i] = kvals[i]), for keyword-only
 * schema arguments. */
static tp_status node_kw(const cctx *c, bool last, tp_op op, const tp_value *vals, int n, const char *const *names,
                         const tp_value *kvals, int nk, tp_value *out) {
    tp_value pos = tp_value_none(), kw = tp_value_none();
    tp_status st = tp_value_tuple(n, &pos);
    for (int i = 0; st == TP_OK && i < n; i++) {
        tp_value cp;
        st = tp_value_copy(&vals[i], &cp);
        if (st == TP_OK) st = tp_value_seq_set(&pos, i, &cp);
    }
    if (st == TP_OK) st = tp_value_dict(&kw);
    for (int i = 0; st == TP_OK && i < nk; i++) {
        tp_value cp;
        st = tp_value_copy(&kvals[i], &cp);
        if (st == TP_OK) st = tp_value_dict_set(&kw, names[i], &cp);
    }
    char *tmp = NULL;
    if (st == TP_OK && !last) st = tp__sd_fresh_name(c->r, c->d->name, tp_op_name(op), &tmp);
    if (st != TP_OK) {
        tp_value_clear(&pos);
        tp_value_clear(&kw);
        return tp__sd_note(c->r, st);
    }
    tp_node *nd = NULL;
    st = tp__sd_add_call(c->r, last ? c->d->name : tmp, op, &pos, &kw, &nd);
    tp_free(tmp);
    tp_value_clear(&pos);
    tp_value_clear(&kw);
    if (st != TP_OK) return st;
    if (last) tp__sd_set_node(c->d, nd);
    *out = tp_value_node(nd);
    return TP_OK;
}

#define N(last, op, out, ...)                                                                                 \
    do {                                                                                                      \
        const tp_value v_[] = {__VA_ARGS__};                                                                  \
        TP_TRY(node(c, last, TP_OP_##op, v_, (int)(sizeof v_ / sizeof v_[0]), out));                           \
    } while (0)

/* The document node becomes the tuple of items (node references). */
static tp_status set_tuple(const cctx *c, const tp_value *items, int n) {
    tp_value t;
    tp_status st = tp_value_tuple(n, &t);
    for (int i = 0; st == TP_OK && i < n; i++) t.u.seq.items[i] = items[i];
    if (st != TP_OK) return tp__sd_note(c->r, st);
    tp__sd_set_folded(c->d, &t);
    return TP_OK;
}

/* An int list value (caller clears). */
static tp_status ints(const cctx *c, const int64_t *v, int n, tp_value *out) {
    tp_status st = tp_value_int_list(v, n, out);
    return st == TP_OK ? TP_OK : tp__sd_note(c->r, st);
}

/* The tensors of a *args function: its positional arguments, or the items
 * of a single list/tuple argument. */
static tp_status tensor_args(const cctx *c, const tp_value **items, int max, int *n) {
    const tp_value *a = c->args;
    if (tp_value_len(a) == 1 && tp_value_is_seq(tp_value_at(a, 0))) a = tp_value_at(a, 0);
    if (tp_value_len(a) < 1 || tp_value_len(a) > max) return fail(c, TP_ERR_UNSUPPORTED, "expected 1 to 32 tensors");
    *n = (int)tp_value_len(a);
    for (int i = 0; i < *n; i++) {
        items[i] = tp_value_at(a, i);
        if (!is_tensor(items[i])) return fail(c, TP_ERR_UNSUPPORTED, "every argument must be a tensor");
    }
    return TP_OK;
}

/* ATen's reduction enum: 0 none, 1 mean, 2 sum. */
static tp_status reduction(const cctx *c, const tp_value *v, tp_value *out) {
    int64_t k = v && v->kind != TP_VAL_NONE ? tp_value_as_i64(v) : 1;
    static const char *const names[] = {"none", "mean", "sum"};
    if (k < 0 || k > 2) return fail(c, TP_ERR_INVALID_ARG, "reduction must be 0 (none), 1 (mean) or 2 (sum)");
    tp_status st = tp_value_str(names[k], out);
    return st == TP_OK ? TP_OK : tp__sd_note(c->r, st);
}

static tp_value opt(const tp_value *v, tp_value dflt) { return v ? *v : dflt; }

/* ---- fused elementwise helpers ---- */

static tp_status c_fused_mul_add(cctx *c) {
    tp_value m;
    N(false, MUL, &m, opt(arg(c, 0, "input"), tp_value_none()), opt(arg(c, 1, "other"), tp_value_none()));
    N(true, ADD, &m, m, opt(arg(c, 2, "addend"), tp_value_none()));
    return TP_OK;
}

static tp_status c_silu_mul(cctx *c) { /* silu(gate) * up (silu_mul, fused_swiglu) */
    tp_value s;
    N(false, SILU, &s, opt(arg(c, 0, "gate"), tp_value_none()));
    N(true, MUL, &s, s, opt(arg(c, 1, "up"), tp_value_none()));
    return TP_OK;
}

static tp_status c_silu_and_mul(cctx *c) { /* silu(x[..., :h]) * x[..., h:] */
    const tp_value *x = arg(c, 0, "input");
    const tp_tensor *t;
    TP_TRY(need_meta(c, x, "input", &t));
    int nd = tp_tensor_ndim(t);
    if (nd < 1 || tp_tensor_sizes(t)[nd - 1] % 2) return fail(c, TP_ERR_SHAPE, "the last dim must be even");
    int64_t h = tp_tensor_sizes(t)[nd - 1] / 2;
    tp_value a, b;
    N(false, NARROW, &a, *x, tp_value_int(-1), tp_value_int(0), tp_value_int(h));
    N(false, NARROW, &b, *x, tp_value_int(-1), tp_value_int(h), tp_value_int(h));
    N(false, SILU, &a, a);
    N(true, MUL, &a, a, b);
    return TP_OK;
}

static tp_status c_add_relu(cctx *c) {
    tp_value s;
    N(false, ADD, &s, opt(arg(c, 0, "input"), tp_value_none()), opt(arg(c, 1, "other"), tp_value_none()));
    N(true, RELU, &s, s);
    return TP_OK;
}

static tp_status c_rsub(cctx *c) { /* other - alpha * input */
    const tp_value *alpha = arg(c, 2, "alpha");
    tp_value m;
    N(false, NEG, &m, opt(arg(c, 0, "input"), tp_value_none()));
    if (alpha && !(tp_value_is_number(alpha) && tp_value_as_f64(alpha) == 1.0)) N(false, MUL, &m, m, *alpha);
    N(true, ADD, &m, m, opt(arg(c, 1, "other"), tp_value_none()));
    return TP_OK;
}

static tp_status c_conv2d_relu(cctx *c) {
    tp_value v;
    tp_value one2;
    TP_TRY(ints(c, (int64_t[]){1, 1}, 2, &one2));
    tp_value zero2;
    tp_status st = ints(c, (int64_t[]){0, 0}, 2, &zero2);
    if (st != TP_OK) {
        tp_value_clear(&one2);
        return st;
    }
    const tp_value vals[] = {opt(arg(c, 0, "input"), tp_value_none()), opt(arg(c, 1, "weight"), tp_value_none()),
                             opt(arg(c, 2, "bias"), tp_value_none()),  opt(arg(c, 3, "stride"), one2),
                             opt(arg(c, 4, "padding"), zero2),          opt(arg(c, 5, "dilation"), one2),
                             opt(arg(c, 6, "groups"), tp_value_int(1))};
    st = node(c, false, TP_OP_CONV2D, vals, 7, &v);
    tp_value_clear(&one2);
    tp_value_clear(&zero2);
    TP_TRY(st);
    N(true, RELU, &v, v);
    return TP_OK;
}

/* ---- (std | var, mean) ---- */

static tp_status c_stat_mean(cctx *c, tp_op stat) {
    const tp_value *x = arg(c, 0, "input"), *dim = arg(c, 1, "dim"), *unb = arg(c, 2, "unbiased"),
                   *keep = arg(c, 3, "keepdim");
    if (!is_tensor(x)) return fail(c, TP_ERR_UNSUPPORTED, "input must be a tensor");
    tp_value dims = dim && !(tp_value_is_seq(dim) && tp_value_len(dim) == 0) ? *dim : tp_value_none();
    tp_value k = opt(keep, tp_value_bool(false));
    bool unbiased = !unb || unb->kind == TP_VAL_NONE || tp_value_as_i64(unb) != 0;
    static const char *const names[] = {"correction", "keepdim"};
    tp_value items[2];
    TP_TRY(node_kw(c, false, stat, (tp_value[]){*x, dims}, 2, names, (tp_value[]){tp_value_int(unbiased), k}, 2,
                   &items[0]));
    N(false, MEAN, &items[1], *x, dims, k);
    return set_tuple(c, items, 2);
}

static tp_status c_std_mean(cctx *c) { return c_stat_mean(c, TP_OP_STD); }
static tp_status c_var_mean(cctx *c) { return c_stat_mean(c, TP_OP_VAR); }

/* ---- atleast_Nd, column_stack, dstack ---- */

/* x reshaped to at least nd dims (PyTorch's rules: 1-D [n] -> [1, n] for 2
 * and [1, n, 1] for 3; 2-D [m, n] -> [m, n, 1]). */
static tp_status atleast(const cctx *c, const tp_value *x, int want, bool last, tp_value *out) {
    const tp_tensor *t;
    TP_TRY(need_meta(c, x, "input", &t));
    int nd = tp_tensor_ndim(t);
    tp_value v = *x;
    if (nd >= want) {
        if (last) N(true, TO, out, v); /* the same values */
        else *out = v;
        return TP_OK;
    }
    /* unsqueeze positions, in order */
    int pos[3], n = 0;
    if (want == 1) pos[n++] = 0;
    else if (want == 2) {
        if (nd == 0) pos[n++] = 0;
        pos[n++] = 0;
    } else {
        if (nd == 0) pos[n++] = 0, pos[n++] = 0, pos[n++] = 0;
        else if (nd == 1) pos[n++] = 0, pos[n++] = 2;
        else pos[n++] = 2;
    }
    for (int i = 0; i < n; i++) N(last && i == n - 1, UNSQUEEZE, &v, v, tp_value_int(pos[i]));
    *out = v;
    return TP_OK;
}

static tp_status c_atleast(cctx *c, int want) {
    const tp_value *items[32];
    int n;
    TP_TRY(tensor_args(c, items, 32, &n));
    if (n == 1) {
        tp_value v;
        return atleast(c, items[0], want, true, &v);
    }
    tp_value outs[32];
    for (int i = 0; i < n; i++) {
        tp_value v;
        TP_TRY(atleast(c, items[i], want, false, &v));
        if (v.kind != TP_VAL_NODE || v.u.node == (items[i]->kind == TP_VAL_NODE ? items[i]->u.node : NULL))
            N(false, TO, &v, v);
        outs[i] = v;
    }
    return set_tuple(c, outs, n);
}

static tp_status c_atleast_1d(cctx *c) { return c_atleast(c, 1); }
static tp_status c_atleast_2d(cctx *c) { return c_atleast(c, 2); }
static tp_status c_atleast_3d(cctx *c) { return c_atleast(c, 3); }

/* A list value of the given items (caller clears). */
static tp_status list_of(const cctx *c, const tp_value *items, int n, tp_value *out) {
    tp_status st = tp_value_list(n, out);
    for (int i = 0; st == TP_OK && i < n; i++) {
        tp_value cp;
        st = tp_value_copy(&items[i], &cp);
        if (st == TP_OK) st = tp_value_seq_set(out, i, &cp);
    }
    if (st != TP_OK) {
        tp_value_clear(out);
        return tp__sd_note(c->r, st);
    }
    return TP_OK;
}

/* cat of the items along dim, as the document node. */
static tp_status cat_items(const cctx *c, const tp_value *items, int n, int dim, tp_op op) {
    tp_value list, out;
    TP_TRY(list_of(c, items, n, &list));
    tp_value vals[2] = {list, tp_value_int(dim)};
    tp_status st = node(c, true, op, vals, 2, &out);
    tp_value_clear(&list);
    return st;
}

static tp_status c_column_stack(cctx *c) { /* 0-d/1-d as columns, then hstack */
    const tp_value *items[32];
    int n;
    TP_TRY(tensor_args(c, items, 32, &n));
    tp_value cols[32];
    for (int i = 0; i < n; i++) {
        const tp_tensor *t;
        TP_TRY(need_meta(c, items[i], "each tensor", &t));
        tp_value v = *items[i];
        if (tp_tensor_ndim(t) == 0) N(false, UNSQUEEZE, &v, v, tp_value_int(0));
        if (tp_tensor_ndim(t) <= 1) N(false, UNSQUEEZE, &v, v, tp_value_int(1));
        cols[i] = v;
    }
    return cat_items(c, cols, n, 1, TP_OP_CAT);
}

static tp_status c_dstack(cctx *c) {
    const tp_value *items[32];
    int n;
    TP_TRY(tensor_args(c, items, 32, &n));
    tp_value v3[32];
    for (int i = 0; i < n; i++) TP_TRY(atleast(c, items[i], 3, false, &v3[i]));
    return cat_items(c, v3, n, 2, TP_OP_CAT);
}

/* ---- broadcast_tensors, meshgrid, cartesian_prod ---- */

static tp_status c_broadcast_tensors(cctx *c) {
    const tp_value *items[32];
    int n;
    TP_TRY(tensor_args(c, items, 32, &n));
    TP_TRY(need_static(c));
    int64_t shape[TP_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < n; i++) {
        const tp_tensor *t;
        TP_TRY(need_meta(c, items[i], "each tensor", &t));
        int k = tp_tensor_ndim(t);
        if (k > nd) {
            for (int q = nd - 1; q >= 0; q--) shape[q + k - nd] = shape[q];
            for (int q = 0; q < k - nd; q++) shape[q] = 1;
            nd = k;
        }
        for (int q = 0; q < k; q++) {
            int64_t s = tp_tensor_sizes(t)[q], *dst = &shape[nd - k + q];
            if (*dst == 1) *dst = s;
            else if (s != 1 && s != *dst) return fail(c, TP_ERR_SHAPE, "the shapes do not broadcast");
        }
    }
    tp_value size, outs[32];
    TP_TRY(ints(c, shape, nd, &size));
    tp_status st = TP_OK;
    for (int i = 0; i < n && st == TP_OK; i++) {
        tp_value vals[2] = {*items[i], size};
        st = node(c, false, TP_OP_EXPAND, vals, 2, &outs[i]);
    }
    tp_value_clear(&size);
    TP_TRY(st);
    return set_tuple(c, outs, n);
}

/* Grids of 1-D (or 0-D) tensors: out[i] = t_i viewed along dim i, expanded. */
static tp_status meshgrid(const cctx *c, const tp_value *const *items, int n, bool xy, tp_value *outs) {
    TP_TRY(need_static(c));
    int64_t len[32];
    for (int i = 0; i < n; i++) {
        const tp_tensor *t;
        TP_TRY(need_meta(c, items[i], "each tensor", &t));
        if (tp_tensor_ndim(t) > 1) return fail(c, TP_ERR_SHAPE, "expects 0D or 1D tensors");
        len[i] = tp_tensor_numel(t);
    }
    int64_t full[32];
    for (int i = 0; i < n; i++) full[i] = len[i];
    if (xy && n >= 2) full[0] = len[1], full[1] = len[0];
    tp_value size;
    TP_TRY(ints(c, full, n, &size));
    tp_status st = TP_OK;
    for (int i = 0; i < n && st == TP_OK; i++) {
        int at = xy && n >= 2 && i < 2 ? 1 - i : i;
        int64_t shape[32];
        for (int q = 0; q < n; q++) shape[q] = q == at ? len[i] : 1;
        tp_value sh, v;
        if ((st = ints(c, shape, n, &sh)) != TP_OK) break;
        tp_value vals[2] = {*items[i], sh};
        st = node(c, false, TP_OP_RESHAPE, vals, 2, &v);
        tp_value_clear(&sh);
        if (st != TP_OK) break;
        tp_value ev[2] = {v, size};
        st = node(c, false, TP_OP_EXPAND, ev, 2, &outs[i]);
    }
    tp_value_clear(&size);
    return st;
}

static tp_status c_meshgrid(cctx *c) {
    const tp_value *items[32];
    int n;
    const tp_value *ts = arg(c, 0, "tensors");
    if (!ts || !tp_value_is_seq(ts) || tp_value_len(ts) < 1 || tp_value_len(ts) > 32)
        return fail(c, TP_ERR_UNSUPPORTED, "expects a list of 1 to 32 tensors");
    n = (int)tp_value_len(ts);
    for (int i = 0; i < n; i++) items[i] = tp_value_at(ts, i);
    const tp_value *ix = arg(c, 1, "indexing");
    bool xy = ix && ix->kind == TP_VAL_STR && !strcmp(ix->u.s, "xy");
    if (ix && ix->kind == TP_VAL_STR && !xy && strcmp(ix->u.s, "ij"))
        return fail(c, TP_ERR_INVALID_ARG, "indexing must be 'ij' or 'xy'");
    tp_value outs[32];
    TP_TRY(meshgrid(c, items, n, xy, outs));
    return set_tuple(c, outs, n);
}

static tp_status c_cartesian_prod(cctx *c) {
    const tp_value *items[32];
    int n;
    TP_TRY(tensor_args(c, items, 32, &n));
    tp_value v;
    if (n == 1) {
        N(true, TO, &v, *items[0]);
        return TP_OK;
    }
    tp_value grids[32];
    TP_TRY(meshgrid(c, items, n, false, grids));
    for (int i = 0; i < n; i++) N(false, FLATTEN, &grids[i], grids[i], tp_value_int(0), tp_value_int(-1));
    tp_value list, out;
    TP_TRY(list_of(c, grids, n, &list));
    tp_value vals[2] = {list, tp_value_int(1)};
    tp_status st = node(c, true, TP_OP_STACK, vals, 2, &out);
    tp_value_clear(&list);
    return st;
}

/* ---- block_diag, tensordot, chain_matmul ---- */

static tp_status c_block_diag(cctx *c) {
    const tp_value *items[32];
    int n;
    TP_TRY(tensor_args(c, items, 32, &n));
    TP_TRY(need_static(c));
    int64_t cols[32], total = 0;
    tp_value mats[32];
    for (int i = 0; i < n; i++) {
        const tp_tensor *t;
        TP_TRY(need_meta(c, items[i], "each tensor", &t));
        int nd = tp_tensor_ndim(t);
        if (nd > 2) return fail(c, TP_ERR_SHAPE, "each input must have 2 or fewer dimensions");
        tp_value v = *items[i];
        if (nd == 0) N(false, UNSQUEEZE, &v, v, tp_value_int(0));
        if (nd <= 1) N(false, UNSQUEEZE, &v, v, tp_value_int(0));
        cols[i] = nd == 2 ? tp_tensor_sizes(t)[1] : nd == 1 ? tp_tensor_sizes(t)[0] : 1;
        total += cols[i];
        mats[i] = v;
    }
    int64_t before = 0;
    for (int i = 0; i < n; i++) {
        tp_value pad;
        TP_TRY(ints(c, (int64_t[]){before, total - before - cols[i], 0, 0}, 4, &pad));
        tp_value vals[2] = {mats[i], pad};
        tp_status st = node(c, false, TP_OP_PAD, vals, 2, &mats[i]);
        tp_value_clear(&pad);
        TP_TRY(st);
        before += cols[i];
    }
    return cat_items(c, mats, n, 0, TP_OP_CAT);
}

/* tensordot(a, b, dims_a, dims_b) as einsum: contracted dims share letters. */
static tp_status c_tensordot(cctx *c) {
    const tp_value *a = arg(c, 0, "input"), *b = arg(c, 1, "other"), *da = arg(c, 2, "dims_self"),
                   *db = arg(c, 3, "dims_other");
    const tp_tensor *ta, *tb;
    TP_TRY(need_meta(c, a, "input", &ta));
    TP_TRY(need_meta(c, b, "other", &tb));
    int na = tp_tensor_ndim(ta), nb = tp_tensor_ndim(tb);
    if (!da || !db || !tp_value_is_seq(da) || !tp_value_is_seq(db) || tp_value_len(da) != tp_value_len(db))
        return fail(c, TP_ERR_INVALID_ARG, "both dimension lists should have same length");
    if (na + nb > 52) return fail(c, TP_ERR_UNSUPPORTED, "too many dims");
    char la[27] = {0}, lb[27] = {0}, out[53] = {0};
    for (int i = 0; i < na; i++) la[i] = (char)('a' + i);
    for (int i = 0; i < nb; i++) lb[i] = (char)('A' + i);
    bool ca[26] = {false}, cb[26] = {false};
    for (int64_t k = 0; k < tp_value_len(da); k++) {
        const tp_value *x = tp_value_at(da, k), *y = tp_value_at(db, k);
        if (x->kind != TP_VAL_INT || y->kind != TP_VAL_INT) return fail(c, TP_ERR_INVALID_ARG, "dims must be ints");
        int64_t i = x->u.i < 0 ? x->u.i + na : x->u.i, j = y->u.i < 0 ? y->u.i + nb : y->u.i;
        if (i < 0 || i >= na || j < 0 || j >= nb || ca[i] || cb[j])
            return fail(c, TP_ERR_INDEX, "dimension out of range or repeated");
        ca[i] = cb[j] = true;
        lb[j] = la[i];
    }
    int o = 0;
    for (int i = 0; i < na; i++)
        if (!ca[i]) out[o++] = la[i];
    for (int j = 0; j < nb; j++)
        if (!cb[j]) out[o++] = lb[j];
    char eq[128];
    snprintf(eq, sizeof eq, "%s,%s->%s", la, lb, out);
    tp_value s, list, res;
    tp_status st = tp_value_str(eq, &s);
    if (st != TP_OK) return tp__sd_note(c->r, st);
    st = list_of(c, (tp_value[]){*a, *b}, 2, &list);
    if (st == TP_OK) {
        tp_value vals[2] = {s, list};
        st = node(c, true, TP_OP_EINSUM, vals, 2, &res);
        tp_value_clear(&list);
    }
    tp_value_clear(&s);
    return st;
}

static tp_status c_chain_matmul(cctx *c) {
    const tp_value *items[32];
    int n;
    TP_TRY(tensor_args(c, items, 32, &n));
    tp_value v = *items[0];
    if (n == 1) {
        N(true, TO, &v, v);
        return TP_OK;
    }
    for (int i = 1; i < n; i++) N(i == n - 1, MM, &v, v, *items[i]);
    return TP_OK;
}

/* ---- cdist, isin, trapezoid, vander, norms ---- */

static tp_status c_cdist(cctx *c) { /* ||x1[..., i, :] - x2[..., j, :]||_p */
    const tp_value *x1 = arg(c, 0, "x1"), *x2 = arg(c, 1, "x2"), *p = arg(c, 2, "p");
    const tp_tensor *t1, *t2;
    TP_TRY(need_meta(c, x1, "x1", &t1));
    TP_TRY(need_meta(c, x2, "x2", &t2));
    if (tp_tensor_ndim(t1) < 2 || tp_tensor_ndim(t2) < 2)
        return fail(c, TP_ERR_SHAPE, "cdist only supports at least 2D tensors");
    tp_value a, b, dims;
    N(false, UNSQUEEZE, &a, *x1, tp_value_int(-2));
    N(false, UNSQUEEZE, &b, *x2, tp_value_int(-3));
    N(false, SUB, &a, a, b);
    TP_TRY(ints(c, (int64_t[]){-1}, 1, &dims));
    tp_value vals[3] = {a, p ? *p : tp_value_float(2.0), dims};
    tp_status st = node(c, true, TP_OP_NORM, vals, 3, &b);
    tp_value_clear(&dims);
    return st;
}

static tp_status c_isin(cctx *c) {
    const tp_value *e = arg(c, 0, "elements"), *te = arg(c, 1, "test_elements"), *inv = arg(c, 3, "invert");
    if (!inv) inv = tp_value_dict_get(c->kwargs, "invert");
    if (!is_tensor(e)) return fail(c, TP_ERR_UNSUPPORTED, "elements must be a tensor");
    bool invert = inv && tp_value_as_i64(inv) != 0;
    tp_value flat, u, r;
    if (is_tensor(te)) {
        N(false, FLATTEN, &flat, *te, tp_value_int(0), tp_value_int(-1));
        N(false, UNSQUEEZE, &u, *e, tp_value_int(-1));
        N(false, EQ, &r, u, flat);
        N(!invert, ANY, &r, r, tp_value_int(-1));
    } else {
        if (!te || !tp_value_is_number(te)) return fail(c, TP_ERR_UNSUPPORTED, "test_elements must be a tensor or number");
        N(!invert, EQ, &r, *e, *te);
    }
    if (invert) N(true, LOGICAL_NOT, &r, r);
    return TP_OK;
}

/* trapezoid(y, x=None, dx=1, dim=-1) and its cumulative form. */
static tp_status trapezoid(cctx *c, bool cumulative, double dx_default) {
    const tp_value *y = arg(c, 0, "y"), *x = arg(c, 1, "x"), *dx = arg(c, 2, "dx"), *dimv = arg(c, 3, "dim");
    const tp_tensor *t;
    TP_TRY(need_meta(c, y, "y", &t));
    int64_t dim = dimv && dimv->kind == TP_VAL_INT ? dimv->u.i : -1;
    int nd = tp_tensor_ndim(t);
    if (nd == 0) return fail(c, TP_ERR_INDEX, "trapezoid: y must have at least one dimension");
    if (dim < -nd || dim >= nd) return fail(c, TP_ERR_INDEX, "dim out of range");
    int64_t len = tp_tensor_sizes(t)[dim < 0 ? dim + nd : dim];
    if (len == 0) return fail(c, TP_ERR_UNSUPPORTED, "trapezoid over an empty dim");
    tp_value lo, hi, s;
    tp_value d = tp_value_int(dim);
    N(false, SLICE, &lo, *y, d, tp_value_int(0), tp_value_int(len - 1), tp_value_int(1));
    N(false, SLICE, &hi, *y, d, tp_value_int(1), tp_value_none(), tp_value_int(1));
    N(false, ADD, &s, lo, hi);
    if (is_tensor(x)) {
        const tp_tensor *tx;
        TP_TRY(need_meta(c, x, "x", &tx));
        int64_t xd = tp_tensor_ndim(tx) == 1 ? 0 : dim;
        int64_t xl = tp_tensor_sizes(tx)[xd < 0 ? xd + tp_tensor_ndim(tx) : xd];
        tp_value a, b, w;
        N(false, SLICE, &a, *x, tp_value_int(xd), tp_value_int(0), tp_value_int(xl - 1), tp_value_int(1));
        N(false, SLICE, &b, *x, tp_value_int(xd), tp_value_int(1), tp_value_none(), tp_value_int(1));
        N(false, SUB, &w, b, a);
        if (tp_tensor_ndim(tx) == 1 && nd > 1 && dim != -1 && dim != nd - 1) {
            /* a 1-D x runs along dim: shape it to broadcast there */
            int64_t shape[TP_MAX_DIMS];
            for (int q = 0; q < nd; q++) shape[q] = 1;
            shape[dim < 0 ? dim + nd : dim] = xl - 1;
            tp_value sh;
            TP_TRY(ints(c, shape, nd, &sh));
            tp_value vals[2] = {w, sh};
            tp_status st = node(c, false, TP_OP_RESHAPE, vals, 2, &w);
            tp_value_clear(&sh);
            TP_TRY(st);
        }
        N(false, MUL, &s, s, w);
        N(false, DIV, &s, s, tp_value_float(2.0));
    } else {
        double h = dx && tp_value_is_number(dx) ? tp_value_as_f64(dx) : dx_default;
        N(false, MUL, &s, s, tp_value_float(h / 2.0));
    }
    if (cumulative) N(true, CUMSUM, &s, s, d);
    else {
        tp_value dims;
        TP_TRY(ints(c, (int64_t[]){dim}, 1, &dims));
        tp_value vals[2] = {s, dims};
        tp_status st = node(c, true, TP_OP_SUM, vals, 2, &s);
        tp_value_clear(&dims);
        TP_TRY(st);
    }
    return TP_OK;
}

static tp_status c_trapezoid(cctx *c) { return trapezoid(c, false, 1.0); }
static tp_status c_cumulative_trapezoid(cctx *c) { return trapezoid(c, true, 1.0); }

static tp_status c_vander(cctx *c) { /* x[:, None] ** (N-1 .. 0), or increasing */
    const tp_value *x = arg(c, 0, "x"), *nv = arg(c, 1, "N"), *inc = arg(c, 2, "increasing");
    const tp_tensor *t;
    TP_TRY(need_meta(c, x, "x", &t));
    if (tp_tensor_ndim(t) != 1) return fail(c, TP_ERR_SHAPE, "x must be a one-dimensional tensor");
    int64_t n = nv && nv->kind == TP_VAL_INT ? nv->u.i : tp_tensor_sizes(t)[0];
    if (n < 0) return fail(c, TP_ERR_INVALID_ARG, "N must be non-negative");
    bool increasing = inc && tp_value_as_i64(inc) != 0;
    tp_value pw, u;
    tp_dtype dt = tp_dtype_is_float(tp_tensor_dtype(t)) ? tp_tensor_dtype(t) : TP_INT64;
    static const char *const dn[] = {"dtype"};
    tp_value range[3] = {tp_value_int(increasing ? 0 : n - 1), tp_value_int(increasing ? n : -1),
                         tp_value_int(increasing ? 1 : -1)};
    TP_TRY(node_kw(c, false, TP_OP_ARANGE, range, 3, dn, (tp_value[]){tp_value_dtype(dt)}, 1, &pw));
    N(false, UNSQUEEZE, &u, *x, tp_value_int(1));
    if (!tp_dtype_is_float(tp_tensor_dtype(t)) && tp_tensor_dtype(t) != TP_INT64)
        N(false, TO, &u, u, tp_value_dtype(TP_INT64));
    N(true, POW, &u, u, pw);
    return TP_OK;
}

static tp_status c_norm_except_dim(cctx *c) { /* ||v|| over every dim but dim, kept (dim -1: over all) */
    const tp_value *x = arg(c, 0, "v"), *p = arg(c, 1, "pow"), *dv = arg(c, 2, "dim");
    const tp_tensor *t;
    TP_TRY(need_meta(c, x, "v", &t));
    int64_t dim = dv && dv->kind == TP_VAL_INT ? dv->u.i : 0;
    int nd = tp_tensor_ndim(t);
    tp_value v;
    if (dim == -1) {
        N(true, NORM, &v, *x, opt(p, tp_value_int(2)));
        return TP_OK;
    }
    if (dim < 0 || dim >= nd) return fail(c, TP_ERR_INDEX, "dim out of range");
    int64_t dims[TP_MAX_DIMS];
    int k = 0;
    for (int q = 0; q < nd; q++)
        if (q != dim) dims[k++] = q;
    tp_value dl;
    TP_TRY(ints(c, dims, k, &dl));
    tp_value vals[4] = {*x, opt(p, tp_value_int(2)), dl, tp_value_bool(true)};
    tp_status st = node(c, true, TP_OP_NORM, vals, 4, &v);
    tp_value_clear(&dl);
    return st;
}

/* ---- native_* norms: (out, mean, rstd) ---- */

/* mean and rsqrt(biased var + eps) of x over dims, keepdim as asked. */
static tp_status mean_rstd(const cctx *c, tp_value x, const tp_value *dims, bool keep, double eps, tp_value *mean,
                           tp_value *rstd) {
    N(false, MEAN, mean, x, *dims, tp_value_bool(keep));
    static const char *const names[] = {"correction", "keepdim"};
    tp_value v;
    TP_TRY(node_kw(c, false, TP_OP_VAR, (tp_value[]){x, *dims}, 2, names,
                   (tp_value[]){tp_value_int(0), tp_value_bool(keep)}, 2, &v));
    N(false, ADD, &v, v, tp_value_float(eps));
    N(false, RSQRT, rstd, v);
    return TP_OK;
}

static tp_status c_native_layer_norm(cctx *c) {
    const tp_value *x = arg(c, 0, "input"), *ns = arg(c, 1, "normalized_shape"), *w = arg(c, 2, "weight"),
                   *b = arg(c, 3, "bias"), *eps = arg(c, 4, "eps");
    const tp_tensor *t;
    TP_TRY(need_meta(c, x, "input", &t));
    if (!ns || !tp_value_is_seq(ns)) return fail(c, TP_ERR_INVALID_ARG, "normalized_shape must be a list");
    int nd = tp_tensor_ndim(t), k = (int)tp_value_len(ns);
    if (k < 1 || k > nd) return fail(c, TP_ERR_SHAPE, "normalized_shape does not fit the input");
    double e = eps ? tp_value_as_f64(eps) : 1e-5;
    tp_value out, mean, rstd, dims;
    N(false, LAYER_NORM, &out, *x, *ns, opt(w, tp_value_none()), opt(b, tp_value_none()), tp_value_float(e));
    int64_t dl[TP_MAX_DIMS];
    for (int q = 0; q < k; q++) dl[q] = nd - k + q;
    TP_TRY(ints(c, dl, k, &dims));
    tp_status st = mean_rstd(c, *x, &dims, false, e, &mean, &rstd);
    tp_value_clear(&dims);
    TP_TRY(st);
    /* tensorplay returns them flat: [prod(leading dims)] ([1] for none) */
    tp_value flat;
    TP_TRY(ints(c, (int64_t[]){-1}, 1, &flat));
    tp_value mv[2] = {mean, flat}, rv[2] = {rstd, flat};
    st = node(c, false, TP_OP_RESHAPE, mv, 2, &mean);
    if (st == TP_OK) st = node(c, false, TP_OP_RESHAPE, rv, 2, &rstd);
    tp_value_clear(&flat);
    TP_TRY(st);
    tp_value items[3] = {out, mean, rstd};
    return set_tuple(c, items, 3);
}

static tp_status c_native_group_norm(cctx *c) {
    const tp_value *x = arg(c, 0, "input"), *w = arg(c, 1, "weight"), *b = arg(c, 2, "bias"), *nv = arg(c, 3, "N"),
                   *gv = arg(c, 6, "group"), *eps = arg(c, 7, "eps");
    const tp_tensor *t;
    TP_TRY(need_meta(c, x, "input", &t));
    if (!nv || nv->kind != TP_VAL_INT || !gv || gv->kind != TP_VAL_INT || gv->u.i < 1)
        return fail(c, TP_ERR_INVALID_ARG, "N and group must be ints");
    double e = eps ? tp_value_as_f64(eps) : 1e-5;
    tp_value out, g, mean, rstd, dims, shape;
    N(false, GROUP_NORM, &out, *x, *gv, opt(w, tp_value_none()), opt(b, tp_value_none()), tp_value_float(e));
    TP_TRY(ints(c, (int64_t[]){nv->u.i, gv->u.i, -1}, 3, &shape));
    tp_value rv[2] = {*x, shape};
    tp_status st = node(c, false, TP_OP_RESHAPE, rv, 2, &g);
    tp_value_clear(&shape);
    TP_TRY(st);
    TP_TRY(ints(c, (int64_t[]){2}, 1, &dims));
    st = mean_rstd(c, g, &dims, false, e, &mean, &rstd);
    tp_value_clear(&dims);
    TP_TRY(st);
    tp_value items[3] = {out, mean, rstd};
    return set_tuple(c, items, 3);
}

static tp_status c_native_batch_norm(cctx *c) { /* eval: (out, empty, empty) as ATen */
    const tp_value *x = arg(c, 0, "input"), *w = arg(c, 1, "weight"), *b = arg(c, 2, "bias"),
                   *rm = arg(c, 3, "running_mean"), *rv = arg(c, 4, "running_var"), *tr = arg(c, 5, "training"),
                   *mom = arg(c, 6, "momentum"), *eps = arg(c, 7, "eps");
    if (tr && tp_value_as_i64(tr) != 0)
        return fail(c, TP_ERR_UNSUPPORTED, "training=True updates running statistics and returns the batch's; only "
                                           "training=False is supported");
    tp_value out, e1, e2, empty;
    N(false, BATCH_NORM, &out, x ? *x : tp_value_none(), opt(rm, tp_value_none()), opt(rv, tp_value_none()),
      opt(w, tp_value_none()), opt(b, tp_value_none()), tp_value_bool(false), opt(mom, tp_value_float(0.1)),
      opt(eps, tp_value_float(1e-5)));
    TP_TRY(ints(c, (int64_t[]){0}, 1, &empty));
    tp_value ev[2] = {x ? *x : tp_value_none(), empty};
    tp_status st = node(c, false, TP_OP_NEW_ZEROS, ev, 2, &e1);
    if (st == TP_OK) st = node(c, false, TP_OP_NEW_ZEROS, ev, 2, &e2);
    tp_value_clear(&empty);
    TP_TRY(st);
    tp_value items[3] = {out, e1, e2};
    return set_tuple(c, items, 3);
}

/* ---- losses with ATen's integer reduction ---- */

/* nll_loss_nd: the loss; nll_loss and nll_loss2d: (loss, total_weight),
 * total_weight of shape [1] as tensorplay gives it: the summed weights of
 * the targets not ignored (their count without weights). */
static tp_status nll(cctx *c, bool with_total) {
    const tp_value *x = arg(c, 0, "input"), *t = arg(c, 1, "target"), *w = arg(c, 2, "weight"),
                   *ig = arg(c, 4, "ignore_index");
    if (!is_tensor(x) || !is_tensor(t)) return fail(c, TP_ERR_UNSUPPORTED, "input and target must be tensors");
    tp_value red, loss;
    TP_TRY(reduction(c, arg(c, 3, "reduction"), &red));
    tp_value ignore = opt(ig, tp_value_int(-100));
    tp_value vals[5] = {*x, *t, opt(w, tp_value_none()), red, ignore};
    tp_status st = node(c, !with_total, TP_OP_NLL_LOSS, vals, 5, &loss);
    tp_value_clear(&red);
    if (st != TP_OK || !with_total) return st;
    const tp_tensor *tx;
    TP_TRY(need_meta(c, x, "input", &tx));
    tp_value mask, keep, total, one;
    N(false, NE, &mask, *t, ignore);
    N(false, TO, &keep, mask, tp_value_dtype(tp_tensor_dtype(tx)));
    if (is_tensor(w)) { /* weight[target] where kept: the ignored index may be out of range */
        tp_value safe, flat, picked;
        N(false, WHERE, &safe, mask, *t, tp_value_int(0));
        N(false, FLATTEN, &flat, safe, tp_value_int(0), tp_value_int(-1));
        N(false, INDEX_SELECT, &picked, *w, tp_value_int(0), flat);
        N(false, FLATTEN, &keep, keep, tp_value_int(0), tp_value_int(-1));
        N(false, MUL, &keep, keep, picked);
    }
    N(false, SUM, &total, keep);
    TP_TRY(ints(c, (int64_t[]){1}, 1, &one));
    tp_value rv[2] = {total, one};
    st = node(c, false, TP_OP_RESHAPE, rv, 2, &total);
    tp_value_clear(&one);
    TP_TRY(st);
    tp_value items[2] = {loss, total};
    return set_tuple(c, items, 2);
}

static tp_status c_nll_loss(cctx *c) { return nll(c, true); }
static tp_status c_nll_loss_nd(cctx *c) { return nll(c, false); }

static tp_status c_cross_entropy_loss(cctx *c) {
    tp_value red, v;
    TP_TRY(reduction(c, arg(c, 3, "reduction"), &red));
    tp_value vals[6] = {opt(arg(c, 0, "input"), tp_value_none()),     opt(arg(c, 1, "target"), tp_value_none()),
                        opt(arg(c, 2, "weight"), tp_value_none()),    red,
                        opt(arg(c, 4, "ignore_index"), tp_value_int(-100)), opt(arg(c, 5, "label_smoothing"), tp_value_float(0))};
    tp_status st = node(c, true, TP_OP_CROSS_ENTROPY, vals, 6, &v);
    tp_value_clear(&red);
    return st;
}

static tp_status c_kl_div(cctx *c) {
    tp_value red, v;
    TP_TRY(reduction(c, arg(c, 2, "reduction"), &red));
    tp_value vals[4] = {opt(arg(c, 0, "input"), tp_value_none()), opt(arg(c, 1, "target"), tp_value_none()), red,
                        opt(arg(c, 3, "log_target"), tp_value_bool(false))};
    tp_status st = node(c, true, TP_OP_KL_DIV, vals, 4, &v);
    tp_value_clear(&red);
    return st;
}

static tp_status c_l1_loss(cctx *c) {
    tp_value red, v;
    TP_TRY(reduction(c, arg(c, 2, "reduction"), &red));
    tp_value vals[3] = {opt(arg(c, 0, "input"), tp_value_none()), opt(arg(c, 1, "target"), tp_value_none()), red};
    tp_status st = node(c, true, TP_OP_L1_LOSS, vals, 3, &v);
    tp_value_clear(&red);
    return st;
}

/* ---- nn.functional.embedding (max_norm) ----
 * F.embedding(input, weight, padding_idx, max_norm, norm_type, ...): with
 * max_norm, PyTorch (and tensorplay) first renormalise, in place, the rows
 * of weight the lookup touches whose norm exceeds max_norm (scaled by
 * max_norm / (norm + 1e-7)). Here the looked-up rows are scaled instead
 * and the weight is left as it is: the same outputs on every call (the
 * renormalisation gives rows whose norm stays below max_norm, so it never
 * acts on a row twice), with the program's state unchanged - it stays
 * immutable and shareable across threads. */
static tp_status c_embedding(cctx *c) {
    const tp_value *mn = arg(c, 3, "max_norm"), *pad = arg(c, 2, "padding_idx");
    tp_value w = opt(arg(c, 1, "weight"), tp_value_none()), idx = opt(arg(c, 0, "input"), tp_value_none());
    tp_value padv = pad && pad->kind == TP_VAL_INT ? *pad : tp_value_int(-1);
    bool renorm = mn && mn->kind != TP_VAL_NONE;
    if (renorm && !tp_value_is_number(mn)) return fail(c, TP_ERR_TYPE, "max_norm must be a number");
    tp_value rows, n, big, den, inv, sc, one = tp_value_float(1.0);
    N(!renorm, EMBEDDING, &rows, w, idx, padv);
    if (!renorm) return TP_OK;
    const tp_value *p = arg(c, 4, "norm_type");
    tp_value pv = p && tp_value_is_number(p) ? *p : tp_value_float(2.0), dims, keep = tp_value_bool(true);
    int64_t last = -1;
    TP_TRY(ints(c, &last, 1, &dims));
    tp_status st = node(c, false, TP_OP_NORM, (tp_value[]){rows, pv, dims, keep}, 4, &n);
    tp_value_clear(&dims);
    TP_TRY(st);
    N(false, GT, &big, n, *mn);
    N(false, ADD, &den, n, tp_value_float(1e-7));
    N(false, RECIPROCAL, &inv, den);
    N(false, MUL, &sc, inv, *mn);
    N(false, WHERE, &sc, big, sc, one);
    N(true, MUL, &rows, rows, sc);
    return TP_OK;
}

/* ---- nn.functional.dropout1d / 2d / 3d ----
 * feature_dropout (a mask per channel) on a batched input; an unbatched one
 * (C, L) / (C, H, W) / (C, D, H, W) is dropped as a batch of one, as
 * PyTorch does, so its mask is per channel too. */
static tp_status c_dropout_nd(cctx *c) {
    int sp = c->fn[7] - '0'; /* "dropout1d" */
    const tp_value *x = arg(c, 0, "input"), *p = arg(c, 1, "p"), *tr = arg(c, 2, "training");
    const tp_tensor *t;
    TP_TRY(need_meta(c, x, "input", &t));
    if (t->ndim != sp + 1 && t->ndim != sp + 2) {
        char what[96];
        snprintf(what, sizeof what, "expected %dD or %dD input, but received a %dD input", sp + 1, sp + 2, t->ndim);
        return fail(c, TP_ERR_SHAPE, what);
    }
    tp_value pv = p && tp_value_is_number(p) ? *p : tp_value_float(0.5);
    tp_value trv = tr && tr->kind == TP_VAL_BOOL ? *tr : tp_value_bool(true);
    const tp_value *ip = arg(c, 3, "inplace");
    bool inplace = ip && ip->kind == TP_VAL_BOOL && ip->u.b; /* the result copied back into the input */
    tp_value v;
    if (t->ndim == sp + 2) {
        N(!inplace, FEATURE_DROPOUT, &v, *x, pv, trv);
    } else {
        N(false, UNSQUEEZE, &v, *x, tp_value_int(0));
        N(false, FEATURE_DROPOUT, &v, v, pv, trv);
        tp_value dims;
        int64_t zero = 0;
        TP_TRY(ints(c, &zero, 1, &dims));
        tp_status st = node(c, !inplace, TP_OP_SQUEEZE, (tp_value[]){v, dims}, 2, &v);
        tp_value_clear(&dims);
        TP_TRY(st);
    }
    if (inplace) N(true, COPY_, &v, *x, v);
    return TP_OK;
}

/* ---- grid_sampler (integer modes) ---- */

static tp_status c_grid_sampler(cctx *c) {
    const tp_value *im = arg(c, 2, "interpolation_mode"), *pm = arg(c, 3, "padding_mode");
    static const char *const modes[] = {"bilinear", "nearest", "bicubic"}, *const pads[] = {"zeros", "border", "reflection"};
    int64_t i = im ? tp_value_as_i64(im) : 0, p = pm ? tp_value_as_i64(pm) : 0;
    if (i < 0 || i > 2 || p < 0 || p > 2)
        return fail(c, TP_ERR_INVALID_ARG, "interpolation_mode and padding_mode must be 0, 1 or 2");
    tp_value ms, ps, v;
    tp_status st = tp_value_str(modes[i], &ms);
    if (st == TP_OK && (st = tp_value_str(pads[p], &ps)) != TP_OK) tp_value_clear(&ms);
    if (st != TP_OK) return tp__sd_note(c->r, st);
    tp_value vals[5] = {opt(arg(c, 0, "input"), tp_value_none()), opt(arg(c, 1, "grid"), tp_value_none()), ms, ps,
                        opt(arg(c, 4, "align_corners"), tp_value_bool(false))};
    st = node(c, true, TP_OP_GRID_SAMPLE, vals, 5, &v);
    tp_value_clear(&ms);
    tp_value_clear(&ps);
    return st;
}

/* ---- rotary embeddings (tensorplay's: interleaved pairs, cos/sin tables
 * [positions, head_dim / 2], positions along dim -2 from position_offset) */

static tp_status rope(const cctx *c, const tp_value *x, const tp_value *cos, const tp_value *sin, int64_t off, bool last,
                      tp_value *out) {
    const tp_tensor *t;
    TP_TRY(need_meta(c, x, "input", &t));
    int nd = tp_tensor_ndim(t);
    if (nd < 2 || tp_tensor_sizes(t)[nd - 1] % 2) return fail(c, TP_ERR_SHAPE, "the head dim must be even");
    int64_t seq = tp_tensor_sizes(t)[nd - 2];
    tp_value cs, sn, e, o, a, b, re, ro;
    N(false, NARROW, &cs, *cos, tp_value_int(0), tp_value_int(off), tp_value_int(seq));
    N(false, NARROW, &sn, *sin, tp_value_int(0), tp_value_int(off), tp_value_int(seq));
    N(false, SLICE, &e, *x, tp_value_int(-1), tp_value_int(0), tp_value_none(), tp_value_int(2));
    N(false, SLICE, &o, *x, tp_value_int(-1), tp_value_int(1), tp_value_none(), tp_value_int(2));
    N(false, MUL, &a, e, cs);
    N(false, MUL, &b, o, sn);
    N(false, SUB, &re, a, b);
    N(false, MUL, &a, o, cs);
    N(false, MUL, &b, e, sn);
    N(false, ADD, &ro, a, b);
    tp_value list, st_;
    TP_TRY(list_of(c, (tp_value[]){re, ro}, 2, &list));
    tp_value sv[2] = {list, tp_value_int(-1)};
    tp_status st = node(c, false, TP_OP_STACK, sv, 2, &st_);
    tp_value_clear(&list);
    TP_TRY(st);
    N(last, FLATTEN, out, st_, tp_value_int(-2), tp_value_int(-1));
    return TP_OK;
}

static int64_t offset_arg(const cctx *c, int i) {
    const tp_value *v = arg(c, i, "position_offset");
    return v && v->kind == TP_VAL_INT ? v->u.i : 0;
}

static tp_status c_rotary_embedding(cctx *c) {
    const tp_value *x = arg(c, 0, "input"), *cs = arg(c, 1, "cos"), *sn = arg(c, 2, "sin");
    if (!is_tensor(cs) || !is_tensor(sn)) return fail(c, TP_ERR_UNSUPPORTED, "cos and sin must be tensors");
    tp_value v;
    return rope(c, x, cs, sn, offset_arg(c, 3), true, &v);
}

static tp_status c_fused_rope(cctx *c) {
    const tp_value *q = arg(c, 0, "query"), *k = arg(c, 1, "key"), *cs = arg(c, 2, "cos"), *sn = arg(c, 3, "sin");
    if (!is_tensor(cs) || !is_tensor(sn)) return fail(c, TP_ERR_UNSUPPORTED, "cos and sin must be tensors");
    tp_value items[2];
    TP_TRY(rope(c, q, cs, sn, offset_arg(c, 4), false, &items[0]));
    TP_TRY(rope(c, k, cs, sn, offset_arg(c, 4), false, &items[1]));
    return set_tuple(c, items, 2);
}

/* ---- copies ---- */

/* copy(input, src): a tensor like input holding src (broadcast, cast). With
 * static shapes it is src expanded to input's shape, cast to its dtype and
 * cloned - which tensorplay 1.0 runs right when the program is saved back,
 * where its copy_ of a broadcast source into a clone does not (it fills
 * along the wrong dims); otherwise a clone of input with src copied in. */
static tp_status c_copy(cctx *c) {
    const tp_value *x = arg(c, 0, "input"), *src = arg(c, 1, "src");
    const tp_tensor *t = meta(x);
    tp_value v;
    if (t && src && !c->r->dynamic) {
        tp_value sizes;
        TP_TRY(ints(c, tp_tensor_sizes(t), tp_tensor_ndim(t), &sizes));
        tp_status st = node(c, false, TP_OP_EXPAND, (tp_value[]){*src, sizes}, 2, &v);
        tp_value_clear(&sizes);
        TP_TRY(st);
        N(false, TO, &v, v, tp_value_dtype(tp_tensor_dtype(t)));
        N(true, CLONE, &v, v);
        return TP_OK;
    }
    N(false, CLONE, &v, x ? *x : tp_value_none());
    N(true, COPY_, &v, v, src ? *src : tp_value_none());
    return TP_OK;
}

static tp_status c_t_copy(cctx *c) {
    const tp_value *x = arg(c, 0, "input");
    const tp_tensor *t;
    TP_TRY(need_meta(c, x, "input", &t));
    if (tp_tensor_ndim(t) > 2) return fail(c, TP_ERR_SHAPE, "t() expects a tensor with <= 2 dimensions");
    tp_value v = *x;
    if (tp_tensor_ndim(t) == 2) N(false, TRANSPOSE, &v, v, tp_value_int(0), tp_value_int(1));
    N(true, CLONE, &v, v);
    return TP_OK;
}

/* split_copy / split_with_sizes_copy / unbind_copy: the pieces, each cloned. */
static tp_status pieces_copy(cctx *c, tp_op op, const tp_value *vals, int n) {
    const tp_value *x = &vals[0];
    const tp_tensor *t;
    TP_TRY(need_meta(c, x, "input", &t));
    tp_value all;
    TP_TRY(node(c, false, op, vals, n, &all));
    const tp_value *m = tp__sd_ref_meta(&all);
    if (!m || !tp_value_is_seq(m) || tp_value_len(m) > 1024)
        return fail(c, TP_ERR_UNSUPPORTED, "the number of pieces must be known at load");
    int64_t k = tp_value_len(m);
    tp_value t_;
    tp_status st = tp_value_tuple(k, &t_);
    if (st != TP_OK) return tp__sd_note(c->r, st);
    for (int64_t i = 0; i < k && st == TP_OK; i++) {
        tp_value g;
        tp_value gv[2] = {all, tp_value_int(i)};
        st = node(c, false, TP_OP_GETITEM, gv, 2, &g);
        if (st == TP_OK) {
            tp_value cv[1] = {g};
            st = node(c, false, TP_OP_CLONE, cv, 1, &t_.u.seq.items[i]);
        }
    }
    if (st != TP_OK) {
        tp_value_clear(&t_);
        return st;
    }
    tp__sd_set_folded(c->d, &t_);
    return TP_OK;
}

static tp_status c_split_copy(cctx *c) {
    tp_value vals[3] = {opt(arg(c, 0, "input"), tp_value_none()), opt(arg(c, 1, "split_size"), tp_value_none()),
                        opt(arg(c, 2, "dim"), tp_value_int(0))};
    return pieces_copy(c, TP_OP_SPLIT, vals, 3);
}

static tp_status c_split_with_sizes_copy(cctx *c) {
    tp_value vals[3] = {opt(arg(c, 0, "input"), tp_value_none()), opt(arg(c, 1, "split_sizes"), tp_value_none()),
                        opt(arg(c, 2, "dim"), tp_value_int(0))};
    return pieces_copy(c, TP_OP_SPLIT, vals, 3);
}

static tp_status c_unbind_copy(cctx *c) {
    tp_value vals[2] = {opt(arg(c, 0, "input"), tp_value_none()), opt(arg(c, 1, "dim"), tp_value_int(0))};
    return pieces_copy(c, TP_OP_UNBIND, vals, 2);
}

/* ---- dtype queries, folded at load ---- */

static tp_status dtype_arg(const cctx *c, const tp_value *v, const char *what, tp_dtype *out) {
    if (!v || v->kind != TP_VAL_DTYPE) return fail(c, TP_ERR_UNSUPPORTED, what);
    *out = v->u.dtype;
    return TP_OK;
}

static tp_status c_promote_types(cctx *c) {
    tp_dtype a = TP_FLOAT32, b = TP_FLOAT32;
    TP_TRY(dtype_arg(c, arg(c, 0, "type1"), "type1 must be a dtype", &a));
    TP_TRY(dtype_arg(c, arg(c, 1, "type2"), "type2 must be a dtype", &b));
    tp_value v = tp_value_dtype(tp_promote_types(a, b));
    tp__sd_set_folded(c->d, &v);
    return TP_OK;
}

/* PyTorch's canCast: no floating -> integral, no non-bool -> bool. */
static tp_status c_can_cast(cctx *c) {
    tp_dtype from = TP_FLOAT32, to = TP_FLOAT32;
    TP_TRY(dtype_arg(c, arg(c, 0, "from_"), "from_ must be a dtype", &from));
    TP_TRY(dtype_arg(c, arg(c, 1, "to"), "to must be a dtype", &to));
    bool ok = !(tp_dtype_is_float(from) && !tp_dtype_is_float(to)) && !(from != TP_BOOL && to == TP_BOOL);
    tp_value v = tp_value_bool(ok);
    tp__sd_set_folded(c->d, &v);
    return TP_OK;
}

/* result_type(tensor, other): the dtype an arithmetic op of the two gives. */
static tp_status c_result_type(cctx *c) {
    const tp_value *vals[2];
    for (int i = 0; i < 2; i++) {
        const tp_value *a = arg(c, i, i ? "other" : "tensor");
        if (!a) return fail(c, TP_ERR_INVALID_ARG, "takes a tensor and another tensor or number");
        vals[i] = is_tensor(a) ? tp__sd_ref_meta(a) : a;
        if (!vals[i] || (vals[i]->kind != TP_VAL_TENSOR && !tp_value_is_number(vals[i])))
            return fail(c, TP_ERR_UNSUPPORTED, "operands must be tensors of known dtype or numbers");
    }
    tp_value v = tp_value_dtype(tp__result_type(vals, 2));
    tp__sd_set_folded(c->d, &v);
    return TP_OK;
}

/* ---- factories of a few ints: windows, logspace, range, scalar_tensor ---- */

static tp_status int_arg(const cctx *c, int i, const char *name, int64_t *out) {
    const tp_value *v = arg(c, i, name);
    if (!v || v->kind != TP_VAL_INT)
        return tp__sd_report(c->r, TP_ERR_UNSUPPORTED, "node %s: %s: %s must be an int known at load", c->d->name, c->fn,
                             name);
    *out = v->u.i;
    return TP_OK;
}

static tp_dtype float_dtype_arg(const cctx *c, int i) {
    const tp_value *v = arg(c, i, "dtype");
    return v && v->kind == TP_VAL_DTYPE && tp_dtype_is_float(v->u.dtype) ? v->u.dtype : TP_FLOAT32;
}

/* n = 0, 1, ..., len - 1 as float dtype dt, scaled by `scale` (a node). */
static tp_status ramp(const cctx *c, int64_t len, tp_dtype dt, double scale, tp_value *out) {
    static const char *const dn[] = {"dtype"};
    TP_TRY(node_kw(c, false, TP_OP_ARANGE, (tp_value[]){tp_value_int(len)}, 1, dn, (tp_value[]){tp_value_dtype(dt)}, 1,
                   out));
    if (scale != 1.0) N(false, MUL, out, *out, tp_value_float(scale));
    return TP_OK;
}

/* Cosine windows sum_k a_k cos(2 pi k n / M) (hann, hamming, blackman),
 * M = N if periodic else N - 1; N = 1 gives [1]. */
/* Arguments: (window_length, periodic, ..., dtype at dtype_i). */
static tp_status cosine_window(cctx *c, const double *a, int terms, int dtype_i) {
    int64_t n = 0;
    TP_TRY(int_arg(c, 0, "window_length", &n));
    if (n < 0) return fail(c, TP_ERR_INVALID_ARG, "window_length must be non-negative");
    const tp_value *pv = arg(c, 1, "periodic");
    bool periodic = !pv || tp_value_as_i64(pv) != 0;
    tp_dtype dt = float_dtype_arg(c, dtype_i);
    tp_value v;
    if (n <= 1) {
        static const char *const dn[] = {"dtype"};
        tp_value size;
        TP_TRY(ints(c, &n, 1, &size));
        tp_status st = node_kw(c, true, TP_OP_FULL, (tp_value[]){size, tp_value_float(1.0)}, 2, dn,
                               (tp_value[]){tp_value_dtype(dt)}, 1, &v);
        tp_value_clear(&size);
        return st;
    }
    double m = (double)(periodic ? n : n - 1);
    tp_value acc = tp_value_none();
    for (int k = 1; k < terms; k++) {
        tp_value r, t;
        TP_TRY(ramp(c, n, dt, 2.0 * 3.14159265358979323846 * k / m, &r));
        N(false, COS, &t, r);
        N(false, MUL, &t, t, tp_value_float(a[k]));
        if (acc.kind == TP_VAL_NONE) acc = t;
        else N(false, ADD, &acc, acc, t);
    }
    N(true, ADD, &v, acc, tp_value_float(a[0]));
    return TP_OK;
}

static tp_status c_hann_window(cctx *c) { return cosine_window(c, (double[]){0.5, -0.5}, 2, 2); }
static tp_status c_blackman_window(cctx *c) { return cosine_window(c, (double[]){0.42, -0.5, 0.08}, 3, 2); }

static tp_status c_hamming_window(cctx *c) {
    const tp_value *al = arg(c, 2, "alpha"), *be = arg(c, 3, "beta");
    double a = al && tp_value_is_number(al) ? tp_value_as_f64(al) : 0.54, b = be && tp_value_is_number(be) ? tp_value_as_f64(be) : 0.46;
    return cosine_window(c, (double[]){a, -b}, 2, 4);
}

static tp_status c_bartlett_window(cctx *c) { /* 1 - |2n/M - 1| */
    int64_t n = 0;
    TP_TRY(int_arg(c, 0, "window_length", &n));
    if (n <= 1) return cosine_window(c, (double[]){1.0}, 1, 2);
    const tp_value *pv = arg(c, 1, "periodic");
    bool periodic = !pv || tp_value_as_i64(pv) != 0;
    double m = (double)(periodic ? n : n - 1);
    tp_value r;
    TP_TRY(ramp(c, n, float_dtype_arg(c, 2), 2.0 / m, &r));
    N(false, SUB, &r, r, tp_value_float(1.0));
    N(false, ABS, &r, r);
    N(false, NEG, &r, r);
    N(true, ADD, &r, r, tp_value_float(1.0));
    return TP_OK;
}

static tp_status c_kaiser_window(cctx *c) { /* I0(beta sqrt(1 - (2n/M - 1)^2)) / I0(beta) */
    int64_t n = 0;
    TP_TRY(int_arg(c, 0, "window_length", &n));
    if (n <= 1) return cosine_window(c, (double[]){1.0}, 1, 3);
    const tp_value *pv = arg(c, 1, "periodic"), *bv = arg(c, 2, "beta");
    bool periodic = !pv || tp_value_as_i64(pv) != 0;
    double beta = bv && tp_value_is_number(bv) ? tp_value_as_f64(bv) : 12.0;
    double m = (double)(periodic ? n : n - 1);
    tp_value r;
    TP_TRY(ramp(c, n, float_dtype_arg(c, 3), 2.0 / m, &r));
    N(false, SUB, &r, r, tp_value_float(1.0));
    N(false, MUL, &r, r, r);
    N(false, NEG, &r, r);
    N(false, ADD, &r, r, tp_value_float(1.0));
    N(false, SQRT, &r, r);
    N(false, MUL, &r, r, tp_value_float(beta));
    N(false, I0, &r, r);
    /* divide by I0(beta): computed by the same kernel on a one-element tensor */
    tp_value one, ib;
    static const char *const dn[] = {"dtype"};
    tp_value size;
    TP_TRY(ints(c, (int64_t[]){1}, 1, &size));
    tp_status st = node_kw(c, false, TP_OP_FULL, (tp_value[]){size, tp_value_float(beta)}, 2, dn,
                           (tp_value[]){tp_value_dtype(float_dtype_arg(c, 3))}, 1, &one);
    tp_value_clear(&size);
    TP_TRY(st);
    N(false, I0, &ib, one);
    N(true, DIV, &r, r, ib);
    return TP_OK;
}

/* ---- as_strided_: self becomes a view with other sizes and strides ----
 * The result is that view, and so is self for every later node (the
 * document's later references to self are rebound to it), as when
 * tensorplay runs the call. */
static tp_status c_as_strided_(cctx *c) {
    const tp_value *x = arg(c, 0, "input");
    if (!x) x = arg(c, -1, "self");
    if (!x || x->kind != TP_VAL_NODE) return fail(c, TP_ERR_UNSUPPORTED, "self must be a tensor node");
    const tp_value *size = arg(c, 1, "size"), *stride = arg(c, 2, "stride"), *off = arg(c, 3, "storage_offset");
    if (!size || !stride) return fail(c, TP_ERR_INVALID_ARG, "size and stride are required");
    tp_node *old = x->u.node;
    tp_value v;
    N(true, AS_STRIDED, &v, *x, *size, *stride, off ? *off : tp_value_none());
    for (int i = 0; i < c->r->current; i++)
        if (c->r->nodes[i].state == DOC_NODE && c->r->nodes[i].node == old) c->r->nodes[i].node = v.u.node;
    return TP_OK;
}

/* ---- more ATen forms ---- */

static tp_status c_ctc_loss(cctx *c) {
    tp_value red, v;
    TP_TRY(reduction(c, arg(c, 5, "reduction"), &red));
    tp_value vals[7] = {opt(arg(c, 0, "log_probs"), tp_value_none()), opt(arg(c, 1, "targets"), tp_value_none()),
                        opt(arg(c, 2, "input_lengths"), tp_value_none()), opt(arg(c, 3, "target_lengths"), tp_value_none()),
                        opt(arg(c, 4, "blank"), tp_value_int(0)), red, opt(arg(c, 6, "zero_infinity"), tp_value_bool(false))};
    tp_status st = node(c, true, TP_OP_CTC_LOSS, vals, 7, &v);
    tp_value_clear(&red);
    return st;
}

/* (log_sigmoid(x), exp(-|x|)), the buffer PyTorch's CPU kernel keeps */
static tp_status c_log_sigmoid_forward(cctx *c) {
    const tp_value *x = arg(c, 0, "input");
    if (!is_tensor(x)) return fail(c, TP_ERR_UNSUPPORTED, "input must be a tensor");
    tp_value items[2];
    N(false, LOG_SIGMOID, &items[0], *x);
    N(false, ABS, &items[1], *x);
    N(false, NEG, &items[1], items[1]);
    N(false, EXP, &items[1], items[1]);
    return set_tuple(c, items, 2);
}

/* (loss, is_target): is_target[.., j] = 1 where j is one of the row's
 * labels (those before the first -1) */
static tp_status c_multilabel_margin_loss_forward(cctx *c) {
    const tp_value *x = arg(c, 0, "input"), *t = arg(c, 1, "target");
    if (!is_tensor(x) || !is_tensor(t)) return fail(c, TP_ERR_UNSUPPORTED, "input and target must be tensors");
    const tp_tensor *tx;
    TP_TRY(need_meta(c, x, "input", &tx));
    tp_value red, loss, valid, idx, src, acc;
    TP_TRY(reduction(c, arg(c, 2, "reduction"), &red)); /* checked; the op keeps ATen's int, which is written back */
    tp_value_clear(&red);
    const tp_value *ri = arg(c, 2, "reduction");
    tp_value lv[3] = {*x, *t, ri && ri->kind == TP_VAL_INT ? *ri : tp_value_int(1)};
    TP_TRY(node(c, false, TP_OP_MULTILABEL_MARGIN_LOSS, lv, 3, &loss));
    N(false, GE, &valid, *t, tp_value_int(0));
    N(false, CUMPROD, &valid, valid, tp_value_int(-1));
    N(false, NE, &valid, valid, tp_value_int(0));
    N(false, WHERE, &idx, valid, *t, tp_value_int(0));
    N(false, TO, &src, valid, tp_value_dtype(tp_tensor_dtype(tx)));
    N(false, ZEROS_LIKE, &acc, *x);
    N(false, SCATTER_ADD, &acc, acc, tp_value_int(-1), idx, src);
    N(false, GT, &acc, acc, tp_value_int(0));
    N(false, TO, &acc, acc, tp_value_dtype(tp_tensor_dtype(tx)));
    tp_value items[2] = {loss, acc};
    return set_tuple(c, items, 2);
}

/* logspace(start, end, steps, base): base ** linspace(start, end, steps) */
static tp_status c_logspace(cctx *c) {
    const tp_value *a = arg(c, 0, "start"), *b = arg(c, 1, "end"), *bv = arg(c, 3, "base"), *dv = arg(c, -1, "dtype");
    int64_t steps = 0;
    TP_TRY(int_arg(c, 2, "steps", &steps));
    if (steps < 0) return fail(c, TP_ERR_INVALID_ARG, "number of steps must be non-negative");
    if (!a || !b || !tp_value_is_number(a) || !tp_value_is_number(b))
        return fail(c, TP_ERR_UNSUPPORTED, "start and end must be numbers known at load");
    tp_dtype dt = dv && dv->kind == TP_VAL_DTYPE && tp_dtype_is_float(dv->u.dtype) ? dv->u.dtype : TP_FLOAT32;
    static const char *const dn[] = {"dtype"};
    tp_value lin, base, size;
    TP_TRY(node_kw(c, false, TP_OP_LINSPACE, (tp_value[]){*a, *b, tp_value_int(steps)}, 3, dn,
                   (tp_value[]){tp_value_dtype(dt)}, 1, &lin));
    TP_TRY(ints(c, &steps, 1, &size));
    tp_status st = node_kw(c, false, TP_OP_FULL, (tp_value[]){size, bv && tp_value_is_number(bv) ? *bv : tp_value_float(10.0)},
                           2, dn, (tp_value[]){tp_value_dtype(dt)}, 1, &base);
    tp_value_clear(&size);
    TP_TRY(st);
    N(true, POW, &base, base, lin);
    return TP_OK;
}

/* tensorplay's range(start, end, step): end included; int64 for ints */
static tp_status c_range(cctx *c) {
    const tp_value *a = arg(c, 0, "start"), *b = arg(c, 1, "end"), *sv = arg(c, 2, "step"), *dv = arg(c, -1, "dtype");
    if (!a || !b || !tp_value_is_number(a) || !tp_value_is_number(b) || (sv && !tp_value_is_number(sv)))
        return fail(c, TP_ERR_UNSUPPORTED, "start, end and step must be numbers known at load");
    double s0 = tp_value_as_f64(a), s1 = tp_value_as_f64(b), st_ = sv ? tp_value_as_f64(sv) : 1.0;
    if (st_ == 0.0 || (s1 - s0) / st_ < 0.0) return fail(c, TP_ERR_INVALID_ARG, "upper bound and larger bound inconsistent with step sign");
    double count = floor((s1 - s0) / st_) + 1.0;
    if (count > 1e9) return fail(c, TP_ERR_INVALID_ARG, "too many elements");
    bool ints_ = a->kind == TP_VAL_INT && b->kind == TP_VAL_INT && (!sv || sv->kind == TP_VAL_INT);
    tp_dtype dt = dv && dv->kind == TP_VAL_DTYPE ? dv->u.dtype : ints_ ? TP_INT64 : TP_FLOAT32;
    static const char *const dn[] = {"dtype"};
    tp_value r;
    TP_TRY(node_kw(c, false, TP_OP_ARANGE, (tp_value[]){tp_value_int((int64_t)count)}, 1, dn, (tp_value[]){tp_value_dtype(dt)},
                   1, &r));
    if (st_ != 1.0) N(false, MUL, &r, r, sv ? *sv : tp_value_int(1));
    N(true, ADD, &r, r, *a);
    return TP_OK;
}

static tp_status c_scalar_tensor(cctx *c) {
    const tp_value *s = arg(c, 0, "s"), *dv = arg(c, 1, "dtype");
    if (!s || !tp_value_is_number(s)) return fail(c, TP_ERR_UNSUPPORTED, "s must be a number");
    tp_dtype dt = dv && dv->kind == TP_VAL_DTYPE ? dv->u.dtype : TP_FLOAT32;
    static const char *const dn[] = {"dtype"};
    tp_value size, v;
    TP_TRY(ints(c, NULL, 0, &size));
    tp_status st = node_kw(c, true, TP_OP_FULL, (tp_value[]){size, *s}, 2, dn, (tp_value[]){tp_value_dtype(dt)}, 1, &v);
    tp_value_clear(&size);
    return st;
}

/* ---- the distributed helpers' dense flattening ---- */

static tp_status c_flatten_dense_tensors(cctx *c) { /* cat of the flattened tensors */
    const tp_value *items[32];
    int n;
    TP_TRY(tensor_args(c, items, 32, &n));
    tp_value flat[32];
    for (int i = 0; i < n; i++) N(false, FLATTEN, &flat[i], *items[i], tp_value_int(0), tp_value_int(-1));
    return cat_items(c, flat, n, 0, TP_OP_CAT);
}

static tp_status c_unflatten_dense_tensors(cctx *c) { /* flat cut and viewed like each of tensors */
    const tp_value *flat = arg(c, 0, "flat"), *ts = arg(c, 1, "tensors");
    if (!is_tensor(flat) || !ts || !tp_value_is_seq(ts) || tp_value_len(ts) < 1 || tp_value_len(ts) > 32)
        return fail(c, TP_ERR_UNSUPPORTED, "expects a flat tensor and a list of 1 to 32 tensors");
    TP_TRY(need_static(c));
    int n = (int)tp_value_len(ts);
    tp_value outs[32];
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        const tp_tensor *t;
        TP_TRY(need_meta(c, tp_value_at(ts, i), "each tensor", &t));
        int64_t k = tp_tensor_numel(t);
        tp_value piece, shape;
        N(false, NARROW, &piece, *flat, tp_value_int(0), tp_value_int(at), tp_value_int(k));
        TP_TRY(ints(c, tp_tensor_sizes(t), tp_tensor_ndim(t), &shape));
        tp_value vv[2] = {piece, shape};
        tp_status st = node(c, false, TP_OP_VIEW, vv, 2, &outs[i]);
        tp_value_clear(&shape);
        TP_TRY(st);
        at += k;
    }
    return set_tuple(c, outs, n);
}

/* empty_strided(size, stride, dtype) / empty_permuted(size, physical_layout,
 * dtype): values unspecified, so zeros; contiguous (the strides only place
 * the values in memory) */
static tp_status c_empty_like_factory(cctx *c) {
    const tp_value *size = arg(c, 0, "size"), *dv = arg(c, 2, "dtype");
    if (!size || !tp_value_is_seq(size)) return fail(c, TP_ERR_INVALID_ARG, "size must be a list of ints");
    tp_dtype dt = dv && dv->kind == TP_VAL_DTYPE ? dv->u.dtype : TP_FLOAT32;
    static const char *const dn[] = {"dtype"};
    tp_value v;
    return node_kw(c, true, TP_OP_FULL, (tp_value[]){*size, tp_value_int(0)}, 2, dn, (tp_value[]){tp_value_dtype(dt)}, 1,
                   &v);
}

/* ---- dispatch ---- */

static const struct {
    const char *name;
    tp_status (*fn)(cctx *c);
} g_compose[] = {
    {"fused_mul_add", c_fused_mul_add},
    {"silu_mul", c_silu_mul},
    {"fused_swiglu", c_silu_mul},
    {"silu_and_mul", c_silu_and_mul},
    {"add_relu", c_add_relu},
    {"rsub", c_rsub},
    {"conv2d_relu", c_conv2d_relu},
    {"std_mean", c_std_mean},
    {"var_mean", c_var_mean},
    {"atleast_1d", c_atleast_1d},
    {"atleast_2d", c_atleast_2d},
    {"atleast_3d", c_atleast_3d},
    {"column_stack", c_column_stack},
    {"dstack", c_dstack},
    {"broadcast_tensors", c_broadcast_tensors},
    {"meshgrid", c_meshgrid},
    {"cartesian_prod", c_cartesian_prod},
    {"block_diag", c_block_diag},
    {"tensordot", c_tensordot},
    {"chain_matmul", c_chain_matmul},
    {"cdist", c_cdist},
    {"isin", c_isin},
    {"trapezoid", c_trapezoid},
    {"trapz", c_trapezoid},
    {"cumulative_trapezoid", c_cumulative_trapezoid},
    {"vander", c_vander},
    {"norm_except_dim", c_norm_except_dim},
    {"native_layer_norm", c_native_layer_norm},
    {"native_group_norm", c_native_group_norm},
    {"native_batch_norm", c_native_batch_norm},
    {"nll_loss", c_nll_loss},
    {"nll_loss2d", c_nll_loss},
    {"nll_loss_nd", c_nll_loss_nd},
    {"cross_entropy_loss", c_cross_entropy_loss},
    {"tp_kl_div", c_kl_div},
    {"tp_l1_loss", c_l1_loss},
    {"grid_sampler", c_grid_sampler},
    {"grid_sampler_2d", c_grid_sampler},
    {"grid_sampler_3d", c_grid_sampler},
    {"embedding", c_embedding},
    {"dropout1d", c_dropout_nd},
    {"dropout2d", c_dropout_nd},
    {"dropout3d", c_dropout_nd},
    {"rotary_embedding", c_rotary_embedding},
    {"fused_rope", c_fused_rope},
    {"copy", c_copy},
    {"t_copy", c_t_copy},
    {"split_copy", c_split_copy},
    {"split_with_sizes_copy", c_split_with_sizes_copy},
    {"unbind_copy", c_unbind_copy},
    {"as_strided_", c_as_strided_},
    {"empty_strided", c_empty_like_factory},
    {"empty_permuted", c_empty_like_factory},
    {"flatten_dense_tensors", c_flatten_dense_tensors},
    {"unflatten_dense_tensors", c_unflatten_dense_tensors},
    {"ctc_loss", c_ctc_loss},
    {"log_sigmoid_forward", c_log_sigmoid_forward},
    {"multilabel_margin_loss_forward", c_multilabel_margin_loss_forward},
    {"logspace", c_logspace},
    {"range", c_range},
    {"scalar_tensor", c_scalar_tensor},
    {"nll_loss_forward", c_nll_loss},
    {"nll_loss2d_forward", c_nll_loss},
    {"promote_types", c_promote_types},
    {"can_cast", c_can_cast},
    {"result_type", c_result_type},
    {"hann_window", c_hann_window},
    {"hamming_window", c_hamming_window},
    {"blackman_window", c_blackman_window},
    {"bartlett_window", c_bartlett_window},
    {"kaiser_window", c_kaiser_window},
};

bool tp__sd_has_compose(const char *name) {
    for (size_t i = 0; i < sizeof g_compose / sizeof g_compose[0]; i++)
        if (!strcmp(g_compose[i].name, name)) return true;
    return false;
}

tp_status tp__sd_compose(reader *r, doc_node *d, const char *name, const tp_value *args, const tp_value *kwargs) {
    for (size_t i = 0; i < sizeof g_compose / sizeof g_compose[0]; i++)
        if (!strcmp(g_compose[i].name, name)) {
            cctx c = {r, d, name, args, kwargs};
            return g_compose[i].fn(&c);
        }
    return tp__sd_report(r, TP_ERR_INTERNAL, "node %s: no composition for %s", d->name, name);
}
