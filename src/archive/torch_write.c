/*
 * torch_write.c - programs -> PyTorch's pt2 package (torch.export.save's
 * layout, schema 8.20), which torch.export.load reads (torch.h).
 *
 * Each node is written as the ATen op the reader maps to it (the first
 * entry for the op in torch_ops.c, with the overload picked from the
 * argument kinds: Tensor/Scalar, default/dim), its arguments by our schema
 * names (which are ATen's) plus the ATen name where the table renames one
 * (torch's deserializer takes the names its schema has and ignores the
 * rest); getitem nodes become the named outputs of the node they read.
 * tensor_values give every tensor's dtype, sizes and contiguous strides:
 * user inputs with their dim rules as sympy expressions (Symbol,
 * Mul(Integer, Symbol), Add(.., Integer)) and hints, other values' dims
 * found by inferring the graph again at two other values of each symbol
 * (affine in one symbol, or c * s * t; any other form, such as a floor
 * division, is written as its example size). Sample inputs are the example
 * inputs as a torch.save file (a ZIP of data.pkl and raw storages).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../program_impl.h"
#include "serde_impl.h"
#include "torch.h"
#include "zip.h"

/* Example tensors one sample-input file holds at most. */
#define TP_LIMIT_ITEMS_SAMPLE 4096

/* Shape probes: the graph inferred again with one root symbol moved to two
 * other values, so each value's dims can be written as expressions (an
 * affine form of one symbol, or c * s * t), not only at the example sizes. */
enum { PROBE_SYMS = 8 };
typedef struct probes {
    int n;
    const char *sym[PROBE_SYMS];
    int64_t ex[PROBE_SYMS], val[PROBE_SYMS][2];
    tp_graph *g[PROBE_SYMS][2]; /* NULL where inference failed */
} probes;

typedef struct twr {
    probes pr;
    const tp_program *p;
    json_t *tensor_values, *sym_int_values;
    int fresh;
    tp_status st;
} twr;

static int dtype_code(tp_dtype d) {
    switch (d) {
    case TP_UINT8: return 1;
    case TP_INT8: return 2;
    case TP_INT16: return 3;
    case TP_INT32: return 4;
    case TP_INT64: return 5;
    case TP_FLOAT16: return 6;
    case TP_FLOAT32: return 7;
    case TP_FLOAT64: return 8;
    case TP_BOOL: return 12;
    case TP_BFLOAT16: return 13;
    default: return 0;
    }
}

/* json_object_set_new that remembers an allocation failure. */
static void jset(twr *w, json_t *o, const char *key, json_t *v) {
    if (!o || !v || json_object_set_new(o, key, v) != 0) {
        if (w->st == TP_OK) w->st = tp_error(TP_ERR_NOMEM, "out of memory writing a PyTorch archive");
    }
}

static void jappend(twr *w, json_t *a, json_t *v) {
    if (!a || !v || json_array_append_new(a, v) != 0) {
        if (w->st == TP_OK) w->st = tp_error(TP_ERR_NOMEM, "out of memory writing a PyTorch archive");
    }
}

static json_t *tagged(twr *w, const char *tag, json_t *v) {
    json_t *o = json_object();
    jset(w, o, tag, v);
    return o;
}

static json_t *named(twr *w, const char *name) {
    json_t *o = json_object();
    jset(w, o, "name", json_string(name));
    return o;
}

static json_t *jfloat(double d) {
    if (isnan(d)) return json_string("NaN");
    if (isinf(d)) return json_string(d > 0 ? "Infinity" : "-Infinity");
    return json_real(d);
}

/* ---- sizes ----------------------------------------------------------------------------- */

/* The sympy form of scale * symbol + offset. */
static void srepr_dim(char *buf, size_t size, const char *symbol, int64_t scale, int64_t offset) {
    char sym[160], term[240];
    snprintf(sym, sizeof sym, "Symbol('%s', positive=True, integer=True)", symbol);
    if (scale == 1) snprintf(term, sizeof term, "%s", sym);
    else snprintf(term, sizeof term, "Mul(Integer(%" PRId64 "), %s)", scale, sym);
    if (offset == 0) snprintf(buf, size, "%s", term);
    else snprintf(buf, size, "Add(%s, Integer(%" PRId64 "))", term, offset);
}

static json_t *sym_expr(twr *w, const char *expr, int64_t hint) {
    json_t *e = json_object(), *h = json_object();
    jset(w, e, "expr_str", json_string(expr));
    jset(w, h, "as_int", json_integer(hint));
    jset(w, e, "hint", h);
    return tagged(w, "as_expr", e);
}

static const tp_dim_rule *rule_of(const tp_program *p, const char *input, int dim) {
    for (int i = 0; i < tp_program_num_dim_rules(p); i++) {
        const tp_dim_rule *r = tp_program_dim_rule(p, i);
        if (r->site.dim == dim && !strcmp(r->site.input, input)) return r;
    }
    return NULL;
}

/* Size d of the value of node `node` (item `item` of a tuple, -1: the node's value) in probe graph g. */
static bool probe_size(tp_graph *g, const char *node, int item, int d, int64_t *out) {
    const tp_node *n = g ? tp_graph_find_node(g, node) : NULL;
    const tp_value *m = n ? tp_node_meta_val(n) : NULL;
    if (m && item >= 0) m = tp_value_len(m) > item ? tp_value_at(m, item) : NULL;
    if (!m || m->kind != TP_VAL_TENSOR || d >= tp_tensor_ndim(m->u.tensor)) return false;
    *out = tp_tensor_sizes(m->u.tensor)[d];
    return true;
}

/* The expression of dim d (size s0 at the examples) of a node's value from the probes: affine in one
 * symbol, or c * s * t; false when it does not move or follows neither form (the size is written). */
static bool probe_expr(const twr *w, const char *node, int item, int d, int64_t s0, char *buf, size_t size) {
    const probes *pr = &w->pr;
    int moved[PROBE_SYMS], nm = 0;
    int64_t sz[PROBE_SYMS][2];
    for (int k = 0; k < pr->n; k++) {
        bool ok = probe_size(pr->g[k][0], node, item, d, &sz[k][0]) && probe_size(pr->g[k][1], node, item, d, &sz[k][1]);
        if (!ok) return false;
        if (sz[k][0] != s0 || sz[k][1] != s0) moved[nm++] = k;
    }
    if (nm == 1) {
        int k = moved[0];
        int64_t dv = pr->val[k][0] - pr->ex[k], ds = sz[k][0] - s0;
        if (dv == 0 || ds % dv) return false;
        int64_t scale = ds / dv, offset = s0 - scale * pr->ex[k];
        if (scale < 1 || sz[k][1] != scale * pr->val[k][1] + offset) return false;
        srepr_dim(buf, size, pr->sym[k], scale, offset);
        return true;
    }
    if (nm == 2) { /* c * s * t (a view merging two dynamic dims) */
        int a = moved[0], b = moved[1];
        int64_t ab = pr->ex[a] * pr->ex[b];
        if (ab <= 0 || s0 % ab) return false;
        int64_t c = s0 / ab;
        for (int j = 0; j < 2; j++)
            if (sz[a][j] != c * pr->val[a][j] * pr->ex[b] || sz[b][j] != c * pr->ex[a] * pr->val[b][j]) return false;
        snprintf(buf, size, "Mul(Integer(%" PRId64 "), Symbol('%s', positive=True, integer=True), Symbol('%s', "
                 "positive=True, integer=True))", c, pr->sym[a], pr->sym[b]);
        return true;
    }
    return false;
}

/* tensor_values[name] for meta t; `input`: a user input whose dim rules apply; else `node`/`item`
 * name the value in the probe graphs (NULL: write the sizes as they are). */
static void tensor_value(twr *w, const char *name, const tp_tensor *t, const char *input, const char *node, int item) {
    json_t *tm = json_object(), *sizes = json_array(), *strides = json_array(), *dev = json_object();
    int nd = tp_tensor_ndim(t);
    char exprs[TP_MAX_DIMS][300];
    bool sym[TP_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        const tp_dim_rule *r = input ? rule_of(w->p, input, d) : NULL;
        sym[d] = r && r->kind != TP_DIM_STATIC;
        if (sym[d])
            srepr_dim(exprs[d], sizeof exprs[d], r->symbol, r->kind == TP_DIM_SYMBOL ? 1 : r->scale,
                      r->kind == TP_DIM_SYMBOL ? 0 : r->offset);
        else if (!input && node)
            sym[d] = probe_expr(w, node, item, d, tp_tensor_sizes(t)[d], exprs[d], sizeof exprs[d]);
        jappend(w, sizes, sym[d] ? sym_expr(w, exprs[d], tp_tensor_sizes(t)[d])
                                 : tagged(w, "as_int", json_integer(tp_tensor_sizes(t)[d])));
    }
    /* contiguous strides: products of the later sizes, symbolic where one of them is */
    for (int d = 0; d < nd; d++) {
        int64_t k = 1, hint = 1;
        char prod[2048];
        int len = 0;
        bool any = false;
        for (int e = d + 1; e < nd; e++) {
            hint *= tp_tensor_sizes(t)[e];
            if (sym[e] && len < (int)sizeof prod - 320) {
                len += snprintf(prod + len, sizeof prod - (size_t)len, ", %s", exprs[e]);
                any = true;
            } else if (!sym[e]) {
                k *= tp_tensor_sizes(t)[e];
            }
        }
        if (any) {
            char expr[2200];
            snprintf(expr, sizeof expr, "Mul(Integer(%" PRId64 ")%s)", k, prod);
            jappend(w, strides, sym_expr(w, expr, hint));
        } else {
            jappend(w, strides, tagged(w, "as_int", json_integer(hint)));
        }
    }
    jset(w, tm, "dtype", json_integer(dtype_code(tp_tensor_dtype(t))));
    jset(w, tm, "sizes", sizes);
    jset(w, tm, "requires_grad", json_false());
    jset(w, dev, "type", json_string("cpu"));
    jset(w, dev, "index", json_null());
    jset(w, tm, "device", dev);
    jset(w, tm, "strides", strides);
    jset(w, tm, "storage_offset", tagged(w, "as_int", json_integer(0)));
    jset(w, tm, "layout", json_integer(7));
    jset(w, w->tensor_values, name, tm);
}

/* ---- the op table, backwards ----------------------------------------------------------- */

static bool has_overload(const char *list, const char *o) {
    size_t n = strlen(o);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !memcmp(p, o, n)) return true;
        if (!end) break;
        p = end + 1;
    }
    return false;
}

/* The entry written for op: the first without extra outputs, drops or fixed
 * arguments (interpolate has only fixed-mode entries: retarget picks one). */
static const tp_torch_op *entry_for(tp_op op) {
    int n;
    const tp_torch_op *t = tp__torch_op_table(&n);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            if (t[i].op == op && !(t[i].flags & (TP_TORCH_FIRST | TP_TORCH_DROP | TP_TORCH_T)) && (pass || !t[i].fixed))
                return &t[i];
    return NULL;
}

static bool node_is_int(const tp_node *n);

/* The overload for these bound arguments. */
static void pick_overload(const tp_torch_op *e, const tp_schema *sc, const tp_value *bound, char *out, size_t size) {
    const char *first_end = strchr(e->overloads, ',');
    snprintf(out, size, "%.*s", first_end ? (int)(first_end - e->overloads) : (int)strlen(e->overloads), e->overloads);
    /* overloads chosen by one argument's kind: a tensor, a number, a list, None */
    static const struct {
        const char *op, *arg, *tensor, *number, *list, *none;
    } rules[] = {{"xlogy", "other", "Tensor", "Scalar_Other", NULL, NULL},
                 {"special_xlog1py", "other", "default", "other_scalar", NULL, NULL},
                 {"float_power", "exponent", "Tensor_Tensor", "Tensor_Scalar", NULL, NULL},
                 {"bitwise_left_shift", "other", "Tensor", "Tensor_Scalar", NULL, NULL},
                 {"bitwise_right_shift", "other", "Tensor", "Tensor_Scalar", NULL, NULL},
                 {"lerp", "weight", "Tensor", "Scalar", NULL, NULL},
                 {"scatter", "src", "src", "value", NULL, NULL},
                 {"searchsorted", "self", "Tensor", "Scalar", NULL, NULL},
                 {"repeat_interleave", "repeats", "self_Tensor", "self_int", NULL, NULL},
                 {"tensor_split", "indices_or_sections", "tensor_indices_or_sections", "sections", "indices", NULL},
                 {"hsplit", "indices_or_sections", NULL, "int", "array", NULL},
                 {"vsplit", "indices_or_sections", NULL, "int", "array", NULL},
                 {"dsplit", "indices_or_sections", NULL, "int", "array", NULL},
                 {"histogram", "bins", "bins_tensor", "bin_ct", NULL, NULL},
                 {"count_nonzero", "dim", NULL, "default", "dim_IntList", "default"},
                 {"median", "dim", NULL, "dim", NULL, "default"},
                 {"nanmedian", "dim", NULL, "dim", NULL, "default"},
                 {"norm", "dim", NULL, NULL, "ScalarOpt_dim", "Scalar"},
                 {"quantile", "q", "default", "scalar", NULL, NULL},
                 {"nanquantile", "q", "default", "scalar", NULL, NULL}};
    for (size_t r = 0; r < sizeof rules / sizeof *rules; r++) {
        if (strcmp(rules[r].op, e->name) != 0) continue;
        int k = -1;
        for (int i = 0; i < sc->n_args; i++)
            if (!strcmp(sc->args[i].name, rules[r].arg)) k = i;
        if (k < 0) break;
        const tp_value *v = &bound[k];
        bool node_t = v->kind == TP_VAL_NODE && !node_is_int(v->u.node);
        const char *pick = node_t ? rules[r].tensor
                           : v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE ? rules[r].list
                           : v->kind == TP_VAL_NONE ? rules[r].none : rules[r].number;
        if (pick) snprintf(out, size, "%s", pick);
        return;
    }
    if (!strncmp(e->name, "special_", 8) && sc->n_args == 2 && bound[1].kind != TP_VAL_NODE &&
        sc->args[1].type == TP_ARG_TENSOR_OR_SCALAR) { /* special_zeta.other_scalar, polynomials' n_scalar */
        snprintf(out, size, "%s", !strcmp(sc->args[1].name, "n") ? "n_scalar" : "other_scalar");
        return;
    }
    if (e->op == TP_OP_CLAMP) { /* clamp.Tensor when a bound is a tensor */
        for (int i = 0; i < sc->n_args; i++)
            if (bound[i].kind == TP_VAL_NODE && i > 0) snprintf(out, size, "Tensor");
        return;
    }
    if (e->op == TP_OP_DIV) {
        int k = -1;
        for (int i = 0; i < sc->n_args; i++)
            if (!strcmp(sc->args[i].name, "rounding_mode")) k = i;
        bool scalar = bound[1].kind != TP_VAL_NODE, mode = k >= 0 && bound[k].kind == TP_VAL_STR;
        snprintf(out, size, "%s%s", scalar ? "Scalar" : "Tensor", mode ? "_mode" : "");
        return;
    }
    if (has_overload(e->overloads, "Tensor") && has_overload(e->overloads, "Scalar")) {
        bool scalar = false;
        for (int i = 0; i < sc->n_args; i++)
            if (sc->args[i].type == TP_ARG_TENSOR_OR_SCALAR && bound[i].kind != TP_VAL_NODE) scalar = true;
        snprintf(out, size, "%s", scalar ? "Scalar" : "Tensor");
        return;
    }
    if (e->op == TP_OP_WHERE) {
        bool a = bound[1].kind == TP_VAL_NODE, b = bound[2].kind == TP_VAL_NODE;
        snprintf(out, size, "%s", a && b ? "self" : a ? "ScalarOther" : b ? "ScalarSelf" : "Scalar");
        return;
    }
    if (has_overload(e->overloads, "dims")) { /* squeeze/any: no dim, one int, or a list */
        int d = -1;
        for (int i = 0; i < sc->n_args; i++)
            if (!strcmp(sc->args[i].name, "dim")) d = i;
        if (d >= 0 && (bound[d].kind == TP_VAL_LIST || bound[d].kind == TP_VAL_TUPLE)) {
            snprintf(out, size, "dims");
            return;
        }
    }
    if (has_overload(e->overloads, "correction")) { /* var/std: our arguments are those of .correction */
        snprintf(out, size, "correction");
        return;
    }
    static const char *dim_overloads[] = {"dim_IntList", "dim", "dim_int"};
    for (size_t k = 0; k < sizeof dim_overloads / sizeof *dim_overloads; k++)
        if (has_overload(e->overloads, "default") && has_overload(e->overloads, dim_overloads[k])) {
            int d = -1;
            for (int i = 0; i < sc->n_args; i++)
                if (!strcmp(sc->args[i].name, "dim")) d = i;
            bool given = d >= 0 && bound[d].kind != TP_VAL_NONE;
            snprintf(out, size, "%s", given ? dim_overloads[k] : "default");
            return;
        }
}

static int arg_index(const tp_schema *sc, const char *name) {
    for (int i = 0; i < sc->n_args; i++)
        if (!strcmp(sc->args[i].name, name)) return i;
    return -1;
}

/* Ops one of ours stands for several ATen ops of: split (an int: split.Tensor,
 * a list: split_with_sizes) and interpolate (upsample_<mode><rank>d.vec, its
 * scale factor as one per spatial dim). May rewrite bound. */
static const tp_torch_op *retarget(twr *w, const tp_torch_op *e, const tp_schema *sc, tp_value *bound, const tp_node *n,
                                   const char *where) {
    if (e->op == TP_OP_SPLIT) {
        int k = arg_index(sc, "split_size_or_sections");
        if (k >= 0 && (bound[k].kind == TP_VAL_LIST || bound[k].kind == TP_VAL_TUPLE))
            return tp__torch_find_op("aten", "split_with_sizes", "default");
        return e;
    }
    if (e->op == TP_OP_ARANGE) { /* arange(n): aten.arange.default(end=n) */
        int k = arg_index(sc, "end");
        return k >= 0 && bound[k].kind == TP_VAL_NONE ? tp__torch_find_op("aten", "arange", "default") : e;
    }
    if (e->op == TP_OP_TO) { /* to.dtype needs a dtype: without one, to() is a copy of self */
        int k = arg_index(sc, "dtype");
        return k >= 0 && bound[k].kind == TP_VAL_NONE ? tp__torch_find_op("aten", "clone", "default") : e;
    }
    if (e->op != TP_OP_INTERPOLATE) return e;
    const tp_value *in = tp_value_at(tp_node_args(n), 0);
    const tp_value *im = in && in->kind == TP_VAL_NODE ? tp_node_meta_val(in->u.node) : NULL;
    int km = arg_index(sc, "mode"), ks = arg_index(sc, "scale_factor"), ka = arg_index(sc, "align_corners");
    int rank = im && im->kind == TP_VAL_TENSOR ? tp_tensor_ndim(im->u.tensor) : 0;
    const char *mode = km >= 0 && bound[km].kind == TP_VAL_STR ? bound[km].u.s : "";
    char name[64] = "";
    if (!strcmp(mode, "nearest") && rank >= 3 && rank <= 5) snprintf(name, sizeof name, "upsample_nearest%dd", rank - 2);
    else if (!strcmp(mode, "linear") && rank == 3) snprintf(name, sizeof name, "upsample_linear1d");
    else if (!strcmp(mode, "bilinear") && rank == 4) snprintf(name, sizeof name, "upsample_bilinear2d");
    else if (!strcmp(mode, "bicubic") && rank == 4) snprintf(name, sizeof name, "upsample_bicubic2d");
    else if (!strcmp(mode, "trilinear") && rank == 5) snprintf(name, sizeof name, "upsample_trilinear3d");
    const tp_torch_op *t = name[0] ? tp__torch_find_op("aten", name, "vec") : NULL;
    if (!t) {
        if (w->st == TP_OK)
            w->st = tp_error(TP_ERR_UNSUPPORTED, "%s: interpolate mode '%s' on a %d-d input has no ATen op tpexport writes",
                             where, mode, rank);
        return NULL;
    }
    if (ks >= 0 && tp_value_is_number(&bound[ks])) {
        double f = tp_value_as_f64(&bound[ks]);
        tp_value list;
        if (tp_value_list(rank - 2, &list) != TP_OK) {
            if (w->st == TP_OK) w->st = tp_error(TP_ERR_NOMEM, "out of memory");
            return NULL;
        }
        for (int i = 0; i < rank - 2; i++) list.u.seq.items[i] = tp_value_float(f);
        tp_value_clear(&bound[ks]);
        bound[ks] = list;
    }
    if (ka >= 0 && bound[ka].kind == TP_VAL_NONE && strcmp(mode, "nearest") != 0) bound[ka] = tp_value_bool(false);
    return t;
}

/* ---- arguments ----------------------------------------------------------------------------- */

static bool node_is_int(const tp_node *n) {
    const tp_value *m = tp_node_meta_val(n);
    return m && (m->kind == TP_VAL_INT || m->kind == TP_VAL_BOOL);
}

static json_t *arg_json(twr *w, const tp_value *v, const char *where) {
    switch (v->kind) {
    case TP_VAL_NONE: return tagged(w, "as_none", json_true());
    case TP_VAL_BOOL: return tagged(w, "as_bool", json_boolean(v->u.b));
    case TP_VAL_INT: return tagged(w, "as_int", json_integer(v->u.i));
    case TP_VAL_FLOAT: return tagged(w, "as_float", jfloat(v->u.f));
    case TP_VAL_STR: return tagged(w, "as_string", json_string(v->u.s));
    case TP_VAL_DTYPE: return tagged(w, "as_scalar_type", json_integer(dtype_code(v->u.dtype)));
    case TP_VAL_NODE:
        if (node_is_int(v->u.node)) return tagged(w, "as_sym_int", tagged(w, "as_name", json_string(tp_node_name(v->u.node))));
        return tagged(w, "as_tensor", named(w, tp_node_name(v->u.node)));
    case TP_VAL_LIST:
    case TP_VAL_TUPLE: {
        int64_t n = tp_value_len(v);
        bool nodes = false, ints = true, floats = true, bools = true, nones = false, sym = false;
        for (int64_t i = 0; i < n; i++) {
            const tp_value *it = tp_value_at(v, i);
            bool int_node = it->kind == TP_VAL_NODE && node_is_int(it->u.node);
            nodes = nodes || (it->kind == TP_VAL_NODE && !int_node);
            sym = sym || int_node;
            nones = nones || it->kind == TP_VAL_NONE;
            ints = ints && (it->kind == TP_VAL_INT || int_node);
            floats = floats && (it->kind == TP_VAL_FLOAT || it->kind == TP_VAL_INT);
            bools = bools && it->kind == TP_VAL_BOOL;
        }
        json_t *a = json_array();
        const char *tag = n == 0 ? "as_ints" : nodes && nones ? "as_optional_tensors" : nodes ? "as_tensors"
                          : ints ? (sym ? "as_sym_ints" : "as_ints") : bools ? "as_bools" : floats ? "as_floats" : NULL;
        if (!tag) {
            if (w->st == TP_OK) w->st = tp_error(TP_ERR_UNSUPPORTED, "%s: a list PyTorch's schema cannot encode", where);
            json_decref(a);
            return json_object();
        }
        for (int64_t i = 0; i < n; i++) {
            const tp_value *it = tp_value_at(v, i);
            if (!strcmp(tag, "as_optional_tensors"))
                jappend(w, a, it->kind == TP_VAL_NONE ? tagged(w, "as_none", json_true())
                                                      : tagged(w, "as_tensor", named(w, tp_node_name(it->u.node))));
            else if (!strcmp(tag, "as_tensors")) jappend(w, a, named(w, tp_node_name(it->u.node)));
            else if (!strcmp(tag, "as_sym_ints"))
                jappend(w, a, it->kind == TP_VAL_NODE ? tagged(w, "as_name", json_string(tp_node_name(it->u.node)))
                                                      : tagged(w, "as_int", json_integer(it->u.i)));
            else if (!strcmp(tag, "as_ints")) jappend(w, a, json_integer(it->u.i));
            else if (!strcmp(tag, "as_bools")) jappend(w, a, json_boolean(it->u.b));
            else jappend(w, a, jfloat(tp_value_as_f64(it)));
        }
        return tagged(w, tag, a);
    }
    default:
        if (w->st == TP_OK)
            w->st = tp_error(TP_ERR_UNSUPPORTED, "%s: a %s argument cannot be written", where, tp_value_kind_name(v->kind));
        return json_object();
    }
}

/* One item of an entry's map ("torch:ours", from p): *out = the torch name
 * when it renames our argument `ours`, else "". Returns the next item. */
static const char *renamed_at(const char *p, const char *ours, char *out, size_t size) {
    out[0] = '\0';
    const char *end = strchr(p, ',');
    size_t l = end ? (size_t)(end - p) : strlen(p);
    const char *colon = memchr(p, ':', l);
    if (colon) {
        size_t tl = (size_t)(colon - p), ol = l - tl - 1;
        if (ol == strlen(ours) && !memcmp(colon + 1, ours, ol) && colon[1] != '-' && colon[1] != '=')
            snprintf(out, size, "%.*s", (int)tl, p);
    }
    return end ? end + 1 : NULL;
}

static json_t *named_arg(twr *w, const char *name, json_t *arg, bool kw) {
    json_t *na = json_object();
    jset(w, na, "name", json_string(name));
    jset(w, na, "arg", arg);
    jset(w, na, "kind", json_integer(kw ? 2 : 1));
    return na;
}

/* The user reading item i of a tuple node, or NULL. */
static tp_node *getitem_user(const tp_node *n, int64_t i) {
    for (int64_t k = 0; k < tp_node_num_users(n); k++) {
        tp_node *u = tp_node_user(n, k);
        if (tp_node_get_kind(u) == TP_NODE_CALL_FUNCTION && tp_node_op(u) == TP_OP_GETITEM &&
            tp_value_at(tp_node_args(u), 0)->kind == TP_VAL_NODE && tp_value_at(tp_node_args(u), 0)->u.node == n &&
            tp_value_at(tp_node_args(u), 1)->kind == TP_VAL_INT && tp_value_at(tp_node_args(u), 1)->u.i == i)
            return u;
    }
    return NULL;
}

static json_t *write_node(twr *w, const tp_node *n) {
    char where[300];
    snprintf(where, sizeof where, "node %s (%s)", tp_node_name(n), tp_op_name(tp_node_op(n)));
    tp_op op = tp_node_op(n);
    const tp_schema *sc = tp_op_schema(op);
    json_t *node = json_object(), *inputs = json_array(), *outputs = json_array();
    char target[200];
    const tp_torch_op *e = NULL;
    tp_torch_op same;
    if (op == TP_OP_SYM_ADD || op == TP_OP_SYM_SUB || op == TP_OP_SYM_MUL || op == TP_OP_SYM_FLOORDIV) {
        snprintf(target, sizeof target, "_operator.%s", op == TP_OP_SYM_ADD ? "add" : op == TP_OP_SYM_SUB ? "sub"
                                                       : op == TP_OP_SYM_MUL ? "mul" : "floordiv");
    } else {
        /* no entry: aten.<op>.default, which the reader maps back by name */
        e = entry_for(op);
        if (!e) {
            static _Thread_local char special[96];
            snprintf(special, sizeof special, "special_%s", tp_op_name(op));
            same = (tp_torch_op){tp__torch_is_special(tp_op_name(op)) ? special : tp_op_name(op), "default", op, NULL,
                                 NULL, 0};
            e = &same;
        }
    }
    tp_value bound[64];
    int nb = sc->n_args;
    tp_status st = nb <= 64 ? tp_op_bind(op, tp_node_args(n)->u.seq.items, (int)tp_value_len(tp_node_args(n)),
                                         tp_value_len(tp_node_kwargs(n)) ? tp_node_kwargs(n) : NULL, bound)
                            : tp_error(TP_ERR_UNSUPPORTED, "%s: too many arguments", where);
    if (st != TP_OK) {
        w->st = st;
        json_decref(node);
        json_decref(inputs);
        json_decref(outputs);
        return NULL;
    }
    if (e) e = retarget(w, e, sc, bound, n, where);
    if (e) {
        char ov[64];
        pick_overload(e, sc, bound, ov, sizeof ov);
        snprintf(target, sizeof target, "torch.ops.aten.%s.%s", e->name, ov);
    }
    if (w->st != TP_OK) {
        for (int i = 0; i < nb; i++) tp_value_clear(&bound[i]);
        json_decref(node);
        json_decref(inputs);
        json_decref(outputs);
        return NULL;
    }
    /* retargeted to another op of ours (to() without a dtype as clone): only that op's arguments */
    const tp_schema *tsc = e && e->op != op && e->op != TP_OP_INVALID ? tp_op_schema(e->op) : NULL;
    for (int i = 0; i < nb; i++) {
        const tp_schema_arg *a = &sc->args[i];
        if (tsc && arg_index(tsc, a->name) < 0) continue;
        /* a name the entry gives another of our arguments (arange(end)'s "end" is our start) */
        bool taken = false;
        for (const char *q = e ? e->map : NULL; q && *q && !taken;) {
            const char *end = strchr(q, ','), *colon = strchr(q, ':');
            size_t l = end ? (size_t)(end - q) : strlen(q);
            taken = colon && colon < q + l && (size_t)(colon - q) == strlen(a->name) && !memcmp(q, a->name, strlen(a->name)) &&
                    colon[1] != '-' && colon[1] != '=' &&
                    !((size_t)(l - (size_t)(colon - q) - 1) == strlen(a->name) && !memcmp(colon + 1, a->name, strlen(a->name)));
            q = end ? end + 1 : NULL;
        }
        if (taken) continue;
        /* layout/device/pin_memory are ours only as None; our results are contiguous, which a view after
         * them relies on (clone's default would preserve a permuted layout) */
        if (bound[i].kind == TP_VAL_NONE && (!strcmp(a->name, "layout") || !strcmp(a->name, "device") ||
                                             !strcmp(a->name, "pin_memory")))
            continue;
        if (!strcmp(a->name, "memory_format")) {
            jappend(w, inputs, named_arg(w, a->name, tagged(w, "as_memory_format", json_integer(1)), true));
            continue;
        }
        /* an int for an int list (conv padding=0, kernel_size=3): ATen's schema wants the list */
        if (bound[i].kind == TP_VAL_INT &&
            (a->type == TP_ARG_INT_LIST || a->type == TP_ARG_OPT_INT_LIST ||
             (a->type == TP_ARG_ANY && (!strcmp(a->name, "padding") || !strcmp(a->name, "stride") ||
                                        !strcmp(a->name, "dilation") || !strcmp(a->name, "output_padding"))))) {
            int64_t v = bound[i].u.i;
            tp_value_clear(&bound[i]);
            if (tp_value_int_list(&v, 1, &bound[i]) != TP_OK && w->st == TP_OK) w->st = tp_error(TP_ERR_NOMEM, "out of memory");
        }
        /* ATen's losses take the reduction as an int */
        if (!strcmp(a->name, "reduction") && bound[i].kind == TP_VAL_STR) {
            const char *r = bound[i].u.s;
            int64_t code = !strcmp(r, "none") ? 0 : !strcmp(r, "sum") ? 2 : 1;
            tp_value_clear(&bound[i]);
            bound[i] = tp_value_int(code);
        }
        /* aten.lstm_cell takes (h, c) as one list hx */
        if (op == TP_OP_LSTM_CELL && !strcmp(a->name, "cx")) continue;
        if (op == TP_OP_LSTM_CELL && !strcmp(a->name, "hx") && i + 1 < nb) {
            tp_value pair;
            if (tp_value_list(2, &pair) == TP_OK) {
                pair.u.seq.items[0] = bound[i];
                pair.u.seq.items[1] = bound[i + 1];
                bound[i] = pair;
                bound[i + 1] = tp_value_none();
            } else if (w->st == TP_OK) {
                w->st = tp_error(TP_ERR_NOMEM, "out of memory");
            }
        }
        /* grid_sampler_2d takes its modes as ints and align_corners as a bool */
        if (op == TP_OP_GRID_SAMPLE && bound[i].kind == TP_VAL_STR &&
            (!strcmp(a->name, "mode") || !strcmp(a->name, "padding_mode"))) {
            static const char *const names[] = {"bilinear", "nearest", "bicubic", "zeros", "border", "reflection"};
            int64_t code = -1;
            for (int k = 0; k < 6; k++)
                if (!strcmp(bound[i].u.s, names[k])) code = k % 3;
            tp_value_clear(&bound[i]);
            bound[i] = tp_value_int(code);
        }
        if (op == TP_OP_GRID_SAMPLE && !strcmp(a->name, "align_corners") && bound[i].kind == TP_VAL_NONE)
            bound[i] = tp_value_bool(false);
        /* aminmax's dim is one int in ATen */
        if (op == TP_OP_AMINMAX && !strcmp(a->name, "dim") && bound[i].kind == TP_VAL_LIST && tp_value_len(&bound[i]) == 1) {
            tp_value d = tp_value_int(tp_value_at(&bound[i], 0)->u.i);
            tp_value_clear(&bound[i]);
            bound[i] = d;
        }
        /* required arguments positionally (in ATen's order, which torch's binding follows), the others
         * by keyword, which torch binds by its own schema's names: so one that is keyword-only there
         * (kl_div's log_target) still lands; where our required arguments are in another order than
         * ATen's (batch_norm's running stats) the entry says TP_TORCH_KW: all but the first by keyword */
        bool kw = a->kwarg_only || (e && (e->flags & TP_TORCH_KW) ? i > 0 : a->has_default);
        jappend(w, inputs, named_arg(w, a->name, arg_json(w, &bound[i], where), kw));
        for (const char *q = e ? e->map : NULL; q && *q;) { /* every ATen name the table maps to this one */
            char alias[64];
            q = renamed_at(q, a->name, alias, sizeof alias);
            if (alias[0]) jappend(w, inputs, named_arg(w, alias, arg_json(w, &bound[i], where), kw));
        }
    }
    for (int i = 0; i < nb; i++) tp_value_clear(&bound[i]);
    /* ATen arguments we ignore or require on reading ("cudnn_enabled:-true", "half_to_float:=false") */
    for (const char *q = e ? e->map : NULL; q && *q;) {
        const char *end = strchr(q, ','), *colon = strchr(q, ':');
        size_t l = end ? (size_t)(end - q) : strlen(q);
        if (colon && colon < q + l && (colon[1] == '-' || colon[1] == '=') && (size_t)(colon + 2 - q) < l) {
            char name[64], lit[64];
            snprintf(name, sizeof name, "%.*s", (int)(colon - q), q);
            snprintf(lit, sizeof lit, "%.*s", (int)(l - (size_t)(colon + 2 - q)), colon + 2);
            json_t *v = !strcmp(lit, "true") || !strcmp(lit, "false") ? tagged(w, "as_bool", json_boolean(lit[0] == 't'))
                                                                      : tagged(w, "as_int", json_integer(strtoll(lit, NULL, 10)));
            jappend(w, inputs, named_arg(w, name, v, true));
        }
        q = end ? end + 1 : NULL;
    }
    /* outputs */
    const tp_value *mv = tp_node_meta_val(n);
    char node_name[300];
    snprintf(node_name, sizeof node_name, "%s", tp_node_name(n));
    if (mv && mv->kind == TP_VAL_TENSOR) {
        jappend(w, outputs, tagged(w, "as_tensor", named(w, tp_node_name(n))));
        tensor_value(w, tp_node_name(n), mv->u.tensor, NULL, tp_node_name(n), -1);
        if (op == TP_OP_ADAPTIVE_MAX_POOL1D || op == TP_OP_ADAPTIVE_MAX_POOL2D ||
            op == TP_OP_ADAPTIVE_MAX_POOL3D) { /* ATen's also returns the indices */
            char name[300];
            snprintf(name, sizeof name, "%s_unused_indices", tp_node_name(n));
            /* a node with two outputs is named apart from them, as torch names them */
            snprintf(node_name, sizeof node_name, "%s_with_indices", tp_node_name(n));
            tp_tensor *idx = NULL;
            if (tp_tensor_meta(TP_INT64, tp_tensor_ndim(mv->u.tensor), tp_tensor_sizes(mv->u.tensor), &idx) == TP_OK) {
                tensor_value(w, name, idx, NULL, tp_node_name(n), -1);
                jappend(w, outputs, tagged(w, "as_tensor", named(w, name)));
            } else if (w->st == TP_OK) {
                w->st = tp_error(TP_ERR_NOMEM, "out of memory");
            }
            tp_tensor_free(idx);
        }
    } else if (mv && (mv->kind == TP_VAL_INT)) {
        jappend(w, outputs, tagged(w, "as_sym_int", tagged(w, "as_name", json_string(tp_node_name(n)))));
        jset(w, w->sym_int_values, tp_node_name(n), tagged(w, "as_int", json_integer(mv->u.i)));
    } else if (mv && (mv->kind == TP_VAL_TUPLE || mv->kind == TP_VAL_LIST)) {
        json_t *list = sc->returns == TP_RET_TENSOR_LIST ? json_array() : NULL;
        for (int64_t i = 0; i < tp_value_len(mv); i++) {
            const tp_value *it = tp_value_at(mv, i);
            tp_node *u = getitem_user(n, i);
            char name[300];
            if (u) snprintf(name, sizeof name, "%s", tp_node_name(u));
            else snprintf(name, sizeof name, "%s_unused_%" PRId64, tp_node_name(n), i);
            if (it->kind != TP_VAL_TENSOR) {
                if (w->st == TP_OK) w->st = tp_error(TP_ERR_UNSUPPORTED, "%s: output %" PRId64 " is not a tensor", where, i);
                continue;
            }
            tensor_value(w, name, it->u.tensor, NULL, tp_node_name(n), (int)i);
            if (list) jappend(w, list, named(w, name));
            else jappend(w, outputs, tagged(w, "as_tensor", named(w, name)));
        }
        if (list) jappend(w, outputs, tagged(w, "as_tensors", list));
    } else {
        if (w->st == TP_OK) w->st = tp_error(TP_ERR_UNSUPPORTED, "%s: no recorded output", where);
    }
    jset(w, node, "target", json_string(target));
    jset(w, node, "inputs", inputs);
    jset(w, node, "outputs", outputs);
    jset(w, node, "metadata", json_object());
    jset(w, node, "is_hop_single_tensor_return", json_null());
    jset(w, node, "name", json_string(node_name));
    return node;
}

/* ---- tree specs (torch's pytree JSON: [1, {type, context, children_spec}]) ------------------ */

static json_t *spec_json(twr *w, const tp_treespec *s) {
    json_t *o = json_object(), *ch = json_array();
    tp_tree_kind k = tp_treespec_kind(s);
    const char *type = k == TP_TREE_TUPLE ? "builtins.tuple" : k == TP_TREE_LIST ? "builtins.list"
                       : k == TP_TREE_DICT ? "builtins.dict" : k == TP_TREE_NONE ? "builtins.NoneType" : NULL;
    jset(w, o, "type", type ? json_string(type) : json_null());
    if (k == TP_TREE_DICT) {
        json_t *keys = json_array();
        for (int64_t i = 0; i < tp_treespec_num_children(s); i++) jappend(w, keys, json_string(tp_treespec_key(s, i)));
        char *text = json_dumps(keys, JSON_COMPACT);
        json_decref(keys);
        jset(w, o, "context", text ? json_string(text) : NULL);
        tp_free(text);
    } else {
        jset(w, o, "context", k == TP_TREE_LEAF ? json_null() : json_string("null"));
    }
    for (int64_t i = 0; i < tp_treespec_num_children(s); i++) jappend(w, ch, spec_json(w, tp_treespec_child(s, i)));
    jset(w, o, "children_spec", ch);
    return o;
}

static json_t *spec_string(twr *w, const tp_treespec *s) {
    json_t *a = json_array();
    jappend(w, a, json_integer(1));
    jappend(w, a, spec_json(w, s));
    char *text = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    json_t *r = text ? json_string(text) : NULL;
    tp_free(text);
    if (!r && w->st == TP_OK) w->st = tp_error(TP_ERR_NOMEM, "out of memory writing a PyTorch archive");
    return r;
}

/* ---- the document ------------------------------------------------------------------------ */

static json_t *input_spec(twr *w, const tp_input_spec *s) {
    json_t *o = json_object();
    if (s->kind == TP_INPUT_USER_INPUT && s->arg.kind == TP_ARGK_CONSTANT) {
        jset(w, o, "name", json_string(s->arg.name));
        jset(w, o, "value", arg_json(w, &s->arg.value, "a constant input"));
        return tagged(w, "constant_input", o);
    }
    switch (s->kind) {
    case TP_INPUT_USER_INPUT: jset(w, o, "arg", tagged(w, "as_tensor", named(w, s->arg.name))); return tagged(w, "user_input", o);
    case TP_INPUT_PARAMETER:
        jset(w, o, "arg", named(w, s->arg.name));
        jset(w, o, "parameter_name", json_string(s->target));
        return tagged(w, "parameter", o);
    case TP_INPUT_BUFFER:
        jset(w, o, "arg", named(w, s->arg.name));
        jset(w, o, "buffer_name", json_string(s->target));
        jset(w, o, "persistent", json_boolean(s->persistent == TP_PERSISTENT_YES));
        return tagged(w, "buffer", o);
    case TP_INPUT_CONSTANT_TENSOR:
        jset(w, o, "arg", named(w, s->arg.name));
        jset(w, o, "tensor_constant_name", json_string(s->target));
        return tagged(w, "tensor_constant", o);
    case TP_INPUT_TOKEN: jset(w, o, "arg", named(w, s->arg.name)); return tagged(w, "token", o);
    default:
        json_decref(o);
        if (w->st == TP_OK) w->st = tp_error(TP_ERR_UNSUPPORTED, "input '%s': custom objects cannot be written", s->arg.name);
        return json_object();
    }
}

static json_t *output_spec(twr *w, const tp_output_spec *s) {
    json_t *o = json_object();
    static const struct {
        tp_output_kind k;
        const char *tag, *target_key;
    } kinds[] = {{TP_OUTPUT_USER_OUTPUT, "user_output", NULL},
                 {TP_OUTPUT_LOSS_OUTPUT, "loss_output", NULL},
                 {TP_OUTPUT_BUFFER_MUTATION, "buffer_mutation", "buffer_name"},
                 {TP_OUTPUT_PARAMETER_MUTATION, "parameter_mutation", "parameter_name"},
                 {TP_OUTPUT_GRADIENT_TO_PARAMETER, "gradient_to_parameter", "parameter_name"},
                 {TP_OUTPUT_GRADIENT_TO_USER_INPUT, "gradient_to_user_input", "user_input_name"},
                 {TP_OUTPUT_USER_INPUT_MUTATION, "user_input_mutation", "user_input_name"},
                 {TP_OUTPUT_TOKEN, "token", NULL}};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        if (kinds[i].k != s->kind) continue;
        if (s->kind == TP_OUTPUT_USER_OUTPUT) {
            if (s->arg.kind == TP_ARGK_CONSTANT) jset(w, o, "arg", arg_json(w, &s->arg.value, "a constant output"));
            else jset(w, o, "arg", tagged(w, "as_tensor", named(w, s->arg.name)));
        } else {
            jset(w, o, "arg", named(w, s->arg.name));
        }
        if (kinds[i].target_key) jset(w, o, kinds[i].target_key, json_string(s->target ? s->target : ""));
        return tagged(w, kinds[i].tag, o);
    }
    json_decref(o);
    return json_object();
}

static json_t *document(twr *w) {
    const tp_program *p = w->p;
    const tp_graph *g = tp_program_graph(p);
    const tp_signature *sig = tp_program_signature(p);
    json_t *graph = json_object(), *ginputs = json_array(), *nodes = json_array(), *goutputs = json_array();
    w->tensor_values = json_object();
    w->sym_int_values = json_object();
    for (const tp_node *n = tp_graph_first_node(g); n && w->st == TP_OK; n = tp_node_next(n)) {
        tp_node_kind k = tp_node_get_kind(n);
        const tp_value *mv = tp_node_meta_val(n);
        if (k == TP_NODE_PLACEHOLDER) {
            int si = tp_signature_find_input(sig, tp_node_name(n));
            const tp_input_spec *s = si >= 0 ? tp_signature_input(sig, si) : NULL;
            if (!mv || mv->kind != TP_VAL_TENSOR) {
                w->st = tp_error(TP_ERR_UNSUPPORTED, "input '%s': only tensor inputs can be written", tp_node_name(n));
                break;
            }
            tensor_value(w, tp_node_name(n), mv->u.tensor, s && s->kind == TP_INPUT_USER_INPUT ? tp_node_name(n) : NULL,
                         NULL, -1);
        } else if (k == TP_NODE_CALL_FUNCTION) {
            if (tp_node_op(n) == TP_OP_GETITEM) {
                const tp_value *src = tp_value_at(tp_node_args(n), 0);
                if (src && src->kind == TP_VAL_NODE && tp_node_get_kind(src->u.node) == TP_NODE_CALL_FUNCTION) continue;
                w->st = tp_error(TP_ERR_UNSUPPORTED, "node %s: getitem of a structured input cannot be written", tp_node_name(n));
                break;
            }
            json_t *jn = write_node(w, n);
            if (jn) jappend(w, nodes, jn);
        } else if (k == TP_NODE_OUTPUT) {
            tp_value leaves;
            tp_treespec *spec = NULL;
            w->st = tp_pytree_flatten(tp_value_at(tp_node_args(n), 0), &leaves, &spec);
            if (w->st != TP_OK) break;
            tp_treespec_free(spec);
            for (int64_t i = 0; i < tp_value_len(&leaves); i++) jappend(w, goutputs, arg_json(w, tp_value_at(&leaves, i), "the output"));
            tp_value_clear(&leaves);
        } else {
            w->st = tp_error(TP_ERR_UNSUPPORTED, "node %s: %s nodes cannot be written (lift get_attr first)", tp_node_name(n),
                             tp_node_kind_name(k));
        }
    }
    /* graph inputs in signature order: placeholders, and the values of constant inputs */
    for (int i = 0; i < tp_signature_n_inputs(sig); i++) {
        const tp_input_spec *s = tp_signature_input(sig, i);
        if (s->arg.kind == TP_ARGK_CONSTANT) jappend(w, ginputs, arg_json(w, &s->arg.value, "a constant input"));
        else jappend(w, ginputs, tagged(w, "as_tensor", named(w, s->arg.name)));
    }
    jset(w, graph, "inputs", ginputs);
    jset(w, graph, "outputs", goutputs);
    jset(w, graph, "nodes", nodes);
    jset(w, graph, "tensor_values", w->tensor_values);
    jset(w, graph, "sym_int_values", w->sym_int_values);
    jset(w, graph, "sym_bool_values", json_object());
    jset(w, graph, "is_single_tensor_return", json_false());
    jset(w, graph, "custom_obj_values", json_object());
    jset(w, graph, "sym_float_values", json_object());
    /* signature */
    json_t *signature = json_object(), *ins = json_array(), *outs = json_array();
    for (int i = 0; i < tp_signature_n_inputs(sig); i++) jappend(w, ins, input_spec(w, tp_signature_input(sig, i)));
    for (int i = 0; i < tp_signature_n_outputs(sig); i++) jappend(w, outs, output_spec(w, tp_signature_output(sig, i)));
    jset(w, signature, "input_specs", ins);
    jset(w, signature, "output_specs", outs);
    /* module call graph: the root with the call's tree specs */
    /* (torch leaves the root's argument lists empty: they are for preserved submodule signatures) */
    json_t *mcg = json_array(), *root = json_object(), *rs = json_object();
    jset(w, rs, "inputs", json_array());
    jset(w, rs, "outputs", json_array());
    if (tp_program_in_spec(p) && tp_program_out_spec(p)) {
        jset(w, rs, "in_spec", spec_string(w, tp_program_in_spec(p)));
        jset(w, rs, "out_spec", spec_string(w, tp_program_out_spec(p)));
    } else if (w->st == TP_OK) {
        w->st = tp_error(TP_ERR_UNSUPPORTED, "the program has no input/output tree specs");
    }
    /* forward's argument names: the root call's (d, pair for structured inputs), else the user inputs' */
    json_t *fan = json_array();
    const tp_module_call_signature *root_sig = NULL;
    for (int i = 0; i < tp_program_num_module_calls(p); i++)
        if (!tp_program_module_call(p, i).fqn[0]) root_sig = tp_program_module_call(p, i).signature;
    if (root_sig && root_sig->n_forward_arg_names > 0) {
        for (int i = 0; i < root_sig->n_forward_arg_names; i++) jappend(w, fan, json_string(root_sig->forward_arg_names[i]));
    } else {
        for (int i = 0; i < tp_signature_n_inputs(sig); i++)
            if (tp_signature_input(sig, i)->kind == TP_INPUT_USER_INPUT)
                jappend(w, fan, json_string(tp_signature_input(sig, i)->arg.name));
    }
    jset(w, rs, "forward_arg_names", fan);
    jset(w, root, "fqn", json_string(""));
    jset(w, root, "signature", rs);
    jappend(w, mcg, root);
    for (int i = 0; i < tp_program_num_module_calls(p); i++) {
        tp_module_call_entry mc = tp_program_module_call(p, i);
        if (!mc.fqn[0]) continue;
        json_t *e = json_object();
        jset(w, e, "fqn", json_string(mc.fqn));
        jset(w, e, "signature", json_null());
        jappend(w, mcg, e);
    }
    json_t *gm = json_object();
    jset(w, gm, "graph", graph);
    jset(w, gm, "signature", signature);
    jset(w, gm, "module_call_graph", mcg);
    jset(w, gm, "metadata", json_object());
    jset(w, gm, "treespec_namedtuple_fields", json_object());
    /* ranges */
    json_t *ranges = json_object();
    for (int i = 0; i < tp_program_num_ranges(p); i++) {
        const tp_range_constraint *r = tp_program_range(p, i);
        json_t *o = json_object();
        jset(w, o, "min_val", json_integer(r->min));
        jset(w, o, "max_val", r->max == TP_DIM_UNBOUNDED ? json_integer(INT64_MAX - 1) : json_integer(r->max));
        jset(w, ranges, r->name, o);
    }
    json_t *doc = json_object(), *sv = json_object(), *opset = json_object();
    jset(w, sv, "major", json_integer(TP_TORCH_SCHEMA_MAJOR));
    jset(w, sv, "minor", json_integer(20));
    jset(w, opset, "aten", json_integer(10));
    jset(w, doc, "graph_module", gm);
    jset(w, doc, "opset_version", opset);
    jset(w, doc, "range_constraints", ranges);
    jset(w, doc, "schema_version", sv);
    json_t *ver = json_array();
    jappend(w, ver, json_string("TRAINING"));
    jset(w, doc, "verifiers", ver);
    jset(w, doc, "torch_version", json_string("2.15.0"));
    jset(w, doc, "guards_code", json_array());
    return doc;
}

/* doc as compact text (jansson allocates through our hook: *json is tp_free'd); doc is released. */
static tp_status dump(twr *w, json_t *doc, char **json) {
    char *text = w->st == TP_OK ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    TP_TRY(w->st);
    TP_CHECK(text, TP_ERR_NOMEM, "out of memory writing a PyTorch archive");
    *json = text;
    return TP_OK;
}

/* The probe graphs: for each root symbol of the dim rules, the graph with its meta inferred at two
 * other values of it (inside its range; a probe that fails to infer is left out). */
static tp_status make_probes(const tp_program *p, probes *pr) {
    memset(pr, 0, sizeof *pr);
    for (int i = 0; i < tp_program_num_dim_rules(p) && pr->n < PROBE_SYMS; i++) {
        const tp_dim_rule *r = tp_program_dim_rule(p, i);
        if (r->kind == TP_DIM_STATIC) continue;
        bool seen = false;
        for (int k = 0; k < pr->n; k++) seen = seen || !strcmp(pr->sym[k], r->symbol);
        const tp_node *ph = tp_graph_find_node(tp_program_graph(p), r->site.input);
        const tp_value *m = ph ? tp_node_meta_val(ph) : NULL;
        if (seen || !m || m->kind != TP_VAL_TENSOR || r->site.dim >= tp_tensor_ndim(m->u.tensor)) continue;
        int64_t scale = r->kind == TP_DIM_DERIVED ? r->scale : 1, offset = r->kind == TP_DIM_DERIVED ? r->offset : 0;
        int64_t e = (tp_tensor_sizes(m->u.tensor)[r->site.dim] - offset) / scale;
        const tp_range_constraint *rc = tp_program_find_range(p, r->symbol);
        int64_t hi = rc ? rc->max : INT64_MAX, lo = rc && rc->min > 2 ? rc->min : 2;
        int64_t v[2], nv = 0;
        for (int64_t c = e + 1; c <= hi && nv < 2 && c < e + 64; c++) v[nv++] = c;
        for (int64_t c = e - 1; c >= lo && nv < 2; c--) v[nv++] = c;
        if (nv < 2) continue;
        int k = pr->n++;
        pr->sym[k] = r->symbol;
        pr->ex[k] = e;
        for (int j = 0; j < 2; j++) {
            pr->val[k][j] = v[j];
            tp_graph *g = NULL;
            TP_TRY(tp_graph_copy(tp_program_graph(p), &g));
            tp_status st = TP_OK;
            for (tp_node *n = tp_graph_first_node(g); st == TP_OK && n; n = tp_node_next(n)) {
                if (tp_node_get_kind(n) != TP_NODE_PLACEHOLDER) continue;
                const tp_value *nm = tp_node_meta_val(n);
                if (!nm || nm->kind != TP_VAL_TENSOR) continue;
                int64_t sizes[TP_MAX_DIMS];
                int nd = tp_tensor_ndim(nm->u.tensor);
                for (int d = 0; d < nd; d++) {
                    sizes[d] = tp_tensor_sizes(nm->u.tensor)[d];
                    const tp_dim_rule *q = rule_of(p, tp_node_name(n), d);
                    if (q && q->kind != TP_DIM_STATIC && !strcmp(q->symbol, r->symbol))
                        sizes[d] = v[j] * (q->kind == TP_DIM_DERIVED ? q->scale : 1) +
                                   (q->kind == TP_DIM_DERIVED ? q->offset : 0);
                }
                tp_tensor *mt = NULL;
                st = tp_tensor_meta(tp_tensor_dtype(nm->u.tensor), nd, sizes, &mt);
                if (st == TP_OK) {
                    tp_value mv = tp_value_tensor(mt);
                    st = tp_node_set_meta_val(n, &mv);
                    tp_value_clear(&mv);
                }
            }
            if (st == TP_OK && tp_graph_infer_meta(g) == TP_OK) {
                pr->g[k][j] = g;
            } else {
                tp_graph_free(g);
                tp_clear_error();
                if (st == TP_ERR_NOMEM) return st;
            }
        }
    }
    return TP_OK;
}

static void free_probes(probes *pr) {
    for (int k = 0; k < pr->n; k++)
        for (int j = 0; j < 2; j++) tp_graph_free(pr->g[k][j]);
}

tp_status tp__torch_program_to_json(const tp_program *p, char **json, size_t *len) {
    twr w = {.p = p};
    tp_status st = make_probes(p, &w.pr);
    if (st == TP_OK) st = dump(&w, document(&w), json);
    free_probes(&w.pr);
    TP_TRY(st);
    if (len) *len = strlen(*json);
    return TP_OK;
}

/* ---- payload configs ------------------------------------------------------------------- */

tp_status tp__torch_payload_config(const tp_named_state *s, const char *prefix, char **json) {
    twr w = {0};
    json_t *cfg = json_object(), *doc = json_object();
    for (int i = 0; i < s->n; i++) {
        const tp_tensor *t = s->items[i].tensor;
        json_t *e = json_object();
        char path[64];
        snprintf(path, sizeof path, "%s%d", prefix, i);
        jset(&w, e, "path_name", json_string(path));
        jset(&w, e, "is_param", json_boolean(s->items[i].kind == TP_STATE_PARAMETER));
        jset(&w, e, "use_pickle", json_false());
        w.tensor_values = json_object();
        tensor_value(&w, "t", t, NULL, NULL, -1);
        json_t *tm = json_object_get(w.tensor_values, "t");
        jset(&w, e, "tensor_meta", json_incref(tm));
        json_decref(w.tensor_values);
        jset(&w, cfg, s->items[i].name, e);
    }
    jset(&w, doc, "config", cfg);
    return dump(&w, doc, json);
}

/* ---- torch.save of the sample inputs ------------------------------------------------------ */

static const char *storage_class(tp_dtype d) {
    switch (d) {
    case TP_FLOAT32: return "FloatStorage";
    case TP_FLOAT64: return "DoubleStorage";
    case TP_FLOAT16: return "HalfStorage";
    case TP_BFLOAT16: return "BFloat16Storage";
    case TP_INT64: return "LongStorage";
    case TP_INT32: return "IntStorage";
    case TP_INT16: return "ShortStorage";
    case TP_INT8: return "CharStorage";
    case TP_UINT8: return "ByteStorage";
    case TP_BOOL: return "BoolStorage";
    default: return NULL;
    }
}


static void pk_op(tp_sb *sb, unsigned char c) { tp__sb_append(sb, &c, 1); }

static void pk_str(tp_sb *sb, const char *s) {
    uint32_t n = (uint32_t)strlen(s);
    unsigned char h[5] = {'X', (unsigned char)n, (unsigned char)(n >> 8), (unsigned char)(n >> 16), (unsigned char)(n >> 24)};
    tp__sb_append(sb, h, 5);
    tp__sb_append(sb, s, n);
}

static void pk_int(tp_sb *sb, int64_t v) {
    if (v >= 0 && v < 256) {
        unsigned char b[2] = {'K', (unsigned char)v};
        tp__sb_append(sb, b, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        uint32_t u = (uint32_t)(int32_t)v;
        unsigned char b[5] = {'J', (unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16), (unsigned char)(u >> 24)};
        tp__sb_append(sb, b, 5);
    } else {
        unsigned char b[10] = {0x8a, 8};
        uint64_t u = (uint64_t)v;
        for (int i = 0; i < 8; i++) b[2 + i] = (unsigned char)(u >> (8 * i));
        tp__sb_append(sb, b, 10);
    }
}

static void pk_global(tp_sb *sb, const char *module, const char *name) {
    pk_op(sb, 'c');
    tp__sb_append(sb, module, strlen(module));
    pk_op(sb, '\n');
    tp__sb_append(sb, name, strlen(name));
    pk_op(sb, '\n');
}

static void pk_int_tuple(tp_sb *sb, int n, const int64_t *v) {
    pk_op(sb, '(');
    for (int i = 0; i < n; i++) pk_int(sb, v[i]);
    pk_op(sb, 't');
}

/* One value of a torch.save pickle: tensors as torch writes them
 * (_rebuild_tensor_v2 over ('storage', <class>, key, 'cpu', numel); the key
 * is the tensor's index in ts), Python scalars, tuples, lists, dicts. */
static tp_status pk_value(tp_sb *sb, const tp_value *v, tp_tensor **ts, int *n_t, int depth) {
    TP_CHECK(depth < 32, TP_ERR_UNSUPPORTED, "example inputs nested too deeply");
    switch (v->kind) {
    case TP_VAL_NONE: pk_op(sb, 'N'); return TP_OK;
    case TP_VAL_BOOL: pk_op(sb, v->u.b ? 0x88 : 0x89); return TP_OK;
    case TP_VAL_INT: pk_int(sb, v->u.i); return TP_OK;
    case TP_VAL_STR: pk_str(sb, v->u.s); return TP_OK;
    case TP_VAL_FLOAT: {
        uint64_t u;
        memcpy(&u, &v->u.f, sizeof u);
        unsigned char b[9] = {'G'};
        for (int k = 0; k < 8; k++) b[1 + k] = (unsigned char)(u >> (56 - 8 * k)); /* big-endian */
        tp__sb_append(sb, b, 9);
        return TP_OK;
    }
    case TP_VAL_TUPLE:
    case TP_VAL_LIST:
        pk_op(sb, v->kind == TP_VAL_LIST ? ']' : '(');
        if (v->kind == TP_VAL_LIST) pk_op(sb, '(');
        for (int64_t i = 0; i < tp_value_len(v); i++) TP_TRY(pk_value(sb, tp_value_at(v, i), ts, n_t, depth + 1));
        pk_op(sb, v->kind == TP_VAL_LIST ? 'e' : 't');
        return TP_OK;
    case TP_VAL_DICT:
        pk_op(sb, '}');
        pk_op(sb, '(');
        for (int64_t i = 0; i < tp_value_len(v); i++) {
            pk_str(sb, v->u.seq.keys[i]);
            TP_TRY(pk_value(sb, tp_value_at(v, i), ts, n_t, depth + 1));
        }
        pk_op(sb, 'u');
        return TP_OK;
    case TP_VAL_TENSOR: break;
    default: return tp_error(TP_ERR_UNSUPPORTED, "an example input of kind %s cannot be written", tp_value_kind_name(v->kind));
    }
    TP_CHECK(*n_t < TP_LIMIT_ITEMS_SAMPLE, TP_ERR_UNSUPPORTED, "more than %d example tensors", TP_LIMIT_ITEMS_SAMPLE);
    const int ti = (*n_t)++;
    ts[ti] = v->u.tensor;
    const char *cls = storage_class(tp_tensor_dtype(ts[ti]));
    TP_CHECK(cls, TP_ERR_UNSUPPORTED, "an example tensor of dtype %s cannot be written", tp_dtype_name(tp_tensor_dtype(ts[ti])));
    char key[16];
    snprintf(key, sizeof key, "%d", ti);
    int64_t strides[TP_MAX_DIMS], acc = 1;
    for (int d = tp_tensor_ndim(ts[ti]) - 1; d >= 0; d--) {
        strides[d] = acc;
        acc *= tp_tensor_sizes(ts[ti])[d];
    }
    pk_global(sb, "torch._utils", "_rebuild_tensor_v2");
    pk_op(sb, '(');
    pk_op(sb, '(');
    pk_str(sb, "storage");
    pk_global(sb, "torch", cls);
    pk_str(sb, key);
    pk_str(sb, "cpu");
    pk_int(sb, tp_tensor_numel(ts[ti]));
    pk_op(sb, 't');
    pk_op(sb, 'Q');
    pk_int(sb, 0);
    pk_int_tuple(sb, tp_tensor_ndim(ts[ti]), tp_tensor_sizes(ts[ti]));
    pk_int_tuple(sb, tp_tensor_ndim(ts[ti]), strides);
    pk_op(sb, 0x89);
    pk_global(sb, "collections", "OrderedDict");
    pk_op(sb, ')');
    pk_op(sb, 'R');
    pk_op(sb, 't');
    pk_op(sb, 'R');
    return TP_OK;
}

/* torch.save(value) - the sample inputs' (args, kwargs) - as a ZIP in a new
 * buffer: archive/data.pkl (protocol 2), archive/data/<k> raw contiguous
 * bytes, the version files. */
tp_status tp__torch_save_value(const tp_value *value, void **data, size_t *size) {
    tp_sb sb = {0};
    tp_tensor *ts[TP_LIMIT_ITEMS_SAMPLE];
    int n_t = 0;
    pk_op(&sb, 0x80);
    pk_op(&sb, 2);
    tp_status vst = pk_value(&sb, value, ts, &n_t, 0);
    if (vst != TP_OK) {
        tp__sb_free(&sb);
        return vst;
    }
    pk_op(&sb, '.');
    size_t pkl_len = sb.len;
    char *pkl = NULL;
    TP_TRY(tp__sb_finish(&sb, &pkl));
    tp_zip_writer *zw = NULL;
    tp_status st = tp__zip_writer_new(&zw);
    if (st == TP_OK) st = tp__zip_add(zw, "archive/data.pkl", pkl, pkl_len, false);
    if (st == TP_OK) st = tp__zip_add(zw, "archive/.format_version", "1", 1, false);
    if (st == TP_OK) st = tp__zip_add(zw, "archive/.storage_alignment", "64", 2, false);
    if (st == TP_OK) st = tp__zip_add(zw, "archive/byteorder", "little", 6, false);
    for (int i = 0; st == TP_OK && i < n_t; i++) {
        char name[64];
        snprintf(name, sizeof name, "archive/data/%d", i);
        tp_tensor *c = NULL;
        st = tp_tensor_contiguous(ts[i], &c);
        if (st == TP_OK)
            st = tp__zip_add(zw, name, tp_tensor_data(c), (size_t)tp_tensor_numel(c) * tp_dtype_size(tp_tensor_dtype(c)),
                             false);
        tp_tensor_free(c);
    }
    if (st == TP_OK) st = tp__zip_add(zw, "archive/version", "3\n", 2, false);
    tp_free(pkl);
    if (st != TP_OK) {
        tp__zip_writer_free(zw);
        return st;
    }
    return tp__zip_finish(zw, data, size);
}
