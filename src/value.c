/*
 * value.c - tagged values (see value.h).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *tp_value_kind_name(tp_value_kind kind) {
    static const char *const names[] = {"None",   "bool", "int",  "float", "str",  "dtype",
                                        "Tensor", "Node", "list", "tuple", "dict"};
    return (unsigned)kind < TP_ARRAY_LEN(names) ? names[kind] : "?";
}

tp_value tp_value_none(void) { return (tp_value){.kind = TP_VAL_NONE}; }
tp_value tp_value_bool(bool b) { return (tp_value){.kind = TP_VAL_BOOL, .u.b = b}; }
tp_value tp_value_int(int64_t i) { return (tp_value){.kind = TP_VAL_INT, .u.i = i}; }
tp_value tp_value_float(double f) { return (tp_value){.kind = TP_VAL_FLOAT, .u.f = f}; }
tp_value tp_value_dtype(tp_dtype d) { return (tp_value){.kind = TP_VAL_DTYPE, .u.dtype = d}; }
tp_value tp_value_node(tp_node *n) { return (tp_value){.kind = TP_VAL_NODE, .u.node = n}; }
tp_value tp_value_tensor(tp_tensor *t) {
    return t ? (tp_value){.kind = TP_VAL_TENSOR, .u.tensor = t} : tp_value_none();
}

tp_status tp_value_str(const char *s, tp_value *out) {
    *out = tp_value_none(); /* on failure too: callers may clear it */
    char *c = tp_strdup(s ? s : "");
    TP_CHECK(c != NULL, TP_ERR_NOMEM, "out of memory copying a string");
    *out = (tp_value){.kind = TP_VAL_STR, .u.s = c};
    return TP_OK;
}

static tp_status seq_new(tp_value_kind kind, int64_t n, tp_value *out) {
    *out = tp_value_none(); /* on failure too: callers may clear it */
    TP_CHECK(n >= 0, TP_ERR_INVALID_ARG, "negative sequence length");
    tp_value *items = tp_calloc((size_t)(n ? n : 1), sizeof *items);
    TP_CHECK(items != NULL, TP_ERR_NOMEM, "out of memory allocating a %s of %" PRId64 " items",
             tp_value_kind_name(kind), n);
    *out = (tp_value){.kind = kind};
    out->u.seq.items = items;
    out->u.seq.n = n;
    return TP_OK;
}

tp_status tp_value_list(int64_t n, tp_value *out) { return seq_new(TP_VAL_LIST, n, out); }
tp_status tp_value_tuple(int64_t n, tp_value *out) { return seq_new(TP_VAL_TUPLE, n, out); }

tp_status tp_value_int_list(const int64_t *ints, int64_t n, tp_value *out) {
    TP_TRY(seq_new(TP_VAL_LIST, n, out));
    for (int64_t i = 0; i < n; i++) out->u.seq.items[i] = tp_value_int(ints[i]);
    return TP_OK;
}

tp_status tp_value_dict(tp_value *out) {
    TP_TRY(seq_new(TP_VAL_DICT, 0, out));
    out->u.seq.keys = tp_calloc(1, sizeof(char *));
    if (!out->u.seq.keys) {
        tp_free(out->u.seq.items);
        *out = tp_value_none();
        return tp_error(TP_ERR_NOMEM, "out of memory allocating a dict");
    }
    return TP_OK;
}

void tp_value_clear(tp_value *v) {
    if (!v) return;
    switch (v->kind) {
    case TP_VAL_STR: tp_free(v->u.s); break;
    case TP_VAL_TENSOR: tp_tensor_free(v->u.tensor); break;
    case TP_VAL_LIST:
    case TP_VAL_TUPLE:
    case TP_VAL_DICT:
        for (int64_t i = 0; i < v->u.seq.n; i++) {
            tp_value_clear(&v->u.seq.items[i]);
            if (v->u.seq.keys) tp_free(v->u.seq.keys[i]);
        }
        tp_free(v->u.seq.items);
        tp_free(v->u.seq.keys);
        break;
    default: break;
    }
    *v = tp_value_none();
}

static tp_status value_copy(const tp_value *src, tp_value *dst) {
    tp_value r = tp_value_none();
    switch (src->kind) {
    case TP_VAL_STR: TP_TRY(tp_value_str(src->u.s, &r)); break;
    case TP_VAL_TENSOR: r = tp_value_tensor(tp_tensor_retain(src->u.tensor)); break;
    case TP_VAL_LIST:
    case TP_VAL_TUPLE:
    case TP_VAL_DICT: {
        int64_t n = src->u.seq.n;
        TP_TRY(seq_new(src->kind, n, &r));
        if (src->kind == TP_VAL_DICT) {
            r.u.seq.keys = tp_calloc((size_t)(n ? n : 1), sizeof(char *));
            if (!r.u.seq.keys) {
                tp_value_clear(&r);
                return tp_error(TP_ERR_NOMEM, "out of memory copying a dict");
            }
        }
        for (int64_t i = 0; i < n; i++) {
            tp_status st = value_copy(&src->u.seq.items[i], &r.u.seq.items[i]);
            if (st == TP_OK && r.u.seq.keys) {
                r.u.seq.keys[i] = tp_strdup(src->u.seq.keys[i]);
                if (!r.u.seq.keys[i]) st = tp_error(TP_ERR_NOMEM, "out of memory copying a dict key");
            }
            if (st != TP_OK) {
                tp_value_clear(&r);
                return st;
            }
        }
        break;
    }
    default: r = *src; break;
    }
    *dst = r;
    return TP_OK;
}

tp_status tp_value_copy(const tp_value *src, tp_value *dst) {
    tp_status st = value_copy(src, dst);
    if (st != TP_OK) *dst = tp_value_none(); /* nothing half-copied to clear */
    return st;
}

void tp_value_move(tp_value *dst, tp_value *src) {
    if (dst == src) return;
    tp_value_clear(dst);
    *dst = *src;
    *src = tp_value_none();
}

int64_t tp_value_len(const tp_value *v) {
    return (v && (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE || v->kind == TP_VAL_DICT)) ? v->u.seq.n : 0;
}

tp_value *tp_value_at(const tp_value *v, int64_t i) {
    if (i < 0 || i >= tp_value_len(v)) return NULL;
    return &v->u.seq.items[i];
}

/* seq_set, append and dict_set consume `item` in every case: on failure
 * it is cleared here, so callers never free it (value.h). */
tp_status tp_value_seq_set(tp_value *seq, int64_t i, tp_value *item) {
    if (!(i >= 0 && i < tp_value_len(seq))) {
        tp_value_clear(item);
        return tp_error(TP_ERR_INDEX, "index %" PRId64 " out of range", i);
    }
    tp_value_move(&seq->u.seq.items[i], item);
    return TP_OK;
}

static tp_status seq_grow(tp_value *seq) {
    int64_t n = seq->u.seq.n;
    /* capacity is not tracked: grow to n+1 each time (sequences are small) */
    tp_value *items = tp_realloc(seq->u.seq.items, (size_t)(n + 1) * sizeof *items);
    TP_CHECK(items != NULL, TP_ERR_NOMEM, "out of memory growing a %s", tp_value_kind_name(seq->kind));
    seq->u.seq.items = items;
    items[n] = tp_value_none();
    if (seq->kind == TP_VAL_DICT) {
        char **keys = tp_realloc(seq->u.seq.keys, (size_t)(n + 1) * sizeof *keys);
        TP_CHECK(keys != NULL, TP_ERR_NOMEM, "out of memory growing a dict");
        seq->u.seq.keys = keys;
        keys[n] = NULL;
    }
    return TP_OK;
}

tp_status tp_value_append(tp_value *seq, tp_value *item) {
    tp_status st = seq->kind == TP_VAL_LIST || seq->kind == TP_VAL_TUPLE
                       ? seq_grow(seq)
                       : tp_error(TP_ERR_TYPE, "append needs a list or tuple, got %s", tp_value_kind_name(seq->kind));
    if (st != TP_OK) {
        tp_value_clear(item);
        return st;
    }
    seq->u.seq.items[seq->u.seq.n++] = *item;
    *item = tp_value_none();
    return TP_OK;
}

tp_status tp_value_dict_set(tp_value *dict, const char *key, tp_value *item) {
    if (dict->kind != TP_VAL_DICT) {
        tp_value_clear(item);
        return tp_error(TP_ERR_TYPE, "dict_set needs a dict, got %s", tp_value_kind_name(dict->kind));
    }
    for (int64_t i = 0; i < dict->u.seq.n; i++) {
        if (strcmp(dict->u.seq.keys[i], key) == 0) {
            tp_value_move(&dict->u.seq.items[i], item);
            return TP_OK;
        }
    }
    char *k = tp_strdup(key);
    tp_status st = k ? seq_grow(dict) : tp_error(TP_ERR_NOMEM, "out of memory copying a dict key");
    if (st != TP_OK) {
        tp_free(k);
        tp_value_clear(item);
        return st;
    }
    dict->u.seq.keys[dict->u.seq.n] = k;
    dict->u.seq.items[dict->u.seq.n++] = *item;
    *item = tp_value_none();
    return TP_OK;
}

tp_value *tp_value_dict_get(const tp_value *dict, const char *key) {
    if (!dict || dict->kind != TP_VAL_DICT) return NULL;
    for (int64_t i = 0; i < dict->u.seq.n; i++)
        if (strcmp(dict->u.seq.keys[i], key) == 0) return &dict->u.seq.items[i];
    return NULL;
}

bool tp_value_is_number(const tp_value *v) {
    return v->kind == TP_VAL_BOOL || v->kind == TP_VAL_INT || v->kind == TP_VAL_FLOAT;
}

bool tp_value_is_seq(const tp_value *v) { return v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE; }

double tp_value_as_f64(const tp_value *v) {
    switch (v->kind) {
    case TP_VAL_BOOL: return v->u.b ? 1.0 : 0.0;
    case TP_VAL_INT: return (double)v->u.i;
    case TP_VAL_FLOAT: return v->u.f;
    default: return 0.0;
    }
}

int64_t tp_value_as_i64(const tp_value *v) {
    switch (v->kind) {
    case TP_VAL_BOOL: return v->u.b;
    case TP_VAL_INT: return v->u.i;
    case TP_VAL_FLOAT: return (v->u.f >= -9.2e18 && v->u.f <= 9.2e18) ? (int64_t)v->u.f : 0;
    default: return 0;
    }
}

bool tp_value_equal(const tp_value *a, const tp_value *b) {
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case TP_VAL_NONE: return true;
    case TP_VAL_BOOL: return a->u.b == b->u.b;
    case TP_VAL_INT: return a->u.i == b->u.i;
    case TP_VAL_FLOAT: return a->u.f == b->u.f || (isnan(a->u.f) && isnan(b->u.f));
    case TP_VAL_STR: return strcmp(a->u.s, b->u.s) == 0;
    case TP_VAL_DTYPE: return a->u.dtype == b->u.dtype;
    case TP_VAL_TENSOR: return a->u.tensor == b->u.tensor;
    case TP_VAL_NODE: return a->u.node == b->u.node;
    case TP_VAL_LIST:
    case TP_VAL_TUPLE:
    case TP_VAL_DICT:
        if (a->u.seq.n != b->u.seq.n) return false;
        for (int64_t i = 0; i < a->u.seq.n; i++) {
            if (a->kind == TP_VAL_DICT && strcmp(a->u.seq.keys[i], b->u.seq.keys[i]) != 0) return false;
            if (!tp_value_equal(&a->u.seq.items[i], &b->u.seq.items[i])) return false;
        }
        return true;
    }
    return false;
}

/* Node names come from the graph module; declared here to avoid a header
 * cycle (graph.c defines it). */
const char *tp_node_name(const tp_node *node);

int tp_value_repr(const tp_value *v, char *buf, size_t size) {
    size_t used = 0;
#define PUT(...)                                                                          \
    do {                                                                                  \
        int n_ = snprintf(size > used ? buf + used : NULL, size > used ? size - used : 0, \
                          __VA_ARGS__);                                                   \
        if (n_ > 0) used += (size_t)n_;                                                   \
    } while (0)
    switch (v->kind) {
    case TP_VAL_NONE: PUT("None"); break;
    case TP_VAL_BOOL: PUT("%s", v->u.b ? "True" : "False"); break;
    case TP_VAL_INT: PUT("%" PRId64, v->u.i); break;
    case TP_VAL_FLOAT:
        if (isinf(v->u.f)) PUT("%s", v->u.f > 0 ? "inf" : "-inf");
        else if (isnan(v->u.f)) PUT("nan");
        else if (v->u.f == floor(v->u.f) && fabs(v->u.f) < 1e16) PUT("%.1f", v->u.f);
        else {
            /* Python's repr: the shortest digits that read back exactly */
            char num[32];
            for (int prec = 1; prec <= 17; prec++) {
                snprintf(num, sizeof num, "%.*g", prec, v->u.f);
                if (strtod(num, NULL) == v->u.f) break;
            }
            PUT("%s", num);
        }
        break;
    case TP_VAL_STR: PUT("'%s'", v->u.s); break;
    case TP_VAL_DTYPE: PUT("torch.%s", tp_dtype_name(v->u.dtype)); break;
    case TP_VAL_TENSOR: {
        char s[128];
        PUT("Tensor(shape=%s, dtype=%s)", tp__shape_str(v->u.tensor->ndim, v->u.tensor->sizes, s, sizeof s),
            tp_dtype_name(v->u.tensor->dtype));
        break;
    }
    case TP_VAL_NODE: PUT("%s", tp_node_name(v->u.node)); break;
    case TP_VAL_LIST:
    case TP_VAL_TUPLE:
    case TP_VAL_DICT: {
        const char *open = v->kind == TP_VAL_LIST ? "[" : v->kind == TP_VAL_TUPLE ? "(" : "{";
        const char *close = v->kind == TP_VAL_LIST ? "]" : v->kind == TP_VAL_TUPLE ? ")" : "}";
        PUT("%s", open);
        for (int64_t i = 0; i < v->u.seq.n; i++) {
            if (i) PUT(", ");
            if (v->kind == TP_VAL_DICT) PUT("'%s': ", v->u.seq.keys[i]);
            int n = tp_value_repr(&v->u.seq.items[i], size > used ? buf + used : NULL,
                                  size > used ? size - used : 0);
            used += (size_t)n;
        }
        if (v->kind == TP_VAL_TUPLE && v->u.seq.n == 1) PUT(",");
        PUT("%s", close);
        break;
    }
    }
#undef PUT
    if (size && used >= size) buf[size - 1] = '\0';
    return (int)used;
}
