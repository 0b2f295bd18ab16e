/*
 * serde_json.c - JSON text for program documents: the NaN/Infinity tokens of
 * Python's json read as marker strings, parsing through the allocation hook,
 * and the writer that dumps jansson trees in Python json's layout with
 * shortest round-trip floats.
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
 * JSON text
 * ====================================================================== */

/* Python's json writes NaN, Infinity and -Infinity as bare tokens; jansson
 * refuses them. Replace each (outside strings) with {"__float__": "..."}
 * objects that value decoding understands. *out is NULL when nothing needed
 * replacing. */
static tp_status replace_nonfinite(const char *text, size_t len, char **out, size_t *out_len) {
    *out = NULL;
    tp_sb sb = {0};
    bool in_string = false, any = false;
    size_t copied = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_string) {
            if (c == '\\') i++;
            else if (c == '"') in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
            continue;
        }
        const char *rep = NULL;
        size_t tok = 0;
        if (c == 'N' && len - i >= 3 && memcmp(text + i, "NaN", 3) == 0) rep = "{\"__float__\": \"nan\"}", tok = 3;
        else if (c == 'I' && len - i >= 8 && memcmp(text + i, "Infinity", 8) == 0)
            rep = "{\"__float__\": \"inf\"}", tok = 8;
        else if (c == '-' && len - i >= 9 && memcmp(text + i, "-Infinity", 9) == 0)
            rep = "{\"__float__\": \"-inf\"}", tok = 9;
        if (!rep) continue;
        any = true;
        tp__sb_printf(&sb, "%.*s%s", (int)(i - copied), text + copied, rep);
        i += tok - 1;
        copied = i + 1;
    }
    if (!any) return TP_OK;
    tp__sb_printf(&sb, "%.*s", (int)(len - copied), text + copied);
    size_t n = sb.len;
    TP_TRY(tp__sb_finish(&sb, out));
    *out_len = n;
    return TP_OK;
}

/* Parse a JSON document; `what` names it in messages. */
tp_status tp__sd_parse_json(const char *text, size_t len, const char *what, size_t max_bytes, json_t **out) {
    *out = NULL;
    TP_CHECK(len <= max_bytes, TP_ERR_CORRUPT, "%s: document of %zu bytes exceeds the limit of %zu (max_document_bytes)", what,
             len, max_bytes);
    TP_CHECK(text != NULL || len == 0, TP_ERR_INVALID_ARG, "%s: no text", what);
    char *fixed = NULL;
    size_t fixed_len = 0;
    TP_TRY(replace_nonfinite(text ? text : "", len, &fixed, &fixed_len));
    json_error_t err;
    bool out_of_memory = false;
    json_t *j = fixed ? tp__json_parse(fixed, fixed_len, JSON_REJECT_DUPLICATES, &err, &out_of_memory)
                      : tp__json_parse(text ? text : "", len, JSON_REJECT_DUPLICATES, &err, &out_of_memory);
    tp_free(fixed);
    if (out_of_memory) return tp_error(TP_ERR_NOMEM, "%s: out of memory parsing JSON", what);
    if (!j) {
        return tp_error(TP_ERR_CORRUPT, "%s: invalid JSON at line %d column %d: %s", what, err.line, err.column,
                        err.text);
    }
    *out = j;
    return TP_OK;
}

const char *tp__sd_json_kind(const json_t *j) {
    if (!j) return "nothing";
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* ---- writing JSON ------------------------------------------------------
 * Documents are built as jansson trees and dumped by our own printer, which
 * writes Python json's layout (", " and ": "), floats in their shortest
 * round-trip form with a decimal point (so Python reads a float), and the
 * NaN/Infinity tokens jansson cannot hold (marker strings, known by
 * address). */

jwriter tp__sd_jw_start(void) { return (jwriter){.json_failures = tp__json_alloc_failures()}; }

void tp__sd_jw_limit(jwriter *w, const char *fmt, ...) {
    if (w->limit != TP_OK) return;
    w->limit = TP_ERR_UNSUPPORTED;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->limit_msg, sizeof w->limit_msg, fmt, ap);
    va_end(ap);
}

json_t *tp__sd_jw_take(jwriter *w, json_t *j) {
    if (!j) w->failed = true;
    return j;
}

/* A name (what: "node name", "dim name", ...) the reader would refuse as
 * too long is recorded as the writer's limit. */
void tp__sd_jw_check_name(jwriter *w, const char *what, const char *s) {
    size_t n = strlen(s);
    if (n > TP_LIMIT_NAME)
        tp__sd_jw_limit(w, "%s '%.32s...' of %zu bytes exceeds the limit of %d bytes (TP_LIMIT_NAME)", what, s, n,
                 TP_LIMIT_NAME);
}

/* A name as a JSON string, checked. */
json_t *tp__sd_jw_name(jwriter *w, const char *what, const char *s) {
    tp__sd_jw_check_name(w, what, s);
    return tp__sd_jw_take(w, json_string(s));
}

/* jw_set, jw_append and jw_obj1 take `value` over: on failure it is freed,
 * so a value is filled in before it is handed to them, never after. */
void tp__sd_jw_set(jwriter *w, json_t *obj, const char *key, json_t *value) {
    if (obj && value && json_object_size(obj) >= TP_LIMIT_ITEMS)
        tp__sd_jw_limit(w, "an object of more than %d entries exceeds the limit (TP_LIMIT_ITEMS)", TP_LIMIT_ITEMS);
    if (!value || !obj || json_object_set_new(obj, key, value) != 0) {
        w->failed = true;
        if (!obj && value) json_decref(value);
    }
}

void tp__sd_jw_append(jwriter *w, json_t *arr, json_t *value) {
    if (arr && value && json_array_size(arr) >= TP_LIMIT_ITEMS)
        tp__sd_jw_limit(w, "an array of more than %d entries exceeds the limit (TP_LIMIT_ITEMS)", TP_LIMIT_ITEMS);
    if (!value || !arr || json_array_append_new(arr, value) != 0) {
        w->failed = true;
        if (!arr && value) json_decref(value);
    }
}

json_t *tp__sd_jw_real(jwriter *w, double v) {
    if (isfinite(v)) return tp__sd_jw_take(w, json_real(v));
    json_t *s = json_string(isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
    if (!s) {
        w->failed = true;
        return NULL;
    }
    if (w->n_nonfinite == w->cap_nonfinite) {
        int cap = w->cap_nonfinite ? 2 * w->cap_nonfinite : 8;
        json_t **items = tp_realloc(w->nonfinite, (size_t)cap * sizeof *items);
        if (!items) {
            json_decref(s);
            w->failed = true;
            return NULL;
        }
        w->nonfinite = items;
        w->cap_nonfinite = cap;
    }
    w->nonfinite[w->n_nonfinite++] = s;
    return s;
}

static bool jw_is_nonfinite(const jwriter *w, const json_t *j) {
    for (int i = 0; i < w->n_nonfinite; i++)
        if (w->nonfinite[i] == j) return true;
    return false;
}

static void format_double(double v, char *buf, size_t size) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (!strpbrk(buf, ".eEn")) {
        size_t n = strlen(buf);
        if (n + 2 < size) memcpy(buf + n, ".0", 3);
    }
}

static void dump_string(tp_sb *sb, const char *s) {
    tp__sb_puts(sb, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': tp__sb_puts(sb, "\\\""); break;
        case '\\': tp__sb_puts(sb, "\\\\"); break;
        case '\n': tp__sb_puts(sb, "\\n"); break;
        case '\r': tp__sb_puts(sb, "\\r"); break;
        case '\t': tp__sb_puts(sb, "\\t"); break;
        case '\b': tp__sb_puts(sb, "\\b"); break;
        case '\f': tp__sb_puts(sb, "\\f"); break;
        default:
            if (*p < 0x20) tp__sb_printf(sb, "\\u%04x", *p);
            else tp__sb_printf(sb, "%c", *p);
        }
    }
    tp__sb_puts(sb, "\"");
}

static void dump_json(tp_sb *sb, const json_t *j, const jwriter *w) {
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        tp__sb_puts(sb, "{");
        const char *key;
        json_t *v;
        bool first = true;
        json_object_foreach((json_t *)j, key, v) {
            if (!first) tp__sb_puts(sb, ", ");
            first = false;
            dump_string(sb, key);
            tp__sb_puts(sb, ": ");
            dump_json(sb, v, w);
        }
        tp__sb_puts(sb, "}");
        break;
    }
    case JSON_ARRAY:
        tp__sb_puts(sb, "[");
        for (size_t i = 0; i < json_array_size(j); i++) {
            if (i) tp__sb_puts(sb, ", ");
            dump_json(sb, json_array_get(j, i), w);
        }
        tp__sb_puts(sb, "]");
        break;
    case JSON_STRING:
        if (jw_is_nonfinite(w, j)) tp__sb_puts(sb, json_string_value(j));
        else dump_string(sb, json_string_value(j));
        break;
    case JSON_INTEGER: tp__sb_printf(sb, "%" JSON_INTEGER_FORMAT, json_integer_value(j)); break;
    case JSON_REAL: {
        char buf[40];
        format_double(json_real_value(j), buf, sizeof buf);
        tp__sb_puts(sb, buf);
        break;
    }
    case JSON_TRUE: tp__sb_puts(sb, "true"); break;
    case JSON_FALSE: tp__sb_puts(sb, "false"); break;
    case JSON_NULL: tp__sb_puts(sb, "null"); break;
    }
}

/* Dump and free the tree; the writer's markers are released. */
tp_status tp__sd_jw_finish(jwriter *w, json_t *root, char **out, size_t *len) {
    tp_status st = TP_OK;
    if (w->failed || !root || tp__json_alloc_failures() != w->json_failures) {
        st = tp_error(TP_ERR_NOMEM, "out of memory building a JSON document");
    } else if (w->limit != TP_OK) {
        st = tp_error(w->limit, "%s", w->limit_msg);
    } else {
        tp_sb sb = {0};
        dump_json(&sb, root, w);
        size_t n = sb.len;
        if (n > TP_LIMIT_DOCUMENT && !sb.failed) {
            tp__sb_free(&sb);
            st = tp_error(TP_ERR_UNSUPPORTED, "a JSON document of %zu bytes exceeds the limit of %zu (TP_LIMIT_DOCUMENT)",
                          n, TP_LIMIT_DOCUMENT);
        } else {
            st = tp__sb_finish(&sb, out);
            if (st == TP_OK && len) *len = n;
        }
    }
    json_decref(root);
    tp_free(w->nonfinite);
    *w = (jwriter){0};
    return st;
}
