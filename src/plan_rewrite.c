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
    if (a0 && scalar_arg(p, n, 1, &v) && near(v, want)) return a0;
    if (commutes && a1 && scalar_arg(p, n, 0, &v) && near(v, want)) return a1;
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
