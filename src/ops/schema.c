/*
 * schema.c - parse PyTorch-style op schemas (grammar in ops.h).
 *
 * Schemas are written by us (string literals in the kernel files), so a parse
 * failure is a bug: it is reported as TP_ERR_INTERNAL naming the schema.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "ops_impl.h"

static const struct {
    const char *name;
    tp_arg_type type;
} arg_types[] = {
    {"Tensor", TP_ARG_TENSOR},         {"Tensor?", TP_ARG_OPT_TENSOR},
    {"Tensor[]", TP_ARG_TENSOR_LIST},  {"Tensor|Scalar", TP_ARG_TENSOR_OR_SCALAR},
    {"Scalar", TP_ARG_SCALAR},         {"Scalar?", TP_ARG_OPT_SCALAR},
    {"int", TP_ARG_INT},               {"int?", TP_ARG_OPT_INT},
    {"int[]", TP_ARG_INT_LIST},        {"int[]?", TP_ARG_OPT_INT_LIST},
    {"float", TP_ARG_FLOAT},           {"float?", TP_ARG_OPT_FLOAT},
    {"bool", TP_ARG_BOOL},             {"bool?", TP_ARG_OPT_BOOL},
    {"str", TP_ARG_STR},               {"str?", TP_ARG_OPT_STR},
    {"ScalarType?", TP_ARG_OPT_DTYPE}, {"Any", TP_ARG_ANY},
};

static const char *skip_ws(const char *p) {
    while (*p && isspace((unsigned char)*p)) p++;
    return p;
}

static tp_status bad(const char *text, const char *why) {
    return tp_error(TP_ERR_INTERNAL, "bad op schema \"%s\": %s", text, why);
}

/* Parse a default value from [p, end). */
static tp_status parse_default(const char *text, const char *p, const char *end, tp_value *out) {
    while (p < end && isspace((unsigned char)*p)) p++;
    while (end > p && isspace((unsigned char)end[-1])) end--;
    size_t len = (size_t)(end - p);
    char buf[128];
    if (len == 0 || len >= sizeof buf) return bad(text, "bad default");
    memcpy(buf, p, len);
    buf[len] = '\0';
    if (strcmp(buf, "None") == 0) *out = tp_value_none();
    else if (strcmp(buf, "True") == 0) *out = tp_value_bool(true);
    else if (strcmp(buf, "False") == 0) *out = tp_value_bool(false);
    else if (buf[0] == '\'' || buf[0] == '"') {
        if (len < 2 || buf[len - 1] != buf[0]) return bad(text, "unterminated string default");
        buf[len - 1] = '\0';
        return tp_value_str(buf + 1, out);
    } else if (buf[0] == '[') {
        int64_t ints[TP_MAX_DIMS];
        int n = 0;
        char *q = buf + 1;
        while (*q && *q != ']') {
            char *e;
            if (n == TP_MAX_DIMS) return bad(text, "list default too long");
            ints[n++] = strtoll(q, &e, 10);
            if (e == q) return bad(text, "bad list default");
            q = e;
            while (*q == ',' || *q == ' ') q++;
        }
        return tp_value_int_list(ints, n, out);
    } else {
        char *e;
        if (strpbrk(buf, ".eE") || strstr(buf, "inf") || strstr(buf, "nan")) {
            double f = strtod(buf, &e);
            if (*e) return bad(text, "bad float default");
            *out = tp_value_float(f);
        } else {
            long long i = strtoll(buf, &e, 10);
            if (*e) return bad(text, "bad int default");
            *out = tp_value_int(i);
        }
    }
    return TP_OK;
}

void tp__schema_free(tp_schema *s) {
    if (!s) return;
    if (s->args) {
        for (int i = 0; i < s->n_args; i++) {
            tp_value_clear((tp_value *)&s->args[i].default_value);
            tp_free((void *)s->args[i].name);
        }
        tp_free((void *)s->args);
    }
    tp_free((void *)s->name);
    memset(s, 0, sizeof *s);
}

tp_status tp__schema_parse(const char *text, tp_schema *out) {
    memset(out, 0, sizeof *out);
    const char *open = strchr(text, '(');
    const char *arrow = strstr(text, "->");
    if (!open || !arrow || arrow < open) return bad(text, "expected name(args) -> returns");
    const char *close = arrow;
    while (close > open && *close != ')') close--;
    if (*close != ')') return bad(text, "missing ')'");

    tp_schema s = {0};
    size_t name_len = (size_t)(open - text);
    char *name = tp_malloc(name_len + 1);
    if (!name) return tp_error(TP_ERR_NOMEM, "out of memory parsing schemas");
    memcpy(name, text, name_len);
    name[name_len] = '\0';
    s.name = name;

    /* count args (top-level commas) */
    int max_args = 1;
    for (const char *p = open + 1; p < close; p++)
        if (*p == ',') max_args++;
    tp_schema_arg *args = tp_calloc((size_t)max_args, sizeof *args);
    if (!args) {
        tp__schema_free(&s);
        return tp_error(TP_ERR_NOMEM, "out of memory parsing schemas");
    }
    s.args = args;
    bool kwonly = false;
    const char *p = skip_ws(open + 1);
    tp_status st = TP_OK;
    while (p < close && st == TP_OK) {
        /* find end of this arg: next top-level comma */
        const char *e = p;
        int depth = 0;
        while (e < close && (depth > 0 || *e != ',')) {
            if (*e == '[') depth++;
            if (*e == ']') depth--;
            e++;
        }
        const char *q = p;
        while (q < e && isspace((unsigned char)*q)) q++;
        if (q < e && *q == '*') {
            kwonly = true;
        } else {
            /* type token up to space */
            const char *ty = q;
            while (q < e && !isspace((unsigned char)*q)) q++;
            size_t tlen = (size_t)(q - ty);
            int found = -1;
            for (size_t i = 0; i < TP_ARRAY_LEN(arg_types); i++)
                if (strlen(arg_types[i].name) == tlen && strncmp(arg_types[i].name, ty, tlen) == 0) found = (int)i;
            if (found < 0) {
                st = bad(text, "unknown argument type");
                break;
            }
            q = skip_ws(q);
            const char *nm = q;
            while (q < e && (isalnum((unsigned char)*q) || *q == '_')) q++;
            size_t nlen = (size_t)(q - nm);
            if (nlen == 0) {
                st = bad(text, "missing argument name");
                break;
            }
            tp_schema_arg *a = &args[s.n_args++];
            char *an = tp_malloc(nlen + 1);
            if (!an) {
                st = tp_error(TP_ERR_NOMEM, "out of memory parsing schemas");
                break;
            }
            memcpy(an, nm, nlen);
            an[nlen] = '\0';
            a->name = an;
            a->type = arg_types[found].type;
            a->kwarg_only = kwonly;
            q = skip_ws(q);
            if (q < e && *q == '=') {
                a->has_default = true;
                st = parse_default(text, q + 1, e, &a->default_value);
            }
        }
        p = e < close ? skip_ws(e + 1) : close;
    }
    if (st == TP_OK) {
        const char *r = skip_ws(arrow + 2);
        if (strncmp(r, "Tensor[]", 8) == 0) {
            s.returns = TP_RET_TENSOR_LIST;
            s.n_returns = 1;
        } else if (strncmp(r, "Tensor", 6) == 0) {
            s.returns = TP_RET_TENSOR;
            s.n_returns = 1;
        } else if (strncmp(r, "Any", 3) == 0) {
            s.returns = TP_RET_ANY;
            s.n_returns = 1;
        } else if (*r == '(') {
            s.returns = TP_RET_TUPLE;
            s.n_returns = 1;
            for (; *r && *r != ')'; r++)
                if (*r == ',') s.n_returns++;
        } else {
            st = bad(text, "bad return type");
        }
    }
    if (st != TP_OK) {
        tp__schema_free(&s);
        return st;
    }
    *out = s;
    return TP_OK;
}
