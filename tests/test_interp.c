/*
 * test_interp.c - the graph interpreter: small graphs with add/mul/relu,
 * kwargs, multi-output ops with getitem, get_attr through a resolver,
 * call_method, nested outputs, input-count and per-node error messages,
 * release of intermediates after their last use (peak memory stays flat on
 * a long chain), one prepared graph run from several threads, and
 * allocation failures.
 *
 * Expected values are small hand-computed results of PyTorch semantics
 * (e.g. torch.relu(x + y)).
 */
#include <pthread.h>
#include <stdarg.h>

#include "fail_alloc.h"
#include "test_util.h"

#define SZ(...) ((const int64_t[]){__VA_ARGS__})
#define N(x) tp_value_node(x)
#define I(x) tp_value_int(x)

static tp_tensor *f32(int ndim, const int64_t *sizes, const float *data) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, ndim, sizes, data, &t));
    return t;
}

static tp_value meta_val(tp_dtype dt, int ndim, const int64_t *sizes) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_meta(dt, ndim, sizes, &t));
    return tp_value_tensor(t);
}

static tp_node *ph(tp_graph *g, const char *name, tp_dtype dt, int ndim, const int64_t *sizes) {
    tp_value v = ndim >= 0 ? meta_val(dt, ndim, sizes) : tp_value_none();
    tp_node *n = NULL;
    CHECK_OK(tp_graph_placeholder(g, name, ndim >= 0 ? &v : NULL, &n));
    tp_value_clear(&v);
    return n;
}

static tp_value tup(int n, ...) {
    tp_value t = tp_value_none();
    CHECK_OK(tp_value_tuple(n, &t));
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) t.u.seq.items[i] = va_arg(ap, tp_value);
    va_end(ap);
    return t;
}

static tp_node *call_kw(tp_graph *g, tp_op op, tp_value args, tp_value kwargs) {
    tp_node *n = NULL;
    CHECK_OK(tp_graph_call_function(g, op, &args, kwargs.kind == TP_VAL_NONE ? NULL : &kwargs, &n));
    tp_value_clear(&args);
    tp_value_clear(&kwargs);
    return n;
}
static tp_node *call(tp_graph *g, tp_op op, tp_value args) { return call_kw(g, op, args, tp_value_none()); }

static void output(tp_graph *g, tp_value v) {
    CHECK_OK(tp_graph_output(g, &v, NULL));
    tp_value_clear(&v);
}

/* Check a float tensor's values (any dtype convertible to double). */
static void check_values(const tp_value *v, int ndim, const int64_t *sizes, const double *expect) {
    CHECK_MSG(v && v->kind == TP_VAL_TENSOR, "expected a tensor, got %s", v ? tp_value_kind_name(v->kind) : "NULL");
    if (!v || v->kind != TP_VAL_TENSOR) return;
    const tp_tensor *t = v->u.tensor;
    CHECK(tp_tensor_ndim(t) == ndim);
    if (tp_tensor_ndim(t) != ndim) return;
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        CHECK(tp_tensor_sizes(t)[d] == sizes[d]);
        numel *= sizes[d];
    }
    if (tp_tensor_numel(t) != numel) return;
    for (int64_t i = 0; i < numel; i++)
        CHECK_MSG(tp_tensor_item_f64(t, i) == expect[i], "element %lld: %g != %g", (long long)i,
                  tp_tensor_item_f64(t, i), expect[i]);
}

/* relu(x + y) on f32[3] */
static tp_graph *add_relu_graph(bool with_meta) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = ph(g, "x", TP_FLOAT32, with_meta ? 1 : -1, SZ(3));
    tp_node *y = ph(g, "y", TP_FLOAT32, with_meta ? 1 : -1, SZ(3));
    tp_node *add = call(g, TP_OP_ADD, tup(2, N(x), N(y)));
    tp_node *relu = call(g, TP_OP_RELU, tup(1, N(add)));
    output(g, tup(1, N(relu)));
    return g;
}

TEST(test_run_simple) {
    tp_graph *g = add_relu_graph(true);
    tp_value in[2] = {tp_value_tensor(f32(1, SZ(3), (const float[]){1, -2, 3})),
                      tp_value_tensor(f32(1, SZ(3), (const float[]){1, 1, -5}))};
    tp_value out = tp_value_none();
    CHECK_OK(tp_interp_run(g, in, 2, NULL, NULL, &out));
    CHECK(out.kind == TP_VAL_TUPLE && tp_value_len(&out) == 1);
    check_values(tp_value_at(&out, 0), 1, SZ(3), (const double[]){2, 0, 0});
    if (tp_value_at(&out, 0)) CHECK(tp_tensor_dtype(tp_value_at(&out, 0)->u.tensor) == TP_FLOAT32);
    tp_value_clear(&out);
    /* a prepared interpreter runs many times; inputs are not consumed */
    tp_interp *it = NULL;
    CHECK_OK(tp_interp_new(g, &it));
    CHECK(tp_interp_num_inputs(it) == 2 && tp_interp_graph(it) == g);
    for (int k = 0; k < 3; k++) {
        CHECK_OK(tp_interp_call(it, in, 2, NULL, NULL, &out));
        check_values(tp_value_at(&out, 0), 1, SZ(3), (const double[]){2, 0, 0});
        tp_value_clear(&out);
    }
    /* int inputs promote like PyTorch: int64 + int64 stays int64 */
    tp_tensor *a = NULL, *b = NULL;
    CHECK_OK(tp_tensor_from_data(TP_INT64, 1, SZ(3), (const int64_t[]){4, -9, 2}, &a));
    CHECK_OK(tp_tensor_from_data(TP_INT64, 1, SZ(3), (const int64_t[]){1, 2, -3}, &b));
    tp_value iv[2] = {tp_value_tensor(a), tp_value_tensor(b)};
    CHECK_OK(tp_interp_call(it, iv, 2, NULL, NULL, &out));
    check_values(tp_value_at(&out, 0), 1, SZ(3), (const double[]){5, 0, 0});
    if (tp_value_at(&out, 0)) CHECK(tp_tensor_dtype(tp_value_at(&out, 0)->u.tensor) == TP_INT64);
    tp_value_clear(&out);
    tp_value_clear(&iv[0]);
    tp_value_clear(&iv[1]);
    tp_interp_free(it);
    tp_interp_free(NULL);
    tp_value_clear(&in[0]);
    tp_value_clear(&in[1]);
    tp_graph_free(g);
}

TEST(test_kwargs_and_scalars) {
    /* out = mul(add(x, y, alpha=2), 0.5) */
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = ph(g, "x", TP_FLOAT32, 1, SZ(2));
    tp_node *y = ph(g, "y", TP_FLOAT32, 1, SZ(2));
    tp_value kw = tp_value_none();
    CHECK_OK(tp_value_dict(&kw));
    tp_value alpha = I(2);
    CHECK_OK(tp_value_dict_set(&kw, "alpha", &alpha));
    tp_node *add = call_kw(g, TP_OP_ADD, tup(2, N(x), N(y)), kw);
    tp_node *mul = call(g, TP_OP_MUL, tup(2, N(add), tp_value_float(0.5)));
    output(g, N(mul));
    tp_value in[2] = {tp_value_tensor(f32(1, SZ(2), (const float[]){1, 2})),
                      tp_value_tensor(f32(1, SZ(2), (const float[]){3, -4}))};
    tp_value out = tp_value_none();
    CHECK_OK(tp_interp_run(g, in, 2, NULL, NULL, &out));
    check_values(&out, 1, SZ(2), (const double[]){3.5, -3}); /* (x + 2y) * 0.5 */
    tp_value_clear(&out);
    tp_value_clear(&in[0]);
    tp_value_clear(&in[1]);
    tp_graph_free(g);
}

TEST(test_getitem_nested_output) {
    /* values, indices = torch.max(x, 1); return {'values': .., 'idx': [indices], 'x': x, 'n': 3, 'none': None} */
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = ph(g, "x", TP_FLOAT32, 2, SZ(2, 3));
    tp_node *mx = call(g, TP_OP_MAX, tup(2, N(x), I(1)));
    tp_node *v = call(g, TP_OP_GETITEM, tup(2, N(mx), I(0)));
    tp_node *i = call(g, TP_OP_GETITEM, tup(2, N(mx), I(1)));
    tp_value d = tp_value_none(), item;
    CHECK_OK(tp_value_dict(&d));
    item = N(v);
    CHECK_OK(tp_value_dict_set(&d, "values", &item));
    CHECK_OK(tp_value_list(1, &item));
    item.u.seq.items[0] = N(i);
    CHECK_OK(tp_value_dict_set(&d, "idx", &item));
    item = N(x);
    CHECK_OK(tp_value_dict_set(&d, "x", &item));
    item = I(3);
    CHECK_OK(tp_value_dict_set(&d, "n", &item));
    item = tp_value_none();
    CHECK_OK(tp_value_dict_set(&d, "none", &item));
    output(g, d);
    tp_tensor *xt = f32(2, SZ(2, 3), (const float[]){1, 5, 2, 7, 0, 3});
    tp_value in = tp_value_tensor(xt);
    tp_value out = tp_value_none();
    CHECK_OK(tp_interp_run(g, &in, 1, NULL, NULL, &out));
    CHECK(out.kind == TP_VAL_DICT && tp_value_len(&out) == 5);
    check_values(tp_value_dict_get(&out, "values"), 1, SZ(2), (const double[]){5, 7});
    const tp_value *idx = tp_value_dict_get(&out, "idx");
    CHECK(idx && idx->kind == TP_VAL_LIST && tp_value_len(idx) == 1);
    if (idx && tp_value_len(idx) == 1) {
        check_values(tp_value_at(idx, 0), 1, SZ(2), (const double[]){1, 0});
        CHECK(tp_value_at(idx, 0)->kind == TP_VAL_TENSOR && tp_tensor_dtype(tp_value_at(idx, 0)->u.tensor) == TP_INT64);
    }
    const tp_value *xo = tp_value_dict_get(&out, "x");
    CHECK(xo && xo->kind == TP_VAL_TENSOR && xo->u.tensor == xt); /* passed through, retained */
    CHECK(tp_value_dict_get(&out, "n") && tp_value_dict_get(&out, "n")->u.i == 3);
    CHECK(tp_value_dict_get(&out, "none") && tp_value_dict_get(&out, "none")->kind == TP_VAL_NONE);
    tp_value_clear(&out);
    tp_value_clear(&in);
    tp_graph_free(g);
}

typedef struct attrs {
    tp_tensor *weight, *bias;
    int calls;
} attrs;

static tp_status resolve(void *user, const char *target, tp_value *out) {
    attrs *a = user;
    a->calls++;
    if (strcmp(target, "fc1.weight") == 0) *out = tp_value_tensor(tp_tensor_retain(a->weight));
    else if (strcmp(target, "fc1.bias") == 0) *out = tp_value_tensor(tp_tensor_retain(a->bias));
    else return tp_error(TP_ERR_NOT_FOUND, "no attribute '%s'", target);
    return TP_OK;
}

TEST(test_get_attr) {
    /* relu(linear(x, fc1.weight, fc1.bias)) */
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = ph(g, "x", TP_FLOAT32, 2, SZ(1, 2));
    tp_value mv = meta_val(TP_FLOAT32, 2, SZ(2, 2));
    tp_node *w = NULL, *b = NULL;
    CHECK_OK(tp_graph_get_attr(g, "fc1.weight", &mv, &w));
    tp_value_clear(&mv);
    mv = meta_val(TP_FLOAT32, 1, SZ(2));
    CHECK_OK(tp_graph_get_attr(g, "fc1.bias", &mv, &b));
    tp_value_clear(&mv);
    tp_node *lin = call(g, TP_OP_LINEAR, tup(3, N(x), N(w), N(b)));
    tp_node *relu = call(g, TP_OP_RELU, tup(1, N(lin)));
    output(g, tup(1, N(relu)));
    attrs a = {f32(2, SZ(2, 2), (const float[]){1, 2, -3, 1}), f32(1, SZ(2), (const float[]){0.5f, 1}), 0};
    tp_value in = tp_value_tensor(f32(2, SZ(1, 2), (const float[]){1, 1}));
    tp_value out = tp_value_none();
    CHECK_OK(tp_interp_run(g, &in, 1, resolve, &a, &out));
    CHECK(a.calls == 2);
    /* x @ W^T + b = [1*1 + 1*2 + .5, 1*-3 + 1*1 + 1] = [3.5, -1] -> relu [3.5, 0] */
    check_values(tp_value_at(&out, 0), 2, SZ(1, 2), (const double[]){3.5, 0});
    tp_value_clear(&out);
    /* no resolver */
    CHECK_STATUS(tp_interp_run(g, &in, 1, NULL, NULL, &out), TP_ERR_MISSING);
    CHECK_ERR_CONTAINS("node fc1_weight (fc1.weight): no attribute resolver");
    CHECK(out.kind == TP_VAL_NONE);
    /* resolver failure gets the node as context */
    tp_node *extra = NULL;
    CHECK_OK(tp_graph_set_insert_point(g, tp_graph_output_node(g)));
    CHECK_OK(tp_graph_get_attr(g, "fc2.weight", NULL, &extra));
    tp_node_set_flags(extra, TP_NODE_IMPURE);
    CHECK_STATUS(tp_interp_run(g, &in, 1, resolve, &a, &out), TP_ERR_NOT_FOUND);
    CHECK_ERR_CONTAINS("node fc2_weight (fc2.weight): no attribute 'fc2.weight'");
    tp_value_clear(&in);
    tp_tensor_free(a.weight);
    tp_tensor_free(a.bias);
    tp_graph_free(g);
}

TEST(test_errors) {
    tp_graph *g = add_relu_graph(false); /* no meta: shapes unchecked at build time */
    tp_value in[2] = {tp_value_tensor(f32(1, SZ(2), (const float[]){1, 2})),
                      tp_value_tensor(f32(1, SZ(3), (const float[]){1, 2, 3}))};
    tp_value out = tp_value_int(9);
    CHECK_STATUS(tp_interp_run(g, in, 1, NULL, NULL, &out), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("expected 2 inputs, got 1");
    CHECK(out.kind == TP_VAL_NONE);
    CHECK_STATUS(tp_interp_run(g, in, 3, NULL, NULL, &out), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("expected 2 inputs, got 3");
    /* a shape error at run time names the node */
    CHECK_STATUS(tp_interp_run(g, in, 2, NULL, NULL, &out), TP_ERR_SHAPE);
    CHECK_ERR_CONTAINS("node add (add): ");
    CHECK(out.kind == TP_VAL_NONE);
    /* a graph that fails lint is refused */
    tp_graph *bad = NULL;
    CHECK_OK(tp_graph_new(&bad));
    ph(bad, "x", TP_FLOAT32, 1, SZ(2));
    tp_interp *it = NULL;
    CHECK_STATUS(tp_interp_new(bad, &it), TP_ERR_VERIFY);
    CHECK_ERR_CONTAINS("no output node");
    CHECK_STATUS(tp_interp_run(bad, in, 1, NULL, NULL, &out), TP_ERR_VERIFY);
    tp_graph_free(bad);
    tp_value_clear(&in[0]);
    tp_value_clear(&in[1]);
    tp_graph_free(g);
}

TEST(test_call_method) {
    /* x.view([3, 2]) then an unknown method */
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = ph(g, "x", TP_FLOAT32, 2, SZ(2, 3));
    tp_value sizes = tp_value_none();
    CHECK_OK(tp_value_int_list(SZ(3, 2), 2, &sizes));
    tp_value args = tup(2, N(x), sizes);
    tp_node *view = NULL;
    CHECK_OK(tp_graph_call_method(g, "view", &args, NULL, &view));
    tp_value_clear(&args);
    tp_node *neg = call(g, TP_OP_NEG, tup(1, N(view)));
    output(g, tup(1, N(neg)));
    tp_value in = tp_value_tensor(f32(2, SZ(2, 3), (const float[]){1, 2, 3, 4, 5, 6}));
    tp_value out = tp_value_none();
    CHECK_OK(tp_interp_run(g, &in, 1, NULL, NULL, &out));
    check_values(tp_value_at(&out, 0), 2, SZ(3, 2), (const double[]){-1, -2, -3, -4, -5, -6});
    tp_value_clear(&out);
    /* unknown method: built without meta, refused when run */
    CHECK_OK(tp_graph_set_insert_point(g, tp_graph_output_node(g)));
    args = tup(1, N(x));
    tp_node *frob = NULL;
    CHECK_OK(tp_graph_call_method(g, "frobnicate", &args, NULL, &frob));
    tp_value_clear(&args);
    CHECK(tp_node_meta_val(frob)->kind == TP_VAL_NONE);
    CHECK_STATUS(tp_interp_run(g, &in, 1, NULL, NULL, &out), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("node frobnicate (frobnicate): no op named 'frobnicate'");
    tp_value_clear(&in);
    tp_graph_free(g);
}

TEST(test_inplace_node_runs) {
    /* a = x + 0 (a fresh tensor); a.add_(1) (unused, impure); return a */
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *x = ph(g, "x", TP_FLOAT32, 1, SZ(2));
    tp_node *a = call(g, TP_OP_ADD, tup(2, N(x), I(0)));
    call(g, TP_OP_ADD_, tup(2, N(a), I(1)));
    output(g, N(a));
    CHECK_OK(tp_graph_eliminate_dead_code(g, NULL));
    CHECK(tp_graph_num_nodes(g) == 4);
    tp_value in = tp_value_tensor(f32(1, SZ(2), (const float[]){1, 2}));
    tp_value out = tp_value_none();
    CHECK_OK(tp_interp_run(g, &in, 1, NULL, NULL, &out));
    check_values(&out, 1, SZ(2), (const double[]){2, 3});
    check_values(&in, 1, SZ(2), (const double[]){1, 2}); /* the input is untouched */
    tp_value_clear(&out);
    tp_value_clear(&in);
    tp_graph_free(g);
}

/* ---- memory: intermediates are released after their last use ------------- */

static struct {
    long long live, peak;
} g_mem;

static void *counting_alloc(void *user, void *ptr, size_t old_size, size_t new_size) {
    (void)user;
    if (new_size == 0) {
        free(ptr);
        g_mem.live -= (long long)old_size;
        return NULL;
    }
    void *p = realloc(ptr, new_size);
    if (!p) return NULL;
    g_mem.live += (long long)new_size - (long long)(ptr ? old_size : 0);
    if (g_mem.live > g_mem.peak) g_mem.peak = g_mem.live;
    return p;
}

/* Peak bytes allocated while running a chain of `length` relus on a
 * 4096-float input (16 KiB per tensor). */
static long long chain_peak(int length) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *n = ph(g, "x", TP_FLOAT32, 1, SZ(4096));
    for (int i = 0; i < length; i++) n = call(g, i % 2 ? TP_OP_RELU : TP_OP_NEG, tup(1, N(n)));
    output(g, tup(1, N(n)));
    tp_interp *it = NULL;
    CHECK_OK(tp_interp_new(g, &it));
    tp_tensor *x = NULL;
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 1, SZ(4096), &x));
    tp_value in = tp_value_tensor(x), out = tp_value_none();
    g_mem.live = g_mem.peak = 0;
    tp_set_allocator(counting_alloc, NULL);
    tp_status st = it ? tp_interp_call(it, &in, 1, NULL, NULL, &out) : TP_ERR_INTERNAL;
    tp_set_allocator(NULL, NULL);
    CHECK_OK(st);
    long long peak = g_mem.peak;
    tp_value_clear(&out);
    tp_value_clear(&in);
    tp_interp_free(it);
    tp_graph_free(g);
    return peak;
}

TEST(test_intermediates_released) {
    long long tensor_bytes = 4096 * 4;
    long long short_peak = chain_peak(4), long_peak = chain_peak(64);
    /* at most two activations alive at once (input of a step and its output) */
    CHECK_MSG(long_peak < 3 * tensor_bytes, "peak %lld bytes for a 64-op chain", long_peak);
    CHECK_MSG(long_peak < short_peak + tensor_bytes / 2, "peak grows with the chain: %lld vs %lld", long_peak,
              short_peak);
    CHECK(long_peak >= tensor_bytes); /* sanity: something was allocated */
}

/* ---- threads: one prepared graph, several concurrent calls ---------------- */

typedef struct thread_arg {
    const tp_interp *it;
    int id, failures;
} thread_arg;

static void *thread_main(void *p) {
    thread_arg *a = p;
    for (int k = 0; k < 50; k++) {
        float v = (float)(a->id * 100 + k);
        tp_tensor *x = NULL, *y = NULL;
        if (tp_tensor_from_data(TP_FLOAT32, 1, SZ(3), (const float[]){v, -v, 1}, &x) != TP_OK ||
            tp_tensor_from_data(TP_FLOAT32, 1, SZ(3), (const float[]){1, 1, -2}, &y) != TP_OK) {
            a->failures++;
            tp_tensor_free(x);
            continue;
        }
        tp_value in[2] = {tp_value_tensor(x), tp_value_tensor(y)}, out = tp_value_none();
        if (tp_interp_call(a->it, in, 2, NULL, NULL, &out) != TP_OK) {
            a->failures++;
        } else {
            const tp_value *r = tp_value_at(&out, 0);
            if (!r || r->kind != TP_VAL_TENSOR || tp_tensor_item_f64(r->u.tensor, 0) != v + 1 ||
                tp_tensor_item_f64(r->u.tensor, 1) != (v > 1 ? 0 : 1 - v) || tp_tensor_item_f64(r->u.tensor, 2) != 0)
                a->failures++;
        }
        tp_value_clear(&out);
        tp_value_clear(&in[0]);
        tp_value_clear(&in[1]);
    }
    return NULL;
}

TEST(test_threads) {
    tp_graph *g = add_relu_graph(true);
    tp_interp *it = NULL;
    CHECK_OK(tp_interp_new(g, &it));
    enum { n_threads = 4 };
    pthread_t th[n_threads];
    thread_arg args[n_threads];
    for (int i = 0; i < n_threads; i++) {
        args[i] = (thread_arg){.it = it, .id = i};
        CHECK(pthread_create(&th[i], NULL, thread_main, &args[i]) == 0);
    }
    for (int i = 0; i < n_threads; i++) {
        pthread_join(th[i], NULL);
        CHECK_MSG(args[i].failures == 0, "thread %d: %d failures", i, args[i].failures);
    }
    tp_interp_free(it);
    tp_graph_free(g);
}

/* ---- allocation failures --------------------------------------------------- */

typedef struct run_ctx {
    const tp_graph *g;
    const tp_value *inputs;
} run_ctx;

static tp_status run_once(void *p) {
    const run_ctx *c = p;
    tp_value out = tp_value_none();
    tp_status st = tp_interp_run(c->g, c->inputs, 2, NULL, NULL, &out);
    tp_value_clear(&out);
    return st;
}

TEST(test_alloc_failures) {
    tp_graph *g = add_relu_graph(true);
    tp_value in[2] = {tp_value_tensor(f32(1, SZ(3), (const float[]){1, -2, 3})),
                      tp_value_tensor(f32(1, SZ(3), (const float[]){1, 1, -5}))};
    run_ctx c = {g, in};
    long n = check_alloc_failures("interpret add+relu", run_once, &c);
    CHECK(n > 5);
    tp_value_clear(&in[0]);
    tp_value_clear(&in[1]);
    tp_graph_free(g);
}

TEST_MAIN(T(test_run_simple), T(test_kwargs_and_scalars), T(test_getitem_nested_output), T(test_get_attr),
          T(test_errors), T(test_call_method), T(test_inplace_node_runs), T(test_intermediates_released),
          T(test_threads), T(test_alloc_failures))
