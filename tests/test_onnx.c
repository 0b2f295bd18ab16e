/*
 * test_onnx.c - ONNX import: models exported by PyTorch 1.13 (a ResNet-style
 * CNN, a transformer encoder, the CNN with a dynamic batch dim) run and
 * match PyTorch within 1e-4; the program's signature, state and
 * constraints; TensorProto reading; and hostile or unsupported inputs
 * (truncation, bad lengths, deep nesting, external data leaving the
 * folder, unknown ops) giving clear errors. Small models are built here
 * with a minimal protobuf writer.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fail_alloc.h"
#include "test_util.h"
#include "tpexport/archive.h"
#include "tpexport/onnx.h"
#include "tpexport/tpexport.h"

/* ---- a minimal protobuf writer ---------------------------------------------- */

typedef struct pb {
    uint8_t data[8192];
    size_t len;
} pb;

static void pb_raw(pb *b, const void *p, size_t n) {
    if (b->len + n > sizeof b->data) return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}
static void pb_varint(pb *b, uint64_t v) {
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        if (v) byte |= 0x80;
        pb_raw(b, &byte, 1);
    } while (v);
}
static void pb_int(pb *b, int field, int64_t v) {
    pb_varint(b, (uint64_t)field << 3);
    pb_varint(b, (uint64_t)v);
}
static void pb_bytes(pb *b, int field, const void *p, size_t n) {
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, n);
    pb_raw(b, p, n);
}
static void pb_str(pb *b, int field, const char *s) { pb_bytes(b, field, s, strlen(s)); }
static void pb_msg(pb *b, int field, const pb *m) { pb_bytes(b, field, m->data, m->len); }

/* model: IR version 8, graph, one opset import (domain NULL: the default). */
static void wrap_model(pb *model, const pb *graph, const char *domain, int version) {
    pb opset = {0};
    if (domain && domain[0]) pb_str(&opset, 1, domain);
    pb_int(&opset, 2, version);
    memset(model, 0, sizeof *model);
    pb_int(model, 1, 8);
    pb_msg(model, 7, graph);
    pb_msg(model, 8, &opset);
}

/* ValueInfoProto for a float tensor of the given dims (dim < 0: dim_param "N"). */
static void value_info(pb *out, const char *name, int elem, const int64_t *dims, int nd) {
    pb shape = {0}, tt = {0}, ty = {0}, vi = {0};
    for (int i = 0; i < nd; i++) {
        pb d = {0};
        if (dims[i] >= 0) pb_int(&d, 1, dims[i]);
        else pb_str(&d, 2, "N");
        pb_msg(&shape, 1, &d);
    }
    pb_int(&tt, 1, elem);
    pb_msg(&tt, 2, &shape);
    pb_msg(&ty, 1, &tt);
    pb_str(&vi, 1, name);
    pb_msg(&vi, 2, &ty);
    *out = vi;
}

/* A one-node model: y = op(x) with x float [2, 3] (dim 0 symbolic when dyn). */
static void one_node_model(pb *model, const char *op, bool dyn, const pb *extra_graph_fields) {
    pb node = {0}, graph = {0}, in = {0}, out = {0};
    pb_str(&node, 1, "x");
    pb_str(&node, 2, "y");
    pb_str(&node, 3, "the_node");
    pb_str(&node, 4, op);
    int64_t dims[2] = {dyn ? -1 : 2, 3};
    value_info(&in, "x", 1, dims, 2);
    value_info(&out, "y", 1, dims, 2);
    pb_msg(&graph, 1, &node);
    pb_str(&graph, 2, "g");
    if (extra_graph_fields) pb_raw(&graph, extra_graph_fields->data, extra_graph_fields->len);
    pb_msg(&graph, 11, &in);
    pb_msg(&graph, 12, &out);
    wrap_model(model, &graph, NULL, 13);
}

/* ---- helpers ----------------------------------------------------------------- */

static tp_tensor *load_onnx_fixture(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "onnx/%s", name);
    return load_fixture(path);
}

static void run_and_compare(tp_program *p, tp_tensor *x, tp_tensor *want) {
    tp_value arg = tp_value_tensor(tp_tensor_retain(x)), out = tp_value_none();
    CHECK_OK(tp_program_call(p, &arg, 1, NULL, &out));
    const tp_value *got = out.kind == TP_VAL_TUPLE ? tp_value_at(&out, 0) : &out;
    CHECK(got && got->kind == TP_VAL_TENSOR);
    if (got && got->kind == TP_VAL_TENSOR) CHECK_CLOSE(got->u.tensor, want, 1e-4, 1e-4);
    tp_value_clear(&out);
    tp_value_clear(&arg);
}

/* ---- models exported by PyTorch ------------------------------------------------ */

TEST(resnet_matches_pytorch) {
    tp_program *p = NULL;
    tp_onnx_report rep;
    CHECK_OK(tp_onnx_load("fixtures/onnx/resnet.onnx", NULL, &p, &rep));
    CHECK(rep.n_issues == 0);
    CHECK(rep.opset == 13);
    CHECK(rep.op_types && strstr(rep.op_types, "Conv"));
    tp_onnx_report_clear(&rep);
    if (!p) return;
    const tp_signature *sig = tp_program_signature(p);
    tp_strings users = {0}, params = {0};
    CHECK_OK(tp_signature_view_names(sig, TP_VIEW_USER_INPUTS, &users));
    CHECK_OK(tp_signature_view_names(sig, TP_VIEW_PARAMETERS, &params));
    CHECK(users.n == 1);
    CHECK(params.n > 5); /* conv weights, folded batch norms, fc */
    tp_strings_free(&users);
    tp_strings_free(&params);
    CHECK(tp_program_example_input(p, "x") != NULL);
    tp_tensor *x = load_onnx_fixture("resnet_x"), *y = load_onnx_fixture("resnet_y");
    if (x && y) run_and_compare(p, x, y);
    tp_tensor_free(x);
    tp_tensor_free(y);
    tp_program_free(p);
}

TEST(transformer_matches_pytorch) {
    tp_program *p = NULL;
    CHECK_OK(tp_onnx_load("fixtures/onnx/transformer.onnx", NULL, &p, NULL));
    if (!p) return;
    tp_tensor *x = load_onnx_fixture("transformer_x"), *y = load_onnx_fixture("transformer_y");
    if (x && y) run_and_compare(p, x, y);
    tp_tensor_free(x);
    tp_tensor_free(y);
    tp_program_free(p);
}

/* LSTM (2 layers, bidirectional, batch_first), GRU and RNN exported by
 * PyTorch: unrolled at import into ordinary ops (gen_onnx_rnn.py). */
static void recurrent_model(const char *name) {
    char path[128], xs[64], ys[64];
    snprintf(path, sizeof path, "fixtures/onnx/%s.onnx", name);
    snprintf(xs, sizeof xs, "%s_x", name);
    snprintf(ys, sizeof ys, "%s_y", name);
    tp_program *p = NULL;
    tp_onnx_report rep;
    CHECK_OK(tp_onnx_load(path, NULL, &p, &rep));
    CHECK_MSG(rep.n_issues == 0, "%s: %d import issues", name, rep.n_issues);
    tp_onnx_report_clear(&rep);
    if (!p) return;
    tp_tensor *x = load_onnx_fixture(xs), *y = load_onnx_fixture(ys);
    if (x && y) run_and_compare(p, x, y);
    tp_tensor_free(x);
    tp_tensor_free(y);
    tp_program_free(p);
}

TEST(recurrent_models_match_pytorch) {
    recurrent_model("lstm");
    recurrent_model("gru");
    recurrent_model("rnn");
    recurrent_model("gru_act"); /* HardSigmoid/LeakyRelu with alpha, beta and clip, against onnxruntime */
}

TEST(dynamic_batch_dim) {
    tp_onnx_dim_range range;
    CHECK_OK(tp_onnx_parse_dim_range("batch=1:8", &range));
    CHECK(range.min == 1 && range.max == 8);
    tp_onnx_options opts = {0};
    opts.n_dim_ranges = 1;
    opts.dim_ranges = &range;
    tp_program *p = NULL;
    CHECK_OK(tp_onnx_load("fixtures/onnx/dynamic.onnx", &opts, &p, NULL));
    if (!p) return;
    const tp_range_constraint *rc = tp_program_find_range(p, "batch");
    CHECK(rc && rc->min == 1 && rc->max == 8);
    CHECK(tp_program_num_dim_rules(p) == 4); /* one per dim of x */
    CHECK(tp_program_example_input(p, "x") == NULL);
    tp_tensor *x = load_onnx_fixture("dynamic_x"), *y = load_onnx_fixture("dynamic_y");
    if (x && y) run_and_compare(p, x, y); /* batch 3, exported at 3 */
    if (x && y) {                         /* batch 2: the first two rows */
        tp_tensor *x2 = NULL, *y2 = NULL;
        CHECK_OK(tp_tensor_narrow(x, 0, 0, 2, &x2));
        CHECK_OK(tp_tensor_narrow(y, 0, 0, 2, &y2));
        if (x2 && y2) run_and_compare(p, x2, y2);
        tp_tensor_free(x2);
        tp_tensor_free(y2);
        /* batch 9 violates the range */
        tp_tensor *big = NULL;
        CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 4, (int64_t[]){9, 3, 16, 16}, &big));
        tp_value arg = tp_value_tensor(big), out = tp_value_none();
        CHECK_STATUS(tp_program_call(p, &arg, 1, NULL, &out), TP_ERR_CONSTRAINT);
        tp_value_clear(&arg);
        tp_value_clear(&out);
    }
    tp_tensor_free(x);
    tp_tensor_free(y);
    tp_program_free(p);
}

/* A GPT-2-style decoder exported by PyTorch with dynamic batch and sequence
 * axes: its Shape -> Gather -> Concat -> Reshape chains, the causal mask
 * and positions sliced to the run-time length become symbolic-int
 * arithmetic, so the program imported once matches PyTorch at three
 * sizes, also after a save and load. */
TEST(gpt2_dynamic_axes_match_pytorch) {
    tp_onnx_dim_range ranges[2];
    CHECK_OK(tp_onnx_parse_dim_range("batch=1:8", &ranges[0]));
    CHECK_OK(tp_onnx_parse_dim_range("seq=1:16", &ranges[1]));
    tp_onnx_options opts = {0};
    opts.n_dim_ranges = 2;
    opts.dim_ranges = ranges;
    tp_program *p = NULL;
    tp_onnx_report rep;
    CHECK_OK(tp_onnx_load("fixtures/onnx/gpt2.onnx", &opts, &p, &rep));
    CHECK(rep.n_issues == 0 && rep.n_need_constant == 0);
    CHECK(rep.op_types && strstr(rep.op_types, "Shape") && strstr(rep.op_types, "Range") == NULL);
    tp_onnx_report_clear(&rep);
    if (!p) return;
    int n_sym = 0;
    for (tp_node *n = tp_graph_first_node(tp_program_graph(p)); n; n = tp_node_next(n))
        n_sym += tp_node_get_kind(n) == TP_NODE_CALL_FUNCTION && tp_node_op(n) == TP_OP_SYM_SIZE;
    CHECK(n_sym > 0);
    void *data = NULL;
    size_t size = 0;
    tp_archive_entry e = {"model", p};
    CHECK_OK(tp_archive_save_buffer(&e, 1, NULL, 0, &data, &size));
    tp_archive *a = NULL;
    if (data) CHECK_OK(tp_archive_load_buffer(data, size, NULL, &a));
    static const char *const names[3][2] = {{"gpt2_x1", "gpt2_y1"}, {"gpt2_x2", "gpt2_y2"}, {"gpt2_x3", "gpt2_y3"}};
    for (int i = 0; i < 3; i++) { /* [1, 5], [2, 9], [3, 16] */
        tp_tensor *x = load_onnx_fixture(names[i][0]), *y = load_onnx_fixture(names[i][1]);
        if (x && y) run_and_compare(p, x, y);
        if (x && y && a) run_and_compare(tp_archive_program(a, 0), x, y);
        tp_tensor_free(x);
        tp_tensor_free(y);
    }
    /* a sequence beyond the range is refused before running */
    tp_tensor *big = NULL;
    CHECK_OK(tp_tensor_zeros(TP_INT64, 2, (int64_t[]){1, 17}, &big));
    tp_value arg = tp_value_tensor(big), out = tp_value_none();
    CHECK_STATUS(tp_program_call(p, &arg, 1, NULL, &out), TP_ERR_CONSTRAINT);
    tp_value_clear(&arg);
    tp_value_clear(&out);
    tp_archive_free(a);
    tp_free(data);
    tp_program_free(p);
}

/* Input values specialise a shape-data graph input; one naming no graph
 * input, or of another dtype or shape than declared, is refused. */
TEST(input_values_checked) {
    tp_tensor *good = NULL, *bad_shape = NULL, *bad_dtype = NULL;
    CHECK_OK(tp_tensor_from_data(TP_INT64, 1, (int64_t[]){3}, (int64_t[]){4, 0, -1}, &good));
    CHECK_OK(tp_tensor_from_data(TP_INT64, 1, (int64_t[]){2}, (int64_t[]){4, -1}, &bad_shape));
    CHECK_OK(tp_tensor_from_data(TP_INT32, 1, (int64_t[]){3}, (int32_t[]){4, 0, -1}, &bad_dtype));
    const char *names[1] = {"shape"}, *wrong[1] = {"shapes"};
    tp_onnx_options o = {0};
    o.n_input_values = 1;
    o.input_value_names = names;
    tp_program *p = NULL;
    o.input_values = &good;
    CHECK_OK(tp_onnx_load("fixtures/onnx/reshape_input.onnx", &o, &p, NULL));
    tp_tensor *x = load_onnx_fixture("reshape_x");
    if (p && x) {
        tp_value arg = tp_value_tensor(tp_tensor_retain(x)), out = tp_value_none();
        CHECK_OK(tp_program_call(p, &arg, 1, NULL, &out));
        const tp_value *y = out.kind == TP_VAL_TUPLE ? tp_value_at(&out, 0) : &out;
        CHECK(y && y->kind == TP_VAL_TENSOR && tp_tensor_ndim(y->u.tensor) == 3 && tp_tensor_sizes(y->u.tensor)[0] == 4 &&
              tp_tensor_sizes(y->u.tensor)[1] == 3 && tp_tensor_sizes(y->u.tensor)[2] == 2);
        tp_value_clear(&out);
        tp_value_clear(&arg);
    }
    tp_program_free(p);
    p = NULL;
    o.input_values = &bad_shape;
    CHECK_STATUS(tp_onnx_load("fixtures/onnx/reshape_input.onnx", &o, &p, NULL), TP_ERR_SHAPE);
    CHECK_ERR_CONTAINS("value given for graph input 'shape' has size 2 at dim 0, declared 3");
    o.input_values = &bad_dtype;
    CHECK_STATUS(tp_onnx_load("fixtures/onnx/reshape_input.onnx", &o, &p, NULL), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("value given for graph input 'shape' is int32, the input is declared int64");
    o.input_values = &good;
    o.input_value_names = wrong;
    CHECK_STATUS(tp_onnx_load("fixtures/onnx/reshape_input.onnx", &o, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("input value 'shapes' names no graph input (its inputs: x, shape)");
    CHECK(p == NULL);
    tp_tensor_free(x);
    tp_tensor_free(good);
    tp_tensor_free(bad_shape);
    tp_tensor_free(bad_dtype);
}

/* MobileNetV3-style (depthwise, hardswish, ReLU6, SE with hardsigmoid),
 * EfficientNet-style (MBConv, SiLU, SE with sigmoid; dynamic batch, also
 * run on its first row) and ViT-style (patch conv, class token, GELU)
 * models exported by PyTorch match it within 1e-4. */
TEST(vision_models_match_pytorch) {
    static const char *const names[] = {"mobilenet", "efficientnet", "vit"};
    for (int i = 0; i < 3; i++) {
        char path[128], xn[64], yn[64];
        snprintf(path, sizeof path, "fixtures/onnx/%s.onnx", names[i]);
        snprintf(xn, sizeof xn, "%s_x", names[i]);
        snprintf(yn, sizeof yn, "%s_y", names[i]);
        tp_program *p = NULL;
        tp_onnx_report rep;
        CHECK_OK(tp_onnx_load(path, NULL, &p, &rep));
        CHECK(rep.n_issues == 0);
        tp_onnx_report_clear(&rep);
        tp_tensor *x = load_onnx_fixture(xn), *y = load_onnx_fixture(yn);
        if (p && x && y) run_and_compare(p, x, y);
        if (p && x && y && i == 1) { /* dynamic batch: one image */
            tp_tensor *x1 = NULL, *y1 = NULL;
            CHECK_OK(tp_tensor_narrow(x, 0, 0, 1, &x1));
            CHECK_OK(tp_tensor_narrow(y, 0, 0, 1, &y1));
            if (x1 && y1) run_and_compare(p, x1, y1);
            tp_tensor_free(x1);
            tp_tensor_free(y1);
        }
        tp_tensor_free(x);
        tp_tensor_free(y);
        tp_program_free(p);
    }
}

/* Reshape's shape given when the program runs (no specialisation): ONNX's
 * 0 copies the input's dim, -1 is inferred, for two shapes in turn. */
TEST(run_time_reshape) {
    tp_program *p = NULL;
    tp_onnx_report rep;
    CHECK_OK(tp_onnx_load("fixtures/onnx/reshape_input.onnx", NULL, &p, &rep));
    CHECK(rep.n_need_constant == 0);
    tp_onnx_report_clear(&rep);
    tp_tensor *x = load_onnx_fixture("reshape_x");
    static const int64_t shapes[2][3] = {{4, 0, -1}, {-1, 2, 6}}, want[2][3] = {{4, 3, 2}, {2, 2, 6}};
    for (int k = 0; p && x && k < 2; k++) {
        tp_tensor *sh = NULL;
        CHECK_OK(tp_tensor_from_data(TP_INT64, 1, (int64_t[]){3}, shapes[k], &sh));
        tp_value a[2] = {tp_value_tensor(tp_tensor_retain(x)), tp_value_tensor(sh)}, o = tp_value_none();
        CHECK_OK(tp_program_call(p, a, 2, NULL, &o));
        const tp_value *y = o.kind == TP_VAL_TUPLE ? tp_value_at(&o, 0) : &o;
        CHECK(y && y->kind == TP_VAL_TENSOR && tp_tensor_ndim(y->u.tensor) == 3);
        for (int d = 0; y && y->kind == TP_VAL_TENSOR && d < 3 && tp_tensor_ndim(y->u.tensor) == 3; d++)
            CHECK(tp_tensor_sizes(y->u.tensor)[d] == want[k][d]);
        if (y && y->kind == TP_VAL_TENSOR) CHECK(tp_tensor_item_f64(y->u.tensor, 23) == 23.0);
        tp_value_clear(&o);
        tp_value_clear(&a[0]);
        tp_value_clear(&a[1]);
    }
    tp_tensor_free(x);
    tp_program_free(p);
}

TEST(parse_dim_range) {
    tp_onnx_dim_range r;
    CHECK_OK(tp_onnx_parse_dim_range("seq=2", &r));
    CHECK(r.min == 2 && r.max == TP_DIM_UNBOUNDED);
    CHECK_OK(tp_onnx_parse_dim_range("seq=2:inf", &r));
    CHECK(r.max == TP_DIM_UNBOUNDED);
    CHECK_STATUS(tp_onnx_parse_dim_range("seq", &r), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp_onnx_parse_dim_range("seq=4:2", &r), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("seq=4:2");
}

/* ---- small built models ------------------------------------------------------------ */

TEST(one_node_relu_runs) {
    pb m;
    one_node_model(&m, "Relu", false, NULL);
    tp_program *p = NULL;
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    if (!p) return;
    float xs[6] = {-1, 2, -3, 4, 0, -0.5f};
    tp_tensor *x = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 2, (int64_t[]){2, 3}, xs, &x));
    tp_value arg = tp_value_tensor(x), out = tp_value_none();
    CHECK_OK(tp_program_call(p, &arg, 1, NULL, &out));
    const tp_value *y = out.kind == TP_VAL_TUPLE ? tp_value_at(&out, 0) : &out;
    CHECK(y && y->kind == TP_VAL_TENSOR && tp_tensor_item_f64(y->u.tensor, 1) == 2.0 &&
          tp_tensor_item_f64(y->u.tensor, 2) == 0.0);
    tp_value_clear(&out);
    tp_value_clear(&arg);
    tp_program_free(p);
}

TEST(unsupported_op_names_node_op_and_opset) {
    pb m;
    one_node_model(&m, "Bernoulli", false, NULL);
    tp_program *p = NULL;
    tp_onnx_report rep;
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, &rep), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("node 'the_node' (Bernoulli, opset 13): random ops are not supported");
    CHECK(p == NULL);
    CHECK(rep.n_issues == 1 && strcmp(rep.issues[0].op_type, "Bernoulli") == 0);
    tp_onnx_report_clear(&rep);
    one_node_model(&m, "NoSuchOp", false, NULL);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("op 'NoSuchOp' is not supported");
}

TEST(symbolic_dim_becomes_dynamic) {
    pb m;
    one_node_model(&m, "Sigmoid", true, NULL);
    tp_program *p = NULL;
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    if (!p) return;
    const tp_range_constraint *r = tp_program_find_range(p, "N");
    CHECK(r && r->min == 0 && r->max == TP_DIM_UNBOUNDED);
    tp_tensor *x = NULL;
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){5, 3}, &x));
    tp_value arg = tp_value_tensor(x), out = tp_value_none();
    CHECK_OK(tp_program_call(p, &arg, 1, NULL, &out));
    const tp_value *y = out.kind == TP_VAL_TUPLE ? tp_value_at(&out, 0) : &out;
    CHECK(y && y->kind == TP_VAL_TENSOR && tp_tensor_size(y->u.tensor, 0) == 5 &&
          tp_tensor_item_f64(y->u.tensor, 0) == 0.5);
    tp_value_clear(&out);
    tp_value_clear(&arg);
    tp_program_free(p);
}

TEST(truncated_and_garbage_models) {
    pb m;
    one_node_model(&m, "Relu", false, NULL);
    tp_program *p = NULL;
    for (size_t cut = 1; cut < m.len; cut += 7) {
        tp_status st = tp_onnx_load_buffer(m.data, m.len - cut, NULL, NULL, &p, NULL);
        CHECK(st != TP_OK || p != NULL);
        tp_program_free(p);
        p = NULL;
    }
    const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    CHECK_STATUS(tp_onnx_load_buffer(garbage, sizeof garbage, NULL, NULL, &p, NULL), TP_ERR_CORRUPT);
    /* a length running past the end */
    const uint8_t bad_len[] = {0x3a, 0x7f, 0x0a};
    CHECK_STATUS(tp_onnx_load_buffer(bad_len, sizeof bad_len, NULL, NULL, &p, NULL), TP_ERR_CORRUPT);
    CHECK_ERR_CONTAINS("runs past the end");
    CHECK_STATUS(tp_onnx_load("fixtures/onnx/does_not_exist.onnx", NULL, &p, NULL), TP_ERR_IO);
}

TEST(deep_nesting_is_refused) {
    /* graph -> node -> attribute -> graph -> ... 200 levels */
    static pb levels[2];
    pb *cur = &levels[0], *next = &levels[1];
    memset(cur, 0, sizeof *cur);
    for (int i = 0; i < 200; i++) {
        pb attr = {0}, node = {0};
        pb_str(&attr, 1, "body");
        pb_msg(&attr, 6, cur);
        pb_msg(&node, 5, &attr);
        memset(next, 0, sizeof *next);
        pb_msg(next, 1, &node);
        pb *t = cur;
        cur = next;
        next = t;
        if (cur->len > 7000) break;
    }
    pb model = {0};
    pb_int(&model, 1, 8);
    pb_msg(&model, 7, cur);
    tp_program *p = NULL;
    CHECK_STATUS(tp_onnx_load_buffer(model.data, model.len, NULL, NULL, &p, NULL), TP_ERR_CORRUPT);
    CHECK_ERR_CONTAINS("nesting");
}

/* An initializer W [2, 3] read from external data; y = x + W. */
static void external_model(pb *model, const char *location, const char *length) {
    pb node = {0}, graph = {0}, in = {0}, out = {0}, init = {0}, e1 = {0}, e2 = {0};
    pb_str(&node, 1, "x");
    pb_str(&node, 1, "W");
    pb_str(&node, 2, "y");
    pb_str(&node, 4, "Add");
    int64_t dims[2] = {2, 3};
    value_info(&in, "x", 1, dims, 2);
    value_info(&out, "y", 1, dims, 2);
    pb_int(&init, 1, 2);
    pb_int(&init, 1, 3);
    pb_int(&init, 2, 1);
    pb_str(&init, 8, "W");
    pb_str(&e1, 1, "location");
    pb_str(&e1, 2, location);
    pb_msg(&init, 13, &e1);
    pb_str(&e2, 1, "length");
    pb_str(&e2, 2, length);
    pb_msg(&init, 13, &e2);
    pb_int(&init, 14, 1);
    pb_msg(&graph, 1, &node);
    pb_msg(&graph, 5, &init);
    pb_msg(&graph, 11, &in);
    pb_msg(&graph, 12, &out);
    wrap_model(model, &graph, NULL, 13);
}

TEST(external_data_inside_folder_only) {
    char dir[] = "/tmp/tp_onnx_test_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(!"mkdtemp");
        return;
    }
    char path[256], wpath[256];
    snprintf(wpath, sizeof wpath, "%s/w.bin", dir);
    float w[6] = {1, 2, 3, 4, 5, 6};
    FILE *f = fopen(wpath, "wb");
    CHECK(f && fwrite(w, sizeof w, 1, f) == 1);
    if (f) fclose(f);
    pb m;
    tp_program *p = NULL;
    external_model(&m, "w.bin", "24");
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    f = fopen(path, "wb");
    CHECK(f && fwrite(m.data, m.len, 1, f) == 1);
    if (f) fclose(f);
    CHECK_OK(tp_onnx_load(path, NULL, &p, NULL));
    if (p) {
        tp_tensor *x = NULL;
        CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){2, 3}, &x));
        tp_value arg = tp_value_tensor(x), out = tp_value_none();
        CHECK_OK(tp_program_call(p, &arg, 1, NULL, &out));
        const tp_value *y = out.kind == TP_VAL_TUPLE ? tp_value_at(&out, 0) : &out;
        CHECK(y && y->kind == TP_VAL_TENSOR && tp_tensor_item_f64(y->u.tensor, 5) == 6.0);
        tp_value_clear(&out);
        tp_value_clear(&arg);
        tp_program_free(p);
        p = NULL;
    }
    /* escaping the folder, wrong length, missing file */
    const char *bad[][2] = {{"../w.bin", "24"}, {"/etc/passwd", "24"}, {"w.bin", "12"}, {"nope.bin", "24"}};
    const tp_status want[] = {TP_ERR_CORRUPT, TP_ERR_CORRUPT, TP_ERR_CORRUPT, TP_ERR_IO};
    for (int i = 0; i < 4; i++) {
        external_model(&m, bad[i][0], bad[i][1]);
        f = fopen(path, "wb");
        CHECK(f && fwrite(m.data, m.len, 1, f) == 1);
        if (f) fclose(f);
        CHECK_STATUS(tp_onnx_load(path, NULL, &p, NULL), want[i]);
        if (i < 2) CHECK_ERR_CONTAINS("leaves the model's folder");
    }
    /* from a buffer there is no folder */
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_UNSUPPORTED);
    unlink(path);
    unlink(wpath);
    rmdir(dir);
}

TEST(tensor_proto_reading) {
    /* dims [2, 2], INT64 via int64_data */
    pb t = {0};
    pb_int(&t, 1, 2);
    pb_int(&t, 1, 2);
    pb_int(&t, 2, 7);
    for (int i = 0; i < 4; i++) pb_int(&t, 7, -i);
    tp_tensor *x = NULL;
    CHECK_OK(tp_onnx_load_tensor_buffer(t.data, t.len, &x));
    CHECK(x && tp_tensor_dtype(x) == TP_INT64 && tp_tensor_numel(x) == 4 && tp_tensor_item_f64(x, 3) == -3.0);
    tp_tensor_free(x);
    /* raw_data of the wrong size */
    pb r = {0};
    pb_int(&r, 1, 3);
    pb_int(&r, 2, 1);
    float two[2] = {1, 2};
    pb_bytes(&r, 9, two, sizeof two);
    CHECK_STATUS(tp_onnx_load_tensor_buffer(r.data, r.len, &x), TP_ERR_CORRUPT);
    CHECK_ERR_CONTAINS("raw_data has 8 bytes, expected 12");
    /* a huge dim */
    pb h = {0};
    pb_int(&h, 1, (int64_t)1 << 40);
    pb_int(&h, 1, (int64_t)1 << 40);
    pb_int(&h, 2, 1);
    CHECK_STATUS(tp_onnx_load_tensor_buffer(h.data, h.len, &x), TP_ERR_CORRUPT);
    /* a string tensor needs one string per element (read as UTF-8 bytes: strings_as_utf8_bytes) */
    pb s = {0};
    pb_int(&s, 1, 1);
    pb_int(&s, 2, 8);
    CHECK_STATUS(tp_onnx_load_tensor_buffer(s.data, s.len, &x), TP_ERR_CORRUPT);
    CHECK_ERR_CONTAINS("0 strings for 1 elements");
}

/* x [2, 3] -> Reshape(shape = initializer [3, 2]) -> Add(initializer fc.weight [3, 2]) -> y */
static void folding_model(pb *model) {
    pb n1 = {0}, n2 = {0}, graph = {0}, in = {0}, out = {0}, shape = {0}, w = {0};
    pb_str(&n1, 1, "x");
    pb_str(&n1, 1, "shape");
    pb_str(&n1, 2, "r");
    pb_str(&n1, 4, "Reshape");
    pb_str(&n2, 1, "r");
    pb_str(&n2, 1, "fc.weight");
    pb_str(&n2, 2, "y");
    pb_str(&n2, 4, "Add");
    int64_t xd[2] = {2, 3}, yd[2] = {3, 2};
    value_info(&in, "x", 1, xd, 2);
    value_info(&out, "y", 1, yd, 2);
    pb_int(&shape, 1, 2);
    pb_int(&shape, 2, 7);
    pb_str(&shape, 8, "shape");
    pb_bytes(&shape, 9, yd, sizeof yd);
    float wv[6] = {1, 2, 3, 4, 5, 6};
    pb_int(&w, 1, 3);
    pb_int(&w, 1, 2);
    pb_int(&w, 2, 1);
    pb_str(&w, 8, "fc.weight");
    pb_bytes(&w, 9, wv, sizeof wv);
    pb_msg(&graph, 1, &n1);
    pb_msg(&graph, 1, &n2);
    pb_msg(&graph, 5, &shape);
    pb_msg(&graph, 5, &w);
    pb_msg(&graph, 11, &in);
    pb_msg(&graph, 12, &out);
    wrap_model(model, &graph, NULL, 13);
}

TEST(initializers_parameters_and_folded_shapes) {
    pb m;
    folding_model(&m);
    tp_program *p = NULL;
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    if (!p) return;
    /* W is a parameter under its name; the shape initializer was folded away */
    tp_tensor *t = NULL;
    tp_state_kind kind;
    CHECK_OK(tp_program_get_state(p, "fc.weight", &t, &kind, NULL));
    CHECK(kind == TP_STATE_PARAMETER);
    CHECK_STATUS(tp_program_get_state(p, "shape", &t, &kind, NULL), TP_ERR_NOT_FOUND);
    float xs[6] = {0, 1, 2, 3, 4, 5};
    tp_tensor *x = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 2, (int64_t[]){2, 3}, xs, &x));
    tp_value arg = tp_value_tensor(x), out = tp_value_none();
    CHECK_OK(tp_program_call(p, &arg, 1, NULL, &out));
    const tp_value *y = out.kind == TP_VAL_TUPLE ? tp_value_at(&out, 0) : &out;
    CHECK(y && y->kind == TP_VAL_TENSOR && tp_tensor_size(y->u.tensor, 0) == 3 &&
          tp_tensor_item_f64(y->u.tensor, 5) == 11.0);
    tp_value_clear(&out);
    tp_value_clear(&arg);
    tp_program_free(p);
}

static tp_status load_for_alloc_test(void *ctx) {
    const pb *m = ctx;
    tp_program *p = NULL;
    tp_onnx_report rep;
    tp_status st = tp_onnx_load_buffer(m->data, m->len, NULL, NULL, &p, &rep);
    tp_onnx_report_clear(&rep);
    tp_program_free(p);
    return st;
}

TEST(allocation_failures) {
    static pb m;
    folding_model(&m);
    check_alloc_failures("load folding model", load_for_alloc_test, &m);
    one_node_model(&m, "Relu", true, NULL);
    check_alloc_failures("load dynamic relu model", load_for_alloc_test, &m);
}

/* The model's names: "X" and "logits" kept; "input.1" becomes placeholder
 * input_1, and calls take the model's name as a keyword too, also after a
 * save and load (the root module call's forward argument names record it). */
static void call_by_name(tp_program *p, const char *key, float want0) {
    tp_tensor *x = load_fixture("onnx/names_x");
    tp_value kw = tp_value_none(), out = tp_value_none();
    CHECK_OK(tp_value_dict(&kw));
    tp_value v = tp_value_tensor(x);
    CHECK_OK(tp_value_dict_set(&kw, key, &v));
    CHECK_OK(tp_program_call(p, NULL, 0, &kw, &out));
    const tp_value *o = out.kind == TP_VAL_TENSOR ? &out : tp_value_at(&out, 0);
    CHECK(o && o->kind == TP_VAL_TENSOR && tp_tensor_item_f64(o->u.tensor, 0) == want0);
    tp_value_clear(&out);
    tp_value_clear(&kw);
}

TEST(model_names_kept) {
    tp_program *p = NULL;
    CHECK_OK(tp_onnx_load("fixtures/onnx/names.onnx", NULL, &p, NULL));
    if (!p) return;
    const tp_signature *sig = tp_program_signature(p);
    CHECK(tp_signature_n_inputs(sig) == 1 && strcmp(tp_signature_input(sig, 0)->arg.name, "X") == 0);
    CHECK(tp_signature_n_outputs(sig) == 1 && strcmp(tp_signature_output(sig, 0)->arg.name, "logits") == 0);
    call_by_name(p, "X", 1.0f);
    tp_program_free(p);
    p = NULL;
    CHECK_OK(tp_onnx_load("fixtures/onnx/names_dotted.onnx", NULL, &p, NULL));
    if (!p) return;
    sig = tp_program_signature(p);
    CHECK(strcmp(tp_signature_input(sig, 0)->arg.name, "input_1") == 0);
    CHECK(strcmp(tp_signature_output(sig, 0)->arg.name, "_0") == 0);
    call_by_name(p, "input.1", -1.0f);
    call_by_name(p, "input_1", -1.0f);
    /* both names at once, or another name: refused */
    tp_tensor *x = load_fixture("onnx/names_x");
    tp_value kw = tp_value_none(), out = tp_value_none();
    CHECK_OK(tp_value_dict(&kw));
    tp_value v = tp_value_tensor(tp_tensor_retain(x));
    CHECK_OK(tp_value_dict_set(&kw, "input.1", &v));
    v = tp_value_tensor(x);
    CHECK_OK(tp_value_dict_set(&kw, "input_1", &v));
    CHECK_STATUS(tp_program_call(p, NULL, 0, &kw, &out), TP_ERR_DUPLICATE);
    CHECK_ERR_CONTAINS("argument 'input_1' given as 'input.1' too");
    tp_value_clear(&kw);
    /* through an archive */
    void *data = NULL;
    size_t size = 0;
    tp_archive_entry e = {"model", p};
    CHECK_OK(tp_archive_save_buffer(&e, 1, NULL, 0, &data, &size));
    tp_archive *a = NULL;
    if (data) CHECK_OK(tp_archive_load_buffer(data, size, NULL, &a));
    if (a) call_by_name(tp_archive_program(a, 0), "input.1", -1.0f);
    tp_archive_free(a);
    tp_free(data);
    tp_program_free(p);
}

/* NonZero and Compress on run-time values: graph outputs whose size is
 * known only when the program runs (interpreted), checked against numpy;
 * a value like that feeding another node is refused at import. */
TEST(data_dependent_outputs) {
    tp_program *p = NULL, *q = NULL;
    CHECK_OK(tp_onnx_load("fixtures/onnx/datadep.onnx", NULL, &p, NULL));
    if (!p) return;
    /* and through an archive (every op has a tensorplay callee) */
    tp_archive *ar = NULL;
    void *buf = NULL;
    size_t size = 0;
    tp_archive_entry e = {"model", p};
    CHECK_OK(tp_archive_save_buffer(&e, 1, NULL, 0, &buf, &size));
    if (buf) CHECK_OK(tp_archive_load_buffer(buf, size, NULL, &ar));
    tp_free(buf);
    q = ar ? tp_archive_find_program(ar, "model") : NULL;
    CHECK(q != NULL);
    tp_tensor *x = load_fixture("onnx/datadep_x"), *cond = load_fixture("onnx/datadep_cond");
    tp_tensor *nz = load_fixture("onnx/datadep_nz"), *cp = load_fixture("onnx/datadep_cp");
    for (int k = 0; x && cond && nz && cp && k < 4; k++) { /* each program twice: the second call reuses the first's */
        tp_program *prog = k < 2 ? p : q;
        if (!prog) break;
        {
            tp_value a[2] = {tp_value_tensor(tp_tensor_retain(x)), tp_value_tensor(tp_tensor_retain(cond))};
            tp_value out = tp_value_none();
            CHECK_OK(tp_program_call(prog, a, 2, NULL, &out));
            const tp_value *o0 = tp_value_at(&out, 0), *o1 = tp_value_at(&out, 1);
            CHECK(o0 && o1 && o0->kind == TP_VAL_TENSOR && o1->kind == TP_VAL_TENSOR);
            if (o0 && o1 && o0->kind == TP_VAL_TENSOR && o1->kind == TP_VAL_TENSOR) {
                CHECK_CLOSE(o0->u.tensor, nz, 0, 0);
                CHECK_CLOSE(o1->u.tensor, cp, 0, 0);
            }
            tp_value_clear(&out);
            tp_value_clear(&a[0]);
            tp_value_clear(&a[1]);
        }
    }
    tp_tensor_free(x);
    tp_tensor_free(cond);
    tp_tensor_free(nz);
    tp_tensor_free(cp);
    tp_archive_free(ar);
    tp_program_free(p);
    p = NULL;
    CHECK_STATUS(tp_onnx_load("fixtures/onnx/datadep_chain.onnx", NULL, &p, NULL), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("input 'nz' has a data-dependent shape (known only when the program runs)");
    CHECK(p == NULL);
}

/* Unique (sorted=0) on a run-time input: its four outputs in ONNX's
 * first-occurrence order, from the model and from its saved archive,
 * checked against numpy. */
TEST(unique_outputs) {
    tp_program *p = NULL, *q = NULL;
    CHECK_OK(tp_onnx_load("fixtures/onnx/datadep_unique.onnx", NULL, &p, NULL));
    if (!p) return;
    tp_archive *ar = NULL;
    void *buf = NULL;
    size_t size = 0;
    tp_archive_entry e = {"model", p};
    CHECK_OK(tp_archive_save_buffer(&e, 1, NULL, 0, &buf, &size));
    if (buf) CHECK_OK(tp_archive_load_buffer(buf, size, NULL, &ar));
    tp_free(buf);
    q = ar ? tp_archive_find_program(ar, "model") : NULL;
    CHECK(q != NULL);
    tp_tensor *x = load_fixture("onnx/datadep_unique_x");
    tp_tensor *want[4] = {load_fixture("onnx/datadep_unique_y"), load_fixture("onnx/datadep_unique_first"),
                          load_fixture("onnx/datadep_unique_inverse"), load_fixture("onnx/datadep_unique_counts")};
    for (int k = 0; x && want[0] && want[1] && want[2] && want[3] && k < 4; k++) {
        tp_program *prog = k < 2 ? p : q;
        if (!prog) break;
        tp_value a = tp_value_tensor(tp_tensor_retain(x)), out = tp_value_none();
        CHECK_OK(tp_program_call(prog, &a, 1, NULL, &out));
        CHECK(tp_value_len(&out) == 4);
        for (int i = 0; i < 4 && i < tp_value_len(&out); i++) {
            const tp_value *o = tp_value_at(&out, i);
            CHECK(o->kind == TP_VAL_TENSOR);
            if (o->kind == TP_VAL_TENSOR) CHECK_CLOSE(o->u.tensor, want[i], 0, 0);
        }
        tp_value_clear(&out);
        tp_value_clear(&a);
    }
    tp_tensor_free(x);
    for (int i = 0; i < 4; i++) tp_tensor_free(want[i]);
    tp_archive_free(ar);
    tp_program_free(p);
}

/* LpPool (p=3, asymmetric pads) and GlobalLpPool against onnx's
 * reference evaluator (GlobalLpPool: its definition, in numpy). */
TEST(lp_pools_match_reference) {
    static const char *const models[][2] = {{"fixtures/onnx/lppool.onnx", "onnx/lppool_y"},
                                            {"fixtures/onnx/globallppool.onnx", "onnx/globallppool_y"}};
    tp_tensor *x = load_fixture("onnx/lppool_x");
    for (int i = 0; x && i < 2; i++) {
        tp_program *p = NULL;
        CHECK_OK(tp_onnx_load(models[i][0], NULL, &p, NULL));
        tp_tensor *want = load_fixture(models[i][1]);
        if (p && want) run_and_compare(p, x, want);
        tp_tensor_free(want);
        tp_program_free(p);
    }
    tp_tensor_free(x);
}

/* ScatterElements (reduction max, negative and repeated indices) on a
 * dynamic batch, run at two batch sizes, and ScatterND (reduction mul,
 * repeated rows): scatter_reduce against onnx's reference evaluator. */
static void run3_and_compare(tp_program *p, const char *stem, const char *sfx) {
    char name[96];
    tp_value a[3];
    static const char *const ins[] = {"x", "i", "u"};
    for (int k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "onnx/%s_%s%s", stem, ins[k], sfx);
        tp_tensor *t = load_fixture(name);
        a[k] = t ? tp_value_tensor(t) : tp_value_none();
    }
    snprintf(name, sizeof name, "onnx/%s_y%s", stem, sfx);
    tp_tensor *want = load_fixture(name);
    tp_value out = tp_value_none();
    CHECK_OK(tp_program_call(p, a, 3, NULL, &out));
    const tp_value *got = out.kind == TP_VAL_TUPLE ? tp_value_at(&out, 0) : &out;
    CHECK(got && got->kind == TP_VAL_TENSOR && want);
    if (got && got->kind == TP_VAL_TENSOR && want) CHECK_CLOSE(got->u.tensor, want, 1e-6, 1e-6);
    tp_value_clear(&out);
    for (int k = 0; k < 3; k++) tp_value_clear(&a[k]);
    tp_tensor_free(want);
}

TEST(scatter_reductions_match_reference) {
    tp_program *p = NULL;
    CHECK_OK(tp_onnx_load("fixtures/onnx/scatter_elements_max.onnx", NULL, &p, NULL));
    if (p) {
        run3_and_compare(p, "scatter_elements_max", "2");
        run3_and_compare(p, "scatter_elements_max", "5");
    }
    tp_program_free(p);
    p = NULL;
    CHECK_OK(tp_onnx_load("fixtures/onnx/scatternd_mul.onnx", NULL, &p, NULL));
    if (p) run3_and_compare(p, "scatternd_mul", "");
    tp_program_free(p);
}

/* ---- issue #14: NonMaxSuppression, run-time Range, the training ops --------- */

/* A graph input or output: name, ONNX elem type, dims (nd 0: a 0-d tensor). */
typedef struct io_spec {
    const char *name;
    int elem;
    int nd;
    int64_t dims[3];
} io_spec;

/* A one-node model of op (in domain, "" for the default one, imported at
 * version) with the given graph inputs (the node's inputs, in order) and
 * outputs; attrs: AttributeProto messages for the node. */
static void node_model(pb *model, const char *op, const char *domain, int version, const io_spec *ins, int n_in,
                       const io_spec *outs, int n_out, const pb *attrs, int n_attrs) {
    static pb node, graph, opset, vi; /* large: kept off the stack */
    memset(&node, 0, sizeof node);
    memset(&graph, 0, sizeof graph);
    memset(&opset, 0, sizeof opset);
    for (int i = 0; i < n_in; i++) pb_str(&node, 1, ins[i].name);
    for (int i = 0; i < n_out; i++) pb_str(&node, 2, outs[i].name);
    pb_str(&node, 3, "the_node");
    pb_str(&node, 4, op);
    for (int i = 0; i < n_attrs; i++) pb_msg(&node, 5, &attrs[i]);
    if (domain[0]) pb_str(&node, 7, domain);
    pb_msg(&graph, 1, &node);
    pb_str(&graph, 2, "g");
    for (int i = 0; i < n_in; i++) {
        value_info(&vi, ins[i].name, ins[i].elem, ins[i].dims, ins[i].nd);
        pb_msg(&graph, 11, &vi);
    }
    for (int i = 0; i < n_out; i++) {
        value_info(&vi, outs[i].name, outs[i].elem, outs[i].dims, outs[i].nd);
        pb_msg(&graph, 12, &vi);
    }
    wrap_model(model, &graph, domain, version);
}

static void attr_int(pb *a, const char *name, int64_t v) {
    memset(a, 0, sizeof *a);
    pb_str(a, 1, name);
    pb_int(a, 3, v);
    pb_int(a, 20, 2); /* INT */
}

static void attr_float(pb *a, const char *name, float v) {
    memset(a, 0, sizeof *a);
    pb_str(a, 1, name);
    pb_varint(a, 2u << 3 | 5); /* f, fixed32 */
    pb_raw(a, &v, 4);
    pb_int(a, 20, 1); /* FLOAT */
}

static void attr_str(pb *a, const char *name, const char *v) {
    memset(a, 0, sizeof *a);
    pb_str(a, 1, name);
    pb_str(a, 4, v);
    pb_int(a, 20, 3); /* STRING */
}

#define ONNX_FLOAT 1
#define ONNX_INT64 7

static const io_spec k_nms_in[5] = {{"boxes", ONNX_FLOAT, 3, {1, 4, 4}},
                                    {"scores", ONNX_FLOAT, 3, {1, 2, 4}},
                                    {"max_out", ONNX_INT64, 1, {1}},
                                    {"iou", ONNX_FLOAT, 1, {1}},
                                    {"score_thr", ONNX_FLOAT, 1, {1}}};
static const io_spec k_nms_out[1] = {{"selected", ONNX_INT64, 2, {-1, 3}}};

/* Run the NMS model on the boxes and scores below with the given
 * thresholds; the status of the call, the output in *out. */
static tp_status run_nms(tp_program *p, int64_t max_out, float iou, float score_thr, tp_value *out) {
    /* y1, x1, y2, x2: box 1 overlaps box 0 (IoU 0.9 / 1.1 = 0.82), box 2
     * stands apart, box 3 is box 0 with its corners swapped (IoU 1) */
    static const float boxes[16] = {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 2, 1, 3, 1, 1, 0, 0};
    static const float scores[8] = {0.9f, 0.8f, 0.7f, 0.3f, /* class 1: */ 0.1f, 0.6f, 0.2f, 0.6f};
    tp_tensor *t[5] = {NULL};
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 3, (int64_t[]){1, 4, 4}, boxes, &t[0]));
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 3, (int64_t[]){1, 2, 4}, scores, &t[1]));
    CHECK_OK(tp_tensor_from_data(TP_INT64, 1, (int64_t[]){1}, &max_out, &t[2]));
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){1}, &iou, &t[3]));
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){1}, &score_thr, &t[4]));
    tp_value a[5];
    for (int i = 0; i < 5; i++) a[i] = tp_value_tensor(t[i]);
    *out = tp_value_none();
    tp_status st = tp_program_call(p, a, 5, NULL, out);
    for (int i = 0; i < 5; i++) tp_value_clear(&a[i]);
    return st;
}

static void check_rows(const tp_value *out, const int64_t *want, int64_t rows) {
    const tp_value *y = out->kind == TP_VAL_TUPLE ? tp_value_at(out, 0) : out;
    CHECK(y && y->kind == TP_VAL_TENSOR);
    if (!y || y->kind != TP_VAL_TENSOR) return;
    const tp_tensor *t = y->u.tensor;
    CHECK(tp_tensor_dtype(t) == TP_INT64 && tp_tensor_ndim(t) == 2);
    if (tp_tensor_ndim(t) != 2) return;
    CHECK_MSG(tp_tensor_sizes(t)[0] == rows && tp_tensor_sizes(t)[1] == 3, "got %lld rows, want %lld",
              (long long)tp_tensor_sizes(t)[0], (long long)rows);
    for (int64_t i = 0; i < rows * 3 && tp_tensor_sizes(t)[0] == rows; i++)
        CHECK_MSG(tp_tensor_item_f64(t, i) == (double)want[i], "element %lld: %g, want %lld", (long long)i,
                  tp_tensor_item_f64(t, i), (long long)want[i]);
}

/* NonMaxSuppression computed by hand: class 0 keeps boxes 0 and 2 (box 1
 * overlaps box 0 by IoU 0.82, box 3 is box 0); class 1 (box 0 under the
 * score threshold) keeps box 1 (the tie with box 3 at 0.6 goes to the lower
 * index) and box 2; the thresholds are run-time inputs. */
TEST(nms_by_hand) {
    static pb m;
    pb attr;
    attr_int(&attr, "center_point_box", 0);
    node_model(&m, "NonMaxSuppression", "", 11, k_nms_in, 5, k_nms_out, 1, &attr, 1);
    tp_program *p = NULL;
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    if (!p) return;
    tp_value out;
    CHECK_OK(run_nms(p, 3, 0.5f, 0.15f, &out));
    check_rows(&out, (const int64_t[]){0, 0, 0, 0, 0, 2, 0, 1, 1, 0, 1, 2}, 4);
    tp_value_clear(&out);
    /* at most one per class */
    CHECK_OK(run_nms(p, 1, 0.5f, 0.15f, &out));
    check_rows(&out, (const int64_t[]){0, 0, 0, 0, 1, 1}, 2);
    tp_value_clear(&out);
    /* iou_threshold 0.9: box 1 (0.82 with box 0) survives, box 3 (1.0) does
     * not in class 0; in class 1 boxes 1 and 3 (IoU 0.82) both stay */
    CHECK_OK(run_nms(p, 10, 0.9f, 0.25f, &out));
    check_rows(&out, (const int64_t[]){0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 1, 1, 0, 1, 3}, 5);
    tp_value_clear(&out);
    /* a bad threshold at run time: a clear error naming it */
    CHECK_STATUS(run_nms(p, 3, 1.5f, 0.15f, &out), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("non_max_suppression: iou_threshold must be in [0, 1], got 1.5");
    tp_value_clear(&out);
    /* and through an archive (tpexport's own callee, tpexport.onnx.non_max_suppression) */
    tp_archive *ar = NULL;
    void *buf = NULL;
    size_t size = 0;
    tp_archive_entry e = {"model", p};
    CHECK_OK(tp_archive_save_buffer(&e, 1, NULL, 0, &buf, &size));
    if (buf) CHECK_OK(tp_archive_load_buffer(buf, size, NULL, &ar));
    tp_free(buf);
    tp_program *q = ar ? tp_archive_find_program(ar, "model") : NULL;
    CHECK(q != NULL);
    if (q) {
        CHECK_OK(run_nms(q, 3, 0.5f, 0.15f, &out));
        check_rows(&out, (const int64_t[]){0, 0, 0, 0, 0, 2, 0, 1, 1, 0, 1, 2}, 4);
        tp_value_clear(&out);
    }
    tp_archive_free(ar);
    tp_program_free(p);
}

TEST(nms_errors) {
    static pb m;
    /* boxes of rank 2 */
    io_spec in[5];
    memcpy(in, k_nms_in, sizeof in);
    in[0].nd = 2;
    in[0].dims[0] = 4, in[0].dims[1] = 4;
    node_model(&m, "NonMaxSuppression", "", 11, in, 5, k_nms_out, 1, NULL, 0);
    tp_program *p = NULL;
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_SHAPE);
    CHECK_ERR_CONTAINS("non_max_suppression: boxes must have shape [num_batches, num_boxes, 4], got rank 2");
    CHECK(p == NULL);
    /* scores for another number of boxes */
    memcpy(in, k_nms_in, sizeof in);
    in[1].dims[2] = 5;
    node_model(&m, "NonMaxSuppression", "", 11, in, 5, k_nms_out, 1, NULL, 0);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_SHAPE);
    CHECK_ERR_CONTAINS("scores [1, 2, 5] do not match boxes [1, 4, 4]");
    /* center_point_box 2 */
    pb attr;
    attr_int(&attr, "center_point_box", 2);
    node_model(&m, "NonMaxSuppression", "", 11, k_nms_in, 5, k_nms_out, 1, &attr, 1);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("center_point_box must be 0 or 1, got 2");
}

/* Range of run-time start, limit and delta: a data-dependent length that a
 * later node (Add) uses. */
TEST(range_at_run_time) {
    static pb m;
    static const io_spec in[3] = {{"start", ONNX_INT64, 0, {0}}, {"limit", ONNX_INT64, 0, {0}}, {"delta", ONNX_INT64, 0, {0}}};
    static const io_spec out[1] = {{"r", ONNX_INT64, 1, {-1}}};
    node_model(&m, "Range", "", 17, in, 3, out, 1, NULL, 0);
    tp_program *p = NULL;
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    if (!p) return;
    static const int64_t cases[][3] = {{1, 10, 3}, {10, 1, -4}, {5, 5, 1}, {0, 3, 0}};
    static const int64_t want[][3] = {{1, 4, 7}, {10, 6, 2}, {0}, {0}};
    static const int64_t want_n[] = {3, 3, 0, -1};
    for (int k = 0; k < 4; k++) {
        tp_value a[3];
        for (int i = 0; i < 3; i++) {
            tp_tensor *t = NULL;
            CHECK_OK(tp_tensor_from_data(TP_INT64, 0, NULL, &cases[k][i], &t));
            a[i] = tp_value_tensor(t);
        }
        tp_value o = tp_value_none();
        tp_status st = tp_program_call(p, a, 3, NULL, &o);
        if (want_n[k] < 0) {
            CHECK(st == TP_ERR_INVALID_ARG);
            CHECK_ERR_CONTAINS("onnx_range: delta must be nonzero");
        } else {
            CHECK_OK(st);
            const tp_value *y = o.kind == TP_VAL_TUPLE ? tp_value_at(&o, 0) : &o;
            CHECK(y && y->kind == TP_VAL_TENSOR);
            if (y && y->kind == TP_VAL_TENSOR) {
                CHECK(tp_tensor_ndim(y->u.tensor) == 1 && tp_tensor_sizes(y->u.tensor)[0] == want_n[k]);
                for (int64_t i = 0; i < want_n[k] && tp_tensor_sizes(y->u.tensor)[0] == want_n[k]; i++)
                    CHECK(tp_tensor_item_f64(y->u.tensor, i) == (double)want[k][i]);
            }
        }
        tp_value_clear(&o);
        for (int i = 0; i < 3; i++) tp_value_clear(&a[i]);
    }
    tp_program_free(p);
    /* start and limit of different dtypes */
    io_spec bad[3];
    memcpy(bad, in, sizeof bad);
    bad[1].elem = ONNX_FLOAT;
    node_model(&m, "Range", "", 17, bad, 3, out, 1, NULL, 0);
    p = NULL;
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("start, limit and delta must have one dtype");
    CHECK(p == NULL);
}

/* Range of graph inputs, then `second` (Shape, or Reshape to the
 * initializer shape [2, 1]) of its result. */
static void range_then_model(pb *model, const char *second) {
    static pb graph, n1, n2, opset, vi, init;
    memset(&graph, 0, sizeof graph);
    memset(&n1, 0, sizeof n1);
    memset(&n2, 0, sizeof n2);
    memset(&opset, 0, sizeof opset);
    memset(&init, 0, sizeof init);
    static const char *const ins[3] = {"s", "l", "d"};
    for (int i = 0; i < 3; i++) pb_str(&n1, 1, ins[i]);
    pb_str(&n1, 2, "r");
    pb_str(&n1, 4, "Range");
    pb_str(&n2, 1, "r");
    bool reshape = !strcmp(second, "Reshape");
    if (reshape) pb_str(&n2, 1, "shape");
    pb_str(&n2, 2, "y");
    pb_str(&n2, 3, "second");
    pb_str(&n2, 4, second);
    pb_msg(&graph, 1, &n1);
    pb_msg(&graph, 1, &n2);
    pb_str(&graph, 2, "g");
    if (reshape) { /* TensorProto: dims, data_type INT64, int64_data, name */
        pb_int(&init, 1, 2);
        pb_int(&init, 2, ONNX_INT64);
        pb_int(&init, 7, 2);
        pb_int(&init, 7, 1);
        pb_str(&init, 8, "shape");
        pb_msg(&graph, 5, &init);
    }
    for (int i = 0; i < 3; i++) {
        value_info(&vi, ins[i], ONNX_INT64, NULL, 0);
        pb_msg(&graph, 11, &vi);
    }
    value_info(&vi, "y", ONNX_INT64, (const int64_t[]){-1, 1}, reshape ? 2 : 1);
    pb_msg(&graph, 12, &vi);
    wrap_model(model, &graph, NULL, 17);
}

/* Run Range(start, limit, delta) imported with `second` after it. */
static tp_status call_range(tp_program *p, int64_t start, int64_t limit, int64_t delta, tp_value *o) {
    int64_t v[3] = {start, limit, delta};
    tp_value a[3];
    for (int i = 0; i < 3; i++) {
        tp_tensor *t = NULL;
        tp_status st = tp_tensor_from_data(TP_INT64, 0, NULL, &v[i], &t);
        if (st != TP_OK) return st;
        a[i] = tp_value_tensor(t);
    }
    tp_status st = tp_program_call(p, a, 3, NULL, o);
    for (int i = 0; i < 3; i++) tp_value_clear(&a[i]);
    return st;
}

/* A run-time Range's length is never folded at its import-time hint: Shape
 * of it is its run-time length (a symbolic size, not the hint 2), and
 * Reshape to a constant [2, 1] follows the run-time length in the leading
 * dim. */
TEST(range_result_is_dynamic) {
    static pb m;
    range_then_model(&m, "Shape");
    tp_program *p = NULL;
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    for (int64_t limit = 0; p && limit <= 7; limit += 7) {
        tp_value o = tp_value_none();
        CHECK_OK(call_range(p, 0, limit, 1, &o));
        const tp_value *y = o.kind == TP_VAL_TUPLE ? tp_value_at(&o, 0) : &o;
        CHECK(y && y->kind == TP_VAL_TENSOR);
        if (y && y->kind == TP_VAL_TENSOR) {
            const tp_tensor *t = y->u.tensor;
            CHECK(tp_tensor_dtype(t) == TP_INT64 && tp_tensor_ndim(t) == 1 && tp_tensor_numel(t) == 1);
            CHECK(tp_tensor_numel(t) == 1 && tp_tensor_item_f64(t, 0) == (double)limit);
        }
        tp_value_clear(&o);
    }
    tp_program_free(p);
    p = NULL;
    range_then_model(&m, "Reshape");
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    if (!p) return;
    tp_value o = tp_value_none();
    CHECK_OK(call_range(p, 0, 5, 1, &o));
    const tp_value *y = o.kind == TP_VAL_TUPLE ? tp_value_at(&o, 0) : &o;
    CHECK(y && y->kind == TP_VAL_TENSOR);
    if (y && y->kind == TP_VAL_TENSOR) {
        const tp_tensor *t = y->u.tensor;
        CHECK(tp_tensor_ndim(t) == 2 && tp_tensor_sizes(t)[0] == 5 && tp_tensor_sizes(t)[1] == 1);
        for (int64_t i = 0; i < 5 && tp_tensor_numel(t) == 5; i++) CHECK(tp_tensor_item_f64(t, i) == (double)i);
    }
    tp_value_clear(&o);
    tp_program_free(p);
}

/* Bidirectional LSTM (peepholes, initial states), GRU and RNN nodes with
 * sequence_lens given at run time ([5, 2, 0] and [1, 5, 3] of 5 steps):
 * every output (Y zero past each length, Y_h / Y_c the last valid states,
 * the reverse direction starting at each entry's own end) matches
 * onnxruntime's. */
TEST(recurrences_with_sequence_lens) {
    static const char *const kinds[] = {"lstm", "gru", "rnn"};
    for (int k = 0; k < 3; k++) {
        char path[128], name[96];
        snprintf(path, sizeof path, "fixtures/onnx/seqlens_%s.onnx", kinds[k]);
        tp_program *p = NULL;
        CHECK_OK(tp_onnx_load(path, NULL, &p, NULL));
        snprintf(name, sizeof name, "seqlens_%s_x", kinds[k]);
        tp_tensor *x = load_onnx_fixture(name);
        for (int run = 0; p && x && run < 2; run++) {
            snprintf(name, sizeof name, "seqlens_%s_len%d", kinds[k], run);
            tp_tensor *lens = load_onnx_fixture(name);
            if (!lens) continue;
            tp_value a[2] = {tp_value_tensor(tp_tensor_retain(x)), tp_value_tensor(lens)}, o = tp_value_none();
            CHECK_OK(tp_program_call(p, a, 2, NULL, &o));
            int n_out = k == 0 ? 3 : 2;
            CHECK(tp_value_len(&o) == n_out);
            for (int i = 0; i < n_out && tp_value_len(&o) == n_out; i++) {
                snprintf(name, sizeof name, "seqlens_%s_y%d_%d", kinds[k], run, i);
                tp_tensor *want = load_onnx_fixture(name);
                if (want) CHECK_CLOSE(tp_value_at(&o, i)->u.tensor, want, 1e-5, 1e-5);
                tp_tensor_free(want);
            }
            tp_value_clear(&o);
            tp_value_clear(&a[0]);
            tp_value_clear(&a[1]);
        }
        tp_tensor_free(x);
        tp_program_free(p);
    }
}

/* Call p on float x and an int64 / float scalar s; the first output. */
static tp_tensor *call_x_scalar(tp_program *p, const float *xv, int64_t rows, int64_t cols, tp_tensor *s) {
    tp_tensor *x = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 2, (int64_t[]){rows, cols}, xv, &x));
    tp_value a[2] = {tp_value_tensor(x), tp_value_tensor(s)}, o = tp_value_none();
    CHECK_OK(tp_program_call(p, a, 2, NULL, &o));
    tp_tensor *r = NULL;
    const tp_value *y = o.kind == TP_VAL_TUPLE ? tp_value_at(&o, 0) : &o;
    if (y && y->kind == TP_VAL_TENSOR) r = tp_tensor_retain(y->u.tensor);
    tp_value_clear(&o);
    tp_value_clear(&a[0]);
    tp_value_clear(&a[1]);
    return r;
}

/* Clip's bounds and Trilu's k given as graph inputs run with their
 * run-time values (no specialisation: the report needs no constant):
 * Clip(x, lo) = max(x, lo); Trilu(x, k) upper and lower, by hand. */
TEST(run_time_clip_and_trilu) {
    static pb m;
    static const io_spec clip_in[2] = {{"x", ONNX_FLOAT, 2, {2, 3}}, {"lo", ONNX_FLOAT, 0, {0}}};
    static const io_spec y[1] = {{"y", ONNX_FLOAT, 2, {2, 3}}};
    node_model(&m, "Clip", "", 13, clip_in, 2, y, 1, NULL, 0);
    tp_program *p = NULL;
    tp_onnx_report rep;
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, &rep));
    CHECK(rep.n_need_constant == 0);
    tp_onnx_report_clear(&rep);
    static const float xv[6] = {-3, -1, 0, 1, 2, 5};
    for (int i = 0; p && i < 2; i++) {
        tp_tensor *lo = NULL;
        CHECK_OK(tp_tensor_scalar(TP_FLOAT32, i ? 1.5 : -2.0, &lo));
        tp_tensor *r = call_x_scalar(p, xv, 2, 3, lo);
        CHECK(r && tp_tensor_numel(r) == 6);
        for (int k = 0; r && k < 6 && tp_tensor_numel(r) == 6; k++)
            CHECK(tp_tensor_item_f64(r, k) == (xv[k] > (i ? 1.5 : -2.0) ? xv[k] : (i ? 1.5 : -2.0)));
        tp_tensor_free(r);
    }
    tp_program_free(p);
    static const io_spec tri_in[2] = {{"x", ONNX_FLOAT, 2, {2, 3}}, {"k", ONNX_INT64, 0, {0}}};
    for (int upper = 0; upper < 2; upper++) {
        pb a;
        attr_int(&a, "upper", upper);
        p = NULL;
        node_model(&m, "Trilu", "", 14, tri_in, 2, y, 1, &a, 1);
        CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, &rep));
        CHECK(rep.n_need_constant == 0);
        tp_onnx_report_clear(&rep);
        for (int64_t k = -1; p && k <= 1; k++) {
            tp_tensor *kt = NULL;
            CHECK_OK(tp_tensor_from_data(TP_INT64, 0, NULL, &k, &kt));
            tp_tensor *r = call_x_scalar(p, xv, 2, 3, kt);
            CHECK(r && tp_tensor_numel(r) == 6);
            for (int e = 0; r && e < 6 && tp_tensor_numel(r) == 6; e++) {
                int64_t row = e / 3, col = e % 3;
                bool keep = upper ? col - row >= k : col - row <= k;
                CHECK(tp_tensor_item_f64(r, e) == (keep ? xv[e] : 0));
            }
            tp_tensor_free(r);
        }
        tp_program_free(p);
    }
}

/* ---- shape data given when the program runs (src/onnx/shape_data.c) ------------ */

/* One call of p with n tensor arguments (taken over); output k, or NULL. */
static tp_tensor *call_n(tp_program *p, tp_tensor **args, int n, int k) {
    tp_value a[4], o = tp_value_none();
    for (int i = 0; i < n; i++) a[i] = tp_value_tensor(args[i]);
    CHECK_OK(tp_program_call(p, a, n, NULL, &o));
    tp_tensor *r = NULL;
    const tp_value *y = o.kind == TP_VAL_TUPLE || o.kind == TP_VAL_LIST ? tp_value_at(&o, k) : k == 0 ? &o : NULL;
    if (y && y->kind == TP_VAL_TENSOR) r = tp_tensor_retain(y->u.tensor);
    tp_value_clear(&o);
    for (int i = 0; i < n; i++) tp_value_clear(&a[i]);
    return r;
}

static tp_tensor *f32s(int nd, const int64_t *dims, const float *v) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, nd, dims, v, &t));
    return t;
}

static tp_tensor *i64s(int nd, const int64_t *dims, const int64_t *v) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_from_data(TP_INT64, nd, dims, v, &t));
    return t;
}

/* r (freed) has sizes want_dims and values want (numel values). */
static void check_result(tp_tensor *r, int nd, const int64_t *want_dims, const double *want, const char *what) {
    CHECK(r != NULL);
    if (!r) return;
    bool ok = tp_tensor_ndim(r) == nd;
    for (int d = 0; ok && d < nd; d++) ok = tp_tensor_sizes(r)[d] == want_dims[d];
    for (int64_t i = 0; ok && i < tp_tensor_numel(r); i++) ok = fabs(tp_tensor_item_f64(r, i) - want[i]) < 1e-6;
    if (!ok) fprintf(stderr, "  run-time shape data: %s gave a wrong result\n", what);
    CHECK(ok);
    tp_tensor_free(r);
}

/* Load a one-node model; no input may need specialising. */
static tp_program *load_run_time(pb *m) {
    tp_program *p = NULL;
    tp_onnx_report rep;
    CHECK_OK(tp_onnx_load_buffer(m->data, m->len, NULL, NULL, &p, &rep));
    CHECK(rep.n_need_constant == 0);
    tp_onnx_report_clear(&rep);
    return p;
}

/* Unsqueeze / Squeeze axes, Slice starts/ends/axes/steps, TopK's k, a
 * reduction's axes, Pad's pads, Resize's scales and sizes, OneHot's depth
 * and CumSum's axis given as graph inputs: one program, called with two
 * different values each, results derived by hand. */
TEST(run_time_shape_data) {
    static pb m;
    static const float x6[6] = {0, 1, 2, 3, 4, 5};
    tp_program *p;
    /* Unsqueeze x[2, 3] at [0] then at [-1] */
    static const io_spec uq_in[2] = {{"x", ONNX_FLOAT, 2, {2, 3}}, {"axes", ONNX_INT64, 1, {1}}};
    static const io_spec y3[1] = {{"y", ONNX_FLOAT, 3, {1, 2, 3}}};
    node_model(&m, "Unsqueeze", "", 13, uq_in, 2, y3, 1, NULL, 0);
    if ((p = load_run_time(&m))) {
        tp_tensor *a[2] = {f32s(2, (int64_t[]){2, 3}, x6), i64s(1, (int64_t[]){1}, (int64_t[]){0})};
        check_result(call_n(p, a, 2, 0), 3, (int64_t[]){1, 2, 3}, (double[]){0, 1, 2, 3, 4, 5}, "Unsqueeze [0]");
        tp_tensor *b[2] = {f32s(2, (int64_t[]){2, 3}, x6), i64s(1, (int64_t[]){1}, (int64_t[]){-1})};
        check_result(call_n(p, b, 2, 0), 3, (int64_t[]){2, 3, 1}, (double[]){0, 1, 2, 3, 4, 5}, "Unsqueeze [-1]");
        /* an axis out of range fails when it runs */
        tp_value bad[2] = {tp_value_tensor(f32s(2, (int64_t[]){2, 3}, x6)),
                           tp_value_tensor(i64s(1, (int64_t[]){1}, (int64_t[]){3}))},
                 o = tp_value_none();
        CHECK_STATUS(tp_program_call(p, bad, 2, NULL, &o), TP_ERR_INDEX);
        tp_value_clear(&o);
        tp_value_clear(&bad[0]);
        tp_value_clear(&bad[1]);
        tp_program_free(p);
    }
    /* Squeeze x[1, 3, 1] at [0] then [-1] */
    static const io_spec sq_in[2] = {{"x", ONNX_FLOAT, 3, {1, 3, 1}}, {"axes", ONNX_INT64, 1, {1}}};
    static const io_spec y2[1] = {{"y", ONNX_FLOAT, 2, {3, 1}}};
    node_model(&m, "Squeeze", "", 13, sq_in, 2, y2, 1, NULL, 0);
    if ((p = load_run_time(&m))) {
        tp_tensor *a[2] = {f32s(3, (int64_t[]){1, 3, 1}, x6), i64s(1, (int64_t[]){1}, (int64_t[]){0})};
        check_result(call_n(p, a, 2, 0), 2, (int64_t[]){3, 1}, (double[]){0, 1, 2}, "Squeeze [0]");
        tp_tensor *b[2] = {f32s(3, (int64_t[]){1, 3, 1}, x6), i64s(1, (int64_t[]){1}, (int64_t[]){-1})};
        check_result(call_n(p, b, 2, 0), 2, (int64_t[]){1, 3}, (double[]){0, 1, 2}, "Squeeze [-1]");
        tp_program_free(p);
    }
    /* Slice x[6]: [1:5:2]; [-1::-2] (ends -7 clamps to before the start); [10:20] (empty) */
    static const io_spec sl_in[5] = {{"x", ONNX_FLOAT, 1, {6}},
                                     {"starts", ONNX_INT64, 1, {1}},
                                     {"ends", ONNX_INT64, 1, {1}},
                                     {"axes", ONNX_INT64, 1, {1}},
                                     {"steps", ONNX_INT64, 1, {1}}};
    static const io_spec y1[1] = {{"y", ONNX_FLOAT, 1, {2}}};
    node_model(&m, "Slice", "", 13, sl_in, 5, y1, 1, NULL, 0);
    if ((p = load_run_time(&m))) {
        static const int64_t v[3][4] = {{1, 5, 0, 2}, {-1, -7, -1, -2}, {10, 20, 0, 1}};
        static const int64_t n_out[3] = {2, 3, 0};
        static const double want[3][3] = {{1, 3}, {5, 3, 1}, {0}};
        for (int k = 0; k < 3; k++) {
            tp_tensor *a[5] = {f32s(1, (int64_t[]){6}, x6)};
            for (int i = 0; i < 4; i++) a[1 + i] = i64s(1, (int64_t[]){1}, &v[k][i]);
            tp_value av[5], o = tp_value_none();
            for (int i = 0; i < 5; i++) av[i] = tp_value_tensor(a[i]);
            CHECK_OK(tp_program_call(p, av, 5, NULL, &o));
            const tp_value *y = o.kind == TP_VAL_TUPLE ? tp_value_at(&o, 0) : &o;
            check_result(y && y->kind == TP_VAL_TENSOR ? tp_tensor_retain(y->u.tensor) : NULL, 1, &n_out[k], want[k],
                         "Slice");
            tp_value_clear(&o);
            for (int i = 0; i < 5; i++) tp_value_clear(&av[i]);
        }
        tp_program_free(p);
    }
    /* TopK of [3, 1, 4, 1, 5] with k = 2, then k = 4 (the two 1s in index order) */
    static const io_spec tk_in[2] = {{"x", ONNX_FLOAT, 1, {5}}, {"k", ONNX_INT64, 1, {1}}};
    static const io_spec tk_out[2] = {{"values", ONNX_FLOAT, 1, {2}}, {"indices", ONNX_INT64, 1, {2}}};
    node_model(&m, "TopK", "", 11, tk_in, 2, tk_out, 2, NULL, 0);
    if ((p = load_run_time(&m))) {
        static const float xv[5] = {3, 1, 4, 1, 5};
        tp_tensor *a[2] = {f32s(1, (int64_t[]){5}, xv), i64s(1, (int64_t[]){1}, (int64_t[]){2})};
        check_result(call_n(p, a, 2, 0), 1, (int64_t[]){2}, (double[]){5, 4}, "TopK 2");
        tp_tensor *b[2] = {f32s(1, (int64_t[]){5}, xv), i64s(1, (int64_t[]){1}, (int64_t[]){4})};
        check_result(call_n(p, b, 2, 1), 1, (int64_t[]){4}, (double[]){4, 2, 0, 1}, "TopK 4 indices");
        tp_program_free(p);
    }
    /* ReduceSum x[2, 3] = 0..5 without keepdims over [1] (row sums), then [0] */
    static pb attrs[2];
    attr_int(&attrs[0], "keepdims", 0);
    static const io_spec rs_in[2] = {{"x", ONNX_FLOAT, 2, {2, 3}}, {"axes", ONNX_INT64, 1, {1}}};
    node_model(&m, "ReduceSum", "", 13, rs_in, 2, y1, 1, attrs, 1);
    if ((p = load_run_time(&m))) {
        tp_tensor *a[2] = {f32s(2, (int64_t[]){2, 3}, x6), i64s(1, (int64_t[]){1}, (int64_t[]){1})};
        check_result(call_n(p, a, 2, 0), 1, (int64_t[]){2}, (double[]){3, 12}, "ReduceSum [1]");
        tp_tensor *b[2] = {f32s(2, (int64_t[]){2, 3}, x6), i64s(1, (int64_t[]){1}, (int64_t[]){0})};
        check_result(call_n(p, b, 2, 0), 1, (int64_t[]){3}, (double[]){3, 5, 7}, "ReduceSum [0]");
        tp_program_free(p);
    }
    /* Pad (reflect) x[1, 4] = 0..3 by pads [0, 1, 0, 2], then [0, 0, 0, 1] */
    attr_str(&attrs[0], "mode", "reflect");
    static const io_spec pd_in[2] = {{"x", ONNX_FLOAT, 2, {1, 4}}, {"pads", ONNX_INT64, 1, {4}}};
    static const io_spec pd_out[1] = {{"y", ONNX_FLOAT, 2, {1, 7}}};
    node_model(&m, "Pad", "", 13, pd_in, 2, pd_out, 1, attrs, 1);
    if ((p = load_run_time(&m))) {
        tp_tensor *a[2] = {f32s(2, (int64_t[]){1, 4}, x6), i64s(1, (int64_t[]){4}, (int64_t[]){0, 1, 0, 2})};
        check_result(call_n(p, a, 2, 0), 2, (int64_t[]){1, 7}, (double[]){1, 0, 1, 2, 3, 2, 1}, "Pad reflect 1, 2");
        tp_tensor *b[2] = {f32s(2, (int64_t[]){1, 4}, x6), i64s(1, (int64_t[]){4}, (int64_t[]){0, 0, 0, 1})};
        check_result(call_n(p, b, 2, 0), 2, (int64_t[]){1, 5}, (double[]){0, 1, 2, 3, 2}, "Pad reflect 0, 1");
        tp_program_free(p);
    }
    /* Upsample (opset 9: nearest, asymmetric, floor) of x[1, 2] = [0, 1] by scales [1, 2], then [1, 1.5] */
    static const io_spec rz_out[1] = {{"y", ONNX_FLOAT, 2, {1, 4}}};
    static const io_spec rz_in2[2] = {{"x", ONNX_FLOAT, 2, {1, 2}}, {"scales", ONNX_FLOAT, 1, {2}}};
    node_model(&m, "Upsample", "", 9, rz_in2, 2, rz_out, 1, NULL, 0);
    if ((p = load_run_time(&m))) {
        tp_tensor *a[2] = {f32s(2, (int64_t[]){1, 2}, x6), f32s(1, (int64_t[]){2}, (float[]){1, 2})};
        check_result(call_n(p, a, 2, 0), 2, (int64_t[]){1, 4}, (double[]){0, 0, 1, 1}, "Upsample x2");
        tp_tensor *b[2] = {f32s(2, (int64_t[]){1, 2}, x6), f32s(1, (int64_t[]){2}, (float[]){1, 1.5f})};
        /* out 3: x = o / 1.5 = 0, 0.67, 1.33 -> floor 0, 0, 1 */
        check_result(call_n(p, b, 2, 0), 2, (int64_t[]){1, 3}, (double[]){0, 0, 1}, "Upsample x1.5");
        tp_program_free(p);
    }
    /* OneHot of [0, 2] with depth 3, then depth 4 (values [0, 1]) */
    static const io_spec oh_in[3] = {{"i", ONNX_INT64, 1, {2}}, {"depth", ONNX_INT64, 0, {0}}, {"v", ONNX_FLOAT, 1, {2}}};
    static const io_spec oh_out[1] = {{"y", ONNX_FLOAT, 2, {2, 3}}};
    node_model(&m, "OneHot", "", 11, oh_in, 3, oh_out, 1, NULL, 0);
    if ((p = load_run_time(&m))) {
        for (int64_t depth = 3; depth <= 4; depth++) {
            tp_tensor *a[3] = {i64s(1, (int64_t[]){2}, (int64_t[]){0, 2}), i64s(0, NULL, &depth),
                               f32s(1, (int64_t[]){2}, (float[]){0, 1})};
            double want[8] = {0};
            want[0] = 1, want[depth + 2] = 1;
            check_result(call_n(p, a, 3, 0), 2, (int64_t[]){2, depth}, want, "OneHot");
        }
        tp_program_free(p);
    }
    /* every allocation of an import with run-time shape data may fail (Resize last built) */
    static const io_spec rz3_in[3] = {{"x", ONNX_FLOAT, 3, {1, 2, 2}}, {"roi", ONNX_FLOAT, 1, {0}},
                                      {"scales", ONNX_FLOAT, 1, {3}}};
    static const io_spec rz3_out[1] = {{"y", ONNX_FLOAT, 3, {1, 4, 4}}};
    attr_str(&attrs[0], "mode", "cubic");
    node_model(&m, "Resize", "", 13, rz3_in, 3, rz3_out, 1, attrs, 1);
    check_alloc_failures("Resize with run-time scales", load_for_alloc_test, &m);
    node_model(&m, "Slice", "", 13, sl_in, 5, y1, 1, NULL, 0);
    check_alloc_failures("Slice with run-time bounds", load_for_alloc_test, &m);
    /* which dims are 1, or how big equal parts are, is known only when a
     * dynamically shaped input runs: refused, not guessed from the hint */
    one_node_model(&m, "Squeeze", true, NULL);
    p = NULL;
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("Squeeze without axes of a dynamically shaped input");
    one_node_model(&m, "Split", true, NULL);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("Split into equal parts of a dynamically shaped input");
    /* CumSum of [[1, 2], [3, 4]] along axis 0, then 1 */
    static const io_spec cs_in[2] = {{"x", ONNX_FLOAT, 2, {2, 2}}, {"axis", ONNX_INT64, 0, {0}}};
    static const io_spec cs_out[1] = {{"y", ONNX_FLOAT, 2, {2, 2}}};
    node_model(&m, "CumSum", "", 14, cs_in, 2, cs_out, 1, NULL, 0);
    if ((p = load_run_time(&m))) {
        static const double want[2][4] = {{1, 2, 4, 6}, {1, 3, 3, 7}};
        for (int64_t ax = 0; ax < 2; ax++) {
            tp_tensor *a[2] = {f32s(2, (int64_t[]){2, 2}, (float[]){1, 2, 3, 4}), i64s(0, NULL, &ax)};
            check_result(call_n(p, a, 2, 0), 2, (int64_t[]){2, 2}, want[ax], "CumSum");
        }
        tp_program_free(p);
    }
}

/* The new lowerings refuse malformed nodes naming what is wrong (each
 * message checked): Attention's 3-D inputs without head counts and an
 * unknown qk_matmul_output_mode, TensorScatter along the batch dim,
 * TfIdfVectorizer's string pools, CenterCropPad's shape for fewer axes
 * than listed, Resize's repeated axis. */
TEST(new_lowerings_refuse_malformed_nodes) {
    static pb m, attrs[3];
    static const io_spec qkv[3] = {{"q", ONNX_FLOAT, 3, {1, 2, 4}}, {"k", ONNX_FLOAT, 3, {1, 2, 4}},
                                   {"v", ONNX_FLOAT, 3, {1, 2, 4}}};
    static const io_spec y3[1] = {{"y", ONNX_FLOAT, 3, {1, 2, 4}}};
    tp_program *p = NULL;
    node_model(&m, "Attention", "", 23, qkv, 3, y3, 1, NULL, 0);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("3-D inputs need q_num_heads and kv_num_heads");
    attr_int(&attrs[0], "q_num_heads", 2);
    attr_int(&attrs[1], "kv_num_heads", 2);
    attr_int(&attrs[2], "qk_matmul_output_mode", 4);
    node_model(&m, "Attention", "", 23, qkv, 3, y3, 1, attrs, 3);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("qk_matmul_output_mode 4 (0 to 3)");
    attr_int(&attrs[0], "axis", 0);
    node_model(&m, "TensorScatter", "", 24, qkv, 2, y3, 1, attrs, 1);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("axis must not be the batch dim");
    static const io_spec tok[1] = {{"x", ONNX_INT64, 1, {5}}};
    static const io_spec tf_out[1] = {{"y", ONNX_FLOAT, 1, {2}}};
    memset(&attrs[0], 0, sizeof attrs[0]);
    pb_str(&attrs[0], 1, "pool_strings");
    pb_str(&attrs[0], 9, "a");
    pb_int(&attrs[0], 20, 8); /* STRINGS */
    node_model(&m, "TfIdfVectorizer", "", 9, tok, 1, tf_out, 1, attrs, 1);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("pool_strings (string n-grams)");
    static const io_spec ccp_in[2] = {{"x", ONNX_FLOAT, 3, {1, 2, 4}}, {"shape", ONNX_INT64, 1, {3}}};
    node_model(&m, "CenterCropPad", "", 18, ccp_in, 2, y3, 1, NULL, 0);
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    tp_program_free(p);
    p = NULL;
    static const io_spec ccp_bad[2] = {{"x", ONNX_FLOAT, 3, {1, 2, 4}}, {"shape", ONNX_INT64, 1, {2}}};
    node_model(&m, "CenterCropPad", "", 18, ccp_bad, 2, y3, 1, NULL, 0);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("shape has 2 values for 3 axes");
    static const io_spec rz_in[3] = {{"x", ONNX_FLOAT, 3, {1, 2, 4}}, {"roi", ONNX_FLOAT, 1, {0}},
                                     {"scales", ONNX_FLOAT, 1, {2}}};
    memset(&attrs[0], 0, sizeof attrs[0]);
    pb_str(&attrs[0], 1, "axes");
    pb_int(&attrs[0], 8, 1);
    pb_int(&attrs[0], 8, -2);
    pb_int(&attrs[0], 20, 7); /* INTS */
    node_model(&m, "Resize", "", 19, rz_in, 3, y3, 1, attrs, 1);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("axis 1 repeated in 'axes'");
    CHECK(p == NULL);
}

/* ---- strings as UTF-8 bytes (src/onnx/strings.c) ------------------------------- */

#define ONNX_STRING 8

/* uint8 [n, width] of n strings, zero-padded. */
static tp_tensor *utf8_rows(int n, const char *const *strs, int64_t width) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_zeros(TP_UINT8, 2, (int64_t[]){n, width}, &t));
    for (int i = 0; t && i < n; i++) memcpy((uint8_t *)tp_tensor_data(t) + i * width, strs[i], strlen(strs[i]));
    return t;
}

/* Row i of uint8 [n, width] as a C string. */
static void utf8_row(const tp_tensor *t, int64_t i, char *buf, size_t size) {
    int64_t w = tp_tensor_size(t, 1), k = 0;
    for (; k < w && k < (int64_t)size - 1 && tp_tensor_item_f64(t, i * w + k) != 0; k++)
        buf[k] = (char)tp_tensor_item_f64(t, i * w + k);
    buf[k] = '\0';
}

/* StringNormalizer (stopword "monday", case-insensitive, UPPER) on string
 * inputs of two widths; the report names the string input and output; a
 * string given to another op is refused; a STRING TensorProto reads as
 * zero-padded UTF-8 rows and one with the wrong string count is corrupt. */
TEST(strings_as_utf8_bytes) {
    static pb m, attrs[3];
    attr_str(&attrs[0], "case_change_action", "UPPER");
    memset(&attrs[1], 0, sizeof attrs[1]);
    pb_str(&attrs[1], 1, "stopwords");
    pb_str(&attrs[1], 9, "monday");
    pb_int(&attrs[1], 20, 8); /* STRINGS */
    attr_int(&attrs[2], "is_case_sensitive", 0);
    static const io_spec in[1] = {{"x", ONNX_STRING, 1, {3}}};
    static const io_spec out[1] = {{"y", ONNX_STRING, 1, {2}}};
    node_model(&m, "StringNormalizer", "", 10, in, 1, out, 1, attrs, 3);
    tp_program *p = NULL;
    tp_onnx_report rep;
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, &rep));
    CHECK(rep.n_strings == 2 && !strcmp(rep.strings[0], "x") && !strcmp(rep.strings[1], "y"));
    CHECK(rep.n_outputs == 1 && !strcmp(rep.outputs[0], "y"));
    tp_onnx_report_clear(&rep);
    if (p) {
        static const char *const a[3] = {"Monday", "tue", "Wed\xc3\xa9"};
        tp_tensor *x = utf8_rows(3, a, 7);
        tp_tensor *y = call_n(p, &x, 1, 0);
        CHECK(y && tp_tensor_ndim(y) == 2 && tp_tensor_size(y, 0) == 2);
        char buf[16];
        if (y && tp_tensor_ndim(y) == 2 && tp_tensor_size(y, 0) == 2) {
            utf8_row(y, 0, buf, sizeof buf);
            CHECK(!strcmp(buf, "TUE"));
            utf8_row(y, 1, buf, sizeof buf);
            CHECK(!strcmp(buf, "WED\xc3\xa9")); /* non-ASCII bytes unchanged */
        }
        tp_tensor_free(y);
        static const char *const b[3] = {"MONDAY", "monday", "mOnDaY"}; /* all removed: one empty string */
        x = utf8_rows(3, b, 6);
        y = call_n(p, &x, 1, 0);
        CHECK(y && tp_tensor_ndim(y) == 2 && tp_tensor_size(y, 0) == 1);
        if (y && tp_tensor_ndim(y) == 2 && tp_tensor_size(y, 0) == 1) {
            utf8_row(y, 0, buf, sizeof buf);
            CHECK(buf[0] == '\0');
        }
        tp_tensor_free(y);
        tp_program_free(p);
    }
    check_alloc_failures("StringNormalizer", load_for_alloc_test, &m);
    static const io_spec y1[1] = {{"y", ONNX_STRING, 1, {3}}};
    p = NULL;
    node_model(&m, "Neg", "", 13, in, 1, y1, 1, NULL, 0);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("(Neg, opset 13): string tensors are supported by Identity, StringNormalizer, Equal and "
                       "StringConcat only");
    pb t = {0};
    pb_int(&t, 1, 2);  /* dims [2] */
    pb_int(&t, 2, 8);  /* STRING */
    pb_str(&t, 6, "ab");
    pb_str(&t, 6, "cdef");
    tp_tensor *r = NULL;
    CHECK_OK(tp_onnx_load_tensor_buffer(t.data, t.len, &r));
    CHECK(r && tp_tensor_dtype(r) == TP_UINT8 && tp_tensor_ndim(r) == 2 && tp_tensor_size(r, 1) == 4);
    if (r && tp_tensor_ndim(r) == 2) {
        char buf[8];
        utf8_row(r, 0, buf, sizeof buf);
        CHECK(!strcmp(buf, "ab"));
        utf8_row(r, 1, buf, sizeof buf);
        CHECK(!strcmp(buf, "cdef"));
    }
    tp_tensor_free(r);
    pb_int(&t, 1, 2); /* dims [2, 2]: four elements, two strings */
    r = NULL;
    CHECK_STATUS(tp_onnx_load_tensor_buffer(t.data, t.len, &r), TP_ERR_CORRUPT);
    CHECK_ERR_CONTAINS("2 strings for 4 elements");
}

/* A node message: op in domain (NULL: the default) with inputs and outputs. */
static void node_msg(pb *n, const char *op, const char *domain, const char *const *in, int n_in,
                     const char *const *out, int n_out, const pb *attrs, int n_attrs) {
    memset(n, 0, sizeof *n);
    for (int i = 0; i < n_in; i++) pb_str(n, 1, in[i]);
    for (int i = 0; i < n_out; i++) pb_str(n, 2, out[i]);
    pb_str(n, 4, op);
    for (int i = 0; i < n_attrs; i++) pb_msg(n, 5, &attrs[i]);
    if (domain) pb_str(n, 7, domain);
}

/* Gradient of d = (a * b) @ a (b [2] broadcast over a [2, 2]) against a
 * and b, at a = [[1, 2], [3, 4]], b = [5, 6]: by hand (dd/dc = 1 a^T,
 * da = c^T 1 + dc * b, db = sum_rows(dc * a); numpy's central differences
 * agree) da = [[35, 62], [51, 78]], db = [12, 42];
 * a node on the path that has no rule is refused, naming it. */
TEST(gradient_by_hand) {
    static pb m, graph, nodes[3], attrs[2], vi, opset;
    const char *mul_in[2] = {"a", "b"}, *mm_in[2] = {"c", "a"}, *c_out[1] = {"c"}, *d_out[1] = {"d"};
    const char *g_out[2] = {"da", "db"};
    for (int variant = 0; variant < 2; variant++) {
        node_msg(&nodes[0], "Mul", NULL, mul_in, 2, c_out, 1, NULL, 0);
        node_msg(&nodes[1], variant ? "Softplus" : "MatMul", NULL, mm_in, variant ? 1 : 2, d_out, 1, NULL, 0);
        memset(&attrs[0], 0, sizeof attrs[0]);
        pb_str(&attrs[0], 1, "xs");
        pb_str(&attrs[0], 9, "a");
        pb_str(&attrs[0], 9, "b");
        pb_int(&attrs[0], 20, 8); /* STRINGS */
        attr_str(&attrs[1], "y", "d");
        node_msg(&nodes[2], "Gradient", "ai.onnx.preview.training", mul_in, 2, g_out, 2, attrs, 2);
        memset(&graph, 0, sizeof graph);
        for (int i = 0; i < 3; i++) pb_msg(&graph, 1, &nodes[i]);
        pb_str(&graph, 2, "g");
        value_info(&vi, "a", ONNX_FLOAT, (int64_t[]){2, 2}, 2);
        pb_msg(&graph, 11, &vi);
        value_info(&vi, "b", ONNX_FLOAT, (int64_t[]){2}, 1);
        pb_msg(&graph, 11, &vi);
        value_info(&vi, "da", ONNX_FLOAT, (int64_t[]){2, 2}, 2);
        pb_msg(&graph, 12, &vi);
        value_info(&vi, "db", ONNX_FLOAT, (int64_t[]){2}, 1);
        pb_msg(&graph, 12, &vi);
        memset(&m, 0, sizeof m);
        pb_int(&m, 1, 8);
        pb_msg(&m, 7, &graph);
        memset(&opset, 0, sizeof opset);
        pb_int(&opset, 2, 13);
        pb_msg(&m, 8, &opset);
        memset(&opset, 0, sizeof opset);
        pb_str(&opset, 1, "ai.onnx.preview.training");
        pb_int(&opset, 2, 1);
        pb_msg(&m, 8, &opset);
        tp_program *p = NULL;
        if (variant) {
            CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_UNSUPPORTED);
            CHECK_ERR_CONTAINS("Gradient through Softplus");
            continue;
        }
        CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
        check_alloc_failures("Gradient", load_for_alloc_test, &m);
        if (!p) continue;
        tp_tensor *a[2] = {f32s(2, (int64_t[]){2, 2}, (float[]){1, 2, 3, 4}), f32s(1, (int64_t[]){2}, (float[]){5, 6})};
        tp_value av[2] = {tp_value_tensor(a[0]), tp_value_tensor(a[1])}, o = tp_value_none();
        CHECK_OK(tp_program_call(p, av, 2, NULL, &o));
        const tp_value *da = tp_value_at(&o, 0), *db = tp_value_at(&o, 1);
        check_result(da && da->kind == TP_VAL_TENSOR ? tp_tensor_retain(da->u.tensor) : NULL, 2, (int64_t[]){2, 2},
                     (double[]){35, 62, 51, 78}, "Gradient da");
        check_result(db && db->kind == TP_VAL_TENSOR ? tp_tensor_retain(db->u.tensor) : NULL, 1, (int64_t[]){2},
                     (double[]){12, 42}, "Gradient db");
        tp_value_clear(&o);
        tp_value_clear(&av[0]);
        tp_value_clear(&av[1]);
        tp_program_free(p);
    }
}

/* Momentum (ai.onnx.preview.training, the only domain imported): one
 * step computed by hand, T = 0 (beta not applied) then T = 1; and the
 * errors: an unknown mode, a missing attribute, the wrong input count. */
TEST(training_momentum) {
    static pb m;
    static const io_spec in[5] = {{"R", ONNX_FLOAT, 0, {0}}, {"T", ONNX_INT64, 0, {0}}, {"X", ONNX_FLOAT, 1, {2}},
                                  {"G", ONNX_FLOAT, 1, {2}}, {"V", ONNX_FLOAT, 1, {2}}};
    static const io_spec out[2] = {{"X_new", ONNX_FLOAT, 1, {2}}, {"V_new", ONNX_FLOAT, 1, {2}}};
    pb attrs[4];
    attr_float(&attrs[0], "alpha", 0.5f);
    attr_float(&attrs[1], "beta", 0.25f);
    attr_float(&attrs[2], "norm_coefficient", 0.0f);
    attr_str(&attrs[3], "mode", "nesterov");
    node_model(&m, "Momentum", "ai.onnx.preview.training", 1, in, 5, out, 2, attrs, 4);
    tp_program *p = NULL;
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    for (int64_t T = 0; p && T < 2; T++) {
        float r = 0.5f, x[2] = {1, 2}, g[2] = {2, -4}, v[2] = {4, 8};
        tp_tensor *t[5] = {NULL};
        CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 0, NULL, &r, &t[0]));
        CHECK_OK(tp_tensor_from_data(TP_INT64, 0, NULL, &T, &t[1]));
        CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){2}, x, &t[2]));
        CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){2}, g, &t[3]));
        CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){2}, v, &t[4]));
        tp_value a[5], o = tp_value_none();
        for (int i = 0; i < 5; i++) a[i] = tp_value_tensor(t[i]);
        CHECK_OK(tp_program_call(p, a, 5, NULL, &o));
        /* V' = alpha V + b G (b = 1 at T = 0, beta after); X' = X - R (G + alpha V') */
        double b = T > 0 ? 0.25 : 1.0;
        for (int i = 0; i < 2 && tp_value_len(&o) == 2; i++) {
            double vn = 0.5 * v[i] + b * g[i], xn = x[i] - 0.5 * (g[i] + 0.5 * vn);
            CHECK(fabs(tp_tensor_item_f64(tp_value_at(&o, 0)->u.tensor, i) - xn) < 1e-6);
            CHECK(fabs(tp_tensor_item_f64(tp_value_at(&o, 1)->u.tensor, i) - vn) < 1e-6);
        }
        tp_value_clear(&o);
        for (int i = 0; i < 5; i++) tp_value_clear(&a[i]);
    }
    tp_program_free(p);
    p = NULL;
    attr_str(&attrs[3], "mode", "fancy");
    node_model(&m, "Momentum", "ai.onnx.preview.training", 1, in, 5, out, 2, attrs, 4);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("node 'the_node' (Momentum, opset 1): mode 'fancy' (expected 'standard' or 'nesterov')");
    node_model(&m, "Momentum", "ai.onnx.preview.training", 1, in, 5, out, 2, attrs, 3);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("attribute 'mode' is required");
    node_model(&m, "Adagrad", "ai.onnx.preview.training", 1, in, 4, out, 2, NULL, 0);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("expected R, T and 3 groups of as many tensors each, got 4 inputs");
    CHECK(p == NULL);
}

/* ---- RoiAlign, DFT, STFT, MelWeightMatrix (issue #14): errors ------------------ */
static void attr_s(pb *node, const char *name, const char *v) {
    pb a = {0};
    pb_str(&a, 1, name);
    pb_bytes(&a, 4, v, strlen(v));
    pb_int(&a, 20, 3); /* STRING */
    pb_msg(node, 5, &a);
}

static void attr_i(pb *node, const char *name, int64_t v) {
    pb a = {0};
    pb_str(&a, 1, name);
    pb_int(&a, 3, v);
    pb_int(&a, 20, 2); /* INT */
    pb_msg(node, 5, &a);
}

/* A 0-d initializer of element type elem (1 float, 7 int64) holding v. */
static void scalar_init(pb *graph, const char *name, int elem, double v) {
    pb t = {0};
    pb_int(&t, 2, elem);
    pb_str(&t, 8, name);
    if (elem == 1) {
        float f = (float)v;
        pb_bytes(&t, 9, &f, sizeof f);
    } else {
        int64_t i = (int64_t)v;
        pb_bytes(&t, 9, &i, sizeof i);
    }
    pb_msg(graph, 5, &t);
}

static void graph_input(pb *graph, const char *name, int elem, const int64_t *dims, int nd) {
    pb vi;
    value_info(&vi, name, elem, dims, nd);
    pb_msg(graph, 11, &vi);
}

/* model = one node `node` (inputs, outputs "y", attributes already in it)
 * in `graph` (its inputs and initializers already in it) at opset 17; y
 * declared as a float tensor of unknown shape. */
static void signal_model(pb *model, pb *node, pb *graph, const char *op) {
    pb out = {0}, tt = {0}, ty = {0};
    pb_str(node, 2, "y");
    pb_str(node, 3, "the_node");
    pb_str(node, 4, op);
    pb_int(&tt, 1, 1);
    pb_msg(&ty, 1, &tt);
    pb_str(&out, 1, "y");
    pb_msg(&out, 2, &ty);
    pb g = {0};
    pb_msg(&g, 1, node);
    pb_str(&g, 2, "g");
    pb_raw(&g, graph->data, graph->len);
    pb_msg(&g, 12, &out);
    wrap_model(model, &g, NULL, 17);
}

static void roi_align_model(pb *m, const char *mode) {
    pb node = {0}, graph = {0};
    pb_str(&node, 1, "x");
    pb_str(&node, 1, "rois");
    pb_str(&node, 1, "bi");
    attr_s(&node, "mode", mode);
    attr_i(&node, "output_height", 1);
    attr_i(&node, "output_width", 1);
    attr_i(&node, "sampling_ratio", 1);
    graph_input(&graph, "x", 1, (int64_t[]){1, 1, 2, 2}, 4);
    graph_input(&graph, "rois", 1, (int64_t[]){1, 4}, 2);
    graph_input(&graph, "bi", 7, (int64_t[]){1}, 1);
    signal_model(m, &node, &graph, "RoiAlign");
}

/* RoiAlign runs (and through an archive: the op's callee is written and
 * read back); a batch index beyond the batch fails when the program runs;
 * an unknown mode is refused at import. */
TEST(roi_align_errors) {
    pb m;
    roi_align_model(&m, "avg");
    tp_program *p = NULL, *q = NULL;
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    if (!p) return;
    tp_archive *ar = NULL;
    void *buf = NULL;
    size_t size = 0;
    tp_archive_entry e = {"model", p};
    CHECK_OK(tp_archive_save_buffer(&e, 1, NULL, 0, &buf, &size));
    if (buf) CHECK_OK(tp_archive_load_buffer(buf, size, NULL, &ar));
    tp_free(buf);
    q = ar ? tp_archive_find_program(ar, "model") : NULL;
    CHECK(q != NULL);
    float xs[4] = {1, 2, 3, 4}, roi[4] = {0, 0, 1, 1};
    for (int k = 0; k < 4; k++) {
        tp_program *prog = k % 2 ? q : p;
        if (!prog) continue;
        int64_t b = k < 2 ? 0 : 1;
        tp_tensor *x = NULL, *r = NULL, *bi = NULL;
        CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, xs, &x));
        CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 2, (int64_t[]){1, 4}, roi, &r));
        CHECK_OK(tp_tensor_from_data(TP_INT64, 1, (int64_t[]){1}, &b, &bi));
        tp_value a[3] = {tp_value_tensor(x), tp_value_tensor(r), tp_value_tensor(bi)}, out = tp_value_none();
        if (b == 0) {
            /* one sample at (0.5, 0.5) - 0.5 (half_pixel, opset 16's default): x[0, 0] */
            CHECK_OK(tp_program_call(prog, a, 3, NULL, &out));
            const tp_value *y = out.kind == TP_VAL_TUPLE ? tp_value_at(&out, 0) : &out;
            CHECK(y && y->kind == TP_VAL_TENSOR && tp_tensor_numel(y->u.tensor) == 1 &&
                  tp_tensor_item_f64(y->u.tensor, 0) == 1.0);
        } else {
            CHECK_STATUS(tp_program_call(prog, a, 3, NULL, &out), TP_ERR_INDEX);
            CHECK_ERR_CONTAINS("batch_indices[0] = 1 is out of range for 1 images");
        }
        tp_value_clear(&out);
        for (int i = 0; i < 3; i++) tp_value_clear(&a[i]);
    }
    tp_archive_free(ar);
    tp_program_free(p);
    p = NULL;
    roi_align_model(&m, "min");
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("node 'the_node'");
    CHECK_ERR_CONTAINS("mode 'min'");
    CHECK(p == NULL);
}

/* DFT of a [.., 3] input (neither real nor complex): refused at import by the shape rule. */
TEST(dft_errors) {
    pb m, node = {0}, graph = {0};
    pb_str(&node, 1, "x");
    attr_i(&node, "axis", 1);
    graph_input(&graph, "x", 1, (int64_t[]){1, 4, 3}, 3);
    signal_model(&m, &node, &graph, "DFT");
    tp_program *p = NULL;
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_SHAPE);
    CHECK_ERR_CONTAINS("the last dim of input must be 1 (real) or 2 (complex), got 3");
    CHECK(p == NULL);
    /* axis on the last dim */
    pb node2 = {0}, graph2 = {0};
    pb_str(&node2, 1, "x");
    attr_i(&node2, "axis", 2);
    graph_input(&graph2, "x", 1, (int64_t[]){1, 4, 2}, 3);
    signal_model(&m, &node2, &graph2, "DFT");
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INDEX);
    CHECK_ERR_CONTAINS("axis 2 is the last dim");
}

/* STFT: frame_step 0 (a constant) refused; frame_step given at run time
 * refused as not a constant. */
TEST(stft_errors) {
    pb m, node = {0}, graph = {0};
    pb_str(&node, 1, "signal");
    pb_str(&node, 1, "step");
    graph_input(&graph, "signal", 1, (int64_t[]){1, 16, 1}, 3);
    scalar_init(&graph, "step", 7, 0);
    signal_model(&m, &node, &graph, "STFT");
    tp_program *p = NULL;
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("frame_step must be positive, got 0");
    CHECK(p == NULL);
    pb node2 = {0}, graph2 = {0};
    pb_str(&node2, 1, "signal");
    pb_str(&node2, 1, "step");
    graph_input(&graph2, "signal", 1, (int64_t[]){1, 16, 1}, 3);
    graph_input(&graph2, "step", 7, NULL, 0);
    signal_model(&m, &node2, &graph2, "STFT");
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("input 'frame_step' must be a constant");
}

/* MelWeightMatrix: an upper edge past Nyquist maps beyond the spectrogram. */
TEST(mel_weight_matrix_errors) {
    pb m, node = {0}, graph = {0};
    static const char *const names[] = {"m", "n", "sr", "lo", "hi"};
    for (int i = 0; i < 5; i++) pb_str(&node, 1, names[i]);
    scalar_init(&graph, "m", 7, 4);
    scalar_init(&graph, "n", 7, 16);
    scalar_init(&graph, "sr", 7, 8000);
    scalar_init(&graph, "lo", 1, 0);
    scalar_init(&graph, "hi", 1, 8000);
    signal_model(&m, &node, &graph, "MelWeightMatrix");
    tp_program *p = NULL;
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("upper_edge_hertz 8000 maps past the last spectrogram bin (8)");
    CHECK(p == NULL);
}

/* Resize tf_crop_and_resize: roi must hold a start and an end per dim. */
TEST(resize_crop_roi_errors) {
    pb m, node = {0}, graph = {0}, roi = {0}, sizes = {0};
    pb_str(&node, 1, "x");
    pb_str(&node, 1, "roi");
    pb_str(&node, 1, "");
    pb_str(&node, 1, "sizes");
    attr_s(&node, "coordinate_transformation_mode", "tf_crop_and_resize");
    attr_s(&node, "mode", "linear");
    graph_input(&graph, "x", 1, (int64_t[]){1, 1, 4, 4}, 4);
    float rv[4] = {0, 0, 1, 1};
    int64_t sv[4] = {1, 1, 3, 3};
    pb_int(&roi, 1, 4);
    pb_int(&roi, 2, 1);
    pb_str(&roi, 8, "roi");
    pb_bytes(&roi, 9, rv, sizeof rv);
    pb_msg(&graph, 5, &roi);
    pb_int(&sizes, 1, 4);
    pb_int(&sizes, 2, 7);
    pb_str(&sizes, 8, "sizes");
    pb_bytes(&sizes, 9, sv, sizeof sv);
    pb_msg(&graph, 5, &sizes);
    signal_model(&m, &node, &graph, "Resize");
    tp_program *p = NULL;
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("tf_crop_and_resize needs input 'roi' with 8 values (starts and ends of 4 dims), got 4");
    CHECK(p == NULL);
}

/* ---- sequences ---------------------------------------------------------------------- */

/* A node op(ins...) -> out named after out, with attributes attrs (NULL: none). */
static void seq_node(pb *graph, const char *op, const char *const *ins, int n_in, const char *out, const pb *attrs) {
    pb node = {0};
    for (int i = 0; i < n_in; i++) pb_str(&node, 1, ins[i]);
    pb_str(&node, 2, out);
    pb_str(&node, 3, out);
    pb_str(&node, 4, op);
    if (attrs) pb_raw(&node, attrs->data, attrs->len);
    pb_msg(graph, 1, &node);
}

/* Graph output `name`: a tensor of element type elem, shape not given. */
static void graph_output(pb *graph, const char *name, int elem) {
    pb out = {0}, tt = {0}, ty = {0};
    pb_int(&tt, 1, elem);
    pb_msg(&ty, 1, &tt);
    pb_str(&out, 1, name);
    pb_msg(&out, 2, &ty);
    pb_msg(graph, 12, &out);
}

static void seq_model(pb *model, const pb *graph) {
    pb g = {0};
    pb_str(&g, 2, "g");
    pb_raw(&g, graph->data, graph->len);
    wrap_model(model, &g, NULL, 17);
}

/* s1 = [a, b]; s2 = insert(s1, b, 0) = [b, a, b]; s3 = erase(s2) = [b, a];
 * y = concat(s3, axis 0) = [3, 4, 1, 2]; n = length(s2) = 3;
 * z = at(s3, -1) = a; s4 = split_to_sequence(y, keepdims 0) = four scalars;
 * w = concat(s4, new_axis, axis 0) = y; m = length(s4) = 4. */
TEST(sequence_ops_by_hand) {
    pb graph = {0}, ax0 = {0}, nax = {0}, kd0 = {0};
    graph_input(&graph, "a", 1, (int64_t[]){2}, 1);
    graph_input(&graph, "b", 1, (int64_t[]){2}, 1);
    scalar_init(&graph, "p0", 7, 0);
    scalar_init(&graph, "pm1", 7, -1);
    seq_node(&graph, "SequenceConstruct", (const char *[]){"a", "b"}, 2, "s1", NULL);
    seq_node(&graph, "SequenceInsert", (const char *[]){"s1", "b", "p0"}, 3, "s2", NULL);
    seq_node(&graph, "SequenceErase", (const char *[]){"s2"}, 1, "s3", NULL);
    attr_i(&ax0, "axis", 0);
    seq_node(&graph, "ConcatFromSequence", (const char *[]){"s3"}, 1, "y", &ax0);
    seq_node(&graph, "SequenceLength", (const char *[]){"s2"}, 1, "n", NULL);
    seq_node(&graph, "SequenceAt", (const char *[]){"s3", "pm1"}, 2, "z", NULL);
    attr_i(&kd0, "keepdims", 0);
    seq_node(&graph, "SplitToSequence", (const char *[]){"y"}, 1, "s4", &kd0);
    attr_i(&nax, "axis", 0);
    attr_i(&nax, "new_axis", 1);
    seq_node(&graph, "ConcatFromSequence", (const char *[]){"s4"}, 1, "w", &nax);
    seq_node(&graph, "SequenceLength", (const char *[]){"s4"}, 1, "m", NULL);
    graph_output(&graph, "y", 1);
    graph_output(&graph, "n", 7);
    graph_output(&graph, "z", 1);
    graph_output(&graph, "w", 1);
    graph_output(&graph, "m", 7);
    pb m;
    seq_model(&m, &graph);
    tp_program *p = NULL;
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    if (!p) return;
    tp_tensor *a = NULL, *b = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){2}, (float[]){1, 2}, &a));
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){2}, (float[]){3, 4}, &b));
    tp_value args[2] = {tp_value_tensor(a), tp_value_tensor(b)}, out = tp_value_none();
    CHECK_OK(tp_program_call(p, args, 2, NULL, &out));
    CHECK(tp_value_len(&out) == 5);
    if (tp_value_len(&out) == 5) {
        const tp_tensor *y = tp_value_at(&out, 0)->u.tensor, *n = tp_value_at(&out, 1)->u.tensor,
                        *z = tp_value_at(&out, 2)->u.tensor, *w = tp_value_at(&out, 3)->u.tensor,
                        *mm = tp_value_at(&out, 4)->u.tensor;
        CHECK(tp_tensor_numel(y) == 4 && tp_tensor_item_f64(y, 0) == 3 && tp_tensor_item_f64(y, 1) == 4 &&
              tp_tensor_item_f64(y, 2) == 1 && tp_tensor_item_f64(y, 3) == 2);
        CHECK(tp_tensor_dtype(n) == TP_INT64 && tp_tensor_ndim(n) == 0 && tp_tensor_item_f64(n, 0) == 3);
        CHECK(tp_tensor_numel(z) == 2 && tp_tensor_item_f64(z, 0) == 1 && tp_tensor_item_f64(z, 1) == 2);
        CHECK(tp_tensor_ndim(w) == 1 && tp_tensor_numel(w) == 4 && tp_tensor_item_f64(w, 0) == 3 &&
              tp_tensor_item_f64(w, 3) == 2);
        CHECK(tp_tensor_item_f64(mm, 0) == 4);
    }
    tp_value_clear(&out);
    tp_value_clear(&args[0]);
    tp_value_clear(&args[1]);
    tp_program_free(p);
}

/* ---- control flow: If, Loop, Scan (issue #14 item 3) ------------------------ */

static void attr_graph(pb *node, const char *name, const pb *g) {
    pb a = {0};
    pb_str(&a, 1, name);
    pb_msg(&a, 6, g);
    pb_int(&a, 20, 5); /* GRAPH */
    pb_msg(node, 5, &a);
}

/* A 0-d bool initializer. */
static void bool_init(pb *graph, const char *name, bool v) {
    pb t = {0};
    pb_int(&t, 2, 9);
    pb_str(&t, 8, name);
    uint8_t b = v;
    pb_bytes(&t, 9, &b, 1);
    pb_msg(graph, 5, &t);
}

/* A node with inputs, one output and attributes (already encoded). */
static void node_with(pb *graph, const char *op, const char *const *ins, int n_in, const char *const *outs, int n_out,
                      const pb *attrs) {
    static pb node;
    memset(&node, 0, sizeof node);
    for (int i = 0; i < n_in; i++) pb_str(&node, 1, ins[i]);
    for (int i = 0; i < n_out; i++) pb_str(&node, 2, outs[i]);
    pb_str(&node, 3, outs[0]);
    pb_str(&node, 4, op);
    if (attrs) pb_raw(&node, attrs->data, attrs->len);
    pb_msg(graph, 1, &node);
}

/* y = If(cond) {x + 1} else {x * 2} over x float [3]; cond a graph input
 * (both branches, then where) or, with const_cond, a bool initializer (only
 * the taken branch is converted: the other holds an op that does not
 * exist); else_concat: the else branch makes [6] (refused at run time). */
static void if_model(pb *m, int const_cond, bool else_concat) {
    static pb graph, tb, eb, attrs;
    memset(&graph, 0, sizeof graph);
    memset(&tb, 0, sizeof tb);
    memset(&eb, 0, sizeof eb);
    memset(&attrs, 0, sizeof attrs);
    graph_input(&graph, "x", ONNX_FLOAT, (int64_t[]){3}, 1);
    if (const_cond < 0) graph_input(&graph, "cond", 9, NULL, 0);
    else bool_init(&graph, "cond", const_cond);
    scalar_init(&graph, "one", ONNX_FLOAT, 1);
    scalar_init(&graph, "two", ONNX_FLOAT, 2);
    pb_str(&tb, 2, "then");
    node_with(&tb, "Add", (const char *[]){"x", "one"}, 2, (const char *[]){"t_out"}, 1, NULL);
    graph_output(&tb, "t_out", ONNX_FLOAT);
    pb_str(&eb, 2, "else");
    if (const_cond == 1) {
        node_with(&eb, "NoSuchOp", (const char *[]){"x"}, 1, (const char *[]){"e_out"}, 1, NULL);
    } else if (else_concat) {
        pb ax = {0};
        attr_i(&ax, "axis", 0);
        node_with(&eb, "Concat", (const char *[]){"x", "x"}, 2, (const char *[]){"e_out"}, 1, &ax);
    } else {
        node_with(&eb, "Mul", (const char *[]){"x", "two"}, 2, (const char *[]){"e_out"}, 1, NULL);
    }
    graph_output(&eb, "e_out", ONNX_FLOAT);
    attr_graph(&attrs, "then_branch", &tb);
    attr_graph(&attrs, "else_branch", &eb);
    node_with(&graph, "If", (const char *[]){"cond"}, 1, (const char *[]){"y"}, 1, &attrs);
    graph_output(&graph, "y", ONNX_FLOAT);
    seq_model(m, &graph);
}

static void check_if_result(tp_program *p, int cond, const float *want) {
    tp_tensor *x = NULL, *c = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){3}, (float[]){1, 2, 3}, &x));
    tp_value a[2] = {tp_value_tensor(x), tp_value_none()}, o = tp_value_none();
    int n = 1;
    if (cond >= 0) {
        CHECK_OK(tp_tensor_scalar(TP_BOOL, cond, &c));
        a[1] = tp_value_tensor(c);
        n = 2;
    }
    CHECK_OK(tp_program_call(p, a, n, NULL, &o));
    const tp_value *y = o.kind == TP_VAL_TUPLE ? tp_value_at(&o, 0) : &o;
    CHECK(y && y->kind == TP_VAL_TENSOR && tp_tensor_numel(y->u.tensor) == 3);
    for (int i = 0; y && y->kind == TP_VAL_TENSOR && i < 3 && tp_tensor_numel(y->u.tensor) == 3; i++)
        CHECK(tp_tensor_item_f64(y->u.tensor, i) == want[i]);
    tp_value_clear(&o);
    tp_value_clear(&a[0]);
    tp_value_clear(&a[1]);
}

TEST(if_by_hand) {
    static pb m;
    static const float plus1[3] = {2, 3, 4}, times2[3] = {2, 4, 6};
    tp_program *p = NULL;
    if_model(&m, -1, false); /* run-time condition */
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    if (p) {
        check_if_result(p, 1, plus1);
        check_if_result(p, 0, times2);
    }
    tp_program_free(p);
    p = NULL;
    if_model(&m, 1, false); /* constant true: the else branch (an unknown op) is never converted */
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    if (p) check_if_result(p, -1, plus1);
    tp_program_free(p);
    p = NULL;
    if_model(&m, 0, false);
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    if (p) check_if_result(p, -1, times2);
    tp_program_free(p);
    p = NULL;
    if_model(&m, -1, true);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("(If, opset 17): output 0: the branches make different dtypes or shapes");
    CHECK(p == NULL);
    if_model(&m, -1, false);
    check_alloc_failures("load If model", load_for_alloc_test, &m);
}

/* Loop with trip count 3 (constant) over y [1]: body y + float(i), also a
 * scan output: y_final = y + 3; scans = [y, y + 1, y + 3] as [3, 1]. Scan
 * over x [3, 2] in reverse with state s [2]: s_final = s + sum of rows;
 * scan output = the running sums in processing order (x[2] first). A Loop
 * whose trip count is a graph input is refused, naming it. */
static void loop_model(pb *m, bool run_time_trip) {
    static pb graph, body, attrs;
    memset(&graph, 0, sizeof graph);
    memset(&body, 0, sizeof body);
    memset(&attrs, 0, sizeof attrs);
    graph_input(&graph, "y", ONNX_FLOAT, (int64_t[]){1}, 1);
    if (run_time_trip) graph_input(&graph, "M", ONNX_INT64, NULL, 0);
    else scalar_init(&graph, "M", ONNX_INT64, 3);
    bool_init(&graph, "go", true);
    pb_str(&body, 2, "body");
    graph_input(&body, "i", ONNX_INT64, NULL, 0);
    graph_input(&body, "c_in", 9, NULL, 0);
    graph_input(&body, "y_in", ONNX_FLOAT, (int64_t[]){1}, 1);
    pb to = {0};
    attr_i(&to, "to", 1);
    node_with(&body, "Identity", (const char *[]){"c_in"}, 1, (const char *[]){"c_out"}, 1, NULL);
    node_with(&body, "Cast", (const char *[]){"i"}, 1, (const char *[]){"fi"}, 1, &to);
    node_with(&body, "Add", (const char *[]){"y_in", "fi"}, 2, (const char *[]){"y_out"}, 1, NULL);
    node_with(&body, "Identity", (const char *[]){"y_out"}, 1, (const char *[]){"scan"}, 1, NULL);
    graph_output(&body, "c_out", 9);
    graph_output(&body, "y_out", ONNX_FLOAT);
    graph_output(&body, "scan", ONNX_FLOAT);
    attr_graph(&attrs, "body", &body);
    node_with(&graph, "Loop", (const char *[]){"M", "go", "y"}, 3, (const char *[]){"y_final", "scans"}, 2, &attrs);
    graph_output(&graph, "y_final", ONNX_FLOAT);
    graph_output(&graph, "scans", ONNX_FLOAT);
    seq_model(m, &graph);
}

static void scan_model(pb *m) {
    static pb graph, body, attrs;
    memset(&graph, 0, sizeof graph);
    memset(&body, 0, sizeof body);
    memset(&attrs, 0, sizeof attrs);
    graph_input(&graph, "s", ONNX_FLOAT, (int64_t[]){2}, 1);
    graph_input(&graph, "x", ONNX_FLOAT, (int64_t[]){3, 2}, 2);
    pb_str(&body, 2, "body");
    graph_input(&body, "s_in", ONNX_FLOAT, (int64_t[]){2}, 1);
    graph_input(&body, "xt", ONNX_FLOAT, (int64_t[]){2}, 1);
    node_with(&body, "Add", (const char *[]){"s_in", "xt"}, 2, (const char *[]){"s_out"}, 1, NULL);
    node_with(&body, "Identity", (const char *[]){"s_out"}, 1, (const char *[]){"o"}, 1, NULL);
    graph_output(&body, "s_out", ONNX_FLOAT);
    graph_output(&body, "o", ONNX_FLOAT);
    attr_graph(&attrs, "body", &body);
    attr_i(&attrs, "num_scan_inputs", 1);
    pb dirs = {0};
    pb_str(&dirs, 1, "scan_input_directions");
    pb_int(&dirs, 8, 1);
    pb_int(&dirs, 20, 7); /* INTS */
    pb_msg(&attrs, 5, &dirs);
    node_with(&graph, "Scan", (const char *[]){"s", "x"}, 2, (const char *[]){"s_final", "sums"}, 2, &attrs);
    graph_output(&graph, "s_final", ONNX_FLOAT);
    graph_output(&graph, "sums", ONNX_FLOAT);
    seq_model(m, &graph);
}

TEST(loop_and_scan_by_hand) {
    static pb m;
    tp_program *p = NULL;
    loop_model(&m, false);
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    if (p) {
        tp_tensor *y = NULL;
        CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){1}, (float[]){10}, &y));
        tp_value a = tp_value_tensor(y), o = tp_value_none();
        CHECK_OK(tp_program_call(p, &a, 1, NULL, &o));
        CHECK(tp_value_len(&o) == 2);
        if (tp_value_len(&o) == 2) {
            const tp_tensor *yf = tp_value_at(&o, 0)->u.tensor, *sc = tp_value_at(&o, 1)->u.tensor;
            CHECK(tp_tensor_numel(yf) == 1 && tp_tensor_item_f64(yf, 0) == 13);
            CHECK(tp_tensor_ndim(sc) == 2 && tp_tensor_sizes(sc)[0] == 3 && tp_tensor_sizes(sc)[1] == 1);
            if (tp_tensor_numel(sc) == 3)
                CHECK(tp_tensor_item_f64(sc, 0) == 10 && tp_tensor_item_f64(sc, 1) == 11 && tp_tensor_item_f64(sc, 2) == 13);
        }
        tp_value_clear(&o);
        tp_value_clear(&a);
    }
    check_alloc_failures("load Loop model", load_for_alloc_test, &m);
    tp_program_free(p);
    p = NULL;
    loop_model(&m, true);
    tp_onnx_report rep;
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, &rep), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("(Loop, opset 17): the trip count is known only when the program runs");
    CHECK(rep.n_need_constant == 1 && !strcmp(rep.need_constant[0], "M"));
    tp_onnx_report_clear(&rep);
    scan_model(&m);
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    if (p) {
        tp_tensor *s0 = NULL, *x = NULL;
        CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){2}, (float[]){100, 200}, &s0));
        CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 2, (int64_t[]){3, 2}, (float[]){1, 2, 3, 4, 5, 6}, &x));
        tp_value a[2] = {tp_value_tensor(s0), tp_value_tensor(x)}, o = tp_value_none();
        CHECK_OK(tp_program_call(p, a, 2, NULL, &o));
        CHECK(tp_value_len(&o) == 2);
        if (tp_value_len(&o) == 2) {
            const tp_tensor *sf = tp_value_at(&o, 0)->u.tensor, *sums = tp_value_at(&o, 1)->u.tensor;
            CHECK(tp_tensor_numel(sf) == 2 && tp_tensor_item_f64(sf, 0) == 109 && tp_tensor_item_f64(sf, 1) == 212);
            static const double want[6] = {105, 206, 108, 210, 109, 212};
            CHECK(tp_tensor_ndim(sums) == 2 && tp_tensor_numel(sums) == 6);
            for (int i = 0; i < 6 && tp_tensor_numel(sums) == 6; i++) CHECK(tp_tensor_item_f64(sums, i) == want[i]);
        }
        tp_value_clear(&o);
        tp_value_clear(&a[0]);
        tp_value_clear(&a[1]);
    }
    tp_program_free(p);
    check_alloc_failures("load Scan model", load_for_alloc_test, &m);
}

/* If nested deeper than 8 (constant conditions, each then-branch holding
 * the next If) is refused; so are an If without its else branch, a Loop
 * whose body takes the wrong number of inputs and a Scan axis out of range. */
static void nested_if_model(pb *m, int depth) {
    static pb levels[12], elses[12], attrs[12], graph;
    memset(&graph, 0, sizeof graph);
    for (int k = depth; k >= 1; k--) { /* level k's graph: If(go) {level k + 1} else {Identity} */
        memset(&levels[k], 0, sizeof levels[k]);
        memset(&elses[k], 0, sizeof elses[k]);
        memset(&attrs[k], 0, sizeof attrs[k]);
        char out[16], eout[16], inner[16];
        snprintf(out, sizeof out, "o%d", k);
        snprintf(eout, sizeof eout, "e%d", k);
        snprintf(inner, sizeof inner, "o%d", k + 1);
        pb_str(&elses[k], 2, "else");
        node_with(&elses[k], "Identity", (const char *[]){"x"}, 1, (const char *[]){eout}, 1, NULL);
        graph_output(&elses[k], eout, ONNX_FLOAT);
        pb *then = k == depth ? NULL : &levels[k + 1];
        pb leaf = {0};
        if (!then) {
            pb_str(&leaf, 2, "leaf");
            node_with(&leaf, "Neg", (const char *[]){"x"}, 1, (const char *[]){inner}, 1, NULL);
            graph_output(&leaf, inner, ONNX_FLOAT);
            then = &leaf;
        }
        attr_graph(&attrs[k], "then_branch", then);
        attr_graph(&attrs[k], "else_branch", &elses[k]);
        pb *g = k == 1 ? &graph : &levels[k];
        if (k > 1) pb_str(g, 2, "level");
        node_with(g, "If", (const char *[]){"go"}, 1, (const char *[]){out}, 1, &attrs[k]);
        graph_output(g, out, ONNX_FLOAT);
    }
    graph_input(&graph, "x", ONNX_FLOAT, (int64_t[]){2}, 1);
    bool_init(&graph, "go", true);
    seq_model(m, &graph);
}

TEST(control_flow_errors) {
    static pb m;
    tp_program *p = NULL;
    nested_if_model(&m, 8); /* 8 deep: fine, x negated */
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    tp_program_free(p);
    p = NULL;
    nested_if_model(&m, 9);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("subgraphs nested more than 8 deep");
    CHECK(p == NULL);
    /* an If without else_branch */
    static pb graph, tb, attrs;
    memset(&graph, 0, sizeof graph);
    memset(&tb, 0, sizeof tb);
    memset(&attrs, 0, sizeof attrs);
    graph_input(&graph, "x", ONNX_FLOAT, (int64_t[]){2}, 1);
    graph_input(&graph, "go", 9, NULL, 0);
    pb_str(&tb, 2, "then");
    node_with(&tb, "Neg", (const char *[]){"x"}, 1, (const char *[]){"t"}, 1, NULL);
    graph_output(&tb, "t", ONNX_FLOAT);
    attr_graph(&attrs, "then_branch", &tb);
    node_with(&graph, "If", (const char *[]){"go"}, 1, (const char *[]){"y"}, 1, &attrs);
    graph_output(&graph, "y", ONNX_FLOAT);
    seq_model(&m, &graph);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("(If, opset 17): missing attribute 'else_branch'");
    /* a Loop body with one loop-carried input for none given */
    memset(&graph, 0, sizeof graph);
    memset(&tb, 0, sizeof tb);
    memset(&attrs, 0, sizeof attrs);
    scalar_init(&graph, "M", ONNX_INT64, 2);
    pb_str(&tb, 2, "body");
    graph_input(&tb, "i", ONNX_INT64, NULL, 0);
    graph_input(&tb, "c_in", 9, NULL, 0);
    graph_input(&tb, "extra", ONNX_FLOAT, NULL, 0);
    node_with(&tb, "Identity", (const char *[]){"c_in"}, 1, (const char *[]){"c_out"}, 1, NULL);
    graph_output(&tb, "c_out", 9);
    attr_graph(&attrs, "body", &tb);
    node_with(&graph, "Loop", (const char *[]){"M", ""}, 2, (const char *[]){"unused"}, 1, &attrs);
    graph_output(&graph, "unused", ONNX_FLOAT);
    seq_model(&m, &graph);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("the body has 3 inputs and 1 outputs for 0 loop-carried values");
    /* a Scan input axis out of range */
    memset(&graph, 0, sizeof graph);
    memset(&tb, 0, sizeof tb);
    memset(&attrs, 0, sizeof attrs);
    graph_input(&graph, "s", ONNX_FLOAT, (int64_t[]){2}, 1);
    graph_input(&graph, "x", ONNX_FLOAT, (int64_t[]){3, 2}, 2);
    pb_str(&tb, 2, "body");
    graph_input(&tb, "s_in", ONNX_FLOAT, (int64_t[]){2}, 1);
    graph_input(&tb, "xt", ONNX_FLOAT, (int64_t[]){2}, 1);
    node_with(&tb, "Add", (const char *[]){"s_in", "xt"}, 2, (const char *[]){"s_out"}, 1, NULL);
    graph_output(&tb, "s_out", ONNX_FLOAT);
    attr_graph(&attrs, "body", &tb);
    attr_i(&attrs, "num_scan_inputs", 1);
    pb axes = {0};
    pb_str(&axes, 1, "scan_input_axes");
    pb_int(&axes, 8, 2);
    pb_int(&axes, 20, 7); /* INTS */
    pb_msg(&attrs, 5, &axes);
    node_with(&graph, "Scan", (const char *[]){"s", "x"}, 2, (const char *[]){"s_final"}, 1, &attrs);
    graph_output(&graph, "s_final", ONNX_FLOAT);
    seq_model(&m, &graph);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("scan input 0: axis 2 out of range for rank 2");
    CHECK(p == NULL);
}

/* Unrolling is bounded: a Loop of 512 iterations whose body holds another
 * Loop of 512 would convert over 512 * 512 nodes, beyond the budget of
 * 2^18 in all: refused. */
TEST(loop_unroll_budget) {
    static pb graph, outer, inner, attrs, iattrs, m;
    memset(&graph, 0, sizeof graph);
    memset(&outer, 0, sizeof outer);
    memset(&inner, 0, sizeof inner);
    memset(&attrs, 0, sizeof attrs);
    memset(&iattrs, 0, sizeof iattrs);
    graph_input(&graph, "y", ONNX_FLOAT, (int64_t[]){1}, 1);
    scalar_init(&graph, "M", ONNX_INT64, 512);
    pb_str(&inner, 2, "inner");
    graph_input(&inner, "j", ONNX_INT64, NULL, 0);
    graph_input(&inner, "c2", 9, NULL, 0);
    graph_input(&inner, "z_in", ONNX_FLOAT, (int64_t[]){1}, 1);
    node_with(&inner, "Identity", (const char *[]){"c2"}, 1, (const char *[]){"c2_out"}, 1, NULL);
    node_with(&inner, "Neg", (const char *[]){"z_in"}, 1, (const char *[]){"z_out"}, 1, NULL);
    graph_output(&inner, "c2_out", 9);
    graph_output(&inner, "z_out", ONNX_FLOAT);
    attr_graph(&iattrs, "body", &inner);
    pb_str(&outer, 2, "outer");
    graph_input(&outer, "i", ONNX_INT64, NULL, 0);
    graph_input(&outer, "c_in", 9, NULL, 0);
    graph_input(&outer, "y_in", ONNX_FLOAT, (int64_t[]){1}, 1);
    node_with(&outer, "Identity", (const char *[]){"c_in"}, 1, (const char *[]){"c_out"}, 1, NULL);
    node_with(&outer, "Loop", (const char *[]){"M", "", "y_in"}, 3, (const char *[]){"y_out"}, 1, &iattrs);
    graph_output(&outer, "c_out", 9);
    graph_output(&outer, "y_out", ONNX_FLOAT);
    attr_graph(&attrs, "body", &outer);
    node_with(&graph, "Loop", (const char *[]){"M", "", "y"}, 3, (const char *[]){"y_final"}, 1, &attrs);
    graph_output(&graph, "y_final", ONNX_FLOAT);
    seq_model(&m, &graph);
    tp_program *p = NULL;
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("subgraphs converted at import would exceed 262144 nodes in all");
    CHECK(p == NULL);
}

/* A 1-D int64 initializer. */
static void ints_init(pb *graph, const char *name, const int64_t *v, int n) {
    pb t = {0};
    pb_int(&t, 1, n);
    pb_int(&t, 2, 7);
    for (int i = 0; i < n; i++) pb_int(&t, 7, v[i]);
    pb_str(&t, 8, name);
    pb_msg(graph, 5, &t);
}

/* Shape arithmetic on a dynamic dim (x: float [N, 3]), kept symbolic at
 * import and checked by hand at N = 5 and N = 4:
 *   n = Shape(x)[0]; sz = Size(x) = 3N; k = ConstantOfShape([n, 2]) = zeros;
 *   r = Range(0, n, 1); d = n - 2 * (n / 2) = N mod 2;
 *   w = Where(Equal([n], -1), 1, [n]) = [n] (a size is never -1);
 *   ex = x + Expand(row, [w, 3]); sl = x[: -(1 - n)];
 *   t = Tile(x, [2, s[1] / s[1]]) = [2N, 3]; rs = Reshape(x, [3 n]);
 *   nf = Cast(n, float) (a shape value made into a tensor). */
static void shape_values_model(pb *m) {
    pb graph = {0}, ax0 = {0}, tof = {0};
    graph_input(&graph, "x", 1, (int64_t[]){-1, 3}, 2);
    scalar_init(&graph, "c0", 7, 0);
    scalar_init(&graph, "c1", 7, 1);
    scalar_init(&graph, "c2", 7, 2);
    ints_init(&graph, "v0", (int64_t[]){0}, 1);
    ints_init(&graph, "v1", (int64_t[]){1}, 1);
    ints_init(&graph, "v2", (int64_t[]){2}, 1);
    ints_init(&graph, "v3", (int64_t[]){3}, 1);
    ints_init(&graph, "vm1", (int64_t[]){-1}, 1);
    pb row = {0};
    pb_int(&row, 1, 1);
    pb_int(&row, 1, 3);
    pb_int(&row, 2, 1);
    float rowv[3] = {10, 20, 30};
    pb_bytes(&row, 9, rowv, sizeof rowv);
    pb_str(&row, 8, "row");
    pb_msg(&graph, 5, &row);
    attr_i(&ax0, "axis", 0);
    attr_i(&tof, "to", 1);
    seq_node(&graph, "Shape", (const char *[]){"x"}, 1, "s", NULL);
    seq_node(&graph, "Gather", (const char *[]){"s", "c0"}, 2, "n", NULL);
    seq_node(&graph, "Size", (const char *[]){"x"}, 1, "sz", NULL);
    seq_node(&graph, "Unsqueeze", (const char *[]){"n", "v0"}, 2, "n1", NULL);
    seq_node(&graph, "Concat", (const char *[]){"n1", "v2"}, 2, "cat", &ax0);
    seq_node(&graph, "ConstantOfShape", (const char *[]){"cat"}, 1, "k", NULL);
    seq_node(&graph, "Range", (const char *[]){"c0", "n", "c1"}, 3, "r", NULL);
    seq_node(&graph, "Div", (const char *[]){"n", "c2"}, 2, "h", NULL);
    seq_node(&graph, "Mul", (const char *[]){"h", "c2"}, 2, "m2", NULL);
    seq_node(&graph, "Sub", (const char *[]){"n", "m2"}, 2, "d", NULL);
    seq_node(&graph, "Equal", (const char *[]){"n1", "vm1"}, 2, "eq", NULL);
    seq_node(&graph, "Where", (const char *[]){"eq", "v1", "n1"}, 3, "w", NULL);
    seq_node(&graph, "Concat", (const char *[]){"w", "v3"}, 2, "eshape", &ax0);
    seq_node(&graph, "Expand", (const char *[]){"row", "eshape"}, 2, "e", NULL);
    seq_node(&graph, "Add", (const char *[]){"x", "e"}, 2, "ex", NULL);
    seq_node(&graph, "Sub", (const char *[]){"v1", "n1"}, 2, "oneminus", NULL);
    seq_node(&graph, "Neg", (const char *[]){"oneminus"}, 1, "end", NULL);
    seq_node(&graph, "Slice", (const char *[]){"x", "v0", "end", "v0"}, 4, "sl", NULL);
    seq_node(&graph, "Slice", (const char *[]){"s", "v1", "v2"}, 3, "s1", NULL);
    seq_node(&graph, "Div", (const char *[]){"s1", "s1"}, 2, "one", NULL);
    seq_node(&graph, "Concat", (const char *[]){"v2", "one"}, 2, "reps", &ax0);
    seq_node(&graph, "Tile", (const char *[]){"x", "reps"}, 2, "t", NULL);
    seq_node(&graph, "Mul", (const char *[]){"n1", "v3"}, 2, "flat", NULL);
    seq_node(&graph, "Reshape", (const char *[]){"x", "flat"}, 2, "rs", NULL);
    seq_node(&graph, "Cast", (const char *[]){"n"}, 1, "nf", &tof);
    static const char *const outs[] = {"sz", "k", "r", "d", "ex", "sl", "t", "rs", "nf"};
    static const int out_elem[] = {7, 1, 7, 7, 1, 1, 1, 1, 1};
    for (int i = 0; i < 9; i++) graph_output(&graph, outs[i], out_elem[i]);
    seq_model(m, &graph);
}

TEST(shape_values_by_hand) {
    pb m;
    shape_values_model(&m);
    tp_program *p = NULL;
    tp_onnx_report rep;
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, &rep));
    CHECK(rep.n_need_constant == 0);
    tp_onnx_report_clear(&rep);
    if (!p) return;
    int n_op[3] = {0, 0, 0}; /* sym_floordiv, arange, onnx_range (data-dependent: not wanted) */
    for (tp_node *nd = tp_graph_first_node(tp_program_graph(p)); nd; nd = tp_node_next(nd)) {
        if (tp_node_get_kind(nd) != TP_NODE_CALL_FUNCTION) continue;
        n_op[0] += tp_node_op(nd) == TP_OP_SYM_FLOORDIV;
        n_op[1] += tp_node_op(nd) == TP_OP_ARANGE;
        n_op[2] += tp_node_op(nd) == TP_OP_ONNX_RANGE;
    }
    CHECK(n_op[0] == 2 && n_op[1] == 1 && n_op[2] == 0);
    check_alloc_failures("load shape-values model", load_for_alloc_test, &m);
    for (int64_t N = 5; N >= 4; N--) {
        float xv[15];
        for (int i = 0; i < 15; i++) xv[i] = (float)i;
        tp_tensor *x = NULL;
        CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 2, (int64_t[]){N, 3}, xv, &x));
        tp_value arg = tp_value_tensor(x), out = tp_value_none();
        CHECK_OK(tp_program_call(p, &arg, 1, NULL, &out));
        CHECK(tp_value_len(&out) == 9);
        if (tp_value_len(&out) == 9) {
            const tp_tensor *o[9];
            for (int i = 0; i < 9; i++) o[i] = tp_value_at(&out, i)->u.tensor;
            CHECK(tp_tensor_dtype(o[0]) == TP_INT64 && tp_tensor_ndim(o[0]) == 0 && tp_tensor_item_f64(o[0], 0) == 3.0 * N);
            CHECK(tp_tensor_ndim(o[1]) == 2 && tp_tensor_sizes(o[1])[0] == N && tp_tensor_sizes(o[1])[1] == 2);
            CHECK(tp_tensor_dtype(o[1]) == TP_FLOAT32 && tp_tensor_item_f64(o[1], 2 * N - 1) == 0);
            CHECK(tp_tensor_dtype(o[2]) == TP_INT64 && tp_tensor_numel(o[2]) == N);
            for (int64_t i = 0; i < N && tp_tensor_numel(o[2]) == N; i++) CHECK(tp_tensor_item_f64(o[2], i) == (double)i);
            CHECK(tp_tensor_ndim(o[3]) == 0 && tp_tensor_item_f64(o[3], 0) == (double)(N % 2));
            CHECK(tp_tensor_ndim(o[4]) == 2 && tp_tensor_sizes(o[4])[0] == N);
            for (int64_t i = 0; i < 3 * N && tp_tensor_numel(o[4]) == 3 * N; i++)
                CHECK(tp_tensor_item_f64(o[4], i) == (double)i + 10 * (double)(i % 3 + 1));
            CHECK(tp_tensor_ndim(o[5]) == 2 && tp_tensor_sizes(o[5])[0] == N - 1 && tp_tensor_numel(o[5]) == 3 * (N - 1));
            CHECK(tp_tensor_ndim(o[6]) == 2 && tp_tensor_sizes(o[6])[0] == 2 * N && tp_tensor_sizes(o[6])[1] == 3);
            if (tp_tensor_numel(o[6]) == 6 * N) CHECK(tp_tensor_item_f64(o[6], 3 * N) == 0 && tp_tensor_item_f64(o[6], 6 * N - 1) == 3 * N - 1);
            CHECK(tp_tensor_ndim(o[7]) == 1 && tp_tensor_numel(o[7]) == 3 * N);
            CHECK(tp_tensor_dtype(o[8]) == TP_FLOAT32 && tp_tensor_ndim(o[8]) == 0 && tp_tensor_item_f64(o[8], 0) == (double)N);
        }
        tp_value_clear(&out);
        tp_value_clear(&arg);
    }
    tp_program_free(p);
}

/* A position known only when the program runs, one out of range and a
 * sequence given to a tensor op are refused,
 * each naming the node; so is a sequence graph input. */
TEST(sequence_errors) {
    pb m, g1 = {0};
    graph_input(&g1, "a", 1, (int64_t[]){2}, 1);
    graph_input(&g1, "pos", 7, NULL, 0);
    seq_node(&g1, "SequenceConstruct", (const char *[]){"a", "a"}, 2, "s", NULL);
    seq_node(&g1, "SequenceAt", (const char *[]){"s", "pos"}, 2, "y", NULL);
    graph_output(&g1, "y", 1);
    seq_model(&m, &g1);
    tp_program *p = NULL;
    tp_onnx_report rep;
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, &rep), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("node 'y' (SequenceAt, opset 17): input 'position' must be a constant");
    CHECK(p == NULL);
    CHECK(rep.n_need_constant == 1 && !strcmp(rep.need_constant[0], "pos"));
    tp_onnx_report_clear(&rep);

    pb g2 = {0};
    graph_input(&g2, "a", 1, (int64_t[]){2}, 1);
    scalar_init(&g2, "p5", 7, 5);
    seq_node(&g2, "SequenceConstruct", (const char *[]){"a", "a"}, 2, "s", NULL);
    seq_node(&g2, "SequenceAt", (const char *[]){"s", "p5"}, 2, "y", NULL);
    graph_output(&g2, "y", 1);
    seq_model(&m, &g2);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("node 'y' (SequenceAt, opset 17): position 5 out of range for a sequence of 2 tensors");

    pb g3 = {0};
    graph_input(&g3, "a", 1, (int64_t[]){2}, 1);
    seq_node(&g3, "SequenceConstruct", (const char *[]){"a"}, 1, "s", NULL);
    seq_node(&g3, "Relu", (const char *[]){"s"}, 1, "y", NULL);
    graph_output(&g3, "y", 1);
    seq_model(&m, &g3);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("node 'y' (Relu, opset 17): input 0 is a sequence (only sequence ops take one)");

    pb g5 = {0}, seq = {0}, ty = {0}, vi = {0}, tt = {0}, ety = {0};
    pb_int(&tt, 1, 1);
    pb_msg(&ety, 1, &tt);
    pb_msg(&seq, 1, &ety);
    pb_msg(&ty, 4, &seq); /* TypeProto.sequence_type */
    pb_str(&vi, 1, "s");
    pb_msg(&vi, 2, &ty);
    pb_msg(&g5, 11, &vi);
    seq_node(&g5, "SequenceLength", (const char *[]){"s"}, 1, "n", NULL);
    graph_output(&g5, "n", 7);
    seq_model(&m, &g5);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("graph input 's' is a sequence: only tensor inputs are supported");
}

/* A sequence graph output is a list output: one program output per item,
 * the call's result (n, [a, b]). */
TEST(sequence_output_is_a_list) {
    pb graph = {0};
    graph_input(&graph, "a", 1, (int64_t[]){2}, 1);
    graph_input(&graph, "b", 1, (int64_t[]){2}, 1);
    seq_node(&graph, "SequenceConstruct", (const char *[]){"a", "b"}, 2, "s", NULL);
    seq_node(&graph, "SequenceLength", (const char *[]){"s"}, 1, "n", NULL);
    graph_output(&graph, "n", 7);
    graph_output(&graph, "s", 1);
    pb m;
    seq_model(&m, &graph);
    tp_program *p = NULL;
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    if (!p) return;
    CHECK(tp_signature_n_outputs(tp_program_signature(p)) == 3);
    tp_tensor *a = NULL, *b = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){2}, (float[]){1, 2}, &a));
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){2}, (float[]){3, 4}, &b));
    tp_value args[2] = {tp_value_tensor(a), tp_value_tensor(b)}, out = tp_value_none();
    CHECK_OK(tp_program_call(p, args, 2, NULL, &out));
    CHECK(tp_value_len(&out) == 2);
    const tp_value *n = tp_value_at(&out, 0), *l = tp_value_at(&out, 1);
    CHECK(n && n->kind == TP_VAL_TENSOR && tp_tensor_item_f64(n->u.tensor, 0) == 2);
    CHECK(l && l->kind == TP_VAL_LIST && tp_value_len(l) == 2);
    if (l && tp_value_len(l) == 2) {
        const tp_value *l0 = tp_value_at(l, 0), *l1 = tp_value_at(l, 1);
        CHECK(l0->kind == TP_VAL_TENSOR && tp_tensor_item_f64(l0->u.tensor, 1) == 2);
        CHECK(l1->kind == TP_VAL_TENSOR && tp_tensor_item_f64(l1->u.tensor, 0) == 3);
    }
    tp_value_clear(&out);
    tp_value_clear(&args[0]);
    tp_value_clear(&args[1]);
    tp_program_free(p);
}

/* Optionals known at import: Optional(a) has an element, which
 * OptionalGetElement returns; an empty Optional (attribute 'type') has
 * none, and getting its element is refused. */
TEST(optionals_at_import) {
    pb graph = {0}, ty_attr = {0}, ty = {0}, tt = {0};
    pb_int(&tt, 1, 1);
    pb_msg(&ty, 1, &tt);
    pb_str(&ty_attr, 1, "type");
    pb_msg(&ty_attr, 14, &ty);
    pb_int(&ty_attr, 20, 13); /* TYPE_PROTO */
    pb attrs = {0};
    pb_msg(&attrs, 5, &ty_attr);
    graph_input(&graph, "a", 1, (int64_t[]){2}, 1);
    seq_node(&graph, "Optional", (const char *[]){"a"}, 1, "o", NULL);
    seq_node(&graph, "OptionalHasElement", (const char *[]){"o"}, 1, "h", NULL);
    seq_node(&graph, "OptionalGetElement", (const char *[]){"o"}, 1, "y", NULL);
    seq_node(&graph, "Optional", NULL, 0, "e", &attrs);
    seq_node(&graph, "OptionalHasElement", (const char *[]){"e"}, 1, "h2", NULL);
    graph_output(&graph, "h", 9);
    graph_output(&graph, "y", 1);
    graph_output(&graph, "h2", 9);
    pb m;
    seq_model(&m, &graph);
    tp_program *p = NULL;
    CHECK_OK(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL));
    if (!p) return;
    tp_tensor *a = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){2}, (float[]){5, 6}, &a));
    tp_value arg = tp_value_tensor(a), out = tp_value_none();
    CHECK_OK(tp_program_call(p, &arg, 1, NULL, &out));
    CHECK(tp_value_len(&out) == 3);
    if (tp_value_len(&out) == 3) {
        const tp_tensor *h = tp_value_at(&out, 0)->u.tensor, *y = tp_value_at(&out, 1)->u.tensor,
                        *h2 = tp_value_at(&out, 2)->u.tensor;
        CHECK(tp_tensor_dtype(h) == TP_BOOL && tp_tensor_item_f64(h, 0) == 1);
        CHECK(tp_tensor_item_f64(y, 0) == 5 && tp_tensor_item_f64(y, 1) == 6);
        CHECK(tp_tensor_dtype(h2) == TP_BOOL && tp_tensor_item_f64(h2, 0) == 0);
    }
    tp_value_clear(&out);
    tp_value_clear(&arg);
    tp_program_free(p);

    pb g2 = {0};
    graph_input(&g2, "a", 1, (int64_t[]){2}, 1);
    seq_node(&g2, "Optional", NULL, 0, "e", &attrs);
    seq_node(&g2, "OptionalGetElement", (const char *[]){"e"}, 1, "y", NULL);
    graph_output(&g2, "y", 1);
    seq_model(&m, &g2);
    CHECK_STATUS(tp_onnx_load_buffer(m.data, m.len, NULL, NULL, &p, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("node 'y' (OptionalGetElement, opset 17): the optional input is empty");
}

TEST_MAIN(T(resnet_matches_pytorch), T(transformer_matches_pytorch), T(dynamic_batch_dim),
          T(gpt2_dynamic_axes_match_pytorch), T(vision_models_match_pytorch), T(input_values_checked), T(run_time_reshape), T(parse_dim_range),
          T(one_node_relu_runs), T(unsupported_op_names_node_op_and_opset), T(symbolic_dim_becomes_dynamic),
          T(truncated_and_garbage_models), T(deep_nesting_is_refused), T(external_data_inside_folder_only),
          T(tensor_proto_reading), T(initializers_parameters_and_folded_shapes), T(allocation_failures), T(model_names_kept),
          T(recurrent_models_match_pytorch), T(data_dependent_outputs), T(unique_outputs), T(lp_pools_match_reference),
          T(scatter_reductions_match_reference), T(nms_by_hand), T(nms_errors), T(range_at_run_time),
          T(range_result_is_dynamic), T(run_time_clip_and_trilu), T(run_time_shape_data), T(strings_as_utf8_bytes), T(new_lowerings_refuse_malformed_nodes), T(gradient_by_hand), T(if_by_hand), T(loop_and_scan_by_hand), T(recurrences_with_sequence_lens), T(loop_unroll_budget), T(control_flow_errors), T(training_momentum), T(roi_align_errors), T(dft_errors),
          T(stft_errors), T(mel_weight_matrix_errors), T(resize_crop_roi_errors), T(sequence_ops_by_hand),
          T(sequence_errors), T(shape_values_by_hand), T(sequence_output_is_a_list), T(optionals_at_import))
