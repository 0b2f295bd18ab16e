/*
 * gemm_bench.c - GFLOP/s of the single-precision GEMM (src/cpu/gemm.h) on
 * the cubes 256, 512, 1024 and on model shapes (M x K x N), per ISA level,
 * on 1 and 2 threads (pthreads spinning on a generation counter, so thread
 * start-up is not timed), with B pre-packed (weights; N <= 15 also transposed
 * for the dot path, as the linear ops pack it) or passed unpacked.
 * Prints the median of repeats and two percentages of the FMA peak: of the
 * peak measured at start (nth x the single-core peak, see bench/fma_peak.c)
 * and "adj", the median over samples of each sample's GFLOP/s over the peak
 * measured right after it (an FMA loop of ~3-5 ms on the same threads). A
 * shared machine's clock and neighbours change the peak by up to 1.5x from
 * one second to the next; the adjacent ratio cancels most of that.
 * Optional comparison columns: OpenBLAS cblas_sgemm (-DWITH_OPENBLAS) and
 * oneDNN dnnl_sgemm (-DWITH_DNNL), both row-major, alpha 1, beta 0.
 *
 * Build (from the repository root), compiling the gemm sources directly:
 *   F="-std=c11 -O2 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Iinclude -Isrc"
 *   gcc $F -mavx2 -mfma -c src/cpu/gemm_avx2.c -o build/gemm_avx2.o
 *   gcc $F -mavx512f -mavx512dq -mavx512bw -mavx512vl -mfma -c src/cpu/gemm_avx512.c -o build/gemm_avx512.o
 *   gcc $F bench/gemm_bench.c src/cpu/gemm.c src/threadpool.c build/gemm_avx2.o build/gemm_avx512.o -lm -lpthread \
 *       -o build/gemm_bench
 * or against the library, which contains the gemm:
 *   gcc $F bench/gemm_bench.c build/libtpexport.a $(pkg-config --libs jansson libprotobuf-c zlib) \
 *       -lm -lpthread -o build/gemm_bench
 * With the libraries as comparison columns (Debian libopenblas-dev, libdnnl-dev), add
 *   -DWITH_OPENBLAS -I/usr/include/x86_64-linux-gnu/openblas-pthread -DWITH_DNNL ... -lopenblas -ldnnl
 * and run with OMP_NUM_THREADS equal to -n (oneDNN's OpenMP threads).
 * OpenBLAS 0.3.21 may not recognise newer CPUs: compare OPENBLAS_CORETYPE=SkylakeX
 * (or Zen, Haswell) against the default.
 *
 * Usage: gemm_bench [-t THREADS_MAX | -n THREADS] [-i ISA] [-u] [-c] [-e] [-m MIB] [-s MxKxN] [-r REPEATS]
 *   -t: 1, 2, 4 ... up to THREADS_MAX (default 2)   -n: exactly THREADS
 *   -i: only that ISA level (0 1 2; default all but scalar)
 *   -u: also B unpacked (packed per call, or read in place for small M)
 *   -c: packed B cold, as a model's weights are: each call takes the next of
 *       copies of it that fill 256 MiB, so B comes from memory, not a cache
 *   -e: a residual block's last convolution: C = relu(A*B + bias + C),
 *       the residual summed in place (beta 1, bias and relu in the kernel)
 *   -m: A and C as a model's activations: each call takes the next of
 *       copies of them that fill MIB MiB (beyond L2: from L3 or memory)
 *   -s: only that shape (any M x K x N, listed or not)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <immintrin.h>

#include "cpu/gemm.h"

#ifdef WITH_OPENBLAS
#include <cblas.h>
#endif
#ifdef WITH_DNNL
#include <dnnl.h>
#endif

enum { MAX_THREADS = 16 };
#define COLD_BYTES (256u << 20) /* -c: packed B copies in all, beyond any L3 */
#define MAX_COLD 4096

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- FMA peak (as bench/fma_peak.c) ---- */

__attribute__((target("avx512f,fma"), noinline)) static float fma_loop_avx512(long iterations) {
    __m512 acc[16];
    for (int i = 0; i < 16; i++) acc[i] = _mm512_set1_ps(0.001f * (float)i);
    const __m512 scale = _mm512_set1_ps(0.9999999f), shift = _mm512_set1_ps(1e-7f);
    for (long it = 0; it < iterations; it++) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) acc[i] = _mm512_fmadd_ps(acc[i], scale, shift);
    }
    __m512 sum = acc[0];
    for (int i = 1; i < 16; i++) sum = _mm512_add_ps(sum, acc[i]);
    return _mm512_reduce_add_ps(sum);
}

__attribute__((target("avx2,fma"), noinline)) static float fma_loop_avx2(long iterations) {
    __m256 acc[12];
    for (int i = 0; i < 12; i++) acc[i] = _mm256_set1_ps(0.001f * (float)i);
    const __m256 scale = _mm256_set1_ps(0.9999999f), shift = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < iterations; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) acc[i] = _mm256_fmadd_ps(acc[i], scale, shift);
    }
    __m256 sum = acc[0];
    for (int i = 1; i < 12; i++) sum = _mm256_add_ps(sum, acc[i]);
    float lanes[8];
    _mm256_storeu_ps(lanes, sum);
    return lanes[0] + lanes[7];
}

static float peak_sink;
static int peak_isa; /* the FMA loop the adjacent peak samples run */
enum { PEAK_SAMPLE_ITERATIONS = 1000 * 1000 }; /* 512 MFLOP a thread at AVX-512: ~3-5 ms */

static double peak_flops_per_iteration(void) { return peak_isa >= TP_ISA_AVX512 ? 512.0 : 192.0; }

/* One adjacent-peak FMA loop on the calling thread; its result goes to a
 * local volatile, so team threads running it at once share no sink. */
static void peak_loop(void) {
    volatile float keep = peak_isa >= TP_ISA_AVX512 ? fma_loop_avx512(PEAK_SAMPLE_ITERATIONS)
                                                    : fma_loop_avx2(PEAK_SAMPLE_ITERATIONS);
    (void)keep;
}

/* GFLOP/s of one peak_loop on the calling thread. */
static double peak_sample(void) {
    double t0 = now_seconds();
    peak_loop();
    return peak_flops_per_iteration() * PEAK_SAMPLE_ITERATIONS / (now_seconds() - t0) * 1e-9;
}

/* Single-core GFLOP/s peak: the best of the FMA loops the CPU runs. */
static double measure_peak(int best_isa) {
    const long iterations = 20 * 1000 * 1000;
    double best = 0.0;
    for (int rep = 0; rep < 4; rep++) {
        double t0 = now_seconds();
        if (best_isa >= TP_ISA_AVX512) {
            peak_sink += fma_loop_avx512(iterations);
            double g = 512.0 * (double)iterations / (now_seconds() - t0) * 1e-9;
            if (g > best) best = g;
            t0 = now_seconds();
        }
        if (best_isa >= TP_ISA_AVX2) {
            peak_sink += fma_loop_avx2(iterations);
            double g = 192.0 * (double)iterations / (now_seconds() - t0) * 1e-9;
            if (g > best) best = g;
        }
    }
    return best > 0.0 ? best : 1.0;
}

/* ---- A spinning thread team (workers 1..nth-1; the caller is thread 0) ---- */

typedef struct team {
    int nth;
    pthread_t tids[MAX_THREADS];
    atomic_int generation, finished;
    atomic_bool quit;
    const tp_gemm *g;
    void *workspace;
} team;

typedef struct worker_arg {
    team *tm;
    int ith;
} worker_arg;

static void *worker_main(void *p) {
    worker_arg *arg = p;
    team *tm = arg->tm;
    int seen = 0;
    for (;;) {
        int gen;
        while ((gen = atomic_load_explicit(&tm->generation, memory_order_acquire)) == seen) _mm_pause();
        seen = gen;
        if (atomic_load(&tm->quit)) return NULL;
        if (tm->g) tp__gemm_run(tm->g, arg->ith, tm->nth, tm->workspace);
        else peak_loop();
        atomic_fetch_add_explicit(&tm->finished, 1, memory_order_release);
    }
}

static worker_arg worker_args[MAX_THREADS];

static void team_start(team *tm, int nth) {
    memset(tm, 0, sizeof *tm);
    tm->nth = nth;
    for (int t = 1; t < nth; t++) {
        worker_args[t] = (worker_arg){tm, t};
        pthread_create(&tm->tids[t], NULL, worker_main, &worker_args[t]);
    }
}

static void team_run(team *tm, const tp_gemm *g, void *workspace) {
    tm->g = g;
    tm->workspace = workspace;
    atomic_store(&tm->finished, 0);
    atomic_fetch_add_explicit(&tm->generation, 1, memory_order_release);
    if (g) tp__gemm_run(g, 0, tm->nth, workspace); /* g NULL: every thread runs peak_loop */
    else peak_loop();
    while (atomic_load_explicit(&tm->finished, memory_order_acquire) != tm->nth - 1) _mm_pause();
}

static void team_stop(team *tm) {
    atomic_store(&tm->quit, true);
    atomic_fetch_add(&tm->generation, 1);
    for (int t = 1; t < tm->nth; t++) pthread_join(tm->tids[t], NULL);
}

/* ---- Timing ---- */

typedef struct bench_shape {
    long m, k, n;
} bench_shape;

typedef void (*bench_fn)(void *ctx);

static void sort_doubles(double *v, int n) {
    for (int i = 1; i < n; i++) /* insertion sort */
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
}

/* The adjacent peak of nth threads: the team's threads each run the FMA
 * loop (tm NULL: the calling thread, times nth). */
static double team_peak(team *tm, int nth) {
    if (!tm) return peak_sample() * nth;
    double t0 = now_seconds();
    team_run(tm, NULL, NULL);
    return peak_flops_per_iteration() * PEAK_SAMPLE_ITERATIONS * nth / (now_seconds() - t0) * 1e-9;
}

/* Median seconds per call of fn over `repeats` samples of >= ~20 ms each;
 * *adj gets the median of (flops per second of a sample) / (the peak
 * sampled right after it). */
static double time_median(bench_fn fn, void *ctx, int repeats, team *tm, int nth, double flops, double *adj) {
    fn(ctx);
    double t0 = now_seconds();
    fn(ctx);
    double once = now_seconds() - t0;
    long iterations = once > 0.02 ? 1 : (long)(0.02 / (once > 1e-7 ? once : 1e-7)) + 1;
    double samples[64], ratios[64];
    if (repeats > 64) repeats = 64;
    for (int r = 0; r < repeats; r++) {
        t0 = now_seconds();
        for (long i = 0; i < iterations; i++) fn(ctx);
        samples[r] = (now_seconds() - t0) / (double)iterations;
        ratios[r] = flops / samples[r] * 1e-9 / team_peak(tm, nth);
    }
    sort_doubles(samples, repeats);
    sort_doubles(ratios, repeats);
    *adj = ratios[repeats / 2];
    return samples[repeats / 2];
}

/* -e: relu as the GEMM's act (the kernels apply it in registers; act_relu says so) */
static void relu_act(float *p, int64_t n, const void *ctx) {
    (void)ctx;
    for (int64_t i = 0; i < n; i++) p[i] = p[i] > 0.0f ? p[i] : 0.0f;
}

typedef struct tp_ctx {
    team *tm;
    tp_gemm g;
    void *workspace;
    void **cold_b; /* -c: copies of the packed B, one per call in turn */
    size_t bt_off; /* packed B transposed for the dot path (gemm.h) at this offset in each, or 0 */
    int n_cold, next_cold;
    float **act_a, **act_c; /* -m: copies of A and C, one pair per call in turn */
    int n_act, next_act;
} tp_ctx;

static void run_tp(void *p) {
    tp_ctx *ctx = p;
    if (ctx->n_cold > 0) {
        ctx->g.packed_b = ctx->cold_b[ctx->next_cold++ % ctx->n_cold];
        if (ctx->bt_off) ctx->g.packed_bt = (const float *)((const char *)ctx->g.packed_b + ctx->bt_off);
    }
    if (ctx->n_act > 0) {
        const int i = ctx->next_act++ % ctx->n_act;
        ctx->g.a = ctx->act_a[i];
        ctx->g.c = ctx->act_c[i];
    }
    team_run(ctx->tm, &ctx->g, ctx->workspace);
}

typedef struct lib_ctx {
    const bench_shape *s;
    const float *a, *b;
    float *c;
} lib_ctx;

#ifdef WITH_OPENBLAS
static void run_openblas(void *p) {
    lib_ctx *ctx = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)ctx->s->m, (int)ctx->s->n, (int)ctx->s->k, 1.0f,
                ctx->a, (int)ctx->s->k, ctx->b, (int)ctx->s->n, 0.0f, ctx->c, (int)ctx->s->n);
}
#endif
#ifdef WITH_DNNL
static void run_dnnl(void *p) {
    lib_ctx *ctx = p;
    dnnl_sgemm('N', 'N', ctx->s->m, ctx->s->n, ctx->s->k, 1.0f, ctx->a, ctx->s->k, ctx->b, ctx->s->n, 0.0f,
               ctx->c, ctx->s->n);
}
#endif

static void *alloc_aligned(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64 + 64); }

int main(int argc, char **argv) {
    int max_threads = 2, min_threads = 1, only_isa = -1, repeats = 7;
    bool unpacked_too = false, cold = false;
    bool residual = false;
    long act_mib = 0;
    bench_shape only = {0, 0, 0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) max_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) min_threads = max_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-i") && i + 1 < argc) only_isa = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-u")) unpacked_too = true;
        else if (!strcmp(argv[i], "-c")) cold = true;
        else if (!strcmp(argv[i], "-e")) residual = true;
        else if (!strcmp(argv[i], "-m") && i + 1 < argc) act_mib = atol(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) sscanf(argv[++i], "%ldx%ldx%ld", &only.m, &only.k, &only.n);
        else {
            fprintf(stderr, "usage: %s [-t THREADS_MAX | -n THREADS] [-i ISA] [-u] [-c] [-e] [-m MIB] [-s MxKxN] [-r REPEATS]\n", argv[0]);
            return 2;
        }
    }
    if (max_threads < 1) max_threads = 1;
    if (max_threads > MAX_THREADS) max_threads = MAX_THREADS;
    static const bench_shape shapes[] = {
        {256, 256, 256},   {512, 512, 512},    {1024, 1024, 1024}, {32, 784, 512},   {32, 512, 512},
        {32, 512, 10},     {128, 256, 768},    {128, 256, 1024},   {128, 1024, 256}, {197, 384, 1152},
        {197, 1536, 384},  {12544, 27, 64},    {3136, 576, 64},    {784, 1152, 128}, {196, 2304, 256},
        {49, 4608, 512},   {1, 512, 1000},
    };
    const int best_isa = tp__gemm_best_isa();
    const double peak = measure_peak(best_isa);
    peak_isa = best_isa;
    tp_gemm_cache_info caches = tp__gemm_cache_info();
    printf("single-core FMA peak %.1f GFLOP/s; caches L1d %ld KiB, L2 %ld KiB, L3 %ld KiB; best ISA %d\n", peak,
           (long)(caches.l1d >> 10), (long)(caches.l2 >> 10), (long)(caches.l3 >> 10), best_isa);
    printf("%-16s %3s %-7s %-8s %9s %7s %7s\n", "shape MxKxN", "nth", "isa", "B", "GFLOP/s", "%peak", "%adj");

    if (min_threads < 1 || min_threads > max_threads) min_threads = 1;
    for (int nth = min_threads; nth <= max_threads; nth *= 2) {
        team tm;
#ifdef WITH_OPENBLAS
        openblas_set_num_threads(nth);
#endif
#ifdef WITH_DNNL
        /* oneDNN (Debian: OpenMP) takes its thread count from OMP_NUM_THREADS:
         * run the bench once per thread count with -t and OMP_NUM_THREADS set. */
#endif
        const size_t n_shapes = only.m > 0 ? 1 : sizeof shapes / sizeof shapes[0];
        for (size_t s = 0; s < n_shapes; s++) {
            const bench_shape *sh = only.m > 0 ? &only : &shapes[s];
            const double flops = 2.0 * (double)sh->m * (double)sh->k * (double)sh->n;
            float *a = alloc_aligned(sizeof(float) * (size_t)(sh->m * sh->k));
            float *b = alloc_aligned(sizeof(float) * (size_t)(sh->k * sh->n));
            float *c = alloc_aligned(sizeof(float) * (size_t)(sh->m * sh->n));
            float *bias = alloc_aligned(sizeof(float) * (size_t)sh->n);
            for (long j = 0; j < sh->n; j++) bias[j] = (float)(j % 7) * 0.01f;
            for (long i = 0; i < sh->m * sh->k; i++) a[i] = (float)((i * 7 % 13) - 6) * 0.1f;
            for (long i = 0; i < sh->k * sh->n; i++) b[i] = (float)((i * 5 % 11) - 5) * 0.1f;
            char name[32];
            snprintf(name, sizeof name, "%ldx%ldx%ld", sh->m, sh->k, sh->n);
            /* The team spins between calls: stopped before the libraries run. */
            team_start(&tm, nth);
            for (int isa = best_isa; isa >= TP_ISA_SCALAR; isa--) {
                if (only_isa >= 0 ? isa != only_isa : isa == TP_ISA_SCALAR) continue;
                static const char *isa_names[] = {"scalar", "avx2", "avx512"};
                for (int packed = 1; packed >= (unpacked_too ? 0 : 1); packed--) {
                    tp_ctx ctx = {.tm = &tm};
                    tp_gemm *g = &ctx.g;
                    g->isa = isa;
                    g->m = sh->m;
                    g->n = sh->n;
                    g->k = sh->k;
                    g->a = a;
                    g->rs_a = sh->k;
                    g->cs_a = 1;
                    void *packed_b = NULL;
                    size_t packed_bytes = 0;
                    g->packed_bt = NULL;
                    ctx.bt_off = 0;
                    if (packed) { /* as the linear ops pack a weight: transposed after the panels where the
                                   * dot path applies (gemm.h) */
                        const size_t b_bytes = (tp__gemm_packed_b_bytes(isa, sh->k, sh->n) + 63) & ~(size_t)63;
                        const size_t bt_bytes = tp__gemm_packed_bt_bytes(isa, sh->k, sh->n);
                        packed_bytes = b_bytes + bt_bytes;
                        packed_b = alloc_aligned(packed_bytes);
                        tp__gemm_pack_b(isa, sh->k, sh->n, b, sh->n, 1, packed_b);
                        g->packed_b = packed_b;
                        if (bt_bytes) {
                            ctx.bt_off = b_bytes;
                            tp__gemm_pack_bt(isa, sh->k, sh->n, b, sh->n, 1, (char *)packed_b + b_bytes);
                            g->packed_bt = (const float *)((const char *)packed_b + b_bytes);
                        }
                    } else {
                        g->b = b;
                        g->rs_b = sh->n;
                        g->cs_b = 1;
                    }
                    g->c = c;
                    g->ldc = sh->n;
                    g->ep = tp__gemm_epilogue_default();
                    if (residual) { /* a residual block's last convolution, summed in place: C = relu(A*B + bias + C) */
                        g->ep.beta = 1.0f;
                        g->ep.bias = bias;
                        g->ep.act = relu_act;
                        g->ep.act_relu = true;
                    }
                    if (act_mib > 0) { /* as a model's activations: A and C from L3 or memory */
                        const size_t ab = sizeof(float) * (size_t)(sh->m * sh->k), cb = sizeof(float) * (size_t)(sh->m * sh->n);
                        ctx.n_act = (int)(((size_t)act_mib << 20) / (ab + cb)) + 1;
                        if (ctx.n_act > MAX_COLD) ctx.n_act = MAX_COLD;
                        ctx.act_a = calloc((size_t)ctx.n_act, sizeof *ctx.act_a);
                        ctx.act_c = calloc((size_t)ctx.n_act, sizeof *ctx.act_c);
                        for (int i = 0; ctx.act_a && ctx.act_c && i < ctx.n_act; i++) {
                            ctx.act_a[i] = alloc_aligned(ab);
                            ctx.act_c[i] = alloc_aligned(cb);
                            if (!ctx.act_a[i] || !ctx.act_c[i]) {
                                free(ctx.act_a[i]);
                                free(ctx.act_c[i]);
                                ctx.n_act = i;
                                break;
                            }
                            memcpy(ctx.act_a[i], a, ab);
                            memset(ctx.act_c[i], 0, cb);
                        }
                    }
                    if (cold && packed) { /* as a model's weights: from memory, not from a warm cache */
                        const size_t bytes = packed_bytes;
                        ctx.n_cold = (int)((size_t)COLD_BYTES / bytes) + 1;
                        if (ctx.n_cold > MAX_COLD) ctx.n_cold = MAX_COLD;
                        ctx.cold_b = calloc((size_t)ctx.n_cold, sizeof *ctx.cold_b);
                        for (int i = 0; ctx.cold_b && i < ctx.n_cold; i++) {
                            ctx.cold_b[i] = alloc_aligned(bytes);
                            if (ctx.cold_b[i]) memcpy(ctx.cold_b[i], packed_b, bytes);
                            else ctx.n_cold = i;
                        }
                    }
                    ctx.workspace = alloc_aligned(tp__gemm_workspace_bytes(g, nth));
                    double adj;
                    const double seconds = time_median(run_tp, &ctx, repeats, &tm, nth, flops, &adj);
                    const double gflops = flops / seconds * 1e-9;
                    printf("%-16s %3d %-7s %-8s %9.1f %6.1f%% %6.1f%%\n", name, nth, isa_names[isa],
                           packed ? "packed" : "unpacked", gflops, 100.0 * gflops / (peak * nth), 100.0 * adj);
                    fflush(stdout);
                    free(ctx.workspace);
                    free(packed_b);
                    for (int i = 0; i < ctx.n_cold; i++) free(ctx.cold_b[i]);
                    free(ctx.cold_b);
                    for (int i = 0; i < ctx.n_act; i++) {
                        free(ctx.act_a[i]);
                        free(ctx.act_c[i]);
                    }
                    free(ctx.act_a);
                    free(ctx.act_c);
                }
            }
            team_stop(&tm);
            lib_ctx lctx = {sh, a, b, c};
            (void)lctx;
#ifdef WITH_OPENBLAS
            {
                double adj;
                const double gflops = flops / time_median(run_openblas, &lctx, repeats, NULL, nth, flops, &adj) * 1e-9;
                printf("%-16s %3d %-7s %-8s %9.1f %6.1f%% %6.1f%%\n", name, nth, "openblas", "-", gflops,
                       100.0 * gflops / (peak * nth), 100.0 * adj);
            }
#endif
#ifdef WITH_DNNL
            {
                double adj;
                const double gflops = flops / time_median(run_dnnl, &lctx, repeats, NULL, nth, flops, &adj) * 1e-9;
                printf("%-16s %3d %-7s %-8s %9.1f %6.1f%% %6.1f%%\n", name, nth, "onednn", "-", gflops,
                       100.0 * gflops / (peak * nth), 100.0 * adj);
            }
#endif
            fflush(stdout);
            free(a);
            free(b);
            free(c);
            free(bias);
        }
    }
    return peak_sink == 12345.0f ? 1 : 0;
}
