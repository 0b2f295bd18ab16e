/*
 * conv_nhwc_avx2.c - float32 convolution with a channels-last (NHWC) output as
 * an implicit GEMM on our GEMM (gemm.h): output pixels are the rows of C,
 * the weights, packed once, are B (K = KH*KW*Cin ordered kh, kw, c), and
 * A's rows are the input patches, gathered by the GEMM's a_fill callback
 * an L2-sized block at a time (im2col per K block: in NHWC each tap of a
 * pixel is a run of Cin contiguous floats). Bias, a summed residual and a
 * fused activation run in the GEMM epilogue.
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
 * Winograd F(2x2, 3x3) for 3x3 kernels with stride 1 (Lavin & Gray 2015):
 * each 2x2 output tile comes from a 4x4 input tile d as A^T [(G g G^T) .*
 * (B^T d B)] A. The weights are transformed once (U = G g G^T: 16 values
 * per input/output channel pair, packed as 16 GEMM B matrices of Cin x
 * Cout); per block of tiles the input tiles are transformed (V = B^T d B,
 * 16 matrices of tiles x Cin), multiplied (16 GEMMs, 2.25x fewer multiplies
 * than the direct form) and transformed back (A^T m A) with bias, residual
 * and activation. Blocks of tiles are fixed at plan time and split among
 * threads, so results do not depend on the thread count. The transforms'
 * constants are 0, +-1 and 1/2, so rounding stays within a few float32
 * ulps of the sums' magnitude.
 */
#include "conv_nhwc.h"

#include <string.h>

/* "no dependence between iterations": gcc honours restrict on local
 * pointers only partly and would not vectorise the transforms */
#if defined(__clang__)
#define TP_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define TP_IVDEP _Pragma("GCC ivdep")
#else
#define TP_IVDEP
#endif

/* Fill rows [i0, i0 + rows) x K columns [p0, p0 + kc) of the implicit A. */
static void conv_nhwc_fill(const void *ctx, int64_t i0, int rows, int64_t p0, int64_t kc, float *dst) {
    const tp_conv_nhwc_call *call = ctx;
    const tp_conv_nhwc *cv = call->conv;
    const int64_t cin = cv->cin, pix = cv->oh * cv->ow, hw = cv->h * cv->w;
    int64_t n = i0 / pix, q = i0 % pix;
    int64_t oh = q / cv->ow, ow = q % cv->ow;
    for (int i = 0; i < rows; i++) {
        float *d = dst + (int64_t)i * kc;
        const float *img = call->x + n * hw * cin;
        for (int64_t p = p0, end = p0 + kc; p < end;) {
            const int64_t tap = p / cin, c = p % cin, kw = tap % cv->kw;
            const int64_t ih = oh * cv->sh - cv->ph + (tap / cv->kw) * cv->dh;
            const int64_t iw = ow * cv->sw - cv->pw + kw * cv->dw;
            int64_t len = cin - c;
            if (ih < 0 || ih >= cv->h || iw < 0 || iw >= cv->w) {
                if (len > end - p) len = end - p;
                memset(d, 0, (size_t)len * sizeof(float));
            } else if (call->x_nhwc) {
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

bool tp__conv_nhwc_winograd_ok(const tp_conv_nhwc *cv) {
    return cv->kh == 3 && cv->kw == 3 && cv->sh == 1 && cv->sw == 1 && cv->dh == 1 && cv->dw == 1 &&
           cv->oh == cv->h + 2 * cv->ph - 2 && cv->ow == cv->w + 2 * cv->pw - 2;
}

static size_t round64(size_t b) { return (b + 63) & ~(size_t)63; }

/* cv->packed_bytes of 64-byte aligned packed weights (wbase, wpack), and a
 * temporary of tmp_floats floats to build them in; both NULL on failure. */
static tp_status alloc_packed(tp_conv_nhwc *cv, size_t tmp_floats, float **tmp) {
    *tmp = tp_malloc(tmp_floats * sizeof(float) + 1);
    cv->wbase = tp_malloc(cv->packed_bytes + 64);
    if (!*tmp || !cv->wbase) {
        tp_free(*tmp);
        tp_free(cv->wbase);
        *tmp = NULL;
        cv->wbase = NULL;
        return tp_error(TP_ERR_NOMEM, "out of memory packing convolution weights");
    }
    cv->wpack = (void *)(((uintptr_t)cv->wbase + 63) & ~(uintptr_t)63);
    return TP_OK;
}

static size_t winograd_thread_bytes(const tp_conv_nhwc *cv);

/* U = G g G^T for every (cin, cout) pair, packed as 16 B matrices. */
static tp_status winograd_init(tp_conv_nhwc *cv, int isa, const float *weight) {
    const int64_t cin = cv->cin, cout = cv->cout;
    cv->isa = isa;
    cv->k = cin;
    cv->tiles_h = (cv->oh + 1) / 2;
    cv->tiles_w = (cv->ow + 1) / 2;
    /* a block's transformed tiles (16 x tiles x (cin + cout) floats) in
     * about L2, 48 to 192 rows per GEMM; then evened out to a multiple of
     * the threads (each thread runs a contiguous range of blocks) as long
     * as blocks keep WINO_MIN_BLOCK tiles (else some threads get one block
     * more). Results do not depend on the block size: a GEMM row's
     * reduction order does not depend on the rows around it. */
    enum { WINO_MIN_BLOCK = 24 };
    const int64_t total = cv->n * cv->tiles_h * cv->tiles_w;
    int64_t tb = tp__gemm_cache_info().l2 / (16 * (cin + cout) * (int64_t)sizeof(float));
    if (tb < 48) tb = 48;
    if (tb > 192) tb = 192;
    const int64_t th = cv->threads < 1 ? 1 : cv->threads;
    int64_t nb = (total + tb - 1) / tb;
    nb = (nb + th - 1) / th * th;
    tb = (total + nb - 1) / nb;
    const int64_t floor_tb = total < WINO_MIN_BLOCK ? total : WINO_MIN_BLOCK;
    if (tb < floor_tb) tb = floor_tb;
    if (tb < 1) tb = 1;
    cv->tile_block = tb;
    cv->wino_stride = round64(tp__gemm_packed_b_bytes(isa, cin, cout));
    cv->packed_bytes = 16 * cv->wino_stride;
    float *u;
    TP_TRY(alloc_packed(cv, (size_t)(16 * cin * cout), &u));
    static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    for (int64_t c = 0; c < cin; c++)
        for (int64_t o = 0; o < cout; o++) { /* o innermost: the 16 writes run along memory */
            const float *g = weight + (o * cin + c) * 9;
            double t[4][3]; /* G g */
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 3; j++) t[i][j] = G[i][0] * g[j] + G[i][1] * g[3 + j] + G[i][2] * g[6 + j];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++)
                    u[((i * 4 + j) * cin + c) * cout + o] =
                        (float)(t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2]);
        }
    for (int x = 0; x < 16; x++)
        tp__gemm_pack_b(isa, cin, cout, u + x * cin * cout, cout, 1, (char *)cv->wpack + x * cv->wino_stride);
    tp_free(u);
    cv->thread_bytes = winograd_thread_bytes(cv);
    return TP_OK;
}

/* Per-thread workspace of the Winograd form: V (16 x tb x cin), M (16 x tb
 * x cout), a zero row (max(cin, cout)), a gathered tile for NCHW inputs
 * (16 x cin) that is also the output tile (4 x cout), and the GEMM's own
 * (none today: A is read in place and B is packed). */
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
    const size_t tb = (size_t)cv->tile_block, mx = (size_t)(cv->cin > cv->cout ? cv->cin : cv->cout);
    return round64(16 * tb * (size_t)cv->cin * sizeof(float)) + round64(16 * tb * (size_t)cv->cout * sizeof(float)) +
           round64(mx * sizeof(float)) + round64(16 * mx * sizeof(float)) + round64(tp__gemm_workspace_bytes(&g, 1));
}

/* V = B^T d B for each channel c of one tile: d[r*4+q] points at the cin
 * floats of input pixel (r, q), v + x*xs at matrix x's row. Straight-line
 * over c so that it vectorises. */
static void winograd_input_row(const float *const d[16], float *v, size_t xs, int64_t cin) {
    const float *restrict d0 = d[0], *restrict d1 = d[1], *restrict d2 = d[2], *restrict d3 = d[3];
    const float *restrict d4 = d[4], *restrict d5 = d[5], *restrict d6 = d[6], *restrict d7 = d[7];
    const float *restrict d8 = d[8], *restrict d9 = d[9], *restrict d10 = d[10], *restrict d11 = d[11];
    const float *restrict d12 = d[12], *restrict d13 = d[13], *restrict d14 = d[14], *restrict d15 = d[15];
    float *restrict v0 = v, *restrict v1 = v + xs, *restrict v2 = v + 2 * xs, *restrict v3 = v + 3 * xs;
    float *restrict v4 = v + 4 * xs, *restrict v5 = v + 5 * xs, *restrict v6 = v + 6 * xs, *restrict v7 = v + 7 * xs;
    float *restrict v8 = v + 8 * xs, *restrict v9 = v + 9 * xs, *restrict v10 = v + 10 * xs;
    float *restrict v11 = v + 11 * xs, *restrict v12 = v + 12 * xs, *restrict v13 = v + 13 * xs;
    float *restrict v14 = v + 14 * xs, *restrict v15 = v + 15 * xs;
    TP_IVDEP
    for (int64_t c = 0; c < cin; c++) {
        /* rows of B^T d */
        const float t00 = d0[c] - d8[c], t01 = d1[c] - d9[c], t02 = d2[c] - d10[c], t03 = d3[c] - d11[c];
        const float t10 = d4[c] + d8[c], t11 = d5[c] + d9[c], t12 = d6[c] + d10[c], t13 = d7[c] + d11[c];
        const float t20 = d8[c] - d4[c], t21 = d9[c] - d5[c], t22 = d10[c] - d6[c], t23 = d11[c] - d7[c];
        const float t30 = d4[c] - d12[c], t31 = d5[c] - d13[c], t32 = d6[c] - d14[c], t33 = d7[c] - d15[c];
        /* times B */
        v0[c] = t00 - t02, v1[c] = t01 + t02, v2[c] = t02 - t01, v3[c] = t01 - t03;
        v4[c] = t10 - t12, v5[c] = t11 + t12, v6[c] = t12 - t11, v7[c] = t11 - t13;
        v8[c] = t20 - t22, v9[c] = t21 + t22, v10[c] = t22 - t21, v11[c] = t21 - t23;
        v12[c] = t30 - t32, v13[c] = t31 + t32, v14[c] = t32 - t31, v15[c] = t31 - t33;
    }
}

/* Input tile t (n, ty, tx) -> V[x][row][0..cin) for the 16 x. */
static void winograd_input(const tp_conv_nhwc_call *call, int64_t t, float *v, int64_t row, int64_t tb,
                           const float *zeros, float *gather) {
    const tp_conv_nhwc *cv = call->conv;
    const int64_t cin = cv->cin, per = cv->tiles_h * cv->tiles_w;
    const int64_t n = t / per, ty = (t % per) / cv->tiles_w, tx = t % cv->tiles_w;
    const int64_t hw = cv->h * cv->w;
    const float *img = call->x + n * hw * cin;
    const float *d[16];
    for (int r = 0; r < 4; r++)
        for (int q = 0; q < 4; q++) {
            const int64_t ih = 2 * ty - cv->ph + r, iw = 2 * tx - cv->pw + q;
            if (ih < 0 || ih >= cv->h || iw < 0 || iw >= cv->w) {
                d[r * 4 + q] = zeros;
            } else if (call->x_nhwc) {
                d[r * 4 + q] = img + (ih * cv->w + iw) * cin;
            } else {
                float *gp = gather + (r * 4 + q) * cin;
                const float *sp = img + ih * cv->w + iw;
                for (int64_t c = 0; c < cin; c++) gp[c] = sp[c * hw];
                d[r * 4 + q] = gp;
            }
        }
    float *o = v + row * cin;
    const size_t xs = (size_t)(tb * cin); /* floats between the 16 matrices */
    winograd_input_row(d, o, xs, cin);
}

/* M[x][row][0..cout) of tile t -> its (up to) 2x2 outputs, with bias,
 * residual and activation. */
static void winograd_output(const tp_conv_nhwc_call *call, int64_t t, const float *m, int64_t row, int64_t tb,
                            const float *zeros, float *tmp) {
    const tp_conv_nhwc *cv = call->conv;
    const int64_t cout = cv->cout, per = cv->tiles_h * cv->tiles_w;
    const int64_t n = t / per, ty = (t % per) / cv->tiles_w, tx = t % cv->tiles_w;
    const size_t xs = (size_t)(tb * cout);
    const float *mm = m + row * cout;
    float *dst[4] = {NULL, NULL, NULL, NULL};
    const float *res[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            const int64_t oh = 2 * ty + i, ow = 2 * tx + j;
            if (oh >= cv->oh || ow >= cv->ow) continue;
            const int64_t px = (n * cv->oh + oh) * cv->ow + ow;
            dst[i * 2 + j] = call->y + px * cout;
            if (call->res) res[i * 2 + j] = call->res + px * cout;
        }
    /* A^T m A, all four outputs of the tile for every channel into tmp */
    float *restrict t0 = tmp, *restrict t1 = tmp + cout, *restrict t2 = tmp + 2 * cout, *restrict t3 = tmp + 3 * cout;
    const float *restrict m0 = mm, *restrict m1 = mm + xs, *restrict m2 = mm + 2 * xs, *restrict m3 = mm + 3 * xs;
    const float *restrict m4 = mm + 4 * xs, *restrict m5 = mm + 5 * xs, *restrict m6 = mm + 6 * xs;
    const float *restrict m7 = mm + 7 * xs, *restrict m8 = mm + 8 * xs, *restrict m9 = mm + 9 * xs;
    const float *restrict m10 = mm + 10 * xs, *restrict m11 = mm + 11 * xs, *restrict m12 = mm + 12 * xs;
    const float *restrict m13 = mm + 13 * xs, *restrict m14 = mm + 14 * xs, *restrict m15 = mm + 15 * xs;
    const float *restrict bias = cv->bias ? cv->bias : zeros;
    TP_IVDEP
    for (int64_t k = 0; k < cout; k++) {
        const float s00 = m0[k] + m4[k] + m8[k], s01 = m1[k] + m5[k] + m9[k];
        const float s02 = m2[k] + m6[k] + m10[k], s03 = m3[k] + m7[k] + m11[k];
        const float s10 = m4[k] - m8[k] - m12[k], s11 = m5[k] - m9[k] - m13[k];
        const float s12 = m6[k] - m10[k] - m14[k], s13 = m7[k] - m11[k] - m15[k];
        t0[k] = s00 + s01 + s02 + bias[k];
        t1[k] = s01 - s02 - s03 + bias[k];
        t2[k] = s10 + s11 + s12 + bias[k];
        t3[k] = s11 - s12 - s13 + bias[k];
    }
    for (int p = 0; p < 4; p++) {
        if (!dst[p]) continue;
        const float *src = tmp + p * cout;
        if (res[p]) {
            const float *r = res[p];
            float *o = dst[p];
            for (int64_t k = 0; k < cout; k++) o[k] = src[k] + r[k];
        } else {
            memcpy(dst[p], src, (size_t)cout * sizeof(float));
        }
    }
    if (cv->act)
        for (int p = 0; p < 4; p++)
            if (dst[p]) cv->act->apply(cv->act, dst[p], cout);
}

static void winograd_run(const tp_conv_nhwc_call *call, int ith, int nth, void *workspace) {
    const tp_conv_nhwc *cv = call->conv;
    const int64_t tb = cv->tile_block, cin = cv->cin, cout = cv->cout;
    char *ws = (char *)workspace + (size_t)ith * cv->thread_bytes;
    float *v = (float *)ws;
    float *m = (float *)(ws + round64(16 * (size_t)tb * (size_t)cin * sizeof(float)));
    const size_t mx = (size_t)(cin > cout ? cin : cout);
    float *zeros = (float *)((char *)m + round64(16 * (size_t)tb * (size_t)cout * sizeof(float)));
    float *gather = (float *)((char *)zeros + round64(mx * sizeof(float)));
    void *gws = (char *)gather + round64(16 * mx * sizeof(float));
    memset(zeros, 0, mx * sizeof(float));
    const int64_t total = cv->n * cv->tiles_h * cv->tiles_w, blocks = (total + tb - 1) / tb;
    const int64_t b0 = blocks * ith / nth, b1 = blocks * (ith + 1) / nth;
    for (int64_t blk = b0; blk < b1; blk++) {
        const int64_t t0 = blk * tb, rows = total - t0 < tb ? total - t0 : tb;
        for (int64_t r = 0; r < rows; r++) winograd_input(call, t0 + r, v, r, tb, zeros, gather);
        for (int x = 0; x < 16; x++) {
            tp_gemm g;
            memset(&g, 0, sizeof g);
            g.isa = cv->isa;
            g.m = rows;
            g.n = cout;
            g.k = cin;
            g.a = v + (size_t)x * (size_t)(tb * cin);
            g.rs_a = cin;
            g.cs_a = 1;
            g.packed_b = (const char *)cv->wpack + (size_t)x * cv->wino_stride;
            g.c = m + (size_t)x * (size_t)(tb * cout);
            g.ldc = cout;
            g.ep = tp__gemm_epilogue_default();
            tp__gemm_run(&g, 0, 1, gws);
        }
        for (int64_t r = 0; r < rows; r++) winograd_output(call, t0 + r, m, r, tb, zeros, gather);
    }
}

tp_status tp__conv_nhwc_init(tp_conv_nhwc *cv, int isa, const float *weight) {
    if (cv->winograd) return winograd_init(cv, isa, weight);
    const int64_t taps = cv->kh * cv->kw, k = taps * cv->cin;
    cv->isa = isa;
    cv->k = k;
    cv->packed_bytes = tp__gemm_packed_b_bytes(isa, k, cv->cout);
    float *b;
    TP_TRY(alloc_packed(cv, (size_t)(k * cv->cout), &b));
    /* B (p = tap * cin + c, o) = weight[o][c][tap] (OIHW; conv1d's OIK is OI1K) */
    for (int64_t t = 0; t < taps; t++)
        for (int64_t c = 0; c < cv->cin; c++)
            for (int64_t o = 0; o < cv->cout; o++) b[(t * cv->cin + c) * cv->cout + o] = weight[(o * cv->cin + c) * taps + t];
    tp__gemm_pack_b(isa, k, cv->cout, b, cv->cout, 1, cv->wpack);
    tp_free(b);
    return TP_OK;
}

void tp__conv_nhwc_free(tp_conv_nhwc *cv) {
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
    g.k = cv->k;
    g.a_fill = conv_nhwc_fill;
    g.a_ctx = call;
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
    }
    return g;
}

size_t tp__conv_nhwc_workspace(const tp_conv_nhwc *cv, int nth) {
    if (cv->winograd) return (size_t)(nth < 1 ? 1 : nth) * cv->thread_bytes;
    tp_gemm g = conv_nhwc_gemm(cv, NULL);
    return tp__gemm_workspace_bytes(&g, nth);
}

void tp__conv_nhwc_run(const tp_conv_nhwc_call *call, int ith, int nth, void *workspace) {
    if (call->conv->winograd) {
        winograd_run(call, ith, nth, workspace);
        return;
    }
    tp_gemm g = conv_nhwc_gemm(call->conv, call);
    tp__gemm_run(&g, ith, nth, workspace);
}
