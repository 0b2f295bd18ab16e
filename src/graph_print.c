/*
 * graph_print.c - the graph's text form: Python-like code in the style of
 * torch.fx's python_code (see graph.h), with dtype/shape annotations from
 * meta["val"] and torch.fx's "x = None" last-use hints.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph_impl.h"

/* "self.fc1.weight", or torch.fx's getattr(self, "0").weight for path
 * components that are not Python identifiers. */
static void print_attr_path(tp_sb *sb, const char *path) {
    tp_sb cur = {0};
    tp__sb_puts(&cur, "self");
    const char *p = path;
    for (;;) {
        size_t len = strcspn(p, ".");
        bool ident = len > 0 && !(p[0] >= '0' && p[0] <= '9');
        for (size_t i = 0; i < len && ident; i++) {
            char c = p[i];
            ident = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        }
        if (ident) {
            tp__sb_printf(&cur, ".%.*s", (int)len, p);
        } else {
            tp_sb next = {0};
            tp__sb_printf(&next, "getattr(%s, \"%.*s\")", cur.data ? cur.data : "", (int)len, p);
            tp__sb_free(&cur);
            cur = next;
        }
        if (!p[len]) break;
        p += len + 1;
    }
    if (cur.failed) sb->failed = true;
    else if (cur.data) tp__sb_puts(sb, cur.data);
    tp__sb_free(&cur);
}

static const char *dtype_abbr(tp_dtype d) {
    switch (d) {
    case TP_FLOAT32: return "f32";
    case TP_FLOAT64: return "f64";
    case TP_FLOAT16: return "f16";
    case TP_BFLOAT16: return "bf16";
    case TP_INT64: return "i64";
    case TP_INT32: return "i32";
    case TP_INT16: return "i16";
    case TP_INT8: return "i8";
    case TP_UINT8: return "u8";
    case TP_BOOL: return "b8";
    default: return "?";
    }
}

/* Python's repr of a float (shortest round-trip digits; exponent form when
 * the decimal point lies past 16 digits or before 4 leading zeros). */
static void put_float(tp_sb *sb, double v) {
    if (isnan(v)) {
        tp__sb_puts(sb, "nan");
        return;
    }
    if (isinf(v)) {
        tp__sb_puts(sb, v > 0 ? "inf" : "-inf");
        return;
    }
    if (v == 0.0) {
        tp__sb_puts(sb, signbit(v) ? "-0.0" : "0.0");
        return;
    }
    char buf[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
        if (strtod(buf, NULL) == v) break;
    }
    /* buf: [-]d[.ddd]e[+-]XX */
    const char *p = buf;
    bool neg = *p == '-';
    if (neg) p++;
    char digits[24];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.' && nd < 20) digits[nd++] = *p;
    int exp10 = (*p == 'e') ? atoi(p + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = '\0';
    int decpt = exp10 + 1;
    if (neg) tp__sb_puts(sb, "-");
    if (decpt > 16 || decpt < -3) {
        tp__sb_printf(sb, "%c", digits[0]);
        if (nd > 1) tp__sb_printf(sb, ".%s", digits + 1);
        tp__sb_printf(sb, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    } else if (decpt <= 0) {
        tp__sb_puts(sb, "0.");
        for (int i = 0; i < -decpt; i++) tp__sb_puts(sb, "0");
        tp__sb_puts(sb, digits);
    } else if (decpt >= nd) {
        tp__sb_puts(sb, digits);
        for (int i = nd; i < decpt; i++) tp__sb_puts(sb, "0");
        tp__sb_puts(sb, ".0");
    } else {
        tp__sb_printf(sb, "%.*s.%s", decpt, digits, digits + decpt);
    }
}

/* Python's repr of a str. */
static void put_str(tp_sb *sb, const char *s) {
    char q = (strchr(s, '\'') && !strchr(s, '"')) ? '"' : '\'';
    tp__sb_printf(sb, "%c", q);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\' || c == (unsigned char)q) tp__sb_printf(sb, "\\%c", c);
        else if (c == '\n') tp__sb_puts(sb, "\\n");
        else if (c == '\r') tp__sb_puts(sb, "\\r");
        else if (c == '\t') tp__sb_puts(sb, "\\t");
        else if (c < 0x20 || c == 0x7f) tp__sb_printf(sb, "\\x%02x", c);
        else tp__sb_printf(sb, "%c", c);
    }
    tp__sb_printf(sb, "%c", q);
}

static void put_value(tp_sb *sb, const tp_value *v) {
    switch (v->kind) {
    case TP_VAL_NONE: tp__sb_puts(sb, "None"); break;
    case TP_VAL_BOOL: tp__sb_puts(sb, v->u.b ? "True" : "False"); break;
    case TP_VAL_INT: tp__sb_printf(sb, "%" PRId64, v->u.i); break;
    case TP_VAL_FLOAT: put_float(sb, v->u.f); break;
    case TP_VAL_STR: put_str(sb, v->u.s); break;
    case TP_VAL_DTYPE: tp__sb_printf(sb, "torch.%s", tp_dtype_name(v->u.dtype)); break;
    case TP_VAL_NODE: tp__sb_puts(sb, v->u.node ? v->u.node->name : "None"); break;
    case TP_VAL_TENSOR: {
        char buf[160];
        tp_value_repr(v, buf, sizeof buf);
        tp__sb_puts(sb, buf);
        break;
    }
    case TP_VAL_LIST:
    case TP_VAL_TUPLE:
    case TP_VAL_DICT: {
        tp__sb_puts(sb, v->kind == TP_VAL_LIST ? "[" : v->kind == TP_VAL_TUPLE ? "(" : "{");
        for (int64_t i = 0; i < v->u.seq.n; i++) {
            if (i) tp__sb_puts(sb, ", ");
            if (v->kind == TP_VAL_DICT) {
                put_str(sb, v->u.seq.keys[i]);
                tp__sb_puts(sb, ": ");
            }
            put_value(sb, &v->u.seq.items[i]);
        }
        if (v->kind == TP_VAL_TUPLE && v->u.seq.n == 1) tp__sb_puts(sb, ",");
        tp__sb_puts(sb, v->kind == TP_VAL_LIST ? "]" : v->kind == TP_VAL_TUPLE ? ")" : "}");
        break;
    }
    }
}

/* `: "f32[2, 3]"` when meta val is a tensor (torch.fx's verbose annotation). */
static void put_annotation(tp_sb *sb, const tp_node *n) {
    if (n->meta_val.kind != TP_VAL_TENSOR) return;
    const tp_tensor *t = n->meta_val.u.tensor;
    tp__sb_printf(sb, ": \"%s[", dtype_abbr(tp_tensor_dtype(t)));
    for (int d = 0; d < tp_tensor_ndim(t); d++) tp__sb_printf(sb, "%s%" PRId64, d ? ", " : "", tp_tensor_sizes(t)[d]);
    tp__sb_puts(sb, "]\"");
}

/* Positional args from `first` on, then kwargs as `name = value`. */
static void put_call_args(tp_sb *sb, const tp_node *n, int64_t first) {
    bool any = false;
    for (int64_t i = first; i < n->args.u.seq.n; i++, any = true) {
        if (any) tp__sb_puts(sb, ", ");
        put_value(sb, &n->args.u.seq.items[i]);
    }
    for (int64_t i = 0; i < n->kwargs.u.seq.n; i++, any = true) {
        if (any) tp__sb_puts(sb, ", ");
        tp__sb_printf(sb, "%s = ", n->kwargs.u.seq.keys[i]);
        put_value(sb, &n->kwargs.u.seq.items[i]);
    }
}

static tp_status render(const tp_graph *g, tp_sb *sb) {
    int64_t *lists = NULL, *offsets = NULL, *last = NULL;
    TP_TRY(tp__graph_last_uses(g, &lists, &offsets, &last));
    /* position -> node */
    const tp_node **by_pos = tp_malloc((size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof *by_pos);
    if (!by_pos) {
        tp_free(lists);
        tp_free(offsets);
        tp_free(last);
        return tp_error(TP_ERR_NOMEM, "out of memory printing a graph");
    }
    int64_t p = 0;
    for (const tp_node *n = g->first; n; n = n->next) by_pos[p++] = n;

    tp__sb_puts(sb, "def forward(self");
    for (const tp_node *n = g->first; n; n = n->next) {
        if (n->kind != TP_NODE_PLACEHOLDER) continue;
        tp__sb_printf(sb, ", %s", n->name);
        put_annotation(sb, n);
    }
    tp__sb_puts(sb, "):\n");
    p = 0;
    for (const tp_node *n = g->first; n; n = n->next, p++) {
        switch (n->kind) {
        case TP_NODE_PLACEHOLDER: continue;
        case TP_NODE_OUTPUT:
            tp__sb_puts(sb, "    return ");
            if (n->args.u.seq.n > 0) put_value(sb, &n->args.u.seq.items[0]);
            else tp__sb_puts(sb, "None");
            tp__sb_puts(sb, "\n");
            continue;
        case TP_NODE_GET_ATTR:
            tp__sb_printf(sb, "    %s", n->name);
            put_annotation(sb, n);
            tp__sb_puts(sb, " = ");
            print_attr_path(sb, n->target);
            break;
        case TP_NODE_CALL_FUNCTION:
            tp__sb_printf(sb, "    %s", n->name);
            put_annotation(sb, n);
            if (n->op == TP_OP_GETITEM && n->args.u.seq.n == 2 && n->kwargs.u.seq.n == 0) {
                tp__sb_puts(sb, " = ");
                put_value(sb, &n->args.u.seq.items[0]);
                tp__sb_puts(sb, "[");
                put_value(sb, &n->args.u.seq.items[1]);
                tp__sb_puts(sb, "]");
            } else {
                tp__sb_printf(sb, " = torch.ops.aten.%s.default(", n->target);
                put_call_args(sb, n, 0);
                tp__sb_puts(sb, ")");
            }
            break;
        case TP_NODE_CALL_METHOD:
            tp__sb_printf(sb, "    %s", n->name);
            put_annotation(sb, n);
            tp__sb_puts(sb, " = ");
            if (n->args.u.seq.n > 0) put_value(sb, &n->args.u.seq.items[0]);
            else tp__sb_puts(sb, "None");
            tp__sb_printf(sb, ".%s(", n->target);
            put_call_args(sb, n, 1);
            tp__sb_puts(sb, ")");
            break;
        default: break;
        }
        /* torch.fx's release hints: values last used here, then the node
         * itself if nothing uses it */
        int64_t from = offsets[p], to = offsets[p + 1];
        bool unused = n->n_users == 0;
        if (to > from || unused) {
            tp__sb_puts(sb, ";  ");
            for (int64_t k = from; k < to; k++) tp__sb_printf(sb, "%s = ", by_pos[lists[k]]->name);
            if (unused) tp__sb_printf(sb, "%s = ", n->name);
            tp__sb_puts(sb, "None");
        }
        tp__sb_puts(sb, "\n");
    }
    tp_free(by_pos);
    tp_free(lists);
    tp_free(offsets);
    tp_free(last);
    return TP_OK;
}

tp_status tp_graph_to_string(const tp_graph *g, char **out) {
    TP_CHECK(g != NULL, TP_ERR_INVALID_ARG, "graph is NULL");
    tp_sb sb = {0};
    tp_status st = render(g, &sb);
    if (st != TP_OK) {
        tp__sb_free(&sb);
        return st;
    }
    return tp__sb_finish(&sb, out);
}

size_t tp_graph_to_buffer(const tp_graph *g, char *buf, size_t size) {
    char *s = NULL;
    if (tp_graph_to_string(g, &s) != TP_OK) {
        if (size) buf[0] = '\0';
        return 0;
    }
    size_t len = strlen(s);
    if (size) {
        size_t n = len < size - 1 ? len : size - 1;
        memcpy(buf, s, n);
        buf[n] = '\0';
    }
    tp_free(s);
    return len;
}

tp_status tp_graph_print(const tp_graph *g, FILE *f) {
    char *s = NULL;
    TP_TRY(tp_graph_to_string(g, &s));
    bool ok = fputs(s, f) >= 0 && fflush(f) == 0;
    tp_free(s);
    TP_CHECK(ok, TP_ERR_IO, "writing the graph text failed");
    return TP_OK;
}
