/*
 * test_graph.c - the graph IR: building with binding and shape inference,
 * fx-style names, use lists after every mutation, insertion points,
 * erase/replace refusals, lint failures of each kind, dead-code
 * elimination, copying and inlining through a value map, and the exact
 * text form.
 *
 * Some checks corrupt a graph through the internal structs (graph_impl.h)
 * to show that lint catches states the public API cannot produce.
 */
#include <stdarg.h>

#include "fail_alloc.h"
#include "graph_impl.h"
#include "test_util.h"

/* ---- helpers ------------------------------------------------------------- */

#define SZ(...) ((const int64_t[]){__VA_ARGS__})
#define N(x) tp_value_node(x)
#define I(x) tp_value_int(x)
#define F(x) tp_value_float(x)

static tp_value meta_val(tp_dtype dt, int ndim, const int64_t *sizes) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_meta(dt, ndim, sizes, &t));
    return tp_value_tensor(t);
}

static tp_node *ph(tp_graph *g, const char *name, tp_dtype dt, int ndim, const int64_t *sizes) {
    tp_value v = meta_val(dt, ndim, sizes);
    tp_node *n = NULL;
    CHECK_OK(tp_graph_placeholder(g, name, &v, &n));
    tp_value_clear(&v);
    return n;
}

/* A tuple of n values (taken over). */
static tp_value tup(int n, ...) {
    tp_value t = tp_value_none();
    CHECK_OK(tp_value_tuple(n, &t));
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) t.u.seq.items[i] = va_arg(ap, tp_value);
    va_end(ap);
    return t;
}

static tp_value str(const char *s) {
    tp_value v = tp_value_none();
    CHECK_OK(tp_value_str(s, &v));
    return v;
}

/* call_function with args (taken over) and optional kwargs (taken over). */
static tp_node *call_kw(tp_graph *g, tp_op op, tp_value args, tp_value kwargs) {
    tp_node *n = NULL;
    CHECK_OK(tp_graph_call_function(g, op, &args, kwargs.kind == TP_VAL_NONE ? NULL : &kwargs, &n));
    tp_value_clear(&args);
    tp_value_clear(&kwargs);
    return n;
}
static tp_node *call(tp_graph *g, tp_op op, tp_value args) { return call_kw(g, op, args, tp_value_none()); }

static tp_node *output(tp_graph *g, tp_value v) {
    tp_node *n = NULL;
    CHECK_OK(tp_graph_output(g, &v, &n));
    tp_value_clear(&v);
    return n;
}

/* Node names in order, space separated (static buffer). */
static const char *order(const tp_graph *g) {
    static char buf[1024];
    size_t used = 0;
    buf[0] = '\0';
    for (tp_node *n = tp_graph_first_node(g); n; n = tp_node_next(n))
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", used ? " " : "", tp_node_name(n));
    return buf;
}

/* Names of n's users, space separated. */
static const char *users(const tp_node *n) {
    static char buf[512];
    size_t used = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < tp_node_num_users(n); i++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", i ? " " : "", tp_node_name(tp_node_user(n, i)));
    return buf;
}

static const char *inputs(const tp_node *n) {
    static char buf[512];
    size_t used = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < tp_node_num_inputs(n); i++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", i ? " " : "", tp_node_name(tp_node_input(n, i)));
    return buf;
}

#define CHECK_STR(actual, expected)                                                                  \
    do {                                                                                             \
        const char *a_ = (actual), *e_ = (expected);                                                 \
        CHECK_MSG(a_ && strcmp(a_, e_) == 0, "got \"%s\", expected \"%s\"", a_ ? a_ : "(null)", e_); \
    } while (0)

static bool meta_is(const tp_node *n, tp_dtype dt, int ndim, const int64_t *sizes) {
    const tp_value *v = tp_node_meta_val(n);
    if (v->kind != TP_VAL_TENSOR) return false;
    const tp_tensor *t = v->u.tensor;
    if (!tp_tensor_is_meta(t) || tp_tensor_dtype(t) != dt || tp_tensor_ndim(t) != ndim) return false;
    for (int d = 0; d < ndim; d++)
        if (tp_tensor_sizes(t)[d] != sizes[d]) return false;
    return true;
}

/* x, y: f32[2, 3]; add = x + y; relu = relu(add); output (relu,) */
static tp_graph *simple_graph(void) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = ph(g, "x", TP_FLOAT32, 2, SZ(2, 3));
    tp_node *y = ph(g, "y", TP_FLOAT32, 2, SZ(2, 3));
    tp_node *add = call(g, TP_OP_ADD, tup(2, N(x), N(y)));
    tp_node *relu = call(g, TP_OP_RELU, tup(1, N(add)));
    output(g, tup(1, N(relu)));
    return g;
}

/* ---- tests ---------------------------------------------------------------- */

TEST(test_kind_names) {
    for (int k = 0; k < TP_NODE_KIND_COUNT; k++) {
        tp_node_kind back;
        CHECK_OK(tp_node_kind_from_name(tp_node_kind_name((tp_node_kind)k), &back));
        CHECK(back == (tp_node_kind)k);
    }
    CHECK_STR(tp_node_kind_name(TP_NODE_CALL_FUNCTION), "call_function");
    CHECK_STR(tp_node_kind_name((tp_node_kind)99), "?");
    tp_node_kind k;
    CHECK_STATUS(tp_node_kind_from_name("call_module", &k), TP_ERR_NOT_FOUND);
    CHECK_ERR_CONTAINS("call_module");
}

TEST(test_build_simple) {
    tp_graph *g = simple_graph();
    CHECK_OK(tp_graph_lint(g));
    CHECK_STR(order(g), "x y add relu output");
    CHECK(tp_graph_num_nodes(g) == 5);
    CHECK(tp_graph_num_placeholders(g) == 2);
    tp_node *x = tp_graph_find_node(g, "x"), *y = tp_graph_find_node(g, "y");
    tp_node *add = tp_graph_find_node(g, "add"), *relu = tp_graph_find_node(g, "relu");
    tp_node *out = tp_graph_find_node(g, "output");
    CHECK(x && y && add && relu && out);
    CHECK(tp_graph_find_node(g, "nope") == NULL);
    CHECK(tp_graph_placeholder_at(g, 0) == x && tp_graph_placeholder_at(g, 1) == y);
    CHECK(tp_graph_placeholder_at(g, 2) == NULL);
    CHECK(tp_graph_output_node(g) == out && tp_graph_last_node(g) == out && tp_graph_first_node(g) == x);
    CHECK(tp_node_prev(add) == y && tp_node_next(add) == relu);
    CHECK(tp_node_graph(add) == g);
    CHECK(tp_node_get_kind(x) == TP_NODE_PLACEHOLDER && tp_node_get_kind(add) == TP_NODE_CALL_FUNCTION &&
          tp_node_get_kind(out) == TP_NODE_OUTPUT);
    CHECK(tp_node_op(add) == TP_OP_ADD && tp_node_op(x) == TP_OP_INVALID);
    CHECK_STR(tp_node_target(add), "add");
    CHECK_STR(tp_node_target(x), "x");
    CHECK_STR(tp_node_target(out), "output");
    /* args stored as given, as a tuple; kwargs an empty dict */
    CHECK(tp_node_args(add)->kind == TP_VAL_TUPLE && tp_value_len(tp_node_args(add)) == 2);
    CHECK(tp_value_at(tp_node_args(add), 0)->u.node == x);
    CHECK(tp_node_kwargs(add)->kind == TP_VAL_DICT && tp_value_len(tp_node_kwargs(add)) == 0);
    /* inferred meta */
    CHECK(meta_is(add, TP_FLOAT32, 2, SZ(2, 3)));
    CHECK(meta_is(relu, TP_FLOAT32, 2, SZ(2, 3)));
    CHECK(tp_node_meta_val(out)->kind == TP_VAL_NONE);
    /* use lists */
    CHECK_STR(users(x), "add");
    CHECK_STR(users(y), "add");
    CHECK_STR(users(add), "relu");
    CHECK_STR(users(relu), "output");
    CHECK_STR(users(out), "");
    CHECK_STR(inputs(add), "x y");
    CHECK_STR(inputs(out), "relu");
    CHECK(tp_node_user(x, 1) == NULL && tp_node_input(x, 0) == NULL);
    tp_graph_free(g);
    tp_graph_free(NULL);
}

TEST(test_names) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = ph(g, "x", TP_FLOAT32, 1, SZ(3));
    tp_node *a0 = call(g, TP_OP_ADD, tup(2, N(x), N(x)));
    tp_node *a1 = call(g, TP_OP_ADD, tup(2, N(a0), N(x)));
    tp_node *a2 = call(g, TP_OP_ADD, tup(2, N(a1), N(x)));
    CHECK_STR(tp_node_name(a0), "add");
    CHECK_STR(tp_node_name(a1), "add_1");
    CHECK_STR(tp_node_name(a2), "add_2");
    char *name = NULL;
    CHECK_OK(tp_graph_make_name(g, "fc1.weight", &name));
    CHECK_STR(name, "fc1_weight");
    tp_free(name);
    CHECK_OK(tp_graph_make_name(g, "add", &name));
    CHECK_STR(name, "add_3");
    tp_free(name);
    CHECK_OK(tp_graph_make_name(g, "add_1", &name)); /* fx: taken suffix -> next free */
    CHECK_STR(name, "add_3");
    tp_free(name);
    CHECK_OK(tp_graph_make_name(g, "add_07", &name)); /* suffix normalised like int() */
    CHECK_STR(name, "add_7");
    tp_free(name);
    CHECK_OK(tp_graph_make_name(g, "1st layer..out", &name));
    CHECK_STR(name, "_1st_layer_out");
    tp_free(name);
    CHECK_OK(tp_graph_make_name(g, "", &name));
    CHECK_STR(name, "_unnamed");
    tp_free(name);
    CHECK_OK(tp_graph_make_name(g, "max", &name)); /* builtin */
    CHECK_STR(name, "max_1");
    tp_free(name);
    CHECK_OK(tp_graph_make_name(g, "return", &name)); /* keyword */
    CHECK_STR(name, "return_1");
    tp_free(name);

    /* names derived from targets are snake_case; the target is kept */
    tp_node *w = NULL, *p = NULL, *q = NULL;
    CHECK_OK(tp_graph_get_attr(g, "fc1.weight", NULL, &w));
    CHECK_STR(tp_node_name(w), "fc1_weight");
    CHECK_STR(tp_node_target(w), "fc1.weight");
    CHECK_OK(tp_graph_placeholder(g, "inputTensor", NULL, &p));
    CHECK_STR(tp_node_name(p), "input_tensor");
    CHECK_STR(tp_node_target(p), "inputTensor");
    CHECK_OK(tp_graph_placeholder(g, "input", NULL, &q));
    CHECK_STR(tp_node_name(q), "input_1");
    CHECK_STR(tp_node_target(q), "input");
    tp_node *mx = call(g, TP_OP_MAX, tup(2, N(x), I(0)));
    CHECK_STR(tp_node_name(mx), "max_1");

    /* rename keeps uniqueness; the old name becomes free */
    CHECK_OK(tp_node_rename(a2, "add_1"));
    CHECK_STR(tp_node_name(a2), "add_3");
    CHECK(tp_graph_find_node(g, "add_3") == a2 && tp_graph_find_node(g, "add_2") == NULL);
    CHECK_OK(tp_node_rename(a2, "my.sum"));
    CHECK_STR(tp_node_name(a2), "my_sum");
    CHECK_OK(tp_node_rename(a2, "my_sum"));
    CHECK_STR(tp_node_name(a2), "my_sum");
    CHECK(tp_graph_find_node(g, "add_3") == NULL);
    tp_node *a3 = call(g, TP_OP_ADD, tup(2, N(x), N(x)));
    CHECK_STR(tp_node_name(a3), "add_4"); /* fx: the counter for "add" continues after add_3 */
    /* explicit names through create_node: used as given when free */
    tp_node *c = NULL;
    tp_value args = tup(1, N(x));
    CHECK_OK(tp_graph_create_node(g, TP_NODE_CALL_FUNCTION, "relu", &args, NULL, "activation", &c));
    CHECK_STR(tp_node_name(c), "activation");
    CHECK_OK(tp_graph_create_node(g, TP_NODE_CALL_FUNCTION, "relu", &args, NULL, "activation", &c));
    CHECK_STR(tp_node_name(c), "activation_1");
    CHECK_STATUS(tp_graph_create_node(g, TP_NODE_CALL_FUNCTION, "no_such_op", &args, NULL, NULL, &c),
                 TP_ERR_NOT_FOUND);
    CHECK_ERR_CONTAINS("no_such_op");
    tp_value_clear(&args);
    /* many nodes: names stay unique and findable (hash map growth) */
    for (int i = 0; i < 300; i++) call(g, TP_OP_NEG, tup(1, N(x)));
    CHECK(tp_graph_find_node(g, "neg") != NULL && tp_graph_find_node(g, "neg_299") != NULL);
    CHECK(tp_graph_find_node(g, "neg_300") == NULL);
    output(g, tup(1, N(x)));
    CHECK_OK(tp_graph_lint(g));
    tp_graph_free(g);
}

TEST(test_build_errors) {
    tp_graph *g = NULL, *other = NULL;
    CHECK_OK(tp_graph_new(&g));
    CHECK_OK(tp_graph_new(&other));
    tp_node *x = ph(g, "x", TP_FLOAT32, 2, SZ(2, 3));
    tp_node *z = ph(g, "z", TP_FLOAT32, 1, SZ(4));
    tp_node *o = ph(other, "o", TP_FLOAT32, 1, SZ(4));
    int64_t count = tp_graph_num_nodes(g);
    tp_node *n = NULL;

    /* shape error at build time, naming the node */
    tp_value args = tup(2, N(x), N(z));
    CHECK_STATUS(tp_graph_call_function(g, TP_OP_ADD, &args, NULL, &n), TP_ERR_SHAPE);
    CHECK_ERR_CONTAINS("node add (add): ");
    CHECK(tp_graph_num_nodes(g) == count && tp_graph_find_node(g, "add") == NULL);
    CHECK_STR(users(x), "");
    tp_value_clear(&args);

    /* binding errors: too many args, unknown kwarg, missing arg, wrong type */
    args = tup(2, N(x), N(x));
    CHECK_STATUS(tp_graph_call_function(g, TP_OP_RELU, &args, NULL, &n), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("node relu (relu): ");
    CHECK_ERR_CONTAINS("positional");
    tp_value_clear(&args);
    args = tup(2, N(x), N(x));
    tp_value kw = tp_value_none();
    CHECK_OK(tp_value_dict(&kw));
    tp_value v = I(2);
    CHECK_OK(tp_value_dict_set(&kw, "beta", &v));
    CHECK_STATUS(tp_graph_call_function(g, TP_OP_ADD, &args, &kw, &n), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("beta");
    tp_value_clear(&kw);
    tp_value_clear(&args);
    args = tup(1, N(x));
    CHECK_STATUS(tp_graph_call_function(g, TP_OP_ADD, &args, NULL, &n), TP_ERR_MISSING);
    CHECK_ERR_CONTAINS("other");
    tp_value_clear(&args);
    args = tup(2, N(x), str("text"));
    CHECK_STATUS(tp_graph_call_function(g, TP_OP_ADD, &args, NULL, &n), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("node add (add)");
    tp_value_clear(&args);

    /* a tensor constant in args is refused */
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 1, SZ(3), &t));
    args = tup(2, N(x), tp_value_tensor(t));
    CHECK_STATUS(tp_graph_call_function(g, TP_OP_ADD, &args, NULL, &n), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("Tensor");
    tp_value_clear(&args);

    /* a node of another graph is refused */
    args = tup(2, N(x), N(o));
    CHECK_STATUS(tp_graph_call_function(g, TP_OP_ADD, &args, NULL, &n), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("node o of another graph");
    CHECK_STR(users(o), "");
    tp_value_clear(&args);

    /* args of the wrong kind */
    v = I(1);
    CHECK_STATUS(tp_graph_call_function(g, TP_OP_RELU, &v, NULL, &n), TP_ERR_TYPE);
    CHECK_STATUS(tp_graph_placeholder(g, "", NULL, &n), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp_graph_get_attr(g, NULL, NULL, &n), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp_graph_call_function(g, (tp_op)-5, NULL, NULL, &n), TP_ERR_INVALID_ARG);
    /* meta val may not hold a node reference */
    v = N(x);
    CHECK_STATUS(tp_graph_placeholder(g, "p", &v, &n), TP_ERR_TYPE);
    CHECK(tp_graph_find_node(g, "p") == NULL);

    /* a second output is refused by tp_graph_output */
    output(g, tup(1, N(x)));
    v = N(x);
    CHECK_STATUS(tp_graph_output(g, &v, &n), TP_ERR_STATE);
    CHECK_ERR_CONTAINS("already has an output");
    CHECK(tp_graph_num_nodes(g) == count + 1);
    CHECK_OK(tp_graph_lint(g));
    tp_graph_free(g);
    tp_graph_free(other);
}

TEST(test_meta) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    /* a real tensor given as meta is stored as a meta tensor */
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_zeros(TP_INT64, 2, SZ(2, 2), &t));
    tp_value tv = tp_value_tensor(t);
    tp_node *x = NULL;
    CHECK_OK(tp_graph_placeholder(g, "x", &tv, &x));
    tp_value_clear(&tv);
    CHECK(meta_is(x, TP_INT64, 2, SZ(2, 2)));
    /* string map */
    CHECK(tp_node_meta_get_str(x, "stack_trace") == NULL);
    CHECK_OK(tp_node_meta_set_str(x, "stack_trace", "File \"m.py\", line 3"));
    CHECK_OK(tp_node_meta_set_str(x, "nn_module_stack", "fc1"));
    CHECK_STR(tp_node_meta_get_str(x, "stack_trace"), "File \"m.py\", line 3");
    CHECK_OK(tp_node_meta_set_str(x, "stack_trace", "line 4"));
    CHECK_STR(tp_node_meta_get_str(x, "stack_trace"), "line 4");
    CHECK(tp_value_len(tp_node_meta(x)) == 2);
    tp_value v = I(7);
    CHECK_OK(tp_node_meta_set(x, "seq_nr", &v));
    CHECK(tp_node_meta_get(x, "seq_nr")->u.i == 7);
    CHECK(tp_node_meta_get_str(x, "seq_nr") == NULL);
    CHECK_OK(tp_node_meta_set(x, "stack_trace", NULL));
    CHECK(tp_node_meta_get(x, "stack_trace") == NULL);
    CHECK(tp_value_len(tp_node_meta(x)) == 2);
    CHECK_OK(tp_node_meta_set(x, "absent", NULL));
    v = N(x);
    CHECK_STATUS(tp_node_meta_set(x, "self", &v), TP_ERR_TYPE);
    CHECK_STATUS(tp_node_meta_set_str(x, "", "v"), TP_ERR_INVALID_ARG);
    /* flags */
    CHECK(tp_node_flags(x) == 0);
    tp_node_set_flags(x, TP_NODE_IMPURE);
    CHECK(tp_node_flags(x) == TP_NODE_IMPURE);
    /* meta val can be cleared and set to a tuple */
    tp_value tu = tup(2, meta_val(TP_FLOAT32, 1, SZ(3)), meta_val(TP_INT64, 0, NULL));
    CHECK_OK(tp_node_set_meta_val(x, &tu));
    tp_value_clear(&tu);
    CHECK(tp_node_meta_val(x)->kind == TP_VAL_TUPLE);
    CHECK_OK(tp_node_set_meta_val(x, NULL));
    CHECK(tp_node_meta_val(x)->kind == TP_VAL_NONE);
    tp_graph_free(g);
}

TEST(test_infer_meta) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = NULL, *y = NULL;
    CHECK_OK(tp_graph_placeholder(g, "x", NULL, &x)); /* no meta: inference skipped */
    y = ph(g, "y", TP_FLOAT32, 1, SZ(3));
    tp_node *add = call(g, TP_OP_ADD, tup(2, N(x), N(y)));
    tp_node *relu = call(g, TP_OP_RELU, tup(1, N(add)));
    CHECK(tp_node_meta_val(add)->kind == TP_VAL_NONE && tp_node_meta_val(relu)->kind == TP_VAL_NONE);
    tp_value v = meta_val(TP_INT32, 2, SZ(4, 3));
    CHECK_OK(tp_node_set_meta_val(x, &v));
    tp_value_clear(&v);
    CHECK_OK(tp_graph_infer_meta(g));
    CHECK(meta_is(add, TP_FLOAT32, 2, SZ(4, 3))); /* int32 + float32 -> float32 */
    CHECK(meta_is(relu, TP_FLOAT32, 2, SZ(4, 3)));
    /* an incompatible input shape: the error names the node */
    v = meta_val(TP_FLOAT32, 1, SZ(5));
    CHECK_OK(tp_node_set_meta_val(x, &v));
    tp_value_clear(&v);
    CHECK_STATUS(tp_graph_infer_meta(g), TP_ERR_SHAPE);
    CHECK_ERR_CONTAINS("node add (add): ");
    CHECK(meta_is(add, TP_FLOAT32, 2, SZ(4, 3))); /* unchanged on error */
    /* multi-output op and getitem */
    tp_node *mx = call(g, TP_OP_MAX, tup(2, N(y), I(0)));
    CHECK(tp_node_meta_val(mx)->kind == TP_VAL_TUPLE && tp_value_len(tp_node_meta_val(mx)) == 2);
    tp_node *gi = call(g, TP_OP_GETITEM, tup(2, N(mx), I(1)));
    CHECK(meta_is(gi, TP_INT64, 0, NULL));
    tp_graph_free(g);
}

TEST(test_use_lists) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = ph(g, "x", TP_FLOAT32, 1, SZ(3));
    tp_node *y = ph(g, "y", TP_FLOAT32, 1, SZ(3));
    tp_node *mul = call(g, TP_OP_MUL, tup(2, N(x), N(x)));
    CHECK_STR(users(x), "mul"); /* each user once */
    CHECK_STR(inputs(mul), "x");
    tp_node *add = call(g, TP_OP_ADD, tup(2, N(x), N(mul)));
    CHECK_STR(users(x), "mul add");
    CHECK_STR(users(mul), "add");
    tp_node *out = output(g, tup(2, N(add), N(x)));
    CHECK_STR(users(x), "mul add output");
    CHECK_OK(tp_graph_lint(g));

    /* set_arg */
    tp_value v = N(y);
    CHECK_OK(tp_node_set_arg(add, 1, &v));
    CHECK_STR(users(mul), "");
    CHECK_STR(users(y), "add");
    CHECK_STR(inputs(add), "x y");
    CHECK_OK(tp_graph_lint(g));
    CHECK_STATUS(tp_node_set_arg(add, 2, &v), TP_ERR_INDEX);
    CHECK_ERR_CONTAINS("node add");

    /* set_args: a list is stored as a tuple; nested references count */
    tp_value lst = tp_value_none();
    CHECK_OK(tp_value_list(0, &lst));
    v = N(mul);
    CHECK_OK(tp_value_append(&lst, &v));
    tp_value a = tup(2, N(y), tp_value_none());
    tp_value_move(&a.u.seq.items[1], &lst);
    CHECK_OK(tp_node_set_args(add, &a));
    tp_value_clear(&a);
    CHECK(tp_node_args(add)->kind == TP_VAL_TUPLE);
    CHECK_STR(users(x), "mul output");
    CHECK_STR(users(mul), "add");
    CHECK_STR(users(y), "add");
    CHECK_STR(inputs(add), "y mul");
    CHECK_OK(tp_graph_lint(g));

    /* kwargs references count too, after args */
    v = N(x);
    CHECK_OK(tp_node_set_kwarg(add, "alpha", &v));
    CHECK_STR(users(x), "mul output add");
    CHECK_STR(inputs(add), "y mul x");
    tp_value kw = tp_value_none();
    CHECK_OK(tp_value_dict(&kw));
    CHECK_OK(tp_node_set_kwargs(add, &kw));
    tp_value_clear(&kw);
    CHECK_STR(users(x), "mul output");
    CHECK_OK(tp_graph_lint(g));

    /* a failed mutation changes nothing */
    tp_graph *other = NULL;
    CHECK_OK(tp_graph_new(&other));
    tp_node *o = ph(other, "o", TP_FLOAT32, 1, SZ(3));
    v = N(o);
    CHECK_STATUS(tp_node_set_arg(add, 0, &v), TP_ERR_INVALID_ARG);
    CHECK_STR(inputs(add), "y mul");
    CHECK_STR(users(o), "");
    CHECK_OK(tp_graph_lint(g));

    /* replace_input_with */
    CHECK_OK(tp_node_replace_input_with(add, mul, x));
    CHECK_STR(inputs(add), "y x");
    CHECK_STR(users(mul), "");
    CHECK_STR(users(x), "mul output add");
    CHECK_OK(tp_node_replace_input_with(add, mul, y)); /* not an input: no-op */
    CHECK_OK(tp_node_replace_input_with(add, x, y));   /* merges into y */
    CHECK_STR(inputs(add), "y");
    CHECK_STR(users(x), "mul output");
    CHECK_STATUS(tp_node_replace_input_with(add, y, o), TP_ERR_INVALID_ARG);
    CHECK_OK(tp_graph_lint(g));
    (void)out;
    tp_graph_free(other);
    tp_graph_free(g);
}

static bool only_named_relu(const tp_node *user, void *ctx) {
    (*(int *)ctx)++;
    return strncmp(tp_node_name(user), "relu", 4) == 0;
}

TEST(test_replace_all_uses) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = ph(g, "x", TP_FLOAT32, 1, SZ(3));
    tp_node *y = ph(g, "y", TP_FLOAT32, 1, SZ(3));
    tp_node *relu = call(g, TP_OP_RELU, tup(1, N(x)));
    tp_node *add = call(g, TP_OP_ADD, tup(2, N(x), N(relu)));
    tp_node *out = output(g, tup(2, N(add), N(x)));
    int64_t count = -1;
    /* filter: only relu switches to y */
    int calls = 0;
    CHECK_OK(tp_node_replace_all_uses_with(x, y, only_named_relu, &calls, &count));
    CHECK(count == 1 && calls == 3);
    CHECK_STR(users(x), "add output");
    CHECK_STR(users(y), "relu");
    CHECK_OK(tp_graph_lint(g));
    /* all the rest */
    CHECK_OK(tp_node_replace_all_uses_with(x, y, NULL, NULL, &count));
    CHECK(count == 2);
    CHECK_STR(users(x), "");
    CHECK_STR(users(y), "relu add output");
    CHECK(tp_value_at(tp_value_at(tp_node_args(out), 0), 1)->u.node == y);
    CHECK_OK(tp_graph_lint(g));
    /* a node built from y takes over y's uses without referencing itself */
    CHECK_OK(tp_graph_insert_after(g, y));
    tp_node *neg = call(g, TP_OP_NEG, tup(1, N(y)));
    CHECK_OK(tp_graph_set_insert_point(g, NULL));
    CHECK_OK(tp_node_replace_all_uses_with(y, neg, NULL, NULL, &count));
    CHECK(count == 3);
    CHECK_STR(users(y), "neg");
    CHECK_STR(users(neg), "relu add output");
    CHECK_STR(inputs(neg), "y");
    CHECK_OK(tp_graph_lint(g));
    CHECK_STR(order(g), "x y neg relu add output");
    /* replacement from another graph */
    tp_graph *other = NULL;
    CHECK_OK(tp_graph_new(&other));
    tp_node *o = ph(other, "o", TP_FLOAT32, 1, SZ(3));
    CHECK_STATUS(tp_node_replace_all_uses_with(neg, o, NULL, NULL, &count), TP_ERR_INVALID_ARG);
    CHECK(count == 0);
    /* a node in both args and kwargs of a user is counted once */
    tp_node *m = NULL;
    tp_value a = tup(2, N(relu), N(relu)), kw = tp_value_none();
    CHECK_OK(tp_value_dict(&kw));
    tp_value v = N(relu);
    CHECK_OK(tp_value_dict_set(&kw, "alpha", &v));
    CHECK_OK(tp_graph_set_insert_point(g, out));
    CHECK_OK(tp_graph_create_node(g, TP_NODE_CALL_FUNCTION, "add", &a, &kw, NULL, &m));
    tp_value_clear(&a);
    tp_value_clear(&kw);
    CHECK_OK(tp_node_replace_all_uses_with(relu, x, NULL, NULL, &count));
    CHECK(count == 2);
    CHECK_STR(inputs(m), "x");
    CHECK(tp_value_dict_get(tp_node_kwargs(m), "alpha")->u.node == x);
    CHECK_OK(tp_graph_lint(g));
    tp_graph_free(other);
    tp_graph_free(g);
}

TEST(test_erase) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = ph(g, "x", TP_FLOAT32, 1, SZ(3));
    tp_node *neg = call(g, TP_OP_NEG, tup(1, N(x)));
    tp_node *add = call(g, TP_OP_ADD, tup(2, N(neg), N(x)));
    tp_node *mul = call(g, TP_OP_MUL, tup(2, N(neg), N(neg)));
    output(g, tup(1, N(mul)));
    CHECK_STATUS(tp_graph_erase_node(g, neg), TP_ERR_STATE);
    CHECK_ERR_CONTAINS("cannot erase node neg: it still has 2 users (add, mul)");
    CHECK(tp_graph_num_nodes(g) == 5);
    CHECK_OK(tp_graph_erase_node(g, add));
    CHECK_STR(users(neg), "mul");
    CHECK_STR(users(x), "neg");
    CHECK(tp_graph_find_node(g, "add") == NULL);
    CHECK_STR(order(g), "x neg mul output");
    CHECK_OK(tp_graph_lint(g));
    /* the name is free again */
    tp_node *add2 = call(g, TP_OP_ADD, tup(2, N(x), N(x)));
    CHECK_STR(tp_node_name(add2), "add");
    CHECK_STATUS(tp_graph_erase_node(g, mul), TP_ERR_STATE);
    CHECK_ERR_CONTAINS("1 user (output)");
    tp_graph *other = NULL;
    CHECK_OK(tp_graph_new(&other));
    CHECK_STATUS(tp_graph_erase_node(other, add2), TP_ERR_INVALID_ARG);
    tp_graph_free(other);
    tp_graph_free(g);
}

TEST(test_insert_point) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = ph(g, "x", TP_FLOAT32, 1, SZ(3));
    tp_node *relu = call(g, TP_OP_RELU, tup(1, N(x)));
    tp_node *out = output(g, tup(1, N(relu)));
    CHECK(tp_graph_insert_point(g) == NULL);
    /* before the output: consecutive insertions keep creation order */
    CHECK_OK(tp_graph_set_insert_point(g, out));
    CHECK(tp_graph_insert_point(g) == out);
    tp_node *n1 = call(g, TP_OP_NEG, tup(1, N(relu)));
    tp_node *n2 = call(g, TP_OP_NEG, tup(1, N(n1)));
    CHECK_STR(order(g), "x relu neg neg_1 output");
    /* after x */
    CHECK_OK(tp_graph_insert_after(g, x));
    tp_node *e1 = call(g, TP_OP_EXP, tup(1, N(x)));
    tp_node *e2 = call(g, TP_OP_EXP, tup(1, N(e1)));
    CHECK_STR(order(g), "x exp exp_1 relu neg neg_1 output");
    CHECK(tp_graph_insert_point(g) == relu);
    /* a placeholder added at the start */
    CHECK_OK(tp_graph_set_insert_point(g, x));
    tp_node *y = ph(g, "y", TP_FLOAT32, 1, SZ(3));
    CHECK_STR(order(g), "y x exp exp_1 relu neg neg_1 output");
    CHECK(tp_graph_placeholder_at(g, 0) == y);
    /* erasing the insertion point moves it to the next node */
    CHECK_OK(tp_graph_set_insert_point(g, n2));
    CHECK_OK(tp_graph_erase_node(g, n2));
    CHECK(tp_graph_insert_point(g) == out);
    /* moving nodes */
    CHECK_OK(tp_graph_move_before(g, y, out));
    CHECK_STR(order(g), "x exp exp_1 relu neg y output");
    CHECK_OK(tp_graph_move_before(g, y, NULL));
    CHECK_STR(order(g), "x exp exp_1 relu neg output y");
    CHECK(tp_graph_placeholder_at(g, 0) == x && tp_graph_placeholder_at(g, 1) == y);
    CHECK_OK(tp_graph_move_before(g, y, x));
    CHECK_STR(order(g), "y x exp exp_1 relu neg output");
    CHECK(tp_graph_placeholder_at(g, 0) == y && tp_graph_placeholder_at(g, 1) == x);
    CHECK(tp_graph_num_placeholders(g) == 2);
    (void)e2;
    /* end of graph again */
    CHECK_OK(tp_graph_set_insert_point(g, NULL));
    tp_graph *other = NULL;
    CHECK_OK(tp_graph_new(&other));
    CHECK_STATUS(tp_graph_set_insert_point(other, x), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp_graph_insert_after(other, x), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp_graph_move_before(other, x, NULL), TP_ERR_INVALID_ARG);
    tp_graph_free(other);
    CHECK_OK(tp_graph_lint(g));
    tp_graph_free(g);
}

TEST(test_lint_failures) {
    /* no output */
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = ph(g, "x", TP_FLOAT32, 1, SZ(3));
    tp_node *relu = call(g, TP_OP_RELU, tup(1, N(x)));
    CHECK_STATUS(tp_graph_lint(g), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("no output node");
    /* two outputs */
    tp_node *out = output(g, tup(1, N(relu)));
    tp_node *out2 = NULL;
    tp_value args = tup(1, N(x));
    CHECK_OK(tp_graph_create_node(g, TP_NODE_OUTPUT, NULL, &args, NULL, NULL, &out2));
    tp_value_clear(&args);
    CHECK_STR(tp_node_name(out2), "output_1");
    CHECK_STATUS(tp_graph_lint(g), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("2 output nodes (output, output_1)");
    CHECK_OK(tp_graph_erase_node(g, out2));
    CHECK_OK(tp_graph_lint(g));
    /* output not last */
    tp_node *neg = call(g, TP_OP_NEG, tup(1, N(x)));
    CHECK_STATUS(tp_graph_lint(g), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("output node output is not the last node (neg follows it)");
    CHECK_OK(tp_graph_move_before(g, neg, out));
    CHECK_OK(tp_graph_lint(g));
    /* use before definition (moving a node before its input) */
    CHECK_OK(tp_graph_move_before(g, relu, x));
    CHECK_STATUS(tp_graph_lint(g), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("node relu uses node x before its definition");
    CHECK_OK(tp_graph_move_before(g, relu, neg));
    CHECK_OK(tp_graph_lint(g));
    /* ... or pointing an argument at a later node */
    tp_value v = N(neg);
    CHECK_OK(tp_node_set_arg(relu, 0, &v));
    CHECK_STATUS(tp_graph_lint(g), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("node relu uses node neg before its definition");
    v = N(relu);
    CHECK_OK(tp_node_set_arg(relu, 0, &v));
    CHECK_STATUS(tp_graph_lint(g), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("node relu uses itself");
    v = N(x);
    CHECK_OK(tp_node_set_arg(relu, 0, &v));
    CHECK_OK(tp_graph_lint(g));

    /* states the API refuses to create, made by corrupting internals: */
    /* a reference to a node of another graph */
    tp_graph *other = NULL;
    CHECK_OK(tp_graph_new(&other));
    tp_node *o = ph(other, "o", TP_FLOAT32, 1, SZ(3));
    tp_value *slot = &neg->args.u.seq.items[0];
    slot->u.node = o;
    CHECK_STATUS(tp_graph_lint(g), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("node neg uses node o, which belongs to another graph");
    slot->u.node = x;
    CHECK_OK(tp_graph_lint(g));
    /* duplicate names */
    char *saved = relu->name;
    char dup[] = "neg";
    relu->name = dup;
    CHECK_STATUS(tp_graph_lint(g), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("two nodes are named neg");
    relu->name = saved;
    /* an empty name */
    char empty[] = "";
    relu->name = empty;
    CHECK_STATUS(tp_graph_lint(g), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("empty name");
    relu->name = saved;
    /* inconsistent use lists */
    x->n_users--; /* drop the last user (neg) from x's list */
    CHECK_STATUS(tp_graph_lint(g), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("missing from its users");
    x->n_users++;
    CHECK_OK(tp_graph_lint(g));
    tp_graph_free(other);
    tp_graph_free(g);
    /* an empty graph has no output */
    CHECK_OK(tp_graph_new(&g));
    CHECK_STATUS(tp_graph_lint(g), TP_ERR_VERIFY);
    tp_graph_free(g);
}

TEST(test_dce) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = ph(g, "x", TP_FLOAT32, 1, SZ(3));
    ph(g, "unused_input", TP_FLOAT32, 1, SZ(3));
    tp_node *w = NULL;
    CHECK_OK(tp_graph_get_attr(g, "w", NULL, &w)); /* unused attribute: removed */
    tp_node *d1 = call(g, TP_OP_NEG, tup(1, N(x)));
    call(g, TP_OP_EXP, tup(1, N(d1))); /* dead chain neg -> exp */
    tp_node *keep = call(g, TP_OP_RELU, tup(1, N(x)));
    tp_node *imp = call(g, TP_OP_SIGMOID, tup(1, N(x)));
    tp_node_set_flags(imp, TP_NODE_IMPURE);
    tp_node *inplace = call(g, TP_OP_ADD_, tup(2, N(keep), I(1))); /* in-place: kept */
    CHECK(tp_node_is_impure(inplace));
    tp_node *unknown = NULL;
    tp_value args = tup(1, N(x));
    CHECK_OK(tp_graph_call_method(g, "frobnicate", &args, NULL, &unknown)); /* unknown effects: kept */
    tp_value_clear(&args);
    CHECK(tp_node_is_impure(unknown));
    CHECK(!tp_node_is_impure(keep));
    output(g, tup(1, N(keep)));
    bool changed = false;
    CHECK_OK(tp_graph_eliminate_dead_code(g, &changed));
    CHECK(changed);
    CHECK_STR(order(g), "x unused_input relu sigmoid add_ frobnicate output");
    CHECK_STR(users(x), "relu sigmoid frobnicate");
    CHECK_OK(tp_graph_lint(g));
    CHECK_OK(tp_graph_eliminate_dead_code(g, &changed));
    CHECK(!changed);
    /* dropping the flag lets DCE remove the node */
    tp_node_set_flags(imp, 0);
    CHECK_OK(tp_graph_eliminate_dead_code(g, NULL));
    CHECK_STR(order(g), "x unused_input relu add_ frobnicate output");
    CHECK_OK(tp_graph_lint(g));
    tp_graph_free(g);
}

/* x: f32[2, 3], get_attr weights, linear, relu, a dead relu, max/getitem,
 * add with kwargs, call_method view. */
static tp_graph *print_graph(void) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = ph(g, "x", TP_FLOAT32, 2, SZ(2, 3));
    tp_value v = meta_val(TP_FLOAT32, 2, SZ(4, 3));
    tp_node *w = NULL, *b = NULL;
    CHECK_OK(tp_graph_get_attr(g, "fc1.weight", &v, &w));
    tp_value_clear(&v);
    v = meta_val(TP_FLOAT32, 1, SZ(4));
    CHECK_OK(tp_graph_get_attr(g, "fc1.bias", &v, &b));
    tp_value_clear(&v);
    tp_node *lin = call(g, TP_OP_LINEAR, tup(3, N(x), N(w), N(b)));
    tp_node *relu = call(g, TP_OP_RELU, tup(1, N(lin)));
    call(g, TP_OP_RELU, tup(1, N(relu)));
    tp_node *mx = call(g, TP_OP_MAX, tup(2, N(relu), I(1)));
    tp_node *gi = call(g, TP_OP_GETITEM, tup(2, N(mx), I(0)));
    tp_value kw = tp_value_none();
    CHECK_OK(tp_value_dict(&kw));
    v = I(2);
    CHECK_OK(tp_value_dict_set(&kw, "alpha", &v));
    tp_node *add = call_kw(g, TP_OP_ADD, tup(2, N(gi), F(1.5)), kw);
    tp_value sizes = tp_value_none();
    CHECK_OK(tp_value_int_list(SZ(2, 1), 2, &sizes));
    tp_value args = tup(2, N(add), sizes);
    tp_node *view = NULL;
    CHECK_OK(tp_graph_call_method(g, "view", &args, NULL, &view));
    tp_value_clear(&args);
    if (view) CHECK(meta_is(view, TP_FLOAT32, 2, SZ(2, 1)));
    output(g, tup(2, N(view), N(gi)));
    return g;
}

static const char *const print_expected =
    "def forward(self, x: \"f32[2, 3]\"):\n"
    "    fc1_weight: \"f32[4, 3]\" = self.fc1.weight\n"
    "    fc1_bias: \"f32[4]\" = self.fc1.bias\n"
    "    linear: \"f32[2, 4]\" = torch.ops.aten.linear.default(x, fc1_weight, fc1_bias);  x = fc1_weight = fc1_bias = None\n"
    "    relu: \"f32[2, 4]\" = torch.ops.aten.relu.default(linear);  linear = None\n"
    "    relu_1: \"f32[2, 4]\" = torch.ops.aten.relu.default(relu);  relu_1 = None\n"
    "    max_1 = torch.ops.aten.max.default(relu, 1);  relu = None\n"
    "    getitem: \"f32[2]\" = max_1[0];  max_1 = None\n"
    "    add: \"f32[2]\" = torch.ops.aten.add.default(getitem, 1.5, alpha = 2)\n"
    "    view: \"f32[2, 1]\" = add.view([2, 1]);  add = None\n"
    "    return (view, getitem)\n";

TEST(test_print) {
    tp_graph *g = print_graph();
    CHECK_OK(tp_graph_lint(g));
    char *s = NULL;
    CHECK_OK(tp_graph_to_string(g, &s));
    CHECK_STR(s, print_expected);
    /* buffer form: truncates, returns the full length */
    char small[32];
    size_t len = tp_graph_to_buffer(g, small, sizeof small);
    CHECK(len == strlen(print_expected));
    CHECK(strlen(small) == sizeof small - 1 && strncmp(small, print_expected, sizeof small - 1) == 0);
    CHECK(tp_graph_to_buffer(g, NULL, 0) == len);
    /* FILE form */
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (f) {
        CHECK_OK(tp_graph_print(g, f));
        rewind(f);
        char buf[2048] = {0};
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        CHECK(got == len && strcmp(buf, print_expected) == 0);
        fclose(f);
    }
    tp_free(s);
    tp_graph_free(g);
}

TEST(test_print_constants) {
    /* Python reprs of constants (checked against CPython's repr) */
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = NULL;
    CHECK_OK(tp_graph_placeholder(g, "x", NULL, &x));
    tp_value floats = tp_value_none();
    CHECK_OK(tp_value_list(0, &floats));
    const double fv[] = {1.5, 0.1, 1e-05, 1e16, 1e15, -0.0, INFINITY, -INFINITY, NAN, 0.0001, 123.456, -2.5e-10, 1.0 / 3};
    for (size_t i = 0; i < sizeof fv / sizeof fv[0]; i++) {
        tp_value f = F(fv[i]);
        CHECK_OK(tp_value_append(&floats, &f));
    }
    tp_value d = tp_value_none();
    CHECK_OK(tp_value_dict(&d));
    tp_value v = I(1);
    CHECK_OK(tp_value_dict_set(&d, "k", &v));
    v = tup(1, I(2));
    CHECK_OK(tp_value_dict_set(&d, "j", &v));
    tp_value args = tup(11, N(x), floats, str("it's"), str("a\"b\n"), tp_value_dtype(TP_FLOAT16), tp_value_none(),
                        tp_value_bool(true), tp_value_bool(false), d, tup(0), I(-7));
    tp_node *n = NULL;
    CHECK_OK(tp_graph_create_node(g, TP_NODE_CALL_FUNCTION, "add", &args, NULL, NULL, &n));
    tp_value_clear(&args);
    args = tup(1, N(x));
    CHECK_OK(tp_graph_create_node(g, TP_NODE_CALL_METHOD, "frobnicate", &args, NULL, "frob", &n));
    tp_value_clear(&args);
    tp_value out = tp_value_none();
    CHECK_OK(tp_value_dict(&out));
    v = N(n);
    CHECK_OK(tp_value_dict_set(&out, "a", &v));
    v = tp_value_none();
    CHECK_OK(tp_value_dict_set(&out, "b", &v));
    output(g, out);
    char *s = NULL;
    CHECK_OK(tp_graph_to_string(g, &s));
    CHECK_STR(s, "def forward(self, x):\n"
                 "    add = torch.ops.aten.add.default(x, [1.5, 0.1, 1e-05, 1e+16, 1000000000000000.0, -0.0, inf, "
                 "-inf, nan, 0.0001, 123.456, -2.5e-10, 0.3333333333333333], \"it's\", 'a\"b\\n', torch.float16, "
                 "None, True, False, {'k': 1, 'j': (2,)}, (), -7);  add = None\n"
                 "    frob = x.frobnicate();  x = None\n"
                 "    return {'a': frob, 'b': None}\n");
    tp_free(s);
    tp_graph_free(g);
    /* an empty graph */
    CHECK_OK(tp_graph_new(&g));
    CHECK_OK(tp_graph_to_string(g, &s));
    CHECK_STR(s, "def forward(self):\n");
    tp_free(s);
    tp_graph_free(g);
}

TEST(test_copy) {
    tp_graph *g = print_graph();
    tp_node *relu = tp_graph_find_node(g, "relu");
    CHECK_OK(tp_node_meta_set_str(relu, "stack_trace", "m.py:3"));
    tp_node_set_flags(relu, TP_NODE_IMPURE);
    tp_graph *c = NULL;
    CHECK_OK(tp_graph_copy(g, &c));
    CHECK_OK(tp_graph_lint(c));
    char *a = NULL, *b = NULL;
    CHECK_OK(tp_graph_to_string(g, &a));
    CHECK_OK(tp_graph_to_string(c, &b));
    CHECK_STR(b, a);
    CHECK_STR(order(c), "x fc1_weight fc1_bias linear relu relu_1 max_1 getitem add view output");
    tp_node *crelu = tp_graph_find_node(c, "relu");
    CHECK(crelu && crelu != relu && tp_node_graph(crelu) == c);
    CHECK_STR(tp_node_meta_get_str(crelu, "stack_trace"), "m.py:3");
    CHECK(tp_node_flags(crelu) == TP_NODE_IMPURE);
    CHECK(tp_value_at(tp_node_args(crelu), 0)->u.node == tp_graph_find_node(c, "linear"));
    CHECK_STR(users(crelu), "relu_1 max_1");
    /* independent: mutating the copy leaves the original alone */
    CHECK_OK(tp_graph_eliminate_dead_code(c, NULL)); /* relu_1 is dead, relu impure */
    CHECK(tp_graph_find_node(c, "relu_1") == NULL && tp_graph_find_node(g, "relu_1") != NULL);
    CHECK(tp_graph_num_nodes(c) == tp_graph_num_nodes(g) - 1);
    CHECK_STR(users(relu), "relu_1 max_1");
    /* names continue after the copied ones (fx keeps counting) */
    tp_node *x = tp_graph_find_node(c, "x");
    tp_node *r = call(c, TP_OP_RELU, tup(1, N(x)));
    CHECK_STR(tp_node_name(r), "relu_2");
    tp_free(a);
    tp_free(b);
    tp_graph_free(c);
    tp_graph_free(g);
}

TEST(test_copy_into) {
    /* src(a, b) = relu(add(a, b)) */
    tp_graph *src = NULL, *dst = NULL;
    CHECK_OK(tp_graph_new(&src));
    tp_node *a = ph(src, "a", TP_FLOAT32, 1, SZ(3));
    tp_node *b = ph(src, "b", TP_FLOAT32, 1, SZ(3));
    tp_node *add = call(src, TP_OP_ADD, tup(2, N(a), N(b)));
    tp_node *relu = call(src, TP_OP_RELU, tup(1, N(add)));
    CHECK_OK(tp_node_meta_set_str(relu, "stack_trace", "src.py:1"));
    output(src, tup(2, N(relu), N(a)));
    /* dst(x, y): add = x + y; then inline src(add, y) before the output */
    CHECK_OK(tp_graph_new(&dst));
    tp_node *x = ph(dst, "x", TP_FLOAT32, 1, SZ(3));
    tp_node *y = ph(dst, "y", TP_FLOAT32, 1, SZ(3));
    tp_node *dadd = call(dst, TP_OP_ADD, tup(2, N(x), N(y)));
    tp_node *out = output(dst, tup(1, N(dadd)));
    CHECK_OK(tp_graph_set_insert_point(dst, out));
    tp_value map[2] = {N(dadd), N(y)};
    tp_value result = tp_value_none();
    CHECK_OK(tp_graph_copy_into(dst, src, map, 2, &result));
    CHECK_STR(order(dst), "x y add add_1 relu output");
    tp_node *add1 = tp_graph_find_node(dst, "add_1"), *drelu = tp_graph_find_node(dst, "relu");
    CHECK_STR(inputs(add1), "add y");
    CHECK_STR(users(dadd), "output add_1");
    CHECK(meta_is(drelu, TP_FLOAT32, 1, SZ(3)));
    CHECK_STR(tp_node_meta_get_str(drelu, "stack_trace"), "src.py:1");
    /* the result maps src's output: (relu, a) -> (relu, add) */
    CHECK(result.kind == TP_VAL_TUPLE && tp_value_len(&result) == 2);
    CHECK(tp_value_at(&result, 0)->u.node == drelu && tp_value_at(&result, 1)->u.node == dadd);
    tp_value oargs = tup(1, result);
    result = tp_value_none();
    CHECK_OK(tp_node_set_args(out, &oargs));
    tp_value_clear(&oargs);
    CHECK_OK(tp_graph_lint(dst));
    CHECK_STR(users(dadd), "output add_1");
    /* a placeholder may map to a constant */
    tp_value cmap[2] = {N(x), F(2.0)};
    CHECK_OK(tp_graph_copy_into(dst, src, cmap, 2, &result));
    tp_node *add2 = tp_graph_find_node(dst, "add_2");
    CHECK(add2 && tp_value_at(tp_node_args(add2), 1)->kind == TP_VAL_FLOAT);
    CHECK(tp_value_at(&result, 1)->u.node == x);
    tp_value_clear(&result);
    /* errors leave dst unchanged */
    int64_t count = tp_graph_num_nodes(dst);
    CHECK_STATUS(tp_graph_copy_into(dst, src, map, 1, &result), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("expected 2 inputs, got 1");
    tp_graph *other = NULL;
    CHECK_OK(tp_graph_new(&other));
    tp_node *o = ph(other, "o", TP_FLOAT32, 1, SZ(3));
    tp_value bad[2] = {N(o), N(y)};
    CHECK_STATUS(tp_graph_copy_into(dst, src, bad, 2, &result), TP_ERR_INVALID_ARG);
    /* src out of order: relu before add */
    CHECK_OK(tp_graph_move_before(src, relu, add));
    CHECK_STATUS(tp_graph_copy_into(dst, src, map, 2, &result), TP_ERR_VERIFY);
    CHECK(tp_graph_num_nodes(dst) == count);
    CHECK(result.kind == TP_VAL_NONE);
    CHECK_OK(tp_graph_lint(dst));
    tp_graph_free(other);
    tp_graph_free(src);
    tp_graph_free(dst);
}

/* ---- allocation failures ---------------------------------------------------- */

static tp_status build_and_copy(void *ctx) {
    (void)ctx;
    tp_graph *g = NULL, *c = NULL;
    tp_node *x = NULL, *y = NULL, *add = NULL, *relu = NULL, *out = NULL;
    tp_value args = tp_value_none(), v = tp_value_none();
    char *s = NULL;
    tp_status st = tp_graph_new(&g);
    if (st == TP_OK) {
        tp_tensor *m = NULL;
        st = tp_tensor_meta(TP_FLOAT32, 1, SZ(3), &m);
        v = tp_value_tensor(m);
    }
    if (st == TP_OK) st = tp_graph_placeholder(g, "x", &v, &x);
    if (st == TP_OK) st = tp_graph_placeholder(g, "y", &v, &y);
    if (st == TP_OK) st = tp_value_tuple(2, &args);
    if (st == TP_OK) {
        args.u.seq.items[0] = N(x);
        args.u.seq.items[1] = N(y);
        st = tp_graph_call_function(g, TP_OP_ADD, &args, NULL, &add);
    }
    if (st == TP_OK) {
        args.u.seq.items[1] = N(add);
        st = tp_graph_call_function(g, TP_OP_MUL, &args, NULL, &relu);
    }
    if (st == TP_OK) st = tp_node_meta_set_str(relu, "stack_trace", "t.py:1");
    if (st == TP_OK) st = tp_graph_output(g, &args, &out);
    if (st == TP_OK) st = tp_node_replace_all_uses_with(x, y, NULL, NULL, NULL);
    if (st == TP_OK) st = tp_graph_copy(g, &c);
    if (st == TP_OK) st = tp_graph_lint(c);
    if (st == TP_OK) st = tp_graph_to_string(c, &s);
    if (st == TP_OK) st = tp_graph_eliminate_dead_code(c, NULL);
    if (st == TP_OK) st = tp_graph_lint(g);
    tp_free(s);
    tp_value_clear(&args);
    tp_value_clear(&v);
    tp_graph_free(c);
    tp_graph_free(g);
    return st;
}

TEST(test_alloc_failures) {
    long n = check_alloc_failures("build and copy a graph", build_and_copy, NULL);
    CHECK(n > 20);
}

TEST_MAIN(T(test_kind_names), T(test_build_simple), T(test_names), T(test_build_errors), T(test_meta),
          T(test_infer_meta), T(test_use_lists), T(test_replace_all_uses), T(test_erase), T(test_insert_point),
          T(test_lint_failures), T(test_dce), T(test_print), T(test_print_constants), T(test_copy),
          T(test_copy_into), T(test_alloc_failures))
