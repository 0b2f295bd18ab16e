/*
 * fast_shape.c - fast variants (contract v2) of the copying shape ops:
 * cat (a ViT's class token before its patches, U-Net's skips, DenseNet's
 * features, a decoder's cache).
 *
 * cat copies whole contiguous runs with memcpy, any dtype, split between
 * threads by output bytes, where the reference copies each input through
 * a converting view (tp_tensor_copy_, an element at a time): ViT-S's
 * class-token cat (197 x 384 floats, the patches a transposed view of the
 * patch convolution's output) 0.10 -> 0.05 ms at one thread, the
 * transpose's gather being most of what is left.
 */
#include <string.h>

#include "fast.h"
#include "kernel_util.h"

/* ---- cat(Tensor[] tensors, int dim=0) -----------------------------------
 * Every input of out's dtype (the reference promotes mixed dtypes; those
 * stay on it), out contiguous. out is outer x row bytes; input k gives
 * each row its bytes [pre[k], pre[k + 1]), in order. plan->data: the n + 1
 * prefixes (int64); plan->i: [0] outer, [1] row bytes, [2] inputs, [3] dim,
 * [4] 1 when an input is strided (a transposed view): then one thread
 * copies each input into its slice of out (tp__tensor_copy_disjoint, rows
 * of the last dim at a time), not the engine's contiguous copy and then
 * the cat. Empty inputs (the legacy 1-D empty tensors the reference skips,
 * or a zero size along dim) take no bytes. */

/* Output bytes one thread copies at least: below that the split costs more
 * than it saves. */
enum { CAT_BYTES_PER_THREAD = 64 * 1024 };

/* Where thread i of nth starts in total bytes (i = nth: total), without
 * the overflow of total * i. */
static int64_t split_at(int64_t total, int i, int nth) { return total / nth * i + total % nth * i / nth; }

static tp_status cat_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const int64_t outer = plan->i[0], row = plan->i[1];
    const int64_t *pre = plan->data;
    if (plan->i[4]) { /* strided inputs: one thread (max_threads 1) */
        int64_t at = 0;
        for (int64_t k = 0; k < plan->i[2]; k++) {
            const tp_tensor *t = in[k];
            if (tp_tensor_numel(t) == 0) continue;
            tp_tensor slice;
            tp__view_narrow(out[0], (int)plan->i[3], at, t->sizes[plan->i[3]], &slice); /* on the stack */
            tp__tensor_copy_disjoint(&slice, t);
            at += t->sizes[plan->i[3]];
        }
        return TP_OK;
    }
    char *dst = tp__tensor_base(out[0]);
    const int64_t total = outer * row;
    /* this thread's output bytes [lo, hi) */
    const int64_t lo = split_at(total, ex->ith, ex->nth), hi = split_at(total, ex->ith + 1, ex->nth);
    if (lo >= hi || row == 0) return TP_OK;
    int64_t o = lo / row, r = lo % row, k = 0;
    for (int64_t p = lo; p < hi;) {
        while (pre[k + 1] <= r) k++; /* r < row = pre[n]: an input with bytes left */
        int64_t len = pre[k + 1] - r;
        if (len > hi - p) len = hi - p;
        memcpy(dst + p, (const char *)tp__tensor_base(in[k]) + o * (pre[k + 1] - pre[k]) + (r - pre[k]), (size_t)len);
        p += len;
        r += len;
        if (r == row) { /* the next row starts with the first input again */
            r = 0;
            k = 0;
            o++;
        }
    }
    return TP_OK;
}

static tp_status cat_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *outv,
                             tp_op_plan *plan) {
    tp_tensor *o = tp__fast_out(outv);
    const tp_value *list = &bound[0];
    if (!o || !tp_tensor_is_contiguous(o) || o->ndim < 1 || (list->kind != TP_VAL_LIST && list->kind != TP_VAL_TUPLE))
        return TP_ERR_UNSUPPORTED;
    const int64_t n = tp_value_len(list);
    if (n < 1 || n != info->n_leaves) return TP_ERR_UNSUPPORTED;
    int dim;
    if (tp__wrap_dim(tp__arg_int(bound, 1), o->ndim, &dim) != TP_OK) {
        tp_clear_error();
        return TP_ERR_UNSUPPORTED;
    }
    const int64_t es = (int64_t)tp_dtype_size(o->dtype);
    int64_t outer = 1, inner = es;
    for (int d = 0; d < dim; d++) outer *= o->sizes[d];
    for (int d = dim + 1; d < o->ndim; d++) inner *= o->sizes[d];
    int64_t *pre = tp_malloc((size_t)(n + 1) * sizeof(int64_t));
    if (!pre) return tp_error(TP_ERR_NOMEM, "out of memory planning a cat");
    pre[0] = 0;
    for (int64_t k = 0; k < n; k++) {
        const tp_value *v = tp_value_at(list, k);
        const tp_tensor *t = v->kind == TP_VAL_TENSOR ? v->u.tensor : NULL;
        /* an empty input takes no bytes whatever its shape */
        const bool empty = t && tp_tensor_numel(t) == 0;
        if (!t || t->dtype != o->dtype || (!empty && t->ndim != o->ndim)) {
            tp_free(pre);
            return TP_ERR_UNSUPPORTED;
        }
        if (!empty && !tp_tensor_is_contiguous(t)) plan->i[4] = 1;
        pre[k + 1] = pre[k] + (empty ? 0 : t->sizes[dim] * inner);
    }
    if (pre[n] != o->sizes[dim] * inner) { /* the shape rule's sizes, not these: leave it to the reference */
        tp_free(pre);
        return TP_ERR_UNSUPPORTED;
    }
    const int64_t bytes = outer * pre[n];
    int64_t nth = bytes / CAT_BYTES_PER_THREAD;
    if (nth > info->max_threads) nth = info->max_threads;
    plan->i[0] = outer;
    plan->i[1] = pre[n];
    plan->i[2] = n;
    plan->i[3] = dim;
    plan->data = pre;
    plan->free_data = tp_free;
    plan->variant = "memcpy";
    plan->run = cat_run;
    plan->max_threads = nth < 1 || plan->i[4] ? 1 : (int)nth;
    return TP_OK;
}

void tp__register_fast_shape(void) { tp__register_variant(TP_OP_CAT, "memcpy", TP_CPU_SCALAR, cat_prepare); }
