/*
 * shapes.c - dynamic-shape specs (tp_shapes: named, derived and static dims,
 * hints), their text form, applying "Suggested fixes:", and the constraint
 * solver run at the end of an export.
 *
 * The solver treats every dynamic dim as a symbol with a range. Its primary
 * mechanism is symbolic: symshape.c propagates symbolic shapes through every
 * node's symbolic shape rule and symdim.c decides each relation the ops
 * need for the whole range (equality -> tie / specialisation, divisibility
 * -> a fresh dim n = m*_n + r, lower bounds -> range refinement); the
 * findings arrive here (on_decided) and become solver states and, for named
 * dims and Dim.DYNAMIC, violations with "Suggested fixes:" lines (Dim.AUTO:
 * applied silently). Nodes without a symbolic rule fall back to *replaying
 * shape inference*: copy the traced graph, give the user placeholders
 * shapes for other values of the free symbols (inside their ranges) and
 * re-run every node's shape rule (tp_graph_infer_meta); a probe failing
 * when one symbol moves alone reveals a tie (moving with another passes), a
 * divisibility (steps of k pass), a specialisation (nothing passes), or a
 * narrower range (only the ends fail). The replay also runs as a
 * cross-check when asked (tp_export_options.replay_check,
 * TP_EXPORT_REPLAY_CHECK=1). Accepted relations are recorded in the
 * program as dim rules, ranges and equality constraints.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export_impl.h"
#include "symshape.h"

/* ---- the spec object ---------------------------------------------------------------- */

typedef struct dimdef {
    char *name;
    bool derived;
    int64_t min, max; /* roots */
    bool min_given;
    char *root;       /* derived: root name (a root) */
    int64_t scale, offset;
} dimdef;

typedef enum spec_kind { SPEC_NAME, SPEC_STATIC, SPEC_AUTO, SPEC_HSTATIC, SPEC_DYNAMIC, SPEC_NONE } spec_kind;

typedef struct site {
    char *input;
    int dim;
    spec_kind kind;
    char *name;    /* SPEC_NAME */
    int64_t value; /* SPEC_STATIC */
} site;

struct tp_shapes {
    dimdef *dims;
    int n_dims, cap_dims;
    site *sites;
    int n_sites, cap_sites;
};

tp_status tp_shapes_new(tp_shapes **out) {
    *out = tp_calloc(1, sizeof **out);
    TP_CHECK(*out != NULL, TP_ERR_NOMEM, "out of memory");
    return TP_OK;
}

void tp_shapes_free(tp_shapes *s) {
    if (!s) return;
    for (int i = 0; i < s->n_dims; i++) {
        tp_free(s->dims[i].name);
        tp_free(s->dims[i].root);
    }
    for (int i = 0; i < s->n_sites; i++) {
        tp_free(s->sites[i].input);
        tp_free(s->sites[i].name);
    }
    tp_free(s->dims);
    tp_free(s->sites);
    tp_free(s);
}

static dimdef *find_dim(const tp_shapes *s, const char *name) {
    for (int i = 0; i < s->n_dims; i++)
        if (strcmp(s->dims[i].name, name) == 0) return &s->dims[i];
    return NULL;
}

static bool is_ident(const char *s) {
    if (!s || !(isalpha((unsigned char)*s) || *s == '_')) return false;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_')) return false;
    return true;
}

static tp_status push_dim(tp_shapes *s, dimdef d) {
    if (s->n_dims == s->cap_dims) {
        int cap = s->cap_dims ? s->cap_dims * 2 : 8;
        dimdef *n = tp_realloc(s->dims, (size_t)cap * sizeof *n);
        if (!n) {
            tp_free(d.name);
            tp_free(d.root);
            return tp_error(TP_ERR_NOMEM, "out of memory");
        }
        s->dims = n;
        s->cap_dims = cap;
    }
    s->dims[s->n_dims++] = d;
    return TP_OK;
}

static void range_text(int64_t min, int64_t max, char *buf, size_t size) {
    if (max == TP_DIM_UNBOUNDED) snprintf(buf, size, "{'min': %" PRId64 ", 'max': None}", min);
    else snprintf(buf, size, "{'min': %" PRId64 ", 'max': %" PRId64 "}", min, max);
}

tp_status tp_shapes_dim(tp_shapes *s, const char *name, int64_t min, int64_t max) {
    TP_CHECK(is_ident(name), TP_ERR_INVALID_ARG, "dimension name must be an identifier, got '%s'", name ? name : "");
    bool given = min >= 0;
    if (min < 0) min = 0;
    TP_CHECK(max >= min, TP_ERR_INVALID_ARG, "max must be an integer no less than min, got %" PRId64, max);
    dimdef *d = find_dim(s, name);
    if (d) {
        char a[96], b[96];
        range_text(d->min, d->max, a, sizeof a);
        range_text(min, max, b, sizeof b);
        TP_CHECK(!d->derived && d->min == min && d->max == max, TP_ERR_INVALID_ARG,
                 "found conflicting definitions for symbolic dimension '%s': %s and %s", name,
                 d->derived ? "a derived dimension" : a, b);
        return TP_OK;
    }
    char *n = tp_strdup(name);
    TP_CHECK(n != NULL, TP_ERR_NOMEM, "out of memory");
    return push_dim(s, (dimdef){n, false, min, max, given, NULL, 1, 0});
}

static void linear_name(const char *root, int64_t scale, int64_t offset, char *buf, size_t size) {
    if (scale == 1) snprintf(buf, size, "%s", root);
    else snprintf(buf, size, "%" PRId64 "*%s", scale, root);
    size_t n = strlen(buf);
    if (offset > 0) snprintf(buf + n, size - n, " + %" PRId64, offset);
    else if (offset < 0) snprintf(buf + n, size - n, " - %" PRId64, -offset);
}

tp_status tp_shapes_derived(tp_shapes *s, const char *name, const char *root, int64_t scale, int64_t offset) {
    TP_CHECK(name && *name, TP_ERR_INVALID_ARG, "derived dimension needs a name");
    TP_CHECK(scale >= 1, TP_ERR_INVALID_ARG, "derived dimensions require a positive scale, got %" PRId64, scale);
    const dimdef *r = root ? find_dim(s, root) : NULL;
    TP_CHECK(r != NULL, TP_ERR_NOT_FOUND, "derived dimension '%s' refers to unknown dimension '%s'", name,
             root ? root : "");
    const char *rn = r->name;
    if (r->derived) {
        offset = scale * r->offset + offset;
        scale = scale * r->scale;
        rn = r->root;
    }
    dimdef *d = find_dim(s, name);
    if (d) {
        TP_CHECK(d->derived && strcmp(d->root, rn) == 0 && d->scale == scale && d->offset == offset,
                 TP_ERR_INVALID_ARG, "found conflicting definitions for symbolic dimension '%s'", name);
        return TP_OK;
    }
    char *n = tp_strdup(name), *rr = tp_strdup(rn);
    if (!n || !rr) {
        tp_free(n);
        tp_free(rr);
        return tp_error(TP_ERR_NOMEM, "out of memory");
    }
    return push_dim(s, (dimdef){n, true, 0, TP_DIM_UNBOUNDED, false, rr, scale, offset});
}

/* Parse "[k*]name[ +/- k]"; returns false if it is not that form. */
static bool parse_linear(const char *text, char *name, size_t name_size, int64_t *scale, int64_t *offset) {
    const char *p = text;
    while (isspace((unsigned char)*p)) p++;
    *scale = 1;
    *offset = 0;
    if (isdigit((unsigned char)*p)) {
        char *end;
        long long k = strtoll(p, &end, 10);
        const char *q = end;
        while (isspace((unsigned char)*q)) q++;
        if (*q != '*') return false;
        *scale = k;
        p = q + 1;
        while (isspace((unsigned char)*p)) p++;
    }
    size_t n = 0;
    if (!(isalpha((unsigned char)*p) || *p == '_')) return false;
    while (isalnum((unsigned char)p[n]) || p[n] == '_') n++;
    if (n >= name_size) return false;
    memcpy(name, p, n);
    name[n] = '\0';
    p += n;
    while (isspace((unsigned char)*p)) p++;
    if (*p == '+' || *p == '-') {
        char sign = *p++;
        while (isspace((unsigned char)*p)) p++;
        if (!isdigit((unsigned char)*p)) return false;
        char *end;
        long long k = strtoll(p, &end, 10);
        *offset = sign == '-' ? -k : k;
        p = end;
        while (isspace((unsigned char)*p)) p++;
    }
    return *p == '\0' && *scale >= 1;
}

static bool parse_int(const char *text, int64_t *v) {
    const char *p = text;
    while (isspace((unsigned char)*p)) p++;
    if (!isdigit((unsigned char)*p)) return false;
    char *end;
    long long k = strtoll(p, &end, 10);
    while (isspace((unsigned char)*end)) end++;
    if (*end) return false;
    *v = k;
    return true;
}

tp_status tp_shapes_set(tp_shapes *s, const char *input, int dim, const char *spec) {
    TP_CHECK(input && *input, TP_ERR_INVALID_ARG, "dynamic_shapes input key is empty");
    TP_CHECK(dim >= 0, TP_ERR_TYPE, "dimension index must be a non-negative int, got %d", dim);
    TP_CHECK(spec != NULL, TP_ERR_TYPE, "dimension spec is NULL");
    site st = {NULL, dim, SPEC_NONE, NULL, 0};
    char name[128];
    int64_t scale, offset, v;
    if (strcmp(spec, "None") == 0) st.kind = SPEC_NONE;
    else if (strcmp(spec, "auto") == 0 || strcmp(spec, "Dim.AUTO") == 0) st.kind = SPEC_AUTO;
    else if (strcmp(spec, "static") == 0 || strcmp(spec, "Dim.STATIC") == 0) st.kind = SPEC_HSTATIC;
    else if (strcmp(spec, "dynamic") == 0 || strcmp(spec, "Dim.DYNAMIC") == 0) st.kind = SPEC_DYNAMIC;
    else if (parse_int(spec, &v)) {
        st.kind = SPEC_STATIC;
        st.value = v;
    } else if (parse_linear(spec, name, sizeof name, &scale, &offset)) {
        if (!find_dim(s, name)) TP_TRY(tp_shapes_dim(s, name, -1, TP_DIM_UNBOUNDED));
        char full[192];
        linear_name(name, scale, offset, full, sizeof full);
        if (scale != 1 || offset != 0) TP_TRY(tp_shapes_derived(s, full, name, scale, offset));
        st.kind = SPEC_NAME;
        st.name = tp_strdup(full);
        TP_CHECK(st.name != NULL, TP_ERR_NOMEM, "out of memory");
    } else {
        return tp_error(TP_ERR_TYPE,
                        "dimension spec must be int or Dim (a dim hint or None is also accepted), got '%s'", spec);
    }
    st.input = tp_strdup(input);
    if (!st.input) {
        tp_free(st.name);
        return tp_error(TP_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < s->n_sites; i++) {
        if (s->sites[i].dim == dim && strcmp(s->sites[i].input, input) == 0) {
            tp_free(s->sites[i].input);
            tp_free(s->sites[i].name);
            s->sites[i] = st;
            return TP_OK;
        }
    }
    if (s->n_sites == s->cap_sites) {
        int cap = s->cap_sites ? s->cap_sites * 2 : 8;
        site *n = tp_realloc(s->sites, (size_t)cap * sizeof *n);
        if (!n) {
            tp_free(st.input);
            tp_free(st.name);
            return tp_error(TP_ERR_NOMEM, "out of memory");
        }
        s->sites = n;
        s->cap_sites = cap;
    }
    s->sites[s->n_sites++] = st;
    return TP_OK;
}

tp_status tp_shapes_copy(const tp_shapes *s, tp_shapes **out) {
    TP_TRY(tp_shapes_new(out));
    tp_shapes *c = *out;
    tp_status st = TP_OK;
    for (int i = 0; st == TP_OK && i < s->n_dims; i++) {
        dimdef d = s->dims[i];
        d.name = tp_strdup(d.name);
        d.root = d.root ? tp_strdup(d.root) : NULL;
        if (!d.name || (s->dims[i].root && !d.root)) {
            tp_free(d.name);
            tp_free(d.root);
            st = tp_error(TP_ERR_NOMEM, "out of memory");
        } else st = push_dim(c, d);
    }
    for (int i = 0; st == TP_OK && i < s->n_sites; i++) {
        const site *x = &s->sites[i];
        char buf[64];
        const char *spec = x->kind == SPEC_NAME     ? x->name
                           : x->kind == SPEC_AUTO   ? "auto"
                           : x->kind == SPEC_HSTATIC ? "static"
                           : x->kind == SPEC_DYNAMIC ? "dynamic"
                           : x->kind == SPEC_NONE    ? "None"
                                                     : (snprintf(buf, sizeof buf, "%" PRId64, x->value), buf);
        if (x->kind == SPEC_NAME) {
            /* keep the exact name (no re-parsing of derived names) */
            site ns = {tp_strdup(x->input), x->dim, SPEC_NAME, tp_strdup(x->name), 0};
            if (!ns.input || !ns.name) {
                tp_free(ns.input);
                tp_free(ns.name);
                st = tp_error(TP_ERR_NOMEM, "out of memory");
                break;
            }
            if (c->n_sites == c->cap_sites) {
                int cap = c->cap_sites ? c->cap_sites * 2 : 8;
                site *n = tp_realloc(c->sites, (size_t)cap * sizeof *n);
                if (!n) {
                    tp_free(ns.input);
                    tp_free(ns.name);
                    st = tp_error(TP_ERR_NOMEM, "out of memory");
                    break;
                }
                c->sites = n;
                c->cap_sites = cap;
            }
            c->sites[c->n_sites++] = ns;
        } else {
            st = tp_shapes_set(c, x->input, x->dim, spec);
        }
    }
    if (st != TP_OK) {
        tp_shapes_free(c);
        *out = NULL;
    }
    return st;
}

static void dim_repr(const dimdef *d, tp_sb *sb) {
    if (d->derived) {
        tp__sb_puts(sb, d->name);
        return;
    }
    tp__sb_printf(sb, "Dim('%s'", d->name);
    if (d->min != 0) tp__sb_printf(sb, ", min=%" PRId64, d->min);
    if (d->max != TP_DIM_UNBOUNDED) tp__sb_printf(sb, ", max=%" PRId64, d->max);
    tp__sb_puts(sb, ")");
}

tp_status tp_shapes_to_string(const tp_shapes *s, char **out) {
    tp_sb sb = {0};
    tp__sb_puts(&sb, "{");
    bool first_input = true;
    for (int i = 0; i < s->n_sites; i++) {
        bool seen = false;
        for (int k = 0; k < i && !seen; k++) seen = strcmp(s->sites[k].input, s->sites[i].input) == 0;
        if (seen) continue;
        tp__sb_printf(&sb, "%s'%s': {", first_input ? "" : ", ", s->sites[i].input);
        first_input = false;
        bool first = true;
        for (int k = i; k < s->n_sites; k++) {
            const site *x = &s->sites[k];
            if (strcmp(x->input, s->sites[i].input) != 0) continue;
            tp__sb_printf(&sb, "%s%d: ", first ? "" : ", ", x->dim);
            first = false;
            switch (x->kind) {
            case SPEC_NAME: {
                const dimdef *d = find_dim(s, x->name);
                if (d) dim_repr(d, &sb);
                else tp__sb_puts(&sb, x->name);
                break;
            }
            case SPEC_STATIC: tp__sb_printf(&sb, "%" PRId64, x->value); break;
            case SPEC_AUTO: tp__sb_puts(&sb, "Dim.AUTO"); break;
            case SPEC_HSTATIC: tp__sb_puts(&sb, "Dim.STATIC"); break;
            case SPEC_DYNAMIC: tp__sb_puts(&sb, "Dim.DYNAMIC"); break;
            case SPEC_NONE: tp__sb_puts(&sb, "None"); break;
            }
        }
        tp__sb_puts(&sb, "}");
    }
    tp__sb_puts(&sb, "}");
    return tp__sb_finish(&sb, out);
}

/* ---- applying suggested fixes ----------------------------------------------------------- */

static tp_status set_root_range(tp_shapes *s, const char *name, int64_t min, int64_t max, bool given) {
    dimdef *d = find_dim(s, name);
    if (!d) {
        TP_TRY(tp_shapes_dim(s, name, min, max));
        find_dim(s, name)->min_given = given;
        return TP_OK;
    }
    if (d->derived) {
        tp_free(d->root);
        d->root = NULL;
        d->derived = false;
        d->scale = 1;
        d->offset = 0;
    }
    d->min = min;
    d->max = max;
    d->min_given = given;
    return TP_OK;
}

tp_status tp_shapes_apply_fixes(tp_shapes *s, const char *message) {
    TP_CHECK(message != NULL, TP_ERR_INVALID_ARG, "message is NULL");
    const char *sec = strstr(message, "Suggested fixes:");
    TP_CHECK(sec != NULL, TP_ERR_INVALID_ARG, "suggested fixes were not found");
    sec += strlen("Suggested fixes:");
    int applied = 0;
    while (*sec) {
        const char *eol = strchr(sec, '\n');
        size_t len = eol ? (size_t)(eol - sec) : strlen(sec);
        char line[512];
        if (len >= sizeof line) len = sizeof line - 1;
        memcpy(line, sec, len);
        line[len] = '\0';
        sec = eol ? eol + 1 : sec + len;
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = '\0';
        char name[128];
        int64_t sc, off;
        if (!parse_linear(line, name, sizeof name, &sc, &off) || sc != 1 || off != 0) continue;
        const char *rhs = eq + 1;
        while (isspace((unsigned char)*rhs)) rhs++;
        char rhs_buf[384];
        snprintf(rhs_buf, sizeof rhs_buf, "%s", rhs);
        for (char *e = rhs_buf + strlen(rhs_buf); e > rhs_buf && isspace((unsigned char)e[-1]); e--) e[-1] = '\0';
        int64_t v;
        char other[128];
        if (strncmp(rhs_buf, "Dim(", 4) == 0) {
            /* Dim('n', min=a, max=b) */
            const char *q = strchr(rhs_buf, '\'');
            const char *q2 = q ? strchr(q + 1, '\'') : NULL;
            TP_CHECK(q && q2, TP_ERR_INVALID_ARG, "unsupported suggested fix expression: '%s'", rhs_buf);
            const char *mn = strstr(q2, "min="), *mx = strstr(q2, "max=");
            int64_t min = mn ? strtoll(mn + 4, NULL, 10) : 0;
            int64_t max = mx ? strtoll(mx + 4, NULL, 10) : TP_DIM_UNBOUNDED;
            TP_TRY(set_root_range(s, name, min, max, mn != NULL));
            applied++;
        } else if (parse_int(rhs_buf, &v)) {
            /* specialise every use of name (and of dims derived from it) */
            for (int i = 0; i < s->n_sites; i++) {
                site *x = &s->sites[i];
                if (x->kind != SPEC_NAME) continue;
                const dimdef *d = find_dim(s, x->name);
                int64_t val;
                if (strcmp(x->name, name) == 0 && (!d || !d->derived)) val = v;
                else if (d && d->derived && strcmp(d->root, name) == 0) val = d->scale * v + d->offset;
                else continue;
                tp_free(x->name);
                x->name = NULL;
                x->kind = SPEC_STATIC;
                x->value = val;
            }
            applied++;
        } else if (parse_linear(rhs_buf, other, sizeof other, &sc, &off)) {
            const dimdef *r = find_dim(s, other);
            TP_CHECK(r != NULL, TP_ERR_INVALID_ARG,
                     "fix references unknown dimension '%s'; it must appear in dynamic_shapes or in an earlier "
                     "suggested fix",
                     other);
            if (sc == 1 && off == 0) {
                /* alias: every use of name becomes a use of other */
                for (int i = 0; i < s->n_sites; i++) {
                    site *x = &s->sites[i];
                    if (x->kind == SPEC_NAME && strcmp(x->name, name) == 0) {
                        char *n = tp_strdup(other);
                        TP_CHECK(n != NULL, TP_ERR_NOMEM, "out of memory");
                        tp_free(x->name);
                        x->name = n;
                    }
                }
                /* dims derived from name now derive from other */
                for (int i = 0; i < s->n_dims; i++) {
                    dimdef *d = &s->dims[i];
                    if (d->derived && strcmp(d->root, name) == 0) {
                        char *n = tp_strdup(other);
                        TP_CHECK(n != NULL, TP_ERR_NOMEM, "out of memory");
                        tp_free(d->root);
                        d->root = n;
                    }
                }
            } else {
                dimdef *d = find_dim(s, name);
                const char *rn = r->derived ? r->root : r->name;
                int64_t fs = r->derived ? sc * r->scale : sc, fo = r->derived ? sc * r->offset + off : off;
                char *rr = tp_strdup(rn);
                TP_CHECK(rr != NULL, TP_ERR_NOMEM, "out of memory");
                if (d) {
                    tp_free(d->root);
                    d->root = rr;
                    d->derived = true;
                    d->scale = fs;
                    d->offset = fo;
                } else {
                    char *n = tp_strdup(name);
                    if (!n) {
                        tp_free(rr);
                        return tp_error(TP_ERR_NOMEM, "out of memory");
                    }
                    TP_TRY(push_dim(s, (dimdef){n, true, 0, TP_DIM_UNBOUNDED, false, rr, fs, fo}));
                }
            }
            applied++;
        } else {
            return tp_error(TP_ERR_INVALID_ARG, "unsupported suggested fix expression: '%s'", rhs_buf);
        }
    }
    TP_CHECK(applied > 0, TP_ERR_INVALID_ARG, "no supported shape fixes were found");
    return TP_OK;
}

/* ---- the solver ------------------------------------------------------------------------------ */

typedef enum sym_kind { SYM_NAMED, SYM_AUTO, SYM_DYNAMIC } sym_kind;
typedef enum sym_state { SYM_FREE, SYM_STATIC, SYM_TIED } sym_state;

typedef struct sym {
    char name[128];
    sym_kind kind;
    sym_state state;
    int64_t example, min, max;
    bool min_given;
    int64_t value;     /* STATIC */
    int tied_to;       /* TIED: this = a*sym[tied_to] + b */
    int64_t a, b;
    int64_t rmin;      /* lower bound used for reasoning (2 unless min given) */
    char first_site[320];
} sym;

typedef struct rsite {
    char path[256];
    int input;         /* index into inputs */
    int dim;
    const tp_tensor *example;
    int sym;           /* -1: static */
    int64_t scale, offset;
} rsite;

typedef struct solver {
    tp_ctx *ctx;
    const user_input_info *inputs;
    int n_inputs;
    tp_program *p;
    sym *syms;
    int n_syms, cap_syms;
    bool too_many;
    rsite *sites;
    int n_sites;
    tp_sb violations; /* "  - ..." lines */
    tp_sb fixes;      /* "    name = ..." lines */
    tp_sb names;      /* violated dim names */
    int n_violations;
    char last_error[1024];
    sd_ctx *sd;        /* the symbolic pass */
    bool replaying;    /* the replay check is running */
    int cross_findings;
} solver;

static const tp_value *value_at_path(const tp_value *v, const char *q) {
    while (v && *q == '[') {
        q++;
        if (*q == '\'') {
            const char *end = strchr(q + 1, '\'');
            if (!end) return NULL;
            char key[128];
            size_t n = (size_t)(end - q - 1);
            if (n >= sizeof key) return NULL;
            memcpy(key, q + 1, n);
            key[n] = '\0';
            v = v->kind == TP_VAL_DICT ? tp_value_dict_get(v, key) : NULL;
            q = end + 1;
        } else {
            char *end;
            long long idx = strtoll(q, &end, 10);
            v = (v->kind == TP_VAL_LIST || v->kind == TP_VAL_TUPLE) ? tp_value_at(v, idx) : NULL;
            q = end;
        }
        if (*q != ']') return NULL;
        q++;
    }
    return *q ? NULL : v;
}

static int find_sym(const solver *s, const char *name) {
    for (int i = 0; i < s->n_syms; i++)
        if (strcmp(s->syms[i].name, name) == 0) return i;
    return -1;
}

static int new_sym(solver *s, const char *name, sym_kind kind, int64_t example, int64_t min, int64_t max, bool given,
                   const char *where) {
    sym *y = &s->syms[s->n_syms];
    memset(y, 0, sizeof *y);
    snprintf(y->name, sizeof y->name, "%s", name);
    y->kind = kind;
    y->state = SYM_FREE;
    y->example = example;
    y->min = min;
    y->max = max;
    y->min_given = given;
    snprintf(y->first_site, sizeof y->first_site, "%s", where);
    return s->n_syms++;
}

static void expected_names(const solver *s, char *buf, size_t size) {
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->n_inputs && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s'%s'", i ? ", " : "", s->inputs[i].name);
}

/* Resolve the spec's sites. */
static tp_status resolve(solver *s, const tp_shapes *spec) {
    for (int i = 0; i < spec->n_sites; i++) {
        const site *x = &spec->sites[i];
        /* the input: a name, or a position over user inputs, then a path */
        size_t rl = strcspn(x->input, "[");
        char root[128];
        TP_CHECK(rl < sizeof root, TP_ERR_INVALID_ARG, "dynamic_shapes key '%s' is too long", x->input);
        memcpy(root, x->input, rl);
        root[rl] = '\0';
        int idx = -1;
        bool numeric = rl > 0;
        for (size_t k = 0; k < rl; k++) numeric = numeric && isdigit((unsigned char)root[k]);
        char exp[1024];
        expected_names(s, exp, sizeof exp);
        if (numeric) {
            idx = atoi(root);
            TP_CHECK(idx < s->n_inputs, TP_ERR_INVALID_ARG,
                     "dynamic_shapes has more entries than user inputs: position %d, but the inputs are [%s]", idx,
                     exp);
        } else {
            for (int k = 0; k < s->n_inputs; k++)
                if (strcmp(s->inputs[k].name, root) == 0) idx = k;
            TP_CHECK(idx >= 0, TP_ERR_INVALID_ARG,
                     "dynamic_shapes key '%s' does not match any argument; expected one of [%s]", root, exp);
        }
        if (x->kind == SPEC_NONE) continue;
        char path[256];
        snprintf(path, sizeof path, "%s%s", s->inputs[idx].name, x->input + rl);
        const tp_value *v = value_at_path(s->inputs[idx].example, x->input + rl);
        TP_CHECK(v != NULL, TP_ERR_INVALID_ARG, "dynamic_shapes['%s'] does not name an element of input '%s'",
                 x->input, s->inputs[idx].name);
        TP_CHECK(v->kind == TP_VAL_TENSOR, TP_ERR_INVALID_ARG,
                 "cannot associate a shape with dynamic_shapes['%s']: it is a non-tensor input of type %s", x->input,
                 tp_value_kind_name(v->kind));
        const tp_tensor *t = v->u.tensor;
        TP_CHECK(x->dim < tp_tensor_ndim(t), TP_ERR_INVALID_ARG,
                 "dimension index %d at dynamic_shapes['%s'] is out of range for a %d-dimensional input", x->dim,
                 x->input, tp_tensor_ndim(t));
        int64_t size = tp_tensor_sizes(t)[x->dim];
        rsite *r = &s->sites[s->n_sites];
        memset(r, 0, sizeof *r);
        snprintf(r->path, sizeof r->path, "%s", path);
        r->input = idx;
        r->dim = x->dim;
        r->example = t;
        r->sym = -1;
        r->scale = 1;
        char where[320];
        snprintf(where, sizeof where, "%s.shape[%d]", path, x->dim);
        switch (x->kind) {
        case SPEC_STATIC:
            TP_CHECK(size == x->value, TP_ERR_CONSTRAINT,
                     "input size %" PRId64 " of dimension %d at dynamic_shapes['%s'] does not match the expected "
                     "static size %" PRId64,
                     size, x->dim, x->input, x->value);
            r->offset = size;
            break;
        case SPEC_HSTATIC:
        case SPEC_NONE: r->offset = size; break;
        case SPEC_AUTO:
        case SPEC_DYNAMIC: {
            char nm[32];
            int k = 0;
            do snprintf(nm, sizeof nm, "s%d", k++);
            while (find_sym(s, nm) >= 0 || find_dim(spec, nm));
            r->sym = new_sym(s, nm, x->kind == SPEC_AUTO ? SYM_AUTO : SYM_DYNAMIC, size, 0, TP_DIM_UNBOUNDED, false,
                             where);
            break;
        }
        case SPEC_NAME: {
            const dimdef *d = find_dim(spec, x->name);
            TP_CHECK(d != NULL, TP_ERR_NOT_FOUND, "dynamic_shapes['%s'] uses undeclared dimension '%s'", x->input,
                     x->name);
            const dimdef *rd = d->derived ? find_dim(spec, d->root) : d;
            TP_CHECK(rd != NULL, TP_ERR_NOT_FOUND, "derived dimension '%s' has no root", d->name);
            int64_t sc = d->derived ? d->scale : 1, off = d->derived ? d->offset : 0;
            int64_t dmin = sc * rd->min + off, dmax = rd->max == TP_DIM_UNBOUNDED ? TP_DIM_UNBOUNDED : sc * rd->max + off;
            if (size < dmin || size > dmax || (size - off) % sc != 0) {
                int64_t rv = (size - off) / sc;
                int64_t nmin = rd->min < rv ? rd->min : rv;
                int64_t nmax = rd->max == TP_DIM_UNBOUNDED ? TP_DIM_UNBOUNDED : (rd->max > rv ? rd->max : rv);
                char bound[96] = "";
                if (dmin) snprintf(bound, sizeof bound, "min=%" PRId64, dmin);
                if (dmax != TP_DIM_UNBOUNDED)
                    snprintf(bound + strlen(bound), sizeof bound - strlen(bound), "%smax=%" PRId64, dmin ? ", " : "",
                             dmax);
                char fix[160];
                if (nmax == TP_DIM_UNBOUNDED) snprintf(fix, sizeof fix, "Dim('%s', min=%" PRId64 ")", rd->name, nmin);
                else snprintf(fix, sizeof fix, "Dim('%s', min=%" PRId64 ", max=%" PRId64 ")", rd->name, nmin, nmax);
                return tp_error(TP_ERR_CONSTRAINT,
                                "input size %" PRId64 " of dimension %d at dynamic_shapes['%s'] violates %s(%s). "
                                "Suggested fixes:\n    %s = %s",
                                size, x->dim, x->input, d->name, bound, rd->name, fix);
            }
            int64_t rv = (size - off) / sc;
            int k = find_sym(s, rd->name);
            if (k < 0) k = new_sym(s, rd->name, SYM_NAMED, rv, rd->min, rd->max, rd->min_given, where);
            else
                TP_CHECK(s->syms[k].example == rv, TP_ERR_CONSTRAINT,
                         "%s = %" PRId64 " gives %s = %" PRId64 ", but %s gives %s = %" PRId64
                         ": the example inputs disagree on dimension '%s'",
                         where, size, rd->name, rv, s->syms[k].first_site, rd->name, s->syms[k].example, rd->name);
            r->sym = k;
            r->scale = sc;
            r->offset = off;
            break;
        }
        }
        s->n_sites++;
    }
    return TP_OK;
}

/* Symbol values for an assignment of the free symbols. */
static void fill_values(const solver *s, int64_t *vals) {
    for (int i = 0; i < s->n_syms; i++) {
        const sym *y = &s->syms[i];
        if (y->state == SYM_STATIC) vals[i] = y->value;
        else if (y->state == SYM_FREE && vals[i] == INT64_MIN) vals[i] = y->example;
    }
    for (int pass = 0; pass < 4; pass++)
        for (int i = 0; i < s->n_syms; i++) {
            const sym *y = &s->syms[i];
            if (y->state == SYM_TIED) vals[i] = y->a * vals[y->tied_to] + y->b;
        }
}

/* Meta value of an input with its site dims replaced. */
static tp_status meta_input(const solver *s, int input, const tp_value *v, const char *path, const int64_t *vals,
                            tp_value *out) {
    if (v->kind == TP_VAL_TENSOR) {
        int nd = tp_tensor_ndim(v->u.tensor);
        int64_t sizes[TP_MAX_DIMS];
        memcpy(sizes, tp_tensor_sizes(v->u.tensor), (size_t)nd * sizeof(int64_t));
        for (int k = 0; k < s->n_sites; k++) {
            const rsite *r = &s->sites[k];
            if (r->sym < 0 || strcmp(r->path, path) != 0) continue;
            sizes[r->dim] = r->scale * vals[r->sym] + r->offset;
            if (sizes[r->dim] < 0) sizes[r->dim] = 0;
        }
        tp_tensor *m;
        TP_TRY(tp_tensor_meta(tp_tensor_dtype(v->u.tensor), nd, sizes, &m));
        *out = tp_value_tensor(m);
        return TP_OK;
    }
    TP_TRY(tp_value_copy(v, out));
    if (out->kind == TP_VAL_LIST || out->kind == TP_VAL_TUPLE || out->kind == TP_VAL_DICT) {
        for (int64_t i = 0; i < out->u.seq.n; i++) {
            char sub[300];
            if (out->kind == TP_VAL_DICT) snprintf(sub, sizeof sub, "%s['%s']", path, out->u.seq.keys[i]);
            else snprintf(sub, sizeof sub, "%s[%lld]", path, (long long)i);
            tp_value c;
            tp_status st = meta_input(s, input, &v->u.seq.items[i], sub, vals, &c);
            if (st != TP_OK) {
                tp_value_clear(out);
                return st;
            }
            tp_value_clear(&out->u.seq.items[i]);
            out->u.seq.items[i] = c;
        }
    }
    return TP_OK;
}

/* Replay shape inference with symbol values vals. Returns true if every
 * shape rule passes and no size read as an int changes; otherwise records
 * the reason in s->last_error. */
static bool replay(solver *s, const int64_t *vals) {
    tp_graph *g = NULL;
    tp_status st = tp_graph_copy(tp_program_graph(s->p), &g);
    for (int i = 0; st == TP_OK && i < s->n_inputs; i++) {
        if (!s->inputs[i].placeholder) continue;
        tp_node *ph = tp_graph_find_node(g, tp_node_name(s->inputs[i].placeholder));
        if (!ph) continue;
        tp_value mv = tp_value_none();
        st = meta_input(s, i, s->inputs[i].example, s->inputs[i].name, vals, &mv);
        if (st == TP_OK) st = tp_node_set_meta_val(ph, &mv);
        tp_value_clear(&mv);
    }
    if (st == TP_OK) st = tp_graph_infer_meta(g);
    bool ok = st == TP_OK;
    if (!ok) snprintf(s->last_error, sizeof s->last_error, "%s", tp_last_error());
    /* a size read as an int that changes is the root cause (nodes after a
     * failed one keep their example shapes, so they never count) */
    for (int i = 0; i < s->ctx->n_reads; i++) {
        const size_read *r = &s->ctx->reads[i];
        tp_node *n = tp_graph_find_node(g, r->node);
        const tp_value *mv = n ? tp_node_meta_val(n) : NULL;
        if (r->dim < 0 && mv && mv->kind == TP_VAL_INT && mv->u.i != r->value) { /* tp_int_value */
            ok = false;
            snprintf(s->last_error, sizeof s->last_error,
                     "the forward read the int %s = %" PRId64 " as a C int at %s, which specialises it", r->node,
                     r->value, r->site);
            continue;
        }
        if (!mv || mv->kind != TP_VAL_TENSOR || r->dim < 0 || r->dim >= tp_tensor_ndim(mv->u.tensor)) continue;
        if (tp_tensor_sizes(mv->u.tensor)[r->dim] != r->value) {
            ok = false;
            snprintf(s->last_error, sizeof s->last_error,
                     "the forward read %s.shape[%d] = %" PRId64 " as an int at %s, which specialises it", r->node,
                     r->dim, r->value, r->site);
        }
    }
    tp_graph_free(g);
    tp_clear_error();
    return ok;
}

static bool try_values(solver *s, int a, int64_t va, int b, int64_t vb) {
    int64_t vals[64];
    for (int i = 0; i < s->n_syms; i++) vals[i] = INT64_MIN;
    vals[a] = va;
    if (b >= 0) vals[b] = vb;
    fill_values(s, vals);
    if (vals[a] < 0) return false;
    for (int i = 0; i < s->n_syms; i++)
        if (vals[i] < 0) return false;
    return replay(s, vals);
}

static int64_t test_min(const sym *y) {
    if (y->min_given) return y->min;
    return y->min > 2 ? y->min : 2;
}

static void describe(const solver *s, int k, char *buf, size_t size) {
    const sym *y = &s->syms[k];
    if (y->kind == SYM_NAMED) snprintf(buf, size, "%s (%s)", y->name, y->first_site);
    else snprintf(buf, size, "%s", y->first_site);
}

static void violation(solver *s, int k, const char *msg, const char *fix) {
    s->n_violations++;
    tp__sb_printf(&s->violations, "  - %s\n", msg);
    if (fix) tp__sb_printf(&s->fixes, "    %s\n", fix);
    tp__sb_printf(&s->names, "%s%s", s->names.len ? ", " : "", s->syms[k].name);
    if (s->ctx->draft) {
        char full[4600];
        int w = fix ? snprintf(full, sizeof full, "%s Suggested fixes:\n    %s", msg, fix)
                    : snprintf(full, sizeof full, "%s", msg);
        if (w < 0) full[0] = '\0'; /* a longer message is cut at the buffer */
        tp__ctx_add_failure(s->ctx, TP_FAILURE_CONSTRAINT, full);
    }
}

static void make_static(solver *s, int k, const char *why) {
    sym *y = &s->syms[k];
    char msg[4096], fix[160], d[512];
    describe(s, k, d, sizeof d);
    if (y->kind != SYM_AUTO) {
        snprintf(msg, sizeof msg, "Not all values of %s in the specified range are valid: the model requires %s = %" PRId64 " (%s)", d,
                 y->name, y->example, why);
        snprintf(fix, sizeof fix, "%s = %" PRId64, y->name, y->example);
        violation(s, k, msg, y->kind == SYM_NAMED ? fix : NULL);
    }
    y->state = SYM_STATIC;
    y->value = y->example;
}

/* t = a*s + b is required. */
static void make_tied(solver *s, int k, int t, int64_t a, int64_t b, const char *why) {
    sym *ys = &s->syms[k], *yt = &s->syms[t];
    if (yt->kind == SYM_AUTO) {
        yt->state = SYM_TIED;
        yt->tied_to = k;
        yt->a = a;
        yt->b = b;
        return;
    }
    if (ys->kind == SYM_AUTO && a == 1) {
        ys->state = SYM_TIED;
        ys->tied_to = t;
        ys->a = 1;
        ys->b = -b;
        return;
    }
    char expr[200], msg[4096], fix[400], dt[512], ds[512];
    linear_name(ys->name, a, b, expr, sizeof expr);
    describe(s, t, dt, sizeof dt);
    describe(s, k, ds, sizeof ds);
    snprintf(msg, sizeof msg, "The model requires %s == %s, but %s and %s are declared independent (%s)", yt->name,
             expr, dt, ds, why);
    snprintf(fix, sizeof fix, "%s = %s", yt->name, expr);
    violation(s, t, msg, yt->kind == SYM_NAMED && ys->kind == SYM_NAMED ? fix : NULL);
    yt->state = SYM_TIED;
    yt->tied_to = k;
    yt->a = a;
    yt->b = b;
}

/* Examine one free symbol; returns true if anything changed. */
static bool examine(solver *s, int k) {
    sym *y = &s->syms[k];
    int64_t e = y->example, lo = test_min(y), hi = y->max;
    if (lo > e) lo = e;
    int64_t probe = e + 1 <= hi ? e + 1 : e - 1;
    if (probe < lo || probe == e) return false;
    if (!try_values(s, k, probe, -1, 0)) {
        char why[1024];
        snprintf(why, sizeof why, "%s", s->last_error);
        int64_t step = probe - e;
        /* moving together with another symbol */
        for (int t = 0; t < s->n_syms; t++) {
            if (t == k || s->syms[t].state != SYM_FREE) continue;
            for (int64_t a = 1; a <= 4; a++) {
                int64_t et = s->syms[t].example;
                if (!try_values(s, k, probe, t, et + a * step)) continue;
                if (e + 2 * step >= lo && e + 2 * step <= hi && !try_values(s, k, e + 2 * step, t, et + 2 * a * step))
                    continue;
                make_tied(s, k, t, a, et - a * e, why);
                return true;
            }
        }
        /* divisibility */
        for (int64_t m = 2; m <= 8; m++) {
            if (e + 2 * m > hi) break;
            if (!try_values(s, k, e + m, -1, 0) || !try_values(s, k, e + 2 * m, -1, 0)) continue;
            if (y->kind == SYM_AUTO) break;
            char base[140], msg[4096], fix[800], d[512];
            snprintf(base, sizeof base, "_%s", y->name);
            describe(s, k, d, sizeof d);
            int64_t r = e % m;
            int64_t bmin = (y->min - r + m - 1) / m;
            if (bmin < 0) bmin = 0;
            char expr[200];
            linear_name(base, m, r, expr, sizeof expr);
            snprintf(msg, sizeof msg, "The model requires %s to be a multiple of %" PRId64 "%s (%s)", d, m,
                     r ? " plus a constant" : "", why);
            if (y->max == TP_DIM_UNBOUNDED)
                snprintf(fix, sizeof fix, "%s = Dim('%s', min=%" PRId64 ")\n    %s = %s", base, base, bmin, y->name, expr);
            else
                snprintf(fix, sizeof fix, "%s = Dim('%s', min=%" PRId64 ", max=%" PRId64 ")\n    %s = %s", base, base,
                         bmin, (y->max - r) / m, y->name, expr);
            violation(s, k, msg, y->kind == SYM_NAMED ? fix : NULL);
            y->state = SYM_STATIC;
            y->value = e;
            return true;
        }
        make_static(s, k, why);
        return true;
    }
    /* the ends of the range */
    int64_t far = hi != TP_DIM_UNBOUNDED ? hi : 2 * e + 7;
    bool lo_ok = lo == e || try_values(s, k, lo, -1, 0);
    char lo_why[1024] = "", hi_why[1024] = "";
    if (!lo_ok) snprintf(lo_why, sizeof lo_why, "%s", s->last_error);
    bool hi_ok = far <= e || try_values(s, k, far, -1, 0);
    if (!hi_ok) snprintf(hi_why, sizeof hi_why, "%s", s->last_error);
    if (lo_ok && hi_ok) return false;
    int64_t nlo = y->min, nhi = y->max;
    if (!lo_ok) { /* smallest passing value in (lo, e] */
        int64_t a = lo, b = e;
        while (b - a > 1) {
            int64_t mid = a + (b - a) / 2;
            if (try_values(s, k, mid, -1, 0)) b = mid;
            else a = mid;
        }
        nlo = b;
    }
    if (!hi_ok) { /* largest passing value in [e, far) */
        int64_t a = e, b = far;
        while (b - a > 1) {
            int64_t mid = a + (b - a) / 2;
            if (try_values(s, k, mid, -1, 0)) a = mid;
            else b = mid;
        }
        nhi = a;
    }
    char msg[4096], fix[400], d[512];
    describe(s, k, d, sizeof d);
    if (nhi == TP_DIM_UNBOUNDED) snprintf(fix, sizeof fix, "%s = Dim('%s', min=%" PRId64 ")", y->name, y->name, nlo);
    else snprintf(fix, sizeof fix, "%s = Dim('%s', min=%" PRId64 ", max=%" PRId64 ")", y->name, y->name, nlo, nhi);
    snprintf(msg, sizeof msg, "Not all values of %s in the specified range are valid: the model requires %s in [%" PRId64 ", %s] (%s)",
             d, y->name, nlo, nhi == TP_DIM_UNBOUNDED ? "inf" : "", !lo_ok ? lo_why : hi_why);
    if (nhi != TP_DIM_UNBOUNDED) {
        char *p = strstr(msg, ", ] (");
        if (p) {
            char tail[4096];
            snprintf(tail, sizeof tail, "%s", p + 3);
            snprintf(p, sizeof msg - (size_t)(p - msg), ", %" PRId64 "] %s", nhi, tail);
        }
    }
    if (y->kind != SYM_AUTO) violation(s, k, msg, y->kind == SYM_NAMED ? fix : NULL);
    y->min = nlo;
    y->min_given = true;
    y->max = nhi;
    return true;
}

/* ---- the symbolic pass ------------------------------------------------------------------------ */

/* Mirror the symdim findings of one decision into the solver's symbols and
 * report violations (silently for Dim.AUTO). */
static void on_decided(void *user, const char *why, const sd_finding *f, int n) {
    solver *s = user;
    for (int i = 0; i < n; i++) {
        const sd_finding *x = &f[i];
        if (x->sym < 0 || x->sym >= s->n_syms) continue;
        sym *y = &s->syms[x->sym];
        char msg[4096], fix[800], d[512];
        describe(s, x->sym, d, sizeof d);
        switch (x->kind) {
        case SD_F_STATIC:
            if (y->state == SYM_FREE) make_static(s, x->sym, why);
            break;
        case SD_F_TIE: {
            if (x->root < 0 || x->root >= s->n_syms) break;
            sym *yk = &s->syms[x->root];
            if (y->kind != SYM_AUTO) {
                char expr[200], dk[512];
                linear_name(yk->name, x->a, x->b, expr, sizeof expr);
                describe(s, x->root, dk, sizeof dk);
                snprintf(msg, sizeof msg, "The model requires %s == %s, but %s and %s are declared independent (%s)",
                         y->name, expr, d, dk, why);
                snprintf(fix, sizeof fix, "%s = %s", y->name, expr);
                violation(s, x->sym, msg, y->kind == SYM_NAMED && yk->kind == SYM_NAMED ? fix : NULL);
            }
            y->state = SYM_TIED;
            y->tied_to = x->root;
            y->a = x->a;
            y->b = x->b;
            break;
        }
        case SD_F_DIV: {
            /* the fresh symbol: same index in the solver as in sd */
            if (x->root != s->n_syms || s->n_syms >= s->cap_syms) {
                s->too_many = true;
                break;
            }
            const char *fname = sd_sym_name(s->sd, x->root);
            int k = new_sym(s, fname, y->kind, sd_sym_example(s->sd, x->root), x->lo, x->hi, true, y->first_site);
            y = &s->syms[x->sym];
            s->syms[k].rmin = x->lo;
            if (y->kind != SYM_AUTO) {
                char expr[200];
                linear_name(fname, x->a, x->b, expr, sizeof expr);
                snprintf(msg, sizeof msg, "The model requires %s to be a multiple of %" PRId64 "%s (%s)", d, x->a,
                         x->b ? " plus a constant" : "", why);
                if (x->hi == TP_DIM_UNBOUNDED)
                    snprintf(fix, sizeof fix, "%s = Dim('%s', min=%" PRId64 ")\n    %s = %s", fname, fname, x->lo,
                             y->name, expr);
                else
                    snprintf(fix, sizeof fix, "%s = Dim('%s', min=%" PRId64 ", max=%" PRId64 ")\n    %s = %s", fname,
                             fname, x->lo, x->hi, y->name, expr);
                violation(s, x->sym, msg, y->kind == SYM_NAMED ? fix : NULL);
                /* a violated named dim is specialised (draft export) */
                y->state = SYM_STATIC;
                y->value = y->example;
            } else {
                y->state = SYM_TIED;
                y->tied_to = k;
                y->a = x->a;
                y->b = x->b;
            }
            break;
        }
        case SD_F_RANGE: {
            int64_t nlo = x->lo > y->rmin ? x->lo : y->min, nhi = x->hi;
            if (x->lo > y->rmin) y->rmin = x->lo;
            if (y->kind != SYM_AUTO && y->state == SYM_FREE) {
                if (nhi == TP_DIM_UNBOUNDED) {
                    snprintf(fix, sizeof fix, "%s = Dim('%s', min=%" PRId64 ")", y->name, y->name, nlo);
                    snprintf(msg, sizeof msg,
                             "Not all values of %s in the specified range are valid: the model requires %s in [%" PRId64
                             ", inf] (%s)",
                             d, y->name, nlo, why);
                } else {
                    snprintf(fix, sizeof fix, "%s = Dim('%s', min=%" PRId64 ", max=%" PRId64 ")", y->name, y->name, nlo,
                             nhi);
                    snprintf(msg, sizeof msg,
                             "Not all values of %s in the specified range are valid: the model requires %s in [%" PRId64
                             ", %" PRId64 "] (%s)",
                             d, y->name, nlo, nhi, why);
                }
                violation(s, x->sym, msg, y->kind == SYM_NAMED ? fix : NULL);
            }
            y->min = nlo;
            y->min_given = true;
            y->max = nhi;
            break;
        }
        }
    }
}

static tp_status symbolic_pass(solver *s, int *n_fallback, char **fallbacks) {
    s->sd = sd_new();
    TP_CHECK(s->sd != NULL, TP_ERR_NOMEM, "out of memory");
    for (int k = 0; k < s->n_syms; k++) {
        sym *y = &s->syms[k];
        int64_t lo = test_min(y);
        if (lo > y->example) lo = y->example;
        y->rmin = lo;
        int pref = y->kind == SYM_AUTO ? 2 : y->kind == SYM_DYNAMIC ? 1 : 0;
        TP_CHECK(sd_sym_new(s->sd, y->name, lo, y->max, y->example, pref) == k, TP_ERR_NOMEM, "out of memory");
    }
    sym_site *sites = tp_calloc((size_t)s->n_sites + 1, sizeof *sites);
    TP_CHECK(sites != NULL, TP_ERR_NOMEM, "out of memory");
    int n = 0;
    for (int i = 0; i < s->n_sites; i++) {
        const rsite *r = &s->sites[i];
        if (r->sym < 0) continue;
        sites[n++] = (sym_site){r->path, r->dim,
                                sd_addk(s->sd, sd_mulk(s->sd, sd_sym(s->sd, r->sym), r->scale), r->offset)};
    }
    tp_sb fb = {0};
    tp_status st = tp__symshape_propagate(s->sd, s->p, s->inputs, s->n_inputs, sites, n, s->ctx->reads,
                                          s->ctx->n_reads, on_decided, s, &fb, n_fallback);
    tp_free(sites);
    if (st == TP_OK) st = tp__sb_finish(&fb, fallbacks);
    else tp__sb_free(&fb);
    if (st == TP_OK && s->too_many) st = tp_error(TP_ERR_UNSUPPORTED, "at most 64 dynamic dims are supported");
    /* ties narrow the root's range silently (implied by the tied dim's range) */
    for (int k = 0; st == TP_OK && k < s->n_syms; k++) {
        sym *y = &s->syms[k];
        if (y->state != SYM_FREE) continue;
        if (sd_sym_min(s->sd, k) > y->rmin) {
            y->min = y->rmin = sd_sym_min(s->sd, k);
            y->min_given = true;
        }
        if (sd_sym_max(s->sd, k) < y->max) y->max = sd_sym_max(s->sd, k);
    }
    return st;
}

/* Follow ties: site dim = sc*root + off (root -1: static, value off). */
static void site_root(const solver *s, const rsite *r, int *root, int64_t *sc, int64_t *off) {
    *sc = r->scale;
    *off = r->offset;
    *root = r->sym;
    for (int guard = 0; *root >= 0 && guard < 128; guard++) {
        const sym *y = &s->syms[*root];
        if (y->state == SYM_FREE) return;
        if (y->state == SYM_STATIC) {
            *off = *sc * y->value + *off;
            *sc = 1;
            *root = -1;
            return;
        }
        *off = *sc * y->b + *off;
        *sc = *sc * y->a;
        *root = y->tied_to;
    }
}

/* Record rules, ranges and equalities in the program. */
static tp_status record(solver *s) {
    for (int i = 0; i < s->n_sites; i++) {
        const rsite *r = &s->sites[i];
        tp_dim_rule rule = {{r->path, r->dim}, TP_DIM_STATIC, 0, NULL, 1, 0};
        int root;
        int64_t sc, off;
        site_root(s, r, &root, &sc, &off);
        if (root < 0) {
            rule.value = off;
        } else {
            rule.symbol = s->syms[root].name;
            rule.kind = sc == 1 && off == 0 ? TP_DIM_SYMBOL : TP_DIM_DERIVED;
            rule.scale = sc;
            rule.offset = off;
        }
        TP_TRY(tp_program_add_dim_rule(s->p, &rule));
    }
    for (int k = 0; k < s->n_syms; k++) {
        const sym *y = &s->syms[k];
        if (y->state != SYM_FREE) continue;
        bool used = false;
        tp_dim_site sites[64];
        int n = 0;
        for (int i = 0; i < s->n_sites; i++) {
            int root;
            int64_t sc, off;
            site_root(s, &s->sites[i], &root, &sc, &off);
            if (root != k) continue;
            used = true;
            if (sc == 1 && off == 0 && n < 64) sites[n++] = (tp_dim_site){s->sites[i].path, s->sites[i].dim};
        }
        if (!used) continue;
        TP_TRY(tp_program_add_range(s->p, y->name, y->min, y->max));
        /* equality: every site whose dim is exactly this symbol */
        if (n >= 2) TP_TRY(tp_program_add_equality(s->p, sites, n, y->kind == SYM_NAMED ? y->name : NULL));
    }
    return TP_OK;
}

static bool replay_check_requested(const tp_export_options *opts) {
    if (opts && opts->replay_check) return true;
    const char *e = getenv("TP_EXPORT_REPLAY_CHECK");
    return e && *e && strcmp(e, "0") != 0;
}

tp_status tp__shapes_solve(tp_ctx *ctx, const tp_shapes *spec, const user_input_info *inputs, int n_inputs,
                           tp_program *p, const tp_export_options *opts, char **notes) {
    solver s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx;
    s.inputs = inputs;
    s.n_inputs = n_inputs;
    s.p = p;
    *notes = NULL;
    int n_sites = spec ? spec->n_sites : 0;
    s.cap_syms = 64;
    s.syms = tp_calloc((size_t)s.cap_syms, sizeof *s.syms);
    s.sites = tp_calloc((size_t)(n_sites + 1), sizeof *s.sites);
    tp_status st = s.syms && s.sites ? TP_OK : tp_error(TP_ERR_NOMEM, "out of memory");
    if (st == TP_OK && n_sites > 64) st = tp_error(TP_ERR_UNSUPPORTED, "at most 64 dynamic dims are supported");
    if (st == TP_OK && spec) st = resolve(&s, spec);
    /* symbolic propagation: the primary mechanism */
    int n_fallback = 0;
    char *fallbacks = NULL;
    if (st == TP_OK) st = symbolic_pass(&s, &n_fallback, &fallbacks);
    /* the replay: for nodes without a symbolic rule, or as a cross-check */
    bool cross = replay_check_requested(opts);
    int before = s.n_violations;
    if (st == TP_OK && s.n_syms > 0 && (n_fallback > 0 || cross)) {
        s.replaying = true;
        for (int round = 0; st == TP_OK && round < 8; round++) {
            bool changed = false;
            for (int k = 0; k < s.n_syms; k++)
                if (s.syms[k].state == SYM_FREE && examine(&s, k)) changed = true;
            if (!changed) break;
            if (cross && n_fallback == 0) s.cross_findings++;
        }
        s.replaying = false;
    }
    if (st == TP_OK && n_fallback > 0) {
        tp_sb sb = {0};
        tp__sb_printf(&sb,
                      "symbolic shapes: %d node(s) have no symbolic shape rule for their symbolic inputs; their "
                      "constraints were checked by replaying shape inference (%d finding(s)): %s",
                      n_fallback, s.n_violations - before, fallbacks ? fallbacks : "");
        st = tp__sb_finish(&sb, notes);
    } else if (st == TP_OK && cross && s.cross_findings) {
        tp_sb sb = {0};
        tp__sb_printf(&sb, "symbolic shapes: the replay cross-check found constraints the symbolic rules missed");
        st = tp__sb_finish(&sb, notes);
    }
    tp_free(fallbacks);
    if (st == TP_OK && cross && s.cross_findings && !ctx->draft)
        st = tp_error(TP_ERR_INTERNAL,
                      "the replay cross-check found constraints the symbolic shape rules missed:\n%s",
                      s.violations.len && s.violations.data ? s.violations.data : "(dims narrowed silently)");
    if (st == TP_OK && s.n_violations && !ctx->draft) {
        char *v = NULL, *f = NULL, *n = NULL;
        tp__sb_finish(&s.violations, &v);
        tp__sb_finish(&s.fixes, &f);
        tp__sb_finish(&s.names, &n);
        st = tp_error(TP_ERR_CONSTRAINT, "Constraints violated (%s)! For more information, run with draft export.\n%s%s%s",
                      n ? n : "", v ? v : "", f && *f ? "Suggested fixes:\n" : "", f ? f : "");
        tp_free(v);
        tp_free(f);
        tp_free(n);
    }
    if (st == TP_OK) st = record(&s);
    if (st != TP_OK) {
        tp_free(*notes);
        *notes = NULL;
    }
    sd_free(s.sd);
    tp__sb_free(&s.violations);
    tp__sb_free(&s.fixes);
    tp__sb_free(&s.names);
    tp_free(s.syms);
    tp_free(s.sites);
    return st;
}
