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
    tp_sdim bdims[TP_MAX_DIMS]; /* B for the shape rule (dim.h) */
    int first, last; /* first and last indexed dim */
    bool front;      /* B goes first (indexed dims not adjacent) */
    int out_nd;
    int64_t out_sizes[TP_MAX_DIMS];
    tp_sdim out_dims[TP_MAX_DIMS];
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
        tp_sdim ix[TP_MAX_DIMS];
        st = tp__dims_broadcast(p->bnd, p->bdims, tp__dims(p->idx[d], ix), ix, &nd, p->bdims);
        if (st != TP_OK) {
            char a[96];
            st = tp_error(TP_ERR_INDEX, "shape mismatch: indexing tensors could not be broadcast together (an index of shape %s)",
                          tp__shape_str(p->idx[d]->ndim, p->idx[d]->sizes, a, sizeof a));
            break;
        }
        p->bnd = nd;
        for (int j = 0; j < nd; j++) p->bsizes[j] = p->bdims[j].v;
    }
    if (st != TP_OK) {
        adv_free(p);
        return st;
    }
    /* output: [before, B, after] or [B, the other dims] */
    int n = 0;
    if (!p->front)
        for (int d = 0; d < p->first; d++) p->out_dims[n++] = tp__dim(s, d);
    if (n + p->bnd > TP_MAX_DIMS) {
        adv_free(p);
        return tp_error(TP_ERR_SHAPE, "the result would have more than %d dims", TP_MAX_DIMS);
    }
    for (int j = 0; j < p->bnd; j++) p->out_dims[n++] = p->bdims[j];
    for (int d = p->front ? 0 : p->first; d < s->ndim; d++) {
        if (p->idx[d]) continue;
        if (n == TP_MAX_DIMS) {
            adv_free(p);
            return tp_error(TP_ERR_SHAPE, "the result would have more than %d dims", TP_MAX_DIMS);
        }
        p->out_dims[n++] = tp__dim(s, d);
    }
    p->out_nd = n;
    for (int i = 0; i < n; i++) p->out_sizes[i] = p->out_dims[i].v;
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
    return tp__out_dims(out, p.self->dtype, p.out_nd, p.out_dims);
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
    return tp__out_like(out, p.self->dtype, p.self);
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

/* ---- _unique2, unique_dim, unique_consecutive, bincount ------------------------
 * Their output sizes depend on the values (TP_OPF_DATA_DEPENDENT): the shape
 * rules run the grouping itself when they have data.
 *
 * The input is read as `rows` slices of `cols` elements: the elements
 * themselves (dim None: cols 1, in C order) or the slices along dim (the
 * other dims in C order). Rows are grouped by equality (== per element:
 * NaN equals nothing, as in PyTorch); unique sorts them (stably,
 * lexicographically, NaN as the largest) and unique_consecutive takes the
 * runs in order. _unique2's sorted=False gives the sorted order too, as
 * PyTorch's CPU kernel does from 2.0 (torch 1.13's hash order is
 * unspecified) and tensorplay's. */

typedef struct uq_rows {
    const tp_tensor *self;
    int64_t rows, cols;
    int64_t *off;   /* rows * cols element offsets of self */
    bool is_float;
    double *f;      /* the values, row-major (floating dtypes) */
    int64_t *i;     /* or as int64 */
    int64_t *perm;  /* rows in group order */
    int64_t *start; /* ngroups + 1 starts of the groups in perm */
    int64_t ngroups;
} uq_rows;

static void uq_free(uq_rows *u) {
    tp_free(u->off);
    tp_free(u->f);
    tp_free(u->i);
    tp_free(u->perm);
    tp_free(u->start);
    memset(u, 0, sizeof *u);
}

/* -1 / 0 / 1: lexicographic order of rows a and b (NaN largest, NaNs tie). */
static int uq_cmp(const uq_rows *u, int64_t a, int64_t b) {
    for (int64_t j = 0; j < u->cols; j++) {
        if (u->is_float) {
            double x = u->f[a * u->cols + j], y = u->f[b * u->cols + j];
            bool nx = isnan(x), ny = isnan(y);
            if (nx || ny) {
                if (nx != ny) return nx ? 1 : -1;
                continue;
            }
            if (x != y) return x < y ? -1 : 1;
        } else {
            int64_t x = u->i[a * u->cols + j], y = u->i[b * u->cols + j];
            if (x != y) return x < y ? -1 : 1;
        }
    }
    return 0;
}

static bool uq_equal(const uq_rows *u, int64_t a, int64_t b) {
    for (int64_t j = 0; j < u->cols; j++) {
        if (u->is_float ? u->f[a * u->cols + j] != u->f[b * u->cols + j] : u->i[a * u->cols + j] != u->i[b * u->cols + j])
            return false;
    }
    return true;
}

static void uq_merge_sort(const uq_rows *u, int64_t *v, int64_t *tmp, int64_t n) {
    if (n < 2) return;
    int64_t h = n / 2;
    uq_merge_sort(u, v, tmp, h);
    uq_merge_sort(u, v + h, tmp, n - h);
    int64_t a = 0, b = h, k = 0;
    while (a < h && b < n) tmp[k++] = uq_cmp(u, v[b], v[a]) < 0 ? v[b++] : v[a++];
    while (a < h) tmp[k++] = v[a++];
    while (b < n) tmp[k++] = v[b++];
    memcpy(v, tmp, (size_t)n * sizeof *v);
}

/* Group self's rows (dim < 0: its elements); sorted or consecutive runs. */
static tp_status uq_group(const tp_tensor *self, int dim, bool consecutive, uq_rows *u) {
    memset(u, 0, sizeof *u);
    u->self = self;
    int64_t numel = tp_tensor_numel(self);
    u->rows = dim < 0 ? numel : self->sizes[dim];
    u->cols = dim < 0 ? 1 : (u->rows ? numel / u->rows : 0);
    u->is_float = tp_dtype_is_float(self->dtype);
    size_t n = (size_t)(numel ? numel : 1), r = (size_t)(u->rows ? u->rows : 1);
    u->off = tp_malloc(n * sizeof *u->off);
    u->perm = tp_malloc(r * sizeof *u->perm);
    u->start = tp_malloc((r + 1) * sizeof *u->start);
    int64_t *tmp = tp_malloc(r * sizeof *tmp);
    if (u->is_float) u->f = tp_malloc(n * sizeof *u->f);
    else u->i = tp_malloc(n * sizeof *u->i);
    if (!u->off || !u->perm || !u->start || !tmp || (u->is_float ? !u->f : !u->i)) {
        tp_free(tmp);
        uq_free(u);
        return tp_error(TP_ERR_NOMEM, "out of memory grouping %" PRId64 " elements", numel);
    }
    /* element offsets: dim first, then the other dims in C order */
    int nd = self->ndim, order[TP_MAX_DIMS], k = 0;
    if (dim >= 0) order[k++] = dim;
    for (int d = 0; d < nd; d++)
        if (d != dim) order[k++] = d;
    int64_t idx[TP_MAX_DIMS] = {0};
    const char *base = tp__tensor_base(self);
    size_t es = tp_dtype_size(self->dtype);
    for (int64_t e = 0; e < numel; e++) {
        int64_t o = 0;
        for (int d = 0; d < nd; d++) o += idx[d] * self->strides[order[d]];
        u->off[e] = o;
        if (u->is_float) u->f[e] = tp__load_f64(base + o * (int64_t)es, self->dtype);
        else u->i[e] = tp__load_i64(base + o * (int64_t)es, self->dtype);
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < self->sizes[order[d]]) break;
            idx[d] = 0;
        }
    }
    for (int64_t q = 0; q < u->rows; q++) u->perm[q] = q;
    if (!consecutive) uq_merge_sort(u, u->perm, tmp, u->rows);
    tp_free(tmp);
    int64_t g = 0;
    for (int64_t q = 0; q < u->rows; q++)
        if (q == 0 || !uq_equal(u, u->perm[q - 1], u->perm[q])) u->start[g++] = q;
    u->start[g] = u->rows;
    u->ngroups = g;
    return TP_OK;
}

/* PyTorch's checks of unique_dim / unique_consecutive(dim=...). */
static tp_status uq_check_dim(const tp_tensor *self, int dim) {
    int zeros = 0;
    for (int d = 0; d < self->ndim; d++) zeros += self->sizes[d] == 0;
    if (self->sizes[dim] == 0)
        TP_CHECK(zeros == 1, TP_ERR_INVALID_ARG,
                 "Number of zero sized dimensions is more than one, so unique cannot be applied ");
    else
        TP_CHECK(zeros == 0, TP_ERR_INVALID_ARG,
                 "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
    return TP_OK;
}

typedef struct uq_call {
    tp_tensor *self;
    int dim; /* -1: None */
    bool consecutive, inverse, counts;
} uq_call;

/* self, dim and the flags of the three ops from their bound arguments. */
static tp_status uq_args(const tp_value *args, tp_op op, uq_call *c) {
    memset(c, 0, sizeof *c);
    TP_TRY(tp__need_tensor(args, 0, "self", &c->self));
    c->dim = -1;
    if (op == TP_OP__UNIQUE2) {
        c->inverse = tp__arg_bool(args, 2);
        c->counts = tp__arg_bool(args, 3);
        return TP_OK;
    }
    int64_t d;
    if (op == TP_OP_UNIQUE_DIM) {
        d = tp__arg_int(args, 1);
    } else {
        c->consecutive = true;
        c->inverse = tp__arg_bool(args, 1);
        c->counts = tp__arg_bool(args, 2);
        if (tp__arg_is_none(args, 3)) return TP_OK;
        d = tp__arg_int(args, 3);
    }
    c->inverse = c->counts = true; /* PyTorch's dim forms give both whatever the flags */
    TP_TRY(tp__wrap_dim(d, c->self->ndim, &c->dim));
    TP_CHECK(c->self->ndim > 0, TP_ERR_INDEX, "dimension specified as %" PRId64 " but tensor has no dimensions", d);
    return uq_check_dim(c->self, c->dim);
}

/* The three output shapes for g groups. */
static tp_status uq_out(const uq_call *c, int64_t g, tp_value *out) {
    TP_TRY(tp__out_tuple(out, 3));
    tp_value *items = out->u.seq.items;
    const tp_tensor *s = c->self;
    int64_t zero = 0;
    if (c->dim >= 0) {
        int64_t sizes[TP_MAX_DIMS];
        memcpy(sizes, s->sizes, sizeof sizes);
        /* an empty dim: the input's shape, empty inverse and counts (PyTorch's early return) */
        bool empty = s->sizes[c->dim] == 0;
        sizes[c->dim] = g;
        TP_TRY(tp__out_tensor(&items[0], s->dtype, s->ndim, sizes));
        TP_TRY(tp__out_tensor(&items[1], TP_INT64, 1, c->inverse && !empty ? &s->sizes[c->dim] : &zero));
        return tp__out_tensor(&items[2], TP_INT64, 1, c->counts && !empty ? &g : &zero);
    }
    TP_TRY(tp__out_tensor(&items[0], s->dtype, 1, &g));
    if (c->inverse) TP_TRY(tp__out_tensor(&items[1], TP_INT64, s->ndim, s->sizes));
    else TP_TRY(tp__out_tensor(&items[1], TP_INT64, 1, &zero));
    return tp__out_tensor(&items[2], TP_INT64, 1, c->counts ? &g : &zero);
}

static tp_status uq_infer(tp_op op, const tp_value *args, tp_value *out) {
    uq_call c;
    TP_TRY(uq_args(args, op, &c));
    TP_CHECK(!tp_tensor_is_meta(c.self), TP_ERR_UNSUPPORTED,
             "the output size depends on the input's values (known only when it runs)");
    uq_rows u;
    TP_TRY(uq_group(c.self, c.dim, c.consecutive, &u));
    int64_t g = u.ngroups;
    uq_free(&u);
    return uq_out(&c, g, out);
}

static tp_status uq_kernel(tp_op op, const tp_value *args, tp_value *out) {
    uq_call c;
    TP_TRY(uq_args(args, op, &c));
    TP_TRY(tp__has_data(c.self, "self"));
    tp_tensor *o[3] = {tp__out_at(out, 0), tp__out_at(out, 1), tp__out_at(out, 2)};
    for (int k = 0; k < 3; k++)
        TP_CHECK(o[k] && tp_tensor_is_contiguous(o[k]), TP_ERR_INTERNAL, "%s: bad output", tp_op_name(op));
    uq_rows u;
    TP_TRY(uq_group(c.self, c.dim, c.consecutive, &u));
    tp_status st = TP_OK;
    if (o[0]->dtype != c.self->dtype || (c.dim < 0 ? tp_tensor_numel(o[0]) : o[0]->sizes[c.dim]) != u.ngroups) {
        st = tp_error(TP_ERR_INTERNAL, "%s: the input changed after its output was sized", tp_op_name(op));
        goto done;
    }
    size_t es = tp_dtype_size(c.self->dtype);
    const char *src = tp__tensor_base(c.self);
    char *dst = tp__tensor_base(o[0]);
    int64_t *inv = (int64_t *)tp__tensor_base(o[1]), *cnt = (int64_t *)tp__tensor_base(o[2]);
    bool want_inv = c.inverse && tp_tensor_numel(o[1]) == u.rows && u.rows > 0;
    bool want_cnt = c.counts && tp_tensor_numel(o[2]) == u.ngroups && u.ngroups > 0;
    /* values: with dim, output element (j before dim, g, j after dim) is
     * element j of group g's row; the row's cols run over the other dims in
     * C order, which is how the output's other dims run too */
    int64_t inner = 1;
    if (c.dim >= 0)
        for (int d = c.dim + 1; d < c.self->ndim; d++) inner *= c.self->sizes[d];
    for (int64_t g = 0; g < u.ngroups; g++) {
        int64_t row = u.perm[u.start[g]];
        for (int64_t j = 0; j < u.cols; j++) {
            int64_t at = c.dim < 0 ? g : ((j / inner) * u.ngroups + g) * inner + j % inner;
            memcpy(dst + at * (int64_t)es, src + u.off[row * u.cols + j] * (int64_t)es, es);
        }
        for (int64_t q = u.start[g]; q < u.start[g + 1]; q++)
            if (want_inv) inv[u.perm[q]] = g;
        if (want_cnt) cnt[g] = u.start[g + 1] - u.start[g];
    }
done:
    uq_free(&u);
    return st;
}

static tp_status infer_unique2(const tp_value *args, tp_value *out) { return uq_infer(TP_OP__UNIQUE2, args, out); }
static tp_status kernel_unique2(const tp_value *args, tp_value *out) { return uq_kernel(TP_OP__UNIQUE2, args, out); }
static tp_status infer_unique_dim(const tp_value *args, tp_value *out) { return uq_infer(TP_OP_UNIQUE_DIM, args, out); }
static tp_status kernel_unique_dim(const tp_value *args, tp_value *out) { return uq_kernel(TP_OP_UNIQUE_DIM, args, out); }
static tp_status infer_unique_consecutive(const tp_value *args, tp_value *out) {
    return uq_infer(TP_OP_UNIQUE_CONSECUTIVE, args, out);
}
static tp_status kernel_unique_consecutive(const tp_value *args, tp_value *out) {
    return uq_kernel(TP_OP_UNIQUE_CONSECUTIVE, args, out);
}

/* bincount(Tensor self, Tensor? weights=None, int minlength=0): PyTorch's
 * checks in its order; int64 counts, or sums in float32 for float32
 * weights and float64 for any other; an empty self gives minlength int64
 * zeros, weights or not (PyTorch's early return). */
static tp_status bincount_plan(const tp_value *args, tp_tensor **self, tp_tensor **w, int64_t *bins, tp_dtype *dt) {
    TP_TRY(tp__need_tensor(args, 0, "self", self));
    *w = tp__arg_tensor(args, 1);
    int64_t minlength = tp__arg_int(args, 2);
    TP_CHECK(minlength >= 0, TP_ERR_INVALID_ARG, "minlength should be >= 0");
    TP_CHECK(tp_dtype_is_int((*self)->dtype), TP_ERR_TYPE, "\"bincount_cpu\" not implemented for '%s'",
             tp_dtype_name((*self)->dtype));
    *dt = TP_INT64;
    *bins = minlength;
    if ((*self)->ndim == 1 && (*self)->sizes[0] == 0) return TP_OK;
    TP_CHECK((*self)->ndim == 1, TP_ERR_SHAPE, "bincount only supports 1-d non-negative integral inputs.");
    TP_CHECK(!tp_tensor_is_meta(*self), TP_ERR_UNSUPPORTED,
             "the output size depends on the input's values (known only when it runs)");
    TP_TRY(tp__has_data(*self, "self"));
    const char *base = tp__tensor_base(*self);
    size_t es = tp_dtype_size((*self)->dtype);
    int64_t lo = INT64_MAX, hi = -1;
    for (int64_t k = 0; k < (*self)->sizes[0]; k++) {
        int64_t v = tp__load_i64(base + k * (*self)->strides[0] * (int64_t)es, (*self)->dtype);
        if (v < lo) lo = v;
        if (v > hi) hi = v;
    }
    TP_CHECK(lo >= 0, TP_ERR_INVALID_ARG, "bincount only supports 1-d non-negative integral inputs.");
    if (*w) {
        TP_CHECK((*w)->ndim == 1 && (*w)->sizes[0] == (*self)->sizes[0], TP_ERR_SHAPE,
                 "weights should be 1-d and have the same length as input");
        *dt = (*w)->dtype == TP_FLOAT32 ? TP_FLOAT32 : TP_FLOAT64;
    }
    if (hi + 1 > *bins) *bins = hi + 1;
    return TP_OK;
}

static tp_status infer_bincount(const tp_value *args, tp_value *out) {
    tp_tensor *self, *w;
    int64_t bins;
    tp_dtype dt;
    TP_TRY(bincount_plan(args, &self, &w, &bins, &dt));
    return tp__out_tensor(out, dt, 1, &bins);
}

static tp_status kernel_bincount(const tp_value *args, tp_value *out) {
    tp_tensor *self, *w, *o = tp__out_at(out, 0);
    int64_t bins;
    tp_dtype dt;
    TP_TRY(bincount_plan(args, &self, &w, &bins, &dt));
    TP_CHECK(o && tp_tensor_is_contiguous(o) && o->dtype == dt && o->ndim == 1 && o->sizes[0] == bins, TP_ERR_INTERNAL,
             "bincount: the input changed after its output was sized");
    char *dst = tp__tensor_base(o);
    size_t os = tp_dtype_size(dt);
    memset(dst, 0, (size_t)bins * os);
    if (self->sizes[0] == 0) return TP_OK;
    if (w) TP_TRY(tp__has_data(w, "weights"));
    const char *sb = tp__tensor_base(self), *wb = w ? tp__tensor_base(w) : NULL;
    size_t es = tp_dtype_size(self->dtype), ws = w ? tp_dtype_size(w->dtype) : 0;
    for (int64_t k = 0; k < self->sizes[0]; k++) {
        int64_t v = tp__load_i64(sb + k * self->strides[0] * (int64_t)es, self->dtype);
        if (!w) {
            ((int64_t *)dst)[v]++;
        } else {
            double x = tp__load_f64(wb + k * w->strides[0] * (int64_t)ws, w->dtype);
            if (dt == TP_FLOAT32) ((float *)dst)[v] += (float)x;
            else ((double *)dst)[v] += x;
        }
    }
    return TP_OK;
}

/* ---- item / is_nonzero: the value of a one-element tensor, as a Python
 * number (float for floating dtypes, int for integers, bool for bool) or
 * truth value. The value exists only when the program runs: on metadata
 * the rule reports TP_ERR_UNSUPPORTED, and programs using them run in the
 * interpreter. */

static tp_status one_element(const tp_value *args, bool truth, tp_tensor **self) {
    const char *what = truth ? "is_nonzero" : "item";
    TP_TRY(tp__need_tensor(args, 0, "self", self));
    int64_t n = tp_tensor_numel(*self);
    if (truth) {
        TP_CHECK(n != 0, TP_ERR_INVALID_ARG, "Boolean value of Tensor with no values is ambiguous");
        TP_CHECK(n == 1, TP_ERR_INVALID_ARG, "Boolean value of Tensor with more than one value is ambiguous");
    } else {
        TP_CHECK(n == 1, TP_ERR_INVALID_ARG, "a Tensor with %" PRId64 " elements cannot be converted to Scalar", n);
    }
    TP_CHECK(!tp_tensor_is_meta(*self), TP_ERR_UNSUPPORTED,
             "%s() reads the tensor's value, which is known only when the program runs", what);
    return TP_OK;
}

static const char *first_elem(const tp_tensor *t) { return (const char *)tp__tensor_base(t); }

static tp_status infer_item(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    TP_TRY(one_element(args, false, &self));
    const char *p = first_elem(self);
    tp_value_clear(out);
    if (tp_dtype_is_float(self->dtype)) *out = tp_value_float(tp__load_f64(p, self->dtype));
    else if (self->dtype == TP_BOOL) *out = tp_value_bool(tp__load_i64(p, self->dtype) != 0);
    else *out = tp_value_int(tp__load_i64(p, self->dtype));
    return TP_OK;
}

static tp_status infer_is_nonzero(const tp_value *args, tp_value *out) {
    tp_tensor *self;
    TP_TRY(one_element(args, true, &self));
    const char *p = first_elem(self);
    bool nz = tp_dtype_is_float(self->dtype) ? tp__load_f64(p, self->dtype) != 0 : tp__load_i64(p, self->dtype) != 0;
    tp_value_clear(out);
    *out = tp_value_bool(nz);
    return TP_OK;
}

/* The kernels compute what the rules compute from the data. */
static tp_status kernel_item(const tp_value *args, tp_value *out) { return infer_item(args, out); }
static tp_status kernel_is_nonzero(const tp_value *args, tp_value *out) { return infer_is_nonzero(args, out); }

/* equal(self, other): the same dtype, the same shape and equal values (NaN
 * unequal), as tensorplay answers; a Python bool known when it runs. */
static tp_status infer_equal(const tp_value *args, tp_value *out) {
    tp_tensor *a, *b;
    TP_TRY(tp__need_tensor(args, 0, "self", &a));
    TP_TRY(tp__need_tensor(args, 1, "other", &b));
    TP_CHECK(!tp_tensor_is_meta(a) && !tp_tensor_is_meta(b), TP_ERR_UNSUPPORTED,
             "equal() reads the tensors' values, which are known only when the program runs");
    bool same = a->dtype == b->dtype && a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim; d++) same = a->sizes[d] == b->sizes[d];
    if (same && tp_tensor_numel(a) > 0) {
        tp_iter it;
        tp__iter_init(&it, a->ndim, a->sizes, 2, (const tp_tensor *const[]){a, b});
        bool is_float = tp_dtype_is_float(a->dtype);
        while (same && tp__iter_next(&it))
            same = is_float ? tp__load_f64(it.ptr[0], a->dtype) == tp__load_f64(it.ptr[1], b->dtype)
                            : tp__load_i64(it.ptr[0], a->dtype) == tp__load_i64(it.ptr[1], b->dtype);
    }
    tp_value_clear(out);
    *out = tp_value_bool(same);
    return TP_OK;
}

static tp_status kernel_equal(const tp_value *args, tp_value *out) { return infer_equal(args, out); }

void tp__register_advindex_ops(void) {
    tp__register_op(TP_OP_ITEM, "item(Tensor self) -> Any", TP_OPF_DATA_DEPENDENT, infer_item, kernel_item);
    tp__register_op(TP_OP_EQUAL, "equal(Tensor self, Tensor other) -> Any", TP_OPF_DATA_DEPENDENT, infer_equal,
                    kernel_equal);
    tp__register_op(TP_OP_IS_NONZERO, "is_nonzero(Tensor self) -> Any", TP_OPF_DATA_DEPENDENT, infer_is_nonzero,
                    kernel_is_nonzero);
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
    tp__register_op(TP_OP__UNIQUE2,
                    "_unique2(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False) -> "
                    "(Tensor, Tensor, Tensor)",
                    TP_OPF_DATA_DEPENDENT, infer_unique2, kernel_unique2);
    tp__register_op(TP_OP_UNIQUE_DIM,
                    "unique_dim(Tensor self, int dim, bool sorted=True, bool return_inverse=False, bool "
                    "return_counts=False) -> (Tensor, Tensor, Tensor)",
                    TP_OPF_DATA_DEPENDENT, infer_unique_dim, kernel_unique_dim);
    tp__register_op(TP_OP_UNIQUE_CONSECUTIVE,
                    "unique_consecutive(Tensor self, bool return_inverse=False, bool return_counts=False, int? "
                    "dim=None) -> (Tensor, Tensor, Tensor)",
                    TP_OPF_DATA_DEPENDENT, infer_unique_consecutive, kernel_unique_consecutive);
    tp__register_op(TP_OP_BINCOUNT, "bincount(Tensor self, Tensor? weights=None, int minlength=0) -> Tensor",
                    TP_OPF_DATA_DEPENDENT, infer_bincount, kernel_bincount);
}
