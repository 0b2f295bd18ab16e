/*
 * einsum.c - einsum(str equation, Tensor[] tensors): the equation parser
 * (einsum.h), the shape rule and the reference kernel.
 *
 * The reference kernel is the definition: for every output element it sums,
 * over every combination of the summed labels, the product of one element
 * of each operand. It reads operands through per-label strides (diagonals
 * are sums of strides, broadcast dims stride 0), so any layout works, and
 * accumulates in double for float dtypes (rounded once on store) or in
 * wrapping 64-bit integers. Float32 products of the matrix-multiply forms
 * ("bij,bjk->bik", "bhqd,bhkd->bhqk", ...) run through the GEMM variant in
 * fast_linalg.c when a plan is built.
 */
#include <inttypes.h>
#include "einsum.h"

static int letter_label(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    return -1;
}

static char label_char(int l) { return (char)(l < 26 ? 'A' + l : 'a' + (l - 26)); }

tp_status tp__einsum_parse(const char *equation, int n, const tp_tensor *const *operands, tp_einsum *e) {
    memset(e, 0, sizeof *e);
    TP_CHECK(n >= 1, TP_ERR_INVALID_ARG, "einsum(): must provide at least one operand");
    TP_CHECK(n <= TP_EINSUM_MAX_OPERANDS, TP_ERR_UNSUPPORTED, "einsum(): at most %d operands are supported, got %d",
             TP_EINSUM_MAX_OPERANDS, n);
    e->n_ops = n;
    const char *arrow = strstr(equation, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - equation) : strlen(equation);

    /* operand terms: letters, and -1 for an ellipsis */
    int terms[TP_EINSUM_MAX_OPERANDS][TP_MAX_DIMS + 1];
    int term_len[TP_EINSUM_MAX_OPERANDS] = {0};
    bool term_ell[TP_EINSUM_MAX_OPERANDS] = {false};
    int cur = 0;
    for (size_t i = 0; i < lhs_len; i++) {
        unsigned char c = (unsigned char)equation[i];
        if (c == ' ') continue;
        if (c == '.') {
            TP_CHECK(!term_ell[cur], TP_ERR_INVALID_ARG,
                     "einsum(): found '.' for operand %d for which an ellipsis was already found", cur);
            TP_CHECK(i + 2 < lhs_len && equation[i + 1] == '.' && equation[i + 2] == '.', TP_ERR_INVALID_ARG,
                     "einsum(): found '.' for operand %d that is not part of any ellipsis", cur);
            i += 2;
            term_ell[cur] = true;
            TP_CHECK(term_len[cur] <= TP_MAX_DIMS, TP_ERR_SHAPE, "einsum(): too many subscripts for operand %d", cur);
            terms[cur][term_len[cur]++] = -1;
            continue;
        }
        if (c == ',') {
            cur++;
            TP_CHECK(cur < n, TP_ERR_INVALID_ARG, "einsum(): fewer operands were provided than specified in the equation");
            continue;
        }
        int l = letter_label(c);
        TP_CHECK(l >= 0, TP_ERR_INVALID_ARG,
                 "einsum(): invalid subscript given at index %zu in the equation string, subscripts must be in [a-zA-Z]",
                 i);
        TP_CHECK(term_len[cur] <= TP_MAX_DIMS, TP_ERR_SHAPE, "einsum(): too many subscripts for operand %d", cur);
        terms[cur][term_len[cur]++] = l;
    }
    TP_CHECK(cur == n - 1, TP_ERR_INVALID_ARG, "einsum(): more operands were provided than specified in the equation");

    /* ranks and the ellipsis dims (broadcast right-aligned) */
    int ell_ndim = 0;
    for (int i = 0; i < n; i++) {
        const tp_tensor *t = operands[i];
        int letters = term_len[i] - (term_ell[i] ? 1 : 0);
        if (term_ell[i]) {
            TP_CHECK(letters <= t->ndim, TP_ERR_SHAPE,
                     "einsum(): the number of subscripts in the equation (%d) is more than the number of dimensions "
                     "(%d) for operand %d",
                     letters, t->ndim, i);
            if (t->ndim - letters > ell_ndim) ell_ndim = t->ndim - letters;
        } else {
            TP_CHECK(letters == t->ndim, TP_ERR_SHAPE,
                     "einsum(): the number of subscripts in the equation (%d) does not match the number of dimensions "
                     "(%d) for operand %d and no ellipsis was given",
                     letters, t->ndim, i);
        }
    }
    int count[TP_EINSUM_MAX_LABELS] = {0};
    bool any_ell = false;
    for (int i = 0; i < n; i++) {
        const tp_tensor *t = operands[i];
        int d = 0, covered = t->ndim - (term_len[i] - (term_ell[i] ? 1 : 0));
        for (int k = 0; k < term_len[i]; k++) {
            if (terms[i][k] >= 0) {
                e->op_label[i][d++] = terms[i][k];
                count[terms[i][k]]++;
                continue;
            }
            any_ell = true;
            for (int j = 0; j < covered; j++) {
                int l = TP_EINSUM_LETTERS + ell_ndim - covered + j;
                e->op_label[i][d++] = l;
                count[l]++;
            }
        }
        e->op_ndim[i] = d;
    }

    /* sizes: equal within an operand (diagonals), broadcast across them */
    for (int l = 0; l < TP_EINSUM_MAX_LABELS; l++) e->size[l] = 1;
    for (int i = 0; i < n; i++) {
        const tp_tensor *t = operands[i];
        for (int d = 0; d < e->op_ndim[i]; d++) {
            int l = e->op_label[i][d];
            for (int d2 = 0; d2 < d; d2++)
                TP_CHECK(e->op_label[i][d2] != l || t->sizes[d2] == t->sizes[d], TP_ERR_SHAPE,
                         "einsum(): subscript %c is repeated for operand %d but the sizes don't match, %" PRId64
                         " != %" PRId64,
                         label_char(l), i, t->sizes[d], t->sizes[d2]);
        }
    }
    for (int i = 0; i < n; i++) {
        const tp_tensor *t = operands[i];
        for (int d = 0; d < e->op_ndim[i]; d++) {
            int l = e->op_label[i][d];
            int64_t s = t->sizes[d];
            if (!e->used[l]) {
                e->used[l] = true;
                e->size[l] = s;
            } else if (s != e->size[l]) {
                if (l < TP_EINSUM_LETTERS)
                    TP_CHECK(s == 1 || e->size[l] == 1, TP_ERR_SHAPE,
                             "einsum(): subscript %c has size %" PRId64 " for operand %d which does not broadcast with "
                             "previously seen size %" PRId64,
                             label_char(l), s, i, e->size[l]);
                else
                    TP_CHECK(s == 1 || e->size[l] == 1, TP_ERR_SHAPE,
                             "einsum(): dimension %d covered by ellipsis in operand %d has size %" PRId64
                             " which does not broadcast with previously seen ellipsis with size %" PRId64
                             " for the respective dimension",
                             l - TP_EINSUM_LETTERS, i, s, e->size[l]);
                if (e->size[l] == 1) e->size[l] = s;
            }
        }
    }

    /* the output */
    if (arrow) {
        const char *rhs = arrow + 2;
        bool found_ell = false;
        for (size_t i = 0; rhs[i]; i++) {
            unsigned char c = (unsigned char)rhs[i];
            if (c == ' ') continue;
            if (c == '.') {
                TP_CHECK(!found_ell, TP_ERR_INVALID_ARG,
                         "einsum(): found '.' for output but an ellipsis (...) was already found");
                TP_CHECK(rhs[i + 1] == '.' && rhs[i + 2] == '.', TP_ERR_INVALID_ARG,
                         "einsum(): found '.' for output that is not part of any ellipsis (...)");
                i += 2;
                found_ell = true;
                TP_CHECK(e->out_ndim + ell_ndim <= TP_MAX_DIMS, TP_ERR_SHAPE,
                         "einsum(): the output has more than %d dims", TP_MAX_DIMS);
                for (int j = 0; j < ell_ndim; j++) {
                    int l = TP_EINSUM_LETTERS + j;
                    e->in_out[l] = true;
                    e->out_label[e->out_ndim++] = l;
                }
                continue;
            }
            int l = letter_label(c);
            TP_CHECK(l >= 0, TP_ERR_INVALID_ARG,
                     "einsum(): invalid subscript given at index %zu in the equation string, subscripts must be in "
                     "[a-zA-Z]",
                     lhs_len + 2 + i);
            TP_CHECK(count[l] > 0 && !e->in_out[l], TP_ERR_INVALID_ARG, "einsum(): output subscript %c %s", c,
                     e->in_out[l] ? "appears more than once in the output"
                                  : "does not appear in the equation for any input operand");
            TP_CHECK(e->out_ndim < TP_MAX_DIMS, TP_ERR_SHAPE, "einsum(): the output has more than %d dims", TP_MAX_DIMS);
            e->in_out[l] = true;
            e->out_label[e->out_ndim++] = l;
        }
    } else {
        if (any_ell)
            for (int j = 0; j < ell_ndim; j++) {
                e->in_out[TP_EINSUM_LETTERS + j] = true;
                e->out_label[e->out_ndim++] = TP_EINSUM_LETTERS + j;
            }
        for (int l = 0; l < TP_EINSUM_LETTERS; l++)
            if (count[l] == 1) {
                TP_CHECK(e->out_ndim < TP_MAX_DIMS, TP_ERR_SHAPE, "einsum(): the output has more than %d dims",
                         TP_MAX_DIMS);
                e->in_out[l] = true;
                e->out_label[e->out_ndim++] = l;
            }
    }
    return TP_OK;
}

int64_t tp__einsum_label_stride(const tp_einsum *e, const tp_tensor *t, int i, int l) {
    int64_t s = 0;
    for (int d = 0; d < e->op_ndim[i]; d++)
        if (e->op_label[i][d] == l && !(t->sizes[d] == 1 && e->size[l] != 1)) s += t->strides[d];
    return s;
}

/* ---- the op ----------------------------------------------------------- */

enum { EI_EQUATION, EI_TENSORS, EI_PATH };

static tp_status einsum_setup(const tp_value *args, tp_einsum *e, const tp_tensor **ops, int *n) {
    const char *eq = tp__arg_str(args, EI_EQUATION);
    TP_CHECK(eq, TP_ERR_TYPE, "einsum(): the equation must be a string");
    int64_t len = tp_value_len(&args[EI_TENSORS]);
    TP_CHECK(len <= TP_EINSUM_MAX_OPERANDS, TP_ERR_UNSUPPORTED, "einsum(): at most %d operands are supported, got %" PRId64,
             TP_EINSUM_MAX_OPERANDS, len);
    *n = (int)len;
    for (int i = 0; i < *n; i++) {
        const tp_value *v = tp_value_at(&args[EI_TENSORS], i);
        TP_CHECK(v && v->kind == TP_VAL_TENSOR, TP_ERR_TYPE, "einsum(): operand %d is not a tensor", i);
        ops[i] = v->u.tensor;
        TP_CHECK(ops[i]->dtype != TP_BOOL, TP_ERR_TYPE, "einsum(): bool operands are not supported");
        TP_CHECK(ops[i]->dtype == ops[0]->dtype, TP_ERR_TYPE,
                 "einsum(): expected all operands to have the same dtype, got %s and %s", tp_dtype_name(ops[0]->dtype),
                 tp_dtype_name(ops[i]->dtype));
    }
    return tp__einsum_parse(eq, *n, ops, e);
}

static tp_status einsum_infer(const tp_value *args, tp_value *out) {
    tp_einsum e;
    const tp_tensor *ops[TP_EINSUM_MAX_OPERANDS];
    int n;
    TP_TRY(einsum_setup(args, &e, ops, &n));
    /* each label's size: equal within an operand (a diagonal), broadcast
     * across operands (the parse checked the sizes; these are the guards) */
    tp_sdim size[TP_EINSUM_MAX_LABELS];
    bool have[TP_EINSUM_MAX_LABELS] = {false};
    for (int i = 0; i < n; i++) {
        tp_sdim seen[TP_EINSUM_MAX_LABELS];
        bool got[TP_EINSUM_MAX_LABELS] = {false};
        for (int d = 0; d < e.op_ndim[i]; d++) {
            int l = e.op_label[i][d];
            tp_sdim x = tp__dim(ops[i], d);
            if (got[l]) tp__dim_eq(x, seen[l], "einsum diagonal dims are equal");
            else {
                seen[l] = x;
                got[l] = true;
            }
        }
        for (int l = 0; l < TP_EINSUM_MAX_LABELS; l++) {
            if (!got[l]) continue;
            if (!have[l]) size[l] = seen[l];
            else if (!tp__dim_broadcast(size[l], seen[l], &size[l])) tp__dim_give_up();
            have[l] = true;
        }
    }
    tp_sdim dims[TP_MAX_DIMS];
    for (int d = 0; d < e.out_ndim; d++) {
        int l = e.out_label[d];
        dims[d] = have[l] ? size[l] : tp__dimk(e.size[l]);
        dims[d].v = e.size[l];
    }
    return tp__out_dims(out, ops[0]->dtype, e.out_ndim, dims);
}

static tp_status einsum_kernel(const tp_value *args, tp_value *out) {
    tp_einsum e;
    const tp_tensor *ops[TP_EINSUM_MAX_OPERANDS];
    int n;
    TP_TRY(einsum_setup(args, &e, ops, &n));
    tp_tensor *y = tp__out_at(out, 0);
    int64_t count = tp_tensor_numel(y);
    if (count == 0) return TP_OK;
    /* loop labels: the output's (C order), then the summed ones */
    int labels[TP_EINSUM_MAX_LABELS], nl = 0, n_out = e.out_ndim;
    for (int d = 0; d < n_out; d++) labels[nl++] = e.out_label[d];
    int64_t inner = 1;
    for (int l = 0; l < TP_EINSUM_MAX_LABELS; l++)
        if (e.used[l] && !e.in_out[l]) {
            labels[nl++] = l;
            inner *= e.size[l];
        }
    int64_t stride[TP_EINSUM_MAX_OPERANDS][TP_EINSUM_MAX_LABELS];
    const char *base[TP_EINSUM_MAX_OPERANDS];
    int64_t esize[TP_EINSUM_MAX_OPERANDS];
    for (int i = 0; i < n; i++) {
        base[i] = tp__tensor_base(ops[i]);
        esize[i] = (int64_t)tp_dtype_size(ops[i]->dtype);
        for (int k = 0; k < nl; k++) stride[i][k] = tp__einsum_label_stride(&e, ops[i], i, labels[k]);
    }
    bool is_float = tp_dtype_is_float(y->dtype);
    char *yb = tp__tensor_base(y);
    int64_t ysize = (int64_t)tp_dtype_size(y->dtype);
    int64_t idx[TP_EINSUM_MAX_LABELS] = {0};
    int64_t off[TP_EINSUM_MAX_OPERANDS] = {0}; /* element offsets at the current output index */
    for (int64_t o = 0; o < count; o++) {
        double acc = 0.0;
        uint64_t iacc = 0;
        int64_t sidx[TP_EINSUM_MAX_LABELS] = {0};
        int64_t soff[TP_EINSUM_MAX_OPERANDS];
        for (int i = 0; i < n; i++) soff[i] = off[i];
        for (int64_t s = 0; s < inner; s++) {
            if (is_float) {
                double p = 1.0;
                for (int i = 0; i < n; i++) p *= tp__load_f64(base[i] + soff[i] * esize[i], ops[i]->dtype);
                acc += p;
            } else {
                uint64_t p = 1;
                for (int i = 0; i < n; i++) p *= (uint64_t)tp__load_i64(base[i] + soff[i] * esize[i], ops[i]->dtype);
                iacc += p;
            }
            for (int k = nl - 1; k >= n_out; k--) { /* next combination of summed labels */
                if (++sidx[k] < e.size[labels[k]]) {
                    for (int i = 0; i < n; i++) soff[i] += stride[i][k];
                    break;
                }
                for (int i = 0; i < n; i++) soff[i] -= stride[i][k] * (e.size[labels[k]] - 1);
                sidx[k] = 0;
            }
        }
        if (is_float) tp__store_f64(yb + o * ysize, y->dtype, acc);
        else tp__store_i64(yb + o * ysize, y->dtype, (int64_t)iacc);
        for (int k = n_out - 1; k >= 0; k--) { /* next output index */
            if (++idx[k] < e.size[labels[k]]) {
                for (int i = 0; i < n; i++) off[i] += stride[i][k];
                break;
            }
            for (int i = 0; i < n; i++) off[i] -= stride[i][k] * (e.size[labels[k]] - 1);
            idx[k] = 0;
        }
    }
    return TP_OK;
}

void tp__register_einsum_op(void) {
    tp__register_op(TP_OP_EINSUM, "einsum(str equation, Tensor[] tensors, *, int[]? path=None) -> Tensor", 0,
                    einsum_infer, einsum_kernel);
}
