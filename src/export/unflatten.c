/*
 * unflatten.c - rebuild a module hierarchy from an exported program
 * (tp_unflatten, export.h): the root runs the whole unlifted program; each
 * submodule recorded in the module call graph gets a graph forward made of
 * the nodes between its call's inputs and outputs, reading its own state
 * through get_attr nodes (targets relative to the submodule) and writing
 * its state mutations back with copy_ nodes.
 */
#include <stdio.h>
#include <string.h>

#include "export_impl.h"

static tp_status ensure_child(tp_module *root, const char *path, tp_module **out) {
    tp_module *cur = root;
    const char *p = path;
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        char name[256];
        TP_CHECK(len > 0 && len < sizeof name, TP_ERR_INVALID_ARG, "bad module path '%s'", path);
        memcpy(name, p, len);
        name[len] = '\0';
        tp_module *next = tp_module_child(cur, name);
        if (!next) {
            TP_TRY(tp_module_new("InterpreterModule", &next));
            TP_TRY(tp_module_add_child(cur, name, next));
        }
        cur = next;
        p = dot ? dot + 1 : p + len;
    }
    *out = cur;
    return TP_OK;
}

typedef struct remap {
    const tp_node **from;
    tp_node **to;
    int n;
} remap;

static tp_node *lookup(const remap *r, const tp_node *n) {
    for (int i = 0; i < r->n; i++)
        if (r->from[i] == n) return r->to[i];
    return NULL;
}

static tp_status remap_value(const remap *r, const tp_value *v, tp_value *out) {
    if (v->kind == TP_VAL_NODE) {
        tp_node *n = lookup(r, v->u.node);
        TP_CHECK(n != NULL, TP_ERR_INTERNAL, "node '%s' has no copy", tp_node_name(v->u.node));
        *out = tp_value_node(n);
        return TP_OK;
    }
    TP_TRY(tp_value_copy(v, out));
    if (out->kind == TP_VAL_LIST || out->kind == TP_VAL_TUPLE || out->kind == TP_VAL_DICT) {
        for (int64_t i = 0; i < out->u.seq.n; i++) {
            tp_value c;
            tp_status st = remap_value(r, &v->u.seq.items[i], &c);
            if (st != TP_OK) {
                tp_value_clear(out);
                return st;
            }
            tp_value_clear(&out->u.seq.items[i]);
            out->u.seq.items[i] = c;
        }
    }
    return TP_OK;
}

static bool starts_with_module(const char *target, const char *fqn) {
    size_t n = strlen(fqn);
    return strncmp(target, fqn, n) == 0 && target[n] == '.';
}

/* Mark the nodes needed to compute `n`, stopping at inputs. */
static tp_status mark(const tp_program *p, const char *fqn, const tp_node *n, const tp_node *const *inputs, int n_in,
                      bool *inside, const tp_graph *g) {
    for (int i = 0; i < n_in; i++)
        if (inputs[i] == n) return TP_OK;
    int64_t idx = 0;
    for (const tp_node *c = tp_graph_first_node(g); c && c != n; c = tp_node_next(c)) idx++;
    if (inside[idx]) return TP_OK;
    if (tp_node_get_kind(n) == TP_NODE_PLACEHOLDER) {
        const tp_signature *sig = tp_program_signature(p);
        int k = tp_signature_find_input(sig, tp_node_name(n));
        const tp_input_spec *s = k >= 0 ? tp_signature_input(sig, k) : NULL;
        TP_CHECK(s && s->target && starts_with_module(s->target, fqn), TP_ERR_UNSUPPORTED,
                 "cannot unflatten '%s': it reads '%s', which is neither one of its inputs nor its own state", fqn,
                 s && s->target ? s->target : tp_node_name(n));
    }
    inside[idx] = true;
    for (int64_t i = 0; i < tp_node_num_inputs(n); i++) TP_TRY(mark(p, fqn, tp_node_input(n, i), inputs, n_in, inside, g));
    return TP_OK;
}

static tp_status build_submodule(tp_program *p, const char *fqn, const tp_module_call_signature *sig, tp_graph **out) {
    const tp_graph *g = tp_program_graph(p);
    const tp_signature *gsig = tp_program_signature(p);
    int64_t n_nodes = tp_graph_num_nodes(g);
    bool *inside = tp_calloc((size_t)(n_nodes + 1), sizeof *inside);
    const tp_node **inputs = tp_calloc((size_t)(sig->n_inputs + 1), sizeof *inputs);
    remap r = {tp_calloc((size_t)(n_nodes + sig->n_inputs + 1), sizeof(tp_node *)),
               tp_calloc((size_t)(n_nodes + sig->n_inputs + 1), sizeof(tp_node *)), 0};
    tp_graph *ng = NULL;
    tp_status st = inside && inputs && r.from && r.to ? TP_OK : tp_error(TP_ERR_NOMEM, "out of memory");
    for (int i = 0; st == TP_OK && i < sig->n_inputs; i++) {
        if (sig->inputs[i].kind != TP_ARGK_TENSOR) continue;
        inputs[i] = tp_graph_find_node(g, sig->inputs[i].name);
        if (!inputs[i]) st = tp_error(TP_ERR_UNSUPPORTED, "cannot unflatten '%s': input '%s' is not in the graph", fqn,
                                      sig->inputs[i].name);
    }
    for (int i = 0; st == TP_OK && i < sig->n_outputs; i++) {
        const tp_node *o = tp_graph_find_node(g, sig->outputs[i].name);
        if (!o) st = tp_error(TP_ERR_UNSUPPORTED, "cannot unflatten '%s': output '%s' is not in the graph", fqn,
                              sig->outputs[i].name);
        else st = mark(p, fqn, o, inputs, sig->n_inputs, inside, g);
    }
    /* mutations of the submodule's state computed inside it */
    int n_out = tp_signature_n_outputs(gsig);
    for (int i = 0; st == TP_OK && i < n_out; i++) {
        const tp_output_spec *os = tp_signature_output(gsig, i);
        if ((os->kind != TP_OUTPUT_BUFFER_MUTATION && os->kind != TP_OUTPUT_PARAMETER_MUTATION) ||
            !starts_with_module(os->target, fqn))
            continue;
        const tp_node *o = tp_graph_find_node(g, os->arg.name);
        if (o) {
            bool *trial = tp_calloc((size_t)(n_nodes + 1), sizeof *trial);
            if (!trial) {
                st = tp_error(TP_ERR_NOMEM, "out of memory");
                break;
            }
            memcpy(trial, inside, (size_t)n_nodes * sizeof *trial);
            if (mark(p, fqn, o, inputs, sig->n_inputs, trial, g) == TP_OK) memcpy(inside, trial, (size_t)n_nodes);
            tp_clear_error();
            tp_free(trial);
        }
    }
    if (st == TP_OK) st = tp_graph_new(&ng);
    /* placeholders */
    for (int i = 0; st == TP_OK && i < sig->n_inputs; i++) {
        const char *name = sig->n_forward_arg_names == sig->n_inputs ? sig->forward_arg_names[i] : sig->inputs[i].name;
        tp_node *ph = NULL;
        const tp_value *mv = inputs[i] ? tp_node_meta_val(inputs[i]) : NULL;
        st = tp_graph_placeholder(ng, name, mv, &ph);
        if (st == TP_OK && inputs[i]) {
            r.from[r.n] = inputs[i];
            r.to[r.n++] = ph;
        }
    }
    /* nodes, in order */
    int64_t idx = 0;
    size_t prefix = strlen(fqn) + 1;
    for (const tp_node *n = tp_graph_first_node(g); st == TP_OK && n; n = tp_node_next(n), idx++) {
        if (!inside[idx]) continue;
        tp_node *copy = NULL;
        if (tp_node_get_kind(n) == TP_NODE_PLACEHOLDER) {
            int k = tp_signature_find_input(gsig, tp_node_name(n));
            const tp_input_spec *s = tp_signature_input(gsig, k);
            st = tp_graph_get_attr(ng, s->target + prefix, tp_node_meta_val(n), &copy);
        } else if (tp_node_get_kind(n) == TP_NODE_GET_ATTR) {
            const char *t = tp_node_target(n);
            st = starts_with_module(t, fqn) ? tp_graph_get_attr(ng, t + prefix, tp_node_meta_val(n), &copy)
                                            : tp_error(TP_ERR_UNSUPPORTED, "cannot unflatten '%s': it reads '%s'", fqn, t);
        } else if (tp_node_get_kind(n) == TP_NODE_CALL_FUNCTION) {
            tp_value a = tp_value_none(), kw = tp_value_none();
            st = remap_value(&r, tp_node_args(n), &a);
            if (st == TP_OK) st = remap_value(&r, tp_node_kwargs(n), &kw);
            if (st == TP_OK) st = tp_graph_call_function(ng, tp_node_op(n), &a, &kw, &copy);
            tp_value_clear(&a);
            tp_value_clear(&kw);
        } else {
            st = tp_error(TP_ERR_UNSUPPORTED, "cannot unflatten '%s': node '%s' is a %s", fqn, tp_node_name(n),
                          tp_node_kind_name(tp_node_get_kind(n)));
        }
        if (st == TP_OK) {
            r.from[r.n] = n;
            r.to[r.n++] = copy;
        }
    }
    /* state write-back */
    for (int i = 0; st == TP_OK && i < n_out; i++) {
        const tp_output_spec *os = tp_signature_output(gsig, i);
        if ((os->kind != TP_OUTPUT_BUFFER_MUTATION && os->kind != TP_OUTPUT_PARAMETER_MUTATION) ||
            !starts_with_module(os->target, fqn))
            continue;
        const tp_node *o = tp_graph_find_node(g, os->arg.name);
        tp_node *src = o ? lookup(&r, o) : NULL;
        if (!src) continue;
        tp_node *dst = NULL, *cp = NULL;
        st = tp_graph_get_attr(ng, os->target + prefix, tp_node_meta_val(o), &dst);
        tp_value a = tp_value_none();
        if (st == TP_OK) st = tp_value_tuple(2, &a);
        tp_value a0 = tp_value_node(dst), a1 = tp_value_node(src);
        if (st == TP_OK) st = tp_value_seq_set(&a, 0, &a0);
        if (st == TP_OK) st = tp_value_seq_set(&a, 1, &a1);
        if (st == TP_OK) st = tp_graph_call_function(ng, TP_OP_COPY_, &a, NULL, &cp);
        tp_value_clear(&a);
    }
    /* output */
    if (st == TP_OK) {
        tp_value leaves = tp_value_none(), outv = tp_value_none();
        st = tp_value_list(sig->n_outputs, &leaves);
        for (int i = 0; st == TP_OK && i < sig->n_outputs; i++) {
            tp_node *o = lookup(&r, tp_graph_find_node(g, sig->outputs[i].name));
            if (!o) o = lookup(&r, tp_graph_find_node(g, sig->outputs[i].name)); /* an input passed through */
            if (!o) {
                st = tp_error(TP_ERR_UNSUPPORTED, "cannot unflatten '%s': output '%s' not rebuilt", fqn,
                              sig->outputs[i].name);
                break;
            }
            tp_value nv = tp_value_node(o);
            st = tp_value_seq_set(&leaves, i, &nv);
        }
        if (st == TP_OK && sig->out_spec && tp_treespec_num_leaves(sig->out_spec) == sig->n_outputs)
            st = tp_pytree_unflatten(sig->out_spec, tp_value_at(&leaves, 0), sig->n_outputs, &outv);
        else if (st == TP_OK && sig->n_outputs == 1) st = tp_value_copy(tp_value_at(&leaves, 0), &outv);
        else if (st == TP_OK) st = tp_value_copy(&leaves, &outv);
        if (st == TP_OK) st = tp_graph_output(ng, &outv, NULL);
        tp_value_clear(&leaves);
        tp_value_clear(&outv);
    }
    tp_free(inside);
    tp_free(inputs);
    tp_free(r.from);
    tp_free(r.to);
    if (st != TP_OK) {
        tp_graph_free(ng);
        return st;
    }
    *out = ng;
    return TP_OK;
}

tp_status tp_unflatten(tp_program *p, tp_module **out) {
    *out = NULL;
    tp_module *root = NULL;
    TP_TRY(tp_module_new("UnflattenedModule", &root));
    tp_named_state all;
    tp_status st = tp_program_named_state(p, TP_FILTER_ALL, &all);
    if (st != TP_OK) {
        tp_module_free(root);
        return st;
    }
    for (int i = 0; st == TP_OK && i < all.n; i++)
        st = tp_module_set_state(root, all.items[i].name, all.items[i].kind, all.items[i].tensor,
                                 all.items[i].persistent);
    tp_named_state_free(&all);
    /* the root: the unlifted program */
    tp_module *um = NULL;
    if (st == TP_OK) st = tp_program_module(p, &um);
    tp_graph *rg = NULL;
    tp_value defaults = tp_value_none();
    if (st == TP_OK) st = tp_graph_copy(tp_module_graph(um), &rg);
    if (st == TP_OK) st = tp_value_dict(&defaults);
    const tp_signature *sig = tp_program_signature(p);
    for (int i = 0; st == TP_OK && i < tp_signature_n_inputs(sig); i++) {
        const tp_input_spec *s = tp_signature_input(sig, i);
        const tp_value *ex = s->kind == TP_INPUT_USER_INPUT ? tp_program_example_input(p, s->arg.name) : NULL;
        if (!ex) continue;
        tp_value c;
        st = tp_value_copy(ex, &c);
        if (st == TP_OK) st = tp_value_dict_set(&defaults, s->arg.name, &c);
        tp_value_clear(&c);
    }
    if (st == TP_OK) {
        st = tp_module_set_graph(root, rg, &defaults);
        rg = NULL;
    }
    tp_graph_free(rg);
    tp_value_clear(&defaults);
    /* the submodules */
    for (int i = 0; st == TP_OK && i < tp_program_num_module_calls(p); i++) {
        tp_module_call_entry e = tp_program_module_call(p, i);
        if (!e.fqn[0] || !e.signature) continue;
        char base[512];
        snprintf(base, sizeof base, "%s", e.fqn);
        char *at = strchr(base, '@');
        if (at) *at = '\0';
        tp_module *child = NULL;
        st = ensure_child(root, base, &child);
        if (st != TP_OK || tp_module_graph(child)) continue; /* repeated calls share the first call's graph */
        tp_graph *g = NULL;
        st = build_submodule(p, base, e.signature, &g);
        if (st == TP_OK) st = tp_module_set_graph(child, g, NULL);
    }
    if (st != TP_OK) {
        tp_module_free(root);
        return st;
    }
    *out = root;
    return TP_OK;
}
