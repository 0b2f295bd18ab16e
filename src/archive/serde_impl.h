/*
 * serde_impl.h - what the files of the program document reader/writer share
 * (internal): serde_json.c, pickle.c, serde_read.c, serde_index.c,
 * serde_write.c and weights.c. serde.h is the contract with the rest of
 * the library.
 */
#ifndef TPEXPORT_SERDE_IMPL_H
#define TPEXPORT_SERDE_IMPL_H

#include <jansson.h>

#include "../graph_impl.h"
#include "../program_impl.h"
#include "json.h"
#include "serde.h"

typedef struct reader reader;
typedef struct doc_node doc_node;

/* Reading state shared by every section of the reader (serde_read.c,
 * serde_index.c). */
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

/* Value decoding context: where the value sits, for messages. */
typedef struct vctx {
    reader *r;
    const char *node; /* name of the node being read */
    bool broken_ref;  /* a reference to a broken node was met (verify mode) */
} vctx;

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

#define MAX_PARAMS 32

typedef struct param_list {
    int n;
    param items[MAX_PARAMS];
} param_list;

/* ---- serde_read.c: problems, names, values, nodes ---- */

/* Record the current error message as a problem. Returns st. */
TP_HIDDEN tp_status tp__sd_note(reader *r, tp_status st);

/* Report a problem (printf-style) and return st; in verify mode it is
 * recorded and reading goes on. */
TP_HIDDEN tp_status tp__sd_report(reader *r, tp_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A dotted attribute path: identifiers (or digits, as in "layers.0.weight")
 * separated by single dots. */
TP_HIDDEN bool tp__sd_valid_target(const char *s, size_t max_name);

/* ---- serde_json.c: JSON text ---- */

/* Parse a JSON document; `what` names it in messages. */
TP_HIDDEN tp_status tp__sd_parse_json(const char *text, size_t len, const char *what, size_t max_bytes, json_t **out);

TP_HIDDEN const char *tp__sd_json_kind(const json_t *j);

TP_HIDDEN jwriter tp__sd_jw_start(void);

/* Record the first thing past a reader limit (the document would not load back). */
TP_HIDDEN void tp__sd_jw_limit(jwriter *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

TP_HIDDEN json_t *tp__sd_jw_take(jwriter *w, json_t *j);

/* A name (what: "node name", "dim name", ...) the reader would refuse as
 * too long is recorded as the writer's limit. */
TP_HIDDEN void tp__sd_jw_check_name(jwriter *w, const char *what, const char *s);

/* A name as a JSON string, checked. */
TP_HIDDEN json_t *tp__sd_jw_name(jwriter *w, const char *what, const char *s);

/* jw_set, jw_append and jw_obj1 take `value` over: on failure it is freed,
 * so a value is filled in before it is handed to them, never after. */
TP_HIDDEN void tp__sd_jw_set(jwriter *w, json_t *obj, const char *key, json_t *value);

TP_HIDDEN void tp__sd_jw_append(jwriter *w, json_t *arr, json_t *value);

TP_HIDDEN json_t *tp__sd_jw_real(jwriter *w, double v);

/* Dump and free the tree; the writer's markers are released. */
TP_HIDDEN tp_status tp__sd_jw_finish(jwriter *w, json_t *root, char **out, size_t *len);

/* ---- pickle.c: the strict pickle subset ---- */

/* tensorplay's dtype code of d (22: undefined). */
TP_HIDDEN int tp__sd_dtype_code(tp_dtype d);

/* Bytes a view needs: (offset + sum((size-1)*stride) + 1) * itemsize, or 0
 * for an empty view; false on overflow. */
TP_HIDDEN bool tp__sd_view_bytes(int ndim, const int64_t *sizes, const int64_t *strides, int64_t offset, size_t itemsize,
                       uint64_t *out);

TP_HIDDEN tp_status tp__sd_pickle_read(const void *data, size_t size, const tp_doc_limits *lim, tp_value *out, bool *ellipsis);
/* torch.save's pickle (data.pkl of its ZIP): the subset above plus the
 * tensors it writes (torch._utils._rebuild_tensor_v2 / _rebuild_parameter
 * over a persistent storage id ('storage', torch.FloatStorage & co., key,
 * location, numel)) and collections.OrderedDict(). A storage's bytes come
 * from storage(ctx, key, dtype, numel, &flat): a new 1-d tensor of numel
 * elements (the view bounds are checked against numel first). No code runs. */
typedef tp_status (*tp__sd_storage_fn)(void *ctx, const char *key, tp_dtype dtype, int64_t numel, tp_tensor **flat);
TP_HIDDEN tp_status tp__sd_torch_pickle_read(const void *data, size_t size, const tp_doc_limits *lim,
                                             tp__sd_storage_fn storage, void *storage_ctx, tp_value *out);

/* Strict base64 (padding required, no whitespace). *out is tp_malloc'd.
 * TP_ERR_CORRUPT (no message: the caller names the field) for bad text,
 * TP_ERR_NOMEM when the buffer cannot be allocated. */
TP_HIDDEN tp_status tp__sd_b64_decode(const char *s, unsigned char **out, size_t *out_len);

/* A dtype as tensorplay's pickle, base64 (new string). */
TP_HIDDEN char *tp__sd_dtype_pickle_b64(int code);

/* ---- serde_read.c: document nodes and values ---- */

/* Position of the document node called `name`, or -1. */
TP_HIDDEN int tp__sd_find_doc_node(const reader *r, const char *name);

/* A name for a helper node (an intermediate of tensor indexing, the op
 * before a copy_): "<base>_<tag>", made unique against the graph and every
 * name of the document. *out is tp_malloc'd. */
TP_HIDDEN tp_status tp__sd_fresh_name(reader *r, const char *base, const char *tag, char **out);

/* A tensor pickled inside node arguments (x * tensor([1, 2])) becomes a
 * lifted constant, as tensorplay lifts module constants: a placeholder
 * "c_tensor_constant<k>" after the other placeholders with a
 * CONSTANT_TENSOR input spec (last, in the same order) for target
 * "_tensor_constant<k>". *v (the tensor) is replaced by a reference to the
 * placeholder. */
TP_HIDDEN tp_status tp__sd_lift_constant(vctx *c, tp_value *v);

/* Decode a __pickle__ payload. ellipsis NULL: Ellipsis not allowed. */
TP_HIDDEN tp_status tp__sd_decode_pickle(vctx *c, const json_t *v, const char *path, tp_value *out, bool *ellipsis);

TP_HIDDEN tp_status tp__sd_decode_value(vctx *c, const json_t *j, const char *path, int depth, tp_value *out);

TP_HIDDEN void tp__sd_params_clear(param_list *pl);

TP_HIDDEN tp_status tp__sd_parse_params(const char *spec, param_list *pl);

/* Index of the schema argument a parameter maps to, or -1. "input", "self"
 * and "a" fall back to the schema's first argument. */
TP_HIDDEN int tp__sd_schema_index(const tp_schema *s, const char *ours);

TP_HIDDEN bool tp__sd_is_none(const tp_value *v);

/* op(args...) from positional values. */
TP_HIDDEN tp_status tp__sd_add_call_values(reader *r, const char *name, tp_op op, const tp_value *vals, int n, tp_node **out);
/* op(args, kwargs) (a tuple and a dict or None). */
TP_HIDDEN tp_status tp__sd_add_call(reader *r, const char *name, tp_op op, const tp_value *args, const tp_value *kwargs,
                                    tp_node **out);

/* ---- serde_compose.c: functions read as a few of our ops ---- */

/* Build the nodes of function `name` (a TP_SERDE_COMPOSE entry) for
 * document node d. */
TP_HIDDEN tp_status tp__sd_compose(reader *r, doc_node *d, const char *name, const tp_value *args,
                                   const tp_value *kwargs);
TP_HIDDEN bool tp__sd_has_compose(const char *name);

TP_HIDDEN const tp_value *tp__sd_ref_meta(const tp_value *v);

TP_HIDDEN const tp_tensor *tp__sd_ref_meta_tensor(const tp_value *v);

TP_HIDDEN void tp__sd_set_node(doc_node *d, tp_node *n);

TP_HIDDEN void tp__sd_set_folded(doc_node *d, tp_value *v);

/* ---- serde_index.c: lowering tensorplay's indexing ---- */

/* _operator.getitem(base, index): tensor indexing, an item of a tuple/list
 * node (our getitem op), or of a folded constant. */
TP_HIDDEN tp_status tp__sd_build_getitem(vctx *c, doc_node *d, const json_t *jargs, const char *path, const tp_value *kwargs);

/* _operator.setitem(base, index, value): x[index] = value writes into x (a
 * view of it, or index_put_); later nodes reading x see the write, as
 * nodes run in graph order. */
TP_HIDDEN tp_status tp__sd_build_setitem(vctx *c, doc_node *d, const json_t *jargs, const char *path, const tp_value *kwargs);

/* ---- serde_read.c: output specs ---- */

/* Leaves of the output value as tensorplay counts them (None is a leaf). */
TP_HIDDEN tp_status tp__sd_flatten_tp_style(const tp_value *v, int depth, const tp_value ***leaves, int64_t *n, int64_t *cap);

#endif
