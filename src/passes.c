/*
 * passes.c - program passes: tp_program_transform (run passes over a copy,
 * re-sync the signature to the new node names by position, re-validate) and
 * the shipped passes: dead-code elimination, constant folding and effect
 * token removal.
 *
 * Constant folding evaluates, at transform time, call_function nodes whose
 * inputs are all constants (literals, creation ops, CONSTANT state that no
 * one mutates) and stores each maximal folded result that is still needed as
 * a new CONSTANT state entry "_folded_constant_<k>" read by a get_attr node.
 * Results with more than FOLD_MAX_ELEMS elements are not folded (the node
 * stays and is computed at run time), so that folding never bloats the
 * program's state.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "graph_impl.h"
#include "program_impl.h"

/* The largest folded result kept as a constant, in elements (all tensors of
 * a node's result together). */
#define FOLD_MAX_ELEMS ((int64_t)1 << 20)

/* ---- signature helpers ------------------------------------------------- */

static bool is_mutation_kind(tp_output_kind k) {
    return k == TP_OUTPUT_BUFFER_MUTATION || k == TP_OUTPUT_PARAMETER_MUTATION || k == TP_OUTPUT_USER_INPUT_MUTATION;
}

/* Arguments whose name is the name of a graph node (and follows it). */
static bool arg_follows_node(tp_arg_kind k) {
    return k == TP_ARGK_TENSOR || k == TP_ARGK_SYM_INT || k == TP_ARGK_SYM_FLOAT || k == TP_ARGK_SYM_BOOL ||
           k == TP_ARGK_TOKEN || k == TP_ARGK_CUSTOM_OBJ;
}

/* A copy of sig into a new signature, without TOKEN specs when drop_tokens,
 * with input spec i renamed to in_names[i] and output spec i to
 * out_names[i] where those arrays (may be NULL) hold a non-NULL name. */
static tp_status signature_rebuild(const tp_signature *sig, bool drop_tokens, const char *const *in_names,
                                   const char *const *out_names, tp_signature **out) {
    tp_signature *ns;
    TP_TRY(tp_signature_new(&ns));
    tp_status st = TP_OK;
    for (int i = 0; st == TP_OK && i < tp_signature_n_inputs(sig); i++) {
        const tp_input_spec *s = tp_signature_input(sig, i);
        if (drop_tokens && s->kind == TP_INPUT_TOKEN) continue;
        tp_arg_spec a = s->arg;
        if (in_names && in_names[i]) a.name = in_names[i];
        st = tp_signature_add_input(ns, s->kind, a, s->target, s->persistent);
    }
    for (int i = 0; st == TP_OK && i < tp_signature_n_outputs(sig); i++) {
        const tp_output_spec *s = tp_signature_output(sig, i);
        if (drop_tokens && s->kind == TP_OUTPUT_TOKEN) continue;
        tp_arg_spec a = s->arg;
        if (out_names && out_names[i]) a.name = out_names[i];
        st = tp_signature_add_output(ns, s->kind, a, s->target);
    }
    if (st != TP_OK) {
        tp_signature_free(ns);
        return st;
    }
    *out = ns;
    return TP_OK;
}

/* Flattened leaves of the output node's value (None if there is no output
 * node). */
static tp_status output_leaves(const tp_graph *g, tp_value *leaves) {
    *leaves = tp_value_none();
    tp_node *out = tp_graph_output_node(g);
    if (!out) return TP_OK;
    const tp_value *v = tp_value_at(tp_node_args(out), 0);
    if (!v) return TP_OK;
    tp_treespec *spec = NULL;
    TP_TRY(tp_pytree_flatten(v, leaves, &spec));
    tp_treespec_free(spec);
    return TP_OK;
}

/* ---- transform --------------------------------------------------------- */

/* `path` ("x", "xs[0]") with root `old` replaced by `new_root`, or NULL if
 * the root differs. *err set on allocation failure. */
static char *rename_path(const char *path, const char *old, const char *new_root, bool *err) {
    size_t root = strcspn(path, "[.");
    if (strlen(old) != root || strncmp(path, old, root) != 0) return NULL;
    size_t n = strlen(new_root) + strlen(path + root) + 1;
    char *s = tp_malloc(n);
    if (!s) {
        *err = true;
        return NULL;
    }
    snprintf(s, n, "%s%s", new_root, path + root);
    return s;
}

/* Replace *slot (an owned string) by its renamed form when its root is one
 * of olds[]; each string is renamed at most once (renames are
 * simultaneous, so swapping two names works). */
static tp_status rename_slot(char **slot, const char *const *olds, const char *const *news, int n) {
    for (int k = 0; k < n; k++) {
        if (!olds[k] || !news[k]) continue;
        bool err = false;
        char *s = rename_path(*slot, olds[k], news[k], &err);
        TP_CHECK(!err, TP_ERR_NOMEM, "out of memory renaming '%s'", *slot);
        if (s) {
            tp_free(*slot);
            *slot = s;
            return TP_OK;
        }
    }
    return TP_OK;
}

/* After user inputs were renamed olds[k] -> news[k]: follow in example
 * inputs, dim rules, equality constraints and the module call graph. */
static tp_status rename_input_refs(tp_program *p, const char *const *olds, const char *const *news, int n) {
    for (int i = 0; i < p->n_examples; i++) TP_TRY(rename_slot(&p->examples[i].name, olds, news, n));
    for (int i = 0; i < p->n_dim_rules; i++) TP_TRY(rename_slot((char **)&p->dim_rules[i].site.input, olds, news, n));
    for (int i = 0; i < p->n_equalities; i++)
        for (int k = 0; k < p->equalities[i].n_sites; k++)
            TP_TRY(rename_slot((char **)&p->equalities[i].sites[k].input, olds, news, n));
    return TP_OK;
}

/* Rename arguments of the module call graph (exact names). */
static tp_status rename_call_args(tp_program *p, const char *const *olds, const char *const *news, int n) {
    for (int i = 0; i < p->n_calls; i++) {
        tp_module_call_signature *s = p->calls[i].sig;
        if (!s) continue;
        for (int side = 0; side < 2; side++) {
            tp_arg_spec *args = side ? s->outputs : s->inputs;
            int count = side ? s->n_outputs : s->n_inputs;
            for (int a = 0; a < count; a++) {
                for (int k = 0; k < n; k++) {
                    if (!olds[k] || !news[k] || strcmp(args[a].name, olds[k]) != 0) continue;
                    char *nn = tp_strdup(news[k]);
                    TP_CHECK(nn != NULL, TP_ERR_NOMEM, "out of memory renaming '%s'", olds[k]);
                    tp_free((char *)args[a].name);
                    args[a].name = nn;
                    break;
                }
            }
        }
    }
    return TP_OK;
}

/* Re-sync p's signature to its graph by position. had_ph[i] tells whether
 * input spec i named a placeholder before the passes ran, or after the last
 * pass that changed the signature (n_in_before specs then); if the count
 * differs anyway, only specs naming a placeholder now count. */
static tp_status resync_signature(tp_program *p, const bool *had_ph, int n_in_before) {
    const tp_signature *sig = p->signature;
    tp_graph *g = p->graph;
    int n_in = tp_signature_n_inputs(sig), n_out = tp_signature_n_outputs(sig);
    int64_t n_ph = tp_graph_num_placeholders(g);
    const char **in_names = tp_calloc((size_t)n_in + 1, sizeof *in_names);
    const char **out_names = tp_calloc((size_t)n_out + 1, sizeof *out_names);
    const char **olds = tp_calloc((size_t)n_in + n_out + 1, sizeof *olds);
    const char **news = tp_calloc((size_t)n_in + n_out + 1, sizeof *news);
    int *takers = tp_calloc((size_t)n_in + 1, sizeof *takers);
    tp_value leaves = tp_value_none();
    tp_status st = TP_OK;
    if (!in_names || !out_names || !olds || !news || !takers)
        st = tp_error(TP_ERR_NOMEM, "out of memory re-syncing the signature");

    /* inputs: the specs that take a placeholder, in order */
    int n_take = 0, n_user_renames = 0, n_renames = 0;
    for (int i = 0; st == TP_OK && i < n_in; i++) {
        const tp_input_spec *s = tp_signature_input(sig, i);
        bool takes;
        if (n_in == n_in_before) {
            takes = had_ph[i];
        } else {
            tp_node *ph = tp_graph_find_node(g, s->arg.name);
            takes = ph && tp_node_get_kind(ph) == TP_NODE_PLACEHOLDER;
        }
        if (takes) takers[n_take++] = i;
    }
    if (st == TP_OK && n_take != n_ph)
        st = tp_error(TP_ERR_VERIFY, "after the passes the graph has %" PRId64 " placeholder%s but the signature has %d "
                      "input spec%s for placeholders", n_ph, n_ph == 1 ? "" : "s", n_take, n_take == 1 ? "" : "s");
    for (int k = 0; st == TP_OK && k < n_take; k++) {
        const tp_input_spec *s = tp_signature_input(sig, takers[k]);
        const char *name = tp_node_name(tp_graph_placeholder_at(g, k));
        if (!arg_follows_node(s->arg.kind) || strcmp(s->arg.name, name) == 0) continue;
        in_names[takers[k]] = name;
        if (s->kind == TP_INPUT_USER_INPUT) {
            olds[n_user_renames] = s->arg.name;
            news[n_user_renames] = name;
            n_user_renames++;
        }
    }
    if (st == TP_OK) st = rename_input_refs(p, olds, news, n_user_renames);
    n_renames = n_user_renames;
    for (int i = 0; st == TP_OK && i < n_in; i++) {
        const tp_input_spec *s = tp_signature_input(sig, i);
        if (in_names[i] && s->kind != TP_INPUT_USER_INPUT) {
            olds[n_renames] = s->arg.name;
            news[n_renames] = in_names[i];
            n_renames++;
        }
    }

    /* outputs: flattened leaf i names output spec i */
    if (st == TP_OK) st = output_leaves(g, &leaves);
    if (st == TP_OK && tp_graph_output_node(g)) {
        int64_t n_leaves = tp_value_len(&leaves);
        if (n_leaves != n_out)
            st = tp_error(TP_ERR_VERIFY, "after the passes the graph has %" PRId64 " output%s but the signature has %d "
                          "output spec%s", n_leaves, n_leaves == 1 ? "" : "s", n_out, n_out == 1 ? "" : "s");
        for (int i = 0; st == TP_OK && i < n_out; i++) {
            const tp_value *leaf = tp_value_at(&leaves, i);
            const tp_output_spec *s = tp_signature_output(sig, i);
            if (leaf->kind != TP_VAL_NODE || !arg_follows_node(s->arg.kind)) continue;
            const char *name = tp_node_name(leaf->u.node);
            if (strcmp(s->arg.name, name) == 0) continue;
            out_names[i] = name;
            olds[n_renames] = s->arg.name;
            news[n_renames] = name;
            n_renames++;
        }
    }

    bool changed = false;
    for (int i = 0; i < n_in && !changed; i++) changed = in_names && in_names[i];
    for (int i = 0; i < n_out && !changed; i++) changed = out_names && out_names[i];
    tp_signature *ns = NULL;
    if (st == TP_OK && changed) st = rename_call_args(p, olds, news, n_renames);
    if (st == TP_OK && changed) st = signature_rebuild(sig, false, in_names, out_names, &ns);
    if (st == TP_OK && ns) {
        tp_signature_free(p->signature);
        p->signature = ns;
    }
    tp_value_clear(&leaves);
    tp_free(in_names);
    tp_free(out_names);
    tp_free(olds);
    tp_free(news);
    tp_free(takers);
    return st;
}

/* Which input specs name a placeholder, taken before the passes and again
 * after any pass that changed the signature. */
typedef struct placeholder_snapshot {
    const tp_signature *signature;
    int n_inputs;
    bool *had_placeholder; /* n_inputs entries */
} placeholder_snapshot;

static tp_status snapshot_placeholders(const tp_program *p, placeholder_snapshot *snap) {
    int n = tp_signature_n_inputs(p->signature);
    bool *had = tp_calloc((size_t)n + 1, sizeof *had);
    TP_CHECK(had != NULL, TP_ERR_NOMEM, "out of memory preparing passes");
    for (int i = 0; i < n; i++) {
        tp_node *ph = tp_graph_find_node(p->graph, tp_signature_input(p->signature, i)->arg.name);
        had[i] = ph && tp_node_get_kind(ph) == TP_NODE_PLACEHOLDER;
    }
    tp_free(snap->had_placeholder);
    snap->signature = p->signature;
    snap->n_inputs = n;
    snap->had_placeholder = had;
    return TP_OK;
}

tp_status tp_program_transform(tp_program *p, const tp_pass *passes, int n_passes, tp_program **out) {
    TP_CHECK(p && out, TP_ERR_INVALID_ARG, "transform needs a program and an output pointer");
    TP_CHECK(n_passes >= 0 && (n_passes == 0 || passes), TP_ERR_INVALID_ARG, "transform needs %d passes, got none",
             n_passes);
    for (int i = 0; i < n_passes; i++)
        TP_CHECK(passes[i].fn != NULL, TP_ERR_INVALID_ARG, "pass %d (%s) has no function", i,
                 passes[i].name ? passes[i].name : "unnamed");
    tp_program *c;
    TP_TRY(tp_program_copy(p, &c));
    placeholder_snapshot snap = {0};
    tp_status st = snapshot_placeholders(c, &snap);
    bool any = false;
    for (int i = 0; st == TP_OK && i < n_passes; i++) {
        bool modified = false;
        st = passes[i].fn(c, passes[i].user, &modified);
        if (st != TP_OK) {
            tp_error_context("pass %s", passes[i].name ? passes[i].name : "unnamed");
            break;
        }
        any = any || modified;
        /* a pass that edited the signature answers for it from now on */
        if (c->signature != snap.signature || tp_signature_n_inputs(c->signature) != snap.n_inputs)
            st = snapshot_placeholders(c, &snap);
    }
    if (st == TP_OK && !any) {
        tp_free(snap.had_placeholder);
        tp_program_free(c);
        *out = tp_program_retain(p);
        return TP_OK;
    }
    if (st == TP_OK) st = resync_signature(c, snap.had_placeholder, snap.n_inputs);
    tp_free(snap.had_placeholder);
    if (st == TP_OK) st = tp_program_validate(c);
    if (st != TP_OK) {
        tp_program_free(c);
        return st;
    }
    tp_program_invalidate_module(c);
    *out = c;
    return TP_OK;
}

/* ---- dead code ---------------------------------------------------------- */

tp_status tp_pass_dead_code(tp_program *p, void *user, bool *modified) {
    TP_UNUSED(user);
    bool changed = false;
    TP_TRY(tp_graph_eliminate_dead_code(p->graph, &changed));
    if (modified) *modified = changed;
    return TP_OK;
}

/* ---- constant folding --------------------------------------------------- */

typedef struct fold_state {
    const tp_program *p;
    int64_t n_uid;
    bool *is_const;   /* by node uid */
    bool *kept;       /* by node uid: stays in the graph after folding */
    tp_value *values; /* by node uid: the value of constant nodes, else None */
} fold_state;

static tp_status lookup_value(void *ctx, const tp_node *node, const tp_value **out) {
    const fold_state *f = ctx;
    *out = node->uid < f->n_uid ? &f->values[node->uid] : NULL;
    return TP_OK;
}

/* Elements of all tensors in v (meta or real). */
static int64_t value_numel(const tp_value *v) {
    if (v->kind == TP_VAL_TENSOR) return tp_tensor_numel(v->u.tensor);
    int64_t total = 0;
    if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE || v->kind == TP_VAL_DICT)
        for (int64_t i = 0; i < v->u.seq.n && total <= FOLD_MAX_ELEMS; i++) total += value_numel(&v->u.seq.items[i]);
    return total;
}

/* Does n's value reach a node that may write into it - an impure call -
 * directly or through views (a folded copy would then be written instead
 * of a fresh value, or a state constant would change)? */
static bool reaches_mutation(const tp_node *n, int depth) {
    if (depth > 64) return true; /* conservative */
    for (int64_t i = 0; i < tp_node_num_users(n); i++) {
        const tp_node *u = tp_node_user(n, i);
        tp_node_kind k = tp_node_get_kind(u);
        if (k == TP_NODE_OUTPUT) continue;
        if (k != TP_NODE_CALL_FUNCTION && k != TP_NODE_CALL_METHOD) continue;
        if (tp_node_is_impure(u)) return true;
        if ((tp_op_flags(tp_node_op(u)) & TP_OPF_VIEW) && reaches_mutation(u, depth + 1)) return true;
    }
    return false;
}

/* Is a get_attr node a constant: a CONSTANT state entry that no output
 * spec and no node mutates? */
static bool attr_is_constant(const tp_program *p, const tp_node *n) {
    const char *target = tp_node_target(n);
    tp_state_kind kind;
    if (tp_module_get_state(p->state, target, NULL, &kind, NULL) != TP_OK) {
        tp_clear_error();
        return false;
    }
    if (kind != TP_STATE_CONSTANT) return false;
    for (int i = 0; i < tp_signature_n_outputs(p->signature); i++) {
        const tp_output_spec *s = tp_signature_output(p->signature, i);
        if (is_mutation_kind(s->kind) && s->target && strcmp(s->target, target) == 0) return false;
    }
    for (tp_node *m = tp_graph_first_node(p->graph); m; m = tp_node_next(m))
        if (tp_node_get_kind(m) == TP_NODE_GET_ATTR && strcmp(tp_node_target(m), target) == 0 &&
            reaches_mutation(m, 0))
            return false;
    return true;
}

/* Can a call node be evaluated now, given its inputs? */
static bool call_is_foldable(const fold_state *f, const tp_node *n) {
    if (tp_node_get_kind(n) != TP_NODE_CALL_FUNCTION) return false;
    tp_op op = tp_node_op(n);
    if (op == TP_OP_INVALID || tp_node_is_impure(n) || (tp_op_flags(op) & TP_OPF_RANDOM) || !tp_op_has_kernel(op))
        return false;
    for (int64_t i = 0; i < tp_node_num_inputs(n); i++) {
        const tp_node *in = tp_node_input(n, i);
        if (in->uid >= f->n_uid || !f->is_const[in->uid]) return false;
    }
    if (value_numel(tp_node_meta_val(n)) > FOLD_MAX_ELEMS) return false;
    return !reaches_mutation(n, 0);
}

/* Evaluate a foldable call on its inputs' values. */
static tp_status eval_call(fold_state *f, const tp_node *n, tp_value *out) {
    tp_value args = tp_value_none(), kwargs = tp_value_none();
    tp_status st = tp__value_substitute(tp_node_args(n), lookup_value, f, &args);
    if (st == TP_OK) st = tp__value_substitute(tp_node_kwargs(n), lookup_value, f, &kwargs);
    if (st == TP_OK) st = tp_op_call(tp_node_op(n), tp_value_at(&args, 0), (int)tp_value_len(&args), &kwargs, out);
    tp_value_clear(&args);
    tp_value_clear(&kwargs);
    return st;
}

/* The first user of n in graph order that stays in the graph (NULL if none). */
static tp_node *first_kept_user(const fold_state *f, const tp_node *n) {
    for (tp_node *m = tp_node_next(n); m; m = tp_node_next(m)) {
        if (m->uid >= f->n_uid || !f->kept[m->uid]) continue;
        for (int64_t i = 0; i < tp_node_num_users(n); i++)
            if (tp_node_user(n, i) == m) return m;
    }
    return NULL;
}

/* Store n's value as a new constant and make n's users read it. */
static tp_status materialize(tp_program *p, fold_state *f, tp_node *n) {
    char target[64];
    for (;;) {
        snprintf(target, sizeof target, "_folded_constant_%d", p->folded_constants++);
        if (tp_module_get_state(p->state, target, NULL, NULL, NULL) != TP_OK) break;
    }
    tp_clear_error();
    tp_tensor *t;
    TP_TRY(tp_tensor_clone(f->values[n->uid].u.tensor, &t)); /* owns its storage: no aliasing of state */
    tp_status st = tp_program_set_state(p, target, TP_STATE_CONSTANT, t, false);
    tp_value val = tp_value_tensor(t); /* takes over our reference */
    tp_graph *g = p->graph;
    tp_node *saved = tp_graph_insert_point(g), *attr = NULL;
    tp_node *before = first_kept_user(f, n);
    if (st == TP_OK) st = tp_graph_set_insert_point(g, before ? before : tp_node_next(n));
    if (st == TP_OK) st = tp_graph_get_attr(g, target, &val, &attr);
    tp_graph_set_insert_point(g, saved);
    tp_value_clear(&val);
    if (st == TP_OK) st = tp_node_replace_all_uses_with(n, attr, NULL, NULL, NULL);
    return st;
}

static void fold_state_free(fold_state *f) {
    for (int64_t i = 0; f->values && i < f->n_uid; i++) tp_value_clear(&f->values[i]);
    tp_free(f->values);
    tp_free(f->is_const);
    tp_free(f->kept);
}

tp_status tp_pass_constant_fold(tp_program *p, void *user, bool *modified) {
    TP_UNUSED(user);
    if (modified) *modified = false;
    tp_graph *g = p->graph;
    fold_state f = {.p = p, .n_uid = g->next_uid};
    size_t n = (size_t)(f.n_uid ? f.n_uid : 1);
    f.is_const = tp_calloc(n, sizeof *f.is_const);
    f.kept = tp_calloc(n, sizeof *f.kept);
    f.values = tp_calloc(n, sizeof *f.values); /* all None */
    if (!f.is_const || !f.kept || !f.values) {
        fold_state_free(&f);
        return tp_error(TP_ERR_NOMEM, "out of memory folding constants");
    }
    tp_status st = TP_OK;
    /* forward: which nodes are constant, and their values */
    for (tp_node *m = tp_graph_first_node(g); st == TP_OK && m; m = tp_node_next(m)) {
        tp_node_kind k = tp_node_get_kind(m);
        if (k == TP_NODE_GET_ATTR) {
            if (!attr_is_constant(p, m) || reaches_mutation(m, 0)) continue;
            tp_tensor *t;
            st = tp_module_get_state(p->state, tp_node_target(m), &t, NULL, NULL);
            if (st == TP_OK) {
                f.values[m->uid] = tp_value_tensor(tp_tensor_retain(t));
                f.is_const[m->uid] = true;
            }
        } else if (call_is_foldable(&f, m)) {
            tp_value v = tp_value_none();
            tp_status est = eval_call(&f, m, &v);
            if (est == TP_ERR_NOMEM) {
                st = est;
                break;
            }
            if (est != TP_OK || value_numel(&v) > FOLD_MAX_ELEMS) {
                /* leave it to run time (where an error will surface with context) */
                tp_value_clear(&v);
                tp_clear_error();
                continue;
            }
            f.values[m->uid] = v;
            f.is_const[m->uid] = true;
        }
    }
    /* backward: which constants are still needed, and how */
    tp_node **fold = NULL;
    int64_t n_fold = 0;
    if (st == TP_OK && !(fold = tp_calloc(n, sizeof *fold))) st = tp_error(TP_ERR_NOMEM, "out of memory folding constants");
    for (tp_node *m = tp_graph_last_node(g); st == TP_OK && m; m = tp_node_prev(m)) {
        if (!f.is_const[m->uid]) {
            f.kept[m->uid] = true;
            continue;
        }
        bool needed = false;
        for (int64_t i = 0; i < tp_node_num_users(m) && !needed; i++) needed = f.kept[tp_node_user(m, i)->uid];
        if (!needed) continue; /* used by folded nodes only (or dead) */
        if (tp_node_get_kind(m) == TP_NODE_CALL_FUNCTION && f.values[m->uid].kind == TP_VAL_TENSOR)
            fold[n_fold++] = m; /* replaced by a get_attr */
        else
            f.kept[m->uid] = true; /* a get_attr, or a non-tensor value: stays */
    }
    /* rewrite, in graph order */
    for (int64_t i = n_fold - 1; st == TP_OK && i >= 0; i--) st = materialize(p, &f, fold[i]);
    if (st == TP_OK && n_fold > 0) st = tp_graph_eliminate_dead_code(g, NULL);
    if (st == TP_OK && modified) *modified = n_fold > 0;
    tp_free(fold);
    fold_state_free(&f);
    return st;
}

/* ---- effect tokens ------------------------------------------------------ */

/* A copy of v without the leaves whose flat index i has drop[i]; *index
 * counts leaves in depth-first order, *dropped tells whether v itself (a
 * leaf) is dropped. */
static tp_status drop_leaves(const tp_value *v, const bool *drop, int64_t n_drop, int64_t *index, tp_value *out,
                             bool *dropped) {
    *out = tp_value_none();
    *dropped = false;
    if (v->kind == TP_VAL_NONE) return TP_OK;
    if (v->kind != TP_VAL_TUPLE && v->kind != TP_VAL_LIST && v->kind != TP_VAL_DICT) {
        int64_t i = (*index)++;
        if (i < n_drop && drop[i]) {
            *dropped = true;
            return TP_OK;
        }
        return tp_value_copy(v, out);
    }
    tp_value r;
    if (v->kind == TP_VAL_DICT) TP_TRY(tp_value_dict(&r));
    else TP_TRY(v->kind == TP_VAL_LIST ? tp_value_list(0, &r) : tp_value_tuple(0, &r));
    for (int64_t i = 0; i < v->u.seq.n; i++) {
        tp_value item;
        bool gone;
        tp_status st = drop_leaves(&v->u.seq.items[i], drop, n_drop, index, &item, &gone);
        if (st == TP_OK && !gone)
            st = v->kind == TP_VAL_DICT ? tp_value_dict_set(&r, v->u.seq.keys[i], &item) : tp_value_append(&r, &item);
        tp_value_clear(&item);
        if (st != TP_OK) {
            tp_value_clear(&r);
            return st;
        }
    }
    *out = r;
    return TP_OK;
}

/* The output node without the TOKEN outputs; token-producing nodes left
 * without users (and pure) are erased. */
static tp_status drop_token_outputs(tp_program *p) {
    tp_graph *g = p->graph;
    const tp_signature *sig = p->signature;
    int n_out = tp_signature_n_outputs(sig);
    tp_node *out = tp_graph_output_node(g);
    TP_CHECK(out != NULL, TP_ERR_VERIFY, "the graph has no output node to drop token outputs from");
    const tp_value *ov = tp_value_at(tp_node_args(out), 0);
    TP_CHECK(ov != NULL, TP_ERR_VERIFY, "the output node %s returns nothing", tp_node_name(out));
    tp_value leaves;
    TP_TRY(output_leaves(g, &leaves));
    int64_t n_leaves = tp_value_len(&leaves);
    if (n_leaves != n_out) {
        tp_value_clear(&leaves);
        return tp_error(TP_ERR_VERIFY, "the graph has %" PRId64 " outputs but the signature describes %d", n_leaves,
                        n_out);
    }
    bool *drop = tp_calloc((size_t)n_out + 1, sizeof *drop);
    tp_node **producers = tp_calloc((size_t)n_out + 1, sizeof *producers);
    int n_producers = 0;
    tp_status st = drop && producers ? TP_OK : tp_error(TP_ERR_NOMEM, "out of memory removing tokens");
    for (int i = 0; st == TP_OK && i < n_out; i++) {
        if (tp_signature_output(sig, i)->kind != TP_OUTPUT_TOKEN) continue;
        drop[i] = true;
        const tp_value *leaf = tp_value_at(&leaves, i);
        if (leaf->kind != TP_VAL_NODE) continue;
        bool seen = false;
        for (int k = 0; k < n_producers && !seen; k++) seen = producers[k] == leaf->u.node;
        if (!seen) producers[n_producers++] = leaf->u.node;
    }
    tp_value args = tp_value_none(), value = tp_value_none();
    int64_t index = 0;
    bool gone = false;
    if (st == TP_OK) st = drop_leaves(ov, drop, n_out, &index, &value, &gone);
    if (st == TP_OK) st = tp_value_tuple(1, &args);
    if (st == TP_OK) st = tp_value_seq_set(&args, 0, &value);
    if (st == TP_OK) st = tp_node_set_args(out, &args);
    for (int k = 0; st == TP_OK && k < n_producers; k++) {
        tp_node *m = producers[k];
        if (tp_node_get_kind(m) != TP_NODE_PLACEHOLDER && tp_node_num_users(m) == 0 && !tp_node_is_impure(m))
            st = tp_graph_erase_node(g, m);
    }
    tp_value_clear(&args);
    tp_value_clear(&value);
    tp_value_clear(&leaves);
    tp_free(drop);
    tp_free(producers);
    return st;
}

static tp_status none_lookup(void *ctx, const tp_node *node, const tp_value **out) {
    static const tp_value none = {.kind = TP_VAL_NONE};
    *out = node == ctx ? &none : NULL;
    return TP_OK;
}

/* Replace uses of a token placeholder by None, then erase it. */
static tp_status drop_token_input(tp_graph *g, tp_node *ph) {
    while (tp_node_num_users(ph) > 0) {
        tp_node *u = tp_node_user(ph, 0);
        tp_value args = tp_value_none(), kwargs = tp_value_none();
        tp_status st = tp__value_substitute(tp_node_args(u), none_lookup, ph, &args);
        if (st == TP_OK) st = tp__value_substitute(tp_node_kwargs(u), none_lookup, ph, &kwargs);
        if (st == TP_OK) st = tp_node_set_args(u, &args);
        if (st == TP_OK) st = tp_node_set_kwargs(u, &kwargs);
        tp_value_clear(&args);
        tp_value_clear(&kwargs);
        TP_TRY(st);
    }
    return tp_graph_erase_node(g, ph);
}

tp_status tp_pass_remove_effect_tokens(tp_program *p, void *user, bool *modified) {
    TP_UNUSED(user);
    if (modified) *modified = false;
    const tp_signature *sig = p->signature;
    int n_in_tokens = 0, n_out_tokens = 0;
    for (int i = 0; i < tp_signature_n_inputs(sig); i++)
        if (tp_signature_input(sig, i)->kind == TP_INPUT_TOKEN) n_in_tokens++;
    for (int i = 0; i < tp_signature_n_outputs(sig); i++)
        if (tp_signature_output(sig, i)->kind == TP_OUTPUT_TOKEN) n_out_tokens++;
    if (n_in_tokens == 0 && n_out_tokens == 0) return TP_OK;

    if (n_out_tokens > 0) TP_TRY(drop_token_outputs(p));
    for (int i = 0; i < tp_signature_n_inputs(sig); i++) {
        const tp_input_spec *s = tp_signature_input(sig, i);
        if (s->kind != TP_INPUT_TOKEN) continue;
        tp_node *ph = tp_graph_find_node(p->graph, s->arg.name);
        if (ph && tp_node_get_kind(ph) == TP_NODE_PLACEHOLDER) TP_TRY(drop_token_input(p->graph, ph));
    }
    tp_signature *ns;
    TP_TRY(signature_rebuild(sig, true, NULL, NULL, &ns));
    tp_signature_free(p->signature);
    p->signature = ns;
    if (modified) *modified = true;
    return TP_OK;
}
