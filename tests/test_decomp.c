/*
 * test_decomp.c - decomposition tables and tp_program_run_decompositions:
 * every default rewrite (and the opt-in softmax ones) is checked by running
 * a small program before and after decomposition (the original op's kernel
 * is the reference) and by checking that no op with a table entry is left;
 * plus table operations, declining and failing rewrites, the fixpoint and
 * its round limit, signature renaming, programs with parameters and an MLP.
 *
 * Tolerances: float32 rtol 1e-5 (gelu and softmax add atol 1e-6: 1 +
 * erf(x / sqrt 2) cancels for negative x, log_softmax's (x - max) -
 * log(sum) next to 0); float64 rtol 1e-9; float16 about two ulps.
 */
#include "test_util.h"
#include "fail_alloc.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- tensors -------------------------------------------------------------------- */

/* A tensor of `dtype` from float64 values (converted with PyTorch's rules). */
static tp_tensor *tensor_of(tp_dtype dtype, int ndim, const int64_t *sizes, const double *data) {
    tp_tensor *f = NULL, *t = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT64, ndim, sizes, data, &f));
    if (f) CHECK_OK(tp_tensor_to(f, dtype, &t));
    tp_tensor_free(f);
    return t;
}

#define T2(dtype, r, c, ...) tensor_of((dtype), 2, (int64_t[]){(r), (c)}, (const double[]){__VA_ARGS__})
#define T1(dtype, n, ...) tensor_of((dtype), 1, (int64_t[]){(n)}, (const double[]){__VA_ARGS__})

/* A [3, 4] float tensor with negative, tiny and large values. */
static tp_tensor *activation_input(tp_dtype dtype) {
    return T2(dtype, 3, 4, -30, -8, -3.5, -1, -0.25, -1e-4, 0, 1e-4, 0.5, 2, 7.5, 25);
}

/* ---- building one-op programs ------------------------------------------------------ */

#define MAX_INPUTS 8

typedef struct prog_builder {
    tp_graph *g;
    int n;
    const char *names[MAX_INPUTS];
    const char *targets[MAX_INPUTS]; /* NULL: user input; else a parameter target */
    tp_tensor *values[MAX_INPUTS];   /* owned until finish */
} prog_builder;

static void pb_init(prog_builder *b) {
    memset(b, 0, sizeof *b);
    CHECK_OK(tp_graph_new(&b->g));
}

static tp_node *pb_placeholder(prog_builder *b, const char *name, const char *target, tp_tensor *value) {
    tp_tensor *m = NULL;
    tp_node *n = NULL;
    if (!value || b->n >= MAX_INPUTS) {
        CHECK(!"bad placeholder");
        tp_tensor_free(value);
        return NULL;
    }
    CHECK_OK(tp_tensor_meta(tp_tensor_dtype(value), tp_tensor_ndim(value), tp_tensor_sizes(value), &m));
    tp_value mv = tp_value_tensor(m);
    CHECK_OK(tp_graph_placeholder(b->g, name, &mv, &n));
    tp_value_clear(&mv);
    b->names[b->n] = name;
    b->targets[b->n] = target;
    b->values[b->n] = value;
    b->n++;
    return n;
}

/* A user input whose example value is `value` (reference taken). */
static tp_node *pb_input(prog_builder *b, const char *name, tp_tensor *value) {
    return pb_placeholder(b, name, NULL, value);
}

/* A parameter placeholder with state `value` under `target`. */
static tp_node *pb_param(prog_builder *b, const char *name, const char *target, tp_tensor *value) {
    return pb_placeholder(b, name, target, value);
}

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

#define VALS(...) (int)(sizeof((const tp_value[]){__VA_ARGS__}) / sizeof(tp_value)), (const tp_value[]){__VA_ARGS__}
#define CALL(g, op, ...) call_kw((g), (op), VALS(__VA_ARGS__), NULL)
#define N(node) tp_value_node(node)
#define F(x) tp_value_float(x)
#define I(x) tp_value_int(x)
#define B(x) tp_value_bool(x)

/* A one-entry kwargs dict. */
static tp_value kw1(const char *key, tp_value v) {
    tp_value d;
    CHECK_OK(tp_value_dict(&d));
    CHECK_OK(tp_value_dict_set(&d, key, &v));
    return d;
}

static tp_value kw_str(const char *key, const char *s) {
    tp_value v;
    CHECK_OK(tp_value_str(s, &v));
    return kw1(key, v);
}

/* Output the given nodes (a tuple; a leaf out_spec for one), build the
 * signature from the placeholders and the outputs' names, attach state and
 * example inputs, validate. */
static tp_program *pb_finish_n(prog_builder *b, int n_out, tp_node *const *outs) {
    tp_value t;
    CHECK_OK(tp_value_tuple(n_out, &t));
    for (int i = 0; i < n_out; i++) t.u.seq.items[i] = tp_value_node(outs[i]);
    CHECK_OK(tp_graph_output(b->g, &t, NULL));
    tp_value_clear(&t);
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    for (int i = 0; i < b->n; i++)
        CHECK_OK(tp_signature_add_input(s, b->targets[i] ? TP_INPUT_PARAMETER : TP_INPUT_USER_INPUT,
                                        tp_arg_tensor(b->names[i]), b->targets[i], TP_PERSISTENT_UNSET));
    for (int i = 0; i < n_out; i++)
        CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(outs[i])), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(b->g, s, &p));
    for (int i = 0; i < b->n; i++) {
        if (p && b->targets[i]) {
            CHECK_OK(tp_program_set_state(p, b->targets[i], TP_STATE_PARAMETER, b->values[i], true));
        } else if (p) {
            tp_value v = tp_value_tensor(tp_tensor_retain(b->values[i]));
            CHECK_OK(tp_program_set_example_input(p, b->names[i], &v));
            tp_value_clear(&v);
        }
        tp_tensor_free(b->values[i]);
    }
    if (p && n_out == 1) {
        tp_treespec *leaf = NULL;
        CHECK_OK(tp_treespec_leaf(&leaf));
        CHECK_OK(tp_program_set_out_spec(p, leaf));
        tp_treespec_free(leaf);
    }
    if (p) CHECK_OK(tp_program_validate(p));
    return p;
}

static tp_program *pb_finish(prog_builder *b, tp_node *out) { return pb_finish_n(b, 1, &out); }

/* A program computing op(x, extra...) with kwargs (may be NULL; cleared). */
static tp_program *unary_program(tp_op op, tp_tensor *x, int n_extra, const tp_value *extra, tp_value *kwargs) {
    prog_builder b;
    pb_init(&b);
    tp_value vals[8];
    vals[0] = tp_value_node(pb_input(&b, "x", x));
    for (int i = 0; i < n_extra && i < 7; i++) vals[1 + i] = extra[i];
    tp_node *n = call_kw(b.g, op, 1 + n_extra, vals, kwargs);
    if (kwargs) tp_value_clear(kwargs);
    return pb_finish(&b, n);
}

/* ---- checking ---------------------------------------------------------------------- */

static bool graph_has_op(const tp_program *p, tp_op op) {
    for (tp_node *n = tp_graph_first_node(tp_program_graph(p)); n; n = tp_node_next(n))
        if ((tp_node_get_kind(n) == TP_NODE_CALL_FUNCTION || tp_node_get_kind(n) == TP_NODE_CALL_METHOD) &&
            tp_node_op(n) == op)
            return true;
    return false;
}

/* Some node's op has an entry in t. */
static const char *graph_has_table_op(const tp_program *p, const tp_decomp_table *t) {
    for (tp_node *n = tp_graph_first_node(tp_program_graph(p)); n; n = tp_node_next(n))
        if ((tp_node_get_kind(n) == TP_NODE_CALL_FUNCTION || tp_node_get_kind(n) == TP_NODE_CALL_METHOD) &&
            tp_decomp_table_has(t, tp_node_op(n)))
            return tp_node_name(n);
    return NULL;
}

static void print_program(const char *what, const tp_program *p) {
    fprintf(stderr, "  %s:\n", what);
    tp_program_print(p, stderr);
}

/* Each user output of p and of d agree within (rtol, atol) and have the same dtype. */
static void check_same_outputs(tp_program *p, tp_program *d, double rtol, double atol) {
    tp_value before = tp_value_none(), after = tp_value_none();
    CHECK_OK(tp_program_call(p, NULL, 0, NULL, &before));
    CHECK_OK(tp_program_call(d, NULL, 0, NULL, &after));
    int64_t n = before.kind == TP_VAL_TENSOR ? 1 : tp_value_len(&before);
    CHECK(after.kind == before.kind && (after.kind == TP_VAL_TENSOR || tp_value_len(&after) == n));
    for (int64_t i = 0; i < n && after.kind == before.kind; i++) {
        const tp_value *a = before.kind == TP_VAL_TENSOR ? &before : tp_value_at(&before, i);
        const tp_value *b = after.kind == TP_VAL_TENSOR ? &after : tp_value_at(&after, i);
        if (!a || !b || a->kind != TP_VAL_TENSOR || b->kind != TP_VAL_TENSOR) {
            CHECK(!"outputs are not tensors");
            continue;
        }
        CHECK_MSG(tp_tensor_dtype(a->u.tensor) == tp_tensor_dtype(b->u.tensor), "dtype %s became %s",
                  tp_dtype_name(tp_tensor_dtype(a->u.tensor)), tp_dtype_name(tp_tensor_dtype(b->u.tensor)));
        int failed = tp_test_current_failed;
        CHECK_CLOSE(b->u.tensor, a->u.tensor, rtol, atol);
        if (failed != tp_test_current_failed) {
            tp_tensor_print(a->u.tensor, stderr, 64);
            fputc('\n', stderr);
            tp_tensor_print(b->u.tensor, stderr, 64);
            fputc('\n', stderr);
            print_program("decomposed", d);
        }
    }
    tp_value_clear(&before);
    tp_value_clear(&after);
}

/* Decompose p (takes it over) with the default table (plus softmax), check
 * numerics and that no op with an entry is left, and that `op` is gone. */
static void check_lowered_tol(tp_program *p, tp_op op, bool softmax, double rtol, double atol) {
    if (!p) return;
    tp_decomp_table *t = NULL;
    CHECK_OK(tp_decomp_table_default(&t));
    if (softmax) CHECK_OK(tp_decomp_table_add_softmax(t));
    CHECK(graph_has_op(p, op));
    tp_program *d = NULL;
    CHECK_OK(tp_program_run_decompositions(p, t, &d));
    if (d) {
        CHECK_OK(tp_program_validate(d));
        CHECK_MSG(!graph_has_op(d, op), "%s is still in the graph", tp_op_name(op));
        const char *left = graph_has_table_op(d, t);
        CHECK_MSG(left == NULL, "node %s still has a decomposition", left ? left : "");
        if (left || graph_has_op(d, op)) print_program("decomposed", d);
        check_same_outputs(p, d, rtol, atol);
        /* the original is untouched */
        CHECK(graph_has_op(p, op));
    }
    tp_program_free(d);
    tp_program_free(p);
    tp_decomp_table_free(t);
}

static void check_lowered(tp_program *p, tp_op op) { check_lowered_tol(p, op, false, 1e-5, 0); }
/* gelu: 1 + erf(x / sqrt 2) cancels for negative x (as in PyTorch's own
 * decomposition), so results next to zero need an absolute tolerance. */
static void check_lowered_gelu(tp_program *p, tp_op op) { check_lowered_tol(p, op, false, 1e-5, 1e-6); }
static void check_lowered_f64(tp_program *p, tp_op op) { check_lowered_tol(p, op, false, 1e-9, 1e-14); }
static void check_lowered_f16(tp_program *p, tp_op op) { check_lowered_tol(p, op, false, 2e-3, 0); }

/* Decompose p (takes it over): the node of op `op` must stay and the
 * program stay valid with the same outputs. */
static void check_kept(tp_program *p, tp_op op, const tp_decomp_table *table) {
    if (!p) return;
    tp_program *d = NULL;
    CHECK_OK(tp_program_run_decompositions(p, table, &d));
    if (d) {
        CHECK_MSG(graph_has_op(d, op), "%s was decomposed", tp_op_name(op));
        CHECK_OK(tp_program_validate(d));
    }
    tp_program_free(d);
    tp_program_free(p);
}

/* ---- activations ---------------------------------------------------------------- */

TEST(test_sigmoid) {
    check_lowered(unary_program(TP_OP_SIGMOID, activation_input(TP_FLOAT32), 0, NULL, NULL), TP_OP_SIGMOID);
    check_lowered_f64(unary_program(TP_OP_SIGMOID, activation_input(TP_FLOAT64), 0, NULL, NULL), TP_OP_SIGMOID);
    check_lowered_f16(unary_program(TP_OP_SIGMOID, activation_input(TP_FLOAT16), 0, NULL, NULL), TP_OP_SIGMOID);
    /* integer and bool inputs give float32 */
    check_lowered(unary_program(TP_OP_SIGMOID, T1(TP_INT64, 5, -40, -2, 0, 3, 100), 0, NULL, NULL), TP_OP_SIGMOID);
    check_lowered(unary_program(TP_OP_SIGMOID, T1(TP_BOOL, 2, 0, 1), 0, NULL, NULL), TP_OP_SIGMOID);
}

TEST(test_silu_mish) {
    check_lowered(unary_program(TP_OP_SILU, activation_input(TP_FLOAT32), 0, NULL, NULL), TP_OP_SILU);
    check_lowered_f64(unary_program(TP_OP_SILU, activation_input(TP_FLOAT64), 0, NULL, NULL), TP_OP_SILU);
    check_lowered_f16(unary_program(TP_OP_SILU, activation_input(TP_FLOAT16), 0, NULL, NULL), TP_OP_SILU);
    /* bfloat16: computed in float32, within one bfloat16 ulp */
    check_lowered_tol(unary_program(TP_OP_SILU, activation_input(TP_BFLOAT16), 0, NULL, NULL), TP_OP_SILU, false,
                      8e-3, 0);
    check_lowered(unary_program(TP_OP_MISH, activation_input(TP_FLOAT32), 0, NULL, NULL), TP_OP_MISH);
    check_lowered_f64(unary_program(TP_OP_MISH, activation_input(TP_FLOAT64), 0, NULL, NULL), TP_OP_MISH);
}

TEST(test_softplus) {
    check_lowered(unary_program(TP_OP_SOFTPLUS, activation_input(TP_FLOAT32), 0, NULL, NULL), TP_OP_SOFTPLUS);
    /* beta and threshold, around the threshold (x * beta = 5 at 2.5) */
    tp_tensor *x = T1(TP_FLOAT32, 8, -12, -3, -0.1, 0, 2.4, 2.5, 2.6, 40);
    check_lowered(unary_program(TP_OP_SOFTPLUS, x, 2, (tp_value[]){F(2.0), I(5)}, NULL), TP_OP_SOFTPLUS);
    x = T1(TP_FLOAT64, 6, -50, -3, 0, 0.3, 10, 21);
    tp_value kw = kw1("beta", F(0.5));
    check_lowered_f64(unary_program(TP_OP_SOFTPLUS, x, 0, NULL, &kw), TP_OP_SOFTPLUS);
}

TEST(test_gelu) {
    check_lowered_gelu(unary_program(TP_OP_GELU, activation_input(TP_FLOAT32), 0, NULL, NULL), TP_OP_GELU);
    check_lowered_f64(unary_program(TP_OP_GELU, activation_input(TP_FLOAT64), 0, NULL, NULL), TP_OP_GELU);
    tp_value kw = kw_str("approximate", "tanh");
    check_lowered_gelu(unary_program(TP_OP_GELU, activation_input(TP_FLOAT32), 0, NULL, &kw), TP_OP_GELU);
    kw = kw_str("approximate", "none");
    check_lowered_f16(unary_program(TP_OP_GELU, activation_input(TP_FLOAT16), 0, NULL, &kw), TP_OP_GELU);
    /* a non-contiguous input: the transpose of a [4, 3] tensor */
    tp_tensor *base = T2(TP_FLOAT32, 4, 3, -4, -2, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3, 4, 6), *xt = NULL;
    CHECK_OK(tp_tensor_transpose(base, 0, 1, &xt));
    tp_tensor_free(base);
    CHECK(xt && !tp_tensor_is_contiguous(xt));
    kw = kw_str("approximate", "tanh");
    check_lowered_gelu(unary_program(TP_OP_GELU, xt, 0, NULL, &kw), TP_OP_GELU);
}

TEST(test_elu_selu) {
    check_lowered(unary_program(TP_OP_ELU, activation_input(TP_FLOAT32), 0, NULL, NULL), TP_OP_ELU);
    check_lowered(unary_program(TP_OP_ELU, activation_input(TP_FLOAT32), 3, (tp_value[]){F(0.5), I(2), F(1.5)}, NULL),
                  TP_OP_ELU);
    check_lowered_f64(unary_program(TP_OP_ELU, activation_input(TP_FLOAT64), 1, (tp_value[]){F(1.7)}, NULL),
                      TP_OP_ELU);
    check_lowered(unary_program(TP_OP_SELU, activation_input(TP_FLOAT32), 0, NULL, NULL), TP_OP_SELU);
    check_lowered_f16(unary_program(TP_OP_SELU, activation_input(TP_FLOAT16), 0, NULL, NULL), TP_OP_SELU);
}

TEST(test_leaky_relu_relu6_hardtanh) {
    check_lowered(unary_program(TP_OP_LEAKY_RELU, activation_input(TP_FLOAT32), 0, NULL, NULL), TP_OP_LEAKY_RELU);
    check_lowered(unary_program(TP_OP_LEAKY_RELU, activation_input(TP_FLOAT32), 1, (tp_value[]){F(0.2)}, NULL),
                  TP_OP_LEAKY_RELU);
    check_lowered(unary_program(TP_OP_RELU6, activation_input(TP_FLOAT32), 0, NULL, NULL), TP_OP_RELU6);
    check_lowered(unary_program(TP_OP_RELU6, T1(TP_INT32, 5, -7, 0, 3, 6, 9), 0, NULL, NULL), TP_OP_RELU6);
    check_lowered(unary_program(TP_OP_RELU6, T1(TP_UINT8, 4, 0, 5, 7, 200), 0, NULL, NULL), TP_OP_RELU6);
    check_lowered(unary_program(TP_OP_HARDTANH, activation_input(TP_FLOAT32), 0, NULL, NULL), TP_OP_HARDTANH);
    check_lowered(unary_program(TP_OP_HARDTANH, activation_input(TP_FLOAT32), 2, (tp_value[]){F(-2.5), I(3)}, NULL),
                  TP_OP_HARDTANH);
    /* integer input: the limits are truncated, the dtype kept */
    check_lowered(unary_program(TP_OP_HARDTANH, T1(TP_INT64, 6, -9, -2, -1, 0, 2, 3), 2,
                                (tp_value[]){F(-1.5), F(2.5)}, NULL),
                  TP_OP_HARDTANH);
    /* NaN propagates */
    check_lowered(unary_program(TP_OP_HARDTANH, T1(TP_FLOAT32, 3, NAN, -5, 0.5), 0, NULL, NULL), TP_OP_HARDTANH);
}

TEST(test_hardsigmoid_hardswish) {
    tp_tensor *x = T1(TP_FLOAT32, 10, -5, -3, -2.9999, -1, -1e-3, 0, 0.7, 2.9, 3, 8);
    check_lowered(unary_program(TP_OP_HARDSIGMOID, x, 0, NULL, NULL), TP_OP_HARDSIGMOID);
    check_lowered(unary_program(TP_OP_HARDSIGMOID, activation_input(TP_FLOAT32), 0, NULL, NULL), TP_OP_HARDSIGMOID);
    check_lowered_f16(unary_program(TP_OP_HARDSIGMOID, activation_input(TP_FLOAT16), 0, NULL, NULL),
                      TP_OP_HARDSIGMOID);
    x = T1(TP_FLOAT32, 10, -5, -3, -2.9999, -1, -1e-3, 0, 0.7, 2.9, 3, 8);
    check_lowered(unary_program(TP_OP_HARDSWISH, x, 0, NULL, NULL), TP_OP_HARDSWISH);
    check_lowered_f64(unary_program(TP_OP_HARDSWISH, activation_input(TP_FLOAT64), 0, NULL, NULL), TP_OP_HARDSWISH);
}

TEST(test_clamp_scalar_bounds) {
    tp_tensor *x = T1(TP_FLOAT32, 7, -3, -1.5, -0.0, 0.25, 1, 2, NAN);
    check_lowered(unary_program(TP_OP_CLAMP, x, 2, (tp_value[]){F(-1), F(1.5)}, NULL), TP_OP_CLAMP);
    /* only min / only max (by keyword) */
    x = T1(TP_FLOAT32, 4, -3, -1, 1, 3);
    check_lowered(unary_program(TP_OP_CLAMP, x, 1, (tp_value[]){F(0.5)}, NULL), TP_OP_CLAMP);
    x = T1(TP_FLOAT32, 4, -3, -1, 1, 3);
    tp_value kw = kw1("max", F(-2));
    check_lowered(unary_program(TP_OP_CLAMP, x, 0, NULL, &kw), TP_OP_CLAMP);
    /* min > max gives max */
    x = T1(TP_FLOAT32, 4, -3, -1, 1, 3);
    check_lowered(unary_program(TP_OP_CLAMP, x, 2, (tp_value[]){F(2), F(1)}, NULL), TP_OP_CLAMP);
    /* integers: int bounds keep the dtype; a float bound promotes to float32 */
    x = T1(TP_INT32, 5, -100, -2, 0, 7, 100);
    check_lowered(unary_program(TP_OP_CLAMP, x, 2, (tp_value[]){I(-3), I(8)}, NULL), TP_OP_CLAMP);
    x = T1(TP_INT64, 5, -100, -2, 0, 7, 100);
    check_lowered(unary_program(TP_OP_CLAMP, x, 2, (tp_value[]){F(-2.5), I(8)}, NULL), TP_OP_CLAMP);
    x = T1(TP_UINT8, 4, 0, 3, 9, 250);
    check_lowered(unary_program(TP_OP_CLAMP, x, 2, (tp_value[]){I(2), I(200)}, NULL), TP_OP_CLAMP);
    /* float16 */
    check_lowered_f16(unary_program(TP_OP_CLAMP, activation_input(TP_FLOAT16), 2, (tp_value[]){F(-0.3), F(2.2)}, NULL),
                      TP_OP_CLAMP);
}

TEST(test_clamp_tensor_bounds) {
    /* x [2, 3]; min [3] (broadcast), max [2, 1]; NaN in a bound propagates */
    prog_builder b;
    pb_init(&b);
    tp_node *x = pb_input(&b, "x", T2(TP_FLOAT32, 2, 3, -5, 0.5, 9, -1, 2, 7));
    tp_node *lo = pb_input(&b, "lo", T1(TP_FLOAT32, 3, -2, 0, NAN));
    tp_node *hi = pb_input(&b, "hi", T2(TP_FLOAT32, 2, 1, 4, 1));
    check_lowered(pb_finish(&b, CALL(b.g, TP_OP_CLAMP, N(x), N(lo), N(hi))), TP_OP_CLAMP);
    /* tensor min with a number max; an int tensor clamped by a float tensor */
    pb_init(&b);
    x = pb_input(&b, "x", T1(TP_INT64, 4, -5, 0, 3, 10));
    lo = pb_input(&b, "lo", T1(TP_FLOAT64, 4, -1.5, 0.5, 3.5, 0));
    check_lowered(pb_finish(&b, CALL(b.g, TP_OP_CLAMP, N(x), N(lo), I(6))), TP_OP_CLAMP);
}

TEST(test_clamp_declines) {
    /* a NaN number bound (clamp gives NaN everywhere) and a negative bound
     * on a uint8 tensor are left to the op */
    check_kept(unary_program(TP_OP_CLAMP, T1(TP_FLOAT32, 2, 1, 2), 2, (tp_value[]){F(NAN), F(1)}, NULL), TP_OP_CLAMP,
               NULL);
    check_kept(unary_program(TP_OP_CLAMP, T1(TP_UINT8, 2, 1, 2), 1, (tp_value[]){I(-1)}, NULL), TP_OP_CLAMP, NULL);
}

/* ---- elementwise math ------------------------------------------------------------ */

TEST(test_log1p) {
    tp_tensor *x =
        T2(TP_FLOAT32, 3, 5, -1, -0.999, -0.5, -1e-3, -1e-7, -0.0, 0, 1e-9, 1e-5, 0.3, 1, 50, 1e6, 3e30, INFINITY);
    check_lowered(unary_program(TP_OP_LOG1P, x, 0, NULL, NULL), TP_OP_LOG1P);
    x = T2(TP_FLOAT64, 3, 5, -1, -0.999, -0.5, -1e-3, -1e-7, -0.0, 0, 1e-9, 1e-17, 0.3, 1, 50, 1e6, 3e300, NAN);
    check_lowered_f64(unary_program(TP_OP_LOG1P, x, 0, NULL, NULL), TP_OP_LOG1P);
    check_lowered_f16(unary_program(TP_OP_LOG1P, T1(TP_FLOAT16, 5, -0.5, -1e-3, 0, 1e-3, 100), 0, NULL, NULL),
                      TP_OP_LOG1P);
    /* below -1: NaN; int input: float32 */
    check_lowered(unary_program(TP_OP_LOG1P, T1(TP_FLOAT32, 2, -2, -INFINITY), 0, NULL, NULL), TP_OP_LOG1P);
    check_lowered(unary_program(TP_OP_LOG1P, T1(TP_INT32, 4, -1, 0, 1, 1000000), 0, NULL, NULL), TP_OP_LOG1P);
}

TEST(test_expm1) {
    tp_tensor *x =
        T2(TP_FLOAT32, 3, 5, -INFINITY, -120, -20, -1, -1e-3, -1e-9, -0.0, 0, 1e-7, 1e-4, 0.5, 10, 88, 89, INFINITY);
    check_lowered(unary_program(TP_OP_EXPM1, x, 0, NULL, NULL), TP_OP_EXPM1);
    x = T2(TP_FLOAT64, 2, 5, -800, -40, -1, -1e-12, 0, 1e-17, 1e-6, 3, 700, 710);
    check_lowered_f64(unary_program(TP_OP_EXPM1, x, 0, NULL, NULL), TP_OP_EXPM1);
    check_lowered(unary_program(TP_OP_EXPM1, T1(TP_INT8, 4, -100, 0, 1, 20), 0, NULL, NULL), TP_OP_EXPM1);
    check_lowered_f16(unary_program(TP_OP_EXPM1, T1(TP_FLOAT16, 5, -10, -1e-3, 0, 1e-3, 10), 0, NULL, NULL),
                      TP_OP_EXPM1);
}

TEST(test_reciprocal_square) {
    check_lowered(unary_program(TP_OP_RECIPROCAL, T1(TP_FLOAT32, 6, -3, -1e-30, -0.0, 0, 0.1, 7), 0, NULL, NULL),
                  TP_OP_RECIPROCAL);
    check_lowered(unary_program(TP_OP_RECIPROCAL, T1(TP_INT64, 4, -2, 0, 1, 3), 0, NULL, NULL), TP_OP_RECIPROCAL);
    check_lowered_f16(unary_program(TP_OP_RECIPROCAL, T1(TP_FLOAT16, 3, -3, 0.1, 7), 0, NULL, NULL), TP_OP_RECIPROCAL);
    check_lowered(unary_program(TP_OP_SQUARE, activation_input(TP_FLOAT32), 0, NULL, NULL), TP_OP_SQUARE);
    check_lowered(unary_program(TP_OP_SQUARE, T1(TP_INT32, 4, -46341, -3, 0, 5), 0, NULL, NULL), TP_OP_SQUARE);
    check_lowered(unary_program(TP_OP_SQUARE, T1(TP_BOOL, 2, 0, 1), 0, NULL, NULL), TP_OP_SQUARE);
}

TEST(test_lerp) {
    /* number weights on both sides of 0.5 */
    double weights[] = {0.3, 0.5, 0.75, -1.5, 2.0};
    for (size_t i = 0; i < ARRAY_LEN(weights); i++) {
        prog_builder b;
        pb_init(&b);
        tp_node *s = pb_input(&b, "s", T2(TP_FLOAT32, 2, 3, -1, 0, 2, 5, 1e3, -7));
        tp_node *e = pb_input(&b, "e", T1(TP_FLOAT32, 3, 4, -2, 2.5));
        check_lowered(pb_finish(&b, CALL(b.g, TP_OP_LERP, N(s), N(e), F(weights[i]))), TP_OP_LERP);
    }
    /* a tensor weight (broadcast) */
    prog_builder b;
    pb_init(&b);
    tp_node *s = pb_input(&b, "s", T2(TP_FLOAT64, 2, 3, -1, 0, 2, 5, 1e3, -7));
    tp_node *e = pb_input(&b, "e", T2(TP_FLOAT64, 2, 3, 4, -2, 2.5, 5, -1e3, 8));
    tp_node *w = pb_input(&b, "w", T2(TP_FLOAT64, 2, 1, 0.25, 0.9));
    check_lowered_f64(pb_finish(&b, CALL(b.g, TP_OP_LERP, N(s), N(e), N(w))), TP_OP_LERP);
    pb_init(&b);
    s = pb_input(&b, "s", T1(TP_FLOAT16, 4, -1, 0, 2, 5));
    e = pb_input(&b, "e", T1(TP_FLOAT16, 4, 4, -2, 2.5, 6));
    w = pb_input(&b, "w", T1(TP_FLOAT16, 4, 0, 0.4, 0.6, 1));
    check_lowered_f16(pb_finish(&b, CALL(b.g, TP_OP_LERP, N(s), N(e), N(w))), TP_OP_LERP);
}

TEST(test_addcmul_addcdiv) {
    static const tp_op ops[] = {TP_OP_ADDCMUL, TP_OP_ADDCDIV};
    for (int k = 0; k < 2; k++) {
        /* default value, broadcasting */
        prog_builder b;
        pb_init(&b);
        tp_node *s = pb_input(&b, "s", T2(TP_FLOAT32, 2, 3, 1, -2, 3, 0.5, 0, -1));
        tp_node *t1 = pb_input(&b, "t1", T1(TP_FLOAT32, 3, 2, -3, 0.25));
        tp_node *t2 = pb_input(&b, "t2", T2(TP_FLOAT32, 2, 1, 4, -0.5));
        check_lowered(pb_finish(&b, CALL(b.g, ops[k], N(s), N(t1), N(t2))), ops[k]);
        /* value=, mixed dtypes (float32 self, float64 tensors) */
        pb_init(&b);
        s = pb_input(&b, "s", T1(TP_FLOAT32, 3, 1, -2, 3));
        t1 = pb_input(&b, "t1", T1(TP_FLOAT64, 3, 2, -3, 0.25));
        t2 = pb_input(&b, "t2", T1(TP_FLOAT64, 3, 7, 0.5, -8));
        tp_value kw = kw1("value", F(-1.5));
        tp_node *n = call_kw(b.g, ops[k], VALS(N(s), N(t1), N(t2)), &kw);
        tp_value_clear(&kw);
        check_lowered(pb_finish(&b, n), ops[k]);
    }
    /* integer addcmul with an integer value */
    prog_builder b;
    pb_init(&b);
    tp_node *s = pb_input(&b, "s", T1(TP_INT64, 3, 1, -2, 3));
    tp_node *t1 = pb_input(&b, "t1", T1(TP_INT64, 3, 2, -3, 5));
    tp_node *t2 = pb_input(&b, "t2", T1(TP_INT64, 3, 7, 4, -8));
    tp_value kw = kw1("value", I(3));
    tp_node *n = call_kw(b.g, TP_OP_ADDCMUL, VALS(N(s), N(t1), N(t2)), &kw);
    tp_value_clear(&kw);
    check_lowered(pb_finish(&b, n), TP_OP_ADDCMUL);
}

/* ---- linear algebra ---------------------------------------------------------------- */

TEST(test_linear) {
    /* with bias, weight as a parameter */
    prog_builder b;
    pb_init(&b);
    tp_node *w = pb_param(&b, "p_weight", "fc.weight", T2(TP_FLOAT32, 2, 3, 0.5, -1, 2, 3, 0.25, -0.75));
    tp_node *bias = pb_param(&b, "p_bias", "fc.bias", T1(TP_FLOAT32, 2, 0.1, -10));
    tp_node *x = pb_input(&b, "x", T2(TP_FLOAT32, 4, 3, 1, 2, 3, -1, 0, 1, 0.5, 0.5, -0.5, 7, -8, 9));
    check_lowered(pb_finish(&b, CALL(b.g, TP_OP_LINEAR, N(x), N(w), N(bias))), TP_OP_LINEAR);
    /* no bias, 3-D input */
    pb_init(&b);
    x = pb_input(&b, "x", tensor_of(TP_FLOAT64, 3, (int64_t[]){2, 2, 3},
                                    (const double[]){1, 2, 3, -1, 0, 1, 0.5, 0.5, -0.5, 7, -8, 9}));
    w = pb_input(&b, "w", T2(TP_FLOAT64, 2, 3, 0.5, -1, 2, 3, 0.25, -0.75));
    check_lowered_f64(pb_finish(&b, CALL(b.g, TP_OP_LINEAR, N(x), N(w))), TP_OP_LINEAR);
    /* 1-D weight, 1-D input (a dot product), with a 0-d bias */
    pb_init(&b);
    x = pb_input(&b, "x", T1(TP_FLOAT32, 3, 1, -2, 3));
    w = pb_input(&b, "w", T1(TP_FLOAT32, 3, 0.5, 4, -1));
    bias = pb_input(&b, "b", tensor_of(TP_FLOAT32, 0, NULL, (const double[]){2.5}));
    check_lowered(pb_finish(&b, CALL(b.g, TP_OP_LINEAR, N(x), N(w), N(bias))), TP_OP_LINEAR);
}

TEST(test_addmm) {
    /* defaults, a broadcast [3] self */
    prog_builder b;
    pb_init(&b);
    tp_node *s = pb_input(&b, "s", T1(TP_FLOAT32, 3, 1, -2, 0.5));
    tp_node *m1 = pb_input(&b, "m1", T2(TP_FLOAT32, 2, 2, 1, 2, -3, 4));
    tp_node *m2 = pb_input(&b, "m2", T2(TP_FLOAT32, 2, 3, 0.5, -1, 2, 3, 0.25, -0.75));
    check_lowered(pb_finish(&b, CALL(b.g, TP_OP_ADDMM, N(s), N(m1), N(m2))), TP_OP_ADDMM);
    /* beta and alpha */
    pb_init(&b);
    s = pb_input(&b, "s", T2(TP_FLOAT64, 2, 3, 1, -2, 0.5, 3, 3, 3));
    m1 = pb_input(&b, "m1", T2(TP_FLOAT64, 2, 2, 1, 2, -3, 4));
    m2 = pb_input(&b, "m2", T2(TP_FLOAT64, 2, 3, 0.5, -1, 2, 3, 0.25, -0.75));
    tp_value kw;
    CHECK_OK(tp_value_dict(&kw));
    tp_value v = F(0.5);
    CHECK_OK(tp_value_dict_set(&kw, "beta", &v));
    v = I(-2);
    CHECK_OK(tp_value_dict_set(&kw, "alpha", &v));
    tp_node *n = call_kw(b.g, TP_OP_ADDMM, VALS(N(s), N(m1), N(m2)), &kw);
    tp_value_clear(&kw);
    check_lowered_f64(pb_finish(&b, n), TP_OP_ADDMM);
    /* beta = 0: NaN in self does not propagate */
    pb_init(&b);
    s = pb_input(&b, "s", T1(TP_FLOAT32, 3, NAN, INFINITY, 1));
    m1 = pb_input(&b, "m1", T2(TP_FLOAT32, 2, 2, 1, 2, -3, 4));
    m2 = pb_input(&b, "m2", T2(TP_FLOAT32, 2, 3, 0.5, -1, 2, 3, 0.25, -0.75));
    kw = kw1("beta", I(0));
    n = call_kw(b.g, TP_OP_ADDMM, VALS(N(s), N(m1), N(m2)), &kw);
    tp_value_clear(&kw);
    check_lowered(pb_finish(&b, n), TP_OP_ADDMM);
    /* integers */
    pb_init(&b);
    s = pb_input(&b, "s", T1(TP_INT64, 2, 1, -2));
    m1 = pb_input(&b, "m1", T2(TP_INT64, 2, 2, 1, 2, -3, 4));
    m2 = pb_input(&b, "m2", T2(TP_INT64, 2, 2, 5, -1, 2, 3));
    kw = kw1("beta", I(3));
    n = call_kw(b.g, TP_OP_ADDMM, VALS(N(s), N(m1), N(m2)), &kw);
    tp_value_clear(&kw);
    check_lowered(pb_finish(&b, n), TP_OP_ADDMM);
}

/* ---- softmax -------------------------------------------------------------------------- */

TEST(test_softmax) {
    static const tp_op ops[] = {TP_OP_SOFTMAX, TP_OP_LOG_SOFTMAX};
    for (int k = 0; k < 2; k++) {
        /* float32: log_softmax's (x - m) - log(sum) cancels next to 0 */
        tp_tensor *x = T2(TP_FLOAT32, 3, 4, -30, -8, -3.5, -1, 1000, 1001, 999, 0, -INFINITY, 2, 7.5, 25);
        check_lowered_tol(unary_program(ops[k], x, 1, (tp_value[]){I(1)}, NULL), ops[k], true, 1e-5, 1e-6);
        check_lowered_tol(unary_program(ops[k], activation_input(TP_FLOAT32), 1, (tp_value[]){I(0)}, NULL), ops[k],
                          true, 1e-5, 1e-6);
        check_lowered_tol(unary_program(ops[k], activation_input(TP_FLOAT64), 1, (tp_value[]){I(-2)}, NULL), ops[k],
                          true, 1e-9, 1e-14);
        check_lowered_tol(unary_program(ops[k], activation_input(TP_FLOAT16), 1, (tp_value[]){I(-1)}, NULL), ops[k],
                          true, 2e-3, 0);
        /* dtype= converts the input first (int -> float32, float32 -> float64) */
        tp_value kw = kw1("dtype", tp_value_dtype(TP_FLOAT32));
        check_lowered_tol(unary_program(ops[k], T2(TP_INT64, 2, 3, 1, 2, 3, -4, 0, 4), 1, (tp_value[]){I(1)}, &kw),
                          ops[k], true, 1e-5, 1e-6);
        kw = kw1("dtype", tp_value_dtype(TP_FLOAT64));
        check_lowered_tol(unary_program(ops[k], activation_input(TP_FLOAT32), 1, (tp_value[]){I(1)}, &kw), ops[k],
                          true, 1e-9, 1e-14);
        /* not in the default table */
        check_kept(unary_program(ops[k], activation_input(TP_FLOAT32), 1, (tp_value[]){I(1)}, NULL), ops[k], NULL);
    }
}

/* ---- normalisation ----------------------------------------------------------------------- */

TEST(test_layer_norm) {
    /* over the last dim, no affine */
    tp_tensor *x = activation_input(TP_FLOAT32);
    check_lowered(unary_program(TP_OP_LAYER_NORM, x, 1, (tp_value[]){I(4)}, NULL), TP_OP_LAYER_NORM);
    /* over the last two dims with weight and bias, eps */
    prog_builder b;
    pb_init(&b);
    tp_node *xn = pb_input(&b, "x", tensor_of(TP_FLOAT32, 3, (int64_t[]){2, 2, 3},
                                             (const double[]){1, 2, 3, -1, 0, 1, 0.5, 0.5, -0.5, 7, -8, 9}));
    tp_node *w = pb_param(&b, "p_w", "ln.weight", T2(TP_FLOAT32, 2, 3, 1, 2, 0.5, -1, 3, 1));
    tp_node *bias = pb_param(&b, "p_b", "ln.bias", T2(TP_FLOAT32, 2, 3, 0, 1, -1, 2, 0, 0.5));
    tp_value shape;
    CHECK_OK(tp_value_int_list((int64_t[]){2, 3}, 2, &shape));
    tp_value kw = kw1("eps", F(1e-3));
    tp_node *n = call_kw(b.g, TP_OP_LAYER_NORM, VALS(N(xn), shape, N(w), N(bias)), &kw);
    tp_value_clear(&kw);
    tp_value_clear(&shape);
    check_lowered(pb_finish(&b, n), TP_OP_LAYER_NORM);
    /* float16 input with float32 parameters (mixed, as the op allows) */
    pb_init(&b);
    xn = pb_input(&b, "x", activation_input(TP_FLOAT16));
    w = pb_input(&b, "w", T1(TP_FLOAT32, 4, 1, 2, 0.5, -1));
    bias = pb_input(&b, "b", T1(TP_FLOAT32, 4, 0, 1, -1, 2));
    check_lowered_f16(pb_finish(&b, CALL(b.g, TP_OP_LAYER_NORM, N(xn), I(4), N(w), N(bias))), TP_OP_LAYER_NORM);
    /* float64 */
    check_lowered_f64(unary_program(TP_OP_LAYER_NORM, activation_input(TP_FLOAT64), 1, (tp_value[]){I(4)}, NULL),
                      TP_OP_LAYER_NORM);
}

static tp_program *batch_norm_program(tp_dtype dtype, int ndim, bool affine, bool training) {
    prog_builder b;
    pb_init(&b);
    int64_t sizes[4] = {2, 3, 2, 2};
    double data[24];
    for (int i = 0; i < 24; i++) data[i] = (double)((i * 7) % 11) - 4.5 + 0.25 * i;
    tp_node *x = pb_input(&b, "x", tensor_of(dtype, ndim, sizes, data));
    tp_node *rm = pb_input(&b, "rm", T1(dtype, 3, 0.5, -1, 2));
    tp_node *rv = pb_input(&b, "rv", T1(dtype, 3, 4, 0.25, 1));
    tp_value w = tp_value_none(), bias = tp_value_none();
    if (affine) {
        w = N(pb_input(&b, "w", T1(dtype, 3, 1.5, -1, 0.5)));
        bias = N(pb_input(&b, "bias", T1(dtype, 3, 0, 2, -3)));
    }
    tp_node *n = CALL(b.g, TP_OP_BATCH_NORM, N(x), N(rm), N(rv), w, bias, B(training), F(0.1), F(1e-3));
    return pb_finish(&b, n);
}

TEST(test_batch_norm) {
    check_lowered(batch_norm_program(TP_FLOAT32, 4, true, false), TP_OP_BATCH_NORM);
    check_lowered(batch_norm_program(TP_FLOAT32, 2, true, false), TP_OP_BATCH_NORM);
    check_lowered(batch_norm_program(TP_FLOAT32, 3, false, false), TP_OP_BATCH_NORM);
    check_lowered_f64(batch_norm_program(TP_FLOAT64, 4, true, false), TP_OP_BATCH_NORM);
    check_lowered_f16(batch_norm_program(TP_FLOAT16, 4, true, false), TP_OP_BATCH_NORM);
}

TEST(test_batch_norm_training_declines) {
    tp_program *p = batch_norm_program(TP_FLOAT32, 4, true, true);
    tp_program *d = NULL;
    CHECK_OK(tp_program_run_decompositions(p, NULL, &d));
    if (d) {
        CHECK(graph_has_op(d, TP_OP_BATCH_NORM));
        CHECK_OK(tp_program_validate(d));
        /* untouched: same graph text */
        char *a = NULL, *b = NULL;
        CHECK_OK(tp_program_to_string(p, &a));
        CHECK_OK(tp_program_to_string(d, &b));
        CHECK(a && b && strcmp(a, b) == 0);
        tp_free(a);
        tp_free(b);
    }
    tp_program_free(d);
    tp_program_free(p);
}

/* ---- reductions -------------------------------------------------------------------------- */

TEST(test_var_std) {
    static const tp_op ops[] = {TP_OP_VAR, TP_OP_STD};
    for (int k = 0; k < 2; k++) {
        /* all dims, default correction */
        check_lowered(unary_program(ops[k], activation_input(TP_FLOAT32), 0, NULL, NULL), ops[k]);
        /* dim [1] keepdim, correction 0 */
        tp_value dims;
        CHECK_OK(tp_value_int_list((int64_t[]){1}, 1, &dims));
        tp_value kw;
        CHECK_OK(tp_value_dict(&kw));
        tp_value v = I(0);
        CHECK_OK(tp_value_dict_set(&kw, "correction", &v));
        v = B(true);
        CHECK_OK(tp_value_dict_set(&kw, "keepdim", &v));
        check_lowered(unary_program(ops[k], activation_input(TP_FLOAT32), 1, &dims, &kw), ops[k]);
        /* dims [0, -1] of a 3-D float64 tensor, unbiased=False */
        kw = kw1("unbiased", B(false));
        tp_value_clear(&dims);
        CHECK_OK(tp_value_int_list((int64_t[]){0, -1}, 2, &dims));
        tp_tensor *x = tensor_of(TP_FLOAT64, 3, (int64_t[]){2, 2, 3},
                                 (const double[]){1, 2, 3, -1, 0, 1, 0.5, 0.5, -0.5, 7, -8, 9});
        check_lowered_f64(unary_program(ops[k], x, 1, &dims, &kw), ops[k]);
        /* correction 2.5 on dim 0 (3 elements: divisor 0.5); correction larger
         * than the count divides by 0 */
        tp_value_clear(&dims);
        CHECK_OK(tp_value_int_list((int64_t[]){0}, 1, &dims));
        kw = kw1("correction", F(2.5));
        check_lowered(unary_program(ops[k], activation_input(TP_FLOAT32), 1, &dims, &kw), ops[k]);
        kw = kw1("correction", I(5));
        check_lowered(unary_program(ops[k], activation_input(TP_FLOAT32), 1, &dims, &kw), ops[k]);
        /* float16 */
        check_lowered_f16(unary_program(ops[k], activation_input(TP_FLOAT16), 1, &dims, NULL), ops[k]);
        tp_value_clear(&dims);
    }
}

/* ---- dropout ------------------------------------------------------------------------------ */

TEST(test_dropout) {
    /* train=False: identity; the output is the input placeholder */
    tp_program *p = unary_program(TP_OP_DROPOUT, activation_input(TP_FLOAT32), 2, (tp_value[]){F(0.5), B(false)}, NULL);
    tp_program *d = NULL;
    CHECK_OK(tp_program_run_decompositions(p, NULL, &d));
    if (d) {
        CHECK(!graph_has_op(d, TP_OP_DROPOUT));
        CHECK(tp_graph_num_nodes(tp_program_graph(d)) == 2); /* x, output */
        const tp_output_spec *o = tp_signature_output(tp_program_signature(d), 0);
        CHECK(o && strcmp(o->arg.name, "x") == 0);
        check_same_outputs(p, d, 0, 0);
    }
    tp_program_free(d);
    tp_program_free(p);
    /* defaults (train=False); p=0 with train=True is the identity too */
    check_lowered(unary_program(TP_OP_DROPOUT, activation_input(TP_FLOAT32), 0, NULL, NULL), TP_OP_DROPOUT);
    check_lowered(unary_program(TP_OP_DROPOUT, activation_input(TP_FLOAT32), 2, (tp_value[]){F(0), B(true)}, NULL),
                  TP_OP_DROPOUT);
    /* train=True draws random numbers: declined */
    check_kept(unary_program(TP_OP_DROPOUT, activation_input(TP_FLOAT32), 2, (tp_value[]){F(0.5), B(true)}, NULL),
               TP_OP_DROPOUT, NULL);
}

/* ---- tables -------------------------------------------------------------------------------- */

static int g_calls; /* calls of the counting rewrites below */

/* Declines (leaves *replacement None). */
static tp_status rewrite_decline(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    g_calls++;
    return TP_OK;
}

/* Fails with a message. */
static tp_status rewrite_fail(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    return tp_error(TP_ERR_UNSUPPORTED, "cannot rewrite this");
}

/* Returns the node itself. */
static tp_status rewrite_self(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    g_calls++;
    *replacement = tp_value_node(node);
    return TP_OK;
}

/* relu(x) -> clamp(x, 0): clamp has its own entry, decomposed a round later. */
static tp_status rewrite_relu_to_clamp(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    g_calls++;
    tp_value args;
    TP_TRY(tp_value_tuple(2, &args));
    TP_TRY(tp_value_copy(tp_value_at(tp_node_args(node), 0), &args.u.seq.items[0]));
    args.u.seq.items[1] = tp_value_int(0);
    tp_node *n = NULL;
    tp_status st = tp_graph_call_function(g, TP_OP_CLAMP, &args, NULL, &n);
    tp_value_clear(&args);
    if (st == TP_OK) *replacement = tp_value_node(n);
    return st;
}

/* relu(x) -> a new relu(x): never settles. */
static tp_status rewrite_relu_forever(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    g_calls++;
    tp_node *n = NULL;
    TP_TRY(tp_graph_call_function(g, TP_OP_RELU, tp_node_args(node), NULL, &n));
    *replacement = tp_value_node(n);
    return TP_OK;
}

/* relu(x) -> to(x, float64): the wrong dtype. */
static tp_status rewrite_wrong_dtype(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    tp_value args;
    TP_TRY(tp_value_tuple(2, &args));
    TP_TRY(tp_value_copy(tp_value_at(tp_node_args(node), 0), &args.u.seq.items[0]));
    args.u.seq.items[1] = tp_value_dtype(TP_FLOAT64);
    tp_node *n = NULL;
    tp_status st = tp_graph_call_function(g, TP_OP_TO, &args, NULL, &n);
    tp_value_clear(&args);
    if (st == TP_OK) *replacement = tp_value_node(n);
    return st;
}

/* Returns a constant instead of a node. */
static tp_status rewrite_constant(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    *replacement = tp_value_int(1);
    return TP_OK;
}

static tp_program *relu_program(void) {
    return unary_program(TP_OP_RELU, activation_input(TP_FLOAT32), 0, NULL, NULL);
}

TEST(test_table_operations) {
    tp_decomp_table *t = NULL, *c = NULL, *d = NULL;
    CHECK_OK(tp_decomp_table_new(&t));
    CHECK(!tp_decomp_table_has(t, TP_OP_GELU));
    CHECK_STATUS(tp_decomp_table_remove(t, TP_OP_GELU), TP_ERR_NOT_FOUND);
    CHECK_ERR_CONTAINS("gelu");
    CHECK_OK(tp_decomp_table_set(t, TP_OP_RELU, rewrite_decline, NULL));
    CHECK(tp_decomp_table_has(t, TP_OP_RELU));
    CHECK_STATUS(tp_decomp_table_set(t, TP_OP_RELU, NULL, NULL), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp_decomp_table_set(t, (tp_op)TP_OP_COUNT, rewrite_decline, NULL), TP_ERR_INVALID_ARG);
    CHECK(!tp_decomp_table_has(t, TP_OP_INVALID));
    /* a copy is independent of the original */
    CHECK_OK(tp_decomp_table_copy(t, &c));
    CHECK(c && tp_decomp_table_has(c, TP_OP_RELU));
    CHECK_OK(tp_decomp_table_remove(t, TP_OP_RELU));
    CHECK(!tp_decomp_table_has(t, TP_OP_RELU));
    CHECK(c && tp_decomp_table_has(c, TP_OP_RELU));
    CHECK_STATUS(tp_decomp_table_remove(t, TP_OP_RELU), TP_ERR_NOT_FOUND);
    /* the default table: a fresh copy each time; softmax is opt-in */
    CHECK_OK(tp_decomp_table_default(&d));
    static const tp_op expected[] = {
        TP_OP_SIGMOID,    TP_OP_SILU,       TP_OP_MISH,   TP_OP_SOFTPLUS,   TP_OP_GELU,    TP_OP_ELU,
        TP_OP_SELU,       TP_OP_LEAKY_RELU, TP_OP_RELU6,  TP_OP_HARDTANH,   TP_OP_HARDSIGMOID,
        TP_OP_HARDSWISH,  TP_OP_CLAMP,      TP_OP_LOG1P,  TP_OP_EXPM1,      TP_OP_RECIPROCAL,
        TP_OP_SQUARE,     TP_OP_LERP,       TP_OP_ADDCMUL, TP_OP_ADDCDIV,   TP_OP_LINEAR,  TP_OP_ADDMM,
        TP_OP_LAYER_NORM, TP_OP_BATCH_NORM, TP_OP_VAR,    TP_OP_STD,        TP_OP_DROPOUT};
    for (size_t i = 0; i < ARRAY_LEN(expected); i++)
        CHECK_MSG(d && tp_decomp_table_has(d, expected[i]), "default table lacks %s", tp_op_name(expected[i]));
    CHECK(d && !tp_decomp_table_has(d, TP_OP_SOFTMAX) && !tp_decomp_table_has(d, TP_OP_LOG_SOFTMAX));
    CHECK(d && !tp_decomp_table_has(d, TP_OP_RELU) && !tp_decomp_table_has(d, TP_OP_ADD));
    if (d) {
        CHECK_OK(tp_decomp_table_remove(d, TP_OP_GELU));
        tp_decomp_table *d2 = NULL;
        CHECK_OK(tp_decomp_table_default(&d2));
        CHECK(d2 && tp_decomp_table_has(d2, TP_OP_GELU));
        CHECK_OK(tp_decomp_table_add_softmax(d2));
        CHECK(d2 && tp_decomp_table_has(d2, TP_OP_SOFTMAX) && tp_decomp_table_has(d2, TP_OP_LOG_SOFTMAX));
        tp_decomp_table_free(d2);
    }
    tp_decomp_table_free(t);
    tp_decomp_table_free(c);
    tp_decomp_table_free(d);
    tp_decomp_table_free(NULL);
}

TEST(test_removed_entry_keeps_op) {
    /* silu without sigmoid's entry: x * sigmoid(x), sigmoid kept */
    tp_decomp_table *t = NULL;
    CHECK_OK(tp_decomp_table_default(&t));
    CHECK_OK(tp_decomp_table_remove(t, TP_OP_SIGMOID));
    tp_program *p = unary_program(TP_OP_SILU, activation_input(TP_FLOAT32), 0, NULL, NULL);
    tp_program *d = NULL;
    CHECK_OK(tp_program_run_decompositions(p, t, &d));
    if (d) {
        CHECK(!graph_has_op(d, TP_OP_SILU));
        CHECK(graph_has_op(d, TP_OP_SIGMOID));
        CHECK(!graph_has_op(d, TP_OP_RECIPROCAL));
        check_same_outputs(p, d, 1e-5, 0);
    }
    tp_program_free(d);
    tp_program_free(p);
    tp_decomp_table_free(t);
}

TEST(test_replace_entry) {
    /* replacing sigmoid's entry with a declining rewrite keeps sigmoid */
    tp_decomp_table *t = NULL;
    CHECK_OK(tp_decomp_table_default(&t));
    CHECK_OK(tp_decomp_table_set(t, TP_OP_SIGMOID, rewrite_decline, NULL));
    g_calls = 0;
    check_kept(unary_program(TP_OP_SIGMOID, activation_input(TP_FLOAT32), 0, NULL, NULL), TP_OP_SIGMOID, t);
    CHECK(g_calls == 1);
    tp_decomp_table_free(t);
}

TEST(test_declining_rewrite) {
    /* the node stays in place, untouched, and the program stays valid */
    tp_decomp_table *t = NULL;
    CHECK_OK(tp_decomp_table_new(&t));
    CHECK_OK(tp_decomp_table_set(t, TP_OP_RELU, rewrite_decline, NULL));
    tp_program *p = relu_program(), *d = NULL;
    g_calls = 0;
    CHECK_OK(tp_program_run_decompositions(p, t, &d));
    CHECK(g_calls == 1); /* one round: nothing changed */
    if (d) {
        char *a = NULL, *b = NULL;
        CHECK_OK(tp_program_to_string(p, &a));
        CHECK_OK(tp_program_to_string(d, &b));
        CHECK(a && b && strcmp(a, b) == 0);
        tp_free(a);
        tp_free(b);
        check_same_outputs(p, d, 0, 0);
    }
    tp_program_free(d);
    /* returning the node itself also leaves it */
    CHECK_OK(tp_decomp_table_set(t, TP_OP_RELU, rewrite_self, NULL));
    g_calls = 0;
    check_kept(p, TP_OP_RELU, t);
    CHECK(g_calls == 1);
    tp_decomp_table_free(t);
}

TEST(test_failing_rewrite) {
    tp_decomp_table *t = NULL;
    CHECK_OK(tp_decomp_table_new(&t));
    CHECK_OK(tp_decomp_table_set(t, TP_OP_RELU, rewrite_fail, NULL));
    tp_program *p = relu_program(), *d = NULL;
    CHECK_STATUS(tp_program_run_decompositions(p, t, &d), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("decomposing node relu (relu): cannot rewrite this");
    CHECK(d == NULL);
    /* a wrong dtype, a constant instead of a node */
    CHECK_OK(tp_decomp_table_set(t, TP_OP_RELU, rewrite_wrong_dtype, NULL));
    CHECK_STATUS(tp_program_run_decompositions(p, t, &d), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("decomposing node relu (relu): replacement to is float64[3, 4] but the node is float32[3, 4]");
    CHECK_OK(tp_decomp_table_set(t, TP_OP_RELU, rewrite_constant, NULL));
    CHECK_STATUS(tp_program_run_decompositions(p, t, &d), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("node relu (relu): rewrite returned a int");
    /* the original is unchanged */
    CHECK_OK(tp_program_validate(p));
    CHECK(graph_has_op(p, TP_OP_RELU) && !graph_has_op(p, TP_OP_TO));
    tp_program_free(p);
    tp_decomp_table_free(t);
}

TEST(test_fixpoint) {
    /* relu -> clamp (round 1) -> where/lt (round 2) */
    tp_decomp_table *t = NULL;
    CHECK_OK(tp_decomp_table_default(&t));
    CHECK_OK(tp_decomp_table_set(t, TP_OP_RELU, rewrite_relu_to_clamp, NULL));
    g_calls = 0;
    tp_program *p = relu_program(), *d = NULL;
    CHECK_OK(tp_program_run_decompositions(p, t, &d));
    CHECK(g_calls == 1);
    if (d) {
        CHECK(!graph_has_op(d, TP_OP_RELU) && !graph_has_op(d, TP_OP_CLAMP));
        CHECK(graph_has_op(d, TP_OP_WHERE));
        check_same_outputs(p, d, 0, 0);
    }
    tp_program_free(d);
    /* a rewrite that never settles stops after 8 rounds */
    CHECK_OK(tp_decomp_table_set(t, TP_OP_RELU, rewrite_relu_forever, NULL));
    g_calls = 0;
    CHECK_OK(tp_program_run_decompositions(p, t, &d));
    CHECK(g_calls == 8);
    if (d) {
        CHECK(graph_has_op(d, TP_OP_RELU));
        CHECK(tp_graph_num_nodes(tp_program_graph(d)) == 3); /* x, relu_8, output */
        CHECK_OK(tp_program_validate(d));
        check_same_outputs(p, d, 0, 0);
    }
    tp_program_free(d);
    tp_program_free(p);
    tp_decomp_table_free(t);
}

TEST(test_empty_table) {
    tp_decomp_table *t = NULL;
    CHECK_OK(tp_decomp_table_new(&t));
    tp_program *p = unary_program(TP_OP_GELU, activation_input(TP_FLOAT32), 0, NULL, NULL), *d = NULL;
    CHECK_OK(tp_program_run_decompositions(p, t, &d));
    CHECK(d != NULL && d != p);
    if (d) {
        char *a = NULL, *b = NULL;
        CHECK_OK(tp_program_to_string(p, &a));
        CHECK_OK(tp_program_to_string(d, &b));
        CHECK(a && b && strcmp(a, b) == 0);
        tp_free(a);
        tp_free(b);
        CHECK(tp_program_example_input(d, "x") != NULL);
        check_same_outputs(p, d, 0, 0);
    }
    tp_program_free(d);
    tp_program_free(p);
    tp_decomp_table_free(t);
}

TEST(test_output_renamed) {
    /* two outputs, both decomposed; a NULL table means the default one */
    prog_builder b;
    pb_init(&b);
    tp_node *x = pb_input(&b, "x", activation_input(TP_FLOAT32));
    tp_node *outs[2] = {CALL(b.g, TP_OP_GELU, N(x)), CALL(b.g, TP_OP_SIGMOID, N(x))};
    tp_program *p = pb_finish_n(&b, 2, outs), *d = NULL;
    CHECK_OK(tp_program_run_decompositions(p, NULL, &d));
    if (d) {
        const tp_signature *sig = tp_program_signature(d);
        tp_node *out = tp_graph_output_node(tp_program_graph(d));
        const tp_value *ret = out ? tp_value_at(tp_node_args(out), 0) : NULL;
        CHECK(ret && tp_value_len(ret) == 2 && tp_signature_n_outputs(sig) == 2);
        for (int i = 0; ret && i < 2 && i < tp_value_len(ret); i++) {
            const tp_value *leaf = tp_value_at(ret, i);
            const tp_output_spec *o = tp_signature_output(sig, i);
            CHECK(leaf->kind == TP_VAL_NODE && o && strcmp(o->arg.name, tp_node_name(leaf->u.node)) == 0);
            CHECK(o && strcmp(o->arg.name, i == 0 ? "gelu" : "sigmoid") != 0);
            CHECK(o && o->kind == TP_OUTPUT_USER_OUTPUT);
        }
        check_same_outputs(p, d, 1e-5, 1e-6);
        /* the original signature is untouched */
        CHECK(strcmp(tp_signature_output(tp_program_signature(p), 0)->arg.name, "gelu") == 0);
    }
    tp_program_free(d);
    tp_program_free(p);
}

TEST(test_module_call_renamed) {
    /* the module call graph names the output too: it follows the rename */
    tp_program *p = unary_program(TP_OP_GELU, activation_input(TP_FLOAT32), 0, NULL, NULL), *d = NULL;
    tp_arg_spec ins[1] = {tp_arg_tensor("x")}, outs[1] = {tp_arg_tensor("gelu")};
    tp_module_call_signature sig = {.n_inputs = 1, .n_outputs = 1, .inputs = ins, .outputs = outs};
    if (p) CHECK_OK(tp_program_add_module_call(p, "", &sig));
    if (p) CHECK_OK(tp_program_run_decompositions(p, NULL, &d));
    if (d) {
        tp_module_call_entry e = tp_program_module_call(d, 0);
        const tp_output_spec *o = tp_signature_output(tp_program_signature(d), 0);
        CHECK(e.signature && o && strcmp(e.signature->outputs[0].name, o->arg.name) == 0);
        CHECK(e.signature && strcmp(e.signature->inputs[0].name, "x") == 0);
        CHECK(strcmp(tp_program_module_call(p, 0).signature->outputs[0].name, "gelu") == 0);
    }
    tp_program_free(d);
    tp_program_free(p);
}

TEST(test_missing_meta) {
    /* a call node created without meta (as a loader does): its meta is
     * inferred from the placeholders' before rewriting */
    prog_builder b;
    pb_init(&b);
    tp_node *x = pb_input(&b, "x", activation_input(TP_FLOAT32));
    tp_value args;
    CHECK_OK(tp_value_tuple(1, &args));
    args.u.seq.items[0] = tp_value_node(x);
    tp_node *n = NULL;
    CHECK_OK(tp_graph_create_node(b.g, TP_NODE_CALL_FUNCTION, "silu", &args, NULL, NULL, &n));
    tp_value_clear(&args);
    CHECK(n && tp_node_meta_val(n)->kind == TP_VAL_NONE);
    check_lowered(pb_finish(&b, n), TP_OP_SILU);
    /* without any meta nothing can be decomposed: the node stays */
    pb_init(&b);
    CHECK_OK(tp_graph_placeholder(b.g, "x", NULL, &x));
    b.names[0] = "x";
    b.values[0] = activation_input(TP_FLOAT32);
    b.n = 1;
    CHECK_OK(tp_value_tuple(1, &args));
    args.u.seq.items[0] = tp_value_node(x);
    CHECK_OK(tp_graph_create_node(b.g, TP_NODE_CALL_FUNCTION, "silu", &args, NULL, NULL, &n));
    tp_value_clear(&args);
    check_kept(pb_finish(&b, n), TP_OP_SILU, NULL);
}

TEST(test_call_method) {
    /* x.sigmoid() as a call_method node */
    prog_builder b;
    pb_init(&b);
    tp_node *x = pb_input(&b, "x", activation_input(TP_FLOAT32));
    tp_value args;
    CHECK_OK(tp_value_tuple(1, &args));
    args.u.seq.items[0] = tp_value_node(x);
    tp_node *n = NULL;
    CHECK_OK(tp_graph_call_method(b.g, "sigmoid", &args, NULL, &n));
    tp_value_clear(&args);
    check_lowered(pb_finish(&b, n), TP_OP_SIGMOID);
}

TEST(test_parameters_linear) {
    /* linear with lifted parameters: state kept, numerics kept, valid */
    prog_builder b;
    pb_init(&b);
    tp_node *w = pb_param(&b, "p_fc_weight", "fc.weight", T2(TP_FLOAT32, 2, 3, 0.5, -1, 2, 3, 0.25, -0.75));
    tp_node *bias = pb_param(&b, "p_fc_bias", "fc.bias", T1(TP_FLOAT32, 2, 0.1, -10));
    tp_node *x = pb_input(&b, "x", T2(TP_FLOAT32, 2, 3, 1, 2, 3, -1, 0, 1));
    tp_program *p = pb_finish(&b, CALL(b.g, TP_OP_LINEAR, N(x), N(w), N(bias))), *d = NULL;
    CHECK_OK(tp_program_run_decompositions(p, NULL, &d));
    if (d) {
        CHECK(!graph_has_op(d, TP_OP_LINEAR));
        CHECK(graph_has_op(d, TP_OP_MATMUL) && graph_has_op(d, TP_OP_TRANSPOSE));
        CHECK(tp_graph_num_placeholders(tp_program_graph(d)) == 3);
        CHECK(tp_signature_is_param(tp_program_signature(d), "p_fc_weight"));
        tp_tensor *pw = NULL, *dw = NULL;
        CHECK_OK(tp_program_get_state(p, "fc.weight", &pw, NULL, NULL));
        CHECK_OK(tp_program_get_state(d, "fc.weight", &dw, NULL, NULL));
        CHECK(pw && dw && pw != dw);
        if (pw && dw) CHECK_CLOSE(pw, dw, 0, 0);
        check_same_outputs(p, d, 1e-5, 0);
        /* called with an explicit argument */
        tp_value in = tp_value_tensor(T2(TP_FLOAT32, 2, 3, -4, 5, 0.5, 1e3, 0, -1));
        tp_value o1 = tp_value_none(), o2 = tp_value_none();
        CHECK_OK(tp_program_call(p, &in, 1, NULL, &o1));
        CHECK_OK(tp_program_call(d, &in, 1, NULL, &o2));
        if (o1.kind == TP_VAL_TENSOR && o2.kind == TP_VAL_TENSOR) CHECK_CLOSE(o2.u.tensor, o1.u.tensor, 1e-5, 0);
        tp_value_clear(&in);
        tp_value_clear(&o1);
        tp_value_clear(&o2);
    }
    tp_program_free(d);
    tp_program_free(p);
}

TEST(test_mlp) {
    /* linear -> relu -> linear (parameters), then gelu and layer_norm */
    prog_builder b;
    pb_init(&b);
    double w1[5 * 4], w2[3 * 5];
    for (int i = 0; i < 20; i++) w1[i] = ((i * 5) % 7 - 3) * 0.37;
    for (int i = 0; i < 15; i++) w2[i] = ((i * 3) % 5 - 2) * 0.61;
    tp_node *pw1 = pb_param(&b, "p_fc1_weight", "fc1.weight", tensor_of(TP_FLOAT32, 2, (int64_t[]){5, 4}, w1));
    tp_node *pb1 = pb_param(&b, "p_fc1_bias", "fc1.bias", T1(TP_FLOAT32, 5, 0.1, -0.2, 0.3, 0, 1));
    tp_node *pw2 = pb_param(&b, "p_fc2_weight", "fc2.weight", tensor_of(TP_FLOAT32, 2, (int64_t[]){3, 5}, w2));
    tp_node *pb2 = pb_param(&b, "p_fc2_bias", "fc2.bias", T1(TP_FLOAT32, 3, -1, 0, 1));
    tp_node *x = pb_input(&b, "x", T2(TP_FLOAT32, 2, 4, 1, -2, 3, 0.5, -1, 0, 2, -3));
    tp_node *h = CALL(b.g, TP_OP_LINEAR, N(x), N(pw1), N(pb1));
    tp_node *r = CALL(b.g, TP_OP_RELU, N(h));
    tp_node *y = CALL(b.g, TP_OP_LINEAR, N(r), N(pw2), N(pb2));
    tp_node *gl = CALL(b.g, TP_OP_GELU, N(y));
    tp_node *ln = CALL(b.g, TP_OP_LAYER_NORM, N(gl), I(3));
    tp_node *outs[2] = {y, ln};
    check_lowered(pb_finish_n(&b, 2, outs), TP_OP_LINEAR);
}

static tp_status decompose_and_free(void *ctx) {
    tp_program *d = NULL;
    tp_decomp_table *t = NULL;
    tp_status st = tp_decomp_table_default(&t);
    if (st == TP_OK) st = tp_decomp_table_add_softmax(t);
    if (st == TP_OK) st = tp_program_run_decompositions(ctx, t, &d);
    tp_program_free(d);
    tp_decomp_table_free(t);
    return st;
}

TEST(test_alloc_failures) {
    /* every allocation of a decomposition may fail: TP_ERR_NOMEM, no leak */
    prog_builder b;
    pb_init(&b);
    tp_node *w = pb_param(&b, "p_w", "fc.weight", T2(TP_FLOAT32, 2, 3, 0.5, -1, 2, 3, 0.25, -0.75));
    tp_node *x = pb_input(&b, "x", T2(TP_FLOAT32, 2, 3, 1, 2, 3, -1, 0, 1));
    tp_node *lin = CALL(b.g, TP_OP_LINEAR, N(x), N(w));
    tp_node *act = CALL(b.g, TP_OP_MISH, N(lin));
    tp_node *sm = CALL(b.g, TP_OP_LOG_SOFTMAX, N(act), I(1));
    tp_node *var = CALL(b.g, TP_OP_VAR, N(sm));
    tp_node *outs[2] = {sm, var};
    tp_program *p = pb_finish_n(&b, 2, outs);
    long n_allocs = p ? check_alloc_failures("run_decompositions", decompose_and_free, p) : 0;
    CHECK(n_allocs > 100);
    tp_program_free(p);
}

TEST(test_null_arguments) {
    tp_program *d = NULL;
    CHECK_STATUS(tp_program_run_decompositions(NULL, NULL, &d), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp_decomp_table_new(NULL), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp_decomp_table_copy(NULL, &(tp_decomp_table *){NULL}), TP_ERR_INVALID_ARG);
}

TEST_MAIN(T(test_sigmoid), T(test_silu_mish), T(test_softplus), T(test_gelu), T(test_elu_selu),
          T(test_leaky_relu_relu6_hardtanh), T(test_hardsigmoid_hardswish), T(test_clamp_scalar_bounds),
          T(test_clamp_tensor_bounds), T(test_clamp_declines), T(test_log1p), T(test_expm1),
          T(test_reciprocal_square), T(test_lerp), T(test_addcmul_addcdiv), T(test_linear), T(test_addmm),
          T(test_softmax), T(test_layer_norm), T(test_batch_norm), T(test_batch_norm_training_declines),
          T(test_var_std), T(test_dropout), T(test_table_operations), T(test_removed_entry_keeps_op),
          T(test_replace_entry), T(test_declining_rewrite), T(test_failing_rewrite), T(test_fixpoint),
          T(test_empty_table), T(test_output_renamed), T(test_module_call_renamed), T(test_missing_meta),
          T(test_call_method), T(test_parameters_linear), T(test_mlp),
          T(test_alloc_failures), T(test_null_arguments))
