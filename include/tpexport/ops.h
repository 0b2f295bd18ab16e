/*
 * ops.h - the operator registry: op ids, schemas, shape/dtype inference and
 * eager dispatch.
 *
 * Every op has:
 *  - a schema, written like PyTorch's:
 *      "add(Tensor self, Tensor|Scalar other, *, Scalar alpha=1) -> Tensor"
 *    Argument types: Tensor, Tensor?, Tensor[], Tensor|Scalar, Scalar,
 *    Scalar?, int, int?, int[], int[]?, float, float?, bool, bool?, str,
 *    str?, ScalarType?, Any. Arguments after `*` are keyword-only. Defaults:
 *    numbers, True/False, None, [1, 2], 'text'. Returns: Tensor,
 *    (Tensor, Tensor), Tensor[] or Any.
 *  - a shape/dtype rule that works on tensor metadata only (meta tensors
 *    are accepted wherever a tensor is), so every node's output shape is
 *    known before running: memory planning and graph building use it;
 *  - a reference CPU kernel that accepts any strides, the specification,
 *    and optionally fast variants chosen when a plan is prepared (by dtype,
 *    layout, shapes and CPU level; see run.h and src/ops/ops_impl.h);
 *    tp_ops_force_reference forces the reference path.
 *
 * Semantics follow PyTorch: broadcasting, type promotion (dimensioned tensors
 * over 0-d tensors over Python scalars, by category bool < int < float),
 * integer division rules, NaN propagation.
 */
#ifndef TPEXPORT_OPS_H
#define TPEXPORT_OPS_H

#include <stdbool.h>
#include "status.h"
#include "tensor.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tp_op {
#define TP_OP(id, name, family) TP_OP_##id,
#include "op_list.h"
#undef TP_OP
    TP_OP_COUNT
} tp_op;

#define TP_OP_INVALID ((tp_op)-1)

/* Op flags. */
enum {
    TP_OPF_VIEW = 1u << 0,      /* outputs alias an input's storage */
    TP_OPF_INPLACE = 1u << 1,   /* writes into its first argument and returns it */
    TP_OPF_MUTATES = 1u << 2,   /* may write into some tensor argument(s) */
    TP_OPF_EFFECTFUL = 1u << 3, /* must not be removed by dead-code elimination */
    TP_OPF_RANDOM = 1u << 4,    /* may draw random numbers */
    /* the output's size may depend on input values (nonzero, x[mask]): the
     * shape rule needs data and reports TP_ERR_UNSUPPORTED on metadata, so
     * programs using the op run in the interpreter */
    TP_OPF_DATA_DEPENDENT = 1u << 5
};

typedef enum tp_arg_type {
    TP_ARG_TENSOR,
    TP_ARG_OPT_TENSOR,
    TP_ARG_TENSOR_LIST,
    TP_ARG_TENSOR_OR_SCALAR,
    TP_ARG_SCALAR,
    TP_ARG_OPT_SCALAR,
    TP_ARG_INT,
    TP_ARG_OPT_INT,
    TP_ARG_INT_LIST,
    TP_ARG_OPT_INT_LIST,
    TP_ARG_FLOAT,
    TP_ARG_OPT_FLOAT,
    TP_ARG_BOOL,
    TP_ARG_OPT_BOOL,
    TP_ARG_STR,
    TP_ARG_OPT_STR,
    TP_ARG_OPT_DTYPE,
    TP_ARG_ANY
} tp_arg_type;

typedef enum tp_return_kind {
    TP_RET_TENSOR,      /* one tensor */
    TP_RET_TUPLE,       /* fixed-size tuple of tensors */
    TP_RET_TENSOR_LIST, /* list of tensors, count from the shape rule */
    TP_RET_ANY          /* any value (getitem) */
} tp_return_kind;

typedef struct tp_schema_arg {
    const char *name;
    tp_arg_type type;
    bool kwarg_only;
    bool has_default;
    tp_value default_value; /* valid if has_default */
} tp_schema_arg;

typedef struct tp_schema {
    const char *name;
    int n_args;
    const tp_schema_arg *args;
    tp_return_kind returns;
    int n_returns; /* tuples: count; otherwise 1 */
} tp_schema;

/* Initialise the registry (parses all schemas). Called implicitly by every
 * function below; thread-safe. Fails only on a bug or out of memory. */
TP_API tp_status tp_ops_init(void);

TP_API const char *tp_op_name(tp_op op);            /* "add"; "?" if invalid */
TP_API tp_op tp_op_from_name(const char *name);     /* TP_OP_INVALID if unknown */
TP_API const tp_schema *tp_op_schema(tp_op op);     /* NULL if invalid */
TP_API unsigned tp_op_flags(tp_op op);
/* The schema as text (static storage). */
TP_API const char *tp_op_schema_text(tp_op op);

/* Force the reference kernels (true) or allow optimised variants (false,
 * default). Process-wide: eager calls, and plans built while it is set
 * (run.h: like TP_CPU_REFERENCE), use only reference kernels. */
TP_API void tp_ops_force_reference(bool force);

/* Bind call arguments to the schema: positional `args` (n_args of them) and
 * keyword arguments in `kwargs` (a dict value, or NULL). Writes one value per
 * schema argument to `bound` (schema->n_args entries, caller clears each),
 * with defaults filled in and ints widened to floats where a float is
 * expected. Errors: too many positional arguments, unknown keyword, argument
 * given twice, missing argument, wrong type - each naming op and argument.
 * Tensor-typed arguments accept TP_VAL_TENSOR or (for graph building)
 * TP_VAL_NODE values. */
TP_API tp_status tp_op_bind(tp_op op, const tp_value *args, int n_args, const tp_value *kwargs,
                            tp_value *bound);

/* Shape/dtype inference from bound arguments (tensors may be meta).
 * Returns the outputs as a value shaped like the op's result (meta tensor, a
 * tuple or a list of meta tensors; for getitem: the item). */
TP_API tp_status tp_op_infer(tp_op op, const tp_value *bound, tp_value *out);

/* Eager call: bind, infer, allocate outputs, run the kernel. *out receives
 * the result (a tensor, tuple or list value), owned by the caller. */
TP_API tp_status tp_op_call(tp_op op, const tp_value *args, int n_args, const tp_value *kwargs,
                            tp_value *out);
/* Same with already-bound arguments (from tp_op_bind: one value per schema
 * argument). Every op, in-place and view ops included, checks each value's
 * kind against the schema before its kernel runs (TP_ERR_TYPE naming the
 * argument; tensors must be real tensors, not graph nodes). */
TP_API tp_status tp_op_call_bound(tp_op op, const tp_value *bound, tp_value *out);

/* Has the op a reference kernel / an optimised variant? */
TP_API bool tp_op_has_kernel(tp_op op);

#ifdef __cplusplus
}
#endif
#endif
