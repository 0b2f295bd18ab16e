/*
 * symshape.c - symbolic shape propagation through an exported graph: every
 * node's output gets a symbolic shape (symdim.h expressions over the
 * dynamic dims of the user inputs) computed by a per-op symbolic shape
 * rule, and the relations the rules need (broadcast equality, matmul inner
 * dims, reshape divisibility, conv/pool output sizes >= 1, slice bounds,
 * cat sizes, ...) are decided by the symdim constraint store; the caller
 * turns the resulting findings into violations / suggested fixes / program
 * constraints (shapes.c). A node whose op has no symbolic rule while one of
 * its inputs has a symbolic dim gets an unknown shape and is counted as a
 * fallback: the caller then runs the replay check for the whole graph.
 * Each node gets meta "sym_shape" (e.g. "[s0, 3, (s1 - 1)//2 + 1]").
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/dim.h"
#include "export_impl.h"
#include "symshape.h"

/* With TP_SYMSHAPE_TRACE set in the environment, export lists on stderr
 * which rule gave each symbolic node its shape: "op" (the op's own shape
 * rule over tp_sdim, src/ops/dim.h) or "table" (apply_rule below, being
 * retired). A developer aid; read once per propagation. */
#define SYM_TRACE(kind, op) (P.trace ? fprintf(stderr, "symshape %s %s\n", kind, tp_op_name(op)) : 0)

/* SV_INT: an int value (sym_size & co.): its expression in d[0]. */
enum { SV_OTHER, SV_TENSOR, SV_SEQ, SV_UNKNOWN, SV_INT };

typedef struct sval {
    int kind;
    int nd;
    sd_e d[TP_MAX_DIMS];
    int n;
    struct sval *items;
} sval;

typedef struct prop {
    sd_ctx *sd;
    const tp_graph *g;
    tp_node **keys;
    sval **vals;
    size_t cap;
    void **allocs;
    int n_allocs, cap_allocs;
    sym_decided_fn cb;
    void *user;
    bool oom;
    bool trace; /* TP_SYMSHAPE_TRACE */
} prop;

/* ---- node -> sval map -------------------------------------------------------------- */

static size_t hash_ptr(const void *p, size_t cap) { return ((uintptr_t)p >> 4) * 2654435761u & (cap - 1); }

static void map_put(prop *P, tp_node *n, sval *v) {
    size_t i = hash_ptr(n, P->cap);
    while (P->keys[i] && P->keys[i] != n) i = (i + 1) & (P->cap - 1);
    P->keys[i] = n;
    P->vals[i] = v;
}

static sval *map_get(const prop *P, const tp_node *n) {
    size_t i = hash_ptr(n, P->cap);
    while (P->keys[i]) {
        if (P->keys[i] == n) return P->vals[i];
        i = (i + 1) & (P->cap - 1);
    }
    return NULL;
}

static void *palloc(prop *P, size_t size) {
    if (P->n_allocs == P->cap_allocs) {
        int nc = P->cap_allocs ? P->cap_allocs * 2 : 64;
        void **a = tp_realloc(P->allocs, (size_t)nc * sizeof *a);
        if (!a) {
            P->oom = true;
            return NULL;
        }
        P->allocs = a;
        P->cap_allocs = nc;
    }
    void *p = tp_calloc(1, size ? size : 1);
    if (!p) {
        P->oom = true;
        return NULL;
    }
    P->allocs[P->n_allocs++] = p;
    return p;
}

static sval *new_sval(prop *P, int kind) {
    sval *v = palloc(P, sizeof *v);
    if (v) v->kind = kind;
    return v;
}

/* An sval with the structure of a meta value, constant dims. */
static sval *sval_from_meta(prop *P, const tp_value *m) {
    if (!m) return new_sval(P, SV_OTHER);
    if (m->kind == TP_VAL_INT) {
        sval *v = new_sval(P, SV_INT);
        if (v) v->d[0] = sd_const(P->sd, m->u.i);
        return v;
    }
    if (m->kind == TP_VAL_TENSOR) {
        sval *v = new_sval(P, SV_TENSOR);
        if (!v) return NULL;
        v->nd = tp_tensor_ndim(m->u.tensor);
        for (int i = 0; i < v->nd; i++) v->d[i] = sd_const(P->sd, tp_tensor_sizes(m->u.tensor)[i]);
        return v;
    }
    if (m->kind == TP_VAL_LIST || m->kind == TP_VAL_TUPLE) {
        sval *v = new_sval(P, SV_SEQ);
        if (!v) return NULL;
        v->n = (int)m->u.seq.n;
        v->items = palloc(P, (size_t)v->n * sizeof *v->items);
        if (!v->items) return NULL;
        for (int i = 0; i < v->n; i++) {
            sval *it = sval_from_meta(P, &m->u.seq.items[i]);
            if (!it) return NULL;
            v->items[i] = *it;
        }
        return v;
    }
    return new_sval(P, SV_OTHER);
}

static bool sval_symbolic(const sval *v) {
    if (!v) return false;
    if (v->kind == SV_UNKNOWN) return true;
    if (v->kind == SV_INT) return !sd_is_const(v->d[0], NULL);
    if (v->kind == SV_TENSOR) {
        for (int i = 0; i < v->nd; i++)
            if (!sd_is_const(v->d[i], NULL)) return true;
    }
    if (v->kind == SV_SEQ)
        for (int i = 0; i < v->n; i++)
            if (sval_symbolic(&v->items[i])) return true;
    return false;
}

static bool sval_unknown(const sval *v) {
    if (!v) return false;
    if (v->kind == SV_UNKNOWN) return true;
    if (v->kind == SV_INT) return !v->d[0];
    if (v->kind == SV_TENSOR)
        for (int i = 0; i < v->nd; i++)
            if (!v->d[i]) return true;
    if (v->kind == SV_SEQ)
        for (int i = 0; i < v->n; i++)
            if (sval_unknown(&v->items[i])) return true;
    return false;
}

/* sval of an argument value (node refs, lists of node refs). */
static sval *arg_sval(prop *P, const tp_value *a) {
    if (a->kind == TP_VAL_NODE) return map_get(P, a->u.node);
    if (a->kind == TP_VAL_LIST || a->kind == TP_VAL_TUPLE) {
        bool any = false;
        for (int64_t i = 0; i < a->u.seq.n; i++) any = any || a->u.seq.items[i].kind == TP_VAL_NODE;
        if (!any) return NULL;
        sval *v = new_sval(P, SV_SEQ);
        if (!v) return NULL;
        v->n = (int)a->u.seq.n;
        v->items = palloc(P, (size_t)v->n * sizeof *v->items);
        if (!v->items) return NULL;
        for (int i = 0; i < v->n; i++) {
            sval *it = arg_sval(P, &a->u.seq.items[i]);
            if (it) v->items[i] = *it;
            else v->items[i].kind = SV_OTHER;
        }
        return v;
    }
    return NULL;
}

/* ---- rule context -------------------------------------------------------------------- */

typedef struct rctx {
    prop *P;
    sd_ctx *sd;
    const tp_node *node;
    tp_op op;
    const tp_value *b; /* bound args */
    int nb;
    bool fail;
    tp_sym_env *env; /* while the op's own rule runs (op_rule) */
} rctx;

static void decided(rctx *r, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void decided(rctx *r, int rc, const char *fmt, ...) {
    if (rc != SD_OK) {
        r->fail = true;
        return;
    }
    const sd_finding *f;
    int n = sd_take_findings(r->sd, &f);
    if (n == 0) {
        return;
    }
    /* put them back for the callback */
    char why[1024];
    int k = snprintf(why, sizeof why, "%s (%s): ", tp_node_name(r->node), tp_op_name(r->op));
    va_list ap;
    va_start(ap, fmt);
    if (k > 0 && (size_t)k < sizeof why) vsnprintf(why + k, sizeof why - (size_t)k, fmt, ap);
    va_end(ap);
    r->P->cb(r->P->user, why, f, n);
}

static const char *ex(rctx *r, sd_e e, char *buf, size_t size) {
    sd_print(r->sd, e, buf, size);
    return buf;
}

static void req_eq(rctx *r, sd_e a, sd_e b, const char *what) {
    if (!a || !b) {
        r->fail = true;
        return;
    }
    char x[200], y[200];
    int rc = sd_require_eq(r->sd, a, b);
    decided(r, rc, "%s: %s == %s", what, ex(r, a, x, sizeof x), ex(r, b, y, sizeof y));
}

static void req_div(rctx *r, sd_e a, int64_t k, const char *what) {
    if (!a) {
        r->fail = true;
        return;
    }
    char x[200];
    int rc = sd_require_div(r->sd, a, k);
    decided(r, rc, "%s: %s must be divisible by %" PRId64, what, ex(r, a, x, sizeof x), k);
}

static void req_ge(rctx *r, sd_e a, int64_t k, const char *what) {
    if (!a) {
        r->fail = true;
        return;
    }
    char x[200];
    int rc = sd_require_ge(r->sd, a, k);
    decided(r, rc, "%s: %s >= %" PRId64, what, ex(r, a, x, sizeof x), k);
}

static sd_e S(rctx *r, sd_e e) { return sd_subst(r->sd, e); }
static sd_e K(rctx *r, int64_t v) { return sd_const(r->sd, v); }

static int64_t exv(rctx *r, sd_e e) {
    int64_t v = 0;
    if (!sd_eval(r->sd, e, NULL, &v)) r->fail = true;
    return v;
}

static const sval *targ(rctx *r, int i) {
    if (i >= r->nb || r->b[i].kind != TP_VAL_NODE) return NULL;
    const sval *v = map_get(r->P, r->b[i].u.node);
    return v && v->kind == SV_TENSOR ? v : NULL;
}

static const sval *need_t(rctx *r, int i) {
    const sval *v = targ(r, i);
    if (!v) r->fail = true;
    return v;
}

static bool is_none(rctx *r, int i) { return i >= r->nb || r->b[i].kind == TP_VAL_NONE; }

static int64_t iarg(rctx *r, int i, int64_t dflt) {
    if (i >= r->nb || !tp_value_is_number(&r->b[i])) return dflt;
    return tp_value_as_i64(&r->b[i]);
}

static bool barg(rctx *r, int i, bool dflt) {
    if (i >= r->nb) return dflt;
    if (r->b[i].kind == TP_VAL_BOOL) return r->b[i].u.b;
    if (r->b[i].kind == TP_VAL_INT) return r->b[i].u.i != 0;
    return dflt;
}

/* Int list argument (a single int counts as [v]); -1 for None / not ints. */
static int ilist(rctx *r, int i, int64_t *out, int max) {
    if (i >= r->nb) return -1;
    const tp_value *v = &r->b[i];
    if (v->kind == TP_VAL_INT) {
        out[0] = v->u.i;
        return 1;
    }
    if (v->kind != TP_VAL_LIST && v->kind != TP_VAL_TUPLE) return -1;
    if (v->u.seq.n > max) return -1;
    for (int64_t k = 0; k < v->u.seq.n; k++) {
        if (v->u.seq.items[k].kind != TP_VAL_INT) return -1;
        out[k] = v->u.seq.items[k].u.i;
    }
    return (int)v->u.seq.n;
}

/* Expand a 1-element list to n. */
static bool expand_list(int64_t *v, int got, int n) {
    if (got == n) return true;
    if (got == 1) {
        for (int i = 1; i < n; i++) v[i] = v[0];
        return true;
    }
    return false;
}

static int wrap_dim(rctx *r, int64_t d, int nd) {
    int n = nd > 0 ? nd : 1;
    if (d < 0) d += n;
    if (d < 0 || d >= n) {
        r->fail = true;
        return 0;
    }
    return (int)d;
}

static sval *out_t(rctx *r, int nd) {
    sval *v = new_sval(r->P, SV_TENSOR);
    if (!v) {
        r->fail = true;
        return NULL;
    }
    v->nd = nd;
    return v;
}

static sval *copy_t(rctx *r, const sval *a) {
    if (!a) return NULL;
    sval *v = out_t(r, a->nd);
    if (!v) return NULL;
    for (int i = 0; i < a->nd; i++) v->d[i] = S(r, a->d[i]);
    return v;
}

/* Broadcast two dims. */
static sd_e bdim(rctx *r, sd_e a, sd_e b) {
    if (!a) return b;
    if (!b) return a;
    a = S(r, a);
    b = S(r, b);
    if (sd_equal(a, b)) return a;
    int64_t ca, cb;
    if (sd_is_const(a, &ca) && ca == 1) return b;
    if (sd_is_const(b, &cb) && cb == 1) return a;
    char x[200], y[200], what[480];
    snprintf(what, sizeof what, "broadcasting %s against %s", ex(r, a, x, sizeof x), ex(r, b, y, sizeof y));
    if (exv(r, a) == 1) {
        req_eq(r, a, K(r, 1), what);
        return S(r, b);
    }
    if (exv(r, b) == 1) {
        req_eq(r, b, K(r, 1), what);
        return S(r, a);
    }
    req_eq(r, a, b, what);
    return S(r, a);
}

/* Broadcast the tensor args idx[0..n). */
static sval *broadcast(rctx *r, const int *idx, int n) {
    int nd = 0;
    for (int k = 0; k < n; k++) {
        const sval *a = targ(r, idx[k]);
        if (a && a->nd > nd) nd = a->nd;
    }
    sval *o = out_t(r, nd);
    if (!o) return NULL;
    for (int i = 0; i < nd; i++) {
        sd_e d = NULL;
        for (int k = 0; k < n; k++) {
            const sval *a = targ(r, idx[k]);
            if (!a) continue;
            int j = i - (nd - a->nd);
            if (j < 0) continue;
            d = bdim(r, d, a->d[j]);
        }
        o->d[i] = d ? d : K(r, 1);
    }
    return o;
}

/* Losses: with reduction 'none' (or ATen's 0) the broadcast shape of the
 * tensor operands idx, else a 0-d result. */
static sval *rule_loss(rctx *r, int red_at, const int *idx, int n) {
    bool none = false;
    if (red_at < r->nb) {
        const tp_value *v = &r->b[red_at];
        none = (v->kind == TP_VAL_STR && !strcmp(v->u.s, "none")) || (v->kind == TP_VAL_INT && v->u.i == 0);
    }
    return none ? broadcast(r, idx, n) : out_t(r, 0);
}

/* ---- families -------------------------------------------------------------------------- */

/* matmul of a [..., n, k] by b [..., k, p] (1-D handled as in PyTorch). */
static sval *matmul_shape(rctx *r, const sval *a, const sval *b, bool batch_bcast) {
    if (!a || !b || a->nd < 1 || b->nd < 1) {
        r->fail = true;
        return NULL;
    }
    sd_e ak = a->d[a->nd - 1], bk = b->d[b->nd >= 2 ? b->nd - 2 : 0];
    req_eq(r, ak, bk, "matrix inner dims");
    int abatch = a->nd >= 2 ? a->nd - 2 : 0, bbatch = b->nd >= 2 ? b->nd - 2 : 0;
    int nbatch = abatch > bbatch ? abatch : bbatch;
    sval *o = out_t(r, 0);
    if (!o) return NULL;
    for (int i = 0; i < nbatch; i++) {
        int ia = i - (nbatch - abatch), ib = i - (nbatch - bbatch);
        sd_e da = ia >= 0 ? a->d[ia] : NULL, db = ib >= 0 ? b->d[ib] : NULL;
        if (batch_bcast) o->d[o->nd++] = bdim(r, da, db);
        else {
            if (da && db) req_eq(r, da, db, "batch dims");
            o->d[o->nd++] = S(r, da ? da : db);
        }
    }
    if (a->nd >= 2) o->d[o->nd++] = S(r, a->d[a->nd - 2]);
    if (b->nd >= 2) o->d[o->nd++] = S(r, b->d[b->nd - 1]);
    return o;
}

/* out must equal the broadcast of `self` into `shape` (addmm / baddbmm / in-place). */
static void bcast_into(rctx *r, const sval *self, sval *shape, const char *what) {
    if (!self || !shape) return;
    if (self->nd > shape->nd) {
        r->fail = true;
        return;
    }
    for (int i = 0; i < self->nd; i++) {
        int j = i + shape->nd - self->nd;
        sd_e d = S(r, self->d[i]);
        int64_t c;
        if (sd_is_const(d, &c) && c == 1) continue;
        if (exv(r, d) == 1 && exv(r, shape->d[j]) != 1) {
            req_eq(r, d, K(r, 1), what);
            continue;
        }
        req_eq(r, d, shape->d[j], what);
        shape->d[j] = S(r, shape->d[j]);
    }
}

static sval *rule_conv(rctx *r, bool transposed, int stride_i, int pad_i, int dil_i, int opad_i, int groups_i) {
    const sval *x = need_t(r, 0), *w = need_t(r, 1);
    if (!x || !w) return NULL;
    int sp = w->nd - 2;
    if (sp < 1 || (x->nd != sp + 2 && x->nd != sp + 1)) {
        r->fail = true;
        return NULL;
    }
    int64_t k[TP_MAX_DIMS], st[TP_MAX_DIMS], pd[TP_MAX_DIMS], dl[TP_MAX_DIMS], op[TP_MAX_DIMS];
    for (int i = 0; i < sp; i++) {
        if (!sd_is_const(S(r, w->d[2 + i]), &k[i])) r->fail = true;
        op[i] = 0;
    }
    bool same = false;
    int n;
    if ((n = ilist(r, stride_i, st, TP_MAX_DIMS)) < 0 || !expand_list(st, n, sp)) r->fail = true;
    if (r->b[pad_i].kind == TP_VAL_STR) {
        same = strcmp(r->b[pad_i].u.s, "same") == 0;
        for (int i = 0; i < sp; i++) pd[i] = 0;
    } else if ((n = ilist(r, pad_i, pd, TP_MAX_DIMS)) < 0 || !expand_list(pd, n, sp)) r->fail = true;
    if ((n = ilist(r, dil_i, dl, TP_MAX_DIMS)) < 0 || !expand_list(dl, n, sp)) r->fail = true;
    if (opad_i >= 0 && ((n = ilist(r, opad_i, op, TP_MAX_DIMS)) < 0 || !expand_list(op, n, sp))) r->fail = true;
    int64_t groups = iarg(r, groups_i, 1);
    if (r->fail || groups < 1) {
        r->fail = true;
        return NULL;
    }
    int lead = x->nd - sp - 1; /* 1 batched, 0 unbatched */
    sval *o = out_t(r, x->nd);
    if (!o) return NULL;
    if (lead) o->d[0] = S(r, x->d[0]);
    sd_e c = x->d[lead];
    if (!transposed) {
        req_eq(r, c, sd_mulk(r->sd, w->d[1], groups), "input channels == weight.shape[1] * groups");
        o->d[lead] = S(r, w->d[0]);
    } else {
        req_eq(r, c, w->d[0], "input channels == weight.shape[0]");
        o->d[lead] = S(r, sd_mulk(r->sd, w->d[1], groups));
    }
    for (int i = 0; i < sp; i++) {
        sd_e in = S(r, x->d[lead + 1 + i]), out;
        if (st[i] < 1) {
            r->fail = true;
            return NULL;
        }
        if (same) out = in;
        else if (!transposed)
            out = sd_addk(r->sd, sd_floordiv(r->sd, sd_addk(r->sd, in, 2 * pd[i] - dl[i] * (k[i] - 1) - 1), st[i]), 1);
        else
            out = sd_addk(r->sd, sd_mulk(r->sd, sd_addk(r->sd, in, -1), st[i]),
                          -2 * pd[i] + dl[i] * (k[i] - 1) + op[i] + 1);
        char what[64];
        snprintf(what, sizeof what, "output size of spatial dim %d", i);
        req_ge(r, out, 1, what);
        o->d[lead + 1 + i] = S(r, out);
    }
    return o;
}

static sval *rule_pool(rctx *r, int sp, bool is_max, const tp_value *meta) {
    const sval *x = need_t(r, 0);
    if (!x || (x->nd != sp + 1 && x->nd != sp + 2)) {
        r->fail = true;
        return NULL;
    }
    int64_t k[TP_MAX_DIMS], st[TP_MAX_DIMS], pd[TP_MAX_DIMS], dl[TP_MAX_DIMS];
    int n;
    if ((n = ilist(r, 1, k, TP_MAX_DIMS)) < 0 || !expand_list(k, n, sp)) r->fail = true;
    n = ilist(r, 2, st, TP_MAX_DIMS);
    if (n == 0) memcpy(st, k, sizeof st);
    else if (n < 0 || !expand_list(st, n, sp)) r->fail = true;
    if ((n = ilist(r, 3, pd, TP_MAX_DIMS)) < 0 || !expand_list(pd, n, sp)) r->fail = true;
    for (int i = 0; i < sp; i++) dl[i] = 1;
    if (is_max && ((n = ilist(r, 4, dl, TP_MAX_DIMS)) < 0 || !expand_list(dl, n, sp))) r->fail = true;
    bool ceil_mode = barg(r, is_max ? 5 : 4, false);
    if (r->fail) return NULL;
    sval *o = copy_t(r, x);
    if (!o) return NULL;
    for (int i = 0; i < sp; i++) {
        int j = x->nd - sp + i;
        sd_e in = S(r, x->d[j]);
        if (sd_is_const(in, NULL)) { /* the example's output size */
            if (!meta || meta->kind != TP_VAL_TENSOR || tp_tensor_ndim(meta->u.tensor) != x->nd) {
                r->fail = true;
                return NULL;
            }
            o->d[j] = K(r, tp_tensor_sizes(meta->u.tensor)[j]);
            continue;
        }
        if (ceil_mode || st[i] < 1) {
            r->fail = true; /* ceil mode's last-window rule is not affine */
            return NULL;
        }
        sd_e out = sd_addk(r->sd, sd_floordiv(r->sd, sd_addk(r->sd, in, 2 * pd[i] - dl[i] * (k[i] - 1) - 1), st[i]), 1);
        char what[64];
        snprintf(what, sizeof what, "output size of spatial dim %d", i);
        req_ge(r, out, 1, what);
        o->d[j] = S(r, out);
    }
    return o;
}

static sval *seq_of(rctx *r, int n, const sval *proto) {
    sval *t = new_sval(r->P, SV_SEQ);
    if (!t) return NULL;
    t->n = n;
    t->items = palloc(r->P, (size_t)(n > 0 ? n : 1) * sizeof *t->items);
    if (!t->items) return NULL;
    for (int i = 0; i < n; i++) t->items[i] = *proto;
    return t;
}

static sval *rule_interpolate(rctx *r) {
    const sval *a = need_t(r, 0);
    if (!a || a->nd < 3) {
        r->fail = true;
        return NULL;
    }
    int sp = a->nd - 2;
    sval *o = copy_t(r, a);
    if (!o) return NULL;
    int64_t sz[TP_MAX_DIMS];
    int n = ilist(r, 1, sz, TP_MAX_DIMS);
    if (n > 0) {
        if (!expand_list(sz, n, sp)) r->fail = true;
        for (int i = 0; i < sp && !r->fail; i++) o->d[2 + i] = K(r, sz[i]);
        return o;
    }
    double sc[TP_MAX_DIMS];
    const tp_value *v = r->nb > 2 ? &r->b[2] : NULL;
    if (v && tp_value_is_number(v)) {
        for (int i = 0; i < sp; i++) sc[i] = tp_value_as_f64(v);
    } else if (v && tp_value_is_seq(v) && tp_value_len(v) == sp) {
        for (int i = 0; i < sp; i++) sc[i] = tp_value_as_f64(tp_value_at(v, i));
    } else {
        r->fail = true;
        return NULL;
    }
    for (int i = 0; i < sp; i++) {
        /* floor(in * scale) with scale = p/q */
        int64_t q = 0, p = 0;
        for (int64_t qq = 1; qq <= 1000 && !q; qq++) {
            double pp = sc[i] * (double)qq;
            if (fabs(pp - round(pp)) < 1e-9 && pp > 0 && pp < 1e9) {
                q = qq;
                p = (int64_t)round(pp);
            }
        }
        sd_e in = S(r, a->d[2 + i]);
        if (!q) {
            req_eq(r, in, K(r, exv(r, in)), "non-rational scale factor");
            continue;
        }
        o->d[2 + i] = sd_floordiv(r->sd, sd_mulk(r->sd, in, p), q);
    }
    return o;
}

static sval *rule_sdpa(rctx *r) {
    const sval *q = need_t(r, 0), *k = need_t(r, 1), *v = need_t(r, 2);
    if (!q || !k || !v || q->nd < 2 || k->nd < 2 || v->nd < 2) {
        r->fail = true;
        return NULL;
    }
    req_eq(r, q->d[q->nd - 1], k->d[k->nd - 1], "query and key embedding dims");
    req_eq(r, k->d[k->nd - 2], v->d[v->nd - 2], "key and value sequence lengths");
    int idx[3] = {0, 1, 2};
    (void)idx;
    int nb = q->nd - 2;
    if (k->nd - 2 > nb) nb = k->nd - 2;
    if (v->nd - 2 > nb) nb = v->nd - 2;
    sval *o = out_t(r, nb + 2);
    if (!o) return NULL;
    for (int i = 0; i < nb; i++) {
        sd_e d = NULL;
        const sval *all[3] = {q, k, v};
        for (int t = 0; t < 3; t++) {
            int j = i - (nb - (all[t]->nd - 2));
            if (j >= 0) d = bdim(r, d, all[t]->d[j]);
        }
        o->d[i] = d;
    }
    o->d[nb] = S(r, q->d[q->nd - 2]);
    o->d[nb + 1] = S(r, v->d[v->nd - 1]);
    const sval *m = targ(r, 3);
    if (m) {
        /* the mask broadcasts to [..., L, S] */
        sval scores = *o;
        scores.d[nb + 1] = S(r, k->d[k->nd - 2]);
        for (int i = 0; i < m->nd && i < scores.nd; i++) {
            int j = scores.nd - m->nd + i;
            if (j >= 0) bdim(r, m->d[i], scores.d[j]);
        }
    }
    return o;
}

/* ---- dispatch ----------------------------------------------------------------------------- */

/* Linear solves: the broadcast batch dims of b and a, then m's matrix dims. */
static sval *solve_shape(rctx *r, const sval *b, const sval *a, const sval *m) {
    if (!b || !a || b->nd < 2 || a->nd < 2) {
        r->fail = true;
        return NULL;
    }
    int nbb = b->nd - 2, nba = a->nd - 2, n = nbb > nba ? nbb : nba;
    sval *o = out_t(r, n + 2);
    if (!o) return NULL;
    for (int i = 0; i < n; i++) {
        int ib = i - (n - nbb), ia = i - (n - nba);
        o->d[i] = bdim(r, ib >= 0 ? b->d[ib] : NULL, ia >= 0 ? a->d[ia] : NULL);
    }
    o->d[n] = S(r, m->d[m->nd - 2]);
    o->d[n + 1] = S(r, m->d[m->nd - 1]);
    return o;
}

/* ---- the ops' own shape rules, run over symbolic dims (src/ops/dim.h) ---------------- */

static void env_decided(void *user, int rc, const char *what) { decided(user, rc, "%s", what); }

static void *env_alloc(void *user, size_t size) { return palloc(((rctx *)user)->P, size); }

/* A bound argument as the op's shape rule takes it: node references become
 * meta tensors with the node's example sizes and its symbolic dims (lists
 * and tuples of them too); false when the value cannot be given. */
static bool rule_arg(rctx *r, const tp_value *meta, const sval *sv, tp_value *out) {
    if (meta->kind == TP_VAL_TENSOR && sv->kind == SV_TENSOR) {
        const tp_tensor *m = meta->u.tensor;
        int nd = tp_tensor_ndim(m);
        if (sv->nd != nd) return false;
        tp_tensor *t;
        if (tp_tensor_meta(tp_tensor_dtype(m), nd, tp_tensor_sizes(m), &t) != TP_OK) return false;
        sd_e *sym = palloc(r->P, (size_t)(nd > 0 ? nd : 1) * sizeof *sym);
        if (!sym) {
            tp_tensor_free(t);
            return false;
        }
        for (int i = 0; i < nd; i++) {
            if (!sv->d[i]) {
                tp_tensor_free(t);
                return false;
            }
            sym[i] = S(r, sv->d[i]);
        }
        tp__tensor_set_sym(t, sym);
        *out = tp_value_tensor(t);
        return true;
    }
    if ((meta->kind == TP_VAL_LIST || meta->kind == TP_VAL_TUPLE) && sv->kind == SV_SEQ && sv->n == meta->u.seq.n) {
        if ((meta->kind == TP_VAL_LIST ? tp_value_list(sv->n, out) : tp_value_tuple(sv->n, out)) != TP_OK) return false;
        for (int i = 0; i < sv->n; i++)
            if (!rule_arg(r, &meta->u.seq.items[i], &sv->items[i], &out->u.seq.items[i])) return false;
        return true;
    }
    if (meta->kind == TP_VAL_INT && sv->kind == SV_INT) {
        int64_t c;
        if (!sv->d[0]) return false;
        sd_e e = S(r, sv->d[0]);
        if (sd_is_const(e, &c)) {
            *out = tp_value_int(c);
            return true;
        }
        /* a symbolic int: the example's value, its expression beside it */
        tp_sym_env *env = r->env;
        if (env->n_ints == (int)(sizeof env->ints / sizeof env->ints[0])) return false;
        *out = tp_value_int(meta->u.i);
        env->ints[env->n_ints].slot = out;
        env->ints[env->n_ints].e = e;
        env->ints[env->n_ints].read = false;
        env->n_ints++;
        return true;
    }
    return false;
}

static bool rule_args(rctx *r, const tp_value *b, tp_value *out) {
    if (b->kind == TP_VAL_NODE) {
        const sval *sv = map_get(r->P, b->u.node);
        const tp_value *meta = tp_node_meta_val(b->u.node);
        return sv && meta && rule_arg(r, meta, sv, out);
    }
    if (b->kind == TP_VAL_LIST || b->kind == TP_VAL_TUPLE) {
        bool nodes = false;
        for (int64_t i = 0; i < b->u.seq.n; i++) nodes = nodes || b->u.seq.items[i].kind != TP_VAL_INT;
        if (nodes) {
            if ((b->kind == TP_VAL_LIST ? tp_value_list(b->u.seq.n, out) : tp_value_tuple(b->u.seq.n, out)) != TP_OK)
                return false;
            for (int64_t i = 0; i < b->u.seq.n; i++)
                if (!rule_args(r, &b->u.seq.items[i], &out->u.seq.items[i])) return false;
            return true;
        }
    }
    return tp_value_copy(b, out) == TP_OK;
}

/* The sval of a rule's result (meta tensors with or without symbolic dims);
 * an int only from tp__out_int (otherwise it is just the example's value). */
static sval *sval_of_result(rctx *r, const tp_value *v) {
    if (v->kind == TP_VAL_INT) {
        if (!r->env->has_int_result) return NULL;
        sval *o = new_sval(r->P, SV_INT);
        if (o) o->d[0] = S(r, r->env->int_result);
        return o;
    }
    if (v->kind == TP_VAL_TENSOR) {
        sval *o = sval_from_meta(r->P, v);
        const sd_e *sym = tp__tensor_sym(v->u.tensor);
        if (o && sym)
            for (int i = 0; i < o->nd; i++)
                if (sym[i]) o->d[i] = S(r, sym[i]);
        return o;
    }
    if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE) {
        sval *o = new_sval(r->P, SV_SEQ);
        if (!o) return NULL;
        o->n = (int)v->u.seq.n;
        o->items = palloc(r->P, (size_t)(o->n > 0 ? o->n : 1) * sizeof *o->items);
        if (!o->items) return NULL;
        for (int i = 0; i < o->n; i++) {
            sval *it = sval_of_result(r, &v->u.seq.items[i]);
            if (!it) return NULL;
            o->items[i] = *it;
        }
        return o;
    }
    return sval_from_meta(r->P, v);
}

/* Run the op's own shape rule over symbolic dims; NULL when the rule is
 * not written over tp_dim (or fails), so the node has no symbolic rule. */
static sval *op_rule(rctx *r) {
    tp_value args[32], res = tp_value_none();
    tp_sym_env env;
    memset(&env, 0, sizeof env);
    env.sd = r->sd;
    env.decided = env_decided;
    env.alloc = env_alloc;
    env.user = r;
    r->env = &env;
    int n = 0;
    bool ok = r->nb <= 32;
    for (; ok && n < r->nb; n++) {
        args[n] = tp_value_none();
        ok = rule_args(r, &r->b[n], &args[n]);
    }
    sval *v = NULL;
    if (ok) {
        tp_sym_env *old = tp__sym_env_set(&env);
        tp_status st = tp_op_infer(r->op, args, &res);
        tp__sym_env_set(old);
        tp_clear_error();
        for (int i = 0; i < env.n_ints; i++) ok = ok && env.ints[i].read;
        if (ok && st == TP_OK && !env.fail && !r->fail) v = sval_of_result(r, &res);
    }
    r->env = NULL;
    tp_value_clear(&res);
    for (int i = 0; i < n; i++) tp_value_clear(&args[i]);
    return v;
}

static bool is_same_shape_op(tp_op op) {
    switch (op) {
    case TP_OP_SOFTMAX:
    case TP_OP_LOG_SOFTMAX:
    case TP_OP_DROPOUT:
    case TP_OP_INSTANCE_NORM:
    case TP_OP_LOCAL_RESPONSE_NORM:
    case TP_OP_SOFTMIN:
    case TP_OP_ALPHA_DROPOUT:
    case TP_OP_FEATURE_DROPOUT:
    case TP_OP_FEATURE_ALPHA_DROPOUT:
    case TP_OP_INVERSE:
    case TP_OP_MATRIX_POWER:
    case TP_OP_CHOLESKY:
    case TP_OP_CHOLESKY_INVERSE:
    case TP_OP_MATRIX_EXP:
    case TP_OP_ORGQR: return true;
    default: return false;
    }
}

static sval *apply_rule(rctx *r, const tp_value *meta) {
    tp_op op = r->op;
    if (is_same_shape_op(op)) return copy_t(r, need_t(r, 0));
    switch (op) {
    case TP_OP_MATMUL: return matmul_shape(r, need_t(r, 0), need_t(r, 1), true);
    case TP_OP_MM:
    case TP_OP_BMM: {
        const sval *a = need_t(r, 0), *b = need_t(r, 1);
        int want = op == TP_OP_MM ? 2 : 3;
        if (!a || !b || a->nd != want || b->nd != want) {
            r->fail = true;
            return NULL;
        }
        return matmul_shape(r, a, b, false);
    }
    case TP_OP_ADDMM:
    case TP_OP_BADDBMM: {
        sval *o = matmul_shape(r, need_t(r, 1), need_t(r, 2), false);
        bcast_into(r, need_t(r, 0), o, "self broadcasts to the product");
        return o;
    }
    case TP_OP_LINEAR: {
        const sval *x = need_t(r, 0), *w = need_t(r, 1);
        if (!x || !w || x->nd < 1 || w->nd < 1 || w->nd > 2) {
            r->fail = true;
            return NULL;
        }
        req_eq(r, x->d[x->nd - 1], w->d[w->nd - 1], "input features == weight.shape[-1]");
        sval *o = out_t(r, w->nd == 2 ? x->nd : x->nd - 1);
        if (!o) return NULL;
        for (int i = 0; i < x->nd - 1; i++) o->d[i] = S(r, x->d[i]);
        if (w->nd == 2) o->d[x->nd - 1] = S(r, w->d[0]);
        const sval *b = targ(r, 2);
        if (b) bcast_into(r, b, o, "bias broadcasts to the output");
        return o;
    }
    case TP_OP_DOT:
    case TP_OP_TRACE: {
        if (!need_t(r, 0)) return NULL;
        if (op == TP_OP_DOT) {
            const sval *a = need_t(r, 0), *b = need_t(r, 1);
            if (!b || a->nd != 1 || b->nd != 1) {
                r->fail = true;
                return NULL;
            }
            req_eq(r, a->d[0], b->d[0], "dot: equal lengths");
        }
        return out_t(r, 0);
    }
    case TP_OP_MV:
    case TP_OP_ADDMV: {
        int f = op == TP_OP_ADDMV;
        const sval *m = need_t(r, f), *v = need_t(r, f + 1);
        if (!m || !v || m->nd != 2 || v->nd != 1) {
            r->fail = true;
            return NULL;
        }
        req_eq(r, m->d[1], v->d[0], "mat.shape[1] == vec.shape[0]");
        sval *o = out_t(r, 1);
        if (!o) return NULL;
        o->d[0] = S(r, m->d[0]);
        if (f) bcast_into(r, need_t(r, 0), o, "self broadcasts to the product");
        return o;
    }
    case TP_OP_OUTER:
    case TP_OP_ADDR: {
        int f = op == TP_OP_ADDR;
        const sval *a = need_t(r, f), *b = need_t(r, f + 1);
        if (!a || !b || a->nd != 1 || b->nd != 1) {
            r->fail = true;
            return NULL;
        }
        sval *o = out_t(r, 2);
        if (!o) return NULL;
        o->d[0] = S(r, a->d[0]);
        o->d[1] = S(r, b->d[0]);
        if (f) bcast_into(r, need_t(r, 0), o, "self broadcasts to the outer product");
        return o;
    }
    case TP_OP_ADDBMM: {
        const sval *b1 = need_t(r, 1), *b2 = need_t(r, 2);
        if (!b1 || !b2 || b1->nd != 3 || b2->nd != 3) {
            r->fail = true;
            return NULL;
        }
        req_eq(r, b1->d[0], b2->d[0], "batch1 and batch2: same number of batches");
        req_eq(r, b1->d[2], b2->d[1], "batch1.shape[2] == batch2.shape[1]");
        sval *o = out_t(r, 2);
        if (!o) return NULL;
        o->d[0] = S(r, b1->d[1]);
        o->d[1] = S(r, b2->d[2]);
        bcast_into(r, need_t(r, 0), o, "self broadcasts to the product");
        return o;
    }
    case TP_OP_CROSS: {
        static const int idx[2] = {0, 1};
        return broadcast(r, idx, 2);
    }
    case TP_OP_KRON: {
        const sval *a = need_t(r, 0), *b = need_t(r, 1);
        if (!a || !b) return NULL;
        int nd = a->nd > b->nd ? a->nd : b->nd;
        sval *o = out_t(r, nd);
        if (!o) return NULL;
        for (int i = 0; i < nd; i++) {
            int ia = i - (nd - a->nd), ib = i - (nd - b->nd);
            o->d[i] = S(r, sd_mul(r->sd, ia >= 0 ? a->d[ia] : K(r, 1), ib >= 0 ? b->d[ib] : K(r, 1)));
        }
        return o;
    }
    case TP_OP_INNER: {
        const sval *a = need_t(r, 0), *b = need_t(r, 1);
        if (!a || !b) return NULL;
        if (a->nd == 0 || b->nd == 0) return copy_t(r, a->nd == 0 ? b : a);
        req_eq(r, a->d[a->nd - 1], b->d[b->nd - 1], "inner: equal last dims");
        sval *o = out_t(r, a->nd + b->nd - 2);
        if (!o) return NULL;
        for (int i = 0; i < a->nd - 1; i++) o->d[i] = S(r, a->d[i]);
        for (int i = 0; i < b->nd - 1; i++) o->d[a->nd - 1 + i] = S(r, b->d[i]);
        return o;
    }
    case TP_OP_CONV1D:
    case TP_OP_CONV2D:
    case TP_OP_CONV3D: return rule_conv(r, false, 3, 4, 5, -1, 6);
    case TP_OP_CONV_TRANSPOSE1D:
    case TP_OP_CONV_TRANSPOSE2D:
    case TP_OP_CONV_TRANSPOSE3D: return rule_conv(r, true, 3, 4, 7, 5, 6);
    case TP_OP_CONVOLUTION: return rule_conv(r, barg(r, 6, false), 3, 4, 5, barg(r, 6, false) ? 7 : -1, 8);
    case TP_OP_MAX_POOL1D: return rule_pool(r, 1, true, meta);
    case TP_OP_MAX_POOL2D: return rule_pool(r, 2, true, meta);
    case TP_OP_MAX_POOL3D: return rule_pool(r, 3, true, meta);
    case TP_OP_MAX_POOL1D_WITH_INDICES:
    case TP_OP_MAX_POOL2D_WITH_INDICES:
    case TP_OP_MAX_POOL3D_WITH_INDICES: {
        int n = op == TP_OP_MAX_POOL1D_WITH_INDICES ? 1 : op == TP_OP_MAX_POOL2D_WITH_INDICES ? 2 : 3;
        const tp_value *values = meta && tp_value_len(meta) == 2 ? tp_value_at(meta, 0) : NULL;
        sval *o = rule_pool(r, n, true, values);
        return o ? seq_of(r, 2, o) : NULL;
    }
    case TP_OP_AVG_POOL1D: return rule_pool(r, 1, false, meta);
    case TP_OP_AVG_POOL2D: return rule_pool(r, 2, false, meta);
    case TP_OP_AVG_POOL3D: return rule_pool(r, 3, false, meta);
    case TP_OP_ADAPTIVE_AVG_POOL1D:
    case TP_OP_ADAPTIVE_AVG_POOL2D:
    case TP_OP_ADAPTIVE_AVG_POOL3D:
    case TP_OP_ADAPTIVE_MAX_POOL1D:
    case TP_OP_ADAPTIVE_MAX_POOL1D_WITH_INDICES:
    case TP_OP_ADAPTIVE_MAX_POOL2D_WITH_INDICES:
    case TP_OP_ADAPTIVE_MAX_POOL3D_WITH_INDICES:
    case TP_OP_ADAPTIVE_MAX_POOL2D:
    case TP_OP_ADAPTIVE_MAX_POOL3D: {
        const sval *a = need_t(r, 0);
        int64_t sz[TP_MAX_DIMS];
        int n = ilist(r, 1, sz, TP_MAX_DIMS);
        if (!a || n < 1 || n > a->nd) {
            r->fail = true;
            return NULL;
        }
        sval *o = copy_t(r, a);
        for (int i = 0; o && i < n; i++) o->d[a->nd - n + i] = K(r, sz[i]);
        if (o && (op == TP_OP_ADAPTIVE_MAX_POOL1D_WITH_INDICES || op == TP_OP_ADAPTIVE_MAX_POOL2D_WITH_INDICES ||
                  op == TP_OP_ADAPTIVE_MAX_POOL3D_WITH_INDICES))
            return seq_of(r, 2, o); /* values and indices */
        return o;
    }
    case TP_OP_MAX_UNPOOL1D:
    case TP_OP_MAX_UNPOOL2D:
    case TP_OP_MAX_UNPOOL3D: { /* output_size, else (in - 1) * stride + kernel - 2 * padding */
        int sp = op == TP_OP_MAX_UNPOOL1D ? 1 : op == TP_OP_MAX_UNPOOL2D ? 2 : 3;
        const sval *x = need_t(r, 0);
        int64_t k[TP_MAX_DIMS], st[TP_MAX_DIMS], pd[TP_MAX_DIMS], os[TP_MAX_DIMS];
        int n;
        if (!x || (x->nd != sp + 1 && x->nd != sp + 2)) {
            r->fail = true;
            return NULL;
        }
        sval *o = copy_t(r, x);
        if (!o) return NULL;
        if (!is_none(r, 5)) {
            n = ilist(r, 5, os, TP_MAX_DIMS);
            int skip = n == sp + 2 ? 2 : 0;
            if (n - skip != sp) {
                r->fail = true;
                return NULL;
            }
            for (int i = 0; i < sp; i++) o->d[x->nd - sp + i] = K(r, os[skip + i]);
            return o;
        }
        if (is_none(r, 2) || (n = ilist(r, 2, k, TP_MAX_DIMS)) < 0 || !expand_list(k, n, sp)) r->fail = true;
        n = is_none(r, 3) ? 0 : ilist(r, 3, st, TP_MAX_DIMS);
        if (n == 0) memcpy(st, k, sizeof st);
        else if (n < 0 || !expand_list(st, n, sp)) r->fail = true;
        if (is_none(r, 4)) memset(pd, 0, sizeof pd);
        else if ((n = ilist(r, 4, pd, TP_MAX_DIMS)) < 0 || !expand_list(pd, n, sp)) r->fail = true;
        if (r->fail) return NULL;
        for (int i = 0; i < sp; i++) {
            int j = x->nd - sp + i;
            o->d[j] = S(r, sd_addk(r->sd, sd_mulk(r->sd, sd_addk(r->sd, S(r, x->d[j]), -1), st[i]), k[i] - 2 * pd[i]));
        }
        return o;
    }
    case TP_OP_LP_POOL1D:
    case TP_OP_LP_POOL2D:
    case TP_OP_LP_POOL3D: { /* avg_pool's rule: (input, kernel_size, stride, padding 0, ceil_mode) */
        if (r->nb < 5) {
            r->fail = true;
            return NULL;
        }
        tp_value b[5] = {r->b[0], r->b[2], r->b[3], tp_value_int(0), r->b[4]};
        if (b[2].kind == TP_VAL_NONE) { /* stride None: the kernel size, as an empty list reads */
            memset(&b[2], 0, sizeof b[2]);
            b[2].kind = TP_VAL_LIST;
        }
        rctx r2 = *r;
        r2.b = b;
        r2.nb = 5;
        sval *o = rule_pool(&r2, op == TP_OP_LP_POOL1D ? 1 : op == TP_OP_LP_POOL2D ? 2 : 3, false, meta);
        r->fail = r2.fail;
        return o;
    }
    case TP_OP_INTERPOLATE: return rule_interpolate(r);
    case TP_OP_BATCH_NORM: {
        const sval *x = need_t(r, 0);
        if (!x || x->nd < 2) {
            r->fail = true;
            return NULL;
        }
        for (int i = 1; i <= 4; i++) {
            const sval *p = targ(r, i);
            if (p && p->nd == 1) req_eq(r, p->d[0], x->d[1], "per-channel parameters match the channels");
        }
        if (barg(r, 5, false)) {
            sd_e n = K(r, 1);
            for (int i = 0; i < x->nd; i++)
                if (i != 1) n = sd_mul(r->sd, n, x->d[i]);
            req_ge(r, n, 2, "more than 1 value per channel when training");
        }
        return copy_t(r, x);
    }
    case TP_OP_LAYER_NORM:
    case TP_OP_RMS_NORM: {
        const sval *x = need_t(r, 0);
        int64_t ns[TP_MAX_DIMS];
        int n = ilist(r, 1, ns, TP_MAX_DIMS);
        if (!x || n < 0 || n > x->nd) {
            r->fail = true;
            return NULL;
        }
        for (int i = 0; i < n; i++) req_eq(r, x->d[x->nd - n + i], K(r, ns[i]), "normalized_shape");
        return copy_t(r, x);
    }
    case TP_OP_GROUP_NORM: {
        const sval *x = need_t(r, 0);
        int64_t g = iarg(r, 1, 1);
        if (!x || x->nd < 2 || g < 1) {
            r->fail = true;
            return NULL;
        }
        req_div(r, x->d[1], g, "channels divisible by num_groups");
        return copy_t(r, x);
    }
    case TP_OP_PRELU: {
        const sval *x = need_t(r, 0), *w = need_t(r, 1);
        if (!x || !w) return NULL;
        int64_t c;
        if (w->nd == 1 && !(sd_is_const(S(r, w->d[0]), &c) && c == 1) && x->nd >= 2)
            req_eq(r, w->d[0], x->d[1], "prelu weight matches the channels");
        return copy_t(r, x);
    }
    case TP_OP_EMBEDDING: {
        const sval *w = need_t(r, 0), *ix = need_t(r, 1);
        if (!w || !ix || w->nd != 2) {
            r->fail = true;
            return NULL;
        }
        sval *o = out_t(r, ix->nd + 1);
        if (!o) return NULL;
        for (int i = 0; i < ix->nd; i++) o->d[i] = S(r, ix->d[i]);
        o->d[ix->nd] = S(r, w->d[1]);
        return o;
    }
    case TP_OP_SCALED_DOT_PRODUCT_ATTENTION: return rule_sdpa(r);
    case TP_OP_IM2COL: { /* (N, C * kh * kw, blocks_h * blocks_w) */
        const sval *x = need_t(r, 0);
        int64_t k[2], dl[2], pd[2], st[2];
        int n;
        if (!x || (x->nd != 3 && x->nd != 4)) r->fail = true;
        if ((n = ilist(r, 1, k, 2)) < 0 || !expand_list(k, n, 2)) r->fail = true;
        if ((n = ilist(r, 2, dl, 2)) < 0 || !expand_list(dl, n, 2)) r->fail = true;
        if ((n = ilist(r, 3, pd, 2)) < 0 || !expand_list(pd, n, 2)) r->fail = true;
        if ((n = ilist(r, 4, st, 2)) < 0 || !expand_list(st, n, 2) || st[0] < 1 || st[1] < 1) r->fail = true;
        if (r->fail) return NULL;
        sval *o = out_t(r, x->nd - 1);
        if (!o) return NULL;
        if (x->nd == 4) o->d[0] = S(r, x->d[0]);
        o->d[o->nd - 2] = S(r, sd_mulk(r->sd, x->d[x->nd - 3], k[0] * k[1]));
        sd_e blocks[2];
        for (int i = 0; i < 2; i++) {
            sd_e in = x->d[x->nd - 2 + i];
            blocks[i] = sd_addk(r->sd, sd_floordiv(r->sd, sd_addk(r->sd, in, 2 * pd[i] - dl[i] * (k[i] - 1) - 1), st[i]), 1);
            req_ge(r, blocks[i], 1, "im2col: at least one sliding block");
        }
        o->d[o->nd - 1] = S(r, sd_mul(r->sd, blocks[0], blocks[1]));
        return o;
    }
    case TP_OP_COL2IM: { /* (N, C / (kh * kw), output_size) */
        const sval *x = need_t(r, 0);
        int64_t os[2], k[2];
        int n;
        if (!x || (x->nd != 2 && x->nd != 3)) r->fail = true;
        if ((n = ilist(r, 1, os, 2)) < 0 || !expand_list(os, n, 2)) r->fail = true;
        if ((n = ilist(r, 2, k, 2)) < 0 || !expand_list(k, n, 2) || k[0] * k[1] < 1) r->fail = true;
        if (r->fail) return NULL;
        sval *o = out_t(r, x->nd + 1);
        if (!o) return NULL;
        if (x->nd == 3) o->d[0] = S(r, x->d[0]);
        req_div(r, x->d[x->nd - 2], k[0] * k[1], "col2im: channels divisible by the kernel size");
        o->d[o->nd - 3] = S(r, sd_floordiv(r->sd, x->d[x->nd - 2], k[0] * k[1]));
        o->d[o->nd - 2] = K(r, os[0]);
        o->d[o->nd - 1] = K(r, os[1]);
        return o;
    }
    case TP_OP_GRID_SAMPLE: { /* (N, C, grid H, grid W) */
        const sval *x = need_t(r, 0), *g = need_t(r, 1);
        if (!x || !g || x->nd != 4 || g->nd != 4) {
            r->fail = true;
            return NULL;
        }
        req_eq(r, x->d[0], g->d[0], "grid_sample: input and grid batch sizes");
        sval *o = out_t(r, 4);
        if (!o) return NULL;
        o->d[0] = S(r, x->d[0]);
        o->d[1] = S(r, x->d[1]);
        o->d[2] = S(r, g->d[1]);
        o->d[3] = S(r, g->d[2]);
        return o;
    }
    case TP_OP_AFFINE_GRID: { /* size (N, C, [D,] H, W) -> (N, [D,] H, W, 2 or 3) */
        int64_t sz[5];
        int n = ilist(r, 1, sz, 5);
        if (n != 4 && n != 5) {
            r->fail = true;
            return NULL;
        }
        sval *o = out_t(r, n);
        if (!o) return NULL;
        o->d[0] = K(r, sz[0]);
        for (int i = 2; i < n; i++) o->d[i - 1] = K(r, sz[i]);
        o->d[n - 1] = K(r, n - 2);
        return o;
    }
    case TP_OP_DET: /* the batch dims */
    case TP_OP_LOGDET:
    case TP_OP_SLOGDET: {
        const sval *x = need_t(r, 0);
        if (!x || x->nd < 2) {
            r->fail = true;
            return NULL;
        }
        req_eq(r, x->d[x->nd - 1], x->d[x->nd - 2], "det: square matrices");
        sval *o = out_t(r, x->nd - 2);
        if (!o) return NULL;
        for (int i = 0; i < x->nd - 2; i++) o->d[i] = S(r, x->d[i]);
        return op == TP_OP_SLOGDET ? seq_of(r, 2, o) : o;
    }
    case TP_OP_PINVERSE: { /* the matrix dims swapped */
        sval *o = copy_t(r, need_t(r, 0));
        if (!o || o->nd < 2) {
            r->fail = true;
            return NULL;
        }
        sd_e t = o->d[o->nd - 1];
        o->d[o->nd - 1] = o->d[o->nd - 2];
        o->d[o->nd - 2] = t;
        return o;
    }
    case TP_OP_ORMQR: return copy_t(r, need_t(r, 2));
    case TP_OP_GEQRF: { /* (self's shape, batch + [min(m, n)]) */
        const sval *x = need_t(r, 0);
        int64_t m, n;
        if (!x || x->nd < 2 || !sd_is_const(x->d[x->nd - 2], &m) || !sd_is_const(x->d[x->nd - 1], &n)) {
            r->fail = true; /* min() of a symbolic size has no form here */
            return NULL;
        }
        sval *a = copy_t(r, x), *t = a ? out_t(r, x->nd - 1) : NULL;
        if (!t) return NULL;
        for (int i = 0; i < x->nd - 2; i++) t->d[i] = S(r, x->d[i]);
        t->d[x->nd - 2] = K(r, m < n ? m : n);
        sval *q = seq_of(r, 2, a);
        if (q) q->items[1] = *t;
        return q;
    }
    case TP_OP_CHOLESKY_SOLVE:
    case TP_OP_LU_SOLVE: return solve_shape(r, need_t(r, 0), need_t(r, 1), need_t(r, 0));
    case TP_OP_TRIANGULAR_SOLVE: { /* (solution, the broadcast A) */
        const sval *b = need_t(r, 0), *a = need_t(r, 1);
        sval *x = solve_shape(r, b, a, b), *c = x ? solve_shape(r, b, a, a) : NULL;
        sval *t = c ? seq_of(r, 2, x) : NULL;
        if (t) t->items[1] = *c;
        return t;
    }
    case TP_OP_PDIST: { /* N * (N - 1) / 2 */
        const sval *x = need_t(r, 0);
        if (!x || x->nd != 2) {
            r->fail = true;
            return NULL;
        }
        sval *o = out_t(r, 1);
        if (o) o->d[0] = S(r, sd_floordiv(r->sd, sd_mul(r->sd, x->d[0], sd_addk(r->sd, x->d[0], -1)), 2));
        return o;
    }
    case TP_OP_CONV_TBC: { /* (T + 2 * pad - K + 1, B, out) */
        const sval *x = need_t(r, 0), *w = need_t(r, 1);
        int64_t pad = iarg(r, 3, 0);
        if (!x || !w || x->nd != 3 || w->nd != 3) {
            r->fail = true;
            return NULL;
        }
        req_eq(r, x->d[2], w->d[1], "conv_tbc: input channels == weight.shape[1]");
        sval *o = copy_t(r, x);
        if (!o) return NULL;
        o->d[0] = S(r, sd_add(r->sd, sd_addk(r->sd, x->d[0], 2 * pad + 1), sd_mulk(r->sd, w->d[0], -1)));
        req_ge(r, o->d[0], 0, "conv_tbc: output time");
        o->d[2] = S(r, w->d[2]);
        return o;
    }
    case TP_OP_BILINEAR: { /* input1's shape with the last dim weight.shape[0] */
        const sval *a = need_t(r, 0), *b = need_t(r, 1), *w = need_t(r, 2);
        if (!a || !b || !w || a->nd < 1 || a->nd != b->nd || w->nd != 3) {
            r->fail = true;
            return NULL;
        }
        for (int i = 0; i + 1 < a->nd; i++) req_eq(r, a->d[i], b->d[i], "bilinear: inputs' batch dims match");
        req_eq(r, a->d[a->nd - 1], w->d[1], "bilinear: input1 features == weight.shape[1]");
        req_eq(r, b->d[b->nd - 1], w->d[2], "bilinear: input2 features == weight.shape[2]");
        sval *o = copy_t(r, a);
        if (o) o->d[a->nd - 1] = S(r, w->d[0]);
        return o;
    }
    case TP_OP_RNN_TANH_CELL:
    case TP_OP_RNN_RELU_CELL:
    case TP_OP_GRU_CELL:
    case TP_OP_LSTM_CELL: { /* the hidden state's shape (hy, and cy for lstm_cell) */
        const sval *x = need_t(r, 0), *h = need_t(r, 1);
        if (!x || !h || x->nd != 2 || h->nd != 2) {
            r->fail = true;
            return NULL;
        }
        req_eq(r, x->d[0], h->d[0], "input batch == hidden batch");
        sval *o = copy_t(r, h);
        return o && op == TP_OP_LSTM_CELL ? seq_of(r, 2, o) : o;
    }
    case TP_OP_GLU: {
        const sval *a = need_t(r, 0);
        if (!a || a->nd == 0) {
            r->fail = true;
            return NULL;
        }
        int d = wrap_dim(r, iarg(r, 1, -1), a->nd);
        if (r->fail) return NULL;
        req_div(r, a->d[d], 2, "glu's halved dim is even");
        sval *o = copy_t(r, a);
        if (o) o->d[d] = sd_floordiv(r->sd, S(r, a->d[d]), 2);
        return o;
    }
    case TP_OP_MSE_LOSS:
    case TP_OP_L1_LOSS:
    case TP_OP_SMOOTH_L1_LOSS:
    case TP_OP_HUBER_LOSS:
    case TP_OP_SOFT_MARGIN_LOSS:
    case TP_OP_KL_DIV: return rule_loss(r, 2, (int[]){0, 1}, 2);
    case TP_OP_BINARY_CROSS_ENTROPY: return rule_loss(r, 3, (int[]){0, 1, 2}, 3);
    case TP_OP_BINARY_CROSS_ENTROPY_WITH_LOGITS: return rule_loss(r, 4, (int[]){0, 1, 2, 3}, 4);
    case TP_OP_POISSON_NLL_LOSS:
    case TP_OP_GAUSSIAN_NLL_LOSS: return rule_loss(r, 5, (int[]){0, 1}, 2);
    case TP_OP_MARGIN_RANKING_LOSS: return rule_loss(r, 4, (int[]){0, 1, 2}, 3);
    case TP_OP_HINGE_EMBEDDING_LOSS: return rule_loss(r, 3, (int[]){0, 1}, 2);
    case TP_OP_COSINE_EMBEDDING_LOSS: return rule_loss(r, 4, (int[]){2}, 1);
    case TP_OP_DIST: {
        if (!broadcast(r, (int[]){0, 1}, 2)) return NULL;
        return out_t(r, 0);
    }
    /* indexed updates and scatters into views: self's shape (issue #13) */
    case TP_OP_TRIPLET_MARGIN_LOSS:
    case TP_OP_MULTI_MARGIN_LOSS:
    case TP_OP_MULTILABEL_MARGIN_LOSS:
    case TP_OP_MULTILABEL_SOFT_MARGIN_LOSS: { /* 'none': the input's dims without the last; else 0-d */
        int red_at = op == TP_OP_TRIPLET_MARGIN_LOSS ? 7 : op == TP_OP_MULTI_MARGIN_LOSS ? 5
                     : op == TP_OP_MULTILABEL_MARGIN_LOSS ? 2 : 3;
        const sval *a = need_t(r, 0);
        sval *o = rule_loss(r, red_at, (int[]){0}, 1);
        if (!a || !o || o->nd == 0) return o;
        if (op == TP_OP_TRIPLET_MARGIN_LOSS)
            for (int i = 1; i <= 2; i++) {
                const sval *b = need_t(r, i);
                if (!b || b->nd != a->nd) {
                    r->fail = true;
                    return NULL;
                }
                for (int d = 0; d < a->nd; d++) req_eq(r, a->d[d], b->d[d], "triplet inputs share their shape");
            }
        o->nd--;
        return o;
    }
    case TP_OP_COSINE_SIMILARITY:
    case TP_OP_PAIRWISE_DISTANCE: {
        /* the broadcast shape without dim (pairwise_distance: the last, kept as 1 with keepdim) */
        sval *b = broadcast(r, (int[]){0, 1}, 2);
        if (!b || r->fail) return NULL;
        bool keep = op == TP_OP_PAIRWISE_DISTANCE && barg(r, 4, false) && b->nd > 0;
        int d = op == TP_OP_COSINE_SIMILARITY ? wrap_dim(r, iarg(r, 2, 1), b->nd) : (b->nd > 0 ? b->nd - 1 : 0);
        if (r->fail || b->nd == 0) return b;
        if (keep) {
            b->d[d] = K(r, 1);
            return b;
        }
        for (int i = d; i + 1 < b->nd; i++) b->d[i] = b->d[i + 1];
        b->nd--;
        return b;
    }
    case TP_OP_NLL_LOSS:
    case TP_OP_CROSS_ENTROPY: {
        /* 'none': the input's dims without the class dim (1; 0 for 1-d) */
        const sval *a = need_t(r, 0);
        sval *o = rule_loss(r, 3, (int[]){0}, 1);
        if (!a || !o || o->nd == 0) return o;
        if (a->nd < 1) {
            r->fail = true;
            return NULL;
        }
        int cd = a->nd == 1 ? 0 : 1;
        o->nd = a->nd - 1;
        for (int i = 0, k = 0; i < a->nd; i++)
            if (i != cd) o->d[k++] = S(r, a->d[i]);
        return o;
    }
    default: r->fail = true; return NULL;
    }
}

/* Ops whose symbolic rules read int arguments that are symbolic ints
 * (nodes); for any other op such an argument means no rule. */
static bool takes_sym_ints(tp_op op) {
    switch (op) {
    case TP_OP_RESHAPE:
    case TP_OP_VIEW:
    case TP_OP_EXPAND:
    case TP_OP_NARROW:
    case TP_OP_SLICE:
    case TP_OP_ZEROS:
    case TP_OP_ONES:
    case TP_OP_FULL:
    case TP_OP_NEW_ZEROS:
    case TP_OP_NEW_ONES:
    case TP_OP_NEW_FULL:
    case TP_OP_NEW_EMPTY:
    case TP_OP_SYM_ADD:
    case TP_OP_SYM_SUB:
    case TP_OP_SYM_MUL:
    case TP_OP_SYM_FLOORDIV: return true;
    default: return false;
    }
}

/* In bound args, replace int nodes whose value is a constant by the int;
 * true when a symbolic one remains. */
static bool fold_int_nodes(prop *P, tp_value *v) {
    if (v->kind == TP_VAL_NODE) {
        const sval *s = map_get(P, v->u.node);
        int64_t c;
        if (!s || s->kind != SV_INT) return false;
        if (s->d[0] && sd_is_const(sd_subst(P->sd, s->d[0]), &c)) {
            *v = tp_value_int(c);
            return false;
        }
        return true;
    }
    bool any = false;
    if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE)
        for (int64_t i = 0; i < v->u.seq.n; i++) any = fold_int_nodes(P, &v->u.seq.items[i]) || any;
    return any;
}

/* ---- the pass ------------------------------------------------------------------------------ */

/* Compare an sval with the node's example meta value. */
static bool agrees(prop *P, const sval *v, const tp_value *m) {
    if (!v || !m) return false;
    if (m->kind == TP_VAL_INT) {
        int64_t x;
        return v->kind == SV_INT && sd_eval(P->sd, v->d[0], NULL, &x) && x == m->u.i;
    }
    if (m->kind == TP_VAL_TENSOR) {
        if (v->kind != SV_TENSOR || v->nd != tp_tensor_ndim(m->u.tensor)) return false;
        for (int i = 0; i < v->nd; i++) {
            int64_t x;
            if (!sd_eval(P->sd, v->d[i], NULL, &x) || x != tp_tensor_sizes(m->u.tensor)[i]) return false;
        }
        return true;
    }
    if (m->kind == TP_VAL_LIST || m->kind == TP_VAL_TUPLE) {
        if (v->kind != SV_SEQ || v->n != m->u.seq.n) return false;
        for (int i = 0; i < v->n; i++)
            if (!agrees(P, &v->items[i], &m->u.seq.items[i])) return false;
        return true;
    }
    return true;
}

static void shape_text(prop *P, const sval *v, tp_sb *sb) {
    if (!v || v->kind == SV_UNKNOWN) {
        tp__sb_puts(sb, "?");
        return;
    }
    if (v->kind == SV_INT) {
        char buf[256];
        sd_print(P->sd, sd_subst(P->sd, v->d[0]), buf, sizeof buf);
        tp__sb_puts(sb, buf);
    } else if (v->kind == SV_TENSOR) {
        tp__sb_puts(sb, "[");
        for (int i = 0; i < v->nd; i++) {
            char buf[256];
            sd_print(P->sd, sd_subst(P->sd, v->d[i]), buf, sizeof buf);
            tp__sb_printf(sb, "%s%s", i ? ", " : "", buf);
        }
        tp__sb_puts(sb, "]");
    } else if (v->kind == SV_SEQ) {
        tp__sb_puts(sb, "(");
        for (int i = 0; i < v->n; i++) {
            if (i) tp__sb_puts(sb, ", ");
            shape_text(P, &v->items[i], sb);
        }
        tp__sb_puts(sb, ")");
    } else {
        tp__sb_puts(sb, "-");
    }
}

/* A user input's sval: tensors get their sites' expressions. */
static sval *input_sval(prop *P, const tp_value *v, const char *path, const sym_site *sites, int n_sites) {
    if (v->kind == TP_VAL_TENSOR) {
        sval *o = sval_from_meta(P, v);
        if (!o) return NULL;
        for (int i = 0; i < n_sites; i++)
            if (strcmp(sites[i].path, path) == 0 && sites[i].dim < o->nd) o->d[sites[i].dim] = sites[i].expr;
        return o;
    }
    if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE || v->kind == TP_VAL_DICT) {
        sval *o = new_sval(P, SV_SEQ);
        if (!o) return NULL;
        o->n = (int)v->u.seq.n;
        o->items = palloc(P, (size_t)(o->n > 0 ? o->n : 1) * sizeof *o->items);
        if (!o->items) return NULL;
        for (int i = 0; i < o->n; i++) {
            char sub[300];
            if (v->kind == TP_VAL_DICT) snprintf(sub, sizeof sub, "%s['%s']", path, v->u.seq.keys[i]);
            else snprintf(sub, sizeof sub, "%s[%d]", path, i);
            sval *it = input_sval(P, &v->u.seq.items[i], sub, sites, n_sites);
            if (!it) return NULL;
            o->items[i] = *it;
        }
        return o;
    }
    return new_sval(P, SV_OTHER);
}

tp_status tp__symshape_propagate(sd_ctx *sd, tp_program *p, const user_input_info *inputs, int n_inputs,
                                 const sym_site *sites, int n_sites, const size_read *reads, int n_reads,
                                 sym_decided_fn cb, void *user, tp_sb *fallbacks, int *n_fallback) {
    prop P;
    memset(&P, 0, sizeof P);
    P.sd = sd;
    P.g = tp_program_graph(p);
    P.cb = cb;
    P.user = user;
    P.trace = getenv("TP_SYMSHAPE_TRACE") != NULL;
    *n_fallback = 0;
    size_t n_nodes = (size_t)tp_graph_num_nodes(P.g);
    P.cap = 16;
    while (P.cap < 2 * n_nodes + 2) P.cap *= 2;
    P.keys = tp_calloc(P.cap, sizeof *P.keys);
    P.vals = tp_calloc(P.cap, sizeof *P.vals);
    tp_status st = P.keys && P.vals ? TP_OK : tp_error(TP_ERR_NOMEM, "out of memory");
    tp_graph *g = tp_program_graph_mut(p);
    for (tp_node *n = tp_graph_first_node(g); st == TP_OK && n; n = tp_node_next(n)) {
        tp_node_kind kind = tp_node_get_kind(n);
        const tp_value *meta = tp_node_meta_val(n);
        sval *v = NULL;
        bool fallback = false;
        if (kind == TP_NODE_OUTPUT) continue;
        if (kind == TP_NODE_PLACEHOLDER) {
            for (int i = 0; i < n_inputs && !v; i++)
                if (inputs[i].placeholder == n) v = input_sval(&P, inputs[i].example, inputs[i].name, sites, n_sites);
            if (!v) v = sval_from_meta(&P, meta);
        } else if (kind == TP_NODE_CALL_FUNCTION) {
            tp_op op = tp_node_op(n);
            const tp_value *args = tp_node_args(n);
            /* do the inputs carry symbolic dims? */
            bool symbolic = false, unknown = false;
            int64_t na = args ? tp_value_len(args) : 0;
            for (int64_t i = 0; i < na; i++) {
                sval *a = arg_sval(&P, tp_value_at(args, i));
                symbolic = symbolic || sval_symbolic(a);
                unknown = unknown || sval_unknown(a);
            }
            const tp_value *kw = tp_node_kwargs(n);
            for (int64_t i = 0; kw && i < tp_value_len(kw); i++) {
                sval *a = arg_sval(&P, tp_value_at(kw, i));
                symbolic = symbolic || sval_symbolic(a);
                unknown = unknown || sval_unknown(a);
            }
            if (!symbolic) {
                v = sval_from_meta(&P, meta);
            } else if (unknown) {
                v = new_sval(&P, SV_UNKNOWN);
                fallback = true;
            } else {
                const tp_schema *sc = tp_op_schema(op);
                tp_value bound[32];
                int nb = sc ? sc->n_args : 0;
                bool ok = sc && nb <= 32 &&
                          tp_op_bind(op, args ? args->u.seq.items : NULL, (int)na, kw && kw->kind == TP_VAL_DICT ? kw : NULL,
                                     bound) == TP_OK;
                tp_clear_error();
                bool sym_ints = false;
                for (int i = 0; ok && i < nb; i++) sym_ints = fold_int_nodes(&P, &bound[i]) || sym_ints;
                if (ok) {
                    rctx r = {&P, sd, n, op, bound, nb, false, NULL};
                    v = op_rule(&r);
                    if (v) SYM_TRACE("op", op);
                    if (!v && sym_ints && !takes_sym_ints(op)) {
                        r.fail = true;
                    } else if (!v) {
                        r.fail = false;
                        v = apply_rule(&r, meta);
                        SYM_TRACE("table", op);
                    }
                    for (int i = 0; i < nb; i++) tp_value_clear(&bound[i]);
                    if (r.fail || !v || !agrees(&P, v, meta)) {
                        v = new_sval(&P, SV_UNKNOWN);
                        fallback = true;
                    }
                } else {
                    v = new_sval(&P, SV_UNKNOWN);
                    fallback = true;
                }
            }
        } else {
            v = sval_from_meta(&P, meta);
        }
        if (!v || P.oom) {
            st = tp_error(TP_ERR_NOMEM, "out of memory propagating symbolic shapes");
            break;
        }
        if (fallback) {
            (*n_fallback)++;
            tp__sb_printf(fallbacks, "%s%s (%s)", fallbacks->len ? ", " : "", tp_node_name(n),
                          kind == TP_NODE_CALL_FUNCTION ? tp_op_name(tp_node_op(n)) : "?");
        }
        map_put(&P, n, v);
        /* sizes the forward read as ints are pinned */
        for (int i = 0; i < n_reads && v->kind == SV_INT; i++) {
            const size_read *rd = &reads[i];
            if (rd->dim >= 0 || strcmp(rd->node, tp_node_name(n)) != 0) continue;
            rctx r = {&P, sd, n, tp_node_op(n), NULL, 0, false, NULL};
            char what[400];
            snprintf(what, sizeof what, "the forward read the int %s = %" PRId64 " as a C int at %s, which specialises it",
                     rd->node, rd->value, rd->site);
            req_eq(&r, v->d[0], K(&r, rd->value), what);
        }
        for (int i = 0; i < n_reads && v->kind == SV_TENSOR; i++) {
            const size_read *rd = &reads[i];
            if (rd->dim < 0 || strcmp(rd->node, tp_node_name(n)) != 0 || rd->dim >= v->nd) continue;
            rctx r = {&P, sd, n, kind == TP_NODE_CALL_FUNCTION ? tp_node_op(n) : TP_OP_INVALID, NULL, 0, false, NULL};
            char what[400];
            snprintf(what, sizeof what, "the forward read %s.shape[%d] = %" PRId64 " as an int at %s, which specialises it",
                     rd->node, rd->dim, rd->value, rd->site);
            req_eq(&r, v->d[rd->dim], K(&r, rd->value), what);
        }
        tp_sb sb = {0};
        shape_text(&P, v, &sb);
        char *text = NULL;
        st = tp__sb_finish(&sb, &text);
        if (st == TP_OK) st = tp_node_meta_set_str(n, "sym_shape", text);
        tp_free(text);
    }
    for (int i = 0; i < P.n_allocs; i++) tp_free(P.allocs[i]);
    tp_free(P.allocs);
    tp_free(P.keys);
    tp_free(P.vals);
    return st;
}
