/*
 * test_tp_ops.c - one-function archives written by the real tensorplay
 * (fixtures/tensorplay_ops/, made by fixtures/gen_tp_ops_*.py through
 * fixtures/tp_opcase.py, whose docstring gives the layout).
 *
 * For every <case>.pt2 there: tp_archive_verify accepts it; tp_archive_load
 * gives one program; the program saved by tp_archive_save_buffer loads back;
 * both, freshly loaded, called on their stored example inputs give run 0's
 * outputs (tensorplay exported on run 0's inputs); and both, called on each
 * run's inputs in order (state carrying over), give tensorplay's outputs and state
 * (and so does the program saved in PyTorch's format by
 * tp_archive_save_torch_buffer and read back, where the writer accepts it):
 * same dtype and shape, values within the case's rtol/atol (NaN = NaN);
 * for a case marked "random" (functions drawing random numbers), same dtype
 * and shape and every value within the case's support.
 * Every failing case is named; the test fails if any case fails or if the
 * folder holds no case at all.
 *
 *   test_tp_ops            every case
 *   test_tp_ops sinh       the cases whose name contains "sinh"
 */
#include <dirent.h>
#include <math.h>
#include <jansson.h>
#include <stdint.h>

#include "test_util.h"
#include "tpexport/archive.h"

#define DIR_ "fixtures/tensorplay_ops"

typedef struct {
    char name[256];
    char dir[512];
    json_t *doc;
    double rtol, atol;
    bool random;          /* "random" in case.json: compare dtype, shape and support */
    double low, high;     /* the support */
    bool integral;
} op_case;

static tp_tensor *case_npy(const op_case *c, const char *file) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", c->dir, file ? file : "(missing)");
    tp_tensor *t = NULL;
    if (tp_npy_load(path, &t) != TP_OK) {
        fprintf(stderr, "  %s: cannot load %s: %s\n", c->name, path, tp_last_error());
        return NULL;
    }
    return t;
}

/* Exact dtype and shape, then allclose. Returns false (printing why) on a
 * mismatch. */
static bool same_tensor(const op_case *c, const char *what, const tp_tensor *got, const tp_tensor *want) {
    if (!got || !want) return false;
    if (tp_tensor_dtype(got) != tp_tensor_dtype(want)) {
        fprintf(stderr, "  %s: %s: dtype %s, tensorplay gives %s\n", c->name, what,
                tp_dtype_name(tp_tensor_dtype(got)), tp_dtype_name(tp_tensor_dtype(want)));
        return false;
    }
    char msg[256];
    if (c->random) { /* random values: same shape, every value in the support */
        bool same = tp_tensor_ndim(got) == tp_tensor_ndim(want);
        for (int d = 0; same && d < tp_tensor_ndim(got); d++) same = tp_tensor_sizes(got)[d] == tp_tensor_sizes(want)[d];
        if (!same) {
            fprintf(stderr, "  %s: %s: a random result of another shape than tensorplay's\n", c->name, what);
            return false;
        }
        for (int64_t i = 0; i < tp_tensor_numel(got); i++) {
            double v = tp_tensor_item_f64(got, i);
            if (!(v >= c->low && v <= c->high) || (c->integral && v != floor(v))) {
                fprintf(stderr, "  %s: %s: element %lld = %g is outside the support [%g, %g]%s\n", c->name, what,
                        (long long)i, v, c->low, c->high, c->integral ? " of integers" : "");
                return false;
            }
        }
        return true;
    }
    if (!tp_tensor_allclose(got, want, c->rtol, c->atol, msg, sizeof msg)) {
        fprintf(stderr, "  %s: %s: %s\n", c->name, what, msg);
        return false;
    }
    return true;
}

/* An output leaf: a tensor (same_tensor), or a Python number item() or
 * is_nonzero() gives, which tensorplay's outputs hold as a 0-d array of its
 * type (float64, int64, bool). */
static bool same_leaf(const op_case *c, const char *what, const tp_value *got, const tp_tensor *want) {
    if (got->kind == TP_VAL_TENSOR) return same_tensor(c, what, got->u.tensor, want);
    if (!want || tp_tensor_ndim(want) != 0 ||
        (got->kind != TP_VAL_FLOAT && got->kind != TP_VAL_INT && got->kind != TP_VAL_BOOL)) {
        fprintf(stderr, "  %s: %s is a %s, not a tensor or a number\n", c->name, what, tp_value_kind_name(got->kind));
        return false;
    }
    tp_dtype dt = tp_tensor_dtype(want);
    bool kind_ok = got->kind == TP_VAL_FLOAT ? dt == TP_FLOAT64 : got->kind == TP_VAL_INT ? dt == TP_INT64 : dt == TP_BOOL;
    double g = tp_value_as_f64(got), w = tp_tensor_item_f64(want, 0);
    if (!kind_ok || !(fabs(g - w) <= c->atol + c->rtol * fabs(w) || (isnan(g) && isnan(w)))) {
        fprintf(stderr, "  %s: %s: %s %.9g, tensorplay gives %s %.9g\n", c->name, what, tp_value_kind_name(got->kind), g,
                tp_dtype_name(dt), w);
        return false;
    }
    return true;
}

/* An INPUT of case.json (tp_opcase.py): a tensor's .npy file name, or
 * {"int": 3}, {"float": ..}, {"bool": ..}, {"none": null}, {"list": [..]},
 * {"tuple": [..]}, {"dict": {key: ..}}. False (printing why) on failure. */
static bool decode_input(const op_case *c, const json_t *j, int depth, tp_value *out) {
    *out = tp_value_none();
    if (json_is_string(j)) {
        tp_tensor *t = case_npy(c, json_string_value(j));
        if (t) *out = tp_value_tensor(t);
        return t != NULL;
    }
    const char *kind = NULL;
    json_t *v = NULL;
    if (json_is_object(j) && json_object_size(j) == 1 && depth < 8) json_object_foreach((json_t *)j, kind, v) break;
    if (!kind) {
        fprintf(stderr, "  %s: bad input encoding\n", c->name);
        return false;
    }
    if (!strcmp(kind, "int") && json_is_integer(v)) *out = tp_value_int(json_integer_value(v));
    else if (!strcmp(kind, "float") && json_is_number(v)) *out = tp_value_float(json_number_value(v));
    else if (!strcmp(kind, "bool") && json_is_boolean(v)) *out = tp_value_bool(json_is_true(v));
    else if (!strcmp(kind, "none")) *out = tp_value_none();
    else if ((!strcmp(kind, "list") || !strcmp(kind, "tuple")) && json_is_array(v)) {
        int64_t n = (int64_t)json_array_size(v);
        if ((kind[0] == 'l' ? tp_value_list(n, out) : tp_value_tuple(n, out)) != TP_OK) return false;
        for (int64_t i = 0; i < n; i++) {
            tp_value item;
            bool ok = decode_input(c, json_array_get(v, (size_t)i), depth + 1, &item);
            if (ok) ok = tp_value_seq_set(out, i, &item) == TP_OK;
            else tp_value_clear(&item);
            if (!ok) {
                tp_value_clear(out);
                return false;
            }
        }
    } else if (!strcmp(kind, "dict") && json_is_object(v)) {
        if (tp_value_dict(out) != TP_OK) return false;
        const char *key;
        json_t *item_j;
        json_object_foreach(v, key, item_j) {
            tp_value item;
            bool ok = decode_input(c, item_j, depth + 1, &item);
            if (ok) ok = tp_value_dict_set(out, key, &item) == TP_OK;
            else tp_value_clear(&item);
            if (!ok) {
                tp_value_clear(out);
                return false;
            }
        }
    } else {
        fprintf(stderr, "  %s: bad input encoding '%s'\n", c->name, kind);
        return false;
    }
    return true;
}

/* Run every run of the case on p; returns the number of mismatches. */
static int check_runs(const op_case *c, tp_program *p, const char *which) {
    int bad = 0;
    const json_t *names = json_object_get(c->doc, "inputs"), *runs = json_object_get(c->doc, "runs");
    for (size_t r = 0; r < json_array_size(runs); r++) {
        const json_t *run = json_array_get(runs, r);
        int n = (int)json_array_size(names);
        tp_value args[16];
        if (n > 16) {
            fprintf(stderr, "  %s: more than 16 inputs\n", c->name);
            return bad + 1;
        }
        bool ok = true;
        for (int i = 0; i < n; i++) {
            const json_t *in =
                json_object_get(json_object_get(run, "inputs"), json_string_value(json_array_get(names, (size_t)i)));
            if (!decode_input(c, in, 0, &args[i])) ok = false;
        }
        tp_value out = tp_value_none(), leaves = tp_value_none();
        tp_treespec *spec = NULL;
        tp_status st = ok ? tp_program_call(p, args, n, NULL, &out) : TP_ERR_IO;
        for (int i = 0; i < n; i++) tp_value_clear(&args[i]);
        if (st != TP_OK) {
            fprintf(stderr, "  %s (%s) run %zu: %s: %s\n", c->name, which, r, tp_status_str(st), tp_last_error());
            bad++;
            continue;
        }
        if (tp_pytree_flatten(&out, &leaves, &spec) != TP_OK) {
            fprintf(stderr, "  %s (%s) run %zu: cannot flatten the output: %s\n", c->name, which, r, tp_last_error());
            bad++;
        }
        const json_t *outs = json_object_get(run, "outputs");
        if (tp_value_len(&leaves) != (int64_t)json_array_size(outs)) {
            fprintf(stderr, "  %s (%s) run %zu: %lld outputs, tensorplay gives %zu\n", c->name, which, r,
                    (long long)tp_value_len(&leaves), json_array_size(outs));
            bad++;
        }
        for (size_t k = 0; k < json_array_size(outs) && (int64_t)k < tp_value_len(&leaves); k++) {
            char what[128];
            snprintf(what, sizeof what, "(%s) run %zu output %zu", which, r, k);
            const tp_value *got = tp_value_at(&leaves, (int64_t)k);
            tp_tensor *want = case_npy(c, json_string_value(json_array_get(outs, k)));
            if (!same_leaf(c, what, got, want)) bad++;
            tp_tensor_free(want);
        }
        const char *target;
        const json_t *file;
        json_object_foreach((json_t *)json_object_get(run, "state"), target, file) {
            char what[384];
            snprintf(what, sizeof what, "(%s) run %zu state '%s'", which, r, target);
            tp_tensor *got = NULL, *want = case_npy(c, json_string_value(file));
            if (tp_program_get_state(p, target, &got, NULL, NULL) != TP_OK || !same_tensor(c, what, got, want)) bad++;
            tp_tensor_free(want);
        }
        tp_treespec_free(spec);
        tp_value_clear(&leaves);
        tp_value_clear(&out);
    }
    return bad;
}

/* Call a fresh copy of the program (state untouched) on its stored example
 * inputs, which tensorplay took from run 0: run 0's outputs. Returns the
 * number of mismatches. */
static int check_examples(const op_case *c, tp_archive *a, const char *which) {
    tp_program *p = tp_archive_program(a, 0);
    const json_t *names = json_object_get(c->doc, "inputs");
    const json_t *outs = json_object_get(json_array_get(json_object_get(c->doc, "runs"), 0), "outputs");
    int n = (int)json_array_size(names), bad = 0;
    if (n > 16) return 1;
    tp_value args[16];
    for (int i = 0; i < n; i++) {
        const tp_value *ex = tp_program_example_input(p, json_string_value(json_array_get(names, (size_t)i)));
        if (!ex) {
            fprintf(stderr, "  %s (%s): no example input '%s'\n", c->name, which, json_string_value(json_array_get(names, (size_t)i)));
            for (int k = 0; k < i; k++) tp_value_clear(&args[k]);
            return 1;
        }
        if (tp_value_copy(ex, &args[i]) != TP_OK) {
            for (int k = 0; k < i; k++) tp_value_clear(&args[k]);
            return 1;
        }
    }
    tp_value out = tp_value_none(), leaves = tp_value_none();
    tp_treespec *spec = NULL;
    tp_status st = tp_program_call(p, args, n, NULL, &out);
    for (int i = 0; i < n; i++) tp_value_clear(&args[i]);
    if (st != TP_OK || tp_pytree_flatten(&out, &leaves, &spec) != TP_OK) {
        fprintf(stderr, "  %s (%s) on its example inputs: %s\n", c->name, which, tp_last_error());
        bad++;
    } else if (tp_value_len(&leaves) != (int64_t)json_array_size(outs)) {
        fprintf(stderr, "  %s (%s) on its example inputs: %lld outputs\n", c->name, which, (long long)tp_value_len(&leaves));
        bad++;
    } else {
        for (size_t k = 0; k < json_array_size(outs); k++) {
            char what[128];
            snprintf(what, sizeof what, "(%s) example inputs, output %zu", which, k);
            const tp_value *got = tp_value_at(&leaves, (int64_t)k);
            tp_tensor *want = case_npy(c, json_string_value(json_array_get(outs, k)));
            if (!same_leaf(c, what, got, want)) bad++;
            tp_tensor_free(want);
        }
    }
    tp_treespec_free(spec);
    tp_value_clear(&leaves);
    tp_value_clear(&out);
    return bad;
}

/* Returns true when the case passes. */
static int g_torch_refused; /* cases the PyTorch-format writer refuses (each printed) */

static bool check_case(const char *name) {
    op_case c = {.rtol = 1e-5, .atol = 1e-6};
    snprintf(c.name, sizeof c.name, "%s", name);
    snprintf(c.dir, sizeof c.dir, DIR_ "/%s", name);
    char path[1024], archive_path[1024];
    snprintf(path, sizeof path, "%s/case.json", c.dir);
    snprintf(archive_path, sizeof archive_path, DIR_ "/%s.pt2", name);
    json_error_t jerr;
    c.doc = json_load_file(path, 0, &jerr);
    if (!c.doc) {
        fprintf(stderr, "  %s: cannot read %s: %s\n", name, path, jerr.text);
        return false;
    }
    if (json_is_number(json_object_get(c.doc, "rtol"))) c.rtol = json_number_value(json_object_get(c.doc, "rtol"));
    const json_t *rnd = json_object_get(c.doc, "random");
    if (json_is_object(rnd)) {
        c.random = true;
        c.low = json_is_number(json_object_get(rnd, "low")) ? json_number_value(json_object_get(rnd, "low")) : -INFINITY;
        c.high = json_is_number(json_object_get(rnd, "high")) ? json_number_value(json_object_get(rnd, "high")) : INFINITY;
        c.integral = json_is_true(json_object_get(rnd, "integral"));
    }
    if (json_is_number(json_object_get(c.doc, "atol"))) c.atol = json_number_value(json_object_get(c.doc, "atol"));
    int bad = 0;
    if (json_array_size(json_object_get(c.doc, "runs")) == 0) {
        fprintf(stderr, "  %s: case.json has no runs\n", name);
        bad++;
    }
    if (tp_archive_verify(archive_path, NULL) != TP_OK) {
        fprintf(stderr, "  %s: verify: %s\n", name, tp_last_error());
        bad++;
    }
    tp_archive *a = NULL, *b = NULL, *t = NULL;
    void *saved = NULL;
    size_t saved_size = 0;
    if (tp_archive_load(archive_path, NULL, &a) != TP_OK) {
        fprintf(stderr, "  %s: load: %s\n", name, tp_last_error());
        bad++;
    } else if (tp_archive_num_programs(a) != 1) {
        fprintf(stderr, "  %s: %d programs, expected 1\n", name, tp_archive_num_programs(a));
        bad++;
    } else {
        /* save before running: the runs mutate state */
        tp_archive_entry e = {tp_archive_program_name(a, 0), tp_archive_program(a, 0)};
        if (tp_archive_save_buffer(&e, 1, NULL, 0, &saved, &saved_size) != TP_OK ||
            tp_archive_load_buffer(saved, saved_size, NULL, &b) != TP_OK) {
            fprintf(stderr, "  %s: save and load back: %s\n", name, tp_last_error());
            bad++;
        }
        /* example inputs survive the save: each checked on a fresh load */
        tp_archive *fresh = NULL;
        if (tp_archive_load(archive_path, NULL, &fresh) == TP_OK) bad += check_examples(&c, fresh, "loaded");
        tp_archive_free(fresh);
        fresh = NULL;
        if (b && tp_archive_load_buffer(saved, saved_size, NULL, &fresh) == TP_OK) bad += check_examples(&c, fresh, "re-saved");
        tp_archive_free(fresh);
        /* and in PyTorch's format: what is written loads back and runs the same (the writer refuses,
         * with TP_ERR_UNSUPPORTED, what ATen cannot express: structured inputs, data-dependent ops) */
        void *tsaved = NULL;
        size_t tsaved_size = 0;
        tp_status ts = tp_archive_save_torch_buffer(&e, 1, &tsaved, &tsaved_size);
        if (ts == TP_OK) {
            if (tp_archive_load_buffer(tsaved, tsaved_size, NULL, &t) != TP_OK) {
                fprintf(stderr, "  %s: saved in PyTorch's format, load back: %s\n", name, tp_last_error());
                bad++;
            }
        } else if (ts == TP_ERR_UNSUPPORTED) {
            g_torch_refused++;
            printf("     %s: not written in PyTorch's format: %s\n", name, tp_last_error());
        } else {
            fprintf(stderr, "  %s: save in PyTorch's format: %s\n", name, tp_last_error());
            bad++;
        }
        tp_free(tsaved);
        bad += check_runs(&c, tp_archive_program(a, 0), "loaded");
        if (b) bad += check_runs(&c, tp_archive_program(b, 0), "re-saved");
        if (t) bad += check_runs(&c, tp_archive_program(t, 0), "saved as PyTorch's");
    }
    tp_archive_free(t);
    tp_archive_free(b);
    tp_free(saved);
    tp_archive_free(a);
    json_decref(c.doc);
    return bad == 0;
}

static int by_name(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

int main(int argc, char **argv) {
    tp_ops_init();
    DIR *d = opendir(DIR_);
    if (!d) {
        fprintf(stderr, "cannot open " DIR_ "\n");
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 4, ".pt2") != 0) continue;
        if (argc > 1 && !strstr(de->d_name, argv[1])) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown) return 1;
            names = grown;
        }
        names[n] = strdup(de->d_name);
        if (!names[n]) return 1;
        names[n++][len - 4] = '\0';
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        long before = tp_alloc_live_blocks();
        bool ok = check_case(names[i]);
        long leaked = tp_alloc_live_blocks() - before;
        if (leaked) fprintf(stderr, "  %s: %ld blocks leaked\n", names[i], leaked);
        ok = ok && !leaked;
        printf("%s %s\n", ok ? "ok  " : "FAIL", names[i]);
        failed += !ok;
        free(names[i]);
    }
    free(names);
    printf("%zu cases, %d failed; %d not expressible in PyTorch's format\n", n, failed, g_torch_refused);
    if (n == 0) fprintf(stderr, "no case in " DIR_ "%s\n", argc > 1 ? " matches the filter" : "");
    return n == 0 || failed ? 1 : 0;
}
