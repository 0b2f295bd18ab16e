/*
 * gemm_bf16.c - the loops of the bfloat16 GEMM (gemm_bf16.h) around its
 * AVX-512-BF16 micro-kernel, and the packing of B.
 */
#include "gemm_bf16.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static bool g_supported, g_amx;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* AMX: cpuid's AMX-TILE and AMX-BF16, XCR0's tile state (bits 17, 18),
 * and the kernel's leave to use the tile data (Linux 5.16+). */
static void detect_amx(void) {
#if defined(__x86_64__) && defined(TP_HAVE_AMX) && defined(__linux__)
    const char *e = getenv("TP_BF16_AMX");
    if (e && strcmp(e, "0") == 0) return;
    unsigned a, b, c, d;
    __cpuid_count(7, 0, a, b, c, d);
    if (!(d & (1u << 22)) || !(d & (1u << 24))) return; /* AMX-BF16, AMX-TILE */
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return;
    /* ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA */
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) return;
    g_amx = true;
#endif
}

static void detect(void) {
#if defined(__x86_64__) && defined(TP_HAVE_AVX512BF16)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return; /* OSXSAVE */
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0xE6) != 0xE6) return; /* XMM, YMM, opmask, ZMM state */
    if (__get_cpuid_max(0, NULL) < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned bits = (1u << 16) | (1u << 30) | (1u << 31); /* AVX-512 F BW VL */
    if ((b & bits) != bits) return;
    __cpuid_count(7, 1, a, b, c, d);
    g_supported = a & (1u << 5); /* AVX512_BF16 */
    if (g_supported) detect_amx(); /* its epilogue is the AVX-512 kernel's */
#endif
}

bool tp__gemm_bf16_amx(void) {
    pthread_once(&g_once, detect);
    return g_amx;
}

bool tp__gemm_bf16_supported(void) {
    pthread_once(&g_once, detect);
    return g_supported;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }


size_t tp__gemm_bf16_packed_b_bytes(int64_t k, int64_t n) {
    if (k <= 0 || n <= 0) return 0;
    int64_t k2 = ceil_div(k, 2), cols = n / TP__GEMM_BF16_NR * TP__GEMM_BF16_NR;
    if (cols < n) cols += tp__gemm_bf16_panel_width(n, n / TP__GEMM_BF16_NR);
    return (size_t)(k2 * cols * 2) * sizeof(uint16_t);
}

void tp__gemm_bf16_pack_b(int64_t k, int64_t n, const uint16_t *b, int64_t rs_b, int64_t cs_b, void *dst) {
    uint16_t *d = dst;
    if (cs_b == 1) { /* rows contiguous: the vector form (this runs only where the kernel does) */
        tp__gemm_bf16_avx512_pack_rows(k, n, b, rs_b, d);
        return;
    }
    const int64_t k2 = ceil_div(k, 2);
    for (int64_t p = 0; p * TP__GEMM_BF16_NR < n; p++) {
        const int w = tp__gemm_bf16_panel_width(n, p);
        for (int64_t q = 0; q < k2; q++)
            for (int j = 0; j < w; j++) {
                const int64_t col = p * TP__GEMM_BF16_NR + j;
                for (int t = 0; t < 2; t++) {
                    const int64_t row = 2 * q + t;
                    *d++ = row < k && col < n ? b[row * rs_b + col * cs_b] : 0;
                }
            }
    }
}

/* Rows x panels a thread owns. Column panels first (each weight is read by
 * one thread), rows when there are too few panels. */
typedef struct split {
    int th_m, th_n;
} split;

static split split_for(const tp_gemm_bf16 *g, int nth) {
    const int64_t panels = ceil_div(g->n, TP__GEMM_BF16_NR);
    split s = {1, nth};
    if (panels < 2 * nth && g->m >= 2 * TP__GEMM_BF16_MR * nth) {
        s.th_m = nth;
        s.th_n = 1;
    } else if (panels < nth) {
        s.th_n = (int)panels;
        s.th_m = nth / s.th_n;
    }
    return s;
}

static bool gathers_a(const tp_gemm_bf16 *g) { return g->cs_a != 1; }
static bool needs_c32(const tp_gemm_bf16 *g) { return g->k > TP__GEMM_BF16_KC; }

static size_t round64(size_t b) { return (b + 63) & ~(size_t)63; }

size_t tp__gemm_bf16_workspace_bytes(const tp_gemm_bf16 *g, int nth) {
    if (tp__gemm_bf16_amx()) return (size_t)nth * tp__gemm_bf16_amx_workspace(g->k);
    size_t bytes = needs_c32(g) ? round64((size_t)(g->m * g->n) * sizeof(float)) : 0;
    if (gathers_a(g)) bytes += (size_t)nth * round64((size_t)(TP__GEMM_BF16_MC * TP__GEMM_BF16_KC) * sizeof(uint16_t));
    return bytes;
}

void tp__gemm_bf16_run(const tp_gemm_bf16 *g, int ith, int nth, void *workspace) {
    if (g->m <= 0 || g->n <= 0 || g->k <= 0 || nth < 1 || ith < 0 || ith >= nth) return;
    const split s = split_for(g, nth);
    if (ith >= s.th_m * s.th_n) return;
    const int tm = ith / s.th_n, tn = ith % s.th_n;
    const int64_t panels = ceil_div(g->n, TP__GEMM_BF16_NR);
    const int64_t m0 = g->m * tm / s.th_m, m1 = g->m * (tm + 1) / s.th_m;
    const int64_t p0 = panels * tn / s.th_n, p1 = panels * (tn + 1) / s.th_n;
    if (m0 >= m1 || p0 >= p1) return;
    if (tp__gemm_bf16_amx()) {
        tp__gemm_bf16_amx_rows(g, m0, m1, p0, p1, (char *)workspace + (size_t)ith * tp__gemm_bf16_amx_workspace(g->k));
        return;
    }
    const int64_t k2 = ceil_div(g->k, 2);
    float *c32 = needs_c32(g) ? (float *)workspace : NULL;
    uint16_t *a_buf = NULL;
    if (gathers_a(g)) {
        char *base = (char *)workspace + (c32 ? round64((size_t)(g->m * g->n) * sizeof(float)) : 0);
        a_buf = (uint16_t *)(base + (size_t)ith * round64((size_t)(TP__GEMM_BF16_MC * TP__GEMM_BF16_KC) * sizeof(uint16_t)));
    }
    const uint16_t *bp = g->packed_b;
    for (int64_t q0 = 0; q0 < k2; q0 += TP__GEMM_BF16_KC / 2) {
        const int64_t kc2 = k2 - q0 < TP__GEMM_BF16_KC / 2 ? k2 - q0 : TP__GEMM_BF16_KC / 2;
        const bool last = q0 + kc2 >= k2, odd = last && (g->k & 1);
        const int64_t kk = 2 * kc2 - (odd ? 1 : 0); /* elements of K in this block */
        for (int64_t ic = m0; ic < m1; ic += TP__GEMM_BF16_MC) {
            const int64_t mc = m1 - ic < TP__GEMM_BF16_MC ? m1 - ic : TP__GEMM_BF16_MC;
            const uint16_t *a_blk;
            int64_t rs;
            if (a_buf) { /* rows of the block made contiguous */
                for (int64_t i = 0; i < mc; i++)
                    for (int64_t p = 0; p < kk; p++)
                        a_buf[i * 2 * kc2 + p] = g->a[(ic + i) * g->rs_a + (2 * q0 + p) * g->cs_a];
                a_blk = a_buf;
                rs = 2 * kc2;
            } else {
                a_blk = g->a + ic * g->rs_a + 2 * q0;
                rs = g->rs_a;
            }
            for (int64_t p = p0; p < p1; p++) {
                const int w = tp__gemm_bf16_panel_width(g->n, p);
                const int64_t j0 = p * TP__GEMM_BF16_NR;
                const int n = g->n - j0 < TP__GEMM_BF16_NR ? (int)(g->n - j0) : TP__GEMM_BF16_NR;
                /* the edge panel (p == full panels) follows the full ones */
                const uint16_t *b = bp + p * k2 * 2 * TP__GEMM_BF16_NR + q0 * 2 * w;
                for (int64_t ir = 0; ir < mc; ir += TP__GEMM_BF16_MR) {
                    const int m = mc - ir < TP__GEMM_BF16_MR ? (int)(mc - ir) : TP__GEMM_BF16_MR;
                    const int64_t i = ic + ir;
                    const tp__gemm_bf16_ep ep = {
                        .bias = g->bias ? g->bias + (g->bias_per_row ? i : j0) : NULL,
                        .bias_row = g->bias_per_row,
                        .bias2 = g->bias2 ? g->bias2 + j0 : NULL,
                        .res = g->res ? g->res + i * g->ld_res + j0 : NULL,
                        .ld_res = g->ld_res,
                        .relu = g->relu};
                    tp__gemm_bf16_avx512_kernel(kc2, odd, a_blk + ir * rs, rs, b, w, m, n, g->alpha, q0 > 0,
                                                c32 ? c32 + i * g->n + j0 : NULL, g->n, last, &ep,
                                                g->c + i * g->ldc + j0, g->ldc);
                }
            }
        }
    }
}
