/*
 * program.c - the exported program: construction, contents, validation,
 * calling (binding, input checks, mutations, output structure), unlifting,
 * renaming, copying and printing. Decompositions live in decomp.c, passes
 * in passes.c.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program_impl.h"
#include "tpexport/interp.h"


/* ---- lifetime ---------------------------------------------------------- */

tp_status tp_program_new(tp_graph *graph, tp_signature *signature, tp_program **out) {
    tp_status st = TP_OK;
    tp_program *p = NULL;
    if (!graph || !signature) st = tp_error(TP_ERR_INVALID_ARG, "program needs a graph and a signature");
    if (st == TP_OK && !(p = tp_calloc(1, sizeof *p))) st = tp_error(TP_ERR_NOMEM, "out of memory allocating a program");
    if (st == TP_OK && (st = tp_module_new("Module", &p->state)) != TP_OK) {
        tp_free(p);
        p = NULL;
    }
    if (st != TP_OK) {
        tp_graph_free(graph);
        tp_signature_free(signature);
        return st;
    }
    atomic_init(&p->refcount, 1);
    p->graph = graph;
    p->signature = signature;
    pthread_mutex_init(&p->lock, NULL);
    tp__engine_init(&p->engine);
    *out = p;
    return TP_OK;
}

tp_program *tp_program_retain(tp_program *p) {
    if (p) atomic_fetch_add(&p->refcount, 1);
    return p;
}

static void call_sig_free(tp_module_call_signature *s) {
    if (!s) return;
    for (int i = 0; i < s->n_inputs; i++) {
        tp_free((char *)s->inputs[i].name);
        tp_free((char *)s->inputs[i].class_fqn);
        tp_value_clear(&s->inputs[i].value);
    }
    for (int i = 0; i < s->n_outputs; i++) {
        tp_free((char *)s->outputs[i].name);
        tp_free((char *)s->outputs[i].class_fqn);
        tp_value_clear(&s->outputs[i].value);
    }
    for (int i = 0; i < s->n_forward_arg_names; i++) tp_free(s->forward_arg_names[i]);
    tp_free(s->inputs);
    tp_free(s->outputs);
    tp_free(s->forward_arg_names);
    tp_treespec_free(s->in_spec);
    tp_treespec_free(s->out_spec);
    tp_free(s);
}

void tp_program_free(tp_program *p) {
    if (!p) return;
    if (atomic_fetch_sub(&p->refcount, 1) != 1) return;
    tp_graph_free(p->graph);
    tp_signature_free(p->signature);
    tp_module_free(p->state);
    for (int i = 0; i < p->n_examples; i++) {
        tp_free(p->examples[i].name);
        tp_value_clear(&p->examples[i].value);
    }
    tp_free(p->examples);
    for (int i = 0; i < p->n_ranges; i++) tp_free((char *)p->ranges[i].name);
    tp_free(p->ranges);
    for (int i = 0; i < p->n_equalities; i++) {
        for (int k = 0; k < p->equalities[i].n_sites; k++) tp_free((char *)p->equalities[i].sites[k].input);
        tp_free((void *)p->equalities[i].sites);
        tp_free((char *)p->equalities[i].name);
    }
    tp_free(p->equalities);
    for (int i = 0; i < p->n_dim_rules; i++) {
        tp_free((char *)p->dim_rules[i].site.input);
        tp_free((char *)p->dim_rules[i].symbol);
    }
    tp_free(p->dim_rules);
    for (int i = 0; i < p->n_calls; i++) {
        tp_free(p->calls[i].fqn);
        call_sig_free(p->calls[i].sig);
    }
    tp_free(p->calls);
    tp_treespec_free(p->in_spec);
    tp_treespec_free(p->out_spec);
    tp_module_free(p->unlifted);
    pthread_mutex_destroy(&p->lock);
    tp__engine_destroy(&p->engine);
    tp_free(p);
}

/* ---- contents ---------------------------------------------------------- */

const tp_graph *tp_program_graph(const tp_program *p) { return p->graph; }
tp_graph *tp_program_graph_mut(tp_program *p) {
    tp__engine_invalidate(p);
    return p->graph;
}
const tp_signature *tp_program_signature(const tp_program *p) { return p->signature; }
tp_signature *tp_program_signature_mut(tp_program *p) {
    tp__engine_invalidate(p);
    return p->signature;
}

tp_status tp_program_set_state(tp_program *p, const char *target, tp_state_kind kind, tp_tensor *t, bool persistent) {
    tp__engine_invalidate(p);
    return tp_module_set_state(p->state, target, kind, t, persistent);
}

tp_status tp_program_get_state(const tp_program *p, const char *target, tp_tensor **t, tp_state_kind *kind,
                               bool *persistent) {
    return tp_module_get_state(p->state, target, t, kind, persistent);
}

static bool filter_keeps(tp_state_filter f, tp_state_kind kind, bool persistent) {
    switch (f) {
    case TP_FILTER_PARAMETERS: return kind == TP_STATE_PARAMETER;
    case TP_FILTER_BUFFERS: return kind == TP_STATE_BUFFER;
    /* as tensorplay's ExportedProgram.constants: lifted non-persistent buffers too */
    case TP_FILTER_CONSTANTS: return kind == TP_STATE_CONSTANT || (kind == TP_STATE_BUFFER && !persistent);
    case TP_FILTER_STATE_DICT: return kind == TP_STATE_PARAMETER || (kind == TP_STATE_BUFFER && persistent);
    case TP_FILTER_ALL: return true;
    }
    return false;
}

tp_status tp_program_named_state(const tp_program *p, tp_state_filter filter, tp_named_state *out) {
    tp_named_state all;
    TP_TRY(tp_module_named_state(p->state, TP_FILTER_ALL, &all));
    out->n = 0;
    out->items = tp_calloc((size_t)(all.n ? all.n : 1), sizeof *out->items);
    if (!out->items) {
        tp_named_state_free(&all);
        return tp_error(TP_ERR_NOMEM, "out of memory listing program state");
    }
    bool *used = tp_calloc((size_t)(all.n ? all.n : 1), sizeof *used);
    if (!used) {
        tp_named_state_free(&all);
        tp_named_state_free(out);
        return tp_error(TP_ERR_NOMEM, "out of memory listing program state");
    }
    /* signature order first, then the rest in tree order */
    for (int pass = 0; pass < 2; pass++) {
        int n_specs = pass == 0 ? tp_signature_n_inputs(p->signature) : all.n;
        for (int i = 0; i < n_specs; i++) {
            int k = -1;
            if (pass == 0) {
                const tp_input_spec *s = tp_signature_input(p->signature, i);
                if (!s->target || s->kind == TP_INPUT_USER_INPUT || s->kind == TP_INPUT_TOKEN) continue;
                for (int j = 0; j < all.n && k < 0; j++)
                    if (!used[j] && strcmp(all.items[j].name, s->target) == 0) k = j;
            } else if (!used[i]) {
                k = i;
            }
            if (k < 0) continue;
            used[k] = true;
            if (!filter_keeps(filter, all.items[k].kind, all.items[k].persistent)) continue;
            out->items[out->n] = all.items[k];
            all.items[k].name = NULL; /* moved */
            out->n++;
        }
    }
    tp_free(used);
    tp_named_state_free(&all);
    return TP_OK;
}

tp_status tp_program_set_example_input(tp_program *p, const char *name, const tp_value *value) {
    tp__engine_invalidate(p);
    TP_CHECK(name && *name, TP_ERR_INVALID_ARG, "example input name is empty");
    tp_value v;
    TP_TRY(tp_value_copy(value, &v));
    for (int i = 0; i < p->n_examples; i++) {
        if (strcmp(p->examples[i].name, name) == 0) {
            tp_value_move(&p->examples[i].value, &v);
            return TP_OK;
        }
    }
    tp_status st = tp__grow((void **)&p->examples, &p->cap_examples, p->n_examples, sizeof *p->examples);
    char *n = st == TP_OK ? tp_strdup(name) : NULL;
    if (!n) {
        tp_value_clear(&v);
        return st != TP_OK ? st : tp_error(TP_ERR_NOMEM, "out of memory");
    }
    p->examples[p->n_examples++] = (tp_example){n, v};
    return TP_OK;
}

const tp_value *tp_program_example_input(const tp_program *p, const char *name) {
    for (int i = 0; name && i < p->n_examples; i++)
        if (strcmp(p->examples[i].name, name) == 0) return &p->examples[i].value;
    return NULL;
}

tp_status tp_program_add_range(tp_program *p, const char *symbol, int64_t min, int64_t max) {
    tp__engine_invalidate(p);
    TP_CHECK(symbol && *symbol, TP_ERR_INVALID_ARG, "range constraint needs a symbol name");
    TP_CHECK(min <= max, TP_ERR_INVALID_ARG, "range of '%s' is empty (min %" PRId64 " > max %" PRId64 ")", symbol, min,
             max);
    for (int i = 0; i < p->n_ranges; i++) {
        if (strcmp(p->ranges[i].name, symbol) == 0) {
            p->ranges[i].min = min;
            p->ranges[i].max = max;
            return TP_OK;
        }
    }
    TP_TRY(tp__grow((void **)&p->ranges, &p->cap_ranges, p->n_ranges, sizeof *p->ranges));
    char *n = tp_strdup(symbol);
    TP_CHECK(n != NULL, TP_ERR_NOMEM, "out of memory");
    p->ranges[p->n_ranges++] = (tp_range_constraint){n, min, max};
    return TP_OK;
}

int tp_program_num_ranges(const tp_program *p) { return p->n_ranges; }
const tp_range_constraint *tp_program_range(const tp_program *p, int i) {
    return (i >= 0 && i < p->n_ranges) ? &p->ranges[i] : NULL;
}
const tp_range_constraint *tp_program_find_range(const tp_program *p, const char *symbol) {
    for (int i = 0; symbol && i < p->n_ranges; i++)
        if (strcmp(p->ranges[i].name, symbol) == 0) return &p->ranges[i];
    return NULL;
}

tp_status tp_program_add_equality(tp_program *p, const tp_dim_site *sites, int n_sites, const char *name) {
    tp__engine_invalidate(p);
    TP_CHECK(n_sites >= 2, TP_ERR_INVALID_ARG, "an equality constraint needs at least two sites");
    for (int i = 0; i < n_sites; i++)
        TP_CHECK(sites[i].input && *sites[i].input && sites[i].dim >= 0, TP_ERR_INVALID_ARG,
                 "equality constraint site %d needs an input name and a dim >= 0", i);
    TP_TRY(tp__grow((void **)&p->equalities, &p->cap_equalities, p->n_equalities, sizeof *p->equalities));
    tp_dim_site *copy = tp_calloc((size_t)n_sites, sizeof *copy);
    TP_CHECK(copy != NULL, TP_ERR_NOMEM, "out of memory");
    tp_equality_constraint c = {n_sites, copy, NULL};
    bool ok = true;
    for (int i = 0; i < n_sites; i++) {
        copy[i].dim = sites[i].dim;
        if (!(copy[i].input = tp_strdup(sites[i].input))) ok = false;
    }
    if (ok && name && !(c.name = tp_strdup(name))) ok = false;
    if (!ok) {
        for (int i = 0; i < n_sites; i++) tp_free((char *)copy[i].input);
        tp_free(copy);
        return tp_error(TP_ERR_NOMEM, "out of memory");
    }
    p->equalities[p->n_equalities++] = c;
    return TP_OK;
}

int tp_program_num_equalities(const tp_program *p) { return p->n_equalities; }
const tp_equality_constraint *tp_program_equality(const tp_program *p, int i) {
    return (i >= 0 && i < p->n_equalities) ? &p->equalities[i] : NULL;
}

tp_status tp_program_add_dim_rule(tp_program *p, const tp_dim_rule *rule) {
    tp__engine_invalidate(p);
    TP_CHECK(rule && rule->site.input && *rule->site.input && rule->site.dim >= 0, TP_ERR_INVALID_ARG,
             "dim rule needs an input name and a dim >= 0");
    TP_CHECK(rule->kind == TP_DIM_STATIC || (rule->symbol && *rule->symbol), TP_ERR_INVALID_ARG,
             "dim rule for %s.shape[%d] needs a symbol", rule->site.input, rule->site.dim);
    TP_CHECK(rule->kind != TP_DIM_DERIVED || rule->scale >= 1, TP_ERR_INVALID_ARG,
             "derived dim for %s.shape[%d] needs a scale >= 1", rule->site.input, rule->site.dim);
    TP_CHECK(rule->kind != TP_DIM_STATIC || rule->value >= 0, TP_ERR_INVALID_ARG,
             "static dim for %s.shape[%d] must be >= 0", rule->site.input, rule->site.dim);
    tp_dim_rule r = *rule;
    r.site.input = tp_strdup(rule->site.input);
    r.symbol = rule->kind == TP_DIM_STATIC ? NULL : tp_strdup(rule->symbol);
    if (!r.site.input || (rule->kind != TP_DIM_STATIC && !r.symbol)) {
        tp_free((char *)r.site.input);
        tp_free((char *)r.symbol);
        return tp_error(TP_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < p->n_dim_rules; i++) {
        tp_dim_rule *old = &p->dim_rules[i];
        if (old->site.dim == r.site.dim && strcmp(old->site.input, r.site.input) == 0) {
            tp_free((char *)old->site.input);
            tp_free((char *)old->symbol);
            *old = r;
            return TP_OK;
        }
    }
    tp_status st = tp__grow((void **)&p->dim_rules, &p->cap_dim_rules, p->n_dim_rules, sizeof *p->dim_rules);
    if (st != TP_OK) {
        tp_free((char *)r.site.input);
        tp_free((char *)r.symbol);
        return st;
    }
    p->dim_rules[p->n_dim_rules++] = r;
    return TP_OK;
}

int tp_program_num_dim_rules(const tp_program *p) { return p->n_dim_rules; }
const tp_dim_rule *tp_program_dim_rule(const tp_program *p, int i) {
    return (i >= 0 && i < p->n_dim_rules) ? &p->dim_rules[i] : NULL;
}

static tp_status arg_spec_copy(const tp_arg_spec *src, tp_arg_spec *dst) {
    memset(dst, 0, sizeof *dst);
    dst->kind = src->kind;
    dst->name = tp_strdup(src->name ? src->name : "");
    if (src->class_fqn) dst->class_fqn = tp_strdup(src->class_fqn);
    tp_status st = tp_value_copy(&src->value, &dst->value);
    if (!dst->name || (src->class_fqn && !dst->class_fqn) || st != TP_OK) {
        tp_free((char *)dst->name);
        tp_free((char *)dst->class_fqn);
        tp_value_clear(&dst->value);
        return st != TP_OK ? st : tp_error(TP_ERR_NOMEM, "out of memory");
    }
    return TP_OK;
}

static tp_status call_sig_copy(const tp_module_call_signature *src, tp_module_call_signature **out) {
    tp_module_call_signature *s = tp_calloc(1, sizeof *s);
    TP_CHECK(s != NULL, TP_ERR_NOMEM, "out of memory");
    tp_status st = TP_OK;
    s->inputs = tp_calloc((size_t)(src->n_inputs ? src->n_inputs : 1), sizeof *s->inputs);
    s->outputs = tp_calloc((size_t)(src->n_outputs ? src->n_outputs : 1), sizeof *s->outputs);
    s->forward_arg_names =
        tp_calloc((size_t)(src->n_forward_arg_names ? src->n_forward_arg_names : 1), sizeof(char *));
    if (!s->inputs || !s->outputs || !s->forward_arg_names) st = tp_error(TP_ERR_NOMEM, "out of memory");
    for (int i = 0; st == TP_OK && i < src->n_inputs; i++) {
        st = arg_spec_copy(&src->inputs[i], &s->inputs[i]);
        if (st == TP_OK) s->n_inputs++;
    }
    for (int i = 0; st == TP_OK && i < src->n_outputs; i++) {
        st = arg_spec_copy(&src->outputs[i], &s->outputs[i]);
        if (st == TP_OK) s->n_outputs++;
    }
    for (int i = 0; st == TP_OK && i < src->n_forward_arg_names; i++) {
        if (!(s->forward_arg_names[i] = tp_strdup(src->forward_arg_names[i]))) st = tp_error(TP_ERR_NOMEM, "out of memory");
        else s->n_forward_arg_names++;
    }
    if (st == TP_OK && src->in_spec) st = tp_treespec_copy(src->in_spec, &s->in_spec);
    if (st == TP_OK && src->out_spec) st = tp_treespec_copy(src->out_spec, &s->out_spec);
    if (st != TP_OK) {
        call_sig_free(s);
        return st;
    }
    *out = s;
    return TP_OK;
}

tp_status tp_program_add_module_call(tp_program *p, const char *fqn, const tp_module_call_signature *sig) {
    TP_TRY(tp__grow((void **)&p->calls, &p->cap_calls, p->n_calls, sizeof *p->calls));
    char *f = tp_strdup(fqn ? fqn : "");
    TP_CHECK(f != NULL, TP_ERR_NOMEM, "out of memory");
    tp_module_call_signature *s = NULL;
    if (sig) {
        tp_status st = call_sig_copy(sig, &s);
        if (st != TP_OK) {
            tp_free(f);
            return st;
        }
    }
    p->calls[p->n_calls].fqn = f;
    p->calls[p->n_calls].sig = s;
    p->n_calls++;
    return TP_OK;
}

int tp_program_num_module_calls(const tp_program *p) { return p->n_calls; }

tp_module_call_entry tp_program_module_call(const tp_program *p, int i) {
    if (i < 0 || i >= p->n_calls) return (tp_module_call_entry){NULL, NULL};
    return (tp_module_call_entry){p->calls[i].fqn, p->calls[i].sig};
}

static tp_status set_spec(tp_treespec **slot, const tp_treespec *spec) {
    tp_treespec *c = NULL;
    if (spec) TP_TRY(tp_treespec_copy(spec, &c));
    tp_treespec_free(*slot);
    *slot = c;
    return TP_OK;
}

tp_status tp_program_set_in_spec(tp_program *p, const tp_treespec *spec) { return set_spec(&p->in_spec, spec); }
tp_status tp_program_set_out_spec(tp_program *p, const tp_treespec *spec) { return set_spec(&p->out_spec, spec); }
const tp_treespec *tp_program_in_spec(const tp_program *p) { return p->in_spec; }
const tp_treespec *tp_program_out_spec(const tp_program *p) { return p->out_spec; }
int tp_program_num_mutations(const tp_program *p) { return tp_signature_n_mutations(p->signature); }

void tp_program_set_verifier(tp_program *p, tp_verifier_fn fn, void *user) {
    tp_program_set_verifier_ex(p, fn, user, false);
}

void tp_program_set_verifier_ex(tp_program *p, tp_verifier_fn fn, void *user, bool replace_builtin) {
    p->verifier = fn;
    p->verifier_user = user;
    p->verifier_replaces = fn && replace_builtin;
}

/* A site naming input `old` ("x", or a path into it such as "x[0]['k']")
 * names `new_name` instead. */
static tp_status rename_site(const char **input, const char *old, const char *new_name) {
    size_t n = strlen(old);
    if (strncmp(*input, old, n) != 0 || ((*input)[n] != '\0' && (*input)[n] != '[')) return TP_OK;
    size_t rest = strlen(*input + n), nn = strlen(new_name);
    char *s = tp_malloc(nn + rest + 1);
    TP_CHECK(s != NULL, TP_ERR_NOMEM, "out of memory");
    memcpy(s, new_name, nn);
    memcpy(s + nn, *input + n, rest + 1);
    tp_free((char *)*input);
    *input = s;
    return TP_OK;
}

/* A renamed user placeholder: its example input, dim rules, equality sites
 * and forward argument names follow it. */
static tp_status rename_user_input(tp_program *p, const char *old, const char *new_name) {
    for (int i = 0; i < p->n_examples; i++) {
        if (strcmp(p->examples[i].name, old) != 0) continue;
        char *s = tp_strdup(new_name);
        TP_CHECK(s != NULL, TP_ERR_NOMEM, "out of memory");
        tp_free(p->examples[i].name);
        p->examples[i].name = s;
    }
    for (int i = 0; i < p->n_dim_rules; i++) TP_TRY(rename_site(&p->dim_rules[i].site.input, old, new_name));
    for (int i = 0; i < p->n_equalities; i++) {
        tp_dim_site *sites = (tp_dim_site *)p->equalities[i].sites;
        for (int k = 0; k < p->equalities[i].n_sites; k++) TP_TRY(rename_site(&sites[k].input, old, new_name));
    }
    for (int i = 0; i < p->n_calls; i++) {
        tp_module_call_signature *s = p->calls[i].sig;
        for (int k = 0; s && k < s->n_forward_arg_names; k++) {
            if (strcmp(s->forward_arg_names[k], old) != 0) continue;
            char *nn = tp_strdup(new_name);
            TP_CHECK(nn != NULL, TP_ERR_NOMEM, "out of memory");
            tp_free(s->forward_arg_names[k]);
            s->forward_arg_names[k] = nn;
        }
    }
    return TP_OK;
}

tp_status tp_program_rename_node(tp_program *p, tp_node *node, const char *new_name) {
    tp__engine_invalidate(p);
    TP_CHECK(node && tp_node_graph(node) == p->graph, TP_ERR_INVALID_ARG, "node does not belong to the program");
    char *old = tp_strdup(tp_node_name(node));
    TP_CHECK(old != NULL, TP_ERR_NOMEM, "out of memory");
    int in = tp_signature_find_input(p->signature, old);
    bool user_input = tp_node_get_kind(node) == TP_NODE_PLACEHOLDER && in >= 0 &&
                      tp_signature_input(p->signature, in)->kind == TP_INPUT_USER_INPUT;
    tp_status st = tp_node_rename(node, new_name);
    if (st == TP_OK && user_input) st = rename_user_input(p, old, tp_node_name(node));
    if (st == TP_OK) st = tp_signature_replace_all_uses(p->signature, old, tp_node_name(node), NULL);
    if (st == TP_OK) st = tp_program_module_calls_replace_uses(p, old, tp_node_name(node));
    tp_free(old);
    return st;
}

tp_status tp_program_module_calls_replace_uses(tp_program *p, const char *old_name, const char *new_name) {
    TP_CHECK(p && old_name && new_name && *new_name, TP_ERR_INVALID_ARG, "program or argument name is NULL or empty");
    for (int i = 0; i < p->n_calls; i++) {
        tp_module_call_signature *s = p->calls[i].sig;
        if (!s) continue;
        for (int pass = 0; pass < 2; pass++) {
            tp_arg_spec *args = pass ? s->outputs : s->inputs;
            int n = pass ? s->n_outputs : s->n_inputs;
            for (int k = 0; k < n; k++) {
                if (strcmp(args[k].name, old_name) != 0) continue;
                char *nn = tp_strdup(new_name);
                TP_CHECK(nn != NULL, TP_ERR_NOMEM, "out of memory");
                tp_free((char *)args[k].name);
                args[k].name = nn;
            }
        }
    }
    return TP_OK;
}

/* ---- copy -------------------------------------------------------------- */

tp_status tp_program_copy(const tp_program *p, tp_program **out) {
    tp_graph *g = NULL;
    tp_signature *s = NULL;
    TP_TRY(tp_graph_copy(p->graph, &g));
    tp_status st = tp_signature_clone(p->signature, &s);
    if (st != TP_OK) {
        tp_graph_free(g);
        return st;
    }
    tp_program *c;
    TP_TRY(tp_program_new(g, s, &c));
    tp_named_state all = {0};
    st = tp_module_named_state(p->state, TP_FILTER_ALL, &all);
    for (int i = 0; st == TP_OK && i < all.n; i++) {
        tp_tensor *t;
        st = tp_tensor_clone(all.items[i].tensor, &t);
        if (st == TP_OK) {
            st = tp_program_set_state(c, all.items[i].name, all.items[i].kind, t, all.items[i].persistent);
            tp_tensor_free(t);
        }
    }
    tp_named_state_free(&all);
    for (int i = 0; st == TP_OK && i < p->n_examples; i++)
        st = tp_program_set_example_input(c, p->examples[i].name, &p->examples[i].value);
    for (int i = 0; st == TP_OK && i < p->n_ranges; i++)
        st = tp_program_add_range(c, p->ranges[i].name, p->ranges[i].min, p->ranges[i].max);
    for (int i = 0; st == TP_OK && i < p->n_equalities; i++)
        st = tp_program_add_equality(c, p->equalities[i].sites, p->equalities[i].n_sites, p->equalities[i].name);
    for (int i = 0; st == TP_OK && i < p->n_dim_rules; i++) st = tp_program_add_dim_rule(c, &p->dim_rules[i]);
    for (int i = 0; st == TP_OK && i < p->n_calls; i++) st = tp_program_add_module_call(c, p->calls[i].fqn, p->calls[i].sig);
    if (st == TP_OK) st = tp_program_set_in_spec(c, p->in_spec);
    if (st == TP_OK) st = tp_program_set_out_spec(c, p->out_spec);
    c->verifier = p->verifier;
    c->verifier_user = p->verifier_user;
    c->verifier_replaces = p->verifier_replaces;
    c->folded_constants = p->folded_constants;
    if (st != TP_OK) {
        tp_program_free(c);
        return st;
    }
    *out = c;
    return TP_OK;
}

/* ---- validation -------------------------------------------------------- */

struct tp_report {
    tp_sb text;
    int count;
    tp_status fatal; /* an allocation failure while checking: not a violation */
};

void tp_program_report(tp_report *r, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tp__sb_printf(&r->text, "\n- %s", msg);
    r->count++;
}

static bool is_mutation(tp_output_kind k) {
    return k == TP_OUTPUT_BUFFER_MUTATION || k == TP_OUTPUT_PARAMETER_MUTATION || k == TP_OUTPUT_USER_INPUT_MUTATION;
}

/* Depth-first leaves of a value (node references and constants). */
static tp_status flatten_value(const tp_value *v, tp_value *leaves) {
    tp_treespec *spec = NULL;
    TP_TRY(tp_pytree_flatten(v, leaves, &spec));
    tp_treespec_free(spec);
    return TP_OK;
}

/* The root placeholder name of a user-input path ("xs[0]" -> "xs"). */
static void path_root(const char *path, char *buf, size_t size) {
    size_t n = strcspn(path, "[.");
    if (n >= size) n = size - 1;
    memcpy(buf, path, n);
    buf[n] = '\0';
}

static tp_state_kind state_kind_of(tp_input_kind k) {
    return k == TP_INPUT_PARAMETER ? TP_STATE_PARAMETER : k == TP_INPUT_BUFFER ? TP_STATE_BUFFER : TP_STATE_CONSTANT;
}

/* `policy`: the signature checks a replacing verifier takes over (the lint
 * always runs: the interpreter and engine rely on it). */
static void check_structure(const tp_program *p, tp_report *r, bool policy) {
    const tp_graph *g = p->graph;
    const tp_signature *sig = p->signature;
    tp_status lint = tp_graph_lint(g);
    if (lint == TP_ERR_NOMEM) r->fatal = lint;
    else if (lint != TP_OK) tp_program_report(r, "%s", tp_last_error());
    if (!policy) return;
    /* placeholders <-> input specs */
    int64_t n_ph = tp_graph_num_placeholders(g);
    int n_in = tp_signature_n_inputs(sig);
    for (int i = 0; i < n_in; i++) {
        const tp_input_spec *s = tp_signature_input(sig, i);
        tp_node *ph = tp_graph_find_node(g, s->arg.name);
        bool is_ph = ph && tp_node_get_kind(ph) == TP_NODE_PLACEHOLDER;
        if (s->kind == TP_INPUT_USER_INPUT) {
            if (!is_ph && s->arg.kind != TP_ARGK_CONSTANT)
                tp_program_report(r, "input spec '%s' has no matching placeholder", s->arg.name);
            continue;
        }
        if (is_ph) continue;
        bool attr = false;
        for (tp_node *n = tp_graph_first_node(g); n && s->target && !attr; n = tp_node_next(n))
            attr = tp_node_get_kind(n) == TP_NODE_GET_ATTR && strcmp(tp_node_target(n), s->target) == 0;
        if (!attr)
            tp_program_report(r, "%s spec '%s' is neither a placeholder nor a graph attribute",
                              tp_input_kind_name(s->kind), s->target ? s->target : s->arg.name);
    }
    for (int64_t i = 0; i < n_ph; i++) {
        const char *name = tp_node_name(tp_graph_placeholder_at(g, i));
        if (tp_signature_find_input(sig, name) < 0) tp_program_report(r, "placeholder '%s' has no input spec", name);
        else if (i < n_in && strcmp(tp_signature_input(sig, (int)i)->arg.name, name) != 0)
            tp_program_report(r, "placeholder %lld is '%s' but input spec %lld is '%s' (specs must follow placeholder order)",
                              (long long)i, name, (long long)i, tp_signature_input(sig, (int)i)->arg.name);
    }
    /* outputs <-> output specs */
    tp_node *out = tp_graph_output_node(g);
    if (out) {
        tp_value leaves = tp_value_none();
        const tp_value *ov = tp_value_at(tp_node_args(out), 0);
        tp_status fst = ov ? flatten_value(ov, &leaves) : TP_OK;
        if (fst != TP_OK) r->fatal = fst;
        if (ov && fst == TP_OK) {
            int64_t n_leaves = tp_value_len(&leaves);
            int n_out = tp_signature_n_outputs(sig);
            if (n_leaves != n_out) {
                tp_program_report(r, "graph produces %lld outputs but the signature describes %d", (long long)n_leaves,
                                  n_out);
            } else {
                for (int i = 0; i < n_out; i++) {
                    const tp_value *leaf = tp_value_at(&leaves, i);
                    const tp_output_spec *s = tp_signature_output(sig, i);
                    if (leaf->kind == TP_VAL_NODE && strcmp(tp_node_name(leaf->u.node), s->arg.name) != 0)
                        tp_program_report(r, "output value '%s' does not match output spec '%s'",
                                          tp_node_name(leaf->u.node), s->arg.name);
                }
            }
        }
        tp_value_clear(&leaves);
    }
    /* mutations first, targets are lifted state */
    bool seen_user = false;
    for (int i = 0; i < tp_signature_n_outputs(sig); i++) {
        const tp_output_spec *s = tp_signature_output(sig, i);
        if (!is_mutation(s->kind)) {
            if (s->kind != TP_OUTPUT_TOKEN) seen_user = true;
            continue;
        }
        if (seen_user) tp_program_report(r, "mutation output '%s' comes after a user output", s->arg.name);
        if (s->kind == TP_OUTPUT_USER_INPUT_MUTATION) {
            char root[256];
            path_root(s->target, root, sizeof root);
            int k = tp_signature_find_input(sig, root);
            if (k < 0 || tp_signature_input(sig, k)->kind != TP_INPUT_USER_INPUT)
                tp_program_report(r, "mutation target '%s' is not a user input", s->target);
            continue;
        }
        bool found = false;
        tp_input_kind want = s->kind == TP_OUTPUT_BUFFER_MUTATION ? TP_INPUT_BUFFER : TP_INPUT_PARAMETER;
        for (int k = 0; k < tp_signature_n_inputs(sig) && !found; k++) {
            const tp_input_spec *in = tp_signature_input(sig, k);
            found = (in->kind == TP_INPUT_BUFFER || in->kind == TP_INPUT_PARAMETER) && in->target &&
                    strcmp(in->target, s->target) == 0;
            if (found && in->kind != want)
                tp_program_report(r, "%s output '%s' targets %s '%s'", tp_output_kind_name(s->kind), s->arg.name,
                                  in->kind == TP_INPUT_BUFFER ? "buffer" : "parameter", s->target);
        }
        if (!found) tp_program_report(r, "mutation target '%s' is not lifted graph state", s->target);
    }
}

/* Ops and their arguments always (calls rely on them); the state's kinds
 * against the signature only with `policy`. */
static void check_runtime(const tp_program *p, tp_report *r, bool policy) {
    const tp_graph *g = p->graph;
    /* ops exist and arguments fit their schemas */
    for (tp_node *n = tp_graph_first_node(g); n; n = tp_node_next(n)) {
        tp_node_kind k = tp_node_get_kind(n);
        if (k == TP_NODE_GET_ATTR) {
            if (tp_module_get_state(p->state, tp_node_target(n), NULL, NULL, NULL) != TP_OK)
                tp_program_report(r, "node %s: get_attr target '%s' is not in the program state", tp_node_name(n),
                                  tp_node_target(n));
            continue;
        }
        if (k != TP_NODE_CALL_FUNCTION && k != TP_NODE_CALL_METHOD) continue;
        tp_op op = tp_node_op(n);
        if (op == TP_OP_INVALID) {
            tp_program_report(r, "node %s: unknown %s '%s'", tp_node_name(n),
                              k == TP_NODE_CALL_METHOD ? "method" : "op", tp_node_target(n));
            continue;
        }
        const tp_schema *schema = tp_op_schema(op);
        if (!schema) {
            tp_program_report(r, "node %s: op '%s' has no schema", tp_node_name(n), tp_op_name(op));
            continue;
        }
        tp_value bound[64];
        const tp_value *args = tp_node_args(n);
        tp_status bst = tp_op_bind(op, tp_value_at(args, 0), (int)tp_value_len(args), tp_node_kwargs(n), bound);
        if (bst == TP_ERR_NOMEM) r->fatal = bst;
        if (bst != TP_OK) {
            if (bst != TP_ERR_NOMEM) tp_program_report(r, "node %s: %s", tp_node_name(n), tp_last_error());
            continue;
        }
        for (int i = 0; i < schema->n_args; i++) tp_value_clear(&bound[i]);
    }
    if (!policy) return;
    /* state targets resolve to tensors of the declared kind */
    const tp_signature *sig = p->signature;
    for (int i = 0; i < tp_signature_n_inputs(sig); i++) {
        const tp_input_spec *s = tp_signature_input(sig, i);
        if (s->kind != TP_INPUT_PARAMETER && s->kind != TP_INPUT_BUFFER && s->kind != TP_INPUT_CONSTANT_TENSOR) continue;
        tp_tensor *t;
        tp_state_kind kind;
        bool persistent;
        if (tp_module_get_state(p->state, s->target, &t, &kind, &persistent) != TP_OK) {
            tp_program_report(r, "%s '%s' (input '%s') has no value in the program state", tp_input_kind_name(s->kind),
                              s->target, s->arg.name);
            continue;
        }
        if (kind != state_kind_of(s->kind))
            tp_program_report(r, "state '%s' is a %s but its input spec says %s", s->target, tp_state_kind_name(kind),
                              tp_input_kind_name(s->kind));
        else if (s->kind == TP_INPUT_BUFFER && persistent != (s->persistent == TP_PERSISTENT_YES))
            tp_program_report(r, "buffer '%s' is %spersistent in the state but %spersistent in its input spec", s->target,
                              persistent ? "" : "non-", s->persistent == TP_PERSISTENT_YES ? "" : "non-");
    }
}

void tp_program_builtin_checks(const tp_program *p, tp_report *report) {
    if (!p || !report) return;
    check_structure(p, report, true);
    check_runtime(p, report, true);
}

tp_status tp_program_validate(const tp_program *p) {
    tp_report r = {{0}, 0, TP_OK};
    bool policy = !(p->verifier && p->verifier_replaces);
    check_structure(p, &r, policy);
    check_runtime(p, &r, policy);
    tp_status vst = TP_OK;
    if (p->verifier) {
        vst = p->verifier(p, &r, p->verifier_user);
        if (vst != TP_OK) tp_program_report(&r, "verifier failed: %s", tp_last_error());
    }
    if (r.fatal != TP_OK) {
        tp__sb_free(&r.text);
        return tp_error(r.fatal, "out of memory validating the program");
    }
    if (r.count == 0) {
        tp__sb_free(&r.text);
        return TP_OK;
    }
    char *text;
    TP_TRY(tp__sb_finish(&r.text, &text));
    tp_status st = tp_error(TP_ERR_VERIFY, "%d problem%s:%s", r.count, r.count == 1 ? "" : "s", text);
    tp_free(text);
    return st;
}

/* ---- binding and input checks ------------------------------------------ */

/* User inputs bound to placeholders: names[i] / values[i] for each USER_INPUT
 * spec in order. */
typedef struct bound_inputs {
    int n;
    const char **names; /* borrowed from the signature */
    tp_value *values;
} bound_inputs;

static void bound_free(bound_inputs *b) {
    for (int i = 0; i < b->n; i++) tp_value_clear(&b->values[i]);
    tp_free(b->values);
    tp_free(b->names);
    memset(b, 0, sizeof *b);
}

/* The other name user input i answers to as a keyword: its forward
 * argument name in the root module call (an ONNX model's own input name,
 * "input.1" for placeholder "input_1"), when the root call lists exactly
 * the user inputs and the name differs; else NULL. */
static const char *input_alias(const tp_program *p, int i, int n_user, const char *name) {
    for (int c = 0; c < p->n_calls; c++) {
        const tp_module_call_signature *s = p->calls[c].sig;
        if (strcmp(p->calls[c].fqn, "") != 0 || !s) continue;
        if (s->n_forward_arg_names != n_user || s->n_inputs != n_user || i >= n_user || strcmp(s->inputs[i].name, name) != 0)
            return NULL;
        const char *a = s->forward_arg_names[i];
        return a && strcmp(a, s->inputs[i].name) != 0 ? a : NULL;
    }
    return NULL;
}

static tp_status bind_user(const tp_program *p, const tp_value *args, int n_args, const tp_value *kwargs,
                           bound_inputs *b) {
    memset(b, 0, sizeof *b);
    int n_in = tp_signature_n_inputs(p->signature), n_user = 0;
    for (int i = 0; i < n_in; i++)
        if (tp_signature_input(p->signature, i)->kind == TP_INPUT_USER_INPUT) n_user++;
    TP_CHECK(kwargs == NULL || kwargs->kind == TP_VAL_DICT || kwargs->kind == TP_VAL_NONE, TP_ERR_TYPE,
             "keyword arguments must be a dict");
    b->names = tp_calloc((size_t)(n_user ? n_user : 1), sizeof *b->names);
    b->values = tp_calloc((size_t)(n_user ? n_user : 1), sizeof *b->values);
    if (!b->names || !b->values) {
        bound_free(b);
        return tp_error(TP_ERR_NOMEM, "out of memory binding arguments");
    }
    b->n = n_user;
    for (int i = 0, k = 0; i < n_in; i++) {
        const tp_input_spec *s = tp_signature_input(p->signature, i);
        if (s->kind == TP_INPUT_USER_INPUT) b->names[k++] = s->arg.name;
    }
    tp_status st = TP_OK;
    if (n_args > n_user) {
        st = tp_error(TP_ERR_INVALID_ARG, "expected at most %d positional argument%s, got %d", n_user,
                      n_user == 1 ? "" : "s", n_args);
    }
    for (int i = 0; st == TP_OK && i < n_user; i++) {
        const tp_value *kw = tp_value_dict_get(kwargs, b->names[i]);
        const char *alias = input_alias(p, i, n_user, b->names[i]);
        if (alias && kw && tp_value_dict_get(kwargs, alias))
            st = tp_error(TP_ERR_DUPLICATE, "argument '%s' given as '%s' too", b->names[i], alias);
        if (!kw && alias) kw = tp_value_dict_get(kwargs, alias);
        if (st != TP_OK) break;
        if (i < n_args && kw) st = tp_error(TP_ERR_DUPLICATE, "duplicate value for argument '%s'", b->names[i]);
        else if (i < n_args) st = tp_value_copy(&args[i], &b->values[i]);
        else if (kw) st = tp_value_copy(kw, &b->values[i]);
        else if (tp_program_example_input(p, b->names[i]))
            st = tp_value_copy(tp_program_example_input(p, b->names[i]), &b->values[i]);
        else st = tp_error(TP_ERR_MISSING, "missing required export input: %s", b->names[i]);
    }
    /* constant inputs (a Python scalar the program was exported with) must keep their value */
    for (int i = 0, k = 0; st == TP_OK && i < n_in; i++) {
        const tp_input_spec *s = tp_signature_input(p->signature, i);
        if (s->kind != TP_INPUT_USER_INPUT) continue;
        const tp_value *v = &b->values[k++];
        if (s->arg.kind != TP_ARGK_CONSTANT) continue;
        const tp_value *c = &s->arg.value;
        bool same = c->kind == TP_VAL_NONE ? v->kind == TP_VAL_NONE
                    : c->kind == TP_VAL_STR ? v->kind == TP_VAL_STR && strcmp(v->u.s, c->u.s) == 0
                    : tp_value_is_number(c) && tp_value_is_number(v) && tp_value_as_f64(v) == tp_value_as_f64(c);
        if (!same) {
            char have[64], want[64];
            tp_value_repr(v, have, sizeof have);
            tp_value_repr(c, want, sizeof want);
            st = tp_error(TP_ERR_CONSTRAINT, "input '%s' = %s, but the program was exported with the constant %s",
                          s->arg.name, have, want);
        }
    }
    for (int64_t k = 0; st == TP_OK && k < tp_value_len(kwargs); k++) {
        const char *key = kwargs->u.seq.keys[k];
        bool known = false;
        for (int i = 0; i < n_user && !known; i++) {
            const char *alias = input_alias(p, i, n_user, b->names[i]);
            known = strcmp(b->names[i], key) == 0 || (alias && strcmp(alias, key) == 0);
        }
        if (!known) st = tp_error(TP_ERR_INVALID_ARG, "unexpected keyword argument '%s'", key);
    }
    if (st != TP_OK) bound_free(b);
    return st;
}

/* A tensor leaf of the user inputs with its path ("x", "xs[0]", "d['k']"). */
typedef struct leaf_site {
    char path[192];
    const tp_tensor *tensor;
} leaf_site;

typedef struct leaf_list {
    leaf_site *items;
    int n, cap;
} leaf_list;

static tp_status collect_leaves(const tp_value *v, const char *path, leaf_list *out, int depth) {
    TP_CHECK(depth < 64, TP_ERR_INVALID_ARG, "input '%s' is nested too deeply", path);
    if (v->kind == TP_VAL_TENSOR) {
        TP_TRY(tp__grow((void **)&out->items, &out->cap, out->n, sizeof *out->items));
        leaf_site *s = &out->items[out->n++];
        snprintf(s->path, sizeof s->path, "%s", path);
        s->tensor = v->u.tensor;
        return TP_OK;
    }
    for (int64_t i = 0; i < tp_value_len(v); i++) {
        char sub[192];
        int w = v->kind == TP_VAL_DICT ? snprintf(sub, sizeof sub, "%s['%s']", path, v->u.seq.keys[i])
                                       : snprintf(sub, sizeof sub, "%s[%lld]", path, (long long)i);
        if (w < 0) sub[0] = '\0'; /* a deeper path is cut at the buffer */
        TP_TRY(collect_leaves(&v->u.seq.items[i], sub, out, depth + 1));
    }
    return TP_OK;
}

static const tp_tensor *find_leaf(const leaf_list *l, const char *path) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->items[i].path, path) == 0) return l->items[i].tensor;
    return NULL;
}

/* Same tree structure (kinds, lengths, dict keys); tensors and other leaves
 * are not compared. */
static bool same_structure(const tp_value *a, const tp_value *b, char *why, size_t size, const char *path) {
    bool a_seq = a->kind == TP_VAL_LIST || a->kind == TP_VAL_TUPLE || a->kind == TP_VAL_DICT;
    bool b_seq = b->kind == TP_VAL_LIST || b->kind == TP_VAL_TUPLE || b->kind == TP_VAL_DICT;
    if (!a_seq && !b_seq) {
        if ((a->kind == TP_VAL_TENSOR) != (b->kind == TP_VAL_TENSOR)) {
            snprintf(why, size, "%s is a %s but the program expects a %s", path, tp_value_kind_name(a->kind),
                     tp_value_kind_name(b->kind));
            return false;
        }
        return true;
    }
    if (a->kind != b->kind || a->u.seq.n != b->u.seq.n) {
        snprintf(why, size, "%s is a %s of %lld but the program expects a %s of %lld", path,
                 tp_value_kind_name(a->kind), (long long)tp_value_len(a), tp_value_kind_name(b->kind),
                 (long long)tp_value_len(b));
        return false;
    }
    for (int64_t i = 0; i < a->u.seq.n; i++) {
        char sub[192];
        if (a->kind == TP_VAL_DICT) {
            if (strcmp(a->u.seq.keys[i], b->u.seq.keys[i]) != 0) {
                snprintf(why, size, "%s has key '%s' where the program expects '%s'", path, a->u.seq.keys[i],
                         b->u.seq.keys[i]);
                return false;
            }
            snprintf(sub, sizeof sub, "%s['%s']", path, a->u.seq.keys[i]);
        } else {
            snprintf(sub, sizeof sub, "%s[%lld]", path, (long long)i);
        }
        if (!same_structure(&a->u.seq.items[i], &b->u.seq.items[i], why, size, sub)) return false;
    }
    return true;
}

static const tp_dim_rule *find_rule(const tp_program *p, const char *path, int dim) {
    for (int i = 0; i < p->n_dim_rules; i++)
        if (p->dim_rules[i].site.dim == dim && strcmp(p->dim_rules[i].site.input, path) == 0) return &p->dim_rules[i];
    return NULL;
}

typedef struct symbol_value {
    const char *name;
    int64_t value;
    char site[224]; /* "y.shape[0]" it came from */
} symbol_value;

void tp__dim_rule_expr(const tp_dim_rule *r, char *buf, size_t size) {
    if (r->scale == 1) snprintf(buf, size, "%s", r->symbol);
    else snprintf(buf, size, "%" PRId64 "*%s", r->scale, r->symbol);
    size_t n = strlen(buf);
    if (n >= size) return;
    if (r->offset > 0) snprintf(buf + n, size - n, "+%" PRId64, r->offset);
    else if (r->offset < 0) snprintf(buf + n, size - n, "%" PRId64, r->offset);
}

bool tp__derived_dim_range(const tp_program *p, const tp_dim_rule *r, int64_t *lo, int64_t *hi, int64_t *root_lo,
                           int64_t *root_hi) {
    const tp_range_constraint *rc = tp_program_find_range(p, r->symbol);
    int64_t min = rc ? rc->min : 0, max = rc ? rc->max : TP_DIM_UNBOUNDED;
    *root_lo = min;
    *root_hi = max;
    if (__builtin_mul_overflow(r->scale, min, lo) || __builtin_add_overflow(*lo, r->offset, lo)) return false;
    if (max == TP_DIM_UNBOUNDED) {
        *hi = TP_DIM_UNBOUNDED;
        return true;
    }
    return !__builtin_mul_overflow(r->scale, max, hi) && !__builtin_add_overflow(*hi, r->offset, hi) &&
           *hi != TP_DIM_UNBOUNDED;
}

static tp_status check_range(const tp_program *p, const char *symbol, int64_t v, const char *what) {
    const tp_range_constraint *rc = tp_program_find_range(p, symbol);
    if (!rc) return TP_OK;
    TP_CHECK(v >= rc->min, TP_ERR_CONSTRAINT, "%s violates %s >= %" PRId64, what, symbol, rc->min);
    TP_CHECK(rc->max == TP_DIM_UNBOUNDED || v <= rc->max, TP_ERR_CONSTRAINT, "%s violates %s <= %" PRId64, what, symbol,
             rc->max);
    return TP_OK;
}

static tp_status check_leaves(const tp_program *p, const bound_inputs *b, const leaf_list *got) {
    /* dtype, rank and static dims against the examples */
    leaf_list ex = {0};
    tp_status st = TP_OK;
    for (int i = 0; st == TP_OK && i < b->n; i++) {
        const tp_value *e = tp_program_example_input(p, b->names[i]);
        if (e) st = collect_leaves(e, b->names[i], &ex, 0);
    }
    for (int i = 0; st == TP_OK && i < got->n; i++) {
        const leaf_site *s = &got->items[i];
        const tp_tensor *e = find_leaf(&ex, s->path);
        if (!e) continue;
        if (tp_tensor_dtype(s->tensor) != tp_tensor_dtype(e)) {
            st = tp_error(TP_ERR_TYPE, "%s has dtype %s but the program expects %s", s->path,
                          tp_dtype_name(tp_tensor_dtype(s->tensor)), tp_dtype_name(tp_tensor_dtype(e)));
            break;
        }
        if (tp_tensor_ndim(s->tensor) != tp_tensor_ndim(e)) {
            st = tp_error(TP_ERR_CONSTRAINT, "%s has rank %d but the program expects rank %d", s->path,
                          tp_tensor_ndim(s->tensor), tp_tensor_ndim(e));
            break;
        }
        for (int d = 0; st == TP_OK && d < tp_tensor_ndim(e); d++) {
            int64_t v = tp_tensor_sizes(s->tensor)[d], want = tp_tensor_sizes(e)[d];
            const tp_dim_rule *r = find_rule(p, s->path, d);
            if (!r && v != want)
                st = tp_error(TP_ERR_CONSTRAINT, "%s.shape[%d] = %" PRId64 " must equal %" PRId64 " (static dim)", s->path,
                              d, v, want);
        }
    }
    tp_free(ex.items);
    TP_TRY(st);

    /* dynamic-shape rules: static values and symbols first, derived after */
    symbol_value *syms = tp_calloc((size_t)(p->n_dim_rules ? p->n_dim_rules : 1), sizeof *syms);
    TP_CHECK(syms != NULL, TP_ERR_NOMEM, "out of memory checking inputs");
    int n_syms = 0;
    for (int pass = 0; pass < 2 && st == TP_OK; pass++) {
        for (int i = 0; i < p->n_dim_rules && st == TP_OK; i++) {
            const tp_dim_rule *r = &p->dim_rules[i];
            if ((pass == 0) == (r->kind == TP_DIM_DERIVED)) continue;
            const tp_tensor *t = find_leaf(got, r->site.input);
            if (!t) continue; /* input not given as a tensor: structure checks report it */
            if (r->site.dim >= tp_tensor_ndim(t)) {
                st = tp_error(TP_ERR_CONSTRAINT, "%s has rank %d but the program expects a dim %d", r->site.input,
                              tp_tensor_ndim(t), r->site.dim);
                break;
            }
            int64_t v = tp_tensor_sizes(t)[r->site.dim];
            char what[256];
            snprintf(what, sizeof what, "%s.shape[%d] = %" PRId64, r->site.input, r->site.dim, v);
            if (r->kind == TP_DIM_STATIC) {
                if (v != r->value)
                    st = tp_error(TP_ERR_CONSTRAINT, "%s must equal %" PRId64 " (static dim)", what, r->value);
                continue;
            }
            symbol_value *known = NULL;
            for (int k = 0; k < n_syms && !known; k++)
                if (strcmp(syms[k].name, r->symbol) == 0) known = &syms[k];
            if (r->kind == TP_DIM_SYMBOL) {
                if ((st = check_range(p, r->symbol, v, what)) != TP_OK) break;
                if (known && known->value != v) {
                    st = tp_error(TP_ERR_CONSTRAINT, "%s must equal %s = %" PRId64 " (dim \"%s\")", what, known->site,
                                  known->value, r->symbol);
                } else if (!known) {
                    syms[n_syms].name = r->symbol;
                    syms[n_syms].value = v;
                    snprintf(syms[n_syms].site, sizeof syms[n_syms].site, "%s.shape[%d]", r->site.input, r->site.dim);
                    n_syms++;
                }
                continue;
            }
            /* derived: v = scale * symbol + offset (checked: rules added
             * through the API may overflow for the sizes given) */
            char expr[128];
            tp__dim_rule_expr(r, expr, sizeof expr);
            if (known) {
                int64_t want;
                if (__builtin_mul_overflow(r->scale, known->value, &want) ||
                    __builtin_add_overflow(want, r->offset, &want))
                    st = tp_error(TP_ERR_CONSTRAINT, "%s violates %s: %s overflows for %s = %" PRId64 " (from %s)", what,
                                  expr, expr, r->symbol, known->value, known->site);
                else if (v != want)
                    st = tp_error(TP_ERR_CONSTRAINT, "%s must equal %s = %" PRId64 " (%s = %" PRId64 " from %s)", what, expr,
                                  want, r->symbol, known->value, known->site);
                continue;
            }
            int64_t diff;
            if (__builtin_sub_overflow(v, r->offset, &diff)) {
                st = tp_error(TP_ERR_CONSTRAINT, "%s violates %s: the %s it needs overflows int64", what, expr, r->symbol);
                continue;
            }
            if (diff % r->scale != 0) {
                st = tp_error(TP_ERR_CONSTRAINT, "%s violates %s: no integer %s fits", what, expr, r->symbol);
                continue;
            }
            int64_t base = diff / r->scale;
            char derived_what[384];
            snprintf(derived_what, sizeof derived_what, "%s (%s = %" PRId64 ")", what, r->symbol, base);
            if ((st = check_range(p, r->symbol, base, derived_what)) != TP_OK) break;
            syms[n_syms].name = r->symbol;
            syms[n_syms].value = base;
            snprintf(syms[n_syms].site, sizeof syms[n_syms].site, "%s.shape[%d]", r->site.input, r->site.dim);
            n_syms++;
        }
    }
    tp_free(syms);
    TP_TRY(st);

    /* equality constraints */
    for (int i = 0; i < p->n_equalities; i++) {
        const tp_equality_constraint *c = &p->equalities[i];
        const tp_dim_site *first = NULL;
        int64_t first_v = 0;
        for (int k = 0; k < c->n_sites; k++) {
            const tp_tensor *t = find_leaf(got, c->sites[k].input);
            if (!t || c->sites[k].dim >= tp_tensor_ndim(t)) continue;
            int64_t v = tp_tensor_sizes(t)[c->sites[k].dim];
            if (!first) {
                first = &c->sites[k];
                first_v = v;
                continue;
            }
            if (v != first_v) {
                char name[160] = "";
                if (c->name) snprintf(name, sizeof name, " (dim \"%s\")", c->name);
                return tp_error(TP_ERR_CONSTRAINT, "%s.shape[%d] = %" PRId64 " must equal %s.shape[%d] = %" PRId64 "%s",
                                c->sites[k].input, c->sites[k].dim, v, first->input, first->dim, first_v, name);
            }
        }
    }
    return TP_OK;
}

static tp_status check_bound(const tp_program *p, const bound_inputs *b) {
    /* structure against the examples (the recorded input structure) */
    for (int i = 0; i < b->n; i++) {
        const tp_value *e = tp_program_example_input(p, b->names[i]);
        char why[512];
        if (e && !same_structure(&b->values[i], e, why, sizeof why, b->names[i]))
            return tp_error(TP_ERR_INVALID_ARG, "input tree structure does not match the captured call: %s", why);
    }
    leaf_list got = {0};
    tp_status st = TP_OK;
    for (int i = 0; st == TP_OK && i < b->n; i++) st = collect_leaves(&b->values[i], b->names[i], &got, 0);
    if (st == TP_OK) st = check_leaves(p, b, &got);
    tp_free(got.items);
    return st;
}

tp_status tp_program_check_inputs(const tp_program *p, const tp_value *args, int n_args, const tp_value *kwargs) {
    bound_inputs b;
    TP_TRY(bind_user(p, args, n_args, kwargs, &b));
    tp_status st = check_bound(p, &b);
    bound_free(&b);
    return st;
}

/* ---- calling ----------------------------------------------------------- */

tp_status tp__program_resolve_attr(void *user, const char *target, tp_value *out) {
    const tp_program *p = user;
    tp_tensor *t;
    TP_TRY(tp_module_get_state(p->state, target, &t, NULL, NULL));
    *out = tp_value_tensor(tp_tensor_retain(t));
    return TP_OK;
}

tp_status tp_program_call_flat(const tp_program *p, const tp_value *inputs, int n_inputs, tp_value *out) {
    int64_t n_ph = tp_graph_num_placeholders(p->graph);
    TP_CHECK(n_inputs == n_ph, TP_ERR_INVALID_ARG, "expected %lld flat inputs, got %d", (long long)n_ph, n_inputs);
    tp_value result = tp_value_none();
    TP_TRY(tp_interp_run(p->graph, inputs, n_inputs, tp__program_resolve_attr, (void *)p, &result));
    tp_value leaves = tp_value_none();
    tp_status st = flatten_value(&result, &leaves);
    tp_value_clear(&result);
    if (st == TP_OK) *out = leaves;
    return st;
}

/* The value held by a user input at `path` ("x", "xs[0]", "d['k']"). */
static tp_value *lookup_path(bound_inputs *b, const char *path) {
    char root[256];
    path_root(path, root, sizeof root);
    tp_value *v = NULL;
    for (int i = 0; i < b->n && !v; i++)
        if (strcmp(b->names[i], root) == 0) v = &b->values[i];
    const char *q = path + strlen(root);
    while (v && *q == '[') {
        q++;
        if (*q == '\'') {
            const char *end = strchr(q + 1, '\'');
            if (!end) return NULL;
            char key[128];
            size_t n = (size_t)(end - q - 1);
            if (n >= sizeof key) return NULL;
            memcpy(key, q + 1, n);
            key[n] = '\0';
            v = tp_value_dict_get(v, key);
            q = end + 1;
        } else {
            char *end;
            long long idx = strtoll(q, &end, 10);
            v = tp_value_at(v, idx);
            q = end;
        }
        if (*q != ']') return NULL;
        q++;
    }
    return *q ? NULL : v;
}

/* Write mutation output `value` into `dst` unless it already is dst. */
static tp_status write_back(tp_tensor *dst, const tp_value *value, const char *what) {
    TP_CHECK(value->kind == TP_VAL_TENSOR, TP_ERR_TYPE, "mutation output for %s is a %s, not a tensor", what,
             tp_value_kind_name(value->kind));
    tp_tensor *src = value->u.tensor;
    if (tp__written_in_place(src, dst)) return TP_OK;
    tp_status st = tp_tensor_copy_(dst, src);
    if (st != TP_OK) tp_error_context("applying the mutation of %s", what);
    return st;
}

/* Turn user leaves into the user-visible result. */
static tp_status build_user_output(const tp_program *p, const tp_value *raw_tree, const tp_value *leaves, int n_mut,
                                   tp_value *out) {
    int64_t n = tp_value_len(leaves) - n_mut;
    const tp_value *user = tp_value_at(leaves, n_mut);
    if (p->out_spec && tp_treespec_num_leaves(p->out_spec) != n) {
        /* A leaf of the out_spec stands for one user output, whatever its
         * value: an op returning a tuple (topk, split, chunk) used directly
         * as an output is one leaf holding that tuple, as tensorplay
         * records it. The user outputs are then the output node's items
         * after the mutations, or its whole value when it is the only one. */
        int64_t n_user = tp_signature_n_outputs(p->signature) - n_mut;
        if (n_user == tp_treespec_num_leaves(p->out_spec)) {
            if (n_mut == 0 && n_user == 1) return tp_pytree_unflatten(p->out_spec, raw_tree, 1, out);
            if (tp_value_is_seq(raw_tree) && tp_value_len(raw_tree) == n_mut + n_user)
                return tp_pytree_unflatten(p->out_spec, tp_value_at(raw_tree, n_mut), n_user, out);
        }
    }
    if (p->out_spec) return tp_pytree_unflatten(p->out_spec, user, n, out);
    if (n_mut == 0) return tp_value_copy(raw_tree, out);
    if (tp_value_is_seq(raw_tree) && tp_value_len(raw_tree) >= n_mut) {
        /* the output tuple minus its first n_mut items */
        int64_t rest = tp_value_len(raw_tree) - n_mut;
        if (rest == 1) return tp_value_copy(tp_value_at(raw_tree, n_mut), out);
        TP_TRY(tp_value_tuple(rest, out));
        for (int64_t i = 0; i < rest; i++) {
            tp_value c;
            tp_status st = tp_value_copy(tp_value_at(raw_tree, n_mut + i), &c);
            if (st == TP_OK) st = tp_value_seq_set(out, i, &c);
            if (st != TP_OK) {
                tp_value_clear(out);
                return st;
            }
        }
        return TP_OK;
    }
    if (n == 1) return tp_value_copy(user, out);
    TP_TRY(tp_value_tuple(n, out));
    for (int64_t i = 0; i < n; i++) {
        tp_value c;
        tp_status st = tp_value_copy(&user[i], &c);
        if (st == TP_OK) st = tp_value_seq_set(out, i, &c);
        if (st != TP_OK) {
            tp_value_clear(out);
            return st;
        }
    }
    return TP_OK;
}

/* Leading output leaves that are mutations or tokens (dropped from the user's result). */
static int count_mutation_leaves(const tp_program *p) {
    int n_mut = 0;
    for (int i = 0; i < tp_signature_n_outputs(p->signature); i++) {
        tp_output_kind k = tp_signature_output(p->signature, i)->kind;
        if (k == TP_OUTPUT_TOKEN || is_mutation(k)) n_mut++;
    }
    return n_mut;
}

/* The interpreter path, for graphs the engine cannot plan: flat holds the
 * user inputs; state and tokens are filled in here. The nodes run at run
 * context r's CPU level (NULL: a pooled one's), as its plans would. */
static tp_status call_interpreted(tp_program *p, tp_run *r, bound_inputs *b, tp_value *flat, int64_t n_ph,
                                  tp_value *out) {
    tp_status st = TP_OK;
    for (int64_t i = 0; st == TP_OK && i < n_ph; i++) {
        const char *name = tp_node_name(tp_graph_placeholder_at(p->graph, i));
        const tp_input_spec *s = tp_signature_input(p->signature, tp_signature_find_input(p->signature, name));
        if (s->kind == TP_INPUT_TOKEN) {
            /* an effect token is an empty tensor, as in torch: it stays a leaf of the outputs */
            tp_tensor *token;
            st = tp_tensor_empty(TP_FLOAT32, 1, (const int64_t[]){0}, &token);
            if (st == TP_OK) flat[i] = tp_value_tensor(token);
        } else if (s->kind != TP_INPUT_USER_INPUT && s->kind != TP_INPUT_CUSTOM_OBJ) {
            tp_tensor *t;
            st = tp_module_get_state(p->state, s->target, &t, NULL, NULL);
            if (st == TP_OK) flat[i] = tp_value_tensor(tp_tensor_retain(t));
        }
    }
    tp_value result = tp_value_none(), leaves = tp_value_none();
    tp_cpu_level outer = tp__eager_level_swap(tp__run_cpu_level(r));
    if (st == TP_OK) st = tp_interp_run(p->graph, flat, n_ph, tp__program_resolve_attr, p, &result);
    tp__eager_level_swap(outer);
    if (st == TP_OK) st = flatten_value(&result, &leaves);
    /* apply mutations, in output order */
    for (int i = 0; st == TP_OK && i < tp_signature_n_outputs(p->signature); i++) {
        const tp_output_spec *s = tp_signature_output(p->signature, i);
        if (!is_mutation(s->kind)) continue;
        const tp_value *v = tp_value_at(&leaves, i);
        if (!v) {
            st = tp_error(TP_ERR_VERIFY, "graph has no output for mutation spec '%s'", s->arg.name);
            break;
        }
        if (s->kind == TP_OUTPUT_USER_INPUT_MUTATION) {
            tp_value *dst = lookup_path(b, s->target);
            if (dst && dst->kind == TP_VAL_TENSOR) st = write_back(dst->u.tensor, v, s->target);
            /* a whole container target: element updates were applied in place */
        } else {
            tp_tensor *dst;
            st = tp_module_get_state(p->state, s->target, &dst, NULL, NULL);
            if (st == TP_OK) st = write_back(dst, v, s->target);
        }
    }
    if (st == TP_OK) st = build_user_output(p, &result, &leaves, count_mutation_leaves(p), out);
    tp_value_clear(&result);
    tp_value_clear(&leaves);
    return st;
}

/* Shared by tp_program_call and tp_program_call_exported: the engine runs
 * the compiled plan (engine.c); graphs it cannot plan are interpreted. */
static tp_status call_bound(tp_program *p, tp_run *r, bound_inputs *b, tp_value *out) {
    int64_t n_ph = tp_graph_num_placeholders(p->graph);
    tp_value *flat = tp_calloc((size_t)(n_ph ? n_ph : 1), sizeof *flat);
    TP_CHECK(flat != NULL, TP_ERR_NOMEM, "out of memory calling the program");
    tp_status st = TP_OK;
    for (int64_t i = 0; st == TP_OK && i < n_ph; i++) {
        const char *name = tp_node_name(tp_graph_placeholder_at(p->graph, i));
        int k = tp_signature_find_input(p->signature, name);
        if (k < 0) {
            st = tp_error(TP_ERR_VERIFY, "placeholder '%s' has no input spec", name);
            break;
        }
        const tp_input_spec *s = tp_signature_input(p->signature, k);
        if (s->kind == TP_INPUT_USER_INPUT) {
            tp_value *v = lookup_path(b, name);
            st = v ? tp_value_copy(v, &flat[i]) : tp_error(TP_ERR_INTERNAL, "user input '%s' not bound", name);
        }
    }
    if (st == TP_OK) {
        tp_value raw, leaves;
        bool unplannable;
        st = tp__engine_call(p, r, flat, n_ph, &raw, &leaves, &unplannable);
        if (st == TP_OK) {
            st = build_user_output(p, &raw, &leaves, count_mutation_leaves(p), out);
            tp_value_clear(&raw);
            tp_value_clear(&leaves);
        } else if (unplannable) {
            tp_clear_error();
            st = call_interpreted(p, r, b, flat, n_ph, out);
        }
    }
    for (int64_t i = 0; i < n_ph; i++) tp_value_clear(&flat[i]);
    tp_free(flat);
    return st;
}

tp_status tp__program_call_with(tp_program *p, tp_run *r, const tp_value *args, int n_args, const tp_value *kwargs,
                                tp_value *out) {
    bound_inputs b;
    TP_TRY(bind_user(p, args, n_args, kwargs, &b));
    tp_status st = check_bound(p, &b);
    if (st == TP_OK) st = call_bound(p, r, &b, out);
    bound_free(&b);
    return st;
}

tp_status tp_program_call(tp_program *p, const tp_value *args, int n_args, const tp_value *kwargs, tp_value *out) {
    return tp__program_call_with(p, NULL, args, n_args, kwargs, out);
}

tp_status tp__program_check_tensor_inputs(tp_program *p, tp_tensor *const *inputs, int n) {
    TP_CHECK(n >= 0 && (n == 0 || inputs != NULL), TP_ERR_INVALID_ARG, "inputs is NULL");
    tp_value *args = tp_calloc((size_t)(n ? n : 1), sizeof *args);
    TP_CHECK(args != NULL, TP_ERR_NOMEM, "out of memory checking inputs");
    tp_status st = TP_OK;
    for (int i = 0; i < n && st == TP_OK; i++) {
        if (!inputs[i]) st = tp_error(TP_ERR_INVALID_ARG, "input %d is NULL", i);
        else args[i] = tp_value_tensor(tp_tensor_retain(inputs[i]));
    }
    if (st == TP_OK) st = tp_program_check_inputs(p, args, n, NULL);
    for (int i = 0; i < n; i++) tp_value_clear(&args[i]);
    tp_free(args);
    return st;
}

tp_status tp_program_call_exported(tp_program *p, const tp_value *args, int n_args, const tp_value *kwargs,
                                   tp_value *out) {
    /* the flat contract: state then user inputs, raw outputs; no input checks */
    bound_inputs b;
    TP_TRY(bind_user(p, args, n_args, kwargs, &b));
    tp_status st = call_bound(p, NULL, &b, out);
    bound_free(&b);
    return st;
}

/* ---- unlifting --------------------------------------------------------- */

static tp_status make_getitem_chain(tp_graph *g, tp_node *root, const char *path_rest, tp_node **out) {
    /* "[0][1]" -> getitem(getitem(root, 0), 1); dict keys are not supported */
    tp_node *cur = root;
    const char *q = path_rest;
    while (*q == '[') {
        char *end;
        long long idx = strtoll(q + 1, &end, 10);
        TP_CHECK(end != q + 1 && *end == ']', TP_ERR_UNSUPPORTED, "cannot unlift a mutation of '%s'", path_rest);
        tp_value args;
        TP_TRY(tp_value_tuple(2, &args));
        args.u.seq.items[0] = tp_value_node(cur);
        args.u.seq.items[1] = tp_value_int(idx);
        tp_status st = tp_graph_call_function(g, TP_OP_GETITEM, &args, NULL, &cur);
        tp_value_clear(&args);
        TP_TRY(st);
        q = end + 1;
    }
    TP_CHECK(*q == '\0', TP_ERR_UNSUPPORTED, "cannot unlift a mutation of '%s'", path_rest);
    *out = cur;
    return TP_OK;
}

static tp_status unlift(const tp_program *p, tp_module **out) {
    tp_module *m;
    TP_TRY(tp_module_new("GraphModule", &m));
    tp_graph *g = NULL;
    tp_value defaults = tp_value_none(), user_out = tp_value_none(), leaves = tp_value_none();
    tp_status st = tp_graph_copy(p->graph, &g);
    /* the module tree shares the program's tensors */
    tp_named_state all = {0};
    if (st == TP_OK) st = tp_module_named_state(p->state, TP_FILTER_ALL, &all);
    for (int i = 0; st == TP_OK && i < all.n; i++)
        st = tp_module_set_state(m, all.items[i].name, all.items[i].kind, all.items[i].tensor, all.items[i].persistent);
    tp_named_state_free(&all);
    /* state placeholders become get_attr nodes placed after the placeholders */
    tp_node *first_body = NULL;
    for (tp_node *n = g ? tp_graph_first_node(g) : NULL; n; n = tp_node_next(n))
        if (tp_node_get_kind(n) != TP_NODE_PLACEHOLDER) {
            first_body = n;
            break;
        }
    if (st == TP_OK) st = tp_graph_set_insert_point(g, first_body);
    for (int i = 0; st == TP_OK && i < tp_signature_n_inputs(p->signature); i++) {
        const tp_input_spec *s = tp_signature_input(p->signature, i);
        if (s->kind == TP_INPUT_USER_INPUT) continue;
        tp_node *ph = tp_graph_find_node(g, s->arg.name);
        if (!ph || tp_node_get_kind(ph) != TP_NODE_PLACEHOLDER) continue;
        if (s->kind == TP_INPUT_TOKEN || s->kind == TP_INPUT_CUSTOM_OBJ || !s->target) {
            if (tp_node_num_users(ph) == 0) st = tp_graph_erase_node(g, ph);
            else st = tp_error(TP_ERR_UNSUPPORTED, "cannot unlift %s input '%s' that is still used",
                               tp_input_kind_name(s->kind), s->arg.name);
            continue;
        }
        tp_node *attr;
        st = tp_graph_get_attr(g, s->target, tp_node_meta_val(ph), &attr);
        if (st == TP_OK) st = tp_node_replace_all_uses_with(ph, attr, NULL, NULL, NULL);
        if (st == TP_OK) st = tp_graph_erase_node(g, ph);
        /* the attribute read keeps the placeholder's name (p_w = self.w), as tensorplay's unlift does */
        if (st == TP_OK) st = tp_node_rename(attr, s->arg.name);
    }
    /* consume mutation outputs with copy_ into their targets */
    tp_node *out_node = g ? tp_graph_output_node(g) : NULL;
    if (st == TP_OK && !out_node) st = tp_error(TP_ERR_VERIFY, "program graph has no output node");
    if (st == TP_OK) st = tp_graph_set_insert_point(g, out_node);
    if (st == TP_OK) st = flatten_value(tp_value_at(tp_node_args(out_node), 0), &leaves);
    int n_mut = 0;
    for (int i = 0; st == TP_OK && i < tp_signature_n_outputs(p->signature); i++) {
        const tp_output_spec *s = tp_signature_output(p->signature, i);
        if (!is_mutation(s->kind)) continue;
        n_mut++;
        const tp_value *v = tp_value_at(&leaves, i);
        if (!v || v->kind != TP_VAL_NODE) continue;
        tp_node *dst = NULL;
        if (s->kind != TP_OUTPUT_USER_INPUT_MUTATION && tp_node_get_kind(v->u.node) == TP_NODE_GET_ATTR &&
            strcmp(tp_node_target(v->u.node), s->target) == 0)
            continue; /* mutated in place */
        if (s->kind == TP_OUTPUT_USER_INPUT_MUTATION) {
            char root[256];
            path_root(s->target, root, sizeof root);
            tp_node *ph = tp_graph_find_node(g, root);
            const tp_value *ex = tp_program_example_input(p, root);
            bool container = ex && ex->kind != TP_VAL_TENSOR;
            if (!ph || (container && strlen(root) == strlen(s->target))) continue; /* applied in place */
            st = make_getitem_chain(g, ph, s->target + strlen(root), &dst);
        } else {
            st = tp_graph_get_attr(g, s->target, NULL, &dst);
        }
        if (st != TP_OK || dst == v->u.node) continue;
        tp_value args;
        st = tp_value_tuple(2, &args);
        if (st != TP_OK) break;
        args.u.seq.items[0] = tp_value_node(dst);
        args.u.seq.items[1] = tp_value_node(v->u.node);
        st = tp_graph_call_function(g, TP_OP_COPY_, &args, NULL, NULL);
        tp_value_clear(&args);
    }
    /* the output returns the user-visible value */
    if (st == TP_OK) st = build_user_output(p, tp_value_at(tp_node_args(out_node), 0), &leaves, n_mut, &user_out);
    if (st == TP_OK) {
        tp_value args;
        st = tp_value_tuple(1, &args);
        if (st == TP_OK) {
            tp_value_move(&args.u.seq.items[0], &user_out);
            st = tp_node_set_args(out_node, &args);
            tp_value_clear(&args);
        }
    }
    if (st == TP_OK) st = tp_graph_set_insert_point(g, NULL);
    if (st == TP_OK) st = tp_graph_eliminate_dead_code(g, NULL);
    /* defaults: the example inputs */
    if (st == TP_OK) st = tp_value_dict(&defaults);
    for (int i = 0; st == TP_OK && i < p->n_examples; i++) {
        tp_value c;
        st = tp_value_copy(&p->examples[i].value, &c);
        if (st == TP_OK) st = tp_value_dict_set(&defaults, p->examples[i].name, &c);
    }
    if (st == TP_OK) {
        st = tp_module_set_graph(m, g, &defaults);
        g = NULL;
    }
    tp_graph_free(g);
    tp_value_clear(&defaults);
    tp_value_clear(&user_out);
    tp_value_clear(&leaves);
    if (st != TP_OK) {
        tp_module_free(m);
        return st;
    }
    *out = m;
    return TP_OK;
}

tp_status tp_program_module(tp_program *p, tp_module **out) {
    pthread_mutex_lock(&p->lock);
    tp_status st = TP_OK;
    if (!p->unlifted) st = unlift(p, &p->unlifted);
    if (st == TP_OK) *out = p->unlifted;
    pthread_mutex_unlock(&p->lock);
    return st;
}

void tp_program_invalidate_module(tp_program *p) {
    tp__engine_invalidate(p);
    pthread_mutex_lock(&p->lock);
    tp_module_free(p->unlifted);
    p->unlifted = NULL;
    pthread_mutex_unlock(&p->lock);
}

/* ---- printing ---------------------------------------------------------- */

static void print_list(tp_sb *sb, const char *label, const tp_strings *s) {
    tp__sb_printf(sb, "\n%-22s = [", label);
    for (int i = 0; i < s->n; i++) tp__sb_printf(sb, "%s'%s'", i ? ", " : "", s->items[i]);
    tp__sb_puts(sb, "]");
}

tp_status tp_program_to_string(const tp_program *p, char **out) {
    tp_sb sb = {0};
    char *code;
    TP_TRY(tp_graph_to_string(p->graph, &code));
    tp__sb_puts(&sb, code);
    tp_free(code);
    if (sb.len && sb.data[sb.len - 1] != '\n') tp__sb_puts(&sb, "\n");
    static const struct {
        const char *label;
        tp_signature_view view;
    } views[] = {{"user_inputs", TP_VIEW_USER_INPUTS},
                 {"parameters", TP_VIEW_PARAMETERS},
                 {"buffers", TP_VIEW_BUFFERS},
                 {"non_persistent_buffers", TP_VIEW_NON_PERSISTENT_BUFFERS}};
    for (size_t i = 0; i < TP_ARRAY_LEN(views); i++) {
        tp_strings s;
        tp_status st = tp_signature_view_names(p->signature, views[i].view, &s);
        if (st != TP_OK) {
            tp__sb_free(&sb);
            return st;
        }
        if (views[i].view != TP_VIEW_NON_PERSISTENT_BUFFERS || s.n) print_list(&sb, views[i].label, &s);
        tp_strings_free(&s);
    }
    if (p->n_dim_rules) {
        tp__sb_printf(&sb, "\n%-22s = {", "dynamic_shapes");
        /* group rules by input, in first-appearance order */
        for (int i = 0; i < p->n_dim_rules; i++) {
            const char *input = p->dim_rules[i].site.input;
            bool seen = false;
            for (int k = 0; k < i && !seen; k++) seen = strcmp(p->dim_rules[k].site.input, input) == 0;
            if (seen) continue;
            tp__sb_printf(&sb, "%s'%s': {", i ? ", " : "", input);
            bool first = true;
            for (int k = i; k < p->n_dim_rules; k++) {
                const tp_dim_rule *r = &p->dim_rules[k];
                if (strcmp(r->site.input, input) != 0) continue;
                tp__sb_printf(&sb, "%s%d: ", first ? "" : ", ", r->site.dim);
                first = false;
                if (r->kind == TP_DIM_STATIC) {
                    tp__sb_printf(&sb, "%" PRId64, r->value);
                } else if (r->kind == TP_DIM_SYMBOL) {
                    const tp_range_constraint *rc = tp_program_find_range(p, r->symbol);
                    tp__sb_printf(&sb, "Dim('%s'", r->symbol);
                    if (rc) {
                        tp__sb_printf(&sb, ", min=%" PRId64, rc->min);
                        if (rc->max != TP_DIM_UNBOUNDED) tp__sb_printf(&sb, ", max=%" PRId64, rc->max);
                    }
                    tp__sb_puts(&sb, ")");
                } else {
                    char expr[128];
                    tp__dim_rule_expr(r, expr, sizeof expr);
                    tp__sb_puts(&sb, expr);
                }
            }
            tp__sb_puts(&sb, "}");
        }
        tp__sb_puts(&sb, "}");
    }
    tp__sb_puts(&sb, "\n");
    return tp__sb_finish(&sb, out);
}

tp_status tp_program_print(const tp_program *p, FILE *f) {
    char *s;
    TP_TRY(tp_program_to_string(p, &s));
    int rc = fputs(s, f);
    tp_free(s);
    TP_CHECK(rc >= 0, TP_ERR_IO, "cannot write the program");
    return TP_OK;
}
