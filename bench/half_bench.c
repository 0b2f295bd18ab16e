/*
 * half_bench.c - bfloat16 / float16 matrix products against float32 ones.
 *
 * One-node programs y = linear(x, W, b) with W and b parameters (packed at
 * plan time), in float32, bfloat16 and float16, at the benchmark models'
 * shapes (MLP 32x784x512, ViT-S 197x384x1536 and 197x1536x384, GPT-2
 * 128x256x1024) and 1024 cubed; each through a tp_run (tp_run_execute, no
 * allocations) at 1 and 2 threads, and the bfloat16 reference kernel once
 * at one shape, the path such programs took before. Prints medians and
 * GFLOP/s. Not a test: timing is noisy on a shared machine, so compare
 * within one run and repeat.
 *
 * Build (from the repository root, after building the library):
 *   gcc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -Iinclude bench/half_bench.c build/libtpexport.a \
 *       $(pkg-config --libs jansson libprotobuf-c zlib) -ldnnl -lgomp -lm -lpthread -o build/half_bench
 * (-ldnnl -lgomp where the library was built with oneDNN, as `make deps` sets up)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpexport/run.h"
#include "tpexport/tpexport.h"

#define REPEATS 21

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static tp_tensor *rand_tensor(tp_dtype dt, int ndim, const int64_t *sizes, uint32_t seed) {
    tp_tensor *f = NULL, *t = NULL;
    if (tp_tensor_empty(TP_FLOAT32, ndim, sizes, &f) != TP_OK) return NULL;
    float *d = tp_tensor_data(f);
    for (int64_t i = 0; i < tp_tensor_numel(f); i++) {
        seed = seed * 1664525u + 1013904223u;
        d[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
    if (tp_tensor_to(f, dt, &t) != TP_OK) t = NULL;
    tp_tensor_free(f);
    return t;
}

static tp_node *placeholder(tp_graph *g, const char *name, tp_dtype dt, int ndim, const int64_t *sizes) {
    tp_tensor *m = NULL;
    tp_node *n = NULL;
    if (tp_tensor_meta(dt, ndim, sizes, &m) != TP_OK) return NULL;
    tp_value v = tp_value_tensor(m);
    if (tp_graph_placeholder(g, name, &v, &n) != TP_OK) n = NULL;
    tp_value_clear(&v);
    return n;
}

/* linear(x [M, K], p_w [N, K], p_b [N]) in dt */
static tp_program *make_linear(tp_dtype dt, int64_t m, int64_t k, int64_t n) {
    tp_graph *g = NULL;
    tp_signature *s = NULL;
    tp_program *p = NULL;
    if (tp_graph_new(&g) != TP_OK) return NULL;
    tp_node *w = placeholder(g, "p_w", dt, 2, (int64_t[]){n, k});
    tp_node *b = placeholder(g, "p_b", dt, 1, (int64_t[]){n});
    tp_node *x = placeholder(g, "x", dt, 2, (int64_t[]){m, k});
    tp_value args, outv;
    tp_node *y = NULL;
    if (!w || !b || !x || tp_value_tuple(3, &args) != TP_OK) goto fail;
    args.u.seq.items[0] = tp_value_node(x);
    args.u.seq.items[1] = tp_value_node(w);
    args.u.seq.items[2] = tp_value_node(b);
    tp_status st = tp_graph_call_function(g, TP_OP_LINEAR, &args, NULL, &y);
    tp_value_clear(&args);
    outv = tp_value_node(y);
    if (st != TP_OK || tp_graph_output(g, &outv, NULL) != TP_OK || tp_signature_new(&s) != TP_OK) goto fail;
    if (tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_w"), "w", TP_PERSISTENT_UNSET) != TP_OK ||
        tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_b"), "b", TP_PERSISTENT_UNSET) != TP_OK ||
        tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET) != TP_OK ||
        tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(y)), NULL) != TP_OK)
        goto fail;
    if (tp_program_new(g, s, &p) != TP_OK) return NULL; /* takes g and s either way */
    tp_tensor *tw = rand_tensor(dt, 2, (int64_t[]){n, k}, 1), *tb = rand_tensor(dt, 1, (int64_t[]){n}, 2);
    bool ok = tw && tb && tp_program_set_state(p, "w", TP_STATE_PARAMETER, tw, true) == TP_OK &&
              tp_program_set_state(p, "b", TP_STATE_PARAMETER, tb, true) == TP_OK;
    tp_tensor_free(tw);
    tp_tensor_free(tb);
    if (!ok) {
        tp_program_free(p);
        return NULL;
    }
    return p;
fail:
    tp_signature_free(s);
    tp_graph_free(g);
    return NULL;
}

/* median ms of `repeats` calls (after one warm-up call); <0: failed */
static double time_linear(tp_program *p, tp_tensor *x, int threads, tp_cpu_level level, int repeats,
                          const char **variant) {
    tp_run_options opt;
    tp_run_options_init(&opt);
    opt.num_threads = threads;
    opt.cpu_level = level;
    tp_run *r = NULL;
    double t[REPEATS];
    if (tp_run_new(p, &opt, &r) != TP_OK || tp_run_execute(r, &x, 1, NULL, 0) != TP_OK) {
        fprintf(stderr, "half_bench: %s\n", tp_last_error());
        tp_run_free(r);
        return -1;
    }
    tp_run_stats st;
    tp_run_get_stats(r, &st);
    *variant = st.n_reference > 0 ? "reference" : "fast";
    for (int i = 0; i < repeats; i++) {
        double t0 = now_s();
        tp_run_execute(r, &x, 1, NULL, 0);
        t[i] = (now_s() - t0) * 1e3;
    }
    tp_run_free(r);
    qsort(t, (size_t)repeats, sizeof t[0], cmp_double);
    return t[repeats / 2];
}

int main(void) {
    static const int64_t shapes[][3] = {{32, 784, 512}, {197, 384, 1536}, {197, 1536, 384}, {128, 256, 1024},
                                        {1024, 1024, 1024}};
    static const tp_dtype dts[3] = {TP_FLOAT32, TP_BFLOAT16, TP_FLOAT16};
    printf("tpexport linear(x [M, K], W [N, K], b [N]) with constant W, b; medians of %d calls; level %s\n", REPEATS,
           tp_cpu_level_name(tp_cpu_level_effective()));
    printf("%-16s %-9s %7s %10s %8s %10s %8s\n", "M x K x N", "dtype", "variant", "1t ms", "GF/s", "2t ms", "GF/s");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t m = shapes[i][0], k = shapes[i][1], n = shapes[i][2];
        double gf = 2.0 * (double)m * (double)k * (double)n * 1e-9;
        for (int d = 0; d < 3; d++) {
            tp_program *p = make_linear(dts[d], m, k, n);
            tp_tensor *x = rand_tensor(dts[d], 2, (int64_t[]){m, k}, 3);
            if (!p || !x) {
                fprintf(stderr, "half_bench: building %s failed: %s\n", tp_dtype_name(dts[d]), tp_last_error());
                return 1;
            }
            const char *variant = "?";
            double t1 = time_linear(p, x, 1, TP_CPU_AUTO, REPEATS, &variant);
            double t2 = time_linear(p, x, 2, TP_CPU_AUTO, REPEATS, &variant);
            char shape[32];
            snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)m, (long long)k, (long long)n);
            printf("%-16s %-9s %7s %10.3f %8.1f %10.3f %8.1f\n", shape, tp_dtype_name(dts[d]), variant, t1, gf / t1 * 1e3,
                   t2, gf / t2 * 1e3);
            if (i == 0 && d == 1) { /* what a bfloat16 product ran before: the reference kernel */
                double tr = time_linear(p, x, 1, TP_CPU_REFERENCE, 3, &variant);
                printf("%-16s %-9s %7s %10.3f %8.1f\n", shape, tp_dtype_name(dts[d]), variant, tr, gf / tr * 1e3);
            }
            tp_tensor_free(x);
            tp_program_free(p);
        }
    }
    return 0;
}
