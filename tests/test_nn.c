/*
 * test_nn.c - checks of the nn op family that the data-driven manifest
 * (fixtures/ops/nn.json, run by test_ops) cannot express: the statistics of
 * dropout with train=True and of scaled_dot_product_attention's dropout_p,
 * op flags, and shape inference on meta tensors.
 */
#include "test_util.h"

/* A contiguous float tensor with values 1, 2, 3, ... */
static tp_tensor *ramp(tp_dtype dtype, int ndim, const int64_t *sizes) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_empty(dtype, ndim, sizes, &t));
    if (!t) return NULL;
    int64_t n = tp_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (dtype == TP_FLOAT64) ((double *)tp_tensor_data(t))[i] = (double)(i + 1);
        else ((float *)tp_tensor_data(t))[i] = (float)(i + 1);
    }
    return t;
}

/* Call dropout(x, p, train=True); return the result (caller frees). */
static tp_tensor *dropout_train(tp_tensor *x, double p) {
    tp_value args[3] = {tp_value_tensor(tp_tensor_retain(x)), tp_value_float(p), tp_value_bool(true)};
    tp_value out = tp_value_none();
    CHECK_OK(tp_op_call(TP_OP_DROPOUT, args, 3, NULL, &out));
    tp_value_clear(&args[0]);
    tp_tensor *r = out.kind == TP_VAL_TENSOR ? tp_tensor_retain(out.u.tensor) : NULL;
    tp_value_clear(&out);
    return r;
}

/* Every element of y is 0 or x / (1 - p); the zero fraction is near p. */
static void check_dropout_stats(tp_tensor *x, tp_tensor *y, double p, double tol) {
    int64_t n = tp_tensor_numel(x), zeros = 0, bad = 0;
    CHECK(tp_tensor_dtype(y) == tp_tensor_dtype(x));
    for (int64_t i = 0; i < n; i++) {
        double xi = tp_tensor_item_f64(x, i), yi = tp_tensor_item_f64(y, i);
        if (yi == 0.0) zeros++;
        else if (fabs(yi - xi / (1.0 - p)) > 1e-6 * fabs(xi / (1.0 - p))) bad++;
    }
    CHECK_MSG(bad == 0, "%lld kept values not scaled by 1/(1-p)", (long long)bad);
    double frac = (double)zeros / (double)n;
    CHECK_MSG(fabs(frac - p) < tol, "zero fraction %.4f, expected about %.2f", frac, p);
}

TEST(test_dropout_train_statistics) {
    int64_t sizes[2] = {100, 200};
    const double ps[] = {0.1, 0.5, 0.8};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        tp_tensor *x = ramp(TP_FLOAT32, 2, sizes);
        tp_tensor *y = dropout_train(x, ps[k]);
        if (x && y) check_dropout_stats(x, y, ps[k], 0.02);
        tp_tensor_free(y);
        tp_tensor_free(x);
    }
}

TEST(test_dropout_train_noncontiguous_f64) {
    int64_t sizes[2] = {80, 150};
    tp_tensor *x = ramp(TP_FLOAT64, 2, sizes), *xt = NULL;
    CHECK_OK(tp_tensor_transpose(x, 0, 1, &xt));
    tp_tensor *y = xt ? dropout_train(xt, 0.3) : NULL;
    if (y) {
        CHECK(tp_tensor_is_contiguous(y));
        CHECK(tp_tensor_size(y, 0) == 150 && tp_tensor_size(y, 1) == 80);
        check_dropout_stats(xt, y, 0.3, 0.02);
    }
    tp_tensor_free(y);
    tp_tensor_free(xt);
    tp_tensor_free(x);
}

TEST(test_dropout_calls_draw_different_masks) {
    int64_t sizes[1] = {256};
    tp_tensor *x = ramp(TP_FLOAT32, 1, sizes);
    tp_tensor *a = dropout_train(x, 0.5), *b = dropout_train(x, 0.5);
    if (a && b) {
        int64_t differ = 0;
        for (int64_t i = 0; i < 256; i++) differ += tp_tensor_item_f64(a, i) != tp_tensor_item_f64(b, i);
        CHECK_MSG(differ > 0, "two dropout calls gave the same mask");
    }
    tp_tensor_free(a);
    tp_tensor_free(b);
    tp_tensor_free(x);
}

/* q = k = 0 gives uniform weights 1/S; with v = 1 each output is
 * (#kept) / (S (1 - p)). */
TEST(test_sdpa_dropout_statistics) {
    const int64_t L = 400, S = 8, E = 4;
    const double p = 0.25;
    int64_t qs[2] = {L, E}, ks[2] = {S, E}, vs[2] = {S, 1};
    tp_tensor *q = NULL, *k = NULL, *v = NULL;
    CHECK_OK(tp_tensor_zeros(TP_FLOAT64, 2, qs, &q));
    CHECK_OK(tp_tensor_zeros(TP_FLOAT64, 2, ks, &k));
    CHECK_OK(tp_tensor_empty(TP_FLOAT64, 2, vs, &v));
    if (!q || !k || !v) goto done;
    CHECK_OK(tp_tensor_fill(v, 1.0));
    tp_value args[5] = {tp_value_tensor(tp_tensor_retain(q)), tp_value_tensor(tp_tensor_retain(k)),
                        tp_value_tensor(tp_tensor_retain(v)), tp_value_none(), tp_value_float(p)};
    tp_value out = tp_value_none();
    CHECK_OK(tp_op_call(TP_OP_SCALED_DOT_PRODUCT_ATTENTION, args, 5, NULL, &out));
    if (out.kind == TP_VAL_TENSOR) {
        int64_t kept = 0, bad = 0;
        for (int64_t l = 0; l < L; l++) {
            double c = tp_tensor_item_f64(out.u.tensor, l) * (double)S * (1.0 - p);
            double r = round(c);
            if (fabs(c - r) > 1e-9 || r < 0 || r > (double)S) bad++;
            kept += (int64_t)r;
        }
        CHECK_MSG(bad == 0, "%lld rows are not a whole number of kept weights", (long long)bad);
        double frac = (double)kept / (double)(L * S);
        CHECK_MSG(fabs(frac - (1.0 - p)) < 0.03, "kept fraction %.4f, expected about %.2f", frac, 1.0 - p);
    }
    tp_value_clear(&out);
    for (int i = 0; i < 5; i++) tp_value_clear(&args[i]);
done:
    tp_tensor_free(q);
    tp_tensor_free(k);
    tp_tensor_free(v);
}

TEST(test_flags) {
    CHECK(tp_op_flags(TP_OP_DROPOUT) & TP_OPF_RANDOM);
    CHECK(tp_op_flags(TP_OP_SCALED_DOT_PRODUCT_ATTENTION) & TP_OPF_RANDOM);
    CHECK((tp_op_flags(TP_OP_BATCH_NORM) & (TP_OPF_MUTATES | TP_OPF_EFFECTFUL)) == (TP_OPF_MUTATES | TP_OPF_EFFECTFUL));
    CHECK(tp_op_flags(TP_OP_LAYER_NORM) == 0);
    CHECK(tp_op_flags(TP_OP_SOFTMAX) == 0);
}

/* Bind and infer op(args) where tensors are meta; check the output shape. */
static void check_meta_infer(tp_op op, tp_value *args, int n, const tp_value *kwargs, tp_dtype dtype, int ndim,
                             const int64_t *sizes) {
    tp_value bound[16], out = tp_value_none();
    const tp_schema *s = tp_op_schema(op);
    CHECK(s && s->n_args <= 16);
    if (!s || s->n_args > 16) return;
    CHECK_OK(tp_op_bind(op, args, n, kwargs, bound));
    CHECK_OK(tp_op_infer(op, bound, &out));
    CHECK_MSG(out.kind == TP_VAL_TENSOR, "%s: infer gave %s", tp_op_name(op), tp_value_kind_name(out.kind));
    if (out.kind == TP_VAL_TENSOR) {
        tp_tensor *t = out.u.tensor;
        CHECK(tp_tensor_is_meta(t));
        CHECK_MSG(tp_tensor_dtype(t) == dtype, "%s: dtype %s", tp_op_name(op), tp_dtype_name(tp_tensor_dtype(t)));
        CHECK(tp_tensor_ndim(t) == ndim);
        for (int d = 0; d < ndim && d < tp_tensor_ndim(t); d++)
            CHECK_MSG(tp_tensor_sizes(t)[d] == sizes[d], "%s: dim %d is %lld", tp_op_name(op), d,
                      (long long)tp_tensor_sizes(t)[d]);
    }
    tp_value_clear(&out);
    for (int i = 0; i < s->n_args; i++) tp_value_clear(&bound[i]);
}

static tp_value meta(tp_dtype dtype, int ndim, const int64_t *sizes) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_meta(dtype, ndim, sizes, &t));
    return t ? tp_value_tensor(t) : tp_value_none();
}

TEST(test_infer_on_meta_tensors) {
    int64_t x4[4] = {2, 6, 5, 5}, c6[1] = {6}, q[4] = {2, 8, 7, 16}, kv[4] = {2, 8, 9, 16}, o[4] = {2, 8, 7, 16};
    int64_t w[2] = {10, 4}, idx[2] = {3, 5}, emb[3] = {3, 5, 4};
    tp_value a[4];
    a[0] = meta(TP_FLOAT32, 4, x4);
    a[1] = meta(TP_FLOAT32, 1, c6);
    a[2] = meta(TP_FLOAT32, 1, c6);
    check_meta_infer(TP_OP_BATCH_NORM, a, 3, NULL, TP_FLOAT32, 4, x4);
    check_meta_infer(TP_OP_GROUP_NORM, (tp_value[]){a[0], tp_value_int(3)}, 2, NULL, TP_FLOAT32, 4, x4);
    check_meta_infer(TP_OP_SOFTMAX, (tp_value[]){a[0], tp_value_int(1), tp_value_dtype(TP_FLOAT64)}, 3, NULL,
                     TP_FLOAT64, 4, x4);
    check_meta_infer(TP_OP_PRELU, (tp_value[]){a[0], a[1]}, 2, NULL, TP_FLOAT32, 4, x4);
    check_meta_infer(TP_OP_DROPOUT, (tp_value[]){a[0], tp_value_float(0.2), tp_value_bool(true)}, 3, NULL, TP_FLOAT32,
                     4, x4);
    for (int i = 0; i < 3; i++) tp_value_clear(&a[i]);

    tp_value ln_shape = tp_value_none();
    CHECK_OK(tp_value_int_list((int64_t[]){5, 5}, 2, &ln_shape));
    a[0] = meta(TP_FLOAT64, 4, x4);
    check_meta_infer(TP_OP_LAYER_NORM, (tp_value[]){a[0], ln_shape}, 2, NULL, TP_FLOAT64, 4, x4);
    tp_value_clear(&a[0]);
    tp_value_clear(&ln_shape);

    a[0] = meta(TP_FLOAT32, 4, q);
    a[1] = meta(TP_FLOAT32, 4, kv);
    a[2] = meta(TP_FLOAT32, 4, kv);
    a[3] = meta(TP_BOOL, 2, (int64_t[]){7, 9});
    check_meta_infer(TP_OP_SCALED_DOT_PRODUCT_ATTENTION, a, 4, NULL, TP_FLOAT32, 4, o);
    for (int i = 0; i < 4; i++) tp_value_clear(&a[i]);

    a[0] = meta(TP_FLOAT16, 2, w);
    a[1] = meta(TP_INT32, 2, idx);
    check_meta_infer(TP_OP_EMBEDDING, a, 2, NULL, TP_FLOAT16, 3, emb);
    for (int i = 0; i < 2; i++) tp_value_clear(&a[i]);
}

/* float16 / bfloat16 inputs with float32 norm parameters (mixed precision). */
TEST(test_layer_norm_bf16_with_f32_params) {
    int64_t xs[2] = {2, 4}, ws[1] = {4};
    tp_tensor *x32 = ramp(TP_FLOAT32, 2, xs), *x = NULL, *w = NULL;
    CHECK_OK(tp_tensor_to(x32, TP_BFLOAT16, &x));
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, 1, ws, &w));
    if (!x || !w) goto done;
    CHECK_OK(tp_tensor_fill(w, 2.0));
    tp_value shape = tp_value_none();
    CHECK_OK(tp_value_int_list(ws, 1, &shape));
    tp_value args[3] = {tp_value_tensor(tp_tensor_retain(x)), shape, tp_value_tensor(tp_tensor_retain(w))};
    tp_value out = tp_value_none();
    CHECK_OK(tp_op_call(TP_OP_LAYER_NORM, args, 3, NULL, &out));
    if (out.kind == TP_VAL_TENSOR) {
        CHECK(tp_tensor_dtype(out.u.tensor) == TP_BFLOAT16);
        /* rows [1,2,3,4] and [5,6,7,8]: (x - mean) / sqrt(1.25 + eps) * 2 */
        double want[4] = {-1.5, -0.5, 0.5, 1.5};
        for (int64_t i = 0; i < 8; i++) {
            double expect = want[i % 4] / sqrt(1.25 + 1e-5) * 2.0;
            CHECK_MSG(fabs(tp_tensor_item_f64(out.u.tensor, i) - expect) < 2e-2, "element %lld", (long long)i);
        }
    }
    tp_value_clear(&out);
    for (int i = 0; i < 3; i++) tp_value_clear(&args[i]);
done:
    tp_tensor_free(x32);
    tp_tensor_free(x);
    tp_tensor_free(w);
}

int main(int argc, char **argv) {
    static const tp_test_case tests[] = {
        T(test_dropout_train_statistics), T(test_dropout_train_noncontiguous_f64),
        T(test_dropout_calls_draw_different_masks), T(test_sdpa_dropout_statistics), T(test_flags),
        T(test_infer_on_meta_tensors), T(test_layer_norm_bf16_with_f32_params)};
    /* the op registry's schemas live for the whole process: parse them
     * before the per-test leak accounting starts */
    if (tp_ops_init() != TP_OK) {
        fprintf(stderr, "tp_ops_init failed: %s\n", tp_last_error());
        return 1;
    }
    return tp_test_run(tests, sizeof tests / sizeof tests[0], argc, argv);
}
