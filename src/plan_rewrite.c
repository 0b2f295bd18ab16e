/*
 * plan_rewrite.c - graph rewrites the planner applies to a copy of a
 * program's graph before planning it (engine.c); the program itself never
 * changes.
 *
 * Attention: the unfused pattern that ONNX exports and hand-written
 * attention produce,
 *     softmax(matmul(Q, Kt) [/ c | * c], dim=-1) @ V
 * with every intermediate used once, c a constant scalar and a score
 * matrix of at least 8 MiB, becomes one
 * scaled_dot_product_attention(Q, Kt^T, V, scale=...) node, which runs
 * through the fused attention kernel (src/cpu/fast_attention.c) without
 * materialising the scores.
 *
 * SiLU: mul(x, sigmoid(x)) (either order, the sigmoid used only there),
 * which ONNX exports of SiLU/Swish produce, becomes silu(x): one pass
 * instead of two, and an activation the producer of x (a convolution or
 * GEMM) can take into its epilogue. The values are the same float
 * operations (x * sigmoid(x) rounded as one product) except at x = -inf,
 * where x * sigmoid(x) is NaN and silu gives -0 (its limit).
 *
 * GELU: the decomposed forms ONNX exports (opset < 20) produce,
 *     0.5 * (x * (1 + erf(x / sqrt2)))          (or x * 0.7071 inside erf)
 *     0.5 * (x * (1 + tanh(c * (x + 0.044715 * x^3))))   c = sqrt(2/pi)
 * with the factors in any order and every intermediate used once, become
 * gelu(x) / gelu(x, approximate='tanh'): one pass (or a GEMM epilogue)
 * instead of five to eight. The fused function agrees with the chain to
 * within float rounding (test_vmath bounds gelu against the exact formula
 * at 1e-6 relative).
 *
 * Row selections: index_select / slice / select of a dim the ops before
 * them compute index by index (a classifier reading a transformer's class
 * token) move before those ops, so they compute the selected rows only
 * (below, tp__rewrite_row_select).
 */
#include <math.h>
#include <string.h>

#include "engine_impl.h"
#include "graph_impl.h"
#include "program_impl.h"

/* Score matrices at least this large (bytes, all heads) are never
 * materialised: their attention goes through the fused kernel. */
#define TP_ATTENTION_FUSE_BYTES ((int64_t)8 << 20)

static bool is_call(const tp_node *n, tp_op op) {
    return n && (n->kind == TP_NODE_CALL_FUNCTION || n->kind == TP_NODE_CALL_METHOD) && n->op == op;
}

static const tp_value *arg(const tp_node *n, int i) { return tp_value_at(&n->args, i); }

static tp_node *arg_node(const tp_node *n, int i) {
    const tp_value *v = arg(n, i);
    return v && v->kind == TP_VAL_NODE ? v->u.node : NULL;
}

static int rank_of(const tp_node *n) {
    return n && n->meta_val.kind == TP_VAL_TENSOR ? tp_tensor_ndim(n->meta_val.u.tensor) : -1;
}

static bool used_once(const tp_node *n) { return n->n_users == 1 && tp_value_len(&n->kwargs) == 0; }

/* Does g write anything in place? A rewritten node reads its operands at
 * its own position, where the ops it replaces read them earlier: a write
 * between the two would be seen; and a rewrite may turn an alias into a
 * copy or back (contiguous, reshape, the view ops), which a later write
 * through it would show. None of the rewrites below touches such a graph
 * (exported programs are functional; their state mutations are outputs). */
static bool writes_in_place(const tp_graph *g) {
    for (const tp_node *n = g->first; n; n = n->next)
        if ((n->kind == TP_NODE_CALL_FUNCTION || n->kind == TP_NODE_CALL_METHOD) &&
            (tp_op_flags(n->op) & (TP_OPF_INPLACE | TP_OPF_MUTATES)))
            return true;
    return false;
}

static bool float32_meta(const tp_node *n) {
    return n && n->meta_val.kind == TP_VAL_TENSOR && tp_tensor_dtype(n->meta_val.u.tensor) == TP_FLOAT32;
}

/* Does binary n (an operand times or over a scalar constant) keep its
 * tensor operand t's rank and dtype? A one-element constant of higher rank
 * broadcasts, one of another dtype promotes. */
static bool keeps_kind(const tp_node *n, const tp_node *t) {
    return rank_of(n) >= 0 && rank_of(n) == rank_of(t) &&
           tp_tensor_dtype(n->meta_val.u.tensor) == tp_tensor_dtype(t->meta_val.u.tensor);
}

/* The value of a one-element float32 constant the node stands for. */
static bool constant_scalar(const tp_program *p, const tp_node *n, double *out) {
    const char *target = NULL;
    if (n->kind == TP_NODE_GET_ATTR) {
        target = n->target;
    } else if (n->kind == TP_NODE_PLACEHOLDER) {
        int k = tp_signature_find_input(p->signature, n->name);
        const tp_input_spec *s = k >= 0 ? tp_signature_input(p->signature, k) : NULL;
        if (!s || (s->kind != TP_INPUT_CONSTANT_TENSOR && s->kind != TP_INPUT_PARAMETER)) return false;
        target = s->target;
    }
    tp_tensor *t;
    if (!target || tp_module_get_state(p->state, target, &t, NULL, NULL) != TP_OK) {
        tp_clear_error();
        return false;
    }
    if (tp_tensor_dtype(t) != TP_FLOAT32 || tp_tensor_numel(t) != 1) return false;
    *out = tp_tensor_item_f64(t, 0);
    return *out == *out && *out != 0.0;
}

/* Rewrite one match ending at m2 = matmul(P, V); true when done. */
static tp_status rewrite_at(const tp_program *p, tp_graph *g, tp_node *m2, bool *done) {
    *done = false;
    tp_node *sm = arg_node(m2, 0), *v = arg_node(m2, 1);
    if (!is_call(sm, TP_OP_SOFTMAX) || !v || !used_once(sm) || tp_value_len(&m2->kwargs) != 0) return TP_OK;
    const tp_value *dim = arg(sm, 1), *dt = arg(sm, 2);
    tp_node *x = arg_node(sm, 0);
    int r = rank_of(x);
    if (!dim || dim->kind != TP_VAL_INT || (dt && dt->kind != TP_VAL_NONE) || r < 2) return TP_OK;
    if (dim->u.i != -1 && dim->u.i != r - 1) return TP_OK;
    /* no mask: a float mask of -inf can mask a whole row, where softmax gives NaN but attention zeros */
    tp_node *mask = NULL, *chain[4] = {m2, sm, NULL, NULL};
    int n_chain = 2;
    double scale = 1.0;
    bool have_scale = false;
    if ((is_call(x, TP_OP_DIV) || is_call(x, TP_OP_MUL)) && used_once(x) && tp_value_len(&x->args) == 2) {
        double c;
        const tp_value *cv = arg(x, 1);
        if (cv->kind == TP_VAL_NODE && constant_scalar(p, cv->u.node, &c)) {
            scale = is_call(x, TP_OP_DIV) ? 1.0 / c : c;
        } else if (cv->kind == TP_VAL_FLOAT || cv->kind == TP_VAL_INT) {
            c = tp_value_as_f64(cv);
            if (c == 0.0) return TP_OK;
            scale = is_call(x, TP_OP_DIV) ? 1.0 / c : c;
        } else {
            return TP_OK;
        }
        if (is_call(x, TP_OP_DIV) && tp_value_len(&x->kwargs) != 0) return TP_OK;
        if (!keeps_kind(x, arg_node(x, 0))) return TP_OK;
        have_scale = true;
        chain[n_chain++] = x;
        x = arg_node(x, 0);
    }
    (void)have_scale;
    tp_node *m1 = x;
    if (!is_call(m1, TP_OP_MATMUL) || !used_once(m1) || tp_value_len(&m1->args) != 2) return TP_OK;
    /* short sequences run faster as batched GEMMs (measured with bench/: the fused kernel was 5-10% slower on
     * 128-197 tokens); the fused kernel pays off when the score matrix is large */
    if (m1->meta_val.kind != TP_VAL_TENSOR ||
        tp_tensor_numel(m1->meta_val.u.tensor) * (int64_t)sizeof(float) < TP_ATTENTION_FUSE_BYTES)
        return TP_OK;
    tp_node *q = arg_node(m1, 0), *kt = arg_node(m1, 1);
    if (!q || !kt || rank_of(q) < 2 || rank_of(kt) < 2 || rank_of(v) < 2) return TP_OK;
    /* float32 only: the fused kernel's; a 16-bit product's scores round
     * (and may overflow) before the softmax, the reference attention's do not */
    if (!float32_meta(q) || !float32_meta(kt) || !float32_meta(v) || !float32_meta(m1) || !float32_meta(m2))
        return TP_OK;
    /* build transpose(Kt, -2, -1) and the attention node just before m2 */
    TP_TRY(tp_graph_set_insert_point(g, m2));
    tp_value targs, sargs, kwargs;
    TP_TRY(tp_value_tuple(3, &targs));
    targs.u.seq.items[0] = tp_value_node(kt);
    targs.u.seq.items[1] = tp_value_int(-2);
    targs.u.seq.items[2] = tp_value_int(-1);
    tp_node *k, *attn;
    tp_status st = tp_graph_call_function(g, TP_OP_TRANSPOSE, &targs, NULL, &k);
    tp_value_clear(&targs);
    if (st == TP_OK) st = tp_value_tuple(6, &sargs);
    if (st != TP_OK) {
        tp_graph_set_insert_point(g, NULL);
        return st;
    }
    sargs.u.seq.items[0] = tp_value_node(q);
    sargs.u.seq.items[1] = tp_value_node(k);
    sargs.u.seq.items[2] = tp_value_node(v);
    sargs.u.seq.items[3] = mask ? tp_value_node(mask) : tp_value_none();
    sargs.u.seq.items[4] = tp_value_float(0.0);
    sargs.u.seq.items[5] = tp_value_bool(false);
    st = tp_value_dict(&kwargs);
    if (st == TP_OK) {
        tp_value sv = tp_value_float(scale);
        st = tp_value_dict_set(&kwargs, "scale", &sv);
    }
    if (st == TP_OK) st = tp_graph_call_function(g, TP_OP_SCALED_DOT_PRODUCT_ATTENTION, &sargs, &kwargs, &attn);
    tp_value_clear(&sargs);
    tp_value_clear(&kwargs);
    tp_graph_set_insert_point(g, NULL);
    TP_TRY(st);
    TP_TRY(tp_node_replace_all_uses_with(m2, attn, NULL, NULL, NULL));
    chain[n_chain++] = m1;
    for (int i = 0; i < n_chain; i++) TP_TRY(tp_graph_erase_node(g, chain[i]));
    *done = true;
    return TP_OK;
}

tp_status tp__rewrite_attention(const tp_program *p, tp_graph *g, int *n_rewritten) {
    *n_rewritten = 0;
    if (writes_in_place(g)) return TP_OK;
    for (tp_node *n = g->first; n;) {
        tp_node *next = n->next;
        if (is_call(n, TP_OP_MATMUL)) {
            bool done;
            TP_TRY(rewrite_at(p, g, n, &done));
            if (done) (*n_rewritten)++;
        }
        n = next;
    }
    return TP_OK;
}

/* mul(x, sigmoid(x)) -> silu(x) at m; *done when rewritten. */
static tp_status rewrite_silu_at(tp_graph *g, tp_node *m, bool *done) {
    *done = false;
    if (tp_value_len(&m->args) != 2 || tp_value_len(&m->kwargs) != 0) return TP_OK;
    tp_node *a = arg_node(m, 0), *b = arg_node(m, 1), *sg = NULL, *x = NULL;
    if (is_call(b, TP_OP_SIGMOID) && arg_node(b, 0) == a) sg = b, x = a;
    else if (is_call(a, TP_OP_SIGMOID) && arg_node(a, 0) == b) sg = a, x = b;
    if (!sg || !used_once(sg) || tp_value_len(&sg->args) != 1) return TP_OK;
    if (x->meta_val.kind != TP_VAL_TENSOR || tp_tensor_dtype(x->meta_val.u.tensor) != TP_FLOAT32) return TP_OK;
    TP_TRY(tp_graph_set_insert_point(g, m));
    tp_value args;
    tp_node *silu = NULL;
    tp_status st = tp_value_tuple(1, &args);
    if (st == TP_OK) {
        args.u.seq.items[0] = tp_value_node(x);
        st = tp_graph_call_function(g, TP_OP_SILU, &args, NULL, &silu);
        tp_value_clear(&args);
    }
    tp_graph_set_insert_point(g, NULL);
    TP_TRY(st);
    TP_TRY(tp_node_replace_all_uses_with(m, silu, NULL, NULL, NULL));
    TP_TRY(tp_graph_erase_node(g, m));
    TP_TRY(tp_graph_erase_node(g, sg));
    *done = true;
    return TP_OK;
}

tp_status tp__rewrite_silu(tp_graph *g, int *n_rewritten) {
    *n_rewritten = 0;
    if (writes_in_place(g)) return TP_OK;
    for (tp_node *n = g->first; n;) {
        tp_node *next = n->next;
        if (is_call(n, TP_OP_MUL)) {
            bool done;
            TP_TRY(rewrite_silu_at(g, n, &done));
            if (done) (*n_rewritten)++;
        }
        n = next;
    }
    return TP_OK;
}

/* ---- GELU ---- */

/* The value of argument i of n when it is a number or a one-element
 * float32 constant. */
static bool scalar_arg(const tp_program *p, const tp_node *n, int i, double *v) {
    const tp_value *a = arg(n, i);
    if (!a) return false;
    if (a->kind == TP_VAL_FLOAT || a->kind == TP_VAL_INT) {
        *v = tp_value_as_f64(a);
        return true;
    }
    return a->kind == TP_VAL_NODE && constant_scalar(p, a->u.node, v);
}

static bool near(double v, double want) { return fabs(v - want) <= 1e-6 * fabs(want); }

/* n = op(node, c) or op(c, node) with a scalar c satisfying want (binary,
 * no kwargs): the node operand, else NULL. commutes: c may come first. */
static tp_node *with_scalar(const tp_program *p, tp_node *n, tp_op op, double want, bool commutes) {
    if (!is_call(n, op) || tp_value_len(&n->args) != 2 || tp_value_len(&n->kwargs) != 0) return NULL;
    double v;
    tp_node *a0 = arg_node(n, 0), *a1 = arg_node(n, 1);
    if (a0 && scalar_arg(p, n, 1, &v) && near(v, want) && keeps_kind(n, a0)) return a0;
    if (commutes && a1 && scalar_arg(p, n, 0, &v) && near(v, want) && keeps_kind(n, a1)) return a1;
    return NULL;
}

/* The other node operand of binary n when one operand is `one`. */
static tp_node *other_operand(tp_node *n, const tp_node *one) {
    if (tp_value_len(&n->args) != 2 || tp_value_len(&n->kwargs) != 0) return NULL;
    tp_node *a0 = arg_node(n, 0), *a1 = arg_node(n, 1);
    if (a0 == one) return a1;
    if (a1 == one) return a0;
    return NULL;
}

/* e is erf(x / sqrt2) or erf(x * 1/sqrt2) (or tanh(c * (x + 0.044715 * x^3)),
 * *tanh_form set) with every intermediate used once: the nodes between e
 * and x go to chain, and x is returned. */
static tp_node *gelu_inner(const tp_program *p, tp_node *e, bool *tanh_form, tp_node **chain, int *n_chain) {
    if (!used_once(e) || tp_value_len(&e->args) != 1) return NULL;
    tp_node *d = arg_node(e, 0);
    if (!d || !used_once(d)) return NULL;
    if (is_call(e, TP_OP_ERF)) {
        tp_node *x = with_scalar(p, d, TP_OP_DIV, 1.4142135623730951, false);
        if (!x) x = with_scalar(p, d, TP_OP_MUL, 0.7071067811865476, true);
        if (!x) return NULL;
        chain[(*n_chain)++] = d;
        *tanh_form = false;
        return x;
    }
    if (!is_call(e, TP_OP_TANH)) return NULL;
    tp_node *t1 = with_scalar(p, d, TP_OP_MUL, 0.7978845608028654, true); /* x + 0.044715 x^3 */
    if (!t1 || !is_call(t1, TP_OP_ADD) || !used_once(t1) || tp_value_len(&t1->args) != 2 ||
        tp_value_len(&t1->kwargs) != 0)
        return NULL;
    for (int side = 0; side < 2; side++) {
        tp_node *x = arg_node(t1, side), *q = arg_node(t1, 1 - side);
        if (!x || !q || !used_once(q)) continue;
        tp_node *cube = with_scalar(p, q, TP_OP_MUL, 0.044715, true);
        if (!cube || !used_once(cube)) continue;
        bool ok = false;
        if (is_call(cube, TP_OP_POW) && arg_node(cube, 0) == x) {
            double e3;
            ok = scalar_arg(p, cube, 1, &e3) && e3 == 3.0 && tp_value_len(&cube->kwargs) == 0;
        } else if (is_call(cube, TP_OP_MUL)) { /* x * (x * x) or (x * x) * x */
            tp_node *sq = other_operand(cube, x);
            ok = sq && is_call(sq, TP_OP_MUL) && used_once(sq) && arg_node(sq, 0) == x && arg_node(sq, 1) == x;
            if (ok) chain[(*n_chain)++] = sq;
        }
        if (!ok) continue;
        chain[(*n_chain)++] = d;
        chain[(*n_chain)++] = t1;
        chain[(*n_chain)++] = q;
        chain[(*n_chain)++] = cube;
        *tanh_form = true;
        return x;
    }
    return NULL;
}

/* a = 1 + e (either order), used once: e, else NULL. */
static tp_node *one_plus(const tp_program *p, tp_node *a) {
    if (!a || !used_once(a)) return NULL;
    return with_scalar(p, a, TP_OP_ADD, 1.0, true);
}

/* Rewrite the chain ending at out = 0.5 * (x * (1 + inner)) (factors in any
 * order, or (0.5 * x) * (1 + inner)). */
static tp_status rewrite_gelu_at(const tp_program *p, tp_graph *g, tp_node *out, bool *done) {
    *done = false;
    if (!is_call(out, TP_OP_MUL) || tp_value_len(&out->args) != 2 || tp_value_len(&out->kwargs) != 0) return TP_OK;
    tp_node *chain[12];
    int n_chain = 0;
    tp_node *x = NULL, *a = NULL, *m = with_scalar(p, out, TP_OP_MUL, 0.5, true);
    if (m) { /* 0.5 * m, m = x * a */
        if (!is_call(m, TP_OP_MUL) || !used_once(m) || tp_value_len(&m->args) != 2 || tp_value_len(&m->kwargs) != 0)
            return TP_OK;
        for (int side = 0; side < 2 && !x; side++) {
            tp_node *cand = arg_node(m, side), *other = arg_node(m, 1 - side);
            if (cand && one_plus(p, other)) {
                x = cand;
                a = other;
            }
        }
        chain[n_chain++] = m;
    } else { /* (0.5 * x) * a */
        for (int side = 0; side < 2 && !x; side++) {
            tp_node *h = arg_node(out, side), *other = arg_node(out, 1 - side);
            tp_node *hx = h && used_once(h) ? with_scalar(p, h, TP_OP_MUL, 0.5, true) : NULL;
            if (hx && one_plus(p, other)) {
                x = hx;
                a = other;
                chain[n_chain++] = h;
            }
        }
    }
    if (!x || !a) return TP_OK;
    tp_node *e = one_plus(p, a);
    bool tanh_form = false;
    tp_node *x2 = e ? gelu_inner(p, e, &tanh_form, chain, &n_chain) : NULL;
    if (!x2 || x2 != x) return TP_OK;
    if (x->meta_val.kind != TP_VAL_TENSOR || tp_tensor_dtype(x->meta_val.u.tensor) != TP_FLOAT32) return TP_OK;
    chain[n_chain++] = a;
    chain[n_chain++] = e;
    TP_TRY(tp_graph_set_insert_point(g, out));
    tp_value args = tp_value_none(), kwargs = tp_value_none();
    tp_node *gelu = NULL;
    tp_status st = tp_value_tuple(1, &args);
    if (st == TP_OK) {
        args.u.seq.items[0] = tp_value_node(x);
        st = tp_value_dict(&kwargs);
    }
    if (st == TP_OK && tanh_form) {
        tp_value s;
        st = tp_value_str("tanh", &s);
        if (st == TP_OK) st = tp_value_dict_set(&kwargs, "approximate", &s);
    }
    if (st == TP_OK) st = tp_graph_call_function(g, TP_OP_GELU, &args, &kwargs, &gelu);
    tp_value_clear(&args);
    tp_value_clear(&kwargs);
    tp_graph_set_insert_point(g, NULL);
    TP_TRY(st);
    TP_TRY(tp_node_replace_all_uses_with(out, gelu, NULL, NULL, NULL));
    TP_TRY(tp_graph_erase_node(g, out));
    /* users before producers: out's operands first, down to the innermost */
    for (int i = 0; i < n_chain; i++) {
        /* erase in an order where each node has no remaining users */
        for (int k = 0; k < n_chain; k++)
            if (chain[k] && chain[k]->n_users == 0) {
                TP_TRY(tp_graph_erase_node(g, chain[k]));
                chain[k] = NULL;
            }
    }
    *done = true;
    return TP_OK;
}

tp_status tp__rewrite_gelu(const tp_program *p, tp_graph *g, int *n_rewritten) {
    *n_rewritten = 0;
    if (writes_in_place(g)) return TP_OK;
    for (tp_node *n = g->first; n;) {
        tp_node *next = n->next;
        if (is_call(n, TP_OP_MUL)) {
            bool done;
            TP_TRY(rewrite_gelu_at(p, g, n, &done));
            if (done) {
                (*n_rewritten)++;
                next = g->first; /* nodes before n may have gone: start again (cheap: few matches) */
            }
        }
        n = next;
    }
    return TP_OK;
}

/* ---- Row selections ----
 * index_select(X, d, idx) with a node index, slice(X, d, ...) and
 * select(X, d, i) (made slice + squeeze) move before the op that makes X
 * when that op computes each index along d from the same index of its
 * inputs: elementwise ops (an operand's broadcast or absent dim stays
 * whole), layer_norm and softmax over other dims, the rows of matmul and
 * linear (and matmul's batch dims), permute, transpose and reshapes that
 * keep the dims up to d. A classifier that reads one token of a
 * transformer's output (ViT's and BERT's class token) then computes its
 * last block's MLP, output projection and attention scores for that token
 * only. A selection moves only while every user of X makes the same
 * selection (equal selections merge first), when it selects fewer indices
 * than X has, only in programs without dynamic dims and only in plans
 * whose tensors have the sizes the graph recorded (broadcast dims are told
 * apart by their sizes, a select of index -1 becomes a slice at the
 * recorded last row: engine.c's meta_recorded), and not in graphs with a
 * write in place (the moved op would read the value at the selection's
 * position, after the write, and a moved selection can make an alias of
 * contiguous or reshape a copy). Views (`view`) are not crossed: a view
 * that fails on its input's strides could succeed on a selected copy.
 * The op made on the selected operands must infer the selection's shape
 * and dtype, else the move is undone.
 * The rows computed are the same float operations, except that a product
 * of fewer rows may take another GEMM kernel (one row: the row
 * micro-kernels), so results agree within float rounding. */

enum { TP_ROWSEL_MAX_ARGS = 8 };

typedef struct rowsel {
    tp_node *node; /* index_select or slice */
    int dim;       /* normalised */
} rowsel;

static const int64_t *meta_sizes(const tp_node *n, int *rank) {
    if (!n || n->meta_val.kind != TP_VAL_TENSOR) return NULL;
    *rank = tp_tensor_ndim(n->meta_val.u.tensor);
    return tp_tensor_sizes(n->meta_val.u.tensor);
}

static bool int_arg(const tp_node *n, int i, int64_t *v) {
    const tp_value *a = arg(n, i);
    if (!a || a->kind != TP_VAL_INT) return false;
    *v = a->u.i;
    return true;
}

/* s as a rank-keeping selection of its input along a normalised dim:
 * index_select with a node index, or slice with ints / None. */
static bool as_rowsel(tp_node *s, rowsel *out) {
    int r, rs;
    tp_node *x = arg_node(s, 0);
    if (!x || !meta_sizes(x, &r) || !meta_sizes(s, &rs) || tp_value_len(&s->kwargs) != 0) return false;
    int64_t d;
    const int64_t n = tp_value_len(&s->args);
    if (is_call(s, TP_OP_INDEX_SELECT)) {
        if (n != 3 || !int_arg(s, 1, &d) || !arg_node(s, 2)) return false;
    } else if (is_call(s, TP_OP_SLICE)) {
        if (n < 2 || !int_arg(s, 1, &d)) return false;
        for (int i = 2; i < n; i++)
            if (arg(s, i)->kind != TP_VAL_INT && arg(s, i)->kind != TP_VAL_NONE) return false;
    } else {
        return false;
    }
    if (d < 0) d += r;
    if (d < 0 || d >= r || rs != r) return false;
    out->node = s;
    out->dim = (int)d;
    return true;
}

/* a and b select the same indices (of inputs of the same size). */
static bool same_rowsel(const rowsel *a, const rowsel *b) {
    if (a->node->op != b->node->op || a->dim != b->dim) return false;
    const int64_t n = tp_value_len(&a->node->args);
    if (n != tp_value_len(&b->node->args)) return false;
    if (a->node->op == TP_OP_INDEX_SELECT) return arg_node(a->node, 2) == arg_node(b->node, 2);
    for (int i = 2; i < n; i++) {
        const tp_value *x = arg(a->node, i), *y = arg(b->node, i);
        if (x->kind != y->kind || (x->kind == TP_VAL_INT && x->u.i != y->u.i)) return false;
    }
    return true;
}

/* Selection s applied to x along dim d, made at the insertion point. */
static tp_status make_rowsel(tp_graph *g, const tp_node *s, tp_node *x, int d, tp_node **out) {
    tp_value args;
    TP_TRY(tp_value_copy(&s->args, &args));
    args.u.seq.items[0] = tp_value_node(x);
    args.u.seq.items[1] = tp_value_int(d);
    tp_status st = tp_graph_call_function(g, s->op, &args, NULL, out);
    tp_value_clear(&args);
    return st;
}

static bool op_in(tp_op op, const tp_op *ops, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ops[i] == op) return true;
    return false;
}

/* Elementwise ops of one tensor (other arguments numbers). */
static const tp_op rowsel_unary[] = {
    TP_OP_NEG,        TP_OP_ABS,      TP_OP_EXP,      TP_OP_LOG,         TP_OP_LOG1P,       TP_OP_EXPM1,
    TP_OP_SQRT,       TP_OP_RSQRT,    TP_OP_TANH,     TP_OP_SIGMOID,     TP_OP_ERF,         TP_OP_ERFC,
    TP_OP_RECIPROCAL, TP_OP_SQUARE,   TP_OP_RELU,     TP_OP_RELU6,       TP_OP_LEAKY_RELU,  TP_OP_ELU,
    TP_OP_SELU,       TP_OP_GELU,     TP_OP_SILU,     TP_OP_MISH,        TP_OP_SOFTPLUS,    TP_OP_HARDTANH,
    TP_OP_HARDSIGMOID, TP_OP_HARDSWISH, TP_OP_CLAMP,  TP_OP_CONTIGUOUS,  TP_OP_CLONE,
};
/* The same with ops of only argument 0 a tensor (their other arguments
 * checked below). */
static const tp_op rowsel_one_tensor[] = {TP_OP_SOFTMAX, TP_OP_LOG_SOFTMAX, TP_OP_PERMUTE, TP_OP_TRANSPOSE,
                                          TP_OP_RESHAPE};
static const tp_op rowsel_binary[] = {TP_OP_ADD, TP_OP_SUB, TP_OP_MUL, TP_OP_DIV};

/* Distinct nodes among x's positional arguments. */
static int64_t arg_nodes(const tp_node *x) {
    int64_t count = 0;
    for (int i = 0; i < tp_value_len(&x->args); i++) {
        tp_node *o = arg_node(x, i);
        bool seen = false;
        for (int k = 0; k < i && o; k++) seen = seen || arg_node(x, k) == o;
        count += o && !seen;
    }
    return count;
}

/* For x = op(...) and a selection along x's dim d: the dim of each
 * argument i that takes the selection (dims[i]; -1: whole); *reshape when
 * x is a reshape whose shape argument's entry d must become the selected
 * length. False when the op does not compute index k along d from index k
 * of those arguments' dims (and the rest whole). */
static bool rowsel_plan(const tp_node *x, int d, int dims[TP_ROWSEL_MAX_ARGS], bool *reshape) {
    int r, ra = 0, rb = 0;
    const int64_t *ys = meta_sizes(x, &r);
    const int64_t n_args = tp_value_len(&x->args);
    if (!ys || x->kind != TP_NODE_CALL_FUNCTION || n_args > TP_ROWSEL_MAX_ARGS || n_args < 1) return false;
    /* node arguments in kwargs would be missed */
    if (x->n_inputs != arg_nodes(x)) return false;
    for (int i = 0; i < TP_ROWSEL_MAX_ARGS; i++) dims[i] = -1;
    *reshape = false;
    tp_node *a = arg_node(x, 0), *b = arg_node(x, 1);
    const int64_t *as = meta_sizes(a, &ra), *bs = meta_sizes(b, &rb);
    const tp_op op = x->op;
    const bool unary = op_in(op, rowsel_unary, TP_ARRAY_LEN(rowsel_unary));
    if ((unary || op_in(op, rowsel_one_tensor, TP_ARRAY_LEN(rowsel_one_tensor))) && (!as || x->n_inputs != 1))
        return false;
    if (unary) {
        dims[0] = d;
    } else if (op_in(op, rowsel_binary, TP_ARRAY_LEN(rowsel_binary))) {
        if (n_args != 2) return false;
        for (int i = 0; i < 2; i++) {
            int ro;
            tp_node *o = arg_node(x, i);
            const int64_t *os = meta_sizes(o, &ro);
            if (!o) continue;
            if (!os) return false;
            const int od = d - (r - ro);
            if (od < 0 || (os[od] == 1 && ys[d] != 1)) continue; /* absent or broadcast: whole */
            if (os[od] != ys[d]) return false;
            dims[i] = od;
        }
    } else if (op == TP_OP_LAYER_NORM) {
        const tp_value *ns = arg(x, 1);
        if (!as || !ns || (ns->kind != TP_VAL_LIST && ns->kind != TP_VAL_TUPLE) || d >= r - tp_value_len(ns))
            return false;
        dims[0] = d;
    } else if (op == TP_OP_SOFTMAX || op == TP_OP_LOG_SOFTMAX) {
        int64_t sd;
        if (!int_arg(x, 1, &sd)) return false;
        if (sd < 0) sd += r;
        if (sd == d) return false;
        dims[0] = d;
    } else if (op == TP_OP_MATMUL) {
        if (!as || !bs || ra < 2 || rb < 2 || d == r - 1) return false;
        if (d == r - 2) {
            dims[0] = ra - 2;
        } else { /* a batch dim: each operand's, unless absent or broadcast */
            const int da = d - (r - ra), db = d - (r - rb);
            dims[0] = da >= 0 && as[da] == ys[d] ? da : -1;
            dims[1] = db >= 0 && bs[db] == ys[d] ? db : -1;
            if (b == a && dims[0] != dims[1]) return false;
        }
    } else if (op == TP_OP_LINEAR) {
        if (!as || d >= r - 1 || a == b || a == arg_node(x, 2)) return false;
        dims[0] = d;
    } else if (op == TP_OP_PERMUTE) {
        const tp_value *p = arg(x, 1);
        if (!p || tp_value_len(p) != r || tp_value_at(p, d)->kind != TP_VAL_INT) return false;
        int64_t pd = tp_value_at(p, d)->u.i;
        if (pd < 0) pd += r;
        if (pd < 0 || pd >= r) return false;
        dims[0] = (int)pd;
    } else if (op == TP_OP_TRANSPOSE) {
        int64_t t0, t1;
        if (!int_arg(x, 1, &t0) || !int_arg(x, 2, &t1)) return false;
        if (t0 < 0) t0 += r;
        if (t1 < 0) t1 += r;
        dims[0] = d == t0 ? (int)t1 : d == t1 ? (int)t0 : d;
    } else if (op == TP_OP_RESHAPE) {
        /* the dims up to d are the input's: the selection is the input's
         * along d, and the shape's entry d becomes the selected length */
        const tp_value *sh = arg(x, 1);
        if (!sh || (sh->kind != TP_VAL_LIST && sh->kind != TP_VAL_TUPLE) || tp_value_len(sh) != r || ra <= d)
            return false;
        for (int i = 0; i <= d; i++)
            if (as[i] != ys[i]) return false;
        for (int i = 0; i < r; i++)
            if (tp_value_at(sh, i)->kind != TP_VAL_INT) return false;
        *reshape = tp_value_at(sh, d)->u.i != -1; /* -1 is inferred again */
        dims[0] = d;
    } else {
        return false;
    }
    return true;
}

/* Drop erased selections from the work list. */
static void forget_rowsel(rowsel *work, int *n_work, const tp_node *gone) {
    int k = 0;
    for (int i = 0; i < *n_work; i++)
        if (work[i].node != gone) work[k++] = work[i];
    *n_work = k;
}

/* Move selection s before the op making its input (every user of that
 * input selecting the same); *moved when done. The selections made go on
 * the work list. */
static tp_status move_rowsel(tp_graph *g, const rowsel *s, rowsel *work, int *n_work, int cap, bool *moved) {
    *moved = false;
    tp_node *x = arg_node(s->node, 0);
    int r, rs;
    const int64_t *xs = meta_sizes(x, &r), *ss = meta_sizes(s->node, &rs);
    if (!xs || !ss || ss[s->dim] >= xs[s->dim]) return TP_OK; /* nothing saved */
    enum { MAX_SAME = 64 };
    rowsel same[MAX_SAME];
    int n_same = 0;
    for (int64_t i = 0; i < x->n_users; i++) {
        rowsel u;
        if (n_same == MAX_SAME || !as_rowsel(x->users[i], &u) || arg_node(u.node, 0) != x || !same_rowsel(&u, s))
            return TP_OK;
        same[n_same++] = u;
    }
    if (*n_work + TP_ROWSEL_MAX_ARGS > cap) return TP_OK;
    int dims[TP_ROWSEL_MAX_ARGS];
    bool reshape;
    if (!rowsel_plan(x, s->dim, dims, &reshape)) return TP_OK;
    /* made before the first of the equal selections (the others' users come after it) */
    tp_node *first = NULL;
    for (tp_node *n = x->next; n && !first; n = n->next)
        for (int i = 0; i < n_same; i++)
            if (same[i].node == n) first = n;
    if (!first) return TP_OK; /* users before their input: not a graph the planner takes */
    tp_node *made[TP_ROWSEL_MAX_ARGS + 1];
    int n_made = 0;
    tp_value args = tp_value_none();
    tp_status st = tp_graph_set_insert_point(g, first);
    if (st == TP_OK) st = tp_value_copy(&x->args, &args);
    for (int i = 0; st == TP_OK && i < tp_value_len(&x->args); i++) {
        tp_node *o = arg_node(x, i), *sel = NULL;
        if (!o || dims[i] < 0) continue;
        for (int k = 0; k < i; k++) /* an operand given twice (x * x) takes one selection */
            if (arg_node(x, k) == o && dims[k] == dims[i]) sel = args.u.seq.items[k].u.node;
        if (!sel) {
            st = make_rowsel(g, s->node, o, dims[i], &sel);
            if (st != TP_OK) break;
            made[n_made++] = sel;
        }
        args.u.seq.items[i] = tp_value_node(sel);
    }
    if (st == TP_OK && reshape) args.u.seq.items[1].u.seq.items[s->dim] = tp_value_int(ss[s->dim]);
    tp_node *y = NULL;
    if (st == TP_OK) st = tp_graph_call_function(g, x->op, &args, &x->kwargs, &y);
    tp_value_clear(&args);
    tp_graph_set_insert_point(g, NULL);
    int ry = 0;
    const int64_t *ys = st == TP_OK ? meta_sizes(y, &ry) : NULL;
    bool same_shape = ys && ry == rs &&
                      tp_tensor_dtype(y->meta_val.u.tensor) == tp_tensor_dtype(s->node->meta_val.u.tensor);
    for (int i = 0; same_shape && i < rs; i++) same_shape = ys[i] == ss[i];
    if (st != TP_OK || !same_shape) {
        if (y) tp_graph_erase_node(g, y);
        for (int i = n_made - 1; i >= 0; i--) tp_graph_erase_node(g, made[i]);
        if (st == TP_ERR_NOMEM) return st;
        tp_clear_error();
        return TP_OK;
    }
    for (int i = 0; i < n_same; i++) {
        TP_TRY(tp_node_replace_all_uses_with(same[i].node, y, NULL, NULL, NULL));
        forget_rowsel(work, n_work, same[i].node);
        TP_TRY(tp_graph_erase_node(g, same[i].node));
    }
    TP_TRY(tp_graph_erase_node(g, x));
    for (int i = 0; i < n_made; i++)
        if (as_rowsel(made[i], &work[*n_work])) (*n_work)++;
    *moved = true;
    return TP_OK;
}

/* select(x, d, i) -> squeeze(slice(x, d, i, i + 1), d) (i < 0 counted
 * from the end of the static size); the slice to *out when made. */
static tp_status select_as_slice(tp_graph *g, tp_node *s, rowsel *out, bool *made) {
    *made = false;
    int r;
    int64_t d, i;
    tp_node *x = arg_node(s, 0);
    const int64_t *xs = meta_sizes(x, &r);
    if (!xs || tp_value_len(&s->args) != 3 || tp_value_len(&s->kwargs) != 0 || !int_arg(s, 1, &d) ||
        !int_arg(s, 2, &i))
        return TP_OK;
    if (d < 0) d += r;
    if (d < 0 || d >= r) return TP_OK;
    if (i < 0) i += xs[d];
    if (i < 0 || i >= xs[d] || xs[d] < 2) return TP_OK;
    tp_value a = tp_value_none();
    tp_node *sl = NULL, *sq = NULL;
    tp_status st = tp_graph_set_insert_point(g, s);
    if (st == TP_OK) st = tp_value_tuple(5, &a);
    if (st == TP_OK) {
        a.u.seq.items[0] = tp_value_node(x);
        a.u.seq.items[1] = tp_value_int(d);
        a.u.seq.items[2] = tp_value_int(i);
        a.u.seq.items[3] = tp_value_int(i + 1);
        a.u.seq.items[4] = tp_value_int(1);
        st = tp_graph_call_function(g, TP_OP_SLICE, &a, NULL, &sl);
        tp_value_clear(&a);
    }
    if (st == TP_OK) st = tp_value_tuple(2, &a);
    if (st == TP_OK) {
        a.u.seq.items[0] = tp_value_node(sl);
        a.u.seq.items[1] = tp_value_int(d);
        st = tp_graph_call_function(g, TP_OP_SQUEEZE, &a, NULL, &sq);
        tp_value_clear(&a);
    }
    tp_graph_set_insert_point(g, NULL);
    if (st != TP_OK) {
        if (sq) tp_graph_erase_node(g, sq);
        if (sl) tp_graph_erase_node(g, sl);
        if (st == TP_ERR_NOMEM) return st;
        tp_clear_error();
        return TP_OK;
    }
    TP_TRY(tp_node_replace_all_uses_with(s, sq, NULL, NULL, NULL));
    TP_TRY(tp_graph_erase_node(g, s));
    *made = as_rowsel(sl, out);
    return TP_OK;
}

tp_status tp__rewrite_row_select(const tp_program *p, tp_graph *g, int *n_rewritten) {
    *n_rewritten = 0;
    if (p->n_ranges || p->n_dim_rules || p->n_equalities) return TP_OK;
    if (writes_in_place(g)) return TP_OK;
    enum { CAP = 256 };
    rowsel *work = tp_malloc(sizeof *work * CAP);
    if (!work) return tp_error(TP_ERR_NOMEM, "out of memory rewriting row selections");
    int n_work = 0;
    tp_status st = TP_OK;
    for (tp_node *n = g->first; n && st == TP_OK && n_work < CAP;) {
        tp_node *next = n->next;
        rowsel s;
        bool made = false;
        /* only selections of an op's output that a move could take */
        tp_node *x = arg_node(n, 0);
        if (x && x->kind == TP_NODE_CALL_FUNCTION && x->n_users == 1) {
            if (is_call(n, TP_OP_SELECT)) st = select_as_slice(g, n, &s, &made);
            else made = as_rowsel(n, &s);
            if (made) work[n_work++] = s;
        }
        n = next;
    }
    while (st == TP_OK && n_work > 0) {
        const rowsel s = work[--n_work];
        bool moved;
        st = move_rowsel(g, &s, work, &n_work, CAP, &moved);
        if (moved) (*n_rewritten)++;
    }
    tp_free(work);
    return st;
}
