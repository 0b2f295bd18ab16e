/*
 * weights.c - weights.json / constants.json indexes: reading and checking each
 * entry against its payload, the tensor of an entry, and the descriptors and
 * index written for a program's state.
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
 * weights.json / constants.json
 * ====================================================================== */

void tp__serde_weights_free(tp_serde_weights *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) {
        tp_free(w->items[i].name);
        tp_free(w->items[i].path_name);
    }
    tp_free(w->items);
    w->items = NULL;
    w->n = 0;
}

static const char *const g_weight_required[] = {"path_name", NULL};

static const char *const g_weight_optional[] = {"dtype", "sizes", "strides", "storage_offset", "requires_grad",
                                                "use_pickle", "is_param", "role", NULL};

static tp_status read_dims_array(const json_t *j, const char *what, const char *name, const char *field, int *n,
                                 int64_t *out) {
    if (!json_is_array(j))
        return tp_error(TP_ERR_CORRUPT, "%s '%s': %s must be an array, got %s", what, name, field, tp__sd_json_kind(j));
    if (json_array_size(j) > TP_MAX_DIMS)
        return tp_error(TP_ERR_UNSUPPORTED, "%s '%s': %s has %zu entries (more than %d dims)", what, name, field,
                        json_array_size(j), TP_MAX_DIMS);
    for (size_t i = 0; i < json_array_size(j); i++) {
        const json_t *v = json_array_get(j, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return tp_error(TP_ERR_CORRUPT, "%s '%s': %s[%zu] must be a non-negative integer", what, name, field, i);
        out[i] = json_integer_value(v);
    }
    *n = (int)json_array_size(j);
    return TP_OK;
}

static bool path_name_ok(const char *s, size_t max_name) {
    if (!s || !*s || strlen(s) > max_name || s[0] == '/') return false;
    for (const char *p = s; *p; p++) {
        if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '.' || *p == '/')) return false;
        if (*p == '.' && p[1] == '.') return false; /* no ".." */
    }
    return true;
}

/* The checks every entry gets, whichever index format it came from: element
 * count and view size without overflow, the tensor_bytes limit and - with
 * `payload` - the view inside its payload member. Sets bytes_needed. */
static tp_status check_weight(const char *what, const char *name, const char *path, tp_serde_weight *w,
                              tp_serde_payload_fn payload, void *ctx, const tp_doc_limits *lim) {
    for (int d = 0; d < w->ndim; d++)
        if (w->sizes[d] < 0 || w->strides[d] < 0)
            return tp_error(TP_ERR_CORRUPT, "%s '%s': sizes and strides must be non-negative", what, name);
    if (w->storage_offset < 0)
        return tp_error(TP_ERR_CORRUPT, "%s '%s': storage_offset must be a non-negative integer", what, name);
    int64_t numel;
    if (tp__numel(w->ndim, w->sizes, &numel) != TP_OK || numel > INT64_MAX / 16)
        return tp_error(TP_ERR_CORRUPT, "%s '%s': element count overflows", what, name);
    uint64_t need;
    if (!tp__sd_view_bytes(w->ndim, w->sizes, w->strides, w->storage_offset, tp_dtype_size(w->dtype), &need) || need > SIZE_MAX)
        return tp_error(TP_ERR_CORRUPT, "%s '%s': view size overflows", what, name);
    w->bytes_needed = (size_t)need;
    uint64_t bytes = (uint64_t)numel * tp_dtype_size(w->dtype);
    if (bytes < need) bytes = need;
    if (bytes > lim->tensor_bytes)
        return tp_error(TP_ERR_UNSUPPORTED, "%s '%s': a %s tensor of %" PRIu64 " bytes exceeds the limit of %" PRIu64
                        " bytes (max_tensor_bytes)", what, name, tp_dtype_name(w->dtype), bytes, lim->tensor_bytes);
    if (payload) {
        size_t have = 0;
        tp_status st = payload(ctx, path, &have);
        if (st == TP_ERR_NOT_FOUND)
            return tp_error(TP_ERR_CORRUPT, "%s '%s': payload '%s' is missing", what, name, path);
        if (st != TP_OK) {
            tp_error_context("%s '%s'", what, name);
            return st;
        }
        if (have % tp_dtype_size(w->dtype))
            return tp_error(TP_ERR_CORRUPT, "%s '%s': payload of %zu bytes is not a multiple of the %s element size", what,
                            name, have, tp_dtype_name(w->dtype));
        if (need > have)
            return tp_error(TP_ERR_CORRUPT, "%s '%s': view needs %" PRIu64 " bytes but payload has %zu", what, name, need,
                            have);
    }
    return TP_OK;
}

tp_status tp__serde_weights_check(tp_serde_weights *ws, const char *what, tp_serde_payload_fn payload, void *ctx,
                                  const tp_doc_limits *limits) {
    tp_doc_limits dl = tp__doc_limits_default();
    const tp_doc_limits *lim = limits ? limits : &dl;
    for (int i = 0; i < ws->n; i++) {
        tp_serde_weight *w = &ws->items[i];
        if (!path_name_ok(w->path_name, lim->name))
            return tp_error(TP_ERR_CORRUPT, "%s '%s': path_name must be a relative member name", what, w->name);
        TP_TRY(check_weight(what, w->name, w->path_name, w, payload, ctx, lim));
    }
    return TP_OK;
}

static tp_status read_weight(const char *what, const char *name, const json_t *j, tp_serde_payload_fn payload,
                             void *ctx, const tp_doc_limits *lim, tp_serde_weight *w) {
    if (!json_is_object(j)) return tp_error(TP_ERR_CORRUPT, "%s '%s': expected an object, got %s", what, name, tp__sd_json_kind(j));
    for (const char *const *k = g_weight_required; *k; k++)
        if (!json_object_get(j, *k)) return tp_error(TP_ERR_CORRUPT, "%s '%s': missing field '%s'", what, name, *k);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)j, key, v) {
        bool known = strcmp(key, "path_name") == 0;
        for (const char *const *k = g_weight_optional; *k && !known; k++) known = strcmp(*k, key) == 0;
        if (!known) return tp_error(TP_ERR_CORRUPT, "%s '%s': unknown field '%.64s'", what, name, key);
    }
    const json_t *pn = json_object_get(j, "path_name");
    if (!json_is_string(pn) || !path_name_ok(json_string_value(pn), lim->name))
        return tp_error(TP_ERR_CORRUPT, "%s '%s': path_name must be a relative member name", what, name);
    const json_t *pickle = json_object_get(j, "use_pickle");
    if (pickle && !json_is_boolean(pickle)) return tp_error(TP_ERR_CORRUPT, "%s '%s': use_pickle must be a bool", what, name);
    if (json_is_true(pickle)) return tp_error(TP_ERR_UNSUPPORTED, "%s '%s': pickled payload cannot be read safely", what, name);
    const json_t *dt = json_object_get(j, "dtype"), *sizes = json_object_get(j, "sizes");
    const json_t *strides = json_object_get(j, "strides"), *off = json_object_get(j, "storage_offset");
    if (!dt) return tp_error(TP_ERR_CORRUPT, "%s '%s': missing field 'dtype'", what, name);
    if (!sizes) return tp_error(TP_ERR_CORRUPT, "%s '%s': missing field 'sizes'", what, name);
    if (!strides) return tp_error(TP_ERR_CORRUPT, "%s '%s': missing field 'strides'", what, name);
    if (!off) return tp_error(TP_ERR_CORRUPT, "%s '%s': missing field 'storage_offset'", what, name);
    if (!json_is_string(dt) || tp_dtype_from_name(json_string_value(dt), &w->dtype) != TP_OK ||
        strncmp(json_string_value(dt), "torch.", 6) == 0)
        return tp_error(TP_ERR_UNSUPPORTED, "%s '%s': unsupported dtype %s%.32s%s", what, name, json_is_string(dt) ? "'" : "",
                        json_is_string(dt) ? json_string_value(dt) : tp__sd_json_kind(dt), json_is_string(dt) ? "'" : "");
    int ns;
    TP_TRY(read_dims_array(sizes, what, name, "sizes", &w->ndim, w->sizes));
    TP_TRY(read_dims_array(strides, what, name, "strides", &ns, w->strides));
    if (ns != w->ndim)
        return tp_error(TP_ERR_CORRUPT, "%s '%s': %d strides for %d sizes", what, name, ns, w->ndim);
    if (!json_is_integer(off) || json_integer_value(off) < 0)
        return tp_error(TP_ERR_CORRUPT, "%s '%s': storage_offset must be a non-negative integer", what, name);
    w->storage_offset = json_integer_value(off);
    TP_TRY(check_weight(what, name, json_string_value(pn), w, payload, ctx, lim));
    static const char *const bools[] = {"requires_grad", "is_param"};
    for (int k = 0; k < 2; k++) {
        const json_t *b = json_object_get(j, bools[k]);
        if (b && !json_is_boolean(b)) return tp_error(TP_ERR_CORRUPT, "%s '%s': %s must be a bool", what, name, bools[k]);
    }
    w->requires_grad = json_is_true(json_object_get(j, "requires_grad"));
    w->is_param = json_is_true(json_object_get(j, "is_param"));
    const json_t *role = json_object_get(j, "role");
    w->role = -1;
    if (role && !json_is_null(role)) {
        if (!json_is_integer(role) || json_integer_value(role) < 0 || json_integer_value(role) > 9)
            return tp_error(TP_ERR_CORRUPT, "%s '%s': role must be an integer 0..9", what, name);
        w->role = (int)json_integer_value(role);
    }
    w->name = tp_strdup(name);
    w->path_name = tp_strdup(json_string_value(pn));
    if (!w->name || !w->path_name) return tp_error(TP_ERR_NOMEM, "out of memory reading %s", what);
    return TP_OK;
}

tp_status tp__serde_weights_from_json(const char *json, size_t len, const char *what, tp_serde_payload_fn payload,
                                      void *payload_ctx, const tp_doc_limits *limits, tp_serde_weights *out) {
    TP_CHECK(out != NULL, TP_ERR_INVALID_ARG, "out is NULL");
    *out = (tp_serde_weights){0};
    if (!what) what = "weights";
    tp_doc_limits lim = limits ? *limits : tp__doc_limits_default();
    json_t *doc;
    TP_TRY(tp__sd_parse_json(json, len, what, lim.document, &doc));
    tp_status st = TP_OK;
    if (!json_is_object(doc)) st = tp_error(TP_ERR_CORRUPT, "%s: expected an object, got %s", what, tp__sd_json_kind(doc));
    else if (json_object_size(doc) > lim.items)
        st = tp_error(TP_ERR_CORRUPT, "%s: %zu entries exceed the limit of %zu (max_items)", what, json_object_size(doc),
                      lim.items);
    if (st == TP_OK) {
        out->items = tp_calloc(json_object_size(doc) + 1, sizeof *out->items);
        if (!out->items) st = tp_error(TP_ERR_NOMEM, "out of memory reading %s", what);
    }
    const char *name;
    json_t *v;
    if (st == TP_OK) {
        json_object_foreach(doc, name, v) {
            if (!tp__sd_valid_target(name, lim.name)) {
                st = tp_error(TP_ERR_CORRUPT, "%s: '%.64s' is not a valid state name", what, name);
                break;
            }
            tp_serde_weight *w = &out->items[out->n];
            st = read_weight(what, name, v, payload, payload_ctx, &lim, w);
            if (st != TP_OK) {
                tp_free(w->name);
                tp_free(w->path_name);
                *w = (tp_serde_weight){0};
                break;
            }
            out->n++;
        }
    }
    json_decref(doc);
    if (st != TP_OK) tp__serde_weights_free(out);
    return st;
}

tp_status tp__serde_weight_tensor(const tp_serde_weight *w, void *data, size_t size, void (*release)(void *, void *),
                                  void *release_ctx, tp_tensor **out) {
    TP_CHECK(w && out, TP_ERR_INVALID_ARG, "weight or output is NULL");
    *out = NULL;
    if (w->bytes_needed > size)
        return tp_error(TP_ERR_CORRUPT, "'%s': view needs %zu bytes but payload has %zu", w->name, w->bytes_needed, size);
    static char empty[8];
    return tp_tensor_borrow(w->dtype, w->ndim, w->sizes, w->strides, w->storage_offset, data ? data : empty,
                            data ? size : 0, release, release_ctx, out);
}

static tp_status add_state_weight(tp_serde_weights *list, const tp_named_tensor *t, const char *prefix, int role) {
    tp_serde_weight *w = &list->items[list->n];
    *w = (tp_serde_weight){0};
    w->name = tp_strdup(t->name);
    size_t n = strlen(prefix ? prefix : "") + 32;
    w->path_name = tp_malloc(n);
    if (!w->name || !w->path_name) {
        tp_free(w->name);
        tp_free(w->path_name);
        *w = (tp_serde_weight){0};
        return tp_error(TP_ERR_NOMEM, "out of memory describing the state");
    }
    snprintf(w->path_name, n, "%sweight_%d", prefix ? prefix : "", list->n);
    w->dtype = tp_tensor_dtype(t->tensor);
    w->ndim = tp_tensor_ndim(t->tensor);
    memcpy(w->sizes, tp_tensor_sizes(t->tensor), (size_t)w->ndim * sizeof(int64_t));
    tp__contiguous_strides(w->ndim, w->sizes, w->strides);
    w->storage_offset = 0;
    w->is_param = role == 0;
    w->role = role;
    w->tensor = t->tensor;
    int64_t numel = tp_tensor_numel(t->tensor);
    w->bytes_needed = (size_t)numel * tp_dtype_size(w->dtype);
    list->n++;
    return TP_OK;
}

tp_status tp__serde_state_weights(const tp_program *p, const char *path_prefix, tp_serde_weights *weights,
                                  tp_serde_weights *constants) {
    *weights = (tp_serde_weights){0};
    *constants = (tp_serde_weights){0};
    tp_named_state all;
    TP_TRY(tp_program_named_state(p, TP_FILTER_ALL, &all));
    tp_status st = TP_OK;
    weights->items = tp_calloc((size_t)all.n + 1, sizeof *weights->items);
    constants->items = tp_calloc((size_t)all.n + 1, sizeof *constants->items);
    if (!weights->items || !constants->items) st = tp_error(TP_ERR_NOMEM, "out of memory describing the state");
    for (int i = 0; st == TP_OK && i < all.n; i++) {
        const tp_named_tensor *t = &all.items[i];
        if (tp_tensor_is_meta(t->tensor)) {
            st = tp_error(TP_ERR_INVALID_ARG, "state '%s' is a meta tensor without data", t->name);
            break;
        }
        if (t->kind != TP_STATE_CONSTANT)
            st = add_state_weight(weights, t, path_prefix, t->kind == TP_STATE_PARAMETER ? 0 : 1);
        if (st == TP_OK && (t->kind == TP_STATE_CONSTANT || (t->kind == TP_STATE_BUFFER && !t->persistent))) {
            /* constants' payloads live under data/constants/, numbered on their own */
            st = add_state_weight(constants, t, path_prefix, 2);
        }
    }
    tp_named_state_free(&all);
    if (st != TP_OK) {
        tp__serde_weights_free(weights);
        tp__serde_weights_free(constants);
    }
    return st;
}

tp_status tp__serde_weights_to_json(const tp_serde_weights *ws, char **json, size_t *len) {
    TP_CHECK(ws && json, TP_ERR_INVALID_ARG, "weights or output is NULL");
    *json = NULL;
    jwriter w = tp__sd_jw_start();
    json_t *doc = tp__sd_jw_take(&w, json_object());
    for (int i = 0; i < ws->n; i++) {
        const tp_serde_weight *e = &ws->items[i];
        json_t *o = tp__sd_jw_take(&w, json_object()), *sizes = tp__sd_jw_take(&w, json_array()), *strides = tp__sd_jw_take(&w, json_array());
        for (int d = 0; d < e->ndim; d++) {
            tp__sd_jw_append(&w, sizes, tp__sd_jw_take(&w, json_integer(e->sizes[d])));
            tp__sd_jw_append(&w, strides, tp__sd_jw_take(&w, json_integer(e->strides[d])));
        }
        tp__sd_jw_set(&w, o, "dtype", tp__sd_jw_take(&w, json_string(tp_dtype_name(e->dtype))));
        tp__sd_jw_set(&w, o, "sizes", sizes);
        tp__sd_jw_set(&w, o, "strides", strides);
        tp__sd_jw_set(&w, o, "storage_offset", tp__sd_jw_take(&w, json_integer(e->storage_offset)));
        tp__sd_jw_set(&w, o, "requires_grad", tp__sd_jw_take(&w, json_boolean(e->requires_grad)));
        tp__sd_jw_set(&w, o, "path_name", tp__sd_jw_name(&w, "payload path", e->path_name));
        tp__sd_jw_set(&w, o, "use_pickle", tp__sd_jw_take(&w, json_false()));
        tp__sd_jw_set(&w, o, "is_param", tp__sd_jw_take(&w, json_boolean(e->is_param)));
        tp__sd_jw_set(&w, o, "role", e->role >= 0 ? tp__sd_jw_take(&w, json_integer(e->role)) : tp__sd_jw_take(&w, json_null()));
        tp__sd_jw_check_name(&w, "state name", e->name);
        if (json_object_get(doc, e->name)) {
            json_decref(o);
            json_decref(doc);
            tp_free(w.nonfinite);
            return tp_error(TP_ERR_DUPLICATE, "state name '%s' appears twice", e->name);
        }
        tp__sd_jw_set(&w, doc, e->name, o);
    }
    return tp__sd_jw_finish(&w, doc, json, len);
}
