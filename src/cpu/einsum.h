/*
 * einsum.h - torch.einsum's equation, parsed against the operands' shapes
 * (internal; shared by the reference kernel in einsum.c and the GEMM
 * variant in fast_linalg.c).
 *
 * Equations follow PyTorch: subscripts [a-zA-Z], operands separated by
 * ',', an optional '->' and output; spaces are ignored; '...' (at most once
 * per term) stands for dims broadcast right-aligned across the operands.
 * Without '->' the output is the ellipsis dims followed by the subscripts
 * used exactly once, in alphabetical order (upper case first). A subscript
 * repeated within one operand takes its diagonal; one missing from the
 * output is summed over; dims of size 1 broadcast against the other
 * operands' sizes for the same subscript.
 */
#ifndef TPEXPORT_CPU_EINSUM_H
#define TPEXPORT_CPU_EINSUM_H

#include "kernel_util.h"

/* Labels: 0..51 for A-Z a-z, then one per ellipsis dim. */
#define TP_EINSUM_LETTERS 52
#define TP_EINSUM_MAX_LABELS (TP_EINSUM_LETTERS + TP_MAX_DIMS)
/* At most this many operands (tensorplay and PyTorch have no limit; the
 * reference kernel keeps per-operand strides on the stack). */
#define TP_EINSUM_MAX_OPERANDS 16

typedef struct tp_einsum {
    int n_ops;
    int op_ndim[TP_EINSUM_MAX_OPERANDS];
    int op_label[TP_EINSUM_MAX_OPERANDS][TP_MAX_DIMS]; /* label of each operand dim */
    int out_ndim;
    int out_label[TP_MAX_DIMS];
    bool used[TP_EINSUM_MAX_LABELS];   /* appears in some operand */
    bool in_out[TP_EINSUM_MAX_LABELS]; /* appears in the output */
    int64_t size[TP_EINSUM_MAX_LABELS]; /* broadcast size of each used label */
} tp_einsum;

/* Parse `equation` for n operands of the given ranks and sizes; errors
 * (TP_ERR_INVALID_ARG for the equation, TP_ERR_SHAPE for sizes) carry
 * PyTorch's "einsum(): ..." messages. */
TP_HIDDEN tp_status tp__einsum_parse(const char *equation, int n, const tp_tensor *const *operands, tp_einsum *e);

/* Element stride of label l in operand i: the sum of the strides of its
 * dims with that label (a diagonal), 0 where the dim broadcasts (size 1
 * against a larger label size) or the operand lacks the label. */
TP_HIDDEN int64_t tp__einsum_label_stride(const tp_einsum *e, const tp_tensor *t, int i, int l);

/* Registers einsum (called from tp__register_linalg_ops). */
TP_HIDDEN void tp__register_einsum_op(void);

#endif
