/*
 * interp.h - run a graph node by node on input values.
 *
 * The interpreter walks the graph in order: a placeholder takes the next
 * input value, a get_attr node asks the caller's attribute resolver, a
 * call_function node calls its op (tp_op_bind + tp_op_call_bound) on its
 * arguments with node references replaced by the values computed for those
 * nodes, a call_method node calls the op named like the method, and the
 * output node's value, with references replaced, is the result. Each
 * intermediate value is released right after its last use, so a long chain
 * keeps only a few tensors alive.
 *
 * Preparing (tp_interp_new) checks the graph with tp_graph_lint and
 * precomputes the execution order and the last use of every value. A
 * prepared tp_interp is immutable: several threads may call tp_interp_call
 * on one tp_interp at the same time, each call keeping its values in its
 * own per-call state. The graph is borrowed: it must outlive the tp_interp
 * and must not be mutated while the tp_interp exists. Each node's meta["val"]
 * holds its output shapes, so a memory planner can size all activations
 * before running.
 */
#ifndef TPEXPORT_INTERP_H
#define TPEXPORT_INTERP_H

#include <stdint.h>
#include "graph.h"
#include "status.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Resolves a get_attr target (dotted path, e.g. "fc1.weight") to a value.
 * Must set *out to a NEW value owned by the interpreter (for a tensor held
 * elsewhere: tp_value_tensor(tp_tensor_retain(t))), or return an error
 * status with a message (the interpreter adds the node as context). Called
 * from the thread running the graph. */
typedef tp_status (*tp_attr_resolver)(void *user, const char *target, tp_value *out);

typedef struct tp_interp tp_interp;

/* Prepare graph g for running. g is borrowed (see above). Caller frees *out
 * with tp_interp_free. Errors: TP_ERR_VERIFY from tp_graph_lint (naming the
 * node), TP_ERR_NOMEM. */
TP_API tp_status tp_interp_new(const tp_graph *g, tp_interp **out);
/* Free a prepared interpreter (not the graph). NULL ok. */
TP_API void tp_interp_free(tp_interp *it);

/* The graph it runs (borrowed) and its number of inputs (placeholders). */
TP_API const tp_graph *tp_interp_graph(const tp_interp *it);
TP_API int64_t tp_interp_num_inputs(const tp_interp *it);

/* Run the graph. inputs: one value per placeholder, in graph order
 * (borrowed; tensors are retained while needed, never modified unless an
 * in-place op in the graph writes to them). resolver (may be NULL when the
 * graph has no get_attr nodes) and user serve get_attr nodes. *outputs
 * receives the output node's value with node references replaced by the
 * computed values - same tree structure (e.g. a tuple of tensors) - owned
 * by the caller (tp_value_clear). Thread-safe for one tp_interp.
 * Errors: TP_ERR_INVALID_ARG "expected 3 inputs, got 2"; TP_ERR_MISSING for
 * a get_attr node without a resolver; TP_ERR_UNSUPPORTED for a call_method
 * naming no op or an op without a kernel; any error of an op or the
 * resolver. A node's error message is prefixed "node <name> (<target>): ".
 * On error *outputs is None and all intermediate values are released. */
TP_API tp_status tp_interp_call(const tp_interp *it, const tp_value *inputs, int64_t n_inputs,
                                tp_attr_resolver resolver, void *user, tp_value *outputs);

/* One-shot: tp_interp_new + tp_interp_call + tp_interp_free. */
TP_API tp_status tp_interp_run(const tp_graph *g, const tp_value *inputs, int64_t n_inputs,
                               tp_attr_resolver resolver, void *user, tp_value *outputs);

#ifdef __cplusplus
}
#endif
#endif
