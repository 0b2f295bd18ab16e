/*
 * test_ops_shape_extra.c - checks of the shape, index and create op families
 * that the op manifests (test_ops) cannot express: which ops return views
 * sharing storage with their input and which copy, empty_like's shape and
 * dtype, shape inference on meta tensors, bfloat16 results (no .npy dtype;
 * expected values from torch 1.13), and allocation-failure injection.
 */
#include <stdint.h>

#include "fail_alloc.h"
#include "test_util.h"

/* ---- helpers ------------------------------------------------------------ */

/* A float32 tensor of the given shape holding 0, 1, 2, ... */
static tp_tensor *iota_f32(int ndim, const int64_t *sizes) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, ndim, sizes, &t));
    if (!t) return NULL;
    float *p = tp_tensor_data(t);
    for (int64_t i = 0; i < tp_tensor_numel(t); i++) p[i] = (float)i;
    return t;
}

static tp_tensor *from_f32(const float *data, int64_t n) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 1, &n, data, &t));
    return t;
}

/* op(args...) with an optional kwargs dict; the result in *out. */
static tp_status call(const char *op, const tp_value *args, int n, const tp_value *kwargs, tp_value *out) {
    *out = tp_value_none();
    return tp_op_call(tp_op_from_name(op), args, n, kwargs, out);
}

static bool same_shape(const tp_tensor *t, int ndim, const int64_t *sizes) {
    if (tp_tensor_ndim(t) != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (tp_tensor_sizes(t)[i] != sizes[i]) return false;
    return true;
}

static void free_args(tp_value *args, int n) {
    for (int i = 0; i < n; i++) tp_value_clear(&args[i]);
}

/* ---- views share storage -------------------------------------------------- */

typedef struct view_case {
    const char *op;
    int n_extra;      /* arguments after self */
    int64_t extra[4]; /* ints; a list argument is given by list_len > 0 */
    int list_len;     /* > 0: the first extra argument is a list of list_len ints */
    int out_ndim;
    int64_t out_sizes[5];
} view_case;

TEST(test_view_ops_share_storage) {
    tp_tensor *x = iota_f32(3, (int64_t[]){2, 3, 4});
    static const view_case cases[] = {
        {"reshape", 1, {4, 6}, 2, 2, {4, 6}},      {"view", 1, {-1, 4}, 2, 2, {6, 4}},
        {"flatten", 2, {1, 2}, 0, 2, {2, 12}},     {"permute", 1, {2, 0, 1}, 3, 3, {4, 2, 3}},
        {"transpose", 2, {0, 2}, 0, 3, {4, 3, 2}}, {"squeeze", 0, {0}, 0, 3, {2, 3, 4}},
        {"unsqueeze", 1, {1}, 0, 4, {2, 1, 3, 4}}, {"expand", 1, {5, 2, 3, 4}, 4, 4, {5, 2, 3, 4}},
        {"slice", 3, {2, 1, 3}, 0, 3, {2, 3, 2}},  {"select", 2, {1, -1}, 0, 2, {2, 4}},
        {"narrow", 3, {2, 1, 2}, 0, 3, {2, 3, 2}}, {"contiguous", 0, {0}, 0, 3, {2, 3, 4}},
        {"to", 0, {0}, 0, 3, {2, 3, 4}},           {"getitem", 1, {1}, 0, 2, {3, 4}},
    };
    for (size_t c = 0; x && c < sizeof cases / sizeof cases[0]; c++) {
        const view_case *vc = &cases[c];
        tp_value args[5], out;
        args[0] = tp_value_tensor(tp_tensor_retain(x));
        int n = 1;
        if (vc->list_len > 0) {
            CHECK_OK(tp_value_int_list(vc->extra, vc->list_len, &args[n++]));
        } else {
            for (int i = 0; i < vc->n_extra; i++) args[n++] = tp_value_int(vc->extra[i]);
        }
        tp_status st = call(vc->op, args, n, NULL, &out);
        CHECK_MSG(st == TP_OK, "%s: %s", vc->op, tp_last_error());
        if (st == TP_OK) {
            CHECK_MSG(out.kind == TP_VAL_TENSOR, "%s: result is not a tensor", vc->op);
            if (out.kind == TP_VAL_TENSOR) {
                CHECK_MSG(tp_tensor_shares_storage(out.u.tensor, x), "%s: result does not share storage", vc->op);
                CHECK_MSG(same_shape(out.u.tensor, vc->out_ndim, vc->out_sizes), "%s: wrong shape", vc->op);
            }
        }
        tp_value_clear(&out);
        free_args(args, n);
    }
    tp_tensor_free(x);
}

TEST(test_split_chunk_items_are_views) {
    tp_tensor *x = iota_f32(2, (int64_t[]){5, 2});
    const char *ops[] = {"split", "chunk"};
    for (int k = 0; x && k < 2; k++) {
        /* split into pieces of 2, chunk into 3 pieces: both give 2, 2, 1 rows */
        tp_value args[2] = {tp_value_tensor(tp_tensor_retain(x)), tp_value_int(k ? 3 : 2)}, out;
        CHECK_OK(call(ops[k], args, 2, NULL, &out));
        CHECK(out.kind == TP_VAL_LIST && tp_value_len(&out) == 3);
        for (int64_t i = 0; i < tp_value_len(&out); i++) {
            tp_value *item = tp_value_at(&out, i);
            CHECK(item->kind == TP_VAL_TENSOR && tp_tensor_shares_storage(item->u.tensor, x));
        }
        /* the last piece is the single row [8, 9] */
        tp_value *last = tp_value_at(&out, 2);
        if (last && last->kind == TP_VAL_TENSOR) {
            CHECK(same_shape(last->u.tensor, 2, (int64_t[]){1, 2}));
            CHECK(tp_tensor_item_f64(last->u.tensor, 1) == 9.0);
        }
        tp_value_clear(&out);
        free_args(args, 2);
    }
    tp_tensor_free(x);
}

TEST(test_write_through_view) {
    tp_tensor *x = iota_f32(2, (int64_t[]){3, 4});
    tp_value args[3] = {tp_value_tensor(tp_tensor_retain(x)), tp_value_int(1), tp_value_int(2)}, out;
    CHECK_OK(call("select", args, 3, NULL, &out)); /* column 2 */
    if (out.kind == TP_VAL_TENSOR) {
        CHECK_OK(tp_tensor_fill(out.u.tensor, -7.0));
        CHECK(tp_tensor_get_f64(x, (int64_t[]){1, 2}) == -7.0);
        CHECK(tp_tensor_get_f64(x, (int64_t[]){1, 1}) == 5.0);
    }
    tp_value_clear(&out);
    free_args(args, 3);
    tp_tensor_free(x);
}

/* ---- copies do not share storage ------------------------------------------ */

TEST(test_copying_ops_do_not_share) {
    tp_tensor *x = iota_f32(2, (int64_t[]){3, 4}), *xt = NULL;
    if (!x) return;
    CHECK_OK(tp_tensor_transpose(x, 0, 1, &xt)); /* [4, 3], not contiguous */
    tp_value out;

    /* reshape of a non-viewable input copies, with the right values */
    tp_value a1[2] = {tp_value_tensor(tp_tensor_retain(xt)), tp_value_none()};
    CHECK_OK(tp_value_int_list((int64_t[]){12}, 1, &a1[1]));
    CHECK_OK(call("reshape", a1, 2, NULL, &out));
    if (out.kind == TP_VAL_TENSOR) {
        CHECK(!tp_tensor_shares_storage(out.u.tensor, x));
        CHECK(tp_tensor_item_f64(out.u.tensor, 1) == 4.0); /* xt[0][1] = x[1][0] */
    }
    tp_value_clear(&out);
    free_args(a1, 2);

    /* contiguous of a transposed tensor copies; of a contiguous one it does not */
    tp_value a2[1] = {tp_value_tensor(tp_tensor_retain(xt))};
    CHECK_OK(call("contiguous", a2, 1, NULL, &out));
    if (out.kind == TP_VAL_TENSOR) {
        CHECK(!tp_tensor_shares_storage(out.u.tensor, x));
        CHECK(tp_tensor_is_contiguous(out.u.tensor));
    }
    tp_value_clear(&out);
    free_args(a2, 1);

    /* to: a new dtype or copy=True copies */
    tp_value a3[4] = {tp_value_tensor(tp_tensor_retain(x)), tp_value_dtype(TP_FLOAT64), tp_value_bool(false),
                      tp_value_bool(false)};
    CHECK_OK(call("to", a3, 2, NULL, &out));
    if (out.kind == TP_VAL_TENSOR) {
        CHECK(!tp_tensor_shares_storage(out.u.tensor, x));
        CHECK(tp_tensor_dtype(out.u.tensor) == TP_FLOAT64);
    }
    tp_value_clear(&out);
    a3[1] = tp_value_none();
    a3[3] = tp_value_bool(true);
    CHECK_OK(call("to", a3, 4, NULL, &out));
    if (out.kind == TP_VAL_TENSOR) CHECK(!tp_tensor_shares_storage(out.u.tensor, x));
    tp_value_clear(&out);
    free_args(a3, 4);

    /* clone, flip, repeat, pad, tril copy */
    const char *unary_ops[] = {"clone", "flip", "repeat", "pad", "tril"};
    for (int k = 0; k < 5; k++) {
        tp_value args[2] = {tp_value_tensor(tp_tensor_retain(x)), tp_value_none()};
        int n = k == 0 || k == 4 ? 1 : 2;
        if (k == 1) CHECK_OK(tp_value_int_list((int64_t[]){0}, 1, &args[1]));
        if (k == 2) CHECK_OK(tp_value_int_list((int64_t[]){1, 1}, 2, &args[1]));
        if (k == 3) CHECK_OK(tp_value_int_list((int64_t[]){0, 0}, 2, &args[1]));
        CHECK_MSG(call(unary_ops[k], args, n, NULL, &out) == TP_OK, "%s: %s", unary_ops[k], tp_last_error());
        if (out.kind == TP_VAL_TENSOR)
            CHECK_MSG(!tp_tensor_shares_storage(out.u.tensor, x), "%s shares storage", unary_ops[k]);
        tp_value_clear(&out);
        free_args(args, 2);
    }

    /* cat and stack of a single tensor still copy */
    const char *list_ops[] = {"cat", "stack"};
    for (int k = 0; k < 2; k++) {
        tp_value list, args[1];
        CHECK_OK(tp_value_list(1, &list));
        tp_value item = tp_value_tensor(tp_tensor_retain(x));
        CHECK_OK(tp_value_seq_set(&list, 0, &item));
        args[0] = list;
        CHECK_OK(call(list_ops[k], args, 1, NULL, &out));
        if (out.kind == TP_VAL_TENSOR)
            CHECK_MSG(!tp_tensor_shares_storage(out.u.tensor, x), "%s shares storage", list_ops[k]);
        tp_value_clear(&out);
        free_args(args, 1);
    }
    tp_tensor_free(xt);
    tp_tensor_free(x);
}

/* ---- empty_like --------------------------------------------------------- */

TEST(test_empty_like) {
    tp_tensor *x = iota_f32(3, (int64_t[]){2, 3, 4}), *xt = NULL;
    if (!x) return;
    CHECK_OK(tp_tensor_transpose(x, 0, 2, &xt));
    tp_value args[1] = {tp_value_tensor(tp_tensor_retain(xt))}, out, kwargs;
    CHECK_OK(call("empty_like", args, 1, NULL, &out));
    if (out.kind == TP_VAL_TENSOR) {
        CHECK(same_shape(out.u.tensor, 3, (int64_t[]){4, 3, 2}));
        CHECK(tp_tensor_dtype(out.u.tensor) == TP_FLOAT32);
        CHECK(!tp_tensor_is_meta(out.u.tensor) && tp_tensor_is_contiguous(out.u.tensor));
        CHECK(!tp_tensor_shares_storage(out.u.tensor, x));
    }
    tp_value_clear(&out);
    CHECK_OK(tp_value_dict(&kwargs));
    tp_value dt = tp_value_dtype(TP_INT16);
    CHECK_OK(tp_value_dict_set(&kwargs, "dtype", &dt));
    CHECK_OK(call("empty_like", args, 1, &kwargs, &out));
    if (out.kind == TP_VAL_TENSOR) {
        CHECK(same_shape(out.u.tensor, 3, (int64_t[]){4, 3, 2}));
        CHECK(tp_tensor_dtype(out.u.tensor) == TP_INT16);
    }
    tp_value_clear(&out);
    tp_value_clear(&kwargs);
    free_args(args, 1);
    tp_tensor_free(xt);
    tp_tensor_free(x);
}

/* ---- shape inference on meta tensors ------------------------------------ */

static tp_status infer(const char *op, const tp_value *args, int n, tp_value *out) {
    tp_op id = tp_op_from_name(op);
    const tp_schema *s = tp_op_schema(id);
    if (!s) return TP_ERR_NOT_FOUND;
    tp_value bound[16];
    TP_TRY(tp_op_bind(id, args, n, NULL, bound));
    tp_status st = tp_op_infer(id, bound, out);
    for (int i = 0; i < s->n_args; i++) tp_value_clear(&bound[i]);
    return st;
}

TEST(test_infer_on_meta) {
    tp_tensor *m = NULL;
    CHECK_OK(tp_tensor_meta(TP_FLOAT16, 3, (int64_t[]){2, 3, 4}, &m));
    if (!m) return;
    tp_value out = tp_value_none();

    tp_value a1[2] = {tp_value_tensor(tp_tensor_retain(m)), tp_value_none()};
    CHECK_OK(tp_value_int_list((int64_t[]){-1, 4}, 2, &a1[1]));
    CHECK_OK(infer("reshape", a1, 2, &out));
    CHECK(out.kind == TP_VAL_TENSOR && tp_tensor_is_meta(out.u.tensor) &&
          same_shape(out.u.tensor, 2, (int64_t[]){6, 4}) && tp_tensor_dtype(out.u.tensor) == TP_FLOAT16);
    tp_value_clear(&out);
    CHECK_OK(infer("view", a1, 2, &out));
    tp_value_clear(&out);
    free_args(a1, 2);

    /* split: a list of metas */
    tp_value a2[3] = {tp_value_tensor(tp_tensor_retain(m)), tp_value_none(), tp_value_int(-1)};
    CHECK_OK(tp_value_int_list((int64_t[]){1, 3}, 2, &a2[1]));
    CHECK_OK(infer("split", a2, 3, &out));
    CHECK(out.kind == TP_VAL_LIST && tp_value_len(&out) == 2);
    if (tp_value_len(&out) == 2) {
        CHECK(same_shape(tp_value_at(&out, 1)->u.tensor, 3, (int64_t[]){2, 3, 3}));
        CHECK(tp_tensor_is_meta(tp_value_at(&out, 0)->u.tensor));
    }
    /* getitem on the meta list */
    tp_value a3[2] = {out, tp_value_int(0)}, item = tp_value_none();
    CHECK_OK(infer("getitem", a3, 2, &item));
    CHECK(item.kind == TP_VAL_TENSOR && same_shape(item.u.tensor, 3, (int64_t[]){2, 3, 1}));
    tp_value_clear(&item);
    free_args(a3, 2);
    free_args(a2, 3);

    /* chunk: [2, 3, 4] in 2 along dim 0 */
    tp_value a4[2] = {tp_value_tensor(tp_tensor_retain(m)), tp_value_int(2)};
    CHECK_OK(infer("chunk", a4, 2, &out));
    CHECK(out.kind == TP_VAL_LIST && tp_value_len(&out) == 2);
    tp_value_clear(&out);
    free_args(a4, 2);

    /* infer of view on a real, non-viewable tensor fails like the kernel */
    tp_tensor *x = iota_f32(2, (int64_t[]){3, 4}), *xt = NULL;
    if (x) CHECK_OK(tp_tensor_transpose(x, 0, 1, &xt));
    if (xt) {
        tp_value a5[2] = {tp_value_tensor(tp_tensor_retain(xt)), tp_value_none()};
        CHECK_OK(tp_value_int_list((int64_t[]){12}, 1, &a5[1]));
        CHECK_STATUS(infer("view", a5, 2, &out), TP_ERR_SHAPE);
        CHECK_ERR_CONTAINS("view: ");
        CHECK_OK(infer("reshape", a5, 2, &out));
        CHECK(out.kind == TP_VAL_TENSOR && same_shape(out.u.tensor, 1, (int64_t[]){12}));
        tp_value_clear(&out);
        free_args(a5, 2);
    }
    tp_tensor_free(xt);
    tp_tensor_free(x);
    tp_tensor_free(m);
}

/* Copying kernels refuse meta inputs (no data) with an error; view ops
 * accept them and return meta views. */
TEST(test_meta_inputs) {
    tp_tensor *m = NULL, *ix = NULL;
    CHECK_OK(tp_tensor_meta(TP_FLOAT32, 2, (int64_t[]){3, 4}, &m));
    CHECK_OK(tp_tensor_meta(TP_INT64, 2, (int64_t[]){1, 4}, &ix));
    if (!m || !ix) {
        tp_tensor_free(m);
        tp_tensor_free(ix);
        return;
    }
    tp_value out;
    tp_value a1[2] = {tp_value_tensor(tp_tensor_retain(m)), tp_value_none()};
    CHECK_OK(tp_value_int_list((int64_t[]){0}, 1, &a1[1]));
    CHECK_STATUS(call("flip", a1, 2, NULL, &out), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("meta tensor");
    tp_value_clear(&a1[1]);
    CHECK_OK(tp_value_int_list((int64_t[]){2, 1}, 2, &a1[1]));
    CHECK_STATUS(call("repeat", a1, 2, NULL, &out), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("meta tensor");
    free_args(a1, 2);
    tp_value a2[3] = {tp_value_tensor(tp_tensor_retain(m)), tp_value_int(0), tp_value_tensor(tp_tensor_retain(ix))};
    CHECK_STATUS(call("gather", a2, 3, NULL, &out), TP_ERR_INVALID_ARG);
    free_args(a2, 3);
    tp_value a3[3] = {tp_value_tensor(tp_tensor_retain(m)), tp_value_int(0), tp_value_int(1)};
    CHECK_OK(call("transpose", a3, 3, NULL, &out));
    CHECK(out.kind == TP_VAL_TENSOR && tp_tensor_is_meta(out.u.tensor) &&
          same_shape(out.u.tensor, 2, (int64_t[]){4, 3}));
    tp_value_clear(&out);
    free_args(a3, 3);
    tp_tensor_free(ix);
    tp_tensor_free(m);
}

/* ---- bfloat16 (values from torch 1.13) ---------------------------------- */

static uint16_t bf16_bits(const tp_tensor *t, int64_t i) { return ((const uint16_t *)tp_tensor_data(t))[i]; }

TEST(test_bfloat16) {
    /* x.to(torch.bfloat16).view(torch.int16) for
     * x = [1 + 2^-8, 1 + 3*2^-8, -1.5, 3.0e38, 0.1, 65504.0]: round to nearest even */
    static const float vals[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -1.5f, 3.0e38f, 0.1f, 65504.0f};
    static const uint16_t want[] = {16256, 16258, (uint16_t)-16448, 32610, 15821, 18304};
    tp_tensor *x = from_f32(vals, 6);
    tp_value out;
    tp_value a1[2] = {tp_value_tensor(tp_tensor_retain(x)), tp_value_dtype(TP_BFLOAT16)};
    CHECK_OK(call("to", a1, 2, NULL, &out));
    if (out.kind == TP_VAL_TENSOR) {
        CHECK(tp_tensor_dtype(out.u.tensor) == TP_BFLOAT16);
        for (int i = 0; i < 6; i++)
            CHECK_MSG(bf16_bits(out.u.tensor, i) == want[i], "element %d: %u", i, bf16_bits(out.u.tensor, i));
        /* bf16 -> int32 truncates: tensor([1.7, -1.7, 2.5]).bfloat16().int() == [1, -1, 2] */
        static const float v2[] = {1.7f, -1.7f, 2.5f};
        tp_tensor *y = from_f32(v2, 3), *yb = NULL, *yi = NULL;
        if (y) CHECK_OK(tp_tensor_to(y, TP_BFLOAT16, &yb));
        tp_value a2[2] = {tp_value_tensor(yb), tp_value_dtype(TP_INT32)}, r2;
        if (yb) {
            CHECK_OK(call("to", a2, 2, NULL, &r2));
            if (r2.kind == TP_VAL_TENSOR) {
                yi = r2.u.tensor;
                CHECK(tp_tensor_get_i64(yi, (int64_t[]){0}) == 1 && tp_tensor_get_i64(yi, (int64_t[]){1}) == -1 &&
                      tp_tensor_get_i64(yi, (int64_t[]){2}) == 2);
            }
            tp_value_clear(&r2);
        }
        free_args(a2, 2);
        tp_tensor_free(y);
    }
    tp_value_clear(&out);
    free_args(a1, 2);
    tp_tensor_free(x);

    /* torch.arange(0, 1, 0.3, dtype=torch.bfloat16) == [0, 0.30078125, 0.6015625, 0.8984375] */
    tp_value a3[3] = {tp_value_int(0), tp_value_int(1), tp_value_float(0.3)}, kwargs;
    CHECK_OK(tp_value_dict(&kwargs));
    tp_value dt = tp_value_dtype(TP_BFLOAT16);
    CHECK_OK(tp_value_dict_set(&kwargs, "dtype", &dt));
    CHECK_OK(call("arange", a3, 3, &kwargs, &out));
    if (out.kind == TP_VAL_TENSOR) {
        static const double w[] = {0.0, 0.30078125, 0.6015625, 0.8984375};
        CHECK(same_shape(out.u.tensor, 1, (int64_t[]){4}));
        for (int i = 0; i < 4 && tp_tensor_numel(out.u.tensor) == 4; i++)
            CHECK(tp_tensor_item_f64(out.u.tensor, i) == w[i]);
    }
    tp_value_clear(&out);
    /* torch.full((2,), 0.1, dtype=torch.bfloat16) == 0.10009765625 */
    tp_value a4[2] = {tp_value_none(), tp_value_float(0.1)};
    CHECK_OK(tp_value_int_list((int64_t[]){2}, 1, &a4[0]));
    CHECK_OK(call("full", a4, 2, &kwargs, &out));
    if (out.kind == TP_VAL_TENSOR) CHECK(tp_tensor_item_f64(out.u.tensor, 1) == 0.10009765625);
    tp_value_clear(&out);
    free_args(a4, 2);
    tp_value_clear(&kwargs);

    /* cat promotes bfloat16 + int32 -> bfloat16, bfloat16 + float16 -> float32 */
    tp_tensor *b = NULL, *i32 = NULL, *h = NULL;
    CHECK_OK(tp_tensor_scalar(TP_BFLOAT16, 1.5, &b));
    CHECK_OK(tp_tensor_scalar(TP_INT32, 2, &i32));
    CHECK_OK(tp_tensor_scalar(TP_FLOAT16, 2, &h));
    tp_tensor *b1 = NULL, *i1 = NULL, *h1 = NULL;
    if (b && i32 && h) {
        CHECK_OK(tp_tensor_unsqueeze(b, 0, &b1));
        CHECK_OK(tp_tensor_unsqueeze(i32, 0, &i1));
        CHECK_OK(tp_tensor_unsqueeze(h, 0, &h1));
    }
    tp_tensor *second[2] = {i1, h1};
    tp_dtype want_dtype[2] = {TP_BFLOAT16, TP_FLOAT32};
    for (int k = 0; b1 && i1 && h1 && k < 2; k++) {
        tp_value list, item, args[1];
        CHECK_OK(tp_value_list(0, &list));
        item = tp_value_tensor(tp_tensor_retain(b1));
        CHECK_OK(tp_value_append(&list, &item));
        item = tp_value_tensor(tp_tensor_retain(second[k]));
        CHECK_OK(tp_value_append(&list, &item));
        args[0] = list;
        CHECK_OK(call("cat", args, 1, NULL, &out));
        if (out.kind == TP_VAL_TENSOR) {
            CHECK(tp_tensor_dtype(out.u.tensor) == want_dtype[k]);
            CHECK(tp_tensor_item_f64(out.u.tensor, 0) == 1.5 && tp_tensor_item_f64(out.u.tensor, 1) == 2.0);
        }
        tp_value_clear(&out);
        free_args(args, 1);
    }
    tp_tensor_free(b1);
    tp_tensor_free(i1);
    tp_tensor_free(h1);
    tp_tensor_free(b);
    tp_tensor_free(i32);
    tp_tensor_free(h);
}

/* ---- allocation failures -------------------------------------------------- */

typedef struct op_call {
    const char *op;
    tp_value args[4];
    int n;
} op_call;

static tp_status run_op_call(void *ctx) {
    op_call *c = ctx;
    tp_value out;
    tp_status st = call(c->op, c->args, c->n, NULL, &out);
    tp_value_clear(&out);
    return st;
}

TEST(test_alloc_failures) {
    tp_tensor *x = iota_f32(2, (int64_t[]){3, 4}), *y = iota_f32(2, (int64_t[]){4, 3}), *xt = NULL, *yt = NULL;
    if (!x || !y) return;
    CHECK_OK(tp_tensor_transpose(x, 0, 1, &xt)); /* [4, 3], not contiguous */
    CHECK_OK(tp_tensor_transpose(y, 0, 1, &yt)); /* [3, 4], not contiguous */
    tp_tensor *idx = NULL;
    CHECK_OK(tp_tensor_from_data(TP_INT64, 1, (int64_t[]){2}, (int64_t[]){2, 0}, &idx));
    tp_tensor *mask = NULL;
    CHECK_OK(tp_tensor_from_data(TP_BOOL, 1, (int64_t[]){4}, (uint8_t[]){1, 0, 0, 1}, &mask));
    op_call calls[12];
    int n = 0;
    /* reshape that must copy */
    calls[n] = (op_call){"reshape", {tp_value_tensor(tp_tensor_retain(xt))}, 2};
    CHECK_OK(tp_value_int_list((int64_t[]){12}, 1, &calls[n++].args[1]));
    calls[n] = (op_call){"split", {tp_value_tensor(tp_tensor_retain(x)), tp_value_int(1), tp_value_int(1)}, 3};
    n++;
    calls[n] = (op_call){"cat", {tp_value_none(), tp_value_int(1)}, 2};
    CHECK_OK(tp_value_list(0, &calls[n].args[0]));
    for (int k = 0; k < 3; k++) {
        tp_value item = tp_value_tensor(tp_tensor_retain(k == 1 ? yt : x));
        CHECK_OK(tp_value_append(&calls[n].args[0], &item));
    }
    n++;
    calls[n] = (op_call){"pad", {tp_value_tensor(tp_tensor_retain(xt)), tp_value_none(), tp_value_none()}, 3};
    CHECK_OK(tp_value_int_list((int64_t[]){2, 1, 1, 2}, 4, &calls[n].args[1]));
    CHECK_OK(tp_value_str("reflect", &calls[n].args[2]));
    n++;
    calls[n] = (op_call){"pad", {tp_value_tensor(tp_tensor_retain(xt)), tp_value_none()}, 2};
    CHECK_OK(tp_value_int_list((int64_t[]){2, -1}, 2, &calls[n++].args[1]));
    calls[n] = (op_call){"repeat", {tp_value_tensor(tp_tensor_retain(xt)), tp_value_none()}, 2};
    CHECK_OK(tp_value_int_list((int64_t[]){2, 1, 3}, 3, &calls[n++].args[1]));
    calls[n] = (op_call){"flip", {tp_value_tensor(tp_tensor_retain(xt)), tp_value_none()}, 2};
    CHECK_OK(tp_value_int_list((int64_t[]){0, 1}, 2, &calls[n++].args[1]));
    calls[n] =
        (op_call){"index_select",
                  {tp_value_tensor(tp_tensor_retain(xt)), tp_value_int(0), tp_value_tensor(tp_tensor_retain(idx))},
                  3};
    n++;
    calls[n] =
        (op_call){"masked_fill",
                  {tp_value_tensor(tp_tensor_retain(x)), tp_value_tensor(tp_tensor_retain(mask)), tp_value_float(2)},
                  3};
    n++;
    calls[n] = (op_call){"arange", {tp_value_int(2), tp_value_int(9)}, 2};
    n++;
    calls[n] = (op_call){"stack", {tp_value_none(), tp_value_int(-1)}, 2};
    CHECK_OK(tp_value_list(0, &calls[n].args[0]));
    for (int k = 0; k < 2; k++) {
        tp_value item = tp_value_tensor(tp_tensor_retain(k ? yt : x));
        CHECK_OK(tp_value_append(&calls[n].args[0], &item));
    }
    n++;
    for (int i = 0; i < n; i++) {
        check_alloc_failures(calls[i].op, run_op_call, &calls[i]);
        free_args(calls[i].args, calls[i].n);
    }
    tp_tensor_free(mask);
    tp_tensor_free(idx);
    tp_tensor_free(yt);
    tp_tensor_free(y);
    tp_tensor_free(xt);
    tp_tensor_free(x);
}

TEST_MAIN(T(test_view_ops_share_storage), T(test_split_chunk_items_are_views), T(test_write_through_view),
          T(test_copying_ops_do_not_share), T(test_empty_like), T(test_infer_on_meta), T(test_meta_inputs),
          T(test_bfloat16), T(test_alloc_failures))
