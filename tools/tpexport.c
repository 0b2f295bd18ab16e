/*
 * tpexport.c - the `tpexport` command: inspect, print, verify, run,
 * decompose and convert exported-program archives.
 *
 * This is the only place in the project that calls exit(); the library
 * reports every failure as a tp_status with a message, which this tool
 * prints as one line on stderr.
 *
 * Exit status: 0 success; 1 the program or archive is invalid, or running it
 * failed (bad inputs, constraint violations); 2 usage error; 3 the file
 * could not be read or written.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tpexport/archive.h"
#include "tpexport/tpexport.h"
#include "tpexport/onnx.h"

#define EXIT_INVALID 1
#define EXIT_USAGE 2
#define EXIT_IO 3

static const char *prog_name = "tpexport";

static const char *main_help =
    "usage: tpexport <command> [options] FILE\n"
    "\n"
    "Work with exported programs stored as tensorplay archives (.pt2).\n"
    "\n"
    "commands:\n"
    "  inspect    summarise the programs of an archive (signature, state, shapes, ops)\n"
    "  print      print each program's graph and signature\n"
    "  verify     check an archive completely and report every problem\n"
    "  run        run a program on .npy inputs or its example inputs\n"
    "  decompose  rewrite programs with a decomposition table and save them\n"
    "  convert    import an ONNX model and save it as an archive\n"
    "\n"
    "Run 'tpexport <command> --help' for a command's options.\n"
    "\n"
    "exit status: 0 success; 1 invalid program/archive or failed run;\n"
    "             2 usage error; 3 file could not be read or written\n";

static const char *inspect_help =
    "usage: tpexport inspect FILE [--json]\n"
    "\n"
    "Summarise every program in the archive FILE: its user inputs and outputs\n"
    "with their kinds, lifted state counted and sized by kind (parameters,\n"
    "buffers, constants), dynamic dims with their ranges, equality\n"
    "constraints, the module call graph and how often each op is used.\n"
    "Extra files are listed with their sizes.\n"
    "\n"
    "options:\n"
    "  --json     print one JSON object instead of text\n";

static const char *print_help =
    "usage: tpexport print FILE [--program NAME]\n"
    "\n"
    "Print the readable form of each program (or only NAME): the graph as\n"
    "Python-like code followed by the signature summary.\n";

static const char *verify_help =
    "usage: tpexport verify FILE\n"
    "\n"
    "Load FILE completely - ZIP structure, program documents, weights,\n"
    "signatures, constraints - and validate each program. Every problem\n"
    "found is printed, one per line. Exits 0 when the archive is valid and 1\n"
    "otherwise (3 if FILE cannot be read).\n";

static const char *run_help =
    "usage: tpexport run FILE [--program NAME] [INPUT ...] [--out DIR] [--repeat N]\n"
    "\n"
    "Run a program (NAME, or the archive's only/first program) and print a\n"
    "summary of its outputs: shape, dtype, first values and the time taken.\n"
    "\n"
    "inputs:\n"
    "  name=path.npy   bind user input 'name' to a .npy file\n"
    "  path.npy        bind the next user input, in order\n"
    "  (none)          use the example inputs stored in the archive\n"
    "Inputs that are not given fall back to the stored example inputs.\n"
    "Inputs are checked against the program's shape constraints before\n"
    "running; a violation is reported and the exit status is 1.\n"
    "\n"
    "options:\n"
    "  --program NAME  which program of the archive to run\n"
    "  --out DIR       write the flattened user outputs to DIR/output_0.npy, ...\n"
    "  --repeat N      run N times and report the mean time (default 1)\n";

static const char *decompose_help =
    "usage: tpexport decompose FILE -o OUT [--table default|none|softmax]\n"
    "\n"
    "Rewrite every program of FILE with a decomposition table (complex ops\n"
    "into simpler ones: gelu into erf arithmetic, linear into matmul + add,\n"
    "...), remove dead code, re-validate and save the result to OUT. Extra\n"
    "files are kept.\n"
    "\n"
    "options:\n"
    "  -o OUT          output archive (required)\n"
    "  --table NAME    'default' (the default), 'softmax' (default plus softmax\n"
    "                  and log_softmax), or 'none' (only copy and re-validate)\n";

static const char *convert_help =
    "usage: tpexport convert MODEL.onnx -o OUT.pt2 [--dynamic NAME=MIN:MAX ...] [--report]\n"
    "\n"
    "Import an ONNX model (opsets 6-21) as an exported program and save it.\n"
    "Symbolic dims (dim_param) become named dynamic dims; --dynamic gives one\n"
    "a range (MAX may be 'inf').\n"
    "\n"
    "options:\n"
    "  -o OUT           output archive (required unless --report)\n"
    "  --dynamic N=A:B  range of the symbolic dim N\n"
    "  --report         list every unsupported op instead of stopping at the first\n";

/* One line on stderr, then exit. */
static void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog_name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(code);
}

static int exit_code_for(tp_status st) { return st == TP_ERR_IO ? EXIT_IO : EXIT_INVALID; }

static void die_status(tp_status st, const char *what) {
    die(exit_code_for(st), "%s: %s", what, tp_last_error());
}

static void usage_error(const char *help, const char *fmt, const char *arg) {
    fprintf(stderr, "%s: ", prog_name);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n\n%s", help);
    exit(EXIT_USAGE);
}

static bool is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

static tp_archive *load_or_die(const char *path) {
    tp_archive *a = NULL;
    tp_status st = tp_archive_load(path, NULL, &a);
    if (st != TP_OK) die_status(st, path);
    return a;
}

/* ---- inspect ------------------------------------------------------------ */

typedef struct state_totals {
    int count[3];
    int64_t elems[3], bytes[3];
} state_totals;

static void totals_of(const tp_program *p, state_totals *t) {
    memset(t, 0, sizeof *t);
    tp_named_state s;
    if (tp_program_named_state(p, TP_FILTER_ALL, &s) != TP_OK) return;
    for (int i = 0; i < s.n; i++) {
        int k = (int)s.items[i].kind;
        t->count[k]++;
        t->elems[k] += tp_tensor_numel(s.items[i].tensor);
        t->bytes[k] += tp_tensor_numel(s.items[i].tensor) * (int64_t)tp_dtype_size(tp_tensor_dtype(s.items[i].tensor));
    }
    tp_named_state_free(&s);
}

static int op_counts(const tp_program *p, int *counts, int *n_other) {
    memset(counts, 0, sizeof(int) * TP_OP_COUNT);
    *n_other = 0;
    int total = 0;
    for (tp_node *n = tp_graph_first_node(tp_program_graph(p)); n; n = tp_node_next(n)) {
        tp_node_kind k = tp_node_get_kind(n);
        if (k != TP_NODE_CALL_FUNCTION && k != TP_NODE_CALL_METHOD) continue;
        tp_op op = tp_node_op(n);
        if (op == TP_OP_INVALID) (*n_other)++;
        else counts[op]++;
        total++;
    }
    return total;
}

static void format_bytes(int64_t b, char *buf, size_t size) {
    if (b >= (1 << 20)) snprintf(buf, size, "%.1f MiB", (double)b / (1 << 20));
    else if (b >= 1024) snprintf(buf, size, "%.1f KiB", (double)b / 1024);
    else snprintf(buf, size, "%" PRId64 " B", b);
}

static void inspect_text(const tp_archive *a) {
    static const char *kinds[3] = {"parameters", "buffers", "constants"};
    for (int i = 0; i < tp_archive_num_programs(a); i++) {
        const tp_program *p = tp_archive_program(a, i);
        const tp_signature *sig = tp_program_signature(p);
        printf("program '%s'\n", tp_archive_program_name(a, i));
        printf("  inputs:\n");
        char line[512];
        for (int k = 0; k < tp_signature_n_inputs(sig); k++) {
            tp_input_spec_str(tp_signature_input(sig, k), line, sizeof line);
            printf("    %s\n", line);
        }
        printf("  outputs:\n");
        for (int k = 0; k < tp_signature_n_outputs(sig); k++) {
            tp_output_spec_str(tp_signature_output(sig, k), line, sizeof line);
            printf("    %s\n", line);
        }
        state_totals t;
        totals_of(p, &t);
        printf("  state:\n");
        for (int k = 0; k < 3; k++) {
            char b[32];
            format_bytes(t.bytes[k], b, sizeof b);
            printf("    %-11s %d tensors, %" PRId64 " elements, %s\n", kinds[k], t.count[k], t.elems[k], b);
        }
        if (tp_program_num_dim_rules(p)) {
            printf("  dynamic dims:\n");
            for (int k = 0; k < tp_program_num_dim_rules(p); k++) {
                const tp_dim_rule *r = tp_program_dim_rule(p, k);
                printf("    %s.shape[%d]: ", r->site.input, r->site.dim);
                if (r->kind == TP_DIM_STATIC) {
                    printf("%" PRId64 "\n", r->value);
                    continue;
                }
                if (r->kind == TP_DIM_DERIVED) printf("%" PRId64 "*%s%+" PRId64, r->scale, r->symbol, r->offset);
                else printf("%s", r->symbol);
                const tp_range_constraint *rc = tp_program_find_range(p, r->symbol);
                if (rc && rc->max == TP_DIM_UNBOUNDED) printf("  (%s in [%" PRId64 ", inf])", r->symbol, rc->min);
                else if (rc) printf("  (%s in [%" PRId64 ", %" PRId64 "])", r->symbol, rc->min, rc->max);
                printf("\n");
            }
        }
        if (tp_program_num_equalities(p)) {
            printf("  equality constraints:\n");
            for (int k = 0; k < tp_program_num_equalities(p); k++) {
                const tp_equality_constraint *c = tp_program_equality(p, k);
                printf("    ");
                for (int s = 0; s < c->n_sites; s++)
                    printf("%s%s.shape[%d]", s ? " == " : "", c->sites[s].input, c->sites[s].dim);
                if (c->name) printf("  (dim \"%s\")", c->name);
                printf("\n");
            }
        }
        if (tp_program_num_module_calls(p)) {
            printf("  module call graph:\n");
            for (int k = 0; k < tp_program_num_module_calls(p); k++) {
                tp_module_call_entry e = tp_program_module_call(p, k);
                printf("    %s%s\n", *e.fqn ? e.fqn : "(root)", e.signature ? "" : "  (no signature)");
            }
        }
        int counts[TP_OP_COUNT], other;
        int total = op_counts(p, counts, &other);
        printf("  ops (%d calls):\n", total);
        for (int k = 0; k < TP_OP_COUNT; k++)
            if (counts[k]) printf("    %-28s %d\n", tp_op_name((tp_op)k), counts[k]);
        if (other) printf("    %-28s %d\n", "(unknown)", other);
    }
    if (tp_archive_num_extra(a)) {
        printf("extra files:\n");
        for (int i = 0; i < tp_archive_num_extra(a); i++) {
            size_t size;
            tp_archive_extra_data(a, i, &size);
            printf("  %s (%zu bytes)\n", tp_archive_extra_name(a, i), size);
        }
    }
}

static json_t *spec_list_json(const tp_signature *sig, bool inputs) {
    json_t *arr = json_array();
    int n = inputs ? tp_signature_n_inputs(sig) : tp_signature_n_outputs(sig);
    for (int k = 0; k < n; k++) {
        json_t *o = json_object();
        if (inputs) {
            const tp_input_spec *s = tp_signature_input(sig, k);
            json_object_set_new(o, "name", json_string(s->arg.name));
            json_object_set_new(o, "kind", json_string(tp_input_kind_name(s->kind)));
            if (s->target) json_object_set_new(o, "target", json_string(s->target));
            if (s->persistent != TP_PERSISTENT_UNSET)
                json_object_set_new(o, "persistent", json_boolean(s->persistent == TP_PERSISTENT_YES));
        } else {
            const tp_output_spec *s = tp_signature_output(sig, k);
            json_object_set_new(o, "name", json_string(s->arg.name));
            json_object_set_new(o, "kind", json_string(tp_output_kind_name(s->kind)));
            if (s->target) json_object_set_new(o, "target", json_string(s->target));
        }
        json_array_append_new(arr, o);
    }
    return arr;
}

static void inspect_json(const tp_archive *a) {
    static const char *kinds[3] = {"parameters", "buffers", "constants"};
    json_t *root = json_object(), *progs = json_array();
    for (int i = 0; i < tp_archive_num_programs(a); i++) {
        const tp_program *p = tp_archive_program(a, i);
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(tp_archive_program_name(a, i)));
        json_object_set_new(o, "inputs", spec_list_json(tp_program_signature(p), true));
        json_object_set_new(o, "outputs", spec_list_json(tp_program_signature(p), false));
        state_totals t;
        totals_of(p, &t);
        json_t *state = json_object();
        for (int k = 0; k < 3; k++)
            json_object_set_new(state, kinds[k],
                                json_pack("{s:i,s:I,s:I}", "count", t.count[k], "elements", (json_int_t)t.elems[k],
                                          "bytes", (json_int_t)t.bytes[k]));
        json_object_set_new(o, "state", state);
        json_t *dims = json_array();
        for (int k = 0; k < tp_program_num_dim_rules(p); k++) {
            const tp_dim_rule *r = tp_program_dim_rule(p, k);
            json_t *d = json_pack("{s:s,s:i}", "input", r->site.input, "dim", r->site.dim);
            if (r->kind == TP_DIM_STATIC) {
                json_object_set_new(d, "value", json_integer(r->value));
            } else {
                json_object_set_new(d, "symbol", json_string(r->symbol));
                if (r->kind == TP_DIM_DERIVED) {
                    json_object_set_new(d, "scale", json_integer(r->scale));
                    json_object_set_new(d, "offset", json_integer(r->offset));
                }
                const tp_range_constraint *rc = tp_program_find_range(p, r->symbol);
                if (rc) {
                    json_object_set_new(d, "min", json_integer(rc->min));
                    json_object_set_new(d, "max", rc->max == TP_DIM_UNBOUNDED ? json_null() : json_integer(rc->max));
                }
            }
            json_array_append_new(dims, d);
        }
        json_object_set_new(o, "dynamic_dims", dims);
        json_t *eqs = json_array();
        for (int k = 0; k < tp_program_num_equalities(p); k++) {
            const tp_equality_constraint *c = tp_program_equality(p, k);
            json_t *sites = json_array();
            for (int s = 0; s < c->n_sites; s++)
                json_array_append_new(sites, json_pack("[s,i]", c->sites[s].input, c->sites[s].dim));
            json_array_append_new(eqs, json_pack("{s:o,s:o}", "sites", sites, "name",
                                                 c->name ? json_string(c->name) : json_null()));
        }
        json_object_set_new(o, "equality_constraints", eqs);
        json_t *calls = json_array();
        for (int k = 0; k < tp_program_num_module_calls(p); k++)
            json_array_append_new(calls, json_string(tp_program_module_call(p, k).fqn));
        json_object_set_new(o, "module_call_graph", calls);
        int counts[TP_OP_COUNT], other;
        op_counts(p, counts, &other);
        json_t *ops = json_object();
        for (int k = 0; k < TP_OP_COUNT; k++)
            if (counts[k]) json_object_set_new(ops, tp_op_name((tp_op)k), json_integer(counts[k]));
        json_object_set_new(o, "ops", ops);
        json_array_append_new(progs, o);
    }
    json_object_set_new(root, "programs", progs);
    json_t *extra = json_array();
    for (int i = 0; i < tp_archive_num_extra(a); i++) {
        size_t size;
        tp_archive_extra_data(a, i, &size);
        json_array_append_new(extra, json_pack("{s:s,s:I}", "name", tp_archive_extra_name(a, i), "size", (json_int_t)size));
    }
    json_object_set_new(root, "extra_files", extra);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text) {
        puts(text);
        free(text);
    }
    json_decref(root);
}

static int cmd_inspect(int argc, char **argv) {
    const char *file = NULL;
    bool as_json = false;
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(inspect_help, stdout);
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            as_json = true;
        } else if (argv[i][0] == '-') {
            usage_error(inspect_help, "unknown option '%s'", argv[i]);
        } else if (!file) {
            file = argv[i];
        } else {
            usage_error(inspect_help, "unexpected argument '%s'", argv[i]);
        }
    }
    if (!file) usage_error(inspect_help, "%s", "missing FILE");
    tp_archive *a = load_or_die(file);
    if (as_json) inspect_json(a);
    else inspect_text(a);
    tp_archive_free(a);
    return 0;
}

/* ---- print -------------------------------------------------------------- */

static int cmd_print(int argc, char **argv) {
    const char *file = NULL, *name = NULL;
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(print_help, stdout);
            return 0;
        } else if (strcmp(argv[i], "--program") == 0 && i + 1 < argc) {
            name = argv[++i];
        } else if (argv[i][0] == '-') {
            usage_error(print_help, "unknown option '%s'", argv[i]);
        } else if (!file) {
            file = argv[i];
        } else {
            usage_error(print_help, "unexpected argument '%s'", argv[i]);
        }
    }
    if (!file) usage_error(print_help, "%s", "missing FILE");
    tp_archive *a = load_or_die(file);
    int shown = 0;
    for (int i = 0; i < tp_archive_num_programs(a); i++) {
        if (name && strcmp(name, tp_archive_program_name(a, i)) != 0) continue;
        if (tp_archive_num_programs(a) > 1) printf("# program '%s'\n", tp_archive_program_name(a, i));
        tp_status st = tp_program_print(tp_archive_program(a, i), stdout);
        if (st != TP_OK) die_status(st, "print");
        shown++;
    }
    tp_archive_free(a);
    if (name && !shown) die(EXIT_INVALID, "%s: no program named '%s'", file, name);
    return 0;
}

/* ---- verify ------------------------------------------------------------- */

static int cmd_verify(int argc, char **argv) {
    const char *file = NULL;
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(verify_help, stdout);
            return 0;
        } else if (argv[i][0] == '-') {
            usage_error(verify_help, "unknown option '%s'", argv[i]);
        } else if (!file) {
            file = argv[i];
        } else {
            usage_error(verify_help, "unexpected argument '%s'", argv[i]);
        }
    }
    if (!file) usage_error(verify_help, "%s", "missing FILE");
    tp_status st = tp_archive_verify(file, NULL);
    if (st == TP_OK) {
        printf("%s: ok\n", file);
        return 0;
    }
    if (st == TP_ERR_IO) die_status(st, file);
    printf("%s: %s\n", file, tp_last_error());
    return EXIT_INVALID;
}

/* ---- run ---------------------------------------------------------------- */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void summarise(const char *label, const tp_tensor *t) {
    const int64_t *s = tp_tensor_sizes(t);
    printf("%s: %s[", label, tp_dtype_name(tp_tensor_dtype(t)));
    for (int d = 0; d < tp_tensor_ndim(t); d++) printf("%s%" PRId64, d ? ", " : "", s[d]);
    printf("] = [");
    int64_t n = tp_tensor_numel(t), shown = n < 6 ? n : 6;
    for (int64_t i = 0; i < shown; i++) printf("%s%.6g", i ? ", " : "", tp_tensor_item_f64(t, i));
    printf("%s]\n", n > shown ? ", ..." : "");
}

static int cmd_run(int argc, char **argv) {
    const char *file = NULL, *name = NULL, *out_dir = NULL;
    int repeat = 1;
    const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    int n_inputs = 0;
    if (!inputs) die(EXIT_IO, "out of memory");
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(run_help, stdout);
            free(inputs);
            return 0;
        } else if (strcmp(argv[i], "--program") == 0 && i + 1 < argc) {
            name = argv[++i];
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out_dir = argv[++i];
        } else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
            repeat = atoi(argv[++i]);
            if (repeat < 1) usage_error(run_help, "--repeat needs a positive count, not '%s'", argv[i]);
        } else if (argv[i][0] == '-') {
            usage_error(run_help, "unknown option '%s'", argv[i]);
        } else if (!file) {
            file = argv[i];
        } else {
            inputs[n_inputs++] = argv[i];
        }
    }
    if (!file) usage_error(run_help, "%s", "missing FILE");
    tp_archive *a = load_or_die(file);
    tp_program *p = name ? tp_archive_find_program(a, name) : tp_archive_program(a, 0);
    if (!p) die(EXIT_INVALID, "%s: no program named '%s'", file, name ? name : "(any)");
    /* bind inputs: positional paths in order, name=path as keywords */
    tp_value *pos = calloc((size_t)n_inputs + 1, sizeof *pos), kwargs = tp_value_none(), result = tp_value_none();
    int n_pos = 0;
    if (!pos || tp_value_dict(&kwargs) != TP_OK) die(EXIT_IO, "out of memory");
    for (int i = 0; i < n_inputs; i++) {
        const char *eq = strchr(inputs[i], '=');
        const char *path = eq ? eq + 1 : inputs[i];
        tp_tensor *t = NULL;
        tp_status st = tp_npy_load(path, &t);
        if (st != TP_OK) die_status(st, "input");
        tp_value v = tp_value_tensor(t);
        if (eq) {
            char key[256];
            size_t len = (size_t)(eq - inputs[i]);
            if (len == 0 || len >= sizeof key) usage_error(run_help, "bad input '%s'", inputs[i]);
            memcpy(key, inputs[i], len);
            key[len] = '\0';
            if (tp_value_dict_get(&kwargs, key)) usage_error(run_help, "input '%s' given twice", key);
            if (tp_value_dict_set(&kwargs, key, &v) != TP_OK) die(EXIT_IO, "out of memory");
        } else {
            if (tp_value_len(&kwargs) > 0) usage_error(run_help, "positional input '%s' after a named one", inputs[i]);
            pos[n_pos++] = v;
        }
    }
    double total = 0;
    for (int r = 0; r < repeat; r++) {
        tp_value_clear(&result);
        double t0 = now_ms();
        tp_status st = tp_program_call(p, pos, n_pos, &kwargs, &result);
        total += now_ms() - t0;
        if (st != TP_OK) die(EXIT_INVALID, "run: %s", tp_last_error());
    }
    tp_value leaves = tp_value_none();
    tp_treespec *spec = NULL;
    if (tp_pytree_flatten(&result, &leaves, &spec) != TP_OK) die(EXIT_IO, "out of memory");
    if (out_dir) {
        struct stat sb;
        if (stat(out_dir, &sb) != 0 && mkdir(out_dir, 0777) != 0)
            die(EXIT_IO, "cannot create '%s': %s", out_dir, strerror(errno));
    }
    for (int64_t i = 0; i < tp_value_len(&leaves); i++) {
        const tp_value *v = tp_value_at(&leaves, i);
        char label[64];
        snprintf(label, sizeof label, "output_%lld", (long long)i);
        if (v->kind != TP_VAL_TENSOR) {
            char repr[128];
            tp_value_repr(v, repr, sizeof repr);
            printf("%s: %s\n", label, repr);
            continue;
        }
        summarise(label, v->u.tensor);
        if (out_dir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s.npy", out_dir, label);
            tp_status st = tp_npy_save(path, v->u.tensor);
            if (st != TP_OK) die_status(st, "output");
        }
    }
    printf("time: %.3f ms%s\n", total / repeat, repeat > 1 ? " (mean)" : "");
    tp_treespec_free(spec);
    tp_value_clear(&leaves);
    tp_value_clear(&result);
    for (int i = 0; i < n_pos; i++) tp_value_clear(&pos[i]);
    tp_value_clear(&kwargs);
    free(pos);
    free(inputs);
    tp_archive_free(a);
    return 0;
}

/* ---- decompose ------------------------------------------------------------ */

static int cmd_decompose(int argc, char **argv) {
    const char *file = NULL, *out = NULL, *table_name = "default";
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(decompose_help, stdout);
            return 0;
        } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else if (strcmp(argv[i], "--table") == 0 && i + 1 < argc) {
            table_name = argv[++i];
        } else if (argv[i][0] == '-') {
            usage_error(decompose_help, "unknown option '%s'", argv[i]);
        } else if (!file) {
            file = argv[i];
        } else {
            usage_error(decompose_help, "unexpected argument '%s'", argv[i]);
        }
    }
    if (!file) usage_error(decompose_help, "%s", "missing FILE");
    if (!out) usage_error(decompose_help, "%s", "missing -o OUT");
    tp_decomp_table *table = NULL;
    tp_status st;
    if (strcmp(table_name, "default") == 0) st = tp_decomp_table_default(&table);
    else if (strcmp(table_name, "softmax") == 0) {
        st = tp_decomp_table_default(&table);
        if (st == TP_OK) st = tp_decomp_table_add_softmax(table);
    } else if (strcmp(table_name, "none") == 0) st = tp_decomp_table_new(&table);
    else usage_error(decompose_help, "unknown table '%s'", table_name);
    if (st != TP_OK) die_status(st, "decompose");
    tp_archive *a = load_or_die(file);
    int n = tp_archive_num_programs(a);
    tp_archive_entry *entries = calloc((size_t)n + 1, sizeof *entries);
    tp_program **made = calloc((size_t)n + 1, sizeof *made);
    tp_extra_file *extra = calloc((size_t)tp_archive_num_extra(a) + 1, sizeof *extra);
    if (!entries || !made || !extra) die(EXIT_IO, "out of memory");
    for (int i = 0; i < n; i++) {
        st = tp_program_run_decompositions(tp_archive_program(a, i), table, &made[i]);
        if (st != TP_OK) die(EXIT_INVALID, "decompose '%s': %s", tp_archive_program_name(a, i), tp_last_error());
        entries[i].name = tp_archive_program_name(a, i);
        entries[i].program = made[i];
    }
    for (int i = 0; i < tp_archive_num_extra(a); i++) {
        extra[i].name = tp_archive_extra_name(a, i);
        extra[i].data = tp_archive_extra_data(a, i, &extra[i].size);
    }
    st = tp_archive_save(out, entries, n, extra, tp_archive_num_extra(a));
    if (st != TP_OK) die_status(st, out);
    printf("wrote %s (%d program%s)\n", out, n, n == 1 ? "" : "s");
    for (int i = 0; i < n; i++) tp_program_free(made[i]);
    free(made);
    free(entries);
    free(extra);
    tp_decomp_table_free(table);
    tp_archive_free(a);
    return 0;
}

/* ---- convert ------------------------------------------------------------ */

static int cmd_convert(int argc, char **argv) {
    const char *file = NULL, *out = NULL;
    bool report_only = false;
    tp_onnx_dim_range *ranges = calloc((size_t)argc + 1, sizeof *ranges);
    int n_ranges = 0;
    if (!ranges) die(EXIT_IO, "out of memory");
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(convert_help, stdout);
            free(ranges);
            return 0;
        } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else if (strcmp(argv[i], "--dynamic") == 0 && i + 1 < argc) {
            if (tp_onnx_parse_dim_range(argv[++i], &ranges[n_ranges]) != TP_OK)
                usage_error(convert_help, "bad --dynamic '%s' (expected NAME=MIN:MAX)", argv[i]);
            n_ranges++;
        } else if (strcmp(argv[i], "--report") == 0) {
            report_only = true;
        } else if (argv[i][0] == '-') {
            usage_error(convert_help, "unknown option '%s'", argv[i]);
        } else if (!file) {
            file = argv[i];
        } else {
            usage_error(convert_help, "unexpected argument '%s'", argv[i]);
        }
    }
    if (!file) usage_error(convert_help, "%s", "missing MODEL.onnx");
    if (!out && !report_only) usage_error(convert_help, "%s", "missing -o OUT.pt2");
    tp_onnx_options opts = {.n_dim_ranges = n_ranges, .dim_ranges = ranges, .report_all = report_only};
    tp_onnx_report report = {0};
    tp_program *p = NULL;
    tp_status st = tp_onnx_load(file, &opts, &p, &report);
    if (report_only) {
        tp_onnx_report_print(&report, stdout);
        int issues = report.n_issues;
        tp_onnx_report_clear(&report);
        tp_program_free(p);
        free(ranges);
        return issues || st != TP_OK ? EXIT_INVALID : 0;
    }
    tp_onnx_report_clear(&report);
    if (st != TP_OK) die_status(st, file);
    tp_archive_entry e = {"model", p};
    st = tp_archive_save(out, &e, 1, NULL, 0);
    if (st != TP_OK) die_status(st, out);
    printf("wrote %s\n", out);
    tp_program_free(p);
    free(ranges);
    return 0;
}

/* ---- main ----------------------------------------------------------------- */

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(main_help, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (is_help(cmd)) {
        fputs(main_help, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("tpexport %s\n", TP_VERSION_STRING);
        return 0;
    }
    if (strcmp(cmd, "inspect") == 0) return cmd_inspect(argc - 2, argv + 2);
    if (strcmp(cmd, "print") == 0) return cmd_print(argc - 2, argv + 2);
    if (strcmp(cmd, "verify") == 0) return cmd_verify(argc - 2, argv + 2);
    if (strcmp(cmd, "run") == 0) return cmd_run(argc - 2, argv + 2);
    if (strcmp(cmd, "decompose") == 0) return cmd_decompose(argc - 2, argv + 2);
    if (strcmp(cmd, "convert") == 0) return cmd_convert(argc - 2, argv + 2);
    fprintf(stderr, "%s: unknown command '%s'\n\n%s", prog_name, cmd, main_help);
    return EXIT_USAGE;
}
