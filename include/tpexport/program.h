/*
 * program.h - the exported program: a validated graph plus its signature,
 * state, example inputs, shape constraints, module call graph and metadata
 * (tensorplay's ExportedProgram, in C).
 *
 * Model. The graph's placeholders are, in order, the lifted state (one per
 * PARAMETER / BUFFER / CONSTANT_TENSOR / CUSTOM_OBJ / TOKEN input spec) and
 * the user inputs (one per USER_INPUT spec). The graph's output node
 * returns a tree whose leaves are, in order, the mutation outputs
 * (BUFFER_MUTATION, PARAMETER_MUTATION, USER_INPUT_MUTATION: the new value
 * of the mutated object) and then the user outputs. The program owns the
 * state tensors under dotted targets ("fc1.weight"), looked up by the input
 * specs' targets and by get_attr nodes.
 *
 * Calling a program (tp_program_call) binds the user's arguments to the
 * user placeholders, fills the state placeholders from the program's state,
 * runs the graph through the execution engine (run.h: a compiled plan per
 * input-shape class, cached in the program; graphs that cannot be planned
 * are interpreted), writes every mutation output back into the object it
 * mutates (so calling twice updates a buffer twice, as in tensorplay),
 * drops the mutation outputs and rebuilds the user outputs with the output
 * tree spec.
 *
 * Threads. A program is immutable while it is called, except for (a) its
 * state tensors, which calls of programs with mutations write to, and (b)
 * caches built under locks (the unlifted module, compiled plans, pooled run
 * contexts). Any program may be called from several threads at once: calls
 * of a program that writes its state are serialised on a per-program lock,
 * so no update is lost; others run concurrently. Changing the program
 * (graph, signature, state, constraints) while it is being called is not
 * allowed; such changes drop the cached plans.
 *
 * Ownership. tp_program_new takes ownership of the graph and signature it
 * is given. Setters copy strings and values and retain tensors (state is
 * shared with the caller, not copied). Accessors return borrowed pointers
 * valid until the program changes or is freed. Programs are reference
 * counted: tp_program_retain / tp_program_free.
 */
#ifndef TPEXPORT_PROGRAM_H
#define TPEXPORT_PROGRAM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "graph.h"
#include "module.h"
#include "pytree.h"
#include "signature.h"
#include "status.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tp_program tp_program;

/* The upper bound of an unbounded range. */
#define TP_DIM_UNBOUNDED INT64_MAX

/* A symbol's range: name -> [min, max] (max may be TP_DIM_UNBOUNDED). */
typedef struct tp_range_constraint {
    const char *name;
    int64_t min, max;
} tp_range_constraint;

/* A site: dim `dim` of user input `input` (a placeholder name, or a path
 * into a container input such as "xs[0]" or "d['k']"). */
typedef struct tp_dim_site {
    const char *input;
    int dim;
} tp_dim_site;

/* Two or more sites whose sizes must be equal; name is the shared dim's
 * name or NULL. */
typedef struct tp_equality_constraint {
    int n_sites;
    const tp_dim_site *sites;
    const char *name;
} tp_equality_constraint;

/* How one dim of one user input may vary (the dynamic-shape spec). */
typedef enum tp_dim_rule_kind {
    TP_DIM_STATIC = 0, /* exactly `value` */
    TP_DIM_SYMBOL,     /* the symbol `symbol` (range from its range constraint) */
    TP_DIM_DERIVED     /* scale * symbol + offset */
} tp_dim_rule_kind;

typedef struct tp_dim_rule {
    tp_dim_site site;
    tp_dim_rule_kind kind;
    int64_t value;      /* STATIC */
    const char *symbol; /* SYMBOL, DERIVED */
    int64_t scale;      /* DERIVED (>= 1) */
    int64_t offset;     /* DERIVED */
} tp_dim_rule;

/* One entry of the module call graph. */
typedef struct tp_module_call_signature {
    int n_inputs, n_outputs;
    tp_arg_spec *inputs;  /* owned by the program once added */
    tp_arg_spec *outputs;
    tp_treespec *in_spec;  /* may be NULL */
    tp_treespec *out_spec; /* may be NULL */
    int n_forward_arg_names;
    char **forward_arg_names;
} tp_module_call_signature;

typedef struct tp_module_call_entry {
    const char *fqn;                           /* "" for the root */
    const tp_module_call_signature *signature; /* NULL if not preserved */
} tp_module_call_entry;

/* A custom verifier: called by tp_program_validate after the built-in
 * checks; report each violation with tp_program_report (below) and return
 * TP_OK (or an error status to abort validation). */
typedef struct tp_report tp_report;
typedef tp_status (*tp_verifier_fn)(const tp_program *p, tp_report *report, void *user);
/* Add one violation to a report (printf-style message). */
TP_API void tp_program_report(tp_report *report, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- creation ---------------------------------------------------------- */

/* A program from a graph and signature (both taken over, also on failure).
 * Not validated: call tp_program_validate once state, examples and
 * constraints are set. */
TP_API tp_status tp_program_new(tp_graph *graph, tp_signature *signature, tp_program **out);
TP_API tp_program *tp_program_retain(tp_program *p);
TP_API void tp_program_free(tp_program *p); /* drops one reference; NULL ok */
/* Deep copy: graph, signature, state tensors (cloned), examples,
 * constraints, call graph and metadata; shares nothing mutable. */
TP_API tp_status tp_program_copy(const tp_program *p, tp_program **out);

/* ---- contents ---------------------------------------------------------- */
TP_API const tp_graph *tp_program_graph(const tp_program *p);
/* The graph for editing (before validation or in passes). */
TP_API tp_graph *tp_program_graph_mut(tp_program *p);
TP_API const tp_signature *tp_program_signature(const tp_program *p);
TP_API tp_signature *tp_program_signature_mut(tp_program *p);

/* State: set the tensor stored under `target` (retained). Buffers need a
 * persistence flag. Replaces an existing entry. */
TP_API tp_status tp_program_set_state(tp_program *p, const char *target, tp_state_kind kind, tp_tensor *t,
                                      bool persistent);
/* Look up a state tensor (borrowed). TP_ERR_NOT_FOUND naming the target. */
TP_API tp_status tp_program_get_state(const tp_program *p, const char *target, tp_tensor **t,
                                      tp_state_kind *kind, bool *persistent);
/* The state as a list (see module.h) in signature order: the state dict
 * (parameters and persistent buffers), parameters, buffers, constants, or
 * everything. Entries not named by any input spec (e.g. constants read by
 * get_attr) follow, in insertion order. */
TP_API tp_status tp_program_named_state(const tp_program *p, tp_state_filter filter, tp_named_state *out);

/* Example inputs by user placeholder name (value copied). */
TP_API tp_status tp_program_set_example_input(tp_program *p, const char *name, const tp_value *value);
TP_API const tp_value *tp_program_example_input(const tp_program *p, const char *name); /* NULL if none */

/* Constraints. */
TP_API tp_status tp_program_add_range(tp_program *p, const char *symbol, int64_t min, int64_t max);
TP_API int tp_program_num_ranges(const tp_program *p);
TP_API const tp_range_constraint *tp_program_range(const tp_program *p, int i);
TP_API const tp_range_constraint *tp_program_find_range(const tp_program *p, const char *symbol);
/* Errors: TP_ERR_INVALID_ARG "an equality constraint needs at least two
 * sites" when n_sites < 2. */
TP_API tp_status tp_program_add_equality(tp_program *p, const tp_dim_site *sites, int n_sites, const char *name);
TP_API int tp_program_num_equalities(const tp_program *p);
TP_API const tp_equality_constraint *tp_program_equality(const tp_program *p, int i);
/* Dynamic-shape spec, one rule per (input, dim). Replaces a rule for the
 * same site. */
TP_API tp_status tp_program_add_dim_rule(tp_program *p, const tp_dim_rule *rule);
TP_API int tp_program_num_dim_rules(const tp_program *p);
TP_API const tp_dim_rule *tp_program_dim_rule(const tp_program *p, int i);

/* Module call graph (signature copied; NULL for none). */
TP_API tp_status tp_program_add_module_call(tp_program *p, const char *fqn, const tp_module_call_signature *sig);
TP_API int tp_program_num_module_calls(const tp_program *p);
TP_API tp_module_call_entry tp_program_module_call(const tp_program *p, int i);

/* Metadata: tree specs of the user inputs ((args tuple, kwargs dict)) and
 * of the user outputs; copied. NULL clears. */
TP_API tp_status tp_program_set_in_spec(tp_program *p, const tp_treespec *spec);
TP_API tp_status tp_program_set_out_spec(tp_program *p, const tp_treespec *spec);
TP_API const tp_treespec *tp_program_in_spec(const tp_program *p);
TP_API const tp_treespec *tp_program_out_spec(const tp_program *p);
/* Number of mutation outputs (from the signature). */
TP_API int tp_program_num_mutations(const tp_program *p);

/* ---- inputs and outputs, for embedders ---- */

/* One dim of an input or output. Static: size == min == max, symbol NULL.
 * Symbolic: size -1 and size = scale * symbol + offset for the symbol's
 * range (min/max: the dim's own range). Dynamic with no known expression:
 * size -1, symbol NULL, min 0, max INT64_MAX. */
typedef struct tp_io_dim {
    int64_t size;
    const char *symbol; /* borrowed from the program */
    int64_t scale, offset;
    int64_t min, max;
} tp_io_dim;

/* A user input or user output. For tensors, dtype and ndim are
 * TP_DTYPE_COUNT and -1 when the program does not record them (an input
 * with neither a meta val nor an example input; an output whose shape
 * inference fails). */
typedef struct tp_io_info {
    const char *name;   /* placeholder / output name, borrowed from the program */
    tp_arg_kind kind;   /* TP_ARGK_TENSOR, TP_ARGK_SYM_INT, ... */
    tp_dtype dtype;
    int ndim;
    tp_io_dim dims[TP_MAX_DIMS];
} tp_io_info;

/* User inputs and outputs in signature order (state, tokens and mutated
 * buffers are not counted). */
TP_API int tp_program_num_user_inputs(const tp_program *p);
TP_API int tp_program_num_user_outputs(const tp_program *p);
/* Input i: dtype and shape from its meta val or example input, dims from
 * the dim rules. Errors: TP_ERR_INDEX. */
TP_API tp_status tp_program_input_info(const tp_program *p, int i, tp_io_info *out);
/* Output i, by shape inference (metadata only) at the example inputs and
 * at two other values of each symbol: a dim that follows
 * scale * symbol + offset there gets that expression, one that follows no
 * affine rule of one symbol is dynamic without one. Errors: TP_ERR_INDEX,
 * TP_ERR_MISSING (a tensor user input with no recorded dtype and shape),
 * shape-inference errors. */
TP_API tp_status tp_program_output_info(const tp_program *p, int i, tp_io_info *out);


/* Set the custom verifier (NULL: only the built-in checks); it runs after
 * the built-in checks. */
TP_API void tp_program_set_verifier(tp_program *p, tp_verifier_fn fn, void *user);
/* The same; with replace_builtin the verifier takes the place of the
 * built-in signature checks (placeholders and outputs against their
 * specs, state kinds), as a tensorplay Verifier subclass overriding check()
 * does; it may still run them with tp_program_builtin_checks (tensorplay's
 * super().check()). The graph lint and the op argument checks always run:
 * calls rely on them. */
TP_API void tp_program_set_verifier_ex(tp_program *p, tp_verifier_fn fn, void *user, bool replace_builtin);
/* Report what the built-in checks find into report (for verifiers). */
TP_API void tp_program_builtin_checks(const tp_program *p, tp_report *report);

/* Rename a node of the program's graph, updating the signature and the
 * module call graph; a user input placeholder's example input, dim rules
 * ("x" and paths such as "x[0]"), equality sites and forward argument
 * names follow it. */
TP_API tp_status tp_program_rename_node(tp_program *p, tp_node *node, const char *new_name);
/* Rename, by name, every input and output argument `old_name` of the
 * module call graph's signatures (tensorplay's
 * ModuleCallSignature.replace_all_uses_with given names); nodes are left
 * as they are. */
TP_API tp_status tp_program_module_calls_replace_uses(tp_program *p, const char *old_name, const char *new_name);

/* ---- validation -------------------------------------------------------- */

/* Check everything; on failure TP_ERR_VERIFY with a message listing every
 * violation found, one per line ("N problems:\n- ...\n- ..."):
 * graph lint (topological order, unique names, exactly one output), every
 * user-input spec has a placeholder, every other input spec is a
 * placeholder or a get_attr target, the flattened outputs match the output
 * specs in number and names, every mutation target is lifted state, every
 * op is known and its arguments fit the schema, every state target
 * resolves to a tensor of the declared kind, then the custom verifier. */
TP_API tp_status tp_program_validate(const tp_program *p);

/* ---- calling ----------------------------------------------------------- */

/* Check user inputs against the program before running: count and tree
 * structure, dtype and rank against the example inputs, every dim against
 * its static size, range and derived relation, every equality constraint.
 * TP_ERR_CONSTRAINT (or TP_ERR_TYPE for dtype, TP_ERR_INVALID_ARG for
 * count/structure) with messages like
 *   x.shape[0] = 5 violates batch <= 4
 *   x.shape[0] = 5 must equal y.shape[0] = 4 (dim "batch")
 * Arguments are bound as in tp_program_call. */
TP_API tp_status tp_program_check_inputs(const tp_program *p, const tp_value *args, int n_args,
                                         const tp_value *kwargs);

/* Call the program: bind positional args to user placeholders in order and
 * kwargs by name (a dict value or NULL), fill missing ones from the example
 * inputs, check the inputs, fill state, run, apply mutations, and return the
 * user outputs in their original structure (*out, owned by the caller).
 * Errors: TP_ERR_DUPLICATE "duplicate value for argument 'x'",
 * TP_ERR_MISSING "missing required export input: x", TP_ERR_INVALID_ARG
 * "expected at most 2 positional arguments, got 3", unknown keywords, input
 * check failures, run failures naming the node. */
TP_API tp_status tp_program_call(tp_program *p, const tp_value *args, int n_args, const tp_value *kwargs,
                                 tp_value *out);
/* The flat contract: one value per placeholder in graph order (state
 * included); returns the raw flattened outputs as a list value (mutation
 * outputs first). Applies no mutation and checks nothing but the count. */
TP_API tp_status tp_program_call_flat(const tp_program *p, const tp_value *inputs, int n_inputs, tp_value *out);
/* call_exported: like tp_program_call but the caller passes the user
 * arguments only, the state is filled, mutations are applied and user
 * outputs are rebuilt - via the flat contract. */
TP_API tp_status tp_program_call_exported(tp_program *p, const tp_value *args, int n_args,
                                          const tp_value *kwargs, tp_value *out);

/* ---- unlifting --------------------------------------------------------- */

/* The unlifted module: a self-contained module whose graph reads state
 * through get_attr nodes from a module tree built from the dotted targets
 * (parameters, buffers with their persistence, constants), whose
 * placeholders are the user inputs only (defaults: the example inputs), and
 * which returns the same user-visible outputs, writing mutations into its
 * state with copy_ nodes. It shares the program's state tensors. Built on
 * first use and cached (owned by the program: valid until
 * tp_program_invalidate_module or tp_program_free). */
TP_API tp_status tp_program_module(tp_program *p, tp_module **out);
TP_API void tp_program_invalidate_module(tp_program *p);

/* ---- decompositions ---------------------------------------------------- */

/* A rewrite receives the graph (insertion point set just before `node`)
 * and the node; it inserts replacement nodes and sets *replacement to the
 * value users should consume (a node reference), or leaves it None to
 * decline (the node then stays, untouched). */
typedef tp_status (*tp_decomp_fn)(tp_graph *g, tp_node *node, void *user, tp_value *replacement);

typedef struct tp_decomp_table tp_decomp_table;
/* An empty table / the default table (a new copy each call). */
TP_API tp_status tp_decomp_table_new(tp_decomp_table **out);
TP_API tp_status tp_decomp_table_default(tp_decomp_table **out);
TP_API tp_status tp_decomp_table_copy(const tp_decomp_table *t, tp_decomp_table **out);
TP_API void tp_decomp_table_free(tp_decomp_table *t);
/* Add or replace the entry for op; remove it (TP_ERR_NOT_FOUND if absent). */
TP_API tp_status tp_decomp_table_set(tp_decomp_table *t, tp_op op, tp_decomp_fn fn, void *user);
TP_API tp_status tp_decomp_table_remove(tp_decomp_table *t, tp_op op);
TP_API bool tp_decomp_table_has(const tp_decomp_table *t, tp_op op);
/* Add the opt-in entries (softmax, log_softmax) to a table. */
TP_API tp_status tp_decomp_table_add_softmax(tp_decomp_table *t);

/* Copy p, rewrite call nodes whose op has an entry (call_method nodes by
 * the op their method names) until nothing changes or 8 rounds passed,
 * remove dead code and re-validate. table NULL: the default table.
 * *out is a new program. */
TP_API tp_status tp_program_run_decompositions(const tp_program *p, const tp_decomp_table *table,
                                               tp_program **out);

/* ---- passes ------------------------------------------------------------ */

/* A pass edits a program copy (usually its graph) and says whether it
 * changed anything. */
typedef tp_status (*tp_pass_fn)(tp_program *p, void *user, bool *modified);
typedef struct tp_pass {
    const char *name;
    tp_pass_fn fn;
    void *user;
} tp_pass;

/* Run passes in order over a copy. If any changed the graph, re-sync the
 * signature to the new node names by position and re-validate, and return
 * the copy; otherwise *out is p itself with one more reference. */
TP_API tp_status tp_program_transform(tp_program *p, const tp_pass *passes, int n_passes, tp_program **out);

/* Shipped passes. */
TP_API tp_status tp_pass_dead_code(tp_program *p, void *user, bool *modified);
/* Fold nodes whose inputs are all constants (no placeholder or state
 * reached) into new constant tensors read by get_attr. CONSTANT state read
 * by get_attr counts as constant unless something writes to it; impure and
 * random ops never fold; results of more than 1 << 20 elements are left to
 * run time. New constants are named "_folded_constant_<k>". */
TP_API tp_status tp_pass_constant_fold(tp_program *p, void *user, bool *modified);
/* Remove effect tokens: token placeholders and TOKEN outputs disappear,
 * TOKEN specs are dropped from both sides of the signature. */
TP_API tp_status tp_pass_remove_effect_tokens(tp_program *p, void *user, bool *modified);

/* ---- printing ---------------------------------------------------------- */

/* The graph's code, then the signature lines:
 *   user_inputs            = ['x']
 *   parameters             = ['fc1.weight', 'fc1.bias']
 *   buffers                = ['stats']
 *   non_persistent_buffers = [...]     (only when there are some)
 *   dynamic_shapes         = {...}     (only when there are rules)
 * Caller frees *out with tp_free. */
TP_API tp_status tp_program_to_string(const tp_program *p, char **out);
TP_API tp_status tp_program_print(const tp_program *p, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
