/*
 * eltwise_bench.c - memory-bound kernels against the machine's memory
 * bandwidth, and their speed-up on 2 threads.
 *
 * One-node programs on [rows, 4096] float tensors: by default 16M floats
 * (64 MiB each, beyond the L3); `eltwise_bench 256` runs 4 MiB tensors,
 * which stay in a 32 MiB L3, so the 2-thread column shows the kernels'
 * own scaling rather than the DRAM's:
 * add (2 reads + 1 write), relu, gelu (1 read + 1 write), sum over the last
 * dim and softmax over rows of 4096. Each runs through a tp_run
 * (tp_run_execute, allocation free) at 1 and 2 threads; the bandwidth
 * reference is memcpy of the same bytes in the same process (a read and a
 * write stream per byte, as the kernels have). Prints medians, GB/s, the
 * ratio to memcpy and the 2-thread speed-up; memcpy split over 2 threads
 * shows how far the machine's own bandwidth scales. Not a test: timing is noisy on
 * a shared machine, so compare ratios within one run and repeat.
 *
 * Build (from the repository root, after building the library):
 *   gcc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -Iinclude bench/eltwise_bench.c build/libtpexport.a \
 *       $(pkg-config --libs jansson libprotobuf-c zlib) -ldnnl -lgomp -lm -lpthread -o build/eltwise_bench
 * (-ldnnl -lgomp where the library was built with oneDNN, as `make deps` sets up)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpexport/tpexport.h"
#include "tpexport/run.h"

#define COLS 4096
#define MAX_REPEATS 101

/* rows of 4096 floats; the first argument sets it (default 4096: 64 MiB) */
static int64_t g_rows = 4096;
/* timed calls per median: more for small tensors, whose calls are short */
static int g_repeats = 15;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what) {
    fprintf(stderr, "eltwise_bench: %s: %s\n", what, tp_last_error());
    exit(1);
}

/* memcpy of one half of the buffer on a second thread while the caller
 * copies the other: the bandwidth two cores get, for the 2-thread column.
 * The helper thread is started once and spins on a job counter, as the
 * library's pool does between steps, so small copies time the copy rather
 * than a thread start. */
typedef struct copy_job {
    char *dst;
    const char *src;
    size_t n;
    atomic_int posted, done;
} copy_job;

static copy_job g_job;

static void *copy_helper(void *arg) {
    (void)arg;
    for (int seen = 0;;) {
        int p;
        while ((p = atomic_load(&g_job.posted)) == seen) {
        }
        if (p < 0) return NULL;
        seen = p;
        memcpy(g_job.dst, g_job.src, g_job.n);
        atomic_store(&g_job.done, p);
    }
}

static double memcpy2_time(char *dst, const char *src, size_t bytes) {
    size_t h = bytes / 2;
    g_job.dst = dst + h;
    g_job.src = src + h;
    g_job.n = bytes - h;
    double t0 = now_s();
    int p = atomic_load(&g_job.posted) + 1;
    atomic_store(&g_job.posted, p);
    memcpy(dst, src, h);
    while (atomic_load(&g_job.done) != p) {
    }
    return now_s() - t0;
}

static tp_node *placeholder(tp_graph *g, const char *name) {
    tp_tensor *m;
    if (tp_tensor_meta(TP_FLOAT32, 2, (const int64_t[]){g_rows, COLS}, &m) != TP_OK) die("meta");
    tp_value v = tp_value_tensor(m);
    tp_node *n;
    if (tp_graph_placeholder(g, name, &v, &n) != TP_OK) die("placeholder");
    tp_value_clear(&v);
    return n;
}

/* A program out = op(x[, y], extra int arg) over [g_rows, COLS] float32 inputs. */
static tp_program *make_program(tp_op op, int n_inputs, int int_arg) {
    tp_graph *g;
    tp_signature *s;
    if (tp_graph_new(&g) != TP_OK || tp_signature_new(&s) != TP_OK) die("new");
    const char *names[2] = {"x", "y"};
    tp_value args;
    int n_args = n_inputs + (int_arg != 0);
    if (tp_value_tuple(n_args, &args) != TP_OK) die("tuple");
    for (int i = 0; i < n_inputs; i++) {
        args.u.seq.items[i] = tp_value_node(placeholder(g, names[i]));
        if (tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor(names[i]), NULL, TP_PERSISTENT_UNSET) != TP_OK)
            die("input");
    }
    if (int_arg) {
        if (op == TP_OP_SUM) {
            tp_value dims;
            if (tp_value_int_list((const int64_t[]){-1}, 1, &dims) != TP_OK) die("dims");
            args.u.seq.items[n_inputs] = dims;
        } else {
            args.u.seq.items[n_inputs] = tp_value_int(-1);
        }
    }
    tp_node *out;
    if (tp_graph_call_function(g, op, &args, NULL, &out) != TP_OK) die("call");
    tp_value_clear(&args);
    tp_value ov;
    if (tp_value_tuple(1, &ov) != TP_OK) die("tuple");
    ov.u.seq.items[0] = tp_value_node(out);
    if (tp_graph_output(g, &ov, NULL) != TP_OK) die("output");
    tp_value_clear(&ov);
    if (tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(out)), NULL) != TP_OK) die("out");
    tp_program *p;
    if (tp_program_new(g, s, &p) != TP_OK) die("program");
    return p;
}

static double median_time(tp_run *r, tp_tensor **in, int n_in) {
    double t[MAX_REPEATS];
    if (tp_run_execute(r, in, n_in, NULL, 0) != TP_OK) die("execute");
    for (int i = 0; i < g_repeats; i++) {
        double t0 = now_s();
        if (tp_run_execute(r, in, n_in, NULL, 0) != TP_OK) die("execute");
        t[i] = now_s() - t0;
    }
    qsort(t, g_repeats, sizeof *t, cmp_double);
    return t[g_repeats / 2];
}

int main(int argc, char **argv) {
    if (argc > 1) {
        g_rows = strtoll(argv[1], NULL, 10);
        if (g_rows < 1 || g_rows > 65536) {
            fprintf(stderr, "usage: eltwise_bench [rows of 4096 floats, 1..65536]\n");
            return 2;
        }
    }
    if (g_rows < 1024) g_repeats = MAX_REPEATS;
    size_t n = (size_t)g_rows * COLS, bytes = n * sizeof(float);
    tp_tensor *x, *y;
    if (tp_tensor_empty(TP_FLOAT32, 2, (const int64_t[]){g_rows, COLS}, &x) != TP_OK ||
        tp_tensor_empty(TP_FLOAT32, 2, (const int64_t[]){g_rows, COLS}, &y) != TP_OK)
        die("tensors");
    float *xd = tp_tensor_data(x), *yd = tp_tensor_data(y);
    for (size_t i = 0; i < n; i++) {
        xd[i] = (float)((i * 2654435761u) % 1000) / 250.0f - 2.0f;
        yd[i] = (float)((i * 40503u) % 1000) / 500.0f - 1.0f;
    }
    /* memcpy reference: one read and one write stream of `bytes` */
    char *dst = malloc(bytes);
    if (!dst) return 1;
    memcpy(dst, xd, bytes);
    double mt[MAX_REPEATS];
    for (int i = 0; i < g_repeats; i++) {
        double t0 = now_s();
        memcpy(dst, xd, bytes);
        mt[i] = now_s() - t0;
    }
    qsort(mt, g_repeats, sizeof *mt, cmp_double);
    double memcpy_s = mt[g_repeats / 2], stream_gbs = 2.0 * (double)bytes / memcpy_s / 1e9;
    pthread_t helper;
    if (pthread_create(&helper, NULL, copy_helper, NULL) != 0) die("pthread_create");
    memcpy2_time(dst, (const char *)xd, bytes);
    for (int i = 0; i < g_repeats; i++) mt[i] = memcpy2_time(dst, (const char *)xd, bytes);
    atomic_store(&g_job.posted, -1);
    pthread_join(helper, NULL);
    qsort(mt, g_repeats, sizeof *mt, cmp_double);
    double memcpy2_s = mt[g_repeats / 2];
    printf("memcpy of %zu KiB: %.3f ms (%.1f GB/s read+write); on 2 threads %.3f ms (speed-up %.2fx)\n", bytes >> 10,
           memcpy_s * 1e3, stream_gbs, memcpy2_s * 1e3, memcpy_s / memcpy2_s);
    struct {
        const char *name;
        tp_op op;
        int n_in, int_arg;
        double streams; /* bytes moved / tensor bytes */
    } cases[] = {
        {"add", TP_OP_ADD, 2, 0, 3}, {"relu", TP_OP_RELU, 1, 0, 2}, {"gelu", TP_OP_GELU, 1, 0, 2},
        {"silu", TP_OP_SILU, 1, 0, 2},
        {"sum(-1)", TP_OP_SUM, 1, 1, 1}, {"softmax(-1)", TP_OP_SOFTMAX, 1, 1, 2},
    };
    printf("%-12s %10s %10s %8s %12s %10s\n", "op", "1t ms", "2t ms", "GB/s", "vs memcpy", "speed-up");
    tp_tensor *in[2] = {x, y};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tp_program *p = make_program(cases[c].op, cases[c].n_in, cases[c].int_arg);
        double t[2];
        for (int th = 1; th <= 2; th++) {
            tp_run_options opt;
            tp_run_options_init(&opt);
            opt.num_threads = th;
            tp_run *r;
            if (tp_run_new(p, &opt, &r) != TP_OK) die("run");
            t[th - 1] = median_time(r, in, cases[c].n_in);
            tp_run_free(r);
        }
        double moved = cases[c].streams * (double)bytes, gbs = moved / t[0] / 1e9;
        /* the time memcpy would take for the same bytes */
        double ideal = moved / (stream_gbs * 1e9);
        printf("%-12s %10.3f %10.3f %8.1f %11.2fx %9.2fx\n", cases[c].name, t[0] * 1e3, t[1] * 1e3, gbs, t[0] / ideal,
               t[0] / t[1]);
        tp_program_free(p);
    }
    free(dst);
    tp_tensor_free(x);
    tp_tensor_free(y);
    return 0;
}
