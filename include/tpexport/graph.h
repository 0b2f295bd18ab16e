/*
 * graph.h - the graph IR: a program as a list of nodes in execution order,
 * modelled on torch.fx as used by torch.export.
 *
 * A tp_graph owns its tp_node objects. Each node has:
 *  - a kind (placeholder, get_attr, call_function, call_method, output);
 *  - a name, unique within the graph, a Python identifier in snake_case.
 *    Creating a node with a taken or empty name derives a unique one the
 *    way torch.fx does: "add", "add_1", "add_2", ...; names that are Python
 *    keywords or builtins get a suffix too ("max" -> "max_1");
 *  - a target: call_function: an op (tp_op, printed as its name);
 *    call_method: a method name, which maps to the op of the same name at
 *    run time; get_attr: a dotted attribute path ("fc1.weight");
 *    placeholder: the argument name; output: "output";
 *  - args (a tuple value) and kwargs (a dict value). They hold node
 *    references (TP_VAL_NODE) and constants: None, bool, int, float, str,
 *    dtype, and lists, tuples and string-keyed dicts of those. Tensors are
 *    not allowed in args: graphs reach tensors through placeholders and
 *    get_attr nodes, which keeps graphs serialisable;
 *  - meta: "val" (the output's meta tensor(s): a meta tensor, or a tuple or
 *    list of them; computed by shape inference for call nodes, given by the
 *    creator for placeholders and get_attr nodes; None when unknown) and a
 *    dict of further string-keyed entries (e.g. "stack_trace");
 *  - flags (TP_NODE_IMPURE keeps a node from dead-code elimination);
 *  - its users: the nodes whose args/kwargs reference it, each once, in the
 *    order they started using it. Every mutating function below keeps the
 *    use lists consistent.
 *
 * New nodes go to the graph's insertion point: before a given node, or at
 * the end (the default). Graph building is single-threaded; a graph that is
 * no longer mutated may be read (printed, linted, interpreted) from several
 * threads at once.
 *
 * Pointers to nodes stay valid until the node is erased or the graph freed.
 * Strings and values returned by accessors are owned by the node: valid
 * until the node changes (set_args, rename, ...) or is erased.
 */
#ifndef TPEXPORT_GRAPH_H
#define TPEXPORT_GRAPH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "ops.h"
#include "status.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tp_graph tp_graph;
/* tp_node is declared in value.h. */

typedef enum tp_node_kind {
    TP_NODE_PLACEHOLDER = 0,
    TP_NODE_GET_ATTR,
    TP_NODE_CALL_FUNCTION,
    TP_NODE_CALL_METHOD,
    TP_NODE_OUTPUT,
    TP_NODE_KIND_COUNT
} tp_node_kind;

/* Node flags. */
enum {
    TP_NODE_IMPURE = 1u << 0 /* has side effects: dead-code elimination keeps it */
};

/* "placeholder", "get_attr", "call_function", "call_method", "output"
 * (torch.fx's op names); "?" for an invalid kind. */
TP_API const char *tp_node_kind_name(tp_node_kind kind);
/* Parse a kind name. TP_ERR_NOT_FOUND naming `name` if unknown. */
TP_API tp_status tp_node_kind_from_name(const char *name, tp_node_kind *out);

/* ---- graph lifetime ----------------------------------------------------- */

/* A new empty graph; caller frees with tp_graph_free. Errors: TP_ERR_NOMEM. */
TP_API tp_status tp_graph_new(tp_graph **out);
/* Free the graph and all its nodes. NULL is a no-op. */
TP_API void tp_graph_free(tp_graph *g);

/* ---- iteration and lookup ------------------------------------------------
 * Nodes are kept in execution order. All returned nodes are owned by the
 * graph. Loop: for (tp_node *n = tp_graph_first_node(g); n; n = tp_node_next(n)) */

TP_API int64_t tp_graph_num_nodes(const tp_graph *g);
TP_API tp_node *tp_graph_first_node(const tp_graph *g); /* NULL if empty */
TP_API tp_node *tp_graph_last_node(const tp_graph *g);  /* NULL if empty */
TP_API tp_node *tp_node_next(const tp_node *n);         /* NULL after the last */
TP_API tp_node *tp_node_prev(const tp_node *n);         /* NULL before the first */
/* The node called `name`, or NULL. Constant time. */
TP_API tp_node *tp_graph_find_node(const tp_graph *g, const char *name);
/* The last output node, or NULL if there is none. */
TP_API tp_node *tp_graph_output_node(const tp_graph *g);
/* Placeholders in graph order: count, and the i-th (NULL if out of range).
 * Constant time. */
TP_API int64_t tp_graph_num_placeholders(const tp_graph *g);
TP_API tp_node *tp_graph_placeholder_at(const tp_graph *g, int64_t i);

/* ---- node accessors ------------------------------------------------------ */

TP_API tp_graph *tp_node_graph(const tp_node *n);
/* The node's name (owned by the node; changes with tp_node_rename). */
TP_API const char *tp_node_name(const tp_node *n);
TP_API tp_node_kind tp_node_get_kind(const tp_node *n);
/* The target as text: the op name for call_function, the method name for
 * call_method, the attribute path for get_attr, the argument name for a
 * placeholder, "output" for the output. Owned by the node. */
TP_API const char *tp_node_target(const tp_node *n);
/* call_function: its op. call_method: the op named like the method, or
 * TP_OP_INVALID if there is none. Other kinds: TP_OP_INVALID. */
TP_API tp_op tp_node_op(const tp_node *n);
/* Positional arguments: a tuple value (possibly empty), never NULL.
 * Keyword arguments: a dict value (possibly empty), never NULL. Owned by the
 * node; change them only through tp_node_set_args & co. */
TP_API const tp_value *tp_node_args(const tp_node *n);
TP_API const tp_value *tp_node_kwargs(const tp_node *n);
/* Users: nodes whose args or kwargs reference n, each once, in the order
 * they started using n. tp_node_user returns NULL if i is out of range. */
TP_API int64_t tp_node_num_users(const tp_node *n);
TP_API tp_node *tp_node_user(const tp_node *n, int64_t i);
/* Distinct nodes referenced by n's args then kwargs, in order of first
 * appearance: count, and the i-th (NULL if out of range). Linear in the
 * size of the arguments. */
TP_API int64_t tp_node_num_inputs(const tp_node *n);
TP_API tp_node *tp_node_input(const tp_node *n, int64_t i);

TP_API unsigned tp_node_flags(const tp_node *n);
TP_API void tp_node_set_flags(tp_node *n, unsigned flags);
/* True if dead-code elimination must keep n: flagged TP_NODE_IMPURE, or a
 * call whose op is TP_OPF_EFFECTFUL, TP_OPF_MUTATES or TP_OPF_INPLACE, or a
 * call_method whose method names no known op (unknown effects). */
TP_API bool tp_node_is_impure(const tp_node *n);

/* ---- node meta ------------------------------------------------------------
 * meta["val"]: the output's meta tensor(s); None when unknown. Never NULL;
 * owned by the node. */
TP_API const tp_value *tp_node_meta_val(const tp_node *n);
/* Set meta["val"] to a copy of `val` (NULL means None). Tensors inside are
 * stored as meta tensors (dtype and shape only; no data is kept alive).
 * Errors: TP_ERR_TYPE if val holds a node reference; TP_ERR_NOMEM. */
TP_API tp_status tp_node_set_meta_val(tp_node *n, const tp_value *val);
/* Further meta entries: a dict value (never NULL, owned by the node) of
 * string keys to values (no node references, no tensors). */
TP_API const tp_value *tp_node_meta(const tp_node *n);
/* Set entry `key` to a copy of `val` (replacing an existing entry);
 * val NULL removes the entry. Errors: TP_ERR_INVALID_ARG for an empty key,
 * TP_ERR_TYPE if val holds a node or tensor, TP_ERR_NOMEM. */
TP_API tp_status tp_node_meta_set(tp_node *n, const char *key, const tp_value *val);
/* Entry `key`, or NULL if absent. Owned by the node. */
TP_API const tp_value *tp_node_meta_get(const tp_node *n, const char *key);
/* String shortcuts: set a string entry (s copied); get it (NULL if absent
 * or not a string). E.g. tp_node_meta_set_str(n, "stack_trace", "..."). */
TP_API tp_status tp_node_meta_set_str(tp_node *n, const char *key, const char *s);
TP_API const char *tp_node_meta_get_str(const tp_node *n, const char *key);

/* ---- names ---------------------------------------------------------------- */

/* The name a node given the explicit name `hint` would get now: the hint
 * made an identifier (runs of characters other than [A-Za-z0-9_] become
 * one '_', a leading digit gets a '_' prefix, empty becomes "_unnamed"),
 * then made unique in g with a numeric suffix as torch.fx does
 * ("fc1.weight" -> "fc1_weight"; "add" -> "add_2" when "add" and "add_1"
 * are taken; "add_1" -> "add_2" likewise; Python keywords and builtins get
 * a suffix: "max" -> "max_1"). Nodes created without an explicit name take
 * their target as the hint, first converted to snake_case as torch.fx does
 * ("inputTensor" -> "input_tensor"). *out is a new string the caller frees
 * with tp_free. Errors: TP_ERR_NOMEM. */
TP_API tp_status tp_graph_make_name(const tp_graph *g, const char *hint, char **out);

/* Rename n: its new name is tp_graph_make_name(graph, name), so it stays
 * unique (renaming to the current name keeps it). Errors: TP_ERR_NOMEM. */
TP_API tp_status tp_node_rename(tp_node *n, const char *name);

/* ---- insertion point ------------------------------------------------------
 * New nodes are inserted before the insertion point node, or appended when
 * it is NULL (the default). The point stays at that node, so consecutive
 * insertions come out in creation order. Erasing or moving the point node
 * moves the point to the node that followed it. */

/* Insert before `before` (NULL: at the end). Errors: TP_ERR_INVALID_ARG if
 * `before` belongs to another graph. */
TP_API tp_status tp_graph_set_insert_point(tp_graph *g, tp_node *before);
/* Insert right after `after` (equivalent to before its current next node). */
TP_API tp_status tp_graph_insert_after(tp_graph *g, tp_node *after);
/* The current insertion point (NULL: the end). Save and restore it with
 * tp_graph_set_insert_point around a local insertion. */
TP_API tp_node *tp_graph_insert_point(const tp_graph *g);

/* ---- creating nodes ---------------------------------------------------------
 * All creators copy what they are given (deeply) and place the new node at
 * the insertion point; *out (may be NULL) receives it, owned by the graph.
 * args: a tuple or list value, or NULL for none; kwargs: a dict value or
 * NULL. Common errors: TP_ERR_TYPE for args/kwargs of the wrong kind or
 * holding a tensor; TP_ERR_INVALID_ARG for a reference to a node of another
 * graph; TP_ERR_NOMEM. */

/* A placeholder (graph input) for argument `name` with meta["val"] a copy
 * of `val` (NULL: unknown). The node's name is derived from `name`; its
 * target is `name` itself. Errors: TP_ERR_INVALID_ARG for an empty name. */
TP_API tp_status tp_graph_placeholder(tp_graph *g, const char *name, const tp_value *val, tp_node **out);

/* A get_attr node reading attribute `target` (dotted path, e.g.
 * "fc1.weight"), named from it ("fc1_weight"), with meta["val"] a copy of
 * `val` (NULL: unknown). Errors: TP_ERR_INVALID_ARG for an empty target. */
TP_API tp_status tp_graph_get_attr(tp_graph *g, const char *target, const tp_value *val, tp_node **out);

/* A call_function node calling `op`, named after the op. The arguments are
 * bound against the op's schema (tp_op_bind: count, names, types), and when
 * every referenced node has a meta["val"], the output meta is inferred with
 * tp_op_infer on the bound arguments with node references replaced by the
 * nodes' meta values - so shape errors surface here. Errors are those of
 * binding and inference (TP_ERR_TYPE, TP_ERR_SHAPE, TP_ERR_MISSING, ...),
 * prefixed "node <name> (<op>): "; on error no node is added. The stored
 * args are the ones given (not the bound form). */
TP_API tp_status tp_graph_call_function(tp_graph *g, tp_op op, const tp_value *args,
                                        const tp_value *kwargs, tp_node **out);

/* A call_method node calling `method` on args[0] (torch.fx style, e.g.
 * x.view(6)). If an op of that name exists, the call is bound and its meta
 * inferred as for tp_graph_call_function; otherwise the node is created
 * without meta (running it will fail with TP_ERR_UNSUPPORTED). Errors: as
 * above; TP_ERR_INVALID_ARG for an empty method name or no args. */
TP_API tp_status tp_graph_call_method(tp_graph *g, const char *method, const tp_value *args,
                                      const tp_value *kwargs, tp_node **out);

/* The output node, returning `value`: a node reference or a nested
 * tuple/list/dict of node references and constants (stored as args[0]).
 * Errors: TP_ERR_STATE if the graph already has an output node. */
TP_API tp_status tp_graph_output(tp_graph *g, const tp_value *value, tp_node **out);

/* Low-level creation, for loaders: a node of any kind with target text
 * `target`, the given args/kwargs and name (NULL or "": derived from the
 * target), without binding or inference (meta["val"] None). For
 * call_function, target must name an op (TP_ERR_NOT_FOUND otherwise). A
 * second output node is allowed here (tp_graph_lint reports it). */
TP_API tp_status tp_graph_create_node(tp_graph *g, tp_node_kind kind, const char *target,
                                      const tp_value *args, const tp_value *kwargs,
                                      const char *name, tp_node **out);

/* ---- mutating nodes ----------------------------------------------------------
 * These keep use lists consistent; they do not re-infer meta (call
 * tp_node_infer_meta after changing a call's arguments if shapes may
 * change). Nodes referenced must belong to n's graph (TP_ERR_INVALID_ARG).
 * On error, n is unchanged. */

/* Replace all positional arguments (tuple/list value or NULL for none). */
TP_API tp_status tp_node_set_args(tp_node *n, const tp_value *args);
/* Replace all keyword arguments (dict value or NULL for none). */
TP_API tp_status tp_node_set_kwargs(tp_node *n, const tp_value *kwargs);
/* Replace positional argument i (TP_ERR_INDEX if out of range). */
TP_API tp_status tp_node_set_arg(tp_node *n, int64_t i, const tp_value *value);
/* Set keyword argument `key` (added if absent). */
TP_API tp_status tp_node_set_kwarg(tp_node *n, const char *key, const tp_value *value);

/* Make every user of n reference `replacement` instead (in args and kwargs,
 * at any depth). Users for which filter(user, ctx) returns false keep n
 * (filter NULL: all users); `replacement` itself is never changed (so a node
 * created from n can take over n's uses without referencing itself). Use
 * lists follow. *n_replaced (may be NULL) receives the number of user nodes
 * changed. Errors: TP_ERR_INVALID_ARG if replacement belongs to another graph;
 * TP_ERR_NOMEM (users changed before the failure keep the change). */
typedef bool (*tp_node_filter)(const tp_node *user, void *ctx);
TP_API tp_status tp_node_replace_all_uses_with(tp_node *n, tp_node *replacement, tp_node_filter filter,
                                               void *ctx, int64_t *n_replaced);
/* In n's args and kwargs, replace references to `old_input` with
 * `new_input`. Errors: as tp_node_set_args. */
TP_API tp_status tp_node_replace_input_with(tp_node *n, tp_node *old_input, tp_node *new_input);

/* Erase n from g and free it. Refused with TP_ERR_STATE, naming the users,
 * while n has users. TP_ERR_INVALID_ARG if n is not in g. */
TP_API tp_status tp_graph_erase_node(tp_graph *g, tp_node *n);

/* Move n to just before `before` (NULL: to the end). Use lists are not
 * affected; moving a node before its inputs breaks topological order
 * (tp_graph_lint reports it). Errors: TP_ERR_INVALID_ARG if n or `before`
 * is not in g. */
TP_API tp_status tp_graph_move_before(tp_graph *g, tp_node *n, tp_node *before);

/* Re-run binding and shape inference of a call_function node (or a
 * call_method node naming a known op) from its inputs' meta["val"] and store
 * the result as its meta["val"]. If an input has no meta val, n's meta val
 * becomes None. Other kinds: no-op. Errors: binding/inference errors
 * prefixed "node <name> (<target>): "; n's meta is unchanged on error. */
TP_API tp_status tp_node_infer_meta(tp_node *n);
/* tp_node_infer_meta on every node, in order (shape propagation). Stops at
 * the first error. */
TP_API tp_status tp_graph_infer_meta(tp_graph *g);

/* ---- whole-graph operations ------------------------------------------------ */

/* A new graph with copies of all of src's nodes (same names, kinds,
 * targets, args with references remapped, meta, flags, order). Caller
 * frees *out with tp_graph_free. Errors: TP_ERR_NOMEM. */
TP_API tp_status tp_graph_copy(const tp_graph *src, tp_graph **out);

/* Inline src into dst: copies src's nodes other than placeholders and the
 * output node into dst at its insertion point, in order, with new unique
 * names derived from src's names. References to src's i-th placeholder are
 * replaced by a copy of inputs[i] (typically a node reference in dst, but
 * any argument value is allowed); n_inputs must equal src's placeholder
 * count. Meta and flags are copied (not re-inferred: call
 * tp_graph_infer_meta if shapes differ). *output (may be NULL) receives the
 * src output node's value (args[0]) with references remapped, owned by the
 * caller (None if src has no output node). On error dst is left as it
 * was. Errors: TP_ERR_INVALID_ARG (wrong input count, a value referencing
 * a node of another graph), TP_ERR_VERIFY (src references a node that
 * is defined later or not in src), TP_ERR_NOMEM. */
TP_API tp_status tp_graph_copy_into(tp_graph *dst, const tp_graph *src, const tp_value *inputs,
                                    int64_t n_inputs, tp_value *output);

/* Check the graph's invariants: every referenced node belongs to g and is
 * defined before its user (topological order), names are non-empty and
 * unique, every call_function names a valid op, there is exactly one output
 * node and it is the last node, and use lists match the references. Returns
 * TP_OK or TP_ERR_VERIFY with a message naming the offending node. Does not
 * require placeholders to come first. */
TP_API tp_status tp_graph_lint(const tp_graph *g);

/* Dead-code elimination: erase, to a fixpoint, nodes without users other
 * than placeholders, the output and impure nodes (tp_node_is_impure).
 * *changed (may be NULL) tells whether anything was erased. Errors: none in
 * practice (TP_OK). */
TP_API tp_status tp_graph_eliminate_dead_code(tp_graph *g, bool *changed);

/* ---- text form -----------------------------------------------------------------
 * Python-like code in the style of torch.fx's python_code / ExportedProgram
 * printing:
 *
 *   def forward(self, p_fc1_weight: "f32[4, 3]", x: "f32[2, 3]"):
 *       linear: "f32[2, 4]" = torch.ops.aten.linear.default(x, p_fc1_weight);  x = p_fc1_weight = None
 *       relu: "f32[2, 4]" = torch.ops.aten.relu.default(linear);  linear = None
 *       return (relu,)
 *
 * Annotations show dtype (f32 f64 f16 bf16 i64 i32 i16 i8 u8 b8) and shape
 * for nodes whose meta val is a tensor; kwargs print as `name = value`;
 * getitem as `getitem = max_1[0]`; get_attr as `self.fc1.weight`;
 * call_method as `x.view(6)`; "; a = b = None" lists values whose last use
 * is that line (as torch.fx does). */

/* Render into buf (size bytes, always NUL-terminated if size > 0; output
 * truncated to fit). Returns the full length (excluding the NUL), as
 * snprintf does; 0 (and an empty buffer) if memory runs out. */
TP_API size_t tp_graph_to_buffer(const tp_graph *g, char *buf, size_t size);
/* Render into a new string; caller frees *out with tp_free. Errors:
 * TP_ERR_NOMEM. */
TP_API tp_status tp_graph_to_string(const tp_graph *g, char **out);
/* Write to f. Errors: TP_ERR_IO if writing fails, TP_ERR_NOMEM. */
TP_API tp_status tp_graph_print(const tp_graph *g, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
