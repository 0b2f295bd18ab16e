/*
 * advindex.c - advanced indexing: index (x[i, j] with tensor, list, int and
 * boolean-mask indices) and index_put / index_put_ (x[i, j] = v), with
 * PyTorch's semantics.
 *
 * `indices` is a list with one item per indexed dim of self, in order:
 * None (the whole dim, as a `:` slice would) or a tensor of int64/int32
 * (positions, negative counting from the end) or bool/uint8 (a mask
 * covering as many dims as it has, standing for its nonzero positions).
 * Python ints are not indices here: PyTorch applies x[0, :, i] as a select
 * first (x[0][:, i]), and so does the archive reader. The integer indices broadcast together to one shape B. When
 * the indexed dims are adjacent, B replaces them in place; when a None
 * separates them, B comes first (x[0, :, i] has shape B + [size of dim 1]),
 * as in NumPy and PyTorch.
 *
 * A boolean mask makes the output size depend on the mask's values: the
 * shape rule counts the mask when it has data, and on metadata alone (the
 * engine's plan probes) reports TP_ERR_UNSUPPORTED, so a program using one
 * runs in the interpreter, which infers shapes on real tensors.
 */
#include <inttypes.h>

#include "kernel_util.h"

typedef struct adv_plan {
    tp_tensor *self;
    tp_tensor *idx[TP_MAX_DIMS]; /* per dim of self: its index (int64/int32), or NULL */
    bool owned[TP_MAX_DIMS];     /* idx[d] made here (from a mask): freed by adv_free */
    int bnd;                     /* broadcast shape B of the indices */
    int64_t bsizes[TP_MAX_DIMS];
    int first, last; /* first and last indexed dim */
    bool front;      /* B goes first (indexed dims not adjacent) */
    int out_nd;
    int64_t out_sizes[TP_MAX_DIMS];
} adv_plan;

static void adv_free(adv_plan *p) {
    for (int d = 0; d < TP_MAX_DIMS; d++)
        if (p->owned[d]) tp_tensor_free(p->idx[d]);
}

/* The nonzero positions of mask (k dims) as k int64 vectors. */
static tp_status mask_positions(const tp_tensor *mask, tp_tensor **out) {
    int k = mask->ndim;
    int64_t count = 0;
    tp_iter it;
    tp__iter_init(&it, k, mask->sizes, 1, (const tp_tensor *const[]){mask});
    while (tp__iter_next(&it)) count += tp__load_i64(it.ptr[0], mask->dtype) != 0;
    for (int j = 0; j < k; j++) out[j] = NULL;
    tp_status st = TP_OK;
    for (int j = 0; j < k && st == TP_OK; j++) st = tp_tensor_empty(TP_INT64, 1, &count, &out[j]);
    if (st == TP_OK) {
        int64_t n = 0;
        tp__iter_init(&it, k, mask->sizes, 1, (const tp_tensor *const[]){mask});
        while (tp__iter_next(&it)) {
            if (tp__load_i64(it.ptr[0], mask->dtype) == 0) continue;
            for (int j = 0; j < k; j++) ((int64_t *)tp__tensor_base(out[j]))[n] = it.index[j];
            n++;
        }
    }
    if (st != TP_OK)
        for (int j = 0; j < k; j++) {
            tp_tensor_free(out[j]);
            out[j] = NULL;
        }
    return st;
}

/* Check and lay out self[indices]. A mask is read when it has data (the
 * shape rule called on real tensors, and the kernel); a meta mask (plan
 * probes) is TP_ERR_UNSUPPORTED. */
static tp_status adv_build(const tp_value *self_v, const tp_value *list, adv_plan *p, bool *unknown) {
    memset(p, 0, sizeof *p);
    TP_CHECK(self_v->kind == TP_VAL_TENSOR, TP_ERR_TYPE, "self must be a Tensor, not %s",
             tp_value_kind_name(self_v->kind));
    p->self = self_v->u.tensor;
    TP_CHECK(list->kind == TP_VAL_LIST || list->kind == TP_VAL_TUPLE, TP_ERR_TYPE,
             "indices must be a list of tensors, ints or None, not %s", tp_value_kind_name(list->kind));
    const tp_tensor *s = p->self;
    int dim = 0, n_indexed = 0;
    p->first = -1;
    tp_status st = TP_OK;
    for (int64_t i = 0; i < list->u.seq.n && st == TP_OK; i++) {
        const tp_value *v = &list->u.seq.items[i];
        int span = v->kind == TP_VAL_TENSOR && (v->u.tensor->dtype == TP_BOOL || v->u.tensor->dtype == TP_UINT8)
                       ? v->u.tensor->ndim
                       : 1;
        if (dim + span > s->ndim) {
            st = tp_error(TP_ERR_INDEX, "too many indices for tensor of dimension %d", s->ndim);
            break;
        }
        if (v->kind == TP_VAL_NONE) {
            dim++;
            continue;
        }
        if (v->kind != TP_VAL_TENSOR) {
            st = tp_error(TP_ERR_TYPE, "indices[%" PRId64 "] must be a Tensor or None, not %s", i,
                          tp_value_kind_name(v->kind));
        } else if (v->u.tensor->dtype == TP_INT64 || v->u.tensor->dtype == TP_INT32) {
            p->idx[dim] = v->u.tensor;
        } else if (v->u.tensor->dtype == TP_BOOL || v->u.tensor->dtype == TP_UINT8) {
            const tp_tensor *m = v->u.tensor;
            if (m->ndim == 0) {
                st = tp_error(TP_ERR_UNSUPPORTED, "indices[%" PRId64 "]: a 0-dim boolean index is not supported", i);
                break;
            }
            for (int j = 0; j < m->ndim && st == TP_OK; j++)
                if (m->sizes[j] != s->sizes[dim + j]) {
                    char a[96], b[96];
                    st = tp_error(TP_ERR_INDEX,
                                  "the shape of the mask %s at index %d does not match the shape of the indexed tensor %s "
                                  "at index %d",
                                  tp__shape_str(m->ndim, m->sizes, a, sizeof a), j, tp__shape_str(s->ndim, s->sizes, b, sizeof b),
                                  dim + j);
                }
            if (st != TP_OK) break;
            if (tp_tensor_is_meta(m) && unknown) {
                *unknown = true; /* the caller needs no result shape */
                dim += span;
                continue;
            }
            if (tp_tensor_is_meta(m)) {
                st = tp_error(TP_ERR_UNSUPPORTED,
                              "indexing with a boolean mask: the output size depends on the mask's values");
                break;
            }
            tp_tensor *pos[TP_MAX_DIMS];
            if ((st = mask_positions(m, pos)) != TP_OK) break;
            for (int j = 0; j < m->ndim; j++) {
                p->idx[dim + j] = pos[j];
                p->owned[dim + j] = true;
            }
        } else {
            st = tp_error(TP_ERR_TYPE, "tensors used as indices must be long, int, byte or bool tensors, not %s",
                          tp_dtype_name(v->u.tensor->dtype));
        }
        if (st != TP_OK) break;
        for (int j = 0; j < span; j++) {
            if (p->first < 0) p->first = dim + j;
            if (p->last != dim + j - 1 && n_indexed) p->front = true; /* a None lies between */
            p->last = dim + j;
            n_indexed++;
        }
        dim += span;
    }
    if (st == TP_OK && unknown && *unknown) return TP_OK; /* no layout without the mask's count */
    if (st == TP_OK && n_indexed == 0) st = tp_error(TP_ERR_INVALID_ARG, "indices hold no tensor or int");
    /* broadcast the indices */
    for (int d = 0; d < s->ndim && st == TP_OK; d++) {
        if (!p->idx[d]) continue;
        int nd;
        int64_t out[TP_MAX_DIMS];
        st = tp__broadcast_shapes(p->bnd, p->bsizes, p->idx[d]->ndim, p->idx[d]->sizes, &nd, out);
        if (st != TP_OK) {
            char a[96];
            st = tp_error(TP_ERR_INDEX, "shape mismatch: indexing tensors could not be broadcast together (an index of shape %s)",
                          tp__shape_str(p->idx[d]->ndim, p->idx[d]->sizes, a, sizeof a));
            break;
        }
        p->bnd = nd;
        memcpy(p->bsizes, out, sizeof out);
    }
    if (st != TP_OK) {
        adv_free(p);
        return st;
    }
    /* output: [before, B, after] or [B, the other dims] */
    int n = 0;
    if (!p->front)
        for (int d = 0; d < p->first; d++) p->out_sizes[n++] = s->sizes[d];
    if (n + p->bnd > TP_MAX_DIMS) {
        adv_free(p);
        return tp_error(TP_ERR_SHAPE, "the result would have more than %d dims", TP_MAX_DIMS);
    }
    for (int j = 0; j < p->bnd; j++) p->out_sizes[n++] = p->bsizes[j];
    for (int d = p->front ? 0 : p->first; d < s->ndim; d++) {
        if (p->idx[d]) continue;
        if (n == TP_MAX_DIMS) {
            adv_free(p);
            return tp_error(TP_ERR_SHAPE, "the result would have more than %d dims", TP_MAX_DIMS);
        }
        p->out_sizes[n++] = s->sizes[d];
    }
    p->out_nd = n;
    return TP_OK;
}

/* Walk the result positions: for each, the byte offset into self (checking
 * every index against its dim). fn(ctx, k, self_offset) with k the result
 * element in C order. */
typedef void (*adv_visit_fn)(void *ctx, int64_t k, int64_t self_byte_offset);

static tp_status adv_walk(const adv_plan *p, adv_visit_fn fn, void *ctx) {
    const tp_tensor *s = p->self;
    size_t es = tp_dtype_size(s->dtype);
    int64_t bstr[TP_MAX_DIMS][TP_MAX_DIMS];
    for (int d = 0; d < s->ndim; d++)
        if (p->idx[d]) tp__broadcast_strides(p->idx[d], p->idx[d]->ndim, p->bnd, p->bsizes, bstr[d]);
    /* map each result dim to: -1 = a dim of B (position j), else a self dim */
    int map[TP_MAX_DIMS], bpos[TP_MAX_DIMS];
    int n = 0;
    if (!p->front)
        for (int d = 0; d < p->first; d++) map[n++] = d;
    for (int j = 0; j < p->bnd; j++) {
        map[n] = -1;
        bpos[n++] = j;
    }
    for (int d = p->front ? 0 : p->first; d < s->ndim; d++)
        if (!p->idx[d]) map[n++] = d;
    int64_t total = 1;
    for (int i = 0; i < p->out_nd; i++) total *= p->out_sizes[i];
    int64_t at[TP_MAX_DIMS] = {0}, b[TP_MAX_DIMS] = {0};
    for (int64_t k = 0; k < total; k++) {
        int64_t off = 0;
        for (int i = 0; i < p->out_nd; i++) {
            if (map[i] < 0) b[bpos[i]] = at[i];
            else off += at[i] * s->strides[map[i]];
        }
        for (int d = 0; d < s->ndim; d++) {
            if (!p->idx[d]) continue;
            const tp_tensor *ix = p->idx[d];
            int64_t e = 0;
            for (int j = 0; j < p->bnd; j++) e += b[j] * bstr[d][j];
            int64_t v = tp__load_i64(tp__tensor_base(ix) + e * (int64_t)tp_dtype_size(ix->dtype), ix->dtype);
            int64_t size = s->sizes[d];
            TP_CHECK(v >= -size && v < size, TP_ERR_INDEX,
                     "index %" PRId64 " is out of bounds for dimension %d with size %" PRId64, v, d, size);
            off += (v < 0 ? v + size : v) * s->strides[d];
        }
        fn(ctx, k, off * (int64_t)es);
        for (int i = p->out_nd - 1; i >= 0; i--) {
            if (++at[i] < p->out_sizes[i]) break;
            at[i] = 0;
        }
    }
    return TP_OK;
}

/* ---- index(Tensor self, Any indices) ------------------------------------- */

static tp_status infer_index(const tp_value *args, tp_value *out) {
    adv_plan p;
    TP_TRY(adv_build(&args[0], &args[1], &p, NULL));
    adv_free(&p);
    return tp__out_tensor(out, p.self->dtype, p.out_nd, p.out_sizes);
}

typedef struct gather_ctx {
    const char *src;
    char *dst;
    size_t es;
} gather_ctx;

static void gather_one(void *ctx, int64_t k, int64_t off) {
    gather_ctx *g = ctx;
    memcpy(g->dst + k * (int64_t)g->es, g->src + off, g->es);
}

static tp_status kernel_index(const tp_value *args, tp_value *out) {
    adv_plan p;
    TP_TRY(tp__has_data(tp__arg_tensor(args, 0), "self"));
    TP_TRY(adv_build(&args[0], &args[1], &p, NULL));
    for (int d = 0; d < p.self->ndim; d++) {
        tp_status st = tp__has_data(p.idx[d], "indices");
        if (st != TP_OK) {
            adv_free(&p);
            return st;
        }
    }
    tp_tensor *o = tp__out_at(out, 0);
    tp_status st = o && tp_tensor_is_contiguous(o) && o->ndim == p.out_nd &&
                           !memcmp(o->sizes, p.out_sizes, (size_t)p.out_nd * sizeof *o->sizes)
                       ? TP_OK
                       : tp_error(TP_ERR_INTERNAL, "index: the output is not a contiguous tensor of the result's shape");
    if (st == TP_OK) {
        gather_ctx g = {tp__tensor_base(p.self), tp__tensor_base(o), tp_dtype_size(p.self->dtype)};
        st = adv_walk(&p, gather_one, &g);
    }
    adv_free(&p);
    return st;
}

/* ---- index_put(Tensor self, Any indices, Tensor|Scalar values, bool accumulate) */

typedef struct put_ctx {
    char *dst;
    tp_dtype dtype;
    const tp_tensor *values; /* broadcast to the result shape: read through vstr */
    int nd;
    const int64_t *sizes;
    int64_t vstr[TP_MAX_DIMS];
    unsigned char scalar[16]; /* values as one element of dtype, when a scalar */
    bool is_scalar, accumulate, is_float;
} put_ctx;

static void put_one(void *ctx, int64_t k, int64_t off) {
    put_ctx *c = ctx;
    const char *src;
    tp_dtype sdt;
    if (c->is_scalar) {
        src = (const char *)c->scalar;
        sdt = c->dtype;
    } else {
        int64_t e = 0, rem = k;
        for (int i = c->nd - 1; i >= 0; i--) {
            e += (rem % c->sizes[i]) * c->vstr[i];
            rem /= c->sizes[i];
        }
        sdt = c->values->dtype;
        src = tp__tensor_base(c->values) + e * (int64_t)tp_dtype_size(sdt);
    }
    char *dst = c->dst + off;
    if (c->is_float) {
        double v = tp__load_f64(src, sdt);
        tp__store_f64(dst, c->dtype, c->accumulate ? tp__load_f64(dst, c->dtype) + v : v);
    } else if (c->dtype == TP_BOOL) {
        bool v = tp__load_i64(src, sdt) != 0;
        tp__store_i64(dst, c->dtype, (c->accumulate && tp__load_i64(dst, c->dtype)) || v);
    } else {
        int64_t v = tp__load_i64(src, sdt);
        tp__store_i64(dst, c->dtype, c->accumulate ? (int64_t)((uint64_t)tp__load_i64(dst, c->dtype) + (uint64_t)v) : v);
    }
}

/* Checks shared by the shape rule and the kernel: the indices, and values
 * of self's dtype broadcasting to the shape of self[indices] (not known,
 * and not checked, while a mask is only metadata). */
static tp_status put_check(const tp_value *args, adv_plan *p) {
    bool unknown = false;
    TP_TRY(adv_build(&args[0], &args[1], p, &unknown));
    const tp_value *v = &args[2];
    tp_status st = TP_OK;
    if (v->kind == TP_VAL_TENSOR) {
        const tp_tensor *t = v->u.tensor;
        if (t->dtype != p->self->dtype)
            st = tp_error(TP_ERR_TYPE,
                          "index_put requires the source and destination dtypes match, got %s for the destination and "
                          "%s for the source",
                          tp_dtype_name(p->self->dtype), tp_dtype_name(t->dtype));
        int nd;
        int64_t bs[TP_MAX_DIMS];
        if (st == TP_OK && !unknown &&
            (tp__broadcast_shapes(p->out_nd, p->out_sizes, t->ndim, t->sizes, &nd, bs) != TP_OK || nd != p->out_nd ||
             memcmp(bs, p->out_sizes, (size_t)nd * sizeof *bs) != 0)) {
            char a[96], b[96];
            st = tp_error(TP_ERR_SHAPE, "shape mismatch: value tensor of shape %s cannot be broadcast to indexing result of shape %s",
                          tp__shape_str(t->ndim, t->sizes, a, sizeof a), tp__shape_str(p->out_nd, p->out_sizes, b, sizeof b));
        }
    } else if (v->kind != TP_VAL_INT && v->kind != TP_VAL_FLOAT && v->kind != TP_VAL_BOOL) {
        st = tp_error(TP_ERR_TYPE, "values must be a Tensor or a number, not %s", tp_value_kind_name(v->kind));
    }
    if (st != TP_OK) adv_free(p);
    return st;
}

/* Write values into dst (self's layout: same sizes and strides as p->self). */
static tp_status put_run(const tp_value *args, adv_plan *p, tp_tensor *dst) {
    put_ctx c = {.dst = tp__tensor_base(dst), .dtype = dst->dtype, .accumulate = tp__arg_bool(args, 3),
                 .is_float = tp_dtype_is_float(dst->dtype), .nd = p->out_nd, .sizes = p->out_sizes};
    if (args[2].kind == TP_VAL_TENSOR) {
        c.values = args[2].u.tensor;
        TP_TRY(tp__has_data(c.values, "values"));
        tp__broadcast_strides(c.values, c.values->ndim, p->out_nd, p->out_sizes, c.vstr);
    } else {
        c.is_scalar = true;
        TP_TRY(tp__scalar_to_elem(&args[2], dst->dtype, c.scalar));
    }
    /* offsets are computed against p->self's strides: dst shares them */
    return adv_walk(p, put_one, &c);
}

static tp_status infer_index_put(const tp_value *args, tp_value *out) {
    adv_plan p;
    TP_TRY(put_check(args, &p));
    adv_free(&p);
    return tp__out_tensor(out, p.self->dtype, p.self->ndim, p.self->sizes);
}

static tp_status kernel_index_put(const tp_value *args, tp_value *out) {
    TP_TRY(tp__has_data(tp__arg_tensor(args, 0), "self"));
    adv_plan p;
    TP_TRY(put_check(args, &p));
    tp_tensor *o = tp__out_at(out, 0);
    tp_status st = o ? tp_tensor_copy_(o, p.self) : tp_error(TP_ERR_INTERNAL, "index_put: no output");
    if (st == TP_OK) {
        /* walk with the output's strides */
        tp_tensor *self = p.self;
        p.self = o;
        st = put_run(args, &p, o);
        p.self = self;
    }
    adv_free(&p);
    return st;
}

static tp_status infer_index_put_(const tp_value *args, tp_value *out) {
    adv_plan p;
    TP_TRY(put_check(args, &p));
    adv_free(&p);
    return tp_value_copy(&args[0], out);
}

static tp_status kernel_index_put_(const tp_value *args, tp_value *out) {
    TP_TRY(tp__has_data(tp__arg_tensor(args, 0), "self"));
    adv_plan p;
    TP_TRY(put_check(args, &p));
    tp_status st = put_run(args, &p, p.self);
    adv_free(&p);
    if (st != TP_OK) return st;
    tp_value_clear(out);
    return tp_value_copy(&args[0], out);
}

/* ---- nonzero(Tensor self), masked_select(Tensor self, Tensor mask) -------- */

static tp_status count_nonzero_of(const tp_tensor *t, int64_t *n) {
    TP_CHECK(!tp_tensor_is_meta(t), TP_ERR_UNSUPPORTED,
             "the output size depends on the input's values (known only when it runs)");
    int64_t count = 0;
    tp_iter it;
    tp__iter_init(&it, t->ndim, t->sizes, 1, (const tp_tensor *const[]){t});
    bool is_float = tp_dtype_is_float(t->dtype);
    while (tp__iter_next(&it))
        count += is_float ? tp__load_f64(it.ptr[0], t->dtype) != 0 : tp__load_i64(it.ptr[0], t->dtype) != 0;
    *n = count;
    return TP_OK;
}

static tp_status infer_nonzero(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    int64_t n;
    TP_TRY(count_nonzero_of(self, &n));
    int64_t sizes[2] = {n, self->ndim};
    return tp__out_tensor(out, TP_INT64, 2, sizes);
}

static tp_status kernel_nonzero(const tp_value *args, tp_value *out) {
    tp_tensor *self, *o = tp__out_at(out, 0);
    TP_TRY(tp__need_tensor(args, 0, "self", &self));
    TP_TRY(tp__has_data(self, "self"));
    TP_CHECK(o && tp_tensor_is_contiguous(o) && o->dtype == TP_INT64, TP_ERR_INTERNAL, "nonzero: bad output");
    int64_t *dst = (int64_t *)tp__tensor_base(o), k = 0, rows = o->ndim ? o->sizes[0] : 0;
    bool is_float = tp_dtype_is_float(self->dtype);
    tp_iter it;
    tp__iter_init(&it, self->ndim, self->sizes, 1, (const tp_tensor *const[]){self});
    while (tp__iter_next(&it)) {
        bool nz = is_float ? tp__load_f64(it.ptr[0], self->dtype) != 0 : tp__load_i64(it.ptr[0], self->dtype) != 0;
        if (!nz) continue;
        TP_CHECK(k < rows, TP_ERR_INTERNAL, "nonzero: the input changed after its output was sized");
        for (int d = 0; d < self->ndim; d++) dst[k * self->ndim + d] = it.index[d];
        k++;
    }
    return TP_OK;
}

/* self and mask broadcast together; the elements where mask is set, in C order. */
static tp_status masked_select_plan(const tp_value *args, tp_tensor **self, tp_tensor **mask, int *nd, int64_t *sizes) {
    TP_TRY(tp__need_tensor(args, 0, "self", self));
    TP_TRY(tp__need_tensor(args, 1, "mask", mask));
    TP_CHECK((*mask)->dtype == TP_BOOL, TP_ERR_TYPE, "masked_select: expected BoolTensor for mask, got %s",
             tp_dtype_name((*mask)->dtype));
    return tp__broadcast_shapes((*self)->ndim, (*self)->sizes, (*mask)->ndim, (*mask)->sizes, nd, sizes);
}

static tp_status masked_count(const tp_tensor *mask, int nd, const int64_t *sizes, int64_t *n) {
    TP_CHECK(!tp_tensor_is_meta(mask), TP_ERR_UNSUPPORTED,
             "the output size depends on the mask's values (known only when it runs)");
    int64_t count = 0;
    tp_iter it;
    tp__iter_init(&it, nd, sizes, 1, (const tp_tensor *const[]){mask});
    while (tp__iter_next(&it)) count += *(const bool *)it.ptr[0];
    *n = count;
    return TP_OK;
}

static tp_status infer_masked_select(const tp_value *args, tp_value *out) {
    tp_tensor *self, *mask;
    int nd;
    int64_t sizes[TP_MAX_DIMS], n;
    TP_TRY(masked_select_plan(args, &self, &mask, &nd, sizes));
    TP_TRY(masked_count(mask, nd, sizes, &n));
    return tp__out_tensor(out, self->dtype, 1, &n);
}

static tp_status kernel_masked_select(const tp_value *args, tp_value *out) {
    tp_tensor *self, *mask, *o = tp__out_at(out, 0);
    int nd;
    int64_t sizes[TP_MAX_DIMS];
    TP_TRY(masked_select_plan(args, &self, &mask, &nd, sizes));
    TP_TRY(tp__has_data(self, "self"));
    TP_TRY(tp__has_data(mask, "mask"));
    TP_CHECK(o && tp_tensor_is_contiguous(o) && o->dtype == self->dtype, TP_ERR_INTERNAL, "masked_select: bad output");
    size_t es = tp_dtype_size(self->dtype);
    char *dst = tp__tensor_base(o);
    int64_t k = 0, cap = o->ndim ? o->sizes[0] : 0;
    tp_iter it;
    tp__iter_init(&it, nd, sizes, 2, (const tp_tensor *const[]){self, mask});
    while (tp__iter_next(&it)) {
        if (!*(const bool *)it.ptr[1]) continue;
        TP_CHECK(k < cap, TP_ERR_INTERNAL, "masked_select: the mask changed after its output was sized");
        memcpy(dst + k * (int64_t)es, it.ptr[0], es);
        k++;
    }
    return TP_OK;
}

void tp__register_advindex_ops(void) {
    tp__register_op(TP_OP_INDEX, "index(Tensor self, Any indices) -> Tensor", TP_OPF_DATA_DEPENDENT, infer_index,
                    kernel_index);
    tp__register_op(TP_OP_INDEX_PUT,
                    "index_put(Tensor self, Any indices, Tensor|Scalar values, bool accumulate=False) -> Tensor", 0,
                    infer_index_put, kernel_index_put);
    tp__register_op(TP_OP_INDEX_PUT_,
                    "index_put_(Tensor self, Any indices, Tensor|Scalar values, bool accumulate=False) -> Tensor",
                    TP_OPF_INPLACE | TP_OPF_MUTATES, infer_index_put_, kernel_index_put_);
    tp__register_op(TP_OP_NONZERO, "nonzero(Tensor self) -> Tensor", TP_OPF_DATA_DEPENDENT, infer_nonzero,
                    kernel_nonzero);
    tp__register_op(TP_OP_MASKED_SELECT, "masked_select(Tensor self, Tensor mask) -> Tensor", TP_OPF_DATA_DEPENDENT,
                    infer_masked_select, kernel_masked_select);
}
