/*
 * registry.c - the operator table, argument binding and eager dispatch.
 *
 * The table is filled once (tp_ops_init, under a lock, on first use) by the
 * kernel families' registration functions; after that it is read-only and
 * shared by all threads. tp_shutdown empties it again (the next use fills
 * it anew).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <stdatomic.h>
#include <pthread.h>
#include <threads.h>

#include "ops_impl.h"
#include "../engine_impl.h"

typedef struct op_def {
    const char *schema_text;
    unsigned flags;
    tp_infer_fn infer;
    tp_kernel_fn kernel;
    tp_kernel_fn kernel_fast;
    tp_variant variants[6];
    int n_variants;
    tp_schema schema;
    bool parsed;
} op_def;

static const char *const op_names[TP_OP_COUNT] = {
#define TP_OP(id, name, family) name,
#include "tpexport/op_list.h"
#undef TP_OP
};

static op_def g_ops[TP_OP_COUNT];
static mtx_t g_init_lock;
static pthread_once_t g_lock_once = PTHREAD_ONCE_INIT;
static atomic_bool g_ready;
static tp_status g_init_status = TP_OK;
static char g_init_msg[512];
static bool g_force_reference = false;

void tp__register_op(tp_op op, const char *schema, unsigned flags, tp_infer_fn infer, tp_kernel_fn kernel) {
    if ((unsigned)op >= TP_OP_COUNT) return;
    g_ops[op].schema_text = schema;
    g_ops[op].flags = flags;
    g_ops[op].infer = infer;
    g_ops[op].kernel = kernel;
}

void tp__register_fast_kernel(tp_op op, tp_kernel_fn kernel) {
    if ((unsigned)op < TP_OP_COUNT) g_ops[op].kernel_fast = kernel;
}

void tp__register_variant(tp_op op, const char *name, int min_level, tp_prepare_fn prepare) {
    if ((unsigned)op >= TP_OP_COUNT) return;
    op_def *d = &g_ops[op];
    if (d->n_variants >= (int)TP_ARRAY_LEN(d->variants)) return;
    d->variants[d->n_variants++] = (tp_variant){.name = name, .min_level = min_level, .prepare = prepare};
}

const tp_variant *tp__op_variants(tp_op op, int *n) {
    const op_def *d = (unsigned)op < TP_OP_COUNT ? &g_ops[op] : NULL;
    *n = d ? d->n_variants : 0;
    return d && d->n_variants ? d->variants : NULL;
}

tp_kernel_fn tp__op_reference_kernel(tp_op op) { return (unsigned)op < TP_OP_COUNT ? g_ops[op].kernel : NULL; }

tp_kernel_fn tp__op_eager_kernel(tp_op op, bool reference) {
    if ((unsigned)op >= TP_OP_COUNT) return NULL;
    const op_def *d = &g_ops[op];
    return (d->kernel_fast && !g_force_reference && !reference) ? d->kernel_fast : d->kernel;
}

static void init_once(void) {
    tp__register_unary_ops();
    tp__register_binary_ops();
    tp__register_reduce_ops();
    tp__register_linalg_ops();
    tp__register_conv_ops();
    tp__register_pool_ops();
    tp__register_nn_ops();
    tp__register_shape_ops();
    tp__register_index_ops();
    tp__register_create_ops();
    tp__register_onnx_ops_ops();
    tp__register_signal_ops();
    tp__register_symint_ops();
    tp__register_advindex_ops();
    tp__register_loss_ops();
    tp__register_random_ops();
    tp__register_fast_ops();
    for (int i = 0; i < TP_OP_COUNT; i++) {
        if (!g_ops[i].schema_text) continue;
        tp_status st = tp__schema_parse(g_ops[i].schema_text, &g_ops[i].schema);
        if (st == TP_OK && strcmp(g_ops[i].schema.name, op_names[i]) != 0)
            st = tp_error(TP_ERR_INTERNAL, "schema name '%s' registered for op '%s'", g_ops[i].schema.name,
                          op_names[i]);
        if (st != TP_OK) {
            g_init_status = st;
            snprintf(g_init_msg, sizeof g_init_msg, "%s", tp_last_error());
            return;
        }
        g_ops[i].parsed = true;
    }
}

static void make_lock(void) { mtx_init(&g_init_lock, mtx_plain); }

tp_status tp_ops_init(void) {
    if (!atomic_load_explicit(&g_ready, memory_order_acquire)) {
        pthread_once(&g_lock_once, make_lock);
        mtx_lock(&g_init_lock);
        if (!atomic_load_explicit(&g_ready, memory_order_relaxed)) {
            init_once();
            atomic_store_explicit(&g_ready, true, memory_order_release);
        }
        mtx_unlock(&g_init_lock);
    }
    if (g_init_status != TP_OK) return tp_error(g_init_status, "%s", g_init_msg);
    return TP_OK;
}

void tp__ops_shutdown(void) {
    pthread_once(&g_lock_once, make_lock);
    mtx_lock(&g_init_lock);
    for (int i = 0; i < TP_OP_COUNT; i++)
        if (g_ops[i].parsed) tp__schema_free(&g_ops[i].schema);
    memset(g_ops, 0, sizeof g_ops);
    g_init_status = TP_OK;
    g_init_msg[0] = 0;
    atomic_store_explicit(&g_ready, false, memory_order_release);
    mtx_unlock(&g_init_lock);
}

const char *tp_op_name(tp_op op) { return (unsigned)op < TP_OP_COUNT ? op_names[op] : "?"; }

tp_op tp_op_from_name(const char *name) {
    if (!name) return TP_OP_INVALID;
    for (int i = 0; i < TP_OP_COUNT; i++)
        if (strcmp(op_names[i], name) == 0) return (tp_op)i;
    return TP_OP_INVALID;
}

static const op_def *get_def(tp_op op) {
    if ((unsigned)op >= TP_OP_COUNT || tp_ops_init() != TP_OK) return NULL;
    return g_ops[op].parsed ? &g_ops[op] : NULL;
}

const tp_schema *tp_op_schema(tp_op op) {
    const op_def *d = get_def(op);
    return d ? &d->schema : NULL;
}

const char *tp_op_schema_text(tp_op op) {
    const op_def *d = get_def(op);
    return d ? d->schema_text : NULL;
}

unsigned tp_op_flags(tp_op op) {
    const op_def *d = get_def(op);
    return d ? d->flags : 0;
}

bool tp_op_has_kernel(tp_op op) {
    const op_def *d = get_def(op);
    return d && d->kernel && d->infer;
}

void tp_ops_force_reference(bool force) { g_force_reference = force; }
bool tp__ops_reference_forced(void) { return g_force_reference; }

/* ---- binding ----------------------------------------------------------- */

static bool is_tensorish(const tp_value *v) { return v->kind == TP_VAL_TENSOR || v->kind == TP_VAL_NODE; }

static const char *arg_type_name(tp_arg_type t) {
    static const char *const names[] = {"Tensor", "Tensor?", "Tensor[]", "Tensor or Scalar", "Scalar",
                                        "Scalar?", "int", "int?", "int[]", "int[]?", "float",
                                        "float?", "bool", "bool?", "str", "str?", "dtype?", "Any"};
    return (unsigned)t < TP_ARRAY_LEN(names) ? names[t] : "?";
}

/* Check v against type t; may rewrite it (int -> float, int -> [int]). */
static tp_status coerce_arg(tp_op op, const tp_schema_arg *a, tp_value *v) {
    tp_value_kind k = v->kind;
    bool ok = false;
    if (k == TP_VAL_NODE) return TP_OK; /* resolved at run time */
    bool none = k == TP_VAL_NONE;
    switch (a->type) {
    case TP_ARG_TENSOR: ok = k == TP_VAL_TENSOR; break;
    case TP_ARG_OPT_TENSOR: ok = none || k == TP_VAL_TENSOR; break;
    case TP_ARG_TENSOR_LIST:
        ok = tp_value_is_seq(v);
        for (int64_t i = 0; ok && i < v->u.seq.n; i++) ok = is_tensorish(&v->u.seq.items[i]);
        break;
    case TP_ARG_TENSOR_OR_SCALAR: ok = k == TP_VAL_TENSOR || tp_value_is_number(v); break;
    case TP_ARG_OPT_SCALAR: ok = none || tp_value_is_number(v); break;
    case TP_ARG_SCALAR: ok = tp_value_is_number(v); break;
    case TP_ARG_OPT_INT: ok = none || k == TP_VAL_INT || k == TP_VAL_BOOL; break;
    case TP_ARG_INT: ok = k == TP_VAL_INT || k == TP_VAL_BOOL; break;
    case TP_ARG_OPT_INT_LIST:
    case TP_ARG_INT_LIST:
        if (none && a->type == TP_ARG_OPT_INT_LIST) {
            ok = true;
        } else if (k == TP_VAL_INT) {
            tp_value list;
            TP_TRY(tp_value_int_list(&v->u.i, 1, &list));
            tp_value_move(v, &list);
            ok = true;
        } else if (tp_value_is_seq(v)) {
            ok = true;
            for (int64_t i = 0; ok && i < v->u.seq.n; i++)
                ok = v->u.seq.items[i].kind == TP_VAL_INT || v->u.seq.items[i].kind == TP_VAL_NODE;
        }
        break;
    case TP_ARG_OPT_FLOAT:
    case TP_ARG_FLOAT:
        if (none) ok = a->type == TP_ARG_OPT_FLOAT;
        else if (tp_value_is_number(v)) {
            *v = tp_value_float(tp_value_as_f64(v));
            ok = true;
        }
        break;
    case TP_ARG_OPT_BOOL: ok = none || k == TP_VAL_BOOL; break;
    case TP_ARG_BOOL: ok = k == TP_VAL_BOOL; break;
    case TP_ARG_OPT_STR: ok = none || k == TP_VAL_STR; break;
    case TP_ARG_STR: ok = k == TP_VAL_STR; break;
    case TP_ARG_OPT_DTYPE: ok = none || k == TP_VAL_DTYPE; break;
    case TP_ARG_ANY: ok = true; break;
    }
    TP_CHECK(ok, TP_ERR_TYPE, "%s(): argument '%s' must be %s, not %s", tp_op_name(op), a->name,
             arg_type_name(a->type), tp_value_kind_name(k));
    return TP_OK;
}

tp_status tp_op_bind(tp_op op, const tp_value *args, int n_args, const tp_value *kwargs, tp_value *bound) {
    const op_def *d = get_def(op);
    if (!d) {
        TP_TRY(tp_ops_init());
        return tp_error(TP_ERR_NOT_FOUND, "op %s has no schema", tp_op_name(op));
    }
    const tp_schema *s = &d->schema;
    TP_CHECK(s->n_args <= 64, TP_ERR_INTERNAL, "too many schema arguments");
    int n_positional = 0;
    while (n_positional < s->n_args && !s->args[n_positional].kwarg_only) n_positional++;
    for (int i = 0; i < s->n_args; i++) bound[i] = tp_value_none();
    bool given[64] = {false};
    tp_status st = TP_OK;
    if (n_args > n_positional) {
        st = tp_error(TP_ERR_INVALID_ARG, "%s() takes at most %d positional argument%s but %d were given",
                      tp_op_name(op), n_positional, n_positional == 1 ? "" : "s", n_args);
        goto fail;
    }
    for (int i = 0; i < n_args; i++) {
        if ((st = tp_value_copy(&args[i], &bound[i])) != TP_OK) goto fail;
        given[i] = true;
    }
    if (kwargs && kwargs->kind != TP_VAL_DICT && kwargs->kind != TP_VAL_NONE) {
        st = tp_error(TP_ERR_TYPE, "%s(): keyword arguments must be a dict, not %s", tp_op_name(op),
                      tp_value_kind_name(kwargs->kind));
        goto fail;
    }
    if (kwargs && kwargs->kind == TP_VAL_DICT) {
        for (int64_t k = 0; k < kwargs->u.seq.n; k++) {
            const char *key = kwargs->u.seq.keys[k];
            int idx = -1;
            for (int i = 0; i < s->n_args; i++)
                if (strcmp(s->args[i].name, key) == 0) idx = i;
            if (idx < 0) {
                st = tp_error(TP_ERR_INVALID_ARG, "%s() got an unexpected keyword argument '%s'", tp_op_name(op), key);
                goto fail;
            }
            if (given[idx]) {
                st = tp_error(TP_ERR_DUPLICATE, "%s() got multiple values for argument '%s'", tp_op_name(op), key);
                goto fail;
            }
            if ((st = tp_value_copy(&kwargs->u.seq.items[k], &bound[idx])) != TP_OK) goto fail;
            given[idx] = true;
        }
    }
    for (int i = 0; i < s->n_args; i++) {
        if (!given[i]) {
            if (!s->args[i].has_default) {
                st = tp_error(TP_ERR_MISSING, "%s() missing required argument '%s'", tp_op_name(op), s->args[i].name);
                goto fail;
            }
            if ((st = tp_value_copy(&s->args[i].default_value, &bound[i])) != TP_OK) goto fail;
        }
        if ((st = coerce_arg(op, &s->args[i], &bound[i])) != TP_OK) goto fail;
    }
    return TP_OK;
fail:
    for (int i = 0; i < s->n_args; i++) tp_value_clear(&bound[i]);
    return st;
}

/* ---- inference and dispatch -------------------------------------------- */

/* Check bound values against the schema before any kernel reads them: the
 * kinds tp_op_bind produces, with real tensors only (an eager kernel cannot
 * run on graph nodes). The shape rule makes its own checks, but in-place
 * and view ops have none run before their kernel, and a caller may build
 * the bound values itself. Never rewrites; TP_ERR_TYPE naming the op and
 * argument. */
static tp_status check_bound(tp_op op, const tp_schema *s, const tp_value *bound) {
    for (int i = 0; i < s->n_args; i++) {
        const tp_schema_arg *a = &s->args[i];
        const tp_value *v = &bound[i];
        tp_value_kind k = v->kind;
        bool none = k == TP_VAL_NONE, ok = false;
        switch (a->type) {
        case TP_ARG_TENSOR: ok = k == TP_VAL_TENSOR; break;
        case TP_ARG_OPT_TENSOR: ok = none || k == TP_VAL_TENSOR; break;
        case TP_ARG_TENSOR_LIST:
            ok = tp_value_is_seq(v);
            for (int64_t j = 0; ok && j < v->u.seq.n; j++) ok = v->u.seq.items[j].kind == TP_VAL_TENSOR;
            break;
        case TP_ARG_TENSOR_OR_SCALAR: ok = k == TP_VAL_TENSOR || tp_value_is_number(v); break;
        case TP_ARG_OPT_SCALAR: ok = none || tp_value_is_number(v); break;
        case TP_ARG_SCALAR: ok = tp_value_is_number(v); break;
        case TP_ARG_OPT_INT: ok = none || k == TP_VAL_INT || k == TP_VAL_BOOL; break;
        case TP_ARG_INT: ok = k == TP_VAL_INT || k == TP_VAL_BOOL; break;
        case TP_ARG_OPT_INT_LIST:
        case TP_ARG_INT_LIST:
            ok = (none && a->type == TP_ARG_OPT_INT_LIST) || tp_value_is_seq(v);
            for (int64_t j = 0; ok && !none && j < v->u.seq.n; j++) ok = v->u.seq.items[j].kind == TP_VAL_INT;
            break;
        case TP_ARG_OPT_FLOAT: ok = none || tp_value_is_number(v); break;
        case TP_ARG_FLOAT: ok = tp_value_is_number(v); break;
        case TP_ARG_OPT_BOOL: ok = none || k == TP_VAL_BOOL; break;
        case TP_ARG_BOOL: ok = k == TP_VAL_BOOL; break;
        case TP_ARG_OPT_STR: ok = none || k == TP_VAL_STR; break;
        case TP_ARG_STR: ok = k == TP_VAL_STR; break;
        case TP_ARG_OPT_DTYPE: ok = none || k == TP_VAL_DTYPE; break;
        case TP_ARG_ANY: ok = true; break;
        }
        TP_CHECK(ok, TP_ERR_TYPE, "%s(): argument '%s' must be %s, not %s", tp_op_name(op), a->name,
                 arg_type_name(a->type), tp_value_kind_name(k));
    }
    return TP_OK;
}

tp_status tp_op_infer(tp_op op, const tp_value *bound, tp_value *out) {
    const op_def *d = get_def(op);
    TP_CHECK(d && d->infer, TP_ERR_UNSUPPORTED, "op %s has no shape rule", tp_op_name(op));
    *out = tp_value_none();
    tp_status st = d->infer(bound, out);
    if (st != TP_OK) {
        tp_value_clear(out);
        tp_error_context("%s", tp_op_name(op));
    }
    return st;
}

/* Replace every meta tensor in v with an allocated tensor of its shape. */
static tp_status materialize(tp_value *v) {
    if (v->kind == TP_VAL_TENSOR && tp_tensor_is_meta(v->u.tensor)) {
        tp_tensor *m = v->u.tensor, *t;
        TP_TRY(tp_tensor_empty(m->dtype, m->ndim, m->sizes, &t));
        tp_tensor_free(m);
        v->u.tensor = t;
    } else if (tp_value_is_seq(v)) {
        for (int64_t i = 0; i < v->u.seq.n; i++) TP_TRY(materialize(&v->u.seq.items[i]));
    }
    return TP_OK;
}

tp_status tp_op_call_bound(tp_op op, const tp_value *bound, tp_value *out) {
    const op_def *d = get_def(op);
    TP_CHECK(d && d->kernel, TP_ERR_UNSUPPORTED, "op %s has no kernel", tp_op_name(op));
    TP_CHECK(bound != NULL && out != NULL, TP_ERR_INVALID_ARG, "%s(): bound arguments or output is NULL", tp_op_name(op));
    TP_TRY(check_bound(op, &d->schema, bound));
    tp_value result = tp_value_none();
    tp_status st = TP_OK;
    if (!(d->flags & (TP_OPF_VIEW | TP_OPF_INPLACE))) {
        TP_TRY(tp_op_infer(op, bound, &result));
        st = materialize(&result);
    }
    bool handled = false;
    if (st == TP_OK && !g_force_reference) {
        st = tp__eager_fast_call(op, bound, d->schema.n_args, &result, &handled);
        /* a fast variant's failure names the op, as the reference kernel's does */
        if (st != TP_OK) tp_error_context("%s", tp_op_name(op));
    }
    if (st == TP_OK && !handled) {
        tp_kernel_fn k = (d->kernel_fast && !g_force_reference) ? d->kernel_fast : d->kernel;
        st = k(bound, &result);
        if (st != TP_OK) tp_error_context("%s", tp_op_name(op));
    }
    if (st != TP_OK) {
        tp_value_clear(&result);
        return st;
    }
    *out = result;
    return TP_OK;
}

tp_status tp_op_call(tp_op op, const tp_value *args, int n_args, const tp_value *kwargs, tp_value *out) {
    const tp_schema *s = tp_op_schema(op);
    if (!s) {
        TP_TRY(tp_ops_init());
        return tp_error(TP_ERR_NOT_FOUND, "op %s has no schema", tp_op_name(op));
    }
    tp_value bound[64];
    TP_CHECK(s->n_args <= 64, TP_ERR_INTERNAL, "too many schema arguments");
    TP_TRY(tp_op_bind(op, args, n_args, kwargs, bound));
    tp_status st = tp_op_call_bound(op, bound, out);
    for (int i = 0; i < s->n_args; i++) tp_value_clear(&bound[i]);
    return st;
}
