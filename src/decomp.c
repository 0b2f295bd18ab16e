/*
 * decomp.c - decomposition tables and tp_program_run_decompositions:
 * rewriting composite ops (activations, norms, linear layers, ...) of an
 * exported program into simpler core ops, as tensorplay's
 * ExportedProgram.run_decompositions does.
 *
 * A table maps ops to rewrites (tp_decomp_fn). Running it copies the
 * program and, in rounds, offers every call node whose op has an entry to
 * its rewrite (insertion point just before the node); a returned node takes
 * over the node's uses (and its name in the signature) and the node is
 * erased; a declining rewrite leaves the node alone. Rounds repeat, so that
 * ops produced by one rewrite are decomposed in the next, until a round
 * changes nothing or DECOMP_MAX_ROUNDS passed. Dead code is then removed
 * and the result re-validated.
 *
 * The built-in rewrites emit ops that other built-ins may decompose further
 * (silu -> x * sigmoid(x) -> x * reciprocal(1 + exp(-x)) -> ...), so that a
 * table without, say, sigmoid keeps sigmoid as a primitive. Numerics: each
 * rewrite computes float16/bfloat16 in float32 (PyTorch's "opmath") and casts
 * the result back; integer inputs of ops with floating results are converted
 * first; log1p and expm1 use Kahan's exact-cancellation forms so that small
 * arguments keep full relative precision. Rewrites need the meta values
 * (dtype, shape) of the node and its tensor inputs; nodes without them are
 * left alone, as are configurations a rewrite does not cover (NaN clamp
 * bounds, training-mode batch_norm, dropout with train=True and p > 0, ...).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "program_impl.h"

#define DECOMP_MAX_ROUNDS 8
#define MAX_BOUND 64

/* ---- tables ------------------------------------------------------------- */

typedef struct decomp_entry {
    tp_decomp_fn fn; /* NULL: no entry */
    void *user;
} decomp_entry;

struct tp_decomp_table {
    decomp_entry entries[TP_OP_COUNT];
};

tp_status tp_decomp_table_new(tp_decomp_table **out) {
    TP_CHECK(out != NULL, TP_ERR_INVALID_ARG, "output pointer is NULL");
    tp_decomp_table *t = tp_calloc(1, sizeof *t);
    TP_CHECK(t != NULL, TP_ERR_NOMEM, "out of memory allocating a decomposition table");
    *out = t;
    return TP_OK;
}

tp_status tp_decomp_table_copy(const tp_decomp_table *t, tp_decomp_table **out) {
    TP_CHECK(t != NULL, TP_ERR_INVALID_ARG, "decomposition table is NULL");
    TP_TRY(tp_decomp_table_new(out));
    memcpy((*out)->entries, t->entries, sizeof t->entries);
    return TP_OK;
}

void tp_decomp_table_free(tp_decomp_table *t) { tp_free(t); }

static tp_status check_op(const tp_decomp_table *t, tp_op op) {
    TP_CHECK(t != NULL, TP_ERR_INVALID_ARG, "decomposition table is NULL");
    TP_CHECK((unsigned)op < TP_OP_COUNT, TP_ERR_INVALID_ARG, "invalid op %d", (int)op);
    return TP_OK;
}

tp_status tp_decomp_table_set(tp_decomp_table *t, tp_op op, tp_decomp_fn fn, void *user) {
    TP_TRY(check_op(t, op));
    TP_CHECK(fn != NULL, TP_ERR_INVALID_ARG, "decomposition for op '%s' is NULL (use tp_decomp_table_remove)",
             tp_op_name(op));
    t->entries[op] = (decomp_entry){fn, user};
    return TP_OK;
}

tp_status tp_decomp_table_remove(tp_decomp_table *t, tp_op op) {
    TP_TRY(check_op(t, op));
    TP_CHECK(t->entries[op].fn != NULL, TP_ERR_NOT_FOUND, "no decomposition for op '%s'", tp_op_name(op));
    t->entries[op] = (decomp_entry){NULL, NULL};
    return TP_OK;
}

bool tp_decomp_table_has(const tp_decomp_table *t, tp_op op) {
    return t && (unsigned)op < TP_OP_COUNT && t->entries[op].fn != NULL;
}

/* ---- rewrite helpers ------------------------------------------------------
 * A rewrite binds the node's arguments (defaults filled), emits nodes at the
 * insertion point and finishes with the result cast back to the node's
 * dtype. Emitting is "sticky": after a failure every further emit returns
 * NULL and rw_finish reports the first error. */

typedef struct rewrite {
    tp_graph *g;
    tp_node *node;
    tp_status st;
    int n_bound;
    tp_value bound[MAX_BOUND];
    tp_dtype out_dtype; /* the node's dtype (its meta val) */
    tp_dtype compute;   /* computation dtype: out_dtype, float32 for halves when upcasting */
} rewrite;

static const tp_tensor *node_meta(const tp_node *n) {
    const tp_value *m = n ? tp_node_meta_val(n) : NULL;
    return m && m->kind == TP_VAL_TENSOR ? m->u.tensor : NULL;
}

static bool is_half(tp_dtype d) { return d == TP_FLOAT16 || d == TP_BFLOAT16; }

static void rw_clear(rewrite *r) {
    for (int i = 0; i < r->n_bound; i++) tp_value_clear(&r->bound[i]);
    r->n_bound = 0;
}

/* Bind the node's arguments. False when they do not bind, when the node's
 * meta val is not one tensor or a tensor input has no meta: the rewrite
 * then returns r->st (TP_OK: declined; TP_ERR_NOMEM when binding ran out
 * of memory). upcast: compute float16/bfloat16 in float32. */
static bool rw_begin(rewrite *r, tp_graph *g, tp_node *node, bool upcast) {
    r->g = g;
    r->node = node;
    r->st = TP_OK;
    r->n_bound = 0;
    tp_op op = tp_node_op(node);
    const tp_schema *s = tp_op_schema(op);
    if (!s || s->n_args > MAX_BOUND) return false;
    const tp_value *args = tp_node_args(node);
    tp_status st = tp_op_bind(op, tp_value_at(args, 0), (int)tp_value_len(args), tp_node_kwargs(node), r->bound);
    if (st != TP_OK) {
        if (st == TP_ERR_NOMEM) r->st = st; /* a failure, not a decline */
        return false;
    }
    r->n_bound = s->n_args;
    const tp_tensor *m = node_meta(node);
    bool ok = m != NULL;
    for (int i = 0; ok && i < r->n_bound; i++)
        if (r->bound[i].kind == TP_VAL_NODE) ok = node_meta(r->bound[i].u.node) != NULL;
    if (!ok) {
        rw_clear(r);
        return false;
    }
    r->out_dtype = tp_tensor_dtype(m);
    r->compute = upcast && is_half(r->out_dtype) ? TP_FLOAT32 : r->out_dtype;
    return true;
}

static tp_status rw_decline(rewrite *r) {
    rw_clear(r);
    return TP_OK;
}

/* Emit op(args..., key=kwval) at the insertion point. */
static tp_node *emit_kw(rewrite *r, tp_op op, const tp_value *args, int n, const char *key, const tp_value *kwval) {
    if (r->st != TP_OK) return NULL;
    tp_value tuple = tp_value_none(), kwargs = tp_value_none(), item = tp_value_none();
    tp_node *out = NULL;
    tp_status st = tp_value_tuple(n, &tuple);
    for (int i = 0; st == TP_OK && i < n; i++) {
        st = tp_value_copy(&args[i], &item);
        if (st == TP_OK) st = tp_value_seq_set(&tuple, i, &item);
    }
    if (st == TP_OK && key) {
        st = tp_value_dict(&kwargs);
        if (st == TP_OK) st = tp_value_copy(kwval, &item);
        if (st == TP_OK) st = tp_value_dict_set(&kwargs, key, &item);
    }
    if (st == TP_OK) st = tp_graph_call_function(r->g, op, &tuple, key ? &kwargs : NULL, &out);
    tp_value_clear(&item);
    tp_value_clear(&tuple);
    tp_value_clear(&kwargs);
    r->st = st;
    return st == TP_OK ? out : NULL;
}

#define VALS(...) (const tp_value[]){__VA_ARGS__}, (int)(sizeof((const tp_value[]){__VA_ARGS__}) / sizeof(tp_value))
#define EMIT(r, op, ...) emit_kw((r), (op), VALS(__VA_ARGS__), NULL, NULL)
#define NV(n) tp_value_node(n)
#define FV(x) tp_value_float(x)
#define IV(x) tp_value_int(x)
#define BV(x) tp_value_bool(x)

static tp_node *op1(rewrite *r, tp_op op, tp_node *x) { return EMIT(r, op, NV(x)); }
static tp_node *op2(rewrite *r, tp_op op, tp_node *a, tp_node *b) { return EMIT(r, op, NV(a), NV(b)); }
static tp_node *op2f(rewrite *r, tp_op op, tp_node *a, double s) { return EMIT(r, op, NV(a), FV(s)); }
/* op(a, v) with a scalar value as bound (int stays int). */
static tp_node *op2v(rewrite *r, tp_op op, tp_node *a, const tp_value *v) { return EMIT(r, op, NV(a), *v); }

/* x converted to dtype (x itself if it already has it or its dtype is unknown). */
static tp_node *cast(rewrite *r, tp_node *x, tp_dtype dtype) {
    if (r->st != TP_OK) return NULL;
    const tp_tensor *m = node_meta(x);
    if (!m || tp_tensor_dtype(m) == dtype) return x;
    return EMIT(r, TP_OP_TO, NV(x), tp_value_dtype(dtype));
}

/* Tensor argument i (a node), converted to the computation dtype when it is
 * a half (upcasting) or an integer/bool feeding a floating computation. */
static tp_node *rw_input(rewrite *r, int i) {
    if (r->st != TP_OK) return NULL;
    const tp_value *v = &r->bound[i];
    if (v->kind != TP_VAL_NODE) {
        r->st = tp_error(TP_ERR_TYPE, "argument %d must be a node, not %s", i, tp_value_kind_name(v->kind));
        return NULL;
    }
    tp_node *x = v->u.node;
    tp_dtype d = tp_tensor_dtype(node_meta(x));
    bool convert = d != r->compute && tp_dtype_is_float(r->compute) && (is_half(d) || !tp_dtype_is_float(d));
    return convert ? cast(r, x, r->compute) : x;
}

/* Optional tensor argument i: NULL for None. */
static tp_node *rw_opt_input(rewrite *r, int i) {
    return r->bound[i].kind == TP_VAL_NONE ? NULL : rw_input(r, i);
}

/* Set *replacement to result cast to the node's dtype. */
static tp_status rw_finish(rewrite *r, tp_node *result, tp_value *replacement) {
    if (r->st == TP_OK) result = cast(r, result, r->out_dtype);
    if (r->st == TP_OK) *replacement = tp_value_node(result);
    rw_clear(r);
    return r->st;
}

static double arg_f64(const rewrite *r, int i) { return tp_value_as_f64(&r->bound[i]); }

/* A scalar argument usable as a graph constant: bool becomes int (alpha=True
 * is 1, and add rejects boolean alphas for non-bool results). */
static tp_value scalar_arg(const rewrite *r, int i) {
    const tp_value *v = &r->bound[i];
    return v->kind == TP_VAL_BOOL ? tp_value_int(v->u.b) : *v;
}

/* ---- activations ------------------------------------------------------------ */

/* sigmoid(x) = reciprocal(1 + exp(-x)) */
static tp_status decomp_sigmoid(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, true)) return r.st;
    tp_node *x = rw_input(&r, 0);
    tp_node *nx = op1(&r, TP_OP_NEG, x);
    tp_node *e = op1(&r, TP_OP_EXP, nx);
    tp_node *d = op2f(&r, TP_OP_ADD, e, 1.0);
    return rw_finish(&r, op1(&r, TP_OP_RECIPROCAL, d), replacement);
}

/* silu(x) = x * sigmoid(x) */
static tp_status decomp_silu(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, true)) return r.st;
    tp_node *x = rw_input(&r, 0);
    tp_node *s = op1(&r, TP_OP_SIGMOID, x);
    return rw_finish(&r, op2(&r, TP_OP_MUL, x, s), replacement);
}

/* mish(x) = x * tanh(softplus(x)) */
static tp_status decomp_mish(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, true)) return r.st;
    tp_node *x = rw_input(&r, 0);
    tp_node *sp = op1(&r, TP_OP_SOFTPLUS, x);
    tp_node *t = op1(&r, TP_OP_TANH, sp);
    return rw_finish(&r, op2(&r, TP_OP_MUL, x, t), replacement);
}

/* softplus(x, beta, threshold) = where(x*beta > threshold, x, log1p(exp(x*beta)) / beta) */
static tp_status decomp_softplus(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, true)) return r.st;
    double beta = arg_f64(&r, 1), threshold = arg_f64(&r, 2);
    tp_node *x = rw_input(&r, 0);
    tp_node *xb = beta == 1.0 ? x : op2f(&r, TP_OP_MUL, x, beta);
    tp_node *big = op2f(&r, TP_OP_GT, xb, threshold);
    tp_node *e = op1(&r, TP_OP_EXP, xb);
    tp_node *soft = op1(&r, TP_OP_LOG1P, e);
    if (beta != 1.0) soft = op2f(&r, TP_OP_DIV, soft, beta);
    return rw_finish(&r, EMIT(&r, TP_OP_WHERE, NV(big), NV(x), NV(soft)), replacement);
}

/* gelu(x) = 0.5 * x * (1 + erf(x / sqrt(2)));
 * tanh form: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) */
static tp_status decomp_gelu(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, true)) return r.st;
    const char *mode = r.bound[1].kind == TP_VAL_STR ? r.bound[1].u.s : "";
    bool use_tanh = strcmp(mode, "tanh") == 0;
    if (!use_tanh && strcmp(mode, "none") != 0) return rw_decline(&r);
    tp_node *x = rw_input(&r, 0), *inner;
    if (use_tanh) {
        const double beta = M_SQRT2 * M_2_SQRTPI * 0.5, kappa = 0.044715;
        tp_node *x2 = op2(&r, TP_OP_MUL, x, x);
        tp_node *x3 = op2(&r, TP_OP_MUL, x2, x);
        tp_node *kx3 = op2f(&r, TP_OP_MUL, x3, kappa);
        tp_node *sum = op2(&r, TP_OP_ADD, x, kx3);
        tp_node *scaled = op2f(&r, TP_OP_MUL, sum, beta);
        inner = op1(&r, TP_OP_TANH, scaled);
    } else {
        tp_node *scaled = op2f(&r, TP_OP_MUL, x, M_SQRT1_2);
        inner = op1(&r, TP_OP_ERF, scaled);
    }
    tp_node *half_x = op2f(&r, TP_OP_MUL, x, 0.5);
    tp_node *one_plus = op2f(&r, TP_OP_ADD, inner, 1.0);
    return rw_finish(&r, op2(&r, TP_OP_MUL, half_x, one_plus), replacement);
}

/* elu(x, alpha, scale, input_scale) =
 *   where(x > 0, x * scale, expm1(x * input_scale) * alpha * scale) */
static tp_status decomp_elu(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, true)) return r.st;
    double alpha = arg_f64(&r, 1), scale = arg_f64(&r, 2), input_scale = arg_f64(&r, 3);
    tp_node *x = rw_input(&r, 0);
    tp_node *pos = scale == 1.0 ? x : op2f(&r, TP_OP_MUL, x, scale);
    tp_node *xi = input_scale == 1.0 ? x : op2f(&r, TP_OP_MUL, x, input_scale);
    tp_node *neg = op1(&r, TP_OP_EXPM1, xi);
    if (alpha * scale != 1.0) neg = op2f(&r, TP_OP_MUL, neg, alpha * scale);
    tp_node *is_pos = op2f(&r, TP_OP_GT, x, 0.0);
    return rw_finish(&r, EMIT(&r, TP_OP_WHERE, NV(is_pos), NV(pos), NV(neg)), replacement);
}

/* selu(x) = elu(x, alpha=1.6732..., scale=1.0507...) */
static tp_status decomp_selu(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, false)) return r.st;
    tp_node *x = rw_input(&r, 0);
    const double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
    tp_node *y = EMIT(&r, TP_OP_ELU, NV(x), FV(alpha), FV(scale));
    return rw_finish(&r, y, replacement);
}

/* leaky_relu(x, slope) = where(x > 0, x, x * slope) */
static tp_status decomp_leaky_relu(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, true)) return r.st;
    tp_node *x = rw_input(&r, 0);
    tp_node *is_pos = op2f(&r, TP_OP_GT, x, 0.0);
    tp_value slope = scalar_arg(&r, 1);
    tp_node *neg = op2v(&r, TP_OP_MUL, x, &slope);
    return rw_finish(&r, EMIT(&r, TP_OP_WHERE, NV(is_pos), NV(x), NV(neg)), replacement);
}

/* relu6(x) = hardtanh(x, 0, 6) */
static tp_status decomp_relu6(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, false)) return r.st;
    tp_node *x = rw_input(&r, 0);
    return rw_finish(&r, EMIT(&r, TP_OP_HARDTANH, NV(x), IV(0), IV(6)), replacement);
}

/* hardtanh(x, min_val, max_val) = clamp(x, min_val, max_val); integer
 * tensors use the limits truncated to integers, as the op does. */
static tp_status decomp_hardtanh(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, false)) return r.st;
    double lo = arg_f64(&r, 1), hi = arg_f64(&r, 2);
    tp_node *x = rw_input(&r, 0), *y;
    if (tp_dtype_is_float(r.out_dtype)) {
        y = EMIT(&r, TP_OP_CLAMP, NV(x), FV(lo), FV(hi));
    } else {
        if (!isfinite(lo) || !isfinite(hi) || fabs(lo) >= 9.2e18 || fabs(hi) >= 9.2e18) return rw_decline(&r);
        y = EMIT(&r, TP_OP_CLAMP, NV(x), IV((int64_t)trunc(lo)), IV((int64_t)trunc(hi)));
    }
    return rw_finish(&r, y, replacement);
}

/* Does integer v fit dtype (so that a comparison with it does not wrap)? */
static bool int_fits(int64_t v, tp_dtype dtype) {
    switch (dtype) {
    case TP_INT8: return v >= INT8_MIN && v <= INT8_MAX;
    case TP_UINT8: return v >= 0 && v <= UINT8_MAX;
    case TP_INT16: return v >= INT16_MIN && v <= INT16_MAX;
    case TP_INT32: return v >= INT32_MIN && v <= INT32_MAX;
    case TP_BOOL: return v == 0 || v == 1;
    default: return true;
    }
}

/* clamp(x, min, max): tensor bounds -> maximum / minimum (NaN-propagating);
 * number bounds -> where(x < min, min, x) and where(x > max, max, x).
 * Declines NaN number bounds and integer bounds outside an integer
 * tensor's range. */
static tp_status decomp_clamp(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, false)) return r.st;
    if (r.bound[0].kind != TP_VAL_NODE) return rw_decline(&r);
    /* check both bounds before emitting anything */
    tp_dtype x_dtype = tp_tensor_dtype(node_meta(r.bound[0].u.node));
    bool int_compute = !tp_dtype_is_float(r.compute) && !tp_dtype_is_float(x_dtype);
    for (int i = 1; i <= 2; i++) {
        const tp_value *b = &r.bound[i];
        if (b->kind == TP_VAL_NONE || b->kind == TP_VAL_NODE) continue;
        if (!tp_value_is_number(b) || (b->kind == TP_VAL_FLOAT && isnan(b->u.f))) return rw_decline(&r);
        if (int_compute && b->kind == TP_VAL_INT && !int_fits(b->u.i, x_dtype)) return rw_decline(&r);
    }
    tp_node *y = rw_input(&r, 0);
    for (int i = 1; i <= 2; i++) {
        const tp_value *b = &r.bound[i];
        bool is_min = i == 1;
        if (b->kind == TP_VAL_NONE) continue;
        if (b->kind == TP_VAL_NODE) {
            y = op2(&r, is_min ? TP_OP_MAXIMUM : TP_OP_MINIMUM, y, b->u.node);
            continue;
        }
        tp_value bv = scalar_arg(&r, i);
        tp_node *out_of_range = op2v(&r, is_min ? TP_OP_LT : TP_OP_GT, y, &bv);
        y = EMIT(&r, TP_OP_WHERE, NV(out_of_range), bv, NV(y));
    }
    return rw_finish(&r, y, replacement);
}

/* hardsigmoid(x) = clamp(x + 3, 0, 6) / 6 */
static tp_status decomp_hardsigmoid(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, true)) return r.st;
    tp_node *x = rw_input(&r, 0);
    tp_node *shifted = op2f(&r, TP_OP_ADD, x, 3.0);
    tp_node *clamped = EMIT(&r, TP_OP_CLAMP, NV(shifted), FV(0.0), FV(6.0));
    return rw_finish(&r, op2f(&r, TP_OP_DIV, clamped, 6.0), replacement);
}

/* hardswish(x) = x * clamp(x + 3, 0, 6) / 6 */
static tp_status decomp_hardswish(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, true)) return r.st;
    tp_node *x = rw_input(&r, 0);
    tp_node *shifted = op2f(&r, TP_OP_ADD, x, 3.0);
    tp_node *clamped = EMIT(&r, TP_OP_CLAMP, NV(shifted), FV(0.0), FV(6.0));
    tp_node *prod = op2(&r, TP_OP_MUL, x, clamped);
    return rw_finish(&r, op2f(&r, TP_OP_DIV, prod, 6.0), replacement);
}

/* ---- elementwise math -------------------------------------------------------- */

/* log1p(x) with u = 1 + x, d = u - 1 (exact):
 *   where(d == 0, x, where(isinf(d), log(u), log(u) * (x / d)))
 * (the rounding error of u cancels in x / d, so small x keep full
 * precision; d == 0 means |x| below half an ulp of 1, where log1p(x) = x). */
static tp_status decomp_log1p(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, true)) return r.st;
    tp_node *x = rw_input(&r, 0);
    tp_node *u = op2f(&r, TP_OP_ADD, x, 1.0);
    tp_node *d = op2f(&r, TP_OP_SUB, u, 1.0);
    tp_node *lu = op1(&r, TP_OP_LOG, u);
    tp_node *ratio = op2(&r, TP_OP_DIV, x, d);
    tp_node *general = op2(&r, TP_OP_MUL, lu, ratio);
    tp_node *tiny = op2f(&r, TP_OP_EQ, d, 0.0);
    tp_node *inf = op1(&r, TP_OP_ISINF, d);
    tp_node *not_tiny = EMIT(&r, TP_OP_WHERE, NV(inf), NV(lu), NV(general));
    return rw_finish(&r, EMIT(&r, TP_OP_WHERE, NV(tiny), NV(x), NV(not_tiny)), replacement);
}

/* expm1(x) with u = exp(x), d = u - 1, l = log(u) (Kahan):
 *   where(d == 0, x, where(d == -1 or isinf(d), d, d * (x / l)))
 * (d == -1: u is below half an ulp of 1, possibly subnormal or 0, where
 * x / l is inaccurate but -1 is the rounded result; d == inf: overflow). */
static tp_status decomp_expm1(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, true)) return r.st;
    tp_node *x = rw_input(&r, 0);
    tp_node *u = op1(&r, TP_OP_EXP, x);
    tp_node *d = op2f(&r, TP_OP_SUB, u, 1.0);
    tp_node *lu = op1(&r, TP_OP_LOG, u);
    tp_node *ratio = op2(&r, TP_OP_DIV, x, lu);
    tp_node *general = op2(&r, TP_OP_MUL, d, ratio);
    tp_node *tiny = op2f(&r, TP_OP_EQ, d, 0.0);
    tp_node *minus_one = op2f(&r, TP_OP_EQ, d, -1.0);
    tp_node *inf = op1(&r, TP_OP_ISINF, d);
    tp_node *saturated = op2(&r, TP_OP_LOGICAL_OR, minus_one, inf);
    tp_node *not_tiny = EMIT(&r, TP_OP_WHERE, NV(saturated), NV(d), NV(general));
    return rw_finish(&r, EMIT(&r, TP_OP_WHERE, NV(tiny), NV(x), NV(not_tiny)), replacement);
}

/* reciprocal(x) = full_like(x, 1) / x */
static tp_status decomp_reciprocal(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, false)) return r.st;
    tp_node *x = rw_input(&r, 0);
    tp_node *one = EMIT(&r, TP_OP_FULL_LIKE, NV(x), FV(1.0));
    return rw_finish(&r, op2(&r, TP_OP_DIV, one, x), replacement);
}

/* square(x) = x * x (bool: cast to int64 at the end, as square gives) */
static tp_status decomp_square(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, false)) return r.st;
    tp_node *x = rw_input(&r, 0);
    return rw_finish(&r, op2(&r, TP_OP_MUL, x, x), replacement);
}

/* lerp(self, end, weight) in PyTorch's stable form:
 *   weight < 0.5 ? self + weight * (end - self) : end - (end - self) * (1 - weight)
 * (a number weight picks the branch here; a tensor weight uses where, with
 * end + (end - self) * (weight - 1) for the second branch). */
static tp_status decomp_lerp(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, true)) return r.st;
    tp_node *self = rw_input(&r, 0);
    tp_node *end = rw_input(&r, 1);
    tp_node *diff = op2(&r, TP_OP_SUB, end, self), *y;
    if (r.bound[2].kind == TP_VAL_NODE) {
        tp_node *w = rw_input(&r, 2);
        tp_node *low = op2f(&r, TP_OP_LT, w, 0.5);
        tp_node *step = op2(&r, TP_OP_MUL, w, diff);
        tp_node *from_self = op2(&r, TP_OP_ADD, self, step);
        tp_node *w_minus_1 = op2f(&r, TP_OP_SUB, w, 1.0);
        tp_node *back = op2(&r, TP_OP_MUL, diff, w_minus_1);
        tp_node *from_end = op2(&r, TP_OP_ADD, end, back);
        y = EMIT(&r, TP_OP_WHERE, NV(low), NV(from_self), NV(from_end));
    } else {
        double w = arg_f64(&r, 2);
        if (w < 0.5) {
            tp_node *step = op2f(&r, TP_OP_MUL, diff, w);
            y = op2(&r, TP_OP_ADD, self, step);
        } else {
            tp_node *back = op2f(&r, TP_OP_MUL, diff, 1.0 - w);
            y = op2(&r, TP_OP_SUB, end, back);
        }
    }
    return rw_finish(&r, y, replacement);
}

/* addcmul / addcdiv: self + value * (t1 op t2) as add(self, t1 op t2, alpha=value) */
static tp_status decomp_addc(tp_graph *g, tp_node *node, tp_value *replacement, tp_op op) {
    rewrite r;
    if (!rw_begin(&r, g, node, true)) return r.st;
    /* integer results take integer values only (add's alpha rule) */
    if (!tp_dtype_is_float(r.compute) && r.bound[3].kind == TP_VAL_FLOAT) return rw_decline(&r);
    tp_node *self = rw_input(&r, 0);
    tp_node *t1 = rw_input(&r, 1);
    tp_node *t2 = rw_input(&r, 2);
    tp_node *prod = op2(&r, op, t1, t2), *y;
    tp_value value = scalar_arg(&r, 3);
    if (tp_value_as_f64(&value) == 1.0) y = op2(&r, TP_OP_ADD, self, prod);
    else y = emit_kw(&r, TP_OP_ADD, VALS(NV(self), NV(prod)), "alpha", &value);
    return rw_finish(&r, y, replacement);
}

static tp_status decomp_addcmul(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    return decomp_addc(g, node, replacement, TP_OP_MUL);
}

static tp_status decomp_addcdiv(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    return decomp_addc(g, node, replacement, TP_OP_DIV);
}

/* ---- linear algebra --------------------------------------------------------- */

/* linear(x, w, b) = matmul(x, transpose(w, 0, 1)) + b (a 1-D w is used as is) */
static tp_status decomp_linear(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, false)) return r.st;
    tp_node *x = rw_input(&r, 0);
    tp_node *w = rw_input(&r, 1);
    tp_node *b = rw_opt_input(&r, 2);
    int w_ndim = w ? tp_tensor_ndim(node_meta(w)) : 0;
    tp_node *wt = w_ndim == 2 ? EMIT(&r, TP_OP_TRANSPOSE, NV(w), IV(0), IV(1)) : w;
    tp_node *y = op2(&r, TP_OP_MATMUL, x, wt);
    if (b) y = op2(&r, TP_OP_ADD, y, b);
    return rw_finish(&r, y, replacement);
}

/* addmm(self, m1, m2, beta, alpha) = beta * self + alpha * mm(m1, m2);
 * beta == 0 ignores self (NaN in it does not propagate), as PyTorch does;
 * integer dtypes truncate beta and alpha, as the op does. */
static tp_status decomp_addmm(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, false)) return r.st;
    bool is_float = tp_dtype_is_float(r.out_dtype);
    tp_value beta = is_float ? FV(arg_f64(&r, 3)) : IV(tp_value_as_i64(&r.bound[3]));
    tp_value alpha = is_float ? FV(arg_f64(&r, 4)) : IV(tp_value_as_i64(&r.bound[4]));
    tp_node *self = rw_input(&r, 0);
    tp_node *m1 = rw_input(&r, 1);
    tp_node *m2 = rw_input(&r, 2);
    tp_node *y = op2(&r, TP_OP_MM, m1, m2);
    if (tp_value_as_f64(&alpha) != 1.0) y = op2v(&r, TP_OP_MUL, y, &alpha);
    if (tp_value_as_f64(&beta) == 1.0) y = op2(&r, TP_OP_ADD, y, self);
    else if (tp_value_as_f64(&beta) != 0.0) y = emit_kw(&r, TP_OP_ADD, VALS(NV(y), NV(self)), "alpha", &beta);
    return rw_finish(&r, y, replacement);
}

/* ---- softmax ------------------------------------------------------------------ */

/* softmax(x, dim) = exp(x - amax(x, dim)) / sum(exp(x - amax(x, dim)), dim);
 * log_softmax(x, dim) = (x - m) - log(sum(exp(x - m), dim)); dtype= converts
 * the input first. Declined for empty inputs (amax has no identity). */
static tp_status decomp_softmax_common(tp_graph *g, tp_node *node, tp_value *replacement, bool log_space) {
    rewrite r;
    if (!rw_begin(&r, g, node, true)) return r.st;
    if (r.bound[0].kind != TP_VAL_NODE || tp_tensor_numel(node_meta(r.bound[0].u.node)) == 0)
        return rw_decline(&r);
    int64_t dim = tp_value_as_i64(&r.bound[1]);
    tp_node *x = r.bound[0].u.node;
    if (r.bound[2].kind == TP_VAL_DTYPE) x = cast(&r, x, r.bound[2].u.dtype);
    x = cast(&r, x, r.compute);
    tp_value dims = tp_value_none();
    if (r.st == TP_OK) r.st = tp_value_int_list(&dim, 1, &dims);
    tp_node *m = EMIT(&r, TP_OP_AMAX, NV(x), dims, BV(true));
    tp_node *shifted = op2(&r, TP_OP_SUB, x, m);
    tp_node *e = op1(&r, TP_OP_EXP, shifted);
    tp_node *s = EMIT(&r, TP_OP_SUM, NV(e), dims, BV(true)), *y;
    if (log_space) {
        tp_node *ls = op1(&r, TP_OP_LOG, s);
        y = op2(&r, TP_OP_SUB, shifted, ls);
    } else {
        y = op2(&r, TP_OP_DIV, e, s);
    }
    tp_value_clear(&dims);
    return rw_finish(&r, y, replacement);
}

static tp_status decomp_softmax(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    return decomp_softmax_common(g, node, replacement, false);
}

static tp_status decomp_log_softmax(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    return decomp_softmax_common(g, node, replacement, true);
}

/* ---- normalisation ------------------------------------------------------------ */

/* layer_norm(x, shape, w, b, eps) over the last len(shape) dims:
 *   (x - mean) * rsqrt(mean((x - mean)^2) + eps) * w + b */
static tp_status decomp_layer_norm(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    rewrite r;
    if (!rw_begin(&r, g, node, true)) return r.st;
    int64_t k = r.bound[1].kind == TP_VAL_INT ? 1 : tp_value_len(&r.bound[1]);
    if (k < 1 || k > TP_MAX_DIMS) return rw_decline(&r);
    int64_t dims_v[TP_MAX_DIMS];
    for (int64_t i = 0; i < k; i++) dims_v[i] = i - k;
    double eps = arg_f64(&r, 4);
    tp_value dims = tp_value_none();
    r.st = tp_value_int_list(dims_v, k, &dims);
    tp_node *x = rw_input(&r, 0);
    tp_node *w = rw_opt_input(&r, 2);
    tp_node *b = rw_opt_input(&r, 3);
    tp_node *mean = EMIT(&r, TP_OP_MEAN, NV(x), dims, BV(true));
    tp_node *centered = op2(&r, TP_OP_SUB, x, mean);
    tp_node *sq = op2(&r, TP_OP_MUL, centered, centered);
    tp_node *var = EMIT(&r, TP_OP_MEAN, NV(sq), dims, BV(true));
    tp_node *var_eps = op2f(&r, TP_OP_ADD, var, eps);
    tp_node *rstd = op1(&r, TP_OP_RSQRT, var_eps);
    tp_node *y = op2(&r, TP_OP_MUL, centered, rstd);
    if (w) y = op2(&r, TP_OP_MUL, y, w);
    if (b) y = op2(&r, TP_OP_ADD, y, b);
    tp_value_clear(&dims);
    return rw_finish(&r, y, replacement);
}

/* batch_norm in inference mode, per-channel vectors reshaped to [C, 1, ...]:
 *   (x - running_mean) * rsqrt(running_var + eps) * w + b
 * Declined when training=True. */
static tp_status decomp_batch_norm(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    enum { INPUT, MEAN, VAR, WEIGHT, BIAS, TRAINING, MOMENTUM, EPS };
    rewrite r;
    if (!rw_begin(&r, g, node, true)) return r.st;
    const tp_tensor *xm = r.bound[INPUT].kind == TP_VAL_NODE ? node_meta(r.bound[INPUT].u.node) : NULL;
    if ((r.bound[TRAINING].kind == TP_VAL_BOOL && r.bound[TRAINING].u.b) || r.bound[MEAN].kind != TP_VAL_NODE ||
        r.bound[VAR].kind != TP_VAL_NODE || !xm || tp_tensor_ndim(xm) < 2)
        return rw_decline(&r);
    int ndim = tp_tensor_ndim(xm);
    int64_t shape_v[TP_MAX_DIMS];
    shape_v[0] = -1;
    for (int d = 1; d < ndim - 1; d++) shape_v[d] = 1;
    tp_value shape = tp_value_none();
    r.st = tp_value_int_list(shape_v, ndim - 1, &shape);
    double eps = arg_f64(&r, EPS);
    tp_node *x = rw_input(&r, INPUT), *params[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < 4; i++) {
        params[i] = rw_opt_input(&r, MEAN + i);
        if (params[i] && ndim > 2) params[i] = EMIT(&r, TP_OP_RESHAPE, NV(params[i]), shape);
    }
    tp_node *centered = op2(&r, TP_OP_SUB, x, params[0]);
    tp_node *var_eps = op2f(&r, TP_OP_ADD, params[1], eps);
    tp_node *invstd = op1(&r, TP_OP_RSQRT, var_eps);
    tp_node *y = op2(&r, TP_OP_MUL, centered, invstd);
    if (params[2]) y = op2(&r, TP_OP_MUL, y, params[2]);
    if (params[3]) y = op2(&r, TP_OP_ADD, y, params[3]);
    tp_value_clear(&shape);
    return rw_finish(&r, y, replacement);
}

/* ---- reductions --------------------------------------------------------------- */

/* var(x, dim, correction, keepdim) = sum((x - mean(x, dim))^2, dim) / max(N - correction, 0);
 * std = sqrt(var). N is the number of reduced elements (from the meta shape). */
static tp_status decomp_var_std(tp_graph *g, tp_node *node, tp_value *replacement, bool is_std) {
    enum { SELF, DIM, CORRECTION, KEEPDIM, UNBIASED };
    rewrite r;
    if (!rw_begin(&r, g, node, true)) return r.st;
    bool has_corr = r.bound[CORRECTION].kind != TP_VAL_NONE, has_unbiased = r.bound[UNBIASED].kind != TP_VAL_NONE;
    const tp_tensor *xm = r.bound[SELF].kind == TP_VAL_NODE ? node_meta(r.bound[SELF].u.node) : NULL;
    if ((has_corr && has_unbiased) || !xm) return rw_decline(&r);
    double correction = has_corr ? arg_f64(&r, CORRECTION) : has_unbiased ? (r.bound[UNBIASED].u.b ? 1.0 : 0.0) : 1.0;
    /* the number of reduced elements */
    const tp_value *dim = &r.bound[DIM];
    int ndim = tp_tensor_ndim(xm);
    double count = 1.0;
    if (tp_value_len(dim) == 0) {
        count = (double)tp_tensor_numel(xm);
    } else {
        bool seen[TP_MAX_DIMS] = {false};
        for (int64_t i = 0; i < tp_value_len(dim); i++) {
            const tp_value *item = tp_value_at(dim, i);
            int d;
            if (item->kind != TP_VAL_INT || tp__wrap_dim(item->u.i, ndim, &d) != TP_OK || (ndim > 0 && seen[d])) {
                tp_clear_error();
                return rw_decline(&r);
            }
            if (ndim > 0) {
                seen[d] = true;
                count *= (double)tp_tensor_sizes(xm)[d];
            }
        }
    }
    double divisor = count - correction > 0.0 ? count - correction : 0.0;
    bool keepdim = r.bound[KEEPDIM].kind == TP_VAL_BOOL && r.bound[KEEPDIM].u.b;
    tp_node *x = rw_input(&r, SELF);
    tp_node *mean = EMIT(&r, TP_OP_MEAN, NV(x), *dim, BV(true));
    tp_node *centered = op2(&r, TP_OP_SUB, x, mean);
    tp_node *sq = op2(&r, TP_OP_MUL, centered, centered);
    tp_node *ss = EMIT(&r, TP_OP_SUM, NV(sq), *dim, BV(keepdim));
    tp_node *y = op2f(&r, TP_OP_DIV, ss, divisor);
    if (is_std) y = op1(&r, TP_OP_SQRT, y);
    return rw_finish(&r, y, replacement);
}

static tp_status decomp_var(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    return decomp_var_std(g, node, replacement, false);
}

static tp_status decomp_std(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    return decomp_var_std(g, node, replacement, true);
}

/* ---- dropout -------------------------------------------------------------------- */

/* dropout(x, p, train) with train=False (or p == 0) is the identity: users
 * consume x. Declined when it draws random numbers. */
static tp_status decomp_dropout(tp_graph *g, tp_node *node, void *user, tp_value *replacement) {
    tp_value bound[3];
    const tp_value *args = tp_node_args(node);
    tp_status st =
        tp_op_bind(TP_OP_DROPOUT, tp_value_at(args, 0), (int)tp_value_len(args), tp_node_kwargs(node), bound);
    if (st != TP_OK) return st == TP_ERR_NOMEM ? st : TP_OK; /* arguments that do not bind: declined */
    bool train = bound[2].kind == TP_VAL_BOOL && bound[2].u.b;
    bool identity = (!train || tp_value_as_f64(&bound[1]) == 0.0) && bound[0].kind == TP_VAL_NODE;
    if (identity) *replacement = tp_value_node(bound[0].u.node);
    for (int i = 0; i < 3; i++) tp_value_clear(&bound[i]);
    return TP_OK;
}

/* ---- the default table ------------------------------------------------------------ */

tp_status tp_decomp_table_default(tp_decomp_table **out) {
    static const struct {
        tp_op op;
        tp_decomp_fn fn;
    } defaults[] = {
        {TP_OP_SIGMOID, decomp_sigmoid},       {TP_OP_SILU, decomp_silu},
        {TP_OP_MISH, decomp_mish},             {TP_OP_SOFTPLUS, decomp_softplus},
        {TP_OP_GELU, decomp_gelu},             {TP_OP_ELU, decomp_elu},
        {TP_OP_SELU, decomp_selu},             {TP_OP_LEAKY_RELU, decomp_leaky_relu},
        {TP_OP_RELU6, decomp_relu6},           {TP_OP_HARDTANH, decomp_hardtanh},
        {TP_OP_HARDSIGMOID, decomp_hardsigmoid}, {TP_OP_HARDSWISH, decomp_hardswish},
        {TP_OP_CLAMP, decomp_clamp},           {TP_OP_LOG1P, decomp_log1p},
        {TP_OP_EXPM1, decomp_expm1},           {TP_OP_RECIPROCAL, decomp_reciprocal},
        {TP_OP_SQUARE, decomp_square},         {TP_OP_LERP, decomp_lerp},
        {TP_OP_ADDCMUL, decomp_addcmul},       {TP_OP_ADDCDIV, decomp_addcdiv},
        {TP_OP_LINEAR, decomp_linear},         {TP_OP_ADDMM, decomp_addmm},
        {TP_OP_LAYER_NORM, decomp_layer_norm}, {TP_OP_BATCH_NORM, decomp_batch_norm},
        {TP_OP_VAR, decomp_var},               {TP_OP_STD, decomp_std},
        {TP_OP_DROPOUT, decomp_dropout},
    };
    tp_decomp_table *t;
    TP_TRY(tp_decomp_table_new(&t));
    for (size_t i = 0; i < TP_ARRAY_LEN(defaults); i++)
        t->entries[defaults[i].op] = (decomp_entry){defaults[i].fn, NULL};
    *out = t;
    return TP_OK;
}

tp_status tp_decomp_table_add_softmax(tp_decomp_table *t) {
    TP_TRY(tp_decomp_table_set(t, TP_OP_SOFTMAX, decomp_softmax, NULL));
    return tp_decomp_table_set(t, TP_OP_LOG_SOFTMAX, decomp_log_softmax, NULL);
}

/* ---- running a table ------------------------------------------------------------- */

/* Rename argument `old_name` to `new_name` in the signature and the module
 * call graph (the replaced node's name moves to its replacement). */
static tp_status rename_uses(tp_program *p, const char *old_name, const char *new_name) {
    TP_TRY(tp_signature_replace_all_uses(p->signature, old_name, new_name, NULL));
    for (int i = 0; i < p->n_calls; i++) {
        tp_module_call_signature *s = p->calls[i].sig;
        for (int pass = 0; s && pass < 2; pass++) {
            tp_arg_spec *specs = pass ? s->outputs : s->inputs;
            int n = pass ? s->n_outputs : s->n_inputs;
            for (int k = 0; k < n; k++) {
                if (!specs[k].name || strcmp(specs[k].name, old_name) != 0) continue;
                char *copy = tp_strdup(new_name);
                TP_CHECK(copy != NULL, TP_ERR_NOMEM, "out of memory renaming '%s'", old_name);
                tp_free((char *)specs[k].name);
                specs[k].name = copy;
            }
        }
    }
    return TP_OK;
}

/* The replacement must look like the node it replaces (when both are known). */
static tp_status check_replacement(const tp_node *node, const tp_node *rep) {
    const tp_tensor *a = node_meta(node), *b = node_meta(rep);
    if (!a || !b) return TP_OK;
    char sa[256], sb[256];
    tp__shape_str(tp_tensor_ndim(a), tp_tensor_sizes(a), sa, sizeof sa);
    tp__shape_str(tp_tensor_ndim(b), tp_tensor_sizes(b), sb, sizeof sb);
    TP_CHECK(tp_tensor_dtype(a) == tp_tensor_dtype(b), TP_ERR_TYPE,
             "replacement %s is %s%s but the node is %s%s", tp_node_name(rep), tp_dtype_name(tp_tensor_dtype(b)), sb,
             tp_dtype_name(tp_tensor_dtype(a)), sa);
    TP_CHECK(strcmp(sa, sb) == 0, TP_ERR_SHAPE, "replacement %s has shape %s but the node has shape %s",
             tp_node_name(rep), sb, sa);
    return TP_OK;
}

/* Offer one node to its rewrite; *changed when it was replaced. */
static tp_status decompose_node(tp_program *p, tp_node *n, const decomp_entry *e, bool *changed) {
    tp_graph *g = p->graph;
    TP_TRY(tp_graph_set_insert_point(g, n));
    tp_value rep = tp_value_none();
    tp_status st = e->fn(g, n, e->user, &rep);
    if (st != TP_OK || rep.kind == TP_VAL_NONE) { /* failed or declined */
        tp_value_clear(&rep);
        return st;
    }
    if (rep.kind != TP_VAL_NODE)
        st = tp_error(TP_ERR_TYPE, "rewrite returned a %s, not a node", tp_value_kind_name(rep.kind));
    tp_node *r = st == TP_OK ? rep.u.node : NULL;
    if (st == TP_OK && r == n) {
        tp_value_clear(&rep);
        return TP_OK; /* kept as is */
    }
    if (st == TP_OK && (!r || tp_node_graph(r) != g))
        st = tp_error(TP_ERR_INVALID_ARG, "rewrite returned a node of another graph");
    if (st == TP_OK) st = check_replacement(n, r);
    char *old_name = st == TP_OK ? tp_strdup(tp_node_name(n)) : NULL;
    if (st == TP_OK && !old_name) st = tp_error(TP_ERR_NOMEM, "out of memory");
    if (st == TP_OK) st = tp_node_replace_all_uses_with(n, r, NULL, NULL, NULL);
    if (st == TP_OK) st = rename_uses(p, old_name, tp_node_name(r));
    if (st == TP_OK) st = tp_graph_erase_node(g, n);
    if (st == TP_OK) *changed = true;
    tp_free(old_name);
    tp_value_clear(&rep);
    return st;
}

/* Infer the meta val of call nodes that lack one (graphs loaded without
 * meta), so that rewrites see dtypes and shapes. Nodes whose inference
 * fails keep None (their rewrites decline). */
static tp_status fill_missing_meta(tp_graph *g) {
    for (tp_node *n = tp_graph_first_node(g); n; n = tp_node_next(n)) {
        tp_node_kind kind = tp_node_get_kind(n);
        if ((kind != TP_NODE_CALL_FUNCTION && kind != TP_NODE_CALL_METHOD) || tp_node_meta_val(n)->kind != TP_VAL_NONE)
            continue;
        tp_status st = tp_node_infer_meta(n);
        if (st == TP_ERR_NOMEM) return st;
        if (st != TP_OK) tp_clear_error();
    }
    return TP_OK;
}

static tp_status run_rounds(tp_program *p, const tp_decomp_table *table) {
    tp_graph *g = p->graph;
    TP_TRY(fill_missing_meta(g));
    for (int round = 0; round < DECOMP_MAX_ROUNDS; round++) {
        bool changed = false;
        tp_node *next;
        for (tp_node *n = tp_graph_first_node(g); n; n = next) {
            next = tp_node_next(n);
            tp_node_kind kind = tp_node_get_kind(n);
            if (kind != TP_NODE_CALL_FUNCTION && kind != TP_NODE_CALL_METHOD) continue;
            tp_op op = tp_node_op(n);
            if (!tp_decomp_table_has(table, op)) continue;
            char name[256]; /* n may be gone when the error is reported */
            snprintf(name, sizeof name, "%s", tp_node_name(n));
            tp_status st = decompose_node(p, n, &table->entries[op], &changed);
            if (st != TP_OK) {
                tp_error_context("decomposing node %s (%s)", name, tp_op_name(op));
                return st;
            }
        }
        if (!changed) break;
    }
    return TP_OK;
}

tp_status tp_program_run_decompositions(const tp_program *p, const tp_decomp_table *table, tp_program **out) {
    TP_CHECK(p != NULL && out != NULL, TP_ERR_INVALID_ARG, "program and output pointer must not be NULL");
    tp_decomp_table *owned = NULL;
    if (!table) {
        TP_TRY(tp_decomp_table_default(&owned));
        table = owned;
    }
    tp_program *c = NULL;
    tp_status st = tp_program_copy(p, &c);
    if (st == TP_OK) st = run_rounds(c, table);
    if (st == TP_OK) st = tp_graph_set_insert_point(c->graph, NULL);
    if (st == TP_OK) st = tp_graph_eliminate_dead_code(c->graph, NULL);
    if (st == TP_OK) st = tp_program_validate(c);
    tp_decomp_table_free(owned);
    if (st != TP_OK) {
        tp_program_free(c);
        return st;
    }
    *out = c;
    return TP_OK;
}
