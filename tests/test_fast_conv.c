/*
 * test_fast_conv.c - the fast convolution paths (src/cpu/fast_conv.c)
 * against the reference kernel on random cases covering every
 * stride / padding / dilation / group combination the fast paths claim:
 * 1x1 (stride 1: read in place; stride 2: im2col), 3x3 and 5x5, grouped,
 * depthwise with multiplier 1 (the 3x3 register kernel and the general
 * one) and 2 (grouped GEMM), odd spatial sizes, batch 1 and 3, conv1d,
 * bias or none, a strided (non-contiguous) input. Each case runs at every
 * CPU level the machine supports, through a one-node plan with 1 and 2
 * threads (tp_run) and eagerly.
 *
 * Tolerance: |fast - reference| <= 1e-5 * sum_k |w_k x_k| + 1e-6 per output
 * element, bounded here as rtol 1e-4 / atol 1e-5 on values of order 1 (the
 * reference accumulates in double, the fast paths in float32 with another
 * summation order).
 */
#include "program_examples.h"
#include "test_util.h"
#include "tpexport/run.h"

static uint32_t g_seed = 12345;
static float frand(void) {
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)(g_seed >> 8) / 16777216.0f - 0.5f;
}

static tp_tensor *rand_t(int ndim, const int64_t *sizes) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, ndim, sizes, &t));
    if (!t) return NULL;
    float *d = tp_tensor_data(t);
    for (int64_t i = 0; i < tp_tensor_numel(t); i++) d[i] = frand();
    return t;
}

typedef struct conv_case {
    int spatial;
    int64_t n, cin, h, w, cout, kh, kw, stride, pad, dil, groups;
    bool bias, strided_input;
} conv_case;

static tp_value ints2(int spatial, int64_t v) {
    tp_value l;
    int64_t a[2] = {v, v};
    CHECK_OK(tp_value_int_list(a, spatial, &l));
    return l;
}

/* Run conv through a one-node program (weight and bias as parameters, so
 * they are packed / folded like real weights) at `level` and `threads`. */
static tp_tensor *run_planned(const conv_case *c, tp_tensor *x, tp_tensor *w, tp_tensor *b, tp_cpu_level level,
                              int threads) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    if (!g) return NULL;
    tp_node *pw = placeholder(g, "p_w", tp_tensor_ndim(w), tp_tensor_sizes(w));
    tp_node *pb = b ? placeholder(g, "p_b", 1, tp_tensor_sizes(b)) : NULL;
    tp_node *px = placeholder(g, "x", tp_tensor_ndim(x), tp_tensor_sizes(x));
    tp_value args[7] = {N(px), N(pw), pb ? N(pb) : tp_value_none(), ints2(c->spatial, c->stride),
                        ints2(c->spatial, c->pad), ints2(c->spatial, c->dil), tp_value_int(c->groups)};
    tp_node *y = call(g, c->spatial == 2 ? TP_OP_CONV2D : TP_OP_CONV1D, 7, args);
    for (int i = 3; i < 6; i++) tp_value_clear(&args[i]);
    output_nodes(g, 1, (tp_node *[]){y});
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_w"), "w", TP_PERSISTENT_UNSET));
    if (b) CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_b"), "b", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(y)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    if (!p) return NULL;
    CHECK_OK(tp_program_set_state(p, "w", TP_STATE_PARAMETER, w, true));
    if (b) CHECK_OK(tp_program_set_state(p, "b", TP_STATE_PARAMETER, b, true));
    tp_run_options opt;
    tp_run_options_init(&opt);
    opt.cpu_level = level;
    opt.num_threads = threads;
    tp_run *r = NULL;
    tp_tensor *out = NULL;
    CHECK_OK(tp_run_new(p, &opt, &r));
    if (r && tp_run_execute(r, &x, 1, NULL, 0) == TP_OK) {
        tp_run_stats st;
        tp_run_get_stats(r, &st);
        if (level >= TP_CPU_SCALAR) CHECK_MSG(st.n_fast == 1, "the convolution ran the reference kernel");
        CHECK_OK(tp_tensor_clone(tp_run_output(r, 0), &out));
    } else {
        CHECK_MSG(false, "tp_run_execute: %s", tp_last_error());
    }
    tp_run_free(r);
    tp_program_free(p);
    return out;
}

static tp_tensor *run_eager(const conv_case *c, tp_tensor *x, tp_tensor *w, tp_tensor *b) {
    tp_value args[7] = {tp_value_tensor(tp_tensor_retain(x)), tp_value_tensor(tp_tensor_retain(w)),
                        b ? tp_value_tensor(tp_tensor_retain(b)) : tp_value_none(), ints2(c->spatial, c->stride),
                        ints2(c->spatial, c->pad), ints2(c->spatial, c->dil), tp_value_int(c->groups)};
    tp_value out = tp_value_none();
    CHECK_OK(tp_op_call(c->spatial == 2 ? TP_OP_CONV2D : TP_OP_CONV1D, args, 7, NULL, &out));
    for (int i = 0; i < 7; i++) tp_value_clear(&args[i]);
    tp_tensor *t = out.kind == TP_VAL_TENSOR ? tp_tensor_retain(out.u.tensor) : NULL;
    tp_value_clear(&out);
    return t;
}

static void check_case(const conv_case *c, const char *label) {
    int64_t xs[4] = {c->n, c->cin, c->spatial == 2 ? c->h : c->w, c->w};
    int64_t ws[4] = {c->cout, c->cin / c->groups, c->spatial == 2 ? c->kh : c->kw, c->kw};
    tp_tensor *x = NULL, *store = NULL;
    if (c->strided_input) { /* every other column of a twice-as-wide tensor */
        int64_t wide[4] = {xs[0], xs[1], xs[2], xs[3]};
        wide[c->spatial + 1] *= 2;
        store = rand_t(c->spatial + 2, wide);
        if (store) CHECK_OK(tp_tensor_slice(store, c->spatial + 1, 0, wide[c->spatial + 1], 2, &x));
    } else {
        x = rand_t(c->spatial + 2, xs);
    }
    tp_tensor *w = rand_t(c->spatial + 2, ws);
    tp_tensor *b = c->bias ? rand_t(1, (int64_t[]){c->cout}) : NULL;
    tp_ops_force_reference(true);
    tp_tensor *want = x && w ? run_eager(c, x, w, b) : NULL;
    tp_ops_force_reference(false);
    CHECK_MSG(want != NULL, "%s: reference failed: %s", label, tp_last_error());
    if (want) {
        char msg[256];
        tp_tensor *eager = run_eager(c, x, w, b);
        CHECK_MSG(eager && tp_tensor_allclose(eager, want, 1e-4, 1e-5, msg, sizeof msg), "%s eager: %s", label, msg);
        tp_tensor_free(eager);
        for (int level = TP_CPU_SCALAR; level <= (int)tp_cpu_level_supported(); level++)
            for (int th = 1; th <= 2; th++) {
                tp_tensor *got = run_planned(c, x, w, b, (tp_cpu_level)level, th);
                CHECK_MSG(got && tp_tensor_allclose(got, want, 1e-4, 1e-5, msg, sizeof msg), "%s %s %d threads: %s",
                          label, tp_cpu_level_name((tp_cpu_level)level), th, got ? msg : "no result");
                tp_tensor_free(got);
            }
    }
    tp_tensor_free(want);
    tp_tensor_free(x);
    tp_tensor_free(store);
    tp_tensor_free(w);
    tp_tensor_free(b);
}

TEST(test_conv2d_combinations) {
    static const conv_case cases[] = {
        /* sp  n cin  h  w cout kh kw s p d g bias strided */
        {2, 1, 8, 9, 11, 16, 1, 1, 1, 0, 1, 1, true, false},   /* 1x1 stride 1: read in place */
        {2, 3, 8, 9, 11, 16, 1, 1, 2, 0, 1, 1, false, false},  /* 1x1 stride 2 */
        {2, 1, 3, 17, 15, 8, 3, 3, 1, 1, 1, 1, true, false},   /* 3x3 same */
        {2, 3, 5, 13, 7, 7, 3, 3, 2, 1, 1, 1, true, false},    /* stride 2, odd sizes */
        {2, 1, 4, 12, 12, 6, 3, 3, 1, 2, 2, 1, false, false},  /* dilation 2 */
        {2, 1, 4, 11, 9, 6, 5, 5, 2, 2, 1, 1, true, false},    /* 5x5 */
        {2, 1, 6, 9, 9, 6, 3, 3, 1, 1, 1, 3, true, false},     /* grouped */
        {2, 1, 8, 15, 17, 8, 3, 3, 1, 1, 1, 8, true, false},   /* depthwise 3x3 s1 */
        {2, 3, 8, 15, 16, 8, 3, 3, 2, 1, 1, 8, false, false},  /* depthwise 3x3 s2 */
        {2, 1, 8, 14, 14, 8, 3, 3, 1, 2, 2, 8, true, false},   /* depthwise 3x3 dilated */
        {2, 1, 8, 5, 4, 8, 3, 3, 1, 0, 1, 8, true, false},     /* depthwise, no interior column */
        {2, 1, 6, 11, 13, 6, 5, 5, 2, 2, 1, 6, true, false},   /* depthwise 5x5 s2 */
        {2, 2, 6, 12, 19, 6, 5, 5, 1, 2, 1, 6, true, false},   /* depthwise 5x5 s1 */
        {2, 1, 5, 10, 11, 5, 3, 3, 2, 0, 1, 5, false, false},  /* depthwise 3x3 s2, no padding, odd width */
        {2, 1, 5, 9, 12, 5, 5, 5, 2, 1, 1, 5, true, false},    /* depthwise 5x5 s2, pad 1 */
        {2, 1, 4, 9, 9, 8, 3, 3, 1, 1, 1, 4, true, false},     /* depthwise multiplier 2 */
        {2, 1, 8, 7, 9, 8, 3, 3, 1, 1, 1, 8, true, true},      /* depthwise, strided input */
        {2, 3, 4, 7, 9, 6, 3, 3, 1, 1, 1, 1, true, true},      /* strided input */
        {2, 1, 64, 14, 14, 64, 3, 3, 1, 1, 1, 1, true, false}, /* bigger K: several GEMM blocks */
        {1, 3, 4, 1, 33, 8, 1, 5, 2, 2, 1, 1, true, false},    /* conv1d */
        {1, 1, 6, 1, 31, 6, 1, 3, 1, 1, 1, 6, false, false},   /* conv1d depthwise */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char label[64];
        snprintf(label, sizeof label, "case %zu", i);
        check_case(&cases[i], label);
    }
}

TEST_MAIN(T(test_conv2d_combinations))
