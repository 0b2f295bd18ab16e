/*
 * serde_read.c - reading a tensorplay program document into a tp_program:
 * problems (verify mode collects them), argument values, the op map's
 * parameter notation, nodes, argument and tree specs, the signature, the
 * module call graph, constraints and dynamic shapes, and the document as a
 * whole.
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

#define MAX_STORED_PROBLEMS 1000

/* ======================================================================
 * problems
 * ====================================================================== */

void tp__serde_problems_free(tp_serde_problems *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) tp_free(p->items[i].message);
    tp_free(p->items);
    p->items = NULL;
    p->n = 0;
}

/* Record the current error message as a problem. Returns st. */
tp_status tp__sd_note(reader *r, tp_status st) {
    if (st == TP_OK) return st;
    r->n_problems++;
    if (r->first == TP_OK) r->first = st;
    if (r->problems && r->problems->n < MAX_STORED_PROBLEMS && st != TP_ERR_NOMEM) {
        tp_serde_problem *items = tp_realloc(r->problems->items, (size_t)(r->problems->n + 1) * sizeof *items);
        char *msg = tp_strdup(tp_last_error());
        if (!items || !msg) {
            if (items) r->problems->items = items;
            tp_free(msg);
            return tp_error(TP_ERR_NOMEM, "out of memory recording a problem");
        }
        r->problems->items = items;
        items[r->problems->n].status = st;
        items[r->problems->n].message = msg;
        r->problems->n++;
    }
    return st;
}

tp_status tp__sd_report(reader *r, tp_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tp_verror(st, fmt, ap);
    va_end(ap);
    return tp__sd_note(r, st);
}

/* In verify mode, keep reading after a problem (unless memory ran out). */
static bool keep_going(const reader *r, tp_status st) { return r->problems != NULL && st != TP_ERR_NOMEM; }

/* Python-identifier-like names: [A-Za-z_][A-Za-z0-9_]*, bounded. */
static bool valid_identifier(const char *s, size_t max_name) {
    if (!s || !*s || strlen(s) > max_name) return false;
    if (!(isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
    for (const char *p = s; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_')) return false;
    return true;
}

/* A dotted attribute path: identifiers (or digits, as in "layers.0.weight")
 * separated by single dots. */
bool tp__sd_valid_target(const char *s, size_t max_name) {
    if (!s || !*s || strlen(s) > max_name) return false;
    bool start = true;
    for (const char *p = s; *p; p++) {
        if (*p == '.') {
            if (start) return false;
            start = true;
            continue;
        }
        if (!(isalnum((unsigned char)*p) || *p == '_')) return false;
        start = false;
    }
    return !start;
}

/* Check an object's keys: every key in `required` must be present, every
 * key must be in `required` or `optional` (NULL-terminated lists). */
static tp_status check_fields(reader *r, const json_t *obj, const char *path, const char *const *required,
                              const char *const *optional) {
    if (!json_is_object(obj)) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected an object, got %s", path, tp__sd_json_kind(obj));
    for (const char *const *k = required; k && *k; k++)
        if (!json_object_get(obj, *k)) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: missing field '%s'", path, *k);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        bool known = false;
        for (const char *const *k = required; k && *k && !known; k++) known = strcmp(*k, key) == 0;
        for (const char *const *k = optional; k && *k && !known; k++) known = strcmp(*k, key) == 0;
        if (!known) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: unknown field '%.64s'", path, key);
    }
    return TP_OK;
}

static tp_status get_string(reader *r, const json_t *obj, const char *key, const char *path, bool nullable,
                            const char **out) {
    const json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || (nullable && json_is_null(v))) return TP_OK;
    if (!json_is_string(v))
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s.%s: expected a string%s, got %s", path, key, nullable ? " or null" : "",
                      tp__sd_json_kind(v));
    const char *s = json_string_value(v);
    if (strlen(s) > r->lim.name)
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s.%s: string of %zu bytes exceeds the limit of %zu (max_name_bytes)", path, key, strlen(s), r->lim.name);
    *out = s;
    return TP_OK;
}

static tp_status get_array(reader *r, const json_t *obj, const char *key, const char *path, const json_t **out) {
    const json_t *v = json_object_get(obj, key);
    *out = v;
    if (!json_is_array(v)) return tp__sd_report(r, TP_ERR_CORRUPT, "%s.%s: expected an array, got %s", path, key, v ? tp__sd_json_kind(v) : "nothing");
    if (json_array_size(v) > r->lim.items)
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s.%s: %zu entries exceed the limit of %zu (max_items)", path, key, json_array_size(v),
                      r->lim.items);
    return TP_OK;
}

/* ======================================================================
 * document nodes and argument values
 * ====================================================================== */

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Position of the document node called `name`, or -1. */
int tp__sd_find_doc_node(const reader *r, const char *name) {
    if (!r->index_cap) return -1;
    size_t mask = r->index_cap - 1;
    for (size_t i = hash_name(name) & mask;; i = (i + 1) & mask) {
        size_t v = r->index[i];
        if (!v) return -1;
        if (strcmp(r->nodes[v - 1].name, name) == 0) return (int)(v - 1);
    }
}

/* Add node position pos to the index; false if the name is taken. */
static bool index_doc_node(reader *r, int pos) {
    size_t mask = r->index_cap - 1;
    for (size_t i = hash_name(r->nodes[pos].name) & mask;; i = (i + 1) & mask) {
        size_t v = r->index[i];
        if (!v) {
            r->index[i] = (size_t)pos + 1;
            return true;
        }
        if (strcmp(r->nodes[v - 1].name, r->nodes[pos].name) == 0) return false;
    }
}

/* A name for a helper node (an intermediate of tensor indexing, the op
 * before a copy_): "<base>_<tag>", made unique against the graph and every
 * name of the document. *out is tp_malloc'd. */
tp_status tp__sd_fresh_name(reader *r, const char *base, const char *tag, char **out) {
    size_t n = strlen(base) + strlen(tag) + 32;
    char *name = tp_malloc(n);
    TP_CHECK(name != NULL, TP_ERR_NOMEM, "out of memory naming a node");
    for (int k = 0;; k++) {
        if (k == 0) snprintf(name, n, "%s_%s", base, tag);
        else snprintf(name, n, "%s_%s_%d", base, tag, k);
        if (tp__sd_find_doc_node(r, name) < 0 && !tp_graph_find_node(r->graph, name)) break;
    }
    *out = name;
    return TP_OK;
}

static tp_status decode_seq(vctx *c, const json_t *arr, const char *path, int depth, bool tuple, tp_value *out) {
    if (!json_is_array(arr)) return tp__sd_report(c->r, TP_ERR_CORRUPT, "%s: expected an array, got %s", path, tp__sd_json_kind(arr));
    size_t n = json_array_size(arr);
    if (n > c->r->lim.items)
        return tp__sd_report(c->r, TP_ERR_CORRUPT, "%s: %zu items exceed the limit of %zu (max_items)", path, n, c->r->lim.items);
    tp_status st = tuple ? tp_value_tuple((int64_t)n, out) : tp_value_list((int64_t)n, out);
    if (st != TP_OK) return tp__sd_note(c->r, st);
    for (size_t i = 0; i < n; i++) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        tp_value item;
        st = tp__sd_decode_value(c, json_array_get(arr, i), sub, depth + 1, &item);
        if (st == TP_OK && (st = tp_value_seq_set(out, (int64_t)i, &item)) != TP_OK) tp__sd_note(c->r, st);
        if (st != TP_OK) {
            tp_value_clear(out);
            return st;
        }
    }
    return TP_OK;
}

static tp_status decode_node_ref(vctx *c, const json_t *v, const char *path, tp_value *out) {
    reader *r = c->r;
    if (!json_is_string(v))
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected a node name, got %s", path, tp__sd_json_kind(v));
    const char *name = json_string_value(v);
    int pos = tp__sd_find_doc_node(r, name);
    if (pos < 0) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: refers to undefined node '%.64s'", path, name);
    if (pos >= r->current)
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s: refers to node '%.64s', which is defined later", path, name);
    doc_node *d = &r->nodes[pos];
    switch (d->state) {
    case DOC_NODE: *out = tp_value_node(d->node); return TP_OK;
    case DOC_FOLDED: return tp__sd_note(r, tp_value_copy(&d->folded, out));
    case DOC_DROPPED:
        return tp__sd_report(r, TP_ERR_UNSUPPORTED, "%s: uses the result of the runtime assertion '%.64s'", path, name);
    case DOC_SYMSIZE: {
        /* first use of x.size(d) with d dynamic: a sym_size node */
        tp_node *n = NULL;
        tp_status st = tp__sd_add_call_values(r, d->name, TP_OP_SYM_SIZE,
                                       (tp_value[]){tp_value_node(d->node), tp_value_int(d->sym_dim)}, 2, &n);
        if (st != TP_OK) return st;
        d->state = DOC_NODE;
        d->node = n;
        *out = tp_value_node(n);
        return TP_OK;
    }
    case DOC_SYMSHAPE:
        return tp__sd_report(r, TP_ERR_UNSUPPORTED,
                      "node %s: uses '%.64s', a size of a tensor in a program with dynamic dims; symbolic sizes are not "
                      "supported (%s)",
                      c->node, name, path);
    case DOC_BROKEN:
    case DOC_PENDING:
        break;
    }
    c->broken_ref = true;
    return TP_ERR_VERIFY; /* quiet: the referenced node's problem is already reported */
}

static tp_status add_fetched(reader *r, const char *target, tp_state_kind kind, bool persistent, tp_tensor *t);

/* A tensor pickled inside node arguments (x * tensor([1, 2])) becomes a
 * lifted constant, as tensorplay lifts module constants: a placeholder
 * "c_tensor_constant<k>" after the other placeholders with a
 * CONSTANT_TENSOR input spec (last, in the same order) for target
 * "_tensor_constant<k>". *v (the tensor) is replaced by a reference to the
 * placeholder. */
tp_status tp__sd_lift_constant(vctx *c, tp_value *v) {
    reader *r = c->r;
    char target[48], name[48];
    for (int k = 0;; k++) {
        snprintf(target, sizeof target, "_tensor_constant%d", k);
        snprintf(name, sizeof name, "c_tensor_constant%d", k);
        if (tp__sd_find_doc_node(r, name) < 0 && !tp_graph_find_node(r->graph, name) &&
            tp_signature_find_input(r->sig, name) < 0) {
            bool taken = false;
            for (int i = 0; i < r->n_fetched && !taken; i++) taken = strcmp(r->fetched[i].target, target) == 0;
            if (!taken) break;
        }
    }
    tp_tensor *t = v->u.tensor;
    /* after the last placeholder: specs follow placeholder order */
    tp_node *n = NULL, *point = tp_graph_insert_point(r->graph), *after = NULL;
    for (tp_node *q = tp_graph_first_node(r->graph); q; q = tp_node_next(q))
        if (tp_node_get_kind(q) == TP_NODE_PLACEHOLDER) after = q;
    tp_status st = after ? tp_graph_insert_after(r->graph, after)
                         : tp_graph_set_insert_point(r->graph, tp_graph_first_node(r->graph));
    if (st == TP_OK) st = tp__graph_create_node_named(r->graph, TP_NODE_PLACEHOLDER, name, NULL, NULL, name, &n);
    tp_graph_set_insert_point(r->graph, point);
    if (st == TP_OK) st = tp_node_set_meta_val(n, v);
    if (st == TP_OK)
        st = tp_signature_add_input(r->sig, TP_INPUT_CONSTANT_TENSOR, tp_arg_tensor(name), target, TP_PERSISTENT_UNSET);
    if (st == TP_OK) st = add_fetched(r, target, TP_STATE_CONSTANT, true, tp_tensor_retain(t));
    tp_value_clear(v);
    if (st != TP_OK) return tp__sd_note(r, st);
    *v = tp_value_node(n);
    return TP_OK;
}

/* Decode a __pickle__ payload. ellipsis NULL: Ellipsis not allowed. */
tp_status tp__sd_decode_pickle(vctx *c, const json_t *v, const char *path, tp_value *out, bool *ellipsis) {
    reader *r = c->r;
    if (!json_is_string(v)) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected base64 text, got %s", path, tp__sd_json_kind(v));
    unsigned char *bytes;
    size_t n = 0;
    tp_status bst = tp__sd_b64_decode(json_string_value(v), &bytes, &n);
    if (bst == TP_ERR_NOMEM) return tp__sd_note(r, bst);
    if (bst != TP_OK) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: invalid base64 in a pickled value", path);
    tp_status st = tp__sd_pickle_read(bytes, n, &c->r->lim, out, ellipsis);
    tp_free(bytes);
    if (st == TP_OK && out->kind == TP_VAL_TENSOR) return tp__sd_lift_constant(c, out);
    if (st == TP_ERR_NOMEM) return tp__sd_note(r, st);
    if (st != TP_OK)
        return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: pickled value cannot be read safely (%s: %s)", c->node, path,
                      tp_last_error());
    return TP_OK;
}

tp_status tp__sd_decode_value(vctx *c, const json_t *j, const char *path, int depth, tp_value *out) {
    reader *r = c->r;
    *out = tp_value_none();
    if ((size_t)depth > r->lim.depth)
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s: values nested deeper than %zu (max_depth)", path, r->lim.depth);
    switch (json_typeof(j)) {
    case JSON_NULL: return TP_OK;
    case JSON_TRUE: *out = tp_value_bool(true); return TP_OK;
    case JSON_FALSE: *out = tp_value_bool(false); return TP_OK;
    case JSON_INTEGER: *out = tp_value_int(json_integer_value(j)); return TP_OK;
    case JSON_REAL: *out = tp_value_float(json_real_value(j)); return TP_OK;
    case JSON_STRING:
        if (json_string_length(j) > r->lim.items)
            return tp__sd_report(r, TP_ERR_CORRUPT, "%s: a string of %zu bytes exceeds the limit of %zu (max_items)", path,
                          json_string_length(j), r->lim.items);
        return tp__sd_note(r, tp_value_str(json_string_value(j), out));
    case JSON_ARRAY:
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected a value encoding, got a bare array", path);
    case JSON_OBJECT: break;
    }
    if (json_object_size(j) != 1)
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected a value encoding with one key, got an object of %zu keys", path,
                      json_object_size(j));
    const char *key = json_object_iter_key(json_object_iter((json_t *)j));
    const json_t *v = json_object_iter_value(json_object_iter((json_t *)j));
    if (strcmp(key, "__node__") == 0) return decode_node_ref(c, v, path, out);
    if (strcmp(key, "__tuple__") == 0) return decode_seq(c, v, path, depth, true, out);
    if (strcmp(key, "__list__") == 0) return decode_seq(c, v, path, depth, false, out);
    if (strcmp(key, "__dict__") == 0) {
        if (!json_is_array(v)) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: __dict__ needs an array of pairs, got %s", path, tp__sd_json_kind(v));
        if (json_array_size(v) > r->lim.items)
            return tp__sd_report(r, TP_ERR_CORRUPT, "%s: %zu items exceed the limit of %zu (max_items)", path, json_array_size(v),
                          r->lim.items);
        tp_status st = tp_value_dict(out);
        if (st != TP_OK) return tp__sd_note(r, st);
        for (size_t i = 0; i < json_array_size(v); i++) {
            const json_t *pair = json_array_get(v, i);
            char sub[512];
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            if (!json_is_array(pair) || json_array_size(pair) != 2) {
                st = tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected a [key, value] pair", sub);
            } else if (!json_is_string(json_array_get(pair, 0))) {
                st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "%s: dict keys must be strings, got %s", sub,
                            tp__sd_json_kind(json_array_get(pair, 0)));
            } else if (tp_value_dict_get(out, json_string_value(json_array_get(pair, 0)))) {
                st = tp__sd_report(r, TP_ERR_CORRUPT, "%s: duplicate dict key '%.64s'", sub,
                            json_string_value(json_array_get(pair, 0)));
            } else {
                tp_value item;
                char vsub[520];
                snprintf(vsub, sizeof vsub, "%s[1]", sub);
                st = tp__sd_decode_value(c, json_array_get(pair, 1), vsub, depth + 1, &item);
                if (st == TP_OK && (st = tp_value_dict_set(out, json_string_value(json_array_get(pair, 0)), &item)) != TP_OK)
                    tp__sd_note(r, st);
            }
            if (st != TP_OK) {
                tp_value_clear(out);
                return st;
            }
        }
        return TP_OK;
    }
    if (strcmp(key, "__slice__") == 0)
        return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: a slice is only supported as a tensor index (%s)", c->node, path);
    if (strcmp(key, "__pickle__") == 0) return tp__sd_decode_pickle(c, v, path, out, NULL);
    if (strcmp(key, "__float__") == 0 && json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcmp(s, "nan") == 0) *out = tp_value_float(NAN);
        else if (strcmp(s, "inf") == 0) *out = tp_value_float(INFINITY);
        else if (strcmp(s, "-inf") == 0) *out = tp_value_float(-INFINITY);
        else return tp__sd_report(r, TP_ERR_CORRUPT, "%s: unknown float '%.16s'", path, s);
        return TP_OK;
    }
    return tp__sd_report(r, TP_ERR_CORRUPT, "%s: unknown value encoding '%.64s'", path, key);
}

/* args must be {"__tuple__": [...]}, kwargs {"__dict__": [...]}. */
static tp_status decode_args(vctx *c, const json_t *node, const char *path, tp_value *args, tp_value *kwargs) {
    reader *r = c->r;
    *args = tp_value_none();
    *kwargs = tp_value_none();
    char sub[512];
    const json_t *a = json_object_get(node, "args"), *k = json_object_get(node, "kwargs");
    snprintf(sub, sizeof sub, "%s.args", path);
    if (!json_is_object(a) || !json_object_get(a, "__tuple__") || json_object_size(a) != 1)
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected a {\"__tuple__\": [...]} of arguments", sub);
    TP_TRY(decode_seq(c, json_object_get(a, "__tuple__"), sub, 0, true, args));
    snprintf(sub, sizeof sub, "%s.kwargs", path);
    if (!json_is_object(k) || !json_object_get(k, "__dict__") || json_object_size(k) != 1) {
        tp_value_clear(args);
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected a {\"__dict__\": [...]} of keyword arguments", sub);
    }
    tp_status st = tp__sd_decode_value(c, k, sub, 0, kwargs);
    if (st != TP_OK) tp_value_clear(args);
    return st;
}

/* ======================================================================
 * the op map's parameter notation (serde.h)
 * ====================================================================== */

void tp__sd_params_clear(param_list *pl) {
    for (int i = 0; i < pl->n; i++) tp_value_clear(&pl->items[i].lit);
    pl->n = 0;
}

/* LIT: None, True, False, a number, 'text', dtype:NAME. */
static tp_status parse_literal(const char *s, size_t n, tp_value *out) {
    char buf[64];
    TP_CHECK(n < sizeof buf, TP_ERR_INTERNAL, "op map literal too long");
    memcpy(buf, s, n);
    buf[n] = '\0';
    *out = tp_value_none();
    if (strcmp(buf, "None") == 0) return TP_OK;
    if (strcmp(buf, "True") == 0 || strcmp(buf, "False") == 0) {
        *out = tp_value_bool(buf[0] == 'T');
        return TP_OK;
    }
    if (strncmp(buf, "dtype:", 6) == 0) {
        tp_dtype d;
        TP_TRY(tp_dtype_from_name(buf + 6, &d));
        *out = tp_value_dtype(d);
        return TP_OK;
    }
    if (buf[0] == '\'' && n >= 2 && buf[n - 1] == '\'') {
        buf[n - 1] = '\0';
        return tp_value_str(buf + 1, out);
    }
    char *end;
    if (strpbrk(buf, ".eE")) {
        double d = strtod(buf, &end);
        TP_CHECK(*end == '\0', TP_ERR_INTERNAL, "op map: bad literal '%s'", buf);
        *out = tp_value_float(d);
    } else {
        long long v = strtoll(buf, &end, 10);
        TP_CHECK(*end == '\0', TP_ERR_INTERNAL, "op map: bad literal '%s'", buf);
        *out = tp_value_int(v);
    }
    return TP_OK;
}

tp_status tp__sd_parse_params(const char *spec, param_list *pl) {
    pl->n = 0;
    bool kwonly = false;
    const char *p = spec ? spec : "";
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 1 && *p == '*') {
            kwonly = true;
        } else {
            if (pl->n == MAX_PARAMS) {
                tp__sd_params_clear(pl);
                return tp_error(TP_ERR_INTERNAL, "op map: too many parameters in '%s'", spec);
            }
            param *q = &pl->items[pl->n++];
            *q = (param){.kind = PARAM_ARG, .kwonly = kwonly, .lit = tp_value_none()};
            const char *s = p, *e = p + len;
            if (*s == '*') {
                q->varargs = true;
                s++;
            }
            const char *eq = memchr(s, '=', (size_t)(e - s));
            const char *colon = memchr(s, ':', (size_t)((eq ? eq : e) - s));
            const char *name_end = colon ? colon : eq ? eq : e;
            if ((size_t)(name_end - s) >= sizeof q->their) {
                tp__sd_params_clear(pl);
                return tp_error(TP_ERR_INTERNAL, "op map: parameter name too long in '%s'", spec);
            }
            memcpy(q->their, s, (size_t)(name_end - s));
            q->their[name_end - s] = '\0';
            size_t tl = strlen(q->their);
            if (tl > 0 && q->their[tl - 1] == '^') {
                q->their[tl - 1] = '\0';
                q->scalar_if_single = true;
            }
            memcpy(q->ours, q->their, sizeof q->ours);
            if (colon) {
                const char *t = colon + 1, *t_end = eq && eq > colon ? eq : e;
                if (t_end - t == 1 && *t == '-') q->kind = PARAM_IGNORE;
                else if (t_end - t == 1 && *t == '!') q->kind = PARAM_MUST;
                else if (t_end - t == 1 && *t == '@') q->kind = PARAM_INPLACE;
                else if ((size_t)(t_end - t) < sizeof q->ours) {
                    memcpy(q->ours, t, (size_t)(t_end - t));
                    q->ours[t_end - t] = '\0';
                }
            }
            if (eq) {
                tp_status st = parse_literal(eq + 1, (size_t)(e - eq - 1), &q->lit);
                if (st != TP_OK) {
                    tp__sd_params_clear(pl);
                    return st;
                }
                q->has_lit = true;
            }
        }
        p += len;
        if (*p == ',') p++;
    }
    return TP_OK;
}

/* Index of the schema argument a parameter maps to, or -1. "input", "self"
 * and "a" fall back to the schema's first argument. */
int tp__sd_schema_index(const tp_schema *s, const char *ours) {
    for (int i = 0; i < s->n_args; i++)
        if (strcmp(s->args[i].name, ours) == 0) return i;
    if (s->n_args > 0 && (strcmp(ours, "input") == 0 || strcmp(ours, "self") == 0 || strcmp(ours, "a") == 0))
        return 0;
    return -1;
}

static void callee_name(const tp_serde_op_entry *e, char *buf, size_t size) {
    if (e->module) snprintf(buf, size, "%s.%s", e->module, e->name);
    else snprintf(buf, size, "method '%s'", e->name);
}

bool tp__sd_is_none(const tp_value *v) { return v->kind == TP_VAL_NONE; }

/* Map a call of entry e (positional args tuple, kwargs dict) onto the op's
 * schema: *ours gets one value per schema argument given (NULL slots stay
 * None and `given` false). *inplace reports an in-place flag set. */
typedef struct mapped {
    tp_value values[64];
    bool given[64];
    int n;
} mapped;

static void mapped_clear(mapped *m) {
    for (int i = 0; i < m->n; i++) tp_value_clear(&m->values[i]);
    m->n = 0;
}

static tp_status map_call(reader *r, const char *node, const tp_serde_op_entry *e, tp_op op, const tp_value *args,
                          const tp_value *kwargs, mapped *m, bool *inplace) {
    char callee[160];
    callee_name(e, callee, sizeof callee);
    *inplace = false;
    const tp_schema *s = tp_op_schema(op);
    if (!s) return tp__sd_report(r, TP_ERR_INTERNAL, "node %s: op %s has no schema", node, tp_op_name(op));
    m->n = s->n_args;
    for (int i = 0; i < m->n; i++) {
        m->values[i] = tp_value_none();
        m->given[i] = false;
    }
    param_list pl;
    tp_status st = tp__sd_parse_params(e->params, &pl);
    if (st != TP_OK) return tp__sd_note(r, st);
    /* which value each parameter received */
    const tp_value *got[MAX_PARAMS] = {0};
    tp_value packed[MAX_PARAMS];
    bool has_packed[MAX_PARAMS] = {false};
    int64_t n_pos = tp_value_len(args), next = 0;
    for (int i = 0; i < pl.n && next < n_pos; i++) {
        param *q = &pl.items[i];
        if (q->kwonly) break;
        if (q->varargs) {
            int64_t rest = n_pos - next;
            const tp_value *first = tp_value_at(args, next);
            if (rest == 1 && tp_value_is_seq(first)) {
                got[i] = first;
            } else {
                packed[i] = tp_value_none();
                st = tp_value_list(rest, &packed[i]);
                if (st == TP_OK) has_packed[i] = true;
                for (int64_t k = 0; st == TP_OK && k < rest; k++) {
                    tp_value c;
                    st = tp_value_copy(tp_value_at(args, next + k), &c);
                    if (st == TP_OK) st = tp_value_seq_set(&packed[i], k, &c);
                }
                if (st != TP_OK) goto done_note;
                got[i] = &packed[i];
            }
            next = n_pos;
            break;
        }
        got[i] = tp_value_at(args, next++);
    }
    if (next < n_pos) {
        st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: %s takes at most %" PRId64 " positional arguments, got %" PRId64, node,
                    callee, next, n_pos);
        goto done;
    }
    for (int64_t k = 0; k < tp_value_len(kwargs); k++) {
        const char *key = kwargs->u.seq.keys[k];
        int found = -1;
        for (int i = 0; i < pl.n && found < 0; i++)
            if (strcmp(pl.items[i].their, key) == 0) found = i;
        if (found < 0) {
            st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: %s has no supported argument '%.64s'", node, callee, key);
            goto done;
        }
        if (got[found]) {
            st = tp__sd_report(r, TP_ERR_CORRUPT, "node %s: %s got argument '%.64s' twice", node, callee, key);
            goto done;
        }
        got[found] = &kwargs->u.seq.items[k];
    }
    for (int i = 0; i < pl.n; i++) {
        param *q = &pl.items[i];
        const tp_value *v = got[i];
        if (q->kind == PARAM_IGNORE) continue;
        if (q->kind == PARAM_MUST) {
            if (v && !tp__sd_is_none(v) && !tp_value_equal(v, &q->lit)) {
                char text[64];
                tp_value_repr(v, text, sizeof text);
                st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: %s with %s=%s is not supported", node, callee, q->their, text);
                goto done;
            }
            continue;
        }
        if (q->kind == PARAM_INPLACE) {
            if (v && v->kind == TP_VAL_BOOL && v->u.b) *inplace = true;
            else if (v && !tp__sd_is_none(v) && v->kind != TP_VAL_BOOL) {
                st = tp__sd_report(r, TP_ERR_CORRUPT, "node %s: %s argument '%s' must be a bool", node, callee, q->their);
                goto done;
            }
            continue;
        }
        int idx = tp__sd_schema_index(s, q->ours);
        if (idx < 0) {
            st = tp__sd_report(r, TP_ERR_INTERNAL, "op map: %s parameter '%s' names no argument of %s", callee, q->ours,
                        tp_op_name(op));
            goto done;
        }
        if (!v) {
            if (!q->has_lit) continue;
            v = &q->lit;
        }
        /* None for an argument that cannot be None: the schema's default */
        if (tp__sd_is_none(v) && s->args[idx].has_default && !tp__sd_is_none(&s->args[idx].default_value)) continue;
        /* [] for an int list whose default is one int (padding=0,
         * dilation=1): that default, as tensorplay.functional's padding=[] /
         * dilation=[] mean (a None or list default keeps [] as it is) */
        const tp_value *dflt = &s->args[idx].default_value;
        if ((s->args[idx].type == TP_ARG_INT_LIST || s->args[idx].type == TP_ARG_OPT_INT_LIST) &&
            tp_value_is_seq(v) && tp_value_len(v) == 0 && s->args[idx].has_default && dflt->kind == TP_VAL_INT)
            continue;
        if (m->given[idx]) {
            st = tp__sd_report(r, TP_ERR_CORRUPT, "node %s: %s sets argument '%s' twice", node, callee, s->args[idx].name);
            goto done;
        }
        if ((st = tp_value_copy(v, &m->values[idx])) != TP_OK) goto done_note;
        m->given[idx] = true;
    }
    if (e->fixed) {
        param_list fx;
        if ((st = tp__sd_parse_params(e->fixed, &fx)) != TP_OK) goto done_note;
        for (int i = 0; st == TP_OK && i < fx.n; i++) {
            int idx = tp__sd_schema_index(s, fx.items[i].ours);
            if (idx < 0) {
                st = tp__sd_report(r, TP_ERR_INTERNAL, "op map: fixed argument '%s' of %s is not in %s", fx.items[i].ours,
                            callee, tp_op_name(op));
                break;
            }
            tp_value_clear(&m->values[idx]);
            st = tp_value_copy(&fx.items[i].lit, &m->values[idx]);
            if (st != TP_OK) tp__sd_note(r, st);
            m->given[idx] = true;
        }
        tp__sd_params_clear(&fx);
    }
    goto done;
done_note:
    tp__sd_note(r, st);
done:
    for (int i = 0; i < pl.n; i++)
        if (has_packed[i]) tp_value_clear(&packed[i]);
    tp__sd_params_clear(&pl);
    if (st != TP_OK) mapped_clear(m);
    return st;
}

/* Schema-ordered values -> positional args (leading given ones) + kwargs. */
static tp_status mapped_to_call(tp_op op, mapped *m, tp_value *args, tp_value *kwargs) {
    const tp_schema *s = tp_op_schema(op);
    *args = tp_value_none();
    *kwargs = tp_value_none();
    int n_pos = 0;
    while (n_pos < s->n_args && !s->args[n_pos].kwarg_only && m->given[n_pos]) n_pos++;
    TP_TRY(tp_value_tuple(n_pos, args));
    tp_status st = tp_value_dict(kwargs);
    for (int i = 0; st == TP_OK && i < s->n_args; i++) {
        if (!m->given[i]) continue;
        if (i < n_pos) st = tp_value_seq_set(args, i, &m->values[i]);
        else st = tp_value_dict_set(kwargs, s->args[i].name, &m->values[i]);
    }
    if (st != TP_OK) {
        tp_value_clear(args);
        tp_value_clear(kwargs);
    }
    return st;
}

/* Create a call_function node named `name` for op, checking the arguments
 * against the schema and inferring its meta. */
static tp_status add_call(reader *r, const char *name, tp_op op, const tp_value *args, const tp_value *kwargs,
                          tp_node **out) {
    const tp_schema *s = tp_op_schema(op);
    tp_value bound[64];
    tp_status st = tp_op_bind(op, args ? args->u.seq.items : NULL, (int)tp_value_len(args), kwargs, bound);
    if (st != TP_OK) {
        if (st == TP_ERR_NOMEM) return tp__sd_note(r, st);
        char msg[512];
        snprintf(msg, sizeof msg, "%s", tp_last_error());
        return tp__sd_report(r, st, "node %s: %s", name, msg);
    }
    for (int i = 0; i < s->n_args; i++) tp_value_clear(&bound[i]);
    tp_node *n;
    st = tp__graph_create_node_named(r->graph, TP_NODE_CALL_FUNCTION, tp_op_name(op), args, kwargs, name, &n);
    if (st != TP_OK) return tp__sd_note(r, st);
    *out = n;
    st = tp_node_infer_meta(n);
    if (st == TP_ERR_UNSUPPORTED && (tp_op_flags(op) & TP_OPF_DATA_DEPENDENT)) {
        /* e.g. a boolean mask: the size is known only when it runs (no meta) */
        tp_clear_error();
        return TP_OK;
    }
    if (st != TP_OK) return tp__sd_note(r, st); /* the node stays (verify mode reads on) */
    return TP_OK;
}

tp_status tp__sd_add_call(reader *r, const char *name, tp_op op, const tp_value *args, const tp_value *kwargs,
                          tp_node **out) {
    return add_call(r, name, op, args, kwargs, out);
}

/* op(args...) from positional values. */
tp_status tp__sd_add_call_values(reader *r, const char *name, tp_op op, const tp_value *vals, int n, tp_node **out) {
    tp_value args = tp_value_none(); /* cleared on failure: must be valid even when tp_value_tuple fails */
    tp_status st = tp_value_tuple(n, &args);
    for (int i = 0; st == TP_OK && i < n; i++) {
        tp_value c;
        st = tp_value_copy(&vals[i], &c);
        if (st == TP_OK) st = tp_value_seq_set(&args, i, &c);
    }
    if (st != TP_OK) {
        tp_value_clear(&args);
        return tp__sd_note(r, st);
    }
    st = add_call(r, name, op, &args, NULL, out);
    tp_value_clear(&args);
    return st;
}

/* ======================================================================
 * reading nodes
 * ====================================================================== */

const tp_value *tp__sd_ref_meta(const tp_value *v) {
    return v && v->kind == TP_VAL_NODE ? tp_node_meta_val(v->u.node) : NULL;
}

const tp_tensor *tp__sd_ref_meta_tensor(const tp_value *v) {
    const tp_value *m = tp__sd_ref_meta(v);
    return m && m->kind == TP_VAL_TENSOR ? m->u.tensor : NULL;
}

void tp__sd_set_node(doc_node *d, tp_node *n) {
    d->state = DOC_NODE;
    d->node = n;
}

void tp__sd_set_folded(doc_node *d, tp_value *v) {
    d->state = DOC_FOLDED;
    tp_value_move(&d->folded, v);
}

/* Folding a size is exact only when no dim is dynamic. */
static tp_status need_static(reader *r, const char *node, const char *what) {
    if (!r->dynamic) return TP_OK;
    return tp__sd_report(r, TP_ERR_UNSUPPORTED,
                  "node %s: %s of a tensor cannot be used: the program has dynamic dims and symbolic sizes are not "
                  "supported",
                  node, what);
}

static tp_status need_tensor_meta(reader *r, const char *node, const tp_value *v, const char *what,
                                  const tp_tensor **out) {
    *out = tp__sd_ref_meta_tensor(v);
    if (*out) return TP_OK;
    if (v->kind != TP_VAL_NODE)
        return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: %s needs a tensor, got %s", node, what, tp_value_kind_name(v->kind));
    return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: %s needs the shape of '%s', which is unknown (no example input?)", node,
                  what, tp_node_name(v->u.node));
}

static tp_status shape_value(const tp_tensor *t, tp_value *out) {
    TP_TRY(tp_value_tuple(tp_tensor_ndim(t), out));
    for (int d = 0; d < tp_tensor_ndim(t); d++) out->u.seq.items[d] = tp_value_int(tp_tensor_sizes(t)[d]);
    return TP_OK;
}

/* Positional argument i, or the keyword `key`, or NULL. */
static const tp_value *arg_or_kw(const tp_value *args, int64_t i, const tp_value *kwargs, const char *key) {
    if (i < tp_value_len(args)) return tp_value_at(args, i);
    return key ? tp_value_dict_get(kwargs, key) : NULL;
}

/* Run the plain mapping of entry e (op `op`) and create the node(s). */
static tp_status build_plain(reader *r, doc_node *d, const tp_serde_op_entry *e, tp_op op, const tp_value *args,
                             const tp_value *kwargs) {
    mapped m;
    bool inplace;
    TP_TRY(map_call(r, d->name, e, op, args, kwargs, &m, &inplace));
    bool copy_back = inplace || (e->flags & TP_SERDE_COPY_BACK);
    tp_value self = tp_value_none();
    tp_status st = TP_OK;
    if (copy_back) {
        if (!m.given[0] || m.values[0].kind != TP_VAL_NODE) {
            mapped_clear(&m);
            return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: an in-place call needs a tensor node as its first argument",
                          d->name);
        }
        self = tp_value_node(m.values[0].u.node);
    }
    tp_value cargs, ckwargs;
    st = mapped_to_call(op, &m, &cargs, &ckwargs);
    mapped_clear(&m);
    if (st != TP_OK) return tp__sd_note(r, st);
    tp_node *n = NULL;
    if (!copy_back && !(e->flags & TP_SERDE_COPY_RESULT)) {
        st = add_call(r, d->name, op, &cargs, &ckwargs, &n);
    } else {
        /* the op under a fresh name, then copy_ into self (in-place forms) or
         * a clone of its result (*_copy forms) as the document node */
        char *tmp = NULL;
        st = tp__sd_fresh_name(r, d->name, tp_op_name(op), &tmp);
        if (st != TP_OK) tp__sd_note(r, st);
        tp_node *value_node = NULL;
        if (st == TP_OK) st = add_call(r, tmp, op, &cargs, &ckwargs, &value_node);
        tp_free(tmp);
        if (st == TP_OK && copy_back) {
            tp_value vals[2] = {self, tp_value_node(value_node)};
            st = tp__sd_add_call_values(r, d->name, TP_OP_COPY_, vals, 2, &n);
        } else if (st == TP_OK) {
            tp_value v = tp_value_node(value_node);
            st = tp__sd_add_call_values(r, d->name, TP_OP_CLONE, &v, 1, &n);
        }
    }
    tp_value_clear(&cargs);
    tp_value_clear(&ckwargs);
    if (n) tp__sd_set_node(d, n);
    return st;
}

/* Python arithmetic on constants (folded sizes and the like). */
static tp_status fold_binop(reader *r, doc_node *d, const char *fn, const tp_value *a, const tp_value *b) {
    if (!tp_value_is_number(a) || !tp_value_is_number(b))
        return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: _operator.%s of %s and %s is not supported", d->name, fn,
                      tp_value_kind_name(a->kind), tp_value_kind_name(b->kind));
    bool ints = a->kind != TP_VAL_FLOAT && b->kind != TP_VAL_FLOAT;
    int64_t x = ints ? tp_value_as_i64(a) : 0, y = ints ? tp_value_as_i64(b) : 0, ri = 0;
    double fx = tp_value_as_f64(a), fy = tp_value_as_f64(b);
    tp_value res = tp_value_none();
    bool ok = true;
    if (strcmp(fn, "add") == 0 || strcmp(fn, "sub") == 0 || strcmp(fn, "mul") == 0) {
        if (ints) {
            ok = fn[0] == 'a' ? !__builtin_add_overflow(x, y, &ri)
                 : fn[0] == 's' ? !__builtin_sub_overflow(x, y, &ri)
                                : !__builtin_mul_overflow(x, y, &ri);
            res = tp_value_int(ri);
        } else {
            res = tp_value_float(fn[0] == 'a' ? fx + fy : fn[0] == 's' ? fx - fy : fx * fy);
        }
    } else if (strcmp(fn, "truediv") == 0) {
        ok = fy != 0;
        res = tp_value_float(fx / fy);
    } else if (strcmp(fn, "floordiv") == 0 || strcmp(fn, "mod") == 0) {
        ok = ints ? y != 0 : fy != 0;
        if (ok && ints) {
            if (x == INT64_MIN && y == -1) ok = false;
            else {
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                res = tp_value_int(fn[0] == 'f' ? q : m);
            }
        } else if (ok) {
            double q = floor(fx / fy);
            res = tp_value_float(fn[0] == 'f' ? q : fx - q * fy);
        }
    } else if (strcmp(fn, "eq") == 0) res = tp_value_bool(fx == fy);
    else if (strcmp(fn, "ne") == 0) res = tp_value_bool(fx != fy);
    else if (strcmp(fn, "lt") == 0) res = tp_value_bool(fx < fy);
    else if (strcmp(fn, "le") == 0) res = tp_value_bool(fx <= fy);
    else if (strcmp(fn, "gt") == 0) res = tp_value_bool(fx > fy);
    else if (strcmp(fn, "ge") == 0) res = tp_value_bool(fx >= fy);
    else ok = false;
    if (!ok)
        return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: _operator.%s cannot be folded for these constants", d->name, fn);
    tp__sd_set_folded(d, &res);
    return TP_OK;
}

/* A node whose value is a Python number computed when the program runs. */
static bool run_time_number(const tp_value *v) {
    if (v->kind != TP_VAL_NODE) return false;
    tp_op op = tp_node_op(v->u.node);
    return op == TP_OP_ITEM || op == TP_OP_IS_NONZERO || op == TP_OP_PY_BINOP;
}

static tp_status build_binop(reader *r, doc_node *d, const tp_serde_op_entry *e, const tp_value *args,
                             const tp_value *kwargs) {
    if (tp_value_len(args) != 2 || tp_value_len(kwargs) != 0)
        return tp__sd_report(r, TP_ERR_CORRUPT, "node %s: _operator.%s takes two positional arguments", d->name, e->name);
    const tp_value *a = tp_value_at(args, 0), *b = tp_value_at(args, 1);
    bool an = a->kind == TP_VAL_NODE, bn = b->kind == TP_VAL_NODE;
    if (!an && !bn) return fold_binop(r, d, e->name, a, b);
    const tp_value *ma = tp__sd_ref_meta(a), *mb = tp__sd_ref_meta(b);
    bool ta = ma && ma->kind == TP_VAL_TENSOR, tb = mb && mb->kind == TP_VAL_TENSOR;
    /* numbers known only at run time (item(), is_nonzero(), arithmetic on them) */
    bool sa = an && run_time_number(a), sb = bn && run_time_number(b);
    if ((sa || sb) && !ta && !tb && (sa || tp_value_is_number(a)) && (sb || tp_value_is_number(b))) {
        tp_value opname;
        tp_status st = tp_value_str(e->name, &opname);
        if (st != TP_OK) return tp__sd_note(r, st);
        tp_node *n = NULL;
        st = tp__sd_add_call_values(r, d->name, TP_OP_PY_BINOP, (tp_value[]){opname, *a, *b}, 3, &n);
        tp_value_clear(&opname);
        if (n) tp__sd_set_node(d, n);
        return st;
    }
    if (sa && tb) an = false, ma = NULL; /* number OP tensor: the scalar-first forms below */
    if (((ma && ma->kind == TP_VAL_INT) || (mb && mb->kind == TP_VAL_INT)) && !ta && !tb) {
        /* arithmetic on symbolic sizes (or int inputs) */
        const tp_serde_op_entry *se = tp__serde_find_symint(e->name);
        if (!se)
            return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: _operator.%s on symbolic sizes is not supported", d->name,
                          e->name);
        tp_node *n = NULL;
        tp_status st = tp__sd_add_call_values(r, d->name, se->op, (tp_value[]){*a, *b}, 2, &n);
        if (n) tp__sd_set_node(d, n);
        return st;
    }
    /* a tensor first, or an operand of unknown kind first (taken as the tensor) */
    if (an && !(ma && !ta && tb)) return build_plain(r, d, e, e->op, args, kwargs);
    /* scalar first (a constant, or a python int/float input): x OP tensor */
    tp_node *n = NULL;
    tp_status st;
    if (e->swapped_op != TP_OP_INVALID && !e->fixed) {
        tp_value vals[2] = {*b, *a};
        st = tp__sd_add_call_values(r, d->name, e->swapped_op, vals, 2, &n);
    } else if (strcmp(e->name, "sub") == 0 || strcmp(e->name, "truediv") == 0) {
        /* a - x = (-x) + a; a / x = (1/x) * a */
        bool sub = e->name[0] == 's';
        char *tmp;
        st = tp__sd_fresh_name(r, d->name, sub ? "neg" : "reciprocal", &tmp);
        if (st != TP_OK) return tp__sd_note(r, st);
        tp_node *first = NULL;
        st = tp__sd_add_call_values(r, tmp, sub ? TP_OP_NEG : TP_OP_RECIPROCAL, b, 1, &first);
        tp_free(tmp);
        if (st == TP_OK) {
            tp_value vals[2] = {tp_value_node(first), *a};
            st = tp__sd_add_call_values(r, d->name, sub ? TP_OP_ADD : TP_OP_MUL, vals, 2, &n);
        }
    } else {
        return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: _operator.%s with a scalar first operand is not supported",
                      d->name, e->name);
    }
    if (n) tp__sd_set_node(d, n);
    return st;
}

/* ---- other specials ------------------------------------------------------ */

/* The layout a tensor has when the program runs on contiguous inputs, as
 * tensorplay gives it: the view ops back to a fresh tensor (an input, a
 * parameter or an op's result, contiguous) replayed on meta tensors (node
 * metas are contiguous). Not for clone and the *_like factories, which keep
 * their input's strides in tensorplay and are contiguous here. */
static tp_status replay_layout(reader *r, const char *node, const char *what, const tp_value *v, int depth,
                               tp_value *out) {
    const tp_value *m = tp__sd_ref_meta(v);
    if (!m) return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: %s needs a tensor of known shape", node, what);
    const tp_node *n = v->u.node;
    tp_node_kind kind = tp_node_get_kind(n);
    tp_op op = kind == TP_NODE_CALL_FUNCTION || kind == TP_NODE_CALL_METHOD ? tp_node_op(n) : TP_OP_INVALID;
    if (op != TP_OP_INVALID) {
        size_t len = strlen(tp_op_name(op));
        if (op == TP_OP_CLONE || (len > 5 && !strcmp(tp_op_name(op) + len - 5, "_like")))
            return tp__sd_report(r, TP_ERR_UNSUPPORTED,
                                 "node %s: %s of the result of %s (whose strides follow its input's in tensorplay) is not "
                                 "supported",
                                 node, what, tp_op_name(op));
    }
    const tp_value *args = tp_node_args(n);
    int64_t na = tp_value_len(args);
    bool view = op != TP_OP_INVALID && ((tp_op_flags(op) & TP_OPF_VIEW) || op == TP_OP_GETITEM) && na >= 1 && na <= 16;
    if (!view || depth > 256) return tp__sd_note(r, tp_value_copy(m, out));
    tp_value a[16];
    tp_status st = TP_OK;
    int64_t k = 0;
    for (; k < na && st == TP_OK; k++) {
        const tp_value *ak = tp_value_at(args, k);
        if (k == 0) st = replay_layout(r, node, what, ak, depth + 1, &a[k]);
        else if (ak->kind == TP_VAL_NODE && tp__sd_ref_meta(ak)) st = tp__sd_note(r, tp_value_copy(tp__sd_ref_meta(ak), &a[k]));
        else if (ak->kind == TP_VAL_NODE) st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: %s of a view with run-time arguments", node, what);
        else st = tp__sd_note(r, tp_value_copy(ak, &a[k]));
    }
    if (st != TP_OK) k--;
    const tp_value *kw = tp_node_kwargs(n);
    if (st == TP_OK && kw && tp_value_len(kw) > 0)
        st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: %s of a view made with keyword arguments", node, what);
    if (st == TP_OK && (st = tp_op_call(op, a, (int)na, NULL, out)) != TP_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", tp_last_error());
        st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: %s: replaying the view %s: %s", node, what, tp_op_name(op), msg);
    }
    for (int64_t q = 0; q < k; q++) tp_value_clear(&a[q]);
    return st;
}

static tp_status build_special(vctx *c, doc_node *d, const tp_serde_op_entry *e, const tp_value *args,
                               const tp_value *kwargs) {
    reader *r = c->r;
    if (e->special == TP_SERDE_COMPOSE) return tp__sd_compose(r, d, e->name, args, kwargs);
    const tp_value *self = tp_value_at(args, 0);
    if (!self) self = tp_value_dict_get(kwargs, "input");
    if (!self && e->special != TP_SERDE_ASSERT)
        return tp__sd_report(r, TP_ERR_CORRUPT, "node %s: %s needs an argument", d->name, e->name);
    const tp_tensor *t = NULL;
    tp_node *n = NULL;
    tp_status st = TP_OK;
    switch (e->special) {
    case TP_SERDE_SIZE:
    case TP_SERDE_DIM:
    case TP_SERDE_NUMEL: {
        TP_TRY(need_tensor_meta(r, d->name, self, e->name, &t));
        tp_value res = tp_value_none();
        if (e->special == TP_SERDE_DIM) {
            res = tp_value_int(tp_tensor_ndim(t));
        } else {
            const tp_value *dim = arg_or_kw(args, 1, kwargs, "dim");
            if (r->dynamic && e->special == TP_SERDE_SIZE && dim && dim->kind == TP_VAL_INT && self->kind == TP_VAL_NODE) {
                /* kept symbolic: x.view(x.size(0), -1) becomes flatten(x, 1) */
                int w;
                if (tp__wrap_dim(dim->u.i, tp_tensor_ndim(t), &w) != TP_OK)
                    return tp__sd_report(r, TP_ERR_INDEX, "node %s: size(%" PRId64 ") of a tensor of rank %d", d->name, dim->u.i,
                                  tp_tensor_ndim(t));
                d->state = DOC_SYMSIZE;
                d->node = self->u.node;
                d->sym_dim = w;
                return TP_OK;
            }
            TP_TRY(need_static(r, d->name, e->name));
            if (e->special == TP_SERDE_NUMEL) {
                res = tp_value_int(tp_tensor_numel(t));
            } else if (dim && dim->kind == TP_VAL_INT) {
                int w;
                if (tp__wrap_dim(dim->u.i, tp_tensor_ndim(t), &w) != TP_OK)
                    return tp__sd_report(r, TP_ERR_INDEX, "node %s: size(%" PRId64 ") of a tensor of rank %d", d->name, dim->u.i,
                                  tp_tensor_ndim(t));
                res = tp_value_int(tp_tensor_sizes(t)[w]);
            } else if (!dim || dim->kind == TP_VAL_NONE) {
                if ((st = shape_value(t, &res)) != TP_OK) return tp__sd_note(r, st);
            } else {
                return tp__sd_report(r, TP_ERR_CORRUPT, "node %s: size() dim must be an int", d->name);
            }
        }
        tp__sd_set_folded(d, &res);
        return TP_OK;
    }
    case TP_SERDE_GETATTR: {
        const tp_value *attr = tp_value_at(args, 1);
        if (!attr || attr->kind != TP_VAL_STR || tp_value_len(args) != 2)
            return tp__sd_report(r, TP_ERR_CORRUPT, "node %s: getattr needs an object and an attribute name", d->name);
        const char *a = attr->u.s;
        const tp_value *sm = tp__sd_ref_meta(self);
        if (self->kind == TP_VAL_NODE && sm && (sm->kind == TP_VAL_TUPLE || sm->kind == TP_VAL_LIST)) {
            /* fields of the named tuples max/min/sort/topk/kthvalue/... return */
            int64_t at = !strcmp(a, "values") || !strcmp(a, "min") ? 0 : !strcmp(a, "indices") || !strcmp(a, "max") ? 1 : -1;
            if (at < 0 || at >= tp_value_len(sm))
                return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: attribute '%.64s' of a tuple is not supported", d->name, a);
            tp_value vals[2] = {*self, tp_value_int(at)};
            st = tp__sd_add_call_values(r, d->name, TP_OP_GETITEM, vals, 2, &n);
            if (n) tp__sd_set_node(d, n);
            return st;
        }
        TP_TRY(need_tensor_meta(r, d->name, self, a, &t));
        tp_value res = tp_value_none();
        if (strcmp(a, "shape") == 0 && r->dynamic && self->kind == TP_VAL_NODE) {
            d->state = DOC_SYMSHAPE; /* x.shape[i] gives a symbolic size */
            d->node = self->u.node;
            return TP_OK;
        } else if (strcmp(a, "shape") == 0) {
            if ((st = shape_value(t, &res)) != TP_OK) return tp__sd_note(r, st);
        } else if (strcmp(a, "ndim") == 0) {
            res = tp_value_int(tp_tensor_ndim(t));
        } else if (strcmp(a, "dtype") == 0) {
            res = tp_value_dtype(tp_tensor_dtype(t));
        } else if (strcmp(a, "T") == 0) {
            int64_t dims[TP_MAX_DIMS];
            for (int k = 0; k < tp_tensor_ndim(t); k++) dims[k] = tp_tensor_ndim(t) - 1 - k;
            tp_value list;
            if ((st = tp_value_int_list(dims, tp_tensor_ndim(t), &list)) != TP_OK) return tp__sd_note(r, st);
            tp_value vals[2] = {*self, list};
            st = tp__sd_add_call_values(r, d->name, TP_OP_PERMUTE, vals, 2, &n);
            tp_value_clear(&list);
            if (n) tp__sd_set_node(d, n);
            return st;
        } else if (strcmp(a, "mT") == 0) {
            tp_value vals[3] = {*self, tp_value_int(-2), tp_value_int(-1)};
            st = tp__sd_add_call_values(r, d->name, TP_OP_TRANSPOSE, vals, 3, &n);
            if (n) tp__sd_set_node(d, n);
            return st;
        } else {
            return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: attribute '%.64s' of a tensor is not supported", d->name, a);
        }
        tp__sd_set_folded(d, &res);
        return TP_OK;
    }
    case TP_SERDE_TO: {
        tp_value dtype = tp_value_none();
        bool copy = false, dtype_set = false;
        int n_bools = 0;
        if (strcmp(e->name, "type") == 0 && tp_value_len(args) < 2 && !tp_value_dict_get(kwargs, "dtype"))
            return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: type() without a dtype returns a string, which is not supported",
                          d->name);
        for (int64_t k = 1; k < tp_value_len(args); k++) {
            const tp_value *a = tp_value_at(args, k);
            if (a->kind == TP_VAL_DTYPE) {
                dtype = *a;
                dtype_set = true;
            } else if (a->kind == TP_VAL_NODE) {
                TP_TRY(need_tensor_meta(r, d->name, a, e->name, &t));
                dtype = tp_value_dtype(tp_tensor_dtype(t));
                dtype_set = true;
            } else if (a->kind == TP_VAL_BOOL) {
                if (n_bools++ == 1) copy = a->u.b;
            } else if (a->kind == TP_VAL_STR && strcmp(e->name, "to") == 0) {
                /* a device: we compute on the CPU; values are the same */
            } else if (a->kind != TP_VAL_NONE) {
                return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: %s() with a %s argument is not supported", d->name, e->name,
                              tp_value_kind_name(a->kind));
            }
        }
        for (int64_t k = 0; k < tp_value_len(kwargs); k++) {
            const char *key = kwargs->u.seq.keys[k];
            const tp_value *a = &kwargs->u.seq.items[k];
            if (strcmp(key, "dtype") == 0 && (a->kind == TP_VAL_DTYPE || a->kind == TP_VAL_NONE)) {
                dtype = *a;
                dtype_set = a->kind == TP_VAL_DTYPE;
            } else if (strcmp(key, "copy") == 0 && a->kind == TP_VAL_BOOL) {
                copy = a->u.b;
            } else if (strcmp(key, "device") != 0 && strcmp(key, "non_blocking") != 0 &&
                       strcmp(key, "memory_format") != 0) {
                return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: %s() argument '%.64s' is not supported", d->name, e->name,
                              key);
            }
        }
        tp_value targs, tkw;
        if ((st = tp_value_tuple(1, &targs)) != TP_OK) return tp__sd_note(r, st);
        targs.u.seq.items[0] = *self; /* a node reference or constant: plain copy is fine for nodes */
        if (self->kind != TP_VAL_NODE) {
            targs.u.seq.items[0] = tp_value_none();
            tp_value_clear(&targs);
            return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: %s() of a %s is not supported", d->name, e->name,
                          tp_value_kind_name(self->kind));
        }
        st = tp_value_dict(&tkw);
        if (st == TP_OK && dtype_set) {
            tp_value dv = dtype;
            st = tp_value_dict_set(&tkw, "dtype", &dv);
        }
        if (st == TP_OK && copy) {
            tp_value cv = tp_value_bool(true);
            st = tp_value_dict_set(&tkw, "copy", &cv);
        }
        if (st == TP_OK) st = add_call(r, d->name, TP_OP_TO, &targs, &tkw, &n);
        else tp__sd_note(r, st);
        tp_value_clear(&targs);
        tp_value_clear(&tkw);
        if (n) tp__sd_set_node(d, n);
        return st;
    }
    case TP_SERDE_TYPE_AS:
    case TP_SERDE_SHAPE_AS: {
        const tp_value *other = arg_or_kw(args, 1, kwargs, "other");
        if (!other || tp_value_len(args) + tp_value_len(kwargs) != 2)
            return tp__sd_report(r, TP_ERR_CORRUPT, "node %s: %s takes one tensor argument", d->name, e->name);
        TP_TRY(need_tensor_meta(r, d->name, other, e->name, &t));
        tp_value second;
        if (e->special == TP_SERDE_TYPE_AS) {
            second = tp_value_dtype(tp_tensor_dtype(t));
        } else {
            TP_TRY(need_static(r, d->name, e->name));
            if ((st = tp_value_int_list(tp_tensor_sizes(t), tp_tensor_ndim(t), &second)) != TP_OK) return tp__sd_note(r, st);
        }
        tp_value vals[2] = {*self, second};
        st = tp__sd_add_call_values(r, d->name, e->op, vals, 2, &n);
        tp_value_clear(&second);
        if (n) tp__sd_set_node(d, n);
        return st;
    }
    case TP_SERDE_ALIAS:
    case TP_SERDE_TRANSPOSE: {
        if (self->kind != TP_VAL_NODE)
            return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: %s of a %s is not supported", d->name, e->name,
                          tp_value_kind_name(self->kind));
        t = tp__sd_ref_meta_tensor(self);
        if (strcmp(e->name, "matrix_H") == 0 && t && tp_tensor_ndim(t) != 2 && tp_tensor_ndim(t) != 0)
            return tp__sd_report(r, TP_ERR_SHAPE,
                                 "node %s: matrix_H is only supported on matrices (2-D tensors) but got a %d-D tensor; for "
                                 "batches of matrices use mH",
                                 d->name, tp_tensor_ndim(t));
        if (strcmp(e->name, "numpy_T") == 0) { /* x.T as a method: permute(x, [n-1, ..., 0]) */
            TP_TRY(need_tensor_meta(r, d->name, self, e->name, &t));
            int64_t dims[TP_MAX_DIMS];
            for (int k = 0; k < tp_tensor_ndim(t); k++) dims[k] = tp_tensor_ndim(t) - 1 - k;
            tp_value list;
            if ((st = tp_value_int_list(dims, tp_tensor_ndim(t), &list)) != TP_OK) return tp__sd_note(r, st);
            tp_value vals[2] = {*self, list};
            st = tp__sd_add_call_values(r, d->name, TP_OP_PERMUTE, vals, 2, &n);
            tp_value_clear(&list);
        } else if (e->special == TP_SERDE_ALIAS || (t && tp_tensor_ndim(t) < 2)) {
            st = tp__sd_add_call_values(r, d->name, TP_OP_TO, self, 1, &n);
        } else {
            tp_value vals[3] = {*self, tp_value_int(0), tp_value_int(t ? 1 : -1)};
            st = tp__sd_add_call_values(r, d->name, TP_OP_TRANSPOSE, vals, 3, &n);
        }
        if (n) tp__sd_set_node(d, n);
        return st;
    }
    case TP_SERDE_MAXMIN: {
        /* max(x, y) / x.max(y) with a tensor y: elementwise */
        const tp_value *other = arg_or_kw(args, 1, kwargs, "other");
        if (other && other->kind == TP_VAL_NODE) {
            tp_value vals[2] = {*self, *other};
            st = tp__sd_add_call_values(r, d->name, e->op == TP_OP_MAX ? TP_OP_MAXIMUM : TP_OP_MINIMUM, vals, 2, &n);
            if (n) tp__sd_set_node(d, n);
            return st;
        }
        return build_plain(r, d, e, e->op, args, kwargs);
    }
    case TP_SERDE_RETURN_INDICES: {
        const tp_value *ri = arg_or_kw(args, 6, kwargs, "return_indices");
        bool with_indices = ri && (ri->kind == TP_VAL_BOOL || ri->kind == TP_VAL_INT) && tp_value_as_i64(ri) != 0;
        return build_plain(r, d, e, with_indices ? e->swapped_op : e->op, args, kwargs);
    }
    case TP_SERDE_STDVAR: {
        /* x.std(1): tensorplay's std(correction: int) overload (not a dim) */
        const tp_value *a1 = tp_value_len(args) == 2 ? tp_value_at(args, 1) : NULL;
        if (!a1 || a1->kind != TP_VAL_INT || (kwargs && tp_value_dict_get(kwargs, "dim")))
            return build_plain(r, d, e, e->op, args, kwargs);
        tp_value nargs = tp_value_none(), nkw = tp_value_none(), item = tp_value_none();
        st = tp_value_tuple(1, &nargs);
        if (st == TP_OK && (st = tp_value_copy(self, &item)) == TP_OK) st = tp_value_seq_set(&nargs, 0, &item);
        if (st == TP_OK) st = kwargs && kwargs->kind == TP_VAL_DICT ? tp_value_copy(kwargs, &nkw) : tp_value_dict(&nkw);
        if (st == TP_OK && tp_value_dict_get(&nkw, "correction"))
            st = tp__sd_report(r, TP_ERR_CORRUPT, "node %s: got argument 'correction' twice", d->name);
        if (st == TP_OK && (st = tp_value_copy(a1, &item)) == TP_OK) st = tp_value_dict_set(&nkw, "correction", &item);
        if (st == TP_OK) st = build_plain(r, d, e, e->op, &nargs, &nkw);
        else if (st == TP_ERR_NOMEM) tp__sd_note(r, st);
        tp_value_clear(&nargs);
        tp_value_clear(&nkw);
        return st;
    }
    case TP_SERDE_NORM: {
        /* x.norm([dims], p, keepdim): tensorplay's Tensor.norm overload with
         * the dims first (F.normalize calls it); PyTorch's order otherwise */
        const tp_value *first = tp_value_at(args, 1);
        if (!first || (first->kind != TP_VAL_LIST && first->kind != TP_VAL_TUPLE))
            return build_plain(r, d, e, e->op, args, kwargs);
        if (tp_value_len(args) > 4)
            return tp__sd_report(r, TP_ERR_CORRUPT, "node %s: norm(dim, p, keepdim) takes at most 3 arguments", d->name);
        static const char *const names[] = {"dim", "p", "keepdim"};
        tp_value nargs = tp_value_none(), nkw = tp_value_none(), item = tp_value_none();
        st = tp_value_tuple(1, &nargs);
        if (st == TP_OK && (st = tp_value_copy(self, &item)) == TP_OK) st = tp_value_seq_set(&nargs, 0, &item);
        if (st == TP_OK) st = kwargs && kwargs->kind == TP_VAL_DICT ? tp_value_copy(kwargs, &nkw) : tp_value_dict(&nkw);
        for (int64_t k = 1; st == TP_OK && k < tp_value_len(args); k++) {
            if (tp_value_dict_get(&nkw, names[k - 1])) {
                st = tp__sd_report(r, TP_ERR_CORRUPT, "node %s: norm() got argument '%s' twice", d->name, names[k - 1]);
                break;
            }
            if ((st = tp_value_copy(tp_value_at(args, k), &item)) == TP_OK) st = tp_value_dict_set(&nkw, names[k - 1], &item);
        }
        if (st == TP_OK) st = build_plain(r, d, e, e->op, &nargs, &nkw);
        else if (st == TP_ERR_NOMEM) tp__sd_note(r, st);
        tp_value_clear(&nargs);
        tp_value_clear(&nkw);
        return st;
    }
    case TP_SERDE_ASSERT:
        for (int64_t k = 0; k < tp_value_len(args); k++) {
            const tp_value *a = tp_value_at(args, k);
            if (a->kind != TP_VAL_NODE && !tp_value_is_number(a) && a->kind != TP_VAL_STR && a->kind != TP_VAL_NONE)
                return tp__sd_report(r, TP_ERR_CORRUPT, "node %s: unexpected %s argument to %s", d->name,
                              tp_value_kind_name(a->kind), e->name);
        }
        d->state = DOC_DROPPED;
        return TP_OK;
    case TP_SERDE_PREDICATE: {
        /* dtypes are known at load; shapes when no dim is dynamic; tensors are
         * real (no conjugate or negative bit), unquantized, local CPU tensors.
         * tensorplay.functional.sym_stride & co. answer as stride & co. */
        TP_TRY(need_tensor_meta(r, d->name, self, e->name, &t));
        const char *qname = strncmp(e->name, "sym_", 4) == 0 ? e->name + 4 : e->name;
        tp_dtype dt = tp_tensor_dtype(t);
        bool res;
        if (strcmp(qname, "is_floating_point") == 0) {
            res = tp_dtype_is_float(dt);
        } else if (strcmp(qname, "is_complex") == 0) {
            res = false; /* no complex dtypes */
        } else if (strcmp(qname, "is_signed") == 0) {
            res = dt != TP_UINT8 && dt != TP_BOOL;
        } else if (strcmp(qname, "get_device") == 0) { /* CPU tensors: -1 */
            tp_value v = tp_value_int(-1);
            tp__sd_set_folded(d, &v);
            return TP_OK;
        } else if (!strcmp(qname, "is_contiguous") || !strcmp(qname, "stride") ||
                   !strcmp(qname, "storage_offset")) {
            /* the layout at export: inputs contiguous, views as the view ops make them */
            bool is_stride = !strcmp(qname, "stride");
            if (tp_value_len(args) + tp_value_len(kwargs) > (is_stride ? 2 : 1))
                return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: %s() with a memory format is not supported", d->name,
                                     e->name);
            TP_TRY(need_static(r, d->name, e->name));
            tp_value lay = tp_value_none();
            TP_TRY(replay_layout(r, d->name, e->name, self, 0, &lay));
            if (lay.kind != TP_VAL_TENSOR) {
                tp_value_clear(&lay);
                return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: %s needs a tensor", d->name, e->name);
            }
            t = lay.u.tensor;
            tp_value v = tp_value_none();
            if (!is_stride) {
                v = !strcmp(qname, "storage_offset") ? tp_value_int(tp_tensor_offset(t))
                                                       : tp_value_bool(tp_tensor_is_contiguous(t));
            } else {
                const tp_value *dim = arg_or_kw(args, 1, kwargs, "dim");
                if (dim && dim->kind == TP_VAL_INT) {
                    int w;
                    if (tp__wrap_dim(dim->u.i, tp_tensor_ndim(t), &w) != TP_OK)
                        st = tp__sd_report(r, TP_ERR_INDEX, "node %s: stride(%" PRId64 ") of a tensor of rank %d",
                                           d->name, dim->u.i, tp_tensor_ndim(t));
                    else
                        v = tp_value_int(tp_tensor_strides(t)[w]);
                } else if (!dim || dim->kind == TP_VAL_NONE) {
                    if ((st = tp_value_tuple(tp_tensor_ndim(t), &v)) != TP_OK) tp__sd_note(r, st);
                    for (int k = 0; st == TP_OK && k < tp_tensor_ndim(t); k++)
                        v.u.seq.items[k] = tp_value_int(tp_tensor_strides(t)[k]);
                } else {
                    st = tp__sd_report(r, TP_ERR_CORRUPT, "node %s: stride() dim must be an int", d->name);
                }
            }
            tp_value_clear(&lay);
            if (st != TP_OK) return st;
            tp__sd_set_folded(d, &v);
            return TP_OK;
        } else if (strcmp(qname, "is_same_size") != 0) {
            res = false; /* is_conj, is_neg, is_quantized, is_distributed: real, dense, local tensors;
                          * is_inference: no tensor is made in inference mode */
        } else { /* is_same_size(other) */
            const tp_value *other = arg_or_kw(args, 1, kwargs, "other");
            const tp_tensor *u = NULL;
            if (!other || tp_value_len(args) + tp_value_len(kwargs) != 2)
                return tp__sd_report(r, TP_ERR_CORRUPT, "node %s: %s takes one tensor argument", d->name, e->name);
            TP_TRY(need_tensor_meta(r, d->name, other, e->name, &u));
            TP_TRY(need_static(r, d->name, e->name));
            res = tp_tensor_ndim(t) == tp_tensor_ndim(u);
            for (int k = 0; res && k < tp_tensor_ndim(t); k++) res = tp_tensor_sizes(t)[k] == tp_tensor_sizes(u)[k];
        }
        tp_value v = tp_value_bool(res);
        tp__sd_set_folded(d, &v);
        return TP_OK;
    }
    case TP_SERDE_UNIQUE: {
        /* unique(sorted, return_inverse, return_counts, dim) or
         * unique_consecutive(return_inverse, return_counts, dim): the op's three
         * outputs, of which tensorplay returns the values alone, or a tuple of
         * them and the inverse and / or the counts, as asked */
        bool cons = e->op == TP_OP_UNIQUE_CONSECUTIVE;
        static const char *const names[] = {"sorted", "return_inverse", "return_counts", "dim"};
        const char *const *nm = cons ? names + 1 : names;
        int np = cons ? 3 : 4;
        tp_value v[4] = {tp_value_bool(!cons), tp_value_bool(false), tp_value_bool(false), tp_value_none()};
        tp_value *flags = cons ? v : v + 1, *dim = flags + 2;
        if (cons) v[2] = tp_value_none();
        int64_t nkw = tp_value_len(kwargs) - (tp_value_at(args, 0) ? 0 : 1), used = 0;
        if (tp_value_len(args) > np + 1)
            return tp__sd_report(r, TP_ERR_CORRUPT, "node %s: %s takes at most %d arguments", d->name, e->name, np + 1);
        for (int k = 0; k < np; k++) {
            const tp_value *a = k + 1 < tp_value_len(args) ? tp_value_at(args, k + 1) : NULL;
            if (!a && (a = tp_value_dict_get(kwargs, nm[k]))) used++;
            if (!a) continue;
            bool is_dim = k == np - 1;
            if (is_dim ? a->kind != TP_VAL_NONE && a->kind != TP_VAL_INT : a->kind != TP_VAL_BOOL && a->kind != TP_VAL_INT)
                return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: %s's %s must be a constant %s, got %s", d->name,
                                     e->name, nm[k], is_dim ? "int or None" : "bool", tp_value_kind_name(a->kind));
            v[k] = is_dim || a->kind == TP_VAL_BOOL ? *a : tp_value_bool(a->u.i != 0);
        }
        if (used != nkw)
            return tp__sd_report(r, TP_ERR_CORRUPT, "node %s: %s got an unexpected keyword argument", d->name, e->name);
        bool inv = flags[0].u.b, cnt = flags[1].u.b;
        tp_op op = e->op;
        tp_value call[5];
        int n_call = 0;
        call[n_call++] = *self;
        if (cons) {
            call[n_call++] = flags[0], call[n_call++] = flags[1], call[n_call++] = *dim;
        } else {
            if (dim->kind == TP_VAL_INT) op = e->swapped_op, call[n_call++] = *dim;
            call[n_call++] = v[0], call[n_call++] = flags[0], call[n_call++] = flags[1];
        }
        char *tmp = NULL;
        if (!(inv && cnt) && (st = tp__sd_fresh_name(r, d->name, tp_op_name(op), &tmp)) != TP_OK)
            return tp__sd_note(r, st);
        tp_node *u = NULL;
        st = tp__sd_add_call_values(r, tmp ? tmp : d->name, op, call, n_call, &u);
        tp_free(tmp);
        if (st != TP_OK) return st;
        if (inv && cnt) { /* the op's own three outputs */
            tp__sd_set_node(d, u);
            return TP_OK;
        }
        if (!inv && !cnt) {
            st = tp__sd_add_call_values(r, d->name, TP_OP_GETITEM, (tp_value[]){tp_value_node(u), tp_value_int(0)}, 2, &n);
            if (n) tp__sd_set_node(d, n);
            return st;
        }
        /* a pair: items of it can be used, but not the pair itself as an output
         * (tensorplay's signature records one tensor for it) */
        int items[3] = {0}, n_items = 1;
        if (inv) items[n_items++] = 1;
        if (cnt) items[n_items++] = 2;
        tp_value tuple;
        if ((st = tp_value_tuple(n_items, &tuple)) != TP_OK) return tp__sd_note(r, st);
        for (int k = 0; k < n_items && st == TP_OK; k++) {
            if ((st = tp__sd_fresh_name(r, d->name, "getitem", &tmp)) != TP_OK) {
                tp__sd_note(r, st);
                break;
            }
            tp_node *g = NULL;
            st = tp__sd_add_call_values(r, tmp, TP_OP_GETITEM, (tp_value[]){tp_value_node(u), tp_value_int(items[k])}, 2,
                                        &g);
            tp_free(tmp);
            if (st == TP_OK) tuple.u.seq.items[k] = tp_value_node(g);
        }
        if (st == TP_OK) tp__sd_set_folded(d, &tuple);
        else tp_value_clear(&tuple);
        return st;
    }
    case TP_SERDE_NONZERO_NUMPY: {
        if (tp_value_len(args) + tp_value_len(kwargs) != 1)
            return tp__sd_report(r, TP_ERR_CORRUPT, "node %s: %s takes no arguments", d->name, e->name);
        TP_TRY(need_tensor_meta(r, d->name, self, e->name, &t));
        tp_value x = *self, tmp_v = tp_value_none();
        char *tmp = NULL;
        tp_node *m = NULL;
        if (tp_tensor_ndim(t) == 0) { /* PyTorch: a 0-d tensor as a 1-element one */
            if ((st = tp__sd_fresh_name(r, d->name, "unsqueeze", &tmp)) != TP_OK) return tp__sd_note(r, st);
            st = tp__sd_add_call_values(r, tmp, TP_OP_UNSQUEEZE, (tp_value[]){*self, tp_value_int(0)}, 2, &m);
            tp_free(tmp);
            tmp = NULL;
            if (st != TP_OK) return st;
            x = tp_value_node(m);
        }
        if ((st = tp__sd_fresh_name(r, d->name, "nonzero", &tmp)) != TP_OK) return tp__sd_note(r, st);
        st = tp__sd_add_call_values(r, tmp, TP_OP_NONZERO, &x, 1, &m);
        tp_free(tmp);
        if (st != TP_OK) return st;
        tmp_v = tp_value_node(m);
        st = tp__sd_add_call_values(r, d->name, TP_OP_UNBIND, (tp_value[]){tmp_v, tp_value_int(1)}, 2, &n);
        if (n) tp__sd_set_node(d, n);
        return st;
    }
    default: break;
    }
    return tp__sd_report(r, TP_ERR_INTERNAL, "node %s: unhandled op map entry %s", d->name, e->name);
}

/* ---- node meta (tpexport's optional per-node "meta": {"val": V}) ----------
 * V: null | {"dtype": "float32", "shape": [2, 3]} | {"__tuple__": [V...]} |
 * {"__list__": [V...]}. */

static tp_status decode_meta_val(reader *r, const json_t *j, const char *path, int depth, tp_value *out) {
    *out = tp_value_none();
    if ((size_t)depth > r->lim.depth)
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s: nested deeper than %zu (max_depth)", path, r->lim.depth);
    if (json_is_null(j)) return TP_OK;
    if (json_is_object(j) && (json_object_get(j, "__tuple__") || json_object_get(j, "__list__")) &&
        json_object_size(j) == 1) {
        bool tuple = json_object_get(j, "__tuple__") != NULL;
        const json_t *arr = json_object_get(j, tuple ? "__tuple__" : "__list__");
        if (!json_is_array(arr) || json_array_size(arr) > r->lim.items)
            return tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected an array", path);
        tp_status st = tuple ? tp_value_tuple((int64_t)json_array_size(arr), out)
                             : tp_value_list((int64_t)json_array_size(arr), out);
        if (st != TP_OK) return tp__sd_note(r, st);
        for (size_t i = 0; i < json_array_size(arr); i++) {
            char sub[512];
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            tp_value item;
            st = decode_meta_val(r, json_array_get(arr, i), sub, depth + 1, &item);
            if (st == TP_OK && (st = tp_value_seq_set(out, (int64_t)i, &item)) != TP_OK) tp__sd_note(r, st);
            if (st != TP_OK) {
                tp_value_clear(out);
                return st;
            }
        }
        return TP_OK;
    }
    static const char *const fields[] = {"dtype", "shape", NULL};
    TP_TRY(check_fields(r, j, path, fields, NULL));
    const json_t *dt = json_object_get(j, "dtype"), *shape = json_object_get(j, "shape");
    tp_dtype dtype;
    if (!json_is_string(dt) || tp_dtype_from_name(json_string_value(dt), &dtype) != TP_OK)
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s.dtype: unknown dtype", path);
    if (!json_is_array(shape) || json_array_size(shape) > TP_MAX_DIMS)
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s.shape: expected an array of at most %d sizes", path, TP_MAX_DIMS);
    int64_t sizes[TP_MAX_DIMS];
    int nd = (int)json_array_size(shape);
    for (int k = 0; k < nd; k++) {
        const json_t *s = json_array_get(shape, (size_t)k);
        if (!json_is_integer(s) || json_integer_value(s) < 0)
            return tp__sd_report(r, TP_ERR_CORRUPT, "%s.shape[%d]: expected a non-negative integer", path, k);
        sizes[k] = json_integer_value(s);
    }
    tp_tensor *m;
    tp_status st = tp_tensor_meta(dtype, nd, sizes, &m);
    if (st == TP_ERR_NOMEM) return tp__sd_note(r, st); /* out of memory, not a bad shape */
    if (st != TP_OK) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: %s", path, tp_last_error());
    *out = tp_value_tensor(m);
    return TP_OK;
}

/* ---- state ----------------------------------------------------------------- */

/* The state tensor for target (borrowed from the reader's list), fetched
 * once through the callback. A target found missing is remembered (tensor
 * NULL), so that verify mode reports it once however many nodes and specs
 * name it. */
static tp_status fetch_state(reader *r, const char *target, tp_state_kind kind, bool persistent, const char *node,
                             tp_tensor **out) {
    *out = NULL;
    for (int i = 0; i < r->n_fetched; i++)
        if (strcmp(r->fetched[i].target, target) == 0) {
            *out = r->fetched[i].tensor;
            return *out ? TP_OK : TP_ERR_CORRUPT; /* missing: reported already */
        }
    const tp_serde_read_options *o = r->opts;
    if (!o || !o->state)
        return tp__sd_report(r, TP_ERR_MISSING, "node %s: no state was given for %s '%s'", node, tp_state_kind_name(kind), target);
    tp_tensor *t = NULL;
    tp_status st = o->state(o->state_ctx, target, kind, &t);
    if (st == TP_ERR_NOT_FOUND || (st == TP_OK && !t)) {
        st = tp__sd_report(r, TP_ERR_CORRUPT, "node %s: %s '%s' has no stored tensor", node, tp_state_kind_name(kind), target);
        if (keep_going(r, st)) TP_TRY(add_fetched(r, target, kind, persistent, NULL));
        return st;
    }
    if (st != TP_OK) {
        tp_error_context("node %s: %s '%s'", node, tp_state_kind_name(kind), target);
        return tp__sd_note(r, st);
    }
    TP_TRY(add_fetched(r, target, kind, persistent, t));
    *out = t;
    return TP_OK;
}

/* Keep t (taken over; NULL: target is missing) as the state for target. */
static tp_status add_fetched(reader *r, const char *target, tp_state_kind kind, bool persistent, tp_tensor *t) {
    if (r->n_fetched == r->cap_fetched) {
        int cap = r->cap_fetched ? 2 * r->cap_fetched : 16;
        void *p = tp_realloc(r->fetched, (size_t)cap * sizeof *r->fetched);
        if (!p) {
            tp_tensor_free(t);
            return tp__sd_note(r, tp_error(TP_ERR_NOMEM, "out of memory"));
        }
        r->fetched = p;
        r->cap_fetched = cap;
    }
    char *copy = tp_strdup(target);
    if (!copy) {
        tp_tensor_free(t);
        return tp__sd_note(r, tp_error(TP_ERR_NOMEM, "out of memory"));
    }
    r->fetched[r->n_fetched++] = (struct fetched){copy, kind, persistent, t};
    return TP_OK;
}

static tp_state_kind state_kind_of_input(tp_input_kind k) {
    return k == TP_INPUT_PARAMETER ? TP_STATE_PARAMETER : k == TP_INPUT_BUFFER ? TP_STATE_BUFFER : TP_STATE_CONSTANT;
}

/* ---- one node ----------------------------------------------------------------- */

/* "float32 [4, 3]" */
static void describe_tensor(const tp_tensor *t, char *buf, size_t size) {
    int n = snprintf(buf, size, "%s [", tp_dtype_name(tp_tensor_dtype(t)));
    for (int k = 0; k < tp_tensor_ndim(t) && n > 0 && (size_t)n < size; k++)
        n += snprintf(buf + n, size - (size_t)n, "%s%" PRId64, k ? ", " : "", tp_tensor_sizes(t)[k]);
    if (n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, "]");
}

/* A state placeholder's document meta (tpexport writes one) must describe
 * the stored tensor: TP_ERR_TYPE / TP_ERR_SHAPE naming the node otherwise. */
static tp_status check_state_meta(reader *r, const char *node, const char *target, const tp_tensor *t,
                                  const json_t *meta, const char *path) {
    char sub[512];
    snprintf(sub, sizeof sub, "%s.meta.val", path);
    tp_value declared;
    TP_TRY(decode_meta_val(r, json_object_get(meta, "val"), sub, 0, &declared));
    tp_status st = TP_OK;
    if (declared.kind != TP_VAL_TENSOR) {
        st = tp__sd_report(r, TP_ERR_CORRUPT, "%s: a state placeholder's meta must describe a tensor", sub);
    } else {
        const tp_tensor *m = declared.u.tensor;
        bool same_dtype = tp_tensor_dtype(m) == tp_tensor_dtype(t);
        bool same_shape = tp_tensor_ndim(m) == tp_tensor_ndim(t) &&
                          memcmp(tp_tensor_sizes(m), tp_tensor_sizes(t), (size_t)tp_tensor_ndim(t) * sizeof(int64_t)) == 0;
        if (!same_dtype || !same_shape) {
            char have[160], want[160];
            describe_tensor(t, have, sizeof have);
            describe_tensor(m, want, sizeof want);
            st = tp__sd_report(r, same_dtype ? TP_ERR_SHAPE : TP_ERR_TYPE,
                        "node %s: stored tensor '%.200s' is %s but the graph declares %s", node, target, have, want);
        }
    }
    tp_value_clear(&declared);
    return st;
}

static tp_status read_placeholder(vctx *c, doc_node *d, const char *target, const tp_value *args,
                                  const tp_value *kwargs, const json_t *meta, const char *path) {
    reader *r = c->r;
    if (tp_value_len(args) > 1 || tp_value_len(kwargs) != 0)
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s: a placeholder takes at most one default argument", path);
    tp_node *n;
    tp_status st = tp__graph_create_node_named(r->graph, TP_NODE_PLACEHOLDER, target, args, kwargs, d->name, &n);
    if (st != TP_OK) return tp__sd_note(r, st);
    tp__sd_set_node(d, n);
    /* meta: the state tensor, else the document's meta, else the example input */
    tp_value val = tp_value_none();
    int k = tp_signature_find_input(r->sig, d->name);
    const tp_input_spec *spec = k >= 0 ? tp_signature_input(r->sig, k) : NULL;
    if (spec && spec->target && spec->kind != TP_INPUT_USER_INPUT && spec->kind != TP_INPUT_TOKEN &&
        spec->kind != TP_INPUT_CUSTOM_OBJ) {
        tp_tensor *t;
        TP_TRY(fetch_state(r, spec->target, state_kind_of_input(spec->kind), spec->persistent != TP_PERSISTENT_NO,
                           d->name, &t));
        if (meta && json_object_get(meta, "val")) TP_TRY(check_state_meta(r, d->name, spec->target, t, meta, path));
        val = tp_value_tensor(tp_tensor_retain(t));
    } else if (meta && json_object_get(meta, "val")) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s.meta.val", path);
        TP_TRY(decode_meta_val(r, json_object_get(meta, "val"), sub, 0, &val));
    } else {
        const tp_value *ex = tp_value_dict_get(&r->examples, d->name);
        if (ex && (st = tp_value_copy(ex, &val)) != TP_OK) return tp__sd_note(r, st);
    }
    st = tp_node_set_meta_val(n, &val);
    tp_value_clear(&val);
    if (st != TP_OK) return tp__sd_report(r, st, "%s: %s", path, tp_last_error());
    return TP_OK;
}

/* x.view(x.size(0), ..., x.size(k-1), -1) (or reshape, sizes in a list
 * too) where the sizes are symbolic: flatten(x, k). *done tells whether
 * the node matched and was built. */
static tp_status try_flatten_pattern(reader *r, doc_node *d, const json_t *jn, bool *done) {
    *done = false;
    const json_t *a = json_object_get(json_object_get(jn, "args"), "__tuple__");
    const json_t *k = json_object_get(json_object_get(jn, "kwargs"), "__dict__");
    if (!json_is_array(a) || json_array_size(a) < 2 || !json_is_array(k) || json_array_size(k) != 0) return TP_OK;
    const json_t *self = json_array_get(a, 0), *sizes = a;
    size_t first = 1;
    if (json_array_size(a) == 2 && json_is_object(json_array_get(a, 1))) {
        const json_t *o = json_array_get(a, 1);
        sizes = json_object_get(o, "__list__") ? json_object_get(o, "__list__") : json_object_get(o, "__tuple__");
        first = 0;
        if (!json_is_array(sizes)) return TP_OK;
    }
    const json_t *sref = json_is_object(self) ? json_object_get(self, "__node__") : NULL;
    int spos = json_is_string(sref) ? tp__sd_find_doc_node(r, json_string_value(sref)) : -1;
    if (spos < 0 || spos >= r->current || r->nodes[spos].state != DOC_NODE) return TP_OK;
    tp_node *x = r->nodes[spos].node;
    size_t n = json_array_size(sizes);
    if (n < first + 2 || !json_is_integer(json_array_get(sizes, n - 1)) || json_integer_value(json_array_get(sizes, n - 1)) != -1)
        return TP_OK;
    for (size_t i = first; i + 1 < n; i++) {
        const json_t *e = json_array_get(sizes, i);
        const json_t *ref = json_is_object(e) ? json_object_get(e, "__node__") : NULL;
        int pos = json_is_string(ref) ? tp__sd_find_doc_node(r, json_string_value(ref)) : -1;
        if (pos < 0 || pos >= r->current || r->nodes[pos].state != DOC_SYMSIZE || r->nodes[pos].node != x ||
            r->nodes[pos].sym_dim != (int64_t)(i - first))
            return TP_OK;
    }
    tp_node *out = NULL;
    tp_value vals[3] = {tp_value_node(x), tp_value_int((int64_t)(n - 1 - first)), tp_value_int(-1)};
    tp_status st = tp__sd_add_call_values(r, d->name, TP_OP_FLATTEN, vals, 3, &out);
    if (out) tp__sd_set_node(d, out);
    *done = true;
    return st;
}

static const char *const g_node_fields[] = {"op", "target", "args", "kwargs", "name", NULL};

static const char *const g_node_optional[] = {"meta", NULL};

static tp_status read_node(reader *r, int pos, const json_t *jn) {
    char path[64];
    snprintf(path, sizeof path, "graph.nodes[%d]", pos);
    r->current = pos;
    doc_node *d = &r->nodes[pos];
    TP_TRY(check_fields(r, jn, path, g_node_fields, g_node_optional));
    const json_t *meta = json_object_get(jn, "meta");
    if (meta) {
        char sub[80];
        snprintf(sub, sizeof sub, "%s.meta", path);
        static const char *const meta_fields[] = {"val", NULL};
        TP_TRY(check_fields(r, meta, sub, NULL, meta_fields));
    }
    const char *op;
    TP_TRY(get_string(r, jn, "op", path, false, &op));
    const json_t *target = json_object_get(jn, "target");
    char tpath[80];
    snprintf(tpath, sizeof tpath, "%s.target", path);
    if (!json_is_object(target)) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected an object, got %s", tpath, tp__sd_json_kind(target));
    const char *tkind;
    TP_TRY(get_string(r, target, "kind", tpath, false, &tkind));
    if (!tkind) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: missing field 'kind'", tpath);
    static const char *const name_fields[] = {"kind", "name", NULL};
    static const char *const ref_fields[] = {"kind", "module", "qualname", NULL};
    static const char *const pickle_fields[] = {"kind", "data", NULL};

    bool is_function = strcmp(op, "call_function") == 0, is_method = strcmp(op, "call_method") == 0;
    const char *tname = NULL;
    const tp_serde_op_entry *entry = NULL;
    if (is_function) {
        if (strcmp(tkind, "pickle") == 0) {
            TP_TRY(check_fields(r, target, tpath, pickle_fields, NULL));
            return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: pickled function target cannot be loaded safely", d->name);
        }
        if (strcmp(tkind, "ref") != 0)
            return tp__sd_report(r, TP_ERR_CORRUPT, "%s.kind: a call_function target must be \"ref\", got \"%.32s\"", tpath, tkind);
        TP_TRY(check_fields(r, target, tpath, ref_fields, NULL));
        const char *module, *qualname;
        TP_TRY(get_string(r, target, "module", tpath, false, &module));
        TP_TRY(get_string(r, target, "qualname", tpath, false, &qualname));
        entry = tp__serde_find_function(module, qualname);
        if (!entry) return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: unsupported function %.200s.%.200s", d->name, module, qualname);
    } else {
        bool method_kind = strcmp(tkind, "method") == 0;
        if (method_kind != is_method || (!method_kind && strcmp(tkind, "name") != 0))
            return tp__sd_report(r, TP_ERR_CORRUPT, "%s.kind: \"%.32s\" is not a target kind for a %.32s node", tpath, tkind, op);
        TP_TRY(check_fields(r, target, tpath, name_fields, NULL));
        TP_TRY(get_string(r, target, "name", tpath, false, &tname));
        if (is_method) {
            entry = tp__serde_find_method(tname);
            if (!entry) return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: unsupported method '%.200s'", d->name, tname);
        }
    }

    vctx c = {.r = r, .node = d->name};
    tp_status st;
    if (entry && (entry->special == TP_SERDE_GETITEM || entry->special == TP_SERDE_SETITEM)) {
        tp_value kwargs;
        char sub[80];
        snprintf(sub, sizeof sub, "%s.kwargs", path);
        const json_t *jargs = json_object_get(jn, "args");
        if (!json_is_object(jargs) || json_object_size(jargs) != 1 || !json_object_get(jargs, "__tuple__"))
            return tp__sd_report(r, TP_ERR_CORRUPT, "%s.args: expected a {\"__tuple__\": [...]} of arguments", path);
        TP_TRY(tp__sd_decode_value(&c, json_object_get(jn, "kwargs"), sub, 0, &kwargs));
        if (kwargs.kind != TP_VAL_DICT) {
            tp_value_clear(&kwargs);
            return tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected a {\"__dict__\": [...]} of keyword arguments", sub);
        }
        st = entry->special == TP_SERDE_GETITEM ? tp__sd_build_getitem(&c, d, jargs, path, &kwargs)
                                                : tp__sd_build_setitem(&c, d, jargs, path, &kwargs);
        tp_value_clear(&kwargs);
        return c.broken_ref ? TP_ERR_VERIFY : st;
    }
    if (entry && (entry->op == TP_OP_VIEW || entry->op == TP_OP_RESHAPE) && r->dynamic) {
        bool done = false;
        st = try_flatten_pattern(r, d, jn, &done);
        if (st != TP_OK || done) return st;
    }
    tp_value args, kwargs;
    st = decode_args(&c, jn, path, &args, &kwargs);
    if (st != TP_OK) return c.broken_ref ? TP_ERR_VERIFY : st;

    if (strcmp(op, "placeholder") == 0) {
        if (!valid_identifier(tname, r->lim.name)) st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.name: '%.64s' is not a valid input name", tpath, tname);
        else st = read_placeholder(&c, d, tname, &args, &kwargs, meta, path);
    } else if (strcmp(op, "get_attr") == 0) {
        tp_node *n = NULL;
        tp_tensor *t = NULL;
        if (!tp__sd_valid_target(tname, r->lim.name)) {
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.name: '%.64s' is not a valid attribute path", tpath, tname);
        } else if (tp_value_len(&args) || tp_value_len(&kwargs)) {
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s: a get_attr node takes no arguments", path);
        } else if ((st = fetch_state(r, tname, TP_STATE_CONSTANT, true, d->name, &t)) == TP_OK) {
            st = tp__graph_create_node_named(r->graph, TP_NODE_GET_ATTR, tname, NULL, NULL, d->name, &n);
            if (st == TP_OK) {
                tp__sd_set_node(d, n);
                tp_value v = tp_value_tensor(tp_tensor_retain(t));
                st = tp_node_set_meta_val(n, &v);
                tp_value_clear(&v);
            }
            if (st != TP_OK) tp__sd_note(r, st);
        }
    } else if (strcmp(op, "output") == 0) {
        tp_node *n = NULL;
        if (tp_value_len(&args) != 1 || tp_value_len(&kwargs) != 0) {
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.args: the output node takes exactly one value", path);
        } else if (strcmp(tname, "output") != 0) {
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.name: the output target must be \"output\", got \"%.64s\"", tpath, tname);
        } else {
            st = tp__graph_create_node_named(r->graph, TP_NODE_OUTPUT, "output", &args, NULL, d->name, &n);
            if (st == TP_OK) tp__sd_set_node(d, n);
            else tp__sd_note(r, st);
        }
    } else if (strcmp(op, "call_module") == 0) {
        st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: call_module targets are not supported", d->name);
    } else if (is_function || is_method) {
        if (entry->special == TP_SERDE_PLAIN) st = build_plain(r, d, entry, entry->op, &args, &kwargs);
        else if (entry->special == TP_SERDE_BINOP) st = build_binop(r, d, entry, &args, &kwargs);
        else st = build_special(&c, d, entry, &args, &kwargs);
    } else {
        st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.op: unknown node kind '%.32s'", path, op);
    }
    tp_value_clear(&args);
    tp_value_clear(&kwargs);
    return st;
}

/* Pre-scan: names (valid, unique) and the single output node at the end. */
static tp_status scan_nodes(reader *r, const json_t *nodes) {
    size_t n = json_array_size(nodes);
    if (n > r->lim.nodes)
        return tp__sd_report(r, TP_ERR_CORRUPT, "graph.nodes: %zu nodes exceed the limit of %zu (max_nodes)", n, r->lim.nodes);
    r->nodes = tp_calloc(n ? n : 1, sizeof *r->nodes);
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    r->index = tp_calloc(cap, sizeof *r->index);
    if (!r->nodes || !r->index) return tp__sd_note(r, tp_error(TP_ERR_NOMEM, "out of memory reading %zu nodes", n));
    r->index_cap = cap;
    r->n_nodes = (int)n;
    tp_status first = TP_OK;
    int outputs = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *jn = json_array_get(nodes, i);
        doc_node *d = &r->nodes[i];
        d->folded = tp_value_none();
        d->name = "";
        tp_status st = TP_OK;
        const json_t *name = json_is_object(jn) ? json_object_get(jn, "name") : NULL;
        const json_t *op = json_is_object(jn) ? json_object_get(jn, "op") : NULL;
        if (!json_is_object(jn)) st = tp__sd_report(r, TP_ERR_CORRUPT, "graph.nodes[%zu]: expected an object, got %s", i, tp__sd_json_kind(jn));
        else if (!json_is_string(name))
            st = tp__sd_report(r, TP_ERR_CORRUPT, "graph.nodes[%zu].name: expected a string, got %s", i, name ? tp__sd_json_kind(name) : "nothing");
        else if (!valid_identifier(json_string_value(name), r->lim.name))
            st = tp__sd_report(r, TP_ERR_CORRUPT, "graph.nodes[%zu].name: '%.64s' is not a valid node name", i, json_string_value(name));
        else {
            d->name = json_string_value(name);
            if (!index_doc_node(r, (int)i)) {
                st = tp__sd_report(r, TP_ERR_CORRUPT, "graph.nodes[%zu].name: duplicate node name '%.64s'", i, d->name);
                d->name = "";
            }
        }
        if (st != TP_OK) {
            d->state = DOC_BROKEN;
            if (first == TP_OK) first = st;
            if (!keep_going(r, st)) return st;
        }
        if (json_is_string(op) && strcmp(json_string_value(op), "output") == 0) {
            outputs++;
            if (i + 1 != n) {
                st = tp__sd_report(r, TP_ERR_CORRUPT, "graph.nodes[%zu]: the output node must be the last node", i);
                if (first == TP_OK) first = st;
                if (!keep_going(r, st)) return st;
            }
        }
    }
    if (outputs == 0) {
        tp_status st = tp__sd_report(r, TP_ERR_CORRUPT, "graph.nodes: the graph has no output node");
        if (first == TP_OK) first = st;
    }
    return first;
}

static tp_status read_graph(reader *r, const json_t *graph) {
    static const char *const fields[] = {"nodes", NULL};
    TP_TRY(check_fields(r, graph, "graph", fields, NULL));
    const json_t *nodes;
    TP_TRY(get_array(r, graph, "nodes", "graph", &nodes));
    tp_status first = scan_nodes(r, nodes);
    if (first != TP_OK && !keep_going(r, first)) return first;
    for (int i = 0; i < r->n_nodes; i++) {
        if (r->nodes[i].state == DOC_BROKEN) continue;
        tp_status st = read_node(r, i, json_array_get(nodes, (size_t)i));
        if (st != TP_OK) {
            if (r->nodes[i].state == DOC_PENDING || st == TP_ERR_VERIFY) r->nodes[i].state = DOC_BROKEN;
            if (st == TP_ERR_VERIFY && r->problems) continue; /* a reference to a broken node */
            if (first == TP_OK) first = st;
            if (!keep_going(r, st)) return st;
        }
    }
    r->current = r->n_nodes;
    return first;
}

/* ======================================================================
 * argument specs, tree specs, signature, call graph
 * ====================================================================== */

/* A constant's value: null, bool, int, float (or a non-finite float) or str. */
static tp_status read_scalar(reader *r, const json_t *j, const char *path, tp_value *out) {
    *out = tp_value_none();
    switch (json_typeof(j)) {
    case JSON_NULL: return TP_OK;
    case JSON_TRUE:
    case JSON_FALSE: *out = tp_value_bool(json_is_true(j)); return TP_OK;
    case JSON_INTEGER: *out = tp_value_int(json_integer_value(j)); return TP_OK;
    case JSON_REAL: *out = tp_value_float(json_real_value(j)); return TP_OK;
    case JSON_STRING: return tp__sd_note(r, tp_value_str(json_string_value(j), out));
    case JSON_OBJECT:
        if (json_object_size(j) == 1 && json_is_string(json_object_get(j, "__float__"))) {
            vctx c = {.r = r, .node = "?"};
            return tp__sd_decode_value(&c, j, path, 0, out);
        }
        break;
    default: break;
    }
    return tp__sd_report(r, TP_ERR_UNSUPPORTED, "%s: a constant must be None, a bool, a number or a string, got %s", path,
                  tp__sd_json_kind(j));
}

/* An argument spec; strings are borrowed from the JSON tree, a constant's
 * value is stored in *value (the caller clears it). */
static tp_status read_arg(reader *r, const json_t *j, const char *path, tp_arg_spec *out, tp_value *value) {
    *value = tp_value_none();
    if (!json_is_object(j)) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected an object, got %s", path, tp__sd_json_kind(j));
    const char *t;
    TP_TRY(get_string(r, j, "t", path, false, &t));
    if (!t) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: missing field 't'", path);
    static const char *const plain[] = {"t", "name", NULL};
    static const char *const custom[] = {"t", "name", "class_fqn", "fake_val", NULL};
    static const char *const constant[] = {"t", "name", "value", NULL};
    const char *name = NULL;
    if (strcmp(t, "ConstantArgument") == 0) {
        TP_TRY(check_fields(r, j, path, constant, NULL));
        TP_TRY(get_string(r, j, "name", path, true, &name));
        char sub[512];
        snprintf(sub, sizeof sub, "%s.value", path);
        TP_TRY(read_scalar(r, json_object_get(j, "value"), sub, value));
        *out = tp_arg_constant(name ? name : "", *value);
        return TP_OK;
    }
    if (strcmp(t, "CustomObjArgument") == 0) {
        TP_TRY(check_fields(r, j, path, custom, NULL));
        const char *fqn;
        TP_TRY(get_string(r, j, "name", path, false, &name));
        TP_TRY(get_string(r, j, "class_fqn", path, false, &fqn));
        if (!json_is_null(json_object_get(j, "fake_val")))
            return tp__sd_report(r, TP_ERR_UNSUPPORTED, "%s.fake_val: must be null", path);
        *out = tp_arg_custom_obj(name, fqn);
        return TP_OK;
    }
    TP_TRY(check_fields(r, j, path, plain, NULL));
    TP_TRY(get_string(r, j, "name", path, false, &name));
    if (!name || !*name) return tp__sd_report(r, TP_ERR_CORRUPT, "%s.name: an argument needs a name", path);
    if (strcmp(t, "TensorArgument") == 0) *out = tp_arg_tensor(name);
    else if (strcmp(t, "TokenArgument") == 0) *out = tp_arg_token(name);
    else if (strcmp(t, "SymIntArgument") == 0) *out = tp_arg_sym_int(name);
    else if (strcmp(t, "SymFloatArgument") == 0) *out = (tp_arg_spec){.kind = TP_ARGK_SYM_FLOAT, .name = name};
    else if (strcmp(t, "SymBoolArgument") == 0) *out = (tp_arg_spec){.kind = TP_ARGK_SYM_BOOL, .name = name};
    else return tp__sd_report(r, TP_ERR_CORRUPT, "%s.t: unknown argument type '%.64s'", path, t);
    out->value = tp_value_none();
    return TP_OK;
}

/* tensorplay's tree spec JSON -> tp_treespec. none_leaves (may be NULL):
 * leaf numbers (in order) that stand for a None value, which tpexport's
 * trees hold as "none" specs; *leaf counts leaves as they go. */
typedef struct leaf_marks {
    const bool *none;
    int64_t n;
    int64_t next;
} leaf_marks;

static tp_status read_treespec(reader *r, const json_t *j, const char *path, int depth, leaf_marks *marks,
                               tp_treespec **out) {
    *out = NULL;
    if ((size_t)depth > r->lim.depth)
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s: tree nested deeper than %zu (max_depth)", path, r->lim.depth);
    if (!json_is_object(j)) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected a tree spec object, got %s", path, tp__sd_json_kind(j));
    const char *t;
    TP_TRY(get_string(r, j, "t", path, false, &t));
    if (!t) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: missing field 't'", path);
    tp_status st;
    if (strcmp(t, "leaf") == 0) {
        static const char *const f[] = {"t", NULL};
        static const char *const opt[] = {"ctx", "c", NULL};
        TP_TRY(check_fields(r, j, path, f, opt));
        bool none = false;
        if (marks) {
            none = marks->next < marks->n && marks->none[marks->next];
            marks->next++;
        }
        st = none ? tp_treespec_none(out) : tp_treespec_leaf(out);
        return tp__sd_note(r, st);
    }
    if (strcmp(t, "ref") == 0 || strcmp(t, "pickle") == 0) {
        const char *m = NULL, *q = NULL;
        if (t[0] == 'r') {
            get_string(r, j, "module", path, true, &m);
            get_string(r, j, "qualname", path, true, &q);
        }
        return tp__sd_report(r, TP_ERR_UNSUPPORTED, "%s: tree spec of type %.100s%s%.100s is not supported", path,
                      m ? m : "(pickled)", m ? "." : "", q ? q : "");
    }
    tp_tree_kind kind;
    if (strcmp(t, "tuple") == 0) kind = TP_TREE_TUPLE;
    else if (strcmp(t, "list") == 0) kind = TP_TREE_LIST;
    else if (strcmp(t, "dict") == 0) kind = TP_TREE_DICT;
    else return tp__sd_report(r, TP_ERR_CORRUPT, "%s.t: unknown tree spec type '%.32s'", path, t);
    static const char *const f[] = {"t", NULL};
    static const char *const opt[] = {"ctx", "c", NULL};
    TP_TRY(check_fields(r, j, path, f, opt));
    const json_t *c = json_object_get(j, "c"), *ctx = json_object_get(j, "ctx");
    if (c && !json_is_array(c)) return tp__sd_report(r, TP_ERR_CORRUPT, "%s.c: expected an array, got %s", path, tp__sd_json_kind(c));
    size_t n = c ? json_array_size(c) : 0;
    if (n > r->lim.items) return tp__sd_report(r, TP_ERR_CORRUPT, "%s.c: too many children", path);
    const json_t *keys = NULL;
    if (kind == TP_TREE_DICT) {
        keys = json_is_object(ctx) && json_object_size(ctx) == 1 ? json_object_get(ctx, "__tuple__") : ctx;
        if (!json_is_array(keys)) return tp__sd_report(r, TP_ERR_CORRUPT, "%s.ctx: a dict spec needs its keys", path);
        if (json_array_size(keys) != n)
            return tp__sd_report(r, TP_ERR_CORRUPT, "%s.ctx: %zu keys for %zu children", path, json_array_size(keys), n);
        for (size_t i = 0; i < n; i++)
            if (!json_is_string(json_array_get(keys, i)))
                return tp__sd_report(r, TP_ERR_UNSUPPORTED, "%s.ctx[%zu]: dict keys must be strings", path, i);
    } else if (ctx && !json_is_null(ctx)) {
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s.ctx: a %s spec has no context", path, t);
    }
    tp_treespec **kids = tp_calloc(n ? n : 1, sizeof *kids);
    const char **knames = tp_calloc(n ? n : 1, sizeof *knames);
    if (!kids || !knames) {
        tp_free(kids);
        tp_free(knames);
        return tp__sd_note(r, tp_error(TP_ERR_NOMEM, "out of memory reading a tree spec"));
    }
    st = TP_OK;
    size_t made = 0;
    for (size_t i = 0; i < n && st == TP_OK; i++) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s.c[%zu]", path, i);
        st = read_treespec(r, json_array_get(c, i), sub, depth + 1, marks, &kids[i]);
        if (st == TP_OK) made++;
        if (keys) knames[i] = json_string_value(json_array_get(keys, i));
    }
    if (st == TP_OK) {
        st = tp_treespec_new(kind, kids, (int64_t)n, knames, out);
        if (st != TP_OK) st = tp__sd_report(r, st == TP_ERR_DUPLICATE ? TP_ERR_CORRUPT : st, "%s: %s", path, tp_last_error());
    } else {
        for (size_t i = 0; i < made; i++) tp_treespec_free(kids[i]);
    }
    tp_free(kids);
    tp_free(knames);
    return st;
}

static tp_status read_optional_spec(reader *r, const json_t *obj, const char *key, const char *path,
                                    leaf_marks *marks, tp_treespec **out) {
    *out = NULL;
    const json_t *j = json_object_get(obj, key);
    if (!j || json_is_null(j)) return TP_OK;
    char sub[512];
    snprintf(sub, sizeof sub, "%s.%s", path, key);
    return read_treespec(r, j, sub, 0, marks, out);
}

static tp_status read_input_specs(reader *r, const json_t *specs) {
    tp_status first = TP_OK;
    static const char *const req[] = {"kind", "arg", NULL};
    static const char *const opt[] = {"target", "persistent", NULL};
    for (size_t i = 0; i < json_array_size(specs); i++) {
        char path[96];
        snprintf(path, sizeof path, "signature.input_specs[%zu]", i);
        const json_t *j = json_array_get(specs, i);
        tp_status st = check_fields(r, j, path, req, opt);
        const char *kind_name = NULL, *target = NULL;
        tp_input_kind kind = TP_INPUT_USER_INPUT;
        tp_arg_spec arg;
        tp_value value = tp_value_none();
        if (st == TP_OK) st = get_string(r, j, "kind", path, false, &kind_name);
        if (st == TP_OK && (!kind_name || tp_input_kind_from_name(kind_name, &kind) != TP_OK))
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.kind: unknown input kind '%.32s'", path, kind_name ? kind_name : "");
        if (st == TP_OK) st = get_string(r, j, "target", path, true, &target);
        const json_t *pers = json_object_get(j, "persistent");
        if (st == TP_OK && pers && !json_is_null(pers) && !json_is_boolean(pers))
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.persistent: expected a bool or null, got %s", path, tp__sd_json_kind(pers));
        char sub[128];
        snprintf(sub, sizeof sub, "%s.arg", path);
        if (st == TP_OK) st = read_arg(r, json_object_get(j, "arg"), sub, &arg, &value);
        bool state = kind == TP_INPUT_PARAMETER || kind == TP_INPUT_BUFFER || kind == TP_INPUT_CONSTANT_TENSOR ||
                     kind == TP_INPUT_CUSTOM_OBJ;
        if (st == TP_OK && state && !tp__sd_valid_target(target, r->lim.name))
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.target: a %s input needs a valid target, got '%.64s'", path, kind_name,
                        target ? target : "null");
        if (st == TP_OK && kind == TP_INPUT_CUSTOM_OBJ)
            st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "%s: custom object inputs are not supported", path);
        if (st == TP_OK && !state && target)
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.target: a %s input has no target", path, kind_name);
        if (st == TP_OK && tp_signature_find_input(r->sig, arg.name) >= 0 && *arg.name)
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.arg.name: input '%.64s' is described twice", path, arg.name);
        if (st == TP_OK) {
            tp_persistence p = TP_PERSISTENT_UNSET;
            if (kind == TP_INPUT_BUFFER) p = json_is_false(pers) ? TP_PERSISTENT_NO : TP_PERSISTENT_YES;
            st = tp_signature_add_input(r->sig, kind, arg, state ? target : NULL, p);
            if (st != TP_OK) st = tp__sd_report(r, st == TP_ERR_NOMEM ? st : TP_ERR_CORRUPT, "%s: %s", path, tp_last_error());
        }
        tp_value_clear(&value);
        if (st != TP_OK) {
            if (first == TP_OK) first = st;
            if (!keep_going(r, st)) return st;
        }
    }
    return first;
}

/* Leaves of the output value as tensorplay counts them (None is a leaf). */
tp_status tp__sd_flatten_tp_style(const tp_value *v, int depth, const tp_value ***leaves, int64_t *n, int64_t *cap) {
    if (depth > TP_LIMIT_DEPTH) return tp_error(TP_ERR_CORRUPT, "output value nested deeper than %d", TP_LIMIT_DEPTH);
    if (v->kind == TP_VAL_TUPLE || v->kind == TP_VAL_LIST || v->kind == TP_VAL_DICT) {
        for (int64_t i = 0; i < v->u.seq.n; i++) TP_TRY(tp__sd_flatten_tp_style(&v->u.seq.items[i], depth + 1, leaves, n, cap));
        return TP_OK;
    }
    if (*n == *cap) {
        int64_t c = *cap ? 2 * *cap : 16;
        const tp_value **p = tp_realloc((void *)*leaves, (size_t)c * sizeof *p);
        TP_CHECK(p != NULL, TP_ERR_NOMEM, "out of memory flattening the output");
        *leaves = p;
        *cap = c;
    }
    (*leaves)[(*n)++] = v;
    return TP_OK;
}

/* Output specs, aligned with the output value; None leaves (tensorplay's
 * ConstantArgument None outputs) are dropped and reported in *none_user
 * (per user-output leaf) for the out_spec. */
static tp_status read_output_specs(reader *r, const json_t *specs, bool **none_user, int64_t *n_user) {
    *none_user = NULL;
    *n_user = 0;
    tp_node *out = tp_graph_output_node(r->graph);
    const tp_value **leaves = NULL;
    int64_t n_leaves = 0, cap = 0;
    tp_status st = TP_OK;
    if (out) {
        st = tp__sd_flatten_tp_style(tp_value_at(tp_node_args(out), 0), 0, &leaves, &n_leaves, &cap);
        if (st != TP_OK) {
            tp_free((void *)leaves);
            return tp__sd_note(r, st);
        }
        if ((int64_t)json_array_size(specs) != n_leaves) {
            tp_free((void *)leaves);
            return tp__sd_report(r, TP_ERR_CORRUPT, "signature.output_specs: the graph produces %" PRId64
                          " outputs but the signature describes %zu", n_leaves, json_array_size(specs));
        }
    }
    bool *none = tp_calloc(json_array_size(specs) + 1, sizeof *none);
    if (!none) {
        tp_free((void *)leaves);
        return tp__sd_note(r, tp_error(TP_ERR_NOMEM, "out of memory"));
    }
    int64_t n_mut = 0, user = 0;
    tp_status first = TP_OK;
    static const char *const req[] = {"kind", "arg", NULL};
    static const char *const opt[] = {"target", "persistent", NULL};
    for (size_t i = 0; i < json_array_size(specs); i++) {
        char path[96];
        snprintf(path, sizeof path, "signature.output_specs[%zu]", i);
        const json_t *j = json_array_get(specs, i);
        const char *kind_name = NULL, *target = NULL;
        tp_output_kind kind = TP_OUTPUT_USER_OUTPUT;
        tp_arg_spec arg;
        tp_value value = tp_value_none();
        st = check_fields(r, j, path, req, opt);
        if (st == TP_OK) st = get_string(r, j, "kind", path, false, &kind_name);
        if (st == TP_OK && (!kind_name || tp_output_kind_from_name(kind_name, &kind) != TP_OK))
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.kind: unknown output kind '%.32s'", path, kind_name ? kind_name : "");
        if (st == TP_OK) st = get_string(r, j, "target", path, true, &target);
        const json_t *pers = json_object_get(j, "persistent");
        if (st == TP_OK && pers && !json_is_null(pers))
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.persistent: an output spec has no persistence", path);
        char sub[128];
        snprintf(sub, sizeof sub, "%s.arg", path);
        if (st == TP_OK) st = read_arg(r, json_object_get(j, "arg"), sub, &arg, &value);
        bool mutation = kind == TP_OUTPUT_BUFFER_MUTATION || kind == TP_OUTPUT_PARAMETER_MUTATION ||
                        kind == TP_OUTPUT_USER_INPUT_MUTATION;
        bool needs_target = mutation || kind == TP_OUTPUT_GRADIENT_TO_PARAMETER || kind == TP_OUTPUT_GRADIENT_TO_USER_INPUT;
        if (st == TP_OK && needs_target && !target)
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.target: a %s output needs a target", path, kind_name);
        if (st == TP_OK && mutation && (int64_t)i != n_mut)
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s: mutation outputs must come first", path);
        if (st == TP_OK && mutation) n_mut++;
        bool is_none_leaf = st == TP_OK && out && leaves[i]->kind == TP_VAL_NONE;
        if (st == TP_OK && is_none_leaf && (arg.kind != TP_ARGK_CONSTANT || !tp__sd_is_none(&value)))
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s: the output is None but the spec is not a None constant", path);
        if (st == TP_OK && !is_none_leaf) {
            st = tp_signature_add_output(r->sig, kind, arg, needs_target ? target : NULL);
            if (st != TP_OK) st = tp__sd_report(r, st == TP_ERR_NOMEM ? st : TP_ERR_CORRUPT, "%s: %s", path, tp_last_error());
        }
        if (st == TP_OK && !mutation) {
            none[user] = is_none_leaf;
            user++;
        }
        tp_value_clear(&value);
        if (st != TP_OK) {
            if (first == TP_OK) first = st;
            if (!keep_going(r, st)) break;
        }
    }
    tp_free((void *)leaves);
    if (first != TP_OK && !keep_going(r, first)) {
        tp_free(none);
        return first;
    }
    *none_user = none;
    *n_user = user;
    return first;
}

/* Frees a signature built by read_call_signature (names are borrowed from
 * the JSON tree; constants' values are owned). */
static void call_signature_free(tp_module_call_signature *s) {
    if (!s) return;
    for (int i = 0; s->inputs && i < s->n_inputs; i++) tp_value_clear(&s->inputs[i].value);
    for (int i = 0; s->outputs && i < s->n_outputs; i++) tp_value_clear(&s->outputs[i].value);
    tp_treespec_free(s->in_spec);
    tp_treespec_free(s->out_spec);
    tp_free(s->inputs);
    tp_free(s->outputs);
    tp_free(s->forward_arg_names);
    tp_free(s);
}

static tp_status read_call_signature(reader *r, const json_t *j, const char *path, tp_module_call_signature **out) {
    *out = NULL;
    if (json_is_null(j)) return TP_OK;
    static const char *const req[] = {"inputs", "outputs", NULL};
    static const char *const opt[] = {"in_spec", "out_spec", "forward_arg_names", NULL};
    TP_TRY(check_fields(r, j, path, req, opt));
    const json_t *ins, *outs;
    TP_TRY(get_array(r, j, "inputs", path, &ins));
    TP_TRY(get_array(r, j, "outputs", path, &outs));
    const json_t *names = json_object_get(j, "forward_arg_names");
    if (names && !json_is_null(names) && (!json_is_array(names) || json_array_size(names) > r->lim.items))
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s.forward_arg_names: expected an array of strings or null", path);
    tp_module_call_signature *s = tp_calloc(1, sizeof *s);
    size_t n_in = json_array_size(ins), n_out = json_array_size(outs), n_names = json_is_array(names) ? json_array_size(names) : 0;
    tp_value *values = tp_calloc(n_in + n_out + 1, sizeof *values);
    if (s) {
        s->inputs = tp_calloc(n_in + 1, sizeof *s->inputs);
        s->outputs = tp_calloc(n_out + 1, sizeof *s->outputs);
        s->forward_arg_names = tp_calloc(n_names + 1, sizeof *s->forward_arg_names);
    }
    tp_status st = TP_OK;
    if (!s || !values || !s->inputs || !s->outputs || !s->forward_arg_names)
        st = tp__sd_note(r, tp_error(TP_ERR_NOMEM, "out of memory reading the module call graph"));
    for (size_t i = 0; st == TP_OK && i < n_in + n_out; i++) {
        bool in = i < n_in;
        char sub[512];
        snprintf(sub, sizeof sub, "%s.%s[%zu]", path, in ? "inputs" : "outputs", in ? i : i - n_in);
        tp_arg_spec *a = in ? &s->inputs[i] : &s->outputs[i - n_in];
        st = read_arg(r, json_array_get(in ? ins : outs, in ? i : i - n_in), sub, a, &values[i]);
        a->value = values[i];
        values[i] = tp_value_none();
    }
    if (st == TP_OK) {
        s->n_inputs = (int)n_in;
        s->n_outputs = (int)n_out;
    }
    for (size_t i = 0; st == TP_OK && i < n_names; i++) {
        const json_t *nm = json_array_get(names, i);
        if (!json_is_string(nm))
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.forward_arg_names[%zu]: expected a string, got %s", path, i, tp__sd_json_kind(nm));
        else s->forward_arg_names[i] = (char *)json_string_value(nm);
    }
    if (st == TP_OK) s->n_forward_arg_names = (int)n_names;
    if (st == TP_OK) st = read_optional_spec(r, j, "in_spec", path, NULL, &s->in_spec);
    if (st == TP_OK) st = read_optional_spec(r, j, "out_spec", path, NULL, &s->out_spec);
    tp_free(values); /* the values now live in the arg specs (cleared by call_signature_free) */
    if (st != TP_OK && s) {
        s->n_inputs = (int)n_in;
        s->n_outputs = (int)n_out;
        call_signature_free(s);
        s = NULL;
    }
    *out = s;
    return st;
}

/* ======================================================================
 * constraints and dynamic shapes
 * ====================================================================== */

static bool is_user_input(const reader *r, const char *name) {
    int k = tp_signature_find_input(r->sig, name);
    return k >= 0 && tp_signature_input(r->sig, k)->kind == TP_INPUT_USER_INPUT;
}

/* "xs[0]['k']" -> "xs" checked as a user input. */
static bool site_root_is_user_input(const reader *r, const char *site) {
    char root[TP_LIMIT_NAME + 1];
    size_t n = strcspn(site, "[");
    if (n == 0 || n > TP_LIMIT_NAME) return false;
    memcpy(root, site, n);
    root[n] = '\0';
    return is_user_input(r, root);
}

static tp_status read_bound(reader *r, const json_t *j, const char *path, bool nullable, int64_t *out) {
    if (nullable && (!j || json_is_null(j))) {
        *out = TP_DIM_UNBOUNDED;
        return TP_OK;
    }
    if (!json_is_integer(j))
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected an integer%s, got %s", path, nullable ? " or null" : "",
                      j ? tp__sd_json_kind(j) : "nothing");
    *out = json_integer_value(j);
    return TP_OK;
}

static tp_status read_ranges(reader *r, tp_program *p, const json_t *ranges) {
    if (!ranges) return TP_OK;
    if (!json_is_object(ranges))
        return tp__sd_report(r, TP_ERR_CORRUPT, "range_constraints: expected an object, got %s", tp__sd_json_kind(ranges));
    if (json_object_size(ranges) > r->lim.items) return tp__sd_report(r, TP_ERR_CORRUPT, "range_constraints: too many entries");
    const char *name;
    json_t *v;
    tp_status first = TP_OK;
    json_object_foreach((json_t *)ranges, name, v) {
        char path[TP_LIMIT_NAME + 64];
        snprintf(path, sizeof path, "range_constraints['%.200s']", name);
        static const char *const req[] = {"min", "max", NULL};
        int64_t lo = 0, hi = 0;
        tp_status st = check_fields(r, v, path, req, NULL);
        char sub[TP_LIMIT_NAME + 80];
        snprintf(sub, sizeof sub, "%s.min", path);
        if (st == TP_OK) st = read_bound(r, json_object_get(v, "min"), sub, false, &lo);
        snprintf(sub, sizeof sub, "%s.max", path);
        if (st == TP_OK) st = read_bound(r, json_object_get(v, "max"), sub, true, &hi);
        if (st == TP_OK && (!*name || strlen(name) > r->lim.name))
            st = tp__sd_report(r, TP_ERR_CORRUPT, "range_constraints: a symbol needs a name of 1 to %zu bytes (max_name_bytes)",
                        r->lim.name);
        if (st == TP_OK && (lo < 0 || lo > hi))
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s: invalid range [%" PRId64 ", %" PRId64 "]", path, lo, hi);
        if (st == TP_OK && (st = tp_program_add_range(p, name, lo, hi)) != TP_OK) tp__sd_note(r, st);
        if (st != TP_OK) {
            if (first == TP_OK) first = st;
            if (!keep_going(r, st)) return st;
        }
    }
    return first;
}

static tp_status read_equalities(reader *r, tp_program *p, const json_t *eqs) {
    if (!eqs) return TP_OK;
    if (!json_is_array(eqs) || json_array_size(eqs) > r->lim.items)
        return tp__sd_report(r, TP_ERR_CORRUPT, "equality_constraints: expected an array, got %s", tp__sd_json_kind(eqs));
    tp_status first = TP_OK;
    for (size_t i = 0; i < json_array_size(eqs); i++) {
        char path[96];
        snprintf(path, sizeof path, "equality_constraints[%zu]", i);
        const json_t *j = json_array_get(eqs, i);
        static const char *const req[] = {"sites", NULL};
        static const char *const opt[] = {"name", NULL};
        tp_status st = check_fields(r, j, path, req, opt);
        const char *name = NULL;
        const json_t *sites = NULL;
        if (st == TP_OK) st = get_string(r, j, "name", path, true, &name);
        if (st == TP_OK) st = get_array(r, j, "sites", path, &sites);
        if (st == TP_OK && json_array_size(sites) < 2)
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.sites: an equality constraint needs at least two sites", path);
        tp_dim_site *ds = st == TP_OK ? tp_calloc(json_array_size(sites), sizeof *ds) : NULL;
        if (st == TP_OK && !ds) st = tp__sd_note(r, tp_error(TP_ERR_NOMEM, "out of memory"));
        for (size_t k = 0; st == TP_OK && k < json_array_size(sites); k++) {
            const json_t *s = json_array_get(sites, k);
            const json_t *in = json_is_array(s) ? json_array_get(s, 0) : NULL;
            const json_t *dim = json_is_array(s) ? json_array_get(s, 1) : NULL;
            if (!json_is_array(s) || json_array_size(s) != 2 || !json_is_string(in) || !json_is_integer(dim) ||
                json_integer_value(dim) < 0 || json_integer_value(dim) >= TP_MAX_DIMS)
                st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.sites[%zu]: expected [input name, dim]", path, k);
            else if (!site_root_is_user_input(r, json_string_value(in)))
                st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.sites[%zu]: '%.64s' is not a user input", path, k, json_string_value(in));
            else ds[k] = (tp_dim_site){json_string_value(in), (int)json_integer_value(dim)};
        }
        if (st == TP_OK && (st = tp_program_add_equality(p, ds, (int)json_array_size(sites), name)) != TP_OK) tp__sd_note(r, st);
        tp_free(ds);
        if (st != TP_OK) {
            if (first == TP_OK) first = st;
            if (!keep_going(r, st)) return st;
        }
    }
    return first;
}

/* One dim's spec (null, int, __static_dim__, __dim__, __derived_dim__). */
static bool is_dim_spec(const json_t *j) {
    if (json_is_null(j) || json_is_integer(j)) return true;
    return json_is_object(j) && json_object_size(j) == 1 &&
           (json_object_get(j, "__dim__") || json_object_get(j, "__derived_dim__") || json_object_get(j, "__static_dim__"));
}

static tp_status add_symbol_range(reader *r, tp_program *p, const char *name, const json_t *dim, const char *path) {
    if (tp_program_find_range(p, name)) return TP_OK;
    int64_t lo = 0, hi = TP_DIM_UNBOUNDED;
    char sub[640];
    snprintf(sub, sizeof sub, "%s.min", path);
    const json_t *jmin = json_object_get(dim, "min");
    if (jmin && !json_is_null(jmin)) TP_TRY(read_bound(r, jmin, sub, false, &lo));
    snprintf(sub, sizeof sub, "%s.max", path);
    TP_TRY(read_bound(r, json_object_get(dim, "max"), sub, true, &hi));
    if (lo < 0 || lo > hi) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: invalid range [%" PRId64 ", %" PRId64 "]", path, lo, hi);
    tp_status st = tp_program_add_range(p, name, lo, hi);
    return st == TP_OK ? st : tp__sd_note(r, st);
}

static tp_status read_dim_rule(reader *r, tp_program *p, const json_t *j, const char *site, int dim, const char *path) {
    if (dim < 0 || dim >= TP_MAX_DIMS) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: dim %d out of range", path, dim);
    tp_dim_rule rule = {.site = {site, dim}, .scale = 1};
    if (json_is_null(j)) return TP_OK;
    if (json_is_integer(j) || json_object_get(j, "__static_dim__")) {
        const json_t *v = json_is_integer(j) ? j : json_object_get(j, "__static_dim__");
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return tp__sd_report(r, TP_ERR_CORRUPT, "%s: a static dim needs a non-negative integer", path);
        rule.kind = TP_DIM_STATIC;
        rule.value = json_integer_value(v);
    } else if (json_object_get(j, "__dim__")) {
        const json_t *d = json_object_get(j, "__dim__");
        char sub[600];
        snprintf(sub, sizeof sub, "%s.__dim__", path);
        static const char *const req[] = {"name", "min", "max", NULL};
        TP_TRY(check_fields(r, d, sub, req, NULL));
        const char *name;
        TP_TRY(get_string(r, d, "name", sub, false, &name));
        if (!name || !*name) return tp__sd_report(r, TP_ERR_CORRUPT, "%s.name: a dim needs a name", sub);
        TP_TRY(add_symbol_range(r, p, name, d, sub));
        rule.kind = TP_DIM_SYMBOL;
        rule.symbol = name;
    } else {
        const json_t *d = json_object_get(j, "__derived_dim__");
        char sub[600];
        snprintf(sub, sizeof sub, "%s.__derived_dim__", path);
        static const char *const req[] = {"name", "root", "scale", "offset", "min", "max", NULL};
        TP_TRY(check_fields(r, d, sub, req, NULL));
        const char *name, *root;
        TP_TRY(get_string(r, d, "name", sub, false, &name));
        TP_TRY(get_string(r, d, "root", sub, false, &root));
        const json_t *scale = json_object_get(d, "scale"), *offset = json_object_get(d, "offset");
        if (!root || !*root) return tp__sd_report(r, TP_ERR_CORRUPT, "%s.root: a derived dim needs a root", sub);
        if (!json_is_integer(scale))
            return tp__sd_report(r, TP_ERR_CORRUPT, "%s.scale: expected a positive integer, got %s", sub, tp__sd_json_kind(scale));
        if (json_integer_value(scale) < 1 || json_integer_value(scale) > INT32_MAX)
            return tp__sd_report(r, TP_ERR_CORRUPT,
                          "%s.scale: expected a positive integer: derived dim '%s' needs a scale from 1 to %d, got %" JSON_INTEGER_FORMAT, sub, name,
                          INT32_MAX, json_integer_value(scale));
        /* bounded so that no offset needs negating at INT64_MIN; the range
         * arithmetic is checked once all ranges are known (below) */
        if (!json_is_integer(offset))
            return tp__sd_report(r, TP_ERR_CORRUPT, "%s.offset: expected an integer, got %s", sub, tp__sd_json_kind(offset));
        if (json_integer_value(offset) < -INT32_MAX || json_integer_value(offset) > INT32_MAX)
            return tp__sd_report(r, TP_ERR_CORRUPT,
                          "%s.offset: derived dim '%s' needs an offset within [%d, %d], got %" JSON_INTEGER_FORMAT, sub,
                          name, -INT32_MAX, INT32_MAX, json_integer_value(offset));
        rule.kind = TP_DIM_DERIVED;
        rule.symbol = root;
        rule.scale = json_integer_value(scale);
        rule.offset = json_integer_value(offset);
    }
    if (rule.kind != TP_DIM_STATIC) r->dynamic = true;
    tp_status st = tp_program_add_dim_rule(p, &rule);
    return st == TP_OK ? st : tp__sd_report(r, st, "%s: %s", path, tp_last_error());
}

/* The spec of one input (or of one item of a container input) at `site`. */
static tp_status read_input_dims(reader *r, tp_program *p, const json_t *j, const char *site, const char *path,
                                 int depth) {
    if (depth > 8) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: nested too deeply", path);
    if (json_is_null(j)) return TP_OK;
    const json_t *arr = json_is_array(j) ? j : json_is_object(j) && json_object_size(j) == 1 ? json_object_get(j, "__tuple__") : NULL;
    const json_t *map = json_is_object(j) && json_object_size(j) == 1 ? json_object_get(j, "__map__") : NULL;
    char sub[600], child[TP_LIMIT_NAME + 80];
    if (arr) {
        if (!json_is_array(arr) || json_array_size(arr) > r->lim.items)
            return tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected an array", path);
        bool dims = true;
        for (size_t i = 0; i < json_array_size(arr); i++) dims = dims && is_dim_spec(json_array_get(arr, i));
        for (size_t i = 0; i < json_array_size(arr); i++) {
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            if (dims) {
                TP_TRY(read_dim_rule(r, p, json_array_get(arr, i), site, (int)i, sub));
            } else {
                snprintf(child, sizeof child, "%s[%zu]", site, i);
                TP_TRY(read_input_dims(r, p, json_array_get(arr, i), child, sub, depth + 1));
            }
        }
        return TP_OK;
    }
    if (!map || !json_is_array(map) || json_array_size(map) > r->lim.items)
        return tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected a dims spec (__map__, list, tuple or null), got %s", path, tp__sd_json_kind(j));
    for (size_t i = 0; i < json_array_size(map); i++) {
        const json_t *pair = json_array_get(map, i);
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        if (!json_is_array(pair) || json_array_size(pair) != 2)
            return tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected a [key, spec] pair", sub);
        const json_t *key = json_array_get(pair, 0);
        if (json_is_integer(key)) {
            TP_TRY(read_dim_rule(r, p, json_array_get(pair, 1), site, (int)(json_integer_value(key) < 0 || json_integer_value(key) >= TP_MAX_DIMS ? -1 : json_integer_value(key)), sub));
        } else if (json_is_string(key) && json_string_length(key) < TP_LIMIT_NAME / 2 &&
                   !strchr(json_string_value(key), '\'')) {
            snprintf(child, sizeof child, "%s['%s']", site, json_string_value(key));
            TP_TRY(read_input_dims(r, p, json_array_get(pair, 1), child, sub, depth + 1));
        } else {
            return tp__sd_report(r, TP_ERR_CORRUPT, "%s: a dims key must be a dim index or a dict key", sub);
        }
    }
    return TP_OK;
}

static tp_status read_dynamic_shapes(reader *r, tp_program *p, const json_t *ds) {
    if (!ds || json_is_null(ds)) return TP_OK;
    const json_t *map = json_is_object(ds) && json_object_size(ds) == 1 ? json_object_get(ds, "__map__") : NULL;
    if (!map) return tp__sd_report(r, TP_ERR_CORRUPT, "dynamic_shapes: expected {\"__map__\": [...]}, got %s", tp__sd_json_kind(ds));
    if (!json_is_array(map) || json_array_size(map) > r->lim.items)
        return tp__sd_report(r, TP_ERR_CORRUPT, "dynamic_shapes.__map__: expected an array");
    tp_status first = TP_OK;
    for (size_t i = 0; i < json_array_size(map); i++) {
        char path[96];
        snprintf(path, sizeof path, "dynamic_shapes[%zu]", i);
        const json_t *pair = json_array_get(map, i);
        tp_status st = TP_OK;
        if (!json_is_array(pair) || json_array_size(pair) != 2 || !json_is_string(json_array_get(pair, 0)))
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s: expected an [input name, spec] pair", path);
        else if (!is_user_input(r, json_string_value(json_array_get(pair, 0))))
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s: '%.64s' is not a user input", path, json_string_value(json_array_get(pair, 0)));
        else st = read_input_dims(r, p, json_array_get(pair, 1), json_string_value(json_array_get(pair, 0)), path, 0);
        if (st != TP_OK) {
            if (first == TP_OK) first = st;
            if (!keep_going(r, st)) return st;
        }
    }
    /* every derived dim's range (its root's, scaled and offset) fits int64 */
    for (int i = 0; i < tp_program_num_dim_rules(p); i++) {
        const tp_dim_rule *rule = tp_program_dim_rule(p, i);
        int64_t lo, hi, root_lo, root_hi;
        if (rule->kind != TP_DIM_DERIVED || tp__derived_dim_range(p, rule, &lo, &hi, &root_lo, &root_hi)) continue;
        char expr[TP_LIMIT_NAME + 64], max[32] = "unbounded";
        tp__dim_rule_expr(rule, expr, sizeof expr);
        if (root_hi != TP_DIM_UNBOUNDED) snprintf(max, sizeof max, "%" PRId64, root_hi);
        tp_status st = tp__sd_report(r, TP_ERR_CORRUPT,
                              "dynamic_shapes: derived dim %.200s.shape[%d] = %.200s overflows int64 for %.200s in "
                              "[%" PRId64 ", %s]",
                              rule->site.input, rule->site.dim, expr, rule->symbol, root_lo, max);
        if (first == TP_OK) first = st;
        if (!keep_going(r, st)) return st;
    }
    return first;
}

/* ======================================================================
 * the document
 * ====================================================================== */

static tp_status read_module_call_graph(reader *r, tp_program *p, const json_t *mcg) {
    if (!mcg) return TP_OK;
    if (!json_is_array(mcg) || json_array_size(mcg) > r->lim.items)
        return tp__sd_report(r, TP_ERR_CORRUPT, "module_call_graph: expected an array, got %s", tp__sd_json_kind(mcg));
    tp_status first = TP_OK;
    for (size_t i = 0; i < json_array_size(mcg); i++) {
        char path[96];
        snprintf(path, sizeof path, "module_call_graph[%zu]", i);
        const json_t *j = json_array_get(mcg, i);
        static const char *const req[] = {"fqn", "signature", NULL};
        const char *fqn = NULL;
        tp_module_call_signature *sig = NULL;
        tp_status st = check_fields(r, j, path, req, NULL);
        if (st == TP_OK) st = get_string(r, j, "fqn", path, false, &fqn);
        if (st == TP_OK && *fqn && !tp__sd_valid_target(fqn, r->lim.name))
            st = tp__sd_report(r, TP_ERR_CORRUPT, "%s.fqn: '%.64s' is not a module path", path, fqn);
        char sub[128];
        snprintf(sub, sizeof sub, "%s.signature", path);
        if (st == TP_OK) st = read_call_signature(r, json_object_get(j, "signature"), sub, &sig);
        if (st == TP_OK && (st = tp_program_add_module_call(p, fqn, sig)) != TP_OK) st = tp__sd_report(r, st, "%s: %s", path, tp_last_error());
        call_signature_free(sig);
        if (st != TP_OK) {
            if (first == TP_OK) first = st;
            if (!keep_going(r, st)) return st;
        }
    }
    return first;
}

static tp_status read_meta(reader *r, tp_program *p, const json_t *meta, const bool *none_user, int64_t n_user) {
    if (!meta) return TP_OK;
    static const char *const opt[] = {"num_mutations", "in_spec", "out_spec", NULL};
    TP_TRY(check_fields(r, meta, "meta", NULL, opt));
    const json_t *nm = json_object_get(meta, "num_mutations");
    if (nm && !json_is_null(nm)) {
        if (!json_is_integer(nm)) return tp__sd_report(r, TP_ERR_CORRUPT, "meta.num_mutations: expected an integer, got %s", tp__sd_json_kind(nm));
        if (json_integer_value(nm) != tp_signature_n_mutations(r->sig))
            return tp__sd_report(r, TP_ERR_CORRUPT, "meta.num_mutations: %" JSON_INTEGER_FORMAT " but the signature has %d mutation outputs",
                          json_integer_value(nm), tp_signature_n_mutations(r->sig));
    }
    tp_treespec *in = NULL, *out = NULL;
    leaf_marks marks = {none_user, n_user, 0};
    tp_status st = read_optional_spec(r, meta, "in_spec", "meta", NULL, &in);
    if (st == TP_OK) st = read_optional_spec(r, meta, "out_spec", "meta", &marks, &out);
    if (st == TP_OK && out && none_user && marks.next != n_user)
        st = tp__sd_report(r, TP_ERR_CORRUPT, "meta.out_spec: %" PRId64 " leaves for %" PRId64 " user outputs", marks.next, n_user);
    if (st == TP_OK && (st = tp_program_set_in_spec(p, in)) != TP_OK) tp__sd_note(r, st);
    if (st == TP_OK && (st = tp_program_set_out_spec(p, out)) != TP_OK) tp__sd_note(r, st);
    tp_treespec_free(in);
    tp_treespec_free(out);
    return st;
}

static tp_status set_examples(reader *r, tp_program *p) {
    for (int64_t i = 0; i < tp_value_len(&r->examples); i++) {
        const char *name = r->examples.u.seq.keys[i];
        if (!is_user_input(r, name)) continue;
        tp_status st = tp_program_set_example_input(p, name, &r->examples.u.seq.items[i]);
        if (st != TP_OK) return tp__sd_note(r, st);
    }
    return TP_OK;
}

/* Every state input of the signature is fetched (placeholders already did
 * theirs), then the program gets the tensors. */
static tp_status set_state(reader *r, tp_program *p) {
    tp_status first = TP_OK;
    for (int i = 0; i < tp_signature_n_inputs(r->sig); i++) {
        const tp_input_spec *s = tp_signature_input(r->sig, i);
        if (s->kind != TP_INPUT_PARAMETER && s->kind != TP_INPUT_BUFFER && s->kind != TP_INPUT_CONSTANT_TENSOR) continue;
        tp_tensor *t;
        tp_status st = fetch_state(r, s->target, state_kind_of_input(s->kind), s->persistent != TP_PERSISTENT_NO,
                                   s->arg.name, &t);
        if (st != TP_OK) {
            if (first == TP_OK) first = st;
            if (!keep_going(r, st)) return st;
        }
    }
    for (int i = 0; i < r->n_fetched; i++) {
        struct fetched *f = &r->fetched[i];
        if (!f->tensor) continue; /* missing: reported when fetched */
        tp_status st = tp_program_set_state(p, f->target, f->kind, f->tensor, f->persistent);
        if (st != TP_OK) {
            st = tp__sd_report(r, st == TP_ERR_NOMEM ? st : TP_ERR_CORRUPT, "state '%s': %s", f->target, tp_last_error());
            if (first == TP_OK) first = st;
            if (!keep_going(r, st)) return st;
        }
    }
    return first;
}

static const char *const g_doc_required[] = {"schema_version", "graph", "signature", NULL};

static const char *const g_doc_optional[] = {"dialect",         "module_call_graph", "range_constraints",
                                             "equality_constraints", "dynamic_shapes", "meta",
                                             "opset_version",   NULL};

static tp_status read_document(reader *r, const json_t *doc, tp_program *p) {
    TP_TRY(check_fields(r, doc, "document", g_doc_required, g_doc_optional));
    const json_t *v = json_object_get(doc, "schema_version");
    if (!json_is_integer(v) || json_integer_value(v) != 1) {
        if (json_is_integer(v))
            return tp__sd_report(r, TP_ERR_UNSUPPORTED, "schema_version: %" JSON_INTEGER_FORMAT " is not supported (expected 1)",
                          json_integer_value(v));
        return tp__sd_report(r, TP_ERR_CORRUPT, "schema_version: expected the integer 1, got %s", tp__sd_json_kind(v));
    }
    tp_status first = TP_OK;
#define STEP(expr)                                                                                                     \
    do {                                                                                                               \
        tp_status s_ = (expr);                                                                                         \
        if (s_ != TP_OK) {                                                                                             \
            if (first == TP_OK) first = s_;                                                                            \
            if (!keep_going(r, s_)) return s_;                                                                         \
        }                                                                                                              \
    } while (0)
    const char *dialect;
    STEP(get_string(r, doc, "dialect", "document", true, &dialect));
    const json_t *opset = json_object_get(doc, "opset_version");
    if (opset && !json_is_object(opset) && !json_is_null(opset))
        STEP(tp__sd_report(r, TP_ERR_CORRUPT, "opset_version: expected an object, got %s", tp__sd_json_kind(opset)));

    const json_t *sig = json_object_get(doc, "signature");
    static const char *const sig_fields[] = {"input_specs", "output_specs", NULL};
    TP_TRY(check_fields(r, sig, "signature", sig_fields, NULL));
    const json_t *in_specs, *out_specs;
    TP_TRY(get_array(r, sig, "input_specs", "signature", &in_specs));
    TP_TRY(get_array(r, sig, "output_specs", "signature", &out_specs));
    STEP(read_input_specs(r, in_specs));
    STEP(read_ranges(r, p, json_object_get(doc, "range_constraints")));
    STEP(read_equalities(r, p, json_object_get(doc, "equality_constraints")));
    STEP(read_dynamic_shapes(r, p, json_object_get(doc, "dynamic_shapes")));
    STEP(read_graph(r, json_object_get(doc, "graph")));
    bool *none_user = NULL;
    int64_t n_user = 0;
    tp_status st = read_output_specs(r, out_specs, &none_user, &n_user);
    if (st != TP_OK) {
        tp_free(none_user);
        none_user = NULL;
        n_user = 0;
        STEP(st);
    }
    st = read_meta(r, p, json_object_get(doc, "meta"), none_user, n_user);
    tp_free(none_user);
    STEP(st);
    STEP(read_module_call_graph(r, p, json_object_get(doc, "module_call_graph")));
    STEP(set_state(r, p));
    STEP(set_examples(r, p));
#undef STEP
    return first;
}

/* Add each line of a validation report ("N problems:\n- a\n- b" or one
 * message) as a problem. */
static void note_validation(reader *r, tp_status st) {
    char *msg = tp_strdup(tp_last_error());
    if (!msg) {
        tp__sd_note(r, st);
        return;
    }
    if (strncmp(msg, "- ", 2) != 0 && !strstr(msg, "\n- ")) {
        tp__sd_note(r, st);
    } else {
        char *line = msg;
        while (line && *line) {
            char *nl = strchr(line, '\n');
            if (nl) *nl = '\0';
            if (strncmp(line, "- ", 2) == 0) {
                tp_error(st, "%s", line + 2);
                tp__sd_note(r, st);
            }
            line = nl ? nl + 1 : NULL;
        }
    }
    tp_free(msg);
}

static void reader_free(reader *r) {
    for (int i = 0; i < r->n_nodes; i++) tp_value_clear(&r->nodes[i].folded);
    tp_free(r->nodes);
    tp_free(r->index);
    for (int i = 0; i < r->n_fetched; i++) {
        tp_free(r->fetched[i].target);
        tp_tensor_free(r->fetched[i].tensor);
    }
    tp_free(r->fetched);
    tp_value_clear(&r->examples);
}

tp_status tp__serde_program_from_json(const char *json, size_t len, const tp_serde_read_options *opts,
                                      tp_program **out) {
    TP_CHECK(out != NULL, TP_ERR_INVALID_ARG, "out is NULL");
    *out = NULL;
    TP_TRY(tp_ops_init());
    reader r = {.opts = opts,
                .problems = opts ? opts->problems : NULL,
                .examples = tp_value_none(),
                .lim = opts && opts->limits ? *opts->limits : tp__doc_limits_default()};
    tp_status st = TP_OK;
    if (opts && opts->example_inputs && opts->example_inputs->kind != TP_VAL_NONE) {
        if (opts->example_inputs->kind != TP_VAL_DICT)
            return tp_error(TP_ERR_INVALID_ARG, "example inputs must be a dict, not %s",
                            tp_value_kind_name(opts->example_inputs->kind));
        TP_TRY(tp_value_copy(opts->example_inputs, &r.examples));
    } else {
        TP_TRY(tp_value_dict(&r.examples));
    }
    json_t *doc = NULL;
    st = tp__sd_parse_json(json, len, "document", r.lim.document, &doc);
    if (st != TP_OK) {
        tp__sd_note(&r, st);
        reader_free(&r);
        if (r.problems && st != TP_ERR_NOMEM) return st; /* one problem: its own message */
        return st;
    }
    tp_graph *g = NULL;
    tp_signature *sig = NULL;
    tp_program *p = NULL;
    st = tp_graph_new(&g);
    if (st == TP_OK) st = tp_signature_new(&sig);
    if (st == TP_OK) {
        st = tp_program_new(g, sig, &p); /* takes both */
        g = NULL;
        sig = NULL;
    }
    tp_graph_free(g);
    tp_signature_free(sig);
    if (st == TP_OK) {
        r.graph = tp_program_graph_mut(p);
        r.sig = tp_program_signature_mut(p);
        st = read_document(&r, doc, p);
        if (st == TP_OK && r.n_problems == 0) {
            st = tp_program_validate(p);
            if (st != TP_OK) {
                if (r.problems) note_validation(&r, st);
                else tp__sd_note(&r, st);
            }
        }
    } else {
        tp__sd_note(&r, st);
    }
    json_decref(doc);
    reader_free(&r);
    if (r.n_problems == 0 && st == TP_OK) {
        *out = p;
        return TP_OK;
    }
    tp_program_free(p);
    if (r.first == TP_OK) r.first = st != TP_OK ? st : TP_ERR_INTERNAL;
    if (r.problems && r.problems->n > 1) {
        tp_sb sb = {0};
        tp__sb_printf(&sb, "%d problems:", r.n_problems);
        for (int i = 0; i < r.problems->n; i++) tp__sb_printf(&sb, "\n- %s", r.problems->items[i].message);
        if (r.n_problems > r.problems->n) tp__sb_printf(&sb, "\n- ... and %d more", r.n_problems - r.problems->n);
        char *msg = NULL;
        if (tp__sb_finish(&sb, &msg) == TP_OK) {
            tp_error(r.first, "%s", msg);
            tp_free(msg);
        }
    } else if (r.problems && r.problems->n == 1) {
        tp_error(r.first, "%s", r.problems->items[0].message);
    }
    return r.first;
}

/* ======================================================================
 * the op map's self-check (tests)
 * ====================================================================== */

tp_status tp__serde_check_op_map(void) {
    TP_TRY(tp_ops_init());
    int n;
    const tp_serde_op_entry *t = tp__serde_op_table(&n);
    tp_sb sb = {0};
    int faults = 0;
    for (int i = 0; i < n; i++) {
        const tp_serde_op_entry *e = &t[i];
        char callee[160];
        callee_name(e, callee, sizeof callee);
        for (int k = 0; k < i; k++)
            if (strcmp(t[k].name, e->name) == 0 && !((t[k].flags ^ e->flags) & TP_SERDE_SYMINT) &&
                ((!t[k].module && !e->module) ||
                                                    (t[k].module && e->module && strcmp(t[k].module, e->module) == 0))) {
                tp__sb_printf(&sb, "\n- %s appears twice", callee);
                faults++;
            }
        param_list pl;
        if (tp__sd_parse_params(e->params, &pl) != TP_OK) {
            tp__sb_printf(&sb, "\n- %s: %s", callee, tp_last_error());
            faults++;
            continue;
        }
        const tp_schema *s = e->op != TP_OP_INVALID ? tp_op_schema(e->op) : NULL;
        bool plain = e->special == TP_SERDE_PLAIN || e->special == TP_SERDE_BINOP || e->special == TP_SERDE_MAXMIN ||
                     e->special == TP_SERDE_RETURN_INDICES || e->special == TP_SERDE_NORM || e->special == TP_SERDE_STDVAR;
        if (plain && !s) {
            tp__sb_printf(&sb, "\n- %s: no op schema", callee);
            faults++;
        }
        for (int k = 0; s && plain && k < pl.n; k++)
            if (pl.items[k].kind == PARAM_ARG && tp__sd_schema_index(s, pl.items[k].ours) < 0) {
                tp__sb_printf(&sb, "\n- %s: parameter '%s' names no argument of %s", callee, pl.items[k].ours,
                              tp_op_name(e->op));
                faults++;
            }
        tp__sd_params_clear(&pl);
        if (e->fixed && s) {
            if (tp__sd_parse_params(e->fixed, &pl) != TP_OK) {
                tp__sb_printf(&sb, "\n- %s: fixed: %s", callee, tp_last_error());
                faults++;
                continue;
            }
            for (int k = 0; k < pl.n; k++)
                if (tp__sd_schema_index(s, pl.items[k].ours) < 0) {
                    tp__sb_printf(&sb, "\n- %s: fixed argument '%s' is not in %s", callee, pl.items[k].ours,
                                  tp_op_name(e->op));
                    faults++;
                }
            tp__sd_params_clear(&pl);
        }
    }
    for (int op = 0; op < TP_OP_COUNT; op++) {
        if (op == TP_OP_PY_BINOP) continue; /* written as _operator.<its op> (serde_write.c), read by build_binop */
        int writers = 0;
        for (int i = 0; i < n; i++) writers += t[i].op == (tp_op)op && (t[i].flags & TP_SERDE_WRITE);
        if (writers != 1) {
            tp__sb_printf(&sb, "\n- op %s has %d written callees", tp_op_name((tp_op)op), writers);
            faults++;
        }
    }
    if (!faults) {
        tp__sb_free(&sb);
        return TP_OK;
    }
    char *msg = NULL;
    TP_TRY(tp__sb_finish(&sb, &msg));
    tp_status st = tp_error(TP_ERR_INTERNAL, "op map: %d faults:%s", faults, msg);
    tp_free(msg);
    return st;
}
