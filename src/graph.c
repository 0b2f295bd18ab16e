/*
 * graph.c - the graph IR (see graph.h): nodes in a doubly linked list,
 * fx-style unique names kept in a hash map, use lists maintained on every
 * mutation, creation with schema binding and shape inference, copying,
 * inlining, lint and dead-code elimination.
 *
 * Invariants (checked by tp_graph_lint):
 *  - node->inputs lists the distinct nodes referenced by args then kwargs,
 *    in order of first appearance; node->users lists the nodes whose inputs
 *    contain node, in the order they started using it;
 *  - g->names indexes every node by name (names unique).
 */
#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "graph_impl.h"

/* Values nested deeper than this are refused in node arguments and meta,
 * so that the recursive walks below are bounded. */
#define TP_GRAPH_MAX_VALUE_DEPTH 64

/* ---- kinds ----------------------------------------------------------------- */

static const char *const kind_names[TP_NODE_KIND_COUNT] = {"placeholder", "get_attr", "call_function",
                                                           "call_method", "output"};

const char *tp_node_kind_name(tp_node_kind kind) {
    return (unsigned)kind < TP_NODE_KIND_COUNT ? kind_names[kind] : "?";
}

tp_status tp_node_kind_from_name(const char *name, tp_node_kind *out) {
    for (int k = 0; k < TP_NODE_KIND_COUNT; k++) {
        if (name && strcmp(name, kind_names[k]) == 0) {
            *out = (tp_node_kind)k;
            return TP_OK;
        }
    }
    return tp_error(TP_ERR_NOT_FOUND, "unknown node kind '%s'", name ? name : "(null)");
}

/* ---- string map -------------------------------------------------------------- */

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

static tp__name_slot *map_find(const tp__name_map *m, const char *key) {
    if (!m->cap) return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)hash_str(key) & mask;; i = (i + 1) & mask) {
        if (!m->slots[i].key) return NULL;
        if (strcmp(m->slots[i].key, key) == 0) return &m->slots[i];
    }
}

/* Make room for `extra` more entries (load factor <= 1/2). */
static tp_status map_reserve(tp__name_map *m, size_t extra) {
    size_t need = m->count + extra;
    if (need * 2 <= m->cap) return TP_OK;
    size_t cap = m->cap ? m->cap : 16;
    while (need * 2 > cap) {
        TP_CHECK(cap <= SIZE_MAX / 4, TP_ERR_NOMEM, "name table too large");
        cap *= 2;
    }
    tp__name_slot *slots = tp_calloc(cap, sizeof *slots);
    TP_CHECK(slots != NULL, TP_ERR_NOMEM, "out of memory growing a name table");
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].key) continue;
        size_t j = (size_t)hash_str(m->slots[i].key) & (cap - 1);
        while (slots[j].key) j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    tp_free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return TP_OK;
}

/* Insert (key must be absent; room must have been reserved). */
static void map_insert(tp__name_map *m, char *key, tp_node *node, int64_t count) {
    size_t mask = m->cap - 1, i = (size_t)hash_str(key) & mask;
    while (m->slots[i].key) i = (i + 1) & mask;
    m->slots[i] = (tp__name_slot){.key = key, .node = node, .count = count};
    m->count++;
}

/* Remove `key` if present (backward-shift deletion keeps probe chains). */
static void map_remove(tp__name_map *m, const char *key) {
    tp__name_slot *s = map_find(m, key);
    if (!s) return;
    size_t mask = m->cap - 1, i = (size_t)(s - m->slots), j = i;
    if (m->own_keys) tp_free(s->key);
    for (;;) {
        j = (j + 1) & mask;
        if (!m->slots[j].key) break;
        size_t k = (size_t)hash_str(m->slots[j].key) & mask;
        /* move j into the hole at i unless its home k lies cyclically in (i, j] */
        bool in_range = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
        if (!in_range) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i] = (tp__name_slot){0};
    m->count--;
}

static void map_free(tp__name_map *m) {
    if (m->own_keys)
        for (size_t i = 0; i < m->cap; i++) tp_free(m->slots[i].key);
    tp_free(m->slots);
    *m = (tp__name_map){.own_keys = m->own_keys};
}

/* ---- names ----------------------------------------------------------------------- */

/* Python keywords, builtins and torch.fx's custom builtins: names a node may
 * not take, so that the printed code is valid Python (as in torch.fx). */
static const char *const reserved_names[] = {
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in",
    "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
    "abs", "all", "any", "ascii", "bin", "bool", "breakpoint", "bytearray", "bytes", "callable", "chr",
    "classmethod", "compile", "complex", "delattr", "dict", "dir", "divmod", "enumerate", "eval",
    "exec", "exit", "filter", "float", "format", "frozenset", "getattr", "globals", "hasattr", "hash",
    "help", "hex", "id", "input", "int", "isinstance", "issubclass", "iter", "len", "list", "locals",
    "map", "max", "memoryview", "min", "next", "object", "oct", "open", "ord", "pow", "print",
    "property", "quit", "range", "repr", "reversed", "round", "set", "setattr", "slice", "sorted",
    "staticmethod", "str", "sum", "super", "tuple", "type", "vars", "zip", "inf", "nan", "NoneType",
    "torch", "device", "fx_pytree", "pytree", "self"};

static bool is_reserved(const char *name) {
    for (size_t i = 0; i < TP_ARRAY_LEN(reserved_names); i++)
        if (strcmp(name, reserved_names[i]) == 0) return true;
    return false;
}

/* torch.fx's _snake_case: "fooBar" -> "foo_bar" (new string). */
static char *snake_case(const char *s) {
    size_t n = strlen(s);
    char *out = tp_malloc(2 * n + 1);
    if (!out) return NULL;
    size_t o = 0;
    bool prev_lower = false;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (prev_lower && isupper(c)) out[o++] = '_';
        out[o++] = (char)tolower(c);
        prev_lower = islower(c) != 0;
    }
    out[o] = '\0';
    return out;
}

static bool ident_char(unsigned char c) { return isalnum(c) || c == '_'; }

/* Runs of non-identifier characters -> '_', leading digit -> '_' prefix,
 * empty -> "_unnamed" (new string). */
static char *sanitize_name(const char *hint) {
    if (!hint || !*hint) return tp_strdup("_unnamed");
    size_t n = strlen(hint);
    char *out = tp_malloc(n + 2);
    if (!out) return NULL;
    size_t o = 0;
    if (isdigit((unsigned char)hint[0])) out[o++] = '_';
    for (size_t i = 0; i < n;) {
        if (ident_char((unsigned char)hint[i])) {
            out[o++] = hint[i++];
        } else {
            out[o++] = '_';
            while (i < n && !ident_char((unsigned char)hint[i])) i++;
        }
    }
    out[o] = '\0';
    return out;
}

/* Split "base_123" into base length and number (fx's (.*)_(\d+)$). Returns
 * false when there is no numeric suffix (or it is too long to be an int). */
static bool split_suffix(const char *name, size_t *base_len, int64_t *num) {
    size_t n = strlen(name), d = n;
    while (d > 0 && isdigit((unsigned char)name[d - 1])) d--;
    if (d == n || d == 0 || name[d - 1] != '_' || n - d > 18) return false;
    *base_len = d - 1;
    *num = strtoll(name + d, NULL, 10);
    return true;
}

static bool name_taken(const tp_graph *g, const char *name) {
    return map_find(&g->names, name) != NULL || is_reserved(name);
}

/* fx's _Namespace.create_name without reserving: *out is a new string;
 * *base_out (new string) and *num_out report the base and suffix used. */
static tp_status derive_name(const tp_graph *g, const char *hint, bool snake, char **out, char **base_out,
                             int64_t *num_out) {
    char *tmp = NULL;
    if (snake && hint) {
        tmp = snake_case(hint);
        TP_CHECK(tmp != NULL, TP_ERR_NOMEM, "out of memory deriving a node name");
        hint = tmp;
    }
    char *cand = sanitize_name(hint);
    tp_free(tmp);
    TP_CHECK(cand != NULL, TP_ERR_NOMEM, "out of memory deriving a node name");
    size_t base_len = strlen(cand);
    int64_t num = 0;
    bool has_num = split_suffix(cand, &base_len, &num);
    char *base = tp_malloc(base_len + 1);
    char *name = tp_malloc(base_len + 32);
    if (!base || !name) {
        tp_free(cand);
        tp_free(base);
        tp_free(name);
        return tp_error(TP_ERR_NOMEM, "out of memory deriving a node name");
    }
    memcpy(base, cand, base_len);
    base[base_len] = '\0';
    tp_free(cand);
    if (has_num) snprintf(name, base_len + 32, "%s_%" PRId64, base, num);
    else memcpy(name, base, base_len + 1);
    if (!has_num || num == 0) {
        const tp__name_slot *s = map_find(&g->bases, base);
        num = s ? s->count : 0;
    }
    while (name_taken(g, name)) {
        num++;
        snprintf(name, base_len + 32, "%s_%" PRId64, base, num);
    }
    *out = name;
    if (base_out) *base_out = base;
    else tp_free(base);
    if (num_out) *num_out = num;
    return TP_OK;
}

tp_status tp_graph_make_name(const tp_graph *g, const char *hint, char **out) {
    return derive_name(g, hint, false, out, NULL, NULL);
}

/* A name to assign to a node: `name` exactly when `exact` and it is free,
 * else derived. Returns the new name, its base (owned) and number; the map
 * entries are added by commit_name. */
typedef struct pending_name {
    char *name;
    char *base;
    int64_t num;
} pending_name;

static tp_status prepare_name(tp_graph *g, const char *hint, bool snake, bool exact, pending_name *p) {
    *p = (pending_name){0};
    if (exact && hint && *hint && !map_find(&g->names, hint)) {
        p->name = tp_strdup(hint);
        TP_CHECK(p->name != NULL, TP_ERR_NOMEM, "out of memory copying a node name");
        size_t base_len = strlen(hint);
        int64_t num = 0;
        if (!split_suffix(hint, &base_len, &num)) num = 0;
        p->base = tp_malloc(base_len + 1);
        if (!p->base) {
            tp_free(p->name);
            p->name = NULL;
            return tp_error(TP_ERR_NOMEM, "out of memory copying a node name");
        }
        memcpy(p->base, hint, base_len);
        p->base[base_len] = '\0';
        p->num = num;
    } else {
        TP_TRY(derive_name(g, hint, snake, &p->name, &p->base, &p->num));
    }
    tp_status st = map_reserve(&g->names, 1);
    if (st == TP_OK) st = map_reserve(&g->bases, 1);
    if (st != TP_OK) {
        tp_free(p->name);
        tp_free(p->base);
        *p = (pending_name){0};
    }
    return st;
}

/* Index node under p->name (moved into the node) and record the base
 * counter. Cannot fail (room reserved by prepare_name). */
static void commit_name(tp_graph *g, tp_node *n, pending_name *p) {
    n->name = p->name;
    map_insert(&g->names, n->name, n, 0);
    tp__name_slot *s = map_find(&g->bases, p->base);
    if (s) {
        if (p->num > s->count) s->count = p->num;
        tp_free(p->base);
    } else {
        map_insert(&g->bases, p->base, NULL, p->num);
    }
    *p = (pending_name){0};
}

static void discard_name(pending_name *p) {
    tp_free(p->name);
    tp_free(p->base);
    *p = (pending_name){0};
}

/* ---- graph lifetime and iteration ----------------------------------------------- */

tp_status tp_graph_new(tp_graph **out) {
    tp_graph *g = tp_calloc(1, sizeof *g);
    TP_CHECK(g != NULL, TP_ERR_NOMEM, "out of memory allocating a graph");
    g->bases.own_keys = true;
    *out = g;
    return TP_OK;
}

static void node_free(tp_node *n) {
    if (!n) return;
    tp_free(n->name);
    tp_free(n->target);
    tp_value_clear(&n->args);
    tp_value_clear(&n->kwargs);
    tp_value_clear(&n->meta_val);
    tp_value_clear(&n->meta);
    tp_free(n->users);
    tp_free(n->inputs);
    tp_free(n);
}

void tp_graph_free(tp_graph *g) {
    if (!g) return;
    tp_node *n = g->first;
    while (n) {
        tp_node *next = n->next;
        node_free(n);
        n = next;
    }
    map_free(&g->names);
    map_free(&g->bases);
    tp_free(g->placeholders);
    tp_free(g);
}

int64_t tp_graph_num_nodes(const tp_graph *g) { return g ? g->n_nodes : 0; }
tp_node *tp_graph_first_node(const tp_graph *g) { return g ? g->first : NULL; }
tp_node *tp_graph_last_node(const tp_graph *g) { return g ? g->last : NULL; }
tp_node *tp_node_next(const tp_node *n) { return n ? n->next : NULL; }
tp_node *tp_node_prev(const tp_node *n) { return n ? n->prev : NULL; }

tp_node *tp_graph_find_node(const tp_graph *g, const char *name) {
    if (!g || !name) return NULL;
    const tp__name_slot *s = map_find(&g->names, name);
    return s ? s->node : NULL;
}

tp_node *tp_graph_output_node(const tp_graph *g) {
    for (tp_node *n = g ? g->last : NULL; n; n = n->prev)
        if (n->kind == TP_NODE_OUTPUT) return n;
    return NULL;
}

int64_t tp_graph_num_placeholders(const tp_graph *g) { return g ? g->n_placeholders : 0; }

tp_node *tp_graph_placeholder_at(const tp_graph *g, int64_t i) {
    return g && i >= 0 && i < g->n_placeholders ? g->placeholders[i] : NULL;
}

/* ---- node accessors -------------------------------------------------------------- */

tp_graph *tp_node_graph(const tp_node *n) { return n->graph; }
const char *tp_node_name(const tp_node *n) { return n ? n->name : "(null)"; }
tp_node_kind tp_node_get_kind(const tp_node *n) { return n->kind; }
const char *tp_node_target(const tp_node *n) { return n->target; }
tp_op tp_node_op(const tp_node *n) { return n->op; }
const tp_value *tp_node_args(const tp_node *n) { return &n->args; }
const tp_value *tp_node_kwargs(const tp_node *n) { return &n->kwargs; }
int64_t tp_node_num_users(const tp_node *n) { return n->n_users; }
tp_node *tp_node_user(const tp_node *n, int64_t i) { return i >= 0 && i < n->n_users ? n->users[i] : NULL; }
int64_t tp_node_num_inputs(const tp_node *n) { return n->n_inputs; }
tp_node *tp_node_input(const tp_node *n, int64_t i) { return i >= 0 && i < n->n_inputs ? n->inputs[i] : NULL; }
unsigned tp_node_flags(const tp_node *n) { return n->flags; }
void tp_node_set_flags(tp_node *n, unsigned flags) { n->flags = flags; }

bool tp_node_is_impure(const tp_node *n) {
    if (n->flags & TP_NODE_IMPURE) return true;
    switch (n->kind) {
    case TP_NODE_PLACEHOLDER:
    case TP_NODE_OUTPUT: return true;
    case TP_NODE_GET_ATTR: return false;
    case TP_NODE_CALL_FUNCTION:
    case TP_NODE_CALL_METHOD:
        if (n->op == TP_OP_INVALID) return true;
        return (tp_op_flags(n->op) & (TP_OPF_EFFECTFUL | TP_OPF_MUTATES | TP_OPF_INPLACE)) != 0;
    default: return true;
    }
}

/* ---- value checks and walks ------------------------------------------------------- */

/* Check an argument value: no tensors, nodes belong to g, bounded depth. */
static tp_status check_arg_value(const tp_graph *g, const tp_value *v, int depth, const char *what) {
    TP_CHECK(depth < TP_GRAPH_MAX_VALUE_DEPTH, TP_ERR_INVALID_ARG, "%s are nested more than %d deep", what,
             TP_GRAPH_MAX_VALUE_DEPTH);
    switch (v->kind) {
    case TP_VAL_TENSOR:
        return tp_error(TP_ERR_TYPE,
                        "%s hold a Tensor; graphs reach tensors through placeholder or get_attr nodes", what);
    case TP_VAL_NODE:
        TP_CHECK(v->u.node != NULL, TP_ERR_INVALID_ARG, "%s hold a NULL node reference", what);
        TP_CHECK(v->u.node->graph == g, TP_ERR_INVALID_ARG, "%s reference node %s of another graph", what,
                 v->u.node->name);
        return TP_OK;
    case TP_VAL_LIST:
    case TP_VAL_TUPLE:
    case TP_VAL_DICT:
        for (int64_t i = 0; i < v->u.seq.n; i++) TP_TRY(check_arg_value(g, &v->u.seq.items[i], depth + 1, what));
        return TP_OK;
    default: return TP_OK;
    }
}

/* Check a meta value: no node references, bounded depth; tensors allowed
 * only when allow_tensors. */
static tp_status check_meta_value(const tp_value *v, int depth, bool allow_tensors) {
    TP_CHECK(depth < TP_GRAPH_MAX_VALUE_DEPTH, TP_ERR_INVALID_ARG, "meta value nested more than %d deep",
             TP_GRAPH_MAX_VALUE_DEPTH);
    switch (v->kind) {
    case TP_VAL_NODE: return tp_error(TP_ERR_TYPE, "meta values cannot hold node references");
    case TP_VAL_TENSOR:
        TP_CHECK(allow_tensors, TP_ERR_TYPE, "meta entries cannot hold tensors (only meta[\"val\"] can)");
        return TP_OK;
    case TP_VAL_LIST:
    case TP_VAL_TUPLE:
    case TP_VAL_DICT:
        for (int64_t i = 0; i < v->u.seq.n; i++) TP_TRY(check_meta_value(&v->u.seq.items[i], depth + 1, allow_tensors));
        return TP_OK;
    default: return TP_OK;
    }
}

/* Copy a meta value, storing tensors as meta tensors. */
static tp_status meta_copy(const tp_value *src, tp_value *dst) {
    if (src->kind == TP_VAL_TENSOR) {
        const tp_tensor *t = src->u.tensor;
        tp_tensor *m;
        if (tp_tensor_is_meta(t)) m = tp_tensor_retain((tp_tensor *)t);
        else TP_TRY(tp_tensor_meta(t->dtype, t->ndim, t->sizes, &m));
        *dst = tp_value_tensor(m);
        return TP_OK;
    }
    if (src->kind == TP_VAL_LIST || src->kind == TP_VAL_TUPLE || src->kind == TP_VAL_DICT) {
        tp_value r;
        if (src->kind == TP_VAL_DICT) TP_TRY(tp_value_dict(&r));
        else TP_TRY(src->kind == TP_VAL_LIST ? tp_value_list(src->u.seq.n, &r) : tp_value_tuple(src->u.seq.n, &r));
        for (int64_t i = 0; i < src->u.seq.n; i++) {
            tp_value item = tp_value_none();
            tp_status st = meta_copy(&src->u.seq.items[i], &item);
            if (st == TP_OK) {
                st = src->kind == TP_VAL_DICT ? tp_value_dict_set(&r, src->u.seq.keys[i], &item)
                                              : tp_value_seq_set(&r, i, &item);
            }
            tp_value_clear(&item);
            if (st != TP_OK) {
                tp_value_clear(&r);
                return st;
            }
        }
        *dst = r;
        return TP_OK;
    }
    return tp_value_copy(src, dst);
}

/* A growable array of node pointers. */
typedef struct node_vec {
    tp_node **items;
    int64_t n, cap;
} node_vec;

static bool vec_contains(const node_vec *v, const tp_node *node) {
    for (int64_t i = 0; i < v->n; i++)
        if (v->items[i] == node) return true;
    return false;
}

static tp_status vec_push(node_vec *v, tp_node *node) {
    if (v->n == v->cap) {
        int64_t cap = v->cap ? v->cap * 2 : 4;
        tp_node **items = tp_realloc(v->items, (size_t)cap * sizeof *items);
        TP_CHECK(items != NULL, TP_ERR_NOMEM, "out of memory growing a node list");
        v->items = items;
        v->cap = cap;
    }
    v->items[v->n++] = node;
    return TP_OK;
}

/* Append the distinct nodes referenced in v (in order) to `vec`. */
static tp_status collect_nodes(const tp_value *v, node_vec *vec) {
    if (v->kind == TP_VAL_NODE) {
        if (!vec_contains(vec, v->u.node)) TP_TRY(vec_push(vec, v->u.node));
    } else if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE || v->kind == TP_VAL_DICT) {
        for (int64_t i = 0; i < v->u.seq.n; i++) TP_TRY(collect_nodes(&v->u.seq.items[i], vec));
    }
    return TP_OK;
}

static tp_status collect_inputs(const tp_value *args, const tp_value *kwargs, node_vec *vec) {
    *vec = (node_vec){0};
    tp_status st = collect_nodes(args, vec);
    if (st == TP_OK) st = collect_nodes(kwargs, vec);
    if (st != TP_OK) {
        tp_free(vec->items);
        *vec = (node_vec){0};
    }
    return st;
}

/* Replace references to `from` by `to` in place; returns how many. */
static int64_t replace_refs(tp_value *v, const tp_node *from, tp_node *to) {
    if (v->kind == TP_VAL_NODE) {
        if (v->u.node != from) return 0;
        v->u.node = to;
        return 1;
    }
    int64_t count = 0;
    if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE || v->kind == TP_VAL_DICT)
        for (int64_t i = 0; i < v->u.seq.n; i++) count += replace_refs(&v->u.seq.items[i], from, to);
    return count;
}

tp_status tp__value_substitute(const tp_value *src, tp__node_lookup lookup, void *ctx, tp_value *dst) {
    *dst = tp_value_none();
    switch (src->kind) {
    case TP_VAL_NODE: {
        const tp_value *rep = NULL;
        TP_TRY(lookup(ctx, src->u.node, &rep));
        if (!rep) {
            *dst = *src;
            return TP_OK;
        }
        return tp_value_copy(rep, dst);
    }
    case TP_VAL_LIST:
    case TP_VAL_TUPLE:
    case TP_VAL_DICT: {
        tp_value r;
        if (src->kind == TP_VAL_DICT) TP_TRY(tp_value_dict(&r));
        else TP_TRY(src->kind == TP_VAL_LIST ? tp_value_list(src->u.seq.n, &r) : tp_value_tuple(src->u.seq.n, &r));
        for (int64_t i = 0; i < src->u.seq.n; i++) {
            tp_value item;
            tp_status st = tp__value_substitute(&src->u.seq.items[i], lookup, ctx, &item);
            if (st == TP_OK) {
                st = src->kind == TP_VAL_DICT ? tp_value_dict_set(&r, src->u.seq.keys[i], &item)
                                              : tp_value_seq_set(&r, i, &item);
                tp_value_clear(&item);
            }
            if (st != TP_OK) {
                tp_value_clear(&r);
                return st;
            }
        }
        *dst = r;
        return TP_OK;
    }
    default: return tp_value_copy(src, dst);
    }
}

/* ---- use lists ---------------------------------------------------------------------- */

/* Ensure `input` can take one more user without allocating. */
static tp_status reserve_user(tp_node *input) {
    if (input->n_users < input->cap_users) return TP_OK;
    int64_t cap = input->cap_users ? input->cap_users * 2 : 4;
    tp_node **users = tp_realloc(input->users, (size_t)cap * sizeof *users);
    TP_CHECK(users != NULL, TP_ERR_NOMEM, "out of memory growing the users of node %s", input->name);
    input->users = users;
    input->cap_users = cap;
    return TP_OK;
}

static bool has_user(const tp_node *input, const tp_node *user) {
    for (int64_t i = 0; i < input->n_users; i++)
        if (input->users[i] == user) return true;
    return false;
}

/* Add user (room reserved; no-op if present). */
static void add_user(tp_node *input, tp_node *user) {
    if (!has_user(input, user)) input->users[input->n_users++] = user;
}

static void remove_user(tp_node *input, const tp_node *user) {
    for (int64_t i = 0; i < input->n_users; i++) {
        if (input->users[i] == user) {
            memmove(&input->users[i], &input->users[i + 1], (size_t)(input->n_users - i - 1) * sizeof(tp_node *));
            input->n_users--;
            return;
        }
    }
}

/* Normalise args (NULL/tuple/list -> new tuple) and kwargs (NULL/dict ->
 * new dict), checking contents. */
static tp_status prepare_args(const tp_graph *g, const tp_value *args, const tp_value *kwargs, tp_value *out_args,
                              tp_value *out_kwargs, const char *what) {
    *out_args = tp_value_none();
    *out_kwargs = tp_value_none();
    TP_CHECK(!args || args->kind == TP_VAL_TUPLE || args->kind == TP_VAL_LIST || args->kind == TP_VAL_NONE,
             TP_ERR_TYPE, "args of %s must be a tuple or list, not %s", what, tp_value_kind_name(args->kind));
    TP_CHECK(!kwargs || kwargs->kind == TP_VAL_DICT || kwargs->kind == TP_VAL_NONE, TP_ERR_TYPE,
             "kwargs of %s must be a dict, not %s", what, tp_value_kind_name(kwargs->kind));
    char where[256];
    snprintf(where, sizeof where, "args of %s", what);
    if (args && args->kind != TP_VAL_NONE) TP_TRY(check_arg_value(g, args, 0, where));
    snprintf(where, sizeof where, "kwargs of %s", what);
    if (kwargs && kwargs->kind != TP_VAL_NONE) TP_TRY(check_arg_value(g, kwargs, 0, where));
    int64_t n = args ? tp_value_len(args) : 0;
    TP_TRY(tp_value_tuple(n, out_args));
    tp_status st = TP_OK;
    for (int64_t i = 0; i < n && st == TP_OK; i++) st = tp_value_copy(&args->u.seq.items[i], &out_args->u.seq.items[i]);
    if (st == TP_OK) {
        if (kwargs && kwargs->kind == TP_VAL_DICT) st = tp_value_copy(kwargs, out_kwargs);
        else st = tp_value_dict(out_kwargs);
    }
    if (st != TP_OK) {
        tp_value_clear(out_args);
        tp_value_clear(out_kwargs);
    }
    return st;
}

/* Install new args/kwargs (taken over) on n, updating inputs and use lists.
 * On error nothing changes and the new values are cleared. */
static tp_status install_args(tp_node *n, tp_value *args, tp_value *kwargs) {
    n->graph->version++;
    node_vec in;
    tp_status st = collect_inputs(args, kwargs, &in);
    for (int64_t i = 0; st == TP_OK && i < in.n; i++) st = reserve_user(in.items[i]);
    if (st != TP_OK) {
        tp_free(in.items);
        tp_value_clear(args);
        tp_value_clear(kwargs);
        return st;
    }
    for (int64_t i = 0; i < n->n_inputs; i++)
        if (!vec_contains(&in, n->inputs[i])) remove_user(n->inputs[i], n);
    for (int64_t i = 0; i < in.n; i++) add_user(in.items[i], n);
    tp_free(n->inputs);
    n->inputs = in.items;
    n->n_inputs = in.n;
    tp_value_move(&n->args, args);
    tp_value_move(&n->kwargs, kwargs);
    return TP_OK;
}

/* ---- linking ------------------------------------------------------------------------- */

/* Rebuild the placeholder array after a placeholder was linked, unlinked
 * or moved (room for every placeholder was reserved at creation). */
static void refresh_placeholders(tp_graph *g) {
    int64_t count = 0;
    for (tp_node *n = g->first; n; n = n->next)
        if (n->kind == TP_NODE_PLACEHOLDER && count < g->cap_placeholders) g->placeholders[count++] = n;
    g->n_placeholders = count;
}

static tp_status reserve_placeholder(tp_graph *g) {
    if (g->n_placeholders < g->cap_placeholders) return TP_OK;
    int64_t cap = g->cap_placeholders ? g->cap_placeholders * 2 : 8;
    tp_node **p = tp_realloc(g->placeholders, (size_t)cap * sizeof *p);
    TP_CHECK(p != NULL, TP_ERR_NOMEM, "out of memory growing the placeholder list");
    g->placeholders = p;
    g->cap_placeholders = cap;
    return TP_OK;
}

static void link_before(tp_graph *g, tp_node *n, tp_node *before) {
    g->version++;
    if (!before) {
        n->prev = g->last;
        n->next = NULL;
        if (g->last) g->last->next = n;
        else g->first = n;
        g->last = n;
    } else {
        n->next = before;
        n->prev = before->prev;
        if (before->prev) before->prev->next = n;
        else g->first = n;
        before->prev = n;
    }
    g->n_nodes++;
    if (n->kind == TP_NODE_PLACEHOLDER) refresh_placeholders(g);
}

static void unlink_node(tp_graph *g, tp_node *n) {
    g->version++;
    if (g->insert_before == n) g->insert_before = n->next;
    if (n->prev) n->prev->next = n->next;
    else g->first = n->next;
    if (n->next) n->next->prev = n->prev;
    else g->last = n->prev;
    n->prev = n->next = NULL;
    g->n_nodes--;
    if (n->kind == TP_NODE_PLACEHOLDER) refresh_placeholders(g);
}

tp_status tp_graph_set_insert_point(tp_graph *g, tp_node *before) {
    TP_CHECK(!before || before->graph == g, TP_ERR_INVALID_ARG, "insertion point %s belongs to another graph",
             before->name);
    g->insert_before = before;
    return TP_OK;
}

tp_status tp_graph_insert_after(tp_graph *g, tp_node *after) {
    TP_CHECK(after != NULL, TP_ERR_INVALID_ARG, "insert_after needs a node");
    TP_CHECK(after->graph == g, TP_ERR_INVALID_ARG, "insertion point %s belongs to another graph", after->name);
    g->insert_before = after->next;
    return TP_OK;
}

tp_node *tp_graph_insert_point(const tp_graph *g) { return g->insert_before; }

/* ---- creation ---------------------------------------------------------------------------- */

typedef struct node_spec {
    tp_node_kind kind;
    const char *target;
    tp_op op;
    const tp_value *args, *kwargs;
    const char *name; /* NULL/"": derived from target (snake_case) */
    bool exact_name;  /* keep `name` as is when free */
} node_spec;

static tp_status node_create(tp_graph *g, const node_spec *spec, tp_node **out) {
    char what[160];
    snprintf(what, sizeof what, "new %s node %.100s", tp_node_kind_name(spec->kind), spec->target);
    tp_node *n = tp_calloc(1, sizeof *n);
    TP_CHECK(n != NULL, TP_ERR_NOMEM, "out of memory allocating a node");
    n->graph = g;
    n->kind = spec->kind;
    n->op = spec->op;
    n->args = n->kwargs = n->meta_val = n->meta = tp_value_none();
    tp_value args, kwargs;
    pending_name pn = {0};
    tp_status st = prepare_args(g, spec->args, spec->kwargs, &args, &kwargs, what);
    if (st == TP_OK) {
        n->target = tp_strdup(spec->target);
        if (!n->target) st = tp_error(TP_ERR_NOMEM, "out of memory copying a node target");
    }
    if (st == TP_OK) st = tp_value_dict(&n->meta);
    if (st == TP_OK && spec->kind == TP_NODE_PLACEHOLDER) st = reserve_placeholder(g);
    if (st == TP_OK) {
        bool named = spec->name && *spec->name;
        st = prepare_name(g, named ? spec->name : spec->target, !named, spec->exact_name, &pn);
    }
    if (st == TP_OK) {
        st = install_args(n, &args, &kwargs); /* clears args/kwargs on failure */
    } else {
        tp_value_clear(&args);
        tp_value_clear(&kwargs);
    }
    if (st != TP_OK) {
        discard_name(&pn);
        node_free(n);
        return st;
    }
    commit_name(g, n, &pn);
    n->uid = g->next_uid++;
    link_before(g, n, g->insert_before);
    if (out) *out = n;
    return TP_OK;
}

tp_status tp_graph_create_node(tp_graph *g, tp_node_kind kind, const char *target, const tp_value *args,
                               const tp_value *kwargs, const char *name, tp_node **out) {
    TP_CHECK(g != NULL, TP_ERR_INVALID_ARG, "graph is NULL");
    TP_CHECK((unsigned)kind < TP_NODE_KIND_COUNT, TP_ERR_INVALID_ARG, "invalid node kind %d", (int)kind);
    if (kind == TP_NODE_OUTPUT && (!target || !*target)) target = "output";
    TP_CHECK(target && *target, TP_ERR_INVALID_ARG, "%s node needs a non-empty target", tp_node_kind_name(kind));
    tp_op op = TP_OP_INVALID;
    if (kind == TP_NODE_CALL_FUNCTION) {
        op = tp_op_from_name(target);
        TP_CHECK(op != TP_OP_INVALID, TP_ERR_NOT_FOUND, "call_function target '%s' is not a known op", target);
    } else if (kind == TP_NODE_CALL_METHOD) {
        op = tp_op_from_name(target);
    }
    node_spec spec = {.kind = kind, .target = target, .op = op, .args = args, .kwargs = kwargs, .name = name};
    return node_create(g, &spec, out);
}

tp_status tp__graph_create_node_named(tp_graph *g, tp_node_kind kind, const char *target, const tp_value *args,
                                     const tp_value *kwargs, const char *name, tp_node **out) {
    TP_CHECK(g != NULL, TP_ERR_INVALID_ARG, "graph is NULL");
    TP_CHECK(name && *name, TP_ERR_INVALID_ARG, "a node needs a non-empty name");
    TP_CHECK(!map_find(&g->names, name), TP_ERR_DUPLICATE, "a node named '%s' already exists", name);
    TP_CHECK((unsigned)kind < TP_NODE_KIND_COUNT, TP_ERR_INVALID_ARG, "invalid node kind %d", (int)kind);
    if (kind == TP_NODE_OUTPUT && (!target || !*target)) target = "output";
    TP_CHECK(target && *target, TP_ERR_INVALID_ARG, "%s node needs a non-empty target", tp_node_kind_name(kind));
    tp_op op = TP_OP_INVALID;
    if (kind == TP_NODE_CALL_FUNCTION) {
        op = tp_op_from_name(target);
        TP_CHECK(op != TP_OP_INVALID, TP_ERR_NOT_FOUND, "call_function target '%s' is not a known op", target);
    } else if (kind == TP_NODE_CALL_METHOD) {
        op = tp_op_from_name(target);
    }
    node_spec spec = {.kind = kind, .target = target, .op = op, .args = args, .kwargs = kwargs, .name = name,
                      .exact_name = true};
    return node_create(g, &spec, out);
}

tp_status tp_graph_placeholder(tp_graph *g, const char *name, const tp_value *val, tp_node **out) {
    TP_CHECK(name && *name, TP_ERR_INVALID_ARG, "placeholder needs a non-empty name");
    tp_node *n;
    node_spec spec = {.kind = TP_NODE_PLACEHOLDER, .target = name, .op = TP_OP_INVALID};
    TP_TRY(node_create(g, &spec, &n));
    tp_status st = tp_node_set_meta_val(n, val);
    if (st != TP_OK) {
        tp_graph_erase_node(g, n);
        return st;
    }
    if (out) *out = n;
    return TP_OK;
}

tp_status tp_graph_get_attr(tp_graph *g, const char *target, const tp_value *val, tp_node **out) {
    TP_CHECK(target && *target, TP_ERR_INVALID_ARG, "get_attr needs a non-empty target");
    tp_node *n;
    node_spec spec = {.kind = TP_NODE_GET_ATTR, .target = target, .op = TP_OP_INVALID};
    TP_TRY(node_create(g, &spec, &n));
    tp_status st = tp_node_set_meta_val(n, val);
    if (st != TP_OK) {
        tp_graph_erase_node(g, n);
        return st;
    }
    if (out) *out = n;
    return TP_OK;
}

/* Create a call node and infer its meta; erase it again on failure. */
static tp_status create_call(tp_graph *g, const node_spec *spec, tp_node **out) {
    /* remember the name counter of the node's base, so that a node refused
     * by inference leaves the names exactly as they were */
    char *base = NULL, *probe = NULL;
    int64_t num = 0;
    TP_TRY(derive_name(g, spec->name && *spec->name ? spec->name : spec->target, !(spec->name && *spec->name), &probe,
                       &base, &num));
    tp_free(probe);
    const tp__name_slot *slot = map_find(&g->bases, base);
    bool had_slot = slot != NULL;
    int64_t old_count = slot ? slot->count : 0;
    tp_node *n;
    tp_status st = node_create(g, spec, &n);
    if (st == TP_OK && (st = tp_node_infer_meta(n)) != TP_OK) {
        tp_graph_erase_node(g, n); /* no users yet */
        tp__name_slot *s = map_find(&g->bases, base);
        if (s) s->count = had_slot ? old_count : 0;
    }
    tp_free(base);
    if (st != TP_OK) return st;
    if (out) *out = n;
    return TP_OK;
}

tp_status tp_graph_call_function(tp_graph *g, tp_op op, const tp_value *args, const tp_value *kwargs,
                                 tp_node **out) {
    TP_CHECK(g != NULL, TP_ERR_INVALID_ARG, "graph is NULL");
    TP_CHECK((unsigned)op < TP_OP_COUNT, TP_ERR_INVALID_ARG, "call_function: invalid op %d", (int)op);
    node_spec spec = {.kind = TP_NODE_CALL_FUNCTION, .target = tp_op_name(op), .op = op, .args = args, .kwargs = kwargs};
    return create_call(g, &spec, out);
}

tp_status tp_graph_call_method(tp_graph *g, const char *method, const tp_value *args, const tp_value *kwargs,
                               tp_node **out) {
    TP_CHECK(g != NULL, TP_ERR_INVALID_ARG, "graph is NULL");
    TP_CHECK(method && *method, TP_ERR_INVALID_ARG, "call_method needs a non-empty method name");
    TP_CHECK(args && tp_value_len(args) > 0, TP_ERR_INVALID_ARG,
             "call_method %s needs at least one argument (the object)", method);
    node_spec spec = {.kind = TP_NODE_CALL_METHOD, .target = method, .op = tp_op_from_name(method), .args = args,
                      .kwargs = kwargs};
    return create_call(g, &spec, out);
}

tp_status tp_graph_output(tp_graph *g, const tp_value *value, tp_node **out) {
    TP_CHECK(g != NULL, TP_ERR_INVALID_ARG, "graph is NULL");
    tp_node *existing = tp_graph_output_node(g);
    TP_CHECK(!existing, TP_ERR_STATE, "graph already has an output node (%s)", existing ? existing->name : "");
    tp_value args;
    TP_TRY(tp_value_tuple(1, &args));
    tp_status st = value ? tp_value_copy(value, &args.u.seq.items[0]) : TP_OK;
    if (st == TP_OK) {
        node_spec spec = {.kind = TP_NODE_OUTPUT, .target = "output", .op = TP_OP_INVALID, .args = &args};
        st = node_create(g, &spec, out);
    }
    tp_value_clear(&args);
    return st;
}

/* ---- meta -------------------------------------------------------------------------------- */

const tp_value *tp_node_meta_val(const tp_node *n) { return &n->meta_val; }

tp_status tp_node_set_meta_val(tp_node *n, const tp_value *val) {
    if (!val) {
        tp_value_clear(&n->meta_val);
        return TP_OK;
    }
    TP_TRY(check_meta_value(val, 0, true));
    tp_value copy;
    TP_TRY(meta_copy(val, &copy));
    tp_value_move(&n->meta_val, &copy);
    return TP_OK;
}

const tp_value *tp_node_meta(const tp_node *n) { return &n->meta; }

tp_status tp_node_meta_set(tp_node *n, const char *key, const tp_value *val) {
    TP_CHECK(key && *key, TP_ERR_INVALID_ARG, "meta key must be a non-empty string");
    if (!val) {
        /* remove: rebuild the dict without the key */
        if (!tp_value_dict_get(&n->meta, key)) return TP_OK;
        tp_value d;
        TP_TRY(tp_value_dict(&d));
        for (int64_t i = 0; i < n->meta.u.seq.n; i++) {
            if (strcmp(n->meta.u.seq.keys[i], key) == 0) continue;
            tp_value item;
            tp_status st = tp_value_copy(&n->meta.u.seq.items[i], &item);
            if (st == TP_OK) st = tp_value_dict_set(&d, n->meta.u.seq.keys[i], &item);
            tp_value_clear(&item);
            if (st != TP_OK) {
                tp_value_clear(&d);
                return st;
            }
        }
        tp_value_move(&n->meta, &d);
        return TP_OK;
    }
    TP_TRY(check_meta_value(val, 0, false));
    tp_value copy;
    TP_TRY(tp_value_copy(val, &copy));
    tp_status st = tp_value_dict_set(&n->meta, key, &copy);
    tp_value_clear(&copy);
    return st;
}

const tp_value *tp_node_meta_get(const tp_node *n, const char *key) { return key ? tp_value_dict_get(&n->meta, key) : NULL; }

tp_status tp_node_meta_set_str(tp_node *n, const char *key, const char *s) {
    tp_value v;
    TP_TRY(tp_value_str(s, &v));
    tp_status st = tp_node_meta_set(n, key, &v);
    tp_value_clear(&v);
    return st;
}

const char *tp_node_meta_get_str(const tp_node *n, const char *key) {
    const tp_value *v = tp_node_meta_get(n, key);
    return v && v->kind == TP_VAL_STR ? v->u.s : NULL;
}

/* ---- mutation ---------------------------------------------------------------------------- */

static tp_status set_args_kwargs(tp_node *n, const tp_value *args, const tp_value *kwargs) {
    char what[160];
    snprintf(what, sizeof what, "node %.140s", n->name);
    tp_value a, k;
    TP_TRY(prepare_args(n->graph, args, kwargs, &a, &k, what));
    return install_args(n, &a, &k);
}

tp_status tp_node_set_args(tp_node *n, const tp_value *args) { return set_args_kwargs(n, args, &n->kwargs); }

tp_status tp_node_set_kwargs(tp_node *n, const tp_value *kwargs) { return set_args_kwargs(n, &n->args, kwargs); }

tp_status tp_node_set_arg(tp_node *n, int64_t i, const tp_value *value) {
    TP_CHECK(i >= 0 && i < n->args.u.seq.n, TP_ERR_INDEX, "node %s has %" PRId64 " args; index %" PRId64 " is out of range",
             n->name, n->args.u.seq.n, i);
    TP_CHECK(value != NULL, TP_ERR_INVALID_ARG, "set_arg needs a value");
    tp_value args;
    TP_TRY(tp_value_copy(&n->args, &args));
    tp_value item;
    tp_status st = tp_value_copy(value, &item);
    if (st == TP_OK) st = tp_value_seq_set(&args, i, &item);
    if (st == TP_OK) st = set_args_kwargs(n, &args, &n->kwargs);
    tp_value_clear(&args);
    return st;
}

tp_status tp_node_set_kwarg(tp_node *n, const char *key, const tp_value *value) {
    TP_CHECK(key && *key, TP_ERR_INVALID_ARG, "set_kwarg needs a non-empty key");
    TP_CHECK(value != NULL, TP_ERR_INVALID_ARG, "set_kwarg needs a value");
    tp_value kwargs;
    TP_TRY(tp_value_copy(&n->kwargs, &kwargs));
    tp_value item;
    tp_status st = tp_value_copy(value, &item);
    if (st == TP_OK) st = tp_value_dict_set(&kwargs, key, &item);
    tp_value_clear(&item);
    if (st == TP_OK) st = set_args_kwargs(n, &n->args, &kwargs);
    tp_value_clear(&kwargs);
    return st;
}

/* Reorder inputs[0..n) (a permutation of the nodes referenced in v) into
 * order of first appearance, without allocating. */
static void order_inputs(const tp_value *v, tp_node **inputs, int64_t n, int64_t *placed) {
    if (v->kind == TP_VAL_NODE) {
        for (int64_t j = *placed; j < n; j++) {
            if (inputs[j] == v->u.node) {
                tp_node *t = inputs[j];
                inputs[j] = inputs[*placed];
                inputs[(*placed)++] = t;
                break;
            }
        }
    } else if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE || v->kind == TP_VAL_DICT) {
        for (int64_t i = 0; i < v->u.seq.n; i++) order_inputs(&v->u.seq.items[i], inputs, n, placed);
    }
}

/* Swap input `from` for `to` in user's args/kwargs/inputs and the use
 * lists (room in to->users reserved by the caller). */
static void swap_input(tp_node *user, tp_node *from, tp_node *to) {
    user->graph->version++;
    replace_refs(&user->args, from, to);
    replace_refs(&user->kwargs, from, to);
    bool had_to = false;
    for (int64_t i = 0; i < user->n_inputs; i++) had_to |= user->inputs[i] == to;
    for (int64_t i = 0; i < user->n_inputs; i++) {
        if (user->inputs[i] != from) continue;
        if (had_to) {
            memmove(&user->inputs[i], &user->inputs[i + 1], (size_t)(user->n_inputs - i - 1) * sizeof(tp_node *));
            user->n_inputs--;
        } else {
            user->inputs[i] = to;
        }
        break;
    }
    /* keep inputs in order of first appearance (`to` may now come first) */
    if (had_to) {
        int64_t placed = 0;
        order_inputs(&user->args, user->inputs, user->n_inputs, &placed);
        order_inputs(&user->kwargs, user->inputs, user->n_inputs, &placed);
    }
    remove_user(from, user);
    add_user(to, user);
}

tp_status tp_node_replace_all_uses_with(tp_node *n, tp_node *replacement, tp_node_filter filter, void *ctx,
                                        int64_t *n_replaced) {
    if (n_replaced) *n_replaced = 0;
    TP_CHECK(replacement != NULL, TP_ERR_INVALID_ARG, "replace_all_uses_with needs a replacement node");
    TP_CHECK(replacement->graph == n->graph, TP_ERR_INVALID_ARG,
             "cannot replace uses of %s with node %s of another graph", n->name, replacement->name);
    if (replacement == n) return TP_OK;
    /* snapshot: the loop edits n->users */
    int64_t n_users = n->n_users;
    tp_node **users = tp_malloc((size_t)(n_users ? n_users : 1) * sizeof *users);
    TP_CHECK(users != NULL, TP_ERR_NOMEM, "out of memory replacing the uses of node %s", n->name);
    if (n_users) memcpy(users, n->users, (size_t)n_users * sizeof *users);
    int64_t count = 0;
    tp_status st = TP_OK;
    for (int64_t i = 0; i < n_users; i++) {
        tp_node *u = users[i];
        if (u == replacement) continue;
        if (filter && !filter(u, ctx)) continue;
        if ((st = reserve_user(replacement)) != TP_OK) break;
        swap_input(u, n, replacement);
        count++;
    }
    tp_free(users);
    if (n_replaced) *n_replaced = count;
    return st;
}

tp_status tp_node_replace_input_with(tp_node *n, tp_node *old_input, tp_node *new_input) {
    TP_CHECK(old_input && new_input, TP_ERR_INVALID_ARG, "replace_input_with needs two nodes");
    TP_CHECK(new_input->graph == n->graph, TP_ERR_INVALID_ARG, "node %s cannot use node %s of another graph", n->name,
             new_input->name);
    if (old_input == new_input) return TP_OK;
    bool present = false;
    for (int64_t i = 0; i < n->n_inputs; i++) present |= n->inputs[i] == old_input;
    if (!present) return TP_OK;
    TP_TRY(reserve_user(new_input));
    swap_input(n, old_input, new_input);
    return TP_OK;
}

tp_status tp_graph_erase_node(tp_graph *g, tp_node *n) {
    TP_CHECK(n != NULL, TP_ERR_INVALID_ARG, "erase_node needs a node");
    TP_CHECK(n->graph == g, TP_ERR_INVALID_ARG, "node %s belongs to another graph", n->name);
    if (n->n_users > 0) {
        char list[512];
        size_t used = 0;
        list[0] = '\0';
        for (int64_t i = 0; i < n->n_users && used + 8 < sizeof list; i++) {
            int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", n->users[i]->name);
            if (w > 0) used += (size_t)w;
        }
        if (used >= sizeof list) strcpy(list + sizeof list - 4, "...");
        return tp_error(TP_ERR_STATE, "cannot erase node %s: it still has %" PRId64 " user%s (%s)", n->name,
                        n->n_users, n->n_users == 1 ? "" : "s", list);
    }
    for (int64_t i = 0; i < n->n_inputs; i++) remove_user(n->inputs[i], n);
    unlink_node(g, n);
    map_remove(&g->names, n->name);
    node_free(n);
    return TP_OK;
}

tp_status tp_graph_move_before(tp_graph *g, tp_node *n, tp_node *before) {
    TP_CHECK(n && n->graph == g, TP_ERR_INVALID_ARG, "move_before: node %s is not in this graph", n ? n->name : "(null)");
    TP_CHECK(!before || before->graph == g, TP_ERR_INVALID_ARG, "move_before: node %s is not in this graph",
             before->name);
    if (n == before || n->next == before) return TP_OK;
    unlink_node(g, n);
    link_before(g, n, before);
    return TP_OK;
}

tp_status tp_node_rename(tp_node *n, const char *name) {
    n->graph->version++;
    TP_CHECK(name != NULL, TP_ERR_INVALID_ARG, "rename needs a name");
    if (strcmp(n->name, name) == 0) return TP_OK;
    tp_graph *g = n->graph;
    pending_name pn;
    TP_TRY(prepare_name(g, name, false, false, &pn));
    map_remove(&g->names, n->name);
    tp_free(n->name);
    commit_name(g, n, &pn);
    return TP_OK;
}

/* ---- shape inference ------------------------------------------------------------------------ */

static tp_status lookup_meta(void *ctx, const tp_node *node, const tp_value **out) {
    TP_UNUSED(ctx);
    *out = &node->meta_val;
    return TP_OK;
}

/* Bind n's args (or substituted ones) into bound[] (schema->n_args). */
static tp_status bind_values(tp_op op, const tp_value *args, const tp_value *kwargs, tp_value *bound) {
    int64_t n = tp_value_len(args);
    TP_CHECK(n <= INT_MAX, TP_ERR_INVALID_ARG, "too many arguments (%" PRId64 ")", n);
    return tp_op_bind(op, n ? args->u.seq.items : NULL, (int)n, kwargs, bound);
}

tp_status tp_node_infer_meta(tp_node *n) {
    if (n->kind != TP_NODE_CALL_FUNCTION && n->kind != TP_NODE_CALL_METHOD) return TP_OK;
    if (n->op == TP_OP_INVALID) return TP_OK; /* unknown method: no shape rule */
    tp_op op = n->op;
    const tp_schema *schema = tp_op_schema(op);
    tp_status st = TP_OK;
    if (!schema) {
        st = tp_ops_init();
        if (st == TP_OK) st = tp_error(TP_ERR_NOT_FOUND, "op %s has no schema", tp_op_name(op));
        tp__node_error_context(n->name, n->target);
        return st;
    }
    tp_value *bound = tp_calloc((size_t)(schema->n_args ? schema->n_args : 1), sizeof *bound);
    TP_CHECK(bound != NULL, TP_ERR_NOMEM, "out of memory binding node %s", n->name);
    tp_value sargs = tp_value_none(), skw = tp_value_none(), result = tp_value_none();
    /* 1. type-check the arguments as written (node references accepted) */
    st = bind_values(op, &n->args, &n->kwargs, bound);
    for (int i = 0; st == TP_OK && i < schema->n_args; i++) tp_value_clear(&bound[i]);
    /* 2. infer from the inputs' meta values when all are known */
    bool known = true;
    for (int64_t i = 0; i < n->n_inputs; i++) known &= n->inputs[i]->meta_val.kind != TP_VAL_NONE;
    if (st == TP_OK && known) {
        st = tp__value_substitute(&n->args, lookup_meta, NULL, &sargs);
        if (st == TP_OK) st = tp__value_substitute(&n->kwargs, lookup_meta, NULL, &skw);
        if (st == TP_OK) st = bind_values(op, &sargs, &skw, bound);
        if (st == TP_OK) {
            st = tp_op_infer(op, bound, &result);
            for (int i = 0; i < schema->n_args; i++) tp_value_clear(&bound[i]);
        }
    }
    tp_value_clear(&sargs);
    tp_value_clear(&skw);
    tp_free(bound);
    if (st != TP_OK) {
        tp_value_clear(&result);
        tp__node_error_context(n->name, n->target);
        return st;
    }
    /* result holds meta tensors already (infer contract) */
    tp_value_move(&n->meta_val, &result);
    return TP_OK;
}

tp_status tp_graph_infer_meta(tp_graph *g) {
    for (tp_node *n = g->first; n; n = n->next) TP_TRY(tp_node_infer_meta(n));
    return TP_OK;
}

/* ---- positions and last uses ------------------------------------------------------------------ */

tp_status tp__graph_positions(const tp_graph *g, int64_t **out) {
    int64_t *pos = tp_malloc((size_t)(g->next_uid ? g->next_uid : 1) * sizeof *pos);
    TP_CHECK(pos != NULL, TP_ERR_NOMEM, "out of memory indexing graph nodes");
    for (int64_t i = 0; i < g->next_uid; i++) pos[i] = -1;
    int64_t p = 0;
    for (tp_node *n = g->first; n; n = n->next) pos[n->uid] = p++;
    *out = pos;
    return TP_OK;
}

tp_status tp__graph_last_uses(const tp_graph *g, int64_t **out_lists, int64_t **out_offsets, int64_t **out_last) {
    int64_t count = g->n_nodes;
    size_t nn = (size_t)(count ? count : 1);
    int64_t *pos = NULL;
    TP_TRY(tp__graph_positions(g, &pos));
    int64_t *last = tp_malloc(nn * sizeof *last);
    int64_t *offsets = tp_calloc(nn + 1, sizeof *offsets);
    int64_t *lists = tp_malloc(nn * sizeof *lists);
    if (!last || !offsets || !lists) {
        tp_free(pos);
        tp_free(last);
        tp_free(offsets);
        tp_free(lists);
        return tp_error(TP_ERR_NOMEM, "out of memory computing last uses");
    }
    for (int64_t i = 0; i < count; i++) last[i] = -1;
    /* reverse walk: the first user met is the last user */
    int64_t p = count;
    for (tp_node *n = g->last; n; n = n->prev) {
        p--;
        for (int64_t k = 0; k < n->n_inputs; k++) {
            const tp_node *in = n->inputs[k];
            if (in->graph != g || in->uid >= g->next_uid || pos[in->uid] < 0) continue;
            if (last[pos[in->uid]] < 0) last[pos[in->uid]] = p;
        }
    }
    /* bucket each node under its last user, in the user's input order */
    for (int64_t i = 0; i < count; i++)
        if (last[i] >= 0) offsets[last[i] + 1]++;
    for (int64_t i = 0; i < count; i++) offsets[i + 1] += offsets[i];
    int64_t *fill = tp_malloc(nn * sizeof *fill);
    if (!fill) {
        tp_free(pos);
        tp_free(last);
        tp_free(offsets);
        tp_free(lists);
        return tp_error(TP_ERR_NOMEM, "out of memory computing last uses");
    }
    memcpy(fill, offsets, (size_t)count * sizeof *fill);
    p = 0;
    for (tp_node *n = g->first; n; n = n->next, p++) {
        for (int64_t k = 0; k < n->n_inputs; k++) {
            const tp_node *in = n->inputs[k];
            if (in->graph != g || in->uid >= g->next_uid || pos[in->uid] < 0) continue;
            if (last[pos[in->uid]] == p) lists[fill[p]++] = pos[in->uid];
        }
    }
    tp_free(fill);
    tp_free(pos);
    *out_lists = lists;
    *out_offsets = offsets;
    *out_last = last;
    return TP_OK;
}

/* ---- copying ------------------------------------------------------------------------------------ */

typedef struct copy_map {
    const tp_graph *src;
    tp_value *values; /* indexed by src uid; kind NONE + !set[uid] when not mapped */
    bool *set;
} copy_map;

static tp_status lookup_copy(void *ctx, const tp_node *node, const tp_value **out) {
    copy_map *m = ctx;
    TP_CHECK(node->graph == m->src, TP_ERR_VERIFY, "node %s references a node of another graph", node->name);
    TP_CHECK(node->uid < m->src->next_uid && m->set[node->uid], TP_ERR_VERIFY,
             "node %s is used before its definition", node->name);
    *out = &m->values[node->uid];
    return TP_OK;
}

static void copy_map_free(copy_map *m) {
    if (m->values)
        for (int64_t i = 0; i < m->src->next_uid; i++) tp_value_clear(&m->values[i]);
    tp_free(m->values);
    tp_free(m->set);
    m->values = NULL;
    m->set = NULL;
}

static tp_status copy_map_init(copy_map *m, const tp_graph *src) {
    size_t n = (size_t)(src->next_uid ? src->next_uid : 1);
    m->src = src;
    m->values = tp_calloc(n, sizeof *m->values);
    m->set = tp_calloc(n, sizeof *m->set);
    if (!m->values || !m->set) {
        copy_map_free(m);
        return tp_error(TP_ERR_NOMEM, "out of memory copying a graph");
    }
    return TP_OK;
}

/* Copy node s into dst at the insertion point with refs remapped. */
static tp_status copy_node(tp_graph *dst, const tp_node *s, copy_map *m, bool exact_name, tp_node **out) {
    tp_value args, kwargs;
    TP_TRY(tp__value_substitute(&s->args, lookup_copy, m, &args));
    tp_status st = tp__value_substitute(&s->kwargs, lookup_copy, m, &kwargs);
    if (st != TP_OK) {
        tp_value_clear(&args);
        return st;
    }
    node_spec spec = {.kind = s->kind, .target = s->target, .op = s->op, .args = &args, .kwargs = &kwargs,
                      .name = s->name, .exact_name = exact_name};
    tp_node *n = NULL;
    st = node_create(dst, &spec, &n);
    tp_value_clear(&args);
    tp_value_clear(&kwargs);
    if (st == TP_OK) st = tp_value_copy(&s->meta_val, &n->meta_val);
    if (st == TP_OK) {
        tp_value meta;
        st = tp_value_copy(&s->meta, &meta);
        if (st == TP_OK) tp_value_move(&n->meta, &meta);
    }
    if (st != TP_OK) {
        if (n) tp_graph_erase_node(dst, n);
        return st;
    }
    n->flags = s->flags;
    *out = n;
    return TP_OK;
}

tp_status tp_graph_copy(const tp_graph *src, tp_graph **out) {
    tp_graph *dst;
    TP_TRY(tp_graph_new(&dst));
    copy_map m;
    tp_status st = copy_map_init(&m, src);
    for (const tp_node *s = src->first; st == TP_OK && s; s = s->next) {
        tp_node *n;
        st = copy_node(dst, s, &m, true, &n);
        if (st == TP_OK) {
            m.values[s->uid] = tp_value_node(n);
            m.set[s->uid] = true;
        }
    }
    copy_map_free(&m);
    if (st != TP_OK) {
        tp_graph_free(dst);
        return st;
    }
    *out = dst;
    return TP_OK;
}

tp_status tp_graph_copy_into(tp_graph *dst, const tp_graph *src, const tp_value *inputs, int64_t n_inputs,
                             tp_value *output) {
    if (output) *output = tp_value_none();
    int64_t n_ph = tp_graph_num_placeholders(src);
    TP_CHECK(n_inputs == n_ph, TP_ERR_INVALID_ARG, "expected %" PRId64 " input%s, got %" PRId64, n_ph,
             n_ph == 1 ? "" : "s", n_inputs);
    for (int64_t i = 0; i < n_inputs; i++) TP_TRY(check_arg_value(dst, &inputs[i], 0, "inlined inputs"));
    copy_map m;
    TP_TRY(copy_map_init(&m, src));
    node_vec created = {0};
    tp_status st = TP_OK;
    const tp_node *out_node = NULL;
    int64_t ph = 0;
    for (const tp_node *s = src->first; st == TP_OK && s; s = s->next) {
        if (s->kind == TP_NODE_PLACEHOLDER) {
            st = tp_value_copy(&inputs[ph++], &m.values[s->uid]);
            m.set[s->uid] = st == TP_OK;
        } else if (s->kind == TP_NODE_OUTPUT) {
            out_node = s;
            m.set[s->uid] = true; /* maps to None */
        } else {
            tp_node *n = NULL;
            st = vec_push(&created, NULL);
            if (st == TP_OK) st = copy_node(dst, s, &m, false, &n);
            if (st == TP_OK) {
                created.items[created.n - 1] = n;
                m.values[s->uid] = tp_value_node(n);
                m.set[s->uid] = true;
            } else if (created.n && !created.items[created.n - 1]) {
                created.n--;
            }
        }
    }
    tp_value result = tp_value_none();
    if (st == TP_OK && out_node && tp_value_len(&out_node->args) > 0)
        st = tp__value_substitute(&out_node->args.u.seq.items[0], lookup_copy, &m, &result);
    if (st != TP_OK) {
        /* roll back: created nodes are only used by later created nodes */
        for (int64_t i = created.n - 1; i >= 0; i--) tp_graph_erase_node(dst, created.items[i]);
        tp_value_clear(&result);
    } else if (output) {
        *output = result;
    } else {
        tp_value_clear(&result);
    }
    tp_free(created.items);
    copy_map_free(&m);
    return st;
}

/* ---- lint ----------------------------------------------------------------------------------------- */

static int cmp_name_ptr(const void *a, const void *b) {
    const tp_node *x = *(const tp_node *const *)a, *y = *(const tp_node *const *)b;
    return strcmp(x->name, y->name);
}

typedef struct lint_ctx {
    const tp_graph *g;
    const tp_node *user;
    const bool *defined; /* by uid */
} lint_ctx;

static tp_status lint_refs(const lint_ctx *c, const tp_value *v) {
    if (v->kind == TP_VAL_NODE) {
        const tp_node *r = v->u.node;
        TP_CHECK(r != NULL, TP_ERR_VERIFY, "node %s holds a NULL node reference", c->user->name);
        TP_CHECK(r->graph == c->g, TP_ERR_VERIFY, "node %s uses node %s, which belongs to another graph",
                 c->user->name, r->name);
        TP_CHECK(r != c->user, TP_ERR_VERIFY, "node %s uses itself", c->user->name);
        TP_CHECK(r->uid >= 0 && r->uid < c->g->next_uid && c->defined[r->uid], TP_ERR_VERIFY,
                 "node %s uses node %s before its definition", c->user->name, r->name);
    } else if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE || v->kind == TP_VAL_DICT) {
        for (int64_t i = 0; i < v->u.seq.n; i++) TP_TRY(lint_refs(c, &v->u.seq.items[i]));
    }
    return TP_OK;
}

/* Check n's cached inputs and its inputs' use lists against its args. */
static tp_status lint_uses(const tp_node *n) {
    node_vec in;
    TP_TRY(collect_inputs(&n->args, &n->kwargs, &in));
    bool ok = in.n == n->n_inputs;
    for (int64_t i = 0; ok && i < in.n; i++) ok = in.items[i] == n->inputs[i];
    tp_free(in.items);
    TP_CHECK(ok, TP_ERR_VERIFY, "node %s: its input list does not match its arguments", n->name);
    for (int64_t i = 0; i < n->n_inputs; i++)
        TP_CHECK(has_user(n->inputs[i], n), TP_ERR_VERIFY, "node %s uses node %s but is missing from its users",
                 n->name, n->inputs[i]->name);
    for (int64_t i = 0; i < n->n_users; i++) {
        const tp_node *u = n->users[i];
        bool found = false;
        for (int64_t k = 0; k < u->n_inputs; k++) found |= u->inputs[k] == n;
        TP_CHECK(found, TP_ERR_VERIFY, "node %s lists %s as a user, but %s does not use it", n->name, u->name, u->name);
        for (int64_t k = 0; k < i; k++)
            TP_CHECK(n->users[k] != u, TP_ERR_VERIFY, "node %s lists user %s twice", n->name, u->name);
    }
    return TP_OK;
}

tp_status tp_graph_lint(const tp_graph *g) {
    TP_CHECK(g != NULL, TP_ERR_INVALID_ARG, "graph is NULL");
    size_t nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    bool *defined = tp_calloc((size_t)(g->next_uid ? g->next_uid : 1), sizeof *defined);
    const tp_node **sorted = tp_malloc(nn * sizeof *sorted);
    if (!defined || !sorted) {
        tp_free(defined);
        tp_free(sorted);
        return tp_error(TP_ERR_NOMEM, "out of memory linting a graph");
    }
    tp_status st = TP_OK;
    int64_t count = 0, n_outputs = 0;
    const tp_node *outputs[2] = {NULL, NULL};
    const tp_node *prev = NULL;
    for (const tp_node *n = g->first; n && st == TP_OK; prev = n, n = n->next) {
        if (n->graph != g || n->prev != prev || n->uid < 0 || n->uid >= g->next_uid || count >= g->n_nodes) {
            st = tp_error(TP_ERR_VERIFY, "node %s: the node list is corrupt", n->name ? n->name : "?");
            break;
        }
        if (!n->name || !*n->name) {
            st = tp_error(TP_ERR_VERIFY, "node %" PRId64 " (%s) has an empty name", count, tp_node_kind_name(n->kind));
            break;
        }
        sorted[count++] = n;
        if ((unsigned)n->kind >= TP_NODE_KIND_COUNT) {
            st = tp_error(TP_ERR_VERIFY, "node %s has an invalid kind %d", n->name, (int)n->kind);
            break;
        }
        if (n->kind == TP_NODE_CALL_FUNCTION && (unsigned)n->op >= TP_OP_COUNT) {
            st = tp_error(TP_ERR_VERIFY, "node %s calls an invalid op", n->name);
            break;
        }
        if (n->args.kind != TP_VAL_TUPLE || n->kwargs.kind != TP_VAL_DICT) {
            st = tp_error(TP_ERR_VERIFY, "node %s: args must be a tuple and kwargs a dict", n->name);
            break;
        }
        lint_ctx c = {.g = g, .user = n, .defined = defined};
        st = lint_refs(&c, &n->args);
        if (st == TP_OK) st = lint_refs(&c, &n->kwargs);
        if (st == TP_OK) st = lint_uses(n);
        if (n->kind == TP_NODE_OUTPUT) {
            if (n_outputs < 2) outputs[n_outputs] = n;
            n_outputs++;
        }
        defined[n->uid] = true;
    }
    if (st == TP_OK && count != g->n_nodes)
        st = tp_error(TP_ERR_VERIFY, "the node list holds %" PRId64 " nodes, expected %" PRId64, count, g->n_nodes);
    if (st == TP_OK && count > 1) {
        qsort(sorted, (size_t)count, sizeof *sorted, cmp_name_ptr);
        for (int64_t i = 1; i < count && st == TP_OK; i++)
            if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0)
                st = tp_error(TP_ERR_VERIFY, "two nodes are named %s", sorted[i]->name);
    }
    if (st == TP_OK) {
        for (const tp_node *n = g->first; n && st == TP_OK; n = n->next)
            if (tp_graph_find_node(g, n->name) != n)
                st = tp_error(TP_ERR_VERIFY, "node %s is missing from the name index", n->name);
    }
    if (st == TP_OK) {
        if (n_outputs == 0) st = tp_error(TP_ERR_VERIFY, "graph has no output node");
        else if (n_outputs > 1)
            st = tp_error(TP_ERR_VERIFY, "graph has %" PRId64 " output nodes (%s, %s%s)", n_outputs, outputs[0]->name,
                          outputs[1]->name, n_outputs > 2 ? ", ..." : "");
        else if (g->last != outputs[0])
            st = tp_error(TP_ERR_VERIFY, "output node %s is not the last node (%s follows it)", outputs[0]->name,
                          outputs[0]->next->name);
    }
    tp_free(defined);
    tp_free(sorted);
    return st;
}

/* ---- dead-code elimination ------------------------------------------------------------------------ */

tp_status tp_graph_eliminate_dead_code(tp_graph *g, bool *changed) {
    bool any = false, again = true;
    while (again) {
        again = false;
        for (tp_node *n = g->last; n;) {
            tp_node *prev = n->prev;
            if (n->n_users == 0 && !tp_node_is_impure(n)) {
                if (tp_graph_erase_node(g, n) == TP_OK) again = any = true;
            }
            n = prev;
        }
    }
    if (changed) *changed = any;
    return TP_OK;
}
