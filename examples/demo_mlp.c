/*
 * demo_mlp.c - a short tour of the tpexport C API (what `make demo` runs).
 *
 * Builds the graph of a small MLP, Linear(4, 8) -> ReLU -> Linear(8, 3),
 * the way torch.export records it: the weights are *lifted* into
 * placeholders (p_fc1_weight, ...) that come before the user input x, and
 * the layers are call_function nodes. Every node's output shape is inferred
 * while building. It prints the graph, runs it with the interpreter, wraps
 * it into an exported program (signature + state + example input), calls
 * that, and saves it as a tensorplay archive (argv[1], default mlp.pt2) that
 * `tpexport inspect` and `tpexport run` can read.
 * The weights come from a fixed formula, so the output is always the same.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tpexport/archive.h"
#include "tpexport/tpexport.h"

enum { BATCH = 2, IN = 4, HIDDEN = 8, OUT = 3, N_WEIGHTS = 4 };

/* The model's parameters by attribute name (fc1.weight, fc1.bias, ...) and
 * their lifted placeholder names. */
typedef struct mlp_weights {
    const char *names[N_WEIGHTS];
    const char *placeholders[N_WEIGHTS];
    tp_tensor *tensors[N_WEIGHTS]; /* owned: freed at the end */
} mlp_weights;

/* A float32 tensor filled with a deterministic formula. */
static tp_status make_weight(int ndim, const int64_t *sizes, double seed, tp_tensor **out) {
    TP_TRY(tp_tensor_empty(TP_FLOAT32, ndim, sizes, out));
    float *data = tp_tensor_data(*out); /* fresh tensors are contiguous */
    for (int64_t i = 0; i < tp_tensor_numel(*out); i++) data[i] = (float)(0.5 * sin(seed + 0.7 * (double)i));
    return TP_OK;
}

/* A placeholder (is_input) or get_attr node whose meta["val"] is a meta
 * tensor shaped like t (dtype and shape, no data). Graph functions copy
 * what they are given, so our meta value is cleared after. */
static tp_status add_tensor_node(tp_graph *g, const char *name, const tp_tensor *t, bool is_input, tp_node **out) {
    tp_tensor *m;
    TP_TRY(tp_tensor_meta(tp_tensor_dtype(t), tp_tensor_ndim(t), tp_tensor_sizes(t), &m));
    tp_value val = tp_value_tensor(m); /* the value takes over m */
    tp_status st = is_input ? tp_graph_placeholder(g, name, &val, out) : tp_graph_get_attr(g, name, &val, out);
    tp_value_clear(&val);
    return st;
}

/* A call_function node op(inputs[0], ..., inputs[n-1]). Arguments are a
 * tuple value; TP_VAL_NODE items refer to earlier nodes. */
static tp_status add_call(tp_graph *g, tp_op op, int n, tp_node *const *inputs, tp_node **out) {
    tp_value args;
    TP_TRY(tp_value_tuple(n, &args));
    for (int i = 0; i < n; i++) args.u.seq.items[i] = tp_value_node(inputs[i]);
    tp_status st = tp_graph_call_function(g, op, &args, NULL, out); /* binds, infers the shape */
    tp_value_clear(&args);
    return st;
}

/* Print a titled tensor. */
static void show(const char *title, const tp_tensor *t) {
    printf("\n%s:\n", title);
    tp_tensor_print(t, stdout, 100);
    printf("\n");
}

/* Jump to cleanup on failure; the status's message is in tp_last_error(). */
#define TRY(expr) do { if ((st = (expr)) != TP_OK) goto done; } while (0)

int main(int argc, char **argv) {
    const char *archive_path = argc > 1 ? argv[1] : "mlp.pt2";
    if (argc > 2 || (argc > 1 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: %s [ARCHIVE]   (writes ARCHIVE, default mlp.pt2)\n", argv[0]);
        return argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) ? 0 : 2;
    }
    tp_status st = TP_OK;
    mlp_weights w = {.names = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"},
                     .placeholders = {"p_fc1_weight", "p_fc1_bias", "p_fc2_weight", "p_fc2_bias"}};
    tp_signature *sig = NULL;
    tp_program *program = NULL;
    tp_graph *g = NULL;
    tp_node *in, *p[N_WEIGHTS], *h;
    tp_value input = tp_value_none(), result = tp_value_none(), probs = tp_value_none();

    /* 1. Parameters (PyTorch layout: a Linear weight is [out_features, in_features])
     * and an input batch. */
    static const int64_t shapes[N_WEIGHTS][2] = {{HIDDEN, IN}, {HIDDEN}, {OUT, HIDDEN}, {OUT}};
    for (int i = 0; i < N_WEIGHTS; i++) /* weights 2-d, biases 1-d */
        TRY(make_weight(i % 2 ? 1 : 2, shapes[i], 1.0 + i, &w.tensors[i]));
    static const float x_data[BATCH][IN] = {{1.0f, -0.5f, 0.25f, 2.0f}, {-1.0f, 0.75f, 0.5f, -2.0f}};
    tp_tensor *x;
    TRY(tp_tensor_from_data(TP_FLOAT32, 2, (const int64_t[]){BATCH, IN}, x_data, &x));
    input = tp_value_tensor(x); /* the value owns x now */

    /* 2. The graph. Nodes are appended in execution order and named the way
     * torch.fx names them (a second linear -> linear_1). Lifted state first. */
    TRY(tp_graph_new(&g));
    for (int i = 0; i < N_WEIGHTS; i++) TRY(add_tensor_node(g, w.placeholders[i], w.tensors[i], true, &p[i]));
    TRY(add_tensor_node(g, "x", x, true, &in));
    TRY(add_call(g, TP_OP_LINEAR, 3, (tp_node *const[]){in, p[0], p[1]}, &h));
    TRY(add_call(g, TP_OP_RELU, 1, &h, &h));
    TRY(add_call(g, TP_OP_LINEAR, 3, (tp_node *const[]){h, p[2], p[3]}, &h));
    tp_value ret = tp_value_node(h); /* returns one tensor (a tuple would work too) */
    TRY(tp_graph_output(g, &ret, NULL));

    /* 3. Its text form; the shapes were inferred while building. */
    printf("graph:\n");
    TRY(tp_graph_print(g, stdout));

    /* 4. Run it: one input value per placeholder, in order (weights, then x). */
    tp_value flat[N_WEIGHTS + 1];
    for (int i = 0; i < N_WEIGHTS; i++) flat[i] = tp_value_tensor(w.tensors[i]); /* borrowed: not cleared */
    flat[N_WEIGHTS] = input;
    TRY(tp_interp_run(g, flat, N_WEIGHTS + 1, NULL, NULL, &result));
    show("input", x);
    show("output", result.u.tensor); /* the output node returns one tensor */

    /* 5. Ops also run eagerly, outside a graph: softmax(output, dim=1).
     * Arguments are borrowed; the result is a new value. */
    tp_value softmax_args[2] = {result, tp_value_int(1)};
    TRY(tp_op_call(TP_OP_SOFTMAX, softmax_args, 2, NULL, &probs));
    show("softmax(output, dim=1)", probs.u.tensor);

    /* 6. An exported program: the graph plus a signature saying what each
     * placeholder and output is, the state by target, and an example input.
     * The program takes ownership of the graph and the signature. */
    TRY(tp_signature_new(&sig));
    for (int i = 0; i < N_WEIGHTS; i++)
        TRY(tp_signature_add_input(sig, TP_INPUT_PARAMETER, tp_arg_tensor(w.placeholders[i]), w.names[i],
                                   TP_PERSISTENT_UNSET));
    TRY(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    TRY(tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(h)), NULL));
    st = tp_program_new(g, sig, &program);
    g = NULL, sig = NULL; /* owned by the program (or freed on failure) */
    TRY(st);
    for (int i = 0; i < N_WEIGHTS; i++)
        TRY(tp_program_set_state(program, w.names[i], TP_STATE_PARAMETER, w.tensors[i], true));
    TRY(tp_program_set_example_input(program, "x", &input));
    TRY(tp_program_validate(program)); /* reports every problem at once */
    printf("\nprogram:\n");
    TRY(tp_program_print(program, stdout));
    tp_value_clear(&result);
    TRY(tp_program_call(program, NULL, 0, NULL, &result)); /* x defaults to the example input */
    show("program(x)", result.u.tensor);

    /* 7. Save it as a tensorplay archive; `tpexport inspect/run FILE` read it. */
    tp_archive_entry entry = {"model", program};
    TRY(tp_archive_save(archive_path, &entry, 1, NULL, 0));
    printf("\nsaved %s\n", archive_path);

done:
    if (st != TP_OK) fprintf(stderr, "demo failed: %s: %s\n", tp_status_str(st), tp_last_error());
    tp_value_clear(&probs);
    tp_value_clear(&result);
    tp_value_clear(&input);
    tp_graph_free(g);
    tp_signature_free(sig);
    tp_program_free(program);
    for (int i = 0; i < N_WEIGHTS; i++) tp_tensor_free(w.tensors[i]);
    return st == TP_OK ? 0 : 1;
}
