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

/* ---- kernel contract v2: prepare once, run many times -------------------
 *
 * A fast variant of an op has a prepare step, called once when a plan is
 * built, and a run step, called on every execution:
 *
 *   prepare(info, bound, out, plan): `bound` holds the bound arguments
 *     (tp_op_bind, defaults filled) where every tensor is either a meta
 *     tensor with the plan's exact dtype, sizes and strides, or - when
 *     info->is_const[k] is true for its tensor leaf k - the real constant
 *     tensor (a parameter or constant that no node mutates), whose data may
 *     be read and packed. `out` is the op's shape-rule result (meta). The
 *     variant fills `plan` (run function, unboxed parameters, workspace,
 *     prepared data) and returns TP_OK, or declines with TP_ERR_UNSUPPORTED
 *     (the next variant or the reference kernel is used). Any other error
 *     fails the plan.
 *   run(plan, in, out, exec): in[] holds the tensor leaves of the bound
 *     arguments in order (a Tensor argument, each item of a Tensor[]
 *     argument; NULL for a None Tensor?), out[] the output tensors, both with
 *     exactly the metadata prepare saw (offsets may differ). exec gives the
 *     thread index ith in [0, nth) and the node's workspace. With
 *     plan->max_threads > 1 the engine calls run concurrently for each ith
 *     and waits for all; each call must write a disjoint part of the
 *     outputs. run must not allocate; it returns TP_OK or an error for
 *     data-dependent failures (e.g. an index out of range).
 */
typedef struct tp_exec {
    int ith, nth;
    void *workspace; /* plan->workspace bytes, 64-byte aligned, shared by the nth calls */
    void *ctx;       /* the run context's state for this step (tp_op_plan.ctx_new), or NULL */
    /* nth zeroed work claims (threadpool.h) when nth > 1, else NULL: a run
     * may take its units of work from these instead of a static split (one
     * claimed split per step: the array is zeroed once per step). */
    struct tp_claim *claims;
} tp_exec;

typedef struct tp_op_plan tp_op_plan;
typedef tp_status (*tp_run_fn)(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out,
                               const tp_exec *exec);

struct tp_op_plan {
    tp_run_fn run;
    const char *variant;  /* static string: "avx512", "avx2", "scalar" */
    int max_threads;      /* 1: only ith 0 is called */
    bool inplace_ok;      /* out[0] may share memory with in[inplace_in] (elementwise, same layout) */
    int inplace_in;       /* the input inplace_ok refers to (default 0) */
    size_t workspace;     /* scratch bytes per execution */
    void *data;           /* prepared data (owned by the plan) */
    size_t data_bytes;    /* counted as packed bytes in the memory report */
    void (*free_data)(void *data);
    /* Per-run-context state (library-backed kernels keep handles there):
     * made when a run context adopts the plan, freed when it drops it, and
     * passed to every call as exec->ctx. Calls of one run context never
     * overlap, so the state needs no lock. */
    tp_status (*ctx_new)(const tp_op_plan *plan, void **ctx);
    void (*ctx_free)(void *ctx);
    /* Fusion (engine.c, at plan time). A producer (GEMM, convolution) that
     * can absorb its consumer sets fuse; a consumer describes itself with
     * apply (an activation applied in place to n contiguous floats),
     * residual_add (out = in0 + in1, same shape, contiguous), bias_add
     * (out = in0 + in1, in1 a contiguous row over the last dim) or
     * channel_scale/channel_shift (eval batch norm with constant
     * parameters: out[:, c] = in0[:, c] * scale[c] + shift[c]). fuse returns
     * TP_OK when it took the consumer (leaf: the in[] index the engine
     * appends for a residual or bias tensor). */
    tp_status (*fuse)(tp_op_plan *plan, const tp_op_plan *consumer, int kind, int leaf);
    void (*apply)(const tp_op_plan *plan, float *p, int64_t n);
    bool residual_add, bias_add;
    int bias_leaf;        /* bias_add: which of in[0], in[1] is the row vector */
    const float *channel_scale, *channel_shift;
    int64_t channels;
    bool stream_out;      /* the output exceeds tp__stream_min_bytes: written with non-temporal stores */
    int64_t i[24];        /* unboxed int parameters, meaning private to the variant */
    double f[8];          /* unboxed float parameters */
    const void *fn;       /* e.g. the element function chosen */
};

/* Kinds of fusion (tp_op_plan.fuse). */
enum { TP_FUSE_ACT, TP_FUSE_RESIDUAL, TP_FUSE_BIAS, TP_FUSE_CHANNEL_AFFINE };

typedef struct tp_prepare_info {
    int cpu_level;        /* highest tp_cpu_level allowed (>= TP_CPU_SCALAR) */
    int max_threads;      /* threads the run may use */
    const bool *is_const; /* per tensor leaf of bound: a constant with data */
    int n_leaves;
} tp_prepare_info;

typedef tp_status (*tp_prepare_fn)(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,
                                   tp_op_plan *plan);

/* Register a fast variant for an op (during tp_ops_init). Variants are
 * tried in registration order; register the most specialised first.
 * min_level: the lowest tp_cpu_level it needs (TP_CPU_SCALAR for portable
 * code); the planner skips variants above the allowed level. */
TP_HIDDEN void tp__register_variant(tp_op op, const char *name, int min_level, tp_prepare_fn prepare);

typedef struct tp_variant {
    const char *name;
    int min_level;
    tp_prepare_fn prepare;
} tp_variant;
/* The variants of op (NULL, 0 when none). */
TP_HIDDEN const tp_variant *tp__op_variants(tp_op op, int *n);
/* The reference kernel (NULL when none). */
TP_HIDDEN tp_kernel_fn tp__op_reference_kernel(tp_op op);
/* The kernel tp_op_call_bound would run: the optimised eager kernel unless
 * `reference` or tp_ops_force_reference is set. */
TP_HIDDEN tp_kernel_fn tp__op_eager_kernel(tp_op op, bool reference);
/* tp_ops_force_reference's setting (plans built meanwhile use the reference level). */
TP_HIDDEN bool tp__ops_reference_forced(void);

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
TP_FAMILY(advindex)
TP_FAMILY(loss)
TP_FAMILY(random)
TP_FAMILY(create)
TP_FAMILY(onnx_ops)
TP_FAMILY(signal)
TP_FAMILY(symint)
TP_FAMILY(fast)
#undef TP_FAMILY

/* Parsed-schema support (schema.c). */
TP_HIDDEN tp_status tp__schema_parse(const char *text, tp_schema *out);
TP_HIDDEN void tp__schema_free(tp_schema *s);
/* Empty the op table (tp_shutdown); the next tp_ops_init fills it again. */
TP_HIDDEN void tp__ops_shutdown(void);

#endif
