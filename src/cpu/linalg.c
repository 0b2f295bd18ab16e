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
    TP_CHECK(a->sizes[0] == b->sizes[0], TP_ERR_SHAPE,
             "inconsistent tensor size, expected tensor %s and src %s to have the same number of elements, but got "
             "%" PRId64 " and %" PRId64 " elements respectively",
             dims_str(a, b1, sizeof b1), dims_str(b, b2, sizeof b2), a->sizes[0], b->sizes[0]);
    if (a->dtype == TP_BOOL || a->dtype == TP_FLOAT16 || a->dtype == TP_BFLOAT16)
        return not_implemented_for("dot", a->dtype);
    return TP_OK;
}

static tp_status infer_dot(const tp_value *args, tp_value *out) {
    TP_TRY(check_dot(args));
    return tp__out_tensor(out, tp__arg_tensor(args, 0)->dtype, 0, NULL);
}

/* mv(Tensor self, Tensor vec); addmv(Tensor self, Tensor mat, Tensor vec,
 * *, Scalar beta=1, Scalar alpha=1) = beta * self + alpha * (mat @ vec),
 * self (at most 1-D, any dtype: converted) broadcast to [m]. */
static tp_status check_mv(const tp_tensor *self, const tp_tensor *mat, const tp_tensor *vec) {
    int sd = self ? self->ndim : 1;
    TP_CHECK(mat->ndim == 2 && vec->ndim == 1 && sd <= 1, TP_ERR_SHAPE,
             "vector + matrix @ vector expected, got %d, %d, %d", sd, mat->ndim, vec->ndim);
    int64_t m = self && self->ndim == 1 ? self->sizes[0] : mat->sizes[0];
    bool self_ok = !self || self->ndim == 0 || self->sizes[0] == mat->sizes[0] || self->sizes[0] == 1;
    TP_CHECK(mat->sizes[1] == vec->sizes[0] && self_ok, TP_ERR_SHAPE,
             "size mismatch, got %" PRId64 ", %" PRId64 "x%" PRId64 ",%" PRId64, m, mat->sizes[0], mat->sizes[1],
             vec->sizes[0]);
    TP_TRY(same_dtype(mat, vec));
    if (mat->dtype == TP_BOOL) return not_implemented_for("addmv_impl_cpu", mat->dtype);
    return TP_OK;
}

static tp_status infer_mv(const tp_value *args, tp_value *out) {
    const tp_tensor *mat = tp__arg_tensor(args, 0);
    TP_TRY(check_mv(NULL, mat, tp__arg_tensor(args, 1)));
    return tp__out_tensor(out, mat->dtype, 1, mat->sizes);
}

static tp_status infer_addmv(const tp_value *args, tp_value *out) {
    const tp_tensor *mat = tp__arg_tensor(args, 1);
    TP_TRY(check_mv(tp__arg_tensor(args, 0), mat, tp__arg_tensor(args, 2)));
    return tp__out_tensor(out, mat->dtype, 1, mat->sizes);
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

static tp_status check_expand(const tp_tensor *t, int ndim, const int64_t *sizes) {
    char b1[320], b2[320];
    TP_CHECK(t->ndim <= ndim, TP_ERR_SHAPE,
             "the number of sizes provided (%d) must be greater or equal to the number of dimensions in the "
             "tensor (%d)",
             ndim, t->ndim);
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t want = sizes[ndim - t->ndim + d];
        TP_CHECK(t->sizes[d] == want || t->sizes[d] == 1, TP_ERR_SHAPE,
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
    int64_t sizes[2] = {a->sizes[0], b->sizes[0]};
    return tp__out_tensor(out, result_type_of(args, 0, 2), 2, sizes);
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

static tp_status plan_addr(const tp_value *args, prod_ctx *c, int64_t *sizes) {
    const tp_tensor *self = tp__arg_tensor(args, 0), *a = tp__arg_tensor(args, 1), *b = tp__arg_tensor(args, 2);
    TP_TRY(check_vector(a, "addr", "vec1"));
    TP_TRY(check_vector(b, "addr", "vec2"));
    sizes[0] = a->sizes[0];
    sizes[1] = b->sizes[0];
    TP_TRY(check_expand(self, 2, sizes));
    memset(c, 0, sizeof *c);
    c->ct = result_type_of(args, 0, 3);
    TP_TRY(scalar_arg(&args[3], c->ct, "beta", &c->beta, &c->beta_i));
    TP_TRY(scalar_arg(&args[4], c->ct, "alpha", &c->alpha, &c->alpha_i));
    return TP_OK;
}

static tp_status infer_addr(const tp_value *args, tp_value *out) {
    prod_ctx c;
    int64_t sizes[2];
    TP_TRY(plan_addr(args, &c, sizes));
    return tp__out_tensor(out, c.ct, 2, sizes);
}

static tp_status kernel_addr(const tp_value *args, tp_value *out) {
    prod_ctx c;
    int64_t sizes[2];
    TP_TRY(plan_addr(args, &c, sizes));
    tp_tensor *col;
    TP_TRY(column_view(tp__arg_tensor(args, 1), &col));
    tp_status st = prod_run(&c, tp__out_at(out, 0), col, tp__arg_tensor(args, 2), tp__arg_tensor(args, 0));
    tp_tensor_free(col);
    return st;
}

/* kron(Tensor self, Tensor other): shapes right-aligned (leading 1s), result
 * dim d of size a[d] * b[d], element a[i / b] * b[i % b]. */
static tp_status plan_kron(const tp_tensor *a, const tp_tensor *b, int *nd, int64_t *sizes) {
    *nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    TP_CHECK(2 * *nd <= TP_MAX_DIMS, TP_ERR_UNSUPPORTED, "kron of %d-D tensors is not supported (at most %d-D)", *nd,
             TP_MAX_DIMS / 2);
    for (int d = 0; d < *nd; d++) {
        int da = d - (*nd - a->ndim), db = d - (*nd - b->ndim);
        sizes[d] = (da >= 0 ? a->sizes[da] : 1) * (db >= 0 ? b->sizes[db] : 1);
    }
    return TP_OK;
}

static tp_status infer_kron(const tp_value *args, tp_value *out) {
    int nd;
    int64_t sizes[TP_MAX_DIMS];
    TP_TRY(plan_kron(tp__arg_tensor(args, 0), tp__arg_tensor(args, 1), &nd, sizes));
    return tp__out_tensor(out, result_type_of(args, 0, 2), nd, sizes);
}

static tp_status kernel_kron(const tp_value *args, tp_value *out) {
    tp_tensor *a = tp__arg_tensor(args, 0), *b = tp__arg_tensor(args, 1), *o = tp__out_at(out, 0);
    int nd;
    int64_t sizes[TP_MAX_DIMS];
    TP_TRY(plan_kron(a, b, &nd, sizes));
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
static tp_status plan_inner(const tp_value *args, int *nd, int64_t *sizes, tp_dtype *dt) {
    const tp_tensor *a = tp__arg_tensor(args, 0), *b = tp__arg_tensor(args, 1);
    char b1[320], b2[320];
    if (a->ndim == 0 || b->ndim == 0) {
        const tp_tensor *t = a->ndim == 0 ? b : a;
        *nd = t->ndim;
        if (t->ndim) memcpy(sizes, t->sizes, (size_t)t->ndim * sizeof *sizes);
        *dt = result_type_of(args, 0, 2);
        return TP_OK;
    }
    TP_CHECK(a->sizes[a->ndim - 1] == b->sizes[b->ndim - 1], TP_ERR_SHAPE,
             "inner() the last dimension must match on both input tensors but got shapes %s and %s",
             dims_str(a, b1, sizeof b1), dims_str(b, b2, sizeof b2));
    TP_TRY(same_dtype(a, b));
    if (a->dtype == TP_BOOL) return not_implemented_for("addmm_impl_cpu_", a->dtype);
    *nd = a->ndim + b->ndim - 2;
    TP_CHECK(*nd <= TP_MAX_DIMS, TP_ERR_SHAPE, "inner: the result would have %d dims (at most %d)", *nd, TP_MAX_DIMS);
    for (int d = 0; d < a->ndim - 1; d++) sizes[d] = a->sizes[d];
    for (int d = 0; d < b->ndim - 1; d++) sizes[a->ndim - 1 + d] = b->sizes[d];
    *dt = a->dtype;
    return TP_OK;
}

static tp_status infer_inner(const tp_value *args, tp_value *out) {
    int nd = 0;
    int64_t sizes[TP_MAX_DIMS];
    tp_dtype dt = TP_FLOAT32;
    TP_TRY(plan_inner(args, &nd, sizes, &dt));
    return tp__out_tensor(out, dt, nd, sizes);
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
    return tp__out_tensor(out, tp_dtype_is_float(t->dtype) ? t->dtype : TP_INT64, 0, NULL);
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

/* det(Tensor self) / linalg_det(Tensor A): determinants of the trailing
 * square matrices, by LU with partial pivoting in double. */
static tp_status check_det(const tp_tensor *t) {
    TP_CHECK(t, TP_ERR_TYPE, "linalg.det: argument 'A' must be a tensor");
    TP_CHECK(t->ndim >= 2, TP_ERR_SHAPE, "linalg.det: The input tensor A must have at least 2 dimensions.");
    TP_CHECK(t->dtype == TP_FLOAT32 || t->dtype == TP_FLOAT64, TP_ERR_TYPE,
             "linalg.det: Expected a floating point or complex tensor as input. Got %s", tp_dtype_name(t->dtype));
    TP_CHECK(t->sizes[t->ndim - 1] == t->sizes[t->ndim - 2], TP_ERR_SHAPE,
             "linalg.det: A must be batches of square matrices, but they are %" PRId64 " by %" PRId64 " matrices",
             t->sizes[t->ndim - 2], t->sizes[t->ndim - 1]);
    return TP_OK;
}

static tp_status infer_det(const tp_value *args, tp_value *out) {
    const tp_tensor *t = tp__arg_tensor(args, 0);
    TP_TRY(check_det(t));
    return tp__out_tensor(out, t->dtype, t->ndim - 2, t->sizes);
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
static tp_status plan_cross(const tp_value *args, int *dim, int *nd, int64_t *sizes) {
    const tp_tensor *a = tp__arg_tensor(args, 0), *b = tp__arg_tensor(args, 1);
    char b1[320], b2[320];
    TP_TRY(same_dtype(a, b));
    if (a->dtype == TP_BOOL) return not_implemented_for("cross", a->dtype);
    TP_CHECK(a->ndim == b->ndim, TP_ERR_SHAPE,
             "linalg.cross: inputs must have the same number of dimensions (got %d and %d)", a->ndim, b->ndim);
    TP_CHECK(tp__broadcast_shapes(a->ndim, a->sizes, b->ndim, b->sizes, nd, sizes) == TP_OK, TP_ERR_SHAPE,
             "shapes %s and %s cannot be broadcast together", dims_str(a, b1, sizeof b1), dims_str(b, b2, sizeof b2));
    if (tp__arg_is_none(args, 2)) {
        *dim = -1;
        for (int d = 0; d < a->ndim && *dim < 0; d++)
            if (a->sizes[d] == 3) *dim = d;
        TP_CHECK(*dim >= 0, TP_ERR_SHAPE, "no dimension of size 3 in input");
    } else {
        TP_TRY(tp__wrap_dim(tp__arg_int(args, 2), a->ndim, dim));
    }
    TP_CHECK(a->sizes[*dim] == 3 && b->sizes[*dim] == 3, TP_ERR_SHAPE,
             "linalg.cross: inputs dimension %d must have length 3. Got %" PRId64 " and %" PRId64, *dim,
             a->sizes[*dim], b->sizes[*dim]);
    return TP_OK;
}

static tp_status infer_cross(const tp_value *args, tp_value *out) {
    int dim, nd;
    int64_t sizes[TP_MAX_DIMS];
    TP_TRY(plan_cross(args, &dim, &nd, sizes));
    return tp__out_tensor(out, tp__arg_tensor(args, 0)->dtype, nd, sizes);
}

static tp_status kernel_cross(const tp_value *args, tp_value *out) {
    tp_tensor *a = tp__arg_tensor(args, 0), *b = tp__arg_tensor(args, 1), *o = tp__out_at(out, 0);
    int dim, nd;
    int64_t sizes[TP_MAX_DIMS];
    TP_TRY(plan_cross(args, &dim, &nd, sizes));
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
static tp_status plan_addbmm(const tp_value *args, int64_t *sizes) {
    const tp_tensor *self = tp__arg_tensor(args, 0), *b1 = tp__arg_tensor(args, 1), *b2 = tp__arg_tensor(args, 2);
    TP_CHECK(b1->ndim == 3, TP_ERR_SHAPE, "batch1 must be a 3D tensor");
    TP_CHECK(b2->ndim == 3, TP_ERR_SHAPE, "batch2 must be a 3D tensor");
    TP_CHECK(b1->sizes[0] == b2->sizes[0], TP_ERR_SHAPE,
             "batch1 and batch2 must have same number of batches, got %" PRId64 " and %" PRId64, b1->sizes[0],
             b2->sizes[0]);
    TP_CHECK(b1->sizes[2] == b2->sizes[1], TP_ERR_SHAPE,
             "Incompatible matrix sizes for bmm (%" PRId64 "x%" PRId64 " and %" PRId64 "x%" PRId64 ")", b1->sizes[1],
             b1->sizes[2], b2->sizes[1], b2->sizes[2]);
    TP_CHECK(self->dtype == b1->dtype && b1->dtype == b2->dtype, TP_ERR_TYPE,
             "self and mat2 must have the same dtype");
    if (b1->dtype == TP_BOOL) return not_implemented_for("addbmm", b1->dtype);
    sizes[0] = b1->sizes[1];
    sizes[1] = b2->sizes[2];
    return check_expand(self, 2, sizes);
}

static tp_status infer_addbmm(const tp_value *args, tp_value *out) {
    int64_t sizes[2];
    TP_TRY(plan_addbmm(args, sizes));
    return tp__out_tensor(out, tp__arg_tensor(args, 1)->dtype, 2, sizes);
}

static tp_status kernel_addbmm(const tp_value *args, tp_value *out) {
    int64_t sizes[2];
    TP_TRY(plan_addbmm(args, sizes));
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
}
