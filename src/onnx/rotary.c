/*
 * rotary.c - ONNX RotaryEmbedding (opset 23), composed.
 *
 * The input, [B, heads, S, h] or [B, S, heads * h] (num_heads given), is
 * seen as [B, S, heads, h]; its first rotary_embedding_dim (default h)
 * features are rotated pairwise - the two halves, or even and odd features
 * when interleaved - by the angle whose cosine and sine come from the
 * caches ([B, S, d/2], or [max_position, d/2] looked up by position_ids):
 * (x1, x2) -> (cos x1 - sin x2, sin x1 + cos x2); the other features pass
 * through, and the result has the input's layout.
 */
#include <inttypes.h>
#include <string.h>

#include "onnx_impl.h"

/* x[..., start:end:step] along the last dim. */
static const tp_value *last_slice(rb *b, const tp_value *x, int64_t start, int64_t end, int64_t step) {
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg(&A, tp_value_int(-1));
    ox_arg(&A, tp_value_int(start));
    ox_arg(&A, tp_value_int(end));
    ox_arg(&A, tp_value_int(step));
    return rb_call(b, TP_OP_SLICE, &A);
}

static const tp_value *perm4(rb *b, const tp_value *x) { /* swap dims 1 and 2 */
    ox_args A;
    ox_args_init(&A);
    ox_arg_ref(&A, x);
    ox_arg_ints(&A, (int64_t[]){0, 2, 1, 3}, 4);
    return rb_call(b, TP_OP_PERMUTE, &A);
}

/* reshape x to [d0, d1, rest...] where d0, d1 are x's own dims 0 and 1. */
static const tp_value *reshape_keep2(rb *b, const tp_value *x, const int64_t *rest, int n_rest) {
    tp_value d[2] = {tp_value_none(), tp_value_none()}, r[TP_MAX_DIMS];
    const tp_value *sizes[TP_MAX_DIMS];
    tp_status st = b->st;
    for (int i = 0; i < 2; i++) {
        if (st == TP_OK) st = ox_dim(b->c, x, i, &d[i]);
        sizes[i] = rb_keep(b, st, &d[i]);
    }
    for (int i = 0; i < n_rest; i++) {
        r[i] = tp_value_int(rest[i]);
        sizes[2 + i] = &r[i];
    }
    return rb_reshape(b, x, 2 + n_rest, sizes);
}

tp_status tp__onnx_rotary_embedding(ox_ctx *c) {
    const tp_value *x = ox_in(c, 0), *cosc = ox_in(c, 1), *sinc = ox_in(c, 2), *pos = ox_in(c, 3);
    if (!x || !cosc || !sinc || !ox_meta(x) || !ox_meta(cosc) || !ox_meta(sinc))
        return ox_bad(c, "needs input, cos_cache and sin_cache");
    int rank = tp_tensor_ndim(ox_meta(x));
    if (rank != 3 && rank != 4) return ox_bad(c, "input must be 3-D or 4-D");
    int64_t heads = ox_attr_i(c, "num_heads", 0), rot = ox_attr_i(c, "rotary_embedding_dim", 0);
    bool inter = ox_attr_i(c, "interleaved", 0) != 0;
    int64_t h;
    if (rank == 3) {
        int64_t hidden = tp_tensor_sizes(ox_meta(x))[2];
        if (heads <= 0 || hidden % heads) return ox_bad(c, "3-D input needs num_heads dividing its hidden size %" PRId64, hidden);
        h = hidden / heads;
    } else {
        h = tp_tensor_sizes(ox_meta(x))[3];
    }
    if (rot == 0) rot = h;
    if (rot < 0 || rot > h || rot % 2) return ox_bad(c, "rotary_embedding_dim %" PRId64 " for head size %" PRId64, rot, h);
    int64_t half = rot / 2;
    const tp_tensor *cm = ox_meta(cosc);
    if (tp_tensor_sizes(cm)[tp_tensor_ndim(cm) - 1] != half)
        return ox_bad(c, "cos_cache's last dim is %" PRId64 ", rotary_embedding_dim / 2 is %" PRId64,
                      tp_tensor_sizes(cm)[tp_tensor_ndim(cm) - 1], half);
    rb b;
    rb_init(&b, c);
    /* [B, S, heads, h] */
    const tp_value *xs = rank == 4 ? perm4(&b, x) : reshape_keep2(&b, x, (int64_t[]){heads, h}, 2);
    const tp_value *cs = cosc, *sn = sinc;
    if (pos) { /* caches [max_position, d/2] looked up by position_ids [B, S] */
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, cosc);
        ox_arg_ref(&A, rb_cast(&b, pos, TP_INT64));
        cs = rb_call(&b, TP_OP_EMBEDDING, &A);
        ox_args_init(&A);
        ox_arg_ref(&A, sinc);
        ox_arg_ref(&A, rb_cast(&b, pos, TP_INT64));
        sn = rb_call(&b, TP_OP_EMBEDDING, &A);
    }
    cs = rb_dim(&b, TP_OP_UNSQUEEZE, cs, 2); /* [B, S, 1, d/2] */
    sn = rb_dim(&b, TP_OP_UNSQUEEZE, sn, 2);
    const tp_value *xr = rot < h ? last_slice(&b, xs, 0, rot, 1) : xs;
    const tp_value *x1 = inter ? last_slice(&b, xr, 0, rot, 2) : last_slice(&b, xr, 0, half, 1);
    const tp_value *x2 = inter ? last_slice(&b, xr, 1, rot, 2) : last_slice(&b, xr, half, rot, 1);
    const tp_value *re = rb2(&b, TP_OP_SUB, rb2(&b, TP_OP_MUL, cs, x1), rb2(&b, TP_OP_MUL, sn, x2));
    const tp_value *im = rb2(&b, TP_OP_ADD, rb2(&b, TP_OP_MUL, sn, x1), rb2(&b, TP_OP_MUL, cs, x2));
    const tp_value *y;
    if (inter) { /* (re0, im0, re1, im1, ...) */
        y = reshape_keep2(&b, rb_cat(&b, rb_dim(&b, TP_OP_UNSQUEEZE, re, -1), rb_dim(&b, TP_OP_UNSQUEEZE, im, -1), -1),
                          (int64_t[]){heads ? heads : tp_tensor_sizes(ox_meta(x))[1], rot}, 2);
    } else {
        y = rb_cat(&b, re, im, -1);
    }
    if (rot < h) y = rb_cat(&b, y, last_slice(&b, xs, rot, h, 1), -1);
    if (rank == 4) y = perm4(&b, y);
    else y = reshape_keep2(&b, y, (int64_t[]){heads * h}, 1);
    tp_value out = tp_value_none();
    tp_status st = b.st;
    if (st == TP_OK) st = ox_cast(c, y, tp_tensor_dtype(ox_meta(x)), &out);
    if (st == TP_OK) st = ox_set_out(c, 0, &out);
    rb_clear(&b);
    return st;
}
