/*
 * ctx.c - the forward context: handles, sticky errors, the generic op entry
 * and typed helpers, in-place ops, data-dependence checks, forward tables on
 * modules and child-module calls. In eager mode ops compute; in export mode
 * they compute on cloned example values AND record graph nodes (export.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "export_impl.h"

/* ---- forward tables --------------------------------------------------------- */

static void fwd_method_clear(fwd_method *fm) {
    tp_free(fm->name);
    for (int i = 0; i < fm->n_args; i++) {
        tp_free(fm->arg_names ? fm->arg_names[i] : NULL);
        if (fm->defaults) tp_value_clear(&fm->defaults[i]);
    }
    tp_free(fm->arg_names);
    tp_free(fm->defaults);
    tp_free(fm->has_default);
}

static void fwd_table_free(void *p) {
    fwd_table *t = p;
    if (!t) return;
    for (int i = 0; i < t->n_methods; i++) fwd_method_clear(&t->methods[i]);
    tp_free(t->methods);
    if (t->user_free) t->user_free(t->user);
    tp_free(t);
}

static tp_status get_table(tp_module *m, fwd_table **out) {
    fwd_table *t = tp_module_impl_data(m);
    if (!t || tp_module_impl_ops(m) != (const void *)fwd_table_free) {
        t = tp_calloc(1, sizeof *t);
        TP_CHECK(t != NULL, TP_ERR_NOMEM, "out of memory setting a forward");
        tp_module_set_impl(m, (const void *)fwd_table_free, t, fwd_table_free);
    }
    *out = t;
    return TP_OK;
}

static const fwd_table *find_table(const tp_module *m) {
    if (tp_module_impl_ops(m) != (const void *)fwd_table_free) return NULL;
    return tp_module_impl_data(m);
}

tp_status tp_module_set_user_data(tp_module *m, void *data, void (*free_fn)(void *data)) {
    fwd_table *t = NULL;
    tp_status st = get_table(m, &t);
    if (st != TP_OK) {
        if (free_fn) free_fn(data);
        return st;
    }
    if (t->user_free && t->user != data) t->user_free(t->user);
    t->user = data;
    t->user_free = free_fn;
    return TP_OK;
}

void *tp_module_user_data(const tp_module *m) {
    const fwd_table *t = find_table(m);
    return t ? t->user : NULL;
}

tp_status tp_module_set_method(tp_module *m, const char *method, const tp_forward_decl *decl) {
    TP_CHECK(method && *method, TP_ERR_INVALID_ARG, "method name is empty");
    TP_CHECK(decl && decl->fn, TP_ERR_INVALID_ARG, "forward declaration has no function");
    TP_CHECK(decl->n_args >= 0 && (decl->n_args == 0 || decl->arg_names), TP_ERR_INVALID_ARG,
             "forward declaration needs %d argument names", decl->n_args);
    for (int i = 0; i < decl->n_args; i++)
        TP_CHECK(decl->arg_names[i] && *decl->arg_names[i], TP_ERR_INVALID_ARG, "argument %d has no name", i);
    fwd_table *t = NULL;
    TP_TRY(get_table(m, &t));
    fwd_method fm = {0};
    fm.fn = decl->fn;
    fm.n_args = decl->n_args;
    tp_status st = TP_OK;
    fm.name = tp_strdup(method);
    fm.arg_names = tp_calloc((size_t)(decl->n_args + 1), sizeof(char *));
    fm.defaults = tp_calloc((size_t)(decl->n_args + 1), sizeof(tp_value));
    fm.has_default = tp_calloc((size_t)(decl->n_args + 1), sizeof(bool));
    if (!fm.name || !fm.arg_names || !fm.defaults || !fm.has_default) st = tp_error(TP_ERR_NOMEM, "out of memory");
    for (int i = 0; st == TP_OK && i < decl->n_args; i++) {
        if (!(fm.arg_names[i] = tp_strdup(decl->arg_names[i]))) st = tp_error(TP_ERR_NOMEM, "out of memory");
        fm.has_default[i] = decl->has_default && decl->has_default[i];
        if (st == TP_OK && fm.has_default[i] && decl->defaults) st = tp_value_copy(&decl->defaults[i], &fm.defaults[i]);
    }
    int slot = -1;
    for (int i = 0; i < t->n_methods; i++)
        if (strcmp(t->methods[i].name, method) == 0) slot = i;
    if (st == TP_OK && slot < 0) {
        fwd_method *ms = tp_realloc(t->methods, (size_t)(t->n_methods + 1) * sizeof *ms);
        if (!ms) st = tp_error(TP_ERR_NOMEM, "out of memory");
        else {
            t->methods = ms;
            slot = t->n_methods++;
            memset(&t->methods[slot], 0, sizeof t->methods[slot]);
        }
    }
    if (st != TP_OK) {
        fwd_method_clear(&fm);
        return st;
    }
    fwd_method_clear(&t->methods[slot]);
    t->methods[slot] = fm;
    return TP_OK;
}

tp_status tp_module_set_forward(tp_module *m, const tp_forward_decl *decl) {
    return tp_module_set_method(m, "forward", decl);
}

const fwd_method *tp__module_method(const tp_module *m, const char *method) {
    const fwd_table *t = find_table(m);
    if (!t) return NULL;
    if (!method) method = "forward";
    for (int i = 0; i < t->n_methods; i++)
        if (strcmp(t->methods[i].name, method) == 0) return &t->methods[i];
    return NULL;
}

tp_status tp__bind_args(const fwd_method *fm, const tp_value *args, int n_args, const tp_value *kwargs,
                        tp_value *bound) {
    TP_CHECK(n_args <= fm->n_args, TP_ERR_INVALID_ARG, "%s() takes %d argument(s) but %d were given", fm->name,
             fm->n_args, n_args);
    for (int64_t k = 0; kwargs && k < tp_value_len(kwargs); k++) {
        const char *key = kwargs->u.seq.keys[k];
        int found = -1;
        for (int i = 0; i < fm->n_args; i++)
            if (strcmp(fm->arg_names[i], key) == 0) found = i;
        TP_CHECK(found >= 0, TP_ERR_INVALID_ARG, "%s() got an unexpected keyword argument '%s'", fm->name, key);
        TP_CHECK(found >= n_args, TP_ERR_DUPLICATE, "%s() got multiple values for argument '%s'", fm->name, key);
    }
    tp_status st = TP_OK;
    int i = 0;
    for (; st == TP_OK && i < fm->n_args; i++) {
        const tp_value *kw = tp_value_dict_get(kwargs, fm->arg_names[i]);
        if (i < n_args) st = tp_value_copy(&args[i], &bound[i]);
        else if (kw) st = tp_value_copy(kw, &bound[i]);
        else if (fm->has_default[i]) st = tp_value_copy(&fm->defaults[i], &bound[i]);
        else st = tp_error(TP_ERR_MISSING, "%s() missing required argument '%s'", fm->name, fm->arg_names[i]);
    }
    if (st != TP_OK)
        for (int k = 0; k < i; k++) tp_value_clear(&bound[k]);
    return st;
}

/* ---- context lifetime ----------------------------------------------------------- */

tp_status tp__ctx_new(bool exporting, bool draft, tp_ctx **out) {
    tp_ctx *c = tp_calloc(1, sizeof *c);
    TP_CHECK(c != NULL, TP_ERR_NOMEM, "out of memory creating a context");
    c->exporting = exporting;
    c->draft = draft;
    c->poison.poison = true;
    c->poison.origin = -1;
    c->poison.made_by = TP_OP_INVALID;
    *out = c;
    return TP_OK;
}

static void call_record_clear(call_record *r) {
    tp_free(r->fqn);
    for (int i = 0; i < r->n_inputs; i++) {
        tp_free(r->input_names[i]);
        tp_value_clear(&r->input_consts[i]);
    }
    for (int i = 0; i < r->n_outputs; i++) tp_free(r->output_names[i]);
    for (int i = 0; i < r->n_arg_names; i++) tp_free(r->arg_names[i]);
    tp_free(r->input_names);
    tp_free(r->input_consts);
    tp_free(r->output_names);
    tp_free(r->arg_names);
    tp_treespec_free(r->in_spec);
    tp_treespec_free(r->out_spec);
}

void tp__ctx_free(tp_ctx *c) {
    if (!c) return;
    for (int i = 0; i < c->n_handles; i++) {
        tp_tensor_free(c->handles[i]->t);
        tp_free(c->handles[i]->view_steps);
        tp_free(c->handles[i]);
    }
    tp_free(c->handles);
    for (int i = 0; i < c->n_owned; i++) {
        tp_value_clear(c->owned[i]);
        tp_free(c->owned[i]);
    }
    tp_free(c->owned);
    tp_graph_free(c->g);
    for (int i = 0; i < c->n_origins; i++) tp_free(c->origins[i].path);
    tp_free(c->origins);
    for (int i = 0; i < c->n_mods; i++) tp_free(c->mods[i].fqn);
    tp_free(c->mods);
    tp_free(c->stack);
    for (int i = 0; i < c->n_calls; i++) call_record_clear(&c->calls[i]);
    tp_free(c->calls);
    for (int i = 0; i < c->n_reads; i++) tp_free(c->reads[i].node);
    tp_free(c->reads);
    for (int i = 0; i < c->n_failures; i++) tp_free(c->failures[i].message);
    tp_free(c->failures);
    tp_free(c->error);
    tp_free(c);
}

tp_status tp_ctx_status(const tp_ctx *ctx) { return ctx->status; }
const char *tp_ctx_error(const tp_ctx *ctx) { return ctx->error ? ctx->error : ""; }
bool tp_ctx_exporting(const tp_ctx *ctx) { return ctx->exporting; }
bool tp_is_poison(const tp_t *h) { return !h || h->poison; }
tp_tensor *tp_tensor_of(const tp_t *h) { return tp_is_poison(h) ? NULL : h->t; }
int tp_ndim(const tp_t *h) { return tp_is_poison(h) || h->is_int ? 0 : tp_tensor_ndim(h->t); }
tp_dtype tp_dtype_of(const tp_t *h) {
    return tp_is_poison(h) ? TP_FLOAT32 : h->is_int ? TP_INT64 : tp_tensor_dtype(h->t);
}

tp_status tp__ctx_add_failure(tp_ctx *ctx, tp_failure_kind kind, const char *msg) {
    if (ctx->n_failures == ctx->cap_failures) {
        int cap = ctx->cap_failures ? ctx->cap_failures * 2 : 8;
        failure *f = tp_realloc(ctx->failures, (size_t)cap * sizeof *f);
        TP_CHECK(f != NULL, TP_ERR_NOMEM, "out of memory recording a failure");
        ctx->failures = f;
        ctx->cap_failures = cap;
    }
    char *m = tp_strdup(msg);
    TP_CHECK(m != NULL, TP_ERR_NOMEM, "out of memory recording a failure");
    ctx->failures[ctx->n_failures++] = (failure){kind, m};
    return TP_OK;
}

/* Record the current thread error as the context's failure. */
static void fail_with_last(tp_ctx *ctx, tp_status st) {
    if (ctx->status != TP_OK) return;
    ctx->status = st;
    ctx->error = tp_strdup(tp_last_error());
}

tp_status tp_ctx_fail(tp_ctx *ctx, tp_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tp_verror(status, fmt, ap);
    va_end(ap);
    fail_with_last(ctx, status);
    return status;
}

/* ---- handles ----------------------------------------------------------------------- */

tp_t *tp__ctx_handle(tp_ctx *ctx, tp_tensor *t, tp_node *node, tp_op made_by) {
    tp_t *h = NULL;
    if (ctx->n_handles == ctx->cap_handles) {
        int cap = ctx->cap_handles ? ctx->cap_handles * 2 : 64;
        tp_t **hs = tp_realloc(ctx->handles, (size_t)cap * sizeof *hs);
        if (!hs) goto nomem;
        ctx->handles = hs;
        ctx->cap_handles = cap;
    }
    h = tp_calloc(1, sizeof *h);
    if (!h) goto nomem;
    h->t = t;
    h->node = node;
    h->origin = -1;
    h->made_by = made_by;
    ctx->handles[ctx->n_handles++] = h;
    return h;
nomem:
    tp_tensor_free(t);
    tp_ctx_fail(ctx, TP_ERR_NOMEM, "out of memory creating a handle");
    return &ctx->poison;
}

tp_t *tp__ctx_find(const tp_ctx *ctx, const tp_tensor *t) {
    for (int i = ctx->n_handles - 1; i >= 0; i--)
        if (ctx->handles[i]->t == t) return ctx->handles[i];
    return NULL;
}

/* ---- views (export) ------------------------------------------------------------------ */

/* Re-apply h's view steps to node `from` (the base's current node or a
 * clone of it): the node holding the same view of `from`. */
static tp_status replay_view(tp_ctx *ctx, const tp_t *h, tp_node *from, tp_node **out) {
    tp_node *cur = from;
    for (int i = 0; i < h->n_view_steps; i++) {
        const tp_node *s = h->view_steps[i];
        tp_value args, kw = tp_value_none(), a0 = tp_value_node(cur);
        TP_TRY(tp_value_copy(tp_node_args(s), &args));
        tp_status st = tp_value_seq_set(&args, 0, &a0);
        const tp_value *skw = tp_node_kwargs(s);
        if (st == TP_OK && skw && skw->kind == TP_VAL_DICT && tp_value_len(skw) > 0) st = tp_value_copy(skw, &kw);
        tp_node *n = NULL;
        if (st == TP_OK)
            st = tp_graph_call_function(ctx->g, tp_node_op(s), &args, kw.kind == TP_VAL_DICT ? &kw : NULL, &n);
        tp_value_clear(&args);
        tp_value_clear(&kw);
        TP_TRY(st);
        cur = n;
    }
    *out = cur;
    return TP_OK;
}

tp_status tp__ctx_node(tp_ctx *ctx, tp_t *h, tp_node **out) {
    if (h->view_base && h->base_version != h->view_base->version && ctx->g) {
        tp_node *n;
        TP_TRY(replay_view(ctx, h, h->view_base->node, &n));
        h->node = n;
        h->base_version = h->view_base->version;
    }
    *out = h->node;
    return TP_OK;
}

/* h (made from `in` by view node s1, then getitem s2 for multi-output
 * views) aliases in's storage: remember its root base and steps. */
static void set_view(tp_ctx *ctx, tp_t *h, tp_t *in, tp_node *s1, tp_node *s2) {
    if (tp_is_poison(h) || !h->t || !in->t || !h->t->storage || h->t->storage != in->t->storage) return;
    tp_t *base = in->view_base ? in->view_base : in;
    int n = in->n_view_steps + 1 + (s2 != NULL);
    tp_node **steps = tp_malloc((size_t)n * sizeof *steps);
    if (!steps) {
        tp_ctx_fail(ctx, TP_ERR_NOMEM, "out of memory recording a view");
        return;
    }
    for (int i = 0; i < in->n_view_steps; i++) steps[i] = in->view_steps[i];
    steps[in->n_view_steps] = s1;
    if (s2) steps[n - 1] = s2;
    h->view_base = base;
    h->view_steps = steps;
    h->n_view_steps = n;
    h->base_version = base->version;
}

tp_t *tp_arg(tp_ctx *ctx, const tp_value *v) {
    if (ctx->status != TP_OK && !ctx->draft) return &ctx->poison;
    if (!v || v->kind != TP_VAL_TENSOR) {
        tp_ctx_fail(ctx, TP_ERR_TYPE, "expected a tensor argument, got %s", v ? tp_value_kind_name(v->kind) : "NULL");
        return &ctx->poison;
    }
    tp_t *h = tp__ctx_find(ctx, v->u.tensor);
    if (!h) {
        tp_ctx_fail(ctx, TP_ERR_INVALID_ARG, "tensor argument does not belong to this context");
        return &ctx->poison;
    }
    return h;
}

tp_t *tp_elem(tp_ctx *ctx, const tp_value *container, int64_t index) {
    const tp_value *v = container ? tp_value_at(container, index) : NULL;
    if (!v) {
        tp_ctx_fail(ctx, TP_ERR_INDEX, "container index %lld out of range", (long long)index);
        return &ctx->poison;
    }
    return tp_arg(ctx, v);
}

tp_t *tp_elem_key(tp_ctx *ctx, const tp_value *dict, const char *key) {
    const tp_value *v = dict ? tp_value_dict_get(dict, key) : NULL;
    if (!v) {
        tp_ctx_fail(ctx, TP_ERR_NOT_FOUND, "dict has no key '%s'", key);
        return &ctx->poison;
    }
    return tp_arg(ctx, v);
}

const char *tp__module_fqn(tp_ctx *ctx, const tp_module *m) {
    for (int i = 0; i < ctx->n_mods; i++)
        if (ctx->mods[i].m == m) return ctx->mods[i].fqn;
    return NULL;
}

tp_t *tp_state(tp_ctx *ctx, tp_module *self, const char *name) {
    if (ctx->status != TP_OK && !ctx->draft) return &ctx->poison;
    tp_tensor *t = self ? tp_module_own_state(self, name) : NULL;
    if (!t) {
        tp_ctx_fail(ctx, TP_ERR_NOT_FOUND, "module '%s' has no state '%s'", self ? tp_module_type_name(self) : "?",
                    name);
        return &ctx->poison;
    }
    if (!ctx->exporting) return tp__ctx_handle(ctx, tp_tensor_retain(t), NULL, TP_OP_INVALID);
    for (int i = 0; i < ctx->n_origins; i++)
        if (ctx->origins[i].kind != ORIGIN_USER && ctx->origins[i].model_tensor == t) return ctx->origins[i].handle;
    tp_ctx_fail(ctx, TP_ERR_NOT_FOUND, "state '%s' of module '%s' is not part of the exported model", name,
                tp_module_type_name(self));
    return &ctx->poison;
}

tp_t *tp_constant(tp_ctx *ctx, tp_tensor *t) {
    if (ctx->status != TP_OK && !ctx->draft) return &ctx->poison;
    if (!t) {
        tp_ctx_fail(ctx, TP_ERR_INVALID_ARG, "constant tensor is NULL");
        return &ctx->poison;
    }
    if (!ctx->exporting) return tp__ctx_handle(ctx, tp_tensor_retain(t), NULL, TP_OP_INVALID);
    /* lift: c_lifted_tensor_<k> placed before the user inputs */
    char target[64], name[80];
    snprintf(target, sizeof target, "lifted_tensor_%d", ctx->n_lifted++);
    snprintf(name, sizeof name, "c_%s", target);
    tp_node *saved = tp_graph_insert_point(ctx->g);
    tp_graph_set_insert_point(ctx->g, ctx->first_user_ph);
    tp_value val = tp_value_tensor(t); /* borrowed for the copy below */
    tp_node *ph = NULL;
    tp_status st = tp_graph_placeholder(ctx->g, name, &val, &ph);
    tp_graph_set_insert_point(ctx->g, saved);
    tp_tensor *clone = NULL;
    if (st == TP_OK) st = tp_tensor_clone(t, &clone);
    if (st == TP_OK && ctx->n_origins == ctx->cap_origins) {
        int cap = ctx->cap_origins ? ctx->cap_origins * 2 : 16;
        origin *o = tp_realloc(ctx->origins, (size_t)cap * sizeof *o);
        if (!o) st = tp_error(TP_ERR_NOMEM, "out of memory lifting a constant");
        else {
            ctx->origins = o;
            ctx->cap_origins = cap;
        }
    }
    char *path = st == TP_OK ? tp_strdup(target) : NULL;
    if (st == TP_OK && !path) st = tp_error(TP_ERR_NOMEM, "out of memory lifting a constant");
    if (st != TP_OK) {
        tp_tensor_free(clone);
        fail_with_last(ctx, st);
        return &ctx->poison;
    }
    tp_t *h = tp__ctx_handle(ctx, clone, ph, TP_OP_INVALID);
    if (h->poison) {
        tp_free(path);
        return h;
    }
    h->origin = ctx->n_origins;
    ctx->origins[ctx->n_origins++] = (origin){path, ORIGIN_CONST, true, ph, h, t};
    return h;
}

/* ---- values ------------------------------------------------------------------------- */

tp_value tp_v(tp_t *h) {
    tp_value v = tp_value_none();
    if (!tp_is_poison(h) && h->is_int) return h->node ? tp_value_node(h->node) : tp_value_int(h->ival);
    if (!tp_is_poison(h)) {
        v.kind = TP_VAL_TENSOR;
        v.u.tensor = h->t; /* borrowed */
    }
    return v;
}

tp_value tp_out(tp_t *h) {
    if (tp_is_poison(h)) return tp_value_none();
    if (h->is_int) return tp_value_int(h->ival);
    return tp_value_tensor(tp_tensor_retain(h->t));
}

static tp_value *own_value(tp_ctx *ctx) {
    if (ctx->n_owned == ctx->cap_owned) {
        int cap = ctx->cap_owned ? ctx->cap_owned * 2 : 32;
        tp_value **o = tp_realloc(ctx->owned, (size_t)cap * sizeof *o);
        if (!o) return NULL;
        ctx->owned = o;
        ctx->cap_owned = cap;
    }
    tp_value *v = tp_malloc(sizeof *v);
    if (!v) return NULL;
    *v = tp_value_none();
    ctx->owned[ctx->n_owned++] = v;
    return v;
}

tp_value tp_ints(tp_ctx *ctx, int n, const int64_t *values) {
    tp_value *v = own_value(ctx);
    if (!v || tp_value_int_list(values, n, v) != TP_OK) {
        tp_ctx_fail(ctx, TP_ERR_NOMEM, "out of memory building an int list");
        return tp_value_none();
    }
    return *v;
}

tp_value tp_list(tp_ctx *ctx, int n, tp_t *const *handles) {
    tp_value *v = own_value(ctx);
    if (!v || tp_value_list(n, v) != TP_OK) {
        tp_ctx_fail(ctx, TP_ERR_NOMEM, "out of memory building a list");
        return tp_value_none();
    }
    for (int i = 0; i < n; i++) {
        if (tp_is_poison(handles[i])) continue; /* leaves None: the op fails on it */
        tp_value item = tp_value_tensor(tp_tensor_retain(handles[i]->t));
        tp_value_seq_set(v, i, &item);
    }
    return *v;
}

tp_status tp_return(tp_ctx *ctx, tp_t *h, tp_value *out) {
    *out = tp_value_none();
    if (ctx->status != TP_OK && !ctx->draft) return ctx->status;
    if (tp_is_poison(h)) return tp_ctx_fail(ctx, TP_ERR_INVALID_ARG, "forward returned no value");
    *out = tp_out(h);
    return ctx->status;
}

/* ---- recording ----------------------------------------------------------------------- */

/* Copy v replacing tensors by their handles' nodes (export) - or check that
 * every tensor belongs to the context. */
static tp_status to_graph_value(tp_ctx *ctx, const tp_value *v, tp_value *out, bool *poisoned) {
    switch (v->kind) {
    case TP_VAL_TENSOR: {
        tp_t *h = tp__ctx_find(ctx, v->u.tensor);
        TP_CHECK(h != NULL, TP_ERR_INVALID_ARG,
                 "a tensor argument is not a value of this context (use tp_constant for tensors made in a forward)");
        tp_node *n;
        TP_TRY(tp__ctx_node(ctx, h, &n));
        *out = tp_value_node(n);
        return TP_OK;
    }
    case TP_VAL_NONE:
        *out = tp_value_none();
        return TP_OK;
    case TP_VAL_LIST:
    case TP_VAL_TUPLE:
    case TP_VAL_DICT: {
        int64_t n = tp_value_len(v);
        if (v->kind == TP_VAL_DICT) TP_TRY(tp_value_dict(out));
        else TP_TRY(v->kind == TP_VAL_LIST ? tp_value_list(n, out) : tp_value_tuple(n, out));
        for (int64_t i = 0; i < n; i++) {
            tp_value item;
            tp_status st = to_graph_value(ctx, &v->u.seq.items[i], &item, poisoned);
            if (st == TP_OK)
                st = v->kind == TP_VAL_DICT ? tp_value_dict_set(out, v->u.seq.keys[i], &item)
                                            : tp_value_seq_set(out, i, &item);
            tp_value_clear(&item);
            if (st != TP_OK) {
                tp_value_clear(out);
                return st;
            }
        }
        return TP_OK;
    }
    default:
        return tp_value_copy(v, out);
    }
}

/* Does a call's argument list hold the poison (a None where a handle was)? We
 * detect poison through the context status instead: a failed op records it. */
static bool ctx_stopped(const tp_ctx *ctx) { return ctx->status != TP_OK && !ctx->draft; }

/* Zero-filled tensors shaped like meta value `meta` (draft export of an op
 * without a kernel). */
static tp_status zeros_like_meta(const tp_value *meta, tp_value *out) {
    if (meta->kind == TP_VAL_TENSOR) {
        tp_tensor *t;
        TP_TRY(tp_tensor_zeros(tp_tensor_dtype(meta->u.tensor), tp_tensor_ndim(meta->u.tensor),
                               tp_tensor_sizes(meta->u.tensor), &t));
        *out = tp_value_tensor(t);
        return TP_OK;
    }
    if (meta->kind == TP_VAL_TUPLE || meta->kind == TP_VAL_LIST) {
        int64_t n = tp_value_len(meta);
        TP_TRY(meta->kind == TP_VAL_LIST ? tp_value_list(n, out) : tp_value_tuple(n, out));
        for (int64_t i = 0; i < n; i++) {
            tp_value item;
            tp_status st = zeros_like_meta(&meta->u.seq.items[i], &item);
            if (st == TP_OK) st = tp_value_seq_set(out, i, &item);
            if (st != TP_OK) {
                tp_value_clear(out);
                return st;
            }
        }
        return TP_OK;
    }
    return tp_value_copy(meta, out);
}

/* The module-path context of an error: " (in module 'layer1.0')". */
static void where(const tp_ctx *ctx, char *buf, size_t size) {
    if (ctx->depth > 0) snprintf(buf, size, " (in module '%s')", ctx->stack[ctx->depth - 1]);
    else buf[0] = '\0';
}

/* Does a value hold a node reference (a symbolic int, export only)? */
static bool value_has_node(const tp_value *v) {
    if (v->kind == TP_VAL_NODE) return true;
    if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE || v->kind == TP_VAL_DICT)
        for (int64_t i = 0; i < v->u.seq.n; i++)
            if (value_has_node(&v->u.seq.items[i])) return true;
    return false;
}

static bool has_node_value(const tp_value *args, int n_args, const tp_value *kwargs) {
    for (int i = 0; i < n_args; i++)
        if (value_has_node(&args[i])) return true;
    return kwargs && value_has_node(kwargs);
}

/* Copy v with every int-valued node replaced by its example int (its meta
 * value); other values are copied (tensors retained). */
static tp_status resolve_ints(const tp_value *v, tp_value *out) {
    if (v->kind == TP_VAL_NODE) {
        const tp_value *mv = tp_node_meta_val(v->u.node);
        TP_CHECK(mv->kind == TP_VAL_INT, TP_ERR_TYPE, "node %s is not an int", tp_node_name(v->u.node));
        *out = *mv;
        return TP_OK;
    }
    if (v->kind != TP_VAL_LIST && v->kind != TP_VAL_TUPLE && v->kind != TP_VAL_DICT) return tp_value_copy(v, out);
    int64_t n = v->u.seq.n;
    if (v->kind == TP_VAL_DICT) TP_TRY(tp_value_dict(out));
    else TP_TRY(v->kind == TP_VAL_LIST ? tp_value_list(n, out) : tp_value_tuple(n, out));
    for (int64_t i = 0; i < n; i++) {
        tp_value item;
        tp_status st = resolve_ints(&v->u.seq.items[i], &item);
        if (st == TP_OK)
            st = v->kind == TP_VAL_DICT ? tp_value_dict_set(out, v->u.seq.keys[i], &item) : tp_value_seq_set(out, i, &item);
        tp_value_clear(&item);
        if (st != TP_OK) {
            tp_value_clear(out);
            return st;
        }
    }
    return TP_OK;
}

/* Run op; results as a value (eager tensor/tuple/list) and, in export mode,
 * the node. */
static tp_status run_op(tp_ctx *ctx, tp_op op, const tp_value *args, int n_args, const tp_value *kwargs,
                        tp_value *result, tp_node **node) {
    *result = tp_value_none();
    *node = NULL;
    tp_status st = TP_OK;
    if (ctx->exporting) {
        tp_value gargs = tp_value_none(), gkw = tp_value_none();
        bool poisoned = false;
        st = tp_value_tuple(n_args, &gargs);
        for (int i = 0; st == TP_OK && i < n_args; i++) {
            tp_value item;
            st = to_graph_value(ctx, &args[i], &item, &poisoned);
            if (st == TP_OK) st = tp_value_seq_set(&gargs, i, &item);
        }
        if (st == TP_OK && kwargs && kwargs->kind != TP_VAL_NONE) st = to_graph_value(ctx, kwargs, &gkw, &poisoned);
        if (st == TP_OK) st = tp_graph_call_function(ctx->g, op, &gargs, gkw.kind == TP_VAL_DICT ? &gkw : NULL, node);
        tp_value_clear(&gargs);
        tp_value_clear(&gkw);
        if (st != TP_OK) return st;
        if (!tp_op_has_kernel(op)) {
            char buf[256];
            where(ctx, buf, sizeof buf);
            tp_error(TP_ERR_UNSUPPORTED, "op '%s' has no kernel%s", tp_op_name(op), buf);
            if (!ctx->draft) return TP_ERR_UNSUPPORTED;
            TP_TRY(tp__ctx_add_failure(ctx, TP_FAILURE_MISSING_OP, tp_last_error()));
            return zeros_like_meta(tp_node_meta_val(*node), result);
        }
        if (has_node_value(args, n_args, kwargs)) {
            /* symbolic ints: compute with their example values */
            tp_value rargs, rkw = tp_value_none();
            st = tp_value_tuple(n_args, &rargs);
            for (int i = 0; st == TP_OK && i < n_args; i++) {
                tp_value item;
                st = resolve_ints(&args[i], &item);
                if (st == TP_OK) st = tp_value_seq_set(&rargs, i, &item);
            }
            if (st == TP_OK && kwargs && kwargs->kind != TP_VAL_NONE) st = resolve_ints(kwargs, &rkw);
            if (st == TP_OK)
                st = tp_op_call(op, rargs.u.seq.items, n_args, rkw.kind == TP_VAL_DICT ? &rkw : NULL, result);
            tp_value_clear(&rargs);
            tp_value_clear(&rkw);
            return st;
        }
    }
    return tp_op_call(op, args, n_args, kwargs, result);
}

/* A symbolic-int handle (value v, node NULL for a constant). */
static tp_t *int_handle(tp_ctx *ctx, int64_t v, tp_node *node, tp_op made_by) {
    tp_t *h = tp__ctx_handle(ctx, NULL, node, made_by);
    if (!h->poison) {
        h->is_int = true;
        h->ival = v;
    }
    return h;
}

int tp_call_multi(tp_ctx *ctx, tp_op op, const tp_value *args, int n_args, const tp_value *kwargs, tp_t **outs,
                  int max_outs) {
    if (ctx_stopped(ctx)) return 0;
    for (int i = 0; i < n_args; i++)
        if (args[i].kind == TP_VAL_NONE && ctx->status != TP_OK) return 0;
    tp_value result;
    tp_node *node;
    tp_status st = run_op(ctx, op, args, n_args, kwargs, &result, &node);
    if (st != TP_OK) {
        char buf[256];
        where(ctx, buf, sizeof buf);
        if (ctx->status == TP_OK) tp_error_context("%s%s", tp_op_name(op), buf);
        fail_with_last(ctx, st);
        return 0;
    }
    int n = 0;
    /* export: outputs of a view op that alias its input are tracked views */
    tp_t *view_in = NULL;
    if (ctx->exporting && (tp_op_flags(op) & TP_OPF_VIEW) && n_args > 0 && args[0].kind == TP_VAL_TENSOR)
        view_in = tp__ctx_find(ctx, args[0].u.tensor);
    if (result.kind == TP_VAL_TENSOR) {
        if (max_outs > 0) {
            outs[0] = tp__ctx_handle(ctx, tp_tensor_retain(result.u.tensor), node, op);
            n = 1;
            if (view_in) set_view(ctx, outs[0], view_in, node, NULL);
        }
    } else if (result.kind == TP_VAL_INT || result.kind == TP_VAL_BOOL) {
        if (max_outs > 0) {
            outs[0] = int_handle(ctx, tp_value_as_i64(&result), node, op);
            n = 1;
        }
    } else {
        int64_t len = tp_value_len(&result);
        for (int64_t i = 0; i < len && n < max_outs; i++) {
            tp_value *item = tp_value_at(&result, i);
            if (item->kind != TP_VAL_TENSOR) continue;
            tp_node *gi = NULL;
            if (ctx->exporting) {
                tp_value gargs;
                st = tp_value_tuple(2, &gargs);
                tp_value a0 = tp_value_node(node), a1 = tp_value_int(i);
                if (st == TP_OK) st = tp_value_seq_set(&gargs, 0, &a0);
                if (st == TP_OK) st = tp_value_seq_set(&gargs, 1, &a1);
                if (st == TP_OK) st = tp_graph_call_function(ctx->g, TP_OP_GETITEM, &gargs, NULL, &gi);
                tp_value_clear(&gargs);
                if (st != TP_OK) {
                    fail_with_last(ctx, st);
                    break;
                }
            }
            outs[n++] = tp__ctx_handle(ctx, tp_tensor_retain(item->u.tensor), gi, op);
            if (view_in) set_view(ctx, outs[n - 1], view_in, node, gi);
        }
    }
    tp_value_clear(&result);
    return n;
}

tp_t *tp_call(tp_ctx *ctx, tp_op op, const tp_value *args, int n_args, const tp_value *kwargs) {
    tp_t *h = NULL;
    int n = tp_call_multi(ctx, op, args, n_args, kwargs, &h, 1);
    return n == 1 ? h : &ctx->poison;
}

/* ---- typed helpers ------------------------------------------------------------------- */

#define POISON_IF(c) \
    do {             \
        if (c) return &ctx->poison; \
    } while (0)

static tp_t *call1(tp_ctx *ctx, tp_op op, tp_t *a) {
    POISON_IF(tp_is_poison(a));
    tp_value args[1] = {tp_v(a)};
    return tp_call(ctx, op, args, 1, NULL);
}

static tp_t *call2(tp_ctx *ctx, tp_op op, tp_t *a, tp_t *b) {
    POISON_IF(tp_is_poison(a) || tp_is_poison(b));
    tp_value args[2] = {tp_v(a), tp_v(b)};
    return tp_call(ctx, op, args, 2, NULL);
}

static tp_t *call_scalar(tp_ctx *ctx, tp_op op, tp_t *a, double b) {
    POISON_IF(tp_is_poison(a));
    tp_value args[2] = {tp_v(a), tp_value_float(b)};
    return tp_call(ctx, op, args, 2, NULL);
}

tp_t *tp_add(tp_ctx *ctx, tp_t *a, tp_t *b) { return call2(ctx, TP_OP_ADD, a, b); }
tp_t *tp_sub(tp_ctx *ctx, tp_t *a, tp_t *b) { return call2(ctx, TP_OP_SUB, a, b); }
tp_t *tp_mul(tp_ctx *ctx, tp_t *a, tp_t *b) { return call2(ctx, TP_OP_MUL, a, b); }
tp_t *tp_div(tp_ctx *ctx, tp_t *a, tp_t *b) { return call2(ctx, TP_OP_DIV, a, b); }
tp_t *tp_matmul(tp_ctx *ctx, tp_t *a, tp_t *b) { return call2(ctx, TP_OP_MATMUL, a, b); }
tp_t *tp_add_scalar(tp_ctx *ctx, tp_t *a, double b) { return call_scalar(ctx, TP_OP_ADD, a, b); }
tp_t *tp_mul_scalar(tp_ctx *ctx, tp_t *a, double b) { return call_scalar(ctx, TP_OP_MUL, a, b); }
tp_t *tp_gt_scalar(tp_ctx *ctx, tp_t *a, double b) { return call_scalar(ctx, TP_OP_GT, a, b); }
tp_t *tp_neg(tp_ctx *ctx, tp_t *a) { return call1(ctx, TP_OP_NEG, a); }
tp_t *tp_relu(tp_ctx *ctx, tp_t *a) { return call1(ctx, TP_OP_RELU, a); }
tp_t *tp_gelu(tp_ctx *ctx, tp_t *a) { return call1(ctx, TP_OP_GELU, a); }
tp_t *tp_silu(tp_ctx *ctx, tp_t *a) { return call1(ctx, TP_OP_SILU, a); }
tp_t *tp_tanh(tp_ctx *ctx, tp_t *a) { return call1(ctx, TP_OP_TANH, a); }
tp_t *tp_sigmoid(tp_ctx *ctx, tp_t *a) { return call1(ctx, TP_OP_SIGMOID, a); }
tp_t *tp_sum(tp_ctx *ctx, tp_t *a) { return call1(ctx, TP_OP_SUM, a); }

tp_t *tp_mean_dims(tp_ctx *ctx, tp_t *a, int n_dims, const int64_t *dims, bool keepdim) {
    POISON_IF(tp_is_poison(a));
    tp_value args[3] = {tp_v(a), tp_ints(ctx, n_dims, dims), tp_value_bool(keepdim)};
    return tp_call(ctx, TP_OP_MEAN, args, 3, NULL);
}

tp_t *tp_linear(tp_ctx *ctx, tp_t *x, tp_t *weight, tp_t *bias) {
    POISON_IF(tp_is_poison(x) || tp_is_poison(weight) || (bias && bias->poison));
    tp_value args[3] = {tp_v(x), tp_v(weight), bias ? tp_v(bias) : tp_value_none()};
    return tp_call(ctx, TP_OP_LINEAR, args, 3, NULL);
}

tp_t *tp_softmax(tp_ctx *ctx, tp_t *a, int64_t dim) {
    POISON_IF(tp_is_poison(a));
    tp_value args[2] = {tp_v(a), tp_value_int(dim)};
    return tp_call(ctx, TP_OP_SOFTMAX, args, 2, NULL);
}

tp_t *tp_transpose(tp_ctx *ctx, tp_t *a, int64_t d0, int64_t d1) {
    POISON_IF(tp_is_poison(a));
    tp_value args[3] = {tp_v(a), tp_value_int(d0), tp_value_int(d1)};
    return tp_call(ctx, TP_OP_TRANSPOSE, args, 3, NULL);
}

tp_t *tp_reshape(tp_ctx *ctx, tp_t *a, int n, const int64_t *sizes) {
    POISON_IF(tp_is_poison(a));
    tp_value args[2] = {tp_v(a), tp_ints(ctx, n, sizes)};
    return tp_call(ctx, TP_OP_RESHAPE, args, 2, NULL);
}

tp_t *tp_flatten(tp_ctx *ctx, tp_t *a, int64_t start_dim, int64_t end_dim) {
    POISON_IF(tp_is_poison(a));
    tp_value args[3] = {tp_v(a), tp_value_int(start_dim), tp_value_int(end_dim)};
    return tp_call(ctx, TP_OP_FLATTEN, args, 3, NULL);
}

static tp_t *call_list(tp_ctx *ctx, tp_op op, int n, tp_t *const *hs, int64_t dim) {
    for (int i = 0; i < n; i++) POISON_IF(tp_is_poison(hs[i]));
    tp_value args[2] = {tp_list(ctx, n, hs), tp_value_int(dim)};
    return tp_call(ctx, op, args, 2, NULL);
}

tp_t *tp_cat(tp_ctx *ctx, int n, tp_t *const *hs, int64_t dim) { return call_list(ctx, TP_OP_CAT, n, hs, dim); }
tp_t *tp_stack(tp_ctx *ctx, int n, tp_t *const *hs, int64_t dim) { return call_list(ctx, TP_OP_STACK, n, hs, dim); }

tp_t *tp_select(tp_ctx *ctx, tp_t *a, int64_t dim, int64_t index) {
    POISON_IF(tp_is_poison(a));
    tp_value args[3] = {tp_v(a), tp_value_int(dim), tp_value_int(index)};
    return tp_call(ctx, TP_OP_SELECT, args, 3, NULL);
}

int tp_chunk(tp_ctx *ctx, tp_t *a, int chunks, int64_t dim, tp_t **outs) {
    if (tp_is_poison(a)) return 0;
    tp_value args[3] = {tp_v(a), tp_value_int(chunks), tp_value_int(dim)};
    return tp_call_multi(ctx, TP_OP_CHUNK, args, 3, NULL, outs, chunks);
}

tp_t *tp_dropout(tp_ctx *ctx, tp_t *a, double p, bool train) {
    POISON_IF(tp_is_poison(a));
    if (!train || p == 0.0) return a;
    tp_value args[3] = {tp_v(a), tp_value_float(p), tp_value_bool(train)};
    return tp_call(ctx, TP_OP_DROPOUT, args, 3, NULL);
}

/* ---- in-place ops ------------------------------------------------------------------------ */

/* Eager: run the in-place op on self's tensor. Export: run it on self's
 * (private) tensor too, and record `functional` (an out-of-place
 * equivalent computing the new value), converted to self's dtype, as
 * self's new node. */
static tp_t *inplace(tp_ctx *ctx, tp_op op, tp_t *self, const tp_value *args, int n_args, tp_op functional,
                     const tp_value *fargs, int n_fargs) {
    POISON_IF(ctx_stopped(ctx) || tp_is_poison(self));
    tp_value result = tp_value_none();
    tp_status st = tp_op_call(op, args, n_args, NULL, &result);
    tp_value_clear(&result);
    if (st == TP_OK && ctx->exporting) {
        tp_value gargs = tp_value_none();
        bool poisoned = false;
        tp_node *node = NULL;
        st = tp_value_tuple(n_fargs, &gargs);
        for (int i = 0; st == TP_OK && i < n_fargs; i++) {
            tp_value item;
            st = to_graph_value(ctx, &fargs[i], &item, &poisoned);
            if (st == TP_OK) st = tp_value_seq_set(&gargs, i, &item);
        }
        if (st == TP_OK) st = tp_graph_call_function(ctx->g, functional, &gargs, NULL, &node);
        tp_value_clear(&gargs);
        const tp_value *mv = node ? tp_node_meta_val(node) : NULL;
        if (st == TP_OK && mv && mv->kind == TP_VAL_TENSOR && tp_tensor_dtype(mv->u.tensor) != tp_tensor_dtype(self->t)) {
            tp_value targs;
            st = tp_value_tuple(2, &targs);
            tp_value a0 = tp_value_node(node), a1 = tp_value_dtype(tp_tensor_dtype(self->t));
            if (st == TP_OK) st = tp_value_seq_set(&targs, 0, &a0);
            if (st == TP_OK) st = tp_value_seq_set(&targs, 1, &a1);
            if (st == TP_OK) st = tp_graph_call_function(ctx->g, TP_OP_TO, &targs, NULL, &node);
            tp_value_clear(&targs);
        }
        if (st == TP_OK && !self->view_base) {
            /* a write into storage some other state/input owns without a
             * recorded view cannot be written back */
            for (int k = 0; k < ctx->n_origins; k++) {
                const tp_t *oh = ctx->origins[k].handle;
                if (oh != self && oh->t && self->t->storage && oh->t->storage == self->t->storage) {
                    st = tp_error(TP_ERR_UNSUPPORTED,
                                  "the in-place write goes to a tensor that aliases '%s' but was not derived from it "
                                  "by a view op; it cannot be recorded as a mutation of '%s'",
                                  ctx->origins[k].path, ctx->origins[k].path);
                    break;
                }
            }
        }
        if (st == TP_OK && self->view_base) {
            /* write through a view: base_new = clone(base); the same view
             * of base_new; copy_(view, value) - the in-place node mutates
             * the fresh clone, which becomes the base's value */
            tp_t *base = self->view_base;
            tp_node *nb = NULL, *v = NULL, *w = NULL;
            tp_value cargs = tp_value_none(), a0 = tp_value_node(base->node);
            st = tp_value_tuple(1, &cargs);
            if (st == TP_OK) st = tp_value_seq_set(&cargs, 0, &a0);
            if (st == TP_OK) st = tp_graph_call_function(ctx->g, TP_OP_CLONE, &cargs, NULL, &nb);
            tp_value_clear(&cargs);
            if (st == TP_OK) st = replay_view(ctx, self, nb, &v);
            if (st == TP_OK) st = tp_value_tuple(2, &cargs);
            tp_value c0 = tp_value_node(v), c1 = tp_value_node(node);
            if (st == TP_OK) st = tp_value_seq_set(&cargs, 0, &c0);
            if (st == TP_OK) st = tp_value_seq_set(&cargs, 1, &c1);
            if (st == TP_OK) st = tp_graph_call_function(ctx->g, TP_OP_COPY_, &cargs, NULL, &w);
            tp_value_clear(&cargs);
            if (st == TP_OK) {
                tp_node_set_flags(w, tp_node_flags(w) | TP_NODE_IMPURE);
                base->node = nb;
                base->made_by = op;
                base->version++;
                self->node = node;
                self->made_by = op;
                self->base_version = base->version;
            }
        } else if (st == TP_OK) {
            self->node = node;
            self->made_by = op;
            self->version++;
        }
    }
    if (st != TP_OK) {
        char buf[256];
        where(ctx, buf, sizeof buf);
        tp_error_context("%s%s", tp_op_name(op), buf);
        fail_with_last(ctx, st);
        return &ctx->poison;
    }
    return self;
}

tp_t *tp_add_(tp_ctx *ctx, tp_t *self, tp_t *other) {
    POISON_IF(tp_is_poison(other));
    tp_value a[2] = {tp_v(self), tp_v(other)};
    return inplace(ctx, TP_OP_ADD_, self, a, 2, TP_OP_ADD, a, 2);
}

tp_t *tp_add_scalar_(tp_ctx *ctx, tp_t *self, double other) {
    tp_value a[2] = {tp_v(self), tp_value_float(other)};
    if (other == (double)(int64_t)other && !tp_dtype_is_float(tp_dtype_of(self))) a[1] = tp_value_int((int64_t)other);
    return inplace(ctx, TP_OP_ADD_, self, a, 2, TP_OP_ADD, a, 2);
}

tp_t *tp_mul_(tp_ctx *ctx, tp_t *self, tp_t *other) {
    POISON_IF(tp_is_poison(other));
    tp_value a[2] = {tp_v(self), tp_v(other)};
    return inplace(ctx, TP_OP_MUL_, self, a, 2, TP_OP_MUL, a, 2);
}

tp_t *tp_mul_scalar_(tp_ctx *ctx, tp_t *self, double other) {
    tp_value a[2] = {tp_v(self), tp_value_float(other)};
    if (other == (double)(int64_t)other && !tp_dtype_is_float(tp_dtype_of(self))) a[1] = tp_value_int((int64_t)other);
    return inplace(ctx, TP_OP_MUL_, self, a, 2, TP_OP_MUL, a, 2);
}

tp_t *tp_copy_(tp_ctx *ctx, tp_t *self, tp_t *src) {
    POISON_IF(tp_is_poison(src) || tp_is_poison(self));
    tp_value a[2] = {tp_v(self), tp_v(src)};
    if (!ctx->exporting) return inplace(ctx, TP_OP_COPY_, self, a, 2, TP_OP_CLONE, a, 1);
    /* functional form: clone(src) when shapes agree, else zeros_like(self) + src
     * (broadcast without baking sizes); then converted to self's dtype */
    const tp_tensor *d = self->t, *s = src->t;
    bool same = tp_tensor_ndim(d) == tp_tensor_ndim(s) &&
                memcmp(tp_tensor_sizes(d), tp_tensor_sizes(s), (size_t)tp_tensor_ndim(d) * sizeof(int64_t)) == 0;
    if (same) {
        tp_value f[1] = {tp_v(src)};
        return inplace(ctx, TP_OP_COPY_, self, a, 2, TP_OP_CLONE, f, 1);
    }
    tp_value z[1] = {tp_v(self)};
    tp_t *zeros = tp_call(ctx, TP_OP_ZEROS_LIKE, z, 1, NULL);
    POISON_IF(tp_is_poison(zeros));
    tp_value f[2] = {tp_v(zeros), tp_v(src)};
    return inplace(ctx, TP_OP_COPY_, self, a, 2, TP_OP_ADD, f, 2);
}

tp_t *tp_fill_(tp_ctx *ctx, tp_t *self, double value) {
    tp_value a[2] = {tp_v(self), tp_value_float(value)};
    return inplace(ctx, TP_OP_FILL_, self, a, 2, TP_OP_FULL_LIKE, a, 2);
}

tp_t *tp_zero_(tp_ctx *ctx, tp_t *self) {
    tp_value a[1] = {tp_v(self)};
    return inplace(ctx, TP_OP_ZERO_, self, a, 1, TP_OP_ZEROS_LIKE, a, 1);
}

/* ---- sizes and values ------------------------------------------------------------------- */

/* Record that the forward read dim `dim` of node's value (-1: the int
 * value of an int node) as a C int: the solver pins it. */
static void record_read(tp_ctx *ctx, const tp_node *node, int dim, int64_t v, const char *file, int line) {
    if (ctx->n_reads == ctx->cap_reads) {
        int cap = ctx->cap_reads ? ctx->cap_reads * 2 : 16;
        size_read *r = tp_realloc(ctx->reads, (size_t)cap * sizeof *r);
        if (!r) {
            tp_ctx_fail(ctx, TP_ERR_NOMEM, "out of memory");
            return;
        }
        ctx->reads = r;
        ctx->cap_reads = cap;
    }
    size_read *r = &ctx->reads[ctx->n_reads];
    r->node = tp_strdup(tp_node_name(node));
    if (!r->node) {
        tp_ctx_fail(ctx, TP_ERR_NOMEM, "out of memory");
        return;
    }
    r->dim = dim;
    r->value = v;
    snprintf(r->site, sizeof r->site, "%s:%d", file, line);
    ctx->n_reads++;
}

int64_t tp_size_at(tp_ctx *ctx, tp_t *h, int64_t dim, const char *file, int line) {
    if (tp_is_poison(h)) return 0;
    if (h->is_int) {
        tp_ctx_fail(ctx, TP_ERR_TYPE, "tp_size: the handle is an int, not a tensor, at %s:%d", file, line);
        return 0;
    }
    int nd = tp_tensor_ndim(h->t);
    int64_t d = dim < 0 ? dim + nd : dim;
    if (d < 0 || d >= nd) {
        tp_ctx_fail(ctx, TP_ERR_INDEX, "dimension %lld out of range for a %d-dimensional tensor at %s:%d",
                    (long long)dim, nd, file, line);
        return 0;
    }
    int64_t v = tp_tensor_sizes(h->t)[d];
    if (ctx->exporting && h->node) record_read(ctx, h->node, (int)d, v, file, line);
    return v;
}

/* ---- symbolic ints ------------------------------------------------------------------------ */

bool tp_is_int(const tp_t *h) { return !tp_is_poison(h) && h->is_int; }

tp_t *tp_int(tp_ctx *ctx, int64_t v) {
    if (ctx_stopped(ctx)) return &ctx->poison;
    return int_handle(ctx, v, NULL, TP_OP_INVALID);
}

tp_t *tp_dim(tp_ctx *ctx, tp_t *h, int64_t dim) {
    POISON_IF(tp_is_poison(h));
    if (h->is_int) {
        tp_ctx_fail(ctx, TP_ERR_TYPE, "sym_size: the handle is an int, not a tensor");
        return &ctx->poison;
    }
    tp_value args[2] = {tp_v(h), tp_value_int(dim)};
    /* eagerly (or on a tensor outside the graph) the size is just an int */
    if (!ctx->exporting || !h->node) {
        tp_value r = tp_value_none();
        tp_status st = tp_op_call(TP_OP_SYM_SIZE, args, 2, NULL, &r);
        if (st != TP_OK) {
            fail_with_last(ctx, st);
            return &ctx->poison;
        }
        return int_handle(ctx, tp_value_as_i64(&r), NULL, TP_OP_SYM_SIZE);
    }
    return tp_call(ctx, TP_OP_SYM_SIZE, args, 2, NULL);
}

static tp_t *int_binop(tp_ctx *ctx, tp_op op, tp_t *a, tp_t *b) {
    POISON_IF(tp_is_poison(a) || tp_is_poison(b));
    if (!a->is_int || !b->is_int) {
        tp_ctx_fail(ctx, TP_ERR_TYPE, "%s: operands must be ints (tp_dim / tp_int handles), not tensors",
                    tp_op_name(op));
        return &ctx->poison;
    }
    tp_value args[2] = {tp_v(a), tp_v(b)};
    if (!ctx->exporting || (!a->node && !b->node)) {
        /* constants fold (no node) */
        tp_value r = tp_value_none();
        tp_status st = tp_op_call(op, args, 2, NULL, &r);
        if (st != TP_OK) {
            fail_with_last(ctx, st);
            return &ctx->poison;
        }
        return int_handle(ctx, tp_value_as_i64(&r), NULL, op);
    }
    return tp_call(ctx, op, args, 2, NULL);
}

tp_t *tp_int_add(tp_ctx *ctx, tp_t *a, tp_t *b) { return int_binop(ctx, TP_OP_SYM_ADD, a, b); }
tp_t *tp_int_sub(tp_ctx *ctx, tp_t *a, tp_t *b) { return int_binop(ctx, TP_OP_SYM_SUB, a, b); }
tp_t *tp_int_mul(tp_ctx *ctx, tp_t *a, tp_t *b) { return int_binop(ctx, TP_OP_SYM_MUL, a, b); }
tp_t *tp_int_floordiv(tp_ctx *ctx, tp_t *a, tp_t *b) { return int_binop(ctx, TP_OP_SYM_FLOORDIV, a, b); }

int64_t tp_int_value_at(tp_ctx *ctx, tp_t *h, const char *file, int line) {
    if (tp_is_poison(h)) return 0;
    if (!h->is_int) {
        tp_ctx_fail(ctx, TP_ERR_TYPE, "tp_int_value: the handle is a tensor, not an int, at %s:%d", file, line);
        return 0;
    }
    if (ctx->exporting && h->node) {
        /* keep the node through dead-code elimination: the solver pins it */
        tp_node_set_flags(h->node, tp_node_flags(h->node) | TP_NODE_IMPURE);
        record_read(ctx, h->node, -1, h->ival, file, line);
    }
    return h->ival;
}

tp_value tp_ints_sym(tp_ctx *ctx, int n, tp_t *const *handles) {
    tp_value *v = own_value(ctx);
    if (!v || tp_value_list(n, v) != TP_OK) {
        tp_ctx_fail(ctx, TP_ERR_NOMEM, "out of memory building an int list");
        return tp_value_none();
    }
    for (int i = 0; i < n; i++) {
        if (tp_is_poison(handles[i])) continue; /* leaves None: the op fails on it */
        if (!handles[i]->is_int) {
            tp_ctx_fail(ctx, TP_ERR_TYPE, "tp_ints_sym: item %d is a tensor, not an int", i);
            continue;
        }
        tp_value item = tp_v(handles[i]);
        tp_value_seq_set(v, i, &item);
    }
    return *v;
}

double tp_item_at(tp_ctx *ctx, tp_t *h, const char *file, int line) {
    if (tp_is_poison(h) || ctx_stopped(ctx)) return 0.0;
    if (h->is_int) return (double)tp_int_value_at(ctx, h, file, line);
    if (tp_tensor_numel(h->t) != 1) {
        tp_ctx_fail(ctx, TP_ERR_INVALID_ARG, "a tensor with %lld elements cannot be converted to a scalar at %s:%d",
                    (long long)tp_tensor_numel(h->t), file, line);
        return 0.0;
    }
    double v = tp_tensor_item_f64(h->t, 0);
    if (ctx->exporting) {
        char buf[256], msg[768];
        where(ctx, buf, sizeof buf);
        snprintf(msg, sizeof msg,
                 "data-dependent: the forward reads the value of a tensor computed by '%s' at %s:%d%s; an exported "
                 "graph cannot branch, loop or size anything on tensor values",
                 h->made_by == TP_OP_INVALID ? "an input" : tp_op_name(h->made_by), file, line, buf);
        if (ctx->draft) {
            tp__ctx_add_failure(ctx, TP_FAILURE_DATA_DEPENDENT, msg);
        } else {
            tp_ctx_fail(ctx, TP_ERR_UNSUPPORTED, "%s", msg);
            return 0.0;
        }
    }
    return v;
}

/* ---- module calls ------------------------------------------------------------------------- */

/* Flatten the tensor leaves of v into node names (export) / constants. */
static tp_status leaf_names(tp_ctx *ctx, const tp_value *v, char ***names, tp_value **consts, int *n) {
    tp_value leaves = tp_value_none();
    tp_treespec *spec = NULL;
    TP_TRY(tp_pytree_flatten(v, &leaves, &spec));
    tp_treespec_free(spec);
    int64_t k = tp_value_len(&leaves);
    *names = tp_calloc((size_t)(k + 1), sizeof(char *));
    *consts = tp_calloc((size_t)(k + 1), sizeof(tp_value));
    *n = 0;
    tp_status st = (*names && *consts) ? TP_OK : tp_error(TP_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; st == TP_OK && i < k; i++) {
        const tp_value *leaf = tp_value_at(&leaves, i);
        tp_t *h = leaf->kind == TP_VAL_TENSOR ? tp__ctx_find(ctx, leaf->u.tensor) : NULL;
        tp_node *hn = NULL;
        if (h && h->node) st = tp__ctx_node(ctx, h, &hn);
        if (st != TP_OK) break;
        if (hn) {
            if (!((*names)[i] = tp_strdup(tp_node_name(hn)))) st = tp_error(TP_ERR_NOMEM, "out of memory");
        } else {
            st = tp_value_copy(leaf, &(*consts)[i]);
        }
        (*n)++;
    }
    tp_value_clear(&leaves);
    return st;
}

static tp_status record_call(tp_ctx *ctx, const char *fqn, const fwd_method *fm, const tp_value *bound,
                             const tp_value *out, modname *mn) {
    if (ctx->n_calls == ctx->cap_calls) {
        int cap = ctx->cap_calls ? ctx->cap_calls * 2 : 16;
        call_record *c = tp_realloc(ctx->calls, (size_t)cap * sizeof *c);
        TP_CHECK(c != NULL, TP_ERR_NOMEM, "out of memory recording a module call");
        ctx->calls = c;
        ctx->cap_calls = cap;
    }
    call_record *r = &ctx->calls[ctx->n_calls];
    memset(r, 0, sizeof *r);
    char name[512];
    if (mn->n_calls == 0) snprintf(name, sizeof name, "%s", fqn);
    else snprintf(name, sizeof name, "%s@%d", fqn, mn->n_calls);
    mn->n_calls++;
    tp_status st = TP_OK;
    r->fqn = tp_strdup(name);
    if (!r->fqn) st = tp_error(TP_ERR_NOMEM, "out of memory");
    /* inputs: (args tuple, {}) */
    tp_value args_tree = tp_value_none(), in_tree = tp_value_none(), kw = tp_value_none();
    if (st == TP_OK) st = tp_value_tuple(fm->n_args, &args_tree);
    for (int i = 0; st == TP_OK && i < fm->n_args; i++) {
        tp_value c;
        st = tp_value_copy(&bound[i], &c);
        if (st == TP_OK) st = tp_value_seq_set(&args_tree, i, &c);
    }
    if (st == TP_OK) st = tp_value_tuple(2, &in_tree);
    if (st == TP_OK) st = tp_value_dict(&kw);
    if (st == TP_OK) st = tp_value_seq_set(&in_tree, 0, &args_tree);
    if (st == TP_OK) st = tp_value_seq_set(&in_tree, 1, &kw);
    tp_value leaves = tp_value_none();
    if (st == TP_OK) st = tp_pytree_flatten(&in_tree, &leaves, &r->in_spec);
    tp_value_clear(&leaves);
    if (st == TP_OK) st = tp_pytree_flatten(out, &leaves, &r->out_spec);
    tp_value_clear(&leaves);
    if (st == TP_OK) st = leaf_names(ctx, &in_tree, &r->input_names, &r->input_consts, &r->n_inputs);
    tp_value dummy = tp_value_none();
    tp_value *oc = NULL;
    if (st == TP_OK) st = leaf_names(ctx, out, &r->output_names, &oc, &r->n_outputs);
    for (int i = 0; oc && i < r->n_outputs; i++) tp_value_clear(&oc[i]);
    tp_free(oc);
    (void)dummy;
    if (st == TP_OK) {
        r->arg_names = tp_calloc((size_t)(fm->n_args + 1), sizeof(char *));
        if (!r->arg_names) st = tp_error(TP_ERR_NOMEM, "out of memory");
        for (int i = 0; st == TP_OK && i < fm->n_args; i++) {
            if (!(r->arg_names[i] = tp_strdup(fm->arg_names[i]))) st = tp_error(TP_ERR_NOMEM, "out of memory");
            r->n_arg_names = i + 1;
        }
    }
    tp_value_clear(&in_tree);
    tp_value_clear(&args_tree);
    tp_value_clear(&kw);
    if (st != TP_OK) {
        call_record_clear(r);
        return st;
    }
    ctx->n_calls++;
    return TP_OK;
}

tp_status tp__ctx_run(tp_ctx *ctx, tp_module *m, const fwd_method *fm, const tp_value *bound, tp_value *out) {
    *out = tp_value_none();
    tp_status st = fm->fn(ctx, m, bound, out);
    if (st == TP_OK && ctx->status != TP_OK && !ctx->draft) st = ctx->status;
    if (st != TP_OK) {
        if (ctx->status == TP_OK) fail_with_last(ctx, st);
        tp_value_clear(out);
        return ctx->status;
    }
    return TP_OK;
}

tp_status tp_call_module(tp_ctx *ctx, tp_module *m, const tp_value *args, int n_args, const tp_value *kwargs,
                         const tp_value **out) {
    *out = NULL;
    if (ctx_stopped(ctx)) return ctx->status;
    const fwd_method *fm = m ? tp__module_method(m, NULL) : NULL;
    if (!fm)
        return tp_ctx_fail(ctx, TP_ERR_STATE, "module '%s' has no forward", m ? tp_module_type_name(m) : "NULL");
    tp_value *bound = tp_calloc((size_t)(fm->n_args + 1), sizeof *bound);
    if (!bound) return tp_ctx_fail(ctx, TP_ERR_NOMEM, "out of memory calling a module");
    tp_status st = tp__bind_args(fm, args, n_args, kwargs, bound);
    if (st != TP_OK) {
        tp_free(bound);
        fail_with_last(ctx, st);
        return st;
    }
    modname *mn = NULL;
    for (int i = 0; i < ctx->n_mods; i++)
        if (ctx->mods[i].m == m) mn = &ctx->mods[i];
    if (mn && ctx->depth == ctx->cap_depth) {
        int cap = ctx->cap_depth ? ctx->cap_depth * 2 : 16;
        const char **s = tp_realloc(ctx->stack, (size_t)cap * sizeof *s);
        if (!s) st = tp_ctx_fail(ctx, TP_ERR_NOMEM, "out of memory");
        else {
            ctx->stack = s;
            ctx->cap_depth = cap;
        }
    }
    tp_value *res = own_value(ctx);
    if (!res && st == TP_OK) st = tp_ctx_fail(ctx, TP_ERR_NOMEM, "out of memory");
    if (st == TP_OK) {
        if (mn) ctx->stack[ctx->depth++] = mn->fqn;
        st = tp__ctx_run(ctx, m, fm, bound, res);
        if (mn) ctx->depth--;
        if (st == TP_OK && ctx->exporting && mn && *mn->fqn) {
            st = record_call(ctx, mn->fqn, fm, bound, res, mn);
            if (st != TP_OK) fail_with_last(ctx, st);
        }
    }
    for (int i = 0; i < fm->n_args; i++) tp_value_clear(&bound[i]);
    tp_free(bound);
    if (st == TP_OK) *out = res;
    return st;
}

tp_t *tp_forward(tp_ctx *ctx, tp_module *m, tp_t *x) {
    POISON_IF(tp_is_poison(x));
    tp_value a[1] = {tp_v(x)};
    const tp_value *out;
    if (tp_call_module(ctx, m, a, 1, NULL, &out) != TP_OK) return &ctx->poison;
    if (out->kind != TP_VAL_TENSOR) {
        tp_ctx_fail(ctx, TP_ERR_TYPE, "module '%s' returned a %s, expected a tensor", tp_module_type_name(m),
                    tp_value_kind_name(out->kind));
        return &ctx->poison;
    }
    return tp_arg(ctx, out);
}

/* ---- eager entry ------------------------------------------------------------------------- */

/* Create a handle for every tensor leaf of v (eager: the caller's tensors). */
static tp_status wrap_leaves(tp_ctx *ctx, const tp_value *v) {
    if (v->kind == TP_VAL_TENSOR) {
        if (tp__ctx_find(ctx, v->u.tensor)) return TP_OK;
        tp_t *h = tp__ctx_handle(ctx, tp_tensor_retain(v->u.tensor), NULL, TP_OP_INVALID);
        return h->poison ? ctx->status : TP_OK;
    }
    if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE || v->kind == TP_VAL_DICT)
        for (int64_t i = 0; i < v->u.seq.n; i++) TP_TRY(wrap_leaves(ctx, &v->u.seq.items[i]));
    return TP_OK;
}

tp_status tp_module_run(tp_module *m, const char *method, const tp_value *args, int n_args, const tp_value *kwargs,
                        tp_value *out) {
    *out = tp_value_none();
    TP_CHECK(m != NULL, TP_ERR_INVALID_ARG, "module is NULL");
    const fwd_method *fm = tp__module_method(m, method);
    TP_CHECK(fm != NULL, TP_ERR_STATE, "module '%s' has no method '%s'", tp_module_type_name(m),
             method ? method : "forward");
    tp_value *bound = tp_calloc((size_t)(fm->n_args + 1), sizeof *bound);
    TP_CHECK(bound != NULL, TP_ERR_NOMEM, "out of memory calling a module");
    tp_status st = tp__bind_args(fm, args, n_args, kwargs, bound);
    if (st != TP_OK) {
        tp_free(bound);
        return st;
    }
    tp_ctx *ctx = NULL;
    st = tp__ctx_new(false, false, &ctx);
    for (int i = 0; st == TP_OK && i < fm->n_args; i++) st = wrap_leaves(ctx, &bound[i]);
    if (st == TP_OK) st = tp__ctx_run(ctx, m, fm, bound, out);
    if (st != TP_OK && ctx && ctx->error) {
        char *msg = tp_strdup(ctx->error);
        tp_error(st, "%s", msg ? msg : "forward failed");
        tp_free(msg);
    }
    tp__ctx_free(ctx);
    for (int i = 0; i < fm->n_args; i++) tp_value_clear(&bound[i]);
    tp_free(bound);
    return st;
}
