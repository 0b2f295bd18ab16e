/*
 * pytree.h - tree specs: the structure of nested values, as in torch's
 * torch.utils._pytree.
 *
 * A value is a tree whose inner nodes are tuples, lists and string-keyed
 * dicts (keys kept in their given order) and whose leaves are all other
 * values (tensors, numbers, strings, dtypes, node references). None is a
 * container with no children: it has a spec of its own and no leaves, as
 * in torch. Flattening a value gives its leaves in depth-first order plus a
 * tp_treespec describing the structure; unflattening rebuilds the value
 * from a spec and leaves. The exported-program layer uses specs to turn
 * nested user inputs into flat graph inputs and flat graph outputs back
 * into nested results.
 *
 * A tp_treespec is immutable once built, so it may be shared between
 * threads. Specs have a JSON form:
 *   {"t":"leaf"}  {"t":"none"}  {"t":"tuple","c":[...]}  {"t":"list","c":[...]}
 *   {"t":"dict","ctx":["a","b"],"c":[...]}
 * and a readable form like torch's TreeSpec repr:
 *   TreeSpec(tuple, None, [*,
 *     TreeSpec(dict, ['a', 'b'], [*,
 *       *])])
 */
#ifndef TPEXPORT_PYTREE_H
#define TPEXPORT_PYTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "status.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tp_tree_kind {
    TP_TREE_LEAF = 0,
    TP_TREE_NONE,
    TP_TREE_TUPLE,
    TP_TREE_LIST,
    TP_TREE_DICT
} tp_tree_kind;

typedef struct tp_treespec tp_treespec;

/* "leaf", "none", "tuple", "list", "dict" (the JSON "t" names); "?" if
 * invalid. */
TP_API const char *tp_tree_kind_name(tp_tree_kind kind);

/* ---- building specs -------------------------------------------------------
 * Each returns a new spec the caller frees with tp_treespec_free. */

/* A leaf spec (one leaf). Errors: TP_ERR_NOMEM. */
TP_API tp_status tp_treespec_leaf(tp_treespec **out);
/* A None spec (no leaves). Errors: TP_ERR_NOMEM. */
TP_API tp_status tp_treespec_none(tp_treespec **out);
/* A tuple, list or dict spec with n children. The child specs are taken
 * over (freed with the new spec - or right away if this fails); the
 * `children` array itself stays the caller's. keys: for dicts, n keys
 * (copied), unique; ignored (may be NULL) otherwise. Errors:
 * TP_ERR_INVALID_ARG (kind not a container, NULL child or key, n < 0),
 * TP_ERR_DUPLICATE (repeated dict key), TP_ERR_NOMEM. */
TP_API tp_status tp_treespec_new(tp_tree_kind kind, tp_treespec **children, int64_t n,
                                 const char *const *keys, tp_treespec **out);
/* Deep copy. Errors: TP_ERR_NOMEM. */
TP_API tp_status tp_treespec_copy(const tp_treespec *spec, tp_treespec **out);
/* Free a spec and its children. NULL ok. */
TP_API void tp_treespec_free(tp_treespec *spec);

/* ---- inspecting specs ------------------------------------------------------- */

TP_API tp_tree_kind tp_treespec_kind(const tp_treespec *spec);
/* Leaves under the spec (1 for a leaf, 0 for None). Constant time. */
TP_API int64_t tp_treespec_num_leaves(const tp_treespec *spec);
/* Children of a container (0 for leaf and None). */
TP_API int64_t tp_treespec_num_children(const tp_treespec *spec);
/* Child i (borrowed from spec), or NULL if out of range. */
TP_API const tp_treespec *tp_treespec_child(const tp_treespec *spec, int64_t i);
/* Dict key i (borrowed), or NULL if spec is not a dict or i is out of
 * range. */
TP_API const char *tp_treespec_key(const tp_treespec *spec, int64_t i);
/* Same structure: kinds, child counts, dict keys in order. */
TP_API bool tp_treespec_equal(const tp_treespec *a, const tp_treespec *b);

/* ---- flatten / unflatten ------------------------------------------------------ */

/* Flatten `tree`: *leaves receives a new list value holding copies of the
 * leaves in depth-first order (tensors retained, not copied) and *spec a
 * new spec; the caller clears / frees both. Errors: TP_ERR_INVALID_ARG for
 * nesting deeper than 256 levels, TP_ERR_NOMEM. On error both outputs are
 * left empty (None / NULL). */
TP_API tp_status tp_pytree_flatten(const tp_value *tree, tp_value *leaves, tp_treespec **spec);

/* Rebuild a value from spec and n_leaves leaves (copied: tensors retained).
 * *out receives the new value, owned by the caller. Errors:
 * TP_ERR_INVALID_ARG "expected 3 leaves, got 2" when n_leaves differs from
 * tp_treespec_num_leaves(spec); TP_ERR_NOMEM. */
TP_API tp_status tp_pytree_unflatten(const tp_treespec *spec, const tp_value *leaves, int64_t n_leaves,
                                     tp_value *out);

/* ---- text forms ----------------------------------------------------------------- */

/* The JSON form (compact, no spaces), as a new string the caller frees with
 * tp_free. Errors: TP_ERR_NOMEM. */
TP_API tp_status tp_treespec_to_json(const tp_treespec *spec, char **out);
/* Parse the JSON form from json[0..len) (need not be NUL-terminated;
 * whitespace allowed between tokens; object members in any order; unknown
 * members refused). Caller frees *out. Errors: TP_ERR_CORRUPT naming the
 * problem and its byte offset (bad syntax, missing or unknown member,
 * unknown kind, ctx/c length mismatch, duplicate dict key, nesting deeper
 * than 256, trailing data); TP_ERR_NOMEM. */
TP_API tp_status tp_treespec_from_json(const char *json, size_t len, tp_treespec **out);
/* torch's TreeSpec repr ("*" for a leaf; see the top of this file), as a
 * new string the caller frees with tp_free. Errors: TP_ERR_NOMEM. */
TP_API tp_status tp_treespec_repr(const tp_treespec *spec, char **out);

#ifdef __cplusplus
}
#endif
#endif
