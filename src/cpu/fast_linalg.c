/*
 * fast_linalg.c - fast variants (contract v2) of the float32 (and bfloat16 / float16) matrix
 * products: linear, mm, addmm, matmul (1-D, 2-D, batched with
 * broadcasting), bmm and einsum's matrix-multiply forms, on the packed
 * SGEMM of gemm.c.
 *
 * Prepare describes every op as one problem over a broadcast batch:
 *     C[b] = alpha * A[b] x B[b] (+ bias row vector | + residual matrix)
 * with element strides for A and B (transposed or non-contiguous operands
 * are handled by the GEMM's packing, never by copies) and C contiguous.
 * Batch dims that B does not vary over are folded into M when A allows it,
 * so linear over [batch, seq, K] is one GEMM. A constant B (a weight no node
 * writes) is packed once at plan time and shared by every run context.
 * Threads split batches when there are enough, else the GEMM's M/N blocks.
 *
 * bfloat16 products on a CPU with AVX-512-BF16 run gemm_bf16.h's
 * vdpbf16ps GEMM (B packed in pairs: a constant weight at plan time, else
 * per batch into the workspace; tiles rounded from registers), which also
 * takes a following bias add and residual add, rounding before each. Other
 * bfloat16 and float16 products (all operands of the one dtype) run the
 * same float32 GEMM: their values widen to float32 exactly, so a constant
 * B is widened and packed as float32 at plan time, A's blocks are widened
 * as the GEMM fills them (its implicit-A hook), a non-constant B is widened
 * into the thread's workspace per batch, and C is computed in float32 in
 * the workspace, bias and alpha included, and rounded once (to nearest
 * even) as each finished row segment leaves the GEMM (its activation
 * hook). That is PyTorch's CPU product for these dtypes (oneDNN's or its
 * own, accumulating in float32); the reference kernel accumulates in
 * double, so the two differ by at most one unit in the last place of the
 * 16-bit result and the float32 accumulation's error. They take no other
 * fusion: a following activation rounds its input to 16 bits first.
 */
#include "einsum.h"
#include "eltwise.h"
#include "fast.h"
#include "gemm.h"
#include "gemm_bf16.h"
#include "half.h"
#include "kernel_util.h"

typedef struct mm_plan {
    int isa;
    tp_dtype dt;                     /* TP_FLOAT32, or TP_BFLOAT16 / TP_FLOAT16 computed in float32 */
    bool dot16;                      /* bfloat16 on vdpbf16ps (gemm_bf16.h): packed_b is in its layout */
    int half;                        /* 16-bit: TP_HALF_* (half.h) */
    int64_t m, n, k;
    int nb;                          /* batch dims of C */
    int64_t bsize[TP_MAX_DIMS];
    int64_t bsa[TP_MAX_DIMS], bsb[TP_MAX_DIMS]; /* element strides of A and B per batch dim (0: broadcast) */
    int64_t n_batch;
    int64_t rs_a, cs_a, rs_b, cs_b;
    int ia, ib, ibias;               /* indices into in[]; ibias -1: none */
    int bias_mode;                   /* 0 none, 1 row vector of N, 2 residual M x N (contiguous) */
    int ires;                        /* fused residual: index into in[], -1 none */
    int ibias2;                      /* 16-bit: a fused bias add after the product's rounding, -1 none */
    const tp_op_plan *act;           /* fused activation (the consumer's plan), NULL none */
    float alpha;
    void *packed_base;               /* owned allocation of packed_b; NULL when B is not constant */
    void *packed_b;                  /* 64-byte aligned inside packed_base (the GEMM's loads of a
                                      * panel row must not straddle cache lines) */
    const float *packed_bt;          /* in packed_base after packed_b: B transposed for the GEMM's
                                      * dot path (tp__gemm_pack_bt), or NULL */
    float *bias32;                   /* 16-bit: a constant bias vector widened at plan time (owned) */
    size_t ws_c, ws_b, ws_bias;      /* 16-bit: bytes of the float32 C, B and bias in the workspace */
    size_t ws_thread;                /* workspace of one single-threaded GEMM */
    size_t ws_split;                 /* workspace of one GEMM split over max threads */
    int max_threads;
} mm_plan;

static void mm_free(void *data) {
    mm_plan *mp = data;
    if (!mp) return;
    tp_free(mp->packed_base);
    tp_free(mp->bias32);
    tp_free(mp);
}

static void batch_offsets(const mm_plan *mp, int64_t b, int64_t *oa, int64_t *ob) {
    int64_t a = 0, bb = 0;
    for (int d = mp->nb - 1; d >= 0; d--) {
        int64_t i = b % mp->bsize[d];
        b /= mp->bsize[d];
        a += i * mp->bsa[d];
        bb += i * mp->bsb[d];
    }
    *oa = a;
    *ob = bb;
}

/* Thread part's range of n batches split among nth, for tp__claim_next. */
typedef struct batch_parts {
    int64_t n;
    int nth;
} batch_parts;

static int64_t batch_part_units(const void *arg, int part) {
    const batch_parts *p = arg;
    return p->n * (part + 1) / p->nth - p->n * part / p->nth;
}

static tp_status mm_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const mm_plan *mp = plan->data;
    if (tp_tensor_numel(out[0]) == 0) return TP_OK; /* nothing to write (its batch dims may still be huge) */
    const float *a = (const float *)tp__tensor_base(in[mp->ia]);
    const float *b = mp->packed_b ? NULL : (const float *)tp__tensor_base(in[mp->ib]);
    const float *bias = mp->ibias >= 0 ? (const float *)tp__tensor_base(in[mp->ibias]) : NULL;
    float *c = (float *)tp__tensor_base(out[0]);
    tp_gemm g = {.isa = mp->isa, .m = mp->m, .n = mp->n, .k = mp->k, .rs_a = mp->rs_a, .cs_a = mp->cs_a,
                 .rs_b = mp->rs_b, .cs_b = mp->cs_b, .packed_b = mp->packed_b, .packed_bt = mp->packed_bt,
                 .ldc = mp->n};
    g.ep = tp__gemm_epilogue_default();
    g.ep.alpha = mp->alpha;
    if (mp->bias_mode == 1) g.ep.bias = bias;
    const float *res = mp->ires >= 0 ? (const float *)tp__tensor_base(in[mp->ires]) : NULL;
    if (mp->act) {
        g.ep.act = tp__fused_act;
        g.ep.act_ctx = mp->act;
        g.ep.act_relu = tp__fused_relu_mode(mp->act);
    }
    int64_t mn = mp->m * mp->n;
    /* with at least as many batches as threads, each thread takes a
     * contiguous range of them: the rows a softmax or another row-split
     * step reads next on the same thread (attention's heads) */
    bool split_batches = mp->n_batch >= ex->nth;
    /* claimed (threadpool.h): its own range front to back, then what is
     * left of the others'; else its own range, or every product split */
    const bool claimed = split_batches && ex->claims && ex->nth > 1;
    batch_parts parts = {mp->n_batch, ex->nth};
    tp_claim_walk walk = {ex->claims, ex->ith, ex->nth, 0};
    const int64_t b0 = split_batches ? mp->n_batch * ex->ith / ex->nth : 0;
    const int64_t b1 = split_batches ? mp->n_batch * (ex->ith + 1) / ex->nth : mp->n_batch;
    for (int64_t bi = b0;; bi++) {
        int part;
        int64_t u;
        if (claimed) {
            if (!tp__claim_next(&walk, batch_part_units, &parts, &part, &u)) break;
            bi = mp->n_batch * part / ex->nth + u;
        } else if (bi >= b1) {
            break;
        }
        int64_t oa, ob;
        batch_offsets(mp, bi, &oa, &ob);
        g.a = a + oa;
        g.b = b ? b + ob : NULL;
        g.c = c + bi * mn;
        if (mp->bias_mode == 2 || res) {
            g.ep.residual = (res ? res : bias) + bi * mn;
            g.ep.ld_residual = mp->n;
        }
        if (split_batches)
            tp__gemm_run(&g, 0, 1, ex->workspace ? (char *)ex->workspace + (size_t)ex->ith * mp->ws_thread : NULL);
        else /* one product: its units claimed at run time; several: each split statically */
            tp__gemm_run_claimed(&g, ex->ith, ex->nth, ex->workspace, mp->n_batch == 1 ? ex->claims : NULL);
    }
    return TP_OK;
}

/* ---- bfloat16 / float16 products ---- */

/* dst (rows x cols, row-major) = the 16-bit matrix at src, element (i, j)
 * at src[i*rs + j*cs], widened. */
static void half_widen(const uint16_t *src, int64_t rows, int64_t cols, int64_t rs, int64_t cs, int kind, float *dst) {
    for (int64_t i = 0; i < rows; i++) {
        const uint16_t *s = src + i * rs;
        float *d = dst + i * cols;
        if (cs == 1)
            tp__half_widen(s, cols, kind, d);
        else
            for (int64_t j = 0; j < cols; j++) d[j] = tp__half_to_f32(s[j * cs], kind);
    }
}

typedef struct half_a {
    const uint16_t *a;
    int64_t rs, cs;
    int kind; /* TP_HALF_* */
} half_a;

/* The GEMM's implicit-A hook: rows [i0, i0 + rows) x columns [p0, p0 + kc)
 * of the 16-bit A, widened. */
static void half_a_fill(const void *ctx, int64_t i0, int rows, int64_t p0, int64_t kc, float *dst,
                        void *scratch) {
    (void)scratch;
    const half_a *h = ctx;
    half_widen(h->a + i0 * h->rs + p0 * h->cs, rows, kc, h->rs, h->cs, h->kind, dst);
}

typedef struct half_c {
    const float *c32; /* the float32 C the GEMM writes (row stride N) */
    uint16_t *o;      /* the output, contiguous, same shape */
    int kind;         /* TP_HALF_* */
} half_c;

/* The GEMM's activation hook: a finished segment of the float32 C,
 * rounded into the output at the same offset. */
static void half_store(float *ptr, int64_t n, const void *ctx) {
    const half_c *h = ctx;
    tp__half_round(ptr, n, h->kind, h->o + (ptr - h->c32));
}

static tp_status mm_run_half(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const mm_plan *mp = plan->data;
    if (tp_tensor_numel(out[0]) == 0) return TP_OK;
    const int kind = mp->half;
    const uint16_t *a = (const uint16_t *)tp__tensor_base(in[mp->ia]);
    const uint16_t *b = mp->packed_b ? NULL : (const uint16_t *)tp__tensor_base(in[mp->ib]);
    uint16_t *c = (uint16_t *)tp__tensor_base(out[0]);
    const bool split_batches = mp->n_batch >= ex->nth;
    /* workspace: split batches, per thread [GEMM | C | B | bias]; else
     * [GEMM of nth threads | C], then per thread [B | bias] */
    char *ws = ex->workspace, *gemm_ws, *mine;
    float *c32;
    if (split_batches) {
        gemm_ws = ws + (size_t)ex->ith * (mp->ws_thread + mp->ws_c + mp->ws_b + mp->ws_bias);
        c32 = (float *)(gemm_ws + mp->ws_thread);
        mine = (char *)c32 + mp->ws_c;
    } else {
        gemm_ws = ws;
        c32 = (float *)(ws + mp->ws_split);
        mine = (char *)c32 + mp->ws_c + (size_t)ex->ith * (mp->ws_b + mp->ws_bias);
    }
    const float *bias = mp->bias32;
    if (mp->bias_mode == 1 && !bias) {
        float *bw = (float *)(mine + mp->ws_b);
        half_widen((const uint16_t *)tp__tensor_base(in[mp->ibias]), 1, mp->n, 0, 1, kind, bw);
        bias = bw;
    }
    int64_t mn = mp->m * mp->n;
    const int64_t b0 = split_batches ? mp->n_batch * ex->ith / ex->nth : 0;
    const int64_t b1 = split_batches ? mp->n_batch * (ex->ith + 1) / ex->nth : mp->n_batch;
    if (mp->dot16) {
        tp_gemm_bf16 g = {.m = mp->m, .n = mp->n, .k = mp->k, .rs_a = mp->rs_a, .cs_a = mp->cs_a,
                          .packed_b = mp->packed_b, .ldc = mp->n, .alpha = mp->alpha, .bias = bias, .ld_res = mp->n};
        if (mp->ibias2 >= 0) g.bias2 = (const uint16_t *)tp__tensor_base(in[mp->ibias2]);
        const uint16_t *res = mp->ires >= 0 ? (const uint16_t *)tp__tensor_base(in[mp->ires]) : NULL;
        for (int64_t bi = b0; bi < b1; bi++) {
            int64_t oa, ob;
            batch_offsets(mp, bi, &oa, &ob);
            g.a = a + oa;
            g.c = c + bi * mn;
            g.res = res ? res + bi * mn : NULL;
            if (b) { /* each thread packs the whole B it reads into its own copy */
                tp__gemm_bf16_pack_b(mp->k, mp->n, b + ob, mp->rs_b, mp->cs_b, mine);
                g.packed_b = mine;
            }
            if (split_batches) tp__gemm_bf16_run(&g, 0, 1, gemm_ws);
            else tp__gemm_bf16_run(&g, ex->ith, ex->nth, gemm_ws);
        }
        return TP_OK;
    }
    half_a ha = {.rs = mp->rs_a, .cs = mp->cs_a, .kind = kind};
    half_c hc = {.c32 = c32, .kind = kind};
    tp_gemm g = {.isa = mp->isa, .m = mp->m, .n = mp->n, .k = mp->k, .a_fill = half_a_fill, .a_ctx = &ha,
                 .packed_b = mp->packed_b, .rs_b = mp->n, .cs_b = 1, .c = c32, .ldc = mp->n};
    g.ep = tp__gemm_epilogue_default();
    g.ep.alpha = mp->alpha;
    g.ep.bias = bias;
    g.ep.act = half_store;
    g.ep.act_ctx = &hc;
    for (int64_t bi = b0; bi < b1; bi++) {
        int64_t oa, ob;
        batch_offsets(mp, bi, &oa, &ob);
        ha.a = a + oa;
        if (b) { /* each thread widens the whole B it reads into its own copy */
            half_widen(b + ob, mp->k, mp->n, mp->rs_b, mp->cs_b, kind, (float *)mine);
            g.b = (const float *)mine;
        }
        hc.o = c + bi * mn;
        if (split_batches)
            tp__gemm_run(&g, 0, 1, gemm_ws);
        else
            tp__gemm_run(&g, ex->ith, ex->nth, gemm_ws);
    }
    return TP_OK;
}

static tp_status mm_fuse(tp_op_plan *plan, const tp_op_plan *consumer, int kind, int leaf) {
    mm_plan *mp = plan->data;
    if (mp->act) return TP_ERR_UNSUPPORTED; /* nothing goes after the activation */
    if (mp->dt != TP_FLOAT32) {
        /* bfloat16 on vdpbf16ps: a bias add, then a residual add, each
         * rounding as its own step would (gemm_bf16.h); nothing else */
        if (!mp->dot16) return TP_ERR_UNSUPPORTED;
        if (kind == TP_FUSE_BIAS && mp->ibias2 < 0 && mp->ires < 0 && mp->n_batch >= 1) {
            mp->ibias2 = leaf;
            return TP_OK;
        }
        if (kind == TP_FUSE_RESIDUAL && mp->ires < 0) {
            mp->ires = leaf;
            return TP_OK;
        }
        return TP_ERR_UNSUPPORTED;
    }
    switch (kind) {
    case TP_FUSE_ACT: mp->act = consumer; return TP_OK;
    case TP_FUSE_RESIDUAL:
        if (mp->bias_mode == 2 || mp->ires >= 0) return TP_ERR_UNSUPPORTED;
        mp->ires = leaf;
        return TP_OK;
    case TP_FUSE_BIAS:
        if (mp->bias_mode != 0 || mp->ires >= 0 || mp->n_batch < 1) return TP_ERR_UNSUPPORTED;
        mp->bias_mode = 1;
        mp->ibias = leaf;
        return TP_OK;
    default: return TP_ERR_UNSUPPORTED;
    }
}

/* Matrix view of a 2-D-or-more operand's last two dims. */
typedef struct mat {
    const tp_tensor *t;
    int nbatch; /* leading dims */
    int64_t rows, cols, rs, cs;
} mat;

static mat as_mat(const tp_tensor *t, bool transpose) {
    mat m = {.t = t, .nbatch = t->ndim - 2};
    m.rows = t->sizes[t->ndim - 2];
    m.cols = t->sizes[t->ndim - 1];
    m.rs = t->strides[t->ndim - 2];
    m.cs = t->strides[t->ndim - 1];
    if (transpose) {
        int64_t x = m.rows;
        m.rows = m.cols;
        m.cols = x;
        x = m.rs;
        m.rs = m.cs;
        m.cs = x;
    }
    return m;
}

/* Finish a plan: fold batch into M where possible, pack a constant B,
 * size the workspace and threads. */
static tp_status mm_finish(const tp_prepare_info *info, mm_plan *mp, const tp_tensor *b_tensor, bool b_const,
                           tp_op_plan *plan) {
    /* fold trailing batch dims into M: B does not vary and A's rows continue */
    while (mp->nb > 0 && mp->bsb[mp->nb - 1] == 0 && mp->bsa[mp->nb - 1] == mp->rs_a * mp->m &&
           (mp->m == 1 || mp->rs_a != 0) && mp->bias_mode != 2) {
        mp->m *= mp->bsize[mp->nb - 1];
        mp->nb--;
    }
    if (mp->nb > 0 && mp->bsb[mp->nb - 1] == 0 && mp->m == 1 && mp->bias_mode != 2) {
        /* rows of A one batch stride apart: a strided A */
        mp->rs_a = mp->bsa[mp->nb - 1];
        mp->m = mp->bsize[mp->nb - 1];
        mp->nb--;
    }
    mp->n_batch = 1;
    for (int d = 0; d < mp->nb; d++) mp->n_batch *= mp->bsize[d];
    bool b_shared = true;
    for (int d = 0; d < mp->nb; d++) b_shared = b_shared && mp->bsb[d] == 0;
    mp->isa = info->cpu_level >= TP_CPU_AVX512 ? TP_ISA_AVX512 : info->cpu_level >= TP_CPU_AVX2 ? TP_ISA_AVX2 : TP_ISA_SCALAR;
    if (mp->isa > tp__gemm_best_isa()) mp->isa = tp__gemm_best_isa();
    mp->half = tp__half_kind(mp->dt, info->cpu_level);
    /* bfloat16 on AVX-512-BF16: B packed in pairs for vdpbf16ps (a
     * constant weight once, else per call into the workspace) */
    mp->dot16 = mp->dt == TP_BFLOAT16 && mp->k > 0 && mp->n > 0 && mp->isa == TP_ISA_AVX512 &&
                tp__gemm_bf16_supported();
    if (mp->dot16 && b_const && b_shared && b_tensor) {
        size_t bytes = tp__gemm_bf16_packed_b_bytes(mp->k, mp->n);
        mp->packed_base = tp__malloc_stream(bytes, &mp->packed_b);
        TP_CHECK(mp->packed_base != NULL, TP_ERR_NOMEM, "out of memory packing a weight");
        tp__gemm_bf16_pack_b(mp->k, mp->n, (const uint16_t *)tp__tensor_base(b_tensor), mp->rs_b, mp->cs_b,
                             mp->packed_b);
        plan->data_bytes = bytes;
    } else if (b_const && b_shared && b_tensor && mp->k > 0 && mp->n > 0) {
        /* The panels 64-byte aligned (tp__malloc_stream; tp_malloc gives
         * 16). Misaligned by 32 bytes, every zmm load of B straddled two
         * lines: a lone 197x384x1536 matmul took 1.77 ms against 1.44 for
         * the same GEMM on aligned panels (Ice Lake, one thread). */
        size_t bytes = tp__gemm_packed_b_bytes(mp->isa, mp->k, mp->n);
        /* float32 weights of N <= 15 (a classifier) with K >= 16 N also
         * transposed for the GEMM's dot path (gemm.h), after the panels */
        const size_t b_bytes = (bytes + 63) & ~(size_t)63;
        const size_t bt_bytes = mp->dt == TP_FLOAT32 ? tp__gemm_packed_bt_bytes(mp->isa, mp->k, mp->n) : 0;
        if (bt_bytes) bytes = b_bytes + bt_bytes;
        mp->packed_base = tp__malloc_stream(bytes, &mp->packed_b);
        TP_CHECK(mp->packed_base != NULL, TP_ERR_NOMEM, "out of memory packing a weight");
        if (mp->dt == TP_FLOAT32) {
            tp__gemm_pack_b(mp->isa, mp->k, mp->n, (const float *)tp__tensor_base(b_tensor), mp->rs_b, mp->cs_b,
                            mp->packed_b);
            if (bt_bytes) {
                mp->packed_bt = (const float *)((char *)mp->packed_b + b_bytes);
                tp__gemm_pack_bt(mp->isa, mp->k, mp->n, (const float *)tp__tensor_base(b_tensor), mp->rs_b, mp->cs_b,
                                 (char *)mp->packed_b + b_bytes);
            }
        } else { /* widened to float32 first (exact), then packed as float32 */
            float *wide = tp_malloc((size_t)mp->k * (size_t)mp->n * sizeof(float));
            TP_CHECK(wide != NULL, TP_ERR_NOMEM, "out of memory packing a weight");
            half_widen((const uint16_t *)tp__tensor_base(b_tensor), mp->k, mp->n, mp->rs_b, mp->cs_b,
                       tp__half_kind(mp->dt, TP_CPU_SCALAR), wide);
            tp__gemm_pack_b(mp->isa, mp->k, mp->n, wide, mp->n, 1, mp->packed_b);
            tp_free(wide);
        }
        plan->data_bytes = bytes;
    }
    double flops = 2.0 * (double)mp->m * (double)mp->n * (double)mp->k * (double)mp->n_batch;
    /* threads: one per 2 MFLOP, or per MiB of B to stream (a matrix-vector
     * product with a classifier's weights is bound by memory, which two
     * cores read faster than one) */
    double want = flops / 2e6; /* clamped before the conversion: a huge estimate would overflow int */
    double b_mib = 4.0 * (double)mp->k * (double)mp->n * (double)(b_shared ? 1 : mp->n_batch) / (1 << 20);
    if (b_mib > want) want = b_mib;
    /* N <= 16 (a classifier's few outputs): each element of A serves at most
     * 16 multiplies, so reading A is the work, and A is mostly the previous
     * step's output, which a split by columns left in both cores' caches;
     * one thread per 32 KiB of it. The MLP's 32 x 512 x 10 (0.3 MFLOP) at
     * 2 threads: 4.5 -> 3.2 us, the model 0.992x (Sapphire Rapids, 9
     * alternating pairs). */
    if (mp->n <= 16) {
        double a_units = 4.0 * (double)mp->m * (double)mp->k * (double)mp->n_batch / (32 << 10);
        if (a_units > want) want = a_units;
    }
    int threads = want < 1 ? 1 : want > (double)info->max_threads ? info->max_threads : (int)want;
    if (threads < 1) threads = 1;
    if (threads > info->max_threads) threads = info->max_threads;
    mp->max_threads = threads;
    tp_gemm g = {.isa = mp->isa, .m = mp->m, .n = mp->n, .k = mp->k, .rs_a = mp->rs_a, .cs_a = mp->cs_a,
                 .rs_b = mp->rs_b, .cs_b = mp->cs_b, .packed_b = mp->packed_b, .packed_bt = mp->packed_bt,
                 .ldc = mp->n};
    g.b = mp->packed_b ? NULL : (const float *)8; /* only the presence matters for sizing */
    if (mp->dt != TP_FLOAT32) { /* as mm_run_half calls it: A widened by blocks, B widened row-major */
        g.a_fill = half_a_fill;
        g.rs_a = g.cs_a = 0;
        g.rs_b = mp->n;
        g.cs_b = 1;
    }
    mp->ws_thread = (tp__gemm_workspace_bytes(&g, 1) + 63) & ~(size_t)63;
    mp->ws_split = (tp__gemm_workspace_bytes(&g, threads) + 63) & ~(size_t)63;
    if (mp->dot16) {
        tp_gemm_bf16 g16 = {.m = mp->m, .n = mp->n, .k = mp->k, .rs_a = mp->rs_a, .cs_a = mp->cs_a};
        mp->ws_thread = (tp__gemm_bf16_workspace_bytes(&g16, 1) + 63) & ~(size_t)63;
        mp->ws_split = (tp__gemm_bf16_workspace_bytes(&g16, threads) + 63) & ~(size_t)63;
    }
    size_t per_batch = mp->ws_thread * (size_t)threads;
    plan->workspace = per_batch > mp->ws_split ? per_batch : mp->ws_split;
    if (mp->dt != TP_FLOAT32) {
        mp->ws_c = mp->dot16 ? 0 : ((size_t)mp->m * (size_t)mp->n * sizeof(float) + 63) & ~(size_t)63;
        mp->ws_b = mp->packed_b ? 0
                   : mp->dot16 ? (tp__gemm_bf16_packed_b_bytes(mp->k, mp->n) + 63) & ~(size_t)63
                               : ((size_t)mp->k * (size_t)mp->n * sizeof(float) + 63) & ~(size_t)63;
        mp->ws_bias = mp->bias_mode == 1 && !mp->bias32 ? ((size_t)mp->n * sizeof(float) + 63) & ~(size_t)63 : 0;
        size_t extra = mp->ws_b + mp->ws_bias;
        per_batch = (mp->ws_thread + mp->ws_c + extra) * (size_t)threads;
        size_t shared = mp->ws_split + mp->ws_c + extra * (size_t)threads;
        plan->workspace = per_batch > shared ? per_batch : shared;
    }
    plan->data = mp;
    plan->free_data = mm_free;
    plan->run = mp->dt == TP_FLOAT32 ? mm_run : mm_run_half;
    if (mp->bias32) plan->data_bytes += (size_t)mp->n * sizeof(float);
    plan->fuse = mm_fuse;
    plan->max_threads = threads;
    plan->variant = mp->dot16 ? (tp__gemm_bf16_amx() ? "amx_bf16" : "avx512_bf16") : mp->isa == TP_ISA_AVX512 ? "avx512" : mp->isa == TP_ISA_AVX2 ? "avx2" : "scalar";
    return TP_OK;
}

/* The dtype a product runs in: float32, bfloat16 or float16, all of ts
 * alike (NULL entries skipped); TP_DTYPE_COUNT: none of them. */
static tp_dtype product_dtype(const tp_tensor *const *ts, int n) {
    tp_dtype dt = ts[0]->dtype;
    if (dt != TP_FLOAT32 && dt != TP_BFLOAT16 && dt != TP_FLOAT16) return TP_DTYPE_COUNT;
    for (int i = 1; i < n; i++)
        if (ts[i] && ts[i]->dtype != dt) return TP_DTYPE_COUNT;
    return dt;
}

/* A constant bias vector of a 16-bit product, widened once. */
static tp_status half_const_bias(mm_plan *mp, const tp_tensor *bias) {
    if (mp->dt == TP_FLOAT32) return TP_OK;
    mp->bias32 = tp_malloc((size_t)(mp->n > 0 ? mp->n : 1) * sizeof(float));
    TP_CHECK(mp->bias32 != NULL, TP_ERR_NOMEM, "out of memory preparing a bias");
    half_widen((const uint16_t *)tp__tensor_base(bias), 1, mp->n, 0, bias->strides[0],
               tp__half_kind(mp->dt, TP_CPU_SCALAR), mp->bias32);
    return TP_OK;
}

/* A x B for C = out: A [.., M, K] (or 1-D), B [.., K, N] (or 1-D). */
static tp_status matmul_like(const tp_prepare_info *info, const tp_tensor *a, const tp_tensor *b, const tp_tensor *out,
                             bool b_transposed, int ia, int ib, mm_plan **out_mp) {
    tp_dtype dt = product_dtype((const tp_tensor *[]){a, b, out}, 3);
    if (dt == TP_DTYPE_COUNT) return TP_ERR_UNSUPPORTED;
    if (a->ndim < 1 || b->ndim < 1 || out->ndim > TP_MAX_DIMS) return TP_ERR_UNSUPPORTED;
    mm_plan *mp = tp_calloc(1, sizeof *mp);
    TP_CHECK(mp != NULL, TP_ERR_NOMEM, "out of memory preparing a matrix product");
    mp->dt = dt;
    mp->ia = ia;
    mp->ib = ib;
    mp->ibias = -1;
    mp->ires = -1;
    mp->ibias2 = -1;
    mp->alpha = 1.0f;
    /* A rows/cols; a 1-D A is a 1 x K row */
    int a_batch;
    if (a->ndim == 1) {
        mp->m = 1;
        mp->k = a->sizes[0];
        mp->rs_a = 0;
        mp->cs_a = a->strides[0];
        a_batch = 0;
    } else {
        mat ma = as_mat(a, false);
        mp->m = ma.rows;
        mp->k = ma.cols;
        mp->rs_a = ma.rs;
        mp->cs_a = ma.cs;
        a_batch = ma.nbatch;
    }
    int b_batch;
    int64_t kb;
    if (b->ndim == 1) {
        kb = b->sizes[0];
        mp->n = 1;
        mp->rs_b = b->strides[0];
        mp->cs_b = 0;
        b_batch = 0;
    } else {
        mat mb = as_mat(b, b_transposed);
        kb = mb.rows;
        mp->n = mb.cols;
        mp->rs_b = mb.rs;
        mp->cs_b = mb.cs;
        b_batch = mb.nbatch;
    }
    if (kb != mp->k) {
        tp_free(mp);
        return TP_ERR_UNSUPPORTED; /* the shape rule reported it already */
    }
    /* C's batch dims: out minus its matrix dims (1-D operands drop one) */
    int out_mat = (a->ndim > 1) + (b->ndim > 1);
    mp->nb = out->ndim - out_mat;
    if (mp->nb < 0) {
        tp_free(mp);
        return TP_ERR_UNSUPPORTED;
    }
    for (int d = 0; d < mp->nb; d++) mp->bsize[d] = out->sizes[d];
    tp__broadcast_strides(a, a_batch, mp->nb, mp->bsize, mp->bsa);
    tp__broadcast_strides(b, b_batch, mp->nb, mp->bsize, mp->bsb);
    *out_mp = mp;
    return TP_OK;
}

/* matmul(self, other), mm(self, mat2), bmm(self, mat2) */
static tp_status matmul_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out, tp_op_plan *plan) {
    const tp_tensor *a = tp__arg_tensor(bound, 0), *b = tp__arg_tensor(bound, 1), *o = tp__fast_out(out);
    if (!a || !b || !o) return TP_ERR_UNSUPPORTED;
    mm_plan *mp;
    TP_TRY(matmul_like(info, a, b, o, false, 0, 1, &mp));
    tp_status st = mm_finish(info, mp, b, info->is_const[1], plan);
    if (st != TP_OK) mm_free(mp);
    return st;
}

/* linear(input, weight [N, K], bias [N]?) */
static tp_status linear_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out, tp_op_plan *plan) {
    const tp_tensor *x = tp__arg_tensor(bound, 0), *w = tp__arg_tensor(bound, 1), *bias = tp__arg_tensor(bound, 2);
    const tp_tensor *o = tp__fast_out(out);
    if (!x || !w || !o || w->ndim != 2 || x->ndim < 1) return TP_ERR_UNSUPPORTED;
    if (bias && (bias->dtype != x->dtype || bias->ndim != 1 || bias->strides[0] != 1 || bias->sizes[0] != w->sizes[0]))
        return TP_ERR_UNSUPPORTED;
    mm_plan *mp;
    TP_TRY(matmul_like(info, x, w, o, true, 0, 1, &mp));
    tp_status st = TP_OK;
    if (bias) {
        mp->ibias = 2;
        mp->bias_mode = 1;
        if (info->is_const[2]) st = half_const_bias(mp, bias);
    }
    if (st == TP_OK) st = mm_finish(info, mp, w, info->is_const[1], plan);
    if (st != TP_OK) mm_free(mp);
    return st;
}

/* addmm(self, mat1, mat2, *, beta=1, alpha=1) */
static tp_status addmm_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out, tp_op_plan *plan) {
    const tp_tensor *self = tp__arg_tensor(bound, 0), *a = tp__arg_tensor(bound, 1), *b = tp__arg_tensor(bound, 2);
    const tp_tensor *o = tp__fast_out(out);
    if (!self || !a || !b || !o || a->ndim != 2 || b->ndim != 2 || self->dtype != a->dtype) return TP_ERR_UNSUPPORTED;
    if (!tp_value_is_number(&bound[3]) || !tp_value_is_number(&bound[4]) || tp__arg_f64(bound, 3) != 1.0)
        return TP_ERR_UNSUPPORTED;
    int bias_mode;
    if (self->ndim == 1 && self->sizes[0] == o->sizes[1] && self->strides[0] == 1) bias_mode = 1;
    else if (self->ndim == 2 && self->sizes[0] == o->sizes[0] && self->sizes[1] == o->sizes[1] &&
             tp_tensor_is_contiguous(self))
        bias_mode = 2;
    else return TP_ERR_UNSUPPORTED;
    mm_plan *mp;
    TP_TRY(matmul_like(info, a, b, o, false, 1, 2, &mp));
    if (mp->dt != TP_FLOAT32 && bias_mode == 2) { /* a matrix addend: float32 only */
        mm_free(mp);
        return TP_ERR_UNSUPPORTED;
    }
    mp->ibias = 0;
    mp->bias_mode = bias_mode;
    mp->alpha = (float)tp__arg_f64(bound, 4);
    tp_status st = info->is_const[0] ? half_const_bias(mp, self) : TP_OK;
    if (st == TP_OK) st = mm_finish(info, mp, b, info->is_const[2], plan);
    if (st != TP_OK) mm_free(mp);
    return st;
}

/* einsum(equation, [a, b]) in a matrix-multiply form: the output is
 * [batch..., row, col] with the row label in one operand (A), the column
 * label in the other (B), either possibly absent; batch labels are in both
 * operands or in one (broadcast over the other: "bsh,hd->bsd" folds into
 * M); at most one label is contracted (in both, not in the output), none
 * is summed within one operand and none repeats within an operand. The
 * operands are read through their strides as they are. Anything else
 * declines to the reference kernel. */
static tp_status einsum_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out, tp_op_plan *plan) {
    const char *eq = tp__arg_str(bound, 0);
    const tp_tensor *o = tp__fast_out(out);
    if (!eq || !o || tp_value_len(&bound[1]) != 2) return TP_ERR_UNSUPPORTED;
    const tp_tensor *t[2];
    for (int i = 0; i < 2; i++) {
        const tp_value *v = tp_value_at(&bound[1], i);
        if (!v || v->kind != TP_VAL_TENSOR) return TP_ERR_UNSUPPORTED;
        t[i] = v->u.tensor;
    }
    tp_dtype dt = product_dtype((const tp_tensor *[]){t[0], t[1], o}, 3);
    if (dt == TP_DTYPE_COUNT || tp_tensor_numel(o) == 0) return TP_ERR_UNSUPPORTED;
    tp_einsum e;
    if (tp__einsum_parse(eq, 2, t, &e) != TP_OK) return TP_ERR_UNSUPPORTED; /* the shape rule reported it */
    bool in[2][TP_EINSUM_MAX_LABELS] = {{false}};
    for (int i = 0; i < 2; i++)
        for (int d = 0; d < e.op_ndim[i]; d++) {
            int l = e.op_label[i][d];
            if (in[i][l]) return TP_ERR_UNSUPPORTED; /* a diagonal */
            in[i][l] = true;
        }
    int k_label = -1;
    for (int l = 0; l < TP_EINSUM_MAX_LABELS; l++) {
        if (!e.used[l] || e.size[l] == 0) {
            if (e.used[l]) return TP_ERR_UNSUPPORTED;
            continue;
        }
        if (!e.in_out[l] && !(in[0][l] && in[1][l])) return TP_ERR_UNSUPPORTED; /* summed in one operand only */
        if (!e.in_out[l]) {
            if (k_label >= 0) return TP_ERR_UNSUPPORTED;
            k_label = l;
        }
    }
    /* the output: batch labels (in both operands, or in one and broadcast
     * over the other), then a row label of one operand (A) and a column
     * label of the other (B), either possibly missing */
    int n_out = e.out_ndim, row = -1, col = -1, ia = 0;
    int last = n_out > 0 ? e.out_label[n_out - 1] : -1, prev = n_out > 1 ? e.out_label[n_out - 2] : -1;
    bool last_single = last >= 0 && in[0][last] != in[1][last];
    bool prev_single = prev >= 0 && in[0][prev] != in[1][prev];
    if (last_single && prev_single && in[0][prev] != in[0][last]) {
        row = prev;
        col = last;
        ia = in[0][row] ? 0 : 1;
    } else if (last_single) {
        row = last;
        ia = in[0][row] ? 0 : 1;
    }
    int ib = 1 - ia, nb = n_out - (row >= 0) - (col >= 0);
    /* m/n/k dims must not broadcast (size 1 against a larger size) */
    const int check[3] = {row, col, k_label};
    for (int c = 0; c < 3; c++) {
        int l = check[c];
        if (l < 0) continue;
        for (int i = 0; i < 2; i++)
            for (int d = 0; d < e.op_ndim[i]; d++)
                if (e.op_label[i][d] == l && t[i]->sizes[d] != e.size[l]) return TP_ERR_UNSUPPORTED;
    }
    mm_plan *mp = tp_calloc(1, sizeof *mp);
    TP_CHECK(mp != NULL, TP_ERR_NOMEM, "out of memory preparing an einsum");
    mp->dt = dt;
    mp->ia = ia;
    mp->ib = ib;
    mp->ibias = -1;
    mp->ires = -1;
    mp->ibias2 = -1;
    mp->alpha = 1.0f;
    mp->m = row >= 0 ? e.size[row] : 1;
    mp->n = col >= 0 ? e.size[col] : 1;
    mp->k = k_label >= 0 ? e.size[k_label] : 1;
    mp->rs_a = row >= 0 ? tp__einsum_label_stride(&e, t[ia], ia, row) : 0;
    mp->cs_a = k_label >= 0 ? tp__einsum_label_stride(&e, t[ia], ia, k_label) : 0;
    mp->rs_b = k_label >= 0 ? tp__einsum_label_stride(&e, t[ib], ib, k_label) : 0;
    mp->cs_b = col >= 0 ? tp__einsum_label_stride(&e, t[ib], ib, col) : 0;
    mp->nb = nb;
    for (int d = 0; d < nb; d++) {
        int l = e.out_label[d];
        mp->bsize[d] = e.size[l];
        mp->bsa[d] = tp__einsum_label_stride(&e, t[ia], ia, l);
        mp->bsb[d] = tp__einsum_label_stride(&e, t[ib], ib, l);
    }
    tp_status st = mm_finish(info, mp, t[ib], info->is_const[ib], plan);
    if (st != TP_OK) mm_free(mp);
    return st;
}

void tp__register_fast_linalg(void) {
    tp__register_variant(TP_OP_LINEAR, "gemm", TP_CPU_SCALAR, linear_prepare);
    tp__register_variant(TP_OP_MATMUL, "gemm", TP_CPU_SCALAR, matmul_prepare);
    tp__register_variant(TP_OP_MM, "gemm", TP_CPU_SCALAR, matmul_prepare);
    tp__register_variant(TP_OP_BMM, "gemm", TP_CPU_SCALAR, matmul_prepare);
    tp__register_variant(TP_OP_ADDMM, "gemm", TP_CPU_SCALAR, addmm_prepare);
    tp__register_variant(TP_OP_EINSUM, "gemm", TP_CPU_SCALAR, einsum_prepare);
}
