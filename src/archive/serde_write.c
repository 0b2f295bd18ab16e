/*
 * serde_write.c - writing a tp_program as a tensorplay program document: nodes
 * through the op map's written callees, tensorplay's runtime dim checks, the
 * signature, module call graph, tree specs, constraints and dynamic shapes.
 *
 * Part of the program document reader/writer (serde.h is the contract,
 * serde_impl.h what its files share).
 */
#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serde_impl.h"

/* ======================================================================
 * writing a program document
 * ====================================================================== */

static tp_status enc_value(jwriter *w, const tp_value *v, int depth, json_t **out);

static json_t *jw_obj1(jwriter *w, const char *key, json_t *value) {
    json_t *o = tp__sd_jw_take(w, json_object());
    tp__sd_jw_set(w, o, key, value);
    return o;
}

static tp_status enc_seq(jwriter *w, const tp_value *v, int depth, json_t **out) {
    json_t *arr = tp__sd_jw_take(w, json_array());
    for (int64_t i = 0; i < v->u.seq.n; i++) {
        json_t *item = NULL;
        tp_status st = enc_value(w, &v->u.seq.items[i], depth + 1, &item);
        if (st != TP_OK) {
            json_decref(arr);
            return st;
        }
        if (v->kind == TP_VAL_DICT) {
            json_t *pair = tp__sd_jw_take(w, json_array());
            tp__sd_jw_append(w, pair, tp__sd_jw_take(w, json_string(v->u.seq.keys[i])));
            tp__sd_jw_append(w, pair, item);
            item = pair;
        }
        tp__sd_jw_append(w, arr, item);
    }
    *out = jw_obj1(w, v->kind == TP_VAL_TUPLE ? "__tuple__" : v->kind == TP_VAL_LIST ? "__list__" : "__dict__", arr);
    return TP_OK;
}

static tp_status enc_value(jwriter *w, const tp_value *v, int depth, json_t **out) {
    *out = NULL;
    TP_CHECK(depth <= TP_LIMIT_DEPTH, TP_ERR_UNSUPPORTED, "value nested deeper than %d", TP_LIMIT_DEPTH);
    switch (v->kind) {
    case TP_VAL_NONE: *out = tp__sd_jw_take(w, json_null()); return TP_OK;
    case TP_VAL_BOOL: *out = tp__sd_jw_take(w, json_boolean(v->u.b)); return TP_OK;
    case TP_VAL_INT: *out = tp__sd_jw_take(w, json_integer(v->u.i)); return TP_OK;
    case TP_VAL_FLOAT: *out = tp__sd_jw_real(w, v->u.f); return TP_OK;
    case TP_VAL_STR:
        *out = json_string(v->u.s);
        TP_CHECK(*out != NULL, TP_ERR_UNSUPPORTED, "string '%.64s' is not valid UTF-8", v->u.s);
        return TP_OK;
    case TP_VAL_DTYPE: {
        char *b64 = tp__sd_dtype_pickle_b64(tp__sd_dtype_code(v->u.dtype));
        TP_CHECK(b64 != NULL, TP_ERR_NOMEM, "out of memory");
        *out = jw_obj1(w, "__pickle__", tp__sd_jw_take(w, json_string(b64)));
        tp_free(b64);
        return TP_OK;
    }
    case TP_VAL_NODE: *out = jw_obj1(w, "__node__", tp__sd_jw_name(w, "node name", tp_node_name(v->u.node))); return TP_OK;
    case TP_VAL_TUPLE:
    case TP_VAL_LIST:
    case TP_VAL_DICT: return enc_seq(w, v, depth, out);
    case TP_VAL_TENSOR: break;
    }
    return tp_error(TP_ERR_UNSUPPORTED, "a tensor inside node arguments cannot be written (use a get_attr node)");
}

static json_t *enc_name_target(jwriter *w, const char *kind, const char *name) {
    json_t *t = tp__sd_jw_take(w, json_object());
    tp__sd_jw_set(w, t, "kind", tp__sd_jw_take(w, json_string(kind)));
    tp__sd_jw_set(w, t, "name", tp__sd_jw_name(w, "target", name));
    return t;
}

static json_t *enc_meta_val(jwriter *w, const tp_value *v, int depth) {
    /* meta is optional: what the reader's depth limit would refuse is left
     * out (a container at the limit would have children past it) */
    if (depth > TP_LIMIT_DEPTH || (depth == TP_LIMIT_DEPTH && v->kind != TP_VAL_TENSOR)) return tp__sd_jw_take(w, json_null());
    if (v->kind == TP_VAL_TENSOR) {
        json_t *o = tp__sd_jw_take(w, json_object()), *shape = tp__sd_jw_take(w, json_array());
        const tp_tensor *t = v->u.tensor;
        for (int d = 0; d < tp_tensor_ndim(t); d++) tp__sd_jw_append(w, shape, tp__sd_jw_take(w, json_integer(tp_tensor_sizes(t)[d])));
        tp__sd_jw_set(w, o, "dtype", tp__sd_jw_take(w, json_string(tp_dtype_name(tp_tensor_dtype(t)))));
        tp__sd_jw_set(w, o, "shape", shape);
        return o;
    }
    if (v->kind == TP_VAL_TUPLE || v->kind == TP_VAL_LIST) {
        json_t *arr = tp__sd_jw_take(w, json_array());
        for (int64_t i = 0; i < v->u.seq.n; i++) tp__sd_jw_append(w, arr, enc_meta_val(w, &v->u.seq.items[i], depth + 1));
        return jw_obj1(w, v->kind == TP_VAL_TUPLE ? "__tuple__" : "__list__", arr);
    }
    return tp__sd_jw_take(w, json_null());
}

/* ---- runtime dim checks ------------------------------------------------
 * tensorplay checks a program's dynamic dims at run time with calls of
 * tensorplay.export._trace._assert_dim_range / _assert_dims_equal /
 * _assert_dim_relation before the output; the reader drops them (the
 * program holds the constraints), the writer makes them again from the dim
 * rules and equality constraints, so that tensorplay keeps refusing
 * out-of-range inputs in an archive tpexport wrote. Sites inside container
 * inputs ("xs[0]") are left to the constraints. */

static bool plain_site(const tp_program *p, const tp_dim_site *s) {
    const tp_node *n = tp_graph_find_node(tp_program_graph(p), s->input);
    return n && tp_node_get_kind(n) == TP_NODE_PLACEHOLDER;
}

static void enc_assert(jwriter *w, const tp_program *p, json_t *nodes, const char *fn, json_t *args, int *counter) {
    char name[96];
    for (;; (*counter)++) {
        if (*counter == 0) snprintf(name, sizeof name, "%s", fn);
        else snprintf(name, sizeof name, "%s_%d", fn, *counter);
        if (!tp_graph_find_node(tp_program_graph(p), name)) break;
    }
    (*counter)++;
    json_t *jn = tp__sd_jw_take(w, json_object()), *target = tp__sd_jw_take(w, json_object());
    tp__sd_jw_set(w, target, "kind", tp__sd_jw_take(w, json_string("ref")));
    tp__sd_jw_set(w, target, "module", tp__sd_jw_take(w, json_string("tensorplay.export._trace")));
    tp__sd_jw_set(w, target, "qualname", tp__sd_jw_take(w, json_string(fn)));
    tp__sd_jw_set(w, jn, "op", tp__sd_jw_take(w, json_string("call_function")));
    tp__sd_jw_set(w, jn, "target", target);
    tp__sd_jw_set(w, jn, "args", jw_obj1(w, "__tuple__", args));
    tp__sd_jw_set(w, jn, "kwargs", jw_obj1(w, "__dict__", tp__sd_jw_take(w, json_array())));
    tp__sd_jw_set(w, jn, "name", tp__sd_jw_take(w, json_string(name)));
    tp__sd_jw_append(w, nodes, jn);
}

/* The symbol of the SYMBOL rule at site s, or NULL. */
static const char *site_symbol(const tp_program *p, const tp_dim_site *s) {
    for (int i = 0; i < tp_program_num_dim_rules(p); i++) {
        const tp_dim_rule *r = tp_program_dim_rule(p, i);
        if (r->kind == TP_DIM_SYMBOL && r->site.dim == s->dim && !strcmp(r->site.input, s->input)) return r->symbol;
    }
    return NULL;
}

static void enc_site_args(jwriter *w, json_t *args, const tp_dim_site *s) {
    tp__sd_jw_append(w, args, jw_obj1(w, "__node__", tp__sd_jw_name(w, "node name", s->input)));
    tp__sd_jw_append(w, args, tp__sd_jw_take(w, json_integer(s->dim)));
}

static void enc_dim_asserts(jwriter *w, const tp_program *p, json_t *nodes) {
    int n_rules = tp_program_num_dim_rules(p), c_range = 0, c_equal = 0, c_rel = 0;
    for (int i = 0; i < n_rules; i++) {
        const tp_dim_rule *r = tp_program_dim_rule(p, i);
        if (r->kind == TP_DIM_STATIC || !r->symbol || !plain_site(p, &r->site)) continue;
        /* the symbol's first plain SYMBOL site is its root */
        const tp_dim_rule *root = NULL;
        for (int k = 0; k < n_rules && !root; k++) {
            const tp_dim_rule *q = tp_program_dim_rule(p, k);
            if (q->kind == TP_DIM_SYMBOL && q->symbol && !strcmp(q->symbol, r->symbol) && plain_site(p, &q->site)) root = q;
        }
        json_t *args = tp__sd_jw_take(w, json_array());
        if (r->kind == TP_DIM_SYMBOL && r == root) {
            const tp_range_constraint *rc = tp_program_find_range(p, r->symbol);
            enc_site_args(w, args, &r->site);
            tp__sd_jw_append(w, args, rc ? tp__sd_jw_take(w, json_integer(rc->min)) : tp__sd_jw_take(w, json_null()));
            tp__sd_jw_append(w, args, rc && rc->max != TP_DIM_UNBOUNDED ? tp__sd_jw_take(w, json_integer(rc->max)) : tp__sd_jw_take(w, json_null()));
            tp__sd_jw_append(w, args, tp__sd_jw_name(w, "dim name", r->symbol));
            enc_assert(w, p, nodes, "_assert_dim_range", args, &c_range);
        } else if (r->kind == TP_DIM_SYMBOL && root) {
            enc_site_args(w, args, &r->site);
            enc_site_args(w, args, &root->site);
            tp__sd_jw_append(w, args, tp__sd_jw_name(w, "dim name", r->symbol));
            enc_assert(w, p, nodes, "_assert_dims_equal", args, &c_equal);
        } else if (r->kind == TP_DIM_DERIVED && root) {
            char expr[TP_LIMIT_NAME + 64];
            tp__dim_rule_expr(r, expr, sizeof expr);
            enc_site_args(w, args, &root->site);
            enc_site_args(w, args, &r->site);
            tp__sd_jw_append(w, args, tp__sd_jw_take(w, json_integer(r->scale)));
            tp__sd_jw_append(w, args, tp__sd_jw_take(w, json_integer(r->offset)));
            tp__sd_jw_append(w, args, tp__sd_jw_name(w, "dim name", expr));
            enc_assert(w, p, nodes, "_assert_dim_relation", args, &c_rel);
        } else {
            json_decref(args);
        }
    }
    for (int i = 0; i < tp_program_num_equalities(p); i++) {
        const tp_equality_constraint *e = tp_program_equality(p, i);
        for (int k = 1; k < e->n_sites; k++) {
            if (!plain_site(p, &e->sites[k]) || !plain_site(p, &e->sites[0])) continue;
            const char *a = site_symbol(p, &e->sites[k]), *b = site_symbol(p, &e->sites[0]);
            if (a && b && !strcmp(a, b)) continue; /* checked above, through the symbol's root */
            json_t *args = tp__sd_jw_take(w, json_array());
            enc_site_args(w, args, &e->sites[k]);
            enc_site_args(w, args, &e->sites[0]);
            tp__sd_jw_append(w, args, e->name ? tp__sd_jw_name(w, "dim name", e->name) : tp__sd_jw_take(w, json_string("equal dims")));
            enc_assert(w, p, nodes, "_assert_dims_equal", args, &c_equal);
        }
    }
}

/* A call of `op` with the node's args, through the op's write entry. */
static tp_status enc_call(jwriter *w, const tp_node *n, tp_op op, json_t *obj) {
    if (op == TP_OP_PY_BINOP) { /* _operator.<op>(a, b) on run-time numbers */
        const tp_value *args = tp_node_args(n), *name = tp_value_at(args, 0);
        TP_CHECK(tp_value_len(args) == 3 && name && name->kind == TP_VAL_STR, TP_ERR_UNSUPPORTED,
                 "node %s: py_binop needs an operator name and two operands", tp_node_name(n));
        json_t *target = tp__sd_jw_take(w, json_object());
        tp__sd_jw_set(w, target, "kind", tp__sd_jw_take(w, json_string("ref")));
        tp__sd_jw_set(w, target, "module", tp__sd_jw_take(w, json_string("_operator")));
        tp__sd_jw_set(w, target, "qualname", tp__sd_jw_take(w, json_string(name->u.s)));
        tp__sd_jw_set(w, obj, "op", tp__sd_jw_take(w, json_string("call_function")));
        tp__sd_jw_set(w, obj, "target", target);
        json_t *ja = NULL, *jb = NULL;
        tp_status st = enc_value(w, tp_value_at(args, 1), 1, &ja);
        if (st == TP_OK) st = enc_value(w, tp_value_at(args, 2), 1, &jb);
        if (st != TP_OK) {
            json_decref(ja);
            tp_error_context("node %s", tp_node_name(n));
            return st;
        }
        json_t *jargs = tp__sd_jw_take(w, json_array());
        tp__sd_jw_append(w, jargs, ja);
        tp__sd_jw_append(w, jargs, jb);
        tp__sd_jw_set(w, obj, "args", jw_obj1(w, "__tuple__", jargs));
        tp__sd_jw_set(w, obj, "kwargs", jw_obj1(w, "__dict__", tp__sd_jw_take(w, json_array())));
        return TP_OK;
    }
    const tp_serde_op_entry *e = tp__serde_write_entry(op);
    TP_CHECK(e != NULL, TP_ERR_UNSUPPORTED, "node %s: op %s has no tensorplay equivalent", tp_node_name(n), tp_op_name(op));
    json_t *target = tp__sd_jw_take(w, json_object());
    if (e->module) {
        tp__sd_jw_set(w, target, "kind", tp__sd_jw_take(w, json_string("ref")));
        tp__sd_jw_set(w, target, "module", tp__sd_jw_take(w, json_string(e->module)));
        tp__sd_jw_set(w, target, "qualname", tp__sd_jw_take(w, json_string(e->name)));
    } else {
        tp__sd_jw_set(w, target, "kind", tp__sd_jw_take(w, json_string("method")));
        tp__sd_jw_set(w, target, "name", tp__sd_jw_take(w, json_string(e->name)));
    }
    tp__sd_jw_set(w, obj, "op", tp__sd_jw_take(w, json_string(e->module ? "call_function" : "call_method")));
    tp__sd_jw_set(w, obj, "target", target);
    const tp_value *args = tp_node_args(n), *kwargs = tp_node_kwargs(n);
    json_t *jargs = NULL, *jkw = NULL;
    tp_status st;
    if (e->special == TP_SERDE_SETITEM) {
        /* index_put_(x, [None, i], v) as x[:, i] = v */
        const tp_value *idx = tp_value_at(args, 1), *acc = tp_value_at(args, 3);
        if (!acc && tp_value_dict_get(kwargs, "accumulate")) acc = tp_value_dict_get(kwargs, "accumulate");
        TP_CHECK(tp_value_len(args) >= 3 && idx && tp_value_is_seq(idx), TP_ERR_UNSUPPORTED,
                 "node %s: index_put_ needs self, a list of indices and values to be written", tp_node_name(n));
        if (acc && !(acc->kind == TP_VAL_BOOL && !acc->u.b)) {
            /* accumulate=True: x.index_put_(indices, values, True), tensorplay's method (tensor indices only) */
            for (int64_t k = 0; k < tp_value_len(idx); k++)
                TP_CHECK(tp_value_at(idx, k)->kind != TP_VAL_NONE, TP_ERR_UNSUPPORTED,
                         "node %s: index_put_ with accumulate=True and a full-slice index cannot be written for "
                         "tensorplay", tp_node_name(n));
            target = tp__sd_jw_take(w, json_object());
            tp__sd_jw_set(w, target, "kind", tp__sd_jw_take(w, json_string("method")));
            tp__sd_jw_set(w, target, "name", tp__sd_jw_take(w, json_string("index_put_")));
            tp__sd_jw_set(w, obj, "op", tp__sd_jw_take(w, json_string("call_method")));
            tp__sd_jw_set(w, obj, "target", target);
            json_t *ja[4] = {NULL, NULL, NULL, NULL};
            st = TP_OK;
            for (int k = 0; k < 3 && st == TP_OK; k++) st = enc_value(w, tp_value_at(args, k), 1, &ja[k]);
            if (st != TP_OK) {
                tp_error_context("node %s", tp_node_name(n));
                return st;
            }
            jargs = tp__sd_jw_take(w, json_array());
            for (int k = 0; k < 3; k++) tp__sd_jw_append(w, jargs, ja[k]);
            tp__sd_jw_append(w, jargs, tp__sd_jw_take(w, json_true()));
            tp__sd_jw_set(w, obj, "args", jw_obj1(w, "__tuple__", jargs));
            tp__sd_jw_set(w, obj, "kwargs", jw_obj1(w, "__dict__", tp__sd_jw_take(w, json_array())));
            return TP_OK;
        }
        json_t *items = tp__sd_jw_take(w, json_array());
        st = TP_OK;
        for (int64_t k = 0; k < tp_value_len(idx) && st == TP_OK; k++) {
            const tp_value *it = tp_value_at(idx, k);
            json_t *j = NULL;
            if (it->kind == TP_VAL_NONE) {
                json_t *sl = tp__sd_jw_take(w, json_array());
                for (int q = 0; q < 3; q++) tp__sd_jw_append(w, sl, tp__sd_jw_take(w, json_null()));
                j = jw_obj1(w, "__slice__", sl);
            } else {
                st = enc_value(w, it, 1, &j);
            }
            if (st == TP_OK) tp__sd_jw_append(w, items, j);
        }
        json_t *jself = NULL, *jval = NULL;
        if (st == TP_OK) st = enc_value(w, tp_value_at(args, 0), 1, &jself);
        if (st == TP_OK) st = enc_value(w, tp_value_at(args, 2), 1, &jval);
        if (st != TP_OK) {
            tp_error_context("node %s", tp_node_name(n));
            return st;
        }
        jargs = tp__sd_jw_take(w, json_array());
        tp__sd_jw_append(w, jargs, jself);
        tp__sd_jw_append(w, jargs, jw_obj1(w, "__tuple__", items));
        tp__sd_jw_append(w, jargs, jval);
        tp__sd_jw_set(w, obj, "args", jw_obj1(w, "__tuple__", jargs));
        tp__sd_jw_set(w, obj, "kwargs", jw_obj1(w, "__dict__", tp__sd_jw_take(w, json_array())));
        return TP_OK;
    }
    if (e->special == TP_SERDE_GETITEM) {
        st = enc_value(w, args, 0, &jargs);
        if (st == TP_OK) st = enc_value(w, kwargs, 0, &jkw);
        tp__sd_jw_set(w, obj, "args", jargs);
        tp__sd_jw_set(w, obj, "kwargs", jkw);
        return st;
    }
    const tp_schema *s = tp_op_schema(op);
    tp_value bound[64];
    st = tp_op_bind(op, args->u.seq.items, (int)args->u.seq.n, kwargs, bound);
    if (st != TP_OK) {
        tp_error_context("node %s", tp_node_name(n));
        return st;
    }
    /* say the same thing the way tensorplay understands it */
    if (op == TP_OP_VAR || op == TP_OP_STD) {
        int unb = tp__sd_schema_index(s, "unbiased"), corr = tp__sd_schema_index(s, "correction");
        if (unb >= 0 && corr >= 0 && bound[unb].kind == TP_VAL_BOOL && tp__sd_is_none(&bound[corr])) {
            bound[corr] = tp_value_int(bound[unb].u.b ? 1 : 0);
            bound[unb] = tp_value_none();
        }
    }
    if (op == TP_OP_UNIQUE_CONSECUTIVE) {
        /* tensorplay's unique_consecutive returns a tuple only when a flag is
         * set: both are, so that it returns the op's three outputs (an output
         * asked for without its flag is empty in PyTorch: nothing reads it) */
        bound[1] = tp_value_bool(true);
        bound[2] = tp_value_bool(true);
    }
    if (op == TP_OP_SUM || op == TP_OP_MEAN || op == TP_OP_PROD || op == TP_OP_VAR || op == TP_OP_STD ||
        op == TP_OP_NORM) {
        int dim = tp__sd_schema_index(s, "dim"); /* [] reduces every dim, as None does */
        if (dim >= 0 && tp_value_is_seq(&bound[dim]) && tp_value_len(&bound[dim]) == 0) tp_value_clear(&bound[dim]);
    }
    param_list pl;
    st = tp__sd_parse_params(e->params, &pl);
    json_t *pos = tp__sd_jw_take(w, json_array()), *kw = tp__sd_jw_take(w, json_array());
    bool positional = true;
    /* every argument the callee cannot take must have its default value */
    bool covered[64] = {false};
    for (int i = 0; st == TP_OK && i < pl.n; i++) {
        int idx = pl.items[i].kind == PARAM_ARG ? tp__sd_schema_index(s, pl.items[i].ours) : -1;
        if (idx >= 0) covered[idx] = true;
    }
    for (int i = 0; st == TP_OK && i < s->n_args; i++) {
        if (covered[i] || !s->args[i].has_default || tp_value_equal(&bound[i], &s->args[i].default_value)) continue;
        char text[64];
        tp_value_repr(&bound[i], text, sizeof text);
        st = tp_error(TP_ERR_UNSUPPORTED, "node %s: %s=%s cannot be expressed with %s%s%s", tp_node_name(n),
                      s->args[i].name, text, e->module ? e->module : "method ", e->module ? "." : "", e->name);
    }
    for (int i = 0; st == TP_OK && i < pl.n; i++) {
        param *q = &pl.items[i];
        if (q->kind != PARAM_ARG) {
            positional = false;
            continue;
        }
        int idx = tp__sd_schema_index(s, q->ours);
        if (idx < 0) {
            st = tp_error(TP_ERR_INTERNAL, "op map: %s.%s parameter '%s' names no argument of %s", e->module, e->name,
                          q->ours, tp_op_name(op));
            break;
        }
        const tp_value *v = &bound[idx];
        const tp_value *their_default =
            q->has_lit ? &q->lit : s->args[idx].has_default ? &s->args[idx].default_value : NULL;
        /* None for an optional argument with a default means that default */
        bool none_means_default = tp__sd_is_none(v) && s->args[idx].has_default && !tp__sd_is_none(&s->args[idx].default_value);
        if (((their_default && tp_value_equal(v, their_default)) || none_means_default) && !q->varargs) {
            positional = false;
            continue;
        }
        json_t *jv = NULL;
        if (q->scalar_if_single && tp_value_is_seq(v) && tp_value_len(v) == 1) v = tp_value_at(v, 0);
        st = enc_value(w, v, 0, &jv);
        if (st != TP_OK) {
            tp_error_context("node %s: argument '%s'", tp_node_name(n), s->args[idx].name);
            break;
        }
        if (positional && !q->kwonly) {
            tp__sd_jw_append(w, pos, jv);
        } else {
            json_t *pair = tp__sd_jw_take(w, json_array());
            tp__sd_jw_append(w, pair, tp__sd_jw_take(w, json_string(q->their)));
            tp__sd_jw_append(w, pair, jv);
            tp__sd_jw_append(w, kw, pair);
        }
    }
    tp__sd_params_clear(&pl);
    for (int i = 0; i < s->n_args; i++) tp_value_clear(&bound[i]);
    tp__sd_jw_set(w, obj, "args", jw_obj1(w, "__tuple__", pos));
    tp__sd_jw_set(w, obj, "kwargs", jw_obj1(w, "__dict__", kw));
    return st;
}

static tp_status enc_node(jwriter *w, const tp_node *n, bool meta, json_t **out) {
    json_t *obj = tp__sd_jw_take(w, json_object());
    *out = obj;
    tp_node_kind kind = tp_node_get_kind(n);
    tp_status st = TP_OK;
    if (kind == TP_NODE_CALL_FUNCTION || kind == TP_NODE_CALL_METHOD) {
        tp_op op = tp_node_op(n);
        if (op == TP_OP_INVALID)
            return tp_error(TP_ERR_UNSUPPORTED, "node %s: method '%s' names no op", tp_node_name(n), tp_node_target(n));
        st = enc_call(w, n, op, obj);
    } else {
        tp__sd_jw_set(w, obj, "op", tp__sd_jw_take(w, json_string(tp_node_kind_name(kind))));
        tp__sd_jw_set(w, obj, "target", enc_name_target(w, "name", tp_node_target(n)));
        json_t *a = NULL, *k = NULL;
        st = enc_value(w, tp_node_args(n), 0, &a);
        if (st == TP_OK) st = enc_value(w, tp_node_kwargs(n), 0, &k);
        tp__sd_jw_set(w, obj, "args", a);
        tp__sd_jw_set(w, obj, "kwargs", k);
    }
    tp__sd_jw_set(w, obj, "name", tp__sd_jw_name(w, "node name", tp_node_name(n)));
    const tp_value *val = tp_node_meta_val(n);
    if (meta && val->kind != TP_VAL_NONE) tp__sd_jw_set(w, obj, "meta", jw_obj1(w, "val", enc_meta_val(w, val, 0)));
    return st;
}

static json_t *enc_arg(jwriter *w, const tp_arg_spec *a, tp_status *st) {
    json_t *o = tp__sd_jw_take(w, json_object());
    static const char *const names[] = {"TensorArgument", "SymIntArgument", "SymFloatArgument", "SymBoolArgument",
                                        "TokenArgument",  "CustomObjArgument", "ConstantArgument"};
    tp__sd_jw_set(w, o, "t", tp__sd_jw_take(w, json_string((unsigned)a->kind < 7 ? names[a->kind] : "TensorArgument")));
    tp__sd_jw_set(w, o, "name", tp__sd_jw_name(w, "argument name", a->name ? a->name : ""));
    if (a->kind == TP_ARGK_CUSTOM_OBJ) {
        tp__sd_jw_set(w, o, "class_fqn", tp__sd_jw_name(w, "class name", a->class_fqn ? a->class_fqn : ""));
        tp__sd_jw_set(w, o, "fake_val", tp__sd_jw_take(w, json_null()));
    } else if (a->kind == TP_ARGK_CONSTANT) {
        json_t *v = NULL;
        tp_status s = enc_value(w, &a->value, 0, &v);
        if (s != TP_OK && *st == TP_OK) *st = s;
        tp__sd_jw_set(w, o, "value", v ? v : tp__sd_jw_take(w, json_null()));
    }
    return o;
}

/* tpexport's "none" specs are None leaves to tensorplay. */
static json_t *enc_treespec(jwriter *w, const tp_treespec *s, int depth) {
    if (!s) return tp__sd_jw_take(w, json_null());
    tp_tree_kind k = tp_treespec_kind(s);
    json_t *o = tp__sd_jw_take(w, json_object());
    if (depth > TP_LIMIT_DEPTH)
        tp__sd_jw_limit(w, "a tree spec nested deeper than %d exceeds the limit (TP_LIMIT_DEPTH)", TP_LIMIT_DEPTH);
    if (k == TP_TREE_LEAF || k == TP_TREE_NONE || depth > TP_LIMIT_DEPTH) {
        tp__sd_jw_set(w, o, "t", tp__sd_jw_take(w, json_string("leaf")));
        return o;
    }
    tp__sd_jw_set(w, o, "t", tp__sd_jw_take(w, json_string(tp_tree_kind_name(k))));
    if (k == TP_TREE_DICT) {
        json_t *keys = tp__sd_jw_take(w, json_array());
        for (int64_t i = 0; i < tp_treespec_num_children(s); i++) tp__sd_jw_append(w, keys, tp__sd_jw_name(w, "tree spec key", tp_treespec_key(s, i)));
        tp__sd_jw_set(w, o, "ctx", jw_obj1(w, "__tuple__", keys));
    } else {
        tp__sd_jw_set(w, o, "ctx", tp__sd_jw_take(w, json_null()));
    }
    json_t *c = tp__sd_jw_take(w, json_array());
    for (int64_t i = 0; i < tp_treespec_num_children(s); i++) tp__sd_jw_append(w, c, enc_treespec(w, tp_treespec_child(s, i), depth + 1));
    tp__sd_jw_set(w, o, "c", c);
    return o;
}

static json_t *enc_spec(jwriter *w, const char *kind, const tp_arg_spec *arg, const char *target, json_t *persistent,
                        tp_status *st) {
    json_t *o = tp__sd_jw_take(w, json_object());
    tp__sd_jw_set(w, o, "kind", tp__sd_jw_take(w, json_string(kind)));
    tp__sd_jw_set(w, o, "arg", enc_arg(w, arg, st));
    tp__sd_jw_set(w, o, "target", target ? tp__sd_jw_name(w, "target", target) : tp__sd_jw_take(w, json_null()));
    tp__sd_jw_set(w, o, "persistent", persistent);
    return o;
}

static tp_status enc_output_specs(jwriter *w, const tp_program *p, json_t *arr) {
    const tp_signature *sig = tp_program_signature(p);
    const tp_node *out = tp_graph_output_node(tp_program_graph(p));
    const tp_value **leaves = NULL;
    int64_t n = 0, cap = 0;
    tp_status st = TP_OK;
    if (out) st = tp__sd_flatten_tp_style(tp_value_at(tp_node_args(out), 0), 0, &leaves, &n, &cap);
    int64_t non_none = 0;
    for (int64_t i = 0; st == TP_OK && i < n; i++) non_none += leaves[i]->kind != TP_VAL_NONE;
    bool align = st == TP_OK && out && non_none == tp_signature_n_outputs(sig);
    int k = 0;
    int64_t n_items = align ? n : tp_signature_n_outputs(sig);
    for (int64_t i = 0; st == TP_OK && i < n_items; i++) {
        if (align && leaves[i]->kind == TP_VAL_NONE) {
            char name[48];
            snprintf(name, sizeof name, "constant_%" PRId64, i);
            tp_arg_spec a = tp_arg_constant(name, tp_value_none());
            tp__sd_jw_append(w, arr, enc_spec(w, "USER_OUTPUT", &a, NULL, tp__sd_jw_take(w, json_null()), &st));
            continue;
        }
        const tp_output_spec *s = tp_signature_output(sig, k++);
        tp__sd_jw_append(w, arr, enc_spec(w, tp_output_kind_name(s->kind), &s->arg, s->target, tp__sd_jw_take(w, json_null()), &st));
    }
    tp_free((void *)leaves);
    return st;
}

/* tensorplay's name for scale*root+offset. */
static void linear_name(const char *root, int64_t scale, int64_t offset, char *buf, size_t size) {
    size_t n;
    if (scale == 1) n = (size_t)snprintf(buf, size, "%s", root);
    else n = (size_t)snprintf(buf, size, "%" PRId64 "*%s", scale, root);
    /* the magnitude in unsigned arithmetic: -INT64_MIN does not exist */
    uint64_t magnitude = offset < 0 ? 0 - (uint64_t)offset : (uint64_t)offset;
    if (offset != 0 && n < size) snprintf(buf + n, size - n, " %c %" PRIu64, offset > 0 ? '+' : '-', magnitude);
}

static json_t *enc_bound(jwriter *w, int64_t v) {
    return v == TP_DIM_UNBOUNDED ? tp__sd_jw_take(w, json_null()) : tp__sd_jw_take(w, json_integer(v));
}

static tp_status enc_dynamic_shapes(jwriter *w, const tp_program *p, json_t **out) {
    *out = NULL;
    int n = tp_program_num_dim_rules(p);
    bool *done = tp_calloc((size_t)n + 1, sizeof *done);
    TP_CHECK(done != NULL, TP_ERR_NOMEM, "out of memory");
    /* wrapped once filled: jw_obj1 may free what it is given */
    json_t *inputs = tp__sd_jw_take(w, json_array());
    tp_status st = TP_OK;
    for (int i = 0; st == TP_OK && i < n; i++) {
        if (done[i]) continue;
        const char *input = tp_program_dim_rule(p, i)->site.input;
        if (strchr(input, '[') || strchr(input, '.')) {
            st = tp_error(TP_ERR_UNSUPPORTED, "dynamic shapes of the nested input '%s' cannot be written", input);
            break;
        }
        json_t *dims = tp__sd_jw_take(w, json_array());
        for (int d = 0; st == TP_OK && d < TP_MAX_DIMS; d++) {
            for (int k = i; st == TP_OK && k < n; k++) {
                const tp_dim_rule *r = tp_program_dim_rule(p, k);
                if (done[k] || r->site.dim != d || strcmp(r->site.input, input) != 0) continue;
                done[k] = true;
                json_t *spec = NULL;
                if (r->kind == TP_DIM_STATIC) {
                    spec = jw_obj1(w, "__static_dim__", tp__sd_jw_take(w, json_integer(r->value)));
                } else {
                    const tp_range_constraint *rc = tp_program_find_range(p, r->symbol);
                    int64_t lo = rc ? rc->min : 0, hi = rc ? rc->max : TP_DIM_UNBOUNDED;
                    json_t *o = tp__sd_jw_take(w, json_object());
                    if (r->kind == TP_DIM_SYMBOL) {
                        tp__sd_jw_set(w, o, "name", tp__sd_jw_name(w, "dim name", r->symbol));
                        tp__sd_jw_set(w, o, "min", tp__sd_jw_take(w, json_integer(lo)));
                        tp__sd_jw_set(w, o, "max", enc_bound(w, hi));
                        spec = jw_obj1(w, "__dim__", o);
                    } else {
                        int64_t dlo, dhi, root_lo, root_hi;
                        if (!tp__derived_dim_range(p, r, &dlo, &dhi, &root_lo, &root_hi)) {
                            char expr[128];
                            tp__dim_rule_expr(r, expr, sizeof expr);
                            st = tp_error(TP_ERR_UNSUPPORTED,
                                          "derived dim %s.shape[%d] = %s overflows int64 over the range of %s",
                                          input, d, expr, r->symbol);
                            json_decref(o);
                            break;
                        }
                        /* room for a root at the limit and the expression, so
                         * that the whole name is what gets checked */
                        char name[TP_LIMIT_NAME + 64];
                        tp__sd_jw_set(w, o, "root", tp__sd_jw_name(w, "dim name", r->symbol));
                        linear_name(r->symbol, r->scale, r->offset, name, sizeof name);
                        tp__sd_jw_set(w, o, "name", tp__sd_jw_name(w, "derived dim name", name));
                        tp__sd_jw_set(w, o, "scale", tp__sd_jw_take(w, json_integer(r->scale)));
                        tp__sd_jw_set(w, o, "offset", tp__sd_jw_take(w, json_integer(r->offset)));
                        tp__sd_jw_set(w, o, "min", tp__sd_jw_take(w, json_integer(dlo)));
                        tp__sd_jw_set(w, o, "max", enc_bound(w, dhi));
                        spec = jw_obj1(w, "__derived_dim__", o);
                    }
                }
                json_t *pair = tp__sd_jw_take(w, json_array());
                tp__sd_jw_append(w, pair, tp__sd_jw_take(w, json_integer(d)));
                tp__sd_jw_append(w, pair, spec);
                tp__sd_jw_append(w, dims, pair);
            }
        }
        if (st != TP_OK) {
            json_decref(dims);
            break;
        }
        json_t *pair = tp__sd_jw_take(w, json_array());
        tp__sd_jw_append(w, pair, tp__sd_jw_name(w, "input name", input));
        tp__sd_jw_append(w, pair, jw_obj1(w, "__map__", dims));
        tp__sd_jw_append(w, inputs, pair);
    }
    tp_free(done);
    *out = jw_obj1(w, "__map__", inputs);
    return st;
}

static json_t *enc_call_signature(jwriter *w, const tp_module_call_signature *s, tp_status *st) {
    if (!s) return tp__sd_jw_take(w, json_null());
    json_t *o = tp__sd_jw_take(w, json_object()), *ins = tp__sd_jw_take(w, json_array()), *outs = tp__sd_jw_take(w, json_array());
    for (int i = 0; i < s->n_inputs; i++) tp__sd_jw_append(w, ins, enc_arg(w, &s->inputs[i], st));
    for (int i = 0; i < s->n_outputs; i++) tp__sd_jw_append(w, outs, enc_arg(w, &s->outputs[i], st));
    tp__sd_jw_set(w, o, "inputs", ins);
    tp__sd_jw_set(w, o, "outputs", outs);
    tp__sd_jw_set(w, o, "in_spec", enc_treespec(w, s->in_spec, 0));
    tp__sd_jw_set(w, o, "out_spec", enc_treespec(w, s->out_spec, 0));
    if (s->forward_arg_names) {
        json_t *names = tp__sd_jw_take(w, json_array());
        for (int i = 0; i < s->n_forward_arg_names; i++) tp__sd_jw_append(w, names, tp__sd_jw_name(w, "argument name", s->forward_arg_names[i]));
        tp__sd_jw_set(w, o, "forward_arg_names", names);
    } else {
        tp__sd_jw_set(w, o, "forward_arg_names", tp__sd_jw_take(w, json_null()));
    }
    return o;
}

tp_status tp__serde_program_to_json(const tp_program *p, const tp_serde_write_options *opts, char **json, size_t *len) {
    TP_CHECK(p && json, TP_ERR_INVALID_ARG, "program or output is NULL");
    *json = NULL;
    if (len) *len = 0;
    TP_TRY(tp_ops_init());
    int64_t n_nodes = tp_graph_num_nodes(tp_program_graph(p));
    TP_CHECK(n_nodes <= TP_LIMIT_NODES, TP_ERR_UNSUPPORTED,
             "a graph of %" PRId64 " nodes exceeds the limit of %d (TP_LIMIT_NODES)", n_nodes, TP_LIMIT_NODES);
    bool meta = !(opts && opts->no_meta);
    jwriter w = tp__sd_jw_start();
    json_t *doc = tp__sd_jw_take(&w, json_object());
    tp_status st = TP_OK;
    tp__sd_jw_set(&w, doc, "schema_version", tp__sd_jw_take(&w, json_integer(1)));
    tp__sd_jw_set(&w, doc, "dialect", tp__sd_jw_take(&w, json_string("STABLE")));
    /* get_attr nodes are written lifted, as placeholders with
     * CONSTANT_TENSOR specs: tensorplay's loader does not give get_attr
     * targets their values */
    json_t *nodes = tp__sd_jw_take(&w, json_array()), *lifted_specs = tp__sd_jw_take(&w, json_array());
    bool lifted = false;
    for (tp_node *n = tp_graph_first_node(tp_program_graph(p)); n && st == TP_OK; n = tp_node_next(n)) {
        tp_node_kind kind = tp_node_get_kind(n);
        if (!lifted && kind != TP_NODE_PLACEHOLDER) {
            lifted = true;
            for (tp_node *g = n; g && st == TP_OK; g = tp_node_next(g)) {
                if (tp_node_get_kind(g) != TP_NODE_GET_ATTR) continue;
                json_t *jn = tp__sd_jw_take(&w, json_object());
                tp__sd_jw_set(&w, jn, "op", tp__sd_jw_take(&w, json_string("placeholder")));
                tp__sd_jw_set(&w, jn, "target", enc_name_target(&w, "name", tp_node_name(g)));
                tp__sd_jw_set(&w, jn, "args", jw_obj1(&w, "__tuple__", tp__sd_jw_take(&w, json_array())));
                tp__sd_jw_set(&w, jn, "kwargs", jw_obj1(&w, "__dict__", tp__sd_jw_take(&w, json_array())));
                tp__sd_jw_set(&w, jn, "name", tp__sd_jw_name(&w, "node name", tp_node_name(g)));
                const tp_value *val = tp_node_meta_val(g);
                if (meta && val->kind != TP_VAL_NONE) tp__sd_jw_set(&w, jn, "meta", jw_obj1(&w, "val", enc_meta_val(&w, val, 0)));
                tp__sd_jw_append(&w, nodes, jn);
                tp_arg_spec a = tp_arg_tensor(tp_node_name(g));
                tp__sd_jw_append(&w, lifted_specs, enc_spec(&w, "CONSTANT_TENSOR", &a, tp_node_target(g), tp__sd_jw_take(&w, json_null()), &st));
            }
        }
        if (kind == TP_NODE_GET_ATTR) continue;
        if (kind == TP_NODE_OUTPUT) enc_dim_asserts(&w, p, nodes);
        json_t *jn = NULL;
        st = enc_node(&w, n, meta, &jn);
        tp__sd_jw_append(&w, nodes, jn);
    }
    tp__sd_jw_set(&w, doc, "graph", jw_obj1(&w, "nodes", nodes));

    const tp_signature *sig = tp_program_signature(p);
    json_t *jsig = tp__sd_jw_take(&w, json_object()), *ins = tp__sd_jw_take(&w, json_array()), *outs = tp__sd_jw_take(&w, json_array());
    for (int i = 0; i < tp_signature_n_inputs(sig); i++) {
        const tp_input_spec *s = tp_signature_input(sig, i);
        json_t *pers = s->kind == TP_INPUT_BUFFER && s->persistent != TP_PERSISTENT_UNSET
                           ? tp__sd_jw_take(&w, json_boolean(s->persistent == TP_PERSISTENT_YES))
                           : tp__sd_jw_take(&w, json_null());
        tp__sd_jw_append(&w, ins, enc_spec(&w, tp_input_kind_name(s->kind), &s->arg, s->target, pers, &st));
    }
    for (size_t i = 0; i < json_array_size(lifted_specs); i++) tp__sd_jw_append(&w, ins, json_incref(json_array_get(lifted_specs, i)));
    json_decref(lifted_specs);
    if (st == TP_OK) st = enc_output_specs(&w, p, outs);
    tp__sd_jw_set(&w, jsig, "input_specs", ins);
    tp__sd_jw_set(&w, jsig, "output_specs", outs);
    tp__sd_jw_set(&w, doc, "signature", jsig);

    json_t *mcg = tp__sd_jw_take(&w, json_array());
    for (int i = 0; i < tp_program_num_module_calls(p); i++) {
        tp_module_call_entry e = tp_program_module_call(p, i);
        json_t *o = tp__sd_jw_take(&w, json_object());
        tp__sd_jw_set(&w, o, "fqn", tp__sd_jw_name(&w, "module path", e.fqn ? e.fqn : ""));
        tp__sd_jw_set(&w, o, "signature", enc_call_signature(&w, e.signature, &st));
        tp__sd_jw_append(&w, mcg, o);
    }
    tp__sd_jw_set(&w, doc, "module_call_graph", mcg);

    json_t *ranges = tp__sd_jw_take(&w, json_object());
    for (int i = 0; i < tp_program_num_ranges(p); i++) {
        const tp_range_constraint *rc = tp_program_range(p, i);
        json_t *o = tp__sd_jw_take(&w, json_object());
        tp__sd_jw_set(&w, o, "min", tp__sd_jw_take(&w, json_integer(rc->min)));
        tp__sd_jw_set(&w, o, "max", enc_bound(&w, rc->max));
        tp__sd_jw_check_name(&w, "dim name", rc->name);
        tp__sd_jw_set(&w, ranges, rc->name, o);
    }
    tp__sd_jw_set(&w, doc, "range_constraints", ranges);
    json_t *eqs = tp__sd_jw_take(&w, json_array());
    for (int i = 0; i < tp_program_num_equalities(p); i++) {
        const tp_equality_constraint *ec = tp_program_equality(p, i);
        json_t *o = tp__sd_jw_take(&w, json_object()), *sites = tp__sd_jw_take(&w, json_array());
        for (int k = 0; k < ec->n_sites; k++) {
            json_t *site = tp__sd_jw_take(&w, json_array());
            tp__sd_jw_append(&w, site, tp__sd_jw_name(&w, "input name", ec->sites[k].input));
            tp__sd_jw_append(&w, site, tp__sd_jw_take(&w, json_integer(ec->sites[k].dim)));
            tp__sd_jw_append(&w, sites, site);
        }
        tp__sd_jw_set(&w, o, "sites", sites);
        tp__sd_jw_set(&w, o, "name", ec->name ? tp__sd_jw_name(&w, "dim name", ec->name) : tp__sd_jw_take(&w, json_null()));
        tp__sd_jw_append(&w, eqs, o);
    }
    tp__sd_jw_set(&w, doc, "equality_constraints", eqs);
    json_t *ds = NULL;
    if (st == TP_OK) st = enc_dynamic_shapes(&w, p, &ds);
    tp__sd_jw_set(&w, doc, "dynamic_shapes", ds ? ds : tp__sd_jw_take(&w, json_null()));
    json_t *jmeta = tp__sd_jw_take(&w, json_object());
    tp__sd_jw_set(&w, jmeta, "num_mutations", tp__sd_jw_take(&w, json_integer(tp_program_num_mutations(p))));
    tp__sd_jw_set(&w, jmeta, "in_spec", enc_treespec(&w, tp_program_in_spec(p), 0));
    tp__sd_jw_set(&w, jmeta, "out_spec", enc_treespec(&w, tp_program_out_spec(p), 0));
    tp__sd_jw_set(&w, doc, "meta", jmeta);
    tp__sd_jw_set(&w, doc, "opset_version", tp__sd_jw_take(&w, json_object()));
    if (st != TP_OK) {
        json_decref(doc);
        tp_free(w.nonfinite);
        return st;
    }
    return tp__sd_jw_finish(&w, doc, json, len);
}
