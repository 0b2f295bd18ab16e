/*
 * fast_attention.c - fast variant (contract v2) of float32
 * scaled_dot_product_attention: one fused kernel, blocked FlashAttention-
 * style with an online softmax, so no L x S score matrix is materialised.
 *
 * For each batch index and block of BQ query rows (a thread owns whole
 * blocks), the key/value sequence is walked in blocks of BK:
 *     S = scale * Q_blk K_blk^T (+ mask, causal)      GEMM, BQ x BK
 *     m' = max(m, rowmax S);  P = exp(S - m');  l = l e^(m - m') + rowsum P
 *     O = O e^(m - m') + P V_blk                       GEMM, BQ x Ev
 * and finally O / l. Rows whose every score is masked give zeros, as
 * PyTorch's safe softmax. Workspace per thread: S, O and the row
 * statistics, plus the GEMM's own. Dropout must be 0 (eval).
 */
#include <math.h>

#include "eltwise.h"
#include "fast.h"
#include "gemm.h"
#include "kernel_util.h"
#include "vmath.h"

enum { A_Q, A_K, A_V, A_MASK, A_DROPOUT, A_CAUSAL, A_SCALE };
#define BQ 64
#define BK 256

typedef struct attn_plan {
    int isa;
    int nb;
    int64_t batch[TP_MAX_DIMS];
    int64_t qbs[TP_MAX_DIMS], kbs[TP_MAX_DIMS], vbs[TP_MAX_DIMS], mbs[TP_MAX_DIMS];
    int64_t L, S, E, Ev;
    int64_t qls, qes, kss, kes, vss, ves, mls, mss;
    bool has_mask, bool_mask, causal;
    float scale;
    int64_t n_batch, q_blocks;
    size_t ws_thread, gemm_ws;
} attn_plan;

static void batch_offsets(const attn_plan *ap, int64_t b, int64_t *oq, int64_t *ok, int64_t *ov, int64_t *om) {
    int64_t q = 0, k = 0, v = 0, m = 0;
    for (int d = ap->nb - 1; d >= 0; d--) {
        int64_t i = b % ap->batch[d];
        b /= ap->batch[d];
        q += i * ap->qbs[d];
        k += i * ap->kbs[d];
        v += i * ap->vbs[d];
        m += i * ap->mbs[d];
    }
    *oq = q, *ok = k, *ov = v, *om = m;
}

static tp_status attn_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const attn_plan *ap = plan->data;
    const float *q = (const float *)tp__tensor_base(in[0]);
    const float *k = (const float *)tp__tensor_base(in[1]);
    const float *v = (const float *)tp__tensor_base(in[2]);
    const char *mask = ap->has_mask ? tp__tensor_base(in[3]) : NULL;
    float *y = (float *)tp__tensor_base(out[0]);
    char *ws = (char *)ex->workspace + (size_t)ex->ith * ap->ws_thread;
    float *s = (float *)ws, *o = s + BQ * BK, *mrow = o + BQ * ap->Ev, *lrow = mrow + BQ;
    void *gws = lrow + BQ;
    int64_t items = ap->n_batch * ap->q_blocks;
    for (int64_t it = ex->ith; it < items; it += ex->nth) {
        int64_t b = it / ap->q_blocks, l0 = (it % ap->q_blocks) * BQ;
        int64_t nq = ap->L - l0 < BQ ? ap->L - l0 : BQ;
        int64_t oq, ok, ov, om;
        batch_offsets(ap, b, &oq, &ok, &ov, &om);
        for (int64_t r = 0; r < nq; r++) {
            mrow[r] = -INFINITY;
            lrow[r] = 0.0f;
        }
        bool first = true;
        /* causal: keys beyond the block's last query never count */
        int64_t s_end = ap->causal ? (l0 + nq < ap->S ? l0 + nq : ap->S) : ap->S;
        for (int64_t s0 = 0; s0 < s_end; s0 += BK) {
            int64_t ns = s_end - s0 < BK ? s_end - s0 : BK;
            tp_gemm g1 = {.isa = ap->isa, .m = nq, .n = ns, .k = ap->E, .a = q + oq + l0 * ap->qls, .rs_a = ap->qls,
                          .cs_a = ap->qes, .b = k + ok + s0 * ap->kss, .rs_b = ap->kes, .cs_b = ap->kss, .c = s, .ldc = ns};
            g1.ep = tp__gemm_epilogue_default();
            g1.ep.alpha = ap->scale;
            tp__gemm_run(&g1, 0, 1, gws);
            for (int64_t r = 0; r < nq; r++) {
                float *row = s + r * ns;
                int64_t l = l0 + r;
                if (mask) {
                    const char *mr = mask + (om + l * ap->mls + s0 * ap->mss) * (ap->bool_mask ? 1 : 4);
                    if (ap->bool_mask)
                        for (int64_t j = 0; j < ns; j++) row[j] = mr[j * ap->mss] ? row[j] : -INFINITY;
                    else
                        for (int64_t j = 0; j < ns; j++) row[j] += ((const float *)mr)[j * ap->mss];
                }
                if (ap->causal)
                    for (int64_t j = l + 1 - s0 < 0 ? 0 : l + 1 - s0; j < ns; j++) row[j] = -INFINITY;
                float mx = -INFINITY;
                for (int64_t j = 0; j < ns; j++) mx = row[j] > mx || row[j] != row[j] ? row[j] : mx;
                float m_new = mx > mrow[r] || mx != mx ? mx : mrow[r];
                if (m_new == -INFINITY) { /* nothing visible yet in this row */
                    for (int64_t j = 0; j < ns; j++) row[j] = 0.0f;
                    if (first)
                        for (int64_t e = 0; e < ap->Ev; e++) o[r * ap->Ev + e] = 0.0f;
                    continue;
                }
                float corr = mrow[r] == -INFINITY ? 0.0f : tp__exp_f32(mrow[r] - m_new);
                float sum = tp__vexp_sub_sum_f32(row, row, ns, m_new, NULL);
                lrow[r] = lrow[r] * corr + sum;
                mrow[r] = m_new;
                if (!first)
                    for (int64_t e = 0; e < ap->Ev; e++) o[r * ap->Ev + e] *= corr;
            }
            tp_gemm g2 = {.isa = ap->isa, .m = nq, .n = ap->Ev, .k = ns, .a = s, .rs_a = ns, .cs_a = 1,
                          .b = v + ov + s0 * ap->vss, .rs_b = ap->vss, .cs_b = ap->ves, .c = o, .ldc = ap->Ev};
            g2.ep = tp__gemm_epilogue_default();
            g2.ep.beta = first ? 0.0f : 1.0f;
            tp__gemm_run(&g2, 0, 1, gws);
            first = false;
        }
        for (int64_t r = 0; r < nq; r++) {
            float *dst = y + (b * ap->L + l0 + r) * ap->Ev;
            float inv = lrow[r] > 0.0f ? 1.0f / lrow[r] : 0.0f; /* fully masked rows: zeros */
            if (first)
                for (int64_t e = 0; e < ap->Ev; e++) dst[e] = 0.0f;
            else
                for (int64_t e = 0; e < ap->Ev; e++) dst[e] = o[r * ap->Ev + e] * inv;
        }
    }
    return TP_OK;
}

static void attn_free(void *data) { tp_free(data); }

static tp_status attn_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *outv,
                              tp_op_plan *plan) {
    tp_tensor *q = tp__arg_tensor(bound, A_Q), *k = tp__arg_tensor(bound, A_K), *v = tp__arg_tensor(bound, A_V);
    tp_tensor *mask = tp__arg_tensor(bound, A_MASK), *y = tp__fast_out(outv);
    if (!q || !k || !v || !y || q->dtype != TP_FLOAT32 || k->dtype != TP_FLOAT32 || v->dtype != TP_FLOAT32)
        return TP_ERR_UNSUPPORTED;
    if (tp__arg_f64(bound, A_DROPOUT) != 0.0 || tp_tensor_numel(y) == 0) return TP_ERR_UNSUPPORTED;
    if (mask && mask->dtype != TP_BOOL && mask->dtype != TP_FLOAT32) return TP_ERR_UNSUPPORTED;
    attn_plan *ap = tp_calloc(1, sizeof *ap);
    TP_CHECK(ap != NULL, TP_ERR_NOMEM, "out of memory preparing attention");
    ap->nb = y->ndim - 2;
    for (int d = 0; d < ap->nb; d++) ap->batch[d] = y->sizes[d];
    tp__broadcast_strides(q, q->ndim - 2, ap->nb, ap->batch, ap->qbs);
    tp__broadcast_strides(k, k->ndim - 2, ap->nb, ap->batch, ap->kbs);
    tp__broadcast_strides(v, v->ndim - 2, ap->nb, ap->batch, ap->vbs);
    ap->L = q->sizes[q->ndim - 2];
    ap->E = q->sizes[q->ndim - 1];
    ap->S = k->sizes[k->ndim - 2];
    ap->Ev = v->sizes[v->ndim - 1];
    ap->qls = q->strides[q->ndim - 2], ap->qes = q->strides[q->ndim - 1];
    ap->kss = k->strides[k->ndim - 2], ap->kes = k->strides[k->ndim - 1];
    ap->vss = v->strides[v->ndim - 2], ap->ves = v->strides[v->ndim - 1];
    if (mask) {
        ap->has_mask = true;
        ap->bool_mask = mask->dtype == TP_BOOL;
        tp__broadcast_strides(mask, mask->ndim - 2, ap->nb, ap->batch, ap->mbs);
        int d = mask->ndim - 2;
        ap->mls = d >= 0 && mask->sizes[d] != 1 ? mask->strides[d] : 0;
        ap->mss = mask->sizes[mask->ndim - 1] != 1 ? mask->strides[mask->ndim - 1] : 0;
    }
    ap->causal = tp__arg_bool(bound, A_CAUSAL);
    ap->scale = tp__arg_is_none(bound, A_SCALE) ? (float)(1.0 / sqrt((double)ap->E)) : (float)tp__arg_f64(bound, A_SCALE);
    ap->n_batch = 1;
    for (int d = 0; d < ap->nb; d++) ap->n_batch *= ap->batch[d];
    ap->q_blocks = (ap->L + BQ - 1) / BQ;
    ap->isa = info->cpu_level >= TP_CPU_AVX512 ? TP_ISA_AVX512 : info->cpu_level >= TP_CPU_AVX2 ? TP_ISA_AVX2 : TP_ISA_SCALAR;
    if (ap->isa > tp__gemm_best_isa()) ap->isa = tp__gemm_best_isa();
    tp_gemm g1 = {.isa = ap->isa, .m = BQ, .n = BK, .k = ap->E, .b = (const float *)8, .rs_b = ap->kes, .cs_b = ap->kss, .ldc = BK};
    tp_gemm g2 = {.isa = ap->isa, .m = BQ, .n = ap->Ev, .k = BK, .b = (const float *)8, .rs_b = ap->vss, .cs_b = ap->ves,
                  .ldc = ap->Ev};
    size_t w1 = tp__gemm_workspace_bytes(&g1, 1), w2 = tp__gemm_workspace_bytes(&g2, 1);
    ap->gemm_ws = w1 > w2 ? w1 : w2;
    ap->ws_thread = ((size_t)(BQ * BK + BQ * ap->Ev + 2 * BQ) * sizeof(float) + ap->gemm_ws + 127) & ~(size_t)63;
    double flops = 4.0 * (double)ap->n_batch * (double)ap->L * (double)ap->S * (double)(ap->E + ap->Ev) / 2;
    double want = flops / 2e6; /* clamped before the conversion: a huge estimate would overflow int */
    int threads = want < 1 ? 1 : want > (double)info->max_threads ? info->max_threads : (int)want;
    int64_t items = ap->n_batch * ap->q_blocks;
    if (threads < 1) threads = 1;
    if (threads > info->max_threads) threads = info->max_threads;
    if (threads > items) threads = (int)items;
    plan->data = ap;
    plan->free_data = attn_free;
    plan->run = attn_run;
    plan->max_threads = threads;
    plan->workspace = ap->ws_thread * (size_t)threads;
    plan->variant = ap->isa == TP_ISA_AVX512 ? "avx512" : ap->isa == TP_ISA_AVX2 ? "avx2" : "scalar";
    return TP_OK;
}

void tp__register_fast_attention(void) {
    tp__register_variant(TP_OP_SCALED_DOT_PRODUCT_ATTENTION, "flash", TP_CPU_SCALAR, attn_prepare);
}
