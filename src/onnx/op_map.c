/*
 * op_map.c - ONNX operators (default domain, opsets 6-28) mapped onto our
 * ops. One function per ONNX op (or family); each reads the current node's
 * inputs and attributes through the ox_* accessors of import.c and builds
 * the result with ox_call, which folds calls on constants. Opset
 * differences handled here: axes as attribute or input (Squeeze,
 * Unsqueeze, Split, Reduce*), Slice/Pad/Clip/Resize inputs vs attributes,
 * Softmax's 2-D coercion before opset 13. Inputs that our ops take as
 * int lists (shapes, axes, pads, repeats, k) must be constants at import;
 * otherwise the node is unsupported.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx_impl.h"

/* The size given to a dim known only when the program runs (the output of
 * a data-dependent op that later nodes use) while importing. */
#define OX_DD_HINT 2

#define MAXV 64

/* ---- small helpers ------------------------------------------------------------ */

static tp_status need(ox_ctx *c, int i, const tp_value **out) {
    *out = ox_in(c, i);
    if (!*out) return ox_bad(c, "missing input %d", i);
    if (!ox_meta(*out)) return ox_unsupported(c, "input %d is not a tensor", i);
    return TP_OK;
}

static int rank_of(const tp_value *v) { return tp_tensor_ndim(ox_meta(v)); }
static const int64_t *sizes_of(const tp_value *v) { return tp_tensor_sizes(ox_meta(v)); }
static tp_dtype dtype_of(const tp_value *v) { return tp_tensor_dtype(ox_meta(v)); }

static tp_status set_out(ox_ctx *c, tp_value *v) { return ox_set_out(c, 0, v); }

/* Values of a constant integer tensor (any rank, at most max values). */
static tp_status tensor_ints(ox_ctx *c, tp_tensor *t, const char *what, int64_t *out, int max, int *n) {
    int64_t numel = tp_tensor_numel(t);
    if (numel > max) return ox_unsupported(c, "%s has %" PRId64 " values (at most %d)", what, numel, max);
    if (tp_dtype_is_float(tp_tensor_dtype(t))) return ox_bad(c, "%s must be an integer tensor", what);
    tp_tensor *ct;
    TP_TRY(tp_tensor_contiguous(t, &ct));
    const char *p = tp_tensor_data(ct);
    size_t es = tp_dtype_size(tp_tensor_dtype(ct));
    for (int64_t i = 0; i < numel; i++) out[i] = tp__load_i64(p + (size_t)i * es, tp_tensor_dtype(ct));
    tp_tensor_free(ct);
    *n = (int)numel;
    return TP_OK;
}

/* Input i as a constant int list; *n = -1 when the input is absent. */
static tp_status const_ints(ox_ctx *c, int i, const char *what, int64_t *out, int max, int *n) {
    const tp_value *v = ox_in(c, i);
    *n = -1;
    if (!v) return TP_OK;
    tp_tensor *t = ox_const(v);
    if (!t) {
        ox_note_need_constant(c, v);
        return ox_unsupported(c, "input '%s' must be a constant (known when importing)", what);
    }
    return tensor_ints(c, t, what, out, max, n);
}

static tp_status const_f64(ox_ctx *c, int i, const char *what, double *out, bool *present) {
    const tp_value *v = ox_in(c, i);
    *present = false;
    if (!v) return TP_OK;
    tp_tensor *t = ox_const(v);
    if (!t) {
        ox_note_need_constant(c, v);
        return ox_unsupported(c, "input '%s' must be a constant (known when importing)", what);
    }
    if (tp_tensor_numel(t) != 1) return ox_bad(c, "input '%s' must hold one value", what);
    *out = tp_tensor_item_f64(t, 0);
    *present = true;
    return TP_OK;
}

/* v as an int64 when it is finite and in range (a plain cast of NaN or of
 * a value beyond int64 is undefined behaviour). */
static bool f64_to_i64(double v, int64_t *out) {
    if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) return false;
    *out = (int64_t)v;
    return true;
}

/* v saturated to int64 (NaN: 0). */
static int64_t f64_to_i64_sat(double v) {
    int64_t r = 0;
    if (f64_to_i64(v, &r)) return r;
    return v > 0 ? INT64_MAX : v < 0 ? INT64_MIN : 0;
}

static tp_status wrap_axis(ox_ctx *c, int64_t axis, int rank, int *out) {
    *out = 0;
    if (axis < -rank || axis >= rank || rank == 0)
        return ox_bad(c, "axis %" PRId64 " out of range for rank %d", axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return TP_OK;
}

/* Axes from the attribute (older opsets) or from input `input_index`. */
static tp_status get_axes(ox_ctx *c, int input_index, int64_t *axes, int *n) {
    TP_TRY(ox_attr_ints(c, "axes", axes, TP_MAX_DIMS, n));
    if (*n < 0 && input_index >= 0) TP_TRY(const_ints(c, input_index, "axes", axes, TP_MAX_DIMS, n));
    return TP_OK;
}

static tp_status call_ints(ox_ctx *c, tp_op op, const tp_value *x, const int64_t *ints, int n, tp_value *out) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ints(&A, ints, n);
    return ox_call(c, op, &A, out);
}

/* Reshape to `shape`, computed from import-time sizes. When the node's
 * shapes depend on a dynamic dim, the leading dim becomes -1 so it follows
 * the run-time size (the dynamic dim is assumed to be the leading one). */
static tp_status reshape(ox_ctx *c, const tp_value *x, const int64_t *shape, int n, tp_value *out) {
    int64_t s[TP_MAX_DIMS * 2];
    bool has_infer = false;
    for (int i = 0; i < n && i < TP_MAX_DIMS * 2; i++) {
        s[i] = shape[i];
        has_infer |= shape[i] == -1;
    }
    if (ox_node_dyn(c) && n > 0 && !has_infer && x->kind == TP_VAL_NODE) s[0] = -1;
    return call_ints(c, TP_OP_RESHAPE, x, s, n, out);
}

static tp_status scalar_like(const tp_value *x, double v, tp_value *out) { return ox_scalar_tensor(dtype_of(x), v, out); }

/* out = op(x, scalar) with scalar as a 0-d tensor of x's dtype. */
static tp_status binop_scalar(ox_ctx *c, tp_op op, const tp_value *x, double s, tp_value *out) {
    tp_value sv;
    TP_TRY(scalar_like(x, s, &sv));
    tp_status st = ox_call2(c, op, x, &sv, out);
    tp_value_clear(&sv);
    return st;
}

/* Move v into output 0 after casting to dtype. */
static tp_status set_out_cast(ox_ctx *c, tp_value *v, tp_dtype dt) {
    tp_value r;
    tp_status st = ox_cast(c, v, dt, &r);
    tp_value_clear(v);
    TP_TRY(st);
    return set_out(c, &r);
}

/* One step of a chain of calls that each replace a value: when st is TP_OK
 * the result in *tmp replaces *v (its old value dropped); tmp ends None. */
static tp_status take(tp_status st, tp_value *v, tp_value *tmp) {
    if (st == TP_OK) {
        tp_value_clear(v);
        *v = *tmp;
    } else {
        tp_value_clear(tmp);
    }
    *tmp = tp_value_none();
    return st;
}

/* An element-type attribute value (an int64 in the file) as our dtype;
 * TP_ERR_UNSUPPORTED naming the attribute, also for values beyond int32
 * (which a plain cast would wrap onto a valid type). */
static tp_status dtype_attr(ox_ctx *c, const char *attr, int64_t v, tp_dtype *out) {
    if (v < 0 || v > INT32_MAX || tp__onnx_dtype((int32_t)v, out) != TP_OK)
        return ox_unsupported(c, "attribute '%s': element type %s (%" PRId64 ")", attr,
                              v < 0 || v > INT32_MAX ? "unknown" : tp__onnx_dtype_name((int32_t)v), v);
    return TP_OK;
}

/* ---- elementwise ------------------------------------------------------------------- */

typedef struct unary_map {
    const char *name;
    tp_op op;
} unary_map;

static const unary_map k_unary[] = {
    {"Abs", TP_OP_ABS},         {"Neg", TP_OP_NEG},         {"Exp", TP_OP_EXP},     {"Log", TP_OP_LOG},
    {"Sqrt", TP_OP_SQRT},       {"Sin", TP_OP_SIN},         {"Cos", TP_OP_COS},     {"Tan", TP_OP_TAN},
    {"Tanh", TP_OP_TANH},       {"Sigmoid", TP_OP_SIGMOID}, {"Erf", TP_OP_ERF},     {"Reciprocal", TP_OP_RECIPROCAL},
    {"Floor", TP_OP_FLOOR},     {"Ceil", TP_OP_CEIL},       {"Round", TP_OP_ROUND}, {"Sign", TP_OP_SIGN},
    {"Not", TP_OP_LOGICAL_NOT}, {"Relu", TP_OP_RELU},       {"IsNaN", TP_OP_ISNAN}, {"Softplus", TP_OP_SOFTPLUS},
    {"HardSwish", TP_OP_HARDSWISH}, {"BitwiseNot", TP_OP_BITWISE_NOT}, {"Mish", TP_OP_MISH},
    {"Det", TP_OP_DET},
};

static tp_status map_unary(ox_ctx *c, tp_op op) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    tp_value r;
    TP_TRY(ox_call1(c, op, x, &r));
    return set_out(c, &r);
}

typedef struct binary_map {
    const char *name;
    tp_op op;
    bool keep_dtype; /* cast the result back to input 0's dtype */
} binary_map;

static const binary_map k_binary[] = {
    {"Add", TP_OP_ADD, true},         {"Sub", TP_OP_SUB, true},          {"Mul", TP_OP_MUL, true},
    {"Equal", TP_OP_EQ, false},       {"Less", TP_OP_LT, false},         {"Greater", TP_OP_GT, false},
    {"LessOrEqual", TP_OP_LE, false}, {"GreaterOrEqual", TP_OP_GE, false}, {"And", TP_OP_LOGICAL_AND, false},
    {"Or", TP_OP_LOGICAL_OR, false},  {"Xor", TP_OP_LOGICAL_XOR, false}, {"Pow", TP_OP_POW, true},
    {"BitwiseAnd", TP_OP_BITWISE_AND, true}, {"BitwiseOr", TP_OP_BITWISE_OR, true},
    {"BitwiseXor", TP_OP_BITWISE_XOR, true},
};

static tp_status map_binary(ox_ctx *c, const binary_map *m) {
    const tp_value *a, *b;
    TP_TRY(need(c, 0, &a));
    TP_TRY(need(c, 1, &b));
    tp_value r;
    TP_TRY(ox_call2(c, m->op, a, b, &r));
    if (m->keep_dtype) return set_out_cast(c, &r, dtype_of(a));
    return set_out(c, &r);
}

static tp_status map_div(ox_ctx *c) {
    const tp_value *a, *b;
    TP_TRY(need(c, 0, &a));
    TP_TRY(need(c, 1, &b));
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, a);
    ox_arg_ref(&A, b);
    if (!tp_dtype_is_float(dtype_of(a))) {
        tp_value s;
        if (tp_value_str("trunc", &s) == TP_OK) ox_kw(&A, "rounding_mode", s);
        else A.nomem = true; /* ox_call reports it and clears A */
    }
    tp_value r;
    TP_TRY(ox_call(c, TP_OP_DIV, &A, &r));
    return set_out_cast(c, &r, dtype_of(a));
}

static tp_status map_mod(ox_ctx *c) {
    const tp_value *a, *b;
    TP_TRY(need(c, 0, &a));
    TP_TRY(need(c, 1, &b));
    bool fmod = ox_attr_i(c, "fmod", 0) != 0;
    /* Opset 28 defines fmod=0 on floats as A - floor(A / B) * B (remainder). */
    if (!fmod && tp_dtype_is_float(dtype_of(a)) && ox_opset(c) < 28)
        return ox_bad(c, "floating-point Mod needs fmod=1");
    tp_value r;
    TP_TRY(ox_call2(c, fmod ? TP_OP_FMOD : TP_OP_REMAINDER, a, b, &r));
    return set_out_cast(c, &r, dtype_of(a));
}

/* Max/Min/Sum/Mean over any number of inputs (broadcasting). */
static tp_status map_variadic(ox_ctx *c, tp_op op, bool mean) {
    int n = ox_n_in(c);
    if (n < 1) return ox_bad(c, "needs at least one input");
    const tp_value *x0;
    TP_TRY(need(c, 0, &x0));
    tp_value acc;
    TP_TRY(tp_value_copy(x0, &acc));
    for (int i = 1; i < n; i++) {
        const tp_value *xi;
        tp_status st = need(c, i, &xi);
        tp_value r;
        if (st == TP_OK) st = ox_call2(c, op, &acc, xi, &r);
        tp_value_clear(&acc);
        TP_TRY(st);
        acc = r;
    }
    if (mean && n > 1) {
        tp_value r;
        tp_status st = binop_scalar(c, TP_OP_DIV, &acc, (double)n, &r);
        tp_value_clear(&acc);
        TP_TRY(st);
        acc = r;
    } else if (n == 1) {
        /* identity: a fresh value is fine */
    }
    return set_out_cast(c, &acc, dtype_of(x0));
}

static tp_status map_identity(ox_ctx *c) {
    const tp_value *x = ox_in(c, 0);
    if (!x) return ox_bad(c, "missing input 0");
    tp_value r;
    TP_TRY(tp_value_copy(x, &r));
    return set_out(c, &r);
}

static tp_status map_dropout(ox_ctx *c) {
    double ratio = ox_attr_f(c, "ratio", 0.5);
    bool has_ratio = false, has_train = false;
    double train = 0;
    if (ox_opset(c) >= 12) {
        TP_TRY(const_f64(c, 2, "training_mode", &train, &has_train));
        /* the ratio matters only in training mode (it may then be given at run time) */
        if (has_train && train != 0) TP_TRY(const_f64(c, 1, "ratio", &ratio, &has_ratio));
    }
    if (has_train && train != 0 && ratio != 0) return ox_unsupported(c, "training-mode dropout is random");
    TP_TRY(map_identity(c));
    if (ox_out_used(c, 1)) {
        const tp_value *x = ox_in(c, 0);
        const tp_tensor *m = ox_meta(x);
        tp_tensor *ones;
        TP_TRY(ox_new_tensor(c, TP_BOOL, tp_tensor_ndim(m), tp_tensor_sizes(m), false, &ones));
        tp_tensor_fill(ones, 1);
        tp_value v = tp_value_tensor(ones);
        TP_TRY(ox_set_out(c, 1, &v));
    }
    return TP_OK;
}

static tp_status map_cast(ox_ctx *c, bool like) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    tp_dtype dt;
    if (like) {
        const tp_value *t;
        TP_TRY(need(c, 1, &t));
        dt = dtype_of(t);
    } else {
        const Onnx__AttributeProto *a = ox_attr(c, "to");
        if (!a || !a->has_i) return ox_bad(c, "missing attribute 'to'");
        TP_TRY(dtype_attr(c, "to", a->i, &dt));
    }
    tp_value r;
    TP_TRY(ox_cast(c, x, dt, &r));
    return set_out(c, &r);
}

/* ---- activations ---------------------------------------------------------------- */

static tp_status map_leaky_relu(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_float(ox_attr_f(c, "alpha", 0.01)));
    tp_value r;
    TP_TRY(ox_call(c, TP_OP_LEAKY_RELU, &A, &r));
    return set_out(c, &r);
}

static tp_status map_elu(ox_ctx *c, bool selu) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    if (selu) {
        ox_arg(&A, tp_value_float(ox_attr_f(c, "alpha", 1.67326319217681884765625)));
        ox_arg(&A, tp_value_float(ox_attr_f(c, "gamma", 1.05070102214813232421875)));
    } else {
        ox_arg(&A, tp_value_float(ox_attr_f(c, "alpha", 1.0)));
    }
    tp_value r;
    TP_TRY(ox_call(c, TP_OP_ELU, &A, &r));
    return set_out(c, &r);
}

static tp_status map_hard_sigmoid(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    tp_value t1, t2, r;
    TP_TRY(binop_scalar(c, TP_OP_MUL, x, ox_attr_f(c, "alpha", 0.2), &t1));
    tp_status st = binop_scalar(c, TP_OP_ADD, &t1, ox_attr_f(c, "beta", 0.5), &t2);
    tp_value_clear(&t1);
    TP_TRY(st);
    ox_args A;
    ox_args_init(&A);
    ox_arg(&A, t2);
    ox_arg(&A, tp_value_float(0.0));
    ox_arg(&A, tp_value_float(1.0));
    TP_TRY(ox_call(c, TP_OP_CLAMP, &A, &r));
    return set_out(c, &r);
}

/* where(cond(x), a, b) helpers built from scalars */
static tp_status map_thresholded_relu(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    tp_value m, z, r;
    TP_TRY(binop_scalar(c, TP_OP_GT, x, ox_attr_f(c, "alpha", 1.0), &m));
    tp_status st = scalar_like(x, 0, &z);
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg(&A, m);
        ox_arg_ref(&A, x);
        ox_arg(&A, z);
        return (st = ox_call(c, TP_OP_WHERE, &A, &r)) == TP_OK ? set_out(c, &r) : st;
    }
    tp_value_clear(&m);
    return st;
}

static tp_status map_shrink(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    double bias = ox_attr_f(c, "bias", 0.0), lambd = ox_attr_f(c, "lambd", 0.5);
    tp_value lo = tp_value_none(), hi = tp_value_none(), xp = tp_value_none(), xm = tp_value_none();
    tp_value z = tp_value_none(), inner = tp_value_none(), r = tp_value_none();
    tp_status st = binop_scalar(c, TP_OP_LT, x, -lambd, &lo);
    if (st == TP_OK) st = binop_scalar(c, TP_OP_GT, x, lambd, &hi);
    if (st == TP_OK) st = binop_scalar(c, TP_OP_ADD, x, bias, &xp);
    if (st == TP_OK) st = binop_scalar(c, TP_OP_SUB, x, bias, &xm);
    if (st == TP_OK) st = scalar_like(x, 0, &z);
    ox_args A;
    if (st == TP_OK) {
        ox_args_init(&A);
        ox_arg_ref(&A, &hi);
        ox_arg_ref(&A, &xm);
        ox_arg_ref(&A, &z);
        st = ox_call(c, TP_OP_WHERE, &A, &inner);
    }
    if (st == TP_OK) {
        ox_args_init(&A);
        ox_arg_ref(&A, &lo);
        ox_arg_ref(&A, &xp);
        ox_arg_ref(&A, &inner);
        st = ox_call(c, TP_OP_WHERE, &A, &r);
    }
    tp_value vs[] = {lo, hi, xp, xm, z, inner};
    for (size_t i = 0; i < TP_ARRAY_LEN(vs); i++) tp_value_clear(&vs[i]);
    TP_TRY(st);
    return set_out_cast(c, &r, dtype_of(x));
}

static tp_status map_celu(ox_ctx *c) {
    /* max(0,x) + min(0, alpha*(exp(x/alpha)-1)) == elu(x/alpha)*alpha for alpha>0 */
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    double alpha = ox_attr_f(c, "alpha", 1.0);
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_float(alpha));
    ox_arg(&A, tp_value_float(1.0));
    ox_arg(&A, tp_value_float(1.0 / alpha));
    tp_value r;
    TP_TRY(ox_call(c, TP_OP_ELU, &A, &r));
    return set_out(c, &r);
}

static tp_status map_softsign(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    tp_value a, d, r;
    TP_TRY(ox_call1(c, TP_OP_ABS, x, &a));
    tp_status st = binop_scalar(c, TP_OP_ADD, &a, 1.0, &d);
    tp_value_clear(&a);
    TP_TRY(st);
    st = ox_call2(c, TP_OP_DIV, x, &d, &r);
    tp_value_clear(&d);
    TP_TRY(st);
    return set_out(c, &r);
}

static tp_status map_prelu(ox_ctx *c) {
    const tp_value *x, *s;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &s));
    tp_value neg = tp_value_none(), prod = tp_value_none(), r = tp_value_none(), s2 = tp_value_none();
    tp_status st = TP_OK;
    if (ox_opset(c) < 7 && rank_of(s) == 1 && rank_of(x) > 2 && sizes_of(s)[0] == sizes_of(x)[1] &&
        sizes_of(s)[0] != 1) { /* before opset 7 the slope runs along dim 1 */
        int64_t shp[TP_MAX_DIMS];
        for (int i = 0; i < rank_of(x) - 1; i++) shp[i] = i == 0 ? sizes_of(s)[0] : 1;
        st = reshape(c, s, shp, rank_of(x) - 1, &s2);
        s = &s2;
    }
    if (st == TP_OK) st = binop_scalar(c, TP_OP_LT, x, 0.0, &neg);
    if (st == TP_OK) st = ox_call2(c, TP_OP_MUL, x, s, &prod);
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, &neg);
        ox_arg_ref(&A, &prod);
        ox_arg_ref(&A, x);
        st = ox_call(c, TP_OP_WHERE, &A, &r);
    }
    tp_value_clear(&neg);
    tp_value_clear(&prod);
    tp_value_clear(&s2);
    TP_TRY(st);
    return set_out_cast(c, &r, dtype_of(x));
}

static tp_status map_clip(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    bool has_lo = false, has_hi = false;
    double lo = 0, hi = 0;
    if (ox_opset(c) < 11) {
        has_lo = ox_attr(c, "min") != NULL;
        has_hi = ox_attr(c, "max") != NULL;
        lo = ox_attr_f(c, "min", 0);
        hi = ox_attr_f(c, "max", 0);
    } else {
        const tp_value *bound[2] = {ox_in(c, 1), ox_in(c, 2)};
        if ((bound[0] && !ox_const(bound[0])) || (bound[1] && !ox_const(bound[1]))) {
            /* bounds known when it runs: max(x, min), then min(., max) */
            tp_value v, r;
            TP_TRY(tp_value_copy(x, &v));
            for (int i = 0; i < 2; i++) {
                if (!bound[i]) continue;
                tp_status st = tp_tensor_numel(ox_meta(bound[i])) == 1 ? TP_OK
                                                                       : ox_bad(c, "input '%s' must hold one value", i ? "max" : "min");
                if (st == TP_OK) st = ox_call2(c, i ? TP_OP_MINIMUM : TP_OP_MAXIMUM, &v, bound[i], &r);
                tp_value_clear(&v);
                TP_TRY(st);
                v = r;
            }
            return set_out_cast(c, &v, dtype_of(x));
        }
        TP_TRY(const_f64(c, 1, "min", &lo, &has_lo));
        TP_TRY(const_f64(c, 2, "max", &hi, &has_hi));
    }
    bool is_int = !tp_dtype_is_float(dtype_of(x));
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, has_lo ? (is_int ? tp_value_int(f64_to_i64_sat(lo)) : tp_value_float(lo)) : tp_value_none());
    ox_arg(&A, has_hi ? (is_int ? tp_value_int(f64_to_i64_sat(hi)) : tp_value_float(hi)) : tp_value_none());
    tp_value r;
    if (!has_lo && !has_hi) {
        ox_args_clear(&A);
        return map_identity(c);
    }
    TP_TRY(ox_call(c, TP_OP_CLAMP, &A, &r));
    return set_out_cast(c, &r, dtype_of(x));
}

/* Inverse trig and hyperbolic functions as compositions. */
static tp_status map_trig(ox_ctx *c, const char *op) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    tp_value t1 = tp_value_none(), t2 = tp_value_none(), t3 = tp_value_none(), r = tp_value_none();
    tp_status st = TP_OK;
#define T(expr)                                                                                                        \
    do {                                                                                                               \
        if (st == TP_OK) st = (expr);                                                                                  \
    } while (0)
    if (!strcmp(op, "Asin") || !strcmp(op, "Acos")) {
        /* s = sqrt(1 - x^2); asin = atan2(x, s); acos = atan2(s, x) */
        T(ox_call2(c, TP_OP_MUL, x, x, &t1));
        tp_value one;
        T(scalar_like(x, 1.0, &one));
        T(ox_call2(c, TP_OP_SUB, &one, &t1, &t2));
        tp_value_clear(&one);
        T(ox_call1(c, TP_OP_SQRT, &t2, &t3));
        if (op[1] == 's') T(ox_call2(c, TP_OP_ATAN2, x, &t3, &r));
        else T(ox_call2(c, TP_OP_ATAN2, &t3, x, &r));
    } else if (!strcmp(op, "Atan")) {
        T(scalar_like(x, 1.0, &t1));
        T(ox_call2(c, TP_OP_ATAN2, x, &t1, &r));
    } else if (!strcmp(op, "Sinh") || !strcmp(op, "Cosh")) {
        T(ox_call1(c, TP_OP_EXP, x, &t1));
        T(ox_call1(c, TP_OP_NEG, x, &t3));
        T(ox_call1(c, TP_OP_EXP, &t3, &t2));
        tp_value_clear(&t3);
        T(ox_call2(c, op[0] == 'S' ? TP_OP_SUB : TP_OP_ADD, &t1, &t2, &t3));
        T(binop_scalar(c, TP_OP_MUL, &t3, 0.5, &r));
    } else if (!strcmp(op, "Asinh") || !strcmp(op, "Acosh")) {
        T(ox_call2(c, TP_OP_MUL, x, x, &t1));
        T(binop_scalar(c, op[1] == 's' ? TP_OP_ADD : TP_OP_SUB, &t1, 1.0, &t2));
        tp_value_clear(&t1);
        T(ox_call1(c, TP_OP_SQRT, &t2, &t1));
        T(ox_call2(c, TP_OP_ADD, x, &t1, &t3));
        T(ox_call1(c, TP_OP_LOG, &t3, &r));
    } else { /* Atanh = 0.5 * log((1+x)/(1-x)) */
        tp_value one;
        T(scalar_like(x, 1.0, &one));
        T(ox_call2(c, TP_OP_ADD, &one, x, &t1));
        T(ox_call2(c, TP_OP_SUB, &one, x, &t2));
        tp_value_clear(&one);
        T(ox_call2(c, TP_OP_DIV, &t1, &t2, &t3));
        tp_value_clear(&t1);
        T(ox_call1(c, TP_OP_LOG, &t3, &t1));
        T(binop_scalar(c, TP_OP_MUL, &t1, 0.5, &r));
    }
#undef T
    tp_value_clear(&t1);
    tp_value_clear(&t2);
    tp_value_clear(&t3);
    if (st != TP_OK) {
        tp_value_clear(&r);
        return st;
    }
    return set_out(c, &r);
}

static tp_status map_isinf(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    bool pos = ox_attr_i(c, "detect_positive", 1) != 0, neg = ox_attr_i(c, "detect_negative", 1) != 0;
    tp_value r;
    if (pos && neg) {
        TP_TRY(ox_call1(c, TP_OP_ISINF, x, &r));
    } else if (pos || neg) {
        TP_TRY(binop_scalar(c, TP_OP_EQ, x, pos ? INFINITY : -INFINITY, &r));
    } else { /* detects nothing: all false */
        tp_tensor *z;
        TP_TRY(ox_new_tensor(c, TP_BOOL, rank_of(x), sizes_of(x), true, &z));
        r = tp_value_tensor(z);
    }
    return set_out(c, &r);
}

static tp_status map_where(ox_ctx *c) {
    const tp_value *cond, *a, *b;
    TP_TRY(need(c, 0, &cond));
    TP_TRY(need(c, 1, &a));
    TP_TRY(need(c, 2, &b));
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, cond);
    ox_arg_ref(&A, a);
    ox_arg_ref(&A, b);
    tp_value r;
    TP_TRY(ox_call(c, TP_OP_WHERE, &A, &r));
    return set_out_cast(c, &r, dtype_of(a));
}

/* ---- linear algebra ----------------------------------------------------------------- */

static tp_status map_matmul(ox_ctx *c) {
    const tp_value *a, *b;
    TP_TRY(need(c, 0, &a));
    TP_TRY(need(c, 1, &b));
    tp_value r;
    TP_TRY(ox_call2(c, TP_OP_MATMUL, a, b, &r));
    return set_out(c, &r);
}

static tp_status map_gemm(ox_ctx *c) {
    const tp_value *a, *b, *cc = ox_in(c, 2);
    TP_TRY(need(c, 0, &a));
    TP_TRY(need(c, 1, &b));
    double alpha = ox_attr_f(c, "alpha", 1.0), beta = ox_attr_f(c, "beta", 1.0);
    bool ta = ox_attr_i(c, "transA", 0) != 0, tb = ox_attr_i(c, "transB", 0) != 0;
    if (rank_of(a) != 2 || rank_of(b) != 2) return ox_bad(c, "Gemm inputs must be 2-D");
    tp_value at = tp_value_none(), bt = tp_value_none(), prod = tp_value_none(), cs = tp_value_none();
    tp_value tmp = tp_value_none();
    const int64_t perm[2] = {1, 0};
    tp_status st = ta ? call_ints(c, TP_OP_PERMUTE, a, perm, 2, &at) : tp_value_copy(a, &at);
    if (st == TP_OK) st = tb ? call_ints(c, TP_OP_PERMUTE, b, perm, 2, &bt) : tp_value_copy(b, &bt);
    if (st == TP_OK) st = ox_call2(c, TP_OP_MATMUL, &at, &bt, &prod);
    if (st == TP_OK && alpha != 1.0) st = take(binop_scalar(c, TP_OP_MUL, &prod, alpha, &tmp), &prod, &tmp);
    if (st == TP_OK && cc && beta != 0.0) {
        st = beta != 1.0 ? binop_scalar(c, TP_OP_MUL, cc, beta, &cs) : tp_value_copy(cc, &cs);
        if (st == TP_OK) st = take(ox_call2(c, TP_OP_ADD, &prod, &cs, &tmp), &prod, &tmp);
    }
    tp_value_clear(&at);
    tp_value_clear(&bt);
    tp_value_clear(&cs);
    if (st != TP_OK) {
        tp_value_clear(&prod);
        return st;
    }
    return set_out_cast(c, &prod, dtype_of(a));
}

/* ---- convolution and pooling ---------------------------------------------------------- */

typedef struct window {
    int n; /* spatial dims */
    int64_t k[3], s[3], d[3], pb[3], pe[3];
} window;

/* Read kernel_shape/strides/dilations/pads/auto_pad for n spatial dims of
 * input x (kernel from `kernel` when kernel_shape is absent). Every value
 * is checked before any arithmetic: kernel sizes, strides and dilations
 * positive, pads non-negative; the padded size (convolution and pooling)
 * and the SAME padding are computed with overflow checks. */
static tp_status read_window(ox_ctx *c, const tp_value *x, const int64_t *kernel, window *w, bool transposed) {
    int nd = rank_of(x);
    w->n = nd - 2;
    if (w->n < 1 || w->n > 3) return ox_unsupported(c, "%d spatial dims (1 to 3 supported)", w->n);
    int64_t tmp[8];
    int n;
    TP_TRY(ox_attr_ints(c, "kernel_shape", tmp, 8, &n));
    if (n > 0 && n != w->n) return ox_bad(c, "attribute 'kernel_shape' has %d values for %d spatial dims", n, w->n);
    for (int i = 0; i < w->n; i++) w->k[i] = n == w->n ? tmp[i] : (kernel ? kernel[i] : 1);
    if (n != w->n && !kernel) return ox_bad(c, "missing attribute 'kernel_shape'");
    TP_TRY(ox_attr_ints(c, "strides", tmp, 8, &n));
    if (n > 0 && n != w->n) return ox_bad(c, "attribute 'strides' has %d values for %d spatial dims", n, w->n);
    for (int i = 0; i < w->n; i++) w->s[i] = n == w->n ? tmp[i] : 1;
    TP_TRY(ox_attr_ints(c, "dilations", tmp, 8, &n));
    if (n > 0 && n != w->n) return ox_bad(c, "attribute 'dilations' has %d values for %d spatial dims", n, w->n);
    for (int i = 0; i < w->n; i++) w->d[i] = n == w->n ? tmp[i] : 1;
    TP_TRY(ox_attr_ints(c, "pads", tmp, 8, &n));
    if (n > 0 && n != 2 * w->n) return ox_bad(c, "attribute 'pads' has %d values for %d spatial dims", n, w->n);
    for (int i = 0; i < w->n; i++) {
        w->pb[i] = n == 2 * w->n ? tmp[i] : 0;
        w->pe[i] = n == 2 * w->n ? tmp[w->n + i] : 0;
    }
    const int64_t *in = sizes_of(x);
    for (int i = 0; i < w->n; i++) {
        if (w->k[i] < 1)
            return ox_bad(c, "attribute 'kernel_shape': kernel size %" PRId64 " of spatial dim %d must be positive",
                          w->k[i], i);
        if (w->s[i] < 1)
            return ox_bad(c, "attribute 'strides': stride %" PRId64 " of spatial dim %d must be positive", w->s[i], i);
        if (w->d[i] < 1)
            return ox_bad(c, "attribute 'dilations': dilation %" PRId64 " of spatial dim %d must be positive", w->d[i],
                          i);
        int64_t padded;
        if (w->pb[i] < 0 || w->pe[i] < 0)
            return ox_bad(c, "attribute 'pads': pads %" PRId64 ", %" PRId64 " of spatial dim %d must be non-negative",
                          w->pb[i], w->pe[i], i);
        if (!tp_add_overflow_i64(w->pb[i], w->pe[i], &padded) || (!transposed && !tp_add_overflow_i64(padded, in[2 + i], &padded)))
            return ox_bad(c, "attribute 'pads': pads %" PRId64 ", %" PRId64 " of spatial dim %d overflow int64", w->pb[i],
                          w->pe[i], i);
    }
    char buf[32];
    const char *ap = ox_attr_s(c, "auto_pad", "NOTSET", buf, sizeof buf);
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        for (int i = 0; i < w->n; i++) {
            /* (kernel - 1) * dilation, the dilated kernel's extent - 1 */
            int64_t kext, total;
            if (!tp_mul_overflow_i64(w->k[i] - 1, w->d[i], &kext))
                return ox_bad(c, "%s: (kernel_shape - 1) * dilations of spatial dim %d overflows int64 (%" PRId64
                              ", %" PRId64 ")", ap, i, w->k[i], w->d[i]);
            bool ok = true;
            if (transposed) { /* s * (in - 1) + kext + 1 - in * s, both terms >= 0 */
                total = kext - (w->s[i] - 1);
            } else { /* out = ceil(in / s); (out - 1) * s + kext + 1 - in, (out - 1) * s < in */
                int64_t out = in[2 + i] / w->s[i] + (in[2 + i] % w->s[i] != 0);
                ok = tp_add_overflow_i64((out - 1) * w->s[i], kext, &total) &&
                     tp_add_overflow_i64(total, 1, &total) && tp_sub_overflow_i64(total, in[2 + i], &total);
            }
            if (!ok)
                return ox_bad(c, "%s: the padding of spatial dim %d overflows int64 (kernel_shape %" PRId64
                              ", strides %" PRId64 ", dilations %" PRId64 ")", ap, i, w->k[i], w->s[i], w->d[i]);
            if (total < 0) total = 0;
            bool upper = ap[5] == 'U';
            w->pb[i] = upper ? total / 2 : total - total / 2;
            w->pe[i] = total - w->pb[i];
        }
    } else if (!strcmp(ap, "VALID")) {
        for (int i = 0; i < w->n; i++) w->pb[i] = w->pe[i] = 0;
    } else if (strcmp(ap, "NOTSET") != 0) {
        return ox_unsupported(c, "auto_pad '%s'", ap);
    }
    return TP_OK;
}

static bool window_symmetric(const window *w) {
    for (int i = 0; i < w->n; i++)
        if (w->pb[i] != w->pe[i]) return false;
    return true;
}

/* Explicit padding of the spatial dims (begin/end), torch order. */
static tp_status pad_spatial(ox_ctx *c, const tp_value *x, const window *w, double value, tp_value *out) {
    int64_t pads[6];
    for (int i = 0; i < w->n; i++) {
        pads[2 * i] = w->pb[w->n - 1 - i];
        pads[2 * i + 1] = w->pe[w->n - 1 - i];
    }
    tp_value m;
    TP_TRY(tp_value_str("constant", &m));
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ints(&A, pads, 2 * w->n);
    ox_arg(&A, m);
    ox_arg(&A, tp_value_float(value));
    return ox_call(c, TP_OP_PAD, &A, out);
}

static tp_status conv_apply(ox_ctx *c, const tp_value *x, const tp_value *wt, const tp_value *b, tp_value *out) {
    if (rank_of(wt) != rank_of(x)) return ox_bad(c, "weight rank differs from input rank");
    window w;
    TP_TRY(read_window(c, x, sizes_of(wt) + 2, &w, false));
    tp_value padded = tp_value_none();
    const tp_value *in = x;
    int64_t pad[3];
    if (!window_symmetric(&w)) {
        TP_TRY(pad_spatial(c, x, &w, 0.0, &padded));
        in = &padded;
        for (int i = 0; i < w.n; i++) pad[i] = 0;
    } else {
        for (int i = 0; i < w.n; i++) pad[i] = w.pb[i];
    }
    static const tp_op ops[3] = {TP_OP_CONV1D, TP_OP_CONV2D, TP_OP_CONV3D};
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, in);
    ox_arg_ref(&A, wt);
    ox_arg_ref(&A, b);
    ox_arg_ints(&A, w.s, w.n);
    ox_arg_ints(&A, pad, w.n);
    ox_arg_ints(&A, w.d, w.n);
    ox_arg(&A, tp_value_int(ox_attr_i(c, "group", 1)));
    tp_status st = ox_call(c, ops[w.n - 1], &A, out);
    tp_value_clear(&padded);
    return st;
}

static tp_status map_conv(ox_ctx *c) {
    const tp_value *x, *wt;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &wt));
    tp_value r;
    TP_TRY(conv_apply(c, x, wt, ox_in(c, 2), &r));
    return set_out(c, &r);
}

static tp_status map_conv_transpose(ox_ctx *c) {
    const tp_value *x, *wt, *b = ox_in(c, 2);
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &wt));
    if (rank_of(wt) != rank_of(x)) return ox_bad(c, "weight rank differs from input rank");
    window w;
    TP_TRY(read_window(c, x, sizes_of(wt) + 2, &w, true));
    int64_t op_[3] = {0, 0, 0}, tmp[8], oshape[8];
    int n, n_os;
    TP_TRY(ox_attr_ints(c, "output_padding", tmp, 8, &n));
    for (int i = 0; i < w.n; i++) {
        op_[i] = n == w.n ? tmp[i] : 0;
        /* our kernel (as torch's) needs output_padding < max(stride, dilation) */
        int64_t lim = w.s[i] > w.d[i] ? w.s[i] : w.d[i];
        if (op_[i] < 0)
            return ox_bad(c, "attribute 'output_padding' %" PRId64 " of spatial dim %d must be non-negative", op_[i], i);
        if (op_[i] >= lim)
            return ox_unsupported(c, "attribute 'output_padding' %" PRId64 " of spatial dim %d: at most %" PRId64
                                  " (max(strides, dilations) - 1) is supported", op_[i], i, lim - 1);
    }
    TP_TRY(ox_attr_ints(c, "output_shape", oshape, 8, &n_os));
    const int64_t *in = sizes_of(x);
    if (n_os >= w.n) {
        const int64_t *os = oshape + (n_os - w.n);
        char buf[32];
        const char *ap = ox_attr_s(c, "auto_pad", "NOTSET", buf, sizeof buf);
        for (int i = 0; i < w.n; i++) {
            if (os[i] < 1)
                return ox_bad(c, "attribute 'output_shape': size %" PRId64 " of spatial dim %d must be positive", os[i],
                              i);
            /* total = s * (in - 1) + output_padding + (k - 1) * d + 1 - output_shape */
            int64_t total, kext;
            if (!tp_mul_overflow_i64(w.s[i], in[2 + i] - 1, &total) || !tp_add_overflow_i64(total, op_[i], &total) ||
                !tp_mul_overflow_i64(w.k[i] - 1, w.d[i], &kext) || !tp_add_overflow_i64(total, kext, &total) ||
                !tp_add_overflow_i64(total, 1, &total) || !tp_sub_overflow_i64(total, os[i], &total))
                return ox_bad(c, "attribute 'output_shape': the padding of spatial dim %d overflows int64 (strides %" PRId64
                              ", output_padding %" PRId64 ", kernel_shape %" PRId64 ", dilations %" PRId64 ")",
                              i, w.s[i], op_[i], w.k[i], w.d[i]);
            if (total < 0) { /* a larger output than the padding gives: more output padding */
                int64_t lim = w.s[i] > w.d[i] ? w.s[i] : w.d[i];
                if (total == INT64_MIN || -total >= lim - op_[i])
                    return ox_unsupported(c, "attribute 'output_shape' %" PRId64 " of spatial dim %d is out of reach: it "
                                          "needs more output padding than max(strides, dilations) - 1 = %" PRId64,
                                          os[i], i, lim - 1);
                op_[i] -= total;
                total = 0;
            }
            w.pb[i] = strcmp(ap, "SAME_UPPER") == 0 ? total / 2 : total - total / 2;
            w.pe[i] = total - w.pb[i];
        }
    }
    int64_t pad[3];
    bool sym = window_symmetric(&w);
    for (int i = 0; i < w.n; i++) pad[i] = sym ? w.pb[i] : 0;
    static const tp_op ops[3] = {TP_OP_CONV_TRANSPOSE1D, TP_OP_CONV_TRANSPOSE2D, TP_OP_CONV_TRANSPOSE3D};
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ref(&A, wt);
    ox_arg_ref(&A, b);
    ox_arg_ints(&A, w.s, w.n);
    ox_arg_ints(&A, pad, w.n);
    ox_arg_ints(&A, op_, w.n);
    ox_arg(&A, tp_value_int(ox_attr_i(c, "group", 1)));
    ox_arg_ints(&A, w.d, w.n);
    tp_value r;
    TP_TRY(ox_call(c, ops[w.n - 1], &A, &r));
    if (!sym) { /* crop begin/end */
        for (int i = 0; i < w.n; i++) {
            int64_t size = sizes_of(&r)[2 + i];
            ox_args B;
            ox_args_init(&B);
            ox_arg(&B, r);
            ox_arg(&B, tp_value_int(2 + i));
            ox_arg(&B, tp_value_int(w.pb[i]));
            ox_arg(&B, tp_value_int(size - w.pe[i]));
            TP_TRY(ox_call(c, TP_OP_SLICE, &B, &r));
        }
    }
    return set_out(c, &r);
}

/* a / b for non-negative int64 operands (truncation is floor there). */
static tp_status int_div(ox_ctx *c, const tp_value *a, const tp_value *b, tp_value *out) {
    tp_value tr = tp_value_none();
    TP_TRY(tp_value_str("trunc", &tr));
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, a);
    ox_arg_ref(&A, b);
    ox_kw(&A, "rounding_mode", tr);
    return ox_call(c, TP_OP_DIV, &A, out);
}

/* MaxPool with its Indices output: max_poolNd_with_indices gives indices
 * within each (n, c) plane; ONNX's (storage_order 0) flatten the whole
 * tensor, so (n * C + c) * prod(spatial) is added. Symmetric padding only
 * (explicit padding would shift the indices), float inputs. */
static tp_status map_max_pool_indices(ox_ctx *c, const tp_value *x, const window *w, bool ceil_mode, bool col_major) {
    if (!window_symmetric(w)) return ox_unsupported(c, "the Indices output with asymmetric padding");
    if (!tp_dtype_is_float(dtype_of(x))) return ox_unsupported(c, "the Indices output of %s", tp_dtype_name(dtype_of(x)));
    for (int i = 0; i < w->n; i++)
        if (2 * w->pb[i] > w->k[i]) return ox_unsupported(c, "the Indices output with padding over half the kernel");
    int nd = rank_of(x);
    const int64_t *xs = sizes_of(x);
    int64_t plane = 1, pad[3];
    for (int i = 2; i < nd; i++) plane *= xs[i];
    for (int i = 0; i < w->n; i++) pad[i] = w->pb[i];
    static const tp_op ops[3] = {TP_OP_MAX_POOL1D_WITH_INDICES, TP_OP_MAX_POOL2D_WITH_INDICES,
                                 TP_OP_MAX_POOL3D_WITH_INDICES};
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ints(&A, w->k, w->n);
    ox_arg_ints(&A, w->s, w->n);
    ox_arg_ints(&A, pad, w->n);
    ox_arg_ints(&A, w->d, w->n);
    ox_arg(&A, tp_value_bool(ceil_mode));
    tp_value r;
    TP_TRY(ox_call(c, ops[w->n - 1], &A, &r));
    int64_t osz[TP_MAX_DIMS];
    osz[0] = xs[0];
    osz[1] = xs[1];
    for (int i = 2; i < nd; i++) osz[i] = 1;
    tp_tensor *off = NULL;
    tp_value v0 = tp_value_none(), idx = tp_value_none(), offv = tp_value_none(), sum = tp_value_none();
    tp_status st = ox_new_tensor(c, TP_INT64, nd, osz, false, &off);
    if (st == TP_OK) {
        int64_t *o = tp_tensor_data(off);
        for (int64_t k = 0; k < xs[0] * xs[1]; k++) o[k] = k * plane;
        offv = tp_value_tensor(off);
        st = tp_value_copy(tp_value_at(&r, 1), &idx);
    }
    if (st == TP_OK && col_major && nd == 4) { /* plane index y * W + x -> x * H + y */
        tp_value wv = tp_value_none(), hv = tp_value_none(), yv = tp_value_none(), t = tp_value_none();
        st = ox_scalar_tensor(TP_INT64, (double)xs[3], &wv);
        if (st == TP_OK) st = ox_scalar_tensor(TP_INT64, (double)xs[2], &hv);
        if (st == TP_OK) st = int_div(c, &idx, &wv, &yv); /* y */
        if (st == TP_OK) st = ox_call2(c, TP_OP_MUL, &yv, &wv, &t); /* y * W */
        if (st == TP_OK) st = take(ox_call2(c, TP_OP_SUB, &idx, &t, &sum), &t, &sum); /* x */
        if (st == TP_OK) st = take(ox_call2(c, TP_OP_MUL, &t, &hv, &sum), &t, &sum); /* x * H */
        if (st == TP_OK) st = ox_call2(c, TP_OP_ADD, &t, &yv, &sum);
        if (st == TP_OK) {
            tp_value_clear(&idx);
            idx = sum;
            sum = tp_value_none();
        }
        tp_value tmp[] = {wv, hv, yv, t};
        for (size_t i = 0; i < TP_ARRAY_LEN(tmp); i++) tp_value_clear(&tmp[i]);
    } else if (st == TP_OK && col_major && nd != 3) {
        st = ox_unsupported(c, "the Indices output with storage_order 1 on a rank-%d input", nd);
    }
    if (st == TP_OK) st = ox_call2(c, TP_OP_ADD, &idx, &offv, &sum);
    if (st == TP_OK) st = tp_value_copy(tp_value_at(&r, 0), &v0);
    if (st == TP_OK) st = ox_set_out(c, 0, &v0);
    if (st == TP_OK) st = ox_set_out(c, 1, &sum);
    tp_value vals[] = {r, idx, offv, v0, sum};
    for (size_t i = 0; i < TP_ARRAY_LEN(vals); i++) tp_value_clear(&vals[i]);
    return st;
}

static tp_status map_pool(ox_ctx *c, bool is_max) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    window w;
    TP_TRY(read_window(c, x, NULL, &w, false));
    if (ox_out_used(c, 1)) {
        if (!is_max) return ox_bad(c, "AveragePool has one output");
        int64_t order = ox_attr_i(c, "storage_order", 0);
        if (order != 0 && order != 1) return ox_bad(c, "attribute 'storage_order' %" PRId64, order);
        return map_max_pool_indices(c, x, &w, ox_attr_i(c, "ceil_mode", 0) != 0, order == 1);
    }
    bool ceil_mode = ox_attr_i(c, "ceil_mode", 0) != 0;
    bool count_pad = ox_attr_i(c, "count_include_pad", 0) != 0;
    if (ox_attr_i(c, "storage_order", 0) != 0)
        return ox_unsupported(c, "attribute 'storage_order' %" PRId64 " (only 0, row major)", ox_attr_i(c, "storage_order", 0));
    for (int i = 0; !is_max && i < w.n; i++)
        if (w.d[i] != 1) return ox_unsupported(c, "dilated average pooling");
    tp_value padded = tp_value_none();
    const tp_value *in = x;
    int64_t pad[3];
    bool sym = window_symmetric(&w);
    for (int i = 0; i < w.n; i++) {
        pad[i] = sym ? w.pb[i] : 0;
        if (sym && pad[i] > w.k[i] / 2) sym = false; /* torch limits pads to half the kernel (2 * pad > k) */
    }
    if (!sym) {
        if (!is_max && !count_pad) { /* sum over valid cells / number of valid cells */
            tp_value ones = tp_value_none(), po = tp_value_none(), px = tp_value_none(), ax = tp_value_none();
            tp_value ao = tp_value_none(), r = tp_value_none();
            tp_tensor *o1 = NULL;
            tp_status st = ox_new_tensor(c, dtype_of(x), rank_of(x), sizes_of(x), false, &o1);
            if (st == TP_OK) {
                tp_tensor_fill(o1, 1.0);
                ones = tp_value_tensor(o1);
                st = pad_spatial(c, &ones, &w, 0.0, &po);
            }
            if (st == TP_OK) st = pad_spatial(c, x, &w, 0.0, &px);
            static const tp_op avg[3] = {TP_OP_AVG_POOL1D, TP_OP_AVG_POOL2D, TP_OP_AVG_POOL3D};
            int64_t zero[3] = {0, 0, 0};
            tp_value *srcs[2] = {&px, &po}, *dsts[2] = {&ax, &ao};
            for (int k = 0; k < 2 && st == TP_OK; k++) {
                ox_args B;
                ox_args_init(&B);
                ox_arg(&B, *srcs[k]);
                *srcs[k] = tp_value_none(); /* B owns it now */
                ox_arg_ints(&B, w.k, w.n);
                ox_arg_ints(&B, w.s, w.n);
                ox_arg_ints(&B, zero, w.n);
                ox_arg(&B, tp_value_bool(ceil_mode));
                ox_arg(&B, tp_value_bool(true));
                st = ox_call(c, avg[w.n - 1], &B, dsts[k]);
            }
            if (st == TP_OK) st = ox_call2(c, TP_OP_DIV, &ax, &ao, &r);
            tp_value vals[] = {ones, po, px, ax, ao};
            for (size_t i = 0; i < TP_ARRAY_LEN(vals); i++) tp_value_clear(&vals[i]);
            TP_TRY(st);
            return set_out(c, &r);
        }
        TP_TRY(pad_spatial(c, x, &w, is_max ? -INFINITY : 0.0, &padded));
        in = &padded;
        for (int i = 0; i < w.n; i++) pad[i] = 0;
    }
    tp_value as_float = tp_value_none();
    tp_dtype in_dt = dtype_of(x);
    if (is_max && !tp_dtype_is_float(in_dt)) { /* exact for 8/16-bit ints */
        if (in_dt != TP_UINT8 && in_dt != TP_INT8 && in_dt != TP_INT16) {
            tp_value_clear(&padded);
            return ox_unsupported(c, "max pooling of %s", tp_dtype_name(in_dt));
        }
        tp_status cst = ox_cast(c, in, TP_FLOAT32, &as_float);
        tp_value_clear(&padded);
        TP_TRY(cst);
        padded = as_float;
        in = &padded;
    }
    static const tp_op maxops[3] = {TP_OP_MAX_POOL1D, TP_OP_MAX_POOL2D, TP_OP_MAX_POOL3D};
    static const tp_op avgops[3] = {TP_OP_AVG_POOL1D, TP_OP_AVG_POOL2D, TP_OP_AVG_POOL3D};
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, in);
    ox_arg_ints(&A, w.k, w.n);
    ox_arg_ints(&A, w.s, w.n);
    ox_arg_ints(&A, pad, w.n);
    if (is_max) {
        ox_arg_ints(&A, w.d, w.n);
        ox_arg(&A, tp_value_bool(ceil_mode));
    } else {
        ox_arg(&A, tp_value_bool(ceil_mode));
        ox_arg(&A, tp_value_bool(count_pad));
    }
    tp_value r;
    tp_status st = ox_call(c, is_max ? maxops[w.n - 1] : avgops[w.n - 1], &A, &r);
    tp_value_clear(&padded);
    TP_TRY(st);
    return set_out_cast(c, &r, in_dt);
}

/* MaxUnpool(X, I, output_shape?): ONNX's indices flatten the whole output
 * tensor; max_unpoolNd takes them within each (n, c) plane, so the plane
 * offsets come off first. The output size is output_shape's (a constant)
 * or (in - 1) * stride + kernel - pads. */
static tp_status map_max_unpool(ox_ctx *c) {
    const tp_value *x, *idx;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &idx));
    window w;
    TP_TRY(read_window(c, x, NULL, &w, true));
    int nd = rank_of(x);
    const int64_t *xs = sizes_of(x);
    int64_t out[TP_MAX_DIMS], def[TP_MAX_DIMS];
    for (int i = 0; i < w.n; i++) def[i] = (xs[2 + i] - 1) * w.s[i] + w.k[i] - w.pb[i] - w.pe[i];
    const tp_value *os = ox_in(c, 2);
    if (os) {
        int n;
        TP_TRY(const_ints(c, 2, "output_shape", out, TP_MAX_DIMS, &n));
        if (n != nd) return ox_bad(c, "output_shape has %d values for a rank-%d input", n, nd);
        if (out[0] != xs[0] || out[1] != xs[1]) return ox_bad(c, "output_shape changes the batch or channels");
    } else {
        out[0] = xs[0];
        out[1] = xs[1];
        for (int i = 0; i < w.n; i++) out[2 + i] = def[i];
    }
    /* the indices address the default-size output; a larger output_shape
     * pads it at the end of each dim (ONNX's reference) */
    bool resized = false;
    int64_t plane = 1, osz[TP_MAX_DIMS];
    for (int i = 2; i < nd; i++) {
        if (out[i] < 1 || def[i - 2] < 1) return ox_bad(c, "output size %" PRId64 " for spatial dim %d", out[i], i - 2);
        if (out[i] < def[i - 2]) return ox_bad(c, "output_shape is smaller than the pooled input's size");
        resized |= out[i] != def[i - 2];
        plane *= def[i - 2];
    }
    if (resized && w.n == 3) return ox_unsupported(c, "a 3-D MaxUnpool with a larger output_shape");
    osz[0] = xs[0];
    osz[1] = xs[1];
    for (int i = 2; i < nd; i++) osz[i] = 1;
    tp_tensor *off = NULL;
    tp_value offv = tp_value_none(), local = tp_value_none(), r = tp_value_none();
    tp_status st = ox_new_tensor(c, TP_INT64, nd, osz, false, &off);
    if (st == TP_OK) {
        int64_t *o = tp_tensor_data(off);
        for (int64_t k = 0; k < xs[0] * xs[1]; k++) o[k] = k * plane;
        offv = tp_value_tensor(off);
        st = ox_call2(c, TP_OP_SUB, idx, &offv, &local);
    }
    if (st == TP_OK && resized && w.n == 2) { /* (p / Dw) * Ow + p % Dw */
        tp_value dw = tp_value_none(), ow = tp_value_none(), y = tp_value_none(), t = tp_value_none();
        st = ox_scalar_tensor(TP_INT64, (double)def[1], &dw);
        if (st == TP_OK) st = ox_scalar_tensor(TP_INT64, (double)out[3], &ow);
        if (st == TP_OK) st = int_div(c, &local, &dw, &y);
        if (st == TP_OK) st = ox_call2(c, TP_OP_MUL, &y, &dw, &t);                    /* y * Dw */
        if (st == TP_OK) st = take(ox_call2(c, TP_OP_SUB, &local, &t, &r), &t, &r);  /* x */
        if (st == TP_OK) st = take(ox_call2(c, TP_OP_MUL, &y, &ow, &r), &y, &r);     /* y * Ow */
        if (st == TP_OK) st = take(ox_call2(c, TP_OP_ADD, &y, &t, &r), &local, &r);  /* y * Ow + x */
        tp_value tmp[] = {dw, ow, y, t};
        for (size_t i = 0; i < TP_ARRAY_LEN(tmp); i++) tp_value_clear(&tmp[i]);
    }
    static const tp_op ops[3] = {TP_OP_MAX_UNPOOL1D, TP_OP_MAX_UNPOOL2D, TP_OP_MAX_UNPOOL3D};
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, x);
        ox_arg_ref(&A, &local);
        ox_arg(&A, tp_value_none());
        ox_arg(&A, tp_value_none());
        ox_arg(&A, tp_value_none());
        ox_arg_ints(&A, out + 2, w.n);
        st = ox_call(c, ops[w.n - 1], &A, &r);
    }
    if (st == TP_OK) st = set_out(c, &r);
    tp_value all[] = {offv, local, r};
    for (size_t i = 0; i < TP_ARRAY_LEN(all); i++) tp_value_clear(&all[i]);
    return st;
}

/* LpPool / GlobalLpPool: (sum over the window of |x|^p)^(1/p), as a sum
 * pool (avg_pool with divisor 1: ceil-mode windows counted as they are)
 * of |x|^p; asymmetric pads become an explicit zero pad. */
static tp_status map_lp_pool(ox_ctx *c, bool global) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    if (!tp_dtype_is_float(dtype_of(x))) return ox_unsupported(c, "LpPool of %s", tp_dtype_name(dtype_of(x)));
    double p = (double)ox_attr_i(c, "p", 2);
    if (!(p > 0)) return ox_bad(c, "attribute 'p' %g must be positive", p);
    int nd = rank_of(x);
    if (nd < 3 || nd > 5) return ox_unsupported(c, "LpPool on a rank-%d input", nd);
    tp_value a = tp_value_none(), t = tp_value_none(), tmp = tp_value_none(), padded = tp_value_none();
    tp_status st = ox_call1(c, TP_OP_ABS, x, &a);
    if (st == TP_OK && p != 1.0) st = take(binop_scalar(c, TP_OP_POW, &a, p, &tmp), &a, &tmp);
    if (st == TP_OK && global) {
        int64_t dims[3];
        for (int i = 2; i < nd; i++) dims[i - 2] = i;
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, &a);
        ox_arg_ints(&A, dims, nd - 2);
        ox_arg(&A, tp_value_bool(true));
        st = ox_call(c, TP_OP_SUM, &A, &t);
    } else if (st == TP_OK) {
        window w;
        st = read_window(c, x, NULL, &w, false);
        for (int i = 0; st == TP_OK && i < w.n; i++)
            if (w.d[i] != 1) st = ox_unsupported(c, "dilated LpPool");
        int64_t pad[3] = {0, 0, 0};
        const tp_value *in = &a;
        if (st == TP_OK && window_symmetric(&w)) {
            for (int i = 0; i < w.n; i++) pad[i] = w.pb[i];
            for (int i = 0; i < w.n; i++)
                if (2 * pad[i] > w.k[i]) pad[0] = -1; /* torch limits pads to half the kernel */
        }
        if (st == TP_OK && (!window_symmetric(&w) || pad[0] < 0)) {
            st = pad_spatial(c, &a, &w, 0.0, &padded);
            in = &padded;
            pad[0] = pad[1] = pad[2] = 0;
        }
        static const tp_op avg[3] = {TP_OP_AVG_POOL1D, TP_OP_AVG_POOL2D, TP_OP_AVG_POOL3D};
        if (st == TP_OK) {
            ox_args A;
            ox_args_init(&A);
            ox_arg_ref(&A, in);
            ox_arg_ints(&A, w.k, w.n);
            ox_arg_ints(&A, w.s, w.n);
            ox_arg_ints(&A, pad, w.n);
            ox_arg(&A, tp_value_bool(ox_attr_i(c, "ceil_mode", 0) != 0));
            ox_arg(&A, tp_value_bool(true));
            ox_arg(&A, tp_value_int(1));
            st = ox_call(c, avg[w.n - 1], &A, &t);
        }
        /* ONNX drops a ceil-mode window that starts in the end padding
         * (counted from the unpadded input); an explicit pad hid that */
        for (int i = 0; st == TP_OK && ox_attr_i(c, "ceil_mode", 0) && i < w.n; i++) {
            int64_t in = sizes_of(x)[2 + i], num = in + w.pb[i] + w.pe[i] - w.k[i];
            int64_t o = (num + w.s[i] - 1) / w.s[i] + 1;
            if ((o - 1) * w.s[i] >= in + w.pb[i]) o--;
            if (o < sizes_of(&t)[2 + i]) {
                ox_args A;
                ox_args_init(&A);
                ox_arg_ref(&A, &t);
                ox_arg(&A, tp_value_int(2 + i));
                ox_arg(&A, tp_value_int(0));
                ox_arg(&A, tp_value_int(o));
                st = take(ox_call(c, TP_OP_SLICE, &A, &tmp), &t, &tmp);
            }
        }
    }
    if (st == TP_OK && p != 1.0) st = take(binop_scalar(c, TP_OP_POW, &t, 1.0 / p, &tmp), &t, &tmp);
    if (st == TP_OK) st = set_out(c, &t);
    tp_value all[] = {a, t, tmp, padded};
    for (size_t i = 0; i < TP_ARRAY_LEN(all); i++) tp_value_clear(&all[i]);
    return st;
}

static tp_status map_global_pool(ox_ctx *c, bool is_max) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int nd = rank_of(x);
    int64_t dims[TP_MAX_DIMS];
    for (int i = 2; i < nd; i++) dims[i - 2] = i;
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ints(&A, dims, nd - 2);
    ox_arg(&A, tp_value_bool(true));
    tp_value r;
    TP_TRY(ox_call(c, is_max ? TP_OP_AMAX : TP_OP_MEAN, &A, &r));
    return set_out(c, &r);
}

/* ---- normalisation ------------------------------------------------------------------ */

/* BatchNormalization with training_mode (opset 14+): normalise with the
 * batch's statistics (population variance) and output the running ones,
 * input * momentum + batch * (1 - momentum), as ONNX defines them. */
static tp_status map_batch_norm_training(ox_ctx *c, const tp_value *x, const tp_value *sc, const tp_value *b,
                                         const tp_value *mean, const tp_value *var) {
    int nd = rank_of(x);
    if (nd < 2) return ox_bad(c, "input must have rank >= 2");
    const int64_t *xs = sizes_of(x);
    int64_t dims[TP_MAX_DIMS], cshape[TP_MAX_DIMS], nc = 0, chan[1] = {xs[1]};
    for (int i = 0; i < nd; i++) {
        if (i != 1) dims[nc++] = i;
        cshape[i] = i == 1 ? xs[1] : 1;
    }
    double mom = ox_attr_f(c, "momentum", 0.9), eps = ox_attr_f(c, "epsilon", 1e-5);
    tp_value mk = tp_value_none(), xc = tp_value_none(), sq = tp_value_none(), vk = tp_value_none();
    tp_value t = tp_value_none(), tmp = tp_value_none(), e = tp_value_none(), y = tp_value_none();
    tp_value s4 = tp_value_none(), b4 = tp_value_none(), m1 = tp_value_none(), m2 = tp_value_none();
    tp_value rm = tp_value_none(), rv = tp_value_none(), bm = tp_value_none(), bv = tp_value_none();
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ints(&A, dims, (int)nc);
    ox_arg(&A, tp_value_bool(true));
    tp_status st = ox_call(c, TP_OP_MEAN, &A, &mk); /* [1, C, 1, ...] */
    if (st == TP_OK) st = ox_call2(c, TP_OP_SUB, x, &mk, &xc);
    if (st == TP_OK) st = ox_call2(c, TP_OP_MUL, &xc, &xc, &sq);
    if (st == TP_OK) {
        ox_args_init(&A);
        ox_arg_ref(&A, &sq);
        ox_arg_ints(&A, dims, (int)nc);
        ox_arg(&A, tp_value_bool(true));
        st = ox_call(c, TP_OP_MEAN, &A, &vk);
    }
    if (st == TP_OK) st = scalar_like(x, eps, &e);
    if (st == TP_OK) st = ox_call2(c, TP_OP_ADD, &vk, &e, &t);
    if (st == TP_OK) st = take(ox_call1(c, TP_OP_SQRT, &t, &tmp), &t, &tmp);
    if (st == TP_OK) st = ox_call2(c, TP_OP_DIV, &xc, &t, &y);
    if (st == TP_OK) st = reshape(c, sc, cshape, nd, &s4);
    if (st == TP_OK) st = reshape(c, b, cshape, nd, &b4);
    if (st == TP_OK) st = take(ox_call2(c, TP_OP_MUL, &y, &s4, &tmp), &y, &tmp);
    if (st == TP_OK) st = take(ox_call2(c, TP_OP_ADD, &y, &b4, &tmp), &y, &tmp);
    /* running statistics */
    if (st == TP_OK) st = scalar_like(x, mom, &m1);
    if (st == TP_OK) st = scalar_like(x, 1.0 - mom, &m2);
    if (st == TP_OK) st = reshape(c, &mk, chan, 1, &bm);
    if (st == TP_OK) st = reshape(c, &vk, chan, 1, &bv);
    if (st == TP_OK) st = ox_call2(c, TP_OP_MUL, mean, &m1, &rm);
    if (st == TP_OK) st = take(ox_call2(c, TP_OP_MUL, &bm, &m2, &tmp), &bm, &tmp);
    if (st == TP_OK) st = take(ox_call2(c, TP_OP_ADD, &rm, &bm, &tmp), &rm, &tmp);
    if (st == TP_OK) st = ox_call2(c, TP_OP_MUL, var, &m1, &rv);
    if (st == TP_OK) st = take(ox_call2(c, TP_OP_MUL, &bv, &m2, &tmp), &bv, &tmp);
    if (st == TP_OK) st = take(ox_call2(c, TP_OP_ADD, &rv, &bv, &tmp), &rv, &tmp);
    if (st == TP_OK) st = ox_set_out(c, 0, &y);
    if (st == TP_OK && ox_out_used(c, 1)) st = ox_set_out(c, 1, &rm);
    if (st == TP_OK && ox_out_used(c, 2)) st = ox_set_out(c, 2, &rv);
    tp_value all[] = {mk, xc, sq, vk, t, tmp, e, y, s4, b4, m1, m2, rm, rv, bm, bv};
    for (size_t i = 0; i < TP_ARRAY_LEN(all); i++) tp_value_clear(&all[i]);
    return st;
}

static tp_status map_batch_norm(ox_ctx *c) {
    const tp_value *x, *sc, *b, *mean, *var;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &sc));
    TP_TRY(need(c, 2, &b));
    TP_TRY(need(c, 3, &mean));
    TP_TRY(need(c, 4, &var));
    if (ox_attr_i(c, "training_mode", 0) != 0) return map_batch_norm_training(c, x, sc, b, mean, var);
    if (ox_out_used(c, 1) || ox_out_used(c, 2))
        return ox_unsupported(c, "running statistics outputs without training_mode (opset < 14)");
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ref(&A, mean);
    ox_arg_ref(&A, var);
    ox_arg_ref(&A, sc);
    ox_arg_ref(&A, b);
    ox_arg(&A, tp_value_bool(false));
    ox_arg(&A, tp_value_float(ox_attr_f(c, "momentum", 0.9)));
    ox_arg(&A, tp_value_float(ox_attr_f(c, "epsilon", 1e-5)));
    tp_value r;
    TP_TRY(ox_call(c, TP_OP_BATCH_NORM, &A, &r));
    return set_out(c, &r);
}

static tp_status map_instance_norm(ox_ctx *c) {
    const tp_value *x, *sc, *b;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &sc));
    TP_TRY(need(c, 2, &b));
    if (rank_of(x) < 2) return ox_bad(c, "input must have rank >= 2");
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(sizes_of(x)[1]));
    ox_arg_ref(&A, sc);
    ox_arg_ref(&A, b);
    ox_arg(&A, tp_value_float(ox_attr_f(c, "epsilon", 1e-5)));
    tp_value r;
    TP_TRY(ox_call(c, TP_OP_GROUP_NORM, &A, &r));
    return set_out(c, &r);
}

/* Gelu (opset 20): approximate "none" (erf) or "tanh". */
static tp_status map_gelu(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    char buf[16];
    const char *ap = ox_attr_s(c, "approximate", "none", buf, sizeof buf);
    if (strcmp(ap, "none") && strcmp(ap, "tanh")) return ox_bad(c, "approximate '%s' (none or tanh)", ap);
    tp_value av;
    TP_TRY(tp_value_str(ap, &av));
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_kw(&A, "approximate", av);
    tp_value r;
    TP_TRY(ox_call(c, TP_OP_GELU, &A, &r));
    return set_out(c, &r);
}

/* Swish: x * sigmoid(alpha * x) (silu when alpha is 1); SwiGLU (opset 28):
 * that of its first input times its second (same shapes). */
static tp_status map_swish(ox_ctx *c) {
    const tp_value *x, *g = NULL;
    TP_TRY(need(c, 0, &x));
    if (ox_n_in(c) > 1) {
        TP_TRY(need(c, 1, &g));
        if (rank_of(x) != rank_of(g) || memcmp(sizes_of(x), sizes_of(g), sizeof(int64_t) * (size_t)rank_of(x)) ||
            dtype_of(x) != dtype_of(g))
            return ox_bad(c, "SwiGLU's inputs must have the same shape and dtype");
    }
    double alpha = ox_attr_f(c, "alpha", 1.0);
    tp_value r = tp_value_none(), ax = tp_value_none(), sg = tp_value_none(), tmp = tp_value_none();
    tp_status st;
    if (alpha == 1.0) {
        st = ox_call1(c, TP_OP_SILU, x, &r);
    } else {
        st = binop_scalar(c, TP_OP_MUL, x, alpha, &ax);
        if (st == TP_OK) st = ox_call1(c, TP_OP_SIGMOID, &ax, &sg);
        if (st == TP_OK) st = ox_call2(c, TP_OP_MUL, x, &sg, &r);
    }
    if (st == TP_OK && g) st = take(ox_call2(c, TP_OP_MUL, &r, g, &tmp), &r, &tmp);
    tp_value_clear(&ax);
    tp_value_clear(&sg);
    if (st != TP_OK) {
        tp_value_clear(&r);
        return st;
    }
    return set_out(c, &r);
}

/* GroupNormalization: group_norm with per-channel scale and bias (opset
 * 21), or per-group ones (opset 18) repeated over each group's channels. */
static tp_status map_group_norm(ox_ctx *c) {
    const tp_value *x, *sc, *bi;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &sc));
    TP_TRY(need(c, 2, &bi));
    if (ox_attr_i(c, "stash_type", 1) != 1) return ox_unsupported(c, "stash_type other than float");
    int64_t groups = ox_attr_i(c, "num_groups", 0);
    if (rank_of(x) < 2 || groups <= 0 || sizes_of(x)[1] % groups)
        return ox_bad(c, "num_groups %" PRId64 " must divide the channels", groups);
    int64_t ch = sizes_of(x)[1], per = ch / groups;
    tp_value w = tp_value_none(), b = tp_value_none(), r = tp_value_none();
    tp_status st = TP_OK;
    for (int k = 0; k < 2 && st == TP_OK; k++) {
        const tp_value *v = k ? bi : sc;
        tp_value *o = k ? &b : &w;
        if (rank_of(v) != 1 || (sizes_of(v)[0] != ch && sizes_of(v)[0] != groups)) {
            st = ox_bad(c, "scale and bias must hold one value per channel (or per group before opset 21)");
        } else if (sizes_of(v)[0] == ch) {
            st = tp_value_copy(v, o);
        } else {
            ox_args A;
            ox_args_init(&A);
            ox_arg_ref(&A, v);
            ox_arg(&A, tp_value_int(per));
            ox_arg(&A, tp_value_int(0));
            st = ox_call(c, TP_OP_REPEAT_INTERLEAVE, &A, o);
        }
    }
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, x);
        ox_arg(&A, tp_value_int(groups));
        ox_arg_ref(&A, &w);
        ox_arg_ref(&A, &b);
        ox_arg(&A, tp_value_float(ox_attr_f(c, "epsilon", 1e-5)));
        st = ox_call(c, TP_OP_GROUP_NORM, &A, &r);
    }
    tp_value_clear(&w);
    tp_value_clear(&b);
    TP_TRY(st);
    return set_out(c, &r);
}

/* RMSNormalization (opset 23): x / sqrt(mean(x^2 over dims axis..) + eps)
 * * scale: rms_norm when scale has the normalized shape, else composed
 * (scale broadcast). */
static tp_status map_rms_norm(ox_ctx *c) {
    const tp_value *x, *sc;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &sc));
    if (ox_attr_i(c, "stash_type", 1) != 1) return ox_unsupported(c, "stash_type other than float");
    int nd = rank_of(x), axis;
    TP_TRY(wrap_axis(c, ox_attr_i(c, "axis", -1), nd, &axis));
    double eps = ox_attr_f(c, "epsilon", 1e-5);
    int n = nd - axis;
    bool same = rank_of(sc) == n && !ox_in_dyn(c, 0) && !ox_in_dyn(c, 1) &&
                !memcmp(sizes_of(sc), sizes_of(x) + axis, sizeof(int64_t) * (size_t)n);
    tp_value r = tp_value_none();
    if (same) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, x);
        ox_arg_ints(&A, sizes_of(x) + axis, n);
        ox_arg_ref(&A, sc);
        ox_arg(&A, tp_value_float(eps));
        TP_TRY(ox_call(c, TP_OP_RMS_NORM, &A, &r));
        return set_out_cast(c, &r, dtype_of(x));
    }
    int64_t axes[TP_MAX_DIMS];
    for (int i = 0; i < n; i++) axes[i] = axis + i;
    tp_value sq = tp_value_none(), m = tp_value_none(), tmp = tp_value_none();
    tp_status st = ox_call2(c, TP_OP_MUL, x, x, &sq);
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, &sq);
        ox_arg_ints(&A, axes, n);
        ox_arg(&A, tp_value_bool(true));
        st = ox_call(c, TP_OP_MEAN, &A, &m);
    }
    if (st == TP_OK) st = take(binop_scalar(c, TP_OP_ADD, &m, eps, &tmp), &m, &tmp);
    if (st == TP_OK) st = take(ox_call1(c, TP_OP_RSQRT, &m, &tmp), &m, &tmp);
    if (st == TP_OK) st = ox_call2(c, TP_OP_MUL, x, &m, &r);
    if (st == TP_OK) st = take(ox_call2(c, TP_OP_MUL, &r, sc, &tmp), &r, &tmp);
    tp_value_clear(&sq);
    tp_value_clear(&m);
    if (st != TP_OK) {
        tp_value_clear(&r);
        return st;
    }
    return set_out_cast(c, &r, dtype_of(x));
}

static tp_status map_layer_norm(ox_ctx *c) {
    const tp_value *x, *sc, *b = ox_in(c, 2);
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &sc));
    if (ox_attr_i(c, "stash_type", 1) != 1) return ox_unsupported(c, "stash_type other than float");
    int nd = rank_of(x), axis;
    TP_TRY(wrap_axis(c, ox_attr_i(c, "axis", -1), nd, &axis));
    if (ox_out_used(c, 1) || ox_out_used(c, 2)) { /* Mean and InvStdDev over axis.. (float) */
        int64_t axes[TP_MAX_DIMS];
        for (int i = axis; i < nd; i++) axes[i - axis] = i;
        tp_value xf = tp_value_none(), mean = tp_value_none(), t = tp_value_none(), tmp = tp_value_none();
        ox_args B;
        tp_status st = ox_cast(c, x, TP_FLOAT32, &xf);
        if (st == TP_OK) {
            ox_args_init(&B);
            ox_arg_ref(&B, &xf);
            ox_arg_ints(&B, axes, nd - axis);
            ox_arg(&B, tp_value_bool(true));
            st = ox_call(c, TP_OP_MEAN, &B, &mean);
        }
        if (st == TP_OK) st = ox_call2(c, TP_OP_SUB, &xf, &mean, &t);
        if (st == TP_OK) st = take(ox_call2(c, TP_OP_MUL, &t, &t, &tmp), &t, &tmp);
        if (st == TP_OK) {
            ox_args_init(&B);
            ox_arg_ref(&B, &t);
            ox_arg_ints(&B, axes, nd - axis);
            ox_arg(&B, tp_value_bool(true));
            st = take(ox_call(c, TP_OP_MEAN, &B, &tmp), &t, &tmp);
        }
        if (st == TP_OK) st = take(binop_scalar(c, TP_OP_ADD, &t, ox_attr_f(c, "epsilon", 1e-5), &tmp), &t, &tmp);
        if (st == TP_OK) st = take(ox_call1(c, TP_OP_RSQRT, &t, &tmp), &t, &tmp);
        if (st == TP_OK) st = ox_set_out(c, 1, &mean); /* both take the value over */
        if (st == TP_OK) st = ox_set_out(c, 2, &t);
        tp_value_clear(&xf);
        tp_value_clear(&mean);
        tp_value_clear(&t);
        TP_TRY(st);
    }
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ints(&A, sizes_of(x) + axis, nd - axis);
    ox_arg_ref(&A, sc);
    ox_arg_ref(&A, b);
    ox_arg(&A, tp_value_float(ox_attr_f(c, "epsilon", 1e-5)));
    tp_value r;
    TP_TRY(ox_call(c, TP_OP_LAYER_NORM, &A, &r));
    return set_out(c, &r);
}

/* Softmax / LogSoftmax / Hardmax */
static tp_status map_softmax(ox_ctx *c, tp_op op, bool hard) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int nd = rank_of(x), axis;
    bool old = ox_opset(c) < 13;
    TP_TRY(wrap_axis(c, ox_attr_i(c, "axis", old ? 1 : -1), nd, &axis));
    tp_value in, r;
    if (old && axis != nd - 1) { /* coerce to 2-D [prod(:axis), prod(axis:)] */
        int64_t a = 1, b = 1;
        for (int i = 0; i < nd; i++) {
            /* an empty input's other dims may multiply past int64 */
            if (!tp_mul_overflow_i64(i < axis ? a : b, sizes_of(x)[i], i < axis ? &a : &b))
                return ox_bad(c, "input shape too large to coerce to 2-D");
        }
        int64_t shape2[2] = {a, b};
        TP_TRY(reshape(c, x, shape2, 2, &in));
        axis = 1;
    } else {
        TP_TRY(tp_value_copy(x, &in));
    }
    if (hard) {
        /* one-hot of the first maximum along axis */
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, &in);
        ox_arg(&A, tp_value_int(axis));
        ox_arg(&A, tp_value_bool(true));
        tp_value am;
        tp_status st = ox_call(c, TP_OP_ARGMAX, &A, &am);
        if (st != TP_OK) {
            tp_value_clear(&in);
            return st;
        }
        int ind = rank_of(&in);
        int64_t shp[TP_MAX_DIMS], n = sizes_of(&in)[axis];
        for (int i = 0; i < ind; i++) shp[i] = i == axis ? n : 1;
        tp_tensor *ar;
        st = ox_new_tensor(c, TP_INT64, ind, shp, false, &ar);
        if (st == TP_OK) {
            int64_t *p = tp_tensor_data(ar);
            for (int64_t i = 0; i < n; i++) p[i] = i;
        }
        tp_value arv = st == TP_OK ? tp_value_tensor(ar) : tp_value_none(), eq;
        if (st == TP_OK) st = ox_call2(c, TP_OP_EQ, &am, &arv, &eq);
        tp_value_clear(&arv);
        tp_value_clear(&am);
        if (st == TP_OK) {
            st = ox_cast(c, &eq, dtype_of(x), &r);
            tp_value_clear(&eq);
        }
        tp_value_clear(&in);
        TP_TRY(st);
    } else {
        ox_args A;
        ox_args_init(&A);
        ox_arg(&A, in);
        ox_arg(&A, tp_value_int(axis));
        TP_TRY(ox_call(c, op, &A, &r));
    }
    if (old && rank_of(&r) != nd) {
        tp_value r2;
        tp_status st = reshape(c, &r, sizes_of(x), nd, &r2);
        tp_value_clear(&r);
        TP_TRY(st);
        r = r2;
    }
    return set_out(c, &r);
}

static tp_status map_lrn(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int64_t size = ox_attr_i(c, "size", 0);
    if (size < 1) return ox_bad(c, "attribute 'size' %" PRId64 " must be positive", size);
    double alpha = ox_attr_f(c, "alpha", 1e-4), beta = ox_attr_f(c, "beta", 0.75), bias = ox_attr_f(c, "bias", 1.0);
    int nd = rank_of(x);
    if (nd < 3) return ox_unsupported(c, "LRN on rank %d", nd);
    const int64_t *s = sizes_of(x);
    int64_t rest = 1;
    for (int i = 2; i < nd; i++) rest *= s[i];
    /* [N, 1, C, rest] -> pad C -> avg_pool2d over (size, 1) -> * size */
    tp_value t = tp_value_none(), tmp = tp_value_none(), r = tp_value_none();
    int64_t shp[4] = {s[0], 1, s[1], rest};
    int64_t before = (size - 1) / 2, after = size - 1 - before;
    int64_t pads[4] = {0, 0, before, after};
    int64_t k[2] = {size, 1}, st1[2] = {1, 1}, p0[2] = {0, 0};
    ox_args A;
    tp_status st = ox_call2(c, TP_OP_MUL, x, x, &t);
    if (st == TP_OK) st = take(reshape(c, &t, shp, 4, &tmp), &t, &tmp);
    if (st == TP_OK) {
        ox_args_init(&A);
        ox_arg_ref(&A, &t);
        ox_arg_ints(&A, pads, 4);
        st = take(ox_call(c, TP_OP_PAD, &A, &tmp), &t, &tmp);
    }
    if (st == TP_OK) {
        ox_args_init(&A);
        ox_arg_ref(&A, &t);
        ox_arg_ints(&A, k, 2);
        ox_arg_ints(&A, st1, 2);
        ox_arg_ints(&A, p0, 2);
        st = take(ox_call(c, TP_OP_AVG_POOL2D, &A, &tmp), &t, &tmp);
    }
    if (st == TP_OK) st = take(reshape(c, &t, s, nd, &tmp), &t, &tmp);
    /* (bias + alpha * mean) ^ beta, mean = sum/size: alpha/size * sum = alpha * mean */
    if (st == TP_OK) st = take(binop_scalar(c, TP_OP_MUL, &t, alpha, &tmp), &t, &tmp);
    if (st == TP_OK) st = take(binop_scalar(c, TP_OP_ADD, &t, bias, &tmp), &t, &tmp);
    if (st == TP_OK) st = take(binop_scalar(c, TP_OP_POW, &t, beta, &tmp), &t, &tmp);
    if (st == TP_OK) st = ox_call2(c, TP_OP_DIV, x, &t, &r);
    tp_value_clear(&t);
    TP_TRY(st);
    return set_out(c, &r);
}

static tp_status map_lp_norm(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int axis;
    TP_TRY(wrap_axis(c, ox_attr_i(c, "axis", -1), rank_of(x), &axis));
    int64_t p = ox_attr_i(c, "p", 2);
    if (p != 1 && p != 2) return ox_bad(c, "p must be 1 or 2");
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_float((double)p));
    int64_t d = axis;
    ox_arg_ints(&A, &d, 1);
    ox_arg(&A, tp_value_bool(true));
    tp_value n, r;
    TP_TRY(ox_call(c, TP_OP_NORM, &A, &n));
    /* A zero norm gives 0, not 0/0 (as onnx's reference). */
    tp_value q = tp_value_none(), z = tp_value_none(), zero = tp_value_none();
    tp_status st = ox_call2(c, TP_OP_DIV, x, &n, &q);
    if (st == TP_OK) st = ox_scalar_tensor(dtype_of(&q), 0, &zero);
    if (st == TP_OK) st = ox_call2(c, TP_OP_EQ, &n, &zero, &z);
    tp_value_clear(&n);
    if (st == TP_OK) {
        ox_args_init(&A);
        ox_arg(&A, z);
        ox_arg(&A, zero);
        ox_arg(&A, q);
        TP_TRY(ox_call(c, TP_OP_WHERE, &A, &r));
        return set_out(c, &r);
    }
    tp_value_clear(&q);
    tp_value_clear(&z);
    tp_value_clear(&zero);
    return st;
}

static tp_status map_mvn(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int64_t axes[TP_MAX_DIMS];
    int n;
    TP_TRY(ox_attr_ints(c, "axes", axes, TP_MAX_DIMS, &n));
    if (n < 0) {
        axes[0] = 0, axes[1] = 2, axes[2] = 3;
        n = 3;
    }
    tp_value mean = tp_value_none(), d = tp_value_none(), t = tp_value_none(), tmp = tp_value_none();
    tp_value r = tp_value_none();
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ints(&A, axes, n);
    ox_arg(&A, tp_value_bool(true));
    tp_status st = ox_call(c, TP_OP_MEAN, &A, &mean);
    if (st == TP_OK) st = ox_call2(c, TP_OP_SUB, x, &mean, &d);
    if (st == TP_OK) st = ox_call2(c, TP_OP_MUL, &d, &d, &t);
    if (st == TP_OK) {
        ox_args_init(&A);
        ox_arg_ref(&A, &t);
        ox_arg_ints(&A, axes, n);
        ox_arg(&A, tp_value_bool(true));
        st = take(ox_call(c, TP_OP_MEAN, &A, &tmp), &t, &tmp);
    }
    if (st == TP_OK) st = take(binop_scalar(c, TP_OP_ADD, &t, 1e-9, &tmp), &t, &tmp);
    if (st == TP_OK) st = take(ox_call1(c, TP_OP_SQRT, &t, &tmp), &t, &tmp);
    if (st == TP_OK) st = ox_call2(c, TP_OP_DIV, &d, &t, &r);
    tp_value_clear(&mean);
    tp_value_clear(&d);
    tp_value_clear(&t);
    TP_TRY(st);
    return set_out(c, &r);
}

/* ---- reductions ------------------------------------------------------------------------ */

/* The lowest (or highest) value of dtype: -inf/+inf for floats, false/true
 * for bool, the integer type's limits otherwise. */
static int64_t int_extreme(tp_dtype dt, bool lowest) {
    switch (dt) {
    case TP_BOOL: return lowest ? 0 : 1;
    case TP_UINT8: return lowest ? 0 : UINT8_MAX;
    case TP_INT8: return lowest ? INT8_MIN : INT8_MAX;
    case TP_INT16: return lowest ? INT16_MIN : INT16_MAX;
    case TP_INT32: return lowest ? INT32_MIN : INT32_MAX;
    default: return lowest ? INT64_MIN : INT64_MAX;
    }
}

static void store_extreme(void *p, tp_dtype dt, bool lowest) {
    if (tp_dtype_is_float(dt)) tp__store_f64(p, dt, lowest ? -INFINITY : INFINITY);
    else tp__store_i64(p, dt, int_extreme(dt, lowest));
}

/* ReduceMax/ReduceMin over an empty set (opset 18+): the identity of the
 * reduction, i.e. the lowest (max) or highest (min) value of the type, -inf /
 * +inf for floats, false / true for bool. Static shapes only. */
static tp_status reduce_empty_extreme(ox_ctx *c, const tp_value *x, const int64_t *axes, int n, bool keep, bool is_max) {
    int nd = rank_of(x), on = 0;
    int64_t shape[TP_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        bool red = false;
        for (int i = 0; i < n; i++) red |= axes[i] == d;
        if (!red) shape[on++] = sizes_of(x)[d];
        else if (keep) shape[on++] = 1;
    }
    tp_dtype dt = dtype_of(x);
    tp_tensor *t;
    TP_TRY(ox_new_tensor(c, dt, on, shape, false, &t));
    int64_t cnt = tp_tensor_numel(t);
    size_t es = tp_dtype_size(dt);
    char *p = tp_tensor_data(t);
    for (int64_t i = 0; i < cnt; i++) store_extreme(p + (size_t)i * es, dt, is_max);
    tp_value v = tp_value_tensor(t);
    return set_out(c, &v);
}

static tp_status map_reduce(ox_ctx *c, const char *kind) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int64_t axes[TP_MAX_DIMS];
    int n;
    bool axes_input = ox_opset(c) >= 18 || (!strcmp(kind, "Sum") && ox_opset(c) >= 13);
    /* axes given when the program runs (an empty list is known now) */
    const tp_value *rt_axes = axes_input && ox_in(c, 1) && !ox_const(ox_in(c, 1)) && !ox_in_dyn(c, 0) &&
                                      ox_meta(ox_in(c, 1)) && tp_tensor_numel(ox_meta(ox_in(c, 1))) > 0
                                  ? ox_in(c, 1)
                                  : NULL;
    if (rt_axes) n = 1;
    else if (axes_input && ox_in(c, 1) && !ox_const(ox_in(c, 1)) && ox_meta(ox_in(c, 1)) &&
             tp_tensor_numel(ox_meta(ox_in(c, 1))) == 0)
        n = 0;
    else TP_TRY(get_axes(c, axes_input ? 1 : -1, axes, &n));
    bool keep = ox_attr_i(c, "keepdims", 1) != 0;
    int nd = rank_of(x);
    if (n <= 0) {
        if (ox_attr_i(c, "noop_with_empty_axes", 0) != 0) return map_identity(c);
        for (int i = 0; i < nd; i++) axes[i] = i;
        n = nd;
    }
    for (int i = 0; i < n && !rt_axes; i++) {
        int a;
        TP_TRY(wrap_axis(c, axes[i], nd, &a));
        axes[i] = a;
    }
    tp_dtype dt = dtype_of(x);
    if ((!strcmp(kind, "Max") || !strcmp(kind, "Min")) && !ox_in_dyn(c, 0) && !rt_axes) {
        bool empty = false;
        for (int i = 0; i < n; i++) empty |= sizes_of(x)[axes[i]] == 0;
        if (empty) return reduce_empty_extreme(c, x, axes, n, keep, kind[1] == 'a');
    }
    tp_value in, r;
    tp_op op;
    const char *post = NULL;
    if (!strcmp(kind, "Sum") || !strcmp(kind, "LogSum")) {
        op = TP_OP_SUM;
        TP_TRY(tp_value_copy(x, &in));
        if (kind[0] == 'L') post = "log";
    } else if (!strcmp(kind, "Mean")) {
        op = TP_OP_MEAN;
        TP_TRY(tp_value_copy(x, &in));
    } else if (!strcmp(kind, "Max") || !strcmp(kind, "Min")) {
        op = kind[1] == 'a' ? TP_OP_AMAX : TP_OP_AMIN;
        TP_TRY(tp_value_copy(x, &in));
    } else if (!strcmp(kind, "Prod")) {
        op = TP_OP_PROD;
        TP_TRY(tp_value_copy(x, &in));
    } else if (!strcmp(kind, "L1")) {
        op = TP_OP_SUM;
        TP_TRY(ox_call1(c, TP_OP_ABS, x, &in));
    } else if (!strcmp(kind, "L2")) {
        op = TP_OP_SUM;
        TP_TRY(ox_call2(c, TP_OP_MUL, x, x, &in));
        post = "sqrt";
    } else if (!strcmp(kind, "SumSquare")) {
        op = TP_OP_SUM;
        TP_TRY(ox_call2(c, TP_OP_MUL, x, x, &in));
    } else if (!strcmp(kind, "LogSumExp")) {
        op = TP_OP_LOGSUMEXP;
        TP_TRY(tp_value_copy(x, &in));
    } else {
        return ox_unsupported(c, "reduction %s", kind);
    }
    if (rt_axes) {
        tp_status st = ox_run_time_reduce(c, &in, rt_axes, op, keep, &r);
        tp_value_clear(&in);
        TP_TRY(st);
    } else if (op == TP_OP_PROD && n > 1) { /* prod takes one dim at a time */
        for (int i = n - 1; i >= 0; i--) {
            ox_args A;
            ox_args_init(&A);
            ox_arg(&A, in);
            ox_arg_ints(&A, &axes[i], 1);
            ox_arg(&A, tp_value_bool(keep));
            TP_TRY(ox_call(c, op, &A, &in));
        }
        r = in;
    } else {
        ox_args A;
        ox_args_init(&A);
        ox_arg(&A, in);
        ox_arg_ints(&A, axes, n);
        ox_arg(&A, tp_value_bool(keep));
        TP_TRY(ox_call(c, op, &A, &r));
    }
    if (post) {
        tp_value r2;
        tp_status st = ox_call1(c, post[0] == 'l' ? TP_OP_LOG : TP_OP_SQRT, &r, &r2);
        tp_value_clear(&r);
        TP_TRY(st);
        r = r2;
    }
    return set_out_cast(c, &r, dt);
}

static tp_status map_arg(ox_ctx *c, bool is_max) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int nd = rank_of(x), axis;
    TP_TRY(wrap_axis(c, ox_attr_i(c, "axis", 0), nd, &axis));
    bool keep = ox_attr_i(c, "keepdims", 1) != 0, last = ox_attr_i(c, "select_last_index", 0) != 0;
    tp_value in = tp_value_none(), r = tp_value_none(), tmp = tp_value_none();
    int64_t d = axis;
    tp_status st = last ? call_ints(c, TP_OP_FLIP, x, &d, 1, &in) : tp_value_copy(x, &in);
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, &in);
        ox_arg(&A, tp_value_int(axis));
        ox_arg(&A, tp_value_bool(keep));
        st = ox_call(c, is_max ? TP_OP_ARGMAX : TP_OP_ARGMIN, &A, &r);
    }
    if (st == TP_OK && last) { /* index in the flipped tensor -> size-1-index */
        st = take(ox_call1(c, TP_OP_NEG, &r, &tmp), &r, &tmp);
        if (st == TP_OK) st = take(binop_scalar(c, TP_OP_ADD, &r, (double)(sizes_of(x)[axis] - 1), &tmp), &r, &tmp);
    }
    tp_value_clear(&in);
    if (st != TP_OK) {
        tp_value_clear(&r);
        return st;
    }
    return set_out(c, &r);
}

/* cumsum (or cumprod) of x along axis with ONNX's exclusive / reverse
 * (uncast). An exclusive cumsum subtracts the input; an exclusive cumprod
 * runs over the input shifted by one (a leading 1, the last dropped). */
static tp_status cumsum_axis(ox_ctx *c, const tp_value *x, int axis, tp_op op, tp_value *out) {
    bool exclusive = ox_attr_i(c, "exclusive", 0) != 0, reverse = ox_attr_i(c, "reverse", 0) != 0;
    int64_t d = axis;
    tp_value in = tp_value_none(), r = tp_value_none(), tmp = tp_value_none(), shifted = tp_value_none();
    tp_status st = reverse ? call_ints(c, TP_OP_FLIP, x, &d, 1, &in) : tp_value_copy(x, &in);
    if (st == TP_OK && exclusive && op == TP_OP_CUMPROD) {
        int64_t pads[2 * TP_MAX_DIMS] = {0};
        int nd = rank_of(x);
        pads[2 * (nd - 1 - axis)] = 1;
        tp_value mode = tp_value_none();
        st = tp_value_str("constant", &mode);
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, &in);
        ox_arg_ints(&A, pads, 2 * nd);
        ox_arg(&A, mode);
        ox_arg(&A, tp_value_float(1.0));
        if (st == TP_OK) st = ox_call(c, TP_OP_PAD, &A, &tmp);
        else ox_args_clear(&A);
        if (st == TP_OK) {
            ox_args_init(&A);
            ox_arg_ref(&A, &tmp);
            ox_arg(&A, tp_value_int(axis));
            ox_arg(&A, tp_value_int(0));
            ox_arg(&A, tp_value_int(-1));
            st = ox_call(c, TP_OP_SLICE, &A, &shifted);
        }
        tp_value_clear(&tmp);
    }
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, shifted.kind != TP_VAL_NONE ? &shifted : &in);
        ox_arg(&A, tp_value_int(axis));
        st = ox_call(c, op, &A, &r);
    }
    tp_value_clear(&shifted);
    if (st == TP_OK && exclusive && op == TP_OP_CUMSUM) st = take(ox_call2(c, TP_OP_SUB, &r, &in, &tmp), &r, &tmp);
    if (st == TP_OK && reverse) st = take(call_ints(c, TP_OP_FLIP, &r, &d, 1, &tmp), &r, &tmp);
    tp_value_clear(&in);
    if (st != TP_OK) tp_value_clear(&r);
    *out = r;
    return st;
}

/* CumSum / CumProd along an axis given at run time: the cumsum along each
 * dim, the one named picked with where (a rank-1 input has one possible
 * axis). */
static tp_status cumsum_run_time_axis(ox_ctx *c, const tp_value *x, const tp_value *axis, tp_op op) {
    const tp_tensor *am = ox_meta(axis);
    if (!am || tp_tensor_numel(am) != 1 || !tp_dtype_is_int(tp_tensor_dtype(am)))
        return ox_bad(c, "input 'axis' must be an integer scalar");
    int nd = rank_of(x);
    if (nd == 0) return ox_bad(c, "axis out of range for rank 0");
    tp_value r = tp_value_none(), a = tp_value_none(), a1 = tp_value_none(), neg = tp_value_none();
    tp_value plus = tp_value_none(), w = tp_value_none();
    tp_status st = cumsum_axis(c, x, 0, op, &r);
    if (st == TP_OK && nd > 1) {
        st = ox_cast(c, axis, TP_INT64, &a1);
        if (st == TP_OK) st = call_ints(c, TP_OP_RESHAPE, &a1, NULL, 0, &a);
        if (st == TP_OK) st = binop_scalar(c, TP_OP_LT, &a, 0, &neg);
        if (st == TP_OK) st = binop_scalar(c, TP_OP_ADD, &a, (double)nd, &plus);
        if (st == TP_OK) st = ox_call3(c, TP_OP_WHERE, &neg, &plus, &a, &w);
    }
    for (int k = 1; k < nd && st == TP_OK; k++) {
        tp_value ck = tp_value_none(), eq = tp_value_none(), tmp = tp_value_none();
        st = cumsum_axis(c, x, k, op, &ck);
        if (st == TP_OK) st = binop_scalar(c, TP_OP_EQ, &w, (double)k, &eq);
        if (st == TP_OK) st = take(ox_call3(c, TP_OP_WHERE, &eq, &ck, &r, &tmp), &r, &tmp);
        tp_value_clear(&ck);
        tp_value_clear(&eq);
    }
    tp_value vs[] = {a, a1, neg, plus, w};
    for (size_t i = 0; i < TP_ARRAY_LEN(vs); i++) tp_value_clear(&vs[i]);
    if (st != TP_OK) {
        tp_value_clear(&r);
        return st;
    }
    return set_out_cast(c, &r, dtype_of(x));
}

static tp_status map_cumsum(ox_ctx *c, tp_op op) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    const tp_value *av_in = ox_in(c, 1);
    if (av_in && !ox_const(av_in)) return cumsum_run_time_axis(c, x, av_in, op);
    int64_t av[1];
    int n;
    TP_TRY(const_ints(c, 1, "axis", av, 1, &n));
    if (n != 1) return ox_bad(c, "input 'axis' must hold one value");
    int axis;
    TP_TRY(wrap_axis(c, av[0], rank_of(x), &axis));
    tp_value r;
    TP_TRY(cumsum_axis(c, x, axis, op, &r));
    return set_out_cast(c, &r, dtype_of(x));
}

/* ---- shape ops --------------------------------------------------------------------------- */

static tp_status map_reshape(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int64_t shape[TP_MAX_DIMS];
    int n;
    if (ox_opset(c) < 5) TP_TRY(ox_attr_ints(c, "shape", shape, TP_MAX_DIMS, &n));
    else TP_TRY(const_ints(c, 1, "shape", shape, TP_MAX_DIMS, &n));
    if (n < 0) return ox_bad(c, "missing shape");
    bool allowzero = ox_attr_i(c, "allowzero", 0) != 0;
    for (int i = 0; i < n && !allowzero; i++)
        if (shape[i] == 0) {
            if (i >= rank_of(x)) return ox_bad(c, "shape[%d] = 0 copies a dim the input does not have", i);
            shape[i] = sizes_of(x)[i];
        }
    tp_value r;
    TP_TRY(reshape(c, x, shape, n, &r));
    return set_out(c, &r);
}

static tp_status map_flatten(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int nd = rank_of(x);
    int64_t axis = ox_attr_i(c, "axis", 1);
    if (axis < 0) axis += nd;
    if (axis < 0 || axis > nd) return ox_bad(c, "attribute 'axis' %" PRId64 " out of range for rank %d", ox_attr_i(c, "axis", 1), nd);
    tp_value r;
    if (ox_node_dyn(c)) { /* the products follow the run-time sizes */
        tp_value d[2];
        TP_TRY(ox_dim_product(c, x, 0, (int)axis, &d[0]));
        tp_status st = ox_dim_product(c, x, (int)axis, nd, &d[1]);
        if (st != TP_OK) {
            tp_value_clear(&d[0]);
            return st;
        }
        TP_TRY(ox_reshape_to(c, x, d, 2, &r));
        return set_out(c, &r);
    }
    int64_t a = 1, b = 1;
    for (int i = 0; i < nd; i++) {
        if (i < axis) a *= sizes_of(x)[i];
        else b *= sizes_of(x)[i];
    }
    int64_t shp[2] = {a, b};
    TP_TRY(reshape(c, x, shp, 2, &r));
    return set_out(c, &r);
}

static tp_status map_transpose(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int nd = rank_of(x);
    int64_t perm[TP_MAX_DIMS];
    int n;
    TP_TRY(ox_attr_ints(c, "perm", perm, TP_MAX_DIMS, &n));
    if (n < 0) {
        for (int i = 0; i < nd; i++) perm[i] = nd - 1 - i;
        n = nd;
    }
    tp_value r;
    TP_TRY(call_ints(c, TP_OP_PERMUTE, x, perm, n, &r));
    return set_out(c, &r);
}

static tp_status map_squeeze(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int64_t axes[TP_MAX_DIMS];
    int n;
    TP_TRY(get_axes(c, ox_opset(c) >= 13 ? 1 : -1, axes, &n));
    if (n < 0 && ox_in_dyn(c, 0))
        return ox_unsupported(c, "Squeeze without axes of a dynamically shaped input (which dims are 1 is known only "
                                 "when it runs)");
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    if (n >= 0) ox_arg_ints(&A, axes, n);
    tp_value r;
    TP_TRY(ox_call(c, TP_OP_SQUEEZE, &A, &r));
    return set_out(c, &r);
}

static tp_status map_unsqueeze(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int64_t axes[TP_MAX_DIMS];
    int n;
    TP_TRY(get_axes(c, ox_opset(c) >= 13 ? 1 : -1, axes, &n));
    if (n < 0) return ox_bad(c, "missing axes");
    int out_rank = rank_of(x) + n;
    if (out_rank > TP_MAX_DIMS) return ox_unsupported(c, "rank %d", out_rank);
    for (int i = 0; i < n; i++) {
        int a;
        TP_TRY(wrap_axis(c, axes[i], out_rank, &a));
        axes[i] = a;
    }
    /* sort ascending, insert one by one */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && axes[j - 1] > axes[j]; j--) {
            int64_t t = axes[j];
            axes[j] = axes[j - 1];
            axes[j - 1] = t;
        }
    tp_value r;
    TP_TRY(tp_value_copy(x, &r));
    for (int i = 0; i < n; i++) { /* ascending: each lands at its final position */
        ox_args A;
        ox_args_init(&A);
        ox_arg(&A, r);
        ox_arg(&A, tp_value_int(axes[i]));
        TP_TRY(ox_call(c, TP_OP_UNSQUEEZE, &A, &r));
    }
    return set_out(c, &r);
}

static tp_status map_concat(ox_ctx *c) {
    int n = ox_n_in(c);
    if (n < 1) return ox_bad(c, "needs inputs");
    const tp_value *x0;
    TP_TRY(need(c, 0, &x0));
    int axis;
    TP_TRY(wrap_axis(c, ox_attr_i(c, "axis", 0), rank_of(x0), &axis));
    tp_value list;
    TP_TRY(tp_value_list(0, &list));
    for (int i = 0; i < n; i++) {
        const tp_value *xi;
        tp_status st = need(c, i, &xi);
        tp_value cp = tp_value_none();
        if (st == TP_OK) st = tp_value_copy(xi, &cp);
        if (st == TP_OK) st = tp_value_append(&list, &cp);
        if (st != TP_OK) {
            tp_value_clear(&cp); /* not taken over when append fails */
            tp_value_clear(&list);
            return st;
        }
    }
    ox_args A;
    ox_args_init(&A);
    ox_arg(&A, list);
    ox_arg(&A, tp_value_int(axis));
    tp_value r;
    TP_TRY(ox_call(c, TP_OP_CAT, &A, &r));
    return set_out(c, &r);
}

static tp_status map_split(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int axis;
    TP_TRY(wrap_axis(c, ox_attr_i(c, "axis", 0), rank_of(x), &axis));
    int64_t sizes[MAXV];
    int n;
    TP_TRY(ox_attr_ints(c, "split", sizes, MAXV, &n));
    if (n < 0 && ox_opset(c) >= 13) TP_TRY(const_ints(c, 1, "split", sizes, MAXV, &n));
    int n_out = ox_n_out(c);
    if (n < 0 && ox_in_dyn(c, 0))
        return ox_unsupported(c, "Split into equal parts of a dynamically shaped input (the sizes are known only when "
                                 "it runs)");
    if (n < 0) {
        int64_t parts = ox_attr_i(c, "num_outputs", n_out), dim = sizes_of(x)[axis];
        if (parts < 1 || parts > MAXV) return ox_bad(c, "bad number of outputs");
        int64_t chunk = (dim + parts - 1) / parts;
        for (int i = 0; i < parts; i++) {
            int64_t start = i * chunk;
            sizes[i] = start >= dim ? 0 : (dim - start < chunk ? dim - start : chunk);
        }
        n = (int)parts;
    }
    if (n != n_out) return ox_bad(c, "%d split sizes for %d outputs", n, n_out);
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ints(&A, sizes, n);
    ox_arg(&A, tp_value_int(axis));
    tp_value r;
    TP_TRY(ox_call(c, TP_OP_SPLIT, &A, &r));
    for (int i = 0; i < n; i++) {
        tp_value item;
        tp_status st = tp_value_copy(tp_value_at(&r, i), &item);
        if (st == TP_OK) st = ox_set_out(c, i, &item);
        if (st != TP_OK) {
            tp_value_clear(&r);
            return st;
        }
    }
    tp_value_clear(&r);
    return TP_OK;
}

static tp_status slice_one(ox_ctx *c, tp_value *v, int axis, int64_t start, int64_t end, int64_t step) {
    int64_t dim = sizes_of(v)[axis];
    if (step == 0) return ox_bad(c, "slice step is 0");
    tp_value r;
    if (step > 0) {
        if (start < 0) start += dim;
        if (end < 0) end += dim;
        start = start < 0 ? 0 : start > dim ? dim : start;
        end = end < 0 ? 0 : end > dim ? dim : end;
        if (end < start) end = start;
        if (start == 0 && end == dim && step == 1) return TP_OK;
        ox_args A;
        ox_args_init(&A);
        ox_arg(&A, *v);
        ox_arg(&A, tp_value_int(axis));
        ox_arg(&A, tp_value_int(start));
        ox_arg(&A, tp_value_int(end));
        ox_arg(&A, tp_value_int(step));
        *v = tp_value_none();
        TP_TRY(ox_call(c, TP_OP_SLICE, &A, &r));
        *v = r;
        return TP_OK;
    }
    /* negative step: clamp as ONNX does, then flip and slice forward */
    if (start < 0) start += dim;
    if (end < 0 && end > INT64_MIN / 2) end += dim;
    start = start < 0 ? -1 : start > dim - 1 ? dim - 1 : start;
    end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
    /* count = ceil((start - end) / -step), without overflow; a step of
     * INT64_MIN takes one element like any step <= -dim */
    int64_t m = step == INT64_MIN ? INT64_MAX : -step, diff = start - end;
    int64_t count = start > end ? diff / m + (diff % m != 0) : 0;
    step = -m;
    int64_t d = axis;
    TP_TRY(call_ints(c, TP_OP_FLIP, v, &d, 1, &r));
    tp_value_clear(v);
    *v = r;
    int64_t fs = dim - 1 - start;
    return slice_one(c, v, axis, count ? fs : 0, count ? fs + (count - 1) * (-step) + 1 : 0, -step);
}

static tp_status map_slice(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int nd = rank_of(x);
    int64_t starts[TP_MAX_DIMS], ends[TP_MAX_DIMS], axes[TP_MAX_DIMS], steps[TP_MAX_DIMS];
    int ns, ne, na, nst;
    if (ox_opset(c) < 10) {
        TP_TRY(ox_attr_ints(c, "starts", starts, TP_MAX_DIMS, &ns));
        TP_TRY(ox_attr_ints(c, "ends", ends, TP_MAX_DIMS, &ne));
        TP_TRY(ox_attr_ints(c, "axes", axes, TP_MAX_DIMS, &na));
        nst = -1;
    } else {
        TP_TRY(const_ints(c, 1, "starts", starts, TP_MAX_DIMS, &ns));
        TP_TRY(const_ints(c, 2, "ends", ends, TP_MAX_DIMS, &ne));
        TP_TRY(const_ints(c, 3, "axes", axes, TP_MAX_DIMS, &na));
        TP_TRY(const_ints(c, 4, "steps", steps, TP_MAX_DIMS, &nst));
    }
    if (ns < 0 || ne != ns) return ox_bad(c, "starts and ends must have the same length");
    if (na >= 0 && na != ns) return ox_bad(c, "axes must match starts");
    if (nst >= 0 && nst != ns) return ox_bad(c, "steps must match starts");
    tp_value v;
    TP_TRY(tp_value_copy(x, &v));
    for (int i = 0; i < ns; i++) {
        int axis;
        tp_status st = wrap_axis(c, na >= 0 ? axes[i] : i, nd, &axis);
        if (st == TP_OK) st = slice_one(c, &v, axis, starts[i], ends[i], nst >= 0 ? steps[i] : 1);
        if (st != TP_OK) {
            tp_value_clear(&v);
            return st;
        }
    }
    return set_out(c, &v);
}

/* Indices wrapped for negative values: where(i < 0, i + n, i). */
static tp_status wrap_indices(ox_ctx *c, const tp_value *idx, int64_t n, tp_value *out) {
    tp_tensor *k = ox_const(idx);
    if (k) { /* constant: wrap now */
        tp_tensor *w;
        TP_TRY(tp_tensor_to(k, TP_INT64, &w));
        int64_t *p = tp_tensor_data(w);
        for (int64_t i = 0; i < tp_tensor_numel(w); i++) {
            if (p[i] < 0) p[i] += n;
            if (p[i] < 0 || p[i] >= n) { /* the message reads p[i]: format it before freeing w */
                tp_status st = ox_bad(c, "index %" PRId64 " out of range for size %" PRId64, p[i] < 0 ? p[i] - n : p[i], n);
                tp_tensor_free(w);
                return st;
            }
        }
        *out = tp_value_tensor(w);
        return TP_OK;
    }
    tp_value i64 = tp_value_none(), neg = tp_value_none(), plus = tp_value_none();
    tp_status st = ox_cast(c, idx, TP_INT64, &i64);
    if (st == TP_OK) st = binop_scalar(c, TP_OP_LT, &i64, 0, &neg);
    if (st == TP_OK) st = binop_scalar(c, TP_OP_ADD, &i64, (double)n, &plus);
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, &neg);
        ox_arg_ref(&A, &plus);
        ox_arg_ref(&A, &i64);
        st = ox_call(c, TP_OP_WHERE, &A, out);
    }
    tp_value_clear(&i64);
    tp_value_clear(&neg);
    tp_value_clear(&plus);
    return st;
}

static tp_status map_gather(ox_ctx *c) {
    const tp_value *x, *idx;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &idx));
    int nd = rank_of(x), axis;
    TP_TRY(wrap_axis(c, ox_attr_i(c, "axis", 0), nd, &axis));
    int64_t n = sizes_of(x)[axis];
    tp_value wi, flat, sel, r;
    TP_TRY(wrap_indices(c, idx, n, &wi));
    int ni = rank_of(&wi);
    int64_t m1 = -1;
    tp_status st = reshape(c, &wi, &m1, 1, &flat);
    tp_value_clear(&wi);
    TP_TRY(st);
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(axis));
    ox_arg(&A, flat);
    TP_TRY(ox_call(c, TP_OP_INDEX_SELECT, &A, &sel));
    int64_t shape[TP_MAX_DIMS * 2];
    int k = 0;
    if (nd - 1 + ni > TP_MAX_DIMS) {
        tp_value_clear(&sel);
        return ox_unsupported(c, "result rank %d", nd - 1 + ni);
    }
    if (ox_node_dyn(c)) { /* sizes that follow the run-time ones */
        tp_value dims[TP_MAX_DIMS];
        int nk = 0;
        for (int i = 0; st == TP_OK && i < nd - 1 + ni; i++) {
            const tp_value *src = i < axis ? x : i < axis + ni ? idx : x;
            int d = i < axis ? i : i < axis + ni ? i - axis : i - ni + 1;
            st = ox_dim(c, src, d, &dims[nk]);
            if (st == TP_OK) nk++;
        }
        if (st == TP_OK) st = ox_reshape_to(c, &sel, dims, nk, &r);
        for (int i = 0; i < nk && st != TP_OK; i++) tp_value_clear(&dims[i]);
        tp_value_clear(&sel);
        TP_TRY(st);
        return set_out(c, &r);
    }
    for (int i = 0; i < axis; i++) shape[k++] = sizes_of(x)[i];
    for (int i = 0; i < ni; i++) shape[k++] = sizes_of(idx)[i];
    for (int i = axis + 1; i < nd; i++) shape[k++] = sizes_of(x)[i];
    st = reshape(c, &sel, shape, k, &r);
    tp_value_clear(&sel);
    TP_TRY(st);
    return set_out(c, &r);
}

static tp_status map_gather_elements(ox_ctx *c) {
    const tp_value *x, *idx;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &idx));
    int axis;
    TP_TRY(wrap_axis(c, ox_attr_i(c, "axis", 0), rank_of(x), &axis));
    tp_value wi, r;
    TP_TRY(wrap_indices(c, idx, sizes_of(x)[axis], &wi));
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(axis));
    ox_arg(&A, wi);
    TP_TRY(ox_call(c, TP_OP_GATHER, &A, &r));
    return set_out(c, &r);
}

/* ONNX's reduction names as scatter_reduce's (include_self: the data takes part). */
static tp_status scatter_reduce_name(ox_ctx *c, const char *red, const char **out) {
    if (!strcmp(red, "add")) *out = "sum";
    else if (!strcmp(red, "mul")) *out = "prod";
    else if (!strcmp(red, "max")) *out = "amax";
    else if (!strcmp(red, "min")) *out = "amin";
    else return ox_bad(c, "unknown reduction '%s'", red);
    return TP_OK;
}

/* scatter_reduce(x, dim, index, upd, red): updates applied one by one in order, as onnx's reference does. */
static tp_status call_scatter_reduce(ox_ctx *c, const char *red, const tp_value *x, int dim, const tp_value *index,
                                     const tp_value *upd, tp_value *out) {
    const char *name = NULL;
    TP_TRY(scatter_reduce_name(c, red, &name));
    tp_value sv;
    TP_TRY(tp_value_str(name, &sv));
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(dim));
    ox_arg_ref(&A, index);
    ox_arg_ref(&A, upd);
    ox_arg(&A, sv);
    return ox_call(c, TP_OP_SCATTER_REDUCE, &A, out);
}

static tp_status map_scatter_elements(ox_ctx *c) {
    const tp_value *x, *idx, *upd;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &idx));
    TP_TRY(need(c, 2, &upd));
    char buf[32];
    const char *red = ox_attr_s(c, "reduction", "none", buf, sizeof buf);
    int axis;
    TP_TRY(wrap_axis(c, ox_attr_i(c, "axis", 0), rank_of(x), &axis));
    if (rank_of(idx) != rank_of(x) || rank_of(upd) != rank_of(x) ||
        memcmp(sizes_of(idx), sizes_of(upd), sizeof(int64_t) * (size_t)rank_of(x)) != 0)
        return ox_bad(c, "indices and updates must have the same shape and data's rank");
    tp_value wi, r;
    TP_TRY(wrap_indices(c, idx, sizes_of(x)[axis], &wi));
    if (strcmp(red, "none") != 0) {
        tp_status st = call_scatter_reduce(c, red, x, axis, &wi, upd, &r);
        tp_value_clear(&wi);
        TP_TRY(st);
        return set_out(c, &r);
    }
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(axis));
    ox_arg(&A, wi);
    ox_arg_ref(&A, upd);
    TP_TRY(ox_call(c, TP_OP_SCATTER, &A, &r));
    return set_out(c, &r);
}

/* Linear index into dims ds[0..q) from indices [..., q]. */
static tp_status nd_linear_index_dims(ox_ctx *c, const int64_t *ds, const tp_value *idx, int q, tp_value *out) {
    int64_t strides[TP_MAX_DIMS], acc = 1;
    for (int i = q - 1; i >= 0; i--) {
        strides[i] = acc;
        acc *= ds[i];
    }
    tp_tensor *st_t, *dim_t;
    TP_TRY(tp_tensor_from_data(TP_INT64, 1, (int64_t[]){q}, strides, &st_t));
    tp_status st = tp_tensor_from_data(TP_INT64, 1, (int64_t[]){q}, ds, &dim_t);
    if (st != TP_OK) {
        tp_tensor_free(st_t);
        return st;
    }
    tp_value sv = tp_value_tensor(st_t), dv = tp_value_tensor(dim_t), i64 = tp_value_none(), neg = tp_value_none();
    tp_value plus = tp_value_none(), w = tp_value_none(), prod = tp_value_none();
    st = ox_cast(c, idx, TP_INT64, &i64);
    if (st == TP_OK) st = binop_scalar(c, TP_OP_LT, &i64, 0, &neg);
    if (st == TP_OK) st = ox_call2(c, TP_OP_ADD, &i64, &dv, &plus);
    ox_args A;
    if (st == TP_OK) {
        ox_args_init(&A);
        ox_arg_ref(&A, &neg);
        ox_arg_ref(&A, &plus);
        ox_arg_ref(&A, &i64);
        st = ox_call(c, TP_OP_WHERE, &A, &w);
    }
    if (st == TP_OK) st = ox_call2(c, TP_OP_MUL, &w, &sv, &prod);
    if (st == TP_OK) {
        int64_t last = -1;
        ox_args_init(&A);
        ox_arg_ref(&A, &prod);
        ox_arg_ints(&A, &last, 1);
        st = ox_call(c, TP_OP_SUM, &A, out);
    }
    tp_value vs[] = {sv, dv, i64, neg, plus, w, prod};
    for (size_t i = 0; i < TP_ARRAY_LEN(vs); i++) tp_value_clear(&vs[i]);
    return st;
}

/* Linear index into the first q dims of data from indices [..., q]. */
static tp_status nd_linear_index(ox_ctx *c, const tp_value *data, const tp_value *idx, int q, tp_value *out) {
    return nd_linear_index_dims(c, sizes_of(data), idx, q, out);
}

/* GatherND with batch_dims b > 0: data [B..., D...] and indices [B..., I...,
 * q] share the b leading dims; with Bp = prod(B) and Lq = prod(D[0..q)),
 * data becomes [Bp * Lq, D[q..]...] and each index tuple the row
 * batch * Lq + linear(D[0..q)) (the batch part is a constant: static shapes). */
static tp_status gather_nd_batched(ox_ctx *c, const tp_value *x, const tp_value *idx, int b) {
    int r = rank_of(x), m = rank_of(idx);
    if (b >= m || b >= r) return ox_bad(c, "batch_dims %d must be less than the ranks of data and indices", b);
    if (memcmp(sizes_of(x), sizes_of(idx), sizeof(int64_t) * (size_t)b) != 0)
        return ox_bad(c, "the first %d dims of data and indices differ", b);
    int64_t q64 = sizes_of(idx)[m - 1];
    if (q64 < 1 || q64 > r - b) return ox_bad(c, "indices last dim %" PRId64 " must be in 1..%d", q64, r - b);
    int q = (int)q64;
    if (ox_node_dyn(c)) return ox_unsupported(c, "batch_dims on a dynamic shape");
    const int64_t *xs = sizes_of(x), *is = sizes_of(idx);
    int64_t Bp = 1, Lq = 1, per = 1;
    for (int i = 0; i < b; i++) Bp *= xs[i];
    for (int i = b; i < b + q; i++) Lq *= xs[i];
    for (int i = b; i < m - 1; i++) per *= is[i];
    int64_t shp[TP_MAX_DIMS + 1], out[TP_MAX_DIMS * 2];
    int k = 0;
    shp[k++] = Bp * Lq;
    for (int i = b + q; i < r; i++) shp[k++] = xs[i];
    tp_tensor *off_t;
    TP_TRY(ox_new_tensor(c, TP_INT64, m - 1, is, false, &off_t));
    for (int64_t i = 0; i < Bp * per; i++) ((int64_t *)tp_tensor_data(off_t))[i] = (i / per) * Lq;
    tp_value off = tp_value_tensor(off_t), flat = tp_value_none(), lin = tp_value_none(), lin2 = tp_value_none();
    tp_value lin1 = tp_value_none(), sel = tp_value_none(), res = tp_value_none();
    tp_status st = reshape(c, x, shp, k, &flat);
    if (st == TP_OK) st = nd_linear_index_dims(c, xs + b, idx, q, &lin);
    if (st == TP_OK) st = ox_call2(c, TP_OP_ADD, &lin, &off, &lin2);
    int64_t m1 = -1;
    if (st == TP_OK) st = reshape(c, &lin2, &m1, 1, &lin1);
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg(&A, flat);
        ox_arg(&A, tp_value_int(0));
        ox_arg(&A, lin1);
        flat = lin1 = tp_value_none();
        st = ox_call(c, TP_OP_INDEX_SELECT, &A, &sel);
    }
    k = 0;
    for (int i = 0; i < m - 1; i++) out[k++] = is[i];
    for (int i = b + q; i < r; i++) out[k++] = xs[i];
    if (st == TP_OK) st = reshape(c, &sel, out, k, &res);
    tp_value vals[] = {off, flat, lin, lin2, lin1, sel};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) tp_value_clear(&vals[i]);
    TP_TRY(st);
    return set_out(c, &res);
}

static tp_status map_gather_nd(ox_ctx *c) {
    const tp_value *x, *idx;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &idx));
    int64_t bd = ox_attr_i(c, "batch_dims", 0);
    if (bd < 0 || bd > TP_MAX_DIMS) return ox_bad(c, "batch_dims %" PRId64 " out of range", bd);
    if (bd > 0) return gather_nd_batched(c, x, idx, (int)bd);
    int r = rank_of(x), m = rank_of(idx);
    if (m < 1) return ox_bad(c, "indices must have rank >= 1");
    int64_t q64 = sizes_of(idx)[m - 1];
    if (q64 < 1 || q64 > r) return ox_bad(c, "indices last dim %" PRId64 " must be in 1..%d", q64, r);
    int q = (int)q64;
    int64_t shp[TP_MAX_DIMS + 1], lead = 1;
    for (int i = 0; i < q; i++) lead *= sizes_of(x)[i];
    shp[0] = lead;
    for (int i = q; i < r; i++) shp[1 + i - q] = sizes_of(x)[i];
    tp_value flat = tp_value_none(), lin = tp_value_none(), sel = tp_value_none(), res = tp_value_none();
    tp_value tmp = tp_value_none();
    int64_t m1 = -1, out[TP_MAX_DIMS * 2];
    int k = 0;
    for (int i = 0; i < m - 1; i++) out[k++] = sizes_of(idx)[i];
    for (int i = q; i < r; i++) out[k++] = sizes_of(x)[i];
    tp_status st = reshape(c, x, shp, 1 + r - q, &flat);
    if (st == TP_OK) st = nd_linear_index(c, x, idx, q, &lin);
    if (st == TP_OK) st = take(reshape(c, &lin, &m1, 1, &tmp), &lin, &tmp);
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, &flat);
        ox_arg(&A, tp_value_int(0));
        ox_arg_ref(&A, &lin);
        st = ox_call(c, TP_OP_INDEX_SELECT, &A, &sel);
    }
    if (st == TP_OK) st = reshape(c, &sel, out, k, &res);
    tp_value_clear(&flat);
    tp_value_clear(&lin);
    tp_value_clear(&sel);
    TP_TRY(st);
    return set_out(c, &res);
}

static tp_status map_scatter_nd(ox_ctx *c) {
    const tp_value *x, *idx, *upd;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &idx));
    TP_TRY(need(c, 2, &upd));
    char buf[32];
    const char *red = ox_attr_s(c, "reduction", "none", buf, sizeof buf);
    if (strcmp(red, "none") != 0 && ox_node_dyn(c)) return ox_unsupported(c, "reduction '%s' on a dynamic shape", red);
    int r = rank_of(x), m = rank_of(idx);
    if (m < 1) return ox_bad(c, "indices must have rank >= 1");
    int64_t q64 = sizes_of(idx)[m - 1];
    if (q64 < 1 || q64 > r) return ox_bad(c, "indices last dim %" PRId64 " must be in 1..%d", q64, r);
    int q = (int)q64;
    int64_t lead = 1, rest = 1, nupd = 1;
    for (int i = 0; i < q; i++) lead *= sizes_of(x)[i];
    for (int i = q; i < r; i++) rest *= sizes_of(x)[i];
    for (int i = 0; i < m - 1; i++) nupd *= sizes_of(idx)[i];
    int64_t s2[2] = {lead, rest}, u2[2] = {nupd, rest}, l2[2] = {nupd, 1}, e2[2] = {nupd, rest};
    tp_value flat = tp_value_none(), lin = tp_value_none(), upd2 = tp_value_none(), sc = tp_value_none();
    tp_value res = tp_value_none(), tmp = tp_value_none();
    tp_status st = reshape(c, x, s2, 2, &flat);
    if (st == TP_OK) st = nd_linear_index(c, x, idx, q, &lin);
    if (st == TP_OK) st = reshape(c, upd, u2, 2, &upd2);
    if (st == TP_OK) {
        st = take(reshape(c, &lin, l2, 2, &tmp), &lin, &tmp);
        if (st == TP_OK) st = take(call_ints(c, TP_OP_EXPAND, &lin, e2, 2, &tmp), &lin, &tmp);
        if (st == TP_OK && strcmp(red, "none") != 0) {
            st = call_scatter_reduce(c, red, &flat, 0, &lin, &upd2, &sc);
        } else if (st == TP_OK) {
            ox_args A;
            ox_args_init(&A);
            ox_arg_ref(&A, &flat);
            ox_arg(&A, tp_value_int(0));
            ox_arg_ref(&A, &lin);
            ox_arg_ref(&A, &upd2);
            st = ox_call(c, TP_OP_SCATTER, &A, &sc);
        }
    }
    if (st == TP_OK) st = reshape(c, &sc, sizes_of(x), r, &res);
    tp_value vs[] = {flat, lin, upd2, sc};
    for (size_t i = 0; i < TP_ARRAY_LEN(vs); i++) tp_value_clear(&vs[i]);
    TP_TRY(st);
    return set_out(c, &res);
}

/* ReverseSequence: out = gather(x, time_axis, idx) with
 * idx[t, b] = t < len[b] ? len[b] - 1 - t : t (broadcast over the other dims). */
static tp_status map_reverse_sequence(ox_ctx *c) {
    const tp_value *x, *lens;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &lens));
    int nd = rank_of(x), ta, ba;
    if (nd < 2) return ox_bad(c, "input must have rank >= 2");
    TP_TRY(wrap_axis(c, ox_attr_i(c, "time_axis", 0), nd, &ta));
    TP_TRY(wrap_axis(c, ox_attr_i(c, "batch_axis", 1), nd, &ba));
    if (ta == ba) return ox_bad(c, "time_axis and batch_axis are both %d", ta);
    int64_t T = sizes_of(x)[ta], B = sizes_of(x)[ba];
    if (rank_of(lens) != 1 || sizes_of(lens)[0] != B)
        return ox_bad(c, "sequence_lens must have shape [%" PRId64 "]", B);
    if (ox_node_dyn(c)) return ox_unsupported(c, "dynamic shape");
    int64_t tshape[TP_MAX_DIMS], bshape[TP_MAX_DIMS];
    for (int i = 0; i < nd; i++) tshape[i] = i == ta ? T : 1, bshape[i] = i == ba ? B : 1;
    tp_tensor *tt;
    TP_TRY(ox_new_tensor(c, TP_INT64, nd, tshape, false, &tt));
    for (int64_t i = 0; i < T; i++) ((int64_t *)tp_tensor_data(tt))[i] = i;
    tp_value t = tp_value_tensor(tt), l64 = tp_value_none(), lb = tp_value_none(), lt = tp_value_none();
    tp_value d = tp_value_none(), rev = tp_value_none(), idx = tp_value_none(), idxe = tp_value_none();
    tp_value r = tp_value_none();
    tp_status st = ox_cast(c, lens, TP_INT64, &l64);
    if (st == TP_OK) st = reshape(c, &l64, bshape, nd, &lb);
    if (st == TP_OK) st = ox_call2(c, TP_OP_LT, &t, &lb, &lt);
    if (st == TP_OK) st = ox_call2(c, TP_OP_SUB, &lb, &t, &d);
    if (st == TP_OK) st = binop_scalar(c, TP_OP_SUB, &d, 1, &rev);
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg(&A, lt);
        ox_arg(&A, rev);
        ox_arg_ref(&A, &t);
        lt = rev = tp_value_none();
        st = ox_call(c, TP_OP_WHERE, &A, &idx);
    }
    if (st == TP_OK) st = call_ints(c, TP_OP_EXPAND, &idx, sizes_of(x), nd, &idxe);
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, x);
        ox_arg(&A, tp_value_int(ta));
        ox_arg(&A, idxe);
        idxe = tp_value_none();
        st = ox_call(c, TP_OP_GATHER, &A, &r);
    }
    tp_value vals[] = {t, l64, lb, lt, d, rev, idx, idxe};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) tp_value_clear(&vals[i]);
    TP_TRY(st);
    return set_out(c, &r);
}

/* HannWindow / HammingWindow / BlackmanWindow (opset 17): a constant of
 * `size` values (size must be known at import), computed in double as the
 * ONNX reference: N = size (periodic) or size - 1 (symmetric). */
static tp_status map_window(ox_ctx *c, char kind) {
    int64_t size;
    int n;
    TP_TRY(const_ints(c, 0, "size", &size, 1, &n));
    if (n != 1) return ox_bad(c, "missing input 'size'");
    if (size < 0 || size > ((int64_t)1 << 32)) return ox_bad(c, "size %" PRId64 " out of range", size);
    tp_dtype dt = TP_FLOAT32;
    int64_t odt = ox_attr_i(c, "output_datatype", 1);
    TP_TRY(dtype_attr(c, "output_datatype", odt, &dt));
    double N = (double)(ox_attr_i(c, "periodic", 1) != 0 ? size : size - 1);
    tp_tensor *t;
    TP_TRY(ox_new_tensor(c, dt, 1, &size, false, &t));
    size_t es = tp_dtype_size(dt);
    for (int64_t i = 0; i < size; i++) {
        double x = (double)i, w;
        if (kind == 'n') {
            double sn = sin(M_PI * x / N);
            w = sn * sn;
        } else if (kind == 'm') {
            double a = 25.0 / 46.0;
            w = a - (1 - a) * cos(2 * M_PI * x / N);
        } else {
            w = 0.42 - 0.5 * cos(2 * M_PI * x / N) + 0.08 * cos(4 * M_PI * x / N);
        }
        if (tp_dtype_is_float(dt)) tp__store_f64((char *)tp_tensor_data(t) + (size_t)i * es, dt, w);
        else tp__store_i64((char *)tp_tensor_data(t) + (size_t)i * es, dt, (int64_t)w);
    }
    tp_value v = tp_value_tensor(t);
    return set_out(c, &v);
}

static tp_status map_expand(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int64_t shape[TP_MAX_DIMS];
    int n;
    TP_TRY(const_ints(c, 1, "shape", shape, TP_MAX_DIMS, &n));
    if (n < 0) return ox_bad(c, "missing shape");
    int nout;
    int64_t out[TP_MAX_DIMS];
    tp_status st = tp__broadcast_shapes(rank_of(x), sizes_of(x), n, shape, &nout, out);
    if (st != TP_OK) return ox_bad(c, "%s", tp_last_error());
    tp_value r;
    TP_TRY(call_ints(c, TP_OP_EXPAND, x, out, nout, &r));
    tp_value r2;
    st = ox_call1(c, TP_OP_CONTIGUOUS, &r, &r2);
    tp_value_clear(&r);
    TP_TRY(st);
    return set_out(c, &r2);
}

static tp_status map_tile(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int64_t reps[TP_MAX_DIMS];
    int n;
    TP_TRY(const_ints(c, 1, "repeats", reps, TP_MAX_DIMS, &n));
    if (n != rank_of(x)) return ox_bad(c, "repeats must have one value per dim");
    tp_value r;
    TP_TRY(call_ints(c, TP_OP_REPEAT, x, reps, n, &r));
    return set_out(c, &r);
}

tp_status ox_pad_mode(ox_ctx *c, const char **mode_out) {
    char buf[32];
    const char *mode = ox_attr_s(c, "mode", "constant", buf, sizeof buf);
    *mode_out = !strcmp(mode, "constant") ? "constant"
                : !strcmp(mode, "reflect") ? "reflect"
                : !strcmp(mode, "edge")    ? "replicate"
                : !strcmp(mode, "wrap")    ? "circular"
                                           : NULL;
    if (!*mode_out) return ox_unsupported(c, "pad mode '%s'", mode);
    return TP_OK;
}

static tp_status map_pad(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int nd = rank_of(x);
    int64_t pads[2 * TP_MAX_DIMS], axes[TP_MAX_DIMS];
    int n, na = -1;
    double value = 0;
    bool has_value = false;
    if (ox_opset(c) < 11) {
        TP_TRY(ox_attr_ints(c, "pads", pads, 2 * TP_MAX_DIMS, &n));
        value = ox_attr_f(c, "value", 0.0);
    } else {
        TP_TRY(const_ints(c, 1, "pads", pads, 2 * TP_MAX_DIMS, &n));
        TP_TRY(const_f64(c, 2, "constant_value", &value, &has_value));
        TP_TRY(const_ints(c, 3, "axes", axes, TP_MAX_DIMS, &na));
    }
    if (na < 0) {
        na = nd;
        for (int i = 0; i < nd; i++) axes[i] = i;
    }
    if (n != 2 * na) return ox_bad(c, "pads has %d values for %d axes", n, na);
    int64_t full_b[TP_MAX_DIMS] = {0}, full_e[TP_MAX_DIMS] = {0};
    for (int i = 0; i < na; i++) {
        int a;
        TP_TRY(wrap_axis(c, axes[i], nd, &a));
        full_b[a] = pads[i];
        full_e[a] = pads[na + i];
    }
    const char *tmode;
    TP_TRY(ox_pad_mode(c, &tmode));
    /* torch order, trimming leading dims without padding */
    int first = 0;
    while (first < nd && full_b[first] == 0 && full_e[first] == 0) first++;
    int64_t tp[2 * TP_MAX_DIMS];
    int k = 0;
    for (int d = nd - 1; d >= first; d--) {
        tp[k++] = full_b[d];
        tp[k++] = full_e[d];
    }
    if (k == 0) return map_identity(c);
    tp_value m;
    TP_TRY(tp_value_str(tmode, &m));
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ints(&A, tp, k);
    ox_arg(&A, m);
    if (!strcmp(tmode, "constant")) ox_arg(&A, tp_value_float(value));
    tp_value r;
    TP_TRY(ox_call(c, TP_OP_PAD, &A, &r));
    return set_out(c, &r);
}

static tp_status map_shape(ox_ctx *c, bool size_only) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    if (ox_in_dyn(c, 0))
        return ox_unsupported(c, "the input's shape depends on a dynamic dim; only static shapes can be folded");
    int nd = rank_of(x);
    tp_tensor *t;
    if (size_only) {
        TP_TRY(tp_tensor_scalar(TP_INT64, (double)tp_tensor_numel(ox_meta(x)), &t));
    } else {
        int64_t start = ox_attr_i(c, "start", 0), end = ox_attr_i(c, "end", nd);
        if (start < 0) start += nd;
        if (end < 0) end += nd;
        start = start < 0 ? 0 : start > nd ? nd : start;
        end = end < 0 ? 0 : end > nd ? nd : end;
        int64_t n = end > start ? end - start : 0;
        TP_TRY(tp_tensor_from_data(TP_INT64, 1, &n, sizes_of(x) + start, &t));
    }
    tp_value v = tp_value_tensor(t);
    return set_out(c, &v);
}

static tp_status map_constant(ox_ctx *c) {
    const Onnx__AttributeProto *a;
    tp_tensor *t = NULL;
    if ((a = ox_attr(c, "value")) && a->t) {
        TP_TRY(tp__onnx_tensor(a->t, NULL, NULL, &t));
        if (a->t->has_data_type && a->t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__STRING) {
            tp_value v = tp_value_tensor(t);
            TP_TRY(set_out(c, &v));
            ox_set_out_str(c, 0);
            return TP_OK;
        }
    } else if ((a = ox_attr(c, "value_float")) && a->has_f) {
        TP_TRY(tp_tensor_scalar(TP_FLOAT32, a->f, &t));
    } else if ((a = ox_attr(c, "value_int")) && a->has_i) {
        TP_TRY(tp_tensor_from_data(TP_INT64, 0, NULL, &a->i, &t));
    } else if ((a = ox_attr(c, "value_floats"))) {
        int64_t n = (int64_t)a->n_floats;
        TP_TRY(tp_tensor_from_data(TP_FLOAT32, 1, &n, a->floats, &t));
    } else if ((a = ox_attr(c, "value_ints"))) {
        int64_t n = (int64_t)a->n_ints;
        TP_TRY(tp_tensor_from_data(TP_INT64, 1, &n, a->ints, &t));
    } else {
        return ox_unsupported(c, "constant kind (sparse or string values)");
    }
    tp_value v = tp_value_tensor(t);
    return set_out(c, &v);
}

tp_status ox_fill_value(ox_ctx *c, tp_dtype *dt, double *value) {
    *dt = TP_FLOAT32;
    *value = 0;
    const Onnx__AttributeProto *a = ox_attr(c, "value");
    if (a && a->t) {
        tp_tensor *vt;
        TP_TRY(tp__onnx_tensor(a->t, NULL, NULL, &vt));
        *dt = tp_tensor_dtype(vt);
        *value = tp_tensor_numel(vt) ? tp_tensor_item_f64(vt, 0) : 0;
        tp_tensor_free(vt);
    }
    return TP_OK;
}

tp_status ox_constant_of_shape_call(ox_ctx *c, tp_value *sizes, tp_value *out) {
    tp_dtype dt;
    double value;
    tp_status st = ox_fill_value(c, &dt, &value);
    if (st != TP_OK) {
        tp_value_clear(sizes);
        return st;
    }
    ox_args A;
    ox_args_init(&A);
    ox_arg(&A, *sizes);
    *sizes = tp_value_none();
    ox_arg(&A, dt == TP_BOOL ? tp_value_bool(value != 0)
                             : tp_dtype_is_float(dt) ? tp_value_float(value) : tp_value_int((int64_t)value));
    ox_kw(&A, "dtype", tp_value_dtype(dt));
    return ox_call(c, TP_OP_FULL, &A, out);
}

static tp_status map_constant_of_shape(ox_ctx *c) {
    int64_t shape[TP_MAX_DIMS];
    int n;
    TP_TRY(const_ints(c, 0, "input", shape, TP_MAX_DIMS, &n));
    if (n < 0) return ox_bad(c, "missing shape");
    tp_dtype dt;
    double value;
    TP_TRY(ox_fill_value(c, &dt, &value));
    tp_tensor *t;
    TP_TRY(ox_new_tensor(c, dt, n, shape, false, &t));
    tp_tensor_fill(t, value);
    tp_value v = tp_value_tensor(t);
    return set_out(c, &v);
}

static tp_status map_range(ox_ctx *c) {
    const tp_value *s, *l, *d;
    TP_TRY(need(c, 0, &s));
    TP_TRY(need(c, 1, &l));
    TP_TRY(need(c, 2, &d));
    tp_tensor *ts = ox_const(s), *tl = ox_const(l), *td = ox_const(d);
    if (!ts || !tl || !td) { /* known when it runs: onnx_range, its length data-dependent */
        tp_dtype dt = dtype_of(s);
        const tp_value *all[3] = {s, l, d};
        static const char *const names[3] = {"start", "limit", "delta"};
        for (int i = 0; i < 3; i++) {
            if (tp_tensor_numel(ox_meta(all[i])) != 1) return ox_bad(c, "%s must hold one value", names[i]);
            if (dtype_of(all[i]) != dt) return ox_bad(c, "start, limit and delta must have one dtype");
        }
        if (dt != TP_INT16 && dt != TP_INT32 && dt != TP_INT64 && !tp_dtype_is_float(dt))
            return ox_unsupported(c, "Range of %s", tp_dtype_name(dt));
        ox_args A;
        ox_args_init(&A);
        for (int i = 0; i < 3; i++) ox_arg_ref(&A, all[i]);
        tp_value r = tp_value_none();
        tp_status st = ox_call(c, TP_OP_ONNX_RANGE, &A, &r);
        if (st == TP_OK) st = ox_dd_meta(c, &r, dt, 1, (int64_t[]){OX_DD_HINT});
        if (st != TP_OK) {
            tp_value_clear(&r);
            return st;
        }
        return set_out(c, &r);
    }
    if (tp_tensor_numel(ts) != 1 || tp_tensor_numel(tl) != 1 || tp_tensor_numel(td) != 1)
        return ox_bad(c, "start, limit and delta must hold one value each");
    tp_dtype dt = tp_tensor_dtype(ts);
    const int64_t max_n = (int64_t)1 << 32;
    int64_t n = 0;
    tp_tensor *t;
    if (tp_dtype_is_float(dt)) {
        double start = tp_tensor_item_f64(ts, 0), limit = tp_tensor_item_f64(tl, 0), delta = tp_tensor_item_f64(td, 0);
        if (delta == 0) return ox_bad(c, "delta is 0");
        double cnt = ceil((limit - start) / delta);
        if (!(cnt <= (double)max_n) && !(cnt <= 0)) /* also NaN and inf */
            return ox_bad(c, "range [%g, %g) step %g has too many elements", start, limit, delta);
        n = cnt > 0 ? (int64_t)cnt : 0;
        TP_TRY(ox_new_tensor(c, dt, 1, &n, false, &t));
        char *p = tp_tensor_data(t);
        size_t es = tp_dtype_size(dt);
        for (int64_t i = 0; i < n; i++) tp__store_f64(p + (size_t)i * es, dt, start + (double)i * delta);
    } else {
        /* integers exactly: the count and the values in unsigned arithmetic
         * (every value lies in [start, limit), so it fits the type) */
        int64_t v[3];
        int k;
        TP_TRY(tensor_ints(c, ts, "start", &v[0], 1, &k));
        TP_TRY(tensor_ints(c, tl, "limit", &v[1], 1, &k));
        TP_TRY(tensor_ints(c, td, "delta", &v[2], 1, &k));
        int64_t start = v[0], limit = v[1], delta = v[2];
        if (delta == 0) return ox_bad(c, "delta is 0");
        uint64_t span = 0, step = 0;
        if (delta > 0 && limit > start) span = (uint64_t)limit - (uint64_t)start, step = (uint64_t)delta;
        if (delta < 0 && limit < start) span = (uint64_t)start - (uint64_t)limit, step = 0 - (uint64_t)delta;
        uint64_t cnt = step ? span / step + (span % step != 0) : 0;
        if (cnt > (uint64_t)max_n)
            return ox_bad(c, "range [%" PRId64 ", %" PRId64 ") step %" PRId64 " has %" PRIu64 " elements (at most %"
                          PRId64 ")", start, limit, delta, cnt, max_n);
        n = (int64_t)cnt;
        TP_TRY(ox_new_tensor(c, dt, 1, &n, false, &t));
        char *p = tp_tensor_data(t);
        size_t es = tp_dtype_size(dt);
        for (int64_t i = 0; i < n; i++)
            tp__store_i64(p + (size_t)i * es, dt, (int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)delta));
    }
    tp_value out = tp_value_tensor(t);
    return set_out(c, &out);
}

/* arange(dim d of x) as an int64 column [n, 1] (col false: a row [1, n]). */
static tp_status index_along(ox_ctx *c, const tp_value *x, int d, bool col, tp_value *out) {
    tp_value n, idx;
    TP_TRY(ox_dim(c, x, d, &n));
    ox_args A;
    ox_args_init(&A);
    ox_arg(&A, tp_value_int(0));
    ox_arg(&A, n);
    ox_arg(&A, tp_value_int(1));
    ox_kw(&A, "dtype", tp_value_dtype(TP_INT64));
    TP_TRY(ox_call(c, TP_OP_ARANGE, &A, &idx));
    int64_t shp[2] = {col ? -1 : 1, col ? 1 : -1};
    tp_status st = call_ints(c, TP_OP_RESHAPE, &idx, shp, 2, out);
    tp_value_clear(&idx);
    return st;
}

/* Trilu with k known when it runs: keep x where col - row >= k (upper) or
 * <= k (lower), else 0 - plain tensor ops, planned like any other. */
static tp_status trilu_run_time_k(ox_ctx *c, const tp_value *x, const tp_value *k) {
    int nd = rank_of(x);
    if (nd < 2) return ox_bad(c, "input rank %d (at least 2)", nd);
    if (tp_tensor_numel(ox_meta(k)) != 1 || tp_dtype_is_float(dtype_of(k))) return ox_bad(c, "input 'k' must hold one integer");
    tp_value rows = tp_value_none(), cols = tp_value_none(), diff = tp_value_none(), cond = tp_value_none(),
             zero = tp_value_none(), r = tp_value_none();
    tp_status st = index_along(c, x, nd - 2, true, &rows);
    if (st == TP_OK) st = index_along(c, x, nd - 1, false, &cols);
    if (st == TP_OK) st = ox_call2(c, TP_OP_SUB, &cols, &rows, &diff);
    if (st == TP_OK) st = ox_call2(c, ox_attr_i(c, "upper", 1) ? TP_OP_GE : TP_OP_LE, &diff, k, &cond);
    if (st == TP_OK) st = scalar_like(x, 0, &zero);
    if (st == TP_OK) st = ox_call3(c, TP_OP_WHERE, &cond, x, &zero, &r);
    tp_value_clear(&rows);
    tp_value_clear(&cols);
    tp_value_clear(&diff);
    tp_value_clear(&cond);
    tp_value_clear(&zero);
    TP_TRY(st);
    return set_out(c, &r);
}

static tp_status map_trilu(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int64_t k[1] = {0};
    int n;
    const tp_value *kv = ox_in(c, 1);
    if (kv && !ox_const(kv)) return trilu_run_time_k(c, x, kv);
    TP_TRY(const_ints(c, 1, "k", k, 1, &n));
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(n > 0 ? k[0] : 0));
    tp_value r;
    TP_TRY(ox_call(c, ox_attr_i(c, "upper", 1) ? TP_OP_TRIU : TP_OP_TRIL, &A, &r));
    return set_out(c, &r);
}

/* OneHot's arange(depth) shaped [1, .., depth (at axis), .., 1] for a depth
 * given at run time (truncated to an integer), and depth as a 0-d int64. */
static tp_status one_hot_run_time_range(ox_ctx *c, const tp_value *dv, int axis, int rank, tp_value *ar,
                                        tp_value *dep) {
    const tp_tensor *m = ox_meta(dv);
    if (!m || tp_tensor_numel(m) != 1) return ox_bad(c, "input 'depth' must hold one value");
    tp_value d64 = tp_value_none(), l = tp_value_none(), sizes = tp_value_none(), r = tp_value_none();
    int64_t n;
    tp_status st = ox_cast(c, dv, TP_INT64, &d64);
    if (st == TP_OK) st = call_ints(c, TP_OP_RESHAPE, &d64, NULL, 0, dep);
    if (st == TP_OK) st = ox_run_time_ints(c, &d64, "depth", 1, &l, &n);
    if (st == TP_OK) st = tp_value_list(rank, &sizes);
    for (int i = 0; i < rank && st == TP_OK; i++) {
        tp_value it = tp_value_int(1);
        if (i == axis) st = tp_value_copy(tp_value_at(&l, 0), &it);
        if (st == TP_OK) st = tp_value_seq_set(&sizes, i, &it);
    }
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, tp_value_at(&l, 0));
        ox_kw(&A, "dtype", tp_value_dtype(TP_INT64));
        st = ox_call(c, TP_OP_ARANGE, &A, &r);
    }
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, &r);
        ox_arg(&A, sizes);
        sizes = tp_value_none();
        st = ox_call(c, TP_OP_RESHAPE, &A, ar);
    }
    tp_value_clear(&d64);
    tp_value_clear(&l);
    tp_value_clear(&sizes);
    tp_value_clear(&r);
    return st;
}

static tp_status map_one_hot(ox_ctx *c) {
    const tp_value *idx, *vals;
    TP_TRY(need(c, 0, &idx));
    TP_TRY(need(c, 2, &vals));
    if (rank_of(vals) != 1 || sizes_of(vals)[0] != 2) return ox_bad(c, "input 'values' must hold 2 values [off, on]");
    int ni = rank_of(idx), axis;
    if (ni + 1 > TP_MAX_DIMS) return ox_unsupported(c, "result rank %d", ni + 1);
    TP_TRY(wrap_axis(c, ox_attr_i(c, "axis", -1), ni + 1, &axis));
    /* arange(depth) shaped to broadcast at axis, and depth (0-d int64) */
    tp_value arv = tp_value_none(), dep = tp_value_none();
    int64_t shp[TP_MAX_DIMS];
    const tp_value *dv = ox_in(c, 1);
    bool run_time = dv && !ox_const(dv);
    if (run_time) {
        TP_TRY(one_hot_run_time_range(c, dv, axis, ni + 1, &arv, &dep));
    } else {
        double depth_d;
        bool has;
        TP_TRY(const_f64(c, 1, "depth", &depth_d, &has));
        if (!has) return ox_bad(c, "missing depth");
        /* checked as a double first: converting one beyond int64 (or NaN) is undefined */
        if (!(depth_d >= 1) || depth_d >= 9223372036854775808.0)
            return ox_bad(c, "input 'depth' %g must be a positive count", depth_d);
        int64_t depth = (int64_t)depth_d;
        for (int i = 0; i < ni + 1; i++) shp[i] = i == axis ? depth : 1;
        tp_tensor *ar;
        TP_TRY(ox_new_tensor(c, TP_INT64, ni + 1, shp, false, &ar));
        for (int64_t i = 0; i < depth; i++) ((int64_t *)tp_tensor_data(ar))[i] = i;
        arv = tp_value_tensor(ar);
        tp_status st0 = ox_scalar_tensor(TP_INT64, (double)depth, &dep);
        if (st0 != TP_OK) {
            tp_value_clear(&arv);
            return st0;
        }
    }
    /* wrap negative indices, unsqueeze at axis, compare with arange */
    tp_value i64 = tp_value_none(), neg = tp_value_none(), plus = tp_value_none();
    tp_value w = tp_value_none(), un = tp_value_none(), eq = tp_value_none(), off = tp_value_none();
    tp_value on = tp_value_none(), r = tp_value_none();
    tp_status st = ox_cast(c, idx, TP_INT64, &i64);
    if (st == TP_OK) st = binop_scalar(c, TP_OP_LT, &i64, 0, &neg);
    if (st == TP_OK) st = ox_call2(c, TP_OP_ADD, &i64, &dep, &plus);
    ox_args A;
    if (st == TP_OK) st = ox_call3(c, TP_OP_WHERE, &neg, &plus, &i64, &w);
    if (st == TP_OK) {
        ox_args_init(&A);
        ox_arg_ref(&A, &w);
        ox_arg(&A, tp_value_int(axis));
        st = ox_call(c, TP_OP_UNSQUEEZE, &A, &un);
    }
    if (st == TP_OK) st = ox_call2(c, TP_OP_EQ, &un, &arv, &eq);
    for (int k = 0; k < 2 && st == TP_OK; k++) {
        ox_args_init(&A);
        ox_arg_ref(&A, vals);
        ox_arg(&A, tp_value_int(0));
        ox_arg(&A, tp_value_int(k));
        st = ox_call(c, TP_OP_SELECT, &A, k ? &on : &off);
    }
    if (st == TP_OK) st = ox_call3(c, TP_OP_WHERE, &eq, &on, &off, &r);
    tp_value cast = tp_value_none();
    if (st == TP_OK) st = ox_cast(c, &r, dtype_of(vals), &cast);
    if (st == TP_OK && run_time) { /* the depth dim is known when it runs */
        for (int i = 0, j = 0; i < ni + 1; i++) shp[i] = i == axis ? 1 : sizes_of(idx)[j++];
        st = ox_dd_meta(c, &cast, dtype_of(vals), ni + 1, shp);
    }
    tp_value vs[] = {arv, dep, i64, neg, plus, w, un, eq, off, on, r};
    for (size_t i = 0; i < TP_ARRAY_LEN(vs); i++) tp_value_clear(&vs[i]);
    if (st != TP_OK) {
        tp_value_clear(&cast);
        return st;
    }
    return set_out(c, &cast);
}

/* reshape x to s6, permute, reshape to o4 (DepthToSpace / SpaceToDepth). */
static tp_status depth_space_apply(ox_ctx *c, const tp_value *x, const int64_t *s6, const int64_t *perm,
                                   const int64_t *o4) {
    tp_value t1 = tp_value_none(), t2 = tp_value_none(), r = tp_value_none();
    tp_status st = reshape(c, x, s6, 6, &t1);
    if (st == TP_OK) st = call_ints(c, TP_OP_PERMUTE, &t1, perm, 6, &t2);
    if (st == TP_OK) st = reshape(c, &t2, o4, 4, &r);
    tp_value_clear(&t1);
    tp_value_clear(&t2);
    TP_TRY(st);
    return set_out(c, &r);
}

static tp_status map_depth_space(ox_ctx *c, bool to_space) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    if (rank_of(x) != 4) return ox_bad(c, "input must be 4-D");
    int64_t b = ox_attr_i(c, "blocksize", 0);
    if (b < 1) return ox_bad(c, "attribute 'blocksize' %" PRId64 " must be positive", b);
    const int64_t *s = sizes_of(x);
    int64_t N = s[0], C = s[1], H = s[2], W = s[3], bb, big[2];
    /* b * b, and the grown dims (H * b, W * b or C * b * b), must fit int64;
     * with an empty input dim nothing else bounds b */
    if (!tp_mul_overflow_i64(b, b, &bb) ||
        !(to_space ? tp_mul_overflow_i64(H, b, &big[0]) && tp_mul_overflow_i64(W, b, &big[1])
                   : tp_mul_overflow_i64(C, bb, &big[0])))
        return ox_bad(c, "attribute 'blocksize' %" PRId64 " is too large for input [%" PRId64 ", %" PRId64 ", %" PRId64
                      ", %" PRId64 "]", b, N, C, H, W);
    char buf[8];
    bool crd = !strcmp(ox_attr_s(c, "mode", "DCR", buf, sizeof buf), "CRD");
    if (to_space) {
        if (C % bb) return ox_bad(c, "channels (%" PRId64 ") not divisible by blocksize^2 (attribute 'blocksize' %" PRId64 ")", C, b);
        int64_t s6[6], perm[6];
        if (crd) {
            int64_t a[6] = {N, C / bb, b, b, H, W}, p[6] = {0, 1, 4, 2, 5, 3};
            memcpy(s6, a, sizeof a), memcpy(perm, p, sizeof p);
        } else {
            int64_t a[6] = {N, b, b, C / bb, H, W}, p[6] = {0, 3, 4, 1, 5, 2};
            memcpy(s6, a, sizeof a), memcpy(perm, p, sizeof p);
        }
        int64_t o4[4] = {N, C / bb, big[0], big[1]};
        return depth_space_apply(c, x, s6, perm, o4);
    } else {
        if (H % b || W % b)
            return ox_bad(c, "spatial dims (%" PRId64 ", %" PRId64 ") not divisible by attribute 'blocksize' %" PRId64, H,
                          W, b);
        /* DCR (the only order before opset 28): channel (bh * b + bw) * C + c;
         * CRD: c * b * b + bh * b + bw. */
        int64_t s6[6] = {N, C, H / b, b, W / b, b}, o4[4] = {N, big[0], H / b, W / b};
        int64_t perm[6] = {0, 3, 5, 1, 2, 4};
        if (crd) {
            int64_t p[6] = {0, 1, 3, 5, 2, 4};
            memcpy(perm, p, sizeof p);
        }
        return depth_space_apply(c, x, s6, perm, o4);
    }
}

static tp_status map_eye_like(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    if (rank_of(x) != 2) return ox_bad(c, "input must be 2-D");
    tp_dtype dt = dtype_of(x);
    const Onnx__AttributeProto *a = ox_attr(c, "dtype");
    if (a && a->has_i) TP_TRY(dtype_attr(c, "dtype", a->i, &dt));
    int64_t k = ox_attr_i(c, "k", 0);
    tp_tensor *t;
    TP_TRY(ox_new_tensor(c, dt, 2, sizes_of(x), true, &t));
    int64_t R = sizes_of(x)[0], C = sizes_of(x)[1];
    /* ones at (i, i + k); none unless -R < k < C, which keeps i + k in range */
    if (k > -R && k < C)
        for (int64_t i = k < 0 ? -k : 0; i < R && i + k < C; i++)
            tp__store_f64((char *)tp_tensor_data(t) + (size_t)(i * C + i + k) * tp_dtype_size(dt), dt, 1);
    tp_value v = tp_value_tensor(t);
    return set_out(c, &v);
}

/* Scale and zero point of a per-tensor or per-axis (de)quantization, the
 * latter reshaped to broadcast along `axis` of x; the zero point as float. */
static tp_status quant_params(ox_ctx *c, const tp_value *x, const tp_value *sc, const tp_value *zp, tp_value *scale_b,
                              tp_value *zp_b) {
    *scale_b = tp_value_none();
    *zp_b = tp_value_none();
    int nd = rank_of(x);
    bool per_axis = rank_of(sc) == 1 && sizes_of(sc)[0] > 1;
    int64_t shp[TP_MAX_DIMS];
    if (per_axis) {
        int axis;
        TP_TRY(wrap_axis(c, ox_attr_i(c, "axis", 1), nd, &axis));
        if (!ox_in_dyn(c, 0) && sizes_of(x)[axis] != sizes_of(sc)[0])
            return ox_bad(c, "%" PRId64 " scales for axis %d of size %" PRId64, sizes_of(sc)[0], axis, sizes_of(x)[axis]);
        for (int i = 0; i < nd; i++) shp[i] = i == axis ? sizes_of(sc)[0] : 1;
    }
    tp_value zf = tp_value_none();
    tp_status st = per_axis ? reshape(c, sc, shp, nd, scale_b) : tp_value_copy(sc, scale_b);
    if (st == TP_OK && zp) st = ox_cast(c, zp, TP_FLOAT32, per_axis ? &zf : zp_b);
    if (st == TP_OK && zp && per_axis) st = reshape(c, &zf, shp, nd, zp_b);
    tp_value_clear(&zf);
    if (st != TP_OK) {
        tp_value_clear(scale_b);
        tp_value_clear(zp_b);
    }
    return st;
}

static tp_status map_dequantize(ox_ctx *c) {
    const tp_value *x, *sc, *zp = ox_in(c, 2);
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &sc));
    if (rank_of(sc) > 1) return ox_unsupported(c, "blocked quantization (scale of rank %d)", rank_of(sc));
    tp_dtype out_dt = dtype_of(sc);
    const Onnx__AttributeProto *od = ox_attr(c, "output_dtype");
    if (od && od->has_i && od->i != 0) TP_TRY(dtype_attr(c, "output_dtype", od->i, &out_dt));
    tp_value xf = tp_value_none(), d = tp_value_none(), scale_b, zp_b, r = tp_value_none();
    TP_TRY(quant_params(c, x, sc, zp, &scale_b, &zp_b));
    tp_status st = ox_cast(c, x, TP_FLOAT32, &xf);
    if (st == TP_OK && zp) {
        st = ox_call2(c, TP_OP_SUB, &xf, &zp_b, &d);
        tp_value_clear(&xf);
        xf = d;
    }
    if (st == TP_OK) st = ox_call2(c, TP_OP_MUL, &xf, &scale_b, &r);
    tp_value_clear(&xf);
    tp_value_clear(&scale_b);
    tp_value_clear(&zp_b);
    TP_TRY(st);
    return set_out_cast(c, &r, out_dt);
}

static tp_status map_quantize(ox_ctx *c) {
    const tp_value *x, *sc, *zp = ox_in(c, 2);
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &sc));
    if (rank_of(sc) > 1) return ox_unsupported(c, "blocked quantization (scale of rank %d)", rank_of(sc));
    if (ox_attr_i(c, "precision", 0) != 0) return ox_unsupported(c, "attribute 'precision'");
    tp_dtype qt = zp ? dtype_of(zp) : TP_UINT8;
    const Onnx__AttributeProto *od = ox_attr(c, "output_dtype");
    if (!zp && od && od->has_i && od->i != 0) TP_TRY(dtype_attr(c, "output_dtype", od->i, &qt));
    if (qt != TP_UINT8 && qt != TP_INT8) return ox_unsupported(c, "quantized type %s", tp_dtype_name(qt));
    tp_value scale_b, zp_b, q = tp_value_none(), rq = tp_value_none(), sh = tp_value_none(), cl = tp_value_none();
    tp_value r = tp_value_none();
    TP_TRY(quant_params(c, x, sc, zp, &scale_b, &zp_b));
    tp_status st = ox_call2(c, TP_OP_DIV, x, &scale_b, &q);
    if (st == TP_OK) st = ox_call1(c, TP_OP_ROUND, &q, &rq); /* half to even, as ONNX */
    if (st == TP_OK && zp) st = ox_call2(c, TP_OP_ADD, &rq, &zp_b, &sh);
    else if (st == TP_OK) sh = rq, rq = tp_value_none();
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, &sh);
        ox_arg(&A, tp_value_float(qt == TP_UINT8 ? 0.0 : -128.0));
        ox_arg(&A, tp_value_float(qt == TP_UINT8 ? 255.0 : 127.0));
        st = ox_call(c, TP_OP_CLAMP, &A, &cl);
    }
    if (st == TP_OK) st = ox_cast(c, &cl, qt, &r);
    tp_value vs[] = {scale_b, zp_b, q, rq, sh, cl};
    for (size_t i = 0; i < TP_ARRAY_LEN(vs); i++) tp_value_clear(&vs[i]);
    TP_TRY(st);
    return set_out(c, &r);
}

/* Resize / Upsample as separable gathers: for every dim whose coordinates
 * change, the output is sum_t w_t[o] * x[idx_t[o]] along that dim, with the
 * taps (1 nearest, 2 linear, 4 cubic) and weights computed here by the ONNX
 * reference rules (coordinate transformation, nearest rounding, edge
 * clamping, cubic coefficient A, exclude_outside). Shapes are static. */
static double resize_coord(const char *ctm, double x, double scale, int64_t in, double out_len) {
    if (!strcmp(ctm, "half_pixel")) return (x + 0.5) / scale - 0.5;
    if (!strcmp(ctm, "pytorch_half_pixel")) return out_len > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    if (!strcmp(ctm, "align_corners")) return out_len == 1 ? 0.0 : x * (double)(in - 1) / (out_len - 1);
    if (!strcmp(ctm, "tf_half_pixel_for_nn")) return (x + 0.5) / scale;
    return x / scale; /* asymmetric */
}

static int64_t resize_nearest(const char *nm, double x) {
    double f = floor(x);
    if (!strcmp(nm, "floor")) return (int64_t)f;
    if (!strcmp(nm, "ceil")) return (int64_t)ceil(x);
    if (x - f == 0.5) return (int64_t)(!strcmp(nm, "round_prefer_ceil") ? f + 1 : f);
    return (int64_t)nearbyint(x);
}

static void cubic_coeffs(double r, double A, double c[4]) {
    double s = r + 1, t = 1 - r, u = 2 - r;
    c[0] = ((A * s - 5 * A) * s + 8 * A) * s - 4 * A;
    c[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
    c[2] = ((A + 2) * t - (A + 3)) * t * t + 1;
    c[3] = ((A * u - 5 * A) * u + 8 * A) * u - 4 * A;
}

/* tf_crop_and_resize: output o of out samples the crop [start, end] (roi,
 * normalised) of the input's in positions; outside [0, in - 1] the output is
 * the extrapolation value (valid[o] = false). */
static double crop_coord(double x, int64_t in, int64_t out, double start, double end) {
    if (out > 1) return start * (double)(in - 1) + x * (end - start) * (double)(in - 1) / (double)(out - 1);
    return 0.5 * (start + end) * (double)(in - 1);
}

/* crop: {start, end} of this dim for tf_crop_and_resize, else NULL; valid
 * (out entries) is then filled. */
static tp_status resize_dim(ox_ctx *c, tp_value *v, int dim, int64_t out, double scale, const char *mode,
                            const char *ctm, const char *nm, double A, bool exclude, const double *crop, bool *valid) {
    int nd = rank_of(v);
    int64_t in = sizes_of(v)[dim];
    int taps = !strcmp(mode, "nearest") ? 1 : !strcmp(mode, "linear") ? 2 : 4;
    double out_len = !strcmp(ctm, "align_corners") && scale > 0 ? (double)in * scale : (double)out;
    TP_TRY(ox_check_constant(c, TP_FLOAT64, 2, (int64_t[]){4, out})); /* idx and w below, and the tables */
    int64_t *idx = tp_malloc(sizeof(int64_t) * (size_t)(out ? out : 1) * 4);
    double *w = tp_malloc(sizeof(double) * (size_t)(out ? out : 1) * 4);
    if (!idx || !w) {
        tp_free(idx);
        tp_free(w);
        return tp_error(TP_ERR_NOMEM, "out of memory");
    }
    for (int64_t o = 0; o < out; o++) {
        double x = crop ? crop_coord((double)o, in, out, crop[0], crop[1]) : resize_coord(ctm, (double)o, scale, in, out_len);
        if (crop) {
            valid[o] = x >= 0 && x <= (double)(in - 1);
            if (!valid[o]) x = 0; /* any in-range taps: the value is replaced */
        }
        if (taps == 1) {
            int64_t i = resize_nearest(nm, x);
            idx[o] = i < 0 ? 0 : i >= in ? in - 1 : i;
            w[o] = 1;
            continue;
        }
        double f = floor(x), r = x - f, cf[4];
        int64_t base = (int64_t)f;
        if (taps == 2) {
            cf[0] = 1 - r, cf[1] = r;
        } else {
            cubic_coeffs(r, A, cf);
            base -= 1;
        }
        double sum = 0;
        for (int t = 0; t < taps; t++) {
            int64_t i = base + t;
            if (exclude && (i < 0 || i >= in)) cf[t] = 0;
            sum += cf[t];
            idx[t * out + o] = i < 0 ? 0 : i >= in ? in - 1 : i;
        }
        for (int t = 0; t < taps; t++) w[t * out + o] = exclude && sum != 0 ? cf[t] / sum : cf[t];
    }
    tp_value acc = tp_value_none();
    tp_status st = TP_OK;
    for (int t = 0; t < taps && st == TP_OK; t++) {
        tp_tensor *it = NULL, *wt = NULL;
        st = tp_tensor_from_data(TP_INT64, 1, &out, idx + t * out, &it);
        tp_value iv = it ? tp_value_tensor(it) : tp_value_none(), sel = tp_value_none();
        if (st == TP_OK) {
            ox_args A2;
            ox_args_init(&A2);
            ox_arg_ref(&A2, v);
            ox_arg(&A2, tp_value_int(dim));
            ox_arg(&A2, iv);
            st = ox_call(c, TP_OP_INDEX_SELECT, &A2, &sel);
        } else {
            tp_value_clear(&iv);
        }
        if (st == TP_OK && taps > 1) {
            int64_t wshape[TP_MAX_DIMS];
            for (int i = 0; i < nd - dim; i++) wshape[i] = i == 0 ? out : 1;
            st = ox_new_tensor(c, dtype_of(v), nd - dim, wshape, false, &wt);
            for (int64_t o = 0; st == TP_OK && o < out; o++)
                tp__store_f64((char *)tp_tensor_data(wt) + (size_t)o * tp_dtype_size(dtype_of(v)), dtype_of(v),
                              w[t * out + o]);
            tp_value wv = wt ? tp_value_tensor(wt) : tp_value_none(), prod = tp_value_none();
            if (st == TP_OK) st = ox_call2(c, TP_OP_MUL, &sel, &wv, &prod);
            tp_value_clear(&wv);
            tp_value_clear(&sel);
            sel = prod;
        }
        if (st == TP_OK && acc.kind != TP_VAL_NONE) {
            tp_value sum = tp_value_none();
            st = ox_call2(c, TP_OP_ADD, &acc, &sel, &sum);
            tp_value_clear(&acc);
            tp_value_clear(&sel);
            acc = sum;
        } else if (st == TP_OK) {
            acc = sel;
        } else {
            tp_value_clear(&sel);
        }
    }
    tp_free(idx);
    tp_free(w);
    if (st != TP_OK) {
        tp_value_clear(&acc);
        return st;
    }
    tp_value_clear(v);
    *v = acc;
    return TP_OK;
}

static tp_status map_resize(ox_ctx *c, bool upsample) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int nd = rank_of(x);
    bool old = upsample || ox_opset(c) < 11;
    char mbuf[32], cbuf[40], nbuf[32];
    const char *mode = ox_attr_s(c, "mode", "nearest", mbuf, sizeof mbuf);
    if (!strcmp(mode, "bilinear") || !strcmp(mode, "trilinear")) mode = "linear";
    const char *ctm = old ? "asymmetric" : ox_attr_s(c, "coordinate_transformation_mode", "half_pixel", cbuf, sizeof cbuf);
    const char *nm = old ? "floor" : ox_attr_s(c, "nearest_mode", "round_prefer_floor", nbuf, sizeof nbuf);
    double A = ox_attr_f(c, "cubic_coeff_a", -0.75);
    bool exclude = ox_attr_i(c, "exclude_outside", 0) != 0;
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "cubic"))
        return ox_unsupported(c, "mode '%s'", mode);
    bool crop = !strcmp(ctm, "tf_crop_and_resize");
    bool symmetric = !strcmp(ctm, "half_pixel_symmetric");
    if (!crop && !symmetric && strcmp(ctm, "half_pixel") && strcmp(ctm, "pytorch_half_pixel") &&
        strcmp(ctm, "align_corners") && strcmp(ctm, "asymmetric") && strcmp(ctm, "tf_half_pixel_for_nn"))
        return ox_unsupported(c, "coordinate mode '%s'", ctm);
    if (strcmp(nm, "round_prefer_floor") && strcmp(nm, "round_prefer_ceil") && strcmp(nm, "floor") && strcmp(nm, "ceil"))
        return ox_unsupported(c, "nearest_mode '%s'", nm);
    if (ox_attr_i(c, "antialias", 0)) return ox_unsupported(c, "antialias");
    /* axes (opset 18): scales / sizes / roi for these dims only */
    int64_t axes[TP_MAX_DIMS];
    int n_axes = 0;
    TP_TRY(ox_attr_ints(c, "axes", axes, TP_MAX_DIMS, &n_axes));
    if (n_axes < 0) n_axes = 0;
    for (int i = 0; i < n_axes; i++) {
        int a;
        TP_TRY(wrap_axis(c, axes[i], nd, &a));
        for (int k = 0; k < i; k++)
            if (axes[k] == a) return ox_bad(c, "axis %d repeated in 'axes'", a);
        axes[i] = a;
    }
    char kbuf[16];
    const char *keep = old ? "stretch" : ox_attr_s(c, "keep_aspect_ratio_policy", "stretch", kbuf, sizeof kbuf);
    int keep_policy = !strcmp(keep, "not_larger") ? 1 : !strcmp(keep, "not_smaller") ? 2 : 0;
    if (!keep_policy && strcmp(keep, "stretch")) return ox_bad(c, "keep_aspect_ratio_policy '%s'", keep);
    double scales[TP_MAX_DIMS];
    int64_t sizes[TP_MAX_DIMS];
    int ns = -1, nz = -1;
    int scales_in = old ? 1 : 2;
    const tp_value *sv = ox_in(c, scales_in);
    { /* scales, sizes or roi given when the program runs */
        const tp_value *zv = old ? NULL : ox_in(c, 3), *rv = crop ? ox_in(c, 1) : NULL;
        bool s_given = sv && ox_meta(sv) && tp_tensor_numel(ox_meta(sv)) > 0 && !(upsample && ox_opset(c) < 9);
        bool z_given = zv && ox_meta(zv) && tp_tensor_numel(ox_meta(zv)) > 0;
        bool rt = (s_given && !ox_const(sv)) || (z_given && !ox_const(zv)) || (rv && !ox_const(rv));
        /* axes, the aspect-ratio policies and half_pixel_symmetric go this way with constants too (they fold) */
        if ((rt || n_axes || (keep_policy && z_given) || symmetric) && !ox_in_dyn(c, 0)) {
            if (!s_given && !z_given) return ox_bad(c, "needs scales or sizes for every dim");
            ox_resize rz = {mode, ctm, nm, A, ox_attr_f(c, "extrapolation_value", 0.0), exclude,
                            z_given ? NULL : sv, z_given ? zv : NULL, rv, n_axes, axes, z_given ? keep_policy : 0};
            tp_value r;
            TP_TRY(ox_run_time_resize(c, x, &rz, &r));
            return set_out(c, &r);
        }
    }
    if (n_axes || (keep_policy && ox_in(c, 3)) || symmetric)
        return ox_unsupported(c, "axes, keep_aspect_ratio_policy or half_pixel_symmetric on a dynamically shaped input");
    if (upsample && ox_opset(c) < 9) {
        const Onnx__AttributeProto *a = ox_attr(c, "scales");
        if (!a) return ox_bad(c, "missing scales");
        ns = (int)a->n_floats;
        for (int i = 0; i < ns && i < TP_MAX_DIMS; i++) scales[i] = a->floats[i];
    } else if (sv && tp_tensor_numel(ox_meta(sv)) > 0) {
        tp_tensor *t = ox_const(sv);
        if (!t) {
            ox_note_need_constant(c, sv);
            return ox_unsupported(c, "scales must be a constant");
        }
        ns = (int)tp_tensor_numel(t);
        if (ns > TP_MAX_DIMS) return ox_bad(c, "too many scales");
        for (int i = 0; i < ns; i++) scales[i] = tp_tensor_item_f64(t, i);
    }
    if (!old) TP_TRY(const_ints(c, 3, "sizes", sizes, TP_MAX_DIMS, &nz));
    double roi[2 * TP_MAX_DIMS];
    if (crop) { /* roi: starts then ends of every dim, normalised */
        const tp_value *rv = ox_in(c, 1);
        tp_tensor *rt = rv ? ox_const(rv) : NULL;
        if (rv && !rt) {
            ox_note_need_constant(c, rv);
            return ox_unsupported(c, "input 'roi' must be a constant (known when importing)");
        }
        if (!rt || tp_tensor_numel(rt) != 2 * nd)
            return ox_bad(c, "tf_crop_and_resize needs input 'roi' with %d values (starts and ends of %d dims), got %" PRId64,
                          2 * nd, nd, rt ? tp_tensor_numel(rt) : 0);
        for (int i = 0; i < 2 * nd; i++) roi[i] = tp_tensor_item_f64(rt, i);
        for (int i = 0; i < 2 * nd; i++)
            if (!isfinite(roi[i])) return ox_bad(c, "roi value %d is not finite", i);
    }
    int64_t out[TP_MAX_DIMS];
    if (nz == nd) {
        for (int i = 0; i < nd; i++) {
            out[i] = sizes[i];
            scales[i] = (double)sizes[i] / (double)sizes_of(x)[i];
        }
    } else if (ns == nd) {
        for (int i = 0; i < nd; i++) {
            double o = floor((double)sizes_of(x)[i] * scales[i]);
            if (!(scales[i] > 0) || !f64_to_i64(o, &out[i]))
                return ox_bad(c, "scale %g for dim %d (size %" PRId64 ") must be positive and give a size that fits int64",
                              scales[i], i, sizes_of(x)[i]);
        }
    } else {
        return ox_bad(c, "needs scales or sizes for every dim");
    }
    tp_value v, mask = tp_value_none();
    TP_TRY(tp_value_copy(x, &v));
    tp_status st = TP_OK;
    for (int d = 0; d < nd && st == TP_OK; d++) {
        bool identity = out[d] == sizes_of(x)[d] && scales[d] == 1.0 && strcmp(ctm, "tf_half_pixel_for_nn") != 0 &&
                        (!crop || (roi[d] == 0 && roi[nd + d] == 1));
        if (identity) continue;
        if (out[d] < 0 || !(scales[d] > 0) || (out[d] > 0 && sizes_of(x)[d] == 0)) {
            st = ox_bad(c, "output size %" PRId64 " (scale %g) for dim %d of size %" PRId64 " is invalid", out[d],
                        scales[d], d, sizes_of(x)[d]);
            break;
        }
        bool *valid = NULL;
        if (crop) {
            st = ox_check_constant(c, TP_BOOL, 1, &out[d]);
            valid = st == TP_OK ? tp_malloc((size_t)(out[d] ? out[d] : 1)) : NULL;
            if (st == TP_OK && !valid) st = tp_error(TP_ERR_NOMEM, "out of memory");
        }
        double cr[2] = {crop ? roi[d] : 0, crop ? roi[nd + d] : 0};
        if (st == TP_OK) st = resize_dim(c, &v, d, out[d], scales[d], mode, ctm, nm, A, exclude, crop ? cr : NULL, valid);
        bool all = true;
        for (int64_t o = 0; valid && st == TP_OK && o < out[d]; o++) all = all && valid[o];
        if (valid && st == TP_OK && !all) { /* mask &= valid, shaped [out, 1, ...] to broadcast over the later dims */
            int64_t ms[TP_MAX_DIMS];
            for (int i = 0; i < nd - d; i++) ms[i] = i == 0 ? out[d] : 1;
            tp_tensor *mt = NULL;
            st = ox_new_tensor(c, TP_BOOL, nd - d, ms, false, &mt);
            if (st == TP_OK) memcpy(tp_tensor_data(mt), valid, (size_t)out[d]);
            tp_value mv = mt ? tp_value_tensor(mt) : tp_value_none(), both = tp_value_none();
            if (st == TP_OK && mask.kind != TP_VAL_NONE) {
                st = ox_call2(c, TP_OP_LOGICAL_AND, &mask, &mv, &both);
                tp_value_clear(&mv);
                tp_value_clear(&mask);
                mask = both;
            } else if (st == TP_OK) {
                mask = mv;
            } else {
                tp_value_clear(&mv);
            }
        }
        tp_free(valid);
    }
    if (st == TP_OK && mask.kind != TP_VAL_NONE) { /* outside the input: extrapolation_value */
        tp_value ev = tp_value_none(), r = tp_value_none();
        st = ox_scalar_tensor(dtype_of(x), ox_attr_f(c, "extrapolation_value", 0.0), &ev);
        if (st == TP_OK) {
            ox_args A2;
            ox_args_init(&A2);
            ox_arg_ref(&A2, &mask);
            ox_arg_ref(&A2, &v);
            ox_arg(&A2, ev);
            st = ox_call(c, TP_OP_WHERE, &A2, &r);
        }
        if (st == TP_OK) {
            tp_value_clear(&v);
            v = r;
        }
    }
    tp_value_clear(&mask);
    if (st != TP_OK) {
        tp_value_clear(&v);
        return st;
    }
    return set_out(c, &v);
}

/* NonZero: nonzero(x) transposed to ONNX's [rank, nnz]. Compress: the
 * condition cut to the length it may select from, then index_select along
 * the axis by its nonzero positions (or masked_select of the flattened
 * input). The output sizes depend on the data: constant inputs fold;
 * run-time ones make nodes only a graph output may use, and the program is
 * interpreted. */
static tp_status map_nonzero(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    if (rank_of(x) < 1) return ox_unsupported(c, "NonZero of a 0-d tensor");
    tp_value nz = tp_value_none(), r = tp_value_none();
    TP_TRY(ox_call1(c, TP_OP_NONZERO, x, &nz));
    ox_args A;
    ox_args_init(&A);
    ox_arg(&A, nz);
    ox_arg(&A, tp_value_int(0));
    ox_arg(&A, tp_value_int(1));
    TP_TRY(ox_call(c, TP_OP_TRANSPOSE, &A, &r));
    return set_out(c, &r);
}

static tp_status map_compress(ox_ctx *c) {
    const tp_value *x, *cond;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &cond));
    if (rank_of(cond) != 1) return ox_bad(c, "condition must be 1-D, got rank %d", rank_of(cond));
    bool has_axis = ox_attr(c, "axis") != NULL;
    int nd = rank_of(x), axis = 0;
    tp_value src = tp_value_none(), cs = tp_value_none(), t = tp_value_none(), r = tp_value_none();
    int64_t len;
    tp_status st = TP_OK;
    if (has_axis) {
        int64_t a = ox_attr_i(c, "axis", 0);
        if (a < -nd || a >= nd) return ox_bad(c, "axis %" PRId64 " out of range for rank %d", a, nd);
        axis = (int)(a < 0 ? a + nd : a);
        len = sizes_of(x)[axis];
        st = tp_value_copy(x, &src);
    } else {
        int64_t flat[1] = {-1};
        len = tp_tensor_numel(ox_meta(x));
        st = reshape(c, x, flat, 1, &src);
    }
    int64_t m = sizes_of(cond)[0] < len ? sizes_of(cond)[0] : len;
    ox_args A;
    if (st == TP_OK) { /* cond[:m] */
        ox_args_init(&A);
        ox_arg_ref(&A, cond);
        ox_arg(&A, tp_value_int(0));
        ox_arg(&A, tp_value_int(0));
        ox_arg(&A, tp_value_int(m));
        st = ox_call(c, TP_OP_SLICE, &A, &cs);
    }
    if (st == TP_OK && !has_axis) { /* src[:m], masked by it */
        ox_args_init(&A);
        ox_arg_ref(&A, &src);
        ox_arg(&A, tp_value_int(0));
        ox_arg(&A, tp_value_int(0));
        ox_arg(&A, tp_value_int(m));
        st = take(ox_call(c, TP_OP_SLICE, &A, &t), &src, &t);
        if (st == TP_OK) st = ox_call2(c, TP_OP_MASKED_SELECT, &src, &cs, &r);
    } else if (st == TP_OK) { /* index_select(src, axis, nonzero(cs).flatten()) */
        int64_t flat[1] = {-1};
        st = ox_call1(c, TP_OP_NONZERO, &cs, &t);
        if (st == TP_OK) st = take(reshape(c, &t, flat, 1, &r), &t, &r);
        if (st == TP_OK) {
            ox_args_init(&A);
            ox_arg_ref(&A, &src);
            ox_arg(&A, tp_value_int(axis));
            ox_arg_ref(&A, &t);
            st = ox_call(c, TP_OP_INDEX_SELECT, &A, &r);
        }
    }
    if (st == TP_OK) st = set_out(c, &r);
    tp_value all[] = {src, cs, t, r};
    for (size_t i = 0; i < TP_ARRAY_LEN(all); i++) tp_value_clear(&all[i]);
    return st;
}

/* NonMaxSuppression: non_max_suppression, its row count data-dependent
 * (the thresholds may be run-time tensors); later nodes may use the result
 * (its rows counted at a hint size while importing). */
static tp_status map_nms(ox_ctx *c) {
    const tp_value *boxes, *scores;
    TP_TRY(need(c, 0, &boxes));
    TP_TRY(need(c, 1, &scores));
    int64_t cpb = ox_attr_i(c, "center_point_box", 0);
    if (cpb != 0 && cpb != 1) return ox_bad(c, "center_point_box must be 0 or 1, got %" PRId64, cpb);
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, boxes);
    ox_arg_ref(&A, scores);
    for (int i = 2; i <= 4; i++) {
        const tp_value *v = ox_in(c, i);
        if (v) ox_arg_ref(&A, v);
        else ox_arg(&A, tp_value_none());
    }
    ox_arg(&A, tp_value_int(cpb));
    tp_value r = tp_value_none();
    tp_status st = ox_call(c, TP_OP_NON_MAX_SUPPRESSION, &A, &r);
    if (st == TP_OK) st = ox_dd_meta(c, &r, TP_INT64, 2, (int64_t[]){OX_DD_HINT, 3});
    if (st != TP_OK) {
        tp_value_clear(&r);
        return st;
    }
    return set_out(c, &r);
}

/* Unique: _unique2 (flattened, inverse reshaped to 1-D) or unique_dim along
 * the axis, both sorted; indices, the first occurrences, by a scatter_reduce
 * (amin) of the positions 0..n-1 (a cumsum of ones) into the groups.
 * sorted=0 keeps the order of first occurrence: the groups permuted by
 * argsort(indices), the inverse mapped through that permutation's inverse.
 * The output sizes depend on the data, as for NonZero. */
static tp_status unique_item(ox_ctx *c, const tp_value *r, int k, tp_value *out) {
    if (r->kind != TP_VAL_NODE) return tp_value_copy(tp_value_at(r, k), out);
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, r);
    ox_arg(&A, tp_value_int(k));
    return ox_call(c, TP_OP_GETITEM, &A, out);
}

static tp_status index_select0(ox_ctx *c, const tp_value *x, int dim, const tp_value *idx, tp_value *out) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(dim));
    ox_arg_ref(&A, idx);
    return ox_call(c, TP_OP_INDEX_SELECT, &A, out);
}

static tp_status argsort0(ox_ctx *c, const tp_value *x, tp_value *out) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(0));
    return ox_call(c, TP_OP_ARGSORT, &A, out);
}

static tp_status map_unique(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    bool has_axis = ox_attr(c, "axis") != NULL, sorted = ox_attr_i(c, "sorted", 1) != 0;
    int axis = 0;
    if (has_axis) TP_TRY(wrap_axis(c, ox_attr_i(c, "axis", 0), rank_of(x), &axis));
    else if (rank_of(x) < 1) return ox_unsupported(c, "Unique of a 0-d tensor");
    tp_value r = tp_value_none(), y = tp_value_none(), inv = tp_value_none(), cnt = tp_value_none(),
             t = tp_value_none(), pos = tp_value_none(), first = tp_value_none(), perm = tp_value_none(),
             rank = tp_value_none();
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    if (has_axis) ox_arg(&A, tp_value_int(axis));
    ox_arg(&A, tp_value_bool(true));
    ox_arg(&A, tp_value_bool(true));
    ox_arg(&A, tp_value_bool(true));
    tp_status st = ox_call(c, has_axis ? TP_OP_UNIQUE_DIM : TP_OP__UNIQUE2, &A, &r);
    if (st == TP_OK) st = unique_item(c, &r, 0, &y);
    if (st == TP_OK) st = unique_item(c, &r, 1, &t);
    if (st == TP_OK) st = unique_item(c, &r, 2, &cnt);
    int64_t flat[1] = {-1};
    if (st == TP_OK) st = reshape(c, &t, flat, 1, &inv);
    tp_value_clear(&t);
    /* positions 0..n-1: cumsum of ones, less one */
    if (st == TP_OK) {
        ox_args_init(&A);
        ox_arg_ref(&A, &inv);
        ox_arg(&A, tp_value_int(1));
        st = ox_call(c, TP_OP_FULL_LIKE, &A, &t);
    }
    if (st == TP_OK) {
        ox_args_init(&A);
        ox_arg_ref(&A, &t);
        ox_arg(&A, tp_value_int(0));
        st = ox_call(c, TP_OP_CUMSUM, &A, &pos);
    }
    if (st == TP_OK) {
        tp_value d = tp_value_none();
        st = take(ox_call2(c, TP_OP_SUB, &pos, &t, &d), &pos, &d);
    }
    tp_value_clear(&t);
    /* first occurrences: amin of the positions in each group */
    if (st == TP_OK) {
        ox_args_init(&A);
        ox_arg_ref(&A, &cnt);
        ox_arg(&A, tp_value_int(INT64_MAX));
        st = ox_call(c, TP_OP_FULL_LIKE, &A, &t);
    }
    if (st == TP_OK) {
        tp_value sv = tp_value_none();
        st = tp_value_str("amin", &sv);
        if (st == TP_OK) {
            ox_args_init(&A);
            ox_arg_ref(&A, &t);
            ox_arg(&A, tp_value_int(0));
            ox_arg_ref(&A, &inv);
            ox_arg_ref(&A, &pos);
            ox_arg(&A, sv);
            st = ox_call(c, TP_OP_SCATTER_REDUCE, &A, &first);
        }
        tp_value_clear(&t);
    }
    if (st == TP_OK && !sorted) {
        st = argsort0(c, &first, &perm);
        if (st == TP_OK) st = take(index_select0(c, &y, axis, &perm, &t), &y, &t);
        if (st == TP_OK) st = take(index_select0(c, &first, 0, &perm, &t), &first, &t);
        if (st == TP_OK) st = take(index_select0(c, &cnt, 0, &perm, &t), &cnt, &t);
        if (st == TP_OK) st = argsort0(c, &perm, &rank);
        if (st == TP_OK) st = take(index_select0(c, &rank, 0, &inv, &t), &inv, &t);
    }
    if (st == TP_OK) st = ox_set_out(c, 0, &y);
    if (st == TP_OK) st = ox_set_out(c, 1, &first);
    if (st == TP_OK) st = ox_set_out(c, 2, &inv);
    if (st == TP_OK) st = ox_set_out(c, 3, &cnt);
    tp_value all[] = {r, y, inv, cnt, t, pos, first, perm, rank};
    for (size_t i = 0; i < TP_ARRAY_LEN(all); i++) tp_value_clear(&all[i]);
    return st;
}

/* GridSample (opset 16: bilinear / nearest / bicubic; 20: linear / nearest
 * / cubic) on 4-D inputs -> grid_sample. */
/* AffineGrid (opset 20): affine_grid(theta, size, align_corners); a size
 * given at run time is read with item(). */
static tp_status map_affine_grid(ox_ctx *c) {
    const tp_value *theta, *sz;
    TP_TRY(need(c, 0, &theta));
    TP_TRY(need(c, 1, &sz));
    tp_value l = tp_value_none();
    int64_t n = 0;
    bool run_time = !ox_const(sz);
    if (run_time) {
        TP_TRY(ox_run_time_ints(c, sz, "size", TP_MAX_DIMS, &l, &n));
    } else {
        int64_t v[TP_MAX_DIMS];
        int k;
        TP_TRY(tensor_ints(c, ox_const(sz), "size", v, TP_MAX_DIMS, &k));
        n = k;
        TP_TRY(tp_value_list(k, &l));
        for (int i = 0; i < k; i++) {
            tp_value e = tp_value_int(v[i]);
            tp_value_seq_set(&l, i, &e);
        }
    }
    if (n != 4 && n != 5) {
        tp_value_clear(&l);
        return ox_bad(c, "size must hold 4 or 5 values (N, C, [D,] H, W), got %" PRId64, n);
    }
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, theta);
    ox_arg(&A, l);
    ox_arg(&A, tp_value_bool(ox_attr_i(c, "align_corners", 0) != 0));
    tp_value r;
    TP_TRY(ox_call(c, TP_OP_AFFINE_GRID, &A, &r));
    if (run_time) { /* [N, (D,) H, W, 2 or 3]: the sizes are known when it runs */
        int64_t hint[6] = {1, 1, 1, 1, 1, 1};
        hint[n - 1] = n - 2;
        tp_status st = ox_dd_meta(c, &r, dtype_of(theta), (int)n, hint);
        if (st != TP_OK) {
            tp_value_clear(&r);
            return st;
        }
    }
    return set_out(c, &r);
}

static tp_status map_grid_sample(ox_ctx *c) {
    const tp_value *x, *g;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &g));
    char mb[32], pb[32];
    const char *mode = ox_attr_s(c, "mode", ox_opset(c) >= 20 ? "linear" : "bilinear", mb, sizeof mb);
    if (!strcmp(mode, "linear")) mode = "bilinear";
    else if (!strcmp(mode, "cubic")) mode = "bicubic";
    const char *pad = ox_attr_s(c, "padding_mode", "zeros", pb, sizeof pb);
    if (rank_of(x) != 4) return ox_unsupported(c, "GridSample on a rank-%d input (4-D only)", rank_of(x));
    if (strcmp(mode, "bilinear") && strcmp(mode, "nearest") && strcmp(mode, "bicubic"))
        return ox_bad(c, "mode '%s'", mode);
    tp_value m = tp_value_none(), p = tp_value_none(), v = tp_value_none();
    TP_TRY(tp_value_str(mode, &m));
    tp_status st = tp_value_str(pad, &p);
    if (st != TP_OK) {
        tp_value_clear(&m);
        return st;
    }
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ref(&A, g);
    ox_arg(&A, m);
    ox_arg(&A, p);
    ox_arg(&A, tp_value_bool(ox_attr_i(c, "align_corners", 0) != 0));
    TP_TRY(ox_call(c, TP_OP_GRID_SAMPLE, &A, &v));
    return set_out(c, &v);
}

/* -sum weight[t] * logp[n, t, ...] with ignore_index and reduction. */
static tp_status nll_compose(ox_ctx *c, const tp_value *logp, const tp_value *target, const tp_value *weight,
                             tp_value *out) {
    char buf[16];
    const char *red = ox_attr_s(c, "reduction", "mean", buf, sizeof buf);
    if (strcmp(red, "mean") && strcmp(red, "sum") && strcmp(red, "none")) return ox_bad(c, "reduction '%s'", red);
    bool has_ignore = ox_attr(c, "ignore_index") != NULL;
    int64_t ignore = ox_attr_i(c, "ignore_index", 0);
    if (rank_of(logp) < 2) return ox_bad(c, "input must have rank >= 2");
    tp_value t64 = tp_value_none(), mask = tp_value_none(), tsafe = tp_value_none(), un = tp_value_none();
    tp_value g = tp_value_none(), loss = tp_value_none(), wt = tp_value_none(), r = tp_value_none();
    tp_value tmp = tp_value_none(), tmp2 = tp_value_none();
    tp_status st = ox_cast(c, target, TP_INT64, &t64);
    ox_args A;
#define STEP(expr)                                                                                                     \
    do {                                                                                                               \
        if (st == TP_OK) st = (expr);                                                                                  \
    } while (0)
/* dst = the result of expr (on tmp), dropping dst's old value */
#define REPLACE(dst, expr)                                                                                             \
    do {                                                                                                               \
        if (st == TP_OK) st = (expr);                                                                                  \
        if (st == TP_OK) {                                                                                             \
            tp_value_clear(&(dst));                                                                                    \
            (dst) = tmp;                                                                                               \
            tmp = tp_value_none();                                                                                     \
        }                                                                                                              \
    } while (0)
    if (has_ignore) {
        /* the ignored class compared as a double: exact for |ignore| <= 2^53, which covers any class index */
        STEP(binop_scalar(c, TP_OP_NE, &t64, (double)ignore, &mask));
        STEP(ox_scalar_tensor(TP_INT64, 0, &tmp2));
        if (st == TP_OK) {
            ox_args_init(&A);
            ox_arg_ref(&A, &mask);
            ox_arg_ref(&A, &t64);
            ox_arg_ref(&A, &tmp2);
            st = ox_call(c, TP_OP_WHERE, &A, &tsafe);
        }
        tp_value_clear(&tmp2);
    } else {
        tsafe = t64;
        t64 = tp_value_none();
    }
    if (st == TP_OK) {
        ox_args_init(&A);
        ox_arg_ref(&A, &tsafe);
        ox_arg(&A, tp_value_int(1));
        st = ox_call(c, TP_OP_UNSQUEEZE, &A, &un);
    }
    if (st == TP_OK) {
        ox_args_init(&A);
        ox_arg_ref(&A, logp);
        ox_arg(&A, tp_value_int(1));
        ox_arg_ref(&A, &un);
        st = ox_call(c, TP_OP_GATHER, &A, &g);
    }
    int64_t one = 1;
    REPLACE(g, call_ints(c, TP_OP_SQUEEZE, &g, &one, 1, &tmp));
    STEP(ox_call1(c, TP_OP_NEG, &g, &loss));
    if (weight) {
        int64_t m1 = -1;
        STEP(reshape(c, &tsafe, &m1, 1, &tmp2));
        if (st == TP_OK) {
            ox_args_init(&A);
            ox_arg_ref(&A, weight);
            ox_arg(&A, tp_value_int(0));
            ox_arg_ref(&A, &tmp2);
            st = ox_call(c, TP_OP_INDEX_SELECT, &A, &tmp);
        }
        tp_value_clear(&tmp2);
        tmp2 = tmp;
        tmp = tp_value_none();
        STEP(reshape(c, &tmp2, sizes_of(&tsafe), rank_of(&tsafe), &wt));
        tp_value_clear(&tmp2);
    }
    if (has_ignore) {
        STEP(ox_cast(c, &mask, dtype_of(logp), &tmp2));
        if (wt.kind != TP_VAL_NONE) REPLACE(wt, ox_call2(c, TP_OP_MUL, &wt, &tmp2, &tmp));
        else if (st == TP_OK) wt = tmp2, tmp2 = tp_value_none();
        tp_value_clear(&tmp2);
    }
    if (wt.kind != TP_VAL_NONE) REPLACE(loss, ox_call2(c, TP_OP_MUL, &loss, &wt, &tmp));
    if (!strcmp(red, "none")) {
        if (st == TP_OK) r = loss, loss = tp_value_none();
    } else if (!strcmp(red, "sum") || wt.kind != TP_VAL_NONE) {
        STEP(ox_call1(c, TP_OP_SUM, &loss, &r));
        if (!strcmp(red, "mean")) {
            STEP(ox_call1(c, TP_OP_SUM, &wt, &tmp2));
            REPLACE(r, ox_call2(c, TP_OP_DIV, &r, &tmp2, &tmp));
            tp_value_clear(&tmp2);
        }
    } else {
        STEP(ox_call1(c, TP_OP_MEAN, &loss, &r));
    }
#undef STEP
#undef REPLACE
    if (st == TP_OK) st = ox_cast(c, &r, dtype_of(logp), out);
    tp_value vs[] = {t64, mask, tsafe, un, g, loss, wt, r, tmp, tmp2};
    for (size_t i = 0; i < TP_ARRAY_LEN(vs); i++) tp_value_clear(&vs[i]);
    return st;
}

static tp_status map_nll(ox_ctx *c) {
    const tp_value *x, *t;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &t));
    tp_value r;
    TP_TRY(nll_compose(c, x, t, ox_in(c, 2), &r));
    return set_out(c, &r);
}

static tp_status map_sce(ox_ctx *c) {
    const tp_value *x, *t;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &t));
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(1));
    tp_value lp, r;
    TP_TRY(ox_call(c, TP_OP_LOG_SOFTMAX, &A, &lp));
    tp_status st = nll_compose(c, &lp, t, ox_in(c, 2), &r);
    if (st == TP_OK) st = set_out(c, &r);
    if (st == TP_OK) st = ox_set_out(c, 1, &lp);
    tp_value_clear(&lp);
    return st;
}

static tp_status map_topk(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int64_t k;
    if (ox_opset(c) < 10) {
        k = ox_attr_i(c, "k", -1);
    } else {
        int64_t kv[1];
        int n;
        TP_TRY(const_ints(c, 1, "K", kv, 1, &n));
        if (n != 1) return ox_bad(c, "input 'K' must hold one value");
        k = kv[0];
    }
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(k));
    ox_arg(&A, tp_value_int(ox_attr_i(c, "axis", -1)));
    ox_arg(&A, tp_value_bool(ox_attr_i(c, "largest", 1) != 0));
    ox_arg(&A, tp_value_bool(true));
    tp_value r;
    TP_TRY(ox_call(c, TP_OP_TOPK, &A, &r));
    tp_value v0, v1;
    tp_status st = tp_value_copy(tp_value_at(&r, 0), &v0);
    if (st == TP_OK) st = ox_set_out(c, 0, &v0);
    if (st == TP_OK) st = tp_value_copy(tp_value_at(&r, 1), &v1);
    if (st == TP_OK) st = ox_set_out(c, 1, &v1);
    tp_value_clear(&r);
    return st;
}

/* ---- RoiAlign, DFT, STFT, MelWeightMatrix (issue #14): the onnx_* ops of
 * src/cpu/signal.c. Their size-giving inputs (dft_length, frame_step,
 * frame_length, MelWeightMatrix's scalars) must be constants at import. ---- */

/* Input i as one constant int (*present false when absent). */
static tp_status const_int1(ox_ctx *c, int i, const char *what, int64_t *out, bool *present) {
    int n;
    int64_t v[1] = {0};
    TP_TRY(const_ints(c, i, what, v, 1, &n));
    *present = n >= 0;
    if (n == 0) return ox_bad(c, "input '%s' must hold one value", what);
    *out = v[0];
    return TP_OK;
}

static tp_status map_roi_align(ox_ctx *c) {
    const tp_value *x, *rois, *bi;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &rois));
    TP_TRY(need(c, 2, &bi));
    char mb[16], cb[32];
    const char *mode = ox_attr_s(c, "mode", "avg", mb, sizeof mb);
    /* opset 10 has no coordinate_transformation_mode: it behaves as output_half_pixel */
    const char *ctm =
        ox_attr_s(c, "coordinate_transformation_mode", ox_opset(c) >= 16 ? "half_pixel" : "output_half_pixel", cb,
                  sizeof cb);
    if (strcmp(ctm, "half_pixel") && strcmp(ctm, "output_half_pixel"))
        return ox_bad(c, "coordinate_transformation_mode '%s'", ctm);
    if (strcmp(mode, "avg") && strcmp(mode, "max")) return ox_bad(c, "mode '%s'", mode);
    tp_value mv = tp_value_none(), r = tp_value_none();
    TP_TRY(tp_value_str(mode, &mv));
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ref(&A, rois);
    ox_arg_ref(&A, bi);
    ox_arg(&A, tp_value_int(ox_attr_i(c, "output_height", 1)));
    ox_arg(&A, tp_value_int(ox_attr_i(c, "output_width", 1)));
    ox_arg(&A, tp_value_int(ox_attr_i(c, "sampling_ratio", 0)));
    ox_arg(&A, tp_value_float(ox_attr_f(c, "spatial_scale", 1.0)));
    ox_arg(&A, mv);
    ox_arg(&A, tp_value_bool(!strcmp(ctm, "half_pixel")));
    TP_TRY(ox_call(c, TP_OP_ONNX_ROI_ALIGN, &A, &r));
    return set_out(c, &r);
}

static tp_status map_dft(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int64_t n = 0, axis = ox_opset(c) >= 20 ? -2 : ox_attr_i(c, "axis", 1);
    bool has_n, has_axis;
    TP_TRY(const_int1(c, 1, "dft_length", &n, &has_n));
    if (ox_opset(c) >= 20) {
        int64_t a = 0;
        TP_TRY(const_int1(c, 2, "axis", &a, &has_axis));
        if (has_axis) axis = a;
    }
    tp_value r = tp_value_none();
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, has_n ? tp_value_int(n) : tp_value_none());
    ox_arg(&A, tp_value_int(axis));
    ox_arg(&A, tp_value_bool(ox_attr_i(c, "inverse", 0) != 0));
    ox_arg(&A, tp_value_bool(ox_attr_i(c, "onesided", 0) != 0));
    TP_TRY(ox_call(c, TP_OP_ONNX_DFT, &A, &r));
    return set_out(c, &r);
}

static tp_status map_stft(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int64_t step = 0, len = 0;
    bool has_step, has_len;
    TP_TRY(const_int1(c, 1, "frame_step", &step, &has_step));
    if (!has_step) return ox_bad(c, "missing input 'frame_step'");
    TP_TRY(const_int1(c, 3, "frame_length", &len, &has_len));
    const tp_value *win = ox_in(c, 2);
    tp_value r = tp_value_none();
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(step));
    if (win) ox_arg_ref(&A, win);
    else ox_arg(&A, tp_value_none());
    ox_arg(&A, has_len ? tp_value_int(len) : tp_value_none());
    ox_arg(&A, tp_value_bool(ox_attr_i(c, "onesided", 1) != 0));
    TP_TRY(ox_call(c, TP_OP_ONNX_STFT, &A, &r));
    return set_out(c, &r);
}

static tp_status map_mel_weight_matrix(ox_ctx *c) {
    static const char *const names[] = {"num_mel_bins", "dft_length", "sample_rate"};
    int64_t iv[3];
    double lo = 0, hi = 0;
    bool present;
    for (int i = 0; i < 3; i++) {
        TP_TRY(const_int1(c, i, names[i], &iv[i], &present));
        if (!present) return ox_bad(c, "missing input '%s'", names[i]);
    }
    TP_TRY(const_f64(c, 3, "lower_edge_hertz", &lo, &present));
    if (!present) return ox_bad(c, "missing input 'lower_edge_hertz'");
    TP_TRY(const_f64(c, 4, "upper_edge_hertz", &hi, &present));
    if (!present) return ox_bad(c, "missing input 'upper_edge_hertz'");
    tp_dtype dt;
    TP_TRY(dtype_attr(c, "output_datatype", ox_attr_i(c, "output_datatype", 1), &dt));
    tp_value r = tp_value_none();
    ox_args A;
    ox_args_init(&A);
    for (int i = 0; i < 3; i++) ox_arg(&A, tp_value_int(iv[i]));
    ox_arg(&A, tp_value_float(lo));
    ox_arg(&A, tp_value_float(hi));
    ox_kw(&A, "dtype", tp_value_dtype(dt));
    TP_TRY(ox_call(c, TP_OP_ONNX_MEL_WEIGHT_MATRIX, &A, &r));
    return set_out(c, &r);
}

/* Einsum with an ellipsis or a repeated subscript in one operand
 * (diagonals): the einsum op itself (src/cpu/einsum.c), which takes both.
 * Operands must share a dtype there, as ONNX requires. */
static tp_status einsum_op(ox_ctx *c, const char *eq) {
    tp_value list, eqv = tp_value_none(), r = tp_value_none();
    TP_TRY(tp_value_list(0, &list));
    tp_status st = TP_OK;
    for (int i = 0; i < ox_n_in(c) && st == TP_OK; i++) {
        const tp_value *xi;
        st = need(c, i, &xi);
        tp_value cp = tp_value_none();
        if (st == TP_OK) st = tp_value_copy(xi, &cp);
        if (st == TP_OK) st = tp_value_append(&list, &cp);
        if (st != TP_OK) tp_value_clear(&cp); /* not taken over when append fails */
    }
    if (st == TP_OK) st = tp_value_str(eq, &eqv);
    if (st != TP_OK) {
        tp_value_clear(&list);
        return st;
    }
    ox_args A;
    ox_args_init(&A);
    ox_arg(&A, eqv);
    ox_arg(&A, list);
    TP_TRY(ox_call(c, TP_OP_EINSUM, &A, &r));
    return set_out(c, &r);
}

/* Einsum without ellipsis or repeated subscripts in one operand: permute
 * and reshape every operand onto all subscripts (output ones first),
 * multiply with broadcasting, sum the others away. The other forms go to
 * the einsum op (einsum_op). */
static tp_status map_einsum(ox_ctx *c) {
    char eq[256];
    if (!ox_attr_s(c, "equation", NULL, eq, sizeof eq)) return ox_bad(c, "missing attribute 'equation'");
    char clean[256];
    size_t n = 0;
    for (const char *p = eq; *p && n + 1 < sizeof clean; p++)
        if (*p != ' ') clean[n++] = *p;
    clean[n] = '\0';
    if (strstr(clean, "...")) return einsum_op(c, eq);
    char *arrow = strstr(clean, "->");
    char out_sub[64] = "";
    if (arrow) {
        *arrow = '\0';
        snprintf(out_sub, sizeof out_sub, "%s", arrow + 2);
    }
    const char *subs[16];
    int n_ops = 0;
    for (char *tok = clean, *next; tok && n_ops < 16; tok = next) {
        next = strchr(tok, ',');
        if (next) *next++ = '\0';
        subs[n_ops++] = tok;
    }
    if (n_ops != ox_n_in(c)) return ox_bad(c, "equation has %d operands for %d inputs", n_ops, ox_n_in(c));
    int count[128] = {0};
    for (int i = 0; i < n_ops; i++)
        for (const char *p = subs[i]; *p; p++) {
            if ((unsigned char)*p >= 128 || !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
                return ox_bad(c, "bad subscript in '%s'", eq);
            if (strchr(p + 1, *p)) return einsum_op(c, eq);
            count[(int)*p]++;
        }
    if (!arrow) { /* implicit output: letters used once, sorted */
        int k = 0;
        for (int ch = 0; ch < 128; ch++)
            if (count[ch] == 1) out_sub[k++] = (char)ch;
        out_sub[k] = '\0';
    }
    char all[64];
    int n_all = 0;
    for (const char *p = out_sub; *p; p++) {
        if (!count[(int)*p]) return ox_bad(c, "output subscript '%c' not in any input", *p);
        all[n_all++] = *p;
    }
    int n_out = n_all;
    for (int ch = 0; ch < 128; ch++)
        if (count[ch] && !strchr(out_sub, ch)) all[n_all++] = (char)ch;
    if (n_all > TP_MAX_DIMS) return ox_unsupported(c, "%d subscripts (at most %d)", n_all, TP_MAX_DIMS);
    tp_value acc = tp_value_none();
    for (int i = 0; i < n_ops; i++) {
        const tp_value *x;
        tp_status nst = need(c, i, &x);
        if (nst != TP_OK) {
            tp_value_clear(&acc);
            return nst;
        }
        int r = (int)strlen(subs[i]);
        if (r != rank_of(x)) {
            tp_value_clear(&acc);
            return ox_bad(c, "operand %d has rank %d, equation says %d", i, rank_of(x), r);
        }
        int64_t perm[TP_MAX_DIMS], shape[TP_MAX_DIMS];
        int k = 0;
        for (int a = 0; a < n_all; a++) {
            const char *q = strchr(subs[i], all[a]);
            if (q) {
                perm[k++] = q - subs[i];
                shape[a] = sizes_of(x)[q - subs[i]];
            } else {
                shape[a] = 1;
            }
        }
        tp_value pv, rv, prod;
        tp_status st = call_ints(c, TP_OP_PERMUTE, x, perm, k, &pv);
        if (st == TP_OK) {
            st = reshape(c, &pv, shape, n_all, &rv);
            tp_value_clear(&pv);
        }
        if (st == TP_OK && acc.kind != TP_VAL_NONE) {
            st = ox_call2(c, TP_OP_MUL, &acc, &rv, &prod);
            tp_value_clear(&rv);
            if (st == TP_OK) rv = prod;
        }
        tp_value_clear(&acc);
        TP_TRY(st);
        acc = rv;
    }
    if (n_all > n_out) {
        int64_t dims[TP_MAX_DIMS];
        for (int a = n_out; a < n_all; a++) dims[a - n_out] = a;
        ox_args A;
        ox_args_init(&A);
        ox_arg(&A, acc);
        ox_arg_ints(&A, dims, n_all - n_out);
        TP_TRY(ox_call(c, TP_OP_SUM, &A, &acc));
    }
    const tp_value *x0 = ox_in(c, 0);
    return set_out_cast(c, &acc, dtype_of(x0));
}

/* (float64(x) - zero_point), the zero point broadcast along `axis` when it
 * is a vector (per-channel / per-row). */
static tp_status centered(ox_ctx *c, const tp_value *x, const tp_value *zp, int axis, tp_value *out) {
    tp_value xf;
    TP_TRY(ox_cast(c, x, TP_FLOAT64, &xf));
    if (!zp) {
        *out = xf;
        return TP_OK;
    }
    tp_value zf, zb, r;
    tp_status st = ox_cast(c, zp, TP_FLOAT64, &zf);
    if (st == TP_OK && rank_of(&zf) == 1 && sizes_of(&zf)[0] > 1) {
        int nd = rank_of(x);
        int64_t shp[TP_MAX_DIMS];
        for (int i = 0; i < nd - axis; i++) shp[i] = i == 0 ? sizes_of(&zf)[0] : 1;
        st = reshape(c, &zf, shp, nd - axis, &zb);
        tp_value_clear(&zf);
    } else {
        zb = zf;
    }
    if (st == TP_OK) {
        st = ox_call2(c, TP_OP_SUB, &xf, &zb, &r);
        tp_value_clear(&zb);
    }
    tp_value_clear(&xf);
    TP_TRY(st);
    *out = r;
    return TP_OK;
}

/* round half to even, + zero point, saturate to the zero point's type */
static tp_status requantize(ox_ctx *c, tp_value *acc, const tp_value *scale, const tp_value *zp, tp_value *out) {
    tp_dtype qt = zp ? dtype_of(zp) : TP_UINT8;
    if (qt != TP_UINT8 && qt != TP_INT8) return ox_unsupported(c, "quantized type %s", tp_dtype_name(qt));
    tp_value sf = tp_value_none(), t = tp_value_none(), zf = tp_value_none(), tmp = tp_value_none();
    tp_status st = ox_cast(c, scale, dtype_of(acc), &sf); /* computed in acc's precision */
    if (st == TP_OK) st = ox_call2(c, TP_OP_DIV, acc, &sf, &t);
    if (st == TP_OK) st = take(ox_call1(c, TP_OP_ROUND, &t, &tmp), &t, &tmp);
    if (st == TP_OK && zp) {
        st = ox_cast(c, zp, dtype_of(&t), &zf);
        if (st == TP_OK) st = take(ox_call2(c, TP_OP_ADD, &t, &zf, &tmp), &t, &tmp);
    }
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, &t);
        ox_arg(&A, tp_value_float(qt == TP_UINT8 ? 0.0 : -128.0));
        ox_arg(&A, tp_value_float(qt == TP_UINT8 ? 255.0 : 127.0));
        st = take(ox_call(c, TP_OP_CLAMP, &A, &tmp), &t, &tmp);
    }
    if (st == TP_OK) st = ox_cast(c, &t, qt, out);
    tp_value_clear(&sf);
    tp_value_clear(&t);
    tp_value_clear(&zf);
    return st;
}

static tp_status map_matmul_integer(ox_ctx *c) {
    const tp_value *a, *b;
    TP_TRY(need(c, 0, &a));
    TP_TRY(need(c, 1, &b));
    tp_value ac = tp_value_none(), bc = tp_value_none(), m = tp_value_none();
    tp_status st = centered(c, a, ox_in(c, 2), rank_of(a) - 2, &ac);
    if (st == TP_OK) st = centered(c, b, ox_in(c, 3), rank_of(b) - 1, &bc);
    if (st == TP_OK) st = ox_call2(c, TP_OP_MATMUL, &ac, &bc, &m);
    tp_value_clear(&ac);
    tp_value_clear(&bc);
    TP_TRY(st);
    return set_out_cast(c, &m, TP_INT32);
}

static tp_status map_conv_integer(ox_ctx *c) {
    const tp_value *x, *w;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &w));
    tp_value xc = tp_value_none(), wc = tp_value_none(), r = tp_value_none();
    tp_status st = centered(c, x, ox_in(c, 2), 1, &xc);
    if (st == TP_OK) st = centered(c, w, ox_in(c, 3), 0, &wc);
    if (st == TP_OK) st = conv_apply(c, &xc, &wc, NULL, &r);
    tp_value_clear(&xc);
    tp_value_clear(&wc);
    TP_TRY(st);
    return set_out_cast(c, &r, TP_INT32);
}

/* QLinearMatMul / QLinearConv: dequantize (int math is exact in float64),
 * compute, requantize. */
static tp_status map_qlinear(ox_ctx *c, bool conv) {
    const tp_value *a, *as, *b, *bs, *ys;
    TP_TRY(need(c, 0, &a));
    TP_TRY(need(c, 1, &as));
    TP_TRY(need(c, 3, &b));
    TP_TRY(need(c, 4, &bs));
    TP_TRY(need(c, 6, &ys));
    tp_value ac = tp_value_none(), bc = tp_value_none(), acc = tp_value_none(), asf = tp_value_none();
    tp_value bsf = tp_value_none(), bias = tp_value_none(), tmp = tp_value_none(), r = tp_value_none();
    const tp_value *bias_in = conv ? ox_in(c, 8) : NULL;
    tp_status st = centered(c, a, ox_in(c, 2), conv ? 1 : rank_of(a) - 2, &ac);
    if (st == TP_OK) st = centered(c, b, ox_in(c, 5), conv ? 0 : rank_of(b) - 1, &bc);
    if (st == TP_OK && bias_in) st = ox_cast(c, bias_in, TP_FLOAT64, &bias);
    if (st == TP_OK)
        st = conv ? conv_apply(c, &ac, &bc, bias_in ? &bias : NULL, &acc) : ox_call2(c, TP_OP_MATMUL, &ac, &bc, &acc);
    /* acc * a_scale * b_scale (b's scale per output channel for conv) */
    if (st == TP_OK) st = ox_cast(c, as, TP_FLOAT64, &asf);
    if (st == TP_OK) st = ox_cast(c, bs, TP_FLOAT64, &bsf);
    if (st == TP_OK && conv && rank_of(&bsf) == 1 && sizes_of(&bsf)[0] > 1) {
        int nd = rank_of(&acc);
        int64_t shp[TP_MAX_DIMS];
        for (int i = 0; i < nd - 1; i++) shp[i] = i == 0 ? sizes_of(&bsf)[0] : 1;
        st = take(reshape(c, &bsf, shp, nd - 1, &tmp), &bsf, &tmp);
    }
    if (st == TP_OK) st = take(ox_call2(c, TP_OP_MUL, &asf, &bsf, &tmp), &asf, &tmp);
    if (st == TP_OK) st = take(ox_call2(c, TP_OP_MUL, &acc, &asf, &tmp), &acc, &tmp);
    if (st == TP_OK) st = requantize(c, &acc, ys, ox_in(c, 7), &r);
    tp_value vs[] = {ac, bc, acc, asf, bsf, bias};
    for (size_t i = 0; i < TP_ARRAY_LEN(vs); i++) tp_value_clear(&vs[i]);
    TP_TRY(st);
    return set_out(c, &r);
}

static tp_status map_dynamic_quantize(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    tp_value mn = tp_value_none(), mx = tp_value_none(), z = tp_value_none(), scale = tp_value_none();
    tp_value zq = tp_value_none(), zp_u8 = tp_value_none(), xd = tp_value_none(), y = tp_value_none();
    tp_value tmp = tp_value_none();
    tp_status st = ox_call1(c, TP_OP_AMIN, x, &mn);
    if (st == TP_OK) st = ox_call1(c, TP_OP_AMAX, x, &mx);
    if (st == TP_OK) st = scalar_like(x, 0.0, &z);
    if (st == TP_OK) st = take(ox_call2(c, TP_OP_MINIMUM, &mn, &z, &tmp), &mn, &tmp);
    if (st == TP_OK) st = take(ox_call2(c, TP_OP_MAXIMUM, &mx, &z, &tmp), &mx, &tmp);
    if (st == TP_OK) st = ox_call2(c, TP_OP_SUB, &mx, &mn, &scale);
    if (st == TP_OK) st = take(binop_scalar(c, TP_OP_DIV, &scale, 255.0, &tmp), &scale, &tmp);
    /* zero point = saturate(round(-min / scale)) */
    if (st == TP_OK) st = ox_call1(c, TP_OP_NEG, &mn, &zq);
    if (st == TP_OK) st = take(ox_call2(c, TP_OP_DIV, &zq, &scale, &tmp), &zq, &tmp);
    if (st == TP_OK) st = take(ox_call1(c, TP_OP_ROUND, &zq, &tmp), &zq, &tmp);
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, &zq);
        ox_arg(&A, tp_value_float(0.0));
        ox_arg(&A, tp_value_float(255.0));
        st = take(ox_call(c, TP_OP_CLAMP, &A, &tmp), &zq, &tmp);
    }
    if (st == TP_OK) st = ox_cast(c, &zq, TP_UINT8, &zp_u8);
    if (st == TP_OK) st = tp_value_copy(x, &xd); /* float32 arithmetic, as the ONNX reference */
    if (st == TP_OK) st = requantize(c, &xd, &scale, &zp_u8, &y);
    if (st == TP_OK) st = set_out(c, &y);
    if (st == TP_OK) st = ox_set_out(c, 1, &scale);
    if (st == TP_OK) st = ox_set_out(c, 2, &zp_u8);
    tp_value vs[] = {mn, mx, z, scale, zq, zp_u8, xd, y};
    for (size_t i = 0; i < TP_ARRAY_LEN(vs); i++) tp_value_clear(&vs[i]);
    return st;
}

static tp_status map_bitshift(ox_ctx *c) {
    const tp_value *x, *y;
    TP_TRY(need(c, 0, &x));
    TP_TRY(need(c, 1, &y));
    if (dtype_of(x) != TP_UINT8) return ox_unsupported(c, "BitShift on %s", tp_dtype_name(dtype_of(x)));
    char buf[16];
    bool left = !strcmp(ox_attr_s(c, "direction", "", buf, sizeof buf), "LEFT");
    tp_value x64 = tp_value_none(), y64 = tp_value_none(), two = tp_value_none(), p2 = tp_value_none();
    tp_value r = tp_value_none();
    tp_status st = ox_cast(c, x, TP_INT64, &x64);
    if (st == TP_OK) st = ox_cast(c, y, TP_INT64, &y64);
    if (st == TP_OK) st = ox_scalar_tensor(TP_INT64, 2, &two);
    if (st == TP_OK) st = ox_call2(c, TP_OP_POW, &two, &y64, &p2);
    if (st == TP_OK) {
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, &x64);
        ox_arg_ref(&A, &p2);
        if (!left) {
            tp_value m;
            if (tp_value_str("floor", &m) == TP_OK) ox_kw(&A, "rounding_mode", m);
            else A.nomem = true;
        }
        st = ox_call(c, left ? TP_OP_MUL : TP_OP_DIV, &A, &r);
    }
    tp_value vs[] = {x64, y64, two, p2};
    for (size_t i = 0; i < TP_ARRAY_LEN(vs); i++) tp_value_clear(&vs[i]);
    TP_TRY(st);
    return set_out_cast(c, &r, TP_UINT8);
}

static tp_status map_size(ox_ctx *c) { return map_shape(c, true); }

/* ---- RNN, GRU, LSTM ---------------------------------------------------------------------
 * Unrolled over the sequence at import: one matrix product for the input
 * projection of every step (X W^T + Wb), then per step the recurrent
 * product, the gates and the state update, in our ops; so the program is
 * made of ordinary ops the engine plans (and tensorplay can read). The
 * sequence length must be static; sequence_lens (a constant or a run-time
 * tensor) masks each step's state update and output per batch entry. */

/* The operands an unrolled recurrence makes, kept for clearing at the end,
 * in blocks so that pointers to them stay valid as the pool grows. */
typedef struct rnn_block {
    struct rnn_block *next;
    int n;
    tp_value v[1024];
} rnn_block;

typedef struct rnn_pool {
    rnn_block *head;
    bool full; /* an allocation failed */
} rnn_pool;

/* Keep a value (taken over); returns a pointer to it, NULL when out of memory. */
static const tp_value *rnn_keep(rnn_pool *P, tp_value *v) {
    if (!P->head || P->head->n == (int)TP_ARRAY_LEN(P->head->v)) {
        rnn_block *b = tp_calloc(1, sizeof *b);
        if (!b) {
            P->full = true;
            tp_value_clear(v);
            return NULL;
        }
        b->next = P->head;
        P->head = b;
    }
    rnn_block *b = P->head;
    b->v[b->n] = *v;
    *v = tp_value_none();
    return &b->v[b->n++];
}

static void rnn_pool_clear(rnn_pool *P) {
    while (P->head) {
        rnn_block *b = P->head;
        P->head = b->next;
        for (int i = 0; i < b->n; i++) tp_value_clear(&b->v[i]);
        tp_free(b);
    }
}

#define RNN_KEEP(P, v, out)                                                  \
    do {                                                                      \
        (out) = rnn_keep((P), &(v));                                          \
        if (!(out)) return tp_error(TP_ERR_NOMEM, "out of memory unrolling"); \
    } while (0)

static tp_status rnn_op1(ox_ctx *c, rnn_pool *P, tp_op op, const tp_value *x, const tp_value **out) {
    tp_value r;
    TP_TRY(ox_call1(c, op, x, &r));
    RNN_KEEP(P, r, *out);
    return TP_OK;
}

static tp_status rnn_op2(ox_ctx *c, rnn_pool *P, tp_op op, const tp_value *x, const tp_value *y, const tp_value **out) {
    tp_value r;
    TP_TRY(ox_call2(c, op, x, y, &r));
    RNN_KEEP(P, r, *out);
    return TP_OK;
}

static tp_status rnn_scalar(ox_ctx *c, rnn_pool *P, tp_op op, const tp_value *x, double v, const tp_value **out) {
    tp_value r;
    TP_TRY(binop_scalar(c, op, x, v, &r));
    RNN_KEEP(P, r, *out);
    return TP_OK;
}

/* op(x, ints...) for select / slice / transpose / unsqueeze. */
static tp_status rnn_opi(ox_ctx *c, rnn_pool *P, tp_op op, const tp_value *x, const int64_t *ints, int n,
                         const tp_value **out) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    for (int i = 0; i < n; i++) ox_arg(&A, tp_value_int(ints[i]));
    tp_value r;
    TP_TRY(ox_call(c, op, &A, &r));
    RNN_KEEP(P, r, *out);
    return TP_OK;
}

static tp_status rnn_where(ox_ctx *c, rnn_pool *P, const tp_value *cond, const tp_value *a, const tp_value *b,
                           const tp_value **out) {
    tp_value r;
    TP_TRY(ox_call3(c, TP_OP_WHERE, cond, a, b, &r));
    RNN_KEEP(P, r, *out);
    return TP_OK;
}

static tp_status rnn_slice(ox_ctx *c, rnn_pool *P, const tp_value *x, int dim, int64_t start, int64_t end,
                           const tp_value **out) {
    return rnn_opi(c, P, TP_OP_SLICE, x, (int64_t[]){dim, start, end, 1}, 4, out);
}

static tp_status rnn_stack(ox_ctx *c, rnn_pool *P, const tp_value *const *items, int n, int dim, const tp_value **out) {
    tp_value list;
    TP_TRY(tp_value_list(n, &list));
    tp_status st = TP_OK;
    for (int i = 0; i < n && st == TP_OK; i++) {
        tp_value item;
        st = tp_value_copy(items[i], &item);
        if (st == TP_OK) st = tp_value_seq_set(&list, i, &item);
    }
    if (st != TP_OK) {
        tp_value_clear(&list);
        return st;
    }
    ox_args A;
    ox_args_init(&A);
    ox_arg(&A, list);
    ox_arg(&A, tp_value_int(dim));
    tp_value r;
    TP_TRY(ox_call(c, TP_OP_STACK, &A, &r));
    RNN_KEEP(P, r, *out);
    return TP_OK;
}

static tp_status rnn_call_permute(ox_ctx *c, rnn_pool *P, const tp_value *x, const int64_t *dims, const tp_value **out) {
    tp_value r;
    TP_TRY(call_ints(c, TP_OP_PERMUTE, x, dims, rank_of(x), &r));
    RNN_KEEP(P, r, *out);
    return TP_OK;
}

/* op(x, floats...) for clamp / leaky_relu / elu. */
static tp_status rnn_opf(ox_ctx *c, rnn_pool *P, tp_op op, const tp_value *x, const double *f, int n,
                         const tp_value **out) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    for (int i = 0; i < n; i++) ox_arg(&A, tp_value_float(f[i]));
    tp_value r;
    TP_TRY(ox_call(c, op, &A, &r));
    RNN_KEEP(P, r, *out);
    return TP_OK;
}

typedef struct rnn_act {
    char name[24];
    double alpha, beta;
} rnn_act;

static tp_status rnn_apply(ox_ctx *c, rnn_pool *P, const rnn_act *a, double clip, const tp_value *x, const tp_value **out) {
    if (clip > 0) TP_TRY(rnn_opf(c, P, TP_OP_CLAMP, x, (double[]){-clip, clip}, 2, &x));
    const char *n = a->name;
    const tp_value *t;
    if (!strcmp(n, "Sigmoid")) return rnn_op1(c, P, TP_OP_SIGMOID, x, out);
    if (!strcmp(n, "Tanh")) return rnn_op1(c, P, TP_OP_TANH, x, out);
    if (!strcmp(n, "Relu")) return rnn_op1(c, P, TP_OP_RELU, x, out);
    if (!strcmp(n, "Affine")) {
        TP_TRY(rnn_scalar(c, P, TP_OP_MUL, x, a->alpha, &t));
        return rnn_scalar(c, P, TP_OP_ADD, t, a->beta, out);
    }
    if (!strcmp(n, "ScaledTanh")) {
        TP_TRY(rnn_scalar(c, P, TP_OP_MUL, x, a->beta, &t));
        TP_TRY(rnn_op1(c, P, TP_OP_TANH, t, &t));
        return rnn_scalar(c, P, TP_OP_MUL, t, a->alpha, out);
    }
    if (!strcmp(n, "HardSigmoid")) {
        TP_TRY(rnn_scalar(c, P, TP_OP_MUL, x, a->alpha, &t));
        TP_TRY(rnn_scalar(c, P, TP_OP_ADD, t, a->beta, &t));
        return rnn_opf(c, P, TP_OP_CLAMP, t, (double[]){0.0, 1.0}, 2, out);
    }
    if (!strcmp(n, "LeakyRelu")) return rnn_opf(c, P, TP_OP_LEAKY_RELU, x, &a->alpha, 1, out);
    if (!strcmp(n, "Elu")) return rnn_opf(c, P, TP_OP_ELU, x, &a->alpha, 1, out);
    if (!strcmp(n, "Softsign")) { /* x / (1 + |x|) */
        const tp_value *ab;
        TP_TRY(rnn_op1(c, P, TP_OP_ABS, x, &ab));
        TP_TRY(rnn_scalar(c, P, TP_OP_ADD, ab, 1.0, &t));
        return rnn_op2(c, P, TP_OP_DIV, x, t, out);
    }
    if (!strcmp(n, "Softplus")) return rnn_op1(c, P, TP_OP_SOFTPLUS, x, out);
    return ox_unsupported(c, "activation '%s' is not supported", n);
}

typedef enum { RNN_PLAIN, RNN_GRU, RNN_LSTM } rnn_kind;

static tp_status map_rnn_impl(ox_ctx *c, rnn_kind kind, rnn_pool *P) {
    const tp_value *X, *W, *R;
    TP_TRY(need(c, 0, &X));
    TP_TRY(need(c, 1, &W));
    TP_TRY(need(c, 2, &R));
    const int gates = kind == RNN_LSTM ? 4 : kind == RNN_GRU ? 3 : 1;
    const int n_acts = kind == RNN_LSTM ? 3 : kind == RNN_GRU ? 2 : 1;
    if (rank_of(X) != 3 || rank_of(W) != 3 || rank_of(R) != 3) return ox_bad(c, "X, W and R must have rank 3");
    char dirbuf[32];
    const char *dir = ox_attr_s(c, "direction", "forward", dirbuf, sizeof dirbuf);
    int n_dir = !strcmp(dir, "bidirectional") ? 2 : 1;
    bool reverse_only = !strcmp(dir, "reverse");
    if (n_dir == 1 && !reverse_only && strcmp(dir, "forward") != 0) return ox_bad(c, "direction '%s'", dir);
    int64_t layout = ox_opset(c) >= 14 ? ox_attr_i(c, "layout", 0) : 0;
    if (layout != 0 && layout != 1) return ox_bad(c, "layout %" PRId64, layout);
    if (ox_node_dyn(c))
        return ox_unsupported(c, "an unrolled recurrence needs static shapes (this one depends on a dynamic dim)");
    /* X as [seq, batch, input] */
    if (layout == 1) TP_TRY(rnn_opi(c, P, TP_OP_TRANSPOSE, X, (int64_t[]){0, 1}, 2, &X));
    int64_t S = sizes_of(X)[0], Bt = sizes_of(X)[1];
    int64_t H = ox_attr_i(c, "hidden_size", sizes_of(R)[2]);
    if (H <= 0 || sizes_of(W)[0] != n_dir || sizes_of(W)[1] != gates * H || sizes_of(R)[1] != gates * H ||
        sizes_of(R)[2] != H || sizes_of(W)[2] != sizes_of(X)[2])
        return ox_bad(c, "W / R shapes do not fit hidden_size %" PRId64 ", %d direction(s) and %d gates", H, n_dir, gates);
    if (S < 1 || S > 512) return ox_unsupported(c, "a sequence of %" PRId64 " steps is not unrolled (1 to 512)", S);
    double clip = ox_attr_f(c, "clip", 0.0);
    bool input_forget = kind == RNN_LSTM && ox_attr_i(c, "input_forget", 0) != 0;
    bool lbr = kind == RNN_GRU && ox_attr_i(c, "linear_before_reset", 0) != 0;
    /* sequence_lens [batch] (a constant or a run-time tensor): step t updates
     * the states of the batch entries with t < length and leaves the others,
     * whose output at t is 0 (the reverse direction thus starts at each
     * entry's own last step). Constants holding the full length need none of it. */
    const tp_value *seq_lens = ox_n_in(c) > 4 ? ox_in(c, 4) : NULL;
    if (seq_lens) {
        const tp_tensor *lm = ox_meta(seq_lens);
        if (!lm || rank_of(seq_lens) != 1 || sizes_of(seq_lens)[0] != Bt || tp_dtype_is_float(tp_tensor_dtype(lm)))
            return ox_bad(c, "sequence_lens must be an integer tensor of shape [%" PRId64 "]", Bt);
        tp_tensor *t = ox_const(seq_lens);
        if (t) {
            int64_t lens[MAXV];
            int n;
            TP_TRY(tensor_ints(c, t, "sequence_lens", lens, MAXV, &n));
            bool full = true;
            for (int i = 0; i < n; i++) {
                if (lens[i] < 0 || lens[i] > S)
                    return ox_bad(c, "sequence_lens[%d] = %" PRId64 " is outside [0, %" PRId64 "]", i, lens[i], S);
                full = full && lens[i] == S;
            }
            if (full) seq_lens = NULL;
        }
    }
    /* activations */
    rnn_act acts[6];
    const Onnx__AttributeProto *aa = ox_attr(c, "activations");
    const Onnx__AttributeProto *al = ox_attr(c, "activation_alpha"), *ab = ox_attr(c, "activation_beta");
    size_t ia = 0, ib = 0;
    for (int d = 0; d < n_dir; d++)
        for (int k = 0; k < n_acts; k++) {
            rnn_act *a = &acts[d * n_acts + k];
            const char *dflt = kind == RNN_PLAIN ? "Tanh" : k == 0 ? "Sigmoid" : "Tanh";
            size_t idx = (size_t)(d * n_acts + k);
            if (aa && aa->n_strings > idx) {
                size_t len = aa->strings[idx].len < sizeof a->name - 1 ? aa->strings[idx].len : sizeof a->name - 1;
                memcpy(a->name, aa->strings[idx].data, len);
                a->name[len] = '\0';
            } else if (aa && aa->n_strings) {
                return ox_bad(c, "activations lists %zu functions, %d needed", aa->n_strings, n_dir * n_acts);
            } else {
                snprintf(a->name, sizeof a->name, "%s", dflt);
            }
            bool uses_alpha = !strcmp(a->name, "Affine") || !strcmp(a->name, "ScaledTanh") ||
                              !strcmp(a->name, "HardSigmoid") || !strcmp(a->name, "LeakyRelu") || !strcmp(a->name, "Elu");
            bool uses_beta = !strcmp(a->name, "Affine") || !strcmp(a->name, "ScaledTanh") || !strcmp(a->name, "HardSigmoid");
            a->alpha = !strcmp(a->name, "HardSigmoid") ? 0.2 : !strcmp(a->name, "LeakyRelu") ? 0.01 : 1.0;
            a->beta = !strcmp(a->name, "HardSigmoid") ? 0.5 : 0.0;
            if (uses_alpha && al && ia < al->n_floats) a->alpha = al->floats[ia++];
            if (uses_beta && ab && ib < ab->n_floats) a->beta = ab->floats[ib++];
        }
    const tp_value *Bv = ox_n_in(c) > 3 ? ox_in(c, 3) : NULL;
    const tp_value *h0v = ox_n_in(c) > 5 ? ox_in(c, 5) : NULL;
    const tp_value *c0v = kind == RNN_LSTM && ox_n_in(c) > 6 ? ox_in(c, 6) : NULL;
    const tp_value *Pv = kind == RNN_LSTM && ox_n_in(c) > 7 ? ox_in(c, 7) : NULL;
    if (h0v && layout == 1) TP_TRY(rnn_opi(c, P, TP_OP_TRANSPOSE, h0v, (int64_t[]){0, 1}, 2, &h0v));
    if (c0v && layout == 1) TP_TRY(rnn_opi(c, P, TP_OP_TRANSPOSE, c0v, (int64_t[]){0, 1}, 2, &c0v));
    const tp_value *Ys[2] = {NULL, NULL}, *Hs[2] = {NULL, NULL}, *Cs[2] = {NULL, NULL};
    int64_t GH = gates * H;
    for (int d = 0; d < n_dir; d++) {
        bool rev = reverse_only || d == 1;
        const rnn_act *act = &acts[d * n_acts];
        const tp_value *Wd, *Rd, *WdT, *RdT, *XW, *Rb = NULL, *Pd = NULL;
        TP_TRY(rnn_opi(c, P, TP_OP_SELECT, W, (int64_t[]){0, d}, 2, &Wd));
        TP_TRY(rnn_opi(c, P, TP_OP_SELECT, R, (int64_t[]){0, d}, 2, &Rd));
        TP_TRY(rnn_opi(c, P, TP_OP_TRANSPOSE, Wd, (int64_t[]){0, 1}, 2, &WdT));
        TP_TRY(rnn_opi(c, P, TP_OP_TRANSPOSE, Rd, (int64_t[]){0, 1}, 2, &RdT));
        TP_TRY(rnn_op2(c, P, TP_OP_MATMUL, X, WdT, &XW)); /* [S, B, GH] */
        if (Bv) {
            const tp_value *Bd, *Wb;
            TP_TRY(rnn_opi(c, P, TP_OP_SELECT, Bv, (int64_t[]){0, d}, 2, &Bd));
            TP_TRY(rnn_slice(c, P, Bd, 0, 0, GH, &Wb));
            TP_TRY(rnn_slice(c, P, Bd, 0, GH, 2 * GH, &Rb));
            TP_TRY(rnn_op2(c, P, TP_OP_ADD, XW, Wb, &XW));
        }
        if (Pv) TP_TRY(rnn_opi(c, P, TP_OP_SELECT, Pv, (int64_t[]){0, d}, 2, &Pd));
        const tp_value *h, *cst = NULL, *first_step;
        TP_TRY(rnn_opi(c, P, TP_OP_SELECT, XW, (int64_t[]){0, 0}, 2, &first_step));
        const tp_value *zero_like;
        TP_TRY(rnn_slice(c, P, first_step, 1, 0, H, &zero_like));
        if (h0v) TP_TRY(rnn_opi(c, P, TP_OP_SELECT, h0v, (int64_t[]){0, d}, 2, &h));
        else TP_TRY(rnn_op1(c, P, TP_OP_ZEROS_LIKE, zero_like, &h));
        if (kind == RNN_LSTM) {
            if (c0v) TP_TRY(rnn_opi(c, P, TP_OP_SELECT, c0v, (int64_t[]){0, d}, 2, &cst));
            else TP_TRY(rnn_op1(c, P, TP_OP_ZEROS_LIKE, zero_like, &cst));
        }
        /* GRU: the recurrent weights of z and r, and of h, apart */
        const tp_value *RzrT = NULL, *RhT = NULL, *Rb_zr = NULL, *Rb_h = NULL;
        if (kind == RNN_GRU) {
            TP_TRY(rnn_slice(c, P, RdT, 1, 0, 2 * H, &RzrT));
            TP_TRY(rnn_slice(c, P, RdT, 1, 2 * H, 3 * H, &RhT));
            if (Rb) {
                TP_TRY(rnn_slice(c, P, Rb, 0, 0, 2 * H, &Rb_zr));
                TP_TRY(rnn_slice(c, P, Rb, 0, 2 * H, 3 * H, &Rb_h));
            }
        }
        const tp_value *steps[512], *zeros_h = NULL;
        if (seq_lens) TP_TRY(rnn_op1(c, P, TP_OP_ZEROS_LIKE, zero_like, &zeros_h));
        for (int64_t k = 0; k < S; k++) {
            int64_t t = rev ? S - 1 - k : k;
            const tp_value *xt, *h_prev = h, *c_prev = cst;
            TP_TRY(rnn_opi(c, P, TP_OP_SELECT, XW, (int64_t[]){0, t}, 2, &xt));
            if (kind == RNN_PLAIN) {
                const tp_value *hr, *pre;
                TP_TRY(rnn_op2(c, P, TP_OP_MATMUL, h, RdT, &hr));
                TP_TRY(rnn_op2(c, P, TP_OP_ADD, xt, hr, &pre));
                if (Rb) TP_TRY(rnn_op2(c, P, TP_OP_ADD, pre, Rb, &pre));
                TP_TRY(rnn_apply(c, P, &act[0], clip, pre, &h));
            } else if (kind == RNN_GRU) {
                const tp_value *xz, *xr, *xh, *hzr, *hz, *hr, *z, *r, *hh, *cand, *one_minus, *a1, *a2;
                TP_TRY(rnn_slice(c, P, xt, 1, 0, H, &xz));
                TP_TRY(rnn_slice(c, P, xt, 1, H, 2 * H, &xr));
                TP_TRY(rnn_slice(c, P, xt, 1, 2 * H, 3 * H, &xh));
                TP_TRY(rnn_op2(c, P, TP_OP_MATMUL, h, RzrT, &hzr));
                if (Rb_zr) TP_TRY(rnn_op2(c, P, TP_OP_ADD, hzr, Rb_zr, &hzr));
                TP_TRY(rnn_slice(c, P, hzr, 1, 0, H, &hz));
                TP_TRY(rnn_slice(c, P, hzr, 1, H, 2 * H, &hr));
                TP_TRY(rnn_op2(c, P, TP_OP_ADD, xz, hz, &z));
                TP_TRY(rnn_apply(c, P, &act[0], clip, z, &z));
                TP_TRY(rnn_op2(c, P, TP_OP_ADD, xr, hr, &r));
                TP_TRY(rnn_apply(c, P, &act[0], clip, r, &r));
                if (lbr) { /* r * (h Rh^T + Rbh) */
                    TP_TRY(rnn_op2(c, P, TP_OP_MATMUL, h, RhT, &hh));
                    if (Rb_h) TP_TRY(rnn_op2(c, P, TP_OP_ADD, hh, Rb_h, &hh));
                    TP_TRY(rnn_op2(c, P, TP_OP_MUL, r, hh, &hh));
                } else { /* (r * h) Rh^T + Rbh */
                    const tp_value *rh;
                    TP_TRY(rnn_op2(c, P, TP_OP_MUL, r, h, &rh));
                    TP_TRY(rnn_op2(c, P, TP_OP_MATMUL, rh, RhT, &hh));
                    if (Rb_h) TP_TRY(rnn_op2(c, P, TP_OP_ADD, hh, Rb_h, &hh));
                }
                TP_TRY(rnn_op2(c, P, TP_OP_ADD, xh, hh, &cand));
                TP_TRY(rnn_apply(c, P, &act[1], clip, cand, &cand));
                /* h = (1 - z) * cand + z * h */
                TP_TRY(rnn_scalar(c, P, TP_OP_MUL, z, -1.0, &one_minus));
                TP_TRY(rnn_scalar(c, P, TP_OP_ADD, one_minus, 1.0, &one_minus));
                TP_TRY(rnn_op2(c, P, TP_OP_MUL, one_minus, cand, &a1));
                TP_TRY(rnn_op2(c, P, TP_OP_MUL, z, h, &a2));
                TP_TRY(rnn_op2(c, P, TP_OP_ADD, a1, a2, &h));
            } else {
                const tp_value *hr, *g, *gi, *go, *gf, *gc, *it, *ft, *ct, *ot, *a1, *a2, *hc;
                TP_TRY(rnn_op2(c, P, TP_OP_MATMUL, h, RdT, &hr));
                TP_TRY(rnn_op2(c, P, TP_OP_ADD, xt, hr, &g));
                if (Rb) TP_TRY(rnn_op2(c, P, TP_OP_ADD, g, Rb, &g));
                TP_TRY(rnn_slice(c, P, g, 1, 0, H, &gi)); /* ONNX order: i, o, f, c */
                TP_TRY(rnn_slice(c, P, g, 1, H, 2 * H, &go));
                TP_TRY(rnn_slice(c, P, g, 1, 2 * H, 3 * H, &gf));
                TP_TRY(rnn_slice(c, P, g, 1, 3 * H, 4 * H, &gc));
                if (Pd) {
                    const tp_value *pi, *pf, *t1;
                    TP_TRY(rnn_slice(c, P, Pd, 0, 0, H, &pi));
                    TP_TRY(rnn_slice(c, P, Pd, 0, 2 * H, 3 * H, &pf));
                    TP_TRY(rnn_op2(c, P, TP_OP_MUL, pi, cst, &t1));
                    TP_TRY(rnn_op2(c, P, TP_OP_ADD, gi, t1, &gi));
                    TP_TRY(rnn_op2(c, P, TP_OP_MUL, pf, cst, &t1));
                    TP_TRY(rnn_op2(c, P, TP_OP_ADD, gf, t1, &gf));
                }
                TP_TRY(rnn_apply(c, P, &act[0], clip, gi, &it));
                if (input_forget) {
                    TP_TRY(rnn_scalar(c, P, TP_OP_MUL, it, -1.0, &ft));
                    TP_TRY(rnn_scalar(c, P, TP_OP_ADD, ft, 1.0, &ft));
                } else {
                    TP_TRY(rnn_apply(c, P, &act[0], clip, gf, &ft));
                }
                TP_TRY(rnn_apply(c, P, &act[1], clip, gc, &ct));
                TP_TRY(rnn_op2(c, P, TP_OP_MUL, ft, cst, &a1));
                TP_TRY(rnn_op2(c, P, TP_OP_MUL, it, ct, &a2));
                TP_TRY(rnn_op2(c, P, TP_OP_ADD, a1, a2, &cst));
                if (Pd) {
                    const tp_value *po, *t1;
                    TP_TRY(rnn_slice(c, P, Pd, 0, H, 2 * H, &po));
                    TP_TRY(rnn_op2(c, P, TP_OP_MUL, po, cst, &t1));
                    TP_TRY(rnn_op2(c, P, TP_OP_ADD, go, t1, &go));
                }
                TP_TRY(rnn_apply(c, P, &act[0], clip, go, &ot));
                TP_TRY(rnn_apply(c, P, &act[2], clip, cst, &hc));
                TP_TRY(rnn_op2(c, P, TP_OP_MUL, ot, hc, &h));
            }
            steps[t] = h;
            if (seq_lens) { /* entries whose sequence has ended keep their states and output 0 */
                const tp_value *m;
                TP_TRY(rnn_scalar(c, P, TP_OP_GT, seq_lens, (double)t, &m));
                TP_TRY(rnn_opi(c, P, TP_OP_UNSQUEEZE, m, (int64_t[]){1}, 1, &m));
                TP_TRY(rnn_where(c, P, m, h, zeros_h, &steps[t]));
                TP_TRY(rnn_where(c, P, m, h, h_prev, &h));
                if (kind == RNN_LSTM) TP_TRY(rnn_where(c, P, m, cst, c_prev, &cst));
            }
        }
        if (seq_lens) { /* an empty sequence's final states are 0 (as onnxruntime gives them) */
            const tp_value *m;
            TP_TRY(rnn_scalar(c, P, TP_OP_GT, seq_lens, 0.0, &m));
            TP_TRY(rnn_opi(c, P, TP_OP_UNSQUEEZE, m, (int64_t[]){1}, 1, &m));
            TP_TRY(rnn_where(c, P, m, h, zeros_h, &h));
            if (kind == RNN_LSTM) TP_TRY(rnn_where(c, P, m, cst, zeros_h, &cst));
        }
        Hs[d] = h;
        Cs[d] = cst;
        if (ox_out_used(c, 0)) TP_TRY(rnn_stack(c, P, steps, (int)S, 0, &Ys[d])); /* [S, B, H] */
    }
    (void)Bt;
    /* Y: [S, D, B, H] (layout 1: [B, S, D, H]); Y_h, Y_c: [D, B, H] (layout 1: [B, D, H]) */
    const tp_value *out;
    if (ox_out_used(c, 0)) {
        TP_TRY(rnn_stack(c, P, Ys, n_dir, 1, &out));
        if (layout == 1) TP_TRY(rnn_call_permute(c, P, out, (int64_t[]){2, 0, 1, 3}, &out));
        tp_value v;
        TP_TRY(tp_value_copy(out, &v));
        TP_TRY(ox_set_out(c, 0, &v));
    }
    for (int o = 1; o <= (kind == RNN_LSTM ? 2 : 1); o++) {
        if (!ox_out_used(c, o)) continue;
        TP_TRY(rnn_stack(c, P, o == 1 ? Hs : Cs, n_dir, 0, &out));
        if (layout == 1) TP_TRY(rnn_opi(c, P, TP_OP_TRANSPOSE, out, (int64_t[]){0, 1}, 2, &out));
        tp_value v;
        TP_TRY(tp_value_copy(out, &v));
        TP_TRY(ox_set_out(c, o, &v));
    }
    return P->full ? tp_error(TP_ERR_NOMEM, "out of memory unrolling") : TP_OK;
}

static tp_status map_rnn(ox_ctx *c, rnn_kind kind) {
    rnn_pool P = {0};
    tp_status st = map_rnn_impl(c, kind, &P);
    rnn_pool_clear(&P);
    return st;
}

/* ---- ai.onnx.preview.training: Adagrad, Adam, Momentum -------------------------------------
 * One update step of each optimizer, lowered to elementwise ops. Inputs:
 * R (the learning rate, one value), T (the iteration count, one integer),
 * then n tensors X, n gradients G and n (Adagrad, Momentum) or 2n (Adam)
 * state tensors; outputs: the n new X, then the new states. The learning
 * rate and its T-dependent factors are computed in float64 and cast to X's
 * dtype; the rest in X's dtype, with the spec's formulas as written (so 0 *
 * inf in a regularization term gives NaN, as in the reference). */

typedef struct tr_pool {
    tp_value v[64];
    int n;
} tr_pool;

static void tr_clear(tr_pool *P) {
    for (int i = 0; i < P->n; i++) tp_value_clear(&P->v[i]);
    P->n = 0;
}

/* Keep *tmp (when st is TP_OK) in the pool; *out points at it. */
static tp_status tr_keep(tr_pool *P, tp_status st, tp_value *tmp, const tp_value **out) {
    if (st == TP_OK && P->n >= (int)TP_ARRAY_LEN(P->v)) st = tp_error(TP_ERR_INTERNAL, "training op: too many values");
    if (st != TP_OK) {
        tp_value_clear(tmp);
        return st;
    }
    P->v[P->n] = *tmp;
    *tmp = tp_value_none();
    *out = &P->v[P->n++];
    return TP_OK;
}

static tp_status tr_op2(ox_ctx *c, tr_pool *P, tp_op op, const tp_value *a, const tp_value *b, const tp_value **out) {
    tp_value r = tp_value_none();
    return tr_keep(P, ox_call2(c, op, a, b, &r), &r, out);
}

static tp_status tr_op1(ox_ctx *c, tr_pool *P, tp_op op, const tp_value *a, const tp_value **out) {
    tp_value r = tp_value_none();
    return tr_keep(P, ox_call1(c, op, a, &r), &r, out);
}

/* op(a, s) with s a 0-d tensor of a's dtype. */
static tp_status tr_scalar(ox_ctx *c, tr_pool *P, tp_op op, const tp_value *a, double s, const tp_value **out) {
    tp_value r = tp_value_none();
    return tr_keep(P, binop_scalar(c, op, a, s, &r), &r, out);
}

static tp_status tr_const(tr_pool *P, tp_dtype dt, double v, const tp_value **out) {
    tp_value r = tp_value_none();
    return tr_keep(P, ox_scalar_tensor(dt, v, &r), &r, out);
}

static tp_status tr_cast(ox_ctx *c, tr_pool *P, const tp_value *a, tp_dtype dt, const tp_value **out) {
    tp_value r = tp_value_none();
    return tr_keep(P, ox_cast(c, a, dt, &r), &r, out);
}

static tp_status tr_set_out(ox_ctx *c, int i, const tp_value *v) {
    if (!ox_out_used(c, i)) return TP_OK;
    tp_value r;
    TP_TRY(tp_value_copy(v, &r));
    return ox_set_out(c, i, &r);
}

typedef enum tr_kind { TR_ADAGRAD, TR_ADAM, TR_MOMENTUM } tr_kind;

typedef struct tr_common {
    int n;              /* tensors updated */
    const tp_value *r;  /* R as float64 */
    const tp_value *t;  /* T as float64 */
    const tp_value *tp; /* T > 0 */
} tr_common;

/* Check the inputs (R, T, then n_groups groups of n tensors of one shape
 * and float dtype) and compute R and T as float64, and T > 0. */
static tp_status tr_prologue(ox_ctx *c, tr_pool *P, int n_groups, tr_common *C) {
    int n_in = ox_n_in(c);
    if (n_in < 2 + n_groups || (n_in - 2) % n_groups)
        return ox_bad(c, "expected R, T and %d groups of as many tensors each, got %d inputs", n_groups, n_in);
    C->n = (n_in - 2) / n_groups;
    const tp_value *R, *T;
    TP_TRY(need(c, 0, &R));
    TP_TRY(need(c, 1, &T));
    if (tp_tensor_numel(ox_meta(R)) != 1) return ox_bad(c, "R (the learning rate) must hold one value");
    if (!tp_dtype_is_float(dtype_of(R))) return ox_bad(c, "R (the learning rate) must be a float tensor");
    if (tp_tensor_numel(ox_meta(T)) != 1) return ox_bad(c, "T (the iteration count) must hold one value");
    if (!tp_dtype_is_int(dtype_of(T))) return ox_bad(c, "T (the iteration count) must be an integer tensor");
    for (int i = 2; i < n_in; i++) {
        const tp_value *x, *x0;
        TP_TRY(need(c, i, &x));
        TP_TRY(need(c, 2 + (i - 2) % C->n, &x0));
        if (!tp_dtype_is_float(dtype_of(x))) return ox_bad(c, "input %d must be a float tensor", i);
        const tp_tensor *a = ox_meta(x), *b = ox_meta(x0);
        bool same = tp_tensor_ndim(a) == tp_tensor_ndim(b);
        for (int d = 0; same && d < tp_tensor_ndim(a); d++) same = tp_tensor_sizes(a)[d] == tp_tensor_sizes(b)[d];
        if (!same) return ox_bad(c, "input %d must have the shape of the tensor it updates (input %d)", i, 2 + (i - 2) % C->n);
    }
    const tp_value *r1, *t1;
    int64_t no_dims[1] = {0};
    TP_TRY(tr_cast(c, P, R, TP_FLOAT64, &r1));
    TP_TRY(tr_cast(c, P, T, TP_FLOAT64, &t1));
    {
        tp_value v = tp_value_none();
        tp_status st = reshape(c, r1, no_dims, 0, &v);
        TP_TRY(tr_keep(P, st, &v, &C->r));
        st = reshape(c, t1, no_dims, 0, &v);
        TP_TRY(tr_keep(P, st, &v, &C->t));
    }
    TP_TRY(tr_scalar(c, P, TP_OP_GT, C->t, 0.0, &C->tp));
    return TP_OK;
}

/* a * x + b * y for scalars a, b (in x's dtype). */
static tp_status tr_axpby(ox_ctx *c, tr_pool *P, double a, const tp_value *x, double b, const tp_value *y,
                          const tp_value **out) {
    const tp_value *ax, *by;
    TP_TRY(tr_scalar(c, P, TP_OP_MUL, x, a, &ax));
    TP_TRY(tr_scalar(c, P, TP_OP_MUL, y, b, &by));
    return tr_op2(c, P, TP_OP_ADD, ax, by, out);
}

static tp_status map_training_impl(ox_ctx *c, tr_kind kind, tr_pool *P) {
    int n_groups = kind == TR_ADAM ? 4 : 3;
    tr_common C;
    TP_TRY(tr_prologue(c, P, n_groups, &C));
    double norm = ox_attr_f(c, "norm_coefficient", 0.0);
    double eps = ox_attr_f(c, "epsilon", 1e-6);
    bool nesterov = false;
    double alpha = 0, beta = 0;
    const tp_value *lr; /* the learning rate of this step (float64, 0-d) */
    if (kind == TR_ADAGRAD) { /* R / (1 + T * decay_factor) */
        const tp_value *td, *den;
        TP_TRY(tr_scalar(c, P, TP_OP_MUL, C.t, ox_attr_f(c, "decay_factor", 0.0), &td));
        TP_TRY(tr_scalar(c, P, TP_OP_ADD, td, 1.0, &den));
        TP_TRY(tr_op2(c, P, TP_OP_DIV, C.r, den, &lr));
    } else if (kind == TR_ADAM) { /* T > 0 ? R * sqrt(1 - beta^T) / (1 - alpha^T) : R */
        alpha = ox_attr_f(c, "alpha", 0.9);
        beta = ox_attr_f(c, "beta", 0.999);
        const tp_value *ca, *cb, *one, *pa, *pb, *ma, *mb, *sb, *q, *rq;
        TP_TRY(tr_const(P, TP_FLOAT64, alpha, &ca));
        TP_TRY(tr_const(P, TP_FLOAT64, beta, &cb));
        TP_TRY(tr_const(P, TP_FLOAT64, 1.0, &one));
        TP_TRY(tr_op2(c, P, TP_OP_POW, ca, C.t, &pa));
        TP_TRY(tr_op2(c, P, TP_OP_POW, cb, C.t, &pb));
        TP_TRY(tr_op2(c, P, TP_OP_SUB, one, pa, &ma));
        TP_TRY(tr_op2(c, P, TP_OP_SUB, one, pb, &mb));
        TP_TRY(tr_op1(c, P, TP_OP_SQRT, mb, &sb));
        TP_TRY(tr_op2(c, P, TP_OP_MUL, C.r, sb, &q));
        TP_TRY(tr_op2(c, P, TP_OP_DIV, q, ma, &rq));
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, C.tp);
        ox_arg_ref(&A, rq);
        ox_arg_ref(&A, C.r);
        tp_value v = tp_value_none();
        TP_TRY(tr_keep(P, ox_call(c, TP_OP_WHERE, &A, &v), &v, &lr));
    } else { /* Momentum: every attribute is required */
        static const char *const req[] = {"alpha", "beta", "mode", "norm_coefficient"};
        for (size_t i = 0; i < TP_ARRAY_LEN(req); i++)
            if (!ox_attr(c, req[i])) return ox_bad(c, "attribute '%s' is required", req[i]);
        alpha = ox_attr_f(c, "alpha", 0.0);
        beta = ox_attr_f(c, "beta", 0.0);
        char buf[32];
        const char *mode = ox_attr_s(c, "mode", "", buf, sizeof buf);
        if (!strcmp(mode, "nesterov")) nesterov = true;
        else if (strcmp(mode, "standard") != 0)
            return ox_unsupported(c, "mode '%s' (expected 'standard' or 'nesterov')", mode);
        lr = C.r;
    }
    double norm_post = kind == TR_ADAM ? ox_attr_f(c, "norm_coefficient_post", 0.0) : 0.0;
    const tp_value *beta_adj = NULL; /* Momentum: T > 0 ? beta : 1 (float64) */
    if (kind == TR_MOMENTUM) {
        const tp_value *cb, *one;
        TP_TRY(tr_const(P, TP_FLOAT64, beta, &cb));
        TP_TRY(tr_const(P, TP_FLOAT64, 1.0, &one));
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, C.tp);
        ox_arg_ref(&A, cb);
        ox_arg_ref(&A, one);
        tp_value v = tp_value_none();
        TP_TRY(tr_keep(P, ox_call(c, TP_OP_WHERE, &A, &v), &v, &beta_adj));
    }
    int n = C.n;
    int keep = P->n; /* the values shared by every tensor */
    for (int i = 0; i < n; i++) {
        const tp_value *X = ox_in(c, 2 + i), *G = ox_in(c, 2 + n + i), *S1 = ox_in(c, 2 + 2 * n + i);
        tp_dtype dt = dtype_of(X);
        const tp_value *lrx, *gr, *xn, *s1n, *s2n = NULL;
        TP_TRY(tr_cast(c, P, lr, dt, &lrx));
        TP_TRY(tr_axpby(c, P, norm, X, 1.0, G, &gr)); /* norm_coefficient * X + G */
        if (kind == TR_ADAGRAD) {
            const tp_value *g2, *sq, *den, *num, *step;
            TP_TRY(tr_op2(c, P, TP_OP_MUL, gr, gr, &g2));
            TP_TRY(tr_op2(c, P, TP_OP_ADD, S1, g2, &s1n)); /* H + G^2 */
            TP_TRY(tr_op1(c, P, TP_OP_SQRT, s1n, &sq));
            TP_TRY(tr_scalar(c, P, TP_OP_ADD, sq, eps, &den));
            TP_TRY(tr_op2(c, P, TP_OP_MUL, lrx, gr, &num));
            TP_TRY(tr_op2(c, P, TP_OP_DIV, num, den, &step));
            TP_TRY(tr_op2(c, P, TP_OP_SUB, X, step, &xn));
        } else if (kind == TR_ADAM) {
            const tp_value *S2 = ox_in(c, 2 + 3 * n + i), *g2, *sq, *den, *q, *step, *x1;
            TP_TRY(tr_axpby(c, P, alpha, S1, 1.0 - alpha, gr, &s1n)); /* V */
            TP_TRY(tr_op2(c, P, TP_OP_MUL, gr, gr, &g2));
            TP_TRY(tr_axpby(c, P, beta, S2, 1.0 - beta, g2, &s2n)); /* H */
            TP_TRY(tr_op1(c, P, TP_OP_SQRT, s2n, &sq));
            TP_TRY(tr_scalar(c, P, TP_OP_ADD, sq, eps, &den));
            TP_TRY(tr_op2(c, P, TP_OP_DIV, s1n, den, &q));
            TP_TRY(tr_op2(c, P, TP_OP_MUL, lrx, q, &step));
            TP_TRY(tr_op2(c, P, TP_OP_SUB, X, step, &x1));
            TP_TRY(tr_scalar(c, P, TP_OP_MUL, x1, 1.0 - norm_post, &xn));
        } else {
            const tp_value *bx, *av, *bg, *step;
            TP_TRY(tr_cast(c, P, beta_adj, dt, &bx));
            TP_TRY(tr_scalar(c, P, TP_OP_MUL, S1, alpha, &av));
            TP_TRY(tr_op2(c, P, TP_OP_MUL, bx, gr, &bg));
            TP_TRY(tr_op2(c, P, TP_OP_ADD, av, bg, &s1n)); /* V */
            const tp_value *dir = s1n;
            if (nesterov) TP_TRY(tr_axpby(c, P, 1.0, gr, alpha, s1n, &dir)); /* G + alpha * V_new */
            TP_TRY(tr_op2(c, P, TP_OP_MUL, lrx, dir, &step));
            TP_TRY(tr_op2(c, P, TP_OP_SUB, X, step, &xn));
        }
        TP_TRY(tr_set_out(c, i, xn));
        TP_TRY(tr_set_out(c, n + i, s1n));
        if (s2n) TP_TRY(tr_set_out(c, 2 * n + i, s2n));
        while (P->n > keep) tp_value_clear(&P->v[--P->n]);
    }
    return TP_OK;
}

static tp_status map_training(ox_ctx *c, tr_kind kind) {
    tr_pool P = {.n = 0};
    tp_status st = map_training_impl(c, kind, &P);
    tr_clear(&P);
    return st;
}

tp_status tp__onnx_convert_training_node(ox_ctx *c, const char *op) {
    if (!strcmp(op, "Adagrad")) return map_training(c, TR_ADAGRAD);
    if (!strcmp(op, "Adam")) return map_training(c, TR_ADAM);
    if (!strcmp(op, "Momentum")) return map_training(c, TR_MOMENTUM);
    if (!strcmp(op, "Gradient")) return tp__onnx_gradient(c);
    return ox_unsupported(c, "op '%s' of domain '%s' is not supported", op, OX_TRAINING_DOMAIN);
}

/* ---- sequences ---------------------------------------------------------------------------- */

/* A sequence is tracked while importing as a list of operands whose length
 * is known: SequenceEmpty / SequenceConstruct / SequenceInsert /
 * SequenceErase with constant positions, SplitToSequence with a known
 * split. Each sequence op becomes ordinary ops on the items (or nothing):
 * SequenceAt picks an item, ConcatFromSequence is cat / stack,
 * SequenceLength a constant. */

/* The most tensors a sequence may hold (each SequenceInsert copies the
 * list, so a hostile chain of inserts stays linear in this bound). */
#define OX_MAX_SEQ 4096

static bool is_sequence_op(const char *op) {
    return !strncmp(op, "Sequence", 8) || !strcmp(op, "ConcatFromSequence") || !strcmp(op, "SplitToSequence") ||
           !strcmp(op, "Identity");
}

/* Input i as a sequence known at import. */
static tp_status need_seq(ox_ctx *c, int i, const tp_value **out) {
    *out = ox_in(c, i);
    if (!*out) return ox_bad(c, "missing input %d", i);
    if ((*out)->kind != TP_VAL_LIST) return ox_unsupported(c, "input %d is not a sequence", i);
    return TP_OK;
}

/* A constant position (input i) into a sequence of n items: in [-n, n]
 * when at_end may be n, else [-n, n-1]; dflt when absent. */
static tp_status seq_pos(ox_ctx *c, int i, int64_t n, bool at_end, int64_t dflt, int64_t *out) {
    int64_t v[1];
    int k;
    TP_TRY(const_ints(c, i, "position", v, 1, &k));
    if (k < 0) {
        *out = dflt;
        return TP_OK;
    }
    if (k != 1) return ox_bad(c, "position must be one value");
    if (v[0] < -n || v[0] > (at_end ? n : n - 1))
        return ox_bad(c, "position %" PRId64 " out of range for a sequence of %" PRId64 " tensors", v[0], n);
    *out = v[0] < 0 ? v[0] + n : v[0];
    return TP_OK;
}

/* A copy of seq with item (copied; NULL: none) inserted at pos, or item
 * pos left out (erase). */
static tp_status seq_edit(const tp_value *seq, int64_t pos, const tp_value *item, tp_value *out) {
    int64_t n = tp_value_len(seq);
    TP_TRY(tp_value_list(0, out));
    tp_status st = TP_OK;
    for (int64_t i = 0; i <= n && st == TP_OK; i++) {
        tp_value v = tp_value_none();
        if (i == pos && item) {
            st = tp_value_copy(item, &v);
            if (st == TP_OK) st = tp_value_append(out, &v);
        }
        if (i == n || (i == pos && !item) || st != TP_OK) continue;
        st = tp_value_copy(tp_value_at(seq, i), &v);
        if (st == TP_OK) st = tp_value_append(out, &v);
    }
    if (st != TP_OK) tp_value_clear(out);
    return st;
}

static tp_status map_sequence_empty(ox_ctx *c) {
    tp_dtype dt;
    TP_TRY(dtype_attr(c, "dtype", ox_attr_i(c, "dtype", 1), &dt)); /* checked; an empty list has no dtype */
    tp_value r;
    TP_TRY(tp_value_list(0, &r));
    return set_out(c, &r);
}

static tp_status map_sequence_construct(ox_ctx *c) {
    int n = ox_n_in(c);
    if (n < 1) return ox_bad(c, "needs inputs");
    if (n > OX_MAX_SEQ) return ox_unsupported(c, "a sequence of more than %d tensors", OX_MAX_SEQ);
    const tp_value *x0;
    TP_TRY(need(c, 0, &x0));
    tp_value r;
    TP_TRY(tp_value_list(0, &r));
    tp_status st = TP_OK;
    for (int i = 0; i < n && st == TP_OK; i++) {
        const tp_value *xi;
        tp_value cp = tp_value_none();
        st = need(c, i, &xi);
        if (st == TP_OK && dtype_of(xi) != dtype_of(x0))
            st = ox_bad(c, "input %d is %s, input 0 %s: a sequence's tensors have one dtype", i,
                        tp_dtype_name(dtype_of(xi)), tp_dtype_name(dtype_of(x0)));
        if (st == TP_OK) st = tp_value_copy(xi, &cp);
        if (st == TP_OK) st = tp_value_append(&r, &cp);
    }
    if (st != TP_OK) {
        tp_value_clear(&r);
        return st;
    }
    return set_out(c, &r);
}

static tp_status map_sequence_insert(ox_ctx *c) {
    const tp_value *s, *x;
    TP_TRY(need_seq(c, 0, &s));
    TP_TRY(need(c, 1, &x));
    int64_t n = tp_value_len(s), pos;
    if (n > 0 && dtype_of(tp_value_at(s, 0)) != dtype_of(x))
        return ox_bad(c, "inserting a %s tensor into a sequence of %s", tp_dtype_name(dtype_of(x)),
                      tp_dtype_name(dtype_of(tp_value_at(s, 0))));
    if (n >= OX_MAX_SEQ) return ox_unsupported(c, "a sequence of more than %d tensors", OX_MAX_SEQ);
    TP_TRY(seq_pos(c, 2, n, true, n, &pos));
    tp_value r;
    TP_TRY(seq_edit(s, pos, x, &r));
    return set_out(c, &r);
}

static tp_status map_sequence_erase(ox_ctx *c) {
    const tp_value *s;
    TP_TRY(need_seq(c, 0, &s));
    int64_t n = tp_value_len(s), pos;
    if (n == 0) return ox_bad(c, "erasing from an empty sequence");
    TP_TRY(seq_pos(c, 1, n, false, n - 1, &pos));
    tp_value r;
    TP_TRY(seq_edit(s, pos, NULL, &r));
    return set_out(c, &r);
}

static tp_status map_sequence_at(ox_ctx *c) {
    const tp_value *s;
    TP_TRY(need_seq(c, 0, &s));
    int64_t n = tp_value_len(s), pos;
    if (!ox_in(c, 1)) return ox_bad(c, "missing input 1 (position)");
    TP_TRY(seq_pos(c, 1, n, false, 0, &pos));
    tp_value r;
    TP_TRY(tp_value_copy(tp_value_at(s, pos), &r));
    return set_out(c, &r);
}

static tp_status map_sequence_length(ox_ctx *c) {
    const tp_value *s;
    TP_TRY(need_seq(c, 0, &s));
    tp_value r;
    TP_TRY(ox_scalar_tensor(TP_INT64, (double)tp_value_len(s), &r));
    return set_out(c, &r);
}

static tp_status map_concat_from_sequence(ox_ctx *c) {
    const tp_value *s;
    TP_TRY(need_seq(c, 0, &s));
    const Onnx__AttributeProto *ax = ox_attr(c, "axis");
    if (!ax) return ox_bad(c, "attribute 'axis' is required");
    bool new_axis = ox_attr_i(c, "new_axis", 0) != 0;
    int64_t n = tp_value_len(s);
    if (n == 0) return ox_unsupported(c, "concatenating an empty sequence (its result has no known shape)");
    const tp_value *x0 = tp_value_at(s, 0);
    int axis;
    TP_TRY(wrap_axis(c, ox_attr_i(c, "axis", 0), rank_of(x0) + (new_axis ? 1 : 0), &axis));
    tp_value list;
    TP_TRY(tp_value_copy(s, &list));
    ox_args A;
    ox_args_init(&A);
    ox_arg(&A, list);
    ox_arg(&A, tp_value_int(axis));
    tp_value r;
    TP_TRY(ox_call(c, new_axis ? TP_OP_STACK : TP_OP_CAT, &A, &r));
    return set_out(c, &r);
}

static tp_status map_split_to_sequence(ox_ctx *c) {
    const tp_value *x;
    TP_TRY(need(c, 0, &x));
    int rank = rank_of(x), axis;
    TP_TRY(wrap_axis(c, ox_attr_i(c, "axis", 0), rank, &axis));
    if (ox_in_dyn(c, 0))
        return ox_unsupported(c, "input 0's shape depends on a dynamic dim (a sequence's "
                                 "length and items must be known when importing)");
    int64_t dim = sizes_of(x)[axis], sizes[MAXV];
    int n;
    TP_TRY(const_ints(c, 1, "split", sizes, MAXV, &n));
    const tp_value *sp = ox_in(c, 1);
    bool squeeze = false;
    if (n < 0) { /* every item of size 1; keepdims=0 drops the axis */
        if (dim > MAXV) return ox_unsupported(c, "splitting into %" PRId64 " tensors (at most %d)", dim, MAXV);
        for (int64_t i = 0; i < dim; i++) sizes[i] = 1;
        n = (int)dim;
        squeeze = ox_attr_i(c, "keepdims", 1) == 0;
    } else if (tp_tensor_ndim(ox_meta(sp)) == 0) { /* chunks of one size, the last smaller */
        int64_t k = sizes[0];
        if (k <= 0) return ox_bad(c, "split size %" PRId64 " must be positive", k);
        int64_t parts = dim == 0 ? 0 : (dim + k - 1) / k;
        if (parts > MAXV) return ox_unsupported(c, "splitting into %" PRId64 " tensors (at most %d)", parts, MAXV);
        for (int64_t i = 0; i < parts; i++) sizes[i] = dim - i * k < k ? dim - i * k : k;
        n = (int)parts;
    } else {
        int64_t sum = 0;
        for (int i = 0; i < n; i++) {
            if (sizes[i] < 0) return ox_bad(c, "split size %" PRId64 " is negative", sizes[i]);
            sum += sizes[i];
        }
        if (sum != dim) return ox_bad(c, "split sizes add up to %" PRId64 ", the axis has %" PRId64, sum, dim);
    }
    tp_value r;
    TP_TRY(tp_value_list(0, &r));
    if (n == 0) return set_out(c, &r);
    tp_value parts;
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ints(&A, sizes, n);
    ox_arg(&A, tp_value_int(axis));
    tp_status st = ox_call(c, TP_OP_SPLIT, &A, &parts);
    for (int i = 0; i < n && st == TP_OK; i++) {
        tp_value item = tp_value_none();
        st = tp_value_copy(tp_value_at(&parts, i), &item);
        if (st == TP_OK && squeeze) {
            int64_t one = axis;
            tp_value sq;
            st = call_ints(c, TP_OP_SQUEEZE, &item, &one, 1, &sq);
            tp_value_clear(&item);
            item = sq;
        }
        if (st == TP_OK) st = tp_value_append(&r, &item);
        else tp_value_clear(&item);
    }
    tp_value_clear(&parts);
    if (st != TP_OK) {
        tp_value_clear(&r);
        return st;
    }
    return set_out(c, &r);
}

/* ---- optionals ----------------------------------------------------------------------------- */

/* An optional known at import: a tuple of no value (empty) or one (a
 * tensor operand or a sequence). OptionalHasElement is then a constant and
 * OptionalGetElement picks the value. */

static bool is_optional_op(const char *op) { return !strncmp(op, "Optional", 8) || !strcmp(op, "Identity"); }

static tp_status map_optional(ox_ctx *c) {
    const tp_value *x = ox_in(c, 0);
    if (x && x->kind == TP_VAL_TUPLE) return ox_unsupported(c, "an optional of an optional");
    if (!x && !ox_attr(c, "type")) return ox_bad(c, "an empty Optional needs attribute 'type'");
    tp_value r, item = tp_value_none();
    TP_TRY(tp_value_tuple(0, &r));
    tp_status st = x ? tp_value_copy(x, &item) : TP_OK;
    if (st == TP_OK && x) st = tp_value_append(&r, &item);
    if (st != TP_OK) {
        tp_value_clear(&r);
        return st;
    }
    return set_out(c, &r);
}

static tp_status map_optional_has_element(ox_ctx *c) {
    const tp_value *x = ox_in(c, 0);
    if (!x && ox_opset(c) < 18) return ox_bad(c, "missing input 0");
    bool has = x && (x->kind != TP_VAL_TUPLE || tp_value_len(x) > 0);
    tp_value r;
    TP_TRY(ox_scalar_tensor(TP_BOOL, has ? 1 : 0, &r));
    return set_out(c, &r);
}

static tp_status map_optional_get_element(ox_ctx *c) {
    const tp_value *x = ox_in(c, 0);
    if (!x) return ox_bad(c, "missing input 0");
    if (x->kind == TP_VAL_TUPLE && tp_value_len(x) == 0) return ox_bad(c, "the optional input is empty");
    tp_value r;
    TP_TRY(tp_value_copy(x->kind == TP_VAL_TUPLE ? tp_value_at(x, 0) : x, &r));
    return set_out(c, &r);
}

/* ---- dispatch --------------------------------------------------------------------------- */

static const char *const k_unsupported_reason[][2] = {
    {"SequenceMap", "SequenceMap (a subgraph run per item) is not supported"},
    {"RandomNormal", "random ops are not supported"},
    {"RandomUniform", "random ops are not supported"},
    {"RandomNormalLike", "random ops are not supported"},
    {"RandomUniformLike", "random ops are not supported"},
    {"Multinomial", "random ops are not supported"},
    {"Bernoulli", "random ops are not supported"},
};

tp_status tp__onnx_convert_node(ox_ctx *c, const char *op) {
    if (!is_sequence_op(op) && !is_optional_op(op))
        for (int i = 0; i < ox_n_in(c); i++) {
            const tp_value *v = ox_in(c, i);
            if (v && v->kind == TP_VAL_LIST) return ox_unsupported(c, "input %d is a sequence (only sequence ops take one)", i);
        }
    if (!is_optional_op(op))
        for (int i = 0; i < ox_n_in(c); i++) {
            const tp_value *v = ox_in(c, i);
            if (v && v->kind == TP_VAL_TUPLE) return ox_unsupported(c, "input %d is an optional (only Optional* ops take one)", i);
        }
    if (!strcmp(op, "Equal") && (ox_in_str(c, 0) || ox_in_str(c, 1))) return tp__onnx_string_equal(c);
    if (!strcmp(op, "If") || !strcmp(op, "Loop") || !strcmp(op, "Scan")) return tp__onnx_convert_control_flow(c, op);
    if (!strcmp(op, "Optional")) return map_optional(c);
    if (!strcmp(op, "OptionalHasElement")) return map_optional_has_element(c);
    if (!strcmp(op, "OptionalGetElement")) return map_optional_get_element(c);
    if (!strcmp(op, "SequenceEmpty")) return map_sequence_empty(c);
    if (!strcmp(op, "SequenceConstruct")) return map_sequence_construct(c);
    if (!strcmp(op, "SequenceInsert")) return map_sequence_insert(c);
    if (!strcmp(op, "SequenceErase")) return map_sequence_erase(c);
    if (!strcmp(op, "SequenceAt")) return map_sequence_at(c);
    if (!strcmp(op, "SequenceLength")) return map_sequence_length(c);
    if (!strcmp(op, "ConcatFromSequence")) return map_concat_from_sequence(c);
    if (!strcmp(op, "SplitToSequence")) return map_split_to_sequence(c);
    for (size_t i = 0; i < TP_ARRAY_LEN(k_unary); i++)
        if (!strcmp(op, k_unary[i].name)) return map_unary(c, k_unary[i].op);
    for (size_t i = 0; i < TP_ARRAY_LEN(k_binary); i++)
        if (!strcmp(op, k_binary[i].name)) return map_binary(c, &k_binary[i]);
    if (!strcmp(op, "Div")) return map_div(c);
    if (!strcmp(op, "Mod")) return map_mod(c);
    if (!strcmp(op, "Max")) return map_variadic(c, TP_OP_MAXIMUM, false);
    if (!strcmp(op, "Min")) return map_variadic(c, TP_OP_MINIMUM, false);
    if (!strcmp(op, "Sum")) return map_variadic(c, TP_OP_ADD, false);
    if (!strcmp(op, "Mean")) return map_variadic(c, TP_OP_ADD, true);
    if (!strcmp(op, "Identity")) return map_identity(c);
    if (!strcmp(op, "Dropout")) return map_dropout(c);
    if (!strcmp(op, "Cast")) return map_cast(c, false);
    if (!strcmp(op, "CastLike")) return map_cast(c, true);
    if (!strcmp(op, "LeakyRelu")) return map_leaky_relu(c);
    if (!strcmp(op, "Elu")) return map_elu(c, false);
    if (!strcmp(op, "Selu")) return map_elu(c, true);
    if (!strcmp(op, "Celu")) return map_celu(c);
    if (!strcmp(op, "HardSigmoid")) return map_hard_sigmoid(c);
    if (!strcmp(op, "ThresholdedRelu")) return map_thresholded_relu(c);
    if (!strcmp(op, "Shrink")) return map_shrink(c);
    if (!strcmp(op, "Softsign")) return map_softsign(c);
    if (!strcmp(op, "PRelu")) return map_prelu(c);
    if (!strcmp(op, "Clip")) return map_clip(c);
    if (!strcmp(op, "IsInf")) return map_isinf(c);
    if (!strcmp(op, "Asin") || !strcmp(op, "Acos") || !strcmp(op, "Atan") || !strcmp(op, "Sinh") ||
        !strcmp(op, "Cosh") || !strcmp(op, "Asinh") || !strcmp(op, "Acosh") || !strcmp(op, "Atanh"))
        return map_trig(c, op);
    if (!strcmp(op, "Where")) return map_where(c);
    if (!strcmp(op, "MatMul")) return map_matmul(c);
    if (!strcmp(op, "RNN")) return map_rnn(c, RNN_PLAIN);
    if (!strcmp(op, "GRU")) return map_rnn(c, RNN_GRU);
    if (!strcmp(op, "LSTM")) return map_rnn(c, RNN_LSTM);
    if (!strcmp(op, "Gemm")) return map_gemm(c);
    if (!strcmp(op, "Conv")) return map_conv(c);
    if (!strcmp(op, "ConvTranspose")) return map_conv_transpose(c);
    if (!strcmp(op, "MaxPool")) return map_pool(c, true);
    if (!strcmp(op, "AveragePool")) return map_pool(c, false);
    if (!strcmp(op, "GlobalAveragePool")) return map_global_pool(c, false);
    if (!strcmp(op, "GlobalMaxPool")) return map_global_pool(c, true);
    if (!strcmp(op, "BatchNormalization")) return map_batch_norm(c);
    if (!strcmp(op, "InstanceNormalization")) return map_instance_norm(c);
    if (!strcmp(op, "LayerNormalization")) return map_layer_norm(c);
    if (!strcmp(op, "Softmax")) return map_softmax(c, TP_OP_SOFTMAX, false);
    if (!strcmp(op, "LogSoftmax")) return map_softmax(c, TP_OP_LOG_SOFTMAX, false);
    if (!strcmp(op, "Hardmax")) return map_softmax(c, TP_OP_SOFTMAX, true);
    if (!strcmp(op, "LRN")) return map_lrn(c);
    if (!strcmp(op, "LpNormalization")) return map_lp_norm(c);
    if (!strcmp(op, "MeanVarianceNormalization")) return map_mvn(c);
    if (!strncmp(op, "Reduce", 6)) return map_reduce(c, op + 6);
    if (!strcmp(op, "ArgMax")) return map_arg(c, true);
    if (!strcmp(op, "ArgMin")) return map_arg(c, false);
    if (!strcmp(op, "CumSum")) return map_cumsum(c, TP_OP_CUMSUM);
    if (!strcmp(op, "CumProd")) return map_cumsum(c, TP_OP_CUMPROD);
    if (!strcmp(op, "Gelu")) return map_gelu(c);
    if (!strcmp(op, "Swish")) return map_swish(c);
    if (!strcmp(op, "RMSNormalization")) return map_rms_norm(c);
    if (!strcmp(op, "RotaryEmbedding")) return tp__onnx_rotary_embedding(c);
    if (!strcmp(op, "Reshape")) return map_reshape(c);
    if (!strcmp(op, "Flatten")) return map_flatten(c);
    if (!strcmp(op, "Transpose")) return map_transpose(c);
    if (!strcmp(op, "Squeeze")) return map_squeeze(c);
    if (!strcmp(op, "Unsqueeze")) return map_unsqueeze(c);
    if (!strcmp(op, "Concat")) return map_concat(c);
    if (!strcmp(op, "Split")) return map_split(c);
    if (!strcmp(op, "Slice")) return map_slice(c);
    if (!strcmp(op, "Gather")) return map_gather(c);
    if (!strcmp(op, "GatherElements")) return map_gather_elements(c);
    if (!strcmp(op, "ScatterElements") || !strcmp(op, "Scatter")) return map_scatter_elements(c);
    if (!strcmp(op, "GatherND")) return map_gather_nd(c);
    if (!strcmp(op, "ScatterND")) return map_scatter_nd(c);
    if (!strcmp(op, "Expand")) return map_expand(c);
    if (!strcmp(op, "ReverseSequence")) return map_reverse_sequence(c);
    if (!strcmp(op, "HannWindow")) return map_window(c, 'n');
    if (!strcmp(op, "HammingWindow")) return map_window(c, 'm');
    if (!strcmp(op, "BlackmanWindow")) return map_window(c, 'b');
    if (!strcmp(op, "Tile")) return map_tile(c);
    if (!strcmp(op, "Pad")) return map_pad(c);
    if (!strcmp(op, "Shape")) return map_shape(c, false);
    if (!strcmp(op, "Size")) return map_size(c);
    if (!strcmp(op, "Constant")) return map_constant(c);
    if (!strcmp(op, "StringNormalizer")) return tp__onnx_string_normalizer(c);
    if (!strcmp(op, "StringConcat")) return tp__onnx_string_concat(c);
    if (!strcmp(op, "TfIdfVectorizer")) return tp__onnx_tfidf(c);
    if (!strcmp(op, "Attention") && ox_opset(c) >= 23) return tp__onnx_attention(c);
    if (!strcmp(op, "ConstantOfShape")) return map_constant_of_shape(c);
    if (!strcmp(op, "Range")) return map_range(c);
    if (!strcmp(op, "Trilu")) return map_trilu(c);
    if (!strcmp(op, "OneHot")) return map_one_hot(c);
    if (!strcmp(op, "DepthToSpace")) return map_depth_space(c, true);
    if (!strcmp(op, "SpaceToDepth")) return map_depth_space(c, false);
    if (!strcmp(op, "EyeLike")) return map_eye_like(c);
    if (!strcmp(op, "DequantizeLinear")) return map_dequantize(c);
    if (!strcmp(op, "QuantizeLinear")) return map_quantize(c);
    if (!strcmp(op, "Resize")) return map_resize(c, false);
    if (!strcmp(op, "GridSample")) return map_grid_sample(c);
    if (!strcmp(op, "AffineGrid")) return map_affine_grid(c);
    if (!strcmp(op, "GroupNormalization")) return map_group_norm(c);
    if (!strcmp(op, "SwiGLU")) return map_swish(c);
    if (!strcmp(op, "TensorScatter")) return tp__onnx_tensor_scatter(c);
    if (!strcmp(op, "CenterCropPad")) return tp__onnx_center_crop_pad(c);
    if (!strcmp(op, "MaxUnpool")) return map_max_unpool(c);
    if (!strcmp(op, "LpPool")) return map_lp_pool(c, false);
    if (!strcmp(op, "GlobalLpPool")) return map_lp_pool(c, true);
    if (!strcmp(op, "NonZero")) return map_nonzero(c);
    if (!strcmp(op, "NonMaxSuppression")) return map_nms(c);
    if (!strcmp(op, "Compress")) return map_compress(c);
    if (!strcmp(op, "Unique")) return map_unique(c);
    if (!strcmp(op, "TopK")) return map_topk(c);
    if (!strcmp(op, "RoiAlign")) return map_roi_align(c);
    if (!strcmp(op, "DFT")) return map_dft(c);
    if (!strcmp(op, "STFT")) return map_stft(c);
    if (!strcmp(op, "MelWeightMatrix")) return map_mel_weight_matrix(c);
    if (!strcmp(op, "MatMulInteger")) return map_matmul_integer(c);
    if (!strcmp(op, "ConvInteger")) return map_conv_integer(c);
    if (!strcmp(op, "QLinearMatMul")) return map_qlinear(c, false);
    if (!strcmp(op, "QLinearConv")) return map_qlinear(c, true);
    if (!strcmp(op, "DynamicQuantizeLinear")) return map_dynamic_quantize(c);
    if (!strcmp(op, "BitShift")) return map_bitshift(c);
    if (!strcmp(op, "Einsum")) return map_einsum(c);
    if (!strcmp(op, "NegativeLogLikelihoodLoss")) return map_nll(c);
    if (!strcmp(op, "SoftmaxCrossEntropyLoss")) return map_sce(c);
    if (!strcmp(op, "Upsample")) return map_resize(c, true);
    for (size_t i = 0; i < TP_ARRAY_LEN(k_unsupported_reason); i++)
        if (!strcmp(op, k_unsupported_reason[i][0])) return ox_unsupported(c, "%s", k_unsupported_reason[i][1]);
    return ox_unsupported(c, "op '%s' is not supported", op);
}
