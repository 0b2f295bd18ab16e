/*
 * graph_impl.h - the graph and node structs and helpers shared by the graph
 * modules (graph.c, graph_print.c, interp.c) and by later layers that need
 * to walk graphs quickly. Not public: the public API is
 * include/tpexport/graph.h.
 */
#ifndef TPEXPORT_GRAPH_IMPL_H
#define TPEXPORT_GRAPH_IMPL_H

#include "internal.h"
#include "tpexport/graph.h"

/* An open-addressing map from strings to a node and a counter. Used for the
 * name -> node index and for fx's per-base name counters. */
typedef struct tp__name_slot {
    char *key; /* NULL: empty slot. Borrowed (node name) or owned (see own_keys). */
    tp_node *node;
    int64_t count;
} tp__name_slot;

typedef struct tp__name_map {
    tp__name_slot *slots;
    size_t cap; /* power of two, or 0 */
    size_t count;
    bool own_keys;
} tp__name_map;

struct tp_node {
    tp_graph *graph;
    tp_node *prev, *next;
    int64_t uid; /* unique within the graph, never reused; < graph->next_uid */
    tp_node_kind kind;
    char *name;   /* owned; unique in the graph */
    char *target; /* owned */
    tp_op op;     /* call_function: the op; call_method: op of that name or TP_OP_INVALID */
    tp_value args;     /* tuple */
    tp_value kwargs;   /* dict */
    tp_value meta_val; /* None when unknown */
    tp_value meta;     /* dict */
    unsigned flags;
    tp_node **users; /* n_users borrowed pointers, insertion order, unique */
    int64_t n_users, cap_users;
    tp_node **inputs; /* distinct nodes referenced by args then kwargs */
    int64_t n_inputs;
};

struct tp_graph {
    tp_node *first, *last;
    int64_t n_nodes;
    int64_t next_uid;
    tp_node *insert_before; /* NULL: append */
    tp_node **placeholders; /* the placeholder nodes in graph order (borrowed) */
    int64_t n_placeholders, cap_placeholders;
    tp__name_map names;     /* name -> node (keys borrowed from nodes) */
    tp__name_map bases;     /* name base -> last suffix used (keys owned) */
    unsigned long version;  /* bumped by every structural change (plans compare it) */
};

/* Deep-copy `src` into *dst, replacing each node reference by a copy of
 * lookup(ctx, node); when lookup returns NULL the reference is kept. On
 * error *dst is None and the lookup's error is returned. */
typedef tp_status (*tp__node_lookup)(void *ctx, const tp_node *node, const tp_value **out);
TP_HIDDEN tp_status tp__value_substitute(const tp_value *src, tp__node_lookup lookup, void *ctx,
                                         tp_value *dst);

/* Bind a call node's arguments (node references replaced through lookup)
 * to its op's schema: bound[0 .. *n_bound) (at most 64), owned by the
 * caller. Errors: a call_method naming no op, an op without schema, those
 * of tp_op_bind (interp.c). */
TP_HIDDEN tp_status tp__node_bind(const tp_node *n, tp__node_lookup lookup, void *ctx, tp_value *bound, int *n_bound);

/* Last uses, as torch.fx computes them for its "x = None" hints. Nodes are
 * numbered by position in graph order. *out_last receives, per node, the
 * position of its last user (-1 when it has none). *out_lists and
 * *out_offsets give, per node p, the nodes whose last user p is, in order
 * of first appearance in p's args then kwargs:
 * out_lists[out_offsets[p] .. out_offsets[p+1]) (n_nodes + 1 offsets).
 * Caller frees the three arrays with tp_free. References to nodes of other
 * graphs are ignored; for meaningful results the graph should pass
 * tp_graph_lint. */
TP_HIDDEN tp_status tp__graph_last_uses(const tp_graph *g, int64_t **out_lists, int64_t **out_offsets,
                                        int64_t **out_last);

/* tp_graph_create_node for loaders that must keep the names a file gives:
 * the node is called exactly `name` (reserved words such as "input" or
 * "max" included). Errors: TP_ERR_INVALID_ARG for an empty name,
 * TP_ERR_DUPLICATE if a node of that name exists; otherwise those of
 * tp_graph_create_node. */
TP_HIDDEN tp_status tp__graph_create_node_named(tp_graph *g, tp_node_kind kind, const char *target,
                                                const tp_value *args, const tp_value *kwargs, const char *name,
                                                tp_node **out);

/* Position of every node, indexed by uid (g->next_uid entries; -1 for
 * erased uids). Caller frees with tp_free. */
TP_HIDDEN tp_status tp__graph_positions(const tp_graph *g, int64_t **out);

#endif
