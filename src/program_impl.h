/*
 * program_impl.h - the tp_program struct, shared by program.c, decomp.c and
 * passes.c (internal).
 */
#ifndef TPEXPORT_PROGRAM_IMPL_H
#define TPEXPORT_PROGRAM_IMPL_H

#include <pthread.h>

#include "engine_impl.h"
#include "internal.h"
#include "tpexport/program.h"

typedef struct tp_example {
    char *name;
    tp_value value;
} tp_example;

struct tp_program {
    atomic_long refcount;
    tp_graph *graph;
    tp_signature *signature;
    tp_module *state; /* state tree: targets -> tensors */
    tp_example *examples;
    int n_examples, cap_examples;
    tp_range_constraint *ranges; /* names owned */
    int n_ranges, cap_ranges;
    tp_equality_constraint *equalities; /* sites and names owned */
    int n_equalities, cap_equalities;
    tp_dim_rule *dim_rules; /* strings owned */
    int n_dim_rules, cap_dim_rules;
    struct {
        char *fqn;
        tp_module_call_signature *sig; /* owned, may be NULL */
    } *calls;
    int n_calls, cap_calls;
    tp_treespec *in_spec, *out_spec;
    tp_verifier_fn verifier;
    void *verifier_user;
    bool verifier_replaces; /* the verifier takes over the built-in signature checks */
    int folded_constants; /* counter for names made by constant folding */
    pthread_mutex_t lock; /* guards `unlifted` */
    tp_module *unlifted;
    tp_engine_state engine; /* cached plans, pooled run contexts (engine.c) */
};

/* The sizes a derived dim rule (kind TP_DIM_DERIVED) takes as its root
 * symbol ranges over its range constraint (none: [0, unbounded]):
 * scale*min+offset .. scale*max+offset, *hi TP_DIM_UNBOUNDED for an
 * unbounded root. Also gives the root's range. False when the arithmetic
 * overflows int64 (reader and writer refuse such a rule). */
TP_HIDDEN bool tp__derived_dim_range(const tp_program *p, const tp_dim_rule *r, int64_t *lo, int64_t *hi,
                                     int64_t *root_lo, int64_t *root_hi);
/* A rule's expression for messages: "batch", "2*batch", "2*batch+1". */
TP_HIDDEN void tp__dim_rule_expr(const tp_dim_rule *r, char *buf, size_t size);

/* Resolve a get_attr target against the program's state (interp resolver). */
TP_HIDDEN tp_status tp__program_resolve_attr(void *user, const char *target, tp_value *out);

/* tp_program_call through run context r (NULL: a pooled one). */
TP_HIDDEN tp_status tp__program_call_with(tp_program *p, tp_run *r, const tp_value *args, int n_args,
                                          const tp_value *kwargs, tp_value *out);

#endif
