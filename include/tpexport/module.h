/*
 * module.h - module trees: named parameters, buffers and constants, child
 * modules, dotted names, and an optional graph forward.
 *
 * A tp_module is a node of a module tree like torch.nn.Module: it holds
 * parameters, buffers (persistent or not) and constant tensors under simple
 * names (no dots), and child modules under simple names. Everything is kept
 * in registration order; dotted names ("layer1.0.conv.weight") address
 * entries of descendants. Iteration (named_parameters, named_buffers,
 * state dict) visits a module's own entries first, then each child in
 * registration order, recursively - the order PyTorch uses.
 *
 * A module may have a *graph forward*: a graph whose get_attr nodes read the
 * module's state by dotted target and whose placeholders are the forward's
 * user arguments. tp_program_module() (program.h) builds such a module.
 *
 * Ownership: a module holds one reference to each tensor registered in it
 * (tensors are shared, not copied). A child added with tp_module_add_child
 * is owned by its parent; tp_module_free frees the whole subtree and must be
 * called on roots only. Name lists returned are borrowed from the module.
 */
#ifndef TPEXPORT_MODULE_H
#define TPEXPORT_MODULE_H

#include <stdbool.h>
#include <stdint.h>

#include "graph.h"
#include "status.h"
#include "tensor.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tp_module tp_module;

typedef enum tp_state_kind {
    TP_STATE_PARAMETER = 0,
    TP_STATE_BUFFER,
    TP_STATE_CONSTANT
} tp_state_kind;

/* "parameter", "buffer", "constant". */
TP_API const char *tp_state_kind_name(tp_state_kind kind);

/* A new empty module whose type name (for printing) is `type_name` (NULL:
 * "Module"). Caller frees with tp_module_free. */
TP_API tp_status tp_module_new(const char *type_name, tp_module **out);
/* Free a root module and its subtree. NULL ok. */
TP_API void tp_module_free(tp_module *m);

TP_API const char *tp_module_type_name(const tp_module *m);

/* Register a tensor under `name` (a simple name: no dots, not empty). The
 * module retains t. Errors: TP_ERR_INVALID_ARG for a bad name,
 * TP_ERR_DUPLICATE "attribute 'name' already exists" if the name is taken by
 * any entry or child. persistent only matters for buffers. */
TP_API tp_status tp_module_register(tp_module *m, tp_state_kind kind, const char *name, tp_tensor *t,
                                    bool persistent);
/* Add `child` under `name`; the parent takes ownership (also on failure: the
 * child is freed then). Errors as tp_module_register. */
TP_API tp_status tp_module_add_child(tp_module *m, const char *name, tp_module *child);

/* Set the entry at dotted path `target` (e.g. "fc1.weight"), creating empty
 * intermediate modules as needed. An existing entry of the same name is
 * replaced (its kind updated). Errors: TP_ERR_INVALID_ARG for an empty
 * path or empty component, TP_ERR_DUPLICATE if a component names an entry
 * that is not a module (or the leaf names a child module). */
TP_API tp_status tp_module_set_state(tp_module *m, const char *target, tp_state_kind kind, tp_tensor *t,
                                     bool persistent);

/* The child at dotted path (NULL if absent). Borrowed. "" returns m. */
TP_API tp_module *tp_module_child(const tp_module *m, const char *path);
/* The tensor at dotted path `target`; kind and persistence returned through
 * the optional out-pointers. Borrowed. TP_ERR_NOT_FOUND naming the first
 * missing component if absent. */
TP_API tp_status tp_module_get_state(const tp_module *m, const char *target, tp_tensor **t,
                                     tp_state_kind *kind, bool *persistent);

/* Iterate over the whole tree's entries in PyTorch order. A tp_named_state
 * list is allocated by the library and freed with tp_named_state_free;
 * names are dotted and owned by the list; tensors are borrowed. */
typedef struct tp_named_tensor {
    char *name;
    tp_tensor *tensor;
    tp_state_kind kind;
    bool persistent;
} tp_named_tensor;
typedef struct tp_named_state {
    int n;
    tp_named_tensor *items;
} tp_named_state;
TP_API void tp_named_state_free(tp_named_state *s);

/* Filter: parameters only / buffers only / constants only / the state dict
 * (parameters and persistent buffers, in tree order). For a program
 * (tp_program_named_state) the constants also hold the non-persistent
 * buffers, as tensorplay's ExportedProgram.constants does. */
typedef enum tp_state_filter {
    TP_FILTER_PARAMETERS,
    TP_FILTER_BUFFERS,
    TP_FILTER_CONSTANTS,
    TP_FILTER_STATE_DICT,
    TP_FILTER_ALL
} tp_state_filter;
TP_API tp_status tp_module_named_state(const tp_module *m, tp_state_filter filter, tp_named_state *out);

/* Children: count and i-th (name and module, borrowed). */
TP_API int tp_module_num_children(const tp_module *m);
TP_API tp_module *tp_module_child_at(const tp_module *m, int i, const char **name);

/* Training flag (recursive set). */
TP_API void tp_module_train(tp_module *m, bool training);
TP_API bool tp_module_is_training(const tp_module *m);

/* ---- implementation slot (used by the export layer, export.h) ----------
 * A module may carry an implementation: an opaque `ops` pointer (static
 * storage, e.g. a layer's vtable with its C forward) and `data` (owned by the
 * module: free_data(data) runs when the module is freed or the slot is
 * replaced; free_data may be NULL). */
TP_API void tp_module_set_impl(tp_module *m, const void *ops, void *data, void (*free_data)(void *data));
TP_API const void *tp_module_impl_ops(const tp_module *m);
TP_API void *tp_module_impl_data(const tp_module *m);
/* Look up an entry of m itself (simple name, no dots): the tensor (borrowed)
 * or NULL. */
TP_API tp_tensor *tp_module_own_state(const tp_module *m, const char *name);
/* Replace the tensor of an existing entry anywhere in the tree (dotted
 * target), keeping its kind and persistence; retains t. TP_ERR_NOT_FOUND if
 * absent. */
TP_API tp_status tp_module_replace_state(tp_module *m, const char *target, tp_tensor *t);

/* ---- graph forward ----------------------------------------------------- */

/* Give m a graph forward. The module takes ownership of `graph` (also on
 * failure). A call returns the output node's value as it is. `defaults`
 * (may be NULL) is a dict of user placeholder name -> default value used
 * when the caller omits that argument. */
TP_API tp_status tp_module_set_graph(tp_module *m, tp_graph *graph, const tp_value *defaults);
/* The graph forward (borrowed), or NULL. */
TP_API const tp_graph *tp_module_graph(const tp_module *m);

/* Call the graph forward: positional args bind to the graph's placeholders
 * in order, kwargs by placeholder name, missing ones from the defaults.
 * get_attr nodes read m's tree. *out receives the output node's value
 * (owned by the caller). Errors: TP_ERR_STATE if m has no graph forward;
 * binding errors as tp_program_call; run errors from the interpreter. */
TP_API tp_status tp_module_call(tp_module *m, const tp_value *args, int n_args, const tp_value *kwargs,
                                tp_value *out);

#ifdef __cplusplus
}
#endif
#endif
