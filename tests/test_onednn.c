/*
 * test_onednn.c - the NHWC layout pass (src/cpu/onednn.c) against the
 * reference kernels on small networks: the convolution under test sits
 * between two others, so it reads and writes channels-last tensors inside
 * a region while the first and last convolutions convert at its edges.
 * Cases cover every stride / padding / dilation / group combination the
 * pass claims (1x1 with stride 1 and 2, 3x3, 5x5, 7x7 stems, dilation,
 * asymmetric padding, grouped, depthwise with multiplier 1 and 2), odd
 * spatial sizes, batch 1 and 3, max pooling (ceil mode, dilation),
 * residual adds fused as sums, standalone activations and adds, the
 * squeeze-excitation multiply by a [N, C, 1, 1] tensor (either order), and
 * pools and activations at a region's edges (reading the NCHW input,
 * writing the NCHW output), and conv1d chains ([N, C, L] as [N, C, 1, L],
 * cut into column bands at batch 1), conv_transpose1d/2d as oneDNN
 * deconvolutions, and conv3d / conv_transpose3d. Every net runs at
 * the reference level and at the CPU's level with 1 and 2 threads (row
 * bands at batch 1, images at batch 3), and the profile must show oneDNN
 * steps: a build without oneDNN reports the test skipped (exit 77).
 *
 * Tolerance: rtol 1e-4, atol 1e-4 on outputs of order 1 (weights are
 * scaled by 1/sqrt(fan-in)); the reference accumulates in double, oneDNN
 * in float32 in its own order, and its exp-based activations (SiLU,
 * sigmoid, GELU) are within a few float32 ulps.
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>

#include "engine_impl.h"
#include "fail_alloc.h"
#include "program_examples.h"
#include "test_util.h"
#include "tpexport/run.h"

static uint32_t g_seed = 777;
static float frand(void) {
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)(g_seed >> 8) / 16777216.0f - 0.5f;
}

/* Whether environment variable name is set to value. */
static bool env_is(const char *name, const char *value) {
    const char *e = getenv(name);
    return e && strcmp(e, value) == 0;
}

/* Whether the oneDNN pass runs at the AVX-512 level: the CPU has it and
 * TP_CPU_LEVEL does not cap it at avx2 (its rules, and our kernels, differ
 * by level). */
static bool avx512_in_effect(void) {
    return !env_is("TP_CPU_LEVEL", "avx2") && tp_cpu_level_supported() >= TP_CPU_AVX512;
}

static tp_tensor *rand_t(int ndim, const int64_t *sizes, float scale) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, ndim, sizes, &t));
    if (!t) return NULL;
    float *d = tp_tensor_data(t);
    for (int64_t i = 0; i < tp_tensor_numel(t); i++) d[i] = frand() * scale;
    return t;
}

enum { L_CONV, L_POOL, L_UNARY, L_ADD, L_SE, L_AVG, L_ADAPT, L_MEAN };

/* One layer: a convolution (cout, kernel, stride, padding, dilation,
 * groups, bias, activation op or TP_OP_INVALID, res: add outs[res] before
 * the activation), a max pool (k, s, p, d, ceil), a unary op, an add of
 * outs[res], or x * sigmoid(mean(outs[res])) (ceil set: the scale first),
 * an avg_pool2d (k, s, p, ceil; bias: count_include_pad), an
 * adaptive_avg_pool2d to cout x cout or a mean over H and W (keepdim). outs[0] is the input and
 * outs[i + 1] layer i's output; a layer reads outs[from - 1] when from > 0,
 * else the previous layer's output. */
typedef struct layer {
    int kind;
    int64_t cout, kh, kw, sh, sw, ph, pw, dh, dw, groups;
    bool bias, ceil;
    tp_op act;
    int res;
    int from; /* 0: reads the previous layer's output; k > 0: layer k-1's (outs[k - 1] ... see build) */
} layer;

#define MAXL 8

typedef struct net_case {
    const char *label;
    int64_t n, c, h, w;
    int n_layers;
    layer l[MAXL];
} net_case;

static tp_value pair(int64_t a, int64_t b) {
    tp_value l;
    int64_t v[2] = {a, b};
    CHECK_OK(tp_value_int_list(v, 2, &l));
    return l;
}

typedef struct built {
    tp_program *p;
    tp_tensor *x;
} built;

/* Shapes of every layer's output, computed as PyTorch does. */
static void out_shape(const layer *L, const int64_t *in, int64_t *out) {
    out[0] = in[0];
    out[1] = L->kind == L_CONV ? L->cout : in[1];
    if (L->kind == L_ADAPT || L->kind == L_MEAN) {
        out[2] = out[3] = L->kind == L_MEAN ? 1 : L->cout;
    } else if (L->kind == L_CONV || L->kind == L_POOL || L->kind == L_AVG) {
        int64_t kh = L->kh, kw = L->kw;
        for (int d = 0; d < 2; d++) {
            int64_t i = in[2 + d], k = d ? kw : kh, s = d ? L->sw : L->sh, p = d ? L->pw : L->ph,
                    dl = d ? L->dw : L->dh;
            int64_t span = i + 2 * p - dl * (k - 1) - 1;
            int64_t o = (L->ceil ? (span + s - 1) / s : span / s) + 1;
            if (L->ceil && (o - 1) * s >= i + p) o--;
            out[2 + d] = o;
        }
    } else {
        out[2] = in[2];
        out[3] = in[3];
    }
}

static built build(const net_case *c) {
    built b = {0};
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    if (!g) return b;
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    int64_t shape[MAXL + 1][4] = {{c->n, c->c, c->h, c->w}};
    tp_node *wn[MAXL] = {0}, *bn[MAXL] = {0};
    tp_tensor *wt[MAXL] = {0}, *bt[MAXL] = {0};
    char name[32];
    for (int i = 0; i < c->n_layers; i++) {
        const layer *L = &c->l[i];
        const int64_t *in = shape[L->from > 0 ? L->from - 1 : i];
        out_shape(L, in, shape[i + 1]);
        if (L->kind != L_CONV) continue;
        int64_t ws[4] = {L->cout, in[1] / L->groups, L->kh, L->kw};
        float scale = 2.0f / sqrtf((float)(ws[1] * L->kh * L->kw));
        wt[i] = rand_t(4, ws, scale);
        snprintf(name, sizeof name, "p_w%d", i);
        wn[i] = placeholder(g, name, 4, ws);
        CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor(name), name + 2, TP_PERSISTENT_UNSET));
        if (L->bias) {
            bt[i] = rand_t(1, &L->cout, 0.5f);
            snprintf(name, sizeof name, "p_b%d", i);
            bn[i] = placeholder(g, name, 1, &L->cout);
            CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor(name), name + 2, TP_PERSISTENT_UNSET));
        }
    }
    tp_node *cur = placeholder(g, "x", 4, shape[0]);
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    tp_node *outs[MAXL + 1] = {cur};
    for (int i = 0; i < c->n_layers && cur; i++) {
        const layer *L = &c->l[i];
        if (L->from > 0) cur = outs[L->from - 1];
        if (L->kind == L_CONV) {
            tp_value a[7] = {N(cur), N(wn[i]), bn[i] ? N(bn[i]) : tp_value_none(), pair(L->sh, L->sw),
                             pair(L->ph, L->pw), pair(L->dh, L->dw), tp_value_int(L->groups)};
            cur = call(g, TP_OP_CONV2D, 7, a);
            for (int k = 3; k < 6; k++) tp_value_clear(&a[k]);
            if (L->res >= 0) cur = call(g, TP_OP_ADD, 2, (tp_value[]){N(cur), N(outs[L->res])});
            /* hardtanh as relu6's ONNX form, Clip(0, 6) */
            if (L->act == TP_OP_HARDTANH)
                cur = call(g, L->act, 3, (tp_value[]){N(cur), tp_value_float(0.0), tp_value_float(6.0)});
            else if (L->act != TP_OP_INVALID)
                cur = call(g, L->act, 1, (tp_value[]){N(cur)});
        } else if (L->kind == L_POOL) {
            tp_value a[6] = {N(cur), pair(L->kh, L->kw), pair(L->sh, L->sw), pair(L->ph, L->pw),
                             pair(L->dh, L->dw), tp_value_bool(L->ceil)};
            cur = call(g, TP_OP_MAX_POOL2D, 6, a);
            for (int k = 1; k < 5; k++) tp_value_clear(&a[k]);
        } else if (L->kind == L_AVG) {
            tp_value a[7] = {N(cur), pair(L->kh, L->kw), pair(L->sh, L->sw), pair(L->ph, L->pw),
                             tp_value_bool(L->ceil), tp_value_bool(L->bias), tp_value_none()};
            cur = call(g, TP_OP_AVG_POOL2D, 7, a);
            for (int k = 1; k < 4; k++) tp_value_clear(&a[k]);
        } else if (L->kind == L_ADAPT) {
            tp_value a[2] = {N(cur), pair(L->cout, L->cout)};
            cur = call(g, TP_OP_ADAPTIVE_AVG_POOL2D, 2, a);
            tp_value_clear(&a[1]);
        } else if (L->kind == L_MEAN) {
            tp_value a[3] = {N(cur), pair(2, 3), tp_value_bool(true)};
            cur = call(g, TP_OP_MEAN, 3, a);
            tp_value_clear(&a[1]);
        } else if (L->kind == L_UNARY) {
            cur = call(g, L->act, 1, (tp_value[]){N(cur)});
        } else if (L->kind == L_ADD) {
            cur = call(g, TP_OP_ADD, 2, (tp_value[]){N(cur), N(outs[L->res])});
        } else {
            tp_value a[3] = {N(outs[L->res]), pair(2, 3), tp_value_bool(true)};
            tp_node *m = call(g, TP_OP_MEAN, 3, a);
            tp_value_clear(&a[1]);
            tp_node *sg = m ? call(g, TP_OP_SIGMOID, 1, (tp_value[]){N(m)}) : NULL;
            /* ceil set: scale * x, as torchvision writes it */
            cur = !sg ? NULL
                  : L->ceil ? call(g, TP_OP_MUL, 2, (tp_value[]){N(sg), N(cur)})
                            : call(g, TP_OP_MUL, 2, (tp_value[]){N(cur), N(sg)});
        }
        outs[i + 1] = cur;
    }
    if (!cur) {
        CHECK_MSG(false, "%s: building the graph: %s", c->label, tp_last_error());
        tp_graph_free(g);
        tp_signature_free(s);
        goto out;
    }
    output_nodes(g, 1, (tp_node *[]){cur});
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(cur)), NULL));
    CHECK_OK(tp_program_new(g, s, &b.p));
    for (int i = 0; b.p && i < c->n_layers; i++) {
        if (wt[i]) {
            snprintf(name, sizeof name, "w%d", i);
            CHECK_OK(tp_program_set_state(b.p, name, TP_STATE_PARAMETER, wt[i], true));
        }
        if (bt[i]) {
            snprintf(name, sizeof name, "b%d", i);
            CHECK_OK(tp_program_set_state(b.p, name, TP_STATE_PARAMETER, bt[i], true));
        }
    }
    b.x = rand_t(4, shape[0], 2.0f);
out:
    for (int i = 0; i < MAXL; i++) {
        tp_tensor_free(wt[i]);
        tp_tensor_free(bt[i]);
    }
    return b;
}

/* build(c) into *b: false (and nothing to free) when it made no program
 * or input (a failed CHECK says why). */
static bool build_net(const net_case *c, built *b) {
    *b = build(c);
    if (b->p && b->x) return true;
    tp_program_free(b->p);
    tp_tensor_free(b->x);
    return false;
}

/* onednn: steps the layout pass runs (oneDNN primitives, or our implicit
 * GEMM convolution on NHWC tensors: gemm; of those Winograd: wino, of
 * which F(4x4, 3x3): wino4, and F(2x2, 3x3) with its transformed weights
 * built per call: otf) */
typedef struct counts {
    int onednn, gemm, wino, wino4, otf, means, steps;
    int maxp; /* max pools from NHWC to NHWC run by the pass's own loop (max-nhwc) */
    int dw; /* projections computing a fused depthwise convolution (dw+gemm-nhwc, ex+dw+gemm-nhwc) */
    int ex; /* ... and its input's expansion too (ex+dw+gemm-nhwc) */
    int cat; /* convolutions summing a second one in the same GEMM (cat+gemm-nhwc) */
    int direct; /* convolutions on the direct kernel (direct-nhwc, direct+maxpool-nhwc) */
    int dpool;  /* ... with the max pool after them fused (direct+maxpool-nhwc) */
    int64_t in_place; /* tp_run_stats.n_in_place after the call */
} counts;

static void on_event(void *user, const tp_profile_event *ev) {
    counts *c = user;
    c->steps++;
    if (strcmp(ev->variant, "onednn") == 0 || strcmp(ev->variant, "mean-nhwc") == 0 ||
        strcmp(ev->variant, "max-nhwc") == 0)
        c->onednn++;
    c->means += strcmp(ev->variant, "mean-nhwc") == 0;
    c->maxp += strcmp(ev->variant, "max-nhwc") == 0;
    const bool otf = strcmp(ev->variant, "winograd2-otf-nhwc") == 0;
    const bool w2 = otf || strcmp(ev->variant, "winograd2-nhwc") == 0, w4 = strcmp(ev->variant, "winograd4-nhwc") == 0;
    c->otf += otf;
    const bool ex = strcmp(ev->variant, "ex+dw+gemm-nhwc") == 0, dw = ex || strcmp(ev->variant, "dw+gemm-nhwc") == 0;
    const bool cat = strcmp(ev->variant, "cat+gemm-nhwc") == 0;
    c->dw += dw;
    c->ex += ex;
    c->cat += cat;
    const bool dpool = strcmp(ev->variant, "direct+maxpool-nhwc") == 0;
    const bool direct = dpool || strcmp(ev->variant, "direct-nhwc") == 0;
    c->direct += direct;
    c->dpool += dpool;
    if (direct) c->onednn++;
    if (strcmp(ev->variant, "gemm-nhwc") == 0 || w2 || w4 || dw || cat) {
        c->onednn++;
        c->gemm++;
    }
    c->wino += w2 || w4;
    c->wino4 += w4;
}

static tp_tensor *run(const built *b, tp_cpu_level level, int threads, counts *cnt) {
    tp_run_options opt;
    tp_run_options_init(&opt);
    opt.cpu_level = level;
    opt.num_threads = threads;
    opt.profile = on_event;
    opt.profile_user = cnt;
    tp_run *r = NULL;
    tp_tensor *out = NULL;
    CHECK_OK(tp_run_new(b->p, &opt, &r));
    /* twice: the second call reuses the run context's oneDNN state */
    for (int k = 0; r && k < 2; k++) {
        memset(cnt, 0, sizeof *cnt);
        if (tp_run_execute(r, (tp_tensor *[]){b->x}, 1, NULL, 0) != TP_OK) {
            CHECK_MSG(false, "tp_run_execute: %s", tp_last_error());
            break;
        }
        tp_tensor_free(out);
        out = NULL;
        CHECK_OK(tp_tensor_clone(tp_run_output(r, 0), &out));
        tp_run_stats rs;
        tp_run_get_stats(r, &rs);
        cnt->in_place = rs.n_in_place;
    }
    tp_run_free(r);
    return out;
}

/* Run b at the reference level and at the CPU's with 1 and 2 threads:
 * outputs within tolerance, and between min_onednn and max_onednn (-1: no
 * bound) steps on oneDNN. Frees b's program and input. */
static int g_last_wino, g_last_wino4, g_last_otf; /* Winograd steps of compare_levels' last run (F(4x4, 3x3) ones,
                                                    * F(2x2, 3x3) ones building their weights per call) */

static int compare_levels(built *b, const char *label, int min_onednn, int max_onednn) {
    counts cnt = {0};
    tp_tensor *want = run(b, TP_CPU_REFERENCE, 1, &cnt);
    CHECK_MSG(want != NULL, "%s: reference run failed", label);
    for (int th = 1; want && th <= 2; th++) {
        tp_tensor *got = run(b, TP_CPU_AUTO, th, &cnt);
        char msg[256] = "";
        CHECK_MSG(got && tp_tensor_allclose(got, want, 1e-4, 1e-4, msg, sizeof msg), "%s, %d threads: %s", label, th,
                  got ? msg : "no result");
        CHECK_MSG(cnt.onednn >= min_onednn && (max_onednn < 0 || cnt.onednn <= max_onednn),
                  "%s: %d of %d steps ran oneDNN, want %d to %d", label, cnt.onednn, cnt.steps, min_onednn, max_onednn);
        tp_tensor_free(got);
    }
    tp_tensor_free(want);
    tp_tensor_free(b->x);
    tp_program_free(b->p);
    g_last_wino = cnt.wino;
    g_last_wino4 = cnt.wino4;
    g_last_otf = cnt.otf;
    return cnt.gemm;
}

/* min_onednn: at least this many steps must run on oneDNN; max_onednn: at
 * most (-1: no bound). */
static void check_net_range(const net_case *c, int min_onednn, int max_onednn) {
    built b;
    if (!build_net(c, &b)) return;
    compare_levels(&b, c->label, min_onednn, max_onednn);
}

static void check_net(const net_case *c, int min_onednn) { check_net_range(c, min_onednn, -1); }

#define CONV(co, k, s, p, d, g, act) {L_CONV, co, k, k, s, s, p, p, d, d, g, true, false, act, -1, 0}
#define RELU TP_OP_RELU
#define NONE TP_OP_INVALID

/* The convolution under test between a 3x3 head and a 1x1 tail. */
static void check_conv(const char *label, int64_t n, int64_t h, int64_t w, int64_t cin, layer mid) {
    net_case c = {label, n, 3, h, w, 3, {CONV(cin, 3, 1, 1, 1, 1, RELU), mid, CONV(5, 1, 1, 0, 1, 1, NONE)}};
    check_net(&c, 3);
}

TEST(test_conv_combinations) {
    struct {
        const char *label;
        int64_t n, h, w, cin;
        layer mid;
    } cases[] = {
        {"1x1 s1", 1, 9, 11, 8, CONV(16, 1, 1, 0, 1, 1, RELU)},
        {"1x1 s1 silu (our GEMM where brgemm runs)", 1, 9, 11, 8, CONV(16, 1, 1, 0, 1, 1, TP_OP_SILU)},
        {"1x1 s1 gelu, many channels", 1, 7, 9, 64, CONV(80, 1, 1, 0, 1, 1, TP_OP_GELU)},
        {"1x1 s2 batch 3", 3, 9, 11, 8, CONV(16, 1, 2, 0, 1, 1, NONE)},
        {"1x1 s2 even", 1, 8, 8, 16, CONV(32, 1, 2, 0, 1, 1, RELU)},
        {"3x3 s1 p1", 1, 17, 15, 3, CONV(8, 3, 1, 1, 1, 1, RELU)},
        {"3x3 s2 odd", 3, 13, 7, 5, CONV(7, 3, 2, 1, 1, 1, TP_OP_RELU6)},
        {"3x3 s2 p0", 1, 10, 11, 6, CONV(6, 3, 2, 0, 1, 1, TP_OP_SILU)},
        {"dilation 2", 1, 12, 12, 4, CONV(6, 3, 1, 2, 2, 1, TP_OP_HARDSWISH)},
        {"5x5 s2 p2", 1, 11, 9, 4, CONV(6, 5, 2, 2, 1, 1, TP_OP_GELU)},
        {"7x7 s2 p3", 1, 23, 21, 3, CONV(16, 7, 2, 3, 1, 1, RELU)},
        {"asymmetric padding", 1, 9, 10, 4, {L_CONV, 8, 3, 5, 1, 2, 1, 2, 1, 1, 1, true, false, RELU, -1, 0}},
        {"grouped", 1, 9, 9, 6, CONV(6, 3, 1, 1, 1, 3, RELU)},
        {"depthwise 3x3 s1", 1, 15, 17, 8, CONV(8, 3, 1, 1, 1, 8, TP_OP_RELU6)},
        {"depthwise 3x3 s2 batch 3", 3, 15, 16, 8, CONV(8, 3, 2, 1, 1, 8, TP_OP_SILU)},
        {"depthwise dilated", 1, 14, 14, 8, CONV(8, 3, 1, 2, 2, 8, NONE)},
        {"depthwise 5x5 s2", 1, 11, 13, 24, CONV(24, 5, 2, 2, 1, 24, TP_OP_SIGMOID)},
        {"depthwise multiplier 2", 1, 9, 9, 4, CONV(8, 3, 1, 1, 1, 4, RELU)},
        {"depthwise 12 channels (a vector and 4)", 2, 10, 9, 12, CONV(12, 3, 1, 1, 1, 12, TP_OP_HARDSWISH)},
        {"many channels", 1, 14, 14, 64, CONV(64, 3, 1, 1, 1, 1, RELU)},
        {"tall odd rows", 1, 31, 5, 8, CONV(12, 3, 1, 1, 1, 1, TP_OP_TANH)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_conv(cases[i].label, cases[i].n, cases[i].h, cases[i].w, cases[i].cin, cases[i].mid);
}

/* Run b at the CPU's level with 1 thread (its step counts into *cnt1),
 * then 2 and 3 (plans made for each): the outputs must be bitwise the
 * same. False when the 1-thread run gave no output. */
static bool check_thread_counts(const built *b, const char *label, counts *cnt1) {
    tp_tensor *one = run(b, TP_CPU_AUTO, 1, cnt1);
    for (int th = 2; one && th <= 3; th++) {
        counts cnt;
        tp_tensor *got = run(b, TP_CPU_AUTO, th, &cnt);
        CHECK_MSG(got && tp_tensor_numel(got) == tp_tensor_numel(one) &&
                      memcmp(tp_tensor_data(got), tp_tensor_data(one), (size_t)tp_tensor_numel(one) * sizeof(float)) ==
                          0,
                  "%s: %d threads not bitwise equal to 1 thread", label, th);
        tp_tensor_free(got);
    }
    const bool ran = one != NULL;
    tp_tensor_free(one);
    return ran;
}

/* Our convolutions on NHWC tensors (src/cpu/conv_nhwc_avx2.c): the implicit
 * GEMM and Winograd F(2x2, 3x3). With TP_CONV_GEMM=1 (ctest's
 * test_onednn_gemmconv) every dense convolution with an NHWC output runs
 * the implicit GEMM, so these nets must show `gemm` such steps; with
 * TP_CONV_GEMM=2 (test_onednn_winograd) the same steps run, `wino` of them
 * (the 3x3 stride-1 ones) as Winograd (F(4x4, 3x3) where it has 48 tiles,
 * else F(2x2, 3x3)); with TP_CONV_GEMM=4 (test_onednn_winograd4, and at
 * the AVX2 level test_onednn_winograd4_avx2) all `wino` as F(4x4, 3x3);
 * with TP_CONV_GEMM=0 none; unset, the
 * pass chooses by measurement and only the values are checked. The cases
 * cover a region's first convolution reading the NCHW user input (gathered
 * with strides), NHWC inputs, stride 2, padding 0 and 2, dilation, 5x5, 1x1
 * with stride 2, odd sizes (partial Winograd tiles), batch 2 and 3, a
 * summed residual taking over its dying block and one that is also the
 * input (x + conv(x)), and the fused activations; every net's output must
 * also be bitwise the same at 1, 2 and 3 threads. */
TEST(test_gemm_conv) {
    const char *e = getenv("TP_CONV_GEMM");
    const int mode = e && !strcmp(e, "1")   ? 1
                     : e && !strcmp(e, "2") ? 2
                     : e && !strcmp(e, "4") ? 4
                     : e && !strcmp(e, "0") ? 0
                                            : -1;
    const struct {
        net_case c;
        int gemm, wino;
        int in_place; /* steps whose output takes over a dying input's block */
        int onednn;   /* steps on oneDNN or our NHWC paths, at least (0: one a layer) */
        int otf;      /* of the Winograd ones with TP_CONV_GEMM=2, F(2x2) building its weights per call */
    } cases[] = {
        {{"gemm: NCHW input at the edge", 1, 16, 9, 11, 3,
          {CONV(16, 3, 1, 1, 1, 1, RELU), CONV(24, 3, 2, 1, 1, 1, TP_OP_SILU), CONV(5, 1, 1, 0, 1, 1, NONE)}},
         2, 1, 0, 0, 0},
        {{"gemm: dilation, padding 0, batch 3", 3, 16, 13, 7, 3,
          {CONV(16, 3, 1, 2, 2, 1, TP_OP_HARDSWISH), CONV(16, 3, 2, 0, 1, 1, TP_OP_GELU),
           CONV(4, 1, 1, 0, 1, 1, NONE)}},
         2, 0, 0, 0, 0},
        {{"gemm: 5x5 and 1x1 s2", 1, 16, 11, 9, 3,
          {CONV(16, 5, 2, 2, 1, 1, TP_OP_RELU6), CONV(32, 1, 2, 0, 1, 1, RELU), CONV(4, 1, 1, 0, 1, 1, NONE)}},
         2, 0, 0, 0, 0},
        {{"gemm: residual in place, batch 3", 3, 16, 10, 9, 4,
          {CONV(16, 3, 1, 1, 1, 1, RELU), CONV(16, 3, 1, 1, 1, 1, RELU),
           {L_CONV, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, RELU, 1, 0}, CONV(4, 1, 1, 0, 1, 1, NONE)}},
         3, 3, 1, 0, 0},
        /* conv(a) + y where max_pool(y) runs between the convolution and
         * the add: y's block stays y's (the sum cannot take it over; the
         * add after it takes over its dying input) */
        {{"gemm: a residual still read after its convolution", 2, 16, 10, 9, 7,
          {CONV(16, 3, 1, 1, 1, 1, RELU), CONV(16, 3, 1, 1, 1, 1, NONE),
           {L_CONV, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, NONE, -1, 2},
           {L_POOL, 0, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false, NONE, -1, 3},
           {L_ADD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, NONE, 2, 4},
           {L_ADD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, NONE, 4, 0}, CONV(4, 1, 1, 0, 1, 1, NONE)}},
         3, 3, 1, 5, 0},
        {{"gemm: x + conv(x)", 1, 16, 12, 12, 3,
          {CONV(16, 3, 1, 1, 1, 1, RELU), {L_CONV, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, RELU, 1, 0},
           CONV(4, 1, 1, 0, 1, 1, NONE)}},
         2, 2, 0, 0, 0},
        {{"winograd: padding 0 and 2, odd sizes, batch 2", 2, 16, 11, 13, 3,
          {CONV(16, 3, 1, 0, 1, 1, TP_OP_SILU), CONV(20, 3, 1, 2, 1, 1, NONE), CONV(4, 1, 1, 0, 1, 1, NONE)}},
         2, 2, 0, 0, 0},
        {{"winograd: 20 channels (vector remainders), NCHW input", 1, 20, 14, 15, 2,
          {CONV(20, 3, 1, 1, 1, 1, TP_OP_TANH), CONV(4, 1, 1, 0, 1, 1, NONE)}},
         1, 1, 0, 0, 0},
        {{"winograd: 64 -> 96 -> 128 channels, many tiles", 1, 64, 29, 26, 3,
          {CONV(96, 3, 1, 1, 1, 1, RELU), CONV(128, 3, 1, 1, 1, 1, TP_OP_GELU), CONV(4, 1, 1, 0, 1, 1, NONE)}},
         2, 2, 0, 0, 0},
        /* 16 2x2 tiles (4 4x4 ones), one block: threads split the output
         * channels, 272 of them ending in a partial weight panel */
        {{"winograd: 7x7 maps, 256 -> 272 -> 256 channels (few tiles)", 1, 256, 7, 7, 3,
          {CONV(272, 3, 1, 1, 1, 1, TP_OP_GELU), CONV(256, 3, 1, 1, 1, 1, RELU), CONV(4, 1, 1, 0, 1, 1, NONE)}},
         2, 2, 0, 0, 2},
        /* 9 tiles: F(2x2) building its weights per call, over 24 and 40
         * input channels (chunks and vectors cut short) into 40 and 17
         * output channels (edge panels), a residual summed in place */
        {{"winograd on the fly: 5x5 maps, 24 -> 40 -> 40 -> 40 -> 17 channels, a residual", 1, 24, 5, 5, 5,
          {CONV(40, 3, 1, 1, 1, 1, RELU), CONV(40, 3, 1, 1, 1, 1, RELU),
           {L_CONV, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, RELU, 1, 0}, CONV(17, 3, 1, 1, 1, 1, NONE),
           CONV(4, 1, 1, 0, 1, 1, NONE)}},
         4, 4, 1, 0, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        built b;
        if (!build_net(&cases[i].c, &b)) continue;
        /* bitwise the same at 1, 2 and 3 threads (plans made for each) */
        counts cnt;
        const bool ran = check_thread_counts(&b, cases[i].c.label, &cnt);
        /* a summed residual that dies at its convolution becomes its output
         * (x + conv(x) cannot: the input's other rows are still read) */
        CHECK_MSG(!ran || cnt.in_place == cases[i].in_place,
                  "%s: %d steps in place, want %d", cases[i].c.label, (int)cnt.in_place, cases[i].in_place);
        int gemm = compare_levels(&b, cases[i].c.label, cases[i].onednn ? cases[i].onednn : cases[i].c.n_layers, -1);
        if (mode >= 0) {
            const int want = mode ? cases[i].gemm : 0, want_wino = mode >= 2 ? cases[i].wino : 0;
            const int want_otf = mode == 2 ? cases[i].otf : 0;
            CHECK_MSG(gemm == want && g_last_wino == want_wino && (mode != 4 || g_last_wino4 == want_wino) &&
                          g_last_otf == want_otf,
                      "%s: %d convolutions on our GEMM (%d Winograd, %d F(4x4), %d with weights built per call), "
                      "want %d (%d, %d)",
                      cases[i].c.label, gemm, g_last_wino, g_last_wino4, g_last_otf, want, want_wino, want_otf);
        }
    }
}

/* The direct kernel (conv_direct_avx512.c) for convolutions of at most 4
 * input channels, at the AVX-512 level with TP_CONV_GEMM unset, and the
 * max pool it takes over when nothing else reads its output (fuse_pools):
 * the nets' outputs match the reference, bitwise the same at 1, 2 and 3
 * threads, with exactly `direct` convolutions on it, `dpool` of them
 * pooling. Cases: a 7x7 stride-2 stem of 70 channels (a full 64-channel
 * panel and a 6-channel one) with a 3x3 stride-2 padded max pool at batch
 * 3; a ceil-mode 2x2 pool (windows past the edge) after relu6 on 20
 * channels; stride 3 with dilation 2 and silu (applied after each row) on
 * 1 channel, batch 2; a 5x1 kernel with strides (1, 2), padding (2, 0),
 * no bias and gelu on 4 channels; a second direct convolution summing the
 * first's output (the residual); a max pool whose input is also the
 * residual of an add (not fused); and an NHWC input (a max pool of the
 * NCHW user input before it). */
TEST(test_direct_conv) {
    const bool on = !getenv("TP_CONV_GEMM") && avx512_in_effect();
    const struct {
        net_case c;
        int direct, dpool;
    } cases[] = {
        {{"direct: 7x7 s2 stem, 70 channels, pool 3x3 s2 p1, batch 3", 3, 3, 23, 21, 3,
          {CONV(70, 7, 2, 3, 1, 1, RELU), {L_POOL, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, false, NONE, -1, 0},
           CONV(4, 1, 1, 0, 1, 1, NONE)}},
         1, 1},
        {{"direct: relu6, 20 channels, ceil-mode pool", 1, 3, 17, 19, 3,
          {CONV(20, 3, 1, 1, 1, 1, TP_OP_RELU6), {L_POOL, 0, 2, 2, 2, 2, 0, 0, 1, 1, 1, false, true, NONE, -1, 0},
           CONV(4, 1, 1, 0, 1, 1, NONE)}},
         1, 1},
        {{"direct: stride 3, dilation 2, silu, 1 channel, batch 2", 2, 1, 20, 25, 2,
          {CONV(33, 3, 3, 2, 2, 1, TP_OP_SILU), CONV(4, 1, 1, 0, 1, 1, NONE)}},
         1, 0},
        {{"direct: 5x1 kernel, strides (1, 2), no bias, gelu, 4 channels", 1, 4, 11, 14, 2,
          {{L_CONV, 16, 5, 1, 1, 2, 2, 0, 1, 1, 1, false, false, TP_OP_GELU, -1, 0}, CONV(4, 1, 1, 0, 1, 1, NONE)}},
         1, 0},
        {{"direct: a residual", 1, 2, 9, 10, 3,
          {CONV(4, 3, 1, 1, 1, 1, RELU), {L_CONV, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, RELU, 1, 0},
           CONV(4, 1, 1, 0, 1, 1, NONE)}},
         2, 0},
        {{"direct: a pool whose input another step reads", 1, 3, 12, 13, 4,
          {CONV(8, 3, 1, 1, 1, 1, RELU), {L_POOL, 0, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false, NONE, -1, 0},
           {L_ADD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, NONE, 1, 0}, CONV(4, 1, 1, 0, 1, 1, NONE)}},
         1, 0},
        {{"direct: NHWC input", 1, 3, 14, 16, 3,
          {{L_POOL, 0, 2, 2, 2, 2, 0, 0, 1, 1, 1, false, false, NONE, -1, 0}, CONV(24, 3, 1, 1, 1, 1, RELU),
           CONV(4, 1, 1, 0, 1, 1, NONE)}},
         1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        built b;
        if (!build_net(&cases[i].c, &b)) continue;
        counts cnt;
        check_thread_counts(&b, cases[i].c.label, &cnt);
        CHECK_MSG(cnt.direct == (on ? cases[i].direct : 0) && cnt.dpool == (on ? cases[i].dpool : 0),
                  "%s: %d direct convolutions (%d pooling), want %d (%d)", cases[i].c.label, cnt.direct, cnt.dpool,
                  on ? cases[i].direct : 0, on ? cases[i].dpool : 0);
        compare_levels(&b, cases[i].c.label, 1, -1);
    }
}

/* A depthwise convolution whose output only a pointwise convolution reads
 * runs inside it (fuse_dws: the projection's GEMM computes it into A a
 * block at a time): the net's output matches the reference, bitwise the
 * same at 1, 2 and 3 threads, with the depthwise step gone and the
 * projection on dw+gemm-nhwc exactly as often as expected. Cases: an
 * inverted-residual block (relu6 expansion, depthwise, projection with
 * the block's residual), hardtanh(0, 6) (ONNX's relu6) after the
 * depthwise convolution, stride 2 with a 5x5 kernel, 20 channels (partial
 * vectors at both ISA levels) and batch 3, 3x3 stride 2 on 20 channels
 * (the 3x3 kernel's masked last vector), stride (2, 1) with padding
 * (0, 1) and silu (an activation applied to each filled block), 1000
 * channels on 7x7 maps (several K blocks of 143 channels, each ending in a
 * masked vector; threads may split the columns),
 * and three that must not fuse: a multiplier of 2, a 17 x 3 kernel (the
 * fill keeps 16 row pointers), and a depthwise output
 * that is also the projection's residual. The fill runs a 3x3 stride-1
 * kernel three whole output rows at a time where its block holds them,
 * else a row or part of one at a time: the thread counts' blocks group the
 * rows differently, so the bitwise comparison checks that grouping too
 * (it fails with one tap's weight swapped in the grouped form).
 * TP_CONV_GEMM=0, TP_FUSE_DW=0 and the AVX2 level fuse none. */
/* Build case c (input times x_scale) and run it at 1, 2 and 3 threads:
 * bitwise the same, each run with dw fused depthwise projections (ex of
 * them computing their expansion too) in steps steps. Returns the built
 * program and input (b->p NULL when building failed) and the 1-thread
 * output (the caller frees all three). */
static tp_tensor *run_fused_1_to_3(const net_case *c, float x_scale, int dw, int ex, int steps, built *b) {
    *b = build(c);
    if (!b->p || !b->x) {
        tp_program_free(b->p);
        tp_tensor_free(b->x);
        b->p = NULL;
        b->x = NULL;
        return NULL;
    }
    float *xd = tp_tensor_data(b->x);
    for (int64_t k = 0; k < tp_tensor_numel(b->x); k++) xd[k] *= x_scale;
    counts cnt;
    tp_tensor *one = run(b, TP_CPU_AUTO, 1, &cnt);
    CHECK_MSG(!one || (cnt.dw == dw && cnt.ex == ex && cnt.steps == steps),
              "%s: %d fused depthwise projections (%d with their expansion) in %d steps, want %d (%d) in %d", c->label,
              cnt.dw, cnt.ex, cnt.steps, dw, ex, steps);
    for (int th = 2; one && th <= 3; th++) {
        tp_tensor *got = run(b, TP_CPU_AUTO, th, &cnt);
        CHECK_MSG(got && tp_tensor_numel(got) == tp_tensor_numel(one) &&
                      memcmp(tp_tensor_data(got), tp_tensor_data(one), (size_t)tp_tensor_numel(one) * sizeof(float)) ==
                          0,
                  "%s: %d threads not bitwise equal to 1 thread", c->label, th);
        CHECK_MSG(!got || (cnt.dw == dw && cnt.ex == ex), "%s, %d threads: %d fused depthwise projections (%d), want %d (%d)",
                  c->label, th, cnt.dw, cnt.ex, dw, ex);
        tp_tensor_free(got);
    }
    return one;
}

/* relu6 expansion 16 -> 48, depthwise 3x3, projection to 16 with the
 * block's residual, then a 3x3 tail */
#define INVERTED_RESIDUAL                                                                                           \
    {CONV(16, 3, 1, 1, 1, 1, RELU), CONV(48, 1, 1, 0, 1, 1, TP_OP_RELU6), CONV(48, 3, 1, 1, 1, 48, TP_OP_RELU6),      \
     {L_CONV, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false, NONE, 1, 0}, CONV(4, 3, 1, 1, 1, 1, NONE)}

TEST(test_fused_depthwise) {
    const bool off = env_is("TP_CONV_GEMM", "0") || env_is("TP_FUSE_DW", "0") || !avx512_in_effect();
    const struct {
        net_case c;
        int fused;
        float x_scale; /* the input times this: relu6 clamps at 6 too */
    } cases[] = {
        {{"inverted residual, stride 1", 1, 3, 13, 11, 5,
          INVERTED_RESIDUAL},
         1, 1.0f},
        {{"inverted residual, relu6 clamping", 1, 3, 13, 11, 5,
          INVERTED_RESIDUAL},
         1, 30.0f},
        {{"hardtanh(0, 6) after the depthwise convolution, clamping", 1, 3, 13, 11, 4,
          {CONV(16, 3, 1, 1, 1, 1, RELU), CONV(16, 3, 1, 1, 1, 16, TP_OP_HARDTANH), CONV(8, 1, 1, 0, 1, 1, NONE),
           CONV(4, 3, 1, 1, 1, 1, NONE)}},
         1, 30.0f},
        {{"5x5 stride 2, 20 channels, batch 3", 3, 3, 15, 12, 4,
          {CONV(20, 3, 1, 1, 1, 1, RELU), CONV(20, 5, 2, 2, 1, 20, NONE), CONV(24, 1, 1, 0, 1, 1, NONE),
           CONV(4, 3, 1, 1, 1, 1, NONE)}},
         1, 1.0f},
        {{"3x3 stride 2, 20 channels", 1, 3, 13, 11, 4,
          {CONV(20, 3, 1, 1, 1, 1, RELU), CONV(20, 3, 2, 1, 1, 20, TP_OP_RELU6), CONV(24, 1, 1, 0, 1, 1, NONE),
           CONV(4, 3, 1, 1, 1, 1, NONE)}},
         1, 1.0f},
        {{"stride (2, 1), padding (0, 1), silu, batch 2", 2, 3, 12, 9, 4,
          {CONV(24, 3, 1, 1, 1, 1, RELU), {L_CONV, 24, 3, 3, 2, 1, 0, 1, 1, 1, 24, true, false, TP_OP_SILU, -1, 0},
           CONV(8, 1, 1, 0, 1, 1, RELU), CONV(4, 3, 1, 1, 1, 1, NONE)}},
         1, 1.0f},
        {{"7x7 maps, 1000 channels", 1, 8, 7, 7, 4,
          {CONV(1000, 3, 1, 1, 1, 1, TP_OP_RELU6), CONV(1000, 3, 1, 1, 1, 1000, TP_OP_RELU6),
           CONV(40, 1, 1, 0, 1, 1, NONE), CONV(4, 3, 1, 1, 1, 1, NONE)}},
         1, 1.0f},
        {{"multiplier 2: not fused", 1, 3, 10, 9, 4,
          {CONV(16, 3, 1, 1, 1, 1, RELU), CONV(32, 3, 1, 1, 1, 16, TP_OP_RELU6), CONV(16, 1, 1, 0, 1, 1, NONE),
           CONV(4, 3, 1, 1, 1, 1, NONE)}},
         0, 1.0f},
        /* more kernel rows than the fill keeps pointers for */
        {{"17 x 3 kernel: not fused", 1, 3, 20, 9, 4,
          {CONV(16, 3, 1, 1, 1, 1, RELU), {L_CONV, 16, 17, 3, 1, 1, 8, 1, 1, 1, 16, true, false, TP_OP_RELU6, -1, 0},
           CONV(8, 1, 1, 0, 1, 1, NONE), CONV(4, 3, 1, 1, 1, 1, NONE)}},
         0, 1.0f},
        {{"depthwise output also the residual: not fused", 1, 3, 10, 9, 4,
          {CONV(16, 3, 1, 1, 1, 1, RELU), CONV(16, 3, 1, 1, 1, 16, TP_OP_RELU6),
           {L_CONV, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false, NONE, 2, 0}, CONV(4, 3, 1, 1, 1, 1, NONE)}},
         0, 1.0f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const net_case *c = &cases[i].c;
        const int fused = off ? 0 : cases[i].fused;
        built b;
        tp_tensor *one = run_fused_1_to_3(c, cases[i].x_scale, fused, 0, c->n_layers - fused, &b);
        if (!b.p) continue;
        tp_tensor_free(one);
        compare_levels(&b, c->label, c->n_layers - fused, c->n_layers - fused);
    }
}

/* An expansion (a pointwise convolution whose output only the fused
 * depthwise convolution reads) computed inside the projection too
 * (tp_conv_dw.ex_cin: its rows into a ring as the depthwise fill needs
 * them), here for any size (tp__onednn_test_fuse_ex_min; by default only
 * outputs of 4 MiB or more per image, so test_fused_depthwise's inverted
 * residual keeps its expansion): the output matches the reference,
 * bitwise the same at 1, 2 and 3 threads, both steps gone. Cases: relu6
 * expansion clamping, 5x5 stride 2 with 20 -> 40 channels (partial
 * vectors) at batch 3 and no activation, silu (the activation's pass over
 * each row) with stride (2, 1) and padding (0, 1), relu (in the GEMM's
 * registers) on 64 x 40 maps (several fill blocks per thread: the ring
 * kept between them, rows recomputed at the threads' borders), 3-row maps
 * (a call's first rows are the ones the last call's ring ends with; every
 * case also checks a call on another input after a first), and an
 * expansion output also read by another convolution (not fused; its
 * depthwise convolution is). */
TEST(test_fused_expansion) {
    const bool off = env_is("TP_CONV_GEMM", "0") || env_is("TP_FUSE_DW", "0") || !avx512_in_effect();
    /* where the depthwise convolution is not fused, the last case's
     * projection takes the convolution making its residual instead
     * (fuse_cats), when it runs our GEMM: at the AVX-512 level or with
     * TP_CONV_GEMM set (not 0), unless TP_FUSE_CAT=0 */
    const bool cat_on = !env_is("TP_FUSE_CAT", "0") && !env_is("TP_CONV_GEMM", "0") &&
                        (avx512_in_effect() || getenv("TP_CONV_GEMM"));
    const struct {
        net_case c;
        int ex;
        float x_scale;
        int cat; /* fused projections (fuse_cats) where the depthwise convolution is not fused */
    } cases[] = {
        {{"inverted residual, relu6 expansion clamping", 1, 3, 13, 11, 5, INVERTED_RESIDUAL}, 1, 30.0f, 0},
        {{"5x5 stride 2, 20 -> 40 channels, no activation, batch 3", 3, 3, 15, 12, 5,
          {CONV(20, 3, 1, 1, 1, 1, RELU), CONV(40, 1, 1, 0, 1, 1, NONE), CONV(40, 5, 2, 2, 1, 40, NONE),
           CONV(24, 1, 1, 0, 1, 1, NONE), CONV(4, 3, 1, 1, 1, 1, NONE)}},
         1, 1.0f, 0},
        {{"silu expansion, stride (2, 1), padding (0, 1), batch 2", 2, 3, 12, 9, 5,
          {CONV(24, 3, 1, 1, 1, 1, RELU), CONV(72, 1, 1, 0, 1, 1, TP_OP_SILU),
           {L_CONV, 72, 3, 3, 2, 1, 0, 1, 1, 1, 72, true, false, TP_OP_SILU, -1, 0}, CONV(8, 1, 1, 0, 1, 1, RELU),
           CONV(4, 3, 1, 1, 1, 1, NONE)}},
         1, 1.0f, 0},
        {{"relu expansion, 64 x 40 maps", 1, 3, 64, 40, 5,
          {CONV(16, 3, 1, 1, 1, 1, RELU), CONV(32, 1, 1, 0, 1, 1, RELU), CONV(32, 3, 1, 1, 1, 32, TP_OP_RELU6),
           CONV(16, 1, 1, 0, 1, 1, NONE), CONV(4, 3, 1, 1, 1, 1, NONE)}},
         1, 1.0f, 0},
        /* each thread's ring ends a call holding the rows its next call
         * starts with (the run's first fill must forget them) */
        {{"3 x 17 maps", 1, 3, 3, 17, 5,
          {CONV(16, 3, 1, 1, 1, 1, RELU), CONV(32, 1, 1, 0, 1, 1, TP_OP_RELU6), CONV(32, 3, 1, 1, 1, 32, NONE),
           CONV(8, 1, 1, 0, 1, 1, NONE), CONV(4, 3, 1, 1, 1, 1, NONE)}},
         1, 1.0f, 0},
        {{"expansion output read twice: not fused", 1, 3, 10, 9, 6,
          {CONV(16, 3, 1, 1, 1, 1, RELU), CONV(32, 1, 1, 0, 1, 1, TP_OP_RELU6), CONV(32, 3, 1, 1, 1, 32, TP_OP_RELU6),
           CONV(16, 1, 1, 0, 1, 1, NONE), {L_CONV, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false, NONE, 4, 3},
           CONV(4, 3, 1, 1, 1, 1, NONE)}},
         0, 1.0f, 1},
    };
    tp__onednn_test_fuse_ex_min(1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const net_case *c = &cases[i].c;
        const int ex = off ? 0 : cases[i].ex, fused = off ? (cat_on ? cases[i].cat : 0) : 1 + cases[i].ex;
        counts cnt;
        built b;
        tp_tensor *one = run_fused_1_to_3(c, cases[i].x_scale, off ? 0 : 1, ex, c->n_layers - fused, &b);
        if (!b.p) continue;
        /* a call after one on another input: nothing of the first call's
         * rows is reused (the output is a fresh context's, one input later) */
        tp_tensor *x2 = NULL;
        CHECK_OK(tp_tensor_clone(b.x, &x2));
        for (int64_t k = 0; x2 && k < tp_tensor_numel(x2); k++) ((float *)tp_tensor_data(x2))[k] *= -0.5f;
        tp_run_options opt;
        tp_run_options_init(&opt);
        opt.num_threads = 2;
        tp_run *r = NULL;
        CHECK_OK(tp_run_new(b.p, &opt, &r));
        CHECK_OK(tp_run_execute(r, (tp_tensor *[]){b.x}, 1, NULL, 0));
        CHECK_OK(tp_run_execute(r, (tp_tensor *[]){x2}, 1, NULL, 0));
        tp_tensor *second = NULL;
        if (r) CHECK_OK(tp_tensor_clone(tp_run_output(r, 0), &second));
        tp_run_free(r);
        built b2 = {b.p, x2};
        tp_tensor *fresh = run(&b2, TP_CPU_AUTO, 2, &cnt);
        CHECK_MSG(second && fresh &&
                      memcmp(tp_tensor_data(second), tp_tensor_data(fresh),
                             (size_t)tp_tensor_numel(fresh) * sizeof(float)) == 0,
                  "%s: a second call on another input differs from a first", c->label);
        tp_tensor_free(second);
        tp_tensor_free(fresh);
        tp_tensor_free(x2);
        tp_tensor_free(one);
        compare_levels(&b, c->label, c->n_layers - fused, c->n_layers - fused);
    }
    tp__onednn_test_fuse_ex_min(-1);
}

/* A convolution summing a residual that only another convolution's
 * output is (a projection shortcut beside a block's last convolution)
 * computes both in one GEMM (fuse_cats: cat+gemm-nhwc, one step fewer):
 * the net's output matches the reference kernels, bitwise the same at 1,
 * 2 and 3 threads. Cases: ResNet-50's downsampling block (1x1 stride 2
 * projection, 1x1 last convolution, both NHWC), its stride-1 form at
 * batch 3 with odd sizes, 300 + 200 channels (K blocks that cross from one
 * convolution's patches to the other's), a 3x3 stride-2 projection
 * whose partner reads the NCHW user input (gathered from planes), and
 * two that must not fuse: a residual read again after the sum, and a
 * partner with an activation of its own. The projection runs our GEMM at
 * the AVX-512 level (a 3x3 one at the AVX2 level too) or with
 * TP_CONV_GEMM=1, 2 or 4; none fuse with TP_CONV_GEMM=0 or TP_FUSE_CAT=0. */
TEST(test_fused_projection) {
    const char *gc = getenv("TP_CONV_GEMM");
    const bool off = env_is("TP_CONV_GEMM", "0") || env_is("TP_FUSE_CAT", "0");
    const bool avx512 = avx512_in_effect();
    const bool forced = gc && strcmp(gc, "0") != 0;
    const struct {
        net_case c;
        bool any_level; /* the projection is a spatial one: our GEMM at the AVX2 level too */
        int cat;        /* fused steps where the projection runs our GEMM */
    } cases[] = {
        {{"resnet-50 downsampling block", 1, 3, 16, 16, 6,
          {CONV(32, 3, 1, 1, 1, 1, RELU), CONV(16, 1, 1, 0, 1, 1, RELU), CONV(16, 3, 2, 1, 1, 1, RELU),
           CONV(64, 1, 1, 0, 1, 1, NONE), {L_CONV, 64, 1, 1, 2, 2, 0, 0, 1, 1, 1, true, false, RELU, 4, 2},
           CONV(4, 1, 1, 0, 1, 1, NONE)}},
         false, 1},
        {{"stride-1 projection, batch 3, 11 x 9", 3, 3, 11, 9, 6,
          {CONV(24, 3, 1, 1, 1, 1, RELU), CONV(8, 1, 1, 0, 1, 1, RELU), CONV(8, 3, 1, 1, 1, 1, RELU),
           CONV(40, 1, 1, 0, 1, 1, NONE), {L_CONV, 40, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false, RELU, 4, 2},
           CONV(4, 3, 1, 1, 1, 1, NONE)}},
         false, 1},
        {{"300 + 200 channels", 1, 3, 10, 14, 5,
          {CONV(200, 3, 1, 1, 1, 1, RELU), CONV(300, 3, 2, 1, 1, 1, RELU), CONV(48, 1, 1, 0, 1, 1, NONE),
           {L_CONV, 48, 1, 1, 2, 2, 0, 0, 1, 1, 1, true, false, TP_OP_SILU, 3, 2}, CONV(4, 1, 1, 0, 1, 1, NONE)}},
         false, 1},
        {{"3x3 stride-2 projection, partner on the NCHW input", 1, 16, 16, 16, 3,
          {{L_CONV, 32, 1, 1, 2, 2, 0, 0, 1, 1, 1, false, false, NONE, -1, 0},
           {L_CONV, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, false, RELU, 1, 1}, CONV(4, 1, 1, 0, 1, 1, NONE)}},
         true, 1},
        {{"a residual read again after the sum", 1, 3, 12, 12, 5,
          {CONV(32, 3, 1, 1, 1, 1, RELU), CONV(32, 1, 1, 0, 1, 1, NONE),
           {L_CONV, 32, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false, RELU, 2, 2},
           {L_ADD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, NONE, 2, 0}, CONV(4, 1, 1, 0, 1, 1, NONE)}},
         false, 0},
        {{"a partner with its own activation", 1, 3, 12, 12, 4,
          {CONV(32, 3, 1, 1, 1, 1, RELU), CONV(32, 1, 1, 0, 1, 1, RELU),
           {L_CONV, 32, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false, RELU, 2, 2}, CONV(4, 1, 1, 0, 1, 1, NONE)}},
         false, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const net_case *c = &cases[i].c;
        built b;
        if (!build_net(c, &b)) continue;
        const int want = off || !(avx512 || forced || cases[i].any_level) ? 0 : cases[i].cat;
        counts cnt;
        tp_tensor *one = run(&b, TP_CPU_AUTO, 1, &cnt);
        CHECK_MSG(!one || (cnt.cat == want && cnt.steps == c->n_layers - want),
                  "%s: %d fused projections in %d steps, want %d in %d", c->label, cnt.cat, cnt.steps, want,
                  c->n_layers - want);
        for (int th = 2; one && th <= 3; th++) {
            tp_tensor *got = run(&b, TP_CPU_AUTO, th, &cnt);
            CHECK_MSG(got && tp_tensor_numel(got) == tp_tensor_numel(one) &&
                          memcmp(tp_tensor_data(got), tp_tensor_data(one),
                                 (size_t)tp_tensor_numel(one) * sizeof(float)) == 0,
                      "%s: %d threads not bitwise equal to 1 thread", c->label, th);
            CHECK_MSG(!got || cnt.cat == want, "%s, %d threads: %d fused projections, want %d", c->label, th, cnt.cat,
                      want);
            tp_tensor_free(got);
        }
        tp_tensor_free(one);
        compare_levels(&b, c->label, 0, -1);
    }
}

/* Planning and running nets with every allocation failing in turn:
 * TP_ERR_NOMEM, nothing leaked (LeakSanitizer sees oneDNN's objects too).
 * The first net's convolutions take our NHWC paths (the implicit GEMM and
 * Winograd on AVX2-only CPUs or with TP_CONV_GEMM=1/2), the others oneDNN's
 * convolutions with a bias, a residual sum, pools, a unary and a binary
 * step, and a squeeze-excitation block (its mean on our loop, its multiply
 * fused into the projection: fuse_scales' allocation), a fused depthwise
 * convolution, a projection shortcut summed with its partner (fuse_cats), a
 * two-block mean and a fused expansion. A copy of the program each time: a
 * program keeps the plans it built. */
static tp_status plan_and_run(void *ctx) {
    const built *b = ctx;
    tp_program *p = NULL;
    tp_status st = tp_program_copy(b->p, &p);
    tp_run_options opt;
    tp_run_options_init(&opt);
    opt.num_threads = 2;
    tp_run *r = NULL;
    if (st == TP_OK) st = tp_run_new(p, &opt, &r);
    if (st == TP_OK) st = tp_run_execute(r, (tp_tensor *[]){b->x}, 1, NULL, 0);
    tp_run_free(r);
    tp_program_free(p);
    return st;
}

TEST(test_alloc_failures) {
    const net_case nets[] = {
        {"gemm/winograd convolutions", 1, 16, 15, 13, 3,
         {CONV(16, 3, 1, 1, 1, 1, RELU), CONV(24, 3, 2, 1, 1, 1, NONE), CONV(4, 1, 1, 0, 1, 1, NONE)}},
        {"resnet block", 1, 3, 12, 11, 5,
         {CONV(8, 7, 2, 3, 1, 1, RELU),
          {L_POOL, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, false, NONE, -1, 0},
          CONV(8, 3, 1, 1, 1, 1, RELU),
          {L_CONV, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, RELU, 2, 0},
          CONV(4, 1, 1, 0, 1, 1, NONE)}},
        {"pools, unary, add", 1, 3, 11, 9, 6,
         {CONV(8, 3, 1, 1, 1, 1, RELU),
          {L_POOL, 0, 3, 3, 2, 2, 0, 0, 1, 1, 1, false, true, NONE, -1, 0},
          {L_UNARY, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, TP_OP_TANH, -1, 0},
          {L_POOL, 0, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false, NONE, -1, 0},
          {L_ADD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, NONE, 3, 0},
          CONV(4, 1, 1, 0, 1, 1, NONE)}},
        {"squeeze-excitation fused into its projection, a mean", 1, 3, 9, 11, 5,
         {CONV(16, 3, 1, 1, 1, 1, TP_OP_SILU),
          CONV(16, 3, 1, 1, 1, 16, TP_OP_SILU),
          {L_SE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, true, NONE, 2, 0},
          CONV(8, 1, 1, 0, 1, 1, NONE),
          CONV(8, 3, 1, 1, 1, 1, NONE)}},
        /* 17 x 17 pixels: two blocks of sums, whose count of finished
         * threads lives in the run context (gmean_ctx_new) */
        {"a depthwise convolution fused into its projection", 1, 3, 9, 8, 4,
         {CONV(16, 3, 1, 1, 1, 1, RELU), CONV(16, 3, 2, 1, 1, 16, TP_OP_RELU6), CONV(8, 1, 1, 0, 1, 1, NONE),
          CONV(4, 3, 1, 1, 1, 1, NONE)}},
        /* the projection shortcut's partner summed in its GEMM (fuse_cats' allocations) */
        {"a projection shortcut and its partner in one product", 1, 3, 12, 12, 6,
         {CONV(32, 3, 1, 1, 1, 1, RELU), CONV(16, 1, 1, 0, 1, 1, RELU), CONV(16, 3, 2, 1, 1, 1, RELU),
          CONV(64, 1, 1, 0, 1, 1, NONE), {L_CONV, 64, 1, 1, 2, 2, 0, 0, 1, 1, 1, true, false, RELU, 4, 2},
          CONV(4, 1, 1, 0, 1, 1, NONE)}},
        {"a mean over two blocks of pixels", 1, 3, 17, 17, 2,
         {CONV(8, 3, 1, 1, 1, 1, RELU), {L_MEAN, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, NONE, -1, 0}}},
        /* with every expansion fused (the last net only) */
        {"an expansion and a depthwise convolution fused into their projection", 1, 3, 9, 8, 5,
         {CONV(16, 3, 1, 1, 1, 1, RELU), CONV(32, 1, 1, 0, 1, 1, TP_OP_RELU6), CONV(32, 3, 2, 1, 1, 32, TP_OP_RELU6),
          CONV(8, 1, 1, 0, 1, 1, NONE), CONV(4, 3, 1, 1, 1, 1, NONE)}},
    };
    const size_t n_nets = sizeof nets / sizeof nets[0];
    for (size_t i = 0; i < n_nets; i++) {
        built b = build(&nets[i]);
        if (i == n_nets - 1) tp__onednn_test_fuse_ex_min(1);
        long n = b.p && b.x ? check_alloc_failures(nets[i].label, plan_and_run, &b) : 0;
        tp__onednn_test_fuse_ex_min(-1);
        printf("  %s: %ld allocations, each failed in turn\n", nets[i].label, n);
        CHECK(n > 0);
        tp_tensor_free(b.x);
        tp_program_free(b.p);
    }
}

TEST(test_regions) {
    const net_case nets[] = {
        {"resnet block", 1, 3, 20, 18, 5,
         {CONV(16, 7, 2, 3, 1, 1, RELU),
          {L_POOL, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, false, NONE, -1, 0},
          CONV(16, 3, 1, 1, 1, 1, RELU),
          {L_CONV, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, RELU, 2, 0},
          CONV(8, 1, 1, 0, 1, 1, NONE)}},
        {"resnet block batch 3", 3, 3, 12, 12, 4,
         {CONV(16, 3, 1, 1, 1, 1, RELU),
          CONV(16, 3, 1, 1, 1, 1, RELU),
          {L_CONV, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false, RELU, 1, 0},
          CONV(4, 1, 1, 0, 1, 1, NONE)}},
        {"downsample residual", 1, 3, 16, 16, 5,
         {CONV(8, 3, 1, 1, 1, 1, RELU),
          CONV(16, 3, 2, 1, 1, 1, RELU),
          CONV(16, 3, 1, 1, 1, 1, NONE),
          {L_CONV, 16, 1, 1, 2, 2, 0, 0, 1, 1, 1, true, false, RELU, 3, 2},
          CONV(4, 1, 1, 0, 1, 1, NONE)}},
        {"pools: ceil mode, unary, add", 1, 3, 19, 17, 6,
         {CONV(8, 3, 1, 1, 1, 1, RELU),
          {L_POOL, 0, 3, 3, 2, 2, 0, 0, 1, 1, 1, false, true, NONE, -1, 0},
          {L_UNARY, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, TP_OP_TANH, -1, 0},
          {L_POOL, 0, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false, NONE, -1, 0},
          {L_ADD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, NONE, 3, 0},
          CONV(4, 1, 1, 0, 1, 1, NONE)}},
        {"squeeze-excitation", 1, 3, 14, 14, 5,
         {CONV(16, 3, 1, 1, 1, 1, TP_OP_SILU),
          CONV(16, 3, 1, 1, 1, 16, TP_OP_SILU),
          CONV(16, 1, 1, 0, 1, 1, NONE),
          {L_SE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, NONE, 2, 0},
          CONV(8, 1, 1, 0, 1, 1, NONE)}},
        {"squeeze-excitation, scale first, batch 3", 3, 3, 9, 11, 5,
         {CONV(16, 3, 1, 1, 1, 1, TP_OP_SILU),
          CONV(16, 3, 1, 1, 1, 16, TP_OP_SILU),
          {L_SE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, true, NONE, 2, 0},
          CONV(8, 1, 1, 0, 1, 1, NONE),
          CONV(8, 3, 1, 1, 1, 1, NONE)}},
        {"pools at both edges", 2, 3, 14, 13, 5,
         {{L_POOL, 0, 2, 2, 2, 2, 0, 0, 1, 1, 1, false, true, NONE, -1, 0},
          CONV(8, 3, 1, 1, 1, 1, RELU),
          CONV(8, 3, 1, 1, 1, 1, RELU),
          {L_UNARY, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, TP_OP_SIGMOID, -1, 0},
          {L_POOL, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, false, NONE, -1, 0}}},
        {"average pools", 1, 3, 16, 16, 6,
         {CONV(8, 3, 1, 1, 1, 1, RELU),
          {L_AVG, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, false, NONE, -1, 0},
          CONV(8, 3, 1, 1, 1, 1, RELU),
          {L_AVG, 0, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false, NONE, -1, 0},
          {L_ADAPT, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, NONE, -1, 0},
          CONV(4, 1, 1, 0, 1, 1, NONE)}},
        {"x + conv1x1(x) (our GEMM where brgemm runs)", 1, 3, 12, 13, 3,
         {CONV(24, 3, 1, 1, 1, 1, RELU),
          {L_CONV, 24, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false, RELU, 1, 0},
          CONV(4, 3, 1, 1, 1, 1, NONE)}},
        {"x + conv(x)", 1, 3, 20, 17, 3,
         {CONV(8, 3, 1, 1, 1, 1, RELU),
          {L_CONV, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, RELU, 1, 0},
          CONV(4, 3, 1, 1, 1, 1, NONE)}},
        {"pools cut into row bands", 1, 3, 64, 64, 4,
         {CONV(32, 3, 1, 1, 1, 1, RELU),
          {L_POOL, 0, 3, 3, 2, 2, 0, 0, 1, 1, 1, false, true, NONE, -1, 0},
          {L_AVG, 0, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, NONE, -1, 0},
          CONV(8, 1, 1, 0, 1, 1, NONE)}},
        {"mobilenet block batch 3", 3, 3, 15, 15, 5,
         {CONV(16, 3, 2, 1, 1, 1, TP_OP_RELU6),
          CONV(32, 1, 1, 0, 1, 1, TP_OP_RELU6),
          CONV(32, 3, 1, 1, 1, 32, TP_OP_RELU6),
          {L_CONV, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false, NONE, 1, 0},
          CONV(8, 1, 1, 0, 1, 1, NONE)}},
    };
    /* steps expected on oneDNN: every one (the SE block's sigmoid on the
     * [N, C, 1, 1] result; its mean over H and W written by the depthwise
     * convolution before it: fuse_means); exactly that many for the SE
     * blocks: the first keeps its multiply (the projection after it writes
     * the NCHW output, which our GEMM does not), the second's projection
     * takes it (fuse_scales: 5 steps, not 6) */
    /* TP_CONV_GEMM=0 (test_onednn_onednn_only) keeps every convolution on
     * oneDNN, which cannot take the scale: the multiply stays a step of
     * its own, a oneDNN binary one (7, not 6) */
    const char *gc = getenv("TP_CONV_GEMM");
    const int unfused = env_is("TP_CONV_GEMM", "0") ? 1 : 0;
    /* the mobilenet block's depthwise convolution runs inside its
     * projection (fuse_dws: 4 steps, not 5), unless every convolution
     * stays on oneDNN, TP_FUSE_DW=0 or below the AVX-512 level */
    const int dw_kept = unfused || env_is("TP_FUSE_DW", "0") || !avx512_in_effect() ? 1 : 0;
    /* "pools at both edges": its first max pool reads the NCHW input,
     * which oneDNN's pooling would take but drops NaN in: our kernel runs
     * it (4 oneDNN steps, not 5) */
    /* "downsample residual": its last 3x3 convolution (8x8 map: our GEMM's
     * few-pixel rule, not Winograd) summed in its 1x1 projection's GEMM
     * (fuse_cats: 4 steps, not 5) where the projection runs our GEMM: at
     * the AVX-512 level (brgemm's rules) or with TP_CONV_GEMM=1; not with
     * 0, nor with 2 or 4 (the 3x3 one then runs Winograd), TP_FUSE_CAT=0
     * or at the AVX2 level (the 1x1 one stays on oneDNN) */
    const int cat_kept =
        env_is("TP_FUSE_CAT", "0") || (gc && strcmp(gc, "1") != 0) || (!gc && !avx512_in_effect()) ? 1 : 0;
    /* "resnet block", "pools: ceil mode, ..." and "pools cut into row
     * bands": the first convolution (3 input channels) runs the direct
     * kernel, which takes the max pool after it (fuse_pools: one step
     * fewer) at the AVX-512 level with TP_CONV_GEMM unset */
    const int dpool = !gc && avx512_in_effect() ? 1 : 0;
    const int expect[] = {5 - dpool, 4, 4 + cat_kept, 6 - dpool, 6, 5 + unfused, 4, 6, 3, 3, 4 - dpool, 4 + dw_kept};
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++)
        check_net_range(&nets[i], expect[i], i == 2 || i == 4 || i == 5 || i == 11 ? expect[i] : -1);
    /* the multiply fused into the projection, which scales A's blocks as
     * it fills them: 600 channels (two K blocks: the scale's offset) at
     * batch 1 (one scale vector); and an NCHW user input scaled (A
     * gathered from planes). Every step but the multiply on oneDNN or our
     * GEMM, exactly. */
    const net_case se_wide = {"squeeze-excitation into a projection, 600 channels", 1, 3, 5, 7, 5,
                              {CONV(600, 3, 1, 1, 1, 1, TP_OP_SILU),
                               CONV(600, 3, 1, 1, 1, 600, TP_OP_SILU),
                               {L_SE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, NONE, 2, 0},
                               CONV(24, 1, 1, 0, 1, 1, NONE),
                               CONV(4, 3, 1, 1, 1, 1, NONE)}};
    check_net_range(&se_wide, 5 + unfused, 5 + unfused);
    /* batch 3, a scale vector per image, 16 input channels and 8 outputs
     * (16 packed columns) over 99 pixels: the projection scales a copy of
     * its weights per image and reads A in place (tp__conv_nhwc_scale_b,
     * 2 x threads x 16 <= 99). Each image's input is shifted by 1.5 times
     * its index so the images' scales differ widely: weights scaled with
     * another image's scales are caught. */
    built sb = build(&nets[5]);
    if (sb.p && sb.x) {
        float *xd = tp_tensor_data(sb.x);
        const int64_t per = tp_tensor_numel(sb.x) / 3;
        for (int64_t i = 0; i < 3 * per; i++) xd[i] += 1.5f * (float)(i / per);
        compare_levels(&sb, "squeeze-excitation, scale first, images shifted apart", 5 + unfused, 5 + unfused);
    } else {
        tp_program_free(sb.p);
        tp_tensor_free(sb.x);
    }
    const net_case se_input = {"squeeze-excitation of the NCHW input", 1, 20, 6, 9, 3,
                               {{L_SE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, true, NONE, 0, 0},
                                CONV(24, 1, 1, 0, 1, 1, NONE),
                                CONV(4, 3, 1, 1, 1, 1, NONE)}};
    check_net_range(&se_input, 4, 4);
    /* oneDNN has only a reference kernel for a dilated max pool, but one
     * between NHWC tensors runs the pass's own loop (max-nhwc): every step
     * stays in the region */
    const net_case fallback = {"dilated pool", 1, 3, 12, 12, 5,
                               {CONV(8, 3, 1, 1, 1, 1, RELU),
                                {L_POOL, 0, 2, 2, 1, 1, 1, 1, 2, 2, 1, false, false, NONE, -1, 0},
                                CONV(8, 1, 1, 0, 1, 1, RELU),
                                CONV(8, 3, 1, 1, 1, 1, RELU),
                                CONV(4, 1, 1, 0, 1, 1, NONE)}};
    check_net_range(&fallback, 5, 5);
    /* ... while one reading the NCHW input would be oneDNN's (it converts
     * at the region's edge), whose reference kernel the pass declines: the
     * pool keeps ours, NCHW, and the convolutions after it form a region */
    const net_case edge = {"dilated pool at the input", 1, 3, 12, 12, 3,
                           {{L_POOL, 0, 2, 2, 1, 1, 1, 1, 2, 2, 1, false, false, NONE, -1, 0},
                            CONV(8, 3, 1, 1, 1, 1, RELU),
                            CONV(4, 1, 1, 0, 1, 1, NONE)}};
    check_net_range(&edge, 2, 2);
    /* average pools oneDNN cannot reproduce keep our kernel (and NCHW around
     * them): a ceil-mode window past the padding counted with padding, a
     * divisor-free adaptive pool with unequal windows */
    const net_case ours = {"average pools oneDNN declines", 1, 3, 12, 13, 5,
                           {CONV(8, 3, 1, 1, 1, 1, RELU),
                            {L_AVG, 0, 2, 2, 2, 2, 0, 0, 1, 1, 1, true, true, NONE, -1, 0},
                            CONV(8, 1, 1, 0, 1, 1, RELU),
                            {L_ADAPT, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, NONE, -1, 0},
                            CONV(8, 1, 1, 0, 1, 1, NONE)}};
    check_net(&ours, 0);
}

/* conv1d chains: [N, C, L] runs as [N, C, 1, L], cut into column bands at
 * batch 1. x -> conv1d(k5, s2) relu -> conv1d(k3, p2, d2, groups) relu ->
 * conv1d(k1) -> mean over L, kept. */
static void check_conv1d(const char *label, int64_t n, int64_t c, int64_t len, int64_t groups) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    if (!g) return;
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    const int64_t ch[4] = {c, 16, 16, 8}, k[3] = {5, 3, 1}, st[3] = {2, 1, 1}, pd[3] = {0, 2, 0}, dl[3] = {1, 2, 1},
                  gr[3] = {1, groups, 1};
    tp_node *wn[3], *bn[3];
    tp_tensor *wt[3], *bt[3];
    char name[16];
    for (int i = 0; i < 3; i++) {
        int64_t ws[3] = {ch[i + 1], ch[i] / gr[i], k[i]};
        wt[i] = rand_t(3, ws, 2.0f / sqrtf((float)(ws[1] * k[i])));
        bt[i] = rand_t(1, &ch[i + 1], 0.5f);
        snprintf(name, sizeof name, "p_w%d", i);
        wn[i] = placeholder(g, name, 3, ws);
        CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor(name), name + 2, TP_PERSISTENT_UNSET));
        snprintf(name, sizeof name, "p_b%d", i);
        bn[i] = placeholder(g, name, 1, &ch[i + 1]);
        CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor(name), name + 2, TP_PERSISTENT_UNSET));
    }
    int64_t xs[3] = {n, c, len};
    tp_node *cur = placeholder(g, "x", 3, xs);
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    for (int i = 0; i < 3 && cur; i++) {
        tp_value a[7];
        a[0] = N(cur), a[1] = N(wn[i]), a[2] = N(bn[i]), a[6] = tp_value_int(gr[i]);
        CHECK_OK(tp_value_int_list(&st[i], 1, &a[3]));
        CHECK_OK(tp_value_int_list(&pd[i], 1, &a[4]));
        CHECK_OK(tp_value_int_list(&dl[i], 1, &a[5]));
        cur = call(g, TP_OP_CONV1D, 7, a);
        for (int q = 3; q < 6; q++) tp_value_clear(&a[q]);
        if (cur && i < 2) cur = call(g, TP_OP_RELU, 1, (tp_value[]){N(cur)});
    }
    if (cur) {
        int64_t dim = 2;
        tp_value a[3] = {N(cur), tp_value_none(), tp_value_bool(true)};
        CHECK_OK(tp_value_int_list(&dim, 1, &a[1]));
        cur = call(g, TP_OP_MEAN, 3, a);
        tp_value_clear(&a[1]);
    }
    built b = {0};
    if (cur) {
        output_nodes(g, 1, (tp_node *[]){cur});
        CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(cur)), NULL));
        CHECK_OK(tp_program_new(g, s, &b.p));
    } else {
        CHECK_MSG(false, "%s: building the graph: %s", label, tp_last_error());
        tp_graph_free(g);
        tp_signature_free(s);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "w%d", i);
        if (b.p) CHECK_OK(tp_program_set_state(b.p, name, TP_STATE_PARAMETER, wt[i], true));
        snprintf(name, sizeof name, "b%d", i);
        if (b.p) CHECK_OK(tp_program_set_state(b.p, name, TP_STATE_PARAMETER, bt[i], true));
        tp_tensor_free(wt[i]);
        tp_tensor_free(bt[i]);
    }
    if (!b.p) return;
    b.x = rand_t(3, xs, 2.0f);
    /* 4 steps on oneDNN, 3 with several images where oneDNN runs the last
     * convolution (1x1; TP_CONV_GEMM=1-4 give it to our GEMM): it then
     * writes the mean itself (fuse_means; one image's one-row map may be
     * cut into column bands, so it keeps its mean step) */
    const char *gc = getenv("TP_CONV_GEMM");
    const int steps = n > 1 && !(gc && strcmp(gc, "0") != 0) ? 3 : 4;
    compare_levels(&b, label, steps, steps);
}

/* Runs nets[i] at the reference level and at 1-4 threads: every run
 * within tolerance of the reference, the fast runs bitwise alike (the
 * result does not depend on the thread count), `means` steps of
 * mean-nhwc in each, and (steps >= 0) that many steps in all. */
/* The output at 1 thread kept in *first; another thread count's (got)
 * must equal it bit for bit, and is freed. */
static void keep_first(tp_tensor **first, tp_tensor *got, const char *label, int th) {
    if (!*first) {
        *first = got;
        return;
    }
    if (got)
        CHECK_MSG(memcmp(tp_tensor_data(got), tp_tensor_data(*first), (size_t)tp_tensor_numel(got) * sizeof(float)) == 0,
                  "%s: %d threads differ from 1 thread", label, th);
    tp_tensor_free(got);
}

static void free_run(built *b, tp_tensor *want, tp_tensor *first) {
    tp_tensor_free(first);
    tp_tensor_free(want);
    tp_tensor_free(b->x);
    tp_program_free(b->p);
}

static void check_means(const net_case *nets, size_t count, int means, int steps) {
    for (size_t i = 0; i < count; i++) {
        built b;
        if (!build_net(&nets[i], &b)) continue;
        counts cnt = {0};
        tp_tensor *want = run(&b, TP_CPU_REFERENCE, 1, &cnt), *first = NULL;
        for (int th = 1; want && th <= 4; th++) {
            cnt = (counts){0};
            tp_tensor *got = run(&b, TP_CPU_AUTO, th, &cnt);
            char msg[256] = "";
            CHECK_MSG(got && tp_tensor_allclose(got, want, 1e-5, 1e-5, msg, sizeof msg), "%s, %d threads: %s",
                      nets[i].label, th, got ? msg : "no result");
            CHECK_MSG(cnt.means == means, "%s, %d threads: %d steps ran mean-nhwc, want %d", nets[i].label, th,
                      cnt.means, means);
            CHECK_MSG(steps < 0 || cnt.steps == steps, "%s, %d threads: %d steps, want %d", nets[i].label, th,
                      cnt.steps, steps);
            keep_first(&first, got, nets[i].label, th);
        }
        free_run(&b, want, first);
    }
}

/* Max pools from NHWC to NHWC on the pass's own loop (max-nhwc), between
 * two pointwise convolutions: windows 3x3 stride 2 with padding,
 * 2x2 in ceil mode (a last window past the input), dilated 3x3, and 5x7
 * (35 taps: gathered 32 at a time, the rest compared on the stored
 * maximum), over 72 channels (AVX-512: a 64-channel block and a masked
 * rest; AVX2, test_onednn_avx2: two 32-channel blocks and an 8-lane
 * group), 24 and 16 (16-lane and 8-lane groups), 7 (a masked or scalar
 * rest only) and batch 3, and a pool that ends the region (its rows
 * transposed into the NCHW output). Each within tolerance of the reference, on exactly
 * one max-nhwc step, bitwise alike at 1-4 threads (rows split evenly);
 * with a NaN planted in the input, the NaNs the reference's pool passes on
 * (a NaN tap wins wherever it falls in the window) are the same. The
 * first convolution has no activation: oneDNN's relu post-op would turn
 * the NaNs into zeros before the pool sees them; and it is 1x1, which no
 * setting of TP_CONV_GEMM runs as Winograd (whose transforms spread a NaN
 * over whole tiles). */
TEST(test_max_pool_nhwc) {
    const net_case nets[] = {
        {"max 3x3 s2 p1, 72 channels, batch 3", 3, 3, 13, 11, 3,
         {CONV(72, 1, 1, 0, 1, 1, NONE), {L_POOL, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, false, NONE, -1, 0},
          CONV(4, 1, 1, 0, 1, 1, NONE)}},
        {"max 2x2 s2 ceil mode, 7 channels", 1, 3, 9, 11, 3,
         {CONV(7, 1, 1, 0, 1, 1, NONE), {L_POOL, 0, 2, 2, 2, 2, 0, 0, 1, 1, 1, false, true, NONE, -1, 0},
          CONV(4, 1, 1, 0, 1, 1, NONE)}},
        {"max 3x3 s1 p1 dilation 2, 24 channels", 1, 3, 12, 10, 3,
         {CONV(24, 1, 1, 0, 1, 1, NONE), {L_POOL, 0, 3, 3, 1, 1, 1, 1, 2, 2, 1, false, false, NONE, -1, 0},
          CONV(4, 1, 1, 0, 1, 1, NONE)}},
        {"max 5x7 s1 p2x3, 16 channels", 2, 3, 11, 12, 3,
         {CONV(16, 1, 1, 0, 1, 1, NONE), {L_POOL, 0, 5, 7, 1, 1, 2, 3, 1, 1, 1, false, false, NONE, -1, 0},
          CONV(4, 1, 1, 0, 1, 1, NONE)}},
        {"max 3x3 s2 p1 writing the NCHW output, 20 channels, batch 2", 2, 3, 11, 9, 2,
         {CONV(20, 1, 1, 0, 1, 1, NONE), {L_POOL, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, false, NONE, -1, 0}}},
    };
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
        for (int planted = 0; planted < 2; planted++) {
            built b;
            if (!build_net(&nets[i], &b)) continue;
            char label[160];
            snprintf(label, sizeof label, "%s%s", nets[i].label, planted ? ", a NaN in the input" : "");
            if (planted) ((float *)tp_tensor_data(b.x))[tp_tensor_numel(b.x) / 2 + 3] = NAN;
            counts cnt = {0};
            tp_tensor *want = run(&b, TP_CPU_REFERENCE, 1, &cnt), *first = NULL;
            int nans = 0;
            for (int64_t k = 0; want && k < tp_tensor_numel(want); k++) nans += isnan(((float *)tp_tensor_data(want))[k]);
            CHECK_MSG(want && (planted ? nans > 0 && nans < tp_tensor_numel(want) : nans == 0),
                      "%s: %d NaN outputs in the reference", label, nans);
            for (int th = 1; want && th <= 4; th++) {
                cnt = (counts){0};
                tp_tensor *got = run(&b, TP_CPU_AUTO, th, &cnt);
                char msg[256] = "";
                CHECK_MSG(got && tp_tensor_allclose(got, want, 1e-4, 1e-4, msg, sizeof msg), "%s, %d threads: %s",
                          label, th, got ? msg : "no result");
                CHECK_MSG(cnt.maxp == 1 && cnt.onednn == cnt.steps, "%s, %d threads: %d max-nhwc steps, %d of %d in the pass",
                          label, th, cnt.maxp, cnt.onednn, cnt.steps);
                keep_first(&first, got, label, th);
            }
            free_run(&b, want, first);
        }
    }
}

/* The mean over H and W of an NHWC map (gmean_run): blocks of 256
 * pixels summed apart and added in block order, threads taking ranges of
 * (image, block) rows - whole images, or images whose rows they share
 * (their block sums then added by the thread that finishes last) - or,
 * with fewer rows than threads, of (image, block, 16-channel group) items.
 * Every case within tolerance of the reference and bitwise the same at 1-4
 * threads (the result does not depend on the thread count). */
TEST(test_global_mean) {
    /* a 3x3 stride-1 max pool between the convolution and the mean keeps
     * the map's size and gives the mean a producer other than a
     * convolution (whose output's mean it would write itself: below) */
#define POOL3 {L_POOL, 0, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false, NONE, -1, 0}
#define MEAN {L_MEAN, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, NONE, -1, 0}
    const net_case nets[] = {
        /* 23 x 29 = 667 pixels: blocks of 256, 256 and 155; 40 channels:
         * groups of 16, 16 and 8 (the last one scalar); batch 2: 6 rows,
         * cut between images at 2 threads, inside them at 3 and 4 */
        {"mean of 23 x 29 pixels, 40 channels, batch 2", 2, 3, 23, 29, 3,
         {CONV(40, 3, 1, 1, 1, 1, TP_OP_SILU), POOL3, MEAN}},
        /* one image of 3 blocks: shared at 2-4 threads */
        {"mean of 24 x 30 pixels, 32 channels", 1, 3, 24, 30, 3, {CONV(32, 3, 1, 1, 1, 1, RELU), POOL3, MEAN}},
        /* one block, fewer rows than threads: (block, group) items */
        {"mean of 9 x 13 pixels, 56 channels", 1, 3, 9, 13, 3, {CONV(56, 3, 1, 1, 1, 1, RELU), POOL3, MEAN}},
        /* 17 x 17 = 289 pixels: a last block of 33; batch 3, 7 channels */
        {"mean of 17 x 17 pixels, 7 channels, batch 3", 3, 3, 17, 17, 3,
         {CONV(7, 3, 1, 1, 1, 1, RELU), POOL3, MEAN}},
    };
    check_means(nets, sizeof nets / sizeof nets[0], 1, -1);
}

/* The mean over H and W of a oneDNN convolution's NHWC output written by
 * the convolution itself (fuse_means): each band's rows summed while in
 * cache, the rows added in order by the thread that finishes last. The
 * mean's step goes (3 steps, not 4: the NCHW input's reorder, the two
 * convolutions with the mean); within tolerance of the reference, bitwise
 * alike at 1-4 threads (bands of 1-4 row ranges or images). */
TEST(test_fused_mean) {
    const net_case nets[] = {
        {"depthwise 3x3 silu then its mean, 23 x 29, 40 channels, batch 2", 2, 3, 23, 29, 3,
         {CONV(40, 3, 1, 1, 1, 1, TP_OP_SILU), CONV(40, 3, 1, 1, 1, 40, TP_OP_SILU), MEAN}},
        {"depthwise 5x5 s2 silu then its mean, 28 x 28, 24 channels", 1, 3, 28, 28, 3,
         {CONV(24, 3, 1, 1, 1, 1, TP_OP_SILU), CONV(24, 5, 2, 2, 1, 24, TP_OP_SILU), MEAN}},
        {"depthwise 3x3 relu6 then its mean, 7 x 9, 19 channels, batch 3", 3, 3, 7, 9, 3,
         {CONV(19, 3, 1, 1, 1, 1, RELU), CONV(19, 3, 1, 1, 1, 19, TP_OP_RELU6), MEAN}},
    };
    check_means(nets, sizeof nets / sizeof nets[0], 0, -1);
#undef POOL3
#undef MEAN
}

/* A oneDNN primitive that fails inside a step writing a fused mean
 * (injected: tp__onednn_test_fail_mean_chunk, each thread's first chunk
 * in turn at 1-3 threads): the call reports TP_ERR_INTERNAL with the
 * failing thread's message (a pool worker's too, not the caller's), and the same run context's next calls
 * give the right mean, bitwise what a fresh context gives (every thread
 * still counted itself done, so the last-thread count started over). */
TEST(test_fused_mean_failure) {
#define MEAN {L_MEAN, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, NONE, -1, 0}
    const net_case nc = {"depthwise 3x3 silu then its mean, 23 x 29, 40 channels, batch 2", 2, 3, 23, 29, 3,
                         {CONV(40, 3, 1, 1, 1, 1, TP_OP_SILU), CONV(40, 3, 1, 1, 1, 40, TP_OP_SILU), MEAN}};
#undef MEAN
    built b = build(&nc);
    if (!b.p || !b.x) {
        CHECK_MSG(false, "building the fused-mean net failed");
        tp_program_free(b.p);
        tp_tensor_free(b.x);
        return;
    }
    counts cnt = {0};
    tp_tensor *want = run(&b, TP_CPU_AUTO, 1, &cnt);
    for (int th = 1; want && th <= 3; th++)
        for (int fail = th > 1; fail <= (th > 1 ? 2 : 0); fail++) { /* chunk 0: one thread's; 1, 2: the cut's (an image each) */
            tp_run_options opt;
            tp_run_options_init(&opt);
            opt.num_threads = th;
            tp_run *r = NULL;
            CHECK_OK(tp_run_new(b.p, &opt, &r));
            if (!r) continue;
            tp_clear_error();
            tp__onednn_test_fail_mean_chunk(fail);
            tp_status st = tp_run_execute(r, (tp_tensor *[]){b.x}, 1, NULL, 0);
            tp__onednn_test_fail_mean_chunk(-1);
            /* the failing thread's message, whichever thread it was (once) */
            CHECK_MSG(st == TP_ERR_INTERNAL &&
                          strcmp(tp_last_error(), "node conv2d_1 (conv2d): oneDNN primitive failed (status 5)") == 0,
                      "%d threads, chunk %d failing: status %d, '%s'", th, fail, (int)st, tp_last_error());
            for (int k = 0; k < 2; k++) {
                st = tp_run_execute(r, (tp_tensor *[]){b.x}, 1, NULL, 0);
                CHECK_MSG(st == TP_OK, "%d threads, call %d after the failure: %s", th, k + 1, tp_last_error());
                const tp_tensor *got = st == TP_OK ? tp_run_output(r, 0) : NULL;
                CHECK_MSG(got && memcmp(tp_tensor_data(got), tp_tensor_data(want),
                                        (size_t)tp_tensor_numel(want) * sizeof(float)) == 0,
                          "%d threads, chunk %d failed before: call %d's mean differs from a fresh run's", th, fail,
                          k + 1);
            }
            tp_run_free(r);
        }
    tp_tensor_free(want);
    tp_tensor_free(b.x);
    tp_program_free(b.p);
}

TEST(test_conv1d) {
    check_conv1d("conv1d batch 1", 1, 4, 4001, 1);
    check_conv1d("conv1d batch 3, odd length", 3, 4, 333, 1);
    check_conv1d("conv1d depthwise middle", 1, 4, 2050, 16);
}

/* conv_transpose1d/2d (we have only the reference kernel) as a oneDNN
 * deconvolution: one-node programs with the weight a parameter. */
typedef struct tconv_case {
    const char *label;
    int spatial;
    int64_t n, cin, h, w, cout, k, stride, pad, out_pad, groups, dil;
    bool bias;
} tconv_case;

static void check_tconv(const tconv_case *c) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    if (!g) return;
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    int sp = c->spatial;
    int64_t ws[4] = {c->cin, c->cout / c->groups, sp == 2 ? c->k : c->k, c->k};
    int64_t xs[4] = {c->n, c->cin, sp == 2 ? c->h : c->w, c->w};
    tp_tensor *w = rand_t(sp + 2, ws, 1.0f / sqrtf((float)(c->cin * c->k))), *b = c->bias ? rand_t(1, &c->cout, 0.5f) : NULL;
    tp_node *pw = placeholder(g, "p_w", sp + 2, ws), *pb = b ? placeholder(g, "p_b", 1, &c->cout) : NULL;
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_w"), "w", TP_PERSISTENT_UNSET));
    if (b) CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_b"), "b", TP_PERSISTENT_UNSET));
    tp_node *px = placeholder(g, "x", sp + 2, xs);
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    int64_t st2[2] = {c->stride, c->stride}, pd2[2] = {c->pad, c->pad}, op2[2] = {c->out_pad, c->out_pad},
            dl2[2] = {c->dil, c->dil};
    tp_value a[8] = {N(px), N(pw), pb ? N(pb) : tp_value_none(), tp_value_none(), tp_value_none(), tp_value_none(),
                     tp_value_int(c->groups), tp_value_none()};
    CHECK_OK(tp_value_int_list(st2, sp, &a[3]));
    CHECK_OK(tp_value_int_list(pd2, sp, &a[4]));
    CHECK_OK(tp_value_int_list(op2, sp, &a[5]));
    CHECK_OK(tp_value_int_list(dl2, sp, &a[7]));
    tp_node *y = call(g, sp == 2 ? TP_OP_CONV_TRANSPOSE2D : TP_OP_CONV_TRANSPOSE1D, 8, a);
    for (int k = 3; k < 8; k++) tp_value_clear(&a[k]);
    built bt = {0};
    if (y) {
        output_nodes(g, 1, (tp_node *[]){y});
        CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(y)), NULL));
        CHECK_OK(tp_program_new(g, s, &bt.p));
    } else {
        CHECK_MSG(false, "%s: building the graph: %s", c->label, tp_last_error());
        tp_graph_free(g);
        tp_signature_free(s);
    }
    if (bt.p) CHECK_OK(tp_program_set_state(bt.p, "w", TP_STATE_PARAMETER, w, true));
    if (bt.p && b) CHECK_OK(tp_program_set_state(bt.p, "b", TP_STATE_PARAMETER, b, true));
    tp_tensor_free(w);
    tp_tensor_free(b);
    if (!bt.p) return;
    bt.x = rand_t(sp + 2, xs, 2.0f);
    compare_levels(&bt, c->label, 1, 1);
}

/* conv3d / conv_transpose3d one-node programs (oneDNN picks the layouts). */
static void check_vol(const char *label, bool transposed, int64_t n, int64_t cin, int64_t d, int64_t cout, int64_t k,
                      int64_t stride, int64_t pad, int64_t out_pad, int64_t groups, int64_t dil) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    if (!g) return;
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    int64_t ws[5] = {transposed ? cin : cout, transposed ? cout / groups : cin / groups, k, k, k};
    int64_t xs[5] = {n, cin, d, d + 1, d + 2};
    tp_tensor *w = rand_t(5, ws, 1.0f / sqrtf((float)(cin * k * k * k))), *b = rand_t(1, &cout, 0.5f);
    tp_node *pw = placeholder(g, "p_w", 5, ws), *pb = placeholder(g, "p_b", 1, &cout);
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_w"), "w", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_b"), "b", TP_PERSISTENT_UNSET));
    tp_node *px = placeholder(g, "x", 5, xs);
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    int64_t v[4][3] = {{stride, stride, stride}, {pad, pad, pad}, {out_pad, out_pad, out_pad}, {dil, dil, dil}};
    tp_value a[8] = {N(px), N(pw), N(pb)};
    int na;
    if (transposed) { /* stride, padding, output_padding, groups, dilation */
        CHECK_OK(tp_value_int_list(v[0], 3, &a[3]));
        CHECK_OK(tp_value_int_list(v[1], 3, &a[4]));
        CHECK_OK(tp_value_int_list(v[2], 3, &a[5]));
        a[6] = tp_value_int(groups);
        CHECK_OK(tp_value_int_list(v[3], 3, &a[7]));
        na = 8;
    } else { /* stride, padding, dilation, groups */
        CHECK_OK(tp_value_int_list(v[0], 3, &a[3]));
        CHECK_OK(tp_value_int_list(v[1], 3, &a[4]));
        CHECK_OK(tp_value_int_list(v[3], 3, &a[5]));
        a[6] = tp_value_int(groups);
        na = 7;
    }
    tp_node *y = call(g, transposed ? TP_OP_CONV_TRANSPOSE3D : TP_OP_CONV3D, na, a);
    for (int q = 3; q < na; q++) tp_value_clear(&a[q]);
    built bt = {0};
    if (y) {
        output_nodes(g, 1, (tp_node *[]){y});
        CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(y)), NULL));
        CHECK_OK(tp_program_new(g, s, &bt.p));
    } else {
        CHECK_MSG(false, "%s: building the graph: %s", label, tp_last_error());
        tp_graph_free(g);
        tp_signature_free(s);
    }
    if (bt.p) CHECK_OK(tp_program_set_state(bt.p, "w", TP_STATE_PARAMETER, w, true));
    if (bt.p) CHECK_OK(tp_program_set_state(bt.p, "b", TP_STATE_PARAMETER, b, true));
    tp_tensor_free(w);
    tp_tensor_free(b);
    if (!bt.p) return;
    bt.x = rand_t(5, xs, 2.0f);
    compare_levels(&bt, label, 1, 1);
}

TEST(test_conv3d) {
    check_vol("conv3d k3 p1", false, 1, 4, 6, 8, 3, 1, 1, 0, 1, 1);
    check_vol("conv3d k3 s2 batch 3, grouped", false, 3, 4, 7, 6, 3, 2, 0, 0, 2, 1);
    check_vol("conv3d dilated", false, 1, 3, 8, 5, 3, 1, 2, 0, 1, 2);
    check_vol("conv_transpose3d k3 s2 p1 output_padding 1", true, 1, 6, 4, 4, 3, 2, 1, 1, 1, 1);
    check_vol("conv_transpose3d k2 s2 batch 2, grouped", true, 2, 4, 3, 6, 2, 2, 0, 0, 2, 1);
}

TEST(test_conv_transpose) {
    static const tconv_case cases[] = {
        /* label                      sp  n cin  h  w cout k s p op g d bias */
        {"k3 s2 p1 output_padding 1", 2, 1, 8, 7, 9, 6, 3, 2, 1, 1, 1, 1, true},
        {"k4 s2 p1 batch 3", 2, 3, 6, 5, 5, 4, 4, 2, 1, 0, 1, 1, false},
        {"k2 s2 p0 (upsampling)", 2, 1, 16, 8, 8, 8, 2, 2, 0, 0, 1, 1, true},
        {"grouped, dilated", 2, 2, 8, 6, 7, 4, 3, 1, 2, 0, 2, 2, true},
        {"conv_transpose1d k5 s2", 1, 1, 4, 1, 33, 6, 5, 2, 2, 1, 1, 1, true},
        {"conv_transpose1d batch 3", 1, 3, 6, 1, 17, 3, 4, 2, 1, 0, 1, 1, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_tconv(&cases[i]);
}

/* One program with a oneDNN region called from 4 threads at once (each
 * call in its own pooled run context, with its own oneDNN memory objects
 * and streams) gives the serial results bit for bit; ThreadSanitizer clean. */
typedef struct worker {
    tp_program *p;
    tp_tensor *x, *want;
    int bad;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    for (int k = 0; k < 20; k++) {
        tp_value a = tp_value_tensor(tp_tensor_retain(w->x)), out = tp_value_none();
        char msg[64];
        const tp_value *o = NULL;
        if (tp_program_call(w->p, &a, 1, NULL, &out) == TP_OK) o = out.kind == TP_VAL_TUPLE ? tp_value_at(&out, 0) : &out;
        if (!o || o->kind != TP_VAL_TENSOR || !tp_tensor_allclose(o->u.tensor, w->want, 0, 0, msg, sizeof msg)) w->bad++;
        tp_value_clear(&out);
        tp_value_clear(&a);
    }
    return NULL;
}

TEST(test_concurrent_calls) {
    const net_case c = {"concurrent", 1, 3, 16, 16, 4,
                        {CONV(16, 3, 1, 1, 1, 1, RELU),
                         {L_POOL, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, false, NONE, -1, 0},
                         {L_CONV, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, RELU, 2, 0},
                         CONV(8, 1, 1, 0, 1, 1, NONE)}};
    built b = build(&c);
    if (!b.p) return;
    worker w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){.p = b.p, .x = rand_t(4, (int64_t[]){1, 3, 16, 16}, 2.0f)};
        tp_value a = tp_value_tensor(tp_tensor_retain(w[i].x)), out = tp_value_none();
        CHECK_OK(tp_program_call(b.p, &a, 1, NULL, &out));
        const tp_value *o = out.kind == TP_VAL_TUPLE ? tp_value_at(&out, 0) : &out;
        if (o && o->kind == TP_VAL_TENSOR) w[i].want = tp_tensor_retain(o->u.tensor);
        tp_value_clear(&out);
        tp_value_clear(&a);
    }
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        CHECK_MSG(w[i].want && w[i].bad == 0, "thread %d: %d of 20 calls failed or differed", i, w[i].bad);
        tp_tensor_free(w[i].x);
        tp_tensor_free(w[i].want);
    }
    tp_tensor_free(b.x);
    tp_program_free(b.p);
}


/* ---- Graph-level cases (writes in place, views, NaN) -------------------- */
/* A graph built by fn from user input x (in[0]) and parameters p_w0.. (in[1..]),
 * run at the reference level and at the CPU's with 1, 2 and 3 threads; every
 * output must match the reference (NaN equal to NaN). */
typedef struct gparam {
    int ndim;
    int64_t sizes[4];
} gparam;
typedef int (*g_fn)(tp_graph *g, tp_node **in, tp_node **o);

static int g_dpool_events; /* check_graph's steps that ran direct+maxpool-nhwc */
static void on_event_names(void *user, const tp_profile_event *ev) {
    if (getenv("TP_TEST_SHOW_STEPS")) printf("    %s %s %s\n", ev->node ? ev->node : "?", ev->op, ev->variant);
    g_dpool_events += strcmp(ev->variant, "direct+maxpool-nhwc") == 0;
    (void)user;
}

/* check_graph's NaN rule when Winograd is forced (TP_CONV_GEMM=2 or 4):
 * a NaN input reaches every output of the tiles it falls in (documented),
 * so an output may be NaN where the reference's is not; a NaN of the
 * reference must still be NaN. */
static bool g_nan_superset;

/* out against ref within 1e-4 (relative and absolute), NaN equal to NaN;
 * with g_nan_superset, a NaN out also stands for any ref. */
static bool close_nan(const tp_tensor *out, const tp_tensor *ref, char *msg, size_t cap) {
    if (!g_nan_superset) return tp_tensor_allclose(out, ref, 1e-4, 1e-4, msg, cap);
    const int64_t n = tp_tensor_numel(ref);
    if (tp_tensor_numel(out) != n || tp_tensor_dtype(out) != TP_FLOAT32 || tp_tensor_dtype(ref) != TP_FLOAT32) {
        snprintf(msg, cap, "shape or dtype differs");
        return false;
    }
    tp_tensor *oc = NULL, *rc = NULL;
    if (tp_tensor_clone(out, &oc) != TP_OK || tp_tensor_clone(ref, &rc) != TP_OK) {
        tp_tensor_free(oc);
        tp_tensor_free(rc);
        snprintf(msg, cap, "out of memory");
        return false;
    }
    const float *o = tp_tensor_data(oc), *r = tp_tensor_data(rc);
    bool ok = true;
    for (int64_t k = 0; k < n && ok; k++) {
        if (o[k] != o[k]) continue; /* NaN: the reference's, or a tile's */
        ok = r[k] == r[k] && fabsf(o[k] - r[k]) <= 1e-4f + 1e-4f * fabsf(r[k]);
        if (!ok) snprintf(msg, cap, "element %" PRId64 ": %g != %g", k, (double)o[k], (double)r[k]);
    }
    tp_tensor_free(oc);
    tp_tensor_free(rc);
    return ok;
}

static int check_graph(const char *label, const int64_t *xs, tp_tensor *xval, int n_par, const gparam *par, g_fn fn) {
    int bad = 0;
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    tp_node *in[9];
    tp_tensor *pv[8] = {0};
    char name[32];
    for (int i = 0; i < n_par; i++) {
        snprintf(name, sizeof name, "p_w%d", i);
        in[i + 1] = placeholder(g, name, par[i].ndim, par[i].sizes);
        CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor(name), name + 2, TP_PERSISTENT_UNSET));
        float sc = 1.0f;
        if (par[i].ndim == 4) sc = 2.0f / sqrtf((float)(par[i].sizes[1] * par[i].sizes[2] * par[i].sizes[3]));
        pv[i] = rand_t(par[i].ndim, par[i].sizes, sc);
    }
    in[0] = placeholder(g, "x", 4, xs);
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    tp_node *o[4];
    int n_out = fn(g, in, o);
    output_nodes(g, n_out, o);
    for (int i = 0; i < n_out; i++)
        CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(o[i])), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    for (int i = 0; p && i < n_par; i++) {
        snprintf(name, sizeof name, "w%d", i);
        CHECK_OK(tp_program_set_state(p, name, TP_STATE_PARAMETER, pv[i], true));
    }
    tp_tensor *want[4] = {0}, *first[4] = {0};
    for (int pass = 0; p && pass < 4; pass++) {
        tp_program *pc = NULL;
        CHECK_OK(tp_program_copy(p, &pc));
        tp_run_options opt;
        tp_run_options_init(&opt);
        opt.cpu_level = pass == 0 ? TP_CPU_REFERENCE : TP_CPU_AUTO;
        opt.num_threads = pass == 0 ? 1 : pass;
        opt.profile = on_event_names;
        tp_run *r = NULL;
        tp_tensor *xin = NULL;
        CHECK_OK(tp_tensor_clone(xval, &xin)); /* a fresh input each run (it may be written) */
        tp_status st = tp_run_new(pc, &opt, &r);
        if (getenv("TP_TEST_SHOW_STEPS")) printf("  %s, %s %d threads:\n", label, pass ? "auto" : "reference", opt.num_threads);
        if (st == TP_OK) st = tp_run_execute(r, (tp_tensor *[]){xin}, 1, NULL, 0);
        CHECK_MSG(st == TP_OK, "%s: run (%d threads, pass %d): %s", label, opt.num_threads, pass, tp_last_error());
        for (int i = 0; st == TP_OK && i < n_out; i++) {
            if (pass == 0) {
                CHECK_OK(tp_tensor_clone(tp_run_output(r, i), &want[i]));
                continue;
            }
            char msg[256] = "";
            if (pass == 1) CHECK_OK(tp_tensor_clone(tp_run_output(r, i), &first[i]));
            else if (getenv("TP_TEST_BITWISE"))
                CHECK_MSG(tp_tensor_allclose(tp_run_output(r, i), first[i], 0, 0, msg, sizeof msg),
                          "%s: output %d at %d threads differs from 1 thread: %s", label, i, pass, msg);
            bool ok = close_nan(tp_run_output(r, i), want[i], msg, sizeof msg);
            if (!ok) bad++;
            CHECK_MSG(ok, "%s, %d threads, output %d: %s", label, opt.num_threads, i, msg);
        }
        tp_run_free(r);
        tp_tensor_free(xin);
        tp_program_free(pc);
    }
    for (int i = 0; i < 4; i++) tp_tensor_free(want[i]), tp_tensor_free(first[i]);
    for (int i = 0; i < n_par; i++) tp_tensor_free(pv[i]);
    tp_program_free(p);
    return bad;
}

static tp_node *conv_n(tp_graph *g, tp_node *x, tp_node *w, int64_t s, int64_t pd, int64_t groups) {
    tp_value a[7] = {N(x), N(w), tp_value_none(), pair(s, s), pair(pd, pd), pair(1, 1), tp_value_int(groups)};
    tp_node *r = call(g, TP_OP_CONV2D, 7, a);
    for (int k = 3; k < 6; k++) tp_value_clear(&a[k]);
    return r;
}
static tp_node *gmean_n(tp_graph *g, tp_node *x) {
    tp_value a[3] = {N(x), pair(2, 3), tp_value_bool(true)};
    tp_node *r = call(g, TP_OP_MEAN, 3, a);
    tp_value_clear(&a[1]);
    return r;
}

/* SE: the scale written in place (add_) between h * s and the projection
 * reading the product: fuse_scales makes the projection read s after the add_ */
static int g_se_scale_written(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *h = conv_n(g, in[0], in[1], 1, 1, 1);
    h = call(g, TP_OP_RELU, 1, (tp_value[]){N(h)});
    tp_node *sg = call(g, TP_OP_SIGMOID, 1, (tp_value[]){N(gmean_n(g, h))});
    tp_node *m = call(g, TP_OP_MUL, 2, (tp_value[]){N(h), N(sg)});
    o[1] = call(g, TP_OP_ADD_, 2, (tp_value[]){N(sg), tp_value_float(5.0)});
    tp_node *y = conv_n(g, m, in[2], 1, 0, 1);
    o[0] = conv_n(g, y, in[3], 1, 0, 1);
    return 2;
}


static tp_value ilist(int n, const int64_t *v) {
    tp_value l;
    CHECK_OK(tp_value_int_list(v, n, &l));
    return l;
}
/* SE through a [1, C] sigmoid, viewed back to [1, C, 1, 1] (a linear SE's
 * form): the scale is a view whose root's block the multiply's step frees;
 * an unrelated [1, C] tensor made between the multiply and the projection
 * takes that block */
static int g_se_scale_view(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *h = conv_n(g, in[0], in[1], 1, 1, 1);
    h = call(g, TP_OP_RELU, 1, (tp_value[]){N(h)});
    tp_value v2 = ilist(2, (int64_t[]){1, 32}), v4 = ilist(4, (int64_t[]){1, 32, 1, 1});
    tp_node *f = call(g, TP_OP_VIEW, 2, (tp_value[]){N(gmean_n(g, h)), v2});
    tp_node *t = call(g, TP_OP_SIGMOID, 1, (tp_value[]){N(f)});
    tp_node *sc = call(g, TP_OP_VIEW, 2, (tp_value[]){N(t), v4});
    tp_node *m = call(g, TP_OP_MUL, 2, (tp_value[]){N(h), N(sc)});
    tp_node *q = call(g, TP_OP_NEG, 1, (tp_value[]){N(f)});
    o[1] = call(g, TP_OP_MUL, 2, (tp_value[]){N(q), tp_value_float(2.0)});
    tp_node *y = conv_n(g, m, in[2], 1, 0, 1);
    o[0] = conv_n(g, y, in[3], 1, 0, 1);
    tp_value_clear(&v2);
    tp_value_clear(&v4);
    return 2;
}


static tp_node *mpool_n(tp_graph *g, tp_node *x, int64_t k, int64_t st, int64_t pd, bool ceil) {
    tp_value a[6] = {N(x), pair(k, k), pair(st, st), pair(pd, pd), pair(1, 1), tp_value_bool(ceil)};
    tp_node *r = call(g, TP_OP_MAX_POOL2D, 6, a);
    for (int i = 1; i < 5; i++) tp_value_clear(&a[i]);
    return r;
}
/* max pool of the NCHW user input (oneDNN's pooling, staged) into a region */
static int g_pool_first(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *p = mpool_n(g, in[0], 3, 2, 1, false);
    tp_node *y = conv_n(g, p, in[1], 1, 1, 1);
    o[0] = conv_n(g, y, in[2], 1, 0, 1);
    return 1;
}
/* conv -> max pool (NHWC, mpool_run) -> conv */
static int g_pool_mid(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *y = conv_n(g, in[0], in[1], 1, 1, 1);
    tp_node *p = mpool_n(g, y, 3, 2, 1, true);
    o[0] = conv_n(g, p, in[2], 1, 0, 1);
    return 1;
}
static tp_op g_act_op = TP_OP_HARDSWISH;
/* conv -> act (a oneDNN post-op) -> conv, and a standalone act after a pool */
static int g_act(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *y = conv_n(g, in[0], in[1], 1, 1, 1);
    y = call(g, g_act_op, 1, (tp_value[]){N(y)});
    o[0] = conv_n(g, y, in[2], 1, 0, 1);
    return 1;
}
static int g_act_standalone(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *y = conv_n(g, in[0], in[1], 1, 1, 1);
    tp_value a[7] = {N(y), pair(3, 3), pair(1, 1), pair(1, 1), tp_value_bool(false), tp_value_bool(true), tp_value_none()};
    tp_node *z = call(g, TP_OP_AVG_POOL2D, 7, a);
    for (int k = 1; k < 4; k++) tp_value_clear(&a[k]);
    z = call(g, g_act_op, 1, (tp_value[]){N(z)});
    o[0] = conv_n(g, z, in[2], 1, 0, 1);
    return 1;
}

/* NaN through regions: max pools propagate it as PyTorch's do (a max pool
 * of an NCHW input, which oneDNN's pooling primitive would drop NaN in,
 * runs on our kernel; one inside a region on mpool_run), and so do the
 * hardswish, silu and gelu epilogues and steps. Not relu, relu6 and
 * clamp, which oneDNN runs as post-ops and eltwise steps that give 0 for
 * NaN where PyTorch gives NaN (docs/architecture.md). */
TEST(test_nan_through_regions) {
    const char *gc = getenv("TP_CONV_GEMM");
    g_nan_superset = gc && (strcmp(gc, "2") == 0 || strcmp(gc, "4") == 0);
    if (g_nan_superset) printf("  Winograd forced: outputs may be NaN over a whole tile (the reference's NaN must stay)\n");
    const int64_t xs[4] = {2, 16, 11, 9};
    tp_tensor *x = rand_t(4, xs, 2.0f);
    float *d = tp_tensor_data(x);
    d[3 * 99 + 40] = NAN; /* image 0, channel 3 */
    d[16 * 99 + 5 * 99 + 17] = NAN;
    const gparam par[] = {{4, {16, 16, 3, 3}}, {4, {8, 16, 1, 1}}};
    check_graph("nan: max pool of the NCHW input", xs, x, 2, par, g_pool_first);
    check_graph("nan: max pool inside a region", xs, x, 2, par, g_pool_mid);
    const tp_op acts[] = {TP_OP_HARDSWISH, TP_OP_SILU, TP_OP_GELU};
    const char *names[] = {"nan: conv + hardswish", "nan: conv + silu", "nan: conv + gelu"};
    const char *snames[] = {"nan: standalone hardswish", "nan: standalone silu", "nan: standalone gelu"};
    for (int k = 0; k < 3; k++) {
        g_act_op = acts[k];
        check_graph(names[k], xs, x, 2, par, g_act);
        check_graph(snames[k], xs, x, 2, par, g_act_standalone);
    }
    tp_tensor_free(x);
    /* 3 input channels: the convolution on the direct kernel (AVX-512,
     * TP_CONV_GEMM unset) with the ceil-mode pool fused into it, once per
     * run at 1, 2 and 3 threads; NaNs inside the image and at two corners,
     * whose windows reach the padding */
    const int64_t xs3[4] = {2, 3, 13, 11};
    x = rand_t(4, xs3, 2.0f);
    d = tp_tensor_data(x);
    d[1 * 143 + 5 * 11 + 4] = NAN;     /* image 0, channel 1, (5, 4) */
    d[3 * 143 + 2 * 143 + 0] = NAN;    /* image 1, channel 2, (0, 0) */
    d[3 * 143 + 12 * 11 + 10] = NAN;   /* image 1, channel 0, (12, 10) */
    const gparam par3[] = {{4, {16, 3, 3, 3}}, {4, {8, 16, 1, 1}}};
    g_dpool_events = 0;
    check_graph("nan: direct convolution + fused max pool", xs3, x, 2, par3, g_pool_mid);
    const int want = !gc && avx512_in_effect() ? 3 : 0;
    CHECK_MSG(g_dpool_events == want, "nan: %d runs of the fused direct pool, want %d", g_dpool_events, want);
    tp_tensor_free(x);
    g_nan_superset = false;
}


/* Average and max pools in ceil mode, with and without padding counted,
 * dilation, at a region's start and end, odd sizes, batch 2-3, 20
 * channels. */
TEST(test_pool_modes_in_regions) {
    const net_case cases[] = {
        {"avg ceil include_pad odd", 2, 3, 11, 9, 3,
         {CONV(20, 3, 1, 1, 1, 1, RELU), {L_AVG, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, true, NONE, -1, 0},
          CONV(5, 1, 1, 0, 1, 1, NONE)}},
        {"avg ceil include_pad k2 s2 p1", 1, 3, 10, 7, 3,
         {CONV(20, 3, 1, 1, 1, 1, RELU), {L_AVG, 0, 2, 2, 2, 2, 1, 1, 1, 1, 1, true, true, NONE, -1, 0},
          CONV(5, 1, 1, 0, 1, 1, NONE)}},
        {"avg ceil exclude pad k3 s2 p0", 1, 3, 10, 8, 3,
         {CONV(20, 3, 1, 1, 1, 1, RELU), {L_AVG, 0, 3, 3, 2, 2, 0, 0, 1, 1, 1, true, false, NONE, -1, 0},
          CONV(5, 1, 1, 0, 1, 1, NONE)}},
        {"max ceil dilation 2, region start", 3, 20, 13, 11, 3,
         {{L_POOL, 0, 3, 3, 2, 2, 1, 1, 2, 2, 1, false, true, NONE, -1, 0}, CONV(16, 1, 1, 0, 1, 1, NONE), CONV(5, 1, 1, 0, 1, 1, NONE)}},
        {"max ceil region end", 2, 3, 13, 11, 2,
         {CONV(20, 3, 1, 1, 1, 1, NONE), {L_POOL, 0, 2, 2, 2, 2, 0, 0, 1, 1, 1, false, true, NONE, -1, 0}}},
        {"avg region end, include pad", 2, 3, 13, 11, 2,
         {CONV(20, 3, 1, 1, 1, 1, NONE), {L_AVG, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, true, NONE, -1, 0}}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_net(&cases[i], 1);
}

/* A squeeze-excitation multiply fused into its projection (fuse_scales)
 * moves the reads of h and the scale to the projection's step: a scale
 * written in place in between is not fused (it was read after the write),
 * and a scale that is a view of a [1, C] tensor keeps its root alive to
 * the projection (it was freed at the multiply and overwritten by the
 * projection's own output, at 2-3 threads). */
TEST(test_fused_scale_reads) {
    const int64_t xs[4] = {1, 3, 10, 10};
    tp_tensor *x = rand_t(4, xs, 2.0f);
    const gparam par[] = {{4, {32, 3, 3, 3}}, {4, {24, 32, 1, 1}}, {4, {8, 24, 1, 1}}};
    check_graph("se: scale written in place before the projection", xs, x, 3, par, g_se_scale_written);
    check_graph("se: scale a view of a [1, C] tensor", xs, x, 3, par, g_se_scale_view);
    tp_tensor_free(x);
}

int main(int argc, char **argv) {
    if (!tp__onednn_enabled()) {
        printf("SKIP test_onednn: built without oneDNN (Debian libdnnl-dev) or disabled by TP_ONEDNN=0\n");
        return 77;
    }
    if (tp_cpu_level_supported() < TP_CPU_AVX2) {
        printf("SKIP test_onednn: the layout pass needs AVX2 and FMA\n");
        return 77;
    }
    static const tp_test_case tests[] = {T(test_conv_combinations), T(test_gemm_conv), T(test_direct_conv), T(test_fused_depthwise), T(test_fused_expansion), T(test_fused_projection),
                                         T(test_alloc_failures), T(test_regions), T(test_max_pool_nhwc), T(test_global_mean), T(test_fused_mean), T(test_fused_mean_failure), T(test_conv1d),
                                         T(test_conv_transpose), T(test_conv3d), T(test_concurrent_calls), T(test_fused_scale_reads), T(test_nan_through_regions), T(test_pool_modes_in_regions)};
    return tp_test_run(tests, sizeof tests / sizeof tests[0], argc, argv);
}
