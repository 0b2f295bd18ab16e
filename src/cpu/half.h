/*
 * half.h - bfloat16 / float16 rows widened to float32 and rounded back, for
 * the fast variants that run 16-bit tensors through their float32 loops
 * (internal). Widening is exact; rounding is to nearest even, a NaN kept a
 * quiet NaN: the same bits as tp__bf16_to_f32 / tp__f32_to_bf16 and
 * tp__f16_to_f32 / tp__f32_to_f16, so a 16-bit op computed in float32 and
 * rounded once gives PyTorch's CPU result for these dtypes wherever the
 * float32 value is the same. float16 uses F16C's conversions where the CPU
 * has them, bfloat16 AVX2 integer vectors where the CPU has AVX2 (the same
 * bits).
 */
#ifndef TPEXPORT_CPU_HALF_H
#define TPEXPORT_CPU_HALF_H

#include <stdint.h>

#include "../internal.h"
#include "tpexport/tensor.h"

/* How a plan converts: bfloat16, float16 in C, float16 with F16C. */
enum { TP_HALF_BF16, TP_HALF_F16, TP_HALF_F16C };

/* The kind for a 16-bit float dtype at a CPU level (F16C from the AVX2
 * level on, where the CPU has it); -1 for any other dtype. */
TP_HIDDEN int tp__half_kind(tp_dtype dtype, int cpu_level);

/* d[j] = s[j] widened, for j < n. */
TP_HIDDEN void tp__half_widen(const uint16_t *s, int64_t n, int kind, float *d);
/* d[j] = s[j] rounded, for j < n. */
TP_HIDDEN void tp__half_round(const float *s, int64_t n, int kind, uint16_t *d);

/* One element, either way. */
static inline float tp__half_to_f32(uint16_t h, int kind) {
    return kind == TP_HALF_BF16 ? tp__bf16_to_f32(h) : tp__f16_to_f32(h);
}

/* A number's 16-bit bits (through float, as c10 converts), and the value
 * they hold. */
static inline uint16_t tp__half_bits(double v, int kind) {
    return kind == TP_HALF_BF16 ? tp__f32_to_bf16((float)v) : tp__f32_to_f16((float)v);
}
static inline double tp__half_scalar(double v, int kind) { return tp__half_to_f32(tp__half_bits(v, kind), kind); }

#endif
