/*
 * pytree.c - tree specs, flatten/unflatten, and the specs' JSON and repr
 * text forms (see pytree.h). The JSON reader is a small strict parser for
 * exactly the spec format; it treats its input as hostile (bounded depth,
 * explicit length, every error names the problem and byte offset).
 */
#include <inttypes.h>
#include <string.h>

#include "internal.h"
#include "tpexport/pytree.h"

#define TP_TREE_MAX_DEPTH 256

struct tp_treespec {
    tp_tree_kind kind;
    int64_t n_children;
    tp_treespec **children; /* owned */
    char **keys;            /* dict only: owned, unique */
    int64_t n_leaves;
};

static const char *const tree_kind_names[] = {"leaf", "none", "tuple", "list", "dict"};

const char *tp_tree_kind_name(tp_tree_kind kind) {
    return (unsigned)kind < TP_ARRAY_LEN(tree_kind_names) ? tree_kind_names[kind] : "?";
}

/* ---- building -------------------------------------------------------------- */

void tp_treespec_free(tp_treespec *spec) {
    if (!spec) return;
    for (int64_t i = 0; i < spec->n_children; i++) {
        if (spec->children) tp_treespec_free(spec->children[i]);
        if (spec->keys) tp_free(spec->keys[i]);
    }
    tp_free(spec->children);
    tp_free(spec->keys);
    tp_free(spec);
}

static tp_status spec_simple(tp_tree_kind kind, tp_treespec **out) {
    tp_treespec *s = tp_calloc(1, sizeof *s);
    TP_CHECK(s != NULL, TP_ERR_NOMEM, "out of memory allocating a tree spec");
    s->kind = kind;
    s->n_leaves = kind == TP_TREE_LEAF ? 1 : 0;
    *out = s;
    return TP_OK;
}

tp_status tp_treespec_leaf(tp_treespec **out) { return spec_simple(TP_TREE_LEAF, out); }
tp_status tp_treespec_none(tp_treespec **out) { return spec_simple(TP_TREE_NONE, out); }

tp_status tp_treespec_new(tp_tree_kind kind, tp_treespec **children, int64_t n, const char *const *keys,
                          tp_treespec **out) {
    tp_status st = TP_OK;
    tp_treespec *s = NULL;
    if (kind != TP_TREE_TUPLE && kind != TP_TREE_LIST && kind != TP_TREE_DICT)
        st = tp_error(TP_ERR_INVALID_ARG, "tree spec kind %s is not a container", tp_tree_kind_name(kind));
    else if (n < 0) st = tp_error(TP_ERR_INVALID_ARG, "negative child count %" PRId64, n);
    else if (n > 0 && !children) st = tp_error(TP_ERR_INVALID_ARG, "children is NULL");
    else if (kind == TP_TREE_DICT && n > 0 && !keys) st = tp_error(TP_ERR_INVALID_ARG, "dict spec needs keys");
    for (int64_t i = 0; st == TP_OK && i < n; i++) {
        if (!children[i]) st = tp_error(TP_ERR_INVALID_ARG, "child %" PRId64 " is NULL", i);
        else if (kind == TP_TREE_DICT && !keys[i]) st = tp_error(TP_ERR_INVALID_ARG, "dict key %" PRId64 " is NULL", i);
        for (int64_t k = 0; st == TP_OK && kind == TP_TREE_DICT && k < i; k++)
            if (strcmp(keys[k], keys[i]) == 0) st = tp_error(TP_ERR_DUPLICATE, "dict spec has key '%s' twice", keys[i]);
    }
    if (st == TP_OK) {
        s = tp_calloc(1, sizeof *s);
        if (s) {
            s->kind = kind;
            s->children = tp_calloc((size_t)(n ? n : 1), sizeof *s->children);
            if (kind == TP_TREE_DICT) s->keys = tp_calloc((size_t)(n ? n : 1), sizeof *s->keys);
        }
        if (!s || !s->children || (kind == TP_TREE_DICT && !s->keys))
            st = tp_error(TP_ERR_NOMEM, "out of memory allocating a tree spec");
        for (int64_t i = 0; st == TP_OK && kind == TP_TREE_DICT && i < n; i++) {
            s->keys[i] = tp_strdup(keys[i]);
            if (!s->keys[i]) st = tp_error(TP_ERR_NOMEM, "out of memory copying a dict key");
        }
    }
    if (st != TP_OK) {
        if (s) {
            s->n_children = n; /* free the keys copied so far (rest NULL) */
            tp_treespec_free(s);
        }
        for (int64_t i = 0; children && i < n; i++) tp_treespec_free(children[i]);
        return st;
    }
    s->n_children = n;
    for (int64_t i = 0; i < n; i++) {
        s->children[i] = children[i];
        s->n_leaves += children[i]->n_leaves;
    }
    *out = s;
    return TP_OK;
}

tp_status tp_treespec_copy(const tp_treespec *spec, tp_treespec **out) {
    if (spec->kind == TP_TREE_LEAF || spec->kind == TP_TREE_NONE) return spec_simple(spec->kind, out);
    int64_t n = spec->n_children;
    tp_treespec **children = tp_calloc((size_t)(n ? n : 1), sizeof *children);
    TP_CHECK(children != NULL, TP_ERR_NOMEM, "out of memory copying a tree spec");
    tp_status st = TP_OK;
    for (int64_t i = 0; st == TP_OK && i < n; i++) st = tp_treespec_copy(spec->children[i], &children[i]);
    if (st != TP_OK) {
        for (int64_t i = 0; i < n; i++) tp_treespec_free(children[i]);
        tp_free(children);
        return st;
    }
    st = tp_treespec_new(spec->kind, children, n, (const char *const *)spec->keys, out);
    tp_free(children);
    return st;
}

/* ---- inspecting -------------------------------------------------------------- */

tp_tree_kind tp_treespec_kind(const tp_treespec *spec) { return spec->kind; }
int64_t tp_treespec_num_leaves(const tp_treespec *spec) { return spec->n_leaves; }
int64_t tp_treespec_num_children(const tp_treespec *spec) { return spec->n_children; }

const tp_treespec *tp_treespec_child(const tp_treespec *spec, int64_t i) {
    return i >= 0 && i < spec->n_children ? spec->children[i] : NULL;
}

const char *tp_treespec_key(const tp_treespec *spec, int64_t i) {
    return spec->keys && i >= 0 && i < spec->n_children ? spec->keys[i] : NULL;
}

bool tp_treespec_equal(const tp_treespec *a, const tp_treespec *b) {
    if (a == b) return true;
    if (!a || !b || a->kind != b->kind || a->n_children != b->n_children || a->n_leaves != b->n_leaves) return false;
    for (int64_t i = 0; i < a->n_children; i++) {
        if (a->kind == TP_TREE_DICT && strcmp(a->keys[i], b->keys[i]) != 0) return false;
        if (!tp_treespec_equal(a->children[i], b->children[i])) return false;
    }
    return true;
}

/* ---- flatten / unflatten -------------------------------------------------------- */

static tp_status spec_of(const tp_value *v, int depth, tp_treespec **out) {
    TP_CHECK(depth < TP_TREE_MAX_DEPTH, TP_ERR_INVALID_ARG, "value nested more than %d levels deep", TP_TREE_MAX_DEPTH);
    tp_tree_kind kind;
    switch (v->kind) {
    case TP_VAL_NONE: return tp_treespec_none(out);
    case TP_VAL_TUPLE: kind = TP_TREE_TUPLE; break;
    case TP_VAL_LIST: kind = TP_TREE_LIST; break;
    case TP_VAL_DICT: kind = TP_TREE_DICT; break;
    default: return tp_treespec_leaf(out);
    }
    int64_t n = v->u.seq.n;
    tp_treespec **children = tp_calloc((size_t)(n ? n : 1), sizeof *children);
    TP_CHECK(children != NULL, TP_ERR_NOMEM, "out of memory flattening a value");
    tp_status st = TP_OK;
    for (int64_t i = 0; st == TP_OK && i < n; i++) st = spec_of(&v->u.seq.items[i], depth + 1, &children[i]);
    if (st != TP_OK) {
        for (int64_t i = 0; i < n; i++) tp_treespec_free(children[i]);
        tp_free(children);
        return st;
    }
    st = tp_treespec_new(kind, children, n, (const char *const *)v->u.seq.keys, out);
    tp_free(children);
    return st;
}

static tp_status collect_leaves(const tp_value *v, tp_value *items, int64_t *pos) {
    switch (v->kind) {
    case TP_VAL_NONE: return TP_OK;
    case TP_VAL_TUPLE:
    case TP_VAL_LIST:
    case TP_VAL_DICT:
        for (int64_t i = 0; i < v->u.seq.n; i++) TP_TRY(collect_leaves(&v->u.seq.items[i], items, pos));
        return TP_OK;
    default: return tp_value_copy(v, &items[(*pos)++]);
    }
}

tp_status tp_pytree_flatten(const tp_value *tree, tp_value *leaves, tp_treespec **spec) {
    *leaves = tp_value_none();
    *spec = NULL;
    tp_treespec *s;
    TP_TRY(spec_of(tree, 0, &s));
    tp_value list;
    tp_status st = tp_value_list(s->n_leaves, &list);
    if (st == TP_OK) {
        int64_t pos = 0;
        st = collect_leaves(tree, list.u.seq.items, &pos);
        if (st != TP_OK) tp_value_clear(&list);
    }
    if (st != TP_OK) {
        tp_treespec_free(s);
        return st;
    }
    *leaves = list;
    *spec = s;
    return TP_OK;
}

static tp_status build(const tp_treespec *s, const tp_value *leaves, int64_t *pos, tp_value *out) {
    switch (s->kind) {
    case TP_TREE_LEAF: return tp_value_copy(&leaves[(*pos)++], out);
    case TP_TREE_NONE: *out = tp_value_none(); return TP_OK;
    default: break;
    }
    tp_value r;
    if (s->kind == TP_TREE_DICT) TP_TRY(tp_value_dict(&r));
    else TP_TRY(s->kind == TP_TREE_LIST ? tp_value_list(s->n_children, &r) : tp_value_tuple(s->n_children, &r));
    for (int64_t i = 0; i < s->n_children; i++) {
        tp_value item = tp_value_none();
        tp_status st = build(s->children[i], leaves, pos, &item);
        if (st == TP_OK)
            st = s->kind == TP_TREE_DICT ? tp_value_dict_set(&r, s->keys[i], &item) : tp_value_seq_set(&r, i, &item);
        tp_value_clear(&item);
        if (st != TP_OK) {
            tp_value_clear(&r);
            return st;
        }
    }
    *out = r;
    return TP_OK;
}

tp_status tp_pytree_unflatten(const tp_treespec *spec, const tp_value *leaves, int64_t n_leaves, tp_value *out) {
    *out = tp_value_none();
    TP_CHECK(n_leaves == spec->n_leaves, TP_ERR_INVALID_ARG, "expected %" PRId64 " lea%s, got %" PRId64,
             spec->n_leaves, spec->n_leaves == 1 ? "f" : "ves", n_leaves);
    TP_CHECK(n_leaves == 0 || leaves != NULL, TP_ERR_INVALID_ARG, "leaves is NULL");
    int64_t pos = 0;
    return build(spec, leaves, &pos, out);
}

/* ---- JSON output ------------------------------------------------------------------ */

static void json_string(tp_sb *sb, const char *s) {
    tp__sb_puts(sb, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"') tp__sb_puts(sb, "\\\"");
        else if (c == '\\') tp__sb_puts(sb, "\\\\");
        else if (c == '\n') tp__sb_puts(sb, "\\n");
        else if (c == '\r') tp__sb_puts(sb, "\\r");
        else if (c == '\t') tp__sb_puts(sb, "\\t");
        else if (c < 0x20) tp__sb_printf(sb, "\\u%04x", c);
        else tp__sb_printf(sb, "%c", c);
    }
    tp__sb_puts(sb, "\"");
}

static void json_spec(tp_sb *sb, const tp_treespec *s) {
    tp__sb_printf(sb, "{\"t\":\"%s\"", tp_tree_kind_name(s->kind));
    if (s->kind == TP_TREE_DICT) {
        tp__sb_puts(sb, ",\"ctx\":[");
        for (int64_t i = 0; i < s->n_children; i++) {
            if (i) tp__sb_puts(sb, ",");
            json_string(sb, s->keys[i]);
        }
        tp__sb_puts(sb, "]");
    }
    if (s->kind == TP_TREE_TUPLE || s->kind == TP_TREE_LIST || s->kind == TP_TREE_DICT) {
        tp__sb_puts(sb, ",\"c\":[");
        for (int64_t i = 0; i < s->n_children; i++) {
            if (i) tp__sb_puts(sb, ",");
            json_spec(sb, s->children[i]);
        }
        tp__sb_puts(sb, "]");
    }
    tp__sb_puts(sb, "}");
}

tp_status tp_treespec_to_json(const tp_treespec *spec, char **out) {
    tp_sb sb = {0};
    json_spec(&sb, spec);
    return tp__sb_finish(&sb, out);
}

/* ---- JSON input --------------------------------------------------------------------- */

typedef struct jreader {
    const char *s;
    size_t len, pos;
} jreader;

static tp_status jerr(const jreader *r, const char *what) {
    return tp_error(TP_ERR_CORRUPT, "tree spec JSON: %s at offset %zu", what, r->pos);
}

static void jskip(jreader *r) {
    while (r->pos < r->len &&
           (r->s[r->pos] == ' ' || r->s[r->pos] == '\t' || r->s[r->pos] == '\n' || r->s[r->pos] == '\r'))
        r->pos++;
}

/* Skip whitespace; the next character, or 0 at the end. */
static char jpeek(jreader *r) {
    jskip(r);
    return r->pos < r->len ? r->s[r->pos] : '\0';
}

static tp_status jexpect(jreader *r, char c) {
    if (jpeek(r) != c) {
        char what[48];
        if (r->pos >= r->len) snprintf(what, sizeof what, "expected '%c' but the input ended", c);
        else snprintf(what, sizeof what, "expected '%c'", c);
        return jerr(r, what);
    }
    r->pos++;
    return TP_OK;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool read_hex4(jreader *r, unsigned *out) {
    if (r->len - r->pos < 4) return false;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(r->s[r->pos + (size_t)i]);
        if (h < 0) return false;
        v = v * 16 + (unsigned)h;
    }
    r->pos += 4;
    *out = v;
    return true;
}

/* Parse a JSON string into a new NUL-terminated string (UTF-8). */
static tp_status jstring(jreader *r, char **out) {
    *out = NULL;
    if (jpeek(r) != '"') return jerr(r, r->pos >= r->len ? "expected a string but the input ended" : "expected a string");
    r->pos++;
    /* decoded length <= raw length */
    size_t start = r->pos, end = start;
    while (end < r->len && r->s[end] != '"') end += (r->s[end] == '\\') ? 2 : 1;
    if (end >= r->len) return jerr(r, "unterminated string");
    char *buf = tp_malloc(end - start + 1);
    TP_CHECK(buf != NULL, TP_ERR_NOMEM, "out of memory reading a tree spec");
    size_t o = 0;
    while (r->s[r->pos] != '"') {
        unsigned char c = (unsigned char)r->s[r->pos];
        if (c < 0x20) {
            tp_free(buf);
            return jerr(r, "control character in string");
        }
        if (c != '\\') {
            buf[o++] = (char)c;
            r->pos++;
            continue;
        }
        r->pos++;
        char e = r->s[r->pos++];
        switch (e) {
        case '"': buf[o++] = '"'; break;
        case '\\': buf[o++] = '\\'; break;
        case '/': buf[o++] = '/'; break;
        case 'b': buf[o++] = '\b'; break;
        case 'f': buf[o++] = '\f'; break;
        case 'n': buf[o++] = '\n'; break;
        case 'r': buf[o++] = '\r'; break;
        case 't': buf[o++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (!read_hex4(r, &cp)) {
                tp_free(buf);
                return jerr(r, "bad \\u escape");
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (r->len - r->pos < 2 || r->s[r->pos] != '\\' || r->s[r->pos + 1] != 'u') {
                    tp_free(buf);
                    return jerr(r, "unpaired surrogate in \\u escape");
                }
                r->pos += 2;
                if (!read_hex4(r, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                    tp_free(buf);
                    return jerr(r, "unpaired surrogate in \\u escape");
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                tp_free(buf);
                return jerr(r, "unpaired surrogate in \\u escape");
            }
            if (cp == 0) {
                tp_free(buf);
                return jerr(r, "NUL character in string");
            }
            /* UTF-8: at most 4 bytes, never more than the 6-12 escape bytes read */
            if (cp < 0x80) {
                buf[o++] = (char)cp;
            } else if (cp < 0x800) {
                buf[o++] = (char)(0xC0 | (cp >> 6));
                buf[o++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                buf[o++] = (char)(0xE0 | (cp >> 12));
                buf[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                buf[o++] = (char)(0x80 | (cp & 0x3F));
            } else {
                buf[o++] = (char)(0xF0 | (cp >> 18));
                buf[o++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                buf[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                buf[o++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default:
            r->pos--;
            tp_free(buf);
            return jerr(r, "bad escape in string");
        }
    }
    r->pos++; /* closing quote */
    buf[o] = '\0';
    *out = buf;
    return TP_OK;
}

/* Growable arrays for a node being parsed. */
typedef struct jnode {
    char *t;
    bool has_c, has_ctx;
    tp_treespec **children;
    int64_t n_children, cap_children;
    char **keys;
    int64_t n_keys, cap_keys;
} jnode;

static void jnode_free(jnode *j) {
    tp_free(j->t);
    for (int64_t i = 0; i < j->n_children; i++) tp_treespec_free(j->children[i]);
    tp_free(j->children);
    for (int64_t i = 0; i < j->n_keys; i++) tp_free(j->keys[i]);
    tp_free(j->keys);
}

static bool grow(void **items, int64_t *cap, int64_t n, size_t elem) {
    if (n < *cap) return true;
    int64_t c = *cap ? *cap * 2 : 4;
    void *p = tp_realloc(*items, (size_t)c * elem);
    if (!p) return false;
    *items = p;
    *cap = c;
    return true;
}

static tp_status jspec(jreader *r, int depth, tp_treespec **out);

static tp_status jmember(jreader *r, int depth, const char *key, size_t key_pos, jnode *j) {
    if (strcmp(key, "t") == 0) {
        if (j->t) return jerr(r, "member \"t\" given twice");
        return jstring(r, &j->t);
    }
    bool is_c = strcmp(key, "c") == 0, is_ctx = strcmp(key, "ctx") == 0;
    if (!is_c && !is_ctx) {
        size_t save = r->pos;
        r->pos = key_pos;
        char what[96];
        snprintf(what, sizeof what, "unknown member \"%.40s\"", key);
        tp_status st = jerr(r, what);
        r->pos = save;
        return st;
    }
    if ((is_c && j->has_c) || (is_ctx && j->has_ctx)) return jerr(r, is_c ? "member \"c\" given twice" : "member \"ctx\" given twice");
    if (is_c) j->has_c = true;
    else j->has_ctx = true;
    TP_TRY(jexpect(r, '['));
    if (jpeek(r) == ']') {
        r->pos++;
        return TP_OK;
    }
    for (;;) {
        if (is_c) {
            if (!grow((void **)&j->children, &j->cap_children, j->n_children, sizeof *j->children))
                return tp_error(TP_ERR_NOMEM, "out of memory reading a tree spec");
            tp_treespec *child;
            TP_TRY(jspec(r, depth + 1, &child));
            j->children[j->n_children++] = child;
        } else {
            if (!grow((void **)&j->keys, &j->cap_keys, j->n_keys, sizeof *j->keys))
                return tp_error(TP_ERR_NOMEM, "out of memory reading a tree spec");
            size_t key_start = r->pos;
            char *k;
            TP_TRY(jstring(r, &k));
            for (int64_t i = 0; i < j->n_keys; i++) {
                if (strcmp(j->keys[i], k) == 0) {
                    tp_free(k);
                    r->pos = key_start;
                    jskip(r);
                    return jerr(r, "duplicate dict key in \"ctx\"");
                }
            }
            j->keys[j->n_keys++] = k;
        }
        char c = jpeek(r);
        if (c == ',') {
            r->pos++;
            continue;
        }
        if (c == ']') {
            r->pos++;
            return TP_OK;
        }
        return jerr(r, r->pos >= r->len ? "expected ',' or ']' but the input ended" : "expected ',' or ']'");
    }
}

static tp_status jspec(jreader *r, int depth, tp_treespec **out) {
    if (depth >= TP_TREE_MAX_DEPTH) return jerr(r, "specs nested too deeply");
    size_t start = r->pos;
    TP_TRY(jexpect(r, '{'));
    jnode j = {0};
    tp_status st = TP_OK;
    if (jpeek(r) == '}') {
        r->pos++;
    } else {
        for (;;) {
            jskip(r);
            size_t key_pos = r->pos;
            char *key = NULL;
            st = jstring(r, &key);
            if (st == TP_OK) st = jexpect(r, ':');
            if (st == TP_OK) st = jmember(r, depth, key, key_pos, &j);
            tp_free(key);
            if (st != TP_OK) break;
            char c = jpeek(r);
            if (c == ',') {
                r->pos++;
                continue;
            }
            if (c == '}') {
                r->pos++;
                break;
            }
            st = jerr(r, r->pos >= r->len ? "expected ',' or '}' but the input ended" : "expected ',' or '}'");
            break;
        }
    }
    if (st == TP_OK) {
        size_t end = r->pos;
        r->pos = start; /* report structural problems at the object's start */
        tp_tree_kind kind = TP_TREE_LEAF;
        bool known = false;
        for (int k = 0; j.t && k < (int)TP_ARRAY_LEN(tree_kind_names); k++) {
            if (strcmp(j.t, tree_kind_names[k]) == 0) {
                kind = (tp_tree_kind)k;
                known = true;
            }
        }
        if (!j.t) st = jerr(r, "spec object lacks member \"t\"");
        else if (!known) {
            char what[96];
            snprintf(what, sizeof what, "unknown spec kind \"%.40s\"", j.t);
            st = jerr(r, what);
        } else if (kind == TP_TREE_LEAF || kind == TP_TREE_NONE) {
            if (j.has_c || j.has_ctx) st = jerr(r, "leaf and none specs take no \"c\" or \"ctx\"");
            else st = spec_simple(kind, out);
        } else if (!j.has_c) {
            st = jerr(r, "container spec lacks member \"c\"");
        } else if (kind != TP_TREE_DICT && j.has_ctx) {
            st = jerr(r, "only dict specs take \"ctx\"");
        } else if (kind == TP_TREE_DICT && !j.has_ctx) {
            st = jerr(r, "dict spec lacks member \"ctx\"");
        } else if (kind == TP_TREE_DICT && j.n_keys != j.n_children) {
            char what[96];
            snprintf(what, sizeof what, "dict spec has %" PRId64 " keys but %" PRId64 " children", j.n_keys,
                     j.n_children);
            st = jerr(r, what);
        } else {
            st = tp_treespec_new(kind, j.children, j.n_children, (const char *const *)j.keys, out);
            j.n_children = 0; /* taken over (or freed) by tp_treespec_new */
        }
        if (st == TP_OK) r->pos = end;
    }
    jnode_free(&j);
    return st;
}

tp_status tp_treespec_from_json(const char *json, size_t len, tp_treespec **out) {
    *out = NULL;
    TP_CHECK(json != NULL || len == 0, TP_ERR_INVALID_ARG, "json is NULL");
    jreader r = {.s = json, .len = len, .pos = 0};
    tp_treespec *s;
    if (len == 0) return jerr(&r, "empty input");
    TP_TRY(jspec(&r, 0, &s));
    jskip(&r);
    if (r.pos != r.len) {
        tp_treespec_free(s);
        return jerr(&r, "trailing data after the spec");
    }
    *out = s;
    return TP_OK;
}

/* ---- repr ----------------------------------------------------------------------------- */

static void py_str(tp_sb *sb, const char *s) {
    char q = (strchr(s, '\'') && !strchr(s, '"')) ? '"' : '\'';
    tp__sb_printf(sb, "%c", q);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\' || c == (unsigned char)q) tp__sb_printf(sb, "\\%c", c);
        else if (c == '\n') tp__sb_puts(sb, "\\n");
        else if (c == '\r') tp__sb_puts(sb, "\\r");
        else if (c == '\t') tp__sb_puts(sb, "\\t");
        else if (c < 0x20 || c == 0x7f) tp__sb_printf(sb, "\\x%02x", c);
        else tp__sb_printf(sb, "%c", c);
    }
    tp__sb_printf(sb, "%c", q);
}

/* torch.utils._pytree.TreeSpec.__repr__ */
static void repr_spec(tp_sb *sb, const tp_treespec *s, int indent) {
    if (s->kind == TP_TREE_LEAF) {
        tp__sb_puts(sb, "*");
        return;
    }
    static const char *const type_names[] = {"*", "NoneType", "tuple", "list", "dict"};
    tp__sb_printf(sb, "TreeSpec(%s, ", type_names[s->kind]);
    if (s->kind == TP_TREE_DICT) {
        tp__sb_puts(sb, "[");
        for (int64_t i = 0; i < s->n_children; i++) {
            if (i) tp__sb_puts(sb, ", ");
            py_str(sb, s->keys[i]);
        }
        tp__sb_puts(sb, "]");
    } else {
        tp__sb_puts(sb, "None");
    }
    tp__sb_puts(sb, ", [");
    if (s->n_children > 0) {
        indent += 2;
        repr_spec(sb, s->children[0], indent);
        for (int64_t i = 1; i < s->n_children; i++) {
            tp__sb_printf(sb, ",\n%*s", indent, "");
            repr_spec(sb, s->children[i], indent);
        }
    }
    tp__sb_puts(sb, "])");
}

tp_status tp_treespec_repr(const tp_treespec *spec, char **out) {
    tp_sb sb = {0};
    repr_spec(&sb, spec, 0);
    return tp__sb_finish(&sb, out);
}
