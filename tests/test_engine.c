/*
 * test_engine.c - the execution engine (run.h): steady-state calls allocate
 * nothing and build no plan, results agree with tp_program_call and with the
 * reference path at every CPU level and thread count, run contexts from many
 * threads, serialised mutating programs, the liveness-planned arena, plan
 * invalidation, and the error paths of tp_run_execute.
 *
 * Tolerances: outputs of the same plan are compared exactly (the kernels are
 * deterministic for a fixed plan and thread count); outputs of different
 * CPU levels or thread counts are compared with the reference path within
 * rtol 1e-5, atol 1e-6 (float32: SGEMM blocking and vectorised
 * transcendental functions change rounding, not results).
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "cpu/gemm_bf16.h"
#include "cpu/conv_nhwc.h"
#include "cpu/half.h"
#include "fail_alloc.h"
#include "program_examples.h"
#include "tpexport/run.h"
#include "engine_impl.h"

/* These tests are about the fast paths: a TP_CPU_LEVEL cap in the
 * environment does not apply to them (each level is also asked for
 * explicitly through run options where a test compares levels). */
__attribute__((constructor)) static void pin_cpu_level(void) { tp_set_cpu_level(tp_cpu_level_supported()); }

#define RTOL 1e-5
#define ATOL 1e-6

/* ---- helpers ------------------------------------------------------------ */

static float frand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f - 0.5f; /* [-0.5, 0.5) */
}

static tp_tensor *rand_tensor(int ndim, const int64_t *sizes, uint32_t seed, float scale) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, ndim, sizes, &t));
    if (!t) return NULL;
    float *d = tp_tensor_data(t);
    int64_t n = tp_tensor_numel(t);
    seed = seed * 2654435761u + 12345u;
    for (int64_t i = 0; i < n; i++) d[i] = scale * frand(&seed);
    return t;
}

/* Same values as t, same shape, another (transposed) layout. */
static tp_tensor *noncontiguous_copy(tp_tensor *t) {
    const int64_t *s = tp_tensor_sizes(t);
    tp_tensor *store = NULL, *view = NULL;
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, 2, (int64_t[]){s[1], s[0]}, &store));
    if (!store) return NULL;
    CHECK_OK(tp_tensor_transpose(store, 0, 1, &view));
    if (view) CHECK_OK(tp_tensor_copy_(view, t));
    tp_tensor_free(store);
    CHECK(view && !tp_tensor_is_contiguous(view));
    return view;
}

static bool same_tensor(const tp_tensor *a, const tp_tensor *b, double rtol, double atol) {
    char msg[256];
    if (!a || !b) return false;
    if (!tp_tensor_allclose(a, b, rtol, atol, msg, sizeof msg)) {
        fprintf(stderr, "    (%s)\n", msg);
        return false;
    }
    return true;
}

static void set_param(tp_program *p, const char *target, int ndim, const int64_t *sizes, uint32_t seed, float scale) {
    tp_tensor *t = rand_tensor(ndim, sizes, seed, scale);
    CHECK_OK(tp_program_set_state(p, target, TP_STATE_PARAMETER, t, true));
    tp_tensor_free(t);
}

/*
 * The test network, built with the graph API:
 *   h = sigmoid(linear(relu(linear(x, W1, b1)), W2, b2) + x)
 *   v = transpose(reshape(h, [-1, 2, D/2]), 1, 2)           (views)
 *   y = softmax(slice(v, 1, 0, D/4), -1)
 * returns (y, v) (v is a view: it is copied into its output; without
 * `softmax`, y is the slice, a view copied too). With
 * `dynamic` the batch dim of x is the symbol "batch" in [1, 4096].
 */
static tp_program *make_net_ex(int64_t B, int64_t D, int64_t H, bool dynamic, bool softmax, uint32_t seed) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *w1 = placeholder(g, "p_fc1_weight", 2, (int64_t[]){H, D});
    tp_node *b1 = placeholder(g, "p_fc1_bias", 1, (int64_t[]){H});
    tp_node *w2 = placeholder(g, "p_fc2_weight", 2, (int64_t[]){D, H});
    tp_node *b2 = placeholder(g, "p_fc2_bias", 1, (int64_t[]){D});
    tp_node *x = placeholder(g, "x", 2, (int64_t[]){B, D});
    tp_node *l1 = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w1), N(b1)});
    tp_node *r = call(g, TP_OP_RELU, 1, (tp_value[]){N(l1)});
    tp_node *l2 = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(r), N(w2), N(b2)});
    tp_node *res = call(g, TP_OP_ADD, 2, (tp_value[]){N(l2), N(x)});
    tp_node *sg = call(g, TP_OP_SIGMOID, 1, (tp_value[]){N(res)});
    tp_value shape;
    CHECK_OK(tp_value_int_list((int64_t[]){-1, 2, D / 2}, 3, &shape));
    tp_node *rs = call(g, TP_OP_RESHAPE, 2, (tp_value[]){N(sg), shape});
    tp_value_clear(&shape);
    tp_node *tr = call(g, TP_OP_TRANSPOSE, 3, (tp_value[]){N(rs), tp_value_int(1), tp_value_int(2)});
    tp_node *sl = call(g, TP_OP_SLICE, 4, (tp_value[]){N(tr), tp_value_int(1), tp_value_int(0), tp_value_int(D / 4)});
    tp_node *sm = softmax ? call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(sl), tp_value_int(-1)}) : sl;
    output_nodes(g, 2, (tp_node *[]){sm, tr});
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_fc1_weight"), "fc1.weight", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_fc1_bias"), "fc1.bias", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_fc2_weight"), "fc2.weight", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_fc2_bias"), "fc2.bias", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(sm)), NULL));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(tr)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    if (!p) return NULL;
    set_param(p, "fc1.weight", 2, (int64_t[]){H, D}, seed + 1, 0.5f);
    set_param(p, "fc1.bias", 1, (int64_t[]){H}, seed + 2, 0.5f);
    set_param(p, "fc2.weight", 2, (int64_t[]){D, H}, seed + 3, 0.5f);
    set_param(p, "fc2.bias", 1, (int64_t[]){D}, seed + 4, 0.5f);
    tp_tensor *ex = NULL;
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){B, D}, &ex));
    tp_value exv = tv(ex);
    CHECK_OK(tp_program_set_example_input(p, "x", &exv));
    tp_value_clear(&exv);
    if (dynamic) {
        CHECK_OK(tp_program_add_range(p, "batch", 1, 4096));
        tp_dim_rule rule = {.site = {"x", 0}, .kind = TP_DIM_SYMBOL, .symbol = "batch"};
        CHECK_OK(tp_program_add_dim_rule(p, &rule));
    }
    CHECK_OK(tp_program_validate(p));
    return p;
}

static tp_program *make_net(int64_t B, int64_t D, int64_t H, bool dynamic, uint32_t seed) {
    return make_net_ex(B, D, H, dynamic, true, seed);
}

/* tp_program_call with one tensor; out[k] gets new references to the user
 * outputs (n_out of them). */
static tp_status program_outputs(tp_program *p, tp_tensor *x, tp_tensor **out, int n_out) {
    for (int i = 0; i < n_out; i++) out[i] = NULL;
    tp_value in = tv(tp_tensor_retain(x)), res = tp_value_none();
    tp_status st = tp_program_call(p, &in, 1, NULL, &res);
    tp_value_clear(&in);
    if (st != TP_OK) return st;
    if (res.kind == TP_VAL_TENSOR && n_out == 1) {
        out[0] = tp_tensor_retain(res.u.tensor);
    } else if (tp_value_is_seq(&res) && tp_value_len(&res) == n_out) {
        for (int i = 0; i < n_out; i++) {
            const tp_value *v = tp_value_at(&res, i);
            out[i] = v->kind == TP_VAL_TENSOR ? tp_tensor_retain(v->u.tensor) : NULL;
        }
    } else {
        st = TP_ERR_INTERNAL;
    }
    tp_value_clear(&res);
    return st;
}

static void free_tensors(tp_tensor **t, int n) {
    for (int i = 0; i < n; i++) {
        tp_tensor_free(t[i]);
        t[i] = NULL;
    }
}

/* ---- a counting allocator ---------------------------------------------- */

static atomic_long g_allocs, g_frees;

static void *counting_alloc(void *user, void *ptr, size_t old_size, size_t new_size) {
    (void)user;
    (void)old_size;
    if (new_size == 0) {
        atomic_fetch_add(&g_frees, 1);
        free(ptr);
        return NULL;
    }
    atomic_fetch_add(&g_allocs, 1);
    return realloc(ptr, new_size);
}

static void counting_begin(void) {
    atomic_store(&g_allocs, 0);
    atomic_store(&g_frees, 0);
    tp_set_allocator(counting_alloc, NULL);
}

static void counting_end(long *allocs, long *frees) {
    tp_set_allocator(NULL, NULL);
    *allocs = atomic_load(&g_allocs);
    *frees = atomic_load(&g_frees);
}

/* ---- profile hook ------------------------------------------------------- */

typedef struct prof {
    int events;
    int max_threads;
    int fast_events;     /* variant not reference / view / copy */
    int level_events;    /* variant == want */
    const char *want;
    int spread_bad;      /* spread_ms < 0, > ms, or not 0 on one thread */
} prof;

static void prof_fn(void *user, const tp_profile_event *e) {
    prof *p = user;
    p->events++;
    if (e->spread_ms < 0 || e->spread_ms > e->ms || (e->threads <= 1 && e->spread_ms != 0)) p->spread_bad++;
    if (e->threads > p->max_threads) p->max_threads = e->threads;
    if (strcmp(e->variant, "reference") && strcmp(e->variant, "view") && strcmp(e->variant, "copy")) p->fast_events++;
    if (p->want && strcmp(e->variant, p->want) == 0) p->level_events++;
}

/* ---- 1. steady state ---------------------------------------------------- */

TEST(test_steady_state_allocates_nothing) {
    enum { B = 4, D = 16, H = 32 };
    tp_program *p = make_net(B, D, H, true, 10);
    tp_tensor *x = rand_tensor(2, (int64_t[]){B, D}, 1, 4.0f);
    tp_run *r = NULL;
    if (p) CHECK_OK(tp_run_new(p, NULL, &r));
    if (!p || !x || !r) goto out0;
    tp_run_stats st;
    tp_run_get_stats(r, &st);
    CHECK(st.plans_built == 0 && st.calls == 0);
    CHECK(tp_run_output(r, 0) == NULL); /* before any call */

    CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0)); /* warm-up: builds the plan */
    tp_run_get_stats(r, &st);
    CHECK_MSG(st.plans_built == 1 && st.calls == 1, "plans_built %lld calls %lld", (long long)st.plans_built,
              (long long)st.calls);
    CHECK(st.n_steps > 0 && st.n_fast > 0 && st.arena_bytes > 0);
    CHECK(tp_run_num_outputs(r) == 2);
    CHECK(tp_run_output(r, 2) == NULL && tp_run_output(r, -1) == NULL);
    tp_tensor *want[2], *outs[2] = {NULL, NULL};
    CHECK_OK(program_outputs(p, x, want, 2));
    for (int i = 0; i < 2; i++) {
        tp_tensor *o = tp_run_output(r, i);
        CHECK(o != NULL);
        if (!o) continue;
        CHECK_MSG(same_tensor(o, want[i], 0, 0), "output %d differs from tp_program_call's", i);
        CHECK_OK(tp_tensor_empty(tp_tensor_dtype(o), tp_tensor_ndim(o), tp_tensor_sizes(o), &outs[i]));
    }
    CHECK(tp_tensor_ndim(want[0]) == 3 && tp_tensor_sizes(want[0])[0] == B && tp_tensor_sizes(want[0])[1] == D / 4 &&
          tp_tensor_sizes(want[0])[2] == 2);
    if (!outs[0] || !outs[1]) goto out1;

    /* 100 calls, one with caller outputs, one more without: nothing allocated or freed */
    long allocs, frees;
    tp_status s100 = TP_OK, s_out, s_null;
    counting_begin();
    for (int k = 0; k < 100; k++) {
        tp_status s = tp_run_execute(r, &x, 1, NULL, 0);
        if (s != TP_OK) s100 = s;
    }
    s_out = tp_run_execute(r, &x, 1, outs, 2);
    bool aliased = tp_run_output(r, 0) == outs[0] && tp_run_output(r, 1) == outs[1];
    s_null = tp_run_execute(r, &x, 1, NULL, 0);
    counting_end(&allocs, &frees);
    CHECK_OK(s100);
    CHECK_OK(s_out);
    CHECK_OK(s_null);
    CHECK(aliased);
    CHECK_MSG(allocs == 0 && frees == 0, "steady-state calls made %ld allocations and %ld frees", allocs, frees);
    tp_run_get_stats(r, &st);
    CHECK_MSG(st.plans_built == 1, "plans_built %lld after steady-state calls", (long long)st.plans_built);
    CHECK_MSG(st.calls == 1 + 102, "calls %lld, expected 103", (long long)st.calls);
    for (int i = 0; i < 2; i++) {
        CHECK_MSG(same_tensor(outs[i], want[i], 0, 0), "caller output %d", i);
        CHECK_MSG(same_tensor(tp_run_output(r, i), want[i], 0, 0), "run output %d after the last call", i);
        CHECK(tp_run_output(r, i) != outs[i]);
    }

    /* with a profile hook: one event per step, still no allocation */
    {
        prof pr = {0};
        tp_run_options opt;
        tp_run_options_init(&opt);
        opt.profile = prof_fn;
        opt.profile_user = &pr;
        tp_run *rp = NULL;
        CHECK_OK(tp_run_new(p, &opt, &rp));
        if (rp) {
            CHECK_OK(tp_run_execute(rp, &x, 1, NULL, 0));
            tp_run_stats sp;
            tp_run_get_stats(rp, &sp);
            CHECK(sp.plans_built == 0); /* the plan r built, from the program's cache */
            /* one event per step run (steps fused into their producer run inside it) */
            int per_call = pr.events;
            CHECK_MSG(per_call > 0 && per_call <= sp.n_steps, "%d profile events for %lld steps", per_call,
                      (long long)sp.n_steps);
            pr.events = 0;
            tp_status s = TP_OK;
            counting_begin();
            for (int k = 0; k < 10 && s == TP_OK; k++) s = tp_run_execute(rp, &x, 1, NULL, 0);
            counting_end(&allocs, &frees);
            CHECK_OK(s);
            CHECK_MSG(allocs == 0 && frees == 0, "profiled calls made %ld allocations and %ld frees", allocs, frees);
            CHECK_MSG(pr.events == 10 * per_call, "%d events for 10 calls of %d", pr.events, per_call);
            CHECK(same_tensor(tp_run_output(rp, 0), want[0], 0, 0));
            tp_run_free(rp);
        }
    }

    /* another batch size: a second plan, itself allocation-free once built */
    tp_tensor *x7 = rand_tensor(2, (int64_t[]){7, D}, 2, 4.0f), *want7[2] = {NULL, NULL};
    CHECK_OK(tp_run_execute(r, &x7, 1, NULL, 0));
    tp_run_get_stats(r, &st);
    CHECK_MSG(st.plans_built == 2, "plans_built %lld after a new batch size", (long long)st.plans_built);
    CHECK_OK(program_outputs(p, x7, want7, 2)); /* after r built the plan: the pooled run finds it */
    CHECK(same_tensor(tp_run_output(r, 0), want7[0], 0, 0) && same_tensor(tp_run_output(r, 1), want7[1], 0, 0));
    CHECK(tp_tensor_sizes(tp_run_output(r, 0))[0] == 7);
    {
        tp_status s = TP_OK;
        counting_begin();
        for (int k = 0; k < 10 && s == TP_OK; k++) s = tp_run_execute(r, &x7, 1, NULL, 0);
        counting_end(&allocs, &frees);
        CHECK_OK(s);
        CHECK_MSG(allocs == 0 && frees == 0, "steady-state calls (batch 7) made %ld allocations, %ld frees", allocs, frees);
    }
    /* the old output tensors are of the wrong shape now */
    CHECK_STATUS(tp_run_execute(r, &x7, 1, outs, 2), TP_ERR_INVALID_ARG);
    /* back to batch 4 on the same run: the cached plan, not a new one */
    CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0));
    tp_run_get_stats(r, &st);
    CHECK_MSG(st.plans_built == 2, "plans_built %lld after going back to batch 4", (long long)st.plans_built);
    CHECK(same_tensor(tp_run_output(r, 0), want[0], 0, 0));

    /* a new run context finds both plans in the program's cache */
    tp_run *r2 = NULL;
    CHECK_OK(tp_run_new(p, NULL, &r2));
    if (r2) {
        CHECK_OK(tp_run_execute(r2, &x, 1, NULL, 0));
        tp_run_stats s2;
        tp_run_get_stats(r2, &s2);
        CHECK_MSG(s2.plans_built == 0 && s2.calls == 1, "new run: plans_built %lld calls %lld",
                  (long long)s2.plans_built, (long long)s2.calls);
        CHECK(same_tensor(tp_run_output(r2, 0), want[0], 0, 0) && same_tensor(tp_run_output(r2, 1), want[1], 0, 0));
        CHECK_OK(tp_run_execute(r2, &x7, 1, NULL, 0));
        tp_run_get_stats(r2, &s2);
        CHECK(s2.plans_built == 0 && s2.calls == 2);
        CHECK(same_tensor(tp_run_output(r2, 0), want7[0], 0, 0));
        tp_run_free(r2);
    }

    /* same shape, other strides: another shape class, the same values */
    tp_tensor *xnc = noncontiguous_copy(x);
    if (xnc) {
        CHECK_OK(tp_run_execute(r, &xnc, 1, NULL, 0));
        tp_run_get_stats(r, &st);
        CHECK_MSG(st.plans_built == 3, "plans_built %lld after a transposed input", (long long)st.plans_built);
        CHECK(same_tensor(tp_run_output(r, 0), want[0], RTOL, ATOL) && same_tensor(tp_run_output(r, 1), want[1], RTOL, ATOL));
        tp_status s = TP_OK;
        counting_begin();
        for (int k = 0; k < 10 && s == TP_OK; k++) s = tp_run_execute(r, &xnc, 1, NULL, 0);
        counting_end(&allocs, &frees);
        CHECK_OK(s);
        CHECK_MSG(allocs == 0 && frees == 0, "calls with a strided input made %ld allocations, %ld frees", allocs, frees);
    }
    tp_tensor_free(xnc);
    free_tensors(want7, 2);
    tp_tensor_free(x7);
out1:
    free_tensors(outs, 2);
    free_tensors(want, 2);
out0:
    tp_run_free(r);
    tp_tensor_free(x);
    tp_program_free(p);
}

/* The same check on the network without its softmax node (every step a fast
 * variant, a view or a copy): tells an allocating reference kernel apart
 * from the engine's own per-call work. */
TEST(test_steady_state_fast_steps_only) {
    enum { B = 4, D = 16, H = 32 };
    tp_program *p = make_net_ex(B, D, H, true, false, 11);
    tp_tensor *x = rand_tensor(2, (int64_t[]){B, D}, 1, 4.0f);
    tp_run *r = NULL;
    if (p) CHECK_OK(tp_run_new(p, NULL, &r));
    if (p && x && r) {
        CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0));
        tp_run_stats st;
        tp_run_get_stats(r, &st);
        CHECK_MSG(st.n_reference == 0, "%lld steps run reference kernels", (long long)st.n_reference);
        long allocs, frees;
        tp_status s = TP_OK;
        counting_begin();
        for (int k = 0; k < 100 && s == TP_OK; k++) s = tp_run_execute(r, &x, 1, NULL, 0);
        counting_end(&allocs, &frees);
        CHECK_OK(s);
        CHECK_MSG(allocs == 0 && frees == 0, "fast-only steady-state calls made %ld allocations and %ld frees", allocs,
                  frees);
        tp_tensor *want[2];
        CHECK_OK(program_outputs(p, x, want, 2));
        for (int i = 0; i < 2; i++) CHECK(same_tensor(tp_run_output(r, i), want[i], 0, 0));
        free_tensors(want, 2);
    }
    tp_run_free(r);
    tp_tensor_free(x);
    tp_program_free(p);
}

/* Reference steps (no fast variant) inside a plan: an embedding lookup
 * (index_select on a transposed view of the table, which the fast
 * variant declines: the reference copies a view per index) and a stack
 * (no fast variant) whose output and inputs are views of the one arena.
 * Neither may allocate in steady state: their per-element views live on
 * the stack, and copy_ between disjoint parts of one storage needs no
 * temporary. Values: out[t] = [[W[ids[t]]], [relu(-W[ids[t]])]]. As
 * many indices as table rows: fewer would move the selection before the
 * transpose (plan_rewrite.c's row selections), onto the fast variant. */
TEST(test_steady_state_reference_steps) {
    enum { V = 5, D = 3, T = 5 };
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *w = placeholder(g, "p_emb_weight", 2, (int64_t[]){V, D});
    tp_tensor *idm = NULL;
    CHECK_OK(tp_tensor_meta(TP_INT64, 1, (int64_t[]){T}, &idm));
    tp_value idv = tp_value_tensor(idm);
    tp_node *ids = NULL;
    CHECK_OK(tp_graph_placeholder(g, "ids", &idv, &ids));
    tp_value_clear(&idv);
    tp_node *wt_view = call(g, TP_OP_TRANSPOSE, 3, (tp_value[]){N(w), tp_value_int(0), tp_value_int(1)});
    tp_node *emb_t = call(g, TP_OP_INDEX_SELECT, 3, (tp_value[]){N(wt_view), tp_value_int(1), N(ids)});
    tp_node *emb = call(g, TP_OP_TRANSPOSE, 3, (tp_value[]){N(emb_t), tp_value_int(0), tp_value_int(1)});
    tp_node *neg = call(g, TP_OP_NEG, 1, (tp_value[]){N(emb)});
    tp_node *r = call(g, TP_OP_RELU, 1, (tp_value[]){N(neg)});
    tp_value list;
    CHECK_OK(tp_value_list(2, &list));
    list.u.seq.items[0] = N(emb);
    list.u.seq.items[1] = N(r);
    tp_node *cat = call(g, TP_OP_STACK, 2, (tp_value[]){list, tp_value_int(1)});
    tp_value_clear(&list);
    output_nodes(g, 1, (tp_node *[]){cat});
    tp_signature *sig = NULL;
    CHECK_OK(tp_signature_new(&sig));
    CHECK_OK(tp_signature_add_input(sig, TP_INPUT_PARAMETER, tp_arg_tensor("p_emb_weight"), "emb.weight",
                                    TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor("ids"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(cat)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, sig, &p));
    static const float wv[V * D] = {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12, 13, -14, 15};
    tp_tensor *wt = tensor_f32(2, (int64_t[]){V, D}, wv), *x = NULL;
    static const int64_t idx[T] = {3, 0, 3, 4, 1};
    CHECK_OK(tp_tensor_from_data(TP_INT64, 1, (int64_t[]){T}, idx, &x));
    if (p && wt) CHECK_OK(tp_program_set_state(p, "emb.weight", TP_STATE_PARAMETER, wt, true));
    tp_run *run = NULL;
    if (p && x) CHECK_OK(tp_run_new(p, NULL, &run));
    if (run) {
        CHECK_OK(tp_run_execute(run, &x, 1, NULL, 0));
        tp_run_stats st;
        tp_run_get_stats(run, &st);
        CHECK_MSG(st.n_reference >= 2, "expected index_select and stack on reference kernels, %lld reference steps",
                  (long long)st.n_reference);
        long allocs, frees;
        tp_status s = TP_OK;
        counting_begin();
        for (int k = 0; k < 50 && s == TP_OK; k++) s = tp_run_execute(run, &x, 1, NULL, 0);
        counting_end(&allocs, &frees);
        CHECK_OK(s);
        CHECK_MSG(allocs == 0 && frees == 0, "steady-state calls with reference steps made %ld allocations, %ld frees",
                  allocs, frees);
        float want[T * 2 * D];
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D; j++) {
                float v = wv[idx[t] * D + j];
                want[t * 2 * D + j] = v;
                want[t * 2 * D + D + j] = v < 0 ? -v : 0.0f;
            }
        const tp_tensor *o = tp_run_output(run, 0);
        CHECK(o && tp_tensor_ndim(o) == 3 && tp_tensor_sizes(o)[0] == T && tp_tensor_sizes(o)[1] == 2 &&
              tp_tensor_sizes(o)[2] == D);
        CHECK(tensor_equals(o, want, T * 2 * D));
    }
    tp_run_free(run);
    tp_tensor_free(x);
    tp_tensor_free(wt);
    tp_program_free(p);
}

/* tp_run_call takes the same plans and allocates only its output value. */
TEST(test_run_call) {
    tp_program *p = make_net(4, 16, 32, false, 20);
    tp_tensor *x = rand_tensor(2, (int64_t[]){4, 16}, 3, 2.0f);
    tp_run *r = NULL;
    if (p) CHECK_OK(tp_run_new(p, NULL, &r));
    if (r && x) {
        CHECK(tp_run_program(r) == p);
        tp_tensor *want[2];
        CHECK_OK(program_outputs(p, x, want, 2));
        for (int k = 0; k < 3; k++) {
            tp_value in = tv(tp_tensor_retain(x)), out = tp_value_none();
            CHECK_OK(tp_run_call(r, &in, 1, NULL, &out));
            CHECK(tp_value_is_seq(&out) && tp_value_len(&out) == 2);
            if (tp_value_is_seq(&out) && tp_value_len(&out) == 2) {
                CHECK(same_tensor(tp_value_at(&out, 0)->u.tensor, want[0], 0, 0));
                CHECK(same_tensor(tp_value_at(&out, 1)->u.tensor, want[1], 0, 0));
            }
            tp_value_clear(&out);
            tp_value_clear(&in);
        }
        tp_run_stats st;
        tp_run_get_stats(r, &st);
        CHECK_MSG(st.plans_built == 0 && st.calls == 3, "plans_built %lld calls %lld", (long long)st.plans_built,
                  (long long)st.calls);
        free_tensors(want, 2);
    }
    CHECK_STATUS(tp_run_call(NULL, NULL, 0, NULL, NULL), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp_run_execute(NULL, NULL, 0, NULL, 0), TP_ERR_INVALID_ARG);
    tp_run_free(NULL);
    tp_run_free(r);
    tp_tensor_free(x);
    tp_program_free(p);
}

/* A program the engine cannot plan (a py_binop's number is no tensor) is
 * interpreted; called through a run context at the reference level, its
 * nodes run the reference kernels, as its plans would: the matmul gives
 * the reference kernel's bits, not the fast GEMM's (another summation
 * order over K = 300). */
TEST(test_interpreted_at_the_run_level) {
    enum { M = 8, K = 300, NC = 8 };
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = placeholder(g, "x", 2, (int64_t[]){M, K}), *w = placeholder(g, "p_w", 2, (int64_t[]){K, NC});
    tp_node *y = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(x), N(w)});
    tp_value op = tp_value_none();
    CHECK_OK(tp_value_str("add", &op));
    tp_node *k = call(g, TP_OP_PY_BINOP, 3, (tp_value[]){op, tp_value_int(2), tp_value_int(3)});
    tp_value_clear(&op);
    tp_node *o = call(g, TP_OP_MUL, 2, (tp_value[]){N(y), N(k)});
    output_nodes(g, 2, (tp_node *[]){y, o});
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_w"), "w", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(y)), NULL));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(o)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    tp_tensor *xt = rand_tensor(2, (int64_t[]){M, K}, 41, 1.0f), *wt = rand_tensor(2, (int64_t[]){K, NC}, 42, 1.0f);
    if (p && wt) CHECK_OK(tp_program_set_state(p, "w", TP_STATE_PARAMETER, wt, true));
    tp_value in = tv(tp_tensor_retain(xt)), want = tp_value_none(), got = tp_value_none();
    tp_ops_force_reference(true);
    if (p) CHECK_OK(tp_program_call(p, &in, 1, NULL, &want));
    tp_ops_force_reference(false);
    tp_run_options opt;
    tp_run_options_init(&opt);
    opt.cpu_level = TP_CPU_REFERENCE;
    tp_run *r = NULL;
    if (p) CHECK_OK(tp_run_new(p, &opt, &r));
    if (r) CHECK_OK(tp_run_call(r, &in, 1, NULL, &got));
    tp_run_stats st;
    tp_run_get_stats(r, &st);
    CHECK_MSG(st.plans_built == 0, "the program was planned (%lld plans)", (long long)st.plans_built);
    for (int i = 0; i < 2 && tp_value_len(&want) == 2 && tp_value_len(&got) == 2; i++)
        CHECK_MSG(same_tensor(tp_value_at(&got, i)->u.tensor, tp_value_at(&want, i)->u.tensor, 0, 0),
                  "output %d differs from the reference kernels'", i);
    tp_value_clear(&got);
    tp_value_clear(&want);
    tp_value_clear(&in);
    tp_run_free(r);
    tp_tensor_free(wt);
    tp_tensor_free(xt);
    tp_program_free(p);
}

/* ---- 2. every CPU level and thread count against the reference path ---- */

TEST(test_levels_and_threads) {
    enum { B = 128, D = 64, H = 512 }; /* relu over 64K elements: big enough to split */
    tp_program *p = make_net(B, D, H, false, 30);
    tp_tensor *x = rand_tensor(2, (int64_t[]){B, D}, 4, 4.0f);
    if (!p || !x) goto out;
    tp_cpu_level supported = tp_cpu_level_supported();
    CHECK(supported >= TP_CPU_SCALAR && supported <= TP_CPU_AVX512);
    tp_tensor *ref[2] = {NULL, NULL}, *call[2] = {NULL, NULL};
    {
        tp_run_options opt;
        tp_run_options_init(&opt);
        CHECK(opt.struct_size == sizeof opt && opt.cpu_level == TP_CPU_AUTO && opt.num_threads == 0);
        opt.cpu_level = TP_CPU_REFERENCE;
        opt.num_threads = 1;
        tp_run *r = NULL;
        CHECK_OK(tp_run_new(p, &opt, &r));
        if (r) {
            CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0));
            tp_run_stats st;
            tp_run_get_stats(r, &st);
            CHECK(st.cpu_level == TP_CPU_REFERENCE && st.n_fast == 0 && st.n_reference > 0);
            for (int i = 0; i < 2; i++)
                if (tp_run_output(r, i)) CHECK_OK(tp_tensor_clone(tp_run_output(r, i), &ref[i]));
            tp_run_free(r);
        }
    }
    char skipped[64] = "";
    for (int level = TP_CPU_REFERENCE; level <= TP_CPU_AVX512; level++) {
        if (level > supported) {
            strcat(skipped, " ");
            strcat(skipped, tp_cpu_level_name((tp_cpu_level)level));
            continue;
        }
        for (int threads = 3; threads >= 1; threads--) {
            prof pr = {.want = tp_cpu_level_name((tp_cpu_level)level)};
            tp_run_options opt;
            tp_run_options_init(&opt);
            opt.cpu_level = (tp_cpu_level)level;
            opt.num_threads = threads;
            opt.profile = prof_fn;
            opt.profile_user = &pr;
            tp_run *r = NULL;
            CHECK_OK(tp_run_new(p, &opt, &r));
            if (!r) continue;
            for (int k = 0; k < 2; k++) CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0));
            tp_run_stats st;
            tp_run_get_stats(r, &st);
            const char *ln = tp_cpu_level_name((tp_cpu_level)level);
            CHECK_MSG(st.cpu_level == level, "%s: plan built for %s", ln, tp_cpu_level_name(st.cpu_level));
            for (int i = 0; i < 2; i++)
                CHECK_MSG(same_tensor(tp_run_output(r, i), ref[i], RTOL, ATOL), "%s, %d threads: output %d vs reference", ln,
                          threads, i);
            CHECK_MSG(pr.events > 0 && pr.events <= 2 * st.n_steps && pr.events % 2 == 0, "%d events for 2 calls of %lld steps",
                      pr.events, (long long)st.n_steps);
            if (level == TP_CPU_REFERENCE) {
                CHECK_MSG(st.n_fast == 0 && pr.fast_events == 0, "reference level ran %lld fast steps", (long long)st.n_fast);
                CHECK(pr.max_threads == 1);
            } else {
                /* linear x2, relu, add, sigmoid have fast variants (relu and add may be fused into
                 * the GEMMs); at most the softmax, on a strided slice, runs its reference kernel */
                CHECK_MSG(st.n_fast >= 2 && st.n_reference <= 1, "%s: %lld fast steps, %lld reference steps", ln,
                          (long long)st.n_fast, (long long)st.n_reference);
                CHECK_MSG(pr.level_events > 0, "%s: no step ran a variant named %s", ln, ln);
                CHECK_MSG(pr.max_threads <= threads, "%s: a step ran on %d of %d threads", ln, pr.max_threads, threads);
                if (threads > 1) CHECK_MSG(pr.max_threads > 1, "%s, %d threads: every step ran on one thread", ln, threads);
            }
            CHECK_MSG(pr.spread_bad == 0, "%s, %d threads: %d events with a spread outside [0, ms] (or not 0 on one thread)",
                      ln, threads, pr.spread_bad);
            /* the thread count can change between calls on the same plan */
            tp_run_set_num_threads(r, threads == 1 ? 2 : 1);
            CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0));
            for (int i = 0; i < 2; i++) CHECK(same_tensor(tp_run_output(r, i), ref[i], RTOL, ATOL));
            tp_run_free(r);
        }
    }
    /* tp_program_call (after the loop: a plan it builds would be shared with the runs above) */
    CHECK_OK(program_outputs(p, x, call, 2));
    for (int i = 0; i < 2; i++) CHECK_MSG(same_tensor(call[i], ref[i], RTOL, ATOL), "tp_program_call output %d vs reference", i);
    if (skipped[0]) printf("  test_levels_and_threads: skipped CPU levels above %s:%s\n", tp_cpu_level_name(supported), skipped);
    else printf("  test_levels_and_threads: ran every CPU level up to avx512\n");
    /* the process-wide cap applies to runs asking for AUTO */
    tp_set_cpu_level(TP_CPU_REFERENCE);
    CHECK(tp_cpu_level_effective() == TP_CPU_REFERENCE);
    {
        tp_run *r = NULL;
        CHECK_OK(tp_run_new(p, NULL, &r));
        if (r) {
            CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0));
            tp_run_stats st;
            tp_run_get_stats(r, &st);
            CHECK(st.cpu_level == TP_CPU_REFERENCE && st.n_fast == 0);
            CHECK(same_tensor(tp_run_output(r, 0), ref[0], 0, 0));
            tp_run_free(r);
        }
    }
    pin_cpu_level(); /* back to the pinned level (see the top of the file) */
    /* a default thread count from tp_set_num_threads */
    tp_set_num_threads(3);
    CHECK(tp_get_num_threads() == 3);
    {
        tp_tensor *o[2];
        CHECK_OK(program_outputs(p, x, o, 2));
        for (int i = 0; i < 2; i++) CHECK(same_tensor(o[i], ref[i], RTOL, ATOL));
        free_tensors(o, 2);
    }
    tp_set_num_threads(1);
    free_tensors(ref, 2);
    free_tensors(call, 2);
out:
    tp_tensor_free(x);
    tp_program_free(p);
}

/* A plan is shared by every run context of its shape class and level; its
 * thread split must follow the run that calls it, not the one that built it. */
TEST(test_thread_count_follows_the_run) {
    enum { B = 128, D = 64, H = 512 };
    tp_program *p = make_net(B, D, H, false, 31);
    tp_tensor *x = rand_tensor(2, (int64_t[]){B, D}, 5, 4.0f);
    tp_run *r1 = NULL, *r2 = NULL;
    prof pr = {0};
    tp_run_options opt;
    tp_run_options_init(&opt);
    opt.num_threads = 1;
    if (p) CHECK_OK(tp_run_new(p, &opt, &r1));
    opt.num_threads = 2;
    opt.profile = prof_fn;
    opt.profile_user = &pr;
    if (p) CHECK_OK(tp_run_new(p, &opt, &r2));
    if (x && r1 && r2) {
        CHECK_OK(tp_run_execute(r1, &x, 1, NULL, 0)); /* builds the plan with one thread */
        CHECK_OK(tp_run_execute(r2, &x, 1, NULL, 0)); /* finds it */
        tp_run_stats st;
        tp_run_get_stats(r2, &st);
        CHECK(st.plans_built == 0);
        CHECK_MSG(pr.max_threads > 1,
                  "a 2-thread run context ran every step on one thread: the cached plan was prepared for 1 thread");
        /* and a run context asked for more threads later */
        pr.max_threads = 0;
        tp_run_set_num_threads(r2, 1);
        CHECK_OK(tp_run_execute(r2, &x, 1, NULL, 0));
        CHECK(pr.max_threads == 1);
        tp_run_set_num_threads(r2, 2);
        pr.max_threads = 0;
        CHECK_OK(tp_run_execute(r2, &x, 1, NULL, 0));
        CHECK_MSG(pr.max_threads > 1, "tp_run_set_num_threads(r, 2) did not take effect");
        CHECK(same_tensor(tp_run_output(r1, 0), tp_run_output(r2, 0), RTOL, ATOL));
    }
    tp_run_free(r1);
    tp_run_free(r2);
    tp_tensor_free(x);
    tp_program_free(p);
}

/* The copy of a view into its output (v, 256 KiB here) is split among the
 * run's threads: 2 and 3 threads give the bytes one thread gives, and the
 * copy step reports the threads that ran it. */
typedef struct copy_prof {
    int copy_events, copy_threads;
} copy_prof;

static void copy_prof_fn(void *user, const tp_profile_event *e) {
    copy_prof *p = user;
    if (strcmp(e->variant, "copy") == 0) {
        p->copy_events++;
        if (e->threads > p->copy_threads) p->copy_threads = e->threads;
    }
}

/* A unary op over a column slice (rows of 64 contiguous floats, 72 apart:
 * dims that do not merge, so the kernel walks rows) with a fused second
 * op, at the best level with 1-3 threads, bit for bit against the
 * reference level. test_engine_stream runs it with TP_STREAM_MIN_BYTES=0,
 * where those rows go through the non-temporal path in blocks. */
/* ops[0..n_ops) applied in turn to a [96, 64] column slice of a [96, 72]
 * input; tol 0: bit for bit the reference level, else within tol
 * (relative and absolute). */
static void strided_rows_case(const tp_op *ops, int n_ops, double tol) {
    enum { R = 96, C = 64, W = 72 };
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = placeholder(g, "x", 2, (int64_t[]){R, W});
    tp_node *sl = call(g, TP_OP_SLICE, 4, (tp_value[]){N(x), tp_value_int(1), tp_value_int(0), tp_value_int(C)});
    tp_node *r = sl;
    for (int k = 0; k < n_ops; k++) r = call(g, ops[k], 1, (tp_value[]){N(r)});
    output_nodes(g, 1, (tp_node *[]){r});
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(r)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    tp_tensor *xt = rand_tensor(2, (int64_t[]){R, W}, 77, 3.0f), *want = NULL;
    tp_tensor *other = rand_tensor(2, (int64_t[]){R, W}, 78, 3.0f);
    const int levels[2] = {TP_CPU_REFERENCE, (int)tp_cpu_level_supported()};
    for (int li = 0; p && xt && other && li < 2; li++)
        for (int threads = 1; threads <= (li == 0 ? 1 : 3); threads++) {
            const int level = levels[li];
            tp_run_options opt;
            tp_run_options_init(&opt);
            opt.cpu_level = (tp_cpu_level)level;
            opt.num_threads = threads;
            tp_run *run = NULL;
            CHECK_OK(tp_run_new(p, &opt, &run));
            if (!run) continue;
            CHECK_OK(tp_run_execute(run, &xt, 1, NULL, 0));
            const tp_tensor *o = tp_run_output(run, 0);
            tp_run_stats st;
            tp_run_get_stats(run, &st);
            if (level == TP_CPU_REFERENCE) {
                if (o) CHECK_OK(tp_tensor_clone(o, &want));
                /* then another input: memory the allocator hands the next
                 * run holds its results, so an element a fast kernel skips
                 * is wrong there rather than left right by this run */
                CHECK_OK(tp_run_execute(run, &other, 1, NULL, 0));
            } else if (o && want) {
                CHECK_MSG(st.n_fast > 0, "no fast step at %s", tp_cpu_level_name((tp_cpu_level)level));
                char msg[256] = "";
                CHECK_MSG(tp_tensor_numel(o) == R * C &&
                              (tol > 0 ? tp_tensor_allclose(o, want, tol, tol, msg, sizeof msg)
                                       : memcmp(tp_tensor_data(o), tp_tensor_data(want), sizeof(float) * R * C) == 0),
                          "%d threads: differs from the reference level %s", threads, msg);
            }
            tp_run_free(run);
        }
    tp_tensor_free(want);
    tp_tensor_free(other);
    tp_tensor_free(xt);
    tp_program_free(p);
}

TEST(test_unary_on_strided_rows) { strided_rows_case((const tp_op[]){TP_OP_NEG, TP_OP_RELU}, 2, 0.0); }

/* A transcendental op alone over those rows: under TP_STREAM_MIN_BYTES=0
 * (test_engine_stream) each row is stored non-temporally straight from the
 * op's loop (fast_eltwise.c unary_run, tp_eltwise_table.unary_stream);
 * gelu's fast forms are within 1e-6 of the reference's. */
TEST(test_unary_on_strided_rows_gelu) { strided_rows_case((const tp_op[]){TP_OP_GELU}, 1, 1e-6); }

/* An eager call whose fast variant fails (an index out of range in
 * index_select's and embedding's row gathers, fast_index.c) reports what
 * the reference kernel reports: the same status, and the message with the
 * op's name in front, as every other failing eager kernel's. */
TEST(test_eager_fast_errors_name_the_op) {
    tp_tensor *w = rand_tensor(2, (int64_t[]){3, 4}, 5, 1.0f), *idx = NULL;
    CHECK_OK(tp_tensor_from_data(TP_INT64, 1, (int64_t[]){2}, (const int64_t[]){1, 3}, &idx));
    const tp_op ops[] = {TP_OP_INDEX_SELECT, TP_OP_EMBEDDING};
    for (int k = 0; w && idx && k < 2; k++) {
        tp_value args[3];
        int n = 0;
        args[n++] = tv(tp_tensor_retain(w));
        if (ops[k] == TP_OP_INDEX_SELECT) args[n++] = tp_value_int(0);
        args[n++] = tv(tp_tensor_retain(idx));
        char fast_msg[512], ref_msg[512];
        tp_value out = tp_value_none();
        tp_status fast = tp_op_call(ops[k], args, n, NULL, &out);
        snprintf(fast_msg, sizeof fast_msg, "%s", tp_last_error());
        tp_ops_force_reference(true);
        tp_status ref = tp_op_call(ops[k], args, n, NULL, &out);
        snprintf(ref_msg, sizeof ref_msg, "%s", tp_last_error());
        tp_ops_force_reference(false);
        CHECK_MSG(fast == TP_ERR_INDEX && ref == TP_ERR_INDEX, "%s: fast %s, reference %s", tp_op_name(ops[k]),
                  tp_status_str(fast), tp_status_str(ref));
        CHECK_MSG(strcmp(fast_msg, ref_msg) == 0, "%s: fast \"%s\", reference \"%s\"", tp_op_name(ops[k]), fast_msg,
                  ref_msg);
        for (int i = 0; i < n; i++) tp_value_clear(&args[i]);
    }
    tp_tensor_free(idx);
    tp_tensor_free(w);
}

/* A unary op over one element expanded along the whole output: the input's
 * single run has stride 0, which the fast loop once read as contiguous,
 * past the element. Eagerly and in a plan at the best level on 1 and 2
 * threads, bit for bit the reference. The element is a slice of a larger
 * tensor, so such a read finds the elements after it, not a sanitizer's
 * red zone. */
TEST(test_unary_on_broadcast_element) {
    enum { N_OUT = 6 };
    tp_tensor *base = tensor_f32(1, (int64_t[]){8}, (const float[]){1, 2, 3, 4, 5, 6, 7, 8}), *x = NULL, *e = NULL;
    CHECK_OK(tp_tensor_slice(base, 0, 2, 3, 1, &x));
    if (x) CHECK_OK(tp_tensor_expand(x, 1, (int64_t[]){N_OUT}, &e));
    const tp_op ops[] = {TP_OP_NEG, TP_OP_EXP};
    for (int k = 0; e && k < 2; k++) {
        tp_value arg = tv(tp_tensor_retain(e)), fast = tp_value_none(), ref = tp_value_none();
        CHECK_OK(tp_op_call(ops[k], &arg, 1, NULL, &fast));
        tp_ops_force_reference(true);
        CHECK_OK(tp_op_call(ops[k], &arg, 1, NULL, &ref));
        tp_ops_force_reference(false);
        CHECK_MSG(fast.kind == TP_VAL_TENSOR && ref.kind == TP_VAL_TENSOR &&
                      memcmp(tp_tensor_data(fast.u.tensor), tp_tensor_data(ref.u.tensor), sizeof(float) * N_OUT) == 0,
                  "eager %s differs from the reference kernel", tp_op_name(ops[k]));
        tp_value_clear(&arg);
        tp_value_clear(&fast);
        tp_value_clear(&ref);
    }
    /* the plan: expand(x, [N_OUT]) is a view step, neg reads it */
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *xn = placeholder(g, "x", 1, (int64_t[]){1});
    tp_value size = tp_value_none();
    CHECK_OK(tp_value_int_list((int64_t[]){N_OUT}, 1, &size));
    tp_node *en = call(g, TP_OP_EXPAND, 2, (tp_value[]){N(xn), size});
    tp_value_clear(&size);
    tp_node *r = call(g, TP_OP_NEG, 1, (tp_value[]){N(en)});
    output_nodes(g, 1, (tp_node *[]){r});
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(r)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    tp_tensor *want = NULL;
    const int levels[2] = {TP_CPU_REFERENCE, (int)tp_cpu_level_supported()};
    for (int li = 0; p && x && li < 2; li++)
        for (int threads = 1; threads <= (li == 0 ? 1 : 2); threads++) {
            tp_run_options opt;
            tp_run_options_init(&opt);
            opt.cpu_level = (tp_cpu_level)levels[li];
            opt.num_threads = threads;
            tp_run *run = NULL;
            CHECK_OK(tp_run_new(p, &opt, &run));
            if (!run) continue;
            CHECK_OK(tp_run_execute(run, &x, 1, NULL, 0));
            const tp_tensor *o = tp_run_output(run, 0);
            tp_run_stats st;
            tp_run_get_stats(run, &st);
            if (li == 0) {
                if (o) CHECK_OK(tp_tensor_clone(o, &want));
            } else if (o && want) {
                CHECK_MSG(st.n_fast > 0, "no fast step at %s", tp_cpu_level_name((tp_cpu_level)levels[li]));
                CHECK_MSG(memcmp(tp_tensor_data(o), tp_tensor_data(want), sizeof(float) * N_OUT) == 0,
                          "%d threads: differs from the reference level", threads);
            }
            tp_run_free(run);
        }
    tp_tensor_free(want);
    tp_program_free(p);
    tp_tensor_free(e);
    tp_tensor_free(x);
    tp_tensor_free(base);
}

TEST(test_copy_split_among_threads) {
    enum { B = 1024, D = 64, H = 64 };
    tp_program *p = make_net(B, D, H, false, 37);
    tp_tensor *x = rand_tensor(2, (int64_t[]){B, D}, 11, 2.0f);
    tp_tensor *want = NULL; /* v from one thread */
    for (int threads = 1; threads <= 3 && p && x; threads++) {
        copy_prof cp = {0};
        tp_run_options opt;
        tp_run_options_init(&opt);
        opt.num_threads = threads;
        opt.profile = copy_prof_fn;
        opt.profile_user = &cp;
        tp_run *r = NULL;
        CHECK_OK(tp_run_new(p, &opt, &r));
        if (!r) break;
        CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0));
        const tp_tensor *v = tp_run_output(r, 1);
        CHECK(cp.copy_events >= 1);
        CHECK_MSG(cp.copy_threads == threads, "copy ran on %d threads, want %d", cp.copy_threads, threads);
        if (v && threads == 1) { /* one thread: the plain copy (copy_into), the reference here */
            CHECK(tp_tensor_ndim(v) == 3 && tp_tensor_size(v, 0) == B && tp_tensor_size(v, 1) == D / 2 &&
                  tp_tensor_size(v, 2) == 2);
            CHECK_OK(tp_tensor_clone(v, &want));
        } else if (v && want) { /* slabs of the first dim: bit for bit the same */
            CHECK(tp_tensor_numel(v) == tp_tensor_numel(want) &&
                  memcmp(tp_tensor_data(v), tp_tensor_data(want), (size_t)tp_tensor_numel(want) * sizeof(float)) == 0);
        }
        tp_run_free(r);
    }
    tp_tensor_free(want);
    tp_tensor_free(x);
    tp_program_free(p);
}

/* ---- 3. one program, many threads --------------------------------------- */

enum { N_THREADS = 8, N_CALLS = 50 };

typedef enum { VIA_RUN_EXECUTE, VIA_PROGRAM_CALL, VIA_RUN_CALL } call_mode;

typedef struct thread_job {
    tp_program *p;
    call_mode mode;
    int num_threads; /* of the thread's run context */
    int n_calls;
    tp_tensor **inputs; /* n_calls */
    tp_tensor **want;   /* 2 per call */
    int failures, mismatches;
} thread_job;

/* Workers never touch the harness's failure counter: they count locally. */
static void *thread_worker(void *arg) {
    thread_job *j = arg;
    tp_run *r = NULL;
    if (j->mode != VIA_PROGRAM_CALL) {
        tp_run_options opt;
        tp_run_options_init(&opt);
        opt.num_threads = j->num_threads;
        if (tp_run_new(j->p, &opt, &r) != TP_OK) {
            j->failures++;
            return NULL;
        }
    }
    for (int k = 0; k < j->n_calls; k++) {
        tp_tensor *got[2] = {NULL, NULL};
        tp_tensor *x = j->inputs[k];
        if (j->mode == VIA_RUN_EXECUTE) {
            if (tp_run_execute(r, &x, 1, NULL, 0) != TP_OK) {
                j->failures++;
                continue;
            }
            got[0] = tp_tensor_retain(tp_run_output(r, 0));
            got[1] = tp_tensor_retain(tp_run_output(r, 1));
        } else if (j->mode == VIA_PROGRAM_CALL) {
            if (program_outputs(j->p, x, got, 2) != TP_OK) {
                j->failures++;
                continue;
            }
        } else {
            tp_value in = tv(tp_tensor_retain(x)), out = tp_value_none();
            tp_status st = tp_run_call(r, &in, 1, NULL, &out);
            tp_value_clear(&in);
            if (st != TP_OK || !tp_value_is_seq(&out) || tp_value_len(&out) != 2) {
                j->failures++;
                tp_value_clear(&out);
                continue;
            }
            got[0] = tp_tensor_retain(tp_value_at(&out, 0)->u.tensor);
            got[1] = tp_tensor_retain(tp_value_at(&out, 1)->u.tensor);
            tp_value_clear(&out);
        }
        for (int i = 0; i < 2; i++)
            if (!got[i] || !tp_tensor_allclose(got[i], j->want[2 * k + i], 0, 0, NULL, 0)) j->mismatches++;
        free_tensors(got, 2);
    }
    tp_run_free(r);
    return NULL;
}

static void run_thread_jobs(tp_program *p, call_mode mode, int num_threads, int n_calls, tp_tensor ***inputs,
                            tp_tensor ***want, const char *what) {
    pthread_t th[N_THREADS];
    thread_job jobs[N_THREADS];
    bool started[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        jobs[t] = (thread_job){p, mode, num_threads, n_calls, inputs[t], want[t], 0, 0};
        started[t] = pthread_create(&th[t], NULL, thread_worker, &jobs[t]) == 0;
        CHECK(started[t]);
    }
    for (int t = 0; t < N_THREADS; t++) {
        if (!started[t]) continue;
        pthread_join(th[t], NULL);
        CHECK_MSG(jobs[t].failures == 0 && jobs[t].mismatches == 0,
                  "%s: thread %d: %d failed calls, %d outputs differ from the serial results", what, t, jobs[t].failures,
                  jobs[t].mismatches);
    }
}

/* Serial results (want, through a run with num_threads) for per-thread inputs. */
static void thread_fixture(tp_program *p, int64_t B, int64_t D, int n_calls, int num_threads, tp_tensor ***inputs,
                           tp_tensor ***want) {
    tp_run_options opt;
    tp_run_options_init(&opt);
    opt.num_threads = num_threads;
    tp_run *r = NULL;
    CHECK_OK(tp_run_new(p, &opt, &r));
    for (int t = 0; t < N_THREADS; t++) {
        inputs[t] = tp_calloc((size_t)n_calls, sizeof **inputs);
        want[t] = tp_calloc((size_t)n_calls * 2, sizeof **want);
        for (int k = 0; k < n_calls; k++) {
            inputs[t][k] = rand_tensor(2, (int64_t[]){B, D}, (uint32_t)(1000 * t + k), 4.0f);
            if (r && inputs[t][k] && tp_run_execute(r, &inputs[t][k], 1, NULL, 0) == TP_OK) {
                CHECK_OK(tp_tensor_clone(tp_run_output(r, 0), &want[t][2 * k]));
                CHECK_OK(tp_tensor_clone(tp_run_output(r, 1), &want[t][2 * k + 1]));
            } else {
                CHECK_MSG(false, "serial call %d/%d failed: %s", t, k, tp_last_error());
            }
        }
    }
    tp_run_free(r);
}

static void thread_fixture_free(int n_calls, tp_tensor ***inputs, tp_tensor ***want) {
    for (int t = 0; t < N_THREADS; t++) {
        if (inputs[t]) free_tensors(inputs[t], n_calls);
        if (want[t]) free_tensors(want[t], 2 * n_calls);
        tp_free(inputs[t]);
        tp_free(want[t]);
    }
}

TEST(test_threads_share_program) {
    enum { B = 8, D = 32, H = 64 };
    tp_program *p = make_net(B, D, H, false, 40);
    if (!p) return;
    tp_tensor **inputs[N_THREADS], **want[N_THREADS];
    thread_fixture(p, B, D, N_CALLS, 1, inputs, want);
    /* a fresh program too, so that threads race to build and cache the first plan */
    tp_program *fresh = make_net(B, D, H, false, 40);
    if (fresh) run_thread_jobs(fresh, VIA_RUN_EXECUTE, 1, N_CALLS, inputs, want, "fresh program, tp_run_execute");
    tp_program_free(fresh);
    fresh = make_net(B, D, H, false, 40);
    if (fresh) run_thread_jobs(fresh, VIA_PROGRAM_CALL, 1, N_CALLS, inputs, want, "fresh program, tp_program_call");
    tp_program_free(fresh);
    run_thread_jobs(p, VIA_RUN_EXECUTE, 1, N_CALLS, inputs, want, "tp_run_execute");
    run_thread_jobs(p, VIA_PROGRAM_CALL, 1, N_CALLS, inputs, want, "tp_program_call");
    run_thread_jobs(p, VIA_RUN_CALL, 1, N_CALLS, inputs, want, "tp_run_call");
    thread_fixture_free(N_CALLS, inputs, want);
    tp_program_free(p);
}

/* Run contexts with 2 threads each, from 8 threads: the shared pool. */
TEST(test_threads_share_pool) {
    enum { B = 64, D = 64, H = 1024, CALLS = 8 };
    tp_program *p = make_net(B, D, H, false, 50);
    if (!p) return;
    tp_tensor **inputs[N_THREADS], **want[N_THREADS];
    thread_fixture(p, B, D, CALLS, 2, inputs, want);
    run_thread_jobs(p, VIA_RUN_EXECUTE, 2, CALLS, inputs, want, "2-thread runs");
    thread_fixture_free(CALLS, inputs, want);
    tp_program_free(p);
}

/* ---- 4. a mutating program serialises its calls ------------------------- */

enum { COUNTER_CALLS = 200 };

typedef struct counter_job {
    tp_program *p;
    call_mode mode;
    float seen[COUNTER_CALLS]; /* the count each call saw */
    int failures;
} counter_job;

static void *counter_worker(void *arg) {
    counter_job *j = arg;
    tp_tensor *x = NULL;
    tp_run *r = NULL;
    if (tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){2}, (float[]){1, 2}, &x) != TP_OK ||
        (j->mode == VIA_RUN_EXECUTE && tp_run_new(j->p, NULL, &r) != TP_OK)) {
        j->failures++;
        tp_tensor_free(x);
        return NULL;
    }
    for (int k = 0; k < COUNTER_CALLS; k++) {
        j->seen[k] = -1;
        tp_tensor *y = NULL;
        if (j->mode == VIA_RUN_EXECUTE) {
            if (tp_run_execute(r, &x, 1, NULL, 0) == TP_OK) y = tp_tensor_retain(tp_run_output(r, 0));
        } else {
            program_outputs(j->p, x, &y, 1);
        }
        if (!y || tp_tensor_numel(y) != 2) {
            j->failures++;
        } else {
            /* y = x * (count + 1) = [c, 2c] with c the count after this call's increment */
            float c = (float)tp_tensor_item_f64(y, 0);
            if ((float)tp_tensor_item_f64(y, 1) != 2 * c) j->failures++;
            j->seen[k] = c;
        }
        tp_tensor_free(y);
    }
    tp_run_free(r);
    tp_tensor_free(x);
    return NULL;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static void reset_counter(tp_program *p) {
    tp_tensor *z = NULL;
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 1, (int64_t[]){1}, &z));
    CHECK_OK(tp_program_set_state(p, "count", TP_STATE_BUFFER, z, true));
    tp_tensor_free(z);
}

static void run_counter_threads(tp_program *p, call_mode mode, const char *what) {
    static counter_job jobs[N_THREADS];
    static float all[N_THREADS * COUNTER_CALLS];
    pthread_t th[N_THREADS];
    bool started[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        memset(&jobs[t], 0, sizeof jobs[t]);
        jobs[t].p = p;
        jobs[t].mode = mode;
        started[t] = pthread_create(&th[t], NULL, counter_worker, &jobs[t]) == 0;
        CHECK(started[t]);
    }
    int n = 0;
    for (int t = 0; t < N_THREADS; t++) {
        if (!started[t]) continue;
        pthread_join(th[t], NULL);
        CHECK_MSG(jobs[t].failures == 0, "%s: thread %d: %d failed calls", what, t, jobs[t].failures);
        for (int k = 0; k < COUNTER_CALLS; k++) all[n++] = jobs[t].seen[k];
    }
    tp_tensor *c = NULL;
    CHECK_OK(tp_program_get_state(p, "count", &c, NULL, NULL));
    double count = c ? tp_tensor_item_f64(c, 0) : -1;
    CHECK_MSG(count == N_THREADS * COUNTER_CALLS, "%s: count is %g after %d calls", what, count,
              N_THREADS * COUNTER_CALLS);
    /* serialised: every call saw its own count, 1 .. 1600, each exactly once */
    qsort(all, (size_t)n, sizeof *all, cmp_float);
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (all[i] != (float)(i + 1)) bad++;
    CHECK_MSG(n == N_THREADS * COUNTER_CALLS && bad == 0, "%s: %d of %d calls saw a count shared with another call",
              what, bad, n);
}

TEST(test_mutating_program_serialises) {
    tp_program *p = make_counter();
    if (!p) return;
    run_counter_threads(p, VIA_PROGRAM_CALL, "tp_program_call");
    reset_counter(p);
    run_counter_threads(p, VIA_RUN_EXECUTE, "tp_run_execute");
    /* both at once: 2 x 1600 */
    reset_counter(p);
    {
        static counter_job jobs[2 * N_THREADS];
        pthread_t th[2 * N_THREADS];
        bool started[2 * N_THREADS];
        for (int t = 0; t < 2 * N_THREADS; t++) {
            memset(&jobs[t], 0, sizeof jobs[t]);
            jobs[t].p = p;
            jobs[t].mode = t % 2 ? VIA_RUN_EXECUTE : VIA_PROGRAM_CALL;
            started[t] = pthread_create(&th[t], NULL, counter_worker, &jobs[t]) == 0;
            CHECK(started[t]);
        }
        for (int t = 0; t < 2 * N_THREADS; t++) {
            if (!started[t]) continue;
            pthread_join(th[t], NULL);
            CHECK_MSG(jobs[t].failures == 0, "mixed: thread %d: %d failed calls", t, jobs[t].failures);
        }
        tp_tensor *c = NULL;
        CHECK_OK(tp_program_get_state(p, "count", &c, NULL, NULL));
        CHECK_MSG(c && tp_tensor_item_f64(c, 0) == 2 * N_THREADS * COUNTER_CALLS, "mixed: count is %g",
                  c ? tp_tensor_item_f64(c, 0) : -1);
    }
    tp_program_free(p);
}

/* ---- 5. the arena --------------------------------------------------------- */

/* The chain's op k applied eagerly or as a node. */
static tp_op chain_op(int k, tp_value *extra) {
    static const tp_op ops[] = {TP_OP_ADD, TP_OP_TANH, TP_OP_MUL, TP_OP_SIGMOID, TP_OP_RELU, TP_OP_NEG, TP_OP_EXP};
    tp_op op = ops[k % 7];
    *extra = op == TP_OP_ADD ? tp_value_float(0.25) : op == TP_OP_MUL ? tp_value_float(1.5) : tp_value_none();
    return op;
}

TEST(test_arena_reuses_memory) {
    enum { S = 256, CHAIN = 50 };
    const size_t T = (size_t)S * S * sizeof(float);
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = placeholder(g, "x", 2, (int64_t[]){S, S});
    tp_node *cur = x;
    for (int k = 0; k < CHAIN; k++) {
        tp_value extra;
        tp_op op = chain_op(k, &extra);
        cur = extra.kind == TP_VAL_NONE ? call(g, op, 1, (tp_value[]){N(cur)}) : call(g, op, 2, (tp_value[]){N(cur), extra});
    }
    output_nodes(g, 1, &cur);
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(cur)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    tp_tensor *in = rand_tensor(2, (int64_t[]){S, S}, 7, 4.0f);
    if (!p || !in) goto out;
    /* the eager result, op by op */
    tp_tensor *want = tp_tensor_retain(in);
    for (int k = 0; k < CHAIN && want; k++) {
        tp_value extra, res = tp_value_none();
        tp_op op = chain_op(k, &extra);
        tp_value args[2] = {tv(want), extra};
        CHECK_OK(tp_op_call(op, args, extra.kind == TP_VAL_NONE ? 1 : 2, NULL, &res));
        tp_value_clear(&args[0]);
        want = res.kind == TP_VAL_TENSOR ? tp_tensor_retain(res.u.tensor) : NULL;
        tp_value_clear(&res);
    }
    size_t sum_intermediates = (size_t)(CHAIN - 1) * T; /* the last result is the output */
    for (int level = TP_CPU_REFERENCE; level <= (int)tp_cpu_level_supported(); level++) {
        for (int threads = 1; threads <= 2; threads++) {
            tp_run_options opt;
            tp_run_options_init(&opt);
            opt.cpu_level = (tp_cpu_level)level;
            opt.num_threads = threads;
            tp_run *r = NULL;
            CHECK_OK(tp_run_new(p, &opt, &r));
            if (!r) continue;
            CHECK_OK(tp_run_execute(r, &in, 1, NULL, 0));
            CHECK_OK(tp_run_execute(r, &in, 1, NULL, 0));
            tp_run_stats st;
            tp_run_get_stats(r, &st);
            const char *ln = tp_cpu_level_name((tp_cpu_level)level);
            CHECK_MSG(st.n_steps == CHAIN, "%s: %lld steps", ln, (long long)st.n_steps);
            /* fast levels fuse the chain into blocks of one pass (eltwise_fuse); the reference level
             * runs every step, and its arena shows the liveness reuse */
            if (level >= TP_CPU_SCALAR)
                CHECK_MSG(st.n_fast + st.n_fused == CHAIN && st.n_fused > 0, "%s: %lld fast + %lld fused of %d steps", ln,
                          (long long)st.n_fast, (long long)st.n_fused, CHAIN);
            CHECK_MSG(st.arena_bytes < sum_intermediates && (level >= TP_CPU_SCALAR || st.arena_bytes > 0),
                      "%s: arena %zu bytes, intermediates %zu", ln, st.arena_bytes, sum_intermediates);
            CHECK_MSG(st.arena_bytes <= 3 * T + st.workspace_bytes + 64,
                      "%s, %d threads: arena %zu bytes for a chain of %d [%d,%d] float32 ops (%.1f tensors)", ln, threads,
                      st.arena_bytes, CHAIN, S, S, (double)st.arena_bytes / (double)T);
            CHECK_MSG(same_tensor(tp_run_output(r, 0), want, RTOL, ATOL), "%s, %d threads: chain result", ln, threads);
            tp_run_free(r);
        }
    }
    tp_tensor_free(want);
out:
    tp_tensor_free(in);
    tp_program_free(p);
}

/* cat(items) as a node. */
static tp_node *cat_nodes(tp_graph *g, int n, tp_node *const *items) {
    tp_value l = tp_value_none();
    CHECK_OK(tp_value_list(n, &l));
    for (int i = 0; i < n; i++) {
        tp_value it = N(items[i]);
        CHECK_OK(tp_value_seq_set(&l, i, &it));
    }
    tp_node *c = call(g, TP_OP_CAT, 1, (tp_value[]){l});
    tp_value_clear(&l);
    return c;
}

/* A freed block joins both free neighbours, whatever their order in the
 * free list: a, b, c of S floats side by side, cat(c, a) frees c, then a
 * (the block after b freed first), then cat(b, m1) frees b between them
 * and m1 above c: one free run of 5 S, where a merge with the block after
 * only left S + 4 S, and q = cat(m2, x, x) of 5 S fits there instead of
 * growing the arena (8 S in all: m2 above, q below; 13 S before). */
TEST(test_arena_merges_both_sides) {
    enum { S = 1024 };
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    if (!g) return;
    tp_node *x = placeholder(g, "x", 1, (int64_t[]){S});
    tp_node *a = call(g, TP_OP_NEG, 1, (tp_value[]){N(x)});
    tp_node *b = call(g, TP_OP_EXP, 1, (tp_value[]){N(x)});
    tp_node *c = call(g, TP_OP_TANH, 1, (tp_value[]){N(x)});
    tp_node *m1 = cat_nodes(g, 2, (tp_node *[]){c, a}), *m2 = cat_nodes(g, 2, (tp_node *[]){b, m1});
    tp_node *q = cat_nodes(g, 3, (tp_node *[]){m2, x, x});
    tp_node *o = call(g, TP_OP_SUM, 1, (tp_value[]){N(q)});
    output_nodes(g, 1, &o);
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(o)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    tp_tensor *in = rand_tensor(1, (int64_t[]){S}, 9, 1.0f);
    tp_run_options opt;
    tp_run_options_init(&opt);
    opt.cpu_level = TP_CPU_SCALAR;
    tp_run *r = NULL;
    if (p && in) CHECK_OK(tp_run_new(p, &opt, &r));
    if (r && tp_run_execute(r, &in, 1, NULL, 0) == TP_OK) {
        tp_run_stats st;
        tp_run_get_stats(r, &st);
        CHECK_MSG(st.arena_bytes - st.workspace_bytes <= 8 * S * sizeof(float) + 64,
                  "arena %zu bytes (workspace %zu), expected 8 S = %zu", st.arena_bytes, st.workspace_bytes,
                  (size_t)(8 * S * sizeof(float)));
        double want = 0;
        for (int64_t i = 0; i < S; i++) {
            const double v = tp_tensor_item_f64(in, i);
            want += -v + (double)expf((float)v) + (double)tanhf((float)v) + 2 * v;
        }
        CHECK_MSG(fabs(tp_tensor_item_f64(tp_run_output(r, 0), 0) - want) < 1e-3, "sum %.6g, expected %.6g",
                  tp_tensor_item_f64(tp_run_output(r, 0), 0), want);
    }
    tp_run_free(r);
    tp_tensor_free(in);
    tp_program_free(p);
}

/* Values that stay live across later nodes must not be overwritten by the
 * reuse of their blocks (a diamond-shaped graph). */
TEST(test_arena_liveness_diamond) {
    enum { S = 192 };
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = placeholder(g, "x", 2, (int64_t[]){S, S});
    tp_node *a = call(g, TP_OP_RELU, 1, (tp_value[]){N(x)});
    tp_node *b = call(g, TP_OP_MUL, 2, (tp_value[]){N(a), tp_value_float(2)});
    tp_node *c = call(g, TP_OP_TANH, 1, (tp_value[]){N(b)});
    tp_node *d = call(g, TP_OP_ADD, 2, (tp_value[]){N(c), N(a)});
    tp_node *e = call(g, TP_OP_SIGMOID, 1, (tp_value[]){N(d)});
    tp_node *f = call(g, TP_OP_MUL, 2, (tp_value[]){N(e), N(b)});
    tp_node *h = call(g, TP_OP_SUB, 2, (tp_value[]){N(f), N(a)});
    tp_node *t = call(g, TP_OP_TRANSPOSE, 3, (tp_value[]){N(h), tp_value_int(0), tp_value_int(1)});
    tp_node *o = call(g, TP_OP_ADD, 2, (tp_value[]){N(t), N(e)});
    output_nodes(g, 2, (tp_node *[]){o, a});
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(o)), NULL));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(a)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    tp_tensor *in = rand_tensor(2, (int64_t[]){S, S}, 8, 4.0f);
    if (!p || !in) goto out;
    tp_tensor *want[2] = {NULL, NULL};
    {
        tp_run_options opt;
        tp_run_options_init(&opt);
        opt.cpu_level = TP_CPU_REFERENCE;
        tp_run *r = NULL;
        CHECK_OK(tp_run_new(p, &opt, &r));
        if (r && tp_run_execute(r, &in, 1, NULL, 0) == TP_OK)
            for (int i = 0; i < 2; i++) CHECK_OK(tp_tensor_clone(tp_run_output(r, i), &want[i]));
        tp_run_free(r);
    }
    /* a by hand */
    if (want[1]) {
        int bad = 0;
        for (int64_t i = 0; i < (int64_t)S * S; i++) {
            double v = tp_tensor_item_f64(in, i);
            if (tp_tensor_item_f64(want[1], i) != (v > 0 ? v : 0)) bad++;
        }
        CHECK_MSG(bad == 0, "reference relu output: %d wrong elements", bad);
    }
    for (int level = TP_CPU_SCALAR; level <= (int)tp_cpu_level_supported(); level++)
        for (int threads = 1; threads <= 2; threads++) {
            tp_run_options opt;
            tp_run_options_init(&opt);
            opt.cpu_level = (tp_cpu_level)level;
            opt.num_threads = threads;
            tp_run *r = NULL;
            CHECK_OK(tp_run_new(p, &opt, &r));
            if (!r) continue;
            for (int k = 0; k < 2; k++) CHECK_OK(tp_run_execute(r, &in, 1, NULL, 0));
            for (int i = 0; i < 2; i++)
                CHECK_MSG(same_tensor(tp_run_output(r, i), want[i], RTOL, ATOL), "%s, %d threads: output %d",
                          tp_cpu_level_name((tp_cpu_level)level), threads, i);
            tp_run_free(r);
        }
    free_tensors(want, 2);
out:
    tp_tensor_free(in);
    tp_program_free(p);
}

/* A constant pad whose result lives at a nonzero arena offset, while an
 * earlier value is still live at offset 0: the kept part of the input must
 * land in the pad's own block (it was once written at the start of the
 * arena, over the live value; ONNX test_attention_4d_causal_padded_kv_*). */
TEST(test_arena_pad_at_offset) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = placeholder(g, "x", 2, (int64_t[]){2, 5});
    tp_node *m = placeholder(g, "m", 2, (int64_t[]){2, 3});
    tp_node *a = call(g, TP_OP_MUL, 2, (tp_value[]){N(x), tp_value_float(2)}); /* live until o */
    tp_value pads = tp_value_none(), mode = tp_value_none();
    CHECK_OK(tp_value_int_list((int64_t[]){0, 2}, 2, &pads));
    CHECK_OK(tp_value_str("constant", &mode));
    tp_node *pd = call(g, TP_OP_PAD, 4, (tp_value[]){N(m), pads, mode, tp_value_float(-100)});
    tp_value_clear(&pads);
    tp_value_clear(&mode);
    tp_node *o = call(g, TP_OP_ADD, 2, (tp_value[]){N(a), N(pd)});
    output_nodes(g, 1, &o);
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("m"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(o)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    float xd[10], md[6], want[10];
    for (int i = 0; i < 10; i++) xd[i] = 0.5f * (float)(i + 1);
    for (int i = 0; i < 6; i++) md[i] = 10.0f * (float)(i + 1);
    /* by hand: o[i][j] = 2 x[i][j] + (j < 3 ? m[i][j] : -100) */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 5; j++) want[i * 5 + j] = 2 * xd[i * 5 + j] + (j < 3 ? md[i * 3 + j] : -100.0f);
    tp_tensor *in[2] = {tensor_f32(2, (int64_t[]){2, 5}, xd), tensor_f32(2, (int64_t[]){2, 3}, md)};
    if (!p || !in[0] || !in[1]) goto out;
    for (int level = TP_CPU_REFERENCE; level <= (int)tp_cpu_level_supported(); level++) {
        tp_run_options opt;
        tp_run_options_init(&opt);
        opt.cpu_level = (tp_cpu_level)level;
        tp_run *r = NULL;
        CHECK_OK(tp_run_new(p, &opt, &r));
        if (!r) continue;
        for (int k = 0; k < 2; k++) {
            CHECK_OK(tp_run_execute(r, in, 2, NULL, 0));
            CHECK_MSG(tensor_equals(tp_run_output(r, 0), want, 10), "%s, call %d: a + pad(m)",
                      tp_cpu_level_name((tp_cpu_level)level), k);
        }
        tp_run_stats st;
        tp_run_get_stats(r, &st);
        CHECK_MSG(st.arena_bytes > 0, "%s: the intermediates are in the arena", tp_cpu_level_name((tp_cpu_level)level));
        tp_run_free(r);
    }
    {
        tp_value args[2] = {tv(tp_tensor_retain(in[0])), tv(tp_tensor_retain(in[1]))}, res = tp_value_none();
        CHECK_OK(tp_program_call(p, args, 2, NULL, &res));
        const tp_value *y = res.kind == TP_VAL_TENSOR ? &res : tp_value_len(&res) == 1 ? tp_value_at(&res, 0) : NULL;
        CHECK_MSG(y && y->kind == TP_VAL_TENSOR && tensor_equals(y->u.tensor, want, 10), "tp_program_call: a + pad(m)");
        tp_value_clear(&res);
        for (int i = 0; i < 2; i++) tp_value_clear(&args[i]);
    }
out:
    free_tensors(in, 2);
    tp_program_free(p);
}

/* ---- fusion must not change results ------------------------------------- */

/* Outputs of p for x at every level from scalar, 1 and 2 threads, against
 * the reference level, within rtol 1e-5 and atol GEMM_ATOL: these outputs
 * are raw GEMM results (dot products of 48-128 float32 terms near zero after
 * cancellation: blocked accumulation differs by up to ~2e-6 absolute). */
#define GEMM_ATOL 1e-5
static void check_against_reference(tp_program *p, tp_tensor *x, int n_out, const char *what) {
    tp_tensor *ref[4] = {NULL, NULL, NULL, NULL};
    tp_run_options opt;
    tp_run_options_init(&opt);
    opt.cpu_level = TP_CPU_REFERENCE;
    tp_run *r = NULL;
    CHECK_OK(tp_run_new(p, &opt, &r));
    if (r && tp_run_execute(r, &x, 1, NULL, 0) == TP_OK) {
        CHECK(tp_run_num_outputs(r) == n_out);
        for (int i = 0; i < n_out; i++) CHECK_OK(tp_tensor_clone(tp_run_output(r, i), &ref[i]));
    } else {
        CHECK_MSG(false, "%s: reference run failed: %s", what, tp_last_error());
        tp_run_free(r);
        return;
    }
    tp_run_free(r);
    for (int level = TP_CPU_SCALAR; level <= (int)tp_cpu_level_supported(); level++)
        for (int threads = 2; threads >= 1; threads--) {
            tp_run_options_init(&opt);
            opt.cpu_level = (tp_cpu_level)level;
            opt.num_threads = threads;
            r = NULL;
            CHECK_OK(tp_run_new(p, &opt, &r));
            if (!r) continue;
            for (int k = 0; k < 2; k++) CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0));
            for (int i = 0; i < n_out; i++)
                CHECK_MSG(same_tensor(tp_run_output(r, i), ref[i], RTOL, GEMM_ATOL), "%s [%s, %d threads]: output %d", what,
                          tp_cpu_level_name((tp_cpu_level)level), threads, i);
            tp_run_free(r);
        }
    free_tensors(ref, n_out);
}

/* A program of user input x [B, K] and parameter W [N, K], b [N], built by
 * fn; outputs are listed by fn. */
typedef int (*fusion_graph_fn)(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node **outs);

/* want_steps / want_fused: the plan's step count and fused-step count at
 * the best CPU level (-1: not checked), so a fusion that silently stops
 * happening fails the test. */
static void check_fusion_case(const char *what, int64_t B, int64_t K, int64_t N, fusion_graph_fn fn, int want_steps,
                              int want_fused) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *w = placeholder(g, "p_w", 2, (int64_t[]){N, K});
    tp_node *b = placeholder(g, "p_b", 1, (int64_t[]){N});
    tp_node *x = placeholder(g, "x", 2, (int64_t[]){B, K});
    tp_node *outs[4];
    int n_out = fn(g, x, w, b, outs);
    output_nodes(g, n_out, outs);
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_w"), "w", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_b"), "b", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    for (int i = 0; i < n_out; i++)
        CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(outs[i])), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    if (p) {
        set_param(p, "w", 2, (int64_t[]){N, K}, 71, 0.5f);
        set_param(p, "b", 1, (int64_t[]){N}, 72, 0.5f);
        tp_tensor *x0 = rand_tensor(2, (int64_t[]){B, K}, 73, 4.0f);
        if (x0) check_against_reference(p, x0, n_out, what);
        tp_run *r = NULL;
        CHECK_OK(tp_run_new(p, NULL, &r));
        if (r && x0 && tp_run_execute(r, &x0, 1, NULL, 0) == TP_OK) {
            tp_run_stats st;
            tp_run_get_stats(r, &st);
            if (getenv("TP_TEST_SHOW_STEPS")) printf("  %s: %d steps, %d fused\n", what, (int)st.n_steps, (int)st.n_fused);
            CHECK_MSG((want_steps < 0 || st.n_steps == want_steps) && (want_fused < 0 || st.n_fused == want_fused),
                      "%s: %d steps, %d fused; expected %d, %d", what, (int)st.n_steps, (int)st.n_fused, want_steps,
                      want_fused);
        }
        tp_run_free(r);
        tp_tensor_free(x0);
    }
    tp_program_free(p);
}

/* the GEMM's result is also a user output */
static int fg_lin_out_and_relu(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node **o) {
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    o[0] = call(g, TP_OP_RELU, 1, (tp_value[]){N(l)});
    o[1] = l;
    return 2;
}
/* the GEMM's result has a second consumer */
static int fg_lin_two_users(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node **o) {
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *r = call(g, TP_OP_SIGMOID, 1, (tp_value[]){N(l)});
    tp_node *t = call(g, TP_OP_TANH, 1, (tp_value[]){N(l)});
    o[0] = call(g, TP_OP_MUL, 2, (tp_value[]){N(r), N(t)});
    return 1;
}
/* residual first or second, the residual is the GEMM's own input, and l + l */
static int fg_residuals(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node **o) {
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    o[0] = call(g, TP_OP_ADD, 2, (tp_value[]){N(x), N(l)});
    tp_node *l2 = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    o[1] = call(g, TP_OP_ADD, 2, (tp_value[]){N(l2), N(l2)});
    tp_node *l3 = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *a3 = call(g, TP_OP_ADD, 2, (tp_value[]){N(l3), N(x)});
    o[2] = call(g, TP_OP_RELU, 1, (tp_value[]){N(a3)});
    return 3;
}
/* ONNX's Linear: matmul(x, W^T) then add(bias, .) with the bias first, a residual, an activation,
 * and a bias that is not a row (a column [B, 1]) */
static int fg_onnx_linear(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node **o) {
    tp_node *wt = call(g, TP_OP_TRANSPOSE, 3, (tp_value[]){N(w), tp_value_int(0), tp_value_int(1)});
    tp_node *m = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(x), N(wt)});
    tp_node *a = call(g, TP_OP_ADD, 2, (tp_value[]){N(b), N(m)});
    tp_node *r = call(g, TP_OP_ADD, 2, (tp_value[]){N(x), N(a)});
    o[0] = call(g, TP_OP_SILU, 1, (tp_value[]){N(r)});
    tp_node *m2 = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(x), N(wt)});
    tp_node *col = call(g, TP_OP_SLICE, 4, (tp_value[]){N(x), tp_value_int(1), tp_value_int(0), tp_value_int(1)});
    o[1] = call(g, TP_OP_ADD, 2, (tp_value[]){N(col), N(m2)});
    return 2;
}
/* a broadcasting add (not a residual of the same shape), alpha, sub */
static int fg_broadcast_add(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node **o) {
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    o[0] = call(g, TP_OP_ADD, 2, (tp_value[]){N(l), N(b)});
    tp_node *l2 = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *s = call(g, TP_OP_SUB, 2, (tp_value[]){N(x), N(l2)});
    o[1] = call(g, TP_OP_GELU, 1, (tp_value[]){N(s)});
    tp_node *l3 = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_value args, kw, alpha = tp_value_float(-2.0);
    CHECK_OK(tp_value_tuple(2, &args));
    args.u.seq.items[0] = N(l3);
    args.u.seq.items[1] = N(x);
    CHECK_OK(tp_value_dict(&kw));
    CHECK_OK(tp_value_dict_set(&kw, "alpha", &alpha));
    o[2] = NULL;
    CHECK_OK(tp_graph_call_function(g, TP_OP_ADD, &args, &kw, &o[2]));
    tp_value_clear(&args);
    tp_value_clear(&kw);
    return 3;
}
/* an activation on a view of the GEMM's result */
static int fg_view_between(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node **o) {
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *t = call(g, TP_OP_TRANSPOSE, 3, (tp_value[]){N(l), tp_value_int(0), tp_value_int(1)});
    o[0] = call(g, TP_OP_RELU, 1, (tp_value[]){N(t)});
    o[1] = call(g, TP_OP_TANH, 1, (tp_value[]){N(l)});
    return 2;
}

/* mul(l, sigmoid(l)) and mul(sigmoid(l), l) become silu(l), fused into the GEMM */
static int fg_silu(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node **o) {
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *sg = call(g, TP_OP_SIGMOID, 1, (tp_value[]){N(l)});
    o[0] = call(g, TP_OP_MUL, 2, (tp_value[]){N(l), N(sg)});
    tp_node *l2 = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *sg2 = call(g, TP_OP_SIGMOID, 1, (tp_value[]){N(l2)});
    o[1] = call(g, TP_OP_MUL, 2, (tp_value[]){N(sg2), N(l2)});
    return 2;
}
/* not SiLU: the sigmoid is used twice, or multiplies something else */
static int fg_not_silu(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node **o) {
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *sg = call(g, TP_OP_SIGMOID, 1, (tp_value[]){N(l)});
    o[0] = call(g, TP_OP_MUL, 2, (tp_value[]){N(l), N(sg)});
    o[1] = sg;
    tp_node *sg2 = call(g, TP_OP_SIGMOID, 1, (tp_value[]){N(x)});
    o[2] = call(g, TP_OP_MUL, 2, (tp_value[]){N(l), N(sg2)});
    return 3;
}

/* Expected counts (steps include fused ones): GEMM also an output: linear +
 * relu, nothing fused; two users: 4 unfused; residuals: 3 linears + 4
 * elementwise, l + x, l3 + x and its relu fused (l2 + l2 is not a
 * residual); broadcast: only the row bias fuses; ONNX linear: the bias,
 * the residual after it and the silu after that all fuse into the GEMM's
 * epilogue (which adds bias, then residual, then applies the activation),
 * the column bias does not; SiLU:
 * both mul(l, sigmoid(l)) forms become one fused silu each; not SiLU:
 * nothing changes; GELU: both decomposed chains become one fused gelu each
 * (2 linears + 2 fused gelus); not GELU: all 12 nodes stay steps (the
 * elementwise chains fuse among themselves). */
/* GELU as ONNX decomposes it, erf form (x / sqrt2, then 0.5 last) and tanh
 * form (pow(x, 3), (0.5 * x) first): each becomes one gelu, fused into the GEMM */
static int fg_gelu(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node **o) {
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *d = call(g, TP_OP_DIV, 2, (tp_value[]){N(l), tp_value_float(1.4142135623730951)});
    tp_node *e = call(g, TP_OP_ERF, 1, (tp_value[]){N(d)});
    tp_node *a = call(g, TP_OP_ADD, 2, (tp_value[]){N(e), tp_value_float(1.0)});
    tp_node *m = call(g, TP_OP_MUL, 2, (tp_value[]){N(l), N(a)});
    o[0] = call(g, TP_OP_MUL, 2, (tp_value[]){N(m), tp_value_float(0.5)});
    tp_node *l2 = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *c = call(g, TP_OP_POW, 2, (tp_value[]){N(l2), tp_value_float(3.0)});
    tp_node *q = call(g, TP_OP_MUL, 2, (tp_value[]){N(c), tp_value_float(0.044715)});
    tp_node *t1 = call(g, TP_OP_ADD, 2, (tp_value[]){N(l2), N(q)});
    tp_node *t = call(g, TP_OP_MUL, 2, (tp_value[]){N(t1), tp_value_float(0.7978845608028654)});
    tp_node *th = call(g, TP_OP_TANH, 1, (tp_value[]){N(t)});
    tp_node *a2 = call(g, TP_OP_ADD, 2, (tp_value[]){N(th), tp_value_float(1.0)});
    tp_node *h = call(g, TP_OP_MUL, 2, (tp_value[]){N(l2), tp_value_float(0.5)});
    o[1] = call(g, TP_OP_MUL, 2, (tp_value[]){N(h), N(a2)});
    return 2;
}
/* not GELU: a factor of 0.6, and an intermediate that is also an output */
static int fg_not_gelu(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node **o) {
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *d = call(g, TP_OP_DIV, 2, (tp_value[]){N(l), tp_value_float(1.4142135623730951)});
    tp_node *e = call(g, TP_OP_ERF, 1, (tp_value[]){N(d)});
    tp_node *a = call(g, TP_OP_ADD, 2, (tp_value[]){N(e), tp_value_float(1.0)});
    tp_node *m = call(g, TP_OP_MUL, 2, (tp_value[]){N(l), N(a)});
    o[0] = call(g, TP_OP_MUL, 2, (tp_value[]){N(m), tp_value_float(0.6)});
    tp_node *l2 = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *d2 = call(g, TP_OP_DIV, 2, (tp_value[]){N(l2), tp_value_float(1.4142135623730951)});
    tp_node *e2 = call(g, TP_OP_ERF, 1, (tp_value[]){N(d2)});
    tp_node *a2 = call(g, TP_OP_ADD, 2, (tp_value[]){N(e2), tp_value_float(1.0)});
    tp_node *m2 = call(g, TP_OP_MUL, 2, (tp_value[]){N(l2), N(a2)});
    o[1] = call(g, TP_OP_MUL, 2, (tp_value[]){N(m2), tp_value_float(0.5)});
    o[2] = e2;
    return 3;
}

TEST(test_fusion_keeps_results) {
    /* square (residuals need N == K) and large enough to run the GEMM on 2 threads */
    check_fusion_case("GEMM result also an output", 64, 48, 48, fg_lin_out_and_relu, 2, 0);
    check_fusion_case("GEMM result with two users", 64, 48, 48, fg_lin_two_users, 4, 0);
    check_fusion_case("residual adds", 64, 48, 48, fg_residuals, 7, 3);
    check_fusion_case("broadcast add, sub, alpha", 64, 48, 48, fg_broadcast_add, 7, 1);
    check_fusion_case("ONNX linear: bias first, residual, silu; column bias", 64, 48, 48, fg_onnx_linear, 7, 3);
    check_fusion_case("view between GEMM and activation", 64, 48, 48, fg_view_between, 4, 0);
    check_fusion_case("residual adds, larger", 256, 128, 128, fg_residuals, 7, 3);
    check_fusion_case("x * sigmoid(x) as silu", 64, 48, 48, fg_silu, 4, 2);
    check_fusion_case("not silu", 64, 48, 48, fg_not_silu, 5, 0);
    check_fusion_case("decomposed gelu (erf, tanh) as gelu", 64, 48, 48, fg_gelu, 4, 2);
    check_fusion_case("not gelu", 64, 48, 48, fg_not_gelu, 12, 5);
}

static tp_node *placeholder_dt(tp_graph *g, const char *name, tp_dtype dt, int ndim, const int64_t *sizes) {
    tp_tensor *m = NULL;
    CHECK_OK(tp_tensor_meta(dt, ndim, sizes, &m));
    tp_value v = tp_value_tensor(m);
    tp_node *n = NULL;
    CHECK_OK(tp_graph_placeholder(g, name, &v, &n));
    tp_value_clear(&v);
    return n;
}

static tp_value int_list(int n, const int64_t *v) {
    tp_value l = tp_value_none();
    CHECK_OK(tp_value_int_list(v, n, &l));
    return l;
}

/* Allocation-failure sweeps (fail_alloc.h) over planning and running a
 * copy of p (a program keeps the plans it built) on x at level, 2 threads. */
typedef struct alloc_sweep {
    tp_program *p;
    tp_tensor *x[4];
    int n_x;
    tp_cpu_level level;
} alloc_sweep;

static tp_status sweep_plan_and_run(void *ctx) {
    const alloc_sweep *h = ctx;
    tp_program *p = NULL;
    tp_status st = tp_program_copy(h->p, &p);
    tp_run_options opt;
    tp_run_options_init(&opt);
    opt.num_threads = 2;
    opt.cpu_level = h->level;
    tp_run *r = NULL;
    if (st == TP_OK) st = tp_run_new(p, &opt, &r);
    if (st == TP_OK) st = tp_run_execute(r, (tp_tensor **)h->x, h->n_x, NULL, 0);
    tp_run_free(r);
    tp_program_free(p);
    return st;
}

/* Row selections moved before the row-wise ops feeding them
 * (plan_rewrite.c, tp__rewrite_row_select). A program of x [6, 8], W [8, 8],
 * b [8] and a constant index [2, 0] (int64), built by fn; each case runs
 * against the reference kernels at every CPU level on 1 and 2 threads, and
 * the rewrite of a copy of its graph must make exactly want_moves moves
 * (0 where a selection must stay: along softmax's dim or a product's
 * columns, an input with another user, a reshape that merges the
 * selected dim). Where moves happen, an allocation-failure sweep over
 * planning and running: every failure, in the rewrite too (its undone
 * moves included), gives TP_ERR_NOMEM and leaks nothing. */
typedef int (*rows_graph_fn)(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node *idx, tp_node **outs);

/* A case whose runs must all fail with this status, as the reference
 * level's does (TP_OK: runs compared with the reference's outputs). */
static tp_status rows_want_status = TP_OK;
/* run_rows: the rows of the x the runs get (the graph's x has B). */
static void check_rows_case_run(const char *what, rows_graph_fn fn, int want_moves, int64_t run_rows) {
    enum { B = 6, K = 8 };
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *w = placeholder(g, "p_w", 2, (int64_t[]){K, K});
    tp_node *b = placeholder(g, "p_b", 1, (int64_t[]){K});
    tp_node *idx = placeholder_dt(g, "c_idx", TP_INT64, 1, (int64_t[]){2});
    tp_node *x = placeholder(g, "x", 2, (int64_t[]){B, K});
    tp_node *outs[4];
    const int n_out = fn(g, x, w, b, idx, outs);
    output_nodes(g, n_out, outs);
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_w"), "w", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_b"), "b", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_CONSTANT_TENSOR, tp_arg_tensor("c_idx"), "idx", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    for (int i = 0; i < n_out; i++)
        CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(outs[i])), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    if (!p) return;
    set_param(p, "w", 2, (int64_t[]){K, K}, 81, 0.5f);
    set_param(p, "b", 1, (int64_t[]){K}, 82, 0.5f);
    tp_tensor *ti = NULL;
    CHECK_OK(tp_tensor_from_data(TP_INT64, 1, (int64_t[]){2}, (int64_t[]){2, 0}, &ti));
    if (ti) CHECK_OK(tp_program_set_state(p, "idx", TP_STATE_CONSTANT, ti, true));
    tp_tensor_free(ti);
    tp_tensor *x0 = rand_tensor(2, (int64_t[]){run_rows, K}, 83, 2.0f);
    if (x0 && rows_want_status != TP_OK) {
        /* every level fails as the reference does */
        for (int level = TP_CPU_REFERENCE; level <= (int)tp_cpu_level_supported(); level++) {
            tp_run_options opt;
            tp_run_options_init(&opt);
            opt.cpu_level = (tp_cpu_level)level;
            tp_run *r = NULL;
            tp_status st = tp_run_new(p, &opt, &r);
            if (st == TP_OK) st = tp_run_execute(r, &x0, 1, NULL, 0);
            CHECK_MSG(st == rows_want_status, "%s [%s]: status %d, expected %d", what,
                      tp_cpu_level_name((tp_cpu_level)level), (int)st, (int)rows_want_status);
            tp_clear_error();
            tp_run_free(r);
        }
    } else if (x0) {
        check_against_reference(p, x0, n_out, what);
    }
    if (x0 && want_moves > 0 && rows_want_status == TP_OK) {
        alloc_sweep h = {.p = p, .x = {x0}, .n_x = 1, .level = TP_CPU_AUTO};
        CHECK(check_alloc_failures(what, sweep_plan_and_run, &h) > 0);
    }
    tp_tensor_free(x0);
    tp_graph *copy = NULL;
    int moves = -1;
    CHECK_OK(tp_graph_copy(tp_program_graph(p), &copy));
    if (copy) CHECK_OK(tp__rewrite_row_select(p, copy, &moves));
    CHECK_MSG(moves == want_moves, "%s: %d moves, expected %d", what, moves, want_moves);
    if (copy) CHECK_OK(tp_graph_lint(copy));
    tp_graph_free(copy);
    tp_program_free(p);
}

static void check_rows_case(const char *what, rows_graph_fn fn, int want_moves) {
    check_rows_case_run(what, fn, want_moves, 6);
}

/* select(layer_norm(x + gelu(linear(x))), 0, 4): layer_norm, add, gelu, linear */
static int rg_block_row(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node *idx, tp_node **o) {
    (void)idx;
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *ge = call(g, TP_OP_GELU, 1, (tp_value[]){N(l)});
    tp_node *a = call(g, TP_OP_ADD, 2, (tp_value[]){N(x), N(ge)});
    tp_value shape = int_list(1, (int64_t[]){8});
    tp_node *ln = call(g, TP_OP_LAYER_NORM, 5, (tp_value[]){N(a), shape, N(b), N(b), tp_value_float(1e-5)});
    tp_value_clear(&shape);
    o[0] = call(g, TP_OP_SELECT, 3, (tp_value[]){N(ln), tp_value_int(0), tp_value_int(4)});
    return 1;
}
/* index_select(softmax(linear(x) * b, 1) / 2 + slice(x, 0, 0, 1), 0, idx): the
 * broadcast row [1, 8] and the bias [8] stay whole; add, div, softmax, mul, linear */
static int rg_index_rows(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node *idx, tp_node **o) {
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *m = call(g, TP_OP_MUL, 2, (tp_value[]){N(l), N(b)});
    tp_node *sm = call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(m), tp_value_int(1)});
    tp_node *d = call(g, TP_OP_DIV, 2, (tp_value[]){N(sm), tp_value_float(2.0)});
    tp_node *row = call(g, TP_OP_SLICE, 4, (tp_value[]){N(x), tp_value_int(0), tp_value_int(0), tp_value_int(1)});
    tp_node *a = call(g, TP_OP_ADD, 2, (tp_value[]){N(d), N(row)});
    o[0] = call(g, TP_OP_INDEX_SELECT, 3, (tp_value[]){N(a), tp_value_int(0), N(idx)});
    return 1;
}
/* attention over [2, 3, 8] tokens, token 1 of permute(softmax(q k^T) v, [1, 0, 2]):
 * permute, matmul (P V rows), softmax, matmul (Q K^T rows); q = t has other users */
static int rg_attention_token(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node *idx, tp_node **o) {
    (void)idx;
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_value shape = int_list(3, (int64_t[]){2, 3, 8});
    tp_node *t = call(g, TP_OP_RESHAPE, 2, (tp_value[]){N(l), shape});
    tp_value_clear(&shape);
    tp_node *kt = call(g, TP_OP_TRANSPOSE, 3, (tp_value[]){N(t), tp_value_int(1), tp_value_int(2)});
    tp_node *sc = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(t), N(kt)});
    tp_node *pr = call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(sc), tp_value_int(-1)});
    tp_node *av = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(pr), N(t)});
    tp_value perm = int_list(3, (int64_t[]){1, 0, 2});
    tp_node *pm = call(g, TP_OP_PERMUTE, 2, (tp_value[]){N(av), perm});
    tp_value_clear(&perm);
    o[0] = call(g, TP_OP_SELECT, 3, (tp_value[]){N(pm), tp_value_int(0), tp_value_int(-2)});
    return 1;
}
/* a batch of matmul(t, t^T) over [2, 3, 8]: slice(., 0, 1, 2) takes both
 * operands' batch (matmul, transpose; reshape [6, 8] -> [2, 3, 8] changes dim 0: stays) */
static int rg_batch(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node *idx, tp_node **o) {
    (void)idx;
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_value shape = int_list(3, (int64_t[]){2, 3, 8});
    tp_node *t = call(g, TP_OP_RESHAPE, 2, (tp_value[]){N(l), shape});
    tp_value_clear(&shape);
    tp_node *tt = call(g, TP_OP_TRANSPOSE, 3, (tp_value[]){N(t), tp_value_int(1), tp_value_int(2)});
    tp_node *mm = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(t), N(tt)});
    o[0] = call(g, TP_OP_SLICE, 4, (tp_value[]){N(mm), tp_value_int(0), tp_value_int(1), tp_value_int(2)});
    return 1;
}
/* reshape [6, 8] -> [6, 2, 4] keeps dim 0: select(., 0, 3) takes reshape, linear */
static int rg_reshape_keeps(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node *idx, tp_node **o) {
    (void)idx;
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_value shape = int_list(3, (int64_t[]){6, 2, -1});
    tp_node *r = call(g, TP_OP_RESHAPE, 2, (tp_value[]){N(l), shape});
    tp_value_clear(&shape);
    o[0] = call(g, TP_OP_SELECT, 3, (tp_value[]){N(r), tp_value_int(0), tp_value_int(3)});
    return 1;
}
/* selections that stay: along softmax's dim, along the product's columns,
 * of a value with another user, through a reshape merging dim 0 */
static int rg_stays(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node *idx, tp_node **o) {
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *sm = call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(l), tp_value_int(0)});
    o[0] = call(g, TP_OP_SELECT, 3, (tp_value[]){N(sm), tp_value_int(0), tp_value_int(1)});
    tp_node *l2 = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(x), N(w)});
    o[1] = call(g, TP_OP_INDEX_SELECT, 3, (tp_value[]){N(l2), tp_value_int(1), N(idx)});
    tp_node *l3 = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *rl = call(g, TP_OP_RELU, 1, (tp_value[]){N(l3)});
    tp_node *s3 = call(g, TP_OP_SELECT, 3, (tp_value[]){N(l3), tp_value_int(0), tp_value_int(2)});
    o[2] = call(g, TP_OP_ADD, 2, (tp_value[]){N(rl), N(s3)});
    tp_value shape = int_list(2, (int64_t[]){3, 16});
    tp_node *r = call(g, TP_OP_RESHAPE, 2, (tp_value[]){N(l3), shape});
    tp_value_clear(&shape);
    o[3] = call(g, TP_OP_SELECT, 3, (tp_value[]){N(r), tp_value_int(0), tp_value_int(1)});
    return 4;
}

/* l written in place (add_) between relu(l) and the slice of relu(l): a
 * moved slice would read l after the write. Graphs with writes keep their
 * selections. */
static int rg_bug_inplace(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node *idx, tp_node **o) {
    (void)idx;
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *r = call(g, TP_OP_RELU, 1, (tp_value[]){N(l)});
    o[1] = call(g, TP_OP_ADD_, 2, (tp_value[]){N(l), tp_value_float(100.0)});
    o[0] = call(g, TP_OP_SLICE, 4, (tp_value[]){N(r), tp_value_int(0), tp_value_int(0), tp_value_int(2)});
    return 2;
}

/* contiguous(l) is l itself; a write through a slice of it reaches l, but
 * contiguous(slice(l, 1, ..)) would be a copy. */
static int rg_bug_contig_alias(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node *idx, tp_node **o) {
    (void)idx;
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *c = call(g, TP_OP_CONTIGUOUS, 1, (tp_value[]){N(l)});
    tp_node *s = call(g, TP_OP_SLICE, 4, (tp_value[]){N(c), tp_value_int(1), tp_value_int(0), tp_value_int(2)});
    o[0] = call(g, TP_OP_MUL_, 2, (tp_value[]){N(s), tp_value_float(0.0)});
    o[1] = call(g, TP_OP_RELU, 1, (tp_value[]){N(l)});
    return 2;
}

/* select(linear(x), 0, -1): the last row of the x the call gets. A move
 * makes a slice at the recorded last row, so plans for other sizes (a
 * program without examples or dim rules takes them) do not move. */
static int rg_bug_last_row(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node *idx, tp_node **o) {
    (void)idx;
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    o[0] = call(g, TP_OP_SELECT, 3, (tp_value[]){N(l), tp_value_int(0), tp_value_int(-1)});
    return 1;
}

/* A view of a transposed value merging its non-contiguous dims fails at
 * run time (PyTorch: "use reshape instead"); index_select before it would
 * make a contiguous copy the view then takes: selections do not move
 * through views. The view of relu's input (o[1] keeps the transpose alive). */
static tp_node *failing_view(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node **o) {
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_value shape = int_list(3, (int64_t[]){6, 2, 4});
    tp_node *r = call(g, TP_OP_RESHAPE, 2, (tp_value[]){N(l), shape});
    tp_value_clear(&shape);
    tp_node *t = call(g, TP_OP_TRANSPOSE, 3, (tp_value[]){N(r), tp_value_int(1), tp_value_int(2)});
    o[1] = call(g, TP_OP_RELU, 1, (tp_value[]){N(t)});
    shape = int_list(2, (int64_t[]){6, 8});
    tp_node *v = call(g, TP_OP_VIEW, 2, (tp_value[]){N(t), shape});
    tp_value_clear(&shape);
    return v;
}
static int rg_bug_view_error(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node *idx, tp_node **o) {
    tp_node *v = failing_view(g, x, w, b, o);
    o[0] = call(g, TP_OP_INDEX_SELECT, 3, (tp_value[]){N(v), tp_value_int(0), N(idx)});
    return 2;
}
/* The same with an empty slice (a view of no elements always works). */
static int rg_bug_view_error_empty(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node *idx, tp_node **o) {
    (void)idx;
    tp_node *v = failing_view(g, x, w, b, o);
    o[0] = call(g, TP_OP_SLICE, 4, (tp_value[]){N(v), tp_value_int(0), tp_value_int(3), tp_value_int(3)});
    return 2;
}

/* Slices with a step and a negative start, negative dims, a lower-rank
 * broadcast operand, select through transpose, matmul's batch broadcast. */
static int rg_ok_misc(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node *idx, tp_node **o) {
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *m = call(g, TP_OP_MUL, 2, (tp_value[]){N(l), N(b)});
    o[0] = call(g, TP_OP_SLICE, 5, (tp_value[]){N(m), tp_value_int(-2), tp_value_int(-5), tp_value_int(100), tp_value_int(2)});
    tp_node *l2 = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *t2 = call(g, TP_OP_TRANSPOSE, 3, (tp_value[]){N(l2), tp_value_int(-1), tp_value_int(0)});
    tp_node *e2 = call(g, TP_OP_EXP, 1, (tp_value[]){N(t2)});
    o[1] = call(g, TP_OP_SELECT, 3, (tp_value[]){N(e2), tp_value_int(-1), tp_value_int(-3)});
    tp_value shape = int_list(3, (int64_t[]){2, 3, 8});
    tp_node *l3 = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *r3 = call(g, TP_OP_RESHAPE, 2, (tp_value[]){N(l3), shape});
    tp_value_clear(&shape);
    tp_node *mm = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(r3), N(w)});
    tp_node *sm = call(g, TP_OP_LOG_SOFTMAX, 2, (tp_value[]){N(mm), tp_value_int(-1)});
    o[2] = call(g, TP_OP_INDEX_SELECT, 3, (tp_value[]){N(sm), tp_value_int(-2), N(idx)});
    tp_node *l4 = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *n4 = call(g, TP_OP_NEG, 1, (tp_value[]){N(l4)});
    o[3] = call(g, TP_OP_SLICE, 4, (tp_value[]){N(n4), tp_value_int(0), tp_value_int(4), tp_value_int(2)});
    return 4;
}
/* An out-of-range index (8 in a dim of 6) fails as the reference does. */
static int rg_ok_bad_index(tp_graph *g, tp_node *x, tp_node *w, tp_node *b, tp_node *idx, tp_node **o) {
    tp_node *ii = call(g, TP_OP_MUL, 2, (tp_value[]){N(idx), tp_value_int(4)}); /* [8, 0] */
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    tp_node *sg = call(g, TP_OP_SIGMOID, 1, (tp_value[]){N(l)});
    o[0] = call(g, TP_OP_INDEX_SELECT, 3, (tp_value[]){N(sg), tp_value_int(0), N(ii)});
    return 1;
}

/* Cases from a review of the rewrite: writes in place, aliases, views
 * that fail, indices that fail, and a call on other sizes than the graph
 * recorded (each failed on the rewrite before its guard). */
TEST(test_row_selections_guards) {
    check_rows_case("an in-place write between producer and selection: no move", rg_bug_inplace, 0);
    check_rows_case("a write through a slice of contiguous(l): no move", rg_bug_contig_alias, 0);
    check_rows_case("step and negative slices, negative dims, broadcasts", rg_ok_misc, 9);
    rows_want_status = TP_ERR_INDEX;
    check_rows_case("an index out of range", rg_ok_bad_index, 2);
    rows_want_status = TP_ERR_SHAPE;
    check_rows_case("index_select of a view that fails: no move", rg_bug_view_error, 0);
    check_rows_case("an empty slice of a view that fails: no move", rg_bug_view_error_empty, 0);
    rows_want_status = TP_OK;
    check_rows_case_run("select(., 0, -1) on a 9-row x (the graph's: 6)", rg_bug_last_row, 1, 9);
}

TEST(test_row_selections) {
    check_rows_case("a block's one row: layer_norm, residual, gelu, linear", rg_block_row, 4);
    check_rows_case("index_select through broadcasts, softmax over the other dim", rg_index_rows, 5);
    check_rows_case("attention's one token through permute, P V, softmax, Q K^T", rg_attention_token, 4);
    check_rows_case("a batch of matmul: both operands", rg_batch, 2);
    check_rows_case("reshape keeping the selected dim", rg_reshape_keeps, 2);
    check_rows_case("selections that stay", rg_stays, 0);
}

/* ---- 6. plans are invalidated by program changes ------------------------ */

static tp_tensor *mlp_expected(tp_program *p, tp_tensor *x) {
    /* relu(linear(x, W, b)) eagerly from the program's current state */
    tp_tensor *w = NULL, *b = NULL;
    CHECK_OK(tp_program_get_state(p, "fc1.weight", &w, NULL, NULL));
    CHECK_OK(tp_program_get_state(p, "fc1.bias", &b, NULL, NULL));
    if (!w || !b) return NULL;
    tp_value args[3] = {tv(tp_tensor_retain(x)), tv(tp_tensor_retain(w)), tv(tp_tensor_retain(b))};
    tp_value lin = tp_value_none(), out = tp_value_none();
    CHECK_OK(tp_op_call(TP_OP_LINEAR, args, 3, NULL, &lin));
    if (lin.kind == TP_VAL_TENSOR) CHECK_OK(tp_op_call(TP_OP_RELU, &lin, 1, NULL, &out));
    for (int i = 0; i < 3; i++) tp_value_clear(&args[i]);
    tp_value_clear(&lin);
    tp_tensor *t = out.kind == TP_VAL_TENSOR ? tp_tensor_retain(out.u.tensor) : NULL;
    tp_value_clear(&out);
    return t;
}

TEST(test_plans_invalidated) {
    tp_program *p = make_mlp();
    tp_tensor *x = tensor_f32(2, (int64_t[]){2, 3}, (float[]){1, -2, 3, 4, 5, 6});
    tp_run *r = NULL;
    if (p) CHECK_OK(tp_run_new(p, NULL, &r));
    if (!r || !x) goto out;
    tp_tensor *o = NULL;
    CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0));
    CHECK(tensor_equals(tp_run_output(r, 0), (float[]){1, 0, 3, 0, 4, 5, 6, 5}, 8));
    CHECK_OK(program_outputs(p, x, &o, 1)); /* the pooled run context holds the plan too */
    tp_tensor_free(o);
    /* replace the weight: 2 * W */
    static const float w2[] = {2, 0, 0, 0, 2, 0, 0, 0, 2, 2, 2, 2};
    tp_tensor *w = tensor_f32(2, (int64_t[]){4, 3}, w2);
    CHECK_OK(tp_program_set_state(p, "fc1.weight", TP_STATE_PARAMETER, w, true));
    tp_tensor_free(w);
    static const float want2[] = {2, 0, 6, 0, 8, 10, 12, 20}; /* relu(2 x W^T + [0 0 0 -10]) */
    CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0));
    CHECK_MSG(tensor_equals(tp_run_output(r, 0), want2, 8), "tp_run_execute used the old weight");
    tp_run_stats st;
    tp_run_get_stats(r, &st);
    CHECK(st.plans_built == 2);
    CHECK_OK(program_outputs(p, x, &o, 1));
    CHECK_MSG(tensor_equals(o, want2, 8), "tp_program_call used the old weight");
    tp_tensor_free(o);
    /* the bias too, through tp_run_call */
    tp_tensor *b = tensor_f32(1, (int64_t[]){4}, (float[]){1, 1, 1, 1});
    CHECK_OK(tp_program_set_state(p, "fc1.bias", TP_STATE_PARAMETER, b, true));
    tp_tensor_free(b);
    {
        tp_value in = tv(tp_tensor_retain(x)), out = tp_value_none();
        CHECK_OK(tp_run_call(r, &in, 1, NULL, &out));
        CHECK_MSG(out.kind == TP_VAL_TENSOR && tensor_equals(out.u.tensor, (float[]){3, 0, 7, 5, 9, 11, 13, 31}, 8),
                  "tp_run_call used the old bias");
        tp_value_clear(&out);
        tp_value_clear(&in);
    }
    /* writing into the weight in place needs tp_program_invalidate_plans (packed copies) */
    CHECK_OK(tp_program_get_state(p, "fc1.weight", &w, NULL, NULL));
    if (w) {
        float *wd = tp_tensor_data(w);
        for (int i = 0; i < 12; i++) wd[i] = -wd[i] + (float)i;
        tp_program_invalidate_plans(p);
        tp_tensor *want = mlp_expected(p, x);
        CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0));
        CHECK_MSG(same_tensor(tp_run_output(r, 0), want, RTOL, ATOL), "tp_run_execute after an in-place write");
        CHECK_OK(program_outputs(p, x, &o, 1));
        CHECK_MSG(same_tensor(o, want, RTOL, ATOL), "tp_program_call after an in-place write");
        tp_tensor_free(o);
        tp_tensor_free(want);
    }
out:
    tp_run_free(r);
    tp_tensor_free(x);
    tp_program_free(p);
}

/* ---- 7. error paths ------------------------------------------------------- */

/* The status and message tp_program_call gives for one input. */
static tp_status call_error(tp_program *p, tp_tensor *x, char *msg, size_t size) {
    tp_value in = tv(tp_tensor_retain(x)), out = tp_value_none();
    tp_status st = tp_program_call(p, &in, 1, NULL, &out);
    snprintf(msg, size, "%s", tp_last_error());
    tp_value_clear(&out);
    tp_value_clear(&in);
    return st;
}

static void check_input_errors(tp_program *p, tp_run *r, const char *when) {
    char msg[512];
    struct {
        const char *what;
        tp_dtype dtype;
        int ndim;
        int64_t sizes[3];
        tp_status want;
        const char *text;
    } bad[] = {
        {"dtype", TP_FLOAT64, 2, {4, 16}, TP_ERR_TYPE, "x has dtype float64 but the program expects float32"},
        {"int dtype", TP_INT64, 2, {4, 16}, TP_ERR_TYPE, "x has dtype int64 but the program expects float32"},
        {"static dim", TP_FLOAT32, 2, {4, 15}, TP_ERR_CONSTRAINT, "x.shape[1] = 15 must equal 16 (static dim)"},
        {"rank", TP_FLOAT32, 3, {4, 16, 1}, TP_ERR_CONSTRAINT, "x has rank 3 but the program expects rank 2"},
        {"range", TP_FLOAT32, 2, {5000, 16}, TP_ERR_CONSTRAINT, "x.shape[0] = 5000 violates batch <= 4096"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tp_tensor *t = NULL;
        CHECK_OK(tp_tensor_zeros(bad[i].dtype, bad[i].ndim, bad[i].sizes, &t));
        if (!t) continue;
        tp_status want = call_error(p, t, msg, sizeof msg);
        CHECK_MSG(want == bad[i].want && strstr(msg, bad[i].text), "%s: tp_program_call gave %s (%s)", bad[i].what,
                  tp_status_str(want), msg);
        tp_status got = tp_run_execute(r, &t, 1, NULL, 0);
        CHECK_MSG(got == want, "%s (%s): tp_run_execute gave %s, tp_program_call %s", bad[i].what, when,
                  tp_status_str(got), tp_status_str(want));
        CHECK_MSG(strstr(tp_last_error(), msg) != NULL, "%s (%s): message \"%s\", tp_program_call's \"%s\"", bad[i].what,
                  when, tp_last_error(), msg);
        tp_tensor_free(t);
    }
    /* wrong number of inputs, NULL input */
    tp_tensor *x = NULL;
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){4, 16}, &x));
    tp_tensor *two[2] = {x, x}, *none[1] = {NULL};
    CHECK_STATUS(tp_run_execute(r, two, 2, NULL, 0), TP_ERR_INVALID_ARG);
    {
        tp_value in[2] = {tv(tp_tensor_retain(x)), tv(tp_tensor_retain(x))}, out = tp_value_none();
        CHECK_STATUS(tp_program_call(p, in, 2, NULL, &out), TP_ERR_INVALID_ARG);
        tp_value_clear(&in[0]);
        tp_value_clear(&in[1]);
    }
    CHECK_STATUS(tp_run_execute(r, two, 0, NULL, 0), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp_run_execute(r, NULL, 0, NULL, 0), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp_run_execute(r, none, 1, NULL, 0), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("input 0 is NULL");
    /* a meta tensor has no data */
    tp_tensor *meta = NULL;
    CHECK_OK(tp_tensor_meta(TP_FLOAT32, 2, (int64_t[]){4, 16}, &meta));
    if (meta) {
        tp_status st = tp_run_execute(r, &meta, 1, NULL, 0);
        CHECK_MSG(st != TP_OK, "a meta input was accepted (%s)", when);
    }
    tp_tensor_free(meta);
    tp_tensor_free(x);
}

TEST(test_execute_errors) {
    enum { B = 4, D = 16, H = 32 };
    tp_program *p = make_net(B, D, H, true, 60);
    tp_tensor *x = rand_tensor(2, (int64_t[]){B, D}, 9, 2.0f);
    tp_run *r = NULL;
    if (p) CHECK_OK(tp_run_new(p, NULL, &r));
    if (!r || !x) goto out;
    check_input_errors(p, r, "before any call");
    tp_tensor *want[2];
    CHECK_OK(program_outputs(p, x, want, 2));
    CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0));
    check_input_errors(p, r, "with a plan bound");
    /* outputs: count, shape, dtype, layout */
    tp_tensor *o0 = NULL, *o1 = NULL, *o_bad = NULL, *o_f64 = NULL, *o_nc = NULL, *o_store = NULL;
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, 3, tp_tensor_sizes(want[0]), &o0));
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, 3, tp_tensor_sizes(want[1]), &o1));
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, 3, (int64_t[]){B, D / 4, 3}, &o_bad));
    CHECK_OK(tp_tensor_empty(TP_FLOAT64, 3, tp_tensor_sizes(want[0]), &o_f64));
    const int64_t *s0 = tp_tensor_sizes(want[0]);
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, 3, (int64_t[]){s0[0], s0[2], s0[1]}, &o_store));
    if (o_store) CHECK_OK(tp_tensor_transpose(o_store, 1, 2, &o_nc));
    if (o0 && o1 && o_bad && o_f64 && o_nc) {
        tp_tensor *ok[2] = {o0, o1};
        CHECK_STATUS(tp_run_execute(r, &x, 1, ok, 1), TP_ERR_INVALID_ARG);
        CHECK_ERR_CONTAINS("expected 2 outputs, got 1");
        CHECK_STATUS(tp_run_execute(r, &x, 1, ok, 3), TP_ERR_INVALID_ARG);
        tp_tensor *b1[2] = {o_bad, o1};
        CHECK_STATUS(tp_run_execute(r, &x, 1, b1, 2), TP_ERR_INVALID_ARG);
        CHECK_ERR_CONTAINS("output 0 must be a contiguous float32 tensor of shape");
        tp_tensor *b2[2] = {o0, o_bad};
        CHECK_STATUS(tp_run_execute(r, &x, 1, b2, 2), TP_ERR_INVALID_ARG);
        CHECK_ERR_CONTAINS("output 1");
        tp_tensor *b3[2] = {o_f64, o1};
        CHECK_STATUS(tp_run_execute(r, &x, 1, b3, 2), TP_ERR_INVALID_ARG);
        tp_tensor *b4[2] = {o_nc, o1};
        CHECK_STATUS(tp_run_execute(r, &x, 1, b4, 2), TP_ERR_INVALID_ARG);
        tp_tensor *b5[2] = {NULL, o1};
        CHECK_STATUS(tp_run_execute(r, &x, 1, b5, 2), TP_ERR_INVALID_ARG);
        /* and a good call afterwards */
        CHECK_OK(tp_run_execute(r, &x, 1, ok, 2));
        CHECK(same_tensor(o0, want[0], 0, 0) && same_tensor(o1, want[1], 0, 0));
        CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0));
        CHECK(same_tensor(tp_run_output(r, 0), want[0], 0, 0));
    }
    tp_tensor_free(o0);
    tp_tensor_free(o1);
    tp_tensor_free(o_bad);
    tp_tensor_free(o_f64);
    tp_tensor_free(o_nc);
    tp_tensor_free(o_store);
    free_tensors(want, 2);
out:
    tp_run_free(r);
    tp_tensor_free(x);
    tp_program_free(p);
}


/* tp_run_execute refuses a program with a non-tensor output every time,
 * also once a plan is bound: by its own first (refused) call or by
 * tp_run_call (the second call used to run and return TP_OK). */
TEST(test_execute_refuses_non_tensor_outputs) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    if (!g) return;
    tp_node *x = placeholder(g, "x", 2, (int64_t[]){4, 8});
    tp_node *y = call(g, TP_OP_NEG, 1, (tp_value[]){N(x)});
    tp_node *n = call(g, TP_OP_SYM_SIZE, 2, (tp_value[]){N(x), tp_value_int(0)});
    output_nodes(g, 2, (tp_node *[]){y, n});
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(y)), NULL));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_sym_int(tp_node_name(n)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    tp_tensor *in = rand_tensor(2, (int64_t[]){4, 8}, 3, 1.0f);
    tp_run *r = NULL;
    if (p) CHECK_OK(tp_run_new(p, NULL, &r));
    if (r && in) {
        for (int i = 0; i < 2; i++) {
            CHECK_STATUS(tp_run_execute(r, &in, 1, NULL, 0), TP_ERR_UNSUPPORTED);
            CHECK_ERR_CONTAINS("use tp_run_call");
        }
        tp_value iv = tv(tp_tensor_retain(in)), res = tp_value_none();
        CHECK_OK(tp_run_call(r, &iv, 1, NULL, &res));
        CHECK(tp_value_len(&res) == 2);
        tp_value_clear(&res);
        tp_value_clear(&iv);
        CHECK_STATUS(tp_run_execute(r, &in, 1, NULL, 0), TP_ERR_UNSUPPORTED);
    }
    tp_run_free(r);
    tp_tensor_free(in);
    tp_program_free(p);
}

/* ---- cancellation and the log callback ---- */

enum { PLAN_CACHE = 8 }; /* plans cached per program (engine_impl.h TP_PLAN_CACHE) */

typedef struct cancel_state {
    int polls, cancel_at; /* cancel on the cancel_at-th poll (1-based); 0: never */
} cancel_state;

static bool cancel_fn(void *user) {
    cancel_state *c = user;
    return ++c->polls == c->cancel_at;
}

TEST(test_cancel) {
    tp_program *p = make_net(4, 16, 32, false, 7);
    if (!p) return;
    tp_tensor *x = rand_tensor(2, (int64_t[]){4, 16}, 3, 1.0f);
    cancel_state c = {0, 0};
    tp_run_options opt;
    tp_run_options_init(&opt);
    opt.cancel = cancel_fn;
    opt.cancel_user = &c;
    tp_run *r = NULL;
    CHECK_OK(tp_run_new(p, &opt, &r));
    CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0));
    tp_run_stats st;
    tp_run_get_stats(r, &st);
    int steps = (int)st.n_steps;
    CHECK_MSG(c.polls == steps, "polled %d times for %d steps", c.polls, steps);
    /* stop before the third step */
    c = (cancel_state){0, 3};
    CHECK(tp_run_execute(r, &x, 1, NULL, 0) == TP_ERR_CANCELLED);
    CHECK_MSG(strstr(tp_last_error(), "call cancelled before node '") && strstr(tp_last_error(), "(step 3 of "),
              "message: %s", tp_last_error());
    CHECK(c.polls == 3);
    /* the run context still works, with the same result as an uncancelled run */
    c = (cancel_state){0, 0};
    CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0));
    tp_tensor *want[2];
    CHECK_OK(program_outputs(p, x, want, 2));
    CHECK(want[0] && same_tensor(tp_run_output(r, 0), want[0], 0, 0));
    free_tensors(want, 2);
    tp_run_free(r);

    /* a mutating plan is polled once, before its first step */
    tp_program *m = make_counter();
    if (m) {
        tp_tensor *y = NULL;
        CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){2}, (float[]){1, 2}, &y));
        CHECK_OK(tp_run_new(m, &opt, &r));
        c = (cancel_state){0, 0};
        CHECK_OK(tp_run_execute(r, &y, 1, NULL, 0));
        CHECK_MSG(c.polls == 1, "a mutating plan was polled %d times", c.polls);
        c = (cancel_state){0, 1};
        CHECK(tp_run_execute(r, &y, 1, NULL, 0) == TP_ERR_CANCELLED);
        tp_tensor *count = NULL;
        CHECK_OK(tp_program_get_state(m, "count", &count, NULL, NULL));
        CHECK_MSG(count && tp_tensor_item_f64(count, 0) == 1.0, "a cancelled call changed the counter");
        tp_run_free(r);
        tp_tensor_free(y);
        tp_program_free(m);
    }
    tp_tensor_free(x);
    tp_program_free(p);
}

typedef struct log_state {
    int n[3];
    char last[3][512];
} log_state;

static void log_fn(void *user, tp_log_level level, const char *msg) {
    log_state *l = user;
    if ((unsigned)level > 2) return;
    l->n[level]++;
    snprintf(l->last[level], sizeof l->last[level], "%s", msg);
}

TEST(test_log) {
    tp_program *p = make_net(4, 16, 32, true, 9);
    if (!p) return;
    log_state l;
    memset(&l, 0, sizeof l);
    tp_run_options opt;
    tp_run_options_init(&opt);
    opt.log = log_fn;
    opt.log_user = &l;
    opt.log_level = TP_LOG_INFO;
    tp_run *r = NULL;
    CHECK_OK(tp_run_new(p, &opt, &r));
    /* 9 batch sizes: 9 plans, the 9th evicts the oldest of the 8 cached */
    for (int64_t b = 1; b <= PLAN_CACHE + 1; b++) {
        tp_tensor *x = rand_tensor(2, (int64_t[]){b, 16}, (uint32_t)b, 1.0f);
        CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0));
        tp_tensor_free(x);
    }
    CHECK_MSG(l.n[TP_LOG_INFO] == PLAN_CACHE + 1, "%d plan messages", l.n[TP_LOG_INFO]);
    CHECK_MSG(strstr(l.last[TP_LOG_INFO], "built a plan in ") && strstr(l.last[TP_LOG_INFO], " steps (") &&
                  strstr(l.last[TP_LOG_INFO], "8 of 8 plans cached"),
              "info: %s", l.last[TP_LOG_INFO]);
    CHECK(l.n[TP_LOG_WARN] == 1);
    CHECK_MSG(strstr(l.last[TP_LOG_WARN], "plan cache full (8 input-shape classes)"), "warn: %s", l.last[TP_LOG_WARN]);
    CHECK(l.n[TP_LOG_DEBUG] == 0); /* below log_level */
    tp_run_free(r);

    /* DEBUG names the nodes that run the reference kernel */
    memset(&l, 0, sizeof l);
    opt.log_level = TP_LOG_DEBUG;
    opt.cpu_level = TP_CPU_REFERENCE;
    CHECK_OK(tp_run_new(p, &opt, &r));
    tp_tensor *x = rand_tensor(2, (int64_t[]){4, 16}, 1, 1.0f);
    CHECK_OK(tp_run_execute(r, &x, 1, NULL, 0));
    CHECK_MSG(l.n[TP_LOG_DEBUG] >= 1 && strstr(l.last[TP_LOG_DEBUG], "runs the reference kernel"), "debug: %d, %s",
              l.n[TP_LOG_DEBUG], l.last[TP_LOG_DEBUG]);
    tp_tensor_free(x);
    tp_run_free(r);
    tp_program_free(p);
}

/* ---- bfloat16 / float16 matrix products --------------------------------- */

/* A placeholder of dtype dt. */

static tp_tensor *rand_tensor_dt(tp_dtype dt, int ndim, const int64_t *sizes, uint32_t seed, float scale) {
    tp_tensor *f = rand_tensor(ndim, sizes, seed, scale), *t = NULL;
    if (f) CHECK_OK(tp_tensor_to(f, dt, &t));
    tp_tensor_free(f);
    return t;
}

/* The fast cat (src/cpu/fast_shape.c, variant "memcpy"): cat(a, e, b,
 * [t], dim) of contiguous inputs of 70, 0 and 33 along dim (e empty) and,
 * in the second program, t, a transposed (strided) view of a 20 x R input,
 * against values computed here, bit for bit, at 1-4 threads (the
 * contiguous case's 337 KB split by output bytes at 64 KB a thread, cuts
 * falling inside inputs' runs), along dims 1 and 0 and for int64; one
 * memcpy step and no reference or copy step each time. */
static void check_cat(int dim, bool strided, tp_dtype dt) {
    enum { R = 700, A = 70, B = 33, C = 20 };
    const int64_t es = (int64_t)tp_dtype_size(dt);
    int64_t sa[2] = {R, A}, sb[2] = {R, B}, se[2] = {R, 0}, st[2] = {C, R};
    if (dim == 0) { /* the same inputs transposed: rows of R */
        sa[0] = A, sa[1] = R, sb[0] = B, sb[1] = R, se[0] = 0, se[1] = R, st[0] = R, st[1] = C;
    }
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *na = placeholder_dt(g, "a", dt, 2, sa), *ne = placeholder_dt(g, "e", dt, 2, se),
            *nb = placeholder_dt(g, "b", dt, 2, sb), *nt = placeholder_dt(g, "t", dt, 2, st);
    tp_node *tv = call(g, TP_OP_TRANSPOSE, 3, (tp_value[]){N(nt), tp_value_int(0), tp_value_int(1)});
    tp_value list;
    CHECK_OK(tp_value_list(strided ? 4 : 3, &list));
    list.u.seq.items[0] = N(na);
    list.u.seq.items[1] = N(ne);
    list.u.seq.items[2] = N(nb);
    if (strided) list.u.seq.items[3] = N(tv);
    tp_node *cat = call(g, TP_OP_CAT, 2, (tp_value[]){list, tp_value_int(dim)});
    tp_value_clear(&list);
    output_nodes(g, 1, (tp_node *[]){cat});
    tp_signature *sig = NULL;
    CHECK_OK(tp_signature_new(&sig));
    const char *names[4] = {"a", "e", "b", "t"};
    for (int k = 0; k < 4; k++)
        CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor(names[k]), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(cat)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, sig, &p));
    tp_tensor *x[4] = {rand_tensor_dt(dt, 2, sa, 11, 100.0f), rand_tensor_dt(dt, 2, se, 12, 1.0f),
                       rand_tensor_dt(dt, 2, sb, 13, 100.0f), rand_tensor_dt(dt, 2, st, 14, 100.0f)};
    /* expected: out[i][j] by the definition, row-major of the output */
    const int64_t cols = dim == 1 ? A + B + (strided ? C : 0) : R, rows = dim == 1 ? R : A + B + (strided ? C : 0);
    char *want = malloc((size_t)(rows * cols * es));
    for (int64_t i = 0; want && i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            /* (input, row, column) of element (i, j) */
            int64_t q = dim == 1 ? j : i, r0 = dim == 1 ? i : j;
            const char *src;
            if (q < A) src = (const char *)tp_tensor_data(x[0]) + (dim == 1 ? r0 * A + q : q * R + r0) * es;
            else if (q < A + B) src = (const char *)tp_tensor_data(x[2]) + (dim == 1 ? r0 * B + q - A : (q - A) * R + r0) * es;
            else src = (const char *)tp_tensor_data(x[3]) + (dim == 1 ? (q - A - B) * R + r0 : r0 * C + q - A - B) * es;
            memcpy(want + (i * cols + j) * es, src, (size_t)es);
        }
    for (int threads = 1; p && want && threads <= 4; threads++) {
        tp_run_options opt;
        tp_run_options_init(&opt);
        opt.num_threads = threads;
        prof pr = {.want = "memcpy"};
        opt.profile = prof_fn;
        opt.profile_user = &pr;
        tp_run *r = NULL;
        CHECK_OK(tp_run_new(p, &opt, &r));
        if (!r) continue;
        CHECK_OK(tp_run_execute(r, x, 4, NULL, 0));
        const tp_tensor *o = tp_run_output(r, 0);
        CHECK_MSG(o && tp_tensor_numel(o) == rows * cols &&
                      memcmp(tp_tensor_data(o), want, (size_t)(rows * cols * es)) == 0,
                  "cat along %d (%s, %s), %d threads: output differs", dim, strided ? "strided" : "contiguous",
                  tp_dtype_name(dt), threads);
        /* the transpose is a view: the cat is the only step that copies */
        CHECK_MSG(pr.level_events == 1 && pr.fast_events == 1, "cat along %d (%s), %d threads: %d memcpy, %d fast steps",
                  dim, strided ? "strided" : "contiguous", threads, pr.level_events, pr.fast_events);
        /* contiguous: split by bytes (at least 64 KB a thread: 4 here;
         * plans are made for as many threads as the machine has CPUs);
         * strided: one thread */
        const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        const int want_threads = strided ? 1 : threads < ncpu ? threads : (int)ncpu;
        CHECK_MSG(pr.max_threads == want_threads,
                  "cat along %d (%s), %d threads: ran on %d", dim, strided ? "strided" : "contiguous", threads,
                  pr.max_threads);
        tp_run_free(r);
    }
    if (p && dim == 1 && dt == TP_FLOAT32) { /* planning the cat allocates its prefixes */
        alloc_sweep h = {.p = p, .x = {x[0], x[1], x[2], x[3]}, .n_x = 4, .level = TP_CPU_AUTO};
        CHECK(check_alloc_failures(strided ? "a strided cat" : "a cat", sweep_plan_and_run, &h) > 0);
    }
    free(want);
    for (int k = 0; k < 4; k++) tp_tensor_free(x[k]);
    tp_program_free(p);
}

TEST(test_fast_cat) {
    for (int strided = 0; strided <= 1; strided++) {
        check_cat(1, strided, TP_FLOAT32);
        check_cat(0, strided, TP_FLOAT32);
    }
    check_cat(1, false, TP_INT64);
}


/* Output k of runs at every level from scalar (1 and 2 threads) against the
 * reference level's: within one unit in the last place of the 16-bit
 * result (rtol: bfloat16 2^-7, float16 2^-10) plus atol, at least 97% bit
 * for bit, and no reference step. */
static void check_half_outputs(tp_program *p, tp_tensor **x, int n_x, tp_dtype dt, double atol, int want_dot16,
                               const char *what) {
    tp_run_options opt;
    tp_run_options_init(&opt);
    opt.cpu_level = TP_CPU_REFERENCE;
    tp_run *r = NULL;
    tp_tensor *ref[16] = {NULL};
    int n_out = 0;
    CHECK_OK(tp_run_new(p, &opt, &r));
    if (r && tp_run_execute(r, x, n_x, NULL, 0) == TP_OK) {
        n_out = tp_run_num_outputs(r) < 16 ? tp_run_num_outputs(r) : 16;
        for (int k = 0; k < n_out; k++) CHECK_OK(tp_tensor_clone(tp_run_output(r, k), &ref[k]));
    } else {
        CHECK_MSG(false, "%s: reference run failed: %s", what, tp_last_error());
    }
    tp_run_free(r);
    double rtol = dt == TP_BFLOAT16 ? 1.0 / 128 : 1.0 / 1024;
    for (int level = TP_CPU_SCALAR; n_out > 0 && level <= (int)tp_cpu_level_supported(); level++)
        for (int threads = 2; threads >= 1; threads--) {
            tp_run_options_init(&opt);
            opt.cpu_level = (tp_cpu_level)level;
            opt.num_threads = threads;
            prof pr = {.want = tp__gemm_bf16_amx() ? "amx_bf16" : "avx512_bf16"}; /* steps on vdpbf16ps (AMX tiles where the
                                                                                   * CPU has them): want_dot16 a call */
            opt.profile = prof_fn;
            opt.profile_user = &pr;
            r = NULL;
            CHECK_OK(tp_run_new(p, &opt, &r));
            if (!r) continue;
            for (int k = 0; k < 2; k++) CHECK_OK(tp_run_execute(r, x, n_x, NULL, 0));
            bool dot = dt == TP_BFLOAT16 && level == TP_CPU_AVX512 && tp__gemm_bf16_supported();
            CHECK_MSG(pr.level_events == (dot ? 2 * want_dot16 : 0), "%s [%s]: %d steps on vdpbf16ps", what,
                      tp_cpu_level_name((tp_cpu_level)level), pr.level_events);
            for (int k = 0; k < n_out; k++) {
                tp_tensor *got = tp_run_output(r, k);
                CHECK_MSG(got && tp_tensor_dtype(got) == dt && same_tensor(got, ref[k], rtol, atol),
                          "%s [%s, %d threads]: output %d", what, tp_cpu_level_name((tp_cpu_level)level), threads, k);
                int64_t n = got ? tp_tensor_numel(got) : 0, same = 0;
                for (int64_t i = 0; i < n && tp_tensor_numel(ref[k]) == n; i++)
                    same += tp_tensor_item_f64(got, i) == tp_tensor_item_f64(ref[k], i);
                CHECK_MSG(same * 100 >= n * 97, "%s [%s, %d threads]: output %d: %" PRId64 " of %" PRId64 " equal", what,
                          tp_cpu_level_name((tp_cpu_level)level), threads, k, same, n);
            }
            tp_run_stats st;
            tp_run_get_stats(r, &st);
            CHECK_MSG(st.n_reference == 0, "%s [%s]: %d reference steps", what, tp_cpu_level_name((tp_cpu_level)level),
                      (int)st.n_reference);
            tp_run_free(r);
        }
    free_tensors(ref, n_out);
}

/* bfloat16 and float16 elementwise ops, pow by 2, softmax, log_softmax,
 * layer_norm and trailing-dim mean / sum / amax run their float32 loops on
 * widened blocks and rows: each op
 * straight from the inputs (so each result is one rounding away from the
 * reference's), with a broadcast row, a scalar, a constant one-element
 * tensor and rows split between threads. */
TEST(test_half_rows) {
    const tp_dtype dts[2] = {TP_BFLOAT16, TP_FLOAT16};
    enum { R = 37, C = 1300 }; /* rows longer than one 1024-float block */
    for (int d = 0; d < 2; d++) {
        tp_dtype dt = dts[d];
        tp_graph *g = NULL;
        CHECK_OK(tp_graph_new(&g));
        if (!g) return;
        tp_node *w = placeholder_dt(g, "p_w", dt, 1, (int64_t[]){C});
        tp_node *b = placeholder_dt(g, "p_b", dt, 1, (int64_t[]){C});
        tp_node *k = placeholder_dt(g, "c_k", dt, 1, (int64_t[]){1});
        tp_node *x = placeholder_dt(g, "x", dt, 2, (int64_t[]){R, C});
        tp_node *y = placeholder_dt(g, "y", dt, 1, (int64_t[]){C});
        tp_value shape;
        CHECK_OK(tp_value_int_list((int64_t[]){C}, 1, &shape));
        tp_node *o[12];
        tp_value last = int_list(1, (int64_t[]){-1});
        o[8] = call(g, TP_OP_MEAN, 3, (tp_value[]){N(x), last, tp_value_bool(true)});
        o[9] = call(g, TP_OP_POW, 2, (tp_value[]){N(x), tp_value_int(2)});
        o[10] = call(g, TP_OP_SUM, 3, (tp_value[]){N(x), last, tp_value_bool(false)});
        o[11] = call(g, TP_OP_AMAX, 3, (tp_value[]){N(x), last, tp_value_bool(false)});
        tp_value_clear(&last);
        o[0] = call(g, TP_OP_ADD, 2, (tp_value[]){N(x), N(y)});
        o[1] = call(g, TP_OP_MUL, 2, (tp_value[]){N(x), tp_value_float(0.3)});
        o[2] = call(g, TP_OP_DIV, 2, (tp_value[]){N(x), N(k)});
        o[3] = call(g, TP_OP_GELU, 1, (tp_value[]){N(x)});
        o[4] = call(g, TP_OP_EXP, 1, (tp_value[]){N(y)});
        o[5] = call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(x), tp_value_int(-1)});
        o[6] = call(g, TP_OP_LOG_SOFTMAX, 2, (tp_value[]){N(x), tp_value_int(-1)});
        o[7] = call(g, TP_OP_LAYER_NORM, 5, (tp_value[]){N(x), shape, N(w), N(b), tp_value_float(1e-5)});
        tp_value_clear(&shape);
        output_nodes(g, 12, o);
        tp_signature *sig = NULL;
        CHECK_OK(tp_signature_new(&sig));
        CHECK_OK(tp_signature_add_input(sig, TP_INPUT_PARAMETER, tp_arg_tensor("p_w"), "w", TP_PERSISTENT_UNSET));
        CHECK_OK(tp_signature_add_input(sig, TP_INPUT_PARAMETER, tp_arg_tensor("p_b"), "b", TP_PERSISTENT_UNSET));
        CHECK_OK(tp_signature_add_input(sig, TP_INPUT_CONSTANT_TENSOR, tp_arg_tensor("c_k"), "k", TP_PERSISTENT_UNSET));
        CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
        CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor("y"), NULL, TP_PERSISTENT_UNSET));
        for (int i = 0; i < 12; i++)
            CHECK_OK(tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(o[i])), NULL));
        tp_program *p = NULL;
        CHECK_OK(tp_program_new(g, sig, &p));
        tp_tensor *in[2] = {rand_tensor_dt(dt, 2, (int64_t[]){R, C}, 31, 6.0f), rand_tensor_dt(dt, 1, (int64_t[]){C}, 32, 6.0f)};
        tp_tensor *tw = rand_tensor_dt(dt, 1, (int64_t[]){C}, 33, 2.0f), *tb = rand_tensor_dt(dt, 1, (int64_t[]){C}, 34, 2.0f);
        tp_tensor *tk = rand_tensor_dt(dt, 1, (int64_t[]){1}, 35, 2.0f);
        if (p && tw && tb && tk) {
            CHECK_OK(tp_program_set_state(p, "w", TP_STATE_PARAMETER, tw, true));
            CHECK_OK(tp_program_set_state(p, "b", TP_STATE_PARAMETER, tb, true));
            CHECK_OK(tp_program_set_state(p, "k", TP_STATE_CONSTANT, tk, true));
            check_half_outputs(p, in, 2, dt, dt == TP_BFLOAT16 ? 1e-2 : 2e-3, 0, tp_dtype_name(dt));
        }
        tp_tensor_free(tw);
        tp_tensor_free(tb);
        tp_tensor_free(tk);
        free_tensors(in, 2);
        tp_program_free(p);
    }
}

/* bfloat16 and float16 convolutions with constant weights run im2col (or
 * the depthwise loop) on widened values: strides, padding, dilation,
 * groups, a 1x1, a patch embedding (16x16 stride 16), depthwise 3x3 stride
 * 2 and 5x5, a conv1d; and max, average and adaptive average pooling on
 * widened planes; against the reference level. */
/* Convolutions (dense, 1x1, 16x16 stride 16, conv1d, depthwise 3x3 stride
 * 2 and 5x5 with 4 channels, 3x3 with 20 and 5x5 stride 2 with 16 at
 * batch 2, and 3x3 stride-1 ones with enough tiles for Winograd: 16 ->
 * 24 channels with padding 1 at batch 2, and 20 -> 17 channels (vector
 * remainders, a partial weight panel) with padding (0, 2) on odd sizes)
 * and max / avg / adaptive pools of one dtype; in[0..4) its inputs (NULL
 * on failure). */
enum { HALF_CONV_INPUTS = 4 };
static tp_program *half_conv_program(tp_dtype dt, tp_tensor **in) {
    for (int i = 0; i < HALF_CONV_INPUTS; i++) in[i] = NULL;
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    if (!g) return NULL;
    enum { NW = 10, NO = 13 };
    static const int64_t wshape[NW][4] = {{6, 2, 3, 3}, {5, 4, 1, 1}, {8, 4, 16, 16}, {5, 3, 4, 0}, {4, 1, 3, 3},
                                           {4, 1, 5, 5}, {24, 16, 3, 3}, {17, 20, 3, 3}, {20, 1, 3, 3},
                                           {16, 1, 5, 5}};
    static const int64_t xshape[HALF_CONV_INPUTS][4] = {{2, 4, 33, 35}, {1, 3, 50, 0}, {2, 16, 20, 22}, {1, 20, 27, 25}};
    const char *wn[NW] = {"p_w0", "p_w1", "p_w2", "p_w3", "p_w4", "p_w5", "p_w6", "p_w7", "p_w8", "p_w9"};
    const char *bn[NW] = {"p_b0", "p_b1", "p_b2", "p_b3", "p_b4", "p_b5", "p_b6", "p_b7", "p_b8", "p_b9"};
    const char *xn[HALF_CONV_INPUTS] = {"x", "x1", "x2", "x3"};
    tp_node *w[NW], *b[NW], *xs[HALF_CONV_INPUTS];
    for (int i = 0; i < NW; i++) {
        w[i] = placeholder_dt(g, wn[i], dt, i == 3 ? 3 : 4, wshape[i]);
        b[i] = placeholder_dt(g, bn[i], dt, 1, wshape[i]);
    }
    for (int i = 0; i < HALF_CONV_INPUTS; i++) xs[i] = placeholder_dt(g, xn[i], dt, i == 1 ? 3 : 4, xshape[i]);
    tp_node *x = xs[0], *x1 = xs[1];
    tp_node *o[NO];
    tp_value s21 = int_list(2, (int64_t[]){2, 1}), p12 = int_list(2, (int64_t[]){1, 2}), d12 = int_list(2, (int64_t[]){1, 2});
    tp_value s11 = int_list(2, (int64_t[]){1, 1}), p00 = int_list(2, (int64_t[]){0, 0});
    tp_value s16 = int_list(2, (int64_t[]){16, 16}), s3 = int_list(1, (int64_t[]){3}), p1 = int_list(1, (int64_t[]){1});
    tp_value d1 = int_list(1, (int64_t[]){1}), p02 = int_list(2, (int64_t[]){0, 2});
    o[0] = call(g, TP_OP_CONV2D, 7, (tp_value[]){N(x), N(w[0]), N(b[0]), s21, p12, d12, tp_value_int(2)});
    o[1] = call(g, TP_OP_CONV2D, 7, (tp_value[]){N(x), N(w[1]), N(b[1]), s11, p00, s11, tp_value_int(1)});
    o[2] = call(g, TP_OP_CONV2D, 7, (tp_value[]){N(x), N(w[2]), N(b[2]), s16, p00, s11, tp_value_int(1)});
    o[3] = call(g, TP_OP_CONV1D, 7, (tp_value[]){N(x1), N(w[3]), N(b[3]), s3, p1, d1, tp_value_int(1)});
    /* depthwise 3x3 stride 2 and 5x5, pools */
    tp_value s22 = int_list(2, (int64_t[]){2, 2}), p11 = int_list(2, (int64_t[]){1, 1}), p22 = int_list(2, (int64_t[]){2, 2});
    tp_value k33 = int_list(2, (int64_t[]){3, 3});
    o[4] = call(g, TP_OP_CONV2D, 7, (tp_value[]){N(x), N(w[4]), N(b[4]), s22, p11, s11, tp_value_int(4)});
    o[5] = call(g, TP_OP_CONV2D, 7, (tp_value[]){N(x), N(w[5]), N(b[5]), s11, p22, s11, tp_value_int(4)});
    o[6] = call(g, TP_OP_MAX_POOL2D, 6, (tp_value[]){N(x), k33, s22, p11, s11, tp_value_bool(false)});
    o[7] = call(g, TP_OP_AVG_POOL2D, 7, (tp_value[]){N(x), s22, s22, p00, tp_value_bool(false), tp_value_bool(true),
                                                      tp_value_none()});
    o[8] = call(g, TP_OP_ADAPTIVE_AVG_POOL2D, 2, (tp_value[]){N(x), k33});
    /* Winograd */
    o[9] = call(g, TP_OP_CONV2D, 7, (tp_value[]){N(xs[2]), N(w[6]), N(b[6]), s11, p11, s11, tp_value_int(1)});
    o[10] = call(g, TP_OP_CONV2D, 7, (tp_value[]){N(xs[3]), N(w[7]), N(b[7]), s11, p02, s11, tp_value_int(1)});
    /* depthwise with more than 16 channels: 20 (a partial group of 16) on
     * 27 x 25 planes, 16 with 5x5 stride 2 at batch 2 */
    o[11] = call(g, TP_OP_CONV2D, 7, (tp_value[]){N(xs[3]), N(w[8]), N(b[8]), s11, p11, s11, tp_value_int(20)});
    o[12] = call(g, TP_OP_CONV2D, 7, (tp_value[]){N(xs[2]), N(w[9]), N(b[9]), s22, p22, s11, tp_value_int(16)});
    tp_value *lists[] = {&s21, &p12, &d12, &s11, &p00, &s16, &s3, &p1, &d1, &s22, &p11, &p22, &k33, &p02};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) tp_value_clear(lists[i]);
    output_nodes(g, NO, o);
    tp_signature *sig = NULL;
    CHECK_OK(tp_signature_new(&sig));
    for (int i = 0; i < NW; i++) {
        CHECK_OK(tp_signature_add_input(sig, TP_INPUT_PARAMETER, tp_arg_tensor(wn[i]), wn[i] + 2, TP_PERSISTENT_UNSET));
        CHECK_OK(tp_signature_add_input(sig, TP_INPUT_PARAMETER, tp_arg_tensor(bn[i]), bn[i] + 2, TP_PERSISTENT_UNSET));
    }
    for (int i = 0; i < HALF_CONV_INPUTS; i++)
        CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor(xn[i]), NULL, TP_PERSISTENT_UNSET));
    for (int i = 0; i < NO; i++)
        CHECK_OK(tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(o[i])), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, sig, &p));
    for (int i = 0; p && i < NW; i++) {
        tp_tensor *tw = rand_tensor_dt(dt, i == 3 ? 3 : 4, wshape[i], 50 + (uint32_t)i, 1.0f);
        tp_tensor *tb = rand_tensor_dt(dt, 1, wshape[i], 60 + (uint32_t)i, 1.0f);
        CHECK_OK(tp_program_set_state(p, wn[i] + 2, TP_STATE_PARAMETER, tw, true));
        CHECK_OK(tp_program_set_state(p, bn[i] + 2, TP_STATE_PARAMETER, tb, true));
        tp_tensor_free(tw);
        tp_tensor_free(tb);
    }
    for (int i = 0; i < HALF_CONV_INPUTS; i++)
        in[i] = rand_tensor_dt(dt, i == 1 ? 3 : 4, xshape[i], 70 + (uint32_t)i, 2.0f);
    return p;
}

/* Steps of a run at the CPU's level (2 threads) whose variant is want. */
static int variant_steps(tp_program *p, tp_tensor **x, int n_x, const char *want) {
    tp_run_options opt;
    tp_run_options_init(&opt);
    opt.num_threads = 2;
    prof pr = {.want = want};
    opt.profile = prof_fn;
    opt.profile_user = &pr;
    tp_run *r = NULL;
    CHECK_OK(tp_run_new(p, &opt, &r));
    if (r) CHECK_OK(tp_run_execute(r, x, n_x, NULL, 0));
    tp_run_free(r);
    return pr.level_events;
}

TEST(test_half_conv) {
    const tp_dtype dts[2] = {TP_BFLOAT16, TP_FLOAT16};
    for (int d = 0; d < 2; d++) {
        tp_dtype dt = dts[d];
        tp_tensor *in[HALF_CONV_INPUTS];
        tp_program *p = half_conv_program(dt, in);
        /* the four dense convolutions but the 3x3 stride-1 ones on
         * vdpbf16ps, not the depthwise ones */
        if (p) check_half_outputs(p, in, HALF_CONV_INPUTS, dt, 2e-3, 4, dt == TP_BFLOAT16 ? "bfloat16 conv" : "float16 conv");
        /* the two 3x3 stride-1 ones on Winograd where the CPU has AVX2:
         * F(4x4, 3x3) for bfloat16, F(2x2, 3x3) for float16 */
        const int wino = p && tp_cpu_level_supported() >= TP_CPU_AVX2 ? 2 : 0;
        const char *want = dt == TP_BFLOAT16 ? "winograd4" : "winograd2";
        if (p) CHECK_MSG(variant_steps(p, in, HALF_CONV_INPUTS, want) == wino, "%s: steps on %s, want %d",
                         tp_dtype_name(dt), want, wino);
        /* the four depthwise ones 16 channels at a time at AVX-512 */
        const int c16 = p && tp_cpu_level_supported() >= TP_CPU_AVX512 ? 4 : 0;
        if (p) CHECK_MSG(variant_steps(p, in, HALF_CONV_INPUTS, "avx512-c16") == c16,
                         "%s: depthwise steps on avx512-c16, want %d", tp_dtype_name(dt), c16);
        free_tensors(in, HALF_CONV_INPUTS);
        tp_program_free(p);
    }
}

/* One product program: inputs in[0..n_in) of which the first n_params are
 * parameters (constant weights) and the rest user inputs. */
typedef enum { HP_LINEAR, HP_LINEAR_XT, HP_LINEAR_INPUTS, HP_MATMUL, HP_MATMUL_T, HP_ADDMM } half_prog;

/* x * 0.5 -> exp -> + 1 -> relu -> / k (a one-element constant) -> gelu
 * -> sqrt in dt; with every_output all seven are outputs (nothing fuses),
 * else only the last. */
static tp_program *half_chain(tp_dtype dt, bool every_output) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    if (!g) return NULL;
    tp_node *k = placeholder_dt(g, "c_k", dt, 1, (int64_t[]){1});
    tp_node *x = placeholder_dt(g, "x", dt, 2, (int64_t[]){9, 2500});
    tp_node *o[7];
    o[0] = call(g, TP_OP_MUL, 2, (tp_value[]){N(x), tp_value_float(0.5)});
    o[1] = call(g, TP_OP_EXP, 1, (tp_value[]){N(o[0])});
    o[2] = call(g, TP_OP_ADD, 2, (tp_value[]){N(o[1]), tp_value_float(1.0)});
    o[3] = call(g, TP_OP_RELU, 1, (tp_value[]){N(o[2])});
    o[4] = call(g, TP_OP_DIV, 2, (tp_value[]){N(o[3]), N(k)});
    o[5] = call(g, TP_OP_GELU, 1, (tp_value[]){N(o[4])});
    o[6] = call(g, TP_OP_SQRT, 1, (tp_value[]){N(o[5])});
    int n_out = every_output ? 7 : 1;
    output_nodes(g, n_out, every_output ? o : &o[6]);
    tp_signature *sig = NULL;
    CHECK_OK(tp_signature_new(&sig));
    CHECK_OK(tp_signature_add_input(sig, TP_INPUT_CONSTANT_TENSOR, tp_arg_tensor("c_k"), "k", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    for (int i = 7 - n_out; i < 7; i++)
        CHECK_OK(tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(o[i])), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, sig, &p));
    tp_tensor *tk = rand_tensor_dt(dt, 1, (int64_t[]){1}, 81, 2.0f);
    if (p && tk) CHECK_OK(tp_program_set_state(p, "k", TP_STATE_CONSTANT, tk, true));
    tp_tensor_free(tk);
    return p;
}

/* What check_fused_bits expects of the fused program: at least (exactly,
 * with exact) `fused` fused steps, or `fused_dot` at the AVX-512 level
 * where the CPU runs vdpbf16ps; its outputs 0 .. n_cmp - 1 have the bits
 * of the unfused program's outputs from `out`. */
typedef struct fused_want {
    int fused, fused_dot;
    bool exact;
    int out, n_cmp;
} fused_want;

/* fused (a program whose steps fuse) against apart (the same steps, each
 * intermediate an output: nothing fuses) on inputs x[0..n_x), 16-bit, at
 * every level and thread count: the fused steps w asks for, none in apart,
 * no reference step in either, and the outputs' bits equal. */
static void check_fused_bits(tp_program *fused, tp_program *apart, tp_tensor **x, int n_x, fused_want w,
                             const char *what) {
    for (int level = TP_CPU_SCALAR; fused && apart && level <= (int)tp_cpu_level_supported(); level++)
        for (int threads = 1; threads <= 2; threads++) {
            tp_run_options opt;
            tp_run_options_init(&opt);
            opt.cpu_level = (tp_cpu_level)level;
            opt.num_threads = threads;
            tp_run *rf = NULL, *ra = NULL;
            CHECK_OK(tp_run_new(fused, &opt, &rf));
            CHECK_OK(tp_run_new(apart, &opt, &ra));
            if (!rf || !ra || tp_run_execute(rf, x, n_x, NULL, 0) != TP_OK || tp_run_execute(ra, x, n_x, NULL, 0) != TP_OK) {
                CHECK_MSG(false, "%s: runs failed: %s", what, tp_last_error());
            } else {
                tp_run_stats sf, sa;
                tp_run_get_stats(rf, &sf);
                tp_run_get_stats(ra, &sa);
                const bool dot = level == TP_CPU_AVX512 && tp__gemm_bf16_supported();
                const int want = dot ? w.fused_dot : w.fused;
                CHECK_MSG((w.exact ? sf.n_fused == want : sf.n_fused >= want) && sa.n_fused == 0 &&
                              sf.n_reference == 0 && sa.n_reference == 0,
                          "%s [%s]: fused %d / %d", what, tp_cpu_level_name((tp_cpu_level)level), (int)sf.n_fused,
                          (int)sa.n_fused);
                for (int k = 0; k < w.n_cmp; k++) {
                    const tp_tensor *a = tp_run_output(rf, k), *b = tp_run_output(ra, w.out + k);
                    CHECK_MSG(a && b && tp_tensor_numel(a) == tp_tensor_numel(b) &&
                                  memcmp(tp_tensor_data((tp_tensor *)a), tp_tensor_data((tp_tensor *)b),
                                         (size_t)tp_tensor_numel(a) * 2) == 0,
                              "%s [%s, %d threads]: output %d's bits differ from the steps'", what,
                              tp_cpu_level_name((tp_cpu_level)level), threads, k);
                }
            }
            tp_run_free(rf);
            tp_run_free(ra);
        }
}

/* 16-bit convolutions followed by fusable steps: a 3x3 stride-1 one
 * (Winograd from the AVX2 level) + x (a residual) then relu, a depthwise
 * 3x3 stride 2 (16 channels at a time at AVX-512) then relu6, a 1x1
 * (vdpbf16ps for bfloat16 at AVX-512) + its own input then hardtanh(0, 6),
 * a dense 3x3 stride 2 then sigmoid (which stays a step); with
 * every_output each intermediate is an output too (nothing fuses). */
static tp_program *half_conv_act(tp_dtype dt, bool every_output) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    if (!g) return NULL;
    static const int64_t ws[4][4] = {{16, 16, 3, 3}, {16, 1, 3, 3}, {16, 16, 1, 1}, {8, 16, 3, 3}};
    const char *wn[4] = {"p_w0", "p_w1", "p_w2", "p_w3"}, *bn[4] = {"p_b0", "p_b1", "p_b2", "p_b3"};
    tp_node *w[4], *b[4];
    for (int i = 0; i < 4; i++) {
        w[i] = placeholder_dt(g, wn[i], dt, 4, ws[i]);
        b[i] = placeholder_dt(g, bn[i], dt, 1, ws[i]);
    }
    tp_node *x = placeholder_dt(g, "x", dt, 4, (int64_t[]){2, 16, 20, 22});
    tp_value s11 = int_list(2, (int64_t[]){1, 1}), s22 = int_list(2, (int64_t[]){2, 2});
    tp_value p11 = int_list(2, (int64_t[]){1, 1}), p00 = int_list(2, (int64_t[]){0, 0});
    enum { NO = 10 };
    tp_node *o[NO];
    o[0] = call(g, TP_OP_CONV2D, 7, (tp_value[]){N(x), N(w[0]), N(b[0]), s11, p11, s11, tp_value_int(1)});
    o[1] = call(g, TP_OP_ADD, 2, (tp_value[]){N(o[0]), N(x)});
    o[2] = call(g, TP_OP_RELU, 1, (tp_value[]){N(o[1])});
    o[3] = call(g, TP_OP_CONV2D, 7, (tp_value[]){N(o[2]), N(w[1]), N(b[1]), s22, p11, s11, tp_value_int(16)});
    o[4] = call(g, TP_OP_RELU6, 1, (tp_value[]){N(o[3])});
    o[5] = call(g, TP_OP_CONV2D, 7, (tp_value[]){N(o[4]), N(w[2]), N(b[2]), s11, p00, s11, tp_value_int(1)});
    o[6] = call(g, TP_OP_ADD, 2, (tp_value[]){N(o[4]), N(o[5])});
    o[7] = call(g, TP_OP_HARDTANH, 3, (tp_value[]){N(o[6]), tp_value_float(0.0), tp_value_float(6.0)});
    o[8] = call(g, TP_OP_CONV2D, 7, (tp_value[]){N(o[7]), N(w[3]), N(b[3]), s22, p11, s11, tp_value_int(1)});
    o[9] = call(g, TP_OP_SIGMOID, 1, (tp_value[]){N(o[8])});
    tp_value *lists[] = {&s11, &s22, &p11, &p00};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) tp_value_clear(lists[i]);
    int n_out = every_output ? NO : 1;
    output_nodes(g, n_out, every_output ? o : &o[NO - 1]);
    tp_signature *sig = NULL;
    CHECK_OK(tp_signature_new(&sig));
    for (int i = 0; i < 4; i++) {
        CHECK_OK(tp_signature_add_input(sig, TP_INPUT_PARAMETER, tp_arg_tensor(wn[i]), wn[i] + 2, TP_PERSISTENT_UNSET));
        CHECK_OK(tp_signature_add_input(sig, TP_INPUT_PARAMETER, tp_arg_tensor(bn[i]), bn[i] + 2, TP_PERSISTENT_UNSET));
    }
    CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    for (int i = NO - n_out; i < NO; i++)
        CHECK_OK(tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(o[i])), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, sig, &p));
    for (int i = 0; p && i < 4; i++) {
        /* large weights: many outputs past 6 and below 0 */
        tp_tensor *tw = rand_tensor_dt(dt, 4, ws[i], 30 + (uint32_t)i, 3.0f);
        tp_tensor *tb = rand_tensor_dt(dt, 1, ws[i], 40 + (uint32_t)i, 1.0f);
        CHECK_OK(tp_program_set_state(p, wn[i] + 2, TP_STATE_PARAMETER, tw, true));
        CHECK_OK(tp_program_set_state(p, bn[i] + 2, TP_STATE_PARAMETER, tb, true));
        tp_tensor_free(tw);
        tp_tensor_free(tb);
    }
    return p;
}

/* A 16-bit convolution takes a following residual add and relu, relu6 or
 * hardtanh(0, 6) (conv_fuse16) and gives the bits of the steps apart;
 * sigmoid stays a step. Every level and thread count, bfloat16 and float16, with the
 * exact count of fused steps. */
TEST(test_half_conv_act_fuses) {
    const tp_dtype dts[2] = {TP_BFLOAT16, TP_FLOAT16};
    for (int d = 0; d < 2; d++) {
        tp_program *fused = half_conv_act(dts[d], false), *apart = half_conv_act(dts[d], true);
        tp_tensor *x = rand_tensor_dt(dts[d], 4, (int64_t[]){2, 16, 20, 22}, 85, 8.0f);
        check_fused_bits(fused, apart, &x, 1,
                         (fused_want){.fused = 5, .fused_dot = 5, .exact = true, .out = 9, .n_cmp = 1},
                         tp_dtype_name(dts[d]));
        /* the activations clamp: some of relu6's outputs are 6, some of relu's 0 */
        tp_run *r = NULL;
        if (apart && x) CHECK_OK(tp_run_new(apart, NULL, &r));
        if (r && tp_run_execute(r, &x, 1, NULL, 0) == TP_OK) {
            const tp_tensor *r6 = tp_run_output(r, 4), *r0 = tp_run_output(r, 2);
            int64_t six = 0, zero = 0;
            for (int64_t i = 0; r6 && i < tp_tensor_numel(r6); i++) six += tp_tensor_item_f64(r6, i) == 6.0;
            for (int64_t i = 0; r0 && i < tp_tensor_numel(r0); i++) zero += tp_tensor_item_f64(r0, i) == 0.0;
            CHECK_MSG(six > 0 && zero > 0, "%s: %" PRId64 " sixes, %" PRId64 " zeros", tp_dtype_name(dts[d]), six, zero);
        } else {
            CHECK_MSG(false, "%s: run failed: %s", tp_dtype_name(dts[d]), tp_last_error());
        }
        tp_run_free(r);
        tp_tensor_free(x);
        tp_program_free(fused);
        tp_program_free(apart);
    }
}

/* A chain of 16-bit elementwise steps fuses into one pass, and gives the
 * bits of the same steps run one by one (each fused step rounds its input
 * to 16 bits first), at every level and thread count. */
TEST(test_half_chain_fuses) {
    const tp_dtype dts[2] = {TP_BFLOAT16, TP_FLOAT16};
    for (int d = 0; d < 2; d++) {
        tp_program *fused = half_chain(dts[d], false), *apart = half_chain(dts[d], true);
        tp_tensor *x = rand_tensor_dt(dts[d], 2, (int64_t[]){9, 2500}, 82, 6.0f);
        check_fused_bits(fused, apart, &x, 1, (fused_want){.fused = 5, .fused_dot = 5, .out = 6, .n_cmp = 1},
                         tp_dtype_name(dts[d]));
        tp_tensor_free(x);
        tp_program_free(fused);
        tp_program_free(apart);
    }
}

/* bfloat16: y = linear(x, W [N, K]) + b [N] + r, or with the linear's own
 * bias bl, the product matmul(x3 [2, 5, K], W2 [K, N]) + b; with
 * every_output the intermediates are outputs too (nothing fuses). */
static tp_program *half_epilogue(bool own_bias, bool every_output, int64_t K, int64_t N) {
    const tp_dtype dt = TP_BFLOAT16;
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    if (!g) return NULL;
    tp_node *w = placeholder_dt(g, "p_w", dt, 2, (int64_t[]){N, K});
    tp_node *w2 = placeholder_dt(g, "p_w2", dt, 2, (int64_t[]){K, N});
    tp_node *b = placeholder_dt(g, "p_b", dt, 1, (int64_t[]){N});
    tp_node *bl = placeholder_dt(g, "p_bl", dt, 1, (int64_t[]){N});
    tp_node *x = placeholder_dt(g, "x", dt, 2, (int64_t[]){37, K});
    tp_node *r = placeholder_dt(g, "r", dt, 2, (int64_t[]){37, N});
    tp_node *x3 = placeholder_dt(g, "x3", dt, 3, (int64_t[]){2, 5, K});
    tp_node *o[5];
    o[0] = own_bias ? call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(bl)})
                    : call(g, TP_OP_LINEAR, 2, (tp_value[]){N(x), N(w)});
    o[1] = call(g, TP_OP_ADD, 2, (tp_value[]){N(o[0]), N(b)});
    o[2] = call(g, TP_OP_ADD, 2, (tp_value[]){N(o[1]), N(r)});
    o[3] = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(x3), N(w2)});
    o[4] = call(g, TP_OP_ADD, 2, (tp_value[]){N(b), N(o[3])}); /* the row first, as ONNX writes Linear */
    tp_node *outs[5] = {o[2], o[4], o[0], o[1], o[3]};
    int n_out = every_output ? 5 : 2;
    output_nodes(g, n_out, outs);
    tp_signature *sig = NULL;
    CHECK_OK(tp_signature_new(&sig));
    const char *params[4] = {"p_w", "p_w2", "p_b", "p_bl"};
    for (int i = 0; i < 4; i++)
        CHECK_OK(tp_signature_add_input(sig, TP_INPUT_PARAMETER, tp_arg_tensor(params[i]), params[i] + 2, TP_PERSISTENT_UNSET));
    const char *ins[3] = {"x", "r", "x3"};
    for (int i = 0; i < 3; i++)
        CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor(ins[i]), NULL, TP_PERSISTENT_UNSET));
    for (int i = 0; i < n_out; i++)
        CHECK_OK(tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(outs[i])), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, sig, &p));
    const int64_t shapes[4][2] = {{N, K}, {K, N}, {N, 0}, {N, 0}};
    for (int i = 0; p && i < 4; i++) {
        tp_tensor *t = rand_tensor_dt(dt, shapes[i][1] ? 2 : 1, shapes[i], 91 + (uint32_t)i, 2.0f);
        CHECK_OK(tp_program_set_state(p, params[i] + 2, TP_STATE_PARAMETER, t, true));
        tp_tensor_free(t);
    }
    return p;
}

/* A bfloat16 product on vdpbf16ps takes a following bias add and residual
 * add into its epilogue, rounding before each as the separate steps do:
 * the outputs equal, bit for bit, those of the same steps unfused, at
 * every level and thread count (where the product is not on vdpbf16ps
 * nothing fuses). */
TEST(test_half_epilogue_fuses) {
    static const int64_t kn[3][2] = {{300, 130}, {1101, 70}, {64, 17}};
    for (int own = 0; own < 2; own++)
        for (int c = 0; c < 3; c++) {
            const int64_t K = kn[c][0], N = kn[c][1];
            tp_program *fused = half_epilogue(own, false, K, N), *apart = half_epilogue(own, true, K, N);
            tp_tensor *in[3] = {rand_tensor_dt(TP_BFLOAT16, 2, (int64_t[]){37, K}, 95, 2.0f),
                                rand_tensor_dt(TP_BFLOAT16, 2, (int64_t[]){37, N}, 96, 8.0f),
                                rand_tensor_dt(TP_BFLOAT16, 3, (int64_t[]){2, 5, K}, 97, 2.0f)};
            char what[64];
            snprintf(what, sizeof what, "own bias %d, K %" PRId64, own, K);
            check_fused_bits(fused, apart, in, 3, (fused_want){.fused_dot = 3, .exact = true, .n_cmp = 2}, what);
            free_tensors(in, 3);
            tp_program_free(fused);
            tp_program_free(apart);
        }
}

/* kind over [M, K] x [K, N] (batched as the kind says), in dt. */
/* The product program of kind in dt; its user inputs in x[0..*n_x). */
static tp_program *half_program(half_prog kind, tp_dtype dt, int64_t M, int64_t K, int64_t N, uint32_t seed,
                                tp_tensor **x, int *n_x) {
    *n_x = 0;
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    if (!g) return NULL;
    int64_t s[4][4];
    int nd[4], n_in = 0, n_params = 0;
    const char *names[4] = {"x", "w", "b", "y"};
    tp_node *nodes[4], *o = NULL;
    switch (kind) {
    case HP_LINEAR: case HP_LINEAR_XT: case HP_LINEAR_INPUTS: { /* x [M, K] (or transpose(xt [K, M])), w [N, K], b [N] */
        bool params = kind != HP_LINEAR_INPUTS;
        n_params = params ? 2 : 0;
        names[0] = params ? "p_w" : "w";
        names[1] = params ? "p_b" : "b";
        names[2] = "x";
        nd[0] = 2, s[0][0] = N, s[0][1] = K;
        nd[1] = 1, s[1][0] = N;
        nd[2] = 2, s[2][0] = kind == HP_LINEAR_XT ? K : M, s[2][1] = kind == HP_LINEAR_XT ? M : K;
        n_in = 3;
        for (int i = 0; i < n_in; i++) nodes[i] = placeholder_dt(g, names[i], dt, nd[i], s[i]);
        tp_node *xin = nodes[2];
        if (kind == HP_LINEAR_XT) /* A read through its strides (gathered by row blocks) */
            xin = call(g, TP_OP_TRANSPOSE, 3, (tp_value[]){N(nodes[2]), tp_value_int(0), tp_value_int(1)});
        o = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(xin), N(nodes[0]), N(nodes[1])});
        break;
    }
    case HP_MATMUL: /* x [2, 3, M, K] @ y [3, K, N]: a broadcast batch */
        nd[0] = 4, s[0][0] = 2, s[0][1] = 3, s[0][2] = M, s[0][3] = K;
        nd[1] = 3, s[1][0] = 3, s[1][1] = K, s[1][2] = N;
        names[1] = "y";
        n_in = 2;
        for (int i = 0; i < n_in; i++) nodes[i] = placeholder_dt(g, names[i], dt, nd[i], s[i]);
        o = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(nodes[0]), N(nodes[1])});
        break;
    case HP_MATMUL_T: { /* x [M, K] @ transpose(y [N, K]): B read through its strides */
        nd[0] = 2, s[0][0] = M, s[0][1] = K;
        nd[1] = 2, s[1][0] = N, s[1][1] = K;
        names[1] = "y";
        n_in = 2;
        for (int i = 0; i < n_in; i++) nodes[i] = placeholder_dt(g, names[i], dt, nd[i], s[i]);
        tp_node *t = call(g, TP_OP_TRANSPOSE, 3, (tp_value[]){N(nodes[1]), tp_value_int(0), tp_value_int(1)});
        o = call(g, TP_OP_MM, 2, (tp_value[]){N(nodes[0]), N(t)});
        break;
    }
    case HP_ADDMM: /* addmm(p_b [N], x [M, K], p_w [K, N]) */
        n_params = 2;
        names[0] = "p_w", names[1] = "p_b", names[2] = "x";
        nd[0] = 2, s[0][0] = K, s[0][1] = N;
        nd[1] = 1, s[1][0] = N;
        nd[2] = 2, s[2][0] = M, s[2][1] = K;
        n_in = 3;
        for (int i = 0; i < n_in; i++) nodes[i] = placeholder_dt(g, names[i], dt, nd[i], s[i]);
        o = call(g, TP_OP_ADDMM, 3, (tp_value[]){N(nodes[1]), N(nodes[2]), N(nodes[0])});
        break;
    }
    output_nodes(g, 1, &o);
    tp_signature *sig = NULL;
    CHECK_OK(tp_signature_new(&sig));
    for (int i = 0; i < n_in; i++)
        CHECK_OK(tp_signature_add_input(sig, i < n_params ? TP_INPUT_PARAMETER : TP_INPUT_USER_INPUT,
                                        tp_arg_tensor(names[i]), i < n_params ? names[i] + 2 : NULL,
                                        TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(o)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, sig, &p));
    for (int i = 0; p && i < n_in; i++) {
        tp_tensor *t = rand_tensor_dt(dt, nd[i], s[i], seed + (uint32_t)i, 2.0f);
        if (i < n_params) {
            CHECK_OK(tp_program_set_state(p, names[i] + 2, TP_STATE_PARAMETER, t, true));
            tp_tensor_free(t);
        } else {
            x[(*n_x)++] = t;
        }
    }
    return p;
}

static void half_case(half_prog kind, tp_dtype dt, int64_t M, int64_t K, int64_t N, uint32_t seed) {
    char what[160];
    snprintf(what, sizeof what, "%s %s %" PRId64 "x%" PRId64 "x%" PRId64, tp_dtype_name(dt),
             (const char *[]){"linear", "linear (transposed x)", "linear (inputs)", "matmul (batched)",
                              "matmul (transposed B)", "addmm"}[kind],
             M, K, N);
    tp_tensor *x[4] = {NULL, NULL, NULL, NULL};
    int n_x = 0;
    tp_program *p = half_program(kind, dt, M, K, N, seed, x, &n_x);
    if (p) check_half_outputs(p, x, n_x, dt, 2e-3, 1, what); /* the product on vdpbf16ps where the CPU has it */
    free_tensors(x, n_x);
    tp_program_free(p);
}

/* p's float32 outputs 0 .. n_out - 1 at the reference level, then at the
 * best level at 1-4 threads, each call writing into outputs filled with
 * NaN, so that an element no thread wrote cannot pass (a run context's own
 * output may hold the values an earlier one left in the same memory): one
 * thread within rtol / atol of the reference kernels and without reference
 * steps, more threads bit for bit the one-thread outputs. */
static void check_thread_splits(tp_program *p, tp_tensor **x, int n_x, int n_out, double rtol, double atol,
                                const char *what) {
    enum { MAX_OUT = 8 };
    CHECK(n_out <= MAX_OUT);
    tp_tensor *ref[MAX_OUT] = {NULL}, *one[MAX_OUT] = {NULL};
    const int best = (int)tp_cpu_level_supported();
    for (int level = TP_CPU_REFERENCE; p && n_out <= MAX_OUT && level <= best;
         level = level == TP_CPU_REFERENCE ? best : level + 1)
        for (int threads = 1; threads <= (level == TP_CPU_REFERENCE ? 1 : 4); threads++) {
            const char *ln = tp_cpu_level_name((tp_cpu_level)level);
            tp_run_options opt;
            tp_run_options_init(&opt);
            opt.cpu_level = (tp_cpu_level)level;
            opt.num_threads = threads;
            tp_run *r = NULL;
            CHECK_OK(tp_run_new(p, &opt, &r));
            tp_tensor *got[MAX_OUT] = {NULL};
            if (r) CHECK_OK(tp_run_execute(r, x, n_x, NULL, 0));
            for (int k = 0; r && k < n_out; k++)
                if (tp_run_output(r, k)) CHECK_OK(tp_tensor_clone(tp_run_output(r, k), &got[k]));
            for (int rep = 0; r && rep < 2; rep++) {
                for (int k = 0; k < n_out; k++) {
                    float *v = got[k] ? tp_tensor_data(got[k]) : NULL;
                    for (int64_t e = 0; v && e < tp_tensor_numel(got[k]); e++) v[e] = NAN;
                }
                CHECK_OK(tp_run_execute(r, x, n_x, got, n_out));
            }
            tp_run_stats st = {0};
            if (r) tp_run_get_stats(r, &st);
            CHECK_MSG(level == TP_CPU_REFERENCE || st.n_reference == 0, "%s [%s]: %d reference steps", what, ln,
                      (int)st.n_reference);
            for (int k = 0; k < n_out; k++) {
                if (!got[k]) continue;
                if (level == TP_CPU_REFERENCE) {
                    ref[k] = got[k];
                    got[k] = NULL;
                } else if (threads == 1) {
                    CHECK_MSG(same_tensor(got[k], ref[k], rtol, atol), "%s: output %d [%s]: 1 thread against the reference",
                              what, k, ln);
                    tp_tensor_free(one[k]);
                    one[k] = got[k];
                    got[k] = NULL;
                } else {
                    CHECK_MSG(one[k] && tp_tensor_numel(got[k]) == tp_tensor_numel(one[k]) &&
                                  !memcmp(tp_tensor_data(got[k]), tp_tensor_data(one[k]),
                                          (size_t)tp_tensor_numel(one[k]) * sizeof(float)),
                              "%s: output %d [%s]: %d threads differ from 1", what, k, ln, threads);
                }
            }
            free_tensors(got, n_out);
            tp_run_free(r);
        }
    free_tensors(ref, n_out);
    free_tensors(one, n_out);
}

/* float32 products split among 2-4 threads that claim their work at run
 * time (threadpool.h): a batch of six products (each thread takes whole
 * products: its own from the front, the others' from their backs) and
 * single products cut by rows and by columns; each bit for bit the
 * one-thread result, and that within tolerance of the reference kernel. */
TEST(test_claimed_products) {
    static const struct {
        half_prog kind;
        int64_t m, k, n;
    } cases[] = {{HP_MATMUL, 70, 96, 130}, {HP_MATMUL, 7, 300, 500}, {HP_LINEAR, 300, 200, 100},
                 {HP_LINEAR, 40, 700, 900}, {HP_ADDMM, 123, 257, 75}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tp_tensor *x[4] = {NULL, NULL, NULL, NULL};
        int n_x = 0;
        tp_program *p = half_program(cases[c].kind, TP_FLOAT32, cases[c].m, cases[c].k, cases[c].n, 700 + (uint32_t)c, x,
                                     &n_x);
        char what[32];
        snprintf(what, sizeof what, "case %zu", c);
        check_thread_splits(p, x, n_x, 1, 1e-5, 1e-4, what);
        free_tensors(x, n_x);
        tp_program_free(p);
    }
}

/* Elementwise and row steps hand out their work at run time (threadpool.h,
 * tp__range_walk): gelu and x * 0.5 over one run, an add broadcasting a row
 * (rows of the output), softmax, layer_norm and a sum over rows, at 2-4
 * threads, into outputs filled with NaN (an element no piece wrote cannot
 * pass): bit for bit the one-thread results, and those within tolerance
 * of the reference kernels. */
TEST(test_claimed_rows) {
    enum { R = 48, C = 4100, NO = 6 };
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    if (!g) return;
    tp_node *x = placeholder_dt(g, "x", TP_FLOAT32, 2, (int64_t[]){R, C});
    tp_node *w = placeholder_dt(g, "w", TP_FLOAT32, 1, (int64_t[]){C});
    tp_node *o[NO];
    o[0] = call(g, TP_OP_GELU, 1, (tp_value[]){N(x)});
    o[1] = call(g, TP_OP_MUL, 2, (tp_value[]){N(x), tp_value_float(0.5)});
    o[2] = call(g, TP_OP_ADD, 2, (tp_value[]){N(o[0]), N(w)});
    o[3] = call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(x), tp_value_int(-1)});
    tp_value shape = int_list(1, (int64_t[]){C});
    o[4] = call(g, TP_OP_LAYER_NORM, 5, (tp_value[]){N(x), shape, N(w), N(w), tp_value_float(1e-5)});
    tp_value_clear(&shape);
    tp_value dims = int_list(1, (int64_t[]){-1});
    o[5] = call(g, TP_OP_SUM, 2, (tp_value[]){N(x), dims});
    tp_value_clear(&dims);
    output_nodes(g, NO, o);
    tp_signature *sig = NULL;
    CHECK_OK(tp_signature_new(&sig));
    CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(sig, TP_INPUT_USER_INPUT, tp_arg_tensor("w"), NULL, TP_PERSISTENT_UNSET));
    for (int i = 0; i < NO; i++)
        CHECK_OK(tp_signature_add_output(sig, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(o[i])), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, sig, &p));
    tp_tensor *in[2] = {rand_tensor(2, (int64_t[]){R, C}, 11, 3.0f), rand_tensor(1, (int64_t[]){C}, 12, 1.0f)};
    if (in[0] && in[1]) check_thread_splits(p, in, 2, NO, 1e-5, 1e-5, "rows");
    free_tensors(in, 2);
    tp_program_free(p);
}

/* bfloat16 and float16 products run the float32 GEMM (issue #10 item 6):
 * odd sizes, constant and input weights and biases, broadcast batches, a
 * transposed operand, addmm; against the reference kernel. */
TEST(test_half_products) {
    /* odd K (a last pair of one), K of one block and of three (the
     * float32 partial sums), edge panels of 16-48 columns, rows split
     * between threads (70 rows, 3 panels) */
    static const int64_t shapes[][3] = {{1, 7, 17}, {33, 255, 7}, {17, 64, 33}, {5, 1, 9}, {70, 300, 130},
                                        {40, 1101, 70}};
    const tp_dtype dts[2] = {TP_BFLOAT16, TP_FLOAT16};
    uint32_t seed = 900;
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int kind = HP_LINEAR; kind <= HP_ADDMM; kind++, seed += 10)
                half_case((half_prog)kind, dts[d], shapes[i][0], shapes[i][1], shapes[i][2], seed);
}

/* tp__half_widen / tp__half_round for bfloat16 (AVX2 where the CPU has it,
 * else a loop) against the one-value conversions tp__bf16_to_f32 /
 * tp__f32_to_bf16: every bfloat16 value widened; every bfloat16 value with
 * low halves 0, 0x7fff, 0x8000 (a tie), 0x8001 and 0xffff (rounding
 * carries into the exponent and to infinity, NaN payloads kept quiet) and
 * 2^20 random floats rounded; at lengths 1 to 19 and from odd offsets, so
 * the vector loop and its scalar tail both run; and the AVX-512
 * conversions of the 16-bit depthwise path (conv_dw16_avx512.c) for
 * bfloat16 and float16 on the same values, where the CPU has AVX-512. */
TEST(test_bf16_conversions) {
    enum { NB = 65536, NR = NB * 5 + (1 << 20) };
    uint16_t *h = malloc(NB * sizeof *h), *r16 = malloc(NR * sizeof *r16);
    float *w = malloc(NB * sizeof *w), *f = malloc(NR * sizeof *f);
    if (!h || !r16 || !w || !f) {
        CHECK(false);
        free(h), free(r16), free(w), free(f);
        return;
    }
    for (int i = 0; i < NB; i++) h[i] = (uint16_t)i;
    tp__half_widen(h, NB, TP_HALF_BF16, w);
    int bad = 0;
    for (int i = 0; i < NB; i++) {
        float want = tp__bf16_to_f32(h[i]);
        bad += memcmp(&w[i], &want, 4) != 0;
    }
    CHECK_MSG(bad == 0, "%d bfloat16 values widened wrongly", bad);
    static const uint32_t lows[5] = {0, 0x7fff, 0x8000, 0x8001, 0xffff};
    uint32_t seed = 12345;
    for (int i = 0; i < NR; i++) {
        uint32_t bits;
        if (i < NB * 5) {
            bits = (uint32_t)(i / 5) << 16 | lows[i % 5];
        } else {
            seed = seed * 1664525u + 1013904223u;
            bits = seed;
        }
        memcpy(&f[i], &bits, 4);
    }
    tp__half_round(f, NR, TP_HALF_BF16, r16);
    bad = 0;
    for (int i = 0; i < NR; i++) bad += r16[i] != tp__f32_to_bf16(f[i]);
    CHECK_MSG(bad == 0, "%d floats rounded to bfloat16 wrongly", bad);
    /* short rows from odd offsets: the tails */
    for (int n = 1; n < 20; n++)
        for (int off = 0; off < 3; off++) {
            uint16_t got[20];
            float wide[20];
            tp__half_round(f + 7 * n + off, n, TP_HALF_BF16, got);
            tp__half_widen(h + 11 * n + off, n, TP_HALF_BF16, wide);
            for (int j = 0; j < n; j++) {
                const float want = tp__bf16_to_f32(h[11 * n + off + j]);
                CHECK_MSG(got[j] == tp__f32_to_bf16(f[7 * n + off + j]) && memcmp(&wide[j], &want, 4) == 0,
                          "length %d offset %d element %d", n, off, j);
            }
        }
    /* the AVX-512 conversions of the 16-bit depthwise path, bfloat16 and
     * float16, the same way (a float16 NaN keeps its payload's top bits) */
    for (int kind = TP_HALF_BF16; kind <= TP_HALF_F16 && tp_cpu_level_supported() >= TP_CPU_AVX512; kind++) {
        tp__dw16_convert_avx512(h, w, f, r16, NB, kind);
        int bw = 0, br = 0;
        for (int i = 0; i < NB; i++) {
            const float want = kind == TP_HALF_BF16 ? tp__bf16_to_f32(h[i]) : tp__f16_to_f32(h[i]);
            bw += memcmp(&w[i], &want, 4) != 0 && !(want != want && w[i] != w[i]);
            br += r16[i] != (kind == TP_HALF_BF16 ? tp__f32_to_bf16(f[i]) : tp__f32_to_f16(f[i]));
        }
        for (int o = NB; o < NR; o += NB) { /* the rest of the floats, NB at a time (h and w hold NB) */
            tp__dw16_convert_avx512(h, w, f + o, r16, NB, kind);
            for (int i = 0; i < NB; i++)
                br += r16[i] != (kind == TP_HALF_BF16 ? tp__f32_to_bf16(f[o + i]) : tp__f32_to_f16(f[o + i]));
        }
        CHECK_MSG(bw == 0 && br == 0, "%s, AVX-512: %d values widened and %d rounded wrongly",
                  kind == TP_HALF_BF16 ? "bfloat16" : "float16", bw, br);
    }
    free(h), free(r16), free(w), free(f);
}

/* Planning and running 16-bit programs with every allocation failing in
 * turn (fail_alloc.h): TP_ERR_NOMEM each time, nothing leaked. The plans
 * allocate what float32 ones do not: bfloat16 weights packed in K pairs
 * for vdpbf16ps and their float32 bias, convolution weights widened or
 * repacked once, the per-batch B panels and float32 partial sums in the
 * workspace, fused 16-bit chains (and a float32 one: the chain's
 * fusion, which once swallowed its out-of-memory error, is shared) and
 * epilogues. Each program at the CPU's
 * level (vdpbf16ps where it has AVX-512-BF16) and at AVX2 (the widened
 * float32 paths), with two threads; a copy of the program each time (a
 * program keeps the plans it made). */
TEST(test_half_alloc_failures) {
    enum { CASES = 8 };
    for (int c = 0; c < CASES; c++) {
        alloc_sweep h = {0};
        const char *what = "";
        switch (c) {
        case 0:
            h.p = half_conv_program(TP_BFLOAT16, h.x), h.n_x = HALF_CONV_INPUTS;
            what = "bfloat16 convolutions and pools";
            break;
        case 1:
            h.p = half_conv_program(TP_FLOAT16, h.x), h.n_x = HALF_CONV_INPUTS;
            what = "float16 convolutions and pools";
            break;
        case 2:
            h.p = half_program(HP_LINEAR, TP_BFLOAT16, 33, 1101, 70, 11, h.x, &h.n_x);
            what = "bfloat16 linear, constant weights, K of three blocks";
            break;
        case 3:
            h.p = half_program(HP_MATMUL, TP_BFLOAT16, 17, 64, 33, 12, h.x, &h.n_x);
            what = "bfloat16 batched matmul (B packed per batch)";
            break;
        case 4:
            h.p = half_program(HP_LINEAR, TP_FLOAT16, 33, 255, 70, 13, h.x, &h.n_x);
            what = "float16 linear (widened)";
            break;
        case 5:
        case 6: { /* the chain's fusion is the float32 one's: both swept */
            const tp_dtype dt = c == 5 ? TP_BFLOAT16 : TP_FLOAT32;
            h.p = half_chain(dt, false);
            h.x[0] = rand_tensor_dt(dt, 2, (int64_t[]){9, 2500}, 14, 6.0f);
            h.n_x = 1;
            what = c == 5 ? "a fused bfloat16 chain" : "a fused float32 chain";
            break;
        }
        default:
            h.p = half_epilogue(false, false, 300, 130);
            h.x[0] = rand_tensor_dt(TP_BFLOAT16, 2, (int64_t[]){37, 300}, 15, 2.0f);
            h.x[1] = rand_tensor_dt(TP_BFLOAT16, 2, (int64_t[]){37, 130}, 16, 8.0f);
            h.x[2] = rand_tensor_dt(TP_BFLOAT16, 3, (int64_t[]){2, 5, 300}, 17, 2.0f);
            h.n_x = 3;
            what = "a bfloat16 product with its bias and residual fused";
            break;
        }
        for (int l = 0; h.p && l < 2; l++) {
            h.level = l == 0 ? TP_CPU_AUTO : TP_CPU_AVX2;
            if (h.level == TP_CPU_AVX2 && tp_cpu_level_supported() < TP_CPU_AVX2) continue;
            long n = check_alloc_failures(what, sweep_plan_and_run, &h);
            printf("  %s [%s]: %ld allocations, each failed in turn\n", what, l == 0 ? "cpu" : "avx2", n);
            CHECK(n > 0);
        }
        CHECK_MSG(h.p != NULL, "%s: no program", what);
        free_tensors(h.x, h.n_x);
        tp_program_free(h.p);
    }
}


/* ---- The attention / silu / gelu rewrites and step fusion --------------
 * Cases from a review (test_rewrites_skip_writes_in_place,
 * _follow_recorded_kinds, _scalars_and_fused_reads, _half_runs and
 * test_attention_rewrite_float16 each failed before these guards): writes in place inside a matched pattern (no rewrite in a graph
 * that writes in place), calls on other ranks or dtypes than the graph
 * recorded (only plans of the recorded kinds are rewritten), one-element
 * constants of higher rank (the rewrite would drop the broadcast), float16
 * attention (float32 only), and a fused residual or bias written in place
 * between its producer and consumer (not fused).
 * A program of named inputs (a name "p_X" is the parameter X, anything else
 * a user input) whose graph records meta dtype/sizes, built by fn; it runs
 * on the given run tensors (other sizes/dtypes than recorded allowed: the
 * program has no examples or dim rules) at the reference level and at every
 * CPU level on 1 thread: statuses must equal, outputs agree within rtol/atol
 * (NaN matches NaN). */
typedef struct rw_in {
    const char *name;
    tp_dtype meta_dt;
    int ndim;
    int64_t sizes[4];
    tp_tensor *run; /* user input value, or the parameter's state */
} rw_in;
typedef int (*rw_graph_fn)(tp_graph *g, tp_node **in, tp_node **outs);
static bool rw_sweep = false; /* also an allocation-failure sweep over planning and running */

static int rw_rewrites(tp_program *p) {
    tp_graph *copy = NULL;
    int a = 0, s = 0, ge = 0;
    CHECK_OK(tp_graph_copy(tp_program_graph(p), &copy));
    if (copy) {
        CHECK_OK(tp__rewrite_attention(p, copy, &a));
        CHECK_OK(tp__rewrite_silu(copy, &s));
        CHECK_OK(tp__rewrite_gelu(p, copy, &ge));
        CHECK_OK(tp_graph_lint(copy));
    }
    tp_graph_free(copy);
    return a + s + ge;
}

static void check_rw_case(const char *what, rw_in *ins, int n_ins, rw_graph_fn fn, double rtol, double atol,
                          int want_rewrites) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    if (!g) return;
    tp_node *in[8];
    for (int i = 0; i < n_ins; i++) in[i] = placeholder_dt(g, ins[i].name, ins[i].meta_dt, ins[i].ndim, ins[i].sizes);
    tp_node *outs[4];
    int n_out = fn(g, in, outs);
    output_nodes(g, n_out, outs);
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    int n_user = 0;
    tp_tensor *user[8];
    for (int i = 0; i < n_ins; i++) {
        bool param = strncmp(ins[i].name, "p_", 2) == 0;
        CHECK_OK(tp_signature_add_input(s, param ? TP_INPUT_PARAMETER : TP_INPUT_USER_INPUT, tp_arg_tensor(ins[i].name),
                                        param ? ins[i].name + 2 : NULL, TP_PERSISTENT_UNSET));
        if (!param) user[n_user++] = ins[i].run;
    }
    for (int i = 0; i < n_out; i++)
        CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(outs[i])), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    if (!p) return;
    for (int i = 0; i < n_ins; i++)
        if (strncmp(ins[i].name, "p_", 2) == 0)
            CHECK_OK(tp_program_set_state(p, ins[i].name + 2, TP_STATE_PARAMETER, ins[i].run, true));
    if (want_rewrites >= 0) {
        int n = rw_rewrites(p);
        CHECK_MSG(n == want_rewrites, "%s: %d rewrites, expected %d", what, n, want_rewrites);
    }
    tp_tensor *ref[4] = {NULL, NULL, NULL, NULL};
    tp_status ref_st = TP_OK;
    for (int level = TP_CPU_REFERENCE; level <= (int)tp_cpu_level_supported(); level++) {
        /* fresh copy each level: state written in place starts equal */
        tp_program *pc = NULL;
        CHECK_OK(tp_program_copy(p, &pc));
        if (!pc) break;
        tp_run_options opt;
        tp_run_options_init(&opt);
        opt.cpu_level = (tp_cpu_level)level;
        opt.num_threads = 1;
        tp_run *r = NULL;
        tp_status st = tp_run_new(pc, &opt, &r);
        if (st == TP_OK) st = tp_run_execute(r, user, n_user, NULL, 0);
        char err[256];
        snprintf(err, sizeof err, "%s", st == TP_OK ? "" : tp_last_error());
        tp_clear_error();
        if (level == TP_CPU_REFERENCE) {
            ref_st = st;
            if (st == TP_OK) {
                CHECK(tp_run_num_outputs(r) == n_out);
                for (int i = 0; i < n_out; i++) CHECK_OK(tp_tensor_clone(tp_run_output(r, i), &ref[i]));
            }
        } else {
            CHECK_MSG(st == ref_st, "%s [%s]: status %d (%s), reference %d", what, tp_cpu_level_name((tp_cpu_level)level),
                      (int)st, err, (int)ref_st);
            if (st == TP_OK && ref_st == TP_OK)
                for (int i = 0; i < n_out; i++) {
                    const tp_tensor *o = tp_run_output(r, i);
                    bool same = o && ref[i] && tp_tensor_ndim(o) == tp_tensor_ndim(ref[i]) &&
                                tp_tensor_dtype(o) == tp_tensor_dtype(ref[i]) && same_tensor(o, ref[i], rtol, atol);
                    CHECK_MSG(same, "%s [%s]: output %d differs from the reference (rank %d, reference rank %d)", what,
                              tp_cpu_level_name((tp_cpu_level)level), i, o ? tp_tensor_ndim(o) : -1,
                              ref[i] ? tp_tensor_ndim(ref[i]) : -1);
                }
        }
        tp_run_free(r);
        tp_program_free(pc);
    }
    free_tensors(ref, n_out);
    if (rw_sweep && n_user <= 4) {
        alloc_sweep h = {.p = p, .n_x = n_user, .level = TP_CPU_AUTO};
        for (int i = 0; i < n_user; i++) h.x[i] = user[i];
        long k = check_alloc_failures(what, sweep_plan_and_run, &h);
        CHECK(k > 0);
        if (getenv("TP_TEST_SHOW_STEPS")) printf("  %s: %ld allocations swept\n", what, k);
    }
    tp_program_free(p);
}

static tp_tensor *fill_tensor(tp_dtype dt, int ndim, const int64_t *sizes, uint32_t seed, float scale) {
    tp_tensor *f = rand_tensor(ndim, sizes, seed, scale), *t = NULL;
    if (!f) return NULL;
    if (dt == TP_FLOAT32) return f;
    CHECK_OK(tp_tensor_to(f, dt, &t));
    tp_tensor_free(f);
    return t;
}

static void free_rw(rw_in *ins, int n) {
    for (int i = 0; i < n; i++) tp_tensor_free(ins[i].run);
}

/* SiLU: t written in place (add_) between sigmoid(t) and t * sigmoid(t):
 * the product reads the new t, the sigmoid the old. */
static int rw_silu_inplace(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *t = call(g, TP_OP_NEG, 1, (tp_value[]){N(in[0])});
    tp_node *sg = call(g, TP_OP_SIGMOID, 1, (tp_value[]){N(t)});
    o[1] = call(g, TP_OP_ADD_, 2, (tp_value[]){N(t), tp_value_float(3.0)});
    o[0] = call(g, TP_OP_MUL, 2, (tp_value[]){N(t), N(sg)});
    return 2;
}
/* GELU (erf form): t written in place between x / sqrt2 and x * (1 + erf) */
static int rw_gelu_inplace(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *t = call(g, TP_OP_NEG, 1, (tp_value[]){N(in[0])});
    tp_node *d = call(g, TP_OP_DIV, 2, (tp_value[]){N(t), tp_value_float(1.4142135623730951)});
    tp_node *e = call(g, TP_OP_ERF, 1, (tp_value[]){N(d)});
    tp_node *a = call(g, TP_OP_ADD, 2, (tp_value[]){N(e), tp_value_float(1.0)});
    o[1] = call(g, TP_OP_ADD_, 2, (tp_value[]){N(t), tp_value_float(3.0)});
    tp_node *m = call(g, TP_OP_MUL, 2, (tp_value[]){N(t), N(a)});
    o[0] = call(g, TP_OP_MUL, 2, (tp_value[]){N(m), tp_value_float(0.5)});
    return 2;
}
/* plain x * sigmoid(x) and gelu chains (rewritten), run on other dtypes than recorded */
static int rw_silu_plain(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *sg = call(g, TP_OP_SIGMOID, 1, (tp_value[]){N(in[0])});
    o[0] = call(g, TP_OP_MUL, 2, (tp_value[]){N(in[0]), N(sg)});
    return 1;
}
static int rw_gelu_plain(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *d = call(g, TP_OP_DIV, 2, (tp_value[]){N(in[0]), tp_value_float(1.4142135623730951)});
    tp_node *e = call(g, TP_OP_ERF, 1, (tp_value[]){N(d)});
    tp_node *a = call(g, TP_OP_ADD, 2, (tp_value[]){N(e), tp_value_float(1.0)});
    tp_node *m = call(g, TP_OP_MUL, 2, (tp_value[]){N(in[0]), N(a)});
    o[0] = call(g, TP_OP_MUL, 2, (tp_value[]){N(m), tp_value_float(0.5)});
    return 1;
}
static int rw_gelu_tanh_plain(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *x = in[0];
    tp_node *c = call(g, TP_OP_POW, 2, (tp_value[]){N(x), tp_value_float(3.0)});
    tp_node *q = call(g, TP_OP_MUL, 2, (tp_value[]){N(c), tp_value_float(0.044715)});
    tp_node *t1 = call(g, TP_OP_ADD, 2, (tp_value[]){N(x), N(q)});
    tp_node *t = call(g, TP_OP_MUL, 2, (tp_value[]){N(t1), tp_value_float(0.7978845608028654)});
    tp_node *th = call(g, TP_OP_TANH, 1, (tp_value[]){N(t)});
    tp_node *a2 = call(g, TP_OP_ADD, 2, (tp_value[]){N(th), tp_value_float(1.0)});
    tp_node *h = call(g, TP_OP_MUL, 2, (tp_value[]){N(x), tp_value_float(0.5)});
    o[0] = call(g, TP_OP_MUL, 2, (tp_value[]){N(h), N(a2)});
    return 1;
}

/* attention softmax(q @ kt / 4, dim) @ v from inputs q, kt, v */
static int rw_attn_dim1(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *s = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(in[0]), N(in[1])});
    tp_node *sc = call(g, TP_OP_DIV, 2, (tp_value[]){N(s), tp_value_float(4.0)});
    tp_node *p = call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(sc), tp_value_int(1)});
    o[0] = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(p), N(in[2])});
    return 1;
}
static int rw_attn_last(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *s = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(in[0]), N(in[1])});
    tp_node *sc = call(g, TP_OP_DIV, 2, (tp_value[]){N(s), tp_value_float(4.0)});
    tp_node *p = call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(sc), tp_value_int(-1)});
    o[0] = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(p), N(in[2])});
    return 1;
}
/* q' = neg(q) written in place (add_) after q' @ kt */
static int rw_attn_inplace(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *q = call(g, TP_OP_NEG, 1, (tp_value[]){N(in[0])});
    tp_node *s = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(q), N(in[1])});
    o[1] = call(g, TP_OP_MUL_, 2, (tp_value[]){N(q), tp_value_float(3.0)});
    tp_node *sc = call(g, TP_OP_DIV, 2, (tp_value[]){N(s), tp_value_float(4.0)});
    tp_node *p = call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(sc), tp_value_int(-1)});
    o[0] = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(p), N(in[2])});
    return 2;
}
/* the scale is a parameter (in[3]) the program doubles in place before dividing by it */
static int rw_attn_param_scale(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *s = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(in[0]), N(in[1])});
    o[1] = call(g, TP_OP_MUL_, 2, (tp_value[]){N(in[3]), tp_value_float(4.0)});
    tp_node *sc = call(g, TP_OP_DIV, 2, (tp_value[]){N(s), N(in[3])});
    tp_node *p = call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(sc), tp_value_int(-1)});
    o[0] = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(p), N(in[2])});
    return 2;
}

enum { AB = 2, AL = 1024, AE = 16 }; /* scores 2 x 1024 x 1024 floats: 8 MiB, rewritten */
static void attn_inputs(rw_in *ins, tp_dtype dt, float scale) {
    ins[0] = (rw_in){"q", TP_FLOAT32, 3, {AB, AL, AE}, fill_tensor(dt, 3, (int64_t[]){AB, AL, AE}, 1, scale)};
    ins[1] = (rw_in){"kt", TP_FLOAT32, 3, {AB, AE, AL}, fill_tensor(dt, 3, (int64_t[]){AB, AE, AL}, 2, scale)};
    ins[2] = (rw_in){"v", TP_FLOAT32, 3, {AB, AL, AE}, fill_tensor(dt, 3, (int64_t[]){AB, AL, AE}, 3, 1.0f)};
}

TEST(test_rewrites_skip_writes_in_place) {
    rw_in in[1] = {{"x", TP_FLOAT32, 2, {8, 16}, fill_tensor(TP_FLOAT32, 2, (int64_t[]){8, 16}, 5, 4.0f)}};
    check_rw_case("silu: t written in place between sigmoid(t) and the product", in, 1, rw_silu_inplace, 1e-5, 1e-6, 0);
    check_rw_case("gelu: t written in place inside the chain", in, 1, rw_gelu_inplace, 1e-5, 1e-6, 0);
    free_rw(in, 1);
    rw_in a[3];
    attn_inputs(a, TP_FLOAT32, 2.0f);
    check_rw_case("attention: q written in place between q @ kt and p @ v", a, 3, rw_attn_inplace, 1e-4, 1e-5, 0);
    free_rw(a, 3);
    rw_in b[4];
    attn_inputs(b, TP_FLOAT32, 2.0f);
    tp_tensor *sc = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 0, NULL, (float[]){4.0f}, &sc));
    b[3] = (rw_in){"p_scale", TP_FLOAT32, 0, {0}, sc};
    check_rw_case("attention: a parameter scale written in place before the division", b, 4, rw_attn_param_scale, 1e-4, 1e-5, 0);
    free_rw(b, 4);
}

TEST(test_rewrites_follow_recorded_kinds) {
    /* the graph records rank-2 q [1024, 16], kt [16, 2048] (8 MiB of scores)
     * and softmax(., 1) = its last dim; called on rank 3 (no examples, no
     * dim rules), dim 1 is not the last dim */
    rw_in a[3] = {
        {"q", TP_FLOAT32, 2, {1024, 16}, fill_tensor(TP_FLOAT32, 3, (int64_t[]){2, 8, 4}, 1, 2.0f)},
        {"kt", TP_FLOAT32, 2, {16, 2048}, fill_tensor(TP_FLOAT32, 3, (int64_t[]){2, 4, 8}, 2, 2.0f)},
        {"v", TP_FLOAT32, 2, {2048, 16}, fill_tensor(TP_FLOAT32, 3, (int64_t[]){2, 8, 4}, 3, 2.0f)},
    };
    check_rw_case("attention: softmax(., 1) recorded as the last dim, called on rank 3", a, 3, rw_attn_dim1, 1e-4, 1e-5, -1);
    free_rw(a, 3);
    /* called with a 1-D query: matmul takes it, attention does not */
    rw_in b[3] = {
        {"q", TP_FLOAT32, 2, {1024, 16}, fill_tensor(TP_FLOAT32, 1, (int64_t[]){4}, 1, 2.0f)},
        {"kt", TP_FLOAT32, 2, {16, 2048}, fill_tensor(TP_FLOAT32, 2, (int64_t[]){4, 8}, 2, 2.0f)},
        {"v", TP_FLOAT32, 2, {2048, 16}, fill_tensor(TP_FLOAT32, 2, (int64_t[]){8, 4}, 3, 2.0f)},
    };
    check_rw_case("attention: called with a 1-D query", b, 3, rw_attn_last, 1e-4, 1e-5, -1);
    free_rw(b, 3);
    /* silu / gelu recorded float32, called on int64 */
    rw_in c[1] = {{"x", TP_FLOAT32, 2, {8, 16}, fill_tensor(TP_INT64, 2, (int64_t[]){8, 16}, 5, 8.0f)}};
    check_rw_case("silu recorded float32, called on int64", c, 1, rw_silu_plain, 1e-5, 1e-6, -1);
    check_rw_case("gelu recorded float32, called on int64", c, 1, rw_gelu_plain, 1e-5, 1e-6, -1);
    check_rw_case("gelu (tanh) recorded float32, called on int64", c, 1, rw_gelu_tanh_plain, 1e-5, 1e-6, -1);
    free_rw(c, 1);
    rw_in d[1] = {{"x", TP_FLOAT32, 2, {8, 16}, fill_tensor(TP_FLOAT64, 2, (int64_t[]){8, 16}, 5, 8.0f)}};
    check_rw_case("silu recorded float32, called on float64", d, 1, rw_silu_plain, 1e-12, 1e-14, 1);
    check_rw_case("gelu recorded float32, called on float64", d, 1, rw_gelu_plain, 1e-12, 1e-14, 1);
    check_rw_case("gelu (tanh) recorded float32, called on float64", d, 1, rw_gelu_tanh_plain, 1e-12, 1e-14, 1);
    free_rw(d, 1);
    rw_in e[3];
    attn_inputs(e, TP_FLOAT64, 2.0f);
    check_rw_case("attention recorded float32, called on float64", e, 3, rw_attn_last, 1e-10, 1e-12, 1);
    free_rw(e, 3);
    attn_inputs(e, TP_INT64, 8.0f);
    check_rw_case("attention recorded float32, called on int64", e, 3, rw_attn_last, 1e-5, 1e-6, 1);
    free_rw(e, 3);
}


/* attention: 1-element float32 parameter scale of shape [1, 1, 1, 1]: the
 * product broadcasts the rank-3 scores to rank 4 */
static int rw_attn_scale_rank(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *s = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(in[0]), N(in[1])});
    tp_node *sc = call(g, TP_OP_MUL, 2, (tp_value[]){N(s), N(in[3])});
    tp_node *p = call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(sc), tp_value_int(-1)});
    o[0] = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(p), N(in[2])});
    return 1;
}
/* gelu whose 0.5 is a [1, 1, 1] float32 parameter (in[1]) */
static int rw_gelu_half_rank(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *d = call(g, TP_OP_DIV, 2, (tp_value[]){N(in[0]), tp_value_float(1.4142135623730951)});
    tp_node *e = call(g, TP_OP_ERF, 1, (tp_value[]){N(d)});
    tp_node *a = call(g, TP_OP_ADD, 2, (tp_value[]){N(e), tp_value_float(1.0)});
    tp_node *m = call(g, TP_OP_MUL, 2, (tp_value[]){N(in[0]), N(a)});
    o[0] = call(g, TP_OP_MUL, 2, (tp_value[]){N(m), N(in[1])});
    return 1;
}
/* head / batch broadcasts: q [2, 1, L, E], kt [1, 4, E, S] or [E, S], v [4, S, E] */
static int rw_attn_bcast(tp_graph *g, tp_node **in, tp_node **o) { return rw_attn_last(g, in, o); }

/* step fusion: a residual r written in place (add_) between the GEMM and the add reading r */
static int rw_fuse_residual_inplace(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *r = call(g, TP_OP_NEG, 1, (tp_value[]){N(in[0])});
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(in[0]), N(in[1]), N(in[2])});
    o[1] = call(g, TP_OP_ADD_, 2, (tp_value[]){N(r), tp_value_float(100.0)});
    o[0] = call(g, TP_OP_ADD, 2, (tp_value[]){N(l), N(r)});
    return 2;
}
/* step fusion: a bias row b written in place between matmul(x, w) and + b */
static int rw_fuse_bias_inplace(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *bb = call(g, TP_OP_NEG, 1, (tp_value[]){N(in[2])});
    tp_node *l = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(in[0]), N(in[1])});
    o[1] = call(g, TP_OP_ADD_, 2, (tp_value[]){N(bb), tp_value_float(100.0)});
    o[0] = call(g, TP_OP_ADD, 2, (tp_value[]){N(l), N(bb)});
    return 2;
}

TEST(test_rewrites_scalars_and_fused_reads) {
    rw_in a[4];
    attn_inputs(a, TP_FLOAT32, 2.0f);
    tp_tensor *sc = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 4, (int64_t[]){1, 1, 1, 1}, (float[]){0.25f}, &sc));
    a[3] = (rw_in){"p_scale", TP_FLOAT32, 4, {1, 1, 1, 1}, sc};
    check_rw_case("attention: a [1, 1, 1, 1] scale broadcasts the scores to rank 4", a, 4, rw_attn_scale_rank, 1e-4, 1e-5, 0);
    free_rw(a, 4);
    tp_tensor *h = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 3, (int64_t[]){1, 1, 1}, (float[]){0.5f}, &h));
    rw_in b[2] = {{"x", TP_FLOAT32, 2, {8, 16}, fill_tensor(TP_FLOAT32, 2, (int64_t[]){8, 16}, 5, 4.0f)},
                  {"p_half", TP_FLOAT32, 3, {1, 1, 1}, h}};
    check_rw_case("gelu: a [1, 1, 1] factor 0.5 broadcasts x to rank 3", b, 2, rw_gelu_half_rank, 1e-5, 1e-6, 0);
    free_rw(b, 2);
    /* broadcasts of batch and heads (fine) */
    rw_in c[3] = {
        {"q", TP_FLOAT32, 4, {2, 1, 512, 16}, fill_tensor(TP_FLOAT32, 4, (int64_t[]){2, 1, 512, 16}, 1, 2.0f)},
        {"kt", TP_FLOAT32, 4, {1, 4, 16, 512}, fill_tensor(TP_FLOAT32, 4, (int64_t[]){1, 4, 16, 512}, 2, 2.0f)},
        {"v", TP_FLOAT32, 3, {4, 512, 16}, fill_tensor(TP_FLOAT32, 3, (int64_t[]){4, 512, 16}, 3, 2.0f)},
    };
    check_rw_case("attention: batch and head broadcasts", c, 3, rw_attn_bcast, 1e-4, 1e-5, 1);
    free_rw(c, 3);
    rw_in d[3] = {
        {"q", TP_FLOAT32, 3, {2, 1024, 16}, fill_tensor(TP_FLOAT32, 3, (int64_t[]){2, 1024, 16}, 1, 2.0f)},
        {"kt", TP_FLOAT32, 2, {16, 1024}, fill_tensor(TP_FLOAT32, 2, (int64_t[]){16, 1024}, 2, 2.0f)},
        {"v", TP_FLOAT32, 2, {1024, 8}, fill_tensor(TP_FLOAT32, 2, (int64_t[]){1024, 8}, 3, 2.0f)},
    };
    check_rw_case("attention: 2-D kt and v", d, 3, rw_attn_bcast, 1e-4, 1e-5, 1);
    free_rw(d, 3);
    /* step fusion */
    rw_in fu[3] = {{"x", TP_FLOAT32, 2, {64, 48}, fill_tensor(TP_FLOAT32, 2, (int64_t[]){64, 48}, 73, 4.0f)},
                   {"p_w", TP_FLOAT32, 2, {48, 48}, fill_tensor(TP_FLOAT32, 2, (int64_t[]){48, 48}, 71, 0.5f)},
                   {"p_b", TP_FLOAT32, 1, {48}, fill_tensor(TP_FLOAT32, 1, (int64_t[]){48}, 72, 0.5f)}};
    check_rw_case("fusion: residual written in place between GEMM and add", fu, 3, rw_fuse_residual_inplace, 1e-5, 1e-5, 0);
    check_rw_case("fusion: bias row written in place between matmul and add", fu, 3, rw_fuse_bias_inplace, 1e-5, 1e-5, 0);
    free_rw(fu, 3);
}

TEST(test_rewrites_nonfinite) {
    const float vals[8] = {-INFINITY, INFINITY, NAN, -1e13f, 1e13f, -20.0f, 20.0f, -3e38f};
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 2, (int64_t[]){1, 8}, vals, &t));
    rw_in in[1] = {{"x", TP_FLOAT32, 2, {1, 8}, t}};
    check_rw_case("gelu erf at non-finite / huge x", in, 1, rw_gelu_plain, 1e-5, 1e-6, 1);
    check_rw_case("gelu tanh at non-finite / huge x", in, 1, rw_gelu_tanh_plain, 1e-5, 1e-6, 1);
    check_rw_case("silu at non-finite / huge x", in, 1, rw_silu_plain, 1e-5, 1e-6, 1);
    free_rw(in, 1);
}


/* In-place reuse (plan_memory): an elementwise or row step whose input t
 * dies there may write its output over t, but not when another of its
 * inputs is a view of t (a row broadcast, a transpose, a layer_norm
 * weight): the output's first rows overwrote t before the view read them
 * (each case gave wrong values before). softmax after the step keeps its
 * output in the arena. */
static int ip_mul_row_view(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *t = call(g, TP_OP_NEG, 1, (tp_value[]){N(in[0])});
    tp_node *row = call(g, TP_OP_SELECT, 3, (tp_value[]){N(t), tp_value_int(0), tp_value_int(0)});
    tp_node *m = call(g, TP_OP_MUL, 2, (tp_value[]){N(t), N(row)});
    o[0] = call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(m), tp_value_int(-1)});
    return 1;
}
static int ip_add_transpose(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *t = call(g, TP_OP_NEG, 1, (tp_value[]){N(in[0])});
    tp_node *tt = call(g, TP_OP_TRANSPOSE, 3, (tp_value[]){N(t), tp_value_int(0), tp_value_int(1)});
    tp_node *a = call(g, TP_OP_ADD, 2, (tp_value[]){N(t), N(tt)});
    o[0] = call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(a), tp_value_int(-1)});
    return 1;
}
static int ip_layer_norm_row_weight(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *t = call(g, TP_OP_NEG, 1, (tp_value[]){N(in[0])});
    tp_node *row = call(g, TP_OP_SELECT, 3, (tp_value[]){N(t), tp_value_int(0), tp_value_int(0)});
    tp_value shape = int_list(1, (int64_t[]){16});
    tp_node *ln = call(g, TP_OP_LAYER_NORM, 5, (tp_value[]){N(t), shape, N(row), tp_value_none(), tp_value_float(1e-5)});
    tp_value_clear(&shape);
    o[0] = call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(ln), tp_value_int(-1)});
    return 1;
}

TEST(test_in_place_not_over_a_viewed_input) {
    rw_in in[1] = {{"x", TP_FLOAT32, 2, {16, 16}, fill_tensor(TP_FLOAT32, 2, (int64_t[]){16, 16}, 5, 4.0f)}};
    check_rw_case("t * t[0]", in, 1, ip_mul_row_view, 1e-5, 1e-6, -1);
    check_rw_case("t + t.t()", in, 1, ip_add_transpose, 1e-5, 1e-6, -1);
    check_rw_case("layer_norm(t, weight=t[0])", in, 1, ip_layer_norm_row_weight, 1e-5, 1e-6, -1);
    free_rw(in, 1);
}

TEST(test_rewrites_alloc_failures) {
    rw_sweep = true;
    rw_in in[1] = {{"x", TP_FLOAT32, 2, {8, 16}, fill_tensor(TP_FLOAT32, 2, (int64_t[]){8, 16}, 5, 4.0f)}};
    check_rw_case("silu sweep", in, 1, rw_silu_plain, 1e-5, 1e-6, 1);
    check_rw_case("gelu sweep", in, 1, rw_gelu_plain, 1e-5, 1e-6, 1);
    check_rw_case("gelu tanh sweep", in, 1, rw_gelu_tanh_plain, 1e-5, 1e-6, 1);
    free_rw(in, 1);
    rw_in a[3];
    attn_inputs(a, TP_FLOAT32, 2.0f);
    check_rw_case("attention sweep", a, 3, rw_attn_last, 1e-4, 1e-5, 1);
    free_rw(a, 3);
    rw_sweep = false;
}


TEST(test_rewrites_half_runs) {
    for (int k = 0; k < 2; k++) {
        tp_dtype dt = k ? TP_BFLOAT16 : TP_FLOAT16;
        rw_in c[1] = {{"x", TP_FLOAT32, 2, {8, 16}, fill_tensor(dt, 2, (int64_t[]){8, 16}, 5, 8.0f)}};
        check_rw_case(k ? "silu recorded float32, run bf16" : "silu recorded float32, run f16", c, 1, rw_silu_plain, 1e-2, 1e-3, -1);
        check_rw_case(k ? "gelu recorded float32, run bf16" : "gelu recorded float32, run f16", c, 1, rw_gelu_plain, 1e-2, 1e-3, -1);
        check_rw_case(k ? "gelu tanh recorded float32, run bf16" : "gelu tanh recorded float32, run f16", c, 1, rw_gelu_tanh_plain, 1e-2, 1e-3, -1);
        free_rw(c, 1);
        /* recorded as 16-bit: no rewrite (want 0) */
        rw_in d[1] = {{"x", dt, 2, {8, 16}, fill_tensor(dt, 2, (int64_t[]){8, 16}, 5, 8.0f)}};
        check_rw_case("gelu recorded 16-bit", d, 1, rw_gelu_plain, 1e-2, 1e-3, 0);
        free_rw(d, 1);
    }
}


static int rw_silu_gelu_select(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *l = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(in[0]), N(in[1]), N(in[2])});
    tp_node *sg = call(g, TP_OP_SIGMOID, 1, (tp_value[]){N(l)});
    tp_node *m = call(g, TP_OP_MUL, 2, (tp_value[]){N(sg), N(l)});
    o[0] = call(g, TP_OP_SELECT, 3, (tp_value[]){N(m), tp_value_int(0), tp_value_int(-1)});
    tp_node *l2 = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(in[0]), N(in[1]), N(in[2])});
    tp_node *h = call(g, TP_OP_MUL, 2, (tp_value[]){N(l2), tp_value_float(0.5)});
    tp_node *d = call(g, TP_OP_MUL, 2, (tp_value[]){N(l2), tp_value_float(0.7071067811865476)});
    tp_node *e = call(g, TP_OP_ERF, 1, (tp_value[]){N(d)});
    tp_node *a = call(g, TP_OP_ADD, 2, (tp_value[]){N(e), tp_value_float(1.0)});
    tp_node *gg = call(g, TP_OP_MUL, 2, (tp_value[]){N(a), N(h)});
    o[1] = call(g, TP_OP_SLICE, 4, (tp_value[]){N(gg), tp_value_int(0), tp_value_int(1), tp_value_int(3)});
    return 2;
}
TEST(test_rewrites_then_rows) {
    rw_in fu[3] = {{"x", TP_FLOAT32, 2, {6, 8}, fill_tensor(TP_FLOAT32, 2, (int64_t[]){6, 8}, 73, 4.0f)},
                   {"p_w", TP_FLOAT32, 2, {8, 8}, fill_tensor(TP_FLOAT32, 2, (int64_t[]){8, 8}, 71, 0.5f)},
                   {"p_b", TP_FLOAT32, 1, {8}, fill_tensor(TP_FLOAT32, 1, (int64_t[]){8}, 72, 0.5f)}};
    check_rw_case("silu / gelu rewrites then row selections", fu, 3, rw_silu_gelu_select, 1e-5, 1e-5, 2);
    free_rw(fu, 3);
}


static int rw_attn_noscale_mulscale(tp_graph *g, tp_node **in, tp_node **o) {
    tp_node *s = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(in[0]), N(in[1])});
    tp_node *p = call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(s), tp_value_int(2)});
    o[0] = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(p), N(in[2])});
    tp_node *s2 = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(in[0]), N(in[1])});
    tp_node *sc = call(g, TP_OP_MUL, 2, (tp_value[]){N(s2), tp_value_int(3)});
    tp_node *p2 = call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(sc), tp_value_int(-1)});
    o[1] = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(p2), N(in[2])});
    tp_node *s3 = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(in[0]), N(in[1])});
    tp_node *p3 = call(g, TP_OP_SOFTMAX, 2, (tp_value[]){N(s3), tp_value_int(-1)});
    o[2] = call(g, TP_OP_MATMUL, 2, (tp_value[]){N(p3), N(in[2])});
    o[3] = p3; /* probabilities also an output: stays */
    return 4;
}
TEST(test_attention_rewrite_cases) {
    rw_in a[3];
    attn_inputs(a, TP_FLOAT32, 1.0f);
    check_rw_case("attention: no scale, int scale, probabilities an output", a, 3, rw_attn_noscale_mulscale, 1e-4, 1e-5, 2);
    free_rw(a, 3);
}


TEST(test_attention_rewrite_empty) {
    rw_in a[3] = {
        {"q", TP_FLOAT32, 3, {2, 1024, 0}, fill_tensor(TP_FLOAT32, 3, (int64_t[]){2, 1024, 0}, 1, 2.0f)},
        {"kt", TP_FLOAT32, 3, {2, 0, 1024}, fill_tensor(TP_FLOAT32, 3, (int64_t[]){2, 0, 1024}, 2, 2.0f)},
        {"v", TP_FLOAT32, 3, {2, 1024, 8}, fill_tensor(TP_FLOAT32, 3, (int64_t[]){2, 1024, 8}, 3, 2.0f)},
    };
    check_rw_case("attention: E = 0", a, 3, rw_attn_last, 1e-4, 1e-5, 1);
    free_rw(a, 3);
    rw_in b[3] = {
        {"q", TP_FLOAT32, 3, {2, 1024, 16}, fill_tensor(TP_FLOAT32, 3, (int64_t[]){2, 1024, 16}, 1, 2.0f)},
        {"kt", TP_FLOAT32, 3, {2, 16, 1024}, fill_tensor(TP_FLOAT32, 3, (int64_t[]){2, 16, 0}, 2, 2.0f)},
        {"v", TP_FLOAT32, 3, {2, 1024, 8}, fill_tensor(TP_FLOAT32, 3, (int64_t[]){2, 0, 8}, 3, 2.0f)},
    };
    check_rw_case("attention: run with S = 0", b, 3, rw_attn_last, 1e-4, 1e-5, 1);
    free_rw(b, 3);
}

/* float16 attention is not rewritten: its scores round (and overflow:
 * |q.k| > 65504 gives inf, and softmax NaN) before the softmax, the
 * reference attention's do not. (A row of float32 scores all overflowing
 * to -inf, |q.k| > 3.4e38, still differs: softmax gives NaN, the fused
 * kernel zeros, as docs/architecture.md says.) */
TEST(test_attention_rewrite_float16) {
    /* float16 scores overflowing (|q.k| > 65504): softmax of inf gives NaN */
    rw_in f[3];
    attn_inputs(f, TP_FLOAT32, 1.0f);
    {
        float *q = tp_tensor_data(f[0].run), *kt = tp_tensor_data(f[1].run);
        for (int i = 0; i < AE; i++) q[i] = 100.0f, kt[(int64_t)i * AL] = 100.0f; /* scores[0, 0, 0] = 1.6e5 */
    }
    for (int i = 0; i < 3; i++) {
        tp_tensor *h16 = NULL;
        CHECK_OK(tp_tensor_to(f[i].run, TP_FLOAT16, &h16));
        tp_tensor_free(f[i].run);
        f[i].run = h16;
        f[i].meta_dt = TP_FLOAT16;
    }
    check_rw_case("attention: float16 scores that overflow", f, 3, rw_attn_last, 1e-2, 1e-2, 0);
    free_rw(f, 3);
}

TEST_MAIN(T(test_half_conv_act_fuses), T(test_bf16_conversions), T(test_half_alloc_failures), T(test_steady_state_allocates_nothing), T(test_steady_state_fast_steps_only),
          T(test_steady_state_reference_steps), T(test_fast_cat), T(test_run_call), T(test_interpreted_at_the_run_level),
          T(test_levels_and_threads), T(test_thread_count_follows_the_run), T(test_copy_split_among_threads), T(test_unary_on_strided_rows), T(test_unary_on_strided_rows_gelu), T(test_unary_on_broadcast_element), T(test_eager_fast_errors_name_the_op),
          T(test_threads_share_program), T(test_threads_share_pool), T(test_mutating_program_serialises),
          T(test_arena_reuses_memory), T(test_arena_merges_both_sides), T(test_arena_liveness_diamond), T(test_arena_pad_at_offset),
          T(test_fusion_keeps_results), T(test_row_selections), T(test_row_selections_guards), T(test_plans_invalidated), T(test_execute_errors), T(test_execute_refuses_non_tensor_outputs), T(test_cancel), T(test_log),
          T(test_claimed_products), T(test_claimed_rows), T(test_half_products), T(test_half_rows), T(test_half_conv), T(test_half_chain_fuses),
          T(test_half_epilogue_fuses), T(test_rewrites_skip_writes_in_place), T(test_rewrites_follow_recorded_kinds), T(test_rewrites_scalars_and_fused_reads), T(test_rewrites_nonfinite), T(test_in_place_not_over_a_viewed_input), T(test_rewrites_alloc_failures), T(test_rewrites_half_runs), T(test_rewrites_then_rows), T(test_attention_rewrite_cases), T(test_attention_rewrite_empty), T(test_attention_rewrite_float16))
