/*
 * ops_impl.h - how kernel families register ops (internal).
 *
 * Each family file src/cpu/<family>.c defines tp__register_<family>_ops(),
 * which calls tp__register_op() once per op of that family in op_list.h.
 *
 * Contracts:
 *  - infer(args, out): `args` holds one bound value per schema argument
 *    (defaults filled). Tensor arguments may be meta tensors: use only
 *    dtype/shape. Set *out (initially None) to the result shaped like the
 *    schema's return (tp__out_tensor / tp__out_tuple / tp__out_list). On bad
 *    arguments return an error whose message does NOT name the op (the
 *    dispatcher prefixes "<op>: ").
 *  - kernel(args, out): for ordinary ops *out arrives holding freshly
 *    allocated contiguous tensors matching what infer produced; the kernel
 *    fills them. For TP_OPF_VIEW / TP_OPF_INPLACE ops *out arrives None and
 *    the kernel sets it (a view sharing storage, or a new reference to the
 *    mutated argument). Kernels must accept arbitrary strides (including 0
 *    and negative-free non-contiguous views) on their inputs.
 */
#ifndef TPEXPORT_OPS_IMPL_H
#define TPEXPORT_OPS_IMPL_H

#include "../internal.h"
#include "tpexport/ops.h"

typedef tp_status (*tp_infer_fn)(const tp_value *args, tp_value *out);
typedef tp_status (*tp_kernel_fn)(const tp_value *args, tp_value *out);

/* Register an op (called from family registration functions, during
 * tp_ops_init, single-threaded). `schema` must be a string literal whose
 * name matches the op's name in op_list.h. */
TP_HIDDEN void tp__register_op(tp_op op, const char *schema, unsigned flags, tp_infer_fn infer,
                               tp_kernel_fn kernel);
/* Register an optimised kernel for an op already registered. */
TP_HIDDEN void tp__register_fast_kernel(tp_op op, tp_kernel_fn kernel);

#define TP_FAMILY(f) TP_HIDDEN void tp__register_##f##_ops(void);
TP_FAMILY(unary)
TP_FAMILY(binary)
TP_FAMILY(reduce)
TP_FAMILY(linalg)
TP_FAMILY(conv)
TP_FAMILY(pool)
TP_FAMILY(nn)
TP_FAMILY(shape)
TP_FAMILY(index)
TP_FAMILY(create)
TP_FAMILY(onnx_ops)
TP_FAMILY(symint)
#undef TP_FAMILY

/* Parsed-schema support (schema.c). */
TP_HIDDEN tp_status tp__schema_parse(const char *text, tp_schema *out);
TP_HIDDEN void tp__schema_free(tp_schema *s);

#endif
