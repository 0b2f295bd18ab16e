/*
 * export_model.c - write a model once in C, run it eagerly, export it with a
 * dynamic batch and save it to an archive (the README shows this file).
 *
 *   build/examples: tpexport_export_model model.pt2
 *   then:           tpexport run model.pt2 ...   (or tp_archive_load)
 */
#include <stdio.h>
#include <string.h>

#include "tpexport/archive.h"
#include "tpexport/export.h"
#include "tpexport/nn.h"

/* forward(x) = fc2(relu(fc1(x))) + bias_buffer, counting calls in a buffer */
static tp_status mlp_forward(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out) {
    tp_t *x = tp_arg(ctx, &args[0]);
    tp_add_scalar_(ctx, tp_buffer(ctx, self, "calls"), 1); /* becomes a BUFFER_MUTATION output */
    tp_t *h = tp_relu(ctx, tp_forward(ctx, tp_module_child(self, "fc1"), x));
    tp_t *y = tp_forward(ctx, tp_module_child(self, "fc2"), h);
    return tp_return(ctx, y, out); /* the first failing op's error, if any */
}

static tp_status build(tp_module **out) {
    static const char *const arg_names[] = {"x"};
    tp_rng rng;
    tp_rng_seed(&rng, 42);
    tp_module *m, *fc1, *fc2;
    tp_tensor *calls;
    TP_TRY(tp_module_new("MLP", &m));
    tp_forward_decl fwd = {mlp_forward, 1, arg_names, NULL, NULL};
    tp_status st = tp_module_set_forward(m, &fwd);
    if (st == TP_OK) st = tp_nn_linear(&rng, 8, 16, true, &fc1);
    if (st == TP_OK) st = tp_module_add_child(m, "fc1", fc1);
    if (st == TP_OK) st = tp_nn_linear(&rng, 16, 4, true, &fc2);
    if (st == TP_OK) st = tp_module_add_child(m, "fc2", fc2);
    if (st == TP_OK) st = tp_tensor_zeros(TP_INT64, 0, NULL, &calls);
    if (st == TP_OK) {
        st = tp_module_register(m, TP_STATE_BUFFER, "calls", calls, true);
        tp_tensor_free(calls);
    }
    if (st != TP_OK) {
        tp_module_free(m);
        return st;
    }
    tp_module_train(m, false);
    *out = m;
    return TP_OK;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "model.pt2";
    if (argc > 2 || (argc > 1 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: %s [ARCHIVE]   (writes ARCHIVE, default model.pt2)\n", argv[0]);
        return argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) ? 0 : 2;
    }
    tp_module *model = NULL;
    tp_tensor *x = NULL;
    tp_shapes *shapes = NULL;
    tp_program *program = NULL;
    tp_value example = tp_value_none(), y = tp_value_none();

    tp_status st = build(&model);
    if (st == TP_OK) st = tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){4, 8}, &x);
    if (st == TP_OK) {
        example = tp_value_tensor(x);
        st = tp_module_run(model, NULL, &example, 1, NULL, &y); /* eager */
    }
    /* the batch may be 1..64; the feature dim stays 8 */
    if (st == TP_OK) st = tp_shapes_new(&shapes);
    if (st == TP_OK) st = tp_shapes_dim(shapes, "batch", 1, 64);
    if (st == TP_OK) st = tp_shapes_set(shapes, "x", 0, "batch");
    if (st == TP_OK) {
        tp_export_options opts = {0};
        opts.dynamic_shapes = shapes;
        st = tp_export(model, &example, 1, NULL, &opts, &program);
    }
    if (st == TP_OK) st = tp_program_print(program, stdout);
    if (st == TP_OK) {
        tp_archive_entry entry = {"model", program};
        st = tp_archive_save(path, &entry, 1, NULL, 0);
    }
    if (st == TP_OK) printf("saved %s\n", path);
    else fprintf(stderr, "error: %s: %s\n", tp_status_str(st), tp_last_error());

    tp_program_free(program);
    tp_shapes_free(shapes);
    tp_value_clear(&y);
    tp_value_clear(&example);
    tp_module_free(model);
    return st == TP_OK ? 0 : 1;
}
