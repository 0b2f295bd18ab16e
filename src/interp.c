/*
 * interp.c - the graph interpreter (see interp.h).
 *
 * tp_interp_new turns a linted graph into an immutable plan: one step per
 * node in order, each with the slots (node positions) to release after it.
 * tp_interp_call keeps all per-call values in a slot array it allocates, so
 * the plan (and the graph) are only read while running.
 */
#include <inttypes.h>
#include <string.h>

#include "graph_impl.h"
#include "tpexport/interp.h"

typedef struct interp_step {
    const tp_node *node;
    int64_t input_index;          /* placeholders: which input */
    int64_t free_begin, free_end; /* slots to release after this step: frees[begin..end) */
} interp_step;

struct tp_interp {
    const tp_graph *graph;
    int64_t n_steps;
    interp_step *steps;
    int64_t *frees;      /* flat lists of slot positions */
    int64_t *slot_of;    /* node uid -> slot position */
    int64_t n_uids;
    int64_t n_inputs;
};

void tp_interp_free(tp_interp *it) {
    if (!it) return;
    tp_free(it->steps);
    tp_free(it->frees);
    tp_free(it->slot_of);
    tp_free(it);
}

const tp_graph *tp_interp_graph(const tp_interp *it) { return it->graph; }
int64_t tp_interp_num_inputs(const tp_interp *it) { return it->n_inputs; }

tp_status tp_interp_new(const tp_graph *g, tp_interp **out) {
    TP_CHECK(g != NULL, TP_ERR_INVALID_ARG, "graph is NULL");
    TP_TRY(tp_graph_lint(g));
    tp_interp *it = tp_calloc(1, sizeof *it);
    TP_CHECK(it != NULL, TP_ERR_NOMEM, "out of memory preparing a graph");
    it->graph = g;
    it->n_steps = g->n_nodes;
    it->n_uids = g->next_uid;
    int64_t *lists = NULL, *offsets = NULL, *last = NULL;
    tp_status st = tp__graph_last_uses(g, &lists, &offsets, &last);
    if (st == TP_OK) st = tp__graph_positions(g, &it->slot_of);
    size_t nn = (size_t)(it->n_steps ? it->n_steps : 1);
    if (st == TP_OK) {
        it->steps = tp_calloc(nn, sizeof *it->steps);
        it->frees = tp_malloc((nn + (size_t)offsets[it->n_steps]) * sizeof *it->frees);
        if (!it->steps || !it->frees) st = tp_error(TP_ERR_NOMEM, "out of memory preparing a graph");
    }
    if (st == TP_OK) {
        int64_t p = 0, nf = 0;
        for (const tp_node *n = g->first; n; n = n->next, p++) {
            interp_step *s = &it->steps[p];
            s->node = n;
            s->input_index = n->kind == TP_NODE_PLACEHOLDER ? it->n_inputs++ : -1;
            s->free_begin = nf;
            for (int64_t k = offsets[p]; k < offsets[p + 1]; k++) it->frees[nf++] = lists[k];
            /* a value nobody uses is released right away */
            if (last[p] < 0 && n->kind != TP_NODE_OUTPUT) it->frees[nf++] = p;
            s->free_end = nf;
        }
    }
    tp_free(lists);
    tp_free(offsets);
    tp_free(last);
    if (st != TP_OK) {
        tp_interp_free(it);
        return st;
    }
    *out = it;
    return TP_OK;
}

typedef struct run_ctx {
    const tp_interp *it;
    tp_value *slots;
} run_ctx;

static tp_status lookup_slot(void *ctx, const tp_node *node, const tp_value **out) {
    const run_ctx *c = ctx;
    /* the plan was linted: every reference is an earlier node of the graph */
    *out = &c->slots[c->it->slot_of[node->uid]];
    return TP_OK;
}

tp_status tp__node_bind(const tp_node *n, tp__node_lookup lookup, void *ctx, tp_value *bound, int *n_bound) {
    tp_op op = n->op;
    if (op == TP_OP_INVALID)
        return tp_error(TP_ERR_UNSUPPORTED, "no op named '%s' to run call_method %s", n->target, n->target);
    const tp_schema *schema = tp_op_schema(op);
    if (!schema) {
        TP_TRY(tp_ops_init());
        return tp_error(TP_ERR_NOT_FOUND, "op %s has no schema", tp_op_name(op));
    }
    TP_CHECK(schema->n_args <= 64, TP_ERR_INTERNAL, "op %s has too many schema arguments", tp_op_name(op));
    int64_t n_args = tp_value_len(&n->args);
    TP_CHECK(n_args <= 64, TP_ERR_INVALID_ARG, "too many arguments (%" PRId64 ")", n_args);
    tp_value args, kwargs = tp_value_none();
    TP_TRY(tp__value_substitute(&n->args, lookup, ctx, &args));
    tp_status st = tp__value_substitute(&n->kwargs, lookup, ctx, &kwargs);
    if (st == TP_OK) st = tp_op_bind(op, args.u.seq.items, (int)n_args, &kwargs, bound);
    /* only the bound arguments hold inputs from here on */
    tp_value_clear(&args);
    tp_value_clear(&kwargs);
    if (st == TP_OK) *n_bound = schema->n_args;
    return st;
}

/* Run a call node: substitute, bind, call. */
static tp_status run_call(const run_ctx *c, const tp_node *n, tp_value *result) {
    tp_value bound[64];
    int n_bound;
    TP_TRY(tp__node_bind(n, lookup_slot, (void *)c, bound, &n_bound));
    tp_status st = tp_op_call_bound(n->op, bound, result);
    for (int i = 0; i < n_bound; i++) tp_value_clear(&bound[i]);
    return st;
}

tp_status tp_interp_call(const tp_interp *it, const tp_value *inputs, int64_t n_inputs, tp_attr_resolver resolver,
                         void *user, tp_value *outputs) {
    *outputs = tp_value_none();
    TP_CHECK(n_inputs == it->n_inputs, TP_ERR_INVALID_ARG, "expected %" PRId64 " input%s, got %" PRId64,
             it->n_inputs, it->n_inputs == 1 ? "" : "s", n_inputs);
    TP_CHECK(n_inputs == 0 || inputs != NULL, TP_ERR_INVALID_ARG, "inputs is NULL");
    tp_value *slots = tp_calloc((size_t)(it->n_steps ? it->n_steps : 1), sizeof *slots);
    TP_CHECK(slots != NULL, TP_ERR_NOMEM, "out of memory running a graph");
    run_ctx c = {.it = it, .slots = slots};
    tp_value result = tp_value_none();
    tp_status st = TP_OK;
    for (int64_t i = 0; i < it->n_steps && st == TP_OK; i++) {
        const interp_step *s = &it->steps[i];
        const tp_node *n = s->node;
        switch (n->kind) {
        case TP_NODE_PLACEHOLDER: st = tp_value_copy(&inputs[s->input_index], &slots[i]); break;
        case TP_NODE_GET_ATTR:
            if (!resolver) st = tp_error(TP_ERR_MISSING, "no attribute resolver given to read '%s'", n->target);
            else st = resolver(user, n->target, &slots[i]);
            if (st != TP_OK) tp_value_clear(&slots[i]);
            break;
        case TP_NODE_CALL_FUNCTION:
        case TP_NODE_CALL_METHOD: st = run_call(&c, n, &slots[i]); break;
        case TP_NODE_OUTPUT:
            if (tp_value_len(&n->args) > 0) st = tp__value_substitute(&n->args.u.seq.items[0], lookup_slot, &c, &result);
            break;
        default: st = tp_error(TP_ERR_INTERNAL, "invalid node kind"); break;
        }
        if (st != TP_OK) {
            tp__node_error_context(n->name, n->target);
            break;
        }
        for (int64_t k = s->free_begin; k < s->free_end; k++) tp_value_clear(&slots[it->frees[k]]);
    }
    for (int64_t i = 0; i < it->n_steps; i++) tp_value_clear(&slots[i]);
    tp_free(slots);
    if (st != TP_OK) {
        tp_value_clear(&result);
        return st;
    }
    *outputs = result;
    return TP_OK;
}

tp_status tp_interp_run(const tp_graph *g, const tp_value *inputs, int64_t n_inputs, tp_attr_resolver resolver,
                        void *user, tp_value *outputs) {
    *outputs = tp_value_none();
    tp_interp *it;
    TP_TRY(tp_interp_new(g, &it));
    tp_status st = tp_interp_call(it, inputs, n_inputs, resolver, user, outputs);
    tp_interp_free(it);
    return st;
}
