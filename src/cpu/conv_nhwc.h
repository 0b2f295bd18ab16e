/*
 * conv_nhwc.h - float32 convolution (groups 1) writing a channels-last
 * output, as an implicit GEMM or Winograd F(2x2, 3x3) / F(4x4, 3x3) on
 * gemm.h: see conv_nhwc_avx2.c (transforms: conv_wino.h).
 */
#ifndef TPEXPORT_CPU_CONV_NHWC_H
#define TPEXPORT_CPU_CONV_NHWC_H

#include <string.h>

#include "fast.h"
#include "gemm.h"

/* Winograd transforms of one tile (conv_wino.h), per ISA: in turns the
 * (m+2)^2 input pixels d[k] (cin floats each) into row 0 of the (m+2)^2
 * matrices v + x*xs; out turns row 0 of matrices m + x*xs (cout floats)
 * into the m^2 output pixels dst[k], adding bias and, unless res is NULL,
 * res[k], then with relu our relu (x > 0 or NaN ? x : +0). */
typedef struct tp_wino_tx {
    void (*in)(const float *const *d, float *v, size_t xs, int64_t cin);
    void (*out)(const float *m, size_t xs, int64_t cout, const float *bias, float *const *dst,
                const float *const *res, bool relu);
    /* F(2x2)'s weight transform over n floats of the 9 taps g into the 12
     * values of U = G g G^T that are not taps (conv_wino.h's u12) */
    void (*u12)(const float *const *g, float *const *u, int64_t n);
} tp_wino_tx;

/* A depthwise convolution (groups = channels = the pointwise convolution's
 * cin, dilation 1) whose output is only the input of a pointwise
 * convolution (tp_conv_nhwc.pre_dw): the pointwise convolution's GEMM computes
 * it into A a block at a time (its a_fill), so the depthwise output, as
 * large as the expanded tensor of an inverted-residual block, is never
 * written out and read back. x is then the depthwise convolution's NHWC
 * input (h x w x cin per image); its output is the pointwise
 * convolution's h x w. Each output is bias + the taps' products, added
 * with fused multiply-adds in tap order (kernel row, then column; taps in
 * the padding skipped), then act; the same whatever the thread count, the
 * block or the vector a channel falls in. */
typedef struct tp_conv_dw {
    int64_t h, w, kh, kw, sh, sw, ph, pw;
    float *weight;             /* owned: kh * kw rows of cin floats (tap-major), then cin bias floats */
    int relu;                  /* 1: relu, 2: relu6 (x != x ? x : clamp to [0, 6]), applied in registers */
    const tp_op_plan *act;     /* another activation, applied to each filled block (borrowed), or NULL */
    /* An expansion (tp__conv_nhwc_set_dw_expand), or ex_cin 0: the
     * depthwise input is itself a pointwise convolution of x (NHWC, h x w x
     * ex_cin per image): ex_act(x . W + ex_bias), each of its rows computed
     * when a fill first needs it (a product of w x ex_cin by the packed W,
     * ex_cin x cin, on gemm.h at the AVX-512 level) into a ring of kh rows in
     * the thread's fill scratch, so the expanded tensor is never written
     * out either. A row's values do not depend on the fill, the block or the
     * thread that computes it. */
    int64_t ex_cin;
    void *ex_wbase;            /* owned allocation of ex_wpack */
    const void *ex_wpack;      /* packed W, 64-byte aligned inside ex_wbase */
    float *ex_bias;            /* owned: cin floats, or NULL */
    const tp_op_plan *ex_act;  /* borrowed, or NULL */
    int ex_act_relu;           /* tp__fused_relu_mode(ex_act) (tp_gemm_epilogue.act_relu) */
    size_t ex_gemm_ws;         /* workspace bytes of one row's product */
} tp_conv_dw;

/* Most kernel rows a fused depthwise convolution may have (its fill keeps a
 * pointer per kernel row). An expansion's fill scratch starts with a
 * header of TP_CONV_DW_RING_HEADER bytes: the flag the GEMM zeroes when a
 * run starts (its first 64 bytes), then a tag per ring slot (int64). */
enum { TP_CONV_DW_MAX_KH = 16, TP_CONV_DW_RING_HEADER = 64 + 8 * TP_CONV_DW_MAX_KH };

/* The product computing one row of a tp_conv_dw's expansion (x: the row's
 * dw->w pixels of ex_cin floats; out: its w x cin outputs), with the
 * expansion's bias and activation. */
static inline tp_gemm tp__conv_dw_ex_gemm(const tp_conv_dw *dw, int64_t cin, const float *x, float *out) {
    tp_gemm g;
    memset(&g, 0, sizeof g);
    g.isa = TP_ISA_AVX512;
    g.m = dw->w;
    g.n = cin;
    g.k = dw->ex_cin;
    g.a = x;
    g.rs_a = dw->ex_cin;
    g.cs_a = 1;
    g.packed_b = dw->ex_wpack;
    g.c = out;
    g.ldc = cin;
    g.ep = tp__gemm_epilogue_default();
    g.ep.bias = dw->ex_bias;
    if (dw->ex_act) {
        g.ep.act = tp__fused_act;
        g.ep.act_ctx = dw->ex_act;
        g.ep.act_relu = dw->ex_act_relu;
    }
    return g;
}

/* Fill scratch bytes per thread of a fused depthwise convolution over cin
 * channels (0 without an expansion). */
TP_HIDDEN size_t tp__conv_dw_scratch_bytes(const tp_conv_dw *dw, int64_t cin);

/* The depthwise rows of tp_conv_dw in vectors of 16 (conv_wino_avx512.c):
 * rows [i0, i0 + rows) (output pixels of images of oh x ow) x channels
 * [p0, p0 + kc) into dst (row stride kc), x the NHWC input of cin
 * channels (with an expansion: its input, of ex_cin channels). scratch:
 * the thread's tp__conv_dw_scratch_bytes, as tp_gemm's a_fill gets it
 * (NULL without an expansion). */
TP_HIDDEN void tp__conv_dw_fill_avx512(const tp_conv_dw *dw, const float *x, int64_t cin, int64_t oh, int64_t ow,
                                       int64_t i0, int rows, int64_t p0, int64_t kc, float *dst, void *scratch);

/* A 16-bit depthwise convolution on NCHW tensors run 16 channels at a time
 * with the fill above (conv_dw16_avx512.c): per image and group of 16
 * channels, the input planes are widened and transposed (16 x 16 blocks
 * in registers) into a pixels x 16 float32 block (NHWC of 16 channels),
 * the fill computes blocks of output pixels x 16 (weights in registers,
 * channels along the vector, whatever the map's size), and each is
 * transposed back and rounded once into the 16 output planes. g: the geometry (relu 0, act NULL); wgroups: per group of
 * 16 channels, kh * kw rows of 16 weights then 16 biases (channels past c
 * zero). */
typedef struct tp_dw16 {
    int64_t n, c, oh, ow;
    tp_conv_dw g;
    const float *wgroups;
    int half; /* TP_HALF_* of x and y */
} tp_dw16;
/* Workspace bytes one thread needs. */
TP_HIDDEN size_t tp__dw16_thread_bytes(const tp_dw16 *d);
/* Thread ith of nth computes its (image, group) items; all nth together
 * compute y. ws: this thread's tp__dw16_thread_bytes bytes, 64-byte
 * aligned. AVX-512 only (cpuid checked by the caller). */
TP_HIDDEN void tp__dw16_run_avx512(const tp_dw16 *d, const uint16_t *x, uint16_t *y, int ith, int nth, void *ws);

/* The conversions tp__dw16_run_avx512 uses, for tests: wide[j] = h[j]
 * widened and r[j] = f[j] rounded, for j < n rounded down to a multiple
 * of 16 (the vectors only). */
TP_HIDDEN void tp__dw16_convert_avx512(const uint16_t *h, float *wide, const float *f, uint16_t *r, int64_t n,
                                       int half);

/* A prepared convolution: geometry (input n x cin x h x w, output n x cout
 * x oh x ow, kernel kh x kw, stride, symmetric padding, dilation) and the
 * algorithm, set by the caller; tp__conv_nhwc_init packs the weights.
 * winograd: 0 for the implicit GEMM, else m of Winograd F(m x m, 3x3)
 * (tp__conv_nhwc_winograd_ok says when it applies): (m+2)^2 GEMMs of
 * transformed input tiles by transformed weights. m = 2 does 2.25x fewer
 * multiplies than the implicit GEMM and rounds within a few float32 ulps of
 * the sums' magnitude; m = 4 does 4x fewer and its rounding is about 10x
 * the direct sum's (normwise 4e-6 with 64 input channels, 9e-6 with 256,
 * against 1.5e-7 and 2.5e-7 for a direct float32 sum: measured in numpy). */
typedef struct tp_conv_nhwc {
    int64_t n, cin, h, w, cout, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
    const float *bias;         /* borrowed: cout floats, or NULL */
    const tp_op_plan *act;     /* fused activation (borrowed), or NULL */
    int winograd;              /* 0, 2 or 4 */
    /* The direct kernel instead (conv_direct_avx512.c; TP_ISA_AVX512 only,
     * not Winograd, never with pre_dw, cat or scale_b): for few input
     * channels, where the implicit GEMM's rows would gather runs of a few
     * floats. Set by the caller before init. */
    bool direct;
    /* direct only: a max pool (dilation 1, at most TP_CONV_DIRECT_POOL_KH
     * rows a window) of the output fused after it, set by the caller after
     * init: window, stride, padding and the pooled size, which y then has
     * (pool_kh 0: none). Each thread computes the convolution's rows into
     * a ring of pool_kh rows and pools them from there, so the
     * convolution's output is never written out. */
    int64_t pool_kh, pool_kw, pool_sh, pool_sw, pool_ph, pool_pw, pool_oh, pool_ow;
    int threads;               /* most threads a run uses (Winograd's blocks of tiles) */
    int isa;                   /* set by init */
    int64_t k;                 /* implicit GEMM: kh * kw * cin; Winograd: cin */
    int64_t tiles_h, tiles_w;  /* Winograd: m x m output tiles per image */
    int64_t tile_block;        /* Winograd: tiles per block (per GEMM) */
    size_t wino_stride;        /* Winograd: bytes between the (m+2)^2 packed matrices (wino_otf: the 9 taps') */
    tp_wino_tx tx;             /* Winograd: the transforms, set by init */
    bool wino_relu;            /* Winograd: act is a plain relu, applied in tx.out (set by init) */
    size_t thread_bytes;       /* Winograd: workspace bytes per thread */
    /* Winograd F(2x2) over at most TP_WINO_OTF_MAX_TILES tiles (set by
     * init): the 9 taps' weights are packed (9 GEMM B matrices of Cin x
     * Cout), and each call builds the 16 transformed ones from them, a
     * chunk of otf_kc input channels of one weight panel at a time
     * (winograd_otf). With few tiles each transformed weight serves few
     * rows, so reading 9 values a channel pair from memory instead of 16
     * outweighs the transform's adds. */
    bool wino_otf;
    int64_t otf_kc;
    void *wbase, *wpack;       /* packed weights (owned; wpack 64-byte aligned inside wbase) */
    size_t packed_bytes;
    /* A pointwise convolution whose calls pass in_scale with an NHWC x can
     * scale B instead of A (set by the caller after init, with
     * tp__conv_nhwc_scale_b): each thread scales its own copy of the
     * packed weights per image (K x N) and reads A in place, where scaling
     * A's blocks as they fill costs a pass over pixels x K. */
    bool scale_b;
    int scale_b_nth;           /* the most threads a run uses (their copies lead the workspace) */
    size_t scale_b_bytes;      /* bytes a copy takes, 64-byte aligned */
    /* Winograd on 16-bit NCHW tensors (a bfloat16 / float16 program's
     * convolution, fast_conv.c): 1 + the TP_HALF_* kind of x16 and y16,
     * else 0 (float32 x and y). Set by the caller before init. */
    int half16;
    int relu16; /* half16: a fused relu (1) or relu6 (2) before each tile's rounding (tp_gemm_bf16.relu) */
    /* A pointwise convolution whose input is a depthwise convolution's
     * output, computed into A as the GEMM fills it (owned; set by the
     * caller after init, with tp__conv_nhwc_set_dw), or NULL. */
    tp_conv_dw *pre_dw;
    /* A second convolution whose output this one's sums (a residual
     * block's last convolution beside its projection shortcut: y =
     * act(conv(x) + conv2(x2))), computed in the same GEMM: conv2's patches
     * are A's columns after this one's (K = k + cat->k), its weights B's
     * rows after this one's and its bias added into this one's, so its
     * output is never written and read back (owned; set by the caller after
     * init, with tp__conv_nhwc_set_cat), or NULL. */
    struct tp_conv_nhwc *cat;
    float *cat_bias; /* owned: the two biases' sum (bias then points here), or NULL when neither has one */
} tp_conv_nhwc;

/* Can the convolution geometry in cv run Winograd F(2x2, 3x3)? (3x3 kernel,
 * stride 1, dilation 1.) */
TP_HIDDEN bool tp__conv_nhwc_winograd_ok(const tp_conv_nhwc *cv);
/* Most tiles of a Winograd F(2x2) convolution whose transformed weights
 * are built per call (tp_conv_nhwc.wino_otf). One thread, 3x3 512 -> 512
 * with the weights cold (from memory), a timing loop over
 * tp__conv_nhwc_run, built per call against packed once (Zen 5): 5x5 map
 * (9 tiles) 0.66 against 0.91 ms, 7x7 (16) 0.90-0.93 against 1.06-1.08,
 * 9x9 and 10x10 (25) 1.22-1.23 against 1.16-1.17, two 7x7 images (32)
 * 1.56-1.65 against 1.36-1.40; 7x7 256 -> 256 0.224 against 0.270.
 * ResNet-50's two 7x7x512 layers in the model (per-node sums of alternating
 * runs): 1.73-1.78 against 1.96-2.00 ms at 1 thread, 0.95-0.96 against
 * 1.10-1.21 at 2; its 14x14x256 ones (49 tiles) lost with it (2.69-2.83
 * against 2.55-2.72 ms, 1.49-1.52 against 1.29-1.40). */
enum { TP_WINO_OTF_MAX_TILES = 16 };

/* m x m output tiles over the whole batch (partial tiles at the edges
 * count). */
static inline int64_t tp__conv_nhwc_tiles(const tp_conv_nhwc *cv, int m) {
    return cv->n * ((cv->oh + m - 1) / m) * ((cv->ow + m - 1) / m);
}
/* Is it a 1x1 stride-1 unpadded convolution? (Then an NHWC input is the
 * GEMM's A itself, read in place.) */
TP_HIDDEN bool tp__conv_nhwc_pointwise(const tp_conv_nhwc *cv);
/* The AVX-512 transforms of F(m x m, 3x3) (conv_wino_avx512.c; m 2 or 4). */
TP_HIDDEN tp_wino_tx tp__wino_tx_avx512(int m);

/* Choose scale_b for a pointwise convolution whose calls will pass
 * in_scale with an NHWC x, run by up to nth threads: when each thread's
 * copy of the weights (K x N, per image) costs at most half of scaling A
 * (pixels x K per image). */
TP_HIDDEN void tp__conv_nhwc_scale_b(tp_conv_nhwc *cv, int nth);

/* Make a pointwise convolution (implicit GEMM at TP_ISA_AVX512, not
 * Winograd, no scale_b)
 * compute its input from a depthwise convolution of geometry g (h, w,
 * kh, kw, sh, sw, ph, pw; its output h x w must be cv's) with weight
 * [cin][1][kh][kw], bias (cin floats, or NULL) and activation act (NULL,
 * or a fused unary activation: relu and relu6 run in registers): calls
 * then pass the depthwise input, NHWC, as x. */
TP_HIDDEN tp_status tp__conv_nhwc_set_dw(tp_conv_nhwc *cv, const tp_conv_dw *g, const float *weight, const float *bias,
                                         const tp_op_plan *act);

/* Make an implicit-GEMM convolution cv (not Winograd, no pre_dw or
 * scale_b) also compute a second convolution of geometry g2 (n, cout, oh
 * and ow cv's; cin, h, w, kernel, stride, padding and dilation its own;
 * groups 1; the implicit GEMM, whatever g2->winograd says) and sum it into
 * its output before the activation: weight is cv's own (OIHW, as init got
 * it), weight2 g2's, bias2 g2's bias (cout floats, or NULL). Calls then
 * pass g2's input as x2. */
TP_HIDDEN tp_status tp__conv_nhwc_set_cat(tp_conv_nhwc *cv, const tp_conv_nhwc *g2, const float *weight,
                                          const float *weight2, const float *bias2);

/* ... and, after tp__conv_nhwc_set_dw, make that depthwise convolution's
 * input the output of a pointwise convolution (1x1, stride 1, no padding,
 * groups 1) of ex_cin channels with weight [cin][ex_cin] (OIHW), bias (cin
 * floats, or NULL) and activation act (NULL, or a fused unary activation):
 * calls then pass the expansion's input, NHWC, as x (tp_conv_dw.ex_cin). */
TP_HIDDEN tp_status tp__conv_nhwc_set_dw_expand(tp_conv_nhwc *cv, int64_t ex_cin, const float *weight,
                                                const float *bias, const tp_op_plan *act);

/* One call's tensors: x (NHWC, or NCHW when x_nhwc is false), y (NHWC),
 * res (NHWC like y, or NULL; y itself is allowed, other overlap is not).
 * in_scale (pointwise convolutions only, else NULL): the input is x times
 * in_scale[img * in_scale_ns + c] per image and input channel (a
 * squeeze-excitation multiply fused into the projection after it; ns 0
 * broadcasts one scale vector over the batch), applied to A's blocks as the
 * GEMM fills them, or with scale_b to each thread's copy of the weights, so
 * the scaled input is never written out. */
typedef struct tp_conv_nhwc_call {
    const tp_conv_nhwc *conv;
    const float *x;
    bool x_nhwc;
    float *y;
    /* conv->half16 (Winograd only): x16 (N x cin x h x w) and y16 (N x
     * cout x oh x ow), contiguous NCHW 16-bit, instead of x and y. Each
     * thread widens the m + 2 input rows of its current row of tiles into
     * an NHWC float32 window, and rounds each finished tile once into y16
     * (to nearest even, as half.h rounds). */
    const uint16_t *x16;
    uint16_t *y16;
    /* ... and a fused residual of y16's shape (NCHW), or NULL: each tile's
     * result rounded, plus the residual, rounded again (the add step's
     * bits), before relu16 */
    const uint16_t *res16;
    const float *res;
    /* conv->cat's input (NHWC, or NCHW when x2_nhwc is false), else NULL */
    const float *x2;
    bool x2_nhwc;
    const float *in_scale;
    int64_t in_scale_ns;
} tp_conv_nhwc_call;

#define TP_CONV_DIRECT_POOL_KH 8

/* The direct kernel (conv_direct_avx512.c, cv->direct): bytes of the
 * packed weights (64-column panels of K = cin x kh x kw rows), packing them
 * from OIHW weight into dst (64-byte aligned), workspace bytes per thread
 * (64-byte multiple), and thread ith of nth's share of a call (whole output
 * rows). */
TP_HIDDEN size_t tp__conv_direct_packed_bytes_avx512(const tp_conv_nhwc *cv);
TP_HIDDEN void tp__conv_direct_pack_avx512(const tp_conv_nhwc *cv, const float *weight, float *dst);
TP_HIDDEN size_t tp__conv_direct_thread_bytes_avx512(const tp_conv_nhwc *cv);
TP_HIDDEN void tp__conv_direct_run_avx512(const tp_conv_nhwc_call *call, int ith, int nth, void *workspace);

/* Pack weight (OIHW, [cout][cin][kh][kw]) for ISA level isa (TP_ISA_AVX2
 * or TP_ISA_AVX512). Every function here is built with AVX2 + FMA: call
 * them only where cpuid said the CPU has both (the oneDNN layout pass). */
TP_HIDDEN tp_status tp__conv_nhwc_init(tp_conv_nhwc *cv, int isa, const float *weight);
TP_HIDDEN void tp__conv_nhwc_free(tp_conv_nhwc *cv);
/* Workspace bytes for nth threads (64-byte aligned block, shared by them;
 * with scale_b, nth at most scale_b_nth). */
TP_HIDDEN size_t tp__conv_nhwc_workspace(const tp_conv_nhwc *cv, int nth);
/* Thread ith of nth computes its part; all nth together compute y. */
TP_HIDDEN void tp__conv_nhwc_run(const tp_conv_nhwc_call *call, int ith, int nth, void *workspace);
/* The same with the GEMM's units claimed at run time (tp__gemm_run_claimed;
 * claims as tp_exec.claims, NULL for the static split). */
TP_HIDDEN void tp__conv_nhwc_run_claimed(const tp_conv_nhwc_call *call, int ith, int nth, void *workspace,
                                         tp_claim *claims);

#endif
