/*
 * conv_dw.h - a depthwise convolution computed into a pointwise
 * convolution's A (tp_conv_dw, conv_nhwc.h), written over a vector type
 * like conv_wino.h and included by conv_wino_avx512.c (16 floats). An
 * AVX2 instance (8 floats, WX_DW_PX 1 or 2) measured 4-5% slower than
 * oneDNN's own depthwise kernel followed by the projection (MobileNetV2
 * at TP_CPU_LEVEL=avx2 on Zen 4, alternating runs), and still 2% slower
 * at one thread once relu6's Clip ran in registers, so the fusion runs at
 * the AVX-512 level only. The includer defines what conv_wino.h asks for
 * (WX_V, WX_W, WX_LD, WX_ST, WX_FMA, WX_SET1, WX_RELU, WX_NAME) and
 *   WX_MAX(a, b)    lane-wise a > b ? a : b  (b when either is NaN)
 *   WX_MIN(a, b)    lane-wise a < b ? a : b  (b when either is NaN)
 *   WX_DW_PX        output columns a 3x3 kernel computes at once (the
 *                   accumulators and the 9 weights must fit the registers)
 *   WX_M, WX_TAIL(n), WX_LDM(p, m), WX_STM(p, m, v)
 *                   a lane mask, the mask of the first n lanes, and loads
 *                   (zeros outside m) and stores of the lanes in m
 * and gets WX_NAME(dw_fill), the a_fill of such a GEMM.
 *
 * Channels run along memory (NHWC), a vector of channels at a time; the
 * taps' weights of that vector stay in registers while it runs over the
 * block's pixels (3x3 kernels: 9 vectors; other sizes read them from L1).
 * Each output is bias + sum of taps in order (kernel row, then column),
 * one fused multiply-add each, the taps in the padding skipped; channels
 * past the last whole vector take the same steps in a masked vector (3x3
 * kernels) or one at a time with fmaf (other sizes), so an output does not
 * depend on the vector it falls in, the block around it or the thread
 * count. (The GEMM's K blocks, the channel blocks a fill is asked for, need
 * not be multiples of the vector: MobileNetV2's 960 channels come in
 * blocks of 138, and their last 10 channels, one at a time, made its 7 x 7
 * depthwise + projection steps 1.3-1.5x slower than the two apart.)
 */
#include "conv_nhwc.h"

#include <math.h>
#include <string.h>

static inline WX_V WX_NAME(dw_act)(WX_V v, int relu) {
    if (relu == 1) return WX_RELU(v);
    /* max(0, v) keeps a NaN v (the second operand), and so does min(6, .) */
    if (relu == 2) return WX_MIN(WX_SET1(6.0f), WX_MAX(WX_SET1(0.0f), v));
    return v;
}

#define WX_DW_INLINE static inline __attribute__((always_inline))

/* One output vector of a 3x3 kernel at column ix0 of the input (rows rp[ky]
 * where vy[ky]; columns outside [0, W) skipped), weights w[9] in registers. */
#define WX_DW_LD(p) (tail ? WX_LDM(p, m) : WX_LD(p))
#define WX_DW_ST(p, v) (tail ? WX_STM(p, m, v) : WX_ST(p, v))
WX_DW_INLINE WX_V WX_NAME(dw3_px)(const float *const *rp, const bool *vy, int64_t ix0, int64_t W, int64_t cin,
                                  const WX_V *w, WX_V a, const bool tail, WX_M m) {
    for (int ky = 0; ky < 3; ky++) {
        if (!vy[ky]) continue;
        for (int kx = 0; kx < 3; kx++) {
            const int64_t ix = ix0 + kx;
            if (ix >= 0 && ix < W) a = WX_FMA(WX_DW_LD(rp[ky] + ix * cin), w[ky * 3 + kx], a);
        }
    }
    return a;
}

/* That vector with the bias b added first and the activation after, stored
 * at d. */
WX_DW_INLINE void WX_NAME(dw3_px_st)(const float *const *rp, const bool *vy, int64_t ix0, int64_t W, int64_t cin,
                                     const WX_V *w, WX_V b, int relu, float *d, const bool tail, WX_M m) {
    WX_DW_ST(d, WX_NAME(dw_act)(WX_NAME(dw3_px)(rp, vy, ix0, W, cin, w, b, tail, m), relu));
}

/* The 9 weights of the vector of channels at p0 + c into w; returns its
 * bias. */
WX_DW_INLINE WX_V WX_NAME(dw3_weights)(const tp_conv_dw *dw, int64_t cin, int64_t p0, int64_t c, WX_V *w,
                                       const bool tail, WX_M m) {
    const float *wt = dw->weight + p0 + c;
    for (int t = 0; t < 9; t++) w[t] = WX_DW_LD(wt + t * cin);
    return WX_DW_LD(dw->weight + 9 * cin + p0 + c);
}

/* WX_DW_PX adjacent output vectors of a 3x3 kernel with stride sw (a
 * constant where inlined: stride 1 shares the loads of neighbouring
 * columns), every column inside the input, into d (row stride kc). */
WX_DW_INLINE void WX_NAME(dw3_block)(const float *const *rp, const bool *vy, int64_t ix0, int64_t sw, int64_t cin,
                                     const WX_V *w, WX_V b, int relu, float *d, int64_t kc, const bool tail,
                                     WX_M m) {
    WX_V a[WX_DW_PX];
    for (int j = 0; j < WX_DW_PX; j++) a[j] = b;
    for (int ky = 0; ky < 3; ky++) {
        if (!vy[ky]) continue;
        const float *r = rp[ky] + ix0 * cin;
        for (int kx = 0; kx < 3; kx++)
            for (int j = 0; j < WX_DW_PX; j++) a[j] = WX_FMA(WX_DW_LD(r + (j * sw + kx) * cin), w[ky * 3 + kx], a[j]);
    }
    for (int j = 0; j < WX_DW_PX; j++) WX_DW_ST(d + j * kc, WX_NAME(dw_act)(a[j], relu));
}

/* One vector of channels at c (tail: the lanes in m only) of output pixels
 * [ox0, end) of a 3x3 kernel, the inside columns [lo, hi) WX_DW_PX at once. */
WX_DW_INLINE void WX_NAME(dw3_channels)(const tp_conv_dw *dw, const float *const *row, const bool *vy, int64_t cin,
                                        int64_t ox0, int64_t end, int64_t lo, int64_t hi, int64_t p0, int64_t c,
                                        int64_t kc, float *d, const bool tail, WX_M m) {
    const int64_t W = dw->w, sw = dw->sw, pw = dw->pw;
    const int relu = dw->relu;
    WX_V w[9];
    const WX_V b = WX_NAME(dw3_weights)(dw, cin, p0, c, w, tail, m);
    const float *rp[3];
    for (int ky = 0; ky < 3; ky++) rp[ky] = vy[ky] ? row[ky] + p0 + c : NULL;
    int64_t ox = ox0;
    for (; ox < lo; ox++)
        WX_NAME(dw3_px_st)(rp, vy, ox * sw - pw, W, cin, w, b, relu, d + (ox - ox0) * kc + c, tail, m);
    if (sw == 1)
        for (; ox + WX_DW_PX <= hi; ox += WX_DW_PX)
            WX_NAME(dw3_block)(rp, vy, ox - pw, 1, cin, w, b, relu, d + (ox - ox0) * kc + c, kc, tail, m);
    else
        for (; ox + WX_DW_PX <= hi; ox += WX_DW_PX)
            WX_NAME(dw3_block)(rp, vy, ox * sw - pw, sw, cin, w, b, relu, d + (ox - ox0) * kc + c, kc, tail, m);
    for (; ox < end; ox++)
        WX_NAME(dw3_px_st)(rp, vy, ox * sw - pw, W, cin, w, b, relu, d + (ox - ox0) * kc + c, tail, m);
}

/* ---- WX_DW_ROWS whole output rows at once (3x3, stride 1) ----
 * One row at a time, a channel vector's pass reads its three input rows
 * (3 x W lines) into L1, and the next row's pass finds them evicted by the
 * other channel vectors' passes: every input line came from L2 three
 * times. Here a channel vector runs R = WX_DW_ROWS rows, reading R + 2
 * input rows once, each load shared by the rows it serves. Every output
 * takes the same fused multiply-adds in the same order as one row at a
 * time (dw3_block, dw3_px), so the bits do not depend on how the fill's
 * rows were grouped. */

/* WX_DW_PX adjacent output vectors of R rows, every tap inside the input:
 * kernel rows rp[y .. y + 2] for output row y, columns from ix0; row y's
 * vectors into d + y * dstep (vectors kc apart). */
WX_DW_INLINE void WX_NAME(dw3_rows_block)(const float *const *rp, int64_t ix0, int64_t cin, const WX_V *w, WX_V b,
                                          int relu, float *d, int64_t dstep, int64_t kc, const bool tail, WX_M m) {
    WX_V a[WX_DW_ROWS][WX_DW_PX];
    for (int y = 0; y < WX_DW_ROWS; y++)
        for (int j = 0; j < WX_DW_PX; j++) a[y][j] = b;
    for (int ky = 0; ky < 3; ky++)
        for (int kx = 0; kx < 3; kx++)
            for (int j = 0; j < WX_DW_PX; j++)
                for (int y = 0; y < WX_DW_ROWS; y++)
                    a[y][j] = WX_FMA(WX_DW_LD(rp[ky + y] + (ix0 + j + kx) * cin), w[ky * 3 + kx], a[y][j]);
    for (int y = 0; y < WX_DW_ROWS; y++)
        for (int j = 0; j < WX_DW_PX; j++) WX_DW_ST(d + y * dstep + j * kc, WX_NAME(dw_act)(a[y][j], relu));
}

/* Output column ox of the R rows, one at a time (a column with taps
 * outside the input, or past the last whole block). */
WX_DW_INLINE void WX_NAME(dw3_rows_px)(const float *const *rp, int64_t ox, int64_t pw, int64_t W, int64_t cin,
                                       const WX_V *w, WX_V b, int relu, float *d, int64_t dstep, const bool tail,
                                       WX_M m) {
    const bool vy[3] = {true, true, true};
    for (int y = 0; y < WX_DW_ROWS; y++)
        WX_NAME(dw3_px_st)(rp + y, vy, ox - pw, W, cin, w, b, relu, d + y * dstep, tail, m);
}

/* The vector of channels at c (tail: the lanes in m) of the R whole rows
 * (ow pixels each, row y at d + y * ow * kc), input rows row[0 .. R + 1];
 * columns [lo, hi) have every tap inside the input. */
WX_DW_INLINE void WX_NAME(dw3_rows_channels)(const tp_conv_dw *dw, const float *const *row, int64_t cin, int64_t ow,
                                             int64_t lo, int64_t hi, int64_t p0, int64_t c, int64_t kc, float *d,
                                             const bool tail, WX_M m) {
    const int64_t W = dw->w, pw = dw->pw, dstep = ow * kc;
    const int relu = dw->relu;
    WX_V w[9];
    const WX_V b = WX_NAME(dw3_weights)(dw, cin, p0, c, w, tail, m);
    const float *rp[WX_DW_ROWS + 2];
    for (int k = 0; k < WX_DW_ROWS + 2; k++) rp[k] = row[k] + p0 + c;
    float *dc = d + c;
    int64_t ox = 0;
    for (; ox < lo; ox++) WX_NAME(dw3_rows_px)(rp, ox, pw, W, cin, w, b, relu, dc + ox * kc, dstep, tail, m);
    for (; ox + WX_DW_PX <= hi; ox += WX_DW_PX)
        WX_NAME(dw3_rows_block)(rp, ox - pw, cin, w, b, relu, dc + ox * kc, dstep, kc, tail, m);
    for (; ox < ow; ox++) WX_NAME(dw3_rows_px)(rp, ox, pw, W, cin, w, b, relu, dc + ox * kc, dstep, tail, m);
}

/* R whole output rows of one image, a 3x3 stride-1 kernel whose input rows
 * row[0 .. R + 1] all lie inside the input, channels [p0, p0 + kc), into
 * d (row stride kc). */
static void WX_NAME(dw3_rows)(const tp_conv_dw *dw, const float *const *row, int64_t cin, int64_t ow, int64_t p0,
                              int64_t kc, float *d) {
    const int64_t pw = dw->pw;
    int64_t lo = pw, hi = dw->w - 2 + pw; /* columns whose taps all lie inside */
    if (hi > ow) hi = ow;
    if (hi < lo) hi = lo;
    int64_t c = 0;
    for (; c + WX_W <= kc; c += WX_W)
        WX_NAME(dw3_rows_channels)(dw, row, cin, ow, lo, hi, p0, c, kc, d, false, WX_TAIL(0));
    if (c < kc) WX_NAME(dw3_rows_channels)(dw, row, cin, ow, lo, hi, p0, c, kc, d, true, WX_TAIL(kc - c));
}
#undef WX_DW_LD
#undef WX_DW_ST

/* Output pixels [ox0, ox0 + len) of output row oy of one image,
 * channels [p0, p0 + kc), into d (row stride kc). row[ky]: input row
 * oy * sh - ph + ky (NHWC, w x cin), for the kernel rows inside the
 * input. */
static void WX_NAME(dw_segment)(const tp_conv_dw *dw, const float *const *row, int64_t cin, int64_t oy, int64_t ox0,
                                int64_t len, int64_t p0, int64_t kc, float *d) {
    const int64_t H = dw->h, W = dw->w, KH = dw->kh, KW = dw->kw, sw = dw->sw, pw = dw->pw;
    const int64_t iy0 = oy * dw->sh - dw->ph, end = ox0 + len;
    const int64_t ky0 = iy0 < 0 ? -iy0 : 0, ky1 = H - iy0 < KH ? H - iy0 : KH;
    const float *wt = dw->weight + p0, *bias = dw->weight + KH * KW * cin + p0;
    /* output columns whose taps all lie inside the input: [lo, hi) */
    int64_t lo = (pw + sw - 1) / sw, hi = W - KW + pw >= 0 ? (W - KW + pw) / sw + 1 : 0;
    if (lo < ox0) lo = ox0;
    if (hi > end) hi = end;
    if (hi < lo) hi = lo;
    const int relu = dw->relu;
    int64_t c = 0;
    if (KH == 3 && KW == 3) {
        bool vy[3];
        for (int ky = 0; ky < 3; ky++) vy[ky] = ky >= ky0 && ky < ky1;
        for (; c + WX_W <= kc; c += WX_W)
            WX_NAME(dw3_channels)(dw, row, vy, cin, ox0, end, lo, hi, p0, c, kc, d, false, WX_TAIL(0));
        if (c < kc) {
            WX_NAME(dw3_channels)(dw, row, vy, cin, ox0, end, lo, hi, p0, c, kc, d, true, WX_TAIL(kc - c));
            c = kc;
        }
    }
    for (; c + WX_W <= kc; c += WX_W) { /* other kernels: the valid taps one by one */
        const WX_V b = WX_LD(bias + c);
        for (int64_t ox = ox0; ox < end; ox++) {
            const int64_t ix0 = ox * sw - pw;
            WX_V a = b;
            for (int64_t ky = ky0; ky < ky1; ky++) {
                const float *r = row[ky] + p0 + c;
                for (int64_t kx = 0; kx < KW; kx++) {
                    const int64_t ix = ix0 + kx;
                    if (ix < 0 || ix >= W) continue;
                    a = WX_FMA(WX_LD(r + ix * cin), WX_LD(wt + (ky * KW + kx) * cin + c), a);
                }
            }
            WX_ST(d + (ox - ox0) * kc + c, WX_NAME(dw_act)(a, relu));
        }
    }
    for (; c < kc; c++) {
        for (int64_t ox = ox0; ox < end; ox++) {
            const int64_t ix0 = ox * sw - pw;
            float a = bias[c];
            for (int64_t ky = ky0; ky < ky1; ky++) {
                const float *r = row[ky] + p0 + c;
                for (int64_t kx = 0; kx < KW; kx++) {
                    const int64_t ix = ix0 + kx;
                    if (ix < 0 || ix >= W) continue;
                    a = fmaf(r[ix * cin], wt[(ky * KW + kx) * cin + c], a);
                }
            }
            d[(ox - ox0) * kc + c] = tp__relu_mode(a, relu);
        }
    }
}

/* Row iy of image n of an expansion's output (tp_conv_dw.ex_cin; x its
 * input), from the ring in scratch (tp__conv_dw_scratch_bytes' layout: a
 * flag, the kh slots' tags, the row product's workspace, the kh rows),
 * computed into its slot unless the slot holds it. */
static const float *WX_NAME(dw_ex_row)(const tp_conv_dw *dw, const float *x, int64_t cin, int64_t n, int64_t iy,
                                       char *scratch) {
    int64_t *tags = (int64_t *)(scratch + 64);
    char *gws = scratch + TP_CONV_DW_RING_HEADER;
    float *ring = (float *)(gws + dw->ex_gemm_ws);
    const int64_t slot = iy % dw->kh, tag = n * dw->h + iy + 1;
    float *out = ring + slot * dw->w * cin;
    if (tags[slot] != tag) {
        const tp_gemm g = tp__conv_dw_ex_gemm(dw, cin, x + (n * dw->h + iy) * dw->w * dw->ex_cin, out);
        tp__gemm_run(&g, 0, 1, gws);
        tags[slot] = tag;
    }
    return out;
}

/* Rows [i0, i0 + rows) (output pixels, images of oh x ow in raster order)
 * x channels [p0, p0 + kc) of the depthwise output into dst (row stride
 * kc); x is the NHWC input (dw->h x dw->w x cin per image), or the
 * expansion's (x ex_cin) with scratch its ring. */
static void WX_NAME(dw_fill)(const tp_conv_dw *dw, const float *x, int64_t cin, int64_t oh, int64_t ow, int64_t i0,
                             int rows, int64_t p0, int64_t kc, float *dst, void *scratch) {
    const int64_t pix = oh * ow, end = i0 + rows, H = dw->h, KH = dw->kh;
    if (dw->ex_cin) {
        int64_t *flag = scratch;
        if (!*flag) { /* the run's first fill: the ring holds nothing yet */
            memset((char *)scratch + 64, 0, TP_CONV_DW_RING_HEADER - 64);
            *flag = 1;
        }
    }
    float *d = dst;
    const bool by_rows = !dw->ex_cin && KH == 3 && dw->kw == 3 && dw->sh == 1 && dw->sw == 1;
    for (int64_t i = i0; i < end;) {
        const int64_t n = i / pix, q = i % pix, oy = q / ow, ox0 = q % ow;
        int64_t len = ow - ox0;
        if (len > end - i) len = end - i;
        const int64_t iy0 = oy * dw->sh - dw->ph;
        const float *row[TP_CONV_DW_MAX_KH];
        /* WX_DW_ROWS whole rows whose input rows all lie inside the
         * input (dw3_rows: 3x3, stride 1, no expansion) */
        if (by_rows && ox0 == 0 && end - i >= WX_DW_ROWS * ow && oy + WX_DW_ROWS <= oh && iy0 >= 0 &&
            iy0 + WX_DW_ROWS + 2 <= H) {
            for (int64_t k = 0; k < WX_DW_ROWS + 2; k++) row[k] = x + ((n * H + iy0 + k) * dw->w) * cin;
            WX_NAME(dw3_rows)(dw, row, cin, ow, p0, kc, d);
            d += WX_DW_ROWS * ow * kc;
            i += WX_DW_ROWS * ow;
            continue;
        }
        for (int64_t ky = 0; ky < KH; ky++) {
            const int64_t iy = iy0 + ky;
            row[ky] = iy < 0 || iy >= H ? NULL
                      : dw->ex_cin      ? WX_NAME(dw_ex_row)(dw, x, cin, n, iy, scratch)
                                        : x + ((n * H + iy) * dw->w) * cin;
        }
        WX_NAME(dw_segment)(dw, row, cin, oy, ox0, len, p0, kc, d);
        d += len * kc;
        i += len;
    }
    if (dw->act) dw->act->apply(dw->act, dst, (int64_t)rows * kc);
}
