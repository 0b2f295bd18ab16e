/*
 * export_impl.h - internals shared by the export layer's files: the context
 * (ctx.c), the export driver (export.c), dynamic-shape specs and the
 * constraint solver (shapes.c), unflatten (unflatten.c) and the layer
 * library (nn.c).
 */
#ifndef TPEXPORT_EXPORT_IMPL_H
#define TPEXPORT_EXPORT_IMPL_H

#include "../internal.h"
#include "tpexport/export.h"
#include "tpexport/graph.h"
#include "tpexport/pytree.h"

/* A handle (export.h). */
struct tp_t {
    tp_tensor *t;   /* owned reference: the value (eager and export) */
    tp_node *node;  /* export: the node currently holding the value */
    int origin;     /* index into ctx->origins, or -1 */
    tp_op made_by;  /* op that produced it (TP_OP_INVALID: input/state) */
    bool poison;
    /* A symbolic int (tp_dim, tp_int_*): t is NULL, ival its value (export:
     * the example's) and node, when set, the int-valued node computing it. */
    bool is_int;
    int64_t ival;
    /* Export: a view of another handle's storage (made by a TP_OPF_VIEW op)
     * records its root base and the graph nodes that derived it from the
     * base, so an in-place write through it is written back to the base and
     * a view taken before the base was written is re-derived when used. */
    struct tp_t *view_base;
    tp_node **view_steps; /* graph-owned nodes, base first */
    int n_view_steps;
    unsigned version;      /* bumped by every in-place write into this handle's storage */
    unsigned base_version; /* view_base->version when node was derived */
};

/* Where a mutable value came from: a lifted state entry or a user input
 * (or container element). */
typedef enum origin_kind { ORIGIN_PARAM, ORIGIN_BUFFER, ORIGIN_CONST, ORIGIN_USER } origin_kind;

typedef struct origin {
    char *path;       /* state target ("linear.weight") or user path ("x", "xs[0]") */
    origin_kind kind;
    bool persistent;
    tp_node *initial; /* placeholder / getitem node */
    tp_t *handle;
    tp_tensor *model_tensor; /* state: the module's own tensor (borrowed) */
} origin;

/* A dim size read as an int during export (checked by the solver). */
typedef struct size_read {
    char *node;
    int dim; /* -1: the value of an int-valued node (tp_int_value) */
    int64_t value;
    char site[200];
} size_read;

/* One recorded child-module call. */
typedef struct call_record {
    char *fqn;             /* "layer", "layer@1" */
    int n_inputs, n_outputs;
    char **input_names;    /* node names; NULL entry: a constant (value in input_consts) */
    tp_value *input_consts;
    char **output_names;
    tp_treespec *in_spec, *out_spec;
    int n_arg_names;
    char **arg_names;
} call_record;

/* A draft failure collected by the context. */
typedef struct failure {
    tp_failure_kind kind;
    char *message;
} failure;

/* A forward table stored in a module's implementation slot. */
typedef struct fwd_method {
    char *name; /* "forward" or a method name */
    tp_forward_fn fn;
    int n_args;
    char **arg_names;
    tp_value *defaults;
    bool *has_default;
} fwd_method;

typedef struct fwd_table {
    fwd_method *methods;
    int n_methods;
    void *user;
    void (*user_free)(void *);
} fwd_table;

typedef struct modname {
    const tp_module *m;
    char *fqn;
    int n_calls;
} modname;

struct tp_ctx {
    bool exporting, draft;
    tp_status status;
    char *error;
    tp_t poison;
    tp_t **handles;
    int n_handles, cap_handles;
    tp_value **owned; /* individually allocated: pointers stay valid */
    int n_owned, cap_owned;
    /* export */
    tp_graph *g;
    tp_module *root;
    origin *origins;
    int n_origins, cap_origins;
    tp_node *first_user_ph; /* lifted constants are inserted before it */
    int n_lifted;
    modname *mods;
    int n_mods;
    const char **stack; /* fqns of the modules being called */
    int depth, cap_depth;
    call_record *calls;
    int n_calls, cap_calls;
    size_read *reads;
    int n_reads, cap_reads;
    failure *failures;
    int n_failures, cap_failures;
};

/* ctx.c */
TP_HIDDEN tp_status tp__ctx_new(bool exporting, bool draft, tp_ctx **out);
TP_HIDDEN void tp__ctx_free(tp_ctx *ctx);
TP_HIDDEN tp_t *tp__ctx_handle(tp_ctx *ctx, tp_tensor *t, tp_node *node, tp_op made_by); /* takes t */
TP_HIDDEN tp_t *tp__ctx_find(const tp_ctx *ctx, const tp_tensor *t);
/* The node currently holding h's value (a view is re-derived from its base
 * when the base was written since). */
TP_HIDDEN tp_status tp__ctx_node(tp_ctx *ctx, tp_t *h, tp_node **out);
TP_HIDDEN tp_status tp__ctx_add_failure(tp_ctx *ctx, tp_failure_kind kind, const char *msg);
TP_HIDDEN const fwd_method *tp__module_method(const tp_module *m, const char *method);
/* Bind positional/keyword values to a method's declared arguments: n_args
 * values (copies) in declaration order, defaults filled. */
TP_HIDDEN tp_status tp__bind_args(const fwd_method *fm, const tp_value *args, int n_args, const tp_value *kwargs,
                                  tp_value *bound);
/* Run a module method inside ctx on bound args (tensor leaves are handle
 * tensors); *out owned by the caller. */
TP_HIDDEN tp_status tp__ctx_run(tp_ctx *ctx, tp_module *m, const fwd_method *fm, const tp_value *bound,
                                tp_value *out);
TP_HIDDEN const char *tp__module_fqn(tp_ctx *ctx, const tp_module *m);

/* shapes.c: the constraint solver. */
typedef struct user_input_info {
    const char *name;       /* argument name */
    const tp_value *example; /* example value (tensors) */
    tp_node *placeholder;   /* NULL for args without tensors */
} user_input_info;

/* Check the spec against the program: symbolic shape propagation
 * (symshape.c), then the replay check for nodes without a symbolic rule (or
 * for every node when opts->replay_check). *notes: NULL or an informational
 * note for the draft report (caller frees). */
TP_HIDDEN tp_status tp__shapes_solve(tp_ctx *ctx, const tp_shapes *spec, const user_input_info *inputs, int n_inputs,
                                     tp_program *p, const tp_export_options *opts, char **notes);

#endif
