/*
 * test_ops.c - runs every op test case in tests/fixtures/ops/<family>.json
 * (format: docs/testing.md) and checks that every registered op has at least
 * one value case and one error case.
 *
 * Every case of an op with fast kernel variants (contract v2) also runs as
 * a one-node program through the execution engine (run.h) at each CPU level
 * from scalar to the best supported, with 1 and 2 threads: the result must
 * match the fixture with the case's own tolerance (default rtol 1e-5, atol
 * 1e-6, the eager check's), and an error case must fail with the same
 * status and message. Cases the variants decline run the reference kernel
 * inside the engine; the number that ran a fast variant is printed per op.
 *
 * Usage: test_ops [filter]   (filter: substring of a case name or op name)
 */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_impl.h"
#include "tpexport/run.h"
#include "tpexport/tpexport.h"

#define OPS_DIR "fixtures/ops"

static int n_passed, n_failed;
static int value_cases[TP_OP_COUNT], error_cases[TP_OP_COUNT];
/* engine runs: cases per op, cases that ran a fast variant, float32 cases
 * of ops that must run fast but did not */
static int engine_cases[TP_OP_COUNT], engine_fast[TP_OP_COUNT], engine_slow_f32[TP_OP_COUNT];
static int engine_errors_at_node, engine_errors_in_run, engine_skipped; /* error cases by where they failed */

/* Build a tensor value from {"npy": path, "layout": ...}. */
static tp_status load_tensor_arg(json_t *obj, tp_value *out) {
    const char *file = json_string_value(json_object_get(obj, "npy"));
    const char *layout = json_string_value(json_object_get(obj, "layout"));
    char path[1024];
    snprintf(path, sizeof path, OPS_DIR "/%s", file ? file : "");
    tp_tensor *t;
    tp_status st = tp_npy_load(path, &t);
    if (st != TP_OK) return st;
    if (layout && strcmp(layout, "transposed") == 0 && tp_tensor_ndim(t) >= 2) {
        int nd = tp_tensor_ndim(t);
        int64_t perm[TP_MAX_DIMS], rsizes[TP_MAX_DIMS];
        for (int i = 0; i < nd; i++) {
            perm[i] = nd - 1 - i;
            rsizes[i] = tp_tensor_sizes(t)[nd - 1 - i];
        }
        tp_tensor *store, *tv, *back;
        /* store = contiguous tensor of reversed shape holding t permuted */
        if ((st = tp_tensor_empty(tp_tensor_dtype(t), nd, rsizes, &store)) == TP_OK) {
            if ((st = tp_tensor_permute(store, perm, &back)) == TP_OK) {
                st = tp_tensor_copy_(back, t); /* writes through the view */
                tv = back;
                tp_tensor_free(t);
                t = tv;
            }
            tp_tensor_free(store);
        }
    } else if (layout && strcmp(layout, "strided") == 0 && tp_tensor_ndim(t) >= 1) {
        int nd = tp_tensor_ndim(t);
        int64_t sizes[TP_MAX_DIMS];
        memcpy(sizes, tp_tensor_sizes(t), (size_t)nd * sizeof *sizes);
        sizes[nd - 1] *= 2;
        tp_tensor *store, *view;
        if ((st = tp_tensor_zeros(tp_tensor_dtype(t), nd, sizes, &store)) == TP_OK) {
            if ((st = tp_tensor_slice(store, nd - 1, 0, sizes[nd - 1], 2, &view)) == TP_OK) {
                st = tp_tensor_copy_(view, t);
                tp_tensor_free(t);
                t = view;
            }
            tp_tensor_free(store);
        }
    }
    if (st != TP_OK) {
        tp_tensor_free(t);
        return st;
    }
    *out = tp_value_tensor(t);
    return TP_OK;
}

static tp_status json_to_value(json_t *j, tp_value *out) {
    *out = tp_value_none();
    switch (json_typeof(j)) {
    case JSON_NULL: return TP_OK;
    case JSON_TRUE: *out = tp_value_bool(true); return TP_OK;
    case JSON_FALSE: *out = tp_value_bool(false); return TP_OK;
    case JSON_INTEGER: *out = tp_value_int(json_integer_value(j)); return TP_OK;
    case JSON_REAL: *out = tp_value_float(json_real_value(j)); return TP_OK;
    case JSON_STRING: return tp_value_str(json_string_value(j), out);
    case JSON_ARRAY: {
        tp_status st = tp_value_list((int64_t)json_array_size(j), out);
        for (size_t i = 0; st == TP_OK && i < json_array_size(j); i++) {
            tp_value item;
            st = json_to_value(json_array_get(j, i), &item);
            if (st == TP_OK) st = tp_value_seq_set(out, (int64_t)i, &item);
        }
        return st;
    }
    case JSON_OBJECT: {
        if (json_object_get(j, "npy")) return load_tensor_arg(j, out);
        json_t *dt = json_object_get(j, "dtype");
        if (dt) {
            tp_dtype d;
            tp_status st = tp_dtype_from_name(json_string_value(dt), &d);
            if (st == TP_OK) *out = tp_value_dtype(d);
            return st;
        }
        json_t *fl = json_object_get(j, "float"); /* {"float": "inf" | "-inf" | "nan"}: non-finite scalars */
        if (fl && json_is_string(fl)) {
            const char *v = json_string_value(fl);
            if (strcmp(v, "inf") == 0) *out = tp_value_float(INFINITY);
            else if (strcmp(v, "-inf") == 0) *out = tp_value_float(-INFINITY);
            else if (strcmp(v, "nan") == 0) *out = tp_value_float(NAN);
            else return tp_error(TP_ERR_INVALID_ARG, "unknown float '%s' in manifest", v);
            return TP_OK;
        }
        json_t *tup = json_object_get(j, "tuple");
        if (tup) {
            tp_status st = tp_value_tuple((int64_t)json_array_size(tup), out);
            for (size_t i = 0; st == TP_OK && i < json_array_size(tup); i++) {
                tp_value item;
                st = json_to_value(json_array_get(tup, i), &item);
                if (st == TP_OK) st = tp_value_seq_set(out, (int64_t)i, &item);
            }
            return st;
        }
        return tp_error(TP_ERR_INVALID_ARG, "unknown object in manifest");
    }
    }
    return tp_error(TP_ERR_INVALID_ARG, "bad JSON value in manifest");
}

/* Compare a result with an expected value; print and return false on mismatch. */
static bool compare(const char *where, const tp_value *got, const tp_value *want, double rtol, double atol) {
    if (want->kind == TP_VAL_TENSOR) {
        if (got->kind != TP_VAL_TENSOR) {
            fprintf(stderr, "  %s: expected a tensor, got %s\n", where, tp_value_kind_name(got->kind));
            return false;
        }
        tp_tensor *g = got->u.tensor, *w = want->u.tensor;
        if (tp_tensor_dtype(g) != tp_tensor_dtype(w)) {
            fprintf(stderr, "  %s: dtype %s, expected %s\n", where, tp_dtype_name(tp_tensor_dtype(g)),
                    tp_dtype_name(tp_tensor_dtype(w)));
            return false;
        }
        char msg[256];
        /* half types: compare with their own resolution */
        if (tp_tensor_dtype(w) == TP_FLOAT16 && rtol < 1e-3) rtol = 1e-3, atol = atol < 1e-3 ? 1e-3 : atol;
        if (tp_tensor_dtype(w) == TP_BFLOAT16 && rtol < 1e-2) rtol = 1e-2, atol = atol < 1e-2 ? 1e-2 : atol;
        if (!tp_tensor_allclose(g, w, rtol, atol, msg, sizeof msg)) {
            fprintf(stderr, "  %s: %s\n", where, msg);
            return false;
        }
        return true;
    }
    if (tp_value_is_seq(want)) {
        if (!tp_value_is_seq(got) || tp_value_len(got) != tp_value_len(want)) {
            fprintf(stderr, "  %s: expected a sequence of %lld, got %s of %lld\n", where,
                    (long long)tp_value_len(want), tp_value_kind_name(got->kind), (long long)tp_value_len(got));
            return false;
        }
        for (int64_t i = 0; i < tp_value_len(want); i++) {
            char w2[256];
            snprintf(w2, sizeof w2, "%s[%lld]", where, (long long)i);
            if (!compare(w2, tp_value_at(got, i), tp_value_at(want, i), rtol, atol)) return false;
        }
        return true;
    }
    if (tp_value_is_number(want) && tp_value_is_number(got)) {
        double a = tp_value_as_f64(got), b = tp_value_as_f64(want);
        if (a == b || (a - b <= atol + rtol * (b < 0 ? -b : b) && b - a <= atol + rtol * (b < 0 ? -b : b))) return true;
        fprintf(stderr, "  %s: %g != %g\n", where, a, b);
        return false;
    }
    if (!tp_value_equal(got, want)) {
        char a[128], b[128];
        tp_value_repr(got, a, sizeof a);
        tp_value_repr(want, b, sizeof b);
        fprintf(stderr, "  %s: %s != %s\n", where, a, b);
        return false;
    }
    return true;
}

static tp_status status_from_name(const char *name, tp_status *out) {
    static const tp_status all[] = {TP_ERR_INVALID_ARG, TP_ERR_INDEX, TP_ERR_MISSING, TP_ERR_DUPLICATE,
                                    TP_ERR_STATE, TP_ERR_NOT_FOUND, TP_ERR_TYPE, TP_ERR_SHAPE,
                                    TP_ERR_CONSTRAINT, TP_ERR_CORRUPT, TP_ERR_IO, TP_ERR_VERIFY,
                                    TP_ERR_UNSUPPORTED, TP_ERR_NOMEM, TP_ERR_INTERNAL};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(tp_status_str(all[i]), name) == 0) {
            *out = all[i];
            return TP_OK;
        }
    return TP_ERR_INVALID_ARG;
}

/* The case's positional arguments (args[32], None past nargs) and kwargs
 * (a dict, or None without "kwargs"). */
static bool load_args(const char *where, json_t *c, tp_value *args, size_t *n_out, tp_value *kwargs) {
    json_t *jargs = json_object_get(c, "args");
    size_t nargs = json_array_size(jargs);
    bool ok = true;
    *kwargs = tp_value_none();
    for (size_t i = 0; i < 32; i++) args[i] = tp_value_none();
    if (nargs > 32) nargs = 32;
    for (size_t i = 0; ok && i < nargs; i++) {
        if (json_to_value(json_array_get(jargs, i), &args[i]) != TP_OK) {
            fprintf(stderr, "  %s: bad arg %zu: %s\n", where, i, tp_last_error());
            ok = false;
        }
    }
    json_t *jkw = json_object_get(c, "kwargs");
    if (ok && jkw) {
        ok = tp_value_dict(kwargs) == TP_OK;
        const char *key;
        json_t *val;
        json_object_foreach(jkw, key, val) {
            tp_value v;
            if (!ok || json_to_value(val, &v) != TP_OK || tp_value_dict_set(kwargs, key, &v) != TP_OK) {
                fprintf(stderr, "  %s: bad kwarg %s: %s\n", where, key, tp_last_error());
                ok = false;
                break;
            }
        }
    }
    *n_out = nargs;
    return ok;
}

static bool run_case(const char *manifest, json_t *c) {
    const char *name = json_string_value(json_object_get(c, "name"));
    const char *opname = json_string_value(json_object_get(c, "op"));
    char where[512];
    snprintf(where, sizeof where, "%s:%s", manifest, name ? name : "?");
    tp_op op = tp_op_from_name(opname);
    if (op == TP_OP_INVALID) {
        fprintf(stderr, "  %s: unknown op '%s'\n", where, opname ? opname : "(null)");
        return false;
    }
    json_t *jkw = json_object_get(c, "kwargs");
    tp_value args[32], kwargs = tp_value_none(), result = tp_value_none();
    size_t nargs;
    bool ok = load_args(where, c, args, &nargs, &kwargs);
    double rtol = json_object_get(c, "rtol") ? json_number_value(json_object_get(c, "rtol")) : 1e-5;
    double atol = json_object_get(c, "atol") ? json_number_value(json_object_get(c, "atol")) : 1e-6;
    if (ok) {
        tp_clear_error();
        tp_status st = tp_op_call(op, args, (int)nargs, jkw ? &kwargs : NULL, &result);
        json_t *jerr = json_object_get(c, "error");
        if (jerr) {
            error_cases[op]++;
            tp_status want;
            const char *msg = json_string_value(json_object_get(c, "message"));
            if (status_from_name(json_string_value(jerr), &want) != TP_OK) {
                fprintf(stderr, "  %s: unknown status name\n", where);
                ok = false;
            } else if (st != want) {
                fprintf(stderr, "  %s: got %s (%s), expected %s\n", where, tp_status_str(st), tp_last_error(),
                        tp_status_str(want));
                ok = false;
            } else if (msg && !strstr(tp_last_error(), msg)) {
                fprintf(stderr, "  %s: message \"%s\" lacks \"%s\"\n", where, tp_last_error(), msg);
                ok = false;
            }
        } else {
            value_cases[op]++;
            if (st != TP_OK) {
                fprintf(stderr, "  %s: failed with %s: %s\n", where, tp_status_str(st), tp_last_error());
                ok = false;
            } else {
                tp_value want;
                json_t *jexp = json_object_get(c, "expect");
                if (json_to_value(jexp, &want) != TP_OK) {
                    fprintf(stderr, "  %s: bad expect: %s\n", where, tp_last_error());
                    ok = false;
                } else {
                    ok = compare(where, &result, &want, rtol, atol);
                    tp_value_clear(&want);
                }
                json_t *jea = json_object_get(c, "expect_args");
                const char *key;
                json_t *val;
                json_object_foreach(jea, key, val) {
                    int idx = atoi(key);
                    char w2[600];
                    snprintf(w2, sizeof w2, "%s (arg %d after call)", where, idx);
                    if (idx < 0 || idx >= (int)nargs || json_to_value(val, &want) != TP_OK) {
                        fprintf(stderr, "  %s: bad expect_args\n", w2);
                        ok = false;
                        continue;
                    }
                    if (!compare(w2, &args[idx], &want, rtol, atol)) ok = false;
                    tp_value_clear(&want);
                }
            }
        }
    }
    tp_value_clear(&result);
    tp_value_clear(&kwargs);
    for (size_t i = 0; i < 32; i++) tp_value_clear(&args[i]);
    return ok;
}

/* ---- the same case through the engine, as a one-node program ----------- */

static bool holds_tensor(const tp_value *v);

/* A list whose items are all tensors (a Tensor[] argument). */
static bool tensor_list(const tp_value *v) {
    if (v->kind != TP_VAL_LIST || v->u.seq.n == 0) return false;
    for (int64_t i = 0; i < v->u.seq.n; i++)
        if (v->u.seq.items[i].kind != TP_VAL_TENSOR) return false;
    return true;
}

static bool holds_tensor(const tp_value *v) {
    if (v->kind == TP_VAL_TENSOR) return true;
    if (tp_value_is_seq(v) || v->kind == TP_VAL_DICT)
        for (int64_t i = 0; i < v->u.seq.n; i++)
            if (holds_tensor(&v->u.seq.items[i])) return true;
    return false;
}

/* Ops whose float32 cases must all run a fast variant. */
static bool must_run_fast(tp_op op) {
    return op == TP_OP_ADD || op == TP_OP_MUL || op == TP_OP_RELU || op == TP_OP_EXP || op == TP_OP_TANH ||
           op == TP_OP_SIGMOID || op == TP_OP_GELU;
}

typedef struct one_node {
    tp_program *p;
    tp_tensor *inputs[40]; /* borrowed from the case's arguments, in placeholder order */
    int n_inputs;
    tp_status build_status; /* of creating the node (binding happens there) */
    char build_msg[512];
} one_node;

/* Turn argument v into a node argument: a tensor becomes a placeholder. */
static tp_status node_arg(tp_graph *g, one_node *o, tp_value *v, tp_value *out) {
    if (v->kind == TP_VAL_LIST && holds_tensor(v)) { /* a Tensor[]: one placeholder per item */
        TP_TRY(tp_value_list(v->u.seq.n, out));
        for (int64_t i = 0; i < v->u.seq.n; i++) {
            tp_value item = tp_value_none();
            tp_status st = node_arg(g, o, &v->u.seq.items[i], &item);
            if (st == TP_OK) st = tp_value_seq_set(out, i, &item);
            if (st != TP_OK) {
                tp_value_clear(out);
                return st;
            }
        }
        return TP_OK;
    }
    if (v->kind != TP_VAL_TENSOR) return tp_value_copy(v, out);
    if (o->n_inputs >= 40) return tp_error(TP_ERR_INVALID_ARG, "too many tensor arguments");
    char name[16];
    snprintf(name, sizeof name, "in%d", o->n_inputs);
    tp_node *n = NULL;
    TP_TRY(tp_graph_placeholder(g, name, NULL, &n)); /* no meta: shape errors surface in the engine */
    o->inputs[o->n_inputs++] = v->u.tensor;
    *out = tp_value_node(n);
    return TP_OK;
}

/* Build the program calling op on the case's arguments. TP_OK with o->p
 * NULL when creating the node failed (o->build_status says how). */
static tp_status build_one_node(tp_op op, tp_value *args, int nargs, tp_value *kwargs, one_node *o) {
    memset(o, 0, sizeof *o);
    tp_graph *g = NULL;
    TP_TRY(tp_graph_new(&g));
    tp_value targs = tp_value_none(), tkw = tp_value_none();
    tp_status st = tp_value_tuple(nargs, &targs);
    for (int i = 0; st == TP_OK && i < nargs; i++) {
        tp_value a = tp_value_none();
        st = node_arg(g, o, &args[i], &a);
        if (st == TP_OK) st = tp_value_seq_set(&targs, i, &a);
    }
    if (st == TP_OK && kwargs->kind == TP_VAL_DICT) {
        st = tp_value_dict(&tkw);
        for (int64_t i = 0; st == TP_OK && i < kwargs->u.seq.n; i++) {
            tp_value a = tp_value_none();
            st = node_arg(g, o, &kwargs->u.seq.items[i], &a);
            if (st == TP_OK) st = tp_value_dict_set(&tkw, kwargs->u.seq.keys[i], &a);
        }
    }
    tp_node *node = NULL;
    if (st == TP_OK) {
        tp_clear_error();
        o->build_status = tp_graph_call_function(g, op, &targs, tkw.kind == TP_VAL_DICT ? &tkw : NULL, &node);
        snprintf(o->build_msg, sizeof o->build_msg, "%s", tp_last_error());
    }
    tp_value_clear(&targs);
    tp_value_clear(&tkw);
    if (st != TP_OK || o->build_status != TP_OK) {
        tp_graph_free(g);
        return st;
    }
    tp_value outv = tp_value_node(node);
    tp_signature *sig = NULL;
    st = tp_graph_output(g, &outv, NULL);
    if (st == TP_OK) st = tp_signature_new(&sig);
    for (const tp_node *n = tp_graph_first_node(g); st == TP_OK && n; n = tp_node_next(n))
        if (tp_node_get_kind(n) == TP_NODE_PLACEHOLDER)
            st = tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor(tp_node_name(n)), NULL,
                                        TP_PERSISTENT_UNSET);
    if (st == TP_OK) st = tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(node)), NULL);
    if (st == TP_OK) return tp_program_new(g, sig, &o->p); /* takes both over */
    tp_signature_free(sig);
    tp_graph_free(g);
    return st;
}

/* Run case c through tp_run at every level from scalar and 1 or 2 threads. */
static bool run_case_engine(const char *manifest, json_t *c, tp_op op) {
    const char *name = json_string_value(json_object_get(c, "name"));
    char where[512];
    snprintf(where, sizeof where, "%s:%s (engine)", manifest, name ? name : "?");
    tp_value args[32], kwargs = tp_value_none(), want = tp_value_none();
    size_t nargs;
    json_t *jerr = json_object_get(c, "error");
    bool ok = load_args(where, c, args, &nargs, &kwargs);
    double rtol = json_object_get(c, "rtol") ? json_number_value(json_object_get(c, "rtol")) : 1e-5;
    double atol = json_object_get(c, "atol") ? json_number_value(json_object_get(c, "atol")) : 1e-6;
    tp_status want_st = TP_OK;
    const char *want_msg = json_string_value(json_object_get(c, "message"));
    if (ok && jerr && status_from_name(json_string_value(jerr), &want_st) != TP_OK) ok = false;
    if (ok && !jerr && json_to_value(json_object_get(c, "expect"), &want) != TP_OK) ok = false;
    bool skip = !ok;
    for (size_t i = 0; i < nargs && !skip; i++)
        skip = args[i].kind != TP_VAL_TENSOR && !tensor_list(&args[i]) && holds_tensor(&args[i]);
    for (int64_t i = 0; kwargs.kind == TP_VAL_DICT && i < kwargs.u.seq.n && !skip; i++)
        skip = kwargs.u.seq.items[i].kind != TP_VAL_TENSOR && holds_tensor(&kwargs.u.seq.items[i]);
    if (!jerr && want.kind != TP_VAL_TENSOR) skip = true; /* tp_run_execute returns tensors */
    one_node o = {0};
    if (!skip && build_one_node(op, args, (int)nargs, &kwargs, &o) != TP_OK) {
        fprintf(stderr, "  %s: building the program failed: %s\n", where, tp_last_error());
        ok = false;
    }
    bool f32 = !jerr && tp_tensor_dtype(want.u.tensor) == TP_FLOAT32;
    for (int i = 0; i < o.n_inputs; i++) f32 = f32 && tp_tensor_dtype(o.inputs[i]) == TP_FLOAT32;
    if (skip) engine_skipped++;
    else if (jerr && o.p) engine_errors_in_run++;
    else if (jerr) engine_errors_at_node++;
    if (!skip && ok && !o.p) {
        /* binding failed while creating the node: the same failure as the eager call */
        if (!jerr || o.build_status != want_st || (want_msg && !strstr(o.build_msg, want_msg))) {
            fprintf(stderr, "  %s: creating the node gave %s (%s)\n", where, tp_status_str(o.build_status), o.build_msg);
            ok = false;
        }
    }
    bool ran_fast = false;
    int supported = (int)tp_cpu_level_supported();
    for (int level = TP_CPU_SCALAR; o.p && level <= supported; level++) {
        for (int threads = 2; threads >= 1; threads--) {
            tp_run_options opt;
            tp_run_options_init(&opt);
            opt.cpu_level = (tp_cpu_level)level;
            opt.num_threads = threads;
            tp_run *r = NULL;
            if (tp_run_new(o.p, &opt, &r) != TP_OK) {
                ok = false;
                continue;
            }
            char w2[600];
            snprintf(w2, sizeof w2, "%s [%s, %d threads]", where, tp_cpu_level_name((tp_cpu_level)level), threads);
            tp_clear_error();
            tp_status st = tp_run_execute(r, o.inputs, o.n_inputs, NULL, 0);
            if (jerr) {
                if (st != want_st) {
                    fprintf(stderr, "  %s: got %s (%s), expected %s\n", w2, tp_status_str(st), tp_last_error(),
                            tp_status_str(want_st));
                    ok = false;
                } else if (want_msg && !strstr(tp_last_error(), want_msg)) {
                    fprintf(stderr, "  %s: message \"%s\" lacks \"%s\"\n", w2, tp_last_error(), want_msg);
                    ok = false;
                }
            } else if (st != TP_OK) {
                fprintf(stderr, "  %s: failed with %s: %s\n", w2, tp_status_str(st), tp_last_error());
                ok = false;
            } else {
                tp_run_stats stats;
                tp_run_get_stats(r, &stats);
                if (stats.n_fast > 0) ran_fast = true;
                tp_value got = tp_value_none();
                tp_tensor *t = tp_run_output(r, 0);
                if (t) got = tp_value_tensor(t); /* borrowed: not cleared */
                if (!compare(w2, &got, &want, rtol, atol)) ok = false;
            }
            tp_run_free(r);
        }
    }
    if (o.p && !jerr) {
        engine_cases[op]++;
        if (ran_fast) engine_fast[op]++;
        else if (f32 && must_run_fast(op)) {
            fprintf(stderr, "  %s: a float32 case of %s ran no fast variant\n", where, tp_op_name(op));
            engine_slow_f32[op]++;
            ok = false;
        }
    }
    tp_program_free(o.p);
    tp_value_clear(&want);
    tp_value_clear(&kwargs);
    for (size_t i = 0; i < 32; i++) tp_value_clear(&args[i]);
    return ok;
}

/* ---- steady-state allocations of every op, through the engine ----------
 * Each value case whose arguments the one-node program can take is planned
 * and called twice at the default level on one thread; the second call must
 * allocate nothing, whether the op runs a fast variant or its reference
 * kernel (whose temporaries the run context's scratch serves once the first
 * call has sized it). */
static atomic_long g_steady_allocs;
static void *steady_count_alloc(void *user, void *ptr, size_t old_size, size_t new_size) {
    (void)user;
    (void)old_size;
    if (new_size == 0) {
        free(ptr);
        return NULL;
    }
    atomic_fetch_add(&g_steady_allocs, 1);
    return realloc(ptr, new_size);
}
static int steady_cases[TP_OP_COUNT], steady_allocating[TP_OP_COUNT];

static void steady_alloc_case(json_t *c, tp_op op) {
    if (json_object_get(c, "error")) return;
    tp_value args[32], kwargs = tp_value_none(), want = tp_value_none();
    size_t nargs = 0;
    bool ok = load_args("steady", c, args, &nargs, &kwargs);
    if (ok && json_to_value(json_object_get(c, "expect"), &want) != TP_OK) ok = false;
    for (size_t i = 0; i < nargs && ok; i++)
        ok = args[i].kind == TP_VAL_TENSOR || tensor_list(&args[i]) || !holds_tensor(&args[i]);
    for (int64_t i = 0; kwargs.kind == TP_VAL_DICT && i < kwargs.u.seq.n && ok; i++)
        ok = kwargs.u.seq.items[i].kind == TP_VAL_TENSOR || !holds_tensor(&kwargs.u.seq.items[i]);
    if (ok) ok = want.kind == TP_VAL_TENSOR;
    one_node o = {0};
    if (ok) ok = build_one_node(op, args, (int)nargs, &kwargs, &o) == TP_OK && o.p;
    tp_run_options opt;
    tp_run_options_init(&opt);
    opt.num_threads = 1;
    tp_run *r = NULL;
    if (ok) ok = tp_run_new(o.p, &opt, &r) == TP_OK;
    if (ok) ok = tp_run_execute(r, o.inputs, o.n_inputs, NULL, 0) == TP_OK;
    tp_clear_error();
    if (ok) {
        atomic_store(&g_steady_allocs, 0);
        tp_set_allocator(steady_count_alloc, NULL);
        tp_status st = tp_run_execute(r, o.inputs, o.n_inputs, NULL, 0);
        tp_set_allocator(NULL, NULL);
        if (st == TP_OK) {
            steady_cases[op]++;
            if (atomic_load(&g_steady_allocs) > 0) steady_allocating[op]++;
        }
        tp_clear_error();
    }
    tp_run_free(r);
    tp_program_free(o.p);
    tp_value_clear(&want);
    tp_value_clear(&kwargs);
    for (size_t i = 0; i < 32; i++) tp_value_clear(&args[i]);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    if (tp_ops_init() != TP_OK) {
        fprintf(stderr, "tp_ops_init failed: %s\n", tp_last_error());
        return 1;
    }
    DIR *d = opendir(OPS_DIR);
    if (!d) {
        fprintf(stderr, "cannot open %s (run from tests/)\n", OPS_DIR);
        return 1;
    }
    char *files[256];
    int nfiles = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nfiles < 256) {
        size_t n = strlen(e->d_name);
        if (n > 5 && strcmp(e->d_name + n - 5, ".json") == 0) files[nfiles++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(files, (size_t)nfiles, sizeof *files, cmp_str);
    long live_before = tp_alloc_live_blocks();
    for (int f = 0; f < nfiles; f++) {
        char path[1024];
        snprintf(path, sizeof path, OPS_DIR "/%s", files[f]);
        json_error_t jerr;
        json_t *root = json_load_file(path, 0, &jerr);
        if (!root) {
            fprintf(stderr, "FAIL %s: %s (line %d)\n", path, jerr.text, jerr.line);
            n_failed++;
            continue;
        }
        json_t *cases = json_object_get(root, "cases");
        size_t i;
        json_t *c;
        json_array_foreach(cases, i, c) {
            const char *name = json_string_value(json_object_get(c, "name"));
            const char *op = json_string_value(json_object_get(c, "op"));
            if (filter && !(name && strstr(name, filter)) && !(op && strstr(op, filter))) continue;
            if (run_case(files[f], c)) {
                n_passed++;
            } else {
                printf("FAIL %s:%s\n", files[f], name ? name : "?");
                n_failed++;
            }
            int n_variants = 0;
            tp_op opv = tp_op_from_name(op);
            if (opv != TP_OP_INVALID) steady_alloc_case(c, opv);
            if (opv != TP_OP_INVALID) tp__op_variants(opv, &n_variants);
            if (n_variants > 0) {
                if (run_case_engine(files[f], c, opv)) {
                    n_passed++;
                } else {
                    printf("FAIL %s:%s (engine)\n", files[f], name ? name : "?");
                    n_failed++;
                }
            }
        }
        json_decref(root);
        free(files[f]);
    }
    long leaked = tp_alloc_live_blocks() - live_before;
    if (leaked) {
        printf("FAIL leak check: %ld blocks still allocated after all cases\n", leaked);
        n_failed++;
    }
    if (!filter) {
        /* coverage: every op with a schema needs a value case and an error case */
        for (int op = 0; op < TP_OP_COUNT; op++) {
            if (!tp_op_schema((tp_op)op)) {
                printf("FAIL coverage: op %s is not registered\n", tp_op_name((tp_op)op));
                n_failed++;
                continue;
            }
            if (!value_cases[op] || !error_cases[op]) {
                printf("FAIL coverage: op %s has %d value case(s) and %d error case(s)\n", tp_op_name((tp_op)op),
                       value_cases[op], error_cases[op]);
                n_failed++;
            }
        }
    }
    /* engine coverage: value cases per op that ran a fast variant */
    /* steady-state allocations: none for any op */
    int n_steady_ops = 0;
    for (int op = 0; op < TP_OP_COUNT; op++) {
        if (!steady_cases[op]) continue;
        n_steady_ops++;
        if (steady_allocating[op]) {
            printf("FAIL steady state: %s allocates in a second call (%d of %d value cases)\n", tp_op_name((tp_op)op),
                   steady_allocating[op], steady_cases[op]);
            n_failed++;
        }
    }
    printf("steady state: %d ops planned from their value cases, checked for allocations on a second call\n",
           n_steady_ops);
    printf("engine: value cases that ran a fast variant, per op with variants:\n");
    for (int op = 0; op < TP_OP_COUNT; op++) {
        int nv = 0;
        tp__op_variants((tp_op)op, &nv);
        if (nv == 0 || (!engine_cases[op] && filter)) continue;
        printf("  %-14s %3d of %3d%s\n", tp_op_name((tp_op)op), engine_fast[op], engine_cases[op],
               engine_slow_f32[op] ? "  (float32 cases declined!)" : "");
    }
    printf("engine: error cases failing in tp_run_execute: %d, when creating the node: %d; cases skipped: %d\n",
           engine_errors_in_run, engine_errors_at_node, engine_skipped);
    static const tp_op required[] = {TP_OP_ADD, TP_OP_MUL, TP_OP_RELU, TP_OP_EXP, TP_OP_TANH, TP_OP_SIGMOID, TP_OP_GELU};
    for (size_t i = 0; !filter && i < sizeof required / sizeof required[0]; i++) {
        if (engine_fast[required[i]] == 0 || engine_slow_f32[required[i]] != 0) {
            printf("FAIL engine coverage: %s: %d case(s) ran fast, %d float32 case(s) did not\n",
                   tp_op_name(required[i]), engine_fast[required[i]], engine_slow_f32[required[i]]);
            n_failed++;
        }
    }
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
