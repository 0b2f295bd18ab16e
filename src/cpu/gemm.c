/*
 * gemm.c - the single-precision GEMM of gemm.h: ISA dispatch, cache
 * blocking, packing, the split of C among threads, the epilogue and the
 * portable micro-kernel. Compiled without ISA flags: the AVX2 and AVX-512
 * micro-kernels (gemm_avx2.c, gemm_avx512.c) are called only at the ISA
 * level the caller chose, which tp__gemm_best_isa checked.
 *
 * Loops, for the C block [m0, m1) x [n0, n1) one thread owns:
 *   jc over columns by NC   - B block KC x NC stays in L2 (packed here, read
 *     pc over K by KC       -   from the caller's pre-packed B, or read in
 *                           -   place when B is row-major and M is small)
 *       ir over rows by MR  - A micro-panel MR x KC stays in L1 (read in place
 *         jr over NC by NR  -   when A is row-major, else packed; AVX2's
 *                           -   K blocks are longer: see tp__gemm_make_plan)
 *           micro-kernel MR x NR
 *       epilogue (bias, residual, act) on the finished MR x NC strip, after
 *       the last K block; a bias of N and a relu with nothing to add before
 *       it are applied by the micro-kernel in registers instead (plan
 *       k_bias / k_relu, the rest left in plan.rest).
 *   (A block of at most tp__gemm_jr_outer_max_rows rows (64, AVX-512 256)
 *   read in place swaps the ir and jr loops when a B micro-panel fits in
 *   L1: see there.)
 * Prefetch: the kernel calls that share a part of B also fetch what comes
 *   next into L2, spread evenly over them and their k steps
 *   (tp__gemm_next, gemm_avx512.c's tile): with
 *   the jr-outer order the next B micro-panel (few rows reuse each weight
 *   little, so without it they wait on memory), else the next K or column
 *   block of a pre-packed B; with none of B left and K blocks shorter than
 *   the kernels' own C prefetch, the next row panel's C (tp__gemm_rect).
 *   Measured on an AVX-512 Xeon, B cold,
 *   gemm_bench, 1 thread: 49x4608x512 85 -> 113 GFLOP/s, 32x784x512 88 ->
 *   122, 196x1024x256 101 -> 129-137; ResNet-50 (M 49 in its last stage)
 *   62.7 -> 54.5 ms at 1 thread, the MLP 0.340 -> 0.295 ms.
 * Packed B layout (weights and workspace alike): column panels NR wide,
 * each panel row-major (kc rows of NR floats, zero beyond N); a pre-packed B
 * keeps all K rows per panel, so block (pc, jc) starts at panel jc/NR, row pc,
 * and its last panel, when N is not a multiple of NR, is only as wide as the
 * kernel reads (tp__gemm_edge_width: at AVX-512, N mod NR rounded up to the
 * vector width).
 *
 * K blocking depends only on k, the ISA, the cache sizes and whether m is at most
 * tp__gemm_jr_outer_max_rows or at most MR, so every element's reduction
 * order is the same for every thread split.
 */
#include "gemm.h"

#include <stdio.h>
#include <string.h>
#include <pthread.h>

#if defined(__x86_64__)
#include <cpuid.h>
#define TP__GEMM_X86 1
#else
#define TP__GEMM_X86 0
#endif

enum { TP__GEMM_SCALAR_MR = 4, TP__GEMM_SCALAR_NR = 16 };

/* ---- ISA support ---- */

#if TP__GEMM_X86
/* The XCR0 register: which register state the OS saves and restores. */
static uint64_t tp__gemm_xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}
#endif

static int tp__gemm_detected_isa = TP_ISA_SCALAR;
static pthread_once_t tp__gemm_isa_once = PTHREAD_ONCE_INIT;

static void tp__gemm_detect_isa(void) {
#if TP__GEMM_X86
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return;
    const bool osxsave = ecx & (1u << 27), avx = ecx & (1u << 28), fma = ecx & (1u << 12);
    if (!osxsave || !avx || !fma) return;
    const uint64_t xcr0 = tp__gemm_xgetbv0();
    if ((xcr0 & 0x6) != 0x6) return; /* XMM and YMM state */
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return;
    if (!(ebx & (1u << 5))) return; /* AVX2 */
    tp__gemm_detected_isa = TP_ISA_AVX2;
    const unsigned avx512_bits = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31); /* F DQ BW VL */
    if ((ebx & avx512_bits) == avx512_bits && (xcr0 & 0xE0) == 0xE0) /* opmask, ZMM_Hi256, Hi16_ZMM */
        tp__gemm_detected_isa = TP_ISA_AVX512;
#endif
}

int tp__gemm_best_isa(void) {
    pthread_once(&tp__gemm_isa_once, tp__gemm_detect_isa);
    return tp__gemm_detected_isa;
}

/* ---- Cache sizes ---- */

static tp_gemm_cache_info tp__gemm_caches;
static pthread_once_t tp__gemm_caches_once = PTHREAD_ONCE_INIT;

#if TP__GEMM_X86
/* Deterministic cache parameters: leaf 4 (Intel) or 0x8000001D (AMD, Hygon)
 * have the same layout. */
static void tp__gemm_caches_from_cpuid(tp_gemm_cache_info *info) {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return;
    const unsigned max_leaf = eax;
    const bool amd_like = ebx == 0x68747541u /* "Auth" */ || ebx == 0x6f677948u /* "Hygo" */;
    unsigned leaf = 4;
    if (amd_like) {
        if (!__get_cpuid(0x80000000u, &eax, &ebx, &ecx, &edx) || eax < 0x8000001Du) return;
        if (!__get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 22))) return; /* TOPOEXT */
        leaf = 0x8000001Du;
    } else if (max_leaf < 4) {
        return;
    }
    for (unsigned sub = 0; sub < 16; sub++) {
        __cpuid_count(leaf, sub, eax, ebx, ecx, edx);
        const unsigned type = eax & 0x1F, level = (eax >> 5) & 7;
        if (type == 0) break;
        if (type != 1 && type != 3) continue; /* data or unified */
        const int64_t size = (int64_t)((ebx >> 22) + 1) * (((ebx >> 12) & 0x3FF) + 1) *
                             ((ebx & 0xFFF) + 1) * ((int64_t)ecx + 1);
        if (level == 1) info->l1d = size;
        else if (level == 2) info->l2 = size;
        else if (level == 3) info->l3 = size;
    }
}
#endif

/* /sys/devices/system/cpu/cpu0/cache/index<i>/{level,type,size}. */
static void tp__gemm_caches_from_sysfs(tp_gemm_cache_info *info) {
    for (int index = 0; index < 8; index++) {
        char path[96], text[32];
        int level = 0;
        long long size = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
        FILE *f = fopen(path, "r");
        if (!f) break;
        if (fscanf(f, "%d", &level) != 1) level = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", index);
        if (!(f = fopen(path, "r"))) continue;
        if (!fgets(text, sizeof text, f)) text[0] = 0;
        fclose(f);
        if (strncmp(text, "Data", 4) != 0 && strncmp(text, "Unified", 7) != 0) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
        if (!(f = fopen(path, "r"))) continue;
        char unit = 0;
        int got = fscanf(f, "%lld%c", &size, &unit);
        fclose(f);
        if (got < 1 || size <= 0) continue;
        if (got == 2 && (unit == 'K' || unit == 'k')) size *= 1024;
        else if (got == 2 && (unit == 'M' || unit == 'm')) size *= 1024 * 1024;
        if (level == 1 && !info->l1d) info->l1d = size;
        else if (level == 2 && !info->l2) info->l2 = size;
        else if (level == 3 && !info->l3) info->l3 = size;
    }
}

static void tp__gemm_read_caches(void) {
    tp_gemm_cache_info info = {0};
#if TP__GEMM_X86
    tp__gemm_caches_from_cpuid(&info);
#endif
    if (!info.l1d || !info.l2) tp__gemm_caches_from_sysfs(&info);
    /* Sane bounds: a wrong report must not make blocks absurd. */
    if (info.l1d < 16 * 1024 || info.l1d > 256 * 1024) info.l1d = 32 * 1024;
    if (info.l2 < 128 * 1024 || info.l2 > 16 * 1024 * 1024) info.l2 = 512 * 1024;
    if (info.l3 < 0) info.l3 = 0;
    tp__gemm_caches = info;
}

tp_gemm_cache_info tp__gemm_cache_info(void) {
    pthread_once(&tp__gemm_caches_once, tp__gemm_read_caches);
    return tp__gemm_caches;
}

/* ---- Portable micro-kernel ---- */

/* 4 x 16 block in plain C that the compiler vectorises over columns. A is
 * always packed (rs 1, cs MR, rows beyond m zero); the full block is
 * computed, only m x n stored. Same contract as tp__gemm_microkernel_fn. */
static void tp__gemm_scalar_microkernel(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a,
                                        const float *b, int64_t ldb, float *c, int64_t ldc, int m, int n,
                                        float alpha, float beta, const float *pf, int64_t pf_bytes,
                                        const tp__gemm_tile_ep *ep) {
    enum { MR = TP__GEMM_SCALAR_MR, NR = TP__GEMM_SCALAR_NR };
    (void)rs_a;
    (void)cs_a;
    (void)pf;
    (void)pf_bytes;
    float acc[MR][NR];
    memset(acc, 0, sizeof acc);
    for (int64_t p = 0; p < kc; p++) {
        const float *bp = b + p * ldb, *ap = a + p * MR;
        for (int i = 0; i < MR; i++) {
            const float ai = ap[i];
            for (int j = 0; j < NR; j++) acc[i][j] += ai * bp[j];
        }
    }
    const float *bias = ep ? ep->bias : NULL;
    const int relu = ep ? ep->relu : 0;
    for (int i = 0; i < m; i++) {
        float *ci = c + i * ldc;
        if (beta == 0.0f) {
            for (int j = 0; j < n; j++) ci[j] = alpha * acc[i][j];
        } else {
            for (int j = 0; j < n; j++) ci[j] = alpha * acc[i][j] + beta * ci[j];
        }
        /* the tile's epilogue on the row just stored (each loop vectorises) */
        if (bias) for (int j = 0; j < n; j++) ci[j] += bias[j];
        tp__relu_mode_apply(relu, ci, n);
    }
}

/* ---- Per-ISA parameters ---- */

typedef struct tp__gemm_isa_info {
    int mr, nr;
    tp__gemm_microkernel_fn kernel;
    bool reads_row_major_a; /* the kernel takes A with cs_a 1 in place */
    int vector_width;       /* a tile of n columns reads B rows up to n rounded up to this */
    bool reads_b_to_n;      /* ... or exactly up to n (masked loads) */
    tp__gemm_finish_fn finish; /* the epilogue's row loops at this ISA */
} tp__gemm_isa_info;

#define TP__GEMM_FINISH_NAME tp__gemm_scalar_finish
#include "gemm_finish.h"

static tp__gemm_isa_info tp__gemm_isa_info_for(int isa) {
#if TP__GEMM_X86
    if (isa == TP_ISA_AVX512)
        return (tp__gemm_isa_info){TP__GEMM_AVX512_MR, TP__GEMM_AVX512_NR, tp__gemm_avx512_microkernel, true, 16, true,
                                    tp__gemm_avx512_finish};
    if (isa == TP_ISA_AVX2)
        return (tp__gemm_isa_info){TP__GEMM_AVX2_MR, TP__GEMM_AVX2_NR, tp__gemm_avx2_microkernel, true, 8, false,
                                    tp__gemm_avx2_finish};
#endif
    (void)isa;
    return (tp__gemm_isa_info){TP__GEMM_SCALAR_MR, TP__GEMM_SCALAR_NR, tp__gemm_scalar_microkernel, false,
                                TP__GEMM_SCALAR_NR, false, tp__gemm_scalar_finish};
}

void tp__gemm_register_block(int isa, int *mr, int *nr) {
    tp__gemm_isa_info info = tp__gemm_isa_info_for(isa);
    *mr = info.mr;
    *nr = info.nr;
}

static int64_t tp__gemm_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t tp__gemm_round_up(int64_t a, int64_t b) { return tp__gemm_ceil_div(a, b) * b; }
static size_t tp__gemm_round_up_64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* ---- Blocking and the thread split ---- */

typedef struct tp__gemm_plan {
    tp__gemm_isa_info isa;
    int64_t kc;          /* K block (every block but the last is exactly kc) */
    int64_t nc;          /* N block, a multiple of nr */
    int th_m, th_n;      /* threads along M and N; thread ith is (ith / th_n, ith % th_n) */
    bool packs_a;        /* A micro-panels are packed (else read in place, row-major) */
    bool reads_b_in_place; /* unpacked row-major B read in place (full panels) */
    int64_t mc;          /* implicit A: rows filled per block (a multiple of mr) */
    bool fill_jr_outer;  /* implicit A: column panels outside row panels */
    bool fill_panels;    /* implicit A of few rows: all its K blocks filled, then the panel order */
    size_t a_bytes, b_bytes, f_bytes; /* per-thread workspace parts (f: the fill's scratch) */
    /* The micro-kernels add a bias of N (k_bias) and apply relu (k_relu:
     * act_relu, nothing left to add before it) to each tile of the last K block
     * in registers; `rest` is the epilogue left for the finish pass. */
    bool k_bias;
    int k_relu; /* 0, or act_relu's relu (1) / relu6 (2) */
    tp_gemm_epilogue rest;
    bool dot; /* the dot path (gemm.h, tp__gemm_pack_bt): rows split, no workspace */
} tp__gemm_plan;

/* Row-major B is read in place, not packed, when M is at most this: few
 * rows reuse a packed B block too little to pay for packing it. */
enum { TP__GEMM_B_IN_PLACE_MAX_ROWS = 64 };

/* A thread's block of at most this many rows (A read in place) runs the
 * column panels outside the row panels when a B micro-panel (KC x NR) fits
 * in 3/4 of L1: each B micro-panel then stays in L1 for all rows instead
 * of streaming from L2 once per row panel (for AVX-512's 64-wide panels
 * the plan shortens KC so that they fit: tp__gemm_make_plan). Measured
 * on an AVX2 Zen 3 (bench/gemm_bench.c): 32x784x512 69-71% -> 73-80% of
 * the FMA peak, 32x512x512 68-71% -> 69-77%, larger M unchanged.
 * AVX-512 takes the order up to TP__GEMM_AVX512_JR_OUTER_MAX_ROWS: its B
 * micro-panels (64 wide, KC up to 512: 128 KiB) otherwise stream from L2
 * for every row panel, 256 bytes a k step, and weights that come from L3
 * or memory arrive slower still. Sapphire Rapids, gemm_bench with B cold,
 * medians of alternating runs (% of the FMA peak measured beside each):
 * 1 thread 197x384x1152 78 -> 81, 197x1536x384 80 -> 88, 128x1024x256
 * 72 -> 85, 256x512x512 77 -> 85; 2 threads 197x384x1152 59-67 -> 72-83,
 * 197x384x1536 63 -> 72, 128x256x768 55 -> 79; B hot (in L2) 1 thread
 * 0-3 points slower. Rows beyond 256 lost (784x128x512 70 -> 65,
 * 1024^3 69 -> 54: A's block no longer stays near L1). Models, per-node
 * times of alternating runs, 1 / 2 threads: ViT-S 0.95 / 0.945, GPT-2
 * 0.90 / 0.96, transformer 0.96 / 0.98, ResNet-50's GEMM convolutions
 * 0.98 / 0.93, the convolution nets otherwise unchanged. AVX2 keeps 64
 * rows and its long K blocks (measured on Zen 4 and Zen 3, not
 * re-measured with this order). */
enum { TP__GEMM_JR_OUTER_MAX_ROWS = 64, TP__GEMM_AVX512_JR_OUTER_MAX_ROWS = 256 };
static int64_t tp__gemm_jr_outer_max_rows(int isa) {
    return isa == TP_ISA_AVX512 ? TP__GEMM_AVX512_JR_OUTER_MAX_ROWS : TP__GEMM_JR_OUTER_MAX_ROWS;
}

/* Rows a thread below which pre-packed B is not split in row bands
 * (tp__gemm_make_plan). */
enum { TP__GEMM_BAND_MIN_ROWS = 32 };

/* K block of products with a single row panel (tp__gemm_make_plan). */
enum { TP__GEMM_ONE_PANEL_KC = 4096 };

/* A micro-panels are packed only when the kernel cannot read A in place
 * (A not row-major, or the scalar kernel). Reading row-major A in place was
 * faster than packing it for every shape measured, large cubes included. */
static bool tp__gemm_packs_a(const tp_gemm *g, const tp__gemm_isa_info *isa) {
    return g->a_fill || !(isa->reads_row_major_a && g->cs_a == 1);
}

/* The dot path (gemm.h) for this product: a decision of the product's
 * alone, never of the thread split. */
static bool tp__gemm_dot_applies(const tp_gemm *g) {
    return TP__GEMM_X86 && g->packed_bt && g->packed_b && g->isa == TP_ISA_AVX512 && g->n >= 1 &&
           g->n <= TP__GEMM_DOT_MAX_N && g->m >= 2 && g->k >= TP__GEMM_DOT_MIN_K && g->k >= 16 * g->n && g->a &&
           !g->a_fill && g->cs_a == 1;
}

bool tp__gemm_uses_dot(const tp_gemm *g) { return tp__gemm_dot_applies(g); }

size_t tp__gemm_packed_bt_bytes(int isa, int64_t k, int64_t n) {
    if (!TP__GEMM_X86 || isa != TP_ISA_AVX512 || n < 1 || n > TP__GEMM_DOT_MAX_N || k < TP__GEMM_DOT_MIN_K ||
        k < 16 * n)
        return 0;
    return (size_t)n * (size_t)tp__gemm_round_up(k, 16) * sizeof(float);
}

void tp__gemm_pack_bt(int isa, int64_t k, int64_t n, const float *b, int64_t rs_b, int64_t cs_b, void *dst) {
    if (tp__gemm_packed_bt_bytes(isa, k, n) == 0) return;
    const int64_t ld = tp__gemm_round_up(k, 16);
    float *bt = dst;
    for (int64_t j = 0; j < n; j++) {
        for (int64_t p = 0; p < k; p++) bt[j * ld + p] = b[p * rs_b + j * cs_b];
        for (int64_t p = k; p < ld; p++) bt[j * ld + p] = 0.0f;
    }
}

static tp__gemm_plan tp__gemm_make_plan(const tp_gemm *g, int nth) {
    tp__gemm_plan plan;
    plan.isa = tp__gemm_isa_info_for(g->isa);
#if TP__GEMM_X86
    /* N <= 32: the 12 x 32 kernel (gemm_avx512.c). Zen 4, 1 thread,
     * 3136 x K x N with B packed: 96 x 24 79 -> 95 GFLOP/s, 144 x 24 80 ->
     * 89, 32 x 16 and 64 x 32 +3-5%; EfficientNet-B0's 144 -> 24 and
     * 96 -> 24 projections 0.337 -> 0.283 and 0.223 -> 0.188 ms. */
    if (g->isa == TP_ISA_AVX512 && g->n <= TP__GEMM_AVX512_NARROW_NR) {
        plan.isa.mr = TP__GEMM_AVX512_NARROW_MR;
        plan.isa.nr = TP__GEMM_AVX512_NARROW_NR;
        plan.isa.kernel = tp__gemm_avx512_narrow_microkernel;
    }
    /* M = 1: four chains a column instead of one (gemm_avx512.c,
     * gemm_avx2.c); the decision is the product's, so every split computes
     * the same bits. Sapphire Rapids, 1 thread, per-node profile: the small
     * CNN's 1 x 4096 x 10 classifier 7.5-7.7 -> 3.6-4.4 us (AVX2 kernels
     * 6.8-6.9 -> 4.3-4.8), the model 0.95x the time at 1 thread and 0.94x
     * at 2; ResNet-18's 1 x 512 x 1000 (bound by memory) unchanged. */
    if (g->isa == TP_ISA_AVX512 && g->m == 1) plan.isa.kernel = tp__gemm_avx512_row_microkernel;
    if (g->isa == TP_ISA_AVX2 && g->m == 1) plan.isa.kernel = tp__gemm_avx2_row_microkernel;
#endif
    const int64_t mr = plan.isa.mr, nr = plan.isa.nr;
    const tp_gemm_cache_info caches = tp__gemm_cache_info();

    /* KC: the A micro-panel (MR x KC floats) takes a quarter of L1; K is
     * cut into equal blocks no longer than that. */
    int64_t kc_max = caches.l1d / (int64_t)(4 * sizeof(float)) / mr;
    if (kc_max > 512) kc_max = 512;
    if (kc_max < 64) kc_max = 64;
    /* AVX2's 6 x 16 tiles are a quarter of AVX-512's, so each further K
     * block (a call per tile, the C tile loaded and stored again) weighs
     * four times as much: K blocks up to 1536 there, as long as a B block
     * of four panels fills at most half of L2 (1536 with 1 MiB, 1024 with
     * 512 KiB). Zen 4 with AVX-512 hidden, 1 thread, per-node sums of
     * alternating runs: ViT-S 48.6 -> 47.8 ms, GPT-2 10.19 -> 10.00, the
     * convolution nets and the MLP unchanged; gemm_bench with B cold
     * 197x384x1536 86 -> 90% of the FMA peak, 128x1024x256 84 -> 89%. The
     * AVX-512 kernel gained 2-3% in gemm_bench but nothing in the models
     * (ViT-S 46.03 / 45.96 ms), so it keeps the L1 bound. */
    if (g->isa == TP_ISA_AVX2) {
        int64_t long_kc = caches.l2 / 2 / (4 * nr * (int64_t)sizeof(float));
        if (long_kc > 1536) long_kc = 1536;
        if (long_kc > kc_max) kc_max = long_kc;
    }
    /* Few rows (the jr_outer order, below, when A is read in place or
     * filled): K blocks short enough that a B micro-panel (KC x NR) fits in
     * 3/4 of L1, where it then serves every row panel. AVX-512's 64-wide
     * panels and AVX2's long K blocks (above) need it; the MLP
     * at batch 32 ran 4-12% faster with it on an AVX-512 Xeon (bench/,
     * alternating runs). It depends on m alone, not on A's layout, so an
     * implicit A gives the same bits as the explicit one. */
    if (g->m <= tp__gemm_jr_outer_max_rows(g->isa)) {
        int64_t fit = 3 * caches.l1d / 4 / (int64_t)sizeof(float) / nr;
        if (fit >= 64 && fit < kc_max) kc_max = fit;
    }
    /* One row panel (M <= MR): no B micro-panel serves several row panels,
     * so K blocks only bound the A panel, and each weight panel streams in
     * once in long sequential runs (what hardware prefetchers do best).
     * B cold (gemm_bench -c, Zen 4, 1 thread): 1x1280x1000 9.5 -> 10.7
     * GFLOP/s, 4x1280x1000 26.7 -> 44-45, 1x4096x1000 7.6 -> 12.4; two
     * threads 1x1280x1000 11.3 -> 14.6 (KC 96 before). */
    if (g->m <= mr) kc_max = TP__GEMM_ONE_PANEL_KC;
    kc_max &= ~(int64_t)7;
    const int64_t k_blocks = g->k > 0 ? tp__gemm_ceil_div(g->k, kc_max) : 1;
    plan.kc = g->k > 0 ? tp__gemm_ceil_div(g->k, k_blocks) : 0;

    /* NC: the B block (KC x NC floats) takes half of L2; with AVX-512's
     * K blocks (L1-bound, above) 3/8, leaving room for the next block's
     * prefetch (tp__gemm_next_block) and the rows of A and C streaming
     * through. gemm_bench 1024 cubed (K blocks of 512: 384 columns a block
     * against 512), AVX-512 Xeon (model 167), % of the adjacent peak,
     * alternating: 1 thread 84-85.5 -> 88.6-88.7 hot, 85 -> 88-89 with B
     * cold; 2 threads 85-86 -> 86-89 hot, 80-81 -> 84 cold. ResNet-50's,
     * the transformers' and the MLP's products keep their blocks (none has
     * more than 256 rows and a B block above 3/8 of L2). AVX2's long K
     * blocks lost 1-3% with 3/8 (the 512 cube, 128x256x1024,
     * 128x1024x256) and keep half. */
    const int64_t nc_eighths = g->isa == TP_ISA_AVX512 ? 3 : 4;
    int64_t nc = caches.l2 * nc_eighths / 8 / (int64_t)sizeof(float) / (plan.kc > 0 ? plan.kc : 1);
    nc = nc / nr * nr;
    if (nc < 2 * nr) nc = 2 * nr;
    const int64_t n_padded = tp__gemm_round_up(g->n > 0 ? g->n : 1, nr);
    if (nc > n_padded) nc = n_padded;
    plan.nc = nc;

    /* Split: rows at any row, columns at panel boundaries; pick the grid
     * with the least estimated work for the busiest thread, in cycles: FMA
     * lanes at 16 a cycle, reading (and packing, when per call) its columns
     * of B once, and reading (or packing) its rows of A once per column
     * block. */
    const int64_t n_tiles = tp__gemm_ceil_div(g->n > 0 ? g->n : 1, nr);
    const int64_t m = g->m > 0 ? g->m : 1, k = g->k > 0 ? g->k : 1;
    const bool packs_a = tp__gemm_packs_a(g, &plan.isa);
    plan.packs_a = packs_a;
    plan.reads_b_in_place = !g->packed_b && g->cs_b == 1 && plan.isa.reads_row_major_a &&
                            g->m <= TP__GEMM_B_IN_PLACE_MAX_ROWS;
    double best = -1.0;
    plan.th_m = 1;
    plan.th_n = 1;
    for (int th_m = 1; th_m <= nth; th_m++) {
        if (nth % th_m) continue;
        const int th_n = nth / th_m;
        const int64_t rows = tp__gemm_ceil_div(m, th_m);
        /* the busiest thread's columns, as the kernel computes them: a
         * narrow last panel costs its width rounded to the vector (N = 80
         * is 64 + 16, not 2 x 64: split by columns, one thread would get
         * 4x the other's work) */
        int64_t cols = 0;
        for (int tn = 0; tn < th_n; tn++) {
            const int64_t c0 = n_tiles * tn / th_n * nr, c1 = n_tiles * (tn + 1) / th_n * nr;
            const int64_t w = (c1 < g->n ? c1 : g->n > 0 ? g->n : 1) - c0;
            const int64_t wv = w > 0 ? tp__gemm_round_up(w, plan.isa.vector_width) : 0;
            if (wv > cols) cols = wv;
        }
        const int64_t col_blocks = tp__gemm_ceil_div(cols, nc);
        double cost = (double)tp__gemm_round_up(rows, mr) * (double)cols * (double)k / 16.0;
        /* Its columns of B stream in once (and are packed, when per call). */
        cost += (double)cols * (double)k / (!g->packed_b && !plan.reads_b_in_place ? 2.0 : 4.0);
        /* A streams from L2/L3 once per column block, slower when packed. */
        cost += (double)rows * (double)k * (double)col_blocks / (packs_a ? 2.0 : 4.0);
        if (best < 0 || cost < best) {
            best = cost;
            plan.th_m = th_m;
            plan.th_n = th_n;
        }
    }
    /* Pre-packed B (weights): bands of rows whenever every thread gets at
     * least TP__GEMM_BAND_MIN_ROWS rows and the bands' row panels add at most 1/20 to the
     * padded rows (ViT's 197 -> 2 x 102 against 198, 7x7 maps' 49 -> 2 x
     * 30 against 54 stay with the grid above). A band's rows of A are then
     * the rows the same thread wrote one step before (the producing GEMM
     * or convolution split rows too), and its rows of C the ones it reads
     * next, where a column split reads the other threads' columns from
     * their cores' caches; every thread reading all the weights cost less
     * than those reads on this Zen 4. 2 threads, per-node sums of 3
     * alternating runs, grid / bands: MLP 0.203 / 0.199 ms, GPT-2 4.81 /
     * 4.67, ViT-S 23.8 / 23.5, transformer 2.15 / 2.09, EfficientNet-B0
     * 5.50 / 5.42, MobileNetV2 3.43 / 3.38, ResNet-50 31.2 / 30.8; with
     * busy neighbours the column split's cross-core reads cost far more
     * (the MLP 0.254 against 0.210 ms, medians of 3 alternating runs).
     * The cost model above has no term for where A was written; this rule
     * stands in for one. It needs TP__GEMM_BAND_MIN_ROWS rows a thread:
     * with fewer, every core streaming all of B (from L3, ~2 floats a
     * cycle) costs more than half its FMA time (rows / 32 cycles a float
     * of B), and the grid's column split streams 1/nth of it, which can
     * stay in that core's L2 from call to call. Sapphire Rapids, the MLP
     * (784-512-512-10, batch 32: 16 rows a thread) at 2 threads, medians of
     * 16 alternating whole-model pairs against the bands: 0.948x with the
     * grid the cost model picks (columns on its two large products), 0.915x
     * with columns forced on all three (the Zen 4 figures above, 3 runs
     * each, had the bands ahead by 2% and, with busy neighbours, by 17%). */
    if (g->packed_b && nth > 1 && tp__gemm_ceil_div(m, nth) >= TP__GEMM_BAND_MIN_ROWS &&
        (int64_t)nth * tp__gemm_round_up(tp__gemm_ceil_div(m, nth), mr) * 20 <= tp__gemm_round_up(m, mr) * 21) {
        plan.th_m = nth;
        plan.th_n = 1;
    }
    /* Implicit A (kernels reading row-major A): blocks of mc rows filled
     * into a quarter of L2, run with the B micro-panel in L1 when it fits
     * (A, 6 floats a step, then streams from L2 rather than B's 16). */
    const int64_t kc1 = plan.kc > 0 ? plan.kc : 1;
    plan.mc = caches.l2 / 4 / (kc1 * (int64_t)sizeof(float)) / mr * mr;
    if (plan.mc < mr) plan.mc = mr;
    plan.fill_jr_outer = 4 * kc1 * nr * (int64_t)sizeof(float) <= 3 * caches.l1d;
    /* An implicit A of few rows against pre-packed weights larger than L2
     * (so streaming from memory at every call): all of a thread's A filled
     * at once (every K block, in at most half of L2), then the panel order
     * (tp__gemm_rect_panels) as for an A read in place, B in one run.
     * ResNet-50's 3x3 stride-2 convolution on 7 x 7 outputs (49 x 4608 x
     * 512, 9.4 MB of weights), 2 threads, per node: 0.92-0.93 -> 0.84-0.86
     * ms, ResNet-18's (49 x 2304 x 512) 0.45-0.46 -> 0.44, the model
     * 0.990x (6 alternating pairs, each faster); with weights that stay in
     * L2 or L3 (MobileNetV2's depthwise + projection steps on 14 x 14 and
     * 7 x 7 maps) the whole A read from L2 for every panel cost more than
     * the run saved (the model 1.015x). */
    const int64_t k_blocks_n = tp__gemm_ceil_div(k, kc1);
    const size_t panels_a = (size_t)(m * k_blocks_n * kc1) * sizeof(float);
    plan.fill_panels = g->a_fill && plan.isa.reads_row_major_a && g->packed_b && k_blocks_n > 1 &&
                       m <= tp__gemm_jr_outer_max_rows(g->isa) && plan.fill_jr_outer &&
                       panels_a <= (size_t)caches.l2 / 2 &&
                       tp__gemm_packed_b_bytes(g->isa, g->k, g->n) >= (size_t)caches.l2;
    if (plan.fill_panels)
        plan.a_bytes = tp__gemm_round_up_64(panels_a);
    else if (g->a_fill && plan.isa.reads_row_major_a)
        plan.a_bytes = tp__gemm_round_up_64((size_t)(plan.mc * kc1) * sizeof(float));
    else
        plan.a_bytes = packs_a ? tp__gemm_round_up_64((size_t)(mr * kc1) * sizeof(float) * (g->a_fill ? 2 : 1)) : 0;
    plan.k_bias = g->ep.bias && !g->ep.bias_per_row;
    plan.k_relu = g->ep.act && !g->ep.residual && (!g->ep.bias || plan.k_bias) ? g->ep.act_relu : 0;
    plan.rest = g->ep;
    if (plan.k_bias) plan.rest.bias = NULL;
    if (plan.k_relu) plan.rest.act = NULL;
    plan.f_bytes = g->a_fill ? tp__gemm_round_up_64(g->fill_scratch) : 0;
    plan.b_bytes = g->packed_b ? 0
                   : plan.reads_b_in_place ? tp__gemm_round_up_64((size_t)(plan.kc * nr) * sizeof(float))
                                           : tp__gemm_round_up_64((size_t)(plan.kc * nc) * sizeof(float));
    plan.dot = tp__gemm_dot_applies(g);
    if (plan.dot) { /* rows: each thread's dot products over all of K and N */
        plan.th_m = nth;
        plan.th_n = 1;
        plan.a_bytes = plan.b_bytes = plan.f_bytes = 0;
    }
    return plan;
}

size_t tp__gemm_workspace_bytes(const tp_gemm *g, int nth) {
    if (nth < 1) nth = 1;
    if (g->m <= 0 || g->n <= 0 || g->k <= 0) return 0;
    tp__gemm_plan plan = tp__gemm_make_plan(g, nth);
    return (size_t)nth * (plan.a_bytes + plan.b_bytes + plan.f_bytes);
}

/* ---- Packing ---- */

/* Pack the kc x nc block of B (element (p, j) at b[p*rs_b + j*cs_b]) into
 * panels nr wide, panel stride panel_stride floats, zero beyond nc. */
static void tp__gemm_pack_b_block(int nr, int64_t kc, int64_t nc, const float *b, int64_t rs_b,
                                  int64_t cs_b, float *dst, int64_t panel_stride) {
    for (int64_t jp = 0; jp < nc; jp += nr) {
        const int64_t width = nc - jp < nr ? nc - jp : nr;
        float *panel = dst + (jp / nr) * panel_stride;
        const float *src = b + jp * cs_b;
        if (cs_b == 1) {
            for (int64_t p = 0; p < kc; p++) {
                memcpy(panel + p * nr, src + p * rs_b, (size_t)width * sizeof(float));
                if (width < nr) memset(panel + p * nr + width, 0, (size_t)(nr - width) * sizeof(float));
            }
        } else {
            for (int64_t p = 0; p < kc; p++) {
                if (width < nr) memset(panel + p * nr + width, 0, (size_t)(nr - width) * sizeof(float));
            }
            /* Column by column: reads run along memory when B is transposed. */
            for (int64_t j = 0; j < width; j++) {
                const float *col = src + j * cs_b;
                for (int64_t p = 0; p < kc; p++) panel[p * nr + j] = col[p * rs_b];
            }
        }
    }
}

/* Pack rows [0, rows) x cols [0, kc) of A into an MR x kc micro-panel
 * (element (i, p) at dst[p*mr + i]), zero rows beyond `rows`. */
static void tp__gemm_pack_a_panel(int mr, int64_t kc, int rows, const float *a, int64_t rs_a,
                                  int64_t cs_a, float *dst) {
    if (rows < mr) {
        for (int64_t p = 0; p < kc; p++)
            for (int i = rows; i < mr; i++) dst[p * mr + i] = 0.0f;
    }
    if (cs_a == 1) {
        for (int i = 0; i < rows; i++) {
            const float *row = a + i * rs_a;
            for (int64_t p = 0; p < kc; p++) dst[p * mr + i] = row[p];
        }
    } else {
        for (int64_t p = 0; p < kc; p++) {
            const float *col = a + p * cs_a;
            for (int i = 0; i < rows; i++) dst[p * mr + i] = col[i * rs_a];
        }
    }
}

/* Width of the pre-packed B's last panel when N is not a multiple of NR:
 * the leftover columns rounded up to what the kernel reads (n % NR rounded
 * to the vector width at AVX-512; NR otherwise), 0 when there is none. A
 * narrow weight (a classifier's 10 outputs) then takes 16 floats a row,
 * not 64: 4x less to stream on AVX-512, where B's bytes bound a GEMV. */
static int64_t tp__gemm_edge_width(const tp__gemm_isa_info *info, int64_t n) {
    const int64_t rest = n % info->nr;
    if (rest == 0) return 0;
    /* only a kernel with masked loads reads exactly to n (AVX-512); the
     * others read whole NR-wide rows of a packed panel */
    return info->reads_b_to_n ? tp__gemm_round_up(rest, info->vector_width) : info->nr;
}

size_t tp__gemm_packed_b_bytes(int isa, int64_t k, int64_t n) {
    if (k <= 0 || n <= 0) return 0;
    tp__gemm_isa_info info = tp__gemm_isa_info_for(isa);
    return (size_t)k * (size_t)(n / info.nr * info.nr + tp__gemm_edge_width(&info, n)) * sizeof(float);
}

void tp__gemm_pack_b_rows(int isa, int64_t k, int64_t row0, int64_t kp, int64_t n, const float *b, int64_t rs_b,
                          int64_t cs_b, void *dst) {
    if (kp <= 0 || n <= 0 || row0 < 0 || row0 + kp > k) return;
    tp__gemm_isa_info info = tp__gemm_isa_info_for(isa);
    const int64_t full = n / info.nr * info.nr;
    /* full panels are k x NR, the edge panel after them k x its width */
    tp__gemm_pack_b_block(info.nr, kp, full, b, rs_b, cs_b, (float *)dst + row0 * info.nr, k * info.nr);
    if (full < n) {
        const int64_t w = tp__gemm_edge_width(&info, n);
        tp__gemm_pack_b_block((int)w, kp, n - full, b + full * cs_b, rs_b, cs_b, (float *)dst + full * k + row0 * w,
                              k * w);
    }
}

void tp__gemm_pack_b(int isa, int64_t k, int64_t n, const float *b, int64_t rs_b, int64_t cs_b, void *dst) {
    tp__gemm_pack_b_rows(isa, k, 0, k, n, b, rs_b, cs_b, dst);
}

void tp__gemm_scale_packed_b_rows(int isa, int64_t k, int64_t n, const void *src, const float *scale,
                                  void *dst) {
    if (k <= 0 || n <= 0) return;
    tp__gemm_isa_info info = tp__gemm_isa_info_for(isa);
    const int64_t full = n / info.nr, edge = tp__gemm_edge_width(&info, n);
    const float *s = src;
    float *d = dst;
    /* the full panels (k rows of NR floats each), then the edge panel */
    for (int64_t panel = 0; panel <= full; panel++) {
        const int64_t width = panel < full ? info.nr : edge;
        for (int64_t p = 0; p < k; p++, s += width, d += width) {
            const float f = scale[p];
            for (int64_t j = 0; j < width; j++) d[j] = s[j] * f;
        }
    }
}

const void *tp__gemm_packed_b_cols(int isa, int64_t k, const void *packed, int64_t j0) {
    (void)isa; /* every level's full panels are k x NR floats, one after another */
    return (const float *)packed + j0 * k;
}

/* ---- Epilogue ---- */

/* bias, residual and act on rows [i0, i0 + rows) x columns [j0, j0 + cols)
 * of C, which already hold alpha*A*B + beta*C_old (gemm_finish.h, at the
 * plan's ISA). */
static void tp__gemm_finish_rows(const tp_gemm *g, const tp_gemm_epilogue *ep, tp__gemm_finish_fn finish, int64_t i0,
                                 int64_t rows, int64_t j0, int64_t cols) {
    if (!ep->bias && !ep->residual && !ep->act) return;
    finish(ep, g->c, g->ldc, i0, rows, j0, cols);
}

/* What the kernel calls of the last K block apply to their tile (columns
 * from j on), into *te; NULL when nothing. */
static const tp__gemm_tile_ep *tp__gemm_tile_ep_at(const tp__gemm_plan *plan, const tp_gemm *g, bool last, int64_t j,
                                                   tp__gemm_tile_ep *te) {
    if (!last || (!plan->k_bias && !plan->k_relu)) return NULL;
    te->bias = plan->k_bias ? g->ep.bias + j : NULL;
    te->relu = plan->k_relu;
    return te;
}

/* k == 0: C = beta*C, then the epilogue. */
static void tp__gemm_run_empty_k(const tp_gemm *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const float beta = g->ep.beta;
    for (int64_t i = m0; i < m1; i++) {
        float *row = g->c + i * g->ldc;
        for (int64_t j = n0; j < n1; j++) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    }
    tp__gemm_finish_rows(g, &g->ep, tp__gemm_isa_info_for(g->isa).finish, m0, m1 - m0, n0, n1 - n0);
}

/* ---- The product ---- */

/* The block after (jc, pc) in the loop order of tp__gemm_run (K blocks
 * inside column blocks) within the thread's columns [jc, n1), or none; cut
 * to half of what L2 holds beside the current block (prefetching all of a
 * next block as large as the current one evicted the current one: 196 x
 * 256 x 1024 ran 25% slower), and left to the block's last calls, at most
 * TP__GEMM_NEXT_BYTES_PER_K bytes a k step each (a line every 8 k steps),
 * so that it lands shortly before it is used: spread over all the calls
 * of a block of many rows, the lines fetched first were evicted by the
 * rows of A and C streaming through L2 before the next block began, and
 * took L2 room from the current block meanwhile. gemm_bench, AVX-512 Xeon
 * (model 167), 1 thread, % of the adjacent FMA peak, alternating builds:
 * 1024 cubed 75-79 -> 84-87 hot, 76 -> 82-83 with B cold; 784x1152x128
 * 83 -> 88 hot; models within noise (ResNet-50 0.998x, GPT-2 1.002x,
 * ViT-S 0.994x, the MLP 0.994x at 2 threads, 6 alternating pairs each). */
static tp__gemm_next tp__gemm_next_block(const tp__gemm_plan *plan, const tp_gemm *g, int64_t jc, int64_t pc,
                                         int64_t n1) {
    tp__gemm_next next = {0};
    if (!g->packed_b) return next;
    const int64_t nr = plan->isa.nr, k = g->k;
    int64_t jn = jc, pn = pc + plan->kc;
    if (pn >= k) {
        jn = jc + plan->nc;
        pn = 0;
    }
    if (jn >= n1) return next;
    const int64_t nc = n1 - jn < plan->nc ? n1 - jn : plan->nc;
    const int64_t kc = k - pn < plan->kc ? k - pn : plan->kc;
    next.b = (const float *)g->packed_b + (jn / nr) * k * nr + pn * nr;
    next.panel_stride = k * nr;
    next.panels = nc / nr;
    next.panel_bytes = kc * nr * (int64_t)sizeof(float);
    const int64_t cur_nc = n1 - jc < plan->nc ? n1 - jc : plan->nc;
    const int64_t cur_kc = k - pc < plan->kc ? k - pc : plan->kc;
    const int64_t budget = (tp__gemm_cache_info().l2 - cur_kc * cur_nc * (int64_t)sizeof(float)) / 2;
    next.call_bytes = cur_kc * TP__GEMM_NEXT_BYTES_PER_K;
    if (budget < 4096) { /* too little room to be worth a prefetch */
        next.panels = 0;
    } else if (next.panels * next.panel_bytes > budget) {
        if (budget >= next.panel_bytes) {
            next.panels = budget / next.panel_bytes;
        } else {
            next.panels = next.panels > 0 ? 1 : 0;
            next.panel_bytes = budget & ~(int64_t)63;
        }
    }
    return next;
}

/* Rows of the row panel that starts with `left` rows to go: MR, or the
 * rest; but MR + 1 to 2 MR - 1 rows to go run as two panels of about half
 * (4 + 4 of 8 at MR 6, 7 + 7 of 14 at 12) instead of MR and a short panel,
 * whose few accumulators, one chain per column group, wait on the FMA
 * latency at every k step (a 1-row panel took about a third of a full
 * one's time, so that 49 rows cost as much as 51 and a thread's 25 rows of
 * a 2-way split as much as 26; gemm_bench, Sapphire Rapids, 1 thread:
 * 32x512x512 (6 + 2 rows last) 90.8 -> 91.4% of the adjacent peak, 34 and
 * 35 rows +0.2-1%, the MLP 0.989x / 0.992x at 1 / 2 threads). A row's
 * arithmetic does not depend on its panel. */
static inline int tp__gemm_panel_rows(int64_t left, int mr) {
    if (left > mr && left < 2 * mr && mr >= 4) return (int)(left + 1) / 2;
    return left < mr ? (int)left : mr;
}

/* Micro-kernel calls of one block: rows [0, rows) of A (row-major in place,
 * row stride rs_a, already offset to the K block) times the B block, into C
 * (already offset to the block's first row and column). jr_outer runs the
 * column panels outside the row panels (B micro-panel in L1, A from L2);
 * then, when B's panels are packed (contiguous), the row panels' kernel
 * calls share the prefetch of the next B micro-panel (the next in the block,
 * or the first of `next`) so that weights streaming from memory arrive
 * while the current panel computes. Otherwise all the block's calls share
 * the prefetch of `next`. */
static void tp__gemm_block(const tp__gemm_plan *plan, const tp_gemm *g, const float *a, int64_t rs_a, int64_t rows,
                           const float *b_block, int64_t panel_stride, int64_t ldb, const float *edge_b,
                           int64_t edge_ldb, int64_t full_cols, int64_t i0, int64_t j0, int64_t kc, int64_t nc,
                           float beta, bool jr_outer, bool last, const tp__gemm_next *next) {
    float *c = g->c + i0 * g->ldc + j0;
    const int mr = plan->isa.mr, nr = plan->isa.nr;
    const tp__gemm_microkernel_fn kernel = plan->isa.kernel;
    if (jr_outer) {
        const bool contiguous = ldb == nr; /* packed panels (not B read in place) */
        const int64_t strips = tp__gemm_ceil_div(rows, mr);
        for (int64_t jr = 0; jr < nc; jr += nr) {
            const int cols = nc - jr < nr ? (int)(nc - jr) : nr;
            const bool packed_edge = jr >= full_cols;
            const float *b_panel = packed_edge ? edge_b : b_block + (jr / nr) * panel_stride;
            /* one panel to prefetch: the next of this block, else the first of `next` */
            tp__gemm_next one = {0};
            if (contiguous && jr + nr < nc) {
                const bool edge_next = jr + nr >= full_cols;
                one = (tp__gemm_next){edge_next ? edge_b : b_block + (jr / nr + 1) * panel_stride, 0, 1,
                                      kc * (edge_next ? edge_ldb : nr) * (int64_t)sizeof(float), 0};
            } else if (contiguous && next->panels > 0) {
                one = (tp__gemm_next){next->b, 0, 1, next->panel_bytes, 0};
            }
            int64_t s = 0;
            int r;
            for (int64_t ir = 0; ir < rows; ir += r, s++) {
                r = tp__gemm_panel_rows(rows - ir, mr);
                int64_t pf_bytes;
                const float *pf = tp__gemm_next_part(&one, s, strips, &pf_bytes);
                tp__gemm_tile_ep te;
                kernel(kc, a + ir * rs_a, rs_a, 1, b_panel, packed_edge ? edge_ldb : ldb, c + ir * g->ldc + jr, g->ldc,
                       r, cols, g->ep.alpha, beta, pf, pf_bytes, tp__gemm_tile_ep_at(plan, g, last, j0 + jr, &te));
            }
        }
        return;
    }
    const int64_t panels = tp__gemm_ceil_div(nc, nr), calls = tp__gemm_ceil_div(rows, mr) * panels;
    int64_t call = 0;
    int r;
    for (int64_t ir = 0; ir < rows; ir += r) {
        r = tp__gemm_panel_rows(rows - ir, mr);
        for (int64_t jr = 0; jr < nc; jr += nr, call++) {
            const int cols = nc - jr < nr ? (int)(nc - jr) : nr;
            const bool packed_edge = jr >= full_cols;
            const float *b_panel = packed_edge ? edge_b : b_block + (jr / nr) * panel_stride;
            int64_t pf_bytes;
            const float *pf = tp__gemm_next_part(next, call, calls, &pf_bytes);
            tp__gemm_tile_ep te;
            kernel(kc, a + ir * rs_a, rs_a, 1, b_panel, packed_edge ? edge_ldb : ldb, c + ir * g->ldc + jr, g->ldc, r,
                   cols, g->ep.alpha, beta, pf, pf_bytes, tp__gemm_tile_ep_at(plan, g, last, j0 + jr, &te));
        }
    }
}

void tp__gemm_panel(int isa, int64_t m, int64_t kc, const float *a, int64_t rs_a, const float *b, int n, float *c,
                    int64_t ldc, float beta, const void *pf, int64_t pf_bytes) {
    const tp__gemm_isa_info info = tp__gemm_isa_info_for(isa);
    if (m <= 0 || n <= 0 || n > info.nr) return;
    const int64_t ldb = n == info.nr ? info.nr : tp__gemm_edge_width(&info, n); /* the panel's packed width */
    const int64_t calls = tp__gemm_ceil_div(m, info.mr);
    const int64_t piece = pf ? ((pf_bytes + calls - 1) / calls + 63) & ~(int64_t)63 : 0; /* a call's share of pf */
    int r;
    for (int64_t ir = 0, call = 0; ir < m; ir += r, call++) {
        r = tp__gemm_panel_rows(m - ir, info.mr);
        if (info.reads_row_major_a) {
            const int64_t off = call * piece;
            const int64_t bytes = off < pf_bytes ? (pf_bytes - off < piece ? pf_bytes - off : piece) : 0;
            info.kernel(kc, a + ir * rs_a, rs_a, 1, b, ldb, c + ir * ldc, ldc, r, n, 1.0f, beta,
                        bytes ? (const float *)((const char *)pf + off) : NULL, bytes, NULL);
            continue;
        }
        /* the portable kernel reads A packed: its arithmetic here in place
         * (acc += a * b over p, then acc or acc + C) */
        for (int q = 0; q < r; q++) {
            const float *ai = a + (ir + q) * rs_a;
            float *ci = c + (ir + q) * ldc;
            for (int j = 0; j < n; j++) {
                float acc = 0.0f;
                for (int64_t p = 0; p < kc; p++) acc += ai[p] * b[p * ldb + j];
                ci[j] = beta == 0.0f ? acc : acc + ci[j];
            }
        }
    }
}

/* Thread v's block of C under the plan's th_m x th_n grid: rows [m0, m1),
 * columns [n0, n1) (n0 at a panel boundary); false when it is empty. */
static bool tp__gemm_region(const tp__gemm_plan *plan, const tp_gemm *g, int v, int64_t r[4]) {
    const int64_t nr = plan->isa.nr, n_tiles = tp__gemm_ceil_div(g->n, nr);
    const int tm = v / plan->th_n, tn = v % plan->th_n;
    r[0] = g->m * tm / plan->th_m;
    r[1] = g->m * (tm + 1) / plan->th_m;
    r[2] = n_tiles * tn / plan->th_n * nr;
    r[3] = n_tiles * (tn + 1) / plan->th_n * nr;
    if (r[3] > g->n) r[3] = g->n;
    return r[0] < r[1] && r[2] < r[3];
}

/* Units a thread's block is cut into when threads claim work
 * (tp__gemm_run_claimed): up to TP__GEMM_UNITS groups of row panels, each
 * with all the block's columns, or groups of column panels, each with all
 * the block's rows. A row unit reads the block's part of B (K x its
 * columns) again, a column unit its rows of A (its rows x K): per multiply
 * that is 2 bytes over the unit's rows or over its columns, so the longer
 * side is cut (rows when the block is one panel wide). Column units over
 * many rows also write C's rows in pieces: cut by columns everywhere,
 * EfficientNet-B0 took 1.07-1.12x the time at two threads on Sapphire
 * Rapids (its 16 -> 96 1x1 convolution over 112 x 112 pixels 1.31x). A
 * filled A (a convolution's patches, a fused depthwise convolution's
 * output) is made again by each column unit and each row unit re-reads
 * B, so such a block is one unit, taken whole by another thread or not at
 * all: cut by rows, ResNet-50's stride-2 convolutions on 7 x 7 outputs
 * (49 rows, B 4-8 MB) went 1.2 -> 1.9 ms and 0.93 -> 1.6 ms; cut by
 * columns, MobileNetV2's depthwise + projection steps on 7 x 7 maps
 * 1.55x as long (the depthwise rows computed per unit). */
enum { TP__GEMM_UNITS = 4 };

static int64_t tp__gemm_unit_count(const tp__gemm_plan *plan, const tp_gemm *g, const int64_t r[4], bool *by_rows) {
    const int64_t panels = tp__gemm_ceil_div(r[3] - r[2], plan->isa.nr);
    *by_rows = panels < 2 || r[1] - r[0] > r[3] - r[2]; /* with one unit, either cut is the whole block */
    if (g->a_fill) return 1;
    const int64_t parts = *by_rows ? tp__gemm_ceil_div(r[1] - r[0], plan->isa.mr) : panels;
    return parts < TP__GEMM_UNITS ? parts : TP__GEMM_UNITS;
}

/* Unit u of `units` of block r: its rows and columns, into out. */
static void tp__gemm_unit(const tp__gemm_plan *plan, const int64_t r[4], bool by_rows, int64_t units, int64_t u,
                          int64_t out[4]) {
    const int64_t step = by_rows ? plan->isa.mr : plan->isa.nr;
    const int64_t lo = by_rows ? r[0] : r[2], hi = by_rows ? r[1] : r[3];
    const int64_t parts = tp__gemm_ceil_div(hi - lo, step);
    int64_t a = lo + parts * u / units * step, b = lo + parts * (u + 1) / units * step;
    if (b > hi) b = hi;
    out[0] = by_rows ? a : r[0];
    out[1] = by_rows ? b : r[1];
    out[2] = by_rows ? r[2] : a;
    out[3] = by_rows ? r[3] : b;
}

/* K block pc's rows in an A filled whole (plan->fill_panels): each K
 * block's `rows` rows one after the other, row stride plan->kc (the last,
 * shorter block, its kc). */
static float *tp__gemm_filled_block(float *a_blocks, const tp__gemm_plan *plan, int64_t rows, int64_t pc) {
    return a_blocks + (pc / plan->kc) * rows * plan->kc;
}

/* tp__gemm_rect's few rows (the jr_outer order) against a pre-packed B of
 * several K blocks: panel by panel, each panel's K blocks in turn with its
 * row panels inside, so that B streams in as one run in the order it is
 * packed (the panels of a pre-packed B lie one after the other, each all
 * K rows long), each micro-panel prefetching the next one in that run.
 * The column-block order (K blocks outside the panels) jumps a panel's
 * length between consecutive micro-panels. The kernel calls and each
 * tile's K blocks in turn are the same, so are the results. A is read in
 * place (a_blocks NULL) or was filled whole (plan->fill_panels): the
 * rect's rows for K block b at tp__gemm_filled_block, row stride
 * that block's kc. B cold (gemm_bench -c, 2 threads, model 167 Xeon,
 * alternating): 49x320x1280 273-275 -> 287-288 GFLOP/s, 49x2048x512
 * 261-262 -> 280-283, 32x784x512 237-238 -> 243-245; B hot and 1 thread
 * within noise. Whole models (alternating medians): ResNet-50 0.991x at 2
 * threads and 0.987x at 1, GPT-2 0.983x, ViT-S 0.988x, the MLP 0.989x at
 * 2 threads, MobileNetV2 and EfficientNet-B0 unchanged (their few-row
 * products fill A, and their weights are smaller than L2). */
static void tp__gemm_rect_panels(const tp__gemm_plan *plan, const tp_gemm *g, int64_t m0, int64_t m1, int64_t n0,
                                 int64_t n1, int64_t pf_n1, float *a_blocks) {
    const int mr = plan->isa.mr, nr = plan->isa.nr;
    const int64_t k = g->k, full_end = g->n / nr * nr, strips = tp__gemm_ceil_div(m1 - m0, mr);
    const int64_t edge_w = full_end < g->n ? tp__gemm_edge_width(&plan->isa, g->n) : 0;
    const float *packed = g->packed_b;
    for (int64_t j = n0; j < n1; j += nr) {
        const int cols = n1 - j < nr ? (int)(n1 - j) : nr;
        const bool edge = j >= full_end;
        const int64_t ldb = edge ? edge_w : nr;
        const float *panel = packed + (edge ? full_end : j) * k;
        for (int64_t pc = 0; pc < k; pc += plan->kc) {
            const int64_t kc = k - pc < plan->kc ? k - pc : plan->kc;
            const bool last = pc + kc >= k;
            /* the next micro-panel: this panel's next K block, else the
             * first of the next panel the thread goes on with */
            tp__gemm_next one = {0};
            if (!last) {
                const int64_t kn = k - pc - kc < plan->kc ? k - pc - kc : plan->kc;
                one = (tp__gemm_next){panel + (pc + kc) * ldb, 0, 1, kn * ldb * (int64_t)sizeof(float), 0};
            } else if (j + nr < pf_n1) {
                const bool edge_n = j + nr >= full_end;
                const int64_t kn = k < plan->kc ? k : plan->kc;
                one = (tp__gemm_next){packed + (edge_n ? full_end : j + nr) * k, 0, 1,
                                      kn * (edge_n ? edge_w : nr) * (int64_t)sizeof(float), 0};
            }
            const float beta = pc == 0 ? g->ep.beta : 1.0f;
            int64_t s = 0;
            int r;
            for (int64_t ir = m0; ir < m1; ir += r, s++) {
                r = tp__gemm_panel_rows(m1 - ir, mr);
                int64_t pf_bytes;
                const float *pf = tp__gemm_next_part(&one, s, strips, &pf_bytes);
                tp__gemm_tile_ep te;
                const float *a = a_blocks ? tp__gemm_filled_block(a_blocks, plan, m1 - m0, pc) + (ir - m0) * kc
                                          : g->a + ir * g->rs_a + pc;
                plan->isa.kernel(kc, a, a_blocks ? kc : g->rs_a, 1, panel + pc * ldb, ldb, g->c + ir * g->ldc + j, g->ldc,
                                 r, cols, g->ep.alpha, beta, pf, pf_bytes, tp__gemm_tile_ep_at(plan, g, last, j, &te));
            }
        }
    }
    for (int64_t ir = m0; ir < m1; ir += mr)
        tp__gemm_finish_rows(g, &plan->rest, plan->isa.finish, ir, m1 - ir < mr ? (int)(m1 - ir) : mr, n0, n1 - n0);
}

/* C's rows [m0, m1) x columns [n0, n1) (n0 at a panel boundary, n1 at one
 * or N) on the calling thread with its workspace slice; pf_n1: where the
 * prefetch of B's next block stops (the end of the columns the thread
 * goes on with). */
static void tp__gemm_rect(const tp__gemm_plan *plan_in, const tp_gemm *g, char *slice, int64_t m0, int64_t m1,
                          int64_t n0, int64_t n1, int64_t pf_n1) {
    const tp__gemm_plan plan = *plan_in;
    const int mr = plan.isa.mr, nr = plan.isa.nr;
    if (g->k <= 0) {
        tp__gemm_run_empty_k(g, m0, m1, n0, n1);
        return;
    }
#if TP__GEMM_X86
    if (plan.dot) { /* every column (n0 = 0, n1 = N: one panel) */
        tp__gemm_tile_ep te;
        tp__gemm_avx512_dot(m1 - m0, (int)g->n, g->k, g->a + m0 * g->rs_a, g->rs_a, g->packed_bt,
                            tp__gemm_round_up(g->k, 16), g->c + m0 * g->ldc, g->ldc, g->ep.alpha, g->ep.beta,
                            tp__gemm_tile_ep_at(&plan, g, true, 0, &te));
        tp__gemm_finish_rows(g, &plan.rest, plan.isa.finish, m0, m1 - m0, 0, g->n);
        return;
    }
#endif
    float *a_buf = (float *)slice;
    float *b_buf = (float *)(slice + plan.a_bytes);
    void *f_buf = plan.f_bytes ? slice + plan.a_bytes + plan.b_bytes : NULL;
    if (f_buf) memset(f_buf, 0, 64);
    const bool packs_a = plan.packs_a;
    const tp__gemm_microkernel_fn kernel = plan.isa.kernel;
    const int64_t k = g->k;
    const bool fills_a = g->a_fill != NULL && plan.isa.reads_row_major_a;
    const bool jr_outer = !packs_a && m1 - m0 <= tp__gemm_jr_outer_max_rows(g->isa) &&
                          4 * plan.kc * nr * (int64_t)sizeof(float) <= 3 * tp__gemm_cache_info().l1d;
    if (g->packed_b && !g->a_fill && jr_outer && k > plan.kc) {
        tp__gemm_rect_panels(&plan, g, m0, m1, n0, n1, pf_n1, NULL);
        return;
    }
    if (plan.fill_panels && fills_a) {
        for (int64_t pc = 0; pc < k; pc += plan.kc) {
            const int64_t kc = k - pc < plan.kc ? k - pc : plan.kc;
            g->a_fill(g->a_ctx, m0, (int)(m1 - m0), pc, kc, tp__gemm_filled_block(a_buf, &plan, m1 - m0, pc), f_buf);
        }
        tp__gemm_rect_panels(&plan, g, m0, m1, n0, n1, pf_n1, a_buf);
        return;
    }

    for (int64_t jc = n0; jc < n1; jc += plan.nc) {
        const int64_t nc = n1 - jc < plan.nc ? n1 - jc : plan.nc;
        for (int64_t pc = 0; pc < k; pc += plan.kc) {
            const int64_t kc = k - pc < plan.kc ? k - pc : plan.kc;
            const float *b_block;
            int64_t panel_stride, ldb = nr;
            /* In place, B's panel jr starts jr columns on, but the partial last
             * panel (if any) is packed into b_buf: see b_panel below. */
            int64_t full_cols = plan.reads_b_in_place && !plan.isa.reads_b_to_n ? nc / nr * nr : nc;
            int64_t edge_ldb = tp__gemm_round_up(nc - full_cols, plan.isa.vector_width);
            const float *edge_b = b_buf;
            if (g->packed_b) {
                panel_stride = k * nr;
                b_block = (const float *)g->packed_b + (jc / nr) * panel_stride + pc * nr;
                /* the last panel, when N is not a multiple of NR, is narrower
                 * (tp__gemm_edge_width) and follows the full ones */
                full_cols = nc / nr * nr;
                if (full_cols < nc) {
                    edge_ldb = tp__gemm_edge_width(&plan.isa, g->n);
                    edge_b = (const float *)g->packed_b + g->n / nr * nr * k + pc * edge_ldb;
                }
            } else if (plan.reads_b_in_place) {
                panel_stride = nr;
                ldb = g->rs_b;
                b_block = g->b + pc * g->rs_b + jc;
                if (full_cols < nc)
                    tp__gemm_pack_b_block((int)edge_ldb, kc, nc - full_cols, b_block + full_cols, g->rs_b, 1,
                                          b_buf, kc * edge_ldb);
            } else {
                panel_stride = kc * nr;
                tp__gemm_pack_b_block(nr, kc, nc, g->b + pc * g->rs_b + jc * g->cs_b, g->rs_b, g->cs_b,
                                      b_buf, panel_stride);
                b_block = b_buf;
            }
            const float beta = pc == 0 ? g->ep.beta : 1.0f;
            const bool last = pc + kc >= k;
            const tp__gemm_next next = tp__gemm_next_block(&plan, g, jc, pc, pf_n1);
            if (fills_a || jr_outer) {
                /* implicit A: blocks of mc rows filled into the workspace (in
                 * L2), then run like an in-place row-major A. Few rows read
                 * in place (jr_outer): one block, each B micro-panel loaded
                 * into L1 once for all its row panels. Same micro-kernel
                 * calls either way, so the same results. */
                const int64_t step = fills_a ? plan.mc : m1 - m0;
                for (int64_t ic = m0; ic < m1; ic += step) {
                    const int64_t mc = m1 - ic < step ? m1 - ic : step;
                    const float *a_block = a_buf;
                    int64_t rs_a = kc;
                    if (fills_a) {
                        g->a_fill(g->a_ctx, ic, (int)mc, pc, kc, a_buf, f_buf);
                    } else {
                        a_block = g->a + ic * g->rs_a + pc * g->cs_a;
                        rs_a = g->rs_a;
                    }
                    /* the last row block to use this B block prefetches
                     * the next one */
                    const tp__gemm_next none = {0};
                    tp__gemm_block(&plan, g, a_block, rs_a, mc, b_block, panel_stride, ldb, edge_b, edge_ldb, full_cols,
                                   ic, jc, kc, nc, beta, fills_a ? plan.fill_jr_outer : true, last,
                                   ic + mc >= m1 ? &next : &none);
                    /* the rest of the epilogue a row panel at a time, all
                     * its columns at once (one act call per panel when C's
                     * rows are whole: per tile, a small convolution's many
                     * 64-column calls cost 8% of it) */
                    if (last)
                        for (int64_t ir = ic; ir < ic + mc; ir += mr)
                            tp__gemm_finish_rows(g, &plan.rest, plan.isa.finish, ir,
                                                 ic + mc - ir < mr ? (int)(ic + mc - ir) : mr, jc, nc);
                }
                continue;
            }
            const int64_t calls = tp__gemm_ceil_div(m1 - m0, mr) * tp__gemm_ceil_div(nc, nr);
            int64_t call = 0;
            int rows;
            /* With no next B block to fetch, a K block too short for the
             * kernels to prefetch their own tile of C (TP__GEMM_C_PREFETCH_KC)
             * and whole rows of C (contiguous from one row panel to the
             * next), a row panel's kernel calls share the prefetch of the
             * next row panel's C: its lines, read (beta 1: a residual summed
             * in place) or written (read for ownership first), are then in
             * L2 when its stores come, rather than in L3 or memory, which a
             * 6 x 64 tile's 24 loads stall on after a K loop of a few
             * hundred cycles. ResNet-50's layer1 3136 x 64 x 256 convolutions
             * with the residual (per-node sums, 4 alternating runs): 0.81-0.86
             * -> 0.75-0.77 ms at 1 thread, 0.41-0.45 -> 0.38-0.44 at 2;
             * gemm_bench -e -m 64 (A and C cycling through 64 MiB) 92-94 ->
             * 122-125 GFLOP/s. At K >= 128 (the kernels' own prefetch) it
             * took layer2's 784 x 128 x 512 from 0.71-0.74 to 0.74 ms, and a
             * prefetch of the next row panel's A instead changed nothing. */
            const bool c_next = next.panels == 0 && kc < TP__GEMM_C_PREFETCH_KC && nc == g->ldc;
            const int64_t row_calls = tp__gemm_ceil_div(nc, nr);
            for (int64_t ir = m0; ir < m1; ir += rows) {
                rows = tp__gemm_panel_rows(m1 - ir, mr);
                tp__gemm_next c_pf = {0};
                if (c_next && ir + rows < m1)
                    c_pf = (tp__gemm_next){g->c + (ir + rows) * g->ldc, 0, 1,
                                           tp__gemm_panel_rows(m1 - ir - rows, mr) * g->ldc * (int64_t)sizeof(float),
                                           0};
                const float *a_panel = g->a_fill ? NULL : g->a + ir * g->rs_a + pc * g->cs_a;
                int64_t rs_a = g->rs_a, cs_a = 1;
                if (g->a_fill) { /* the portable kernel reads A packed */
                    float *tmp = a_buf + mr * kc;
                    g->a_fill(g->a_ctx, ir, rows, pc, kc, tmp, f_buf);
                    tp__gemm_pack_a_panel(mr, kc, rows, tmp, kc, 1, a_buf);
                    a_panel = a_buf;
                    rs_a = 1;
                    cs_a = mr;
                } else if (packs_a) {
                    tp__gemm_pack_a_panel(mr, kc, rows, a_panel, g->rs_a, g->cs_a, a_buf);
                    a_panel = a_buf;
                    rs_a = 1;
                    cs_a = mr;
                }
                float *c_row = g->c + ir * g->ldc + jc;
                for (int64_t jr = 0; jr < nc; jr += nr, call++) {
                    const int cols = nc - jr < nr ? (int)(nc - jr) : nr;
                    const bool packed_edge = jr >= full_cols;
                    const float *b_panel = packed_edge ? edge_b : b_block + (jr / nr) * panel_stride;
                    int64_t pf_bytes;
                    const float *pf = c_next ? tp__gemm_next_part(&c_pf, jr / nr, row_calls, &pf_bytes)
                                             : tp__gemm_next_part(&next, call, calls, &pf_bytes);
                    tp__gemm_tile_ep te;
                    kernel(kc, a_panel, rs_a, cs_a, b_panel, packed_edge ? edge_ldb : ldb, c_row + jr, g->ldc, rows, cols,
                           g->ep.alpha, beta, pf, pf_bytes, tp__gemm_tile_ep_at(&plan, g, last, jc + jr, &te));
                }
                if (last) tp__gemm_finish_rows(g, &plan.rest, plan.isa.finish, ir, rows, jc, nc);
            }
        }
    }
}

void tp__gemm_run(const tp_gemm *g, int ith, int nth, void *workspace) {
    tp__gemm_run_claimed(g, ith, nth, workspace, NULL);
}

/* Units of thread v's block, for tp__claim_next (0 for threads without one). */
typedef struct tp__gemm_claim_parts {
    const tp__gemm_plan *plan;
    const tp_gemm *g;
    int owners;
} tp__gemm_claim_parts;

static int64_t tp__gemm_part_units(const void *arg, int v) {
    const tp__gemm_claim_parts *p = arg;
    int64_t r[4];
    bool by_rows;
    if (v >= p->owners || !tp__gemm_region(p->plan, p->g, v, r)) return 0;
    return tp__gemm_unit_count(p->plan, p->g, r, &by_rows);
}

void tp__gemm_run_claimed(const tp_gemm *g, int ith, int nth, void *workspace, tp_claim *claims) {
    if (g->m <= 0 || g->n <= 0 || nth < 1 || ith < 0 || ith >= nth) return;
    const tp__gemm_plan plan = tp__gemm_make_plan(g, nth);
    const int owners = plan.th_m * plan.th_n;
    char *slice = (char *)workspace + (size_t)ith * (plan.a_bytes + plan.b_bytes + plan.f_bytes);
    int64_t r[4], u_rect[4];
    if (!claims || nth == 1) {
        if (ith < owners && tp__gemm_region(&plan, g, ith, r)) tp__gemm_rect(&plan, g, slice, r[0], r[1], r[2], r[3], r[3]);
        return;
    }
    /* its own units, front to back; then the others', from their backs */
    const tp__gemm_claim_parts parts = {&plan, g, owners};
    tp_claim_walk walk = {claims, ith, nth, 0};
    int v;
    int64_t u;
    while (tp__claim_next(&walk, tp__gemm_part_units, &parts, &v, &u)) {
        bool by_rows;
        tp__gemm_region(&plan, g, v, r);
        const int64_t units = tp__gemm_unit_count(&plan, g, r, &by_rows);
        tp__gemm_unit(&plan, r, by_rows, units, u, u_rect);
        tp__gemm_rect(&plan, g, slice, u_rect[0], u_rect[1], u_rect[2], u_rect[3], v == ith ? r[3] : u_rect[3]);
    }
}
