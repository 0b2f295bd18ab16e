/*
 * export.h - write a model's forward once in C, run it eagerly, and export
 * it to an exported program (tp_program) with its state lifted, its
 * mutations explicit and its dynamic-shape constraints checked
 * (tensorplay.export.export in C). See docs/export.md for a walk-through.
 *
 * Forwards. A model is a tp_module tree (module.h) whose modules carry a C
 * forward (tp_module_set_forward):
 *
 *     static tp_status fwd(tp_ctx *ctx, tp_module *self, const tp_value *args,
 *                          tp_value *out) {
 *         tp_t *x = tp_arg(ctx, &args[0]);
 *         tp_t *y = tp_relu(ctx, tp_linear(ctx, x, tp_param(ctx, self, "weight"),
 *                                          tp_param(ctx, self, "bias")));
 *         return tp_return(ctx, y, out);
 *     }
 *
 * The forward calls ops through a context (tp_ctx). Values are tp_t handles
 * owned by the context (never freed by the caller; they live until the
 * context is freed). `args` holds one value per declared argument (in
 * declaration order, defaults filled in); tensor leaves of `args` (also
 * inside lists, tuples and dicts) are handles' tensors: tp_arg() turns one
 * into its handle. The forward sets *out to its result: tp_return() for one
 * handle, tp_out() to build a tuple/list/dict of handles.
 *
 * Two modes, one forward:
 *  - eager (tp_module_run): every op computes with tp_op_call;
 *  - export (tp_export): every op also records a call_function node. Handles
 *    hold the computed example value (state and inputs are cloned first, so
 *    exporting never changes the model or the example inputs) and the graph
 *    node producing it. Parameters, buffers and constant tensors become
 *    placeholders named p_/b_/c_ + target with dots as underscores, placed
 *    before the user inputs: root module first, then children in
 *    registration order (depth first); per module parameters, buffers,
 *    constants (tensorplay's order). User placeholders take the declared
 *    argument names; a container argument (list/tuple/dict of tensors) is
 *    one placeholder read with getitem nodes.
 *
 * Errors are sticky: the first failing op records a message in the
 * context, and every later op returns the context's poison handle (whose
 * ops are no-ops), so forwards read straight through and check once:
 * tp_return / tp_ctx_status report the first failure, prefixed with the
 * forward's call site when known.
 *
 * Mutations. In-place ops (tp_add_, tp_mul_, tp_copy_, tp_fill_, tp_zero_,
 * batch norm's running statistics in training mode) change the handle's
 * value: eagerly they write into the tensor; under export they record the
 * out-of-place op and rebind the handle, and when the export ends every
 * state entry or user input (or element of a user container) whose handle
 * was rebound becomes a BUFFER_MUTATION / PARAMETER_MUTATION /
 * USER_INPUT_MUTATION output (target: the state target, the input name, or
 * a path like "xs[0]" / "d['k']"), mutation outputs first. A whole user
 * input mutated directly is caught too.
 *
 * Data dependence. tp_item / tp_to_bool read values. Under export that is
 * a capture error naming the op that produced the tensor and the call site
 * (file:line, passed by the macros); under draft export it is reported and
 * the example value is used. tp_size reads a size: on a dynamic dim under
 * export it specialises the dim to its example value (reported as a
 * constraint violation, with a suggested fix, unless the dim is Dim.AUTO).
 *
 * Ownership: the context owns every handle and every value built by
 * tp_ints/tp_list; tp_ctx_free releases them. Tensors passed in are
 * retained, never modified (except by eager in-place ops on them).
 */
#ifndef TPEXPORT_EXPORT_H
#define TPEXPORT_EXPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "module.h"
#include "ops.h"
#include "program.h"
#include "status.h"
#include "tensor.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tp_ctx tp_ctx;
typedef struct tp_t tp_t;

/* A C forward: args holds one value per declared argument (tensor leaves are
 * handle tensors, see tp_arg); set *out to the result (tp_return / tp_out).
 * Return TP_OK or the context's status (tp_return does). */
typedef tp_status (*tp_forward_fn)(tp_ctx *ctx, tp_module *self, const tp_value *args, tp_value *out);

/* A forward's declaration. arg_names: n_args names (borrowed, static storage
 * recommended: copied by tp_module_set_forward). defaults: NULL or n_args
 * values; an argument whose default is given (has_default[i]) may be
 * omitted by callers. */
typedef struct tp_forward_decl {
    tp_forward_fn fn;
    int n_args;
    const char *const *arg_names;
    const tp_value *defaults;  /* may be NULL */
    const bool *has_default;   /* may be NULL: no defaults */
} tp_forward_decl;

/* Give m a C forward (the declaration is copied; defaults deep-copied). The
 * module's type name is kept. Errors: TP_ERR_INVALID_ARG (no fn, n_args < 0,
 * a NULL name), TP_ERR_NOMEM. */
TP_API tp_status tp_module_set_forward(tp_module *m, const tp_forward_decl *decl);
/* A second entry point under `method` (e.g. "encode"): exported with
 * tp_export_options.method. */
TP_API tp_status tp_module_set_method(tp_module *m, const char *method, const tp_forward_decl *decl);

/* Per-module data for forwards (e.g. a layer's configuration), owned by the
 * module: free_fn(data) runs when the module is freed (free_fn may be NULL).
 * Stored alongside the forward table in the module's implementation slot. */
TP_API tp_status tp_module_set_user_data(tp_module *m, void *data, void (*free_fn)(void *data));
TP_API void *tp_module_user_data(const tp_module *m);

/* ---- running eagerly ------------------------------------------------------ */

/* Call m's forward (or method `method`, NULL: forward) eagerly on args
 * (positional, n_args) and kwargs (dict value or NULL) - tensors anywhere in
 * them. *out receives the result with tensors owned by the caller
 * (tp_value_clear). In-place ops update m's state and the given tensors as in
 * PyTorch. Errors: binding errors (TP_ERR_MISSING "missing argument 'x'",
 * TP_ERR_INVALID_ARG for too many / unknown arguments, TP_ERR_DUPLICATE),
 * then the forward's first op error. */
TP_API tp_status tp_module_run(tp_module *m, const char *method, const tp_value *args, int n_args,
                               const tp_value *kwargs, tp_value *out);

/* ---- the context ------------------------------------------------------------ */

/* Status of the context: TP_OK or the first failure (its message is
 * tp_ctx_error). */
TP_API tp_status tp_ctx_status(const tp_ctx *ctx);
TP_API const char *tp_ctx_error(const tp_ctx *ctx);
TP_API bool tp_ctx_exporting(const tp_ctx *ctx);
/* Record a failure (sticky; later failures are ignored except in draft
 * mode, where each is added to the report). Returns status. */
TP_API tp_status tp_ctx_fail(tp_ctx *ctx, tp_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Is h the poison handle (a failed op's result)? NULL counts as poison. */
TP_API bool tp_is_poison(const tp_t *h);
/* The handle's value: eager and export both hold a real tensor (borrowed,
 * owned by the context). NULL for poison. */
TP_API tp_tensor *tp_tensor_of(const tp_t *h);

/* Handle of a tensor leaf of the forward's args (a tensor value whose tensor
 * came from the context). Non-tensor / unknown → poison + failure. */
TP_API tp_t *tp_arg(tp_ctx *ctx, const tp_value *v);
/* State of a module as a handle: the tensor registered under `name` (no
 * dots) in `self`. Missing → poison + TP_ERR_NOT_FOUND. tp_param/tp_buffer/
 * tp_const are the same lookup (kinds are not checked). */
TP_API tp_t *tp_state(tp_ctx *ctx, tp_module *self, const char *name);
#define tp_param tp_state
#define tp_buffer tp_state
#define tp_const tp_state
/* A constant tensor created inside the forward (not state): eagerly a
 * tensor, under export a lifted constant named c_lifted_tensor_<k>. The
 * context retains t. */
TP_API tp_t *tp_constant(tp_ctx *ctx, tp_tensor *t);

/* Results. tp_return: *out = h's tensor (retained) and return the context
 * status. tp_out: a tensor value for h (retained) to put in a
 * container; on poison returns None. */
TP_API tp_status tp_return(tp_ctx *ctx, tp_t *h, tp_value *out);
TP_API tp_value tp_out(tp_t *h);

/* Values for generic calls. tp_v: a tensor value BORROWING h's tensor (do
 * not clear it). tp_ints / tp_list: a list value owned by the context (do
 * not clear). */
TP_API tp_value tp_v(tp_t *h);
TP_API tp_value tp_ints(tp_ctx *ctx, int n, const int64_t *values);
TP_API tp_value tp_list(tp_ctx *ctx, int n, tp_t *const *handles);

/* ---- ops ---------------------------------------------------------------------- */

/* Generic entry: call `op` with positional args (n_args) and kwargs (dict
 * value or NULL); tensor arguments are tp_v(handle) values. Returns the
 * result's handle (ops returning several tensors: the first; use
 * tp_call_multi). */
TP_API tp_t *tp_call(tp_ctx *ctx, tp_op op, const tp_value *args, int n_args, const tp_value *kwargs);
/* Same for ops returning a tuple or list: up to max_outs handles written to
 * outs; returns the number of results (0 on failure). */
TP_API int tp_call_multi(tp_ctx *ctx, tp_op op, const tp_value *args, int n_args, const tp_value *kwargs,
                         tp_t **outs, int max_outs);

/* Typed helpers (PyTorch semantics; NULL optional tensors mean None). */
TP_API tp_t *tp_add(tp_ctx *ctx, tp_t *a, tp_t *b);
TP_API tp_t *tp_sub(tp_ctx *ctx, tp_t *a, tp_t *b);
TP_API tp_t *tp_mul(tp_ctx *ctx, tp_t *a, tp_t *b);
TP_API tp_t *tp_div(tp_ctx *ctx, tp_t *a, tp_t *b);
TP_API tp_t *tp_add_scalar(tp_ctx *ctx, tp_t *a, double b);
TP_API tp_t *tp_mul_scalar(tp_ctx *ctx, tp_t *a, double b);
TP_API tp_t *tp_gt_scalar(tp_ctx *ctx, tp_t *a, double b);
TP_API tp_t *tp_neg(tp_ctx *ctx, tp_t *a);
TP_API tp_t *tp_relu(tp_ctx *ctx, tp_t *a);
TP_API tp_t *tp_gelu(tp_ctx *ctx, tp_t *a);
TP_API tp_t *tp_silu(tp_ctx *ctx, tp_t *a);
TP_API tp_t *tp_tanh(tp_ctx *ctx, tp_t *a);
TP_API tp_t *tp_sigmoid(tp_ctx *ctx, tp_t *a);
TP_API tp_t *tp_sum(tp_ctx *ctx, tp_t *a);
TP_API tp_t *tp_mean_dims(tp_ctx *ctx, tp_t *a, int n_dims, const int64_t *dims, bool keepdim);
TP_API tp_t *tp_linear(tp_ctx *ctx, tp_t *x, tp_t *weight, tp_t *bias);
TP_API tp_t *tp_matmul(tp_ctx *ctx, tp_t *a, tp_t *b);
TP_API tp_t *tp_softmax(tp_ctx *ctx, tp_t *a, int64_t dim);
TP_API tp_t *tp_transpose(tp_ctx *ctx, tp_t *a, int64_t dim0, int64_t dim1);
/* sizes may contain one -1. */
TP_API tp_t *tp_reshape(tp_ctx *ctx, tp_t *a, int n, const int64_t *sizes);
TP_API tp_t *tp_flatten(tp_ctx *ctx, tp_t *a, int64_t start_dim, int64_t end_dim);
TP_API tp_t *tp_cat(tp_ctx *ctx, int n, tp_t *const *hs, int64_t dim);
TP_API tp_t *tp_stack(tp_ctx *ctx, int n, tp_t *const *hs, int64_t dim);
TP_API tp_t *tp_select(tp_ctx *ctx, tp_t *a, int64_t dim, int64_t index);
/* Split dim `dim` into `chunks` equal chunks; returns the count written. */
TP_API int tp_chunk(tp_ctx *ctx, tp_t *a, int chunks, int64_t dim, tp_t **outs);
TP_API tp_t *tp_dropout(tp_ctx *ctx, tp_t *a, double p, bool train);

/* In-place ops: return `self` (rebound under export). */
TP_API tp_t *tp_add_(tp_ctx *ctx, tp_t *self, tp_t *other);
TP_API tp_t *tp_add_scalar_(tp_ctx *ctx, tp_t *self, double other);
TP_API tp_t *tp_mul_(tp_ctx *ctx, tp_t *self, tp_t *other);
TP_API tp_t *tp_mul_scalar_(tp_ctx *ctx, tp_t *self, double other);
TP_API tp_t *tp_copy_(tp_ctx *ctx, tp_t *self, tp_t *src);
TP_API tp_t *tp_fill_(tp_ctx *ctx, tp_t *self, double value);
TP_API tp_t *tp_zero_(tp_ctx *ctx, tp_t *self);

/* Container element of a forward argument value (a list/tuple/dict value
 * from args): its handle. Under export this records a getitem node on the
 * container's placeholder so that mutations of the element are attributed
 * to the path ("xs[0]", "d['k']"). */
TP_API tp_t *tp_elem(tp_ctx *ctx, const tp_value *container, int64_t index);
TP_API tp_t *tp_elem_key(tp_ctx *ctx, const tp_value *dict, const char *key);

/* Sizes. tp_size: dim may be negative. See the data-dependence note above. */
#define tp_size(ctx, h, dim) tp_size_at((ctx), (h), (dim), __FILE__, __LINE__)
TP_API int64_t tp_size_at(tp_ctx *ctx, tp_t *h, int64_t dim, const char *file, int line);
TP_API int tp_ndim(const tp_t *h);
TP_API tp_dtype tp_dtype_of(const tp_t *h);

/* ---- symbolic ints -------------------------------------------------------------
 * tp_size gives a C int: under export a dynamic dim read that way is baked
 * into the graph (a specialisation, reported). tp_dim instead gives an int
 * HANDLE: eagerly it holds the size; under export it is a graph node
 * `sym_size(x, dim)` whose value is the dim's symbolic expression, so sizes
 * computed from it stay dynamic. Int handles combine with tp_int_add / sub /
 * mul / floordiv (Python's int semantics: floordiv rounds towards -inf;
 * recorded as sym_add ... nodes when an operand is symbolic, folded
 * otherwise) and constants made with tp_int. Pass them to ops where an int is
 * expected with tp_v(n), and where an int list is expected with
 * tp_ints_sym(ctx, n, (tp_t *[]){b, tp_int(ctx, -1)}) (reshape / view /
 * expand / zeros sizes, narrow / slice bounds, ...):
 *
 *     tp_t *b = tp_dim(ctx, x, 0);   // x.size(0)
 *     tp_value a[2] = {tp_v(x), tp_ints_sym(ctx, 2, (tp_t *[]){b, tp_int(ctx, -1)})};
 *     tp_t *y = tp_call(ctx, TP_OP_VIEW, a, 2, NULL);   // x.view(x.size(0), -1)
 *
 * The exported program stays correct for every size in range (the symbolic
 * shape rules see through the int nodes), and archives write them as
 * tensorplay does (x.size(0), operator.mul, ...). */
TP_API tp_t *tp_dim(tp_ctx *ctx, tp_t *h, int64_t dim);
TP_API tp_t *tp_int(tp_ctx *ctx, int64_t value);
TP_API tp_t *tp_int_add(tp_ctx *ctx, tp_t *a, tp_t *b);
TP_API tp_t *tp_int_sub(tp_ctx *ctx, tp_t *a, tp_t *b);
TP_API tp_t *tp_int_mul(tp_ctx *ctx, tp_t *a, tp_t *b);
TP_API tp_t *tp_int_floordiv(tp_ctx *ctx, tp_t *a, tp_t *b);
/* Is h an int handle? */
TP_API bool tp_is_int(const tp_t *h);
/* An int list value (owned by the context) of int handles. */
TP_API tp_value tp_ints_sym(tp_ctx *ctx, int n, tp_t *const *handles);
/* The int's concrete value as a C int64: under export this specialises the
 * expression to its example value, like tp_size (reported the same way). */
#define tp_int_value(ctx, h) tp_int_value_at((ctx), (h), __FILE__, __LINE__)
TP_API int64_t tp_int_value_at(tp_ctx *ctx, tp_t *h, const char *file, int line);

/* Reading values: data-dependent under export (see above). */
#define tp_item(ctx, h) tp_item_at((ctx), (h), __FILE__, __LINE__)
#define tp_to_bool(ctx, h) (tp_item_at((ctx), (h), __FILE__, __LINE__) != 0.0)
TP_API double tp_item_at(tp_ctx *ctx, tp_t *h, const char *file, int line);

/* Call a child module (any module of the tree) from a forward: positional
 * args (values as for tp_call: tp_v(handle), lists, numbers) and kwargs.
 * *out receives the result value (tensor leaves are handle tensors, read
 * with tp_arg; owned by the context - do not clear). Under export the call
 * is recorded in the module call graph. Returns the context status. */
TP_API tp_status tp_call_module(tp_ctx *ctx, tp_module *m, const tp_value *args, int n_args,
                                const tp_value *kwargs, const tp_value **out);
/* One tensor in, one tensor out. */
TP_API tp_t *tp_forward(tp_ctx *ctx, tp_module *m, tp_t *x);
/* Is the module in training mode (tp_module_train)? */
#define tp_training(m) tp_module_is_training(m)

/* ---- dynamic shapes ----------------------------------------------------------- */

/* A dynamic-shape specification (tensorplay's dynamic_shapes). It holds
 * named dims (Dim('batch', min=2, max=64)), derived dims (2*batch + 1) and
 * one entry per (input, dim) site. Inputs are keyed by user argument name,
 * by position over the user arguments only ("0", "1", ...: state never
 * shifts positions), or a path into a container argument ("xs[0]",
 * "d['k']"). Dims not mentioned are static. */
typedef struct tp_shapes tp_shapes;

TP_API tp_status tp_shapes_new(tp_shapes **out);
TP_API void tp_shapes_free(tp_shapes *s);
TP_API tp_status tp_shapes_copy(const tp_shapes *s, tp_shapes **out);

/* Declare Dim(name, min, max): min -1 means unspecified (0), max
 * TP_DIM_UNBOUNDED for none. Declaring a name again with another range:
 * TP_ERR_INVALID_ARG "found conflicting definitions for symbolic dimension
 * 'batch': ...". Bad name (not an identifier) or min > max:
 * TP_ERR_INVALID_ARG. */
TP_API tp_status tp_shapes_dim(tp_shapes *s, const char *name, int64_t min, int64_t max);
/* Declare a derived dim name = scale*root + offset (scale >= 1, root
 * declared, itself possibly derived). */
TP_API tp_status tp_shapes_derived(tp_shapes *s, const char *name, const char *root, int64_t scale,
                                   int64_t offset);
/* Assign dim `dim` of input `input` a spec given as text: a declared dim
 * name ("batch"), an expression over one ("2*batch+1", declared on the fly),
 * an integer ("4": static), "auto", "static" or "dynamic" (hints; "dynamic"
 * errors when the model specialises the dim), or "None" (static). Anything
 * else: TP_ERR_TYPE "dimension spec must be int or Dim (a dim hint or None is
 * also accepted), got '...'"; dim < 0: TP_ERR_TYPE "dimension index must be
 * a non-negative int, got -1". Input keys are checked at export. */
TP_API tp_status tp_shapes_set(tp_shapes *s, const char *input, int dim, const char *spec);
/* The spec as text, e.g. "{'x': {0: Dim('batch', min=2, max=64)}, 'y': {0:
 * batch}}" (caller frees with tp_free). */
TP_API tp_status tp_shapes_to_string(const tp_shapes *s, char **out);
/* Apply the "Suggested fixes:" lines of an export error message to s:
 *   name = Dim('name', min=2, max=64)   refine (or declare) a range
 *   name = 4                            specialise every use to 4
 *   dy = dx   /   dy = 2*dx + 1         tie dy to dx
 * Errors: TP_ERR_INVALID_ARG "suggested fixes were not found", "no supported
 * shape fixes were found", a fix naming an unknown dim. */
TP_API tp_status tp_shapes_apply_fixes(tp_shapes *s, const char *message);

/* ---- export --------------------------------------------------------------------- */

/* Export options. Zero-initialise them or use tp_export_options_init;
 * fields added later default to 0 (docs/abi.md). */
typedef struct tp_export_options {
    size_t struct_size;                 /* sizeof(tp_export_options) as the caller saw it; 0: this version's */
    const char *method;                 /* NULL: the forward; else a method name */
    const tp_shapes *dynamic_shapes;    /* NULL: all static */
    const char *const *preserve_module_call_signature; /* fqns; NULL-free array */
    int n_preserve;
    bool draft;                         /* internal: use tp_draft_export */
    /* Also run the replay check (shape inference re-run at probe sizes) after
     * the symbolic shape propagation, as a cross-check: a constraint it finds
     * that the symbolic rules missed fails the export with TP_ERR_INTERNAL
     * (draft export: listed in the report's notes). The environment variable
     * TP_EXPORT_REPLAY_CHECK=1 turns it on for every export. */
    bool replay_check;
} tp_export_options;

static inline void tp_export_options_init(tp_export_options *o) {
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
}

/* Export m: trace its forward on the example args/kwargs (tensors; cloned,
 * never modified), lift state, record mutations, check the dynamic-shape
 * spec against what the ops require, and build a validated program.
 * The program shares m's state tensors (not copies): programs exported from
 * one module (several methods) share their state. Caller frees *out with
 * tp_program_free. Errors: the spec errors (TP_ERR_INVALID_ARG "dynamic_shapes
 * key 'z' does not match any argument; expected one of ['x', 'y']",
 * TP_ERR_CONSTRAINT with "Suggested fixes:" lines), capture errors
 * (TP_ERR_UNSUPPORTED "data-dependent ..."), op errors. */
TP_API tp_status tp_export(tp_module *m, const tp_value *args, int n_args, const tp_value *kwargs,
                           const tp_export_options *opts, tp_program **out);

/* Draft export: like tp_export but never stops at the first problem: each
 * failure (data-dependent access, constraint violation, missing kernel) is
 * listed in the report, and the program is built whenever the trace
 * completes (failures that only affect dynamic shapes still give a program,
 * with the offending dims specialised). */
typedef enum tp_failure_kind {
    TP_FAILURE_DATA_DEPENDENT = 0,
    TP_FAILURE_CONSTRAINT,
    TP_FAILURE_MISSING_OP,
    TP_FAILURE_OTHER
} tp_failure_kind;

typedef struct tp_draft_failure {
    tp_failure_kind kind;
    char *message; /* owned by the report */
} tp_draft_failure;

typedef struct tp_draft_report {
    int n_failures;
    tp_draft_failure *failures;
    char *suggested_fixes; /* "Suggested fixes:\n  ..." or NULL */
    /* Informational notes (not failures) or NULL: e.g. which nodes had no
     * symbolic shape rule and were checked by replaying shape inference. */
    char *notes;
} tp_draft_report;

/* *out_program may be NULL on return when no program could be built. The
 * report is always filled; free it with tp_draft_report_free. Returns TP_OK
 * unless memory ran out or arguments are invalid. */
TP_API tp_status tp_draft_export(tp_module *m, const tp_value *args, int n_args, const tp_value *kwargs,
                                 const tp_export_options *opts, tp_program **out_program,
                                 tp_draft_report *report);
TP_API void tp_draft_report_free(tp_draft_report *r);
/* "N issue(s) found:\n- [data_dependent] ..." (caller frees). */
TP_API tp_status tp_draft_report_to_string(const tp_draft_report *r, char **out);
TP_API const char *tp_failure_kind_name(tp_failure_kind kind);

/* ---- unflatten ------------------------------------------------------------------- */

/* Rebuild the module hierarchy of a program from its module call graph: a
 * new module tree (caller frees with tp_module_free) whose root runs the
 * whole program (graph forward, user inputs only) and whose submodules -
 * one per recorded call site fqn (repeated calls "layer@1" share the
 * module "layer") - each have a graph forward reading only their own state,
 * so tp_module_call(tp_module_child(root, "layer1.0"), ...) runs that
 * submodule alone. State tensors are shared with the program. Errors:
 * TP_ERR_UNSUPPORTED naming a call whose subgraph reads values computed
 * outside it (other than its inputs) or state outside its subtree. */
TP_API tp_status tp_unflatten(tp_program *p, tp_module **out);

#ifdef __cplusplus
}
#endif
#endif
