/*
 * fast.h - fast kernel variants (contract v2) shared declarations (internal).
 */
#ifndef TPEXPORT_FAST_H
#define TPEXPORT_FAST_H

#include "../ops/ops_impl.h"
#include "cpu.h"

/* GEMM epilogue callback running a fused activation: ctx is the
 * activation step's tp_op_plan (its apply hook). */
static inline void tp__fused_act(float *p, int64_t n, const void *ctx) {
    const tp_op_plan *act = ctx;
    act->apply(act, p, n);
}

TP_HIDDEN void tp__register_fast_eltwise(void);
TP_HIDDEN void tp__register_fast_linalg(void);
TP_HIDDEN void tp__register_fast_nn(void);
TP_HIDDEN void tp__register_fast_conv(void);
TP_HIDDEN void tp__register_fast_attention(void);

#endif
