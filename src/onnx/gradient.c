/*
 * gradient.c - ONNX Gradient (ai.onnx.preview.training, opset 1).
 *
 * Gradient(xs...) with attributes xs (names of the tensors differentiated
 * against) and y (the tensor differentiated, its seed gradient all ones)
 * outputs dy/dx for each x. It is computed at import by reverse-mode
 * differentiation of the nodes converted before it: the nodes that lie on
 * a path from some x to y are walked backwards, each one's vector-Jacobian
 * product made of ordinary ops on the forward values (already in the value
 * table), contributions to one tensor summed, and a broadcast operand's
 * gradient summed back to its shape (sum_to_size). An x that y does not
 * depend on gets zeros. Differentiable ops: Add, Sub, Mul, Div, Neg,
 * Identity, Relu, Sigmoid, Tanh, Exp, Log, Sqrt and 2-D MatMul; another op
 * on a path is refused naming it.
 */
#include <string.h>

#include "onnx_impl.h"

#define MAX_GRAD_NODES 65536

typedef struct gmap {
    const char **name;
    const tp_value **g;
    size_t n, cap;
} gmap;

static const tp_value *gmap_get(const gmap *m, const char *name) {
    for (size_t i = 0; i < m->n; i++)
        if (!strcmp(m->name[i], name)) return m->g[i];
    return NULL;
}

/* Add contribution v to name's gradient. */
static tp_status gmap_add(rb *b, gmap *m, const char *name, const tp_value *v) {
    for (size_t i = 0; i < m->n; i++)
        if (!strcmp(m->name[i], name)) {
            m->g[i] = rb2(b, TP_OP_ADD, m->g[i], v);
            return b->st;
        }
    if (m->n == m->cap) return tp_error(TP_ERR_INTERNAL, "gradient table full");
    m->name[m->n] = name;
    m->g[m->n++] = v;
    return TP_OK;
}

static bool in_list(const char *const *list, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(list[i], name)) return true;
    return false;
}

/* g summed back to the shape of x when x was broadcast. */
static const tp_value *unbroadcast(rb *b, const tp_value *g, const tp_value *x) {
    const tp_tensor *gm = ox_meta(g), *xm = ox_meta(x);
    if (b->st != TP_OK || !gm || !xm) return g;
    if (tp_tensor_ndim(gm) == tp_tensor_ndim(xm) &&
        !memcmp(tp_tensor_sizes(gm), tp_tensor_sizes(xm), sizeof(int64_t) * (size_t)tp_tensor_ndim(xm)))
        return g;
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, g);
    ox_arg_ints(&A, tp_tensor_sizes(xm), tp_tensor_ndim(xm));
    return rb_call(b, TP_OP_SUM_TO_SIZE, &A);
}

static const tp_value *transposed(rb *b, const tp_value *m) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, m);
    ox_arg(&A, tp_value_int(0));
    ox_arg(&A, tp_value_int(1));
    return rb_call(b, TP_OP_TRANSPOSE, &A);
}

/* The vector-Jacobian product of node n for output gradient g: the
 * gradient of each input (NULL: none) into gi[0..n_input). */
static tp_status vjp(rb *b, const Onnx__NodeProto *n, const tp_value *g, const tp_value **gi) {
    ox_ctx *c = b->c;
    const char *op = n->op_type ? n->op_type : "";
    const tp_value *a = NULL, *x2 = NULL, *y = NULL;
    if (n->n_input >= 1 && n->input[0][0]) TP_TRY(ox_lookup(c, n->input[0], &a, NULL));
    if (n->n_input >= 2 && n->input[1][0]) TP_TRY(ox_lookup(c, n->input[1], &x2, NULL));
    if (n->n_output >= 1 && n->output[0][0]) TP_TRY(ox_lookup(c, n->output[0], &y, NULL));
    bool binary = !strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul") || !strcmp(op, "Div") ||
                  !strcmp(op, "MatMul");
    if ((binary && (n->n_input != 2 || !a || !x2)) || (!binary && (n->n_input != 1 || !a)))
        return ox_unsupported(c, "Gradient through node '%s' (%s): unexpected inputs", n->name ? n->name : "", op);
    const tp_value *one = rb_f64(b, 1);
    if (!strcmp(op, "Add")) {
        gi[0] = unbroadcast(b, g, a), gi[1] = unbroadcast(b, g, x2);
    } else if (!strcmp(op, "Sub")) {
        gi[0] = unbroadcast(b, g, a), gi[1] = unbroadcast(b, rb1(b, TP_OP_NEG, g), x2);
    } else if (!strcmp(op, "Mul")) {
        gi[0] = unbroadcast(b, rb2(b, TP_OP_MUL, g, x2), a), gi[1] = unbroadcast(b, rb2(b, TP_OP_MUL, g, a), x2);
    } else if (!strcmp(op, "Div")) {
        gi[0] = unbroadcast(b, rb2(b, TP_OP_DIV, g, x2), a);
        const tp_value *q = rb2(b, TP_OP_DIV, rb2(b, TP_OP_MUL, g, a), rb2(b, TP_OP_MUL, x2, x2));
        gi[1] = unbroadcast(b, rb1(b, TP_OP_NEG, q), x2);
    } else if (!strcmp(op, "MatMul")) { /* ga = g b^T, gb = a^T g */
        if (tp_tensor_ndim(ox_meta(a)) != 2 || tp_tensor_ndim(ox_meta(x2)) != 2)
            return ox_unsupported(c, "Gradient through MatMul '%s' of other than 2-D operands", n->name ? n->name : "");
        gi[0] = rb2(b, TP_OP_MM, g, transposed(b, x2));
        gi[1] = rb2(b, TP_OP_MM, transposed(b, a), g);
    } else if (!strcmp(op, "Neg")) {
        gi[0] = rb1(b, TP_OP_NEG, g);
    } else if (!strcmp(op, "Identity")) {
        gi[0] = g;
    } else if (!strcmp(op, "Relu")) {
        gi[0] = rb_where(b, rb2(b, TP_OP_GT, a, rb_f64(b, 0)), g, rb1(b, TP_OP_ZEROS_LIKE, g));
    } else if (!strcmp(op, "Sigmoid") && y) {
        gi[0] = rb2(b, TP_OP_MUL, g, rb2(b, TP_OP_MUL, y, rb2(b, TP_OP_SUB, one, y)));
    } else if (!strcmp(op, "Tanh") && y) {
        gi[0] = rb2(b, TP_OP_MUL, g, rb2(b, TP_OP_SUB, one, rb2(b, TP_OP_MUL, y, y)));
    } else if (!strcmp(op, "Exp") && y) {
        gi[0] = rb2(b, TP_OP_MUL, g, y);
    } else if (!strcmp(op, "Log")) {
        gi[0] = rb2(b, TP_OP_DIV, g, a);
    } else if (!strcmp(op, "Sqrt") && y) {
        gi[0] = rb2(b, TP_OP_DIV, g, rb2(b, TP_OP_MUL, rb_f64(b, 2), y));
    } else {
        return ox_unsupported(c, "Gradient through %s (node '%s') is not supported", op, n->name ? n->name : "");
    }
    return b->st;
}

tp_status tp__onnx_gradient(ox_ctx *c) {
    const Onnx__AttributeProto *xs = ox_attr(c, "xs"), *ya = ox_attr(c, "y");
    if (!xs || !xs->n_strings) return ox_bad(c, "missing attribute 'xs'");
    if (!ya || !ya->has_s || !ya->s.len) return ox_bad(c, "missing attribute 'y'");
    if ((size_t)ox_n_out(c) != xs->n_strings)
        return ox_bad(c, "%d outputs for %zu tensors in 'xs'", ox_n_out(c), xs->n_strings);
    char yname[256];
    if (ya->s.len >= sizeof yname) return ox_unsupported(c, "attribute 'y' names a tensor of %zu bytes", ya->s.len);
    memcpy(yname, ya->s.data, ya->s.len);
    yname[ya->s.len] = '\0';
    size_t n;
    Onnx__NodeProto *const *nodes = ox_nodes_before(c, &n);
    if (n > MAX_GRAD_NODES) return ox_unsupported(c, "Gradient of a graph of %zu nodes (at most %d)", n, MAX_GRAD_NODES);
    /* names reachable from xs, and whether each node is on a path to y */
    size_t cap = xs->n_strings + 1;
    for (size_t k = 0; k < n; k++) cap += nodes[k] ? nodes[k]->n_output + nodes[k]->n_input : 0;
    const char **reach = tp_malloc(cap * sizeof *reach), **need = tp_malloc(cap * sizeof *need);
    bool *on_path = tp_calloc(n + 1, sizeof *on_path);
    gmap gm = {tp_malloc(cap * sizeof(char *)), tp_malloc(cap * sizeof(tp_value *)), 0, cap};
    rb b;
    rb_init(&b, c);
    tp_status st = reach && need && on_path && gm.name && gm.g ? TP_OK : tp_error(TP_ERR_NOMEM, "out of memory");
    size_t n_reach = 0, n_need = 0;
    char **xnames = st == TP_OK ? tp_calloc(xs->n_strings, sizeof *xnames) : NULL;
    if (st == TP_OK && !xnames) st = tp_error(TP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == TP_OK && i < xs->n_strings; i++) {
        xnames[i] = tp_malloc(xs->strings[i].len + 1);
        if (!xnames[i]) {
            st = tp_error(TP_ERR_NOMEM, "out of memory");
            break;
        }
        memcpy(xnames[i], xs->strings[i].data, xs->strings[i].len);
        xnames[i][xs->strings[i].len] = '\0';
        reach[n_reach++] = xnames[i];
    }
    for (size_t k = 0; st == TP_OK && k < n; k++) {
        const Onnx__NodeProto *nd = nodes[k];
        bool any = false;
        for (size_t i = 0; nd && i < nd->n_input && !any; i++) any = nd->input[i][0] && in_list(reach, n_reach, nd->input[i]);
        for (size_t i = 0; any && i < nd->n_output; i++)
            if (nd->output[i][0]) reach[n_reach++] = nd->output[i];
    }
    if (st == TP_OK) need[n_need++] = yname;
    for (size_t k = n; st == TP_OK && k-- > 0;) {
        const Onnx__NodeProto *nd = nodes[k];
        bool wanted = false;
        for (size_t i = 0; nd && i < nd->n_output && !wanted; i++) wanted = nd->output[i][0] && in_list(need, n_need, nd->output[i]);
        if (!wanted) continue;
        for (size_t i = 0; i < nd->n_input; i++) {
            if (!nd->input[i][0] || !in_list(reach, n_reach, nd->input[i])) continue;
            on_path[k] = true;
            if (!in_list(need, n_need, nd->input[i])) need[n_need++] = nd->input[i];
        }
    }
    /* seed: dy/dy = 1, then backwards through the nodes on a path */
    const tp_value *yv = NULL;
    if (st == TP_OK) st = ox_lookup(c, yname, &yv, NULL);
    if (st == TP_OK && in_list(reach, n_reach, yname)) st = gmap_add(&b, &gm, yname, rb1(&b, TP_OP_ONES_LIKE, yv));
    for (size_t k = n; st == TP_OK && k-- > 0;) {
        const Onnx__NodeProto *nd = nodes[k];
        if (!on_path[k]) continue;
        const tp_value *g = nd->n_output ? gmap_get(&gm, nd->output[0]) : NULL;
        for (size_t i = 1; i < nd->n_output && st == TP_OK; i++)
            if (nd->output[i][0] && gmap_get(&gm, nd->output[i]))
                st = ox_unsupported(c, "Gradient through output %zu of %s (node '%s')", i, nd->op_type ? nd->op_type : "",
                                    nd->name ? nd->name : "");
        if (!g || st != TP_OK) continue;
        const tp_value *gi[2] = {NULL, NULL};
        st = vjp(&b, nd, g, gi);
        for (size_t i = 0; st == TP_OK && i < nd->n_input && i < 2; i++)
            if (gi[i] && nd->input[i][0] && in_list(reach, n_reach, nd->input[i])) st = gmap_add(&b, &gm, nd->input[i], gi[i]);
    }
    for (size_t i = 0; st == TP_OK && i < xs->n_strings; i++) {
        const tp_value *g = gmap_get(&gm, xnames[i]), *x;
        st = ox_lookup(c, xnames[i], &x, NULL);
        if (st != TP_OK) break;
        if (!g) g = rb1(&b, TP_OP_ZEROS_LIKE, x); /* y does not depend on it */
        tp_value v = tp_value_none();
        st = b.st;
        if (st == TP_OK) st = ox_cast(c, g, tp_tensor_dtype(ox_meta(x)), &v);
        if (st == TP_OK) st = ox_set_out(c, (int)i, &v);
    }
    if (st == TP_OK) st = b.st;
    rb_clear(&b);
    for (size_t i = 0; xnames && i < xs->n_strings; i++) tp_free(xnames[i]);
    tp_free(xnames);
    tp_free(reach);
    tp_free(need);
    tp_free(on_path);
    tp_free(gm.name);
    tp_free(gm.g);
    return st;
}
