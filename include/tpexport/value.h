/*
 * value.h - tagged values: op arguments, graph node arguments, runtime values.
 *
 * A tp_value is a small tagged union. Scalars (None, bool, int, float, string,
 * dtype) are held inline (strings are owned copies); a tensor value holds one
 * reference to a tp_tensor; a node value is a borrowed reference to a graph
 * node (only inside graphs); lists, tuples and string-keyed dicts own their
 * items. tp_value_clear releases what a value owns and resets it to None;
 * tp_value_copy makes a deep copy of containers and strings and retains
 * tensors (the tensor data itself is shared).
 *
 * Values are plain structs: declare them on the stack, initialise with
 * tp_value_none() or a constructor, and always tp_value_clear them.
 */
#ifndef TPEXPORT_VALUE_H
#define TPEXPORT_VALUE_H

#include <stdbool.h>
#include <stdint.h>
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tp_node tp_node;

typedef enum tp_value_kind {
    TP_VAL_NONE = 0,
    TP_VAL_BOOL,
    TP_VAL_INT,
    TP_VAL_FLOAT,
    TP_VAL_STR,
    TP_VAL_DTYPE,
    TP_VAL_TENSOR,
    TP_VAL_NODE,
    TP_VAL_LIST,
    TP_VAL_TUPLE,
    TP_VAL_DICT
} tp_value_kind;

typedef struct tp_value tp_value;
struct tp_value {
    tp_value_kind kind;
    union {
        bool b;
        int64_t i;
        double f;
        char *s;           /* owned, NUL-terminated */
        tp_dtype dtype;
        tp_tensor *tensor; /* one owned reference */
        tp_node *node;     /* borrowed: the node's graph owns it */
        struct {
            tp_value *items; /* n owned items */
            char **keys;     /* dict only: n owned keys, unique */
            int64_t n;
        } seq;
    } u;
};

/* Kind name: "None", "bool", "int", "float", "str", "dtype", "Tensor",
 * "Node", "list", "tuple", "dict". */
TP_API const char *tp_value_kind_name(tp_value_kind kind);

/* Constructors. Scalars cannot fail; those that allocate return a status
 * and leave *out None when they fail (so it may always be cleared). */
TP_API tp_value tp_value_none(void);
TP_API tp_value tp_value_bool(bool b);
TP_API tp_value tp_value_int(int64_t i);
TP_API tp_value tp_value_float(double f);
TP_API tp_value tp_value_dtype(tp_dtype dtype);
TP_API tp_value tp_value_node(tp_node *node);
/* Takes over the caller's reference to t (use tp_tensor_retain to keep one). */
TP_API tp_value tp_value_tensor(tp_tensor *t);
TP_API tp_status tp_value_str(const char *s, tp_value *out);
/* A list/tuple of n items, each None; fill with tp_value_seq_set. */
TP_API tp_status tp_value_list(int64_t n, tp_value *out);
TP_API tp_status tp_value_tuple(int64_t n, tp_value *out);
/* A list/tuple of ints. */
TP_API tp_status tp_value_int_list(const int64_t *ints, int64_t n, tp_value *out);
/* Empty dict; add entries with tp_value_dict_set. */
TP_API tp_status tp_value_dict(tp_value *out);

/* Release what v owns; v becomes None. NULL ok. */
TP_API void tp_value_clear(tp_value *v);
/* Deep copy (tensors retained, not copied). On failure *dst is None. */
TP_API tp_status tp_value_copy(const tp_value *src, tp_value *dst);
/* Move: *dst = *src, *src = None (dst is cleared first). */
TP_API void tp_value_move(tp_value *dst, tp_value *src);

/* Sequence (list/tuple/dict) access. */
TP_API int64_t tp_value_len(const tp_value *v); /* 0 for non-sequences */
TP_API tp_value *tp_value_at(const tp_value *v, int64_t i); /* borrowed; NULL if out of range */
/* Putting an item into a container: seq_set, append and dict_set always
 * consume `item`, whether they succeed or fail - on success it moves into
 * the container, on failure (TP_ERR_NOMEM, a wrong kind, an index out of
 * range) it is cleared. Either way *item is None afterwards and the caller
 * must not free what it held (a tensor reference, a string). */
/* Replace item i with `item` (consumed). */
TP_API tp_status tp_value_seq_set(tp_value *seq, int64_t i, tp_value *item);
/* Append `item` (consumed). Works on lists, tuples. */
TP_API tp_status tp_value_append(tp_value *seq, tp_value *item);
/* Dict: set key (copied) to item (consumed); replaces an existing key. */
TP_API tp_status tp_value_dict_set(tp_value *dict, const char *key, tp_value *item);
/* Dict lookup; NULL if absent. Borrowed. */
TP_API tp_value *tp_value_dict_get(const tp_value *dict, const char *key);

/* Helpers to read scalars: int accepts bool; float accepts int and bool. */
TP_API bool tp_value_is_number(const tp_value *v); /* bool, int or float */
TP_API bool tp_value_is_seq(const tp_value *v);    /* list or tuple */
TP_API double tp_value_as_f64(const tp_value *v);
TP_API int64_t tp_value_as_i64(const tp_value *v);

/* Structural equality (tensors compared by identity, floats by value with
 * NaN == NaN, dicts by ordered keys). */
TP_API bool tp_value_equal(const tp_value *a, const tp_value *b);

/* Python-like repr into buf: 1, 2.5, True, None, 'str', torch.float32, (a, b),
 * [a, b], {'k': v}; nodes print their name; tensors as "Tensor(shape=[2, 3],
 * dtype=float32)". Returns the length that would have been written. */
TP_API int tp_value_repr(const tp_value *v, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
