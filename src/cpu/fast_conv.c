/*
 * fast_conv.c - fast variants (contract v2) of float32 conv1d / conv2d:
 * implicit GEMM over cache-sized pixel tiles, and a direct depthwise
 * kernel.
 *
 * For each image, group and tile of pixels, out[co][q] = sum_k W[co][k] *
 * col[k][q] (K = Cin/G * KH * KW), written straight into NCHW. Tiles are
 * at most TILE pixels so the im2col block stays in L2 (the weight panel is
 * re-packed per tile: 1/TILE of the arithmetic); a thread owns whole tiles
 * and builds their im2col block in its own workspace slice: threads need
 * no barrier and every output element is reduced in the same order
 * whatever the thread count. A 1x1 convolution with stride 1 and no
 * padding reads the input directly (no im2col). Bias, a fused residual and
 * a fused activation run in the GEMM epilogue.
 * Depthwise convolutions (groups == Cin == Cout) run a direct loop per
 * channel instead, split over channels.
 * bfloat16 / float16 convolutions with constant weights take the im2col
 * path (or the depthwise loop on a widened plane) on widened values:
 * weights and bias widened once at plan time, im2col widening the input as
 * it gathers, each tile's (plane's) float32 result rounded once into the
 * output (half.h), as PyTorch computes these dtypes; they take a following
 * residual add and relu / relu6 only (conv_fuse16). 16-bit 3x3 stride-1
 * convolutions with enough tiles run Winograd instead (conv_nhwc.h,
 * wino16_wanted), depthwise ones 16 channels at a time at AVX-512
 * (prepare_dw16).
 */
#include "conv_nhwc.h"
#include "eltwise.h"
#include "fast.h"
#include "gemm.h"
#include "gemm_bf16.h"
#include "half.h"
#include "kernel_util.h"

typedef struct conv_plan {
    int isa;
    int64_t n, cin, h, w;       /* input */
    int64_t cout, oh, ow;       /* output */
    int64_t kh, kw, sh, sw, ph, pw, dh, dw, groups;
    int64_t in_s[4];            /* input strides (elements) */
    int64_t k;                  /* Cin/G * KH * KW */
    int64_t tile;               /* pixels per tile */
    int64_t tiles_per_image;
    bool direct;                /* 1x1, stride 1, no padding, contiguous pixels */
    bool depthwise;
    int64_t int_lo, int_hi;     /* depthwise: output columns whose kw taps are all inside */
    bool has_bias;
    int ires;                   /* fused residual (index into in[]), -1 none */
    const float *weight;        /* the weight when constant (borrowed from the plan's constant) */
    const float *bias_const;    /* the bias when constant */
    float *wfold, *bfold;       /* weight and bias with a batch norm folded in (owned), or NULL */
    const tp_op_plan *act;      /* fused activation, NULL none */
    size_t ws_thread;           /* bytes per thread: im2col tile + GEMM workspace (+ a 16-bit plan's C tile) */
    size_t col_bytes;
    int half;                   /* TP_HALF_* of a 16-bit plan (input and output), -1: float32 */
    size_t c_bytes;             /* 16-bit: the float32 C tile (dot16: the packed im2col tile) */
    bool dot16;                 /* bfloat16 on vdpbf16ps (gemm_bf16.h): w16 the weight as it is */
    const uint16_t *w16;
    tp_conv_nhwc *wino;         /* 16-bit 3x3 stride 1: Winograd on widened values (owned), or NULL */
    tp_dw16 *dw16;              /* 16-bit depthwise, 16 channels at a time (owned, with its weights), or NULL */
    int relu16;                 /* 16-bit: a fused relu (1) or relu6 / clamp(0, 6) (2), conv_fuse16 */
    size_t act_bytes;           /* conv_run_half: a widened row of the tile (a fused residual), ending ws_thread */
} conv_plan;

/* im2col of pixels [p0, p0 + np) of one image and group (in points at the
 * group's first channel): col[kk * np + q] for taps kk = (c, i, j). Works
 * row by row: each output row's span of valid input columns is found once,
 * then copied (memcpy at stride 1) with zeros for the padding. */
static void im2col(const conv_plan *cp, const void *in, int64_t p0, int64_t np, void *col, bool raw16) {
    /* elements: float32 in and out; a 16-bit input widened to float32; or
     * (raw16) a 16-bit input's bits copied, for the bfloat16 GEMM */
    const bool widen = cp->half >= 0 && !raw16;
    const size_t ei = cp->half >= 0 ? 2 : 4, eo = raw16 ? 2 : 4;
    int64_t cg = cp->cin / cp->groups, ow = cp->ow;
    for (int64_t c = 0; c < cg; c++)
        for (int64_t i = 0; i < cp->kh; i++)
            for (int64_t j = 0; j < cp->kw; j++) {
                char *dst = (char *)col + (size_t)(((c * cp->kh + i) * cp->kw + j) * np) * eo;
                const char *src = (const char *)in + (size_t)(c * cp->in_s[1]) * ei;
                int64_t off = j * cp->dw - cp->pw; /* input column of output column 0 */
                /* output columns whose input column is inside [0, w) */
                /* ceil(-off / sw) without overflow for huge strides */
                int64_t lo = off < 0 ? (-off - 1) / cp->sw + 1 : 0;
                int64_t hi = cp->w - 1 - off < 0 ? 0 : (cp->w - 1 - off) / cp->sw + 1;
                if (hi > ow) hi = ow;
                if (lo > hi) lo = hi;
                int64_t q = 0, p = p0;
                while (q < np) {
                    int64_t oy = p / ow, ox0 = p % ow;
                    int64_t run = ow - ox0 < np - q ? ow - ox0 : np - q; /* this row's part of the tile */
                    int64_t yy = oy * cp->sh - cp->ph + i * cp->dh;
                    char *d = dst + (q - ox0) * (int64_t)eo; /* element ox at d + ox * eo, ox in [ox0, ox0 + run) */
                    int64_t a = ox0, b = ox0 + run;
                    if (yy < 0 || yy >= cp->h) {
                        memset(d + a * (int64_t)eo, 0, (size_t)run * eo);
                    } else {
                        int64_t l = lo < a ? a : lo > b ? b : lo, r = hi > b ? b : hi < l ? l : hi;
                        if (l > a) memset(d + a * (int64_t)eo, 0, (size_t)(l - a) * eo);
                        const char *srow = src + yy * cp->in_s[2] * (int64_t)ei;
                        if (cp->sw == 1 && cp->in_s[3] == 1) {
                            if (r > l && widen)
                                tp__half_widen((const uint16_t *)srow + l + off, r - l, cp->half, (float *)d + l);
                            else if (r > l)
                                memcpy(d + l * (int64_t)eo, srow + (l + off) * (int64_t)ei, (size_t)(r - l) * eo);
                        } else {
                            for (int64_t ox = l; ox < r; ox++) {
                                const char *e = srow + (ox * cp->sw + off) * cp->in_s[3] * (int64_t)ei;
                                if (widen) ((float *)d)[ox] = tp__half_to_f32(*(const uint16_t *)e, cp->half);
                                else memcpy(d + ox * (int64_t)eo, e, eo);
                            }
                        }
                        if (b > r) memset(d + r * (int64_t)eo, 0, (size_t)(b - r) * eo);
                    }
                    q += run;
                    p += run;
                }
            }
}

/* Work item `it` of the tiled convolutions: image, group, first pixel and
 * pixel count of its tile. */
static void tile_at(const conv_plan *cp, int64_t it, int64_t *img, int64_t *g, int64_t *p0, int64_t *np) {
    const int64_t pix = cp->oh * cp->ow, t = it % cp->tiles_per_image, rest = it / cp->tiles_per_image;
    *g = rest % cp->groups;
    *img = rest / cp->groups;
    *p0 = t * cp->tile;
    *np = pix - *p0 < cp->tile ? pix - *p0 : cp->tile;
}

static tp_status conv_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const conv_plan *cp = plan->data;
    const float *x = (const float *)tp__tensor_base(in[0]);
    const float *wt = cp->wfold ? cp->wfold : (const float *)tp__tensor_base(in[1]);
    const float *bias = cp->wfold ? cp->bfold : cp->has_bias ? (const float *)tp__tensor_base(in[2]) : NULL;
    const float *res = cp->ires >= 0 ? (const float *)tp__tensor_base(in[cp->ires]) : NULL;
    float *y = (float *)tp__tensor_base(out[0]);
    int64_t pix = cp->oh * cp->ow, cg_out = cp->cout / cp->groups, cg_in = cp->cin / cp->groups;
    int64_t items = cp->n * cp->groups * cp->tiles_per_image;
    char *ws = (char *)ex->workspace + (size_t)ex->ith * cp->ws_thread;
    float *col = (float *)ws;
    void *gws = ws + cp->col_bytes;
    for (int64_t it = ex->ith; it < items; it += ex->nth) {
        int64_t img, g, p0, np;
        tile_at(cp, it, &img, &g, &p0, &np);
        const float *xin = x + img * cp->in_s[0] + g * cg_in * cp->in_s[1];
        /* out[co][q] = sum_k W[co][k] * col[k][q], written straight into NCHW */
        tp_gemm gm = {.isa = cp->isa, .m = cg_out, .n = np, .k = cp->k};
        gm.a = wt + g * cg_out * cp->k;
        gm.rs_a = cp->k;
        gm.cs_a = 1;
        if (cp->direct) {
            gm.b = xin + p0;
            gm.rs_b = cp->in_s[1];
        } else {
            im2col(cp, xin, p0, np, col, false);
            gm.b = col;
            gm.rs_b = np;
        }
        gm.cs_b = 1;
        int64_t plane = (img * cp->cout + g * cg_out) * pix + p0;
        gm.c = y + plane;
        gm.ldc = pix;
        gm.ep = tp__gemm_epilogue_default();
        if (bias) {
            gm.ep.bias = bias + g * cg_out;
            gm.ep.bias_per_row = true;
        }
        if (res) {
            gm.ep.residual = res + plane;
            gm.ep.ld_residual = pix;
        }
        if (cp->act) {
            gm.ep.act = tp__fused_act;
            gm.ep.act_ctx = cp->act;
            gm.ep.act_relu = tp__fused_relu_mode(cp->act);
        }
        tp__gemm_run(&gm, 0, 1, gws);
    }
    return TP_OK;
}

/* 16-bit: conv_run's tiles on widened values, each tile's float32 C
 * (in the thread's workspace) rounded into the output. */
static tp_status conv_run_half(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const conv_plan *cp = plan->data;
    const uint16_t *x = (const uint16_t *)tp__tensor_base(in[0]);
    uint16_t *y = (uint16_t *)tp__tensor_base(out[0]);
    int64_t pix = cp->oh * cp->ow, cg_out = cp->cout / cp->groups, cg_in = cp->cin / cp->groups;
    int64_t items = cp->n * cp->groups * cp->tiles_per_image;
    char *ws = (char *)ex->workspace + (size_t)ex->ith * cp->ws_thread;
    float *col = (float *)ws, *c32 = (float *)(ws + cp->col_bytes);
    void *gws = ws + cp->col_bytes + cp->c_bytes;
    for (int64_t it = ex->ith; it < items; it += ex->nth) {
        int64_t img, g, p0, np;
        tile_at(cp, it, &img, &g, &p0, &np);
        im2col(cp, x + img * cp->in_s[0] + g * cg_in * cp->in_s[1], p0, np, col, false);
        tp_gemm gm = {.isa = cp->isa, .m = cg_out, .n = np, .k = cp->k, .a = cp->wfold + g * cg_out * cp->k,
                      .rs_a = cp->k, .cs_a = 1, .b = col, .rs_b = np, .cs_b = 1, .c = c32, .ldc = np};
        gm.ep = tp__gemm_epilogue_default();
        if (cp->has_bias) {
            gm.ep.bias = cp->bfold + g * cg_out;
            gm.ep.bias_per_row = true;
        }
        tp__gemm_run(&gm, 0, 1, gws);
        int64_t plane = (img * cp->cout + g * cg_out) * pix + p0;
        if (cp->ires >= 0) { /* a fused residual: the rounded result plus it, rounded (conv_fuse16) */
            const uint16_t *res = (const uint16_t *)tp__tensor_base(in[cp->ires]) + plane;
            float *row = (float *)(ws + cp->ws_thread - cp->act_bytes);
            for (int64_t co = 0; co < cg_out; co++) {
                float *c = c32 + co * np;
                uint16_t *yr = y + plane + co * pix;
                tp__half_round(c, np, cp->half, yr);
                tp__half_widen(yr, np, cp->half, c);
                tp__half_widen(res + co * pix, np, cp->half, row);
                for (int64_t q = 0; q < np; q++) c[q] += row[q];
            }
        }
        tp__relu_mode_apply(cp->relu16, c32, cg_out * np);
        for (int64_t co = 0; co < cg_out; co++) tp__half_round(c32 + co * np, np, cp->half, y + plane + co * pix);
    }
    return TP_OK;
}

/* bfloat16 on AVX-512-BF16: each tile's im2col gathered as bfloat16 bits,
 * packed in pairs, and multiplied by the weight as it is (rows of K
 * contiguous) with vdpbf16ps, bias per output channel, the tiles rounded
 * from registers straight into the NCHW output. */
static tp_status conv_run_dot16(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const conv_plan *cp = plan->data;
    const uint16_t *x = (const uint16_t *)tp__tensor_base(in[0]);
    uint16_t *y = (uint16_t *)tp__tensor_base(out[0]);
    int64_t pix = cp->oh * cp->ow, cg_out = cp->cout / cp->groups, cg_in = cp->cin / cp->groups;
    int64_t items = cp->n * cp->groups * cp->tiles_per_image;
    char *ws = (char *)ex->workspace + (size_t)ex->ith * cp->ws_thread;
    uint16_t *col = (uint16_t *)ws;
    void *packed = ws + cp->col_bytes, *gws = ws + cp->col_bytes + cp->c_bytes;
    for (int64_t it = ex->ith; it < items; it += ex->nth) {
        int64_t img, g, p0, np;
        tile_at(cp, it, &img, &g, &p0, &np);
        im2col(cp, x + img * cp->in_s[0] + g * cg_in * cp->in_s[1], p0, np, col, true);
        tp__gemm_bf16_pack_b(cp->k, np, col, np, 1, packed);
        tp_gemm_bf16 gm = {.m = cg_out, .n = np, .k = cp->k, .a = cp->w16 + g * cg_out * cp->k, .rs_a = cp->k,
                           .cs_a = 1, .packed_b = packed, .c = y + (img * cp->cout + g * cg_out) * pix + p0,
                           .ldc = pix, .alpha = 1.0f, .bias = cp->has_bias ? cp->bfold + g * cg_out : NULL,
                           .bias_per_row = true, .relu = cp->relu16};
        if (cp->ires >= 0) { /* a fused residual, in the GEMM's registers */
            gm.res = (const uint16_t *)tp__tensor_base(in[cp->ires]) + (gm.c - y);
            gm.ld_res = pix;
        }
        tp__gemm_bf16_run(&gm, 0, 1, gws);
    }
    return TP_OK;
}

/* The depthwise row loops, inlined into each build of dw_plane. */
#define TP_DW_INLINE static inline __attribute__((always_inline))

/* One kernel tap over an output row: row[ox] += kv * src[ox] (no aliasing). */
TP_DW_INLINE void tap_row(float *restrict row, const float *restrict src, int64_t lo, int64_t hi, float kv) {
    for (int64_t ox = lo; ox < hi; ox++) row[ox] += kv * src[ox];
}
TP_DW_INLINE void tap_row_strided(float *restrict row, const float *restrict src, int64_t lo, int64_t hi, float kv,
                            int64_t sw, int64_t off, int64_t sx) {
    for (int64_t ox = lo; ox < hi; ox++) row[ox] += kv * src[(ox * sw + off) * sx];
}

/* 3x3 depthwise, interior columns [lo, hi) of one output row: every tap
 * inside the input (off0: input column of output column 0, tap 0). */
TP_DW_INLINE void dw3x3_row(float *restrict row, const float *restrict r0, const float *restrict r1,
                      const float *restrict r2, const float *k, int64_t lo, int64_t hi, int64_t sw, int64_t dw,
                      int64_t off0, float b) {
    float k0 = k[0], k1 = k[1], k2 = k[2], k3 = k[3], k4 = k[4], k5 = k[5], k6 = k[6], k7 = k[7], k8 = k[8];
    if (sw == 1 && dw == 1) {
        for (int64_t ox = lo; ox < hi; ox++) {
            int64_t x = ox + off0;
            row[ox] = b + k0 * r0[x] + k1 * r0[x + 1] + k2 * r0[x + 2] + k3 * r1[x] + k4 * r1[x + 1] + k5 * r1[x + 2] +
                      k6 * r2[x] + k7 * r2[x + 1] + k8 * r2[x + 2];
        }
        return;
    }
    for (int64_t ox = lo; ox < hi; ox++) {
        int64_t x = ox * sw + off0;
        row[ox] = b + k0 * r0[x] + k1 * r0[x + dw] + k2 * r0[x + 2 * dw] + k3 * r1[x] + k4 * r1[x + dw] +
                  k5 * r1[x + 2 * dw] + k6 * r2[x] + k7 * r2[x + dw] + k8 * r2[x + 2 * dw];
    }
}

/* 5x5 depthwise, interior columns (rows r0 + i * rs). */
TP_DW_INLINE void dw5x5_row(float *restrict row, const float *restrict r0, int64_t rs, const float *k, int64_t lo, int64_t hi,
                      int64_t sw, int64_t dw, int64_t off0, float b) {
    if (sw == 1 && dw == 1) { /* contiguous taps: vectorised along the row, taps in registers */
        const float *r1 = r0 + rs, *r2 = r1 + rs, *r3 = r2 + rs, *r4 = r3 + rs;
        for (int64_t ox = lo; ox < hi; ox++) {
            int64_t x = ox + off0;
            float a0 = k[0] * r0[x] + k[1] * r0[x + 1] + k[2] * r0[x + 2] + k[3] * r0[x + 3] + k[4] * r0[x + 4];
            float a1 = k[5] * r1[x] + k[6] * r1[x + 1] + k[7] * r1[x + 2] + k[8] * r1[x + 3] + k[9] * r1[x + 4];
            float a2 = k[10] * r2[x] + k[11] * r2[x + 1] + k[12] * r2[x + 2] + k[13] * r2[x + 3] + k[14] * r2[x + 4];
            float a3 = k[15] * r3[x] + k[16] * r3[x + 1] + k[17] * r3[x + 2] + k[18] * r3[x + 3] + k[19] * r3[x + 4];
            float a4 = k[20] * r4[x] + k[21] * r4[x + 1] + k[22] * r4[x + 2] + k[23] * r4[x + 3] + k[24] * r4[x + 4];
            row[ox] = b + a0 + a1 + a2 + a3 + a4;
        }
        return;
    }
    for (int64_t ox = lo; ox < hi; ox++) {
        int64_t x = ox * sw + off0;
        float acc = b;
        for (int i = 0; i < 5; i++) {
            const float *r = r0 + i * rs + x;
            const float *kk = k + i * 5;
            acc += kk[0] * r[0] + kk[1] * r[dw] + kk[2] * r[2 * dw] + kk[3] * r[3 * dw] + kk[4] * r[4 * dw];
        }
        row[ox] = acc;
    }
}

/* The columns outside [int_lo, int_hi) of a row whose kh input rows are inside. */
TP_DW_INLINE void dw_edges(const conv_plan *cp, float *row, const float *src, const float *k, int64_t oy, float b) {
    int64_t y0 = oy * cp->sh - cp->ph;
    for (int64_t ox = 0; ox < cp->ow; ox++) {
        if (ox == cp->int_lo) ox = cp->int_hi;
        if (ox >= cp->ow) break;
        float acc = b;
        for (int64_t i = 0; i < cp->kh; i++) {
            const float *srow = src + (y0 + i * cp->dh) * cp->in_s[2];
            for (int64_t j = 0; j < cp->kw; j++) {
                int64_t xx = ox * cp->sw - cp->pw + j * cp->dw;
                if (xx >= 0 && xx < cp->w) acc += k[i * cp->kw + j] * srow[xx];
            }
        }
        row[ox] = acc;
    }
}

/* Depthwise, one channel's plane: src its input plane (cp's strides), k its
 * kernel, b its bias; dst the output plane (oh x ow, contiguous). Built
 * twice: for the baseline and, on x86, with AVX2 (dw_plane picks by the
 * plan's ISA). The row loops vectorise along the row; without FMA
 * contraction (ISO C) both give the same bits. Zen 4, bfloat16
 * MobileNetV2's 17 depthwise convolutions (widened planes), one thread:
 * 5.40 -> 4.96-5.23 ms (its 7x7 and 14x14 planes' rows are short: the
 * edges and the stride-2 gathers stay scalar). */
TP_DW_INLINE void dw_plane_body(const conv_plan *cp, const float *src, const float *k, float b, float *dst) {
    for (int64_t oy = 0; oy < cp->oh; oy++) {
        float *row = dst + oy * cp->ow;
        if ((cp->kh == 3 || cp->kh == 5) && cp->kw == cp->kh && cp->in_s[3] == 1 && cp->int_hi > cp->int_lo) {
            int64_t y0 = oy * cp->sh - cp->ph;
            if (y0 >= 0 && y0 + (cp->kh - 1) * cp->dh < cp->h) {
                /* all rows inside: registers accumulate the taps of the interior columns */
                const float *r0 = src + y0 * cp->in_s[2];
                int64_t rs = cp->dh * cp->in_s[2];
                if (cp->kh == 3) dw3x3_row(row, r0, r0 + rs, r0 + 2 * rs, k, cp->int_lo, cp->int_hi, cp->sw, cp->dw, -cp->pw, b);
                else dw5x5_row(row, r0, rs, k, cp->int_lo, cp->int_hi, cp->sw, cp->dw, -cp->pw, b);
                dw_edges(cp, row, src, k, oy, b);
                continue;
            }
        }
        for (int64_t ox = 0; ox < cp->ow; ox++) row[ox] = b;
        for (int64_t i = 0; i < cp->kh; i++) {
            int64_t yy = oy * cp->sh - cp->ph + i * cp->dh;
            if (yy < 0 || yy >= cp->h) continue;
            const float *srow = src + yy * cp->in_s[2];
            for (int64_t j = 0; j < cp->kw; j++) {
                float kv = k[i * cp->kw + j];
                /* output columns whose input column is inside */
                int64_t off = j * cp->dw - cp->pw;
                /* ceil(-off / sw) without overflow for huge strides */
                int64_t lo = off < 0 ? (-off - 1) / cp->sw + 1 : 0;
                int64_t hi = (cp->w - 1 - off) < 0 ? 0 : (cp->w - 1 - off) / cp->sw + 1;
                if (hi > cp->ow) hi = cp->ow;
                if (cp->sw == 1 && cp->in_s[3] == 1) tap_row(row, srow + off, lo, hi, kv);
                else tap_row_strided(row, srow, lo, hi, kv, cp->sw, off, cp->in_s[3]);
            }
        }
    }
}

static void dw_plane_base(const conv_plan *cp, const float *src, const float *k, float b, float *dst) {
    dw_plane_body(cp, src, k, b, dst);
}
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2"))) static void dw_plane_avx2(const conv_plan *cp, const float *src, const float *k,
                                                           float b, float *dst) {
    dw_plane_body(cp, src, k, b, dst);
}
#define TP_DW_AVX2 1
#else
#define TP_DW_AVX2 0
#endif

static void dw_plane(const conv_plan *cp, const float *src, const float *k, float b, float *dst) {
#if TP_DW_AVX2
    if (cp->isa >= TP_ISA_AVX2) {
        dw_plane_avx2(cp, src, k, b, dst);
        return;
    }
#endif
    dw_plane_base(cp, src, k, b, dst);
}

/* Depthwise: one output channel per input channel. */
static tp_status depthwise_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out,
                               const tp_exec *ex) {
    const conv_plan *cp = plan->data;
    const float *x = (const float *)tp__tensor_base(in[0]);
    const float *wt = cp->wfold ? cp->wfold : (const float *)tp__tensor_base(in[1]);
    const float *bias = cp->wfold ? cp->bfold : cp->has_bias ? (const float *)tp__tensor_base(in[2]) : NULL;
    const float *res = cp->ires >= 0 ? (const float *)tp__tensor_base(in[cp->ires]) : NULL;
    float *y = (float *)tp__tensor_base(out[0]);
    int64_t items = cp->n * cp->cout;
    for (int64_t it = ex->ith; it < items; it += ex->nth) {
        int64_t c = it % cp->cout, img = it / cp->cout;
        float *dst = y + it * cp->oh * cp->ow;
        dw_plane(cp, x + img * cp->in_s[0] + c * cp->in_s[1], wt + c * cp->kh * cp->kw, bias ? bias[c] : 0.0f, dst);
        int64_t np = cp->oh * cp->ow;
        if (res)
            for (int64_t q = 0; q < np; q++) dst[q] += res[it * np + q];
        if (cp->act) cp->act->apply(cp->act, dst, np);
    }
    return TP_OK;
}

/* 16-bit depthwise: each input plane widened into the thread's workspace
 * (then read with contiguous strides), the float32 output plane rounded. */
static tp_status depthwise_run_half(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out,
                                    const tp_exec *ex) {
    const conv_plan *cp = plan->data;
    conv_plan flat = *cp; /* the widened plane's strides */
    flat.in_s[2] = cp->w;
    flat.in_s[3] = 1;
    const uint16_t *x = (const uint16_t *)tp__tensor_base(in[0]);
    uint16_t *y = (uint16_t *)tp__tensor_base(out[0]);
    const int64_t np = cp->oh * cp->ow, items = cp->n * cp->cout;
    float *xin = (float *)((char *)ex->workspace + (size_t)ex->ith * cp->ws_thread);
    float *dst = (float *)((char *)xin + cp->col_bytes);
    for (int64_t it = ex->ith; it < items; it += ex->nth) {
        int64_t c = it % cp->cout, img = it / cp->cout;
        const uint16_t *src = x + img * cp->in_s[0] + c * cp->in_s[1];
        for (int64_t r = 0; r < cp->h; r++) /* rows of the plane, any strides */
            if (cp->in_s[3] == 1) {
                tp__half_widen(src + r * cp->in_s[2], cp->w, cp->half, xin + r * cp->w);
            } else {
                for (int64_t q = 0; q < cp->w; q++)
                    xin[r * cp->w + q] = tp__half_to_f32(src[r * cp->in_s[2] + q * cp->in_s[3]], cp->half);
            }
        dw_plane(&flat, xin, cp->wfold + c * cp->kh * cp->kw, cp->has_bias ? cp->bfold[c] : 0.0f, dst);
        tp__relu_mode_apply(cp->relu16, dst, np);
        tp__half_round(dst, np, cp->half, y + it * np);
    }
    return TP_OK;
}

static void conv_free(void *data) {
    conv_plan *cp = data;
    if (cp) tp_free(cp->wfold);
    if (cp && cp->wino) tp__conv_nhwc_free(cp->wino);
    if (cp) tp_free(cp->wino);
    if (cp && cp->dw16) tp_free((void *)cp->dw16->wgroups);
    if (cp) tp_free(cp->dw16);
    tp_free(cp);
}

/* 16-bit depthwise at the AVX-512 level: 16 channels at a time
 * (tp_dw16, conv_dw16_avx512.c). */
static tp_status depthwise_run_dw16(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out,
                                    const tp_exec *ex) {
    const conv_plan *cp = plan->data;
    tp__dw16_run_avx512(cp->dw16, (const uint16_t *)tp__tensor_base(in[0]), (uint16_t *)tp__tensor_base(out[0]),
                        ex->ith, ex->nth, (char *)ex->workspace + (size_t)ex->ith * cp->ws_thread);
    return TP_OK;
}

/* The tp_dw16 of a 16-bit depthwise plan (widened weights in wfold /
 * bfold), or TP_ERR_UNSUPPORTED where it does not apply: below the
 * AVX-512 level, dilation, a strided input. bfloat16 MobileNetV2's 17
 * depthwise convolutions (Zen 4, one thread): 5.0 ms on widened planes
 * (depthwise_run_half: rows of 7-112 along the vector, scalar edges and
 * stride-2 gathers), 3.0 with the planes gathered by vpgatherdd, 1.4 with
 * the 16 x 16 transposes in registers. */
static tp_status prepare_dw16(conv_plan *cp, const tp_tensor *x) {
    const int64_t hw = cp->h * cp->w, taps = cp->kh * cp->kw, groups = (cp->cout + 15) / 16;
#if defined(__x86_64__)
    const bool avx512 = cp->isa == TP_ISA_AVX512;
#else
    const bool avx512 = false;
#endif
    if (!avx512 || cp->dh != 1 || cp->dw != 1 || cp->kh > TP_CONV_DW_MAX_KH || !tp_tensor_is_contiguous(x) || hw <= 0 ||
        cp->oh * cp->ow <= 0)
        return TP_ERR_UNSUPPORTED;
    tp_dw16 *d = tp_calloc(1, sizeof *d);
    float *wg = tp_calloc((size_t)(groups * (taps + 1) * 16), sizeof(float));
    if (!d || !wg) {
        tp_free(d);
        tp_free(wg);
        return tp_error(TP_ERR_NOMEM, "out of memory preparing a convolution");
    }
    for (int64_t c = 0; c < cp->cout; c++) {
        float *g = wg + (c / 16) * (taps + 1) * 16 + c % 16;
        for (int64_t t = 0; t < taps; t++) g[t * 16] = cp->wfold[c * taps + t];
        g[taps * 16] = cp->has_bias ? cp->bfold[c] : 0.0f;
    }
    *d = (tp_dw16){.n = cp->n, .c = cp->cout, .oh = cp->oh, .ow = cp->ow, .wgroups = wg, .half = cp->half,
                   .g = {.h = cp->h, .w = cp->w, .kh = cp->kh, .kw = cp->kw, .sh = cp->sh, .sw = cp->sw,
                         .ph = cp->ph, .pw = cp->pw}};
    cp->dw16 = d;
    return TP_OK;
}

/* 16-bit 3x3 stride-1 convolutions: Winograd (conv_nhwc.h) on values
 * widened as each thread gathers its rows of tiles, each tile rounded once
 * into the NCHW output. */
static tp_status conv_run_wino16(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const conv_plan *cp = plan->data;
    tp_conv_nhwc_call call = {.conv = cp->wino, .x16 = (const uint16_t *)tp__tensor_base(in[0]),
                              .y16 = (uint16_t *)tp__tensor_base(out[0])};
    if (cp->ires >= 0) call.res16 = (const uint16_t *)tp__tensor_base(in[cp->ires]);
    tp__conv_nhwc_run(&call, ex->ith, ex->nth, ex->workspace);
    return TP_OK;
}

/* Winograd's m for a 16-bit convolution (0: none). Its float32 arithmetic
 * on widened values rounds far below a 16-bit unit in the last place
 * (F(4x4, 3x3) about 10x a direct float32 sum's error, conv_nhwc.h), so
 * the rounded result is the direct sum's but where the two straddle a
 * rounding boundary: F(4x4) for bfloat16 (2^-8 units), F(2x2) for
 * float16 (2^-11). Where oneDNN's layout pass would choose Winograd for
 * float32 (3x3, stride 1, dilation 1, groups 1, 16 channels or more, 48
 * tiles), on CPUs with AVX2 and FMA (conv_nhwc_avx2.c's build), with a
 * contiguous input. bfloat16 ResNet-18 (Zen 4, one thread): its 3x3
 * convolutions on vdpbf16ps over im2col ran at 55-61% of that
 * instruction's peak, F(4x4) does 4x fewer multiplies in float32. */
static int wino16_wanted(const conv_plan *cp, int level, const tp_tensor *x) {
    if (cp->half < 0 || level < TP_CPU_AVX2 || cp->groups != 1 || cp->kh != 3 || cp->kw != 3 || cp->sh != 1 ||
        cp->sw != 1 || cp->dh != 1 || cp->dw != 1 || cp->cin < 16 || cp->cout < 16 || !tp_tensor_is_contiguous(x))
        return 0;
    tp_conv_nhwc g = {.n = cp->n, .cin = cp->cin, .h = cp->h, .w = cp->w, .cout = cp->cout, .oh = cp->oh,
                      .ow = cp->ow, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = cp->ph, .pw = cp->pw, .dh = 1, .dw = 1};
    if (!tp__conv_nhwc_winograd_ok(&g)) return 0;
    enum { MIN_TILES = 48 };
    if (cp->half == TP_HALF_BF16 && tp__conv_nhwc_tiles(&g, 4) >= MIN_TILES) return 4;
    return tp__conv_nhwc_tiles(&g, 2) >= MIN_TILES ? 2 : 0;
}

/* Batch norm after the convolution: fold it into a copy of the weight and
 * bias (W'[co] = W[co] * scale[co], b' = b * scale + shift), made once. */
static tp_status fold_affine(conv_plan *cp, const tp_op_plan *bn) {
    if (!cp->weight || cp->wfold || cp->ires >= 0 || bn->channels != cp->cout) return TP_ERR_UNSUPPORTED;
    int64_t per = cp->k;
    float *w = tp_malloc((size_t)(cp->cout * per + cp->cout) * sizeof(float));
    TP_CHECK(w != NULL, TP_ERR_NOMEM, "out of memory folding batch norm");
    float *b = w + cp->cout * per;
    for (int64_t co = 0; co < cp->cout; co++) {
        float sc = bn->channel_scale[co];
        for (int64_t k = 0; k < per; k++) w[co * per + k] = cp->weight[co * per + k] * sc;
        b[co] = (cp->bias_const ? cp->bias_const[co] : 0.0f) * sc + bn->channel_shift[co];
    }
    cp->wfold = w;
    cp->bfold = b;
    return TP_OK;
}

/* A 16-bit convolution takes a following residual add, and then a relu,
 * relu6 or clamp(0, 6): the
 * bounds are 16-bit values, so applying it before the convolution's
 * rounding gives the bits of the two steps apart (round(clamp(v)) ==
 * clamp(round(v)); -0 and NaN as the 16-bit step gives them). In the
 * registers of the bfloat16 GEMM (tp_gemm_bf16.relu), the fill of the
 * 16-channel depthwise path, or a loop over each float32 tile. Other
 * activations stay steps of their own: with their 16-bit input rounding
 * (fast_eltwise.c's round trip) a fused one cost bfloat16 MobileNetV2
 * more than the separate step. */
static tp_status conv_fuse16(tp_op_plan *plan, const tp_op_plan *consumer, int kind, int leaf) {
    conv_plan *cp = plan->data;
    if (kind == TP_FUSE_RESIDUAL) {
        /* + a 16-bit tensor of the output's shape (in[leaf]), after the
         * convolution's result is rounded, the sum rounded again (what the
         * add step computes): not for depthwise convolutions, nor after
         * an activation */
        if (cp->ires >= 0 || cp->relu16 || cp->depthwise) return TP_ERR_UNSUPPORTED;
        cp->ires = leaf;
        return TP_OK;
    }
    tp_elt_info e;
    if (kind != TP_FUSE_ACT || cp->relu16 || !tp__eltwise_half_info(consumer, &e) || e.binary || e.chained)
        return TP_ERR_UNSUPPORTED;
    const int mode = e.op == TP_ELT_RELU                                           ? 1
                     : e.op == TP_ELT_RELU6 || (e.op == TP_ELT_CLAMP && e.f[0] == 0.0 && e.f[1] == 6.0) ? 2
                                                                                    : 0;
    if (!mode) return TP_ERR_UNSUPPORTED;
    cp->relu16 = mode;
    if (cp->wino) cp->wino->relu16 = mode;
    if (cp->dw16) cp->dw16->g.relu = mode;
    return TP_OK;
}

static tp_status conv_fuse(tp_op_plan *plan, const tp_op_plan *consumer, int kind, int leaf) {
    conv_plan *cp = plan->data;
    if (cp->act) return TP_ERR_UNSUPPORTED;
    switch (kind) {
    case TP_FUSE_ACT: cp->act = consumer; return TP_OK;
    case TP_FUSE_RESIDUAL:
        if (cp->ires >= 0) return TP_ERR_UNSUPPORTED;
        cp->ires = leaf;
        return TP_OK;
    case TP_FUSE_CHANNEL_AFFINE:
        TP_TRY(fold_affine(cp, consumer));
        plan->data_bytes += (size_t)(cp->cout * cp->k + cp->cout) * sizeof(float);
        return TP_OK;
    default: return TP_ERR_UNSUPPORTED;
    }
}

static tp_status read_pair(const tp_value *args, int i, int spatial, int64_t *out2, int64_t dflt) {
    int64_t v[3];
    int n;
    if (args[i].kind == TP_VAL_STR) {
        if (strcmp(args[i].u.s, "valid") != 0) return TP_ERR_UNSUPPORTED; /* 'same': reference */
        out2[0] = out2[1] = 0;
        return TP_OK;
    }
    if (args[i].kind != TP_VAL_INT && !tp_value_is_seq(&args[i])) return TP_ERR_UNSUPPORTED;
    if (tp__arg_ints(args, i, "arg", v, 3, spatial, &n) != TP_OK) {
        tp_clear_error();
        return TP_ERR_UNSUPPORTED;
    }
    out2[0] = spatial == 2 ? v[0] : dflt;
    out2[1] = spatial == 2 ? v[1] : v[0];
    return TP_OK;
}

/* conv1d / conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) */
static tp_status conv_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *outv,
                              tp_op_plan *plan, int spatial) {
    const tp_tensor *x = tp__arg_tensor(bound, 0), *w = tp__arg_tensor(bound, 1), *b = tp__arg_tensor(bound, 2);
    const tp_tensor *o = tp__fast_out(outv);
    if (!x || !w || !o || x->dtype != w->dtype || o->dtype != x->dtype) return TP_ERR_UNSUPPORTED;
    const int half = tp__half_kind(x->dtype, info->cpu_level);
    if (x->dtype != TP_FLOAT32 && half < 0) return TP_ERR_UNSUPPORTED;
    if (half >= 0 && (!info->is_const[1] || (b && !info->is_const[2]))) return TP_ERR_UNSUPPORTED; /* weights widened once */
    if (half >= 0 && tp_tensor_numel(x) == 0) return TP_ERR_UNSUPPORTED; /* its planes may be huge */
    if (x->ndim != spatial + 2 || w->ndim != spatial + 2 || !tp_tensor_is_contiguous(w)) return TP_ERR_UNSUPPORTED;
    if (b && (b->dtype != x->dtype || b->ndim != 1 || b->strides[0] != 1)) return TP_ERR_UNSUPPORTED;
    conv_plan *cp = tp_calloc(1, sizeof *cp);
    TP_CHECK(cp != NULL, TP_ERR_NOMEM, "out of memory preparing a convolution");
    cp->half = half;
    int64_t s[2], p[2], d[2];
    tp_status st = read_pair(bound, 3, spatial, s, 1);
    if (st == TP_OK) st = read_pair(bound, 4, spatial, p, 0);
    if (st == TP_OK) st = read_pair(bound, 5, spatial, d, 1);
    if (st != TP_OK) {
        tp_free(cp);
        return TP_ERR_UNSUPPORTED;
    }
    cp->n = x->sizes[0];
    cp->cin = x->sizes[1];
    cp->h = spatial == 2 ? x->sizes[2] : 1;
    cp->w = x->sizes[spatial + 1];
    cp->cout = o->sizes[1];
    cp->oh = spatial == 2 ? o->sizes[2] : 1;
    cp->ow = o->sizes[spatial + 1];
    cp->kh = spatial == 2 ? w->sizes[2] : 1;
    cp->kw = w->sizes[spatial + 1];
    cp->sh = s[0];
    cp->sw = s[1];
    cp->ph = p[0];
    cp->pw = p[1];
    cp->dh = d[0];
    cp->dw = d[1];
    cp->groups = tp__arg_int(bound, 6);
    cp->in_s[0] = x->strides[0];
    cp->in_s[1] = x->strides[1];
    cp->in_s[2] = spatial == 2 ? x->strides[2] : 0;
    cp->in_s[3] = x->strides[spatial + 1];
    cp->has_bias = b != NULL;
    cp->k = (cp->cin / cp->groups) * cp->kh * cp->kw;
    cp->isa = info->cpu_level >= TP_CPU_AVX512 ? TP_ISA_AVX512 : info->cpu_level >= TP_CPU_AVX2 ? TP_ISA_AVX2 : TP_ISA_SCALAR;
    if (cp->isa > tp__gemm_best_isa()) cp->isa = tp__gemm_best_isa();
    int64_t pix = cp->oh * cp->ow;
    double flops = 2.0 * (double)cp->n * (double)cp->cout * (double)pix * (double)cp->k;
    double per_mflop = flops / 1e6; /* clamped before the conversion: a huge estimate would overflow int */
    int threads = per_mflop < 1 ? 1 : per_mflop > (double)info->max_threads ? info->max_threads : (int)per_mflop;
    if (threads < 1) threads = 1;
    cp->ires = -1;
    plan->data = cp;
    plan->free_data = conv_free;
    plan->variant = cp->isa == TP_ISA_AVX512 ? "avx512" : cp->isa == TP_ISA_AVX2 ? "avx2" : "scalar";
    const bool depthwise = cp->groups == cp->cin && cp->cout == cp->cin && cp->groups > 1;
    const int wino_m = wino16_wanted(cp, info->cpu_level, x);
    cp->dot16 = half == TP_HALF_BF16 && !depthwise && !wino_m && cp->k > 0 && cp->isa == TP_ISA_AVX512 &&
                tp__gemm_bf16_supported();
    if (half >= 0) { /* weights and bias widened into wfold / bfold (dot16: the bias only) */
        int64_t nw = cp->dot16 ? 0 : tp_tensor_numel(w);
        cp->w16 = (const uint16_t *)tp__tensor_base(w);
        cp->wfold = tp_malloc((size_t)(nw + cp->cout + 1) * sizeof(float));
        if (!cp->wfold) {
            conv_free(cp);
            plan->data = NULL;
            return tp_error(TP_ERR_NOMEM, "out of memory preparing a convolution");
        }
        cp->bfold = cp->wfold + nw;
        tp__half_widen((const uint16_t *)tp__tensor_base(w), nw, tp__half_kind(x->dtype, TP_CPU_SCALAR), cp->wfold);
        if (b)
            tp__half_widen((const uint16_t *)tp__tensor_base(b), cp->cout, tp__half_kind(x->dtype, TP_CPU_SCALAR),
                           cp->bfold);
        plan->data_bytes = (size_t)(nw + cp->cout) * sizeof(float);
        plan->fuse = conv_fuse16;
    } else {
        if (info->is_const[1]) cp->weight = (const float *)tp__tensor_base(w);
        if (b && info->is_const[2]) cp->bias_const = (const float *)tp__tensor_base(b);
        if (b && !info->is_const[2]) cp->weight = NULL; /* a run-time bias cannot be folded */
        plan->fuse = conv_fuse;
    }
    if (cp->groups == cp->cin && cp->cout == cp->cin && cp->groups > 1) {
        cp->depthwise = true;
        /* interior columns: ox*sw - pw >= 0 and ox*sw - pw + (kw-1)*dw <= w - 1 */
        cp->int_lo = (cp->pw + cp->sw - 1) / cp->sw;
        int64_t last = cp->w - 1 - (cp->kw - 1) * cp->dw + cp->pw;
        cp->int_hi = last < 0 ? 0 : last / cp->sw + 1;
        if (cp->int_hi > cp->ow) cp->int_hi = cp->ow;
        if (cp->int_lo > cp->int_hi) cp->int_lo = cp->int_hi;
        int64_t items = cp->n * cp->cout;
        plan->max_threads = threads < items ? threads : (int)items;
        plan->run = depthwise_run;
        if (half >= 0) { /* a thread's workspace: an input plane and an output plane, widened */
            cp->col_bytes = ((size_t)(cp->h * cp->w) * sizeof(float) + 63) & ~(size_t)63;
            cp->ws_thread = cp->col_bytes + (((size_t)(cp->oh * cp->ow) * sizeof(float) + 63) & ~(size_t)63);
            plan->workspace = cp->ws_thread * (size_t)plan->max_threads;
            plan->run = depthwise_run_half;
            st = prepare_dw16(cp, x);
            if (st == TP_OK) {
                const int64_t it16 = cp->n * ((cp->cout + 15) / 16);
                plan->max_threads = threads < it16 ? threads : (int)it16;
                cp->ws_thread = (tp__dw16_thread_bytes(cp->dw16) + 63) & ~(size_t)63;
                plan->workspace = cp->ws_thread * (size_t)plan->max_threads;
                plan->data_bytes += (size_t)(((cp->cout + 15) / 16) * (cp->kh * cp->kw + 1) * 16) * sizeof(float);
                plan->run = depthwise_run_dw16;
                plan->variant = "avx512-c16";
            } else if (st != TP_ERR_UNSUPPORTED) {
                conv_free(cp);
                plan->data = NULL;
                return st;
            }
        }
        return TP_OK;
    }
    if (wino_m) {
        tp_conv_nhwc *g = tp_calloc(1, sizeof *g);
        if (!g) {
            conv_free(cp);
            plan->data = NULL;
            return tp_error(TP_ERR_NOMEM, "out of memory preparing a convolution");
        }
        *g = (tp_conv_nhwc){.n = cp->n, .cin = cp->cin, .h = cp->h, .w = cp->w, .cout = cp->cout, .oh = cp->oh,
                            .ow = cp->ow, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = cp->ph, .pw = cp->pw, .dh = 1,
                            .dw = 1, .bias = cp->has_bias ? cp->bfold : NULL, .winograd = wino_m, .threads = threads,
                            .half16 = 1 + half};
        cp->wino = g;
        st = tp__conv_nhwc_init(g, cp->isa == TP_ISA_AVX512 ? TP_ISA_AVX512 : TP_ISA_AVX2, cp->wfold);
        if (st != TP_OK) {
            tp_free(g);
            cp->wino = NULL;
            conv_free(cp);
            plan->data = NULL;
            return st;
        }
        plan->data_bytes += g->packed_bytes;
        plan->max_threads = threads;
        plan->workspace = tp__conv_nhwc_workspace(g, threads);
        plan->run = conv_run_wino16;
        plan->variant = wino_m == 4 ? "winograd4" : "winograd2";
        return TP_OK;
    }
    cp->direct = half < 0 && cp->kh == 1 && cp->kw == 1 && cp->sh == 1 && cp->sw == 1 && cp->ph == 0 && cp->pw == 0 &&
                 cp->in_s[3] == 1 && cp->in_s[2] == cp->w;
    /* a tile of im2col about half the L2 */
    tp_gemm_cache_info ci = tp__gemm_cache_info();
    int64_t budget = (ci.l2 > 0 ? ci.l2 : 1 << 20) / 2 / 4;
    int64_t tile = budget / (cp->k > 0 ? cp->k : 1);
    tile = tile < 64 ? 64 : tile > 4096 ? 4096 : tile;
    /* balance: enough tiles for the threads at batch 1 */
    int64_t want = (pix + threads - 1) / threads;
    if (want > 64) want = (want + 63) & ~(int64_t)63;
    if (cp->n * cp->groups < threads && want < tile) tile = want < 16 ? 16 : want;
    /* equal tiles of whole register blocks of the widest micro-kernel (64 columns) */
    if (pix > 0 && tile < pix) {
        int64_t n_tiles = (pix + tile - 1) / tile;
        tile = (pix + n_tiles - 1) / n_tiles;
        if (tile > 64) tile = (tile + 63) & ~(int64_t)63;
    }
    if (tile > pix) tile = pix > 0 ? pix : 1;
    cp->tile = tile;
    cp->tiles_per_image = pix > 0 ? (pix + tile - 1) / tile : 0;
    cp->col_bytes = cp->direct ? 0 : (((size_t)(cp->k * tile) * sizeof(float) + 63) & ~(size_t)63);
    tp_gemm gm = {.isa = cp->isa, .m = cp->cout / cp->groups, .n = tile, .k = cp->k, .b = (const float *)8,
                  .rs_b = tile, .cs_b = 1, .ldc = pix};
    if (half >= 0) { /* C tiles of the group's outputs x the tile's pixels, row stride the tile */
        cp->c_bytes = ((size_t)(gm.m * tile) * sizeof(float) + 63) & ~(size_t)63;
        gm.ldc = tile;
    }
    cp->ws_thread = cp->col_bytes + cp->c_bytes + ((tp__gemm_workspace_bytes(&gm, 1) + 63) & ~(size_t)63);
    if (half >= 0 && !cp->dot16) { /* a row of the tile widened (a fused residual), at the end of ws_thread */
        cp->act_bytes = ((size_t)tile * sizeof(float) + 63) & ~(size_t)63;
        cp->ws_thread += cp->act_bytes;
    }
    if (cp->dot16) { /* im2col tile of bfloat16, its packed copy, the bfloat16 GEMM's workspace */
        tp_gemm_bf16 g16 = {.m = cp->cout / cp->groups, .n = tile, .k = cp->k, .cs_a = 1};
        cp->col_bytes = ((size_t)(cp->k * tile) * sizeof(uint16_t) + 63) & ~(size_t)63;
        cp->c_bytes = (tp__gemm_bf16_packed_b_bytes(cp->k, tile) + 63) & ~(size_t)63;
        cp->ws_thread = cp->col_bytes + cp->c_bytes + ((tp__gemm_bf16_workspace_bytes(&g16, 1) + 63) & ~(size_t)63);
    }
    int64_t items = cp->n * cp->groups * cp->tiles_per_image;
    plan->max_threads = threads < items ? threads : (int)(items > 0 ? items : 1);
    plan->workspace = cp->ws_thread * (size_t)plan->max_threads;
    plan->run = cp->dot16 ? conv_run_dot16 : half >= 0 ? conv_run_half : conv_run;
    if (cp->dot16) plan->variant = tp__gemm_bf16_amx() ? "amx_bf16" : "avx512_bf16";
    return TP_OK;
}

bool tp__conv_info(const tp_op_plan *plan, tp_conv_info *out) {
    if (plan->run != conv_run && plan->run != depthwise_run) return false;
    const conv_plan *cp = plan->data;
    *out = (tp_conv_info){.n = cp->n, .cin = cp->cin, .h = cp->h, .w = cp->w, .cout = cp->cout,
                          .oh = cp->oh, .ow = cp->ow, .kh = cp->kh, .kw = cp->kw, .sh = cp->sh, .sw = cp->sw,
                          .ph = cp->ph, .pw = cp->pw, .dh = cp->dh, .dw = cp->dw, .groups = cp->groups,
                          .ires = cp->ires, .act = cp->act};
    /* conv1d plans have h = 1 and no row stride */
    out->input_contiguous = cp->in_s[3] == 1 && (cp->h == 1 || cp->in_s[2] == cp->w) && cp->in_s[1] == cp->h * cp->w &&
                            cp->in_s[0] == cp->cin * cp->h * cp->w;
    if (cp->wfold) {
        out->weight = cp->wfold;
        out->bias = cp->bfold;
    } else if (cp->weight && (!cp->has_bias || cp->bias_const)) {
        out->weight = cp->weight;
        out->bias = cp->has_bias ? cp->bias_const : NULL;
    }
    return true;
}

static tp_status conv2d_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out, tp_op_plan *plan) {
    return conv_prepare(info, bound, out, plan, 2);
}
static tp_status conv1d_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out, tp_op_plan *plan) {
    return conv_prepare(info, bound, out, plan, 1);
}

void tp__register_fast_conv(void) {
    tp__register_variant(TP_OP_CONV2D, "gemm", TP_CPU_SCALAR, conv2d_prepare);
    tp__register_variant(TP_OP_CONV1D, "gemm", TP_CPU_SCALAR, conv1d_prepare);
}
