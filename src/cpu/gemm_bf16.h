/*
 * gemm_bf16.h - bfloat16 matrix multiply on AVX-512-BF16's dot-product
 * instruction (vdpbf16ps), for the CPU kernels:
 *     C (bfloat16) = round(alpha * A*B + bias)
 * with A (M x K, bfloat16, any strides), B (K x N, bfloat16) packed once
 * (weights), products accumulated in float32 and C rounded once, to
 * nearest even. vdpbf16ps adds two products to a float32 lane per step, at
 * twice the FMA's rate: 234.5 against 116.4 GFLOP/s per core on a Zen 4
 * (bench/fma_peak.c). Like every user of the instruction (oneDNN's bfloat16
 * kernels, which PyTorch runs), it treats denormal bfloat16 inputs and
 * float32 sums as zero; the products of two bfloat16 numbers are exact in
 * float32.
 *
 * Loops, for the block of rows [m0, m1) and column panels [p0, p1) a thread
 * owns: K blocks of at most 512 (a B micro-panel of 64 columns is 64 KiB),
 * row blocks of at most 96 (read in place when A's rows are contiguous,
 * else gathered into the workspace), column panels of 64, row panels of 6
 * (the micro-kernel: 6 x 64, 24 zmm accumulators). With K beyond one block
 * the partial sums wait in a float32 copy of C in the workspace. Results do
 * not depend on the thread count (the K blocks are the same).
 *
 * On CPUs with AMX-BF16 the same packed B runs on AMX tiles instead
 * (gemm_bf16_amx.c, tp__gemm_bf16_amx): 32 x 32 blocks of C summed over
 * all of K in the tiles, then this kernel's epilogue.
 */
#ifndef TPEXPORT_CPU_GEMM_BF16_H
#define TPEXPORT_CPU_GEMM_BF16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../internal.h"

enum { TP__GEMM_BF16_MR = 6, TP__GEMM_BF16_NR = 64, TP__GEMM_BF16_KC = 512, TP__GEMM_BF16_MC = 96 };

/* Whether this build and this CPU run it: AVX-512 F/BW/VL with BF16 and
 * the OS's ZMM state (cpuid, xgetbv; cheap after the first call). */
TP_HIDDEN bool tp__gemm_bf16_supported(void);

/* Bytes of a packed K x N matrix; pack B (element (p, j) at
 * b[p*rs_b + j*cs_b]) into dst (64-byte aligned, that many bytes). Layout:
 * panels of 64 columns (the last one as wide as N's rest, rounded up to
 * 16), each ceil(K / 2) rows of pairs: row q holds (B[2q][j], B[2q+1][j])
 * for each column j, zero beyond K and N. */
TP_HIDDEN size_t tp__gemm_bf16_packed_b_bytes(int64_t k, int64_t n);
/* Width of panel p of a packed B of N columns (64, or N's rest rounded up
 * to 16). */
static inline int tp__gemm_bf16_panel_width(int64_t n, int64_t p) {
    int64_t rest = n - p * TP__GEMM_BF16_NR;
    return rest >= TP__GEMM_BF16_NR ? TP__GEMM_BF16_NR : (int)((rest + 15) / 16 * 16);
}
TP_HIDDEN void tp__gemm_bf16_pack_b(int64_t k, int64_t n, const uint16_t *b, int64_t rs_b, int64_t cs_b, void *dst);

typedef struct tp_gemm_bf16 {
    int64_t m, n, k;
    const uint16_t *a; int64_t rs_a, cs_a; /* A: element (i, p) at a[i*rs_a + p*cs_a] */
    const void *packed_b;                 /* tp__gemm_bf16_pack_b of the same k, n */
    uint16_t *c; int64_t ldc;             /* C: row stride ldc, column stride 1 */
    float alpha;
    const float *bias;                    /* NULL, or N floats added to every row (M floats, bias[i] to row
                                           * i, with bias_per_row) */
    bool bias_per_row;
    /* Fused 16-bit steps after the product (each its own rounding, as the
     * separate steps round): C = round(round(round(product) + bias2) + res),
     * the missing ones skipped. bias2: NULL or N bfloat16 values; res:
     * NULL or an M x N bfloat16 matrix, row stride ld_res. */
    const uint16_t *bias2;
    const uint16_t *res;
    int64_t ld_res;
    /* Then a fused activation, applied before the last rounding (the same
     * bits as after it: its results are the input or 0 or 6): 0 none, 1
     * relu (x > 0 or NaN ? x : +0), 2 relu6 / clamp(x, 0, 6) (NaN kept). */
    int relu;
} tp_gemm_bf16;

/* Workspace one product needs when run by nth threads (64-byte aligned). */
TP_HIDDEN size_t tp__gemm_bf16_workspace_bytes(const tp_gemm_bf16 *g, int nth);
/* The part of C thread ith of nth owns; the nth calls together (concurrent
 * or not, same g and workspace) compute all of C. Never allocates. K must
 * be at least 1 (callers run empty products elsewhere: fast_linalg.c takes
 * this path only for k > 0, a convolution's K is never 0); with k <= 0 it
 * writes nothing. */
TP_HIDDEN void tp__gemm_bf16_run(const tp_gemm_bf16 *g, int ith, int nth, void *workspace);

/* Whether the products run on AMX tiles (gemm_bf16_amx.c) instead of the
 * vdpbf16ps kernel: a build that knows AMX, a CPU with AMX-TILE and
 * AMX-BF16 whose OS saves tile state and grants this process the tile
 * data (arch_prctl), and TP_BF16_AMX=0 not set in the environment (read
 * once). On a Sapphire Rapids core vdpbf16ps runs at half the float32
 * FMA's rate (84 against 175 GFLOP/s, bench/fma_peak.c), tdpbf16ps at
 * many times it. */
TP_HIDDEN bool tp__gemm_bf16_amx(void);
/* gemm_bf16_amx.c: workspace bytes of one thread for K, and the block of
 * rows [m0, m1) x column panels [p0, p1) of C. */
TP_HIDDEN size_t tp__gemm_bf16_amx_workspace(int64_t k);
TP_HIDDEN void tp__gemm_bf16_amx_rows(const tp_gemm_bf16 *g, int64_t m0, int64_t m1, int64_t p0, int64_t p1,
                                      void *ws);

/* tp__gemm_bf16_pack_b for a B with contiguous rows (cs_b 1) in vectors
 * (gemm_bf16_avx512.c): two rows' 32 columns interleaved per step. */
TP_HIDDEN void tp__gemm_bf16_avx512_pack_rows(int64_t k, int64_t n, const uint16_t *b, int64_t rs_b, uint16_t *dst);

/* The micro-kernel (gemm_bf16_avx512.c): rows [0, m) (m <= 6) x columns
 * [0, n) (n <= 64) of a tile. a: row i's pairs at a[i*rs_a + 2q] (q <
 * kc2; with odd, the last pair holds one element). b: kc2 rows of w pairs
 * (w = the panel's width). acc: add the float32 tile at c32 (row stride
 * ldc32) to the sums. last: the sums times alpha plus ep's bias[j]
 * (bias[i] with bias_row), then ep's fused steps (bias2, res; each after a
 * rounding), are rounded into out (row stride ldo); else they go to c32. */
typedef struct tp__gemm_bf16_ep {
    const float *bias;     /* the tile's (first column's, or first row's with bias_row) */
    bool bias_row;
    const uint16_t *bias2; /* the tile's first column's */
    const uint16_t *res;   /* the tile's first element */
    int64_t ld_res;
    int relu;              /* tp_gemm_bf16.relu */
} tp__gemm_bf16_ep;
TP_HIDDEN void tp__gemm_bf16_avx512_kernel(int64_t kc2, bool odd, const uint16_t *a, int64_t rs_a, const uint16_t *b,
                                           int w, int m, int n, float alpha, bool acc, float *c32, int64_t ldc32,
                                           bool last, const tp__gemm_bf16_ep *ep, uint16_t *out, int64_t ldo);

#endif
