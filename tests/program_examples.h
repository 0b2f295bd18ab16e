/*
 * program_examples.h - the example programs of the program issue, built
 * with the graph API and shared by test_program.c and test_archive.c:
 * (a) make_mlp: an MLP with parameters; (b) make_buffers: persistent and
 * non-persistent buffers and a constant; (c) make_bn: batch norm in
 * training mode; (d) make_counter: an accumulator buffer; (e)
 * make_list_mutation: a user list input mutated in place; (f)
 * make_constrained: dynamic dims with range, derived and equality
 * constraints. (g), nested outputs, lives in test_program.c.
 */
#ifndef TP_PROGRAM_EXAMPLES_H
#define TP_PROGRAM_EXAMPLES_H

#include "test_util.h"

#define N(node) tp_value_node(node)

static inline tp_tensor *tensor_f32(int ndim, const int64_t *sizes, const float *data) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, ndim, sizes, data, &t));
    return t;
}

static inline tp_node *placeholder(tp_graph *g, const char *name, int ndim, const int64_t *sizes) {
    tp_tensor *m = NULL;
    CHECK_OK(tp_tensor_meta(TP_FLOAT32, ndim, sizes, &m));
    tp_value v = tp_value_tensor(m);
    tp_node *n = NULL;
    CHECK_OK(tp_graph_placeholder(g, name, &v, &n));
    tp_value_clear(&v);
    return n;
}

/* call op with up to 8 positional values (node refs or constants) */
static inline tp_node *call(tp_graph *g, tp_op op, int n, const tp_value *vals) {
    tp_value args;
    CHECK_OK(tp_value_tuple(n, &args));
    for (int i = 0; i < n; i++) {
        tp_value c;
        CHECK_OK(tp_value_copy(&vals[i], &c));
        CHECK_OK(tp_value_seq_set(&args, i, &c));
    }
    tp_node *out = NULL;
    CHECK_OK(tp_graph_call_function(g, op, &args, NULL, &out));
    tp_value_clear(&args);
    return out;
}

static inline void output_nodes(tp_graph *g, int n, tp_node **nodes) {
    tp_value t;
    CHECK_OK(tp_value_tuple(n, &t));
    for (int i = 0; i < n; i++) t.u.seq.items[i] = tp_value_node(nodes[i]);
    CHECK_OK(tp_graph_output(g, &t, NULL));
    tp_value_clear(&t);
}

static inline tp_value tv(tp_tensor *t) { return tp_value_tensor(t); } /* takes the reference */

static inline bool tensor_equals(const tp_tensor *t, const float *want, int64_t n) {
    if (!t || tp_tensor_numel(t) != n) return false;
    for (int64_t i = 0; i < n; i++)
        if (fabs(tp_tensor_item_f64(t, i) - want[i]) > 1e-5 * (1 + fabs(want[i]))) return false;
    return true;
}

/* The out_spec of a program returning one tensor (as torch.export records). */
static inline void set_leaf_out_spec(tp_program *p) {
    tp_treespec *leaf = NULL;
    CHECK_OK(tp_treespec_leaf(&leaf));
    CHECK_OK(tp_program_set_out_spec(p, leaf));
    tp_treespec_free(leaf);
}

static inline tp_program *make_mlp(void) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *w = placeholder(g, "p_fc1_weight", 2, (int64_t[]){4, 3});
    tp_node *b = placeholder(g, "p_fc1_bias", 1, (int64_t[]){4});
    tp_node *x = placeholder(g, "x", 2, (int64_t[]){2, 3});
    tp_node *lin = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *relu = call(g, TP_OP_RELU, 1, (tp_value[]){N(lin)});
    output_nodes(g, 1, &relu);
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_fc1_weight"), "fc1.weight", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_fc1_bias"), "fc1.bias", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor("relu"), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    static const float wd[] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, bd[] = {0, 0, 0, -10};
    static const float xd[] = {1, -2, 3, 4, 5, 6};
    tp_tensor *wt = tensor_f32(2, (int64_t[]){4, 3}, wd), *bt = tensor_f32(1, (int64_t[]){4}, bd);
    CHECK_OK(tp_program_set_state(p, "fc1.weight", TP_STATE_PARAMETER, wt, true));
    CHECK_OK(tp_program_set_state(p, "fc1.bias", TP_STATE_PARAMETER, bt, true));
    tp_tensor_free(wt);
    tp_tensor_free(bt);
    tp_value ex = tv(tensor_f32(2, (int64_t[]){2, 3}, xd));
    CHECK_OK(tp_program_set_example_input(p, "x", &ex));
    tp_value_clear(&ex);
    set_leaf_out_spec(p);
    CHECK_OK(tp_program_validate(p));
    return p;
}

static inline tp_program *make_buffers(void) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    int64_t n3[] = {3};
    tp_node *run = placeholder(g, "b_running", 1, n3);
    tp_node *tmp = placeholder(g, "b_tmp", 1, n3);
    tp_node *scale = placeholder(g, "c_scale", 1, n3);
    tp_node *x = placeholder(g, "x", 1, n3);
    tp_node *a = call(g, TP_OP_ADD, 2, (tp_value[]){N(x), N(run)});
    tp_node *m = call(g, TP_OP_MUL, 2, (tp_value[]){N(a), N(scale)});
    tp_node *s2 = call(g, TP_OP_SUB, 2, (tp_value[]){N(m), N(tmp)});
    output_nodes(g, 1, &s2);
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_BUFFER, tp_arg_tensor("b_running"), "running", TP_PERSISTENT_YES));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_BUFFER, tp_arg_tensor("b_tmp"), "tmp", TP_PERSISTENT_NO));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_CONSTANT_TENSOR, tp_arg_tensor("c_scale"), "scale", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(s2)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    tp_tensor *t;
    t = tensor_f32(1, n3, (float[]){1, 2, 3});
    CHECK_OK(tp_program_set_state(p, "running", TP_STATE_BUFFER, t, true));
    tp_tensor_free(t);
    t = tensor_f32(1, n3, (float[]){0.5f, 0.5f, 0.5f});
    CHECK_OK(tp_program_set_state(p, "tmp", TP_STATE_BUFFER, t, false));
    tp_tensor_free(t);
    t = tensor_f32(1, n3, (float[]){10, 100, 1000});
    CHECK_OK(tp_program_set_state(p, "scale", TP_STATE_CONSTANT, t, false));
    tp_tensor_free(t);
    tp_value ex = tv(tensor_f32(1, n3, (float[]){1, 1, 1}));
    CHECK_OK(tp_program_set_example_input(p, "x", &ex));
    tp_value_clear(&ex);
    set_leaf_out_spec(p);
    CHECK_OK(tp_program_validate(p));
    return p;
}

static inline tp_program *make_bn(void) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    int64_t n3[] = {3};
    tp_node *w = placeholder(g, "p_bn_weight", 1, n3);
    tp_node *b = placeholder(g, "p_bn_bias", 1, n3);
    tp_node *rm = placeholder(g, "b_bn_running_mean", 1, n3);
    tp_node *rv = placeholder(g, "b_bn_running_var", 1, n3);
    tp_node *x = placeholder(g, "x", 2, (int64_t[]){4, 3});
    tp_node *bn = call(g, TP_OP_BATCH_NORM, 8,
                       (tp_value[]){N(x), N(rm), N(rv), N(w), N(b), tp_value_bool(true), tp_value_float(0.1),
                                    tp_value_float(1e-5)});
    output_nodes(g, 3, (tp_node *[]){rm, rv, bn});
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_bn_weight"), "bn.weight", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_bn_bias"), "bn.bias", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_BUFFER, tp_arg_tensor("b_bn_running_mean"), "bn.running_mean", TP_PERSISTENT_YES));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_BUFFER, tp_arg_tensor("b_bn_running_var"), "bn.running_var", TP_PERSISTENT_YES));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_BUFFER_MUTATION, tp_arg_tensor("b_bn_running_mean"), "bn.running_mean"));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_BUFFER_MUTATION, tp_arg_tensor("b_bn_running_var"), "bn.running_var"));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(bn)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    struct { const char *target; tp_state_kind kind; float v[3]; } st[] = {
        {"bn.weight", TP_STATE_PARAMETER, {1.0f, 0.5f, 2.0f}},
        {"bn.bias", TP_STATE_PARAMETER, {0.0f, 0.25f, -1.0f}},
        {"bn.running_mean", TP_STATE_BUFFER, {0, 0, 0}},
        {"bn.running_var", TP_STATE_BUFFER, {1, 1, 1}}};
    for (int i = 0; i < 4; i++) {
        tp_tensor *t = tensor_f32(1, n3, st[i].v);
        CHECK_OK(tp_program_set_state(p, st[i].target, st[i].kind, t, true));
        tp_tensor_free(t);
    }
    tp_tensor *x1 = load_fixture("program/bn_x1");
    tp_value ex = tv(x1);
    CHECK_OK(tp_program_set_example_input(p, "x", &ex));
    tp_value_clear(&ex);
    CHECK_OK(tp_program_validate(p));
    return p;
}

static inline tp_program *make_counter(void) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *c = placeholder(g, "b_count", 1, (int64_t[]){1});
    tp_node *x = placeholder(g, "x", 1, (int64_t[]){2});
    tp_node *inc = call(g, TP_OP_ADD, 2, (tp_value[]){N(c), tp_value_int(1)});
    tp_node *y = call(g, TP_OP_MUL, 2, (tp_value[]){N(x), N(inc)});
    output_nodes(g, 2, (tp_node *[]){inc, y});
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_BUFFER, tp_arg_tensor("b_count"), "count", TP_PERSISTENT_YES));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_BUFFER_MUTATION, tp_arg_tensor(tp_node_name(inc)), "count"));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(y)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    tp_tensor *t = tensor_f32(1, (int64_t[]){1}, (float[]){0});
    CHECK_OK(tp_program_set_state(p, "count", TP_STATE_BUFFER, t, true));
    tp_tensor_free(t);
    tp_value ex = tv(tensor_f32(1, (int64_t[]){2}, (float[]){1, 2}));
    CHECK_OK(tp_program_set_example_input(p, "x", &ex));
    tp_value_clear(&ex);
    CHECK_OK(tp_program_validate(p));
    return p;
}

static inline tp_program *make_list_mutation(void) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_tensor *m0 = NULL, *m1 = NULL;
    CHECK_OK(tp_tensor_meta(TP_FLOAT32, 1, (int64_t[]){2}, &m0));
    CHECK_OK(tp_tensor_meta(TP_FLOAT32, 1, (int64_t[]){2}, &m1));
    tp_value lv;
    CHECK_OK(tp_value_list(2, &lv));
    lv.u.seq.items[0] = tv(m0);
    lv.u.seq.items[1] = tv(m1);
    tp_node *xs = NULL;
    CHECK_OK(tp_graph_placeholder(g, "xs", &lv, &xs));
    tp_value_clear(&lv);
    tp_node *e0 = call(g, TP_OP_GETITEM, 2, (tp_value[]){N(xs), tp_value_int(0)});
    tp_node *e1 = call(g, TP_OP_GETITEM, 2, (tp_value[]){N(xs), tp_value_int(1)});
    /* xs[0].add_(1) in place; xs[1] updated functionally: xs[1] * 2 */
    tp_node *a = call(g, TP_OP_ADD_, 2, (tp_value[]){N(e0), tp_value_int(1)});
    tp_node *d = call(g, TP_OP_MUL, 2, (tp_value[]){N(e1), tp_value_int(2)});
    tp_node *s = call(g, TP_OP_ADD, 2, (tp_value[]){N(a), N(d)});
    output_nodes(g, 3, (tp_node *[]){a, d, s});
    tp_signature *sig = NULL;
    CHECK_OK(tp_signature_new(&sig));
    CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor("xs"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(sig, TP_OUTPUT_USER_INPUT_MUTATION, tp_arg_tensor(tp_node_name(a)), "xs[0]"));
    CHECK_OK(tp_signature_add_output(sig, TP_OUTPUT_USER_INPUT_MUTATION, tp_arg_tensor(tp_node_name(d)), "xs[1]"));
    CHECK_OK(tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(s)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, sig, &p));
    CHECK_OK(tp_value_list(2, &lv));
    lv.u.seq.items[0] = tv(tensor_f32(1, (int64_t[]){2}, (float[]){0, 0}));
    lv.u.seq.items[1] = tv(tensor_f32(1, (int64_t[]){2}, (float[]){0, 0}));
    CHECK_OK(tp_program_set_example_input(p, "xs", &lv));
    tp_value_clear(&lv);
    CHECK_OK(tp_program_validate(p));
    return p;
}

static inline tp_program *make_constrained(void) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = placeholder(g, "x", 2, (int64_t[]){4, 3});
    tp_node *y = placeholder(g, "y", 2, (int64_t[]){4, 3});
    tp_node *z = placeholder(g, "z", 1, (int64_t[]){9});
    tp_node *a = call(g, TP_OP_ADD, 2, (tp_value[]){N(x), N(y)});
    tp_node *s = call(g, TP_OP_SUM, 1, (tp_value[]){N(z)});
    output_nodes(g, 2, (tp_node *[]){a, s});
    tp_signature *sig = NULL;
    CHECK_OK(tp_signature_new(&sig));
    CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor("y"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor("z"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(a)), NULL));
    CHECK_OK(tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(s)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, sig, &p));
    const char *names[] = {"x", "y", "z"};
    int64_t sizes[3][2] = {{4, 3}, {4, 3}, {9, 0}};
    for (int i = 0; i < 3; i++) {
        tp_tensor *t = NULL;
        CHECK_OK(tp_tensor_zeros(TP_FLOAT32, i == 2 ? 1 : 2, sizes[i], &t));
        tp_value v = tv(t);
        CHECK_OK(tp_program_set_example_input(p, names[i], &v));
        tp_value_clear(&v);
    }
    CHECK_OK(tp_program_add_range(p, "batch", 2, 8));
    tp_dim_rule r = {.site = {"x", 0}, .kind = TP_DIM_SYMBOL, .symbol = "batch"};
    CHECK_OK(tp_program_add_dim_rule(p, &r));
    r.site.input = "y";
    CHECK_OK(tp_program_add_dim_rule(p, &r));
    tp_dim_rule d = {.site = {"z", 0}, .kind = TP_DIM_DERIVED, .symbol = "batch", .scale = 2, .offset = 1};
    CHECK_OK(tp_program_add_dim_rule(p, &d));
    CHECK_OK(tp_program_add_equality(p, (tp_dim_site[]){{"x", 0}, {"y", 0}}, 2, "batch"));
    CHECK_OK(tp_program_validate(p));
    return p;
}

#endif
