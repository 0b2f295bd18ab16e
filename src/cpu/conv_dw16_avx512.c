/*
 * conv_dw16_avx512.c - 16-bit depthwise convolutions on NCHW tensors, 16
 * channels at a time (tp_dw16, conv_nhwc.h). Built with -mavx512f; the
 * caller (fast_conv.c) takes it only at the AVX-512 level, after cpuid.
 */
#include "conv_nhwc.h"
#include "half.h"

#if defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>

#include "bf16_avx512.h"

enum { DW16_BAND = 256 }; /* output pixels per fill */

static size_t round64(size_t b) { return (b + 63) & ~(size_t)63; }

size_t tp__dw16_thread_bytes(const tp_dw16 *d) {
    return round64((size_t)(d->g.h * d->g.w) * 16 * sizeof(float)) + round64((size_t)DW16_BAND * 16 * sizeof(float));
}

/* 16 lanes of 16-bit values (zero-extended 32-bit words) to float32. */
static inline __m512 widen16(__m512i v, int half) {
    if (half == TP_HALF_BF16) return tp__bf16_widen_avx512(v);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

/* 16 floats rounded to 16-bit values (to nearest even; a NaN kept quiet),
 * as half.h rounds. */
static inline __m256i round16(__m512 f, int half) {
    if (half != TP_HALF_BF16) return _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_cvtepi32_epi16(tp__bf16_bits_avx512(f));
}

void tp__dw16_convert_avx512(const uint16_t *h, float *wide, const float *f, uint16_t *r, int64_t n, int half) {
    for (int64_t j = 0; j + 16 <= n; j += 16) {
        _mm512_storeu_ps(wide + j, widen16(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(h + j))), half));
        _mm256_storeu_si256((__m256i *)(r + j), round16(_mm512_loadu_ps(f + j), half));
    }
}

/* r[i] = column i of the 16 x 16 matrix whose row j was r[j]. */
static inline void tr16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * i]), _mm512_castps_pd(t[4 * i + 2])));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * i]), _mm512_castps_pd(t[4 * i + 2])));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * i + 1]), _mm512_castps_pd(t[4 * i + 3])));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * i + 1]), _mm512_castps_pd(t[4 * i + 3])));
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}

/* Planes c0 .. c0 + cv of one image (x: its first plane) -> X[p][16],
 * channels past cv zero: 16 pixels of the 16 planes at a time, widened
 * and transposed in registers. */
static void gather_in(const uint16_t *x, int64_t hw, int cv, int half, float *X) {
    int64_t p = 0;
    for (; p + 16 <= hw; p += 16) {
        __m512 r[16];
        for (int c = 0; c < 16; c++)
            r[c] = c < cv ? widen16(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(x + c * hw + p))), half)
                          : _mm512_setzero_ps();
        tr16(r);
        for (int i = 0; i < 16; i++) _mm512_storeu_ps(X + (p + i) * 16, r[i]);
    }
    for (; p < hw; p++)
        for (int c = 0; c < 16; c++) X[p * 16 + c] = c < cv ? tp__half_to_f32(x[c * hw + p], half) : 0.0f;
}

/* Y[q][16] for output pixels [p0, p0 + rows) -> planes c0 .. c0 + cv of one
 * image (y: its first plane): 16 pixels at a time, transposed in
 * registers, each plane's 16 rounded at once. */
static void scatter_out(const float *Y, int64_t p0, int rows, int64_t ohw, int cv, int half, uint16_t *y) {
    int q = 0;
    for (; q + 16 <= rows; q += 16) {
        __m512 r[16];
        for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(Y + (q + i) * 16);
        tr16(r);
        for (int c = 0; c < cv; c++) _mm256_storeu_si256((__m256i *)(y + c * ohw + p0 + q), round16(r[c], half));
    }
    for (; q < rows; q++) {
        uint16_t v[16];
        _mm256_storeu_si256((__m256i *)v, round16(_mm512_loadu_ps(Y + (q) * 16), half));
        for (int c = 0; c < cv; c++) y[c * ohw + p0 + q] = v[c];
    }
}

void tp__dw16_run_avx512(const tp_dw16 *d, const uint16_t *x, uint16_t *y, int ith, int nth, void *ws) {
    const int64_t groups = (d->c + 15) / 16, items = d->n * groups, hw = d->g.h * d->g.w, ohw = d->oh * d->ow;
    const int64_t taps = d->g.kh * d->g.kw;
    float *X = (float *)ws;
    float *Y = (float *)((char *)ws + round64((size_t)hw * 16 * sizeof(float)));
    for (int64_t it = ith; it < items; it += nth) {
        const int64_t img = it / groups, grp = it % groups, c0 = grp * 16;
        const int cv = d->c - c0 < 16 ? (int)(d->c - c0) : 16;
        gather_in(x + (img * d->c + c0) * hw, hw, cv, d->half, X);
        tp_conv_dw g = d->g;
        g.weight = (float *)(d->wgroups + grp * (taps + 1) * 16);
        for (int64_t p0 = 0; p0 < ohw; p0 += DW16_BAND) {
            const int rows = ohw - p0 < DW16_BAND ? (int)(ohw - p0) : DW16_BAND;
            tp__conv_dw_fill_avx512(&g, X, 16, d->oh, d->ow, p0, rows, 0, 16, Y, NULL);
            scatter_out(Y, p0, rows, ohw, cv, d->half, y + (img * d->c + c0) * ohw);
        }
    }
}
#else
/* Builds without AVX-512 code (not x86): fast_conv.c never plans this path
 * there (prepare_dw16), the test never calls the conversions. */
size_t tp__dw16_thread_bytes(const tp_dw16 *d) {
    (void)d;
    return 0;
}
void tp__dw16_run_avx512(const tp_dw16 *d, const uint16_t *x, uint16_t *y, int ith, int nth, void *ws) {
    (void)d, (void)x, (void)y, (void)ith, (void)nth, (void)ws;
}
void tp__dw16_convert_avx512(const uint16_t *h, float *wide, const float *f, uint16_t *r, int64_t n, int half) {
    (void)h, (void)wide, (void)f, (void)r, (void)n, (void)half;
}
#endif
