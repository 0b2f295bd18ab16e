/*
 * conv_wino.h - the Winograd transforms of conv_nhwc (F(2x2, 3x3) and
 * F(4x4, 3x3)), written once over a vector type and included by one file
 * per instruction set: conv_nhwc_avx2.c (8 floats, or 1 without AVX2)
 * and conv_wino_avx512.c (16 floats). The includer defines
 *   WX_V            the vector type          WX_W       its lanes
 *   WX_LD(p)        load WX_W floats         WX_ST(p,v) store them
 *   WX_ADD, WX_SUB  lane-wise a+b, a-b       WX_FMA(a,b,c)  a*b + c
 *   WX_MUL          lane-wise a*b
 *   WX_SET1(x)      broadcast                WX_NAME(n) the ISA's name for n
 *   WX_RELU(v)      x > 0 or NaN ? x : +0, lane-wise (our relu's exact result)
 * and gets WX_NAME(tx)(m), the transforms of F(m x m, 3x3).
 *
 * Channels run along memory (NHWC): every transform is a loop over channel
 * vectors; a last partial vector goes through zero-padded copies, so every
 * channel sees the same arithmetic in the same order whatever the lane
 * count or the vector it falls in (up to the rounding of a fused
 * multiply-add where the includer's WX_FMA has one).
 *
 * F(2x2, 3x3) (Lavin & Gray 2015): B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0;
 * 0 1 0 -1], A^T = [1 1 1 0; 0 1 -1 -1]: constants 0 and +-1.
 * F(4x4, 3x3), interpolation points 0, +-1, +-2: B^T rows
 * [4 0 -5 0 1 0], [0 -4 -4 1 1 0], [0 4 -4 -1 1 0], [0 -2 -1 2 1 0],
 * [0 2 -1 -2 1 0], [0 4 0 -5 0 1]; A^T rows [1 1 1 1 1 0], [0 1 -1 2 -2 0],
 * [0 1 1 4 4 0], [0 1 -1 8 -8 1]. Its constants (up to 8) make the rounding
 * of each output about 10x that of the direct sum (conv_nhwc.h).
 */
#include "conv_nhwc.h"

#include <string.h>

/* In-place 1-D input transforms of 4 and 6 values. */
#define WX_IN2(x0, x1, x2, x3, y0, y1, y2, y3) \
    do {                                       \
        y0 = WX_SUB(x0, x2);                   \
        y1 = WX_ADD(x1, x2);                   \
        y2 = WX_SUB(x2, x1);                   \
        y3 = WX_SUB(x1, x3);                   \
    } while (0)

#define WX_IN4(x0, x1, x2, x3, x4, x5, y0, y1, y2, y3, y4, y5)            \
    do {                                                                  \
        const WX_V x12_ = WX_ADD(x1, x2), x34_ = WX_ADD(x3, x4);          \
        const WX_V x1m2_ = WX_SUB(x1, x2), x4m3_ = WX_SUB(x4, x3);        \
        const WX_V x31_ = WX_SUB(x3, x1), x42_ = WX_SUB(x4, x2);          \
        y0 = WX_FMA(WX_SET1(4.0f), x0, WX_FMA(WX_SET1(-5.0f), x2, x4));   \
        y1 = WX_FMA(WX_SET1(-4.0f), x12_, x34_);                          \
        y2 = WX_FMA(WX_SET1(4.0f), x1m2_, x4m3_);                         \
        y3 = WX_FMA(WX_SET1(2.0f), x31_, x42_);                           \
        y4 = WX_FMA(WX_SET1(-2.0f), x31_, x42_);                          \
        y5 = WX_FMA(WX_SET1(4.0f), x1, WX_FMA(WX_SET1(-5.0f), x3, x5));   \
    } while (0)

/* 1-D output transforms: 4 values -> 2, 6 values -> 4. */
#define WX_OUT2(x0, x1, x2, x3, y0, y1)      \
    do {                                     \
        y0 = WX_ADD(WX_ADD(x0, x1), x2);     \
        y1 = WX_SUB(WX_SUB(x1, x2), x3);     \
    } while (0)

#define WX_OUT4(x0, x1, x2, x3, x4, x5, y0, y1, y2, y3)                 \
    do {                                                                \
        const WX_V a_ = WX_ADD(x1, x2), b_ = WX_SUB(x1, x2);            \
        const WX_V p_ = WX_ADD(x3, x4), q_ = WX_SUB(x3, x4);            \
        y0 = WX_ADD(WX_ADD(x0, a_), p_);                                \
        y1 = WX_FMA(WX_SET1(2.0f), q_, b_);                             \
        y2 = WX_FMA(WX_SET1(4.0f), p_, a_);                             \
        y3 = WX_ADD(WX_FMA(WX_SET1(8.0f), q_, b_), x5);                 \
    } while (0)

/* One channel vector of one tile: d[k] + c is input pixel k's channel c
 * (row-major over the 4x4 or 6x6 tile), v + x*xs + c matrix x's row. */
static inline __attribute__((always_inline)) void WX_NAME(in2_vec)(const float *const *d, int64_t c, float *v,
                                                                   size_t xs, int64_t vc) {
    WX_V t[4][4];
    for (int j = 0; j < 4; j++) {
        const WX_V x0 = WX_LD(d[j] + c), x1 = WX_LD(d[4 + j] + c), x2 = WX_LD(d[8 + j] + c);
        const WX_V x3 = WX_LD(d[12 + j] + c);
        WX_IN2(x0, x1, x2, x3, t[0][j], t[1][j], t[2][j], t[3][j]);
    }
    for (int i = 0; i < 4; i++) {
        WX_V y0, y1, y2, y3;
        WX_IN2(t[i][0], t[i][1], t[i][2], t[i][3], y0, y1, y2, y3);
        WX_ST(v + (size_t)(i * 4 + 0) * xs + vc, y0);
        WX_ST(v + (size_t)(i * 4 + 1) * xs + vc, y1);
        WX_ST(v + (size_t)(i * 4 + 2) * xs + vc, y2);
        WX_ST(v + (size_t)(i * 4 + 3) * xs + vc, y3);
    }
}

static inline __attribute__((always_inline)) void WX_NAME(in4_vec)(const float *const *d, int64_t c, float *v,
                                                                   size_t xs, int64_t vc) {
    WX_V t[6][6];
    for (int j = 0; j < 6; j++) {
        const WX_V x0 = WX_LD(d[j] + c), x1 = WX_LD(d[6 + j] + c), x2 = WX_LD(d[12 + j] + c);
        const WX_V x3 = WX_LD(d[18 + j] + c), x4 = WX_LD(d[24 + j] + c), x5 = WX_LD(d[30 + j] + c);
        WX_IN4(x0, x1, x2, x3, x4, x5, t[0][j], t[1][j], t[2][j], t[3][j], t[4][j], t[5][j]);
    }
    for (int i = 0; i < 6; i++) {
        WX_V y[6];
        WX_IN4(t[i][0], t[i][1], t[i][2], t[i][3], t[i][4], t[i][5], y[0], y[1], y[2], y[3], y[4], y[5]);
        for (int k = 0; k < 6; k++) WX_ST(v + (size_t)(i * 6 + k) * xs + vc, y[k]);
    }
}

/* One channel vector of one tile's outputs: m + x*xs + c is matrix x's
 * row; output pixel k (row-major over the 2x2 or 4x4 tile) goes to
 * dst[k] + c, plus bias and, with res, res[k] + c, through relu when
 * relu. */
static inline __attribute__((always_inline)) void WX_NAME(out2_vec)(const float *m, size_t xs, int64_t c,
                                                                    const float *bias, float *const *dst,
                                                                    const float *const *res, bool relu, int64_t oc) {
    WX_V s[2][4];
    for (int j = 0; j < 4; j++) {
        const WX_V x0 = WX_LD(m + (size_t)j * xs + c), x1 = WX_LD(m + (size_t)(4 + j) * xs + c);
        const WX_V x2 = WX_LD(m + (size_t)(8 + j) * xs + c), x3 = WX_LD(m + (size_t)(12 + j) * xs + c);
        WX_OUT2(x0, x1, x2, x3, s[0][j], s[1][j]);
    }
    const WX_V b = WX_LD(bias + c);
    for (int i = 0; i < 2; i++) {
        WX_V y[2];
        WX_OUT2(s[i][0], s[i][1], s[i][2], s[i][3], y[0], y[1]);
        for (int k = 0; k < 2; k++) {
            WX_V o = WX_ADD(y[k], b);
            if (res) o = WX_ADD(o, WX_LD(res[i * 2 + k] + oc));
            if (relu) o = WX_RELU(o);
            WX_ST(dst[i * 2 + k] + oc, o);
        }
    }
}

static inline __attribute__((always_inline)) void WX_NAME(out4_vec)(const float *m, size_t xs, int64_t c,
                                                                    const float *bias, float *const *dst,
                                                                    const float *const *res, bool relu, int64_t oc) {
    WX_V s[4][6];
    for (int j = 0; j < 6; j++) {
        const WX_V x0 = WX_LD(m + (size_t)j * xs + c), x1 = WX_LD(m + (size_t)(6 + j) * xs + c);
        const WX_V x2 = WX_LD(m + (size_t)(12 + j) * xs + c), x3 = WX_LD(m + (size_t)(18 + j) * xs + c);
        const WX_V x4 = WX_LD(m + (size_t)(24 + j) * xs + c), x5 = WX_LD(m + (size_t)(30 + j) * xs + c);
        WX_OUT4(x0, x1, x2, x3, x4, x5, s[0][j], s[1][j], s[2][j], s[3][j]);
    }
    const WX_V b = WX_LD(bias + c);
    for (int i = 0; i < 4; i++) {
        WX_V y[4];
        WX_OUT4(s[i][0], s[i][1], s[i][2], s[i][3], s[i][4], s[i][5], y[0], y[1], y[2], y[3]);
        for (int k = 0; k < 4; k++) {
            WX_V o = WX_ADD(y[k], b);
            if (res) o = WX_ADD(o, WX_LD(res[i * 4 + k] + oc));
            if (relu) o = WX_RELU(o);
            WX_ST(dst[i * 4 + k] + oc, o);
        }
    }
}

/* Whole tiles: full vectors in place, the last partial one through
 * zero-padded copies (d points at cin floats per pixel; v's rows and the
 * outputs hold cin / cout floats). */
#define WX_TILE_IN(NAME, VEC, T)                                                                 \
    static void WX_NAME(NAME)(const float *const *d, float *v, size_t xs, int64_t cin) {         \
        int64_t c = 0;                                                                           \
        for (; c + WX_W <= cin; c += WX_W) WX_NAME(VEC)(d, c, v, xs, c);                         \
        if (c == cin) return;                                                                    \
        const int64_t n = cin - c;                                                               \
        float in[T][WX_W], out[T][WX_W];                                                         \
        const float *dp[T];                                                                      \
        memset(in, 0, sizeof in);                                                                \
        for (int k = 0; k < T; k++) {                                                            \
            memcpy(in[k], d[k] + c, (size_t)n * sizeof(float));                                  \
            dp[k] = in[k];                                                                       \
        }                                                                                        \
        WX_NAME(VEC)(dp, 0, &out[0][0], WX_W, 0);                                                \
        for (int k = 0; k < T; k++) memcpy(v + (size_t)k * xs + c, out[k], (size_t)n * sizeof(float)); \
    }
WX_TILE_IN(in2, in2_vec, 16)
WX_TILE_IN(in4, in4_vec, 36)

#define WX_TILE_OUT(NAME, VEC, T, P)                                                                        \
    static void WX_NAME(NAME)(const float *m, size_t xs, int64_t cout, const float *bias, float *const *dst, \
                              const float *const *res, bool relu) {                                         \
        int64_t c = 0;                                                                                      \
        if (res && relu)                                                                                    \
            for (; c + WX_W <= cout; c += WX_W) WX_NAME(VEC)(m, xs, c, bias, dst, res, true, c);            \
        else if (res)                                                                                       \
            for (; c + WX_W <= cout; c += WX_W) WX_NAME(VEC)(m, xs, c, bias, dst, res, false, c);           \
        else if (relu)                                                                                      \
            for (; c + WX_W <= cout; c += WX_W) WX_NAME(VEC)(m, xs, c, bias, dst, NULL, true, c);           \
        else                                                                                                \
            for (; c + WX_W <= cout; c += WX_W) WX_NAME(VEC)(m, xs, c, bias, dst, NULL, false, c);          \
        if (c == cout) return;                                                                              \
        const int64_t n = cout - c;                                                                         \
        float in[T][WX_W], bb[WX_W], o[P][WX_W], r[P][WX_W];                                                \
        float *op[P];                                                                                       \
        const float *rp[P];                                                                                 \
        memset(in, 0, sizeof in);                                                                           \
        memset(bb, 0, sizeof bb);                                                                           \
        memset(r, 0, sizeof r);                                                                             \
        for (int k = 0; k < T; k++) memcpy(in[k], m + (size_t)k * xs + c, (size_t)n * sizeof(float));       \
        memcpy(bb, bias + c, (size_t)n * sizeof(float));                                                    \
        for (int k = 0; k < P; k++) {                                                                       \
            if (res) memcpy(r[k], res[k] + c, (size_t)n * sizeof(float));                                   \
            op[k] = o[k];                                                                                   \
            rp[k] = r[k];                                                                                   \
        }                                                                                                   \
        WX_NAME(VEC)(&in[0][0], WX_W, 0, bb, op, res ? rp : NULL, relu, 0);                                 \
        for (int k = 0; k < P; k++) memcpy(dst[k] + c, o[k], (size_t)n * sizeof(float));                    \
    }
WX_TILE_OUT(out2, out2_vec, 16, 4)
WX_TILE_OUT(out4, out4_vec, 36, 16)

/* F(2x2, 3x3)'s weight transform U = G g G^T over n floats of each of the
 * 9 taps g[3a + b] (rows a, columns b of g), into the 12 of U's 16 values
 * that are not taps themselves (U(0,0) = g(0,0), U(0,3) = g(0,2), U(3,0) =
 * g(2,0), U(3,3) = g(2,2)): u[k] for (i, j) in the order (0,1) (0,2) (1,0)
 * (1,1) (1,2) (1,3) (2,0) (2,1) (2,2) (2,3) (3,1) (3,2). G's rows 1 and 2
 * give p = ((x + y) + z) * 0.5 and q = ((x - y) + z) * 0.5 of a row or
 * column's three values, first down the columns (G g), then along each
 * row of that. Every float sees the same operations whatever its position
 * or the lane count: a last partial vector goes through zero-padded copies
 * (tp_wino_tx.u12). */
#define WX_PQ(x, y, z, p, q)                                                                \
    do {                                                                                  \
        p = WX_MUL(WX_ADD(WX_ADD(x, y), z), half);                                        \
        q = WX_MUL(WX_ADD(WX_SUB(x, y), z), half);                                        \
    } while (0)
static inline __attribute__((always_inline)) void WX_NAME(u12_vec)(const float *const *g, float *const *u,
                                                                   int64_t i) {
    const WX_V half = WX_SET1(0.5f);
    WX_V v[9], t[2][3], p, q;
    for (int k = 0; k < 9; k++) v[k] = WX_LD(g[k] + i);
    for (int b = 0; b < 3; b++) WX_PQ(v[b], v[3 + b], v[6 + b], t[0][b], t[1][b]);
    WX_PQ(v[0], v[1], v[2], p, q); /* U's row 0: g's row 0 */
    WX_ST(u[0] + i, p);
    WX_ST(u[1] + i, q);
    for (int r = 0; r < 2; r++) { /* rows 1 and 2: G g's */
        float *const *ur = u + 2 + 4 * r;
        WX_ST(ur[0] + i, t[r][0]);
        WX_PQ(t[r][0], t[r][1], t[r][2], p, q);
        WX_ST(ur[1] + i, p);
        WX_ST(ur[2] + i, q);
        WX_ST(ur[3] + i, t[r][2]);
    }
    WX_PQ(v[6], v[7], v[8], p, q); /* row 3: g's row 2 */
    WX_ST(u[10] + i, p);
    WX_ST(u[11] + i, q);
}
static void WX_NAME(u12)(const float *const *gp, float *const *up, int64_t n) {
    const float *g[9];
    float *u[12];
    memcpy(g, gp, sizeof g);
    memcpy(u, up, sizeof u);
    int64_t i = 0;
    for (; i + WX_W <= n; i += WX_W) WX_NAME(u12_vec)(g, u, i);
    if (i == n) return;
    /* the last partial vector through zero-padded copies */
    float gt[9][WX_W], ut[12][WX_W];
    const float *gq[9];
    float *uq[12];
    memset(gt, 0, sizeof gt);
    for (int k = 0; k < 9; k++) {
        memcpy(gt[k], g[k] + i, (size_t)(n - i) * sizeof(float));
        gq[k] = gt[k];
    }
    for (int k = 0; k < 12; k++) uq[k] = ut[k];
    WX_NAME(u12_vec)(gq, uq, 0);
    for (int k = 0; k < 12; k++) memcpy(u[k] + i, ut[k], (size_t)(n - i) * sizeof(float));
}
#undef WX_PQ

static tp_wino_tx WX_NAME(tx)(int m) {
    tp_wino_tx t;
    t.in = m == 4 ? WX_NAME(in4) : WX_NAME(in2);
    t.out = m == 4 ? WX_NAME(out4) : WX_NAME(out2);
    t.u12 = WX_NAME(u12);
    return t;
}
