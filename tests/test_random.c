/*
 * test_random.c - the random fills and samplers (src/cpu/random.c), which no
 * fixture can pin down value by value: each op's support, dtype and shape,
 * its sample mean and variance against the distribution's (hand-derived;
 * tolerances of about five standard errors for the sample sizes used, and
 * the generator is deterministic within a process, so the test cannot
 * flake), two calls giving different values, and PyTorch's argument errors.
 */
#include <inttypes.h>
#include <math.h>

#include "test_util.h"

static tp_tensor *zeros(tp_dtype dt, int64_t n) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_zeros(dt, 1, &n, &t));
    return t;
}

/* op(args...) -> tensor (caller frees), or NULL with the status in *st. */
static tp_tensor *call(tp_op op, tp_value *args, int n, tp_status *st) {
    tp_value out = tp_value_none();
    *st = tp_op_call(op, args, n, NULL, &out);
    tp_tensor *r = *st == TP_OK && out.kind == TP_VAL_TENSOR ? tp_tensor_retain(out.u.tensor) : NULL;
    tp_value_clear(&out);
    return r;
}

typedef struct stats {
    double mean, var, min, max;
    bool integral; /* every value an integer */
} stats;

static stats moments(const tp_tensor *t) {
    stats s = {0, 0, INFINITY, -INFINITY, true};
    int64_t n = tp_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = tp_tensor_item_f64(t, i);
        s.mean += v;
        if (v < s.min) s.min = v;
        if (v > s.max) s.max = v;
        if (v != floor(v)) s.integral = false;
    }
    s.mean /= (double)n;
    for (int64_t i = 0; i < n; i++) {
        double d = tp_tensor_item_f64(t, i) - s.mean;
        s.var += d * d;
    }
    s.var /= (double)(n - 1);
    return s;
}

enum { N = 200000 };

/* A fill op on a fresh float32 tensor of N: support and moments. */
static void check_fill(const char *what, tp_op op, tp_value *extra, int n_extra, tp_dtype dt, double lo, double hi,
                       double mean, double var, bool integral) {
    tp_value args[4];
    args[0] = tp_value_tensor(zeros(dt, N));
    for (int i = 0; i < n_extra; i++) args[1 + i] = extra[i];
    tp_status st;
    tp_tensor *y = call(op, args, 1 + n_extra, &st);
    CHECK_MSG(st == TP_OK, "%s: %s", what, tp_last_error());
    if (y) {
        CHECK_MSG(tp_tensor_dtype(y) == dt && tp_tensor_numel(y) == N, "%s: dtype or size", what);
        stats s = moments(y);
        CHECK_MSG(s.min >= lo && s.max <= hi, "%s: values in [%g, %g], expected within [%g, %g]", what, s.min, s.max,
                  lo, hi);
        double se = sqrt(var / N);
        CHECK_MSG(fabs(s.mean - mean) < 5 * se + 1e-12, "%s: mean %g, expected %g", what, s.mean, mean);
        CHECK_MSG(fabs(s.var - var) < 0.05 * var + 1e-12, "%s: variance %g, expected %g", what, s.var, var);
        CHECK_MSG(!integral || s.integral, "%s: non-integer values", what);
        /* a second call draws other values */
        tp_tensor *y2 = call(op, args, 1 + n_extra, &st);
        int differ = 0;
        for (int64_t i = 0; y2 && i < 64; i++) differ += tp_tensor_item_f64(y, i) != tp_tensor_item_f64(y2, i);
        CHECK_MSG(differ > 0, "%s: two calls gave the same first 64 values", what);
        tp_tensor_free(y2);
    }
    tp_tensor_free(y);
    tp_value_clear(&args[0]);
}

TEST(test_fills) {
    check_fill("uniform(-2, 3)", TP_OP_UNIFORM, (tp_value[]){tp_value_float(-2), tp_value_float(3)}, 2, TP_FLOAT32, -2, 3,
               0.5, 25.0 / 12.0, false);
    check_fill("uniform f64", TP_OP_UNIFORM, NULL, 0, TP_FLOAT64, 0, 1, 0.5, 1.0 / 12.0, false);
    check_fill("normal_functional(1, 2)", TP_OP_NORMAL_FUNCTIONAL, (tp_value[]){tp_value_float(1), tp_value_float(2)}, 2,
               TP_FLOAT32, -INFINITY, INFINITY, 1, 4, false);
    /* log-normal(0, 0.5): mean e^(s^2/2), variance (e^(s^2) - 1) e^(s^2) */
    check_fill("log_normal(0, 0.5)", TP_OP_LOG_NORMAL, (tp_value[]){tp_value_float(0), tp_value_float(0.5)}, 2,
               TP_FLOAT32, 0, INFINITY, exp(0.125), (exp(0.25) - 1) * exp(0.25), false);
    check_fill("exponential(2)", TP_OP_EXPONENTIAL, (tp_value[]){tp_value_float(2)}, 1, TP_FLOAT32, 0, INFINITY, 0.5,
               0.25, false);
    /* geometric(0.3): mean 1/p, variance (1-p)/p^2 */
    check_fill("geometric(0.3)", TP_OP_GEOMETRIC, (tp_value[]){tp_value_float(0.3)}, 1, TP_FLOAT32, 1, INFINITY,
               1 / 0.3, 0.7 / 0.09, true);
    check_fill("geometric int64", TP_OP_GEOMETRIC, (tp_value[]){tp_value_float(0.5)}, 1, TP_INT64, 1, INFINITY, 2, 2,
               true);
    /* random(0, 10): uniform integers, variance (10^2 - 1) / 12 */
    check_fill("random(0, 10)", TP_OP_RANDOM, (tp_value[]){tp_value_int(0), tp_value_int(10)}, 2, TP_FLOAT32, 0, 9, 4.5,
               99.0 / 12.0, true);
    check_fill("random(-3, 4) int32", TP_OP_RANDOM, (tp_value[]){tp_value_int(-3), tp_value_int(4)}, 2, TP_INT32, -3, 3,
               0, 4, true);
    check_fill("random() float32", TP_OP_RANDOM, NULL, 0, TP_FLOAT32, 0, 16777216.0, 8388608.0,
               16777217.0 * 16777217.0 / 12.0, true);
    check_fill("random() bool", TP_OP_RANDOM, NULL, 0, TP_BOOL, 0, 1, 0.5, 0.25, true);
    check_fill("bernoulli(0.3)", TP_OP_BERNOULLI, (tp_value[]){tp_value_float(0.3)}, 1, TP_FLOAT32, 0, 1, 0.3, 0.21,
               true);
    check_fill("bernoulli(0.3) int64", TP_OP_BERNOULLI, (tp_value[]){tp_value_float(0.3)}, 1, TP_INT64, 0, 1, 0.3, 0.21,
               true);
    check_fill("rand_like", TP_OP_RAND_LIKE, NULL, 0, TP_FLOAT32, 0, 1, 0.5, 1.0 / 12.0, false);
    check_fill("randn_like", TP_OP_RANDN_LIKE, NULL, 0, TP_FLOAT64, -INFINITY, INFINITY, 0, 1, false);
    check_fill("randint_like(5)", TP_OP_RANDINT_LIKE, (tp_value[]){tp_value_int(5)}, 1, TP_INT64, 0, 4, 2, 2, true);
    check_fill("randint_like(-2, 2)", TP_OP_RANDINT_LIKE, (tp_value[]){tp_value_int(-2), tp_value_int(2)}, 2,
               TP_FLOAT32, -2, 1, -0.5, 15.0 / 12.0, true);
}

/* rand / randn: a size, not a tensor to fill. */
TEST(test_rand_randn) {
    tp_value size;
    CHECK_OK(tp_value_int_list((int64_t[]){N / 4, 4}, 2, &size));
    tp_status st;
    tp_value a[1] = {size};
    tp_tensor *u = call(TP_OP_RAND, a, 1, &st);
    CHECK_OK(st);
    if (u) {
        stats s = moments(u);
        CHECK(tp_tensor_dtype(u) == TP_FLOAT32 && tp_tensor_numel(u) == N);
        CHECK_MSG(s.min >= 0 && s.max < 1 && fabs(s.mean - 0.5) < 5 * sqrt(1.0 / 12 / N), "rand: mean %g", s.mean);
    }
    tp_value_clear(&size);
    CHECK_OK(tp_value_int_list((int64_t[]){N}, 1, &size));
    a[0] = size;
    tp_tensor *g = call(TP_OP_RANDN, a, 1, &st);
    CHECK_OK(st);
    if (g) {
        stats s = moments(g);
        CHECK_MSG(fabs(s.mean) < 5 * sqrt(1.0 / N) && fabs(s.var - 1) < 0.05, "randn: mean %g, variance %g", s.mean, s.var);
    }
    tp_value_clear(&size);
    tp_tensor_free(u);
    tp_tensor_free(g);
}

/* Cauchy has no moments: check the quartiles median -+ sigma instead. */
TEST(test_cauchy_quartiles) {
    tp_value args[3] = {tp_value_tensor(zeros(TP_FLOAT64, N)), tp_value_float(1.0), tp_value_float(2.0)};
    tp_status st;
    tp_tensor *y = call(TP_OP_CAUCHY, args, 3, &st);
    CHECK_OK(st);
    if (y) {
        int64_t below_lo = 0, below_mid = 0, below_hi = 0;
        for (int64_t i = 0; i < N; i++) {
            double v = tp_tensor_item_f64(y, i);
            below_lo += v < -1.0;
            below_mid += v < 1.0;
            below_hi += v < 3.0;
        }
        CHECK_MSG(fabs((double)below_lo / N - 0.25) < 0.005, "P(x < median - sigma) = %g", (double)below_lo / N);
        CHECK_MSG(fabs((double)below_mid / N - 0.5) < 0.005, "P(x < median) = %g", (double)below_mid / N);
        CHECK_MSG(fabs((double)below_hi / N - 0.75) < 0.005, "P(x < median + sigma) = %g", (double)below_hi / N);
    }
    tp_tensor_free(y);
    tp_value_clear(&args[0]);
}

/* bernoulli with the probabilities in self, and with a broadcast tensor p. */
TEST(test_bernoulli_probabilities) {
    int64_t sizes[2] = {N / 4, 4};
    tp_tensor *p = NULL, *x = NULL;
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, 1, &sizes[1], &p));
    CHECK_OK(tp_tensor_zeros(TP_FLOAT64, 2, sizes, &x));
    if (!p || !x) return;
    const float pv[4] = {0.0f, 0.25f, 0.75f, 1.0f};
    memcpy(tp_tensor_data(p), pv, sizeof pv);
    tp_value args[2] = {tp_value_tensor(x), tp_value_tensor(p)};
    tp_status st;
    tp_tensor *y = call(TP_OP_BERNOULLI, args, 2, &st);
    CHECK_OK(st);
    if (y) {
        CHECK(tp_tensor_dtype(y) == TP_FLOAT64);
        double ones[4] = {0, 0, 0, 0};
        for (int64_t i = 0; i < N; i++) ones[i % 4] += tp_tensor_item_f64(y, i);
        for (int k = 0; k < 4; k++)
            CHECK_MSG(fabs(ones[k] / (N / 4) - pv[k]) < 0.01, "column %d: %g ones, p %g", k, ones[k] / (N / 4), pv[k]);
    }
    tp_tensor_free(y);
    /* self as the probabilities */
    tp_value a1[1] = {tp_value_tensor(tp_tensor_retain(p))};
    tp_tensor *z = call(TP_OP_BERNOULLI, a1, 1, &st);
    CHECK_OK(st);
    if (z) CHECK(tp_tensor_item_f64(z, 0) == 0.0 && tp_tensor_item_f64(z, 3) == 1.0);
    tp_tensor_free(z);
    tp_value_clear(&a1[0]);
    tp_value_clear(&args[0]);
    tp_value_clear(&args[1]);
}

TEST(test_poisson_moments) {
    const double rates[] = {0.5, 4.0, 30.0, 500.0};
    for (size_t k = 0; k < sizeof rates / sizeof rates[0]; k++) {
        tp_tensor *x = zeros(TP_FLOAT32, N);
        if (!x) return;
        for (int64_t i = 0; i < N; i++) ((float *)tp_tensor_data(x))[i] = (float)rates[k];
        tp_value args[1] = {tp_value_tensor(x)};
        tp_status st;
        tp_tensor *y = call(TP_OP_POISSON, args, 1, &st);
        CHECK_OK(st);
        if (y) {
            stats s = moments(y);
            CHECK_MSG(s.integral && s.min >= 0, "poisson(%g): negative or non-integer values", rates[k]);
            CHECK_MSG(fabs(s.mean - rates[k]) < 5 * sqrt(rates[k] / N), "poisson(%g): mean %g", rates[k], s.mean);
            CHECK_MSG(fabs(s.var - rates[k]) < 0.05 * rates[k], "poisson(%g): variance %g", rates[k], s.var);
        }
        tp_tensor_free(y);
        tp_value_clear(&args[0]);
    }
}

TEST(test_multinomial) {
    int64_t sizes[2] = {2, 4};
    tp_tensor *p = NULL;
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, 2, sizes, &p));
    if (!p) return;
    const float pv[8] = {1, 2, 3, 4, 0, 0, 5, 0};
    memcpy(tp_tensor_data(p), pv, sizeof pv);
    /* with replacement: frequencies 0.1 0.2 0.3 0.4 in row 0, always 2 in row 1 */
    tp_value args[3] = {tp_value_tensor(p), tp_value_int(N / 2), tp_value_bool(true)};
    tp_status st;
    tp_tensor *y = call(TP_OP_MULTINOMIAL, args, 3, &st);
    CHECK_OK(st);
    if (y) {
        CHECK(tp_tensor_dtype(y) == TP_INT64 && tp_tensor_ndim(y) == 2 && tp_tensor_sizes(y)[1] == N / 2);
        double freq[4] = {0, 0, 0, 0};
        int64_t row1_bad = 0;
        for (int64_t i = 0; i < N / 2; i++) {
            freq[(int)tp_tensor_item_f64(y, i)] += 1.0 / (N / 2);
            row1_bad += tp_tensor_item_f64(y, N / 2 + i) != 2.0;
        }
        for (int k = 0; k < 4; k++) CHECK_MSG(fabs(freq[k] - 0.1 * (k + 1)) < 0.01, "category %d: %g", k, freq[k]);
        CHECK(row1_bad == 0);
    }
    tp_tensor_free(y);
    /* without replacement: row 0 gets 4 distinct categories */
    args[1] = tp_value_int(4);
    args[2] = tp_value_bool(false);
    int64_t one[1] = {4};
    tp_tensor *row = NULL;
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, 1, one, &row));
    if (row) memcpy(tp_tensor_data(row), pv, 4 * sizeof(float));
    tp_value a1[3] = {tp_value_tensor(row), tp_value_int(4), tp_value_bool(false)};
    tp_tensor *z = call(TP_OP_MULTINOMIAL, a1, 3, &st);
    CHECK_OK(st);
    if (z) {
        int seen = 0;
        for (int i = 0; i < 4; i++) seen |= 1 << (int)tp_tensor_item_f64(z, i);
        CHECK(seen == 15);
    }
    tp_tensor_free(z);
    /* row 1 has two non-zero categories: 3 draws without replacement fail */
    args[1] = tp_value_int(3);
    CHECK_STATUS(call(TP_OP_MULTINOMIAL, args, 3, &st) == NULL ? st : TP_OK, TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("not enough non-negative category to sample");
    args[1] = tp_value_int(5);
    CHECK_STATUS(call(TP_OP_MULTINOMIAL, args, 3, &st) == NULL ? st : TP_OK, TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("cannot sample n_sample > prob_dist.size(-1) samples without replacement");
    tp_value_clear(&a1[0]);
    tp_value_clear(&args[0]);
}

TEST(test_randperm_randint_normal) {
    tp_value a[1] = {tp_value_int(1000)};
    tp_status st;
    tp_tensor *y = call(TP_OP_RANDPERM, a, 1, &st);
    CHECK_OK(st);
    if (y) {
        CHECK(tp_tensor_dtype(y) == TP_INT64 && tp_tensor_numel(y) == 1000);
        static bool seen[1000];
        int distinct = 0, moved = 0;
        for (int i = 0; i < 1000; i++) {
            int v = (int)tp_tensor_item_f64(y, i);
            if (v >= 0 && v < 1000 && !seen[v]) seen[v] = true, distinct++;
            moved += v != i;
        }
        CHECK(distinct == 1000 && moved > 900);
    }
    tp_tensor_free(y);
    tp_value size;
    CHECK_OK(tp_value_int_list((int64_t[]){3, N / 3}, 2, &size));
    tp_value r[3] = {tp_value_int(-5), tp_value_int(5), size};
    y = call(TP_OP_RANDINT, r, 3, &st);
    CHECK_OK(st);
    if (y) {
        stats s = moments(y);
        CHECK(tp_tensor_dtype(y) == TP_INT64 && tp_tensor_ndim(y) == 2);
        CHECK(s.min == -5 && s.max == 4 && fabs(s.mean + 0.5) < 0.05);
    }
    tp_tensor_free(y);
    tp_value_clear(&size);
    /* normal(mean tensor [4], std 0.5): column means follow mean */
    int64_t four = 4;
    tp_tensor *m = NULL;
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, 1, &four, &m));
    if (!m) return;
    const float mv[4] = {-10, 0, 1, 100};
    memcpy(tp_tensor_data(m), mv, sizeof mv);
    tp_value nm[2] = {tp_value_tensor(m), tp_value_float(0.5)};
    y = call(TP_OP_NORMAL, nm, 2, &st);
    CHECK_OK(st);
    if (y) CHECK(tp_tensor_numel(y) == 4 && fabs(tp_tensor_item_f64(y, 3) - 100) < 5);
    tp_tensor_free(y);
    tp_value_clear(&nm[0]);
}

/* PyTorch's argument errors, code and message. */
TEST(test_argument_errors) {
    tp_tensor *x = zeros(TP_FLOAT32, 4), *xi = zeros(TP_INT64, 4);
    if (!x || !xi) return;
    tp_status st;
    const struct {
        tp_op op;
        bool int_input;
        int n;
        tp_value extra[2];
        tp_status code;
        const char *msg;
    } cases[] = {
        {TP_OP_UNIFORM, false, 2, {tp_value_float(3), tp_value_float(1)}, TP_ERR_INVALID_ARG,
         "uniform_ expects to return a [from, to) range, but found from=3 > to=1"},
        {TP_OP_UNIFORM, true, 0, {{0}}, TP_ERR_TYPE, "uniform_ expects a floating point tensor"},
        {TP_OP_NORMAL_FUNCTIONAL, false, 2, {tp_value_float(0), tp_value_float(-1)}, TP_ERR_INVALID_ARG,
         "normal expects std >= 0.0, but found std -1"},
        {TP_OP_LOG_NORMAL, false, 2, {tp_value_float(0), tp_value_float(0)}, TP_ERR_INVALID_ARG,
         "log_normal_ expects std > 0.0, but found std=0"},
        {TP_OP_EXPONENTIAL, false, 1, {tp_value_float(0)}, TP_ERR_INVALID_ARG,
         "exponential_ expects lambda > 0.0, but found lambda=0"},
        {TP_OP_CAUCHY, false, 2, {tp_value_float(0), tp_value_float(-2)}, TP_ERR_INVALID_ARG,
         "cauchy_ expects sigma > 0.0, but found sigma=-2"},
        {TP_OP_GEOMETRIC, false, 1, {tp_value_float(1)}, TP_ERR_INVALID_ARG,
         "geometric_ expects p to be in (0, 1), but got p=1"},
        {TP_OP_RANDOM, false, 2, {tp_value_int(7), tp_value_int(7)}, TP_ERR_INVALID_ARG,
         "random_ expects 'from' to be less than 'to', but got from=7 >= to=7"},
        {TP_OP_BERNOULLI, false, 1, {tp_value_float(1.5)}, TP_ERR_INVALID_ARG,
         "bernoulli_ expects p to be in [0, 1], but got p=1.5"},
        {TP_OP_BERNOULLI, true, 0, {{0}}, TP_ERR_TYPE, "bernoulli (probabilities in self) expects a floating point"},
        {TP_OP_MULTINOMIAL, false, 1, {tp_value_int(0)}, TP_ERR_INVALID_ARG, "cannot sample n_sample <= 0 samples"},
        {TP_OP_RAND_LIKE, true, 0, {{0}}, TP_ERR_TYPE, "\"check_uniform_bounds\" not implemented for 'int64'"},
        {TP_OP_RANDINT_LIKE, false, 2, {tp_value_int(3), tp_value_int(3)}, TP_ERR_INVALID_ARG,
         "random_ expects 'from' to be less than 'to', but got from=3 >= to=3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tp_value args[3] = {tp_value_tensor(tp_tensor_retain(cases[i].int_input ? xi : x)), cases[i].extra[0],
                            cases[i].extra[1]};
        tp_tensor *y = call(cases[i].op, args, 1 + cases[i].n, &st);
        CHECK_MSG(y == NULL && st == cases[i].code, "case %zu (%s): status %d", i, tp_op_name(cases[i].op), (int)st);
        CHECK_MSG(strstr(tp_last_error(), cases[i].msg) != NULL, "case %zu: message '%s', expected '%s'", i,
                  tp_last_error(), cases[i].msg);
        tp_tensor_free(y);
        tp_value_clear(&args[0]);
    }
    tp_tensor_free(x);
    tp_tensor_free(xi);
}

/* binomial(count, prob): mean n p and variance n p (1 - p), through the
 * inversion sampler (n p < 10), BTRS (n p >= 10) and the p > 0.5 mirror. */
TEST(test_binomial_moments) {
    const double cases[][2] = {{5, 0.3}, {40, 0.1}, {100, 0.4}, {1000, 0.9}, {7, 1.0}, {0, 0.5}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        double n = cases[k][0], p = cases[k][1];
        tp_tensor *c = zeros(TP_FLOAT64, N), *pr = zeros(TP_FLOAT64, 1);
        if (!c || !pr) return;
        for (int64_t i = 0; i < N; i++) ((double *)tp_tensor_data(c))[i] = n;
        ((double *)tp_tensor_data(pr))[0] = p;
        tp_value args[2] = {tp_value_tensor(c), tp_value_tensor(pr)};
        tp_status st;
        tp_tensor *y = call(TP_OP_BINOMIAL, args, 2, &st);
        CHECK_OK(st);
        if (y) {
            stats s = moments(y);
            double mean = n * p, var = n * p * (1 - p);
            CHECK_MSG(s.integral && s.min >= 0 && s.max <= n, "binomial(%g, %g): values outside 0..n", n, p);
            CHECK_MSG(fabs(s.mean - mean) < 5 * sqrt(var / N) + 1e-12, "binomial(%g, %g): mean %g", n, p, s.mean);
            CHECK_MSG(fabs(s.var - var) < 0.05 * var + 1e-12, "binomial(%g, %g): variance %g", n, p, s.var);
        }
        tp_tensor_free(y);
        tp_value_clear(&args[0]);
        tp_value_clear(&args[1]);
    }
}

/* op(x, p, ...) -> tuple (output, mask) or a tensor; both retained. */
static void call2(tp_op op, tp_value *args, int n, tp_tensor **a, tp_tensor **b) {
    tp_value out = tp_value_none();
    CHECK_OK(tp_op_call(op, args, n, NULL, &out));
    *a = *b = NULL;
    if (out.kind == TP_VAL_TENSOR) *a = tp_tensor_retain(out.u.tensor);
    else if (tp_value_len(&out) == 2) {
        *a = tp_tensor_retain(tp_value_at(&out, 0)->u.tensor);
        *b = tp_tensor_retain(tp_value_at(&out, 1)->u.tensor);
    }
    tp_value_clear(&out);
}

/* The dropouts in training mode: the kept fraction is 1 - p; output and mask
 * agree element by element (x * mask / (1 - p); the alpha forms' two values
 * a x + b and a alpha' + b); the feature forms keep or drop whole maps; the
 * alpha forms keep a standard normal input's mean 0 and variance 1. */
TEST(test_dropout_training) {
    const double p = 0.3, ap = -1.7580993408473766, a = 1.0 / sqrt((1 - p) * (1 + p * ap * ap)), b = -a * ap * p;
    enum { C = 1000, L = 40 };
    tp_tensor *x = NULL;
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, 3, (int64_t[]){5, C, L}, &x));
    if (!x) return;
    uint64_t seed = 88172645463325252ULL;
    for (int64_t i = 0; i < tp_tensor_numel(x); i++) { /* standard normal values (Box-Muller) */
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        double u1 = ((double)(seed >> 11) + 0.5) * 0x1.0p-53;
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        double u2 = (double)(seed >> 11) * 0x1.0p-53;
        ((float *)tp_tensor_data(x))[i] = (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
    }
    const float *xv = tp_tensor_data(x);
    int64_t n = tp_tensor_numel(x);
    static const tp_op ops[] = {TP_OP_NATIVE_DROPOUT, TP_OP_NATIVE_FEATURE_DROPOUT, TP_OP_NATIVE_ALPHA_DROPOUT,
                                TP_OP_FEATURE_DROPOUT, TP_OP_ALPHA_DROPOUT, TP_OP_FEATURE_ALPHA_DROPOUT};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        bool native = k < 3, feature = k == 1 || k == 3 || k == 5, alpha = k == 2 || k == 4 || k == 5;
        tp_value args[3] = {tp_value_tensor(tp_tensor_retain(x)), tp_value_float(p), tp_value_bool(true)};
        tp_tensor *y = NULL, *m = NULL;
        call2(ops[k], args, native ? 2 : 3, &y, &m);
        const char *name = tp_op_name(ops[k]);
        CHECK_MSG(y && (!native || m), "%s: no result", name);
        if (y) {
            const float *yv = tp_tensor_data(y);
            int64_t kept = 0, bad = 0, maps_mixed = 0;
            for (int64_t i = 0; i < n; i++) {
                double xi = xv[i], yi = yv[i];
                bool is_kept = alpha ? fabs(yi - (a * xi + b)) < 1e-4 : fabs(yi - xi / (1 - p)) < 1e-4;
                bool is_dropped = alpha ? fabs(yi - (a * ap + b)) < 1e-4 : yi == 0.0;
                if (!is_kept && !is_dropped) bad++;
                kept += is_kept && !is_dropped;
                if (m) {
                    int64_t mi = feature ? i / L : i;
                    double mv = tp_tensor_item_f64(m, mi);
                    if ((mv != 0) != (is_kept && !is_dropped) && !(is_kept && is_dropped)) bad++;
                }
                if (feature && i % L != 0) {
                    bool prev_kept = alpha ? fabs(yv[i - 1] - (a * xv[i - 1] + b)) < 1e-4
                                           : fabs(yv[i - 1] - xv[i - 1] / (1 - p)) < 1e-4;
                    if (prev_kept != is_kept && !is_dropped) maps_mixed++;
                }
            }
            CHECK_MSG(bad == 0, "%s: %" PRId64 " values are neither kept nor dropped consistently", name, bad);
            CHECK_MSG(maps_mixed == 0, "%s: feature maps partly dropped", name);
            double units = feature ? 5.0 * C : (double)n, frac = (double)kept / (double)n;
            CHECK_MSG(fabs(frac - (1 - p)) < 5 * sqrt(p * (1 - p) / units), "%s: kept fraction %g, expected %g", name,
                      frac, 1 - p);
            if (alpha) {
                stats s = moments(y);
                CHECK_MSG(fabs(s.mean) < 0.02 && fabs(s.var - 1) < 0.03, "%s: mean %g variance %g, expected 0 and 1",
                          name, s.mean, s.var);
            }
            if (m && feature)
                CHECK_MSG(tp_tensor_ndim(m) == 3 && tp_tensor_sizes(m)[2] == 1, "%s: the mask is per feature map", name);
            if (m && k == 0) CHECK_MSG(tp_tensor_dtype(m) == TP_BOOL, "native_dropout: a bool mask");
        }
        tp_tensor_free(y);
        tp_tensor_free(m);
        tp_value_clear(&args[0]);
    }
    tp_tensor_free(x);
}

/* sample(logits, temperature, top_k, top_p): frequencies follow
 * softmax(logits / temperature) renormalised over the tokens top_k and
 * top_p leave; the others never come. */
TEST(test_sample_frequencies) {
    enum { B = 20000, V = 5 };
    const float row[V] = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f};
    tp_tensor *l = NULL;
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, 2, (int64_t[]){B, V}, &l));
    if (!l) return;
    for (int64_t b = 0; b < B; b++)
        for (int v = 0; v < V; v++) ((float *)tp_tensor_data(l))[b * V + v] = row[v];
    /* temperature, top_k, top_p -> the tokens allowed */
    const struct {
        double t;
        int64_t k;
        double p;
        int allowed[V];
    } cfg[] = {{1.0, 0, 1.0, {1, 1, 1, 1, 1}}, {0.5, 0, 1.0, {1, 1, 1, 1, 1}}, {1.0, 2, 1.0, {1, 0, 1, 0, 0}},
               {1.0, 0, 0.7, {1, 0, 1, 0, 0}}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        double w[V], z = 0;
        for (int v = 0; v < V; v++) z += w[v] = cfg[c].allowed[v] ? exp(row[v] / cfg[c].t) : 0.0;
        tp_value args[4] = {tp_value_tensor(tp_tensor_retain(l)), tp_value_float(cfg[c].t), tp_value_int(cfg[c].k),
                            tp_value_float(cfg[c].p)};
        tp_status st;
        tp_tensor *y = call(TP_OP_SAMPLE, args, 4, &st);
        CHECK_OK(st);
        if (y) {
            CHECK(tp_tensor_dtype(y) == TP_INT64 && tp_tensor_numel(y) == B);
            int64_t count[V] = {0};
            for (int64_t b = 0; b < B; b++) {
                int64_t t = (int64_t)tp_tensor_item_f64(y, b);
                CHECK_MSG(t >= 0 && t < V, "sample: token %" PRId64 " out of range", t);
                if (t >= 0 && t < V) count[t]++;
            }
            for (int v = 0; v < V; v++) {
                double want = w[v] / z, got = (double)count[v] / B;
                CHECK_MSG(fabs(got - want) < 5 * sqrt(want * (1 - want) / B) + 1e-12,
                          "sample config %zu: token %d frequency %g, expected %g", c, v, got, want);
            }
        }
        tp_tensor_free(y);
        tp_value_clear(&args[0]);
    }
    tp_tensor_free(l);
}

TEST(test_flags) {
    const tp_op ops[] = {TP_OP_UNIFORM, TP_OP_NORMAL_FUNCTIONAL, TP_OP_LOG_NORMAL, TP_OP_EXPONENTIAL,
                         TP_OP_CAUCHY, TP_OP_GEOMETRIC, TP_OP_RANDOM, TP_OP_BERNOULLI, TP_OP_POISSON,
                         TP_OP_MULTINOMIAL, TP_OP_RAND_LIKE, TP_OP_RANDN_LIKE, TP_OP_RANDINT_LIKE,
                         TP_OP_RANDINT, TP_OP_RANDPERM, TP_OP_NORMAL, TP_OP_RAND, TP_OP_RANDN, TP_OP_BINOMIAL,
                         TP_OP_NATIVE_DROPOUT, TP_OP_NATIVE_FEATURE_DROPOUT, TP_OP_NATIVE_ALPHA_DROPOUT, TP_OP_SAMPLE,
                         TP_OP_ALPHA_DROPOUT, TP_OP_FEATURE_DROPOUT, TP_OP_FEATURE_ALPHA_DROPOUT};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        CHECK_MSG(tp_op_flags(ops[i]) & TP_OPF_RANDOM, "%s is not flagged random", tp_op_name(ops[i]));
}

int main(int argc, char **argv) {
    tp_ops_init();
    static const tp_test_case tests[] = {T(test_fills),          T(test_rand_randn),       T(test_cauchy_quartiles), T(test_bernoulli_probabilities),
                                         T(test_poisson_moments), T(test_multinomial),     T(test_randperm_randint_normal),
                                         T(test_argument_errors), T(test_binomial_moments), T(test_dropout_training),
                                         T(test_sample_frequencies), T(test_flags)};
    return tp_test_run(tests, sizeof tests / sizeof tests[0], argc, argv);
}
