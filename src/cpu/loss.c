/*
 * loss.c - the losses of tensorplay.nn.functional: schemas, shape rules and
 * reference kernels.
 *
 * Elementwise losses (mse, l1, smooth_l1, huber, soft_margin,
 * binary_cross_entropy(_with_logits), kl_div, poisson_nll, gaussian_nll,
 * margin_ranking, hinge_embedding) broadcast their tensor arguments, compute
 * each element in double and reduce: 'none' gives the broadcast shape,
 * 'mean' and 'sum' a 0-d tensor (the mean of no elements is NaN, as in
 * PyTorch), kl_div also takes 'batchmean' (the sum over input.size(0)).
 * The result dtype is the promoted dtype of the tensor arguments, which
 * must be floating point.
 *
 * triplet_margin_loss, multi_margin_loss, multilabel_margin_loss and
 * multilabel_soft_margin_loss follow below the pairwise ops (per-row losses).
 *
 * Two kinds of reduction argument, after what tensorplay records: the
 * nn.functional functions pass a string ('none' | 'mean' | 'sum'), the
 * tensorplay.functional tp_*_loss functions the ATen int (0 none, 1 mean,
 * 2 sum); each op takes the form its recorded callee passes.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "kernel_util.h"

enum { RED_NONE = 0, RED_MEAN = 1, RED_SUM = 2, RED_BATCHMEAN = 3 };

static tp_status reduction_of(const tp_value *v, bool batchmean_ok, int *red) {
    if (v->kind == TP_VAL_STR) {
        const char *s = v->u.s;
        if (!strcmp(s, "none")) *red = RED_NONE;
        else if (!strcmp(s, "mean")) *red = RED_MEAN;
        else if (!strcmp(s, "sum")) *red = RED_SUM;
        else if (batchmean_ok && !strcmp(s, "batchmean")) *red = RED_BATCHMEAN;
        else return tp_error(TP_ERR_INVALID_ARG, "%.64s is not a valid value for reduction", s);
        return TP_OK;
    }
    int64_t r = tp_value_as_i64(v);
    TP_CHECK(r >= 0 && r <= 2, TP_ERR_INVALID_ARG, "%" PRId64 " is not a valid value for reduction", r);
    *red = (int)r;
    return TP_OK;
}

static double load(const char *p, tp_dtype dtype) {
    if (dtype == TP_FLOAT32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    if (dtype == TP_FLOAT64) {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    return tp__load_f64(p, dtype);
}

/* ---- elementwise losses ------------------------------------------------ */

typedef enum ew_kind {
    EW_MSE,
    EW_L1,
    EW_SMOOTH_L1,
    EW_HUBER,
    EW_SOFT_MARGIN,
    EW_BCE,
    EW_BCE_LOGITS,
    EW_KL_DIV,
    EW_POISSON_NLL,
    EW_GAUSSIAN_NLL,
    EW_MARGIN_RANKING,
    EW_HINGE
} ew_kind;

#define EW_MAX 4

typedef struct ew_plan {
    int n;                    /* tensor operands (NULL ones dropped) */
    tp_tensor *t[EW_MAX];     /* borrowed, except owned[i] */
    bool owned[EW_MAX];
    int role[EW_MAX];         /* which operand slot each is (see ew_eval) */
    int red;
    double a, b;              /* beta / delta / margin / eps */
    bool f1, f2;              /* log_target / log_input, full */
    tp_dtype dtype;
    int ndim;
    int64_t sizes[TP_MAX_DIMS];
    tp_sdim dims[TP_MAX_DIMS]; /* sizes as the shape rule gives them (dim.h) */
    int64_t batch;            /* batchmean: input.size(0) (1 for 0-d) */
} ew_plan;

enum { R_X, R_Y, R_Z, R_W }; /* operand slots: input, target, third (var / target), weight / pos_weight */

static void ew_plan_free(ew_plan *p) {
    for (int i = 0; i < p->n; i++)
        if (p->owned[i]) tp_tensor_free(p->t[i]);
    p->n = 0;
}

static tp_status ew_add(ew_plan *p, const tp_value *args, int i, int role, const char *what, bool optional) {
    if (optional && tp__arg_is_none(args, i)) return TP_OK;
    tp_tensor *t;
    TP_TRY(tp__need_tensor(args, i, what, &t));
    p->t[p->n] = t;
    p->owned[p->n] = false;
    p->role[p->n] = role;
    p->n++;
    return TP_OK;
}

static const char *ew_name(ew_kind k) {
    static const char *const names[] = {"mse_loss",
                                        "l1_loss",
                                        "smooth_l1_loss",
                                        "huber_loss",
                                        "soft_margin_loss",
                                        "binary_cross_entropy",
                                        "binary_cross_entropy_with_logits",
                                        "kl_div",
                                        "poisson_nll_loss",
                                        "gaussian_nll_loss",
                                        "margin_ranking_loss",
                                        "hinge_embedding_loss"};
    return names[k];
}

/* Dims [0, n) of a and b are equal (guards, dim.h). */
static bool dims_eq(const tp_tensor *a, const tp_tensor *b, int n, const char *what) {
    for (int i = 0; i < n; i++)
        if (!tp__dim_eq(tp__dim(a, i), tp__dim(b, i), what)) return false;
    return true;
}

static tp_status same_size(const tp_tensor *x, const tp_tensor *y, const char *fmt) {
    if (x->ndim == y->ndim && dims_eq(x, y, x->ndim, "target shaped like the input")) return TP_OK;
    char a[256], b[256];
    return tp_error(TP_ERR_SHAPE, fmt, tp__shape_str(y->ndim, y->sizes, a, sizeof a),
                         tp__shape_str(x->ndim, x->sizes, b, sizeof b));
}

/* gaussian_nll_loss's var: input's shape, input's shape without the last
 * dim (read as if unsqueezed), or with a last dim of 1. */
static tp_status gaussian_var(ew_plan *p) {
    tp_tensor *x = p->t[0], *v = p->t[2];
    if (v->ndim == x->ndim && !memcmp(v->sizes, x->sizes, (size_t)x->ndim * sizeof *x->sizes) &&
        dims_eq(v, x, x->ndim, "var shaped like the input"))
        return TP_OK;
    if (x->ndim >= 1 && v->ndim == x->ndim - 1 && !memcmp(v->sizes, x->sizes, (size_t)v->ndim * sizeof *v->sizes) &&
        dims_eq(v, x, v->ndim, "var shaped like the input")) {
        int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
        memcpy(sizes, v->sizes, (size_t)v->ndim * sizeof *sizes);
        memcpy(strides, v->strides, (size_t)v->ndim * sizeof *strides);
        sizes[v->ndim] = 1;
        strides[v->ndim] = 0;
        tp_tensor *u;
        TP_TRY(tp_tensor_as_strided(v, v->ndim + 1, sizes, strides, v->offset, &u));
        const sd_e *vs = tp__tensor_sym(v);
        tp_sym_env *env = tp__sym_env();
        if (vs && env) { /* the view keeps v's symbolic dims */
            sd_e *us = env->alloc ? env->alloc(env->user, (size_t)(v->ndim + 1) * sizeof *us) : NULL;
            if (!us) {
                tp__dim_give_up();
            } else {
                memcpy(us, vs, (size_t)v->ndim * sizeof *us);
                us[v->ndim] = NULL;
                tp__tensor_set_sym(u, us);
            }
        }
        p->t[2] = u;
        p->owned[2] = true;
        return TP_OK;
    }
    bool last_one = x->ndim >= 1 && v->ndim == x->ndim && tp__dim_eqk(tp__dim(v, v->ndim - 1), 1, "var's last dim") &&
                    dims_eq(v, x, x->ndim - 1, "var shaped like the input");
    TP_CHECK(last_one, TP_ERR_SHAPE, "var is of incorrect size");
    return TP_OK;
}

/* The operands and parameters of each elementwise loss, from its schema. */
static tp_status ew_make(const tp_value *args, ew_kind k, ew_plan *p) {
    memset(p, 0, sizeof *p);
    const tp_value *red = NULL;
    bool batchmean = false;
    switch (k) {
    case EW_MSE:
    case EW_L1:
    case EW_SMOOTH_L1:
    case EW_HUBER:
    case EW_SOFT_MARGIN:
        /* (self, target, reduction[, beta | delta]) */
        TP_TRY(ew_add(p, args, 0, R_X, "self", false));
        TP_TRY(ew_add(p, args, 1, R_Y, "target", false));
        red = &args[2];
        if (k == EW_SMOOTH_L1 || k == EW_HUBER) p->a = tp__arg_f64(args, 3);
        break;
    case EW_BCE:
        /* (self, target, weight, reduction) */
        TP_TRY(ew_add(p, args, 0, R_X, "self", false));
        TP_TRY(ew_add(p, args, 1, R_Y, "target", false));
        TP_TRY(ew_add(p, args, 2, R_W, "weight", true));
        red = &args[3];
        break;
    case EW_BCE_LOGITS:
        /* (self, target, weight, pos_weight, reduction) */
        TP_TRY(ew_add(p, args, 0, R_X, "self", false));
        TP_TRY(ew_add(p, args, 1, R_Y, "target", false));
        TP_TRY(ew_add(p, args, 2, R_W, "weight", true));
        TP_TRY(ew_add(p, args, 3, R_Z, "pos_weight", true));
        red = &args[4];
        break;
    case EW_KL_DIV:
        /* (self, target, reduction, log_target) */
        TP_TRY(ew_add(p, args, 0, R_X, "self", false));
        TP_TRY(ew_add(p, args, 1, R_Y, "target", false));
        red = &args[2];
        p->f1 = tp__arg_bool(args, 3);
        batchmean = true;
        break;
    case EW_POISSON_NLL:
        /* (input, target, log_input, full, eps, reduction) */
        TP_TRY(ew_add(p, args, 0, R_X, "input", false));
        TP_TRY(ew_add(p, args, 1, R_Y, "target", false));
        p->f1 = tp__arg_bool(args, 2);
        p->f2 = tp__arg_bool(args, 3);
        p->a = tp__arg_f64(args, 4);
        red = &args[5];
        break;
    case EW_GAUSSIAN_NLL:
        /* (input, target, var, full, eps, reduction) */
        TP_TRY(ew_add(p, args, 0, R_X, "input", false));
        TP_TRY(ew_add(p, args, 1, R_Y, "target", false));
        TP_TRY(ew_add(p, args, 2, R_Z, "var", false));
        p->f2 = tp__arg_bool(args, 3);
        p->a = tp__arg_f64(args, 4);
        red = &args[5];
        break;
    case EW_MARGIN_RANKING:
        /* (input1, input2, target, margin, reduction) */
        TP_TRY(ew_add(p, args, 0, R_X, "input1", false));
        TP_TRY(ew_add(p, args, 1, R_Z, "input2", false));
        TP_TRY(ew_add(p, args, 2, R_Y, "target", false));
        p->a = tp__arg_f64(args, 3);
        red = &args[4];
        break;
    case EW_HINGE:
        /* (self, target, margin, reduction) */
        TP_TRY(ew_add(p, args, 0, R_X, "self", false));
        TP_TRY(ew_add(p, args, 1, R_Y, "target", false));
        p->a = tp__arg_f64(args, 2);
        red = &args[3];
        break;
    }
    TP_TRY(reduction_of(red, batchmean, &p->red));
    tp_tensor *x = p->t[0], *y = p->t[1];
    switch (k) {
    case EW_SMOOTH_L1:
        TP_CHECK(p->a >= 0.0, TP_ERR_INVALID_ARG, "smooth_l1_loss does not support negative values for beta.");
        break;
    case EW_HUBER:
        TP_CHECK(p->a > 0.0, TP_ERR_INVALID_ARG, "huber_loss does not support non-positive values for delta.");
        break;
    case EW_BCE:
        TP_TRY(same_size(x, y,
                         "Using a target size (%s) that is different to the input size (%s) is deprecated. Please "
                         "ensure they have the same size."));
        break;
    case EW_BCE_LOGITS:
        TP_TRY(same_size(x, y, "Target size (%s) must be the same as input size (%s)"));
        break;
    case EW_GAUSSIAN_NLL:
        TP_CHECK(p->a >= 0.0, TP_ERR_INVALID_ARG, "eps must be non-negative, got %g", p->a);
        TP_TRY(gaussian_var(p));
        break;
    case EW_MARGIN_RANKING: {
        tp_tensor *x2 = p->t[1], *t = p->t[2];
        char a[256], b[256], c[256];
        TP_CHECK(x->ndim == x2->ndim && x->ndim == t->ndim, TP_ERR_SHAPE,
                 "margin_ranking_loss : All input tensors should have same dimension but got sizes: input1: %s, "
                 "input2: %s, target: %s ",
                 tp__shape_str(x->ndim, x->sizes, a, sizeof a), tp__shape_str(x2->ndim, x2->sizes, b, sizeof b),
                 tp__shape_str(t->ndim, t->sizes, c, sizeof c));
        break;
    }
    default: break;
    }
    /* the broadcast shape and the promoted dtype */
    p->ndim = 0;
    for (int i = 0; i < p->n; i++) {
        tp_sdim td[TP_MAX_DIMS];
        TP_TRY(tp__dims_broadcast(p->ndim, p->dims, tp__dims(p->t[i], td), td, &p->ndim, p->dims));
    }
    for (int i = 0; i < p->ndim; i++) p->sizes[i] = p->dims[i].v;
    tp_value vals[EW_MAX];
    const tp_value *pv[EW_MAX];
    for (int i = 0; i < p->n; i++) {
        vals[i] = tp_value_tensor(p->t[i]);
        pv[i] = &vals[i];
    }
    p->dtype = tp__result_type(pv, p->n);
    TP_CHECK(tp_dtype_is_float(p->dtype), TP_ERR_TYPE, "%s expects floating-point inputs, got %s", ew_name(k),
             tp_dtype_name(p->dtype));
    p->batch = x->ndim > 0 ? x->sizes[0] : 1;
    return TP_OK;
}

static tp_status ew_infer(const tp_value *args, tp_value *out, ew_kind k) {
    ew_plan p;
    tp_status st = ew_make(args, k, &p);
    if (st == TP_OK)
        st = tp__out_dims(out, p.dtype, p.red == RED_NONE ? p.ndim : 0, p.dims);
    ew_plan_free(&p);
    return st;
}

static double xlogy(double x, double y) {
    if (isnan(y)) return NAN;
    if (x == 0.0) return 0.0;
    return x * log(y);
}

/* One element. v[R_*] holds the operands (absent ones: NAN, has[] false). */
static tp_status ew_eval(ew_kind k, const ew_plan *p, const double *v, const bool *has, double *out) {
    double x = v[R_X], y = v[R_Y];
    switch (k) {
    case EW_MSE: *out = (x - y) * (x - y); break;
    case EW_L1: *out = fabs(x - y); break;
    case EW_SMOOTH_L1: {
        double d = fabs(x - y);
        *out = p->a == 0.0 ? d : d < p->a ? 0.5 * d * d / p->a : d - 0.5 * p->a;
        break;
    }
    case EW_HUBER: {
        double d = fabs(x - y);
        *out = d < p->a ? 0.5 * d * d : p->a * (d - 0.5 * p->a);
        break;
    }
    case EW_SOFT_MARGIN: *out = log1p(exp(-y * x)); break;
    case EW_BCE: {
        TP_CHECK(x >= 0.0 && x <= 1.0, TP_ERR_INVALID_ARG, "all elements of input should be between 0 and 1");
        double lx = fmax(log(x), -100.0), l1x = fmax(log1p(-x), -100.0);
        double l = -(y * lx + (1.0 - y) * l1x);
        *out = has[R_W] ? l * v[R_W] : l;
        break;
    }
    case EW_BCE_LOGITS: {
        double lw = has[R_Z] ? (v[R_Z] - 1.0) * y + 1.0 : 1.0;
        double l = (1.0 - y) * x + lw * (log1p(exp(-fabs(x))) + fmax(-x, 0.0));
        *out = has[R_W] ? l * v[R_W] : l;
        break;
    }
    case EW_KL_DIV: *out = p->f1 ? exp(y) * (y - x) : xlogy(y, y) - y * x; break;
    case EW_POISSON_NLL: {
        double l = p->f1 ? exp(x) - y * x : x - y * log(x + p->a);
        if (p->f2 && y > 1.0) l += y * log(y) - y + 0.5 * log(2.0 * M_PI * y);
        *out = l;
        break;
    }
    case EW_GAUSSIAN_NLL: {
        double var = v[R_Z];
        TP_CHECK(!(var < 0.0), TP_ERR_INVALID_ARG, "var has negative entry/entries");
        var = fmax(var, p->a);
        if (isnan(v[R_Z])) var = NAN;
        double l = 0.5 * (log(var) + (x - y) * (x - y) / var);
        if (p->f2) l += 0.5 * log(2.0 * M_PI);
        *out = l;
        break;
    }
    case EW_MARGIN_RANKING: *out = fmax(-y * (x - v[R_Z]) + p->a, 0.0); break;
    case EW_HINGE: {
        double m = fmax(p->a - x, 0.0);
        if (isnan(x)) m = NAN;
        *out = (y != 1.0 ? m : 0.0) + (y != -1.0 ? x : 0.0);
        break;
    }
    }
    return TP_OK;
}

static tp_status ew_kernel(const tp_value *args, tp_value *out, ew_kind k) {
    ew_plan p;
    tp_status st = ew_make(args, k, &p);
    tp_tensor *o = tp__out_at(out, 0);
    for (int i = 0; i < p.n && st == TP_OK; i++) st = tp__has_data(p.t[i], "input");
    if (st != TP_OK) goto done;
    const tp_tensor *ops[EW_MAX + 1];
    int n_ops = 0;
    if (p.red == RED_NONE) ops[n_ops++] = o;
    for (int i = 0; i < p.n; i++) ops[n_ops++] = p.t[i];
    int first = p.red == RED_NONE ? 1 : 0;
    tp_iter it;
    tp__iter_init(&it, p.ndim, p.sizes, n_ops, ops);
    double sum = 0.0;
    int64_t count = 0;
    while (tp__iter_next(&it)) {
        double v[EW_MAX] = {NAN, NAN, NAN, NAN}, l = 0.0;
        bool has[EW_MAX] = {false, false, false, false};
        for (int i = 0; i < p.n; i++) {
            v[p.role[i]] = load(it.ptr[first + i], p.t[i]->dtype);
            has[p.role[i]] = true;
        }
        if ((st = ew_eval(k, &p, v, has, &l)) != TP_OK) goto done;
        if (p.red == RED_NONE) tp__store_f64(it.ptr[0], o->dtype, l);
        sum += l;
        count++;
    }
    if (p.red != RED_NONE) {
        double r = sum;
        if (p.red == RED_MEAN) r = sum / (double)count;
        if (p.red == RED_BATCHMEAN) r = sum / (double)p.batch;
        tp__store_f64(tp__tensor_base(o), o->dtype, r);
    }
done:
    ew_plan_free(&p);
    return st;
}

#define EW_OP(name, kind)                                                                                              \
    static tp_status infer_##name(const tp_value *args, tp_value *out) { return ew_infer(args, out, kind); }          \
    static tp_status kernel_##name(const tp_value *args, tp_value *out) { return ew_kernel(args, out, kind); }

EW_OP(mse_loss, EW_MSE)
EW_OP(l1_loss, EW_L1)
EW_OP(smooth_l1_loss, EW_SMOOTH_L1)
EW_OP(huber_loss, EW_HUBER)
EW_OP(soft_margin_loss, EW_SOFT_MARGIN)
EW_OP(binary_cross_entropy, EW_BCE)
EW_OP(binary_cross_entropy_with_logits, EW_BCE_LOGITS)
EW_OP(kl_div, EW_KL_DIV)
EW_OP(poisson_nll_loss, EW_POISSON_NLL)
EW_OP(gaussian_nll_loss, EW_GAUSSIAN_NLL)
EW_OP(margin_ranking_loss, EW_MARGIN_RANKING)
EW_OP(hinge_embedding_loss, EW_HINGE)

/* ---- nll_loss / cross_entropy --------------------------------------------
 * input [C], [N, C] or [N, C, d1, ...]; class indices as int64 target of the
 * input's shape without the class dim (dim 1; dim 0 for 1-d input), or, for
 * cross_entropy, class probabilities of the input's own shape. An index
 * equal to ignore_index adds nothing (and no weight to the mean's
 * denominator). cross_entropy is log_softmax over the class dim followed by
 * nll_loss, with label_smoothing as PyTorch defines it: (1 - e) * nll +
 * (e / C) * the sum over classes of -w[c] * logp[c] (indices), or the
 * probabilities blended with the uniform e / C (probabilities). */

typedef struct cls_plan {
    tp_tensor *x, *t, *w;
    bool probs;
    int cdim;                 /* class dim of x */
    int64_t classes;
    int red;
    int64_t ignore;
    double eps;               /* label smoothing */
    int pnd;                  /* position dims: x's without the class dim */
    int64_t psizes[TP_MAX_DIMS];
    tp_sdim pdims[TP_MAX_DIMS]; /* psizes as dims (dim.h) */
    int64_t pxs[TP_MAX_DIMS]; /* x's strides along them */
} cls_plan;

static tp_status cls_make(const tp_value *args, bool ce, cls_plan *p) {
    memset(p, 0, sizeof *p);
    const char *name = ce ? "cross_entropy" : "nll_loss";
    TP_TRY(tp__need_tensor(args, 0, "self", &p->x));
    TP_TRY(tp__need_tensor(args, 1, "target", &p->t));
    if (!tp__arg_is_none(args, 2)) TP_TRY(tp__need_tensor(args, 2, "weight", &p->w));
    TP_TRY(reduction_of(&args[3], false, &p->red));
    p->ignore = tp__arg_int(args, 4);
    p->eps = ce ? tp__arg_f64(args, 5) : 0.0;
    tp_tensor *x = p->x, *t = p->t;
    TP_CHECK(tp_dtype_is_float(x->dtype), TP_ERR_TYPE, "%s expects a floating-point input, got %s", name,
             tp_dtype_name(x->dtype));
    TP_CHECK(x->ndim >= 1, TP_ERR_SHAPE, "%s expects an input of at least 1 dim (classes), got a 0-d one", name);
    TP_CHECK(p->eps >= 0.0 && p->eps <= 1.0, TP_ERR_INVALID_ARG,
             "label_smoothing must be between 0.0 and 1.0. Got: %f", p->eps);
    p->cdim = x->ndim == 1 ? 0 : 1;
    p->classes = x->sizes[p->cdim];
    char a[256], b[256];
    p->probs = ce && tp_dtype_is_float(t->dtype);
    if (p->probs) {
        TP_CHECK(t->ndim == x->ndim && dims_eq(t, x, x->ndim, "probabilities target shaped like the input"),
                 TP_ERR_SHAPE, "class probabilities target of shape %s must have the input's shape %s",
                 tp__shape_str(t->ndim, t->sizes, a, sizeof a), tp__shape_str(x->ndim, x->sizes, b, sizeof b));
    } else {
        TP_CHECK(t->dtype == TP_INT64, TP_ERR_TYPE, "expected scalar type Long but found %s",
                 tp_dtype_name(t->dtype));
        TP_CHECK(t->ndim == x->ndim - 1, TP_ERR_SHAPE, "%s: expected a target of %d dims for input of shape %s, got %s",
                 name, x->ndim - 1, tp__shape_str(x->ndim, x->sizes, a, sizeof a),
                 tp__shape_str(t->ndim, t->sizes, b, sizeof b));
        if (x->ndim >= 2)
            TP_CHECK(tp__dim_eq(tp__dim(t, 0), tp__dim(x, 0), "target batch == input batch"), TP_ERR_SHAPE,
                     "Expected input batch_size (%" PRId64 ") to match target batch_size (%" PRId64 ").", x->sizes[0],
                     t->sizes[0]);
        for (int d = 1; d < t->ndim; d++)
            TP_CHECK(tp__dim_eq(tp__dim(t, d), tp__dim(x, d + 1), "target dims == input's position dims"), TP_ERR_SHAPE,
                     "%s: target shape %s does not match input shape %s", name,
                     tp__shape_str(t->ndim, t->sizes, a, sizeof a), tp__shape_str(x->ndim, x->sizes, b, sizeof b));
    }
    if (p->w) {
        TP_CHECK(tp_dtype_is_float(p->w->dtype), TP_ERR_TYPE, "weight must be floating point, got %s",
                 tp_dtype_name(p->w->dtype));
        TP_CHECK(p->w->ndim == 1 && tp__dim_eq(tp__dim(p->w, 0), tp__dim(x, p->cdim), "weight size == classes"),
                 TP_ERR_SHAPE,
                 "weight tensor should be defined either for all %" PRId64
                 " classes or no classes but got weight tensor of shape: %s",
                 p->classes, tp__shape_str(p->w->ndim, p->w->sizes, a, sizeof a));
    }
    for (int d = 0; d < x->ndim; d++) {
        if (d == p->cdim) continue;
        p->pdims[p->pnd] = tp__dim(x, d);
        p->psizes[p->pnd] = x->sizes[d];
        p->pxs[p->pnd] = x->strides[d];
        p->pnd++;
    }
    return TP_OK;
}

static tp_status cls_infer(const tp_value *args, tp_value *out, bool ce) {
    cls_plan p;
    TP_TRY(cls_make(args, ce, &p));
    return tp__out_dims(out, p.x->dtype, p.red == RED_NONE ? p.pnd : 0, p.pdims);
}

static tp_status cls_kernel(const tp_value *args, tp_value *out, bool ce) {
    cls_plan p;
    TP_TRY(cls_make(args, ce, &p));
    tp_tensor *x = p.x, *t = p.t, *o = tp__out_at(out, 0);
    TP_TRY(tp__has_data(x, "self"));
    TP_TRY(tp__has_data(t, "target"));
    int64_t C = p.classes, cxs = x->strides[p.cdim];
    int64_t cts = p.probs ? t->strides[p.cdim] : 0;
    double *w = NULL, *lp = NULL;
    size_t n = (size_t)(C > 0 ? C : 1);
    w = tp_malloc(n * sizeof *w);
    lp = tp_malloc(n * sizeof *lp);
    if (!w || !lp) {
        tp_free(w);
        tp_free(lp);
        return tp_error(TP_ERR_NOMEM, "out of memory (%" PRId64 " classes)", C);
    }
    const char *wb = p.w ? tp__tensor_base(p.w) : NULL;
    for (int64_t c = 0; c < C; c++)
        w[c] = p.w ? load(wb + c * p.w->strides[0] * (int64_t)tp_dtype_size(p.w->dtype), p.w->dtype) : 1.0;
    const char *xb = tp__tensor_base(x), *tb = tp__tensor_base(t);
    char *ob = tp__tensor_base(o);
    size_t xes = tp_dtype_size(x->dtype), tes = tp_dtype_size(t->dtype), oes = tp_dtype_size(o->dtype);
    int64_t idx[TP_MAX_DIMS] = {0}, total = 1;
    for (int d = 0; d < p.pnd; d++) total *= p.psizes[d];
    double s_nll = 0.0, s_smooth = 0.0, denom = 0.0;
    tp_status st = TP_OK;
    for (int64_t k = 0; k < total; k++) {
        int64_t xo = 0, to = 0, oo = 0;
        for (int d = 0; d < p.pnd; d++) {
            xo += idx[d] * p.pxs[d];
            /* target: index targets have the position dims; probability targets the input's dims */
            int td = p.probs ? (d < p.cdim ? d : d + 1) : d;
            to += idx[d] * t->strides[td];
            if (p.red == RED_NONE) oo += idx[d] * o->strides[d];
        }
        double l_nll = 0.0, l_smooth = 0.0;
        bool counted = true;
        if (ce) {
            double m = -INFINITY;
            for (int64_t c = 0; c < C; c++) {
                lp[c] = load(xb + (xo + c * cxs) * (int64_t)xes, x->dtype);
                if (lp[c] > m || isnan(lp[c])) m = isnan(m) ? m : lp[c];
            }
            double sum = 0.0;
            for (int64_t c = 0; c < C; c++) sum += exp(lp[c] - m);
            double lse = m + log(sum);
            for (int64_t c = 0; c < C; c++) lp[c] -= lse;
        }
        if (p.probs) {
            for (int64_t c = 0; c < C; c++) {
                double y = load(tb + (to + c * cts) * (int64_t)tes, t->dtype);
                y = y * (1.0 - p.eps) + p.eps / (double)C;
                l_nll -= w[c] * y * lp[c];
            }
        } else {
            int64_t cls = tp__load_i64(tb + to * (int64_t)tes, TP_INT64);
            if (cls == p.ignore) {
                counted = false;
            } else {
                if (cls < 0 || cls >= C) {
                    st = tp_error(TP_ERR_INDEX, "Target %" PRId64 " is out of bounds.", cls);
                    goto done;
                }
                double v = ce ? lp[cls] : load(xb + (xo + cls * cxs) * (int64_t)xes, x->dtype);
                l_nll = -w[cls] * v;
                denom += w[cls];
                if (ce && p.eps > 0.0)
                    for (int64_t c = 0; c < C; c++) l_smooth -= w[c] * lp[c];
            }
        }
        if (!counted) l_nll = l_smooth = 0.0;
        double l = p.probs ? l_nll : (1.0 - p.eps) * l_nll + (p.eps > 0.0 ? p.eps / (double)C * l_smooth : 0.0);
        if (p.red == RED_NONE) tp__store_f64(ob + oo * (int64_t)oes, o->dtype, l);
        s_nll += l_nll;
        s_smooth += l_smooth;
        for (int d = p.pnd - 1; d >= 0; d--) {
            if (++idx[d] < p.psizes[d]) break;
            idx[d] = 0;
        }
    }
    if (p.red != RED_NONE) {
        double r;
        if (p.probs) {
            r = p.red == RED_MEAN ? s_nll / (double)total : s_nll;
        } else {
            double sm = p.eps > 0.0 ? p.eps / (double)C * s_smooth : 0.0;
            r = (1.0 - p.eps) * s_nll + sm;
            if (p.red == RED_MEAN) r = r / denom;
        }
        tp__store_f64(ob, o->dtype, r);
    }
done:
    tp_free(w);
    tp_free(lp);
    return st;
}

static tp_status infer_nll_loss(const tp_value *args, tp_value *out) { return cls_infer(args, out, false); }
static tp_status kernel_nll_loss(const tp_value *args, tp_value *out) { return cls_kernel(args, out, false); }
static tp_status infer_cross_entropy(const tp_value *args, tp_value *out) { return cls_infer(args, out, true); }
static tp_status kernel_cross_entropy(const tp_value *args, tp_value *out) { return cls_kernel(args, out, true); }

/* ---- cosine_similarity, pairwise_distance, cosine_embedding_loss ----------
 * Reductions along one dim of two broadcast operands:
 *   cosine_similarity(x1, x2, dim, eps) = sum(x1 * x2) / (max(|x1|, eps) * max(|x2|, eps))
 *   pairwise_distance(x1, x2, p, eps, keepdim) = ||x1 - x2 + eps||_p along the last dim
 *   cosine_embedding_loss(x1, x2, target, margin): cos = sum(x1 * x2) /
 *       sqrt((|x1|^2 + 1e-12) * (|x2|^2 + 1e-12)) along the last dim; 1 - cos where
 *       target is 1, max(cos - margin, 0) where it is -1, else 0. */

typedef struct pair_plan {
    tp_tensor *a, *b;
    int nd, dim;
    int64_t sizes[TP_MAX_DIMS];
    tp_sdim dims[TP_MAX_DIMS]; /* sizes as dims (dim.h) */
    int64_t sa[TP_MAX_DIMS], sb[TP_MAX_DIMS]; /* broadcast strides */
    tp_dtype dtype;
} pair_plan;

static tp_status pair_make(const tp_value *args, int64_t dim, bool last, pair_plan *p, const char *name) {
    memset(p, 0, sizeof *p);
    TP_TRY(tp__need_tensor(args, 0, "x1", &p->a));
    TP_TRY(tp__need_tensor(args, 1, "x2", &p->b));
    tp_sdim bd[TP_MAX_DIMS];
    tp__dims(p->a, p->dims);
    TP_TRY(tp__dims_broadcast(p->a->ndim, p->dims, tp__dims(p->b, bd), bd, &p->nd, p->dims));
    for (int d = 0; d < p->nd; d++) p->sizes[d] = p->dims[d].v;
    tp_value va = tp_value_tensor(p->a), vb = tp_value_tensor(p->b);
    p->dtype = tp__result_type((const tp_value *[]){&va, &vb}, 2);
    TP_CHECK(tp_dtype_is_float(p->dtype), TP_ERR_TYPE, "%s expects floating-point inputs, got %s", name,
             tp_dtype_name(p->dtype));
    if (last) {
        p->dim = p->nd > 0 ? p->nd - 1 : 0;
    } else {
        TP_TRY(tp__wrap_dim(dim, p->nd, &p->dim));
    }
    tp__broadcast_strides(p->a, p->a->ndim, p->nd, p->sizes, p->sa);
    tp__broadcast_strides(p->b, p->b->ndim, p->nd, p->sizes, p->sb);
    return TP_OK;
}

/* Output dims: the broadcast shape without dim (kept as 1 with keepdim). */
static int pair_out_shape(const pair_plan *p, bool keepdim, tp_sdim *sizes) {
    int n = 0;
    for (int d = 0; d < p->nd; d++) {
        if (d == p->dim) {
            if (keepdim) sizes[n++] = tp__dimk(1);
            continue;
        }
        sizes[n++] = p->dims[d];
    }
    return n;
}

typedef enum { PAIR_COSINE, PAIR_DISTANCE, PAIR_EMBEDDING } pair_kind;

/* Sums along dim of one position (a and b offsets in elements). */
typedef struct pair_acc {
    double dot, na, nb, dist;
} pair_acc;

static void pair_row(const pair_plan *p, int64_t oa, int64_t ob, pair_kind k, double pn, double eps, pair_acc *acc) {
    const char *ab = tp__tensor_base(p->a), *bb = tp__tensor_base(p->b);
    size_t ea = tp_dtype_size(p->a->dtype), eb = tp_dtype_size(p->b->dtype);
    int64_t len = p->nd > 0 ? p->sizes[p->dim] : 1, da = p->nd > 0 ? p->sa[p->dim] : 0,
            db = p->nd > 0 ? p->sb[p->dim] : 0;
    memset(acc, 0, sizeof *acc);
    double mx = 0.0;
    for (int64_t i = 0; i < len; i++) {
        double x = load(ab + (oa + i * da) * (int64_t)ea, p->a->dtype);
        double y = load(bb + (ob + i * db) * (int64_t)eb, p->b->dtype);
        if (k == PAIR_DISTANCE) {
            double d = fabs(x - y + eps);
            if (isnan(d)) mx = NAN;
            else if (d > mx) mx = isnan(mx) ? mx : d;
            if (pn == 0.0) acc->dist += d != 0.0;
            else if (pn == 1.0) acc->dist += d;
            else if (pn == 2.0) acc->dist += d * d;
            else if (!isinf(pn)) acc->dist += pow(d, pn);
        } else {
            acc->dot += x * y;
            acc->na += x * x;
            acc->nb += y * y;
        }
    }
    if (k == PAIR_DISTANCE) {
        if (isinf(pn)) acc->dist = mx;
        else if (pn == 2.0) acc->dist = sqrt(acc->dist);
        else if (pn != 0.0 && pn != 1.0) acc->dist = pow(acc->dist, 1.0 / pn);
    }
}

/* The positions (every index of the broadcast shape but dim) in C order. */
typedef struct pos_iter {
    int64_t idx[TP_MAX_DIMS];
    int64_t left;
    bool started;
} pos_iter;

static void pos_init(pos_iter *it, const pair_plan *p) {
    memset(it, 0, sizeof *it);
    it->left = 1;
    for (int d = 0; d < p->nd; d++)
        if (d != p->dim) it->left *= p->sizes[d];
}

static bool pos_next(pos_iter *it, const pair_plan *p, int64_t *oa, int64_t *ob) {
    if (it->left <= 0) return false;
    it->left--;
    if (it->started) {
        for (int d = p->nd - 1; d >= 0; d--) {
            if (d == p->dim) continue;
            if (++it->idx[d] < p->sizes[d]) break;
            it->idx[d] = 0;
        }
    }
    it->started = true;
    *oa = *ob = 0;
    for (int d = 0; d < p->nd; d++) {
        *oa += it->idx[d] * p->sa[d];
        *ob += it->idx[d] * p->sb[d];
    }
    return true;
}

/* cosine_similarity(Tensor x1, Tensor x2, int dim=1, float eps=1e-08) */
static tp_status infer_cosine_similarity(const tp_value *args, tp_value *out) {
    pair_plan p;
    TP_TRY(pair_make(args, tp__arg_int(args, 2), false, &p, "cosine_similarity"));
    tp_sdim sizes[TP_MAX_DIMS];
    int n = pair_out_shape(&p, false, sizes);
    return tp__out_dims(out, p.dtype, n, sizes);
}

static tp_status kernel_cosine_similarity(const tp_value *args, tp_value *out) {
    pair_plan p;
    TP_TRY(pair_make(args, tp__arg_int(args, 2), false, &p, "cosine_similarity"));
    TP_TRY(tp__has_data(p.a, "x1"));
    TP_TRY(tp__has_data(p.b, "x2"));
    double eps = tp__arg_f64(args, 3);
    tp_tensor *o = tp__out_at(out, 0);
    char *obase = tp__tensor_base(o);
    size_t oes = tp_dtype_size(o->dtype);
    pos_iter it;
    int64_t oa, ob;
    pos_init(&it, &p);
    while (pos_next(&it, &p, &oa, &ob)) {
        pair_acc acc;
        pair_row(&p, oa, ob, PAIR_COSINE, 0.0, 0.0, &acc);
        double n1 = fmax(sqrt(acc.na), eps), n2 = fmax(sqrt(acc.nb), eps);
        int64_t oo = 0;
        for (int d = 0, kk = 0; d < p.nd; d++)
            if (d != p.dim) oo += it.idx[d] * o->strides[kk++];
        tp__store_f64(obase + oo * (int64_t)oes, o->dtype, acc.dot / (n1 * n2));
    }
    return TP_OK;
}

/* pairwise_distance(Tensor x1, Tensor x2, float p=2.0, float eps=1e-06, bool keepdim=False) */
static tp_status infer_pairwise_distance(const tp_value *args, tp_value *out) {
    pair_plan p;
    TP_TRY(pair_make(args, 0, true, &p, "pairwise_distance"));
    TP_CHECK(tp__arg_f64(args, 2) >= 0.0, TP_ERR_INVALID_ARG, "pairwise_distance only supports non-negative p, got %g",
             tp__arg_f64(args, 2));
    tp_sdim sizes[TP_MAX_DIMS];
    int n = pair_out_shape(&p, tp__arg_bool(args, 4) && p.nd > 0, sizes);
    return tp__out_dims(out, p.dtype, n, sizes);
}

static tp_status kernel_pairwise_distance(const tp_value *args, tp_value *out) {
    pair_plan p;
    TP_TRY(pair_make(args, 0, true, &p, "pairwise_distance"));
    TP_TRY(tp__has_data(p.a, "x1"));
    TP_TRY(tp__has_data(p.b, "x2"));
    double pn = tp__arg_f64(args, 2), eps = tp__arg_f64(args, 3);
    bool keep = tp__arg_bool(args, 4) && p.nd > 0;
    tp_tensor *o = tp__out_at(out, 0);
    char *obase = tp__tensor_base(o);
    size_t oes = tp_dtype_size(o->dtype);
    pos_iter it;
    int64_t oa, ob;
    pos_init(&it, &p);
    while (pos_next(&it, &p, &oa, &ob)) {
        pair_acc acc;
        pair_row(&p, oa, ob, PAIR_DISTANCE, pn, eps, &acc);
        int64_t oo = 0;
        for (int d = 0, kk = 0; d < p.nd; d++) {
            if (d == p.dim) {
                if (keep) kk++;
                continue;
            }
            oo += it.idx[d] * o->strides[kk++];
        }
        tp__store_f64(obase + oo * (int64_t)oes, o->dtype, acc.dist);
    }
    return TP_OK;
}

/* cosine_embedding_loss(Tensor input1, Tensor input2, Tensor target, float margin=0.0, int reduction=1) */
static tp_status embedding_loss_make(const tp_value *args, pair_plan *p, tp_tensor **t, int *red) {
    TP_TRY(pair_make(args, 0, true, p, "cosine_embedding_loss"));
    TP_TRY(tp__need_tensor(args, 2, "target", t));
    TP_TRY(reduction_of(&args[4], false, red));
    const tp_tensor *a = p->a, *b = p->b;
    char sa[256], sb[256];
    tp__shape_str(a->ndim, a->sizes, sa, sizeof sa);
    tp__shape_str(b->ndim, b->sizes, sb, sizeof sb);
    TP_CHECK((*t)->ndim <= 1, TP_ERR_SHAPE, "0D or 1D target tensor expected, multi-target not supported");
    if ((*t)->ndim == 1)
        TP_CHECK(a->ndim == 2 && b->ndim == 2, TP_ERR_SHAPE,
                 "1D target tensor expects 2D input tensors, but found inputs with sizes %s and %s.", sa, sb);
    else
        TP_CHECK(a->ndim == 1 && b->ndim == 1, TP_ERR_SHAPE,
                 "0D target tensor expects 1D input tensors, but found inputs with sizes %s and %s.", sa, sb);
    TP_CHECK(a->ndim == b->ndim && dims_eq(a, b, a->ndim, "cosine_embedding_loss: input1 shaped like input2"),
             TP_ERR_SHAPE, "cosine_embedding_loss: input1 of size %s and input2 of size %s must have the same size", sa,
             sb);
    TP_CHECK((*t)->ndim == 0 || tp__dim_eq(tp__dim(*t, 0), tp__dim(a, 0), "cosine_embedding_loss: target batch"),
             TP_ERR_SHAPE,
             "The size of tensor a (%" PRId64 ") must match the size of tensor b (%" PRId64 ") at non-singleton "
             "dimension 0",
             (*t)->sizes[0], a->sizes[0]);
    return TP_OK;
}

static tp_status infer_cosine_embedding_loss(const tp_value *args, tp_value *out) {
    pair_plan p;
    tp_tensor *t;
    int red;
    TP_TRY(embedding_loss_make(args, &p, &t, &red));
    if (red != RED_NONE) return tp__out_dims(out, p.dtype, 0, NULL);
    return tp__out_like(out, p.dtype, t);
}

static tp_status kernel_cosine_embedding_loss(const tp_value *args, tp_value *out) {
    pair_plan p;
    tp_tensor *t;
    int red;
    TP_TRY(embedding_loss_make(args, &p, &t, &red));
    TP_TRY(tp__has_data(p.a, "input1"));
    TP_TRY(tp__has_data(p.b, "input2"));
    TP_TRY(tp__has_data(t, "target"));
    double margin = tp__arg_f64(args, 3), sum = 0.0;
    int64_t count = 0;
    tp_tensor *o = tp__out_at(out, 0);
    char *obase = tp__tensor_base(o);
    const char *tb = tp__tensor_base(t);
    size_t oes = tp_dtype_size(o->dtype), tes = tp_dtype_size(t->dtype);
    pos_iter it;
    int64_t oa, ob;
    pos_init(&it, &p);
    while (pos_next(&it, &p, &oa, &ob)) {
        pair_acc acc;
        pair_row(&p, oa, ob, PAIR_EMBEDDING, 0.0, 0.0, &acc);
        double cs = acc.dot / sqrt((acc.na + 1e-12) * (acc.nb + 1e-12));
        int64_t row = t->ndim ? it.idx[0] : 0;
        double y = load(tb + row * (t->ndim ? t->strides[0] : 0) * (int64_t)tes, t->dtype);
        double l = (y == 1.0 ? 1.0 - cs : 0.0) + (y == -1.0 ? fmax(cs - margin, 0.0) : 0.0);
        if (y == -1.0 && isnan(cs)) l = NAN;
        if (red == RED_NONE) tp__store_f64(obase + row * (o->ndim ? o->strides[0] : 0) * (int64_t)oes, o->dtype, l);
        sum += l;
        count++;
    }
    if (red != RED_NONE) tp__store_f64(obase, o->dtype, red == RED_MEAN ? sum / (double)count : sum);
    return TP_OK;
}

/* ---- dist(Tensor self, Tensor other, Scalar p=2): the p-norm of self - other
 * (broadcast) as a 0-d tensor: p = 0 counts the nonzero differences, +-inf takes
 * the largest (smallest) |difference|. Floating inputs (the promoted dtype). */
static tp_status dist_make(const tp_value *args, tp_tensor **a, tp_tensor **b, int *nd, int64_t *sizes,
                           tp_dtype *dt) {
    TP_TRY(tp__need_tensor(args, 0, "self", a));
    TP_TRY(tp__need_tensor(args, 1, "other", b));
    tp_sdim da[TP_MAX_DIMS], db[TP_MAX_DIMS];
    tp__dims(*a, da);
    TP_TRY(tp__dims_broadcast((*a)->ndim, da, tp__dims(*b, db), db, nd, da));
    for (int d = 0; d < *nd; d++) sizes[d] = da[d].v;
    tp_value va = tp_value_tensor(*a), vb = tp_value_tensor(*b);
    *dt = tp__result_type((const tp_value *[]){&va, &vb}, 2);
    TP_CHECK(tp_dtype_is_float(*dt), TP_ERR_TYPE,
             "norm(): input dtype should be either floating point or complex. Got %s instead.",
             *dt == TP_INT64 ? "Long" : tp_dtype_name(*dt));
    return TP_OK;
}

static tp_status infer_dist(const tp_value *args, tp_value *out) {
    tp_tensor *a, *b;
    int nd;
    int64_t sizes[TP_MAX_DIMS];
    tp_dtype dt;
    TP_TRY(dist_make(args, &a, &b, &nd, sizes, &dt));
    return tp__out_dims(out, dt, 0, NULL);
}

static tp_status kernel_dist(const tp_value *args, tp_value *out) {
    tp_tensor *a, *b;
    int nd;
    int64_t sizes[TP_MAX_DIMS];
    tp_dtype dt;
    TP_TRY(dist_make(args, &a, &b, &nd, sizes, &dt));
    double p = tp__arg_f64(args, 2), acc = isinf(p) && p < 0 ? INFINITY : 0.0;
    bool any = false;
    tp_iter it;
    tp__iter_init(&it, nd, sizes, 2, (const tp_tensor *[]){a, b});
    while (tp__iter_next(&it)) {
        double d = fabs(load(it.ptr[0], a->dtype) - load(it.ptr[1], b->dtype));
        any = true;
        if (isnan(d)) acc = NAN;
        else if (isnan(acc)) continue;
        else if (isinf(p)) acc = p > 0 ? fmax(acc, d) : fmin(acc, d);
        else if (p == 0.0) acc += d != 0.0;
        else if (p == 1.0) acc += d;
        else if (p == 2.0) acc += d * d;
        else acc += pow(d, p);
    }
    if (!any && isinf(p)) acc = p > 0 ? 0.0 : INFINITY;
    if (!isinf(p) && !isnan(acc)) {
        if (p == 2.0) acc = sqrt(acc);
        else if (p != 0.0 && p != 1.0) acc = pow(acc, 1.0 / p);
    }
    tp_tensor *o = tp__out_at(out, 0);
    tp__store_f64(tp__tensor_base(o), o->dtype, acc);
    return TP_OK;
}

/* ---- triplet_margin_loss, multilabel_soft_margin_loss, multi_margin_loss,
 * multilabel_margin_loss ------------------------------------------------------
 * reduction: 'none' | 'mean' | 'sum' or the ATen int (the schemas take Any:
 * nn.functional passes the string, tensorplay.functional the int). */

static tp_status reduce_store(tp_tensor *o, int red, const double *vals, int64_t n) {
    char *ob = tp__tensor_base(o);
    size_t oes = tp_dtype_size(o->dtype);
    if (red == RED_NONE) {
        for (int64_t i = 0; i < n; i++) tp__store_f64(ob + (size_t)i * oes, o->dtype, vals[i]);
        return TP_OK;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += vals[i];
    tp__store_f64(ob, o->dtype, red == RED_MEAN ? sum / (double)n : sum);
    return TP_OK;
}

static tp_status loss_scratch(int64_t n, double **out) {
    *out = tp_calloc((size_t)(n > 0 ? n : 1), sizeof **out);
    TP_CHECK(*out, TP_ERR_NOMEM, "out of memory (%" PRId64 " loss values)", n);
    return TP_OK;
}

/* triplet_margin_loss(Tensor anchor, Tensor positive, Tensor negative, float margin=1.0, float p=2,
 *                     float eps=1e-06, bool swap=False, Any reduction='mean'):
 * max(margin + d(a, p) - d(a, n), 0) with d pairwise_distance's ||x - y + eps||_p along the last dim
 * (swap: d(a, n) replaced by min(d(a, n), d(p, n))). The three inputs have one shape. */
static tp_status triplet_make(const tp_value *args, pair_plan *ap, pair_plan *an, pair_plan *pn, int *red) {
    tp_tensor *a, *p, *n;
    TP_TRY(tp__need_tensor(args, 0, "anchor", &a));
    TP_TRY(tp__need_tensor(args, 1, "positive", &p));
    TP_TRY(tp__need_tensor(args, 2, "negative", &n));
    TP_TRY(reduction_of(&args[7], false, red));
    TP_CHECK(a->ndim == p->ndim && a->ndim == n->ndim, TP_ERR_SHAPE,
             "All inputs should have same dimension but got %dD, %dD and %dD inputs.", a->ndim, p->ndim, n->ndim);
    char sa[128], sp[128], sn[128];
    TP_CHECK(dims_eq(a, p, a->ndim, "triplet inputs share their shape") &&
                 dims_eq(a, n, a->ndim, "triplet inputs share their shape"),
             TP_ERR_SHAPE, "triplet_margin_loss: anchor %s, positive %s and negative %s must have the same shape",
             tp__shape_str(a->ndim, a->sizes, sa, sizeof sa), tp__shape_str(p->ndim, p->sizes, sp, sizeof sp),
             tp__shape_str(n->ndim, n->sizes, sn, sizeof sn));
    TP_CHECK(a->ndim >= 1, TP_ERR_SHAPE, "triplet_margin_loss: inputs must have at least one dim");
    TP_CHECK(tp__arg_f64(args, 4) >= 0.0, TP_ERR_INVALID_ARG, "pairwise_distance only supports non-negative p, got %g",
             tp__arg_f64(args, 4));
    tp_value v[3] = {args[0], args[1], args[2]};
    TP_TRY(pair_make((tp_value[]){v[0], v[1]}, 0, true, ap, "triplet_margin_loss"));
    TP_TRY(pair_make((tp_value[]){v[0], v[2]}, 0, true, an, "triplet_margin_loss"));
    TP_TRY(pair_make((tp_value[]){v[1], v[2]}, 0, true, pn, "triplet_margin_loss"));
    TP_CHECK(ap->dtype == an->dtype && ap->dtype == pn->dtype, TP_ERR_TYPE,
             "triplet_margin_loss: anchor, positive and negative must have one dtype");
    return TP_OK;
}

static tp_status infer_triplet_margin_loss(const tp_value *args, tp_value *out) {
    pair_plan ap, an, pn;
    int red;
    TP_TRY(triplet_make(args, &ap, &an, &pn, &red));
    tp_sdim sizes[TP_MAX_DIMS];
    int nd = pair_out_shape(&ap, false, sizes);
    return tp__out_dims(out, ap.dtype, red != RED_NONE ? 0 : nd, sizes);
}

static tp_status kernel_triplet_margin_loss(const tp_value *args, tp_value *out) {
    pair_plan ap, an, pn;
    int red;
    TP_TRY(triplet_make(args, &ap, &an, &pn, &red));
    double margin = tp__arg_f64(args, 3), p = tp__arg_f64(args, 4), eps = tp__arg_f64(args, 5);
    bool swap = tp__arg_bool(args, 6);
    pos_iter i1, i2, i3;
    pos_init(&i1, &ap);
    pos_init(&i2, &an);
    pos_init(&i3, &pn);
    double *vals;
    TP_TRY(loss_scratch(i1.left, &vals));
    int64_t k = 0, oa, ob, oc, od, oe, of;
    while (pos_next(&i1, &ap, &oa, &ob) && pos_next(&i2, &an, &oc, &od) && pos_next(&i3, &pn, &oe, &of)) {
        pair_acc dp, dn, ds;
        pair_row(&ap, oa, ob, PAIR_DISTANCE, p, eps, &dp);
        pair_row(&an, oc, od, PAIR_DISTANCE, p, eps, &dn);
        double neg = dn.dist;
        if (swap) {
            pair_row(&pn, oe, of, PAIR_DISTANCE, p, eps, &ds);
            neg = fmin(neg, ds.dist);
            if (isnan(ds.dist)) neg = NAN;
        }
        double l = margin + dp.dist - neg;
        vals[k++] = l > 0.0 || isnan(l) ? l : 0.0;
    }
    tp_status st = reduce_store(tp__out_at(out, 0), red, vals, k);
    tp_free(vals);
    return st;
}

/* An (N, C) or (C) input and its class count: PyTorch's check. */
static tp_status margin_input(const tp_tensor *x, const char *kernel, int64_t *n, int64_t *c) {
    char s1[128];
    TP_CHECK(tp_dtype_is_float(x->dtype), TP_ERR_TYPE, "\"%s\" not implemented for '%s'", kernel,
             tp_dtype_name(x->dtype));
    TP_CHECK((x->ndim == 1 || x->ndim == 2) && tp__dim_ge(tp__dim(x, x->ndim - 1), 1, "non-empty classes"), TP_ERR_SHAPE,
             "Expected non-empty vector or matrix with optional 0-dim batch size, but got: %s",
             tp__shape_str(x->ndim, x->sizes, s1, sizeof s1));
    *n = x->ndim == 2 ? x->sizes[0] : 1;
    *c = x->sizes[x->ndim - 1];
    return TP_OK;
}

/* Element (row, col) of a 1-d or 2-d tensor as a double / int64. */
static double at2(const tp_tensor *t, int64_t row, int64_t col) {
    int64_t off = t->ndim == 2 ? row * t->strides[0] + col * t->strides[1] : t->ndim == 1 ? col * t->strides[0] : 0;
    return load((const char *)tp__tensor_base(t) + off * (int64_t)tp_dtype_size(t->dtype), t->dtype);
}

static int64_t at2_i64(const tp_tensor *t, int64_t row, int64_t col) {
    int64_t off = t->ndim == 2 ? row * t->strides[0] + col * t->strides[1] : t->ndim == 1 ? col * t->strides[0] : 0;
    return tp__load_i64((const char *)tp__tensor_base(t) + off * 8, TP_INT64);
}

/* multi_margin_loss(Tensor self, Tensor target, Scalar p=1, Scalar margin=1, Tensor? weight=None,
 *                   Any reduction='mean'): per row, sum over i != y of
 * w[y] * max(0, margin - x[y] + x[i])^p / C. */
static tp_status multi_margin_make(const tp_value *args, tp_tensor **x, tp_tensor **t, tp_tensor **w, int *red,
                                   int64_t *n, int64_t *c) {
    TP_TRY(tp__need_tensor(args, 0, "self", x));
    TP_TRY(tp__need_tensor(args, 1, "target", t));
    *w = tp__arg_is_none(args, 4) ? NULL : tp__arg_tensor(args, 4);
    TP_CHECK(tp__arg_is_none(args, 4) || *w, TP_ERR_TYPE, "weight must be a Tensor or None");
    TP_TRY(reduction_of(&args[5], false, red));
    double p = tp__arg_f64(args, 2);
    TP_CHECK(p == 1.0 || p == 2.0, TP_ERR_INVALID_ARG, "only p == 1 and p == 2 supported");
    TP_TRY(margin_input(*x, "multi_margin_loss_cpu_kernel", n, c));
    char s1[128];
    TP_CHECK((*t)->dtype == TP_INT64, TP_ERR_TYPE, "expected scalar type Long but found %s",
             tp_dtype_name((*t)->dtype));
    tp_sdim rows = (*x)->ndim == 2 ? tp__dim(*x, 0) : tp__dimk(1), classes = tp__dim(*x, (*x)->ndim - 1);
    TP_CHECK(((*t)->ndim <= 1 &&
              tp__dim_eq((*t)->ndim == 1 ? tp__dim(*t, 0) : tp__dimk(1), rows, "target size == input rows")) &&
                 ((*x)->ndim == 2 || (*t)->ndim == 0 || *n == 1),
             TP_ERR_SHAPE, "inconsistent target size, got: %s", tp__shape_str((*t)->ndim, (*t)->sizes, s1, sizeof s1));
    if (*w) {
        TP_CHECK((*w)->dtype == (*x)->dtype, TP_ERR_TYPE, "expected weight to have dtype %s, got %s",
                 tp_dtype_name((*x)->dtype), tp_dtype_name((*w)->dtype));
        TP_CHECK((*w)->ndim <= 1 &&
                     tp__dim_eq((*w)->ndim == 1 ? tp__dim(*w, 0) : tp__dimk(1), classes, "weight size == classes"),
                 TP_ERR_SHAPE,
                 "inconsistent weight size, expected %" PRId64 " but got %s", *c,
                 tp__shape_str((*w)->ndim, (*w)->sizes, s1, sizeof s1));
    }
    return TP_OK;
}

static tp_status infer_multi_margin_loss(const tp_value *args, tp_value *out) {
    tp_tensor *x, *t, *w;
    int red;
    int64_t n, c;
    TP_TRY(multi_margin_make(args, &x, &t, &w, &red, &n, &c));
    tp_sdim rows = tp__dim(x, 0);
    return tp__out_dims(out, x->dtype, red != RED_NONE || x->ndim == 1 ? 0 : 1, &rows);
}

static tp_status kernel_multi_margin_loss(const tp_value *args, tp_value *out) {
    tp_tensor *x, *t, *w;
    int red;
    int64_t n, c;
    TP_TRY(multi_margin_make(args, &x, &t, &w, &red, &n, &c));
    double p = tp__arg_f64(args, 2), margin = tp__arg_f64(args, 3);
    double *vals;
    TP_TRY(loss_scratch(n, &vals));
    tp_status st = TP_OK;
    for (int64_t r = 0; r < n && st == TP_OK; r++) {
        int64_t y = t->ndim == 0 ? at2_i64(t, 0, 0) : tp__load_i64((const char *)tp__tensor_base(t) + r * t->strides[0] * 8, TP_INT64);
        if (y < 0 || y >= c) {
            st = tp_error(TP_ERR_INDEX, "target out of range");
            break;
        }
        double xy = at2(x, r, y), wy = w ? at2(w, 0, y) : 1.0, sum = 0.0;
        for (int64_t i = 0; i < c; i++) {
            if (i == y) continue;
            double z = margin - xy + at2(x, r, i);
            if (z > 0.0 || isnan(z)) sum += wy * (p == 1.0 ? z : z * z);
        }
        vals[r] = sum / (double)c;
    }
    if (st == TP_OK) st = reduce_store(tp__out_at(out, 0), red, vals, n);
    tp_free(vals);
    return st;
}

/* multilabel_margin_loss(Tensor self, Tensor target, Any reduction='mean'): per row, the
 * target classes are target[0..k) up to the first -1; sum over target j and non-target i
 * of max(0, 1 - (x[j] - x[i])) / C. */
static tp_status multilabel_margin_make(const tp_value *args, tp_tensor **x, tp_tensor **t, int *red, int64_t *n,
                                        int64_t *c) {
    TP_TRY(tp__need_tensor(args, 0, "self", x));
    TP_TRY(tp__need_tensor(args, 1, "target", t));
    TP_TRY(reduction_of(&args[2], false, red));
    TP_TRY(margin_input(*x, "multilabel_margin_loss_forward_out_frame", n, c));
    char s1[128];
    TP_CHECK((*t)->dtype == TP_INT64, TP_ERR_TYPE, "expected scalar type Long but found %s",
             tp_dtype_name((*t)->dtype));
    TP_CHECK((*t)->ndim == (*x)->ndim && dims_eq(*t, *x, (*x)->ndim, "target shaped like the input"),
             TP_ERR_SHAPE, "inconsistent size %s for argument #2 'target'",
             tp__shape_str((*t)->ndim, (*t)->sizes, s1, sizeof s1));
    return TP_OK;
}

static tp_status infer_multilabel_margin_loss(const tp_value *args, tp_value *out) {
    tp_tensor *x, *t;
    int red;
    int64_t n, c;
    TP_TRY(multilabel_margin_make(args, &x, &t, &red, &n, &c));
    tp_sdim rows = tp__dim(x, 0);
    return tp__out_dims(out, x->dtype, red != RED_NONE || x->ndim == 1 ? 0 : 1, &rows);
}

static tp_status kernel_multilabel_margin_loss(const tp_value *args, tp_value *out) {
    tp_tensor *x, *t;
    int red;
    int64_t n, c;
    TP_TRY(multilabel_margin_make(args, &x, &t, &red, &n, &c));
    double *vals;
    TP_TRY(loss_scratch(n, &vals));
    bool *is_target = tp_calloc((size_t)c, sizeof *is_target);
    tp_status st = is_target ? TP_OK : tp_error(TP_ERR_NOMEM, "out of memory (%" PRId64 " classes)", c);
    for (int64_t r = 0; r < n && st == TP_OK; r++) {
        memset(is_target, 0, (size_t)c * sizeof *is_target);
        int64_t k = 0;
        for (; k < c; k++) {
            int64_t j = at2_i64(t, r, k);
            if (j == -1) break;
            if (j < 0 || j >= c) {
                st = tp_error(TP_ERR_INDEX, "argument #2 'target' is out of range");
                break;
            }
            is_target[j] = true;
        }
        double sum = 0.0;
        for (int64_t q = 0; q < k && st == TP_OK; q++) {
            double xj = at2(x, r, at2_i64(t, r, q));
            for (int64_t i = 0; i < c; i++) {
                if (is_target[i]) continue;
                double z = 1.0 - (xj - at2(x, r, i));
                if (z > 0.0 || isnan(z)) sum += z;
            }
        }
        vals[r] = sum / (double)c;
    }
    if (st == TP_OK) st = reduce_store(tp__out_at(out, 0), red, vals, n);
    tp_free(is_target);
    tp_free(vals);
    return st;
}

/* multilabel_soft_margin_loss(Tensor self, Tensor target, Tensor? weight=None, Any reduction='mean'):
 * -(t * logsigmoid(x) + (1 - t) * logsigmoid(-x)) (times weight, broadcast), averaged over the
 * last (class) dim, then reduced. */
static double log_sigmoid(double v) { return v < 0.0 ? v - log1p(exp(v)) : -log1p(exp(-v)); }

static tp_status mlsm_make(const tp_value *args, tp_tensor **x, tp_tensor **t, tp_tensor **w, int *red,
                           int64_t *wstrides) {
    TP_TRY(tp__need_tensor(args, 0, "self", x));
    TP_TRY(tp__need_tensor(args, 1, "target", t));
    *w = tp__arg_is_none(args, 2) ? NULL : tp__arg_tensor(args, 2);
    TP_CHECK(tp__arg_is_none(args, 2) || *w, TP_ERR_TYPE, "weight must be a Tensor or None");
    TP_TRY(reduction_of(&args[3], false, red));
    const tp_tensor *a = *x, *b = *t;
    TP_CHECK(tp_dtype_is_float(a->dtype), TP_ERR_TYPE, "multilabel_soft_margin_loss expects a floating-point input, got %s",
             tp_dtype_name(a->dtype));
    TP_CHECK(a->ndim >= 1, TP_ERR_SHAPE, "multilabel_soft_margin_loss: input must have a class dim");
    TP_CHECK(b->ndim == a->ndim, TP_ERR_SHAPE, "multilabel_soft_margin_loss: target must have the input's %d dims, got %d",
             a->ndim, b->ndim);
    for (int d = 0; d < a->ndim; d++)
        TP_CHECK(tp__dim_eq(tp__dim(a, d), tp__dim(b, d), "target shaped like the input"), TP_ERR_SHAPE,
                 "The size of tensor a (%" PRId64 ") must match the size of tensor b (%" PRId64
                 ") at non-singleton dimension %d",
                 b->sizes[d], a->sizes[d], d);
    if (*w) {
        const tp_tensor *wt = *w;
        TP_CHECK(wt->ndim <= a->ndim, TP_ERR_SHAPE, "multilabel_soft_margin_loss: weight has more dims than the input");
        for (int d = 0; d < wt->ndim; d++) {
            int64_t ws = wt->sizes[d], as = a->sizes[a->ndim - wt->ndim + d];
            tp_sdim wd = tp__dim(wt, d), ad = tp__dim(a, a->ndim - wt->ndim + d), r;
            TP_CHECK(tp__dim_broadcast(wd, ad, &r) && r.v == as, TP_ERR_SHAPE, /* weight broadcasts to the input */
                     "The size of tensor a (%" PRId64 ") must match the size of tensor b (%" PRId64
                     ") at non-singleton dimension %d",
                     as, ws, a->ndim - wt->ndim + d);
        }
        tp__broadcast_strides(wt, wt->ndim, a->ndim, a->sizes, wstrides);
    }
    return TP_OK;
}

static tp_status infer_multilabel_soft_margin_loss(const tp_value *args, tp_value *out) {
    tp_tensor *x, *t, *w;
    int red;
    int64_t ws[TP_MAX_DIMS];
    TP_TRY(mlsm_make(args, &x, &t, &w, &red, ws));
    tp_value vx = tp_value_tensor(x), vt = tp_value_tensor(t), vw = w ? tp_value_tensor(w) : tp_value_none();
    tp_dtype dt = tp__result_type((const tp_value *[]){&vx, &vt, &vw}, 3);
    TP_CHECK(tp_dtype_is_float(dt), TP_ERR_TYPE, "multilabel_soft_margin_loss expects floating-point inputs");
    tp_sdim dims[TP_MAX_DIMS];
    tp__dims(x, dims);
    return tp__out_dims(out, dt, red != RED_NONE ? 0 : x->ndim - 1, dims);
}

static tp_status kernel_multilabel_soft_margin_loss(const tp_value *args, tp_value *out) {
    tp_tensor *x, *t, *w;
    int red;
    int64_t ws[TP_MAX_DIMS];
    TP_TRY(mlsm_make(args, &x, &t, &w, &red, ws));
    int64_t c = x->sizes[x->ndim - 1], rows = c > 0 ? tp_tensor_numel(x) / c : 0;
    if (c == 0) {
        rows = 1;
        for (int d = 0; d + 1 < x->ndim; d++) rows *= x->sizes[d];
    }
    double *vals;
    TP_TRY(loss_scratch(rows, &vals));
    int64_t idx[TP_MAX_DIMS] = {0};
    size_t xes = tp_dtype_size(x->dtype), tes = tp_dtype_size(t->dtype), wes = w ? tp_dtype_size(w->dtype) : 0;
    const char *xb = tp__tensor_base(x), *tb = tp__tensor_base(t), *wb = w ? tp__tensor_base(w) : NULL;
    for (int64_t r = 0; r < rows; r++) {
        int64_t ox = 0, ot = 0, ow = 0;
        for (int d = 0; d + 1 < x->ndim; d++) {
            ox += idx[d] * x->strides[d];
            ot += idx[d] * t->strides[d];
            if (w) ow += idx[d] * ws[d];
        }
        double sum = 0.0;
        int last = x->ndim - 1;
        for (int64_t i = 0; i < c; i++) {
            double v = load(xb + (ox + i * x->strides[last]) * (int64_t)xes, x->dtype);
            double y = load(tb + (ot + i * t->strides[last]) * (int64_t)tes, t->dtype);
            double l = -(y * log_sigmoid(v) + (1.0 - y) * log_sigmoid(-v));
            if (w) l *= load(wb + (ow + i * ws[last]) * (int64_t)wes, w->dtype);
            sum += l;
        }
        vals[r] = sum / (double)c;
        for (int d = x->ndim - 2; d >= 0; d--) {
            if (++idx[d] < x->sizes[d]) break;
            idx[d] = 0;
        }
    }
    tp_status st = reduce_store(tp__out_at(out, 0), red, vals, rows);
    tp_free(vals);
    return st;
}

/* ---- registration ------------------------------------------------------- */

/* ---- ctc_loss (issue #13) -----------------------------------------------
 * ctc_loss(log_probs [T, N, C] or [T, C], targets [N, S] padded or the 1-D
 * concatenation of the N targets, input_lengths, target_lengths (tensors or
 * int lists), blank, reduction, zero_infinity): PyTorch's forward, the
 * alpha recursion over the blank-extended target in log space, in double;
 * 'mean' divides each loss by its target length (at least 1) and averages
 * over the batch; zero_infinity turns infinite losses into 0. A zero
 * input length gives 0 for an empty target and inf otherwise (PyTorch's CPU
 * kernel reads uninitialised memory there); negative lengths and labels out
 * of range are refused (PyTorch does not check them). */

typedef struct ctc_plan {
    const tp_tensor *lp, *tg;
    int64_t T, N, C, blank;
    int red;
    bool batched;
} ctc_plan;

static int64_t ctc_len_count(const tp_value *v) {
    if (v->kind == TP_VAL_TENSOR) return tp_tensor_numel(v->u.tensor);
    if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE) return tp_value_len(v);
    return 1;
}

static bool ctc_len_integral(const tp_value *v) {
    if (v->kind == TP_VAL_TENSOR) return !tp_dtype_is_float(v->u.tensor->dtype) && v->u.tensor->dtype != TP_BOOL;
    if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE) {
        for (int64_t i = 0; i < tp_value_len(v); i++)
            if (tp_value_at(v, i)->kind != TP_VAL_INT) return false;
        return true;
    }
    return v->kind == TP_VAL_INT;
}

static int64_t ctc_len_at(const tp_value *v, int64_t i) {
    if (v->kind == TP_VAL_TENSOR) {
        const tp_tensor *t = v->u.tensor;
        int64_t off = 0, rem = i;
        for (int d = t->ndim - 1; d >= 0; d--) {
            off += (rem % t->sizes[d]) * t->strides[d];
            rem /= t->sizes[d];
        }
        return tp__load_i64(tp__tensor_base(t) + off * (int64_t)tp_dtype_size(t->dtype), t->dtype);
    }
    if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE) return tp_value_as_i64(tp_value_at(v, i));
    return tp_value_as_i64(v);
}

static const char *ctc_type(tp_dtype d) {
    static const char *const names[TP_DTYPE_COUNT] = {"Float", "Double", "Half", "BFloat16", "Long",
                                                      "Int",   "Short",  "Char", "Byte",     "Bool"};
    return (unsigned)d < TP_DTYPE_COUNT ? names[d] : "?";
}

static tp_status ctc_check(const tp_value *args, ctc_plan *p) {
    p->lp = tp__arg_tensor(args, 0);
    p->tg = tp__arg_tensor(args, 1);
    TP_CHECK(p->lp && p->tg, TP_ERR_TYPE, "ctc_loss: log_probs and targets must be tensors");
    TP_CHECK(p->lp->ndim == 2 || p->lp->ndim == 3, TP_ERR_SHAPE,
             "ctc_loss: expected log_probs to be 2-D (unbatched) or 3-D [T, N, C], got %d-D", p->lp->ndim);
    TP_CHECK(tp_dtype_is_float(p->lp->dtype) && p->lp->dtype != TP_FLOAT16 && p->lp->dtype != TP_BFLOAT16,
             TP_ERR_TYPE, "\"ctc_loss_cpu\" not implemented for '%s'", ctc_type(p->lp->dtype));
    p->batched = p->lp->ndim == 3;
    p->T = p->lp->sizes[0];
    p->N = p->batched ? p->lp->sizes[1] : 1;
    p->C = p->lp->sizes[p->lp->ndim - 1];
    TP_CHECK(ctc_len_integral(&args[2]), TP_ERR_TYPE, "input_lengths must be integral");
    TP_CHECK(ctc_len_integral(&args[3]), TP_ERR_TYPE, "target_lengths must be integral");
    p->blank = tp__arg_int(args, 4);
    TP_TRY(reduction_of(&args[5], false, &p->red));
    TP_CHECK(p->blank >= 0 && p->blank < p->C, TP_ERR_INVALID_ARG, "blank must be in label range");
    TP_CHECK(ctc_len_count(&args[2]) == p->N, TP_ERR_SHAPE, "input_lengths must be of size batch_size");
    TP_CHECK(ctc_len_count(&args[3]) == p->N, TP_ERR_SHAPE, "target_lengths must be of size batch_size");
    TP_CHECK(p->batched ? p->tg->ndim == 1 || p->tg->ndim == 2 : p->tg->ndim == 1, TP_ERR_SHAPE,
             "ctc_loss: expected targets to be %s, got %d-D", p->batched ? "1-D or 2-D" : "1-D", p->tg->ndim);
    return TP_OK;
}

static tp_status infer_ctc_loss(const tp_value *args, tp_value *out) {
    ctc_plan p;
    TP_TRY(ctc_check(args, &p));
    if (p.red == RED_NONE && p.batched) {
        tp_sdim n = tp__dim(p.lp, 1);
        return tp__out_dims(out, p.lp->dtype, 1, &n);
    }
    return tp__out_dims(out, p.lp->dtype, 0, NULL);
}

static double ctc_lse(double a, double b) {
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    double m = a > b ? a : b;
    return m + log(exp(a - m) + exp(b - m));
}

static tp_status kernel_ctc_loss(const tp_value *args, tp_value *out) {
    ctc_plan p;
    TP_TRY(ctc_check(args, &p));
    TP_TRY(tp__has_data(p.lp, "log_probs"));
    TP_TRY(tp__has_data(p.tg, "targets"));
    for (int k = 2; k <= 3; k++)
        if (args[k].kind == TP_VAL_TENSOR) TP_TRY(tp__has_data(args[k].u.tensor, k == 2 ? "input_lengths" : "target_lengths"));
    bool zero_inf = tp__arg_bool(args, 6);
    const tp_tensor *lp = p.lp, *tg = p.tg;
    bool concat = p.batched && tg->ndim == 1;
    /* target offsets and the checks on the lengths, in PyTorch's order */
    int64_t max_tl = 0, sum_tl = 0;
    for (int64_t b = 0; b < p.N; b++) {
        int64_t tl = ctc_len_at(&args[3], b);
        TP_CHECK(tl >= 0, TP_ERR_INVALID_ARG, "ctc_loss: target_lengths must be non-negative, got %" PRId64, tl);
        if (tl > max_tl) max_tl = tl;
        sum_tl += tl;
    }
    int64_t tg_len = tg->sizes[tg->ndim - 1];
    if (concat)
        TP_CHECK(tg_len == sum_tl, TP_ERR_SHAPE,
                 "Expected tensor to have size %" PRId64 " at dimension 0, but got size %" PRId64
                 " for argument #2 'targets' (while checking arguments for ctc_loss_cpu)",
                 sum_tl, tg_len);
    else
        TP_CHECK(tg_len >= max_tl, TP_ERR_SHAPE,
                 "Expected tensor to have size at least %" PRId64 " at dimension %d, but got size %" PRId64
                 " for argument #2 'targets' (while checking arguments for ctc_loss_cpu)",
                 max_tl, tg->ndim - 1, tg_len);
    if (!concat && p.batched)
        TP_CHECK(tg->sizes[0] >= p.N, TP_ERR_SHAPE,
                 "Expected tensor to have size at least %" PRId64 " at dimension 0, but got size %" PRId64
                 " for argument #2 'targets' (while checking arguments for ctc_loss_cpu)",
                 p.N, tg->sizes[0]);
    for (int64_t b = 0; b < p.N; b++) {
        int64_t il = ctc_len_at(&args[2], b);
        TP_CHECK(il <= p.T, TP_ERR_SHAPE,
                 "Expected input_lengths to have value at most %" PRId64 ", but got value %" PRId64
                 " (while checking arguments for ctc_loss_cpu)",
                 p.T, il);
        TP_CHECK(il >= 0, TP_ERR_INVALID_ARG, "ctc_loss: input_lengths must be non-negative, got %" PRId64, il);
    }
    double *alpha = tp_malloc(sizeof(double) * (size_t)(2 * (2 * max_tl + 1)) + sizeof(int64_t) * (size_t)(2 * max_tl + 1));
    TP_CHECK(alpha, TP_ERR_NOMEM, "out of memory for ctc_loss");
    int64_t *ext = (int64_t *)(alpha + 2 * (2 * max_tl + 1));
    tp_tensor *y = tp__out_at(out, 0);
    size_t les = tp_dtype_size(lp->dtype), tes = tp_dtype_size(tg->dtype);
    const char *lb = tp__tensor_base(lp), *tb = tp__tensor_base(tg);
    int64_t ls_t = lp->strides[0], ls_b = p.batched ? lp->strides[1] : 0, ls_c = lp->strides[lp->ndim - 1];
    double total = 0.0;
    int64_t tg_off = 0;
    tp_status st = TP_OK;
    for (int64_t b = 0; b < p.N && st == TP_OK; b++) {
        int64_t il = ctc_len_at(&args[2], b), tl = ctc_len_at(&args[3], b), S = 2 * tl + 1;
        for (int64_t s = 0; s < S; s++) {
            if (s % 2 == 0) {
                ext[s] = p.blank;
                continue;
            }
            int64_t k = (s - 1) / 2, off = concat ? (tg_off + k) * tg->strides[0]
                                           : (p.batched ? b * tg->strides[0] : 0) + k * tg->strides[tg->ndim - 1];
            int64_t lab = tp_dtype_is_float(tg->dtype) ? (int64_t)tp__load_f64(tb + off * (int64_t)tes, tg->dtype)
                                                       : tp__load_i64(tb + off * (int64_t)tes, tg->dtype);
            if (lab < 0 || lab >= p.C) {
                st = tp_error(TP_ERR_INDEX, "ctc_loss: target label %" PRId64 " is out of range for %" PRId64
                              " classes", lab, p.C);
                break;
            }
            ext[s] = lab;
        }
        if (st != TP_OK) break;
        if (concat) tg_off += tl;
#define LP(t, c) tp__load_f64(lb + ((t) * ls_t + b * ls_b + (c) * ls_c) * (int64_t)les, lp->dtype)
        double loss;
        if (il == 0) {
            loss = tl == 0 ? 0.0 : INFINITY;
        } else {
            double *cur = alpha, *prev = alpha + S;
            for (int64_t s = 0; s < S; s++) cur[s] = s < 2 ? LP(0, ext[s]) : -INFINITY;
            for (int64_t t = 1; t < il; t++) {
                double *tmp = prev;
                prev = cur, cur = tmp;
                for (int64_t s = 0; s < S; s++) {
                    double a = prev[s];
                    if (s > 0) a = ctc_lse(a, prev[s - 1]);
                    if (s > 1 && ext[s] != p.blank && ext[s] != ext[s - 2]) a = ctc_lse(a, prev[s - 2]);
                    cur[s] = a == -INFINITY ? -INFINITY : a + LP(t, ext[s]);
                }
            }
            double ll = S > 1 ? ctc_lse(cur[S - 1], cur[S - 2]) : cur[S - 1];
            loss = -ll;
        }
#undef LP
        if (zero_inf && loss == INFINITY) loss = 0.0;
        if (p.red == RED_NONE) tp__store_f64(tp__tensor_base(y) + (p.batched ? b * y->strides[0] : 0) * (int64_t)les,
                                             y->dtype, loss);
        else total += p.red == RED_MEAN ? loss / (double)(tl > 1 ? tl : 1) : loss;
    }
    tp_free(alpha);
    TP_TRY(st);
    if (p.red != RED_NONE)
        tp__store_f64(tp__tensor_base(y), y->dtype, p.red == RED_MEAN ? total / (double)p.N : total);
    return TP_OK;
}

void tp__register_loss_ops(void) {
    tp__register_op(TP_OP_MSE_LOSS, "mse_loss(Tensor self, Tensor target, str reduction='mean') -> Tensor", 0,
                    infer_mse_loss, kernel_mse_loss);
    tp__register_op(TP_OP_L1_LOSS, "l1_loss(Tensor self, Tensor target, str reduction='mean') -> Tensor", 0,
                    infer_l1_loss, kernel_l1_loss);
    tp__register_op(TP_OP_SMOOTH_L1_LOSS,
                    "smooth_l1_loss(Tensor self, Tensor target, str reduction='mean', float beta=1.0) -> Tensor", 0,
                    infer_smooth_l1_loss, kernel_smooth_l1_loss);
    tp__register_op(TP_OP_HUBER_LOSS,
                    "huber_loss(Tensor self, Tensor target, str reduction='mean', float delta=1.0) -> Tensor", 0,
                    infer_huber_loss, kernel_huber_loss);
    tp__register_op(TP_OP_SOFT_MARGIN_LOSS, "soft_margin_loss(Tensor self, Tensor target, int reduction=1) -> Tensor",
                    0, infer_soft_margin_loss, kernel_soft_margin_loss);
    tp__register_op(TP_OP_BINARY_CROSS_ENTROPY,
                    "binary_cross_entropy(Tensor self, Tensor target, Tensor? weight=None, str reduction='mean') "
                    "-> Tensor",
                    0, infer_binary_cross_entropy, kernel_binary_cross_entropy);
    tp__register_op(TP_OP_BINARY_CROSS_ENTROPY_WITH_LOGITS,
                    "binary_cross_entropy_with_logits(Tensor self, Tensor target, Tensor? weight=None, "
                    "Tensor? pos_weight=None, str reduction='mean') -> Tensor",
                    0, infer_binary_cross_entropy_with_logits, kernel_binary_cross_entropy_with_logits);
    tp__register_op(TP_OP_KL_DIV,
                    "kl_div(Tensor self, Tensor target, str reduction='mean', bool log_target=False) -> Tensor", 0,
                    infer_kl_div, kernel_kl_div);
    tp__register_op(TP_OP_POISSON_NLL_LOSS,
                    "poisson_nll_loss(Tensor input, Tensor target, bool log_input=True, bool full=False, "
                    "float eps=1e-08, int reduction=1) -> Tensor",
                    0, infer_poisson_nll_loss, kernel_poisson_nll_loss);
    tp__register_op(TP_OP_GAUSSIAN_NLL_LOSS,
                    "gaussian_nll_loss(Tensor input, Tensor target, Tensor var, bool full=False, float eps=1e-06, "
                    "str reduction='mean') -> Tensor",
                    0, infer_gaussian_nll_loss, kernel_gaussian_nll_loss);
    tp__register_op(TP_OP_MARGIN_RANKING_LOSS,
                    "margin_ranking_loss(Tensor input1, Tensor input2, Tensor target, float margin=0.0, "
                    "int reduction=1) -> Tensor",
                    0, infer_margin_ranking_loss, kernel_margin_ranking_loss);
    tp__register_op(TP_OP_HINGE_EMBEDDING_LOSS,
                    "hinge_embedding_loss(Tensor self, Tensor target, float margin=1.0, int reduction=1) -> Tensor", 0,
                    infer_hinge_embedding_loss, kernel_hinge_embedding_loss);
    tp__register_op(TP_OP_NLL_LOSS,
                    "nll_loss(Tensor self, Tensor target, Tensor? weight=None, str reduction='mean', "
                    "int ignore_index=-100) -> Tensor",
                    0, infer_nll_loss, kernel_nll_loss);
    tp__register_op(TP_OP_CROSS_ENTROPY,
                    "cross_entropy(Tensor self, Tensor target, Tensor? weight=None, str reduction='mean', "
                    "int ignore_index=-100, float label_smoothing=0.0) -> Tensor",
                    0, infer_cross_entropy, kernel_cross_entropy);
    tp__register_op(TP_OP_COSINE_SIMILARITY,
                    "cosine_similarity(Tensor x1, Tensor x2, int dim=1, float eps=1e-08) -> Tensor", 0,
                    infer_cosine_similarity, kernel_cosine_similarity);
    tp__register_op(TP_OP_PAIRWISE_DISTANCE,
                    "pairwise_distance(Tensor x1, Tensor x2, float p=2.0, float eps=1e-06, bool keepdim=False) "
                    "-> Tensor",
                    0, infer_pairwise_distance, kernel_pairwise_distance);
    tp__register_op(TP_OP_COSINE_EMBEDDING_LOSS,
                    "cosine_embedding_loss(Tensor input1, Tensor input2, Tensor target, float margin=0.0, "
                    "int reduction=1) -> Tensor",
                    0, infer_cosine_embedding_loss, kernel_cosine_embedding_loss);
    tp__register_op(TP_OP_DIST, "dist(Tensor self, Tensor other, Scalar p=2) -> Tensor", 0, infer_dist, kernel_dist);
    tp__register_op(TP_OP_TRIPLET_MARGIN_LOSS,
                    "triplet_margin_loss(Tensor anchor, Tensor positive, Tensor negative, float margin=1.0, "
                    "float p=2, float eps=1e-06, bool swap=False, Any reduction='mean') -> Tensor",
                    0, infer_triplet_margin_loss, kernel_triplet_margin_loss);
    tp__register_op(TP_OP_MULTI_MARGIN_LOSS,
                    "multi_margin_loss(Tensor self, Tensor target, Scalar p=1, Scalar margin=1, Tensor? weight=None, "
                    "Any reduction='mean') -> Tensor",
                    0, infer_multi_margin_loss, kernel_multi_margin_loss);
    tp__register_op(TP_OP_MULTILABEL_MARGIN_LOSS,
                    "multilabel_margin_loss(Tensor self, Tensor target, Any reduction='mean') -> Tensor", 0,
                    infer_multilabel_margin_loss, kernel_multilabel_margin_loss);
    tp__register_op(TP_OP_MULTILABEL_SOFT_MARGIN_LOSS,
                    "multilabel_soft_margin_loss(Tensor self, Tensor target, Tensor? weight=None, "
                    "Any reduction='mean') -> Tensor",
                    0, infer_multilabel_soft_margin_loss, kernel_multilabel_soft_margin_loss);
    tp__register_op(TP_OP_CTC_LOSS,
                    "ctc_loss(Tensor log_probs, Tensor targets, Any input_lengths, Any target_lengths, int blank=0, "
                    "Any reduction='mean', bool zero_infinity=False) -> Tensor",
                    0, infer_ctc_loss, kernel_ctc_loss);
}
