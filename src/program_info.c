/*
 * program_info.c - what an embedder needs to feed a program: the user
 * inputs and outputs with dtype and symbolic shape (program.h,
 * tp_program_input_info / tp_program_output_info).
 *
 * Inputs: the dtype and rank come from the placeholder's meta val or, when
 * the archive recorded none, the example input; each dim is static (the
 * recorded size) or follows a dim rule (a symbol, or scale*symbol + offset)
 * whose range comes from the range constraints.
 *
 * Outputs are found by shape inference on a copy of the graph
 * (tp_graph_infer_meta, metadata only, no kernel runs) with the user inputs
 * given as meta tensors: once at the example sizes, and once more per root
 * symbol with that symbol moved to two other values in its range. An output
 * dim that moves with a symbol as scale*symbol + offset (checked at both
 * points) is reported with that expression, one that does not move is
 * static, and any other (e.g. a floor division, or two symbols) is
 * dynamic with no expression (size -1, symbol NULL).
 */
#include <string.h>

#include "program_impl.h"

/* ---- inputs ---- */

static const tp_input_spec *user_input(const tp_program *p, int i) {
    const tp_signature *sig = tp_program_signature(p);
    for (int k = 0, u = 0; k < tp_signature_n_inputs(sig); k++) {
        const tp_input_spec *s = tp_signature_input(sig, k);
        if (s->kind == TP_INPUT_USER_INPUT && u++ == i) return s;
    }
    return NULL;
}

static const tp_output_spec *user_output(const tp_program *p, int i) {
    const tp_signature *sig = tp_program_signature(p);
    for (int k = 0, u = 0; k < tp_signature_n_outputs(sig); k++) {
        const tp_output_spec *s = tp_signature_output(sig, k);
        if (s->kind == TP_OUTPUT_USER_OUTPUT && u++ == i) return s;
    }
    return NULL;
}

int tp_program_num_user_inputs(const tp_program *p) {
    int n = 0;
    while (p && user_input(p, n)) n++;
    return n;
}

int tp_program_num_user_outputs(const tp_program *p) {
    int n = 0;
    while (p && user_output(p, n)) n++;
    return n;
}

/* The tensor describing user input `name`: placeholder meta, else example. */
static const tp_tensor *input_tensor(const tp_program *p, const char *name) {
    const tp_node *n = tp_graph_find_node(tp_program_graph(p), name);
    const tp_value *v = n ? tp_node_meta_val(n) : NULL;
    if (v && v->kind == TP_VAL_TENSOR) return v->u.tensor;
    v = tp_program_example_input(p, name);
    return v && v->kind == TP_VAL_TENSOR ? v->u.tensor : NULL;
}

static const tp_dim_rule *dim_rule(const tp_program *p, const char *input, int dim) {
    for (int i = 0; i < tp_program_num_dim_rules(p); i++) {
        const tp_dim_rule *r = tp_program_dim_rule(p, i);
        if (r->site.dim == dim && r->site.input && strcmp(r->site.input, input) == 0) return r;
    }
    return NULL;
}

static void set_symbolic(const tp_program *p, tp_io_dim *d, const char *symbol, int64_t scale, int64_t offset) {
    d->size = -1;
    d->symbol = symbol;
    d->scale = scale;
    d->offset = offset;
    const tp_range_constraint *rc = tp_program_find_range(p, symbol);
    int64_t lo = rc ? rc->min : 0, hi = rc ? rc->max : INT64_MAX;
    /* the dim's own range; saturate rather than overflow */
    if (__builtin_mul_overflow(lo, scale, &d->min) || __builtin_add_overflow(d->min, offset, &d->min)) d->min = INT64_MIN;
    if (__builtin_mul_overflow(hi, scale, &d->max) || __builtin_add_overflow(d->max, offset, &d->max)) d->max = INT64_MAX;
}

static void set_static(tp_io_dim *d, int64_t size) {
    memset(d, 0, sizeof *d);
    d->size = d->min = d->max = size;
    d->scale = 0;
}

/* out for an argument with nothing known yet. */
static void io_info_begin(tp_io_info *out, const tp_arg_spec *arg) {
    memset(out, 0, sizeof *out);
    out->name = arg->name;
    out->kind = arg->kind;
    out->ndim = -1;
    out->dtype = TP_DTYPE_COUNT;
}

tp_status tp_program_input_info(const tp_program *p, int i, tp_io_info *out) {
    TP_CHECK(p && out, TP_ERR_INVALID_ARG, "tp_program_input_info: program and out must not be NULL");
    const tp_input_spec *s = user_input(p, i);
    TP_CHECK(s != NULL, TP_ERR_INDEX, "user input %d out of range (the program has %d)", i,
             tp_program_num_user_inputs(p));
    io_info_begin(out, &s->arg);
    if (s->arg.kind != TP_ARGK_TENSOR) return TP_OK;
    const tp_tensor *t = input_tensor(p, s->arg.name);
    if (!t) return TP_OK;
    out->dtype = tp_tensor_dtype(t);
    out->ndim = tp_tensor_ndim(t);
    for (int d = 0; d < out->ndim; d++) {
        const tp_dim_rule *r = dim_rule(p, s->arg.name, d);
        if (r && r->kind == TP_DIM_SYMBOL) set_symbolic(p, &out->dims[d], r->symbol, 1, 0);
        else if (r && r->kind == TP_DIM_DERIVED) set_symbolic(p, &out->dims[d], r->symbol, r->scale, r->offset);
        else set_static(&out->dims[d], r && r->kind == TP_DIM_STATIC ? r->value : tp_tensor_size(t, d));
    }
    return TP_OK;
}

/* ---- outputs ---- */

enum { MAX_SYMBOLS = 16 };

typedef struct probe_set {
    const char *symbols[MAX_SYMBOLS]; /* root symbols of the user inputs */
    int64_t example[MAX_SYMBOLS];     /* their values at the example inputs (0 if unknown) */
    int n;
} probe_set;

/* Give every placeholder and get_attr node of g a meta val: user inputs
 * meta tensors with symbol k at value sym_value (others at the example),
 * state from the program's tensors. */
static tp_status set_input_metas(const tp_program *p, tp_graph *g, const probe_set *ps, int k, int64_t sym_value) {
    for (tp_node *n = tp_graph_first_node(g); n; n = tp_node_next(n)) {
        tp_node_kind kind = tp_node_get_kind(n);
        if (kind != TP_NODE_PLACEHOLDER && kind != TP_NODE_GET_ATTR) continue;
        const tp_signature *sig = tp_program_signature(p);
        int si = kind == TP_NODE_PLACEHOLDER ? tp_signature_find_input(sig, tp_node_name(n)) : -1;
        const tp_input_spec *s = si >= 0 ? tp_signature_input(sig, si) : NULL;
        const tp_tensor *t = NULL;
        tp_tensor *state = NULL;
        if (s && s->kind == TP_INPUT_USER_INPUT) {
            t = input_tensor(p, s->arg.name);
        } else {
            const char *target = s ? s->target : kind == TP_NODE_GET_ATTR ? tp_node_target(n) : NULL;
            if (target && tp_program_get_state(p, target, &state, NULL, NULL) == TP_OK) t = state;
        }
        if (!t) {
            if (s && s->kind == TP_INPUT_USER_INPUT && s->arg.kind == TP_ARGK_TENSOR)
                return tp_error(TP_ERR_MISSING, "user input '%s' has no recorded dtype and shape", s->arg.name);
            continue;
        }
        int64_t sizes[TP_MAX_DIMS];
        int nd = tp_tensor_ndim(t);
        for (int d = 0; d < nd; d++) {
            sizes[d] = tp_tensor_size(t, d);
            const tp_dim_rule *r = s && s->kind == TP_INPUT_USER_INPUT ? dim_rule(p, s->arg.name, d) : NULL;
            if (!r || r->kind == TP_DIM_STATIC || k < 0) continue;
            int j = 0;
            while (j < ps->n && strcmp(ps->symbols[j], r->symbol) != 0) j++;
            if (j != k) continue;
            int64_t scale = r->kind == TP_DIM_DERIVED ? r->scale : 1, offset = r->kind == TP_DIM_DERIVED ? r->offset : 0;
            sizes[d] = sym_value * scale + offset; /* in range: checked by the caller */
        }
        tp_tensor *m;
        TP_TRY(tp_tensor_meta(tp_tensor_dtype(t), nd, sizes, &m));
        tp_value v = tp_value_tensor(m);
        tp_status st = tp_node_set_meta_val(n, &v);
        tp_value_clear(&v);
        TP_TRY(st);
    }
    return TP_OK;
}

/* Output `name`'s meta tensor after inference with symbol k at sym_value
 * (k < 0: the example sizes). *out is a new reference or NULL. */
static tp_status infer_output(const tp_program *p, const char *name, const probe_set *ps, int k, int64_t sym_value,
                              tp_tensor **out) {
    *out = NULL;
    tp_graph *g;
    TP_TRY(tp_graph_copy(tp_program_graph(p), &g));
    tp_status st = set_input_metas(p, g, ps, k, sym_value);
    if (st == TP_OK) st = tp_graph_infer_meta(g);
    if (st == TP_OK) {
        const tp_node *n = tp_graph_find_node(g, name);
        const tp_value *v = n ? tp_node_meta_val(n) : NULL;
        if (v && v->kind == TP_VAL_TENSOR) *out = tp_tensor_retain(v->u.tensor);
    }
    tp_graph_free(g);
    return st;
}

static void collect_symbols(const tp_program *p, probe_set *ps) {
    ps->n = 0;
    for (int i = 0; i < tp_program_num_dim_rules(p); i++) {
        const tp_dim_rule *r = tp_program_dim_rule(p, i);
        if (r->kind == TP_DIM_STATIC || !r->symbol) continue;
        int j = 0;
        while (j < ps->n && strcmp(ps->symbols[j], r->symbol) != 0) j++;
        if (j < ps->n || ps->n == MAX_SYMBOLS) continue;
        ps->symbols[ps->n] = r->symbol;
        ps->example[ps->n] = 0;
        /* the example value: (example size - offset) / scale at the site */
        const tp_tensor *t = input_tensor(p, r->site.input);
        if (t && r->site.dim < tp_tensor_ndim(t)) {
            int64_t scale = r->kind == TP_DIM_DERIVED ? r->scale : 1, offset = r->kind == TP_DIM_DERIVED ? r->offset : 0;
            if (scale > 0) ps->example[ps->n] = (tp_tensor_size(t, r->site.dim) - offset) / scale;
        }
        ps->n++;
    }
}

/* Two probe values of symbol k other than its example, inside its range. */
static bool probe_values(const tp_program *p, const probe_set *ps, int k, int64_t v[2]) {
    const tp_range_constraint *rc = tp_program_find_range(p, ps->symbols[k]);
    int64_t lo = rc ? rc->min : 2, hi = rc ? rc->max : INT64_MAX, e = ps->example[k];
    if (lo < 2) lo = 2; /* sizes 0 and 1 specialise (broadcasting) */
    int n = 0;
    for (int64_t c = e + 1; c <= hi && n < 2 && c < e + 64; c++) v[n++] = c;
    for (int64_t c = e - 1; c >= lo && n < 2; c--) v[n++] = c;
    return n == 2;
}

tp_status tp_program_output_info(const tp_program *p, int i, tp_io_info *out) {
    TP_CHECK(p && out, TP_ERR_INVALID_ARG, "tp_program_output_info: program and out must not be NULL");
    const tp_output_spec *s = user_output(p, i);
    TP_CHECK(s != NULL, TP_ERR_INDEX, "user output %d out of range (the program has %d)", i,
             tp_program_num_user_outputs(p));
    io_info_begin(out, &s->arg);
    if (s->arg.kind != TP_ARGK_TENSOR) return TP_OK;
    probe_set ps;
    collect_symbols(p, &ps);
    tp_tensor *base;
    TP_TRY(infer_output(p, s->arg.name, &ps, -1, 0, &base));
    if (!base) return TP_OK; /* no inference possible (e.g. an op without a shape rule) */
    out->dtype = tp_tensor_dtype(base);
    out->ndim = tp_tensor_ndim(base);
    for (int d = 0; d < out->ndim; d++) set_static(&out->dims[d], tp_tensor_size(base, d));
    bool unknown[TP_MAX_DIMS] = {false};
    tp_status st = TP_OK;
    for (int k = 0; k < ps.n && st == TP_OK; k++) {
        int64_t v[2];
        tp_tensor *t[2] = {NULL, NULL};
        bool ok = probe_values(p, &ps, k, v);
        for (int j = 0; ok && j < 2 && st == TP_OK; j++) {
            st = infer_output(p, s->arg.name, &ps, k, v[j], &t[j]);
            ok = t[j] && tp_tensor_ndim(t[j]) == out->ndim;
        }
        for (int d = 0; st == TP_OK && d < out->ndim; d++) {
            if (!ok) {
                unknown[d] = true;
                continue;
            }
            int64_t s0 = tp_tensor_size(base, d), s1 = tp_tensor_size(t[0], d), s2 = tp_tensor_size(t[1], d);
            if (s0 == s1 && s0 == s2) continue; /* does not depend on this symbol */
            int64_t scale = (s1 - s0) / (v[0] - ps.example[k]), offset = s0 - scale * ps.example[k];
            bool affine = (s1 - s0) % (v[0] - ps.example[k]) == 0 && scale > 0 && s2 == scale * v[1] + offset;
            if (!affine || out->dims[d].symbol) unknown[d] = true; /* not affine, or a second symbol */
            else set_symbolic(p, &out->dims[d], ps.symbols[k], scale, offset);
        }
        tp_tensor_free(t[0]);
        tp_tensor_free(t[1]);
    }
    tp_tensor_free(base);
    for (int d = 0; d < out->ndim; d++)
        if (unknown[d]) {
            out->dims[d].size = -1;
            out->dims[d].symbol = NULL;
            out->dims[d].scale = out->dims[d].offset = 0;
            out->dims[d].min = 0;
            out->dims[d].max = INT64_MAX;
        }
    return st;
}
