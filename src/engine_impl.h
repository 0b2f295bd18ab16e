/*
 * engine_impl.h - compiled plans and run contexts (internal; the public API
 * is include/tpexport/run.h, the walk-through docs/architecture.md).
 *
 * A plan is built for one program version and one input-shape class (the
 * dtypes, sizes and strides of the user inputs, and the values of
 * non-tensor user inputs). It is immutable and reference counted; the
 * program caches a few, run contexts hold the one they use.
 */
#ifndef TPEXPORT_ENGINE_IMPL_H
#define TPEXPORT_ENGINE_IMPL_H

#include <pthread.h>

#include "ops/ops_impl.h"
#include "tpexport/run.h"

/* Where a slot's tensor lives. */
typedef enum slot_kind {
    SLOT_INPUT,  /* a user input tensor (placeholder `input`) */
    SLOT_CONST,  /* a tensor fixed for the plan: state, a view of state, a token */
    SLOT_ARENA,  /* an intermediate at a planned byte offset in the arena */
    SLOT_VIEW,   /* a view of root (an INPUT, ARENA or OUTPUT slot), element offset `offset` from it */
    SLOT_OUTPUT  /* a user output: the caller's tensor, or one made for it */
} slot_kind;

typedef struct plan_slot {
    slot_kind kind;
    tp_dtype dtype;
    int ndim;
    int64_t sizes[TP_MAX_DIMS];
    int64_t strides[TP_MAX_DIMS];
    int64_t offset; /* ARENA: bytes into the arena; VIEW: elements from the root's offset */
    size_t nbytes;  /* ARENA / OUTPUT: bytes of the contiguous tensor */
    int root;       /* VIEW */
    int input;      /* INPUT: placeholder position among the flat inputs */
    int output;     /* OUTPUT: user output index */
    tp_tensor *constant; /* CONST: one reference */
    int def, last;       /* step defining it, last step reading it */
} plan_slot;

typedef enum step_kind { STEP_FAST, STEP_LEGACY, STEP_VIEW, STEP_COPY, STEP_FUSED /* absorbed by its producer */ } step_kind;

typedef struct leaf_ref {
    int arg;  /* index into the bound arguments */
    int item; /* -1: the argument itself; else item of a Tensor[] argument */
} leaf_ref;

typedef struct plan_step {
    step_kind kind;
    char *name, *target; /* the node's (owned copies, for errors and the profile) */
    tp_op op;
    int n_in, n_out;
    int *in, *out;       /* slot ids; -1 for a None optional tensor */
    tp_op_plan op_plan;  /* STEP_FAST */
    /* STEP_LEGACY: bound arguments with every tensor leaf None; in[k] goes to leaves[k] */
    int n_args;
    tp_value *args;
    leaf_ref *leaves;
    int out_kind; /* 0: one tensor, 1: tuple, 2: list, 3: none (in-place op) */
} plan_step;

typedef struct plan_mutation {
    int slot;            /* the new value */
    int dst_slot;        /* the slot it is written into (CONST state or INPUT) */
} plan_mutation;

typedef struct key_entry {
    int placeholder;     /* flat position */
    bool is_tensor;
    tp_dtype dtype;
    int ndim;
    int64_t sizes[TP_MAX_DIMS];
    int64_t strides[TP_MAX_DIMS];
    tp_value value;      /* non-tensor inputs: the value (part of the key) */
} key_entry;

struct tp_plan {
    atomic_long refcount;
    unsigned long version;  /* the program version it was built for */
    unsigned long graph_version;
    int cpu_level;
    int n_flat;             /* placeholders */
    int n_key;
    key_entry *key;         /* one per user-input placeholder */
    int n_slots, cap_slots;
    plan_slot *slots;
    int n_steps, cap_steps;
    plan_step *steps;
    size_t arena_bytes, workspace_bytes, workspace_offset, packed_bytes;
    int max_io;             /* largest n_in + n_out of a step */
    int n_leaves;           /* output leaves (pytree order) */
    int *leaf_slot;         /* slot per leaf, -1 for non-tensor / dropped leaves */
    tp_value leaf_consts;   /* tuple of n_leaves: non-tensor leaves, None elsewhere */
    tp_treespec *out_spec;  /* structure of the output node's value */
    int n_user_out;
    int *user_out_leaf;     /* leaf index of each user output */
    int n_mut;              /* leading leaves that are mutations or tokens */
    int n_mutations;
    plan_mutation *mutations;
    bool mutates_state;     /* calls must be serialised */
    bool all_tensor_io;     /* usable by tp_run_execute */
    int64_t n_fast, n_reference, n_fused, n_in_place;
};
typedef struct tp_plan tp_plan;

TP_HIDDEN void tp__plan_release(tp_plan *plan);

/* Per-program engine state, embedded in tp_program (program_impl.h). */
#define TP_PLAN_CACHE 8
#define TP_RUN_POOL 8
typedef struct tp_engine_state {
    pthread_mutex_t lock;      /* guards plans, idle runs */
    pthread_mutex_t call_lock; /* serialises calls of state-mutating plans */
    atomic_ulong version;      /* bumped by every change to the program */
    tp_plan *plans[TP_PLAN_CACHE];
    int n_plans;
    tp_run *idle[TP_RUN_POOL];
    int n_idle;
} tp_engine_state;

TP_HIDDEN void tp__engine_init(tp_engine_state *e);
TP_HIDDEN void tp__engine_destroy(tp_engine_state *e);
/* The program changed: drop plans (run contexts rebuild on their next call). */
TP_HIDDEN void tp__engine_invalidate(tp_program *p);

/* Run the program's graph on flat placeholder values (state placeholders
 * may be None: the plan reads the program's state), writing mutations back.
 * On success *raw is the output node's value where mutation and token
 * leaves are None and every tensor leaf is a new tensor owned by *raw, and
 * *leaves its pytree leaves. r may be NULL (a pooled run context is used).
 * *unplannable is set when the graph could not be planned (TP_ERR_UNSUPPORTED
 * before anything ran: the caller may interpret it instead); errors while
 * running never set it, since steps may have written state already. */
TP_HIDDEN tp_status tp__engine_call(tp_program *p, tp_run *r, const tp_value *flat, int64_t n_flat, tp_value *raw,
                                    tp_value *leaves, bool *unplannable);

/* Eager dispatch (tp_op_call_bound) through the op's fast variant, so an
 * op gives the same bits eagerly and in a plan. *handled false: no variant
 * took it (the caller runs the reference kernel). */
TP_HIDDEN tp_status tp__eager_fast_call(tp_op op, const tp_value *bound, int n_bound, tp_value *result, bool *handled);
/* Cap this thread's eager calls to a CPU level as a run context's option
 * caps its plans (TP_CPU_AUTO: the process-wide level); returns the cap it
 * replaces. A program interpreted through a run context runs at its level. */
TP_HIDDEN tp_cpu_level tp__eager_level_swap(tp_cpu_level level);
/* r's cpu_level option (NULL, a pooled run context: TP_CPU_AUTO). */
TP_HIDDEN tp_cpu_level tp__run_cpu_level(const tp_run *r);

/* Does a step after j and before c write slot r's storage (an output, or
 * an in-place op's first input, that is r, r's root or a view of either;
 * an op that may write any of its arguments counts too)? Fusions that move
 * a read from step j to step c (a fused residual or bias read at the
 * producer's step, a squeeze-excitation scale at the projection's) refuse
 * such a slot. */
TP_HIDDEN bool tp__plan_written_between(const tp_plan *plan, int r, int j, int c);
/* Slot id is read at step: it lives to step at least, and so (through
 * views) does the root it reads, which plan_memory frees. */
TP_HIDDEN void tp__plan_use_slot(tp_plan *plan, int id, int step);

/* Plan-time rewrites of a copy of the graph (plan_rewrite.c): the unfused
 * attention pattern becomes scaled_dot_product_attention. */
TP_HIDDEN tp_status tp__rewrite_attention(const tp_program *p, tp_graph *g, int *n_rewritten);
TP_HIDDEN tp_status tp__rewrite_silu(tp_graph *g, int *n_rewritten);
TP_HIDDEN tp_status tp__rewrite_gelu(const tp_program *p, tp_graph *g, int *n_rewritten);
/* Row selections (index_select / slice / select of a non-last dim) moved
 * before the row-wise ops that feed them (plan_rewrite.c). */
TP_HIDDEN tp_status tp__rewrite_row_select(const tp_program *p, tp_graph *g, int *n_rewritten);

/* The oneDNN layout pass (src/cpu/onednn.c): after fusion, before the
 * memory plan, steps of convolution regions become oneDNN primitives on
 * channels-last tensors. Declining changes nothing; only running out of
 * memory fails. */
TP_HIDDEN tp_status tp__plan_onednn(tp_plan *plan, int level, int threads);
/* Built with oneDNN and not disabled by TP_ONEDNN=0. */
TP_HIDDEN bool tp__onednn_enabled(void);
/* Tests only (test_onednn): when set to k >= 0, chunk k of every oneDNN
 * step that writes a fused mean reports a failed primitive instead of
 * running it, as a real failure would (the step's other chunks and threads
 * run on); -1 (the default) turns it off. Never set by the library. */
TP_HIDDEN void tp__onednn_test_fail_mean_chunk(int k);
/* Tests: fuse_dws fuses expansions whose output takes at least bytes per
 * image from now on (plans made later; -1: the default rule again). */
TP_HIDDEN void tp__onednn_test_fuse_ex_min(int64_t bytes);

/* Internal helpers shared with program.c. */
TP_HIDDEN tp_status tp__program_check_tensor_inputs(tp_program *p, tp_tensor *const *inputs, int n);

#endif
