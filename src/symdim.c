/*
 * symdim.c - symbolic dimension expressions (canonical polynomials over
 * symbols and floor-division atoms) and the decision procedures for the
 * relations ops impose on sizes (equality, divisibility, lower bounds).
 * See symdim.h.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symdim.h"

#define SD_MAX_DEG 8
#define FD_BASE (1 << 20)

typedef struct sd_term {
    int64_t c;
    int deg;
    int32_t at[SD_MAX_DEG]; /* sorted atom ids: symbols < FD_BASE <= floordiv atoms */
} sd_term;

struct sd_poly {
    int n;
    sd_term t[]; /* sorted by (deg, atoms); no zero coefficients */
};

typedef struct fd_atom {
    sd_e num;
    int64_t k;
} fd_atom;

typedef struct symrec {
    char *name;
    int64_t min, max, ex;
    int pref;
    sd_state st;
    sd_e rep;
} symrec;

struct sd_ctx {
    void **allocs;
    int n_allocs, cap_allocs;
    symrec *syms;
    int n_syms, cap_syms;
    fd_atom *fds;
    int n_fds, cap_fds;
    sd_finding *f;
    int n_f, cap_f;
    bool overflow;
};

/* ---- memory ---------------------------------------------------------------------------- */

static bool grow(void **arr, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *p = tp_realloc(*arr, (size_t)nc * elem);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

static struct sd_poly *alloc_poly(sd_ctx *c, int n) {
    if (!grow((void **)&c->allocs, &c->cap_allocs, c->n_allocs + 1, sizeof(void *))) {
        c->overflow = true;
        return NULL;
    }
    struct sd_poly *p = tp_malloc(sizeof *p + (size_t)(n > 0 ? n : 1) * sizeof(sd_term));
    if (!p) {
        c->overflow = true;
        return NULL;
    }
    p->n = n;
    c->allocs[c->n_allocs++] = p;
    return p;
}

sd_ctx *sd_new(void) { return tp_calloc(1, sizeof(sd_ctx)); }

void sd_free(sd_ctx *c) {
    if (!c) return;
    for (int i = 0; i < c->n_allocs; i++) tp_free(c->allocs[i]);
    for (int i = 0; i < c->n_syms; i++) tp_free(c->syms[i].name);
    tp_free(c->allocs);
    tp_free(c->syms);
    tp_free(c->fds);
    tp_free(c->f);
    tp_free(c);
}

bool sd_overflowed(const sd_ctx *c) { return c->overflow; }

/* ---- symbols ------------------------------------------------------------------------------ */

int sd_sym_new(sd_ctx *c, const char *name, int64_t min, int64_t max, int64_t example, int pref) {
    if (!grow((void **)&c->syms, &c->cap_syms, c->n_syms + 1, sizeof(symrec))) return -1;
    char *n = tp_strdup(name);
    if (!n) return -1;
    c->syms[c->n_syms] = (symrec){n, min, max, example, pref, SD_FREE, NULL};
    return c->n_syms++;
}

int sd_num_syms(const sd_ctx *c) { return c->n_syms; }
const char *sd_sym_name(const sd_ctx *c, int s) { return c->syms[s].name; }
sd_state sd_sym_state(const sd_ctx *c, int s) { return c->syms[s].st; }
int64_t sd_sym_min(const sd_ctx *c, int s) { return c->syms[s].min; }
int64_t sd_sym_max(const sd_ctx *c, int s) { return c->syms[s].max; }
int64_t sd_sym_example(const sd_ctx *c, int s) { return c->syms[s].ex; }
sd_e sd_sym_replacement(const sd_ctx *c, int s) { return c->syms[s].rep; }

/* ---- canonical polynomials ------------------------------------------------------------------ */

static int cmp_mono(const sd_term *a, const sd_term *b) {
    if (a->deg != b->deg) return a->deg < b->deg ? -1 : 1;
    for (int i = 0; i < a->deg; i++)
        if (a->at[i] != b->at[i]) return a->at[i] < b->at[i] ? -1 : 1;
    return 0;
}

static int cmp_mono_q(const void *a, const void *b) { return cmp_mono(a, b); }

/* Sort and merge terms (taken by value) into a new polynomial. */
static sd_e normalize(sd_ctx *c, sd_term *t, int n) {
    if (n > 1) qsort(t, (size_t)n, sizeof *t, cmp_mono_q);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && cmp_mono(&t[m - 1], &t[i]) == 0) {
            if (__builtin_add_overflow(t[m - 1].c, t[i].c, &t[m - 1].c)) {
                c->overflow = true;
                return NULL;
            }
        } else {
            t[m++] = t[i];
        }
        if (t[m - 1].c == 0) m--;
    }
    struct sd_poly *p = alloc_poly(c, m);
    if (!p) return NULL;
    memcpy(p->t, t, (size_t)m * sizeof *t);
    return p;
}

sd_e sd_const(sd_ctx *c, int64_t v) {
    struct sd_poly *p = alloc_poly(c, v != 0);
    if (!p) return NULL;
    if (v) p->t[0] = (sd_term){v, 0, {0}};
    return p;
}

static sd_e atom_poly(sd_ctx *c, int32_t atom) {
    struct sd_poly *p = alloc_poly(c, 1);
    if (!p) return NULL;
    p->t[0] = (sd_term){1, 1, {atom}};
    return p;
}

sd_e sd_sym(sd_ctx *c, int s) { return s >= 0 && s < c->n_syms ? atom_poly(c, s) : NULL; }

static sd_e combine(sd_ctx *c, sd_e a, sd_e b, int64_t sb) {
    if (!a || !b) return NULL;
    int n = a->n + b->n;
    sd_term *t = tp_malloc((size_t)(n > 0 ? n : 1) * sizeof *t);
    if (!t) {
        c->overflow = true;
        return NULL;
    }
    memcpy(t, a->t, (size_t)a->n * sizeof *t);
    for (int i = 0; i < b->n; i++) {
        t[a->n + i] = b->t[i];
        if (__builtin_mul_overflow(b->t[i].c, sb, &t[a->n + i].c)) c->overflow = true;
    }
    sd_e r = c->overflow ? NULL : normalize(c, t, n);
    tp_free(t);
    return r;
}

sd_e sd_add(sd_ctx *c, sd_e a, sd_e b) { return combine(c, a, b, 1); }
sd_e sd_sub(sd_ctx *c, sd_e a, sd_e b) { return combine(c, a, b, -1); }
sd_e sd_addk(sd_ctx *c, sd_e a, int64_t k) { return a ? sd_add(c, a, sd_const(c, k)) : NULL; }

sd_e sd_mul(sd_ctx *c, sd_e a, sd_e b) {
    if (!a || !b) return NULL;
    int n = a->n * b->n;
    sd_term *t = tp_malloc((size_t)(n > 0 ? n : 1) * sizeof *t);
    if (!t) {
        c->overflow = true;
        return NULL;
    }
    int k = 0;
    for (int i = 0; i < a->n && !c->overflow; i++)
        for (int j = 0; j < b->n && !c->overflow; j++) {
            const sd_term *x = &a->t[i], *y = &b->t[j];
            sd_term r;
            memset(&r, 0, sizeof r);
            if (x->deg + y->deg > SD_MAX_DEG || __builtin_mul_overflow(x->c, y->c, &r.c)) {
                c->overflow = true;
                break;
            }
            int p = 0, q = 0;
            while (p < x->deg || q < y->deg) {
                if (q >= y->deg || (p < x->deg && x->at[p] <= y->at[q])) r.at[r.deg++] = x->at[p++];
                else r.at[r.deg++] = y->at[q++];
            }
            t[k++] = r;
        }
    sd_e r = c->overflow ? NULL : normalize(c, t, k);
    tp_free(t);
    return r;
}

sd_e sd_mulk(sd_ctx *c, sd_e a, int64_t k) { return a ? sd_mul(c, a, sd_const(c, k)) : NULL; }

bool sd_equal(sd_e a, sd_e b) {
    if (!a || !b || a->n != b->n) return false;
    for (int i = 0; i < a->n; i++)
        if (a->t[i].c != b->t[i].c || cmp_mono(&a->t[i], &b->t[i]) != 0) return false;
    return true;
}

bool sd_is_const(sd_e a, int64_t *v) {
    if (!a) return false;
    if (a->n == 0) {
        if (v) *v = 0;
        return true;
    }
    if (a->n == 1 && a->t[0].deg == 0) {
        if (v) *v = a->t[0].c;
        return true;
    }
    return false;
}

bool sd_affine1(sd_e a, int *sym, int64_t *scale, int64_t *offset) {
    if (!a) return false;
    *sym = -1;
    *scale = 0;
    *offset = 0;
    for (int i = 0; i < a->n; i++) {
        const sd_term *t = &a->t[i];
        if (t->deg == 0) *offset = t->c;
        else if (t->deg == 1 && t->at[0] < FD_BASE && *sym < 0) {
            *sym = t->at[0];
            *scale = t->c;
        } else return false;
    }
    return true;
}

static int64_t floordiv64(int64_t a, int64_t k) {
    int64_t q = a / k;
    if ((a % k) != 0 && ((a < 0) != (k < 0))) q--;
    return q;
}

static int64_t gcd64(int64_t a, int64_t b) {
    if (a < 0) a = -a;
    if (b < 0) b = -b;
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int32_t intern_fd(sd_ctx *c, sd_e num, int64_t k) {
    for (int i = 0; i < c->n_fds; i++)
        if (c->fds[i].k == k && sd_equal(c->fds[i].num, num)) return FD_BASE + i;
    if (!grow((void **)&c->fds, &c->cap_fds, c->n_fds + 1, sizeof(fd_atom))) {
        c->overflow = true;
        return -1;
    }
    c->fds[c->n_fds] = (fd_atom){num, k};
    return FD_BASE + c->n_fds++;
}

sd_e sd_floordiv(sd_ctx *c, sd_e a, int64_t k) {
    if (!a || k < 1) return NULL;
    if (k == 1) return a;
    sd_term *q = tp_malloc((size_t)(a->n + 1) * sizeof *q), *r = tp_malloc((size_t)(a->n + 1) * sizeof *r);
    if (!q || !r) {
        tp_free(q);
        tp_free(r);
        c->overflow = true;
        return NULL;
    }
    int nq = 0, nr = 0;
    int64_t cst = 0;
    for (int i = 0; i < a->n; i++) {
        const sd_term *t = &a->t[i];
        if (t->deg == 0) cst = t->c;
        else if (t->c % k == 0) {
            q[nq] = *t;
            q[nq++].c = t->c / k;
        } else r[nr++] = *t;
    }
    int64_t cq = floordiv64(cst, k), cr = cst - cq * k;
    q[nq++] = (sd_term){cq, 0, {0}};
    sd_e result = normalize(c, q, nq);
    if (nr > 0 && result) {
        int64_t g = k;
        for (int i = 0; i < nr; i++) g = gcd64(g, r[i].c);
        g = gcd64(g, cr);
        if (g == 0) g = 1; /* k > 0 makes this unreachable; keeps the divisions obviously safe */
        for (int i = 0; i < nr; i++) r[i].c /= g;
        int64_t k2 = k / g;
        cr /= g;
        int32_t atom;
        if (nr == 1 && cr == 0 && r[0].c == 1 && r[0].deg == 1 && r[0].at[0] >= FD_BASE) {
            const fd_atom *inner = &c->fds[r[0].at[0] - FD_BASE];
            int64_t kk;
            if (__builtin_mul_overflow(inner->k, k2, &kk)) c->overflow = true;
            atom = c->overflow ? -1 : intern_fd(c, inner->num, kk);
        } else {
            r[nr++] = (sd_term){cr, 0, {0}};
            sd_e num = normalize(c, r, nr);
            atom = num ? intern_fd(c, num, k2) : -1;
        }
        result = atom >= 0 ? sd_add(c, result, atom_poly(c, atom)) : NULL;
    }
    tp_free(q);
    tp_free(r);
    return result;
}

sd_e sd_ceildiv(sd_ctx *c, sd_e a, int64_t k) { return sd_floordiv(c, sd_addk(c, a, k - 1), k); }

static sd_e subst_atom(sd_ctx *c, int32_t atom, int depth);

static sd_e subst_rec(sd_ctx *c, sd_e a, int depth) {
    if (!a || depth > 64) return NULL;
    sd_e acc = sd_const(c, 0);
    for (int i = 0; i < a->n && acc; i++) {
        const sd_term *t = &a->t[i];
        sd_e prod = sd_const(c, t->c);
        for (int j = 0; j < t->deg && prod; j++) prod = sd_mul(c, prod, subst_atom(c, t->at[j], depth));
        acc = sd_add(c, acc, prod);
    }
    return acc;
}

static sd_e subst_atom(sd_ctx *c, int32_t atom, int depth) {
    if (atom >= FD_BASE) {
        const fd_atom f = c->fds[atom - FD_BASE];
        return sd_floordiv(c, subst_rec(c, f.num, depth + 1), f.k);
    }
    const symrec *s = &c->syms[atom];
    if (s->st == SD_FREE) return atom_poly(c, atom);
    return subst_rec(c, s->rep, depth + 1);
}

sd_e sd_subst(sd_ctx *c, sd_e a) { return subst_rec(c, a, 0); }

static bool eval_rec(const sd_ctx *c, sd_e a, const int64_t *vals, int64_t *out) {
    int64_t acc = 0;
    for (int i = 0; i < a->n; i++) {
        const sd_term *t = &a->t[i];
        int64_t v = t->c;
        for (int j = 0; j < t->deg; j++) {
            int64_t x;
            if (t->at[j] >= FD_BASE) {
                const fd_atom *f = &c->fds[t->at[j] - FD_BASE];
                int64_t nv;
                if (!eval_rec(c, f->num, vals, &nv)) return false;
                x = floordiv64(nv, f->k);
            } else {
                x = vals ? vals[t->at[j]] : c->syms[t->at[j]].ex;
            }
            if (__builtin_mul_overflow(v, x, &v)) return false;
        }
        if (__builtin_add_overflow(acc, v, &acc)) return false;
    }
    *out = acc;
    return true;
}

bool sd_eval(const sd_ctx *c, sd_e a, const int64_t *vals, int64_t *out) {
    return a != NULL && eval_rec(c, a, vals, out);
}

/* ---- printing ------------------------------------------------------------------------------ */

typedef struct pbuf {
    char *buf;
    size_t size, len;
} pbuf;

static void pput(pbuf *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pput(pbuf *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = p->len < p->size ? p->size - p->len : 0;
    int n = vsnprintf(room ? p->buf + p->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) p->len += (size_t)n;
}

static void print_rec(const sd_ctx *c, sd_e a, pbuf *p) {
    if (a->n == 0) {
        pput(p, "0");
        return;
    }
    bool first = true;
    /* non-constant terms (highest degree first), then the constant */
    for (int pass = 0; pass < 2; pass++)
        for (int i = a->n - 1; i >= 0; i--) {
            const sd_term *t = &a->t[i];
            if ((pass == 0) != (t->deg > 0)) continue;
            int64_t cf = t->c;
            if (!first) {
                pput(p, cf < 0 ? " - " : " + ");
                if (cf < 0) cf = -cf;
            } else if (cf < 0 && t->deg > 0 && cf == -1) {
                pput(p, "-");
                cf = 1;
            }
            first = false;
            if (t->deg == 0) {
                pput(p, "%" PRId64, cf);
                continue;
            }
            bool need_star = false;
            if (cf != 1) {
                pput(p, "%" PRId64, cf);
                need_star = true;
            }
            for (int j = 0; j < t->deg; j++) {
                if (need_star) pput(p, "*");
                need_star = true;
                if (t->at[j] >= FD_BASE) {
                    const fd_atom *f = &c->fds[t->at[j] - FD_BASE];
                    bool wrap = t->deg > 1 || cf != 1;
                    pput(p, wrap ? "((" : "(");
                    print_rec(c, f->num, p);
                    pput(p, ")//%" PRId64 "%s", f->k, wrap ? ")" : "");
                } else {
                    pput(p, "%s", c->syms[t->at[j]].name);
                }
            }
        }
}

int sd_print(const sd_ctx *c, sd_e a, char *buf, size_t size) {
    pbuf p = {buf, size, 0};
    if (size) buf[0] = '\0';
    if (!a) pput(&p, "?");
    else print_rec(c, a, &p);
    return (int)p.len;
}

/* ---- symbol sets ------------------------------------------------------------------------------- */

static void syms_of(const sd_ctx *c, sd_e a, bool *set, bool nonlinear_only, bool inside) {
    for (int i = 0; i < a->n; i++) {
        const sd_term *t = &a->t[i];
        for (int j = 0; j < t->deg; j++) {
            if (t->at[j] >= FD_BASE) syms_of(c, c->fds[t->at[j] - FD_BASE].num, set, nonlinear_only, true);
            else if (!nonlinear_only || inside || t->deg > 1) set[t->at[j]] = true;
        }
    }
}

bool sd_mentions(sd_ctx *c, sd_e a, int s) {
    sd_e e = sd_subst(c, a);
    if (!e) return false;
    bool *set = tp_calloc((size_t)c->n_syms + 1, 1);
    if (!set) return false;
    syms_of(c, e, set, false, false);
    bool r = set[s];
    tp_free(set);
    return r;
}

/* ---- decisions ---------------------------------------------------------------------------------- */

static int add_finding(sd_ctx *c, sd_finding f) {
    if (!grow((void **)&c->f, &c->cap_f, c->n_f + 1, sizeof f)) {
        c->overflow = true;
        return SD_OVERFLOW;
    }
    c->f[c->n_f++] = f;
    return SD_OK;
}

int sd_take_findings(sd_ctx *c, const sd_finding **out) {
    *out = c->f;
    int n = c->n_f;
    c->n_f = 0;
    return n;
}

static int specialise(sd_ctx *c, int s) {
    symrec *y = &c->syms[s];
    y->rep = sd_const(c, y->ex);
    if (!y->rep) return SD_OVERFLOW;
    y->st = SD_STATIC;
    return add_finding(c, (sd_finding){SD_F_STATIC, s, -1, 0, 0, y->ex, 0, 0});
}

/* The most preferred symbol of a set (highest pref, then highest index). */
static int preferred(const sd_ctx *c, const bool *set) {
    int best = -1;
    for (int i = 0; i < c->n_syms; i++)
        if (set[i] && (best < 0 || c->syms[i].pref >= c->syms[best].pref)) best = i;
    return best;
}

static bool is_affine(sd_e a) {
    for (int i = 0; i < a->n; i++)
        if (a->t[i].deg > 1 || (a->t[i].deg == 1 && a->t[i].at[0] >= FD_BASE)) return false;
    return true;
}

static int64_t ceildiv64(int64_t a, int64_t k) { return -floordiv64(-a, k); }

/* t = a*k + b with a >= 1: replace t, narrow k to what t's range allows. */
static int tie(sd_ctx *c, int t, int k, int64_t a, int64_t b) {
    symrec *yt = &c->syms[t], *yk = &c->syms[k];
    sd_e rep = sd_addk(c, sd_mulk(c, sd_sym(c, k), a), b);
    if (!rep) return SD_OVERFLOW;
    yt->rep = rep;
    yt->st = SD_REPLACED;
    int64_t lo = ceildiv64(yt->min - b, a);
    if (lo > yk->min) yk->min = lo;
    if (yt->max != TP_DIM_UNBOUNDED) {
        int64_t hi = floordiv64(yt->max - b, a);
        if (hi < yk->max) yk->max = hi;
    }
    return add_finding(c, (sd_finding){SD_F_TIE, t, k, a, b, 0, 0, 0});
}

int sd_require_eq(sd_ctx *c, sd_e x, sd_e y) {
    sd_e d = sd_subst(c, sd_sub(c, x, y));
    bool *set = tp_calloc((size_t)c->n_syms + 1, 1);
    int rc = SD_OK;
    for (int guard = 0; guard < 2 * c->n_syms + 4; guard++) {
        if (!d || !set) {
            rc = SD_OVERFLOW;
            break;
        }
        int64_t v;
        if (sd_is_const(d, &v)) {
            rc = v == 0 ? SD_OK : SD_CONTRADICTION;
            break;
        }
        if (!sd_eval(c, d, NULL, &v)) {
            rc = SD_OVERFLOW;
            break;
        }
        if (v != 0) {
            rc = SD_CONTRADICTION;
            break;
        }
        memset(set, 0, (size_t)c->n_syms + 1);
        int victim = -1;
        if (is_affine(d)) {
            syms_of(c, d, set, false, false);
            int n = 0, s[2] = {-1, -1};
            int64_t cf[2] = {0, 0}, c0 = 0;
            for (int i = 0; i < d->n; i++) {
                if (d->t[i].deg == 0) c0 = d->t[i].c;
                else {
                    if (n < 2) {
                        s[n] = d->t[i].at[0];
                        cf[n] = d->t[i].c;
                    }
                    n++;
                }
            }
            if (n == 1) {
                rc = specialise(c, s[0]);
                break;
            }
            if (n == 2) {
                /* try eliminating the preferred one first */
                int order[2] = {0, 1};
                if (c->syms[s[0]].pref > c->syms[s[1]].pref ||
                    (c->syms[s[0]].pref == c->syms[s[1]].pref && s[0] > s[1])) {
                    order[0] = 0;
                    order[1] = 1;
                } else {
                    order[0] = 1;
                    order[1] = 0;
                }
                bool done = false;
                for (int o = 0; o < 2 && !done; o++) {
                    int ti = order[o], ki = 1 - ti;
                    int64_t ct = cf[ti], ck = cf[ki];
                    if (ck % ct != 0 || c0 % ct != 0) continue;
                    int64_t a = -ck / ct, b = -c0 / ct;
                    if (a < 1) continue;
                    rc = tie(c, s[ti], s[ki], a, b);
                    done = true;
                }
                if (done) break;
            }
            if (n >= 3) {
                /* keep a pair that can be tied (opposite signs, divisible
                 * coefficients); specialise a symbol outside it */
                bool keep[2048] = {false};
                bool found = false;
                for (int i = 0; i < d->n && !found; i++)
                    for (int j = 0; j < d->n && !found; j++) {
                        const sd_term *ti = &d->t[i], *tk = &d->t[j];
                        if (i == j || ti->deg != 1 || tk->deg != 1) continue;
                        if (tk->c % ti->c != 0 || -tk->c / ti->c < 1) continue;
                        if (ti->at[0] < 2048 && tk->at[0] < 2048) {
                            keep[ti->at[0]] = keep[tk->at[0]] = true;
                            found = true;
                        }
                    }
                if (found) {
                    for (int i = 0; i < c->n_syms && i < 2048; i++)
                        if (keep[i]) set[i] = false;
                }
            }
            victim = preferred(c, set);
        } else {
            syms_of(c, d, set, true, false);
            victim = preferred(c, set);
            if (victim < 0) {
                syms_of(c, d, set, false, false);
                victim = preferred(c, set);
            }
        }
        if (victim < 0) {
            rc = SD_CONTRADICTION;
            break;
        }
        if ((rc = specialise(c, victim)) != SD_OK) break;
        d = sd_subst(c, d);
    }
    tp_free(set);
    return rc;
}

static int64_t mod64(int64_t a, int64_t k) {
    int64_t r = a % k;
    return r < 0 ? r + k : r;
}

int sd_require_div(sd_ctx *c, sd_e x, int64_t k) {
    if (k == 0) return SD_CONTRADICTION;
    if (k < 0) k = -k;
    if (k == 1) return SD_OK;
    sd_e e = sd_subst(c, x);
    bool *set = tp_calloc((size_t)c->n_syms + 1, 1);
    int rc = SD_OK;
    for (int guard = 0; guard < c->n_syms + 4; guard++) {
        if (!e || !set) {
            rc = SD_OVERFLOW;
            break;
        }
        int64_t v;
        if (!sd_eval(c, e, NULL, &v)) {
            rc = SD_OVERFLOW;
            break;
        }
        if (mod64(v, k) != 0) {
            rc = SD_CONTRADICTION;
            break;
        }
        /* the residue: terms whose coefficient is not a multiple of k */
        int n = 0, sym = -1;
        int64_t a = 0;
        bool simple = true;
        memset(set, 0, (size_t)c->n_syms + 1);
        for (int i = 0; i < e->n; i++) {
            const sd_term *t = &e->t[i];
            if (t->deg == 0 || mod64(t->c, k) == 0) continue;
            n++;
            if (t->deg == 1 && t->at[0] < FD_BASE) {
                sym = t->at[0];
                a = mod64(t->c, k);
                set[sym] = true;
            } else {
                simple = false;
                for (int j = 0; j < t->deg; j++) {
                    if (t->at[j] >= FD_BASE) syms_of(c, c->fds[t->at[j] - FD_BASE].num, set, false, true);
                    else set[t->at[j]] = true;
                }
            }
        }
        if (n == 0) break; /* constant residue, divisible at the example */
        if (n == 1 && simple) {
            symrec *y = &c->syms[sym];
            int64_t m = k / gcd64(a, k), r0 = mod64(y->ex, m);
            char name[160];
            snprintf(name, sizeof name, "_%s", y->name);
            for (int i = 2; i < 100; i++) {
                bool clash = false;
                for (int j = 0; j < c->n_syms && !clash; j++) clash = strcmp(c->syms[j].name, name) == 0;
                if (!clash) break;
                snprintf(name, sizeof name, "_%s%d", y->name, i);
            }
            int64_t lo = ceildiv64(y->min - r0, m), hi = TP_DIM_UNBOUNDED;
            if (lo < 0) lo = 0;
            if (y->max != TP_DIM_UNBOUNDED) hi = floordiv64(y->max - r0, m);
            int fresh = sd_sym_new(c, name, lo, hi, (y->ex - r0) / m, y->pref);
            if (fresh < 0) {
                rc = SD_OVERFLOW;
                break;
            }
            y = &c->syms[sym]; /* sd_sym_new may move the table */
            y->rep = sd_addk(c, sd_mulk(c, sd_sym(c, fresh), m), r0);
            if (!y->rep) {
                rc = SD_OVERFLOW;
                break;
            }
            y->st = SD_REPLACED;
            rc = add_finding(c, (sd_finding){SD_F_DIV, sym, fresh, m, r0, 0, lo, hi});
            break;
        }
        int victim = preferred(c, set);
        if (victim < 0) {
            rc = SD_CONTRADICTION;
            break;
        }
        if ((rc = specialise(c, victim)) != SD_OK) break;
        bool *ns = tp_realloc(set, (size_t)c->n_syms + 1);
        if (!ns) {
            rc = SD_OVERFLOW;
            break;
        }
        set = ns;
        e = sd_subst(c, e);
    }
    tp_free(set);
    return rc;
}

/* Monotonicity of a in symbol s: 1 non-decreasing, -1 non-increasing,
 * 2 independent, 0 unknown. Symbols are non-negative. */
static int mono(const sd_ctx *c, sd_e a, int s) {
    int dir = 2;
    for (int i = 0; i < a->n; i++) {
        const sd_term *t = &a->t[i];
        int td = 2;
        bool other_fd = false;
        for (int j = 0; j < t->deg; j++) {
            if (t->at[j] >= FD_BASE) {
                int m = mono(c, c->fds[t->at[j] - FD_BASE].num, s);
                if (m == 2) {
                    other_fd = true;
                    continue;
                }
                if (t->deg > 1 || m == 0) return 0;
                td = t->c > 0 ? m : -m;
            } else if (t->at[j] == s) {
                td = t->c > 0 ? 1 : -1;
            }
        }
        if (td == 2) continue;
        if (other_fd) return 0;
        if (dir == 2) dir = td;
        else if (dir != td) return 0;
    }
    return dir;
}

static bool ge_at(const sd_ctx *c, sd_e e, const int64_t *vals, int64_t k) {
    int64_t v;
    return sd_eval(c, e, vals, &v) && v >= k;
}

int sd_require_ge(sd_ctx *c, sd_e x, int64_t k) {
    sd_e e = sd_subst(c, x);
    int rc = SD_OK;
    bool *set = NULL;
    int64_t *vals = NULL;
    for (int guard = 0; guard < c->n_syms + 4; guard++) {
        tp_free(set);
        tp_free(vals);
        set = tp_calloc((size_t)c->n_syms + 1, 1);
        vals = tp_calloc((size_t)c->n_syms + 1, sizeof *vals);
        if (!e || !set || !vals) {
            rc = SD_OVERFLOW;
            break;
        }
        int64_t v;
        if (sd_is_const(e, &v)) {
            rc = v >= k ? SD_OK : SD_CONTRADICTION;
            break;
        }
        if (!sd_eval(c, e, NULL, &v)) {
            rc = SD_OVERFLOW;
            break;
        }
        if (v < k) {
            rc = SD_CONTRADICTION;
            break;
        }
        syms_of(c, e, set, false, false);
        bool *unknown = tp_calloc((size_t)c->n_syms + 1, 1);
        if (!unknown) {
            rc = SD_OVERFLOW;
            break;
        }
        int n_unknown = 0;
        int *dir = tp_calloc((size_t)c->n_syms + 1, sizeof *dir);
        if (!dir) {
            tp_free(unknown);
            rc = SD_OVERFLOW;
            break;
        }
        for (int s = 0; s < c->n_syms; s++) {
            vals[s] = c->syms[s].ex;
            if (!set[s]) continue;
            dir[s] = mono(c, e, s);
            if (dir[s] == 0) {
                unknown[s] = true;
                n_unknown++;
            }
        }
        if (n_unknown) {
            int victim = preferred(c, unknown);
            tp_free(unknown);
            tp_free(dir);
            if ((rc = specialise(c, victim)) != SD_OK) break;
            e = sd_subst(c, e);
            continue;
        }
        tp_free(unknown);
        /* refine one symbol at a time towards its worst end */
        for (int s = 0; s < c->n_syms && rc == SD_OK; s++) {
            if (!set[s] || dir[s] == 2) continue;
            symrec *y = &c->syms[s];
            if (dir[s] > 0) {
                vals[s] = y->min;
                if (ge_at(c, e, vals, k)) continue;
                int64_t lo = y->min, hi = y->ex; /* lo fails, hi passes */
                while (hi - lo > 1) {
                    int64_t mid = lo + (hi - lo) / 2;
                    vals[s] = mid;
                    if (ge_at(c, e, vals, k)) hi = mid;
                    else lo = mid;
                }
                vals[s] = hi;
                y->min = hi;
                rc = add_finding(c, (sd_finding){SD_F_RANGE, s, -1, 0, 0, 0, y->min, y->max});
            } else {
                int64_t top = y->max;
                if (top == TP_DIM_UNBOUNDED) {
                    /* find a failing value by doubling */
                    int64_t probe = y->ex > 0 ? y->ex : 1;
                    top = -1;
                    for (int i = 0; i < 62; i++) {
                        if (probe > INT64_MAX / 2) break;
                        probe *= 2;
                        vals[s] = probe;
                        if (!ge_at(c, e, vals, k)) {
                            top = probe;
                            break;
                        }
                    }
                    if (top < 0) { /* never fails */
                        vals[s] = y->ex;
                        continue;
                    }
                } else {
                    vals[s] = top;
                    if (ge_at(c, e, vals, k)) continue;
                }
                int64_t lo = y->ex, hi = top; /* lo passes, hi fails */
                while (hi - lo > 1) {
                    int64_t mid = lo + (hi - lo) / 2;
                    vals[s] = mid;
                    if (ge_at(c, e, vals, k)) lo = mid;
                    else hi = mid;
                }
                vals[s] = lo;
                y->max = lo;
                rc = add_finding(c, (sd_finding){SD_F_RANGE, s, -1, 0, 0, 0, y->min, y->max});
            }
        }
        tp_free(dir);
        break;
    }
    tp_free(set);
    tp_free(vals);
    return rc;
}
