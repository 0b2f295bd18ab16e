/*
 * test_export_symbolic.c - symbolic dynamic-shape export: constraints that
 * replaying shape inference at probe sizes misses (a product that must be
 * divisible by 6 while every one-symbol probe passes, slice bounds that
 * clamp silently at small sizes), divisibility fresh dims, conv output sizes
 * that refine a range, matmul inner dims, cat sizes (three symbols), the
 * per-node "sym_shape" meta, the replay fallback note for a node without a
 * symbolic rule, the replay cross-check option, and the rules of tile,
 * rot90, movedim, unflatten, cumprod, repeat_interleave, argsort,
 * take_along_dim, count_nonzero, roll, new_zeros, hstack and vstack, and of
 * the indexed updates, scatters and strided views.
 */
#include <string.h>

#include "test_util.h"
#include "tpexport/export.h"

static tp_tensor *tensor_of(int ndim, const int64_t *sizes) {
    tp_tensor *t = NULL;
    tp_tensor_empty(TP_FLOAT32, ndim, sizes, &t);
    float *d = tp_tensor_data(t);
    for (int64_t i = 0; i < tp_tensor_numel(t); i++) d[i] = 0.5f * (float)(i % 7);
    return t;
}

static tp_module *model(tp_forward_fn fn, int n, const char *const *names) {
    tp_module *m = NULL;
    tp_module_new("M", &m);
    tp_forward_decl d = {fn, n, names, NULL, NULL};
    tp_module_set_forward(m, &d);
    return m;
}

static const char *const X[] = {"x"};
static const char *const XY[] = {"x", "y"};
static const char *const XYZ[] = {"x", "y", "z"};

/* Call p on one input of the given shape; returns the status. */
static tp_status call1(tp_program *p, int nd, const int64_t *sizes) {
    tp_value a = tp_value_tensor(tensor_of(nd, sizes)), r = tp_value_none();
    tp_status st = tp_program_call(p, &a, 1, NULL, &r);
    tp_value_clear(&r);
    tp_value_clear(&a);
    return st;
}

static const char *node_sym_shape(const tp_program *p, tp_op op) {
    for (tp_node *n = tp_graph_first_node(tp_program_graph(p)); n; n = tp_node_next(n))
        if (tp_node_get_kind(n) == TP_NODE_CALL_FUNCTION && tp_node_op(n) == op) return tp_node_meta_get_str(n, "sym_shape");
    return NULL;
}

/* ---- divisibility -------------------------------------------------------------------- */

static tp_status reshape6_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    return tp_return(ctx, tp_reshape(ctx, tp_arg(ctx, &args[0]), 2, (int64_t[]){-1, 6}), out);
}

/* x: [a, b] reshaped to [-1, 6] needs a*b divisible by 6. At the example
 * (6, 6) moving a or b alone by any step keeps a*b divisible by 6, so the
 * replay's probes all pass; the symbolic rule sees the product. */
TEST(test_product_divisibility_missed_by_probes) {
    tp_module *m = model(reshape6_fwd, 1, X);
    tp_value x = tp_value_tensor(tensor_of(2, (int64_t[]){6, 6}));
    tp_shapes *s = NULL;
    tp_shapes_new(&s);
    tp_shapes_dim(s, "a", 2, 64);
    tp_shapes_dim(s, "b", 2, 64);
    tp_shapes_set(s, "x", 0, "a");
    tp_shapes_set(s, "x", 1, "b");
    tp_export_options o = {0};
    o.dynamic_shapes = s;
    tp_program *p = NULL;
    CHECK_STATUS(tp_export(m, &x, 1, NULL, &o, &p), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("Constraints violated (b)");
    CHECK_ERR_CONTAINS("must be divisible by 6");
    CHECK_ERR_CONTAINS("Suggested fixes:\n    b = 6");
    char *msg = tp_strdup(tp_last_error());
    CHECK_OK(tp_shapes_apply_fixes(s, msg));
    tp_free(msg);
    CHECK_OK(tp_export(m, &x, 1, NULL, &o, &p));
    if (p) {
        CHECK_OK(call1(p, 2, (int64_t[]){7, 6}));
        CHECK_STATUS(call1(p, 2, (int64_t[]){7, 7}), TP_ERR_CONSTRAINT);
        CHECK(node_sym_shape(p, TP_OP_RESHAPE) && strcmp(node_sym_shape(p, TP_OP_RESHAPE), "[a, 6]") == 0);
    }
    tp_program_free(p);
    tp_shapes_free(s);
    /* Dim.AUTO: specialised silently; the program refuses 7x7 up front */
    tp_shapes_new(&s);
    tp_shapes_set(s, "x", 0, "auto");
    tp_shapes_set(s, "x", 1, "auto");
    o.dynamic_shapes = s;
    p = NULL;
    CHECK_OK(tp_export(m, &x, 1, NULL, &o, &p));
    if (p) {
        CHECK_OK(call1(p, 2, (int64_t[]){5, 6}));
        CHECK_STATUS(call1(p, 2, (int64_t[]){7, 7}), TP_ERR_CONSTRAINT);
    }
    tp_program_free(p);
    tp_shapes_free(s);
    tp_value_clear(&x);
    tp_module_free(m);
}

static tp_status reshape12_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    return tp_return(ctx, tp_reshape(ctx, tp_arg(ctx, &args[0]), 2, (int64_t[]){-1, 12}), out);
}

TEST(test_divisibility_by_6_fresh_dim) {
    tp_module *m = model(reshape12_fwd, 1, X);
    tp_value x = tp_value_tensor(tensor_of(2, (int64_t[]){6, 2}));
    tp_shapes *s = NULL;
    tp_shapes_new(&s);
    tp_shapes_dim(s, "n", 2, 64);
    tp_shapes_set(s, "x", 0, "n");
    tp_export_options o = {0};
    o.dynamic_shapes = s;
    tp_program *p = NULL;
    CHECK_STATUS(tp_export(m, &x, 1, NULL, &o, &p), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("to be a multiple of 6");
    CHECK_ERR_CONTAINS("_n = Dim('_n', min=1, max=10)\n    n = 6*_n");
    char *msg = tp_strdup(tp_last_error());
    CHECK_OK(tp_shapes_apply_fixes(s, msg));
    tp_free(msg);
    CHECK_OK(tp_export(m, &x, 1, NULL, &o, &p));
    if (p) {
        CHECK_OK(call1(p, 2, (int64_t[]){12, 2}));
        CHECK_STATUS(call1(p, 2, (int64_t[]){8, 2}), TP_ERR_CONSTRAINT);
        CHECK_MSG(node_sym_shape(p, TP_OP_RESHAPE) && strcmp(node_sym_shape(p, TP_OP_RESHAPE), "[_n, 12]") == 0, "%s",
                  node_sym_shape(p, TP_OP_RESHAPE));
    }
    tp_program_free(p);
    tp_shapes_free(s);
    /* AUTO: recorded as a derived dim instead of a static one */
    tp_shapes_new(&s);
    tp_shapes_set(s, "x", 0, "auto");
    o.dynamic_shapes = s;
    p = NULL;
    CHECK_OK(tp_export(m, &x, 1, NULL, &o, &p));
    if (p) {
        const tp_dim_rule *r = tp_program_num_dim_rules(p) == 1 ? tp_program_dim_rule(p, 0) : NULL;
        CHECK(r && r->kind == TP_DIM_DERIVED && r->scale == 6 && r->offset == 0);
        CHECK_OK(call1(p, 2, (int64_t[]){18, 2}));
        CHECK_STATUS(call1(p, 2, (int64_t[]){9, 2}), TP_ERR_CONSTRAINT);
    }
    tp_program_free(p);
    tp_shapes_free(s);
    tp_value_clear(&x);
    tp_module_free(m);
}

/* ---- conv output sizes ------------------------------------------------------------------ */

static tp_status conv_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_t *w = tp_state(ctx, self, "w");
    tp_value a[4] = {tp_v(tp_arg(ctx, &args[0])), tp_v(w), tp_value_none(), tp_ints(ctx, 1, (int64_t[]){3})};
    return tp_return(ctx, tp_call(ctx, TP_OP_CONV1D, a, 4, NULL), out);
}

TEST(test_conv_output_size_refines_range) {
    tp_module *m = model(conv_fwd, 1, X);
    tp_tensor *w = tensor_of(3, (int64_t[]){2, 1, 5});
    tp_module_register(m, TP_STATE_PARAMETER, "w", w, true);
    tp_tensor_free(w);
    tp_value x = tp_value_tensor(tensor_of(3, (int64_t[]){1, 1, 20}));
    tp_shapes *s = NULL;
    tp_shapes_new(&s);
    tp_shapes_dim(s, "L", 2, 64);
    tp_shapes_set(s, "x", 2, "L");
    tp_export_options o = {0};
    o.dynamic_shapes = s;
    tp_program *p = NULL;
    CHECK_STATUS(tp_export(m, &x, 1, NULL, &o, &p), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("the model requires L in [5, 64]");
    CHECK_ERR_CONTAINS("Suggested fixes:\n    L = Dim('L', min=5, max=64)");
    char *msg = tp_strdup(tp_last_error());
    CHECK_OK(tp_shapes_apply_fixes(s, msg));
    tp_free(msg);
    o.replay_check = true; /* the replay agrees */
    CHECK_OK(tp_export(m, &x, 1, NULL, &o, &p));
    if (p) {
        const char *ss = node_sym_shape(p, TP_OP_CONV1D);
        CHECK_MSG(ss && strcmp(ss, "[1, 2, (L + 1)//3 - 1]") == 0, "%s", ss ? ss : "(null)");
        CHECK_OK(call1(p, 3, (int64_t[]){1, 1, 5}));
        CHECK_OK(call1(p, 3, (int64_t[]){1, 1, 33}));
        CHECK_STATUS(call1(p, 3, (int64_t[]){1, 1, 4}), TP_ERR_CONSTRAINT);
    }
    tp_program_free(p);
    tp_shapes_free(s);
    tp_value_clear(&x);
    tp_module_free(m);
}

/* ---- slice bounds ------------------------------------------------------------------------- */

static tp_status slice_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_value a[4] = {tp_v(tp_arg(ctx, &args[0])), tp_value_int(1), tp_value_int(2), tp_value_int(8)};
    return tp_return(ctx, tp_call(ctx, TP_OP_SLICE, a, 4, NULL), out);
}

/* x[:, 2:8] has 6 columns only while n >= 8; below, the slice clamps and
 * shape inference still passes (a narrower result), so probing misses it. */
TEST(test_slice_bounds_relative_to_symbol) {
    tp_module *m = model(slice_fwd, 1, X);
    tp_value x = tp_value_tensor(tensor_of(2, (int64_t[]){3, 10}));
    tp_shapes *s = NULL;
    tp_shapes_new(&s);
    tp_shapes_dim(s, "n", 2, 64);
    tp_shapes_set(s, "x", 1, "n");
    tp_export_options o = {0};
    o.dynamic_shapes = s;
    tp_program *p = NULL;
    CHECK_STATUS(tp_export(m, &x, 1, NULL, &o, &p), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("slice end within the dim");
    CHECK_ERR_CONTAINS("Suggested fixes:\n    n = Dim('n', min=8, max=64)");
    char *msg = tp_strdup(tp_last_error());
    CHECK_OK(tp_shapes_apply_fixes(s, msg));
    tp_free(msg);
    CHECK_OK(tp_export(m, &x, 1, NULL, &o, &p));
    if (p) {
        CHECK(node_sym_shape(p, TP_OP_SLICE) && strcmp(node_sym_shape(p, TP_OP_SLICE), "[3, 6]") == 0);
        CHECK_STATUS(call1(p, 2, (int64_t[]){3, 5}), TP_ERR_CONSTRAINT);
        CHECK_OK(call1(p, 2, (int64_t[]){3, 8}));
    }
    tp_program_free(p);
    tp_shapes_free(s);
    tp_value_clear(&x);
    tp_module_free(m);
}

/* ---- matmul inner dims, cat sizes ------------------------------------------------------------ */

static tp_status mm_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    return tp_return(ctx, tp_matmul(ctx, tp_arg(ctx, &args[0]), tp_arg(ctx, &args[1])), out);
}

TEST(test_matmul_inner_dims_tie) {
    tp_module *m = model(mm_fwd, 2, XY);
    tp_value xy[2] = {tp_value_tensor(tensor_of(2, (int64_t[]){3, 4})), tp_value_tensor(tensor_of(2, (int64_t[]){4, 5}))};
    tp_shapes *s = NULL;
    tp_shapes_new(&s);
    tp_shapes_set(s, "x", 0, "b");
    tp_shapes_set(s, "x", 1, "k");
    tp_shapes_set(s, "y", 0, "j");
    tp_export_options o = {0};
    o.dynamic_shapes = s;
    tp_program *p = NULL;
    CHECK_STATUS(tp_export(m, xy, 2, NULL, &o, &p), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("Constraints violated (j)");
    CHECK_ERR_CONTAINS("matrix inner dims");
    CHECK_ERR_CONTAINS("Suggested fixes:\n    j = k");
    char *msg = tp_strdup(tp_last_error());
    CHECK_OK(tp_shapes_apply_fixes(s, msg));
    tp_free(msg);
    CHECK_OK(tp_export(m, xy, 2, NULL, &o, &p));
    if (p) {
        CHECK(node_sym_shape(p, TP_OP_MATMUL) && strcmp(node_sym_shape(p, TP_OP_MATMUL), "[b, 5]") == 0);
        CHECK(tp_program_num_equalities(p) == 1);
    }
    tp_program_free(p);
    tp_shapes_free(s);
    tp_value_clear(&xy[0]);
    tp_value_clear(&xy[1]);
    tp_module_free(m);
}

static tp_status cat_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_t *xs[2] = {tp_arg(ctx, &args[0]), tp_arg(ctx, &args[1])};
    return tp_return(ctx, tp_add(ctx, tp_cat(ctx, 2, xs, 0), tp_arg(ctx, &args[2])), out);
}

/* cat([x, y]) + z: p == n + m. A dim rule relates one dim to one symbol, so
 * one of the three is specialised and the other two tied. */
TEST(test_cat_sizes_three_symbols) {
    tp_module *m = model(cat_fwd, 3, XYZ);
    tp_value v[3] = {tp_value_tensor(tensor_of(2, (int64_t[]){3, 2})), tp_value_tensor(tensor_of(2, (int64_t[]){4, 2})),
                     tp_value_tensor(tensor_of(2, (int64_t[]){7, 2}))};
    tp_shapes *s = NULL;
    tp_shapes_new(&s);
    tp_shapes_set(s, "x", 0, "n");
    tp_shapes_set(s, "y", 0, "m");
    tp_shapes_set(s, "z", 0, "p");
    tp_export_options o = {0};
    o.dynamic_shapes = s;
    tp_program *p = NULL;
    CHECK_STATUS(tp_export(m, v, 3, NULL, &o, &p), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("m = 4");
    CHECK_ERR_CONTAINS("p = n + 4");
    char *msg = tp_strdup(tp_last_error());
    CHECK_OK(tp_shapes_apply_fixes(s, msg));
    tp_free(msg);
    CHECK_OK(tp_export(m, v, 3, NULL, &o, &p));
    if (p) {
        tp_value a[3] = {tp_value_tensor(tensor_of(2, (int64_t[]){5, 2})), tp_value_tensor(tensor_of(2, (int64_t[]){4, 2})),
                         tp_value_tensor(tensor_of(2, (int64_t[]){9, 2}))};
        tp_value r = tp_value_none();
        CHECK_OK(tp_program_call(p, a, 3, NULL, &r));
        tp_value_clear(&r);
        tp_value_clear(&a[2]);
        a[2] = tp_value_tensor(tensor_of(2, (int64_t[]){8, 2}));
        CHECK_STATUS(tp_program_call(p, a, 3, NULL, &r), TP_ERR_CONSTRAINT);
        for (int i = 0; i < 3; i++) tp_value_clear(&a[i]);
    }
    tp_program_free(p);
    tp_shapes_free(s);
    for (int i = 0; i < 3; i++) tp_value_clear(&v[i]);
    tp_module_free(m);
}

/* ---- meta, fallback, cross-check ------------------------------------------------------------ */

static tp_status flat_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_t *f = tp_flatten(ctx, x, 0, -1);
    tp_t *r = tp_reshape(ctx, f, 2, (int64_t[]){-1, 2});
    return tp_return(ctx, tp_sum(ctx, tp_softmax(ctx, r, 1)), out);
}

TEST(test_sym_shape_meta) {
    tp_module *m = model(flat_fwd, 1, X);
    tp_value x = tp_value_tensor(tensor_of(3, (int64_t[]){3, 4, 5}));
    tp_shapes *s = NULL;
    tp_shapes_new(&s);
    tp_shapes_set(s, "x", 0, "auto");
    tp_shapes_set(s, "x", 2, "auto");
    tp_export_options o = {0};
    o.dynamic_shapes = s;
    o.replay_check = true;
    tp_program *p = NULL;
    CHECK_OK(tp_export(m, &x, 1, NULL, &o, &p));
    if (p) {
        const char *f = node_sym_shape(p, TP_OP_FLATTEN), *r = node_sym_shape(p, TP_OP_RESHAPE);
        CHECK_MSG(f && strcmp(f, "[4*s0*s1]") == 0, "%s", f ? f : "(null)");
        CHECK_MSG(r && strcmp(r, "[2*s0*s1, 2]") == 0, "%s", r ? r : "(null)");
        CHECK(node_sym_shape(p, TP_OP_SUM) && strcmp(node_sym_shape(p, TP_OP_SUM), "[]") == 0);
        CHECK_OK(call1(p, 3, (int64_t[]){7, 4, 9}));
    }
    tp_program_free(p);
    tp_shapes_free(s);
    tp_value_clear(&x);
    tp_module_free(m);
}

/* An op's expected symbolic shape text. */
typedef struct want_shape {
    tp_op op;
    const char *shape;
} want_shape;

/* Draft-export fwd on x (the given sizes, dim 0 "auto"): no failure, no
 * node without a symbolic rule, each want[i]'s node with its shape; then
 * export and call at call_sizes. */
static void check_rules(tp_forward_fn fwd, int nd, const int64_t *sizes, const want_shape *want, size_t n_want,
                        const int64_t *call_sizes) {
    tp_module *m = model(fwd, 1, X);
    tp_value x = tp_value_tensor(tensor_of(nd, sizes));
    tp_shapes *s = NULL;
    tp_shapes_new(&s);
    tp_shapes_set(s, "x", 0, "auto");
    tp_export_options o = {0};
    o.dynamic_shapes = s;
    tp_program *p = NULL;
    tp_draft_report rep;
    CHECK_OK(tp_draft_export(m, &x, 1, NULL, &o, &p, &rep));
    CHECK(p != NULL && rep.n_failures == 0);
    CHECK_MSG(!rep.notes || !strstr(rep.notes, "symbolic shapes"), "%s", rep.notes);
    for (size_t i = 0; p && i < n_want; i++) {
        const char *got = node_sym_shape(p, want[i].op);
        CHECK_MSG(got && strcmp(got, want[i].shape) == 0, "%s: %s", tp_op_name(want[i].op), got ? got : "(null)");
    }
    tp_draft_report_free(&rep);
    tp_program_free(p);
    p = NULL;
    CHECK_OK(tp_export(m, &x, 1, NULL, &o, &p));
    if (p) CHECK_OK(call1(p, nd, call_sizes));
    tp_program_free(p);
    tp_shapes_free(s);
    tp_value_clear(&x);
    tp_module_free(m);
}

/* tile, rot90, movedim, unflatten, cumprod, repeat_interleave, argsort,
 * take_along_dim, count_nonzero, roll, new_zeros, hstack and vstack on
 * x [s0, 6]. */
static tp_status shape_ops_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_t *t = tp_call(ctx, TP_OP_TILE, (tp_value[]){tp_v(x), tp_ints(ctx, 1, (int64_t[]){2})}, 2, NULL);
    tp_t *r = tp_call(ctx, TP_OP_ROT90, (tp_value[]){tp_v(t)}, 1, NULL);
    tp_t *m = tp_call(ctx, TP_OP_MOVEDIM, (tp_value[]){tp_v(r), tp_value_int(0), tp_value_int(1)}, 3, NULL);
    tp_t *u = tp_call(ctx, TP_OP_UNFLATTEN,
                      (tp_value[]){tp_v(m), tp_value_int(1), tp_ints(ctx, 2, (int64_t[]){3, -1})}, 3, NULL);
    tp_t *c = tp_call(ctx, TP_OP_CUMPROD, (tp_value[]){tp_v(u), tp_value_int(2)}, 2, NULL);
    tp_t *ri = tp_call(ctx, TP_OP_REPEAT_INTERLEAVE, (tp_value[]){tp_v(c), tp_value_int(2), tp_value_int(0)}, 3, NULL);
    tp_t *as = tp_call(ctx, TP_OP_ARGSORT, (tp_value[]){tp_v(c), tp_value_int(1)}, 2, NULL);
    tp_t *tk = tp_call(ctx, TP_OP_TAKE_ALONG_DIM, (tp_value[]){tp_v(c), tp_v(as), tp_value_int(1)}, 3, NULL);
    tp_t *cn = tp_call(ctx, TP_OP_COUNT_NONZERO, (tp_value[]){tp_v(ri), tp_ints(ctx, 1, (int64_t[]){1})}, 2, NULL);
    tp_t *rl = tp_call(ctx, TP_OP_ROLL, (tp_value[]){tp_v(tk), tp_value_int(1)}, 2, NULL);
    tp_t *nz = tp_call(ctx, TP_OP_NEW_ZEROS, (tp_value[]){tp_v(rl), tp_ints(ctx, 1, (int64_t[]){2})}, 2, NULL);
    tp_value xs = tp_list(ctx, 2, (tp_t *[]){x, x});
    tp_t *hs = tp_call(ctx, TP_OP_HSTACK, &xs, 1, NULL);
    tp_t *vs = tp_call(ctx, TP_OP_VSTACK, &xs, 1, NULL);
    tp_t *s1 = tp_add(ctx, tp_add(ctx, tp_sum(ctx, rl), tp_sum(ctx, cn)),
                      tp_add(ctx, tp_sum(ctx, hs), tp_sum(ctx, vs)));
    return tp_return(ctx, tp_add(ctx, s1, tp_sum(ctx, nz)), out);
}

/* Symbolic rules of the shape ops added for tensorplay's functions: every
 * node gets its shape as an expression, none falls back to the replay. */
TEST(test_shape_ops_rules) {
    static const want_shape want[] = {{TP_OP_TILE, "[s0, 12]"},          {TP_OP_ROT90, "[12, s0]"},
                {TP_OP_MOVEDIM, "[s0, 12]"},       {TP_OP_UNFLATTEN, "[s0, 3, 4]"},
                {TP_OP_CUMPROD, "[s0, 3, 4]"},     {TP_OP_REPEAT_INTERLEAVE, "[2*s0, 3, 4]"},
                {TP_OP_ARGSORT, "[s0, 3, 4]"},     {TP_OP_TAKE_ALONG_DIM, "[s0, 3, 4]"},
                {TP_OP_COUNT_NONZERO, "[2*s0, 4]"}, {TP_OP_ROLL, "[s0, 3, 4]"},
                {TP_OP_NEW_ZEROS, "[2]"},          {TP_OP_HSTACK, "[s0, 12]"},
                {TP_OP_VSTACK, "[2*s0, 6]"}};
    check_rules(shape_ops_fwd, 2, (int64_t[]){3, 6}, want, sizeof want / sizeof want[0], (int64_t[]){5, 6});
}

/* The nn.functional ops of issue #13 on x [s0, 8, 2, 3]: pixel shuffles,
 * channel_shuffle, softmin, softsign, losses with reduction 'none' and
 * 'mean', cross_entropy with probabilities, cosine_similarity and
 * pairwise_distance, one_hot. */
static tp_status nnfunc_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    (void)self;
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_value none, mean;
    TP_TRY(tp_value_str("none", &none));
    TP_TRY(tp_value_str("mean", &mean));
    tp_t *ps = tp_call(ctx, TP_OP_PIXEL_SHUFFLE, (tp_value[]){tp_v(x), tp_value_int(2)}, 2, NULL);
    tp_t *pu = tp_call(ctx, TP_OP_PIXEL_UNSHUFFLE, (tp_value[]){tp_v(ps), tp_value_int(2)}, 2, NULL);
    tp_t *cs = tp_call(ctx, TP_OP_CHANNEL_SHUFFLE, (tp_value[]){tp_v(pu), tp_value_int(4)}, 2, NULL);
    tp_t *sm = tp_call(ctx, TP_OP_SOFTMIN, (tp_value[]){tp_v(cs), tp_value_int(1)}, 2, NULL);
    tp_t *ss = tp_call(ctx, TP_OP_SOFTSIGN, (tp_value[]){tp_v(sm)}, 1, NULL);
    tp_t *l1 = tp_call(ctx, TP_OP_MSE_LOSS, (tp_value[]){tp_v(ss), tp_v(x), none}, 3, NULL);
    tp_t *l2 = tp_call(ctx, TP_OP_L1_LOSS, (tp_value[]){tp_v(l1), tp_v(x), mean}, 3, NULL);
    tp_t *ce = tp_call(ctx, TP_OP_CROSS_ENTROPY, (tp_value[]){tp_v(x), tp_v(sm), tp_value_none(), none}, 4, NULL);
    tp_t *co = tp_call(ctx, TP_OP_COSINE_SIMILARITY, (tp_value[]){tp_v(x), tp_v(ss), tp_value_int(1)}, 3, NULL);
    tp_t *pd = tp_call(ctx, TP_OP_PAIRWISE_DISTANCE, (tp_value[]){tp_v(x), tp_v(ss)}, 2, NULL);
    tp_t *as = tp_call(ctx, TP_OP_ARGSORT, (tp_value[]){tp_v(x), tp_value_int(1)}, 2, NULL);
    tp_t *oh = tp_call(ctx, TP_OP_ONE_HOT, (tp_value[]){tp_v(as), tp_value_int(8)}, 2, NULL);
    tp_t *ohs = tp_call(ctx, TP_OP_TO, (tp_value[]){tp_v(oh), tp_value_dtype(TP_FLOAT32)}, 2, NULL);
    tp_value_clear(&none);
    tp_value_clear(&mean);
    tp_t *s1 = tp_add(ctx, tp_sum(ctx, ce), tp_sum(ctx, co));
    tp_t *s2 = tp_add(ctx, tp_add(ctx, s1, tp_sum(ctx, pd)), tp_sum(ctx, ohs));
    return tp_return(ctx, tp_add(ctx, s2, l2), out);
}

TEST(test_nnfunc_ops_rules) {
    static const want_shape want[] = {{TP_OP_PIXEL_SHUFFLE, "[s0, 2, 4, 6]"}, {TP_OP_PIXEL_UNSHUFFLE, "[s0, 8, 2, 3]"},
                {TP_OP_CHANNEL_SHUFFLE, "[s0, 8, 2, 3]"}, {TP_OP_SOFTMIN, "[s0, 8, 2, 3]"},
                {TP_OP_SOFTSIGN, "[s0, 8, 2, 3]"},       {TP_OP_MSE_LOSS, "[s0, 8, 2, 3]"},
                {TP_OP_L1_LOSS, "[]"},                   {TP_OP_CROSS_ENTROPY, "[s0, 2, 3]"},
                {TP_OP_COSINE_SIMILARITY, "[s0, 2, 3]"}, {TP_OP_PAIRWISE_DISTANCE, "[s0, 8, 2]"},
                {TP_OP_ONE_HOT, "[s0, 8, 2, 3, 8]"}};
    check_rules(nnfunc_fwd, 4, (int64_t[]){3, 8, 2, 3}, want, sizeof want / sizeof want[0], (int64_t[]){5, 8, 2, 3});
}

/* The ops added for issue #13 after nnfunc on x [s0, 8, 4, 6]: lp_pool2d,
 * max_unpool2d, im2col / col2im, pdist, dist, bucketize, angle, entr,
 * triplet_margin_loss and multilabel_soft_margin_loss ('none'). */
static tp_status nnmore_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    (void)self;
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_value none;
    TP_TRY(tp_value_str("none", &none));
    tp_t *lp = tp_call(ctx, TP_OP_LP_POOL2D,
                       (tp_value[]){tp_v(x), tp_value_float(2.0), tp_ints(ctx, 2, (int64_t[]){2, 2}), tp_value_none(),
                                    tp_value_bool(false)},
                       5, NULL);
    tp_t *idx = tp_call(ctx, TP_OP_TO, (tp_value[]){tp_v(tp_mul_scalar(ctx, lp, 0.0)), tp_value_dtype(TP_INT64)}, 2, NULL);
    tp_t *up = tp_call(ctx, TP_OP_MAX_UNPOOL2D, (tp_value[]){tp_v(lp), tp_v(idx), tp_ints(ctx, 2, (int64_t[]){2, 2})}, 3,
                       NULL);
    tp_t *ic = tp_call(ctx, TP_OP_IM2COL,
                       (tp_value[]){tp_v(up), tp_ints(ctx, 2, (int64_t[]){2, 2}), tp_ints(ctx, 2, (int64_t[]){1, 1}),
                                    tp_ints(ctx, 2, (int64_t[]){0, 0}), tp_ints(ctx, 2, (int64_t[]){2, 2})},
                       5, NULL);
    tp_t *ci = tp_call(ctx, TP_OP_COL2IM,
                       (tp_value[]){tp_v(ic), tp_ints(ctx, 2, (int64_t[]){4, 6}), tp_ints(ctx, 2, (int64_t[]){2, 2}),
                                    tp_ints(ctx, 2, (int64_t[]){1, 1}), tp_ints(ctx, 2, (int64_t[]){0, 0}),
                                    tp_ints(ctx, 2, (int64_t[]){2, 2})},
                       6, NULL);
    tp_t *f = tp_flatten(ctx, ci, 1, -1);
    tp_t *pd = tp_call(ctx, TP_OP_PDIST, (tp_value[]){tp_v(f), tp_value_float(2.0)}, 2, NULL);
    tp_t *di = tp_call(ctx, TP_OP_DIST, (tp_value[]){tp_v(x), tp_v(ci)}, 2, NULL);
    tp_t *bk = tp_call(ctx, TP_OP_BUCKETIZE, (tp_value[]){tp_v(x), tp_v(pd)}, 2, NULL);
    tp_t *an = tp_call(ctx, TP_OP_ANGLE, (tp_value[]){tp_v(x)}, 1, NULL);
    tp_t *en = tp_call(ctx, TP_OP_ENTR, (tp_value[]){tp_v(an)}, 1, NULL);
    tp_t *tr = tp_call(ctx, TP_OP_TRIPLET_MARGIN_LOSS,
                       (tp_value[]){tp_v(f), tp_v(f), tp_v(f), tp_value_float(1.0), tp_value_float(2.0),
                                    tp_value_float(1e-6), tp_value_bool(false), none},
                       8, NULL);
    tp_t *ml = tp_call(ctx, TP_OP_MULTILABEL_SOFT_MARGIN_LOSS, (tp_value[]){tp_v(f), tp_v(f), tp_value_none(), none},
                       4, NULL);
    tp_value_clear(&none);
    tp_t *bkf = tp_call(ctx, TP_OP_TO, (tp_value[]){tp_v(bk), tp_value_dtype(TP_FLOAT32)}, 2, NULL);
    tp_t *s1 = tp_add(ctx, tp_add(ctx, tp_sum(ctx, pd), di), tp_add(ctx, tp_sum(ctx, bkf), tp_sum(ctx, en)));
    return tp_return(ctx, tp_add(ctx, s1, tp_add(ctx, tp_sum(ctx, tr), tp_sum(ctx, ml))), out);
}

TEST(test_nnmore_ops_rules) {
    static const want_shape want[] = {{TP_OP_LP_POOL2D, "[s0, 8, 2, 3]"}, {TP_OP_MAX_UNPOOL2D, "[s0, 8, 4, 6]"},
                {TP_OP_IM2COL, "[s0, 32, 6]"},    {TP_OP_COL2IM, "[s0, 8, 4, 6]"},
                {TP_OP_PDIST, "[(s0*s0 - s0)//2]"}, {TP_OP_DIST, "[]"},
                {TP_OP_BUCKETIZE, "[s0, 8, 4, 6]"}, {TP_OP_ANGLE, "[s0, 8, 4, 6]"},
                {TP_OP_ENTR, "[s0, 8, 4, 6]"},    {TP_OP_TRIPLET_MARGIN_LOSS, "[s0]"},
                {TP_OP_MULTILABEL_SOFT_MARGIN_LOSS, "[s0]"}};
    check_rules(nnmore_fwd, 4, (int64_t[]){3, 8, 4, 6}, want, sizeof want / sizeof want[0], (int64_t[]){5, 8, 4, 6});
}

/* Shape rules written over tp_sdim (src/ops/dim.h) of nn.c's ops the other
 * tests do not export on a dynamic dim, on x [s0, 4, 6]: log_softmax,
 * dropout and alpha_dropout (eval), instance_norm, local_response_norm,
 * prelu, glu, rms_norm, gru_cell and rnn_tanh_cell (hidden = input),
 * bilinear, and conv_tbc with time s0. */
static tp_t *ones_of(tp_ctx *ctx, int nd, const int64_t *sizes) {
    return tp_call(ctx, TP_OP_ONES, (tp_value[]){tp_ints(ctx, nd, sizes)}, 1, NULL);
}

static tp_status nndim_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    (void)self;
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_t *ls = tp_call(ctx, TP_OP_LOG_SOFTMAX, (tp_value[]){tp_v(x), tp_value_int(1)}, 2, NULL);
    tp_t *dr = tp_call(ctx, TP_OP_DROPOUT, (tp_value[]){tp_v(ls), tp_value_float(0.5), tp_value_bool(false)}, 3, NULL);
    tp_t *ad =
        tp_call(ctx, TP_OP_ALPHA_DROPOUT, (tp_value[]){tp_v(dr), tp_value_float(0.5), tp_value_bool(false)}, 3, NULL);
    tp_t *in = tp_call(ctx, TP_OP_INSTANCE_NORM, (tp_value[]){tp_v(ad)}, 1, NULL);
    tp_t *lr = tp_call(ctx, TP_OP_LOCAL_RESPONSE_NORM, (tp_value[]){tp_v(in), tp_value_int(2)}, 2, NULL);
    tp_t *pr = tp_call(ctx, TP_OP_PRELU, (tp_value[]){tp_v(lr), tp_v(ones_of(ctx, 1, (int64_t[]){4}))}, 2, NULL);
    tp_t *gl = tp_call(ctx, TP_OP_GLU, (tp_value[]){tp_v(pr), tp_value_int(-1)}, 2, NULL);
    tp_t *rm = tp_call(ctx, TP_OP_RMS_NORM, (tp_value[]){tp_v(gl), tp_ints(ctx, 1, (int64_t[]){3})}, 2, NULL);
    tp_t *f = tp_flatten(ctx, rm, 1, -1); /* [s0, 12] */
    tp_t *gru = tp_call(ctx, TP_OP_GRU_CELL,
                        (tp_value[]){tp_v(f), tp_v(f), tp_v(ones_of(ctx, 2, (int64_t[]){36, 12})),
                                     tp_v(ones_of(ctx, 2, (int64_t[]){36, 12}))},
                        4, NULL);
    tp_t *rnn = tp_call(ctx, TP_OP_RNN_TANH_CELL,
                        (tp_value[]){tp_v(gru), tp_v(f), tp_v(ones_of(ctx, 2, (int64_t[]){12, 12})),
                                     tp_v(ones_of(ctx, 2, (int64_t[]){12, 12}))},
                        4, NULL);
    tp_t *bl = tp_call(ctx, TP_OP_BILINEAR,
                       (tp_value[]){tp_v(rnn), tp_v(f), tp_v(ones_of(ctx, 3, (int64_t[]){5, 12, 12}))}, 3, NULL);
    tp_t *tbc = tp_call(ctx, TP_OP_CONV_TBC,
                        (tp_value[]){tp_v(ad), tp_v(ones_of(ctx, 3, (int64_t[]){3, 6, 2})), tp_value_none(),
                                     tp_value_int(1)},
                        4, NULL);
    return tp_return(ctx, tp_add(ctx, tp_sum(ctx, bl), tp_sum(ctx, tbc)), out);
}

TEST(test_nn_dim_rules) {
    static const want_shape want[] = {{TP_OP_LOG_SOFTMAX, "[s0, 4, 6]"},   {TP_OP_DROPOUT, "[s0, 4, 6]"},
                {TP_OP_ALPHA_DROPOUT, "[s0, 4, 6]"}, {TP_OP_INSTANCE_NORM, "[s0, 4, 6]"},
                {TP_OP_LOCAL_RESPONSE_NORM, "[s0, 4, 6]"}, {TP_OP_PRELU, "[s0, 4, 6]"},
                {TP_OP_GLU, "[s0, 4, 3]"},           {TP_OP_RMS_NORM, "[s0, 4, 3]"},
                {TP_OP_GRU_CELL, "[s0, 12]"},        {TP_OP_RNN_TANH_CELL, "[s0, 12]"},
                {TP_OP_BILINEAR, "[s0, 5]"},         {TP_OP_CONV_TBC, "[s0, 4, 2]"}};
    check_rules(nndim_fwd, 3, (int64_t[]){3, 4, 6}, want, sizeof want / sizeof want[0], (int64_t[]){5, 4, 6});
}

/* pool.c's rules over tp_sdim on x [s0, 2, 8, 8]: the with_indices pools
 * (tuples), affine_grid over a symbolic size (tp_dim) and interpolate by a
 * scale along a dynamic dim. */
static tp_status pooldim_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    (void)self;
    tp_t *x = tp_arg(ctx, &args[0]), *mp[2] = {NULL, NULL}, *am[2] = {NULL, NULL};
    tp_call_multi(ctx, TP_OP_MAX_POOL2D_WITH_INDICES, (tp_value[]){tp_v(x), tp_ints(ctx, 2, (int64_t[]){2, 2})}, 2, NULL,
                  mp, 2);
    tp_call_multi(ctx, TP_OP_ADAPTIVE_MAX_POOL2D_WITH_INDICES,
                  (tp_value[]){tp_v(mp[0]), tp_ints(ctx, 2, (int64_t[]){3, 3})}, 2, NULL, am, 2);
    tp_t *f = tp_flatten(ctx, x, 1, -1); /* [s0, 128] */
    tp_t *sl =
        tp_call(ctx, TP_OP_SLICE, (tp_value[]){tp_v(f), tp_value_int(1), tp_value_int(0), tp_value_int(6)}, 4, NULL);
    tp_t *theta = tp_reshape(ctx, sl, 3, (int64_t[]){-1, 2, 3});
    tp_t *b = tp_dim(ctx, x, 0);
    tp_t *ag = tp_call(ctx, TP_OP_AFFINE_GRID,
                       (tp_value[]){tp_v(theta),
                                    tp_ints_sym(ctx, 4, (tp_t *[]){b, tp_int(ctx, 1), tp_int(ctx, 4), tp_int(ctx, 5)}),
                                    tp_value_bool(false)},
                       3, NULL);
    tp_t *tr = tp_call(ctx, TP_OP_TRANSPOSE, (tp_value[]){tp_v(f), tp_value_int(0), tp_value_int(1)}, 3, NULL);
    tp_t *un = tp_call(ctx, TP_OP_UNSQUEEZE, (tp_value[]){tp_v(tr), tp_value_int(0)}, 2, NULL); /* [1, 128, s0] */
    tp_value mode;
    TP_TRY(tp_value_str("nearest", &mode));
    tp_t *ip =
        tp_call(ctx, TP_OP_INTERPOLATE, (tp_value[]){tp_v(un), tp_value_none(), tp_value_float(2.0), mode}, 4, NULL);
    tp_value_clear(&mode);
    tp_t *s1 = tp_add(ctx, tp_sum(ctx, am[0]), tp_sum(ctx, ag));
    return tp_return(ctx, tp_add(ctx, s1, tp_sum(ctx, ip)), out);
}

TEST(test_pool_dim_rules) {
    static const want_shape want[] = {{TP_OP_MAX_POOL2D_WITH_INDICES, "([s0, 2, 4, 4], [s0, 2, 4, 4])"},
                {TP_OP_ADAPTIVE_MAX_POOL2D_WITH_INDICES, "([s0, 2, 3, 3], [s0, 2, 3, 3])"},
                {TP_OP_AFFINE_GRID, "[s0, 4, 5, 2]"},
                {TP_OP_INTERPOLATE, "[1, 128, 2*s0]"}};
    check_rules(pooldim_fwd, 4, (int64_t[]){3, 2, 8, 8}, want, sizeof want / sizeof want[0], (int64_t[]){5, 2, 8, 8});
}

/* loss.c's rules over tp_sdim on x [s0, 6] with reduction 'none': the
 * elementwise losses (gaussian_nll_loss with a var of x's shape without
 * the last dim), nll_loss with class indices, cosine_embedding_loss,
 * multi_margin_loss and multilabel_margin_loss. */
static tp_status lossdim_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    (void)self;
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_value none;
    TP_TRY(tp_value_str("none", &none));
    tp_value r0 = tp_value_int(0);
    tp_t *sg = tp_call(ctx, TP_OP_SIGMOID, (tp_value[]){tp_v(x)}, 1, NULL);
    tp_t *sel = tp_call(ctx, TP_OP_SELECT, (tp_value[]){tp_v(x), tp_value_int(1), tp_value_int(0)}, 3, NULL); /* [s0] */
    tp_t *am = tp_call(ctx, TP_OP_ARGMAX, (tp_value[]){tp_v(x), tp_value_int(1)}, 2, NULL);               /* [s0] */
    tp_t *ti = tp_call(ctx, TP_OP_TO, (tp_value[]){tp_v(x), tp_value_dtype(TP_INT64)}, 2, NULL);
    tp_t *l[14];
    l[0] = tp_call(ctx, TP_OP_SMOOTH_L1_LOSS, (tp_value[]){tp_v(x), tp_v(x), none, tp_value_float(1.0)}, 4, NULL);
    l[1] = tp_call(ctx, TP_OP_HUBER_LOSS, (tp_value[]){tp_v(x), tp_v(x), none, tp_value_float(1.0)}, 4, NULL);
    l[2] = tp_call(ctx, TP_OP_SOFT_MARGIN_LOSS, (tp_value[]){tp_v(x), tp_v(x), r0}, 3, NULL);
    l[3] = tp_call(ctx, TP_OP_KL_DIV, (tp_value[]){tp_v(x), tp_v(x), none, tp_value_bool(false)}, 4, NULL);
    l[4] = tp_call(ctx, TP_OP_BINARY_CROSS_ENTROPY, (tp_value[]){tp_v(sg), tp_v(sg), tp_value_none(), none}, 4, NULL);
    l[5] = tp_call(ctx, TP_OP_BINARY_CROSS_ENTROPY_WITH_LOGITS,
                   (tp_value[]){tp_v(x), tp_v(x), tp_value_none(), tp_value_none(), none}, 5, NULL);
    l[6] = tp_call(ctx, TP_OP_POISSON_NLL_LOSS,
                   (tp_value[]){tp_v(x), tp_v(x), tp_value_bool(true), tp_value_bool(false), tp_value_float(1e-8), r0},
                   6, NULL);
    l[7] = tp_call(ctx, TP_OP_GAUSSIAN_NLL_LOSS,
                   (tp_value[]){tp_v(x), tp_v(x), tp_v(sel), tp_value_bool(false), tp_value_float(1e-6), none}, 6,
                   NULL);
    l[8] = tp_call(ctx, TP_OP_MARGIN_RANKING_LOSS, (tp_value[]){tp_v(x), tp_v(x), tp_v(x), tp_value_float(0.0), r0}, 5,
                   NULL);
    l[9] = tp_call(ctx, TP_OP_HINGE_EMBEDDING_LOSS, (tp_value[]){tp_v(x), tp_v(x), tp_value_float(1.0), r0}, 4, NULL);
    l[10] = tp_call(ctx, TP_OP_NLL_LOSS, (tp_value[]){tp_v(x), tp_v(am), tp_value_none(), none, tp_value_int(-100)}, 5,
                    NULL);
    l[11] = tp_call(ctx, TP_OP_COSINE_EMBEDDING_LOSS, (tp_value[]){tp_v(x), tp_v(x), tp_v(sel), tp_value_float(0.0), r0},
                    5, NULL);
    l[12] = tp_call(ctx, TP_OP_MULTI_MARGIN_LOSS,
                    (tp_value[]){tp_v(x), tp_v(am), tp_value_int(1), tp_value_int(1), tp_value_none(), none}, 6, NULL);
    l[13] = tp_call(ctx, TP_OP_MULTILABEL_MARGIN_LOSS, (tp_value[]){tp_v(x), tp_v(ti), none}, 3, NULL);
    tp_value_clear(&none);
    tp_t *acc = tp_sum(ctx, l[0]);
    for (int i = 1; i < 14; i++) acc = tp_add(ctx, acc, tp_sum(ctx, l[i]));
    return tp_return(ctx, acc, out);
}

TEST(test_loss_dim_rules) {
    static const want_shape want[] = {{TP_OP_SMOOTH_L1_LOSS, "[s0, 6]"},
                {TP_OP_HUBER_LOSS, "[s0, 6]"},
                {TP_OP_SOFT_MARGIN_LOSS, "[s0, 6]"},
                {TP_OP_KL_DIV, "[s0, 6]"},
                {TP_OP_BINARY_CROSS_ENTROPY, "[s0, 6]"},
                {TP_OP_BINARY_CROSS_ENTROPY_WITH_LOGITS, "[s0, 6]"},
                {TP_OP_POISSON_NLL_LOSS, "[s0, 6]"},
                {TP_OP_GAUSSIAN_NLL_LOSS, "[s0, 6]"},
                {TP_OP_MARGIN_RANKING_LOSS, "[s0, 6]"},
                {TP_OP_HINGE_EMBEDDING_LOSS, "[s0, 6]"},
                {TP_OP_NLL_LOSS, "[s0]"},
                {TP_OP_COSINE_EMBEDDING_LOSS, "[s0]"},
                {TP_OP_MULTI_MARGIN_LOSS, "[s0]"},
                {TP_OP_MULTILABEL_MARGIN_LOSS, "[s0]"}};
    check_rules(lossdim_fwd, 2, (int64_t[]){3, 6}, want, sizeof want / sizeof want[0], (int64_t[]){5, 6});
}

/* linalg.c's rules over tp_sdim on x [s0, 3]: the matrix and vector
 * products, cross, kron, inner, trace, and the factorisations and solves on
 * the positive definite batch pd = x^T x + I of [s0, 3, 3]. */
static tp_t *call2(tp_ctx *ctx, tp_op op, tp_t *a, tp_t *b) {
    return tp_call(ctx, op, (tp_value[]){tp_v(a), tp_v(b)}, 2, NULL);
}

static tp_t *call3(tp_ctx *ctx, tp_op op, tp_t *a, tp_t *b, tp_t *c) {
    return tp_call(ctx, op, (tp_value[]){tp_v(a), tp_v(b), tp_v(c)}, 3, NULL);
}

static tp_status linalgdim_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    (void)self;
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_t *w = ones_of(ctx, 2, (int64_t[]){3, 4}), *v3 = ones_of(ctx, 1, (int64_t[]){3});
    tp_t *sel = tp_call(ctx, TP_OP_SELECT, (tp_value[]){tp_v(x), tp_value_int(1), tp_value_int(0)}, 3, NULL); /* [s0] */
    tp_t *xt = tp_call(ctx, TP_OP_TRANSPOSE, (tp_value[]){tp_v(x), tp_value_int(0), tp_value_int(1)}, 3, NULL);
    tp_t *x3 = tp_call(ctx, TP_OP_UNSQUEEZE, (tp_value[]){tp_v(x), tp_value_int(1)}, 2, NULL);  /* [s0, 1, 3] */
    tp_t *x3t = tp_call(ctx, TP_OP_UNSQUEEZE, (tp_value[]){tp_v(x), tp_value_int(2)}, 2, NULL); /* [s0, 3, 1] */
    tp_t *r[24];
    int n = 0;
    r[n++] = call2(ctx, TP_OP_MM, x, w);
    r[n++] = call3(ctx, TP_OP_ADDMM, ones_of(ctx, 1, (int64_t[]){4}), x, w);
    tp_t *bm = call2(ctx, TP_OP_BMM, x3, x3t);
    r[n++] = bm;
    r[n++] = call3(ctx, TP_OP_BADDBMM, bm, x3, x3t);
    r[n++] = call2(ctx, TP_OP_MV, xt, sel);
    r[n++] = call3(ctx, TP_OP_ADDMV, v3, xt, sel);
    r[n++] = call2(ctx, TP_OP_DOT, sel, sel);
    tp_t *ou = call2(ctx, TP_OP_OUTER, sel, v3);
    r[n++] = ou;
    r[n++] = call3(ctx, TP_OP_ADDR, ou, sel, v3);
    r[n++] = call3(ctx, TP_OP_ADDBMM, ones_of(ctx, 2, (int64_t[]){1, 1}), x3, x3t);
    r[n++] = tp_call(ctx, TP_OP_CROSS, (tp_value[]){tp_v(x), tp_v(x), tp_value_int(1)}, 3, NULL);
    r[n++] = call2(ctx, TP_OP_KRON, x, ones_of(ctx, 2, (int64_t[]){2, 2}));
    tp_t *in = call2(ctx, TP_OP_INNER, x, x);
    r[n++] = in;
    r[n++] = tp_call(ctx, TP_OP_TRACE, (tp_value[]){tp_v(in)}, 1, NULL);
    tp_t *eye = tp_call(ctx, TP_OP_EYE, (tp_value[]){tp_value_int(3)}, 1, NULL);
    tp_t *pd = tp_add(ctx, call2(ctx, TP_OP_BMM, x3t, x3), eye); /* [s0, 3, 3] */
    r[n++] = tp_call(ctx, TP_OP_INVERSE, (tp_value[]){tp_v(pd)}, 1, NULL);
    tp_t *ch = tp_call(ctx, TP_OP_CHOLESKY, (tp_value[]){tp_v(pd)}, 1, NULL);
    r[n++] = ch;
    r[n++] = tp_call(ctx, TP_OP_CHOLESKY_INVERSE, (tp_value[]){tp_v(ch)}, 1, NULL);
    tp_t *piv = tp_call(ctx, TP_OP_TO,
                        (tp_value[]){tp_v(tp_call(ctx, TP_OP_ONES_LIKE, (tp_value[]){tp_v(x)}, 1, NULL)),
                                     tp_value_dtype(TP_INT32)},
                        2, NULL); /* [s0, 3] pivots of 1 */
    r[n++] = call3(ctx, TP_OP_LU_SOLVE, x3t, pd, piv);
    tp_t *qr[2] = {NULL, NULL};
    tp_call_multi(ctx, TP_OP_GEQRF, (tp_value[]){tp_v(pd)}, 1, NULL, qr, 2);
    r[n++] = qr[0];
    r[n++] = call2(ctx, TP_OP_ORGQR, qr[0], qr[1]);
    r[n++] = call3(ctx, TP_OP_ORMQR, qr[0], qr[1], pd);
    tp_t *acc = tp_sum(ctx, r[0]);
    for (int i = 1; i < n; i++) acc = tp_add(ctx, acc, tp_sum(ctx, r[i]));
    return tp_return(ctx, acc, out);
}

TEST(test_linalg_dim_rules) {
    static const want_shape want[] = {{TP_OP_MM, "[s0, 4]"},
                {TP_OP_ADDMM, "[s0, 4]"},
                {TP_OP_BMM, "[s0, 1, 1]"},
                {TP_OP_BADDBMM, "[s0, 1, 1]"},
                {TP_OP_MV, "[3]"},
                {TP_OP_ADDMV, "[3]"},
                {TP_OP_DOT, "[]"},
                {TP_OP_OUTER, "[s0, 3]"},
                {TP_OP_ADDR, "[s0, 3]"},
                {TP_OP_ADDBMM, "[1, 1]"},
                {TP_OP_CROSS, "[s0, 3]"},
                {TP_OP_KRON, "[2*s0, 6]"},
                {TP_OP_INNER, "[s0, s0]"},
                {TP_OP_TRACE, "[]"},
                {TP_OP_INVERSE, "[s0, 3, 3]"},
                {TP_OP_CHOLESKY, "[s0, 3, 3]"},
                {TP_OP_CHOLESKY_INVERSE, "[s0, 3, 3]"},
                {TP_OP_LU_SOLVE, "[s0, 3, 1]"},
                {TP_OP_GEQRF, "([s0, 3, 3], [s0, 3])"},
                {TP_OP_ORGQR, "[s0, 3, 3]"},
                {TP_OP_ORMQR, "[s0, 3, 3]"}};
    check_rules(linalgdim_fwd, 2, (int64_t[]){4, 3}, want, sizeof want / sizeof want[0], (int64_t[]){6, 3});
}

/* grid_sample, affine_grid and det on x [s0, 2, 4, 4] (dynamic batch):
 * sample x at a grid made from x itself (permuted to [s0, 4, 4, 2], cut to
 * 3 rows, squashed by tanh), an affine grid of 3 x 5 points, and the
 * determinants of x's 4 x 4 planes. */
static tp_status sample_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    (void)self;
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_t *pm = tp_call(ctx, TP_OP_PERMUTE, (tp_value[]){tp_v(x), tp_ints(ctx, 4, (int64_t[]){0, 2, 3, 1})}, 2, NULL);
    tp_t *sl = tp_call(ctx, TP_OP_SLICE, (tp_value[]){tp_v(pm), tp_value_int(1), tp_value_int(0), tp_value_int(3)}, 4, NULL);
    tp_t *g = tp_call(ctx, TP_OP_TANH, (tp_value[]){tp_v(sl)}, 1, NULL);
    tp_value mode, pad;
    TP_TRY(tp_value_str("bilinear", &mode));
    TP_TRY(tp_value_str("zeros", &pad));
    tp_t *gs = tp_call(ctx, TP_OP_GRID_SAMPLE, (tp_value[]){tp_v(x), tp_v(g), mode, pad, tp_value_bool(false)}, 5, NULL);
    tp_value_clear(&mode); /* tp_call copies its arguments */
    tp_value_clear(&pad);
    tp_t *theta = tp_call(ctx, TP_OP_TANH, (tp_value[]){tp_v(tp_call(ctx, TP_OP_SLICE,
                                                                     (tp_value[]){tp_v(g), tp_value_int(0), tp_value_int(0),
                                                                                  tp_value_int(1)},
                                                                     4, NULL))},
                          1, NULL); /* [1, 3, 4, 2] */
    tp_t *th = tp_call(ctx, TP_OP_SLICE, (tp_value[]){tp_v(tp_flatten(ctx, theta, 0, -1)), tp_value_int(0), tp_value_int(0),
                                                     tp_value_int(6)},
                       4, NULL);
    tp_t *ag = tp_call(ctx, TP_OP_AFFINE_GRID,
                       (tp_value[]){tp_v(tp_call(ctx, TP_OP_RESHAPE, (tp_value[]){tp_v(th), tp_ints(ctx, 3, (int64_t[]){1, 2, 3})}, 2,
                                                  NULL)),
                                    tp_ints(ctx, 4, (int64_t[]){1, 2, 3, 5}), tp_value_bool(false)},
                       3, NULL);
    tp_t *d = tp_call(ctx, TP_OP_DET, (tp_value[]){tp_v(x)}, 1, NULL);
    return tp_return(ctx, tp_add(ctx, tp_add(ctx, tp_sum(ctx, gs), tp_sum(ctx, ag)), tp_sum(ctx, d)), out);
}

TEST(test_sample_ops_rules) {
    static const want_shape want[] = {{TP_OP_GRID_SAMPLE, "[s0, 2, 3, 4]"}, {TP_OP_AFFINE_GRID, "[1, 3, 5, 2]"}, {TP_OP_DET, "[s0, 2]"}};
    check_rules(sample_fwd, 4, (int64_t[]){3, 2, 4, 4}, want, sizeof want / sizeof want[0], (int64_t[]){5, 2, 4, 4});
}

/* The indexed updates, scatters and strided views on x [s0, 4] (dynamic
 * batch): index_add along dim 1 (index: argsort's first row), scatter_reduce
 * at argsort's indices, index_fill, masked_scatter, select_scatter (src
 * x[:, 0]), unfold along the batch, histc, searchsorted (boundaries: x's
 * first row) and nonzero_static. */
static tp_status idxscat_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    (void)self;
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_t *as = tp_call(ctx, TP_OP_ARGSORT, (tp_value[]){tp_v(x), tp_value_int(1)}, 2, NULL);
    tp_t *row = tp_call(ctx, TP_OP_SELECT, (tp_value[]){tp_v(as), tp_value_int(0), tp_value_int(0)}, 3, NULL);
    tp_t *ia = tp_call(ctx, TP_OP_INDEX_ADD, (tp_value[]){tp_v(x), tp_value_int(1), tp_v(row), tp_v(x)}, 4, NULL);
    tp_value amax;
    TP_TRY(tp_value_str("amax", &amax));
    tp_t *sr = tp_call(ctx, TP_OP_SCATTER_REDUCE, (tp_value[]){tp_v(x), tp_value_int(1), tp_v(as), tp_v(ia), amax}, 5,
                       NULL);
    tp_value_clear(&amax);
    tp_t *fi = tp_call(ctx, TP_OP_INDEX_FILL, (tp_value[]){tp_v(sr), tp_value_int(1), tp_v(row), tp_value_float(2.0)}, 4,
                       NULL);
    tp_t *mk = tp_call(ctx, TP_OP_GT, (tp_value[]){tp_v(x), tp_value_float(1.0)}, 2, NULL);
    tp_t *ms = tp_call(ctx, TP_OP_MASKED_SCATTER, (tp_value[]){tp_v(fi), tp_v(mk), tp_v(ia)}, 3, NULL);
    tp_t *c0 = tp_call(ctx, TP_OP_SELECT, (tp_value[]){tp_v(x), tp_value_int(1), tp_value_int(0)}, 3, NULL);
    tp_t *ss = tp_call(ctx, TP_OP_SELECT_SCATTER, (tp_value[]){tp_v(ms), tp_v(c0), tp_value_int(1), tp_value_int(2)}, 4,
                       NULL);
    tp_t *uf = tp_call(ctx, TP_OP_UNFOLD, (tp_value[]){tp_v(ss), tp_value_int(0), tp_value_int(2), tp_value_int(1)}, 4,
                       NULL);
    tp_t *hc = tp_call(ctx, TP_OP_HISTC, (tp_value[]){tp_v(x), tp_value_int(7)}, 2, NULL);
    tp_t *b = tp_call(ctx, TP_OP_SELECT, (tp_value[]){tp_v(x), tp_value_int(0), tp_value_int(0)}, 3, NULL);
    tp_t *sc = tp_call(ctx, TP_OP_SEARCHSORTED, (tp_value[]){tp_v(b), tp_v(x)}, 2, NULL);
    tp_t *scf = tp_call(ctx, TP_OP_TO, (tp_value[]){tp_v(sc), tp_value_dtype(TP_FLOAT32)}, 2, NULL);
    tp_value kw, five = tp_value_int(5);
    TP_TRY(tp_value_dict(&kw));
    TP_TRY(tp_value_dict_set(&kw, "size", &five));
    tp_t *nz = tp_call(ctx, TP_OP_NONZERO_STATIC, (tp_value[]){tp_v(x)}, 1, &kw);
    tp_value_clear(&kw);
    tp_t *nzf = tp_call(ctx, TP_OP_TO, (tp_value[]){tp_v(nz), tp_value_dtype(TP_FLOAT32)}, 2, NULL);
    tp_t *s1 = tp_add(ctx, tp_add(ctx, tp_sum(ctx, uf), tp_sum(ctx, hc)), tp_sum(ctx, scf));
    return tp_return(ctx, tp_add(ctx, s1, tp_sum(ctx, nzf)), out);
}

TEST(test_idxscat_ops_rules) {
    static const want_shape want[] = {{TP_OP_INDEX_ADD, "[s0, 4]"},      {TP_OP_SCATTER_REDUCE, "[s0, 4]"},   {TP_OP_INDEX_FILL, "[s0, 4]"},
                {TP_OP_MASKED_SCATTER, "[s0, 4]"}, {TP_OP_SELECT_SCATTER, "[s0, 4]"},
                {TP_OP_UNFOLD, "[s0 - 1, 4, 2]"},  {TP_OP_HISTC, "[7]"},                {TP_OP_SEARCHSORTED, "[s0, 4]"},
                {TP_OP_NONZERO_STATIC, "[5, 2]"}};
    check_rules(idxscat_fwd, 2, (int64_t[]){3, 4}, want, sizeof want / sizeof want[0], (int64_t[]){6, 4});
}

static tp_status pool_ceil_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_value a[6] = {tp_v(tp_arg(ctx, &args[0])), tp_ints(ctx, 2, (int64_t[]){2, 2}), tp_ints(ctx, 2, (int64_t[]){2, 2}),
                     tp_ints(ctx, 2, (int64_t[]){0, 0}), tp_ints(ctx, 2, (int64_t[]){1, 1}), tp_value_bool(true)};
    return tp_return(ctx, tp_relu(ctx, tp_call(ctx, TP_OP_MAX_POOL2D, a, 6, NULL)), out);
}

/* ceil_mode's last-window rule has no symbolic form here: the node and the
 * nodes after it fall back to the replay check, and the report says so. */
TEST(test_fallback_to_replay_is_reported) {
    tp_module *m = model(pool_ceil_fwd, 1, X);
    tp_value x = tp_value_tensor(tensor_of(4, (int64_t[]){1, 1, 7, 6}));
    tp_shapes *s = NULL;
    tp_shapes_new(&s);
    tp_shapes_set(s, "x", 2, "auto");
    tp_export_options o = {0};
    o.dynamic_shapes = s;
    tp_program *p = NULL;
    tp_draft_report rep;
    CHECK_OK(tp_draft_export(m, &x, 1, NULL, &o, &p, &rep));
    CHECK(p != NULL && rep.n_failures == 0);
    CHECK_MSG(rep.notes && strstr(rep.notes, "max_pool2d (max_pool2d)") && strstr(rep.notes, "relu (relu)"), "%s",
              rep.notes ? rep.notes : "(null)");
    if (p) CHECK(node_sym_shape(p, TP_OP_MAX_POOL2D) && strcmp(node_sym_shape(p, TP_OP_MAX_POOL2D), "?") == 0);
    char *text = NULL;
    CHECK_OK(tp_draft_report_to_string(&rep, &text));
    CHECK(text && strstr(text, "note: symbolic shapes:"));
    tp_free(text);
    tp_draft_report_free(&rep);
    tp_program_free(p);
    p = NULL;
    CHECK_OK(tp_export(m, &x, 1, NULL, &o, &p));
    if (p) CHECK_OK(call1(p, 4, (int64_t[]){1, 1, 9, 6}));
    tp_program_free(p);
    tp_shapes_free(s);
    tp_value_clear(&x);
    tp_module_free(m);
}

/* The issue #13 linear-algebra, statistics and special-function ops on x
 * [s0, 3, 3] (dynamic batch): each node's symbolic shape. */
static tp_status linalg_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    (void)self;
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_t *x2 = tp_call(ctx, TP_OP_SLICE, (tp_value[]){tp_v(x), tp_value_int(2), tp_value_int(0), tp_value_int(2)}, 4,
                       NULL); /* [s0, 3, 2] */
    tp_t *x1 = tp_call(ctx, TP_OP_SLICE, (tp_value[]){tp_v(x), tp_value_int(2), tp_value_int(0), tp_value_int(1)}, 4,
                       NULL); /* [s0, 3, 1] */
    tp_t *r[10];
    r[0] = tp_call(ctx, TP_OP_MATRIX_POWER, (tp_value[]){tp_v(x), tp_value_int(2)}, 2, NULL);
    r[1] = tp_call(ctx, TP_OP_MATRIX_EXP, (tp_value[]){tp_v(tp_call(ctx, TP_OP_TANH, (tp_value[]){tp_v(x)}, 1, NULL))},
                   1, NULL);
    r[2] = tp_call(ctx, TP_OP_PINVERSE, (tp_value[]){tp_v(x2), tp_value_float(1e-15)}, 2, NULL);
    r[3] = tp_call(ctx, TP_OP_LOGDET, (tp_value[]){tp_v(x)}, 1, NULL);
    r[4] = tp_call(ctx, TP_OP_SLOGDET, (tp_value[]){tp_v(x)}, 1, NULL);
    r[5] = tp_call(ctx, TP_OP_TRIANGULAR_SOLVE,
                   (tp_value[]){tp_v(x2), tp_v(x), tp_value_bool(true), tp_value_bool(false), tp_value_bool(false)}, 5,
                   NULL);
    r[6] = tp_call(ctx, TP_OP_CHOLESKY_SOLVE, (tp_value[]){tp_v(x1), tp_v(x), tp_value_bool(false)}, 3, NULL);
    r[7] = tp_call(ctx, TP_OP_QUANTILE, (tp_value[]){tp_v(x), tp_value_float(0.5), tp_value_int(1), tp_value_bool(false)},
                   4, NULL);
    r[8] = tp_call(ctx, TP_OP_NDTR, (tp_value[]){tp_v(x)}, 1, NULL);
    r[9] = tp_call(ctx, TP_OP_IGAMMA, (tp_value[]){tp_v(x), tp_v(x)}, 2, NULL);
    tp_t *acc = tp_sum(ctx, r[0]);
    for (int i = 1; i < 10; i++) acc = tp_add(ctx, acc, tp_sum(ctx, r[i]));
    return tp_return(ctx, acc, out);
}

TEST(test_linalg_stats_special_rules) {
    static const want_shape want[] = {{TP_OP_MATRIX_POWER, "[s0, 3, 3]"},
                {TP_OP_MATRIX_EXP, "[s0, 3, 3]"},
                {TP_OP_PINVERSE, "[s0, 2, 3]"},
                {TP_OP_LOGDET, "[s0]"},
                {TP_OP_SLOGDET, "([s0], [s0])"},
                {TP_OP_TRIANGULAR_SOLVE, "([s0, 3, 2], [s0, 3, 3])"},
                {TP_OP_CHOLESKY_SOLVE, "[s0, 3, 1]"},
                {TP_OP_QUANTILE, "[s0, 3]"},
                {TP_OP_NDTR, "[s0, 3, 3]"},
                {TP_OP_IGAMMA, "[s0, 3, 3]"}};
    check_rules(linalg_fwd, 3, (int64_t[]){3, 3, 3}, want, sizeof want / sizeof want[0], (int64_t[]){5, 3, 3});
}

TEST_MAIN(T(test_product_divisibility_missed_by_probes), T(test_divisibility_by_6_fresh_dim),
          T(test_conv_output_size_refines_range), T(test_slice_bounds_relative_to_symbol),
          T(test_matmul_inner_dims_tie), T(test_cat_sizes_three_symbols), T(test_sym_shape_meta),
          T(test_fallback_to_replay_is_reported), T(test_shape_ops_rules), T(test_nnfunc_ops_rules), T(test_nnmore_ops_rules),
          T(test_sample_ops_rules), T(test_idxscat_ops_rules), T(test_linalg_stats_special_rules),
          T(test_nn_dim_rules), T(test_pool_dim_rules), T(test_loss_dim_rules),
          T(test_linalg_dim_rules))
