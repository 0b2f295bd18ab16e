/*
 * gemm_bf16_amx.c - the bfloat16 GEMM (gemm_bf16.h) on AMX tiles
 * (tdpbf16ps), for CPUs with AMX-BF16. Compiled with -mamx-tile
 * -mamx-bf16 -mavx512f...; gemm_bf16.c calls it only after cpuid, xgetbv
 * and the kernel's permission for the tile data (arch_prctl) said yes.
 *
 * Blocks of 32 rows x 32 columns of C in four tiles (tmm0-3, 16 x 16
 * float32 each), A's 32 rows in two tiles (tmm4-5: 16 rows x 32 bfloat16
 * of K) and B's 32 columns in two (tmm6-7: 16 pairs of K x 16 columns),
 * four tdpbf16ps per 32 of K: each tile product adds 16 x 16 x 32
 * products, and the sums stay in the tiles over all of K. A's rows of a
 * block are copied once into the thread's workspace, K rounded up to 32
 * with zeros (tiles read whole 64-byte rows); B is the packed matrix
 * itself (the same pairs layout vdpbf16ps reads: a tile of it is 16 of
 * its pair rows, 64 bytes of 16 columns each, at the panel's row stride),
 * the pair rows past K's end copied with zeros below them. The finished
 * tiles go to a float32 block of 32 rows x a panel's 64 columns in the
 * workspace, from which the AVX-512 kernel's epilogue (alpha, bias, the
 * fused 16-bit steps, relu; one rounding) writes C, 6 rows x 64 columns a
 * call. Each C element is one tile product chain over K in
 * 32-element steps, whatever the thread count.
 *
 * Like vdpbf16ps, tdpbf16ps treats denormal inputs and outputs as zero and
 * rounds to nearest even; its products are exact in float32.
 */
#include "gemm_bf16.h"

#if defined(__x86_64__) && defined(__AMX_BF16__) && defined(__AMX_TILE__)
#include <immintrin.h>
#include <string.h>

enum { BM = 32, BN = 32, TK = 32 }; /* a block's rows and columns; K a step */
enum { CW = TP__GEMM_BF16_NR };       /* the float32 block's row: a whole panel */

typedef struct tile_config {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

size_t tp__gemm_bf16_amx_workspace(int64_t k) {
    const int64_t kp = (k + TK - 1) / TK * TK;
    /* A block, float32 block (a panel's width), two B tails */
    return ((size_t)(BM * kp) * sizeof(uint16_t) + BM * CW * sizeof(float) + 2 * 16 * 64 + 63) & ~(size_t)63;
}

void tp__gemm_bf16_amx_rows(const tp_gemm_bf16 *g, int64_t m0, int64_t m1, int64_t p0, int64_t p1, void *ws) {
    const int64_t k = g->k, kp = (k + TK - 1) / TK * TK, k2 = (k + 1) / 2, steps = kp / TK;
    uint16_t *abuf = ws;
    float *c32 = (float *)(abuf + BM * kp);
    uint16_t *btail = (uint16_t *)(c32 + BM * CW); /* two 16 x 32 tails */
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
    const uint16_t *bp = g->packed_b;
    /* pair rows of B in the last, partial step (0: every step full) */
    const int64_t tail_pairs = k2 - (steps - 1) * (TK / 2);
    const bool has_tail = tail_pairs < TK / 2;
    for (int64_t i0 = m0; i0 < m1; i0 += BM) {
        const int64_t mb = m1 - i0 < BM ? m1 - i0 : BM;
        /* the block's rows of A, K padded with zeros, rows past mb zero */
        for (int64_t i = 0; i < BM; i++) {
            uint16_t *d = abuf + i * kp;
            if (i >= mb) {
                memset(d, 0, (size_t)kp * sizeof *d);
                continue;
            }
            const uint16_t *s = g->a + (i0 + i) * g->rs_a;
            if (g->cs_a == 1) memcpy(d, s, (size_t)k * sizeof *d);
            else
                for (int64_t p = 0; p < k; p++) d[p] = s[p * g->cs_a];
            memset(d + k, 0, (size_t)(kp - k) * sizeof *d);
        }
        for (int64_t p = p0; p < p1; p++) {
            const int w = tp__gemm_bf16_panel_width(g->n, p);
            const int64_t jp = p * TP__GEMM_BF16_NR;
            const uint16_t *panel = bp + p * k2 * 2 * TP__GEMM_BF16_NR; /* the edge panel follows the full ones */
            for (int jt = 0; jt < w; jt += BN) {
                const bool two = w - jt > 16; /* a second 16-column tile */
                const uint16_t *b0 = panel + 2 * jt, *b1 = b0 + 32;
                if (has_tail) { /* the last step's pair rows, zeros below them */
                    memset(btail, 0, 2 * 16 * 64);
                    for (int64_t q = 0; q < tail_pairs; q++) {
                        memcpy(btail + q * 32, b0 + ((steps - 1) * 16 + q) * 2 * w, 64);
                        if (two) memcpy(btail + 512 + q * 32, b1 + ((steps - 1) * 16 + q) * 2 * w, 64);
                    }
                }
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
                for (int64_t s = 0; s < steps; s++) {
                    const bool tail = has_tail && s == steps - 1;
                    _tile_loadd(4, abuf + s * TK, kp * 2);
                    _tile_loadd(5, abuf + 16 * kp + s * TK, kp * 2);
                    if (tail) _tile_loadd(6, btail, 64);
                    else _tile_loadd(6, b0 + s * 16 * 2 * w, w * 4);
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_dpbf16ps(2, 5, 6);
                    if (two) {
                        if (tail) _tile_loadd(7, btail + 512, 64);
                        else _tile_loadd(7, b1 + s * 16 * 2 * w, w * 4);
                        _tile_dpbf16ps(1, 4, 7);
                        _tile_dpbf16ps(3, 5, 7);
                    }
                }
                _tile_stored(0, c32 + jt, CW * 4);
                _tile_stored(2, c32 + 16 * CW + jt, CW * 4);
                if (two) {
                    _tile_stored(1, c32 + jt + 16, CW * 4);
                    _tile_stored(3, c32 + 16 * CW + jt + 16, CW * 4);
                }
            }
            /* the panel's epilogue, 6 rows at a time: the AVX-512 kernel
             * with no products of its own, adding the float32 block */
            const int n = g->n - jp < CW ? (int)(g->n - jp) : CW;
            for (int64_t r = 0; r < mb; r += TP__GEMM_BF16_MR) {
                const int m = mb - r < TP__GEMM_BF16_MR ? (int)(mb - r) : TP__GEMM_BF16_MR;
                const int64_t i = i0 + r;
                const tp__gemm_bf16_ep ep = {.bias = g->bias ? g->bias + (g->bias_per_row ? i : jp) : NULL,
                                             .bias_row = g->bias_per_row,
                                             .bias2 = g->bias2 ? g->bias2 + jp : NULL,
                                             .res = g->res ? g->res + i * g->ld_res + jp : NULL,
                                             .ld_res = g->ld_res,
                                             .relu = g->relu};
                tp__gemm_bf16_avx512_kernel(0, false, abuf, 0, panel, w, m, n, g->alpha, true, c32 + r * CW, CW, true,
                                            &ep, g->c + i * g->ldc + jp, g->ldc);
            }
        }
    }
    _tile_release();
}
#else
size_t tp__gemm_bf16_amx_workspace(int64_t k) {
    (void)k;
    return 0;
}
void tp__gemm_bf16_amx_rows(const tp_gemm_bf16 *g, int64_t m0, int64_t m1, int64_t p0, int64_t p1, void *ws) {
    (void)g, (void)m0, (void)m1, (void)p0, (void)p1, (void)ws;
}
#endif
