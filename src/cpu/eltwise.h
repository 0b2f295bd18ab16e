/*
 * eltwise.h - float32 elementwise loops, one table per ISA level
 * (internal). eltwise_loops.h holds the loops; eltwise_scalar.c,
 * eltwise_avx2.c and eltwise_avx512.c compile it with their ISA flags, so
 * the three variants are the same source and agree with each other (the
 * math functions of vmath.h compute the same formula at every width).
 */
#ifndef TPEXPORT_ELTWISE_H
#define TPEXPORT_ELTWISE_H

#include <stdbool.h>
#include <stdint.h>

#include "../internal.h"

enum {
    TP_ELT_ADD, /* a + alpha * b */
    TP_ELT_SUB, /* a - alpha * b */
    TP_ELT_MUL,
    TP_ELT_DIV,
    TP_ELT_MAX, /* maximum: NaN propagates */
    TP_ELT_MIN,
    TP_ELT_RELU,
    TP_ELT_NEG,
    TP_ELT_ABS,
    TP_ELT_EXP,
    TP_ELT_TANH,
    TP_ELT_SIGMOID,
    TP_ELT_SILU,
    TP_ELT_SQRT,
    TP_ELT_RSQRT,
    TP_ELT_RECIPROCAL,
    TP_ELT_SQUARE,
    TP_ELT_ERF,
    TP_ELT_LOG,
    TP_ELT_RELU6,
    TP_ELT_HARDSWISH,
    TP_ELT_HARDSIGMOID,
    TP_ELT_GELU,
    TP_ELT_GELU_TANH,
    TP_ELT_LEAKY_RELU, /* params[0]: slope */
    TP_ELT_CLAMP,      /* params[0], params[1]: min, max (NaN inputs stay NaN) */
    TP_ELT_COUNT
};

/* The ops bound by their arithmetic (a polynomial, an exp, a divide per
 * element), not by memory: their loops prefetch ahead (eltwise_loops.h),
 * large outputs are stored non-temporally straight from their loops
 * (unary_stream, not through fast_eltwise.c's buffer), and as a
 * convolution's activation they run as our loop rather than oneDNN's
 * post-op (onednn.c). */
static inline bool tp__eltwise_transcendental(int op) {
    switch (op) {
    case TP_ELT_EXP: case TP_ELT_TANH: case TP_ELT_SIGMOID: case TP_ELT_SILU: case TP_ELT_ERF:
    case TP_ELT_LOG: case TP_ELT_GELU: case TP_ELT_GELU_TANH:
        return true;
    default:
        return false;
    }
}

typedef struct tp_eltwise_table {
    /* o[i] = a[i*sa] op b[i*sb], sa/sb 0 or 1, for i < n */
    void (*binary)(int op, float *o, const float *a, int64_t sa, const float *b, int64_t sb, int64_t n, float alpha);
    /* o[i] = f(a[i]) (o may equal a) */
    void (*unary)(int op, float *o, const float *a, int64_t n, const float *params);
    /* Row-wise kernels (nn): softmax / log_softmax over n contiguous floats;
     * next (may be NULL): the row to prefetch meanwhile */
    void (*softmax)(float *o, const float *a, int64_t n, bool log, const float *next);
    /* layer norm of one row: o = (a - mean) * rstd * w + b (w, b may be NULL) */
    void (*layer_norm)(float *o, const float *a, int64_t n, const float *w, const float *b, float eps);
    /* o[i] = a[i] * scale + shift (batch norm in eval mode, per channel) then optional relu */
    void (*scale_shift)(float *o, const float *a, int64_t n, float scale, float shift);
    /* mean and 1/sqrt(var + eps) of n floats (two passes) */
    void (*moments)(const float *a, int64_t n, float eps, float *mean, float *rstd);
    /* sum of n floats (64 partial sums in a fixed order: eltwise_loops.h) */
    float (*sum)(const float *a, int64_t n);
    float (*max)(const float *a, int64_t n);
    /* o[i] = c[i] != 0 ? x[i*sx] : y[i*sy], sx/sy 0 or 1 (bits copied) */
    void (*where)(float *o, const uint8_t *c, const float *x, int64_t sx, const float *y, int64_t sy, int64_t n);
    /* dst[i] = src[i] for i < n (no overlap) with non-temporal stores from
     * the first 64-byte boundary of dst on (plain stores before it and for
     * a tail shorter than a vector): the lines go to memory without being
     * read first or kept in cache (fast_eltwise.c: streamed outputs). */
    void (*stream)(float *dst, const float *src, int64_t n);
    /* o[i] = f(a[i]) (o may equal a) for a tp__eltwise_transcendental op,
     * written as stream() writes (from o's first 64-byte boundary on). */
    void (*unary_stream)(int op, float *o, const float *a, int64_t n, const float *params);
    /* Orders the non-temporal stores before the caller's later stores (an
     * sfence): call once after the last stream of a run step, before the
     * step reports completion to other threads. */
    void (*stream_fence)(void);
} tp_eltwise_table;

TP_HIDDEN extern const tp_eltwise_table tp__eltwise_scalar;
TP_HIDDEN extern const tp_eltwise_table tp__eltwise_avx2;
TP_HIDDEN extern const tp_eltwise_table tp__eltwise_avx512;
/* The table for a tp_cpu_level (>= TP_CPU_SCALAR). */
TP_HIDDEN const tp_eltwise_table *tp__eltwise_table(int level);

#endif
