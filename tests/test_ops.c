/*
 * test_ops.c - runs every op test case in tests/fixtures/ops/<family>.json
 * (format: docs/testing.md) and checks that every registered op has at least
 * one value case and one error case.
 *
 * Usage: test_ops [filter]   (filter: substring of a case name or op name)
 */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpexport/tpexport.h"

#define OPS_DIR "fixtures/ops"

static int n_passed, n_failed;
static int value_cases[TP_OP_COUNT], error_cases[TP_OP_COUNT];

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
    json_t *jargs = json_object_get(c, "args");
    size_t nargs = json_array_size(jargs);
    tp_value args[32], kwargs = tp_value_none(), result = tp_value_none();
    bool ok = true;
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
        ok = tp_value_dict(&kwargs) == TP_OK;
        const char *key;
        json_t *val;
        json_object_foreach(jkw, key, val) {
            tp_value v;
            if (!ok || json_to_value(val, &v) != TP_OK || tp_value_dict_set(&kwargs, key, &v) != TP_OK) {
                fprintf(stderr, "  %s: bad kwarg %s: %s\n", where, key, tp_last_error());
                ok = false;
                break;
            }
        }
    }
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
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
