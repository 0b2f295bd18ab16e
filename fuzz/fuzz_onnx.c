/*
 * fuzz_onnx.c - libFuzzer entry for tp_fuzz_onnx (fuzz/targets.c: the ONNX
 * reader and importer, then a bounded call of a model that imports), with a
 * structure-aware mutator.
 *
 * LLVMFuzzerCustomMutator decodes the input as a ModelProto with the
 * protobuf-c code the build generates (tp__onnx_decode_model: nesting
 * checked first, blocks from the library's allocator, so replaced strings
 * and arrays are tp_malloc'd). If it decodes, one structural mutation is
 * applied, chosen and parameterised only from the `seed` argument (the same
 * input and seed give the same output):
 *   - an int attribute, or one element of an ints attribute, set to 0, -1,
 *     1, 2^31, 2^32, 2^62, INT64_MIN, INT64_MAX or a small value;
 *   - a tensor's (initializer or Constant value) dims entry set likewise,
 *     or its data_type changed;
 *   - a tensor's raw_data truncated or extended with random bytes;
 *   - a node's op_type swapped for another op the importer knows;
 *   - a node input or output renamed (to another value's name, "" or a
 *     fresh name), duplicated or dropped;
 *   - a graph input's shape dim set to a dim_value (as above) or a
 *     dim_param.
 * The model is then packed back when it fits max_size. An input that does
 * not decode, a model with nothing to mutate, or one packing too big falls
 * back to LLVMFuzzerMutate. Seeds: fuzz/corpus/onnx/ (see fuzz/README.md).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "onnx/onnx_impl.h"
#include "targets.h"

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return tp_fuzz_onnx(data, size); }

/* ---- deterministic randomness from the seed ----------------------------- */

typedef struct rng {
    uint64_t state;
} rng;

static uint64_t next_u64(rng *r) { /* splitmix64 */
    uint64_t z = (r->state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static size_t below(rng *r, size_t n) { return n ? (size_t)(next_u64(r) % n) : 0; }

static int64_t interesting_int(rng *r) {
    static const int64_t values[] = {0, -1, 1, (int64_t)1 << 31, (int64_t)1 << 32, (int64_t)1 << 62, INT64_MIN,
                                     INT64_MAX};
    size_t k = below(r, sizeof values / sizeof values[0] + 2);
    if (k < sizeof values / sizeof values[0]) return values[k];
    return (int64_t)below(r, 13) - 4; /* -4 .. 8 */
}

static const char *const known_ops[] = {
    "Add", "ArgMax", "AveragePool", "BatchNormalization", "Cast", "Clip", "Concat", "Constant",
    "ConstantOfShape", "Conv", "ConvTranspose", "CumSum", "DepthToSpace", "Einsum", "Expand", "EyeLike",
    "Flatten", "Gather", "GatherElements", "GatherND", "Gemm", "GlobalAveragePool", "Identity",
    "InstanceNormalization", "LRN", "LayerNormalization", "MatMul", "MaxPool", "Mul", "OneHot", "Pad",
    "Range", "ReduceMean", "ReduceSum", "Relu", "Reshape", "Resize", "ScatterND", "Shape", "Slice",
    "Softmax", "SpaceToDepth", "Split", "Squeeze", "Tile", "TopK", "Transpose", "Trilu", "Unsqueeze",
    "Upsample", "Where"};

/* ---- the parts of a model a mutation can touch ---------------------------- */

#define MAX_PARTS 256

typedef struct parts {
    Onnx__GraphProto *graph;
    Onnx__AttributeProto *int_attrs[MAX_PARTS]; /* type INT or INTS, or with an i / ints */
    int n_int_attrs;
    Onnx__TensorProto *tensors[MAX_PARTS]; /* initializers and Constant values */
    int n_tensors;
    Onnx__TensorShapeProto__Dimension *dims[MAX_PARTS]; /* graph input shape dims */
    int n_dims;
} parts;

static void collect(Onnx__GraphProto *g, parts *P) {
    P->graph = g;
    for (size_t i = 0; i < g->n_initializer && P->n_tensors < MAX_PARTS; i++)
        if (g->initializer[i]) P->tensors[P->n_tensors++] = g->initializer[i];
    for (size_t i = 0; i < g->n_node; i++) {
        Onnx__NodeProto *n = g->node[i];
        for (size_t a = 0; n && a < n->n_attribute; a++) {
            Onnx__AttributeProto *at = n->attribute[a];
            if (!at) continue;
            bool is_int = at->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT ||
                          at->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS || at->has_i || at->n_ints;
            if (is_int && P->n_int_attrs < MAX_PARTS) P->int_attrs[P->n_int_attrs++] = at;
            if (at->t && P->n_tensors < MAX_PARTS) P->tensors[P->n_tensors++] = at->t;
        }
    }
    for (size_t i = 0; i < g->n_input; i++) {
        Onnx__ValueInfoProto *v = g->input[i];
        if (!v || !v->type || v->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) continue;
        Onnx__TypeProto__Tensor *tt = v->type->tensor_type;
        if (!tt || !tt->shape) continue;
        for (size_t d = 0; d < tt->shape->n_dim && P->n_dims < MAX_PARTS; d++)
            if (tt->shape->dim[d]) P->dims[P->n_dims++] = tt->shape->dim[d];
    }
}

/* A value name of the graph: a node output, a graph input or an
 * initializer (NULL if there is none). */
static const char *some_value_name(const parts *P, rng *r) {
    const Onnx__GraphProto *g = P->graph;
    for (int tries = 0; tries < 8; tries++) {
        switch (below(r, 3)) {
        case 0:
            if (g->n_node) {
                const Onnx__NodeProto *n = g->node[below(r, g->n_node)];
                if (n && n->n_output) return n->output[below(r, n->n_output)];
            }
            break;
        case 1:
            if (g->n_input) return g->input[below(r, g->n_input)]->name;
            break;
        default:
            if (g->n_initializer) return g->initializer[below(r, g->n_initializer)]->name;
        }
    }
    return NULL;
}

/* ---- mutations: each returns whether it changed anything ----------------- */

static bool mutate_int_attr(parts *P, rng *r) {
    if (!P->n_int_attrs) return false;
    Onnx__AttributeProto *at = P->int_attrs[below(r, (size_t)P->n_int_attrs)];
    if (at->n_ints && (below(r, 2) || at->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)) {
        at->ints[below(r, at->n_ints)] = interesting_int(r);
    } else {
        at->has_i = 1;
        at->i = interesting_int(r);
    }
    return true;
}

static bool mutate_tensor(parts *P, rng *r) {
    if (!P->n_tensors) return false;
    Onnx__TensorProto *t = P->tensors[below(r, (size_t)P->n_tensors)];
    switch (below(r, 4)) {
    case 0: /* a dims entry */
        if (!t->n_dims) return false;
        t->dims[below(r, t->n_dims)] = interesting_int(r);
        return true;
    case 1: { /* data_type: a defined one (0..16, 17+ for newer types) or not */
        static const int32_t odd[] = {-1, 17, 23, 100, INT32_MAX};
        t->has_data_type = 1;
        t->data_type = below(r, 4) ? (int32_t)below(r, 17) : odd[below(r, sizeof odd / sizeof odd[0])];
        return true;
    }
    case 2: /* truncate raw_data */
        if (!t->has_raw_data || !t->raw_data.len) return false;
        t->raw_data.len = below(r, t->raw_data.len);
        return true;
    default: { /* extend raw_data with random bytes */
        size_t extra = 1 + below(r, below(r, 2) ? 8 : 256);
        uint8_t *grown = tp_realloc(t->raw_data.data, t->raw_data.len + extra);
        if (!grown) return false;
        for (size_t i = 0; i < extra; i++) grown[t->raw_data.len + i] = (uint8_t)next_u64(r);
        t->raw_data.data = grown;
        t->raw_data.len += extra;
        t->has_raw_data = 1;
        return true;
    }
    }
}

static bool mutate_op_type(parts *P, rng *r) {
    Onnx__GraphProto *g = P->graph;
    if (!g->n_node) return false;
    Onnx__NodeProto *n = g->node[below(r, g->n_node)];
    char *op = tp_strdup(known_ops[below(r, sizeof known_ops / sizeof known_ops[0])]);
    if (!n || !op) {
        tp_free(op);
        return false;
    }
    tp_free(n->op_type);
    n->op_type = op;
    return true;
}

/* Rename, duplicate or drop one entry of a node's inputs or outputs. */
static bool mutate_node_io(parts *P, rng *r) {
    Onnx__GraphProto *g = P->graph;
    if (!g->n_node) return false;
    Onnx__NodeProto *n = g->node[below(r, g->n_node)];
    if (!n) return false;
    bool outputs = below(r, 3) == 0;
    size_t *count = outputs ? &n->n_output : &n->n_input;
    char ***names = outputs ? &n->output : &n->input;
    switch (below(r, 3)) {
    case 0: { /* rename */
        if (!*count) return false;
        const char *other = NULL;
        size_t k = below(r, 4);
        if (k == 0) other = "";
        else if (k == 1) other = "fuzz_fresh";
        else other = some_value_name(P, r);
        char *copy = tp_strdup(other ? other : "");
        if (!copy) return false;
        size_t i = below(r, *count);
        tp_free((*names)[i]);
        (*names)[i] = copy;
        return true;
    }
    case 1: { /* duplicate one entry (appended) */
        if (!*count) return false;
        char *copy = tp_strdup((*names)[below(r, *count)]);
        char **grown = copy ? tp_realloc(*names, (*count + 1) * sizeof *grown) : NULL;
        if (!grown) {
            tp_free(copy);
            return false;
        }
        grown[(*count)++] = copy;
        *names = grown;
        return true;
    }
    default: { /* drop one entry */
        if (!*count) return false;
        size_t i = below(r, *count);
        tp_free((*names)[i]);
        memmove(*names + i, *names + i + 1, (*count - i - 1) * sizeof **names);
        (*count)--;
        return true;
    }
    }
}

static bool mutate_input_dim(parts *P, rng *r) {
    if (!P->n_dims) return false;
    Onnx__TensorShapeProto__Dimension *d = P->dims[below(r, (size_t)P->n_dims)];
    if (below(r, 4) == 0) {
        static const char *const params[] = {"N", "batch", "fuzz_dim", ""};
        char *name = tp_strdup(params[below(r, sizeof params / sizeof params[0])]);
        if (!name) return false;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) tp_free(d->dim_param);
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
        d->dim_param = name;
    } else {
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) tp_free(d->dim_param);
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        d->dim_value = interesting_int(r);
    }
    return true;
}

static bool mutate_model(Onnx__ModelProto *m, rng *r) {
    if (!m->graph) return false;
    static parts P; /* large: kept off the stack */
    memset(&P, 0, sizeof P);
    collect(m->graph, &P);
    bool (*const kinds[])(parts *, rng *) = {mutate_int_attr, mutate_tensor, mutate_op_type, mutate_node_io,
                                             mutate_input_dim};
    size_t n_kinds = sizeof kinds / sizeof kinds[0];
    /* the chosen kind may find nothing to change: try others */
    for (int tries = 0; tries < 8; tries++)
        if (kinds[below(r, n_kinds)](&P, r)) return true;
    return false;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
    rng r = {.state = seed};
    Onnx__ModelProto *m = NULL;
    if (tp__onnx_decode_model(data, size, &m) == TP_OK) {
        size_t packed = 0;
        if (mutate_model(m, &r)) {
            packed = onnx__model_proto__get_packed_size(m);
            if (packed <= max_size) packed = onnx__model_proto__pack(m, data);
            else packed = 0;
        }
        tp__onnx_model_free(m);
        if (packed) return packed;
    }
    return LLVMFuzzerMutate(data, size, max_size);
}
