/*
 * symshape.c - symbolic shape propagation through an exported graph: every
 * node's output gets a symbolic shape (symdim.h expressions over the
 * dynamic dims of the user inputs) computed by the op's own shape rule -
 * the one the dispatcher and the planner run - over meta tensors whose
 * dims carry expressions (src/ops/dim.h), and the relations the rule's
 * guards rely on (broadcast equality, matmul inner dims, reshape
 * divisibility, conv/pool output sizes >= 1, slice bounds, cat sizes, ...)
 * are decided by the symdim constraint store; the caller
 * turns the resulting findings into violations / suggested fixes / program
 * constraints (shapes.c). A node whose rule cannot be followed
 * symbolically (it builds its result from plain ints, reads a symbolic int
 * as a plain int, gives up, or disagrees with the traced example) while
 * one of its inputs has a symbolic dim gets an unknown shape and is
 * counted as a fallback: the caller then runs the replay check for the
 * whole graph.
 * Each node gets meta "sym_shape" (e.g. "[s0, 3, (s1 - 1)//2 + 1]").
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/dim.h"
#include "export_impl.h"
#include "symshape.h"

/* With TP_SYMSHAPE_TRACE set in the environment, export lists on stderr
 * each node with a symbolic input: "op" when its op's shape rule gave the
 * symbolic shape, "none" when it could not (the node falls back). A
 * developer aid; read once per propagation. */
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

static sd_e S(rctx *r, sd_e e) { return sd_subst(r->sd, e); }
static sd_e K(rctx *r, int64_t v) { return sd_const(r->sd, v); }

/* ---- dispatch ----------------------------------------------------------------------------- */

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

/* In bound args, replace int nodes whose value is a constant by the int
 * (symbolic ones stay nodes: op_rule passes them with their expression). */
static void fold_int_nodes(prop *P, tp_value *v) {
    if (v->kind == TP_VAL_NODE) {
        const sval *s = map_get(P, v->u.node);
        int64_t c;
        if (s && s->kind == SV_INT && s->d[0] && sd_is_const(sd_subst(P->sd, s->d[0]), &c)) *v = tp_value_int(c);
        return;
    }
    if (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE)
        for (int64_t i = 0; i < v->u.seq.n; i++) fold_int_nodes(P, &v->u.seq.items[i]);
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
                for (int i = 0; ok && i < nb; i++) fold_int_nodes(&P, &bound[i]);
                if (ok) {
                    rctx r = {&P, sd, n, op, bound, nb, false, NULL};
                    v = op_rule(&r);
                    SYM_TRACE(v ? "op" : "none", op);
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
