/*
 * dim.h - the dim type shape rules are written over (internal).
 *
 * A shape rule (ops_impl.h: infer) is written once and serves two callers:
 *
 *  - the dispatcher and the planner, with concrete sizes: every tp_sdim is a
 *    plain number (e == NULL) and the helpers below are integer arithmetic;
 *  - the symbolic-shape pass of dynamic-shape export (src/export/symshape.c),
 *    which installs a tp_sym_env for the duration of one rule call and
 *    hands the rule meta tensors whose dims carry expressions over the
 *    program's dynamic dims (symdim.h). A tp_sdim then holds the example
 *    size in v and its expression in e; arithmetic builds expressions and
 *    every comparison is a guard: it answers from the example sizes and
 *    records the relation it relied on (a == b, a >= k, k divides a) as a
 *    decision of the constraint store, as PyTorch's symbolic shapes do.
 *
 * So a rule written with these helpers gives both the concrete shape and
 * the symbolic one, and the relations it checks become the exported
 * program's dim rules. A rule that builds its result with tp__out_tensor
 * (plain int64 sizes) cannot be followed symbolically: while an env is
 * installed tp__out_tensor marks it failed, and the symbolic pass treats
 * the node as having no symbolic rule (the replay check covers it).
 *
 * Reading tensor sizes directly (t->sizes[i]) in a rule is fine for
 * decisions that do not depend on a dynamic dim (ranks, static kernel
 * sizes) and for error messages; everything that flows into an output
 * size, and every comparison of sizes, goes through tp__dim*.
 */
#ifndef TPEXPORT_OPS_DIM_H
#define TPEXPORT_OPS_DIM_H

#include "../internal.h"
#include "../symdim.h"
#include "tpexport/value.h"

typedef struct tp_sdim {
    int64_t v; /* the size (the example's, during symbolic propagation) */
    sd_e e;    /* its expression, or NULL for the constant v */
} tp_sdim;

typedef struct tp_sym_env {
    sd_ctx *sd;
    /* A relation the rule relied on was decided: rc is sd_require_*'s
     * result, what describes it ("broadcasting s0 against 3: s0 == 3"). */
    void (*decided)(void *user, int rc, const char *what);
    /* Memory that lives as long as the propagation (symbolic dims of
     * output meta tensors); NULL on failure. */
    void *(*alloc)(void *user, size_t size);
    void *user;
    bool fail; /* the rule did something the symbolic pass cannot follow */
    /* Symbolic int arguments (sym_size results and arithmetic on them):
     * the bound value (holding the example's int) and its expression. A
     * rule must read each through tp__value_sdim / tp__arg_sdims; one read
     * as a plain int (read stays false) fails the rule. */
    struct {
        const tp_value *slot;
        sd_e e;
        bool read;
    } ints[TP_MAX_DIMS * 4];
    int n_ints;
    /* An int result (tp__out_int): its expression. */
    bool has_int_result;
    sd_e int_result;
} tp_sym_env;

/* Install env for this thread (NULL: none); returns the previous one. */
TP_HIDDEN tp_sym_env *tp__sym_env_set(tp_sym_env *env);
/* This thread's env (NULL outside symbolic propagation). */
TP_HIDDEN tp_sym_env *tp__sym_env(void);

/* ---- dims ---- */
static inline tp_sdim tp__dimk(int64_t v) {
    tp_sdim d = {v, NULL};
    return d;
}
/* Dim i of t (its expression when t carries symbolic dims). */
TP_HIDDEN tp_sdim tp__dim(const tp_tensor *t, int i);
/* All dims of t into d[TP_MAX_DIMS]; returns t's rank. */
TP_HIDDEN int tp__dims(const tp_tensor *t, tp_sdim *d);
/* The rule cannot express its result over these dims (e.g. a division by
 * a dynamic dim): the symbolic pass then has no rule for the node. */
TP_HIDDEN void tp__dim_give_up(void);
/* Is d a constant (no dynamic dim in it)? */
static inline bool tp__dim_is_const(tp_sdim d) { return d.e == NULL; }

TP_HIDDEN tp_sdim tp__dim_add(tp_sdim a, tp_sdim b);
TP_HIDDEN tp_sdim tp__dim_sub(tp_sdim a, tp_sdim b);
TP_HIDDEN tp_sdim tp__dim_mul(tp_sdim a, tp_sdim b);
TP_HIDDEN tp_sdim tp__dim_addk(tp_sdim a, int64_t k);
TP_HIDDEN tp_sdim tp__dim_mulk(tp_sdim a, int64_t k);
/* floor(a / k) and ceil(a / k), k >= 1. */
TP_HIDDEN tp_sdim tp__dim_floordiv(tp_sdim a, int64_t k);
TP_HIDDEN tp_sdim tp__dim_ceildiv(tp_sdim a, int64_t k);

/* ---- guards: answer from the sizes, record what was relied on ----
 * `what` says which relation of the op it is (it prefixes the decision's
 * description); it is not used with concrete dims. */
TP_HIDDEN bool tp__dim_eq(tp_sdim a, tp_sdim b, const char *what);
TP_HIDDEN bool tp__dim_eqk(tp_sdim a, int64_t k, const char *what);
TP_HIDDEN bool tp__dim_ge(tp_sdim a, int64_t k, const char *what);
/* k divides a (k >= 1). */
TP_HIDDEN bool tp__dim_divisible(tp_sdim a, int64_t k, const char *what);

/* a <= b. */
TP_HIDDEN bool tp__dim_le(tp_sdim a, tp_sdim b, const char *what);
/* The smaller / larger of a and b, chosen by the sizes; symbolically the
 * order seen is required (a min of two dynamic dims has no expression). */
TP_HIDDEN tp_sdim tp__dim_min(tp_sdim a, tp_sdim b, const char *what);
TP_HIDDEN tp_sdim tp__dim_max(tp_sdim a, tp_sdim b, const char *what);
/* Same size: equal constants, or structurally equal expressions (no guard:
 * for matching dims, not for checking them). */
TP_HIDDEN bool tp__dim_same(tp_sdim a, tp_sdim b);

/* Broadcast two dims (PyTorch's rule); false when they do not broadcast.
 * Symbolically: equal expressions and a constant 1 need nothing; an
 * example size of 1 against another size specialises that dim to 1;
 * otherwise the two are required equal. */
TP_HIDDEN bool tp__dim_broadcast(tp_sdim a, tp_sdim b, tp_sdim *out);
/* Broadcast shapes a[na] and b[nb] (right-aligned) into out (may alias a);
 * TP_ERR_SHAPE naming the first dim that does not broadcast. */
TP_HIDDEN tp_status tp__dims_broadcast(int na, const tp_sdim *a, int nb, const tp_sdim *b, int *nout, tp_sdim *out);

/* The text of d ("s0 + 1", "7") into buf (snprintf semantics). */
TP_HIDDEN int tp__dim_print(tp_sdim d, char *buf, size_t size);

/* ---- int arguments and results ---- */
/* An int (or bool) argument value as a dim: its expression when the
 * symbolic pass gave a symbolic int there. */
TP_HIDDEN tp_sdim tp__value_sdim(const tp_value *v);
static inline tp_sdim tp__arg_sdim(const tp_value *args, int i) { return tp__value_sdim(&args[i]); }
/* Set *out to the int d (an op returning a size: sym_size, sym_add, ...),
 * recording its expression for the symbolic pass. */
TP_HIDDEN tp_status tp__out_int(tp_value *out, tp_sdim d);

/* ---- outputs ---- */
/* Set *out to a meta tensor of dims d[nd] (replaces what *out held). */
TP_HIDDEN tp_status tp__out_dims(tp_value *out, tp_dtype dtype, int nd, const tp_sdim *d);
/* Set *out to a meta tensor shaped like x (its symbolic dims included). */
TP_HIDDEN tp_status tp__out_like(tp_value *out, tp_dtype dtype, const tp_tensor *x);

/* The symbolic dims of a meta tensor (NULL: none; symbolic pass only). */
TP_HIDDEN const sd_e *tp__tensor_sym(const tp_tensor *t);
/* Give t (a meta tensor or view made during a shape rule) the dims d
 * (their expressions; symbolic pass only, no-op otherwise). */
TP_HIDDEN void tp__tensor_set_dims(tp_tensor *t, const tp_sdim *d);
/* Attach symbolic dims to meta tensor t (symbolic pass only; sym lives in
 * the env's memory). */
TP_HIDDEN void tp__tensor_set_sym(tp_tensor *t, const sd_e *sym);

#endif
