/*
 * test_registry.c - tests for the op registry (ops/registry.c) and the
 * schema parser (ops/schema.c): op names, schema parsing, and argument
 * binding (positional/keyword, defaults, coercions, and each binding error).
 *
 * Ops are registered by the kernel families; the binding tests use "add"
 * when it is registered, and otherwise pick ops by their schemas (an op
 * with a float argument, one with an int[] argument). A test whose op is
 * not registered prints a note and passes.
 */
#include <stdio.h>
#include <string.h>

#include "fail_alloc.h"
#include "ops/ops_impl.h"
#include "test_util.h"

#define NOTE(...)                       \
    do {                                \
        printf("  note: " __VA_ARGS__); \
        putchar('\n');                  \
    } while (0)

static tp_tensor *meta_tensor(void) {
    tp_tensor *t = NULL;
    tp_tensor_meta(TP_FLOAT32, 2, (int64_t[]){2, 3}, &t);
    return t;
}

static void clear_all(tp_value *v, int n) {
    for (int i = 0; i < n; i++) tp_value_clear(&v[i]);
}

/* A value of the argument's type that binding accepts as is. */
static tp_status valid_value(tp_arg_type type, tp_value *out) {
    switch (type) {
    case TP_ARG_TENSOR: *out = tp_value_tensor(meta_tensor()); return out->kind == TP_VAL_TENSOR ? TP_OK : TP_ERR_NOMEM;
    case TP_ARG_TENSOR_LIST: {
        TP_TRY(tp_value_list(2, out));
        out->u.seq.items[0] = tp_value_tensor(meta_tensor());
        out->u.seq.items[1] = tp_value_tensor(meta_tensor());
        return TP_OK;
    }
    case TP_ARG_TENSOR_OR_SCALAR:
    case TP_ARG_SCALAR: *out = tp_value_int(1); return TP_OK;
    case TP_ARG_INT: *out = tp_value_int(0); return TP_OK;
    case TP_ARG_INT_LIST: return tp_value_int_list((int64_t[]){1}, 1, out);
    case TP_ARG_FLOAT: *out = tp_value_float(1.0); return TP_OK;
    case TP_ARG_BOOL: *out = tp_value_bool(false); return TP_OK;
    case TP_ARG_STR: return tp_value_str("x", out);
    case TP_ARG_ANY: *out = tp_value_int(0); return TP_OK;
    default: *out = tp_value_none(); return TP_OK; /* the optional types */
    }
}

/* Positional values for an op's required positional arguments, and a
 * kwargs dict for its required keyword-only ones. */
static int minimal_args(const tp_schema *s, tp_value *args, tp_value *kwargs) {
    int n = 0;
    CHECK_OK(tp_value_dict(kwargs));
    for (int i = 0; i < s->n_args; i++) {
        const tp_schema_arg *a = &s->args[i];
        if (a->has_default) continue;
        tp_value v = tp_value_none();
        CHECK_OK(valid_value(a->type, &v));
        if (a->kwarg_only) {
            CHECK_OK(tp_value_dict_set(kwargs, a->name, &v));
        } else {
            /* positional arguments before it all need a value: fill defaults
             * in by keyword instead when a required one follows one with a
             * default (rare) */
            if (n != i) {
                CHECK_OK(tp_value_dict_set(kwargs, a->name, &v));
            } else {
                args[n++] = v;
            }
        }
    }
    return n;
}

static int n_positional(const tp_schema *s) {
    int n = 0;
    while (n < s->n_args && !s->args[n].kwarg_only) n++;
    return n;
}

/* ---- names and schemas ------------------------------------------------- */

TEST(test_op_names) {
    CHECK_OK(tp_ops_init());
    for (int i = 0; i < TP_OP_COUNT; i++) {
        const char *name = tp_op_name((tp_op)i);
        CHECK(name && strcmp(name, "?") != 0);
        CHECK_MSG(tp_op_from_name(name) == (tp_op)i, "op %d (%s) is not unique", i, name);
    }
    CHECK(strcmp(tp_op_name(TP_OP_INVALID), "?") == 0);
    CHECK(strcmp(tp_op_name(TP_OP_COUNT), "?") == 0);
    CHECK(tp_op_from_name("no_such_op") == TP_OP_INVALID);
    CHECK(tp_op_from_name(NULL) == TP_OP_INVALID);
    CHECK(tp_op_from_name("") == TP_OP_INVALID);
    CHECK(tp_op_schema(TP_OP_INVALID) == NULL && tp_op_schema(TP_OP_COUNT) == NULL);
    CHECK(tp_op_schema_text(TP_OP_INVALID) == NULL);
    CHECK(tp_op_flags(TP_OP_INVALID) == 0 && !tp_op_has_kernel(TP_OP_INVALID));
}

TEST(test_registered_schemas) {
    int registered = 0;
    for (int i = 0; i < TP_OP_COUNT; i++) {
        const tp_schema *s = tp_op_schema((tp_op)i);
        if (!s) continue;
        registered++;
        const char *name = tp_op_name((tp_op)i);
        CHECK_MSG(strcmp(s->name, name) == 0, "%s: schema named %s", name, s->name);
        const char *text = tp_op_schema_text((tp_op)i);
        CHECK(text && strncmp(text, name, strlen(name)) == 0 && text[strlen(name)] == '(');
        CHECK(s->n_returns >= 1);
        bool kw = false;
        for (int a = 0; a < s->n_args; a++) {
            CHECK_MSG(!kw || s->args[a].kwarg_only, "%s: positional argument after '*'", name);
            kw = kw || s->args[a].kwarg_only;
            for (int b = 0; b < a; b++)
                CHECK_MSG(strcmp(s->args[a].name, s->args[b].name) != 0, "%s: argument '%s' twice", name,
                          s->args[a].name);
        }
    }
    printf("  %d of %d ops registered\n", registered, TP_OP_COUNT);
}

/* Every registered op binds its minimal arguments, fills every default with
 * the schema's value (coerced), and reports missing / extra arguments. */
TEST(test_bind_every_schema) {
    int checked = 0;
    for (int i = 0; i < TP_OP_COUNT; i++) {
        tp_op op = (tp_op)i;
        const tp_schema *s = tp_op_schema(op);
        if (!s) continue;
        const char *name = tp_op_name(op);
        tp_value args[64], kwargs = tp_value_none(), bound[64];
        int n = minimal_args(s, args, &kwargs);
        tp_status st = tp_op_bind(op, args, n, &kwargs, bound);
        CHECK_MSG(st == TP_OK, "%s: minimal arguments do not bind: %s", name, tp_last_error());
        if (st == TP_OK) {
            for (int a = 0; a < s->n_args; a++) {
                const tp_schema_arg *sa = &s->args[a];
                if (!sa->has_default) continue;
                const tp_value *d = &sa->default_value, *b = &bound[a];
                bool same = tp_value_equal(d, b) ||
                            (sa->type == TP_ARG_FLOAT && d->kind == TP_VAL_INT && b->kind == TP_VAL_FLOAT &&
                             b->u.f == (double)d->u.i) ||
                            ((sa->type == TP_ARG_INT_LIST || sa->type == TP_ARG_OPT_INT_LIST) &&
                             d->kind == TP_VAL_INT && tp_value_len(b) == 1 && tp_value_at(b, 0)->u.i == d->u.i);
                char r1[128], r2[128];
                tp_value_repr(d, r1, sizeof r1);
                tp_value_repr(b, r2, sizeof r2);
                CHECK_MSG(same, "%s: default of '%s' is %s, bound %s", name, sa->name, r1, r2);
            }
            clear_all(bound, s->n_args);
        }
        /* one positional argument too many */
        int np = n_positional(s);
        tp_value extra[65];
        for (int k = 0; k <= np; k++) extra[k] = tp_value_int(0);
        CHECK_STATUS(tp_op_bind(op, extra, np + 1, NULL, bound), TP_ERR_INVALID_ARG);
        CHECK_ERR_CONTAINS("positional argument");
        /* nothing at all */
        bool any_required = false;
        for (int a = 0; a < s->n_args; a++) any_required = any_required || !s->args[a].has_default;
        if (any_required) {
            CHECK_STATUS(tp_op_bind(op, NULL, 0, NULL, bound), TP_ERR_MISSING);
            CHECK_ERR_CONTAINS("missing required argument");
        } else {
            CHECK_OK(tp_op_bind(op, NULL, 0, NULL, bound));
            clear_all(bound, s->n_args);
        }
        clear_all(args, n);
        tp_value_clear(&kwargs);
        checked++;
    }
    if (!checked) NOTE("no op registered yet: nothing to bind");
}

/* ---- binding errors and rules on add ----------------------------------- */

TEST(test_bind_add) {
    if (!tp_op_schema(TP_OP_ADD)) {
        NOTE("add is not registered yet: skipped");
        return;
    }
    const tp_schema *s = tp_op_schema(TP_OP_ADD);
    if (s->n_args != 3 || strcmp(s->args[2].name, "alpha") != 0 || !s->args[2].kwarg_only) {
        NOTE("add has an unexpected schema (%s): skipped", tp_op_schema_text(TP_OP_ADD));
        return;
    }
    tp_tensor *t = meta_tensor();
    tp_value args[4], bound[3], kwargs = tp_value_none(), item;
    args[0] = tp_value_tensor(t);
    args[1] = tp_value_int(2);
    args[2] = tp_value_int(3);
    args[3] = tp_value_none();

    /* defaults filled in */
    CHECK_OK(tp_op_bind(TP_OP_ADD, args, 2, NULL, bound));
    CHECK(bound[0].kind == TP_VAL_TENSOR && bound[0].u.tensor == t);
    CHECK(bound[1].kind == TP_VAL_INT && bound[1].u.i == 2);
    CHECK(bound[2].kind == TP_VAL_INT && bound[2].u.i == 1);
    clear_all(bound, 3);

    /* keywords, in any order, for positional arguments too */
    CHECK_OK(tp_value_dict(&kwargs));
    item = tp_value_float(0.5);
    CHECK_OK(tp_value_dict_set(&kwargs, "alpha", &item));
    item = tp_value_bool(true);
    CHECK_OK(tp_value_dict_set(&kwargs, "other", &item));
    CHECK_OK(tp_value_copy(&args[0], &item));
    CHECK_OK(tp_value_dict_set(&kwargs, "self", &item));
    CHECK_OK(tp_op_bind(TP_OP_ADD, NULL, 0, &kwargs, bound));
    CHECK(bound[0].u.tensor == t && bound[1].kind == TP_VAL_BOOL && bound[2].kind == TP_VAL_FLOAT &&
          bound[2].u.f == 0.5);
    clear_all(bound, 3);
    tp_value_clear(&kwargs);

    /* too many positional: alpha is keyword-only */
    CHECK_STATUS(tp_op_bind(TP_OP_ADD, args, 3, NULL, bound), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("add() takes at most 2 positional arguments but 3 were given");

    /* unknown keyword */
    CHECK_OK(tp_value_dict(&kwargs));
    item = tp_value_int(1);
    CHECK_OK(tp_value_dict_set(&kwargs, "beta", &item));
    CHECK_STATUS(tp_op_bind(TP_OP_ADD, args, 2, &kwargs, bound), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("add() got an unexpected keyword argument 'beta'");
    tp_value_clear(&kwargs);

    /* given twice */
    CHECK_OK(tp_value_dict(&kwargs));
    item = tp_value_int(5);
    CHECK_OK(tp_value_dict_set(&kwargs, "other", &item));
    CHECK_STATUS(tp_op_bind(TP_OP_ADD, args, 2, &kwargs, bound), TP_ERR_DUPLICATE);
    CHECK_ERR_CONTAINS("add() got multiple values for argument 'other'");
    tp_value_clear(&kwargs);

    /* missing */
    CHECK_STATUS(tp_op_bind(TP_OP_ADD, args, 1, NULL, bound), TP_ERR_MISSING);
    CHECK_ERR_CONTAINS("add() missing required argument 'other'");
    CHECK_OK(tp_value_dict(&kwargs));
    item = tp_value_int(5);
    CHECK_OK(tp_value_dict_set(&kwargs, "other", &item));
    CHECK_STATUS(tp_op_bind(TP_OP_ADD, NULL, 0, &kwargs, bound), TP_ERR_MISSING);
    CHECK_ERR_CONTAINS("add() missing required argument 'self'");
    tp_value_clear(&kwargs);

    /* wrong types */
    tp_value bad[2];
    CHECK_OK(tp_value_str("x", &bad[0]));
    bad[1] = tp_value_int(1);
    CHECK_STATUS(tp_op_bind(TP_OP_ADD, bad, 2, NULL, bound), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("add(): argument 'self' must be Tensor, not str");
    tp_value_clear(&bad[0]);
    bad[0] = tp_value_tensor(tp_tensor_retain(t));
    bad[1] = tp_value_none();
    CHECK_STATUS(tp_op_bind(TP_OP_ADD, bad, 2, NULL, bound), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("argument 'other' must be Tensor or Scalar, not None");
    CHECK_OK(tp_value_list(0, &bad[1]));
    CHECK_STATUS(tp_op_bind(TP_OP_ADD, bad, 2, NULL, bound), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("not list");
    tp_value_clear(&bad[1]);
    bad[1] = tp_value_float(1.5);
    CHECK_OK(tp_value_dict(&kwargs));
    CHECK_OK(tp_value_str("two", &item));
    CHECK_OK(tp_value_dict_set(&kwargs, "alpha", &item));
    CHECK_STATUS(tp_op_bind(TP_OP_ADD, bad, 2, &kwargs, bound), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("argument 'alpha' must be Scalar, not str");
    /* a failed bind leaves every slot None: nothing for the caller to free */
    for (int i = 0; i < 3; i++) CHECK(bound[i].kind == TP_VAL_NONE);
    tp_value_clear(&kwargs);
    tp_value_clear(&bad[0]);

    /* a graph node stands in for a tensor */
    tp_value node_args[2] = {tp_value_node((tp_node *)&node_args), tp_value_int(1)};
    CHECK_OK(tp_op_bind(TP_OP_ADD, node_args, 2, NULL, bound));
    CHECK(bound[0].kind == TP_VAL_NODE);
    clear_all(bound, 3);

    tp_value_clear(&args[0]);
}

/* ---- coercions ---------------------------------------------------------- */

/* First registered op with an argument of `type`; its index in *arg. */
static tp_op find_op_with(tp_arg_type type, int *arg) {
    for (int i = 0; i < TP_OP_COUNT; i++) {
        const tp_schema *s = tp_op_schema((tp_op)i);
        for (int a = 0; s && a < s->n_args; a++) {
            if (s->args[a].type == type) {
                *arg = a;
                return (tp_op)i;
            }
        }
    }
    return TP_OP_INVALID;
}

/* Bind op with minimal arguments plus `value` for argument `arg` (by
 * keyword); *bound receives the bound arguments. */
static tp_status bind_with(tp_op op, int arg, tp_value value, tp_value *bound) {
    const tp_schema *s = tp_op_schema(op);
    tp_value args[64], kwargs = tp_value_none();
    int n = minimal_args(s, args, &kwargs);
    if (arg < n) {
        tp_value_clear(&args[arg]);
        args[arg] = value;
    } else {
        CHECK_OK(tp_value_dict_set(&kwargs, s->args[arg].name, &value));
    }
    tp_status st = tp_op_bind(op, args, n, &kwargs, bound);
    clear_all(args, n);
    tp_value_clear(&kwargs);
    return st;
}

TEST(test_bind_int_to_float) {
    int arg;
    tp_op op = find_op_with(TP_ARG_FLOAT, &arg);
    if (op == TP_OP_INVALID) {
        NOTE("no registered op has a float argument: skipped");
        return;
    }
    const tp_schema *s = tp_op_schema(op);
    tp_value bound[64];
    CHECK_OK(bind_with(op, arg, tp_value_int(3), bound));
    CHECK_MSG(bound[arg].kind == TP_VAL_FLOAT && bound[arg].u.f == 3.0, "%s(%s=3)", tp_op_name(op), s->args[arg].name);
    clear_all(bound, s->n_args);
    CHECK_OK(bind_with(op, arg, tp_value_bool(true), bound));
    CHECK(bound[arg].kind == TP_VAL_FLOAT && bound[arg].u.f == 1.0);
    clear_all(bound, s->n_args);
    tp_value str;
    CHECK_OK(tp_value_str("x", &str));
    CHECK_STATUS(bind_with(op, arg, str, bound), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("must be float, not str");
    CHECK_STATUS(bind_with(op, arg, tp_value_none(), bound), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("must be float, not None");
    /* and for an optional float, when some op has one */
    op = find_op_with(TP_ARG_OPT_FLOAT, &arg);
    if (op != TP_OP_INVALID) {
        s = tp_op_schema(op);
        CHECK_OK(bind_with(op, arg, tp_value_int(-2), bound));
        CHECK(bound[arg].kind == TP_VAL_FLOAT && bound[arg].u.f == -2.0);
        clear_all(bound, s->n_args);
        CHECK_OK(bind_with(op, arg, tp_value_none(), bound));
        CHECK(bound[arg].kind == TP_VAL_NONE);
        clear_all(bound, s->n_args);
    }
}

TEST(test_bind_int_to_int_list) {
    int arg;
    tp_op op = find_op_with(TP_ARG_INT_LIST, &arg);
    if (op == TP_OP_INVALID) {
        NOTE("no registered op has an int[] argument: skipped");
        return;
    }
    const tp_schema *s = tp_op_schema(op);
    tp_value bound[64];
    CHECK_OK(bind_with(op, arg, tp_value_int(4), bound));
    CHECK_MSG(bound[arg].kind == TP_VAL_LIST && tp_value_len(&bound[arg]) == 1 &&
                  tp_value_at(&bound[arg], 0)->u.i == 4,
              "%s(%s=4)", tp_op_name(op), s->args[arg].name);
    clear_all(bound, s->n_args);
    tp_value tup;
    CHECK_OK(tp_value_tuple(2, &tup)); /* a tuple of ints is fine too */
    tup.u.seq.items[0] = tp_value_int(1);
    tup.u.seq.items[1] = tp_value_int(2);
    CHECK_OK(bind_with(op, arg, tup, bound));
    CHECK(tp_value_len(&bound[arg]) == 2);
    clear_all(bound, s->n_args);
    tp_value mixed;
    CHECK_OK(tp_value_list(2, &mixed));
    mixed.u.seq.items[0] = tp_value_int(1);
    mixed.u.seq.items[1] = tp_value_float(2.5);
    CHECK_STATUS(bind_with(op, arg, mixed, bound), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("must be int[], not list");
    CHECK_STATUS(bind_with(op, arg, tp_value_float(2.0), bound), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("must be int[], not float");
}

TEST(test_bind_tensor_list) {
    int arg;
    tp_op op = find_op_with(TP_ARG_TENSOR_LIST, &arg);
    if (op == TP_OP_INVALID) {
        NOTE("no registered op has a Tensor[] argument: skipped");
        return;
    }
    const tp_schema *s = tp_op_schema(op);
    tp_value bound[64], list;
    CHECK_OK(tp_value_list(2, &list));
    list.u.seq.items[0] = tp_value_tensor(meta_tensor());
    list.u.seq.items[1] = tp_value_int(3);
    CHECK_STATUS(bind_with(op, arg, list, bound), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("must be Tensor[], not list");
    CHECK_STATUS(bind_with(op, arg, tp_value_tensor(meta_tensor()), bound), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("must be Tensor[], not Tensor");
    CHECK_OK(tp_value_list(0, &list));
    CHECK_OK(bind_with(op, arg, list, bound)); /* an empty list binds; the op's rule judges it */
    clear_all(bound, s->n_args);
}

/* ---- the schema parser ------------------------------------------------- */

TEST(test_schema_parse) {
    tp_schema s;
    CHECK_OK(tp__schema_parse("f(Tensor self, Tensor? w=None, int[] size=[1, 2], int? k=None, float eps=1e-05, "
                              "bool flag=True, str mode='mean', Scalar alpha=1, Tensor[] xs=[], *, "
                              "ScalarType? dtype=None, float neg=-0.5, int[] one=3, Any a=False) -> (Tensor, Tensor)",
                              &s));
    CHECK(strcmp(s.name, "f") == 0 && s.n_args == 13);
    CHECK(s.returns == TP_RET_TUPLE && s.n_returns == 2);
    static const tp_arg_type types[] = {TP_ARG_TENSOR, TP_ARG_OPT_TENSOR, TP_ARG_INT_LIST, TP_ARG_OPT_INT,
                                        TP_ARG_FLOAT,  TP_ARG_BOOL,       TP_ARG_STR,      TP_ARG_SCALAR,
                                        TP_ARG_TENSOR_LIST, TP_ARG_OPT_DTYPE, TP_ARG_FLOAT, TP_ARG_INT_LIST,
                                        TP_ARG_ANY};
    static const char *names[] = {"self", "w", "size", "k", "eps", "flag", "mode", "alpha", "xs", "dtype", "neg",
                                  "one", "a"};
    static const char *defaults[] = {NULL, "None", "[1, 2]", "None", "1e-05", "True", "'mean'", "1", "[]", "None",
                                     "-0.5", "3", "False"};
    for (int i = 0; i < s.n_args && i < 13; i++) {
        CHECK_MSG(s.args[i].type == types[i], "arg %d type", i);
        CHECK_MSG(strcmp(s.args[i].name, names[i]) == 0, "arg %d name %s", i, s.args[i].name);
        CHECK_MSG(s.args[i].kwarg_only == (i >= 9), "arg %d kwarg_only", i);
        CHECK_MSG(s.args[i].has_default == (defaults[i] != NULL), "arg %d has_default", i);
        if (defaults[i]) {
            char r[64];
            tp_value_repr(&s.args[i].default_value, r, sizeof r);
            CHECK_MSG(strcmp(r, defaults[i]) == 0, "arg %d default %s, want %s", i, r, defaults[i]);
        }
    }
    CHECK(s.args[4].default_value.kind == TP_VAL_FLOAT && s.args[7].default_value.kind == TP_VAL_INT);
    tp__schema_free(&s);
    tp__schema_free(&s); /* freeing twice is harmless: the struct was reset */
    tp__schema_free(NULL);

    CHECK_OK(tp__schema_parse("g() -> Tensor[]", &s));
    CHECK(s.n_args == 0 && s.returns == TP_RET_TENSOR_LIST);
    tp__schema_free(&s);
    CHECK_OK(tp__schema_parse("h(Any x, float lo=-inf, float hi=inf) -> Any", &s));
    CHECK(s.n_args == 3 && s.returns == TP_RET_ANY && isinf(s.args[1].default_value.u.f) &&
          s.args[1].default_value.u.f < 0);
    tp__schema_free(&s);
    CHECK_OK(tp__schema_parse("k(Tensor x) -> (Tensor, Tensor, Tensor)", &s));
    CHECK(s.returns == TP_RET_TUPLE && s.n_returns == 3 && s.n_args == 1);
    tp__schema_free(&s);
    CHECK_OK(tp__schema_parse("m(Tensor x) -> Tensor", &s));
    CHECK(s.returns == TP_RET_TENSOR && s.n_returns == 1);
    tp__schema_free(&s);
}

TEST(test_schema_parse_errors) {
    static const struct { const char *text, *why; } bad[] = {
        {"no_parens -> Tensor", "expected name(args)"},
        {"f(Tensor x)", "expected name(args)"},
        {"f(Tensr x) -> Tensor", "unknown argument type"},
        {"f(Tensor) -> Tensor", "missing argument name"},
        {"f(int x=abc) -> Tensor", "bad int default"},
        {"f(float x=1.5.5) -> Tensor", "bad float default"},
        {"f(str s='abc) -> Tensor", "unterminated string default"},
        {"f(int x=) -> Tensor", "bad default"},
        {"f(int[] x=[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]) -> Tensor", "list default too long"},
        {"f(int[] x=[a]) -> Tensor", "bad list default"},
        {"f(Tensor x) -> Foo", "bad return type"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tp_schema s;
        CHECK_STATUS(tp__schema_parse(bad[i].text, &s), TP_ERR_INTERNAL);
        CHECK_MSG(strstr(tp_last_error(), bad[i].why) != NULL && strstr(tp_last_error(), bad[i].text) != NULL,
                  "%s: message \"%s\"", bad[i].text, tp_last_error());
    }
}

/* ---- allocation failures ----------------------------------------------- */

static tp_status op_parse(void *ctx) {
    (void)ctx;
    tp_schema s;
    tp_status st = tp__schema_parse(
        "f(Tensor self, int[] size=[1, 2], str mode='mean', *, float eps=1e-05) -> (Tensor, Tensor)", &s);
    if (st == TP_OK) tp__schema_free(&s);
    return st;
}

static tp_status op_bind_add(void *ctx) {
    tp_value *args = ctx, bound[3], kwargs = tp_value_none(), item = tp_value_float(2.0);
    tp_status st = tp_value_dict(&kwargs);
    if (st == TP_OK) st = tp_value_dict_set(&kwargs, "alpha", &item);
    if (st == TP_OK) st = tp_op_bind(TP_OP_ADD, args, 2, &kwargs, bound);
    if (st == TP_OK) clear_all(bound, 3);
    tp_value_clear(&kwargs);
    return st;
}

/* Arguments prepared before the failing allocator goes in: only the bind
 * runs under it. */
typedef struct {
    tp_op op;
    tp_value args[64], kwargs;
    int n;
} bind_ctx;

static void bind_ctx_init(bind_ctx *b, tp_op op, int arg, tp_value value) {
    const tp_schema *s = tp_op_schema(op);
    b->op = op;
    b->n = minimal_args(s, b->args, &b->kwargs);
    if (arg < b->n) {
        tp_value_clear(&b->args[arg]);
        b->args[arg] = value;
    } else {
        CHECK_OK(tp_value_dict_set(&b->kwargs, s->args[arg].name, &value));
    }
}

static void bind_ctx_clear(bind_ctx *b) {
    clear_all(b->args, b->n);
    tp_value_clear(&b->kwargs);
}

static tp_status op_bind_generic(void *ctx) {
    bind_ctx *b = ctx;
    tp_value bound[64];
    tp_status st = tp_op_bind(b->op, b->args, b->n, &b->kwargs, bound);
    if (st == TP_OK) clear_all(bound, tp_op_schema(b->op)->n_args);
    return st;
}

TEST(test_nomem_bind) {
    CHECK_OK(tp_ops_init()); /* the registry itself is built once, before */
    check_alloc_failures("schema parse", op_parse, NULL);
    if (tp_op_schema(TP_OP_ADD)) {
        tp_value args[2] = {tp_value_tensor(meta_tensor()), tp_value_int(3)};
        check_alloc_failures("bind add", op_bind_add, args);
        tp_value_clear(&args[0]);
    } else {
        NOTE("add is not registered yet: bind failure injection on add skipped");
    }
    bind_ctx b;
    int arg;
    tp_op op;
    if ((op = find_op_with(TP_ARG_INT_LIST, &arg)) != TP_OP_INVALID) {
        bind_ctx_init(&b, op, arg, tp_value_int(2)); /* becomes a list: allocates */
        check_alloc_failures("bind int -> int[]", op_bind_generic, &b);
        bind_ctx_clear(&b);
    }
    if ((op = find_op_with(TP_ARG_TENSOR_LIST, &arg)) != TP_OP_INVALID) {
        tp_value v;
        CHECK_OK(valid_value(TP_ARG_TENSOR_LIST, &v));
        bind_ctx_init(&b, op, arg, v);
        check_alloc_failures("bind Tensor[]", op_bind_generic, &b);
        bind_ctx_clear(&b);
    }
    /* every registered op with its minimal arguments */
    for (int i = 0; i < TP_OP_COUNT; i++) {
        const tp_schema *s = tp_op_schema((tp_op)i);
        if (!s) continue;
        b.op = (tp_op)i;
        b.n = minimal_args(s, b.args, &b.kwargs);
        char what[64];
        snprintf(what, sizeof what, "bind %s", tp_op_name((tp_op)i));
        /* ops whose arguments are all plain scalars may bind without allocating */
        check_alloc_failures_ex(what, op_bind_generic, &b, true);
        bind_ctx_clear(&b);
    }
}

TEST_MAIN(T(test_op_names), T(test_registered_schemas), T(test_bind_every_schema), T(test_bind_add),
          T(test_bind_int_to_float), T(test_bind_int_to_int_list), T(test_bind_tensor_list), T(test_schema_parse),
          T(test_schema_parse_errors), T(test_nomem_bind))
