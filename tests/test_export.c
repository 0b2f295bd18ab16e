/*
 * test_export.c - export() in C: lifted names and order, persistent and
 * non-persistent buffers, constants, defaults replayed from examples,
 * mutations of state / inputs / container elements, data-dependence
 * capture errors, dynamic-shape specs (errors, equality, ranges, derived
 * dims, discovered constraints, suggested fixes), draft export, module call
 * graph and unflatten, several entry points sharing state, state dicts.
 * Expected names and messages mirror tensorplay's export (see
 * tests/fixtures/gen_export.py for what the reference prints).
 */
#include <string.h>

#include "test_util.h"
#include "tpexport/archive.h"
#include "tpexport/export.h"
#include "tpexport/nn.h"

/* ---- helpers ------------------------------------------------------------------ */

static tp_tensor *tensor_of(int ndim, const int64_t *sizes, float start) {
    tp_tensor *t = NULL;
    tp_tensor_empty(TP_FLOAT32, ndim, sizes, &t);
    float *d = tp_tensor_data(t);
    for (int64_t i = 0; i < tp_tensor_numel(t); i++) d[i] = start + 0.25f * (float)i;
    return t;
}

static tp_tensor *t2(int64_t a, int64_t b, float start) { return tensor_of(2, (int64_t[]){a, b}, start); }

static const char *placeholder_name(const tp_program *p, int i) {
    return tp_node_name(tp_graph_placeholder_at(tp_program_graph(p), i));
}

static tp_module *simple_model(const char *type, tp_forward_fn fn, int n, const char *const *names) {
    tp_module *m = NULL;
    tp_module_new(type, &m);
    tp_forward_decl d = {fn, n, names, NULL, NULL};
    tp_module_set_forward(m, &d);
    return m;
}

static tp_tensor *out_tensor(const tp_value *v) { return v->kind == TP_VAL_TENSOR ? v->u.tensor : NULL; }

/* ---- the reference example: buffers, constant, child Linear ----------------------- */

static tp_status example_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_t *stats = tp_buffer(ctx, self, "stats");
    tp_add_scalar_(ctx, stats, 1);
    tp_t *y = tp_forward(ctx, tp_module_child(self, "linear"), x);
    y = tp_mul(ctx, y, tp_const(ctx, self, "scale_const"));
    y = tp_add(ctx, tp_add(ctx, y, stats), tp_buffer(ctx, self, "tmp"));
    return tp_return(ctx, y, out);
}

static tp_module *example_model(void) {
    static const char *const names[] = {"x"};
    tp_module *m = NULL, *lin = NULL;
    tp_rng rng;
    tp_rng_seed(&rng, 1);
    tp_module_new("M", &m);
    tp_forward_decl d = {example_fwd, 1, names, NULL, NULL};
    CHECK_OK(tp_module_set_forward(m, &d));
    CHECK_OK(tp_nn_linear(&rng, 3, 2, true, &lin));
    tp_tensor *z = NULL, *o = NULL, *tmp = NULL;
    tp_tensor_zeros(TP_FLOAT32, 1, (int64_t[]){2}, &z);
    tp_tensor_zeros(TP_FLOAT32, 1, (int64_t[]){2}, &tmp);
    tp_tensor_zeros(TP_FLOAT32, 1, (int64_t[]){2}, &o);
    tp_tensor_fill(o, 2.0);
    CHECK_OK(tp_module_register(m, TP_STATE_BUFFER, "stats", z, true));
    CHECK_OK(tp_module_add_child(m, "linear", lin));
    CHECK_OK(tp_module_register(m, TP_STATE_BUFFER, "tmp", tmp, false));
    CHECK_OK(tp_module_register(m, TP_STATE_CONSTANT, "scale_const", o, true));
    tp_tensor_free(z);
    tp_tensor_free(o);
    tp_tensor_free(tmp);
    return m;
}

TEST(test_lifted_names_and_order) {
    tp_module *m = example_model();
    tp_value x = tp_value_tensor(t2(4, 3, -1.0f));
    tp_program *p = NULL;
    CHECK_OK(tp_export(m, &x, 1, NULL, NULL, &p));
    if (p) {
        /* the reference: b_stats, b_tmp, c_scale_const, p_linear_weight, p_linear_bias, x */
        static const char *const want[] = {"b_stats", "b_tmp", "c_scale_const", "p_linear_weight", "p_linear_bias", "x"};
        CHECK(tp_graph_num_placeholders(tp_program_graph(p)) == 6);
        for (int i = 0; i < 6; i++) CHECK_MSG(strcmp(placeholder_name(p, i), want[i]) == 0, "%d: %s", i, placeholder_name(p, i));
        const tp_signature *sig = tp_program_signature(p);
        CHECK(tp_signature_input(sig, 0)->kind == TP_INPUT_BUFFER && tp_signature_input(sig, 0)->persistent == TP_PERSISTENT_YES);
        CHECK(tp_signature_input(sig, 1)->kind == TP_INPUT_BUFFER && tp_signature_input(sig, 1)->persistent == TP_PERSISTENT_NO);
        CHECK(tp_signature_input(sig, 2)->kind == TP_INPUT_CONSTANT_TENSOR);
        CHECK(strcmp(tp_signature_input(sig, 2)->target, "scale_const") == 0);
        CHECK(tp_signature_input(sig, 3)->kind == TP_INPUT_PARAMETER);
        CHECK(strcmp(tp_signature_input(sig, 3)->target, "linear.weight") == 0);
        CHECK(tp_signature_input(sig, 5)->kind == TP_INPUT_USER_INPUT);
        /* the mutation comes first */
        CHECK(tp_signature_n_outputs(sig) == 2);
        CHECK(tp_signature_output(sig, 0)->kind == TP_OUTPUT_BUFFER_MUTATION);
        CHECK(strcmp(tp_signature_output(sig, 0)->target, "stats") == 0);
        CHECK(tp_signature_output(sig, 1)->kind == TP_OUTPUT_USER_OUTPUT);
        /* state dict: parameters and persistent buffers only */
        tp_named_state sd;
        CHECK_OK(tp_program_named_state(p, TP_FILTER_STATE_DICT, &sd));
        bool has_tmp = false;
        for (int i = 0; i < sd.n; i++) has_tmp |= strcmp(sd.items[i].name, "tmp") == 0;
        CHECK(!has_tmp);
        tp_named_state_free(&sd);
    }
    tp_program_free(p);
    tp_value_clear(&x);
    tp_module_free(m);
}

TEST(test_accumulator_matches_eager) {
    /* two identical models: one run eagerly, one through its program */
    tp_module *eager = example_model(), *m = example_model();
    tp_value x = tp_value_tensor(t2(4, 3, 0.5f));
    tp_program *p = NULL;
    CHECK_OK(tp_export(m, &x, 1, NULL, NULL, &p));
    tp_tensor *stats_m = NULL, *stats_e = NULL;
    tp_module_get_state(m, "stats", &stats_m, NULL, NULL);
    tp_module_get_state(eager, "stats", &stats_e, NULL, NULL);
    CHECK(tp_tensor_item_f64(stats_m, 0) == 0.0); /* exporting does not run the model */
    for (int call = 1; p && call <= 3; call++) {
        tp_value a = tp_value_none(), b = tp_value_none();
        CHECK_OK(tp_module_run(eager, NULL, &x, 1, NULL, &a));
        CHECK_OK(tp_program_call(p, &x, 1, NULL, &b));
        CHECK_CLOSE(out_tensor(&b), out_tensor(&a), 0, 0);
        CHECK(tp_tensor_item_f64(stats_m, 0) == (double)call);
        CHECK(tp_tensor_item_f64(stats_e, 0) == (double)call);
        tp_value_clear(&a);
        tp_value_clear(&b);
    }
    tp_program_free(p);
    tp_value_clear(&x);
    tp_module_free(m);
    tp_module_free(eager);
}

/* a tensor made outside the module tree and used by the forward */
static tp_tensor *g_offset;
static tp_status const_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    return tp_return(ctx, tp_add(ctx, tp_arg(ctx, &args[0]), tp_constant(ctx, g_offset)), out);
}

TEST(test_lifted_constant) {
    static const char *const names[] = {"x"};
    tp_module *m = simple_model("Const", const_fwd, 1, names);
    g_offset = t2(1, 3, 5.0f);
    tp_value x = tp_value_tensor(t2(2, 3, 0.0f));
    tp_program *p = NULL;
    CHECK_OK(tp_export(m, &x, 1, NULL, NULL, &p));
    if (p) {
        CHECK(strcmp(placeholder_name(p, 0), "c_lifted_tensor_0") == 0 && strcmp(placeholder_name(p, 1), "x") == 0);
        CHECK(tp_signature_input(tp_program_signature(p), 0)->kind == TP_INPUT_CONSTANT_TENSOR);
        tp_value a = tp_value_none(), b = tp_value_none();
        CHECK_OK(tp_module_run(m, NULL, &x, 1, NULL, &a));
        CHECK_OK(tp_program_call(p, &x, 1, NULL, &b));
        CHECK_CLOSE(out_tensor(&b), out_tensor(&a), 0, 0);
        tp_value_clear(&a);
        tp_value_clear(&b);
    }
    tp_program_free(p);
    tp_tensor_free(g_offset);
    tp_value_clear(&x);
    tp_module_free(m);
}

/* ---- keyword arguments with defaults ---------------------------------------------- */

static tp_status kw_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_t *y = args[1].kind == TP_VAL_NONE ? x : tp_arg(ctx, &args[1]);
    double scale = tp_value_as_f64(&args[2]);
    return tp_return(ctx, tp_mul_scalar(ctx, tp_add(ctx, x, y), scale), out);
}

TEST(test_kwargs_defaults_replayed) {
    static const char *const names[] = {"x", "y", "scale"};
    tp_value defs[3] = {tp_value_none(), tp_value_none(), tp_value_float(2.0)};
    bool has[3] = {false, true, true};
    tp_module *m = NULL;
    tp_module_new("Kw", &m);
    tp_forward_decl d = {kw_fwd, 3, names, defs, has};
    CHECK_OK(tp_module_set_forward(m, &d));
    tp_value x = tp_value_tensor(t2(2, 2, 1.0f));
    tp_value kw = tp_value_none();
    tp_value_dict(&kw);
    tp_value y = tp_value_tensor(t2(2, 2, 10.0f));
    tp_value_dict_set(&kw, "y", &y);
    tp_program *p = NULL;
    CHECK_OK(tp_export(m, &x, 1, &kw, NULL, &p));
    if (p) {
        CHECK(tp_graph_num_placeholders(tp_program_graph(p)) == 3);
        CHECK(strcmp(placeholder_name(p, 1), "y") == 0);
        CHECK(strcmp(placeholder_name(p, 2), "scale") == 0);
        /* omitting y replays the example y; eager with the same y agrees */
        tp_value got = tp_value_none(), want = tp_value_none();
        tp_value x2 = tp_value_tensor(t2(2, 2, -3.0f));
        CHECK_OK(tp_program_call(p, &x2, 1, NULL, &got));
        tp_value ev[2] = {x2, *tp_value_dict_get(&kw, "y")};
        CHECK_OK(tp_module_run(m, NULL, ev, 2, NULL, &want));
        CHECK_CLOSE(out_tensor(&got), out_tensor(&want), 0, 0);
        tp_value_clear(&got);
        tp_value_clear(&want);
        tp_value_clear(&x2);
        /* an unknown keyword is refused */
        tp_value bad = tp_value_none();
        tp_value_dict(&bad);
        tp_value one = tp_value_int(1);
        tp_value_dict_set(&bad, "z", &one);
        CHECK_STATUS(tp_program_call(p, &x, 1, &bad, &got), TP_ERR_INVALID_ARG);
        tp_value_clear(&bad);
    }
    /* eager binding errors */
    tp_value r = tp_value_none();
    CHECK_STATUS(tp_module_run(m, NULL, NULL, 0, NULL, &r), TP_ERR_MISSING);
    CHECK_ERR_CONTAINS("missing required argument 'x'");
    tp_program_free(p);
    tp_value_clear(&x);
    tp_value_clear(&kw);
    tp_module_free(m);
}

/* ---- data dependence --------------------------------------------------------------- */

static int branch_line;
static tp_status branch_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_t *x = tp_arg(ctx, &args[0]);
    branch_line = __LINE__ + 1;
    if (tp_to_bool(ctx, tp_gt_scalar(ctx, tp_sum(ctx, x), 0.0))) return tp_return(ctx, x, out);
    return tp_return(ctx, tp_neg(ctx, x), out);
}


TEST(test_data_dependent_branch) {
    static const char *const names[] = {"x"};
    tp_module *m = simple_model("Branch", branch_fwd, 1, names);
    tp_value x = tp_value_tensor(t2(2, 3, 1.0f));
    tp_value r = tp_value_none();
    CHECK_OK(tp_module_run(m, NULL, &x, 1, NULL, &r)); /* eagerly it is fine */
    tp_value_clear(&r);
    tp_program *p = NULL;
    CHECK_STATUS(tp_export(m, &x, 1, NULL, NULL, &p), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("data-dependent");
    CHECK_ERR_CONTAINS("'gt'");
    char site[64];
    snprintf(site, sizeof site, "test_export.c:%d", branch_line);
    CHECK_ERR_CONTAINS(site);
    CHECK(p == NULL);
    tp_value_clear(&x);
    tp_module_free(m);
}

/* ---- dynamic shapes ------------------------------------------------------------------ */

static tp_status add_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    return tp_return(ctx, tp_add(ctx, tp_arg(ctx, &args[0]), tp_arg(ctx, &args[1])), out);
}

static const char *const XY[] = {"x", "y"};

TEST(test_dynamic_shapes_spec_errors) {
    tp_module *m = simple_model("Add", add_fwd, 2, XY);
    /* give the module state: positional specs count user inputs only */
    tp_tensor *w = t2(1, 1, 0.0f);
    tp_module_register(m, TP_STATE_PARAMETER, "w", w, true);
    tp_tensor_free(w);
    tp_value xy[2] = {tp_value_tensor(t2(4, 3, 0.0f)), tp_value_tensor(t2(4, 3, 1.0f))};
    tp_shapes *s = NULL;
    tp_program *p = NULL;
    CHECK_OK(tp_shapes_new(&s));
    CHECK_OK(tp_shapes_set(s, "z", 0, "batch"));
    tp_export_options o = {0};
    o.dynamic_shapes = s;
    CHECK_STATUS(tp_export(m, xy, 2, NULL, &o, &p), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("dynamic_shapes key 'z' does not match any argument; expected one of ['x', 'y']");
    tp_shapes_free(s);
    /* wrong spec types */
    tp_shapes_new(&s);
    CHECK_STATUS(tp_shapes_set(s, "x", 0, "3.5"), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("dimension spec must be int or Dim");
    CHECK_STATUS(tp_shapes_set(s, "x", -1, "batch"), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("dimension index must be a non-negative int");
    /* conflicting definitions of one name */
    CHECK_OK(tp_shapes_dim(s, "batch", 2, 8));
    CHECK_STATUS(tp_shapes_dim(s, "batch", 1, 8), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("found conflicting definitions for symbolic dimension 'batch'");
    /* static size mismatch; position "1" is y (the parameter does not shift it) */
    CHECK_OK(tp_shapes_set(s, "1", 1, "4"));
    o.dynamic_shapes = s;
    CHECK_STATUS(tp_export(m, xy, 2, NULL, &o, &p), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("input size 3 of dimension 1 at dynamic_shapes['1'] does not match the expected static size 4");
    tp_shapes_free(s);
    /* range violation of the example, with a fix */
    tp_shapes_new(&s);
    tp_shapes_dim(s, "a", 5, TP_DIM_UNBOUNDED);
    tp_shapes_set(s, "x", 0, "a");
    tp_shapes_set(s, "y", 0, "a");
    o.dynamic_shapes = s;
    CHECK_STATUS(tp_export(m, xy, 2, NULL, &o, &p), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("input size 4 of dimension 0 at dynamic_shapes['x'] violates a(min=5). Suggested fixes:\n    a = Dim('a', min=4)");
    char *msg = tp_strdup(tp_last_error());
    CHECK_OK(tp_shapes_apply_fixes(s, msg));
    tp_free(msg);
    CHECK_OK(tp_export(m, xy, 2, NULL, &o, &p));
    tp_program_free(p);
    tp_shapes_free(s);
    tp_value_clear(&xy[0]);
    tp_value_clear(&xy[1]);
    tp_module_free(m);
}

TEST(test_shared_dim_equality_and_range) {
    tp_module *m = simple_model("Add", add_fwd, 2, XY);
    tp_value xy[2] = {tp_value_tensor(t2(4, 3, 0.0f)), tp_value_tensor(t2(4, 3, 1.0f))};
    tp_shapes *s = NULL;
    tp_shapes_new(&s);
    CHECK_OK(tp_shapes_dim(s, "batch", 2, 8));
    CHECK_OK(tp_shapes_set(s, "x", 0, "batch"));
    CHECK_OK(tp_shapes_set(s, "y", 0, "batch"));
    tp_export_options o = {0};
    o.dynamic_shapes = s;
    tp_program *p = NULL;
    CHECK_OK(tp_export(m, xy, 2, NULL, &o, &p));
    if (p) {
        CHECK(tp_program_num_equalities(p) == 1);
        const tp_equality_constraint *e = tp_program_equality(p, 0);
        CHECK(e->n_sites == 2 && strcmp(e->sites[0].input, "x") == 0 && strcmp(e->sites[1].input, "y") == 0);
        CHECK(e->name && strcmp(e->name, "batch") == 0);
        const tp_range_constraint *r = tp_program_find_range(p, "batch");
        CHECK(r && r->min == 2 && r->max == 8);
        /* in range: works at other sizes */
        for (int64_t n = 2; n <= 8; n += 3) {
            tp_value a[2] = {tp_value_tensor(t2(n, 3, 0.0f)), tp_value_tensor(t2(n, 3, 1.0f))};
            tp_value r2 = tp_value_none();
            CHECK_OK(tp_program_call(p, a, 2, NULL, &r2));
            CHECK(out_tensor(&r2) && tp_tensor_size(out_tensor(&r2), 0) == n);
            tp_value_clear(&r2);
            tp_value_clear(&a[0]);
            tp_value_clear(&a[1]);
        }
        /* out of range / unequal */
        tp_value a[2] = {tp_value_tensor(t2(9, 3, 0.0f)), tp_value_tensor(t2(9, 3, 1.0f))};
        tp_value r2 = tp_value_none();
        CHECK_STATUS(tp_program_call(p, a, 2, NULL, &r2), TP_ERR_CONSTRAINT);
        CHECK_ERR_CONTAINS("batch <= 8");
        tp_value_clear(&a[1]);
        a[1] = tp_value_tensor(t2(5, 3, 1.0f));
        tp_value_clear(&a[0]);
        a[0] = tp_value_tensor(t2(6, 3, 1.0f));
        CHECK_STATUS(tp_program_call(p, a, 2, NULL, &r2), TP_ERR_CONSTRAINT);
        tp_value_clear(&a[0]);
        tp_value_clear(&a[1]);
    }
    tp_program_free(p);
    tp_shapes_free(s);
    tp_value_clear(&xy[0]);
    tp_value_clear(&xy[1]);
    tp_module_free(m);
}

static tp_status sums_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_t *x = tp_arg(ctx, &args[0]), *y = tp_arg(ctx, &args[1]);
    return tp_return(ctx, tp_add(ctx, tp_sum(ctx, x), tp_sum(ctx, y)), out);
}

TEST(test_derived_dim_enforced) {
    tp_module *m = simple_model("Sums", sums_fwd, 2, XY);
    tp_value xy[2] = {tp_value_tensor(t2(4, 3, 0.0f)), tp_value_tensor(t2(9, 3, 1.0f))};
    tp_shapes *s = NULL;
    tp_shapes_new(&s);
    tp_shapes_dim(s, "n", 2, 16);
    CHECK_OK(tp_shapes_set(s, "x", 0, "n"));
    CHECK_OK(tp_shapes_set(s, "y", 0, "2*n + 1"));
    tp_export_options o = {0};
    o.dynamic_shapes = s;
    tp_program *p = NULL;
    CHECK_OK(tp_export(m, xy, 2, NULL, &o, &p));
    if (p) {
        bool found = false;
        for (int i = 0; i < tp_program_num_dim_rules(p); i++) {
            const tp_dim_rule *r = tp_program_dim_rule(p, i);
            if (strcmp(r->site.input, "y") == 0 && r->kind == TP_DIM_DERIVED && r->scale == 2 && r->offset == 1)
                found = true;
        }
        CHECK(found);
        tp_value a[2] = {tp_value_tensor(t2(5, 3, 0.0f)), tp_value_tensor(t2(11, 3, 1.0f))};
        tp_value r = tp_value_none();
        CHECK_OK(tp_program_call(p, a, 2, NULL, &r));
        tp_value_clear(&r);
        tp_value_clear(&a[1]);
        a[1] = tp_value_tensor(t2(10, 3, 1.0f));
        CHECK_STATUS(tp_program_call(p, a, 2, NULL, &r), TP_ERR_CONSTRAINT);
        CHECK_ERR_CONTAINS("y.shape[0] = 10");
        tp_value_clear(&a[0]);
        tp_value_clear(&a[1]);
    }
    char *text = NULL;
    CHECK_OK(tp_shapes_to_string(s, &text));
    CHECK_MSG(text && strcmp(text, "{'x': {0: Dim('n', min=2, max=16)}, 'y': {0: 2*n + 1}}") == 0, "%s", text);
    tp_free(text);
    tp_program_free(p);
    tp_shapes_free(s);
    tp_value_clear(&xy[0]);
    tp_value_clear(&xy[1]);
    tp_module_free(m);
}

TEST(test_discovered_equality_suggested_fix) {
    tp_module *m = simple_model("Add", add_fwd, 2, XY);
    tp_value xy[2] = {tp_value_tensor(t2(4, 3, 0.0f)), tp_value_tensor(t2(4, 3, 1.0f))};
    tp_shapes *s = NULL;
    tp_shapes_new(&s);
    tp_shapes_set(s, "x", 0, "dx");
    tp_shapes_set(s, "y", 0, "dy");
    tp_export_options o = {0};
    o.dynamic_shapes = s;
    tp_program *p = NULL;
    CHECK_STATUS(tp_export(m, xy, 2, NULL, &o, &p), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("Constraints violated (dy)");
    CHECK_ERR_CONTAINS("Suggested fixes:\n    dy = dx");
    char *msg = tp_strdup(tp_last_error());
    CHECK_OK(tp_shapes_apply_fixes(s, msg));
    tp_free(msg);
    CHECK_OK(tp_export(m, xy, 2, NULL, &o, &p));
    if (p) CHECK(tp_program_num_equalities(p) == 1);
    tp_program_free(p);
    tp_shapes_free(s);
    /* AUTO hints: the equality is recorded silently */
    tp_shapes_new(&s);
    tp_shapes_set(s, "x", 0, "auto");
    tp_shapes_set(s, "y", 0, "auto");
    o.dynamic_shapes = s;
    p = NULL;
    CHECK_OK(tp_export(m, xy, 2, NULL, &o, &p));
    if (p) {
        tp_value a[2] = {tp_value_tensor(t2(7, 3, 0.0f)), tp_value_tensor(t2(6, 3, 1.0f))};
        tp_value r = tp_value_none();
        CHECK_STATUS(tp_program_call(p, a, 2, NULL, &r), TP_ERR_CONSTRAINT);
        tp_value_clear(&a[0]);
        tp_value_clear(&a[1]);
    }
    tp_program_free(p);
    tp_shapes_free(s);
    tp_value_clear(&xy[0]);
    tp_value_clear(&xy[1]);
    tp_module_free(m);
}

/* A reshape with literal sizes (read with tp_size) bakes the batch size. */
static tp_status reshape_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_t *x = tp_arg(ctx, &args[0]);
    int64_t n = tp_size(ctx, x, 0);
    return tp_return(ctx, tp_reshape(ctx, x, 2, (int64_t[]){n, -1}), out);
}

static tp_status bn_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    return tp_return(ctx, tp_forward(ctx, tp_module_child(self, "bn"), tp_arg(ctx, &args[0])), out);
}

TEST(test_specialization_and_range_fixes) {
    static const char *const names[] = {"x"};
    tp_module *m = simple_model("Reshape", reshape_fwd, 1, names);
    tp_value x = tp_value_tensor(tensor_of(3, (int64_t[]){4, 2, 3}, 0.0f));
    tp_shapes *s = NULL;
    tp_shapes_new(&s);
    tp_shapes_dim(s, "batch", 2, 64);
    tp_shapes_set(s, "x", 0, "batch");
    tp_export_options o = {0};
    o.dynamic_shapes = s;
    tp_program *p = NULL;
    CHECK_STATUS(tp_export(m, &x, 1, NULL, &o, &p), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("Suggested fixes:\n    batch = 4");
    CHECK_ERR_CONTAINS("test_export.c:");
    char *msg = tp_strdup(tp_last_error());
    CHECK_OK(tp_shapes_apply_fixes(s, msg));
    tp_free(msg);
    CHECK_OK(tp_export(m, &x, 1, NULL, &o, &p));
    tp_program_free(p);
    tp_shapes_free(s);
    tp_module_free(m);
    tp_value_clear(&x);
    /* batch norm in training mode needs batch >= 2: the range is refined */
    m = simple_model("BN", bn_fwd, 1, names);
    tp_module *bn = NULL;
    tp_nn_batch_norm(3, 1e-5, 0.1, true, true, &bn);
    tp_module_add_child(m, "bn", bn);
    x = tp_value_tensor(t2(4, 3, 0.0f));
    tp_shapes_new(&s);
    tp_shapes_dim(s, "batch", 1, 64);
    tp_shapes_set(s, "x", 0, "batch");
    o.dynamic_shapes = s;
    CHECK_STATUS(tp_export(m, &x, 1, NULL, &o, &p), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("batch = Dim('batch', min=2, max=64)");
    msg = tp_strdup(tp_last_error());
    CHECK_OK(tp_shapes_apply_fixes(s, msg));
    tp_free(msg);
    CHECK_OK(tp_export(m, &x, 1, NULL, &o, &p));
    if (p) CHECK(tp_program_find_range(p, "batch") && tp_program_find_range(p, "batch")->min == 2);
    tp_program_free(p);
    tp_shapes_free(s);
    tp_module_free(m);
    tp_value_clear(&x);
}

/* reshape(x, [-1, 4]) on x of shape [batch, 2] needs an even batch */
static tp_status pairs_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    return tp_return(ctx, tp_reshape(ctx, tp_arg(ctx, &args[0]), 2, (int64_t[]){-1, 4}), out);
}

TEST(test_divisibility_fix) {
    static const char *const names[] = {"x"};
    tp_module *m = simple_model("Pairs", pairs_fwd, 1, names);
    tp_value x = tp_value_tensor(t2(4, 2, 0.0f));
    tp_shapes *s = NULL;
    tp_shapes_new(&s);
    tp_shapes_dim(s, "batch", 2, 64);
    tp_shapes_set(s, "x", 0, "batch");
    tp_export_options o = {0};
    o.dynamic_shapes = s;
    tp_program *p = NULL;
    CHECK_STATUS(tp_export(m, &x, 1, NULL, &o, &p), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("to be a multiple of 2");
    CHECK_ERR_CONTAINS("_batch = Dim('_batch', min=1, max=32)\n    batch = 2*_batch");
    char *msg = tp_strdup(tp_last_error());
    CHECK_OK(tp_shapes_apply_fixes(s, msg));
    tp_free(msg);
    CHECK_OK(tp_export(m, &x, 1, NULL, &o, &p));
    if (p) {
        const tp_dim_rule *r = tp_program_num_dim_rules(p) == 1 ? tp_program_dim_rule(p, 0) : NULL;
        CHECK(r && r->kind == TP_DIM_DERIVED && r->scale == 2 && strcmp(r->symbol, "_batch") == 0);
        tp_value a = tp_value_tensor(t2(6, 2, 0.0f)), b = tp_value_none();
        CHECK_OK(tp_program_call(p, &a, 1, NULL, &b));
        tp_value_clear(&b);
        tp_value_clear(&a);
        a = tp_value_tensor(t2(7, 2, 0.0f));
        CHECK_STATUS(tp_program_call(p, &a, 1, NULL, &b), TP_ERR_CONSTRAINT);
        tp_value_clear(&a);
    }
    /* Dim.DYNAMIC on a dim the model specialises is an error; Dim.AUTO is not */
    tp_shapes_free(s);
    tp_shapes_new(&s);
    tp_shapes_set(s, "x", 0, "dynamic");
    o.dynamic_shapes = s;
    tp_program_free(p);
    p = NULL;
    CHECK_STATUS(tp_export(m, &x, 1, NULL, &o, &p), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("x.shape[0]");
    tp_program_free(p);
    p = NULL;
    tp_shapes_set(s, "x", 0, "auto");
    CHECK_OK(tp_export(m, &x, 1, NULL, &o, &p));
    tp_program_free(p);
    tp_shapes_free(s);
    tp_value_clear(&x);
    tp_module_free(m);
}

/* ---- mutations of inputs ------------------------------------------------------------------- */

static const char *const CONTAINER_ARGS[] = {"x", "xs", "d"};

static tp_status container_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_add_scalar_(ctx, x, 1.0);                         /* a whole input */
    tp_t *x0 = tp_elem(ctx, &args[1], 0);
    tp_mul_scalar_(ctx, x0, 2.0);                        /* a list element */
    tp_t *k = tp_elem_key(ctx, &args[2], "k");
    tp_add_(ctx, k, tp_elem(ctx, &args[1], 1));          /* a dict element */
    tp_t *y = tp_add(ctx, tp_add(ctx, x, tp_elem(ctx, &args[1], 0)), k);
    tp_value r;
    tp_value_tuple(2, &r);
    tp_value a = tp_out(y), b = tp_out(x0);
    tp_value_seq_set(&r, 0, &a);
    tp_value_seq_set(&r, 1, &b);
    *out = r;
    return tp_ctx_status(ctx);
}

static void container_args(tp_value *v, float base) {
    v[0] = tp_value_tensor(t2(2, 2, base));
    tp_value_list(2, &v[1]);
    tp_value a = tp_value_tensor(t2(2, 2, base + 1)), b = tp_value_tensor(t2(2, 2, base + 2));
    tp_value_seq_set(&v[1], 0, &a);
    tp_value_seq_set(&v[1], 1, &b);
    tp_value_dict(&v[2]);
    tp_value k = tp_value_tensor(t2(2, 2, base + 3));
    tp_value_dict_set(&v[2], "k", &k);
}

TEST(test_input_and_container_mutations) {
    tp_module *m = simple_model("Containers", container_fwd, 3, CONTAINER_ARGS);
    tp_value ex[3], e1[3], e2[3];
    container_args(ex, 0.0f);
    container_args(e1, 5.0f);
    container_args(e2, 5.0f);
    tp_program *p = NULL;
    CHECK_OK(tp_export(m, ex, 3, NULL, NULL, &p));
    if (p) {
        const tp_signature *sig = tp_program_signature(p);
        CHECK(tp_signature_n_mutations(sig) == 3);
        static const char *const targets[] = {"x", "xs[0]", "d['k']"};
        for (int i = 0; i < 3 && i < tp_signature_n_outputs(sig); i++) {
            CHECK(tp_signature_output(sig, i)->kind == TP_OUTPUT_USER_INPUT_MUTATION);
            CHECK_MSG(strcmp(tp_signature_output(sig, i)->target, targets[i]) == 0, "%s", tp_signature_output(sig, i)->target);
        }
        /* the example inputs are untouched by exporting */
        CHECK(tp_tensor_item_f64(ex[0].u.tensor, 0) == 0.0);
        /* eager on e1 vs program on e2: same outputs and same input updates */
        tp_value a = tp_value_none(), b = tp_value_none();
        CHECK_OK(tp_module_run(m, NULL, e1, 3, NULL, &a));
        CHECK_OK(tp_program_call(p, e2, 3, NULL, &b));
        CHECK(tp_value_len(&b) == 2);
        if (tp_value_len(&b) == 2) {
            CHECK_CLOSE(out_tensor(tp_value_at(&b, 0)), out_tensor(tp_value_at(&a, 0)), 0, 0);
            CHECK_CLOSE(out_tensor(tp_value_at(&b, 1)), out_tensor(tp_value_at(&a, 1)), 0, 0);
        }
        CHECK_CLOSE(e2[0].u.tensor, e1[0].u.tensor, 0, 0);
        CHECK_CLOSE(tp_value_at(&e2[1], 0)->u.tensor, tp_value_at(&e1[1], 0)->u.tensor, 0, 0);
        CHECK_CLOSE(tp_value_dict_get(&e2[2], "k")->u.tensor, tp_value_dict_get(&e1[2], "k")->u.tensor, 0, 0);
        CHECK(tp_tensor_item_f64(e2[0].u.tensor, 0) == 6.0);
        tp_value_clear(&a);
        tp_value_clear(&b);
    }
    for (int i = 0; i < 3; i++) {
        tp_value_clear(&ex[i]);
        tp_value_clear(&e1[i]);
        tp_value_clear(&e2[i]);
    }
    tp_program_free(p);
    tp_module_free(m);
}

/* ---- draft export ---------------------------------------------------------------------------- */

TEST(test_draft_export) {
    /* success: nothing to report */
    tp_module *m = simple_model("Add", add_fwd, 2, XY);
    tp_value xy[2] = {tp_value_tensor(t2(4, 3, 0.0f)), tp_value_tensor(t2(4, 3, 1.0f))};
    tp_program *p = NULL;
    tp_draft_report rep;
    CHECK_OK(tp_draft_export(m, xy, 2, NULL, NULL, &p, &rep));
    CHECK(p != NULL && rep.n_failures == 0);
    tp_program_free(p);
    tp_draft_report_free(&rep);
    /* failure: a constraint violation is reported, the program is still built */
    tp_shapes *s = NULL;
    tp_shapes_new(&s);
    tp_shapes_set(s, "x", 0, "dx");
    tp_shapes_set(s, "y", 0, "dy");
    tp_export_options o = {0};
    o.dynamic_shapes = s;
    CHECK_OK(tp_draft_export(m, xy, 2, NULL, &o, &p, &rep));
    CHECK(p != NULL);
    CHECK(rep.n_failures == 1 && rep.failures[0].kind == TP_FAILURE_CONSTRAINT);
    CHECK(rep.suggested_fixes && strstr(rep.suggested_fixes, "dy = dx"));
    if (rep.suggested_fixes) {
        CHECK_OK(tp_shapes_apply_fixes(s, rep.suggested_fixes));
        tp_program *p2 = NULL;
        CHECK_OK(tp_export(m, xy, 2, NULL, &o, &p2));
        tp_program_free(p2);
    }
    tp_program_free(p);
    tp_draft_report_free(&rep);
    tp_shapes_free(s);
    tp_module_free(m);
    /* data dependence: reported, the trace continues with the example value */
    static const char *const names[] = {"x"};
    m = simple_model("Branch", branch_fwd, 1, names);
    CHECK_OK(tp_draft_export(m, xy, 1, NULL, NULL, &p, &rep));
    CHECK(rep.n_failures == 1 && rep.failures[0].kind == TP_FAILURE_DATA_DEPENDENT);
    CHECK(p != NULL);
    char *text = NULL;
    CHECK_OK(tp_draft_report_to_string(&rep, &text));
    CHECK(text && strstr(text, "1 issue found:\n- [data_dependent]"));
    tp_free(text);
    tp_program_free(p);
    tp_draft_report_free(&rep);
    tp_module_free(m);
    tp_value_clear(&xy[0]);
    tp_value_clear(&xy[1]);
}

/* ---- module call graph and unflatten ------------------------------------------------------------ */

static tp_status outer_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_module *block = tp_module_child(self, "block");
    x = tp_forward(ctx, block, x);
    x = tp_forward(ctx, tp_module_child(self, "mid"), x);
    x = tp_forward(ctx, block, x); /* a repeated call */
    return tp_return(ctx, x, out);
}

static tp_module *nested_model(void) {
    static const char *const names[] = {"x"};
    tp_rng rng;
    tp_rng_seed(&rng, 7);
    tp_module *m = simple_model("Outer", outer_fwd, 1, names), *block = NULL, *mid = NULL, *c = NULL;
    tp_nn_sequential(&block);
    tp_nn_linear(&rng, 4, 4, true, &c);
    tp_nn_sequential_add(block, c);
    tp_nn_activation(TP_ACT_TANH, &c);
    tp_nn_sequential_add(block, c);
    tp_nn_sequential(&mid);
    tp_nn_linear(&rng, 4, 4, true, &c);
    tp_nn_sequential_add(mid, c);
    tp_module_add_child(m, "block", block);
    tp_module_add_child(m, "mid", mid);
    return m;
}

TEST(test_module_call_graph_and_unflatten) {
    tp_module *m = nested_model();
    tp_value x = tp_value_tensor(t2(2, 4, -0.5f));
    static const char *const keep[] = {"mid.0"};
    tp_export_options o = {0};
    o.preserve_module_call_signature = keep;
    o.n_preserve = 1;
    tp_program *p = NULL;
    CHECK_OK(tp_export(m, &x, 1, NULL, &o, &p));
    if (p) {
        /* "", block.0, block.1, block, mid.0, mid, block.0@1, block.1@1, block@1 */
        bool seen_block = false, seen_block1 = false, seen_inner = false;
        for (int i = 0; i < tp_program_num_module_calls(p); i++) {
            tp_module_call_entry e = tp_program_module_call(p, i);
            seen_block |= strcmp(e.fqn, "block") == 0;
            seen_block1 |= strcmp(e.fqn, "block@1") == 0;
            seen_inner |= strcmp(e.fqn, "mid.0") == 0 && e.signature != NULL;
        }
        CHECK(seen_block && seen_block1 && seen_inner);
        CHECK(strcmp(tp_program_module_call(p, 0).fqn, "") == 0);
        tp_module *u = NULL;
        CHECK_OK(tp_unflatten(p, &u));
        if (u) {
            /* the whole: equals eager */
            tp_value a = tp_value_none(), b = tp_value_none();
            CHECK_OK(tp_module_run(m, NULL, &x, 1, NULL, &a));
            CHECK_OK(tp_module_call(u, &x, 1, NULL, &b));
            CHECK_CLOSE(out_tensor(&b), out_tensor(&a), 1e-6, 1e-6);
            tp_value_clear(&a);
            tp_value_clear(&b);
            /* a submodule on its own: equals the eager submodule */
            const char *subs[] = {"block", "mid.0", "block.0"};
            for (int i = 0; i < 3; i++) {
                tp_module *sub = tp_module_child(u, subs[i]);
                CHECK_MSG(sub && tp_module_graph(sub), "%s", subs[i]);
                if (!sub || !tp_module_graph(sub)) continue;
                CHECK_OK(tp_module_run(tp_module_child(m, subs[i]), NULL, &x, 1, NULL, &a));
                CHECK_OK(tp_module_call(sub, &x, 1, NULL, &b));
                CHECK_CLOSE(out_tensor(&b), out_tensor(&a), 1e-6, 1e-6);
                tp_value_clear(&a);
                tp_value_clear(&b);
            }
            tp_module_free(u);
        }
    }
    /* an unknown preserved path */
    static const char *const bad[] = {"nope"};
    o.preserve_module_call_signature = bad;
    tp_program *p2 = NULL;
    CHECK_STATUS(tp_export(m, &x, 1, NULL, &o, &p2), TP_ERR_NOT_FOUND);
    CHECK_ERR_CONTAINS("preserve_module_call_signature path 'nope' does not exist");
    tp_program_free(p);
    tp_value_clear(&x);
    tp_module_free(m);
}

/* ---- several entry points ---------------------------------------------------------------------------- */

static tp_status encode_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    return tp_return(ctx, tp_forward(ctx, tp_module_child(self, "enc"), tp_arg(ctx, &args[0])), out);
}

static tp_status decode_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    return tp_return(ctx, tp_forward(ctx, tp_module_child(self, "dec"), tp_arg(ctx, &args[0])), out);
}

TEST(test_several_entry_points_share_state) {
    static const char *const xa[] = {"x"}, *const za[] = {"z"};
    tp_rng rng;
    tp_rng_seed(&rng, 3);
    tp_module *m = simple_model("AutoEncoder", encode_fwd, 1, xa), *c = NULL;
    tp_forward_decl enc = {encode_fwd, 1, xa, NULL, NULL}, dec = {decode_fwd, 1, za, NULL, NULL};
    CHECK_OK(tp_module_set_method(m, "encode", &enc));
    CHECK_OK(tp_module_set_method(m, "decode", &dec));
    tp_nn_linear(&rng, 6, 2, true, &c);
    tp_module_add_child(m, "enc", c);
    tp_nn_linear(&rng, 2, 6, true, &c);
    tp_module_add_child(m, "dec", c);
    tp_value x = tp_value_tensor(t2(3, 6, 0.0f)), z = tp_value_tensor(t2(3, 2, 0.0f));
    tp_export_options oe = {0}, od = {0};
    oe.method = "encode";
    od.method = "decode";
    tp_program *pe = NULL, *pd = NULL;
    CHECK_OK(tp_export(m, &x, 1, NULL, &oe, &pe));
    CHECK_OK(tp_export(m, &z, 1, NULL, &od, &pd));
    if (pe && pd) {
        /* both hold the model's very tensors */
        tp_tensor *a = NULL, *b = NULL, *w = NULL;
        tp_program_get_state(pe, "dec.weight", &a, NULL, NULL);
        tp_program_get_state(pd, "dec.weight", &b, NULL, NULL);
        tp_module_get_state(m, "dec.weight", &w, NULL, NULL);
        CHECK(a == w && b == w);
        CHECK(strcmp(placeholder_name(pd, tp_graph_num_placeholders(tp_program_graph(pd)) - 1), "z") == 0);
        tp_archive_entry entries[2] = {{"encode", pe}, {"decode", pd}};
        void *buf = NULL;
        size_t size = 0;
        CHECK_OK(tp_archive_save_buffer(entries, 2, NULL, 0, &buf, &size));
        tp_archive *ar = NULL;
        if (buf) CHECK_OK(tp_archive_load_buffer(buf, size, NULL, &ar));
        if (ar) {
            tp_program *le = tp_archive_find_program(ar, "encode"), *ld = tp_archive_find_program(ar, "decode");
            CHECK(le && ld);
            if (le && ld) {
                tp_value r1 = tp_value_none(), r2 = tp_value_none(), e1 = tp_value_none();
                CHECK_OK(tp_program_call(le, &x, 1, NULL, &r1));
                CHECK_OK(tp_module_run(m, "encode", &x, 1, NULL, &e1));
                CHECK_CLOSE(out_tensor(&r1), out_tensor(&e1), 0, 0);
                CHECK_OK(tp_program_call(ld, &r1, 1, NULL, &r2));
                tp_value_clear(&r1);
                tp_value_clear(&r2);
                tp_value_clear(&e1);
            }
            tp_archive_free(ar);
        }
        tp_free(buf);
    }
    tp_program_free(pe);
    tp_program_free(pd);
    tp_value_clear(&x);
    tp_value_clear(&z);
    tp_module_free(m);
}

/* ---- state dicts --------------------------------------------------------------------------------------- */

TEST(test_state_dict_errors) {
    tp_rng rng;
    tp_rng_seed(&rng, 5);
    tp_module *lin = NULL;
    tp_nn_linear(&rng, 4, 3, true, &lin);
    tp_tensor *w = t2(4, 3, 0.0f), *extra = t2(1, 1, 0.0f);
    const char *names[] = {"weight", "bias2"};
    tp_tensor *ts[] = {w, extra};
    CHECK_STATUS(tp_module_load_state_dict(lin, names, ts, 2, true), TP_ERR_SHAPE);
    CHECK_ERR_CONTAINS("Error(s) in loading state_dict for Linear:");
    CHECK_ERR_CONTAINS("Missing key(s) in state_dict: \"bias\".");
    CHECK_ERR_CONTAINS("Unexpected key(s) in state_dict: \"bias2\".");
    CHECK_ERR_CONTAINS("size mismatch for weight: copying a param with shape [4, 3] from checkpoint, the shape in current model is [3, 4].");
    tp_tensor *w2 = t2(3, 4, 1.0f);
    ts[0] = w2;
    CHECK_OK(tp_module_load_state_dict(lin, names, ts, 1, false));
    tp_tensor *cur = NULL;
    tp_module_get_state(lin, "weight", &cur, NULL, NULL);
    CHECK_CLOSE(cur, w2, 0, 0);
    tp_tensor_free(w);
    tp_tensor_free(w2);
    tp_tensor_free(extra);
    tp_module_free(lin);
}

/* ---- in-place writes through views of state and inputs ------------------------------ */

static tp_t *narrow_(tp_ctx *ctx, tp_t *a, int64_t dim, int64_t start, int64_t len) {
    tp_value v[4] = {tp_v(a), tp_value_int(dim), tp_value_int(start), tp_value_int(len)};
    return tp_call(ctx, TP_OP_NARROW, v, 4, NULL);
}

static tp_t *slice_(tp_ctx *ctx, tp_t *a, int64_t dim, int64_t start, int64_t end, int64_t step) {
    tp_value v[5] = {tp_v(a), tp_value_int(dim), tp_value_int(start), tp_value_int(end), tp_value_int(step)};
    return tp_call(ctx, TP_OP_SLICE, v, 5, NULL);
}

static tp_t *view_(tp_ctx *ctx, tp_t *a, int n, const int64_t *sizes) {
    tp_value v[2] = {tp_v(a), tp_ints(ctx, n, sizes)};
    return tp_call(ctx, TP_OP_VIEW, v, 2, NULL);
}

/* buf: [3, 4]; x: [n, 4] */
static tp_status views_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_t *buf = tp_buffer(ctx, self, "buf");
    tp_t *col0 = tp_select(ctx, buf, 1, 0); /* taken before the writes: must see them */
    tp_add_scalar_(ctx, tp_select(ctx, buf, 0, 1), 1);                                  /* buf[1] += 1 */
    tp_mul_scalar_(ctx, narrow_(ctx, tp_transpose(ctx, buf, 0, 1), 0, 1, 2), 2);       /* buf[:, 1:3] *= 2 */
    tp_fill_(ctx, slice_(ctx, view_(ctx, buf, 1, (int64_t[]){12}), 0, 3, 12, 4), -1); /* flat[3::4] = -1 */
    tp_add_scalar_(ctx, buf, 0.5);                                                      /* the base itself */
    tp_t *row = tp_select(ctx, tp_select(ctx, view_(ctx, buf, 3, (int64_t[]){3, 2, 2}), 0, 2), 1, 1);
    tp_copy_(ctx, row, narrow_(ctx, tp_select(ctx, x, 0, 0), 0, 1, 2)); /* buf.view(3,2,2)[2,1] = x[0, 1:3] */
    /* user input: x[:, 0] = 0 and x.t()[3] += buf[0, 3] (through a view chain of x) */
    tp_zero_(ctx, tp_select(ctx, x, 1, 0));
    tp_add_(ctx, tp_select(ctx, tp_transpose(ctx, x, 0, 1), 0, 3), tp_select(ctx, tp_select(ctx, buf, 0, 0), 0, 3));
    tp_t *y = tp_add(ctx, tp_sum(ctx, col0), tp_sum(ctx, x));
    return tp_return(ctx, y, out);
}

static tp_module *views_model(void) {
    static const char *const names[] = {"x"};
    tp_module *m = simple_model("Views", views_fwd, 1, names);
    tp_tensor *b = t2(3, 4, -1.0f);
    tp_module_register(m, TP_STATE_BUFFER, "buf", b, true);
    tp_tensor_free(b);
    return m;
}

static tp_tensor *slice2(int64_t n, float start) { return t2(n, 4, start); }

TEST(test_inplace_through_views) {
    tp_module *eager = views_model(), *m = views_model();
    tp_value x = tp_value_tensor(slice2(5, 0.25f));
    tp_program *p = NULL;
    tp_shapes *s = NULL;
    tp_shapes_new(&s);
    tp_shapes_dim(s, "n", 2, 16);
    tp_shapes_set(s, "x", 0, "n");
    tp_export_options o = {0};
    o.dynamic_shapes = s;
    CHECK_OK(tp_export(m, &x, 1, NULL, &o, &p));
    if (p) {
        const tp_signature *sig = tp_program_signature(p);
        CHECK(tp_signature_n_outputs(sig) == 3);
        CHECK(tp_signature_output(sig, 0)->kind == TP_OUTPUT_BUFFER_MUTATION);
        CHECK(strcmp(tp_signature_output(sig, 0)->target, "buf") == 0);
        CHECK(tp_signature_output(sig, 1)->kind == TP_OUTPUT_USER_INPUT_MUTATION);
        CHECK(strcmp(tp_signature_output(sig, 1)->target, "x") == 0);
    }
    tp_tensor *be = NULL, *bm = NULL;
    tp_module_get_state(eager, "buf", &be, NULL, NULL);
    tp_module_get_state(m, "buf", &bm, NULL, NULL);
    CHECK(tp_tensor_item_f64(bm, 5) == -1.0 + 0.25 * 5); /* exporting changed nothing */
    int64_t sizes[3] = {5, 3, 7};
    for (int call = 0; p && call < 3; call++) {
        tp_value xe = tp_value_tensor(slice2(sizes[call], 0.5f * (float)call)),
                 xp = tp_value_tensor(slice2(sizes[call], 0.5f * (float)call));
        tp_value a = tp_value_none(), b = tp_value_none();
        CHECK_OK(tp_module_run(eager, NULL, &xe, 1, NULL, &a));
        CHECK_OK(tp_program_call(p, &xp, 1, NULL, &b));
        CHECK_CLOSE(out_tensor(&b), out_tensor(&a), 0, 0);
        CHECK_CLOSE(bm, be, 0, 0);
        CHECK_CLOSE(xp.u.tensor, xe.u.tensor, 0, 0);
        CHECK(tp_tensor_item_f64(xe.u.tensor, 4) == 0.0); /* x[1, 0] was zeroed */
        tp_value_clear(&a);
        tp_value_clear(&b);
        tp_value_clear(&xe);
        tp_value_clear(&xp);
    }
    /* the archive round trip keeps the in-place node (its state: buf as saved = eager's) */
    if (p) {
        tp_archive_entry e = {"model", p};
        void *buf = NULL;
        size_t len = 0;
        tp_archive *ar = NULL;
        CHECK_OK(tp_archive_save_buffer(&e, 1, NULL, 0, &buf, &len));
        if (buf) CHECK_OK(tp_archive_load_buffer(buf, len, NULL, &ar));
        tp_program *q = ar ? tp_archive_find_program(ar, "model") : NULL;
        CHECK(q != NULL);
        tp_tensor *bq = NULL;
        if (q) CHECK_OK(tp_program_get_state(q, "buf", &bq, NULL, NULL));
        tp_value xq = tp_value_tensor(slice2(4, 1.0f)), xe = tp_value_tensor(slice2(4, 1.0f));
        tp_value a = tp_value_none(), b = tp_value_none();
        if (bq) {
            CHECK_CLOSE(bq, be, 0, 0);
            CHECK_OK(tp_program_call(q, &xq, 1, NULL, &b));
            CHECK_OK(tp_module_run(eager, NULL, &xe, 1, NULL, &a));
            CHECK_CLOSE(out_tensor(&b), out_tensor(&a), 0, 0);
            CHECK_CLOSE(bq, be, 0, 0);
            CHECK_CLOSE(xq.u.tensor, xe.u.tensor, 0, 0);
        }
        tp_value_clear(&a);
        tp_value_clear(&b);
        tp_value_clear(&xq);
        tp_value_clear(&xe);
        tp_archive_free(ar);
        tp_free(buf);
    }
    tp_program_free(p);
    tp_shapes_free(s);
    tp_value_clear(&x);
    tp_module_free(m);
    tp_module_free(eager);
}

/* writing through a view of a constant is refused like a direct write */
static tp_status const_view_fwd(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_t *c = tp_const(ctx, self, "k");
    tp_fill_(ctx, tp_select(ctx, c, 0, 0), 3);
    return tp_return(ctx, tp_add(ctx, tp_arg(ctx, &args[0]), c), out);
}

TEST(test_inplace_view_of_constant_refused) {
    static const char *const names[] = {"x"};
    tp_module *m = simple_model("CV", const_view_fwd, 1, names);
    tp_tensor *k = t2(2, 3, 0.0f);
    tp_module_register(m, TP_STATE_CONSTANT, "k", k, true);
    tp_tensor_free(k);
    tp_value x = tp_value_tensor(t2(2, 3, 1.0f));
    tp_program *p = NULL;
    CHECK_STATUS(tp_export(m, &x, 1, NULL, NULL, &p), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("the forward mutates constant tensor 'k'");
    tp_value_clear(&x);
    tp_module_free(m);
}

TEST_MAIN(T(test_lifted_names_and_order), T(test_accumulator_matches_eager), T(test_lifted_constant), T(test_kwargs_defaults_replayed),
          T(test_data_dependent_branch), T(test_dynamic_shapes_spec_errors), T(test_shared_dim_equality_and_range),
          T(test_derived_dim_enforced), T(test_discovered_equality_suggested_fix),
          T(test_specialization_and_range_fixes), T(test_divisibility_fix), T(test_input_and_container_mutations), T(test_draft_export),
          T(test_module_call_graph_and_unflatten), T(test_several_entry_points_share_state),
          T(test_state_dict_errors), T(test_inplace_through_views),
          T(test_inplace_view_of_constant_refused))
