/*
 * serde.h - tensorplay's program document (models/<name>.json) and weights
 * indexes (weights.json, constants.json) <-> tp_program (internal).
 *
 * The archive layer (archive.c) unzips members and calls these functions;
 * nothing here touches files or ZIP structures.
 *
 * The program document (schema_version 1), as tensorplay writes it:
 *   {"schema_version": 1, "dialect": "STABLE",
 *    "graph": {"nodes": [{"op", "target", "args", "kwargs", "name"}, ...]},
 *    "signature": {"input_specs": [...], "output_specs": [...]},
 *    "module_call_graph": [{"fqn", "signature"}], "range_constraints": {...},
 *    "equality_constraints": [...], "dynamic_shapes": ..., "meta":
 *    {"num_mutations", "in_spec", "out_spec"}, "opset_version": {}}
 * Node targets are {"kind": "name"|"method", "name"} or {"kind": "ref",
 * "module", "qualname"} (a Python function; "pickle" targets are refused).
 * Values encode tuples, lists, dicts, slices and node references as
 * {"__tuple__": [...]}, {"__list__": [...]}, {"__dict__": [[k, v], ...]},
 * {"__slice__": [a, b, c]}, {"__node__": "name"}; anything else is a
 * base64 pickle {"__pickle__": "..."}. Pickles are never unpickled: the
 * exact byte forms tensorplay uses for a dtype, for Ellipsis and for a
 * tensor are recognised by a strict reader of a few pickle opcodes (no
 * code runs, only those three classes exist); every other pickle is
 * TP_ERR_UNSUPPORTED. NaN and infinities appear as the bare tokens NaN,
 * Infinity, -Infinity (Python's json), which are accepted.
 *
 * Function references and method names map to our ops through one table
 * (op_map.c); method calls become call_function nodes of our ops, with
 * the callee's arguments renamed and reordered onto the op's schema. Node
 * names are kept exactly (tensorplay names inputs "input", which torch.fx
 * would rename). Besides that the reader:
 *  - gives placeholders meta["val"] from the state tensors, an optional
 *    per-node "meta" field (written by tpexport, ignored by tensorplay) or
 *    the example inputs; call nodes get theirs by shape inference;
 *  - turns tensor indexing (_operator.getitem with ints, slices, None,
 *    Ellipsis) into select / slice / unsqueeze nodes;
 *  - folds size(), dim(), numel(), .shape and arithmetic on them into
 *    constants when no dim is dynamic; with dynamic dims x.size(d) and
 *    x.shape[d] become sym_size nodes when used, and _operator add / sub /
 *    mul / floordiv on them sym_add ... nodes (numel() and whole shapes
 *    are refused: TP_ERR_UNSUPPORTED);
 *  - writes in-place functional calls (relu(x, inplace=True), x.sub_(y))
 *    as the op followed by copy_ into the argument;
 *  - lifts tensors pickled inside arguments into CONSTANT_TENSOR inputs
 *    ("c_tensor_constant<k>" for target "_tensor_constant<k>");
 *  - drops tensorplay's runtime dim assertions
 *    (tensorplay.export._trace._assert_dim_range & co.): the program checks
 *    the same constraints on every call;
 *  - reads None outputs (a leaf and a ConstantArgument spec to tensorplay)
 *    as tpexport's "none" tree specs without an output spec.
 *
 * Errors name the JSON path ("graph.nodes[3].args[1]: expected a node
 * reference") or the node ("node linear_1: unsupported function
 * tensorplay.nn.functional.foo"): TP_ERR_CORRUPT for malformed documents,
 * TP_ERR_UNSUPPORTED for valid documents using something tpexport cannot
 * run, TP_ERR_NOMEM.
 */
#ifndef TPEXPORT_SERDE_H
#define TPEXPORT_SERDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../internal.h"
#include "tpexport/limits.h"
#include "tpexport/program.h"

/* Bounds applied to every document, read or written: TP_LIMIT_* and
 * TP_MAX_DIMS in tpexport/limits.h. */

/* ---- problems (verify mode) ------------------------------------------- */

typedef struct tp_serde_problem {
    tp_status status;
    char *message; /* owned */
} tp_serde_problem;

typedef struct tp_serde_problems {
    int n;
    tp_serde_problem *items; /* owned; free with tp__serde_problems_free */
} tp_serde_problems;

TP_HIDDEN void tp__serde_problems_free(tp_serde_problems *p);

/* ---- document limits ----------------------------------------------------
 * The bounds one read is held to: the build's limits.h values unless the
 * load options tighten them (tp_load_options, checked in archive.c).
 * tensor_bytes bounds any one weight, constant or example-input tensor. */
typedef struct tp_doc_limits {
    size_t name, depth, nodes, items, document;
    uint64_t tensor_bytes;
} tp_doc_limits;

static inline tp_doc_limits tp__doc_limits_default(void) {
    tp_doc_limits l = {TP_LIMIT_NAME, TP_LIMIT_DEPTH, TP_LIMIT_NODES, TP_LIMIT_ITEMS, TP_LIMIT_DOCUMENT,
                       (uint64_t)8 << 30};
    return l;
}

/* ---- reading a program document ---------------------------------------- */

/* State lookup: the tensor stored for `target` (e.g. "fc1.weight"), which
 * the document declares as `kind` (PARAMETER/BUFFER from the signature,
 * CONSTANT for constant tensors and get_attr targets). Set *out to a new
 * reference (the program retains its own) or return TP_ERR_NOT_FOUND;
 * other failures are reported as they are. */
typedef tp_status (*tp_serde_state_fn)(void *ctx, const char *target, tp_state_kind kind, tp_tensor **out);

typedef struct tp_serde_read_options {
    tp_serde_state_fn state; /* NULL: no state available */
    void *state_ctx;
    /* Example inputs: a dict value, user input name -> value (tensors,
     * nested containers, None, numbers), or NULL. Copied into the program
     * and used for placeholder meta. */
    const tp_value *example_inputs;
    /* Verify mode when non-NULL: every problem found is appended here
     * (instead of stopping at the first), including the program
     * validation's. The caller frees it with tp__serde_problems_free. */
    tp_serde_problems *problems;
    const tp_doc_limits *limits; /* NULL: tp__doc_limits_default() */
} tp_serde_read_options;

/* Build a program from the document json[0..len) (need not be
 * NUL-terminated). opts may be NULL (no state, no examples, stop at the
 * first problem). The program is validated (tp_program_validate) before
 * it is returned; *out is the caller's (tp_program_free). On failure *out
 * is NULL and the status is the first problem's; in verify mode the
 * message lists every problem ("3 problems:\n- ...\n- ..."). */
TP_HIDDEN tp_status tp__serde_program_from_json(const char *json, size_t len, const tp_serde_read_options *opts,
                                                tp_program **out);

/* ---- writing a program document ---------------------------------------- */

typedef struct tp_serde_write_options {
    bool no_meta; /* leave out the per-node "meta" field (shapes and dtypes) */
} tp_serde_write_options;

/* The document for p, in the form tensorplay's deserialize accepts: each
 * op is written as a reference to the tensorplay function (or Tensor
 * method) whose semantics match ours (the table in op_map.c); dtypes as
 * tensorplay's dtype pickle; dynamic dims, ranges and equalities as
 * tensorplay writes them; get_attr nodes as lifted constants (placeholders
 * with CONSTANT_TENSOR input specs after the others: tensorplay's loader
 * gives get_attr targets no value). *json (NUL-terminated, *len bytes without the
 * NUL; len may be NULL) is the caller's (tp_free). Errors: TP_ERR_UNSUPPORTED
 * for what tensorplay cannot express (a tensor inside node arguments, a
 * call_method naming no op, dynamic shapes of nested inputs), TP_ERR_NOMEM. */
TP_HIDDEN tp_status tp__serde_program_to_json(const tp_program *p, const tp_serde_write_options *opts, char **json,
                                              size_t *len);

/* ---- weights.json / constants.json -------------------------------------
 * {"<state name>": {"dtype": "float32", "sizes": [..], "strides": [..],
 *   "storage_offset": 0, "requires_grad": false, "path_name": "weight_0",
 *   "use_pickle": false, "is_param": true, "role": 0}, ...}
 * path_name is relative to data/weights/ (or data/constants/). The payload
 * member holds the raw little-endian storage the view (sizes, strides,
 * storage_offset, in elements) reads from.
 *
 * tensorplay facts worth knowing (1.0): it numbers payloads weight_0,
 * weight_1, ... per program, so an archive with two programs gets duplicate
 * ZIP members (the second program's overwrite the first's when read back);
 * and it writes the contiguous bytes of a view while recording the view's
 * own strides and offset, so non-contiguous state does not load back. Use
 * unique path names ("<program>/weight_<i>" is what tpexport writes) and
 * contiguous descriptors (tp__serde_state_weights) to stay clear of both. */

typedef struct tp_serde_weight {
    char *name;      /* state name (dotted target); owned */
    char *path_name; /* payload member relative to the index's directory; owned */
    tp_dtype dtype;
    int ndim;
    int64_t sizes[TP_MAX_DIMS];
    int64_t strides[TP_MAX_DIMS]; /* in elements */
    int64_t storage_offset;       /* in elements */
    bool requires_grad;
    bool is_param;
    int role;           /* tensorplay WeightType: 0 parameter, 1 buffer, 2 optional state/constant; -1 absent */
    size_t bytes_needed; /* payload bytes the view needs (reading) */
    tp_tensor *tensor;   /* writing: the tensor whose contiguous bytes are the payload (borrowed) */
} tp_serde_weight;

typedef struct tp_serde_weights {
    int n;
    tp_serde_weight *items; /* owned; free with tp__serde_weights_free */
} tp_serde_weights;

TP_HIDDEN void tp__serde_weights_free(tp_serde_weights *w);

/* Payload size lookup for validation: the byte size of member
 * `path_name` (relative to the index's directory); TP_ERR_NOT_FOUND if
 * absent. */
typedef tp_status (*tp_serde_payload_fn)(void *ctx, const char *path_name, size_t *size);

/* Parse an index. `what` names it in messages ("weights", "constants").
 * Validates each entry: known dtype, rank <= TP_MAX_DIMS, sizes and
 * strides non-negative, element and byte counts without overflow, strides
 * as many as sizes, use_pickle false (true: TP_ERR_UNSUPPORTED "weights
 * 'x': pickled payload cannot be read safely"), unknown fields refused, and
 * - when payload is non-NULL - that the view fits in the payload:
 * "weights 'fc1.weight': view needs 96 bytes but payload has 64", payload
 * size a multiple of the element size, tensors within limits->tensor_bytes
 * (limits NULL: the defaults). Errors: TP_ERR_CORRUPT naming the entry and
 * field, TP_ERR_UNSUPPORTED, TP_ERR_NOMEM. */
TP_HIDDEN tp_status tp__serde_weights_from_json(const char *json, size_t len, const char *what,
                                                tp_serde_payload_fn payload, void *payload_ctx,
                                                const tp_doc_limits *limits, tp_serde_weights *out);

/* The checks tp__serde_weights_from_json applies to each entry (path_name a
 * relative member name, sizes/strides/offset non-negative, element count and
 * view size without overflow, limits->tensor_bytes, and - with payload - the
 * view inside its payload), for descriptors read from another index format
 * (torch's payload configs). */
TP_HIDDEN tp_status tp__serde_weights_check(tp_serde_weights *w, const char *what, tp_serde_payload_fn payload,
                                            void *payload_ctx, const tp_doc_limits *limits);

/* The tensor an entry describes, borrowing data[0..size) (the payload;
 * release(release_ctx, data) runs when the last view goes, as in
 * tp_tensor_borrow; may be NULL). Checks the view fits. On failure release
 * is not called: the caller still owns data. */
TP_HIDDEN tp_status tp__serde_weight_tensor(const tp_serde_weight *w, void *data, size_t size,
                                            void (*release)(void *ctx, void *data), void *release_ctx,
                                            tp_tensor **out);

/* Descriptors for writing p's state: `weights` gets parameters and
 * buffers (persistent or not; roles 0 and 1), `constants` gets constant
 * tensors and non-persistent buffers (role 2), as tensorplay does. Each
 * descriptor is contiguous (strides C-order, offset 0), borrows the state
 * tensor in `tensor` and is named path_prefix + "weight_<i>" (i counts per
 * list; e.g. prefix "model/"). */
TP_HIDDEN tp_status tp__serde_state_weights(const tp_program *p, const char *path_prefix, tp_serde_weights *weights,
                                            tp_serde_weights *constants);

/* The index JSON for descriptors (name, dtype, sizes, strides,
 * storage_offset, requires_grad, path_name, use_pickle=false, is_param,
 * role). *json is the caller's (tp_free). */
TP_HIDDEN tp_status tp__serde_weights_to_json(const tp_serde_weights *w, char **json, size_t *len);

/* ---- example inputs as tensorplay's pickle -----------------------------
 * tensorplay's loader requires data/sample_inputs/<name>.pkl and unpickles
 * it (a missing member is a KeyError, an empty one an EOFError; an empty
 * dict is accepted, but then tensorplay calls need every argument).
 * Archives exported as export(model, (x,)) - the torch-style call - record
 * each example wrapped in a tuple, because tensorplay's export takes
 * *args; export(model, x) records x itself. These read and write exactly the subset tensorplay produces: a dict
 * of str -> value where values are tensors (tensorplay._C.TensorBase with
 * its raw bytes, sizes, strides, dtype code, offset), None, bool, int,
 * float, str and tuples/lists/dicts of those. Reading accepts only those
 * opcodes and classes (no code runs; anything else is TP_ERR_UNSUPPORTED)
 * within bounded sizes and depth (limits; NULL: the defaults). *out is a
 * dict value (caller clears). */
TP_HIDDEN tp_status tp__serde_examples_from_pickle(const void *data, size_t size, const tp_doc_limits *limits,
                                                  tp_value *out);
/* examples: a dict value (or NULL: an empty dict). *data is the caller's
 * (tp_free). bfloat16 tensors are written too (tensorplay stores them as
 * 16-bit words). */
TP_HIDDEN tp_status tp__serde_examples_to_pickle(const tp_value *examples, void **data, size_t *size);

/* ---- the op map (op_map.c) ----------------------------------------------
 * One entry per tensorplay callee: a function reference (module +
 * qualname) or a Tensor method (module NULL). `params` lists the callee's
 * parameters in order, mapped to the op's schema arguments:
 *     name           same name in the schema ("input"/"self"/"a": the
 *                    schema's first argument when the name is not in it)
 *     name:arg       renamed
 *     name:-         ignored (any value)
 *     name:!=LIT     must be LIT (or None); anything else is unsupported
 *     name:@         in-place flag: when true the result is copied back
 *                    into the first argument (as tensorplay would mutate it)
 *     name=LIT       the callee's default when it differs from the schema's
 *     *name          collects the remaining positional arguments into a list
 *     name^          written as the item when the value is a one-item list
 *     *              the parameters after it are keyword-only
 * LIT: None, True, False, a number, 'text' or dtype:float32. `fixed`
 * lists schema arguments set by the entry itself ("rounding_mode='floor'").
 * Exactly one entry per op carries TP_SERDE_WRITE: the callee written for
 * that op (a function, or a Tensor method where tensorplay's function is
 * broken, as for view). */

typedef enum tp_serde_special {
    TP_SERDE_PLAIN = 0,  /* map the arguments through params */
    TP_SERDE_BINOP,      /* _operator arithmetic/comparison: a scalar first operand is handled */
    TP_SERDE_GETITEM,    /* _operator.getitem: tensor indexing or item of a tuple/list */
    TP_SERDE_SETITEM,    /* _operator.setitem: x[index] = v, as copy_/fill_ into a view or index_put_ */
    TP_SERDE_SIZE,       /* Tensor.size(dim?): folded to ints when shapes are static */
    TP_SERDE_DIM,        /* Tensor.dim() / ndimension(): folded */
    TP_SERDE_NUMEL,      /* Tensor.numel(): folded when static */
    TP_SERDE_GETATTR,    /* builtins.getattr(x, "shape" | "T" | "mT" | "ndim" | "dtype") */
    TP_SERDE_TO,         /* Tensor.to / Tensor.type */
    TP_SERDE_TYPE_AS,    /* Tensor.type_as(other) */
    TP_SERDE_SHAPE_AS,   /* view_as / reshape_as / expand_as: op(self, other's shape) */
    TP_SERDE_ALIAS,      /* detach & co.: the same values (written as to(self)) */
    TP_SERDE_TRANSPOSE,  /* Tensor.t() / t_() / matrix_H() (2-D or 0-D); numpy_T(): all dims reversed */
    TP_SERDE_MAXMIN,     /* max/min: a tensor second argument means maximum/minimum */
    TP_SERDE_RETURN_INDICES, /* max_pool*d(..., return_indices): swapped_op (the _with_indices op) when true */
    TP_SERDE_NORM,       /* Tensor.norm: tensorplay's overload norm(dim: list, p, keepdim) is reordered */
    TP_SERDE_STDVAR,     /* Tensor.std / var: tensorplay's overload std(correction: int) for one positional int */
    TP_SERDE_ASSERT,     /* tensorplay's runtime dim assertions: dropped */
    TP_SERDE_PREDICATE,  /* is_floating_point / is_complex / is_signed / is_same_size / is_conj / is_neg /
                            is_quantized / is_distributed / get_device / is_inference / is_contiguous /
                            stride / storage_offset (and tensorplay.functional's sym_stride /
                            sym_storage_offset): folded */
    TP_SERDE_UNIQUE,     /* unique / unique_consecutive: op (swapped_op, unique_dim, for unique with a dim),
                            then the values alone or the tuple with the inverse and / or counts asked for */
    TP_SERDE_NONZERO_NUMPY, /* Tensor.nonzero_numpy(): unbind(nonzero(x), 1), one index tensor per dim (a 0-d x
                              unsqueezed first) */
    TP_SERDE_COMPOSE       /* a few of our ops (serde_compose.c, by the entry's name) */
} tp_serde_special;

enum {
    TP_SERDE_WRITE = 1u << 0,       /* the callee written for this op */
    TP_SERDE_COPY_BACK = 1u << 1,   /* in-place variant: op, then copy_ into the first argument */
    TP_SERDE_COMMUTATIVE = 1u << 2, /* BINOP: operands may be swapped */
    /* BINOP on ints (symbolic sizes): the same callee as a tensor entry
     * listed before it; the reader picks it when an operand is an int node */
    TP_SERDE_SYMINT = 1u << 3,
    /* *_copy functions (view_copy, permute_copy, ...): op, then a clone of
     * its result, so the value never aliases the input */
    TP_SERDE_COPY_RESULT = 1u << 4
};

typedef struct tp_serde_op_entry {
    const char *module; /* NULL: a Tensor method */
    const char *name;   /* qualname or method name */
    tp_op op;           /* the op (TP_OP_INVALID for some specials) */
    tp_serde_special special;
    const char *params;
    const char *fixed;  /* NULL or "arg=LIT,..." */
    unsigned flags;
    tp_op swapped_op;   /* BINOP: the op with operands swapped (lt for gt); TP_OP_INVALID if none */
} tp_serde_op_entry;

/* Lookups (NULL when unknown). */
TP_HIDDEN const tp_serde_op_entry *tp__serde_find_function(const char *module, const char *qualname);
TP_HIDDEN const tp_serde_op_entry *tp__serde_find_method(const char *name);
TP_HIDDEN const tp_serde_op_entry *tp__serde_write_entry(tp_op op);
/* The int variant (TP_SERDE_SYMINT) of _operator.<name>, or NULL. */
TP_HIDDEN const tp_serde_op_entry *tp__serde_find_symint(const char *name);
/* The whole table (for tests). */
TP_HIDDEN const tp_serde_op_entry *tp__serde_op_table(int *n);
/* Check the table (for tests): every parameter list parses and names
 * arguments of its op's schema, callees are unique, every op has exactly
 * one written callee. TP_ERR_INTERNAL listing the faults otherwise. */
TP_HIDDEN tp_status tp__serde_check_op_map(void);

#endif
