/*
 * test_passes.c - program passes: tp_program_transform (unchanged programs
 * come back as the same pointer, renamed nodes re-sync the signature by
 * position, failing passes and broken results report errors), dead-code
 * elimination, constant folding (what folds, what must not) and effect
 * token removal. Expected values are small hand computations.
 */
#include "fail_alloc.h"
#include "test_util.h"

/* ---- small builders ---------------------------------------------------- */

#define N(node) tp_value_node(node)
#define SZ(...) ((const int64_t[]){__VA_ARGS__})

static tp_tensor *tensor_f32(int ndim, const int64_t *sizes, const float *data) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, ndim, sizes, data, &t));
    return t;
}

static tp_value tv(tp_tensor *t) { return tp_value_tensor(t); } /* takes the reference */

static tp_node *placeholder(tp_graph *g, const char *name, int ndim, const int64_t *sizes) {
    tp_tensor *m = NULL;
    CHECK_OK(tp_tensor_meta(TP_FLOAT32, ndim, sizes, &m));
    tp_value v = tp_value_tensor(m);
    tp_node *n = NULL;
    CHECK_OK(tp_graph_placeholder(g, name, &v, &n));
    tp_value_clear(&v);
    return n;
}

static tp_node *get_attr(tp_graph *g, const char *target, int ndim, const int64_t *sizes) {
    tp_tensor *m = NULL;
    CHECK_OK(tp_tensor_meta(TP_FLOAT32, ndim, sizes, &m));
    tp_value v = tp_value_tensor(m);
    tp_node *n = NULL;
    CHECK_OK(tp_graph_get_attr(g, target, &v, &n));
    tp_value_clear(&v);
    return n;
}

/* call op with n positional values (copied) and optional kwargs (copied) */
static tp_node *call_kw(tp_graph *g, tp_op op, int n, const tp_value *vals, const tp_value *kwargs) {
    tp_value args;
    CHECK_OK(tp_value_tuple(n, &args));
    for (int i = 0; i < n; i++) {
        tp_value c;
        CHECK_OK(tp_value_copy(&vals[i], &c));
        CHECK_OK(tp_value_seq_set(&args, i, &c));
    }
    tp_node *out = NULL;
    CHECK_OK(tp_graph_call_function(g, op, &args, kwargs, &out));
    tp_value_clear(&args);
    return out;
}
static tp_node *call(tp_graph *g, tp_op op, int n, const tp_value *vals) { return call_kw(g, op, n, vals, NULL); }

/* An int-list value (caller clears). */
static tp_value ints(int n, const int64_t *v) {
    tp_value l = tp_value_none();
    CHECK_OK(tp_value_int_list(v, n, &l));
    return l;
}

static void output_nodes(tp_graph *g, int n, tp_node **nodes) {
    tp_value t;
    CHECK_OK(tp_value_tuple(n, &t));
    for (int i = 0; i < n; i++) t.u.seq.items[i] = tp_value_node(nodes[i]);
    CHECK_OK(tp_graph_output(g, &t, NULL));
    tp_value_clear(&t);
}

static void set_state(tp_program *p, const char *target, tp_state_kind kind, int ndim, const int64_t *sizes,
                      const float *data) {
    tp_tensor *t = tensor_f32(ndim, sizes, data);
    CHECK_OK(tp_program_set_state(p, target, kind, t, true));
    tp_tensor_free(t);
}

static void set_example(tp_program *p, const char *name, int ndim, const int64_t *sizes, const float *data) {
    tp_value ex = tv(tensor_f32(ndim, sizes, data));
    CHECK_OK(tp_program_set_example_input(p, name, &ex));
    tp_value_clear(&ex);
}

static bool tensor_equals(const tp_tensor *t, const float *want, int64_t n) {
    if (!t || tp_tensor_numel(t) != n) return false;
    for (int64_t i = 0; i < n; i++)
        if (fabs(tp_tensor_item_f64(t, i) - want[i]) > 1e-5 * (1 + fabs(want[i]))) return false;
    return true;
}

/* Call p with one tensor argument (NULL: the example inputs); *out gets the
 * output tuple (caller clears). */
static tp_status call1(tp_program *p, int ndim, const int64_t *sizes, const float *x, tp_value *out) {
    *out = tp_value_none();
    if (!x) return tp_program_call(p, NULL, 0, NULL, out);
    tp_value arg = tv(tensor_f32(ndim, sizes, x));
    tp_status st = tp_program_call(p, &arg, 1, NULL, out);
    tp_value_clear(&arg);
    return st;
}

/* Output item i of a tuple result (or the result itself) as a tensor. */
static const tp_tensor *out_tensor(const tp_value *out, int i) {
    const tp_value *v = out->kind == TP_VAL_TUPLE || out->kind == TP_VAL_LIST ? tp_value_at(out, i) : out;
    return v && v->kind == TP_VAL_TENSOR ? v->u.tensor : NULL;
}

static int64_t count_kind(const tp_graph *g, tp_node_kind kind) {
    int64_t n = 0;
    for (tp_node *m = tp_graph_first_node(g); m; m = tp_node_next(m)) n += tp_node_get_kind(m) == kind;
    return n;
}

static int64_t count_op(const tp_graph *g, tp_op op) {
    int64_t n = 0;
    for (tp_node *m = tp_graph_first_node(g); m; m = tp_node_next(m))
        n += tp_node_get_kind(m) == TP_NODE_CALL_FUNCTION && tp_node_op(m) == op;
    return n;
}

static const tp_node *find_attr(const tp_graph *g, const char *target) {
    for (tp_node *m = tp_graph_first_node(g); m; m = tp_node_next(m))
        if (tp_node_get_kind(m) == TP_NODE_GET_ATTR && strcmp(tp_node_target(m), target) == 0) return m;
    return NULL;
}

#define CHECK_STR(actual, expected)                                                                  \
    do {                                                                                             \
        const char *a_ = (actual), *e_ = (expected);                                                 \
        CHECK_MSG(a_ && strcmp(a_, e_) == 0, "got \"%s\", expected \"%s\"", a_ ? a_ : "(null)", e_); \
    } while (0)

/* ---- programs ------------------------------------------------------------ */

/* affine: p_w (parameter "w", f32[2]), x (f32[B, 2], B in [1, 4]);
 * mul = x * p_w; add = mul + 1; returns (add,). w = [2, 3]. */
static tp_program *make_affine(void) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *w = placeholder(g, "p_w", 1, SZ(2));
    tp_node *x = placeholder(g, "x", 2, SZ(2, 2));
    tp_node *mul = call(g, TP_OP_MUL, 2, (tp_value[]){N(x), N(w)});
    tp_node *add = call(g, TP_OP_ADD, 2, (tp_value[]){N(mul), tp_value_float(1.0)});
    output_nodes(g, 1, &add);
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_w"), "w", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor("add"), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    set_state(p, "w", TP_STATE_PARAMETER, 1, SZ(2), (float[]){2, 3});
    set_example(p, "x", 2, SZ(2, 2), (float[]){1, 2, 3, 4});
    CHECK_OK(tp_program_add_range(p, "batch", 1, 4));
    tp_dim_rule rule = {.site = {"x", 0}, .kind = TP_DIM_SYMBOL, .symbol = "batch"};
    CHECK_OK(tp_program_add_dim_rule(p, &rule));
    CHECK_OK(tp_program_validate(p));
    return p;
}

/* affine on the example input [[1, 2], [3, 4]]: x * [2, 3] + 1 */
static const float affine_expected[] = {3, 7, 7, 13};

/* ---- passes used by the tests ------------------------------------------- */

static tp_status noop_pass(tp_program *p, void *user, bool *modified) {
    (void)p;
    if (user) (*(int *)user)++;
    *modified = false;
    return TP_OK;
}

/* Prefix every node name but the output's with "r_" (graph only). */
static tp_status rename_pass(tp_program *p, void *user, bool *modified) {
    (void)user;
    tp_graph *g = tp_program_graph_mut(p);
    for (tp_node *n = tp_graph_first_node(g); n; n = tp_node_next(n)) {
        if (tp_node_get_kind(n) == TP_NODE_OUTPUT) continue;
        char name[128];
        snprintf(name, sizeof name, "r_%s", tp_node_name(n));
        TP_TRY(tp_node_rename(n, name));
    }
    *modified = true;
    return TP_OK;
}

/* Swap the names of the nodes called "a" and "b". */
static tp_status swap_pass(tp_program *p, void *user, bool *modified) {
    (void)user;
    tp_graph *g = tp_program_graph_mut(p);
    tp_node *a = tp_graph_find_node(g, "a"), *b = tp_graph_find_node(g, "b");
    TP_CHECK(a && b, TP_ERR_NOT_FOUND, "no nodes a and b");
    TP_TRY(tp_node_rename(a, "tmp"));
    TP_TRY(tp_node_rename(b, "a"));
    TP_TRY(tp_node_rename(a, "b"));
    *modified = true;
    return TP_OK;
}

static tp_status failing_pass(tp_program *p, void *user, bool *modified) {
    (void)p;
    (void)user;
    (void)modified;
    return tp_error(TP_ERR_INVALID_ARG, "cannot do this");
}

/* Append a placeholder without an input spec. */
static tp_status extra_placeholder_pass(tp_program *p, void *user, bool *modified) {
    (void)user;
    tp_graph *g = tp_program_graph_mut(p);
    TP_TRY(tp_graph_set_insert_point(g, tp_graph_first_node(g)));
    TP_TRY(tp_graph_placeholder(g, "extra", NULL, NULL));
    TP_TRY(tp_graph_set_insert_point(g, NULL));
    *modified = true;
    return TP_OK;
}

/* Return (add, mul) instead of (add,). */
static tp_status extra_output_pass(tp_program *p, void *user, bool *modified) {
    (void)user;
    tp_graph *g = tp_program_graph_mut(p);
    tp_value out;
    TP_TRY(tp_value_tuple(2, &out));
    out.u.seq.items[0] = N(tp_graph_find_node(g, "add"));
    out.u.seq.items[1] = N(tp_graph_find_node(g, "mul"));
    tp_value args;
    tp_status st = tp_value_tuple(1, &args);
    if (st == TP_OK) st = tp_value_seq_set(&args, 0, &out);
    if (st == TP_OK) st = tp_node_set_args(tp_graph_output_node(g), &args);
    tp_value_clear(&args);
    tp_value_clear(&out);
    *modified = true;
    return st;
}

/* Move add before mul: breaks the topological order. */
static tp_status reorder_pass(tp_program *p, void *user, bool *modified) {
    (void)user;
    tp_graph *g = tp_program_graph_mut(p);
    TP_TRY(tp_graph_move_before(g, tp_graph_find_node(g, "add"), tp_graph_find_node(g, "mul")));
    *modified = true;
    return TP_OK;
}

/* ---- transform ------------------------------------------------------------ */

TEST(test_transform_unchanged_returns_same_program) {
    tp_program *p = make_affine();
    tp_program *q = NULL;
    int runs = 0;
    tp_pass noop = {"noop", noop_pass, &runs};
    CHECK_OK(tp_program_transform(p, &noop, 1, &q));
    CHECK(q == p);
    CHECK(runs == 1);
    tp_program_free(q); /* one reference each */
    CHECK_OK(tp_program_transform(p, NULL, 0, &q));
    CHECK(q == p);
    tp_program_free(q);
    /* none of the shipped passes finds anything to do */
    tp_pass shipped[] = {{"dce", tp_pass_dead_code, NULL},
                         {"fold", tp_pass_constant_fold, NULL},
                         {"tokens", tp_pass_remove_effect_tokens, NULL}};
    for (int i = 0; i < 3; i++) {
        CHECK_OK(tp_program_transform(p, &shipped[i], 1, &q));
        CHECK_MSG(q == p, "pass %s changed the program", shipped[i].name);
        tp_program_free(q);
    }
    CHECK_OK(tp_program_transform(p, shipped, 3, &q));
    CHECK(q == p);
    tp_program_free(q);
    /* run directly on a copy: nothing modified, graph untouched */
    tp_program *c = NULL;
    CHECK_OK(tp_program_copy(p, &c));
    for (int i = 0; i < 3; i++) {
        bool modified = true;
        CHECK_OK(shipped[i].fn(c, NULL, &modified));
        CHECK_MSG(!modified, "pass %s says it modified", shipped[i].name);
    }
    CHECK(tp_graph_num_nodes(tp_program_graph(c)) == 5);
    CHECK_OK(tp_program_validate(c));
    tp_program_free(c);
    tp_value out;
    CHECK_OK(call1(p, 0, NULL, NULL, &out));
    CHECK(tensor_equals(out_tensor(&out, 0), affine_expected, 4));
    tp_value_clear(&out);
    tp_program_free(p);
}

TEST(test_transform_rename_resyncs_signature) {
    tp_program *p = make_affine();
    tp_program *q = NULL;
    tp_pass rename = {"rename", rename_pass, NULL};
    CHECK_OK(tp_program_transform(p, &rename, 1, &q));
    CHECK(q && q != p);
    if (!q) {
        tp_program_free(p);
        return;
    }
    const tp_signature *s = tp_program_signature(q);
    CHECK(tp_signature_n_inputs(s) == 2 && tp_signature_n_outputs(s) == 1);
    CHECK_STR(tp_signature_input(s, 0)->arg.name, "r_p_w");
    CHECK_STR(tp_signature_input(s, 0)->target, "w");
    CHECK(tp_signature_input(s, 0)->kind == TP_INPUT_PARAMETER);
    CHECK_STR(tp_signature_input(s, 1)->arg.name, "r_x");
    CHECK_STR(tp_signature_output(s, 0)->arg.name, "r_add");
    CHECK_OK(tp_program_validate(q));
    /* the user input's example and dim rule follow the rename */
    CHECK(tp_program_example_input(q, "r_x") != NULL);
    CHECK(tp_program_example_input(q, "x") == NULL);
    CHECK_STR(tp_program_dim_rule(q, 0)->site.input, "r_x");
    /* the original is untouched */
    CHECK_STR(tp_signature_input(tp_program_signature(p), 1)->arg.name, "x");
    CHECK(tp_graph_find_node(tp_program_graph(p), "r_x") == NULL);
    /* same results: examples, positional, keyword */
    tp_value out;
    CHECK_OK(call1(q, 0, NULL, NULL, &out));
    CHECK(tensor_equals(out_tensor(&out, 0), affine_expected, 4));
    tp_value_clear(&out);
    CHECK_OK(call1(q, 2, SZ(3, 2), (float[]){0, 0, 1, 1, -1, 2}, &out));
    CHECK(tensor_equals(out_tensor(&out, 0), (float[]){1, 1, 3, 4, -1, 7}, 6));
    tp_value_clear(&out);
    tp_value kw;
    CHECK_OK(tp_value_dict(&kw));
    tp_value x = tv(tensor_f32(2, SZ(1, 2), (float[]){1, 1}));
    CHECK_OK(tp_value_dict_set(&kw, "r_x", &x));
    CHECK_OK(tp_program_call(q, NULL, 0, &kw, &out));
    CHECK(tensor_equals(out_tensor(&out, 0), (float[]){3, 4}, 2));
    tp_value_clear(&out);
    tp_value_clear(&kw);
    /* the constraint still applies, under the new name */
    CHECK_STATUS(call1(q, 2, SZ(5, 2), (float[]){0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, &out), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("r_x.shape[0] = 5 violates batch <= 4");
    tp_program_free(q);
    tp_program_free(p);
}

/* sub: a, b (f32[1]) -> a - b, examples a = 5, b = 2 */
static tp_program *make_sub(void) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *a = placeholder(g, "a", 1, SZ(1));
    tp_node *b = placeholder(g, "b", 1, SZ(1));
    tp_node *sub = call(g, TP_OP_SUB, 2, (tp_value[]){N(a), N(b)});
    output_nodes(g, 1, &sub);
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("a"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("b"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor("sub"), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    set_example(p, "a", 1, SZ(1), (float[]){5});
    set_example(p, "b", 1, SZ(1), (float[]){2});
    CHECK_OK(tp_program_validate(p));
    return p;
}

TEST(test_transform_swapped_names) {
    tp_program *p = make_sub();
    tp_program *q = NULL;
    tp_pass swap = {"swap", swap_pass, NULL};
    CHECK_OK(tp_program_transform(p, &swap, 1, &q));
    CHECK(q && q != p);
    if (!q) {
        tp_program_free(p);
        return;
    }
    /* by position: the first placeholder is now called b */
    CHECK_STR(tp_signature_input(tp_program_signature(q), 0)->arg.name, "b");
    CHECK_STR(tp_signature_input(tp_program_signature(q), 1)->arg.name, "a");
    tp_value out;
    /* the examples moved with their placeholders: still 5 - 2 */
    CHECK_OK(tp_program_call(q, NULL, 0, NULL, &out));
    CHECK(tensor_equals(out_tensor(&out, 0), (float[]){3}, 1));
    tp_value_clear(&out);
    tp_value args[2] = {tv(tensor_f32(1, SZ(1), (float[]){10})), tv(tensor_f32(1, SZ(1), (float[]){4}))};
    CHECK_OK(tp_program_call(q, args, 2, NULL, &out));
    CHECK(tensor_equals(out_tensor(&out, 0), (float[]){6}, 1));
    tp_value_clear(&out);
    tp_value_clear(&args[0]);
    tp_value_clear(&args[1]);
    tp_program_free(q);
    tp_program_free(p);
}

TEST(test_transform_errors) {
    tp_program *p = make_affine();
    tp_program *q = NULL;
    int runs = 0;
    tp_pass passes[] = {{"explode", failing_pass, NULL}, {"after", noop_pass, &runs}};
    CHECK_STATUS(tp_program_transform(p, passes, 2, &q), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("pass explode: cannot do this");
    CHECK(q == NULL);
    CHECK(runs == 0); /* later passes do not run */

    tp_pass extra = {"extra", extra_placeholder_pass, NULL};
    CHECK_STATUS(tp_program_transform(p, &extra, 1, &q), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("the graph has 3 placeholders but the signature has 2 input specs");
    CHECK(q == NULL);

    tp_pass outs = {"outs", extra_output_pass, NULL};
    CHECK_STATUS(tp_program_transform(p, &outs, 1, &q), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("the graph has 2 outputs but the signature has 1 output spec");

    tp_pass reorder = {"reorder", reorder_pass, NULL};
    CHECK_STATUS(tp_program_transform(p, &reorder, 1, &q), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("1 problem");
    CHECK(q == NULL);

    tp_pass nofn = {"nofn", NULL, NULL};
    CHECK_STATUS(tp_program_transform(p, &nofn, 1, &q), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("pass 0 (nofn) has no function");
    CHECK_STATUS(tp_program_transform(p, NULL, 1, &q), TP_ERR_INVALID_ARG);
    /* p itself never changed */
    CHECK(tp_graph_num_nodes(tp_program_graph(p)) == 5);
    CHECK_OK(tp_program_validate(p));
    tp_program_free(p);
}

/* ---- dead code ------------------------------------------------------------- */

/* b_stats (buffer "stats" = 0), x, y (unused) f32[3]; neg = -x and
 * exp(neg) are dead; add_ writes x into the buffer (in place, no users);
 * returns (relu(x),). */
static tp_program *make_dead(void) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *stats = placeholder(g, "b_stats", 1, SZ(3));
    tp_node *x = placeholder(g, "x", 1, SZ(3));
    placeholder(g, "y", 1, SZ(3));
    tp_node *neg = call(g, TP_OP_NEG, 1, (tp_value[]){N(x)});
    call(g, TP_OP_EXP, 1, (tp_value[]){N(neg)});
    call(g, TP_OP_ADD_, 2, (tp_value[]){N(stats), N(x)});
    tp_node *relu = call(g, TP_OP_RELU, 1, (tp_value[]){N(x)});
    output_nodes(g, 1, &relu);
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_BUFFER, tp_arg_tensor("b_stats"), "stats", TP_PERSISTENT_YES));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("y"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor("relu"), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    set_state(p, "stats", TP_STATE_BUFFER, 1, SZ(3), (float[]){0, 0, 0});
    set_example(p, "x", 1, SZ(3), (float[]){1, -2, 3});
    set_example(p, "y", 1, SZ(3), (float[]){0, 0, 0});
    CHECK_OK(tp_program_validate(p));
    return p;
}

TEST(test_dead_code) {
    tp_program *p = make_dead();
    tp_program *q = NULL;
    tp_pass dce = {"dce", tp_pass_dead_code, NULL};
    CHECK_OK(tp_program_transform(p, &dce, 1, &q));
    CHECK(q && q != p);
    if (!q) {
        tp_program_free(p);
        return;
    }
    const tp_graph *g = tp_program_graph(q);
    CHECK(tp_graph_find_node(g, "neg") == NULL);
    CHECK(tp_graph_find_node(g, "exp") == NULL);
    CHECK(count_op(g, TP_OP_ADD_) == 1); /* in place: kept */
    CHECK(tp_graph_num_placeholders(g) == 3); /* y is unused but kept */
    CHECK(tp_graph_num_nodes(g) == 6);
    CHECK(tp_graph_num_nodes(tp_program_graph(p)) == 8); /* the original keeps its nodes */
    tp_value out;
    CHECK_OK(call1(q, 0, NULL, NULL, &out));
    CHECK(tensor_equals(out_tensor(&out, 0), (float[]){1, 0, 3}, 3));
    tp_value_clear(&out);
    tp_tensor *stats_q = NULL, *stats_p = NULL;
    CHECK_OK(tp_program_get_state(q, "stats", &stats_q, NULL, NULL));
    CHECK_OK(tp_program_get_state(p, "stats", &stats_p, NULL, NULL));
    CHECK(tensor_equals(stats_q, (float[]){1, -2, 3}, 3)); /* the in-place add ran */
    CHECK(tensor_equals(stats_p, (float[]){0, 0, 0}, 3));  /* the copy has its own state */
    /* a second run finds nothing */
    bool modified = true;
    CHECK_OK(tp_pass_dead_code(q, NULL, &modified));
    CHECK(!modified);
    tp_program_free(q);
    tp_program_free(p);
}

/* ---- constant folding ------------------------------------------------------ */

/* x f32[2, 2]; mul = (ones([2, 2]) + 1) * x; returns (mul,) */
static tp_program *make_foldable(void) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = placeholder(g, "x", 2, SZ(2, 2));
    tp_value size = ints(2, SZ(2, 2));
    tp_node *ones = call(g, TP_OP_ONES, 1, &size);
    tp_value_clear(&size);
    tp_node *add = call(g, TP_OP_ADD, 2, (tp_value[]){N(ones), tp_value_int(1)});
    tp_node *mul = call(g, TP_OP_MUL, 2, (tp_value[]){N(add), N(x)});
    output_nodes(g, 1, &mul);
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor("mul"), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    set_example(p, "x", 2, SZ(2, 2), (float[]){1, 2, 3, 4});
    CHECK_OK(tp_program_validate(p));
    return p;
}

TEST(test_constant_fold_basic) {
    tp_program *p = make_foldable();
    tp_program *q = NULL;
    tp_pass fold = {"fold", tp_pass_constant_fold, NULL};
    CHECK_OK(tp_program_transform(p, &fold, 1, &q));
    CHECK(q && q != p);
    if (!q) {
        tp_program_free(p);
        return;
    }
    const tp_graph *g = tp_program_graph(q);
    /* x, _folded_constant_0, mul, output */
    CHECK(tp_graph_num_nodes(g) == 4);
    CHECK(count_op(g, TP_OP_ONES) == 0 && count_op(g, TP_OP_ADD) == 0 && count_op(g, TP_OP_MUL) == 1);
    const tp_node *attr = find_attr(g, "_folded_constant_0");
    CHECK(attr != NULL);
    if (attr) {
        CHECK(tp_node_prev(attr) == tp_graph_placeholder_at(g, 0)); /* placed before its user */
        const tp_value *mv = tp_node_meta_val(attr);
        CHECK(mv->kind == TP_VAL_TENSOR && tp_tensor_is_meta(mv->u.tensor) &&
              tp_tensor_dtype(mv->u.tensor) == TP_FLOAT32 && tp_tensor_ndim(mv->u.tensor) == 2);
        const tp_node *mul = tp_node_user(attr, 0);
        CHECK(tp_node_num_users(attr) == 1 && mul && tp_node_op(mul) == TP_OP_MUL);
    }
    tp_tensor *c = NULL;
    tp_state_kind kind = TP_STATE_PARAMETER;
    CHECK_OK(tp_program_get_state(q, "_folded_constant_0", &c, &kind, NULL));
    CHECK(kind == TP_STATE_CONSTANT);
    CHECK(tensor_equals(c, (float[]){2, 2, 2, 2}, 4));
    CHECK(tp_program_get_state(p, "_folded_constant_0", &c, NULL, NULL) == TP_ERR_NOT_FOUND);
    /* same results as the original: 2 * x */
    tp_value out_p, out_q;
    CHECK_OK(call1(p, 2, SZ(2, 2), (float[]){1, -2, 3, 0.5f}, &out_p));
    CHECK_OK(call1(q, 2, SZ(2, 2), (float[]){1, -2, 3, 0.5f}, &out_q));
    CHECK(tensor_equals(out_tensor(&out_p, 0), (float[]){2, -4, 6, 1}, 4));
    CHECK(tensor_equals(out_tensor(&out_q, 0), (float[]){2, -4, 6, 1}, 4));
    tp_value_clear(&out_p);
    tp_value_clear(&out_q);
    /* the unlifted module reads the folded constant too */
    tp_module *m = NULL;
    CHECK_OK(tp_program_module(q, &m));
    tp_value out_m = tp_value_none();
    if (m) CHECK_OK(tp_module_call(m, NULL, 0, NULL, &out_m));
    CHECK(tensor_equals(out_tensor(&out_m, 0), (float[]){2, 4, 6, 8}, 4));
    tp_value_clear(&out_m);
    /* folding again finds nothing */
    tp_program *r = NULL;
    CHECK_OK(tp_program_transform(q, &fold, 1, &r));
    CHECK(r == q);
    tp_program_free(r);
    tp_program_free(q);
    tp_program_free(p);
}

/* x f32[2, 3]; h = reshape(arange(6), [2, 3]) * 0.5; returns (x + h, h):
 * h is a constant that is also a user output. */
TEST(test_constant_fold_output_leaf) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = placeholder(g, "x", 2, SZ(2, 3));
    tp_node *ar = call(g, TP_OP_ARANGE, 1, (tp_value[]){tp_value_int(6)});
    tp_value shape = ints(2, SZ(2, 3));
    tp_node *r = call(g, TP_OP_RESHAPE, 2, (tp_value[]){N(ar), shape});
    tp_value_clear(&shape);
    tp_node *h = call(g, TP_OP_MUL, 2, (tp_value[]){N(r), tp_value_float(0.5)});
    tp_node *add = call(g, TP_OP_ADD, 2, (tp_value[]){N(x), N(h)});
    output_nodes(g, 2, (tp_node *[]){add, h});
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor("add"), NULL));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor("mul"), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    set_example(p, "x", 2, SZ(2, 3), (float[]){1, 1, 1, 1, 1, 1});
    CHECK_OK(tp_program_validate(p));
    tp_program *q = NULL;
    tp_pass fold = {"fold", tp_pass_constant_fold, NULL};
    CHECK_OK(tp_program_transform(p, &fold, 1, &q));
    CHECK(q && q != p);
    if (q) {
        const tp_graph *gq = tp_program_graph(q);
        CHECK(tp_graph_num_nodes(gq) == 4); /* x, _folded_constant_0, add, output */
        const tp_node *attr = find_attr(gq, "_folded_constant_0");
        CHECK(attr != NULL);
        /* output spec 1 now names the get_attr node */
        if (attr) CHECK_STR(tp_signature_output(tp_program_signature(q), 1)->arg.name, tp_node_name(attr));
        tp_value out;
        CHECK_OK(call1(q, 0, NULL, NULL, &out));
        CHECK(tensor_equals(out_tensor(&out, 0), (float[]){1, 1.5f, 2, 2.5f, 3, 3.5f}, 6));
        CHECK(tensor_equals(out_tensor(&out, 1), (float[]){0, 0.5f, 1, 1.5f, 2, 2.5f}, 6));
        CHECK(out_tensor(&out, 1) && tp_tensor_dtype(out_tensor(&out, 1)) == TP_FLOAT32);
        tp_value_clear(&out);
        /* a second fold of a new program numbers on */
        CHECK(find_attr(gq, "_folded_constant_1") == NULL);
    }
    tp_program_free(q);
    tp_program_free(p);
}

/* p_w (parameter "w"), b_buf (buffer "buf"), x: f32[2]; get_attr "scale"
 * (constant) and "gparam" (a parameter read by get_attr);
 * out = (w + 1) + buf * 2 + (-x) + (-scale) + (-gparam).
 * Only -scale folds. */
TEST(test_constant_fold_skips_state_and_inputs) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *w = placeholder(g, "p_w", 1, SZ(2));
    tp_node *buf = placeholder(g, "b_buf", 1, SZ(2));
    tp_node *x = placeholder(g, "x", 1, SZ(2));
    tp_node *n1 = call(g, TP_OP_ADD, 2, (tp_value[]){N(w), tp_value_int(1)});
    tp_node *n2 = call(g, TP_OP_MUL, 2, (tp_value[]){N(buf), tp_value_int(2)});
    tp_node *n3 = call(g, TP_OP_NEG, 1, (tp_value[]){N(x)});
    tp_node *scale = get_attr(g, "scale", 1, SZ(2));
    tp_node *n4 = call(g, TP_OP_NEG, 1, (tp_value[]){N(scale)});
    tp_node *gp = get_attr(g, "gparam", 1, SZ(2));
    tp_node *n5 = call(g, TP_OP_NEG, 1, (tp_value[]){N(gp)});
    tp_node *s1 = call(g, TP_OP_ADD, 2, (tp_value[]){N(n1), N(n2)});
    tp_node *s2 = call(g, TP_OP_ADD, 2, (tp_value[]){N(s1), N(n3)});
    tp_node *s3 = call(g, TP_OP_ADD, 2, (tp_value[]){N(s2), N(n4)});
    tp_node *s4 = call(g, TP_OP_ADD, 2, (tp_value[]){N(s3), N(n5)});
    output_nodes(g, 1, &s4);
    char n1_name[64], n2_name[64], n3_name[64], n4_name[64], n5_name[64];
    snprintf(n1_name, sizeof n1_name, "%s", tp_node_name(n1));
    snprintf(n2_name, sizeof n2_name, "%s", tp_node_name(n2));
    snprintf(n3_name, sizeof n3_name, "%s", tp_node_name(n3));
    snprintf(n4_name, sizeof n4_name, "%s", tp_node_name(n4));
    snprintf(n5_name, sizeof n5_name, "%s", tp_node_name(n5));
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_w"), "w", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_BUFFER, tp_arg_tensor("b_buf"), "buf", TP_PERSISTENT_YES));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(s4)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    set_state(p, "w", TP_STATE_PARAMETER, 1, SZ(2), (float[]){1, 2});
    set_state(p, "buf", TP_STATE_BUFFER, 1, SZ(2), (float[]){10, 20});
    set_state(p, "scale", TP_STATE_CONSTANT, 1, SZ(2), (float[]){100, 200});
    set_state(p, "gparam", TP_STATE_PARAMETER, 1, SZ(2), (float[]){1000, 2000});
    set_example(p, "x", 1, SZ(2), (float[]){3, 4});
    CHECK_OK(tp_program_validate(p));

    tp_program *q = NULL;
    tp_pass fold = {"fold", tp_pass_constant_fold, NULL};
    CHECK_OK(tp_program_transform(p, &fold, 1, &q));
    CHECK(q && q != p);
    if (q) {
        const tp_graph *gq = tp_program_graph(q);
        CHECK(tp_graph_find_node(gq, n1_name) != NULL);
        CHECK(tp_graph_find_node(gq, n2_name) != NULL);
        CHECK(tp_graph_find_node(gq, n3_name) != NULL);
        CHECK(tp_graph_find_node(gq, n4_name) == NULL); /* -scale folded */
        CHECK(tp_graph_find_node(gq, n5_name) != NULL);
        CHECK(find_attr(gq, "scale") == NULL);          /* read only by the folded node */
        CHECK(find_attr(gq, "gparam") != NULL);
        CHECK(find_attr(gq, "_folded_constant_0") != NULL);
        CHECK(count_kind(gq, TP_NODE_GET_ATTR) == 2);
        tp_tensor *c = NULL;
        CHECK_OK(tp_program_get_state(q, "_folded_constant_0", &c, NULL, NULL));
        CHECK(tensor_equals(c, (float[]){-100, -200}, 2));
        /* (w+1) + 2 buf - x - scale - gparam = [2+20-3-100-1000, 3+40-4-200-2000] */
        static const float want[] = {-1081, -2161};
        tp_value out;
        CHECK_OK(call1(p, 0, NULL, NULL, &out));
        CHECK(tensor_equals(out_tensor(&out, 0), want, 2));
        tp_value_clear(&out);
        CHECK_OK(call1(q, 0, NULL, NULL, &out));
        CHECK(tensor_equals(out_tensor(&out, 0), want, 2));
        tp_value_clear(&out);
    }
    tp_program_free(q);
    tp_program_free(p);
}

/* Things that must not fold: a constant written in place, a creation
 * result written in place, a too large result, a random op. */
TEST(test_constant_fold_refusals) {
    tp_pass fold = {"fold", tp_pass_constant_fold, NULL};
    /* (1) scale is a constant but add_ writes into it; x * -scale */
    {
        tp_graph *g = NULL;
        CHECK_OK(tp_graph_new(&g));
        tp_node *x = placeholder(g, "x", 1, SZ(2));
        tp_node *scale = get_attr(g, "scale", 1, SZ(2));
        tp_node *neg = call(g, TP_OP_NEG, 1, (tp_value[]){N(scale)});
        tp_node *mul = call(g, TP_OP_MUL, 2, (tp_value[]){N(x), N(neg)});
        call(g, TP_OP_ADD_, 2, (tp_value[]){N(scale), tp_value_int(1)});
        output_nodes(g, 1, &mul);
        tp_signature *s = NULL;
        CHECK_OK(tp_signature_new(&s));
        CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
        CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor("mul"), NULL));
        tp_program *p = NULL;
        CHECK_OK(tp_program_new(g, s, &p));
        set_state(p, "scale", TP_STATE_CONSTANT, 1, SZ(2), (float[]){1, 2});
        set_example(p, "x", 1, SZ(2), (float[]){1, 1});
        CHECK_OK(tp_program_validate(p));
        tp_program *q = NULL;
        CHECK_OK(tp_program_transform(p, &fold, 1, &q));
        CHECK(q == p);
        tp_program_free(q);
        /* calling twice sees the mutation: -[1, 2] then -[2, 3] */
        tp_value out;
        CHECK_OK(call1(p, 0, NULL, NULL, &out));
        CHECK(tensor_equals(out_tensor(&out, 0), (float[]){-1, -2}, 2));
        tp_value_clear(&out);
        CHECK_OK(call1(p, 0, NULL, NULL, &out));
        CHECK(tensor_equals(out_tensor(&out, 0), (float[]){-2, -3}, 2));
        tp_value_clear(&out);
        tp_program_free(p);
    }
    /* (2) add_(ones([2]), x): a fresh tensor each call, never a constant */
    {
        tp_graph *g = NULL;
        CHECK_OK(tp_graph_new(&g));
        tp_node *x = placeholder(g, "x", 1, SZ(2));
        tp_value size = ints(1, SZ(2));
        tp_node *ones = call(g, TP_OP_ONES, 1, &size);
        tp_value_clear(&size);
        tp_node *acc = call(g, TP_OP_ADD_, 2, (tp_value[]){N(ones), N(x)});
        output_nodes(g, 1, &acc);
        tp_signature *s = NULL;
        CHECK_OK(tp_signature_new(&s));
        CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
        CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(acc)), NULL));
        tp_program *p = NULL;
        CHECK_OK(tp_program_new(g, s, &p));
        set_example(p, "x", 1, SZ(2), (float[]){1, 2});
        CHECK_OK(tp_program_validate(p));
        tp_program *q = NULL;
        CHECK_OK(tp_program_transform(p, &fold, 1, &q));
        CHECK(q == p);
        tp_program_free(q);
        for (int i = 0; i < 2; i++) {
            tp_value out;
            CHECK_OK(call1(p, 0, NULL, NULL, &out));
            CHECK(tensor_equals(out_tensor(&out, 0), (float[]){2, 3}, 2));
            tp_value_clear(&out);
        }
        tp_program_free(p);
    }
    /* (3) sum(ones([1025, 1024])) * x: the ones tensor is over the size limit */
    {
        tp_graph *g = NULL;
        CHECK_OK(tp_graph_new(&g));
        tp_node *x = placeholder(g, "x", 1, SZ(1));
        tp_value size = ints(2, SZ(1025, 1024));
        tp_node *ones = call(g, TP_OP_ONES, 1, &size);
        tp_value_clear(&size);
        tp_node *sum = call(g, TP_OP_SUM, 1, (tp_value[]){N(ones)});
        tp_node *mul = call(g, TP_OP_MUL, 2, (tp_value[]){N(x), N(sum)});
        output_nodes(g, 1, &mul);
        tp_signature *s = NULL;
        CHECK_OK(tp_signature_new(&s));
        CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
        CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor("mul"), NULL));
        tp_program *p = NULL;
        CHECK_OK(tp_program_new(g, s, &p));
        set_example(p, "x", 1, SZ(1), (float[]){2});
        CHECK_OK(tp_program_validate(p));
        tp_program *q = NULL;
        CHECK_OK(tp_program_transform(p, &fold, 1, &q));
        CHECK(q == p);
        tp_program_free(q);
        tp_program_free(p);
    }
    /* (4) dropout(ones([4]), 0.5, True): ones folds, dropout stays */
    {
        tp_graph *g = NULL;
        CHECK_OK(tp_graph_new(&g));
        tp_node *x = placeholder(g, "x", 1, SZ(4));
        tp_value size = ints(1, SZ(4));
        tp_node *ones = call(g, TP_OP_ONES, 1, &size);
        tp_value_clear(&size);
        tp_node *drop =
            call(g, TP_OP_DROPOUT, 3, (tp_value[]){N(ones), tp_value_float(0.5), tp_value_bool(true)});
        tp_node *mul = call(g, TP_OP_MUL, 2, (tp_value[]){N(x), N(drop)});
        output_nodes(g, 1, &mul);
        tp_signature *s = NULL;
        CHECK_OK(tp_signature_new(&s));
        CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
        CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor("mul"), NULL));
        tp_program *p = NULL;
        CHECK_OK(tp_program_new(g, s, &p));
        set_example(p, "x", 1, SZ(4), (float[]){1, 1, 1, 1});
        CHECK_OK(tp_program_validate(p));
        tp_program *q = NULL;
        CHECK_OK(tp_program_transform(p, &fold, 1, &q));
        CHECK(q && q != p);
        if (q) {
            const tp_graph *gq = tp_program_graph(q);
            CHECK(count_op(gq, TP_OP_DROPOUT) == 1);
            CHECK(count_op(gq, TP_OP_ONES) == 0);
            const tp_node *attr = find_attr(gq, "_folded_constant_0");
            CHECK(attr && tp_node_num_users(attr) == 1 && tp_node_op(tp_node_user(attr, 0)) == TP_OP_DROPOUT);
        }
        tp_program_free(q);
        tp_program_free(p);
    }
}

/* ---- effect tokens ---------------------------------------------------------- */

/* token (TOKEN), b_stats (buffer "stats" = [1, 1, 1]), x f32[3];
 * returns (token, stats + x [BUFFER_MUTATION], x * 2). */
static tp_program *make_tokens(void) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *token = NULL;
    CHECK_OK(tp_graph_placeholder(g, "token", NULL, &token));
    tp_node *stats = placeholder(g, "b_stats", 1, SZ(3));
    tp_node *x = placeholder(g, "x", 1, SZ(3));
    tp_node *add = call(g, TP_OP_ADD, 2, (tp_value[]){N(stats), N(x)});
    tp_node *mul = call(g, TP_OP_MUL, 2, (tp_value[]){N(x), tp_value_int(2)});
    output_nodes(g, 3, (tp_node *[]){token, add, mul});
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_TOKEN, tp_arg_token("token"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_BUFFER, tp_arg_tensor("b_stats"), "stats", TP_PERSISTENT_YES));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_TOKEN, tp_arg_token("token"), NULL));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_BUFFER_MUTATION, tp_arg_tensor("add"), "stats"));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor("mul"), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    set_state(p, "stats", TP_STATE_BUFFER, 1, SZ(3), (float[]){1, 1, 1});
    set_example(p, "x", 1, SZ(3), (float[]){1, 2, 3});
    CHECK_OK(tp_program_validate(p));
    return p;
}

TEST(test_remove_effect_tokens) {
    tp_program *p = make_tokens();
    tp_value out;
    /* calling with tokens: the token is neither a mutation nor a user output */
    CHECK_OK(call1(p, 0, NULL, NULL, &out));
    CHECK(tensor_equals(out_tensor(&out, 0), (float[]){2, 4, 6}, 3));
    tp_value_clear(&out);
    tp_tensor *stats = NULL;
    CHECK_OK(tp_program_get_state(p, "stats", &stats, NULL, NULL));
    CHECK(tensor_equals(stats, (float[]){2, 3, 4}, 3));

    tp_program *q = NULL;
    tp_pass tokens = {"tokens", tp_pass_remove_effect_tokens, NULL};
    CHECK_OK(tp_program_transform(p, &tokens, 1, &q));
    CHECK(q && q != p);
    if (!q) {
        tp_program_free(p);
        return;
    }
    const tp_signature *s = tp_program_signature(q);
    CHECK(tp_signature_n_inputs(s) == 2 && tp_signature_n_outputs(s) == 2);
    for (int i = 0; i < tp_signature_n_inputs(s); i++) CHECK(tp_signature_input(s, i)->kind != TP_INPUT_TOKEN);
    for (int i = 0; i < tp_signature_n_outputs(s); i++) CHECK(tp_signature_output(s, i)->kind != TP_OUTPUT_TOKEN);
    CHECK_STR(tp_signature_input(s, 0)->arg.name, "b_stats");
    CHECK_STR(tp_signature_output(s, 0)->arg.name, "add");
    CHECK(tp_signature_output(s, 0)->kind == TP_OUTPUT_BUFFER_MUTATION);
    tp_strings names;
    CHECK_OK(tp_signature_view_names(s, TP_VIEW_INPUT_TOKENS, &names));
    CHECK(names.n == 0);
    tp_strings_free(&names);
    const tp_graph *g = tp_program_graph(q);
    CHECK(tp_graph_find_node(g, "token") == NULL);
    CHECK(tp_graph_num_placeholders(g) == 2);
    const tp_value *ov = tp_value_at(tp_node_args(tp_graph_output_node(g)), 0);
    CHECK(ov && ov->kind == TP_VAL_TUPLE && tp_value_len(ov) == 2);
    CHECK(ov && tp_value_at(ov, 0)->kind == TP_VAL_NODE && strcmp(tp_node_name(tp_value_at(ov, 0)->u.node), "add") == 0);
    CHECK_OK(tp_program_validate(q));
    /* same user arguments, same result; the mutation still applies (q has
     * its own copy of the state, [2, 3, 4] at the time of the copy) */
    CHECK_OK(call1(q, 1, SZ(3), (float[]){1, 0, -1}, &out));
    CHECK(tensor_equals(out_tensor(&out, 0), (float[]){2, 0, -2}, 3));
    tp_value_clear(&out);
    CHECK_OK(tp_program_get_state(q, "stats", &stats, NULL, NULL));
    CHECK(tensor_equals(stats, (float[]){3, 3, 3}, 3));
    /* the original keeps its tokens */
    CHECK(tp_signature_n_inputs(tp_program_signature(p)) == 3);
    CHECK(tp_graph_find_node(tp_program_graph(p), "token") != NULL);
    /* nothing left to remove */
    tp_program *r = NULL;
    CHECK_OK(tp_program_transform(q, &tokens, 1, &r));
    CHECK(r == q);
    tp_program_free(r);
    tp_program_free(q);
    tp_program_free(p);
}

/* A node that reads the token gets None in its place:
 * linear(x, x, token) -> linear(x, x, None). */
TEST(test_remove_effect_tokens_used_token) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *token = NULL;
    CHECK_OK(tp_graph_placeholder(g, "token", NULL, &token));
    tp_node *x = placeholder(g, "x", 2, SZ(2, 2));
    tp_node *lin = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(x), N(token)});
    output_nodes(g, 2, (tp_node *[]){token, lin});
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_TOKEN, tp_arg_token("token"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_TOKEN, tp_arg_token("token"), NULL));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor("linear"), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    set_example(p, "x", 2, SZ(2, 2), (float[]){1, 2, 3, 4});
    CHECK_OK(tp_program_validate(p));
    bool modified = false;
    CHECK_OK(tp_pass_remove_effect_tokens(p, NULL, &modified));
    CHECK(modified);
    const tp_graph *gp = tp_program_graph(p);
    const tp_node *l = tp_graph_find_node(gp, "linear");
    CHECK(l && tp_node_num_inputs(l) == 1 && tp_value_at(tp_node_args(l), 2)->kind == TP_VAL_NONE);
    CHECK(tp_graph_num_placeholders(gp) == 1);
    CHECK_OK(tp_program_validate(p));
    /* x @ x^T for [[1, 2], [3, 4]] */
    tp_value out;
    CHECK_OK(call1(p, 0, NULL, NULL, &out));
    CHECK(tensor_equals(out_tensor(&out, 0), (float[]){5, 11, 11, 25}, 4));
    tp_value_clear(&out);
    tp_program_free(p);
}

/* ---- all passes together, allocation failures ---------------------------------- */

TEST(test_transform_pipeline) {
    tp_program *p = make_tokens();
    tp_graph *g = tp_program_graph_mut(p);
    /* add a dead constant chain and a foldable one feeding the output */
    tp_node *x = tp_graph_find_node(g, "x"), *mul = tp_graph_find_node(g, "mul");
    CHECK_OK(tp_graph_set_insert_point(g, mul));
    tp_value size = ints(1, SZ(3));
    tp_node *ones = call(g, TP_OP_ONES, 1, &size);
    tp_value_clear(&size);
    tp_node *three = call(g, TP_OP_MUL, 2, (tp_value[]){N(ones), tp_value_int(3)});
    call(g, TP_OP_EXP, 1, (tp_value[]){N(x)}); /* dead */
    tp_node *mul2 = call(g, TP_OP_MUL, 2, (tp_value[]){N(x), N(three)});
    CHECK_OK(tp_graph_set_insert_point(g, NULL));
    CHECK_OK(tp_node_replace_all_uses_with(mul, mul2, NULL, NULL, NULL));
    CHECK_OK(tp_graph_erase_node(g, mul));
    CHECK_OK(tp_program_rename_node(p, mul2, "mul"));
    CHECK_OK(tp_program_validate(p));
    tp_pass passes[] = {{"tokens", tp_pass_remove_effect_tokens, NULL},
                        {"fold", tp_pass_constant_fold, NULL},
                        {"dce", tp_pass_dead_code, NULL},
                        {"rename", rename_pass, NULL}};
    tp_program *q = NULL;
    CHECK_OK(tp_program_transform(p, passes, 4, &q));
    CHECK(q && q != p);
    if (q) {
        const tp_graph *gq = tp_program_graph(q);
        /* r_b_stats, r_x, r__folded_constant_0, r_add, r_mul, output */
        CHECK(tp_graph_num_nodes(gq) == 6);
        CHECK(count_op(gq, TP_OP_EXP) == 0 && count_op(gq, TP_OP_ONES) == 0);
        const tp_signature *s = tp_program_signature(q);
        CHECK(tp_signature_n_inputs(s) == 2 && tp_signature_n_outputs(s) == 2);
        CHECK_STR(tp_signature_input(s, 1)->arg.name, "r_x");
        CHECK_STR(tp_signature_output(s, 0)->arg.name, "r_add");
        CHECK_STR(tp_signature_output(s, 1)->arg.name, "r_mul");
        tp_value out;
        CHECK_OK(call1(q, 1, SZ(3), (float[]){1, 2, 3}, &out));
        CHECK(tensor_equals(out_tensor(&out, 0), (float[]){3, 6, 9}, 3));
        tp_value_clear(&out);
        tp_tensor *stats = NULL;
        CHECK_OK(tp_program_get_state(q, "stats", &stats, NULL, NULL));
        CHECK(tensor_equals(stats, (float[]){2, 3, 4}, 3));
    }
    tp_program_free(q);
    tp_program_free(p);
}

static tp_status transform_op(void *ctx) {
    tp_program *p = ctx;
    tp_pass passes[] = {{"tokens", tp_pass_remove_effect_tokens, NULL},
                        {"fold", tp_pass_constant_fold, NULL},
                        {"rename", rename_pass, NULL}};
    tp_program *q = NULL;
    tp_status st = tp_program_transform(p, passes, 3, &q);
    tp_program_free(q);
    return st;
}

TEST(test_transform_alloc_failures) {
    tp_program *p = make_tokens();
    check_alloc_failures("transform tokens", transform_op, p);
    tp_program_free(p);
    p = make_foldable();
    check_alloc_failures("transform fold", transform_op, p);
    tp_program_free(p);
}

TEST_MAIN(T(test_transform_unchanged_returns_same_program), T(test_transform_rename_resyncs_signature),
          T(test_transform_swapped_names), T(test_transform_errors), T(test_dead_code), T(test_constant_fold_basic),
          T(test_constant_fold_output_leaf), T(test_constant_fold_skips_state_and_inputs),
          T(test_constant_fold_refusals), T(test_remove_effect_tokens), T(test_remove_effect_tokens_used_token),
          T(test_transform_pipeline), T(test_transform_alloc_failures))
