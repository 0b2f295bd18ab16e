/*
 * conv_direct_avx512.c - conv_nhwc's direct kernel for convolutions of few
 * input channels (tp_conv_nhwc.direct: a vision model's first layer, whose
 * 3 channels come as NCHW planes). Built with -mavx512f; conv_nhwc_avx2.c
 * calls it only for convolutions prepared at the AVX-512 level, which the
 * oneDNN layout pass asks for only after cpuid and xgetbv said the CPU and
 * the OS support AVX-512.
 *
 * The implicit GEMM would gather each output pixel's cin x kh x kw inputs
 * into a row of A: with 3 channels, runs of 3 floats (NCHW) or of 3 x kw
 * (NHWC). Here each thread copies the input rows its output rows need into
 * zero-padded planes once, and a tile of R output pixels of one row by up
 * to 64 output channels reads its inputs from those planes in place:
 * pixel r's input of tap (c, i, j) sits at r * sw from pixel 0's, so each
 * k step broadcasts R floats of one padded row against one row of the
 * packed weights (K = cin x kh x kw rows in OIHW's own order, by 64
 * columns) with R x 4 accumulators in registers (figures at
 * onednn.c's direct_wanted). A max pool after it can run here too
 * (tp_conv_nhwc.pool_kh): each thread computes the rows a pooled row
 * needs into a ring and pools them while they are in cache.
 */
#include "conv_nhwc.h"

#if defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>
#include <string.h>

#include "avx512_util.h"
#include "fast.h"

/* Output rows a thread's padded planes cover at a time (they hold
 * (DIRECT_ROWS - 1) * sh + (kh - 1) * dh + 1 input rows). */
#define DIRECT_ROWS 16

/* One tile's operands: x the padded planes at the tile's first input
 * (pixel 0, tap (0, 0, 0)), b the panel's packed rows (K x 64), y and res
 * at the tile's first output pixel and channel. */
typedef struct direct_tile {
    const float *x;
    const float *b;
    float *y;
    const float *res;
    const float *bias; /* the panel's first channel, or NULL */
    int64_t plane, wp;  /* floats between planes, between padded rows */
    int64_t cin, kh, kw, dh, dw, sw, cout;
    int rows;           /* output pixels to store (<= the tile's R) */
    int64_t cols;       /* output channels to store (<= NB x 16) */
    int relu;           /* tp__fused_relu_mode of the activation */
} direct_tile;

/* R pixels x NB vectors of 16 channels; sw_c a compile-time stride (0: t->sw). */
static inline __attribute__((always_inline)) void direct_body(const direct_tile *t, const int NB, const int R,
                                                              const int64_t sw_c) {
    const int64_t sw = sw_c ? sw_c : t->sw;
    __m512 acc[12][4];
#pragma GCC unroll 12
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int j = 0; j < NB; j++) acc[r][j] = _mm512_setzero_ps();
    const float *b = t->b;
    for (int64_t c = 0; c < t->cin; c++) {
        for (int64_t i = 0; i < t->kh; i++) {
            const float *row = t->x + c * t->plane + i * t->dh * t->wp;
            for (int64_t j = 0; j < t->kw; j++, b += 64) {
                const float *p = row + j * t->dw;
                __m512 bv[4];
#pragma GCC unroll 4
                for (int q = 0; q < NB; q++) bv[q] = _mm512_load_ps(b + 16 * q);
#pragma GCC unroll 12
                for (int r = 0; r < R; r++) {
                    const __m512 a = _mm512_set1_ps(p[r * sw]);
#pragma GCC unroll 4
                    for (int q = 0; q < NB; q++) acc[r][q] = _mm512_fmadd_ps(a, bv[q], acc[r][q]);
                }
            }
        }
    }
    __m512 bias[4];
    __mmask16 mk[4];
#pragma GCC unroll 4
    for (int q = 0; q < NB; q++) {
        mk[q] = tp__avx512_lanes(t->cols - 16 * q);
        bias[q] = t->bias ? _mm512_maskz_loadu_ps(mk[q], t->bias + 16 * q) : _mm512_setzero_ps();
    }
#pragma GCC unroll 12
    for (int r = 0; r < R; r++) {
        if (r >= t->rows) break;
        float *y = t->y + r * t->cout;
        const float *res = t->res ? t->res + r * t->cout : NULL;
#pragma GCC unroll 4
        for (int q = 0; q < NB; q++) {
            __m512 v = _mm512_add_ps(acc[r][q], bias[q]);
            if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk[q], res + 16 * q));
            _mm512_mask_storeu_ps(y + 16 * q, mk[q], tp__avx512_relu(v, t->relu));
        }
    }
}

/* Tiles by vectors of channels: R = 6 with 4 vectors (24 accumulators),
 * 8 with 3, 12 with 1-2 (at 64 channels 6 x 4 ran 174 GFLOP/s, 12 x 2
 * twice 160, 24 x 1 four times 149, 5 x 4 157). */
#define DIRECT_FNS(NB, R)                                                                                   \
    static void direct_##NB##_s1(const direct_tile *t) { direct_body(t, NB, R, 1); }                      \
    static void direct_##NB##_s2(const direct_tile *t) { direct_body(t, NB, R, 2); }                      \
    static void direct_##NB##_sn(const direct_tile *t) { direct_body(t, NB, R, 0); }
DIRECT_FNS(1, 12)
DIRECT_FNS(2, 12)
DIRECT_FNS(3, 8)
DIRECT_FNS(4, 6)

typedef void (*direct_fn)(const direct_tile *);
static const direct_fn direct_fns[3][4] = {
    {direct_1_sn, direct_2_sn, direct_3_sn, direct_4_sn},
    {direct_1_s1, direct_2_s1, direct_3_s1, direct_4_s1},
    {direct_1_s2, direct_2_s2, direct_3_s2, direct_4_s2},
};
static const int direct_r[4] = {12, 12, 8, 6};

/* Padded columns and rows of the planes (the input window of all output
 * columns; of `rows` output rows). */
static int64_t direct_wp(const tp_conv_nhwc *cv) { return (cv->ow - 1) * cv->sw + (cv->kw - 1) * cv->dw + 1; }
static int64_t direct_hp(const tp_conv_nhwc *cv, int64_t rows) {
    return (rows - 1) * cv->sh + (cv->kh - 1) * cv->dh + 1;
}
/* Floats past the last plane that a tile's unstored pixels may read. */
static int64_t direct_slack(const tp_conv_nhwc *cv) { return 12 * cv->sw + 64; }

size_t tp__conv_direct_packed_bytes_avx512(const tp_conv_nhwc *cv) {
    const int64_t panels = (cv->cout + 63) / 64;
    return (size_t)(panels * cv->kh * cv->kw * cv->cin * 64) * sizeof(float);
}

void tp__conv_direct_pack_avx512(const tp_conv_nhwc *cv, const float *weight, float *dst) {
    const int64_t k = cv->kh * cv->kw * cv->cin, panels = (cv->cout + 63) / 64;
    for (int64_t p = 0; p < panels; p++)
        for (int64_t r = 0; r < k; r++)
            for (int64_t o = 0; o < 64; o++) {
                const int64_t oc = p * 64 + o;
                dst[(p * k + r) * 64 + o] = oc < cv->cout ? weight[oc * k + r] : 0.0f;
            }
}

/* Floats of a thread's ring of convolution rows (a fused max pool). */
static size_t direct_ring_floats(const tp_conv_nhwc *cv) { return (size_t)(cv->pool_kh * cv->ow * cv->cout); }

static size_t direct_plane_bytes(const tp_conv_nhwc *cv) {
    const int64_t rows = cv->oh < DIRECT_ROWS ? cv->oh : DIRECT_ROWS;
    const size_t floats = (size_t)(cv->cin * direct_hp(cv, rows) * direct_wp(cv) + direct_slack(cv));
    return (floats * sizeof(float) + 63) & ~(size_t)63;
}

size_t tp__conv_direct_thread_bytes_avx512(const tp_conv_nhwc *cv) {
    return direct_plane_bytes(cv) + ((direct_ring_floats(cv) * sizeof(float) + 63) & ~(size_t)63);
}

/* A thread's padded planes: image img's input rows for output rows [oh0,
 * oh0 + rows). */
typedef struct direct_planes {
    const tp_conv_nhwc_call *call;
    float *xp;
    int64_t img, oh0, rows;
    const direct_fn *fns; /* direct_fns' row for the call's column stride */
    int relu;             /* tp__fused_relu_mode of the activation */
} direct_planes;

/* Copy the input rows for output rows [oh0, oh0 + rows) into the
 * zero-padded planes. */
static void direct_fill(direct_planes *pl, int64_t img, int64_t oh0, int64_t rows) {
    const tp_conv_nhwc_call *call = pl->call;
    const tp_conv_nhwc *cv = call->conv;
    float *xp = pl->xp;
    const int64_t wp = direct_wp(cv), hp = direct_hp(cv, rows), cin = cv->cin;
    const int64_t iw0 = -cv->pw, c0 = iw0 < 0 ? -iw0 : 0; /* first padded column inside the input */
    int64_t c1 = cv->w - iw0;                            /* one past the last */
    if (c1 > wp) c1 = wp;
    const float *x = call->x + img * cin * cv->h * cv->w;
    for (int64_t c = 0; c < cin; c++)
        for (int64_t r = 0; r < hp; r++) {
            float *d = xp + (c * hp + r) * wp;
            const int64_t ih = oh0 * cv->sh - cv->ph + r;
            if (ih < 0 || ih >= cv->h || c1 <= c0) {
                memset(d, 0, (size_t)wp * sizeof(float));
                continue;
            }
            memset(d, 0, (size_t)c0 * sizeof(float));
            if (call->x_nhwc) {
                const float *s = x + (ih * cv->w + iw0 + c0) * cin + c;
                for (int64_t q = c0; q < c1; q++, s += cin) d[q] = *s;
            } else {
                memcpy(d + c0, x + (c * cv->h + ih) * cv->w + iw0 + c0, (size_t)(c1 - c0) * sizeof(float));
            }
            memset(d + c1, 0, (size_t)(wp - c1) * sizeof(float));
        }
    memset(xp + cin * hp * wp, 0, (size_t)direct_slack(cv) * sizeof(float));
    pl->img = img;
    pl->oh0 = oh0;
    pl->rows = rows;
}

/* Output row oh of image img (ow x cout floats at yrow; the residual's
 * row at rrow, or NULL), activation included, the planes refilled from
 * that row on when they do not hold it. */
static void direct_row(direct_planes *pl, int64_t img, int64_t oh, float *yrow, const float *rrow) {
    const tp_conv_nhwc *cv = pl->call->conv;
    if (pl->img != img || oh < pl->oh0 || oh >= pl->oh0 + pl->rows)
        direct_fill(pl, img, oh, cv->oh - oh < DIRECT_ROWS ? cv->oh - oh : DIRECT_ROWS);
    const int64_t k = cv->kh * cv->kw * cv->cin, panels = (cv->cout + 63) / 64, wp = direct_wp(cv);
    const int relu = pl->relu;
    const float *xr = pl->xp + (oh - pl->oh0) * cv->sh * wp;
    for (int64_t p = 0; p < panels; p++) {
        const int64_t cols = cv->cout - 64 * p < 64 ? cv->cout - 64 * p : 64;
        const int nb = (int)((cols + 15) / 16), R = direct_r[nb - 1];
        direct_tile t = {.b = (const float *)cv->wpack + p * k * 64,
                         .bias = cv->bias ? cv->bias + 64 * p : NULL,
                         .plane = direct_hp(cv, pl->rows) * wp,
                         .wp = wp,
                         .cin = cv->cin,
                         .kh = cv->kh,
                         .kw = cv->kw,
                         .dh = cv->dh,
                         .dw = cv->dw,
                         .sw = cv->sw,
                         .cout = cv->cout,
                         .cols = cols,
                         .relu = relu};
        for (int64_t q = 0; q < cv->ow; q += R) {
            t.x = xr + q * cv->sw;
            t.y = yrow + q * cv->cout + 64 * p;
            t.res = rrow ? rrow + q * cv->cout + 64 * p : NULL;
            t.rows = (int)(cv->ow - q < R ? cv->ow - q : R);
            pl->fns[nb - 1](&t);
        }
    }
    if (cv->act && !relu) cv->act->apply(cv->act, yrow, cv->ow * cv->cout);
}

/* Pooled row pr of image img into y: the window's convolution rows
 * computed into the ring first where it does not hold them (tags: the
 * image row each slot holds). */
static void direct_pool_row(direct_planes *pl, float *ring, int64_t *tags, int64_t img, int64_t pr, float *y) {
    const tp_conv_nhwc *cv = pl->call->conv;
    const int64_t row_floats = cv->ow * cv->cout, ch = cv->cout;
    int64_t r0 = pr * cv->pool_sh - cv->pool_ph, r1 = r0 + cv->pool_kh;
    if (r0 < 0) r0 = 0;
    if (r1 > cv->oh) r1 = cv->oh;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t slot = r % cv->pool_kh, tag = img * cv->oh + r;
        if (tags[slot] != tag) {
            direct_row(pl, img, r, ring + slot * row_floats, NULL);
            tags[slot] = tag;
        }
    }
    for (int64_t pc = 0; pc < cv->pool_ow; pc++, y += ch) {
        int64_t q0 = pc * cv->pool_sw - cv->pool_pw, q1 = q0 + cv->pool_kw;
        if (q0 < 0) q0 = 0;
        if (q1 > cv->ow) q1 = cv->ow;
        for (int64_t c = 0; c < ch; c += 16) {
            const __mmask16 mk = tp__avx512_lanes(ch - c);
            if (r0 >= r1 || q0 >= q1) { /* a window wholly in the padding: the reference's -inf */
                _mm512_mask_storeu_ps(y + c, mk, _mm512_set1_ps(-__builtin_inff()));
                continue;
            }
            __m512 m = _mm512_setzero_ps();
            bool first = true;
            for (int64_t r = r0; r < r1; r++) {
                const float *src = ring + (r % cv->pool_kh) * row_floats + c;
                for (int64_t q = q0; q < q1; q++) {
                    const __m512 v = _mm512_maskz_loadu_ps(mk, src + q * ch);
                    m = first ? v : tp__avx512_max_take(m, v);
                    first = false;
                }
            }
            _mm512_mask_storeu_ps(y + c, mk, m);
        }
    }
}

void tp__conv_direct_run_avx512(const tp_conv_nhwc_call *call, int ith, int nth, void *workspace) {
    const tp_conv_nhwc *cv = call->conv;
    char *ws = (char *)workspace + (size_t)ith * tp__conv_direct_thread_bytes_avx512(cv);
    direct_planes pl = {.call = call,
                        .xp = (float *)ws,
                        .img = -1,
                        .fns = direct_fns[cv->sw == 1 ? 1 : cv->sw == 2 ? 2 : 0],
                        .relu = tp__fused_relu_mode(cv->act)};
    if (cv->pool_kh > 0) {
        float *ring = (float *)(ws + direct_plane_bytes(cv));
        int64_t tags[TP_CONV_DIRECT_POOL_KH];
        for (int i = 0; i < TP_CONV_DIRECT_POOL_KH; i++) tags[i] = -1;
        const int64_t total = cv->n * cv->pool_oh, r0 = total * ith / nth, r1 = total * (ith + 1) / nth;
        for (int64_t r = r0; r < r1; r++)
            direct_pool_row(&pl, ring, tags, r / cv->pool_oh, r % cv->pool_oh, call->y + r * cv->pool_ow * cv->cout);
        return;
    }
    const int64_t total = cv->n * cv->oh, r0 = total * ith / nth, r1 = total * (ith + 1) / nth;
    for (int64_t r = r0; r < r1; r++) {
        float *yrow = call->y + r * cv->ow * cv->cout;
        direct_row(&pl, r / cv->oh, r % cv->oh, yrow, call->res ? call->res + (yrow - call->y) : NULL);
    }
}

#endif
