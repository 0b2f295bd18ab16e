/*
 * onnx_impl.h - internals of the ONNX importer shared by reader.c (bounded
 * protobuf decoding, TensorProto -> tensor), import.c (graph and program
 * building, value table, constant folding), op_map.c (ONNX op -> our ops),
 * shape_values.c (shape arithmetic on dynamic dims as symbolic ints),
 * shape_data.c (shape data given at run time), builder.c (lowerings as
 * expressions), strings.c (string tensors as UTF-8 bytes), attention.c
 * (Attention, TensorScatter), rotary.c (RotaryEmbedding), tfidf.c
 * (TfIdfVectorizer), gradient.c (Gradient) and control_flow.c (If, Loop,
 * Scan with subgraphs).
 */
#ifndef TPEXPORT_ONNX_IMPL_H
#define TPEXPORT_ONNX_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "../internal.h"
#include "onnx.pb-c.h"
#include "tpexport/graph.h"
#include "tpexport/onnx.h"
#include "tpexport/ops.h"
#include "tpexport/program.h"

/* ---- reader.c ---------------------------------------------------------- */

/* Read a whole file of at most max_bytes into a tp_malloc'ed buffer. */
TP_HIDDEN tp_status tp__onnx_read_file(const char *path, size_t max_bytes, uint8_t **data, size_t *size);
/* Decode a ModelProto (nesting checked first). Free with tp__onnx_model_free. */
TP_HIDDEN tp_status tp__onnx_decode_model(const uint8_t *data, size_t size, Onnx__ModelProto **out);
TP_HIDDEN void tp__onnx_model_free(Onnx__ModelProto *m);
/* Did the last protobuf decoding on this thread run out of memory? */
TP_HIDDEN bool tp__onnx_decode_nomem(void);
/* Map an ONNX element type to ours (TP_ERR_UNSUPPORTED naming the type). */
TP_HIDDEN tp_status tp__onnx_dtype(int32_t elem_type, tp_dtype *out);
TP_HIDDEN const char *tp__onnx_dtype_name(int32_t elem_type);
/* Convert a TensorProto to a new tensor (a STRING one to UTF-8 bytes:
 * uint8 [dims..., width], zero-padded). base_dir: folder for external
 * data (NULL refuses it); *external_budget is decremented by the bytes read. */
TP_HIDDEN tp_status tp__onnx_tensor(const Onnx__TensorProto *tp, const char *base_dir, size_t *external_budget,
                                    tp_tensor **out);

/* ---- import.c: the conversion context used by op_map.c ----------------- */

typedef struct ox_ctx ox_ctx;

/* Operands are tp_values: a node reference (a graph value) or a tensor (a
 * constant known at import). */

/* Input i of the current node: NULL when absent or given as "". */
TP_HIDDEN const tp_value *ox_in(ox_ctx *c, int i);
TP_HIDDEN int ox_n_in(ox_ctx *c);
TP_HIDDEN int ox_n_out(ox_ctx *c);
/* Is output i of the current node wanted (present and non-empty)? */
TP_HIDDEN bool ox_out_used(ox_ctx *c, int i);
/* Set output i of the current node (takes over *v). */
TP_HIDDEN tp_status ox_set_out(ox_ctx *c, int i, tp_value *v);
/* The metadata of an operand (a meta or real tensor; borrowed). */
TP_HIDDEN const tp_tensor *ox_meta(const tp_value *v);
/* The constant tensor of an operand, or NULL if only known at run time. */
TP_HIDDEN tp_tensor *ox_const(const tp_value *v);
/* Record that operand v (when it is a user input) is needed as a constant. */
TP_HIDDEN void ox_note_need_constant(ox_ctx *c, const tp_value *v);
/* The nodes of the current graph converted before the current node: the
 * first *n of the returned list. */
TP_HIDDEN Onnx__NodeProto *const *ox_nodes_before(ox_ctx *c, size_t *n);
/* ConstantOfShape (op_map.c): the fill value of attribute 'value' (float32
 * 0 when absent); full(sizes, that value) with sizes a list of ints and
 * numbers known when it runs (consumed). */
TP_HIDDEN tp_status ox_fill_value(ox_ctx *c, tp_dtype *dt, double *value);
TP_HIDDEN tp_status ox_constant_of_shape_call(ox_ctx *c, tp_value *sizes, tp_value *out);
/* Pad's mode attribute as torch's pad mode ("constant", "reflect",
 * "replicate", "circular"; op_map.c). */
TP_HIDDEN tp_status ox_pad_mode(ox_ctx *c, const char **mode);
/* RotaryEmbedding (opset 23; rotary.c). */
TP_HIDDEN tp_status tp__onnx_rotary_embedding(ox_ctx *c);
/* Attention (opset 23 on) and its cache update TensorScatter (opset 24;
 * attention.c). */
TP_HIDDEN tp_status tp__onnx_attention(ox_ctx *c);
TP_HIDDEN tp_status tp__onnx_tensor_scatter(ox_ctx *c);
/* TfIdfVectorizer over integers (tfidf.c). */
TP_HIDDEN tp_status tp__onnx_tfidf(ox_ctx *c);
/* CenterCropPad (opset 18; shape_data.c). */
TP_HIDDEN tp_status tp__onnx_center_crop_pad(ox_ctx *c);
/* Gradient (ai.onnx.preview.training; gradient.c). */
TP_HIDDEN tp_status tp__onnx_gradient(ox_ctx *c);
/* The current opset, node, op type. */
TP_HIDDEN int64_t ox_opset(ox_ctx *c);
TP_HIDDEN const Onnx__NodeProto *ox_node(ox_ctx *c);
/* An unsupported-feature error naming the node, op and opset. */
TP_HIDDEN tp_status ox_unsupported(ox_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A malformed-node error (TP_ERR_INVALID_ARG) naming the node. */
TP_HIDDEN tp_status ox_bad(ox_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Attributes of the current node. */
TP_HIDDEN const Onnx__AttributeProto *ox_attr(ox_ctx *c, const char *name);
TP_HIDDEN int64_t ox_attr_i(ox_ctx *c, const char *name, int64_t dflt);
TP_HIDDEN double ox_attr_f(ox_ctx *c, const char *name, double dflt);
/* String attribute into buf (dflt when absent). */
TP_HIDDEN const char *ox_attr_s(ox_ctx *c, const char *name, const char *dflt, char *buf, size_t size);
/* Ints attribute: *n = count (-1 when absent); copies at most max. */
TP_HIDDEN tp_status ox_attr_ints(ox_ctx *c, const char *name, int64_t *out, int max, int *n);

/* Argument lists for ox_call. */
typedef struct ox_args {
    tp_value a[24];
    int n;
    tp_value kw; /* dict or None */
    bool nomem;  /* an append failed: ox_call returns TP_ERR_NOMEM */
} ox_args;
TP_HIDDEN void ox_args_init(ox_args *A);
TP_HIDDEN void ox_args_clear(ox_args *A);
/* Append an operand (copied) / a value (taken over). */
TP_HIDDEN void ox_arg_ref(ox_args *A, const tp_value *v);
TP_HIDDEN void ox_arg(ox_args *A, tp_value v);
TP_HIDDEN void ox_arg_ints(ox_args *A, const int64_t *v, int n);
TP_HIDDEN void ox_kw(ox_args *A, const char *name, tp_value v);
TP_HIDDEN tp_status ox_args_status(const ox_args *A);
/* Call op: folded to a constant when every operand is a constant (its
 * result checked against the constant budget before the kernel runs), else a
 * graph node. *out receives the result operand (a node reference, a tensor,
 * or for multi-output ops a list/tuple of operands). Clears A. */
TP_HIDDEN tp_status ox_call(ox_ctx *c, tp_op op, ox_args *A, tp_value *out);
/* Shortcuts. */
TP_HIDDEN tp_status ox_call1(ox_ctx *c, tp_op op, const tp_value *x, tp_value *out);
TP_HIDDEN tp_status ox_call2(ox_ctx *c, tp_op op, const tp_value *x, const tp_value *y, tp_value *out);
TP_HIDDEN tp_status ox_call3(ox_ctx *c, tp_op op, const tp_value *x, const tp_value *y, const tp_value *z,
                             tp_value *out);
/* Cast an operand to dtype (a no-op copy when it already has it). */
TP_HIDDEN tp_status ox_cast(ox_ctx *c, const tp_value *x, tp_dtype dtype, tp_value *out);
/* A new tensor (zeroed when `zero`) for a constant the mapping builds,
 * or only the check (ox_check_constant, for scratch sized like one):
 * within tp_onnx_options.max_constant_bytes: TP_ERR_NOMEM naming the node
 * and the option when over it, TP_ERR_SHAPE for a negative or overflowing
 * shape. (Folding in ox_call checks the same budget from the op's shape
 * rule before running the kernel.) */
TP_HIDDEN tp_status ox_check_constant(ox_ctx *c, tp_dtype dtype, int ndim, const int64_t *sizes);
TP_HIDDEN tp_status ox_new_tensor(ox_ctx *c, tp_dtype dtype, int ndim, const int64_t *sizes, bool zero,
                                  tp_tensor **out);
/* A constant operand from a new tensor (taken over). */
TP_HIDDEN tp_value ox_tensor_value(tp_tensor *t);
TP_HIDDEN tp_status ox_scalar_tensor(tp_dtype dtype, double v, tp_value *out);

/* Strings: is input i an ONNX string tensor (held as UTF-8 bytes, uint8
 * [dims..., width]); mark output i (already set) as one. */
TP_HIDDEN bool ox_in_str(ox_ctx *c, int i);
TP_HIDDEN void ox_set_out_str(ox_ctx *c, int i);
/* StringNormalizer, StringConcat and Equal of strings (strings.c). */
TP_HIDDEN tp_status tp__onnx_string_normalizer(ox_ctx *c);
TP_HIDDEN tp_status tp__onnx_string_concat(ox_ctx *c);
TP_HIDDEN tp_status tp__onnx_string_equal(ox_ctx *c);

/* Dynamic dims: does input i's shape depend on one; do the current node's
 * inputs? (Values from a dynamically shaped input, or a data-dependent op.) */
TP_HIDDEN bool ox_in_dyn(ox_ctx *c, int i);
TP_HIDDEN bool ox_node_dyn(ox_ctx *c);
/* Mark the current node's outputs as depending on a dynamic dim. */
TP_HIDDEN void ox_set_node_dyn(ox_ctx *c);
/* v, made by a data-dependent op (a node without meta), gets meta of dtype
 * and sizes (known only when it runs: a hint) so later nodes can use it;
 * the current node's outputs are marked dynamic. */
TP_HIDDEN tp_status ox_dd_meta(ox_ctx *c, const tp_value *v, tp_dtype dtype, int ndim, const int64_t *sizes);

/* Shape values (shape_values.c): an int64 tensor of rank 0 or 1 computed
 * from the sizes of dynamically shaped values (Shape, Gather, Concat,
 * arithmetic, ...) is kept while importing as the list of its elements,
 * each an int or a symbolic-int node (sym_size and sym_* arithmetic), so
 * that Reshape, Expand, Slice, ConstantOfShape, Range, ... take it as size
 * arguments that follow the run-time sizes. */
#define OX_MAX_SHAPE_VALUE 64
/* Input i as a shape value: its element list (rank in *rank), else NULL. */
TP_HIDDEN const tp_value *ox_in_shape(ox_ctx *c, int i, int *rank);
/* Set output i to a shape value (takes over *items, a list); a list of
 * plain ints becomes a constant tensor. */
TP_HIDDEN tp_status ox_set_out_shape(ox_ctx *c, int i, tp_value *items, int rank);
/* Convert the current node when it makes or takes shape values in a way
 * they can stay symbolic (*done true); otherwise *done false and the node's
 * shape-value inputs are made into tensors for its ordinary mapping. */
TP_HIDDEN tp_status tp__onnx_convert_shape_node(ox_ctx *c, const char *op_type, bool *done);
/* Dim d of operand v as an int, or as a sym_size node when the current
 * node depends on a dynamic dim; the product of dims [from, to) likewise. */
TP_HIDDEN tp_status ox_dim(ox_ctx *c, const tp_value *v, int d, tp_value *out);
TP_HIDDEN tp_status ox_dim_product(ox_ctx *c, const tp_value *v, int from, int to, tp_value *out);
/* reshape(x, sizes): sizes[0..n) are ints and symbolic ints (consumed). */
TP_HIDDEN tp_status ox_reshape_to(ox_ctx *c, const tp_value *x, tp_value *sizes, int n, tp_value *out);
/* The int64 tensor (a graph node) holding a shape value's elements. */
TP_HIDDEN tp_status tp__onnx_shape_tensor(ox_ctx *c, const tp_value *items, int rank, tp_value *out);

/* Builder (builder.c): a sequence of ox_call results kept until rb_clear,
 * the first error kept in st (every later call then does nothing and
 * returns &none), so a lowering reads as a list of expressions. The
 * pointers returned stay valid until rb_clear. */
/* values live in chunks so that the pointers handed out stay valid */
#define RB_CHUNK 256
#define RB_CHUNKS 64

typedef struct rb {
    ox_ctx *c;
    tp_status st;
    int n; /* values kept */
    tp_value none;
    tp_value *chunk[RB_CHUNKS];
} rb;

TP_HIDDEN void rb_init(rb *b, ox_ctx *c);
TP_HIDDEN void rb_clear(rb *b);
TP_HIDDEN void rb_fail(rb *b, tp_status st);
/* Keep *v (taken over) when st is TP_OK. */
TP_HIDDEN const tp_value *rb_keep(rb *b, tp_status st, tp_value *v);
TP_HIDDEN const tp_value *rb_call(rb *b, tp_op op, ox_args *A); /* clears A */
TP_HIDDEN const tp_value *rb1(rb *b, tp_op op, const tp_value *x);
TP_HIDDEN const tp_value *rb2(rb *b, tp_op op, const tp_value *x, const tp_value *y);
TP_HIDDEN const tp_value *rb_where(rb *b, const tp_value *cond, const tp_value *x, const tp_value *y);
/* op(x, int d): select / unsqueeze / any / all / cumsum / sum along d. */
TP_HIDDEN const tp_value *rb_dim(rb *b, tp_op op, const tp_value *x, int64_t d);
TP_HIDDEN const tp_value *rb_select(rb *b, const tp_value *x, int64_t i); /* x[i] along dim 0 */
/* Constants: int64 1-D of n values (0-d when n < 0: one value), one int64, one float64. */
TP_HIDDEN const tp_value *rb_i64s(rb *b, int n, const int64_t *vals);
TP_HIDDEN const tp_value *rb_i64(rb *b, int64_t v);
TP_HIDDEN const tp_value *rb_f64(rb *b, double v);
TP_HIDDEN const tp_value *rb_cast(rb *b, const tp_value *x, tp_dtype dt);
/* A run-time integer tensor of rank <= 1 as 1-D int64 (*n values, at most max). */
TP_HIDDEN const tp_value *rb_int_input(rb *b, const tp_value *t, const char *what, int64_t max, int64_t *n);
/* Element i of a 1-D int64 tensor read with item() (a number known when it runs). */
TP_HIDDEN tp_status rb_item(rb *b, const tp_value *t, int64_t i, tp_value *out);
/* A list of the n elements of a 1-D int64 tensor, each read with item(). */
TP_HIDDEN const tp_value *rb_items(rb *b, const tp_value *t, int64_t n);
/* A list of copies of items[0..n) (ints, numbers known when it runs, tensors). */
TP_HIDDEN const tp_value *rb_list(rb *b, int n, const tp_value *const *items);
/* cat([x, y], dim); reshape(x, sizes[0..n)) with ints or numbers known when it runs. */
TP_HIDDEN const tp_value *rb_cat(rb *b, const tp_value *x, const tp_value *y, int64_t dim);
TP_HIDDEN const tp_value *rb_reshape(rb *b, const tp_value *x, int n, const tp_value *const *sizes);
/* Finish: r (a data-dependent result) gets hint meta and becomes output i. */
TP_HIDDEN tp_status rb_out(rb *b, int i, const tp_value *r, tp_dtype dt, int ndim, const int64_t *hint);

/* Shape data known only when the program runs (shape_data.c): Reshape,
 * Expand, Tile, ConstantOfShape, Unsqueeze, Squeeze, Slice, Split, TopK,
 * Pad and the window functions whose shape/axes/count input is a run-time
 * tensor read its values with item() (*done true); otherwise *done false. */
TP_HIDDEN tp_status tp__onnx_convert_shape_data(ox_ctx *c, const char *op_type, bool *done);
/* The values of run-time integer tensor t (rank <= 1, at most max values,
 * `what` names it in errors) as a list of numbers read with item();
 * *n = their count. */
TP_HIDDEN tp_status ox_run_time_ints(ox_ctx *c, const tp_value *t, const char *what, int64_t max, tp_value *list,
                                     int64_t *n);
/* bool [rank]: is dim k among run-time `axes` (negatives wrapped); *n = the
 * number of axes. */
TP_HIDDEN tp_status ox_run_time_axes_mask(ox_ctx *c, const tp_value *axes, int64_t rank, tp_value *mask, int64_t *n);

/* op(in, [dim], keepdim) (a reduction) over run-time `axes`; *out's sizes
 * are known when it runs (hint meta set). */
TP_HIDDEN tp_status ox_run_time_reduce(ox_ctx *c, const tp_value *in, const tp_value *axes, tp_op op, bool keep,
                                       tp_value *out);

/* Resize whose scales, sizes or roi are given at run time, or with axes,
 * keep_aspect_ratio_policy or half_pixel_symmetric (constants fold): the attributes
 * (mode "nearest"/"linear"/"cubic", coordinate transformation, ...) as
 * map_resize read them, and the operands (NULL when absent; exactly one of
 * scales and sizes). *out's sizes are known when it runs. */
typedef struct ox_resize {
    const char *mode, *ctm, *nearest_mode;
    double cubic_a, extrapolation;
    bool exclude_outside;
    const tp_value *scales, *sizes, *roi; /* roi only for tf_crop_and_resize */
    int n_axes;                            /* 0: every dim; else scales/sizes/roi are for these */
    const int64_t *axes;                   /* distinct, wrapped */
    int keep_policy;                       /* keep_aspect_ratio_policy: 0 stretch, 1 not_larger, 2 not_smaller */
} ox_resize;
TP_HIDDEN tp_status ox_run_time_resize(ox_ctx *c, const tp_value *x, const ox_resize *rz, tp_value *out);

/* Subgraphs (control_flow.c: If, Loop, Scan). Convert the nodes of g into
 * the current value table (outer values visible), then restore the current
 * node; the first error stops it. */
#define OX_MAX_SUBGRAPH_DEPTH 8
#define OX_MAX_SUBGRAPH_NODES ((size_t)1 << 18) /* in all, counting every unrolled copy */
TP_HIDDEN tp_status ox_convert_subgraph(ox_ctx *c, const Onnx__GraphProto *g);
/* Define `name` as a copy of operand v (a subgraph's input). */
TP_HIDDEN tp_status ox_bind(ox_ctx *c, const char *name, const tp_value *v, bool dyn);
/* The operand named `name` (a shape value made into a tensor); an error
 * naming it when undefined or not converted. Borrowed until the next
 * definition of that name. */
TP_HIDDEN tp_status ox_lookup(ox_ctx *c, const char *name, const tp_value **out, bool *dyn);
/* Convert an If / Loop / Scan node (control_flow.c). */
TP_HIDDEN tp_status tp__onnx_convert_control_flow(ox_ctx *c, const char *op_type);

/* ---- op_map.c ---------------------------------------------------------- */

/* Convert the current node. TP_ERR_UNSUPPORTED (via ox_unsupported) for
 * unknown ops and attribute values. */
TP_HIDDEN tp_status tp__onnx_convert_node(ox_ctx *c, const char *op_type);
/* The same for a node of domain ai.onnx.preview.training (Adagrad, Adam,
 * Momentum: lowered to elementwise ops). */
#define OX_TRAINING_DOMAIN "ai.onnx.preview.training"
#define OX_MAX_TRAINING_OPSET 1
TP_HIDDEN tp_status tp__onnx_convert_training_node(ox_ctx *c, const char *op_type);

#endif
