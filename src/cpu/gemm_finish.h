/*
 * gemm_finish.h - the GEMM epilogue's row loops (bias, residual, activation)
 * as one body, compiled by gemm.c (portable) and by gemm_avx2.c /
 * gemm_avx512.c (at -O3 with their ISA flags, so the loops vectorise at
 * the width of the micro-kernel). Define TP__GEMM_FINISH_NAME first.
 */
#include "gemm.h"

/* bias, residual and act on rows [i0, i0 + rows) x columns [j0, j0 + cols)
 * of C (row stride ldc), which already hold alpha*A*B + beta*C_old. */
void TP__GEMM_FINISH_NAME(const tp_gemm_epilogue *ep, float *c, int64_t ldc, int64_t i0, int64_t rows, int64_t j0,
                          int64_t cols) {
    const bool rows_contiguous = j0 == 0 && cols == ldc;
    for (int64_t i = i0; i < i0 + rows; i++) {
        float *restrict row = c + i * ldc + j0;
        const float *restrict res = ep->residual ? ep->residual + i * ep->ld_residual + j0 : NULL;
        if (ep->bias && ep->bias_per_row) {
            const float bias = ep->bias[i];
            if (res) for (int64_t j = 0; j < cols; j++) row[j] = (row[j] + bias) + res[j];
            else for (int64_t j = 0; j < cols; j++) row[j] += bias;
        } else if (ep->bias) {
            /* bias then residual in one pass (a transformer's output
             * projections have both), the same roundings as two */
            const float *restrict bias = ep->bias + j0;
            if (res) for (int64_t j = 0; j < cols; j++) row[j] = (row[j] + bias[j]) + res[j];
            else for (int64_t j = 0; j < cols; j++) row[j] += bias[j];
        } else if (res) {
            for (int64_t j = 0; j < cols; j++) row[j] += res[j];
        }
        if (ep->act && !rows_contiguous) ep->act(row, cols, ep->act_ctx);
    }
    /* whole rows back to back: one call for the block (a narrow C, such
     * as a pointwise convolution's 16-96 channels, made a call per row) */
    if (ep->act && rows_contiguous && rows > 0) ep->act(c + i0 * ldc, rows * cols, ep->act_ctx);
}
