/*
 * serde.c - tensorplay program documents and weights indexes <-> tp_program
 * (the contract is in serde.h).
 *
 * Sections: problems and names; JSON text (NaN tokens, parsing, dumping);
 * the strict pickle subset (dtypes, Ellipsis, tensors, example inputs);
 * argument values; tree specs and argument specs; reading nodes (op map,
 * tensor indexing, folding of static sizes); reading the rest of the
 * document and assembling the program; writing; weights indexes.
 */
#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph_impl.h"
#include "../program_impl.h"
#include "json.h"
#include "serde.h"

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

typedef struct reader reader;

/* Reading state shared by every section of the reader. */
typedef struct doc_node doc_node;
struct reader {
    tp_doc_limits lim;           /* the document limits this read is held to */
    tp_serde_problems *problems; /* verify mode when non-NULL */
    int n_problems;              /* all problems, stored or not */
    tp_status first;             /* first problem's status */
    const tp_serde_read_options *opts;
    tp_graph *graph;
    tp_signature *sig;
    /* document nodes by name */
    doc_node *nodes;
    int n_nodes;
    size_t *index; /* open-addressing table of node positions + 1 (0 = empty) */
    size_t index_cap;
    int current; /* position of the node being read */
    bool dynamic; /* the document declares dynamic dims */
    int fresh_counter;
    /* state placeholders: signature input name -> (target, kind) */
    tp_value examples; /* dict: user input name -> value */
    /* state fetched for placeholders and get_attr nodes, set on the program at the end */
    struct fetched {
        char *target;
        tp_state_kind kind;
        bool persistent;
        tp_tensor *tensor;
    } *fetched;
    int n_fetched, cap_fetched;
};

/* Record the current error message as a problem. Returns st. */
static tp_status note(reader *r, tp_status st) {
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

static tp_status report(reader *r, tp_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static tp_status report(reader *r, tp_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tp_verror(st, fmt, ap);
    va_end(ap);
    return note(r, st);
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
static bool valid_target(const char *s, size_t max_name) {
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
static tp_status parse_json(const char *text, size_t len, const char *what, size_t max_bytes, json_t **out) {
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

static const char *json_kind(const json_t *j) {
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

/* Check an object's keys: every key in `required` must be present, every
 * key must be in `required` or `optional` (NULL-terminated lists). */
static tp_status check_fields(reader *r, const json_t *obj, const char *path, const char *const *required,
                              const char *const *optional) {
    if (!json_is_object(obj)) return report(r, TP_ERR_CORRUPT, "%s: expected an object, got %s", path, json_kind(obj));
    for (const char *const *k = required; k && *k; k++)
        if (!json_object_get(obj, *k)) return report(r, TP_ERR_CORRUPT, "%s: missing field '%s'", path, *k);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        bool known = false;
        for (const char *const *k = required; k && *k && !known; k++) known = strcmp(*k, key) == 0;
        for (const char *const *k = optional; k && *k && !known; k++) known = strcmp(*k, key) == 0;
        if (!known) return report(r, TP_ERR_CORRUPT, "%s: unknown field '%.64s'", path, key);
    }
    return TP_OK;
}

static tp_status get_string(reader *r, const json_t *obj, const char *key, const char *path, bool nullable,
                            const char **out) {
    const json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || (nullable && json_is_null(v))) return TP_OK;
    if (!json_is_string(v))
        return report(r, TP_ERR_CORRUPT, "%s.%s: expected a string%s, got %s", path, key, nullable ? " or null" : "",
                      json_kind(v));
    const char *s = json_string_value(v);
    if (strlen(s) > r->lim.name)
        return report(r, TP_ERR_CORRUPT, "%s.%s: string of %zu bytes exceeds the limit of %zu (max_name_bytes)", path, key, strlen(s), r->lim.name);
    *out = s;
    return TP_OK;
}

static tp_status get_array(reader *r, const json_t *obj, const char *key, const char *path, const json_t **out) {
    const json_t *v = json_object_get(obj, key);
    *out = v;
    if (!json_is_array(v)) return report(r, TP_ERR_CORRUPT, "%s.%s: expected an array, got %s", path, key, v ? json_kind(v) : "nothing");
    if (json_array_size(v) > r->lim.items)
        return report(r, TP_ERR_CORRUPT, "%s.%s: %zu entries exceed the limit of %zu (max_items)", path, key, json_array_size(v),
                      r->lim.items);
    return TP_OK;
}

/* ---- writing JSON ------------------------------------------------------
 * Documents are built as jansson trees and dumped by our own printer, which
 * writes Python json's layout (", " and ": "), floats in their shortest
 * round-trip form with a decimal point (so Python reads a float), and the
 * NaN/Infinity tokens jansson cannot hold (marker strings, known by
 * address). */

typedef struct jwriter {
    json_t **nonfinite;
    int n_nonfinite, cap_nonfinite;
    bool failed; /* an allocation failed while building */
    /* the first thing past a reader limit (limits.h): the document would
     * not load back, so it is refused with this status and message */
    tp_status limit;
    char limit_msg[320];
    unsigned long json_failures; /* tp__json_alloc_failures() at the start */
} jwriter;

static jwriter jw_start(void) { return (jwriter){.json_failures = tp__json_alloc_failures()}; }

static void jw_limit(jwriter *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jw_limit(jwriter *w, const char *fmt, ...) {
    if (w->limit != TP_OK) return;
    w->limit = TP_ERR_UNSUPPORTED;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->limit_msg, sizeof w->limit_msg, fmt, ap);
    va_end(ap);
}

static json_t *jw_take(jwriter *w, json_t *j) {
    if (!j) w->failed = true;
    return j;
}

/* A name (what: "node name", "dim name", ...) the reader would refuse as
 * too long is recorded as the writer's limit. */
static void jw_check_name(jwriter *w, const char *what, const char *s) {
    size_t n = strlen(s);
    if (n > TP_LIMIT_NAME)
        jw_limit(w, "%s '%.32s...' of %zu bytes exceeds the limit of %d bytes (TP_LIMIT_NAME)", what, s, n,
                 TP_LIMIT_NAME);
}

/* A name as a JSON string, checked. */
static json_t *jw_name(jwriter *w, const char *what, const char *s) {
    jw_check_name(w, what, s);
    return jw_take(w, json_string(s));
}

/* jw_set, jw_append and jw_obj1 take `value` over: on failure it is freed,
 * so a value is filled in before it is handed to them, never after. */
static void jw_set(jwriter *w, json_t *obj, const char *key, json_t *value) {
    if (obj && value && json_object_size(obj) >= TP_LIMIT_ITEMS)
        jw_limit(w, "an object of more than %d entries exceeds the limit (TP_LIMIT_ITEMS)", TP_LIMIT_ITEMS);
    if (!value || !obj || json_object_set_new(obj, key, value) != 0) {
        w->failed = true;
        if (!obj && value) json_decref(value);
    }
}

static void jw_append(jwriter *w, json_t *arr, json_t *value) {
    if (arr && value && json_array_size(arr) >= TP_LIMIT_ITEMS)
        jw_limit(w, "an array of more than %d entries exceeds the limit (TP_LIMIT_ITEMS)", TP_LIMIT_ITEMS);
    if (!value || !arr || json_array_append_new(arr, value) != 0) {
        w->failed = true;
        if (!arr && value) json_decref(value);
    }
}

static json_t *jw_real(jwriter *w, double v) {
    if (isfinite(v)) return jw_take(w, json_real(v));
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
static tp_status jw_finish(jwriter *w, json_t *root, char **out, size_t *len) {
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

/* ======================================================================
 * the strict pickle subset
 * ======================================================================
 * tensorplay pickles (protocol 2-5) three kinds of objects we accept:
 *   tensorplay.DType:       NEWOBJ(DType, ()) BUILD(<int code>)
 *   builtins.Ellipsis:      the global itself
 *   tensorplay._C.TensorBase: NEWOBJ(TensorBase, ()) BUILD((bytes, sizes,
 *                           strides, dtype code, storage offset, device,
 *                           requires_grad))
 * plus None, bools, ints, floats, str, bytes, tuples, lists and dicts. The
 * reader is a stack machine over that opcode subset only; objects live in
 * an arena freed at the end (the memo may share them). */

enum {
    PK_NONE,
    PK_BOOL,
    PK_INT,
    PK_FLOAT,
    PK_STR,
    PK_BYTES,
    PK_TUPLE,
    PK_LIST,
    PK_DICT, /* items: key, value, key, value, ... */
    PK_CLASS,
    PK_OBJECT, /* cls; state in `state` once built */
    PK_ELLIPSIS,
    PK_MARK
};
enum { PK_CLS_DTYPE = 1, PK_CLS_TENSOR = 2 };

typedef struct pk_val pk_val;
struct pk_val {
    int kind;
    int cls;
    bool b;
    int64_t i;
    double f;
    const unsigned char *bytes; /* STR/BYTES: into the pickle data (not NUL-terminated) */
    size_t len;
    pk_val **items;
    int64_t n, cap;
    pk_val *state;
};

typedef struct pk_reader {
    const unsigned char *data;
    size_t size, pos;
    pk_val **arena;
    size_t n_arena, cap_arena;
    pk_val **stack;
    size_t n_stack, cap_stack;
    size_t *marks;
    size_t n_marks, cap_marks;
    pk_val **memo;
    size_t cap_memo; /* memo indexes < cap_memo; NULL = unset */
    size_t n_memo;   /* next MEMOIZE index */
} pk_reader;

#define PK_MAX_OBJECTS ((size_t)1 << 22)
#define PK_MAX_MEMO ((size_t)1 << 20)

static bool pk_grow(void **items, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *p = tp_realloc(*items, c * elem);
    if (!p) return false;
    *items = p;
    *cap = c;
    return true;
}

static void pk_free(pk_reader *p) {
    for (size_t i = 0; i < p->n_arena; i++) {
        tp_free(p->arena[i]->items);
        tp_free(p->arena[i]);
    }
    tp_free(p->arena);
    tp_free(p->stack);
    tp_free(p->marks);
    tp_free(p->memo);
    *p = (pk_reader){0};
}

static pk_val *pk_new(pk_reader *p, int kind) {
    if (p->n_arena >= PK_MAX_OBJECTS) return NULL;
    if (!pk_grow((void **)&p->arena, &p->cap_arena, p->n_arena + 1, sizeof *p->arena)) return NULL;
    pk_val *v = tp_calloc(1, sizeof *v);
    if (!v) return NULL;
    v->kind = kind;
    p->arena[p->n_arena++] = v;
    return v;
}

static bool pk_add_item(pk_val *c, pk_val *item) {
    if (c->n >= (int64_t)PK_MAX_OBJECTS) return false;
    size_t cap = (size_t)c->cap;
    if (!pk_grow((void **)&c->items, &cap, (size_t)c->n + 1, sizeof *c->items)) return false;
    c->cap = (int64_t)cap;
    c->items[c->n++] = item;
    return true;
}

#define PK_FAIL(code, ...) return tp_error(code, "pickle: " __VA_ARGS__)

static tp_status pk_push(pk_reader *p, pk_val *v) {
    if (!v) return tp_error(TP_ERR_NOMEM, "pickle: out of memory (or more than %zu objects)", PK_MAX_OBJECTS);
    if (!pk_grow((void **)&p->stack, &p->cap_stack, p->n_stack + 1, sizeof *p->stack))
        return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
    p->stack[p->n_stack++] = v;
    return TP_OK;
}

static tp_status pk_pop(pk_reader *p, pk_val **out) {
    size_t floor_ = p->n_marks ? p->marks[p->n_marks - 1] : 0;
    if (p->n_stack <= floor_) PK_FAIL(TP_ERR_CORRUPT, "stack underflow at offset %zu", p->pos);
    *out = p->stack[--p->n_stack];
    return TP_OK;
}

static tp_status pk_need(pk_reader *p, size_t n, const unsigned char **out) {
    if (p->size - p->pos < n) PK_FAIL(TP_ERR_CORRUPT, "truncated at offset %zu", p->pos);
    *out = p->data + p->pos;
    p->pos += n;
    return TP_OK;
}

static uint64_t pk_le(const unsigned char *b, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}

static tp_status pk_memo_put(pk_reader *p, size_t idx) {
    if (idx >= PK_MAX_MEMO) PK_FAIL(TP_ERR_CORRUPT, "memo index %zu too large", idx);
    if (p->n_stack == 0) PK_FAIL(TP_ERR_CORRUPT, "memoize with an empty stack at offset %zu", p->pos);
    if (idx >= p->cap_memo) {
        size_t old = p->cap_memo, cap = old;
        if (!pk_grow((void **)&p->memo, &cap, idx + 1, sizeof *p->memo)) return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
        memset(p->memo + old, 0, (cap - old) * sizeof *p->memo);
        p->cap_memo = cap;
    }
    p->memo[idx] = p->stack[p->n_stack - 1];
    return TP_OK;
}

static tp_status pk_string(pk_reader *p, int kind, size_t n) {
    const unsigned char *b = NULL;
    TP_TRY(pk_need(p, n, &b));
    pk_val *v = pk_new(p, kind);
    if (v) {
        v->bytes = b;
        v->len = n;
    }
    return pk_push(p, v);
}

static tp_status pk_global(pk_reader *p, const char *module, size_t mlen, const char *name, size_t nlen) {
    pk_val *v = NULL;
    if (mlen == 10 && memcmp(module, "tensorplay", 10) == 0 && nlen == 5 && memcmp(name, "DType", 5) == 0) {
        v = pk_new(p, PK_CLASS);
        if (v) v->cls = PK_CLS_DTYPE;
    } else if (mlen == 13 && memcmp(module, "tensorplay._C", 13) == 0 && nlen == 10 &&
               memcmp(name, "TensorBase", 10) == 0) {
        v = pk_new(p, PK_CLASS);
        if (v) v->cls = PK_CLS_TENSOR;
    } else if (mlen == 8 && memcmp(module, "builtins", 8) == 0 && nlen == 8 && memcmp(name, "Ellipsis", 8) == 0) {
        v = pk_new(p, PK_ELLIPSIS);
    } else {
        return tp_error(TP_ERR_UNSUPPORTED, "pickle: global %.*s.%.*s cannot be loaded safely", (int)(mlen > 64 ? 64 : mlen),
                        module, (int)(nlen > 64 ? 64 : nlen), name);
    }
    return pk_push(p, v);
}

/* Pop items down to the last mark into a new container of `kind`. */
static tp_status pk_collect(pk_reader *p, int kind, pk_val **out) {
    if (!p->n_marks) PK_FAIL(TP_ERR_CORRUPT, "no mark at offset %zu", p->pos);
    size_t m = p->marks[--p->n_marks];
    pk_val *c = pk_new(p, kind);
    if (!c) return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
    for (size_t i = m; i < p->n_stack; i++)
        if (!pk_add_item(c, p->stack[i])) return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
    p->n_stack = m;
    *out = c;
    return TP_OK;
}

static tp_status pk_run(pk_reader *p, pk_val **result) {
    for (;;) {
        const unsigned char *b = NULL;
        TP_TRY(pk_need(p, 1, &b));
        unsigned char op = b[0];
        size_t at = p->pos - 1;
        switch (op) {
        case 0x80: /* PROTO */
            TP_TRY(pk_need(p, 1, &b));
            if (b[0] < 2 || b[0] > 5) PK_FAIL(TP_ERR_UNSUPPORTED, "protocol %d is not supported", b[0]);
            break;
        case 0x95: /* FRAME */ TP_TRY(pk_need(p, 8, &b)); break;
        case '.': /* STOP */ {
            pk_val *v;
            TP_TRY(pk_pop(p, &v));
            if (p->n_stack || p->n_marks) PK_FAIL(TP_ERR_CORRUPT, "data left on the stack at STOP");
            *result = v;
            return TP_OK;
        }
        case 0x8c: /* SHORT_BINUNICODE */
            TP_TRY(pk_need(p, 1, &b));
            TP_TRY(pk_string(p, PK_STR, b[0]));
            break;
        case 'X': /* BINUNICODE */
            TP_TRY(pk_need(p, 4, &b));
            TP_TRY(pk_string(p, PK_STR, (size_t)pk_le(b, 4)));
            break;
        case 0x8d: /* BINUNICODE8 */
            TP_TRY(pk_need(p, 8, &b));
            if (pk_le(b, 8) > p->size) PK_FAIL(TP_ERR_CORRUPT, "string length out of range at offset %zu", at);
            TP_TRY(pk_string(p, PK_STR, (size_t)pk_le(b, 8)));
            break;
        case 'C': /* SHORT_BINBYTES */
            TP_TRY(pk_need(p, 1, &b));
            TP_TRY(pk_string(p, PK_BYTES, b[0]));
            break;
        case 'B': /* BINBYTES */
            TP_TRY(pk_need(p, 4, &b));
            TP_TRY(pk_string(p, PK_BYTES, (size_t)pk_le(b, 4)));
            break;
        case 0x8e: /* BINBYTES8 */
            TP_TRY(pk_need(p, 8, &b));
            if (pk_le(b, 8) > p->size) PK_FAIL(TP_ERR_CORRUPT, "bytes length out of range at offset %zu", at);
            TP_TRY(pk_string(p, PK_BYTES, (size_t)pk_le(b, 8)));
            break;
        case 0x94: /* MEMOIZE */
            TP_TRY(pk_memo_put(p, p->n_memo));
            p->n_memo++;
            break;
        case 'q': /* BINPUT */
            TP_TRY(pk_need(p, 1, &b));
            TP_TRY(pk_memo_put(p, b[0]));
            break;
        case 'r': /* LONG_BINPUT */
            TP_TRY(pk_need(p, 4, &b));
            TP_TRY(pk_memo_put(p, (size_t)pk_le(b, 4)));
            break;
        case 'h': /* BINGET */
        case 'j': /* LONG_BINGET */ {
            TP_TRY(pk_need(p, op == 'h' ? 1 : 4, &b));
            size_t idx = (size_t)pk_le(b, op == 'h' ? 1 : 4);
            if (idx >= p->cap_memo || !p->memo[idx]) PK_FAIL(TP_ERR_CORRUPT, "memo %zu is unset at offset %zu", idx, at);
            TP_TRY(pk_push(p, p->memo[idx]));
            break;
        }
        case 0x93: /* STACK_GLOBAL */ {
            pk_val *name, *module;
            TP_TRY(pk_pop(p, &name));
            TP_TRY(pk_pop(p, &module));
            if (name->kind != PK_STR || module->kind != PK_STR)
                PK_FAIL(TP_ERR_CORRUPT, "STACK_GLOBAL needs two strings at offset %zu", at);
            TP_TRY(pk_global(p, (const char *)module->bytes, module->len, (const char *)name->bytes, name->len));
            break;
        }
        case 'c': /* GLOBAL module\nname\n */ {
            const unsigned char *start = p->data + p->pos;
            const unsigned char *nl1 = memchr(start, '\n', p->size - p->pos);
            if (!nl1) PK_FAIL(TP_ERR_CORRUPT, "truncated GLOBAL at offset %zu", at);
            const unsigned char *nl2 = memchr(nl1 + 1, '\n', (size_t)(p->data + p->size - (nl1 + 1)));
            if (!nl2) PK_FAIL(TP_ERR_CORRUPT, "truncated GLOBAL at offset %zu", at);
            p->pos = (size_t)(nl2 + 1 - p->data);
            TP_TRY(pk_global(p, (const char *)start, (size_t)(nl1 - start), (const char *)nl1 + 1,
                             (size_t)(nl2 - nl1 - 1)));
            break;
        }
        case ')': TP_TRY(pk_push(p, pk_new(p, PK_TUPLE))); break;
        case ']': TP_TRY(pk_push(p, pk_new(p, PK_LIST))); break;
        case '}': TP_TRY(pk_push(p, pk_new(p, PK_DICT))); break;
        case 0x85: /* TUPLE1..3 */
        case 0x86:
        case 0x87: {
            int n = op - 0x84;
            pk_val *items[3], *t;
            for (int i = n - 1; i >= 0; i--) TP_TRY(pk_pop(p, &items[i]));
            t = pk_new(p, PK_TUPLE);
            for (int i = 0; t && i < n; i++)
                if (!pk_add_item(t, items[i])) t = NULL;
            TP_TRY(pk_push(p, t));
            break;
        }
        case '(': /* MARK */
            if (!pk_grow((void **)&p->marks, &p->cap_marks, p->n_marks + 1, sizeof *p->marks))
                return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
            p->marks[p->n_marks++] = p->n_stack;
            break;
        case 't': /* TUPLE */ {
            pk_val *t;
            TP_TRY(pk_collect(p, PK_TUPLE, &t));
            TP_TRY(pk_push(p, t));
            break;
        }
        case 'a': /* APPEND */ {
            pk_val *item, *list;
            TP_TRY(pk_pop(p, &item));
            TP_TRY(pk_pop(p, &list));
            if (list->kind != PK_LIST) PK_FAIL(TP_ERR_CORRUPT, "APPEND to a non-list at offset %zu", at);
            if (!pk_add_item(list, item)) return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
            TP_TRY(pk_push(p, list));
            break;
        }
        case 'e': /* APPENDS */
        case 'u': /* SETITEMS */ {
            pk_val *items, *c;
            TP_TRY(pk_collect(p, PK_TUPLE, &items));
            TP_TRY(pk_pop(p, &c));
            if (c->kind != (op == 'e' ? PK_LIST : PK_DICT))
                PK_FAIL(TP_ERR_CORRUPT, "%s to a %s at offset %zu", op == 'e' ? "APPENDS" : "SETITEMS",
                        op == 'e' ? "non-list" : "non-dict", at);
            if (op == 'u' && items->n % 2) PK_FAIL(TP_ERR_CORRUPT, "SETITEMS with an odd count at offset %zu", at);
            for (int64_t i = 0; i < items->n; i++)
                if (!pk_add_item(c, items->items[i])) return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
            TP_TRY(pk_push(p, c));
            break;
        }
        case 's': /* SETITEM */ {
            pk_val *value, *key, *d;
            TP_TRY(pk_pop(p, &value));
            TP_TRY(pk_pop(p, &key));
            TP_TRY(pk_pop(p, &d));
            if (d->kind != PK_DICT) PK_FAIL(TP_ERR_CORRUPT, "SETITEM to a non-dict at offset %zu", at);
            if (!pk_add_item(d, key) || !pk_add_item(d, value)) return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
            TP_TRY(pk_push(p, d));
            break;
        }
        case 'N': TP_TRY(pk_push(p, pk_new(p, PK_NONE))); break;
        case 0x88:
        case 0x89: {
            pk_val *v = pk_new(p, PK_BOOL);
            if (v) v->b = op == 0x88;
            TP_TRY(pk_push(p, v));
            break;
        }
        case 'K':
        case 'M':
        case 'J': {
            int n = op == 'K' ? 1 : op == 'M' ? 2 : 4;
            TP_TRY(pk_need(p, (size_t)n, &b));
            pk_val *v = pk_new(p, PK_INT);
            if (v) v->i = op == 'J' ? (int64_t)(int32_t)(uint32_t)pk_le(b, 4) : (int64_t)pk_le(b, n);
            TP_TRY(pk_push(p, v));
            break;
        }
        case 0x8a: /* LONG1 */ {
            TP_TRY(pk_need(p, 1, &b));
            int n = b[0];
            if (n > 8) PK_FAIL(TP_ERR_UNSUPPORTED, "integer of %d bytes at offset %zu is too large", n, at);
            TP_TRY(pk_need(p, (size_t)n, &b));
            uint64_t u = pk_le(b, n);
            if (n > 0 && n < 8 && (b[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n); /* sign-extend */
            pk_val *v = pk_new(p, PK_INT);
            if (v) v->i = (int64_t)u;
            TP_TRY(pk_push(p, v));
            break;
        }
        case 'G': { /* BINFLOAT, big-endian */
            TP_TRY(pk_need(p, 8, &b));
            uint64_t u = 0;
            for (int i = 0; i < 8; i++) u = (u << 8) | b[i];
            double d;
            memcpy(&d, &u, sizeof d);
            pk_val *v = pk_new(p, PK_FLOAT);
            if (v) v->f = d;
            TP_TRY(pk_push(p, v));
            break;
        }
        case 0x81: /* NEWOBJ */ {
            pk_val *args, *cls;
            TP_TRY(pk_pop(p, &args));
            TP_TRY(pk_pop(p, &cls));
            if (cls->kind != PK_CLASS || args->kind != PK_TUPLE || args->n != 0)
                PK_FAIL(TP_ERR_UNSUPPORTED, "object construction at offset %zu is not supported", at);
            pk_val *o = pk_new(p, PK_OBJECT);
            if (o) o->cls = cls->cls;
            TP_TRY(pk_push(p, o));
            break;
        }
        case 'b': /* BUILD */ {
            pk_val *state, *obj;
            TP_TRY(pk_pop(p, &state));
            TP_TRY(pk_pop(p, &obj));
            if (obj->kind != PK_OBJECT || obj->state) PK_FAIL(TP_ERR_UNSUPPORTED, "BUILD at offset %zu is not supported", at);
            obj->state = state;
            TP_TRY(pk_push(p, obj));
            break;
        }
        default: PK_FAIL(TP_ERR_UNSUPPORTED, "opcode 0x%02x at offset %zu is not supported", op, at);
        }
    }
}

/* tensorplay DType codes. */
static const struct {
    int code;
    tp_dtype dtype;
} g_dtype_codes[] = {{0, TP_UINT8},  {1, TP_INT8},    {2, TP_INT16},     {3, TP_INT32},  {4, TP_INT64},
                     {8, TP_FLOAT32}, {9, TP_FLOAT64}, {10, TP_FLOAT16}, {11, TP_BFLOAT16}, {12, TP_BOOL}};
#define DTYPE_CODE_UNDEFINED 22

static bool dtype_from_code(int64_t code, tp_dtype *out) {
    for (size_t i = 0; i < TP_ARRAY_LEN(g_dtype_codes); i++)
        if (g_dtype_codes[i].code == code) {
            *out = g_dtype_codes[i].dtype;
            return true;
        }
    return false;
}

static int dtype_code(tp_dtype d) {
    for (size_t i = 0; i < TP_ARRAY_LEN(g_dtype_codes); i++)
        if (g_dtype_codes[i].dtype == d) return g_dtype_codes[i].code;
    return DTYPE_CODE_UNDEFINED;
}

static tp_status pk_int_list(const pk_val *v, const char *what, int *n, int64_t *out) {
    if (v->kind != PK_LIST && v->kind != PK_TUPLE) PK_FAIL(TP_ERR_CORRUPT, "tensor %s is not a list", what);
    if (v->n > TP_MAX_DIMS) PK_FAIL(TP_ERR_UNSUPPORTED, "tensor %s has %" PRId64 " entries (more than %d dims)", what, v->n, TP_MAX_DIMS);
    for (int64_t i = 0; i < v->n; i++) {
        if (v->items[i]->kind != PK_INT || v->items[i]->i < 0)
            PK_FAIL(TP_ERR_CORRUPT, "tensor %s[%" PRId64 "] is not a non-negative int", what, i);
        out[i] = v->items[i]->i;
    }
    *n = (int)v->n;
    return TP_OK;
}

/* Bytes a view needs: (offset + sum((size-1)*stride) + 1) * itemsize, or 0
 * for an empty view; false on overflow. */
static bool view_bytes(int ndim, const int64_t *sizes, const int64_t *strides, int64_t offset, size_t itemsize,
                       uint64_t *out) {
    int64_t last = offset;
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] == 0) {
            *out = 0;
            return true;
        }
        int64_t step;
        if (!tp_mul_overflow_i64(sizes[d] - 1, strides[d], &step) || !tp_add_overflow_i64(last, step, &last))
            return false;
    }
    int64_t count;
    if (!tp_add_overflow_i64(last, 1, &count) || !tp_mul_overflow_i64(count, (int64_t)itemsize, &count)) return false;
    *out = (uint64_t)count;
    return true;
}

static tp_status pk_tensor(const pk_val *o, const tp_doc_limits *lim, tp_value *out) {
    const pk_val *s = o->state;
    if (!s || s->kind != PK_TUPLE || s->n != 7) PK_FAIL(TP_ERR_UNSUPPORTED, "tensor state is not the expected 7-tuple");
    const pk_val *data = s->items[0];
    if (data->kind != PK_BYTES) PK_FAIL(TP_ERR_CORRUPT, "tensor data is not bytes");
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    int nd, ns;
    TP_TRY(pk_int_list(s->items[1], "sizes", &nd, sizes));
    TP_TRY(pk_int_list(s->items[2], "strides", &ns, strides));
    if (nd != ns) PK_FAIL(TP_ERR_CORRUPT, "tensor has %d sizes but %d strides", nd, ns);
    if (s->items[3]->kind != PK_INT || s->items[4]->kind != PK_INT || s->items[4]->i < 0)
        PK_FAIL(TP_ERR_CORRUPT, "tensor dtype code or offset is not a valid int");
    tp_dtype dt;
    if (!dtype_from_code(s->items[3]->i, &dt)) PK_FAIL(TP_ERR_UNSUPPORTED, "tensor dtype code %" PRId64 " is not supported", s->items[3]->i);
    size_t itemsize = tp_dtype_size(dt);
    uint64_t need;
    if (!view_bytes(nd, sizes, strides, s->items[4]->i, itemsize, &need))
        PK_FAIL(TP_ERR_CORRUPT, "tensor view size overflows");
    if (need > data->len) PK_FAIL(TP_ERR_CORRUPT, "tensor view needs %" PRIu64 " bytes but has %zu", need, data->len);
    if (data->len % itemsize) PK_FAIL(TP_ERR_CORRUPT, "tensor data of %zu bytes is not a multiple of %zu", data->len, itemsize);
    if (data->len > lim->tensor_bytes)
        PK_FAIL(TP_ERR_UNSUPPORTED, "a tensor of %zu bytes exceeds the limit of %" PRIu64 " bytes (max_tensor_bytes)", data->len,
                lim->tensor_bytes);
    /* copy the storage bytes (never more than the pickle holds), then view them */
    int64_t n_storage = (int64_t)(data->len / itemsize);
    tp_tensor *flat, *view;
    TP_TRY(tp_tensor_from_data(dt, 1, &n_storage, data->bytes, &flat));
    tp_status st = tp_tensor_as_strided(flat, nd, sizes, strides, s->items[4]->i, &view);
    tp_tensor_free(flat);
    TP_TRY(st);
    *out = tp_value_tensor(view);
    return TP_OK;
}

/* Convert a pickled value. `ellipsis`: where an Ellipsis may appear (set to
 * true when the value is one); NULL refuses it. */
static tp_status pk_to_value(const pk_val *v, const tp_doc_limits *lim, int depth, size_t *budget, tp_value *out,
                              bool *ellipsis) {
    *out = tp_value_none();
    if ((size_t)depth > lim->depth) PK_FAIL(TP_ERR_CORRUPT, "nesting deeper than %zu (max_depth)", lim->depth);
    if (*budget == 0) PK_FAIL(TP_ERR_CORRUPT, "more than %zu values (shared objects expand too far)", PK_MAX_OBJECTS);
    (*budget)--;
    switch (v->kind) {
    case PK_NONE: return TP_OK;
    case PK_BOOL: *out = tp_value_bool(v->b); return TP_OK;
    case PK_INT: *out = tp_value_int(v->i); return TP_OK;
    case PK_FLOAT: *out = tp_value_float(v->f); return TP_OK;
    case PK_STR: {
        if (memchr(v->bytes, 0, v->len)) PK_FAIL(TP_ERR_UNSUPPORTED, "string with a NUL byte");
        char *s = tp_malloc(v->len + 1);
        if (!s) return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
        memcpy(s, v->bytes, v->len);
        s[v->len] = '\0';
        tp_status st = tp_value_str(s, out);
        tp_free(s);
        return st;
    }
    case PK_ELLIPSIS:
        if (!ellipsis) PK_FAIL(TP_ERR_UNSUPPORTED, "Ellipsis is only supported as a tensor index");
        *ellipsis = true;
        return TP_OK;
    case PK_TUPLE:
    case PK_LIST: {
        TP_TRY(v->kind == PK_TUPLE ? tp_value_tuple(v->n, out) : tp_value_list(v->n, out));
        for (int64_t i = 0; i < v->n; i++) {
            tp_value item;
            tp_status st = pk_to_value(v->items[i], lim, depth + 1, budget, &item, NULL);
            if (st == TP_OK) st = tp_value_seq_set(out, i, &item);
            if (st != TP_OK) {
                tp_value_clear(out);
                return st;
            }
        }
        return TP_OK;
    }
    case PK_DICT: {
        TP_TRY(tp_value_dict(out));
        for (int64_t i = 0; i + 1 < v->n; i += 2) {
            const pk_val *k = v->items[i];
            if (k->kind != PK_STR || memchr(k->bytes, 0, k->len)) {
                tp_value_clear(out);
                PK_FAIL(TP_ERR_UNSUPPORTED, "dict keys must be strings");
            }
            if (k->len > lim->name) {
                tp_value_clear(out);
                PK_FAIL(TP_ERR_CORRUPT, "a dict key of %zu bytes exceeds the limit of %zu (max_name_bytes)", k->len, lim->name);
            }
            char key[TP_LIMIT_NAME + 1];
            memcpy(key, k->bytes, k->len);
            key[k->len] = '\0';
            if (tp_value_dict_get(out, key)) {
                tp_value_clear(out);
                PK_FAIL(TP_ERR_CORRUPT, "duplicate dict key '%.64s'", key);
            }
            tp_value item;
            tp_status st = pk_to_value(v->items[i + 1], lim, depth + 1, budget, &item, NULL);
            if (st == TP_OK) st = tp_value_dict_set(out, key, &item);
            if (st != TP_OK) {
                tp_value_clear(out);
                return st;
            }
        }
        return TP_OK;
    }
    case PK_OBJECT:
        if (v->cls == PK_CLS_DTYPE) {
            if (!v->state || v->state->kind != PK_INT) PK_FAIL(TP_ERR_CORRUPT, "dtype state is not an int");
            if (v->state->i == DTYPE_CODE_UNDEFINED) return TP_OK; /* None: "no dtype" */
            tp_dtype d;
            if (!dtype_from_code(v->state->i, &d)) PK_FAIL(TP_ERR_UNSUPPORTED, "dtype code %" PRId64 " is not supported", v->state->i);
            *out = tp_value_dtype(d);
            return TP_OK;
        }
        return pk_tensor(v, lim, out);
    case PK_BYTES: PK_FAIL(TP_ERR_UNSUPPORTED, "bytes values are not supported");
    default: PK_FAIL(TP_ERR_UNSUPPORTED, "a class object is not a value");
    }
}

static tp_status pickle_read(const void *data, size_t size, const tp_doc_limits *lim, tp_value *out, bool *ellipsis) {
    pk_reader p = {.data = data, .size = size};
    pk_val *root = NULL;
    tp_status st = pk_run(&p, &root);
    size_t budget = PK_MAX_OBJECTS;
    if (st == TP_OK) st = pk_to_value(root, lim, 0, &budget, out, ellipsis);
    pk_free(&p);
    return st;
}

tp_status tp__serde_examples_from_pickle(const void *data, size_t size, const tp_doc_limits *limits, tp_value *out) {
    *out = tp_value_none();
    TP_CHECK(data || size == 0, TP_ERR_INVALID_ARG, "pickle: no data");
    tp_doc_limits dflt = tp__doc_limits_default();
    tp_value v;
    TP_TRY(pickle_read(data, size, limits ? limits : &dflt, &v, NULL));
    if (v.kind != TP_VAL_DICT) {
        tp_status st = tp_error(TP_ERR_CORRUPT, "pickle: example inputs are a %s, not a dict", tp_value_kind_name(v.kind));
        tp_value_clear(&v);
        return st;
    }
    *out = v;
    return TP_OK;
}

/* ---- writing pickles ---------------------------------------------------- */

static void pk_put(tp_sb *sb, const void *data, size_t n) {
    if (sb->failed) return;
    if (sb->len + n + 1 > sb->cap) {
        size_t cap = sb->cap ? sb->cap : 256;
        while (cap < sb->len + n + 1) cap *= 2;
        char *p = tp_realloc(sb->data, cap);
        if (!p) {
            sb->failed = true;
            return;
        }
        sb->data = p;
        sb->cap = cap;
    }
    memcpy(sb->data + sb->len, data, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

static void pk_byte(tp_sb *sb, unsigned char c) { pk_put(sb, &c, 1); }

static void pk_u32(tp_sb *sb, uint32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    pk_put(sb, b, 4);
}

static void pk_write_int(tp_sb *sb, int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
        pk_byte(sb, 'J');
        pk_u32(sb, (uint32_t)(int32_t)v);
    } else {
        pk_byte(sb, 0x8a);
        pk_byte(sb, 8);
        for (int i = 0; i < 8; i++) pk_byte(sb, (unsigned char)((uint64_t)v >> (8 * i)));
    }
}

static void pk_write_bytes(tp_sb *sb, int op4, int op8, const void *data, size_t n) {
    if (n <= UINT32_MAX) {
        pk_byte(sb, (unsigned char)op4);
        pk_u32(sb, (uint32_t)n);
    } else {
        pk_byte(sb, (unsigned char)op8);
        for (int i = 0; i < 8; i++) pk_byte(sb, (unsigned char)((uint64_t)n >> (8 * i)));
    }
    pk_put(sb, data, n);
}

static tp_status pk_write_value(tp_sb *sb, const tp_value *v, int depth) {
    TP_CHECK(depth <= TP_LIMIT_DEPTH, TP_ERR_INVALID_ARG, "example input nested deeper than %d", TP_LIMIT_DEPTH);
    switch (v->kind) {
    case TP_VAL_NONE: pk_byte(sb, 'N'); return TP_OK;
    case TP_VAL_BOOL: pk_byte(sb, v->u.b ? 0x88 : 0x89); return TP_OK;
    case TP_VAL_INT: pk_write_int(sb, v->u.i); return TP_OK;
    case TP_VAL_FLOAT: {
        uint64_t u;
        memcpy(&u, &v->u.f, sizeof u);
        pk_byte(sb, 'G');
        for (int i = 7; i >= 0; i--) pk_byte(sb, (unsigned char)(u >> (8 * i)));
        return TP_OK;
    }
    case TP_VAL_STR: pk_write_bytes(sb, 'X', 0x8d, v->u.s, strlen(v->u.s)); return TP_OK;
    case TP_VAL_TUPLE:
    case TP_VAL_LIST:
        if (v->kind == TP_VAL_LIST) pk_byte(sb, ']');
        pk_byte(sb, '(');
        for (int64_t i = 0; i < v->u.seq.n; i++) TP_TRY(pk_write_value(sb, &v->u.seq.items[i], depth + 1));
        pk_byte(sb, v->kind == TP_VAL_LIST ? 'e' : 't');
        return TP_OK;
    case TP_VAL_DICT:
        pk_byte(sb, '}');
        pk_byte(sb, '(');
        for (int64_t i = 0; i < v->u.seq.n; i++) {
            size_t klen = strlen(v->u.seq.keys[i]);
            TP_CHECK(klen <= TP_LIMIT_NAME, TP_ERR_UNSUPPORTED,
                     "example input key '%.32s...' of %zu bytes exceeds the limit of %d bytes (TP_LIMIT_NAME)",
                     v->u.seq.keys[i], klen, TP_LIMIT_NAME);
            pk_write_bytes(sb, 'X', 0x8d, v->u.seq.keys[i], klen);
            TP_TRY(pk_write_value(sb, &v->u.seq.items[i], depth + 1));
        }
        pk_byte(sb, 'u');
        return TP_OK;
    case TP_VAL_TENSOR: {
        tp_tensor *t = v->u.tensor;
        TP_CHECK(!tp_tensor_is_meta(t), TP_ERR_INVALID_ARG, "a meta tensor has no data to pickle");
        tp_tensor *c;
        TP_TRY(tp_tensor_contiguous(t, &c));
        static const char cls[] = "ctensorplay._C\nTensorBase\n";
        pk_put(sb, cls, sizeof cls - 1);
        pk_byte(sb, ')');
        pk_byte(sb, 0x81);
        pk_byte(sb, '(');
        size_t nbytes = (size_t)tp_tensor_numel(c) * tp_dtype_size(tp_tensor_dtype(c));
        pk_write_bytes(sb, 'B', 0x8e, nbytes ? tp_tensor_data(c) : "", nbytes);
        int64_t strides[TP_MAX_DIMS];
        tp__contiguous_strides(tp_tensor_ndim(c), tp_tensor_sizes(c), strides);
        for (int list = 0; list < 2; list++) {
            pk_byte(sb, ']');
            if (tp_tensor_ndim(c)) {
                pk_byte(sb, '(');
                for (int d = 0; d < tp_tensor_ndim(c); d++) pk_write_int(sb, list ? strides[d] : tp_tensor_sizes(c)[d]);
                pk_byte(sb, 'e');
            }
        }
        pk_write_int(sb, dtype_code(tp_tensor_dtype(c)));
        pk_write_int(sb, 0);  /* storage offset */
        pk_write_int(sb, -1); /* device: CPU */
        pk_byte(sb, 0x89);    /* requires_grad */
        pk_byte(sb, 't');
        pk_byte(sb, 'b');
        tp_tensor_free(c);
        return TP_OK;
    }
    case TP_VAL_DTYPE:
    case TP_VAL_NODE:
        break;
    }
    return tp_error(TP_ERR_UNSUPPORTED, "a %s example input cannot be pickled", tp_value_kind_name(v->kind));
}

tp_status tp__serde_examples_to_pickle(const tp_value *examples, void **data, size_t *size) {
    *data = NULL;
    *size = 0;
    TP_CHECK(!examples || examples->kind == TP_VAL_DICT || examples->kind == TP_VAL_NONE, TP_ERR_INVALID_ARG,
             "example inputs must be a dict, not %s", tp_value_kind_name(examples->kind));
    tp_sb sb = {0};
    pk_byte(&sb, 0x80);
    pk_byte(&sb, 4);
    tp_value empty = tp_value_none();
    tp_status st = TP_OK;
    if (examples && examples->kind == TP_VAL_DICT) st = pk_write_value(&sb, examples, 0);
    else if ((st = tp_value_dict(&empty)) == TP_OK) st = pk_write_value(&sb, &empty, 0);
    tp_value_clear(&empty);
    pk_byte(&sb, '.');
    if (st != TP_OK) {
        tp__sb_free(&sb);
        return st;
    }
    size_t n = sb.len;
    char *out;
    TP_TRY(tp__sb_finish(&sb, &out));
    *data = out;
    *size = n;
    return TP_OK;
}

/* The dtype pickle tensorplay writes (protocol 4, one frame). */
static const unsigned char g_dtype_pickle_head[] = {0x80, 0x04, 0x95, 0x1e, 0, 0, 0, 0, 0, 0, 0, 0x8c, 0x0a,
                                                    't', 'e', 'n', 's', 'o', 'r', 'p', 'l', 'a', 'y', 0x94, 0x8c,
                                                    0x05, 'D', 'T', 'y', 'p', 'e', 0x94, 0x93, 0x94, ')', 0x81, 0x94,
                                                    'K'};

/* base64 ------------------------------------------------------------------ */

static const char g_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const unsigned char *data, size_t n) {
    size_t out_len = 4 * ((n + 2) / 3);
    char *out = tp_malloc(out_len + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16;
        if (i + 1 < n) v |= (uint32_t)data[i + 1] << 8;
        if (i + 2 < n) v |= data[i + 2];
        out[o++] = g_b64[(v >> 18) & 63];
        out[o++] = g_b64[(v >> 12) & 63];
        out[o++] = i + 1 < n ? g_b64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? g_b64[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

/* Strict base64 (padding required, no whitespace). *out is tp_malloc'd.
 * TP_ERR_CORRUPT (no message: the caller names the field) for bad text,
 * TP_ERR_NOMEM when the buffer cannot be allocated. */
static tp_status b64_decode(const char *s, unsigned char **out, size_t *out_len) {
    size_t n = strlen(s);
    *out = NULL;
    if (n % 4) return TP_ERR_CORRUPT;
    unsigned char *buf = tp_malloc(n / 4 * 3 + 1);
    if (!buf) return tp_error(TP_ERR_NOMEM, "out of memory decoding %zu bytes of base64", n);
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            char c = s[i + k];
            const char *p = c ? strchr(g_b64, c) : NULL;
            int d;
            if (c == '=' && i + 4 == n && k >= 2) {
                d = 0;
                pad++;
            } else if (p && !pad) {
                d = (int)(p - g_b64);
            } else {
                tp_free(buf);
                return TP_ERR_CORRUPT;
            }
            v = (v << 6) | (uint32_t)d;
        }
        buf[o++] = (unsigned char)(v >> 16);
        if (pad < 2) buf[o++] = (unsigned char)(v >> 8);
        if (pad < 1) buf[o++] = (unsigned char)v;
    }
    *out = buf;
    *out_len = o;
    return TP_OK;
}

/* A dtype as tensorplay's pickle, base64 (new string). */
static char *dtype_pickle_b64(int code) {
    unsigned char buf[sizeof g_dtype_pickle_head + 3];
    memcpy(buf, g_dtype_pickle_head, sizeof g_dtype_pickle_head);
    buf[sizeof g_dtype_pickle_head] = (unsigned char)code;
    buf[sizeof g_dtype_pickle_head + 1] = 'b';
    buf[sizeof g_dtype_pickle_head + 2] = '.';
    return b64_encode(buf, sizeof buf);
}

/* ======================================================================
 * document nodes and argument values
 * ====================================================================== */

typedef enum doc_state {
    DOC_PENDING = 0, /* not read yet */
    DOC_NODE,        /* became a graph node */
    DOC_FOLDED,      /* became a constant (a static size, a folded int) */
    DOC_DROPPED,     /* a runtime assertion */
    DOC_BROKEN,      /* failed to read (verify mode); users are skipped quietly */
    DOC_SYMSIZE,     /* x.size(d) of a program with dynamic dims: usable only as x.view(x.size(0), -1) */
    DOC_SYMSHAPE     /* x.shape of such a program: usable only through getitem */
} doc_state;

struct doc_node {
    const char *name; /* borrowed from the JSON tree */
    doc_state state;
    tp_node *node;    /* DOC_NODE; DOC_SYMSIZE/SYMSHAPE: the tensor measured */
    int64_t sym_dim;  /* DOC_SYMSIZE: the dim (non-negative) */
    tp_value folded;
};

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Position of the document node called `name`, or -1. */
static int find_doc_node(const reader *r, const char *name) {
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
static tp_status fresh_name(reader *r, const char *base, const char *tag, char **out) {
    size_t n = strlen(base) + strlen(tag) + 32;
    char *name = tp_malloc(n);
    TP_CHECK(name != NULL, TP_ERR_NOMEM, "out of memory naming a node");
    for (int k = 0;; k++) {
        if (k == 0) snprintf(name, n, "%s_%s", base, tag);
        else snprintf(name, n, "%s_%s_%d", base, tag, k);
        if (find_doc_node(r, name) < 0 && !tp_graph_find_node(r->graph, name)) break;
    }
    *out = name;
    return TP_OK;
}

/* Value decoding context: where the value sits, for messages. */
typedef struct vctx {
    reader *r;
    const char *node; /* name of the node being read */
    bool broken_ref;  /* a reference to a broken node was met (verify mode) */
} vctx;

static tp_status decode_value(vctx *c, const json_t *j, const char *path, int depth, tp_value *out);

static tp_status decode_seq(vctx *c, const json_t *arr, const char *path, int depth, bool tuple, tp_value *out) {
    if (!json_is_array(arr)) return report(c->r, TP_ERR_CORRUPT, "%s: expected an array, got %s", path, json_kind(arr));
    size_t n = json_array_size(arr);
    if (n > c->r->lim.items)
        return report(c->r, TP_ERR_CORRUPT, "%s: %zu items exceed the limit of %zu (max_items)", path, n, c->r->lim.items);
    tp_status st = tuple ? tp_value_tuple((int64_t)n, out) : tp_value_list((int64_t)n, out);
    if (st != TP_OK) return note(c->r, st);
    for (size_t i = 0; i < n; i++) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        tp_value item;
        st = decode_value(c, json_array_get(arr, i), sub, depth + 1, &item);
        if (st == TP_OK && (st = tp_value_seq_set(out, (int64_t)i, &item)) != TP_OK) note(c->r, st);
        if (st != TP_OK) {
            tp_value_clear(out);
            return st;
        }
    }
    return TP_OK;
}

static tp_status add_call_values(reader *r, const char *name, tp_op op, const tp_value *vals, int n, tp_node **out);

static tp_status decode_node_ref(vctx *c, const json_t *v, const char *path, tp_value *out) {
    reader *r = c->r;
    if (!json_is_string(v))
        return report(r, TP_ERR_CORRUPT, "%s: expected a node name, got %s", path, json_kind(v));
    const char *name = json_string_value(v);
    int pos = find_doc_node(r, name);
    if (pos < 0) return report(r, TP_ERR_CORRUPT, "%s: refers to undefined node '%.64s'", path, name);
    if (pos >= r->current)
        return report(r, TP_ERR_CORRUPT, "%s: refers to node '%.64s', which is defined later", path, name);
    doc_node *d = &r->nodes[pos];
    switch (d->state) {
    case DOC_NODE: *out = tp_value_node(d->node); return TP_OK;
    case DOC_FOLDED: return note(r, tp_value_copy(&d->folded, out));
    case DOC_DROPPED:
        return report(r, TP_ERR_UNSUPPORTED, "%s: uses the result of the runtime assertion '%.64s'", path, name);
    case DOC_SYMSIZE: {
        /* first use of x.size(d) with d dynamic: a sym_size node */
        tp_node *n = NULL;
        tp_status st = add_call_values(r, d->name, TP_OP_SYM_SIZE,
                                       (tp_value[]){tp_value_node(d->node), tp_value_int(d->sym_dim)}, 2, &n);
        if (st != TP_OK) return st;
        d->state = DOC_NODE;
        d->node = n;
        *out = tp_value_node(n);
        return TP_OK;
    }
    case DOC_SYMSHAPE:
        return report(r, TP_ERR_UNSUPPORTED,
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
static tp_status lift_constant(vctx *c, tp_value *v) {
    reader *r = c->r;
    char target[48], name[48];
    for (int k = 0;; k++) {
        snprintf(target, sizeof target, "_tensor_constant%d", k);
        snprintf(name, sizeof name, "c_tensor_constant%d", k);
        if (find_doc_node(r, name) < 0 && !tp_graph_find_node(r->graph, name) &&
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
    if (st != TP_OK) return note(r, st);
    *v = tp_value_node(n);
    return TP_OK;
}

/* Decode a __pickle__ payload. ellipsis NULL: Ellipsis not allowed. */
static tp_status decode_pickle(vctx *c, const json_t *v, const char *path, tp_value *out, bool *ellipsis) {
    reader *r = c->r;
    if (!json_is_string(v)) return report(r, TP_ERR_CORRUPT, "%s: expected base64 text, got %s", path, json_kind(v));
    unsigned char *bytes;
    size_t n = 0;
    tp_status bst = b64_decode(json_string_value(v), &bytes, &n);
    if (bst == TP_ERR_NOMEM) return note(r, bst);
    if (bst != TP_OK) return report(r, TP_ERR_CORRUPT, "%s: invalid base64 in a pickled value", path);
    tp_status st = pickle_read(bytes, n, &c->r->lim, out, ellipsis);
    tp_free(bytes);
    if (st == TP_OK && out->kind == TP_VAL_TENSOR) return lift_constant(c, out);
    if (st == TP_ERR_NOMEM) return note(r, st);
    if (st != TP_OK)
        return report(r, TP_ERR_UNSUPPORTED, "node %s: pickled value cannot be read safely (%s: %s)", c->node, path,
                      tp_last_error());
    return TP_OK;
}

static tp_status decode_value(vctx *c, const json_t *j, const char *path, int depth, tp_value *out) {
    reader *r = c->r;
    *out = tp_value_none();
    if ((size_t)depth > r->lim.depth)
        return report(r, TP_ERR_CORRUPT, "%s: values nested deeper than %zu (max_depth)", path, r->lim.depth);
    switch (json_typeof(j)) {
    case JSON_NULL: return TP_OK;
    case JSON_TRUE: *out = tp_value_bool(true); return TP_OK;
    case JSON_FALSE: *out = tp_value_bool(false); return TP_OK;
    case JSON_INTEGER: *out = tp_value_int(json_integer_value(j)); return TP_OK;
    case JSON_REAL: *out = tp_value_float(json_real_value(j)); return TP_OK;
    case JSON_STRING:
        if (json_string_length(j) > r->lim.items)
            return report(r, TP_ERR_CORRUPT, "%s: a string of %zu bytes exceeds the limit of %zu (max_items)", path,
                          json_string_length(j), r->lim.items);
        return note(r, tp_value_str(json_string_value(j), out));
    case JSON_ARRAY:
        return report(r, TP_ERR_CORRUPT, "%s: expected a value encoding, got a bare array", path);
    case JSON_OBJECT: break;
    }
    if (json_object_size(j) != 1)
        return report(r, TP_ERR_CORRUPT, "%s: expected a value encoding with one key, got an object of %zu keys", path,
                      json_object_size(j));
    const char *key = json_object_iter_key(json_object_iter((json_t *)j));
    const json_t *v = json_object_iter_value(json_object_iter((json_t *)j));
    if (strcmp(key, "__node__") == 0) return decode_node_ref(c, v, path, out);
    if (strcmp(key, "__tuple__") == 0) return decode_seq(c, v, path, depth, true, out);
    if (strcmp(key, "__list__") == 0) return decode_seq(c, v, path, depth, false, out);
    if (strcmp(key, "__dict__") == 0) {
        if (!json_is_array(v)) return report(r, TP_ERR_CORRUPT, "%s: __dict__ needs an array of pairs, got %s", path, json_kind(v));
        if (json_array_size(v) > r->lim.items)
            return report(r, TP_ERR_CORRUPT, "%s: %zu items exceed the limit of %zu (max_items)", path, json_array_size(v),
                          r->lim.items);
        tp_status st = tp_value_dict(out);
        if (st != TP_OK) return note(r, st);
        for (size_t i = 0; i < json_array_size(v); i++) {
            const json_t *pair = json_array_get(v, i);
            char sub[512];
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            if (!json_is_array(pair) || json_array_size(pair) != 2) {
                st = report(r, TP_ERR_CORRUPT, "%s: expected a [key, value] pair", sub);
            } else if (!json_is_string(json_array_get(pair, 0))) {
                st = report(r, TP_ERR_UNSUPPORTED, "%s: dict keys must be strings, got %s", sub,
                            json_kind(json_array_get(pair, 0)));
            } else if (tp_value_dict_get(out, json_string_value(json_array_get(pair, 0)))) {
                st = report(r, TP_ERR_CORRUPT, "%s: duplicate dict key '%.64s'", sub,
                            json_string_value(json_array_get(pair, 0)));
            } else {
                tp_value item;
                char vsub[520];
                snprintf(vsub, sizeof vsub, "%s[1]", sub);
                st = decode_value(c, json_array_get(pair, 1), vsub, depth + 1, &item);
                if (st == TP_OK && (st = tp_value_dict_set(out, json_string_value(json_array_get(pair, 0)), &item)) != TP_OK)
                    note(r, st);
            }
            if (st != TP_OK) {
                tp_value_clear(out);
                return st;
            }
        }
        return TP_OK;
    }
    if (strcmp(key, "__slice__") == 0)
        return report(r, TP_ERR_UNSUPPORTED, "node %s: a slice is only supported as a tensor index (%s)", c->node, path);
    if (strcmp(key, "__pickle__") == 0) return decode_pickle(c, v, path, out, NULL);
    if (strcmp(key, "__float__") == 0 && json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcmp(s, "nan") == 0) *out = tp_value_float(NAN);
        else if (strcmp(s, "inf") == 0) *out = tp_value_float(INFINITY);
        else if (strcmp(s, "-inf") == 0) *out = tp_value_float(-INFINITY);
        else return report(r, TP_ERR_CORRUPT, "%s: unknown float '%.16s'", path, s);
        return TP_OK;
    }
    return report(r, TP_ERR_CORRUPT, "%s: unknown value encoding '%.64s'", path, key);
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
        return report(r, TP_ERR_CORRUPT, "%s: expected a {\"__tuple__\": [...]} of arguments", sub);
    TP_TRY(decode_seq(c, json_object_get(a, "__tuple__"), sub, 0, true, args));
    snprintf(sub, sizeof sub, "%s.kwargs", path);
    if (!json_is_object(k) || !json_object_get(k, "__dict__") || json_object_size(k) != 1) {
        tp_value_clear(args);
        return report(r, TP_ERR_CORRUPT, "%s: expected a {\"__dict__\": [...]} of keyword arguments", sub);
    }
    tp_status st = decode_value(c, k, sub, 0, kwargs);
    if (st != TP_OK) tp_value_clear(args);
    return st;
}

/* ======================================================================
 * the op map's parameter notation (serde.h)
 * ====================================================================== */

typedef enum param_kind { PARAM_ARG = 0, PARAM_IGNORE, PARAM_MUST, PARAM_INPLACE } param_kind;

typedef struct param {
    char their[48];
    char ours[48]; /* PARAM_ARG: the schema argument */
    param_kind kind;
    bool kwonly, varargs;
    bool scalar_if_single; /* "name^": a one-item list is written as the item */
    bool has_lit;
    tp_value lit; /* their default (PARAM_ARG) or required value (PARAM_MUST) */
} param;

#define MAX_PARAMS 24

typedef struct param_list {
    int n;
    param items[MAX_PARAMS];
} param_list;

static void params_clear(param_list *pl) {
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

static tp_status parse_params(const char *spec, param_list *pl) {
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
                params_clear(pl);
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
                params_clear(pl);
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
                    params_clear(pl);
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
static int schema_index(const tp_schema *s, const char *ours) {
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

static bool is_none(const tp_value *v) { return v->kind == TP_VAL_NONE; }

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
    if (!s) return report(r, TP_ERR_INTERNAL, "node %s: op %s has no schema", node, tp_op_name(op));
    m->n = s->n_args;
    for (int i = 0; i < m->n; i++) {
        m->values[i] = tp_value_none();
        m->given[i] = false;
    }
    param_list pl;
    tp_status st = parse_params(e->params, &pl);
    if (st != TP_OK) return note(r, st);
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
        st = report(r, TP_ERR_UNSUPPORTED, "node %s: %s takes at most %" PRId64 " positional arguments, got %" PRId64, node,
                    callee, next, n_pos);
        goto done;
    }
    for (int64_t k = 0; k < tp_value_len(kwargs); k++) {
        const char *key = kwargs->u.seq.keys[k];
        int found = -1;
        for (int i = 0; i < pl.n && found < 0; i++)
            if (strcmp(pl.items[i].their, key) == 0) found = i;
        if (found < 0) {
            st = report(r, TP_ERR_UNSUPPORTED, "node %s: %s has no supported argument '%.64s'", node, callee, key);
            goto done;
        }
        if (got[found]) {
            st = report(r, TP_ERR_CORRUPT, "node %s: %s got argument '%.64s' twice", node, callee, key);
            goto done;
        }
        got[found] = &kwargs->u.seq.items[k];
    }
    for (int i = 0; i < pl.n; i++) {
        param *q = &pl.items[i];
        const tp_value *v = got[i];
        if (q->kind == PARAM_IGNORE) continue;
        if (q->kind == PARAM_MUST) {
            if (v && !is_none(v) && !tp_value_equal(v, &q->lit)) {
                char text[64];
                tp_value_repr(v, text, sizeof text);
                st = report(r, TP_ERR_UNSUPPORTED, "node %s: %s with %s=%s is not supported", node, callee, q->their, text);
                goto done;
            }
            continue;
        }
        if (q->kind == PARAM_INPLACE) {
            if (v && v->kind == TP_VAL_BOOL && v->u.b) *inplace = true;
            else if (v && !is_none(v) && v->kind != TP_VAL_BOOL) {
                st = report(r, TP_ERR_CORRUPT, "node %s: %s argument '%s' must be a bool", node, callee, q->their);
                goto done;
            }
            continue;
        }
        int idx = schema_index(s, q->ours);
        if (idx < 0) {
            st = report(r, TP_ERR_INTERNAL, "op map: %s parameter '%s' names no argument of %s", callee, q->ours,
                        tp_op_name(op));
            goto done;
        }
        if (!v) {
            if (!q->has_lit) continue;
            v = &q->lit;
        }
        /* None for an argument that cannot be None: the schema's default */
        if (is_none(v) && s->args[idx].has_default && !is_none(&s->args[idx].default_value)) continue;
        /* [] for an int list whose default is one int (padding=0,
         * dilation=1): that default, as tensorplay.functional's padding=[] /
         * dilation=[] mean (a None or list default keeps [] as it is) */
        const tp_value *dflt = &s->args[idx].default_value;
        if ((s->args[idx].type == TP_ARG_INT_LIST || s->args[idx].type == TP_ARG_OPT_INT_LIST) &&
            tp_value_is_seq(v) && tp_value_len(v) == 0 && s->args[idx].has_default && dflt->kind == TP_VAL_INT)
            continue;
        if (m->given[idx]) {
            st = report(r, TP_ERR_CORRUPT, "node %s: %s sets argument '%s' twice", node, callee, s->args[idx].name);
            goto done;
        }
        if ((st = tp_value_copy(v, &m->values[idx])) != TP_OK) goto done_note;
        m->given[idx] = true;
    }
    if (e->fixed) {
        param_list fx;
        if ((st = parse_params(e->fixed, &fx)) != TP_OK) goto done_note;
        for (int i = 0; st == TP_OK && i < fx.n; i++) {
            int idx = schema_index(s, fx.items[i].ours);
            if (idx < 0) {
                st = report(r, TP_ERR_INTERNAL, "op map: fixed argument '%s' of %s is not in %s", fx.items[i].ours,
                            callee, tp_op_name(op));
                break;
            }
            tp_value_clear(&m->values[idx]);
            st = tp_value_copy(&fx.items[i].lit, &m->values[idx]);
            if (st != TP_OK) note(r, st);
            m->given[idx] = true;
        }
        params_clear(&fx);
    }
    goto done;
done_note:
    note(r, st);
done:
    for (int i = 0; i < pl.n; i++)
        if (has_packed[i]) tp_value_clear(&packed[i]);
    params_clear(&pl);
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
        if (st == TP_ERR_NOMEM) return note(r, st);
        char msg[512];
        snprintf(msg, sizeof msg, "%s", tp_last_error());
        return report(r, st, "node %s: %s", name, msg);
    }
    for (int i = 0; i < s->n_args; i++) tp_value_clear(&bound[i]);
    tp_node *n;
    st = tp__graph_create_node_named(r->graph, TP_NODE_CALL_FUNCTION, tp_op_name(op), args, kwargs, name, &n);
    if (st != TP_OK) return note(r, st);
    *out = n;
    st = tp_node_infer_meta(n);
    if (st == TP_ERR_UNSUPPORTED && op == TP_OP_INDEX) {
        /* a boolean mask: the size is known only when it runs (no meta) */
        tp_clear_error();
        return TP_OK;
    }
    if (st != TP_OK) return note(r, st); /* the node stays (verify mode reads on) */
    return TP_OK;
}

/* op(args...) from positional values. */
static tp_status add_call_values(reader *r, const char *name, tp_op op, const tp_value *vals, int n, tp_node **out) {
    tp_value args = tp_value_none(); /* cleared on failure: must be valid even when tp_value_tuple fails */
    tp_status st = tp_value_tuple(n, &args);
    for (int i = 0; st == TP_OK && i < n; i++) {
        tp_value c;
        st = tp_value_copy(&vals[i], &c);
        if (st == TP_OK) st = tp_value_seq_set(&args, i, &c);
    }
    if (st != TP_OK) {
        tp_value_clear(&args);
        return note(r, st);
    }
    st = add_call(r, name, op, &args, NULL, out);
    tp_value_clear(&args);
    return st;
}

/* ======================================================================
 * reading nodes
 * ====================================================================== */

static const tp_value *ref_meta(const tp_value *v) {
    return v && v->kind == TP_VAL_NODE ? tp_node_meta_val(v->u.node) : NULL;
}

static const tp_tensor *ref_meta_tensor(const tp_value *v) {
    const tp_value *m = ref_meta(v);
    return m && m->kind == TP_VAL_TENSOR ? m->u.tensor : NULL;
}

static void set_node(doc_node *d, tp_node *n) {
    d->state = DOC_NODE;
    d->node = n;
}

static void set_folded(doc_node *d, tp_value *v) {
    d->state = DOC_FOLDED;
    tp_value_move(&d->folded, v);
}

/* Folding a size is exact only when no dim is dynamic. */
static tp_status need_static(reader *r, const char *node, const char *what) {
    if (!r->dynamic) return TP_OK;
    return report(r, TP_ERR_UNSUPPORTED,
                  "node %s: %s of a tensor cannot be used: the program has dynamic dims and symbolic sizes are not "
                  "supported",
                  node, what);
}

static tp_status need_tensor_meta(reader *r, const char *node, const tp_value *v, const char *what,
                                  const tp_tensor **out) {
    *out = ref_meta_tensor(v);
    if (*out) return TP_OK;
    if (v->kind != TP_VAL_NODE)
        return report(r, TP_ERR_UNSUPPORTED, "node %s: %s needs a tensor, got %s", node, what, tp_value_kind_name(v->kind));
    return report(r, TP_ERR_UNSUPPORTED, "node %s: %s needs the shape of '%s', which is unknown (no example input?)", node,
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
            return report(r, TP_ERR_UNSUPPORTED, "node %s: an in-place call needs a tensor node as its first argument",
                          d->name);
        }
        self = tp_value_node(m.values[0].u.node);
    }
    tp_value cargs, ckwargs;
    st = mapped_to_call(op, &m, &cargs, &ckwargs);
    mapped_clear(&m);
    if (st != TP_OK) return note(r, st);
    tp_node *n = NULL;
    if (!copy_back) {
        st = add_call(r, d->name, op, &cargs, &ckwargs, &n);
    } else {
        char *tmp = NULL;
        st = fresh_name(r, d->name, tp_op_name(op), &tmp);
        if (st != TP_OK) note(r, st);
        tp_node *value_node = NULL;
        if (st == TP_OK) st = add_call(r, tmp, op, &cargs, &ckwargs, &value_node);
        tp_free(tmp);
        if (st == TP_OK) {
            tp_value vals[2] = {self, tp_value_node(value_node)};
            st = add_call_values(r, d->name, TP_OP_COPY_, vals, 2, &n);
        }
    }
    tp_value_clear(&cargs);
    tp_value_clear(&ckwargs);
    if (n) set_node(d, n);
    return st;
}

/* Python arithmetic on constants (folded sizes and the like). */
static tp_status fold_binop(reader *r, doc_node *d, const char *fn, const tp_value *a, const tp_value *b) {
    if (!tp_value_is_number(a) || !tp_value_is_number(b))
        return report(r, TP_ERR_UNSUPPORTED, "node %s: _operator.%s of %s and %s is not supported", d->name, fn,
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
        return report(r, TP_ERR_UNSUPPORTED, "node %s: _operator.%s cannot be folded for these constants", d->name, fn);
    set_folded(d, &res);
    return TP_OK;
}

static tp_status build_binop(reader *r, doc_node *d, const tp_serde_op_entry *e, const tp_value *args,
                             const tp_value *kwargs) {
    if (tp_value_len(args) != 2 || tp_value_len(kwargs) != 0)
        return report(r, TP_ERR_CORRUPT, "node %s: _operator.%s takes two positional arguments", d->name, e->name);
    const tp_value *a = tp_value_at(args, 0), *b = tp_value_at(args, 1);
    bool an = a->kind == TP_VAL_NODE, bn = b->kind == TP_VAL_NODE;
    if (!an && !bn) return fold_binop(r, d, e->name, a, b);
    const tp_value *ma = ref_meta(a), *mb = ref_meta(b);
    bool ta = ma && ma->kind == TP_VAL_TENSOR, tb = mb && mb->kind == TP_VAL_TENSOR;
    if (((ma && ma->kind == TP_VAL_INT) || (mb && mb->kind == TP_VAL_INT)) && !ta && !tb) {
        /* arithmetic on symbolic sizes (or int inputs) */
        const tp_serde_op_entry *se = tp__serde_find_symint(e->name);
        if (!se)
            return report(r, TP_ERR_UNSUPPORTED, "node %s: _operator.%s on symbolic sizes is not supported", d->name,
                          e->name);
        tp_node *n = NULL;
        tp_status st = add_call_values(r, d->name, se->op, (tp_value[]){*a, *b}, 2, &n);
        if (n) set_node(d, n);
        return st;
    }
    /* a tensor first, or an operand of unknown kind first (taken as the tensor) */
    if (an && !(ma && !ta && tb)) return build_plain(r, d, e, e->op, args, kwargs);
    /* scalar first (a constant, or a python int/float input): x OP tensor */
    tp_node *n = NULL;
    tp_status st;
    if (e->swapped_op != TP_OP_INVALID && !e->fixed) {
        tp_value vals[2] = {*b, *a};
        st = add_call_values(r, d->name, e->swapped_op, vals, 2, &n);
    } else if (strcmp(e->name, "sub") == 0 || strcmp(e->name, "truediv") == 0) {
        /* a - x = (-x) + a; a / x = (1/x) * a */
        bool sub = e->name[0] == 's';
        char *tmp;
        st = fresh_name(r, d->name, sub ? "neg" : "reciprocal", &tmp);
        if (st != TP_OK) return note(r, st);
        tp_node *first = NULL;
        st = add_call_values(r, tmp, sub ? TP_OP_NEG : TP_OP_RECIPROCAL, b, 1, &first);
        tp_free(tmp);
        if (st == TP_OK) {
            tp_value vals[2] = {tp_value_node(first), *a};
            st = add_call_values(r, d->name, sub ? TP_OP_ADD : TP_OP_MUL, vals, 2, &n);
        }
    } else {
        return report(r, TP_ERR_UNSUPPORTED, "node %s: _operator.%s with a scalar first operand is not supported",
                      d->name, e->name);
    }
    if (n) set_node(d, n);
    return st;
}

/* ---- tensor indexing ---------------------------------------------------- */

typedef enum ix_kind { IX_INT, IX_SLICE, IX_NONE, IX_ELLIPSIS, IX_TENSOR } ix_kind;
typedef struct ix_item {
    ix_kind kind;
    int64_t i;
    tp_value start, stop; /* IX_SLICE: int, a size node or None */
    int64_t step;
    tp_value t;           /* IX_TENSOR: a node reference (an index or mask tensor) */
    int span;             /* IX_TENSOR: dims it indexes (a mask's rank, else 1) */
} ix_item;

#define MAX_INDEX_ITEMS 32

/* A list of ints as an index: an int64 constant tensor (lifted), referenced
 * from *out. */
static tp_status int_list_index(vctx *c, const tp_value *list, const char *path, tp_value *out) {
    reader *r = c->r;
    int64_t n = tp_value_len(list);
    int64_t *vals = tp_malloc((size_t)(n ? n : 1) * sizeof *vals);
    if (!vals) return note(r, tp_error(TP_ERR_NOMEM, "out of memory"));
    tp_status st = TP_OK;
    for (int64_t k = 0; k < n && st == TP_OK; k++) {
        const tp_value *v = tp_value_at(list, k);
        if (v->kind != TP_VAL_INT)
            st = report(r, TP_ERR_UNSUPPORTED, "node %s: an index list must hold ints, not %s (%s[%" PRId64 "])", c->node,
                        tp_value_kind_name(v->kind), path, k);
        else vals[k] = v->u.i;
    }
    tp_tensor *t = NULL;
    if (st == TP_OK && (st = tp_tensor_from_data(TP_INT64, 1, &n, vals, &t)) != TP_OK) note(r, st);
    tp_free(vals);
    if (st != TP_OK) return st;
    *out = tp_value_tensor(t);
    return lift_constant(c, out);
}

/* One item of an index: int, slice, None, Ellipsis, a tensor node (index or
 * mask) or a list of ints. */
static tp_status decode_index_item(vctx *c, const json_t *j, const char *path, ix_item *it) {
    reader *r = c->r;
    it->start = it->stop = it->t = tp_value_none();
    it->step = 1;
    it->span = 1;
    if (json_is_null(j)) {
        it->kind = IX_NONE;
        return TP_OK;
    }
    if (json_is_object(j) && json_object_size(j) == 1 && json_object_get(j, "__slice__")) {
        const json_t *sl = json_object_get(j, "__slice__");
        if (!json_is_array(sl) || json_array_size(sl) != 3)
            return report(r, TP_ERR_CORRUPT, "%s: a slice needs [start, stop, step]", path);
        tp_value parts[3];
        for (int k = 0; k < 3; k++) {
            char sub[520];
            snprintf(sub, sizeof sub, "%s[%d]", path, k);
            tp_status st = decode_value(c, json_array_get(sl, (size_t)k), sub, 1, &parts[k]);
            const tp_value *pm = st == TP_OK && parts[k].kind == TP_VAL_NODE ? ref_meta(&parts[k]) : NULL;
            bool symbolic = k < 2 && pm && pm->kind == TP_VAL_INT; /* a bound computed from sizes */
            if (st == TP_OK && parts[k].kind != TP_VAL_NONE && parts[k].kind != TP_VAL_INT && !symbolic) {
                st = report(r, TP_ERR_UNSUPPORTED, "node %s: slice bounds must be ints, sizes or None (%s)", c->node, sub);
                tp_value_clear(&parts[k]);
            }
            if (st != TP_OK) {
                for (int q = 0; q < k; q++) tp_value_clear(&parts[q]);
                return st;
            }
        }
        it->kind = IX_SLICE;
        it->start = parts[0];
        it->stop = parts[1];
        if (parts[2].kind == TP_VAL_INT) it->step = parts[2].u.i;
        if (it->step <= 0)
            return report(r, TP_ERR_UNSUPPORTED, "node %s: slice step %" PRId64 " is not supported (must be positive)",
                          c->node, it->step);
        return TP_OK;
    }
    if (json_is_object(j) && json_object_size(j) == 1 && json_object_get(j, "__pickle__")) {
        bool ellipsis = false;
        tp_value v;
        TP_TRY(decode_pickle(c, json_object_get(j, "__pickle__"), path, &v, &ellipsis));
        if (ellipsis) {
            it->kind = IX_ELLIPSIS;
            return TP_OK;
        }
        if (v.kind != TP_VAL_NODE) { /* a pickled tensor is lifted to a placeholder node */
            tp_value_clear(&v);
            return report(r, TP_ERR_UNSUPPORTED, "node %s: this index is not supported (%s)", c->node, path);
        }
        it->kind = IX_TENSOR;
        it->t = v;
    } else {
        tp_value v;
        TP_TRY(decode_value(c, j, path, 1, &v));
        if (v.kind == TP_VAL_INT) {
            it->kind = IX_INT;
            it->i = v.u.i;
            return TP_OK;
        }
        if (v.kind == TP_VAL_LIST || v.kind == TP_VAL_TUPLE) {
            tp_value t;
            tp_status st = int_list_index(c, &v, path, &t);
            tp_value_clear(&v);
            TP_TRY(st);
            v = t;
        }
        if (v.kind != TP_VAL_NODE) {
            tp_status st = report(r, TP_ERR_UNSUPPORTED, "node %s: indexing a tensor with a %s is not supported (%s)",
                                  c->node, tp_value_kind_name(v.kind), path);
            tp_value_clear(&v);
            return st;
        }
        it->kind = IX_TENSOR;
        it->t = v;
    }
    const tp_tensor *m = ref_meta_tensor(&it->t);
    if (!m) {
        const tp_value *mv = ref_meta(&it->t);
        if (mv && mv->kind == TP_VAL_INT) { /* an int node (from sizes) indexes like an int */
            it->kind = IX_INT;
            return TP_OK;
        }
        return report(r, TP_ERR_UNSUPPORTED, "node %s: indexing with '%s' needs its shape, which is unknown (%s)", c->node,
                      tp_node_name(it->t.u.node), path);
    }
    if (tp_tensor_dtype(m) == TP_BOOL || tp_tensor_dtype(m) == TP_UINT8) it->span = tp_tensor_ndim(m);
    else if (tp_tensor_dtype(m) != TP_INT64 && tp_tensor_dtype(m) != TP_INT32)
        return report(r, TP_ERR_TYPE, "node %s: tensors used as indices must be long, int, byte or bool tensors, not %s (%s)",
                      c->node, tp_dtype_name(tp_tensor_dtype(m)), path);
    return TP_OK;
}

static void ix_clear(ix_item *items, int n) {
    for (int i = 0; i < n; i++) {
        tp_value_clear(&items[i].start);
        tp_value_clear(&items[i].stop);
        tp_value_clear(&items[i].t);
    }
}

/* Name for the next helper node, or NULL when it is the last (named like
 * the document node). */
static tp_status step_name(reader *r, doc_node *d, bool last, const char *tag, char **name) {
    *name = NULL;
    if (last) return TP_OK;
    tp_status st = fresh_name(r, d->name, tag, name);
    return st == TP_OK ? TP_OK : note(r, st);
}

/* base[index] on a tensor (value NULL), or base[index] = *value: select /
 * slice / unsqueeze nodes for ints, slices and None; with a tensor, a list
 * or a mask among the items, then an index node over the remaining dims
 * (ints select first, as in PyTorch: x[0, :, i] is x[0][:, i]); for a
 * store, copy_/fill_ into the view, or index_put_. The last node is named
 * like the document node. */
static tp_status lower_index(vctx *c, doc_node *d, const tp_value *base, const json_t *index, const char *path,
                             const tp_value *value) {
    reader *r = c->r;
    ix_item items[MAX_INDEX_ITEMS];
    int n = 0;
    tp_status st = TP_OK;
    if (json_is_object(index) && json_object_size(index) == 1 && json_object_get(index, "__tuple__")) {
        const json_t *arr = json_object_get(index, "__tuple__");
        if (!json_is_array(arr)) return report(r, TP_ERR_CORRUPT, "%s: __tuple__ needs an array", path);
        if (json_array_size(arr) > MAX_INDEX_ITEMS)
            return report(r, TP_ERR_UNSUPPORTED, "node %s: more than %d indices", d->name, MAX_INDEX_ITEMS);
        for (size_t k = 0; k < json_array_size(arr) && st == TP_OK; k++) {
            char sub[560];
            snprintf(sub, sizeof sub, "%s[%zu]", path, k);
            st = decode_index_item(c, json_array_get(arr, k), sub, &items[n]);
            n++; /* cleared either way */
        }
    } else {
        st = decode_index_item(c, index, path, &items[0]);
        n = 1;
    }
    if (st != TP_OK) {
        ix_clear(items, n);
        return st;
    }
    int consuming = 0, ellipses = 0;
    bool advanced = false;
    for (int k = 0; k < n; k++) {
        if (items[k].kind == IX_INT || items[k].kind == IX_SLICE) consuming++;
        if (items[k].kind == IX_TENSOR) {
            consuming += items[k].span;
            advanced = true;
        }
        if (items[k].kind == IX_ELLIPSIS) ellipses++;
    }
    const tp_tensor *meta = ref_meta_tensor(base);
    if (ellipses > 1) st = report(r, TP_ERR_CORRUPT, "node %s: an index can only have a single ellipsis", d->name);
    else if (ellipses && !meta)
        st = report(r, TP_ERR_UNSUPPORTED, "node %s: indexing with ... needs the rank of '%s', which is unknown", d->name,
                    base->kind == TP_VAL_NODE ? tp_node_name(base->u.node) : "?");
    else if (meta && consuming > tp_tensor_ndim(meta))
        st = report(r, TP_ERR_INDEX, "node %s: too many indices for a tensor of dimension %d", d->name,
                    tp_tensor_ndim(meta));
    /* which steps emit a node (the last one takes the document name when nothing follows) */
    int last_emit = -1;
    for (int k = 0; k < n; k++) {
        bool full = items[k].kind == IX_SLICE && is_none(&items[k].start) && is_none(&items[k].stop) && items[k].step == 1;
        bool view_step = items[k].kind == IX_NONE || (items[k].kind == IX_SLICE && !full) || items[k].kind == IX_INT;
        if (view_step) last_emit = k;
    }
    bool final_op = advanced || value != NULL; /* an index / store node comes after the views */
    tp_value cur = *base;                     /* borrowed node reference */
    tp_value list = tp_value_none();          /* advanced: the index node's indices */
    if (st == TP_OK && advanced && (st = tp_value_list(0, &list)) != TP_OK) note(r, st);
    int64_t dim = 0;
    tp_node *node = NULL;
    for (int k = 0; k < n && st == TP_OK; k++) {
        ix_item *it = &items[k];
        tp_value none = tp_value_none();
        if (it->kind == IX_ELLIPSIS) {
            for (int64_t q = 0; advanced && q < tp_tensor_ndim(meta) - consuming && st == TP_OK; q++)
                st = tp_value_append(&list, &none);
            dim += tp_tensor_ndim(meta) - consuming;
            if (st != TP_OK) note(r, st);
            continue;
        }
        bool full = it->kind == IX_SLICE && is_none(&it->start) && is_none(&it->stop) && it->step == 1;
        if (full || it->kind == IX_TENSOR) {
            /* a whole dim, or an index of the index node */
            tp_value item = none;
            if (!full) st = tp_value_copy(&it->t, &item);
            if (st == TP_OK && advanced) st = tp_value_append(&list, &item);
            else tp_value_clear(&item);
            if (st != TP_OK) note(r, st);
            dim += full ? 1 : it->span;
            continue;
        }
        char *name = NULL;
        const char *tag = it->kind == IX_INT ? "select" : it->kind == IX_SLICE ? "slice" : "unsqueeze";
        if ((st = step_name(r, d, k == last_emit && !final_op, tag, &name)) != TP_OK) break;
        const char *node_name = name ? name : d->name;
        if (it->kind == IX_INT) {
            tp_value vals[3] = {cur, tp_value_int(dim), it->t.kind == TP_VAL_NODE ? it->t : tp_value_int(it->i)};
            st = add_call_values(r, node_name, TP_OP_SELECT, vals, 3, &node);
        } else {
            if (it->kind == IX_SLICE) {
                tp_value vals[5] = {cur, tp_value_int(dim), it->start, it->stop, tp_value_int(it->step)};
                st = add_call_values(r, node_name, TP_OP_SLICE, vals, 5, &node);
            } else {
                tp_value vals[2] = {cur, tp_value_int(dim)};
                st = add_call_values(r, node_name, TP_OP_UNSQUEEZE, vals, 2, &node);
            }
            if (st == TP_OK && advanced && (st = tp_value_append(&list, &none)) != TP_OK) note(r, st);
            dim++;
        }
        tp_free(name);
        if (node) cur = tp_value_node(node);
    }
    /* trailing whole dims of the index list say nothing */
    while (st == TP_OK && advanced && tp_value_len(&list) > 0 && tp_value_at(&list, tp_value_len(&list) - 1)->kind == TP_VAL_NONE)
        list.u.seq.n--;
    if (st == TP_OK && !value && advanced) {
        tp_value vals[2] = {cur, list};
        st = add_call_values(r, d->name, TP_OP_INDEX, vals, 2, &node);
    } else if (st == TP_OK && !value && last_emit < 0) {
        /* x[:] / x[...]: the same values */
        tp_value vals[1] = {cur};
        st = add_call_values(r, d->name, TP_OP_TO, vals, 1, &node);
    } else if (st == TP_OK && value) {
        const tp_tensor *vm = ref_meta_tensor(value), *cm = ref_meta_tensor(&cur);
        tp_value v = *value; /* borrowed */
        tp_node *cast = NULL;
        if (value->kind == TP_VAL_NODE && !vm) {
            st = report(r, TP_ERR_UNSUPPORTED, "node %s: the value stored needs a known shape", d->name);
        } else if (vm && cm && tp_tensor_dtype(vm) != tp_tensor_dtype(cm) && advanced) {
            /* x[i] = v converts v to x's dtype */
            char *name = NULL;
            if ((st = step_name(r, d, false, "to", &name)) == TP_OK) {
                tp_value vals[2] = {*value, tp_value_dtype(tp_tensor_dtype(cm))};
                st = add_call_values(r, name, TP_OP_TO, vals, 2, &cast);
                tp_free(name);
                if (cast) v = tp_value_node(cast);
            }
        } else if (value->kind != TP_VAL_NODE && value->kind != TP_VAL_INT && value->kind != TP_VAL_FLOAT &&
                   value->kind != TP_VAL_BOOL) {
            st = report(r, TP_ERR_UNSUPPORTED, "node %s: storing a %s into a tensor is not supported", d->name,
                        tp_value_kind_name(value->kind));
        }
        if (st == TP_OK && advanced) {
            tp_value vals[4] = {cur, list, v, tp_value_bool(false)};
            st = add_call_values(r, d->name, TP_OP_INDEX_PUT_, vals, 4, &node);
        } else if (st == TP_OK) {
            tp_value vals[2] = {cur, v};
            st = add_call_values(r, d->name, value->kind == TP_VAL_NODE ? TP_OP_COPY_ : TP_OP_FILL_, vals, 2, &node);
        }
    }
    tp_value_clear(&list);
    ix_clear(items, n);
    if (st == TP_OK) set_node(d, node);
    return st;
}

static tp_status build_tensor_index(vctx *c, doc_node *d, const tp_value *base, const json_t *index, const char *path) {
    return lower_index(c, d, base, index, path, NULL);
}

/* _operator.getitem(base, index): tensor indexing, an item of a tuple/list
 * node (our getitem op), or of a folded constant. */
static tp_status build_getitem(vctx *c, doc_node *d, const json_t *jargs, const char *path, const tp_value *kwargs) {
    reader *r = c->r;
    const json_t *arr = json_object_get(jargs, "__tuple__");
    char p0[512], p1[512];
    snprintf(p0, sizeof p0, "%s.args[0]", path);
    snprintf(p1, sizeof p1, "%s.args[1]", path);
    if (!json_is_array(arr) || json_array_size(arr) != 2 || tp_value_len(kwargs))
        return report(r, TP_ERR_CORRUPT, "node %s: _operator.getitem takes two positional arguments", d->name);
    /* x.shape[i] with dynamic dims: a symbolic size */
    const json_t *jb = json_array_get(arr, 0), *ji = json_array_get(arr, 1);
    const json_t *bref = json_is_object(jb) && json_object_size(jb) == 1 ? json_object_get(jb, "__node__") : NULL;
    int bpos = json_is_string(bref) ? find_doc_node(r, json_string_value(bref)) : -1;
    if (bpos >= 0 && bpos < r->current && r->nodes[bpos].state == DOC_SYMSHAPE && json_is_integer(ji)) {
        const tp_tensor *t = ref_meta_tensor(&(tp_value){.kind = TP_VAL_NODE, .u.node = r->nodes[bpos].node});
        int w;
        if (!t || tp__wrap_dim(json_integer_value(ji), tp_tensor_ndim(t), &w) != TP_OK)
            return report(r, TP_ERR_UNSUPPORTED, "node %s: cannot index the shape of '%s'", d->name,
                          tp_node_name(r->nodes[bpos].node));
        d->state = DOC_SYMSIZE;
        d->node = r->nodes[bpos].node;
        d->sym_dim = w;
        return TP_OK;
    }
    tp_value base;
    TP_TRY(decode_value(c, jb, p0, 1, &base));
    tp_status st = TP_OK;
    const tp_value *meta = ref_meta(&base);
    bool container = false, tensor = false;
    if (base.kind == TP_VAL_NODE) {
        if (meta && meta->kind == TP_VAL_TENSOR) tensor = true;
        else if (meta && (meta->kind == TP_VAL_TUPLE || meta->kind == TP_VAL_LIST)) container = true;
        else {
            tp_op op = tp_node_op(base.u.node);
            const tp_schema *s = op != TP_OP_INVALID ? tp_op_schema(op) : NULL;
            if (s && s->returns == TP_RET_TENSOR) tensor = true;
            else if (s) container = true;
        }
    }
    if (tensor) {
        st = build_tensor_index(c, d, &base, json_array_get(arr, 1), p1);
    } else {
        tp_value index;
        st = decode_value(c, json_array_get(arr, 1), p1, 1, &index);
        if (st == TP_OK) {
            int64_t n_items = tp_value_len(&base), at = index.kind == TP_VAL_INT && index.u.i < 0 ? index.u.i + n_items : index.u.i;
            bool item_is_node = base.kind != TP_VAL_NODE && tp_value_is_seq(&base) && index.kind == TP_VAL_INT &&
                                at >= 0 && at < n_items && tp_value_at(&base, at)->kind == TP_VAL_NODE;
            if (item_is_node) {
                /* (a, b)[0] where a is a node: keep a node of this name (outputs may name it) */
                tp_node *n = NULL;
                tp_value vals[2] = {base, index};
                st = add_call_values(r, d->name, TP_OP_GETITEM, vals, 2, &n);
                if (n) set_node(d, n);
            } else if (base.kind != TP_VAL_NODE && tp_value_is_seq(&base) && index.kind == TP_VAL_INT) {
                int64_t n = tp_value_len(&base), i = index.u.i < 0 ? index.u.i + n : index.u.i;
                if (i < 0 || i >= n) {
                    st = report(r, TP_ERR_INDEX, "node %s: index %" PRId64 " out of range for a %s of %" PRId64, d->name,
                                index.u.i, tp_value_kind_name(base.kind), n);
                } else {
                    tp_value item;
                    st = tp_value_copy(tp_value_at(&base, i), &item);
                    if (st == TP_OK) set_folded(d, &item);
                    else note(r, st);
                }
            } else if (container && index.kind == TP_VAL_INT) {
                tp_node *n = NULL;
                tp_value vals[2] = {base, index};
                st = add_call_values(r, d->name, TP_OP_GETITEM, vals, 2, &n);
                if (n) set_node(d, n);
            } else if (index.kind == TP_VAL_STR && base.kind == TP_VAL_NODE &&
                       (!meta || meta->kind == TP_VAL_DICT || meta->kind == TP_VAL_NONE)) {
                /* d['key'] of a dict input (or a node returning a dict) */
                tp_node *n = NULL;
                tp_value vals[2] = {base, index};
                st = add_call_values(r, d->name, TP_OP_GETITEM, vals, 2, &n);
                if (n) set_node(d, n);
            } else if (index.kind == TP_VAL_STR) {
                st = report(r, TP_ERR_UNSUPPORTED, "node %s: indexing a %s by key '%.64s' is not supported", d->name,
                            meta ? tp_value_kind_name(meta->kind) : tp_value_kind_name(base.kind), index.u.s);
            } else if (base.kind == TP_VAL_NODE && !container) {
                st = report(r, TP_ERR_UNSUPPORTED,
                            "node %s: cannot tell whether '%s' is a tensor or a tuple (its shape is unknown: no example "
                            "input?)",
                            d->name, tp_node_name(base.u.node));
            } else {
                st = report(r, TP_ERR_UNSUPPORTED, "node %s: indexing a %s with a %s is not supported", d->name,
                            tp_value_kind_name(base.kind), tp_value_kind_name(index.kind));
            }
            tp_value_clear(&index);
        }
    }
    tp_value_clear(&base);
    return st;
}

/* _operator.setitem(base, index, value): x[index] = value writes into x (a
 * view of it, or index_put_); later nodes reading x see the write, as
 * nodes run in graph order. */
static tp_status build_setitem(vctx *c, doc_node *d, const json_t *jargs, const char *path, const tp_value *kwargs) {
    reader *r = c->r;
    const json_t *arr = json_object_get(jargs, "__tuple__");
    char p0[512], p1[512], p2[512];
    snprintf(p0, sizeof p0, "%s.args[0]", path);
    snprintf(p1, sizeof p1, "%s.args[1]", path);
    snprintf(p2, sizeof p2, "%s.args[2]", path);
    if (!json_is_array(arr) || json_array_size(arr) != 3 || tp_value_len(kwargs))
        return report(r, TP_ERR_CORRUPT, "node %s: _operator.setitem takes three positional arguments", d->name);
    tp_value base, value = tp_value_none();
    TP_TRY(decode_value(c, json_array_get(arr, 0), p0, 1, &base));
    tp_status st = decode_value(c, json_array_get(arr, 2), p2, 1, &value);
    const tp_value *bm = ref_meta(&base);
    if (st == TP_OK && (base.kind != TP_VAL_NODE || (bm && bm->kind != TP_VAL_TENSOR)))
        st = report(r, TP_ERR_UNSUPPORTED, "node %s: setitem on a %s is not supported", d->name,
                    bm ? tp_value_kind_name(bm->kind) : tp_value_kind_name(base.kind));
    if (st == TP_OK) st = lower_index(c, d, &base, json_array_get(arr, 1), p1, &value);
    tp_value_clear(&value);
    tp_value_clear(&base);
    return st;
}

/* ---- other specials ------------------------------------------------------ */

static tp_status build_special(vctx *c, doc_node *d, const tp_serde_op_entry *e, const tp_value *args,
                               const tp_value *kwargs) {
    reader *r = c->r;
    const tp_value *self = tp_value_at(args, 0);
    if (!self) self = tp_value_dict_get(kwargs, "input");
    if (!self && e->special != TP_SERDE_ASSERT)
        return report(r, TP_ERR_CORRUPT, "node %s: %s needs an argument", d->name, e->name);
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
                    return report(r, TP_ERR_INDEX, "node %s: size(%" PRId64 ") of a tensor of rank %d", d->name, dim->u.i,
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
                    return report(r, TP_ERR_INDEX, "node %s: size(%" PRId64 ") of a tensor of rank %d", d->name, dim->u.i,
                                  tp_tensor_ndim(t));
                res = tp_value_int(tp_tensor_sizes(t)[w]);
            } else if (!dim || dim->kind == TP_VAL_NONE) {
                if ((st = shape_value(t, &res)) != TP_OK) return note(r, st);
            } else {
                return report(r, TP_ERR_CORRUPT, "node %s: size() dim must be an int", d->name);
            }
        }
        set_folded(d, &res);
        return TP_OK;
    }
    case TP_SERDE_GETATTR: {
        const tp_value *attr = tp_value_at(args, 1);
        if (!attr || attr->kind != TP_VAL_STR || tp_value_len(args) != 2)
            return report(r, TP_ERR_CORRUPT, "node %s: getattr needs an object and an attribute name", d->name);
        const char *a = attr->u.s;
        const tp_value *sm = ref_meta(self);
        if (self->kind == TP_VAL_NODE && sm && (sm->kind == TP_VAL_TUPLE || sm->kind == TP_VAL_LIST)) {
            /* fields of the named tuples max/min/sort/topk/kthvalue/... return */
            int64_t at = !strcmp(a, "values") || !strcmp(a, "min") ? 0 : !strcmp(a, "indices") || !strcmp(a, "max") ? 1 : -1;
            if (at < 0 || at >= tp_value_len(sm))
                return report(r, TP_ERR_UNSUPPORTED, "node %s: attribute '%.64s' of a tuple is not supported", d->name, a);
            tp_value vals[2] = {*self, tp_value_int(at)};
            st = add_call_values(r, d->name, TP_OP_GETITEM, vals, 2, &n);
            if (n) set_node(d, n);
            return st;
        }
        TP_TRY(need_tensor_meta(r, d->name, self, a, &t));
        tp_value res = tp_value_none();
        if (strcmp(a, "shape") == 0 && r->dynamic && self->kind == TP_VAL_NODE) {
            d->state = DOC_SYMSHAPE; /* x.shape[i] gives a symbolic size */
            d->node = self->u.node;
            return TP_OK;
        } else if (strcmp(a, "shape") == 0) {
            if ((st = shape_value(t, &res)) != TP_OK) return note(r, st);
        } else if (strcmp(a, "ndim") == 0) {
            res = tp_value_int(tp_tensor_ndim(t));
        } else if (strcmp(a, "dtype") == 0) {
            res = tp_value_dtype(tp_tensor_dtype(t));
        } else if (strcmp(a, "T") == 0) {
            int64_t dims[TP_MAX_DIMS];
            for (int k = 0; k < tp_tensor_ndim(t); k++) dims[k] = tp_tensor_ndim(t) - 1 - k;
            tp_value list;
            if ((st = tp_value_int_list(dims, tp_tensor_ndim(t), &list)) != TP_OK) return note(r, st);
            tp_value vals[2] = {*self, list};
            st = add_call_values(r, d->name, TP_OP_PERMUTE, vals, 2, &n);
            tp_value_clear(&list);
            if (n) set_node(d, n);
            return st;
        } else if (strcmp(a, "mT") == 0) {
            tp_value vals[3] = {*self, tp_value_int(-2), tp_value_int(-1)};
            st = add_call_values(r, d->name, TP_OP_TRANSPOSE, vals, 3, &n);
            if (n) set_node(d, n);
            return st;
        } else {
            return report(r, TP_ERR_UNSUPPORTED, "node %s: attribute '%.64s' of a tensor is not supported", d->name, a);
        }
        set_folded(d, &res);
        return TP_OK;
    }
    case TP_SERDE_TO: {
        tp_value dtype = tp_value_none();
        bool copy = false, dtype_set = false;
        int n_bools = 0;
        if (strcmp(e->name, "type") == 0 && tp_value_len(args) < 2 && !tp_value_dict_get(kwargs, "dtype"))
            return report(r, TP_ERR_UNSUPPORTED, "node %s: type() without a dtype returns a string, which is not supported",
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
                return report(r, TP_ERR_UNSUPPORTED, "node %s: %s() with a %s argument is not supported", d->name, e->name,
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
                return report(r, TP_ERR_UNSUPPORTED, "node %s: %s() argument '%.64s' is not supported", d->name, e->name,
                              key);
            }
        }
        tp_value targs, tkw;
        if ((st = tp_value_tuple(1, &targs)) != TP_OK) return note(r, st);
        targs.u.seq.items[0] = *self; /* a node reference or constant: plain copy is fine for nodes */
        if (self->kind != TP_VAL_NODE) {
            targs.u.seq.items[0] = tp_value_none();
            tp_value_clear(&targs);
            return report(r, TP_ERR_UNSUPPORTED, "node %s: %s() of a %s is not supported", d->name, e->name,
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
        else note(r, st);
        tp_value_clear(&targs);
        tp_value_clear(&tkw);
        if (n) set_node(d, n);
        return st;
    }
    case TP_SERDE_TYPE_AS:
    case TP_SERDE_SHAPE_AS: {
        const tp_value *other = arg_or_kw(args, 1, kwargs, "other");
        if (!other || tp_value_len(args) + tp_value_len(kwargs) != 2)
            return report(r, TP_ERR_CORRUPT, "node %s: %s takes one tensor argument", d->name, e->name);
        TP_TRY(need_tensor_meta(r, d->name, other, e->name, &t));
        tp_value second;
        if (e->special == TP_SERDE_TYPE_AS) {
            second = tp_value_dtype(tp_tensor_dtype(t));
        } else {
            TP_TRY(need_static(r, d->name, e->name));
            if ((st = tp_value_int_list(tp_tensor_sizes(t), tp_tensor_ndim(t), &second)) != TP_OK) return note(r, st);
        }
        tp_value vals[2] = {*self, second};
        st = add_call_values(r, d->name, e->op, vals, 2, &n);
        tp_value_clear(&second);
        if (n) set_node(d, n);
        return st;
    }
    case TP_SERDE_ALIAS:
    case TP_SERDE_TRANSPOSE: {
        if (self->kind != TP_VAL_NODE)
            return report(r, TP_ERR_UNSUPPORTED, "node %s: %s of a %s is not supported", d->name, e->name,
                          tp_value_kind_name(self->kind));
        t = ref_meta_tensor(self);
        if (e->special == TP_SERDE_ALIAS || (t && tp_tensor_ndim(t) < 2)) {
            st = add_call_values(r, d->name, TP_OP_TO, self, 1, &n);
        } else {
            tp_value vals[3] = {*self, tp_value_int(0), tp_value_int(t ? 1 : -1)};
            st = add_call_values(r, d->name, TP_OP_TRANSPOSE, vals, 3, &n);
        }
        if (n) set_node(d, n);
        return st;
    }
    case TP_SERDE_MAXMIN: {
        /* max(x, y) / x.max(y) with a tensor y: elementwise */
        const tp_value *other = arg_or_kw(args, 1, kwargs, "other");
        if (other && other->kind == TP_VAL_NODE) {
            tp_value vals[2] = {*self, *other};
            st = add_call_values(r, d->name, e->op == TP_OP_MAX ? TP_OP_MAXIMUM : TP_OP_MINIMUM, vals, 2, &n);
            if (n) set_node(d, n);
            return st;
        }
        return build_plain(r, d, e, e->op, args, kwargs);
    }
    case TP_SERDE_RETURN_INDICES: {
        const tp_value *ri = arg_or_kw(args, 6, kwargs, "return_indices");
        bool with_indices = ri && (ri->kind == TP_VAL_BOOL || ri->kind == TP_VAL_INT) && tp_value_as_i64(ri) != 0;
        return build_plain(r, d, e, with_indices ? e->swapped_op : e->op, args, kwargs);
    }
    case TP_SERDE_NORM: {
        /* x.norm([dims], p, keepdim): tensorplay's Tensor.norm overload with
         * the dims first (F.normalize calls it); PyTorch's order otherwise */
        const tp_value *first = tp_value_at(args, 1);
        if (!first || (first->kind != TP_VAL_LIST && first->kind != TP_VAL_TUPLE))
            return build_plain(r, d, e, e->op, args, kwargs);
        if (tp_value_len(args) > 4)
            return report(r, TP_ERR_CORRUPT, "node %s: norm(dim, p, keepdim) takes at most 3 arguments", d->name);
        static const char *const names[] = {"dim", "p", "keepdim"};
        tp_value nargs = tp_value_none(), nkw = tp_value_none(), item = tp_value_none();
        st = tp_value_tuple(1, &nargs);
        if (st == TP_OK && (st = tp_value_copy(self, &item)) == TP_OK) st = tp_value_seq_set(&nargs, 0, &item);
        if (st == TP_OK) st = kwargs && kwargs->kind == TP_VAL_DICT ? tp_value_copy(kwargs, &nkw) : tp_value_dict(&nkw);
        for (int64_t k = 1; st == TP_OK && k < tp_value_len(args); k++) {
            if (tp_value_dict_get(&nkw, names[k - 1])) {
                st = report(r, TP_ERR_CORRUPT, "node %s: norm() got argument '%s' twice", d->name, names[k - 1]);
                break;
            }
            if ((st = tp_value_copy(tp_value_at(args, k), &item)) == TP_OK) st = tp_value_dict_set(&nkw, names[k - 1], &item);
        }
        if (st == TP_OK) st = build_plain(r, d, e, e->op, &nargs, &nkw);
        else if (st == TP_ERR_NOMEM) note(r, st);
        tp_value_clear(&nargs);
        tp_value_clear(&nkw);
        return st;
    }
    case TP_SERDE_ASSERT:
        for (int64_t k = 0; k < tp_value_len(args); k++) {
            const tp_value *a = tp_value_at(args, k);
            if (a->kind != TP_VAL_NODE && !tp_value_is_number(a) && a->kind != TP_VAL_STR && a->kind != TP_VAL_NONE)
                return report(r, TP_ERR_CORRUPT, "node %s: unexpected %s argument to %s", d->name,
                              tp_value_kind_name(a->kind), e->name);
        }
        d->state = DOC_DROPPED;
        return TP_OK;
    default: break;
    }
    return report(r, TP_ERR_INTERNAL, "node %s: unhandled op map entry %s", d->name, e->name);
}

/* ---- node meta (tpexport's optional per-node "meta": {"val": V}) ----------
 * V: null | {"dtype": "float32", "shape": [2, 3]} | {"__tuple__": [V...]} |
 * {"__list__": [V...]}. */

static tp_status decode_meta_val(reader *r, const json_t *j, const char *path, int depth, tp_value *out) {
    *out = tp_value_none();
    if ((size_t)depth > r->lim.depth)
        return report(r, TP_ERR_CORRUPT, "%s: nested deeper than %zu (max_depth)", path, r->lim.depth);
    if (json_is_null(j)) return TP_OK;
    if (json_is_object(j) && (json_object_get(j, "__tuple__") || json_object_get(j, "__list__")) &&
        json_object_size(j) == 1) {
        bool tuple = json_object_get(j, "__tuple__") != NULL;
        const json_t *arr = json_object_get(j, tuple ? "__tuple__" : "__list__");
        if (!json_is_array(arr) || json_array_size(arr) > r->lim.items)
            return report(r, TP_ERR_CORRUPT, "%s: expected an array", path);
        tp_status st = tuple ? tp_value_tuple((int64_t)json_array_size(arr), out)
                             : tp_value_list((int64_t)json_array_size(arr), out);
        if (st != TP_OK) return note(r, st);
        for (size_t i = 0; i < json_array_size(arr); i++) {
            char sub[512];
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            tp_value item;
            st = decode_meta_val(r, json_array_get(arr, i), sub, depth + 1, &item);
            if (st == TP_OK && (st = tp_value_seq_set(out, (int64_t)i, &item)) != TP_OK) note(r, st);
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
        return report(r, TP_ERR_CORRUPT, "%s.dtype: unknown dtype", path);
    if (!json_is_array(shape) || json_array_size(shape) > TP_MAX_DIMS)
        return report(r, TP_ERR_CORRUPT, "%s.shape: expected an array of at most %d sizes", path, TP_MAX_DIMS);
    int64_t sizes[TP_MAX_DIMS];
    int nd = (int)json_array_size(shape);
    for (int k = 0; k < nd; k++) {
        const json_t *s = json_array_get(shape, (size_t)k);
        if (!json_is_integer(s) || json_integer_value(s) < 0)
            return report(r, TP_ERR_CORRUPT, "%s.shape[%d]: expected a non-negative integer", path, k);
        sizes[k] = json_integer_value(s);
    }
    tp_tensor *m;
    tp_status st = tp_tensor_meta(dtype, nd, sizes, &m);
    if (st == TP_ERR_NOMEM) return note(r, st); /* out of memory, not a bad shape */
    if (st != TP_OK) return report(r, TP_ERR_CORRUPT, "%s: %s", path, tp_last_error());
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
        return report(r, TP_ERR_MISSING, "node %s: no state was given for %s '%s'", node, tp_state_kind_name(kind), target);
    tp_tensor *t = NULL;
    tp_status st = o->state(o->state_ctx, target, kind, &t);
    if (st == TP_ERR_NOT_FOUND || (st == TP_OK && !t)) {
        st = report(r, TP_ERR_CORRUPT, "node %s: %s '%s' has no stored tensor", node, tp_state_kind_name(kind), target);
        if (keep_going(r, st)) TP_TRY(add_fetched(r, target, kind, persistent, NULL));
        return st;
    }
    if (st != TP_OK) {
        tp_error_context("node %s: %s '%s'", node, tp_state_kind_name(kind), target);
        return note(r, st);
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
            return note(r, tp_error(TP_ERR_NOMEM, "out of memory"));
        }
        r->fetched = p;
        r->cap_fetched = cap;
    }
    char *copy = tp_strdup(target);
    if (!copy) {
        tp_tensor_free(t);
        return note(r, tp_error(TP_ERR_NOMEM, "out of memory"));
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
        st = report(r, TP_ERR_CORRUPT, "%s: a state placeholder's meta must describe a tensor", sub);
    } else {
        const tp_tensor *m = declared.u.tensor;
        bool same_dtype = tp_tensor_dtype(m) == tp_tensor_dtype(t);
        bool same_shape = tp_tensor_ndim(m) == tp_tensor_ndim(t) &&
                          memcmp(tp_tensor_sizes(m), tp_tensor_sizes(t), (size_t)tp_tensor_ndim(t) * sizeof(int64_t)) == 0;
        if (!same_dtype || !same_shape) {
            char have[160], want[160];
            describe_tensor(t, have, sizeof have);
            describe_tensor(m, want, sizeof want);
            st = report(r, same_dtype ? TP_ERR_SHAPE : TP_ERR_TYPE,
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
        return report(r, TP_ERR_CORRUPT, "%s: a placeholder takes at most one default argument", path);
    tp_node *n;
    tp_status st = tp__graph_create_node_named(r->graph, TP_NODE_PLACEHOLDER, target, args, kwargs, d->name, &n);
    if (st != TP_OK) return note(r, st);
    set_node(d, n);
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
        if (ex && (st = tp_value_copy(ex, &val)) != TP_OK) return note(r, st);
    }
    st = tp_node_set_meta_val(n, &val);
    tp_value_clear(&val);
    if (st != TP_OK) return report(r, st, "%s: %s", path, tp_last_error());
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
    int spos = json_is_string(sref) ? find_doc_node(r, json_string_value(sref)) : -1;
    if (spos < 0 || spos >= r->current || r->nodes[spos].state != DOC_NODE) return TP_OK;
    tp_node *x = r->nodes[spos].node;
    size_t n = json_array_size(sizes);
    if (n < first + 2 || !json_is_integer(json_array_get(sizes, n - 1)) || json_integer_value(json_array_get(sizes, n - 1)) != -1)
        return TP_OK;
    for (size_t i = first; i + 1 < n; i++) {
        const json_t *e = json_array_get(sizes, i);
        const json_t *ref = json_is_object(e) ? json_object_get(e, "__node__") : NULL;
        int pos = json_is_string(ref) ? find_doc_node(r, json_string_value(ref)) : -1;
        if (pos < 0 || pos >= r->current || r->nodes[pos].state != DOC_SYMSIZE || r->nodes[pos].node != x ||
            r->nodes[pos].sym_dim != (int64_t)(i - first))
            return TP_OK;
    }
    tp_node *out = NULL;
    tp_value vals[3] = {tp_value_node(x), tp_value_int((int64_t)(n - 1 - first)), tp_value_int(-1)};
    tp_status st = add_call_values(r, d->name, TP_OP_FLATTEN, vals, 3, &out);
    if (out) set_node(d, out);
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
    if (!json_is_object(target)) return report(r, TP_ERR_CORRUPT, "%s: expected an object, got %s", tpath, json_kind(target));
    const char *tkind;
    TP_TRY(get_string(r, target, "kind", tpath, false, &tkind));
    if (!tkind) return report(r, TP_ERR_CORRUPT, "%s: missing field 'kind'", tpath);
    static const char *const name_fields[] = {"kind", "name", NULL};
    static const char *const ref_fields[] = {"kind", "module", "qualname", NULL};
    static const char *const pickle_fields[] = {"kind", "data", NULL};

    bool is_function = strcmp(op, "call_function") == 0, is_method = strcmp(op, "call_method") == 0;
    const char *tname = NULL;
    const tp_serde_op_entry *entry = NULL;
    if (is_function) {
        if (strcmp(tkind, "pickle") == 0) {
            TP_TRY(check_fields(r, target, tpath, pickle_fields, NULL));
            return report(r, TP_ERR_UNSUPPORTED, "node %s: pickled function target cannot be loaded safely", d->name);
        }
        if (strcmp(tkind, "ref") != 0)
            return report(r, TP_ERR_CORRUPT, "%s.kind: a call_function target must be \"ref\", got \"%.32s\"", tpath, tkind);
        TP_TRY(check_fields(r, target, tpath, ref_fields, NULL));
        const char *module, *qualname;
        TP_TRY(get_string(r, target, "module", tpath, false, &module));
        TP_TRY(get_string(r, target, "qualname", tpath, false, &qualname));
        entry = tp__serde_find_function(module, qualname);
        if (!entry) return report(r, TP_ERR_UNSUPPORTED, "node %s: unsupported function %.200s.%.200s", d->name, module, qualname);
    } else {
        bool method_kind = strcmp(tkind, "method") == 0;
        if (method_kind != is_method || (!method_kind && strcmp(tkind, "name") != 0))
            return report(r, TP_ERR_CORRUPT, "%s.kind: \"%.32s\" is not a target kind for a %.32s node", tpath, tkind, op);
        TP_TRY(check_fields(r, target, tpath, name_fields, NULL));
        TP_TRY(get_string(r, target, "name", tpath, false, &tname));
        if (is_method) {
            entry = tp__serde_find_method(tname);
            if (!entry) return report(r, TP_ERR_UNSUPPORTED, "node %s: unsupported method '%.200s'", d->name, tname);
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
            return report(r, TP_ERR_CORRUPT, "%s.args: expected a {\"__tuple__\": [...]} of arguments", path);
        TP_TRY(decode_value(&c, json_object_get(jn, "kwargs"), sub, 0, &kwargs));
        if (kwargs.kind != TP_VAL_DICT) {
            tp_value_clear(&kwargs);
            return report(r, TP_ERR_CORRUPT, "%s: expected a {\"__dict__\": [...]} of keyword arguments", sub);
        }
        st = entry->special == TP_SERDE_GETITEM ? build_getitem(&c, d, jargs, path, &kwargs)
                                                : build_setitem(&c, d, jargs, path, &kwargs);
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
        if (!valid_identifier(tname, r->lim.name)) st = report(r, TP_ERR_CORRUPT, "%s.name: '%.64s' is not a valid input name", tpath, tname);
        else st = read_placeholder(&c, d, tname, &args, &kwargs, meta, path);
    } else if (strcmp(op, "get_attr") == 0) {
        tp_node *n = NULL;
        tp_tensor *t = NULL;
        if (!valid_target(tname, r->lim.name)) {
            st = report(r, TP_ERR_CORRUPT, "%s.name: '%.64s' is not a valid attribute path", tpath, tname);
        } else if (tp_value_len(&args) || tp_value_len(&kwargs)) {
            st = report(r, TP_ERR_CORRUPT, "%s: a get_attr node takes no arguments", path);
        } else if ((st = fetch_state(r, tname, TP_STATE_CONSTANT, true, d->name, &t)) == TP_OK) {
            st = tp__graph_create_node_named(r->graph, TP_NODE_GET_ATTR, tname, NULL, NULL, d->name, &n);
            if (st == TP_OK) {
                set_node(d, n);
                tp_value v = tp_value_tensor(tp_tensor_retain(t));
                st = tp_node_set_meta_val(n, &v);
                tp_value_clear(&v);
            }
            if (st != TP_OK) note(r, st);
        }
    } else if (strcmp(op, "output") == 0) {
        tp_node *n = NULL;
        if (tp_value_len(&args) != 1 || tp_value_len(&kwargs) != 0) {
            st = report(r, TP_ERR_CORRUPT, "%s.args: the output node takes exactly one value", path);
        } else if (strcmp(tname, "output") != 0) {
            st = report(r, TP_ERR_CORRUPT, "%s.name: the output target must be \"output\", got \"%.64s\"", tpath, tname);
        } else {
            st = tp__graph_create_node_named(r->graph, TP_NODE_OUTPUT, "output", &args, NULL, d->name, &n);
            if (st == TP_OK) set_node(d, n);
            else note(r, st);
        }
    } else if (strcmp(op, "call_module") == 0) {
        st = report(r, TP_ERR_UNSUPPORTED, "node %s: call_module targets are not supported", d->name);
    } else if (is_function || is_method) {
        if (entry->special == TP_SERDE_PLAIN) st = build_plain(r, d, entry, entry->op, &args, &kwargs);
        else if (entry->special == TP_SERDE_BINOP) st = build_binop(r, d, entry, &args, &kwargs);
        else st = build_special(&c, d, entry, &args, &kwargs);
    } else {
        st = report(r, TP_ERR_CORRUPT, "%s.op: unknown node kind '%.32s'", path, op);
    }
    tp_value_clear(&args);
    tp_value_clear(&kwargs);
    return st;
}

/* Pre-scan: names (valid, unique) and the single output node at the end. */
static tp_status scan_nodes(reader *r, const json_t *nodes) {
    size_t n = json_array_size(nodes);
    if (n > r->lim.nodes)
        return report(r, TP_ERR_CORRUPT, "graph.nodes: %zu nodes exceed the limit of %zu (max_nodes)", n, r->lim.nodes);
    r->nodes = tp_calloc(n ? n : 1, sizeof *r->nodes);
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    r->index = tp_calloc(cap, sizeof *r->index);
    if (!r->nodes || !r->index) return note(r, tp_error(TP_ERR_NOMEM, "out of memory reading %zu nodes", n));
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
        if (!json_is_object(jn)) st = report(r, TP_ERR_CORRUPT, "graph.nodes[%zu]: expected an object, got %s", i, json_kind(jn));
        else if (!json_is_string(name))
            st = report(r, TP_ERR_CORRUPT, "graph.nodes[%zu].name: expected a string, got %s", i, name ? json_kind(name) : "nothing");
        else if (!valid_identifier(json_string_value(name), r->lim.name))
            st = report(r, TP_ERR_CORRUPT, "graph.nodes[%zu].name: '%.64s' is not a valid node name", i, json_string_value(name));
        else {
            d->name = json_string_value(name);
            if (!index_doc_node(r, (int)i)) {
                st = report(r, TP_ERR_CORRUPT, "graph.nodes[%zu].name: duplicate node name '%.64s'", i, d->name);
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
                st = report(r, TP_ERR_CORRUPT, "graph.nodes[%zu]: the output node must be the last node", i);
                if (first == TP_OK) first = st;
                if (!keep_going(r, st)) return st;
            }
        }
    }
    if (outputs == 0) {
        tp_status st = report(r, TP_ERR_CORRUPT, "graph.nodes: the graph has no output node");
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
    case JSON_STRING: return note(r, tp_value_str(json_string_value(j), out));
    case JSON_OBJECT:
        if (json_object_size(j) == 1 && json_is_string(json_object_get(j, "__float__"))) {
            vctx c = {.r = r, .node = "?"};
            return decode_value(&c, j, path, 0, out);
        }
        break;
    default: break;
    }
    return report(r, TP_ERR_UNSUPPORTED, "%s: a constant must be None, a bool, a number or a string, got %s", path,
                  json_kind(j));
}

/* An argument spec; strings are borrowed from the JSON tree, a constant's
 * value is stored in *value (the caller clears it). */
static tp_status read_arg(reader *r, const json_t *j, const char *path, tp_arg_spec *out, tp_value *value) {
    *value = tp_value_none();
    if (!json_is_object(j)) return report(r, TP_ERR_CORRUPT, "%s: expected an object, got %s", path, json_kind(j));
    const char *t;
    TP_TRY(get_string(r, j, "t", path, false, &t));
    if (!t) return report(r, TP_ERR_CORRUPT, "%s: missing field 't'", path);
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
            return report(r, TP_ERR_UNSUPPORTED, "%s.fake_val: must be null", path);
        *out = tp_arg_custom_obj(name, fqn);
        return TP_OK;
    }
    TP_TRY(check_fields(r, j, path, plain, NULL));
    TP_TRY(get_string(r, j, "name", path, false, &name));
    if (!name || !*name) return report(r, TP_ERR_CORRUPT, "%s.name: an argument needs a name", path);
    if (strcmp(t, "TensorArgument") == 0) *out = tp_arg_tensor(name);
    else if (strcmp(t, "TokenArgument") == 0) *out = tp_arg_token(name);
    else if (strcmp(t, "SymIntArgument") == 0) *out = tp_arg_sym_int(name);
    else if (strcmp(t, "SymFloatArgument") == 0) *out = (tp_arg_spec){.kind = TP_ARGK_SYM_FLOAT, .name = name};
    else if (strcmp(t, "SymBoolArgument") == 0) *out = (tp_arg_spec){.kind = TP_ARGK_SYM_BOOL, .name = name};
    else return report(r, TP_ERR_CORRUPT, "%s.t: unknown argument type '%.64s'", path, t);
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
        return report(r, TP_ERR_CORRUPT, "%s: tree nested deeper than %zu (max_depth)", path, r->lim.depth);
    if (!json_is_object(j)) return report(r, TP_ERR_CORRUPT, "%s: expected a tree spec object, got %s", path, json_kind(j));
    const char *t;
    TP_TRY(get_string(r, j, "t", path, false, &t));
    if (!t) return report(r, TP_ERR_CORRUPT, "%s: missing field 't'", path);
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
        return note(r, st);
    }
    if (strcmp(t, "ref") == 0 || strcmp(t, "pickle") == 0) {
        const char *m = NULL, *q = NULL;
        if (t[0] == 'r') {
            get_string(r, j, "module", path, true, &m);
            get_string(r, j, "qualname", path, true, &q);
        }
        return report(r, TP_ERR_UNSUPPORTED, "%s: tree spec of type %.100s%s%.100s is not supported", path,
                      m ? m : "(pickled)", m ? "." : "", q ? q : "");
    }
    tp_tree_kind kind;
    if (strcmp(t, "tuple") == 0) kind = TP_TREE_TUPLE;
    else if (strcmp(t, "list") == 0) kind = TP_TREE_LIST;
    else if (strcmp(t, "dict") == 0) kind = TP_TREE_DICT;
    else return report(r, TP_ERR_CORRUPT, "%s.t: unknown tree spec type '%.32s'", path, t);
    static const char *const f[] = {"t", NULL};
    static const char *const opt[] = {"ctx", "c", NULL};
    TP_TRY(check_fields(r, j, path, f, opt));
    const json_t *c = json_object_get(j, "c"), *ctx = json_object_get(j, "ctx");
    if (c && !json_is_array(c)) return report(r, TP_ERR_CORRUPT, "%s.c: expected an array, got %s", path, json_kind(c));
    size_t n = c ? json_array_size(c) : 0;
    if (n > r->lim.items) return report(r, TP_ERR_CORRUPT, "%s.c: too many children", path);
    const json_t *keys = NULL;
    if (kind == TP_TREE_DICT) {
        keys = json_is_object(ctx) && json_object_size(ctx) == 1 ? json_object_get(ctx, "__tuple__") : ctx;
        if (!json_is_array(keys)) return report(r, TP_ERR_CORRUPT, "%s.ctx: a dict spec needs its keys", path);
        if (json_array_size(keys) != n)
            return report(r, TP_ERR_CORRUPT, "%s.ctx: %zu keys for %zu children", path, json_array_size(keys), n);
        for (size_t i = 0; i < n; i++)
            if (!json_is_string(json_array_get(keys, i)))
                return report(r, TP_ERR_UNSUPPORTED, "%s.ctx[%zu]: dict keys must be strings", path, i);
    } else if (ctx && !json_is_null(ctx)) {
        return report(r, TP_ERR_CORRUPT, "%s.ctx: a %s spec has no context", path, t);
    }
    tp_treespec **kids = tp_calloc(n ? n : 1, sizeof *kids);
    const char **knames = tp_calloc(n ? n : 1, sizeof *knames);
    if (!kids || !knames) {
        tp_free(kids);
        tp_free(knames);
        return note(r, tp_error(TP_ERR_NOMEM, "out of memory reading a tree spec"));
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
        if (st != TP_OK) st = report(r, st == TP_ERR_DUPLICATE ? TP_ERR_CORRUPT : st, "%s: %s", path, tp_last_error());
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
            st = report(r, TP_ERR_CORRUPT, "%s.kind: unknown input kind '%.32s'", path, kind_name ? kind_name : "");
        if (st == TP_OK) st = get_string(r, j, "target", path, true, &target);
        const json_t *pers = json_object_get(j, "persistent");
        if (st == TP_OK && pers && !json_is_null(pers) && !json_is_boolean(pers))
            st = report(r, TP_ERR_CORRUPT, "%s.persistent: expected a bool or null, got %s", path, json_kind(pers));
        char sub[128];
        snprintf(sub, sizeof sub, "%s.arg", path);
        if (st == TP_OK) st = read_arg(r, json_object_get(j, "arg"), sub, &arg, &value);
        bool state = kind == TP_INPUT_PARAMETER || kind == TP_INPUT_BUFFER || kind == TP_INPUT_CONSTANT_TENSOR ||
                     kind == TP_INPUT_CUSTOM_OBJ;
        if (st == TP_OK && state && !valid_target(target, r->lim.name))
            st = report(r, TP_ERR_CORRUPT, "%s.target: a %s input needs a valid target, got '%.64s'", path, kind_name,
                        target ? target : "null");
        if (st == TP_OK && kind == TP_INPUT_CUSTOM_OBJ)
            st = report(r, TP_ERR_UNSUPPORTED, "%s: custom object inputs are not supported", path);
        if (st == TP_OK && !state && target)
            st = report(r, TP_ERR_CORRUPT, "%s.target: a %s input has no target", path, kind_name);
        if (st == TP_OK && tp_signature_find_input(r->sig, arg.name) >= 0 && *arg.name)
            st = report(r, TP_ERR_CORRUPT, "%s.arg.name: input '%.64s' is described twice", path, arg.name);
        if (st == TP_OK) {
            tp_persistence p = TP_PERSISTENT_UNSET;
            if (kind == TP_INPUT_BUFFER) p = json_is_false(pers) ? TP_PERSISTENT_NO : TP_PERSISTENT_YES;
            st = tp_signature_add_input(r->sig, kind, arg, state ? target : NULL, p);
            if (st != TP_OK) st = report(r, st == TP_ERR_NOMEM ? st : TP_ERR_CORRUPT, "%s: %s", path, tp_last_error());
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
static tp_status flatten_tp_style(const tp_value *v, int depth, const tp_value ***leaves, int64_t *n, int64_t *cap) {
    if (depth > TP_LIMIT_DEPTH) return tp_error(TP_ERR_CORRUPT, "output value nested deeper than %d", TP_LIMIT_DEPTH);
    if (v->kind == TP_VAL_TUPLE || v->kind == TP_VAL_LIST || v->kind == TP_VAL_DICT) {
        for (int64_t i = 0; i < v->u.seq.n; i++) TP_TRY(flatten_tp_style(&v->u.seq.items[i], depth + 1, leaves, n, cap));
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
        st = flatten_tp_style(tp_value_at(tp_node_args(out), 0), 0, &leaves, &n_leaves, &cap);
        if (st != TP_OK) {
            tp_free((void *)leaves);
            return note(r, st);
        }
        if ((int64_t)json_array_size(specs) != n_leaves) {
            tp_free((void *)leaves);
            return report(r, TP_ERR_CORRUPT, "signature.output_specs: the graph produces %" PRId64
                          " outputs but the signature describes %zu", n_leaves, json_array_size(specs));
        }
    }
    bool *none = tp_calloc(json_array_size(specs) + 1, sizeof *none);
    if (!none) {
        tp_free((void *)leaves);
        return note(r, tp_error(TP_ERR_NOMEM, "out of memory"));
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
            st = report(r, TP_ERR_CORRUPT, "%s.kind: unknown output kind '%.32s'", path, kind_name ? kind_name : "");
        if (st == TP_OK) st = get_string(r, j, "target", path, true, &target);
        const json_t *pers = json_object_get(j, "persistent");
        if (st == TP_OK && pers && !json_is_null(pers))
            st = report(r, TP_ERR_CORRUPT, "%s.persistent: an output spec has no persistence", path);
        char sub[128];
        snprintf(sub, sizeof sub, "%s.arg", path);
        if (st == TP_OK) st = read_arg(r, json_object_get(j, "arg"), sub, &arg, &value);
        bool mutation = kind == TP_OUTPUT_BUFFER_MUTATION || kind == TP_OUTPUT_PARAMETER_MUTATION ||
                        kind == TP_OUTPUT_USER_INPUT_MUTATION;
        bool needs_target = mutation || kind == TP_OUTPUT_GRADIENT_TO_PARAMETER || kind == TP_OUTPUT_GRADIENT_TO_USER_INPUT;
        if (st == TP_OK && needs_target && !target)
            st = report(r, TP_ERR_CORRUPT, "%s.target: a %s output needs a target", path, kind_name);
        if (st == TP_OK && mutation && (int64_t)i != n_mut)
            st = report(r, TP_ERR_CORRUPT, "%s: mutation outputs must come first", path);
        if (st == TP_OK && mutation) n_mut++;
        bool is_none_leaf = st == TP_OK && out && leaves[i]->kind == TP_VAL_NONE;
        if (st == TP_OK && is_none_leaf && (arg.kind != TP_ARGK_CONSTANT || !is_none(&value)))
            st = report(r, TP_ERR_CORRUPT, "%s: the output is None but the spec is not a None constant", path);
        if (st == TP_OK && !is_none_leaf) {
            st = tp_signature_add_output(r->sig, kind, arg, needs_target ? target : NULL);
            if (st != TP_OK) st = report(r, st == TP_ERR_NOMEM ? st : TP_ERR_CORRUPT, "%s: %s", path, tp_last_error());
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
        return report(r, TP_ERR_CORRUPT, "%s.forward_arg_names: expected an array of strings or null", path);
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
        st = note(r, tp_error(TP_ERR_NOMEM, "out of memory reading the module call graph"));
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
            st = report(r, TP_ERR_CORRUPT, "%s.forward_arg_names[%zu]: expected a string, got %s", path, i, json_kind(nm));
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
        return report(r, TP_ERR_CORRUPT, "%s: expected an integer%s, got %s", path, nullable ? " or null" : "",
                      j ? json_kind(j) : "nothing");
    *out = json_integer_value(j);
    return TP_OK;
}

static tp_status read_ranges(reader *r, tp_program *p, const json_t *ranges) {
    if (!ranges) return TP_OK;
    if (!json_is_object(ranges))
        return report(r, TP_ERR_CORRUPT, "range_constraints: expected an object, got %s", json_kind(ranges));
    if (json_object_size(ranges) > r->lim.items) return report(r, TP_ERR_CORRUPT, "range_constraints: too many entries");
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
            st = report(r, TP_ERR_CORRUPT, "range_constraints: a symbol needs a name of 1 to %zu bytes (max_name_bytes)",
                        r->lim.name);
        if (st == TP_OK && (lo < 0 || lo > hi))
            st = report(r, TP_ERR_CORRUPT, "%s: invalid range [%" PRId64 ", %" PRId64 "]", path, lo, hi);
        if (st == TP_OK && (st = tp_program_add_range(p, name, lo, hi)) != TP_OK) note(r, st);
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
        return report(r, TP_ERR_CORRUPT, "equality_constraints: expected an array, got %s", json_kind(eqs));
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
            st = report(r, TP_ERR_CORRUPT, "%s.sites: an equality constraint needs at least two sites", path);
        tp_dim_site *ds = st == TP_OK ? tp_calloc(json_array_size(sites), sizeof *ds) : NULL;
        if (st == TP_OK && !ds) st = note(r, tp_error(TP_ERR_NOMEM, "out of memory"));
        for (size_t k = 0; st == TP_OK && k < json_array_size(sites); k++) {
            const json_t *s = json_array_get(sites, k);
            const json_t *in = json_is_array(s) ? json_array_get(s, 0) : NULL;
            const json_t *dim = json_is_array(s) ? json_array_get(s, 1) : NULL;
            if (!json_is_array(s) || json_array_size(s) != 2 || !json_is_string(in) || !json_is_integer(dim) ||
                json_integer_value(dim) < 0 || json_integer_value(dim) >= TP_MAX_DIMS)
                st = report(r, TP_ERR_CORRUPT, "%s.sites[%zu]: expected [input name, dim]", path, k);
            else if (!site_root_is_user_input(r, json_string_value(in)))
                st = report(r, TP_ERR_CORRUPT, "%s.sites[%zu]: '%.64s' is not a user input", path, k, json_string_value(in));
            else ds[k] = (tp_dim_site){json_string_value(in), (int)json_integer_value(dim)};
        }
        if (st == TP_OK && (st = tp_program_add_equality(p, ds, (int)json_array_size(sites), name)) != TP_OK) note(r, st);
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
    if (lo < 0 || lo > hi) return report(r, TP_ERR_CORRUPT, "%s: invalid range [%" PRId64 ", %" PRId64 "]", path, lo, hi);
    tp_status st = tp_program_add_range(p, name, lo, hi);
    return st == TP_OK ? st : note(r, st);
}

static tp_status read_dim_rule(reader *r, tp_program *p, const json_t *j, const char *site, int dim, const char *path) {
    if (dim < 0 || dim >= TP_MAX_DIMS) return report(r, TP_ERR_CORRUPT, "%s: dim %d out of range", path, dim);
    tp_dim_rule rule = {.site = {site, dim}, .scale = 1};
    if (json_is_null(j)) return TP_OK;
    if (json_is_integer(j) || json_object_get(j, "__static_dim__")) {
        const json_t *v = json_is_integer(j) ? j : json_object_get(j, "__static_dim__");
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return report(r, TP_ERR_CORRUPT, "%s: a static dim needs a non-negative integer", path);
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
        if (!name || !*name) return report(r, TP_ERR_CORRUPT, "%s.name: a dim needs a name", sub);
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
        if (!root || !*root) return report(r, TP_ERR_CORRUPT, "%s.root: a derived dim needs a root", sub);
        if (!json_is_integer(scale))
            return report(r, TP_ERR_CORRUPT, "%s.scale: expected a positive integer, got %s", sub, json_kind(scale));
        if (json_integer_value(scale) < 1 || json_integer_value(scale) > INT32_MAX)
            return report(r, TP_ERR_CORRUPT,
                          "%s.scale: expected a positive integer: derived dim '%s' needs a scale from 1 to %d, got %" JSON_INTEGER_FORMAT, sub, name,
                          INT32_MAX, json_integer_value(scale));
        /* bounded so that no offset needs negating at INT64_MIN; the range
         * arithmetic is checked once all ranges are known (below) */
        if (!json_is_integer(offset))
            return report(r, TP_ERR_CORRUPT, "%s.offset: expected an integer, got %s", sub, json_kind(offset));
        if (json_integer_value(offset) < -INT32_MAX || json_integer_value(offset) > INT32_MAX)
            return report(r, TP_ERR_CORRUPT,
                          "%s.offset: derived dim '%s' needs an offset within [%d, %d], got %" JSON_INTEGER_FORMAT, sub,
                          name, -INT32_MAX, INT32_MAX, json_integer_value(offset));
        rule.kind = TP_DIM_DERIVED;
        rule.symbol = root;
        rule.scale = json_integer_value(scale);
        rule.offset = json_integer_value(offset);
    }
    if (rule.kind != TP_DIM_STATIC) r->dynamic = true;
    tp_status st = tp_program_add_dim_rule(p, &rule);
    return st == TP_OK ? st : report(r, st, "%s: %s", path, tp_last_error());
}

/* The spec of one input (or of one item of a container input) at `site`. */
static tp_status read_input_dims(reader *r, tp_program *p, const json_t *j, const char *site, const char *path,
                                 int depth) {
    if (depth > 8) return report(r, TP_ERR_CORRUPT, "%s: nested too deeply", path);
    if (json_is_null(j)) return TP_OK;
    const json_t *arr = json_is_array(j) ? j : json_is_object(j) && json_object_size(j) == 1 ? json_object_get(j, "__tuple__") : NULL;
    const json_t *map = json_is_object(j) && json_object_size(j) == 1 ? json_object_get(j, "__map__") : NULL;
    char sub[600], child[TP_LIMIT_NAME + 80];
    if (arr) {
        if (!json_is_array(arr) || json_array_size(arr) > r->lim.items)
            return report(r, TP_ERR_CORRUPT, "%s: expected an array", path);
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
        return report(r, TP_ERR_CORRUPT, "%s: expected a dims spec (__map__, list, tuple or null), got %s", path, json_kind(j));
    for (size_t i = 0; i < json_array_size(map); i++) {
        const json_t *pair = json_array_get(map, i);
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        if (!json_is_array(pair) || json_array_size(pair) != 2)
            return report(r, TP_ERR_CORRUPT, "%s: expected a [key, spec] pair", sub);
        const json_t *key = json_array_get(pair, 0);
        if (json_is_integer(key)) {
            TP_TRY(read_dim_rule(r, p, json_array_get(pair, 1), site, (int)(json_integer_value(key) < 0 || json_integer_value(key) >= TP_MAX_DIMS ? -1 : json_integer_value(key)), sub));
        } else if (json_is_string(key) && json_string_length(key) < TP_LIMIT_NAME / 2 &&
                   !strchr(json_string_value(key), '\'')) {
            snprintf(child, sizeof child, "%s['%s']", site, json_string_value(key));
            TP_TRY(read_input_dims(r, p, json_array_get(pair, 1), child, sub, depth + 1));
        } else {
            return report(r, TP_ERR_CORRUPT, "%s: a dims key must be a dim index or a dict key", sub);
        }
    }
    return TP_OK;
}

static tp_status read_dynamic_shapes(reader *r, tp_program *p, const json_t *ds) {
    if (!ds || json_is_null(ds)) return TP_OK;
    const json_t *map = json_is_object(ds) && json_object_size(ds) == 1 ? json_object_get(ds, "__map__") : NULL;
    if (!map) return report(r, TP_ERR_CORRUPT, "dynamic_shapes: expected {\"__map__\": [...]}, got %s", json_kind(ds));
    if (!json_is_array(map) || json_array_size(map) > r->lim.items)
        return report(r, TP_ERR_CORRUPT, "dynamic_shapes.__map__: expected an array");
    tp_status first = TP_OK;
    for (size_t i = 0; i < json_array_size(map); i++) {
        char path[96];
        snprintf(path, sizeof path, "dynamic_shapes[%zu]", i);
        const json_t *pair = json_array_get(map, i);
        tp_status st = TP_OK;
        if (!json_is_array(pair) || json_array_size(pair) != 2 || !json_is_string(json_array_get(pair, 0)))
            st = report(r, TP_ERR_CORRUPT, "%s: expected an [input name, spec] pair", path);
        else if (!is_user_input(r, json_string_value(json_array_get(pair, 0))))
            st = report(r, TP_ERR_CORRUPT, "%s: '%.64s' is not a user input", path, json_string_value(json_array_get(pair, 0)));
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
        tp_status st = report(r, TP_ERR_CORRUPT,
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
        return report(r, TP_ERR_CORRUPT, "module_call_graph: expected an array, got %s", json_kind(mcg));
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
        if (st == TP_OK && *fqn && !valid_target(fqn, r->lim.name))
            st = report(r, TP_ERR_CORRUPT, "%s.fqn: '%.64s' is not a module path", path, fqn);
        char sub[128];
        snprintf(sub, sizeof sub, "%s.signature", path);
        if (st == TP_OK) st = read_call_signature(r, json_object_get(j, "signature"), sub, &sig);
        if (st == TP_OK && (st = tp_program_add_module_call(p, fqn, sig)) != TP_OK) st = report(r, st, "%s: %s", path, tp_last_error());
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
        if (!json_is_integer(nm)) return report(r, TP_ERR_CORRUPT, "meta.num_mutations: expected an integer, got %s", json_kind(nm));
        if (json_integer_value(nm) != tp_signature_n_mutations(r->sig))
            return report(r, TP_ERR_CORRUPT, "meta.num_mutations: %" JSON_INTEGER_FORMAT " but the signature has %d mutation outputs",
                          json_integer_value(nm), tp_signature_n_mutations(r->sig));
    }
    tp_treespec *in = NULL, *out = NULL;
    leaf_marks marks = {none_user, n_user, 0};
    tp_status st = read_optional_spec(r, meta, "in_spec", "meta", NULL, &in);
    if (st == TP_OK) st = read_optional_spec(r, meta, "out_spec", "meta", &marks, &out);
    if (st == TP_OK && out && none_user && marks.next != n_user)
        st = report(r, TP_ERR_CORRUPT, "meta.out_spec: %" PRId64 " leaves for %" PRId64 " user outputs", marks.next, n_user);
    if (st == TP_OK && (st = tp_program_set_in_spec(p, in)) != TP_OK) note(r, st);
    if (st == TP_OK && (st = tp_program_set_out_spec(p, out)) != TP_OK) note(r, st);
    tp_treespec_free(in);
    tp_treespec_free(out);
    return st;
}

static tp_status set_examples(reader *r, tp_program *p) {
    for (int64_t i = 0; i < tp_value_len(&r->examples); i++) {
        const char *name = r->examples.u.seq.keys[i];
        if (!is_user_input(r, name)) continue;
        tp_status st = tp_program_set_example_input(p, name, &r->examples.u.seq.items[i]);
        if (st != TP_OK) return note(r, st);
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
            st = report(r, st == TP_ERR_NOMEM ? st : TP_ERR_CORRUPT, "state '%s': %s", f->target, tp_last_error());
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
            return report(r, TP_ERR_UNSUPPORTED, "schema_version: %" JSON_INTEGER_FORMAT " is not supported (expected 1)",
                          json_integer_value(v));
        return report(r, TP_ERR_CORRUPT, "schema_version: expected the integer 1, got %s", json_kind(v));
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
        STEP(report(r, TP_ERR_CORRUPT, "opset_version: expected an object, got %s", json_kind(opset)));

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
        note(r, st);
        return;
    }
    if (strncmp(msg, "- ", 2) != 0 && !strstr(msg, "\n- ")) {
        note(r, st);
    } else {
        char *line = msg;
        while (line && *line) {
            char *nl = strchr(line, '\n');
            if (nl) *nl = '\0';
            if (strncmp(line, "- ", 2) == 0) {
                tp_error(st, "%s", line + 2);
                note(r, st);
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
    st = parse_json(json, len, "document", r.lim.document, &doc);
    if (st != TP_OK) {
        note(&r, st);
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
                else note(&r, st);
            }
        }
    } else {
        note(&r, st);
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
 * writing a program document
 * ====================================================================== */

static tp_status enc_value(jwriter *w, const tp_value *v, int depth, json_t **out);

static json_t *jw_obj1(jwriter *w, const char *key, json_t *value) {
    json_t *o = jw_take(w, json_object());
    jw_set(w, o, key, value);
    return o;
}

static tp_status enc_seq(jwriter *w, const tp_value *v, int depth, json_t **out) {
    json_t *arr = jw_take(w, json_array());
    for (int64_t i = 0; i < v->u.seq.n; i++) {
        json_t *item = NULL;
        tp_status st = enc_value(w, &v->u.seq.items[i], depth + 1, &item);
        if (st != TP_OK) {
            json_decref(arr);
            return st;
        }
        if (v->kind == TP_VAL_DICT) {
            json_t *pair = jw_take(w, json_array());
            jw_append(w, pair, jw_take(w, json_string(v->u.seq.keys[i])));
            jw_append(w, pair, item);
            item = pair;
        }
        jw_append(w, arr, item);
    }
    *out = jw_obj1(w, v->kind == TP_VAL_TUPLE ? "__tuple__" : v->kind == TP_VAL_LIST ? "__list__" : "__dict__", arr);
    return TP_OK;
}

static tp_status enc_value(jwriter *w, const tp_value *v, int depth, json_t **out) {
    *out = NULL;
    TP_CHECK(depth <= TP_LIMIT_DEPTH, TP_ERR_UNSUPPORTED, "value nested deeper than %d", TP_LIMIT_DEPTH);
    switch (v->kind) {
    case TP_VAL_NONE: *out = jw_take(w, json_null()); return TP_OK;
    case TP_VAL_BOOL: *out = jw_take(w, json_boolean(v->u.b)); return TP_OK;
    case TP_VAL_INT: *out = jw_take(w, json_integer(v->u.i)); return TP_OK;
    case TP_VAL_FLOAT: *out = jw_real(w, v->u.f); return TP_OK;
    case TP_VAL_STR:
        *out = json_string(v->u.s);
        TP_CHECK(*out != NULL, TP_ERR_UNSUPPORTED, "string '%.64s' is not valid UTF-8", v->u.s);
        return TP_OK;
    case TP_VAL_DTYPE: {
        char *b64 = dtype_pickle_b64(dtype_code(v->u.dtype));
        TP_CHECK(b64 != NULL, TP_ERR_NOMEM, "out of memory");
        *out = jw_obj1(w, "__pickle__", jw_take(w, json_string(b64)));
        tp_free(b64);
        return TP_OK;
    }
    case TP_VAL_NODE: *out = jw_obj1(w, "__node__", jw_name(w, "node name", tp_node_name(v->u.node))); return TP_OK;
    case TP_VAL_TUPLE:
    case TP_VAL_LIST:
    case TP_VAL_DICT: return enc_seq(w, v, depth, out);
    case TP_VAL_TENSOR: break;
    }
    return tp_error(TP_ERR_UNSUPPORTED, "a tensor inside node arguments cannot be written (use a get_attr node)");
}

static json_t *enc_name_target(jwriter *w, const char *kind, const char *name) {
    json_t *t = jw_take(w, json_object());
    jw_set(w, t, "kind", jw_take(w, json_string(kind)));
    jw_set(w, t, "name", jw_name(w, "target", name));
    return t;
}

static json_t *enc_meta_val(jwriter *w, const tp_value *v, int depth) {
    /* meta is optional: what the reader's depth limit would refuse is left
     * out (a container at the limit would have children past it) */
    if (depth > TP_LIMIT_DEPTH || (depth == TP_LIMIT_DEPTH && v->kind != TP_VAL_TENSOR)) return jw_take(w, json_null());
    if (v->kind == TP_VAL_TENSOR) {
        json_t *o = jw_take(w, json_object()), *shape = jw_take(w, json_array());
        const tp_tensor *t = v->u.tensor;
        for (int d = 0; d < tp_tensor_ndim(t); d++) jw_append(w, shape, jw_take(w, json_integer(tp_tensor_sizes(t)[d])));
        jw_set(w, o, "dtype", jw_take(w, json_string(tp_dtype_name(tp_tensor_dtype(t)))));
        jw_set(w, o, "shape", shape);
        return o;
    }
    if (v->kind == TP_VAL_TUPLE || v->kind == TP_VAL_LIST) {
        json_t *arr = jw_take(w, json_array());
        for (int64_t i = 0; i < v->u.seq.n; i++) jw_append(w, arr, enc_meta_val(w, &v->u.seq.items[i], depth + 1));
        return jw_obj1(w, v->kind == TP_VAL_TUPLE ? "__tuple__" : "__list__", arr);
    }
    return jw_take(w, json_null());
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
    json_t *jn = jw_take(w, json_object()), *target = jw_take(w, json_object());
    jw_set(w, target, "kind", jw_take(w, json_string("ref")));
    jw_set(w, target, "module", jw_take(w, json_string("tensorplay.export._trace")));
    jw_set(w, target, "qualname", jw_take(w, json_string(fn)));
    jw_set(w, jn, "op", jw_take(w, json_string("call_function")));
    jw_set(w, jn, "target", target);
    jw_set(w, jn, "args", jw_obj1(w, "__tuple__", args));
    jw_set(w, jn, "kwargs", jw_obj1(w, "__dict__", jw_take(w, json_array())));
    jw_set(w, jn, "name", jw_take(w, json_string(name)));
    jw_append(w, nodes, jn);
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
    jw_append(w, args, jw_obj1(w, "__node__", jw_name(w, "node name", s->input)));
    jw_append(w, args, jw_take(w, json_integer(s->dim)));
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
        json_t *args = jw_take(w, json_array());
        if (r->kind == TP_DIM_SYMBOL && r == root) {
            const tp_range_constraint *rc = tp_program_find_range(p, r->symbol);
            enc_site_args(w, args, &r->site);
            jw_append(w, args, rc ? jw_take(w, json_integer(rc->min)) : jw_take(w, json_null()));
            jw_append(w, args, rc && rc->max != TP_DIM_UNBOUNDED ? jw_take(w, json_integer(rc->max)) : jw_take(w, json_null()));
            jw_append(w, args, jw_name(w, "dim name", r->symbol));
            enc_assert(w, p, nodes, "_assert_dim_range", args, &c_range);
        } else if (r->kind == TP_DIM_SYMBOL && root) {
            enc_site_args(w, args, &r->site);
            enc_site_args(w, args, &root->site);
            jw_append(w, args, jw_name(w, "dim name", r->symbol));
            enc_assert(w, p, nodes, "_assert_dims_equal", args, &c_equal);
        } else if (r->kind == TP_DIM_DERIVED && root) {
            char expr[TP_LIMIT_NAME + 64];
            tp__dim_rule_expr(r, expr, sizeof expr);
            enc_site_args(w, args, &root->site);
            enc_site_args(w, args, &r->site);
            jw_append(w, args, jw_take(w, json_integer(r->scale)));
            jw_append(w, args, jw_take(w, json_integer(r->offset)));
            jw_append(w, args, jw_name(w, "dim name", expr));
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
            json_t *args = jw_take(w, json_array());
            enc_site_args(w, args, &e->sites[k]);
            enc_site_args(w, args, &e->sites[0]);
            jw_append(w, args, e->name ? jw_name(w, "dim name", e->name) : jw_take(w, json_string("equal dims")));
            enc_assert(w, p, nodes, "_assert_dims_equal", args, &c_equal);
        }
    }
}

/* A call of `op` with the node's args, through the op's write entry. */
static tp_status enc_call(jwriter *w, const tp_node *n, tp_op op, json_t *obj) {
    const tp_serde_op_entry *e = tp__serde_write_entry(op);
    TP_CHECK(e != NULL, TP_ERR_UNSUPPORTED, "node %s: op %s has no tensorplay equivalent", tp_node_name(n), tp_op_name(op));
    json_t *target = jw_take(w, json_object());
    if (e->module) {
        jw_set(w, target, "kind", jw_take(w, json_string("ref")));
        jw_set(w, target, "module", jw_take(w, json_string(e->module)));
        jw_set(w, target, "qualname", jw_take(w, json_string(e->name)));
    } else {
        jw_set(w, target, "kind", jw_take(w, json_string("method")));
        jw_set(w, target, "name", jw_take(w, json_string(e->name)));
    }
    jw_set(w, obj, "op", jw_take(w, json_string(e->module ? "call_function" : "call_method")));
    jw_set(w, obj, "target", target);
    const tp_value *args = tp_node_args(n), *kwargs = tp_node_kwargs(n);
    json_t *jargs = NULL, *jkw = NULL;
    tp_status st;
    if (e->special == TP_SERDE_SETITEM) {
        /* index_put_(x, [None, i], v) as x[:, i] = v */
        const tp_value *idx = tp_value_at(args, 1), *acc = tp_value_at(args, 3);
        if (!acc && tp_value_dict_get(kwargs, "accumulate")) acc = tp_value_dict_get(kwargs, "accumulate");
        TP_CHECK(tp_value_len(args) >= 3 && idx && tp_value_is_seq(idx), TP_ERR_UNSUPPORTED,
                 "node %s: index_put_ needs self, a list of indices and values to be written", tp_node_name(n));
        TP_CHECK(!acc || (acc->kind == TP_VAL_BOOL && !acc->u.b), TP_ERR_UNSUPPORTED,
                 "node %s: index_put_ with accumulate=True cannot be written for tensorplay", tp_node_name(n));
        json_t *items = jw_take(w, json_array());
        st = TP_OK;
        for (int64_t k = 0; k < tp_value_len(idx) && st == TP_OK; k++) {
            const tp_value *it = tp_value_at(idx, k);
            json_t *j = NULL;
            if (it->kind == TP_VAL_NONE) {
                json_t *sl = jw_take(w, json_array());
                for (int q = 0; q < 3; q++) jw_append(w, sl, jw_take(w, json_null()));
                j = jw_obj1(w, "__slice__", sl);
            } else {
                st = enc_value(w, it, 1, &j);
            }
            if (st == TP_OK) jw_append(w, items, j);
        }
        json_t *jself = NULL, *jval = NULL;
        if (st == TP_OK) st = enc_value(w, tp_value_at(args, 0), 1, &jself);
        if (st == TP_OK) st = enc_value(w, tp_value_at(args, 2), 1, &jval);
        if (st != TP_OK) {
            tp_error_context("node %s", tp_node_name(n));
            return st;
        }
        jargs = jw_take(w, json_array());
        jw_append(w, jargs, jself);
        jw_append(w, jargs, jw_obj1(w, "__tuple__", items));
        jw_append(w, jargs, jval);
        jw_set(w, obj, "args", jw_obj1(w, "__tuple__", jargs));
        jw_set(w, obj, "kwargs", jw_obj1(w, "__dict__", jw_take(w, json_array())));
        return TP_OK;
    }
    if (e->special == TP_SERDE_GETITEM) {
        st = enc_value(w, args, 0, &jargs);
        if (st == TP_OK) st = enc_value(w, kwargs, 0, &jkw);
        jw_set(w, obj, "args", jargs);
        jw_set(w, obj, "kwargs", jkw);
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
        int unb = schema_index(s, "unbiased"), corr = schema_index(s, "correction");
        if (unb >= 0 && corr >= 0 && bound[unb].kind == TP_VAL_BOOL && is_none(&bound[corr])) {
            bound[corr] = tp_value_int(bound[unb].u.b ? 1 : 0);
            bound[unb] = tp_value_none();
        }
    }
    if (op == TP_OP_SUM || op == TP_OP_MEAN || op == TP_OP_PROD || op == TP_OP_VAR || op == TP_OP_STD ||
        op == TP_OP_NORM) {
        int dim = schema_index(s, "dim"); /* [] reduces every dim, as None does */
        if (dim >= 0 && tp_value_is_seq(&bound[dim]) && tp_value_len(&bound[dim]) == 0) tp_value_clear(&bound[dim]);
    }
    param_list pl;
    st = parse_params(e->params, &pl);
    json_t *pos = jw_take(w, json_array()), *kw = jw_take(w, json_array());
    bool positional = true;
    /* every argument the callee cannot take must have its default value */
    bool covered[64] = {false};
    for (int i = 0; st == TP_OK && i < pl.n; i++) {
        int idx = pl.items[i].kind == PARAM_ARG ? schema_index(s, pl.items[i].ours) : -1;
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
        int idx = schema_index(s, q->ours);
        if (idx < 0) {
            st = tp_error(TP_ERR_INTERNAL, "op map: %s.%s parameter '%s' names no argument of %s", e->module, e->name,
                          q->ours, tp_op_name(op));
            break;
        }
        const tp_value *v = &bound[idx];
        const tp_value *their_default =
            q->has_lit ? &q->lit : s->args[idx].has_default ? &s->args[idx].default_value : NULL;
        /* None for an optional argument with a default means that default */
        bool none_means_default = is_none(v) && s->args[idx].has_default && !is_none(&s->args[idx].default_value);
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
            jw_append(w, pos, jv);
        } else {
            json_t *pair = jw_take(w, json_array());
            jw_append(w, pair, jw_take(w, json_string(q->their)));
            jw_append(w, pair, jv);
            jw_append(w, kw, pair);
        }
    }
    params_clear(&pl);
    for (int i = 0; i < s->n_args; i++) tp_value_clear(&bound[i]);
    jw_set(w, obj, "args", jw_obj1(w, "__tuple__", pos));
    jw_set(w, obj, "kwargs", jw_obj1(w, "__dict__", kw));
    return st;
}

static tp_status enc_node(jwriter *w, const tp_node *n, bool meta, json_t **out) {
    json_t *obj = jw_take(w, json_object());
    *out = obj;
    tp_node_kind kind = tp_node_get_kind(n);
    tp_status st = TP_OK;
    if (kind == TP_NODE_CALL_FUNCTION || kind == TP_NODE_CALL_METHOD) {
        tp_op op = tp_node_op(n);
        if (op == TP_OP_INVALID)
            return tp_error(TP_ERR_UNSUPPORTED, "node %s: method '%s' names no op", tp_node_name(n), tp_node_target(n));
        st = enc_call(w, n, op, obj);
    } else {
        jw_set(w, obj, "op", jw_take(w, json_string(tp_node_kind_name(kind))));
        jw_set(w, obj, "target", enc_name_target(w, "name", tp_node_target(n)));
        json_t *a = NULL, *k = NULL;
        st = enc_value(w, tp_node_args(n), 0, &a);
        if (st == TP_OK) st = enc_value(w, tp_node_kwargs(n), 0, &k);
        jw_set(w, obj, "args", a);
        jw_set(w, obj, "kwargs", k);
    }
    jw_set(w, obj, "name", jw_name(w, "node name", tp_node_name(n)));
    const tp_value *val = tp_node_meta_val(n);
    if (meta && val->kind != TP_VAL_NONE) jw_set(w, obj, "meta", jw_obj1(w, "val", enc_meta_val(w, val, 0)));
    return st;
}

static json_t *enc_arg(jwriter *w, const tp_arg_spec *a, tp_status *st) {
    json_t *o = jw_take(w, json_object());
    static const char *const names[] = {"TensorArgument", "SymIntArgument", "SymFloatArgument", "SymBoolArgument",
                                        "TokenArgument",  "CustomObjArgument", "ConstantArgument"};
    jw_set(w, o, "t", jw_take(w, json_string((unsigned)a->kind < 7 ? names[a->kind] : "TensorArgument")));
    jw_set(w, o, "name", jw_name(w, "argument name", a->name ? a->name : ""));
    if (a->kind == TP_ARGK_CUSTOM_OBJ) {
        jw_set(w, o, "class_fqn", jw_name(w, "class name", a->class_fqn ? a->class_fqn : ""));
        jw_set(w, o, "fake_val", jw_take(w, json_null()));
    } else if (a->kind == TP_ARGK_CONSTANT) {
        json_t *v = NULL;
        tp_status s = enc_value(w, &a->value, 0, &v);
        if (s != TP_OK && *st == TP_OK) *st = s;
        jw_set(w, o, "value", v ? v : jw_take(w, json_null()));
    }
    return o;
}

/* tpexport's "none" specs are None leaves to tensorplay. */
static json_t *enc_treespec(jwriter *w, const tp_treespec *s, int depth) {
    if (!s) return jw_take(w, json_null());
    tp_tree_kind k = tp_treespec_kind(s);
    json_t *o = jw_take(w, json_object());
    if (depth > TP_LIMIT_DEPTH)
        jw_limit(w, "a tree spec nested deeper than %d exceeds the limit (TP_LIMIT_DEPTH)", TP_LIMIT_DEPTH);
    if (k == TP_TREE_LEAF || k == TP_TREE_NONE || depth > TP_LIMIT_DEPTH) {
        jw_set(w, o, "t", jw_take(w, json_string("leaf")));
        return o;
    }
    jw_set(w, o, "t", jw_take(w, json_string(tp_tree_kind_name(k))));
    if (k == TP_TREE_DICT) {
        json_t *keys = jw_take(w, json_array());
        for (int64_t i = 0; i < tp_treespec_num_children(s); i++) jw_append(w, keys, jw_name(w, "tree spec key", tp_treespec_key(s, i)));
        jw_set(w, o, "ctx", jw_obj1(w, "__tuple__", keys));
    } else {
        jw_set(w, o, "ctx", jw_take(w, json_null()));
    }
    json_t *c = jw_take(w, json_array());
    for (int64_t i = 0; i < tp_treespec_num_children(s); i++) jw_append(w, c, enc_treespec(w, tp_treespec_child(s, i), depth + 1));
    jw_set(w, o, "c", c);
    return o;
}

static json_t *enc_spec(jwriter *w, const char *kind, const tp_arg_spec *arg, const char *target, json_t *persistent,
                        tp_status *st) {
    json_t *o = jw_take(w, json_object());
    jw_set(w, o, "kind", jw_take(w, json_string(kind)));
    jw_set(w, o, "arg", enc_arg(w, arg, st));
    jw_set(w, o, "target", target ? jw_name(w, "target", target) : jw_take(w, json_null()));
    jw_set(w, o, "persistent", persistent);
    return o;
}

static tp_status enc_output_specs(jwriter *w, const tp_program *p, json_t *arr) {
    const tp_signature *sig = tp_program_signature(p);
    const tp_node *out = tp_graph_output_node(tp_program_graph(p));
    const tp_value **leaves = NULL;
    int64_t n = 0, cap = 0;
    tp_status st = TP_OK;
    if (out) st = flatten_tp_style(tp_value_at(tp_node_args(out), 0), 0, &leaves, &n, &cap);
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
            jw_append(w, arr, enc_spec(w, "USER_OUTPUT", &a, NULL, jw_take(w, json_null()), &st));
            continue;
        }
        const tp_output_spec *s = tp_signature_output(sig, k++);
        jw_append(w, arr, enc_spec(w, tp_output_kind_name(s->kind), &s->arg, s->target, jw_take(w, json_null()), &st));
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
    return v == TP_DIM_UNBOUNDED ? jw_take(w, json_null()) : jw_take(w, json_integer(v));
}

static tp_status enc_dynamic_shapes(jwriter *w, const tp_program *p, json_t **out) {
    *out = NULL;
    int n = tp_program_num_dim_rules(p);
    bool *done = tp_calloc((size_t)n + 1, sizeof *done);
    TP_CHECK(done != NULL, TP_ERR_NOMEM, "out of memory");
    /* wrapped once filled: jw_obj1 may free what it is given */
    json_t *inputs = jw_take(w, json_array());
    tp_status st = TP_OK;
    for (int i = 0; st == TP_OK && i < n; i++) {
        if (done[i]) continue;
        const char *input = tp_program_dim_rule(p, i)->site.input;
        if (strchr(input, '[') || strchr(input, '.')) {
            st = tp_error(TP_ERR_UNSUPPORTED, "dynamic shapes of the nested input '%s' cannot be written", input);
            break;
        }
        json_t *dims = jw_take(w, json_array());
        for (int d = 0; st == TP_OK && d < TP_MAX_DIMS; d++) {
            for (int k = i; st == TP_OK && k < n; k++) {
                const tp_dim_rule *r = tp_program_dim_rule(p, k);
                if (done[k] || r->site.dim != d || strcmp(r->site.input, input) != 0) continue;
                done[k] = true;
                json_t *spec = NULL;
                if (r->kind == TP_DIM_STATIC) {
                    spec = jw_obj1(w, "__static_dim__", jw_take(w, json_integer(r->value)));
                } else {
                    const tp_range_constraint *rc = tp_program_find_range(p, r->symbol);
                    int64_t lo = rc ? rc->min : 0, hi = rc ? rc->max : TP_DIM_UNBOUNDED;
                    json_t *o = jw_take(w, json_object());
                    if (r->kind == TP_DIM_SYMBOL) {
                        jw_set(w, o, "name", jw_name(w, "dim name", r->symbol));
                        jw_set(w, o, "min", jw_take(w, json_integer(lo)));
                        jw_set(w, o, "max", enc_bound(w, hi));
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
                        jw_set(w, o, "root", jw_name(w, "dim name", r->symbol));
                        linear_name(r->symbol, r->scale, r->offset, name, sizeof name);
                        jw_set(w, o, "name", jw_name(w, "derived dim name", name));
                        jw_set(w, o, "scale", jw_take(w, json_integer(r->scale)));
                        jw_set(w, o, "offset", jw_take(w, json_integer(r->offset)));
                        jw_set(w, o, "min", jw_take(w, json_integer(dlo)));
                        jw_set(w, o, "max", enc_bound(w, dhi));
                        spec = jw_obj1(w, "__derived_dim__", o);
                    }
                }
                json_t *pair = jw_take(w, json_array());
                jw_append(w, pair, jw_take(w, json_integer(d)));
                jw_append(w, pair, spec);
                jw_append(w, dims, pair);
            }
        }
        if (st != TP_OK) {
            json_decref(dims);
            break;
        }
        json_t *pair = jw_take(w, json_array());
        jw_append(w, pair, jw_name(w, "input name", input));
        jw_append(w, pair, jw_obj1(w, "__map__", dims));
        jw_append(w, inputs, pair);
    }
    tp_free(done);
    *out = jw_obj1(w, "__map__", inputs);
    return st;
}

static json_t *enc_call_signature(jwriter *w, const tp_module_call_signature *s, tp_status *st) {
    if (!s) return jw_take(w, json_null());
    json_t *o = jw_take(w, json_object()), *ins = jw_take(w, json_array()), *outs = jw_take(w, json_array());
    for (int i = 0; i < s->n_inputs; i++) jw_append(w, ins, enc_arg(w, &s->inputs[i], st));
    for (int i = 0; i < s->n_outputs; i++) jw_append(w, outs, enc_arg(w, &s->outputs[i], st));
    jw_set(w, o, "inputs", ins);
    jw_set(w, o, "outputs", outs);
    jw_set(w, o, "in_spec", enc_treespec(w, s->in_spec, 0));
    jw_set(w, o, "out_spec", enc_treespec(w, s->out_spec, 0));
    if (s->forward_arg_names) {
        json_t *names = jw_take(w, json_array());
        for (int i = 0; i < s->n_forward_arg_names; i++) jw_append(w, names, jw_name(w, "argument name", s->forward_arg_names[i]));
        jw_set(w, o, "forward_arg_names", names);
    } else {
        jw_set(w, o, "forward_arg_names", jw_take(w, json_null()));
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
    jwriter w = jw_start();
    json_t *doc = jw_take(&w, json_object());
    tp_status st = TP_OK;
    jw_set(&w, doc, "schema_version", jw_take(&w, json_integer(1)));
    jw_set(&w, doc, "dialect", jw_take(&w, json_string("STABLE")));
    /* get_attr nodes are written lifted, as placeholders with
     * CONSTANT_TENSOR specs: tensorplay's loader does not give get_attr
     * targets their values */
    json_t *nodes = jw_take(&w, json_array()), *lifted_specs = jw_take(&w, json_array());
    bool lifted = false;
    for (tp_node *n = tp_graph_first_node(tp_program_graph(p)); n && st == TP_OK; n = tp_node_next(n)) {
        tp_node_kind kind = tp_node_get_kind(n);
        if (!lifted && kind != TP_NODE_PLACEHOLDER) {
            lifted = true;
            for (tp_node *g = n; g && st == TP_OK; g = tp_node_next(g)) {
                if (tp_node_get_kind(g) != TP_NODE_GET_ATTR) continue;
                json_t *jn = jw_take(&w, json_object());
                jw_set(&w, jn, "op", jw_take(&w, json_string("placeholder")));
                jw_set(&w, jn, "target", enc_name_target(&w, "name", tp_node_name(g)));
                jw_set(&w, jn, "args", jw_obj1(&w, "__tuple__", jw_take(&w, json_array())));
                jw_set(&w, jn, "kwargs", jw_obj1(&w, "__dict__", jw_take(&w, json_array())));
                jw_set(&w, jn, "name", jw_name(&w, "node name", tp_node_name(g)));
                const tp_value *val = tp_node_meta_val(g);
                if (meta && val->kind != TP_VAL_NONE) jw_set(&w, jn, "meta", jw_obj1(&w, "val", enc_meta_val(&w, val, 0)));
                jw_append(&w, nodes, jn);
                tp_arg_spec a = tp_arg_tensor(tp_node_name(g));
                jw_append(&w, lifted_specs, enc_spec(&w, "CONSTANT_TENSOR", &a, tp_node_target(g), jw_take(&w, json_null()), &st));
            }
        }
        if (kind == TP_NODE_GET_ATTR) continue;
        if (kind == TP_NODE_OUTPUT) enc_dim_asserts(&w, p, nodes);
        json_t *jn = NULL;
        st = enc_node(&w, n, meta, &jn);
        jw_append(&w, nodes, jn);
    }
    jw_set(&w, doc, "graph", jw_obj1(&w, "nodes", nodes));

    const tp_signature *sig = tp_program_signature(p);
    json_t *jsig = jw_take(&w, json_object()), *ins = jw_take(&w, json_array()), *outs = jw_take(&w, json_array());
    for (int i = 0; i < tp_signature_n_inputs(sig); i++) {
        const tp_input_spec *s = tp_signature_input(sig, i);
        json_t *pers = s->kind == TP_INPUT_BUFFER && s->persistent != TP_PERSISTENT_UNSET
                           ? jw_take(&w, json_boolean(s->persistent == TP_PERSISTENT_YES))
                           : jw_take(&w, json_null());
        jw_append(&w, ins, enc_spec(&w, tp_input_kind_name(s->kind), &s->arg, s->target, pers, &st));
    }
    for (size_t i = 0; i < json_array_size(lifted_specs); i++) jw_append(&w, ins, json_incref(json_array_get(lifted_specs, i)));
    json_decref(lifted_specs);
    if (st == TP_OK) st = enc_output_specs(&w, p, outs);
    jw_set(&w, jsig, "input_specs", ins);
    jw_set(&w, jsig, "output_specs", outs);
    jw_set(&w, doc, "signature", jsig);

    json_t *mcg = jw_take(&w, json_array());
    for (int i = 0; i < tp_program_num_module_calls(p); i++) {
        tp_module_call_entry e = tp_program_module_call(p, i);
        json_t *o = jw_take(&w, json_object());
        jw_set(&w, o, "fqn", jw_name(&w, "module path", e.fqn ? e.fqn : ""));
        jw_set(&w, o, "signature", enc_call_signature(&w, e.signature, &st));
        jw_append(&w, mcg, o);
    }
    jw_set(&w, doc, "module_call_graph", mcg);

    json_t *ranges = jw_take(&w, json_object());
    for (int i = 0; i < tp_program_num_ranges(p); i++) {
        const tp_range_constraint *rc = tp_program_range(p, i);
        json_t *o = jw_take(&w, json_object());
        jw_set(&w, o, "min", jw_take(&w, json_integer(rc->min)));
        jw_set(&w, o, "max", enc_bound(&w, rc->max));
        jw_check_name(&w, "dim name", rc->name);
        jw_set(&w, ranges, rc->name, o);
    }
    jw_set(&w, doc, "range_constraints", ranges);
    json_t *eqs = jw_take(&w, json_array());
    for (int i = 0; i < tp_program_num_equalities(p); i++) {
        const tp_equality_constraint *ec = tp_program_equality(p, i);
        json_t *o = jw_take(&w, json_object()), *sites = jw_take(&w, json_array());
        for (int k = 0; k < ec->n_sites; k++) {
            json_t *site = jw_take(&w, json_array());
            jw_append(&w, site, jw_name(&w, "input name", ec->sites[k].input));
            jw_append(&w, site, jw_take(&w, json_integer(ec->sites[k].dim)));
            jw_append(&w, sites, site);
        }
        jw_set(&w, o, "sites", sites);
        jw_set(&w, o, "name", ec->name ? jw_name(&w, "dim name", ec->name) : jw_take(&w, json_null()));
        jw_append(&w, eqs, o);
    }
    jw_set(&w, doc, "equality_constraints", eqs);
    json_t *ds = NULL;
    if (st == TP_OK) st = enc_dynamic_shapes(&w, p, &ds);
    jw_set(&w, doc, "dynamic_shapes", ds ? ds : jw_take(&w, json_null()));
    json_t *jmeta = jw_take(&w, json_object());
    jw_set(&w, jmeta, "num_mutations", jw_take(&w, json_integer(tp_program_num_mutations(p))));
    jw_set(&w, jmeta, "in_spec", enc_treespec(&w, tp_program_in_spec(p), 0));
    jw_set(&w, jmeta, "out_spec", enc_treespec(&w, tp_program_out_spec(p), 0));
    jw_set(&w, doc, "meta", jmeta);
    jw_set(&w, doc, "opset_version", jw_take(&w, json_object()));
    if (st != TP_OK) {
        json_decref(doc);
        tp_free(w.nonfinite);
        return st;
    }
    return jw_finish(&w, doc, json, len);
}

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
        return tp_error(TP_ERR_CORRUPT, "%s '%s': %s must be an array, got %s", what, name, field, json_kind(j));
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

static tp_status read_weight(const char *what, const char *name, const json_t *j, tp_serde_payload_fn payload,
                             void *ctx, const tp_doc_limits *lim, tp_serde_weight *w) {
    if (!json_is_object(j)) return tp_error(TP_ERR_CORRUPT, "%s '%s': expected an object, got %s", what, name, json_kind(j));
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
                        json_is_string(dt) ? json_string_value(dt) : json_kind(dt), json_is_string(dt) ? "'" : "");
    int ns;
    TP_TRY(read_dims_array(sizes, what, name, "sizes", &w->ndim, w->sizes));
    TP_TRY(read_dims_array(strides, what, name, "strides", &ns, w->strides));
    if (ns != w->ndim)
        return tp_error(TP_ERR_CORRUPT, "%s '%s': %d strides for %d sizes", what, name, ns, w->ndim);
    if (!json_is_integer(off) || json_integer_value(off) < 0)
        return tp_error(TP_ERR_CORRUPT, "%s '%s': storage_offset must be a non-negative integer", what, name);
    w->storage_offset = json_integer_value(off);
    int64_t numel;
    if (tp__numel(w->ndim, w->sizes, &numel) != TP_OK || numel > INT64_MAX / 16)
        return tp_error(TP_ERR_CORRUPT, "%s '%s': element count overflows", what, name);
    uint64_t need;
    if (!view_bytes(w->ndim, w->sizes, w->strides, w->storage_offset, tp_dtype_size(w->dtype), &need) || need > SIZE_MAX)
        return tp_error(TP_ERR_CORRUPT, "%s '%s': view size overflows", what, name);
    w->bytes_needed = (size_t)need;
    uint64_t bytes = (uint64_t)numel * tp_dtype_size(w->dtype);
    if (bytes < need) bytes = need;
    if (bytes > lim->tensor_bytes)
        return tp_error(TP_ERR_UNSUPPORTED, "%s '%s': a %s tensor of %" PRIu64 " bytes exceeds the limit of %" PRIu64
                        " bytes (max_tensor_bytes)", what, name, tp_dtype_name(w->dtype), bytes, lim->tensor_bytes);
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
    if (payload) {
        size_t have = 0;
        tp_status st = payload(ctx, json_string_value(pn), &have);
        if (st == TP_ERR_NOT_FOUND)
            return tp_error(TP_ERR_CORRUPT, "%s '%s': payload '%s' is missing", what, name, json_string_value(pn));
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
    TP_TRY(parse_json(json, len, what, lim.document, &doc));
    tp_status st = TP_OK;
    if (!json_is_object(doc)) st = tp_error(TP_ERR_CORRUPT, "%s: expected an object, got %s", what, json_kind(doc));
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
            if (!valid_target(name, lim.name)) {
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
    jwriter w = jw_start();
    json_t *doc = jw_take(&w, json_object());
    for (int i = 0; i < ws->n; i++) {
        const tp_serde_weight *e = &ws->items[i];
        json_t *o = jw_take(&w, json_object()), *sizes = jw_take(&w, json_array()), *strides = jw_take(&w, json_array());
        for (int d = 0; d < e->ndim; d++) {
            jw_append(&w, sizes, jw_take(&w, json_integer(e->sizes[d])));
            jw_append(&w, strides, jw_take(&w, json_integer(e->strides[d])));
        }
        jw_set(&w, o, "dtype", jw_take(&w, json_string(tp_dtype_name(e->dtype))));
        jw_set(&w, o, "sizes", sizes);
        jw_set(&w, o, "strides", strides);
        jw_set(&w, o, "storage_offset", jw_take(&w, json_integer(e->storage_offset)));
        jw_set(&w, o, "requires_grad", jw_take(&w, json_boolean(e->requires_grad)));
        jw_set(&w, o, "path_name", jw_name(&w, "payload path", e->path_name));
        jw_set(&w, o, "use_pickle", jw_take(&w, json_false()));
        jw_set(&w, o, "is_param", jw_take(&w, json_boolean(e->is_param)));
        jw_set(&w, o, "role", e->role >= 0 ? jw_take(&w, json_integer(e->role)) : jw_take(&w, json_null()));
        jw_check_name(&w, "state name", e->name);
        if (json_object_get(doc, e->name)) {
            json_decref(o);
            json_decref(doc);
            tp_free(w.nonfinite);
            return tp_error(TP_ERR_DUPLICATE, "state name '%s' appears twice", e->name);
        }
        jw_set(&w, doc, e->name, o);
    }
    return jw_finish(&w, doc, json, len);
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
        if (parse_params(e->params, &pl) != TP_OK) {
            tp__sb_printf(&sb, "\n- %s: %s", callee, tp_last_error());
            faults++;
            continue;
        }
        const tp_schema *s = e->op != TP_OP_INVALID ? tp_op_schema(e->op) : NULL;
        bool plain = e->special == TP_SERDE_PLAIN || e->special == TP_SERDE_BINOP || e->special == TP_SERDE_MAXMIN ||
                     e->special == TP_SERDE_RETURN_INDICES || e->special == TP_SERDE_NORM;
        if (plain && !s) {
            tp__sb_printf(&sb, "\n- %s: no op schema", callee);
            faults++;
        }
        for (int k = 0; s && plain && k < pl.n; k++)
            if (pl.items[k].kind == PARAM_ARG && schema_index(s, pl.items[k].ours) < 0) {
                tp__sb_printf(&sb, "\n- %s: parameter '%s' names no argument of %s", callee, pl.items[k].ours,
                              tp_op_name(e->op));
                faults++;
            }
        params_clear(&pl);
        if (e->fixed && s) {
            if (parse_params(e->fixed, &pl) != TP_OK) {
                tp__sb_printf(&sb, "\n- %s: fixed: %s", callee, tp_last_error());
                faults++;
                continue;
            }
            for (int k = 0; k < pl.n; k++)
                if (schema_index(s, pl.items[k].ours) < 0) {
                    tp__sb_printf(&sb, "\n- %s: fixed argument '%s' is not in %s", callee, pl.items[k].ours,
                                  tp_op_name(e->op));
                    faults++;
                }
            params_clear(&pl);
        }
    }
    for (int op = 0; op < TP_OP_COUNT; op++) {
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
