/*
 * linalg.c - matrix products: matmul, mm, bmm, addmm, linear, baddbmm;
 * vector products: dot, mv, addmv, outer, addr, kron, inner, cross, trace;
 * addbmm.
 * Schemas, shape rules and reference kernels with PyTorch's semantics.
 *
 * Every op is lowered to one problem: over a (broadcast) batch,
 *     C[i, j] = alpha * sum_p A[i, p] * B[p, j] + beta * Bias[i, j]
 * where each operand is described by a data pointer and byte strides (0 for
 * broadcast dims; a 1-D matmul argument is a matrix with a stride-0 unit
 * dim). gemm_ref solves one matrix of it with a plain strided triple loop;
 * an optimised GEMM can be registered as a fast kernel and checked against
 * it. Float dtypes accumulate in double (rounded once on store), integer
 * dtypes in int64 with wrap-around. All operands must share one dtype (as
 * in PyTorch); bool is rejected.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "einsum.h"

#include "kernel_util.h"

/* ---- the problem and the reference GEMM -------------------------------- */

typedef struct gemm_operand {
    const char *data;            /* element [0, ..., 0]; NULL = absent (bias) */
    int64_t batch[TP_MAX_DIMS];  /* byte strides over the batch dims */
    int64_t rows, cols;          /* byte strides of the two matrix dims */
} gemm_operand;

typedef struct gemm_problem {
    tp_dtype dtype;
    int n_batch;
    int64_t batch_sizes[TP_MAX_DIMS];
    int64_t m, n, k;
    gemm_operand a;          /* m x k */
    gemm_operand b;          /* k x n */
    gemm_operand c;          /* m x n, written */
    gemm_operand bias;       /* m x n, read; data NULL = no bias term */
    double alpha, beta;      /* float dtypes */
    int64_t alpha_i, beta_i; /* integer dtypes */
} gemm_problem;

static inline int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* Dot product of row i of A and column j of B (float dtypes, in double). */
static double dot_f64(const gemm_problem *g, const char *pa, const char *pb) {
    double acc = 0.0;
    int64_t sa = g->a.cols, sb = g->b.rows;
    switch (g->dtype) {
    case TP_FLOAT32:
        for (int64_t p = 0; p < g->k; p++)
            acc += (double)*(const float *)(pa + p * sa) * (double)*(const float *)(pb + p * sb);
        break;
    case TP_FLOAT64:
        for (int64_t p = 0; p < g->k; p++) acc += *(const double *)(pa + p * sa) * *(const double *)(pb + p * sb);
        break;
    default:
        for (int64_t p = 0; p < g->k; p++)
            acc += tp__load_f64(pa + p * sa, g->dtype) * tp__load_f64(pb + p * sb, g->dtype);
        break;
    }
    return acc;
}

static int64_t dot_i64(const gemm_problem *g, const char *pa, const char *pb) {
    int64_t acc = 0;
    for (int64_t p = 0; p < g->k; p++)
        acc = wrap_add(acc, wrap_mul(tp__load_i64(pa + p * g->a.cols, g->dtype), tp__load_i64(pb + p * g->b.rows, g->dtype)));
    return acc;
}

/* One matrix of the problem: the reference triple loop. `bias` is NULL when
 * there is no bias term (or beta is 0: PyTorch then ignores it, NaN and inf
 * included). */
static void gemm_ref(const gemm_problem *g, const char *a, const char *b, char *c, const char *bias) {
    bool is_float = tp_dtype_is_float(g->dtype);
    for (int64_t i = 0; i < g->m; i++) {
        for (int64_t j = 0; j < g->n; j++) {
            const char *pa = a + i * g->a.rows, *pb = b + j * g->b.cols;
            char *pc = c + i * g->c.rows + j * g->c.cols;
            const char *pbias = bias ? bias + i * g->bias.rows + j * g->bias.cols : NULL;
            if (is_float) {
                double r = g->alpha * dot_f64(g, pa, pb);
                if (pbias) r += g->beta * tp__load_f64(pbias, g->dtype);
                tp__store_f64(pc, g->dtype, r);
            } else {
                int64_t r = wrap_mul(g->alpha_i, dot_i64(g, pa, pb));
                if (pbias) r = wrap_add(r, wrap_mul(g->beta_i, tp__load_i64(pbias, g->dtype)));
                tp__store_i64(pc, g->dtype, r);
            }
        }
    }
}

/* Every matrix of the batch. */
static void gemm_batched(const gemm_problem *g) {
    int64_t count = 1, index[TP_MAX_DIMS] = {0};
    for (int d = 0; d < g->n_batch; d++) count *= g->batch_sizes[d];
    bool use_bias = g->bias.data && (tp_dtype_is_float(g->dtype) ? g->beta != 0.0 : g->beta_i != 0);
    for (int64_t t = 0; t < count; t++) {
        int64_t oa = 0, ob = 0, oc = 0, obias = 0;
        for (int d = 0; d < g->n_batch; d++) {
            oa += index[d] * g->a.batch[d];
            ob += index[d] * g->b.batch[d];
            oc += index[d] * g->c.batch[d];
            obias += index[d] * g->bias.batch[d];
        }
        gemm_ref(g, g->a.data + oa, g->b.data + ob, (char *)g->c.data + oc, use_bias ? g->bias.data + obias : NULL);
        for (int d = g->n_batch - 1; d >= 0; d--) {
            if (++index[d] < g->batch_sizes[d]) break;
            index[d] = 0;
        }
    }
}

/* ---- shapes ------------------------------------------------------------
 * A plan maps the logical problem [batch..., m, n] (contraction k) onto the
 * operands' dims and the output's dims. */

typedef struct matmul_plan {
    int n_batch;
    int64_t batch_sizes[TP_MAX_DIMS];
    int64_t m, n, k;
    int a_nbatch, a_row, a_col; /* a's leading batch dims; its m and k dims (-1: none) */
    int b_nbatch, b_row, b_col; /* b's leading batch dims; its k and n dims (-1: none) */
    int out_ndim;
    int64_t out_sizes[TP_MAX_DIMS];
    tp_sdim out_dims[TP_MAX_DIMS]; /* out_sizes as the shape rule gives them (dim.h) */
    int out_dim_of[TP_MAX_DIMS + 2]; /* logical dim -> output dim (-1: squeezed) */
} matmul_plan;

static const char *dims_str(const tp_tensor *t, char *buf, size_t size) {
    return tp__shape_str(t->ndim, t->sizes, buf, size);
}

static tp_status check_dtypes(const tp_tensor *a, const tp_tensor *b) {
    TP_CHECK(a->dtype == b->dtype, TP_ERR_TYPE, "expected m1 and m2 to have the same dtype, but got: %s != %s",
             tp_dtype_name(a->dtype), tp_dtype_name(b->dtype));
    TP_CHECK(a->dtype != TP_BOOL, TP_ERR_TYPE, "matrix products are not implemented for bool tensors");
    return TP_OK;
}

/* Dim d broadcasts to want (a guard, dim.h): a constant 1, an example 1
 * against another size (relied on as 1), or want itself. */
static bool broadcasts_to(tp_sdim d, tp_sdim want, const char *what) {
    if (tp__dim_is_const(d) && d.v == 1) return true;
    if (d.v == 1 && want.v != 1) return tp__dim_eqk(d, 1, what);
    return tp__dim_eq(d, want, what);
}

/* The bias-like operand `what` (self of addmm/baddbmm, bias of linear)
 * must share the product's dtype and broadcast to its shape. */
static tp_status check_addend(const tp_tensor *t, const char *what, tp_dtype dtype, int ndim, const tp_sdim *dims) {
    char b1[320], b2[320];
    int64_t sizes[TP_MAX_DIMS];
    for (int d = 0; d < ndim; d++) sizes[d] = dims[d].v;
    TP_CHECK(t->dtype == dtype, TP_ERR_TYPE, "%s and the matrices must have the same dtype, but got %s and %s", what,
             tp_dtype_name(t->dtype), tp_dtype_name(dtype));
    const char *rel = strcmp(what, "bias") == 0 ? "bias broadcasts to the output" : "self broadcasts to the product";
    bool ok = t->ndim <= ndim;
    for (int d = 0; ok && d < t->ndim; d++) ok = broadcasts_to(tp__dim(t, d), dims[ndim - t->ndim + d], rel);
    TP_CHECK(ok, TP_ERR_SHAPE, "%s of shape %s cannot be broadcast to the result shape %s", what,
             dims_str(t, b1, sizeof b1), tp__shape_str(ndim, sizes, b2, sizeof b2));
    return TP_OK;
}

/* Plan a @ b with torch.matmul's rules: 1-D arguments are promoted to
 * matrices (a: 1 x k, b: k x 1) and the unit dim removed from the result;
 * dims before the last two are batch dims and broadcast. With weight set,
 * b is a linear() weight [n, k] (or [k]) used transposed and not batched. */
static tp_status plan_matmul(const tp_tensor *a, const tp_tensor *b, bool weight, matmul_plan *p) {
    char b1[320], b2[320];
    memset(p, 0, sizeof *p);
    int da = a->ndim, db = b->ndim;
    if (weight) TP_CHECK(da >= 1, TP_ERR_SHAPE, "input must be at least 1D, but it is 0D");
    TP_CHECK(da >= 1 && db >= 1, TP_ERR_SHAPE,
             "both arguments to matmul need to be at least 1D, but they are %dD and %dD", da, db);
    TP_TRY(check_dtypes(a, b));
    int64_t ka, kb;
    tp_sdim m_d = tp__dimk(1), n_d = tp__dimk(1), ka_d, kb_d;
    if (da == 1) {
        p->m = 1;
        p->a_row = -1;
        p->a_col = 0;
        ka_d = tp__dim(a, 0);
    } else {
        p->a_nbatch = da - 2;
        p->a_row = da - 2;
        p->a_col = da - 1;
        m_d = tp__dim(a, da - 2);
        ka_d = tp__dim(a, da - 1);
    }
    if (db == 1) {
        p->n = 1;
        p->b_row = 0;
        p->b_col = -1;
        kb_d = tp__dim(b, 0);
    } else if (weight) {
        TP_CHECK(db == 2, TP_ERR_SHAPE, "weight must be 1-D or 2-D, got %dD", db);
        p->b_row = 1;
        p->b_col = 0;
        n_d = tp__dim(b, 0);
        kb_d = tp__dim(b, 1);
    } else {
        p->b_nbatch = db - 2;
        p->b_row = db - 2;
        p->b_col = db - 1;
        n_d = tp__dim(b, db - 1);
        kb_d = tp__dim(b, db - 2);
    }
    p->m = m_d.v;
    p->n = n_d.v;
    ka = ka_d.v;
    kb = kb_d.v;
    if (!tp__dim_eq(ka_d, kb_d, weight ? "input features == weight.shape[-1]" : "matrix inner dims")) {
        if (da == 1 && db == 1)
            return tp_error(TP_ERR_SHAPE,
                            "inconsistent tensor size, expected tensors %s and %s to have the same number of elements",
                            dims_str(a, b1, sizeof b1), dims_str(b, b2, sizeof b2));
        int64_t rows = p->m;
        if (weight)
            for (int d = 0; d < da - 2; d++) rows *= a->sizes[d]; /* linear flattens input's leading dims */
        if (!weight && (da > 2 || db > 2))
            return tp_error(TP_ERR_SHAPE,
                            "mat1 and mat2 shapes cannot be multiplied (%" PRId64 "x%" PRId64 " and %" PRId64 "x%" PRId64
                            ") (input shapes %s and %s)",
                            rows, ka, kb, p->n, dims_str(a, b1, sizeof b1), dims_str(b, b2, sizeof b2));
        return tp_error(TP_ERR_SHAPE,
                        "mat1 and mat2 shapes cannot be multiplied (%" PRId64 "x%" PRId64 " and %" PRId64 "x%" PRId64 ")",
                        rows, ka, kb, p->n);
    }
    p->k = ka;
    tp_sdim ad[TP_MAX_DIMS], bd[TP_MAX_DIMS];
    tp__dims(a, ad);
    tp__dims(b, bd);
    if (tp__dims_broadcast(p->a_nbatch, ad, p->b_nbatch, bd, &p->n_batch, ad) != TP_OK)
        return tp_error(TP_ERR_SHAPE, "batch dimensions of %s and %s cannot be broadcast together",
                        dims_str(a, b1, sizeof b1), dims_str(b, b2, sizeof b2));
    int n = 0;
    for (int d = 0; d < p->n_batch; d++) {
        p->batch_sizes[d] = ad[d].v;
        p->out_dim_of[d] = n;
        p->out_dims[n++] = ad[d];
    }
    p->out_dim_of[p->n_batch] = da > 1 ? n : -1;
    if (da > 1) p->out_dims[n++] = m_d;
    p->out_dim_of[p->n_batch + 1] = p->b_col >= 0 ? n : -1;
    if (p->b_col >= 0) p->out_dims[n++] = n_d;
    p->out_ndim = n;
    for (int d = 0; d < n; d++) p->out_sizes[d] = p->out_dims[d].v;
    return TP_OK;
}

/* An input operand: its batch dims are its leading `nbatch` dims,
 * right-aligned to the problem's batch (size-1 and missing dims broadcast). */
static void input_operand(const tp_tensor *t, const matmul_plan *p, int nbatch, int row, int col, gemm_operand *op) {
    int64_t es = (int64_t)tp_dtype_size(t->dtype);
    memset(op, 0, sizeof *op);
    op->data = tp__tensor_base(t);
    for (int d = 0; d < p->n_batch; d++) {
        int td = d - (p->n_batch - nbatch);
        op->batch[d] = (td >= 0 && t->sizes[td] != 1) ? t->strides[td] * es : 0;
    }
    op->rows = row >= 0 ? t->strides[row] * es : 0;
    op->cols = col >= 0 ? t->strides[col] * es : 0;
}

/* An operand shaped like the output (the output itself, or an addend that
 * broadcasts to it), seen through the logical [batch..., m, n] dims. */
static void output_operand(const tp_tensor *t, const matmul_plan *p, gemm_operand *op) {
    int64_t es = (int64_t)tp_dtype_size(t->dtype), strides[TP_MAX_DIMS + 2] = {0};
    memset(op, 0, sizeof *op);
    op->data = tp__tensor_base(t);
    for (int l = 0; l < p->n_batch + 2; l++) {
        int od = p->out_dim_of[l], td = od - (p->out_ndim - t->ndim);
        strides[l] = (od >= 0 && td >= 0 && t->sizes[td] != 1) ? t->strides[td] * es : 0;
    }
    for (int d = 0; d < p->n_batch; d++) op->batch[d] = strides[d];
    op->rows = strides[p->n_batch];
    op->cols = strides[p->n_batch + 1];
}

/* Alpha/beta: integer dtypes truncate a float scalar (PyTorch's CPU addmm
 * does the same). */
static void set_scalars(gemm_problem *g, const tp_value *beta, const tp_value *alpha) {
    g->alpha = alpha ? tp_value_as_f64(alpha) : 1.0;
    g->beta = beta ? tp_value_as_f64(beta) : 1.0;
    g->alpha_i = alpha ? tp_value_as_i64(alpha) : 1;
    g->beta_i = beta ? tp_value_as_i64(beta) : 1;
}

/* Run the planned product a @ b (+ addend) into out. */
static tp_status run_plan(const matmul_plan *p, const tp_tensor *a, const tp_tensor *b, const tp_tensor *addend,
                          const tp_value *beta, const tp_value *alpha, tp_tensor *out) {
    gemm_problem g;
    memset(&g, 0, sizeof g);
    g.dtype = a->dtype;
    g.n_batch = p->n_batch;
    memcpy(g.batch_sizes, p->batch_sizes, sizeof g.batch_sizes);
    g.m = p->m;
    g.n = p->n;
    g.k = p->k;
    input_operand(a, p, p->a_nbatch, p->a_row, p->a_col, &g.a);
    input_operand(b, p, p->b_nbatch, p->b_row, p->b_col, &g.b);
    output_operand(out, p, &g.c);
    if (addend) output_operand(addend, p, &g.bias);
    set_scalars(&g, beta, alpha);
    if (tp_tensor_numel(out) > 0) gemm_batched(&g);
    return TP_OK;
}

/* ---- matmul(Tensor self, Tensor other) --------------------------------- */

static tp_status infer_matmul(const tp_value *args, tp_value *out) {
    matmul_plan p;
    TP_TRY(plan_matmul(tp__arg_tensor(args, 0), tp__arg_tensor(args, 1), false, &p));
    return tp__out_dims(out, tp__arg_tensor(args, 0)->dtype, p.out_ndim, p.out_dims);
}

static tp_status kernel_matmul(const tp_value *args, tp_value *out) {
    const tp_tensor *a = tp__arg_tensor(args, 0), *b = tp__arg_tensor(args, 1);
    matmul_plan p;
    TP_TRY(plan_matmul(a, b, false, &p));
    return run_plan(&p, a, b, NULL, NULL, NULL, tp__out_at(out, 0));
}

/* ---- mm(Tensor self, Tensor mat2), bmm(Tensor self, Tensor mat2) ------- */

static tp_status check_rank(const tp_tensor *t, const char *what, int rank) {
    if (rank == 2)
        TP_CHECK(t->ndim == 2, TP_ERR_SHAPE, "%s must be a matrix, got %d-D tensor", what, t->ndim);
    else
        TP_CHECK(t->ndim == rank, TP_ERR_SHAPE, "%s must be a %dD tensor, got %d-D tensor", what, rank, t->ndim);
    return TP_OK;
}

/* bmm-style operands: same batch size, no broadcasting. */
static tp_status check_batches(const tp_tensor *b1, const tp_tensor *b2, const char *what2) {
    TP_CHECK(tp__dim_eq(tp__dim(b2, 0), tp__dim(b1, 0), "batch dims") &&
                 tp__dim_eq(tp__dim(b1, 2), tp__dim(b2, 1), "matrix inner dims"),
             TP_ERR_SHAPE,
             "Expected size for first two dimensions of %s tensor to be: [%" PRId64 ", %" PRId64 "] but got: [%" PRId64
             ", %" PRId64 "].",
             what2, b1->sizes[0], b1->sizes[2], b2->sizes[0], b2->sizes[1]);
    return TP_OK;
}

static tp_status plan_mm(const tp_value *args, int first, const char *n1, const char *n2, int rank, matmul_plan *p) {
    const tp_tensor *a = tp__arg_tensor(args, first), *b = tp__arg_tensor(args, first + 1);
    TP_TRY(check_rank(a, n1, rank));
    TP_TRY(check_rank(b, n2, rank));
    TP_TRY(check_dtypes(a, b));
    if (rank == 3) TP_TRY(check_batches(a, b, n2));
    return plan_matmul(a, b, false, p);
}

static tp_status infer_mm(const tp_value *args, tp_value *out) {
    matmul_plan p;
    TP_TRY(plan_mm(args, 0, "self", "mat2", 2, &p));
    return tp__out_dims(out, tp__arg_tensor(args, 0)->dtype, p.out_ndim, p.out_dims);
}

static tp_status infer_bmm(const tp_value *args, tp_value *out) {
    matmul_plan p;
    TP_TRY(plan_mm(args, 0, "self", "mat2", 3, &p));
    return tp__out_dims(out, tp__arg_tensor(args, 0)->dtype, p.out_ndim, p.out_dims);
}

/* mm and bmm validate in infer (always run first); the plan is the same. */
static tp_status kernel_mm(const tp_value *args, tp_value *out) { return kernel_matmul(args, out); }

/* ---- addmm / baddbmm ----------------------------------------------------
 * op(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1)
 *   = beta * self + alpha * (mat1 @ mat2), self broadcast to the result. */

static tp_status plan_addmm(const tp_value *args, int rank, matmul_plan *p) {
    const char *n1 = rank == 2 ? "mat1" : "batch1", *n2 = rank == 2 ? "mat2" : "batch2";
    TP_TRY(plan_mm(args, 1, n1, n2, rank, p));
    return check_addend(tp__arg_tensor(args, 0), "self", tp__arg_tensor(args, 1)->dtype, p->out_ndim, p->out_dims);
}

static tp_status infer_addmm(const tp_value *args, tp_value *out) {
    matmul_plan p;
    TP_TRY(plan_addmm(args, 2, &p));
    return tp__out_dims(out, tp__arg_tensor(args, 1)->dtype, p.out_ndim, p.out_dims);
}

static tp_status infer_baddbmm(const tp_value *args, tp_value *out) {
    matmul_plan p;
    TP_TRY(plan_addmm(args, 3, &p));
    return tp__out_dims(out, tp__arg_tensor(args, 1)->dtype, p.out_ndim, p.out_dims);
}

static tp_status kernel_addmm(const tp_value *args, tp_value *out) {
    const tp_tensor *a = tp__arg_tensor(args, 1), *b = tp__arg_tensor(args, 2);
    matmul_plan p;
    TP_TRY(plan_matmul(a, b, false, &p));
    return run_plan(&p, a, b, tp__arg_tensor(args, 0), &args[3], &args[4], tp__out_at(out, 0));
}

/* ---- linear(Tensor input, Tensor weight, Tensor? bias=None) ------------
 * input [..., in] @ weight[out, in]^T (+ bias broadcast to the result);
 * a 1-D weight [in] gives a result without the out dim. */

static tp_status plan_linear(const tp_value *args, matmul_plan *p) {
    const tp_tensor *input = tp__arg_tensor(args, 0), *weight = tp__arg_tensor(args, 1);
    TP_CHECK(weight->ndim == 1 || weight->ndim == 2, TP_ERR_SHAPE, "weight must be 1-D or 2-D, got %d-D", weight->ndim);
    TP_TRY(plan_matmul(input, weight, true, p));
    if (!tp__arg_is_none(args, 2))
        TP_TRY(check_addend(tp__arg_tensor(args, 2), "bias", input->dtype, p->out_ndim, p->out_dims));
    return TP_OK;
}

static tp_status infer_linear(const tp_value *args, tp_value *out) {
    matmul_plan p;
    TP_TRY(plan_linear(args, &p));
    return tp__out_dims(out, tp__arg_tensor(args, 0)->dtype, p.out_ndim, p.out_dims);
}

static tp_status kernel_linear(const tp_value *args, tp_value *out) {
    const tp_tensor *input = tp__arg_tensor(args, 0), *weight = tp__arg_tensor(args, 1);
    matmul_plan p;
    TP_TRY(plan_matmul(input, weight, true, &p));
    return run_plan(&p, input, weight, tp__arg_is_none(args, 2) ? NULL : tp__arg_tensor(args, 2), NULL, NULL,
                    tp__out_at(out, 0));
}

/* ---- vector products --------------------------------------------------------
 * dot, mv, addmv reuse the GEMM problem above; outer, addr, kron, inner,
 * cross and trace are plain strided loops. Float dtypes compute in double
 * from operands rounded to the computation dtype and round once on store;
 * integer dtypes wrap; bool products are logical and. */

static double round_to(double v, tp_dtype ct) {
    switch (ct) {
    case TP_FLOAT32: return (float)v;
    case TP_FLOAT16: return tp__f16_to_f32(tp__f32_to_f16((float)v));
    case TP_BFLOAT16: return tp__bf16_to_f32(tp__f32_to_bf16((float)v));
    default: return v;
    }
}

/* Element at p (dtype dt) as a value of the floating computation dtype ct. */
static double load_as(const char *p, tp_dtype dt, tp_dtype ct) {
    if (dt == ct) return tp__load_f64(p, dt);
    if (tp_dtype_is_float(dt)) return round_to(tp__load_f64(p, dt), ct);
    int64_t v = tp__load_i64(p, dt);
    return ct == TP_FLOAT64 ? (double)v : round_to((double)(float)v, ct);
}

static tp_status not_implemented_for(const char *what, tp_dtype dtype) {
    static const char *const names[TP_DTYPE_COUNT] = {"Float", "Double", "Half", "BFloat16", "Long",
                                                      "Int",   "Short",  "Char", "Byte",     "Bool"};
    return tp_error(TP_ERR_TYPE, "\"%s\" not implemented for '%s'", what,
                    (unsigned)dtype < TP_DTYPE_COUNT ? names[dtype] : "?");
}

static tp_status same_dtype(const tp_tensor *a, const tp_tensor *b) {
    TP_CHECK(a->dtype == b->dtype, TP_ERR_TYPE, "expected scalar type %s but found %s", tp_dtype_name(a->dtype),
             tp_dtype_name(b->dtype));
    return TP_OK;
}

/* dot(Tensor self, Tensor tensor): 1-D . 1-D -> 0-d */
static tp_status check_dot(const tp_value *args) {
    const tp_tensor *a = tp__arg_tensor(args, 0), *b = tp__arg_tensor(args, 1);
    char b1[64], b2[64];
    TP_CHECK(a->ndim == 1 && b->ndim == 1, TP_ERR_SHAPE, "1D tensors expected, but got %dD and %dD tensors", a->ndim,
             b->ndim);
    TP_CHECK(a->dtype == b->dtype, TP_ERR_TYPE, "dot : expected both vectors to have same dtype, but found %s and %s",
             tp_dtype_name(a->dtype), tp_dtype_name(b->dtype));
    TP_CHECK(tp__dim_eq(tp__dim(a, 0), tp__dim(b, 0), "dot: equal lengths"), TP_ERR_SHAPE,
             "inconsistent tensor size, expected tensor %s and src %s to have the same number of elements, but got "
             "%" PRId64 " and %" PRId64 " elements respectively",
             dims_str(a, b1, sizeof b1), dims_str(b, b2, sizeof b2), a->sizes[0], b->sizes[0]);
    if (a->dtype == TP_BOOL || a->dtype == TP_FLOAT16 || a->dtype == TP_BFLOAT16)
        return not_implemented_for("dot", a->dtype);
    return TP_OK;
}

static tp_status infer_dot(const tp_value *args, tp_value *out) {
    TP_TRY(check_dot(args));
    return tp__out_dims(out, tp__arg_tensor(args, 0)->dtype, 0, NULL);
}

/* mv(Tensor self, Tensor vec); addmv(Tensor self, Tensor mat, Tensor vec,
 * *, Scalar beta=1, Scalar alpha=1) = beta * self + alpha * (mat @ vec),
 * self (at most 1-D, any dtype: converted) broadcast to [m]. */
static tp_status check_mv(const tp_tensor *self, const tp_tensor *mat, const tp_tensor *vec) {
    int sd = self ? self->ndim : 1;
    TP_CHECK(mat->ndim == 2 && vec->ndim == 1 && sd <= 1, TP_ERR_SHAPE,
             "vector + matrix @ vector expected, got %d, %d, %d", sd, mat->ndim, vec->ndim);
    int64_t m = self && self->ndim == 1 ? self->sizes[0] : mat->sizes[0];
    bool self_ok = !self || self->ndim == 0 ||
                   broadcasts_to(tp__dim(self, 0), tp__dim(mat, 0), "self broadcasts to the product");
    TP_CHECK(tp__dim_eq(tp__dim(mat, 1), tp__dim(vec, 0), "mat.shape[1] == vec.shape[0]") && self_ok, TP_ERR_SHAPE,
             "size mismatch, got %" PRId64 ", %" PRId64 "x%" PRId64 ",%" PRId64, m, mat->sizes[0], mat->sizes[1],
             vec->sizes[0]);
    TP_TRY(same_dtype(mat, vec));
    if (mat->dtype == TP_BOOL) return not_implemented_for("addmv_impl_cpu", mat->dtype);
    return TP_OK;
}

static tp_status infer_mv(const tp_value *args, tp_value *out) {
    const tp_tensor *mat = tp__arg_tensor(args, 0);
    TP_TRY(check_mv(NULL, mat, tp__arg_tensor(args, 1)));
    tp_sdim m = tp__dim(mat, 0);
    return tp__out_dims(out, mat->dtype, 1, &m);
}

static tp_status infer_addmv(const tp_value *args, tp_value *out) {
    const tp_tensor *mat = tp__arg_tensor(args, 1);
    TP_TRY(check_mv(tp__arg_tensor(args, 0), mat, tp__arg_tensor(args, 2)));
    tp_sdim m = tp__dim(mat, 0);
    return tp__out_dims(out, mat->dtype, 1, &m);
}

static tp_status kernel_addmv(const tp_value *args, tp_value *out) {
    const tp_tensor *mat = tp__arg_tensor(args, 1), *vec = tp__arg_tensor(args, 2);
    tp_tensor *self = tp__arg_tensor(args, 0), *conv = NULL;
    matmul_plan p;
    TP_TRY(plan_matmul(mat, vec, false, &p));
    if (self->dtype != mat->dtype) TP_TRY(tp_tensor_to(self, mat->dtype, &conv));
    tp_status st = run_plan(&p, mat, vec, conv ? conv : self, &args[3], &args[4], tp__out_at(out, 0));
    tp_tensor_free(conv);
    return st;
}

/* outer(Tensor self, Tensor vec2) = self[:, None] * vec2, PyTorch promotion;
 * addr(Tensor self, Tensor vec1, Tensor vec2, *, Scalar beta=1, Scalar alpha=1)
 * = beta * self + alpha * outer(vec1, vec2), self broadcast to the result
 * (ignored when beta is 0). */
static tp_status check_vector(const tp_tensor *t, const char *op, const char *what) {
    TP_CHECK(t->ndim == 1, TP_ERR_SHAPE, "%s: Expected 1-D argument %s, but got %d-D", op, what, t->ndim);
    return TP_OK;
}

static tp_status check_expand(const tp_tensor *t, int ndim, const tp_sdim *dims) {
    char b1[320], b2[320];
    int64_t sizes[TP_MAX_DIMS];
    for (int d = 0; d < ndim; d++) sizes[d] = dims[d].v;
    TP_CHECK(t->ndim <= ndim, TP_ERR_SHAPE,
             "the number of sizes provided (%d) must be greater or equal to the number of dimensions in the "
             "tensor (%d)",
             ndim, t->ndim);
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t want = sizes[ndim - t->ndim + d];
        TP_CHECK(broadcasts_to(tp__dim(t, d), dims[ndim - t->ndim + d], "self broadcasts to the product"), TP_ERR_SHAPE,
                 "The expanded size of the tensor (%" PRId64 ") must match the existing size (%" PRId64
                 ") at non-singleton dimension %d.  Target sizes: %s.  Tensor sizes: %s",
                 want, t->sizes[d], ndim - t->ndim + d, tp__shape_str(ndim, sizes, b1, sizeof b1),
                 dims_str(t, b2, sizeof b2));
    }
    return TP_OK;
}

/* One result element from up to three operand pointers:
 * beta * s + alpha * a * b (s NULL: no addend). */
typedef struct prod_ctx {
    tp_dtype ct, da, db, ds;
    double alpha, beta;
    int64_t alpha_i, beta_i;
    bool has_self;
} prod_ctx;

static void prod_store(const prod_ctx *c, char *po, tp_dtype od, const char *pa, const char *pb, const char *ps) {
    if (tp_dtype_is_float(c->ct)) {
        tp_dtype ct = c->ct;
        double va = load_as(pa, c->da, ct), vb = load_as(pb, c->db, ct);
        double r = c->alpha == 1.0 ? va * vb : round_to(round_to(c->alpha, ct) * va, ct) * vb;
        if (ps && c->beta != 0.0) r = round_to(r, ct) + round_to(round_to(c->beta, ct) * load_as(ps, c->ds, ct), ct);
        tp__store_f64(po, od, r);
    } else if (c->ct == TP_BOOL) {
        bool r = c->alpha_i != 0 && tp__load_i64(pa, c->da) != 0 && tp__load_i64(pb, c->db) != 0;
        if (ps && c->beta_i != 0 && tp__load_i64(ps, c->ds) != 0) r = true;
        tp__store_i64(po, od, r);
    } else {
        int64_t r = wrap_mul(wrap_mul(c->alpha_i, tp__load_i64(pa, c->da)), tp__load_i64(pb, c->db));
        if (ps && c->beta_i != 0) r = wrap_add(r, wrap_mul(c->beta_i, tp__load_i64(ps, c->ds)));
        tp__store_i64(po, od, r);
    }
}

/* out[i] = prod(a[i], b[i] (, s[i])) over out's shape, operands broadcast. */
static tp_status prod_run(prod_ctx *c, tp_tensor *out, const tp_tensor *a, const tp_tensor *b, const tp_tensor *s) {
    c->da = a->dtype;
    c->db = b->dtype;
    c->ds = s ? s->dtype : c->ct;
    tp_iter it;
    if (s) tp__iter_init(&it, out->ndim, out->sizes, 4, (const tp_tensor *[]){out, a, b, s});
    else tp__iter_init(&it, out->ndim, out->sizes, 3, (const tp_tensor *[]){out, a, b});
    while (tp__iter_next(&it)) prod_store(c, it.ptr[0], out->dtype, it.ptr[1], it.ptr[2], s ? it.ptr[3] : NULL);
    return TP_OK;
}

static tp_dtype result_type_of(const tp_value *args, int first, int n) {
    const tp_value *vals[3];
    for (int k = 0; k < n; k++) vals[k] = &args[first + k];
    return tp__result_type(vals, n);
}

static tp_status infer_outer(const tp_value *args, tp_value *out) {
    const tp_tensor *a = tp__arg_tensor(args, 0), *b = tp__arg_tensor(args, 1);
    TP_TRY(check_vector(a, "outer", "self"));
    TP_TRY(check_vector(b, "outer", "vec2"));
    tp_sdim sizes[2] = {tp__dim(a, 0), tp__dim(b, 0)};
    return tp__out_dims(out, result_type_of(args, 0, 2), 2, sizes);
}

/* a [n] as an [n, 1] view. */
static tp_status column_view(tp_tensor *a, tp_tensor **out) {
    int64_t sizes[2] = {a->sizes[0], 1}, strides[2] = {a->strides[0], 0};
    return tp_tensor_as_strided(a, 2, sizes, strides, a->offset, out);
}

static tp_status kernel_outer(const tp_value *args, tp_value *out) {
    tp_tensor *col;
    TP_TRY(column_view(tp__arg_tensor(args, 0), &col));
    tp_tensor *o = tp__out_at(out, 0);
    prod_ctx c = {.ct = o->dtype, .alpha = 1.0, .alpha_i = 1};
    tp_status st = prod_run(&c, o, col, tp__arg_tensor(args, 1), NULL);
    tp_tensor_free(col);
    return st;
}

static tp_status scalar_arg(const tp_value *v, tp_dtype ct, const char *what, double *f, int64_t *i) {
    TP_CHECK(tp_dtype_is_float(ct) || v->kind != TP_VAL_FLOAT, TP_ERR_TYPE,
             "For integral input tensors, argument %s must not be a floating point number.", what);
    *f = tp_value_as_f64(v);
    *i = tp_value_as_i64(v);
    return TP_OK;
}

static tp_status plan_addr(const tp_value *args, prod_ctx *c, tp_sdim *sizes) {
    const tp_tensor *self = tp__arg_tensor(args, 0), *a = tp__arg_tensor(args, 1), *b = tp__arg_tensor(args, 2);
    TP_TRY(check_vector(a, "addr", "vec1"));
    TP_TRY(check_vector(b, "addr", "vec2"));
    sizes[0] = tp__dim(a, 0);
    sizes[1] = tp__dim(b, 0);
    TP_TRY(check_expand(self, 2, sizes));
    memset(c, 0, sizeof *c);
    c->ct = result_type_of(args, 0, 3);
    TP_TRY(scalar_arg(&args[3], c->ct, "beta", &c->beta, &c->beta_i));
    TP_TRY(scalar_arg(&args[4], c->ct, "alpha", &c->alpha, &c->alpha_i));
    return TP_OK;
}

static tp_status infer_addr(const tp_value *args, tp_value *out) {
    prod_ctx c;
    tp_sdim sizes[2];
    TP_TRY(plan_addr(args, &c, sizes));
    return tp__out_dims(out, c.ct, 2, sizes);
}

static tp_status kernel_addr(const tp_value *args, tp_value *out) {
    prod_ctx c;
    tp_sdim sizes[2];
    TP_TRY(plan_addr(args, &c, sizes));
    tp_tensor *col;
    TP_TRY(column_view(tp__arg_tensor(args, 1), &col));
    tp_status st = prod_run(&c, tp__out_at(out, 0), col, tp__arg_tensor(args, 2), tp__arg_tensor(args, 0));
    tp_tensor_free(col);
    return st;
}

/* kron(Tensor self, Tensor other): shapes right-aligned (leading 1s), result
 * dim d of size a[d] * b[d], element a[i / b] * b[i % b]. */
static tp_status plan_kron(const tp_tensor *a, const tp_tensor *b, int *nd, int64_t *sizes, tp_sdim *dims) {
    *nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    TP_CHECK(2 * *nd <= TP_MAX_DIMS, TP_ERR_UNSUPPORTED, "kron of %d-D tensors is not supported (at most %d-D)", *nd,
             TP_MAX_DIMS / 2);
    for (int d = 0; d < *nd; d++) {
        int da = d - (*nd - a->ndim), db = d - (*nd - b->ndim);
        tp_sdim k = tp__dim_mul(da >= 0 ? tp__dim(a, da) : tp__dimk(1), db >= 0 ? tp__dim(b, db) : tp__dimk(1));
        sizes[d] = k.v;
        if (dims) dims[d] = k;
    }
    return TP_OK;
}

static tp_status infer_kron(const tp_value *args, tp_value *out) {
    int nd;
    int64_t sizes[TP_MAX_DIMS];
    tp_sdim dims[TP_MAX_DIMS];
    TP_TRY(plan_kron(tp__arg_tensor(args, 0), tp__arg_tensor(args, 1), &nd, sizes, dims));
    return tp__out_dims(out, result_type_of(args, 0, 2), nd, dims);
}

static tp_status kernel_kron(const tp_value *args, tp_value *out) {
    tp_tensor *a = tp__arg_tensor(args, 0), *b = tp__arg_tensor(args, 1), *o = tp__out_at(out, 0);
    int nd;
    int64_t sizes[TP_MAX_DIMS];
    TP_TRY(plan_kron(a, b, &nd, sizes, NULL));
    /* [a0, b0, a1, b1, ...] views of the output, a and b */
    int64_t vs[TP_MAX_DIMS], os[TP_MAX_DIMS], as[TP_MAX_DIMS], bs[TP_MAX_DIMS], av[TP_MAX_DIMS], bv[TP_MAX_DIMS];
    for (int d = nd - 1; d >= 0; d--) {
        int da = d - (nd - a->ndim), db = d - (nd - b->ndim);
        int64_t sa = da >= 0 ? a->sizes[da] : 1, sb = db >= 0 ? b->sizes[db] : 1;
        vs[2 * d] = sa;
        vs[2 * d + 1] = sb;
        av[2 * d] = sa;
        av[2 * d + 1] = 1;
        bv[2 * d] = 1;
        bv[2 * d + 1] = sb;
        os[2 * d + 1] = o->strides[d];
        os[2 * d] = o->strides[d] * sb;
        as[2 * d] = da >= 0 ? a->strides[da] : 0;
        as[2 * d + 1] = 0;
        bs[2 * d] = 0;
        bs[2 * d + 1] = db >= 0 ? b->strides[db] : 0;
    }
    tp_tensor *ov = NULL, *avw = NULL, *bvw = NULL;
    tp_status st = tp_tensor_as_strided(o, 2 * nd, vs, os, o->offset, &ov);
    if (st == TP_OK) st = tp_tensor_as_strided(a, 2 * nd, av, as, a->offset, &avw);
    if (st == TP_OK) st = tp_tensor_as_strided(b, 2 * nd, bv, bs, b->offset, &bvw);
    if (st == TP_OK) {
        prod_ctx c = {.ct = o->dtype, .alpha = 1.0, .alpha_i = 1};
        st = prod_run(&c, ov, avw, bvw, NULL);
    }
    tp_tensor_free(ov);
    tp_tensor_free(avw);
    tp_tensor_free(bvw);
    return st;
}

/* inner(Tensor self, Tensor other): sum over the last dims, result
 * self.shape[:-1] + other.shape[:-1]; a 0-d operand multiplies (promotion). */
static tp_status plan_inner(const tp_value *args, int *nd, tp_sdim *sizes, tp_dtype *dt) {
    const tp_tensor *a = tp__arg_tensor(args, 0), *b = tp__arg_tensor(args, 1);
    char b1[320], b2[320];
    if (a->ndim == 0 || b->ndim == 0) {
        const tp_tensor *t = a->ndim == 0 ? b : a;
        *nd = tp__dims(t, sizes);
        *dt = result_type_of(args, 0, 2);
        return TP_OK;
    }
    TP_CHECK(tp__dim_eq(tp__dim(a, a->ndim - 1), tp__dim(b, b->ndim - 1), "inner: equal last dims"), TP_ERR_SHAPE,
             "inner() the last dimension must match on both input tensors but got shapes %s and %s",
             dims_str(a, b1, sizeof b1), dims_str(b, b2, sizeof b2));
    TP_TRY(same_dtype(a, b));
    if (a->dtype == TP_BOOL) return not_implemented_for("addmm_impl_cpu_", a->dtype);
    *nd = a->ndim + b->ndim - 2;
    TP_CHECK(*nd <= TP_MAX_DIMS, TP_ERR_SHAPE, "inner: the result would have %d dims (at most %d)", *nd, TP_MAX_DIMS);
    for (int d = 0; d < a->ndim - 1; d++) sizes[d] = tp__dim(a, d);
    for (int d = 0; d < b->ndim - 1; d++) sizes[a->ndim - 1 + d] = tp__dim(b, d);
    *dt = a->dtype;
    return TP_OK;
}

static tp_status infer_inner(const tp_value *args, tp_value *out) {
    int nd = 0;
    tp_sdim sizes[TP_MAX_DIMS];
    tp_dtype dt = TP_FLOAT32;
    TP_TRY(plan_inner(args, &nd, sizes, &dt));
    return tp__out_dims(out, dt, nd, sizes);
}

static tp_status kernel_inner(const tp_value *args, tp_value *out) {
    tp_tensor *a = tp__arg_tensor(args, 0), *b = tp__arg_tensor(args, 1), *o = tp__out_at(out, 0);
    if (a->ndim == 0 || b->ndim == 0) {
        prod_ctx c = {.ct = o->dtype, .alpha = 1.0, .alpha_i = 1};
        return prod_run(&c, o, a, b, NULL);
    }
    int na = a->ndim - 1, nb = b->ndim - 1;
    int64_t k = a->sizes[na], es = (int64_t)tp_dtype_size(a->dtype);
    int64_t ka = a->strides[na] * es, kb = b->strides[nb] * es;
    int64_t as[TP_MAX_DIMS], bs[TP_MAX_DIMS], av[TP_MAX_DIMS], bv[TP_MAX_DIMS];
    for (int d = 0; d < o->ndim; d++) {
        bool in_a = d < na;
        av[d] = in_a ? a->sizes[d] : 1;
        as[d] = in_a ? a->strides[d] : 0;
        bv[d] = in_a ? 1 : b->sizes[d - na];
        bs[d] = in_a ? 0 : b->strides[d - na];
    }
    tp_tensor *avw = NULL, *bvw = NULL;
    tp_status st = tp_tensor_as_strided(a, o->ndim, av, as, a->offset, &avw);
    if (st == TP_OK) st = tp_tensor_as_strided(b, o->ndim, bv, bs, b->offset, &bvw);
    if (st == TP_OK) {
        bool is_float = tp_dtype_is_float(a->dtype);
        tp_iter it;
        tp__iter_init(&it, o->ndim, o->sizes, 3, (const tp_tensor *[]){o, avw, bvw});
        while (tp__iter_next(&it)) {
            const char *pa = it.ptr[1], *pb = it.ptr[2];
            if (is_float) {
                double acc = 0;
                for (int64_t p = 0; p < k; p++)
                    acc += tp__load_f64(pa + p * ka, a->dtype) * tp__load_f64(pb + p * kb, b->dtype);
                tp__store_f64(it.ptr[0], o->dtype, acc);
            } else {
                int64_t acc = 0;
                for (int64_t p = 0; p < k; p++) {
                    int64_t x = tp__load_i64(pa + p * ka, a->dtype), y = tp__load_i64(pb + p * kb, b->dtype);
                    acc = wrap_add(acc, wrap_mul(x, y));
                }
                tp__store_i64(it.ptr[0], o->dtype, acc);
            }
        }
    }
    tp_tensor_free(avw);
    tp_tensor_free(bvw);
    return st;
}

/* trace(Tensor self): sum of the main diagonal of a matrix; integer dtypes
 * give int64. */
static tp_status infer_trace(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_CHECK(t->ndim == 2, TP_ERR_SHAPE, "trace: expected a matrix, but got tensor with dim %d", t->ndim);
    if (t->dtype == TP_BOOL || t->dtype == TP_FLOAT16 || t->dtype == TP_BFLOAT16)
        return not_implemented_for("trace", t->dtype);
    return tp__out_dims(out, tp_dtype_is_float(t->dtype) ? t->dtype : TP_INT64, 0, NULL);
}

static tp_status kernel_trace(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    tp_tensor *o = tp__out_at(out, 0);
    int64_t n = t->sizes[0] < t->sizes[1] ? t->sizes[0] : t->sizes[1];
    int64_t step = (t->strides[0] + t->strides[1]) * (int64_t)tp_dtype_size(t->dtype);
    const char *p = n > 0 ? tp__tensor_base(t) : NULL;
    if (tp_dtype_is_float(t->dtype)) {
        double acc = 0;
        for (int64_t i = 0; i < n; i++) acc += tp__load_f64(p + i * step, t->dtype);
        tp__store_f64(tp__tensor_base(o), o->dtype, acc);
    } else {
        int64_t acc = 0;
        for (int64_t i = 0; i < n; i++) acc = wrap_add(acc, tp__load_i64(p + i * step, t->dtype));
        tp__store_i64(tp__tensor_base(o), o->dtype, acc);
    }
    return TP_OK;
}

/* A meta tensor of t's batch dims (all but the last two). */
static tp_status batch_out(tp_value *out, tp_dtype dtype, const tp_tensor *t) {
    tp_sdim dims[TP_MAX_DIMS];
    tp__dims(t, dims);
    return tp__out_dims(out, dtype, t->ndim - 2, dims);
}

/* det(Tensor self) / linalg_det(Tensor A): determinants of the trailing
 * square matrices, by LU with partial pivoting in double. */
static tp_status check_det(const tp_tensor *t) {
    TP_CHECK(t, TP_ERR_TYPE, "linalg.det: argument 'A' must be a tensor");
    TP_CHECK(t->ndim >= 2, TP_ERR_SHAPE, "linalg.det: The input tensor A must have at least 2 dimensions.");
    TP_CHECK(t->dtype == TP_FLOAT32 || t->dtype == TP_FLOAT64, TP_ERR_TYPE,
             "linalg.det: Expected a floating point or complex tensor as input. Got %s", tp_dtype_name(t->dtype));
    TP_CHECK(tp__dim_eq(tp__dim(t, t->ndim - 2), tp__dim(t, t->ndim - 1), "square matrices"), TP_ERR_SHAPE,
             "linalg.det: A must be batches of square matrices, but they are %" PRId64 " by %" PRId64 " matrices",
             t->sizes[t->ndim - 2], t->sizes[t->ndim - 1]);
    return TP_OK;
}

static tp_status infer_det(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_det(t));
    return batch_out(out, t->dtype, t);
}

static tp_status kernel_det(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_det(t));
    tp_tensor *o = tp__out_at(out, 0);
    int64_t n = t->sizes[t->ndim - 1], batch = tp_tensor_numel(o);
    if (batch == 0) return TP_OK;
    double *m = tp_malloc((size_t)(n * n > 0 ? n * n : 1) * sizeof(double));
    TP_CHECK(m != NULL, TP_ERR_NOMEM, "out of memory computing a determinant");
    int64_t es = (int64_t)tp_dtype_size(t->dtype), rs = t->strides[t->ndim - 2], cs = t->strides[t->ndim - 1];
    int64_t oes = (int64_t)tp_dtype_size(o->dtype);
    for (int64_t b = 0; b < batch; b++) {
        /* the batch element's base: walk its index over the leading dims */
        int64_t off = 0, rem = b;
        for (int d = t->ndim - 3; d >= 0; d--) {
            off += (rem % t->sizes[d]) * t->strides[d];
            rem /= t->sizes[d];
        }
        const char *base = tp__tensor_base(t) + off * es;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) m[i * n + j] = tp__load_f64(base + (i * rs + j * cs) * es, t->dtype);
        double det = 1.0;
        for (int64_t k = 0; k < n && det != 0.0; k++) {
            int64_t p = k;
            for (int64_t i = k + 1; i < n; i++)
                if (fabs(m[i * n + k]) > fabs(m[p * n + k])) p = i;
            if (m[p * n + k] == 0.0) {
                det = 0.0;
                break;
            }
            if (p != k) {
                for (int64_t j = 0; j < n; j++) {
                    double tmp = m[k * n + j];
                    m[k * n + j] = m[p * n + j];
                    m[p * n + j] = tmp;
                }
                det = -det;
            }
            det *= m[k * n + k];
            for (int64_t i = k + 1; i < n; i++) {
                double f = m[i * n + k] / m[k * n + k];
                for (int64_t j = k + 1; j < n; j++) m[i * n + j] -= f * m[k * n + j];
            }
        }
        tp__store_f64(tp__tensor_base(o) + b * oes, o->dtype, det);
    }
    tp_free(m);
    return TP_OK;
}

/* cross(Tensor self, Tensor other, int? dim=None): the cross product of
 * 3-vectors along dim (None: self's first dim of size 3), the other dims
 * broadcast; one dtype. */
static tp_status plan_cross(const tp_value *args, int *dim, int *nd, int64_t *sizes, tp_sdim *dims) {
    const tp_tensor *a = tp__arg_tensor(args, 0), *b = tp__arg_tensor(args, 1);
    char b1[320], b2[320];
    TP_TRY(same_dtype(a, b));
    if (a->dtype == TP_BOOL) return not_implemented_for("cross", a->dtype);
    TP_CHECK(a->ndim == b->ndim, TP_ERR_SHAPE,
             "linalg.cross: inputs must have the same number of dimensions (got %d and %d)", a->ndim, b->ndim);
    tp_sdim ad[TP_MAX_DIMS], bd[TP_MAX_DIMS];
    tp__dims(a, ad);
    tp__dims(b, bd);
    TP_CHECK(tp__dims_broadcast(a->ndim, ad, b->ndim, bd, nd, ad) == TP_OK, TP_ERR_SHAPE,
             "shapes %s and %s cannot be broadcast together", dims_str(a, b1, sizeof b1), dims_str(b, b2, sizeof b2));
    for (int d = 0; d < *nd; d++) {
        sizes[d] = ad[d].v;
        if (dims) dims[d] = ad[d];
    }
    if (tp__arg_is_none(args, 2)) {
        *dim = -1;
        for (int d = 0; d < a->ndim && *dim < 0; d++)
            if (a->sizes[d] == 3) *dim = d;
        TP_CHECK(*dim >= 0, TP_ERR_SHAPE, "no dimension of size 3 in input");
    } else {
        TP_TRY(tp__wrap_dim(tp__arg_int(args, 2), a->ndim, dim));
    }
    TP_CHECK(tp__dim_eqk(tp__dim(a, *dim), 3, "cross: 3-vectors") &&
                 tp__dim_eqk(tp__dim(b, *dim), 3, "cross: 3-vectors"),
             TP_ERR_SHAPE,
             "linalg.cross: inputs dimension %d must have length 3. Got %" PRId64 " and %" PRId64, *dim,
             a->sizes[*dim], b->sizes[*dim]);
    return TP_OK;
}

static tp_status infer_cross(const tp_value *args, tp_value *out) {
    int dim, nd;
    int64_t sizes[TP_MAX_DIMS];
    tp_sdim dims[TP_MAX_DIMS];
    TP_TRY(plan_cross(args, &dim, &nd, sizes, dims));
    return tp__out_dims(out, tp__arg_tensor(args, 0)->dtype, nd, dims);
}

static tp_status kernel_cross(const tp_value *args, tp_value *out) {
    tp_tensor *a = tp__arg_tensor(args, 0), *b = tp__arg_tensor(args, 1), *o = tp__out_at(out, 0);
    int dim, nd;
    int64_t sizes[TP_MAX_DIMS];
    TP_TRY(plan_cross(args, &dim, &nd, sizes, NULL));
    int64_t es = (int64_t)tp_dtype_size(a->dtype);
    int64_t sa = a->strides[dim] * es, sb = b->strides[dim] * es, so = o->strides[dim] * es;
    /* iterate over the other dims: dim narrowed to one element */
    tp_tensor *av = NULL, *bv = NULL, *ov = NULL;
    tp_status st = tp_tensor_narrow(a, dim, 0, 1, &av);
    if (st == TP_OK) st = tp_tensor_narrow(b, dim, 0, 1, &bv);
    if (st == TP_OK) st = tp_tensor_narrow(o, dim, 0, 1, &ov);
    if (st == TP_OK) {
        bool is_float = tp_dtype_is_float(a->dtype);
        tp_iter it;
        tp__iter_init(&it, ov->ndim, ov->sizes, 3, (const tp_tensor *[]){ov, av, bv});
        while (tp__iter_next(&it)) {
            char *po = it.ptr[0];
            const char *pa = it.ptr[1], *pb = it.ptr[2];
            for (int i = 0; i < 3; i++) {
                int j = (i + 1) % 3, k = (i + 2) % 3;
                if (is_float) {
                    double r = tp__load_f64(pa + j * sa, a->dtype) * tp__load_f64(pb + k * sb, a->dtype) -
                               tp__load_f64(pa + k * sa, a->dtype) * tp__load_f64(pb + j * sb, a->dtype);
                    tp__store_f64(po + i * so, o->dtype, r);
                } else {
                    int64_t x = wrap_mul(tp__load_i64(pa + j * sa, a->dtype), tp__load_i64(pb + k * sb, a->dtype));
                    int64_t y = wrap_mul(tp__load_i64(pa + k * sa, a->dtype), tp__load_i64(pb + j * sb, a->dtype));
                    int64_t r = (int64_t)((uint64_t)x - (uint64_t)y);
                    tp__store_i64(po + i * so, o->dtype, r);
                }
            }
        }
    }
    tp_tensor_free(av);
    tp_tensor_free(bv);
    tp_tensor_free(ov);
    return st;
}

/* addbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1,
 * Scalar alpha=1) = beta * self + alpha * sum_b batch1[b] @ batch2[b], self
 * broadcast to [n, p] (ignored when beta is 0); one dtype. */
static tp_status plan_addbmm(const tp_value *args, tp_sdim *sizes) {
    const tp_tensor *self = tp__arg_tensor(args, 0), *b1 = tp__arg_tensor(args, 1), *b2 = tp__arg_tensor(args, 2);
    TP_CHECK(b1->ndim == 3, TP_ERR_SHAPE, "batch1 must be a 3D tensor");
    TP_CHECK(b2->ndim == 3, TP_ERR_SHAPE, "batch2 must be a 3D tensor");
    TP_CHECK(tp__dim_eq(tp__dim(b1, 0), tp__dim(b2, 0), "batch1 and batch2: same number of batches"), TP_ERR_SHAPE,
             "batch1 and batch2 must have same number of batches, got %" PRId64 " and %" PRId64, b1->sizes[0],
             b2->sizes[0]);
    TP_CHECK(tp__dim_eq(tp__dim(b1, 2), tp__dim(b2, 1), "batch1.shape[2] == batch2.shape[1]"), TP_ERR_SHAPE,
             "Incompatible matrix sizes for bmm (%" PRId64 "x%" PRId64 " and %" PRId64 "x%" PRId64 ")", b1->sizes[1],
             b1->sizes[2], b2->sizes[1], b2->sizes[2]);
    TP_CHECK(self->dtype == b1->dtype && b1->dtype == b2->dtype, TP_ERR_TYPE,
             "self and mat2 must have the same dtype");
    if (b1->dtype == TP_BOOL) return not_implemented_for("addbmm", b1->dtype);
    sizes[0] = tp__dim(b1, 1);
    sizes[1] = tp__dim(b2, 2);
    return check_expand(self, 2, sizes);
}

static tp_status infer_addbmm(const tp_value *args, tp_value *out) {
    tp_sdim sizes[2];
    TP_TRY(plan_addbmm(args, sizes));
    return tp__out_dims(out, tp__arg_tensor(args, 1)->dtype, 2, sizes);
}

static tp_status kernel_addbmm(const tp_value *args, tp_value *out) {
    tp_sdim dims[2];
    TP_TRY(plan_addbmm(args, dims));
    int64_t sizes[2] = {dims[0].v, dims[1].v};
    tp_tensor *self = tp__arg_tensor(args, 0), *b1 = tp__arg_tensor(args, 1), *b2 = tp__arg_tensor(args, 2);
    tp_tensor *o = tp__out_at(out, 0), *sv;
    TP_TRY(tp_tensor_expand(self, 2, sizes, &sv));
    tp_dtype dt = b1->dtype;
    int64_t es = (int64_t)tp_dtype_size(dt), nb = b1->sizes[0], k = b1->sizes[2];
    double alpha = tp_value_as_f64(&args[4]), beta = tp_value_as_f64(&args[3]);
    int64_t alpha_i = tp_value_as_i64(&args[4]), beta_i = tp_value_as_i64(&args[3]);
    const char *p1 = tp__tensor_base(b1), *p2 = tp__tensor_base(b2), *ps = tp__tensor_base(sv);
    char *po = tp__tensor_base(o);
    for (int64_t i = 0; i < sizes[0]; i++) {
        for (int64_t j = 0; j < sizes[1]; j++) {
            const char *s = ps + (i * sv->strides[0] + j * sv->strides[1]) * es;
            char *d = po + (i * o->strides[0] + j * o->strides[1]) * es;
            if (tp_dtype_is_float(dt)) {
                double acc = 0;
                for (int64_t b = 0; b < nb; b++) {
                    for (int64_t q = 0; q < k; q++) {
                        int64_t o1 = b * b1->strides[0] + i * b1->strides[1] + q * b1->strides[2];
                        int64_t o2 = b * b2->strides[0] + q * b2->strides[1] + j * b2->strides[2];
                        acc += tp__load_f64(p1 + o1 * es, dt) * tp__load_f64(p2 + o2 * es, dt);
                    }
                }
                double r = alpha * acc;
                if (beta != 0.0) r += beta * tp__load_f64(s, dt);
                tp__store_f64(d, dt, r);
            } else {
                int64_t acc = 0;
                for (int64_t b = 0; b < nb; b++) {
                    for (int64_t q = 0; q < k; q++) {
                        int64_t o1 = b * b1->strides[0] + i * b1->strides[1] + q * b1->strides[2];
                        int64_t o2 = b * b2->strides[0] + q * b2->strides[1] + j * b2->strides[2];
                        int64_t x = tp__load_i64(p1 + o1 * es, dt), y = tp__load_i64(p2 + o2 * es, dt);
                        acc = wrap_add(acc, wrap_mul(x, y));
                    }
                }
                int64_t r = wrap_mul(alpha_i, acc);
                if (beta_i != 0) r = wrap_add(r, wrap_mul(beta_i, tp__load_i64(s, dt)));
                tp__store_i64(d, dt, r);
            }
        }
    }
    tp_tensor_free(sv);
    return TP_OK;
}

/* ---- registration ------------------------------------------------------ */

/* ---- factorisations, inverses and solves (issue #13) --------------------
 * inverse, logdet, slogdet, matrix_power, cholesky, cholesky_inverse,
 * cholesky_solve, triangular_solve, matrix_exp, pinverse, lu_solve: one
 * matrix at a time in double (row-major scratch), each result rounded once
 * on store; the solves broadcast their batch dims as PyTorch does. Errors
 * are PyTorch's (LAPACK's info as "the diagonal element k" / "the leading
 * minor of order k", with "(Batch element b): " for batched inputs). */

static const char *torch_type(tp_dtype d) {
    static const char *const names[TP_DTYPE_COUNT] = {"Float", "Double", "Half", "BFloat16", "Long",
                                                      "Int",   "Short",  "Char", "Byte",     "Bool"};
    return (unsigned)d < TP_DTYPE_COUNT ? names[d] : "?";
}

static bool is_f32_f64(tp_dtype d) { return d == TP_FLOAT32 || d == TP_FLOAT64; }

/* Batch dims shared by the operands: the broadcast of their leading dims. */
typedef struct mat_batch {
    int nb;
    int64_t sizes[TP_MAX_DIMS];
    tp_sdim dims[TP_MAX_DIMS]; /* sizes as dims (dim.h) */
    int64_t count;
} mat_batch;

static tp_status batch_broadcast(mat_batch *bt, int n, const tp_tensor *const *ts, const int *lead) {
    bt->nb = 0;
    for (int k = 0; k < n; k++)
        if (lead[k] > bt->nb) bt->nb = lead[k];
    for (int d = 0; d < bt->nb; d++) bt->dims[d] = tp__dimk(1);
    for (int k = 0; k < n; k++)
        for (int d = 0; d < lead[k]; d++) {
            int bd = bt->nb - lead[k] + d;
            tp_sdim r;
            TP_CHECK(tp__dim_broadcast(bt->dims[bd], tp__dim(ts[k], d), &r), TP_ERR_SHAPE,
                     "The size of tensor a (%" PRId64 ") must match the size of tensor b (%" PRId64
                     ") at non-singleton dimension %d",
                     bt->dims[bd].v, ts[k]->sizes[d], bd);
            bt->dims[bd] = r;
        }
    for (int d = 0; d < bt->nb; d++) bt->sizes[d] = bt->dims[d].v;
    bt->count = 1;
    for (int d = 0; d < bt->nb; d++) bt->count *= bt->sizes[d];
    return TP_OK;
}

static void batch_of(mat_batch *bt, const tp_tensor *t, int lead) {
    (void)batch_broadcast(bt, 1, &t, &lead); /* one operand always broadcasts */
}

/* Element offset of batch element b in t, whose `lead` leading dims
 * broadcast against the batch. */
static int64_t batch_off(const tp_tensor *t, int lead, const mat_batch *bt, int64_t b) {
    int64_t off = 0, rem = b;
    for (int d = bt->nb - 1; d >= 0; d--) {
        int64_t i = rem % bt->sizes[d];
        rem /= bt->sizes[d];
        int td = d - (bt->nb - lead);
        if (td >= 0 && t->sizes[td] != 1) off += i * t->strides[td];
    }
    return off;
}

/* The trailing r x c matrix of t at element offset off, row-major. */
static void mat_load(const tp_tensor *t, int64_t off, double *m) {
    int64_t r = t->sizes[t->ndim - 2], c = t->sizes[t->ndim - 1];
    int64_t rs = t->strides[t->ndim - 2], cs = t->strides[t->ndim - 1], es = (int64_t)tp_dtype_size(t->dtype);
    const char *base = tp__tensor_base(t) + off * es;
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) m[i * c + j] = tp__load_f64(base + (i * rs + j * cs) * es, t->dtype);
}

static void mat_store(tp_tensor *t, int64_t off, const double *m) {
    int64_t r = t->sizes[t->ndim - 2], c = t->sizes[t->ndim - 1];
    int64_t rs = t->strides[t->ndim - 2], cs = t->strides[t->ndim - 1], es = (int64_t)tp_dtype_size(t->dtype);
    char *base = tp__tensor_base(t) + off * es;
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) tp__store_f64(base + (i * rs + j * cs) * es, t->dtype, m[i * c + j]);
}

static tp_status scratch(double **p, int64_t n) {
    *p = tp_malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    TP_CHECK(*p != NULL, TP_ERR_NOMEM, "out of memory in a linear-algebra kernel");
    return TP_OK;
}

/* "(Batch element b): " for batched inputs, "" otherwise. */
static const char *batch_prefix(const tp_tensor *t, int64_t b, char *buf, size_t size) {
    if (t->ndim <= 2) return "";
    snprintf(buf, size, "(Batch element %" PRId64 "): ", b);
    return buf;
}

/* PyTorch's checks of a batch of square floating matrices (fn prefixes the
 * messages, as PyTorch's do). */
static tp_status check_square(const tp_tensor *t, const char *fn, bool need_float) {
    TP_CHECK(t->ndim >= 2, TP_ERR_SHAPE, "%s: The input tensor A must have at least 2 dimensions.", fn);
    if (need_float) {
        TP_CHECK(tp_dtype_is_float(t->dtype), TP_ERR_TYPE,
                 "%s: Expected a floating point or complex tensor as input. Got %s", fn, torch_type(t->dtype));
        TP_CHECK(is_f32_f64(t->dtype), TP_ERR_TYPE, "%s: Low precision dtypes not supported. Got %s", fn,
                 torch_type(t->dtype));
    }
    TP_CHECK(tp__dim_eq(tp__dim(t, t->ndim - 2), tp__dim(t, t->ndim - 1), "square matrices"), TP_ERR_SHAPE,
             "%s: A must be batches of square matrices, but they are %" PRId64 " by %" PRId64 " matrices", fn,
             t->sizes[t->ndim - 2], t->sizes[t->ndim - 1]);
    return TP_OK;
}

/* LU with partial pivoting of the n x n row-major a, in place (unit L below
 * the diagonal, U on and above), as LAPACK's getrf: perm[k] is the row
 * swapped with row k at step k; a zero pivot is skipped. Returns the
 * 1-based index of U's first zero diagonal element (0: none); *sign is the
 * permutation's sign. */
static int64_t lu_decompose(double *a, int64_t n, int64_t *perm, int *sign) {
    int64_t info = 0;
    *sign = 1;
    for (int64_t k = 0; k < n; k++) {
        int64_t p = k;
        for (int64_t i = k + 1; i < n; i++)
            if (fabs(a[i * n + k]) > fabs(a[p * n + k])) p = i;
        perm[k] = p;
        if (a[p * n + k] == 0.0) {
            if (!info) info = k + 1;
            continue;
        }
        if (p != k) {
            for (int64_t j = 0; j < n; j++) {
                double t = a[k * n + j];
                a[k * n + j] = a[p * n + j];
                a[p * n + j] = t;
            }
            *sign = -*sign;
        }
        for (int64_t i = k + 1; i < n; i++) {
            double f = a[i * n + k] /= a[k * n + k];
            for (int64_t j = k + 1; j < n; j++) a[i * n + j] -= f * a[k * n + j];
        }
    }
    return info;
}

/* Solve (P L U) x = b for the nrhs columns of the row-major n x nrhs b. */
static void lu_apply(const double *a, int64_t n, const int64_t *perm, double *b, int64_t nrhs) {
    for (int64_t k = 0; k < n; k++)
        if (perm[k] != k)
            for (int64_t j = 0; j < nrhs; j++) {
                double t = b[k * nrhs + j];
                b[k * nrhs + j] = b[perm[k] * nrhs + j];
                b[perm[k] * nrhs + j] = t;
            }
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < i; k++)
            for (int64_t j = 0; j < nrhs; j++) b[i * nrhs + j] -= a[i * n + k] * b[k * nrhs + j];
    for (int64_t i = n - 1; i >= 0; i--) {
        for (int64_t k = i + 1; k < n; k++)
            for (int64_t j = 0; j < nrhs; j++) b[i * nrhs + j] -= a[i * n + k] * b[k * nrhs + j];
        for (int64_t j = 0; j < nrhs; j++) b[i * nrhs + j] /= a[i * n + i];
    }
}

/* Triangular solve T x = b, T the n x n row-major matrix's lower (or upper)
 * triangle, unit diagonal when `unit`; b is n x nrhs. */
static void tri_solve(const double *t, int64_t n, bool upper, bool unit, double *b, int64_t nrhs) {
    for (int64_t s = 0; s < n; s++) {
        int64_t i = upper ? n - 1 - s : s;
        int64_t k0 = upper ? i + 1 : 0, k1 = upper ? n : i;
        for (int64_t k = k0; k < k1; k++)
            for (int64_t j = 0; j < nrhs; j++) b[i * nrhs + j] -= t[i * n + k] * b[k * nrhs + j];
        if (!unit)
            for (int64_t j = 0; j < nrhs; j++) b[i * nrhs + j] /= t[i * n + i];
    }
}

static void set_identity(double *m, int64_t n) {
    for (int64_t i = 0; i < n * n; i++) m[i] = 0.0;
    for (int64_t i = 0; i < n; i++) m[i * n + i] = 1.0;
}

static void transpose_sq(double *m, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i + 1; j < n; j++) {
            double t = m[i * n + j];
            m[i * n + j] = m[j * n + i];
            m[j * n + i] = t;
        }
}

/* c = a b (n x n, c distinct from a and b). */
static void matmul_sq(const double *a, const double *b, double *c, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0.0;
            for (int64_t k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}

/* Invert the n x n m, loaded from t, in place (work: n * n doubles, perm:
 * n); returns getrf's info. PyTorch hands LAPACK the matrix's memory as it
 * is, so a row-major matrix is factored as its transpose (which decides
 * which zero pivot "the diagonal element k" names): so is it here. */
static int64_t invert(const tp_tensor *t, double *m, int64_t n, double *work, int64_t *perm) {
    bool col_major = t->strides[t->ndim - 2] == 1 && t->strides[t->ndim - 1] != 1;
    if (!col_major) transpose_sq(m, n);
    int sign;
    int64_t info = lu_decompose(m, n, perm, &sign);
    if (info) return info;
    set_identity(work, n);
    lu_apply(m, n, perm, work, n);
    memcpy(m, work, (size_t)(n * n) * sizeof(double));
    if (!col_major) transpose_sq(m, n);
    return 0;
}

static tp_status singular_error(const char *fn, const tp_tensor *t, int64_t b, int64_t info) {
    char buf[48];
    return tp_error(TP_ERR_INVALID_ARG,
                    "%s: %sThe diagonal element %" PRId64
                    " is zero, the inversion could not be completed because the input matrix is singular.",
                    fn, batch_prefix(t, b, buf, sizeof buf), info);
}

/* inverse(Tensor self) */
static tp_status infer_inverse(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_square(t, "linalg.inv", true));
    return tp__out_like(out, t->dtype, t);
}

static tp_status kernel_inverse(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_square(t, "linalg.inv", true));
    tp_tensor *o = tp__out_at(out, 0);
    int64_t n = t->sizes[t->ndim - 1];
    mat_batch bt;
    batch_of(&bt, t, t->ndim - 2);
    double *m;
    TP_TRY(scratch(&m, 2 * n * n + n));
    int64_t *perm = (int64_t *)(m + 2 * n * n);
    tp_status st = TP_OK;
    for (int64_t b = 0; b < bt.count && st == TP_OK; b++) {
        mat_load(t, batch_off(t, t->ndim - 2, &bt, b), m);
        int64_t info = invert(t, m, n, m + n * n, perm);
        if (info) st = singular_error("linalg.inv", t, b, info);
        else mat_store(o, batch_off(o, o->ndim - 2, &bt, b), m);
    }
    tp_free(m);
    return st;
}

/* slogdet(Tensor self) -> (sign, logabsdet); logdet(Tensor self): NaN for
 * a negative determinant, -inf for a singular matrix. */
static tp_status infer_logdet(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_square(t, "logdet", true));
    return batch_out(out, t->dtype, t);
}

static tp_status infer_slogdet(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_square(t, "linalg.slogdet", true));
    TP_TRY(tp__out_tuple(out, 2));
    TP_TRY(batch_out(tp_value_at(out, 0), t->dtype, t));
    return batch_out(tp_value_at(out, 1), t->dtype, t);
}

static tp_status run_slogdet(const tp_value *args, tp_value *out, bool tuple) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_square(t, tuple ? "linalg.slogdet" : "logdet", true));
    tp_tensor *os = tp__out_at(out, 0), *ol = tuple ? tp__out_at(out, 1) : NULL;
    int64_t n = t->sizes[t->ndim - 1];
    mat_batch bt;
    batch_of(&bt, t, t->ndim - 2);
    double *m;
    TP_TRY(scratch(&m, n * n + n));
    int64_t *perm = (int64_t *)(m + n * n);
    int64_t es = (int64_t)tp_dtype_size(t->dtype);
    for (int64_t b = 0; b < bt.count; b++) {
        mat_load(t, batch_off(t, t->ndim - 2, &bt, b), m);
        int sign;
        double sg = 0.0, lad = -INFINITY;
        if (!lu_decompose(m, n, perm, &sign)) {
            sg = sign;
            lad = 0.0;
            for (int64_t i = 0; i < n; i++) {
                double d = m[i * n + i];
                if (d < 0) sg = -sg;
                lad += log(fabs(d));
            }
            if (isnan(lad)) sg = NAN;
        }
        if (tuple) {
            tp__store_f64(tp__tensor_base(os) + b * es, os->dtype, sg);
            tp__store_f64(tp__tensor_base(ol) + b * es, ol->dtype, lad);
        } else {
            tp__store_f64(tp__tensor_base(os) + b * es, os->dtype, sg < 0 ? NAN : sg == 0 ? -INFINITY : lad);
        }
    }
    tp_free(m);
    return TP_OK;
}

static tp_status kernel_logdet(const tp_value *args, tp_value *out) { return run_slogdet(args, out, false); }
static tp_status kernel_slogdet(const tp_value *args, tp_value *out) { return run_slogdet(args, out, true); }

/* matrix_power(Tensor self, int n): identity for 0, the inverse's power for
 * n < 0 (floating only), binary powering otherwise; integer matrices in
 * wrapping int64 arithmetic (the same ring as the dtype's). */
static tp_status check_matrix_power(const tp_value *args) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    int64_t n = tp__arg_int(args, 1);
    TP_TRY(check_square(t, "linalg.matrix_power", false));
    if (n < 0) return check_square(t, "linalg.inv", true);
    if (n >= 2)
        TP_CHECK(t->dtype != TP_BOOL && t->dtype != TP_FLOAT16, TP_ERR_TYPE,
                 "\"addmm_impl_cpu_\" not implemented for '%s'", torch_type(t->dtype));
    return TP_OK;
}

static tp_status infer_matrix_power(const tp_value *args, tp_value *out) {
    TP_TRY(check_matrix_power(args));
    const tp_tensor *t = tp__arg_tensor(args, 0);
    return tp__out_like(out, t->dtype, t);
}

static void matmul_sq_i64(const int64_t *a, const int64_t *b, int64_t *c, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            int64_t s = 0;
            for (int64_t k = 0; k < n; k++) s = wrap_add(s, wrap_mul(a[i * n + k], b[k * n + j]));
            c[i * n + j] = s;
        }
}

static tp_status kernel_matrix_power_int(const tp_tensor *t, tp_tensor *o, int64_t p) {
    int64_t n = t->sizes[t->ndim - 1];
    mat_batch bt;
    batch_of(&bt, t, t->ndim - 2);
    int64_t *m = tp_malloc((size_t)(4 * n * n > 0 ? 4 * n * n : 1) * sizeof(int64_t));
    TP_CHECK(m != NULL, TP_ERR_NOMEM, "out of memory in matrix_power");
    int64_t *z = m, *r = m + n * n, *tmp = m + 2 * n * n;
    int64_t es = (int64_t)tp_dtype_size(t->dtype), rs = t->strides[t->ndim - 2], cs = t->strides[t->ndim - 1];
    int64_t ors = o->strides[o->ndim - 2], ocs = o->strides[o->ndim - 1];
    for (int64_t b = 0; b < bt.count; b++) {
        const char *base = tp__tensor_base(t) + batch_off(t, t->ndim - 2, &bt, b) * es;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) z[i * n + j] = tp__load_i64(base + (i * rs + j * cs) * es, t->dtype);
        for (int64_t i = 0; i < n * n; i++) r[i] = 0;
        for (int64_t i = 0; i < n; i++) r[i * n + i] = 1;
        for (int64_t e = p; e > 0; e >>= 1) {
            if (e & 1) {
                matmul_sq_i64(r, z, tmp, n);
                memcpy(r, tmp, (size_t)(n * n) * sizeof(int64_t));
            }
            if (e > 1) {
                matmul_sq_i64(z, z, tmp, n);
                memcpy(z, tmp, (size_t)(n * n) * sizeof(int64_t));
            }
        }
        char *ob = tp__tensor_base(o) + batch_off(o, o->ndim - 2, &bt, b) * es;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) tp__store_i64(ob + (i * ors + j * ocs) * es, o->dtype, r[i * n + j]);
    }
    tp_free(m);
    return TP_OK;
}

static tp_status kernel_matrix_power(const tp_value *args, tp_value *out) {
    TP_TRY(check_matrix_power(args));
    const tp_tensor *t = tp__arg_tensor(args, 0);
    tp_tensor *o = tp__out_at(out, 0);
    int64_t p = tp__arg_int(args, 1);
    if (!tp_dtype_is_float(t->dtype)) return kernel_matrix_power_int(t, o, p);
    int64_t n = t->sizes[t->ndim - 1];
    mat_batch bt;
    batch_of(&bt, t, t->ndim - 2);
    double *m;
    TP_TRY(scratch(&m, 3 * n * n + n));
    double *r = m + n * n, *tmp = m + 2 * n * n;
    int64_t *perm = (int64_t *)(m + 3 * n * n);
    tp_status st = TP_OK;
    for (int64_t b = 0; b < bt.count && st == TP_OK; b++) {
        mat_load(t, batch_off(t, t->ndim - 2, &bt, b), m);
        if (p < 0) {
            int64_t info = invert(t, m, n, tmp, perm);
            if (info) {
                st = singular_error("linalg.inv", t, b, info);
                break;
            }
        }
        set_identity(r, n);
        for (uint64_t e = p < 0 ? -(uint64_t)p : (uint64_t)p; e > 0; e >>= 1) {
            if (e & 1) {
                matmul_sq(r, m, tmp, n);
                memcpy(r, tmp, (size_t)(n * n) * sizeof(double));
            }
            if (e > 1) {
                matmul_sq(m, m, tmp, n);
                memcpy(m, tmp, (size_t)(n * n) * sizeof(double));
            }
        }
        mat_store(o, batch_off(o, o->ndim - 2, &bt, b), r);
    }
    tp_free(m);
    return st;
}

/* cholesky(Tensor self, bool upper=False): L with A = L L^T from A's lower
 * triangle, or U with A = U^T U from its upper triangle (potrf). */
static tp_status check_float_lapack(const tp_tensor *t, const char *kernel) {
    TP_CHECK(is_f32_f64(t->dtype), TP_ERR_TYPE, "\"%s\" not implemented for '%s'", kernel, torch_type(t->dtype));
    return TP_OK;
}

static tp_status infer_cholesky(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_square(t, "cholesky", false));
    TP_TRY(check_float_lapack(t, "cholesky_cpu"));
    return tp__out_like(out, t->dtype, t);
}

/* Factor the lower triangle of the n x n a in place into L (zeros above);
 * returns the order of the first leading minor that is not positive
 * definite (0: none). */
static int64_t chol_lower(double *a, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        double s = a[j * n + j];
        for (int64_t k = 0; k < j; k++) s -= a[j * n + k] * a[j * n + k];
        if (!(s > 0.0)) return j + 1;
        double d = sqrt(s);
        a[j * n + j] = d;
        for (int64_t i = j + 1; i < n; i++) {
            double v = a[i * n + j];
            for (int64_t k = 0; k < j; k++) v -= a[i * n + k] * a[j * n + k];
            a[i * n + j] = v / d;
        }
        for (int64_t i = 0; i < j; i++) a[i * n + j] = 0.0;
    }
    return 0;
}

static tp_status kernel_cholesky(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_square(t, "cholesky", false));
    TP_TRY(check_float_lapack(t, "cholesky_cpu"));
    bool upper = tp__arg_bool(args, 1);
    tp_tensor *o = tp__out_at(out, 0);
    int64_t n = t->sizes[t->ndim - 1];
    mat_batch bt;
    batch_of(&bt, t, t->ndim - 2);
    double *m;
    TP_TRY(scratch(&m, n * n));
    tp_status st = TP_OK;
    for (int64_t b = 0; b < bt.count && st == TP_OK; b++) {
        mat_load(t, batch_off(t, t->ndim - 2, &bt, b), m);
        if (upper) transpose_sq(m, n);
        int64_t info = chol_lower(m, n);
        if (info) {
            char buf[48];
            st = tp_error(TP_ERR_INVALID_ARG,
                          "cholesky: %sThe factorization could not be completed because the input is not "
                          "positive-definite (the leading minor of order %" PRId64 " is not positive-definite).",
                          batch_prefix(t, b, buf, sizeof buf), info);
            break;
        }
        if (upper) transpose_sq(m, n);
        mat_store(o, batch_off(o, o->ndim - 2, &bt, b), m);
    }
    tp_free(m);
    return st;
}

/* The factor L of a Cholesky factorisation as cholesky_inverse /
 * cholesky_solve read it: the lower triangle, or the transposed upper one. */
static void load_factor(const tp_tensor *t, int64_t off, bool upper, double *m) {
    int64_t n = t->sizes[t->ndim - 1];
    mat_load(t, off, m);
    if (upper) transpose_sq(m, n);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i + 1; j < n; j++) m[i * n + j] = 0.0;
}

/* cholesky_inverse(Tensor self, bool upper=False): (L L^T)^-1 (potri). */
static tp_status infer_cholesky_inverse(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_square(t, "cholesky_inverse", false));
    TP_TRY(check_float_lapack(t, "cholesky_inverse_out_cpu"));
    return tp__out_like(out, t->dtype, t);
}

static tp_status kernel_cholesky_inverse(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_square(t, "cholesky_inverse", false));
    TP_TRY(check_float_lapack(t, "cholesky_inverse_out_cpu"));
    bool upper = tp__arg_bool(args, 1);
    tp_tensor *o = tp__out_at(out, 0);
    int64_t n = t->sizes[t->ndim - 1];
    mat_batch bt;
    batch_of(&bt, t, t->ndim - 2);
    double *m;
    TP_TRY(scratch(&m, 3 * n * n));
    double *li = m + n * n, *r = m + 2 * n * n;
    tp_status st = TP_OK;
    for (int64_t b = 0; b < bt.count && st == TP_OK; b++) {
        load_factor(t, batch_off(t, t->ndim - 2, &bt, b), upper, m);
        int64_t info = 0;
        for (int64_t i = 0; i < n && !info; i++)
            if (m[i * n + i] == 0.0) info = i + 1;
        if (info) {
            st = singular_error("cholesky_inverse", t, b, info);
            break;
        }
        set_identity(li, n);
        tri_solve(m, n, false, false, li, n); /* L^-1 */
        for (int64_t i = 0; i < n; i++)       /* (L L^T)^-1 = L^-T L^-1 */
            for (int64_t j = 0; j < n; j++) {
                double s = 0.0;
                for (int64_t k = 0; k < n; k++) s += li[k * n + i] * li[k * n + j];
                r[i * n + j] = s;
            }
        mat_store(o, batch_off(o, o->ndim - 2, &bt, b), r);
    }
    tp_free(m);
    return st;
}

/* The right-hand side b (*, n, k) and matrix A (*, n, n) of cholesky_solve
 * and triangular_solve: PyTorch's checks, the broadcast batch. */
static tp_status check_solve(const tp_tensor *b, const tp_tensor *a, const char *fn, const char *kernel,
                             mat_batch *bt) {
    if (strcmp(fn, "triangular_solve") == 0) {
        TP_CHECK(b->ndim >= 2, TP_ERR_SHAPE,
                 "torch.triangular_solve: Expected b to have at least 2 dimensions, but it has %d dimensions instead",
                 b->ndim);
        TP_CHECK(a->ndim >= 2, TP_ERR_SHAPE,
                 "torch.triangular_solve: Expected A to have at least 2 dimensions, but it has %d dimensions instead",
                 a->ndim);
    } else {
        TP_CHECK(b->ndim >= 2, TP_ERR_SHAPE, "b should have at least 2 dimensions, but has %d dimensions instead",
                 b->ndim);
        TP_CHECK(a->ndim >= 2, TP_ERR_SHAPE, "u should have at least 2 dimensions, but has %d dimensions instead",
                 a->ndim);
    }
    TP_CHECK(b->dtype == a->dtype, TP_ERR_TYPE,
             "Expected b and A to have the same dtype, but found b of type %s and A of type %s instead.",
             torch_type(b->dtype), torch_type(a->dtype));
    TP_CHECK(tp__dim_eq(tp__dim(a, a->ndim - 2), tp__dim(a, a->ndim - 1), "square matrices"), TP_ERR_SHAPE,
             "A must be batches of square matrices, but they are %" PRId64 " by %" PRId64 " matrices",
             a->sizes[a->ndim - 2], a->sizes[a->ndim - 1]);
    TP_CHECK(tp__dim_eq(tp__dim(a, a->ndim - 1), tp__dim(b, b->ndim - 2), "A's columns == b's rows"), TP_ERR_SHAPE,
             "Incompatible matrix sizes for %s: each A matrix is %" PRId64 " by %" PRId64
             " but each b matrix is %" PRId64 " by %" PRId64,
             fn, a->sizes[a->ndim - 2], a->sizes[a->ndim - 1], b->sizes[b->ndim - 2], b->sizes[b->ndim - 1]);
    TP_TRY(check_float_lapack(b, kernel));
    const tp_tensor *ts[2] = {b, a};
    int lead[2] = {b->ndim - 2, a->ndim - 2};
    return batch_broadcast(bt, 2, ts, lead);
}

/* A meta tensor of the batch, then m's matrix dims. */
static tp_status batch_matrix_out(tp_value *out, tp_dtype dtype, const mat_batch *bt, const tp_tensor *m) {
    tp_sdim dims[TP_MAX_DIMS + 2];
    for (int d = 0; d < bt->nb; d++) dims[d] = bt->dims[d];
    dims[bt->nb] = tp__dim(m, m->ndim - 2);
    dims[bt->nb + 1] = tp__dim(m, m->ndim - 1);
    return tp__out_dims(out, dtype, bt->nb + 2, dims);
}

/* cholesky_solve(Tensor self, Tensor input2, bool upper=False): x with
 * L L^T x = self (L = input2, or U^T U with upper). */
static tp_status infer_cholesky_solve(const tp_value *args, tp_value *out) {
    const tp_tensor *b = tp__arg_tensor(args, 0), *a = tp__arg_tensor(args, 1);
    mat_batch bt;
    TP_TRY(check_solve(b, a, "cholesky_solve", "cholesky_solve_cpu", &bt));
    return batch_matrix_out(out, b->dtype, &bt, b);
}

static tp_status kernel_cholesky_solve(const tp_value *args, tp_value *out) {
    const tp_tensor *bm = tp__arg_tensor(args, 0), *a = tp__arg_tensor(args, 1);
    mat_batch bt;
    TP_TRY(check_solve(bm, a, "cholesky_solve", "cholesky_solve_cpu", &bt));
    bool upper = tp__arg_bool(args, 2);
    tp_tensor *o = tp__out_at(out, 0);
    int64_t n = a->sizes[a->ndim - 1], k = bm->sizes[bm->ndim - 1];
    double *m;
    TP_TRY(scratch(&m, n * n + n * k));
    double *x = m + n * n;
    for (int64_t b = 0; b < bt.count; b++) {
        load_factor(a, batch_off(a, a->ndim - 2, &bt, b), upper, m);
        mat_load(bm, batch_off(bm, bm->ndim - 2, &bt, b), x);
        tri_solve(m, n, false, false, x, k); /* L y = b */
        transpose_sq(m, n);
        tri_solve(m, n, true, false, x, k); /* L^T x = y */
        mat_store(o, batch_off(o, o->ndim - 2, &bt, b), x);
    }
    tp_free(m);
    return TP_OK;
}

/* triangular_solve(Tensor self, Tensor A, bool upper=True, bool
 * transpose=False, bool unitriangular=False) -> (solution, cloned_coefficient):
 * op(T) x = self for T A's upper (lower) triangle, op the transpose when
 * asked; a zero diagonal gives inf / NaN as LAPACK's trsm does. */
static tp_status infer_triangular_solve(const tp_value *args, tp_value *out) {
    const tp_tensor *b = tp__arg_tensor(args, 0), *a = tp__arg_tensor(args, 1);
    mat_batch bt;
    TP_TRY(check_solve(b, a, "triangular_solve", "triangular_solve_cpu", &bt));
    TP_TRY(tp__out_tuple(out, 2));
    TP_TRY(batch_matrix_out(tp_value_at(out, 0), b->dtype, &bt, b));
    return batch_matrix_out(tp_value_at(out, 1), a->dtype, &bt, a);
}

static tp_status kernel_triangular_solve(const tp_value *args, tp_value *out) {
    const tp_tensor *bm = tp__arg_tensor(args, 0), *a = tp__arg_tensor(args, 1);
    mat_batch bt;
    TP_TRY(check_solve(bm, a, "triangular_solve", "triangular_solve_cpu", &bt));
    bool upper = tp__arg_bool(args, 2), trans = tp__arg_bool(args, 3), unit = tp__arg_bool(args, 4);
    tp_tensor *o = tp__out_at(out, 0), *oa = tp__out_at(out, 1);
    int64_t n = a->sizes[a->ndim - 1], k = bm->sizes[bm->ndim - 1];
    double *m;
    TP_TRY(scratch(&m, n * n + n * k));
    double *x = m + n * n;
    for (int64_t b = 0; b < bt.count; b++) {
        mat_load(a, batch_off(a, a->ndim - 2, &bt, b), m);
        mat_store(oa, batch_off(oa, oa->ndim - 2, &bt, b), m);
        for (int64_t i = 0; i < n; i++) /* keep the triangle */
            for (int64_t j = 0; j < n; j++)
                if (upper ? j < i : j > i) m[i * n + j] = 0.0;
        if (trans) transpose_sq(m, n);
        mat_load(bm, batch_off(bm, bm->ndim - 2, &bt, b), x);
        tri_solve(m, n, upper != trans, unit, x, k);
        mat_store(o, batch_off(o, o->ndim - 2, &bt, b), x);
    }
    tp_free(m);
    return TP_OK;
}

/* matrix_exp(Tensor self): scaling and squaring, A / 2^s with |A|_1 / 2^s <=
 * 1/2, its Taylor series to convergence, squared s times. */
static tp_status check_matrix_exp(const tp_tensor *t) {
    TP_CHECK(t->ndim >= 2, TP_ERR_SHAPE, "linalg.matrix_exp: The input tensor A must have at least 2 dimensions.");
    TP_CHECK(tp_dtype_is_float(t->dtype), TP_ERR_TYPE,
             "matrix_exp: Expected a floating point or complex tensor as input. Got %s", torch_type(t->dtype));
    TP_CHECK(is_f32_f64(t->dtype), TP_ERR_TYPE, "\"log2_vml_cpu\" not implemented for '%s'", torch_type(t->dtype));
    return check_square(t, "linalg.matrix_exp", false);
}

static tp_status infer_matrix_exp(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_matrix_exp(t));
    return tp__out_like(out, t->dtype, t);
}

static tp_status kernel_matrix_exp(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_matrix_exp(t));
    tp_tensor *o = tp__out_at(out, 0);
    int64_t n = t->sizes[t->ndim - 1];
    mat_batch bt;
    batch_of(&bt, t, t->ndim - 2);
    double *m;
    TP_TRY(scratch(&m, 4 * n * n));
    double *e = m + n * n, *term = m + 2 * n * n, *tmp = m + 3 * n * n;
    for (int64_t b = 0; b < bt.count; b++) {
        mat_load(t, batch_off(t, t->ndim - 2, &bt, b), m);
        double norm = 0.0;
        for (int64_t j = 0; j < n; j++) {
            double c = 0.0;
            for (int64_t i = 0; i < n; i++) c += fabs(m[i * n + j]);
            if (c > norm) norm = c;
        }
        int s = 0;
        if (norm > 0.5 && isfinite(norm)) s = (int)ceil(log2(norm / 0.5));
        if (s > 1000) s = 1000;
        double scale = ldexp(1.0, -s);
        for (int64_t i = 0; i < n * n; i++) m[i] *= scale;
        set_identity(e, n);
        set_identity(term, n);
        for (int k = 1; k <= 60; k++) {
            matmul_sq(term, m, tmp, n);
            double tn = 0.0, en = 0.0;
            for (int64_t i = 0; i < n * n; i++) {
                term[i] = tmp[i] / k;
                e[i] += term[i];
                tn += fabs(term[i]);
                en += fabs(e[i]);
            }
            if (!(tn > 1e-18 * en)) break;
        }
        for (int i = 0; i < s; i++) {
            matmul_sq(e, e, tmp, n);
            memcpy(e, tmp, (size_t)(n * n) * sizeof(double));
        }
        mat_store(o, batch_off(o, o->ndim - 2, &bt, b), e);
    }
    tp_free(m);
    return TP_OK;
}

/* pinverse(Tensor self, float rcond=1e-15): V S^+ U^T from a one-sided
 * Jacobi SVD (Hestenes) of the tall orientation, singular values at most
 * rcond * max(S) dropped (linalg.pinv's rtol). */
static tp_status check_pinv(const tp_tensor *t) {
    if (t->ndim >= 2 && is_f32_f64(t->dtype)) return TP_OK;
    char dims[128] = "";
    size_t len = 0;
    for (int d = 0; d < t->ndim && len < sizeof dims - 24; d++)
        len += (size_t)snprintf(dims + len, sizeof dims - len, "%s%" PRId64, d ? ", " : "", t->sizes[d]);
    return tp_error(TP_ERR_TYPE,
                    "linalg.pinv(%s{[%s]}): expected a tensor with 2 or more dimensions of float, double, cfloat or "
                    "cdouble types",
                    torch_type(t->dtype), dims);
}

static tp_status infer_pinverse(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_pinv(t));
    tp_sdim dims[TP_MAX_DIMS];
    tp__dims(t, dims);
    dims[t->ndim - 2] = tp__dim(t, t->ndim - 1);
    dims[t->ndim - 1] = tp__dim(t, t->ndim - 2);
    return tp__out_dims(out, t->dtype, t->ndim, dims);
}

/* One-sided Jacobi (Hestenes) of the m x n row-major a (m >= n): u (m x n)
 * becomes a's copy rotated into U S (orthogonal columns, norms the
 * singular values), v (n x n) the right singular vectors. */
static void jacobi_tall(const double *a, int64_t m, int64_t n, double *u, double *v) {
    memcpy(u, a, (size_t)(m * n) * sizeof(double));
    set_identity(v, n);
    for (int sweep = 0; sweep < 80; sweep++) {
        bool rotated = false;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = i + 1; j < n; j++) {
                double al = 0.0, be = 0.0, ga = 0.0;
                for (int64_t r = 0; r < m; r++) {
                    al += u[r * n + i] * u[r * n + i];
                    be += u[r * n + j] * u[r * n + j];
                    ga += u[r * n + i] * u[r * n + j];
                }
                if (ga == 0.0 || fabs(ga) <= 1e-17 * sqrt(al * be)) continue;
                rotated = true;
                double zeta = (be - al) / (2.0 * ga);
                double tt = (zeta >= 0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1.0 + zeta * zeta));
                double c = 1.0 / sqrt(1.0 + tt * tt), s = c * tt;
                for (int64_t r = 0; r < m; r++) {
                    double x = u[r * n + i], y = u[r * n + j];
                    u[r * n + i] = c * x - s * y;
                    u[r * n + j] = s * x + c * y;
                }
                for (int64_t r = 0; r < n; r++) {
                    double x = v[r * n + i], y = v[r * n + j];
                    v[r * n + i] = c * x - s * y;
                    v[r * n + j] = s * x + c * y;
                }
            }
        if (!rotated) break;
    }
}

/* Pseudo-inverse of the m x n row-major a (m >= n) into p (n x m); u is
 * a's copy turned into U S, v (n x n) the right singular vectors. */
static void pinv_tall(const double *a, int64_t m, int64_t n, double rcond, double *u, double *v, double *p) {
    jacobi_tall(a, m, n, u, v);
    double smax = 0.0;
    for (int64_t k = 0; k < n; k++) { /* the singular values: U S's column norms */
        double s2 = 0.0;
        for (int64_t r = 0; r < m; r++) s2 += u[r * n + k] * u[r * n + k];
        if (sqrt(s2) > smax) smax = sqrt(s2);
    }
    for (int64_t i = 0; i < n * m; i++) p[i] = 0.0;
    for (int64_t k = 0; k < n; k++) {
        double s2 = 0.0;
        for (int64_t r = 0; r < m; r++) s2 += u[r * n + k] * u[r * n + k];
        if (!(sqrt(s2) > rcond * smax) || s2 == 0.0) continue;
        /* p += v_k (u_k / s_k^2)^T, u_k here the column U S */
        for (int64_t i = 0; i < n; i++)
            for (int64_t r = 0; r < m; r++) p[i * m + r] += v[i * n + k] * u[r * n + k] / s2;
    }
}

static tp_status kernel_pinverse(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_pinv(t));
    double rcond = tp__arg_f64(args, 1);
    tp_tensor *o = tp__out_at(out, 0);
    int64_t rows = t->sizes[t->ndim - 2], cols = t->sizes[t->ndim - 1];
    bool wide = rows < cols;
    int64_t m = wide ? cols : rows, n = wide ? rows : cols; /* the tall orientation */
    mat_batch bt;
    batch_of(&bt, t, t->ndim - 2);
    double *a;
    TP_TRY(scratch(&a, 3 * m * n + n * n));
    double *u = a + m * n, *p = a + 2 * m * n, *v = a + 3 * m * n;
    for (int64_t b = 0; b < bt.count; b++) {
        mat_load(t, batch_off(t, t->ndim - 2, &bt, b), a);
        if (wide) { /* pinv(A) = pinv(A^T)^T */
            memcpy(p, a, (size_t)(m * n) * sizeof(double));
            for (int64_t i = 0; i < rows; i++)
                for (int64_t j = 0; j < cols; j++) a[j * rows + i] = p[i * cols + j];
        }
        pinv_tall(a, m, n, rcond, u, v, p);
        if (wide) { /* p is pinv(A^T): rows x cols; the result is its transpose */
            memcpy(a, p, (size_t)(m * n) * sizeof(double));
            for (int64_t i = 0; i < rows; i++)
                for (int64_t j = 0; j < cols; j++) p[j * rows + i] = a[i * cols + j];
        }
        mat_store(o, batch_off(o, o->ndim - 2, &bt, b), p);
    }
    tp_free(a);
    return TP_OK;
}

/* lu_solve(Tensor self, Tensor LU_data, Tensor LU_pivots): x with P L U x =
 * self, LU and 1-based int32 pivots as lu_factor gives them (getrs). */
static tp_status check_lu_solve(const tp_tensor *b, const tp_tensor *lu, const tp_tensor *piv, mat_batch *bt) {
    TP_CHECK(lu->ndim >= 2, TP_ERR_SHAPE, "linalg.lu_solve: The input tensor LU must have at least 2 dimensions.");
    TP_CHECK(tp__dim_eq(tp__dim(lu, lu->ndim - 2), tp__dim(lu, lu->ndim - 1), "square matrices"), TP_ERR_SHAPE,
             "torch.linalg.lu_solve: A must be batches of square matrices, but they are %" PRId64 " by %" PRId64
             " matrices",
             lu->sizes[lu->ndim - 2], lu->sizes[lu->ndim - 1]);
    TP_CHECK(tp_dtype_is_float(lu->dtype), TP_ERR_TYPE,
             "torch.linalg.lu_solve: Expected a floating point or complex tensor as input. Got %s",
             torch_type(lu->dtype));
    TP_CHECK(is_f32_f64(lu->dtype), TP_ERR_TYPE, "\"lu_solve_cpu\" not implemented for '%s'", torch_type(lu->dtype));
    TP_CHECK(b->ndim >= 2, TP_ERR_SHAPE, "linalg.lu_solve: The input tensor B must have at least 2 dimensions.");
    TP_CHECK(b->dtype == lu->dtype, TP_ERR_TYPE,
             "linalg.lu_solve: Expected LU and B to have the same dtype, but found LU of type %s and B of type %s "
             "instead",
             torch_type(lu->dtype), torch_type(b->dtype));
    TP_CHECK(piv->dtype == TP_INT32, TP_ERR_TYPE,
             "linalg.lu_solve: pivots should be a Tensor of scalar type torch.int32");
    int64_t n = lu->sizes[lu->ndim - 1];
    tp_sdim nd = tp__dim(lu, lu->ndim - 1);
    TP_CHECK(tp__dim_eq(tp__dim(b, b->ndim - 2), nd, "LU's columns == B's rows"), TP_ERR_SHAPE,
             "linalg.lu_solve: Incompatible shapes of A and B for the equation AX = B (%" PRId64 "x%" PRId64
             " and %" PRId64 "x%" PRId64 ")",
             n, n, b->sizes[b->ndim - 2], b->sizes[b->ndim - 1]);
    TP_CHECK(piv->ndim == lu->ndim - 1 && tp__dim_eq(tp__dim(piv, piv->ndim - 1), nd, "pivots per matrix"), TP_ERR_SHAPE,
             "linalg.lu_solve: Number of pivots per batch should be same as the dimension of the matrix");
    for (int d = 0; d < lu->ndim - 2; d++)
        TP_CHECK(tp__dim_eq(tp__dim(piv, d), tp__dim(lu, d), "LU and pivots' batch dims"), TP_ERR_SHAPE,
                 "linalg.lu_solve: Expected LU and pivots to have the same batch dimensions");
    const tp_tensor *ts[2] = {b, lu};
    int lead[2] = {b->ndim - 2, lu->ndim - 2};
    return batch_broadcast(bt, 2, ts, lead);
}

static tp_status infer_lu_solve(const tp_value *args, tp_value *out) {
    const tp_tensor *b = tp__arg_tensor(args, 0), *lu = tp__arg_tensor(args, 1), *piv = tp__arg_tensor(args, 2);
    mat_batch bt;
    TP_TRY(check_lu_solve(b, lu, piv, &bt));
    return batch_matrix_out(out, b->dtype, &bt, b);
}

static tp_status kernel_lu_solve(const tp_value *args, tp_value *out) {
    const tp_tensor *bm = tp__arg_tensor(args, 0), *lu = tp__arg_tensor(args, 1), *piv = tp__arg_tensor(args, 2);
    mat_batch bt;
    TP_TRY(check_lu_solve(bm, lu, piv, &bt));
    tp_tensor *o = tp__out_at(out, 0);
    int64_t n = lu->sizes[lu->ndim - 1], k = bm->sizes[bm->ndim - 1];
    double *m;
    TP_TRY(scratch(&m, n * n + n * k + n));
    double *x = m + n * n;
    int64_t *perm = (int64_t *)(x + n * k);
    tp_status st = TP_OK;
    for (int64_t b = 0; b < bt.count && st == TP_OK; b++) {
        mat_load(lu, batch_off(lu, lu->ndim - 2, &bt, b), m);
        /* the pivots' batch is LU's */
        int64_t poff = 0, rem = b;
        for (int d = bt.nb - 1; d >= 0; d--) {
            int64_t i = rem % bt.sizes[d];
            rem /= bt.sizes[d];
            int td = d - (bt.nb - (lu->ndim - 2));
            if (td >= 0 && piv->sizes[td] != 1) poff += i * piv->strides[td];
        }
        const int32_t *pv = (const int32_t *)tp__tensor_base(piv) + poff;
        int64_t ps = piv->strides[piv->ndim - 1];
        for (int64_t i = 0; i < n; i++) {
            int64_t q = pv[i * ps];
            if (q < 1 || q > n) {
                st = tp_error(TP_ERR_INVALID_ARG,
                              "Pivots given to lu_solve must all be %s. Did you properly pass the result of lu_factor?",
                              q < 1 ? "greater or equal to 1" : "smaller or equal to LU.size(-2)");
                break;
            }
            perm[i] = q - 1;
        }
        if (st != TP_OK) break;
        mat_load(bm, batch_off(bm, bm->ndim - 2, &bt, b), x);
        lu_apply(m, n, perm, x, k);
        mat_store(o, batch_off(o, o->ndim - 2, &bt, b), x);
    }
    tp_free(m);
    return st;
}

/* lu_unpack(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True, bool
 * unpack_pivots=True) -> (P, L, U): LU (*, m, n) as lu_factor gives it, k =
 * min(m, n) 1-based int32 pivots per matrix; L (*, m, k) unit lower, U (*,
 * k, n) upper, P (*, m, m) with A = P L U (row i of A was row perm[i] after
 * the swaps: P[perm[j]][j] = 1). What is not unpacked is an empty [0]. */
static tp_status check_lu_unpack(const tp_tensor *lu, const tp_tensor *piv, int64_t *m, int64_t *n, int64_t *k) {
    TP_CHECK(lu->ndim >= 2, TP_ERR_SHAPE, "torch.lu_unpack: Expected tensor with 2 or more dimensions. Got %d dims instead",
             lu->ndim);
    TP_CHECK(tp_dtype_is_float(lu->dtype), TP_ERR_TYPE, "lu_unpack: expected a floating-point LU_data, got %s",
             tp_dtype_name(lu->dtype));
    TP_CHECK(piv->dtype == TP_INT32, TP_ERR_TYPE,
             "torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype.");
    *m = lu->sizes[lu->ndim - 2];
    *n = lu->sizes[lu->ndim - 1];
    *k = *m < *n ? *m : *n;
    bool ok = piv->ndim == lu->ndim - 1 && piv->sizes[piv->ndim - 1] == *k;
    for (int d = 0; ok && d < lu->ndim - 2; d++) ok = tp__dim_eq(tp__dim(piv, d), tp__dim(lu, d), "lu_unpack batch");
    TP_CHECK(ok, TP_ERR_SHAPE, "lu_unpack: LU_pivots must have LU_data's batch dims and min(m, n) = %" PRId64
             " pivots per matrix", *k);
    return TP_OK;
}

static tp_status infer_lu_unpack(const tp_value *args, tp_value *out) {
    const tp_tensor *lu = tp__arg_tensor(args, 0), *piv = tp__arg_tensor(args, 1);
    bool data = tp__arg_bool(args, 2), pivots = tp__arg_bool(args, 3);
    int64_t m, n, k;
    TP_TRY(check_lu_unpack(lu, piv, &m, &n, &k));
    TP_TRY(tp__out_tuple(out, 3));
    int nb = lu->ndim - 2;
    tp_sdim d[TP_MAX_DIMS + 2];
    for (int i = 0; i < nb; i++) d[i] = tp__dim(lu, i);
    const tp_sdim zero = tp__dimk(0);
    bool made[3] = {pivots, data, data};
    for (int o = 0; o < 3; o++) {
        if (!made[o]) {
            TP_TRY(tp__out_dims(tp_value_at(out, o), lu->dtype, 1, &zero));
            continue;
        }
        d[nb] = o == 0 || o == 1 ? tp__dim(lu, lu->ndim - 2) : tp__dimk(k);
        d[nb + 1] = o == 0 ? tp__dim(lu, lu->ndim - 2) : o == 1 ? tp__dimk(k) : tp__dim(lu, lu->ndim - 1);
        TP_TRY(tp__out_dims(tp_value_at(out, o), lu->dtype, nb + 2, d));
    }
    return TP_OK;
}

static tp_status kernel_lu_unpack(const tp_value *args, tp_value *out) {
    const tp_tensor *lu = tp__arg_tensor(args, 0), *piv = tp__arg_tensor(args, 1);
    bool data = tp__arg_bool(args, 2), pivots = tp__arg_bool(args, 3);
    int64_t m, n, k;
    TP_TRY(check_lu_unpack(lu, piv, &m, &n, &k));
    mat_batch bt;
    const tp_tensor *ts[1] = {lu};
    int lead[1] = {lu->ndim - 2};
    TP_TRY(batch_broadcast(&bt, 1, ts, lead));
    tp_tensor *P = tp__out_at(out, 0), *L = tp__out_at(out, 1), *U = tp__out_at(out, 2);
    double *a;
    TP_TRY(scratch(&a, m * n + m * m + m * k + k * n + m));
    double *pm = a + m * n, *lm = pm + m * m, *um = lm + m * k;
    int64_t *perm = (int64_t *)(um + k * n);
    tp_status st = TP_OK;
    for (int64_t b = 0; b < bt.count && st == TP_OK; b++) {
        if (data) {
            mat_load(lu, batch_off(lu, lu->ndim - 2, &bt, b), a);
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < k; j++) lm[i * k + j] = i > j ? a[i * n + j] : i == j ? 1.0 : 0.0;
            for (int64_t i = 0; i < k; i++)
                for (int64_t j = 0; j < n; j++) um[i * n + j] = j >= i ? a[i * n + j] : 0.0;
            mat_store(L, batch_off(L, L->ndim - 2, &bt, b), lm);
            mat_store(U, batch_off(U, U->ndim - 2, &bt, b), um);
        }
        if (!pivots) continue;
        const int32_t *pv = (const int32_t *)tp__tensor_base(piv) + batch_off(piv, piv->ndim - 1, &bt, b);
        int64_t ps = piv->strides[piv->ndim - 1];
        for (int64_t i = 0; i < m; i++) perm[i] = i;
        for (int64_t i = 0; i < k; i++) {
            int64_t q = pv[i * ps];
            if (q < 1 || q > m) {
                st = tp_error(TP_ERR_INVALID_ARG, "pivots passed to lu_unpack must be between 1 and LU.size(-2) "
                                                  "inclusive.Did you properly pass the result of lu_factor?");
                break;
            }
            int64_t t = perm[i];
            perm[i] = perm[q - 1];
            perm[q - 1] = t;
        }
        if (st != TP_OK) break;
        memset(pm, 0, (size_t)(m * m) * sizeof *pm);
        for (int64_t j = 0; j < m; j++) pm[perm[j] * m + j] = 1.0;
        mat_store(P, batch_off(P, P->ndim - 2, &bt, b), pm);
    }
    tp_free(a);
    return st;
}

/* ---- geqrf, orgqr, ormqr (issue #13) ------------------------------------
 * Householder QR as LAPACK's geqr2 / dlarfg: column k's reflector H = I -
 * tau v v^T (v_k = 1, stored below the diagonal) maps [alpha; x] to [beta;
 * 0] with beta = -sign(alpha) |[alpha; x]|, tau = (beta - alpha) / beta, and
 * tau = 0 (H = I) when x is 0. orgqr forms Q = H_1 ... H_k's first n
 * columns, ormqr applies Q or Q^T to either side of another matrix. */

/* QR-factor the m x n row-major a in place, tau[min(m, n)]. */
static void householder_qr(double *a, int64_t m, int64_t n, double *tau) {
    int64_t kmax = m < n ? m : n;
    for (int64_t k = 0; k < kmax; k++) {
        double alpha = a[k * n + k], xn = 0.0;
        for (int64_t i = k + 1; i < m; i++) xn = hypot(xn, a[i * n + k]);
        if (xn == 0.0) {
            tau[k] = 0.0;
            continue;
        }
        double beta = -copysign(hypot(alpha, xn), alpha);
        tau[k] = (beta - alpha) / beta;
        double scale = 1.0 / (alpha - beta);
        for (int64_t i = k + 1; i < m; i++) a[i * n + k] *= scale;
        a[k * n + k] = beta;
        for (int64_t j = k + 1; j < n; j++) { /* apply H to the trailing columns */
            double w = a[k * n + j];
            for (int64_t i = k + 1; i < m; i++) w += a[i * n + k] * a[i * n + j];
            w *= tau[k];
            a[k * n + j] -= w;
            for (int64_t i = k + 1; i < m; i++) a[i * n + j] -= w * a[i * n + k];
        }
    }
}

/* c (r x cc, row-major) = H c (left) or c H (right) for the reflector in
 * column k of the row-major v (vrows x vcols), tau t. */
static void apply_reflector(const double *v, int64_t vrows, int64_t vcols, int64_t k, double t, double *c, int64_t r,
                            int64_t cc, bool left) {
    if (t == 0.0) return;
    if (left) { /* rows k.. of c */
        for (int64_t j = 0; j < cc; j++) {
            double w = c[k * cc + j];
            for (int64_t i = k + 1; i < vrows; i++) w += v[i * vcols + k] * c[i * cc + j];
            w *= t;
            c[k * cc + j] -= w;
            for (int64_t i = k + 1; i < vrows; i++) c[i * cc + j] -= w * v[i * vcols + k];
        }
    } else { /* columns k.. of c */
        for (int64_t i = 0; i < r; i++) {
            double w = c[i * cc + k];
            for (int64_t j = k + 1; j < vrows; j++) w += c[i * cc + j] * v[j * vcols + k];
            w *= t;
            c[i * cc + k] -= w;
            for (int64_t j = k + 1; j < vrows; j++) c[i * cc + j] -= w * v[j * vcols + k];
        }
    }
}

/* geqrf(Tensor self) -> (a, tau) */
static tp_status check_geqrf(const tp_tensor *t) {
    TP_CHECK(t->ndim >= 2, TP_ERR_SHAPE, "torch.geqrf: input must have at least 2 dimensions.");
    return check_float_lapack(t, "geqrf_cpu");
}

static tp_status infer_geqrf(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_geqrf(t));
    tp_sdim dims[TP_MAX_DIMS];
    tp__dims(t, dims);
    tp_sdim m = dims[t->ndim - 2], n = dims[t->ndim - 1];
    if (!tp__dim_is_const(m) || !tp__dim_is_const(n)) tp__dim_give_up(); /* min() of a dynamic size */
    dims[t->ndim - 2] = tp__dimk(m.v < n.v ? m.v : n.v);
    TP_TRY(tp__out_tuple(out, 2));
    TP_TRY(tp__out_like(tp_value_at(out, 0), t->dtype, t));
    return tp__out_dims(tp_value_at(out, 1), t->dtype, t->ndim - 1, dims);
}

/* tau of batch element b: a vector at the end of t's batch dims */
static void vec_load(const tp_tensor *t, const mat_batch *bt, int64_t b, double *v) {
    int64_t off = 0, rem = b, es = (int64_t)tp_dtype_size(t->dtype);
    for (int d = bt->nb - 1; d >= 0; d--) {
        off += (rem % bt->sizes[d]) * t->strides[d];
        rem /= bt->sizes[d];
    }
    for (int64_t i = 0; i < t->sizes[t->ndim - 1]; i++)
        v[i] = tp__load_f64(tp__tensor_base(t) + (off + i * t->strides[t->ndim - 1]) * es, t->dtype);
}

static void vec_store(tp_tensor *t, const mat_batch *bt, int64_t b, const double *v) {
    int64_t off = 0, rem = b, es = (int64_t)tp_dtype_size(t->dtype);
    for (int d = bt->nb - 1; d >= 0; d--) {
        off += (rem % bt->sizes[d]) * t->strides[d];
        rem /= bt->sizes[d];
    }
    for (int64_t i = 0; i < t->sizes[t->ndim - 1]; i++)
        tp__store_f64(tp__tensor_base(t) + (off + i * t->strides[t->ndim - 1]) * es, t->dtype, v[i]);
}

static tp_status kernel_geqrf(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_geqrf(t));
    tp_tensor *oa = tp__out_at(out, 0), *ot = tp__out_at(out, 1);
    int64_t m = t->sizes[t->ndim - 2], n = t->sizes[t->ndim - 1], k = m < n ? m : n;
    mat_batch bt;
    batch_of(&bt, t, t->ndim - 2);
    double *a;
    TP_TRY(scratch(&a, m * n + k));
    for (int64_t b = 0; b < bt.count; b++) {
        mat_load(t, batch_off(t, t->ndim - 2, &bt, b), a);
        householder_qr(a, m, n, a + m * n);
        mat_store(oa, batch_off(oa, oa->ndim - 2, &bt, b), a);
        vec_store(ot, &bt, b, a + m * n);
    }
    tp_free(a);
    return TP_OK;
}

/* svd(Tensor self, bool some=True, bool compute_uv=True) -> (U, S, V):
 * A = U diag(S) V^T from the one-sided Jacobi of pinverse (of A^T when A is
 * wide, whose factors swap), in double; S descending. The singular vectors
 * of a distinct singular value are unique up to sign only, and PyTorch's
 * (LAPACK's gesdd) signs are not reproducible: tpexport makes the entry of
 * largest magnitude of each column of V (the first such entry on ties)
 * positive, flipping U's column with it; values and the reconstruction
 * U diag(S) V^T match PyTorch's. U's columns of zero singular values
 * (below m eps max(S)), and the columns completing U (some=False, tall) or
 * V (wide) to square, are an orthonormal completion from the unit vectors
 * (Gram-Schmidt, twice), each with its own largest entry made positive. compute_uv=False gives zero U
 * [*, m, m] and V [*, n, n], as PyTorch does. */
static tp_status check_svd(const tp_tensor *t) {
    TP_CHECK(t->ndim >= 2, TP_ERR_SHAPE,
             "linalg.svd: input should have at least 2 dimensions, but has %d dimensions instead", t->ndim);
    TP_CHECK(tp_dtype_is_float(t->dtype), TP_ERR_TYPE,
             "linalg.svd: Expected a floating point or complex tensor as input. Got %s", torch_type(t->dtype));
    TP_CHECK(is_f32_f64(t->dtype), TP_ERR_TYPE, "\"linalg_svd_cpu\" not implemented for '%s'", torch_type(t->dtype));
    return TP_OK;
}

static tp_status infer_svd(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_svd(t));
    bool some = tp__arg_bool(args, 1), uv = tp__arg_bool(args, 2);
    int nd = t->ndim;
    tp_sdim dims[TP_MAX_DIMS];
    tp__dims(t, dims);
    tp_sdim m = dims[nd - 2], n = dims[nd - 1];
    tp_sdim k = tp__dim_min(m, n, "svd: the smaller of the matrix dims");
    TP_TRY(tp__out_tuple(out, 3));
    tp_sdim d[TP_MAX_DIMS];
    memcpy(d, dims, sizeof(tp_sdim) * (size_t)nd);
    d[nd - 2] = m, d[nd - 1] = some && uv ? k : m;
    TP_TRY(tp__out_dims(tp_value_at(out, 0), t->dtype, nd, d));
    d[nd - 2] = k;
    TP_TRY(tp__out_dims(tp_value_at(out, 1), t->dtype, nd - 1, d));
    d[nd - 2] = n, d[nd - 1] = some && uv ? k : n;
    return tp__out_dims(tp_value_at(out, 2), t->dtype, nd, d);
}

/* Columns c0.. of the r x w row-major q (r rows, w columns) completed to
 * orthonormal vectors against the columns before them. */
static void complete_columns(double *q, int64_t r, int64_t w, int64_t c0, double *tmp) {
    int64_t e = 0;
    for (int64_t c = c0; c < w; c++) {
        for (; e < r; e++) {
            for (int64_t i = 0; i < r; i++) tmp[i] = i == e ? 1.0 : 0.0;
            for (int pass = 0; pass < 2; pass++)
                for (int64_t j = 0; j < c; j++) {
                    double dot = 0.0;
                    for (int64_t i = 0; i < r; i++) dot += q[i * w + j] * tmp[i];
                    for (int64_t i = 0; i < r; i++) tmp[i] -= dot * q[i * w + j];
                }
            double nrm = 0.0;
            for (int64_t i = 0; i < r; i++) nrm += tmp[i] * tmp[i];
            nrm = sqrt(nrm);
            if (nrm > 1e-6) {
                for (int64_t i = 0; i < r; i++) q[i * w + c] = tmp[i] / nrm;
                e++;
                break;
            }
        }
    }
}

/* The row of the largest |q[i][c]| (the first on ties). */
static int64_t col_argmax(const double *q, int64_t r, int64_t w, int64_t c) {
    int64_t best = 0;
    for (int64_t i = 1; i < r; i++)
        if (fabs(q[i * w + c]) > fabs(q[best * w + c])) best = i;
    return best;
}

static void flip_col(double *q, int64_t r, int64_t w, int64_t c) {
    for (int64_t i = 0; i < r; i++) q[i * w + c] = -q[i * w + c];
}

/* SVD of the m x n row-major a (m >= n): uf (m x m, its first n columns U),
 * s (n), v (n x n); work: m * n + m doubles. Returns the numerical rank
 * (singular values above m eps max(S)); U's columns from there on are the
 * completion. */
static int64_t svd_tall(const double *a, int64_t m, int64_t n, double *uf, double *s, double *v, double *work) {
    double *us = work, *tmp = work + m * n;
    jacobi_tall(a, m, n, us, v);
    /* sort the columns by norm, descending (selection sort: n is small) */
    for (int64_t k = 0; k < n; k++) {
        double s2 = 0.0;
        for (int64_t r = 0; r < m; r++) s2 += us[r * n + k] * us[r * n + k];
        s[k] = sqrt(s2);
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t b = k;
        for (int64_t j = k + 1; j < n; j++)
            if (s[j] > s[b]) b = j;
        if (b == k) continue;
        double t = s[k];
        s[k] = s[b], s[b] = t;
        for (int64_t r = 0; r < m; r++) t = us[r * n + k], us[r * n + k] = us[r * n + b], us[r * n + b] = t;
        for (int64_t r = 0; r < n; r++) t = v[r * n + k], v[r * n + k] = v[r * n + b], v[r * n + b] = t;
    }
    double tol = n > 0 ? s[0] * (double)m * 2.220446049250313e-16 : 0.0;
    int64_t rank = 0;
    for (int64_t k = 0; k < n; k++) {
        bool keep = s[k] > tol && s[k] > 0.0;
        for (int64_t r = 0; r < m; r++) uf[r * m + k] = keep ? us[r * n + k] / s[k] : 0.0;
        if (keep) rank = k + 1;
    }
    complete_columns(uf, m, m, rank, tmp);
    return rank;
}

static tp_status kernel_svd(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_svd(t));
    bool some = tp__arg_bool(args, 1), uv = tp__arg_bool(args, 2);
    tp_tensor *ou = tp__out_at(out, 0), *os = tp__out_at(out, 1), *ov = tp__out_at(out, 2);
    int64_t rows = t->sizes[t->ndim - 2], cols = t->sizes[t->ndim - 1];
    bool wide = rows < cols;
    int64_t m = wide ? cols : rows, n = wide ? rows : cols; /* the tall orientation */
    int64_t cu = ou->sizes[ou->ndim - 1], cv = ov->sizes[ov->ndim - 1];
    mat_batch bt;
    batch_of(&bt, t, t->ndim - 2);
    double *a;
    TP_TRY(scratch(&a, 3 * m * n + m * m + n * n + n + m + rows * cu + cols * cv + 1));
    double *at = a + m * n, *uf = at + m * n, *v = uf + m * m, *s = v + n * n, *work = s + n;
    double *mu = work + m * n + m, *mv = mu + rows * cu; /* the outputs' row-major matrices */
    (void)some;
    tp_status st = TP_OK;
    for (int64_t b = 0; b < bt.count && st == TP_OK; b++) {
        mat_load(t, batch_off(t, t->ndim - 2, &bt, b), a);
        for (int64_t i = 0; i < rows * cols; i++)
            if (!isfinite(a[i])) {
                st = tp_error(TP_ERR_INVALID_ARG, "linalg.svd: The algorithm failed to converge because the input "
                                                  "matrix contained non-finite values.");
                break;
            }
        if (st != TP_OK) break;
        if (wide) {
            for (int64_t i = 0; i < rows; i++)
                for (int64_t j = 0; j < cols; j++) at[j * rows + i] = a[i * cols + j];
            memcpy(a, at, (size_t)(m * n) * sizeof(double));
        }
        int64_t rank = svd_tall(a, m, n, uf, s, v, work);
        vec_store(os, &bt, b, s);
        /* A = uf[:, :n] S v^T (tall); wide: A^T = that, so U = v and V = uf */
        double *pu = wide ? v : uf, *pv = wide ? uf : v;
        int64_t wu = wide ? n : m, wv = wide ? m : n; /* row widths (and column counts) of pu, pv */
        /* the sign rule: V's column's largest entry positive, U's with it; the free columns on their own */
        for (int64_t k = 0; k < n; k++)
            if (pv[col_argmax(pv, cols, wv, k) * wv + k] < 0) {
                flip_col(pv, cols, wv, k);
                if (k < rank) flip_col(pu, rows, wu, k);
            }
        for (int64_t k = n; k < wv; k++)
            if (pv[col_argmax(pv, cols, wv, k) * wv + k] < 0) flip_col(pv, cols, wv, k);
        for (int64_t k = rank; k < wu; k++)
            if (pu[col_argmax(pu, rows, wu, k) * wu + k] < 0) flip_col(pu, rows, wu, k);
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cu; j++) mu[i * cu + j] = uv ? pu[i * wu + j] : 0.0;
        for (int64_t i = 0; i < cols; i++)
            for (int64_t j = 0; j < cv; j++) mv[i * cv + j] = uv ? pv[i * wv + j] : 0.0;
        mat_store(ou, batch_off(ou, ou->ndim - 2, &bt, b), mu);
        mat_store(ov, batch_off(ov, ov->ndim - 2, &bt, b), mv);
    }
    tp_free(a);
    return st;
}

/* grouped_mm(Tensor input, Tensor mat2, Tensor? offs=None) (F.grouped_mm,
 * torch._grouped_mm): 2-D input [M, K] with 3-D mat2 [G, K, N]: the rows
 * offs[g - 1] .. offs[g] (int32 group ends, offs[-1] = 0) times mat2[g],
 * output [M, N] (rows after the last end are zero); 3-D with 3-D (offs
 * None): a batched product [G, M, N]. PyTorch's ragged-K (2-D x 2-D) and
 * ragged-N (3-D x 2-D) forms are refused (tensorplay 1.0 has neither).
 * Accumulated in double, rounded once. */
static tp_status check_grouped_mm(const tp_tensor *a, const tp_tensor *b, const tp_tensor *offs) {
    TP_CHECK((a->ndim == 2 || a->ndim == 3) && (b->ndim == 2 || b->ndim == 3), TP_ERR_SHAPE,
             "grouped_mm: expected 2-D or 3-D input and mat2, got %dD and %dD", a->ndim, b->ndim);
    TP_CHECK(!(b->ndim == 2), TP_ERR_UNSUPPORTED,
             "grouped_mm: a 2-D mat2 (PyTorch's ragged-K and ragged-N forms) is not supported; expected 2D input and "
             "3D mat2, or 3D and 3D");
    TP_CHECK(is_f32_f64(a->dtype), TP_ERR_TYPE, "grouped_mm: expected a float32 or float64 input, got %s",
             tp_dtype_name(a->dtype));
    TP_CHECK(a->dtype == b->dtype, TP_ERR_TYPE, "grouped_mm: expected input and mat2 of the same dtype, got %s and %s",
             tp_dtype_name(a->dtype), tp_dtype_name(b->dtype));
    TP_CHECK(tp__dim_eq(tp__dim(a, a->ndim - 1), tp__dim(b, 1), "grouped_mm: the contracted dims"), TP_ERR_SHAPE,
             "grouped_mm: contraction dims must match, got input [..., %" PRId64 "] and mat2 [G, %" PRId64 ", N]",
             a->sizes[a->ndim - 1], b->sizes[1]);
    if (a->ndim == 2) {
        TP_CHECK(offs, TP_ERR_INVALID_ARG, "grouped_mm: offs must be given for a 2-D input");
        TP_CHECK(offs->dtype == TP_INT32, TP_ERR_TYPE, "grouped_mm: offs must be int32, got %s",
                 tp_dtype_name(offs->dtype));
        TP_CHECK(offs->ndim == 1 && tp__dim_eq(tp__dim(offs, 0), tp__dim(b, 0), "grouped_mm: one offset per group"),
                 TP_ERR_SHAPE, "grouped_mm: offs must be 1-D with one end per group of mat2 (%" PRId64 ")",
                 b->sizes[0]);
    } else {
        TP_CHECK(!offs, TP_ERR_INVALID_ARG, "grouped_mm: offs must be None for 3-D input and mat2");
        TP_CHECK(tp__dim_eq(tp__dim(a, 0), tp__dim(b, 0), "grouped_mm: the group counts"), TP_ERR_SHAPE,
                 "grouped_mm: input and mat2 must have the same number of groups, got %" PRId64 " and %" PRId64,
                 a->sizes[0], b->sizes[0]);
    }
    return TP_OK;
}

static tp_status infer_grouped_mm(const tp_value *args, tp_value *out) {
    const tp_tensor *a = tp__arg_tensor(args, 0), *b = tp__arg_tensor(args, 1), *offs = tp__arg_tensor(args, 2);
    TP_TRY(check_grouped_mm(a, b, offs));
    tp_sdim d[3];
    int nd = 0;
    if (a->ndim == 3) d[nd++] = tp__dim(a, 0);
    d[nd++] = tp__dim(a, a->ndim - 2);
    d[nd++] = tp__dim(b, 2);
    return tp__out_dims(out, a->dtype, nd, d);
}

static tp_status kernel_grouped_mm(const tp_value *args, tp_value *out) {
    const tp_tensor *a = tp__arg_tensor(args, 0), *b = tp__arg_tensor(args, 1), *offs = tp__arg_tensor(args, 2);
    TP_TRY(check_grouped_mm(a, b, offs));
    TP_TRY(tp__has_data(offs, "offs"));
    tp_tensor *y = tp__out_at(out, 0);
    int64_t G = b->sizes[0], K = b->sizes[1], N = b->sizes[2], M = a->sizes[a->ndim - 2];
    size_t es = tp_dtype_size(a->dtype);
    const char *ab = tp__tensor_base(a), *bb = tp__tensor_base(b);
    char *yb = tp__tensor_base(y);
    int64_t prev = 0;
    for (int64_t g = 0; g < G; g++) {
        int64_t r0 = 0, r1 = M;
        if (a->ndim == 2) {
            int64_t end = tp__load_i64(tp__tensor_base(offs) + g * offs->strides[0] * 4, TP_INT32);
            TP_CHECK(end >= prev && end <= M, TP_ERR_INVALID_ARG,
                     "grouped_mm: offs must be non-decreasing group ends within the %" PRId64 " rows, got offs[%" PRId64
                     "] = %" PRId64,
                     M, g, end);
            r0 = prev, r1 = end, prev = end;
        }
        int64_t ao = a->ndim == 3 ? g * a->strides[0] : 0, yo = a->ndim == 3 ? g * y->strides[0] : 0;
        int ar = a->ndim - 2, yr = y->ndim - 2;
        for (int64_t i = r0; i < r1; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0.0;
                for (int64_t k = 0; k < K; k++)
                    acc += tp__load_f64(ab + (ao + i * a->strides[ar] + k * a->strides[ar + 1]) * (int64_t)es, a->dtype) *
                           tp__load_f64(bb + (g * b->strides[0] + k * b->strides[1] + j * b->strides[2]) * (int64_t)es,
                                        b->dtype);
                tp__store_f64(yb + (yo + i * y->strides[yr] + j * y->strides[yr + 1]) * (int64_t)es, y->dtype, acc);
            }
    }
    if (a->ndim == 2) /* rows after the last group end */
        for (int64_t i = prev; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                tp__store_f64(yb + (i * y->strides[0] + j * y->strides[1]) * (int64_t)es, y->dtype, 0.0);
    return TP_OK;
}

/* a >= b (a guard, dim.h). */
static bool dim_ge_dim(tp_sdim a, tp_sdim b, const char *what) { return tp__dim_ge(tp__dim_sub(a, b), 0, what); }

static tp_status check_tau_batch(const tp_tensor *in, const tp_tensor *tau, const char *fn) {
    for (int d = 0; d < in->ndim - 2; d++)
        TP_CHECK(tp__dim_eq(tp__dim(tau, d), tp__dim(in, d), "tau's batch dims == input's"), TP_ERR_SHAPE,
                 "%s: Expected batch dimensions of tau to be equal to input.shape[:-2]", fn);
    return TP_OK;
}

/* orgqr(Tensor self, Tensor input2) (linalg.householder_product) */
static tp_status check_orgqr(const tp_tensor *in, const tp_tensor *tau) {
    const char *fn = "torch.linalg.householder_product";
    TP_CHECK(in->ndim >= 2, TP_ERR_SHAPE, "%s: input must have at least 2 dimensions.", fn);
    TP_CHECK(dim_ge_dim(tp__dim(in, in->ndim - 2), tp__dim(in, in->ndim - 1), "input.shape[-2] >= input.shape[-1]"),
             TP_ERR_SHAPE, "%s: input.shape[-2] must be greater than or equal to input.shape[-1]", fn);
    TP_CHECK(tau->ndim >= 1 && dim_ge_dim(tp__dim(in, in->ndim - 1), tp__dim(tau, tau->ndim - 1),
                                          "input.shape[-1] >= tau.shape[-1]"),
             TP_ERR_SHAPE,
             "%s: input.shape[-1] must be greater than or equal to tau.shape[-1]", fn);
    TP_CHECK(in->ndim - tau->ndim == 1, TP_ERR_SHAPE,
             "%s: Expected tau to have one dimension less than input, but got tau.ndim equal to %d and input.ndim is "
             "equal to %d",
             fn, tau->ndim, in->ndim);
    TP_TRY(check_tau_batch(in, tau, fn));
    TP_CHECK(tau->dtype == in->dtype, TP_ERR_TYPE, "%s: tau dtype %s does not match input dtype %s", fn,
             torch_type(tau->dtype), torch_type(in->dtype));
    return check_float_lapack(in, "orgqr_cpu");
}

static tp_status infer_orgqr(const tp_value *args, tp_value *out) {
    const tp_tensor *in = tp__arg_tensor(args, 0), *tau = tp__arg_tensor(args, 1);
    TP_TRY(check_orgqr(in, tau));
    return tp__out_like(out, in->dtype, in);
}

static tp_status kernel_orgqr(const tp_value *args, tp_value *out) {
    const tp_tensor *in = tp__arg_tensor(args, 0), *tau = tp__arg_tensor(args, 1);
    TP_TRY(check_orgqr(in, tau));
    tp_tensor *o = tp__out_at(out, 0);
    int64_t m = in->sizes[in->ndim - 2], n = in->sizes[in->ndim - 1], k = tau->sizes[tau->ndim - 1];
    mat_batch bt;
    batch_of(&bt, in, in->ndim - 2);
    double *v;
    TP_TRY(scratch(&v, 2 * m * n + k));
    double *q = v + m * n, *t = q + m * n;
    for (int64_t b = 0; b < bt.count; b++) {
        mat_load(in, batch_off(in, in->ndim - 2, &bt, b), v);
        vec_load(tau, &bt, b, t);
        for (int64_t i = 0; i < m * n; i++) q[i] = 0.0;
        for (int64_t i = 0; i < n; i++) q[i * n + i] = 1.0;
        for (int64_t r = k - 1; r >= 0; r--) apply_reflector(v, m, n, r, t[r], q, m, n, true);
        mat_store(o, batch_off(o, o->ndim - 2, &bt, b), q);
    }
    tp_free(v);
    return TP_OK;
}

/* ormqr(Tensor self, Tensor input2, Tensor input3, bool left=True, bool
 * transpose=False): op(Q) input3 (left) or input3 op(Q) */
static tp_status check_ormqr(const tp_value *args) {
    const tp_tensor *in = tp__arg_tensor(args, 0), *tau = tp__arg_tensor(args, 1), *c = tp__arg_tensor(args, 2);
    bool left = tp__arg_bool(args, 3);
    TP_CHECK(in->ndim >= 2, TP_ERR_SHAPE, "torch.ormqr: input must have at least 2 dimensions.");
    TP_CHECK(c->ndim >= 2, TP_ERR_SHAPE, "torch.ormqr: other must have at least 2 dimensions.");
    tp_sdim cs = tp__dim(c, c->ndim - (left ? 2 : 1)), ntau = tau->ndim ? tp__dim(tau, tau->ndim - 1) : tp__dimk(1);
    TP_CHECK(dim_ge_dim(cs, ntau, "ormqr: other's size >= tau.shape[-1]"), TP_ERR_SHAPE,
             "torch.ormqr: other.shape[%d] must be greater than or equal to tau.shape[-1]", left ? -2 : -1);
    TP_CHECK(tp__dim_eq(cs, tp__dim(in, in->ndim - 2), "ormqr: other's size == input.shape[-2]"), TP_ERR_SHAPE,
             "torch.ormqr: other.shape[%d] must be equal to input.shape[-2]", left ? -2 : -1);
    TP_CHECK(dim_ge_dim(tp__dim(in, in->ndim - 1), ntau, "ormqr: tau.shape[-1] <= input.shape[-1]"), TP_ERR_SHAPE,
             "torch.ormqr: tau.shape[-1] must be less than or equal to input.shape[-1]");
    TP_CHECK(in->ndim - tau->ndim == 1, TP_ERR_SHAPE,
             "torch.ormqr: Expected tau to have one dimension less than input, but got tau.ndim equal to %d and "
             "input.ndim is equal to %d",
             tau->ndim, in->ndim);
    TP_CHECK(in->ndim == c->ndim, TP_ERR_SHAPE,
             "torch.ormqr: Expected other to have the same number of dimensions as input, but got other.ndim equal to "
             "%d and input.ndim is equal to %d",
             c->ndim, in->ndim);
    TP_TRY(check_tau_batch(in, tau, "torch.ormqr"));
    for (int d = 0; d < in->ndim - 2; d++)
        TP_CHECK(tp__dim_eq(tp__dim(c, d), tp__dim(in, d), "ormqr: other's batch dims == input's"), TP_ERR_SHAPE,
                 "torch.ormqr: Expected batch dimensions of other to be equal to input.shape[:-2]");
    TP_CHECK(in->dtype == tau->dtype, TP_ERR_TYPE,
             "torch.ormqr: Expected input and tau to have the same dtype, but input has dtype%s and tau has dtype %s",
             torch_type(in->dtype), torch_type(tau->dtype));
    TP_CHECK(in->dtype == c->dtype, TP_ERR_TYPE,
             "torch.ormqr: Expected input and other to have the same dtype, but input has dtype%s and other has dtype "
             "%s",
             torch_type(in->dtype), torch_type(c->dtype));
    return check_float_lapack(in, "ormqr_cpu");
}

static tp_status infer_ormqr(const tp_value *args, tp_value *out) {
    TP_TRY(check_ormqr(args));
    const tp_tensor *c = tp__arg_tensor(args, 2);
    return tp__out_like(out, c->dtype, c);
}

static tp_status kernel_ormqr(const tp_value *args, tp_value *out) {
    TP_TRY(check_ormqr(args));
    const tp_tensor *in = tp__arg_tensor(args, 0), *tau = tp__arg_tensor(args, 1), *c = tp__arg_tensor(args, 2);
    bool left = tp__arg_bool(args, 3), trans = tp__arg_bool(args, 4);
    tp_tensor *o = tp__out_at(out, 0);
    int64_t m = in->sizes[in->ndim - 2], n = in->sizes[in->ndim - 1], k = tau->sizes[tau->ndim - 1];
    int64_t r = c->sizes[c->ndim - 2], cc = c->sizes[c->ndim - 1];
    mat_batch bt;
    batch_of(&bt, in, in->ndim - 2);
    double *v;
    TP_TRY(scratch(&v, m * n + r * cc + k));
    double *x = v + m * n, *t = x + r * cc;
    /* Q = H_1 ... H_k: Q C and C Q^T apply H_k first, Q^T C and C Q apply H_1 first */
    bool last_first = left != trans;
    for (int64_t b = 0; b < bt.count; b++) {
        mat_load(in, batch_off(in, in->ndim - 2, &bt, b), v);
        vec_load(tau, &bt, b, t);
        mat_load(c, batch_off(c, c->ndim - 2, &bt, b), x);
        for (int64_t s = 0; s < k; s++) {
            int64_t h = last_first ? k - 1 - s : s;
            apply_reflector(v, m, n, h, t[h], x, r, cc, left);
        }
        mat_store(o, batch_off(o, o->ndim - 2, &bt, b), x);
    }
    tp_free(v);
    return TP_OK;
}

void tp__register_linalg_ops(void) {
    tp__register_op(TP_OP_MATMUL, "matmul(Tensor self, Tensor other) -> Tensor", 0, infer_matmul, kernel_matmul);
    tp__register_op(TP_OP_MM, "mm(Tensor self, Tensor mat2) -> Tensor", 0, infer_mm, kernel_mm);
    tp__register_op(TP_OP_BMM, "bmm(Tensor self, Tensor mat2) -> Tensor", 0, infer_bmm, kernel_mm);
    tp__register_op(TP_OP_ADDMM,
                    "addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", 0,
                    infer_addmm, kernel_addmm);
    tp__register_op(TP_OP_LINEAR, "linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", 0,
                    infer_linear, kernel_linear);
    tp__register_op(TP_OP_BADDBMM,
                    "baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
                    0, infer_baddbmm, kernel_addmm);
    tp__register_einsum_op();
    tp__register_op(TP_OP_DOT, "dot(Tensor self, Tensor tensor) -> Tensor", 0, infer_dot, kernel_matmul);
    tp__register_op(TP_OP_MV, "mv(Tensor self, Tensor vec) -> Tensor", 0, infer_mv, kernel_matmul);
    tp__register_op(TP_OP_ADDMV,
                    "addmv(Tensor self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) -> Tensor", 0,
                    infer_addmv, kernel_addmv);
    tp__register_op(TP_OP_OUTER, "outer(Tensor self, Tensor vec2) -> Tensor", 0, infer_outer, kernel_outer);
    tp__register_op(TP_OP_ADDR,
                    "addr(Tensor self, Tensor vec1, Tensor vec2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", 0,
                    infer_addr, kernel_addr);
    tp__register_op(TP_OP_KRON, "kron(Tensor self, Tensor other) -> Tensor", 0, infer_kron, kernel_kron);
    tp__register_op(TP_OP_INNER, "inner(Tensor self, Tensor other) -> Tensor", 0, infer_inner, kernel_inner);
    tp__register_op(TP_OP_TRACE, "trace(Tensor self) -> Tensor", 0, infer_trace, kernel_trace);
    tp__register_op(TP_OP_ADDBMM,
                    "addbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", 0,
                    infer_addbmm, kernel_addbmm);
    tp__register_op(TP_OP_CROSS, "cross(Tensor self, Tensor other, int? dim=None) -> Tensor", 0, infer_cross,
                    kernel_cross);
    tp__register_op(TP_OP_DET, "det(Tensor self) -> Tensor", 0, infer_det, kernel_det);
    /* factorisations, inverses and solves (issue #13) */
    tp__register_op(TP_OP_INVERSE, "inverse(Tensor self) -> Tensor", 0, infer_inverse, kernel_inverse);
    tp__register_op(TP_OP_LOGDET, "logdet(Tensor self) -> Tensor", 0, infer_logdet, kernel_logdet);
    tp__register_op(TP_OP_SLOGDET, "slogdet(Tensor self) -> (Tensor, Tensor)", 0, infer_slogdet, kernel_slogdet);
    tp__register_op(TP_OP_MATRIX_POWER, "matrix_power(Tensor self, int n) -> Tensor", 0, infer_matrix_power,
                    kernel_matrix_power);
    tp__register_op(TP_OP_CHOLESKY, "cholesky(Tensor self, bool upper=False) -> Tensor", 0, infer_cholesky,
                    kernel_cholesky);
    tp__register_op(TP_OP_CHOLESKY_INVERSE, "cholesky_inverse(Tensor self, bool upper=False) -> Tensor", 0,
                    infer_cholesky_inverse, kernel_cholesky_inverse);
    tp__register_op(TP_OP_CHOLESKY_SOLVE, "cholesky_solve(Tensor self, Tensor input2, bool upper=False) -> Tensor", 0,
                    infer_cholesky_solve, kernel_cholesky_solve);
    tp__register_op(TP_OP_TRIANGULAR_SOLVE,
                    "triangular_solve(Tensor self, Tensor A, bool upper=True, bool transpose=False, "
                    "bool unitriangular=False) -> (Tensor, Tensor)",
                    0, infer_triangular_solve, kernel_triangular_solve);
    tp__register_op(TP_OP_MATRIX_EXP, "matrix_exp(Tensor self) -> Tensor", 0, infer_matrix_exp, kernel_matrix_exp);
    tp__register_op(TP_OP_PINVERSE, "pinverse(Tensor self, float rcond=1e-15) -> Tensor", 0, infer_pinverse,
                    kernel_pinverse);
    tp__register_op(TP_OP_LU_UNPACK,
                    "lu_unpack(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True, bool unpack_pivots=True) -> "
                    "(Tensor, Tensor, Tensor)",
                    0, infer_lu_unpack, kernel_lu_unpack);
    tp__register_op(TP_OP_LU_SOLVE, "lu_solve(Tensor self, Tensor LU_data, Tensor LU_pivots) -> Tensor", 0,
                    infer_lu_solve, kernel_lu_solve);
    tp__register_op(TP_OP_SVD, "svd(Tensor self, bool some=True, bool compute_uv=True) -> (Tensor, Tensor, Tensor)",
                    0, infer_svd, kernel_svd);
    tp__register_op(TP_OP_GROUPED_MM, "grouped_mm(Tensor input, Tensor mat2, Tensor? offs=None) -> Tensor", 0,
                    infer_grouped_mm, kernel_grouped_mm);
    tp__register_op(TP_OP_GEQRF, "geqrf(Tensor self) -> (Tensor, Tensor)", 0, infer_geqrf, kernel_geqrf);
    tp__register_op(TP_OP_ORGQR, "orgqr(Tensor self, Tensor input2) -> Tensor", 0, infer_orgqr, kernel_orgqr);
    tp__register_op(TP_OP_ORMQR,
                    "ormqr(Tensor self, Tensor input2, Tensor input3, bool left=True, bool transpose=False) -> Tensor", 0,
                    infer_ormqr, kernel_ormqr);
}
