/*
 * fma_peak.c - single-core FP32 FMA peak: a register-only loop of
 * independent FMA chains (enough to cover FMA latency on current cores),
 * for AVX-512 (zmm) and AVX2 (ymm) separately, in GFLOP/s (an FMA is 2 flops),
 * and AVX-512-BF16's vdpbf16ps (per float32 lane two bfloat16 products
 * added: 4 flops) where the CPU has it.
 * Each ISA runs only if cpuid says it is there. The result is the
 * reference "100%" for bench/gemm_bench.c.
 *
 * Build (from the repository root; the ISA code uses target attributes, so
 * no -m flags):
 *   gcc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L bench/fma_peak.c -o build/fma_peak
 * Run pinned to one core for a clean number: taskset -c 0 build/fma_peak
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 16 chains x 16 lanes per iteration; returns a sum so nothing is dead. */
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

/* 12 chains x 8 lanes per iteration (12 of the 16 ymm registers). */
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
    return lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
}

/* 16 chains of vdpbf16ps x 16 lanes, each lane two products a step. The
 * operands are normal numbers (denormal bfloat16 inputs count as zero). */
__attribute__((target("avx512f,avx512bf16"), noinline)) static float dpbf16_loop(long iterations) {
    __m512 acc[16];
    for (int i = 0; i < 16; i++) acc[i] = _mm512_set1_ps(0.001f * (float)i);
    const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = (__m512bh)_mm512_set1_epi32(0x33d633d6); /* 1, 1e-7 */
    for (long it = 0; it < iterations; it++) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    }
    __m512 sum = acc[0];
    for (int i = 1; i < 16; i++) sum = _mm512_add_ps(sum, acc[i]);
    return _mm512_reduce_add_ps(sum);
}

/* Best GFLOP/s of several timed runs of `loop`. */
static double measure(float (*loop)(long), double flops_per_iteration, float *sink) {
    const long iterations = 50 * 1000 * 1000;
    double best = 0.0;
    *sink += loop(iterations / 10); /* warm up: clocks, license levels */
    for (int rep = 0; rep < 5; rep++) {
        const double t0 = now_seconds();
        *sink += loop(iterations);
        const double gflops = flops_per_iteration * (double)iterations / (now_seconds() - t0) * 1e-9;
        if (gflops > best) best = gflops;
    }
    return best;
}

int main(void) {
    float sink = 0.0f;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        printf("avx512 fma peak: %.1f GFLOP/s (16 zmm chains)\n", measure(fma_loop_avx512, 16 * 16 * 2, &sink));
    else
        printf("avx512: not supported\n");
    if (__builtin_cpu_supports("avx512bf16"))
        printf("avx512 bf16 dot peak: %.1f GFLOP/s (16 zmm chains of vdpbf16ps)\n",
               measure(dpbf16_loop, 16 * 16 * 4, &sink));
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        printf("avx2   fma peak: %.1f GFLOP/s (12 ymm chains)\n", measure(fma_loop_avx2, 12 * 8 * 2, &sink));
    else
        printf("avx2: not supported\n");
    return sink == 12345.0f ? 1 : 0;
}
