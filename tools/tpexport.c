/*
 * tpexport.c - the `tpexport` command: inspect, print, verify, run, bench,
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
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tpexport/archive.h"
#include "tpexport/tpexport.h"
#include "tpexport/onnx.h"
#include "tpexport/run.h"

#define EXIT_INVALID 1
#define EXIT_USAGE 2
#define EXIT_IO 3

static const char *prog_name = "tpexport";

static const char *main_help =
    "usage: tpexport <command> [options] FILE\n"
    "\n"
    "Work with exported programs stored as tensorplay archives (.pt2), or as the\n"
    "archives PyTorch's torch.export.save writes (read only; saving writes tensorplay's).\n"
    "\n"
    "commands:\n"
    "  inspect    summarise the programs of an archive (signature, state, shapes, ops)\n"
    "  print      print each program's graph and signature\n"
    "  verify     check an archive completely and report every problem\n"
    "  run        run a program on .npy inputs or its example inputs\n"
    "  bench      time a program: latency percentiles, plan stats, per-op profile\n"
    "  decompose  rewrite programs with a decomposition table and save them\n"
    "  save       save the programs again, as a tensorplay or a PyTorch archive\n"
    "  convert    import an ONNX model and save it as an archive\n"
    "\n"
    "Run 'tpexport <command> --help' for a command's options.\n"
    "\n"
    "exit status: 0 success; 1 invalid program/archive or failed run;\n"
    "             2 usage error; 3 file could not be read or written\n";

static const char *inspect_help =
    "usage: tpexport inspect FILE [--json] [--no-plan]\n"
    "\n"
    "Summarise every program in the archive FILE: its user inputs and outputs\n"
    "with their kinds, lifted state counted and sized by kind (parameters,\n"
    "buffers, constants), dynamic dims with their ranges, equality\n"
    "constraints, the module call graph and how often each op is used.\n"
    "Extra files are listed with their sizes. When the example inputs of every\n"
    "user input are stored, the program is called once on them to plan it and\n"
    "its plan is shown: arena bytes, packed weight bytes and steps (fast and\n"
    "reference kernels).\n"
    "\n"
    "options:\n"
    "  --json     print one JSON object instead of text\n"
    "  --no-plan  do not call the program to show its plan\n";

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

/* How INPUT arguments bind (run and bench share bind_inputs). */
#define INPUTS_HELP                                                                  \
    "  name=path.npy      bind user input 'name' to a .npy file (either byte order)\n" \
    "  path.npy           bind the next user input, in order (also a literal)\n"    \
    "  name=3 name=0.5 name=true\n"                                                 \
    "                     a python int, float or bool input, as a literal\n"        \
    "  name.0=a.npy name.1=b.npy\n"                                                 \
    "                     the items of a tuple or list input, by position\n"        \
    "  name.key=VALUE     the items of a dict input, by key (nested: cfg.xs.0=...)\n" \
    "  --example          use the example inputs stored in the archive\n"           \
    "  (none)             the same as --example\n"                                  \
    "Give every input (every tensor and number of a structured one) or none: a\n"   \
    "missing or unknown one is a usage error naming it. The structure and kinds\n"  \
    "expected are those of the stored example inputs (else the program's input\n"   \
    "tree spec). When the example inputs are used, the output says so.\n"

static const char *run_help =
    "usage: tpexport run FILE [--program NAME] [INPUT ... | --example] [--out DIR]\n"
    "                         [--state-out DIR] [--repeat N] [--threads N] [--cpu-level LEVEL]\n"
    "\n"
    "Run a program (NAME, or the archive's only/first program) and print a\n"
    "summary of its outputs: shape, dtype, first values and the time taken.\n"
    "\n"
    "inputs:\n"
    INPUTS_HELP
    "Inputs are checked against the program's shape constraints before\n"
    "running; a violation is reported and the exit status is 1.\n"
    "\n"
    "options:\n"
    "  --program NAME  which program of the archive to run\n"
    "  --out DIR       write the flattened user outputs to DIR/output_0.npy, ...\n"
    "                  (an int, float or bool output as a 0-d int64, float64 or\n"
    "                  bool array)\n"
    "  --state-out DIR after the last call, write every parameter and buffer to\n"
    "                  DIR/<name>.npy (e.g. DIR/bn.running_mean.npy), mutations\n"
    "                  included\n"
    "  --repeat N      run N times and report the mean time (default 1)\n"
    "  --threads N     threads per call, 1-256 (default: the library default, 1)\n"
    "  --cpu-level L   cap kernel variants: auto (default), reference, scalar,\n"
    "                  avx2, avx512 (capped to what the CPU supports)\n";

static const char *bench_help =
    "usage: tpexport bench FILE [--program NAME] [INPUT ... | --example] [--threads N]\n"
    "                           [--warmup W] [--runs R] [--min-time SEC] [--cpu-level LEVEL]\n"
    "                           [--profile | --profile-nodes] [--json]\n"
    "\n"
    "Time calls of a program (NAME, or the archive's first program) through one\n"
    "run context. Inputs are bound as for 'tpexport run'. When every user input\n"
    "and output is a tensor the allocation-free entry point (tp_run_execute) is\n"
    "timed, otherwise tp_run_call. After W warm-up calls, R calls are timed one by one with a\n"
    "monotonic clock. Prints the median, p90, min and mean latency, the\n"
    "throughput, the plan (arena bytes, packed weight bytes, steps with fast and\n"
    "reference kernels), the CPU level used and the peak resident set size.\n"
    "\n"
    "inputs:\n"
    INPUTS_HELP
    "\n"
    "options:\n"
    "  --program NAME    which program of the archive to time\n"
    "  --threads N       threads per call, 1-256 (default: the library default, 1)\n"
    "  --warmup W        untimed calls first, 0-1000000 (default 3)\n"
    "  --runs R          timed calls, 1-10000000 (default: as many as fit in\n"
    "                    --min-time, at least 10, at most 1000000)\n"
    "  --min-time SEC    time budget of the timed calls without --runs (default 1)\n"
    "  --cpu-level L     cap kernel variants: auto (default), reference, scalar,\n"
    "                    avx2, avx512 (capped to what the CPU supports)\n"
    "  --profile         time every step during the timed calls and print a table\n"
    "                    per op and kernel variant, by time (the latencies then\n"
    "                    include the profiling overhead); spread ms: how long\n"
    "                    threads sat idle at the end of multi-threaded steps\n"
    "                    (last thread's finish minus the first one's)\n"
    "  --profile-nodes   --profile with one row per node (its name last)\n"
    "  --json            print one JSON object on stdout instead of text: median_ms,\n"
    "                    p90_ms, min_ms, mean_ms, throughput_per_s, runs, warmup,\n"
    "                    threads, cpu_level, entry, example_inputs, arena_bytes,\n"
    "                    packed_bytes, steps, fast_steps, reference_steps,\n"
    "                    peak_rss_bytes and,\n"
    "                    with --profile, ops: [{op, variant, ms, calls,\n"
    "                    spread_ms}] per call\n"
    "                    (and node, with --profile-nodes)\n";

static const char *save_help =
    "usage: tpexport save FILE -o OUT [--format tensorplay|torch]\n"
    "\n"
    "Save the programs of FILE (a tensorplay or PyTorch archive) to OUT:\n"
    "as a tensorplay archive (the default, extra files kept) or, with\n"
    "--format torch, as the archive PyTorch's torch.export.save writes\n"
    "(torch.export.load reads it; extra files are not written).\n"
    "\n"
    "options:\n"
    "  -o OUT          output archive (required)\n"
    "  --format NAME   'tensorplay' (the default) or 'torch'\n";

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
    "usage: tpexport convert MODEL.onnx -o OUT.pt2 [--dynamic NAME=MIN:MAX ...]\n"
    "                        [--input-value NAME=FILE.npy ...] [--report]\n"
    "\n"
    "Import an ONNX model (opsets 6-28) as an exported program and save it.\n"
    "Symbolic dims (dim_param) become named dynamic dims; --dynamic gives one\n"
    "a range (MAX may be 'inf'). Shape arithmetic on them (Shape, Gather,\n"
    "Concat, ... feeding Reshape, Expand, Slice) follows the run-time sizes.\n"
    "\n"
    "options:\n"
    "  -o OUT           output archive (required unless --report)\n"
    "  --dynamic N=A:B  range of the symbolic dim N\n"
    "  --input-value N=FILE.npy\n"
    "                   specialise graph input N to the array in FILE: it is no\n"
    "                   longer an input but a constant of the program (for inputs\n"
    "                   read as shape data: Reshape's shape, TopK's k, ...)\n"
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
    const char *msg = tp_last_error();
    size_t n = strlen(what);
    if (strncmp(msg, what, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ') msg += n + 2; /* the library named it */
    die(exit_code_for(st), "%s: %s", what, msg);
}

/* What a file is, by its first bytes: 'z' a ZIP (an archive), 'o' probably
 * an ONNX model (protobuf: field 1, ir_version, as a varint), '?' else. */
static char file_kind(const char *path) {
    unsigned char b[4] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return '?';
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    if (n >= 4 && b[0] == 'P' && b[1] == 'K' && b[2] == 3 && b[3] == 4) return 'z';
    size_t len = strlen(path);
    if (n >= 1 && b[0] == 0x08 && len > 5 && strcmp(path + len - 5, ".onnx") == 0) return 'o';
    return '?';
}

/* A usage error: one line, the problem and where the help is
 * ("tpexport: missing FILE (see 'tpexport run --help')"). The command is
 * read off the help text's "usage: tpexport <command>" line. */
static void usage_error(const char *help, const char *fmt, const char *arg) __attribute__((noreturn));
static void usage_error(const char *help, const char *fmt, const char *arg) {
    char cmd[64] = "tpexport";
    const char *u = strstr(help, "usage: ");
    if (u) {
        u += 7;
        size_t n = 0;
        int words = 0;
        while (u[n] && u[n] != '\n' && n + 1 < sizeof cmd) {
            if (u[n] == ' ' && ++words == 2) break;
            n++;
        }
        if (words == 2 || n) {
            memcpy(cmd, u, n);
            cmd[n] = 0;
        }
        if (strchr(cmd, '<')) snprintf(cmd, sizeof cmd, "%s", "tpexport"); /* the main help */
    }
    fprintf(stderr, "%s: ", prog_name);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see '%s --help')\n", cmd);
    exit(EXIT_USAGE);
}

static bool is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

static tp_archive *load_or_die(const char *path) {
    tp_archive *a = NULL;
    tp_status st = tp_archive_load(path, NULL, &a);
    if (st != TP_OK && file_kind(path) == 'o')
        die(EXIT_INVALID, "%s is an ONNX model, not an archive: convert it first ('tpexport convert %s -o OUT.pt2')",
            path, path);
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

/* Plan p by calling it once on its example inputs. 1: planned (*out
 * filled); 0: some user input has no example input; -1: the call failed
 * (tp_last_error says why). */
static int example_plan(tp_program *p, tp_run_stats *out) {
    const tp_signature *sig = tp_program_signature(p);
    for (int i = 0; i < tp_signature_n_inputs(sig); i++) {
        const tp_input_spec *s = tp_signature_input(sig, i);
        if (s->kind == TP_INPUT_USER_INPUT && !tp_program_example_input(p, s->arg.name)) return 0;
    }
    tp_run *r = NULL;
    tp_value result = tp_value_none();
    tp_status st = tp_run_new(p, NULL, &r);
    if (st == TP_OK) st = tp_run_call(r, NULL, 0, NULL, &result);
    if (st == TP_OK) tp_run_get_stats(r, out);
    tp_value_clear(&result);
    tp_run_free(r);
    return st == TP_OK ? 1 : -1;
}

/* The dtype and shape of user input/output `name` as "float32[batch, 4]"
 * (tp_program_input_info / _output_info); "" if it is not one or the
 * program does not record them. */
static void format_dim(const tp_io_dim *d, char *buf, size_t size) {
    if (!d->symbol) {
        if (d->size >= 0) snprintf(buf, size, "%" PRId64, d->size);
        else snprintf(buf, size, "?");
        return;
    }
    char scale[32] = "", offset[32] = "";
    if (d->scale != 1) snprintf(scale, sizeof scale, "%" PRId64 "*", d->scale);
    if (d->offset > 0) snprintf(offset, sizeof offset, " + %" PRId64, d->offset);
    else if (d->offset < 0) snprintf(offset, sizeof offset, " - %" PRIu64, (uint64_t)0 - (uint64_t)d->offset);
    snprintf(buf, size, "%s%s%s", scale, d->symbol, offset);
}

static bool io_info_of(const tp_program *p, bool input, const char *name, tp_io_info *info) {
    const tp_signature *sig = tp_program_signature(p);
    int n = input ? tp_signature_n_inputs(sig) : tp_signature_n_outputs(sig), user = 0;
    for (int k = 0; k < n; k++) {
        const tp_arg_spec *a;
        bool is_user;
        if (input) {
            const tp_input_spec *s = tp_signature_input(sig, k);
            a = &s->arg;
            is_user = s->kind == TP_INPUT_USER_INPUT;
        } else {
            const tp_output_spec *s = tp_signature_output(sig, k);
            a = &s->arg;
            is_user = s->kind == TP_OUTPUT_USER_OUTPUT;
        }
        if (!is_user) continue;
        if (strcmp(a->name, name) == 0) {
            tp_status st = input ? tp_program_input_info(p, user, info) : tp_program_output_info(p, user, info);
            return st == TP_OK && info->kind == TP_ARGK_TENSOR && info->ndim >= 0;
        }
        user++;
    }
    return false;
}

static void format_io(const tp_program *p, bool input, const char *name, char *buf, size_t size) {
    tp_io_info info;
    buf[0] = 0;
    if (!io_info_of(p, input, name, &info)) return;
    size_t used = (size_t)snprintf(buf, size, "%s[", tp_dtype_name(info.dtype));
    for (int d = 0; d < info.ndim && used < size; d++) {
        char dim[96];
        format_dim(&info.dims[d], dim, sizeof dim);
        used += (size_t)snprintf(buf + used, size - used, "%s%s", d ? ", " : "", dim);
    }
    if (used < size) snprintf(buf + used, size - used, "]");
}

static void inspect_text(const tp_archive *a, bool plan) {
    static const char *kinds[3] = {"parameters", "buffers", "constants"};
    for (int i = 0; i < tp_archive_num_programs(a); i++) {
        const tp_program *p = tp_archive_program(a, i);
        const tp_signature *sig = tp_program_signature(p);
        printf("program '%s'\n", tp_archive_program_name(a, i));
        printf("  inputs:\n");
        char line[512];
        char io[512];
        for (int k = 0; k < tp_signature_n_inputs(sig); k++) {
            const tp_input_spec *s = tp_signature_input(sig, k);
            tp_input_spec_str(s, line, sizeof line);
            io[0] = 0;
            if (s->kind == TP_INPUT_USER_INPUT) format_io(p, true, s->arg.name, io, sizeof io);
            printf("    %s%s%s\n", line, io[0] ? "  " : "", io);
        }
        printf("  outputs:\n");
        for (int k = 0; k < tp_signature_n_outputs(sig); k++) {
            const tp_output_spec *s = tp_signature_output(sig, k);
            tp_output_spec_str(s, line, sizeof line);
            io[0] = 0;
            if (s->kind == TP_OUTPUT_USER_OUTPUT) format_io(p, false, s->arg.name, io, sizeof io);
            printf("    %s%s%s\n", line, io[0] ? "  " : "", io);
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
        tp_run_stats rs;
        int planned = plan ? example_plan(tp_archive_program(a, i), &rs) : 0;
        if (planned > 0)
            printf("  plan (example inputs, cpu level %s):\n    arena: %zu bytes, packed weights: %zu bytes, steps: %" PRId64
                   " (%" PRId64 " fast, %" PRId64 " reference, %" PRId64 " fused, %" PRId64 " in place)\n",
                   tp_cpu_level_name(rs.cpu_level), rs.arena_bytes, rs.packed_bytes, rs.n_steps, rs.n_fast,
                   rs.n_reference, rs.n_fused, rs.n_in_place);
        else if (planned < 0)
            printf("  plan: the call on the example inputs failed: %s\n", tp_last_error());
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

/* "dtype" and "shape" (ints; strings such as "2*batch" for symbolic dims,
 * null for dynamic dims without an expression) of a user input/output. */
static void io_json(const tp_program *p, bool input, const char *name, json_t *o) {
    tp_io_info info;
    if (!io_info_of(p, input, name, &info)) return;
    json_object_set_new(o, "dtype", json_string(tp_dtype_name(info.dtype)));
    json_t *shape = json_array();
    for (int d = 0; d < info.ndim; d++) {
        const tp_io_dim *x = &info.dims[d];
        if (x->symbol) {
            char dim[96];
            format_dim(x, dim, sizeof dim);
            json_array_append_new(shape, json_string(dim));
        } else {
            json_array_append_new(shape, x->size >= 0 ? json_integer(x->size) : json_null());
        }
    }
    json_object_set_new(o, "shape", shape);
}

static json_t *spec_list_json(const tp_program *p, bool inputs) {
    const tp_signature *sig = tp_program_signature(p);
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
            if (s->kind == TP_INPUT_USER_INPUT) io_json(p, true, s->arg.name, o);
        } else {
            const tp_output_spec *s = tp_signature_output(sig, k);
            json_object_set_new(o, "name", json_string(s->arg.name));
            json_object_set_new(o, "kind", json_string(tp_output_kind_name(s->kind)));
            if (s->target) json_object_set_new(o, "target", json_string(s->target));
            if (s->kind == TP_OUTPUT_USER_OUTPUT) io_json(p, false, s->arg.name, o);
        }
        json_array_append_new(arr, o);
    }
    return arr;
}

static void inspect_json(const tp_archive *a, bool plan) {
    static const char *kinds[3] = {"parameters", "buffers", "constants"};
    json_t *root = json_object(), *progs = json_array();
    for (int i = 0; i < tp_archive_num_programs(a); i++) {
        const tp_program *p = tp_archive_program(a, i);
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(tp_archive_program_name(a, i)));
        json_object_set_new(o, "inputs", spec_list_json(p, true));
        json_object_set_new(o, "outputs", spec_list_json(p, false));
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
        tp_run_stats rs;
        int planned = plan ? example_plan(tp_archive_program(a, i), &rs) : 0;
        if (planned > 0)
            json_object_set_new(o, "plan",
                                json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "cpu_level", tp_cpu_level_name(rs.cpu_level),
                                          "arena_bytes", (json_int_t)rs.arena_bytes, "packed_bytes",
                                          (json_int_t)rs.packed_bytes, "steps", (json_int_t)rs.n_steps, "fast_steps",
                                          (json_int_t)rs.n_fast, "reference_steps", (json_int_t)rs.n_reference,
                                          "fused_steps", (json_int_t)rs.n_fused, "in_place_steps",
                                          (json_int_t)rs.n_in_place));
        else if (planned < 0)
            json_object_set_new(o, "plan", json_pack("{s:s}", "error", tp_last_error()));
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
        tp_free(text); /* jansson allocates through tp_malloc (alloc.h) */
    }
    json_decref(root);
}

static int cmd_inspect(int argc, char **argv) {
    const char *file = NULL;
    bool as_json = false, plan = true;
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(inspect_help, stdout);
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            as_json = true;
        } else if (strcmp(argv[i], "--no-plan") == 0) {
            plan = false;
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
    if (as_json) inspect_json(a, plan);
    else inspect_text(a, plan);
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

/* ---- timing ------------------------------------------------------------- */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- option values ------------------------------------------------------ */

/* The value after option argv[*i], or a one-line usage error. */
static const char *option_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) die(EXIT_USAGE, "%s: option '%s' needs a value", cmd, argv[*i]);
    return argv[++*i];
}

/* A whole decimal integer in [min, max] (strtol with an end check), else a
 * one-line usage error. */
static long parse_long(const char *cmd, const char *opt, const char *text, long min, long max) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE || v < min || v > max)
        die(EXIT_USAGE, "%s: %s needs an integer in [%ld, %ld], not '%s'", cmd, opt, min, max, text);
    return v;
}

/* A finite number of seconds > 0 (strtod with an end check). */
static double parse_seconds(const char *cmd, const char *opt, const char *text) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v) || v <= 0 || v > 86400)
        die(EXIT_USAGE, "%s: %s needs a number of seconds in (0, 86400], not '%s'", cmd, opt, text);
    return v;
}

static tp_cpu_level parse_cpu_level(const char *cmd, const char *text) {
    static const tp_cpu_level levels[] = {TP_CPU_AUTO, TP_CPU_REFERENCE, TP_CPU_SCALAR, TP_CPU_AVX2, TP_CPU_AVX512};
    for (size_t i = 0; i < sizeof levels / sizeof *levels; i++)
        if (strcmp(text, tp_cpu_level_name(levels[i])) == 0) return levels[i];
    die(EXIT_USAGE, "%s: --cpu-level needs auto, reference, scalar, avx2 or avx512, not '%s'", cmd, text);
}

/* A note on stderr when the CPU cannot give the level asked for. */
static void warn_cpu_level(const char *cmd, tp_cpu_level asked) {
    tp_cpu_level best = tp_cpu_level_supported();
    if (asked != TP_CPU_AUTO && asked > best)
        fprintf(stderr, "%s: %s: this CPU does not support %s; using %s\n", prog_name, cmd, tp_cpu_level_name(asked),
                tp_cpu_level_name(best));
}

/* A run context for p with these options (threads 0: library default). */
static tp_run *run_new_or_die(tp_program *p, int threads, tp_cpu_level level, tp_profile_fn profile, void *user) {
    tp_run_options opt;
    tp_run_options_init(&opt);
    opt.num_threads = threads;
    opt.cpu_level = level;
    opt.profile = profile;
    opt.profile_user = user;
    tp_run *r = NULL;
    tp_status st = tp_run_new(p, &opt, &r);
    if (st != TP_OK) die_status(st, "run context");
    return r;
}

static tp_program *find_program_or_die(tp_archive *a, const char *file, const char *name) {
    tp_program *p = name ? tp_archive_find_program(a, name) : tp_archive_program(a, 0);
    if (!p) die(EXIT_INVALID, "%s: no program named '%s'", file, name ? name : "(any)");
    return p;
}

/* ---- input binding (run, bench) -------------------------------------------- */

/* User arguments from the command line, one complete value per user input
 * in signature order (pos), or none at all (examples: the stored example
 * inputs are used, which tp_run_call fills in). kwargs stays an empty dict. */
typedef struct bound_inputs {
    tp_value *pos;
    int n_pos;
    tp_value kwargs; /* a dict */
    bool examples;
} bound_inputs;

/* One INPUT argument: the dotted path it binds ("x", "xs.0", "cfg.k") and
 * its value text (a .npy path or a literal). */
typedef struct input_arg {
    char path[256];
    const char *text;
    bool used;
} input_arg;

/* What one place of the expected input structure is, for messages. */
typedef struct input_node {
    char path[256];
    char what[192]; /* "a tuple of 2", "a dict with keys k, scale", "an int" */
} input_node;

typedef struct binder {
    const char *help;
    input_arg *args;
    int n_args;
    input_node *nodes;
    int n_nodes, cap_nodes;
    char missing[1024];
    int n_missing;
} binder;

static void bind_usage(const binder *bd, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void bind_usage(const binder *bd, const char *fmt, ...) {
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    usage_error(bd->help, "%s", msg);
    exit(EXIT_USAGE); /* not reached */
}

static void add_node(binder *bd, const char *path, const char *what) {
    if (bd->n_nodes == bd->cap_nodes) {
        bd->cap_nodes = bd->cap_nodes ? 2 * bd->cap_nodes : 16;
        bd->nodes = realloc(bd->nodes, (size_t)bd->cap_nodes * sizeof *bd->nodes);
        if (!bd->nodes) die(EXIT_IO, "out of memory");
    }
    input_node *n = &bd->nodes[bd->n_nodes++];
    snprintf(n->path, sizeof n->path, "%s", path);
    snprintf(n->what, sizeof n->what, "%s", what);
}

static input_arg *find_arg(binder *bd, const char *path) {
    for (int i = 0; i < bd->n_args; i++)
        if (strcmp(bd->args[i].path, path) == 0) return &bd->args[i];
    return NULL;
}

static const char *leaf_what(tp_value_kind k) {
    switch (k) {
    case TP_VAL_TENSOR: return "a tensor";
    case TP_VAL_INT: return "an int";
    case TP_VAL_FLOAT: return "a float";
    case TP_VAL_BOOL: return "a bool";
    case TP_VAL_STR: return "a str";
    case TP_VAL_NONE: return "a value"; /* not known: no example input */
    default: return "a value of another kind";
    }
}

static bool parse_int_text(const char *s, int64_t *v) {
    char *end = NULL;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (end == s || *end || errno == ERANGE) return false;
    *v = (int64_t)x;
    return true;
}

static bool parse_float_text(const char *s, double *v) {
    char *end = NULL;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || *end || (errno == ERANGE && isinf(x))) return false;
    *v = x;
    return true;
}

static bool parse_bool_text(const char *s, bool *v) {
    if (strcmp(s, "true") == 0 || strcmp(s, "True") == 0) *v = true;
    else if (strcmp(s, "false") == 0 || strcmp(s, "False") == 0) *v = false;
    else return false;
    return true;
}

/* The value of leaf argument a, read as `kind` (the example input's leaf
 * kind; TP_VAL_NONE when unknown: a bool, int or float literal if it reads
 * as one, else a .npy file). */
static tp_value leaf_value(const binder *bd, const input_arg *a, tp_value_kind kind) {
    int64_t i;
    double f;
    bool b;
    switch (kind) {
    case TP_VAL_INT:
        if (!parse_int_text(a->text, &i)) bind_usage(bd, "input '%s' is an int, not '%s'", a->path, a->text);
        return tp_value_int(i);
    case TP_VAL_FLOAT:
        if (!parse_float_text(a->text, &f)) bind_usage(bd, "input '%s' is a float, not '%s'", a->path, a->text);
        return tp_value_float(f);
    case TP_VAL_BOOL:
        if (!parse_bool_text(a->text, &b))
            bind_usage(bd, "input '%s' is a bool (true or false), not '%s'", a->path, a->text);
        return tp_value_bool(b);
    case TP_VAL_STR: {
        tp_value v = tp_value_none();
        if (tp_value_str(a->text, &v) != TP_OK) die(EXIT_IO, "out of memory");
        return v;
    }
    case TP_VAL_NONE:
        if (parse_bool_text(a->text, &b)) return tp_value_bool(b);
        if (parse_int_text(a->text, &i)) return tp_value_int(i);
        if (parse_float_text(a->text, &f)) return tp_value_float(f);
        break;
    case TP_VAL_TENSOR:
        if ((parse_bool_text(a->text, &b) || parse_float_text(a->text, &f)) && access(a->text, F_OK) != 0)
            bind_usage(bd, "input '%s' is a tensor: give a .npy file, not '%s'", a->path, a->text);
        break;
    default:
        bind_usage(bd, "input '%s' is %s: only tensors, ints, floats, bools and strs can be given", a->path,
                   leaf_what(kind));
    }
    tp_tensor *t = NULL;
    tp_status st = tp_npy_load(a->text, &t);
    if (st != TP_OK) die(exit_code_for(st), "input '%s': %s", a->path, tp_last_error());
    return tp_value_tensor(t);
}

/* Build the value of the input at `path` from the arguments: its structure
 * is the example input's (tmpl) or else the input tree spec's (spec); either
 * may be NULL (a leaf of unknown kind). Leaves without an argument are
 * listed in bd->missing. */
static void build_input(binder *bd, const tp_value *tmpl, const tp_treespec *spec, const char *path, int depth,
                        tp_value *out) {
    *out = tp_value_none();
    if (depth > 64) bind_usage(bd, "input '%s' is nested too deeply", path);
    tp_value_kind ck = TP_VAL_NONE;
    int64_t n = 0;
    if (tmpl) {
        if (tmpl->kind == TP_VAL_LIST || tmpl->kind == TP_VAL_TUPLE || tmpl->kind == TP_VAL_DICT) {
            ck = tmpl->kind;
            n = tp_value_len(tmpl);
        }
        spec = spec && tp_treespec_num_children(spec) == n ? spec : NULL; /* the example decides */
    } else if (spec) {
        tp_tree_kind sk = tp_treespec_kind(spec);
        if (sk == TP_TREE_NONE) { /* None: nothing to give */
            add_node(bd, path, "None");
            return;
        }
        ck = sk == TP_TREE_TUPLE ? TP_VAL_TUPLE : sk == TP_TREE_LIST ? TP_VAL_LIST : sk == TP_TREE_DICT ? TP_VAL_DICT
                                                                                                        : TP_VAL_NONE;
        n = tp_treespec_num_children(spec);
    }
    if (ck == TP_VAL_NONE) { /* a leaf */
        tp_value_kind lk = tmpl ? tmpl->kind : TP_VAL_NONE;
        if (tmpl && lk == TP_VAL_NONE) { /* the example is None: nothing to give */
            add_node(bd, path, "None");
            return;
        }
        add_node(bd, path, leaf_what(lk));
        input_arg *a = find_arg(bd, path);
        if (!a) {
            size_t used = strlen(bd->missing);
            snprintf(bd->missing + used, sizeof bd->missing - used, "%s%s", bd->n_missing ? ", " : "", path);
            bd->n_missing++;
            return;
        }
        a->used = true;
        *out = leaf_value(bd, a, lk);
        return;
    }
    /* a container: "a tuple of 2", "a dict with keys k, scale" */
    char what[192], example[256] = "";
    if (ck == TP_VAL_DICT) {
        size_t used = (size_t)snprintf(what, sizeof what, "a dict with key%s ", n == 1 ? "" : "s");
        for (int64_t i = 0; i < n && used < sizeof what; i++)
            used += (size_t)snprintf(what + used, sizeof what - used, "%s%s", i ? ", " : "",
                                     tmpl ? tmpl->u.seq.keys[i] : tp_treespec_key(spec, i));
    } else {
        snprintf(what, sizeof what, "a %s of %lld", tp_value_kind_name(ck), (long long)n);
    }
    add_node(bd, path, what);
    for (int64_t i = 0; i < n && i < 2; i++) {
        size_t used = strlen(example);
        const char *key = ck == TP_VAL_DICT ? (tmpl ? tmpl->u.seq.keys[i] : tp_treespec_key(spec, i)) : NULL;
        int w = key ? snprintf(example + used, sizeof example - used, "%s%s.%s=...", i ? " " : "", path, key)
                    : snprintf(example + used, sizeof example - used, "%s%s.%lld=...", i ? " " : "", path,
                               (long long)i);
        if (w < 0) example[used] = '\0'; /* a long example is cut at the buffer */
    }
    if (find_arg(bd, path))
        bind_usage(bd, "input '%s' is %s: give each item, as %s%s", path, what, example, n > 2 ? " ..." : "");
    tp_status st = ck == TP_VAL_DICT ? tp_value_dict(out) : ck == TP_VAL_LIST ? tp_value_list(n, out)
                                                                              : tp_value_tuple(n, out);
    if (st != TP_OK) die(EXIT_IO, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        char sub[256], index[32];
        const char *key = ck == TP_VAL_DICT ? (tmpl ? tmpl->u.seq.keys[i] : tp_treespec_key(spec, i)) : NULL;
        if (!key) {
            snprintf(index, sizeof index, "%lld", (long long)i);
            key = index;
        }
        if ((size_t)snprintf(sub, sizeof sub, "%s.%s", path, key) >= sizeof sub)
            bind_usage(bd, "input '%s': path too long", path);
        tp_value item;
        build_input(bd, tmpl ? &tmpl->u.seq.items[i] : NULL, spec ? tp_treespec_child(spec, i) : NULL, sub,
                    depth + 1, &item);
        st = ck == TP_VAL_DICT ? tp_value_dict_set(out, key, &item) : tp_value_seq_set(out, i, &item);
        if (st != TP_OK) die(EXIT_IO, "out of memory");
    }
}

/* The input tree spec's part for user input i named `name`: in_spec is
 * (args tuple, kwargs dict); NULL if the program has none or it does not
 * fit. */
static const tp_treespec *input_spec_of(const tp_program *p, int i, const char *name) {
    const tp_treespec *s = tp_program_in_spec(p);
    if (!s || tp_treespec_kind(s) != TP_TREE_TUPLE || tp_treespec_num_children(s) != 2) return NULL;
    const tp_treespec *args = tp_treespec_child(s, 0), *kwargs = tp_treespec_child(s, 1);
    if (tp_treespec_kind(args) == TP_TREE_TUPLE && i < tp_treespec_num_children(args))
        return tp_treespec_child(args, i);
    if (tp_treespec_kind(kwargs) == TP_TREE_DICT)
        for (int64_t k = 0; k < tp_treespec_num_children(kwargs); k++)
            if (strcmp(tp_treespec_key(kwargs, k), name) == 0) return tp_treespec_child(kwargs, k);
    return NULL;
}

/* Bind INPUT arguments (name=VALUE, name.0=VALUE, name.key=VALUE, or VALUE
 * for the next user input in order) to p's user inputs. With none (or
 * --example) the stored example inputs are used, which must then exist for
 * every user input. A missing, unknown or repeated piece is a usage error
 * naming it. */

/* An ONNX model's own input name ("input.1", "0") for the placeholder the
 * importer made of it ("input_1", "_0"), through the record the importer
 * keeps: the root module call's forward argument names. Rewrites path when
 * neither it nor its first component names an input. */
static void model_name_to_input(const tp_program *p, char *path, size_t size, const char **names, int n_user) {
    size_t top = strcspn(path, ".");
    for (int k = 0; k < n_user; k++)
        if (!strcmp(names[k], path) || (strlen(names[k]) == top && !strncmp(names[k], path, top))) return;
    for (int i = 0; i < tp_program_num_module_calls(p); i++) {
        tp_module_call_entry e = tp_program_module_call(p, i);
        const tp_module_call_signature *s = e.signature;
        if (strcmp(e.fqn, "") != 0 || !s || s->n_forward_arg_names != n_user || s->n_inputs != n_user) continue;
        for (int k = 0; k < n_user; k++)
            if (!strcmp(s->forward_arg_names[k], path) && !strcmp(s->inputs[k].name, names[k])) {
                snprintf(path, size, "%s", names[k]);
                return;
            }
    }
}

static void bind_inputs(const char *help, const tp_program *p, const char **inputs, int n_inputs, bool example,
                        bound_inputs *b) {
    b->pos = NULL;
    b->n_pos = 0;
    b->kwargs = tp_value_none();
    b->examples = false;
    if (tp_value_dict(&b->kwargs) != TP_OK) die(EXIT_IO, "out of memory");
    if (example && n_inputs) usage_error(help, "%s", "--example takes no inputs (it uses the stored ones)");
    const tp_signature *sig = tp_program_signature(p);
    const char **names = calloc((size_t)tp_signature_n_inputs(sig) + 1, sizeof *names);
    int n_user = 0;
    if (!names) die(EXIT_IO, "out of memory");
    for (int i = 0; i < tp_signature_n_inputs(sig); i++)
        if (tp_signature_input(sig, i)->kind == TP_INPUT_USER_INPUT) names[n_user++] = tp_signature_input(sig, i)->arg.name;
    binder bd = {.help = help};
    if (n_inputs == 0) {
        for (int i = 0; i < n_user; i++) {
            if (tp_program_example_input(p, names[i])) continue;
            size_t used = strlen(bd.missing);
            snprintf(bd.missing + used, sizeof bd.missing - used, "%s%s", bd.n_missing++ ? ", " : "", names[i]);
        }
        if (bd.n_missing)
            bind_usage(&bd, "missing input%s %s: the archive stores no example input for %s", bd.n_missing == 1 ? "" : "s",
                       bd.missing, bd.n_missing == 1 ? "it" : "them");
        b->examples = true;
        free(names);
        return;
    }
    bd.args = calloc((size_t)n_inputs, sizeof *bd.args);
    if (!bd.args) die(EXIT_IO, "out of memory");
    int n_positional = 0;
    bool named = false;
    for (int i = 0; i < n_inputs; i++) {
        input_arg *a = &bd.args[bd.n_args];
        const char *eq = strchr(inputs[i], '=');
        if (eq) {
            size_t len = (size_t)(eq - inputs[i]);
            if (len == 0 || len >= sizeof a->path || inputs[i][0] == '.' || eq[-1] == '.')
                bind_usage(&bd, "bad input '%s'", inputs[i]);
            memcpy(a->path, inputs[i], len);
            a->path[len] = '\0';
            a->text = eq + 1;
            named = true;
            model_name_to_input(p, a->path, sizeof a->path, names, n_user);
        } else {
            if (named) bind_usage(&bd, "positional input '%s' after a named one", inputs[i]);
            if (n_positional >= n_user)
                bind_usage(&bd, "too many inputs: '%s' would be input %d, the program takes %d", inputs[i], n_user + 1, n_user);
            snprintf(a->path, sizeof a->path, "%s", names[n_positional++]);
            a->text = inputs[i];
        }
        if (find_arg(&bd, a->path)) bind_usage(&bd, "input '%s' given twice", a->path);
        bd.n_args++;
    }
    b->pos = calloc((size_t)n_user + 1, sizeof *b->pos);
    if (!b->pos) die(EXIT_IO, "out of memory");
    for (int i = 0; i < n_user; i++)
        build_input(&bd, tp_program_example_input(p, names[i]), input_spec_of(p, i, names[i]), names[i], 0,
                    &b->pos[i]);
    b->n_pos = n_user;
    for (int i = 0; i < bd.n_args; i++) {
        const input_arg *a = &bd.args[i];
        if (a->used) continue;
        const input_node *best = NULL;
        for (int k = 0; k < bd.n_nodes; k++)
            if (strcmp(a->path, bd.nodes[k].path) == 0) /* only None is left unused */
                bind_usage(&bd, "input '%s' is %s: it takes no value", a->path, bd.nodes[k].what);
        for (int k = 0; k < bd.n_nodes; k++) {
            size_t len = strlen(bd.nodes[k].path);
            if (strncmp(a->path, bd.nodes[k].path, len) == 0 && a->path[len] == '.' &&
                (!best || len > strlen(best->path)))
                best = &bd.nodes[k];
        }
        if (best) bind_usage(&bd, "unknown input '%s': %s is %s", a->path, best->path, best->what);
        char list[512] = "";
        for (int k = 0; k < n_user; k++) {
            size_t used = strlen(list);
            snprintf(list + used, sizeof list - used, "%s%s", k ? ", " : "", names[k]);
        }
        if (n_user) bind_usage(&bd, "unknown input '%s': the program's inputs are %s", a->path, list);
        bind_usage(&bd, "unknown input '%s': the program takes no inputs", a->path);
    }
    if (bd.n_missing)
        bind_usage(&bd, "missing input%s %s: give every input, or none to use the stored example inputs",
                   bd.n_missing == 1 ? "" : "s", bd.missing);
    free(bd.args);
    free(bd.nodes);
    free(names);
}

static int n_user_inputs(const tp_program *p) {
    const tp_signature *sig = tp_program_signature(p);
    int n = 0;
    for (int i = 0; i < tp_signature_n_inputs(sig); i++) n += tp_signature_input(sig, i)->kind == TP_INPUT_USER_INPUT;
    return n;
}

static void bound_inputs_clear(bound_inputs *b) {
    for (int i = 0; i < b->n_pos; i++) tp_value_clear(&b->pos[i]);
    tp_value_clear(&b->kwargs);
    free(b->pos);
    b->pos = NULL;
    b->n_pos = 0;
}

/* The bound arguments as one tensor per user input in signature order (the
 * form tp_run_execute takes; borrowed), or NULL when some user input is not
 * a tensor, is missing, or the arguments do not fit (tp_run_call then
 * reports what is wrong). *n gets the count. */
static tp_tensor **tensor_inputs(const tp_program *p, const bound_inputs *b, int *n) {
    const tp_signature *sig = tp_program_signature(p);
    int n_user = 0;
    for (int i = 0; i < tp_signature_n_inputs(sig); i++)
        if (tp_signature_input(sig, i)->kind == TP_INPUT_USER_INPUT) n_user++;
    if (b->n_pos > n_user) return NULL;
    tp_tensor **out = calloc((size_t)n_user + 1, sizeof *out);
    if (!out) die(EXIT_IO, "out of memory");
    int k = 0;
    int64_t used_kwargs = 0;
    for (int i = 0; i < tp_signature_n_inputs(sig); i++) {
        const tp_input_spec *s = tp_signature_input(sig, i);
        if (s->kind != TP_INPUT_USER_INPUT) continue;
        const tp_value *v = NULL;
        if (k < b->n_pos) {
            v = &b->pos[k];
            if (tp_value_dict_get(&b->kwargs, s->arg.name)) v = NULL; /* given twice: let tp_run_call say so */
        } else if ((v = tp_value_dict_get(&b->kwargs, s->arg.name)) != NULL) {
            used_kwargs++;
        } else {
            v = tp_program_example_input(p, s->arg.name);
        }
        if (!v || v->kind != TP_VAL_TENSOR || s->arg.kind != TP_ARGK_TENSOR) {
            free(out);
            return NULL;
        }
        out[k++] = v->u.tensor;
    }
    if (used_kwargs != tp_value_len(&b->kwargs)) { /* unknown keywords */
        free(out);
        return NULL;
    }
    *n = k;
    return out;
}

/* ---- run ---------------------------------------------------------------- */

static void summarise(const char *label, const tp_tensor *t) {
    const int64_t *s = tp_tensor_sizes(t);
    printf("%s: %s[", label, tp_dtype_name(tp_tensor_dtype(t)));
    for (int d = 0; d < tp_tensor_ndim(t); d++) printf("%s%" PRId64, d ? ", " : "", s[d]);
    printf("] = [");
    int64_t n = tp_tensor_numel(t), shown = n < 6 ? n : 6;
    for (int64_t i = 0; i < shown; i++) printf("%s%.6g", i ? ", " : "", tp_tensor_item_f64(t, i));
    printf("%s]\n", n > shown ? ", ..." : "");
}

/* A 0-d tensor holding an int (int64), float (float64) or bool output, as
 * numpy writes a python number; NULL for other values (str, dtype). */
static tp_tensor *scalar_tensor(const tp_value *v) {
    int64_t i = 0;
    double f = 0;
    uint8_t b = 0;
    tp_tensor *t = NULL;
    tp_status st;
    switch (v->kind) {
    case TP_VAL_INT: i = v->u.i; st = tp_tensor_from_data(TP_INT64, 0, NULL, &i, &t); break;
    case TP_VAL_FLOAT: f = v->u.f; st = tp_tensor_from_data(TP_FLOAT64, 0, NULL, &f, &t); break;
    case TP_VAL_BOOL: b = v->u.b; st = tp_tensor_from_data(TP_BOOL, 0, NULL, &b, &t); break;
    default: return NULL;
    }
    if (st != TP_OK) die_status(st, "output");
    return t;
}

/* An output folder: made if missing, else it must be a writable folder. */
static void prepare_dir(const char *opt, const char *dir) {
    struct stat sb;
    if (stat(dir, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) die(EXIT_IO, "%s '%s' is not a directory", opt, dir);
        if (access(dir, W_OK) != 0) die(EXIT_IO, "%s '%s' is not writable: %s", opt, dir, strerror(errno));
    } else if (mkdir(dir, 0777) != 0) {
        die(EXIT_IO, "cannot create '%s': %s", dir, strerror(errno));
    }
}

/* --state-out: every parameter and buffer of p as DIR/<name>.npy (the
 * dotted state name, '/' replaced by '_'), as the calls left them.
 * Returns the number written. */
static int write_state(const tp_program *p, const char *dir) {
    tp_named_state s;
    tp_status st = tp_program_named_state(p, TP_FILTER_ALL, &s);
    if (st != TP_OK) die_status(st, "state");
    int written = 0;
    for (int i = 0; i < s.n; i++) {
        if (s.items[i].kind == TP_STATE_CONSTANT) continue;
        char path[4096];
        int n = snprintf(path, sizeof path, "%s/%s.npy", dir, s.items[i].name);
        if (n < 0 || (size_t)n >= sizeof path) die(EXIT_IO, "state '%s': path too long", s.items[i].name);
        for (char *c = path + strlen(dir) + 1; *c; c++)
            if (*c == '/') *c = '_';
        st = tp_npy_save(path, s.items[i].tensor);
        if (st != TP_OK) die_status(st, "state");
        written++;
    }
    tp_named_state_free(&s);
    return written;
}

static int cmd_run(int argc, char **argv) {
    const char *file = NULL, *name = NULL, *out_dir = NULL, *state_dir = NULL;
    int repeat = 1, threads = 0;
    bool example = false;
    tp_cpu_level level = TP_CPU_AUTO;
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
        } else if (strcmp(argv[i], "--example") == 0) {
            example = true;
        } else if (strcmp(argv[i], "--state-out") == 0) {
            state_dir = option_value("run", argc, argv, &i);
        } else if (strcmp(argv[i], "--repeat") == 0) {
            repeat = (int)parse_long("run", "--repeat", option_value("run", argc, argv, &i), 1, INT_MAX);
        } else if (strcmp(argv[i], "--threads") == 0) {
            threads = (int)parse_long("run", "--threads", option_value("run", argc, argv, &i), 1, 256);
        } else if (strcmp(argv[i], "--cpu-level") == 0) {
            level = parse_cpu_level("run", option_value("run", argc, argv, &i));
        } else if (argv[i][0] == '-') {
            usage_error(run_help, "unknown option '%s'", argv[i]);
        } else if (!file) {
            file = argv[i];
        } else {
            inputs[n_inputs++] = argv[i];
        }
    }
    if (!file) usage_error(run_help, "%s", "missing FILE");
    /* before running: a bad --out or --state-out fails fast */
    if (out_dir) prepare_dir("--out", out_dir);
    if (state_dir) prepare_dir("--state-out", state_dir);
    tp_archive *a = load_or_die(file);
    tp_program *p = find_program_or_die(a, file, name);
    warn_cpu_level("run", level);
    bound_inputs b;
    bind_inputs(run_help, p, inputs, n_inputs, example, &b);
    if (b.examples && n_user_inputs(p) > 0) printf("inputs: the archive's example inputs\n");
    tp_run *r = run_new_or_die(p, threads, level, NULL, NULL);
    tp_value result = tp_value_none();
    double total = 0;
    for (int k = 0; k < repeat; k++) {
        tp_value_clear(&result);
        double t0 = now_ms();
        tp_status st = tp_run_call(r, b.pos, b.n_pos, &b.kwargs, &result);
        total += now_ms() - t0;
        if (st != TP_OK) die(EXIT_INVALID, "run: %s", tp_last_error());
    }
    tp_value leaves = tp_value_none();
    tp_treespec *spec = NULL;
    if (tp_pytree_flatten(&result, &leaves, &spec) != TP_OK) die(EXIT_IO, "out of memory");
    for (int64_t i = 0; i < tp_value_len(&leaves); i++) {
        const tp_value *v = tp_value_at(&leaves, i);
        char label[64];
        snprintf(label, sizeof label, "output_%lld", (long long)i);
        tp_tensor *t = NULL;
        if (v->kind != TP_VAL_TENSOR) {
            char repr[128];
            tp_value_repr(v, repr, sizeof repr);
            printf("%s: %s\n", label, repr);
            t = scalar_tensor(v);
            if (!t && out_dir)
                fprintf(stderr, "%s: %s is a %s: not written (no .npy form)\n", prog_name, label,
                        tp_value_kind_name(v->kind));
        } else {
            summarise(label, v->u.tensor);
            t = tp_tensor_retain(v->u.tensor);
        }
        if (out_dir && t) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s.npy", out_dir, label);
            tp_status st = tp_npy_save(path, t);
            if (st != TP_OK) die_status(st, "output");
        }
        tp_tensor_free(t);
    }
    printf("time: %.3f ms%s\n", total / repeat, repeat > 1 ? " (mean)" : "");
    if (state_dir) {
        int n = write_state(p, state_dir);
        printf("state: %d tensor%s written to %s\n", n, n == 1 ? "" : "s", state_dir);
    }
    tp_treespec_free(spec);
    tp_value_clear(&leaves);
    tp_value_clear(&result);
    tp_run_free(r);
    bound_inputs_clear(&b);
    free(inputs);
    tp_archive_free(a);
    return 0;
}

/* ---- bench -------------------------------------------------------------- */

/* Per (op, variant): steps run and their time, summed over the timed calls. */
typedef struct op_time {
    char *op, *variant, *node; /* node: NULL unless timed per node */
    int64_t calls;
    double ms;
    double spread; /* tp_profile_event.spread_ms, summed */
} op_time;

typedef struct profile_acc {
    bool active; /* only the timed calls are counted */
    bool per_node; /* one row per node (--profile-nodes), else per op and variant */
    op_time *items;
    int n, cap;
    int next; /* where the next event's row likely is: steps come in the same order every call */
} profile_acc;

static bool op_time_is(const op_time *o, const char *op, const char *variant, const char *node) {
    return strcmp(o->op, op) == 0 && strcmp(o->variant, variant) == 0 && (!node || strcmp(o->node, node) == 0);
}

static void profile_cb(void *user, const tp_profile_event *ev) {
    profile_acc *acc = user;
    if (!acc->active) return;
    const char *op = ev->op ? ev->op : "?", *variant = ev->variant ? ev->variant : "?";
    const char *node = acc->per_node ? (ev->node ? ev->node : "?") : NULL;
    /* per node, a whole-table search per event would be quadratic in the steps */
    for (int k = 0; k < acc->n; k++) {
        int i = (acc->next + k) % acc->n;
        op_time *o = &acc->items[i];
        if (op_time_is(o, op, variant, node)) {
            o->calls++;
            o->ms += ev->ms;
            o->spread += ev->spread_ms;
            acc->next = (i + 1) % acc->n;
            return;
        }
    }
    if (acc->n == acc->cap) {
        int cap = acc->cap ? acc->cap * 2 : 16;
        op_time *items = realloc(acc->items, (size_t)cap * sizeof *items);
        if (!items) die(EXIT_IO, "out of memory");
        acc->items = items;
        acc->cap = cap;
    }
    op_time *o = &acc->items[acc->n];
    o->op = strdup(op);
    o->variant = strdup(variant);
    o->node = node ? strdup(node) : NULL;
    if (!o->op || !o->variant || (node && !o->node)) die(EXIT_IO, "out of memory");
    o->calls = 1;
    o->ms = ev->ms;
    o->spread = ev->spread_ms;
    acc->n++;
    acc->next = acc->n; /* wraps to 0 in the search */
}

static int by_time_desc(const void *a, const void *b) {
    const op_time *x = a, *y = b;
    if (x->ms != y->ms) return x->ms > y->ms ? -1 : 1;
    int c = strcmp(x->op, y->op);
    return c ? c : strcmp(x->variant, y->variant);
}

/* ms with about four significant digits (0.0002453, 1.234, 123.4). */
static const char *fmt_ms(double ms, char *buf, size_t size) {
    int decimals = ms > 0 ? 3 - (int)floor(log10(ms)) : 3;
    snprintf(buf, size, "%.*f", decimals < 0 ? 0 : decimals > 9 ? 9 : decimals, ms);
    return buf;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* What one timed call needs. */
typedef struct bench_call {
    tp_run *r;
    tp_tensor **exec_in; /* user inputs for tp_run_execute (borrowed) */
    int n_exec;
    bool use_execute;
    const bound_inputs *b; /* arguments for tp_run_call */
    tp_value result;       /* tp_run_call's result, kept until the next call */
    int64_t calls;
} bench_call;

/* One call through the chosen entry point. On the first call a program
 * whose user outputs are not all tensors moves over to tp_run_call. */
static void bench_once(bench_call *c) {
    tp_status st;
    if (c->use_execute) {
        st = tp_run_execute(c->r, c->exec_in, c->n_exec, NULL, 0);
        if (st == TP_ERR_UNSUPPORTED && c->calls == 0) {
            c->use_execute = false;
            st = tp_run_call(c->r, c->b->pos, c->b->n_pos, &c->b->kwargs, &c->result);
        }
    } else {
        tp_value_clear(&c->result);
        st = tp_run_call(c->r, c->b->pos, c->b->n_pos, &c->b->kwargs, &c->result);
    }
    if (st != TP_OK) die(EXIT_INVALID, "bench: %s", tp_last_error());
    c->calls++;
}

enum { BENCH_MIN_AUTO_RUNS = 10, BENCH_MAX_AUTO_RUNS = 1000000 };

static int cmd_bench(int argc, char **argv) {
    const char *file = NULL, *name = NULL;
    int threads = 0, warmup = 3, runs = 0;
    double min_time = 1.0;
    bool profile = false, per_node = false, as_json = false, example = false;
    tp_cpu_level level = TP_CPU_AUTO;
    const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    int n_inputs = 0;
    if (!inputs) die(EXIT_IO, "out of memory");
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (is_help(o)) {
            fputs(bench_help, stdout);
            free(inputs);
            return 0;
        } else if (strcmp(o, "--program") == 0) {
            name = option_value("bench", argc, argv, &i);
        } else if (strcmp(o, "--threads") == 0) {
            threads = (int)parse_long("bench", o, option_value("bench", argc, argv, &i), 1, 256);
        } else if (strcmp(o, "--warmup") == 0) {
            warmup = (int)parse_long("bench", o, option_value("bench", argc, argv, &i), 0, 1000000);
        } else if (strcmp(o, "--runs") == 0) {
            runs = (int)parse_long("bench", o, option_value("bench", argc, argv, &i), 1, 10000000);
        } else if (strcmp(o, "--min-time") == 0) {
            min_time = parse_seconds("bench", o, option_value("bench", argc, argv, &i));
        } else if (strcmp(o, "--cpu-level") == 0) {
            level = parse_cpu_level("bench", option_value("bench", argc, argv, &i));
        } else if (strcmp(o, "--profile") == 0) {
            profile = true;
        } else if (strcmp(o, "--profile-nodes") == 0) {
            profile = per_node = true;
        } else if (strcmp(o, "--json") == 0) {
            as_json = true;
        } else if (strcmp(o, "--example") == 0) {
            example = true;
        } else if (o[0] == '-') {
            usage_error(bench_help, "unknown option '%s'", o);
        } else if (!file) {
            file = o;
        } else {
            inputs[n_inputs++] = o;
        }
    }
    if (!file) usage_error(bench_help, "%s", "missing FILE");
    tp_archive *a = load_or_die(file);
    tp_program *p = find_program_or_die(a, file, name);
    const char *prog = name ? name : tp_archive_program_name(a, 0);
    warn_cpu_level("bench", level);
    bound_inputs b;
    bind_inputs(bench_help, p, inputs, n_inputs, example, &b);

    profile_acc acc = {0};
    acc.per_node = per_node;
    tp_run *r = run_new_or_die(p, threads, level, profile ? profile_cb : NULL, &acc);
    int n_exec = 0;
    tp_tensor **exec_in = tensor_inputs(p, &b, &n_exec);
    bench_call c = {.r = r, .exec_in = exec_in, .n_exec = n_exec, .use_execute = exec_in != NULL, .b = &b,
                    .result = tp_value_none()};
    /* the first call plans (and counts as a warm-up call even with --warmup
     * 0, so the entry point is settled before timing) */
    bench_once(&c);
    for (int k = 1; k < warmup; k++) bench_once(&c);

    int cap = runs ? runs : 1024, n = 0;
    double *lat = malloc((size_t)cap * sizeof *lat);
    if (!lat) die(EXIT_IO, "out of memory");
    acc.active = true;
    double start = now_ms(), budget_ms = min_time * 1e3;
    for (;;) {
        if (runs ? n >= runs
                 : n >= BENCH_MAX_AUTO_RUNS || (n >= BENCH_MIN_AUTO_RUNS && now_ms() - start >= budget_ms))
            break;
        if (n == cap) {
            cap *= 2;
            double *grown = realloc(lat, (size_t)cap * sizeof *lat);
            if (!grown) die(EXIT_IO, "out of memory");
            lat = grown;
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        bench_once(&c);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        lat[n++] = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    }
    acc.active = false;

    double sum = 0;
    for (int k = 0; k < n; k++) sum += lat[k];
    qsort(lat, (size_t)n, sizeof *lat, by_value);
    double median = n % 2 ? lat[n / 2] : (lat[n / 2 - 1] + lat[n / 2]) / 2;
    int p90_rank = (int)ceil(0.9 * n); /* nearest rank */
    double p90 = lat[(p90_rank < 1 ? 1 : p90_rank) - 1], min = lat[0], mean = sum / n;
    double throughput = sum > 0 ? n / (sum / 1e3) : 0;

    tp_run_stats stats;
    tp_run_get_stats(r, &stats);
    int used_threads = threads ? threads : tp_get_num_threads();
    struct rusage ru;
    int64_t peak_rss = getrusage(RUSAGE_SELF, &ru) == 0 ? (int64_t)ru.ru_maxrss * 1024 : -1; /* Linux: KiB */
    const char *entry = c.use_execute ? "tp_run_execute" : "tp_run_call";
    double op_total = 0;
    for (int k = 0; k < acc.n; k++) op_total += acc.items[k].ms;
    if (acc.n) qsort(acc.items, (size_t)acc.n, sizeof *acc.items, by_time_desc);

    if (as_json) {
        json_t *o = json_object();
        json_object_set_new(o, "program", json_string(prog));
        json_object_set_new(o, "entry", json_string(entry));
        json_object_set_new(o, "example_inputs", json_boolean(b.examples && n_user_inputs(p) > 0));
        json_object_set_new(o, "median_ms", json_real(median));
        json_object_set_new(o, "p90_ms", json_real(p90));
        json_object_set_new(o, "min_ms", json_real(min));
        json_object_set_new(o, "mean_ms", json_real(mean));
        json_object_set_new(o, "throughput_per_s", json_real(throughput));
        json_object_set_new(o, "runs", json_integer(n));
        json_object_set_new(o, "warmup", json_integer(warmup));
        json_object_set_new(o, "threads", json_integer(used_threads));
        json_object_set_new(o, "cpu_level", json_string(tp_cpu_level_name(stats.cpu_level)));
        json_object_set_new(o, "arena_bytes", json_integer((json_int_t)stats.arena_bytes));
        json_object_set_new(o, "packed_bytes", json_integer((json_int_t)stats.packed_bytes));
        json_object_set_new(o, "steps", json_integer(stats.n_steps));
        json_object_set_new(o, "fast_steps", json_integer(stats.n_fast));
        json_object_set_new(o, "reference_steps", json_integer(stats.n_reference));
        json_object_set_new(o, "fused_steps", json_integer(stats.n_fused));
        json_object_set_new(o, "in_place_steps", json_integer(stats.n_in_place));
        json_object_set_new(o, "peak_rss_bytes", json_integer(peak_rss));
        if (profile) {
            json_t *ops = json_array();
            for (int k = 0; k < acc.n; k++) {
                json_t *item = json_pack("{s:s,s:s,s:f,s:I,s:f}", "op", acc.items[k].op, "variant",
                                         acc.items[k].variant, "ms", acc.items[k].ms / n, "calls",
                                         (json_int_t)(acc.items[k].calls / n), "spread_ms", acc.items[k].spread / n);
                if (item && acc.items[k].node) json_object_set_new(item, "node", json_string(acc.items[k].node));
                json_array_append_new(ops, item);
            }
            json_object_set_new(o, "ops", ops);
        }
        char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
        if (!text) die(EXIT_IO, "out of memory");
        puts(text);
        tp_free(text);
        json_decref(o);
    } else {
        char rss[32];
        format_bytes(peak_rss, rss, sizeof rss);
        printf("program '%s': %s, %d thread%s, cpu level %s\n", prog, entry, used_threads,
               used_threads == 1 ? "" : "s", tp_cpu_level_name(stats.cpu_level));
        if (b.examples && n_user_inputs(p) > 0) printf("inputs:     the archive's example inputs\n");
        printf("runs:       %d timed after %d warm-up\n", n, warmup);
        char m1[32], m2[32], m3[32], m4[32];
        printf("latency:    median %s ms, p90 %s ms, min %s ms, mean %s ms\n", fmt_ms(median, m1, sizeof m1),
               fmt_ms(p90, m2, sizeof m2), fmt_ms(min, m3, sizeof m3), fmt_ms(mean, m4, sizeof m4));
        printf("throughput: %.1f calls/s\n", throughput);
        printf("arena: %zu bytes, packed weights: %zu bytes, steps: %" PRId64 " (%" PRId64 " fast, %" PRId64
               " reference, %" PRId64 " fused, %" PRId64 " in place)\n",
               stats.arena_bytes, stats.packed_bytes, stats.n_steps, stats.n_fast, stats.n_reference, stats.n_fused,
               stats.n_in_place);
        printf("peak RSS:   %" PRId64 " bytes (%s)\n", peak_rss, rss);
        if (profile) {
            printf("profile (per call; latencies above include the profiling overhead):\n");
            double spread_total = 0;
            for (int k = 0; k < acc.n; k++) spread_total += acc.items[k].spread;
            printf("  %-28s %-10s %8s %12s %7s %12s%s\n", "op", "variant", "calls", "ms", "%", "spread ms",
                   per_node ? "  node" : "");
            for (int k = 0; k < acc.n; k++) {
                const op_time *t = &acc.items[k];
                printf("  %-28s %-10s %8" PRId64 " %12s %6.1f%% %12s%s%s\n", t->op, t->variant, t->calls / n,
                       fmt_ms(t->ms / n, m1, sizeof m1), op_total > 0 ? 100 * t->ms / op_total : 0.0,
                       fmt_ms(t->spread / n, m2, sizeof m2), t->node ? "  " : "", t->node ? t->node : "");
            }
            printf("  %-28s %-10s %8s %12s %6.1f%% %12s\n", "total", "", "", fmt_ms(op_total / n, m1, sizeof m1),
                   op_total > 0 ? 100.0 : 0.0, fmt_ms(spread_total / n, m2, sizeof m2));
        }
    }
    for (int k = 0; k < acc.n; k++) {
        free(acc.items[k].op);
        free(acc.items[k].variant);
        free(acc.items[k].node);
    }
    free(acc.items);
    free(lat);
    free(exec_in);
    tp_value_clear(&c.result);
    tp_run_free(r);
    bound_inputs_clear(&b);
    free(inputs);
    tp_archive_free(a);
    return 0;
}

/* ---- decompose ------------------------------------------------------------ */

/* Save progs (one per program of a, same names) to out, with a's extra
 * files (tensorplay's format) or as PyTorch's archive; dies on failure. */
static void save_programs(const char *out, tp_archive *a, tp_program **progs, bool torch) {
    int n = tp_archive_num_programs(a);
    tp_archive_entry *entries = calloc((size_t)n + 1, sizeof *entries);
    tp_extra_file *extra = calloc((size_t)tp_archive_num_extra(a) + 1, sizeof *extra);
    if (!entries || !extra) die(EXIT_IO, "out of memory");
    for (int i = 0; i < n; i++) {
        entries[i].name = tp_archive_program_name(a, i);
        entries[i].program = progs[i];
    }
    for (int i = 0; i < tp_archive_num_extra(a); i++) {
        extra[i].name = tp_archive_extra_name(a, i);
        extra[i].data = tp_archive_extra_data(a, i, &extra[i].size);
    }
    tp_status st = torch ? tp_archive_save_torch(out, entries, n)
                         : tp_archive_save(out, entries, n, extra, tp_archive_num_extra(a));
    if (st != TP_OK) die_status(st, out);
    printf("wrote %s (%d program%s%s)\n", out, n, n == 1 ? "" : "s", torch ? ", PyTorch's format" : "");
    free(entries);
    free(extra);
}

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
    tp_program **made = calloc((size_t)n + 1, sizeof *made);
    if (!made) die(EXIT_IO, "out of memory");
    for (int i = 0; i < n; i++) {
        st = tp_program_run_decompositions(tp_archive_program(a, i), table, &made[i]);
        if (st != TP_OK) die(EXIT_INVALID, "decompose '%s': %s", tp_archive_program_name(a, i), tp_last_error());
    }
    save_programs(out, a, made, false);
    for (int i = 0; i < n; i++) tp_program_free(made[i]);
    free(made);
    tp_decomp_table_free(table);
    tp_archive_free(a);
    return 0;
}

/* ---- save ------------------------------------------------------------------ */

static int cmd_save(int argc, char **argv) {
    const char *file = NULL, *out = NULL, *format = "tensorplay";
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(save_help, stdout);
            return 0;
        } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc) {
            format = argv[++i];
        } else if (argv[i][0] == '-') {
            usage_error(save_help, "unknown option '%s'", argv[i]);
        } else if (!file) {
            file = argv[i];
        } else {
            usage_error(save_help, "unexpected argument '%s'", argv[i]);
        }
    }
    if (!file) usage_error(save_help, "%s", "missing FILE");
    if (!out) usage_error(save_help, "%s", "missing -o OUT");
    if (strcmp(format, "tensorplay") != 0 && strcmp(format, "torch") != 0)
        usage_error(save_help, "unknown format '%s'", format);
    tp_archive *a = load_or_die(file);
    int n = tp_archive_num_programs(a);
    tp_program **progs = calloc((size_t)n + 1, sizeof *progs);
    if (!progs) die(EXIT_IO, "out of memory");
    for (int i = 0; i < n; i++) progs[i] = tp_archive_program(a, i);
    save_programs(out, a, progs, strcmp(format, "torch") == 0);
    free(progs);
    tp_archive_free(a);
    return 0;
}

/* ---- convert ------------------------------------------------------------ */

static int cmd_convert(int argc, char **argv) {
    const char *file = NULL, *out = NULL;
    bool report_only = false;
    tp_onnx_dim_range *ranges = calloc((size_t)argc + 1, sizeof *ranges);
    int n_ranges = 0, n_values = 0;
    const char **value_names = calloc((size_t)argc + 1, sizeof *value_names);
    tp_tensor **values = calloc((size_t)argc + 1, sizeof *values);
    char **value_keys = calloc((size_t)argc + 1, sizeof *value_keys);
    if (!ranges || !value_names || !values || !value_keys) die(EXIT_IO, "out of memory");
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
        } else if (strcmp(argv[i], "--input-value") == 0 && i + 1 < argc) {
            const char *spec = argv[++i], *eq = strchr(spec, '=');
            if (!eq || eq == spec || !eq[1]) usage_error(convert_help, "bad --input-value '%s' (expected NAME=FILE.npy)", spec);
            value_keys[n_values] = strndup(spec, (size_t)(eq - spec));
            if (!value_keys[n_values]) die(EXIT_IO, "out of memory");
            tp_status lst = tp_npy_load(eq + 1, &values[n_values]);
            if (lst != TP_OK) die(lst == TP_ERR_IO ? EXIT_IO : EXIT_INVALID, "--input-value %s: %s", spec, tp_last_error());
            value_names[n_values] = value_keys[n_values];
            n_values++;
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
    tp_onnx_options opts = {.n_dim_ranges = n_ranges, .dim_ranges = ranges, .report_all = report_only,
                            .n_input_values = n_values, .input_value_names = value_names, .input_values = values};
    tp_onnx_report report = {0};
    tp_program *p = NULL;
    tp_status st = tp_onnx_load(file, &opts, &p, &report);
    for (int i = 0; i < n_values; i++) {
        tp_tensor_free(values[i]);
        free(value_keys[i]);
    }
    free(values);
    free(value_keys);
    free(value_names);
    if (report_only) {
        tp_onnx_report_print(&report, stdout);
        int issues = report.n_issues;
        tp_onnx_report_clear(&report);
        tp_program_free(p);
        free(ranges);
        return issues || st != TP_OK ? EXIT_INVALID : 0;
    }
    if (st != TP_OK && file_kind(file) == 'z')
        die(EXIT_INVALID, "%s is an archive (.pt2), not an ONNX model: it needs no converting ('tpexport inspect %s')",
            file, file);
    if (st != TP_OK && report.n_need_constant > 0) { /* name the inputs to specialise */
        const char *msg = tp_last_error();
        size_t n = strlen(file);
        if (strncmp(msg, file, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ') msg += n + 2;
        fprintf(stderr, "tpexport: %s: %s\n", file, msg);
        for (int i = 0; i < report.n_need_constant; i++)
            fprintf(stderr, "tpexport: graph input '%s' is read as shape data: give its value with --input-value %s=FILE.npy\n",
                    report.need_constant[i], report.need_constant[i]);
        tp_onnx_report_clear(&report);
        free(ranges);
        exit(exit_code_for(st));
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
        printf("tpexport %s\n", tp_version());
        return 0;
    }
    if (strcmp(cmd, "inspect") == 0) return cmd_inspect(argc - 2, argv + 2);
    if (strcmp(cmd, "print") == 0) return cmd_print(argc - 2, argv + 2);
    if (strcmp(cmd, "verify") == 0) return cmd_verify(argc - 2, argv + 2);
    if (strcmp(cmd, "run") == 0) return cmd_run(argc - 2, argv + 2);
    if (strcmp(cmd, "bench") == 0) return cmd_bench(argc - 2, argv + 2);
    if (strcmp(cmd, "decompose") == 0) return cmd_decompose(argc - 2, argv + 2);
    if (strcmp(cmd, "save") == 0) return cmd_save(argc - 2, argv + 2);
    if (strcmp(cmd, "convert") == 0) return cmd_convert(argc - 2, argv + 2);
    usage_error(main_help, "unknown command '%s'", cmd);
    return EXIT_USAGE;
}
