/*
 * test_fast_attention.c - the fused float32 scaled_dot_product_attention
 * (src/cpu/fast_attention.c: query blocks of 64, key blocks of 256, online
 * softmax) against the reference kernel on random cases: sequence lengths
 * that are not multiples of the blocks (1, 7, 65, 130 queries; 1, 33, 300,
 * 600 keys so several key blocks combine), embedding sizes 8 / 64 / 40 with
 * another value size, broadcast batch dims, bool and float masks (with
 * fully masked rows), is_causal, explicit scale, a transposed key. Eager
 * calls run the fast variant; the reference is forced with
 * tp_ops_force_reference. Tolerance rtol 1e-4, atol 1e-5 (the reference
 * accumulates in double).
 */
#include "program_examples.h"
#include "test_util.h"
#include "tpexport/run.h"
#include "tpexport/tpexport.h"

/* These tests are about the fast paths: a TP_CPU_LEVEL cap in the
 * environment does not apply to them (each level is also asked for
 * explicitly through run options where a test compares levels). */
__attribute__((constructor)) static void pin_cpu_level(void) { tp_set_cpu_level(tp_cpu_level_supported()); }

static uint32_t g_seed = 777;
static float frand(void) {
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)(g_seed >> 8) / 16777216.0f - 0.5f;
}

static tp_tensor *rand_t(tp_dtype dt, int ndim, const int64_t *sizes, float scale) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_empty(dt, ndim, sizes, &t));
    if (!t) return NULL;
    if (dt == TP_BOOL) {
        bool *d = tp_tensor_data(t);
        for (int64_t i = 0; i < tp_tensor_numel(t); i++) d[i] = frand() > -0.3f;
    } else {
        float *d = tp_tensor_data(t);
        for (int64_t i = 0; i < tp_tensor_numel(t); i++) d[i] = scale * frand();
    }
    return t;
}

typedef struct attn_case {
    int64_t b, h, L, S, E, Ev;
    int mask; /* 0 none, 1 bool [L, S], 2 float [b, 1, L, S], 3 bool with a fully masked row */
    bool causal, scale, transposed_key;
} attn_case;

static tp_tensor *call_sdpa(const attn_case *c, tp_tensor *q, tp_tensor *k, tp_tensor *v, tp_tensor *m) {
    tp_value args[6] = {tp_value_tensor(tp_tensor_retain(q)), tp_value_tensor(tp_tensor_retain(k)),
                        tp_value_tensor(tp_tensor_retain(v)), m ? tp_value_tensor(tp_tensor_retain(m)) : tp_value_none(),
                        tp_value_float(0.0), tp_value_bool(c->causal)};
    tp_value kw = tp_value_none(), out = tp_value_none();
    if (c->scale) {
        CHECK_OK(tp_value_dict(&kw));
        tp_value s = tp_value_float(0.3);
        CHECK_OK(tp_value_dict_set(&kw, "scale", &s));
    }
    CHECK_OK(tp_op_call(TP_OP_SCALED_DOT_PRODUCT_ATTENTION, args, 6, c->scale ? &kw : NULL, &out));
    for (int i = 0; i < 6; i++) tp_value_clear(&args[i]);
    tp_value_clear(&kw);
    tp_tensor *t = out.kind == TP_VAL_TENSOR ? tp_tensor_retain(out.u.tensor) : NULL;
    tp_value_clear(&out);
    return t;
}

TEST(test_attention_cases) {
    static const attn_case cases[] = {
        {1, 2, 7, 33, 8, 8, 0, false, false, false},
        {2, 3, 65, 300, 64, 64, 0, false, false, false},
        {1, 4, 130, 130, 40, 24, 0, true, false, false},
        {1, 1, 1, 1, 8, 8, 0, false, false, false},
        {2, 2, 65, 600, 16, 16, 1, false, false, false},
        {2, 2, 33, 300, 16, 32, 2, false, true, false},
        {1, 2, 9, 17, 8, 8, 3, false, false, false},
        {1, 2, 70, 290, 32, 32, 0, false, false, true},
        {2, 1, 200, 200, 64, 64, 0, true, true, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const attn_case *c = &cases[i];
        tp_tensor *q = rand_t(TP_FLOAT32, 4, (int64_t[]){c->b, c->h, c->L, c->E}, 2.0f);
        tp_tensor *v = rand_t(TP_FLOAT32, 4, (int64_t[]){c->b, c->h, c->S, c->Ev}, 1.0f);
        tp_tensor *k = NULL, *kstore = NULL, *m = NULL;
        if (c->transposed_key) { /* key stored as [b, h, E, S] and transposed back */
            kstore = rand_t(TP_FLOAT32, 4, (int64_t[]){c->b, c->h, c->E, c->S}, 2.0f);
            if (kstore) CHECK_OK(tp_tensor_transpose(kstore, 2, 3, &k));
        } else {
            k = rand_t(TP_FLOAT32, 4, (int64_t[]){c->b, c->h, c->S, c->E}, 2.0f);
        }
        if (c->mask == 1 || c->mask == 3) m = rand_t(TP_BOOL, 2, (int64_t[]){c->L, c->S}, 1.0f);
        if (c->mask == 2) m = rand_t(TP_FLOAT32, 4, (int64_t[]){c->b, 1, c->L, c->S}, 3.0f);
        if (c->mask == 3 && m) memset((bool *)tp_tensor_data(m) + 2 * c->S, 0, (size_t)c->S); /* row 2: all masked */
        tp_ops_force_reference(true);
        tp_tensor *want = call_sdpa(c, q, k, v, m);
        tp_ops_force_reference(false);
        tp_tensor *got = call_sdpa(c, q, k, v, m);
        char msg[256] = "";
        CHECK_MSG(want && got && tp_tensor_allclose(got, want, 1e-4, 1e-5, msg, sizeof msg), "case %zu: %s", i, msg);
        tp_tensor_free(want);
        tp_tensor_free(got);
        tp_tensor_free(q);
        tp_tensor_free(k);
        tp_tensor_free(kstore);
        tp_tensor_free(v);
        tp_tensor_free(m);
    }
}

typedef struct op_count {
    int sdpa, softmax;
} op_count;
static void count_ops(void *user, const tp_profile_event *ev) {
    op_count *c = user;
    if (strcmp(ev->op, "scaled_dot_product_attention") == 0) c->sdpa++;
    if (strcmp(ev->op, "softmax") == 0) c->softmax++;
}

/* softmax(q @ k^T / 8) @ v with 2 x 1024 x 1024 scores (8 MiB): the planner
 * rewrites it into the fused kernel; the reference level runs it as
 * written. Both must agree. */
TEST(test_unfused_pattern_is_fused) {
    enum { H = 2, L = 1024, E = 32 };
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    if (!g) return;
    tp_node *q = placeholder(g, "q", 3, (int64_t[]){H, L, E});
    tp_node *k = placeholder(g, "k", 3, (int64_t[]){H, L, E});
    tp_node *v = placeholder(g, "v", 3, (int64_t[]){H, L, E});
    tp_node *kt = call(g, TP_OP_TRANSPOSE, 3, (tp_value[]){N(k), tp_value_int(1), tp_value_int(2)});
    tp_node *s = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(q), N(kt)});
    tp_node *sc = call(g, TP_OP_DIV, 2, (tp_value[]){N(s), tp_value_float(8.0)});
    tp_node *p = call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(sc), tp_value_int(-1)});
    tp_node *o = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(p), N(v)});
    output_nodes(g, 1, (tp_node *[]){o});
    tp_signature *sig = NULL;
    CHECK_OK(tp_signature_new(&sig));
    const char *names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++)
        CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor(names[i]), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(o)), NULL));
    tp_program *prog = NULL;
    CHECK_OK(tp_program_new(g, sig, &prog));
    tp_tensor *in[3];
    for (int i = 0; i < 3; i++) in[i] = rand_t(TP_FLOAT32, 3, (int64_t[]){H, L, E}, 2.0f);
    tp_tensor *out[2] = {NULL, NULL};
    op_count counts[2] = {{0, 0}, {0, 0}};
    for (int pass = 0; pass < 2 && prog; pass++) {
        tp_run_options opt;
        tp_run_options_init(&opt);
        opt.cpu_level = pass == 0 ? TP_CPU_REFERENCE : TP_CPU_AUTO;
        opt.profile = count_ops;
        opt.profile_user = &counts[pass];
        tp_run *r = NULL;
        CHECK_OK(tp_run_new(prog, &opt, &r));
        if (r && tp_run_execute(r, in, 3, NULL, 0) == TP_OK) CHECK_OK(tp_tensor_clone(tp_run_output(r, 0), &out[pass]));
        tp_run_free(r);
    }
    CHECK_MSG(counts[0].softmax == 1 && counts[0].sdpa == 0, "reference level: %d softmax, %d attention",
              counts[0].softmax, counts[0].sdpa);
    CHECK_MSG(counts[1].sdpa == 1 && counts[1].softmax == 0, "fast level: %d softmax, %d attention", counts[1].softmax,
              counts[1].sdpa);
    char msg[256] = "";
    CHECK_MSG(out[0] && out[1] && tp_tensor_allclose(out[1], out[0], 1e-4, 1e-5, msg, sizeof msg), "%s", msg);
    for (int i = 0; i < 3; i++) tp_tensor_free(in[i]);
    tp_tensor_free(out[0]);
    tp_tensor_free(out[1]);
    tp_program_free(prog);
}

TEST_MAIN(T(test_attention_cases), T(test_unfused_pattern_is_fused))
