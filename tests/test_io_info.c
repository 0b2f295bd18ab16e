/*
 * test_io_info.c - tp_program_input_info / tp_program_output_info.
 *
 * Expected values are read off the fixtures' own records: dynamic.pt2
 * (tests/fixtures/gen_tensorplay.py) declares x, y: [batch, 4], z: [2*batch, 4]
 * with batch in [1, 16] and returns (fc(x) + ..., z * ..., x + y), so the
 * outputs are [batch, 3], [2*batch, 4], [batch, 4]. A program built here
 * checks an offset (a slice x[1:] is s - 1), a scale (cat(x, x) is 2*s)
 * and a dim that follows no affine rule of one symbol (cat(x, y) is s + t),
 * which is reported as dynamic without an expression.
 */
#include "test_util.h"
#include "tpexport/archive.h"

static void check_dim(const tp_io_dim *d, const char *symbol, int64_t size, int64_t scale, int64_t offset, int64_t min,
                      int64_t max, const char *what) {
    bool sym_ok = symbol ? (d->symbol && strcmp(d->symbol, symbol) == 0) : d->symbol == NULL;
    CHECK_MSG(sym_ok && d->size == size && d->scale == scale && d->offset == offset && d->min == min && d->max == max,
              "%s: got symbol %s size %lld scale %lld offset %lld range [%lld, %lld]", what,
              d->symbol ? d->symbol : "NULL", (long long)d->size, (long long)d->scale, (long long)d->offset,
              (long long)d->min, (long long)d->max);
}

TEST(test_dynamic_archive) {
    tp_archive *a = NULL;
    CHECK_OK(tp_archive_load("fixtures/tensorplay/dynamic.pt2", NULL, &a));
    if (!a) return;
    const tp_program *p = tp_archive_program(a, 0);
    CHECK(tp_program_num_user_inputs(p) == 3 && tp_program_num_user_outputs(p) == 3);
    tp_io_info f;
    CHECK_OK(tp_program_input_info(p, 0, &f));
    CHECK(strcmp(f.name, "x") == 0 && f.kind == TP_ARGK_TENSOR && f.dtype == TP_FLOAT32 && f.ndim == 2);
    check_dim(&f.dims[0], "batch", -1, 1, 0, 1, 16, "x[0]");
    check_dim(&f.dims[1], NULL, 4, 0, 0, 4, 4, "x[1]");
    CHECK_OK(tp_program_input_info(p, 2, &f));
    CHECK(strcmp(f.name, "z") == 0 && f.ndim == 2);
    check_dim(&f.dims[0], "batch", -1, 2, 0, 2, 32, "z[0]");
    const char *names[3] = {"add_0", "mul_0", "add"};
    const int64_t scale[3] = {1, 2, 1}, cols[3] = {3, 4, 4};
    for (int i = 0; i < 3; i++) {
        CHECK_OK(tp_program_output_info(p, i, &f));
        CHECK_MSG(strcmp(f.name, names[i]) == 0 && f.dtype == TP_FLOAT32 && f.ndim == 2, "output %d: %s", i, f.name);
        check_dim(&f.dims[0], "batch", -1, scale[i], 0, scale[i], 16 * scale[i], names[i]);
        check_dim(&f.dims[1], NULL, cols[i], 0, 0, cols[i], cols[i], names[i]);
    }
    CHECK(tp_program_input_info(p, 3, &f) == TP_ERR_INDEX);
    CHECK(strstr(tp_last_error(), "user input 3 out of range (the program has 3)") != NULL);
    CHECK(tp_program_output_info(p, -1, &f) == TP_ERR_INDEX);
    CHECK(tp_program_input_info(NULL, 0, &f) == TP_ERR_INVALID_ARG);
    tp_archive_free(a);
}

TEST(test_static_dtypes) {
    tp_archive *a = NULL;
    CHECK_OK(tp_archive_load("fixtures/tensorplay/ops.pt2", NULL, &a));
    if (!a) return;
    const tp_program *p = tp_archive_program(a, 0);
    tp_io_info f;
    int n = tp_program_num_user_outputs(p);
    CHECK(n == 10);
    CHECK_OK(tp_program_output_info(p, n - 1, &f)); /* view(float64) of a [2, 3, 4] input */
    CHECK(strcmp(f.name, "view") == 0 && f.dtype == TP_FLOAT64 && f.ndim == 2);
    check_dim(&f.dims[0], NULL, 2, 0, 0, 2, 2, "view[0]");
    check_dim(&f.dims[1], NULL, 12, 0, 0, 12, 12, "view[1]");
    tp_archive_free(a);
}

/* x: [s, 3], y: [t, 3] with s in [2, 100], t in [4, 50]; outputs
 * x[1:] ([s - 1, 3]), cat(x, x) ([2*s, 3]) and cat(x, y) ([s + t, 3]: no
 * affine rule of one symbol). */
static tp_program *make_program(void) {
    tp_graph *g;
    tp_signature *sig;
    if (tp_graph_new(&g) != TP_OK || tp_signature_new(&sig) != TP_OK) return NULL;
    tp_node *x, *y, *o[3];
    tp_tensor *mx, *my;
    CHECK_OK(tp_tensor_meta(TP_FLOAT32, 2, (const int64_t[]){5, 3}, &mx));
    CHECK_OK(tp_tensor_meta(TP_FLOAT32, 2, (const int64_t[]){7, 3}, &my));
    tp_value vx = tp_value_tensor(mx), vy = tp_value_tensor(my);
    CHECK_OK(tp_graph_placeholder(g, "x", &vx, &x));
    CHECK_OK(tp_graph_placeholder(g, "y", &vy, &y));
    tp_value args;
    CHECK_OK(tp_value_tuple(3, &args));
    args.u.seq.items[0] = tp_value_node(x);
    args.u.seq.items[1] = tp_value_int(0);
    args.u.seq.items[2] = tp_value_int(1);
    CHECK_OK(tp_graph_call_function(g, TP_OP_SLICE, &args, NULL, &o[0]));
    tp_value_clear(&args);
    for (int k = 0; k < 2; k++) {
        tp_value list;
        CHECK_OK(tp_value_list(2, &list));
        list.u.seq.items[0] = tp_value_node(x);
        list.u.seq.items[1] = tp_value_node(k == 0 ? x : y);
        CHECK_OK(tp_value_tuple(2, &args));
        args.u.seq.items[0] = list;
        args.u.seq.items[1] = tp_value_int(0);
        CHECK_OK(tp_graph_call_function(g, TP_OP_CAT, &args, NULL, &o[1 + k]));
        tp_value_clear(&args);
    }
    tp_value ov;
    CHECK_OK(tp_value_tuple(3, &ov));
    for (int k = 0; k < 3; k++) ov.u.seq.items[k] = tp_value_node(o[k]);
    CHECK_OK(tp_graph_output(g, &ov, NULL));
    tp_value_clear(&ov);
    CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor("y"), NULL, TP_PERSISTENT_UNSET));
    for (int k = 0; k < 3; k++)
        CHECK_OK(tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(o[k])), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, sig, &p));
    tp_value_clear(&vx);
    tp_value_clear(&vy);
    if (!p) return NULL;
    CHECK_OK(tp_program_add_range(p, "s", 2, 100));
    CHECK_OK(tp_program_add_range(p, "t", 4, 50));
    CHECK_OK(tp_program_add_dim_rule(p, &(tp_dim_rule){.site = {"x", 0}, .kind = TP_DIM_SYMBOL, .symbol = "s"}));
    CHECK_OK(tp_program_add_dim_rule(p, &(tp_dim_rule){.site = {"y", 0}, .kind = TP_DIM_SYMBOL, .symbol = "t"}));
    return p;
}

TEST(test_output_expressions) {
    tp_program *p = make_program();
    if (!p) return;
    tp_io_info f;
    CHECK_OK(tp_program_output_info(p, 0, &f));
    CHECK(f.ndim == 2);
    check_dim(&f.dims[0], "s", -1, 1, -1, 1, 99, "x[1:]");
    check_dim(&f.dims[1], NULL, 3, 0, 0, 3, 3, "x[1:] cols");
    CHECK_OK(tp_program_output_info(p, 1, &f));
    check_dim(&f.dims[0], "s", -1, 2, 0, 4, 200, "cat(x, x)");
    CHECK_OK(tp_program_output_info(p, 2, &f));
    check_dim(&f.dims[0], NULL, -1, 0, 0, 0, INT64_MAX, "cat(x, y)");
    check_dim(&f.dims[1], NULL, 3, 0, 0, 3, 3, "cat(x, y) cols");
    tp_program_free(p);
}

TEST_MAIN(T(test_dynamic_archive), T(test_static_dtypes), T(test_output_expressions))
