/*
 * test_gemm.c - the single-precision GEMM (src/cpu/gemm.h) against a naive
 * reference that accumulates in double, at every ISA level this CPU
 * supports (scalar always): shapes with 0, 1, 7, 17, 33, 255 and 1000,
 * transposed A and B, packed and unpacked B, every epilogue field, thread
 * splits run one after another and on real threads.
 *
 * Tolerance, per element of C:
 *   |got - ref| <= 1e-5 * (|alpha| * sum_p |a_ip * b_pj| + |beta * c_old|
 *                          + |bias| + |residual|) + 1e-6
 * (the act used here, leaky ReLU, is 1-Lipschitz and keeps the bound).
 * Results must be bitwise identical for every thread count and split: each
 * element's K reduction order does not depend on the split.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cpu/conv_nhwc.h"
#include "cpu/gemm.h"
#include "test_util.h"

/* ---- helpers ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rng_next(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}
static float rng_float(void) { return (float)((double)rng_next() / 4294967296.0 * 2.0 - 1.0); }
static int64_t rng_range(int64_t lo, int64_t hi) { return lo + (int64_t)(rng_next() % (uint32_t)(hi - lo + 1)); }

static void *alloc_aligned(size_t bytes) {
    size_t rounded = (bytes + 63) / 64 * 64;
    return aligned_alloc(64, rounded ? rounded : 64);
}

static atomic_long act_elements;

/* Leaky ReLU; counts the elements it was given. */
static void act_leaky_relu(float *ptr, int64_t n, const void *ctx) {
    const float slope = *(const float *)ctx;
    for (int64_t i = 0; i < n; i++) ptr[i] = ptr[i] > 0.0f ? ptr[i] : slope * ptr[i];
    atomic_fetch_add(&act_elements, (long)n);
}
static const float leaky_slope = 0.125f;

typedef struct gemm_case {
    int64_t m, n, k;
    bool trans_a, trans_b, packed_b;
    float alpha, beta;
    int bias; /* 0 none, 1 per column, 2 per row */
    bool residual, act;
    bool implicit_a; /* A given through a_fill (as an implicit GEMM convolution does) */
} gemm_case;

/* Everything one case needs: operands, expected result, bounds. */
typedef struct gemm_fixture {
    gemm_case cs;
    int64_t lda_pad, ldb_pad, ldc, ld_res;
    float *a, *b, *c_init, *bias, *residual;
    double *ref, *bound;
} gemm_fixture;

static void fixture_init(gemm_fixture *fx, gemm_case cs) {
    fx->cs = cs;
    const int64_t m = cs.m, n = cs.n, k = cs.k;
    fx->lda_pad = rng_range(0, 3);
    fx->ldb_pad = rng_range(0, 3);
    fx->ldc = n + rng_range(0, 5);
    fx->ld_res = n + rng_range(0, 2);
    const int64_t a_elems = cs.trans_a ? k * (m + fx->lda_pad) : m * (k + fx->lda_pad);
    const int64_t b_elems = cs.trans_b ? n * (k + fx->ldb_pad) : k * (n + fx->ldb_pad);
    fx->a = malloc(sizeof(float) * (size_t)(a_elems + 1));
    fx->b = malloc(sizeof(float) * (size_t)(b_elems + 1));
    fx->c_init = malloc(sizeof(float) * (size_t)(m * fx->ldc + 1));
    fx->bias = malloc(sizeof(float) * (size_t)((m > n ? m : n) + 1));
    fx->residual = malloc(sizeof(float) * (size_t)(m * fx->ld_res + 1));
    fx->ref = malloc(sizeof(double) * (size_t)(m * n + 1));
    fx->bound = malloc(sizeof(double) * (size_t)(m * n + 1));
    for (int64_t i = 0; i < a_elems; i++) fx->a[i] = rng_float();
    for (int64_t i = 0; i < b_elems; i++) fx->b[i] = rng_float();
    for (int64_t i = 0; i < m * fx->ldc; i++) fx->c_init[i] = rng_float();
    if (cs.beta == 0.0f) { /* beta 0 must not read C: NaN would poison it */
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) fx->c_init[i * fx->ldc + j] = NAN;
    }
    for (int64_t i = 0; i < (m > n ? m : n); i++) fx->bias[i] = rng_float();
    for (int64_t i = 0; i < m * fx->ld_res; i++) fx->residual[i] = rng_float();

    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            double sum = 0.0, abs_sum = 0.0;
            for (int64_t p = 0; p < k; p++) {
                const double av = cs.trans_a ? fx->a[p * (m + fx->lda_pad) + i] : fx->a[i * (k + fx->lda_pad) + p];
                const double bv = cs.trans_b ? fx->b[j * (k + fx->ldb_pad) + p] : fx->b[p * (n + fx->ldb_pad) + j];
                sum += av * bv;
                abs_sum += fabs(av * bv);
            }
            double v = (double)cs.alpha * sum;
            double bound = fabs((double)cs.alpha) * abs_sum;
            if (cs.beta != 0.0f) {
                v += (double)cs.beta * fx->c_init[i * fx->ldc + j];
                bound += fabs((double)cs.beta * fx->c_init[i * fx->ldc + j]);
            }
            if (cs.bias) {
                const double bv = cs.bias == 2 ? fx->bias[i] : fx->bias[j];
                v += bv;
                bound += fabs(bv);
            }
            if (cs.residual) {
                v += fx->residual[i * fx->ld_res + j];
                bound += fabs((double)fx->residual[i * fx->ld_res + j]);
            }
            if (cs.act && v <= 0.0) v *= leaky_slope;
            fx->ref[i * n + j] = v;
            fx->bound[i * n + j] = 1e-5 * bound + 1e-6;
        }
    }
}

static void fixture_free(gemm_fixture *fx) {
    free(fx->a);
    free(fx->b);
    free(fx->c_init);
    free(fx->bias);
    free(fx->residual);
    free(fx->ref);
    free(fx->bound);
}

/* a_fill for implicit-A cases: rows of the fixture's A, either layout. */
static atomic_long fill_calls;
static void fill_from_fixture(const void *ctx, int64_t i0, int rows, int64_t p0, int64_t kc, float *dst,
                              void *scratch) {
    (void)scratch;
    const gemm_fixture *fx = ctx;
    const int64_t lda = fx->cs.trans_a ? fx->cs.m + fx->lda_pad : fx->cs.k + fx->lda_pad;
    atomic_fetch_add(&fill_calls, 1);
    for (int i = 0; i < rows; i++)
        for (int64_t p = 0; p < kc; p++)
            dst[i * kc + p] = fx->cs.trans_a ? fx->a[(p0 + p) * lda + i0 + i] : fx->a[(i0 + i) * lda + p0 + p];
}

/* The tp_gemm for the fixture at isa, writing into c; packed B from
 * packed (may be NULL when not packed), with B transposed for the dot path
 * from packed_bt (may be NULL). */
static tp_gemm fixture_gemm(const gemm_fixture *fx, int isa, float *c, const void *packed, const float *packed_bt) {
    const gemm_case *cs = &fx->cs;
    tp_gemm g = {0};
    g.isa = isa;
    g.m = cs->m;
    g.n = cs->n;
    g.k = cs->k;
    g.a = fx->a;
    if (cs->trans_a) {
        g.rs_a = 1;
        g.cs_a = cs->m + fx->lda_pad;
    } else {
        g.rs_a = cs->k + fx->lda_pad;
        g.cs_a = 1;
    }
    if (cs->packed_b) {
        g.packed_b = packed;
        g.packed_bt = packed_bt;
    } else {
        g.b = fx->b;
        if (cs->trans_b) {
            g.rs_b = 1;
            g.cs_b = cs->k + fx->ldb_pad;
        } else {
            g.rs_b = cs->n + fx->ldb_pad;
            g.cs_b = 1;
        }
    }
    g.c = c;
    g.ldc = fx->ldc;
    g.ep.alpha = cs->alpha;
    g.ep.beta = cs->beta;
    g.ep.bias = cs->bias ? fx->bias : NULL;
    g.ep.bias_per_row = cs->bias == 2;
    g.ep.residual = cs->residual ? fx->residual : NULL;
    g.ep.ld_residual = fx->ld_res;
    g.ep.act = cs->act ? act_leaky_relu : NULL;
    g.ep.act_ctx = &leaky_slope;
    if (cs->implicit_a) {
        g.a = NULL;
        g.a_fill = fill_from_fixture;
        g.a_ctx = fx;
    }
    return g;
}

typedef struct thread_arg {
    const tp_gemm *g;
    int ith, nth;
    void *workspace;
    tp_claim *claims;
} thread_arg;

static void *thread_main(void *p) {
    thread_arg *arg = p;
    tp__gemm_run_claimed(arg->g, arg->ith, arg->nth, arg->workspace, arg->claims);
    return NULL;
}

/* Run with nth threads (real pthreads when threaded, else one after
 * another: in reverse order to catch dependences between threads, or, with
 * claims, in order, so that thread 0 runs its own units and then takes
 * every other thread's from their backs, and the others find none left). */
static void run_split(const tp_gemm *g, int nth, bool threaded, bool claimed) {
    void *ws = alloc_aligned(tp__gemm_workspace_bytes(g, nth));
    tp_claim *claims = claimed ? alloc_aligned(sizeof(tp_claim) * 16) : NULL;
    if (claims) memset(claims, 0, sizeof(tp_claim) * 16);
    if (threaded) {
        pthread_t tids[16];
        thread_arg args[16];
        for (int t = 0; t < nth; t++) {
            args[t] = (thread_arg){g, t, nth, ws, claims};
            pthread_create(&tids[t], NULL, thread_main, &args[t]);
        }
        for (int t = 0; t < nth; t++) pthread_join(tids[t], NULL);
    } else if (claims) {
        for (int t = 0; t < nth; t++) tp__gemm_run_claimed(g, t, nth, ws, claims);
    } else {
        for (int t = nth - 1; t >= 0; t--) tp__gemm_run(g, t, nth, ws);
    }
    free(claims);
    free(ws);
}

static int case_failures = 0;
static int dot_runs = 0; /* cases run with the dot path (gemm.h) */

/* Check c against the reference, and that the padding beyond n in each row
 * of C was left alone. */
static bool check_result(const gemm_fixture *fx, const float *c, int isa, const char *what) {
    const gemm_case *cs = &fx->cs;
    for (int64_t i = 0; i < cs->m; i++) {
        for (int64_t j = 0; j < fx->ldc; j++) {
            const float got = c[i * fx->ldc + j];
            if (j >= cs->n) {
                const float want = fx->c_init[i * fx->ldc + j];
                if (memcmp(&got, &want, sizeof got) != 0) {
                    fprintf(stderr, "  isa %d %s: %lldx%lldx%lld wrote C padding (%lld, %lld)\n", isa, what,
                            (long long)cs->m, (long long)cs->k, (long long)cs->n, (long long)i, (long long)j);
                    return false;
                }
                continue;
            }
            const double ref = fx->ref[i * cs->n + j];
            if (!(fabs((double)got - ref) <= fx->bound[i * cs->n + j])) {
                fprintf(stderr,
                        "  isa %d %s: M=%lld K=%lld N=%lld transA=%d transB=%d packed=%d alpha=%g beta=%g bias=%d "
                        "res=%d act=%d: C(%lld, %lld) = %.9g, expected %.9g (bound %.3g)\n",
                        isa, what, (long long)cs->m, (long long)cs->k, (long long)cs->n, cs->trans_a, cs->trans_b,
                        cs->packed_b, cs->alpha, cs->beta, cs->bias, cs->residual, cs->act, (long long)i,
                        (long long)j, got, ref, fx->bound[i * cs->n + j]);
                return false;
            }
        }
    }
    return true;
}

/* One case at one ISA level: nth 1 checked against the reference, every
 * other split checked bitwise against nth 1. */
static void run_case_isa(const gemm_fixture *fx, int isa, bool all_splits) {
    atomic_store(&fill_calls, 0);
    const gemm_case *cs = &fx->cs;
    const size_t c_elems = (size_t)(cs->m * fx->ldc + 1);
    float *c_one = malloc(sizeof(float) * c_elems);
    float *c_split = malloc(sizeof(float) * c_elems);
    void *packed = NULL, *packed_bt = NULL;
    if (cs->packed_b) {
        packed = alloc_aligned(tp__gemm_packed_b_bytes(isa, cs->k, cs->n));
        const bool tb = cs->trans_b;
        const int64_t rs_b = tb ? 1 : cs->n + fx->ldb_pad, cs_b = tb ? cs->k + fx->ldb_pad : 1;
        tp__gemm_pack_b(isa, cs->k, cs->n, fx->b, rs_b, cs_b, packed);
        /* as fast_linalg.c packs a constant weight: also transposed where
         * the dot path (gemm.h) applies */
        const size_t bt_bytes = tp__gemm_packed_bt_bytes(isa, cs->k, cs->n);
        if (bt_bytes) {
            packed_bt = alloc_aligned(bt_bytes);
            tp__gemm_pack_bt(isa, cs->k, cs->n, fx->b, rs_b, cs_b, packed_bt);
        }
    }
    memcpy(c_one, fx->c_init, sizeof(float) * c_elems);
    tp_gemm g = fixture_gemm(fx, isa, c_one, packed, packed_bt);
    if (packed_bt && !cs->trans_a && !cs->implicit_a && cs->m >= 2) {
        dot_runs++;
        if (!tp__gemm_uses_dot(&g)) {
            fprintf(stderr, "  isa %d: M=%lld K=%lld N=%lld: the dot path does not apply\n", isa, (long long)cs->m,
                    (long long)cs->k, (long long)cs->n);
            case_failures++;
        }
    }
    atomic_store(&act_elements, 0);
    run_split(&g, 1, false, false);
    bool ok = check_result(fx, c_one, isa, "nth=1");
    if (ok && cs->act && atomic_load(&act_elements) != (long)(cs->m * cs->n)) {
        fprintf(stderr, "  isa %d: act saw %ld elements, expected %lld\n", isa, atomic_load(&act_elements),
                (long long)(cs->m * cs->n));
        ok = false;
    }
    static const int splits[] = {2, 3, 4, 16};
    const int n_splits = all_splits ? 4 : 1;
    for (int s = 0; ok && s < 4 * n_splits; s++) {
        const int nth = splits[s % n_splits];
        const bool threaded = (s / n_splits) % 2 == 1, claimed = s >= 2 * n_splits;
        memcpy(c_split, fx->c_init, sizeof(float) * c_elems);
        tp_gemm gs = fixture_gemm(fx, isa, c_split, packed, packed_bt);
        run_split(&gs, nth, threaded, claimed);
        if (memcmp(c_split, c_one, sizeof(float) * (size_t)(cs->m * fx->ldc)) != 0) {
            char what[64];
            snprintf(what, sizeof what, "nth=%d%s%s", nth, threaded ? " threads" : "", claimed ? " claimed" : "");
            if (check_result(fx, c_split, isa, what))
                fprintf(stderr, "  isa %d %s: M=%lld K=%lld N=%lld: within tolerance but not bitwise equal to nth=1\n",
                        isa, what, (long long)cs->m, (long long)cs->k, (long long)cs->n);
            ok = false;
        }
    }
    if (ok && cs->implicit_a && cs->m > 0 && cs->n > 0 && cs->k > 0) {
        /* the same product with A given explicitly: the same micro-kernel
         * calls in the same K order, so bitwise the same (without the dot
         * path, which an implicit A never takes) */
        CHECK(atomic_load(&fill_calls) > 0);
        gemm_fixture ex = *fx;
        ex.cs.implicit_a = false;
        memcpy(c_split, fx->c_init, sizeof(float) * c_elems);
        tp_gemm ge = fixture_gemm(&ex, isa, c_split, packed, NULL);
        run_split(&ge, 1, false, false);
        if (memcmp(c_split, c_one, sizeof(float) * (size_t)(cs->m * fx->ldc)) != 0) {
            fprintf(stderr, "  isa %d: M=%lld K=%lld N=%lld: implicit A differs from explicit A\n", isa,
                    (long long)cs->m, (long long)cs->k, (long long)cs->n);
            ok = false;
        }
    }
    if (!ok) case_failures++;
    free(packed_bt);
    free(packed);
    free(c_one);
    free(c_split);
}

static void run_case(gemm_case cs, bool all_splits) {
    gemm_fixture fx;
    fixture_init(&fx, cs);
    const int best = tp__gemm_best_isa();
    for (int isa = TP_ISA_SCALAR; isa <= best; isa++) run_case_isa(&fx, isa, all_splits);
    fixture_free(&fx);
}

/* ---- tests ---- */

TEST(test_isa_detection) {
    const int best = tp__gemm_best_isa();
    CHECK(best >= TP_ISA_SCALAR && best <= TP_ISA_AVX512);
    CHECK(tp__gemm_best_isa() == best);
    tp_gemm_cache_info caches = tp__gemm_cache_info();
    CHECK(caches.l1d >= 16 * 1024);
    CHECK(caches.l2 >= 128 * 1024);
    for (int isa = TP_ISA_SCALAR; isa <= best; isa++) {
        int mr = 0, nr = 0;
        tp__gemm_register_block(isa, &mr, &nr);
        CHECK(mr >= 1 && nr >= 1);
        CHECK(tp__gemm_packed_b_bytes(isa, 0, 5) == 0);
        /* full panels NR wide; a last partial one as wide as the kernel
         * reads: a vector (16 floats) at AVX-512, NR at the other levels */
        const size_t vw = isa == TP_ISA_AVX512 ? 16 : (size_t)nr;
        CHECK(tp__gemm_packed_b_bytes(isa, 3, 1) == 3 * vw * sizeof(float));
        CHECK(tp__gemm_packed_b_bytes(isa, 3, nr) == 3 * (size_t)nr * sizeof(float));
        CHECK(tp__gemm_packed_b_bytes(isa, 3, 2 * nr + 1) == 3 * (2 * (size_t)nr + vw) * sizeof(float));
    }
}

/* Every combination of the edge sizes, small enough to be quick. */
TEST(test_edge_sizes) {
    static const int64_t sizes[] = {0, 1, 7, 17, 33};
    case_failures = 0;
    for (size_t im = 0; im < TP_ARRAY_LEN(sizes); im++)
        for (size_t in = 0; in < TP_ARRAY_LEN(sizes); in++)
            for (size_t ik = 0; ik < TP_ARRAY_LEN(sizes); ik++) {
                gemm_case cs = {sizes[im], sizes[in], sizes[ik], false, false, false, 1.0f, 0.0f, 0, false, false, false};
                cs.trans_a = (im + ik) % 2;
                cs.trans_b = (in + ik) % 3 == 0;
                cs.packed_b = (im + in + ik) % 2;
                run_case(cs, true);
            }
    CHECK(case_failures == 0);
}

/* Sizes past the register and cache blocks (several K and N blocks; M x N
 * x K: 70 x 20 x 3100 takes three of AVX2's long K blocks, gemm.c; 197 x
 * 1152 x 384 (ViT's QKV), 256 x 130 x 600 and 257 x 64 x 300 sit at
 * AVX-512's jr-outer row bound, with short K blocks up to it and long ones
 * past it). */
TEST(test_large_sizes) {
    static const int64_t shapes[][3] = {
        {255, 255, 255}, {1000, 33, 17}, {17, 1000, 33}, {33, 17, 1000},  {7, 255, 1000},
        {255, 1000, 7},  {1, 1000, 255}, {1000, 1, 33},  {9, 700, 700},   {3, 40, 5000},
        {70, 20, 3100},  {197, 1152, 384}, {256, 130, 600}, {257, 64, 300},
    };
    case_failures = 0;
    for (size_t s = 0; s < TP_ARRAY_LEN(shapes); s++) {
        for (int variant = 0; variant < 2; variant++) {
            gemm_case cs = {shapes[s][0], shapes[s][1], shapes[s][2], variant, s % 2, !variant, 1.0f, 0.0f,
                            0, false, false, false};
            run_case(cs, variant == 0 && cs.m * cs.n * cs.k < 3000000);
        }
    }
    CHECK(case_failures == 0);
}

/* N of 16 to 32, where AVX-512 runs its 12 x 32 kernel (one zmm, a zmm
 * and a ymm, or two zmm a row): row counts around its 12, both A layouts
 * (transposed A is packed), packed and unpacked B, K past a K block, the
 * epilogue. */
TEST(test_narrow_n) {
    static const int64_t ns[] = {9, 16, 17, 24, 25, 32};
    static const int64_t ms[] = {1, 11, 12, 13, 25, 100};
    case_failures = 0;
    for (size_t in = 0; in < TP_ARRAY_LEN(ns); in++)
        for (size_t im = 0; im < TP_ARRAY_LEN(ms); im++) {
            const int v = (int)(in + im);
            gemm_case cs = {ms[im], ns[in], v % 3 == 0 ? 700 : 16 + v, v % 2 == 1, v % 4 == 3, v % 2 == 0,
                            v % 5 == 4 ? -0.5f : 1.0f, (float)(v % 3) * 0.5f, v % 3, v % 4 == 1, v % 3 != 1, v % 7 == 6};
            run_case(cs, v % 5 == 0);
        }
    CHECK(case_failures == 0);
}

/* alpha, beta 0 / 1 / 0.5, bias per column and per row, residual, act. */
TEST(test_epilogue) {
    static const float betas[] = {0.0f, 1.0f, 0.5f};
    static const int64_t shapes[][3] = {{7, 33, 17}, {33, 70, 400}, {1, 10, 0}, {13, 129, 5}};
    case_failures = 0;
    for (size_t s = 0; s < TP_ARRAY_LEN(shapes); s++)
        for (int ib = 0; ib < 3; ib++)
            for (int bias = 0; bias < 3; bias++)
                for (int extra = 0; extra < 4; extra++) {
                    gemm_case cs = {shapes[s][0], shapes[s][1], shapes[s][2], extra == 3, false, extra & 1,
                                    extra == 2 ? -0.75f : 1.0f, betas[ib], bias, extra & 1, extra >= 2, false};
                    run_case(cs, (ib + bias + extra) % 4 == 0);
                }
    CHECK(case_failures == 0);
}

/* Random shapes and layouts. */
TEST(test_random) {
    case_failures = 0;
    for (int t = 0; t < 40; t++) {
        gemm_case cs;
        cs.m = rng_range(0, 150);
        cs.n = rng_range(0, 150);
        cs.k = rng_range(0, 400);
        cs.trans_a = rng_next() & 1;
        cs.trans_b = rng_next() & 1;
        cs.packed_b = rng_next() & 1;
        cs.alpha = (rng_next() & 1) ? 1.0f : rng_float();
        cs.beta = (float)(rng_next() % 3) * 0.5f;
        cs.bias = (int)(rng_next() % 3);
        cs.residual = rng_next() & 1;
        cs.act = rng_next() & 1;
        cs.implicit_a = false;
        run_case(cs, t % 4 == 0);
    }
    CHECK(case_failures == 0);
}

/* The dot path (gemm.h): a packed B of N <= 15 with K >= 64 and >= 16 N,
 * transposed beside it, and row-major A: blocks of 1-4 rows and 1-4
 * columns, K at its least and with tails of 0-15, every epilogue field;
 * against the reference, bitwise across thread splits, and at AVX-512 run
 * by the dot kernel (tp__gemm_uses_dot; the other levels run their kernels
 * on the same cases). */
TEST(test_dot_path) {
    static const int64_t ms[] = {2, 3, 5, 8, 33};
    static const int64_t k_extra[] = {0, 15, 448, 937}; /* over the least K: tails 0, 15, 0, 9 */
    case_failures = 0;
    dot_runs = 0;
    int t = 0;
    for (size_t i = 0; i < TP_ARRAY_LEN(ms); i++)
        for (int64_t n = 1; n <= TP__GEMM_DOT_MAX_N; n++, t++) {
            const int64_t k_min = 16 * n > TP__GEMM_DOT_MIN_K ? 16 * n : TP__GEMM_DOT_MIN_K;
            gemm_case cs = {.m = ms[i], .n = n, .k = k_min + k_extra[t % 4], .trans_b = t & 1, .packed_b = true,
                            .alpha = t % 5 == 0 ? 0.5f : 1.0f, .beta = (float)(t % 3) * 0.5f, .bias = t % 3,
                            .residual = (t / 3) & 1, .act = (t / 2) & 1};
            run_case(cs, t % 8 == 0);
        }
    CHECK(case_failures == 0);
    CHECK(dot_runs == (tp__gemm_best_isa() >= TP_ISA_AVX512 ? t : 0));
    /* and not for an A read by columns, one row, a short K (under 64 or
     * 16 N), N = 16 (the 12 x 32 kernel loses no lane) or more; nor is B
     * packed transposed for those shapes */
    const float one = 1.0f;
    tp_gemm g = {.isa = tp__gemm_best_isa(), .m = 4, .n = 4, .k = 64, .a = &one, .rs_a = 64, .cs_a = 1,
                 .packed_b = &one, .packed_bt = &one};
    const bool avx512 = tp__gemm_best_isa() >= TP_ISA_AVX512;
    CHECK(tp__gemm_uses_dot(&g) == avx512);
    g.cs_a = 4;
    CHECK(!tp__gemm_uses_dot(&g));
    g.cs_a = 1;
    g.m = 1;
    CHECK(!tp__gemm_uses_dot(&g));
    g.m = 4;
    g.k = 63;
    CHECK(!tp__gemm_uses_dot(&g));
    g.n = 10;
    g.k = 160;
    CHECK(tp__gemm_uses_dot(&g) == avx512);
    g.k = 159;
    CHECK(!tp__gemm_uses_dot(&g) && tp__gemm_packed_bt_bytes(g.isa, 159, 10) == 0);
    g.n = 16;
    g.k = 4096;
    CHECK(!tp__gemm_uses_dot(&g) && tp__gemm_packed_bt_bytes(g.isa, 4096, 16) == 0);
    g.n = 17;
    CHECK(!tp__gemm_uses_dot(&g));
}

/* Implicit A (a_fill): odd shapes, several K blocks and more rows than one
 * filled block, both A layouts behind the callback, packed and unpacked B,
 * the epilogue; checked against the reference, across thread splits, and
 * bitwise against the same product with A explicit. */
TEST(test_implicit_a) {
    /* {m, n, k}; {32, 200, 784}: few rows (the jr_outer order) over
     * several K blocks, each block of A filled in turn (B smaller than L2:
     * not filled whole; test_loop_orders has that case) */
    static const int64_t shapes[][3] = {{1, 1, 1},       {7, 17, 33},     {255, 33, 700},   {700, 64, 1152},
                                        {49, 130, 2000}, {196, 256, 1152}, {32, 200, 784}};
    case_failures = 0;
    for (size_t s = 0; s < TP_ARRAY_LEN(shapes); s++)
        for (int v = 0; v < 4; v++) {
            gemm_case cs = {shapes[s][0], shapes[s][1], shapes[s][2], v == 1, v == 2, v != 2, 1.0f, v == 3 ? 1.0f : 0.0f,
                            v & 1 ? 1 : 2, v >= 2, v != 1, true};
            run_case(cs, v == 0);
        }
    for (int t = 0; t < 12; t++) {
        gemm_case cs = {rng_range(0, 300), rng_range(0, 90), rng_range(0, 900), rng_next() & 1, false, rng_next() & 1,
                        1.0f, (float)(rng_next() % 2), (int)(rng_next() % 3), rng_next() & 1, rng_next() & 1, true};
        run_case(cs, t % 4 == 0);
    }
    CHECK(case_failures == 0);
}

/* Rows of a row-major matrix for a_fill (test_loop_orders). */
typedef struct rows_src {
    const float *a;
    int64_t lda;
} rows_src;
static void fill_rows(const void *ctx, int64_t i0, int rows, int64_t p0, int64_t kc, float *dst, void *scratch) {
    (void)scratch;
    const rows_src *src = ctx;
    for (int i = 0; i < rows; i++) memcpy(dst + i * kc, src->a + (i0 + i) * src->lda + p0, (size_t)kc * sizeof(float));
}

/* The loop order does not change the bits: a product of few rows against
 * a pre-packed B of several K blocks (panel by panel, each panel's K
 * blocks in turn: tp__gemm_rect_panels, A read in place, or filled whole
 * first when B is larger than L2) equals the same product with B unpacked
 * (K blocks outside the column panels, the same K blocks), and so does
 * the product with A filled and a smaller B (the column-block order), at
 * every ISA level (B larger than L2: the vector levels), for an edge panel
 * (N = 200), a bias in registers and 1 to 3 threads. */
TEST(test_loop_orders) {
    /* big: 49 rows of A in 3/8 of L2 (more than the column-block order's
     * quarter of L2 for its block of A), B then 2.7x L2 */
    const int64_t k_big = 3 * tp__gemm_cache_info().l2 / 8 / (49 * (int64_t)sizeof(float)) / 16 * 16;
    const int64_t cases[][3] = {{200, 784, 200}, {49, 784, 200},   {32, 784, 200},  {7, 784, 200}, {2, 784, 200},
                                {200, 1000, 200}, {49, 1000, 200}, {49, k_big, 200}, {30, k_big, 200}};
    const int best = tp__gemm_best_isa();
    for (size_t ic = 0; ic < TP_ARRAY_LEN(cases); ic++) {
        const int64_t m = cases[ic][0], k = cases[ic][1], n = cases[ic][2];
        const bool big = k == k_big;
        float *a = alloc_aligned((size_t)(m * k) * sizeof(float)), *b = alloc_aligned((size_t)(k * n) * sizeof(float));
        float *bias = alloc_aligned((size_t)n * sizeof(float)), *want = alloc_aligned((size_t)(m * n) * sizeof(float));
        float *got = alloc_aligned((size_t)(m * n) * sizeof(float));
        for (int64_t i = 0; i < m * k; i++) a[i] = rng_float();
        for (int64_t i = 0; i < k * n; i++) b[i] = rng_float();
        for (int64_t i = 0; i < n; i++) bias[i] = rng_float();
        const rows_src src = {a, k};
        for (int isa = big ? TP_ISA_SCALAR + 1 : TP_ISA_SCALAR; isa <= best; isa++) {
            void *packed = alloc_aligned(tp__gemm_packed_b_bytes(isa, k, n));
            tp__gemm_pack_b(isa, k, n, b, n, 1, packed);
            tp_gemm g = {0};
            g.isa = isa;
            g.m = m;
            g.n = n;
            g.k = k;
            g.a = a;
            g.rs_a = k;
            g.cs_a = 1;
            g.b = b;
            g.rs_b = n;
            g.cs_b = 1;
            g.c = want;
            g.ldc = n;
            g.ep = tp__gemm_epilogue_default();
            g.ep.bias = bias;
            run_split(&g, 1, false, false);
            for (int implicit = 0; implicit < 2; implicit++)
                for (int nth = 1; nth <= 3; nth++) {
                    tp_gemm gp = g;
                    gp.b = NULL;
                    gp.packed_b = packed;
                    gp.c = got;
                    if (implicit) {
                        gp.a = NULL;
                        gp.a_fill = fill_rows;
                        gp.a_ctx = &src;
                        /* B larger than L2: all of A filled at once (the workspace holds it) */
                        if (big && m == 49)
                            CHECK_MSG(tp__gemm_workspace_bytes(&gp, 1) >= (size_t)(m * k) * sizeof(float),
                                      "isa %d, %lld x %lld x %lld: a workspace of %zu bytes cannot hold A", isa,
                                      (long long)m, (long long)k, (long long)n, tp__gemm_workspace_bytes(&gp, 1));
                    }
                    memset(got, 0, (size_t)(m * n) * sizeof(float));
                    run_split(&gp, nth, false, false);
                    CHECK_MSG(memcmp(got, want, (size_t)(m * n) * sizeof(float)) == 0,
                              "isa %d, %lld x %lld x %lld: packed B%s on %d threads differs from unpacked B", isa,
                              (long long)m, (long long)k, (long long)n, implicit ? " and filled A" : "", nth);
                }
            free(packed);
        }
        free(a);
        free(b);
        free(bias);
        free(want);
        free(got);
    }
}

/* relu with the library's bits (eltwise_loops.h): x > 0: x, NaN: NaN,
 * else +0; counts the elements it was given. */
static void act_relu(float *ptr, int64_t n, const void *ctx) {
    (void)ctx;
    for (int64_t i = 0; i < n; i++) ptr[i] = ptr[i] > 0.0f ? ptr[i] : (ptr[i] != ptr[i] ? ptr[i] : 0.0f);
    atomic_fetch_add(&act_elements, (long)n);
}

/* relu6 with the library's bits (tp__relu_mode 2: clamp to [0, 6], NaN and
 * -0 kept); counts the elements it was given. */
static float relu6_bits(float x) { return x != x ? x : x < 0.0f ? 0.0f : x > 6.0f ? 6.0f : x; }
static void act_relu6(float *ptr, int64_t n, const void *ctx) {
    (void)ctx;
    for (int64_t i = 0; i < n; i++) ptr[i] = relu6_bits(ptr[i]);
    atomic_fetch_add(&act_elements, (long)n);
}

/* A bias of N and relu (act_relu) or relu6 (act_relu6, inputs scaled so
 * that many sums pass 6) applied by the micro-kernels in
 * registers: bit for bit the product without them followed by + bias and
 * relu in plain C, at every ISA level, for edge widths (masked bias loads),
 * several K blocks, beta 0 and 1, alpha -1 (a zero column of B and a -0
 * bias give -0, which relu turns to +0), NaN rows, packed and unpacked B,
 * implicit A, row blocks of 1-3 threads; relu is not called as the act
 * then. With a separate residual (relu after it, in the finish pass) the
 * act is called for every element and the bits are the same as the
 * product, bias, residual and relu in that order. */
TEST(test_tile_epilogue) {
    static const int64_t shapes[][3] = {{1, 70, 1},   {5, 17, 7},     {13, 33, 17},   {100, 64, 64},
                                        {7, 600, 65}, {33, 129, 130}, {64, 255, 255}, {200, 70, 300},
                                        {25, 40, 24}, {12, 9, 32},    {100, 64, 16}};
    for (int isa = TP_ISA_SCALAR; isa <= tp__gemm_best_isa(); isa++)
        for (size_t s = 0; s < TP_ARRAY_LEN(shapes); s++)
            for (int v = 0; v < 12; v++) {
                const int mode = v < 6 ? 1 : 2; /* relu, relu6 */
                const float scale = mode == 2 ? 4.0f : 1.0f;
                const int64_t m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
                const int w = v % 6;
                const bool packed = w & 1, residual = w >= 4, implicit = w == 3;
                const float alpha = w == 2 ? -1.0f : 1.0f, beta = (w & 2) ? 1.0f : 0.0f;
                float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
                float *bias = malloc(sizeof(float) * (size_t)n), *res = malloc(sizeof(float) * (size_t)(m * n));
                float *c0 = malloc(sizeof(float) * (size_t)(m * n)), *want = malloc(sizeof(float) * (size_t)(m * n));
                float *got = malloc(sizeof(float) * (size_t)(m * n));
                for (int64_t i = 0; i < m * k; i++) a[i] = scale * rng_float();
                for (int64_t i = 0; i < k * n; i++) b[i] = (i % n) == n / 2 ? 0.0f : rng_float();
                for (int64_t j = 0; j < n; j++) bias[j] = j == n / 2 ? -0.0f : 0.25f * scale * rng_float();
                for (int64_t i = 0; i < m * n; i++) res[i] = rng_float();
                for (int64_t i = 0; i < m * n; i++) c0[i] = (i / n) % 3 == 1 ? 0.0f : rng_float();
                if (m > 2) a[2 * k + k / 2] = NAN; /* row 2: NaN throughout */
                void *pb = NULL;
                if (packed) {
                    pb = alloc_aligned(tp__gemm_packed_b_bytes(isa, k, n));
                    tp__gemm_pack_b(isa, k, n, b, n, 1, pb);
                }
                gemm_fixture fx = {0};
                fx.cs = (gemm_case){m, n, k, false, false, packed, alpha, beta, 0, false, false, implicit};
                fx.a = a;
                tp_gemm g = {.isa = isa, .m = m, .n = n, .k = k, .a = a, .rs_a = k, .cs_a = 1, .c = want, .ldc = n};
                if (implicit) {
                    g.a = NULL;
                    g.a_fill = fill_from_fixture;
                    g.a_ctx = &fx;
                }
                if (packed) g.packed_b = pb;
                else {
                    g.b = b;
                    g.rs_b = n;
                    g.cs_b = 1;
                }
                g.ep = tp__gemm_epilogue_default();
                g.ep.alpha = alpha;
                g.ep.beta = beta;
                /* expected: the bare product, then bias, residual and relu in C */
                memcpy(want, c0, sizeof(float) * (size_t)(m * n));
                run_split(&g, 1, false, false);
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        float x = want[i * n + j] + bias[j];
                        if (residual) x += res[i * n + j];
                        want[i * n + j] = mode == 2 ? relu6_bits(x) : x > 0.0f ? x : (x != x ? x : 0.0f);
                    }
                g.ep.bias = bias;
                g.ep.residual = residual ? res : NULL;
                g.ep.ld_residual = n;
                g.ep.act = mode == 2 ? act_relu6 : act_relu;
                g.ep.act_relu = mode;
                g.c = got;
                for (int nth = 1; nth <= 4; nth++) {
                    memcpy(got, c0, sizeof(float) * (size_t)(m * n));
                    atomic_store(&act_elements, 0);
                    run_split(&g, nth < 4 ? nth : 2, nth == 3, nth == 4);
                    int64_t bad = -1;
                    for (int64_t i = 0; i < m * n && bad < 0; i++)
                        if (memcmp(&got[i], &want[i], sizeof(float)) != 0) bad = i;
                    CHECK_MSG(bad < 0, "isa %d %lldx%lldx%lld v%d nth %d: C[%lld] = %.9g, expected %.9g", isa,
                              (long long)m, (long long)k, (long long)n, v, nth, (long long)bad,
                              bad >= 0 ? got[bad] : 0.0f, bad >= 0 ? want[bad] : 0.0f);
                    CHECK_MSG(atomic_load(&act_elements) == (residual ? (long)(m * n) : 0),
                              "isa %d %lldx%lldx%lld v%d: act saw %ld elements", isa, (long long)m, (long long)k,
                              (long long)n, v, atomic_load(&act_elements));
                }
                free(pb);
                free(a);
                free(b);
                free(bias);
                free(res);
                free(c0);
                free(want);
                free(got);
            }
}

/* tp__gemm_pack_b_rows: a packed K x N matrix built from row ranges of
 * different sources (one row-major, one transposed, one strided like a
 * convolution tap) is byte for byte tp__gemm_pack_b of the whole; widths
 * with and without a partial edge panel, ranges of 1 row and K = 1; an
 * out-of-range range writes nothing. */
TEST(test_pack_b_rows) {
    static const int64_t shapes[][2] = {{1, 1}, {1, 70}, {7, 16}, {13, 64}, {33, 65}, {64, 130}, {5, 300}};
    for (int isa = TP_ISA_SCALAR; isa <= tp__gemm_best_isa(); isa++)
        for (size_t s = 0; s < TP_ARRAY_LEN(shapes); s++) {
            const int64_t k = shapes[s][0], n = shapes[s][1];
            const size_t bytes = tp__gemm_packed_b_bytes(isa, k, n);
            float *b = malloc(sizeof(float) * (size_t)(k * n)), *bt = malloc(sizeof(float) * (size_t)(k * n));
            float *b3 = malloc(sizeof(float) * (size_t)(3 * k * n));
            for (int64_t i = 0; i < k * n; i++) b[i] = rng_float();
            for (int64_t p = 0; p < k; p++)
                for (int64_t j = 0; j < n; j++) {
                    bt[j * k + p] = b[p * n + j];
                    b3[(j * k + p) * 3 + 1] = b[p * n + j]; /* element (p, j) at 1 + 3 p + 3 k j */
                }
            void *want = alloc_aligned(bytes), *got = alloc_aligned(bytes);
            tp__gemm_pack_b(isa, k, n, b, n, 1, want);
            memset(got, 0xA5, bytes);
            const int64_t r1 = k / 3, r2 = r1 + (k - r1) / 2; /* rows [0, r1), [r1, r2), [r2, k) */
            tp__gemm_pack_b_rows(isa, k, 0, r1, n, b, n, 1, got);
            tp__gemm_pack_b_rows(isa, k, r1, r2 - r1, n, bt + r1, 1, k, got);
            tp__gemm_pack_b_rows(isa, k, r2, k - r2, n, b3 + 1 + 3 * r2, 3, 3 * k, got);
            CHECK_MSG(memcmp(got, want, bytes) == 0, "isa %d %lldx%lld: rows packed in three ranges differ", isa,
                      (long long)k, (long long)n);
            tp__gemm_pack_b_rows(isa, k, k - 1, 2, n, b, n, 1, got); /* past K: nothing */
            tp__gemm_pack_b_rows(isa, k, -1, 1, n, b, n, 1, got);
            CHECK_MSG(memcmp(got, want, bytes) == 0, "isa %d %lldx%lld: an out-of-range range wrote", isa,
                      (long long)k, (long long)n);
            free(want);
            free(got);
            free(b);
            free(bt);
            free(b3);
        }
}

/* tp__gemm_panel (one packed panel's product without a plan): bitwise what
 * tp__gemm_run gives for the same product (every kernel sums an element's
 * products in one chain over p; m >= 2, so not the one-row kernel), and
 * within 1e-5 of a double sum, with beta 0 and 1 (C added to), A with a
 * row stride past kc, C with one past n, full and edge panels (n below
 * NR: widths rounded as the packing does) and a prefetch range given. */
TEST(test_gemm_panel) {
    static const int64_t shapes[][3] = {{2, 1, 1}, {5, 7, 16}, {16, 103, 64}, {13, 37, 40}, {32, 64, 17}, {7, 128, 64}};
    for (int isa = TP_ISA_SCALAR; isa <= tp__gemm_best_isa(); isa++) {
        int mr, nr;
        tp__gemm_register_block(isa, &mr, &nr);
        for (size_t s = 0; s < TP_ARRAY_LEN(shapes); s++)
            for (int beta = 0; beta <= 1; beta++) {
                const int64_t m = shapes[s][0], kc = shapes[s][1], n = shapes[s][2] < nr ? shapes[s][2] : nr;
                const int64_t rs_a = kc + 3, ldc = n + 5;
                float *a = malloc(sizeof(float) * (size_t)(m * rs_a)), *b = malloc(sizeof(float) * (size_t)(kc * n));
                float *c0 = malloc(sizeof(float) * (size_t)(m * ldc)), *got = malloc(sizeof(float) * (size_t)(m * ldc));
                float *want = malloc(sizeof(float) * (size_t)(m * ldc));
                for (int64_t i = 0; i < m * rs_a; i++) a[i] = rng_float();
                for (int64_t i = 0; i < kc * n; i++) b[i] = rng_float();
                for (int64_t i = 0; i < m * ldc; i++) c0[i] = rng_float();
                const size_t bytes = tp__gemm_packed_b_bytes(isa, kc, n) + (size_t)nr * sizeof(float);
                void *packed = alloc_aligned(bytes);
                memset(packed, 0, bytes);
                tp__gemm_pack_b(isa, kc, n, b, n, 1, packed);
                memcpy(got, c0, sizeof(float) * (size_t)(m * ldc));
                memcpy(want, c0, sizeof(float) * (size_t)(m * ldc));
                tp__gemm_panel(isa, m, kc, a, rs_a, packed, (int)n, got, ldc, (float)beta, b,
                               (int64_t)sizeof(float) * kc * n);
                tp_gemm g = {.isa = isa, .m = m, .n = n, .k = kc, .a = a, .rs_a = rs_a, .cs_a = 1,
                             .packed_b = packed, .c = want, .ldc = ldc, .ep = tp__gemm_epilogue_default()};
                g.ep.beta = (float)beta;
                void *ws = alloc_aligned(tp__gemm_workspace_bytes(&g, 1) + 64);
                tp__gemm_run(&g, 0, 1, ws);
                double worst = 0.0;
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        double d = beta ? c0[i * ldc + j] : 0.0;
                        for (int64_t p = 0; p < kc; p++) d += (double)a[i * rs_a + p] * b[p * n + j];
                        const double e = fabs(got[i * ldc + j] - d) / (1.0 + fabs(d));
                        if (e > worst) worst = e;
                    }
                bool outside_same = true; /* columns past n untouched */
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = n; j < ldc; j++) outside_same &= got[i * ldc + j] == c0[i * ldc + j];
                CHECK_MSG(memcmp(got, want, sizeof(float) * (size_t)(m * ldc)) == 0 && worst < 1e-5 && outside_same,
                          "isa %d %lldx%lldx%lld beta %d: panel product differs (from tp__gemm_run: %d, worst %g, "
                          "past n %s)",
                          isa, (long long)m, (long long)kc, (long long)n, beta,
                          memcmp(got, want, sizeof(float) * (size_t)(m * ldc)) != 0, worst,
                          outside_same ? "untouched" : "written");
                free(ws);
                free(packed);
                free(a);
                free(b);
                free(c0);
                free(got);
                free(want);
            }
    }
}

/* Winograd F(2x2)'s per-call weight transform (tp_wino_tx.u12, the
 * AVX-512 one where the CPU has it): U = G g G^T's 12 non-tap values for
 * 37 floats of each tap (two vectors and a partial one through
 * zero-padded copies), bit for bit the scalar formula, in u's order
 * (0,1) (0,2) (1,0) (1,1) (1,2) (1,3) (2,0) (2,1) (2,2) (2,3) (3,1) (3,2);
 * nothing written past n. */
TEST(test_wino_u12) {
#if defined(__x86_64__)
    if (tp__gemm_best_isa() < TP_ISA_AVX512) {
        fprintf(stderr, "test_wino_u12: no AVX-512 here, the AVX-512 transform not run\n");
        return;
    }
    enum { N = 37 };
    float gv[9][N], uv[12][N + 1];
    const float *g[9];
    float *u[12];
    for (int k = 0; k < 9; k++) {
        for (int i = 0; i < N; i++) gv[k][i] = rng_float() * 100.0f;
        g[k] = gv[k];
    }
    for (int k = 0; k < 12; k++) {
        for (int i = 0; i <= N; i++) uv[k][i] = -7.0f;
        u[k] = uv[k];
    }
    tp__wino_tx_avx512(2).u12(g, u, N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        float x[4][3]; /* G g: rows 0-3 */
        for (int b = 0; b < 3; b++) {
            x[0][b] = gv[b][i];
            x[1][b] = ((gv[b][i] + gv[3 + b][i]) + gv[6 + b][i]) * 0.5f;
            x[2][b] = ((gv[b][i] - gv[3 + b][i]) + gv[6 + b][i]) * 0.5f;
            x[3][b] = gv[6 + b][i];
        }
        float w[16]; /* (G g) G^T, row-major 4 x 4 */
        for (int r = 0; r < 4; r++) {
            w[4 * r] = x[r][0];
            w[4 * r + 1] = ((x[r][0] + x[r][1]) + x[r][2]) * 0.5f;
            w[4 * r + 2] = ((x[r][0] - x[r][1]) + x[r][2]) * 0.5f;
            w[4 * r + 3] = x[r][2];
        }
        static const int at[12] = {1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14};
        for (int k = 0; k < 12; k++) bad += memcmp(&uv[k][i], &w[at[k]], sizeof(float)) != 0;
    }
    for (int k = 0; k < 12; k++) bad += uv[k][N] != -7.0f;
    CHECK_MSG(bad == 0, "u12: %d values differ from the scalar formula (or written past n)", bad);
#endif
}

static int64_t claim_sizes(const void *arg, int part) { return ((const int64_t *)arg)[part]; }

/* The claim counters: the owner takes from the front, thieves from the
 * back, each unit once, until the two meet. */
TEST(test_claims) {
    tp_claim *c = alloc_aligned(sizeof(tp_claim));
    memset(c, 0, sizeof *c);
    CHECK(tp__claim_own(c, 5) == 0);
    CHECK(tp__claim_own(c, 5) == 1);
    CHECK(tp__claim_steal(c, 5) == 4);
    CHECK(tp__claim_steal(c, 5) == 3);
    CHECK(tp__claim_own(c, 5) == 2);
    CHECK(tp__claim_own(c, 5) == -1);
    CHECK(tp__claim_steal(c, 5) == -1);
    memset(c, 0, sizeof *c);
    CHECK(tp__claim_steal(c, 2) == 1);
    CHECK(tp__claim_steal(c, 2) == 0);
    CHECK(tp__claim_own(c, 2) == -1);
    memset(c, 0, sizeof *c);
    CHECK(tp__claim_own(c, 0) == -1);
    CHECK(tp__claim_steal(c, 0) == -1);
    free(c);
    /* a walk: thread 1 of 3 has no units of its own, so it takes part 2's
     * from the back after part 2's owner took its first, then part 0's */
    tp_claim *cs = alloc_aligned(3 * sizeof(tp_claim));
    memset(cs, 0, 3 * sizeof(tp_claim));
    static const int64_t sizes[3] = {2, 0, 3};
    CHECK(tp__claim_own(&cs[2], 3) == 0);
    tp_claim_walk w = {cs, 1, 3, 0};
    int part;
    int64_t unit;
    static const int want_part[4] = {2, 2, 0, 0};
    static const int64_t want_unit[4] = {2, 1, 1, 0};
    for (int i = 0; i < 4; i++) {
        CHECK(tp__claim_next(&w, claim_sizes, sizes, &part, &unit));
        CHECK_MSG(part == want_part[i] && unit == want_unit[i], "step %d: part %d unit %lld", i, part, (long long)unit);
    }
    CHECK(!tp__claim_next(&w, claim_sizes, sizes, &part, &unit));
    CHECK(tp__claim_own(&cs[0], 2) == -1 && tp__claim_own(&cs[2], 3) == -1);
    free(cs);
}

/* Marks the items of [lo, hi) in seen (each must be unseen), checking
 * the piece's start is a multiple of align and its length at most unit. */
static bool mark_piece(int *seen, int64_t n, int64_t lo, int64_t hi, int64_t align, int64_t unit, int tag) {
    if (lo < 0 || hi > n || lo >= hi || (lo % align && lo != 0) || hi - lo > unit) return false;
    for (int64_t i = lo; i < hi; i++) {
        if (seen[i]) return false;
        seen[i] = tag;
    }
    return true;
}

/* tp__range_walk: static parts (claims NULL) tile [0, n) at multiples of
 * align; with claims, a thread alone takes every piece of every part, each
 * once, its own first (front to back) and then the others' from their
 * backs; two walks that interleave share the items between them. */
TEST(test_range_walk) {
    static const int64_t ns[] = {1, 15, 16, 17, 100, 1000, 4097};
    tp_claim *cs = alloc_aligned(3 * sizeof(tp_claim));
    for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++)
        for (int nth = 1; nth <= 3; nth++)
            for (int64_t align = 1; align <= 16; align += 15) {
                const int64_t n = ns[c];
                int *seen = calloc((size_t)n, sizeof(int));
                /* static */
                for (int t = 0; t < nth; t++) {
                    tp_range_walk w;
                    tp__range_walk_init(&w, NULL, t, nth, n, align, 1, 1, 4);
                    int64_t lo, hi;
                    int pieces = 0;
                    while (tp__range_next(&w, &lo, &hi)) {
                        CHECK_MSG(mark_piece(seen, n, lo, hi, align, n, t + 1), "n %lld nth %d align %lld: static [%lld, %lld)",
                                  (long long)n, nth, (long long)align, (long long)lo, (long long)hi);
                        pieces++;
                    }
                    CHECK(pieces <= 1);
                }
                for (int64_t i = 0; i < n; i++) CHECK_MSG(seen[i], "n %lld nth %d: item %lld in no part", (long long)n, nth, (long long)i);
                /* claimed: the last thread alone walks everything */
                memset(seen, 0, (size_t)n * sizeof(int));
                memset(cs, 0, 3 * sizeof(tp_claim));
                tp_range_walk w;
                tp__range_walk_init(&w, cs, nth - 1, nth, n, align, 1, 3, 4);
                int64_t lo, hi, prev = -1, got = 0;
                int prev_part = nth - 1;
                while (tp__range_next(&w, &lo, &hi)) {
                    CHECK_MSG(mark_piece(seen, n, lo, hi, align, nth > 1 ? w.unit : n, 1), "n %lld nth %d align %lld: piece [%lld, %lld)",
                              (long long)n, nth, (long long)align, (long long)lo, (long long)hi);
                    int part = 0; /* the static part holding lo */
                    while (part + 1 < nth && lo >= n * (part + 1) / nth / align * align) part++;
                    /* its own part (the last) front to back, then parts 0, 1, ... each from the back */
                    const bool order = part == prev_part ? (part == nth - 1 ? lo > prev : lo < prev)
                                                         : (prev_part == nth - 1 ? part == 0 : part == prev_part + 1);
                    CHECK_MSG(order, "n %lld nth %d align %lld: piece at %lld (part %d) after %lld (part %d)", (long long)n,
                              nth, (long long)align, (long long)lo, part, (long long)prev, prev_part);
                    prev = lo;
                    prev_part = part;
                    got += hi - lo;
                }
                CHECK_MSG(got == n, "n %lld nth %d: %lld of the items walked", (long long)n, nth, (long long)got);
                CHECK(w.unit >= 3 && w.unit % align == 0);
                /* a second walk finds nothing left (one thread's walks are static) */
                tp_range_walk w2;
                tp__range_walk_init(&w2, cs, 0, nth, n, align, 1, 3, 4);
                CHECK(nth == 1 || !tp__range_next(&w2, &lo, &hi));
                /* interleaved: thread 0 one piece (its own first, or part 1's last when its own part is
                 * empty), then thread 1 all that is left, then thread 0 nothing */
                if (nth >= 2) {
                    memset(seen, 0, (size_t)n * sizeof(int));
                    memset(cs, 0, 3 * sizeof(tp_claim));
                    tp_range_walk a, b;
                    tp__range_walk_init(&a, cs, 0, nth, n, align, 1, 1, 4);
                    tp__range_walk_init(&b, cs, 1, nth, n, align, 1, 1, 4);
                    got = 0;
                    if (tp__range_next(&a, &lo, &hi)) {
                        CHECK_MSG(mark_piece(seen, n, lo, hi, align, a.unit, 1), "n %lld nth %d align %lld: first piece [%lld, %lld) unit %lld", (long long)n, nth, (long long)align, (long long)lo, (long long)hi, (long long)a.unit);
                        got += hi - lo;
                    }
                    while (tp__range_next(&b, &lo, &hi)) {
                        CHECK(mark_piece(seen, n, lo, hi, align, b.unit, 2));
                        got += hi - lo;
                    }
                    while (tp__range_next(&a, &lo, &hi)) got += hi - lo; /* nothing is left */
                    CHECK_MSG(got == n, "n %lld nth %d: interleaved walks took %lld items", (long long)n, nth, (long long)got);
                }
                /* item at a time */
                memset(cs, 0, 3 * sizeof(tp_claim));
                tp__range_walk_init(&w, cs, 0, nth, n, align, 1, 2, 4);
                int64_t items = 0, sum = 0;
                for (int64_t r = -1, end = 0; tp__range_next_item(&w, &r, &end);) {
                    items++;
                    sum += r;
                }
                CHECK_MSG(items == n && sum == n * (n - 1) / 2, "n %lld nth %d: %lld items", (long long)n, nth, (long long)items);
                free(seen);
            }
    free(cs);
}

/* The next block's prefetch (tp__gemm_next_part): the calls' parts cover
 * each panel's bytes exactly once, also when the calls do not divide evenly
 * among the panels; with call_bytes only the last calls have parts, each
 * about call_bytes; fewer calls than that share it all. */
static void next_parts(const tp__gemm_next *next, int64_t calls, int64_t *first, int64_t *max_bytes) {
    static unsigned char seen[4][8192];
    memset(seen, 0, sizeof(seen));
    *first = -1;
    *max_bytes = 0;
    for (int64_t call = 0; call < calls; call++) {
        int64_t bytes;
        const float *pf = tp__gemm_next_part(next, call, calls, &bytes);
        if (!pf) {
            CHECK(bytes == 0);
            CHECK_MSG(*first < 0 || next->call_bytes == 0, "call %lld without a part after the window began",
                      (long long)call);
            continue;
        }
        if (*first < 0) *first = call;
        if (bytes > *max_bytes) *max_bytes = bytes;
        const int64_t off = (const char *)pf - (const char *)next->b;
        const int64_t panel = off / (next->panel_stride * (int64_t)sizeof(float));
        const int64_t at = off - panel * next->panel_stride * (int64_t)sizeof(float);
        CHECK(panel >= 0 && panel < next->panels && at >= 0 && at + bytes <= next->panel_bytes);
        for (int64_t i = at; i < at + bytes; i++) {
            CHECK_MSG(!seen[panel][i], "byte %lld of panel %lld prefetched twice", (long long)i, (long long)panel);
            seen[panel][i] = 1;
        }
    }
    for (int64_t p = 0; p < next->panels; p++)
        for (int64_t i = 0; i < next->panel_bytes; i++)
            CHECK_MSG(seen[p][i], "byte %lld of panel %lld never prefetched", (long long)i, (long long)p);
}

TEST(test_next_prefetch) {
    static float b[4 * 2048];
    /* 4 panels of 8 KiB at a 2048-float stride (panel_bytes 8192) */
    tp__gemm_next next = {b, 2048, 4, 8192, 0};
    int64_t first, max_bytes;
    next_parts(&next, 100, &first, &max_bytes); /* all calls: 25 a panel */
    CHECK(first == 0 && max_bytes == 384);
    next_parts(&next, 10, &first, &max_bytes); /* 3, 2, 3, 2 calls a panel */
    CHECK(first == 0 && max_bytes == 4096);
    next.call_bytes = 1024; /* 32 KiB at 1 KiB a call: the last 32 of 100 */
    next_parts(&next, 100, &first, &max_bytes);
    CHECK(first == 68 && max_bytes == 1024);
    next_parts(&next, 20, &first, &max_bytes); /* fewer calls: all 20 share it */
    CHECK(first == 0 && max_bytes == 1664);
    next.call_bytes = 1000; /* not a line multiple: 33 calls, parts rounded up to lines */
    next_parts(&next, 100, &first, &max_bytes);
    CHECK(first == 67 && max_bytes == 1024); /* 9, 8, 8, 8 calls a panel */
    next.panels = 1; /* one panel, a part a call in the window */
    next_parts(&next, 3, &first, &max_bytes);
    CHECK(first == 0 && max_bytes == 2752);
}

TEST_MAIN(T(test_claims), T(test_next_prefetch), T(test_loop_orders), T(test_range_walk), T(test_isa_detection), T(test_edge_sizes), T(test_large_sizes), T(test_epilogue), T(test_random),
          T(test_implicit_a), T(test_tile_epilogue), T(test_narrow_n), T(test_dot_path), T(test_pack_b_rows),
          T(test_gemm_panel), T(test_wino_u12))
