/*
 * test_program.c - the exported program: the examples (a)-(g) of the
 * program issue built with the graph API, calling, mutations, input checks,
 * unlifting, state access, validation, copying and printing.
 */
#include "program_examples.h"

/* ---- small builders ---------------------------------------------------- */









/* ---- (a) MLP with parameters ------------------------------------------- */


/* relu(x W^T + b) by hand for the example input */
static const float mlp_expected[] = {1, 0, 3, 0, 4, 5, 6, 5};

TEST(test_mlp_call) {
    tp_program *p = make_mlp();
    tp_value out = tp_value_none();
    /* no arguments: the example input is used */
    CHECK_OK(tp_program_call(p, NULL, 0, NULL, &out));
    CHECK(out.kind == TP_VAL_TENSOR && tensor_equals(out.u.tensor, mlp_expected, 8));
    tp_value_clear(&out);
    /* positional */
    static const float xd[] = {0, 0, 0, 1, 1, 1};
    tp_value x = tv(tensor_f32(2, (int64_t[]){2, 3}, xd));
    CHECK_OK(tp_program_call(p, &x, 1, NULL, &out));
    CHECK(out.kind == TP_VAL_TENSOR && tensor_equals(out.u.tensor, (float[]){0, 0, 0, 0, 1, 1, 1, 0}, 8));
    tp_value_clear(&out);
    /* keyword */
    tp_value kw;
    CHECK_OK(tp_value_dict(&kw));
    tp_value xc;
    CHECK_OK(tp_value_copy(&x, &xc));
    CHECK_OK(tp_value_dict_set(&kw, "x", &xc));
    CHECK_OK(tp_program_call(p, NULL, 0, &kw, &out));
    CHECK(out.kind == TP_VAL_TENSOR && tensor_equals(out.u.tensor, (float[]){0, 0, 0, 0, 1, 1, 1, 0}, 8));
    tp_value_clear(&out);
    /* errors */
    CHECK_STATUS(tp_program_call(p, &x, 1, &kw, &out), TP_ERR_DUPLICATE);
    CHECK_ERR_CONTAINS("duplicate value for argument 'x'");
    tp_value two[2] = {x, x};
    CHECK_STATUS(tp_program_call(p, two, 2, NULL, &out), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("expected at most 1 positional argument, got 2");
    tp_value_clear(&kw);
    CHECK_OK(tp_value_dict(&kw));
    CHECK_OK(tp_value_copy(&x, &xc));
    CHECK_OK(tp_value_dict_set(&kw, "z", &xc));
    CHECK_STATUS(tp_program_call(p, NULL, 0, &kw, &out), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("unexpected keyword argument 'z'");
    tp_value_clear(&kw);
    /* without an out_spec the output node's tuple is returned as it is */
    CHECK_OK(tp_program_set_out_spec(p, NULL));
    CHECK_OK(tp_program_call(p, &x, 1, NULL, &out));
    CHECK(out.kind == TP_VAL_TUPLE && tp_value_len(&out) == 1);
    tp_value_clear(&out);
    /* the flat contract: all placeholders, raw outputs */
    tp_tensor *w, *b;
    CHECK_OK(tp_program_get_state(p, "fc1.weight", &w, NULL, NULL));
    CHECK_OK(tp_program_get_state(p, "fc1.bias", &b, NULL, NULL));
    tp_value flat[3] = {tv(tp_tensor_retain(w)), tv(tp_tensor_retain(b)), x};
    CHECK_OK(tp_program_call_flat(p, flat, 3, &out));
    CHECK(out.kind == TP_VAL_LIST && tp_value_len(&out) == 1);
    CHECK(tensor_equals(tp_value_at(&out, 0)->u.tensor, (float[]){0, 0, 0, 0, 1, 1, 1, 0}, 8));
    tp_value_clear(&out);
    CHECK_STATUS(tp_program_call_flat(p, flat, 2, &out), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("expected 3 flat inputs, got 2");
    set_leaf_out_spec(p);
    CHECK_OK(tp_program_call_exported(p, &x, 1, NULL, &out));
    CHECK(out.kind == TP_VAL_TENSOR && tensor_equals(out.u.tensor, (float[]){0, 0, 0, 0, 1, 1, 1, 0}, 8));
    tp_value_clear(&out);
    tp_value_clear(&flat[0]);
    tp_value_clear(&flat[1]);
    tp_value_clear(&x);
    tp_program_free(p);
}

TEST(test_missing_input) {
    tp_program *p = make_mlp();
    tp_program *c = NULL;
    CHECK_OK(tp_program_copy(p, &c));
    /* a copy without example inputs: build a fresh one instead */
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_copy(tp_program_graph(p), &g));
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_clone(tp_program_signature(p), &s));
    tp_program *q = NULL;
    CHECK_OK(tp_program_new(g, s, &q));
    tp_named_state st;
    CHECK_OK(tp_program_named_state(p, TP_FILTER_ALL, &st));
    for (int i = 0; i < st.n; i++) CHECK_OK(tp_program_set_state(q, st.items[i].name, st.items[i].kind, st.items[i].tensor, true));
    tp_named_state_free(&st);
    tp_value out = tp_value_none();
    CHECK_STATUS(tp_program_call(q, NULL, 0, NULL, &out), TP_ERR_MISSING);
    CHECK_ERR_CONTAINS("missing required export input: x");
    tp_program_free(q);
    tp_program_free(c);
    tp_program_free(p);
}

TEST(test_mlp_module) {
    tp_program *p = make_mlp();
    tp_module *m = NULL, *m2 = NULL;
    CHECK_OK(tp_program_module(p, &m));
    CHECK_OK(tp_program_module(p, &m2));
    CHECK(m == m2); /* cached */
    /* the unlifted graph has no state placeholders; its attribute reads keep
     * the placeholder names (p_fc1_weight = self.fc1.weight), as in tensorplay */
    CHECK(tp_graph_num_placeholders(tp_module_graph(m)) == 1);
    const tp_node *rd = tp_graph_find_node(tp_module_graph(m), "p_fc1_weight");
    CHECK(rd && tp_node_get_kind(rd) == TP_NODE_GET_ATTR && strcmp(tp_node_target(rd), "fc1.weight") == 0);
    tp_tensor *pw, *mw;
    CHECK_OK(tp_program_get_state(p, "fc1.weight", &pw, NULL, NULL));
    tp_state_kind kind;
    CHECK_OK(tp_module_get_state(m, "fc1.weight", &mw, &kind, NULL));
    CHECK(pw == mw && kind == TP_STATE_PARAMETER); /* shared, not copied */
    CHECK(tp_module_child(m, "fc1") != NULL);
    tp_value out = tp_value_none();
    CHECK_OK(tp_module_call(m, NULL, 0, NULL, &out)); /* default = example input */
    CHECK(out.kind == TP_VAL_TENSOR && tensor_equals(out.u.tensor, mlp_expected, 8));
    tp_value_clear(&out);
    tp_program_invalidate_module(p);
    CHECK_OK(tp_program_module(p, &m2));
    CHECK(m2 != NULL);
    CHECK_OK(tp_module_call(m2, NULL, 0, NULL, &out));
    CHECK(out.kind == TP_VAL_TENSOR && tensor_equals(out.u.tensor, mlp_expected, 8));
    tp_value_clear(&out);
    tp_program_free(p);
}

TEST(test_mlp_print) {
    tp_program *p = make_mlp();
    char *s = NULL;
    CHECK_OK(tp_program_to_string(p, &s));
    CHECK(s && strstr(s, "def forward(self, p_fc1_weight"));
    CHECK(s && strstr(s, "\nuser_inputs            = ['x']\n"));
    CHECK(s && strstr(s, "\nparameters             = ['fc1.weight', 'fc1.bias']\n"));
    CHECK(s && strstr(s, "\nbuffers                = []\n"));
    CHECK(s && !strstr(s, "non_persistent_buffers"));
    CHECK(s && !strstr(s, "dynamic_shapes"));
    tp_free(s);
    tp_program_free(p);
}

/* ---- (b) buffers and constants ----------------------------------------- */


TEST(test_buffers_and_constants) {
    tp_program *p = make_buffers();
    tp_value out = tp_value_none();
    CHECK_OK(tp_program_call(p, NULL, 0, NULL, &out));
    /* (1+[1,2,3]) * [10,100,1000] - 0.5 */
    CHECK(out.kind == TP_VAL_TENSOR && tensor_equals(out.u.tensor, (float[]){19.5f, 299.5f, 3999.5f}, 3));
    tp_value_clear(&out);
    tp_named_state sd;
    CHECK_OK(tp_program_named_state(p, TP_FILTER_STATE_DICT, &sd));
    CHECK(sd.n == 1 && strcmp(sd.items[0].name, "running") == 0); /* not tmp, not the constant */
    tp_named_state_free(&sd);
    CHECK_OK(tp_program_named_state(p, TP_FILTER_BUFFERS, &sd));
    CHECK(sd.n == 2 && strcmp(sd.items[0].name, "running") == 0 && strcmp(sd.items[1].name, "tmp") == 0 &&
          !sd.items[1].persistent);
    tp_named_state_free(&sd);
    CHECK_OK(tp_program_named_state(p, TP_FILTER_CONSTANTS, &sd));
    /* the constant and, as tensorplay's constants view has it, the non-persistent buffer */
    CHECK(sd.n == 2);
    if (sd.n == 2)
        CHECK((!strcmp(sd.items[0].name, "tmp") && !strcmp(sd.items[1].name, "scale")) ||
              (!strcmp(sd.items[0].name, "scale") && !strcmp(sd.items[1].name, "tmp")));
    tp_named_state_free(&sd);
    CHECK_OK(tp_program_named_state(p, TP_FILTER_PARAMETERS, &sd));
    CHECK(sd.n == 0);
    tp_named_state_free(&sd);
    /* unlifted: same result, state kinds kept */
    tp_module *m = NULL;
    CHECK_OK(tp_program_module(p, &m));
    CHECK_OK(tp_module_call(m, NULL, 0, NULL, &out));
    CHECK(out.kind == TP_VAL_TENSOR && tensor_equals(out.u.tensor, (float[]){19.5f, 299.5f, 3999.5f}, 3));
    tp_value_clear(&out);
    bool persistent = true;
    tp_state_kind kind;
    CHECK_OK(tp_module_get_state(m, "tmp", NULL, &kind, &persistent));
    CHECK(kind == TP_STATE_BUFFER && !persistent);
    CHECK_OK(tp_module_get_state(m, "scale", NULL, &kind, NULL));
    CHECK(kind == TP_STATE_CONSTANT);
    CHECK_OK(tp_module_named_state(m, TP_FILTER_STATE_DICT, &sd));
    CHECK(sd.n == 1);
    tp_named_state_free(&sd);
    char *text = NULL;
    CHECK_OK(tp_program_to_string(p, &text));
    CHECK(text && strstr(text, "\nnon_persistent_buffers = ['tmp']\n"));
    CHECK(text && strstr(text, "\nbuffers                = ['running', 'tmp']\n"));
    tp_free(text);
    tp_program_free(p);
}

/* ---- (c) batch norm in training mode ----------------------------------- */


static void check_bn_twice(tp_program *p, tp_module *m) {
    const char *steps[2][3] = {{"program/bn_x1", "program/bn_y1", "program/bn_mean1"},
                               {"program/bn_x2", "program/bn_y2", "program/bn_mean2"}};
    const char *vars[2] = {"program/bn_var1", "program/bn_var2"};
    for (int k = 0; k < 2; k++) {
        tp_value x = tv(load_fixture(steps[k][0])), out = tp_value_none();
        if (m) CHECK_OK(tp_module_call(m, &x, 1, NULL, &out));
        else CHECK_OK(tp_program_call(p, &x, 1, NULL, &out));
        tp_tensor *y = load_fixture(steps[k][1]), *mean = load_fixture(steps[k][2]), *var = load_fixture(vars[k]);
        CHECK(out.kind == TP_VAL_TENSOR);
        if (out.kind == TP_VAL_TENSOR) CHECK_CLOSE(out.u.tensor, y, 1e-5, 1e-6);
        tp_tensor *rm, *rv;
        CHECK_OK(tp_program_get_state(p, "bn.running_mean", &rm, NULL, NULL));
        CHECK_OK(tp_program_get_state(p, "bn.running_var", &rv, NULL, NULL));
        CHECK_CLOSE(rm, mean, 1e-5, 1e-6);
        CHECK_CLOSE(rv, var, 1e-5, 1e-6);
        tp_tensor_free(y);
        tp_tensor_free(mean);
        tp_tensor_free(var);
        tp_value_clear(&x);
        tp_value_clear(&out);
    }
}

TEST(test_batch_norm_training) {
    tp_program *p = make_bn();
    CHECK(tp_program_num_mutations(p) == 2);
    check_bn_twice(p, NULL);
    tp_program_free(p);
    /* the unlifted module updates the same state tensors */
    p = make_bn();
    tp_module *m = NULL;
    CHECK_OK(tp_program_module(p, &m));
    check_bn_twice(p, m);
    tp_program_free(p);
}

/* ---- (d) accumulator buffer -------------------------------------------- */


TEST(test_accumulator) {
    for (int unlifted = 0; unlifted < 2; unlifted++) {
        tp_program *p = make_counter();
        tp_module *m = NULL;
        if (unlifted) CHECK_OK(tp_program_module(p, &m));
        for (int k = 1; k <= 3; k++) {
            tp_value out = tp_value_none();
            if (m) CHECK_OK(tp_module_call(m, NULL, 0, NULL, &out));
            else CHECK_OK(tp_program_call(p, NULL, 0, NULL, &out));
            CHECK(out.kind == TP_VAL_TENSOR && tensor_equals(out.u.tensor, (float[]){(float)k, 2.0f * k}, 2));
            tp_value_clear(&out);
            tp_tensor *c;
            CHECK_OK(tp_program_get_state(p, "count", &c, NULL, NULL));
            CHECK_MSG(tensor_equals(c, (float[]){(float)k}, 1), "count after call %d (unlifted=%d) is %g", k, unlifted,
                      tp_tensor_item_f64(c, 0));
        }
        tp_program_free(p);
    }
}

/* ---- (e) a user list input mutated in place ----------------------------- */


TEST(test_list_input_mutation) {
    for (int unlifted = 0; unlifted < 2; unlifted++) {
        tp_program *p = make_list_mutation();
        tp_module *m = NULL;
        if (unlifted) CHECK_OK(tp_program_module(p, &m));
        tp_value xs;
        CHECK_OK(tp_value_list(2, &xs));
        xs.u.seq.items[0] = tv(tensor_f32(1, (int64_t[]){2}, (float[]){1, 2}));
        xs.u.seq.items[1] = tv(tensor_f32(1, (int64_t[]){2}, (float[]){3, 4}));
        tp_value out = tp_value_none();
        if (m) CHECK_OK(tp_module_call(m, &xs, 1, NULL, &out));
        else CHECK_OK(tp_program_call(p, &xs, 1, NULL, &out));
        /* out = (xs0+1) + xs1*2 */
        CHECK(out.kind == TP_VAL_TENSOR && tensor_equals(out.u.tensor, (float[]){8, 11}, 2));
        /* the caller's tensors were updated */
        CHECK(tensor_equals(tp_value_at(&xs, 0)->u.tensor, (float[]){2, 3}, 2));
        CHECK_MSG(tensor_equals(tp_value_at(&xs, 1)->u.tensor, (float[]){6, 8}, 2), "unlifted=%d", unlifted);
        tp_value_clear(&out);
        tp_value_clear(&xs);
        tp_program_free(p);
    }
}

/* ---- (f) constraints ------------------------------------------------------ */


static tp_status call_xyz(tp_program *p, int64_t bx, int64_t by, int64_t cols, int64_t nz, tp_dtype dt) {
    tp_tensor *x = NULL, *y = NULL, *z = NULL;
    CHECK_OK(tp_tensor_zeros(dt, 2, (int64_t[]){bx, cols}, &x));
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){by, 3}, &y));
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 1, (int64_t[]){nz}, &z));
    tp_value args[3] = {tv(x), tv(y), tv(z)}, out = tp_value_none();
    tp_status st = tp_program_call(p, args, 3, NULL, &out);
    tp_value_clear(&out);
    for (int i = 0; i < 3; i++) tp_value_clear(&args[i]);
    return st;
}

TEST(test_constraints) {
    tp_program *p = make_constrained();
    CHECK_OK(call_xyz(p, 4, 4, 3, 9, TP_FLOAT32));
    CHECK_OK(call_xyz(p, 2, 2, 3, 5, TP_FLOAT32));
    CHECK_OK(call_xyz(p, 8, 8, 3, 17, TP_FLOAT32));
    CHECK_STATUS(call_xyz(p, 5, 4, 3, 11, TP_FLOAT32), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("y.shape[0] = 4 must equal x.shape[0] = 5 (dim \"batch\")");
    CHECK_STATUS(call_xyz(p, 9, 9, 3, 19, TP_FLOAT32), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("x.shape[0] = 9 violates batch <= 8");
    CHECK_STATUS(call_xyz(p, 1, 1, 3, 3, TP_FLOAT32), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("x.shape[0] = 1 violates batch >= 2");
    CHECK_STATUS(call_xyz(p, 4, 4, 5, 9, TP_FLOAT32), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("x.shape[1] = 5 must equal 3 (static dim)");
    CHECK_STATUS(call_xyz(p, 4, 4, 3, 10, TP_FLOAT32), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("z.shape[0] = 10 must equal 2*batch+1 = 9 (batch = 4 from x.shape[0])");
    CHECK_STATUS(call_xyz(p, 4, 4, 3, 9, TP_FLOAT64), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("x has dtype float64 but the program expects float32");
    /* check_inputs alone, without running */
    tp_tensor *x = NULL;
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 1, (int64_t[]){4}, &x));
    tp_value a = tv(x);
    CHECK_STATUS(tp_program_check_inputs(p, &a, 1, NULL), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("x has rank 1 but the program expects rank 2");
    tp_value_clear(&a);
    /* a derived-only check: drop x,y rules by a fresh program with z alone */
    CHECK(tp_program_num_dim_rules(p) == 3 && tp_program_num_equalities(p) == 1);
    CHECK(tp_program_find_range(p, "batch")->max == 8);
    CHECK_STATUS(tp_program_add_equality(p, (tp_dim_site[]){{"x", 0}}, 1, NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("an equality constraint needs at least two sites");
    char *text = NULL;
    CHECK_OK(tp_program_to_string(p, &text));
    CHECK_MSG(text && strstr(text, "dynamic_shapes         = {'x': {0: Dim('batch', min=2, max=8)}, 'y': {0: Dim('batch', min=2, max=8)}, 'z': {0: 2*batch+1}}"),
              "%s", text ? text : "");
    tp_free(text);
    tp_program_free(p);
}

TEST(test_constrained_unlifted) {
    /* the unlifted module gives the same outputs as the program */
    tp_program *p = make_constrained();
    tp_module *m = NULL;
    CHECK_OK(tp_program_module(p, &m));
    tp_tensor *x = NULL, *y = NULL, *z = NULL;
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){3, 3}, &x));
    CHECK_OK(tp_tensor_fill(x, 2.0));
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){3, 3}, &y));
    CHECK_OK(tp_tensor_fill(y, 0.5));
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 1, (int64_t[]){7}, &z));
    CHECK_OK(tp_tensor_fill(z, 1.0));
    tp_value args[3] = {tv(x), tv(y), tv(z)}, a = tp_value_none(), b = tp_value_none();
    CHECK_OK(tp_program_call(p, args, 3, NULL, &a));
    CHECK_OK(tp_module_call(m, args, 3, NULL, &b));
    CHECK(tp_value_len(&a) == 2 && tp_value_len(&b) == 2);
    if (tp_value_len(&a) == 2 && tp_value_len(&b) == 2) {
        CHECK(tensor_equals(tp_value_at(&a, 0)->u.tensor, (float[]){2.5f, 2.5f, 2.5f, 2.5f, 2.5f, 2.5f, 2.5f, 2.5f, 2.5f}, 9));
        CHECK(tensor_equals(tp_value_at(&b, 0)->u.tensor, (float[]){2.5f, 2.5f, 2.5f, 2.5f, 2.5f, 2.5f, 2.5f, 2.5f, 2.5f}, 9));
        CHECK(tensor_equals(tp_value_at(&a, 1)->u.tensor, (float[]){7}, 1));
        CHECK(tensor_equals(tp_value_at(&b, 1)->u.tensor, (float[]){7}, 1));
    }
    tp_value_clear(&a);
    tp_value_clear(&b);
    for (int i = 0; i < 3; i++) tp_value_clear(&args[i]);
    tp_program_free(p);
}

TEST(test_derived_alone) {
    /* z's dim is derived from a symbol no other input binds: solve for it */
    tp_program *p = make_constrained();
    tp_tensor *x = NULL, *y = NULL, *z = NULL;
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){4, 3}, &x));
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){4, 3}, &y));
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 1, (int64_t[]){8}, &z));
    tp_value args[3] = {tv(x), tv(y), tv(z)};
    CHECK_STATUS(tp_program_check_inputs(p, args, 3, NULL), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("z.shape[0] = 8 must equal 2*batch+1 = 9");
    for (int i = 0; i < 3; i++) tp_value_clear(&args[i]);
    tp_program_free(p);
}

/* ---- (g) nested outputs --------------------------------------------------- */

TEST(test_nested_outputs) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = placeholder(g, "x", 1, (int64_t[]){2});
    tp_node *a = call(g, TP_OP_ADD, 2, (tp_value[]){N(x), tp_value_int(1)});
    tp_node *b = call(g, TP_OP_MUL, 2, (tp_value[]){N(x), tp_value_int(2)});
    tp_node *c = call(g, TP_OP_NEG, 1, (tp_value[]){N(x)});
    output_nodes(g, 3, (tp_node *[]){a, b, c});
    tp_signature *sig = NULL;
    CHECK_OK(tp_signature_new(&sig));
    CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    tp_node *outs[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        CHECK_OK(tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(outs[i])), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, sig, &p));
    /* (a, {'k': b, 'l': [c]}) */
    const char *json = "{\"t\":\"tuple\",\"c\":[{\"t\":\"leaf\"},{\"t\":\"dict\",\"ctx\":[\"k\",\"l\"],\"c\":[{\"t\":\"leaf\"},"
                       "{\"t\":\"list\",\"c\":[{\"t\":\"leaf\"}]}]}]}";
    tp_treespec *spec = NULL;
    CHECK_OK(tp_treespec_from_json(json, strlen(json), &spec));
    CHECK_OK(tp_program_set_out_spec(p, spec));
    tp_treespec_free(spec);
    tp_value ex = tv(tensor_f32(1, (int64_t[]){2}, (float[]){1, 2}));
    CHECK_OK(tp_program_set_example_input(p, "x", &ex));
    tp_value_clear(&ex);
    CHECK_OK(tp_program_validate(p));
    for (int unlifted = 0; unlifted < 2; unlifted++) {
        tp_value out = tp_value_none();
        if (unlifted) {
            tp_module *m = NULL;
            CHECK_OK(tp_program_module(p, &m));
            CHECK_OK(tp_module_call(m, NULL, 0, NULL, &out));
        } else {
            CHECK_OK(tp_program_call(p, NULL, 0, NULL, &out));
        }
        CHECK(out.kind == TP_VAL_TUPLE && tp_value_len(&out) == 2);
        if (out.kind == TP_VAL_TUPLE && tp_value_len(&out) == 2) {
            CHECK(tensor_equals(tp_value_at(&out, 0)->u.tensor, (float[]){2, 3}, 2));
            tp_value *d = tp_value_at(&out, 1);
            CHECK(d->kind == TP_VAL_DICT);
            tp_value *k = tp_value_dict_get(d, "k"), *l = tp_value_dict_get(d, "l");
            CHECK(k && k->kind == TP_VAL_TENSOR && tensor_equals(k->u.tensor, (float[]){2, 4}, 2));
            CHECK(l && l->kind == TP_VAL_LIST && tp_value_len(l) == 1 &&
                  tensor_equals(tp_value_at(l, 0)->u.tensor, (float[]){-1, -2}, 2));
        }
        tp_value_clear(&out);
    }
    tp_program_free(p);
}

/* ---- validation ------------------------------------------------------------- */

static tp_status my_verifier(const tp_program *p, tp_report *r, void *user) {
    (*(int *)user)++;
    if (tp_graph_num_nodes(tp_program_graph(p)) > 3) tp_program_report(r, "custom: too many nodes");
    return TP_OK;
}

static tp_status builtin_then_custom(const tp_program *p, tp_report *r, void *user) {
    tp_program_builtin_checks(p, r);
    return my_verifier(p, r, user);
}

static tp_status accept_all(const tp_program *p, tp_report *r, void *user) {
    (void)p, (void)r, (void)user;
    return TP_OK;
}

TEST(test_validate_reports_everything) {
    /* a broken program: an unknown user input spec, an output count mismatch,
     * a mutation target that is not state, missing state */
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *w = placeholder(g, "p_w", 1, (int64_t[]){2});
    tp_node *x = placeholder(g, "x", 1, (int64_t[]){2});
    tp_node *a = call(g, TP_OP_ADD, 2, (tp_value[]){N(x), N(w)});
    output_nodes(g, 1, &a);
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_w"), "w", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("ghost"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_BUFFER_MUTATION, tp_arg_tensor("add"), "nowhere"));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor("other"), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    CHECK_STATUS(tp_program_validate(p), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("input spec 'ghost' has no matching placeholder");
    CHECK_ERR_CONTAINS("graph produces 1 outputs but the signature describes 2");
    CHECK_ERR_CONTAINS("mutation target 'nowhere' is not lifted graph state");
    CHECK_ERR_CONTAINS("PARAMETER 'w' (input 'p_w') has no value in the program state");
    CHECK_ERR_CONTAINS("4 problems:");
    tp_program_free(p);

    /* custom verifier and wrong state kind */
    p = make_mlp();
    int calls = 0;
    tp_program_set_verifier(p, my_verifier, &calls);
    CHECK_STATUS(tp_program_validate(p), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("custom: too many nodes");
    CHECK(calls == 1);
    tp_tensor *t = NULL;
    CHECK_OK(tp_program_get_state(p, "fc1.bias", &t, NULL, NULL));
    tp_tensor_retain(t);
    CHECK_OK(tp_program_set_state(p, "fc1.bias", TP_STATE_BUFFER, t, true));
    tp_tensor_free(t);
    CHECK_STATUS(tp_program_validate(p), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("state 'fc1.bias' is a buffer but its input spec says PARAMETER");
    CHECK_ERR_CONTAINS("2 problems:");
    /* a replacing verifier takes over the signature checks (tensorplay's
     * Verifier subclass overriding check()) ... */
    calls = 0;
    tp_program_set_verifier_ex(p, my_verifier, &calls, true);
    CHECK_STATUS(tp_program_validate(p), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("1 problem:");
    CHECK_ERR_CONTAINS("custom: too many nodes");
    CHECK(strstr(tp_last_error(), "is a buffer but") == NULL);
    CHECK(calls == 1);
    /* ... and can still run them (super().check()) */
    tp_program_set_verifier_ex(p, builtin_then_custom, &calls, true);
    CHECK_STATUS(tp_program_validate(p), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("2 problems:");
    CHECK_ERR_CONTAINS("state 'fc1.bias' is a buffer but its input spec says PARAMETER");
    CHECK(calls == 2);
    tp_program_set_verifier_ex(p, NULL, NULL, true); /* no verifier: the built-in checks again */
    CHECK_STATUS(tp_program_validate(p), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("1 problem:");
    CHECK_ERR_CONTAINS("is a buffer but its input spec says PARAMETER");
    tp_program_free(p);

    /* the graph lint runs whatever the verifier says */
    tp_graph *g2 = NULL;
    CHECK_OK(tp_graph_new(&g2));
    tp_node *x2 = placeholder(g2, "x", 1, (int64_t[]){2});
    (void)x2; /* no output node */
    tp_signature *s2 = NULL;
    CHECK_OK(tp_signature_new(&s2));
    CHECK_OK(tp_signature_add_input(s2, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    tp_program *p2 = NULL;
    CHECK_OK(tp_program_new(g2, s2, &p2));
    tp_program_set_verifier_ex(p2, accept_all, NULL, true);
    CHECK_STATUS(tp_program_validate(p2), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("output");
    tp_program_free(p2);
}

/* ---- copy, rename, module call graph ----------------------------------------- */

TEST(test_copy_is_independent) {
    tp_program *p = make_counter(), *c = NULL;
    CHECK_OK(tp_program_copy(p, &c));
    CHECK_OK(tp_program_validate(c));
    tp_value out = tp_value_none();
    CHECK_OK(tp_program_call(c, NULL, 0, NULL, &out));
    tp_value_clear(&out);
    tp_tensor *pc, *cc;
    CHECK_OK(tp_program_get_state(p, "count", &pc, NULL, NULL));
    CHECK_OK(tp_program_get_state(c, "count", &cc, NULL, NULL));
    CHECK(pc != cc && !tp_tensor_shares_storage(pc, cc));
    CHECK(tensor_equals(pc, (float[]){0}, 1) && tensor_equals(cc, (float[]){1}, 1));
    CHECK(tp_program_graph(p) != tp_program_graph(c));
    tp_program_free(c);
    tp_program_free(p);
}

TEST(test_rename_and_call_graph) {
    tp_program *p = make_mlp();
    tp_module_call_signature sig = {0};
    tp_arg_spec ins[1] = {tp_arg_tensor("x")}, outs[1] = {tp_arg_tensor("relu")};
    char *fwd[1] = {"x"};
    sig.n_inputs = 1;
    sig.inputs = ins;
    sig.n_outputs = 1;
    sig.outputs = outs;
    sig.n_forward_arg_names = 1;
    sig.forward_arg_names = fwd;
    CHECK_OK(tp_program_add_module_call(p, "", &sig));
    CHECK_OK(tp_program_add_module_call(p, "fc1", NULL));
    CHECK(tp_program_num_module_calls(p) == 2);
    tp_node *relu = tp_graph_find_node(tp_program_graph(p), "relu");
    CHECK(relu != NULL);
    if (relu) CHECK_OK(tp_program_rename_node(p, relu, "activation"));
    tp_module_call_entry e = tp_program_module_call(p, 0);
    CHECK(e.signature && strcmp(e.signature->outputs[0].name, "activation") == 0);
    CHECK(strcmp(tp_program_module_call(p, 1).fqn, "fc1") == 0 && tp_program_module_call(p, 1).signature == NULL);
    CHECK(tp_signature_find_output(tp_program_signature(p), "activation") == 0);
    /* renaming the user input renames its forward argument name too */
    tp_node *x = tp_graph_find_node(tp_program_graph(p), "x");
    if (x) CHECK_OK(tp_program_rename_node(p, x, "inp"));
    e = tp_program_module_call(p, 0);
    CHECK(e.signature && strcmp(e.signature->inputs[0].name, "inp") == 0 &&
          strcmp(e.signature->forward_arg_names[0], "inp") == 0);
    CHECK(tp_program_example_input(p, "inp") != NULL);
    /* module call graph arguments renamed by name only */
    CHECK_OK(tp_program_module_calls_replace_uses(p, "activation", "act"));
    e = tp_program_module_call(p, 0);
    CHECK(e.signature && strcmp(e.signature->outputs[0].name, "act") == 0);
    CHECK(tp_graph_find_node(tp_program_graph(p), "activation") != NULL); /* the node keeps its name */
    CHECK_STATUS(tp_program_module_calls_replace_uses(p, "act", ""), TP_ERR_INVALID_ARG);
    CHECK_OK(tp_program_module_calls_replace_uses(p, "act", "activation"));
    CHECK_OK(tp_program_validate(p));
    tp_value out = tp_value_none();
    CHECK_OK(tp_program_call(p, NULL, 0, NULL, &out));
    CHECK(out.kind == TP_VAL_TENSOR && tensor_equals(out.u.tensor, mlp_expected, 8));
    tp_value_clear(&out);
    tp_program_free(p);
}

TEST_MAIN(T(test_mlp_call), T(test_missing_input), T(test_mlp_module), T(test_mlp_print), T(test_buffers_and_constants),
          T(test_batch_norm_training), T(test_accumulator), T(test_list_input_mutation), T(test_constraints),
          T(test_constrained_unlifted), T(test_derived_alone), T(test_nested_outputs), T(test_validate_reports_everything),
          T(test_copy_is_independent), T(test_rename_and_call_graph))
