/*
 * import.c - ONNX model -> exported program.
 *
 * Walks the main graph's nodes in order, keeping a table from ONNX value
 * names to operands: a graph node reference, or a constant tensor known at
 * import time (initializers, Constant nodes, anything computed only from
 * constants). Op mappers (op_map.c) call ox_call, which folds a call whose
 * operands are all constants by running it eagerly, and otherwise adds a
 * call_function node, first materialising constant operands as lifted
 * state placeholders (initializers -> PARAMETER under their name, folded
 * values -> CONSTANT_TENSOR "_tensor_constantN"). So shape-only subgraphs
 * (Shape -> Gather -> Concat -> Reshape) vanish into op arguments, and
 * initializers read only as shape/index data never become state. Shape
 * data computed from dynamic dims stays symbolic instead (shape_values.c),
 * shape data given at run time is read with item() (shape_data.c), and
 * subgraphs (control_flow.c) convert into the same value table.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph_impl.h"
#include "tpexport/pytree.h"
#include "onnx_impl.h"

#define OX_MAX_OPSET 28

typedef struct ox_entry {
    char *name; /* NULL: empty slot */
    tp_value v;
    bool dyn;    /* shape depends on a symbolic dim */
    bool failed; /* producer was not converted */
    bool str;    /* ONNX strings, held as UTF-8 bytes: uint8 [dims..., width] */
    /* A shape value (shape_values.c): v is the list of its elements (ints
     * and symbolic-int nodes), shape_rank 0 or 1; mat is the int64 tensor
     * node made from it when an op needs it as a tensor (None until then). */
    bool shape;
    int shape_rank;
    tp_value mat;
} ox_entry;

typedef struct ox_state {
    char *target;
    tp_tensor *t;
    tp_input_kind kind;
    tp_node *ph;
} ox_state;

typedef struct ox_init {
    const char *name; /* borrowed from the model */
    tp_tensor *t;     /* borrowed from the entry */
} ox_init;

struct ox_ctx {
    tp_graph *g;
    int64_t opset;          /* the default domain's; -1 when not imported */
    int64_t training_opset; /* ai.onnx.preview.training's; -1 when not imported */
    const Onnx__NodeProto *node;
    int node_index;
    Onnx__NodeProto *const *nodes; /* the node list being converted (node = nodes[node_index]) */
    size_t n_nodes;
    bool node_dyn;
    ox_entry *tab;
    size_t cap, used;
    tp_node *anchor; /* state placeholders go before it (NULL: append) */
    ox_state *state;
    int n_state, cap_state;
    ox_init *inits;
    int n_inits;
    int n_consts;
    tp_onnx_report *report;
    bool report_nomem; /* filling the report ran out of memory */
    size_t max_constant_bytes; /* tp_onnx_options.max_constant_bytes or the default */
    int depth;                 /* subgraphs being converted (control_flow.c) */
    size_t sub_nodes;          /* subgraph nodes converted so far */
};

/* The default of tp_onnx_options.max_constant_bytes (onnx.h). */
#define OX_DEFAULT_MAX_CONSTANT_BYTES ((size_t)1 << 28)

/* ---- value table --------------------------------------------------------- */

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return h;
}

static ox_entry *tab_find(ox_ctx *c, const char *name) {
    if (!c->cap) return NULL;
    size_t i = hash_str(name) & (c->cap - 1);
    while (c->tab[i].name) {
        if (strcmp(c->tab[i].name, name) == 0) return &c->tab[i];
        i = (i + 1) & (c->cap - 1);
    }
    return NULL;
}

static tp_status tab_grow(ox_ctx *c) {
    size_t ncap = c->cap ? c->cap * 2 : 256;
    ox_entry *nt = tp_calloc(ncap, sizeof *nt);
    if (!nt) return tp_error(TP_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < c->cap; k++) {
        if (!c->tab[k].name) continue;
        size_t i = hash_str(c->tab[k].name) & (ncap - 1);
        while (nt[i].name) i = (i + 1) & (ncap - 1);
        nt[i] = c->tab[k];
    }
    tp_free(c->tab);
    c->tab = nt;
    c->cap = ncap;
    return TP_OK;
}

/* Define `name` (taking over *v, also on failure). Redefinition replaces
 * (SSA violations in hostile files are tolerated but harmless). */
static tp_status tab_set(ox_ctx *c, const char *name, tp_value *v, bool dyn, bool failed) {
    ox_entry *e = tab_find(c, name);
    if (!e) {
        if ((c->used + 1) * 2 > c->cap && tab_grow(c) != TP_OK) {
            tp_value_clear(v);
            return TP_ERR_NOMEM;
        }
        size_t i = hash_str(name) & (c->cap - 1);
        while (c->tab[i].name) i = (i + 1) & (c->cap - 1);
        char *key = tp_strdup(name);
        if (!key) {
            tp_value_clear(v);
            return tp_error(TP_ERR_NOMEM, "out of memory");
        }
        e = &c->tab[i];
        e->name = key;
        e->v = tp_value_none();
        e->mat = tp_value_none();
        c->used++;
    }
    tp_value_move(&e->v, v);
    tp_value_clear(&e->mat);
    e->dyn = dyn;
    e->failed = failed;
    e->str = false;
    e->shape = false;
    e->shape_rank = 0;
    return TP_OK;
}

/* ---- accessors for op_map.c ----------------------------------------------- */

static ox_entry *in_entry(ox_ctx *c, int i) {
    if (i < 0 || (size_t)i >= c->node->n_input || !c->node->input[i] || !c->node->input[i][0]) return NULL;
    return tab_find(c, c->node->input[i]);
}
/* The operand an entry stands for: a shape value made into its int64 tensor
 * (once, kept in mat), anything else as it is. */
static tp_status entry_operand(ox_ctx *c, ox_entry *e, const tp_value **out) {
    if (e->shape && e->mat.kind == TP_VAL_NONE) TP_TRY(tp__onnx_shape_tensor(c, &e->v, e->shape_rank, &e->mat));
    *out = e->shape ? &e->mat : &e->v;
    return TP_OK;
}

const tp_value *ox_in(ox_ctx *c, int i) {
    ox_entry *e = in_entry(c, i);
    if (!e) return NULL;
    return e->shape ? &e->mat : &e->v; /* shape values: materialised first (convert_nodes) */
}
const tp_value *ox_in_shape(ox_ctx *c, int i, int *rank) {
    ox_entry *e = in_entry(c, i);
    if (!e || !e->shape) return NULL;
    if (rank) *rank = e->shape_rank;
    return &e->v;
}
tp_status ox_bind(ox_ctx *c, const char *name, const tp_value *v, bool dyn) {
    tp_value cp;
    TP_TRY(tp_value_copy(v, &cp));
    return tab_set(c, name, &cp, dyn, false);
}

tp_status ox_lookup(ox_ctx *c, const char *name, const tp_value **out, bool *dyn) {
    ox_entry *e = name && name[0] ? tab_find(c, name) : NULL;
    if (!e || e->failed || e->v.kind == TP_VAL_NONE) return ox_bad(c, "value '%s' is not defined", name ? name : "");
    TP_TRY(entry_operand(c, e, out));
    if (dyn) *dyn = e->dyn;
    return TP_OK;
}

tp_status ox_set_out_shape(ox_ctx *c, int i, tp_value *items, int rank) {
    bool all_ints = true;
    for (int64_t k = 0; k < tp_value_len(items); k++) all_ints &= tp_value_at(items, k)->kind == TP_VAL_INT;
    if (all_ints) { /* a constant after all */
        int64_t vals[OX_MAX_SHAPE_VALUE], n = tp_value_len(items);
        for (int64_t k = 0; k < n; k++) vals[k] = tp_value_at(items, k)->u.i;
        tp_value_clear(items);
        tp_tensor *t;
        TP_TRY(tp_tensor_from_data(TP_INT64, rank, &n, vals, &t));
        tp_value v = tp_value_tensor(t);
        return ox_set_out(c, i, &v);
    }
    if (!ox_out_used(c, i)) {
        tp_value_clear(items);
        return TP_OK;
    }
    TP_TRY(tab_set(c, c->node->output[i], items, true, false));
    ox_entry *e = tab_find(c, c->node->output[i]);
    e->shape = true;
    e->shape_rank = rank;
    return TP_OK;
}
Onnx__NodeProto *const *ox_nodes_before(ox_ctx *c, size_t *n) {
    *n = c->nodes && c->node_index >= 0 ? (size_t)c->node_index : 0;
    return c->nodes;
}
int ox_n_in(ox_ctx *c) { return (int)c->node->n_input; }
int ox_n_out(ox_ctx *c) { return (int)c->node->n_output; }
bool ox_out_used(ox_ctx *c, int i) {
    return i >= 0 && (size_t)i < c->node->n_output && c->node->output[i] && c->node->output[i][0];
}
bool ox_in_str(ox_ctx *c, int i) {
    if (i < 0 || (size_t)i >= c->node->n_input || !c->node->input[i]) return false;
    ox_entry *e = tab_find(c, c->node->input[i]);
    return e && e->str;
}

void ox_set_out_str(ox_ctx *c, int i) {
    ox_entry *e = ox_out_used(c, i) ? tab_find(c, c->node->output[i]) : NULL;
    if (e) e->str = true;
}

tp_status ox_set_out(ox_ctx *c, int i, tp_value *v) {
    if (!ox_out_used(c, i)) {
        tp_value_clear(v);
        return TP_OK;
    }
    return tab_set(c, c->node->output[i], v, c->node_dyn, false);
}
const tp_tensor *ox_meta(const tp_value *v) {
    if (!v) return NULL;
    if (v->kind == TP_VAL_TENSOR) return v->u.tensor;
    if (v->kind == TP_VAL_NODE) {
        const tp_value *m = tp_node_meta_val(v->u.node);
        return m->kind == TP_VAL_TENSOR ? m->u.tensor : NULL;
    }
    return NULL;
}
tp_tensor *ox_const(const tp_value *v) { return v && v->kind == TP_VAL_TENSOR ? v->u.tensor : NULL; }
int64_t ox_opset(ox_ctx *c) { return c->opset; }
const Onnx__NodeProto *ox_node(ox_ctx *c) { return c->node; }

static const char *node_label(ox_ctx *c, char *buf, size_t size) {
    if (c->node->name && c->node->name[0]) return c->node->name;
    snprintf(buf, size, "#%d", c->node_index);
    return buf;
}

static bool is_training_domain(const char *domain) {
    return domain && strcmp(domain, OX_TRAINING_DOMAIN) == 0;
}

/* The opset of the current node's domain. */
static int64_t node_opset(ox_ctx *c) {
    return c->node && is_training_domain(c->node->domain) ? c->training_opset : c->opset;
}

static tp_status node_error(ox_ctx *c, tp_status code, const char *fmt, va_list ap) {
    char msg[512], lab[32];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return tp_error(code, "node '%s' (%s, opset %" PRId64 "): %s", node_label(c, lab, sizeof lab),
                    c->node->op_type ? c->node->op_type : "?", node_opset(c), msg);
}
tp_status ox_unsupported(ox_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tp_status st = node_error(c, TP_ERR_UNSUPPORTED, fmt, ap);
    va_end(ap);
    return st;
}
tp_status ox_bad(ox_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tp_status st = node_error(c, TP_ERR_INVALID_ARG, fmt, ap);
    va_end(ap);
    return st;
}

const Onnx__AttributeProto *ox_attr(ox_ctx *c, const char *name) {
    for (size_t i = 0; i < c->node->n_attribute; i++) {
        const Onnx__AttributeProto *a = c->node->attribute[i];
        if (a && a->name && strcmp(a->name, name) == 0) return a;
    }
    return NULL;
}
int64_t ox_attr_i(ox_ctx *c, const char *name, int64_t dflt) {
    const Onnx__AttributeProto *a = ox_attr(c, name);
    if (!a) return dflt;
    if (a->has_i) return a->i;
    if (a->has_f) { /* an int attribute written as a float: truncated, saturated (NaN: dflt) */
        if (a->f != a->f) return dflt;
        if (a->f >= 9223372036854775808.0f) return INT64_MAX;
        if (a->f <= -9223372036854775808.0f) return INT64_MIN;
        return (int64_t)a->f;
    }
    return dflt;
}
double ox_attr_f(ox_ctx *c, const char *name, double dflt) {
    const Onnx__AttributeProto *a = ox_attr(c, name);
    if (!a) return dflt;
    if (a->has_f) return a->f;
    if (a->has_i) return (double)a->i;
    return dflt;
}
const char *ox_attr_s(ox_ctx *c, const char *name, const char *dflt, char *buf, size_t size) {
    const Onnx__AttributeProto *a = ox_attr(c, name);
    if (!a || !a->has_s) return dflt;
    size_t n = a->s.len < size - 1 ? a->s.len : size - 1;
    if (n) memcpy(buf, a->s.data, n);
    buf[n] = '\0';
    return buf;
}
tp_status ox_attr_ints(ox_ctx *c, const char *name, int64_t *out, int max, int *n) {
    const Onnx__AttributeProto *a = ox_attr(c, name);
    *n = -1;
    if (!a) return TP_OK;
    if (a->n_ints > (size_t)max) return ox_unsupported(c, "attribute '%s' has %zu values (at most %d)", name, a->n_ints, max);
    for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
    *n = (int)a->n_ints;
    return TP_OK;
}

/* Add s to a string list unless present; false when out of memory. */
static bool str_list_add(char ***list, int *n, const char *s) {
    for (int i = 0; i < *n; i++)
        if (strcmp((*list)[i], s) == 0) return true;
    char **nl = tp_realloc(*list, (size_t)(*n + 1) * sizeof *nl);
    if (!nl) return false;
    *list = nl;
    if (!(nl[*n] = tp_strdup(s))) return false;
    (*n)++;
    return true;
}

void ox_note_need_constant(ox_ctx *c, const tp_value *v) {
    if (!c->report || !v || v->kind != TP_VAL_NODE || tp_node_get_kind(v->u.node) != TP_NODE_PLACEHOLDER) return;
    for (int i = 0; i < c->n_state; i++)
        if (c->state[i].ph == v->u.node) return;
    if (!str_list_add(&c->report->need_constant, &c->report->n_need_constant, tp_node_target(v->u.node)))
        c->report_nomem = true;
}

/* ---- arguments ------------------------------------------------------------- */

void ox_args_init(ox_args *A) {
    A->n = 0;
    A->kw = tp_value_none();
    A->nomem = false;
}
void ox_args_clear(ox_args *A) {
    for (int i = 0; i < A->n; i++) tp_value_clear(&A->a[i]);
    A->n = 0;
    tp_value_clear(&A->kw);
}
void ox_arg(ox_args *A, tp_value v) {
    if (A->n < (int)TP_ARRAY_LEN(A->a)) A->a[A->n++] = v;
    else tp_value_clear(&v);
}
void ox_arg_ref(ox_args *A, const tp_value *v) {
    tp_value c = tp_value_none();
    if (v && tp_value_copy(v, &c) != TP_OK) {
        c = tp_value_none();
        A->nomem = true;
    }
    ox_arg(A, c);
}
void ox_arg_ints(ox_args *A, const int64_t *v, int n) {
    tp_value l = tp_value_none();
    if (tp_value_int_list(v, n, &l) != TP_OK) {
        l = tp_value_none();
        A->nomem = true;
    }
    ox_arg(A, l);
}
void ox_kw(ox_args *A, const char *name, tp_value v) {
    if ((A->kw.kind != TP_VAL_DICT && tp_value_dict(&A->kw) != TP_OK) || tp_value_dict_set(&A->kw, name, &v) != TP_OK) {
        tp_value_clear(&v);
        A->nomem = true;
    }
}
tp_status ox_args_status(const ox_args *A) {
    TP_UNUSED(A);
    return TP_OK;
}

tp_value ox_tensor_value(tp_tensor *t) { return tp_value_tensor(t); }

tp_status ox_scalar_tensor(tp_dtype dtype, double v, tp_value *out) {
    tp_tensor *t;
    TP_TRY(tp_tensor_scalar(dtype, v, &t));
    *out = tp_value_tensor(t);
    return TP_OK;
}

/* ---- state materialisation -------------------------------------------------- */

static void sanitize_target(const char *in, char *out, size_t size) {
    size_t n = 0;
    for (const char *p = in; *p && n + 1 < size; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                  (ch == '.' && n > 0 && out[n - 1] != '.');
        out[n++] = ok ? ch : '_';
    }
    while (n > 0 && out[n - 1] == '.') n--;
    if (n == 0) out[n++] = '_';
    out[n] = '\0';
}

static bool target_taken(ox_ctx *c, const char *t) {
    for (int i = 0; i < c->n_state; i++)
        if (strcmp(c->state[i].target, t) == 0) return true;
    return false;
}

/* A Python identifier made from an ONNX name ("input.1" -> "input_1"):
 * placeholder targets become forward argument names in archives. */
static void identifier_from(const char *name, char *out, size_t size) {
    size_t n = 0;
    if (!name || !*name || (name[0] >= '0' && name[0] <= '9')) out[n++] = '_';
    for (const char *p = name ? name : ""; *p && n + 1 < size; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
        out[n++] = ok ? ch : '_';
    }
    out[n] = '\0';
}

/* The placeholder node carrying constant tensor t (created on first use). */
static tp_status materialize(ox_ctx *c, tp_tensor *t, tp_node **out) {
    for (int i = 0; i < c->n_state; i++)
        if (c->state[i].t == t) {
            *out = c->state[i].ph;
            return TP_OK;
        }
    const char *init_name = NULL;
    for (int i = 0; i < c->n_inits; i++)
        if (c->inits[i].t == t) init_name = c->inits[i].name;
    char target[256], hint[300];
    tp_input_kind kind;
    if (init_name) {
        kind = TP_INPUT_PARAMETER;
        sanitize_target(init_name, target, sizeof target);
        if (target_taken(c, target)) {
            size_t l = strlen(target);
            for (int k = 1; target_taken(c, target); k++) snprintf(target + (l < 200 ? l : 200), 40, "_%d", k);
        }
        snprintf(hint, sizeof hint, "p_%s", target);
    } else {
        kind = TP_INPUT_CONSTANT_TENSOR;
        do snprintf(target, sizeof target, "_tensor_constant%d", c->n_consts++);
        while (target_taken(c, target));
        snprintf(hint, sizeof hint, "c%s", target);
    }
    if (c->n_state == c->cap_state) {
        int ncap = c->cap_state ? c->cap_state * 2 : 16;
        ox_state *ns = tp_realloc(c->state, (size_t)ncap * sizeof *ns);
        if (!ns) return tp_error(TP_ERR_NOMEM, "out of memory");
        c->state = ns;
        c->cap_state = ncap;
    }
    tp_tensor *meta;
    TP_TRY(tp_tensor_meta(tp_tensor_dtype(t), tp_tensor_ndim(t), tp_tensor_sizes(t), &meta));
    tp_value mv = tp_value_tensor(meta);
    tp_node *saved = tp_graph_insert_point(c->g);
    tp_status st = tp_graph_set_insert_point(c->g, c->anchor);
    tp_node *ph = NULL;
    char ident[300];
    identifier_from(hint, ident, sizeof ident);
    if (st == TP_OK) st = tp_graph_placeholder(c->g, ident, &mv, &ph);
    tp_graph_set_insert_point(c->g, saved);
    tp_value_clear(&mv);
    TP_TRY(st);
    ox_state *s = &c->state[c->n_state];
    s->target = tp_strdup(target);
    if (!s->target) return tp_error(TP_ERR_NOMEM, "out of memory");
    s->t = tp_tensor_retain(t);
    s->kind = kind;
    s->ph = ph;
    c->n_state++;
    *out = ph;
    return TP_OK;
}

/* Replace every tensor inside v (recursively) by its placeholder. */
static tp_status materialize_value(ox_ctx *c, tp_value *v) {
    if (v->kind == TP_VAL_TENSOR) {
        tp_node *n;
        TP_TRY(materialize(c, v->u.tensor, &n));
        tp_value_clear(v);
        *v = tp_value_node(n);
        return TP_OK;
    }
    if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE || v->kind == TP_VAL_DICT)
        for (int64_t i = 0; i < v->u.seq.n; i++) TP_TRY(materialize_value(c, &v->u.seq.items[i]));
    return TP_OK;
}

static bool has_node(const tp_value *v) {
    if (v->kind == TP_VAL_NODE) return true;
    if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE || v->kind == TP_VAL_DICT)
        for (int64_t i = 0; i < v->u.seq.n; i++)
            if (has_node(&v->u.seq.items[i])) return true;
    return false;
}

/* ---- the constant budget ------------------------------------------------------ */

static tp_status budget_error(ox_ctx *c, const char *what, int64_t numel, uint64_t nbytes, ...)
    __attribute__((format(printf, 2, 5)));
static tp_status budget_error(ox_ctx *c, const char *what, int64_t numel, uint64_t nbytes, ...) {
    va_list ap;
    va_start(ap, nbytes);
    char msg[96];
    vsnprintf(msg, sizeof msg, what, ap);
    va_end(ap);
    char lab[32];
    return tp_error(TP_ERR_NOMEM,
                    "node '%s' (%s, opset %" PRId64 "): %s of %" PRId64 " elements (%" PRIu64
                    " bytes) is over the import's constant budget of %zu bytes (tp_onnx_options.max_constant_bytes)",
                    node_label(c, lab, sizeof lab), c->node->op_type ? c->node->op_type : "?", c->opset, msg, numel,
                    nbytes, c->max_constant_bytes);
}

/* Bytes of numel elements of dtype, saturating at UINT64_MAX. */
static uint64_t bytes_of(tp_dtype dtype, int64_t numel) {
    uint64_t b;
    return __builtin_mul_overflow((uint64_t)numel, (uint64_t)tp_dtype_size(dtype), &b) ? UINT64_MAX : b;
}

tp_status ox_check_constant(ox_ctx *c, tp_dtype dtype, int ndim, const int64_t *sizes) {
    int64_t numel;
    TP_CHECK(ndim >= 0 && ndim <= TP_MAX_DIMS, TP_ERR_SHAPE, "rank %d not supported (max %d)", ndim, TP_MAX_DIMS);
    TP_TRY(tp__numel(ndim, sizes, &numel));
    uint64_t nbytes = bytes_of(dtype, numel);
    if (nbytes > c->max_constant_bytes) return budget_error(c, "a constant", numel, nbytes);
    return TP_OK;
}

tp_status ox_new_tensor(ox_ctx *c, tp_dtype dtype, int ndim, const int64_t *sizes, bool zero, tp_tensor **out) {
    *out = NULL;
    TP_TRY(ox_check_constant(c, dtype, ndim, sizes));
    return zero ? tp_tensor_zeros(dtype, ndim, sizes, out) : tp_tensor_empty(dtype, ndim, sizes, out);
}

/* The most elements of any tensor in v (recursively). */
static int64_t max_numel(const tp_value *v) {
    if (v->kind == TP_VAL_TENSOR) return tp_tensor_numel(v->u.tensor);
    int64_t m = 0;
    if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE || v->kind == TP_VAL_DICT)
        for (int64_t i = 0; i < v->u.seq.n; i++) {
            int64_t k = max_numel(&v->u.seq.items[i]);
            if (k > m) m = k;
        }
    return m;
}

/* Every tensor of the inferred result `meta` within the budget, or no
 * larger (in elements) than the largest operand. */
static tp_status check_fold(ox_ctx *c, tp_op op, const tp_value *meta, int64_t operand_numel) {
    if (meta->kind == TP_VAL_TENSOR) {
        int64_t numel = tp_tensor_numel(meta->u.tensor);
        uint64_t nbytes = bytes_of(tp_tensor_dtype(meta->u.tensor), numel);
        if (nbytes > c->max_constant_bytes && numel > operand_numel)
            return budget_error(c, "folding %s at import: its result", numel, nbytes, tp_op_name(op));
    } else if (meta->kind == TP_VAL_LIST || meta->kind == TP_VAL_TUPLE) {
        for (int64_t i = 0; i < meta->u.seq.n; i++) TP_TRY(check_fold(c, op, &meta->u.seq.items[i], operand_numel));
    }
    return TP_OK;
}

/* Run op eagerly on constant operands: bind, infer the result's shape and
 * check it against the budget, then run the kernel. */
static tp_status fold_call(ox_ctx *c, tp_op op, ox_args *A, tp_value *out) {
    const tp_schema *s = tp_op_schema(op);
    if (!s) return tp_op_call(op, A->a, A->n, A->kw.kind == TP_VAL_DICT ? &A->kw : NULL, out); /* its error */
    tp_value bound[64];
    TP_CHECK(s->n_args <= 64, TP_ERR_INTERNAL, "too many schema arguments");
    TP_TRY(tp_op_bind(op, A->a, A->n, A->kw.kind == TP_VAL_DICT ? &A->kw : NULL, bound));
    tp_value meta = tp_value_none();
    tp_status st = tp_op_infer(op, bound, &meta);
    int64_t operand_numel = 0;
    for (int i = 0; i < s->n_args; i++) {
        int64_t k = max_numel(&bound[i]);
        if (k > operand_numel) operand_numel = k;
    }
    if (st == TP_OK) st = check_fold(c, op, &meta, operand_numel);
    tp_value_clear(&meta);
    if (st == TP_OK) st = tp_op_call_bound(op, bound, out);
    for (int i = 0; i < s->n_args; i++) tp_value_clear(&bound[i]);
    return st;
}

tp_status ox_call(ox_ctx *c, tp_op op, ox_args *A, tp_value *out) {
    *out = tp_value_none();
    if (A->nomem) {
        ox_args_clear(A);
        return tp_error(TP_ERR_NOMEM, "out of memory building arguments");
    }
    bool graph = has_node(&A->kw);
    for (int i = 0; i < A->n && !graph; i++) graph = has_node(&A->a[i]);
    tp_status st;
    if (!graph) {
        st = fold_call(c, op, A, out);
        ox_args_clear(A);
        return st;
    }
    st = materialize_value(c, &A->kw);
    for (int i = 0; st == TP_OK && i < A->n; i++) st = materialize_value(c, &A->a[i]);
    tp_value args = tp_value_none();
    if (st == TP_OK) st = tp_value_tuple(A->n, &args);
    for (int i = 0; st == TP_OK && i < A->n; i++) st = tp_value_seq_set(&args, i, &A->a[i]);
    tp_node *n = NULL;
    const tp_value *kw = A->kw.kind == TP_VAL_DICT ? &A->kw : NULL;
    /* an operand whose size is known only when it runs (made by a
     * data-dependent op earlier in the same mapping) gives a node without
     * meta too */
    bool dd = false;
    for (int i = 0; i < A->n && !dd; i++) {
        const tp_value *a = &A->a[i];
        dd = a->kind == TP_VAL_NODE && tp_node_meta_val(a->u.node)->kind != TP_VAL_TENSOR;
        /* a list holding a number known only when it runs (item() of a run-time tensor) */
        for (int64_t k = 0; !dd && (a->kind == TP_VAL_LIST || a->kind == TP_VAL_TUPLE) && k < tp_value_len(a); k++) {
            const tp_value *it = tp_value_at(a, k);
            dd = it->kind == TP_VAL_NODE && tp_node_meta_val(it->u.node)->kind == TP_VAL_NONE;
        }
    }
    if (st == TP_OK && !dd) st = tp_graph_call_function(c->g, op, &args, kw, &n);
    if (st == TP_ERR_UNSUPPORTED && (tp_op_flags(op) & TP_OPF_DATA_DEPENDENT)) {
        tp_clear_error();
        st = TP_OK;
        dd = true;
    }
    /* a node without meta: only a graph output may use its value
     * (convert_nodes refuses the rest) */
    if (st == TP_OK && dd) st = tp_graph_create_node(c->g, TP_NODE_CALL_FUNCTION, tp_op_name(op), &args, kw, NULL, &n);
    tp_value_clear(&args);
    ox_args_clear(A);
    TP_TRY(st);
    if (!c->anchor) c->anchor = n;
    const tp_value *mv = tp_node_meta_val(n);
    if (mv->kind == TP_VAL_TUPLE || mv->kind == TP_VAL_LIST) {
        int64_t k = tp_value_len(mv);
        TP_TRY(tp_value_list(k, out));
        for (int64_t i = 0; i < k; i++) {
            tp_value ga = tp_value_none(), item;
            tp_node *gi;
            st = tp_value_tuple(2, &ga);
            tp_value a0 = tp_value_node(n), a1 = tp_value_int(i);
            if (st == TP_OK) st = tp_value_seq_set(&ga, 0, &a0);
            if (st == TP_OK) st = tp_value_seq_set(&ga, 1, &a1);
            if (st == TP_OK) st = tp_graph_call_function(c->g, TP_OP_GETITEM, &ga, NULL, &gi);
            tp_value_clear(&ga);
            if (st == TP_OK) {
                item = tp_value_node(gi);
                st = tp_value_seq_set(out, i, &item);
            }
            if (st != TP_OK) {
                tp_value_clear(out);
                return st;
            }
        }
        return TP_OK;
    }
    *out = tp_value_node(n);
    return TP_OK;
}

tp_status ox_call1(ox_ctx *c, tp_op op, const tp_value *x, tp_value *out) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    return ox_call(c, op, &A, out);
}
tp_status ox_call2(ox_ctx *c, tp_op op, const tp_value *x, const tp_value *y, tp_value *out) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ref(&A, y);
    return ox_call(c, op, &A, out);
}
tp_status ox_call3(ox_ctx *c, tp_op op, const tp_value *x, const tp_value *y, const tp_value *z, tp_value *out) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ref(&A, y);
    ox_arg_ref(&A, z);
    return ox_call(c, op, &A, out);
}
tp_status ox_cast(ox_ctx *c, const tp_value *x, tp_dtype dtype, tp_value *out) {
    const tp_tensor *m = ox_meta(x);
    if (m && tp_tensor_dtype(m) == dtype) return tp_value_copy(x, out);
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_dtype(dtype));
    return ox_call(c, TP_OP_TO, &A, out);
}

/* ---- report ------------------------------------------------------------------- */

static char *dup_or_empty(const char *s) { return tp_strdup(s ? s : ""); }

static void report_issue(ox_ctx *c, tp_onnx_report *r) {
    if (!r) return;
    tp_onnx_issue *ni = tp_realloc(r->issues, (size_t)(r->n_issues + 1) * sizeof *ni);
    if (!ni) {
        c->report_nomem = true;
        return;
    }
    r->issues = ni;
    char lab[32];
    tp_onnx_issue *is = &ni[r->n_issues];
    is->node = dup_or_empty(node_label(c, lab, sizeof lab));
    is->op_type = dup_or_empty(c->node->op_type);
    is->domain = dup_or_empty(c->node->domain);
    is->opset = c->opset;
    is->message = dup_or_empty(tp_last_error());
    if (!is->node || !is->op_type || !is->domain || !is->message) {
        c->report_nomem = true;
        tp_free(is->node);
        tp_free(is->op_type);
        tp_free(is->domain);
        tp_free(is->message);
        return;
    }
    r->n_issues++;
}

void tp_onnx_report_clear(tp_onnx_report *r) {
    if (!r) return;
    for (int i = 0; i < r->n_issues; i++) {
        tp_free(r->issues[i].node);
        tp_free(r->issues[i].op_type);
        tp_free(r->issues[i].domain);
        tp_free(r->issues[i].message);
    }
    tp_free(r->issues);
    tp_free(r->producer);
    tp_free(r->op_types);
    for (int i = 0; i < r->n_inputs; i++) tp_free(r->inputs[i]);
    tp_free(r->inputs);
    for (int i = 0; i < r->n_need_constant; i++) tp_free(r->need_constant[i]);
    tp_free(r->need_constant);
    for (int i = 0; i < r->n_outputs; i++) tp_free(r->outputs[i]);
    tp_free(r->outputs);
    for (int i = 0; i < r->n_strings; i++) tp_free(r->strings[i]);
    tp_free(r->strings);
    memset(r, 0, sizeof *r);
}

void tp_onnx_report_print(const tp_onnx_report *r, FILE *f) {
    if (!r) return;
    fprintf(f, "ONNX model: ir_version %" PRId64 ", opset %" PRId64 ", producer '%s', %d nodes\n", r->ir_version,
            r->opset, r->producer ? r->producer : "", r->n_nodes);
    if (!r->n_issues) {
        fprintf(f, "all nodes supported\n");
        return;
    }
    fprintf(f, "%d unsupported node%s:\n", r->n_issues, r->n_issues == 1 ? "" : "s");
    for (int i = 0; i < r->n_issues; i++) fprintf(f, "  %s\n", r->issues[i].message);
}

tp_status tp_onnx_parse_dim_range(const char *spec, tp_onnx_dim_range *out) {
    const char *eq = spec ? strchr(spec, '=') : NULL;
    TP_CHECK(eq && eq != spec, TP_ERR_INVALID_ARG, "dynamic dim spec '%s' is not name=min:max", spec ? spec : "");
    char *end;
    long long mn = strtoll(eq + 1, &end, 10);
    TP_CHECK(end != eq + 1 && mn >= 0, TP_ERR_INVALID_ARG, "dynamic dim spec '%s': bad minimum", spec);
    long long mx = INT64_MAX;
    if (*end == ':') {
        const char *q = end + 1;
        if (*q && strcmp(q, "inf") != 0) {
            mx = strtoll(q, &end, 10);
            TP_CHECK(end != q && !*end && mx >= mn, TP_ERR_INVALID_ARG, "dynamic dim spec '%s': bad maximum", spec);
        }
    } else {
        TP_CHECK(!*end, TP_ERR_INVALID_ARG, "dynamic dim spec '%s' is not name=min:max", spec);
    }
    out->name = spec; /* up to '=' - callers compare with strncmp */
    out->min = mn;
    out->max = mx;
    return TP_OK;
}

/* ---- the import ----------------------------------------------------------------- */

typedef struct sym_site {
    char *symbol;
    char *input; /* placeholder name */
    int dim;
} sym_site;

typedef struct import_job {
    const Onnx__ModelProto *model;
    const char *base_dir;
    const tp_onnx_options *opts;
    tp_onnx_report *report;
    ox_ctx c;
    sym_site *sites;
    int n_sites;
    tp_node **user_ph;
    const char **user_names; /* their ONNX names (borrowed from the model) */
    int n_user;
    tp_value *examples; /* per user input, None when dynamic */
} import_job;

static const tp_onnx_dim_range *find_range(const tp_onnx_options *o, const char *name) {
    for (int i = 0; o && i < o->n_dim_ranges; i++) {
        const char *n = o->dim_ranges[i].name;
        if (!n) continue;
        const char *eq = strchr(n, '=');
        size_t len = eq ? (size_t)(eq - n) : strlen(n);
        if (strlen(name) == len && strncmp(n, name, len) == 0) return &o->dim_ranges[i];
    }
    return NULL;
}

static bool is_initializer(const Onnx__GraphProto *g, const char *name) {
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i] && g->initializer[i]->name && strcmp(g->initializer[i]->name, name) == 0) return true;
    return false;
}

static tp_status add_user_input(import_job *J, const Onnx__ValueInfoProto *vi) {
    ox_ctx *c = &J->c;
    const char *name = vi->name;
    const Onnx__TypeProto *ty = vi->type;
    if (ty && ty->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE)
        return tp_error(TP_ERR_UNSUPPORTED,
                        "graph input '%s' is a sequence: only tensor inputs are supported (sequences are tracked while "
                        "importing, so their length must be known then)", name);
    if (ty && ty->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE)
        return tp_error(TP_ERR_UNSUPPORTED, "graph input '%s' is an optional: only tensor inputs are supported", name);
    if (!ty || ty->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !ty->tensor_type)
        return tp_error(TP_ERR_UNSUPPORTED, "graph input '%s': only tensor inputs are supported", name);
    const Onnx__TypeProto__Tensor *tt = ty->tensor_type;
    tp_dtype dt = TP_UINT8;
    /* strings: UTF-8 bytes, one more dim (the width, dynamic) */
    bool is_str = tt->has_elem_type && tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__STRING;
    tp_status st = is_str ? TP_OK : tp__onnx_dtype(tt->has_elem_type ? tt->elem_type : 0, &dt);
    if (st != TP_OK) {
        tp_error_context("graph input '%s'", name);
        return st;
    }
    if (!tt->shape) return tp_error(TP_ERR_UNSUPPORTED, "graph input '%s' has no declared shape", name);
    if (tt->shape->n_dim + is_str > TP_MAX_DIMS)
        return tp_error(TP_ERR_UNSUPPORTED, "graph input '%s' has %zu dims (at most %d)", name, tt->shape->n_dim,
                        TP_MAX_DIMS - is_str);
    int nd = (int)tt->shape->n_dim;
    int64_t sizes[TP_MAX_DIMS];
    bool dyn = false;
    const char *syms[TP_MAX_DIMS];
    char anon[TP_MAX_DIMS][64];
    for (int d = 0; d < nd; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        syms[d] = NULL;
        if (dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (dim->dim_value < 0 || dim->dim_value > ((int64_t)1 << 40))
                return tp_error(TP_ERR_CORRUPT, "graph input '%s': dim %d has size %" PRId64, name, d, dim->dim_value);
            sizes[d] = dim->dim_value;
        } else {
            if (dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dim->dim_param &&
                dim->dim_param[0]) {
                syms[d] = dim->dim_param;
            } else {
                snprintf(anon[d], sizeof anon[d], "%.40s_dim%d", name, d);
                syms[d] = anon[d];
            }
            const tp_onnx_dim_range *r = find_range(J->opts, syms[d]);
            int64_t hint = 2;
            if (r) hint = r->min > 2 ? r->min : (r->max < 2 ? r->max : 2);
            sizes[d] = hint;
            dyn = true;
        }
    }
    if (is_str) { /* the byte width: "<input>_bytes" */
        snprintf(anon[nd], sizeof anon[nd], "%.40s_bytes", name);
        syms[nd] = anon[nd];
        const tp_onnx_dim_range *r = find_range(J->opts, syms[nd]);
        sizes[nd] = r ? (r->min > 2 ? r->min : (r->max < 2 ? r->max : 2)) : 2;
        dyn = true;
        nd++;
    }
    tp_tensor *meta;
    TP_TRY(tp_tensor_meta(dt, nd, sizes, &meta));
    tp_value mv = tp_value_tensor(meta);
    tp_node *ph = NULL;
    char ident[256];
    identifier_from(name, ident, sizeof ident);
    /* the model's own name, as is ("X" stays "X"), when it is an identifier */
    st = tp__graph_create_node_named(c->g, TP_NODE_PLACEHOLDER, ident, NULL, NULL, ident, &ph);
    if (st == TP_OK) st = tp_node_set_meta_val(ph, &mv);
    tp_value_clear(&mv);
    TP_TRY(st);
    if (!c->anchor) c->anchor = ph;
    J->user_ph[J->n_user] = ph;
    J->user_names[J->n_user] = name;
    J->examples[J->n_user] = tp_value_none();
    int64_t numel;
    TP_TRY(tp__numel(nd, sizes, &numel));
    if (!dyn && bytes_of(dt, numel) <= c->max_constant_bytes) { /* larger: no example */
        tp_tensor *z;
        TP_TRY(tp_tensor_zeros(dt, nd, sizes, &z));
        J->examples[J->n_user] = tp_value_tensor(z);
    }
    J->n_user++;
    for (int d = 0; dyn && d < nd; d++) {
        sym_site *ns = tp_realloc(J->sites, (size_t)(J->n_sites + 1) * sizeof *ns);
        if (!ns) return tp_error(TP_ERR_NOMEM, "out of memory");
        J->sites = ns;
        char stat[32];
        snprintf(stat, sizeof stat, "=%" PRId64, sizes[d]); /* a static dim: "=size" */
        sym_site *s = &ns[J->n_sites];
        s->symbol = tp_strdup(syms[d] ? syms[d] : stat);
        s->input = tp_strdup(tp_node_name(ph));
        s->dim = d;
        if (!s->symbol || !s->input) {
            tp_free(s->symbol);
            tp_free(s->input);
            return tp_error(TP_ERR_NOMEM, "out of memory");
        }
        J->n_sites++;
    }
    tp_value nv = tp_value_node(ph);
    TP_TRY(tab_set(c, name, &nv, dyn, false));
    if (is_str) {
        tab_find(c, name)->str = true;
        if (c->report && !str_list_add(&c->report->strings, &c->report->n_strings, name)) c->report_nomem = true;
    }
    return TP_OK;
}

/* A value given for graph input vi (tp_onnx_options.input_values) has its
 * declared element type and static dims. */
static tp_status check_input_value(const Onnx__ValueInfoProto *vi, const tp_tensor *t) {
    const Onnx__TypeProto *ty = vi->type;
    if (!ty || ty->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !ty->tensor_type) return TP_OK;
    const Onnx__TypeProto__Tensor *tt = ty->tensor_type;
    tp_dtype dt;
    if (tt->has_elem_type && tp__onnx_dtype(tt->elem_type, &dt) == TP_OK && dt != tp_tensor_dtype(t))
        return tp_error(TP_ERR_TYPE, "value given for graph input '%s' is %s, the input is declared %s", vi->name,
                        tp_dtype_name(tp_tensor_dtype(t)), tp_dtype_name(dt));
    tp_clear_error();
    if (!tt->shape) return TP_OK;
    if ((int)tt->shape->n_dim != tp_tensor_ndim(t))
        return tp_error(TP_ERR_SHAPE, "value given for graph input '%s' has %d dims, the input is declared with %zu",
                        vi->name, tp_tensor_ndim(t), tt->shape->n_dim);
    for (size_t d = 0; d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        if (dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
            dim->dim_value != tp_tensor_sizes(t)[d])
            return tp_error(TP_ERR_SHAPE, "value given for graph input '%s' has size %" PRId64 " at dim %zu, declared %" PRId64,
                            vi->name, tp_tensor_sizes(t)[d], d, dim->dim_value);
    }
    return TP_OK;
}

/* Every input value given names a graph input (not an initializer). */
static tp_status check_input_values_used(const tp_onnx_options *o, const Onnx__GraphProto *g) {
    for (int k = 0; o && k < o->n_input_values; k++) {
        const char *name = o->input_value_names[k];
        if (!name) continue;
        bool found = false;
        for (size_t i = 0; i < g->n_input && !found; i++)
            found = g->input[i] && g->input[i]->name && !strcmp(g->input[i]->name, name) && !is_initializer(g, name);
        if (found) continue;
        char names[256] = "";
        size_t at = 0;
        for (size_t i = 0; i < g->n_input && at < sizeof names - 1; i++)
            if (g->input[i] && g->input[i]->name && !is_initializer(g, g->input[i]->name))
                at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", at ? ", " : "", g->input[i]->name);
        return tp_error(TP_ERR_INVALID_ARG, "input value '%s' names no graph input (%s%s)", name,
                        at ? "its inputs: " : "it has none", names);
    }
    return TP_OK;
}

/* Every range given names a dim of the model. */
static tp_status check_ranges_used(const import_job *J) {
    const tp_onnx_options *o = J->opts;
    for (int i = 0; o && i < o->n_dim_ranges; i++) {
        const char *n = o->dim_ranges[i].name;
        if (!n) continue;
        size_t len = strcspn(n, "=");
        bool found = false;
        for (int k = 0; k < J->n_sites && !found; k++)
            found = strlen(J->sites[k].symbol) == len && strncmp(J->sites[k].symbol, n, len) == 0;
        if (found) continue;
        char dims[256] = "";
        size_t at = 0;
        for (int k = 0; k < J->n_sites && at < sizeof dims - 1; k++) {
            const char *sym = J->sites[k].symbol;
            bool seen = sym[0] == '=';
            for (int q = 0; q < k && !seen; q++) seen = strcmp(J->sites[q].symbol, sym) == 0;
            if (!seen) at += (size_t)snprintf(dims + at, sizeof dims - at, "%s%s", at ? ", " : "", sym);
        }
        return tp_error(TP_ERR_INVALID_ARG, "dim range '%.*s' names no dim of the model (%s%s)", (int)len, n,
                        at ? "its symbolic dims: " : "it has no symbolic dims", dims);
    }
    return TP_OK;
}

static tp_status add_constraints(import_job *J, tp_program *p) {
    TP_TRY(check_ranges_used(J));
    for (int i = 0; i < J->n_sites; i++) {
        sym_site *s = &J->sites[i];
        tp_dim_rule rule;
        memset(&rule, 0, sizeof rule);
        rule.site.input = s->input;
        rule.site.dim = s->dim;
        if (s->symbol[0] == '=') {
            rule.kind = TP_DIM_STATIC;
            rule.value = strtoll(s->symbol + 1, NULL, 10);
        } else {
            rule.kind = TP_DIM_SYMBOL;
            rule.symbol = s->symbol;
        }
        TP_TRY(tp_program_add_dim_rule(p, &rule));
    }
    for (int i = 0; i < J->n_sites; i++) {
        sym_site *s = &J->sites[i];
        if (s->symbol[0] == '=') continue;
        bool first = true;
        for (int k = 0; k < i; k++)
            if (strcmp(J->sites[k].symbol, s->symbol) == 0) first = false;
        if (!first) continue;
        const tp_onnx_dim_range *r = find_range(J->opts, s->symbol);
        TP_TRY(tp_program_add_range(p, s->symbol, r ? r->min : 0, r ? r->max : TP_DIM_UNBOUNDED));
        tp_dim_site sites[64];
        int n = 0;
        for (int k = i; k < J->n_sites && n < 64; k++)
            if (strcmp(J->sites[k].symbol, s->symbol) == 0) {
                sites[n].input = J->sites[k].input;
                sites[n].dim = J->sites[k].dim;
                n++;
            }
        if (n >= 2) TP_TRY(tp_program_add_equality(p, sites, n, s->symbol));
    }
    return TP_OK;
}

static int64_t find_opset(const Onnx__ModelProto *m) {
    int64_t v = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (!o) continue;
        if (!o->domain || !o->domain[0] || strcmp(o->domain, "ai.onnx") == 0) v = o->has_version ? o->version : v;
    }
    return v;
}

static int64_t find_training_opset(const Onnx__ModelProto *m) {
    int64_t v = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (o && is_training_domain(o->domain)) v = o->has_version ? o->version : 1;
    }
    return v;
}

/* Convert nodes[0..n_nodes) in order. report: where issues go (NULL for a
 * subgraph: its node's error is the issue); report_all: go on after an
 * unsupported node, marking its outputs failed. */
static tp_status convert_node_list(ox_ctx *c, Onnx__NodeProto *const *nodes, size_t n_nodes, tp_onnx_report *report,
                                   bool report_all, tp_status *first_error) {
    c->nodes = nodes;
    c->n_nodes = n_nodes;
    for (size_t k = 0; k < n_nodes; k++) {
        const Onnx__NodeProto *n = nodes[k];
        if (!n) continue;
        c->node = n;
        c->node_index = (int)k;
        bool failed = false, dyn = false;
        for (size_t i = 0; i < n->n_input; i++) {
            if (!n->input[i] || !n->input[i][0]) continue;
            ox_entry *e = tab_find(c, n->input[i]);
            if (!e) {
                tp_status st = ox_bad(c, "input '%s' is not defined before use", n->input[i]);
                report_issue(c, report);
                if (*first_error == TP_OK) *first_error = st;
                failed = true;
                break;
            }
            failed |= e->failed;
            dyn |= e->dyn;
            if (!failed && e->v.kind == TP_VAL_NODE && tp_node_meta_val(e->v.u.node)->kind != TP_VAL_TENSOR) {
                tp_status st = ox_unsupported(c, "input '%s' has a data-dependent shape (known only when the program "
                                                 "runs): only a graph output may use it", n->input[i]);
                report_issue(c, report);
                if (*first_error == TP_OK) *first_error = st;
                failed = true;
            }
        }
        c->node_dyn = dyn;
        tp_status st = TP_OK;
        bool done = false;
        /* strings (UTF-8 bytes) go only where they are understood */
        bool str_in = false;
        for (size_t i = 0; !failed && i < n->n_input; i++) str_in |= ox_in_str(c, (int)i);
        bool str_op = n->op_type && (!strcmp(n->op_type, "Identity") || !strcmp(n->op_type, "StringNormalizer") ||
                                     !strcmp(n->op_type, "Equal") || !strcmp(n->op_type, "StringConcat"));
        if (!failed && str_in && !str_op) {
            st = ox_unsupported(c, "string tensors are supported by Identity, StringNormalizer, Equal and StringConcat "
                                   "only");
            report_issue(c, report);
            if (*first_error == TP_OK) *first_error = st;
            failed = true;
        }
        if (!failed && n->op_type && (!n->domain || !n->domain[0] || !strcmp(n->domain, "ai.onnx")) && c->opset >= 0) {
            /* shape values: computed as symbolic ints where the op allows it,
             * otherwise made into tensors for the op's ordinary mapping */
            st = tp__onnx_convert_shape_node(c, n->op_type, &done);
            for (size_t i = 0; st == TP_OK && !done && i < n->n_input; i++) {
                ox_entry *e = in_entry(c, (int)i);
                const tp_value *unused;
                if (e) st = entry_operand(c, e, &unused);
            }
            /* shapes, axes and counts given when the program runs */
            if (st == TP_OK && !done) st = tp__onnx_convert_shape_data(c, n->op_type, &done);
            if (st != TP_OK) {
                if (st == TP_ERR_NOMEM) return st;
                report_issue(c, report);
                if (*first_error == TP_OK) *first_error = st;
                failed = true;
            }
        }
        if (!failed && !done) {
            bool training = is_training_domain(n->domain);
            if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0 && !training)
                st = ox_unsupported(c, "domain '%s' is not supported", n->domain);
            else if (!n->op_type)
                st = ox_bad(c, "node without op_type");
            else if (training && c->training_opset < 0)
                st = ox_bad(c, "the model does not import domain '%s'", OX_TRAINING_DOMAIN);
            else if (!training && c->opset < 0)
                st = ox_bad(c, "the model does not import the default operator set");
            else {
                st = training ? tp__onnx_convert_training_node(c, n->op_type) : tp__onnx_convert_node(c, n->op_type);
                if (st != TP_OK && !strstr(tp_last_error(), "node '")) {
                    char lab[32];
                    tp_error_context("node '%s' (%s, opset %" PRId64 ")", node_label(c, lab, sizeof lab), n->op_type,
                                     node_opset(c));
                }
            }
            for (size_t i = 0; st == TP_OK && i < n->n_output; i++)
                if (ox_out_used(c, (int)i) && !tab_find(c, n->output[i]))
                    st = ox_unsupported(c, "output %zu is not produced", i);
            if (st == TP_OK && str_in && !strcmp(n->op_type, "Identity")) ox_set_out_str(c, 0);
            if (st != TP_OK) {
                if (st == TP_ERR_NOMEM) return st;
                report_issue(c, report);
                if (*first_error == TP_OK) *first_error = st;
                failed = true;
            }
        }
        if (failed) {
            if (!report_all) return *first_error != TP_OK ? *first_error : TP_ERR_UNSUPPORTED;
            for (size_t i = 0; i < n->n_output; i++)
                if (ox_out_used(c, (int)i)) {
                    tp_value none = tp_value_none();
                    TP_TRY(tab_set(c, n->output[i], &none, dyn, true));
                }
        }
    }
    return *first_error;
}

static tp_status convert_nodes(import_job *J, tp_status *first_error) {
    const Onnx__GraphProto *g = J->model->graph;
    return convert_node_list(&J->c, g->node, g->n_node, J->report, J->opts && J->opts->report_all, first_error);
}

tp_status ox_convert_subgraph(ox_ctx *c, const Onnx__GraphProto *g) {
    const Onnx__NodeProto *node = c->node;
    int index = c->node_index;
    bool dyn = c->node_dyn;
    if (c->depth + 1 > OX_MAX_SUBGRAPH_DEPTH)
        return ox_unsupported(c, "subgraphs nested more than %d deep", OX_MAX_SUBGRAPH_DEPTH);
    /* unrolled loops convert their bodies again and again: bounded in all */
    if (g->n_node > OX_MAX_SUBGRAPH_NODES - c->sub_nodes)
        return ox_unsupported(c, "subgraphs converted at import would exceed %zu nodes in all (unrolled loops)",
                              OX_MAX_SUBGRAPH_NODES);
    c->sub_nodes += g->n_node;
    c->depth++;
    tp_status first = TP_OK;
    Onnx__NodeProto *const *nodes = c->nodes;
    size_t n_nodes = c->n_nodes;
    tp_status st = convert_node_list(c, g->node, g->n_node, NULL, false, &first);
    c->depth--;
    c->node = node;
    c->node_index = index;
    c->nodes = nodes;
    c->n_nodes = n_nodes;
    c->node_dyn = dyn;
    if (st != TP_OK) tp_error_context("in subgraph '%s' of node '%s' (%s)", g->name ? g->name : "",
                                      node->name ? node->name : "", node->op_type ? node->op_type : "");
    return st;
}

/* The root module call: user inputs and outputs, and as forward argument
 * names the model's own input names, which calls accept as keywords
 * (tp_program_call): the record of "input.1" for placeholder "input_1". */
static tp_status add_root_call(import_job *J, tp_program *p) {
    const tp_signature *sig = tp_program_signature(p);
    int n_in = tp_signature_n_inputs(sig), n_out = tp_signature_n_outputs(sig), n_user = 0;
    tp_arg_spec *ins = tp_calloc((size_t)n_in + 1, sizeof *ins), *outs = tp_calloc((size_t)n_out + 1, sizeof *outs);
    char **fwd = tp_calloc((size_t)n_in + 1, sizeof *fwd);
    tp_status st = ins && outs && fwd ? TP_OK : tp_error(TP_ERR_NOMEM, "out of memory");
    for (int i = 0; st == TP_OK && i < n_in; i++) {
        const tp_input_spec *s = tp_signature_input(sig, i);
        if (s->kind != TP_INPUT_USER_INPUT) continue;
        const char *onnx_name = s->arg.name;
        for (int k = 0; k < J->n_user; k++)
            if (!strcmp(tp_node_name(J->user_ph[k]), s->arg.name) && J->user_names[k]) onnx_name = J->user_names[k];
        ins[n_user] = tp_arg_tensor(s->arg.name);
        fwd[n_user++] = (char *)onnx_name;
    }
    for (int i = 0; st == TP_OK && i < n_out; i++) outs[i] = tp_arg_tensor(tp_signature_output(sig, i)->arg.name);
    if (st == TP_OK) {
        tp_module_call_signature ms = {.n_inputs = n_user, .inputs = ins, .n_outputs = n_out, .outputs = outs,
                                       .n_forward_arg_names = n_user, .forward_arg_names = fwd};
        st = tp_program_add_module_call(p, "", &ms);
    }
    tp_free(ins);
    tp_free(outs);
    tp_free(fwd);
    return st;
}

static tp_status build_program(import_job *J, tp_program **out) {
    ox_ctx *c = &J->c;
    const Onnx__GraphProto *g = J->model->graph;
    /* output node */
    tp_value outs = tp_value_none();
    TP_TRY(tp_value_tuple((int64_t)g->n_output, &outs));
    tp_status st = TP_OK;
    bool seq_out = false;
    for (size_t i = 0; st == TP_OK && i < g->n_output; i++) {
        const char *name = g->output[i] ? g->output[i]->name : NULL;
        ox_entry *e = name ? tab_find(c, name) : NULL;
        if (!e || e->v.kind == TP_VAL_NONE) {
            st = tp_error(TP_ERR_CORRUPT, "graph output '%s' is not produced by any node", name ? name : "");
            break;
        }
        if (e->str && c->report && !str_list_add(&c->report->strings, &c->report->n_strings, name))
            c->report_nomem = true;
        tp_value v = tp_value_none();
        const tp_value *src = NULL;
        st = entry_operand(c, e, &src);
        if (st == TP_OK) st = tp_value_copy(src, &v);
        if (st == TP_OK && (v.kind == TP_VAL_TENSOR || v.kind == TP_VAL_LIST)) st = materialize_value(c, &v);
        if (v.kind == TP_VAL_LIST) { /* a sequence: a list output, one leaf per tensor */
            seq_out = true;
            for (int64_t k = 0; st == TP_OK && k < tp_value_len(&v); k++)
                if (tp_value_at(&v, k)->kind != TP_VAL_NODE)
                    st = tp_error(TP_ERR_UNSUPPORTED, "graph output '%s': item %" PRId64 " is not a tensor", name, k);
        } else if (st == TP_OK && v.kind == TP_VAL_TUPLE) {
            st = tp_error(TP_ERR_UNSUPPORTED, "graph output '%s' is an optional: optional outputs are not supported", name);
        } else if (st == TP_OK && v.kind != TP_VAL_NODE) {
            st = tp_error(TP_ERR_UNSUPPORTED, "graph output '%s' is not a tensor", name);
        }
        if (st == TP_OK) st = tp_value_seq_set(&outs, (int64_t)i, &v);
        tp_value_clear(&v); /* None once taken over */
    }
    /* the nodes making the outputs take the outputs' names ("logits"), where
     * the name is free and the node makes no earlier output */
    for (size_t i = 0; st == TP_OK && i < g->n_output; i++) {
        if (tp_value_at(&outs, (int64_t)i)->kind != TP_VAL_NODE) continue;
        tp_node *n = tp_value_at(&outs, (int64_t)i)->u.node;
        char ident[256];
        identifier_from(g->output[i]->name, ident, sizeof ident);
        bool earlier = false;
        for (size_t k = 0; k < i; k++) earlier = earlier || tp_value_at(&outs, (int64_t)k)->u.node == n;
        if (earlier || tp_node_get_kind(n) == TP_NODE_PLACEHOLDER || !strcmp(ident, "output") ||
            !strcmp(tp_node_name(n), ident) || tp_graph_find_node(c->g, ident))
            continue;
        st = tp_node_rename(n, ident);
    }
    tp_node *out_node = NULL;
    if (st == TP_OK) st = tp_graph_set_insert_point(c->g, NULL);
    if (st == TP_OK) st = tp_graph_output(c->g, &outs, &out_node);
    if (st == TP_OK) st = tp_graph_eliminate_dead_code(c->g, NULL);
    /* signature: placeholders in graph order */
    tp_signature *sig = NULL;
    if (st == TP_OK) st = tp_signature_new(&sig);
    for (tp_node *n = tp_graph_first_node(c->g); st == TP_OK && n; n = tp_node_next(n)) {
        if (tp_node_get_kind(n) != TP_NODE_PLACEHOLDER) continue;
        ox_state *s = NULL;
        for (int i = 0; i < c->n_state && !s; i++)
            if (c->state[i].ph == n) s = &c->state[i];
        if (s) st = tp_signature_add_input(sig, s->kind, tp_arg_tensor(tp_node_name(n)), s->target, TP_PERSISTENT_UNSET);
        else st = tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor(tp_node_name(n)), NULL,
                                         TP_PERSISTENT_UNSET);
    }
    /* one output spec per leaf; with sequence outputs the out_spec gives
     * the call's result its lists back */
    tp_value leaves = tp_value_none();
    tp_treespec *out_spec = NULL;
    if (st == TP_OK) st = tp_pytree_flatten(&outs, &leaves, &out_spec);
    for (int64_t i = 0; st == TP_OK && i < tp_value_len(&leaves); i++) {
        const tp_value *v = tp_value_at(&leaves, i);
        st = tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(v->u.node)), NULL);
    }
    tp_value_clear(&leaves);
    tp_value_clear(&outs);
    if (st != TP_OK) {
        tp_treespec_free(out_spec);
        tp_signature_free(sig);
        return st;
    }
    tp_graph *graph = c->g;
    c->g = NULL;
    tp_program *p = NULL;
    st = tp_program_new(graph, sig, &p);
    if (st == TP_OK && seq_out) st = tp_program_set_out_spec(p, out_spec);
    tp_treespec_free(out_spec);
    if (st != TP_OK) {
        tp_program_free(p);
        return st;
    }
    for (int i = 0; st == TP_OK && i < c->n_state; i++)
        st = tp_program_set_state(p, c->state[i].target,
                                  c->state[i].kind == TP_INPUT_PARAMETER ? TP_STATE_PARAMETER : TP_STATE_CONSTANT,
                                  c->state[i].t, false);
    for (int i = 0; st == TP_OK && i < J->n_user; i++)
        if (J->examples[i].kind != TP_VAL_NONE)
            st = tp_program_set_example_input(p, tp_node_name(J->user_ph[i]), &J->examples[i]);
    if (st == TP_OK) st = add_constraints(J, p);
    if (st == TP_OK) st = add_root_call(J, p);
    if (st == TP_OK) st = tp_program_validate(p);
    if (st != TP_OK) {
        tp_program_free(p);
        return st;
    }
    *out = p;
    return TP_OK;
}

static void job_free(import_job *J) {
    ox_ctx *c = &J->c;
    for (size_t i = 0; i < c->cap; i++)
        if (c->tab[i].name) {
            tp_free(c->tab[i].name);
            tp_value_clear(&c->tab[i].v);
            tp_value_clear(&c->tab[i].mat);
        }
    tp_free(c->tab);
    for (int i = 0; i < c->n_state; i++) {
        tp_free(c->state[i].target);
        tp_tensor_free(c->state[i].t);
    }
    tp_free(c->state);
    tp_free(c->inits);
    tp_graph_free(c->g);
    for (int i = 0; i < J->n_sites; i++) {
        tp_free(J->sites[i].symbol);
        tp_free(J->sites[i].input);
    }
    tp_free(J->sites);
    for (int i = 0; i < J->n_user; i++) tp_value_clear(&J->examples[i]);
    tp_free(J->examples);
    tp_free(J->user_ph);
    tp_free(J->user_names);
}

static tp_status import_model(import_job *J, tp_program **out) {
    const Onnx__ModelProto *m = J->model;
    ox_ctx *c = &J->c;
    tp_onnx_report *r = J->report;
    c->report = r;
    c->opset = find_opset(m);
    c->training_opset = find_training_opset(m);
    c->max_constant_bytes =
        J->opts && J->opts->max_constant_bytes ? J->opts->max_constant_bytes : OX_DEFAULT_MAX_CONSTANT_BYTES;
    if (r) {
        r->ir_version = m->has_ir_version ? m->ir_version : 0;
        r->opset = c->opset;
        char prod[256];
        snprintf(prod, sizeof prod, "%s%s%s", m->producer_name ? m->producer_name : "",
                 m->producer_version && m->producer_version[0] ? " " : "",
                 m->producer_version ? m->producer_version : "");
        r->producer = tp_strdup(prod);
        if (!r->producer) c->report_nomem = true;
        r->n_nodes = m->graph ? (int)m->graph->n_node : 0;
        tp_sb sb = {0};
        for (size_t k = 0; m->graph && k < m->graph->n_node; k++) {
            const Onnx__NodeProto *n = m->graph->node[k];
            if (!n || !n->op_type) continue;
            bool seen = false;
            for (size_t j = 0; j < k && !seen; j++)
                seen = m->graph->node[j] && m->graph->node[j]->op_type && strcmp(m->graph->node[j]->op_type, n->op_type) == 0;
            if (!seen) tp__sb_printf(&sb, "%s%s", sb.len ? " " : "", n->op_type);
        }
        if (sb.len || sb.failed) {
            if (tp__sb_finish(&sb, &r->op_types) != TP_OK) c->report_nomem = true;
        } else {
            tp__sb_free(&sb);
        }
    }
    TP_CHECK(m->graph, TP_ERR_CORRUPT, "ONNX model has no graph");
    TP_CHECK(c->opset >= 0 || c->training_opset >= 0, TP_ERR_UNSUPPORTED,
             "ONNX model does not import the default operator set (nor " OX_TRAINING_DOMAIN ")");
    TP_CHECK(c->training_opset <= OX_MAX_TRAINING_OPSET, TP_ERR_UNSUPPORTED,
             "ONNX " OX_TRAINING_DOMAIN " opset %" PRId64 " is newer than supported (%d)", c->training_opset,
             OX_MAX_TRAINING_OPSET);
    TP_CHECK(c->opset <= OX_MAX_OPSET, TP_ERR_UNSUPPORTED, "ONNX opset %" PRId64 " is newer than supported (%d)",
             c->opset, OX_MAX_OPSET);
    const Onnx__GraphProto *g = m->graph;
    TP_CHECK(g->n_sparse_initializer == 0, TP_ERR_UNSUPPORTED, "sparse initializers are not supported");
    TP_TRY(tp_graph_new(&c->g));
    J->user_ph = tp_calloc(g->n_input + 1, sizeof *J->user_ph);
    J->user_names = tp_calloc(g->n_input + 1, sizeof *J->user_names);
    J->examples = tp_calloc(g->n_input + 1, sizeof *J->examples);
    c->inits = tp_calloc(g->n_initializer + 1, sizeof *c->inits);
    TP_CHECK(J->user_ph && J->user_names && J->examples && c->inits, TP_ERR_NOMEM, "out of memory");
    /* initializers */
    size_t budget = J->opts && J->opts->max_external_bytes ? J->opts->max_external_bytes : ((size_t)16 << 30);
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *tp = g->initializer[i];
        TP_CHECK(tp && tp->name && tp->name[0], TP_ERR_CORRUPT, "initializer %zu has no name", i);
        tp_tensor *t;
        TP_TRY(tp__onnx_tensor(tp, J->base_dir, &budget, &t));
        c->inits[c->n_inits].name = tp->name;
        c->inits[c->n_inits].t = t;
        c->n_inits++;
        tp_value v = tp_value_tensor(t);
        TP_TRY(tab_set(c, tp->name, &v, false, false));
        tab_find(c, tp->name)->str = tp->has_data_type && tp->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__STRING;
    }
    for (size_t i = 0; r && i < g->n_output; i++)
        if (g->output[i] && g->output[i]->name && !str_list_add(&r->outputs, &r->n_outputs, g->output[i]->name))
            c->report_nomem = true;
    /* user inputs */
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        TP_CHECK(vi && vi->name && vi->name[0], TP_ERR_CORRUPT, "graph input %zu has no name", i);
        if (is_initializer(g, vi->name)) continue;
        if (r && !str_list_add(&r->inputs, &r->n_inputs, vi->name)) c->report_nomem = true;
        const tp_onnx_options *o = J->opts;
        tp_tensor *given = NULL;
        for (int k = 0; o && k < o->n_input_values; k++)
            if (o->input_value_names[k] && strcmp(o->input_value_names[k], vi->name) == 0) given = o->input_values[k];
        if (given) {
            TP_TRY(check_input_value(vi, given));
            tp_tensor *cp;
            TP_TRY(tp_tensor_clone(given, &cp));
            tp_value v = tp_value_tensor(cp);
            TP_TRY(tab_set(c, vi->name, &v, false, false));
            continue;
        }
        TP_TRY(add_user_input(J, vi));
    }
    TP_TRY(check_input_values_used(J->opts, g));
    tp_status first = TP_OK;
    TP_TRY(convert_nodes(J, &first));
    return build_program(J, out);
}

tp_status tp_onnx_load_buffer(const void *data, size_t size, const char *base_dir, const tp_onnx_options *opts_in,
                              tp_program **out, tp_onnx_report *report) {
    tp_onnx_options o, *opts = &o;
    tp__options_copy(&o, sizeof o, opts_in);
    *out = NULL;
    if (report) memset(report, 0, sizeof *report);
    TP_TRY(tp_ops_init());
    Onnx__ModelProto *m;
    TP_TRY(tp__onnx_decode_model(data, size, &m));
    import_job J;
    memset(&J, 0, sizeof J);
    J.model = m;
    J.base_dir = base_dir;
    J.opts = opts;
    J.report = report;
    tp_status st = import_model(&J, out);
    if (J.c.report_nomem && (st == TP_OK || st == TP_ERR_UNSUPPORTED)) { /* an incomplete report */
        tp_program_free(*out);
        *out = NULL;
        st = tp_error(TP_ERR_NOMEM, "out of memory filling the import report");
    }
    job_free(&J);
    tp__onnx_model_free(m);
    return st;
}

tp_status tp_onnx_load(const char *path, const tp_onnx_options *opts_in, tp_program **out, tp_onnx_report *report) {
    tp_onnx_options o, *opts = &o;
    tp__options_copy(&o, sizeof o, opts_in);
    *out = NULL;
    if (report) memset(report, 0, sizeof *report);
    size_t limit = opts && opts->max_model_bytes ? opts->max_model_bytes : ((size_t)2 << 30);
    uint8_t *data;
    size_t size;
    TP_TRY(tp__onnx_read_file(path, limit, &data, &size));
    /* the model's folder */
    size_t plen = strlen(path);
    char *dir = tp_malloc(plen + 2);
    if (!dir) {
        tp_free(data);
        return tp_error(TP_ERR_NOMEM, "out of memory");
    }
    memcpy(dir, path, plen + 1);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else strcpy(dir, ".");
    if (!dir[0]) strcpy(dir, "/");
    tp_status st = tp_onnx_load_buffer(data, size, dir, opts, out, report);
    tp_free(dir);
    tp_free(data);
    if (st != TP_OK) tp_error_context("%s", path);
    return st;
}

/* For op_map.c: v, made by a data-dependent op (a node without meta),
 * gets meta of dtype and sizes (the sizes known only when it runs at a hint
 * size) so that later nodes can use it; the current node's outputs are
 * marked dynamic, so mappings that would fold their sizes refuse. The
 * program is still interpreted (the op's shape rule refuses metadata). */
tp_status ox_dd_meta(ox_ctx *c, const tp_value *v, tp_dtype dtype, int ndim, const int64_t *sizes) {
    if (v->kind != TP_VAL_NODE || tp_node_meta_val(v->u.node)->kind == TP_VAL_TENSOR) return TP_OK;
    tp_tensor *meta;
    TP_TRY(tp_tensor_meta(dtype, ndim, sizes, &meta));
    tp_value mv = tp_value_tensor(meta);
    tp_status st = tp_node_set_meta_val(v->u.node, &mv);
    tp_value_clear(&mv);
    if (st == TP_OK) c->node_dyn = true;
    return st;
}

/* For op_map.c: is input i's shape dynamic? */
bool ox_in_dyn(ox_ctx *c, int i) {
    if (i < 0 || (size_t)i >= c->node->n_input || !c->node->input[i]) return false;
    ox_entry *e = tab_find(c, c->node->input[i]);
    return e && e->dyn;
}

/* For op_map.c: do the current node's inputs depend on a dynamic dim? */
bool ox_node_dyn(ox_ctx *c) { return c->node_dyn; }
void ox_set_node_dyn(ox_ctx *c) { c->node_dyn = true; }
