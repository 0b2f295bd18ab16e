/*
 * shape_values.c - shape arithmetic on dynamic dims at import.
 *
 * Exporters write `x.view(b, t, h, d // h)` as Shape -> Gather -> Unsqueeze
 * -> Concat -> Reshape, `mask[:, :, :t, :t]` as Slice with ends computed the
 * same way, `torch.arange(t)` as Range, `expand` as ConstantOfShape / Equal
 * / Where chains. On static shapes those fold to constants (import.c). When
 * a dim is dynamic they are kept here as *shape values*: the int64 tensor
 * (rank 0 or 1) is tracked as the list of its elements, each a plain int or
 * a symbolic-int node (sym_size of a dynamically shaped value, sym_add /
 * sym_sub / sym_mul / sym_floordiv of others), and the ops that take shapes
 * (Reshape, Expand, ConstantOfShape, Slice, Range, Tile) receive the list as
 * their size arguments. The engine evaluates symbolic ints once per input
 * shape class when it plans (engine.c), so a program imported once runs at
 * every size in range with no per-call cost for its shape arithmetic.
 *
 * Every dim of a dynamically shaped value is read with sym_size (the
 * importer does not track which dims of such a value are static); ops on
 * them are exact at every size. Where a shape value meets an op that needs
 * a tensor (a float Cast, a comparison with a run-time tensor, a graph
 * output), import.c makes it into one (tp__onnx_shape_tensor) and the op's
 * ordinary mapping runs. Integer Div on a symbolic element is floor
 * division (ONNX truncates; the two agree on the non-negative values sizes
 * and their sums and products are).
 */
#include <inttypes.h>
#include <string.h>

#include "onnx_impl.h"

typedef struct elems {
    tp_value v[OX_MAX_SHAPE_VALUE]; /* TP_VAL_INT or TP_VAL_NODE (a symbolic int) */
    int n;
    int rank; /* 0 or 1 */
    bool sym; /* came from a shape value (not only constants) */
} elems;

static void elems_init(elems *e) {
    e->n = 0;
    e->rank = 1;
    e->sym = false;
}

static void elems_clear(elems *e) {
    for (int i = 0; i < e->n; i++) tp_value_clear(&e->v[i]);
    e->n = 0;
}

/* Input i as elements: a shape value, or a constant integer tensor of rank
 * <= 1 with at most OX_MAX_SHAPE_VALUE values. *ok false otherwise. */
static tp_status in_elems(ox_ctx *c, int i, elems *out, bool *ok) {
    elems_init(out);
    *ok = false;
    int rank;
    const tp_value *sv = ox_in_shape(c, i, &rank);
    if (sv) {
        int64_t n = tp_value_len(sv);
        if (n > OX_MAX_SHAPE_VALUE) return TP_OK;
        for (int64_t k = 0; k < n; k++) {
            tp_status st = tp_value_copy(tp_value_at(sv, k), &out->v[k]);
            if (st != TP_OK) {
                elems_clear(out);
                return st;
            }
            out->n++;
        }
        out->rank = rank;
        out->sym = true;
        *ok = true;
        return TP_OK;
    }
    tp_tensor *t = ox_const(ox_in(c, i));
    if (!t || tp_tensor_ndim(t) > 1 || tp_tensor_numel(t) > OX_MAX_SHAPE_VALUE) return TP_OK;
    tp_dtype dt = tp_tensor_dtype(t);
    if (!tp_dtype_is_int(dt)) return TP_OK;
    tp_tensor *ct;
    TP_TRY(tp_tensor_contiguous(t, &ct));
    const char *p = tp_tensor_data(ct);
    size_t es = tp_dtype_size(dt);
    out->n = (int)tp_tensor_numel(ct);
    for (int k = 0; k < out->n; k++) out->v[k] = tp_value_int(tp__load_i64(p + (size_t)k * es, dt));
    tp_tensor_free(ct);
    out->rank = tp_tensor_ndim(t);
    *ok = true;
    return TP_OK;
}

/* Output i from elements (taken over; e ends empty). */
static tp_status set_elems(ox_ctx *c, int i, elems *e, int rank) {
    tp_value l = tp_value_none();
    tp_status st = tp_value_list(e->n, &l);
    for (int k = 0; st == TP_OK && k < e->n; k++) st = tp_value_seq_set(&l, k, &e->v[k]);
    elems_clear(e);
    if (st != TP_OK) {
        tp_value_clear(&l);
        return st;
    }
    return ox_set_out_shape(c, i, &l, rank);
}

/* The elements as a list value (copies) for an op's int[] argument. */
static tp_status elems_list(const elems *e, tp_value *out) {
    TP_TRY(tp_value_list(e->n, out));
    for (int k = 0; k < e->n; k++) {
        tp_value v;
        tp_status st = tp_value_copy(&e->v[k], &v);
        if (st == TP_OK) st = tp_value_seq_set(out, k, &v);
        if (st != TP_OK) {
            tp_value_clear(out);
            return st;
        }
    }
    return TP_OK;
}

/* ---- symbolic ints ---------------------------------------------------------- */

static tp_status sym_size(ox_ctx *c, const tp_value *x, int d, tp_value *out) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(d));
    return ox_call(c, TP_OP_SYM_SIZE, &A, out);
}

/* Is symbolic int v non-negative at every size (a size, or sums, products
 * and floor quotients of such)? */
static bool nonneg(const tp_value *v, int depth) {
    if (v->kind == TP_VAL_INT) return v->u.i >= 0;
    if (v->kind != TP_VAL_NODE || depth > 32) return false;
    tp_op op = tp_node_op(v->u.node);
    const tp_value *args = tp_node_args(v->u.node);
    if (op == TP_OP_SYM_SIZE) return true;
    if (!args || (op != TP_OP_SYM_ADD && op != TP_OP_SYM_MUL && op != TP_OP_SYM_FLOORDIV)) return false;
    return nonneg(tp_value_at(args, 0), depth + 1) && nonneg(tp_value_at(args, 1), depth + 1);
}

typedef enum { B_ADD, B_SUB, B_MUL, B_DIV } bin_kind;

/* a op b on two elements; *ok false when it cannot be computed here (a
 * division by zero or by a symbolic divisor that may be negative). */
static tp_status elem_bin(ox_ctx *c, bin_kind k, const tp_value *a, const tp_value *b, tp_value *out, bool *ok) {
    *ok = true;
    if (a->kind == TP_VAL_INT && b->kind == TP_VAL_INT) {
        int64_t x = a->u.i, y = b->u.i, r = 0;
        bool fine = true;
        switch (k) {
        case B_ADD: fine = !__builtin_add_overflow(x, y, &r); break;
        case B_SUB: fine = !__builtin_sub_overflow(x, y, &r); break;
        case B_MUL: fine = !__builtin_mul_overflow(x, y, &r); break;
        case B_DIV:
            fine = y != 0 && !(x == INT64_MIN && y == -1);
            if (fine) r = x / y; /* ONNX: truncation */
            break;
        }
        *ok = fine;
        if (fine) *out = tp_value_int(r);
        return TP_OK;
    }
    if (k == B_DIV && !(b->kind == TP_VAL_INT ? b->u.i > 0 : nonneg(b, 0))) {
        *ok = false;
        return TP_OK;
    }
    static const tp_op ops[] = {TP_OP_SYM_ADD, TP_OP_SYM_SUB, TP_OP_SYM_MUL, TP_OP_SYM_FLOORDIV};
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, a);
    ox_arg_ref(&A, b);
    return ox_call(c, ops[k], &A, out);
}

/* Broadcast two element lists (equal lengths, or one of length 1). */
static bool bcast(const elems *a, const elems *b, int *n) {
    if (a->n == b->n) *n = a->n;
    else if (a->n == 1) *n = b->n;
    else if (b->n == 1) *n = a->n;
    else return false;
    return true;
}

/* ---- the ops ------------------------------------------------------------------ */

/* Is input i a tensor whose shape depends on a dynamic dim (a graph node)? */
static bool dyn_tensor(ox_ctx *c, int i) {
    const tp_value *x = ox_in(c, i);
    return x && x->kind == TP_VAL_NODE && ox_in_shape(c, i, NULL) == NULL && ox_in_dyn(c, i) && ox_meta(x);
}

static tp_status do_shape(ox_ctx *c, bool size_only, bool *done) {
    int rank;
    if (ox_in_shape(c, 0, &rank)) { /* the shape of a shape value: its length */
        const tp_value *sv = ox_in_shape(c, 0, NULL);
        elems e;
        elems_init(&e);
        int64_t len = tp_value_len(sv);
        if (size_only) e.v[e.n++] = tp_value_int(rank ? len : 1);
        else if (rank) e.v[e.n++] = tp_value_int(len);
        *done = true;
        return set_elems(c, 0, &e, size_only ? 0 : 1);
    }
    if (!dyn_tensor(c, 0)) return TP_OK;
    const tp_value *x = ox_in(c, 0);
    int nd = tp_tensor_ndim(ox_meta(x));
    int64_t start = size_only ? 0 : ox_attr_i(c, "start", 0), end = size_only ? nd : ox_attr_i(c, "end", nd);
    if (start < 0) start += nd;
    if (end < 0) end += nd;
    start = start < 0 ? 0 : start > nd ? nd : start;
    end = end < 0 ? 0 : end > nd ? nd : end;
    elems e;
    elems_init(&e);
    tp_status st = TP_OK;
    if (size_only) {
        e.v[e.n++] = tp_value_int(1);
        for (int d = 0; st == TP_OK && d < nd; d++) {
            tp_value s = tp_value_none(), p = tp_value_none();
            bool ok;
            st = sym_size(c, x, d, &s);
            if (st == TP_OK) st = elem_bin(c, B_MUL, &e.v[0], &s, &p, &ok);
            tp_value_clear(&s);
            if (st == TP_OK) {
                tp_value_clear(&e.v[0]);
                e.v[0] = p;
            }
        }
    } else {
        for (int64_t d = start; st == TP_OK && d < end; d++) {
            st = sym_size(c, x, (int)d, &e.v[e.n]);
            if (st == TP_OK) e.n++;
        }
    }
    if (st != TP_OK) {
        elems_clear(&e);
        return st;
    }
    *done = true;
    return set_elems(c, 0, &e, size_only ? 0 : 1);
}

static tp_status do_gather(ox_ctx *c, bool *done) {
    if (!ox_in_shape(c, 0, NULL)) return TP_OK;
    elems d, idx;
    bool ok, ok2;
    TP_TRY(in_elems(c, 0, &d, &ok));
    tp_status st = in_elems(c, 1, &idx, &ok2);
    if (st == TP_OK && ok && ok2 && !idx.sym && d.rank == 1 && ox_attr_i(c, "axis", 0) == 0) {
        elems r;
        elems_init(&r);
        for (int k = 0; st == TP_OK && k < idx.n; k++) {
            int64_t i = idx.v[k].u.i;
            if (i < 0) i += d.n;
            if (i < 0 || i >= d.n) {
                st = ox_bad(c, "index %" PRId64 " out of range for a shape of %d values", idx.v[k].u.i, d.n);
                break;
            }
            st = tp_value_copy(&d.v[i], &r.v[r.n]);
            if (st == TP_OK) r.n++;
        }
        if (st == TP_OK) {
            *done = true;
            st = set_elems(c, 0, &r, idx.rank);
        }
        elems_clear(&r);
    }
    elems_clear(&d);
    elems_clear(&idx);
    return st;
}

/* Unsqueeze / Squeeze between rank 0 and rank 1 (axis 0). */
static tp_status do_unsqueeze(ox_ctx *c, bool squeeze, bool *done) {
    int rank;
    if (!ox_in_shape(c, 0, &rank)) return TP_OK;
    int64_t axes[2] = {0, 0};
    int na = -1;
    const Onnx__AttributeProto *a = ox_attr(c, "axes");
    if (a) {
        if (a->n_ints > 1) return TP_OK;
        na = (int)a->n_ints;
        if (na) axes[0] = a->ints[0];
    } else if (ox_in(c, 1) || ox_in_shape(c, 1, NULL)) {
        elems ax;
        bool ok;
        TP_TRY(in_elems(c, 1, &ax, &ok));
        if (!ok || ax.sym || ax.n > 1) {
            elems_clear(&ax);
            return TP_OK;
        }
        na = ax.n;
        if (na) axes[0] = ax.v[0].u.i;
        elems_clear(&ax);
    }
    elems e;
    bool ok;
    TP_TRY(in_elems(c, 0, &e, &ok));
    int out_rank;
    if (squeeze) {
        bool fine = rank == 1 && e.n == 1 && (na <= 0 || axes[0] == 0 || axes[0] == -1);
        out_rank = 0;
        if (!fine) {
            elems_clear(&e);
            return TP_OK;
        }
    } else {
        bool fine = rank == 0 && na == 1 && (axes[0] == 0 || axes[0] == -1);
        out_rank = 1;
        if (!fine) {
            elems_clear(&e);
            return TP_OK;
        }
    }
    *done = true;
    return set_elems(c, 0, &e, out_rank);
}

static tp_status do_concat(ox_ctx *c, bool *done) {
    int n_in = ox_n_in(c);
    if (n_in > OX_MAX_SHAPE_VALUE) return TP_OK;
    int64_t axis = ox_attr_i(c, "axis", 0);
    if (axis != 0 && axis != -1) return TP_OK;
    elems r;
    elems_init(&r);
    tp_status st = TP_OK;
    bool all = true;
    for (int i = 0; st == TP_OK && all && i < n_in; i++) {
        elems e;
        bool ok;
        st = in_elems(c, i, &e, &ok);
        if (st != TP_OK) break;
        all = ok && e.rank == 1 && r.n + e.n <= OX_MAX_SHAPE_VALUE;
        for (int k = 0; all && k < e.n; k++) {
            r.v[r.n++] = e.v[k];
            e.v[k] = tp_value_none();
        }
        elems_clear(&e);
    }
    if (st == TP_OK && all) {
        *done = true;
        st = set_elems(c, 0, &r, 1);
    }
    elems_clear(&r);
    return st;
}

static tp_status do_identity(ox_ctx *c, bool *done) {
    if (!ox_in_shape(c, 0, NULL)) return TP_OK;
    if (!strcmp(ox_node(c)->op_type, "Cast")) {
        int64_t to = ox_attr_i(c, "to", 0);
        if (to != 6 && to != 7) return TP_OK; /* int32, int64 keep the values; others: a tensor cast */
    }
    elems e;
    bool ok;
    TP_TRY(in_elems(c, 0, &e, &ok));
    *done = true;
    return set_elems(c, 0, &e, e.rank);
}

static tp_status do_binary(ox_ctx *c, bin_kind k, bool *done) {
    if (!ox_in_shape(c, 0, NULL) && !ox_in_shape(c, 1, NULL)) return TP_OK;
    elems a, b, r;
    bool oka, okb;
    elems_init(&r);
    TP_TRY(in_elems(c, 0, &a, &oka));
    tp_status st = in_elems(c, 1, &b, &okb);
    int n;
    bool ok = st == TP_OK && oka && okb && bcast(&a, &b, &n);
    for (int i = 0; ok && st == TP_OK && i < n; i++) {
        st = elem_bin(c, k, &a.v[a.n == 1 ? 0 : i], &b.v[b.n == 1 ? 0 : i], &r.v[i], &ok);
        if (st == TP_OK && ok) r.n++;
    }
    if (st == TP_OK && ok) {
        *done = true;
        st = set_elems(c, 0, &r, a.rank > b.rank ? a.rank : b.rank);
    }
    elems_clear(&a);
    elems_clear(&b);
    elems_clear(&r);
    return st;
}

static tp_status do_neg(ox_ctx *c, bool *done) {
    if (!ox_in_shape(c, 0, NULL)) return TP_OK;
    elems a, r;
    bool ok;
    elems_init(&r);
    TP_TRY(in_elems(c, 0, &a, &ok));
    tp_value m1 = tp_value_int(-1);
    tp_status st = TP_OK;
    for (int i = 0; ok && st == TP_OK && i < a.n; i++) {
        st = elem_bin(c, B_MUL, &a.v[i], &m1, &r.v[i], &ok);
        if (st == TP_OK && ok) r.n++;
    }
    if (st == TP_OK && ok) {
        *done = true;
        st = set_elems(c, 0, &r, a.rank);
    }
    elems_clear(&a);
    elems_clear(&r);
    return st;
}

/* Equal of a shape value with constants, where it is decided at import:
 * equal ints, or a symbolic size against a negative constant (never). */
static tp_status do_equal(ox_ctx *c, bool *done) {
    if (!ox_in_shape(c, 0, NULL) && !ox_in_shape(c, 1, NULL)) return TP_OK;
    elems a, b;
    bool oka, okb;
    TP_TRY(in_elems(c, 0, &a, &oka));
    tp_status st = in_elems(c, 1, &b, &okb);
    int n;
    bool ok = st == TP_OK && oka && okb && bcast(&a, &b, &n);
    uint8_t res[OX_MAX_SHAPE_VALUE];
    for (int i = 0; ok && i < n; i++) {
        const tp_value *x = &a.v[a.n == 1 ? 0 : i], *y = &b.v[b.n == 1 ? 0 : i];
        if (x->kind == TP_VAL_INT && y->kind == TP_VAL_INT) res[i] = x->u.i == y->u.i;
        else if (x->kind == TP_VAL_NODE && y->kind == TP_VAL_NODE && x->u.node == y->u.node) res[i] = 1;
        else if ((x->kind == TP_VAL_INT && x->u.i < 0 && nonneg(y, 0)) || (y->kind == TP_VAL_INT && y->u.i < 0 && nonneg(x, 0)))
            res[i] = 0;
        else ok = false;
    }
    if (st == TP_OK && ok) {
        int rank = a.rank > b.rank ? a.rank : b.rank;
        int64_t len = n;
        tp_tensor *t;
        st = tp_tensor_from_data(TP_BOOL, rank, &len, res, &t);
        if (st == TP_OK) {
            tp_value v = tp_value_tensor(t);
            *done = true;
            st = ox_set_out(c, 0, &v);
        }
    }
    elems_clear(&a);
    elems_clear(&b);
    return st;
}

/* Where with a constant condition over shape values. */
static tp_status do_where(ox_ctx *c, bool *done) {
    if (!ox_in_shape(c, 1, NULL) && !ox_in_shape(c, 2, NULL)) return TP_OK;
    tp_tensor *cond = ox_const(ox_in(c, 0));
    if (!cond || tp_tensor_ndim(cond) > 1 || tp_tensor_numel(cond) > OX_MAX_SHAPE_VALUE) return TP_OK;
    elems x, y, r;
    bool okx, oky;
    elems_init(&r);
    TP_TRY(in_elems(c, 1, &x, &okx));
    tp_status st = in_elems(c, 2, &y, &oky);
    int n, cn = (int)tp_tensor_numel(cond);
    bool ok = st == TP_OK && okx && oky && bcast(&x, &y, &n);
    if (ok && cn != 1 && n != 1 && cn != n) ok = false;
    if (ok && n == 1) n = cn;
    for (int i = 0; ok && st == TP_OK && i < n; i++) {
        bool pick = tp_tensor_item_f64(cond, cn == 1 ? 0 : i) != 0;
        const elems *s = pick ? &x : &y;
        st = tp_value_copy(&s->v[s->n == 1 ? 0 : i], &r.v[i]);
        if (st == TP_OK) r.n++;
    }
    if (st == TP_OK && ok) {
        int rank = x.rank > y.rank ? x.rank : y.rank;
        if (tp_tensor_ndim(cond) > rank) rank = tp_tensor_ndim(cond);
        *done = true;
        st = set_elems(c, 0, &r, rank);
    }
    elems_clear(&x);
    elems_clear(&y);
    elems_clear(&r);
    return st;
}

/* op(x, [sizes]) for Reshape / Expand / Tile with a shape value. */
static tp_status call_sizes(ox_ctx *c, tp_op op, const tp_value *x, const elems *e, bool *done) {
    tp_value l;
    TP_TRY(elems_list(e, &l));
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, l);
    tp_value r;
    TP_TRY(ox_call(c, op, &A, &r));
    *done = true;
    return ox_set_out(c, 0, &r);
}

static tp_status do_reshape(ox_ctx *c, bool *done) {
    if (ox_opset(c) < 5 || !ox_in_shape(c, 1, NULL) || ox_in_shape(c, 0, NULL)) return TP_OK;
    const tp_value *x = ox_in(c, 0);
    const tp_tensor *m = ox_meta(x);
    if (!m) return TP_OK;
    elems e;
    bool ok;
    TP_TRY(in_elems(c, 1, &e, &ok));
    tp_status st = TP_OK;
    if (ok && e.rank != 1) st = ox_bad(c, "shape must be 1-D");
    bool allowzero = ox_attr_i(c, "allowzero", 0) != 0;
    for (int i = 0; ok && st == TP_OK && i < e.n && !allowzero; i++) {
        if (e.v[i].kind != TP_VAL_INT || e.v[i].u.i != 0) continue;
        if (i >= tp_tensor_ndim(m)) {
            st = ox_bad(c, "shape[%d] = 0 copies a dim the input does not have", i);
            break;
        }
        if (x->kind == TP_VAL_NODE && ox_in_dyn(c, 0)) {
            tp_value_clear(&e.v[i]);
            st = sym_size(c, x, i, &e.v[i]);
        } else {
            e.v[i] = tp_value_int(tp_tensor_sizes(m)[i]);
        }
    }
    if (ok && st == TP_OK) st = call_sizes(c, TP_OP_RESHAPE, x, &e, done);
    elems_clear(&e);
    return st;
}

/* Expand: ONNX broadcasts both ways (a target 1 keeps the input's dim);
 * torch's expand keeps a dim given as -1. A symbolic target is taken as the
 * size (the input's dim is 1 or equal to it: the op checks when it runs). */
static tp_status do_expand(ox_ctx *c, bool *done) {
    if (!ox_in_shape(c, 1, NULL) || ox_in_shape(c, 0, NULL)) return TP_OK;
    const tp_value *x = ox_in(c, 0);
    const tp_tensor *m = ox_meta(x);
    if (!m) return TP_OK;
    elems t, o;
    bool ok;
    TP_TRY(in_elems(c, 1, &t, &ok));
    elems_init(&o);
    int r = tp_tensor_ndim(m), n = t.n, out_rank = r > n ? r : n;
    tp_status st = TP_OK;
    if (ok && out_rank > TP_MAX_DIMS) st = ox_bad(c, "expanding to %d dims (at most %d)", out_rank, TP_MAX_DIMS);
    for (int j = 0; ok && st == TP_OK && j < out_rank; j++) {
        int di = j - (out_rank - r), ti = j - (out_rank - n);
        if (ti < 0) o.v[j] = tp_value_int(-1);
        else if (t.v[ti].kind == TP_VAL_INT && t.v[ti].u.i == 1) o.v[j] = tp_value_int(di >= 0 ? -1 : 1);
        else st = tp_value_copy(&t.v[ti], &o.v[j]);
        if (st == TP_OK) o.n++;
    }
    if (ok && st == TP_OK) st = call_sizes(c, TP_OP_EXPAND, x, &o, done);
    elems_clear(&t);
    elems_clear(&o);
    return st;
}

static tp_status do_tile(ox_ctx *c, bool *done) {
    if (!ox_in_shape(c, 1, NULL) || ox_in_shape(c, 0, NULL)) return TP_OK;
    const tp_value *x = ox_in(c, 0);
    const tp_tensor *m = ox_meta(x);
    if (!m) return TP_OK;
    elems t;
    bool ok;
    TP_TRY(in_elems(c, 1, &t, &ok));
    tp_status st = TP_OK;
    if (ok && t.n != tp_tensor_ndim(m)) st = ox_bad(c, "repeats has %d values for rank %d", t.n, tp_tensor_ndim(m));
    if (ok && st == TP_OK) st = call_sizes(c, TP_OP_REPEAT, x, &t, done);
    elems_clear(&t);
    return st;
}

static tp_status do_constant_of_shape(ox_ctx *c, bool *done) {
    if (!ox_in_shape(c, 0, NULL)) return TP_OK;
    elems e;
    bool ok;
    TP_TRY(in_elems(c, 0, &e, &ok));
    tp_value l = tp_value_none(), r;
    tp_status st = elems_list(&e, &l);
    elems_clear(&e);
    TP_TRY(st);
    TP_TRY(ox_constant_of_shape_call(c, &l, &r));
    *done = true;
    return ox_set_out(c, 0, &r);
}

/* Slice of a tensor with bounds from shape values (positive steps), or of
 * a shape value with constant bounds. */
static tp_status do_slice(ox_ctx *c, bool *done) {
    if (ox_opset(c) < 10) return TP_OK;
    bool data_shape = ox_in_shape(c, 0, NULL) != NULL;
    bool bound_shape = ox_in_shape(c, 1, NULL) || ox_in_shape(c, 2, NULL);
    if (!data_shape && !bound_shape) return TP_OK;
    if (ox_in_shape(c, 3, NULL) || ox_in_shape(c, 4, NULL)) return TP_OK;
    elems st_, en, ax, sp;
    bool ok1, ok2, ok3 = true, ok4 = true;
    TP_TRY(in_elems(c, 1, &st_, &ok1));
    tp_status st = in_elems(c, 2, &en, &ok2);
    elems_init(&ax);
    elems_init(&sp);
    if (st == TP_OK && (ox_in(c, 3))) st = in_elems(c, 3, &ax, &ok3);
    if (st == TP_OK && (ox_in(c, 4))) st = in_elems(c, 4, &sp, &ok4);
    bool ok = st == TP_OK && ok1 && ok2 && ok3 && ok4 && st_.n == en.n && (!ox_in(c, 3) || ax.n == st_.n) &&
              (!ox_in(c, 4) || sp.n == st_.n);
    if (ok && data_shape) { /* slicing a shape value: everything constant */
        elems d, r;
        bool okd;
        elems_init(&r);
        ok = !bound_shape && st_.n == 1 && (!ax.n || ax.v[0].u.i == 0 || ax.v[0].u.i == -1);
        if (ok) st = in_elems(c, 0, &d, &okd);
        if (ok && st == TP_OK) {
            int64_t n = d.n, s = st_.v[0].u.i, e = en.v[0].u.i, step = sp.n ? sp.v[0].u.i : 1;
            if (step == 0) st = ox_bad(c, "slice step is 0");
            if (s < 0) s += n;
            if (e < 0 && e > INT64_MIN / 2) e += n;
            if (step > 0) {
                s = s < 0 ? 0 : s > n ? n : s;
                e = e < 0 ? 0 : e > n ? n : e;
                for (int64_t i = s; st == TP_OK && i < e; i += step) {
                    st = tp_value_copy(&d.v[i], &r.v[r.n]);
                    if (st == TP_OK) r.n++;
                }
            } else if (st == TP_OK) {
                s = s < 0 ? -1 : s > n - 1 ? n - 1 : s;
                e = e < -1 ? -1 : e > n - 1 ? n - 1 : e;
                for (int64_t i = s; st == TP_OK && i > e; i += step) {
                    st = tp_value_copy(&d.v[i], &r.v[r.n]);
                    if (st == TP_OK) r.n++;
                }
            }
            if (st == TP_OK) {
                *done = true;
                st = set_elems(c, 0, &r, 1);
            }
            elems_clear(&d);
        }
        elems_clear(&r);
        ok = false;
    }
    if (ok) {
        const tp_value *x = ox_in(c, 0);
        const tp_tensor *m = ox_meta(x);
        int nd = m ? tp_tensor_ndim(m) : 0;
        ok = m != NULL;
        for (int i = 0; ok && i < sp.n; i++) ok = sp.v[i].u.i > 0; /* negative steps: constant bounds only */
        tp_value v = tp_value_none();
        if (ok) st = tp_value_copy(x, &v);
        for (int i = 0; ok && st == TP_OK && i < st_.n; i++) {
            int64_t axis = ax.n ? ax.v[i].u.i : i;
            if (axis < 0) axis += nd;
            if (axis < 0 || axis >= nd) {
                st = ox_bad(c, "axis %" PRId64 " out of range for rank %d", ax.n ? ax.v[i].u.i : i, nd);
                break;
            }
            ox_args A;
            ox_args_init(&A);
            ox_arg(&A, v);
            v = tp_value_none();
            ox_arg(&A, tp_value_int(axis));
            ox_arg_ref(&A, &st_.v[i]);
            ox_arg_ref(&A, &en.v[i]);
            ox_arg(&A, tp_value_int(sp.n ? sp.v[i].u.i : 1));
            st = ox_call(c, TP_OP_SLICE, &A, &v);
        }
        if (ok && st == TP_OK) {
            *done = true;
            st = ox_set_out(c, 0, &v);
        } else {
            tp_value_clear(&v);
        }
    }
    elems_clear(&st_);
    elems_clear(&en);
    elems_clear(&ax);
    elems_clear(&sp);
    return st;
}

/* Range over int64 scalars with a symbolic bound: arange, sized when the
 * engine plans each shape class. */
static tp_status do_range(ox_ctx *c, bool *done) {
    elems e[3];
    bool ok = true, any = false;
    tp_status st = TP_OK;
    int got = 0;
    for (int i = 0; i < 3 && st == TP_OK; i++) {
        bool oki;
        any |= ox_in_shape(c, i, NULL) != NULL;
        st = in_elems(c, i, &e[i], &oki);
        if (st == TP_OK) got++;
        ok = ok && oki && e[i].n == 1 && e[i].rank == 0;
    }
    if (st == TP_OK && ok && any) {
        const tp_value *d = &e[2].v[0];
        if (d->kind == TP_VAL_INT && d->u.i == 0) st = ox_bad(c, "delta is 0");
        bool int64_all = true;
        for (int i = 0; i < 3; i++) {
            const tp_value *in = ox_in_shape(c, i, NULL) ? NULL : ox_in(c, i);
            if (in && tp_tensor_dtype(ox_meta(in)) != TP_INT64) int64_all = false;
        }
        if (st == TP_OK && int64_all) {
            ox_args A;
            ox_args_init(&A);
            for (int i = 0; i < 3; i++) ox_arg_ref(&A, &e[i].v[0]);
            ox_kw(&A, "dtype", tp_value_dtype(TP_INT64));
            tp_value r;
            st = ox_call(c, TP_OP_ARANGE, &A, &r);
            if (st == TP_OK) {
                *done = true;
                st = ox_set_out(c, 0, &r);
            }
        }
    }
    for (int i = 0; i < got; i++) elems_clear(&e[i]);
    return st;
}

tp_status tp__onnx_convert_shape_node(ox_ctx *c, const char *op, bool *done) {
    *done = false;
    if (!strcmp(op, "Shape")) return do_shape(c, false, done);
    if (!strcmp(op, "Size")) return do_shape(c, true, done);
    bool any = false;
    for (int i = 0; i < ox_n_in(c) && !any; i++) any = ox_in_shape(c, i, NULL) != NULL;
    if (!any) return TP_OK;
    if (!strcmp(op, "Gather")) return do_gather(c, done);
    if (!strcmp(op, "Unsqueeze")) return do_unsqueeze(c, false, done);
    if (!strcmp(op, "Squeeze")) return do_unsqueeze(c, true, done);
    if (!strcmp(op, "Concat")) return do_concat(c, done);
    if (!strcmp(op, "Identity") || !strcmp(op, "Cast")) return do_identity(c, done);
    if (!strcmp(op, "Add")) return do_binary(c, B_ADD, done);
    if (!strcmp(op, "Sub")) return do_binary(c, B_SUB, done);
    if (!strcmp(op, "Mul")) return do_binary(c, B_MUL, done);
    if (!strcmp(op, "Div")) return do_binary(c, B_DIV, done);
    if (!strcmp(op, "Neg")) return do_neg(c, done);
    if (!strcmp(op, "Equal")) return do_equal(c, done);
    if (!strcmp(op, "Where")) return do_where(c, done);
    if (!strcmp(op, "Reshape")) return do_reshape(c, done);
    if (!strcmp(op, "Expand")) return do_expand(c, done);
    if (!strcmp(op, "Tile")) return do_tile(c, done);
    if (!strcmp(op, "ConstantOfShape")) return do_constant_of_shape(c, done);
    if (!strcmp(op, "Slice")) return do_slice(c, done);
    if (!strcmp(op, "Range")) return do_range(c, done);
    return TP_OK;
}

/* ---- for op_map.c: sizes that follow dynamic dims ------------------------------ */

tp_status ox_dim(ox_ctx *c, const tp_value *v, int d, tp_value *out) {
    const tp_tensor *m = ox_meta(v);
    if (!m || d < 0 || d >= tp_tensor_ndim(m)) return ox_bad(c, "dim %d out of range", d);
    if (v->kind == TP_VAL_NODE && ox_node_dyn(c)) return sym_size(c, v, d, out);
    *out = tp_value_int(tp_tensor_sizes(m)[d]);
    return TP_OK;
}

tp_status ox_dim_product(ox_ctx *c, const tp_value *v, int from, int to, tp_value *out) {
    *out = tp_value_int(1);
    for (int d = from; d < to; d++) {
        tp_value s = tp_value_none(), p = tp_value_none();
        bool ok;
        tp_status st = ox_dim(c, v, d, &s);
        if (st == TP_OK) st = elem_bin(c, B_MUL, out, &s, &p, &ok);
        tp_value_clear(&s);
        if (st == TP_OK && !ok) st = ox_bad(c, "size overflows");
        if (st != TP_OK) {
            tp_value_clear(out);
            return st;
        }
        tp_value_clear(out);
        *out = p;
    }
    return TP_OK;
}

tp_status ox_reshape_to(ox_ctx *c, const tp_value *x, tp_value *sizes, int n, tp_value *out) {
    tp_value l = tp_value_none();
    tp_status st = tp_value_list(n, &l);
    for (int k = 0; k < n; k++) {
        if (st == TP_OK) st = tp_value_seq_set(&l, k, &sizes[k]);
        else tp_value_clear(&sizes[k]);
    }
    if (st != TP_OK) {
        tp_value_clear(&l);
        return st;
    }
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, l);
    return ox_call(c, TP_OP_RESHAPE, &A, out);
}

/* ---- shape value -> tensor ---------------------------------------------------- */

static tp_status full_of(ox_ctx *c, int ndim, const tp_value *item, tp_value *out) {
    ox_args A;
    ox_args_init(&A);
    int64_t one = 1;
    ox_arg_ints(&A, &one, ndim);
    ox_arg_ref(&A, item);
    ox_kw(&A, "dtype", tp_value_dtype(TP_INT64));
    return ox_call(c, TP_OP_FULL, &A, out);
}

tp_status tp__onnx_shape_tensor(ox_ctx *c, const tp_value *items, int rank, tp_value *out) {
    int64_t n = tp_value_len(items);
    if (rank == 0) return full_of(c, 0, tp_value_at(items, 0), out);
    tp_value pieces = tp_value_none();
    TP_TRY(tp_value_list(0, &pieces));
    tp_status st = TP_OK;
    int64_t run[OX_MAX_SHAPE_VALUE], n_run = 0;
    for (int64_t k = 0; st == TP_OK && k <= n; k++) {
        const tp_value *it = k < n ? tp_value_at(items, k) : NULL;
        if (it && it->kind == TP_VAL_INT) {
            run[n_run++] = it->u.i;
            continue;
        }
        tp_value p = tp_value_none();
        if (n_run) { /* constants so far */
            tp_tensor *t;
            st = tp_tensor_from_data(TP_INT64, 1, &n_run, run, &t);
            if (st == TP_OK) {
                p = tp_value_tensor(t);
                st = tp_value_append(&pieces, &p);
            }
            n_run = 0;
        }
        if (st == TP_OK && it) {
            st = full_of(c, 1, it, &p);
            if (st == TP_OK) st = tp_value_append(&pieces, &p);
        }
        tp_value_clear(&p);
    }
    if (st != TP_OK) {
        tp_value_clear(&pieces);
        return st;
    }
    ox_args A;
    ox_args_init(&A);
    ox_arg(&A, pieces);
    ox_arg(&A, tp_value_int(0));
    return ox_call(c, TP_OP_CAT, &A, out);
}
