/*
 * torch.h - PyTorch's own export archives (torch.export.save) -> tp_program
 * (internal; torch_read.c, torch_ops.c). archive.c finds the archive's
 * members and maps the payloads; nothing here touches ZIP structures.
 *
 * What PyTorch 2.x writes (the "pt2" package layout; checked with torch
 * 2.15): every member under one top folder <root>/:
 *   archive_format                     "pt2"
 *   archive_version, .data/version, .data/serialization_id
 *   byteorder                          "little"
 *   models/<model>.json                torch's export schema (schema_version
 *                                      {"major": 8, "minor": 20} there)
 *   data/weights/<model>_weights_config.json
 *                                      {"config": {"fc.weight": {"path_name":
 *                                      "weight_0", "is_param", "use_pickle",
 *                                      "tensor_meta": {dtype code, sizes,
 *                                      strides, storage_offset, ...}}}}
 *   data/weights/<path_name>           raw little-endian bytes
 *   data/constants/<model>_constants_config.json, data/constants/<path_name>
 *   data/sample_inputs/<model>.pt      torch.save of the example inputs:
 *                                      a pickle, never read (the program gets
 *                                      no example inputs)
 *
 * The document (torch/_export/serde/schema.py):
 *   {"graph_module": {"graph": {"inputs", "outputs", "nodes",
 *      "tensor_values", "sym_int_values", ...}, "signature": {"input_specs",
 *      "output_specs"}, "module_call_graph": [...], ...},
 *    "opset_version": {"aten": N}, "range_constraints": {"s77": {"min_val",
 *    "max_val"}}, "schema_version": {"major", "minor"}, "verifiers", ...}
 * Nodes call "torch.ops.aten.<op>.<overload>" (or "_operator.mul" & co. on
 * symbolic ints) with named arguments in a tagged union ({"as_tensor":
 * {"name"}}, {"as_ints": [..]}, {"as_sym_int": {"as_name"}}, ...); tensor
 * shapes are lists of {"as_int": n} or {"as_expr": {"expr_str":
 * "Symbol('s77', positive=True, integer=True)", "hint": {"as_int": 5}}}.
 *
 * Every node becomes a call of one of our ops through the table in
 * torch_ops.c (an op or overload not there is TP_ERR_UNSUPPORTED naming
 * it); each node's inferred dtype and shape are checked against the
 * document's tensor_values, so a mapping that disagrees with PyTorch fails
 * at load, not at run time. Runtime assertions (_assert_scalar,
 * _assert_tensor_metadata, sym_constrain_range_for_size) are dropped: the
 * program checks its range constraints on every call.
 */
#ifndef TPEXPORT_TORCH_H
#define TPEXPORT_TORCH_H

#include "serde.h"

/* The schema majors this reader knows: 5 (torch 2.4), 7 (torch 2.5), 8
 * (torch 2.6 onwards); others are refused naming the version. The writer
 * writes TP_TORCH_SCHEMA_MAJOR. */
#define TP_TORCH_SCHEMA_MIN_MAJOR 5
#define TP_TORCH_SCHEMA_MAJOR 8

typedef struct tp_torch_read_options {
    tp_serde_state_fn state; /* parameters, buffers, constants by target */
    void *state_ctx;
    const tp_doc_limits *limits; /* NULL: the defaults */
} tp_torch_read_options;

/* Build a program from torch's document json[0..len). The program is
 * validated. Errors: TP_ERR_CORRUPT (malformed, naming the JSON path),
 * TP_ERR_UNSUPPORTED (a schema version, op, overload, dtype or feature we
 * cannot run, named), TP_ERR_NOMEM. */
TP_HIDDEN tp_status tp__torch_program_from_json(const char *json, size_t len, const tp_torch_read_options *opts,
                                               tp_program **out);

/* Parse a payload config (<model>_weights_config.json or
 * _constants_config.json) into descriptors, with the checks of
 * tp__serde_weights_from_json (dtype, rank, sizes, strides, overflow, the
 * view inside its payload, use_pickle refused, the tensor_bytes limit). */
TP_HIDDEN tp_status tp__torch_weights_from_json(const char *json, size_t len, const char *what,
                                               tp_serde_payload_fn payload, void *payload_ctx,
                                               const tp_doc_limits *limits, tp_serde_weights *out);

/* torch's ScalarType code (schema.py) -> our dtype; false for codes we do
 * not have (complex, uint16/32/64, float8). */
TP_HIDDEN bool tp__torch_dtype(int64_t code, tp_dtype *out);

/* A file torch.save wrote (a ZIP of <name>/data.pkl and <name>/data/<key>
 * storages), read through the strict pickle subset (serde_impl.h) within
 * the ZIP and document limits: state dicts (a dict of tensors) and sample
 * inputs ((args, kwargs)). Tensors own copies of their storages. */
typedef struct tp_zip_limits tp_zip_limits;
TP_HIDDEN tp_status tp__torch_saved_value(const void *data, size_t size, const tp_zip_limits *zl,
                                         const tp_doc_limits *lim, tp_value *out);

/* ---- writing (torch_write.c) -------------------------------------------- */

/* The document of p in torch's schema 8.20 (caller frees *json). Errors:
 * TP_ERR_UNSUPPORTED naming a node whose op has no ATen counterpart in the
 * table, a get_attr node, a non-tensor input, a custom object. */
TP_HIDDEN tp_status tp__torch_program_to_json(const tp_program *p, char **json, size_t *len);
/* A payload config for state s, payloads named prefix + index. */
TP_HIDDEN tp_status tp__torch_payload_config(const tp_named_state *s, const char *prefix, char **json);
/* torch.save(value) as a ZIP in a new buffer (tp_free): tensors,
 * None/bool/int/float/str, tuples, lists and string-keyed dicts of them. */
TP_HIDDEN tp_status tp__torch_save_value(const tp_value *value, void **data, size_t *size);

/* ---- the op table (torch_ops.c) ---------------------------------------- */

enum {
    TP_TORCH_FIRST = 1u << 0,  /* torch returns extra outputs (mean, rstd, mask) our op does not: only
                                  output 0 is produced, using another is TP_ERR_UNSUPPORTED */
    TP_TORCH_DROP = 1u << 1,   /* a runtime assertion: dropped */
    TP_TORCH_T = 1u << 2,      /* aten.t: transpose(0, 1), the tensor itself below 2-D */
    TP_TORCH_SYMINT = 1u << 3, /* _operator arithmetic on symbolic ints */
    TP_TORCH_KW = 1u << 4      /* writing: our required arguments are in another order than ATen's: all but
                                  the first are written by keyword */
};

typedef struct tp_torch_op {
    const char *name;      /* "add" (aten) or "mul" (_operator, with TP_TORCH_SYMINT) */
    const char *overloads; /* "Tensor,Scalar" */
    tp_op op;
    /* torch argument -> ours, comma separated: "s:fill_value" renamed,
     * "N:-" ignored ("cudnn_enabled:-true": written as true), "half_to_float:=false" must be that (or
     * None) and is written so;
     * arguments not listed keep their names */
    const char *map;
    const char *fixed; /* our arguments set by the entry: "training=false,size=[]" */
    unsigned flags;
} tp_torch_op;

/* The entry for aten.<name>.<overload> (module "aten") or _operator.<name>
 * (module "_operator"); NULL if unknown. */
TP_HIDDEN const tp_torch_op *tp__torch_find_op(const char *module, const char *name, const char *overload);
/* Whether our op `name` is ATen's special_<name> (torch.special). */
TP_HIDDEN bool tp__torch_is_special(const char *name);
/* Whether the reader maps aten.<name>.<overload> (the table, the same-name
 * fallback, in-place variants; tests). */
TP_HIDDEN bool tp__torch_maps(const char *name, const char *overload);
/* The whole table (tests). */
TP_HIDDEN const tp_torch_op *tp__torch_op_table(int *n);

#endif
