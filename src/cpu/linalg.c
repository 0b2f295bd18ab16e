/*
 * linalg.c - matrix products: matmul, mm, bmm, addmm, linear, baddbmm.
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
#include <stdio.h>

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

/* The bias-like operand `what` (self of addmm/baddbmm, bias of linear)
 * must share the product's dtype and broadcast to its shape. */
static tp_status check_addend(const tp_tensor *t, const char *what, tp_dtype dtype, int ndim, const int64_t *sizes) {
    char b1[320], b2[320];
    TP_CHECK(t->dtype == dtype, TP_ERR_TYPE, "%s and the matrices must have the same dtype, but got %s and %s", what,
             tp_dtype_name(t->dtype), tp_dtype_name(dtype));
    bool ok = t->ndim <= ndim;
    for (int d = 0; ok && d < t->ndim; d++) {
        int64_t want = sizes[ndim - t->ndim + d];
        ok = t->sizes[d] == want || t->sizes[d] == 1;
    }
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
    if (da == 1) {
        p->m = 1;
        p->a_row = -1;
        p->a_col = 0;
        ka = a->sizes[0];
    } else {
        p->a_nbatch = da - 2;
        p->a_row = da - 2;
        p->a_col = da - 1;
        p->m = a->sizes[da - 2];
        ka = a->sizes[da - 1];
    }
    if (db == 1) {
        p->n = 1;
        p->b_row = 0;
        p->b_col = -1;
        kb = b->sizes[0];
    } else if (weight) {
        TP_CHECK(db == 2, TP_ERR_SHAPE, "weight must be 1-D or 2-D, got %dD", db);
        p->b_row = 1;
        p->b_col = 0;
        p->n = b->sizes[0];
        kb = b->sizes[1];
    } else {
        p->b_nbatch = db - 2;
        p->b_row = db - 2;
        p->b_col = db - 1;
        p->n = b->sizes[db - 1];
        kb = b->sizes[db - 2];
    }
    if (ka != kb) {
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
    if (tp__broadcast_shapes(p->a_nbatch, a->sizes, p->b_nbatch, b->sizes, &p->n_batch, p->batch_sizes) != TP_OK)
        return tp_error(TP_ERR_SHAPE, "batch dimensions of %s and %s cannot be broadcast together",
                        dims_str(a, b1, sizeof b1), dims_str(b, b2, sizeof b2));
    int n = 0;
    for (int d = 0; d < p->n_batch; d++) {
        p->out_dim_of[d] = n;
        p->out_sizes[n++] = p->batch_sizes[d];
    }
    p->out_dim_of[p->n_batch] = da > 1 ? n : -1;
    if (da > 1) p->out_sizes[n++] = p->m;
    p->out_dim_of[p->n_batch + 1] = p->b_col >= 0 ? n : -1;
    if (p->b_col >= 0) p->out_sizes[n++] = p->n;
    p->out_ndim = n;
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
    return tp__out_tensor(out, tp__arg_tensor(args, 0)->dtype, p.out_ndim, p.out_sizes);
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
    TP_CHECK(b2->sizes[0] == b1->sizes[0] && b2->sizes[1] == b1->sizes[2], TP_ERR_SHAPE,
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
    return tp__out_tensor(out, tp__arg_tensor(args, 0)->dtype, p.out_ndim, p.out_sizes);
}

static tp_status infer_bmm(const tp_value *args, tp_value *out) {
    matmul_plan p;
    TP_TRY(plan_mm(args, 0, "self", "mat2", 3, &p));
    return tp__out_tensor(out, tp__arg_tensor(args, 0)->dtype, p.out_ndim, p.out_sizes);
}

/* mm and bmm validate in infer (always run first); the plan is the same. */
static tp_status kernel_mm(const tp_value *args, tp_value *out) { return kernel_matmul(args, out); }

/* ---- addmm / baddbmm ----------------------------------------------------
 * op(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1)
 *   = beta * self + alpha * (mat1 @ mat2), self broadcast to the result. */

static tp_status plan_addmm(const tp_value *args, int rank, matmul_plan *p) {
    const char *n1 = rank == 2 ? "mat1" : "batch1", *n2 = rank == 2 ? "mat2" : "batch2";
    TP_TRY(plan_mm(args, 1, n1, n2, rank, p));
    return check_addend(tp__arg_tensor(args, 0), "self", tp__arg_tensor(args, 1)->dtype, p->out_ndim, p->out_sizes);
}

static tp_status infer_addmm(const tp_value *args, tp_value *out) {
    matmul_plan p;
    TP_TRY(plan_addmm(args, 2, &p));
    return tp__out_tensor(out, tp__arg_tensor(args, 1)->dtype, p.out_ndim, p.out_sizes);
}

static tp_status infer_baddbmm(const tp_value *args, tp_value *out) {
    matmul_plan p;
    TP_TRY(plan_addmm(args, 3, &p));
    return tp__out_tensor(out, tp__arg_tensor(args, 1)->dtype, p.out_ndim, p.out_sizes);
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
        TP_TRY(check_addend(tp__arg_tensor(args, 2), "bias", input->dtype, p->out_ndim, p->out_sizes));
    return TP_OK;
}

static tp_status infer_linear(const tp_value *args, tp_value *out) {
    matmul_plan p;
    TP_TRY(plan_linear(args, &p));
    return tp__out_tensor(out, tp__arg_tensor(args, 0)->dtype, p.out_ndim, p.out_sizes);
}

static tp_status kernel_linear(const tp_value *args, tp_value *out) {
    const tp_tensor *input = tp__arg_tensor(args, 0), *weight = tp__arg_tensor(args, 1);
    matmul_plan p;
    TP_TRY(plan_matmul(input, weight, true, &p));
    return run_plan(&p, input, weight, tp__arg_is_none(args, 2) ? NULL : tp__arg_tensor(args, 2), NULL, NULL,
                    tp__out_at(out, 0));
}

/* ---- registration ------------------------------------------------------ */

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
}
