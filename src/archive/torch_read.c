/*
 * torch_read.c - PyTorch's export document (models/<model>.json, schema
 * major 8) and payload configs -> tp_program (torch.h has the format).
 *
 * The document is read in one pass over the graph: placeholders from
 * graph.inputs with dtype and (hint) shape from tensor_values, each node as
 * a call of the op its ATen target maps to (torch_ops.c) with the named
 * arguments bound onto the op's schema, getitem nodes for ops with several
 * outputs, the output node from graph.outputs; then the signature from the
 * input and output specs, the state, the dynamic dims of the user inputs
 * as dim rules, ranges and equalities, the in/out tree specs and the module
 * call graph. Every JSON value is checked for kind before use; errors name
 * the path ("graph.nodes[3] (linear).inputs[1]: ...").
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "serde_impl.h"
#include "torch.h"
#include "zip.h"
#include "tpexport/ops.h"

/* st = the error and jump to label unless cond. */
#define CHECK_GOTO(cond, st, code, label, ...)  \
    do {                                        \
        if (!(cond)) {                          \
            (st) = tp_error((code), __VA_ARGS__); \
            goto label;                         \
        }                                       \
    } while (0)

bool tp__torch_dtype(int64_t code, tp_dtype *out) {
    switch (code) {
    case 1: *out = TP_UINT8; return true;
    case 2: *out = TP_INT8; return true;
    case 3: *out = TP_INT16; return true;
    case 4: *out = TP_INT32; return true;
    case 5: *out = TP_INT64; return true;
    case 6: *out = TP_FLOAT16; return true;
    case 7: *out = TP_FLOAT32; return true;
    case 8: *out = TP_FLOAT64; return true;
    case 12: *out = TP_BOOL; return true;
    case 13: *out = TP_BFLOAT16; return true;
    default: return false;
    }
}

static const char *dtype_code_name(int64_t code) {
    switch (code) {
    case 9: return "complex32";
    case 10: return "complex64";
    case 11: return "complex128";
    case 28: return "uint16";
    case 29: return "float8_e4m3fn";
    case 30: return "float8_e5m2";
    case 31: return "float8_e4m3fnuz";
    case 32: return "float8_e5m2fnuz";
    case 33: return "float8_e8m0fnu";
    case 34: return "uint32";
    case 35: return "uint64";
    default: return "unknown";
    }
}

static tp_status need_dtype(int64_t code, const char *where, tp_dtype *out) {
    if (tp__torch_dtype(code, out)) return TP_OK;
    return tp_error(TP_ERR_UNSUPPORTED, "%s: dtype %s (torch ScalarType %" PRId64 ") is not supported", where,
                    dtype_code_name(code), code);
}

/* ---- JSON access ------------------------------------------------------------------- */

static tp_status need_obj(const json_t *v, const char *where) {
    return json_is_object(v) ? TP_OK : tp_error(TP_ERR_CORRUPT, "%s: expected an object", where);
}

static tp_status get_field(const json_t *obj, const char *key, json_type type, bool required, const char *where,
                           json_t **out) {
    *out = NULL;
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (required) return tp_error(TP_ERR_CORRUPT, "%s: missing field '%s'", where, key);
        return TP_OK;
    }
    bool ok = type == JSON_INTEGER ? json_is_integer(v)
              : type == JSON_REAL  ? json_is_number(v)
              : type == JSON_TRUE  ? json_is_boolean(v)
                                   : json_typeof(v) == type;
    static const char *names[] = {"an object", "an array", "a string", "an integer", "a number", "a boolean",
                                  "a boolean", "null"};
    if (!ok) return tp_error(TP_ERR_CORRUPT, "%s.%s: expected %s", where, key, names[type]);
    *out = v;
    return TP_OK;
}

static tp_status get_str(const json_t *obj, const char *key, const char *where, const tp_doc_limits *lim,
                         const char **out) {
    json_t *v;
    TP_TRY(get_field(obj, key, JSON_STRING, true, where, &v));
    TP_CHECK(json_string_length(v) <= lim->name, TP_ERR_CORRUPT, "%s.%s: a name longer than %zu bytes", where, key,
             lim->name);
    TP_CHECK(strlen(json_string_value(v)) == json_string_length(v), TP_ERR_CORRUPT, "%s.%s: a name with a NUL byte",
             where, key);
    *out = json_string_value(v);
    return TP_OK;
}

static tp_status check_array(const json_t *v, const char *where, const tp_doc_limits *lim) {
    TP_CHECK(json_is_array(v), TP_ERR_CORRUPT, "%s: expected an array", where);
    TP_CHECK(json_array_size(v) <= lim->items, TP_ERR_CORRUPT, "%s: %zu items exceed the limit of %zu (max_items)",
             where, json_array_size(v), lim->items);
    return TP_OK;
}

/* The one member of a tagged union ({"as_int": 3}): its key and value. */
static tp_status union_of(const json_t *v, const char *where, const char **key, json_t **val) {
    *key = "";
    *val = NULL;
    TP_TRY(need_obj(v, where));
    TP_CHECK(json_object_size(v) == 1, TP_ERR_CORRUPT, "%s: expected one tagged member, found %zu", where,
             json_object_size(v));
    void *it = json_object_iter((json_t *)v);
    *key = json_object_iter_key(it);
    *val = json_object_iter_value(it);
    return TP_OK;
}

/* ---- symbolic dims: sympy's srepr subset and the plain infix form ------------------- */

/* A linear expression scale * symbol + offset (symbol "" for a constant). */
typedef struct lin {
    char symbol[64];
    int64_t scale, offset;
} lin;

typedef struct eparse {
    const char *s;
    bool bad;
} eparse;

static void skip_ws(eparse *p) {
    while (*p->s == ' ') p->s++;
}

static bool eat(eparse *p, const char *tok) {
    skip_ws(p);
    size_t n = strlen(tok);
    if (strncmp(p->s, tok, n) != 0) return false;
    p->s += n;
    return true;
}

static bool parse_int(eparse *p, int64_t *v) {
    skip_ws(p);
    char *end;
    errno = 0;
    long long x = strtoll(p->s, &end, 10);
    if (end == p->s || errno) return false;
    p->s = end;
    *v = (int64_t)x;
    return true;
}

static bool lin_add(lin *a, const lin *b) {
    if (b->symbol[0]) {
        if (a->symbol[0] && strcmp(a->symbol, b->symbol) != 0) return false; /* two symbols */
        if (!a->symbol[0]) {
            memcpy(a->symbol, b->symbol, sizeof a->symbol);
            a->scale = 0;
        }
        if (__builtin_add_overflow(a->scale, b->scale, &a->scale)) return false;
    }
    return !__builtin_add_overflow(a->offset, b->offset, &a->offset);
}

static bool lin_mul(lin *a, const lin *b) {
    if (a->symbol[0] && b->symbol[0]) return false; /* a product of symbols */
    const lin *k = a->symbol[0] ? b : a, *e = a->symbol[0] ? a : b;
    lin r = *e;
    if (__builtin_mul_overflow(r.scale, k->offset, &r.scale) || __builtin_mul_overflow(r.offset, k->offset, &r.offset))
        return false;
    if (!r.symbol[0]) r.scale = 0;
    *a = r;
    return true;
}

static bool srepr(eparse *p, lin *out);

static bool srepr_args(eparse *p, lin *out, bool mul) {
    bool first = true;
    while (!p->bad) {
        lin t;
        if (!srepr(p, &t)) return false;
        if (first) *out = t;
        else if (!(mul ? lin_mul(out, &t) : lin_add(out, &t))) return false;
        first = false;
        if (eat(p, ")")) return true;
        if (!eat(p, ",")) return false;
    }
    return false;
}

/* Symbol('s0', positive=True, integer=True) | Integer(n) | Mul(a, b, ...) | Add(a, b, ...) */
static bool srepr(eparse *p, lin *out) {
    memset(out, 0, sizeof *out);
    if (eat(p, "Symbol(")) {
        skip_ws(p);
        if (*p->s != '\'') return false;
        const char *start = ++p->s;
        while (*p->s && *p->s != '\'') p->s++;
        size_t n = (size_t)(p->s - start);
        if (!*p->s || n == 0 || n >= sizeof out->symbol) return false;
        memcpy(out->symbol, start, n);
        out->symbol[n] = '\0';
        p->s++;
        /* assumptions (positive=True, integer=True) up to the closing parenthesis */
        while (*p->s && *p->s != ')' && *p->s != '(') p->s++;
        if (*p->s != ')') return false;
        p->s++;
        out->scale = 1;
        return true;
    }
    if (eat(p, "Integer(")) return parse_int(p, &out->offset) && eat(p, ")");
    if (eat(p, "Mul(")) return srepr_args(p, out, true);
    if (eat(p, "Add(")) return srepr_args(p, out, false);
    return false;
}

/* infix: term (('+'|'-') term)*, term = [int '*'] name | int */
static bool infix(eparse *p, lin *out) {
    memset(out, 0, sizeof *out);
    int sign = 1;
    for (;;) {
        lin t;
        memset(&t, 0, sizeof t);
        skip_ws(p);
        int64_t k = 1;
        bool have_k = false;
        if ((*p->s >= '0' && *p->s <= '9')) {
            if (!parse_int(p, &k)) return false;
            have_k = true;
            if (!eat(p, "*")) {
                t.offset = k;
                goto add;
            }
            skip_ws(p);
        }
        {
            const char *start = p->s;
            while ((*p->s >= 'a' && *p->s <= 'z') || (*p->s >= 'A' && *p->s <= 'Z') || (*p->s >= '0' && *p->s <= '9') ||
                   *p->s == '_')
                p->s++;
            size_t n = (size_t)(p->s - start);
            if (n == 0 || n >= sizeof t.symbol || (start[0] >= '0' && start[0] <= '9')) return false;
            memcpy(t.symbol, start, n);
            t.symbol[n] = '\0';
            t.scale = have_k ? k : 1;
        }
    add:
        if (sign < 0 && (__builtin_mul_overflow(t.scale, -1, &t.scale) || __builtin_mul_overflow(t.offset, -1, &t.offset)))
            return false;
        if (!lin_add(out, &t)) return false;
        skip_ws(p);
        if (!*p->s) return true;
        if (eat(p, "+")) sign = 1;
        else if (eat(p, "-")) sign = -1;
        else return false;
    }
}

static bool parse_dim_expr(const char *s, lin *out) {
    eparse p = {s, false};
    bool ok = strchr(s, '(') ? srepr(&p, out) : infix(&p, out);
    skip_ws(&p);
    return ok && !*p.s;
}

/* A SymInt ({"as_int": n} | {"as_expr": {"expr_str", "hint"}}): its value
 * (the hint for an expression) and, for an expression, its linear form. */
static tp_status sym_int(const json_t *v, const char *where, bool want_expr, int64_t *value, lin *expr, bool *symbolic) {
    memset(expr, 0, sizeof *expr);
    const char *key;
    json_t *val;
    TP_TRY(union_of(v, where, &key, &val));
    *symbolic = false;
    if (strcmp(key, "as_int") == 0) {
        TP_CHECK(json_is_integer(val), TP_ERR_CORRUPT, "%s.as_int: expected an integer", where);
        *value = json_integer_value(val);
        return TP_OK;
    }
    TP_CHECK(strcmp(key, "as_expr") == 0, TP_ERR_CORRUPT, "%s: unknown SymInt kind '%s'", where, key);
    json_t *es, *hint, *hv = NULL;
    TP_TRY(get_field(val, "expr_str", JSON_STRING, true, where, &es));
    TP_TRY(get_field(val, "hint", JSON_OBJECT, false, where, &hint));
    if (hint) hv = json_object_get(hint, "as_int");
    TP_CHECK(hv && json_is_integer(hv), TP_ERR_UNSUPPORTED, "%s: symbolic size '%.200s' has no int hint", where,
             json_string_value(es));
    *value = json_integer_value(hv);
    *symbolic = true;
    if (!want_expr) return TP_OK; /* an intermediate size: its hint is what shapes are checked against */
    TP_CHECK(parse_dim_expr(json_string_value(es), expr), TP_ERR_UNSUPPORTED,
             "%s: symbolic size '%.200s' is not of the form a*s + b", where, json_string_value(es));
    *symbolic = expr->symbol[0] != '\0';
    if (!*symbolic) TP_CHECK(expr->offset == *value, TP_ERR_CORRUPT, "%s: size %" PRId64 " with hint %" PRId64, where,
                             expr->offset, *value);
    return TP_OK;
}

/* ---- reading state -------------------------------------------------------------------- */

typedef struct tdim {
    char input[TP_LIMIT_NAME + 1];
    int dim;
    lin e;
} tdim;

typedef struct trd {
    json_t *uses;  /* value name -> index of the last node reading it (graph outputs: the node count) */
    json_t *names; /* the document's value names -> our nodes (the graph may rename a node: "sum" is
                      a Python builtin, so the node is "sum_1") */
    const tp_doc_limits *lim;
    const tp_torch_read_options *o;
    json_t *tensor_values;
    tp_graph *g;
    /* outputs of ops whose extra results we do not produce (mean, rstd, mask) */
    char **dropped;
    int n_dropped, cap_dropped;
    tdim *dims;
    int n_dims, cap_dims;
    int fresh;
} trd;

static tp_status drop_name(trd *r, const char *name) {
    if (r->n_dropped == r->cap_dropped) {
        int nc = r->cap_dropped ? 2 * r->cap_dropped : 16;
        char **d = tp_realloc(r->dropped, (size_t)nc * sizeof *d);
        TP_CHECK(d, TP_ERR_NOMEM, "out of memory");
        r->dropped = d;
        r->cap_dropped = nc;
    }
    r->dropped[r->n_dropped] = tp_strdup(name);
    TP_CHECK(r->dropped[r->n_dropped], TP_ERR_NOMEM, "out of memory");
    r->n_dropped++;
    return TP_OK;
}

static bool is_dropped(const trd *r, const char *name) {
    for (int i = 0; i < r->n_dropped; i++)
        if (strcmp(r->dropped[i], name) == 0) return true;
    return false;
}

/* tensor_values[name] as dtype + hint sizes; dims[] gets the symbolic ones
 * when `input` names a user input. */
static tp_status tensor_meta(trd *r, const char *name, const char *where, const char *input, tp_dtype *dtype, int *nd,
                             int64_t *sizes) {
    json_t *tm = json_object_get(r->tensor_values, name);
    TP_CHECK(tm, TP_ERR_CORRUPT, "%s: tensor '%s' has no entry in graph.tensor_values", where, name);
    char w[400];
    snprintf(w, sizeof w, "graph.tensor_values['%s']", name);
    TP_TRY(need_obj(tm, w));
    json_t *dt, *sz, *layout;
    TP_TRY(get_field(tm, "dtype", JSON_INTEGER, true, w, &dt));
    TP_TRY(need_dtype(json_integer_value(dt), w, dtype));
    TP_TRY(get_field(tm, "layout", JSON_INTEGER, false, w, &layout));
    TP_CHECK(!layout || json_integer_value(layout) == 7, TP_ERR_UNSUPPORTED,
             "%s: layout %" PRId64 " (sparse or mkldnn) is not supported; tensors are dense (strided)", w,
             (int64_t)json_integer_value(layout));
    TP_TRY(get_field(tm, "sizes", JSON_ARRAY, true, w, &sz));
    TP_CHECK(json_array_size(sz) <= TP_MAX_DIMS, TP_ERR_UNSUPPORTED, "%s.sizes: %zu dims exceed TP_MAX_DIMS (%d)", w,
             json_array_size(sz), TP_MAX_DIMS);
    *nd = (int)json_array_size(sz);
    for (int d = 0; d < *nd; d++) {
        char wd[450];
        snprintf(wd, sizeof wd, "%s.sizes[%d]", w, d);
        lin e;
        bool symbolic;
        TP_TRY(sym_int(json_array_get(sz, (size_t)d), wd, input != NULL, &sizes[d], &e, &symbolic));
        TP_CHECK(sizes[d] >= 0, TP_ERR_CORRUPT, "%s: negative size %" PRId64, wd, sizes[d]);
        if (symbolic && input) {
            if (r->n_dims == r->cap_dims) {
                int nc = r->cap_dims ? 2 * r->cap_dims : 16;
                tdim *nd2 = tp_realloc(r->dims, (size_t)nc * sizeof *nd2);
                TP_CHECK(nd2, TP_ERR_NOMEM, "out of memory");
                r->dims = nd2;
                r->cap_dims = nc;
            }
            tdim *t = &r->dims[r->n_dims++];
            snprintf(t->input, sizeof t->input, "%s", input);
            t->dim = d;
            t->e = e;
        }
    }
    return TP_OK;
}

/* The node standing for the document's value `name`, or NULL. */
static tp_node *find_value(const trd *r, const char *name) {
    json_t *v = json_object_get(r->names, name);
    return v ? (tp_node *)(intptr_t)json_integer_value(v) : NULL;
}

/* Record that the document's value `name` is node n. */
static tp_status define_value(trd *r, const char *name, tp_node *n) {
    TP_CHECK(!find_value(r, name), TP_ERR_CORRUPT, "value '%s' is defined twice", name);
    TP_CHECK(json_object_set_new(r->names, name, json_integer((json_int_t)(intptr_t)n)) == 0, TP_ERR_NOMEM,
             "out of memory");
    return TP_OK;
}

static tp_status node_ref(trd *r, const char *name, const char *where, tp_value *out) {
    TP_CHECK(!is_dropped(r, name), TP_ERR_UNSUPPORTED,
             "%s: uses '%s', an extra output (mean, rstd, mask) of a decomposed op that tpexport does not produce",
             where, name);
    tp_node *n = find_value(r, name);
    TP_CHECK(n, TP_ERR_CORRUPT, "%s: '%s' is not defined before its use", where, name);
    *out = tp_value_node(n);
    return TP_OK;
}

static tp_status tensor_arg_name(const json_t *v, const char *where, const tp_doc_limits *lim, const char **name) {
    TP_TRY(need_obj(v, where));
    return get_str(v, "name", where, lim, name);
}

/* A float as torch writes it: a number, or "Infinity", "-Infinity", "NaN". */
static bool json_float(const json_t *v, double *out) {
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return true;
    }
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    if (!strcmp(s, "Infinity")) *out = HUGE_VAL;
    else if (!strcmp(s, "-Infinity")) *out = -HUGE_VAL;
    else if (!strcmp(s, "NaN")) *out = NAN;
    else return false;
    return true;
}

/* An Argument -> a value (node references for tensors and symbolic ints). */
static tp_status arg_value(trd *r, const json_t *arg, const char *where, tp_value *out) {
    *out = tp_value_none();
    const char *key;
    json_t *v;
    TP_TRY(union_of(arg, where, &key, &v));
    char w[512];
    snprintf(w, sizeof w, "%s.%s", where, key);
    if (!strcmp(key, "as_none") || !strcmp(key, "as_layout") || !strcmp(key, "as_device") ||
        !strcmp(key, "as_memory_format"))
        return TP_OK; /* dense CPU tensors: layout, device and memory format do not change values */
    if (!strcmp(key, "as_tensor") || !strcmp(key, "as_optional_tensor")) {
        if (!strcmp(key, "as_optional_tensor")) {
            const char *k2;
            json_t *v2;
            TP_TRY(union_of(v, w, &k2, &v2));
            if (!strcmp(k2, "as_none")) return TP_OK;
            TP_CHECK(!strcmp(k2, "as_tensor"), TP_ERR_CORRUPT, "%s: unknown kind '%s'", w, k2);
            v = v2;
        }
        const char *name;
        TP_TRY(tensor_arg_name(v, w, r->lim, &name));
        return node_ref(r, name, w, out);
    }
    if (!strcmp(key, "as_int")) {
        TP_CHECK(json_is_integer(v), TP_ERR_CORRUPT, "%s: expected an integer", w);
        *out = tp_value_int(json_integer_value(v));
        return TP_OK;
    }
    if (!strcmp(key, "as_float")) {
        double d;
        TP_CHECK(json_float(v, &d), TP_ERR_CORRUPT, "%s: expected a number", w);
        *out = tp_value_float(d);
        return TP_OK;
    }
    if (!strcmp(key, "as_bool")) {
        TP_CHECK(json_is_boolean(v), TP_ERR_CORRUPT, "%s: expected a boolean", w);
        *out = tp_value_bool(json_is_true(v));
        return TP_OK;
    }
    if (!strcmp(key, "as_string")) {
        TP_CHECK(json_is_string(v) && json_string_length(v) <= r->lim->name, TP_ERR_CORRUPT,
                 "%s: expected a string of at most %zu bytes", w, r->lim->name);
        return tp_value_str(json_string_value(v), out);
    }
    if (!strcmp(key, "as_scalar_type")) {
        TP_CHECK(json_is_integer(v), TP_ERR_CORRUPT, "%s: expected an integer", w);
        tp_dtype dt;
        TP_TRY(need_dtype(json_integer_value(v), w, &dt));
        *out = tp_value_dtype(dt);
        return TP_OK;
    }
    if (!strcmp(key, "as_sym_int") || !strcmp(key, "as_sym_float") || !strcmp(key, "as_sym_bool")) {
        const char *k2;
        json_t *v2;
        TP_TRY(union_of(v, w, &k2, &v2));
        if (!strcmp(k2, "as_name")) {
            TP_CHECK(json_is_string(v2), TP_ERR_CORRUPT, "%s.as_name: expected a string", w);
            return node_ref(r, json_string_value(v2), w, out);
        }
        json_t *lit = v2;
        if (!strcmp(k2, "as_int") && json_is_integer(lit)) *out = tp_value_int(json_integer_value(lit));
        else if (!strcmp(k2, "as_float") && json_is_number(lit)) *out = tp_value_float(json_number_value(lit));
        else if (!strcmp(k2, "as_float") && json_is_string(lit)) {
            double d;
            TP_CHECK(json_float(lit, &d), TP_ERR_CORRUPT, "%s: expected a number", w);
            *out = tp_value_float(d);
        }
        else if (!strcmp(k2, "as_bool") && json_is_boolean(lit)) *out = tp_value_bool(json_is_true(lit));
        else return tp_error(TP_ERR_CORRUPT, "%s: unknown kind '%s'", w, k2);
        return TP_OK;
    }
    bool list = !strcmp(key, "as_tensors") || !strcmp(key, "as_optional_tensors") || !strcmp(key, "as_ints") ||
                !strcmp(key, "as_floats") || !strcmp(key, "as_bools") || !strcmp(key, "as_strings") ||
                !strcmp(key, "as_sym_ints") || !strcmp(key, "as_sym_floats") || !strcmp(key, "as_sym_bools");
    if (!list)
        return tp_error(TP_ERR_UNSUPPORTED, "%s: arguments of kind '%s' are not supported", where, key);
    TP_TRY(check_array(v, w, r->lim));
    /* the item kind of each list kind */
    const char *item = !strcmp(key, "as_tensors")            ? "as_tensor"
                       : !strcmp(key, "as_optional_tensors") ? NULL
                       : !strcmp(key, "as_ints")             ? "as_int"
                       : !strcmp(key, "as_floats")           ? "as_float"
                       : !strcmp(key, "as_bools")            ? "as_bool"
                       : !strcmp(key, "as_strings")          ? "as_string"
                       : !strcmp(key, "as_sym_ints")         ? "as_sym_int"
                       : !strcmp(key, "as_sym_floats")       ? "as_sym_float"
                                                             : "as_sym_bool";
    TP_TRY(tp_value_list(0, out));
    for (size_t i = 0; i < json_array_size(v); i++) {
        char wi[560];
        snprintf(wi, sizeof wi, "%s[%zu]", w, i);
        json_t *wrapped = NULL;
        json_t *it = json_array_get(v, i);
        if (item) {
            wrapped = json_object();
            if (!wrapped || json_object_set(wrapped, item, it) != 0) {
                json_decref(wrapped);
                tp_value_clear(out);
                return tp_error(TP_ERR_NOMEM, "out of memory");
            }
        }
        tp_value x;
        tp_status st = arg_value(r, wrapped ? wrapped : it, wi, &x);
        json_decref(wrapped);
        if (st == TP_OK) st = tp_value_append(out, &x);
        if (st != TP_OK) {
            tp_value_clear(out);
            return st;
        }
    }
    return TP_OK;
}

/* ---- literals of the op table ("training=false", "size=[]", "mode='nearest'") -------- */

static tp_status literal(const char *s, size_t n, tp_value *out) {
    char buf[64];
    TP_CHECK(n < sizeof buf, TP_ERR_INTERNAL, "op table literal too long");
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (!strcmp(buf, "true") || !strcmp(buf, "false")) {
        *out = tp_value_bool(buf[0] == 't');
        return TP_OK;
    }
    if (!strcmp(buf, "none")) {
        *out = tp_value_none();
        return TP_OK;
    }
    if (!strcmp(buf, "[]")) return tp_value_int_list(NULL, 0, out);
    if (buf[0] == '\'' && n >= 2 && buf[n - 1] == '\'') {
        buf[n - 1] = '\0';
        return tp_value_str(buf + 1, out);
    }
    char *end;
    long long v = strtoll(buf, &end, 10);
    TP_CHECK(*end == '\0', TP_ERR_INTERNAL, "op table literal '%s'", buf);
    *out = tp_value_int(v);
    return TP_OK;
}

/* The op table's map entry for torch argument `name`: NULL (same name),
 * "-" (ignored), "=LIT" (required value) or our name; in *len. */
static const char *map_entry(const char *map, const char *name, size_t *len) {
    size_t n = strlen(name);
    for (const char *p = map; p && *p;) {
        const char *end = strchr(p, ',');
        size_t l = end ? (size_t)(end - p) : strlen(p);
        if (l > n && memcmp(p, name, n) == 0 && p[n] == ':') {
            *len = l - n - 1;
            return p + n + 1;
        }
        p = end ? end + 1 : NULL;
    }
    return NULL;
}

static int schema_index(const tp_schema *sc, const char *name, size_t len) {
    for (int i = 0; i < sc->n_args; i++)
        if (strlen(sc->args[i].name) == len && memcmp(sc->args[i].name, name, len) == 0) return i;
    return -1;
}

static bool ignorable(const char *name) {
    static const char *const names[] = {"layout", "device", "pin_memory", "memory_format", "non_blocking", NULL};
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], name)) return true;
    return false;
}

/* Node target "torch.ops.aten.add.Tensor" -> module "aten", name, overload. */
static bool split_target(const char *t, char *module, char *name, char *overload, size_t size) {
    const char *rest;
    if (!strncmp(t, "torch.ops.", 10)) {
        rest = t + 10;
        const char *d1 = strchr(rest, '.');
        const char *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
        if (!d1 || !d2 || strchr(d2 + 1, '.') || (size_t)(d1 - rest) >= size || (size_t)(d2 - d1) > size ||
            strlen(d2 + 1) >= size)
            return false;
        memcpy(module, rest, (size_t)(d1 - rest));
        module[d1 - rest] = '\0';
        memcpy(name, d1 + 1, (size_t)(d2 - d1 - 1));
        name[d2 - d1 - 1] = '\0';
        snprintf(overload, size, "%s", d2 + 1);
        return true;
    }
    const char *dot = strrchr(t, '.');
    if (!dot || (size_t)(dot - t) >= size || strlen(dot + 1) >= size) return false;
    memcpy(module, t, (size_t)(dot - t));
    module[dot - t] = '\0';
    snprintf(name, size, "%s", dot + 1);
    overload[0] = '\0';
    return true;
}

/* Compare what we inferred for an output with the document's meta. */
static tp_status check_output_meta(trd *r, const tp_value *mv, const char *name, const char *where) {
    tp_dtype dt;
    int nd;
    int64_t sizes[TP_MAX_DIMS];
    TP_TRY(tensor_meta(r, name, where, NULL, &dt, &nd, sizes));
    TP_CHECK(mv && mv->kind == TP_VAL_TENSOR, TP_ERR_UNSUPPORTED, "%s: '%s' is a tensor in the archive, not here",
             where, name);
    const tp_tensor *t = mv->u.tensor;
    bool same = tp_tensor_dtype(t) == dt && tp_tensor_ndim(t) == nd;
    for (int d = 0; same && d < nd; d++) same = tp_tensor_sizes(t)[d] == sizes[d];
    if (same) return TP_OK;
    char a[160], b[160];
    int o = snprintf(a, sizeof a, "%s [", tp_dtype_name(tp_tensor_dtype(t)));
    for (int d = 0; d < tp_tensor_ndim(t) && o < 140; d++)
        o += snprintf(a + o, sizeof a - (size_t)o, "%s%" PRId64, d ? ", " : "", tp_tensor_sizes(t)[d]);
    snprintf(a + o, sizeof a - (size_t)o, "]");
    o = snprintf(b, sizeof b, "%s [", tp_dtype_name(dt));
    for (int d = 0; d < nd && o < 140; d++) o += snprintf(b + o, sizeof b - (size_t)o, "%s%" PRId64, d ? ", " : "", sizes[d]);
    snprintf(b + o, sizeof b - (size_t)o, "]");
    return tp_error(TP_ERR_UNSUPPORTED, "%s: tpexport computes %s for '%s' where PyTorch recorded %s", where, a, name, b);
}

static tp_status fresh_name(trd *r, const char *hint, char *buf, size_t size) {
    do snprintf(buf, size, "tpx_%s_%d", hint, r->fresh++);
    while (tp_graph_find_node(r->g, buf) || find_value(r, buf));
    return TP_OK;
}

/* Create a call node of `op` from a kwargs-by-schema-name dict: positional
 * arguments in schema order up to the last one given (defaults between),
 * keyword-only ones as kwargs. */
static tp_status make_call(trd *r, tp_op op, tp_value *named, const char *name, const char *where, tp_node **out) {
    const tp_schema *sc = tp_op_schema(op);
    TP_CHECK(sc, TP_ERR_INTERNAL, "op %d has no schema", (int)op);
    int last = -1;
    for (int i = 0; i < sc->n_args; i++)
        if (!sc->args[i].kwarg_only && tp_value_dict_get(named, sc->args[i].name)) last = i;
    tp_value args, kwargs;
    TP_TRY(tp_value_tuple(0, &args));
    tp_status st = tp_value_dict(&kwargs);
    for (int i = 0; st == TP_OK && i < sc->n_args; i++) {
        const tp_schema_arg *a = &sc->args[i];
        tp_value *v = tp_value_dict_get(named, a->name);
        tp_value x = tp_value_none();
        if (!a->kwarg_only && i <= last) {
            if (v) st = tp_value_copy(v, &x);
            else if (a->has_default) st = tp_value_copy(&a->default_value, &x);
            else st = tp_error(TP_ERR_CORRUPT, "%s: missing argument '%s' of %s", where, a->name, tp_op_name(op));
            if (st == TP_OK) st = tp_value_append(&args, &x);
        } else if (v) {
            st = tp_value_copy(v, &x);
            if (st == TP_OK) st = tp_value_dict_set(&kwargs, a->name, &x);
        }
    }
    tp_node *n = NULL;
    if (st == TP_OK)
        st = tp_graph_create_node(r->g, TP_NODE_CALL_FUNCTION, tp_op_name(op), &args,
                                  tp_value_len(&kwargs) ? &kwargs : NULL, name, &n);
    tp_value_clear(&args);
    tp_value_clear(&kwargs);
    if (st == TP_OK) {
        st = tp_node_infer_meta(n);
        if (st != TP_OK) {
            tp_error_context("%s", where);
            tp_graph_erase_node(r->g, n);
        }
    }
    if (st == TP_OK && name) st = define_value(r, name, n);
    if (st == TP_OK && out) *out = n;
    return st;
}

static tp_status getitem_node(trd *r, tp_node *of, int64_t i, const char *name, const char *where) {
    tp_value named;
    TP_TRY(tp_value_dict(&named));
    tp_value a = tp_value_node(of), b = tp_value_int(i);
    tp_status st = tp_value_dict_set(&named, "self", &a);
    if (st == TP_OK) st = tp_value_dict_set(&named, "index", &b);
    if (st == TP_OK) st = make_call(r, TP_OP_GETITEM, &named, name, where, NULL);
    tp_value_clear(&named);
    return st;
}

/* The name of a node output Argument (as_tensor / as_sym_int ...), or NULL for as_none. */
static tp_status output_name(const json_t *o, const char *where, const tp_doc_limits *lim, const char **kind,
                             const char **name, json_t **list) {
    json_t *v;
    *name = NULL;
    *list = NULL;
    TP_TRY(union_of(o, where, kind, &v));
    if (!strcmp(*kind, "as_none")) return TP_OK;
    if (!strcmp(*kind, "as_tensor")) return tensor_arg_name(v, where, lim, name);
    if (!strcmp(*kind, "as_tensors")) {
        TP_TRY(check_array(v, where, lim));
        *list = v;
        return TP_OK;
    }
    if (!strcmp(*kind, "as_sym_int") || !strcmp(*kind, "as_sym_bool") || !strcmp(*kind, "as_sym_float")) {
        const char *k2;
        json_t *v2;
        TP_TRY(union_of(v, where, &k2, &v2));
        TP_CHECK(!strcmp(k2, "as_name") && json_is_string(v2), TP_ERR_CORRUPT, "%s: expected as_name", where);
        *name = json_string_value(v2);
        return TP_OK;
    }
    return tp_error(TP_ERR_UNSUPPORTED, "%s: node outputs of kind '%s' are not supported", where, *kind);
}

/* The entry for a node's target: the table's; else aten.<op>.default of an
 * op of ours with the same name (mapped one to one: the shape check catches a
 * schema that means something else); else, for <op>_ (relu_, hardtanh_ on
 * intermediates of the training IR), the functional op's entry with
 * *inplace set. `same` holds a synthesized entry (its name points into a
 * static buffer of the calling thread). NULL when nothing maps. */
static const tp_torch_op *lookup_op(const char *module, const char *name, const char *overload, tp_torch_op *same,
                                    bool *inplace) {
    static _Thread_local char fname[128];
    *inplace = false;
    const tp_torch_op *e = tp__torch_find_op(module, name, overload);
    if (e || strcmp(module, "aten") != 0) return e;
    *same = (tp_torch_op){name, "default", tp_op_from_name(name), NULL, NULL, 0};
    if (!strcmp(overload, "default") && same->op != TP_OP_INVALID) return same;
    /* torch.special's special_<name> (any overload: ours take a tensor or a number where it has two) */
    if (!strncmp(name, "special_", 8) && tp__torch_is_special(name + 8)) {
        *same = (tp_torch_op){name, overload, tp_op_from_name(name + 8), NULL, NULL, 0};
        if (same->op != TP_OP_INVALID) return same;
    }
    size_t nl = strlen(name);
    if (nl < 2 || name[nl - 1] != '_' || nl >= sizeof fname) return NULL;
    snprintf(fname, sizeof fname, "%.*s", (int)nl - 1, name);
    e = tp__torch_find_op(module, fname, overload);
    *same = (tp_torch_op){fname, "default", tp_op_from_name(fname), NULL, NULL, 0};
    if (!e && !strcmp(overload, "default") && same->op != TP_OP_INVALID) e = same;
    if (e && (e->flags & (TP_TORCH_DROP | TP_TORCH_FIRST | TP_TORCH_T | TP_TORCH_SYMINT))) e = NULL;
    *inplace = e != NULL;
    return e;
}

bool tp__torch_maps(const char *name, const char *overload) {
    tp_torch_op same;
    bool inplace;
    return lookup_op("aten", name, overload, &same, &inplace) != NULL;
}

/* aten.convolution(input, weight, bias, stride, padding, dilation, transposed,
 * output_padding, groups) -> conv1d/2d/3d or conv_transpose1d/2d (by the
 * weight's rank), whose kernels are the fast ones; 3-d transposed stays. */
static tp_status pick_convolution(tp_value *named, const char *where, tp_op *op) {
    const tp_value *w = tp_value_dict_get(named, "weight"), *tr = tp_value_dict_get(named, "transposed");
    const tp_value *wm = w && w->kind == TP_VAL_NODE ? tp_node_meta_val(w->u.node) : NULL;
    if (!wm || wm->kind != TP_VAL_TENSOR || !tr || tr->kind != TP_VAL_BOOL) return TP_OK;
    int rank = tp_tensor_ndim(wm->u.tensor);
    bool transposed = tr->u.b;
    static const tp_op plain[] = {TP_OP_CONV1D, TP_OP_CONV2D, TP_OP_CONV3D};
    static const tp_op trans[] = {TP_OP_CONV_TRANSPOSE1D, TP_OP_CONV_TRANSPOSE2D, TP_OP_INVALID};
    if (rank < 3 || rank > 5 || (transposed && trans[rank - 3] == TP_OP_INVALID)) return TP_OK;
    if (!transposed) {
        const tp_value *opad = tp_value_dict_get(named, "output_padding");
        for (int64_t i = 0; opad && i < tp_value_len(opad); i++)
            if (tp_value_at(opad, i)->kind != TP_VAL_INT || tp_value_at(opad, i)->u.i != 0) return TP_OK;
    }
    /* the new op's schema: the same names, without transposed (and output_padding) */
    tp_value copy;
    TP_TRY(tp_value_dict(&copy));
    tp_op to = transposed ? trans[rank - 3] : plain[rank - 3];
    const tp_schema *sc = tp_op_schema(to);
    tp_status st = TP_OK;
    for (int i = 0; st == TP_OK && i < sc->n_args; i++) {
        const tp_value *v = tp_value_dict_get(named, sc->args[i].name);
        if (!v) continue;
        tp_value x;
        st = tp_value_copy(v, &x);
        if (st == TP_OK) st = tp_value_dict_set(&copy, sc->args[i].name, &x);
    }
    if (st != TP_OK) {
        tp_value_clear(&copy);
        tp_error_context("%s", where);
        return st;
    }
    tp_value_move(named, &copy);
    *op = to;
    return TP_OK;
}

/* A node of op with the named arguments keys[i] = vals[i] (vals consumed), named `name` or fresh. */
static tp_status mk(trd *r, tp_op op, const char *name, const char *where, int n, const char *const *keys,
                    tp_value *vals, tp_node **out) {
    tp_value d;
    tp_status st = tp_value_dict(&d);
    for (int i = 0; i < n; i++) {
        if (st == TP_OK) st = tp_value_dict_set(&d, keys[i], &vals[i]);
        else tp_value_clear(&vals[i]);
    }
    char tmp[TP_LIMIT_NAME + 64];
    if (!name) fresh_name(r, tp_op_name(op), tmp, sizeof tmp);
    if (st == TP_OK) st = make_call(r, op, &d, name ? name : tmp, where, out);
    tp_value_clear(&d);
    return st;
}

static tp_status mk_select(trd *r, tp_node *x, int64_t dim, int64_t i, const char *where, tp_node **out) {
    static const char *const k[] = {"self", "dim", "index"};
    tp_value v[3] = {tp_value_node(x), tp_value_int(dim), tp_value_int(i)};
    return mk(r, TP_OP_SELECT, NULL, where, 3, k, v, out);
}

static tp_status mk_list_op(trd *r, tp_op op, tp_node *const *items, int n, int64_t dim, const char *name,
                            const char *where, tp_node **out) {
    static const char *const k[] = {"tensors", "dim"};
    tp_value v[2];
    TP_TRY(tp_value_list(n, &v[0]));
    for (int i = 0; i < n; i++) v[0].u.seq.items[i] = tp_value_node(items[i]);
    v[1] = tp_value_int(dim);
    return mk(r, op, name, where, 2, k, v, out);
}

/* aten.lstm.input(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
 * batch_first) -> (output, h_n, c_n), unrolled over the time steps into lstm_cell nodes: torch.export
 * specialises the sequence length of an LSTM (the batch stays dynamic). */
static tp_status read_lstm(trd *r, const json_t *inputs, const json_t *outputs, const char *where) {
    enum { MAX_STEPS = 4096, MAX_LAYERS = 64 };
    tp_value a[9];
    static const char *const names[9] = {"input", "hx", "params", "has_biases", "num_layers", "dropout", "train",
                                          "bidirectional", "batch_first"};
    for (int i = 0; i < 9; i++) a[i] = tp_value_none();
    tp_status st = TP_OK;
    for (size_t i = 0; st == TP_OK && i < json_array_size(inputs); i++) {
        json_t *na = json_array_get(inputs, i), *arg;
        const char *an;
        st = need_obj(na, where);
        if (st == TP_OK) st = get_str(na, "name", where, r->lim, &an);
        if (st == TP_OK) st = get_field(na, "arg", JSON_OBJECT, true, where, &arg);
        for (int k = 0; st == TP_OK && k < 9; k++)
            if (!strcmp(an, names[k])) {
                tp_value_clear(&a[k]);
                st = arg_value(r, arg, where, &a[k]);
            }
    }
    tp_node **layer_in = NULL, **next = NULL;
    tp_node *final_h[MAX_LAYERS * 2], *final_c[MAX_LAYERS * 2];
    const tp_value *xm = a[0].kind == TP_VAL_NODE ? tp_node_meta_val(a[0].u.node) : NULL;
    bool bf = a[8].kind == TP_VAL_BOOL && a[8].u.b, bidir = a[7].kind == TP_VAL_BOOL && a[7].u.b;
    bool biases = a[3].kind == TP_VAL_BOOL && a[3].u.b;
    int64_t L = a[4].kind == TP_VAL_INT ? a[4].u.i : 0, D = bidir ? 2 : 1, per = biases ? 4 : 2;
    if (st == TP_OK && (!xm || xm->kind != TP_VAL_TENSOR || tp_tensor_ndim(xm->u.tensor) != 3 ||
                        a[1].kind != TP_VAL_LIST || tp_value_len(&a[1]) != 2 || a[2].kind != TP_VAL_LIST ||
                        L < 1 || L > MAX_LAYERS || tp_value_len(&a[2]) != L * D * per))
        st = tp_error(TP_ERR_UNSUPPORTED, "%s: an LSTM with these arguments is not supported", where);
    if (st == TP_OK && a[6].kind == TP_VAL_BOOL && a[6].u.b && tp_value_as_f64(&a[5]) != 0.0)
        st = tp_error(TP_ERR_UNSUPPORTED, "%s: an LSTM with dropout in training mode is not supported", where);
    int64_t T = st == TP_OK ? tp_tensor_sizes(xm->u.tensor)[bf ? 1 : 0] : 0;
    if (st == TP_OK && (T < 1 || T > MAX_STEPS))
        st = tp_error(TP_ERR_UNSUPPORTED, "%s: an LSTM over %" PRId64 " steps (1 to %d are unrolled)", where, T,
                      (int)MAX_STEPS);
    for (size_t i = 0; st == TP_OK && i < json_array_size(outputs); i++) /* outputs: three named tensors */
        if (!json_is_object(json_object_get(json_array_get(outputs, i), "as_tensor")) && i < 3)
            st = tp_error(TP_ERR_UNSUPPORTED, "%s: LSTM output %zu is not a tensor", where, i);
    if (st == TP_OK && json_array_size(outputs) != 3) st = tp_error(TP_ERR_CORRUPT, "%s: an LSTM has three outputs", where);
    if (st == TP_OK) {
        layer_in = tp_calloc((size_t)T, sizeof *layer_in);
        next = tp_calloc((size_t)(2 * T), sizeof *next);
        if (!layer_in || !next) st = tp_error(TP_ERR_NOMEM, "out of memory");
    }
    for (int64_t t = 0; st == TP_OK && t < T; t++) st = mk_select(r, a[0].u.node, bf ? 1 : 0, t, where, &layer_in[t]);
    tp_node *h0 = st == TP_OK ? a[1].u.seq.items[0].u.node : NULL, *c0 = st == TP_OK ? a[1].u.seq.items[1].u.node : NULL;
    for (int64_t l = 0; st == TP_OK && l < L; l++) {
        for (int64_t d = 0; st == TP_OK && d < D; d++) {
            int64_t k = l * D + d;
            tp_node *h = NULL, *c = NULL;
            st = mk_select(r, h0, 0, k, where, &h);
            if (st == TP_OK) st = mk_select(r, c0, 0, k, where, &c);
            const tp_value *p = &a[2].u.seq.items[k * per];
            for (int64_t step = 0; st == TP_OK && step < T; step++) {
                int64_t t = d == 0 ? step : T - 1 - step;
                static const char *const ck[] = {"input", "hx", "cx", "w_ih", "w_hh", "b_ih", "b_hh"};
                tp_value cv[7] = {tp_value_node(layer_in[t]), tp_value_node(h), tp_value_node(c), p[0], p[1],
                                  biases ? p[2] : tp_value_none(), biases ? p[3] : tp_value_none()};
                tp_node *cell = NULL;
                /* the params are node references: copy them (mk consumes its values) */
                for (int q = 3; q < 7; q++)
                    if (cv[q].kind == TP_VAL_NODE) cv[q] = tp_value_node(cv[q].u.node);
                st = mk(r, TP_OP_LSTM_CELL, NULL, where, 7, ck, cv, &cell);
                static const char *const gk[] = {"self", "index"};
                tp_value g0[2] = {tp_value_node(cell), tp_value_int(0)}, g1[2] = {tp_value_node(cell), tp_value_int(1)};
                if (st == TP_OK) st = mk(r, TP_OP_GETITEM, NULL, where, 2, gk, g0, &h);
                if (st == TP_OK) st = mk(r, TP_OP_GETITEM, NULL, where, 2, gk, g1, &c);
                if (st == TP_OK) next[d * T + t] = h;
            }
            final_h[k] = h;
            final_c[k] = c;
        }
        for (int64_t t = 0; st == TP_OK && t < T; t++) {
            if (D == 1) layer_in[t] = next[t];
            else {
                tp_node *pair[2] = {next[t], next[T + t]};
                st = mk_list_op(r, TP_OP_CAT, pair, 2, -1, NULL, where, &layer_in[t]);
            }
        }
    }
    const char *on[3] = {NULL, NULL, NULL};
    for (int i = 0; st == TP_OK && i < 3; i++)
        st = tensor_arg_name(json_object_get(json_array_get(outputs, (size_t)i), "as_tensor"), where, r->lim, &on[i]);
    tp_node *o = NULL;
    if (st == TP_OK) st = mk_list_op(r, TP_OP_STACK, layer_in, (int)T, bf ? 1 : 0, on[0], where, &o);
    if (st == TP_OK) st = check_output_meta(r, tp_node_meta_val(o), on[0], where);
    if (st == TP_OK) st = mk_list_op(r, TP_OP_STACK, final_h, (int)(L * D), 0, on[1], where, &o);
    if (st == TP_OK) st = check_output_meta(r, tp_node_meta_val(o), on[1], where);
    if (st == TP_OK) st = mk_list_op(r, TP_OP_STACK, final_c, (int)(L * D), 0, on[2], where, &o);
    if (st == TP_OK) st = check_output_meta(r, tp_node_meta_val(o), on[2], where);
    tp_free(layer_in);
    tp_free(next);
    for (int i = 0; i < 9; i++) tp_value_clear(&a[i]);
    return st;
}

static tp_status read_node(trd *r, const json_t *node, int index) {
    char where[600];
    snprintf(where, sizeof where, "graph.nodes[%d]", index);
    TP_TRY(need_obj(node, where));
    const char *target;
    json_t *inputs, *outputs, *nname;
    TP_TRY(get_str(node, "target", where, r->lim, &target));
    TP_TRY(get_field(node, "inputs", JSON_ARRAY, true, where, &inputs));
    TP_TRY(get_field(node, "outputs", JSON_ARRAY, true, where, &outputs));
    TP_TRY(check_array(inputs, where, r->lim));
    TP_TRY(check_array(outputs, where, r->lim));
    TP_TRY(get_field(node, "name", JSON_STRING, false, where, &nname));
    snprintf(where, sizeof where, "graph.nodes[%d] (%.200s)", index, nname ? json_string_value(nname) : target);
    char module[128], name[128], overload[128];
    TP_CHECK(split_target(target, module, name, overload, sizeof name), TP_ERR_UNSUPPORTED,
             "%s: unsupported call target '%.200s'", where, target);
    char opname[400];
    snprintf(opname, sizeof opname, "%s.%s%s%s", module, name, overload[0] ? "." : "", overload);
    bool inplace = false;
    tp_torch_op same;
    if (!strcmp(module, "aten") && !strcmp(name, "lstm") && !strcmp(overload, "input"))
        return read_lstm(r, inputs, outputs, where);
    const tp_torch_op *e = lookup_op(module, name, overload, &same, &inplace);
    if (!e) {
        if (!strcmp(module, "aten")) {
            bool other = false;
            int n;
            const tp_torch_op *t = tp__torch_op_table(&n);
            for (int i = 0; i < n; i++) other = other || !strcmp(t[i].name, name);
            return tp_error(TP_ERR_UNSUPPORTED, "%s: %s aten.%s.%s", where,
                            other ? "unsupported overload" : "unsupported op", name, overload);
        }
        return tp_error(TP_ERR_UNSUPPORTED, "%s: unsupported call target '%.200s'", where, target);
    }
    if (e->flags & TP_TORCH_DROP) {
        for (size_t i = 0; i < json_array_size(outputs); i++) {
            const char *kind, *oname;
            json_t *list;
            TP_TRY(output_name(json_array_get(outputs, i), where, r->lim, &kind, &oname, &list));
            if (oname) TP_TRY(drop_name(r, oname));
        }
        return TP_OK;
    }
    /* arguments by our schema's names */
    const tp_schema *sc = tp_op_schema(e->op);
    tp_value named;
    TP_TRY(tp_value_dict(&named));
    tp_status st = TP_OK;
    for (size_t i = 0; st == TP_OK && i < json_array_size(inputs); i++) {
        json_t *na = json_array_get(inputs, i), *arg;
        char wi[800];
        snprintf(wi, sizeof wi, "%s.inputs[%zu]", where, i);
        const char *aname;
        st = need_obj(na, wi);
        if (st == TP_OK) st = get_str(na, "name", wi, r->lim, &aname);
        if (st == TP_OK) st = get_field(na, "arg", JSON_OBJECT, true, wi, &arg);
        if (st != TP_OK) break;
        snprintf(wi, sizeof wi, "%s.inputs[%zu] (%.100s)", where, i, aname);
        tp_value v;
        st = arg_value(r, arg, wi, &v);
        if (st != TP_OK) break;
        size_t mlen = 0;
        const char *m = map_entry(e->map, aname, &mlen);
        const char *ours = aname;
        size_t olen = strlen(aname);
        if (m && mlen >= 1 && m[0] == '-') { /* "-" or "-LIT" (LIT: what the writer puts there) */
            tp_value_clear(&v);
            continue;
        }
        if (m && mlen > 0 && m[0] == '=') {
            tp_value want;
            st = literal(m + 1, mlen - 1, &want);
            bool ok = st == TP_OK && (v.kind == TP_VAL_NONE || (v.kind == want.kind && tp_value_as_f64(&v) ==
                                                                                           tp_value_as_f64(&want)));
            tp_value_clear(&want);
            tp_value_clear(&v);
            if (st == TP_OK && !ok)
                st = tp_error(TP_ERR_UNSUPPORTED, "%s: %s with %s other than %.*s is not supported", wi, opname, aname, (int)mlen - 1, m + 1);
            continue;
        }
        if (m) {
            ours = m;
            olen = mlen;
        }
        if (schema_index(sc, ours, olen) < 0) {
            bool skip = v.kind == TP_VAL_NONE && ignorable(aname);
            tp_value_clear(&v);
            if (!skip)
                st = tp_error(TP_ERR_UNSUPPORTED, "%s: argument '%s' of %s has no counterpart in %s", wi, aname, opname,
                              tp_op_schema_text(e->op));
            continue;
        }
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)olen, ours);
        /* ATen's losses take the reduction as an int; ours that take a string get its name */
        int ki = schema_index(sc, ours, olen);
        if (!strcmp(key, "reduction") && v.kind == TP_VAL_INT &&
            (sc->args[ki].type == TP_ARG_STR || sc->args[ki].type == TP_ARG_OPT_STR)) {
            static const char *const names[] = {"none", "mean", "sum"};
            int64_t code = v.u.i;
            if (code < 0 || code > 2) {
                st = tp_error(TP_ERR_CORRUPT, "%s: reduction %" PRId64 " (expected 0, 1 or 2)", wi, code);
                break;
            }
            st = tp_value_str(names[code], &v);
            if (st != TP_OK) break;
        }
        st = tp_value_dict_set(&named, key, &v);
    }
    for (const char *p = e->fixed; st == TP_OK && p && *p;) {
        const char *eq = strchr(p, '=');
        const char *end = strchr(p, ',');
        size_t l = end ? (size_t)(end - p) : strlen(p);
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(eq - p), p);
        tp_value v;
        st = literal(eq + 1, l - (size_t)(eq - p) - 1, &v);
        if (st == TP_OK) st = tp_value_dict_set(&named, key, &v);
        p = end ? end + 1 : NULL;
    }
    /* aten.t below 2-D is the tensor itself */
    if (st == TP_OK && (e->flags & TP_TORCH_T)) {
        tp_value *self = tp_value_dict_get(&named, "self");
        const tp_value *mv = self && self->kind == TP_VAL_NODE ? tp_node_meta_val(self->u.node) : NULL;
        if (mv && mv->kind == TP_VAL_TENSOR && tp_tensor_ndim(mv->u.tensor) < 2) {
            e = tp__torch_find_op("aten", "clone", "default"); /* self is its only argument */
        } else {
            tp_value a = tp_value_int(0), b = tp_value_int(1);
            st = tp_value_dict_set(&named, "dim0", &a);
            if (st == TP_OK) st = tp_value_dict_set(&named, "dim1", &b);
        }
    }
    /* aten.lstm_cell's hx is the list (h, c); ours takes them apart */
    if (st == TP_OK && e->op == TP_OP_LSTM_CELL) {
        tp_value *hx = tp_value_dict_get(&named, "hx");
        if (hx && hx->kind == TP_VAL_LIST && tp_value_len(hx) == 2) {
            tp_value h = hx->u.seq.items[0], c = hx->u.seq.items[1];
            hx->u.seq.items[0] = tp_value_none();
            hx->u.seq.items[1] = tp_value_none();
            st = tp_value_dict_set(&named, "hx", &h);
            if (st == TP_OK) st = tp_value_dict_set(&named, "cx", &c);
            else tp_value_clear(&c);
        }
    }
    /* grid_sampler_2d's integer modes are our grid_sample's names */
    if (st == TP_OK && e->op == TP_OP_GRID_SAMPLE) {
        static const char *const modes[] = {"bilinear", "nearest", "bicubic"}, *const pads[] = {"zeros", "border", "reflection"};
        const char *keys[2] = {"mode", "padding_mode"};
        for (int k = 0; k < 2 && st == TP_OK; k++) {
            tp_value *v = tp_value_dict_get(&named, keys[k]);
            if (!v || v->kind != TP_VAL_INT) continue;
            CHECK_GOTO(v->u.i >= 0 && v->u.i <= 2, st, TP_ERR_UNSUPPORTED, done, "%s: %s %" PRId64 " is not supported", where,
                       keys[k], v->u.i);
            tp_value str;
            st = tp_value_str(k == 0 ? modes[v->u.i] : pads[v->u.i], &str);
            if (st == TP_OK) st = tp_value_dict_set(&named, keys[k], &str);
        }
    }
    /* a Python number as self of add/sub/mul.Tensor (decompositions write sub(4, t)): t + 4, t * 4,
     * and 4 - t as (-t) + 4 */
    tp_value *sv = st == TP_OK && (e->op == TP_OP_ADD || e->op == TP_OP_SUB || e->op == TP_OP_MUL)
                       ? tp_value_dict_get(&named, "self") : NULL;
    tp_value *ov = sv ? tp_value_dict_get(&named, "other") : NULL;
    if (sv && ov && tp_value_is_number(sv) && ov->kind == TP_VAL_NODE) {
        tp_value *alpha = tp_value_dict_get(&named, "alpha");
        CHECK_GOTO(!alpha || tp_value_as_f64(alpha) == 1.0, st, TP_ERR_UNSUPPORTED, done,
                   "%s: a number as self with alpha other than 1", where);
        tp_value num = *sv, t = *ov;
        if (e->op == TP_OP_SUB) {
            char tmp[TP_LIMIT_NAME + 64];
            fresh_name(r, "neg", tmp, sizeof tmp);
            tp_value nargs;
            tp_node *neg = NULL;
            st = tp_value_dict(&nargs);
            tp_value tc = tp_value_node(t.u.node);
            if (st == TP_OK) st = tp_value_dict_set(&nargs, "self", &tc);
            if (st == TP_OK) st = make_call(r, TP_OP_NEG, &nargs, tmp, where, &neg);
            tp_value_clear(&nargs);
            if (st != TP_OK) goto done;
            t = tp_value_node(neg);
            e = tp__torch_find_op("aten", "add", "Tensor");
        }
        tp_value a = t, b = num;
        st = tp_value_dict_set(&named, "self", &a);
        if (st == TP_OK) st = tp_value_dict_set(&named, "other", &b);
        if (st != TP_OK) goto done;
    }
    /* aten.convolution: the convolution op of its rank and kind, which have the fast paths */
    tp_op op = e->op;
    if (st == TP_OK && op == TP_OP_CONVOLUTION) st = pick_convolution(&named, where, &op);
    /* x.add_(y) on an intermediate nothing reads afterwards (a residual sum) is x + y: the functional
     * op has the fast, fusable kernels; on state or inputs the in-place op keeps the mutation */
    if (st == TP_OK && (op == TP_OP_ADD_ || op == TP_OP_MUL_)) {
        const tp_value *self = tp_value_dict_get(&named, "self");
        json_t *last = self && self->kind == TP_VAL_NODE ? json_object_get(r->uses, tp_node_name(self->u.node)) : NULL;
        if (last && json_integer_value(last) <= index && tp_node_get_kind(self->u.node) == TP_NODE_CALL_FUNCTION &&
            !(tp_op_flags(tp_node_op(self->u.node)) & TP_OPF_VIEW)) /* a view writes into its base */
            op = op == TP_OP_ADD_ ? TP_OP_ADD : TP_OP_MUL;
    }
    /* outputs: one node, or a tuple node and getitems */
    size_t n_out = json_array_size(outputs);
    const char *first_kind = NULL, *first_name = NULL;
    json_t *first_list = NULL;
    if (st == TP_OK && n_out > 0)
        st = output_name(json_array_get(outputs, 0), where, r->lim, &first_kind, &first_name, &first_list);
    bool multi = sc->returns == TP_RET_TUPLE || sc->returns == TP_RET_TENSOR_LIST ||
                 (sc->returns == TP_RET_ANY && op != TP_OP_GETITEM && (n_out > 1 || first_list));
    if (st == TP_OK && (e->flags & TP_TORCH_FIRST)) multi = false;
    if (st == TP_OK && !multi) {
        CHECK_GOTO(n_out >= 1, st, TP_ERR_CORRUPT, done, "%s: a node without outputs", where);
        CHECK_GOTO(first_name, st, TP_ERR_UNSUPPORTED, done, "%s: output 0 must be a tensor or symbolic int", where);
        CHECK_GOTO(n_out == 1 || (e->flags & TP_TORCH_FIRST), st, TP_ERR_UNSUPPORTED, done,
                      "%s: %zu outputs where %s returns one", where, n_out, tp_op_name(op));
        tp_node *n = NULL;
        tp_value *self = inplace ? tp_value_dict_get(&named, sc->args[0].name) : NULL;
        if (inplace) {
            CHECK_GOTO(self && self->kind == TP_VAL_NODE, st, TP_ERR_UNSUPPORTED, done,
                       "%s: %s needs a tensor as its first argument", where, opname);
            tp_node *target = self->u.node;
            json_t *last = json_object_get(r->uses, tp_node_name(target));
            bool read_later = !last || json_integer_value(last) > index;
            /* a view (x[1:3].relu_()) writes into what it views: keep the write */
            bool view = tp_node_get_kind(target) == TP_NODE_CALL_FUNCTION && (tp_op_flags(tp_node_op(target)) & TP_OPF_VIEW);
            if (tp_node_get_kind(target) != TP_NODE_CALL_FUNCTION || read_later || view) {
                char tmp[TP_LIMIT_NAME + 64];
                fresh_name(r, tp_op_name(op), tmp, sizeof tmp);
                tp_node *value = NULL;
                st = make_call(r, op, &named, tmp, where, &value);
                tp_value cn;
                if (st == TP_OK) st = tp_value_dict(&cn);
                if (st == TP_OK) {
                    tp_value a = tp_value_node(target), b = tp_value_node(value);
                    st = tp_value_dict_set(&cn, "self", &a);
                    if (st == TP_OK) st = tp_value_dict_set(&cn, "src", &b);
                    if (st == TP_OK) st = make_call(r, TP_OP_COPY_, &cn, first_name, where, &n);
                    tp_value_clear(&cn);
                }
            } else {
                st = make_call(r, op, &named, first_name, where, &n);
            }
        } else {
            st = make_call(r, op, &named, first_name, where, &n);
        }
        if (st == TP_OK && !strcmp(first_kind, "as_tensor"))
            st = check_output_meta(r, tp_node_meta_val(n), first_name, where);
        for (size_t i = 1; st == TP_OK && i < n_out; i++) {
            const char *kind, *oname;
            json_t *list;
            st = output_name(json_array_get(outputs, i), where, r->lim, &kind, &oname, &list);
            if (st == TP_OK && oname) st = drop_name(r, oname);
        }
    } else if (st == TP_OK) {
        char tuple_name[TP_LIMIT_NAME + 64];
        if (nname && !tp_graph_find_node(r->g, json_string_value(nname)) && !find_value(r, json_string_value(nname)) &&
            json_string_length(nname) <= r->lim->name)
            snprintf(tuple_name, sizeof tuple_name, "%s", json_string_value(nname));
        else fresh_name(r, name, tuple_name, sizeof tuple_name);
        /* a node name that is also one of its outputs' names goes to the output */
        for (size_t i = 0; i < n_out; i++) {
            const char *kind, *oname;
            json_t *list;
            if (output_name(json_array_get(outputs, i), where, r->lim, &kind, &oname, &list) == TP_OK && oname &&
                !strcmp(oname, tuple_name))
                fresh_name(r, name, tuple_name, sizeof tuple_name);
        }
        tp_clear_error();
        tp_node *n = NULL;
        st = make_call(r, op, &named, tuple_name, where, &n);
        const tp_value *mv = st == TP_OK ? tp_node_meta_val(n) : NULL;
        json_t *items = outputs;
        if (st == TP_OK && n_out == 1 && first_list) items = first_list;
        for (size_t i = 0; st == TP_OK && i < json_array_size(items); i++) {
            const char *kind = "as_tensor", *oname;
            json_t *list = NULL;
            if (items == first_list) st = tensor_arg_name(json_array_get(items, i), where, r->lim, &oname);
            else st = output_name(json_array_get(items, i), where, r->lim, &kind, &oname, &list);
            if (st != TP_OK) break;
            if (list) {
                st = tp_error(TP_ERR_UNSUPPORTED, "%s: nested output lists are not supported", where);
                break;
            }
            if (!oname) continue;
            CHECK_GOTO(mv && (int64_t)i < tp_value_len(mv), st, TP_ERR_UNSUPPORTED, done,
                          "%s: output %zu ('%s') where %s returns %" PRId64, where, i, oname, tp_op_name(op),
                          mv ? tp_value_len(mv) : 0);
            st = getitem_node(r, n, (int64_t)i, oname, where);
            if (st == TP_OK && !strcmp(kind, "as_tensor"))
                st = check_output_meta(r, tp_node_meta_val(find_value(r, oname)), oname, where);
        }
    }
done:
    tp_value_clear(&named);
    return st;
}

/* ---- signature, outputs, constraints ------------------------------------------------ */

typedef struct state_ent {
    const char *target;
    tp_state_kind kind;
    bool persistent;
    tp_tensor *t;
} state_ent;

/* graph.<key> and signature.<key>_specs: arrays of the same length. */
static tp_status paired(trd *r, const json_t *graph, const char *key, const json_t *specs, json_t **out) {
    char gw[32], sw[48];
    snprintf(gw, sizeof gw, "graph.%s", key);
    snprintf(sw, sizeof sw, "signature.%.*s_specs", (int)strlen(key) - 1, key); /* input_specs, output_specs */
    TP_TRY(get_field(graph, key, JSON_ARRAY, true, "graph", out));
    TP_TRY(check_array(*out, gw, r->lim));
    TP_TRY(check_array(specs, sw, r->lim));
    TP_CHECK(json_array_size(*out) == json_array_size(specs), TP_ERR_CORRUPT, "%s has %zu entries but %s %zu", gw,
             json_array_size(*out), sw, json_array_size(specs));
    return TP_OK;
}

static tp_status read_inputs(trd *r, const json_t *graph, const json_t *specs, tp_signature *sig, state_ent *state,
                             int *n_state) {
    json_t *inputs;
    TP_TRY(paired(r, graph, "inputs", specs, &inputs));
    for (size_t i = 0; i < json_array_size(specs); i++) {
        char w[120];
        snprintf(w, sizeof w, "signature.input_specs[%zu]", i);
        const char *kind;
        json_t *spec;
        TP_TRY(union_of(json_array_get(specs, i), w, &kind, &spec));
        TP_TRY(need_obj(spec, w));
        json_t *arg;
        const char *name = NULL, *target = NULL;
        tp_input_kind ik;
        tp_persistence pers = TP_PERSISTENT_UNSET;
        tp_state_kind sk = TP_STATE_PARAMETER;
        if (!strcmp(kind, "user_input")) {
            ik = TP_INPUT_USER_INPUT;
            TP_TRY(get_field(spec, "arg", JSON_OBJECT, true, w, &arg));
            const char *ak;
            json_t *av;
            TP_TRY(union_of(arg, w, &ak, &av));
            TP_CHECK(!strcmp(ak, "as_tensor"), TP_ERR_UNSUPPORTED,
                     "%s: user inputs of kind '%s' are not supported (tensor inputs only)", w, ak);
            TP_TRY(tensor_arg_name(av, w, r->lim, &name));
        } else if (!strcmp(kind, "parameter") || !strcmp(kind, "buffer") || !strcmp(kind, "tensor_constant") ||
                   !strcmp(kind, "token")) {
            TP_TRY(get_field(spec, "arg", JSON_OBJECT, true, w, &arg));
            TP_TRY(tensor_arg_name(arg, w, r->lim, &name));
            if (!strcmp(kind, "parameter")) {
                ik = TP_INPUT_PARAMETER;
                TP_TRY(get_str(spec, "parameter_name", w, r->lim, &target));
            } else if (!strcmp(kind, "buffer")) {
                ik = TP_INPUT_BUFFER;
                sk = TP_STATE_BUFFER;
                json_t *p;
                TP_TRY(get_str(spec, "buffer_name", w, r->lim, &target));
                TP_TRY(get_field(spec, "persistent", JSON_TRUE, true, w, &p));
                pers = json_is_true(p) ? TP_PERSISTENT_YES : TP_PERSISTENT_NO;
            } else if (!strcmp(kind, "tensor_constant")) {
                ik = TP_INPUT_CONSTANT_TENSOR;
                sk = TP_STATE_CONSTANT;
                TP_TRY(get_str(spec, "tensor_constant_name", w, r->lim, &target));
            } else {
                ik = TP_INPUT_TOKEN;
            }
        } else if (!strcmp(kind, "constant_input")) {
            /* a Python scalar the program was specialised to: no placeholder, a constant user input */
            json_t *val;
            TP_TRY(get_str(spec, "name", w, r->lim, &name));
            TP_TRY(get_field(spec, "value", JSON_OBJECT, true, w, &val));
            tp_value v;
            TP_TRY(arg_value(r, val, w, &v));
            tp_status st = tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_constant(name, v), NULL,
                                                  TP_PERSISTENT_UNSET);
            tp_value_clear(&v);
            TP_TRY(st);
            continue;
        } else {
            return tp_error(TP_ERR_UNSUPPORTED, "%s: inputs of kind '%s' are not supported", w, kind);
        }
        /* the graph input at the same position */
        const char *gk;
        json_t *gv;
        const char *gname;
        char wg[64];
        snprintf(wg, sizeof wg, "graph.inputs[%zu]", i);
        TP_TRY(union_of(json_array_get(inputs, i), wg, &gk, &gv));
        TP_CHECK(!strcmp(gk, "as_tensor"), TP_ERR_CORRUPT, "%s: expected as_tensor for a %s input", wg, kind);
        TP_TRY(tensor_arg_name(gv, wg, r->lim, &gname));
        TP_CHECK(!strcmp(gname, name), TP_ERR_CORRUPT, "%s names '%s' but %s names '%s'", wg, gname, w, name);
        /* placeholder meta */
        tp_value mv = tp_value_none();
        tp_tensor *meta = NULL;
        if (ik != TP_INPUT_TOKEN || json_object_get(r->tensor_values, name)) {
            tp_dtype dt;
            int nd;
            int64_t sizes[TP_MAX_DIMS];
            TP_TRY(tensor_meta(r, name, w, ik == TP_INPUT_USER_INPUT ? name : NULL, &dt, &nd, sizes));
            if (target) {
                tp_tensor *t = NULL;
                TP_CHECK(r->o && r->o->state, TP_ERR_NOT_FOUND, "%s: no state to read '%s' from", w, target);
                tp_status st = r->o->state(r->o->state_ctx, target, sk, &t);
                if (st == TP_ERR_NOT_FOUND) { /* the signature names state the payloads lack: a broken archive */
                    char msg[512];
                    snprintf(msg, sizeof msg, "%s", tp_last_error());
                    return tp_error(TP_ERR_CORRUPT, "%s: %s", w, msg);
                }
                TP_TRY(st);
                bool same = tp_tensor_dtype(t) == dt && tp_tensor_ndim(t) == nd;
                for (int d = 0; same && d < nd; d++) same = tp_tensor_sizes(t)[d] == sizes[d];
                if (!same) {
                    tp_tensor_free(t);
                    return tp_error(TP_ERR_CORRUPT, "%s: state '%s' in the payloads differs in dtype or shape from "
                                    "graph.tensor_values['%s']", w, target, name);
                }
                state[*n_state] = (state_ent){target, sk, pers == TP_PERSISTENT_YES, t};
                (*n_state)++;
            }
            TP_TRY(tp_tensor_meta(dt, nd, sizes, &meta));
            mv = tp_value_tensor(meta);
        }
        tp_node *ph;
        tp_status st = tp_graph_placeholder(r->g, name, &mv, &ph);
        tp_value_clear(&mv);
        TP_TRY(st);
        TP_TRY(define_value(r, name, ph));
        if (strcmp(name, tp_node_name(ph)) != 0) /* renamed (a builtin's name): dims and specs follow it */
            for (int d = 0; d < r->n_dims; d++)
                if (!strcmp(r->dims[d].input, name)) snprintf(r->dims[d].input, sizeof r->dims[d].input, "%s", tp_node_name(ph));
        name = tp_node_name(ph);
        tp_arg_spec as = ik == TP_INPUT_TOKEN ? tp_arg_token(name) : tp_arg_tensor(name);
        TP_TRY(tp_signature_add_input(sig, ik, as, target, ik == TP_INPUT_BUFFER ? pers : TP_PERSISTENT_UNSET));
    }
    return TP_OK;
}

static tp_status read_outputs(trd *r, const json_t *graph, const json_t *specs, tp_signature *sig) {
    json_t *outputs;
    TP_TRY(paired(r, graph, "outputs", specs, &outputs));
    tp_value outs;
    TP_TRY(tp_value_tuple(0, &outs));
    tp_status st = TP_OK;
    for (size_t i = 0; st == TP_OK && i < json_array_size(specs); i++) {
        char w[120], wg[64];
        snprintf(w, sizeof w, "signature.output_specs[%zu]", i);
        snprintf(wg, sizeof wg, "graph.outputs[%zu]", i);
        const char *kind;
        json_t *spec, *arg;
        st = union_of(json_array_get(specs, i), w, &kind, &spec);
        if (st == TP_OK) st = need_obj(spec, w);
        if (st == TP_OK) st = get_field(spec, "arg", JSON_OBJECT, true, w, &arg);
        if (st != TP_OK) break;
        tp_output_kind ok;
        const char *target = NULL, *tkey = NULL;
        if (!strcmp(kind, "user_output")) ok = TP_OUTPUT_USER_OUTPUT;
        else if (!strcmp(kind, "loss_output")) ok = TP_OUTPUT_LOSS_OUTPUT;
        else if (!strcmp(kind, "buffer_mutation")) ok = TP_OUTPUT_BUFFER_MUTATION, tkey = "buffer_name";
        else if (!strcmp(kind, "parameter_mutation")) ok = TP_OUTPUT_PARAMETER_MUTATION, tkey = "parameter_name";
        else if (!strcmp(kind, "user_input_mutation")) ok = TP_OUTPUT_USER_INPUT_MUTATION, tkey = "user_input_name";
        else if (!strcmp(kind, "token")) ok = TP_OUTPUT_TOKEN;
        else {
            st = tp_error(TP_ERR_UNSUPPORTED, "%s: outputs of kind '%s' are not supported", w, kind);
            break;
        }
        if (tkey) st = get_str(spec, tkey, w, r->lim, &target);
        if (st != TP_OK) break;
        tp_value v;
        st = arg_value(r, json_array_get(outputs, i), wg, &v);
        if (st != TP_OK) break;
        if (v.kind == TP_VAL_NODE) {
            const char *nm = tp_node_name(v.u.node);
            st = tp_signature_add_output(sig, ok, ok == TP_OUTPUT_TOKEN ? tp_arg_token(nm) : tp_arg_tensor(nm), target);
        } else if (ok == TP_OUTPUT_USER_OUTPUT) {
            tp_value c;
            st = tp_value_copy(&v, &c);
            if (st == TP_OK) st = tp_signature_add_output(sig, ok, tp_arg_constant("", c), NULL);
            tp_value_clear(&c);
        } else {
            st = tp_error(TP_ERR_CORRUPT, "%s: a %s must be a tensor", wg, kind);
        }
        if (st == TP_OK) st = tp_value_append(&outs, &v);
        else tp_value_clear(&v);
    }
    tp_node *on = NULL;
    if (st == TP_OK) st = tp_graph_output(r->g, &outs, &on);
    tp_value_clear(&outs);
    return st;
}

/* torch's pytree JSON ("[1, {\"type\", \"context\", \"children_spec\"}]") -> ours. */
static tp_status treespec(const json_t *n, const char *where, int depth, const tp_doc_limits *lim, tp_treespec **out) {
    TP_CHECK((size_t)depth <= lim->depth, TP_ERR_CORRUPT, "%s: tree spec nested deeper than %zu (max_depth)", where,
             lim->depth);
    TP_TRY(need_obj(n, where));
    json_t *type = json_object_get(n, "type"), *ctx = json_object_get(n, "context"), *ch;
    TP_TRY(get_field(n, "children_spec", JSON_ARRAY, true, where, &ch));
    TP_TRY(check_array(ch, where, lim));
    if (!type || json_is_null(type)) return tp_treespec_leaf(out);
    TP_CHECK(json_is_string(type), TP_ERR_CORRUPT, "%s.type: expected a string", where);
    const char *t = json_string_value(type);
    tp_tree_kind kind;
    if (!strcmp(t, "builtins.tuple") || !strcmp(t, "collections.namedtuple")) kind = TP_TREE_TUPLE;
    else if (!strcmp(t, "builtins.list") || !strcmp(t, "torch.fx.immutable_collections.immutable_list"))
        kind = TP_TREE_LIST;
    else if (!strcmp(t, "builtins.dict") || !strcmp(t, "collections.OrderedDict") ||
             !strcmp(t, "torch.fx.immutable_collections.immutable_dict"))
        kind = TP_TREE_DICT;
    else if (!strcmp(t, "builtins.NoneType")) return tp_treespec_none(out);
    else return tp_error(TP_ERR_UNSUPPORTED, "%s: tree nodes of type '%.200s' are not supported", where, t);
    size_t n_ch = json_array_size(ch);
    json_t *keys = NULL;
    if (kind == TP_TREE_DICT) {
        TP_CHECK(json_is_string(ctx), TP_ERR_CORRUPT, "%s.context: expected the keys as a JSON string", where);
        json_error_t err;
        bool oom = false;
        keys = tp__json_parse(json_string_value(ctx), json_string_length(ctx), 0, &err, &oom);
        TP_CHECK(keys, oom ? TP_ERR_NOMEM : TP_ERR_CORRUPT, "%s.context: %s", where, oom ? "out of memory" : err.text);
        if (!json_is_array(keys) || json_array_size(keys) != n_ch) {
            json_decref(keys);
            return tp_error(TP_ERR_CORRUPT, "%s.context: expected %zu keys", where, n_ch);
        }
        for (size_t i = 0; i < n_ch; i++)
            if (!json_is_string(json_array_get(keys, i))) {
                json_decref(keys);
                return tp_error(TP_ERR_UNSUPPORTED, "%s.context: dict keys must be strings", where);
            }
    }
    tp_treespec **kids = tp_calloc(n_ch ? n_ch : 1, sizeof *kids);
    const char **knames = tp_calloc(n_ch ? n_ch : 1, sizeof *knames);
    tp_status st = kids && knames ? TP_OK : tp_error(TP_ERR_NOMEM, "out of memory");
    size_t made = 0;
    for (; st == TP_OK && made < n_ch; made++) {
        char w[300];
        snprintf(w, sizeof w, "%.200s.children_spec[%zu]", where, made);
        st = treespec(json_array_get(ch, made), w, depth + 1, lim, &kids[made]);
        if (st != TP_OK) break;
        if (keys) knames[made] = json_string_value(json_array_get(keys, made));
    }
    if (st == TP_OK) st = tp_treespec_new(kind, kids, (int64_t)n_ch, keys ? knames : NULL, out);
    else
        for (size_t i = 0; i < made; i++) tp_treespec_free(kids[i]);
    tp_free(kids);
    tp_free(knames);
    json_decref(keys);
    return st;
}

static tp_status treespec_string(const json_t *s, const char *where, const tp_doc_limits *lim, tp_treespec **out) {
    TP_CHECK(json_is_string(s), TP_ERR_CORRUPT, "%s: expected a JSON string", where);
    json_error_t err;
    bool oom = false;
    json_t *j = tp__json_parse(json_string_value(s), json_string_length(s), 0, &err, &oom);
    TP_CHECK(j, oom ? TP_ERR_NOMEM : TP_ERR_CORRUPT, "%s: %s", where, oom ? "out of memory" : err.text);
    tp_status st = TP_OK;
    if (!json_is_array(j) || json_array_size(j) != 2 || !json_is_integer(json_array_get(j, 0)))
        st = tp_error(TP_ERR_CORRUPT, "%s: expected [protocol, spec]", where);
    else if (json_integer_value(json_array_get(j, 0)) != 1)
        st = tp_error(TP_ERR_UNSUPPORTED, "%s: tree spec protocol %" PRId64 " (expected 1)", where,
                      (int64_t)json_integer_value(json_array_get(j, 0)));
    else st = treespec(json_array_get(j, 1), where, 0, lim, out);
    json_decref(j);
    return st;
}

static tp_status arg_specs(trd *r, const json_t *list, const char *where, tp_arg_spec **out, int *n) {
    *out = NULL;
    *n = 0;
    TP_TRY(check_array(list, where, r->lim));
    size_t cnt = json_array_size(list);
    tp_arg_spec *a = tp_calloc(cnt ? cnt : 1, sizeof *a);
    TP_CHECK(a, TP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < cnt; i++) {
        char w[200];
        snprintf(w, sizeof w, "%s[%zu]", where, i);
        const char *k;
        json_t *v;
        const char *name = NULL;
        tp_status st = union_of(json_array_get(list, i), w, &k, &v);
        if (st == TP_OK && !strcmp(k, "as_tensor")) st = tensor_arg_name(v, w, r->lim, &name);
        else if (st == TP_OK) st = tp_error(TP_ERR_UNSUPPORTED, "%s: module call arguments of kind '%s'", w, k);
        if (st != TP_OK) {
            tp_free(a);
            return st;
        }
        tp_node *n = find_value(r, name);
        a[i] = tp_arg_tensor(n ? tp_node_name(n) : name);
    }
    *out = a;
    *n = (int)cnt;
    return TP_OK;
}

static tp_status read_module_call_graph(trd *r, const json_t *mcg, tp_program *p) {
    TP_TRY(check_array(mcg, "module_call_graph", r->lim));
    for (size_t i = 0; i < json_array_size(mcg); i++) {
        char w[80];
        snprintf(w, sizeof w, "module_call_graph[%zu]", i);
        json_t *e = json_array_get(mcg, i), *sg;
        const char *fqn;
        TP_TRY(need_obj(e, w));
        json_t *fq;
        TP_TRY(get_field(e, "fqn", JSON_STRING, true, w, &fq));
        TP_CHECK(json_string_length(fq) <= r->lim->name, TP_ERR_CORRUPT, "%s.fqn: too long", w);
        fqn = json_string_value(fq);
        TP_TRY(get_field(e, "signature", JSON_OBJECT, false, w, &sg));
        if (!sg) {
            TP_TRY(tp_program_add_module_call(p, fqn, NULL));
            continue;
        }
        tp_module_call_signature s;
        memset(&s, 0, sizeof s);
        json_t *ins, *outs, *is, *os;
        char ws[120];
        snprintf(ws, sizeof ws, "%s.signature", w);
        TP_TRY(get_field(sg, "inputs", JSON_ARRAY, true, ws, &ins));
        TP_TRY(get_field(sg, "outputs", JSON_ARRAY, true, ws, &outs));
        TP_TRY(get_field(sg, "in_spec", JSON_STRING, true, ws, &is));
        TP_TRY(get_field(sg, "out_spec", JSON_STRING, true, ws, &os));
        char wa[160];
        snprintf(wa, sizeof wa, "%s.inputs", ws);
        tp_status st = arg_specs(r, ins, wa, &s.inputs, &s.n_inputs);
        snprintf(wa, sizeof wa, "%s.outputs", ws);
        if (st == TP_OK) st = arg_specs(r, outs, wa, &s.outputs, &s.n_outputs);
        snprintf(wa, sizeof wa, "%s.in_spec", ws);
        if (st == TP_OK) st = treespec_string(is, wa, r->lim, &s.in_spec);
        snprintf(wa, sizeof wa, "%s.out_spec", ws);
        if (st == TP_OK) st = treespec_string(os, wa, r->lim, &s.out_spec);
        json_t *fan = json_object_get(sg, "forward_arg_names");
        if (st == TP_OK && fan && json_is_array(fan)) {
            st = check_array(fan, ws, r->lim);
            s.forward_arg_names = st == TP_OK ? tp_calloc(json_array_size(fan) + 1, sizeof(char *)) : NULL;
            if (st == TP_OK && !s.forward_arg_names) st = tp_error(TP_ERR_NOMEM, "out of memory");
            for (size_t k = 0; st == TP_OK && k < json_array_size(fan); k++) {
                json_t *nm = json_array_get(fan, k);
                CHECK_GOTO(json_is_string(nm), st, TP_ERR_CORRUPT, fail, "%s.forward_arg_names[%zu]: expected a string",
                              ws, k);
                s.forward_arg_names[k] = (char *)json_string_value(nm);
                s.n_forward_arg_names++;
            }
        }
        if (st == TP_OK && fqn[0] == '\0') {
            st = tp_program_set_in_spec(p, s.in_spec);
            if (st == TP_OK) st = tp_program_set_out_spec(p, s.out_spec);
        }
        if (st == TP_OK) st = tp_program_add_module_call(p, fqn, &s);
    fail:
        tp_free(s.inputs);
        tp_free(s.outputs);
        tp_treespec_free(s.in_spec);
        tp_treespec_free(s.out_spec);
        tp_free(s.forward_arg_names);
        TP_TRY(st);
    }
    return TP_OK;
}

static tp_status read_constraints(trd *r, const json_t *ranges, tp_program *p) {
    /* ranges of the symbols the user inputs use */
    if (ranges) TP_TRY(need_obj(ranges, "range_constraints"));
    for (int i = 0; i < r->n_dims; i++) {
        const tdim *d = &r->dims[i];
        bool seen = false;
        for (int k = 0; k < i; k++) seen = seen || !strcmp(r->dims[k].e.symbol, d->e.symbol);
        if (seen) continue;
        json_t *rc = ranges ? json_object_get(ranges, d->e.symbol) : NULL;
        int64_t lo = 0, hi = TP_DIM_UNBOUNDED;
        if (rc) {
            char w[120];
            snprintf(w, sizeof w, "range_constraints['%s']", d->e.symbol);
            TP_TRY(need_obj(rc, w));
            json_t *mn, *mx;
            TP_TRY(get_field(rc, "min_val", JSON_INTEGER, false, w, &mn));
            TP_TRY(get_field(rc, "max_val", JSON_INTEGER, false, w, &mx));
            if (mn) lo = json_integer_value(mn);
            /* torch writes int_oo as a huge value */
            if (mx && json_integer_value(mx) < ((int64_t)1 << 62)) hi = json_integer_value(mx);
            TP_CHECK(lo <= hi, TP_ERR_CORRUPT, "%s: min %" PRId64 " > max %" PRId64, w, lo, hi);
        }
        if (lo < 0) lo = 0;
        TP_TRY(tp_program_add_range(p, d->e.symbol, lo, hi));
    }
    for (int i = 0; i < r->n_dims; i++) {
        const tdim *d = &r->dims[i];
        tp_dim_rule rule;
        memset(&rule, 0, sizeof rule);
        rule.site.input = d->input;
        rule.site.dim = d->dim;
        rule.symbol = d->e.symbol;
        if (d->e.scale == 1 && d->e.offset == 0) {
            rule.kind = TP_DIM_SYMBOL;
        } else {
            TP_CHECK(d->e.scale >= 1, TP_ERR_UNSUPPORTED, "dim %d of input '%s': %" PRId64 "*%s%+" PRId64
                     " has a scale below 1", d->dim, d->input, d->e.scale, d->e.symbol, d->e.offset);
            rule.kind = TP_DIM_DERIVED;
            rule.scale = d->e.scale;
            rule.offset = d->e.offset;
        }
        TP_TRY(tp_program_add_dim_rule(p, &rule));
    }
    /* dims sharing one plain symbol are equal */
    for (int i = 0; i < r->n_dims; i++) {
        const tdim *d = &r->dims[i];
        if (d->e.scale != 1 || d->e.offset != 0) continue;
        bool seen = false;
        for (int k = 0; k < i; k++)
            seen = seen || (!strcmp(r->dims[k].e.symbol, d->e.symbol) && r->dims[k].e.scale == 1 && r->dims[k].e.offset == 0);
        if (seen) continue;
        tp_dim_site sites[64];
        int n = 0;
        for (int k = i; k < r->n_dims && n < 64; k++)
            if (!strcmp(r->dims[k].e.symbol, d->e.symbol) && r->dims[k].e.scale == 1 && r->dims[k].e.offset == 0)
                sites[n++] = (tp_dim_site){r->dims[k].input, r->dims[k].dim};
        if (n > 1) TP_TRY(tp_program_add_equality(p, sites, n, d->e.symbol));
    }
    return TP_OK;
}

/* Record in `uses` that node `index` reads every value an Argument names
 * (TensorArgument {"name"}, SymIntArgument {"as_name"}, in lists too). */
static tp_status note_uses(json_t *uses, const json_t *v, int64_t index) {
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) TP_TRY(note_uses(uses, json_array_get(v, i), index));
    } else if (json_is_object(v)) {
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)v, key, val) {
            if ((!strcmp(key, "name") || !strcmp(key, "as_name")) && json_is_string(val)) {
                TP_CHECK(json_object_set_new(uses, json_string_value(val), json_integer(index)) == 0, TP_ERR_NOMEM,
                         "out of memory");
            } else {
                TP_TRY(note_uses(uses, val, index));
            }
        }
    }
    return TP_OK;
}

static tp_status read_document(trd *r, json_t *doc, tp_program **out) {
    TP_TRY(need_obj(doc, "document"));
    json_t *sv, *maj, *min, *gm, *graph, *signature, *mcg, *ranges, *nodes, *in_specs, *out_specs;
    TP_TRY(get_field(doc, "schema_version", JSON_OBJECT, true, "document", &sv));
    TP_TRY(get_field(sv, "major", JSON_INTEGER, true, "schema_version", &maj));
    TP_TRY(get_field(sv, "minor", JSON_INTEGER, true, "schema_version", &min));
    int64_t major = json_integer_value(maj), minor = json_integer_value(min);
    TP_CHECK(major <= TP_TORCH_SCHEMA_MAJOR, TP_ERR_UNSUPPORTED,
             "torch export schema version %" PRId64 ".%" PRId64 " is newer than this reader (%d.x)", major, minor,
             TP_TORCH_SCHEMA_MAJOR);
    TP_CHECK(major >= TP_TORCH_SCHEMA_MIN_MAJOR, TP_ERR_UNSUPPORTED,
             "torch export schema version %" PRId64 ".%" PRId64 " is not supported (this reader reads %d.x to %d.x, "
             "written by torch 2.4 onwards)", major, minor, TP_TORCH_SCHEMA_MIN_MAJOR, TP_TORCH_SCHEMA_MAJOR);
    TP_TRY(get_field(doc, "graph_module", JSON_OBJECT, true, "document", &gm));
    TP_TRY(get_field(gm, "graph", JSON_OBJECT, true, "graph_module", &graph));
    TP_TRY(get_field(gm, "signature", JSON_OBJECT, true, "graph_module", &signature));
    TP_TRY(get_field(gm, "module_call_graph", JSON_ARRAY, false, "graph_module", &mcg));
    TP_TRY(get_field(doc, "range_constraints", JSON_OBJECT, false, "document", &ranges));
    TP_TRY(get_field(graph, "nodes", JSON_ARRAY, true, "graph", &nodes));
    TP_TRY(get_field(graph, "tensor_values", JSON_OBJECT, true, "graph", &r->tensor_values));
    TP_TRY(get_field(signature, "input_specs", JSON_ARRAY, true, "signature", &in_specs));
    TP_TRY(get_field(signature, "output_specs", JSON_ARRAY, true, "signature", &out_specs));
    TP_CHECK(json_array_size(nodes) <= r->lim->nodes, TP_ERR_CORRUPT,
             "graph.nodes: %zu nodes exceed the limit of %zu (max_nodes)", json_array_size(nodes), r->lim->nodes);
    TP_CHECK(json_object_size(r->tensor_values) <= r->lim->items, TP_ERR_CORRUPT,
             "graph.tensor_values: %zu entries exceed the limit of %zu (max_items)", json_object_size(r->tensor_values),
             r->lim->items);
    json_t *verifiers = json_object_get(doc, "verifiers");
    if (verifiers && json_is_array(verifiers))
        for (size_t i = 0; i < json_array_size(verifiers); i++) {
            json_t *v = json_array_get(verifiers, i);
            TP_CHECK(!json_is_string(v) || strcmp(json_string_value(v), "TRAINING") == 0 ||
                         strcmp(json_string_value(v), "ATEN") == 0,
                     TP_ERR_UNSUPPORTED, "verifier '%.100s' (a dialect tpexport does not read)", json_string_value(v));
        }

    TP_TRY(tp_graph_new(&r->g));
    r->names = json_object();
    TP_CHECK(r->names, TP_ERR_NOMEM, "out of memory");
    tp_signature *sig = NULL;
    tp_status st = tp_signature_new(&sig);
    size_t n_in = json_array_size(in_specs);
    state_ent *state = st == TP_OK ? tp_calloc(n_in ? n_in : 1, sizeof *state) : NULL;
    int n_state = 0;
    if (st == TP_OK && !state) st = tp_error(TP_ERR_NOMEM, "out of memory");
    if (st == TP_OK) st = read_inputs(r, graph, in_specs, sig, state, &n_state);
    r->uses = st == TP_OK ? json_object() : NULL;
    if (st == TP_OK && !r->uses) st = tp_error(TP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == TP_OK && i < json_array_size(nodes); i++) {
        json_t *ins = json_is_object(json_array_get(nodes, i)) ? json_object_get(json_array_get(nodes, i), "inputs") : NULL;
        for (size_t k = 0; st == TP_OK && json_is_array(ins) && k < json_array_size(ins); k++) {
            json_t *na = json_array_get(ins, k);
            if (json_is_object(na)) st = note_uses(r->uses, json_object_get(na, "arg"), (int64_t)i);
        }
    }
    if (st == TP_OK) st = note_uses(r->uses, json_object_get(graph, "outputs"), (int64_t)json_array_size(nodes));
    for (size_t i = 0; st == TP_OK && i < json_array_size(nodes); i++) st = read_node(r, json_array_get(nodes, i), (int)i);
    if (st == TP_OK) st = read_outputs(r, graph, out_specs, sig);
    tp_program *p = NULL;
    if (st == TP_OK) {
        st = tp_program_new(r->g, sig, &p);
        r->g = NULL;
        sig = NULL;
    }
    for (int i = 0; st == TP_OK && i < n_state; i++)
        st = tp_program_set_state(p, state[i].target, state[i].kind, state[i].t, state[i].persistent);
    if (st == TP_OK) st = read_constraints(r, ranges, p);
    if (st == TP_OK && mcg) st = read_module_call_graph(r, mcg, p);
    if (st == TP_OK) st = tp_program_validate(p);
    for (int i = 0; i < n_state; i++) tp_tensor_free(state[i].t);
    tp_free(state);
    tp_signature_free(sig);
    if (st != TP_OK) {
        tp_program_free(p);
        return st;
    }
    *out = p;
    return TP_OK;
}

tp_status tp__torch_program_from_json(const char *json, size_t len, const tp_torch_read_options *opts,
                                      tp_program **out) {
    TP_CHECK(json && out, TP_ERR_INVALID_ARG, "NULL argument");
    *out = NULL;
    tp_doc_limits dl = tp__doc_limits_default();
    const tp_doc_limits *lim = opts && opts->limits ? opts->limits : &dl;
    TP_CHECK(len <= lim->document, TP_ERR_CORRUPT, "document of %zu bytes exceeds the limit of %zu (max_document_bytes)",
             len, lim->document);
    json_error_t err;
    bool oom = false;
    json_t *doc = tp__json_parse(json, len, JSON_REJECT_DUPLICATES, &err, &oom);
    if (!doc)
        return oom ? tp_error(TP_ERR_NOMEM, "out of memory")
                   : tp_error(TP_ERR_CORRUPT, "invalid JSON at line %d column %d: %s", err.line, err.column, err.text);
    trd r;
    memset(&r, 0, sizeof r);
    r.lim = lim;
    r.o = opts;
    tp_status st = read_document(&r, doc, out);
    tp_graph_free(r.g);
    for (int i = 0; i < r.n_dropped; i++) tp_free(r.dropped[i]);
    tp_free(r.dropped);
    tp_free(r.dims);
    json_decref(r.uses);
    json_decref(r.names);
    json_decref(doc);
    return st;
}

/* ---- payload configs ------------------------------------------------------------------- */

tp_status tp__torch_weights_from_json(const char *json, size_t len, const char *what, tp_serde_payload_fn payload,
                                      void *payload_ctx, const tp_doc_limits *limits, tp_serde_weights *out) {
    memset(out, 0, sizeof *out);
    tp_doc_limits dl = tp__doc_limits_default();
    const tp_doc_limits *lim = limits ? limits : &dl;
    TP_CHECK(len <= lim->document, TP_ERR_CORRUPT, "%s config of %zu bytes exceeds the document limit", what, len);
    json_error_t err;
    bool oom = false;
    json_t *doc = tp__json_parse(json, len, JSON_REJECT_DUPLICATES, &err, &oom);
    if (!doc)
        return oom ? tp_error(TP_ERR_NOMEM, "out of memory")
                   : tp_error(TP_ERR_CORRUPT, "%s config: invalid JSON: %s", what, err.text);
    json_t *cfg = json_is_object(doc) ? json_object_get(doc, "config") : NULL;
    tp_status st = cfg && json_is_object(cfg) ? TP_OK : tp_error(TP_ERR_CORRUPT, "%s config: expected {\"config\": {...}}", what);
    size_t n = st == TP_OK ? json_object_size(cfg) : 0;
    if (st == TP_OK && n > lim->items)
        st = tp_error(TP_ERR_CORRUPT, "%s config: %zu entries exceed the limit of %zu (max_items)", what, n, lim->items);
    if (st == TP_OK) {
        out->items = tp_calloc(n ? n : 1, sizeof *out->items);
        if (!out->items) st = tp_error(TP_ERR_NOMEM, "out of memory");
    }
    const char *key;
    json_t *ent;
    if (st == TP_OK) json_object_foreach(cfg, key, ent) {
        char w[TP_LIMIT_NAME + 64];
        snprintf(w, sizeof w, "%s '%.1024s'", what, key);
        tp_serde_weight *wt = &out->items[out->n];
        json_t *pn, *up, *ip, *tm, *dt, *sz, *sd, *so, *rg;
        if (strlen(key) > lim->name) st = tp_error(TP_ERR_CORRUPT, "%s config: a name longer than %zu bytes", what, lim->name);
        if (st == TP_OK) st = need_obj(ent, w);
        if (st == TP_OK) st = get_field(ent, "path_name", JSON_STRING, true, w, &pn);
        if (st == TP_OK) st = get_field(ent, "use_pickle", JSON_TRUE, false, w, &up);
        if (st == TP_OK) st = get_field(ent, "is_param", JSON_TRUE, false, w, &ip);
        if (st == TP_OK && up && json_is_true(up))
            st = tp_error(TP_ERR_UNSUPPORTED, "%s: pickled payload cannot be read safely", w);
        if (st == TP_OK) st = get_field(ent, "tensor_meta", JSON_OBJECT, true, w, &tm);
        if (st == TP_OK) st = get_field(tm, "dtype", JSON_INTEGER, true, w, &dt);
        if (st == TP_OK) st = get_field(tm, "sizes", JSON_ARRAY, true, w, &sz);
        if (st == TP_OK) st = get_field(tm, "strides", JSON_ARRAY, true, w, &sd);
        if (st == TP_OK) st = get_field(tm, "storage_offset", JSON_OBJECT, true, w, &so);
        if (st == TP_OK) st = get_field(tm, "requires_grad", JSON_TRUE, false, w, &rg);
        if (st == TP_OK) {
            json_t *layout = json_object_get(tm, "layout");
            if (layout && json_is_integer(layout) && json_integer_value(layout) != 7)
                st = tp_error(TP_ERR_UNSUPPORTED, "%s: layout %" PRId64 " (sparse or mkldnn) is not supported", w,
                              (int64_t)json_integer_value(layout));
        }
        if (st == TP_OK) st = need_dtype(json_integer_value(dt), w, &wt->dtype);
        if (st == TP_OK && (json_array_size(sz) > TP_MAX_DIMS || json_array_size(sd) != json_array_size(sz)))
            st = tp_error(TP_ERR_CORRUPT, "%s: %zu sizes and %zu strides (at most %d dims)", w, json_array_size(sz),
                          json_array_size(sd), TP_MAX_DIMS);
        if (st == TP_OK) {
            wt->ndim = (int)json_array_size(sz);
            wt->role = -1;
            wt->is_param = ip && json_is_true(ip);
            wt->requires_grad = rg && json_is_true(rg);
        }
        for (int d = 0; st == TP_OK && d < wt->ndim; d++) {
            lin e;
            bool sym;
            char wd[TP_LIMIT_NAME + 96];
            snprintf(wd, sizeof wd, "%s sizes[%d]", w, d);
            st = sym_int(json_array_get(sz, (size_t)d), wd, false, &wt->sizes[d], &e, &sym);
            if (st == TP_OK) {
                snprintf(wd, sizeof wd, "%s strides[%d]", w, d);
                st = sym_int(json_array_get(sd, (size_t)d), wd, false, &wt->strides[d], &e, &sym);
            }
            if (st == TP_OK && sym) st = tp_error(TP_ERR_CORRUPT, "%s: a symbolic size or stride", w);
        }
        if (st == TP_OK) {
            lin e;
            bool sym;
            st = sym_int(so, w, false, &wt->storage_offset, &e, &sym);
            if (st == TP_OK && sym) st = tp_error(TP_ERR_CORRUPT, "%s: a symbolic storage offset", w);
        }
        if (st == TP_OK) {
            wt->name = tp_strdup(key);
            wt->path_name = tp_strdup(json_string_value(pn));
            if (!wt->name || !wt->path_name) {
                tp_free(wt->name);
                tp_free(wt->path_name);
                st = tp_error(TP_ERR_NOMEM, "out of memory");
            } else {
                out->n++;
            }
        }
        if (st != TP_OK) break;
    }
    json_decref(doc);
    /* the shared checks: non-negative sizes and strides, overflow, the view inside its payload, tensor bytes */
    if (st == TP_OK) st = tp__serde_weights_check(out, what, payload, payload_ctx, lim);
    if (st != TP_OK) tp__serde_weights_free(out);
    return st;
}

/* ---- torch.save files (state dicts and sample inputs) ------------------------------- */

typedef struct saved_ctx {
    const tp_zip_reader *z;
    char prefix[256]; /* "<name>/" of data.pkl */
    struct {
        char key[64];
        tp_tensor *t;
    } *cache;
    int n, cap;
} saved_ctx;

static void free_bytes(void *ctx, void *data) {
    TP_UNUSED(ctx);
    tp_free(data);
}

static tp_status saved_storage(void *vctx, const char *key, tp_dtype dtype, int64_t numel, tp_tensor **flat) {
    saved_ctx *c = vctx;
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->cache[i].key, key)) {
            TP_CHECK(tp_tensor_dtype(c->cache[i].t) == dtype && tp_tensor_numel(c->cache[i].t) == numel, TP_ERR_UNSUPPORTED,
                     "torch.save: storage '%s' is viewed with two dtypes or sizes", key);
            *flat = tp_tensor_retain(c->cache[i].t);
            return TP_OK;
        }
    char member[400];
    snprintf(member, sizeof member, "%sdata/%s", c->prefix, key);
    int m = tp__zip_find(c->z, member);
    TP_CHECK(m >= 0, TP_ERR_CORRUPT, "torch.save: no member '%s' for storage '%s'", member, key);
    size_t need = (size_t)numel * tp_dtype_size(dtype);
    TP_CHECK(tp__zip_entry(c->z, m)->size >= need, TP_ERR_CORRUPT, "torch.save: storage '%s' has %" PRIu64
             " bytes, %zu needed", key, (uint64_t)tp__zip_entry(c->z, m)->size, need);
    void *data;
    size_t size;
    TP_TRY(tp__zip_read(c->z, m, &data, &size));
    tp_tensor *t = NULL;
    tp_status st = tp_tensor_borrow(dtype, 1, &numel, NULL, 0, data, size, free_bytes, NULL, &t);
    if (st != TP_OK) {
        tp_free(data);
        return st;
    }
    if (c->n == c->cap) {
        int nc = c->cap ? 2 * c->cap : 16;
        void *g = tp_realloc(c->cache, (size_t)nc * sizeof *c->cache);
        if (!g) {
            tp_tensor_free(t);
            return tp_error(TP_ERR_NOMEM, "out of memory");
        }
        c->cache = g;
        c->cap = nc;
    }
    snprintf(c->cache[c->n].key, sizeof c->cache[c->n].key, "%s", key);
    c->cache[c->n++].t = t;
    *flat = tp_tensor_retain(t);
    return TP_OK;
}

tp_status tp__torch_saved_value(const void *data, size_t size, const tp_zip_limits *zl, const tp_doc_limits *lim,
                                tp_value *out) {
    *out = tp_value_none();
    tp_zip_reader *z = NULL;
    TP_TRY(tp__zip_open(data, size, zl, &z));
    saved_ctx c;
    memset(&c, 0, sizeof c);
    c.z = z;
    int pkl = -1;
    for (int i = 0; i < tp__zip_count(z); i++) {
        const char *m = tp__zip_entry(z, i)->name, *slash = strchr(m, '/');
        if (slash && !strcmp(slash, "/data.pkl") && (size_t)(slash - m) + 1 < sizeof c.prefix) {
            pkl = i;
            memcpy(c.prefix, m, (size_t)(slash - m) + 1);
            c.prefix[slash - m + 1] = '\0';
            break;
        }
    }
    tp_status st = pkl >= 0 ? TP_OK : tp_error(TP_ERR_CORRUPT, "torch.save file without a <name>/data.pkl member");
    if (st == TP_OK) {
        char member[300];
        snprintf(member, sizeof member, "%sbyteorder", c.prefix);
        int b = tp__zip_find(z, member);
        if (b >= 0) {
            void *bo;
            size_t bl;
            st = tp__zip_read(z, b, &bo, &bl);
            if (st == TP_OK && !(bl == 6 && memcmp(bo, "little", 6) == 0))
                st = tp_error(TP_ERR_UNSUPPORTED, "torch.save file of another byte order than little-endian");
            if (st == TP_OK) tp_free(bo);
        }
    }
    void *pk = NULL;
    size_t pklen = 0;
    if (st == TP_OK) st = tp__zip_read(z, pkl, &pk, &pklen);
    if (st == TP_OK) st = tp__sd_torch_pickle_read(pk, pklen, lim, saved_storage, &c, out);
    tp_free(pk);
    for (int i = 0; i < c.n; i++) tp_tensor_free(c.cache[i].t);
    tp_free(c.cache);
    tp__zip_close(z);
    return st;
}
