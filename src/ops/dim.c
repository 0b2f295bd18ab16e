/*
 * dim.c - the dim type of shape rules: integer arithmetic on concrete
 * sizes, expressions and guards while the symbolic pass has installed an
 * env (see dim.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dim.h"

static _Thread_local tp_sym_env *g_env;

tp_sym_env *tp__sym_env_set(tp_sym_env *env) {
    tp_sym_env *old = g_env;
    g_env = env;
    return old;
}

tp_sym_env *tp__sym_env(void) { return g_env; }

void tp__dim_give_up(void) {
    if (g_env) g_env->fail = true;
}

const sd_e *tp__tensor_sym(const tp_tensor *t) { return t ? t->sym : NULL; }

void tp__tensor_set_sym(tp_tensor *t, const sd_e *sym) { t->sym = sym; }

tp_sdim tp__dim(const tp_tensor *t, int i) {
    tp_sdim d = {t->sizes[i], NULL};
    if (t->sym && g_env && t->sym[i]) {
        int64_t c;
        sd_e e = sd_subst(g_env->sd, t->sym[i]);
        if (!e) g_env->fail = true;
        else if (!sd_is_const(e, &c)) d.e = e;
    }
    return d;
}

int tp__dims(const tp_tensor *t, tp_sdim *d) {
    for (int i = 0; i < t->ndim; i++) d[i] = tp__dim(t, i);
    return t->ndim;
}

/* ---- arithmetic ---- */

static sd_e expr(tp_sdim a) { return a.e ? a.e : sd_const(g_env->sd, a.v); }

/* The result of an operation with example value v and expression e: a
 * constant expression becomes a plain number. */
static tp_sdim make(int64_t v, sd_e e) {
    tp_sdim d = {v, NULL};
    int64_t c;
    if (!e) {
        g_env->fail = true;
        return d;
    }
    e = sd_subst(g_env->sd, e);
    if (!e) g_env->fail = true;
    else if (!sd_is_const(e, &c)) d.e = e;
    else d.v = c;
    return d;
}

static bool symbolic(tp_sdim a, tp_sdim b) { return g_env && (a.e || b.e); }

tp_sdim tp__dim_add(tp_sdim a, tp_sdim b) {
    int64_t v = (int64_t)((uint64_t)a.v + (uint64_t)b.v);
    return symbolic(a, b) ? make(v, sd_add(g_env->sd, expr(a), expr(b))) : tp__dimk(v);
}

tp_sdim tp__dim_sub(tp_sdim a, tp_sdim b) {
    int64_t v = (int64_t)((uint64_t)a.v - (uint64_t)b.v);
    return symbolic(a, b) ? make(v, sd_sub(g_env->sd, expr(a), expr(b))) : tp__dimk(v);
}

tp_sdim tp__dim_mul(tp_sdim a, tp_sdim b) {
    int64_t v = (int64_t)((uint64_t)a.v * (uint64_t)b.v);
    return symbolic(a, b) ? make(v, sd_mul(g_env->sd, expr(a), expr(b))) : tp__dimk(v);
}

tp_sdim tp__dim_addk(tp_sdim a, int64_t k) { return tp__dim_add(a, tp__dimk(k)); }

tp_sdim tp__dim_mulk(tp_sdim a, int64_t k) { return tp__dim_mul(a, tp__dimk(k)); }

static int64_t floordiv(int64_t a, int64_t k) {
    int64_t q = a / k;
    return (a % k != 0 && a < 0) ? q - 1 : q;
}

tp_sdim tp__dim_floordiv(tp_sdim a, int64_t k) {
    if (k < 1) {
        if (g_env) g_env->fail = true;
        return tp__dimk(0);
    }
    int64_t v = floordiv(a.v, k);
    return symbolic(a, a) ? make(v, sd_floordiv(g_env->sd, a.e, k)) : tp__dimk(v);
}

tp_sdim tp__dim_ceildiv(tp_sdim a, int64_t k) {
    if (k < 1) {
        if (g_env) g_env->fail = true;
        return tp__dimk(0);
    }
    int64_t v = a.v / k + (a.v % k != 0 && a.v > 0); /* no negation: a.v may be INT64_MIN */
    return symbolic(a, a) ? make(v, sd_ceildiv(g_env->sd, a.e, k)) : tp__dimk(v);
}

int tp__dim_print(tp_sdim d, char *buf, size_t size) {
    if (d.e && g_env) return sd_print(g_env->sd, d.e, buf, size);
    return snprintf(buf, size, "%" PRId64, d.v);
}

/* ---- guards ---- */

static void report(int rc, const char *what, const char *fmt, tp_sdim a, tp_sdim b) {
    char x[200], y[200], line[640];
    tp__dim_print(a, x, sizeof x);
    tp__dim_print(b, y, sizeof y);
    snprintf(line, sizeof line, fmt, what ? what : "size", x, y);
    if (rc != SD_OK) g_env->fail = true;
    if (g_env->decided) g_env->decided(g_env->user, rc, line);
}

bool tp__dim_eq(tp_sdim a, tp_sdim b, const char *what) {
    if (a.v != b.v) return false;
    if (!symbolic(a, b)) return true;
    sd_e x = expr(a), y = expr(b);
    if (!x || !y) {
        g_env->fail = true;
        return true;
    }
    if (sd_equal(sd_subst(g_env->sd, x), sd_subst(g_env->sd, y))) return true;
    report(sd_require_eq(g_env->sd, x, y), what, "%s: %s == %s", a, b);
    return true;
}

bool tp__dim_eqk(tp_sdim a, int64_t k, const char *what) { return tp__dim_eq(a, tp__dimk(k), what); }

bool tp__dim_ge(tp_sdim a, int64_t k, const char *what) {
    if (a.v < k) return false;
    if (!symbolic(a, a)) return true;
    report(sd_require_ge(g_env->sd, a.e, k), what, "%s: %s >= %s", a, tp__dimk(k));
    return true;
}

bool tp__dim_divisible(tp_sdim a, int64_t k, const char *what) {
    if (k < 1 || a.v % k != 0) return false;
    if (!symbolic(a, a)) return true;
    char x[200], line[640];
    tp__dim_print(a, x, sizeof x);
    int rc = sd_require_div(g_env->sd, a.e, k);
    snprintf(line, sizeof line, "%s: %s must be divisible by %" PRId64, what ? what : "size", x, k);
    if (rc != SD_OK) g_env->fail = true;
    if (g_env->decided) g_env->decided(g_env->user, rc, line);
    return true;
}

bool tp__dim_le(tp_sdim a, tp_sdim b, const char *what) {
    if (a.v > b.v) return false;
    if (!symbolic(a, b)) return true;
    return tp__dim_ge(tp__dim_sub(b, a), 0, what);
}

tp_sdim tp__dim_min(tp_sdim a, tp_sdim b, const char *what) {
    if (a.v <= b.v) {
        tp__dim_le(a, b, what);
        return a;
    }
    tp__dim_le(b, a, what);
    return b;
}

tp_sdim tp__dim_max(tp_sdim a, tp_sdim b, const char *what) {
    if (a.v >= b.v) {
        tp__dim_le(b, a, what);
        return a;
    }
    tp__dim_le(a, b, what);
    return b;
}

bool tp__dim_same(tp_sdim a, tp_sdim b) {
    if (!a.e && !b.e) return a.v == b.v;
    if (!a.e || !b.e || !g_env) return false;
    return sd_equal(sd_subst(g_env->sd, a.e), sd_subst(g_env->sd, b.e));
}

bool tp__dim_broadcast(tp_sdim a, tp_sdim b, tp_sdim *out) {
    if (!symbolic(a, b)) {
        if (a.v == b.v || b.v == 1) *out = a;
        else if (a.v == 1) *out = b;
        else return false;
        return true;
    }
    /* equal expressions, or a constant 1 on either side: nothing to decide */
    if (a.e && b.e && sd_equal(a.e, b.e)) {
        *out = a;
        return true;
    }
    if (!a.e && a.v == 1) {
        *out = b;
        return true;
    }
    if (!b.e && b.v == 1) {
        *out = a;
        return true;
    }
    char x[200], y[200], what[480];
    tp__dim_print(a, x, sizeof x);
    tp__dim_print(b, y, sizeof y);
    snprintf(what, sizeof what, "broadcasting %s against %s", x, y);
    if (a.v == 1) { /* the example broadcasts a: it must stay 1 */
        tp__dim_eqk(a, 1, what);
        *out = b;
        return true;
    }
    if (b.v == 1) {
        tp__dim_eqk(b, 1, what);
        *out = a;
        return true;
    }
    if (!tp__dim_eq(a, b, what)) return false;
    *out = a;
    return true;
}

tp_status tp__dims_broadcast(int na, const tp_sdim *a, int nb, const tp_sdim *b, int *nout, tp_sdim *out) {
    int n = na > nb ? na : nb;
    tp_sdim r[TP_MAX_DIMS];
    TP_CHECK(n <= TP_MAX_DIMS, TP_ERR_SHAPE, "broadcast result has more than %d dims", TP_MAX_DIMS);
    for (int i = 0; i < n; i++) {
        int ia = i - (n - na), ib = i - (n - nb);
        tp_sdim da = ia >= 0 ? a[ia] : tp__dimk(1), db = ib >= 0 ? b[ib] : tp__dimk(1);
        if (!tp__dim_broadcast(da, db, &r[i])) { /* the error of the int version, word for word */
            int64_t sa[TP_MAX_DIMS], sb[TP_MAX_DIMS], so[TP_MAX_DIMS];
            int no;
            for (int k = 0; k < na; k++) sa[k] = a[k].v;
            for (int k = 0; k < nb; k++) sb[k] = b[k].v;
            return tp__broadcast_shapes(na, sa, nb, sb, &no, so);
        }
    }
    memcpy(out, r, (size_t)n * sizeof *r);
    *nout = n;
    return TP_OK;
}

/* ---- int arguments and results ---- */

tp_sdim tp__value_sdim(const tp_value *v) {
    tp_sdim d = tp__dimk(tp_value_as_i64(v));
    if (!g_env) return d;
    for (int i = 0; i < g_env->n_ints; i++)
        if (g_env->ints[i].slot == v) {
            g_env->ints[i].read = true;
            d.e = g_env->ints[i].e;
        }
    return d;
}

tp_status tp__out_int(tp_value *out, tp_sdim d) {
    tp_value_clear(out);
    *out = tp_value_int(d.v);
    if (g_env) {
        g_env->has_int_result = true;
        g_env->int_result = d.e ? d.e : sd_const(g_env->sd, d.v);
    }
    return TP_OK;
}

/* ---- outputs ---- */

tp_status tp__out_dims(tp_value *out, tp_dtype dtype, int nd, const tp_sdim *d) {
    int64_t sizes[TP_MAX_DIMS] = {0};
    bool sym = false;
    TP_CHECK(nd >= 0 && nd <= TP_MAX_DIMS, TP_ERR_SHAPE, "result would have %d dims (at most %d)", nd, TP_MAX_DIMS);
    for (int i = 0; i < nd; i++) {
        sizes[i] = d[i].v;
        sym = sym || d[i].e;
    }
    tp_tensor *t;
    TP_TRY(tp_tensor_meta(dtype, nd, sizes, &t));
    if (sym && g_env) {
        sd_e *s = g_env->alloc ? g_env->alloc(g_env->user, (size_t)nd * sizeof *s) : NULL;
        if (!s) {
            g_env->fail = true;
        } else {
            for (int i = 0; i < nd; i++) s[i] = d[i].e;
            t->sym = s;
        }
    }
    tp_value_clear(out);
    *out = tp_value_tensor(t);
    return TP_OK;
}

void tp__tensor_set_dims(tp_tensor *t, const tp_sdim *d) {
    bool sym = false;
    for (int i = 0; i < t->ndim; i++) sym = sym || d[i].e;
    if (!sym || !g_env) return;
    sd_e *s = g_env->alloc ? g_env->alloc(g_env->user, (size_t)t->ndim * sizeof *s) : NULL;
    if (!s) {
        g_env->fail = true;
        return;
    }
    for (int i = 0; i < t->ndim; i++) s[i] = d[i].e;
    t->sym = s;
}

tp_status tp__out_like(tp_value *out, tp_dtype dtype, const tp_tensor *x) {
    tp_sdim d[TP_MAX_DIMS];
    int nd = tp__dims(x, d);
    return tp__out_dims(out, dtype, nd, d);
}
