/*
 * test_signature.c - graph signature: specs, views, maps, backward signature,
 * renaming, cloning, legacy conversion and text form.
 */
#include "test_util.h"

/* The signature of tensorplay's example: buffer stats, fc1 weight/bias, user
 * x; outputs: the stats mutation and the user output. */
static tp_signature *example(void) {
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_BUFFER, tp_arg_tensor("b_stats"), "stats", TP_PERSISTENT_YES));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_BUFFER, tp_arg_tensor("b_tmp"), "tmp", TP_PERSISTENT_NO));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_CONSTANT_TENSOR, tp_arg_tensor("c_scale"), "scale", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_fc1_weight"), "fc1.weight", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_fc1_bias"), "fc1.bias", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_CUSTOM_OBJ, tp_arg_custom_obj("obj", "my.Class"), "obj", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_TOKEN, tp_arg_token("token_in"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("y"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_BUFFER_MUTATION, tp_arg_tensor("add_"), "stats"));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_PARAMETER_MUTATION, tp_arg_tensor("mul_"), "fc1.bias"));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_INPUT_MUTATION, tp_arg_tensor("copy_"), "y"));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_TOKEN, tp_arg_token("token_out"), NULL));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor("relu"), NULL));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_constant("", tp_value_int(3)), NULL));
    return s;
}

static void check_strings(tp_signature *s, tp_signature_view v, const char *const *want, int n) {
    tp_strings got = {0};
    CHECK_OK(tp_signature_view_names(s, v, &got));
    CHECK_MSG(got.n == n, "view %d: %d names, expected %d", (int)v, got.n, n);
    for (int i = 0; i < got.n && i < n; i++) CHECK_MSG(strcmp(got.items[i], want[i]) == 0, "view %d item %d: %s", (int)v, i, got.items[i]);
    tp_strings_free(&got);
}

TEST(test_views) {
    tp_signature *s = example();
    check_strings(s, TP_VIEW_USER_INPUTS, (const char *[]){"x", "y"}, 2);
    check_strings(s, TP_VIEW_PARAMETERS, (const char *[]){"fc1.weight", "fc1.bias"}, 2);
    check_strings(s, TP_VIEW_BUFFERS, (const char *[]){"stats", "tmp"}, 2);
    check_strings(s, TP_VIEW_NON_PERSISTENT_BUFFERS, (const char *[]){"tmp"}, 1);
    check_strings(s, TP_VIEW_LIFTED_TENSOR_CONSTANTS, (const char *[]){"scale"}, 1);
    check_strings(s, TP_VIEW_LIFTED_CUSTOM_OBJS, (const char *[]){"obj"}, 1);
    check_strings(s, TP_VIEW_INPUT_TOKENS, (const char *[]){"token_in"}, 1);
    check_strings(s, TP_VIEW_OUTPUT_TOKENS, (const char *[]){"token_out"}, 1);
    check_strings(s, TP_VIEW_USER_OUTPUTS, (const char *[]){"relu", ""}, 2);
    CHECK(tp_signature_n_mutations(s) == 3);
    CHECK(tp_signature_is_param(s, "p_fc1_weight"));
    CHECK(!tp_signature_is_param(s, "b_stats"));
    CHECK(tp_signature_is_buffer(s, "b_stats"));
    CHECK(!tp_signature_is_buffer(s, "x"));
    CHECK(tp_signature_find_input(s, "x") == 7);
    CHECK(tp_signature_find_input(s, "nope") == -1);
    CHECK(tp_signature_find_output(s, "relu") == 4);
    tp_signature_free(s);
}

static void check_map(tp_signature *s, tp_signature_map m, const char *const *kv, int n) {
    tp_string_map got = {0};
    CHECK_OK(tp_signature_map_names(s, m, &got));
    CHECK_MSG(got.n == n, "map %d: %d entries, expected %d", (int)m, got.n, n);
    for (int i = 0; i < got.n && i < n; i++) {
        CHECK(strcmp(got.keys[i], kv[2 * i]) == 0);
        CHECK(strcmp(got.values[i], kv[2 * i + 1]) == 0);
    }
    if (n) CHECK(strcmp(tp_string_map_get(&got, kv[0]), kv[1]) == 0);
    CHECK(tp_string_map_get(&got, "absent") == NULL);
    tp_string_map_free(&got);
}

TEST(test_maps) {
    tp_signature *s = example();
    check_map(s, TP_MAP_INPUTS_TO_PARAMETERS, (const char *[]){"p_fc1_weight", "fc1.weight", "p_fc1_bias", "fc1.bias"}, 2);
    check_map(s, TP_MAP_INPUTS_TO_BUFFERS, (const char *[]){"b_stats", "stats", "b_tmp", "tmp"}, 2);
    check_map(s, TP_MAP_INPUTS_TO_CONSTANTS, (const char *[]){"c_scale", "scale"}, 1);
    check_map(s, TP_MAP_BUFFERS_TO_MUTATE, (const char *[]){"add_", "stats"}, 1);
    check_map(s, TP_MAP_PARAMETERS_TO_MUTATE, (const char *[]){"mul_", "fc1.bias"}, 1);
    check_map(s, TP_MAP_USER_INPUTS_TO_MUTATE, (const char *[]){"copy_", "y"}, 1);
    tp_signature_free(s);
}

TEST(test_backward) {
    tp_signature *s = example();
    bool has = true;
    tp_backward_signature b;
    CHECK_OK(tp_signature_backward(s, &has, &b));
    CHECK(!has);
    tp_backward_signature_free(&b);
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_LOSS_OUTPUT, tp_arg_tensor("loss"), NULL));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_GRADIENT_TO_PARAMETER, tp_arg_tensor("g_w"), "fc1.weight"));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_GRADIENT_TO_USER_INPUT, tp_arg_tensor("g_x"), "x"));
    CHECK_OK(tp_signature_backward(s, &has, &b));
    CHECK(has);
    CHECK(b.loss_output && strcmp(b.loss_output, "loss") == 0);
    CHECK(b.gradients_to_parameters.n == 1 && strcmp(tp_string_map_get(&b.gradients_to_parameters, "g_w"), "fc1.weight") == 0);
    CHECK(b.gradients_to_user_inputs.n == 1 && strcmp(tp_string_map_get(&b.gradients_to_user_inputs, "g_x"), "x") == 0);
    tp_backward_signature_free(&b);
    /* loss output is a user output too */
    tp_strings outs;
    CHECK_OK(tp_signature_view_names(s, TP_VIEW_USER_OUTPUTS, &outs));
    CHECK(outs.n == 3 && strcmp(outs.items[2], "loss") == 0);
    tp_strings_free(&outs);
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_LOSS_OUTPUT, tp_arg_tensor("loss2"), NULL));
    CHECK_STATUS(tp_signature_backward(s, &has, &b), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("loss output must be one tensor argument");
    tp_signature_free(s);
}

TEST(test_refusals) {
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_STATUS(tp_signature_add_input(s, TP_INPUT_BUFFER, tp_arg_tensor("b"), "b", TP_PERSISTENT_UNSET), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("buffer input 'b' requires a persistence flag");
    CHECK_STATUS(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p"), NULL, TP_PERSISTENT_UNSET), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("PARAMETER input 'p' requires a target");
    CHECK_STATUS(tp_signature_add_output(s, TP_OUTPUT_BUFFER_MUTATION, tp_arg_tensor("m"), NULL), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("BUFFER_MUTATION output 'm' requires a target");
    CHECK_STATUS(tp_signature_add_input(s, (tp_input_kind)42, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET), TP_ERR_INVALID_ARG);
    tp_value l;
    CHECK_OK(tp_value_list(0, &l));
    CHECK_STATUS(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_constant("c", l), NULL, TP_PERSISTENT_UNSET), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("must be an int, float, bool, str or None");
    tp_value_clear(&l);
    CHECK(tp_signature_n_inputs(s) == 0 && tp_signature_n_outputs(s) == 0);
    tp_input_kind ik;
    tp_output_kind ok;
    CHECK_OK(tp_input_kind_from_name("CONSTANT_TENSOR", &ik));
    CHECK(ik == TP_INPUT_CONSTANT_TENSOR);
    CHECK_OK(tp_output_kind_from_name("USER_INPUT_MUTATION", &ok));
    CHECK(ok == TP_OUTPUT_USER_INPUT_MUTATION);
    CHECK_STATUS(tp_input_kind_from_name("WEIGHT", &ik), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("unknown input kind 'WEIGHT'");
    tp_signature_free(s);
    tp_signature_free(NULL);
}

TEST(test_rename_and_clone) {
    tp_signature *s = example(), *c = NULL;
    CHECK_OK(tp_signature_clone(s, &c));
    int count = 0;
    CHECK_OK(tp_signature_replace_all_uses(s, "relu", "relu_1", &count));
    CHECK(count == 1);
    CHECK(tp_signature_find_output(s, "relu_1") == 4);
    CHECK(tp_signature_find_output(c, "relu") == 4); /* the clone is independent */
    CHECK(tp_signature_find_output(c, "relu_1") == -1);
    CHECK_OK(tp_signature_replace_all_uses(s, "x", "inp", &count));
    CHECK(count == 1 && tp_signature_find_input(s, "inp") == 7);
    CHECK_OK(tp_signature_replace_all_uses(s, "zzz", "w", &count));
    CHECK(count == 0);
    const tp_output_spec *o = tp_signature_output(c, 5);
    CHECK(o && o->arg.kind == TP_ARGK_CONSTANT && o->arg.value.kind == TP_VAL_INT && o->arg.value.u.i == 3);
    const tp_input_spec *i = tp_signature_input(c, 5);
    CHECK(i && i->arg.kind == TP_ARGK_CUSTOM_OBJ && strcmp(i->arg.class_fqn, "my.Class") == 0);
    CHECK(tp_signature_input(c, 99) == NULL && tp_signature_output(c, -1) == NULL);
    tp_signature_free(s);
    tp_signature_free(c);
}

TEST(test_legacy) {
    const char *params[] = {"w", "b"}, *bufs[] = {"rm", "tmp"}, *np[] = {"tmp"}, *users[] = {"x"};
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_from_legacy(params, 2, bufs, 2, np, 1, users, 1, &s));
    char *text = NULL;
    CHECK_OK(tp_signature_to_string(s, &text));
    const char *want =
        "\n# inputs\n"
        "w: PARAMETER target='w'\n"
        "b: PARAMETER target='b'\n"
        "rm: BUFFER target='rm' persistent=True\n"
        "tmp: BUFFER target='tmp' persistent=False\n"
        "x: USER_INPUT\n"
        "\n# outputs\n\n";
    CHECK_MSG(text && strcmp(text, want) == 0, "got:\n%s", text ? text : "(null)");
    tp_free(text);
    tp_signature_free(s);
}

TEST(test_text) {
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_BUFFER, tp_arg_tensor("b_stats"), "stats", TP_PERSISTENT_YES));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_fc1_weight"), "fc1.weight", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_BUFFER_MUTATION, tp_arg_tensor("add_"), "stats"));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor("add"), NULL));
    char *text = NULL;
    CHECK_OK(tp_signature_to_string(s, &text));
    /* exactly tensorplay's str(ep.graph_signature) for the same program */
    const char *want =
        "\n# inputs\n"
        "b_stats: BUFFER target='stats' persistent=True\n"
        "p_fc1_weight: PARAMETER target='fc1.weight'\n"
        "x: USER_INPUT\n"
        "\n# outputs\n"
        "add_: BUFFER_MUTATION target='stats'\n"
        "add: USER_OUTPUT\n";
    CHECK_MSG(text && strcmp(text, want) == 0, "got:\n%s", text ? text : "(null)");
    tp_free(text);
    char line[64];
    tp_input_spec_str(tp_signature_input(s, 0), line, 20); /* truncation is safe */
    CHECK(strlen(line) == 19);
    tp_signature_free(s);
}

TEST_MAIN(T(test_views), T(test_maps), T(test_backward), T(test_refusals), T(test_rename_and_clone), T(test_legacy),
          T(test_text))
