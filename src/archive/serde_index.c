/*
 * serde_index.c - lowering tensorplay's indexing: _operator.getitem and
 * _operator.setitem on tensors become select / slice / unsqueeze views, index
 * and index_put_ (tensor, list and mask indices), copy_ / fill_ into views;
 * getitem on tuples, lists and dicts becomes our getitem op.
 *
 * Part of the program document reader/writer (serde.h is the contract,
 * serde_impl.h what its files share).
 */
#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serde_impl.h"

/* ---- tensor indexing ---------------------------------------------------- */

typedef enum ix_kind { IX_INT, IX_SLICE, IX_NONE, IX_ELLIPSIS, IX_TENSOR } ix_kind;

typedef struct ix_item {
    ix_kind kind;
    int64_t i;
    tp_value start, stop; /* IX_SLICE: int, a size node or None */
    int64_t step;
    tp_value t;           /* IX_TENSOR: a node reference (an index or mask tensor) */
    int span;             /* IX_TENSOR: dims it indexes (a mask's rank, else 1) */
} ix_item;

#define MAX_INDEX_ITEMS 32

/* A list of ints as an index: an int64 constant tensor (lifted), referenced
 * from *out. */
static tp_status int_list_index(vctx *c, const tp_value *list, const char *path, tp_value *out) {
    reader *r = c->r;
    int64_t n = tp_value_len(list);
    int64_t *vals = tp_malloc((size_t)(n ? n : 1) * sizeof *vals);
    if (!vals) return tp__sd_note(r, tp_error(TP_ERR_NOMEM, "out of memory"));
    tp_status st = TP_OK;
    for (int64_t k = 0; k < n && st == TP_OK; k++) {
        const tp_value *v = tp_value_at(list, k);
        if (v->kind != TP_VAL_INT)
            st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: an index list must hold ints, not %s (%s[%" PRId64 "])", c->node,
                        tp_value_kind_name(v->kind), path, k);
        else vals[k] = v->u.i;
    }
    tp_tensor *t = NULL;
    if (st == TP_OK && (st = tp_tensor_from_data(TP_INT64, 1, &n, vals, &t)) != TP_OK) tp__sd_note(r, st);
    tp_free(vals);
    if (st != TP_OK) return st;
    *out = tp_value_tensor(t);
    return tp__sd_lift_constant(c, out);
}

/* One item of an index: int, slice, None, Ellipsis, a tensor node (index or
 * mask) or a list of ints. */
static tp_status decode_index_item(vctx *c, const json_t *j, const char *path, ix_item *it) {
    reader *r = c->r;
    it->start = it->stop = it->t = tp_value_none();
    it->step = 1;
    it->span = 1;
    if (json_is_null(j)) {
        it->kind = IX_NONE;
        return TP_OK;
    }
    if (json_is_object(j) && json_object_size(j) == 1 && json_object_get(j, "__slice__")) {
        const json_t *sl = json_object_get(j, "__slice__");
        if (!json_is_array(sl) || json_array_size(sl) != 3)
            return tp__sd_report(r, TP_ERR_CORRUPT, "%s: a slice needs [start, stop, step]", path);
        tp_value parts[3];
        for (int k = 0; k < 3; k++) {
            char sub[520];
            snprintf(sub, sizeof sub, "%s[%d]", path, k);
            tp_status st = tp__sd_decode_value(c, json_array_get(sl, (size_t)k), sub, 1, &parts[k]);
            const tp_value *pm = st == TP_OK && parts[k].kind == TP_VAL_NODE ? tp__sd_ref_meta(&parts[k]) : NULL;
            bool symbolic = k < 2 && pm && pm->kind == TP_VAL_INT; /* a bound computed from sizes */
            if (st == TP_OK && parts[k].kind != TP_VAL_NONE && parts[k].kind != TP_VAL_INT && !symbolic) {
                st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: slice bounds must be ints, sizes or None (%s)", c->node, sub);
                tp_value_clear(&parts[k]);
            }
            if (st != TP_OK) {
                for (int q = 0; q < k; q++) tp_value_clear(&parts[q]);
                return st;
            }
        }
        it->kind = IX_SLICE;
        it->start = parts[0];
        it->stop = parts[1];
        if (parts[2].kind == TP_VAL_INT) it->step = parts[2].u.i;
        if (it->step <= 0)
            return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: slice step %" PRId64 " is not supported (must be positive)",
                          c->node, it->step);
        return TP_OK;
    }
    if (json_is_object(j) && json_object_size(j) == 1 && json_object_get(j, "__pickle__")) {
        bool ellipsis = false;
        tp_value v;
        TP_TRY(tp__sd_decode_pickle(c, json_object_get(j, "__pickle__"), path, &v, &ellipsis));
        if (ellipsis) {
            it->kind = IX_ELLIPSIS;
            return TP_OK;
        }
        if (v.kind != TP_VAL_NODE) { /* a pickled tensor is lifted to a placeholder node */
            tp_value_clear(&v);
            return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: this index is not supported (%s)", c->node, path);
        }
        it->kind = IX_TENSOR;
        it->t = v;
    } else {
        tp_value v;
        TP_TRY(tp__sd_decode_value(c, j, path, 1, &v));
        if (v.kind == TP_VAL_INT) {
            it->kind = IX_INT;
            it->i = v.u.i;
            return TP_OK;
        }
        if (v.kind == TP_VAL_LIST || v.kind == TP_VAL_TUPLE) {
            tp_value t;
            tp_status st = int_list_index(c, &v, path, &t);
            tp_value_clear(&v);
            TP_TRY(st);
            v = t;
        }
        if (v.kind != TP_VAL_NODE) {
            tp_status st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: indexing a tensor with a %s is not supported (%s)",
                                  c->node, tp_value_kind_name(v.kind), path);
            tp_value_clear(&v);
            return st;
        }
        it->kind = IX_TENSOR;
        it->t = v;
    }
    const tp_tensor *m = tp__sd_ref_meta_tensor(&it->t);
    if (!m) {
        const tp_value *mv = tp__sd_ref_meta(&it->t);
        if (mv && mv->kind == TP_VAL_INT) { /* an int node (from sizes) indexes like an int */
            it->kind = IX_INT;
            return TP_OK;
        }
        return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: indexing with '%s' needs its shape, which is unknown (%s)", c->node,
                      tp_node_name(it->t.u.node), path);
    }
    if (tp_tensor_dtype(m) == TP_BOOL || tp_tensor_dtype(m) == TP_UINT8) it->span = tp_tensor_ndim(m);
    else if (tp_tensor_dtype(m) != TP_INT64 && tp_tensor_dtype(m) != TP_INT32)
        return tp__sd_report(r, TP_ERR_TYPE, "node %s: tensors used as indices must be long, int, byte or bool tensors, not %s (%s)",
                      c->node, tp_dtype_name(tp_tensor_dtype(m)), path);
    return TP_OK;
}

static void ix_clear(ix_item *items, int n) {
    for (int i = 0; i < n; i++) {
        tp_value_clear(&items[i].start);
        tp_value_clear(&items[i].stop);
        tp_value_clear(&items[i].t);
    }
}

/* Name for the next helper node, or NULL when it is the last (named like
 * the document node). */
static tp_status step_name(reader *r, doc_node *d, bool last, const char *tag, char **name) {
    *name = NULL;
    if (last) return TP_OK;
    tp_status st = tp__sd_fresh_name(r, d->name, tag, name);
    return st == TP_OK ? TP_OK : tp__sd_note(r, st);
}

/* base[index] on a tensor (value NULL), or base[index] = *value: select /
 * slice / unsqueeze nodes for ints, slices and None; with a tensor, a list
 * or a mask among the items, then an index node over the remaining dims
 * (ints select first, as in PyTorch: x[0, :, i] is x[0][:, i]); for a
 * store, copy_/fill_ into the view, or index_put_. The last node is named
 * like the document node. */
static tp_status lower_index(vctx *c, doc_node *d, const tp_value *base, const json_t *index, const char *path,
                             const tp_value *value) {
    reader *r = c->r;
    ix_item items[MAX_INDEX_ITEMS];
    int n = 0;
    tp_status st = TP_OK;
    if (json_is_object(index) && json_object_size(index) == 1 && json_object_get(index, "__tuple__")) {
        const json_t *arr = json_object_get(index, "__tuple__");
        if (!json_is_array(arr)) return tp__sd_report(r, TP_ERR_CORRUPT, "%s: __tuple__ needs an array", path);
        if (json_array_size(arr) > MAX_INDEX_ITEMS)
            return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: more than %d indices", d->name, MAX_INDEX_ITEMS);
        for (size_t k = 0; k < json_array_size(arr) && st == TP_OK; k++) {
            char sub[560];
            snprintf(sub, sizeof sub, "%s[%zu]", path, k);
            st = decode_index_item(c, json_array_get(arr, k), sub, &items[n]);
            n++; /* cleared either way */
        }
    } else {
        st = decode_index_item(c, index, path, &items[0]);
        n = 1;
    }
    if (st != TP_OK) {
        ix_clear(items, n);
        return st;
    }
    int consuming = 0, ellipses = 0;
    bool advanced = false;
    for (int k = 0; k < n; k++) {
        if (items[k].kind == IX_INT || items[k].kind == IX_SLICE) consuming++;
        if (items[k].kind == IX_TENSOR) {
            consuming += items[k].span;
            advanced = true;
        }
        if (items[k].kind == IX_ELLIPSIS) ellipses++;
    }
    const tp_tensor *meta = tp__sd_ref_meta_tensor(base);
    if (ellipses > 1) st = tp__sd_report(r, TP_ERR_CORRUPT, "node %s: an index can only have a single ellipsis", d->name);
    else if (ellipses && !meta)
        st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: indexing with ... needs the rank of '%s', which is unknown", d->name,
                    base->kind == TP_VAL_NODE ? tp_node_name(base->u.node) : "?");
    else if (meta && consuming > tp_tensor_ndim(meta))
        st = tp__sd_report(r, TP_ERR_INDEX, "node %s: too many indices for a tensor of dimension %d", d->name,
                    tp_tensor_ndim(meta));
    /* which steps emit a node (the last one takes the document name when nothing follows) */
    int last_emit = -1;
    for (int k = 0; k < n; k++) {
        bool full = items[k].kind == IX_SLICE && tp__sd_is_none(&items[k].start) && tp__sd_is_none(&items[k].stop) && items[k].step == 1;
        bool view_step = items[k].kind == IX_NONE || (items[k].kind == IX_SLICE && !full) || items[k].kind == IX_INT;
        if (view_step) last_emit = k;
    }
    bool final_op = advanced || value != NULL; /* an index / store node comes after the views */
    tp_value cur = *base;                     /* borrowed node reference */
    tp_value list = tp_value_none();          /* advanced: the index node's indices */
    if (st == TP_OK && advanced && (st = tp_value_list(0, &list)) != TP_OK) tp__sd_note(r, st);
    int64_t dim = 0;
    tp_node *node = NULL;
    for (int k = 0; k < n && st == TP_OK; k++) {
        ix_item *it = &items[k];
        tp_value none = tp_value_none();
        if (it->kind == IX_ELLIPSIS) {
            for (int64_t q = 0; advanced && q < tp_tensor_ndim(meta) - consuming && st == TP_OK; q++)
                st = tp_value_append(&list, &none);
            dim += tp_tensor_ndim(meta) - consuming;
            if (st != TP_OK) tp__sd_note(r, st);
            continue;
        }
        bool full = it->kind == IX_SLICE && tp__sd_is_none(&it->start) && tp__sd_is_none(&it->stop) && it->step == 1;
        if (full || it->kind == IX_TENSOR) {
            /* a whole dim, or an index of the index node */
            tp_value item = none;
            if (!full) st = tp_value_copy(&it->t, &item);
            if (st == TP_OK && advanced) st = tp_value_append(&list, &item);
            else tp_value_clear(&item);
            if (st != TP_OK) tp__sd_note(r, st);
            dim += full ? 1 : it->span;
            continue;
        }
        char *name = NULL;
        const char *tag = it->kind == IX_INT ? "select" : it->kind == IX_SLICE ? "slice" : "unsqueeze";
        if ((st = step_name(r, d, k == last_emit && !final_op, tag, &name)) != TP_OK) break;
        const char *node_name = name ? name : d->name;
        if (it->kind == IX_INT) {
            tp_value vals[3] = {cur, tp_value_int(dim), it->t.kind == TP_VAL_NODE ? it->t : tp_value_int(it->i)};
            st = tp__sd_add_call_values(r, node_name, TP_OP_SELECT, vals, 3, &node);
        } else {
            if (it->kind == IX_SLICE) {
                tp_value vals[5] = {cur, tp_value_int(dim), it->start, it->stop, tp_value_int(it->step)};
                st = tp__sd_add_call_values(r, node_name, TP_OP_SLICE, vals, 5, &node);
            } else {
                tp_value vals[2] = {cur, tp_value_int(dim)};
                st = tp__sd_add_call_values(r, node_name, TP_OP_UNSQUEEZE, vals, 2, &node);
            }
            if (st == TP_OK && advanced && (st = tp_value_append(&list, &none)) != TP_OK) tp__sd_note(r, st);
            dim++;
        }
        tp_free(name);
        if (node) cur = tp_value_node(node);
    }
    /* trailing whole dims of the index list say nothing */
    while (st == TP_OK && advanced && tp_value_len(&list) > 0 && tp_value_at(&list, tp_value_len(&list) - 1)->kind == TP_VAL_NONE)
        list.u.seq.n--;
    if (st == TP_OK && !value && advanced) {
        tp_value vals[2] = {cur, list};
        st = tp__sd_add_call_values(r, d->name, TP_OP_INDEX, vals, 2, &node);
    } else if (st == TP_OK && !value && last_emit < 0) {
        /* x[:] / x[...]: the same values */
        tp_value vals[1] = {cur};
        st = tp__sd_add_call_values(r, d->name, TP_OP_TO, vals, 1, &node);
    } else if (st == TP_OK && value) {
        const tp_tensor *vm = tp__sd_ref_meta_tensor(value), *cm = tp__sd_ref_meta_tensor(&cur);
        tp_value v = *value; /* borrowed */
        tp_node *cast = NULL;
        if (value->kind == TP_VAL_NODE && !vm) {
            st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: the value stored needs a known shape", d->name);
        } else if (vm && cm && tp_tensor_dtype(vm) != tp_tensor_dtype(cm) && advanced) {
            /* x[i] = v converts v to x's dtype */
            char *name = NULL;
            if ((st = step_name(r, d, false, "to", &name)) == TP_OK) {
                tp_value vals[2] = {*value, tp_value_dtype(tp_tensor_dtype(cm))};
                st = tp__sd_add_call_values(r, name, TP_OP_TO, vals, 2, &cast);
                tp_free(name);
                if (cast) v = tp_value_node(cast);
            }
        } else if (value->kind != TP_VAL_NODE && value->kind != TP_VAL_INT && value->kind != TP_VAL_FLOAT &&
                   value->kind != TP_VAL_BOOL) {
            st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: storing a %s into a tensor is not supported", d->name,
                        tp_value_kind_name(value->kind));
        }
        if (st == TP_OK && advanced) {
            tp_value vals[4] = {cur, list, v, tp_value_bool(false)};
            st = tp__sd_add_call_values(r, d->name, TP_OP_INDEX_PUT_, vals, 4, &node);
        } else if (st == TP_OK) {
            tp_value vals[2] = {cur, v};
            st = tp__sd_add_call_values(r, d->name, value->kind == TP_VAL_NODE ? TP_OP_COPY_ : TP_OP_FILL_, vals, 2, &node);
        }
    }
    tp_value_clear(&list);
    ix_clear(items, n);
    if (st == TP_OK) tp__sd_set_node(d, node);
    return st;
}


/* _operator.getitem(base, index): tensor indexing, an item of a tuple/list
 * node (our getitem op), or of a folded constant. */
tp_status tp__sd_build_getitem(vctx *c, doc_node *d, const json_t *jargs, const char *path, const tp_value *kwargs) {
    reader *r = c->r;
    const json_t *arr = json_object_get(jargs, "__tuple__");
    char p0[512], p1[512];
    snprintf(p0, sizeof p0, "%s.args[0]", path);
    snprintf(p1, sizeof p1, "%s.args[1]", path);
    if (!json_is_array(arr) || json_array_size(arr) != 2 || tp_value_len(kwargs))
        return tp__sd_report(r, TP_ERR_CORRUPT, "node %s: _operator.getitem takes two positional arguments", d->name);
    /* x.shape[i] with dynamic dims: a symbolic size */
    const json_t *jb = json_array_get(arr, 0), *ji = json_array_get(arr, 1);
    const json_t *bref = json_is_object(jb) && json_object_size(jb) == 1 ? json_object_get(jb, "__node__") : NULL;
    int bpos = json_is_string(bref) ? tp__sd_find_doc_node(r, json_string_value(bref)) : -1;
    if (bpos >= 0 && bpos < r->current && r->nodes[bpos].state == DOC_SYMSHAPE && json_is_integer(ji)) {
        const tp_tensor *t = tp__sd_ref_meta_tensor(&(tp_value){.kind = TP_VAL_NODE, .u.node = r->nodes[bpos].node});
        int w;
        if (!t || tp__wrap_dim(json_integer_value(ji), tp_tensor_ndim(t), &w) != TP_OK)
            return tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: cannot index the shape of '%s'", d->name,
                          tp_node_name(r->nodes[bpos].node));
        d->state = DOC_SYMSIZE;
        d->node = r->nodes[bpos].node;
        d->sym_dim = w;
        return TP_OK;
    }
    tp_value base;
    TP_TRY(tp__sd_decode_value(c, jb, p0, 1, &base));
    tp_status st = TP_OK;
    const tp_value *meta = tp__sd_ref_meta(&base);
    bool container = false, tensor = false;
    if (base.kind == TP_VAL_NODE) {
        if (meta && meta->kind == TP_VAL_TENSOR) tensor = true;
        else if (meta && (meta->kind == TP_VAL_TUPLE || meta->kind == TP_VAL_LIST)) container = true;
        else {
            tp_op op = tp_node_op(base.u.node);
            const tp_schema *s = op != TP_OP_INVALID ? tp_op_schema(op) : NULL;
            if (s && s->returns == TP_RET_TENSOR) tensor = true;
            else if (s) container = true;
        }
    }
    if (tensor) {
        st = lower_index(c, d, &base, json_array_get(arr, 1), p1, NULL);
    } else {
        tp_value index;
        st = tp__sd_decode_value(c, json_array_get(arr, 1), p1, 1, &index);
        if (st == TP_OK) {
            int64_t n_items = tp_value_len(&base), at = index.kind == TP_VAL_INT && index.u.i < 0 ? index.u.i + n_items : index.u.i;
            bool item_is_node = base.kind != TP_VAL_NODE && tp_value_is_seq(&base) && index.kind == TP_VAL_INT &&
                                at >= 0 && at < n_items && tp_value_at(&base, at)->kind == TP_VAL_NODE;
            if (item_is_node) {
                /* (a, b)[0] where a is a node: keep a node of this name (outputs may name it) */
                tp_node *n = NULL;
                tp_value vals[2] = {base, index};
                st = tp__sd_add_call_values(r, d->name, TP_OP_GETITEM, vals, 2, &n);
                if (n) tp__sd_set_node(d, n);
            } else if (base.kind != TP_VAL_NODE && tp_value_is_seq(&base) && index.kind == TP_VAL_INT) {
                int64_t n = tp_value_len(&base), i = index.u.i < 0 ? index.u.i + n : index.u.i;
                if (i < 0 || i >= n) {
                    st = tp__sd_report(r, TP_ERR_INDEX, "node %s: index %" PRId64 " out of range for a %s of %" PRId64, d->name,
                                index.u.i, tp_value_kind_name(base.kind), n);
                } else {
                    tp_value item;
                    st = tp_value_copy(tp_value_at(&base, i), &item);
                    if (st == TP_OK) tp__sd_set_folded(d, &item);
                    else tp__sd_note(r, st);
                }
            } else if (container && index.kind == TP_VAL_INT) {
                tp_node *n = NULL;
                tp_value vals[2] = {base, index};
                st = tp__sd_add_call_values(r, d->name, TP_OP_GETITEM, vals, 2, &n);
                if (n) tp__sd_set_node(d, n);
            } else if (index.kind == TP_VAL_STR && base.kind == TP_VAL_NODE &&
                       (!meta || meta->kind == TP_VAL_DICT || meta->kind == TP_VAL_NONE)) {
                /* d['key'] of a dict input (or a node returning a dict) */
                tp_node *n = NULL;
                tp_value vals[2] = {base, index};
                st = tp__sd_add_call_values(r, d->name, TP_OP_GETITEM, vals, 2, &n);
                if (n) tp__sd_set_node(d, n);
            } else if (index.kind == TP_VAL_STR) {
                st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: indexing a %s by key '%.64s' is not supported", d->name,
                            meta ? tp_value_kind_name(meta->kind) : tp_value_kind_name(base.kind), index.u.s);
            } else if (base.kind == TP_VAL_NODE && !container) {
                st = tp__sd_report(r, TP_ERR_UNSUPPORTED,
                            "node %s: cannot tell whether '%s' is a tensor or a tuple (its shape is unknown: no example "
                            "input?)",
                            d->name, tp_node_name(base.u.node));
            } else {
                st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: indexing a %s with a %s is not supported", d->name,
                            tp_value_kind_name(base.kind), tp_value_kind_name(index.kind));
            }
            tp_value_clear(&index);
        }
    }
    tp_value_clear(&base);
    return st;
}

/* _operator.setitem(base, index, value): x[index] = value writes into x (a
 * view of it, or index_put_); later nodes reading x see the write, as
 * nodes run in graph order. */
tp_status tp__sd_build_setitem(vctx *c, doc_node *d, const json_t *jargs, const char *path, const tp_value *kwargs) {
    reader *r = c->r;
    const json_t *arr = json_object_get(jargs, "__tuple__");
    char p0[512], p1[512], p2[512];
    snprintf(p0, sizeof p0, "%s.args[0]", path);
    snprintf(p1, sizeof p1, "%s.args[1]", path);
    snprintf(p2, sizeof p2, "%s.args[2]", path);
    if (!json_is_array(arr) || json_array_size(arr) != 3 || tp_value_len(kwargs))
        return tp__sd_report(r, TP_ERR_CORRUPT, "node %s: _operator.setitem takes three positional arguments", d->name);
    tp_value base, value = tp_value_none();
    TP_TRY(tp__sd_decode_value(c, json_array_get(arr, 0), p0, 1, &base));
    tp_status st = tp__sd_decode_value(c, json_array_get(arr, 2), p2, 1, &value);
    const tp_value *bm = tp__sd_ref_meta(&base);
    if (st == TP_OK && (base.kind != TP_VAL_NODE || (bm && bm->kind != TP_VAL_TENSOR)))
        st = tp__sd_report(r, TP_ERR_UNSUPPORTED, "node %s: setitem on a %s is not supported", d->name,
                    bm ? tp_value_kind_name(bm->kind) : tp_value_kind_name(base.kind));
    if (st == TP_OK) st = lower_index(c, d, &base, json_array_get(arr, 1), p1, &value);
    tp_value_clear(&value);
    tp_value_clear(&base);
    return st;
}
