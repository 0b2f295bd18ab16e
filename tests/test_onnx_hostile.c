/*
 * test_onnx_hostile.c - ONNX import of hostile attribute values and constant
 * inputs (issue #12): huge blocksizes, zero strides, SAME padding and
 * ConvTranspose arithmetic that overflows, out-of-range constant indices,
 * failure paths that must not leak, the constant-folding size budget,
 * short external data files, and an attribute sweep that sets each int
 * attribute (or constant int input) of many op mappers in turn to 0, -1,
 * 2^31, 2^32, 2^62, INT64_MIN and INT64_MAX. Import must return TP_OK or a
 * clean error with a message, never crash, trip a sanitizer or leak (the
 * ASan build and the harness's block count check that).
 *
 * Models are written here with a small protobuf writer (field numbers from
 * onnx.proto), so the test needs neither Python nor the generated code.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fail_alloc.h"
#include "test_util.h"
#include "tpexport/onnx.h"
#include "tpexport/tpexport.h"

/* ---- a growable protobuf writer ------------------------------------------------ */

typedef struct pbuf {
    uint8_t *data;
    size_t len, cap;
} pbuf;

static void pb_raw(pbuf *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t ncap = b->cap ? b->cap * 2 : 256;
        while (ncap < b->len + n) ncap *= 2;
        uint8_t *nd = realloc(b->data, ncap);
        if (!nd) abort(); /* the test's own memory */
        b->data = nd;
        b->cap = ncap;
    }
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
}
static void pb_varint(pbuf *b, uint64_t v) {
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        if (v) byte |= 0x80;
        pb_raw(b, &byte, 1);
    } while (v);
}
static void pb_int(pbuf *b, int field, int64_t v) {
    pb_varint(b, (uint64_t)field << 3);
    pb_varint(b, (uint64_t)v);
}
static void pb_f32(pbuf *b, int field, float v) {
    pb_varint(b, (uint64_t)field << 3 | 5);
    pb_raw(b, &v, 4);
}
static void pb_bytes(pbuf *b, int field, const void *p, size_t n) {
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, n);
    pb_raw(b, p, n);
}
static void pb_str(pbuf *b, int field, const char *s) { pb_bytes(b, field, s, strlen(s)); }
/* Append message m as field `field` and free m. */
static void pb_msg(pbuf *b, int field, pbuf *m) {
    pb_bytes(b, field, m->data, m->len);
    free(m->data);
    memset(m, 0, sizeof *m);
}
static void pb_free(pbuf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* ONNX enums used here */
enum { ELEM_FLOAT = 1, ELEM_INT64 = 7 };
enum { ATTR_FLOAT = 1, ATTR_INT = 2, ATTR_STRING = 3, ATTR_TENSOR = 4, ATTR_FLOATS = 6, ATTR_INTS = 7 };

/* ---- model descriptions -------------------------------------------------------------- */

#define MAXN 8

/* One node input: a float graph input, or an initializer (float or int64),
 * or absent (""). */
typedef enum { IN_NONE, IN_GRAPH, IN_INIT_F32, IN_INIT_I64 } in_kind;
typedef struct in_desc {
    in_kind kind;
    int nd;
    int64_t dims[MAXN];
    int64_t ivals[MAXN]; /* int64 initializer values (numel <= MAXN) */
    int n_ivals;         /* -1: a 0-d scalar from ivals[0] */
    float fvals[MAXN];   /* float initializer values when n_fvals > 0 */
    int n_fvals;
    int elem; /* graph inputs: ONNX element type (0: FLOAT) */
} in_desc;

typedef struct attr_desc {
    const char *name; /* NULL: unused slot */
    int type;         /* ATTR_* */
    int64_t ints[MAXN];
    int n_ints; /* ATTR_INTS: count; ATTR_INT: 1 */
    float f;
    float floats[MAXN];
    const char *s;
} attr_desc;

typedef struct model_desc {
    const char *op;
    int64_t opset;
    int n_in;
    in_desc in[MAXN];
    int n_out;
    attr_desc attr[MAXN];
} model_desc;

static void value_info(pbuf *out, const char *name, int elem, const int64_t *dims, int nd) {
    pbuf shape = {0}, tt = {0}, ty = {0};
    for (int i = 0; i < nd; i++) {
        pbuf d = {0};
        pb_int(&d, 1, dims[i]);
        pb_msg(&shape, 1, &d);
    }
    pb_int(&tt, 1, elem);
    pb_msg(&tt, 2, &shape);
    pb_msg(&ty, 1, &tt);
    pb_str(out, 1, name);
    pb_msg(out, 2, &ty);
}

static int64_t numel_of(const in_desc *d) {
    int64_t n = 1;
    for (int i = 0; i < d->nd; i++) n *= d->dims[i];
    return n;
}

/* TensorProto of an initializer. */
static void tensor_proto(pbuf *t, const char *name, const in_desc *d) {
    for (int i = 0; i < d->nd; i++) pb_int(t, 1, d->dims[i]);
    pb_int(t, 2, d->kind == IN_INIT_I64 ? ELEM_INT64 : ELEM_FLOAT);
    pb_str(t, 8, name);
    int64_t n = numel_of(d);
    if (d->kind == IN_INIT_I64) {
        int64_t v[MAXN] = {0};
        for (int64_t i = 0; i < n && i < MAXN; i++) v[i] = d->ivals[i];
        pb_bytes(t, 9, v, (size_t)n * sizeof(int64_t));
    } else {
        float *v = malloc((size_t)(n ? n : 1) * sizeof(float));
        if (!v) abort();
        for (int64_t i = 0; i < n; i++) v[i] = d->n_fvals > 0 ? d->fvals[i % d->n_fvals] : (float)(i % 7) - 2.5f;
        pb_bytes(t, 9, v, (size_t)n * sizeof(float));
        free(v);
    }
}

static void attribute(pbuf *node, const attr_desc *a) {
    pbuf at = {0};
    pb_str(&at, 1, a->name);
    pb_int(&at, 20, a->type);
    switch (a->type) {
    case ATTR_INT: pb_int(&at, 3, a->ints[0]); break;
    case ATTR_INTS:
        for (int i = 0; i < a->n_ints; i++) pb_int(&at, 8, a->ints[i]);
        break;
    case ATTR_FLOAT: pb_f32(&at, 2, a->f); break;
    case ATTR_FLOATS:
        for (int i = 0; i < a->n_ints; i++) pb_f32(&at, 7, a->floats[i]);
        break;
    case ATTR_STRING: pb_str(&at, 4, a->s); break;
    default: break;
    }
    pb_msg(node, 5, &at);
}

/* Serialise: one node "the_node" reading i0.. and writing y0..; graph
 * inputs are float, outputs are declared without a shape. */
static void build_model(const model_desc *m, pbuf *model) {
    pbuf node = {0}, graph = {0}, opset = {0};
    char name[16];
    for (int i = 0; i < m->n_in; i++) {
        snprintf(name, sizeof name, "i%d", i);
        pb_str(&node, 1, m->in[i].kind == IN_NONE ? "" : name);
    }
    for (int i = 0; i < (m->n_out ? m->n_out : 1); i++) {
        snprintf(name, sizeof name, "y%d", i);
        pb_str(&node, 2, name);
    }
    pb_str(&node, 3, "the_node");
    pb_str(&node, 4, m->op);
    for (int i = 0; i < MAXN; i++)
        if (m->attr[i].name) attribute(&node, &m->attr[i]);
    pb_msg(&graph, 1, &node);
    pb_str(&graph, 2, "g");
    for (int i = 0; i < m->n_in; i++) {
        const in_desc *d = &m->in[i];
        snprintf(name, sizeof name, "i%d", i);
        if (d->kind == IN_INIT_F32 || d->kind == IN_INIT_I64) {
            in_desc scalar = *d;
            if (d->n_ivals < 0 || d->n_fvals < 0) scalar.nd = 0;
            pbuf t = {0};
            tensor_proto(&t, name, &scalar);
            pb_msg(&graph, 5, &t);
        }
    }
    for (int i = 0; i < m->n_in; i++) {
        const in_desc *d = &m->in[i];
        if (d->kind != IN_GRAPH) continue;
        snprintf(name, sizeof name, "i%d", i);
        pbuf vi = {0};
        value_info(&vi, name, d->elem ? d->elem : ELEM_FLOAT, d->dims, d->nd);
        pb_msg(&graph, 11, &vi);
    }
    for (int i = 0; i < (m->n_out ? m->n_out : 1); i++) {
        snprintf(name, sizeof name, "y%d", i);
        pbuf vi = {0}, ty = {0}, tt = {0};
        pb_int(&tt, 1, ELEM_FLOAT);
        pb_msg(&ty, 1, &tt);
        pb_str(&vi, 1, name);
        pb_msg(&vi, 2, &ty);
        pb_msg(&graph, 12, &vi);
    }
    pb_int(&opset, 2, m->opset);
    memset(model, 0, sizeof *model);
    pb_int(model, 1, 8);
    pb_msg(model, 7, &graph);
    pb_msg(model, 8, &opset);
}

/* Import m; returns the status, frees the program. */
static tp_status import_desc(const model_desc *m, const tp_onnx_options *opts) {
    pbuf b;
    build_model(m, &b);
    tp_program *p = NULL;
    tp_status st = tp_onnx_load_buffer(b.data, b.len, NULL, opts, &p, NULL);
    CHECK(st != TP_OK || p != NULL);
    tp_program_free(p);
    pb_free(&b);
    return st;
}

/* Description builders */
static in_desc graph_in(int nd, const int64_t *dims) {
    in_desc d = {0};
    d.kind = IN_GRAPH;
    d.nd = nd;
    memcpy(d.dims, dims, sizeof(int64_t) * (size_t)nd);
    return d;
}
/* A graph input of another element type (ELEM_INT64, 9 = BOOL). */
static in_desc graph_in_typed(int elem, int nd, const int64_t *dims) {
    in_desc d = graph_in(nd, dims);
    d.elem = elem;
    return d;
}
static in_desc init_f32(int nd, const int64_t *dims) {
    in_desc d = graph_in(nd, dims);
    d.kind = IN_INIT_F32;
    return d;
}
/* A 1-D int64 initializer of n values (n < 0: a 0-d scalar). */
static in_desc init_i64(int n, const int64_t *vals) {
    in_desc d = {0};
    d.kind = IN_INIT_I64;
    d.nd = 1;
    d.dims[0] = n < 0 ? 1 : n;
    d.n_ivals = n;
    memcpy(d.ivals, vals, sizeof(int64_t) * (size_t)(n < 0 ? 1 : n));
    return d;
}
/* A 0-d int64 initializer. */
static in_desc init_scalar(int64_t v) {
    in_desc d = init_i64(1, &v);
    d.n_ivals = -1;
    return d;
}
/* A float initializer of the given values (n < 0: a 0-d scalar). */
static in_desc init_f32v(int n, const float *vals) {
    in_desc d = {0};
    d.kind = IN_INIT_F32;
    d.nd = 1;
    d.dims[0] = n < 0 ? 1 : n;
    d.n_fvals = n;
    memcpy(d.fvals, vals, sizeof(float) * (size_t)(n < 0 ? 1 : n));
    return d;
}
static attr_desc a_int(const char *name, int64_t v) {
    attr_desc a = {0};
    a.name = name;
    a.type = ATTR_INT;
    a.ints[0] = v;
    a.n_ints = 1;
    return a;
}
static attr_desc a_ints(const char *name, int n, const int64_t *v) {
    attr_desc a = {0};
    a.name = name;
    a.type = ATTR_INTS;
    a.n_ints = n;
    memcpy(a.ints, v, sizeof(int64_t) * (size_t)n);
    return a;
}
static attr_desc a_str(const char *name, const char *s) {
    attr_desc a = {0};
    a.name = name;
    a.type = ATTR_STRING;
    a.s = s;
    return a;
}

#define DIMS(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

/* ---- the defects of issue #12, one by one --------------------------------------------- */

TEST(depth_space_huge_blocksize_is_an_error) {
    const char *ops[2] = {"DepthToSpace", "SpaceToDepth"};
    const int64_t bad[] = {(int64_t)1 << 32, (int64_t)1 << 31, (int64_t)1 << 62, INT64_MAX};
    for (int k = 0; k < 2; k++)
        for (size_t j = 0; j < sizeof bad / sizeof bad[0]; j++) {
            model_desc m = {ops[k], 13, 1, {graph_in(DIMS(1, 8, 4, 4))}, 1, {a_int("blocksize", bad[j])}};
            CHECK_STATUS(import_desc(&m, NULL), TP_ERR_INVALID_ARG);
            CHECK_ERR_CONTAINS("node 'the_node'");
            CHECK_ERR_CONTAINS("blocksize");
        }
}

TEST(zero_stride_with_same_padding_is_an_error) {
    const char *pads[2] = {"SAME_UPPER", "SAME_LOWER"};
    for (int k = 0; k < 2; k++) {
        model_desc mp = {"MaxPool", 13, 1, {graph_in(DIMS(1, 1, 5, 5))}, 1,
                         {a_ints("kernel_shape", DIMS(2, 2)), a_ints("strides", DIMS(0, 1)), a_str("auto_pad", pads[k])}};
        CHECK_STATUS(import_desc(&mp, NULL), TP_ERR_INVALID_ARG);
        CHECK_ERR_CONTAINS("strides");
        model_desc ap = mp;
        ap.op = "AveragePool";
        CHECK_STATUS(import_desc(&ap, NULL), TP_ERR_INVALID_ARG);
        CHECK_ERR_CONTAINS("strides");
        model_desc cv = {"Conv", 13, 2, {graph_in(DIMS(1, 1, 5, 5)), init_f32(DIMS(1, 1, 2, 2))}, 1,
                         {a_ints("strides", DIMS(1, 0)), a_str("auto_pad", pads[k])}};
        CHECK_STATUS(import_desc(&cv, NULL), TP_ERR_INVALID_ARG);
        CHECK_ERR_CONTAINS("strides");
        /* zero dilations and kernel sizes too */
        model_desc dl = mp;
        dl.attr[1] = a_ints("dilations", DIMS(1, 0));
        CHECK_STATUS(import_desc(&dl, NULL), TP_ERR_INVALID_ARG);
        CHECK_ERR_CONTAINS("dilations");
        model_desc ks = mp;
        ks.attr[0] = a_ints("kernel_shape", DIMS(0, 2));
        ks.attr[1] = a_ints("strides", DIMS(1, 1));
        CHECK_STATUS(import_desc(&ks, NULL), TP_ERR_INVALID_ARG);
        CHECK_ERR_CONTAINS("kernel_shape");
    }
}

TEST(same_padding_overflow_is_an_error) {
    const int64_t huge[] = {(int64_t)1 << 62, INT64_MAX};
    for (int j = 0; j < 2; j++) {
        int64_t h = huge[j];
        /* (kernel - 1) * dilation overflows */
        model_desc m = {"MaxPool", 13, 1, {graph_in(DIMS(1, 1, 5, 5))}, 1,
                        {a_ints("kernel_shape", DIMS(3, 3)), a_ints("dilations", DIMS(h, 1)),
                         a_str("auto_pad", "SAME_UPPER")}};
        CHECK_STATUS(import_desc(&m, NULL), TP_ERR_INVALID_ARG);
        CHECK_ERR_CONTAINS("node 'the_node'");
        CHECK_ERR_CONTAINS("dilations");
        CHECK_ERR_CONTAINS("overflows");
        /* a huge stride is legal: one window */
        model_desc s = m;
        s.attr[1] = a_ints("strides", DIMS(h, 1));
        CHECK_OK(import_desc(&s, NULL));
        /* Conv: the padding sum overflows */
        model_desc cv = {"Conv", 13, 2, {graph_in(DIMS(1, 1, 5, 5)), init_f32(DIMS(1, 1, 3, 3))}, 1,
                         {a_ints("dilations", DIMS(h, 1)), a_str("auto_pad", "SAME_LOWER")}};
        CHECK_STATUS(import_desc(&cv, NULL), TP_ERR_INVALID_ARG);
        CHECK_ERR_CONTAINS("dilations");
        CHECK_ERR_CONTAINS("overflows");
        /* explicit pads: the padded size overflows (also 2 * pad) */
        model_desc pp = {"AveragePool", 13, 1, {graph_in(DIMS(1, 1, 5, 5))}, 1,
                         {a_ints("kernel_shape", DIMS(2, 2)), a_ints("pads", DIMS(h, h, h, h))}};
        CHECK_STATUS(import_desc(&pp, NULL), TP_ERR_INVALID_ARG);
        CHECK_ERR_CONTAINS("attribute 'pads'");
        model_desc mpp = pp;
        mpp.op = "MaxPool";
        CHECK_STATUS(import_desc(&mpp, NULL), TP_ERR_INVALID_ARG);
        CHECK_ERR_CONTAINS("attribute 'pads'");
    }
    /* kernel_shape INT64_MAX with SAME: (out - 1) * stride + kernel overflows */
    model_desc k = {"MaxPool", 13, 1, {graph_in(DIMS(1, 1, 5, 5))}, 1,
                    {a_ints("kernel_shape", DIMS(INT64_MAX, 1)), a_ints("strides", DIMS(3, 1)),
                     a_str("auto_pad", "SAME_UPPER")}};
    CHECK_STATUS(import_desc(&k, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("kernel_shape");
    CHECK_ERR_CONTAINS("overflows");
    /* negative pads */
    model_desc neg = {"MaxPool", 13, 1, {graph_in(DIMS(1, 1, 5, 5))}, 1,
                      {a_ints("kernel_shape", DIMS(2, 2)), a_ints("pads", DIMS(0, -1, 0, 0))}};
    CHECK_STATUS(import_desc(&neg, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("attribute 'pads'");
}

TEST(conv_transpose_output_shape_overflow_is_an_error) {
    const int64_t huge[] = {(int64_t)1 << 62, INT64_MAX, INT64_MIN, -1, 0};
    for (int j = 0; j < 5; j++) {
        int64_t h = huge[j];
        /* output_shape out of reach (or not positive) */
        model_desc os = {"ConvTranspose", 13, 2, {graph_in(DIMS(1, 1, 3, 3)), init_f32(DIMS(1, 1, 2, 2))}, 1,
                         {a_ints("output_shape", DIMS(h, 4))}};
        tp_status st = import_desc(&os, NULL);
        CHECK_MSG(st == (h > 0 ? TP_ERR_UNSUPPORTED : TP_ERR_INVALID_ARG), "output_shape %lld: %s: %s", (long long)h,
                  tp_status_str(st), tp_last_error());
        CHECK_ERR_CONTAINS("output_shape");
        if (h == 0) continue;
        /* output_padding */
        model_desc op = {"ConvTranspose", 13, 2, {graph_in(DIMS(1, 1, 3, 3)), init_f32(DIMS(1, 1, 2, 2))}, 1,
                         {a_ints("output_padding", DIMS(h, 0)), a_ints("output_shape", DIMS(4, 4))}};
        st = import_desc(&op, NULL);
        CHECK_MSG(st == (h > 0 ? TP_ERR_UNSUPPORTED : TP_ERR_INVALID_ARG), "output_padding %lld: %s: %s",
                  (long long)h, tp_status_str(st), tp_last_error());
        CHECK_ERR_CONTAINS("output_padding");
        if (h < 0) continue;
        /* stride * (in - 1) overflows */
        model_desc sd = {"ConvTranspose", 13, 2, {graph_in(DIMS(1, 1, 3, 3)), init_f32(DIMS(1, 1, 2, 2))}, 1,
                         {a_ints("strides", DIMS(h, 1)), a_ints("output_shape", DIMS(4, 4))}};
        CHECK_STATUS(import_desc(&sd, NULL), TP_ERR_INVALID_ARG);
        CHECK_ERR_CONTAINS("strides");
        CHECK_ERR_CONTAINS("overflows");
        /* SAME: (kernel - 1) * dilation overflows */
        model_desc sm = {"ConvTranspose", 13, 2, {graph_in(DIMS(1, 1, 3, 3)), init_f32(DIMS(1, 1, 3, 3))}, 1,
                         {a_ints("dilations", DIMS(h, 1)), a_str("auto_pad", "SAME_UPPER")}};
        CHECK_STATUS(import_desc(&sm, NULL), TP_ERR_INVALID_ARG);
        CHECK_ERR_CONTAINS("dilations");
        CHECK_ERR_CONTAINS("overflows");
    }
    /* a sane output_shape still imports */
    model_desc ok = {"ConvTranspose", 13, 2, {graph_in(DIMS(1, 1, 3, 3)), init_f32(DIMS(1, 1, 2, 2))}, 1,
                     {a_ints("strides", DIMS(2, 2)), a_ints("output_shape", DIMS(7, 7))}};
    CHECK_OK(import_desc(&ok, NULL));
}

TEST(eye_like_huge_k) {
    const int64_t ks[] = {INT64_MAX, INT64_MIN, (int64_t)1 << 62, -((int64_t)1 << 62), 1, -1};
    for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
        model_desc m = {"EyeLike", 13, 1, {init_f32(DIMS(3, 4))}, 1, {a_int("k", ks[j])}};
        CHECK_OK(import_desc(&m, NULL));
        m.in[0] = graph_in(DIMS(3, 4));
        CHECK_OK(import_desc(&m, NULL));
    }
}

TEST(gather_constant_index_out_of_range) {
    model_desc m = {"Gather", 13, 2, {graph_in(DIMS(2, 3)), init_i64(DIMS(0, 5))}, 1, {a_int("axis", 0)}};
    CHECK_STATUS(import_desc(&m, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("index 5 out of range for size 2");
    m.in[1] = init_i64(DIMS(-7));
    CHECK_STATUS(import_desc(&m, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("index -7 out of range for size 2");
    m.in[1] = init_i64(DIMS(INT64_MIN));
    CHECK_STATUS(import_desc(&m, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("out of range for size 2");
    /* GatherElements uses the same wrapping */
    model_desc ge = {"GatherElements", 13, 2, {graph_in(DIMS(2, 3)), init_i64(DIMS(3, 0))}, 1, {a_int("axis", 1)}};
    ge.in[1].nd = 2, ge.in[1].dims[0] = 1, ge.in[1].dims[1] = 2;
    CHECK_STATUS(import_desc(&ge, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("index 3 out of range for size 3");
}

TEST(average_pool_asymmetric_failure_does_not_leak) {
    /* asymmetric pads without count_include_pad take the ones/sum path; a
     * kernel larger than the padded input then fails in the pooling op */
    model_desc m = {"AveragePool", 13, 1, {graph_in(DIMS(1, 1, 2, 2))}, 1,
                    {a_ints("kernel_shape", DIMS(5, 5)), a_ints("pads", DIMS(0, 0, 1, 1))}};
    tp_status st = import_desc(&m, NULL);
    CHECK_MSG(st != TP_OK && tp_last_error()[0], "got %s", tp_status_str(st));
    m.in[0] = init_f32(DIMS(1, 1, 2, 2)); /* folded */
    st = import_desc(&m, NULL);
    CHECK_MSG(st != TP_OK && tp_last_error()[0], "got %s", tp_status_str(st));
}

static tp_status load_desc_for_alloc(void *ctx) {
    const pbuf *b = ctx;
    tp_program *p = NULL;
    tp_status st = tp_onnx_load_buffer(b->data, b->len, NULL, NULL, &p, NULL);
    tp_program_free(p);
    return st;
}

TEST(average_pool_asymmetric_allocation_failures) {
    model_desc m = {"AveragePool", 13, 1, {graph_in(DIMS(1, 1, 4, 4))}, 1,
                    {a_ints("kernel_shape", DIMS(2, 2)), a_ints("pads", DIMS(0, 0, 1, 1))}};
    pbuf b;
    build_model(&m, &b);
    check_alloc_failures("asymmetric average pool", load_desc_for_alloc, &b);
    pb_free(&b);
    m.in[0] = init_f32(DIMS(1, 1, 4, 4));
    build_model(&m, &b);
    check_alloc_failures("folded asymmetric average pool", load_desc_for_alloc, &b);
    pb_free(&b);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

TEST(constant_folding_budget) {
    /* 117 bytes of model asking for a 16 GiB constant */
    model_desc m = {"ConstantOfShape", 13, 1, {init_i64(DIMS(65536, 65536))}, 1, {{0}}};
    double t0 = now_s();
    CHECK_STATUS(import_desc(&m, NULL), TP_ERR_NOMEM);
    double dt = now_s() - t0;
    CHECK_MSG(dt < 0.5, "took %.3f s", dt);
    CHECK_ERR_CONTAINS("node 'the_node' (ConstantOfShape");
    CHECK_ERR_CONTAINS("max_constant_bytes");
    /* under the default budget it works; a smaller budget refuses it */
    m.in[0] = init_i64(DIMS(64, 64));
    CHECK_OK(import_desc(&m, NULL));
    tp_onnx_options opts = {0};
    opts.max_constant_bytes = 1024;
    CHECK_STATUS(import_desc(&m, &opts), TP_ERR_NOMEM);
    CHECK_ERR_CONTAINS("max_constant_bytes");
    opts.max_constant_bytes = 64 * 64 * 4;
    CHECK_OK(import_desc(&m, &opts));
    /* folding an op on constants is checked before it runs: Tile and
     * Expand of a small initializer */
    model_desc tile = {"Tile", 13, 2, {init_f32(DIMS(2, 3)), init_i64(DIMS(1 << 20, 1 << 20))}, 1, {{0}}};
    t0 = now_s();
    CHECK_STATUS(import_desc(&tile, NULL), TP_ERR_NOMEM);
    CHECK_MSG(now_s() - t0 < 0.5, "Tile took %.3f s", now_s() - t0);
    CHECK_ERR_CONTAINS("node 'the_node' (Tile");
    model_desc ex = {"Expand", 13, 2, {init_f32(DIMS(1, 1)), init_i64(DIMS(1 << 16, 1 << 16))}, 1, {{0}}};
    CHECK_STATUS(import_desc(&ex, NULL), TP_ERR_NOMEM);
    CHECK_ERR_CONTAINS("node 'the_node' (Expand");
    /* Range, EyeLike and a window of a huge size are created constants too */
    model_desc rg = {"Range", 13, 3, {init_scalar(0), init_scalar(0), init_scalar(0)}, 1, {{0}}};
    rg.in[0].ivals[0] = 0, rg.in[1].ivals[0] = (int64_t)1 << 32, rg.in[2].ivals[0] = 1;
    CHECK_STATUS(import_desc(&rg, NULL), TP_ERR_NOMEM);
    CHECK_ERR_CONTAINS("(Range");
    model_desc eye = {"EyeLike", 13, 1, {graph_in(DIMS(65536, 65536))}, 1, {{0}}};
    CHECK_STATUS(import_desc(&eye, NULL), TP_ERR_NOMEM);
    CHECK_ERR_CONTAINS("(EyeLike");
    model_desc win = {"HannWindow", 17, 1, {init_scalar(0)}, 1, {{0}}};
    win.in[0].ivals[0] = (int64_t)1 << 32;
    CHECK_STATUS(import_desc(&win, NULL), TP_ERR_NOMEM);
    CHECK_ERR_CONTAINS("(HannWindow");
}

TEST(huge_declared_input_is_not_allocated) {
    /* an example input of 16 GiB would be zeros of the declared shape */
    model_desc m = {"Relu", 13, 1, {graph_in(DIMS(65536, 65536))}, 1, {{0}}};
    double t0 = now_s();
    CHECK_OK(import_desc(&m, NULL));
    CHECK_MSG(now_s() - t0 < 0.5, "took %.3f s", now_s() - t0);
}

/* An allocation hook that refuses blocks of 1 GiB and more: what a machine
 * without that much memory does, so the test is the same everywhere. */
static void *small_alloc_fn(void *user, void *ptr, size_t old_size, size_t new_size) {
    (void)user;
    (void)old_size;
    if (new_size == 0) {
        free(ptr);
        return NULL;
    }
    if (new_size >= ((size_t)1 << 30)) return NULL;
    return realloc(ptr, new_size);
}

TEST(external_data_short_file) {
    char dir[] = "/tmp/tp_onnx_hostile_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(!"mkdtemp");
        return;
    }
    char wpath[256], path[256];
    snprintf(wpath, sizeof wpath, "%s/w.bin", dir);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    float w[6] = {1, 2, 3, 4, 5, 6};
    FILE *f = fopen(wpath, "wb");
    CHECK(f && fwrite(w, sizeof w, 1, f) == 1);
    if (f) fclose(f);
    /* W float [65536, 65536] (16 GiB) said to live in the 24-byte w.bin */
    const int64_t dims[2][2] = {{65536, 65536}, {2, 4}};
    for (int k = 0; k < 2; k++) {
        pbuf node = {0}, graph = {0}, opset = {0}, in = {0}, out = {0}, init = {0}, e1 = {0}, model = {0};
        pb_str(&node, 1, "W");
        pb_str(&node, 2, "y");
        pb_str(&node, 3, "the_node");
        pb_str(&node, 4, "Relu");
        pb_int(&init, 1, dims[k][0]);
        pb_int(&init, 1, dims[k][1]);
        pb_int(&init, 2, ELEM_FLOAT);
        pb_str(&init, 8, "W");
        pb_str(&e1, 1, "location");
        pb_str(&e1, 2, "w.bin");
        pb_msg(&init, 13, &e1);
        pb_int(&init, 14, 1);
        pb_msg(&graph, 1, &node);
        pb_msg(&graph, 5, &init);
        value_info(&out, "y", ELEM_FLOAT, dims[k], 2);
        pb_msg(&graph, 12, &out);
        pb_free(&in);
        pb_int(&opset, 2, 13);
        pb_int(&model, 1, 8);
        pb_msg(&model, 7, &graph);
        pb_msg(&model, 8, &opset);
        f = fopen(path, "wb");
        CHECK(f && fwrite(model.data, model.len, 1, f) == 1);
        if (f) fclose(f);
        pb_free(&model);
        tp_program *p = NULL;
        tp_set_allocator(small_alloc_fn, NULL);
        tp_status st = tp_onnx_load(path, NULL, &p, NULL);
        tp_set_allocator(NULL, NULL);
        CHECK_MSG(st == TP_ERR_CORRUPT, "got %s: %s", tp_status_str(st), tp_last_error());
        CHECK_ERR_CONTAINS("tensor 'W'");
        CHECK_ERR_CONTAINS("w.bin");
        CHECK_ERR_CONTAINS("lies outside");
        tp_program_free(p);
    }
    unlink(path);
    unlink(wpath);
    rmdir(dir);
}

/* ---- the attribute sweep ------------------------------------------------------------- */

static const int64_t k_hostile[] = {0, -1, (int64_t)1 << 31, (int64_t)1 << 32, (int64_t)1 << 62, INT64_MIN, INT64_MAX};

static int g_sweep_imports;
/* Set by sweep_allocation_failures: sweep() then runs each base model under
 * allocation-failure injection instead of the hostile values. */
static bool g_sweep_alloc_mode;

/* Import m and its variants; only a clean result is required. */
static void sweep_check(const model_desc *m, const char *what, int index, int64_t v) {
    tp_status st = import_desc(m, NULL);
    g_sweep_imports++;
    CHECK_MSG(st == TP_OK || (tp_last_error()[0] != '\0' && st != TP_ERR_INTERNAL),
              "%s (opset %lld) %s[%d] = %lld: %s '%s'", m->op, (long long)m->opset, what, index, (long long)v,
              tp_status_str(st), tp_last_error());
}

/* Set each int of each int attribute and each int64 initializer input of
 * base in turn to every hostile value; also with graph inputs made
 * initializers (so the op is folded at import, running the kernels). */
static void sweep(const model_desc *base) {
    for (int fold = 0; fold < 2; fold++) {
        model_desc b = *base;
        if (fold) {
            bool any = false;
            for (int i = 0; i < b.n_in; i++)
                if (b.in[i].kind == IN_GRAPH && !b.in[i].elem) b.in[i].kind = IN_INIT_F32, any = true; /* float ones */
            if (!any) continue;
        }
        if (g_sweep_alloc_mode) { /* every failed allocation: TP_ERR_NOMEM, nothing leaked */
            pbuf bb;
            build_model(&b, &bb);
            char what[96];
            snprintf(what, sizeof what, "%s (opset %lld, %s)", b.op, (long long)b.opset, fold ? "folded" : "graph");
            check_alloc_failures(what, load_desc_for_alloc, &bb);
            pb_free(&bb);
            continue;
        }
        /* the unmodified model must import, or the sweep tests nothing */
        tp_status bst = import_desc(&b, NULL);
        CHECK_MSG(bst == TP_OK, "%s (opset %lld, %s) base model: %s '%s'", b.op, (long long)b.opset,
                  fold ? "folded" : "graph", tp_status_str(bst), tp_last_error());
        for (int a = 0; a < MAXN; a++) {
            if (!b.attr[a].name || (b.attr[a].type != ATTR_INT && b.attr[a].type != ATTR_INTS)) continue;
            for (int j = 0; j < b.attr[a].n_ints; j++)
                for (size_t h = 0; h < sizeof k_hostile / sizeof k_hostile[0]; h++) {
                    model_desc m = b;
                    m.attr[a].ints[j] = k_hostile[h];
                    sweep_check(&m, b.attr[a].name, j, k_hostile[h]);
                }
        }
        for (int i = 0; i < b.n_in; i++) {
            if (b.in[i].kind != IN_INIT_I64) continue;
            int n = b.in[i].n_ivals < 0 ? 1 : b.in[i].n_ivals;
            for (int j = 0; j < n; j++)
                for (size_t h = 0; h < sizeof k_hostile / sizeof k_hostile[0]; h++) {
                    model_desc m = b;
                    m.in[i].ivals[j] = k_hostile[h];
                    char what[32];
                    snprintf(what, sizeof what, "input %d", i);
                    sweep_check(&m, what, j, k_hostile[h]);
                }
        }
    }
}

#define X4 graph_in(DIMS(1, 2, 5, 5))

TEST(sweep_conv_family) {
    const char *autopads[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
    for (int ap = 0; ap < 4; ap++) {
        model_desc conv = {"Conv", 13, 3, {X4, init_f32(DIMS(4, 2, 3, 3)), init_f32(DIMS(4))}, 1,
                           {a_ints("kernel_shape", DIMS(3, 3)), a_ints("strides", DIMS(1, 2)),
                            a_ints("dilations", DIMS(1, 1)), a_int("group", 1), a_str("auto_pad", autopads[ap])}};
        if (ap == 0) conv.attr[5] = a_ints("pads", DIMS(1, 0, 1, 2));
        sweep(&conv);
        model_desc ct = {"ConvTranspose", 13, 2, {graph_in(DIMS(1, 2, 3, 3)), init_f32(DIMS(2, 3, 3, 3))}, 1,
                         {a_ints("kernel_shape", DIMS(3, 3)), a_ints("strides", DIMS(2, 1)),
                          a_ints("dilations", DIMS(1, 1)), a_ints("output_padding", DIMS(1, 0)), a_int("group", 1),
                          a_str("auto_pad", autopads[ap])}};
        if (ap == 0) ct.attr[6] = a_ints("pads", DIMS(0, 1, 1, 0));
        sweep(&ct);
        ct.attr[3] = a_ints("output_shape", DIMS(8, 5));
        sweep(&ct);
    }
}

TEST(sweep_pooling) {
    const char *autopads[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
    for (int ap = 0; ap < 4; ap++) {
        model_desc mp = {"MaxPool", 13, 1, {X4}, 1,
                         {a_ints("kernel_shape", DIMS(2, 3)), a_ints("strides", DIMS(1, 2)),
                          a_ints("dilations", DIMS(1, 2)), a_int("ceil_mode", 0), a_int("storage_order", 0),
                          a_str("auto_pad", autopads[ap])}};
        if (ap == 0) mp.attr[6] = a_ints("pads", DIMS(1, 0, 0, 1));
        sweep(&mp);
        model_desc avg = {"AveragePool", 13, 1, {X4}, 1,
                          {a_ints("kernel_shape", DIMS(2, 3)), a_ints("strides", DIMS(1, 2)), a_int("ceil_mode", 0),
                           a_int("count_include_pad", 0), a_str("auto_pad", autopads[ap])}};
        if (ap == 0) avg.attr[5] = a_ints("pads", DIMS(1, 0, 0, 1));
        sweep(&avg);
        avg.attr[3] = a_int("count_include_pad", 1);
        sweep(&avg);
    }
    model_desc lrn = {"LRN", 13, 1, {X4}, 1, {a_int("size", 3)}};
    sweep(&lrn);
    model_desc gp = {"GlobalAveragePool", 13, 1, {X4}, 1, {{0}}};
    sweep(&gp);
}

TEST(sweep_depth_space_eye) {
    const char *modes[] = {"DCR", "CRD"};
    for (int k = 0; k < 2; k++) {
        model_desc d2s = {"DepthToSpace", 13, 1, {graph_in(DIMS(1, 8, 2, 3))}, 1,
                          {a_int("blocksize", 2), a_str("mode", modes[k])}};
        sweep(&d2s);
        model_desc s2d = {"SpaceToDepth", 13, 1, {graph_in(DIMS(1, 2, 4, 6))}, 1, {a_int("blocksize", 2)}};
        sweep(&s2d);
    }
    model_desc eye = {"EyeLike", 13, 1, {graph_in(DIMS(3, 4))}, 1, {a_int("k", 1), a_int("dtype", 1)}};
    sweep(&eye);
}

TEST(sweep_indexing) {
    model_desc g = {"Gather", 13, 2, {graph_in(DIMS(3, 4)), init_i64(DIMS(0, 2))}, 1, {a_int("axis", 1)}};
    sweep(&g);
    model_desc ge = {"GatherElements", 13, 2, {graph_in(DIMS(3, 4)), init_i64(DIMS(0, 2))}, 1, {a_int("axis", 0)}};
    ge.in[1].nd = 2, ge.in[1].dims[0] = 1, ge.in[1].dims[1] = 2;
    sweep(&ge);
    model_desc gnd = {"GatherND", 13, 2, {graph_in(DIMS(2, 3, 4)), init_i64(DIMS(0, 1, 1, 2))}, 1,
                      {a_int("batch_dims", 0)}};
    gnd.in[1].nd = 2, gnd.in[1].dims[0] = 2, gnd.in[1].dims[1] = 2;
    sweep(&gnd);
    gnd.attr[0] = a_int("batch_dims", 1);
    sweep(&gnd);
    model_desc se = {"ScatterElements", 16, 3, {graph_in(DIMS(3, 4)), init_i64(DIMS(0, 2)), graph_in(DIMS(1, 2))},
                     1, {a_int("axis", 1), a_str("reduction", "add")}};
    se.in[1].nd = 2, se.in[1].dims[0] = 1, se.in[1].dims[1] = 2;
    sweep(&se);
    model_desc snd = {"ScatterND", 16, 3, {graph_in(DIMS(3, 4)), init_i64(DIMS(0, 2)), graph_in(DIMS(2, 4))}, 1,
                      {a_str("reduction", "mul")}};
    snd.in[1].nd = 2, snd.in[1].dims[0] = 2, snd.in[1].dims[1] = 1;
    sweep(&snd);
    model_desc s13 = {"Slice", 13, 5,
                      {graph_in(DIMS(4, 5)), init_i64(DIMS(0, 1)), init_i64(DIMS(3, 4)), init_i64(DIMS(0, 1)),
                       init_i64(DIMS(1, 2))},
                      1, {{0}}};
    sweep(&s13);
    s13.in[4] = init_i64(DIMS(-1, -2));
    sweep(&s13);
    model_desc s9 = {"Slice", 9, 1, {graph_in(DIMS(4, 5))}, 1,
                     {a_ints("starts", DIMS(0, 1)), a_ints("ends", DIMS(3, 4)), a_ints("axes", DIMS(0, 1))}};
    sweep(&s9);
    model_desc oh = {"OneHot", 11, 3, {init_i64(DIMS(0, 1, 3)), init_scalar(4), init_f32(DIMS(2))}, 1,
                     {a_int("axis", -1)}};
    oh.in[1].ivals[0] = 4;
    sweep(&oh);
    model_desc topk = {"TopK", 11, 2, {graph_in(DIMS(2, 5)), init_i64(DIMS(2))}, 2,
                       {a_int("axis", 1), a_int("largest", 1), a_int("sorted", 1)}};
    sweep(&topk);
    model_desc topk1 = {"TopK", 1, 1, {graph_in(DIMS(2, 5))}, 2, {a_int("axis", -1), a_int("k", 2)}};
    sweep(&topk1);
    model_desc rs = {"ReverseSequence", 13, 2, {graph_in(DIMS(3, 2, 2)), init_i64(DIMS(1, 3))}, 1,
                     {a_int("time_axis", 0), a_int("batch_axis", 1)}};
    sweep(&rs);
    model_desc tri = {"Trilu", 14, 2, {graph_in(DIMS(3, 4)), init_scalar(1)}, 1, {a_int("upper", 1)}};
    tri.in[1].ivals[0] = 1;
    sweep(&tri);
}

TEST(sweep_shapes) {
    model_desc pad = {"Pad", 13, 2, {graph_in(DIMS(2, 3)), init_i64(DIMS(1, 0, 0, 1))}, 1, {a_str("mode", "constant")}};
    const char *modes[] = {"constant", "reflect", "edge", "wrap"};
    for (int k = 0; k < 4; k++) {
        pad.attr[0] = a_str("mode", modes[k]);
        pad.opset = k == 3 ? 19 : 13;
        sweep(&pad);
    }
    model_desc pad18 = {"Pad", 18, 4, {graph_in(DIMS(2, 3)), init_i64(DIMS(1, 2)), {.kind = IN_NONE}, init_i64(DIMS(1))}, 1,
                        {{0}}};
    sweep(&pad18);
    model_desc pad2 = {"Pad", 2, 1, {graph_in(DIMS(2, 3))}, 1, {a_ints("pads", DIMS(0, 1, 1, 0))}};
    sweep(&pad2);
    model_desc tile = {"Tile", 13, 2, {graph_in(DIMS(2, 3)), init_i64(DIMS(2, 1))}, 1, {{0}}};
    sweep(&tile);
    model_desc ex = {"Expand", 13, 2, {graph_in(DIMS(1, 3)), init_i64(DIMS(2, 1))}, 1, {{0}}};
    sweep(&ex);
    model_desc rg = {"Range", 13, 3, {init_scalar(0), init_scalar(0), init_scalar(0)}, 1, {{0}}};
    rg.in[0].ivals[0] = 1, rg.in[1].ivals[0] = 10, rg.in[2].ivals[0] = 3;
    sweep(&rg);
    model_desc sp = {"Split", 13, 2, {graph_in(DIMS(6, 4)), init_i64(DIMS(2, 4))}, 2, {a_int("axis", 0)}};
    sweep(&sp);
    model_desc sp11 = {"Split", 11, 1, {graph_in(DIMS(6, 4))}, 2, {a_int("axis", 1), a_ints("split", DIMS(1, 3))}};
    sweep(&sp11);
    model_desc sp18 = {"Split", 18, 1, {graph_in(DIMS(6, 4))}, 3, {a_int("axis", 0), a_int("num_outputs", 3)}};
    sweep(&sp18);
    model_desc rsh = {"Reshape", 14, 2, {graph_in(DIMS(3, 4)), init_i64(DIMS(3, 0, -1))}, 1, {a_int("allowzero", 0)}};
    sweep(&rsh);
    model_desc fl = {"Flatten", 13, 1, {graph_in(DIMS(2, 3, 4))}, 1, {a_int("axis", 2)}};
    sweep(&fl);
    model_desc tr = {"Transpose", 13, 1, {graph_in(DIMS(2, 3, 4))}, 1, {a_ints("perm", DIMS(2, 0, 1))}};
    sweep(&tr);
    model_desc cat = {"Concat", 13, 2, {graph_in(DIMS(2, 3)), graph_in(DIMS(2, 3))}, 1, {a_int("axis", 1)}};
    sweep(&cat);
    model_desc sq = {"Squeeze", 13, 2, {graph_in(DIMS(2, 1, 3)), init_i64(DIMS(1))}, 1, {{0}}};
    sweep(&sq);
    model_desc sq11 = {"Squeeze", 11, 1, {graph_in(DIMS(2, 1, 3))}, 1, {a_ints("axes", DIMS(1))}};
    sweep(&sq11);
    model_desc usq = {"Unsqueeze", 13, 2, {graph_in(DIMS(2, 3)), init_i64(DIMS(0, 3))}, 1, {{0}}};
    sweep(&usq);
    model_desc usq11 = {"Unsqueeze", 11, 1, {graph_in(DIMS(2, 3))}, 1, {a_ints("axes", DIMS(-1))}};
    sweep(&usq11);
    model_desc cos = {"ConstantOfShape", 13, 1, {init_i64(DIMS(2, 3))}, 1, {{0}}};
    sweep(&cos);
    model_desc shp = {"Shape", 15, 1, {graph_in(DIMS(2, 3, 4))}, 1, {a_int("start", 1), a_int("end", -1)}};
    sweep(&shp);
    model_desc hw = {"HannWindow", 17, 1, {init_scalar(0)}, 1, {a_int("periodic", 1), a_int("output_datatype", 1)}};
    hw.in[0].ivals[0] = 8;
    sweep(&hw);
    model_desc rz = {"Resize", 13, 4, {graph_in(DIMS(1, 1, 2, 2)), {.kind = IN_NONE}, {.kind = IN_NONE}, init_i64(DIMS(1, 1, 4, 3))},
                     1, {a_str("mode", "linear")}};
    sweep(&rz);
    rz.attr[0] = a_str("mode", "cubic");
    rz.attr[1] = a_str("coordinate_transformation_mode", "align_corners");
    sweep(&rz);
    rz.attr[0] = a_str("mode", "nearest");
    rz.attr[1] = a_int("exclude_outside", 1);
    sweep(&rz);
}

TEST(sweep_axes_and_reductions) {
    model_desc rsum = {"ReduceSum", 13, 2, {graph_in(DIMS(2, 3, 4)), init_i64(DIMS(1, -1))}, 1,
                       {a_int("keepdims", 1), a_int("noop_with_empty_axes", 0)}};
    sweep(&rsum);
    model_desc rmax = {"ReduceMax", 18, 2, {graph_in(DIMS(2, 0, 4)), init_i64(DIMS(1))}, 1, {a_int("keepdims", 0)}};
    sweep(&rmax);
    model_desc rprod = {"ReduceProd", 13, 1, {graph_in(DIMS(2, 3, 4))}, 1, {a_ints("axes", DIMS(0, 2))}};
    sweep(&rprod);
    model_desc am = {"ArgMax", 13, 1, {graph_in(DIMS(2, 3))}, 1,
                     {a_int("axis", 1), a_int("keepdims", 1), a_int("select_last_index", 1)}};
    sweep(&am);
    model_desc cs = {"CumSum", 14, 2, {graph_in(DIMS(2, 3)), init_scalar(1)}, 1,
                     {a_int("exclusive", 1), a_int("reverse", 1)}};
    cs.in[1].ivals[0] = 1;
    sweep(&cs);
    model_desc sm = {"Softmax", 11, 1, {graph_in(DIMS(2, 3, 4))}, 1, {a_int("axis", 1)}};
    sweep(&sm);
    model_desc hm = {"Hardmax", 13, 1, {graph_in(DIMS(2, 3, 4))}, 1, {a_int("axis", 1)}};
    sweep(&hm);
    model_desc lsm = {"LogSoftmax", 13, 1, {graph_in(DIMS(2, 3))}, 1, {a_int("axis", -1)}};
    sweep(&lsm);
    model_desc ln = {"LayerNormalization", 17, 2, {graph_in(DIMS(2, 3, 4)), init_f32(DIMS(4))}, 1,
                     {a_int("axis", -1), a_int("stash_type", 1)}};
    sweep(&ln);
    model_desc lp = {"LpNormalization", 13, 1, {graph_in(DIMS(2, 3))}, 1, {a_int("axis", 1), a_int("p", 2)}};
    sweep(&lp);
    model_desc mvn = {"MeanVarianceNormalization", 13, 1, {graph_in(DIMS(2, 3, 4))}, 1, {a_ints("axes", DIMS(0, 2))}};
    sweep(&mvn);
    model_desc dq = {"DequantizeLinear", 13, 2, {graph_in(DIMS(2, 3)), init_f32(DIMS(3))}, 1, {a_int("axis", 1)}};
    sweep(&dq);
    model_desc q = {"QuantizeLinear", 13, 2, {graph_in(DIMS(2, 3)), init_f32(DIMS(3))}, 1, {a_int("axis", 1)}};
    sweep(&q);
    model_desc cast = {"Cast", 13, 1, {graph_in(DIMS(2, 3))}, 1, {a_int("to", 7)}};
    sweep(&cast);
    model_desc nll = {"NegativeLogLikelihoodLoss", 13, 2, {graph_in(DIMS(2, 3)), init_i64(DIMS(0, 2))}, 1,
                      {a_int("ignore_index", 1)}};
    sweep(&nll);
    model_desc mod = {"Mod", 13, 2, {graph_in(DIMS(2, 3)), graph_in(DIMS(2, 3))}, 1, {a_int("fmod", 1)}};
    sweep(&mod);
    model_desc isinf = {"IsInf", 13, 1, {graph_in(DIMS(2, 3))}, 1,
                        {a_int("detect_positive", 0), a_int("detect_negative", 0)}};
    sweep(&isinf);
    model_desc gemm = {"Gemm", 13, 2, {graph_in(DIMS(2, 3)), init_f32(DIMS(4, 3))}, 1,
                       {a_int("transA", 0), a_int("transB", 1)}};
    sweep(&gemm);
    CHECK(g_sweep_alloc_mode || g_sweep_imports > 0);
    if (!g_sweep_alloc_mode) printf("     %d sweep imports so far\n", g_sweep_imports);
}

/* Float inputs read as sizes or counts: Resize/Upsample scales and float
 * Range bounds set to 0, -1, tiny, huge, inf and NaN. */
TEST(sweep_float_inputs) {
    const float hostile[] = {0.0f, -1.0f, 1e-30f, 1e30f, 3.0e38f, INFINITY, -INFINITY, NAN, 1e9f};
    for (size_t h = 0; h < sizeof hostile / sizeof hostile[0]; h++)
        for (int pos = 0; pos < 4; pos++) {
            float sc[4] = {1, 1, 2, 1.5f};
            sc[pos] = hostile[h];
            const char *modes[] = {"nearest", "linear", "cubic"};
            for (int k = 0; k < 3; k++)
                for (int fold = 0; fold < 2; fold++) {
                    model_desc rz = {"Resize", 13, 3,
                                     {fold ? init_f32(DIMS(1, 1, 2, 2)) : graph_in(DIMS(1, 1, 2, 2)), {.kind = IN_NONE},
                                      init_f32v(4, sc)},
                                     1, {a_str("mode", modes[k])}};
                    sweep_check(&rz, "scales", pos, 0);
                    model_desc up = {"Upsample", 9, 2,
                                     {fold ? init_f32(DIMS(1, 1, 2, 2)) : graph_in(DIMS(1, 1, 2, 2)), init_f32v(4, sc)},
                                     1, {a_str("mode", k ? "linear" : "nearest")}};
                    sweep_check(&up, "scales", pos, 0);
                }
            if (pos < 3) {
                float rv[3] = {0.5f, 10.0f, 0.75f};
                rv[pos] = hostile[h];
                model_desc rg = {"Range", 13, 3, {init_f32v(-1, &rv[0]), init_f32v(-1, &rv[1]), init_f32v(-1, &rv[2])},
                                 1, {{0}}};
                sweep_check(&rg, "input", pos, 0);
            }
        }
    model_desc ok = {"Resize", 13, 3, {graph_in(DIMS(1, 1, 2, 2)), {.kind = IN_NONE}, init_f32v(4, (float[]){1, 1, 2, 1.5f})}, 1,
                     {a_str("mode", "linear")}};
    CHECK_OK(import_desc(&ok, NULL));
    model_desc rg = {"Range", 13, 3, {init_f32v(-1, (float[]){0.5f}), init_f32v(-1, (float[]){10}), init_f32v(-1, (float[]){0.75f})},
                     1, {{0}}};
    CHECK_OK(import_desc(&rg, NULL));
}

/* Mappings that compose several ops (no int attributes to vary): their base
 * models, so that sweep_allocation_failures covers every failure path. */
TEST(sweep_compositions) {
    const char *unary[] = {"Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Softsign", "Shrink",
                           "HardSigmoid", "ThresholdedRelu", "Celu", "Elu", "Selu", "LeakyRelu", "Relu", "HardSwish"};
    for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++) {
        model_desc m = {unary[i], 13, 1, {graph_in(DIMS(2, 3))}, 1, {{0}}};
        if (!strcmp(unary[i], "HardSwish")) m.opset = 14;
        sweep(&m);
    }
    model_desc prelu = {"PRelu", 13, 2, {graph_in(DIMS(2, 3)), init_f32(DIMS(3))}, 1, {{0}}};
    sweep(&prelu);
    model_desc mean = {"Mean", 13, 3, {graph_in(DIMS(2, 3)), graph_in(DIMS(1, 3)), graph_in(DIMS(2, 1))}, 1, {{0}}};
    sweep(&mean);
    model_desc dv = {"Div", 13, 2, {graph_in(DIMS(2, 3)), graph_in(DIMS(2, 3))}, 1, {{0}}};
    sweep(&dv);
    model_desc drop = {"Dropout", 13, 1, {graph_in(DIMS(2, 3))}, 2, {{0}}};
    sweep(&drop);
    model_desc ln = {"LayerNormalization", 17, 3, {graph_in(DIMS(2, 3, 4)), init_f32(DIMS(4)), init_f32(DIMS(4))}, 3,
                     {a_int("axis", -1)}};
    sweep(&ln);
    model_desc inorm = {"InstanceNormalization", 13, 3, {X4, init_f32(DIMS(2)), init_f32(DIMS(2))}, 1, {{0}}};
    sweep(&inorm);
    model_desc bn = {"BatchNormalization", 15, 5,
                     {X4, init_f32(DIMS(2)), init_f32(DIMS(2)), init_f32(DIMS(2)), init_f32v(2, (float[]){1, 2})}, 1,
                     {{0}}};
    sweep(&bn);
    model_desc gmp = {"GlobalMaxPool", 13, 1, {X4}, 1, {{0}}};
    sweep(&gmp);
    const char *reds[] = {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMean", "ReduceSumSquare",
                          "ReduceMin"};
    for (size_t i = 0; i < sizeof reds / sizeof reds[0]; i++) {
        model_desc r = {reds[i], 13, 1, {graph_in(DIMS(2, 3, 4))}, 1, {a_ints("axes", DIMS(1)), a_int("keepdims", 0)}};
        sweep(&r);
    }
    model_desc dql = {"DynamicQuantizeLinear", 13, 1, {graph_in(DIMS(2, 3))}, 3, {{0}}};
    sweep(&dql);
    model_desc ein = {"Einsum", 13, 2, {graph_in(DIMS(2, 3)), graph_in(DIMS(3, 4))}, 1, {a_str("equation", "ij,jk->ik")}};
    sweep(&ein);
    model_desc sce = {"SoftmaxCrossEntropyLoss", 13, 2, {graph_in(DIMS(2, 3)), init_i64(DIMS(0, 2))}, 2,
                      {a_str("reduction", "mean"), a_int("ignore_index", 2)}};
    sweep(&sce);
    model_desc nllw = {"NegativeLogLikelihoodLoss", 13, 3, {graph_in(DIMS(2, 3)), init_i64(DIMS(0, 2)), init_f32(DIMS(3))},
                       1, {a_str("reduction", "mean")}};
    sweep(&nllw);
    /* run-time indices and conditions */
    model_desc gi = {"Gather", 13, 2, {graph_in(DIMS(3, 4)), graph_in_typed(ELEM_INT64, DIMS(2, 2))}, 1, {a_int("axis", 1)}};
    sweep(&gi);
    model_desc gei = {"GatherElements", 13, 2, {graph_in(DIMS(3, 4)), graph_in_typed(ELEM_INT64, DIMS(3, 2))}, 1,
                      {a_int("axis", 1)}};
    sweep(&gei);
    model_desc gndi = {"GatherND", 13, 2, {graph_in(DIMS(3, 4)), graph_in_typed(ELEM_INT64, DIMS(2, 2))}, 1, {{0}}};
    sweep(&gndi);
    model_desc ohi = {"OneHot", 11, 3, {graph_in_typed(ELEM_INT64, DIMS(3)), init_scalar(4), init_f32(DIMS(2))}, 1,
                      {a_int("axis", -1)}};
    sweep(&ohi);
    model_desc wh = {"Where", 13, 3, {graph_in_typed(9, DIMS(2, 3)), graph_in(DIMS(2, 3)), graph_in(DIMS(1, 3))}, 1,
                     {{0}}};
    sweep(&wh);
    model_desc qlm = {"DequantizeLinear", 13, 3, {graph_in(DIMS(2, 3)), init_f32(DIMS(3)), init_f32(DIMS(3))}, 1,
                      {a_int("axis", 1)}};
    sweep(&qlm);
}

TEST(sweep_allocation_failures) {
    g_sweep_alloc_mode = true;
    sweep_conv_family();
    sweep_pooling();
    sweep_depth_space_eye();
    sweep_indexing();
    sweep_shapes();
    sweep_axes_and_reductions();
    sweep_compositions();
    g_sweep_alloc_mode = false;
}

TEST_MAIN(T(depth_space_huge_blocksize_is_an_error), T(zero_stride_with_same_padding_is_an_error),
          T(same_padding_overflow_is_an_error), T(conv_transpose_output_shape_overflow_is_an_error),
          T(eye_like_huge_k), T(gather_constant_index_out_of_range), T(average_pool_asymmetric_failure_does_not_leak),
          T(average_pool_asymmetric_allocation_failures), T(constant_folding_budget),
          T(huge_declared_input_is_not_allocated), T(external_data_short_file), T(sweep_conv_family),
          T(sweep_pooling), T(sweep_depth_space_eye), T(sweep_indexing), T(sweep_shapes),
          T(sweep_axes_and_reductions), T(sweep_float_inputs), T(sweep_compositions),
          T(sweep_allocation_failures))
