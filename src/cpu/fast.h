/*
 * fast.h - fast kernel variants (contract v2) shared declarations (internal).
 */
#ifndef TPEXPORT_FAST_H
#define TPEXPORT_FAST_H

#include "../ops/ops_impl.h"
#include "cpu.h"
#include "eltwise.h"

/* The tensor a prepare step is to write (its output value), or NULL when
 * the op's output is not a single tensor. */
static inline tp_tensor *tp__fast_out(const tp_value *out) {
    return out->kind == TP_VAL_TENSOR ? out->u.tensor : NULL;
}

/* GEMM epilogue callback running a fused activation: ctx is the
 * activation step's tp_op_plan (its apply hook). */
static inline void tp__fused_act(float *p, int64_t n, const void *ctx) {
    const tp_op_plan *act = ctx;
    act->apply(act, p, n);
}

/* What a prepared float32 convolution (fast_conv.c) computes, for the
 * oneDNN layout pass (onednn.c). weight/bias: the constant weight and bias
 * with any folded batch norm (bias NULL: none); weight NULL when the
 * weight or bias is a run-time tensor. */
typedef struct tp_conv_info {
    int64_t n, cin, h, w, cout, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, groups;
    bool input_contiguous;
    const float *weight, *bias;
    int ires;                  /* fused residual: index into in[], -1 none */
    const tp_op_plan *act;     /* fused activation, NULL none */
} tp_conv_info;
TP_HIDDEN bool tp__conv_info(const tp_op_plan *plan, tp_conv_info *out);

/* What a prepared float32 elementwise step (fast_eltwise.c) computes:
 * op is a TP_ELT_* code; binary steps have alpha (add/sub) in f[0];
 * unary steps their parameters in f[0..3]. chained: it runs fused
 * consumers too. */
typedef struct tp_elt_info {
    bool binary, scalar_b, chained;
    int op;
    double f[4];
} tp_elt_info;
TP_HIDDEN bool tp__eltwise_info(const tp_op_plan *plan, tp_elt_info *out);
/* The same for a bfloat16 / float16 elementwise step. */
TP_HIDDEN bool tp__eltwise_half_info(const tp_op_plan *plan, tp_elt_info *out);
/* The TP_ELT_* op of a fused activation that is one unary elementwise op
 * (not binary, no chain of its own), else -1 (also for NULL). */
static inline int tp__fused_act_op(const tp_op_plan *act) {
    tp_elt_info e;
    return act && tp__eltwise_info(act, &e) && !e.binary && !e.chained ? e.op : -1;
}
/* A fused activation that GEMM tiles and the depthwise fill apply in
 * registers (tp_gemm_epilogue.act_relu, tp_conv_dw.relu): 1 relu, 2 relu6
 * or clamp(0, 6) (ONNX's Clip of relu6: the same results, -0 and NaN
 * included), else 0. */
static inline int tp__fused_relu_mode(const tp_op_plan *act) {
    tp_elt_info e;
    if (!act || !tp__eltwise_info(act, &e) || e.binary || e.chained) return 0;
    if (e.op == TP_ELT_RELU) return 1;
    return e.op == TP_ELT_RELU6 || (e.op == TP_ELT_CLAMP && e.f[0] == 0.0 && e.f[1] == 6.0) ? 2 : 0;
}

/* max_pool2d (fast_nn.c): q[0..11] = h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw. */
TP_HIDDEN bool tp__maxpool_info(const tp_op_plan *plan, int64_t q[12]);
/* avg_pool2d / adaptive_avg_pool2d (fast_nn.c): q as for max pooling (an
 * adaptive pool with equal windows as kernel = stride = in / out);
 * *exact: oneDNN's average (whole window or inside-input divisor) gives
 * PyTorch's result. */
TP_HIDDEN bool tp__avgpool_info(const tp_op_plan *plan, int64_t q[12], bool *include_pad, bool *exact);

TP_HIDDEN void tp__register_fast_eltwise(void);
TP_HIDDEN void tp__register_fast_linalg(void);
TP_HIDDEN void tp__register_fast_nn(void);
TP_HIDDEN void tp__register_fast_conv(void);
TP_HIDDEN void tp__register_fast_attention(void);
TP_HIDDEN void tp__register_fast_index(void);
TP_HIDDEN void tp__register_fast_shape(void);
TP_HIDDEN void tp__register_fast_onednn(void);

#endif
