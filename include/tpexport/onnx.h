/*
 * onnx.h - import ONNX models as exported programs.
 *
 * tp_onnx_load reads a model (.onnx, protobuf) and builds a tp_program:
 *  - graph inputs that are not initializers become USER_INPUT placeholders
 *    (in graph-input order); their declared shapes become example inputs
 *    (zeros) when fully static and within max_constant_bytes;
 *  - initializers read as tensor data become PARAMETER state (target = the
 *    initializer's name); constants produced by folding (Constant nodes,
 *    subgraphs whose inputs are all constant, e.g. Shape -> Gather ->
 *    Concat -> Reshape chains on static shapes) become CONSTANT_TENSOR
 *    state; initializers only read as shape/index data (Reshape's shape,
 *    Slice's starts, ...) are folded into op arguments and do not appear;
 *  - dim_param symbolic dims become named dynamic dims (one dim rule per
 *    site, a range from the options or [1, unbounded], and an equality
 *    constraint when several sites share a name). Values whose shape
 *    depends on a symbolic dim cannot feed Shape/Size (TP_ERR_UNSUPPORTED);
 *  - each ONNX node becomes one or more of our ops (default domain, opsets
 *    6 to 21), attributes turned into arguments;
 *  - graph outputs become USER_OUTPUT specs; calling the program returns a
 *    tuple of the outputs in graph-output order (one tensor when there is
 *    one output); a sequence output is a list (one program output per item);
 *  - sequences and optionals are tracked while importing, so their length
 *    (and presence) must be known then: sequence ops become ordinary ops
 *    on the items (docs/onnx.md).
 * Unsupported: other domains, sequence/optional graph inputs, map and
 * sparse types, SequenceMap, string
 * and unsigned 16/32/64-bit tensors, control flow (If, Loop, Scan), ops
 * whose output shape depends on data (NonZero, Unique, ...), training ops.
 * Such a node gives TP_ERR_UNSUPPORTED "node 'name' (OpType, opset N): why".
 *
 * Hostile input: the file is read with a size limit, protobuf nesting is
 * checked before decoding, every count, dim, data length and external-data
 * offset is checked with overflow-safe arithmetic; external data files are
 * resolved relative to the model's folder and must stay inside it. The
 * sizes, strides, pads, axes and counts the op mappings compute from
 * attributes or constant inputs are range- and overflow-checked
 * (TP_ERR_INVALID_ARG or TP_ERR_UNSUPPORTED naming the node and attribute),
 * and the constants the import creates are bounded by max_constant_bytes
 * (TP_ERR_NOMEM).
 */
#ifndef TPEXPORT_ONNX_H
#define TPEXPORT_ONNX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "program.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A user-given range for a symbolic dim (dim_param name); max may be
 * TP_DIM_UNBOUNDED. */
typedef struct tp_onnx_dim_range {
    const char *name;
    int64_t min, max;
} tp_onnx_dim_range;

/* Import options. Zero-initialise them or use tp_onnx_options_init;
 * fields added later default to 0 (docs/abi.md). */
typedef struct tp_onnx_options {
    size_t struct_size; /* sizeof(tp_onnx_options) as the caller saw it; 0: this version's */
    int n_dim_ranges;
    const tp_onnx_dim_range *dim_ranges; /* borrowed during the call */
    size_t max_model_bytes;    /* 0: 2 GiB. Larger model files: TP_ERR_CORRUPT */
    size_t max_external_bytes; /* 0: 16 GiB in all external data */
    /* Keep converting after an unsupported node so the report lists every
     * one (the call still fails with the first error). */
    bool report_all;
    /* Specialise graph inputs to constant values: an input named here is
     * not a user input of the program but the given tensor (borrowed during
     * the call), folded like an initializer. For inputs our ops need as
     * constants (Reshape's shape, Slice's starts, TopK's k, ...); the
     * report's need_constant lists them. */
    int n_input_values;
    const char *const *input_value_names;
    tp_tensor *const *input_values;
    /* The largest constant the import may create, in bytes (0: 256 MiB,
     * 2^28). It bounds every tensor made while converting: each value
     * folded from constants (checked from the op's shape rule before its
     * kernel runs), each constant a mapping builds (ConstantOfShape,
     * Range, EyeLike, window functions, masks and index tables) and each
     * example input (zeros of a declared static shape; over the budget the
     * input gets no example). A folded value that has no more elements than
     * its largest constant operand is exempt (Transpose, Cast, Slice of a
     * big initializer), so the budget only stops growth. Over it: TP_ERR_NOMEM
     * naming the node and this field. Added last: options zero-initialised
     * by older callers get the default. */
    size_t max_constant_bytes;
} tp_onnx_options;

static inline void tp_onnx_options_init(tp_onnx_options *o) {
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
}

/* One unsupported node. */
typedef struct tp_onnx_issue {
    char *node;    /* node name (or "#<index>" when unnamed) */
    char *op_type; /* e.g. "Loop" */
    char *domain;  /* "" for the default domain */
    int64_t opset;
    char *message; /* the full error message */
} tp_onnx_issue;

/* What the importer found; fill with tp_onnx_load, free with
 * tp_onnx_report_clear. */
typedef struct tp_onnx_report {
    int64_t ir_version;
    int64_t opset;        /* default-domain opset */
    char *producer;       /* "pytorch 1.13.1" or "" */
    int n_nodes;          /* ONNX nodes in the main graph */
    char *op_types;       /* distinct op types, space-separated, in order of first use */
    int n_inputs;         /* graph inputs that are not initializers, in order */
    char **inputs;
    int n_need_constant;  /* graph inputs read as shape/index data: give them */
    char **need_constant; /* values with tp_onnx_options.input_values */
    int n_issues;
    tp_onnx_issue *issues; /* unsupported nodes, in graph order */
    int n_outputs;         /* graph outputs, in order */
    char **outputs;
    int n_strings;         /* graph inputs and outputs holding ONNX strings, as */
    char **strings;        /* UTF-8 bytes: uint8 [dims..., width], zero-padded */
} tp_onnx_report;

/* Import the model at `path`. opts may be NULL (defaults); report may be
 * NULL. *out receives a new validated program (caller frees with
 * tp_program_free). Errors: TP_ERR_IO (cannot read), TP_ERR_CORRUPT
 * (malformed protobuf or tensor, naming the field), TP_ERR_UNSUPPORTED
 * ("node 'n' (Op, opset 13): ..."), TP_ERR_SHAPE/TP_ERR_TYPE from shape
 * inference (naming the node), TP_ERR_NOMEM (also for a constant over
 * max_constant_bytes, naming the node). The report is filled also on
 * failure (as far as reading got). */
TP_API tp_status tp_onnx_load(const char *path, const tp_onnx_options *opts, tp_program **out,
                              tp_onnx_report *report);
/* The same from memory. base_dir (may be NULL: external data refused)
 * resolves external data files. data is borrowed during the call. */
TP_API tp_status tp_onnx_load_buffer(const void *data, size_t size, const char *base_dir,
                                     const tp_onnx_options *opts, tp_program **out, tp_onnx_report *report);
TP_API void tp_onnx_report_clear(tp_onnx_report *report); /* NULL ok */
/* Print the report: opset, producer, then one line per unsupported node. */
TP_API void tp_onnx_report_print(const tp_onnx_report *report, FILE *f);

/* Parse a "--dynamic" spec "name=min:max" (max may be empty or "inf" for
 * unbounded; "name=min" means [min, unbounded]). out->name points into
 * `spec` (borrowed). TP_ERR_INVALID_ARG naming the spec. */
TP_API tp_status tp_onnx_parse_dim_range(const char *spec, tp_onnx_dim_range *out);

/* Read a serialized TensorProto (the test suites' input_0.pb files). *out
 * is a new tensor the caller frees. Errors as for models. */
TP_API tp_status tp_onnx_load_tensor(const char *path, tp_tensor **out);
TP_API tp_status tp_onnx_load_tensor_buffer(const void *data, size_t size, tp_tensor **out);

#ifdef __cplusplus
}
#endif
#endif
