/*
 * conv_nhwc_avx2.c - float32 convolution with a channels-last (NHWC) output as
 * an implicit GEMM on our GEMM (gemm.h): output pixels are the rows of C,
 * the weights, packed once, are B (K = KH*KW*Cin ordered kh, kw, c), and
 * A's rows are the input patches, gathered by the GEMM's a_fill callback
 * an L2-sized block at a time (im2col per K block: in NHWC each tap of a
 * pixel is a run of Cin contiguous floats). Bias, a summed residual and a
 * fused activation run in the GEMM epilogue. A second convolution summed
 * into the output (tp_conv_nhwc.cat: a projection shortcut's partner) is
 * the same product's next K columns: its patches gathered after the
 * first's, its weights packed below the first's.
 *
 * The oneDNN region pass (onednn.c) uses it for convolutions inside NHWC
 * regions where it measured faster than oneDNN's own kernel (see there).
 * That pass runs only at the AVX2 level or above, so this file is built
 * with -mavx2 -mfma (CMakeLists.txt): the gathers and transforms vectorise
 * 8 floats wide. Callers must have checked AVX2 + FMA (cpuid);
 * the input may be NHWC or NCHW (a region's edge: gathered with strides).
 * Threads split the GEMM (pixels and output channels); every output is
 * reduced in the same order whatever the thread count.
 *
 * Winograd F(m x m, 3x3), m = 2 or 4, for 3x3 kernels with stride 1
 * (Lavin & Gray 2015): each m x m output tile comes from an (m+2) x (m+2)
 * input tile d as A^T [(G g G^T) .* (B^T d B)] A. The weights are
 * transformed once (U = G g G^T: (m+2)^2 values per input/output channel
 * pair, packed as (m+2)^2 GEMM B matrices of Cin x Cout); per block of tiles
 * the input tiles are transformed (V = B^T d B, (m+2)^2 matrices of tiles x
 * Cin), multiplied ((m+2)^2 GEMMs: 2.25x (m = 2) or 4x (m = 4) fewer
 * multiplies than the direct form) and transformed back (A^T m A) with
 * bias, residual and activation. The transforms (conv_wino.h) run 8 floats
 * wide here and 16 wide in conv_wino_avx512.c. Blocks of tiles are fixed
 * at plan time and split among threads (with fewer blocks than threads,
 * the output channels are split instead: winograd_run), so results do not
 * depend on the thread count. F(2x2)'s constants are 0, +-1 and 1/2, so its rounding
 * stays within a few float32 ulps of the sums' magnitude; F(4x4)'s (up to
 * 8 and 1/24) make it about 10x the direct sum's (conv_nhwc.h). F(2x2) over
 * few tiles (TP_WINO_OTF_MAX_TILES: a 7x7 map at batch 1) keeps the 9
 * taps packed instead and builds U per call, chunk by chunk, beside the
 * products (winograd_otf): there each weight serves few rows, and reading
 * 9 values a channel pair from memory instead of 16 costs more than the
 * transform's adds (in float32: U rounded a few times instead of once).
 */
#include "conv_nhwc.h"
#include "eltwise.h"
#include "half.h"

#include <string.h>

/* The Winograd transforms (conv_wino.h) 8 floats wide, or one at a time
 * where this file is built without AVX2 (not x86). */
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define WX_V __m256
#define WX_W 8
#define WX_LD(p) _mm256_loadu_ps(p)
#define WX_ST(p, v) _mm256_storeu_ps(p, v)
#define WX_ADD(a, b) _mm256_add_ps(a, b)
#define WX_SUB(a, b) _mm256_sub_ps(a, b)
#define WX_MUL(a, b) _mm256_mul_ps(a, b)
#define WX_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define WX_SET1(x) _mm256_set1_ps(x)
#define WX_RELU(v) _mm256_and_ps(v, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_NLE_UQ))
#else
#define WX_V float
#define WX_W 1
#define WX_LD(p) (*(p))
#define WX_ST(p, v) (*(p) = (v))
#define WX_ADD(a, b) ((a) + (b))
#define WX_SUB(a, b) ((a) - (b))
#define WX_MUL(a, b) ((a) * (b))
#define WX_FMA(a, b, c) ((a) * (b) + (c))
#define WX_SET1(x) (x)
#define WX_RELU(v) ((v) > 0.0f || (v) != (v) ? (v) : 0.0f)
#endif
#define WX_NAME(n) wx_avx2_##n
#include "conv_wino.h"

/* A fused depthwise convolution's output as the implicit A (tp_conv_dw;
 * AVX-512 only: tp__conv_nhwc_set_dw). */
static void conv_dw_fill(const void *ctx, int64_t i0, int rows, int64_t p0, int64_t kc, float *dst,
                         void *scratch) {
    const tp_conv_nhwc_call *call = ctx;
    const tp_conv_nhwc *cv = call->conv;
#if defined(__x86_64__)
    tp__conv_dw_fill_avx512(cv->pre_dw, call->x, cv->cin, cv->oh, cv->ow, i0, rows, p0, kc, dst, scratch);
#else
    (void)cv, (void)i0, (void)rows, (void)p0, (void)kc, (void)dst, (void)scratch;
#endif
}

/* Rows [i0, i0 + rows) x columns [p0, p0 + kc) of the patches of
 * convolution cv (K = kh * kw * cin, ordered kh, kw, c) over its input x
 * (NHWC, or NCHW unless x_nhwc), into dst (rows ld floats apart); with
 * in_scale (pointwise convolutions only, tp_conv_nhwc_call) the input
 * channels scaled per image. */
static void fill_patches(const tp_conv_nhwc *cv, const float *x, bool x_nhwc, const tp_conv_nhwc_call *scale,
                         int64_t i0, int rows, int64_t p0, int64_t kc, float *dst, int64_t ld) {
    const int64_t cin = cv->cin, pix = cv->oh * cv->ow, hw = cv->h * cv->w;
    int64_t n = i0 / pix, q = i0 % pix;
    int64_t oh = q / cv->ow, ow = q % cv->ow;
    for (int i = 0; i < rows; i++) {
        float *d = dst + (int64_t)i * ld;
        const float *img = x + n * hw * cin;
        if (scale) { /* pointwise: K is the input channels */
            const float *row = x_nhwc ? img + (oh * cv->w + ow) * cin + p0 : img + p0 * hw + oh * cv->w + ow;
            const int64_t step = x_nhwc ? 1 : hw;
            const float *sc = scale->in_scale + n * scale->in_scale_ns + p0;
            for (int64_t p = 0; p < kc; p++) d[p] = row[p * step] * sc[p];
            if (++ow == cv->ow) {
                ow = 0;
                if (++oh == cv->oh) {
                    oh = 0;
                    n++;
                }
            }
            continue;
        }
        for (int64_t p = p0, end = p0 + kc; p < end;) {
            const int64_t tap = p / cin, c = p % cin, kw = tap % cv->kw;
            const int64_t ih = oh * cv->sh - cv->ph + (tap / cv->kw) * cv->dh;
            const int64_t iw = ow * cv->sw - cv->pw + kw * cv->dw;
            int64_t len = cin - c;
            if (ih < 0 || ih >= cv->h || iw < 0 || iw >= cv->w) {
                if (len > end - p) len = end - p;
                memset(d, 0, (size_t)len * sizeof(float));
            } else if (x_nhwc) {
                /* undilated taps of one kernel row that are inside the
                 * input are adjacent pixels: one run */
                int64_t taps = 1;
                if (cv->dw == 1) {
                    taps = cv->kw - kw;
                    if (taps > cv->w - iw) taps = cv->w - iw;
                }
                len = taps * cin - c;
                if (len > end - p) len = end - p;
                memcpy(d, img + (ih * cv->w + iw) * cin + c, (size_t)len * sizeof(float));
            } else {
                if (len > end - p) len = end - p;
                const float *s = img + c * hw + ih * cv->w + iw;
                for (int64_t j = 0; j < len; j++) d[j] = s[j * hw];
            }
            d += len;
            p += len;
        }
        if (++ow == cv->ow) {
            ow = 0;
            if (++oh == cv->oh) {
                oh = 0;
                n++;
            }
        }
    }
}

/* Fill rows [i0, i0 + rows) x K columns [p0, p0 + kc) of the implicit A:
 * the convolution's patches, then (conv->cat) the second one's. */
static void conv_nhwc_fill(const void *ctx, int64_t i0, int rows, int64_t p0, int64_t kc, float *dst,
                           void *scratch) {
    (void)scratch;
    const tp_conv_nhwc_call *call = ctx;
    const tp_conv_nhwc *cv = call->conv;
    const int64_t k1 = cv->k;
    if (p0 < k1)
        fill_patches(cv, call->x, call->x_nhwc, call->in_scale ? call : NULL, i0, rows, p0, kc < k1 - p0 ? kc : k1 - p0,
                     dst, kc);
    if (cv->cat && p0 + kc > k1) {
        const int64_t q0 = p0 > k1 ? p0 - k1 : 0, skip = p0 < k1 ? k1 - p0 : 0;
        fill_patches(cv->cat, call->x2, call->x2_nhwc, NULL, i0, rows, q0, kc - skip, dst + skip, kc);
    }
}

bool tp__conv_nhwc_pointwise(const tp_conv_nhwc *cv) {
    return cv->kh == 1 && cv->kw == 1 && cv->sh == 1 && cv->sw == 1 && cv->ph == 0 && cv->pw == 0 &&
           cv->oh == cv->h && cv->ow == cv->w;
}

bool tp__conv_nhwc_winograd_ok(const tp_conv_nhwc *cv) {
    return cv->kh == 3 && cv->kw == 3 && cv->sh == 1 && cv->sw == 1 && cv->dh == 1 && cv->dw == 1 &&
           cv->oh == cv->h + 2 * cv->ph - 2 && cv->ow == cv->w + 2 * cv->pw - 2;
}

static size_t round64(size_t b) { return (b + 63) & ~(size_t)63; }

/* cv->packed_bytes of 64-byte aligned packed weights (wbase, wpack), and
 * (tmp not NULL) a temporary of tmp_floats floats to build them in; both
 * NULL on failure. */
static tp_status alloc_packed(tp_conv_nhwc *cv, size_t tmp_floats, float **tmp) {
    float *t = tmp ? tp_malloc(tmp_floats * sizeof(float) + 1) : NULL;
    void *wpack = NULL;
    cv->wbase = tp__malloc_stream(cv->packed_bytes, &wpack);
    if ((tmp && !t) || !cv->wbase) {
        tp_free(t);
        tp_free(cv->wbase);
        if (tmp) *tmp = NULL;
        cv->wbase = NULL;
        return tp_error(TP_ERR_NOMEM, "out of memory packing convolution weights");
    }
    if (tmp) *tmp = t;
    cv->wpack = wpack;
    return TP_OK;
}

static size_t winograd_thread_bytes(const tp_conv_nhwc *cv);

/* G of F(m x m, 3x3): U = G g G^T, (m+2) x 3. */
static const double G2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
static const double G4[6][3] = {{0.25, 0, 0},
                                {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                {0, 0, 1}};

/* U = G g G^T for every (cin, cout) pair, packed as (m+2)^2 B matrices. */
static tp_status winograd_init(tp_conv_nhwc *cv, int isa, const float *weight) {
    const int64_t cin = cv->cin, cout = cv->cout;
    const int m = cv->winograd == 4 ? 4 : 2, a = m + 2, nt = a * a;
    const double(*G)[3] = m == 4 ? G4 : G2;
    cv->winograd = m;
    cv->isa = isa;
    cv->k = cin;
    cv->tiles_h = (cv->oh + m - 1) / m;
    cv->tiles_w = (cv->ow + m - 1) / m;
#if defined(__x86_64__)
    cv->tx = isa == TP_ISA_AVX512 ? tp__wino_tx_avx512(m) : wx_avx2_tx(m);
#else
    cv->tx = wx_avx2_tx(m);
#endif
    cv->wino_relu = tp__fused_act_op(cv->act) == TP_ELT_RELU;
    /* a block's transformed tiles ((m+2)^2 x tiles x (cin + cout) floats)
     * in about L2, 48 to 192 rows per GEMM; then evened out to a multiple
     * of the threads (each thread runs a contiguous range of blocks) as
     * long as blocks keep WINO_MIN_BLOCK tiles (else some threads get one
     * block more). Results do not depend on the block size: a GEMM row's
     * reduction order does not depend on the rows around it. */
    enum { WINO_MIN_BLOCK = 24 };
    const int64_t total = tp__conv_nhwc_tiles(cv, m);
    int64_t tb = tp__gemm_cache_info().l2 / (nt * (cin + cout) * (int64_t)sizeof(float));
    if (tb < 48) tb = 48;
    if (tb > 192) tb = 192;
    const int64_t th = cv->threads < 1 ? 1 : cv->threads;
    int64_t nb = (total + tb - 1) / tb;
    nb = (nb + th - 1) / th * th;
    tb = (total + nb - 1) / nb;
    const int64_t floor_tb = total < WINO_MIN_BLOCK ? total : WINO_MIN_BLOCK;
    if (tb < floor_tb) tb = floor_tb;
    if (tb < 1) tb = 1;
    cv->wino_stride = round64(tp__gemm_packed_b_bytes(isa, cin, cout));
    cv->wino_otf = m == 2 && !cv->half16 && total <= TP_WINO_OTF_MAX_TILES && isa != TP_ISA_SCALAR;
    if (cv->wino_otf) {
        /* one block of all the tiles; per call the 9 taps' packed weights
         * (winograd_otf), in chunks of input channels whose 9 tap rows
         * and 12 transformed ones (per NR-wide panel) take 5/8 of L2 */
        int mr, nr;
        tp__gemm_register_block(isa, &mr, &nr);
        cv->tile_block = total;
        int64_t kmax = tp__gemm_cache_info().l2 * 5 / 8 / (21 * nr * (int64_t)sizeof(float));
        if (kmax < 16) kmax = 16;
        const int64_t chunks = (cin + kmax - 1) / kmax;
        cv->otf_kc = (cin + chunks - 1) / chunks;
        /* the taps an odd number of cache lines apart: the 9 streams of a
         * chunk fall in different L1 and L2 sets (as wino_stride_floats) */
        cv->wino_stride = ((cv->wino_stride / 64) | 1) * 64;
        cv->packed_bytes = 9 * cv->wino_stride;
        TP_TRY(alloc_packed(cv, 0, NULL));
        for (int t = 0; t < 9; t++) /* tap t of weight[o][c]: (o * cin + c) * 9 + t */
            tp__gemm_pack_b(isa, cin, cout, weight + t, 9, cin * 9, (char *)cv->wpack + (size_t)t * cv->wino_stride);
        cv->thread_bytes = winograd_thread_bytes(cv);
        return TP_OK;
    }
    cv->tile_block = tb;
    cv->packed_bytes = (size_t)nt * cv->wino_stride;
    float *u;
    TP_TRY(alloc_packed(cv, (size_t)(nt * cin * cout), &u));
    for (int64_t c = 0; c < cin; c++)
        for (int64_t o = 0; o < cout; o++) { /* o innermost: the writes run along memory */
            const float *g = weight + (o * cin + c) * 9;
            double t[6][3]; /* G g */
            for (int i = 0; i < a; i++)
                for (int j = 0; j < 3; j++) t[i][j] = G[i][0] * g[j] + G[i][1] * g[3 + j] + G[i][2] * g[6 + j];
            for (int i = 0; i < a; i++)
                for (int j = 0; j < a; j++)
                    u[((i * a + j) * cin + c) * cout + o] =
                        (float)(t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2]);
        }
    for (int x = 0; x < nt; x++)
        tp__gemm_pack_b(isa, cin, cout, u + x * cin * cout, cout, 1, (char *)cv->wpack + x * cv->wino_stride);
    tp_free(u);
    cv->thread_bytes = winograd_thread_bytes(cv);
    return TP_OK;
}

/* Floats between two of the (m+2)^2 matrices of rows floats each: whole
 * cache lines, an odd number of them, so that the transforms' (m+2)^2
 * streams of loads or stores fall in different L1 sets (with a stride of a
 * multiple of 1 KiB, 36 streams shared 4 sets). */
static size_t wino_stride_floats(size_t rows) {
    size_t lines = (rows + 15) / 16;
    return (lines | 1) * 16;
}

/* 16-bit tensors (cv->half16): a thread's input window ((m+2) rows x w
 * x cin floats, NHWC), a row of w widened values, a finished tile (m^2 x
 * cout floats) and its rounded values; 0 for float32. */
static size_t winograd_half_bytes(const tp_conv_nhwc *cv) {
    if (!cv->half16) return 0;
    const size_t a = (size_t)cv->winograd + 2, m2 = (size_t)cv->winograd * (size_t)cv->winograd;
    return round64(a * (size_t)(cv->w * cv->cin) * sizeof(float)) + round64((size_t)cv->w * sizeof(float)) +
           round64(m2 * (size_t)cv->cout * sizeof(float)) + round64(m2 * (size_t)cv->cout * sizeof(uint16_t));
}

/* A thread's 16-bit state: its window of widened input rows (image wn,
 * input rows from wr0, or wn -1: none yet) and its tile buffers. */
typedef struct wino16 {
    float *win, *row, *tile;
    uint16_t *tile16;
    int64_t wn, wr0;
} wino16;

/* Widen input rows [r0, r0 + m + 2) of image n (those inside it) into the
 * NHWC window: row r at win + (r - r0) * w * cin. */
static void wino16_window(const tp_conv_nhwc_call *call, wino16 *h, int64_t n, int64_t r0) {
    const tp_conv_nhwc *cv = call->conv;
    const int64_t cin = cv->cin, w = cv->w, hw = cv->h * w, a = cv->winograd + 2;
    for (int64_t r = r0 < 0 ? 0 : r0; r < r0 + a && r < cv->h; r++) {
        float *dst = h->win + (r - r0) * w * cin;
        for (int64_t c = 0; c < cin; c++) {
            tp__half_widen(call->x16 + (n * cin + c) * hw + r * w, w, cv->half16 - 1, h->row);
            for (int64_t iw = 0; iw < w; iw++) dst[iw * cin + c] = h->row[iw];
        }
    }
    h->wn = n;
    h->wr0 = r0;
}

/* wino_otf: a thread's buffers for the transformed weights of one chunk
 * (winograd_otf): the 12 of U's 16 matrices that are not taps (tx.u12),
 * otf_kc x NR floats each, an odd number of cache lines apart, and NR
 * floats the AVX2 kernel may read past a panel's last row; 0 otherwise. */
static size_t winograd_otf_bytes(const tp_conv_nhwc *cv) {
    if (!cv->wino_otf) return 0;
    int mr, nr;
    tp__gemm_register_block(cv->isa, &mr, &nr);
    return round64((12 * wino_stride_floats((size_t)(cv->otf_kc * nr)) + (size_t)nr) * sizeof(float));
}

/* Per-thread workspace of the Winograd form: V ((m+2)^2 x tb x cin), M
 * ((m+2)^2 x tb x cout), a zero row and a sink row for outputs outside the
 * image (max(cin, cout) each), a gathered tile for NCHW inputs ((m+2)^2 x
 * cin), and the GEMM's own (none today: A is read in place and B is
 * packed). */
static size_t winograd_thread_bytes(const tp_conv_nhwc *cv) {
    tp_gemm g;
    memset(&g, 0, sizeof g);
    g.isa = cv->isa;
    g.m = cv->tile_block;
    g.n = cv->cout;
    g.k = cv->cin;
    g.a = (const float *)cv->wpack; /* any non-NULL: row-major A in place */
    g.rs_a = cv->cin;
    g.cs_a = 1;
    g.packed_b = cv->wpack;
    g.ldc = cv->cout;
    const size_t a = (size_t)cv->winograd + 2, nt = a * a;
    const size_t tb = (size_t)cv->tile_block, mx = (size_t)(cv->cin > cv->cout ? cv->cin : cv->cout);
    return nt * wino_stride_floats(tb * (size_t)cv->cin) * sizeof(float) +
           nt * wino_stride_floats(tb * (size_t)cv->cout) * sizeof(float) +
           2 * round64(mx * sizeof(float)) + round64(nt * mx * sizeof(float)) +
           round64(tp__gemm_workspace_bytes(&g, 1)) + winograd_otf_bytes(cv) + winograd_half_bytes(cv);
}

/* Input tile t (n, ty, tx) -> V[x][row][0..cin) for the (m+2)^2 x, vs
 * floats apart. */
static void winograd_input(const tp_conv_nhwc_call *call, int64_t t, float *v, int64_t row, size_t vs,
                           const float *zeros, float *gather, wino16 *h) {
    const tp_conv_nhwc *cv = call->conv;
    const int m = cv->winograd, a = m + 2;
    const int64_t cin = cv->cin, per = cv->tiles_h * cv->tiles_w;
    const int64_t n = t / per, ty = (t % per) / cv->tiles_w, tx = t % cv->tiles_w;
    const int64_t hw = cv->h * cv->w;
    const float *img = call->x16 ? NULL : call->x + n * hw * cin;
    const float *d[36];
    if (call->x16 && (h->wn != n || h->wr0 != m * ty - cv->ph)) wino16_window(call, h, n, m * ty - cv->ph);
    for (int r = 0; r < a; r++)
        for (int q = 0; q < a; q++) {
            const int64_t ih = m * ty - cv->ph + r, iw = m * tx - cv->pw + q;
            if (ih < 0 || ih >= cv->h || iw < 0 || iw >= cv->w) {
                d[r * a + q] = zeros;
            } else if (call->x16) {
                d[r * a + q] = h->win + (r * cv->w + iw) * cin;
            } else if (call->x_nhwc) {
                d[r * a + q] = img + (ih * cv->w + iw) * cin;
            } else {
                float *gp = gather + (r * a + q) * cin;
                const float *sp = img + ih * cv->w + iw;
                for (int64_t c = 0; c < cin; c++) gp[c] = sp[c * hw];
                d[r * a + q] = gp;
            }
        }
    cv->tx.in(d, v + row * cin, vs, cin);
}

/* M[x][row][j0..j1) (matrices ms floats apart, rows cout floats) of tile t
 * -> output channels [j0, j1) of its (up to) m x m outputs, with bias,
 * residual and activation. */
static void winograd_output(const tp_conv_nhwc_call *call, int64_t t, const float *mm, int64_t row, size_t ms,
                            int64_t j0, int64_t j1, const float *zeros, float *sink, const wino16 *h) {
    const tp_conv_nhwc *cv = call->conv;
    const int m = cv->winograd;
    const int64_t cout = cv->cout, per = cv->tiles_h * cv->tiles_w;
    const int64_t n = t / per, ty = (t % per) / cv->tiles_w, tx = t % cv->tiles_w;
    float *dst[16];
    const float *res[16];
    bool inside[16];
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++) {
            const int64_t oh = m * ty + i, ow = m * tx + j;
            const int k = i * m + j;
            inside[k] = oh < cv->oh && ow < cv->ow;
            const int64_t px = (n * cv->oh + oh) * cv->ow + ow;
            /* 16-bit: the tile's pixels in the thread's buffer first */
            dst[k] = (call->y16 ? h->tile + k * cout : inside[k] ? call->y + px * cout : sink) + j0;
            res[k] = (inside[k] && call->res ? call->res + px * cout : zeros) + j0;
        }
    cv->tx.out(mm + row * cout + j0, ms, j1 - j0, (cv->bias ? cv->bias : zeros) + j0, dst,
               call->res ? res : NULL, cv->wino_relu);
    if (cv->act && !cv->wino_relu)
        for (int k = 0; k < m * m; k++)
            if (inside[k]) cv->act->apply(cv->act, dst[k], j1 - j0);
    if (!call->y16) return;
    /* each pixel's channels rounded at once, then stored to their planes */
    const int64_t ohw = cv->oh * cv->ow;
    for (int k = 0; k < m * m; k++) {
        if (!inside[k]) continue;
        uint16_t *r16 = h->tile16 + k * cout;
        float *t = dst[k];
        const int64_t px = (m * ty + k / m) * cv->ow + m * tx + k % m;
        if (call->res16) { /* the rounded result plus the residual */
            tp__half_round(t, j1 - j0, cv->half16 - 1, r16);
            tp__half_widen(r16, j1 - j0, cv->half16 - 1, t);
            const uint16_t *res = call->res16 + (n * cout + j0) * ohw + px;
            if (cv->half16 - 1 == TP_HALF_BF16) /* a shift, inline: one value per plane */
                for (int64_t c = 0; c < j1 - j0; c++) {
                    const uint32_t u = (uint32_t)res[c * ohw] << 16;
                    float f;
                    memcpy(&f, &u, 4);
                    t[c] += f;
                }
            else
                for (int64_t c = 0; c < j1 - j0; c++) t[c] += tp__half_to_f32(res[c * ohw], cv->half16 - 1);
        }
        tp__relu_mode_apply(cv->relu16, t, j1 - j0);
        tp__half_round(dst[k], j1 - j0, cv->half16 - 1, r16);
        uint16_t *y = call->y16 + (n * cout + j0) * ohw + px;
        for (int64_t c = 0; c < j1 - j0; c++) y[c * ohw] = r16[c];
    }
}

/* The 16 products of F(2x2)'s block (rows tiles, V and M as winograd_run
 * keeps them) over output channels [j0, j1) with the transformed weights
 * built here from the 9 packed taps (tp_conv_nhwc.wino_otf): per NR-wide
 * panel of the weights and chunk of otf_kc input channels, U = G g G^T's
 * 12 matrices that are not taps (tx.u12), then the 16 products, each
 * adding its chunk to M while the kernels fetch the next chunk's taps.
 * The chunks and their order are fixed at plan time, so an output's
 * arithmetic does not depend on the thread that computes it. */
/* wino_otf: tap t's rows from input channel c0 on in the weight panel of
 * output channels from p0 (row_floats: a packed row's floats, full panels
 * then the edge panel's width), and the panel's width into *width. */
static const float *otf_tap(const tp_conv_nhwc *cv, int t, int64_t p0, int64_t c0, int64_t nr, int64_t row_floats,
                            int64_t *width) {
    *width = p0 + nr <= cv->cout ? nr : row_floats - p0;
    const float *panel =
        tp__gemm_packed_b_cols(cv->isa, cv->cin, (const char *)cv->wpack + (size_t)t * cv->wino_stride, p0);
    return panel + c0 * *width;
}

static void winograd_otf(const tp_conv_nhwc *cv, const float *v, size_t vs, float *m, size_t ms, int64_t rows,
                         int64_t j0, int64_t j1, float *buf) {
    const int64_t cin = cv->cin, cout = cv->cout, kc = cv->otf_kc;
    int mr, nr;
    tp__gemm_register_block(cv->isa, &mr, &nr);
    /* floats of a packed row of all the columns: full panels, then the edge panel's width */
    const int64_t row_floats = (int64_t)(tp__gemm_packed_b_bytes(cv->isa, cin, cout) / sizeof(float)) / cin;
    const size_t chunk = wino_stride_floats((size_t)(kc * nr));
    float *u12[12];
    for (int k = 0; k < 12; k++) u12[k] = buf + (size_t)k * chunk;
    for (int64_t p0 = j0; p0 < j1; p0 += nr) {
        const int n = (int)(j1 - p0 < nr ? j1 - p0 : nr);
        for (int64_t c0 = 0; c0 < cin; c0 += kc) {
            int64_t width;
            const float *g[9];
            for (int t = 0; t < 9; t++) g[t] = otf_tap(cv, t, p0, c0, nr, row_floats, &width);
            const int64_t kcc = cin - c0 < kc ? cin - c0 : kc, nf = kcc * width;
            /* the next chunk's taps (this panel's next rows, else the next
             * panel's first), fetched while this chunk's 16 products run:
             * product x takes a share of tap x * 9 / 16 */
            const float *nx[9] = {NULL};
            int64_t nx_bytes = 0;
            if (c0 + kc < cin || p0 + nr < j1) {
                const int64_t q0 = c0 + kc < cin ? c0 + kc : 0, pn = c0 + kc < cin ? p0 : p0 + nr;
                const int64_t kn = cin - q0 < kc ? cin - q0 : kc;
                int64_t wn;
                for (int t = 0; t < 9; t++) nx[t] = otf_tap(cv, t, pn, q0, nr, row_floats, &wn);
                nx_bytes = kn * wn * (int64_t)sizeof(float);
            }
            cv->tx.u12(g, u12, nf);
            /* U(i, j) for x = 4 i + j: the corners are taps */
            const float *u[16] = {g[0],    u12[0], u12[1], g[2],    u12[2],  u12[3], u12[4],  u12[5],
                                  u12[6],  u12[7], u12[8], u12[9],  g[6],    u12[10], u12[11], g[8]};
            for (int x = 0; x < 16; x++) {
                /* products x0 .. x1 - 1 share tap t's bytes */
                const int t = x * 9 / 16, x0 = (t * 16 + 8) / 9, x1 = ((t + 1) * 16 + 8) / 9;
                const int64_t share = nx_bytes ? ((nx_bytes + (x1 - x0) - 1) / (x1 - x0) + 63) & ~(int64_t)63 : 0;
                const int64_t off = (x - x0) * share;
                const int64_t pb = off < nx_bytes ? (nx_bytes - off < share ? nx_bytes - off : share) : 0;
                tp__gemm_panel(cv->isa, rows, kcc, v + (size_t)x * vs + c0, cin, u[x], n, m + (size_t)x * ms + p0,
                               cout, c0 ? 1.0f : 0.0f, pb ? (const char *)nx[t] + off : NULL, pb);
            }
        }
    }
}

/* Blocks of tiles split between the threads; with fewer blocks than
 * threads (a small image: ResNet's 7x7 maps have 16 2x2 tiles, one block),
 * every thread runs every block over its own range of output channels
 * (whole NR-wide panels of the transformed weights), transforming the
 * input tiles itself: the weights, which dominate there, are read once
 * between the threads. An output's arithmetic is the same either way. */
static void winograd_run(const tp_conv_nhwc_call *call, int ith, int nth, void *workspace) {
    const tp_conv_nhwc *cv = call->conv;
    const int64_t tb = cv->tile_block, cin = cv->cin, cout = cv->cout;
    const int nt = (cv->winograd + 2) * (cv->winograd + 2);
    char *ws = (char *)workspace + (size_t)ith * cv->thread_bytes;
    float *v = (float *)ws;
    const size_t vs = wino_stride_floats((size_t)(tb * cin)), ms = wino_stride_floats((size_t)(tb * cout));
    float *m = v + (size_t)nt * vs;
    const size_t mx = (size_t)(cin > cout ? cin : cout);
    float *zeros = m + (size_t)nt * ms;
    float *sink = (float *)((char *)zeros + round64(mx * sizeof(float)));
    float *gather = (float *)((char *)sink + round64(mx * sizeof(float)));
    void *gws = (char *)gather + round64((size_t)nt * mx * sizeof(float));
    wino16 h16 = {.wn = -1};
    if (cv->half16) { /* after the GEMM's workspace */
        char *p = (char *)ws + cv->thread_bytes - winograd_half_bytes(cv);
        const size_t a = (size_t)cv->winograd + 2, m2 = (size_t)cv->winograd * (size_t)cv->winograd;
        h16.win = (float *)p;
        p += round64(a * (size_t)(cv->w * cin) * sizeof(float));
        h16.row = (float *)p;
        p += round64((size_t)cv->w * sizeof(float));
        h16.tile = (float *)p;
        p += round64(m2 * (size_t)cout * sizeof(float));
        h16.tile16 = (uint16_t *)p;
    }
    const int64_t total = cv->n * cv->tiles_h * cv->tiles_w, blocks = (total + tb - 1) / tb;
    int64_t b0 = blocks * ith / nth, b1 = blocks * (ith + 1) / nth, j0 = 0, j1 = cout;
    if (blocks < nth) {
        int mr, nr;
        tp__gemm_register_block(cv->isa, &mr, &nr);
        const int64_t panels = (cout + nr - 1) / nr;
        j0 = panels * ith / nth * nr;
        j1 = panels * (ith + 1) / nth * nr;
        if (j1 > cout) j1 = cout;
        b0 = 0;
        b1 = j0 < j1 ? blocks : 0;
    }
    memset(zeros, 0, mx * sizeof(float));
    for (int64_t blk = b0; blk < b1; blk++) {
        const int64_t t0 = blk * tb, rows = total - t0 < tb ? total - t0 : tb;
        for (int64_t r = 0; r < rows; r++) winograd_input(call, t0 + r, v, r, vs, zeros, gather, &h16);
        if (cv->wino_otf) {
            float *obuf = (float *)((char *)ws + cv->thread_bytes - winograd_half_bytes(cv) - winograd_otf_bytes(cv));
            winograd_otf(cv, v, vs, m, ms, rows, j0, j1, obuf);
            for (int64_t r = 0; r < rows; r++) winograd_output(call, t0 + r, m, r, ms, j0, j1, zeros, sink, &h16);
            continue;
        }
        for (int x = 0; x < nt; x++) {
            tp_gemm g;
            memset(&g, 0, sizeof g);
            g.isa = cv->isa;
            g.m = rows;
            g.n = j1 - j0;
            g.k = cin;
            g.a = v + (size_t)x * vs;
            g.rs_a = cin;
            g.cs_a = 1;
            g.packed_b = tp__gemm_packed_b_cols(cv->isa, cin, (const char *)cv->wpack + (size_t)x * cv->wino_stride, j0);
            g.c = m + (size_t)x * ms + j0;
            g.ldc = cout;
            g.ep = tp__gemm_epilogue_default();
            tp__gemm_run(&g, 0, 1, gws);
        }
        for (int64_t r = 0; r < rows; r++) winograd_output(call, t0 + r, m, r, ms, j0, j1, zeros, sink, &h16);
    }
}

/* Pack convolution g's weights (OIHW; conv1d's OIK is OI1K) as rows
 * [row0, row0 + kh * kw * cin) of the packed B of k rows at dst: B row
 * p = tap * cin + c, column o, is weight[o][c][tap], so each tap's cin
 * rows are a strided view of weight (row stride taps, column stride cin *
 * taps), packed without an unpacked copy. */
static void pack_taps(const tp_conv_nhwc *g, const float *weight, int64_t k, int64_t row0, int64_t cout, void *dst) {
    const int64_t taps = g->kh * g->kw;
    for (int64_t t = 0; t < taps; t++)
        tp__gemm_pack_b_rows(g->isa, k, row0 + t * g->cin, g->cin, cout, weight + t, taps, g->cin * taps, dst);
}

tp_status tp__conv_nhwc_init(tp_conv_nhwc *cv, int isa, const float *weight) {
    if (cv->winograd) return winograd_init(cv, isa, weight);
    const int64_t k = cv->kh * cv->kw * cv->cin;
    cv->isa = isa;
    cv->k = k;
    if (cv->direct) {
#if defined(__x86_64__)
        TP_CHECK(isa == TP_ISA_AVX512, TP_ERR_UNSUPPORTED, "the direct convolution kernel needs AVX-512");
        cv->packed_bytes = tp__conv_direct_packed_bytes_avx512(cv);
        TP_TRY(alloc_packed(cv, 0, NULL));
        tp__conv_direct_pack_avx512(cv, weight, cv->wpack);
        return TP_OK;
#else
        return tp_error(TP_ERR_UNSUPPORTED, "the direct convolution kernel needs AVX-512");
#endif
    }
    cv->packed_bytes = tp__gemm_packed_b_bytes(isa, k, cv->cout);
    TP_TRY(alloc_packed(cv, 0, NULL));
    pack_taps(cv, weight, k, 0, cv->cout, cv->wpack);
    return TP_OK;
}

tp_status tp__conv_nhwc_set_cat(tp_conv_nhwc *cv, const tp_conv_nhwc *g2, const float *weight, const float *weight2,
                                const float *bias2) {
    if (cv->winograd || cv->direct || cv->pre_dw || cv->scale_b || cv->cat || !cv->wbase || g2->n != cv->n ||
        g2->cout != cv->cout || g2->oh != cv->oh || g2->ow != cv->ow || g2->cin < 1 || g2->kh < 1 || g2->kw < 1)
        return tp_error(TP_ERR_INTERNAL, "a convolution summed into one that does not take it");
    const int64_t k1 = cv->k, k2 = g2->kh * g2->kw * g2->cin, cout = cv->cout;
    tp_conv_nhwc *cat = tp_malloc(sizeof *cat);
    float *bias = cv->bias || bias2 ? tp_malloc((size_t)cout * sizeof(float)) : NULL;
    if (!cat || ((cv->bias || bias2) && !bias)) {
        tp_free(cat);
        tp_free(bias);
        return tp_error(TP_ERR_NOMEM, "out of memory summing two convolutions in one product");
    }
    *cat = *g2;
    cat->winograd = 0;
    cat->isa = cv->isa;
    cat->k = k2;
    cat->bias = NULL;
    cat->act = NULL;
    cat->wbase = cat->wpack = NULL;
    cat->packed_bytes = 0;
    cat->pre_dw = NULL;
    cat->cat = NULL;
    cat->cat_bias = NULL;
    for (int64_t o = 0; bias && o < cout; o++) bias[o] = (cv->bias ? cv->bias[o] : 0.0f) + (bias2 ? bias2[o] : 0.0f);
    if (bias) cv->bias = bias;
    cv->cat = cat;
    cv->cat_bias = bias;
    /* the packed B of both, cv's rows then g2's, in place of cv's own
     * (freed first: planning's peak memory; after a failure cv has no
     * weights and its plan goes) */
    tp_free(cv->wbase);
    cv->wbase = cv->wpack = NULL;
    cv->packed_bytes = tp__gemm_packed_b_bytes(cv->isa, k1 + k2, cout);
    TP_TRY(alloc_packed(cv, 0, NULL));
    pack_taps(cv, weight, k1 + k2, 0, cout, cv->wpack);
    pack_taps(cat, weight2, k1 + k2, k1, cout, cv->wpack);
    return TP_OK;
}

tp_status tp__conv_nhwc_set_dw(tp_conv_nhwc *cv, const tp_conv_dw *g, const float *weight, const float *bias,
                               const tp_op_plan *act) {
    const int64_t cin = cv->cin, taps = g->kh * g->kw;
    if (cv->isa != TP_ISA_AVX512 || cv->winograd || cv->direct || cv->scale_b || !tp__conv_nhwc_pointwise(cv) ||
        taps < 1 || g->kh > TP_CONV_DW_MAX_KH ||
        (g->h + 2 * g->ph - g->kh) / g->sh + 1 != cv->h || (g->w + 2 * g->pw - g->kw) / g->sw + 1 != cv->w)
        return tp_error(TP_ERR_INTERNAL, "a depthwise convolution fused into one that does not take it");
    tp_conv_dw *dw = tp_calloc(1, sizeof *dw);
    float *wt = tp_malloc((size_t)((taps + 1) * cin) * sizeof(float));
    if (!dw || !wt) {
        tp_free(dw);
        tp_free(wt);
        return tp_error(TP_ERR_NOMEM, "out of memory fusing a depthwise convolution");
    }
    *dw = *g;
    for (int64_t c = 0; c < cin; c++) {
        for (int64_t t = 0; t < taps; t++) wt[t * cin + c] = weight[c * taps + t];
        wt[taps * cin + c] = bias ? bias[c] : 0.0f;
    }
    dw->weight = wt;
    dw->relu = tp__fused_relu_mode(act); /* in registers */
    dw->act = act && !dw->relu ? act : NULL;
    cv->pre_dw = dw;
    return TP_OK;
}

size_t tp__conv_dw_scratch_bytes(const tp_conv_dw *dw, int64_t cin) {
    if (!dw->ex_cin) return 0;
    return TP_CONV_DW_RING_HEADER + dw->ex_gemm_ws + round64((size_t)(dw->kh * dw->w * cin) * sizeof(float));
}

tp_status tp__conv_nhwc_set_dw_expand(tp_conv_nhwc *cv, int64_t ex_cin, const float *weight, const float *bias,
                                      const tp_op_plan *act) {
    tp_conv_dw *dw = cv->pre_dw;
    const int64_t cin = cv->cin;
    if (!dw || dw->ex_cin || ex_cin < 1)
        return tp_error(TP_ERR_INTERNAL, "an expansion fused into a convolution that does not take it");
    const size_t bytes = tp__gemm_packed_b_bytes(TP_ISA_AVX512, ex_cin, cin);
    void *pack = NULL;
    void *base = tp__malloc_stream(bytes, &pack);
    float *b = bias ? tp_malloc((size_t)cin * sizeof(float)) : NULL;
    if (!base || (bias && !b)) {
        tp_free(base);
        tp_free(b);
        return tp_error(TP_ERR_NOMEM, "out of memory fusing an expansion into a depthwise convolution");
    }
    /* B (ex_cin x cin): element (p, j) is weight[j][p] */
    tp__gemm_pack_b(TP_ISA_AVX512, ex_cin, cin, weight, 1, ex_cin, pack);
    if (b) memcpy(b, bias, (size_t)cin * sizeof(float));
    dw->ex_cin = ex_cin;
    dw->ex_wbase = base;
    dw->ex_wpack = pack;
    dw->ex_bias = b;
    dw->ex_act = act;
    dw->ex_act_relu = tp__fused_relu_mode(act);
    const tp_gemm g = tp__conv_dw_ex_gemm(dw, cin, NULL, NULL);
    dw->ex_gemm_ws = round64(tp__gemm_workspace_bytes(&g, 1));
    cv->packed_bytes += bytes;
    return TP_OK;
}

void tp__conv_nhwc_free(tp_conv_nhwc *cv) {
    if (cv->pre_dw) {
        tp_free(cv->pre_dw->ex_wbase);
        tp_free(cv->pre_dw->ex_bias);
        tp_free(cv->pre_dw->weight);
    }
    tp_free(cv->pre_dw);
    cv->pre_dw = NULL;
    tp_free(cv->cat);
    cv->cat = NULL;
    tp_free(cv->cat_bias);
    cv->cat_bias = NULL;
    tp_free(cv->wbase);
    cv->wbase = NULL;
    cv->wpack = NULL;
}

static tp_gemm conv_nhwc_gemm(const tp_conv_nhwc *cv, const tp_conv_nhwc_call *call) {
    tp_gemm g;
    memset(&g, 0, sizeof g);
    g.isa = cv->isa;
    g.m = cv->n * cv->oh * cv->ow;
    g.n = cv->cout;
    g.k = cv->k + (cv->cat ? cv->cat->k : 0);
    if (cv->pre_dw) {
        g.a_fill = conv_dw_fill;
        g.a_ctx = call;
        g.fill_scratch = tp__conv_dw_scratch_bytes(cv->pre_dw, cv->cin);
    } else if (!cv->cat && call && call->x_nhwc && tp__conv_nhwc_pointwise(cv) && (!call->in_scale || cv->scale_b)) {
        /* an NHWC input is A itself: pixels x cin, row-major (with
         * scale_b the caller scales B instead) */
        g.a = call->x;
        g.rs_a = cv->cin;
        g.cs_a = 1;
    } else {
        g.a_fill = conv_nhwc_fill;
        g.a_ctx = call;
    }
    g.packed_b = cv->wpack;
    g.c = call ? call->y : NULL;
    g.ldc = cv->cout;
    g.ep = tp__gemm_epilogue_default();
    g.ep.bias = cv->bias;
    if (call && call->res) {
        if (call->res == call->y) {
            g.ep.beta = 1.0f; /* the residual is dst's own contents */
        } else {
            g.ep.residual = call->res;
            g.ep.ld_residual = cv->cout;
        }
    }
    if (cv->act) {
        g.ep.act = tp__fused_act;
        g.ep.act_ctx = cv->act;
        g.ep.act_relu = tp__fused_relu_mode(cv->act);
    }
    return g;
}

void tp__conv_nhwc_scale_b(tp_conv_nhwc *cv, int nth) {
    const int64_t pix = cv->oh * cv->ow;
    const size_t bytes = tp__gemm_packed_b_bytes(cv->isa, cv->k, cv->cout);
    const int64_t cols = cv->k > 0 ? (int64_t)(bytes / sizeof(float)) / cv->k : 0; /* N as packed */
    if (nth < 1) nth = 1;
    cv->scale_b = !cv->winograd && !cv->direct && tp__conv_nhwc_pointwise(cv) && bytes > 0 && 2 * nth * cols <= pix;
    cv->scale_b_nth = nth;
    cv->scale_b_bytes = cv->scale_b ? round64(bytes) : 0;
}

/* The product of image img alone (M its pixels), A read in place. */
static tp_gemm conv_nhwc_gemm_image(const tp_conv_nhwc *cv, const tp_conv_nhwc_call *call, int64_t img) {
    const int64_t pix = cv->oh * cv->ow;
    tp_gemm g = conv_nhwc_gemm(cv, call);
    g.m = pix;
    if (call) {
        g.a = call->x + img * pix * cv->cin;
        g.c = call->y + img * pix * cv->cout;
        if (g.ep.residual) g.ep.residual = call->res + img * pix * cv->cout;
    }
    return g;
}

size_t tp__conv_nhwc_workspace(const tp_conv_nhwc *cv, int nth) {
    if (cv->winograd) return (size_t)(nth < 1 ? 1 : nth) * cv->thread_bytes;
#if defined(__x86_64__)
    if (cv->direct) return (size_t)(nth < 1 ? 1 : nth) * tp__conv_direct_thread_bytes_avx512(cv);
#endif
    /* with the implicit A: at least what an NHWC pointwise input's in-place
     * A needs (no A buffer) */
    tp_gemm g = conv_nhwc_gemm(cv, NULL);
    size_t bytes = tp__gemm_workspace_bytes(&g, nth);
    if (cv->scale_b) { /* the threads' scaled weights, then one image's product */
        tp_gemm gi = conv_nhwc_gemm_image(cv, NULL, 0);
        const size_t per_image = tp__gemm_workspace_bytes(&gi, nth);
        bytes = (size_t)cv->scale_b_nth * cv->scale_b_bytes + round64(bytes > per_image ? bytes : per_image);
    }
    return bytes;
}

void tp__conv_nhwc_run(const tp_conv_nhwc_call *call, int ith, int nth, void *workspace) {
    tp__conv_nhwc_run_claimed(call, ith, nth, workspace, NULL);
}

void tp__conv_nhwc_run_claimed(const tp_conv_nhwc_call *call, int ith, int nth, void *workspace, tp_claim *claims) {
    const tp_conv_nhwc *cv = call->conv;
    if (cv->winograd) {
        winograd_run(call, ith, nth, workspace);
        return;
    }
#if defined(__x86_64__)
    if (cv->direct) {
        tp__conv_direct_run_avx512(call, ith, nth, workspace);
        return;
    }
#endif
    if (call->in_scale && cv->scale_b && call->x_nhwc) {
        /* each thread scales its own copy of B by the image's scales (one
         * copy for the batch when they are shared) and runs its part of
         * the image's product on it */
        float *b = (float *)((char *)workspace + (size_t)ith * cv->scale_b_bytes);
        void *gws = (char *)workspace + (size_t)cv->scale_b_nth * cv->scale_b_bytes;
        const int64_t images = call->in_scale_ns ? cv->n : 1;
        for (int64_t img = 0; img < images; img++) {
            tp__gemm_scale_packed_b_rows(cv->isa, cv->k, cv->cout, cv->wpack, call->in_scale + img * call->in_scale_ns,
                                         b);
            tp_gemm g = call->in_scale_ns ? conv_nhwc_gemm_image(cv, call, img) : conv_nhwc_gemm(cv, call);
            g.packed_b = b;
            tp__gemm_run_claimed(&g, ith, nth, gws, images == 1 ? claims : NULL);
        }
        return;
    }
    tp_gemm g = conv_nhwc_gemm(cv, call);
    tp__gemm_run_claimed(&g, ith, nth, workspace, claims);
}
