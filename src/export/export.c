/*
 * export.c - the export driver (tp_export, tp_draft_export): lift the
 * module tree's state into placeholders, bind user inputs to placeholders
 * (containers read through getitem nodes), trace the forward in export
 * mode, turn rebound state/inputs into mutation outputs, build the
 * signature, the program, its examples, tree specs and module call graph,
 * then check the dynamic-shape spec (shapes.c) and validate.
 */
#include <stdio.h>
#include <string.h>

#include "export_impl.h"

/* ---- module names --------------------------------------------------------------- */

static tp_status add_mod(tp_ctx *ctx, const tp_module *m, const char *fqn, int *cap) {
    if (ctx->n_mods == *cap) {
        int ncap = *cap ? *cap * 2 : 16;
        modname *mm = tp_realloc(ctx->mods, (size_t)ncap * sizeof *mm);
        TP_CHECK(mm != NULL, TP_ERR_NOMEM, "out of memory");
        ctx->mods = mm;
        *cap = ncap;
    }
    char *f = tp_strdup(fqn);
    TP_CHECK(f != NULL, TP_ERR_NOMEM, "out of memory");
    ctx->mods[ctx->n_mods++] = (modname){m, f, 0};
    for (int i = 0; i < tp_module_num_children(m); i++) {
        const char *name;
        tp_module *c = tp_module_child_at(m, i, &name);
        char sub[512];
        snprintf(sub, sizeof sub, "%s%s%s", fqn, *fqn ? "." : "", name);
        TP_TRY(add_mod(ctx, c, sub, cap));
    }
    return TP_OK;
}

/* ---- origins ------------------------------------------------------------------------ */

static tp_status add_origin(tp_ctx *ctx, const char *path, origin_kind kind, bool persistent, tp_node *node,
                            tp_t *h, tp_tensor *model_tensor) {
    if (ctx->n_origins == ctx->cap_origins) {
        int cap = ctx->cap_origins ? ctx->cap_origins * 2 : 16;
        origin *o = tp_realloc(ctx->origins, (size_t)cap * sizeof *o);
        TP_CHECK(o != NULL, TP_ERR_NOMEM, "out of memory");
        ctx->origins = o;
        ctx->cap_origins = cap;
    }
    char *p = tp_strdup(path);
    TP_CHECK(p != NULL, TP_ERR_NOMEM, "out of memory");
    h->origin = ctx->n_origins;
    ctx->origins[ctx->n_origins++] = (origin){p, kind, persistent, node, h, model_tensor};
    return TP_OK;
}

static const char *prefix_of(tp_state_kind k) {
    return k == TP_STATE_PARAMETER ? "p_" : k == TP_STATE_BUFFER ? "b_" : "c_";
}

/* Lift one module's own entries: parameters, buffers, constants. */
static tp_status lift_module(tp_ctx *ctx, const tp_module *m, const char *fqn) {
    tp_named_state own;
    TP_TRY(tp_module_named_state(m, TP_FILTER_ALL, &own));
    tp_status st = TP_OK;
    static const tp_state_kind order[3] = {TP_STATE_PARAMETER, TP_STATE_BUFFER, TP_STATE_CONSTANT};
    for (int k = 0; k < 3 && st == TP_OK; k++) {
        for (int i = 0; i < own.n && st == TP_OK; i++) {
            const tp_named_tensor *e = &own.items[i];
            if (strchr(e->name, '.') || e->kind != order[k]) continue;
            bool dup = false;
            for (int j = 0; j < ctx->n_origins && !dup; j++) dup = ctx->origins[j].model_tensor == e->tensor;
            if (dup) continue; /* tied: lifted once, under its first name */
            char target[512], name[600];
            snprintf(target, sizeof target, "%s%s%s", fqn, *fqn ? "." : "", e->name);
            snprintf(name, sizeof name, "%s%s", prefix_of(e->kind), target);
            for (char *c = name; *c; c++)
                if (*c == '.') *c = '_';
            tp_value val = tp_value_tensor(e->tensor); /* borrowed: copied as meta */
            tp_node *ph = NULL;
            st = tp_graph_placeholder(ctx->g, name, &val, &ph);
            tp_tensor *clone = NULL;
            if (st == TP_OK) st = tp_tensor_clone(e->tensor, &clone);
            if (st != TP_OK) break;
            tp_t *h = tp__ctx_handle(ctx, clone, ph, TP_OP_INVALID);
            if (h->poison) {
                st = ctx->status;
                break;
            }
            origin_kind ok = e->kind == TP_STATE_PARAMETER ? ORIGIN_PARAM
                             : e->kind == TP_STATE_BUFFER  ? ORIGIN_BUFFER
                                                           : ORIGIN_CONST;
            st = add_origin(ctx, target, ok, e->persistent, ph, h, e->tensor);
        }
    }
    tp_named_state_free(&own);
    return st;
}

static tp_status lift_tree(tp_ctx *ctx, const tp_module *m, const char *fqn) {
    TP_TRY(lift_module(ctx, m, fqn));
    for (int i = 0; i < tp_module_num_children(m); i++) {
        const char *name;
        tp_module *c = tp_module_child_at(m, i, &name);
        char sub[512];
        snprintf(sub, sizeof sub, "%s%s%s", fqn, *fqn ? "." : "", name);
        TP_TRY(lift_tree(ctx, c, sub));
    }
    return TP_OK;
}

static bool has_tensor(const tp_value *v) {
    if (v->kind == TP_VAL_TENSOR) return true;
    if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE || v->kind == TP_VAL_DICT)
        for (int64_t i = 0; i < v->u.seq.n; i++)
            if (has_tensor(&v->u.seq.items[i])) return true;
    return false;
}

/* Replace the tensors of `v` (a copy of a user argument) by clones with
 * handles; `node` is the node holding v (placeholder or getitem). */
static tp_status bind_user_value(tp_ctx *ctx, tp_value *v, tp_node *node, const char *path) {
    if (v->kind == TP_VAL_TENSOR) {
        tp_tensor *clone;
        TP_TRY(tp_tensor_clone(v->u.tensor, &clone));
        tp_tensor_free(v->u.tensor);
        v->u.tensor = tp_tensor_retain(clone);
        tp_t *h = tp__ctx_handle(ctx, clone, node, TP_OP_INVALID);
        if (h->poison) return ctx->status;
        return add_origin(ctx, path, ORIGIN_USER, true, node, h, NULL);
    }
    if (v->kind != TP_VAL_LIST && v->kind != TP_VAL_TUPLE && v->kind != TP_VAL_DICT) return TP_OK;
    for (int64_t i = 0; i < v->u.seq.n; i++) {
        if (!has_tensor(&v->u.seq.items[i])) continue;
        tp_value gargs;
        TP_TRY(tp_value_tuple(2, &gargs));
        tp_value a0 = tp_value_node(node), a1 = tp_value_int(i);
        tp_value_seq_set(&gargs, 0, &a0);
        tp_value_seq_set(&gargs, 1, &a1);
        tp_node *gi = NULL;
        tp_status st = tp_graph_call_function(ctx->g, TP_OP_GETITEM, &gargs, NULL, &gi);
        tp_value_clear(&gargs);
        TP_TRY(st);
        char sub[512];
        if (v->kind == TP_VAL_DICT) snprintf(sub, sizeof sub, "%s['%s']", path, v->u.seq.keys[i]);
        else snprintf(sub, sizeof sub, "%s[%lld]", path, (long long)i);
        TP_TRY(bind_user_value(ctx, &v->u.seq.items[i], gi, sub));
    }
    return TP_OK;
}

/* Deep copy with every tensor cloned. */
static tp_status clone_value(const tp_value *v, tp_value *out) {
    if (v->kind == TP_VAL_TENSOR) {
        tp_tensor *t;
        TP_TRY(tp_tensor_clone(v->u.tensor, &t));
        *out = tp_value_tensor(t);
        return TP_OK;
    }
    TP_TRY(tp_value_copy(v, out));
    if (out->kind == TP_VAL_LIST || out->kind == TP_VAL_TUPLE || out->kind == TP_VAL_DICT) {
        for (int64_t i = 0; i < out->u.seq.n; i++) {
            tp_value c;
            tp_status st = clone_value(&v->u.seq.items[i], &c);
            if (st == TP_OK) {
                tp_value_clear(&out->u.seq.items[i]);
                out->u.seq.items[i] = c;
            } else {
                tp_value_clear(out);
                return st;
            }
        }
    }
    return TP_OK;
}

/* ---- building the program -------------------------------------------------------------- */

typedef struct export_state {
    tp_ctx *ctx;
    tp_module *m;
    const fwd_method *fm;
    tp_value *bound;   /* user's values (copies referencing the caller's tensors) */
    tp_value *traced;  /* the forward's args (cloned tensors with handles) */
    tp_node **user_ph;
    tp_value result;
    char *notes;       /* shape solver notes (draft report) */
} export_state;

static void export_state_free(export_state *s) {
    for (int i = 0; s->fm && i < s->fm->n_args; i++) {
        if (s->bound) tp_value_clear(&s->bound[i]);
        if (s->traced) tp_value_clear(&s->traced[i]);
    }
    tp_free(s->bound);
    tp_free(s->traced);
    tp_free(s->user_ph);
    tp_value_clear(&s->result);
    tp_free(s->notes);
    tp__ctx_free(s->ctx);
}

/* Replace tensors by node references / build output specs. */
static tp_status output_leaf(tp_ctx *ctx, const tp_value *leaf, tp_value *gv, tp_signature *sig) {
    if (leaf->kind == TP_VAL_TENSOR) {
        tp_t *h = tp__ctx_find(ctx, leaf->u.tensor);
        TP_CHECK(h && h->node, TP_ERR_INVALID_ARG, "the forward returned a tensor that is not a value of the context");
        tp_node *n;
        TP_TRY(tp__ctx_node(ctx, h, &n));
        *gv = tp_value_node(n);
        return tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(n)), NULL);
    }
    TP_TRY(tp_value_copy(leaf, gv));
    return tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_constant("", *leaf), NULL);
}

static tp_status build_program(export_state *s, const tp_export_options *opts, tp_program **out) {
    tp_ctx *ctx = s->ctx;
    tp_signature *sig = NULL;
    tp_program *p = NULL;
    tp_value leaves = tp_value_none(), outv = tp_value_none();
    tp_treespec *out_spec = NULL;
    TP_TRY(tp_signature_new(&sig));
    tp_status st = tp_pytree_flatten(&s->result, &leaves, &out_spec);
    /* inputs */
    for (int64_t i = 0; st == TP_OK && i < tp_graph_num_placeholders(ctx->g); i++) {
        tp_node *ph = tp_graph_placeholder_at(ctx->g, i);
        const origin *o = NULL;
        for (int k = 0; k < ctx->n_origins && !o; k++)
            if (ctx->origins[k].initial == ph && ctx->origins[k].kind != ORIGIN_USER) o = &ctx->origins[k];
        if (o) {
            tp_input_kind ik = o->kind == ORIGIN_PARAM    ? TP_INPUT_PARAMETER
                               : o->kind == ORIGIN_BUFFER ? TP_INPUT_BUFFER
                                                          : TP_INPUT_CONSTANT_TENSOR;
            st = tp_signature_add_input(sig, ik, tp_arg_tensor(tp_node_name(ph)), o->path,
                                        o->kind == ORIGIN_BUFFER ? (o->persistent ? TP_PERSISTENT_YES : TP_PERSISTENT_NO)
                                                                 : TP_PERSISTENT_UNSET);
            continue;
        }
        int arg = -1;
        for (int k = 0; k < s->fm->n_args; k++)
            if (s->user_ph[k] == ph) arg = k;
        if (arg >= 0 && !has_tensor(&s->bound[arg]) && s->bound[arg].kind != TP_VAL_NONE)
            st = tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_constant(tp_node_name(ph), s->bound[arg]), NULL,
                                        TP_PERSISTENT_UNSET);
        else
            st = tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor(tp_node_name(ph)), NULL,
                                        TP_PERSISTENT_UNSET);
    }
    /* mutation outputs, then user outputs */
    int n_mut = 0;
    for (int k = 0; st == TP_OK && k < ctx->n_origins; k++) {
        const origin *o = &ctx->origins[k];
        if (o->handle->node == o->initial) continue;
        if (o->kind == ORIGIN_CONST) {
            st = tp_error(TP_ERR_UNSUPPORTED, "the forward mutates constant tensor '%s'; register it as a buffer",
                          o->path);
            break;
        }
        tp_output_kind ok = o->kind == ORIGIN_PARAM    ? TP_OUTPUT_PARAMETER_MUTATION
                            : o->kind == ORIGIN_BUFFER ? TP_OUTPUT_BUFFER_MUTATION
                                                       : TP_OUTPUT_USER_INPUT_MUTATION;
        st = tp_signature_add_output(sig, ok, tp_arg_tensor(tp_node_name(o->handle->node)), o->path);
        n_mut++;
    }
    int64_t n_user = tp_value_len(&leaves);
    if (st == TP_OK) st = tp_value_tuple(n_mut + n_user, &outv);
    for (int k = 0, i = 0; st == TP_OK && k < ctx->n_origins; k++) {
        const origin *o = &ctx->origins[k];
        if (o->handle->node == o->initial) continue;
        tp_value nv = tp_value_node(o->handle->node);
        st = tp_value_seq_set(&outv, i++, &nv);
    }
    for (int64_t i = 0; st == TP_OK && i < n_user; i++) {
        tp_value gv;
        st = output_leaf(ctx, tp_value_at(&leaves, i), &gv, sig);
        if (st == TP_OK) st = tp_value_seq_set(&outv, n_mut + i, &gv);
        else tp_value_clear(&gv);
    }
    if (st == TP_OK) st = tp_graph_output(ctx->g, &outv, NULL);
    if (st == TP_OK) st = tp_graph_eliminate_dead_code(ctx->g, NULL);
    tp_value_clear(&outv);
    if (st != TP_OK) {
        tp_signature_free(sig);
        tp_value_clear(&leaves);
        tp_treespec_free(out_spec);
        return st;
    }
    tp_graph *g = ctx->g;
    ctx->g = NULL;
    st = tp_program_new(g, sig, &p);
    /* state: shared with the module */
    for (int k = 0; st == TP_OK && k < ctx->n_origins; k++) {
        const origin *o = &ctx->origins[k];
        if (o->kind == ORIGIN_USER) continue;
        tp_state_kind sk = o->kind == ORIGIN_PARAM    ? TP_STATE_PARAMETER
                           : o->kind == ORIGIN_BUFFER ? TP_STATE_BUFFER
                                                      : TP_STATE_CONSTANT;
        st = tp_program_set_state(p, o->path, sk, o->model_tensor, o->persistent);
    }
    /* examples: pristine clones of the user's values */
    for (int i = 0; st == TP_OK && i < s->fm->n_args; i++) {
        tp_value c;
        st = clone_value(&s->bound[i], &c);
        if (st == TP_OK) st = tp_program_set_example_input(p, tp_node_name(s->user_ph[i]), &c);
        tp_value_clear(&c);
    }
    /* tree specs: ((args...), {}) and the result */
    tp_treespec *in_spec = NULL;
    if (st == TP_OK) {
        tp_value tree = tp_value_none(), argt = tp_value_none(), kw = tp_value_none(), fl = tp_value_none();
        st = tp_value_tuple(2, &tree);
        if (st == TP_OK) st = tp_value_tuple(s->fm->n_args, &argt);
        for (int i = 0; st == TP_OK && i < s->fm->n_args; i++) {
            tp_value c;
            st = tp_value_copy(&s->bound[i], &c);
            if (st == TP_OK) st = tp_value_seq_set(&argt, i, &c);
        }
        if (st == TP_OK) st = tp_value_dict(&kw);
        if (st == TP_OK) st = tp_value_seq_set(&tree, 0, &argt);
        if (st == TP_OK) st = tp_value_seq_set(&tree, 1, &kw);
        if (st == TP_OK) st = tp_pytree_flatten(&tree, &fl, &in_spec);
        tp_value_clear(&tree);
        tp_value_clear(&argt);
        tp_value_clear(&kw);
        tp_value_clear(&fl);
    }
    if (st == TP_OK) st = tp_program_set_in_spec(p, in_spec);
    if (st == TP_OK) st = tp_program_set_out_spec(p, out_spec);
    /* module call graph: the root, then every recorded child call */
    if (st == TP_OK) {
        int n_in = s->fm->n_args;
        tp_arg_spec *ins = tp_calloc((size_t)(n_in + 1), sizeof *ins);
        tp_arg_spec *outs = tp_calloc((size_t)(n_user + 1), sizeof *outs);
        if (!ins || !outs) st = tp_error(TP_ERR_NOMEM, "out of memory");
        for (int i = 0; st == TP_OK && i < n_in; i++) ins[i] = tp_arg_tensor(tp_node_name(s->user_ph[i]));
        const tp_signature *fs = tp_program_signature(p);
        for (int64_t i = 0; st == TP_OK && i < n_user; i++) outs[i] = tp_signature_output(fs, n_mut + (int)i)->arg;
        if (st == TP_OK) {
            tp_module_call_signature ms = {n_in, (int)n_user, ins, outs, in_spec, out_spec, n_in,
                                           s->fm->arg_names};
            st = tp_program_add_module_call(p, "", &ms);
        }
        tp_free(ins);
        tp_free(outs);
    }
    tp_treespec_free(in_spec);
    for (int c = 0; st == TP_OK && c < ctx->n_calls; c++) {
        const call_record *r = &ctx->calls[c];
        tp_arg_spec *ins = tp_calloc((size_t)(r->n_inputs + 1), sizeof *ins);
        tp_arg_spec *outs = tp_calloc((size_t)(r->n_outputs + 1), sizeof *outs);
        if (!ins || !outs) st = tp_error(TP_ERR_NOMEM, "out of memory");
        for (int i = 0; st == TP_OK && i < r->n_inputs; i++)
            ins[i] = r->input_names[i] ? tp_arg_tensor(r->input_names[i]) : tp_arg_constant("", r->input_consts[i]);
        for (int i = 0; st == TP_OK && i < r->n_outputs; i++)
            outs[i] = tp_arg_tensor(r->output_names[i] ? r->output_names[i] : "");
        if (st == TP_OK) {
            tp_module_call_signature ms = {r->n_inputs, r->n_outputs, ins, outs, r->in_spec, r->out_spec,
                                           r->n_arg_names, r->arg_names};
            st = tp_program_add_module_call(p, r->fqn, &ms);
        }
        tp_free(ins);
        tp_free(outs);
    }
    for (int i = 0; st == TP_OK && opts && i < opts->n_preserve; i++) {
        const char *f = opts->preserve_module_call_signature[i];
        bool found = false;
        for (int k = 0; k < tp_program_num_module_calls(p) && !found; k++)
            found = strcmp(tp_program_module_call(p, k).fqn, f) == 0;
        if (!found) st = tp_program_add_module_call(p, f, NULL);
    }
    tp_value_clear(&leaves);
    tp_treespec_free(out_spec);
    if (st != TP_OK) {
        tp_program_free(p);
        return st;
    }
    *out = p;
    return TP_OK;
}

static tp_status check_preserve(const tp_ctx *ctx, const tp_export_options *opts) {
    for (int i = 0; opts && i < opts->n_preserve; i++) {
        const char *f = opts->preserve_module_call_signature[i];
        bool ok = false;
        for (int k = 0; k < ctx->n_mods && !ok; k++) ok = strcmp(ctx->mods[k].fqn, f) == 0;
        if (!ok) {
            tp_sb sb = {0};
            for (int k = 0; k < ctx->n_mods; k++) tp__sb_printf(&sb, "%s'%s'", k ? ", " : "", ctx->mods[k].fqn);
            char *known = NULL;
            tp__sb_finish(&sb, &known);
            tp_status st = tp_error(TP_ERR_NOT_FOUND,
                                    "preserve_module_call_signature path '%s' does not exist on the model; known: [%s]",
                                    f, known ? known : "");
            tp_free(known);
            return st;
        }
    }
    return TP_OK;
}

/* Trace m and build the program. In draft mode failures go to ctx->failures. */
static tp_status do_export(tp_module *m, const tp_value *args, int n_args, const tp_value *kwargs,
                           const tp_export_options *opts, bool draft, export_state *s, tp_program **out) {
    memset(s, 0, sizeof *s);
    *out = NULL;
    TP_CHECK(m != NULL, TP_ERR_INVALID_ARG, "module is NULL");
    TP_CHECK(n_args == 0 || args != NULL, TP_ERR_INVALID_ARG, "args is NULL");
    const char *method = opts ? opts->method : NULL;
    s->fm = tp__module_method(m, method);
    TP_CHECK(s->fm != NULL, TP_ERR_STATE, "module '%s' has no method '%s'", tp_module_type_name(m),
             method ? method : "forward");
    s->m = m;
    int n = s->fm->n_args;
    s->bound = tp_calloc((size_t)(n + 1), sizeof *s->bound);
    s->traced = tp_calloc((size_t)(n + 1), sizeof *s->traced);
    s->user_ph = tp_calloc((size_t)(n + 1), sizeof *s->user_ph);
    TP_CHECK(s->bound && s->traced && s->user_ph, TP_ERR_NOMEM, "out of memory exporting");
    TP_TRY(tp__bind_args(s->fm, args, n_args, kwargs, s->bound));
    TP_TRY(tp__ctx_new(true, draft, &s->ctx));
    tp_ctx *ctx = s->ctx;
    ctx->root = m;
    TP_TRY(tp_graph_new(&ctx->g));
    int cap = 0;
    TP_TRY(add_mod(ctx, m, "", &cap));
    TP_TRY(check_preserve(ctx, opts));
    TP_TRY(lift_tree(ctx, m, ""));
    /* user placeholders, then getitem nodes for container elements */
    for (int i = 0; i < n; i++) {
        tp_value meta = tp_value_none();
        const tp_value *mv = has_tensor(&s->bound[i]) ? &s->bound[i] : NULL;
        (void)meta;
        TP_TRY(tp_graph_placeholder(ctx->g, s->fm->arg_names[i], mv, &s->user_ph[i]));
        if (i == 0) ctx->first_user_ph = s->user_ph[i];
    }
    for (int i = 0; i < n; i++) {
        TP_TRY(tp_value_copy(&s->bound[i], &s->traced[i]));
        TP_TRY(bind_user_value(ctx, &s->traced[i], s->user_ph[i], tp_node_name(s->user_ph[i])));
    }
    /* trace */
    tp_status st = tp__ctx_run(ctx, m, s->fm, s->traced, &s->result);
    if (st != TP_OK) {
        const char *msg = ctx->error ? ctx->error : tp_last_error();
        char *copy = tp_strdup(msg);
        tp_error(st, "%s", copy ? copy : "forward failed");
        tp_free(copy);
        return st;
    }
    TP_TRY(build_program(s, opts, out));
    /* dynamic shapes */
    user_input_info *infos = tp_calloc((size_t)(n + 1), sizeof *infos);
    if (!infos) {
        tp_program_free(*out);
        *out = NULL;
        return tp_error(TP_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++)
        infos[i] = (user_input_info){s->fm->arg_names[i], &s->bound[i], s->user_ph[i]};
    st = tp__shapes_solve(ctx, opts ? opts->dynamic_shapes : NULL, infos, n, *out, opts, &s->notes);
    tp_free(infos);
    if (st == TP_OK) st = tp_program_validate(*out);
    if (st != TP_OK) {
        tp_program_free(*out);
        *out = NULL;
    }
    return st;
}

tp_status tp_export(tp_module *m, const tp_value *args, int n_args, const tp_value *kwargs,
                    const tp_export_options *opts_in, tp_program **out) {
    tp_export_options o, *opts = &o;
    tp__options_copy(&o, sizeof o, opts_in);
    export_state s;
    tp_status st = do_export(m, args, n_args, kwargs, opts, false, &s, out);
    if (st != TP_OK) {
        char *msg = tp_strdup(tp_last_error());
        export_state_free(&s);
        tp_error(st, "%s", msg ? msg : "export failed");
        tp_free(msg);
        return st;
    }
    export_state_free(&s);
    return TP_OK;
}

/* ---- draft export ----------------------------------------------------------------------- */

const char *tp_failure_kind_name(tp_failure_kind kind) {
    switch (kind) {
    case TP_FAILURE_DATA_DEPENDENT: return "data_dependent";
    case TP_FAILURE_CONSTRAINT: return "constraint_violation";
    case TP_FAILURE_MISSING_OP: return "missing_op";
    case TP_FAILURE_OTHER: return "error";
    }
    return "?";
}

void tp_draft_report_free(tp_draft_report *r) {
    if (!r) return;
    for (int i = 0; i < r->n_failures; i++) tp_free(r->failures[i].message);
    tp_free(r->failures);
    tp_free(r->suggested_fixes);
    tp_free(r->notes);
    memset(r, 0, sizeof *r);
}

tp_status tp_draft_report_to_string(const tp_draft_report *r, char **out) {
    tp_sb sb = {0};
    if (r->n_failures == 0) tp__sb_puts(&sb, "no issues found\n");
    else tp__sb_printf(&sb, "%d issue%s found:\n", r->n_failures, r->n_failures == 1 ? "" : "s");
    for (int i = 0; i < r->n_failures; i++)
        tp__sb_printf(&sb, "- [%s] %s\n", tp_failure_kind_name(r->failures[i].kind), r->failures[i].message);
    if (r->suggested_fixes) tp__sb_printf(&sb, "%s\n", r->suggested_fixes);
    if (r->notes) tp__sb_printf(&sb, "note: %s\n", r->notes);
    return tp__sb_finish(&sb, out);
}

tp_status tp_draft_export(tp_module *m, const tp_value *args, int n_args, const tp_value *kwargs,
                          const tp_export_options *opts_in, tp_program **out_program, tp_draft_report *report) {
    tp_export_options o, *opts = &o;
    tp__options_copy(&o, sizeof o, opts_in);
    memset(report, 0, sizeof *report);
    *out_program = NULL;
    export_state s;
    tp_status st = do_export(m, args, n_args, kwargs, opts, true, &s, out_program);
    char *msg = st != TP_OK ? tp_strdup(tp_last_error()) : NULL;
    tp_status rst = TP_OK;
    tp_ctx *ctx = s.ctx;
    int n = (ctx ? ctx->n_failures : 0) + (st != TP_OK ? 1 : 0);
    report->failures = tp_calloc((size_t)(n + 1), sizeof *report->failures);
    if (!report->failures) rst = tp_error(TP_ERR_NOMEM, "out of memory building the draft report");
    tp_sb fixes = {0};
    for (int i = 0; rst == TP_OK && ctx && i < ctx->n_failures; i++) {
        report->failures[report->n_failures++] = (tp_draft_failure){ctx->failures[i].kind, ctx->failures[i].message};
        ctx->failures[i].message = NULL;
    }
    if (rst == TP_OK && st != TP_OK) {
        tp_failure_kind k = st == TP_ERR_CONSTRAINT    ? TP_FAILURE_CONSTRAINT
                            : st == TP_ERR_UNSUPPORTED ? TP_FAILURE_MISSING_OP
                                                       : TP_FAILURE_OTHER;
        if (msg && strstr(msg, "data-dependent")) k = TP_FAILURE_DATA_DEPENDENT;
        char *m2 = tp_strdup(msg ? msg : "export failed");
        if (!m2) rst = tp_error(TP_ERR_NOMEM, "out of memory");
        else report->failures[report->n_failures++] = (tp_draft_failure){k, m2};
    }
    /* gather suggested fixes from the messages */
    for (int i = 0; rst == TP_OK && i < report->n_failures; i++) {
        const char *f = strstr(report->failures[i].message, "Suggested fixes:");
        if (!f) continue;
        f += strlen("Suggested fixes:");
        if (!fixes.len) tp__sb_puts(&fixes, "Suggested fixes:");
        tp__sb_puts(&fixes, f);
    }
    if (rst == TP_OK && fixes.len) rst = tp__sb_finish(&fixes, &report->suggested_fixes);
    if (rst == TP_OK) {
        report->notes = s.notes;
        s.notes = NULL;
    }
    tp__sb_free(&fixes);
    tp_free(msg);
    export_state_free(&s);
    if (rst != TP_OK) {
        tp_program_free(*out_program);
        *out_program = NULL;
        tp_draft_report_free(report);
    }
    return rst;
}
