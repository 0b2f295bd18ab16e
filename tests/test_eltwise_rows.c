/*
 * test_eltwise_rows.c - the row kernels of the elementwise tables
 * (src/cpu/eltwise.h: max, sum (also bit for bit in its documented
 * order), softmax, log_softmax, layer_norm, where) at every CPU
 * level this machine runs, on every row length from 0 to 70 and a few
 * longer ones (vector bodies, 4-vector unrolls and each tail length),
 * against double-precision references written here: NaN anywhere in a row,
 * -inf entries (masked attention scores), fully masked rows, terms whose
 * exp underflows (softmax flushes those to 0, documented in vmath.h), and
 * where's four pairings of tensor and broadcast operands with condition
 * bytes other than 0 and 1, and the non-temporal copy (stream) and the
 * transcendental ops' streamed loops (unary_stream) at every destination
 * alignment; and that the AVX2 rows give the AVX-512 rows' bits.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/eltwise.h"
#include "test_util.h"
#include "tpexport/run.h"

enum { MAXN = 1100 };

static uint32_t rng_state = 12345u;
static uint32_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}
static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)(rng() >> 8) / 16777216.0f; }

static const int64_t extra_lengths[] = {128, 197, 256, 384, 1000, 1025, 1100};

/* Row lengths tested: 0..70, then extra_lengths. */
#define N_LENGTHS (71 + (int)(sizeof extra_lengths / sizeof extra_lengths[0]))
static int64_t length_at(int li) { return li < 71 ? li : extra_lengths[li - 71]; }

static const char *level_name(int level) { return tp_cpu_level_name((tp_cpu_level)level); }

TEST(test_max) {
    static float a[MAXN];
    for (int level = TP_CPU_SCALAR; level <= (int)tp_cpu_level_supported(); level++) {
        const tp_eltwise_table *t = tp__eltwise_table(level);
        for (int li = 0; li < N_LENGTHS; li++) {
            const int64_t n = length_at(li);
            for (int64_t i = 0; i < n; i++) a[i] = uniform(-50.0f, 50.0f);
            float want = -INFINITY;
            for (int64_t i = 0; i < n; i++) want = a[i] > want ? a[i] : want;
            float got = t->max(a, n);
            CHECK_MSG(got == want, "%s n=%lld: max %g, want %g", level_name(level), (long long)n, got, want);
            /* a NaN at each position (every position of short rows) */
            for (int64_t p = 0; p < n; p += n <= 70 ? 1 : 37) {
                float keep = a[p];
                a[p] = NAN;
                got = t->max(a, n);
                CHECK_MSG(isnan(got), "%s n=%lld: NaN at %lld gives %g", level_name(level), (long long)n,
                          (long long)p, got);
                a[p] = keep;
            }
            for (int64_t i = 0; i < n; i++) a[i] = -INFINITY;
            got = t->max(a, n);
            CHECK_MSG(got == -INFINITY, "%s n=%lld: all -inf gives %g", level_name(level), (long long)n, got);
        }
    }
}

TEST(test_sum) {
    static float a[MAXN];
    for (int level = TP_CPU_SCALAR; level <= (int)tp_cpu_level_supported(); level++) {
        const tp_eltwise_table *t = tp__eltwise_table(level);
        for (int li = 0; li < N_LENGTHS; li++) {
            const int64_t n = length_at(li);
            double want = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) {
                a[i] = uniform(-2.0f, 3.0f);
                want += a[i];
                mag += fabs(a[i]);
            }
            float got = t->sum(a, n);
            CHECK_MSG(fabs(got - want) <= 1e-6 * mag + 1e-7, "%s n=%lld: sum %.9g, want %.9g", level_name(level),
                      (long long)n, got, want);
            /* the documented order (eltwise_loops.h), written out: bit for bit at every level */
            float part[4][16] = {{0}};
            for (int64_t i = 0; i < n; i++) part[(i / 16) % 4][i % 16] += a[i];
            for (int q = 1; q < 4; q++)
                for (int k = 0; k < 16; k++) part[0][k] += part[q][k];
            for (int w = 8; w >= 1; w /= 2)
                for (int k = 0; k < w; k++) part[0][k] += part[0][k + w];
            CHECK_MSG(memcmp(&got, &part[0][0], sizeof got) == 0, "%s n=%lld: sum %a, the documented order gives %a",
                      level_name(level), (long long)n, got, part[0][0]);
        }
    }
}

/* softmax / log_softmax of a row against double precision: softmax within
 * 1e-6 absolute and 1e-5 relative, log_softmax within 1e-5 relative (its
 * masked entries -inf exactly); softmax's masked entries exactly 0. */
static int check_softmax_row(const tp_eltwise_table *t, int level, const float *a, int64_t n, const char *what) {
    static float o[MAXN], o2[MAXN];
    static float next[MAXN]; /* a row to prefetch: its contents do not matter */
    double m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = a[i] > m ? a[i] : m;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += exp((double)a[i] - m);
    int bad = 0;
    for (int lg = 0; lg <= 1; lg++) {
        t->softmax(o, a, n, lg, NULL);
        /* prefetching the next row (256-float blocks instead of 1024)
         * leaves every bit as it was */
        t->softmax(o2, a, n, lg, next);
        if (memcmp(o, o2, (size_t)n * sizeof *o) != 0 && bad++ < 3)
            fprintf(stderr, "  %s n=%lld %s: with a row to prefetch the result differs\n", level_name(level),
                    (long long)n, what);
        for (int64_t i = 0; i < n; i++) {
            double want = lg ? ((double)a[i] - m) - log(s) : exp((double)a[i] - m) / s;
            bool ok = isinf(want) ? o[i] == want
                      : lg        ? fabs(o[i] - want) <= 1e-5 * fabs(want) + 1e-6
                                  : fabs(o[i] - want) <= 1e-6 + 1e-5 * want;
            if (a[i] == -INFINITY && !lg) ok = ok && o[i] == 0.0f;
            if (!ok && bad++ < 3)
                fprintf(stderr, "  %s n=%lld %s %s[%lld]: %.9g, want %.9g\n", level_name(level), (long long)n, what,
                        lg ? "log_softmax" : "softmax", (long long)i, o[i], want);
        }
    }
    return bad;
}

TEST(test_softmax) {
    static float a[MAXN], o[MAXN];
    for (int level = TP_CPU_SCALAR; level <= (int)tp_cpu_level_supported(); level++) {
        const tp_eltwise_table *t = tp__eltwise_table(level);
        for (int li = 0; li < N_LENGTHS; li++) {
            const int64_t n = length_at(li);
            if (n == 0) continue;
            for (int64_t i = 0; i < n; i++) a[i] = uniform(-8.0f, 8.0f);
            CHECK(check_softmax_row(t, level, a, n, "random") == 0);
            /* a causal row: the last n/3 entries masked, a few terms that underflow */
            for (int64_t i = n - n / 3; i < n; i++) a[i] = -INFINITY;
            for (int64_t i = 1; i < n - n / 3; i += 5) a[i] = uniform(-110.0f, -88.0f);
            CHECK(check_softmax_row(t, level, a, n, "masked") == 0);
        }
        /* underflowing terms flush to exactly 0 (the fast levels' documented
         * difference from PyTorch's denormals); the sum is unaffected */
        const float row[3] = {0.0f, -100.0f, -87.0f};
        t->softmax(o, row, 3, false, NULL);
        CHECK_MSG(o[1] == 0.0f && o[2] > 0.0f && o[2] < 1e-37f && fabs(o[0] - 1.0f) <= 1e-7f,
                  "%s: softmax(0, -100, -87) = %g %g %g", level_name(level), o[0], o[1], o[2]);
        /* a fully masked row: 0/0 = NaN, as PyTorch; a NaN anywhere: NaN everywhere */
        const float masked[20] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                                  -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                                  -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
        t->softmax(o, masked, 20, false, NULL);
        for (int i = 0; i < 20; i++) CHECK(isnan(o[i]));
        for (int i = 0; i < 40; i++) a[i] = (float)i * 0.1f;
        a[33] = NAN;
        t->softmax(o, a, 40, false, NULL);
        for (int i = 0; i < 40; i++) CHECK(isnan(o[i]));
    }
}

/* layer_norm rows with weight and bias, either or neither, on an offset
 * row (a mean far from 0, as activations have) against a double
 * reference: |err| <= 2e-6 * (1 + |ref|) + 3e-6 * |b| (float sums of up
 * to 1100 terms); the output past n untouched. */
TEST(test_layer_norm) {
    static float a[MAXN], o[MAXN + 1], w[MAXN], b[MAXN];
    for (int level = TP_CPU_SCALAR; level <= (int)tp_cpu_level_supported(); level++) {
        const tp_eltwise_table *t = tp__eltwise_table(level);
        for (int li = 0; li < N_LENGTHS; li++) {
            const int64_t n = length_at(li);
            if (n == 0) continue;
            for (int64_t i = 0; i < n; i++) {
                a[i] = 3.0f + uniform(-2.0f, 2.0f);
                w[i] = uniform(0.5f, 1.5f);
                b[i] = uniform(-1.0f, 1.0f);
            }
            double mean = 0.0, var = 0.0;
            for (int64_t i = 0; i < n; i++) mean += a[i];
            mean /= (double)n;
            for (int64_t i = 0; i < n; i++) var += (a[i] - mean) * (a[i] - mean);
            const double rstd = 1.0 / sqrt(var / (double)n + 1e-5);
            for (int form = 0; form < 4; form++) {
                const float *wp = form & 1 ? w : NULL, *bp = form & 2 ? b : NULL;
                o[n] = 12345.0f;
                t->layer_norm(o, a, n, wp, bp, 1e-5f);
                int bad = 0;
                for (int64_t i = 0; i < n && !bad; i++) {
                    double want = (a[i] - mean) * rstd * (wp ? wp[i] : 1.0) + (bp ? bp[i] : 0.0);
                    double tol = 2e-6 * (1.0 + fabs(want)) + (bp ? 3e-6 * fabs(bp[i]) : 0.0);
                    if (!(fabs(o[i] - want) <= tol)) {
                        CHECK_MSG(false, "%s n=%lld form %d: o[%lld] = %.9g, want %.9g", level_name(level),
                                  (long long)n, form, (long long)i, o[i], want);
                        bad = 1;
                    }
                }
                CHECK_MSG(o[n] == 12345.0f, "%s n=%lld: wrote past the row", level_name(level), (long long)n);
            }
        }
    }
}

/* The AVX2 row kernels are the AVX-512 ones at 8 lanes (eltwise_loops.h):
 * max, softmax and layer_norm give the same bits on every row length, on
 * masked rows and rows with underflowing terms. Needs a CPU with both
 * levels; on one without AVX-512 it says so on stderr. */
TEST(test_rows_avx2_match_avx512) {
    if (tp_cpu_level_supported() < TP_CPU_AVX512) {
        fprintf(stderr, "  test_rows_avx2_match_avx512: not run, this CPU lacks AVX-512\n");
        return;
    }
    static float a[MAXN], w[MAXN], b[MAXN], o2[MAXN], o5[MAXN], next[MAXN];
    const tp_eltwise_table *t2 = tp__eltwise_table(TP_CPU_AVX2), *t5 = tp__eltwise_table(TP_CPU_AVX512);
    for (int li = 0; li < N_LENGTHS; li++) {
        const int64_t n = length_at(li);
        for (int kind = 0; kind < 2; kind++) {
            for (int64_t i = 0; i < n; i++) {
                a[i] = kind ? uniform(-8.0f, 8.0f) : 3.0f + uniform(-2.0f, 2.0f);
                w[i] = uniform(0.5f, 1.5f);
                b[i] = uniform(-1.0f, 1.0f);
            }
            if (kind) /* masked entries and terms whose exp underflows */
                for (int64_t i = 1; i < n; i += 4) a[i] = i % 8 == 1 ? -INFINITY : uniform(-110.0f, -80.0f);
            const float m2 = t2->max(a, n), m5 = t5->max(a, n);
            CHECK_MSG(memcmp(&m2, &m5, sizeof m2) == 0, "n=%lld kind %d: max %g (avx2) vs %g", (long long)n, kind,
                      m2, m5);
            if (n == 0) continue;
            t2->softmax(o2, a, n, false, next);
            t5->softmax(o5, a, n, false, next);
            CHECK_MSG(memcmp(o2, o5, (size_t)n * sizeof *o2) == 0, "n=%lld kind %d: softmax differs", (long long)n,
                      kind);
            for (int form = 0; form < 4; form++) {
                const float *wp = form & 1 ? w : NULL, *bp = form & 2 ? b : NULL;
                t2->layer_norm(o2, a, n, wp, bp, 1e-5f);
                t5->layer_norm(o5, a, n, wp, bp, 1e-5f);
                CHECK_MSG(memcmp(o2, o5, (size_t)n * sizeof *o2) == 0, "n=%lld kind %d form %d: layer_norm differs",
                          (long long)n, kind, form);
            }
        }
    }
}

TEST(test_where) {
    static float x[MAXN], y[MAXN], o[MAXN + 1]; /* o[n]: a sentinel past the row */
    static uint8_t c[MAXN];
    for (int level = TP_CPU_SCALAR; level <= (int)tp_cpu_level_supported(); level++) {
        const tp_eltwise_table *t = tp__eltwise_table(level);
        for (int li = 0; li < N_LENGTHS; li++) {
            const int64_t n = length_at(li);
            for (int64_t i = 0; i < n; i++) {
                x[i] = uniform(-1.0f, 1.0f);
                y[i] = uniform(2.0f, 3.0f);
                c[i] = (uint8_t)(rng() % 3); /* 2 is true too */
            }
            x[0] = n > 0 && n % 2 ? -0.0f : x[0];
            for (int sx = 0; sx <= 1; sx++)
                for (int sy = 0; sy <= 1; sy++) {
                    memset(o, 0xFF, sizeof(float) * (size_t)(n + 1));
                    t->where(o, c, x, sx, y, sy, n);
                    int bad = 0;
                    for (int64_t i = 0; i < n; i++) {
                        float want = c[i] != 0 ? x[i * sx] : y[i * sy];
                        if (memcmp(&o[i], &want, sizeof want) != 0) bad++;
                    }
                    uint32_t after;
                    memcpy(&after, &o[n], sizeof after);
                    CHECK_MSG(bad == 0 && after == 0xFFFFFFFFu, "%s n=%lld sx=%d sy=%d: %d wrong, past the end %s",
                              level_name(level), (long long)n, sx, sy, bad, after == 0xFFFFFFFFu ? "kept" : "written");
                }
        }
    }
}

/* dst (MAXN + 64 floats, all bits set before the write) against
 * want[0, n) at dst + at: elements with other bits (returned), and in
 * *outside the elements outside [at, at + n) that were written. */
static int compare_written(const float *dst, int64_t at, int64_t n, const float *want, int *outside) {
    int bad = 0;
    *outside = 0;
    for (int64_t i = 0; i < n; i++) bad += memcmp(&dst[at + i], &want[i], sizeof(float)) != 0;
    for (int64_t i = 0; i < MAXN + 64; i++) {
        uint32_t u;
        memcpy(&u, &dst[i], sizeof u);
        if ((i < at || i >= at + n) && u != 0xFFFFFFFFu) (*outside)++;
    }
    return bad;
}

/* stream: an exact copy at every destination alignment (0..17 floats past
 * a 64-byte boundary: the plain head, the non-temporal body and the plain
 * tail each take every length), nothing written outside [0, n). */
TEST(test_stream) {
    static float src[MAXN];
    static _Alignas(64) float dst[MAXN + 64];
    for (int64_t i = 0; i < MAXN; i++) src[i] = uniform(-1.0f, 1.0f);
    for (int level = TP_CPU_SCALAR; level <= (int)tp_cpu_level_supported(); level++) {
        const tp_eltwise_table *t = tp__eltwise_table(level);
        for (int li = 0; li < N_LENGTHS; li++) {
            const int64_t n = length_at(li);
            for (int off = 0; off < 18; off++) {
                memset(dst, 0xFF, sizeof dst);
                t->stream(dst + 1 + off, src, n);
                t->stream_fence();
                int outside;
                const int bad = compare_written(dst, 1 + off, n, src, &outside);
                CHECK_MSG(bad == 0 && outside == 0, "%s n=%lld offset %d: %d wrong, %d written outside",
                          level_name(level), (long long)n, 1 + off, bad, outside);
            }
        }
    }
}

/* unary_stream: bit for bit the plain unary loop's values, for every
 * transcendental op, at every destination alignment (the masked head up to
 * a 64-byte boundary, the non-temporal body, the masked tail) and length,
 * in place too; nothing written outside [0, n). Inputs span the ops'
 * interesting ranges, with -inf, +inf and NaN among them. */
TEST(test_unary_stream) {
    static const int ops[] = {TP_ELT_EXP, TP_ELT_TANH, TP_ELT_SIGMOID, TP_ELT_SILU,
                              TP_ELT_ERF, TP_ELT_LOG, TP_ELT_GELU, TP_ELT_GELU_TANH};
    static float src[MAXN], want[MAXN];
    static _Alignas(64) float dst[MAXN + 64];
    for (int64_t i = 0; i < MAXN; i++) src[i] = uniform(-12.0f, 12.0f);
    src[3] = -INFINITY;
    src[40] = INFINITY;
    src[77] = NAN;
    src[130] = 0.0f;
    const float params[4] = {0};
    for (int level = TP_CPU_SCALAR; level <= (int)tp_cpu_level_supported(); level++) {
        const tp_eltwise_table *t = tp__eltwise_table(level);
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            CHECK(tp__eltwise_transcendental(ops[k]));
            t->unary(ops[k], want, src, MAXN, params);
            for (int li = 0; li < N_LENGTHS; li++) {
                const int64_t n = length_at(li);
                for (int off = 0; off < 18; off++) {
                    for (int inplace = 0; inplace < 2; inplace++) {
                        memset(dst, 0xFF, sizeof dst);
                        if (inplace) memcpy(dst + 1 + off, src, (size_t)n * sizeof(float));
                        t->unary_stream(ops[k], dst + 1 + off, inplace ? dst + 1 + off : src, n, params);
                        t->stream_fence();
                        int outside;
                        const int bad = compare_written(dst, 1 + off, n, want, &outside);
                        CHECK_MSG(bad == 0 && outside == 0, "%s op %d n=%lld offset %d%s: %d wrong, %d written outside",
                                  level_name(level), ops[k], (long long)n, 1 + off, inplace ? " in place" : "", bad,
                                  outside);
                    }
                }
            }
        }
    }
}

TEST_MAIN(T(test_max), T(test_sum), T(test_softmax), T(test_layer_norm), T(test_rows_avx2_match_avx512), T(test_where), T(test_stream), T(test_unary_stream))
