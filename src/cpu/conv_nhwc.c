/*
 * conv_nhwc.c - float32 convolution with a channels-last (NHWC) output as
 * an implicit GEMM on our GEMM (gemm.h): output pixels are the rows of C,
 * the weights, packed once, are B (K = KH*KW*Cin ordered kh, kw, c), and
 * A's rows are the input patches, gathered by the GEMM's a_fill callback
 * an L2-sized block at a time (im2col per K block: in NHWC each tap of a
 * pixel is a run of Cin contiguous floats). Bias, a summed residual and a
 * fused activation run in the GEMM epilogue.
 *
 * The oneDNN region pass (onednn.c) uses it for convolutions inside NHWC
 * regions where it measured faster than oneDNN's own kernel (see there);
 * the input may be NHWC or NCHW (a region's edge: gathered with strides).
 * Threads split the GEMM (pixels and output channels); every output is
 * reduced in the same order whatever the thread count.
 */
#include "conv_nhwc.h"

#include <string.h>

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

tp_status tp__conv_nhwc_init(tp_conv_nhwc *cv, int isa, const float *weight) {
    const int64_t taps = cv->kh * cv->kw, k = taps * cv->cin;
    cv->isa = isa;
    cv->k = k;
    cv->packed_bytes = tp__gemm_packed_b_bytes(isa, k, cv->cout);
    float *b = tp_malloc((size_t)(k * cv->cout) * sizeof(float) + 1);
    cv->wbase = tp_malloc(cv->packed_bytes + 64);
    if (!b || !cv->wbase) {
        tp_free(b);
        tp_free(cv->wbase);
        cv->wbase = NULL;
        return tp_error(TP_ERR_NOMEM, "out of memory packing convolution weights");
    }
    /* B (p = tap * cin + c, o) = weight[o][c][tap] (OIHW; conv1d's OIK is OI1K) */
    for (int64_t o = 0; o < cv->cout; o++)
        for (int64_t c = 0; c < cv->cin; c++)
            for (int64_t t = 0; t < taps; t++) b[(t * cv->cin + c) * cv->cout + o] = weight[(o * cv->cin + c) * taps + t];
    cv->wpack = (void *)(((uintptr_t)cv->wbase + 63) & ~(uintptr_t)63);
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
    tp_gemm g = conv_nhwc_gemm(cv, NULL);
    return tp__gemm_workspace_bytes(&g, nth);
}

void tp__conv_nhwc_run(const tp_conv_nhwc_call *call, int ith, int nth, void *workspace) {
    tp_gemm g = conv_nhwc_gemm(call->conv, call);
    tp__gemm_run(&g, ith, nth, workspace);
}
