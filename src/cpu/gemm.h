/*
 * gemm.h - single-precision matrix multiply with a fused epilogue, for the
 * CPU kernels: C = act(alpha*A*B + beta*C + bias + residual).
 *
 * BLIS-style: loops around a register-blocked micro-kernel chosen by ISA
 * level: scalar C 4 x 16, AVX2+FMA 6 x 16 (12 ymm accumulators), AVX-512
 * 6 x 64 (24 zmm accumulators), each also in narrower variants for the
 * edges of C; at AVX-512 a product with N <= 32 runs a 12 x 32 kernel
 * (12 or 24 accumulators) instead, and one with N <= 15 whose caller packed
 * B transposed too runs the dot path (below). Blocking follows the L1/L2 sizes the CPU reports (cpuid leaf
 * 4 or 0x8000001D, else sysfs, else defaults). A caller picks the ISA level once
 * (tp__gemm_best_isa), may pack a constant B (weights) once, sizes one
 * workspace for nth threads and calls tp__gemm_run from each thread; the
 * threads need no synchronisation among themselves.
 *
 * Results are bitwise independent of nth and ith: every element of C is
 * reduced over K in the same order (the K blocking depends only on k and the
 * cache sizes, never on the thread split). They differ between ISA levels.
 */
#ifndef TPEXPORT_CPU_GEMM_H
#define TPEXPORT_CPU_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../internal.h"
#include "../threadpool.h"

/* ISA levels, chosen by the caller from cpuid (never by CPU model). */
enum { TP_ISA_SCALAR = 0, TP_ISA_AVX2 = 1, TP_ISA_AVX512 = 2 };

/* Highest ISA level this build and this CPU support now (cpuid feature bits
 * and the OS's support of the register state, read with xgetbv). Cheap after
 * the first call. Any level below the returned one is usable too. */
TP_HIDDEN int tp__gemm_best_isa(void);

/* Epilogue applied to C after the product, while the tile is in cache:
 *   C = act(alpha*A*B + beta*C_old + bias + residual)
 * bias: NULL, or a vector of N (bias_per_row false: added to every row) or
 *   of M (bias_per_row true: bias[i] added to row i).
 * residual: NULL or an M x N matrix with row stride ld_residual; distinct
 *   memory from C.
 * act: NULL or a function applied in place to each finished segment of
 *   C: act(ptr, n, act_ctx) for n contiguous floats (segments of one row,
 *   or several whole rows at once when ldc == N; each element exactly
 *   once). It may be called concurrently from all threads running the
 *   product.
 * beta: 0 (C_old is not read, so it may hold NaN) and 1 are fast; other
 *   values are allowed. */
typedef struct tp_gemm_epilogue {
    float alpha, beta;
    const float *bias;
    bool bias_per_row;
    const float *residual;
    int64_t ld_residual;
    void (*act)(float *ptr, int64_t n, const void *act_ctx);
    const void *act_ctx;
    /* act is relu (1) or relu6 (2) (a hint; act must still be set): the
     * micro-kernels then apply it to a tile in registers, with its exact
     * results (relu: x > 0: x; NaN: NaN; else +0; relu6: clamp to [0, 6],
     * NaN and -0 kept: tp__relu_mode), when nothing is left to add before
     * it (no separate residual, no bias per row). A bias of N is always
     * added in registers; the rest of the epilogue runs after, in the same
     * order as the separate pass, so the results are the same. 0: act is
     * something else, applied by the pass. */
    int act_relu;
} tp_gemm_epilogue;

/* The activations the GEMM tiles (tp_gemm_epilogue.act_relu) and the
 * convolutions apply themselves before their last rounding (tp_conv_dw.relu,
 * tp_conv_nhwc.relu16, tp_gemm_bf16.relu): 0 none, 1
 * relu (x > 0 or NaN ? x : +0), 2 relu6 = clamp(x, 0, 6) (NaN kept, -0
 * kept), as the elementwise steps compute them. */
static inline float tp__relu_mode(float v, int mode) {
    if (mode == 1) return v > 0.0f || v != v ? v : 0.0f;
    if (mode == 2) return v != v ? v : v < 0.0f ? 0.0f : v > 6.0f ? 6.0f : v;
    return v;
}
/* ... over n floats in place. */
static inline void tp__relu_mode_apply(int mode, float *p, int64_t n) {
    if (mode)
        for (int64_t i = 0; i < n; i++) p[i] = tp__relu_mode(p[i], mode);
}

/* The identity epilogue: alpha 1, beta 0, nothing else. */
static inline tp_gemm_epilogue tp__gemm_epilogue_default(void) {
    tp_gemm_epilogue ep = {0};
    ep.alpha = 1.0f;
    return ep;
}

/* B packed once (weights): the layout is private to gemm.c and depends on
 * isa. Bytes needed for a packed K x N matrix (0 when k or n is 0). */
TP_HIDDEN size_t tp__gemm_packed_b_bytes(int isa, int64_t k, int64_t n);
/* Pack B (K x N, element (p, j) at b[p*rs_b + j*cs_b], any strides incl.
 * transposed) into dst (64-byte aligned, tp__gemm_packed_b_bytes bytes,
 * owned by the caller). The packed copy does not refer to b. */
TP_HIDDEN void tp__gemm_pack_b(int isa, int64_t k, int64_t n, const float *b, int64_t rs_b,
                               int64_t cs_b, void *dst);
/* The same for rows [row0, row0 + kp) of a packed K x N matrix only (b:
 * those kp rows, element (p, j) of them at b[p*rs_b + j*cs_b]): a packed B
 * built from several sources, one range of rows at a time. */
TP_HIDDEN void tp__gemm_pack_b_rows(int isa, int64_t k, int64_t row0, int64_t kp, int64_t n, const float *b,
                                    int64_t rs_b, int64_t cs_b, void *dst);

/* dst = the packed K x N matrix src with row p (B's element (p, j), every
 * j) times scale[p], in the same layout (tp__gemm_packed_b_bytes bytes,
 * 64-byte aligned, not overlapping src): a per-call copy of pre-packed
 * weights scaled along K, as A scaled by column would multiply them. */
TP_HIDDEN void tp__gemm_scale_packed_b_rows(int isa, int64_t k, int64_t n, const void *src, const float *scale,
                                            void *dst);

/* Columns [j0, n) of a packed K x N matrix, themselves a packed K x (N - j0)
 * matrix, for j0 a multiple of the ISA's NR (tp__gemm_register_block); a
 * product over columns [j0, j1) with j1 a multiple of NR, or N, reads it
 * as its packed_b with n = j1 - j0. */
TP_HIDDEN const void *tp__gemm_packed_b_cols(int isa, int64_t k, const void *packed, int64_t j0);

/* One product. All pointers are borrowed for the duration of the calls. */
typedef struct tp_gemm {
    int isa;                              /* TP_ISA_*, at most tp__gemm_best_isa() */
    int64_t m, n, k;
    const float *a; int64_t rs_a, cs_a;   /* A: M x K, element (i,p) at a[i*rs_a + p*cs_a]; any strides;
                                           * NULL when a_fill gives it */
    const float *b; int64_t rs_b, cs_b;   /* B: K x N unpacked, or NULL when packed_b is set */
    const void *packed_b;                 /* from tp__gemm_pack_b with the same isa, k, n */
    const float *packed_bt;               /* NULL, or (with packed_b) B transposed by tp__gemm_pack_bt for
                                           * the dot path (tp__gemm_packed_bt_bytes > 0) */
    float *c; int64_t ldc;                /* C: M x N, row-major, row stride ldc (>= n), column stride 1 */
    tp_gemm_epilogue ep;
    /* Implicit A (a NULL): a_fill writes rows [i0, i0 + rows) x columns
     * [p0, p0 + kc) of A row-major into dst (row stride kc), from the thread
     * that computes them, a cache-sized block at a time. An implicit GEMM
     * convolution gathers its input patches this way (im2col of an L2-sized
     * block of pixels per K block). It may be called concurrently.
     * scratch: the calling thread's fill_scratch bytes (64-byte aligned;
     * NULL when fill_scratch is 0), kept between that thread's fills of one
     * block of C (its rows filled in increasing order); the run zeroes its
     * first 64 bytes before the thread starts a block (its own, or with
     * claimed work each unit it takes), so a fill can tell a fresh block
     * from a continued one. */
    void (*a_fill)(const void *ctx, int64_t i0, int rows, int64_t p0, int64_t kc, float *dst, void *scratch);
    const void *a_ctx;
    size_t fill_scratch;
} tp_gemm;

/* Scratch bytes one call needs when run by nth threads (covers per-thread
 * packing buffers); may be 0. */
TP_HIDDEN size_t tp__gemm_workspace_bytes(const tp_gemm *g, int nth);
/* Compute the part of C that thread ith of nth owns. All nth calls together
 * (made concurrently from nth threads, or one after another, with the same g
 * and the same workspace pointer, 64-byte aligned, tp__gemm_workspace_bytes
 * (g, nth) bytes) compute all of C. No synchronisation inside: each thread
 * owns a disjoint block of C and its own slice of the workspace; if B is not
 * packed, each thread packs the B panels it needs itself. Some threads may
 * own nothing when the product is small. Never allocates, never fails. m, n
 * or k may be 0 (k == 0: C = act(beta*C + bias + residual)). */
TP_HIDDEN void tp__gemm_run(const tp_gemm *g, int ith, int nth, void *workspace);
/* The same with work claimed at run time (threadpool.h): claims holds nth
 * claims, zeroed before the nth calls of this one product (a step making
 * several products must not share one array among them); each thread runs
 * its own block's units and then takes what is left of the others'. The
 * values of C are those of tp__gemm_run, bit for bit, whoever computes
 * them. claims NULL: tp__gemm_run. */
TP_HIDDEN void tp__gemm_run_claimed(const tp_gemm *g, int ith, int nth, void *workspace, tp_claim *claims);

/* One panel's product without a plan, for callers running many small
 * products on weights they build per call (Winograd's on-the-fly weights,
 * conv_nhwc_avx2.c): C (m x n, row stride ldc) = A (m x kc, row-major, row
 * stride rs_a) x B + beta * C, beta 0 or 1, no epilogue. B is one panel
 * of kc rows as a packed kc x n matrix lays it out (n at most the ISA's NR:
 * kc rows of its width, tp__gemm_packed_b_bytes(isa, kc, n) bytes; the
 * AVX2 and portable kernels read NR floats from each row's start, so B
 * holds NR floats from the last row's start on). Each element of C is the
 * micro-kernels' sequential chain over p, added to C when beta is 1: the
 * same bits as tp__gemm_run's kernels give for one K block of these
 * rows. [pf, pf + pf_bytes): read soon, fetched into L2 while the kernels
 * compute (split among its row panels' calls; the micro-kernels' pf). */
TP_HIDDEN void tp__gemm_panel(int isa, int64_t m, int64_t kc, const float *a, int64_t rs_a, const float *b, int n,
                              float *c, int64_t ldc, float beta, const void *pf, int64_t pf_bytes);

/* The dot path: at AVX-512, a product of 2 or more rows with N <=
 * TP__GEMM_DOT_MAX_N, K >= max(TP__GEMM_DOT_MIN_K, 16 N), a pre-packed B
 * and A row-major (cs_a 1, not implicit) runs each element of C as 16
 * chains of FMAs over p mod 16 summed by a fixed tree (every FMA's 16
 * lanes useful, where the 12 x 32 kernel uses 10 of 16 for a classifier's
 * N = 10 and one broadcast load per FMA); it needs B transposed, K
 * contiguous, which the caller packs once beside packed_b:
 * tp__gemm_packed_bt_bytes(isa, k, n) bytes (0 when the path does not
 * apply to such products), written by tp__gemm_pack_bt.
 * The plan decides per product (m, n, k, A's layout), never per thread
 * split, so results stay independent of nth. */
/* Where it pays (Sapphire Rapids, gemm_bench, 1 thread, % of the adjacent
 * FMA peak, dot / 12 x 32 kernel, measured before the dot kernel's row
 * sums moved into registers, which took 32x512x10 68 -> 76%; the bounds
 * were not measured again after it): its lanes' tree costs the same per
 * element of C whatever K, the kernel's lost lanes (16 - N of 16) the same
 * share of its FMAs: N = 4: 256x64 21 / 18, 3136x96 29 / 20; N = 8:
 * 256x192 50 / 41; N = 10: 256x128 42 / 50, 256x192 51 / 51, 256x256
 * 57 / 52, 256x512 71 / 49; N = 16 (no lane lost): 3136x96 45 / 79,
 * 256x256 66 / 83, 256x1024 74 / 78, 32x4096 81 / 79.
 * Measured again after it on a Zen 5 (same columns): shorter K would pay
 * for N <= 12 - N = 8: 256x64 56 / 40, 3136x64 59 / 39; N = 10: 256x64
 * 56 / 50, 256x96 67 / 52, 256x128 75 / 53, 256x88 (K not a multiple of
 * 16) 51 / 52; N = 12: 256x104 64 / 63, 256x136 74 / 65 - but not for N
 * = 13-15, where K's last partial 16 costs the dot path more than the
 * lanes the kernel loses (N = 15: 256x120 61 / 80, 256x136 65 / 80;
 * N = 13: 256x136 65 / 69; N = 14: 256x232 74 / 76); at K >= 16 N it
 * wins (N = 10: 256x256 87 / 54, 256x512 90 / 52, 256x1024 73 / 45;
 * N = 12: 256x256 90 / 65; N = 14: 256x512 92 / 73; N = 15: 256x256
 * 88 / 81, 256x512 89 / 78) except N = 15 with such a tail or a B
 * beyond L1 (256x248 72 / 82, 256x960 71-73 / 75-76). The bound stays
 * 16 N: a lower one for N <= 12 was not measured on an Intel CPU, where
 * the kernel led at 256x128 before the row sums moved. */
enum { TP__GEMM_DOT_MAX_N = 15, TP__GEMM_DOT_MIN_K = 64 };
TP_HIDDEN size_t tp__gemm_packed_bt_bytes(int isa, int64_t k, int64_t n);
TP_HIDDEN void tp__gemm_pack_bt(int isa, int64_t k, int64_t n, const float *b, int64_t rs_b, int64_t cs_b,
                                void *dst);
/* Whether g runs on the dot path (for tests). */
TP_HIDDEN bool tp__gemm_uses_dot(const tp_gemm *g);

/* Cache sizes the blocking was derived from (bytes per core; read once from
 * cpuid or sysfs, defaults when unknown), for benchmarks and tests. */
typedef struct tp_gemm_cache_info {
    int64_t l1d, l2, l3;
} tp_gemm_cache_info;
TP_HIDDEN tp_gemm_cache_info tp__gemm_cache_info(void);

/* Register block of an ISA level's micro-kernel (rows x columns of C); NR
 * is also the width of a packed B's full panels. (AVX-512 products with
 * N <= TP__GEMM_AVX512_NARROW_NR run a 12 x 32 kernel on the same packed
 * layout.) */
TP_HIDDEN void tp__gemm_register_block(int isa, int *mr, int *nr);

/* ---- Micro-kernels (gemm_avx2.c, gemm_avx512.c); internal to the gemm. ----
 * C[0:m, 0:n] (row stride ldc) = alpha * A*B + beta * C for 1 <= m <= MR,
 * 1 <= n <= NR, kc >= 0. beta == 0: C is not read.
 * A: m x kc, element (i, p) at a[i*rs_a + p*cs_a]; either packed (rs_a 1,
 *    cs_a MR) or row-major (cs_a 1, any rs_a).
 * B: kc x NR, row p at b + p*ldb (a packed panel: ldb NR; row-major B read
 *    in place: its row stride). AVX-512 reads columns [0, n) only; AVX2
 *    and the portable kernel read NR floats from every row start (what lies
 *    beyond n, possibly the next row, only feeds columns never stored), so
 *    B must hold that many past the last row's start. Columns beyond n are
 *    never stored.
 * pf, pf_bytes: a hint, [pf, pf + pf_bytes) is read soon (a slice of the
 *    next B micro-panel or block): the kernel may fetch it into L2 spread
 *    over its k steps (tp__gemm_pf_step), so that weights streaming from
 *    memory arrive while this block computes.
 *    pf NULL or pf_bytes 0: none.
 * ep: NULL, or what to apply to the tile before it is stored, after
 *    alpha and beta: + bias[j] for column j (bias read for columns [0, n)
 *    only) and then relu or relu6, as the epilogue (gemm_finish.h, fused
 *    act) would: the same results. */
typedef struct tp__gemm_tile_ep {
    const float *bias; /* NULL: none; else the tile's first column's */
    int relu;          /* 0 none, 1 relu, 2 relu6 (tp_gemm_epilogue.act_relu) */
} tp__gemm_tile_ep;
typedef void (*tp__gemm_microkernel_fn)(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a,
                                        const float *b, int64_t ldb, float *c, int64_t ldc, int m, int n,
                                        float alpha, float beta, const float *pf, int64_t pf_bytes,
                                        const tp__gemm_tile_ep *ep);

/* The epilogue's row loops per ISA (gemm_finish.h). The residual must not
 * overlap C's rows except exactly (residual == C is not supported). */
typedef void (*tp__gemm_finish_fn)(const tp_gemm_epilogue *ep, float *c, int64_t ldc, int64_t i0, int64_t rows,
                                   int64_t j0, int64_t cols);
TP_HIDDEN void tp__gemm_scalar_finish(const tp_gemm_epilogue *ep, float *c, int64_t ldc, int64_t i0, int64_t rows,
                                      int64_t j0, int64_t cols);
TP_HIDDEN void tp__gemm_avx2_finish(const tp_gemm_epilogue *ep, float *c, int64_t ldc, int64_t i0, int64_t rows,
                                    int64_t j0, int64_t cols);
TP_HIDDEN void tp__gemm_avx512_finish(const tp_gemm_epilogue *ep, float *c, int64_t ldc, int64_t i0, int64_t rows,
                                      int64_t j0, int64_t cols);

/* The prefetch hint's pace over a call's kc k steps: the line to fetch at
 * step p is (p * step) >> 16 lines past pf (16.16 fixed point, 32 bits: K
 * blocks are at most 4096 long, tp__gemm_make_plan), so the range's lines
 * are spread evenly, a line a step at most (a line asked for again costs
 * a load slot, not a fill). Sending them a line a step and then nothing
 * filled the core's miss buffers in a burst and left memory idle for the
 * rest of the call (gemm_avx512.c's tile kernel has the figures). */
static inline uint32_t tp__gemm_pf_step(int64_t pf_bytes, int64_t kc) {
    const int64_t lines = (pf_bytes + 63) >> 6;
    return lines >= kc ? 1u << 16 : ((uint32_t)lines << 16) / (uint32_t)kc;
}

/* The next block of a pre-packed B, which the kernel calls of the current
 * block prefetch into L2 while they compute (weights come from memory on
 * every call of a model larger than the caches, and a block's first row
 * panel otherwise waits on them): its full panels, each panel_bytes
 * contiguous at b + i*panel_stride floats (a narrow edge panel is left to
 * the hardware). panels 0: none. */
enum { TP__GEMM_NEXT_BYTES_PER_K = 8 };
typedef struct tp__gemm_next {
    const float *b;
    int64_t panel_stride, panels, panel_bytes;
    int64_t call_bytes; /* > 0: the last calls only, at most this much each */
} tp__gemm_next;

/* Call `call` of `calls` kernel calls that share the prefetch of `next`:
 * its part (one slice of one panel; NULL when it has none). Each panel
 * takes an equal share of the calls (within one), and its calls' parts
 * cover its bytes once, in order (with fewer calls than panels, the panels
 * without a call are left to the hardware). With call_bytes > 0 the parts
 * go to the last calls only, as few as hold the whole at about call_bytes
 * each (all the calls when there are no more than that). */
static inline const float *tp__gemm_next_part(const tp__gemm_next *next, int64_t call, int64_t calls, int64_t *bytes) {
    *bytes = 0;
    if (next->panels <= 0 || calls <= 0) return NULL;
    if (next->call_bytes > 0) {
        int64_t need = (next->panels * next->panel_bytes + next->call_bytes - 1) / next->call_bytes;
        if (need < next->panels) need = next->panels;
        if (need < calls) {
            call -= calls - need;
            calls = need;
            if (call < 0) return NULL;
        }
    }
    const int64_t panels = next->panels;
    const int64_t panel = call * panels / calls;
    const int64_t c0 = (panel * calls + panels - 1) / panels, c1 = ((panel + 1) * calls + panels - 1) / panels;
    const int64_t chunk = ((next->panel_bytes + (c1 - c0) - 1) / (c1 - c0) + 63) & ~(int64_t)63;
    const int64_t off = (call - c0) * chunk;
    if (off >= next->panel_bytes) return NULL;
    *bytes = next->panel_bytes - off < chunk ? next->panel_bytes - off : chunk;
    return (const float *)((const char *)(next->b + panel * next->panel_stride) + off);
}

/* The micro-kernels prefetch their tile of C during K loops at least this
 * long. */
enum { TP__GEMM_C_PREFETCH_KC = 128 };
enum { TP__GEMM_AVX2_MR = 6, TP__GEMM_AVX2_NR = 16 };
enum { TP__GEMM_AVX512_MR = 6, TP__GEMM_AVX512_NR = 64 };
/* AVX-512 products with N <= TP__GEMM_AVX512_NARROW_NR run a 12 x 32
 * kernel instead (gemm_avx512.c); a packed B of such N has the same layout
 * for both (one panel, 16 or 32 floats wide). */
enum { TP__GEMM_AVX512_NARROW_MR = 12, TP__GEMM_AVX512_NARROW_NR = 32 };

TP_HIDDEN void tp__gemm_avx2_microkernel(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a,
                                         const float *b, int64_t ldb, float *c, int64_t ldc, int m, int n,
                                         float alpha, float beta, const float *pf, int64_t pf_bytes,
                                         const tp__gemm_tile_ep *ep);
TP_HIDDEN void tp__gemm_avx512_narrow_microkernel(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a,
                                                  const float *b, int64_t ldb, float *c, int64_t ldc, int m, int n,
                                                  float alpha, float beta, const float *pf, int64_t pf_bytes,
                                                  const tp__gemm_tile_ep *ep);
TP_HIDDEN void tp__gemm_avx512_microkernel(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a,
                                           const float *b, int64_t ldb, float *c, int64_t ldc, int m, int n,
                                           float alpha, float beta, const float *pf, int64_t pf_bytes,
                                           const tp__gemm_tile_ep *ep);
/* The dot path's kernel (tp__gemm_pack_bt): C[0:m, 0:n] = alpha * A*B +
 * beta * C, then ep (bias, relu) as the micro-kernels apply it; A
 * row-major (element (i, p) at a[i*rs_a + p]); BT column j at bt + j*ldbt,
 * zero from k to ldbt (a multiple of 16); 1 <= n <= 16. */
TP_HIDDEN void tp__gemm_avx512_dot(int64_t m, int n, int64_t k, const float *a, int64_t rs_a, const float *bt,
                                   int64_t ldbt, float *c, int64_t ldc, float alpha, float beta,
                                   const tp__gemm_tile_ep *ep);
/* AVX2 and AVX-512 products of one row (M = 1): each element's sum in four
 * chains over p mod 4 (a different rounding than the kernels above), so
 * used for every tile of such a product and for nothing else; m must be 1. */
TP_HIDDEN void tp__gemm_avx2_row_microkernel(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a,
                                             const float *b, int64_t ldb, float *c, int64_t ldc, int m, int n,
                                             float alpha, float beta, const float *pf, int64_t pf_bytes,
                                             const tp__gemm_tile_ep *ep);
TP_HIDDEN void tp__gemm_avx512_row_microkernel(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a,
                                               const float *b, int64_t ldb, float *c, int64_t ldc, int m, int n,
                                               float alpha, float beta, const float *pf, int64_t pf_bytes,
                                               const tp__gemm_tile_ep *ep);

#endif
