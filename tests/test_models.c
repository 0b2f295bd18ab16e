/*
 * test_models.c - whole models end to end: an MLP, a CNN and a transformer
 * encoder layer, each built through the graph API (placeholders with meta
 * vals, get_attr weights, call_function nodes), run in the interpreter with
 * weights read from .npy files, and compared with PyTorch's output for the
 * same input (fixtures written by tests/fixtures/gen_models.py). Also: the
 * MLP's text form, shape errors at graph-build time naming the node, and
 * run-time errors (missing weight, wrong weight shape, wrong input count).
 *
 * Fixtures: fixtures/models/<model>/<state_dict key>.npy, input.npy,
 * output.npy. A get_attr target is the state_dict key ("0.weight").
 */
#include <stdarg.h>

#include "test_util.h"

/* ---- building graphs -------------------------------------------------------
 * A builder remembers the first failure, so a model can be written as a
 * straight sequence of calls: after a failure every further call is skipped
 * and returns NULL (no NULL node reference ever reaches the graph API). */

#define SZ(...) ((const int64_t[]){__VA_ARGS__})
#define NSZ(...) (int)(sizeof SZ(__VA_ARGS__) / sizeof(int64_t)), SZ(__VA_ARGS__)
#define N(x) tp_value_node(x)
#define I(x) tp_value_int(x)
#define F(x) tp_value_float(x)

typedef struct builder {
    tp_graph *g;
    bool ok;
} builder;

static void builder_init(builder *b) {
    b->g = NULL;
    b->ok = true;
    CHECK_OK(tp_graph_new(&b->g));
    if (!b->g) b->ok = false;
}

static void builder_fail(builder *b, tp_status st, const char *what) {
    fprintf(stderr, "  building %s: %s: %s\n", what, tp_status_str(st), tp_last_error());
    tp_test_current_failed++;
    b->ok = false;
}

/* A tuple of n values (taken over). */
static tp_value tup(int n, ...) {
    tp_value t = tp_value_none();
    va_list ap;
    va_start(ap, n);
    if (tp_value_tuple(n, &t) != TP_OK) {
        CHECK(!"tp_value_tuple failed");
        for (int i = 0; i < n; i++) {
            tp_value v = va_arg(ap, tp_value);
            tp_value_clear(&v);
        }
    } else {
        for (int i = 0; i < n; i++) t.u.seq.items[i] = va_arg(ap, tp_value);
    }
    va_end(ap);
    return t;
}

static tp_value ints(int n, const int64_t *v) {
    tp_value out = tp_value_none();
    CHECK_OK(tp_value_int_list(v, n, &out));
    return out;
}

static tp_value meta(tp_dtype dt, int ndim, const int64_t *sizes) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_meta(dt, ndim, sizes, &t));
    return tp_value_tensor(t);
}

static tp_node *input(builder *b, const char *name, int ndim, const int64_t *sizes) {
    tp_node *n = NULL;
    if (!b->ok) return NULL;
    tp_value v = meta(TP_FLOAT32, ndim, sizes);
    tp_status st = tp_graph_placeholder(b->g, name, &v, &n);
    if (st != TP_OK) builder_fail(b, st, name);
    tp_value_clear(&v);
    return n;
}

/* A float32 weight read through get_attr `target` with the given shape. */
static tp_node *weight(builder *b, const char *target, int ndim, const int64_t *sizes) {
    tp_node *n = NULL;
    if (!b->ok) return NULL;
    tp_value v = meta(TP_FLOAT32, ndim, sizes);
    tp_status st = tp_graph_get_attr(b->g, target, &v, &n);
    if (st != TP_OK) builder_fail(b, st, target);
    tp_value_clear(&v);
    return n;
}

/* call_function op(args) with kwargs (both taken over; kwargs None: none). */
static tp_node *call_kw(builder *b, tp_op op, tp_value args, tp_value kwargs) {
    tp_node *n = NULL;
    if (b->ok) {
        tp_status st = tp_graph_call_function(b->g, op, &args, kwargs.kind == TP_VAL_NONE ? NULL : &kwargs, &n);
        if (st != TP_OK) builder_fail(b, st, tp_op_name(op));
    }
    tp_value_clear(&args);
    tp_value_clear(&kwargs);
    return n;
}
static tp_node *call(builder *b, tp_op op, tp_value args) { return call_kw(b, op, args, tp_value_none()); }

/* output (x,) and the finished graph (NULL after a failure). */
static tp_graph *finish(builder *b, tp_node *x) {
    if (b->ok) {
        tp_value v = tup(1, N(x));
        tp_status st = tp_graph_output(b->g, &v, NULL);
        if (st != TP_OK) builder_fail(b, st, "output");
        tp_value_clear(&v);
    }
    if (b->ok) CHECK_OK(tp_graph_lint(b->g));
    if (!b->ok) {
        tp_graph_free(b->g);
        b->g = NULL;
    }
    return b->g;
}

/* ---- weights: an attribute resolver over fixtures/models/<model>/ ------------ */

typedef struct model_files {
    const char *model;
    int n_loaded;
    const char *corrupt_target; /* if set: this target resolves to a [1]-tensor */
    const char *missing_target; /* if set: this target is reported missing */
} model_files;

static tp_status resolve_weight(void *user, const char *target, tp_value *out) {
    model_files *m = user;
    tp_tensor *t = NULL;
    if (m->missing_target && strcmp(target, m->missing_target) == 0)
        return tp_error(TP_ERR_NOT_FOUND, "no weight '%s' in model %s", target, m->model);
    if (m->corrupt_target && strcmp(target, m->corrupt_target) == 0) {
        TP_TRY(tp_tensor_zeros(TP_FLOAT32, 1, SZ(1), &t));
    } else {
        char path[512];
        snprintf(path, sizeof path, "fixtures/models/%s/%s.npy", m->model, target);
        TP_TRY(tp_npy_load(path, &t));
    }
    m->n_loaded++;
    *out = tp_value_tensor(t);
    return TP_OK;
}

static tp_tensor *load_model_fixture(const char *model, const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s/%s", model, name);
    return load_fixture(rel);
}

/* Run g on `x` with the model's weights; compare the single output with
 * PyTorch's output.npy. */
static void run_and_compare(const tp_graph *g, const char *model, tp_tensor *x, int n_weights) {
    tp_tensor *expected = load_model_fixture(model, "output");
    model_files files = {.model = model};
    tp_value in = tp_value_tensor(tp_tensor_retain(x)), out = tp_value_none();
    CHECK_OK(tp_interp_run(g, &in, 1, resolve_weight, &files, &out));
    CHECK(files.n_loaded == n_weights);
    CHECK(out.kind == TP_VAL_TUPLE && tp_value_len(&out) == 1);
    const tp_value *y = tp_value_at(&out, 0);
    if (y && y->kind == TP_VAL_TENSOR) {
        CHECK(tp_tensor_dtype(y->u.tensor) == TP_FLOAT32);
        CHECK_CLOSE(y->u.tensor, expected, 1e-5, 1e-6);
    } else {
        CHECK(!"output is not a tensor");
    }
    tp_value_clear(&in);
    tp_value_clear(&out);
    tp_tensor_free(expected);
}

/* The same values as t in a non-contiguous layout: dims d0 and d1 swapped
 * in memory (a contiguous copy of t.transpose(d0, d1), transposed back). */
static tp_tensor *swapped_layout(tp_tensor *t, int64_t d0, int64_t d1) {
    tp_tensor *tt = NULL, *c = NULL, *back = NULL;
    CHECK_OK(tp_tensor_transpose(t, d0, d1, &tt));
    if (tt) CHECK_OK(tp_tensor_clone(tt, &c));
    if (c) CHECK_OK(tp_tensor_transpose(c, d0, d1, &back));
    tp_tensor_free(tt);
    tp_tensor_free(c);
    if (back) CHECK(!tp_tensor_is_contiguous(back));
    return back;
}

/* ---- the MLP: Sequential(Linear(8,32), ReLU, Linear(32,16), ReLU, Linear(16,4)) */

/* linear(x, <prefix>.weight [n_out, n_in], <prefix>.bias [n_out]); the
 * get_attr nodes are created in that order (C leaves the order in which
 * function arguments are evaluated open, so each is sequenced here). */
static tp_node *linear(builder *b, tp_node *x, const char *prefix, int64_t n_in, int64_t n_out) {
    char wname[64], bname[64];
    snprintf(wname, sizeof wname, "%s.weight", prefix);
    snprintf(bname, sizeof bname, "%s.bias", prefix);
    tp_node *w = weight(b, wname, NSZ(n_out, n_in));
    tp_node *bias = weight(b, bname, NSZ(n_out));
    return call(b, TP_OP_LINEAR, tup(3, N(x), N(w), N(bias)));
}

static tp_graph *build_mlp(int64_t batch) {
    builder b;
    builder_init(&b);
    tp_node *x = input(&b, "x", NSZ(batch, 8));
    tp_node *h = linear(&b, x, "0", 8, 32);
    h = call(&b, TP_OP_RELU, tup(1, N(h)));
    h = linear(&b, h, "2", 32, 16);
    h = call(&b, TP_OP_RELU, tup(1, N(h)));
    h = linear(&b, h, "4", 16, 4);
    return finish(&b, h);
}

/* ---- the CNN ------------------------------------------------------------------
 * conv1(3->8, 3x3, pad 1) bn1 relu max_pool(2) conv2(8->16, 3x3, pad 1) bn2
 * relu adaptive_avg_pool(1) flatten(1) fc(16->10); batch norm in eval mode. */

static tp_node *conv_bn_relu(builder *b, tp_node *x, const char *conv, const char *bn, int64_t c_in,
                             int64_t c_out) {
    char name[64];
    snprintf(name, sizeof name, "%s.weight", conv);
    tp_node *w = weight(b, name, NSZ(c_out, c_in, 3, 3));
    snprintf(name, sizeof name, "%s.bias", conv);
    tp_node *bias = weight(b, name, NSZ(c_out));
    /* conv2d(x, w, b, stride=[1, 1], padding=[1, 1]) */
    tp_node *h = call(b, TP_OP_CONV2D, tup(5, N(x), N(w), N(bias), ints(NSZ(1, 1)), ints(NSZ(1, 1))));
    /* batch_norm(h, running_mean, running_var, weight, bias, training=False, momentum, eps) */
    static const char *const bn_params[4] = {"running_mean", "running_var", "weight", "bias"};
    tp_node *p[4];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", bn, bn_params[i]);
        p[i] = weight(b, name, NSZ(c_out));
    }
    h = call(b, TP_OP_BATCH_NORM,
             tup(8, N(h), N(p[0]), N(p[1]), N(p[2]), N(p[3]), tp_value_bool(false), F(0.1), F(1e-5)));
    return call(b, TP_OP_RELU, tup(1, N(h)));
}

static tp_graph *build_cnn(void) {
    builder b;
    builder_init(&b);
    tp_node *x = input(&b, "x", NSZ(2, 3, 16, 16));
    tp_node *h = conv_bn_relu(&b, x, "conv1", "bn1", 3, 8);
    h = call(&b, TP_OP_MAX_POOL2D, tup(2, N(h), ints(NSZ(2, 2))));
    h = conv_bn_relu(&b, h, "conv2", "bn2", 8, 16);
    h = call(&b, TP_OP_ADAPTIVE_AVG_POOL2D, tup(2, N(h), ints(NSZ(1, 1))));
    h = call(&b, TP_OP_FLATTEN, tup(2, N(h), I(1)));
    h = linear(&b, h, "fc", 16, 10);
    return finish(&b, h);
}

/* ---- the transformer encoder layer ----------------------------------------------
 * nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32,
 * dropout=0, activation='gelu', batch_first=True), post-norm:
 *   x = norm1(x + out_proj(attention(x)))
 *   x = norm2(x + linear2(gelu(linear1(x))))
 * Variants: q/k/v weights cut from in_proj with slice or with split; the
 * attention by scaled_dot_product_attention or spelled out with
 * matmul/softmax. All must match PyTorch. */

enum { TF_B = 2, TF_L = 5, TF_E = 16, TF_H = 2, TF_D = TF_E / TF_H, TF_FF = 32 };

typedef struct transformer_variant {
    bool use_split; /* split+getitem instead of three slices */
    bool use_sdpa;  /* scaled_dot_product_attention instead of matmul/softmax */
} transformer_variant;

/* The three [E, ...] parts of an in_proj tensor along dim 0. */
static void in_proj_parts(builder *b, tp_node *w, bool use_split, tp_node *parts[3]) {
    if (use_split) {
        tp_node *s = call(b, TP_OP_SPLIT, tup(2, N(w), I(TF_E)));
        for (int i = 0; i < 3; i++) parts[i] = call(b, TP_OP_GETITEM, tup(2, N(s), I(i)));
    } else {
        for (int i = 0; i < 3; i++)
            parts[i] = call(b, TP_OP_SLICE, tup(4, N(w), I(0), I(i * TF_E), I((i + 1) * TF_E)));
    }
}

/* [B, L, E] -> [B, H, L, D] */
static tp_node *split_heads(builder *b, tp_node *t) {
    t = call(b, TP_OP_VIEW, tup(2, N(t), ints(NSZ(TF_B, TF_L, TF_H, TF_D))));
    return call(b, TP_OP_TRANSPOSE, tup(3, N(t), I(1), I(2)));
}

/* layer_norm(x, [E], <prefix>.weight, <prefix>.bias, eps=1e-5) */
static tp_node *layer_norm(builder *b, tp_node *x, const char *prefix) {
    char name[64];
    snprintf(name, sizeof name, "%s.weight", prefix);
    tp_node *w = weight(b, name, NSZ(TF_E));
    snprintf(name, sizeof name, "%s.bias", prefix);
    tp_node *bias = weight(b, name, NSZ(TF_E));
    return call(b, TP_OP_LAYER_NORM, tup(5, N(x), ints(NSZ(TF_E)), N(w), N(bias), F(1e-5)));
}

static tp_graph *build_transformer(transformer_variant v) {
    builder b;
    builder_init(&b);
    tp_node *x = input(&b, "x", NSZ(TF_B, TF_L, TF_E));

    /* self-attention */
    tp_node *w[3], *bias[3], *qkv[3];
    tp_node *in_w = weight(&b, "self_attn.in_proj_weight", NSZ(3 * TF_E, TF_E));
    tp_node *in_b = weight(&b, "self_attn.in_proj_bias", NSZ(3 * TF_E));
    in_proj_parts(&b, in_w, v.use_split, w);
    in_proj_parts(&b, in_b, v.use_split, bias);
    for (int i = 0; i < 3; i++) qkv[i] = split_heads(&b, call(&b, TP_OP_LINEAR, tup(3, N(x), N(w[i]), N(bias[i]))));
    tp_node *attn;
    if (v.use_sdpa) {
        attn = call(&b, TP_OP_SCALED_DOT_PRODUCT_ATTENTION, tup(3, N(qkv[0]), N(qkv[1]), N(qkv[2])));
    } else {
        tp_node *kt = call(&b, TP_OP_TRANSPOSE, tup(3, N(qkv[1]), I(-2), I(-1)));
        tp_node *scores = call(&b, TP_OP_MATMUL, tup(2, N(qkv[0]), N(kt)));
        scores = call(&b, TP_OP_DIV, tup(2, N(scores), F(sqrt((double)TF_D))));
        tp_node *probs = call(&b, TP_OP_SOFTMAX, tup(2, N(scores), I(-1)));
        attn = call(&b, TP_OP_MATMUL, tup(2, N(probs), N(qkv[2])));
    }
    attn = call(&b, TP_OP_TRANSPOSE, tup(3, N(attn), I(1), I(2))); /* [B, L, H, D] */
    attn = call(&b, TP_OP_RESHAPE, tup(2, N(attn), ints(NSZ(TF_B, TF_L, TF_E))));
    attn = linear(&b, attn, "self_attn.out_proj", TF_E, TF_E);
    tp_node *h = call(&b, TP_OP_ADD, tup(2, N(x), N(attn)));
    h = layer_norm(&b, h, "norm1");

    /* feed-forward */
    tp_node *f = linear(&b, h, "linear1", TF_E, TF_FF);
    f = call(&b, TP_OP_GELU, tup(1, N(f)));
    f = linear(&b, f, "linear2", TF_FF, TF_E);
    h = call(&b, TP_OP_ADD, tup(2, N(h), N(f)));
    h = layer_norm(&b, h, "norm2");
    return finish(&b, h);
}

/* True if the output node's value is (t,) with t a meta tensor of `sizes`. */
static bool output_meta_is(const tp_graph *g, int ndim, const int64_t *sizes) {
    tp_node *out = tp_graph_output_node(g);
    if (!out) return false;
    const tp_value *ret = tp_value_at(tp_node_args(out), 0);
    const tp_value *y = ret ? tp_value_at(ret, 0) : NULL;
    if (!y || y->kind != TP_VAL_NODE) return false;
    const tp_value *v = tp_node_meta_val(y->u.node);
    if (v->kind != TP_VAL_TENSOR || tp_tensor_dtype(v->u.tensor) != TP_FLOAT32 || tp_tensor_ndim(v->u.tensor) != ndim)
        return false;
    for (int d = 0; d < ndim; d++)
        if (tp_tensor_sizes(v->u.tensor)[d] != sizes[d]) return false;
    return true;
}

/* ---- tests --------------------------------------------------------------------- */

TEST(test_mlp) {
    tp_graph *g = build_mlp(5);
    tp_tensor *x = load_model_fixture("mlp", "input");
    if (g && x) {
        CHECK(output_meta_is(g, NSZ(5, 4)));
        run_and_compare(g, "mlp", x, 6);
        /* the same values as a non-contiguous input */
        tp_tensor *xt = swapped_layout(x, 0, 1);
        if (xt) run_and_compare(g, "mlp", xt, 6);
        tp_tensor_free(xt);
    }
    tp_tensor_free(x);
    tp_graph_free(g);
}

TEST(test_mlp_prepared_twice) {
    /* one prepared interpreter, two calls: same result, nothing kept between calls */
    tp_graph *g = build_mlp(5);
    tp_tensor *x = load_model_fixture("mlp", "input");
    tp_tensor *expected = load_model_fixture("mlp", "output");
    tp_interp *it = NULL;
    if (g) CHECK_OK(tp_interp_new(g, &it));
    if (it && x && expected) {
        CHECK(tp_interp_num_inputs(it) == 1);
        CHECK(tp_interp_graph(it) == g);
        for (int round = 0; round < 2; round++) {
            model_files files = {.model = "mlp"};
            tp_value in = tp_value_tensor(tp_tensor_retain(x)), out = tp_value_none();
            CHECK_OK(tp_interp_call(it, &in, 1, resolve_weight, &files, &out));
            const tp_value *y = tp_value_at(&out, 0);
            if (y && y->kind == TP_VAL_TENSOR) CHECK_CLOSE(y->u.tensor, expected, 1e-5, 1e-6);
            else CHECK(!"output is not a tensor");
            tp_value_clear(&in);
            tp_value_clear(&out);
        }
    }
    tp_interp_free(it);
    tp_tensor_free(x);
    tp_tensor_free(expected);
    tp_graph_free(g);
}

TEST(test_mlp_text) {
    tp_graph *g = build_mlp(5);
    char *s = NULL;
    if (g) CHECK_OK(tp_graph_to_string(g, &s));
    if (s) {
        static const char *const lines[] = {
            "def forward(self, x: \"f32[5, 8]\"):\n",
            "\n    linear: \"f32[5, 32]\" = torch.ops.aten.linear.default(x, _0_weight, _0_bias);"
            "  x = _0_weight = _0_bias = None\n",
            "\n    relu: \"f32[5, 32]\" = torch.ops.aten.relu.default(linear);  linear = None\n",
            "\n    linear_1: \"f32[5, 16]\" = torch.ops.aten.linear.default(relu, _2_weight, _2_bias);"
            "  relu = _2_weight = _2_bias = None\n",
            "\n    relu_1: \"f32[5, 16]\" = torch.ops.aten.relu.default(linear_1);  linear_1 = None\n",
            "\n    linear_2: \"f32[5, 4]\" = torch.ops.aten.linear.default(relu_1, _4_weight, _4_bias);"
            "  relu_1 = _4_weight = _4_bias = None\n",
            "\n    return (linear_2,)\n",
        };
        CHECK_MSG(strncmp(s, lines[0], strlen(lines[0])) == 0, "text starts:\n%s", s);
        for (size_t i = 1; i < sizeof lines / sizeof lines[0]; i++)
            CHECK_MSG(strstr(s, lines[i]) != NULL, "text lacks line\n%swhole text:\n%s", lines[i] + 1, s);
        /* the return is the last line */
        const char *ret = strstr(s, "    return ");
        CHECK(ret && strcmp(ret, "    return (linear_2,)\n") == 0);
        /* 1 def + 6 get_attr + 5 calls + 1 return */
        int n_lines = 0;
        for (const char *p = s; *p; p++) n_lines += *p == '\n';
        CHECK(n_lines == 13);
    }
    tp_free(s);
    tp_graph_free(g);
}

TEST(test_cnn) {
    tp_graph *g = build_cnn();
    tp_tensor *x = load_model_fixture("cnn", "input");
    if (g && x) {
        CHECK(output_meta_is(g, NSZ(2, 10)));
        CHECK(tp_graph_find_node(g, "batch_norm_1") != NULL);
        run_and_compare(g, "cnn", x, 14);
        /* channels-last memory layout */
        tp_tensor *x_cl = swapped_layout(x, 1, 3);
        if (x_cl) run_and_compare(g, "cnn", x_cl, 14);
        tp_tensor_free(x_cl);
    }
    tp_tensor_free(x);
    tp_graph_free(g);
}

TEST(test_transformer) {
    static const transformer_variant variants[] = {
        {.use_split = false, .use_sdpa = true},
        {.use_split = true, .use_sdpa = false},
        {.use_split = false, .use_sdpa = false},
        {.use_split = true, .use_sdpa = true},
    };
    tp_tensor *x = load_model_fixture("transformer", "input");
    for (size_t i = 0; i < sizeof variants / sizeof variants[0] && x; i++) {
        tp_graph *g = build_transformer(variants[i]);
        if (!g) {
            fprintf(stderr, "  variant %zu: graph not built\n", i);
            continue;
        }
        CHECK(output_meta_is(g, NSZ(TF_B, TF_L, TF_E)));
        int failed_before = tp_test_current_failed;
        run_and_compare(g, "transformer", x, 12);
        /* sequence-first memory layout */
        tp_tensor *x_seq = swapped_layout(x, 0, 1);
        if (x_seq) run_and_compare(g, "transformer", x_seq, 12);
        tp_tensor_free(x_seq);
        if (tp_test_current_failed != failed_before)
            fprintf(stderr, "  (variant %zu: split=%d sdpa=%d)\n", i, variants[i].use_split, variants[i].use_sdpa);
        tp_graph_free(g);
    }
    tp_tensor_free(x);
}

TEST(test_build_shape_error) {
    /* A weight whose meta does not fit: the error surfaces while building,
     * names the would-be node, and adds nothing to the graph. */
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    if (!g) return;
    tp_node *x = NULL, *w1 = NULL, *w2 = NULL, *lin = NULL, *bad = NULL;
    tp_value v = meta(TP_FLOAT32, NSZ(5, 8));
    CHECK_OK(tp_graph_placeholder(g, "x", &v, &x));
    tp_value_clear(&v);
    v = meta(TP_FLOAT32, NSZ(32, 8));
    CHECK_OK(tp_graph_get_attr(g, "fc1.weight", &v, &w1));
    tp_value_clear(&v);
    v = meta(TP_FLOAT32, NSZ(16, 31)); /* should be [16, 32] */
    CHECK_OK(tp_graph_get_attr(g, "fc2.weight", &v, &w2));
    tp_value_clear(&v);
    if (x && w1 && w2) {
        tp_value args = tup(2, N(x), N(w1));
        CHECK_OK(tp_graph_call_function(g, TP_OP_LINEAR, &args, NULL, &lin));
        tp_value_clear(&args);
    }
    if (lin) {
        int64_t n_before = tp_graph_num_nodes(g);
        tp_value args = tup(2, N(lin), N(w2));
        CHECK_STATUS(tp_graph_call_function(g, TP_OP_LINEAR, &args, NULL, &bad), TP_ERR_SHAPE);
        CHECK_ERR_CONTAINS("node linear_1 (linear): ");
        CHECK_ERR_CONTAINS("32"); /* the mismatching sizes */
        CHECK_ERR_CONTAINS("31");
        CHECK(bad == NULL);
        CHECK(tp_graph_num_nodes(g) == n_before);
        CHECK(tp_graph_find_node(g, "linear_1") == NULL);
        CHECK(tp_node_num_users(lin) == 0 && tp_node_num_users(w2) == 0);
        tp_value_clear(&args);
        /* a wrong dtype for the weight is a type error, also naming the node */
        v = meta(TP_INT64, NSZ(16, 32));
        tp_node *w3 = NULL;
        CHECK_OK(tp_graph_get_attr(g, "fc3.weight", &v, &w3));
        tp_value_clear(&v);
        if (w3) {
            args = tup(2, N(lin), N(w3));
            CHECK_STATUS(tp_graph_call_function(g, TP_OP_LINEAR, &args, NULL, &bad), TP_ERR_TYPE);
            CHECK_ERR_CONTAINS("node linear_"); /* the suffix the failed node would have had */
            CHECK_ERR_CONTAINS(" (linear): ");
            CHECK_ERR_CONTAINS("int64");
            tp_value_clear(&args);
        }
        /* conv2d with a kernel wider than the padded input */
        v = meta(TP_FLOAT32, NSZ(1, 1, 2, 2));
        tp_node *img = NULL, *k = NULL;
        CHECK_OK(tp_graph_placeholder(g, "img", &v, &img));
        tp_value_clear(&v);
        v = meta(TP_FLOAT32, NSZ(4, 1, 3, 3));
        CHECK_OK(tp_graph_get_attr(g, "conv.weight", &v, &k));
        tp_value_clear(&v);
        if (img && k) {
            args = tup(2, N(img), N(k));
            CHECK_STATUS(tp_graph_call_function(g, TP_OP_CONV2D, &args, NULL, &bad), TP_ERR_SHAPE);
            CHECK_ERR_CONTAINS("node conv2d (conv2d): ");
            tp_value_clear(&args);
        }
    }
    tp_graph_free(g);
}

TEST(test_run_errors) {
    tp_graph *g = build_mlp(5);
    tp_tensor *x = load_model_fixture("mlp", "input");
    if (g && x) {
        tp_value in = tp_value_tensor(tp_tensor_retain(x)), out = tp_value_none();
        /* a weight the resolver cannot find: its error, with the get_attr node as context */
        model_files files = {.model = "mlp", .missing_target = "2.bias"};
        CHECK_STATUS(tp_interp_run(g, &in, 1, resolve_weight, &files, &out), TP_ERR_NOT_FOUND);
        CHECK_ERR_CONTAINS("node _2_bias (2.bias): no weight '2.bias' in model mlp");
        CHECK(out.kind == TP_VAL_NONE);
        /* a weight file that does not exist */
        files = (model_files){.model = "no_such_model"};
        CHECK(tp_interp_run(g, &in, 1, resolve_weight, &files, &out) != TP_OK);
        CHECK_ERR_CONTAINS("node _0_weight (0.weight): ");
        CHECK(out.kind == TP_VAL_NONE);
        /* a weight of the wrong shape at run time: the kernel's error names the call node */
        files = (model_files){.model = "mlp", .corrupt_target = "2.weight"};
        CHECK_STATUS(tp_interp_run(g, &in, 1, resolve_weight, &files, &out), TP_ERR_SHAPE);
        CHECK_ERR_CONTAINS("node linear_1 (linear): ");
        CHECK(out.kind == TP_VAL_NONE);
        /* no resolver */
        CHECK_STATUS(tp_interp_run(g, &in, 1, NULL, NULL, &out), TP_ERR_MISSING);
        CHECK_ERR_CONTAINS("node _0_weight (0.weight): ");
        /* wrong number of inputs */
        files = (model_files){.model = "mlp"};
        CHECK_STATUS(tp_interp_run(g, NULL, 0, resolve_weight, &files, &out), TP_ERR_INVALID_ARG);
        CHECK_ERR_CONTAINS("expected 1 input, got 0");
        /* an input of the wrong width */
        tp_tensor *narrow = NULL;
        CHECK_OK(tp_tensor_narrow(x, 1, 0, 7, &narrow));
        tp_value in_bad = tp_value_tensor(narrow);
        CHECK_STATUS(tp_interp_run(g, &in_bad, 1, resolve_weight, &files, &out), TP_ERR_SHAPE);
        CHECK_ERR_CONTAINS("node linear (linear): ");
        tp_value_clear(&in_bad);
        tp_value_clear(&in);
    }
    tp_tensor_free(x);
    tp_graph_free(g);
}

TEST_MAIN(T(test_mlp), T(test_mlp_prepared_twice), T(test_mlp_text), T(test_cnn), T(test_transformer),
          T(test_build_shape_error), T(test_run_errors))
