/*
 * onednn.c - the layout pass: regions of convolutions, pools, activations
 * and elementwise adds/multiplies run through oneDNN on channels-last
 * (NHWC) tensors, where its brgemm convolutions are fastest.
 *
 * After the planner has fused steps (engine.c: batch norm folded, bias,
 * residual and activation in the convolution's epilogue), this pass looks
 * at 4-D float32 arena tensors. A tensor is kept NHWC when the step making
 * it and every step reading it can run here; the steps touching an NHWC
 * tensor then run oneDNN primitives instead of our kernels. A convolution
 * at the edge of a region reorders its NCHW input band into its thread's
 * workspace (or its output band out of it), so conversions happen only at
 * region boundaries, the saved program never changes, and nothing outside
 * a region sees an NHWC tensor: user inputs and outputs, views, mutations
 * and our kernels only ever get NCHW.
 *
 * Threads: oneDNN here is built on OpenMP, whose idle workers spin and
 * whose team size is fixed when a primitive is made. So every primitive is
 * made for one thread, and a step's work is cut at plan time into chunks
 * (images of the batch, or bands of output rows at batch 1: contiguous in
 * NHWC) that our pool's threads run, each band its own primitive with the
 * padding of its edges. The run's thread count is honoured and the result
 * does not depend on it (chunks are fixed at plan time). Each chunk's
 * primitive gets its scratch memory from the workspace slice of the thread
 * running it.
 *
 * Where oneDNN would run a dense spatial convolution with a direct JIT
 * kernel rather than brgemm (CPUs without AVX-512), our implicit GEMM on
 * the same NHWC tensors (conv_nhwc_avx2.c) measured faster and runs it instead
 * (gemmconv_wanted; Winograd for 3x3 stride-1 ones, winograd_wanted),
 * split among threads by the GEMM's own split (Winograd: blocks of tiles).
 *
 * Memory objects carry data pointers, so they live in the run context
 * (tp_op_plan.ctx_new), made when a run context adopts the plan. oneDNN
 * itself allocates small bookkeeping inside every primitive execution; our
 * allocation hook does not see it.
 *
 * Disabled with TP_ONEDNN=0 in the environment, at CPU levels other than
 * the one oneDNN runs at (the CPU's, or TP_CPU_LEVEL=avx2's), and in
 * builds without oneDNN.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine_impl.h"
#include "conv_nhwc.h"
#include "eltwise.h"
#include "fast.h"
#include "kernel_util.h"

#ifndef TP_HAVE_ONEDNN

bool tp__onednn_enabled(void) { return false; }

tp_status tp__plan_onednn(tp_plan *plan, int level, int threads) {
    (void)plan;
    (void)level;
    (void)threads;
    return TP_OK;
}

void tp__register_fast_onednn(void) {}

void tp__onednn_test_fail_mean_chunk(int k) { (void)k; }

void tp__onednn_test_fuse_ex_min(int64_t bytes) { (void)bytes; }

#else

#include <oneapi/dnnl/dnnl.h>
#include <immintrin.h>

#include "avx512_util.h"

/* The OpenMP runtime oneDNN runs on (declared here: our code is not built with -fopenmp). */
int omp_get_max_threads(void);
void omp_set_num_threads(int n);
#include <pthread.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t g_engine;
static bool g_enabled;

static int g_level; /* the CPU level oneDNN's kernels are capped to */

/* oneDNN picks its kernels by cpuid too; its cap is process-wide and set
 * once, before its first primitive. So the pass runs at one level: the
 * CPU's, or the one TP_CPU_LEVEL asks for (avx2 on an AVX-512 machine runs
 * oneDNN's AVX2 kernels, as a machine without AVX-512 would). */
/* TP_CONV_GEMM: 0 keeps oneDNN's convolutions, 1 takes our implicit GEMM
 * for every convolution it serves, 2 the same with Winograd wherever it
 * applies (F(4x4, 3x3) or F(2x2, 3x3) as winograd_wanted picks) and 4 with
 * F(4x4, 3x3) wherever it applies (tests); unset chooses (gemmconv_wanted,
 * winograd_wanted) */
static int g_gemmconv = -1;

/* TP_FUSE_DW=0: depthwise convolutions stay steps of their own (fuse_dws) */
static bool g_fuse_dw_off;
/* TP_FUSE_CAT=0: a projection shortcut and the convolution beside it stay
 * two steps (fuse_cats) */
static bool g_fuse_cat_off;
/* TP_FUSE_EX=N: fuse expansions whose output takes at least N bytes per
 * image (find_dws; 0 none, -1 unset: the rule there) */
static int64_t g_fuse_ex_min = -1;
/* tp__onednn_test_fuse_ex_min's bytes (-1: none) */
static _Atomic int64_t g_test_ex_min = -1;

void tp__onednn_test_fuse_ex_min(int64_t bytes) {
    atomic_store_explicit(&g_test_ex_min, bytes, memory_order_relaxed);
}

/* tp__onednn_test_fail_mean_chunk's chunk (-1: none) */
static atomic_int g_fail_mean_chunk = -1;

void tp__onednn_test_fail_mean_chunk(int k) { atomic_store_explicit(&g_fail_mean_chunk, k, memory_order_relaxed); }

static void init_once(void) {
    const char *gc = getenv("TP_CONV_GEMM");
    if (gc && strcmp(gc, "0") == 0) g_gemmconv = 0;
    else if (gc && strcmp(gc, "1") == 0) g_gemmconv = 1;
    else if (gc && strcmp(gc, "2") == 0) g_gemmconv = 2;
    else if (gc && strcmp(gc, "4") == 0) g_gemmconv = 4;
    const char *fd = getenv("TP_FUSE_DW");
    g_fuse_dw_off = fd && strcmp(fd, "0") == 0;
    const char *fc = getenv("TP_FUSE_CAT");
    g_fuse_cat_off = fc && strcmp(fc, "0") == 0;
    const char *fe = getenv("TP_FUSE_EX");
    if (fe && *fe) {
        const long long v = strtoll(fe, NULL, 10);
        g_fuse_ex_min = v > 0 ? v : 0;
    }
    const char *e = getenv("TP_ONEDNN");
    if (e && strcmp(e, "0") == 0) return;
    g_level = (int)tp_cpu_level_supported();
    const char *lv = getenv("TP_CPU_LEVEL");
    if (lv && strcmp(lv, "avx2") == 0 && g_level > TP_CPU_AVX2) {
        if (dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2) != dnnl_success) return;
        g_level = TP_CPU_AVX2;
    }
    if (g_level < TP_CPU_AVX2) return;
    g_enabled = dnnl_engine_create(&g_engine, dnnl_cpu, 0) == dnnl_success;
}

typedef enum dn_kind { DN_NONE, DN_CONV, DN_POOL, DN_UNARY, DN_BINARY, DN_GEMMCONV } dn_kind;

/* Memory objects of one chunk (per run context). SRC/DST are what the
 * primitive reads and writes: the tensor itself when it is NHWC, else a
 * staging buffer in the thread's workspace that *_T (the NCHW tensor's
 * band) is reordered from / to. RES is a summed residual in its own layout. */
enum { M_SRC, M_SRC_T, M_W, M_B, M_DST, M_DST_T, M_SRC1, M_SCRATCH, M_RES, M_COUNT };

typedef struct dn_chunk {
    dnnl_primitive_t prim;
    dnnl_primitive_t r_src, r_dst, r_res; /* staging reorders, NULL when not needed */
    dnnl_memory_desc_t md[M_COUNT];
    bool has[M_COUNT];
    int64_t off[M_COUNT]; /* bytes into the operand's tensor (SRC_T/DST_T for staged ones) */
    void *wbase;          /* owned allocation of this chunk's packed weights */
    void *w;              /* 64-byte aligned inside wbase */
    const float *bias;    /* the step's bias copy */
    size_t res_bytes;     /* residual copied by memcpy (same layout as dst) */
} dn_chunk;

enum { MPOOL_TAPS = 32 }; /* mpool_run: window taps gathered at a time */

typedef struct dn_step {
    dn_kind kind;
    int n_chunks;
    dn_chunk *chunks;
    int in_src;       /* in[] index of the (full) source */
    int in_src1;      /* binary: in[] index of the second operand */
    int ires;         /* convolution: in[] index of the residual, -1 none */
    bool stage_src, stage_dst;
    size_t scratch, stage_src_bytes, stage_dst_bytes, per_thread; /* per thread, 64-byte multiples */
    float *bias;      /* owned copy of the (folded) bias the chunks read */
    tp_conv_nhwc *gc; /* DN_GEMMCONV: our implicit GEMM instead of chunks */
    const tp_op_plan *act; /* DN_CONV: activation we run on each chunk's output (not a post-op), NULL none */
    bool gc_x_nhwc;   /* ... reading an NHWC (else NCHW) input */
    int iscale;       /* DN_GEMMCONV: in[iscale] scales the input channels (a fused multiply);
                       * 0 none (in[0] is the input) */
    int icat;         /* DN_GEMMCONV: in[icat] is the input of a second convolution summed in the same
                       * GEMM (fuse_cats); 0 none */
    bool gc_x2_nhwc;  /* ... that input NHWC (else NCHW) */
    int64_t scale_ns; /* ... floats between images' scales (0: one for the batch) */
    bool gmean;       /* DN_POOL: a mean over H x W run by gmean_run instead of chunks */
    bool gm_nhwc;
    int64_t gm[3];    /* ... its N, C and H * W */
    bool mpool;       /* DN_POOL: a max pool reading NHWC (writing NHWC, or NCHW at a region's end) run by
                       * mpool_run instead of chunks */
    int64_t mp[14];   /* ... N, C, H, W, OH, OW, then kh kw sh sw ph pw dh dw */
    int mp_threads;   /* ... the threads it splits rows among (all of the pass's) */
    int mp_taps;      /* ... taps of a window, when at most MPOOL_TAPS, else 0 */
    bool mp_nchw;     /* ... writing an NCHW output (a region's edge): each row made NHWC in the
                       * thread's workspace slice (mp_row_bytes), then transposed */
    size_t mp_row_bytes;
    int64_t mp_off[MPOOL_TAPS]; /* ... their offsets (floats) from the window's first, row-major */
    int64_t mean[4];  /* DN_CONV: N, C, H, W when it also writes out[1], the mean of its output over
                       * H and W (fuse_means); mean[0] 0 none */
} dn_step;

typedef struct dn_ctx {
    int n_streams;
    dnnl_stream_t *streams;
    int n_mem;
    dnnl_memory_t *mem; /* n_chunks * M_COUNT */
    atomic_int mean_done; /* a fused mean: threads that finished their chunks' row sums */
} dn_ctx;

/* Threads a step runs on: chunk 0 is the whole step for one, chunks 1..
 * the cut for several (one each). */
static int dn_threads(const dn_step *d) { return d->n_chunks > 1 ? d->n_chunks - 1 : 1; }

static void dn_step_free(void *data) {
    dn_step *d = data;
    if (!d) return;
    for (int k = 0; d->chunks && k < d->n_chunks; k++) {
        dn_chunk *c = &d->chunks[k];
        dnnl_primitive_t ps[4] = {c->prim, c->r_src, c->r_dst, c->r_res};
        for (int i = 0; i < 4; i++)
            if (ps[i]) dnnl_primitive_destroy(ps[i]);
        tp_free(c->wbase);
    }
    tp_free(d->chunks);
    tp_free(d->bias);
    if (d->gc) tp__conv_nhwc_free(d->gc);
    tp_free(d->gc);
    tp_free(d);
}

static void dn_ctx_free(void *p) {
    dn_ctx *c = p;
    if (!c) return;
    for (int i = 0; c->mem && i < c->n_mem; i++)
        if (c->mem[i]) dnnl_memory_destroy(c->mem[i]);
    for (int i = 0; c->streams && i < c->n_streams; i++)
        if (c->streams[i]) dnnl_stream_destroy(c->streams[i]);
    tp_free(c->mem);
    tp_free(c->streams);
    tp_free(c);
}

static tp_status dn_ctx_new(const tp_op_plan *plan, void **out) {
    const dn_step *d = plan->data;
    dn_ctx *c = tp_calloc(1, sizeof *c);
    TP_CHECK(c != NULL, TP_ERR_NOMEM, "out of memory preparing oneDNN state");
    c->n_streams = plan->max_threads;
    c->n_mem = d->n_chunks * M_COUNT;
    atomic_init(&c->mean_done, 0);
    c->streams = tp_calloc((size_t)c->n_streams, sizeof *c->streams);
    c->mem = tp_calloc((size_t)c->n_mem, sizeof *c->mem);
    bool ok = c->streams && c->mem;
    for (int i = 0; ok && i < c->n_streams; i++)
        ok = dnnl_stream_create(&c->streams[i], g_engine, dnnl_stream_default_flags) == dnnl_success;
    for (int k = 0; ok && k < d->n_chunks; k++) {
        const dn_chunk *ch = &d->chunks[k];
        for (int m = 0; ok && m < M_COUNT; m++) {
            if (!ch->has[m]) continue;
            void *h = m == M_W ? ch->w : m == M_B ? (void *)ch->bias : DNNL_MEMORY_NONE;
            ok = dnnl_memory_create(&c->mem[k * M_COUNT + m], &ch->md[m], g_engine, h) == dnnl_success;
        }
    }
    if (!ok) {
        dn_ctx_free(c);
        return tp_error(TP_ERR_NOMEM, "could not make oneDNN streams or memory objects");
    }
    *out = c;
    return TP_OK;
}

static dnnl_status_t reorder(dnnl_primitive_t r, dnnl_stream_t s, dnnl_memory_t from, dnnl_memory_t to) {
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    return dnnl_primitive_execute(r, s, 2, a);
}

/* A fused mean's row sum (fuse_means): the channel sums of one row of the
 * NHWC output (w pixels of c floats at p) over its pixels in order, into
 * s. The bands a step's chunks write are whole rows (split), so every row
 * is summed by one thread the same way whatever the thread count. Built
 * for AVX2, as gmean_nhwc_sums. */
__attribute__((target("avx2"))) static void mean_row(const float *p, int64_t w, int64_t c, float *s) {
    int64_t k = 0;
    for (; k + 32 <= c; k += 32) { /* 32 channels in four registers down the row */
        __m256 a0 = _mm256_loadu_ps(p + k), a1 = _mm256_loadu_ps(p + k + 8);
        __m256 a2 = _mm256_loadu_ps(p + k + 16), a3 = _mm256_loadu_ps(p + k + 24);
        for (int64_t q = 1; q < w; q++) {
            const float *pq = p + q * c + k;
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(pq));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(pq + 8));
            a2 = _mm256_add_ps(a2, _mm256_loadu_ps(pq + 16));
            a3 = _mm256_add_ps(a3, _mm256_loadu_ps(pq + 24));
        }
        _mm256_storeu_ps(s + k, a0);
        _mm256_storeu_ps(s + k + 8, a1);
        _mm256_storeu_ps(s + k + 16, a2);
        _mm256_storeu_ps(s + k + 24, a3);
    }
    for (; k + 8 <= c; k += 8) {
        __m256 a = _mm256_loadu_ps(p + k);
        for (int64_t q = 1; q < w; q++) a = _mm256_add_ps(a, _mm256_loadu_ps(p + q * c + k));
        _mm256_storeu_ps(s + k, a);
    }
    for (; k < c; k++) {
        float t = p[k];
        for (int64_t q = 1; q < w; q++) t += p[q * c + k];
        s[k] = t;
    }
}

/* The mean of each image's channels from its h row sums, added in row
 * order, times 1/(h*w) (gmean_run's scaling). */
__attribute__((target("avx2"))) static void mean_combine(const float *sums, const int64_t *m, float *out) {
    const int64_t n = m[0], c = m[1], h = m[2];
    const float inv = 1.0f / (float)(h * m[3]);
    for (int64_t i = 0; i < n; i++) {
        float *restrict o = out + i * c;
        memcpy(o, sums + i * h * c, (size_t)c * sizeof(float));
        for (int64_t r = 1; r < h; r++)
            for (int64_t k = 0; k < c; k++) o[k] += sums[(i * h + r) * c + k];
        for (int64_t k = 0; k < c; k++) o[k] *= inv;
    }
}

static tp_status dn_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const dn_step *d = plan->data;
    dn_ctx *c = ex->ctx;
    char *src = tp__tensor_base(in[d->in_src]), *dst = tp__tensor_base(out[0]);
    char *src1 = d->in_src1 >= 0 ? tp__tensor_base(in[d->in_src1]) : NULL;
    char *res = d->ires >= 0 ? tp__tensor_base(in[d->ires]) : NULL;
    char *ws = (char *)ex->workspace + (size_t)ex->ith * d->per_thread;
    char *scratch = ws, *stage_src = ws + d->scratch, *stage_dst = stage_src + d->stage_src_bytes;
    /* a fused mean's row sums follow the threads' slices */
    float *mean_sums = (float *)((char *)ex->workspace + (size_t)dn_threads(d) * d->per_thread);
    /* primitives were made for one thread; helpers inside them (reorders)
     * ask OpenMP for the team size at run time */
    int saved = omp_get_max_threads();
    if (saved != 1) omp_set_num_threads(1);
    dnnl_stream_t stream = c->streams[ex->ith];
    dnnl_status_t st = dnnl_success;
    /* chunk 0 is the whole step, for one thread; 1.. the cut, for several */
    int lo = d->n_chunks > 1 && ex->nth > 1 ? 1 : 0, hi = d->n_chunks > 1 && ex->nth == 1 ? 1 : d->n_chunks;
    for (int k = lo + ex->ith; k < hi && st == dnnl_success; k += ex->nth) {
        const dn_chunk *ch = &d->chunks[k];
        dnnl_memory_t *m = &c->mem[k * M_COUNT];
        if (d->stage_src) {
            dnnl_memory_set_data_handle(m[M_SRC_T], src + ch->off[M_SRC_T]);
            dnnl_memory_set_data_handle(m[M_SRC], stage_src);
            st = reorder(ch->r_src, stream, m[M_SRC_T], m[M_SRC]);
        } else {
            dnnl_memory_set_data_handle(m[M_SRC], src + ch->off[M_SRC]);
        }
        char *dptr = d->stage_dst ? stage_dst : dst + ch->off[M_DST];
        dnnl_memory_set_data_handle(m[M_DST], dptr);
        if (res && st == dnnl_success) { /* the summing convolution adds what dst holds */
            if (ch->r_res) {
                dnnl_memory_set_data_handle(m[M_RES], res + ch->off[M_RES]);
                st = reorder(ch->r_res, stream, m[M_RES], m[M_DST]);
            } else if (res + ch->off[M_RES] != dptr) {
                memcpy(dptr, res + ch->off[M_RES], ch->res_bytes);
            }
        }
        dnnl_exec_arg_t a[6];
        int na = 0;
        a[na++] = (dnnl_exec_arg_t){d->kind == DN_BINARY ? DNNL_ARG_SRC_0 : DNNL_ARG_SRC, m[M_SRC]};
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, m[M_DST]};
        if (ch->has[M_W]) a[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, m[M_W]};
        if (ch->has[M_B]) a[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, m[M_B]};
        if (ch->has[M_SRC1]) {
            dnnl_memory_set_data_handle(m[M_SRC1], src1 + ch->off[M_SRC1]);
            a[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC_1, m[M_SRC1]};
        }
        if (ch->has[M_SCRATCH]) {
            dnnl_memory_set_data_handle(m[M_SCRATCH], scratch);
            a[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, m[M_SCRATCH]};
        }
        if (st == dnnl_success && d->mean[0] && k == atomic_load_explicit(&g_fail_mean_chunk, memory_order_relaxed))
            st = dnnl_runtime_error; /* tp__onednn_test_fail_mean_chunk */
        if (st == dnnl_success) st = dnnl_primitive_execute(ch->prim, stream, na, a);
        if (st == dnnl_success && d->mean[0]) {
            /* dst itself (fuse_means): the band's rows, each summed right
             * after the activation ran on it, while it is in L1 */
            const int64_t w = d->mean[3], c = d->mean[1], row = w * c * (int64_t)sizeof(float);
            const int64_t r0 = ch->off[M_DST] / row;
            const int64_t r1 = r0 + (int64_t)dnnl_memory_desc_get_size(&ch->md[M_DST]) / row;
            for (int64_t r = r0; r < r1; r++) {
                float *yr = (float *)dst + r * w * c;
                if (d->act) d->act->apply(d->act, yr, w * c);
                mean_row(yr, w, c, mean_sums + r * c);
            }
        } else if (st == dnnl_success && d->act) { /* dst is the NHWC tensor's band (build_conv) */
            d->act->apply(d->act, (float *)dptr, (int64_t)(dnnl_memory_desc_get_size(&ch->md[M_DST]) / sizeof(float)));
        }
        if (st == dnnl_success && d->stage_dst) {
            dnnl_memory_set_data_handle(m[M_DST_T], dst + ch->off[M_DST_T]);
            st = reorder(ch->r_dst, stream, m[M_DST], m[M_DST_T]);
        }
    }
    if (saved != 1) omp_set_num_threads(saved);
    /* the last thread to finish its rows adds them up (every thread counts,
     * failed or not, so the count starts at 0 for the next call; a failed
     * call's mean is garbage, the step's status says so) */
    if (d->mean[0] && (ex->nth == 1 || atomic_fetch_add_explicit(&c->mean_done, 1, memory_order_acq_rel) == ex->nth - 1)) {
        atomic_store_explicit(&c->mean_done, 0, memory_order_relaxed); /* the next call starts after the pool's join */
        mean_combine(mean_sums, d->mean, (float *)tp__tensor_base(out[1]));
    }
    TP_CHECK(st == dnnl_success, TP_ERR_INTERNAL, "oneDNN primitive failed (status %d)", (int)st);
    return TP_OK;
}

/* A convolution on our implicit GEMM (conv_nhwc_avx2.c): all threads split one
 * GEMM over every output pixel. The memory plan gives a summed residual
 * either dst's own block or one disjoint from it. */
static tp_status gc_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const dn_step *d = plan->data;
    tp_conv_nhwc_call call = {.conv = d->gc, .x = (const float *)tp__tensor_base(in[0]), .x_nhwc = d->gc_x_nhwc,
                              .y = (float *)tp__tensor_base(out[0]), .res = NULL};
    if (d->iscale > 0) {
        call.in_scale = (const float *)tp__tensor_base(in[d->iscale]);
        call.in_scale_ns = d->scale_ns;
    }
    if (d->icat > 0) {
        call.x2 = (const float *)tp__tensor_base(in[d->icat]);
        call.x2_nhwc = d->gc_x2_nhwc;
    }
    if (d->ires >= 0) {
        const float *res = (const float *)tp__tensor_base(in[d->ires]);
        size_t bytes = (size_t)(d->gc->n * d->gc->oh * d->gc->ow * d->gc->cout) * sizeof(float);
        const char *r = (const char *)res, *y = (const char *)call.y;
        TP_CHECK(res == call.y || r >= y + bytes || y >= r + bytes, TP_ERR_INTERNAL,
                 "convolution residual partly overlaps its output");
        call.res = res;
    }
    tp__conv_nhwc_run_claimed(&call, ex->ith, ex->nth, ex->workspace, ex->claims);
    return TP_OK;
}

/* One channel's mean over hw values stride apart: four interleaved partial
 * sums (value p into sum p mod 4), added pairwise, times inv = 1/hw. */
static float gmean_channel(const float *p, int64_t stride, int64_t hw, float inv) {
    float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t q = 0; q < hw; q++) a[q & 3] += p[q * stride];
    return ((a[0] + a[1]) + (a[2] + a[3])) * inv;
}

/* Pixels per block of an NHWC mean's partial sums (gmean_run). */
#define GMEAN_BLOCK 256

/* Sums over pixels [p0, p1) of one NHWC image for channels [c0, c1), at
 * most 16 of them: value p into partial sum (p - p0) mod 4 of its channel,
 * the four added pairwise (gmean_channel's order, unscaled). A full group
 * of 16 runs as two 8-lane vectors. add: out += the sums, else out = them.
 * Built for AVX2: this pass runs only where oneDNN does, at AVX2 or above
 * (init_once). */
__attribute__((target("avx2"), always_inline)) static inline void gmean_nhwc_sums(
    const float *img, int64_t ch, int64_t p0, int64_t p1, int64_t c0, int64_t c1, bool add, float *out) {
    if (c1 - c0 < 16) {
        for (int64_t c = c0; c < c1; c++) {
            const float t = gmean_channel(img + p0 * ch + c, ch, p1 - p0, 1.0f);
            out[c - c0] = add ? out[c - c0] + t : t;
        }
        return;
    }
    __m256 a[4][2];
    for (int j = 0; j < 4; j++) a[j][0] = a[j][1] = _mm256_setzero_ps();
    const float *col = img + c0;
    int64_t p = p0;
    for (; p + 4 <= p1; p += 4) {
        const float *r = col + p * ch;
        for (int j = 0; j < 4; j++, r += ch) {
            a[j][0] = _mm256_add_ps(a[j][0], _mm256_loadu_ps(r));
            a[j][1] = _mm256_add_ps(a[j][1], _mm256_loadu_ps(r + 8));
        }
    }
    for (int j = 0; p < p1; p++, j++) {
        a[j][0] = _mm256_add_ps(a[j][0], _mm256_loadu_ps(col + p * ch));
        a[j][1] = _mm256_add_ps(a[j][1], _mm256_loadu_ps(col + p * ch + 8));
    }
    for (int h = 0; h < 2; h++) {
        const __m256 t = _mm256_add_ps(_mm256_add_ps(a[0][h], a[1][h]), _mm256_add_ps(a[2][h], a[3][h]));
        _mm256_storeu_ps(out + 8 * h, add ? _mm256_add_ps(_mm256_loadu_ps(out + 8 * h), t) : t);
    }
}

/* Per run context: how many threads finished their part of the call. */
typedef struct gmean_ctx {
    atomic_int done;
} gmean_ctx;

static tp_status gmean_ctx_new(const tp_op_plan *plan, void **out) {
    (void)plan;
    gmean_ctx *c = tp_calloc(1, sizeof *c);
    TP_CHECK(c != NULL, TP_ERR_NOMEM, "out of memory preparing a mean's state");
    atomic_init(&c->done, 0);
    *out = c;
    return TP_OK;
}

/* yn[c] = (((part[0][c] + part[1][c]) + part[2][c]) + ...) * inv for the
 * blocks' sums part[blocks][ch], block by block over all channels. */
__attribute__((target("avx2"))) static void gmean_combine(const float *part, int64_t blocks, int64_t ch, float inv,
                                                          float *yn) {
    memcpy(yn, part, (size_t)ch * sizeof(float));
    for (int64_t b = 1; b < blocks; b++) {
        const float *pb = part + b * ch;
        int64_t c = 0;
        for (; c + 8 <= ch; c += 8)
            _mm256_storeu_ps(yn + c, _mm256_add_ps(_mm256_loadu_ps(yn + c), _mm256_loadu_ps(pb + c)));
        for (; c < ch; c++) yn[c] += pb[c];
    }
    for (int64_t c = 0; c < ch; c++) yn[c] *= inv;
}

/* Whether threads share image n's block sums in gmean_run: it has more
 * than one block and a thread's range boundary cuts its rows, or items cut
 * them. */
static bool gmean_shared(int64_t n, int64_t blocks, int64_t rows, bool by_rows, int nth) {
    if (blocks == 1) return false;
    if (!by_rows) return true;
    for (int k = 1; k < nth; k++) {
        const int64_t cut = rows * k / nth;
        if (cut > n * blocks && cut < (n + 1) * blocks) return true;
    }
    return false;
}

/* Blocks of GMEAN_BLOCK pixels an NHWC mean over hw pixels sums apart. */
static int64_t gmean_blocks(int64_t hw) { return hw > 0 ? (hw + GMEAN_BLOCK - 1) / GMEAN_BLOCK : 1; }

/* gmean_run's NHWC part (see there). */
__attribute__((target("avx2"))) static void gmean_nhwc_run(const float *x, float *y, int64_t nb, int64_t ch,
                                                           int64_t hw, float inv, const tp_exec *ex) {
    const int64_t blocks = gmean_blocks(hw), groups = (ch + 15) / 16, rows = nb * blocks;
    float *part = ex->workspace; /* [nb][blocks][ch] for the images threads share */
    /* the thread's (image, block) rows, or with fewer rows than threads its
     * (image, block, group) items; every item's sum is the same either way */
    const bool by_rows = rows >= ex->nth;
    const int64_t units = by_rows ? rows : rows * groups;
    const int64_t u0 = units * ex->ith / ex->nth, u1 = units * (ex->ith + 1) / ex->nth;
    const int64_t r0 = by_rows ? u0 : u0 / groups, r1 = by_rows ? u1 : (u1 + groups - 1) / groups;
    for (int64_t r = r0; r < r1;) {
        const int64_t n = r / blocks, re = (n + 1) * blocks < r1 ? (n + 1) * blocks : r1;
        const float *img = x + n * ch * hw;
        /* an image of its own: each group's block sums added in block order
         * as they come (gmean_combine's order), nothing to share */
        const bool whole = by_rows && r == n * blocks && re == (n + 1) * blocks;
        for (int64_t g = 0; g < groups; g++) { /* long strided runs down the image */
            const int64_t c0 = g * 16, c1 = c0 + 16 < ch ? c0 + 16 : ch;
            for (int64_t q = r; q < re; q++) {
                if (!by_rows && (q * groups + g < u0 || q * groups + g >= u1)) continue;
                const int64_t b = q % blocks, p1 = (b + 1) * GMEAN_BLOCK < hw ? (b + 1) * GMEAN_BLOCK : hw;
                /* one block: the item is its channels' whole sum */
                const bool own = whole || blocks == 1;
                gmean_nhwc_sums(img, ch, b * GMEAN_BLOCK, p1, c0, c1, whole && b > 0,
                                own ? y + n * ch + c0 : part + q * ch + c0);
                if (!whole && blocks == 1)
                    for (int64_t c = c0; c < c1; c++) y[n * ch + c] *= inv;
            }
        }
        if (whole)
            for (int64_t c = 0; c < ch; c++) y[n * ch + c] *= inv;
        r = re;
    }
    /* images whose rows threads share: the last thread to finish adds their
     * block sums */
    bool shared = false;
    for (int64_t n = 0; n < nb && !shared; n++) shared = gmean_shared(n, blocks, rows, by_rows, ex->nth);
    if (!shared) return;
    gmean_ctx *gc = ex->ctx;
    if (atomic_fetch_add_explicit(&gc->done, 1, memory_order_acq_rel) != ex->nth - 1) return;
    atomic_store_explicit(&gc->done, 0, memory_order_relaxed); /* the next call starts after the pool's join */
    for (int64_t n = 0; n < nb; n++)
        if (gmean_shared(n, blocks, rows, by_rows, ex->nth))
            gmean_combine(part + n * blocks * ch, blocks, ch, inv, y + n * ch);
}

/* A mean over H and W ([N, C, H, W] -> [N, C, 1, 1], squeeze-excitation's
 * and the classifier's global pool).
 * NCHW input: threads take ranges of channels, each channel's plane summed
 * as gmean_channel sums.
 * NHWC input: the pixels are cut into blocks of GMEAN_BLOCK and the
 * channels into groups of 16; each (image, block, group) is an item summed
 * by gmean_nhwc_sums. Thread ith takes the ith of nth ranges of (image,
 * block) rows - the rows of the map that the convolution before it wrote
 * on the same thread (its chunks are bands of rows) - or, with fewer rows
 * than threads, of (image, block, group) items. Taking ranges of channels
 * instead read half of every thread's input from the other core's cache:
 * EfficientNet-B0's 17 means, Zen 4, two threads, per-node minima of 3
 * alternating runs, 0.140 -> 0.082 ms. Each channel's mean is its block
 * sums added in block order, times 1/hw: a thread with a whole image adds
 * them as they come; for images threads share the sums go to the
 * workspace and the thread that finishes last adds them (gmean_combine).
 * Either way the result does not depend on the thread count. */
static tp_status gmean_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const dn_step *d = plan->data;
    const float *x = (const float *)tp__tensor_base(in[0]);
    float *y = (float *)tp__tensor_base(out[0]);
    const int64_t nb = d->gm[0], ch = d->gm[1], hw = d->gm[2];
    const float inv = 1.0f / (float)hw;
    if (!d->gm_nhwc) {
        const int64_t c0 = ch * ex->ith / ex->nth, c1 = ch * (ex->ith + 1) / ex->nth;
        for (int64_t n = 0; n < nb; n++)
            for (int64_t c = c0; c < c1; c++) y[n * ch + c] = gmean_channel(x + (n * ch + c) * hw, 1, hw, inv);
        return TP_OK;
    }
    gmean_nhwc_run(x, y, nb, ch, hw, inv, ex);
    return TP_OK;
}

/* A max pool reading an NHWC tensor (mpool_run): window taps in row-major
 * order, each compared as the reference compares it, (v > m or v is NaN)
 * ? v : m, starting from the first tap in the window, which the
 * reference's -inf start gives back unchanged; so outputs are the
 * reference's bit for bit, NaN included (oneDNN 2.6's pool need not pass a
 * NaN on), whatever the thread count, and dilated windows (oneDNN has only
 * its reference kernel for them) stay in the region. As fast as oneDNN's
 * primitive or faster: a window wholly inside the input takes its taps
 * from offsets made at plan time (Sapphire Rapids, per-node shares of the
 * run: the small CNN's two pools 14.3-14.8% -> 10.3%, ResNet-18's 2.1 ->
 * 1.5% at 1 thread, 2.0 -> 1.2% at 2; whole small CNN 5-6% faster at 1
 * and 2 threads, batch 1 and 8, medians of 7-9 alternating runs). At a
 * region's end (an NCHW output) each output row is made NHWC in the
 * thread's workspace and transposed into the planes, instead of oneDNN's
 * pool and a reorder. */

/* m = v where (v > m or v is NaN): the reference's comparison */
#define MPOOL_TAKE(m, v) \
    m = _mm256_blendv_ps(m, v, _mm256_or_ps(_mm256_cmp_ps(v, m, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q)))

/* o[0:ch] = the max of the nt taps (and of o itself unless first); 32
 * channels a step (four vectors per tap read), then 8, then one. */
__attribute__((target("avx2"), always_inline)) static inline void mpool_pixel(const float *const *tap, int nt,
                                                                             bool first, float *o, int64_t ch) {
    const float *base = first ? tap[0] : o;
    const int t0 = first ? 1 : 0;
    int64_t c = 0;
    for (; c + 32 <= ch; c += 32) {
        __m256 m0 = _mm256_loadu_ps(base + c), m1 = _mm256_loadu_ps(base + c + 8);
        __m256 m2 = _mm256_loadu_ps(base + c + 16), m3 = _mm256_loadu_ps(base + c + 24);
        for (int t = t0; t < nt; t++) {
            const float *p = tap[t] + c;
            const __m256 v0 = _mm256_loadu_ps(p), v1 = _mm256_loadu_ps(p + 8);
            const __m256 v2 = _mm256_loadu_ps(p + 16), v3 = _mm256_loadu_ps(p + 24);
            MPOOL_TAKE(m0, v0);
            MPOOL_TAKE(m1, v1);
            MPOOL_TAKE(m2, v2);
            MPOOL_TAKE(m3, v3);
        }
        _mm256_storeu_ps(o + c, m0);
        _mm256_storeu_ps(o + c + 8, m1);
        _mm256_storeu_ps(o + c + 16, m2);
        _mm256_storeu_ps(o + c + 24, m3);
    }
    for (; c + 8 <= ch; c += 8) {
        __m256 m = _mm256_loadu_ps(base + c);
        for (int t = t0; t < nt; t++) {
            const __m256 v = _mm256_loadu_ps(tap[t] + c);
            MPOOL_TAKE(m, v);
        }
        _mm256_storeu_ps(o + c, m);
    }
    for (; c < ch; c++) {
        float m = base[c];
        for (int t = t0; t < nt; t++) {
            const float v = tap[t][c];
            m = v > m || v != v ? v : m;
        }
        o[c] = m;
    }
}
#undef MPOOL_TAKE

/* mpool_pixel in AVX-512 vectors: 64 channels a step, then 16, then a
 * masked remainder. */
__attribute__((target("avx512f"), always_inline)) static inline void mpool_pixel16(const float *const *tap, int nt,
                                                                                  bool first, float *o, int64_t ch) {
    const float *base = first ? tap[0] : o;
    const int t0 = first ? 1 : 0;
    int64_t c = 0;
    for (; c + 64 <= ch; c += 64) {
        __m512 m0 = _mm512_loadu_ps(base + c), m1 = _mm512_loadu_ps(base + c + 16);
        __m512 m2 = _mm512_loadu_ps(base + c + 32), m3 = _mm512_loadu_ps(base + c + 48);
        for (int t = t0; t < nt; t++) {
            const float *p = tap[t] + c;
            const __m512 v0 = _mm512_loadu_ps(p), v1 = _mm512_loadu_ps(p + 16);
            const __m512 v2 = _mm512_loadu_ps(p + 32), v3 = _mm512_loadu_ps(p + 48);
            m0 = tp__avx512_max_take(m0, v0);
            m1 = tp__avx512_max_take(m1, v1);
            m2 = tp__avx512_max_take(m2, v2);
            m3 = tp__avx512_max_take(m3, v3);
        }
        _mm512_storeu_ps(o + c, m0);
        _mm512_storeu_ps(o + c + 16, m1);
        _mm512_storeu_ps(o + c + 32, m2);
        _mm512_storeu_ps(o + c + 48, m3);
    }
    for (; c < ch; c += 16) {
        const __mmask16 k = tp__avx512_lanes(ch - c);
        __m512 m = _mm512_maskz_loadu_ps(k, base + c);
        for (int t = t0; t < nt; t++) {
            const __m512 v = _mm512_maskz_loadu_ps(k, tap[t] + c);
            m = tp__avx512_max_take(m, v);
        }
        _mm512_mask_storeu_ps(o + c, k, m);
    }
}

/* Output rows (image, row) split evenly among the threads: mpool_run in
 * AVX2 vectors, mpool_run16 in AVX-512 ones (PIXEL: mpool_pixel or
 * mpool_pixel16), chosen by the pass's CPU level. */
#define MPOOL_RUN(NAME, TARGET, PIXEL)                                                                            \
    __attribute__((target(TARGET))) static tp_status NAME(const tp_op_plan *plan, tp_tensor *const *in,          \
                                                          tp_tensor *const *out, const tp_exec *ex) {            \
        const dn_step *d = plan->data;                                                                           \
        const int64_t *g = d->mp;                                                                                \
        const int64_t nb = g[0], ch = g[1], h = g[2], w = g[3], oh = g[4], ow = g[5];                            \
        const int64_t kh = g[6], kw = g[7], sh = g[8], sw = g[9], ph = g[10], pw = g[11], dh = g[12], dw = g[13]; \
        const float *x = (const float *)tp__tensor_base(in[0]);                                                  \
        float *o = (float *)tp__tensor_base(out[0]);                                                             \
        const int64_t rows = nb * oh, r0 = rows * ex->ith / ex->nth, r1 = rows * (ex->ith + 1) / ex->nth;        \
        const int64_t row_floats = w * ch, tap_step = dw * ch;                                                   \
        const float *tap[MPOOL_TAPS];                                                                            \
        float *const y = o, *const row_buf = (float *)((char *)ex->workspace + (size_t)ex->ith * d->mp_row_bytes); \
        o += r0 * ow * ch;                                                                                       \
        for (int64_t r = r0; r < r1; r++) {                                                                      \
            const int64_t oy = r % oh;                                                                           \
            const float *img = x + (r / oh) * h * row_floats;                                                    \
            if (d->mp_nchw) o = row_buf;                                                                         \
            /* the window's rows all inside the input, and few enough taps */                                    \
            const bool rows_in = d->mp_taps > 0 && oy * sh - ph >= 0 && oy * sh - ph + (kh - 1) * dh < h;        \
            for (int64_t ox = 0; ox < ow; ox++, o += ch) {                                                       \
                const int64_t ix0 = ox * sw - pw;                                                                \
                if (rows_in && ix0 >= 0 && ix0 + (kw - 1) * dw < w) { /* the whole window: its taps' offsets */  \
                    const float *b = img + (oy * sh - ph) * row_floats + ix0 * ch;                               \
                    for (int t = 0; t < d->mp_taps; t++) tap[t] = b + d->mp_off[t];                              \
                    PIXEL(tap, d->mp_taps, true, o, ch);                                                         \
                    continue;                                                                                    \
                }                                                                                                \
                /* the window's columns inside the input: kx in [k0, k1) */                                      \
                int64_t k0 = 0, k1 = kw;                                                                         \
                while (k0 < k1 && ix0 + k0 * dw < 0) k0++;                                                       \
                while (k1 > k0 && ix0 + (k1 - 1) * dw >= w) k1--;                                                \
                int nt = 0;                                                                                      \
                bool first = true;                                                                               \
                for (int64_t ky = 0; ky < kh; ky++) {                                                            \
                    const int64_t iy = oy * sh - ph + ky * dh;                                                   \
                    if (iy < 0 || iy >= h) continue;                                                             \
                    const float *p = img + iy * row_floats + (ix0 + k0 * dw) * ch;                               \
                    for (int64_t kx = k0; kx < k1; kx++, p += tap_step) {                                        \
                        tap[nt++] = p;                                                                           \
                        if (nt == MPOOL_TAPS) {                                                                  \
                            PIXEL(tap, nt, first, o, ch);                                                        \
                            first = false;                                                                       \
                            nt = 0;                                                                              \
                        }                                                                                        \
                    }                                                                                            \
                }                                                                                                \
                if (nt) PIXEL(tap, nt, first, o, ch);                                                            \
                else if (first) /* a window wholly in the padding: the reference's -inf */                       \
                    for (int64_t c = 0; c < ch; c++) o[c] = -INFINITY;                                           \
            }                                                                                                    \
            if (d->mp_nchw) /* the row's channels to their planes */                                             \
                for (int64_t c = 0; c < ch; c++) {                                                               \
                    float *plane_row = y + (((r / oh) * ch + c) * oh + oy) * ow;                                 \
                    for (int64_t ox = 0; ox < ow; ox++) plane_row[ox] = row_buf[ox * ch + c];                    \
                }                                                                                                \
        }                                                                                                        \
        return TP_OK;                                                                                            \
    }
MPOOL_RUN(mpool_run, "avx2", mpool_pixel)
MPOOL_RUN(mpool_run16, "avx512f", mpool_pixel16)
#undef MPOOL_RUN

/* ---- planning ------------------------------------------------------------- */

typedef struct dn_cand {
    dn_kind kind;
    tp_conv_info conv;
    int64_t pool[12];
    tp_elt_info elt;
    int bin_a, bin_b;    /* binary: in[] indices of the full operand and the other */
    dnnl_alg_kind_t alg; /* unary / binary / the convolution's fused activation (0 none) */
    float alpha, beta;
    int se_mul;          /* pointwise convolution: 1 + the step multiplying its input by a
                          * channel scale, to fuse (fuse_scales), else 0 */
    int dw_src;          /* pointwise convolution: 1 + the depthwise convolution making its
                          * input, to fuse (fuse_dws), else 0 */
    int ex_src;          /* ... and 1 + the pointwise convolution making that one's input
                          * (an expansion), to fuse with it, else 0 */
    int cat_src;         /* convolution summing a residual: 1 + the convolution making the
                          * residual, to compute in the same GEMM (fuse_cats), else 0 */
} dn_cand;

/* The oneDNN eltwise algorithm computing TP_ELT_* op with parameters f. */
static bool eltwise_alg(int op, const double *f, dnnl_alg_kind_t *alg, float *alpha, float *beta) {
    *alpha = 0.0f;
    *beta = 0.0f;
    switch (op) {
    case TP_ELT_RELU: *alg = dnnl_eltwise_relu; return true;
    case TP_ELT_LEAKY_RELU: *alg = dnnl_eltwise_relu, *alpha = (float)f[0]; return true;
    case TP_ELT_RELU6: *alg = dnnl_eltwise_clip_v2, *beta = 6.0f; return true;
    case TP_ELT_CLAMP: *alg = dnnl_eltwise_clip_v2, *alpha = (float)f[0], *beta = (float)f[1]; return true;
    case TP_ELT_SILU: *alg = dnnl_eltwise_swish, *alpha = 1.0f; return true;
    case TP_ELT_SIGMOID: *alg = dnnl_eltwise_logistic; return true;
    case TP_ELT_TANH: *alg = dnnl_eltwise_tanh; return true;
    case TP_ELT_GELU: *alg = dnnl_eltwise_gelu_erf; return true;
    case TP_ELT_GELU_TANH: *alg = dnnl_eltwise_gelu_tanh; return true;
    case TP_ELT_HARDSWISH: *alg = dnnl_eltwise_hardswish; return true;
    default: return false;
    }
}

/* A slot's sizes as [N, C, H, W]: a 3-D [N, C, L] tensor (conv1d) is
 * [N, C, 1, L] (its channels-last form NLC; bands then cut L). */
typedef struct d4 {
    int64_t v[4];
} d4;

static d4 dims4(const plan_slot *sl) {
    d4 r = {{0, 0, 0, 0}};
    if (sl->ndim == 4) memcpy(r.v, sl->sizes, sizeof r.v);
    else if (sl->ndim == 3) r = (d4){{sl->sizes[0], sl->sizes[1], 1, sl->sizes[2]}};
    return r;
}

/* Elements of a slot, or -1 when its sizes are not all positive or the
 * count passes 2^48 (a hostile file's shapes; such a step keeps our kernel). */
static int64_t slot_numel(const plan_slot *sl) {
    int64_t n = 1;
    for (int d = 0; d < sl->ndim; d++) {
        if (sl->sizes[d] <= 0 || sl->sizes[d] > ((int64_t)1 << 48) / n) return -1;
        n *= sl->sizes[d];
    }
    return n;
}

/* A slot whose tensor is C-contiguous (arena and output tensors always
 * are); its sizes have been checked by slot_numel. */
static bool slot_contiguous(const plan_slot *sl) {
    if (sl->kind == SLOT_ARENA || sl->kind == SLOT_OUTPUT) return true;
    int64_t want = 1;
    for (int d = sl->ndim - 1; d >= 0; d--) {
        if (sl->sizes[d] != 1 && sl->strides[d] != want) return false;
        want *= sl->sizes[d];
    }
    return true;
}

static bool classify(const plan_step *s, const tp_plan *plan, dn_cand *c) {
    memset(c, 0, sizeof *c);
    if (s->kind != STEP_FAST || s->n_out != 1 || s->in[0] < 0) return false;
    const plan_slot *x = &plan->slots[s->in[0]], *y = &plan->slots[s->out[0]];
    if (x->dtype != TP_FLOAT32 || y->dtype != TP_FLOAT32 || (x->ndim != 4 && x->ndim != 3) || y->ndim != x->ndim)
        return false;
    for (int k = 0; k < s->n_in; k++)
        if (s->in[k] >= 0 && plan->slots[s->in[k]].dtype == TP_FLOAT32 && slot_numel(&plan->slots[s->in[k]]) < 0)
            return false;
    if (slot_numel(x) < 0 || slot_numel(y) < 0) return false;
    if (!slot_contiguous(x) || (s->n_in > 1 && s->in[1] >= 0 && !slot_contiguous(&plan->slots[s->in[1]])))
        return false;
    d4 x4 = dims4(x), y4 = dims4(y);
    for (int d = 0; d < 4; d++)
        if (x4.v[d] <= 0 || y4.v[d] <= 0) return false;
    bool conv1d = s->op == TP_OP_CONV1D && x->ndim == 3;
    if ((s->op == TP_OP_CONV2D || conv1d) && tp__conv_info(&s->op_plan, &c->conv)) {
        tp_conv_info *v = &c->conv;
        if (!v->weight || !v->input_contiguous || v->groups < 1) return false;
        /* a conv1d plan is a conv2d of one row (h = kh = 1): the weight [O, I, K] is [O, I, 1, K] */
        if (v->act) {
            tp_elt_info e;
            if (!tp__eltwise_info(v->act, &e) || e.binary || e.chained) return false;
            if (!eltwise_alg(e.op, e.f, &c->alg, &c->alpha, &c->beta)) return false;
        }
        c->kind = DN_CONV;
        return true;
    }
    if (s->op == TP_OP_MAX_POOL2D && x->ndim == 4 && tp__maxpool_info(&s->op_plan, c->pool)) {
        c->alg = dnnl_pooling_max;
        c->kind = DN_POOL;
        return true;
    }
    bool include_pad, exact;
    if ((s->op == TP_OP_AVG_POOL2D || s->op == TP_OP_ADAPTIVE_AVG_POOL2D) && x->ndim == 4 &&
        tp__avgpool_info(&s->op_plan, c->pool, &include_pad, &exact)) {
        if (!exact) return false;
        c->alg = include_pad ? dnnl_pooling_avg_include_padding : dnnl_pooling_avg_exclude_padding;
        c->kind = DN_POOL;
        return true;
    }
    if (s->op == TP_OP_MEAN && y4.v[0] == x4.v[0] && y4.v[1] == x4.v[1] && y4.v[2] == 1 && y4.v[3] == 1) {
        /* mean over the spatial dims, kept: a global average pool */
        int64_t *q = c->pool;
        q[0] = q[4] = x4.v[2];
        q[1] = q[5] = x4.v[3];
        q[2] = q[3] = q[6] = q[7] = q[10] = q[11] = 1;
        q[8] = q[9] = 0;
        c->alg = dnnl_pooling_avg_exclude_padding;
        c->kind = DN_POOL;
        return true;
    }
    if (tp__eltwise_info(&s->op_plan, &c->elt) && !c->elt.chained) {
        bool x_full = true;
        for (int d = 0; d < 4; d++) x_full = x_full && x4.v[d] == y4.v[d];
        if (!c->elt.binary) {
            if (!x_full) return false;
            if (!eltwise_alg(c->elt.op, c->elt.f, &c->alg, &c->alpha, &c->beta)) return false;
            c->kind = DN_UNARY;
            return true;
        }
        if (c->elt.scalar_b || s->n_in < 2 || s->in[1] < 0) return false;
        c->bin_a = 0;
        c->bin_b = 1;
        if (!x_full) { /* a commutative op with the full operand second: scale * x */
            if (c->elt.op != TP_ELT_MUL && !(c->elt.op == TP_ELT_ADD && c->elt.f[0] == 1.0)) return false;
            c->bin_a = 1;
            c->bin_b = 0;
            x = &plan->slots[s->in[1]];
            x4 = dims4(x);
            for (int d = 0; d < 4; d++)
                if (x->ndim != y->ndim || x4.v[d] != y4.v[d]) return false;
        }
        const plan_slot *b = &plan->slots[s->in[c->bin_b]];
        if (b->dtype != TP_FLOAT32 || b->ndim != y->ndim) return false;
        d4 b4 = dims4(b);
        bool full = true, chan = b4.v[2] == 1 && b4.v[3] == 1 && b4.v[1] == y4.v[1] &&
                                 (b4.v[0] == y4.v[0] || b4.v[0] == 1);
        for (int d = 0; d < 4; d++) full = full && b4.v[d] == y4.v[d];
        if (!full && !chan) return false;
        if (c->elt.op == TP_ELT_ADD && c->elt.f[0] == 1.0) c->alg = dnnl_binary_add;
        else if (c->elt.op == TP_ELT_MUL) c->alg = dnnl_binary_mul;
        else if (c->elt.op == TP_ELT_SUB && c->elt.f[0] == 1.0) c->alg = dnnl_binary_sub;
        else return false;
        c->kind = DN_BINARY;
        return true;
    }
    return false;
}

/* Is operand k of step s one this pass reads in any layout? */
static bool is_data_operand(const dn_cand *c, int k) {
    switch (c->kind) {
    case DN_CONV: return k == 0 || k == c->conv.ires;
    case DN_POOL:
    case DN_UNARY: return k == 0;
    case DN_BINARY: return k == 0 || k == 1;
    default: return false;
    }
}

typedef struct pass {
    tp_plan *plan;
    dn_cand *cand;
    bool *nhwc;  /* per slot: kept channels-last (NHWC) */
    int threads;
} pass;

/* Is slot i's tensor laid out channels-last? A tensor of one pixel per
 * channel has the same bytes in both layouts. */
static bool is_nhwc(const pass *ps, int i) {
    const plan_slot *sl = &ps->plan->slots[i];
    d4 v = dims4(sl);
    return ps->nhwc[i] || ((sl->ndim == 4 || sl->ndim == 3) && v.v[2] * v.v[3] == 1);
}

/* A band of a [N, C, H, W] tensor: images [n0, n1), rows [r0, r1),
 * columns [c0, c1) (a column band is one row of one image). */
typedef struct band {
    int64_t n0, n1, r0, r1, c0, c1;
} band;

/* The memory descriptor of band b of a tensor with sizes sz, NHWC (dense)
 * or NCHW (strided when the band is part of the image); *off its bytes. */
static tp_status band_md(dnnl_memory_desc_t *md, const int64_t *sz, bool nhwc, band b, int64_t *off) {
    dnnl_dims_t dims = {b.n1 - b.n0, sz[1], b.r1 - b.r0, b.c1 - b.c0};
    dnnl_status_t st;
    if (nhwc) {
        st = dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_f32, dnnl_nhwc);
        *off = ((b.n0 * sz[2] + b.r0) * sz[3] + b.c0) * sz[1] * (int64_t)sizeof(float);
    } else {
        dnnl_dims_t strides = {sz[1] * sz[2] * sz[3], sz[2] * sz[3], sz[3], 1};
        st = dnnl_memory_desc_init_by_strides(md, 4, dims, dnnl_f32, strides);
        *off = (b.n0 * sz[1] * sz[2] * sz[3] + b.r0 * sz[3] + b.c0) * (int64_t)sizeof(float);
    }
    TP_CHECK(st == dnnl_success, TP_ERR_UNSUPPORTED, "oneDNN memory descriptor (%d)", (int)st);
    return TP_OK;
}

/* The dense NHWC descriptor of band b of a tensor with sizes sz. */
static tp_status dense_md(dnnl_memory_desc_t *md, const int64_t *sz, band b) {
    int64_t off;
    return band_md(md, sz, true, b, &off);
}

static bool impl_is(const_dnnl_primitive_desc_t pd, const char *prefix) {
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    return impl && strncmp(impl, prefix, strlen(prefix)) == 0;
}

/* A windowed pool's primitive: oneDNN's first choice, except that its
 * AVX / AVX2 kernels give way to its SSE4.1 kernel. Pools are memory-bound,
 * so the narrower kernel loses nothing, while oneDNN 2.6's AVX2 NHWC pools
 * measured 2-6x slower than its SSE4.1 ones on an AVX2-only AMD Zen 3
 * (max 2x2 / 3x3 windows of the small CNN and ResNet: 0.25 -> 0.04 ms, 0.85
 * -> 0.21 ms; average 3x3: 0.48 -> 0.22 ms). Each output is the same max,
 * or the same sum of its window's taps in the same order, so results do not
 * change. AVX-512 kernels are kept. */
static dnnl_primitive_desc_t pool_pd_sse41(const_dnnl_op_desc_t desc, const dnnl_primitive_attr_t attr,
                                           dnnl_primitive_desc_t first) {
    if (!impl_is(first, "jit:avx") || impl_is(first, "jit:avx512")) return first;
    dnnl_primitive_desc_iterator_t it;
    if (dnnl_primitive_desc_iterator_create(&it, desc, attr, g_engine, NULL) != dnnl_success) return first;
    dnnl_primitive_desc_t chosen = NULL;
    do {
        dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
        if (pd && impl_is(pd, "jit:sse41")) chosen = pd;
        else if (pd) dnnl_primitive_desc_destroy(pd);
    } while (!chosen && dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    dnnl_primitive_desc_iterator_destroy(it);
    if (!chosen) return first;
    dnnl_primitive_desc_destroy(first);
    return chosen;
}

static tp_status make_pd(const_dnnl_op_desc_t desc, const dnnl_primitive_attr_t attr, bool windowed_pool,
                         dnnl_primitive_desc_t *pd) {
    dnnl_status_t st = dnnl_primitive_desc_create(pd, desc, attr, g_engine, NULL);
    if (st != dnnl_success) return tp_error(TP_ERR_UNSUPPORTED, "oneDNN has no primitive for this step (%d)", (int)st);
    if (windowed_pool) *pd = pool_pd_sse41(desc, attr, *pd);
    /* a reference implementation would be far slower than our kernels */
    const char *impl = NULL;
    dnnl_primitive_desc_query(*pd, dnnl_query_impl_info_str, 0, &impl);
    if (!impl || strncmp(impl, "ref", 3) == 0) {
        dnnl_primitive_desc_destroy(*pd);
        return tp_error(TP_ERR_UNSUPPORTED, "oneDNN has only a reference implementation (%s)", impl ? impl : "?");
    }
    return TP_OK;
}

/* Finish a chunk from its primitive descriptor: primitive, scratch size. */
static tp_status finish_chunk(dn_chunk *ch, dnnl_primitive_desc_t pd, size_t *scratch) {
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t sb = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (sb) {
        ch->md[M_SCRATCH] = *smd;
        ch->has[M_SCRATCH] = true;
        sb = (sb + 63) & ~(size_t)63;
        if (sb > *scratch) *scratch = sb;
    }
    dnnl_status_t st = dnnl_primitive_create(&ch->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success) return tp_error(TP_ERR_UNSUPPORTED, "oneDNN could not make a primitive (%d)", (int)st);
    return TP_OK;
}

static tp_status make_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to, dnnl_primitive_t *out) {
    dnnl_primitive_desc_t rpd;
    TP_CHECK(dnnl_reorder_primitive_desc_create(&rpd, from, g_engine, to, g_engine, NULL) == dnnl_success,
             TP_ERR_UNSUPPORTED, "oneDNN reorder");
    dnnl_status_t st = dnnl_primitive_create(out, rpd);
    dnnl_primitive_desc_destroy(rpd);
    TP_CHECK(st == dnnl_success, TP_ERR_UNSUPPORTED, "oneDNN reorder");
    return TP_OK;
}

static tp_status make_attr(dnnl_primitive_attr_t *attr, bool sum, dnnl_alg_kind_t act, float alpha, float beta) {
    TP_CHECK(dnnl_primitive_attr_create(attr) == dnnl_success, TP_ERR_NOMEM, "oneDNN attributes");
    dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
    if (sum || act) {
        dnnl_post_ops_t po;
        if (dnnl_post_ops_create(&po) != dnnl_success) {
            dnnl_primitive_attr_destroy(*attr);
            return tp_error(TP_ERR_NOMEM, "oneDNN post-ops");
        }
        if (sum) dnnl_post_ops_append_sum(po, 1.0f);
        if (act) dnnl_post_ops_append_eltwise(po, 1.0f, act, alpha, beta);
        dnnl_primitive_attr_set_post_ops(*attr, po);
        dnnl_post_ops_destroy(po);
    }
    return TP_OK;
}

/* Pack the chunk's weights (OIHW / GOIHW floats at w) into the layout pd chose. */
static tp_status pack_weights(dn_chunk *ch, const dnnl_memory_desc_t *user, const float *w) {
    size_t bytes = dnnl_memory_desc_get_size(&ch->md[M_W]);
    ch->wbase = tp__malloc_stream(bytes, &ch->w);
    TP_CHECK(ch->wbase != NULL, TP_ERR_NOMEM, "out of memory packing convolution weights");
    dnnl_primitive_t r = NULL;
    dnnl_memory_t from = NULL, to = NULL;
    dnnl_stream_t s = NULL;
    bool ok = make_reorder(user, &ch->md[M_W], &r) == TP_OK &&
              dnnl_memory_create(&from, user, g_engine, (void *)w) == dnnl_success &&
              dnnl_memory_create(&to, &ch->md[M_W], g_engine, ch->w) == dnnl_success &&
              dnnl_stream_create(&s, g_engine, dnnl_stream_default_flags) == dnnl_success;
    if (ok) ok = reorder(r, s, from, to) == dnnl_success && dnnl_stream_wait(s) == dnnl_success;
    if (s) dnnl_stream_destroy(s);
    if (from) dnnl_memory_destroy(from);
    if (to) dnnl_memory_destroy(to);
    if (r) dnnl_primitive_destroy(r);
    TP_CHECK(ok, TP_ERR_UNSUPPORTED, "oneDNN could not pack convolution weights");
    return TP_OK;
}

/* Chunk i's weights: another chunk's packed copy when its primitive wants
 * the same layout, else packed from w (user layout umd). */
static tp_status share_or_pack(dn_step *d, int i, const dnnl_memory_desc_t *umd, const float *w) {
    dn_chunk *ch = &d->chunks[i];
    for (int q = 0; q < i; q++)
        if (d->chunks[q].wbase && dnnl_memory_desc_equal(&d->chunks[q].md[M_W], &ch->md[M_W])) {
            ch->w = d->chunks[q].w;
            return TP_OK;
        }
    return pack_weights(ch, umd, w);
}

/* Cut n images of oh x ow outputs into chunks: whole images when there
 * are several, else bands of rows, else (one row of output and of input,
 * as conv1d has) bands of columns. With more than one chunk, out[0] is the
 * whole step (what one thread runs: cutting it would only re-read the
 * weights) and out[1..k] the cut. */
static int split(int64_t n, int64_t oh, int64_t ow, int64_t ih, int threads, double work, band *out) {
    int want = (int)(work / 4e5);
    if (want < 1) want = 1;
    if (want > threads) want = threads;
    out[0] = (band){0, n, 0, oh, 0, ow};
    band *p = out + 1;
    int k = 1;
    if (n > 1) {
        k = n < want ? (int)n : want;
        for (int i = 0; i < k; i++) p[i] = (band){n * i / k, n * (i + 1) / k, 0, oh, 0, ow};
    } else if (oh > 1) {
        k = oh < want ? (int)oh : want;
        for (int i = 0; i < k; i++) p[i] = (band){0, 1, oh * i / k, oh * (i + 1) / k, 0, ow};
    } else if (ih == 1) {
        k = ow < want ? (int)ow : want;
        for (int i = 0; i < k; i++) p[i] = (band){0, 1, 0, 1, ow * i / k, ow * (i + 1) / k};
    }
    return k == 1 ? 1 : k + 1;
}

/* The input range [*i0, *i1) of an axis of length in that outputs
 * [o0, o1) need (kernel k, stride s, padding p, dilation d), with the
 * padding before and after it. crop false keeps the whole axis (a band of
 * several images must stay dense): oneDNN's floor formula then drops what
 * is past the last window. A band ending at the axis' last output (o1 ==
 * out) keeps the input to its end the same way: cropping the row a stride-2
 * 1x1 convolution skips (56 rows -> 55) made oneDNN give up its 1x1 kernel
 * for its direct one, 2-3x slower on ResNet-50's downsampling layers. */
static void input_range(int64_t o0, int64_t o1, int64_t out, int64_t in, int64_t k, int64_t s, int64_t p, int64_t d,
                        bool crop, int64_t *i0, int64_t *i1, int64_t *pl, int64_t *pr) {
    int64_t lo = o0 * s - p, hi = (o1 - 1) * s - p + (k - 1) * d + 1;
    *pl = lo < 0 ? -lo : 0;
    *pr = hi > in ? hi - in : 0;
    *i0 = lo < 0 || !crop ? 0 : lo;
    *i1 = hi > in || !crop || o1 == out ? in : hi;
}

/* The input band of output band ob of an oh x ow output (kernel geometry
 * g = kh, kw, sh, sw, ph, pw, dh, dw over an input of ih x iw) and its
 * padding (top, left, bottom, right). Rows are cropped for a one-image
 * band; columns for a column band. */
static band input_band(band ob, int64_t oh, int64_t ow, int64_t ih, int64_t iw, const int64_t *g, int64_t pad[4]) {
    band ib = ob;
    bool one = ob.n1 - ob.n0 == 1;
    input_range(ob.r0, ob.r1, oh, ih, g[0], g[2], g[4], g[6], one, &ib.r0, &ib.r1, &pad[0], &pad[2]);
    input_range(ob.c0, ob.c1, ow, iw, g[1], g[3], g[5], g[7], one && ih == 1, &ib.c0, &ib.c1, &pad[1], &pad[3]);
    return ib;
}

/* Where chunk ch's primitive reads (dense NHWC band ib of a tensor with
 * sizes xs) and writes (band ob of ys): the tensors themselves when they
 * are NHWC, else staging buffers reordered from / to the NCHW bands. */
static tp_status stage(dn_step *d, dn_chunk *ch, const int64_t *xs, bool nx, band ib, const int64_t *ys, bool ny,
                       band ob) {
    size_t sb = (dnnl_memory_desc_get_size(&ch->md[M_SRC]) + 63) & ~(size_t)63;
    size_t db = (dnnl_memory_desc_get_size(&ch->md[M_DST]) + 63) & ~(size_t)63;
    TP_TRY(band_md(&ch->md[M_SRC_T], xs, nx, ib, &ch->off[nx ? M_SRC : M_SRC_T]));
    if (!nx) {
        ch->has[M_SRC_T] = true;
        TP_TRY(make_reorder(&ch->md[M_SRC_T], &ch->md[M_SRC], &ch->r_src));
        if (sb > d->stage_src_bytes) d->stage_src_bytes = sb;
    }
    TP_TRY(band_md(&ch->md[M_DST_T], ys, ny, ob, &ch->off[ny ? M_DST : M_DST_T]));
    if (!ny) {
        ch->has[M_DST_T] = true;
        TP_TRY(make_reorder(&ch->md[M_DST], &ch->md[M_DST_T], &ch->r_dst));
        if (db > d->stage_dst_bytes) d->stage_dst_bytes = db;
    }
    return TP_OK;
}

/* Where oneDNN runs brgemm (AVX-512), the direct form stays with it and
 * only 3x3 stride-1 convolutions move, to Winograd, when they have at
 * least WINOGRAD_MIN_TILES 2x2 output tiles and 32 channels on either
 * side. Measured in ResNet-18 (Ice Lake, one thread, per-node profile):
 * 56x56x64 1.45-1.55 -> 0.73-0.86 ms (F(4x4)), 28x28x128 1.48-1.53 ->
 * 0.80-0.86 (F(4x4)), 14x14x256 1.59-1.62 -> 1.30-1.32 (F(2x2)); the
 * small CNN's 16x16 32 -> 64 layer at batch 8 0.45 -> 0.31 (F(4x4); 0.48
 * with F(2x2)). Fewer tiles (at least WINOGRAD_FEW_TILES) take F(2x2, 3x3)
 * when both sides have WINOGRAD_FEW_CHANNELS channels, its threads each
 * taking a range of output channels (conv_nhwc_avx2.c): ResNet-50's 7x7x512
 * layers (16 tiles) on Zen 4, per-node minima, 1 / 2 threads, 2.36 / 1.29-1.31
 * ms as the implicit GEMM, 1.84-1.88 / 1.08-1.09 as F(2x2) (on Ice Lake, one
 * thread, 2.2-2.4 ms either way; 2.0 at two threads before the channel
 * split, when one thread ran the single block of tiles; since their
 * transformed weights are built per call from the 9 taps, conv_nhwc.h's
 * TP_WINO_OTF_MAX_TILES, 0.86-0.89 / 0.47-0.48 ms on a Zen 5, against
 * 0.98-1.00 / 0.55-0.61 with them packed once). Our implicit GEMM
 * measured 0.8-1.3x brgemm's time on ResNet-50's other layers (slower on
 * most), so those stay, except convolutions with at most SMALL_PIXELS
 * output pixels (7x7 maps and squeeze-excitation's 1x1 ones at batch 1),
 * where our GEMM splits the output channels evenly between threads while
 * oneDNN's chunks are bands of rows (4 and 3 of 7) and a GEMV's one:
 * sums of per-node minima over 3 alternating runs (Ice Lake), 1 / 2
 * threads, our GEMM against brgemm on the steps that move: ResNet-18's 5
 * layer4 steps 8.20 / 5.03 ms against 8.14 / 5.49; EfficientNet-B0's 42
 * (squeeze-excitation 1x1 convolutions 0.35-0.75x) 2.94 / 1.97 against
 * 3.21 / 2.31; MobileNetV2's 8 (7x7 1x1 convolutions) 1.67 / 1.19 against
 * 1.64 / 1.16. */
enum { WINOGRAD_MIN_TILES = 48, WINOGRAD_FEW_TILES = 16, WINOGRAD_FEW_CHANNELS = 256, SMALL_PIXELS = 64 };

/* A convolution's geometry as conv_nhwc takes it (no bias, activation or
 * algorithm yet). */
static tp_conv_nhwc nhwc_geometry(const tp_conv_info *v) {
    return (tp_conv_nhwc){.n = v->n, .cin = v->cin, .h = v->h, .w = v->w, .cout = v->cout, .oh = v->oh, .ow = v->ow,
                          .kh = v->kh, .kw = v->kw, .sh = v->sh, .sw = v->sw, .ph = v->ph, .pw = v->pw, .dh = v->dh,
                          .dw = v->dw};
}

static bool winograd_beats_brgemm(const tp_conv_info *v) {
    const tp_conv_nhwc g = nhwc_geometry(v);
    return tp__conv_nhwc_winograd_ok(&g) && v->cin >= 32 && v->cout >= 32 &&
           tp__conv_nhwc_tiles(&g, 2) >= WINOGRAD_MIN_TILES;
}

/* Pointwise convolutions (1x1, stride 1, no padding) that brgemm runs
 * with a summed residual or a transcendental activation (silu, sigmoid,
 * tanh, gelu) go to our GEMM, which reads the NHWC input in place and runs
 * the residual and activation on each finished block while it is in cache;
 * oneDNN 2.7's sum post-op and eltwise swish cost more than the product at
 * these shapes (swish ~0.7 ns an output, ours 0.34 then: Ice Lake, the
 * silu before vmath.h's one-divide form, 0.21 on Zen 4). Sums of per-node
 * minima (2 alternating runs, Ice Lake, 1 / 2 threads), ours against
 * brgemm: ResNet-50's 64 -> 256 expansions with a residual 0.77-0.83 /
 * 0.82-0.83, its 128 -> 512 and 256 -> 1024 ones 0.81-1.01 / 0.92-0.99;
 * EfficientNet-B0's silu expansions 0.78-0.92 / 0.83-1.01 and residual
 * projections 0.68-0.99 / 0.85-1.00; MobileNetV2's residual projections
 * 0.71-1.07 / 0.73-1.11. Without either, brgemm stays above
 * POINTWISE_GEMM_PIXELS (below): with relu6 the same expansions took us
 * 1.13-1.41x its time (K = 16-64: its kernel handles a short K better
 * than ours). */
static bool act_transcendental(const tp_op_plan *act) { return tp__eltwise_transcendental(tp__fused_act_op(act)); }

/* 1x1, stride 1, no padding: an NHWC input is the GEMM's A itself. */
static bool is_pointwise(const tp_conv_info *v) {
    return v->kh == 1 && v->kw == 1 && v->sh == 1 && v->sw == 1 && v->ph == 0 && v->pw == 0;
}

/* Pointwise convolutions with at most POINTWISE_GEMM_PIXELS output pixels
 * (14x14 maps at batch 1) go to our GEMM whatever follows them: their
 * weights come from memory, and since its tile kernels spread their
 * prefetch over the k steps (gemm_avx512.c) our GEMM streams them faster
 * than brgemm. ResNet-50's 1024 -> 256 and 1024 -> 512 ones with relu
 * (AVX-512 Xeon, 2 threads, per-node profile of 2 alternating runs) 2.57-2.59
 * -> 2.33-2.36 ms in all, the model 0.992x the time at 1 and 2 threads;
 * at 784 pixels the same as brgemm (ResNet-50 1.001x), MobileNetV2 and
 * EfficientNet-B0 unchanged (0.997-1.010x) with 256. */
enum { POINTWISE_GEMM_PIXELS = 256 };

static bool pointwise_to_gemm(const tp_conv_info *v) {
    return is_pointwise(v) &&
           (v->ires >= 0 || act_transcendental(v->act) || v->n * v->oh * v->ow <= POINTWISE_GEMM_PIXELS);
}

/* 1x1 with a stride, no padding (ResNet's downsampling projections), where
 * oneDNN runs brgemm: our implicit GEMM gathers every stride-th pixel's cin
 * floats as A's rows. oneDNN's single primitive for ResNet-50's 512 ->
 * 1024 one (28x28 -> 14x14; the whole step, what one thread runs) blocks
 * its weights Acdb32a and took 2.49 ms at one thread against our 1.94
 * (Zen 4, per-node minima of 2 alternating runs; ResNet-50 62.8 -> 60.9
 * ms); at two threads oneDNN's half-image primitives and ours took the
 * same (0.983 / 0.986 ms; its 256 -> 512 one 0.965 / 0.989 and 1.95 /
 * 1.94 at one thread). */
static bool strided_pointwise(const tp_conv_info *v) {
    return v->kh == 1 && v->kw == 1 && (v->sh > 1 || v->sw > 1) && v->ph == 0 && v->pw == 0 && v->cin >= 16;
}

/* Our direct kernel (conv_direct_avx512.c) for a dense convolution of at
 * most 4 input channels with a spatial kernel (a vision model's first
 * layer), at the AVX-512 level, where neither a GEMM's gathered rows nor
 * oneDNN's kernel keep the FMA units busy. ResNet-50's 7x7 stride-2 stem
 * (224x224x3 -> 64 channels), one thread, model 167: the kernel alone
 * best 1.46-1.49 ms (158-162 GFLOP/s, ~75% of the FMA peak; a
 * standalone copy with the sizes as constants 1.36-1.42), oneDNN's
 * brgconv step 1.73-1.77 ms in the model against 1.67-1.68 for ours;
 * with its max pool fused (fuse_pools) 1.78-1.83 ms against 2.01-2.05
 * for the two steps. Whole
 * models, alternating pairs against oneDNN's steps: the small CNN 0.90x at
 * batch 1 and 0.88x at batch 8 (2 threads), EfficientNet-B0 0.98x,
 * MobileNetV2 0.995x, ResNet-50 0.98x at 1 thread and 1.00x at 2,
 * ResNet-18 1.01x at 2 (within noise; its stem and pool 1.01-1.03 -> 0.96
 * ms). K = cin x kh x kw <= 256 keeps a 64-column panel of the weights
 * (64 KiB) near L1. Not with TP_CONV_GEMM set: the tests' forced paths
 * stay as they were. */
static bool direct_wanted(const tp_conv_info *v) {
    return g_gemmconv < 0 && g_level >= TP_CPU_AVX512 && v->groups == 1 && v->cin <= 4 && v->kh * v->kw > 1 &&
           v->cin * v->kh * v->kw <= 256;
}

/* Our implicit GEMM (conv_nhwc_avx2.c) takes a dense convolution with a spatial
 * kernel from oneDNN when oneDNN would run a direct JIT kernel on it (not
 * brgemm), the output is NHWC and so is any summed residual. Measured with
 * bench/conv_bench.c on an AVX2-only Zen 3 (one thread, both in one run):
 * ResNet-18's 3x3 layers take 0.69-1.01x the time of oneDNN 2.6's
 * jit:avx2 kernel; its 7x7 stem (3 input channels, so runs of 3 floats to
 * gather) 3x and its 1x1 layers 1.0-1.3x, so those, and grouped ones, stay
 * with oneDNN, and so do one-row kernels: on the audio model's conv1d
 * layers (k5 s2, 32-128 channels, 1000-4000 columns) oneDNN's kernel
 * reached 75-79% of the FMA peak, and the whole model took 5.7-6.3 ms
 * with it against 7.0-8.0 with ours. cin >= 16 keeps the gathered runs at
 * 64 bytes or more.
 * TP_CONV_GEMM=1 takes every dense convolution with an NHWC output (the
 * tests use it to run this path on machines where oneDNN has brgemm). */
static bool gemmconv_wanted(const tp_conv_info *v, bool ny, bool res_ok, bool scaled, const_dnnl_primitive_desc_t pd) {
    if (g_gemmconv == 0 || v->groups != 1 || !ny || !res_ok) return false;
    if (!scaled && direct_wanted(v)) return true;
    if (g_gemmconv >= 1 || scaled) return true;
    if (!impl_is(pd, "brg")) return v->kh > 1 && v->kw > 1 && v->cin >= 16;
    return winograd_beats_brgemm(v) || v->n * v->oh * v->ow <= SMALL_PIXELS || pointwise_to_gemm(v) ||
           strided_pointwise(v);
}

/* Winograd (conv_nhwc_avx2.c) for the 3x3 stride-1 convolutions the
 * implicit GEMM takes, when there are enough tiles for its GEMMs
 * (WINOGRAD_MIN_TILES): F(4x4, 3x3) when its 4x4 tiles are enough, else
 * F(2x2, 3x3). Below that the GEMMs' rows are too few for the transformed
 * weights ((m+2)^2 x cin x cout floats, read once per block of tiles) to
 * pay: measured with one image on Ice Lake, one thread, 14x14x256 took
 * 0.91 ms with F(2x2) (49 tiles) against 1.30 with F(4x4) (16 tiles);
 * 28x28x128 0.86 against 0.55 (49 tiles), 56x56x64 0.98 against 0.64.
 * TP_CONV_GEMM=2 takes one of them wherever Winograd applies, 4 takes
 * F(4x4, 3x3). */
static int winograd_wanted(const tp_conv_nhwc *g) {
    if (!tp__conv_nhwc_winograd_ok(g) || g_gemmconv == 1) return 0;
    if (g_gemmconv == 4) return 4;
    const int64_t tiles2 = tp__conv_nhwc_tiles(g, 2), tiles4 = tp__conv_nhwc_tiles(g, 4);
    if (g_gemmconv == 2) return tiles4 >= WINOGRAD_MIN_TILES ? 4 : 2;
    if (g->cin < 16 || g->cout < 16) return 0;
    if (tiles4 >= WINOGRAD_MIN_TILES) return 4;
    if (tiles2 >= WINOGRAD_MIN_TILES) return 2;
    return tiles2 >= WINOGRAD_FEW_TILES && g->cin >= WINOGRAD_FEW_CHANNELS && g->cout >= WINOGRAD_FEW_CHANNELS ? 2 : 0;
}

/* The step's own copy of the convolution's (folded) bias: the op plan it
 * came from is freed once the step is built. */
static tp_status own_bias(dn_step *d, const tp_conv_info *v) {
    d->bias = tp_malloc((size_t)v->cout * sizeof(float));
    TP_CHECK(d->bias != NULL, TP_ERR_NOMEM, "out of memory planning a convolution's bias");
    memcpy(d->bias, v->bias, (size_t)v->cout * sizeof(float));
    return TP_OK;
}

static tp_status build_gemmconv(const dn_cand *c, dn_step *d, bool nx, int threads) {
    const tp_conv_info *v = &c->conv;
    d->kind = DN_GEMMCONV;
    d->ires = v->ires;
    d->in_src = 0;
    d->in_src1 = -1;
    d->gc_x_nhwc = nx;
    d->gc = tp_calloc(1, sizeof *d->gc);
    TP_CHECK(d->gc != NULL, TP_ERR_NOMEM, "out of memory planning a convolution");
    if (v->bias) TP_TRY(own_bias(d, v));
    tp_conv_nhwc *g = d->gc;
    *g = nhwc_geometry(v);
    g->bias = d->bias;
    g->act = v->act;
    g->direct = direct_wanted(v);
    g->winograd = g->direct ? 0 : winograd_wanted(g);
    g->threads = threads;
    return tp__conv_nhwc_init(g, g_level >= TP_CPU_AVX512 ? TP_ISA_AVX512 : TP_ISA_AVX2, v->weight);
}

static tp_status build_conv(pass *ps, const plan_step *s, const dn_cand *c, dn_step *d) {
    const tp_conv_info *v = &c->conv;
    d4 x4 = dims4(&ps->plan->slots[s->in[0]]), y4 = dims4(&ps->plan->slots[s->out[0]]);
    bool nx = is_nhwc(ps, s->in[0]), ny = is_nhwc(ps, s->out[0]);
    band bands[257];
    double work = 2.0 * (double)v->n * (double)v->cout * (double)(v->oh * v->ow) * (double)(v->cin / v->groups) *
                  (double)(v->kh * v->kw);
    int k = split(v->n, v->oh, v->ow, v->h, ps->threads, work, bands);
    const int64_t geo[8] = {v->kh, v->kw, v->sh, v->sw, v->ph, v->pw, v->dh, v->dw};
    d->kind = DN_CONV;
    d->ires = v->ires;
    d->in_src = 0;
    d->in_src1 = -1;
    d->stage_src = !nx;
    d->stage_dst = !ny;
    d->n_chunks = k;
    d->chunks = tp_calloc((size_t)k, sizeof *d->chunks);
    TP_CHECK(d->chunks != NULL, TP_ERR_NOMEM, "out of memory planning oneDNN steps");
    bool nres = v->ires >= 0 && is_nhwc(ps, s->in[v->ires]);
    /* A transcendental activation (silu, gelu, ...) runs as our loop over
     * each chunk's output right after oneDNN wrote it, rather than as its
     * eltwise post-op: oneDNN 2.7's swish cost ~0.7 ns an output inside
     * the convolution, ours 0.34 (the silu of then; 0.21 on Zen 4 with
     * vmath.h's one-divide form) as a pass over a band just written
     * (EfficientNet-B0's depthwise convolutions, Ice Lake, per-node sums,
     * old and new alternating: see docs/bench-results-intel.md). Only
     * where the chunks write the NHWC tensor itself (not a staging buffer),
     * at the AVX-512 level, where it was measured (our sigmoid / silu are
     * intrinsics there, eltwise_loops.h), and for silu at the AVX2 level,
     * where ours is intrinsics too (vmath.h, 0.27 ns an output in L1 on
     * Zen 4; the auto-vectorised x * sigmoid(x) took 0.71). */
    const bool our_act = g_level >= TP_CPU_AVX512 ? act_transcendental(v->act)
                         : g_level >= TP_CPU_AVX2 && tp__fused_act_op(v->act) == TP_ELT_SILU;
    d->act = ny && our_act ? v->act : NULL;
    int64_t g = v->groups, cg = v->cin / g, og = v->cout / g;
    dnnl_memory_desc_t wmd, umd, bmd;
    if (g == 1) {
        dnnl_dims_t wd = {v->cout, v->cin, v->kh, v->kw};
        dnnl_memory_desc_init_by_tag(&wmd, 4, wd, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&umd, 4, wd, dnnl_f32, dnnl_oihw);
    } else {
        dnnl_dims_t wd = {g, og, cg, v->kh, v->kw};
        dnnl_memory_desc_init_by_tag(&wmd, 5, wd, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&umd, 5, wd, dnnl_f32, dnnl_goihw);
    }
    dnnl_dims_t bd = {v->cout};
    dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x);
    for (int i = 0; i < k; i++) {
        dn_chunk *ch = &d->chunks[i];
        band ob = bands[i];
        int64_t pad[4];
        band ib = input_band(ob, v->oh, v->ow, v->h, v->w, geo, pad);
        dnnl_memory_desc_t smd, dmd;
        TP_TRY(dense_md(&smd, x4.v, ib));
        TP_TRY(dense_md(&dmd, y4.v, ob));
        dnnl_dims_t strides = {v->sh, v->sw}, dil = {v->dh - 1, v->dw - 1}, pl = {pad[0], pad[1]};
        dnnl_dims_t pr = {pad[2], pad[3]};
        dnnl_convolution_desc_t cd;
        TP_CHECK(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &smd,
                                                            &wmd, v->bias ? &bmd : NULL, &dmd, strides, dil, pl,
                                                            pr) == dnnl_success,
                 TP_ERR_UNSUPPORTED, "oneDNN convolution descriptor");
        dnnl_primitive_attr_t attr;
        TP_TRY(make_attr(&attr, v->ires >= 0, d->act ? 0 : c->alg, c->alpha, c->beta));
        dnnl_primitive_desc_t pd;
        tp_status st = make_pd(&cd, attr, false, &pd);
        dnnl_primitive_attr_destroy(attr);
        TP_TRY(st);
        if (i == 0 && gemmconv_wanted(v, ny, v->ires < 0 || nres, c->se_mul > 0 || c->dw_src > 0, pd)) {
            dnnl_primitive_desc_destroy(pd);
            tp_free(d->chunks);
            d->chunks = NULL;
            d->n_chunks = 0;
            return build_gemmconv(c, d, nx, ps->threads);
        }
        ch->md[M_SRC] = smd;
        ch->md[M_DST] = dmd;
        ch->md[M_W] = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        ch->has[M_SRC] = ch->has[M_DST] = ch->has[M_W] = true;
        if (v->bias) {
            ch->md[M_B] = bmd;
            ch->has[M_B] = true;
        }
        if (v->bias && !d->bias) st = own_bias(d, v);
        ch->bias = d->bias;
        if (st == TP_OK) st = share_or_pack(d, i, &umd, v->weight);
        if (st == TP_OK) st = stage(d, ch, x4.v, nx, ib, y4.v, ny, ob);
        if (st == TP_OK && v->ires >= 0) {
            const plan_slot *r = &ps->plan->slots[s->in[v->ires]];
            d4 r4 = dims4(r);
            st = band_md(&ch->md[M_RES], r4.v, nres, ob, &ch->off[M_RES]);
            ch->res_bytes = dnnl_memory_desc_get_size(&dmd);
            if (st == TP_OK && !nres) {
                ch->has[M_RES] = true;
                st = make_reorder(&ch->md[M_RES], &dmd, &ch->r_res);
            }
        }
        if (st != TP_OK) {
            dnnl_primitive_desc_destroy(pd);
            return st;
        }
        TP_TRY(finish_chunk(ch, pd, &d->scratch));
    }
    return TP_OK;
}

static tp_status build_other(pass *ps, const plan_step *s, const dn_cand *c, dn_step *d) {
    const plan_slot *x = &ps->plan->slots[s->in[c->kind == DN_BINARY ? c->bin_a : 0]], *y = &ps->plan->slots[s->out[0]];
    d4 x4 = dims4(x), y4 = dims4(y);
    const int64_t *xs = x4.v, *ys = y4.v;
    band bands[257];
    double work = (double)(ys[0] * ys[1] * ys[2] * ys[3]) * (c->kind == DN_POOL ? (double)(c->pool[4] * c->pool[5]) : 1.0);
    int k = split(ys[0], ys[2], ys[3], xs[2], ps->threads, work * 4, bands);
    const int64_t *q = c->pool;
    const int64_t geo[8] = {q[4], q[5], q[6], q[7], q[8], q[9], q[10], q[11]};
    d->kind = c->kind;
    d->ires = -1;
    d->in_src = c->kind == DN_BINARY ? c->bin_a : 0;
    d->in_src1 = c->kind == DN_BINARY ? c->bin_b : -1;
    if (s->op == TP_OP_MEAN && c->kind == DN_POOL && ys[2] == 1 && ys[3] == 1) { /* gmean_run */
        d->gmean = true;
        d->gm_nhwc = is_nhwc(ps, s->in[0]);
        d->gm[0] = xs[0];
        d->gm[1] = xs[1];
        d->gm[2] = xs[2] * xs[3];
        return TP_OK;
    }
    /* pools and activations convert at a region's edge like convolutions;
     * a binary op's layouts match (layouts_ok) */
    bool nx = c->kind == DN_BINARY || is_nhwc(ps, s->in[0]), ny = c->kind == DN_BINARY || is_nhwc(ps, s->out[0]);
    /* oneDNN's max pooling drops NaN (PyTorch's propagates it): max pools
     * run here only on mpool_run, which reads NHWC */
    if (c->kind == DN_POOL && c->alg == dnnl_pooling_max && !nx)
        return tp_error(TP_ERR_UNSUPPORTED, "a max pool of an NCHW input");
    if (c->kind == DN_POOL && c->alg == dnnl_pooling_max && nx) { /* mpool_run */
        d->mpool = true;
        d->mp_nchw = !ny;
        d->mp_row_bytes = ny ? 0 : ((size_t)(ys[3] * ys[1]) * sizeof(float) + 63) & ~(size_t)63;
        const int64_t mp[14] = {xs[0], xs[1], xs[2], xs[3], ys[2], ys[3], q[4], q[5], q[6], q[7], q[8], q[9], q[10], q[11]};
        memcpy(d->mp, mp, sizeof mp);
        /* every thread of the pass, however small the pool: its input is the
         * output of a step the threads shared, and each pools mostly rows it
         * wrote (on fewer threads, one reads the others' rows from their
         * cores' caches). Sapphire Rapids, 2 threads, alternating runs: the
         * small CNN's two pools (32 x 32 x 32 and 16 x 16 x 64 inputs) 0.56x
         * their time on the one thread split() gave them, the model 0.92x at
         * batch 1 and 0.93x at batch 8. */
        d->mp_threads = ps->threads;
        if (q[4] * q[5] <= MPOOL_TAPS) {
            d->mp_taps = (int)(q[4] * q[5]);
            for (int64_t ky = 0, t = 0; ky < q[4]; ky++)
                for (int64_t kx = 0; kx < q[5]; kx++) d->mp_off[t++] = (ky * q[10] * xs[3] + kx * q[11]) * xs[1];
        }
        return TP_OK;
    }
    d->stage_src = !nx;
    d->stage_dst = !ny;
    d->n_chunks = k;
    d->chunks = tp_calloc((size_t)k, sizeof *d->chunks);
    TP_CHECK(d->chunks != NULL, TP_ERR_NOMEM, "out of memory planning oneDNN steps");
    for (int i = 0; i < k; i++) {
        dn_chunk *ch = &d->chunks[i];
        band ob = bands[i], ib = ob;
        int64_t pad[4] = {0, 0, 0, 0};
        if (c->kind == DN_POOL) ib = input_band(ob, ys[2], ys[3], xs[2], xs[3], geo, pad);
        dnnl_memory_desc_t smd, dmd, bmd;
        TP_TRY(dense_md(&smd, xs, ib));
        TP_TRY(dense_md(&dmd, ys, ob));
        dnnl_status_t dst = dnnl_success;
        union {
            dnnl_pooling_v2_desc_t pool;
            dnnl_eltwise_desc_t elt;
            dnnl_binary_desc_t bin;
        } u;
        if (c->kind == DN_POOL) {
            dnnl_dims_t kern = {q[4], q[5]}, str = {q[6], q[7]}, dil = {q[10] - 1, q[11] - 1}, pl = {pad[0], pad[1]};
            dnnl_dims_t pr = {pad[2], pad[3]};
            dst = dnnl_pooling_v2_forward_desc_init(&u.pool, dnnl_forward_inference, c->alg, &smd, &dmd, str,
                                                    kern, dil, pl, pr);
        } else if (c->kind == DN_UNARY) {
            dst = dnnl_eltwise_forward_desc_init(&u.elt, dnnl_forward_inference, c->alg, &smd, c->alpha, c->beta);
        } else {
            const plan_slot *b = &ps->plan->slots[s->in[c->bin_b]];
            d4 b4 = dims4(b);
            bool full = b4.v[2] == ys[2] && b4.v[3] == ys[3];
            band bb = ob;
            if (b4.v[0] == 1) bb.n0 = 0, bb.n1 = 1;
            if (!full) bb.r0 = 0, bb.r1 = 1, bb.c0 = 0, bb.c1 = 1;
            /* a [N, C, 1, 1] operand has the same bytes in both layouts */
            TP_TRY(band_md(&bmd, b4.v, true, bb, &ch->off[M_SRC1]));
            ch->md[M_SRC1] = bmd;
            ch->has[M_SRC1] = true;
            dst = dnnl_binary_desc_init(&u.bin, c->alg, &smd, &bmd, &dmd);
        }
        dnnl_primitive_attr_t attr;
        TP_TRY(make_attr(&attr, false, 0, 0, 0));
        tp_status st = TP_OK;
        dnnl_primitive_desc_t pd = NULL;
        if (dst != dnnl_success) st = tp_error(TP_ERR_UNSUPPORTED, "oneDNN descriptor (%d)", (int)dst);
        else st = make_pd(&u, attr, c->kind == DN_POOL && (q[4] < xs[2] || q[5] < xs[3]), &pd);
        dnnl_primitive_attr_destroy(attr);
        TP_TRY(st);
        ch->md[M_SRC] = smd;
        ch->md[M_DST] = dmd;
        ch->has[M_SRC] = ch->has[M_DST] = true;
        st = stage(d, ch, xs, nx, ib, ys, ny, ob);
        if (st != TP_OK) {
            dnnl_primitive_desc_destroy(pd);
            return st;
        }
        TP_TRY(finish_chunk(ch, pd, &d->scratch));
    }
    return TP_OK;
}

/* Slots a and b must share a layout: false (and *bad, the flagged one to
 * send back to NCHW) when they do not. */
static bool same_layout(const pass *ps, int a, int b, int *bad) {
    if (is_nhwc(ps, a) == is_nhwc(ps, b)) return true;
    if (!ps->nhwc[a] && !ps->nhwc[b]) return true; /* a one-pixel tensor vs NCHW: nothing runs here */
    *bad = ps->nhwc[a] ? a : b;
    return false;
}

/* Does step s (a candidate) accept the layouts chosen for its operands? */
static bool layouts_ok(const pass *ps, const plan_step *s, const dn_cand *c, int *bad) {
    switch (c->kind) {
    case DN_BINARY:
        return same_layout(ps, s->in[c->bin_a], s->out[0], bad) && same_layout(ps, s->in[c->bin_b], s->in[c->bin_a], bad);
    default: return true;
    }
}

/* Mark the slots kept NHWC: made by a candidate and read only as data by
 * candidates (never a user output, view root, mutation or other input). */
static void mark(pass *ps, const int *reads, const int *data_reads) {
    tp_plan *plan = ps->plan;
    for (int i = 0; i < plan->n_slots; i++) {
        const plan_slot *sl = &plan->slots[i];
        ps->nhwc[i] = false;
        if (sl->kind != SLOT_ARENA || sl->def < 0 || sl->def >= plan->n_steps || ps->cand[sl->def].kind == DN_NONE)
            continue;
        if (plan->steps[sl->def].out[0] != i || reads[i] == 0 || reads[i] != data_reads[i]) continue;
        ps->nhwc[i] = true;
    }
    /* steps with a fixed layout relation pull mismatched operands back to NCHW */
    for (bool changed = true; changed;) {
        changed = false;
        for (int j = 0; j < plan->n_steps; j++) {
            int bad;
            if (ps->cand[j].kind == DN_NONE || plan->steps[j].kind == STEP_FUSED) continue;
            if (!layouts_ok(ps, &plan->steps[j], &ps->cand[j], &bad)) {
                ps->nhwc[bad] = false;
                changed = true;
            }
        }
    }
}

bool tp__onednn_enabled(void) {
    pthread_once(&g_once, init_once);
    return g_enabled;
}

static void count_reads(pass *ps, int *reads, int *data_reads) {
    tp_plan *plan = ps->plan;
    memset(reads, 0, (size_t)plan->n_slots * sizeof *reads);
    memset(data_reads, 0, (size_t)plan->n_slots * sizeof *data_reads);
    for (int j = 0; j < plan->n_steps; j++) {
        const plan_step *s = &plan->steps[j];
        if (s->kind == STEP_FUSED) continue;
        for (int k = 0; k < s->n_in; k++) {
            if (s->in[k] < 0) continue;
            reads[s->in[k]]++;
            if (ps->cand[j].kind != DN_NONE && is_data_operand(&ps->cand[j], k)) data_reads[s->in[k]]++;
        }
    }
    for (int i = 0; i < plan->n_slots; i++)
        if (plan->slots[i].kind == SLOT_VIEW) reads[plan->slots[i].root] += 1000;
    for (int i = 0; i < plan->n_leaves; i++)
        if (plan->leaf_slot[i] >= 0) reads[plan->leaf_slot[i]] += 1000;
    for (int i = 0; i < plan->n_mutations; i++) {
        reads[plan->mutations[i].slot] += 1000;
        reads[plan->mutations[i].dst_slot] += 1000;
    }
}

/* Squeeze-excitation's multiply feeding a pointwise projection
 * (MBConv: h * sigmoid(...) -> conv 1x1): the projection can take h and
 * the [N, C, 1, 1] scale itself and scale A's blocks as the GEMM fills
 * them (tp_conv_nhwc_call.in_scale), so the product, as large as h, is
 * never written and read back: EfficientNet-B0's 16 multiplies took 0.66
 * ms of 10 at 2 threads (Ice Lake) and did not scale, bound by memory.
 * Where the output channels are few against the pixels (the 112x112 to
 * 28x28 projections, 16-40 outputs), each thread scales a copy of the
 * packed weights instead and A is read in place (tp__conv_nhwc_scale_b):
 * EfficientNet-B0's five such projections 0.94 -> 0.79 ms at one thread
 * (Zen 4, per-node minima of 4 alternating runs).
 * find_scales marks the candidates before the steps are built (their
 * projections then build on our GEMM: gemmconv_wanted); fuse_scales
 * rewrites those whose multiply and projection both built as wanted. The
 * multiply's output must have no other reader. */
static void find_scales(pass *ps, const int *reads) {
    tp_plan *plan = ps->plan;
    for (int j = 0; j < plan->n_steps; j++) {
        dn_cand *c = &ps->cand[j];
        const plan_step *s = &plan->steps[j];
        const tp_conv_info *v = &c->conv;
        if (c->kind != DN_CONV || v->groups != 1 || !is_pointwise(v)) continue;
        const int x = s->in[0];
        const plan_slot *xs = &plan->slots[x];
        const int i = xs->def;
        if (xs->kind != SLOT_ARENA || reads[x] != 1 || i < 0 || i >= j) continue;
        const dn_cand *m = &ps->cand[i];
        const plan_step *ms = &plan->steps[i];
        if (ms->kind != STEP_FAST || m->kind != DN_BINARY || m->alg != dnnl_binary_mul || ms->out[0] != x) continue;
        const int h = ms->in[m->bin_a], sc = ms->in[m->bin_b];
        if (h < 0 || sc < 0 || h == sc) continue;
        d4 b4 = dims4(&plan->slots[sc]), x4 = dims4(xs);
        if (b4.v[2] != 1 || b4.v[3] != 1 || b4.v[1] != x4.v[1] || (b4.v[0] != 1 && b4.v[0] != x4.v[0])) continue;
        c->se_mul = i + 1;
    }
}

static tp_status fuse_scales(pass *ps, dn_step **built) {
    tp_plan *plan = ps->plan;
    for (int j = 0; j < plan->n_steps; j++) {
        const int i = ps->cand[j].se_mul - 1;
        if (i < 0 || !built[j] || !built[i] || built[j]->kind != DN_GEMMCONV || built[i]->kind != DN_BINARY ||
            !tp__conv_nhwc_pointwise(built[j]->gc))
            continue;
        plan_step *s = &plan->steps[j], *ms = &plan->steps[i];
        const int h = ms->in[ps->cand[i].bin_a], sc = ms->in[ps->cand[i].bin_b];
        if (ps->nhwc[h] != built[j]->gc_x_nhwc) continue; /* the layout the projection was built to read */
        /* the projection reads h and the scale at j, not at i */
        if (tp__plan_written_between(plan, h, i, j) || tp__plan_written_between(plan, sc, i, j)) continue;
        int *in = tp_realloc(s->in, (size_t)(s->n_in + 1) * sizeof *in);
        TP_CHECK(in != NULL, TP_ERR_NOMEM, "out of memory fusing a channel scale");
        s->in = in;
        dn_step *d = built[j];
        d->iscale = s->n_in;
        d->scale_ns = dims4(&plan->slots[sc]).v[0] == 1 ? 0 : d->gc->cin;
        if (d->gc_x_nhwc) tp__conv_nhwc_scale_b(d->gc, ps->threads);
        in[0] = h;
        in[s->n_in++] = sc;
        if (s->n_in + s->n_out > plan->max_io) plan->max_io = s->n_in + s->n_out;
        tp__plan_use_slot(plan, h, j);
        tp__plan_use_slot(plan, sc, j); /* a view's root too: a scale through a view was freed at i */
        /* the multiply is skipped (its output slot is left unused) */
        ms->kind = STEP_FUSED;
        plan->n_fast--;
        plan->n_fused++;
        dn_step_free(built[i]);
        built[i] = NULL;
    }
    return TP_OK;
}

/* A depthwise convolution whose output only a pointwise convolution reads
 * (the expanded middle of an inverted-residual block: MobileNetV2's
 * depthwise 3x3 and projection): the projection, on our GEMM, computes
 * the depthwise output a block of pixels and channels at a time into its
 * A (tp_conv_dw, conv_dw.h) and reads the depthwise input itself, so the
 * depthwise output is never written out and read back, and its step goes.
 * Depthwise convolutions with a multiplier of 1 and dilation 1, whose
 * input and output are NHWC, with no residual or fused mean; the
 * projection's input must have no other reader. At the AVX-512 level
 * only (conv_dw.h says why). TP_FUSE_DW=0 keeps them apart.
 * MobileNetV2 (Zen 4, alternating runs of both, medians of 10 pairs'
 * ratios): 0.975x at one thread and 0.956x at two in quiet minutes (3.42
 * -> 3.26 ms), 0.78-0.80x at two threads in minutes when the machine's
 * neighbours load its memory (the unfused depthwise input and output, 6x
 * the block's channels, cross memory twice more). Its relu6 (ONNX's
 * Clip(0, 6)) runs in the fill's registers: as a pass over each filled
 * block the fusion only broke even in quiet minutes.
 * The depthwise input may itself be the output of a pointwise convolution
 * (the block's expansion: 1x1, stride 1, groups 1, no residual) that
 * nothing else reads: with an output of at least ex_fuse_min() bytes per
 * image, the projection computes the expansion's rows too
 * (tp__conv_nhwc_set_dw_expand: each row once per thread, into a ring of
 * kernel-height rows as the depthwise fill needs them), so the expanded
 * tensor is never written out either, and the expansion's step goes.
 * MobileNetV2's 112x112 16 -> 96 expansion (4.8 MB; Zen 4, alternating
 * TP_FUSE_EX=0 / 4 MiB runs, medians of 10-14 pairs' ratios): 0.958x /
 * 0.950x the model's time at one / two threads in one set of runs, 0.98x
 * / 0.96-0.99x in others; fusing the 56x56 blocks' expansions as well
 * (1.8 MB each) was no better (0.987x / 1.011x against fusing the first
 * only): their row products (56 pixels) ran slower than oneDNN's whole
 * expansion, and their outputs fit the L3. find_dws marks the candidates
 * before the steps are built (their projections then build on our GEMM:
 * gemmconv_wanted); fuse_dws rewrites those whose steps built as wanted. */
/* The least bytes per image of an expansion's output that fuse_dws fuses
 * into the depthwise convolution it feeds: TP_FUSE_EX, else 4 MiB (see
 * find_dws). */
static int64_t ex_fuse_min(void) {
    const int64_t t = atomic_load_explicit(&g_test_ex_min, memory_order_relaxed);
    if (t >= 0) return t;
    if (g_fuse_ex_min == 0) return INT64_MAX;
    return g_fuse_ex_min > 0 ? g_fuse_ex_min : (int64_t)4 << 20;
}

static void find_dws(pass *ps, const int *reads) {
    tp_plan *plan = ps->plan;
    if (g_fuse_dw_off || g_level < TP_CPU_AVX512) return; /* conv_dw.h: measured at AVX-512 only */
    for (int j = 0; j < plan->n_steps; j++) {
        dn_cand *c = &ps->cand[j];
        const tp_conv_info *v = &c->conv;
        const plan_step *s = &plan->steps[j];
        if (c->kind != DN_CONV || v->groups != 1 || !is_pointwise(v) || c->se_mul) continue;
        const int x = s->in[0];
        const plan_slot *xs = &plan->slots[x];
        const int i = xs->def;
        if (xs->kind != SLOT_ARENA || reads[x] != 1 || i < 0 || i >= j) continue;
        const dn_cand *d = &ps->cand[i];
        const tp_conv_info *u = &d->conv;
        const plan_step *ds = &plan->steps[i];
        if (ds->kind != STEP_FAST || d->kind != DN_CONV || ds->out[0] != x || ds->in[0] < 0 || u->groups != u->cin ||
            u->cout != u->cin || u->cin != v->cin || u->dh != 1 || u->dw != 1 || u->kh > TP_CONV_DW_MAX_KH ||
            u->ires >= 0 || !u->weight ||
            u->n != v->n || u->oh != v->h || u->ow != v->w)
            continue;
        c->dw_src = i + 1;
        /* the depthwise input made by a pointwise convolution that nothing
         * else reads: an expansion */
        const int e = plan->slots[ds->in[0]].def, xe = ds->in[0];
        if (e < 0 || e >= i || plan->slots[xe].kind != SLOT_ARENA || reads[xe] != 1) continue;
        const dn_cand *ec = &ps->cand[e];
        const tp_conv_info *ev = &ec->conv;
        const plan_step *es = &plan->steps[e];
        const int64_t ex_bytes = u->h * u->w * u->cin * (int64_t)sizeof(float);
        if (es->kind != STEP_FAST || ec->kind != DN_CONV || es->out[0] != xe || es->in[0] < 0 || ev->groups != 1 ||
            !is_pointwise(ev) || ec->se_mul || ev->ires >= 0 || !ev->weight || ev->cout != u->cin || ev->n != u->n ||
            ev->oh != u->h || ev->ow != u->w || ex_bytes < ex_fuse_min())
            continue;
        c->ex_src = e + 1;
    }
}

/* Step i, whose work step j now does, goes: its output slot is left
 * unused, and its built step and its own plan's data (the folded weights
 * j has copied by now) are freed. */
static void drop_step(pass *ps, dn_step **built, int i) {
    tp_plan *plan = ps->plan;
    plan_step *s = &plan->steps[i];
    s->kind = STEP_FUSED;
    plan->n_fast--;
    plan->n_fused++;
    dn_step_free(built[i]);
    built[i] = NULL;
    if (s->op_plan.free_data) s->op_plan.free_data(s->op_plan.data);
    plan->packed_bytes = plan->packed_bytes > s->op_plan.data_bytes ? plan->packed_bytes - s->op_plan.data_bytes : 0;
    s->op_plan.data = NULL;
    s->op_plan.free_data = NULL;
    s->op_plan.data_bytes = 0;
}

/* Step i's work now done inside step j (fuse_dws): j reads what i read
 * (i's input 0, kept alive until j) instead of i's output, and i goes. */
static void absorb_producer(pass *ps, dn_step **built, int j, int i) {
    tp_plan *plan = ps->plan;
    const int x = plan->steps[i].in[0];
    plan->steps[j].in[0] = x;
    tp__plan_use_slot(plan, x, j);
    drop_step(ps, built, i);
}

static tp_status fuse_dws(pass *ps, dn_step **built) {
    tp_plan *plan = ps->plan;
    for (int j = 0; j < plan->n_steps; j++) {
        const int i = ps->cand[j].dw_src - 1;
        if (i < 0 || !built[j] || !built[i] || built[j]->kind != DN_GEMMCONV || built[i]->kind != DN_CONV) continue;
        dn_step *p = built[j], *d = built[i];
        const int h = plan->steps[i].in[0];
        if (!p->gc_x_nhwc || p->iscale > 0 || p->gc->winograd || p->gc->direct || p->gc->scale_b ||
            !tp__conv_nhwc_pointwise(p->gc) ||
            d->stage_src || d->stage_dst || d->mean[0] || !ps->nhwc[h])
            continue;
        const tp_conv_info *u = &ps->cand[i].conv;
        const tp_conv_dw g = {.h = u->h, .w = u->w, .kh = u->kh, .kw = u->kw, .sh = u->sh, .sw = u->sw, .ph = u->ph,
                              .pw = u->pw};
        TP_TRY(tp__conv_nhwc_set_dw(p->gc, &g, u->weight, u->bias, u->act));
        absorb_producer(ps, built, j, i);
        /* the expansion (find_dws checked its geometry and readers; its
         * output, the depthwise input, is NHWC: h above) needs an NHWC
         * input too, and is computed from its weights, whatever it built */
        const int e = ps->cand[j].ex_src - 1;
        if (e < 0 || !built[e] || !ps->nhwc[plan->steps[e].in[0]]) continue;
        const tp_conv_info *ev = &ps->cand[e].conv;
        TP_TRY(tp__conv_nhwc_set_dw_expand(p->gc, ev->cin, ev->weight, ev->bias, ev->act));
        absorb_producer(ps, built, j, e);
    }
    return TP_OK;
}

/* A convolution summing a residual that another convolution makes for it
 * alone (a residual block's projection shortcut and its last
 * convolution: y = act(conv_j(x) + conv_i(h))): both in one GEMM, conv_i's
 * patches as A's columns after conv_j's and its weights as B's rows after
 * conv_j's (tp__conv_nhwc_set_cat), so conv_i's output is never written
 * and read back and the two products share one pass over C. Marked here
 * (cat_src); fuse_cats joins them once both are built, when conv_j runs our
 * implicit GEMM and conv_i does not run Winograd. */
static void find_cats(pass *ps, const int *reads) {
    tp_plan *plan = ps->plan;
    if (g_fuse_cat_off) return;
    for (int j = 0; j < plan->n_steps; j++) {
        dn_cand *c = &ps->cand[j];
        const tp_conv_info *v = &c->conv;
        const plan_step *s = &plan->steps[j];
        if (c->kind != DN_CONV || v->groups != 1 || v->ires <= 0 || v->ires >= s->n_in || !v->weight || c->se_mul ||
            c->dw_src)
            continue;
        const int r = s->in[v->ires];
        const plan_slot *rs = r >= 0 ? &plan->slots[r] : NULL;
        const int i = rs ? rs->def : -1;
        if (!rs || rs->kind != SLOT_ARENA || reads[r] != 1 || i < 0 || i >= j) continue;
        const dn_cand *ci = &ps->cand[i];
        const tp_conv_info *u = &ci->conv;
        const plan_step *is = &plan->steps[i];
        if (is->kind != STEP_FAST || ci->kind != DN_CONV || is->n_out != 1 || is->out[0] != r || is->in[0] < 0 ||
            u->groups != 1 || u->ires >= 0 || u->act || !u->weight || ci->se_mul || ci->dw_src || u->n != v->n ||
            u->cout != v->cout || u->oh != v->oh || u->ow != v->ow)
            continue;
        c->cat_src = i + 1;
    }
}

static tp_status fuse_cats(pass *ps, dn_step **built) {
    tp_plan *plan = ps->plan;
    for (int j = 0; j < plan->n_steps; j++) {
        const int i = ps->cand[j].cat_src - 1;
        if (i < 0 || !built[j] || !built[i] || built[j]->kind != DN_GEMMCONV) continue;
        dn_step *p = built[j], *d = built[i];
        const int ires = p->ires;
        if (p->iscale > 0 || p->gc->winograd || p->gc->direct || p->gc->scale_b || p->gc->pre_dw || p->gc->cat ||
            ires <= 0 || d->mean[0] ||
            (d->kind == DN_GEMMCONV && (d->gc->winograd || d->gc->direct || d->gc->pre_dw || d->iscale > 0)) ||
            (d->kind != DN_CONV && d->kind != DN_GEMMCONV))
            continue;
        const tp_conv_info *u = &ps->cand[i].conv;
        const tp_conv_nhwc g2 = nhwc_geometry(u);
        TP_TRY(tp__conv_nhwc_set_cat(p->gc, &g2, ps->cand[j].conv.weight, u->weight, u->bias));
        /* j reads i's input (kept alive until j) where it read i's output */
        const int h = plan->steps[i].in[0];
        plan->steps[j].in[ires] = h;
        tp__plan_use_slot(plan, h, j);
        p->icat = ires;
        p->gc_x2_nhwc = is_nhwc(ps, h);
        p->ires = -1;
        drop_step(ps, built, i);
    }
    return TP_OK;
}

/* A mean over H and W (a squeeze-excitation's global pool) of a
 * convolution's NHWC output that oneDNN's chunks write in place: the
 * convolution also writes the mean (a second output), summing each band's
 * rows while they are in cache, and the mean's step goes. Rows of one
 * image are summed pixel by pixel and the rows added in order, the same
 * whatever the thread count (gmean_run's blocks of 256 pixels add in
 * another order: results differ from its in the last bits). Not for a
 * one-row map of one image, whose bands may be column bands (split). */
static tp_status fuse_means(pass *ps, dn_step **built) {
    tp_plan *plan = ps->plan;
    for (int m = 0; m < plan->n_steps; m++) {
        dn_step *g = built[m];
        plan_step *ms = &plan->steps[m];
        if (!g || !g->gmean || !g->gm_nhwc || ms->kind != STEP_FAST || ms->n_out != 1) continue;
        const int x = ms->in[0];
        const plan_slot *xs = &plan->slots[x];
        const int j = xs->def;
        if (xs->kind != SLOT_ARENA || j < 0 || j >= m || !built[j]) continue;
        dn_step *d = built[j];
        plan_step *s = &plan->steps[j];
        if (d->kind != DN_CONV || d->stage_dst || d->mean[0] || s->kind != STEP_FAST || s->n_out != 1 ||
            s->out[0] != x)
            continue;
        d4 y4 = dims4(xs);
        if (y4.v[0] == 1 && y4.v[2] == 1) continue;
        int *out = tp_realloc(s->out, 2 * sizeof *out);
        TP_CHECK(out != NULL, TP_ERR_NOMEM, "out of memory fusing a mean");
        s->out = out;
        out[s->n_out++] = ms->out[0];
        if (s->n_in + s->n_out > plan->max_io) plan->max_io = s->n_in + s->n_out;
        plan->slots[ms->out[0]].def = j;
        for (int k = 0; k < 4; k++) d->mean[k] = y4.v[k];
        ms->kind = STEP_FUSED;
        plan->n_fast--;
        plan->n_fused++;
        dn_step_free(g);
        built[m] = NULL;
    }
    return TP_OK;
}

/* A max pool (NHWC in and out) of a direct convolution's output that
 * nothing else reads: the convolution pools its rows itself
 * (tp_conv_nhwc.pool_kh) and writes the pool's output, and the pool's step
 * goes. ResNet's stem: its 112 x 112 x 64 output (3.2 MB) is never written
 * to memory and read back. */
static tp_status fuse_pools(pass *ps, dn_step **built, const int *reads) {
    tp_plan *plan = ps->plan;
    for (int m = 0; m < plan->n_steps; m++) {
        dn_step *g = built[m];
        plan_step *ms = &plan->steps[m];
        if (!g || !g->mpool || g->mp_nchw || ms->kind != STEP_FAST || ms->n_out != 1) continue;
        const int x = ms->in[0];
        const plan_slot *xs = &plan->slots[x];
        const int j = xs->def;
        if (xs->kind != SLOT_ARENA || reads[x] != 1 || j < 0 || j >= m || !built[j]) continue;
        dn_step *d = built[j];
        plan_step *s = &plan->steps[j];
        const int64_t *q = g->mp;
        if (d->kind != DN_GEMMCONV || !d->gc->direct || d->gc->pool_kh || d->ires >= 0 || s->kind != STEP_FAST ||
            s->n_out != 1 || s->out[0] != x || q[1] != d->gc->cout || q[2] != d->gc->oh || q[3] != d->gc->ow ||
            q[6] > TP_CONV_DIRECT_POOL_KH || q[12] != 1 || q[13] != 1)
            continue;
        tp_conv_nhwc *cv = d->gc;
        cv->pool_kh = q[6];
        cv->pool_kw = q[7];
        cv->pool_sh = q[8];
        cv->pool_sw = q[9];
        cv->pool_ph = q[10];
        cv->pool_pw = q[11];
        cv->pool_oh = q[4];
        cv->pool_ow = q[5];
        s->out[0] = ms->out[0];
        plan->slots[ms->out[0]].def = j;
        drop_step(ps, built, m);
    }
    return TP_OK;
}

static bool touches_nhwc(const pass *ps, const plan_step *s, const dn_cand *c) {
    if (ps->nhwc[s->out[0]]) return true;
    for (int k = 0; k < s->n_in; k++)
        if (s->in[k] >= 0 && is_data_operand(c, k) && ps->nhwc[s->in[k]]) return true;
    return false;
}

tp_status tp__plan_onednn(tp_plan *plan, int level, int threads) {
    pthread_once(&g_once, init_once);
    if (!g_enabled || level != g_level || plan->n_steps == 0)
        return TP_OK;
    if (threads > 256) threads = 256;
    pass ps = {.plan = plan, .threads = threads < 1 ? 1 : threads};
    ps.cand = tp_calloc((size_t)plan->n_steps, sizeof *ps.cand);
    ps.nhwc = tp_calloc((size_t)plan->n_slots, sizeof *ps.nhwc);
    int *reads = tp_calloc((size_t)plan->n_slots, sizeof *reads);
    int *data_reads = tp_calloc((size_t)plan->n_slots, sizeof *data_reads);
    dn_step **built = tp_calloc((size_t)plan->n_steps, sizeof *built);
    tp_status st = TP_OK;
    if (!ps.cand || !ps.nhwc || !reads || !data_reads || !built)
        st = tp_error(TP_ERR_NOMEM, "out of memory in the oneDNN layout pass");
    int n_cand = 0;
    for (int j = 0; st == TP_OK && j < plan->n_steps; j++) {
        if (classify(&plan->steps[j], plan, &ps.cand[j])) n_cand++;
    }
    if (st == TP_OK && n_cand >= 2) {
        count_reads(&ps, reads, data_reads);
        find_scales(&ps, reads);
        find_dws(&ps, reads);
        find_cats(&ps, reads);
    }
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    /* build every step touching an NHWC tensor; a step oneDNN declines
     * leaves the candidates and the marking starts again */
    for (bool again = st == TP_OK && n_cand >= 2; again;) {
        again = false;
        count_reads(&ps, reads, data_reads);
        mark(&ps, reads, data_reads);
        for (int j = 0; st == TP_OK && j < plan->n_steps; j++) {
            const plan_step *s = &plan->steps[j];
            const dn_cand *c = &ps.cand[j];
            if (c->kind == DN_NONE || !touches_nhwc(&ps, s, c)) continue;
            built[j] = tp_calloc(1, sizeof **built);
            if (!built[j]) {
                st = tp_error(TP_ERR_NOMEM, "out of memory in the oneDNN layout pass");
                break;
            }
            st = c->kind == DN_CONV ? build_conv(&ps, s, c, built[j]) : build_other(&ps, s, c, built[j]);
            if (st == TP_ERR_UNSUPPORTED) {
                tp_clear_error();
                st = TP_OK;
                ps.cand[j].kind = DN_NONE;
                for (int i = 0; i < plan->n_steps; i++) {
                    dn_step_free(built[i]);
                    built[i] = NULL;
                }
                again = true;
                break;
            }
        }
    }
    omp_set_num_threads(saved);
    if (st == TP_OK) st = fuse_scales(&ps, built);
    if (st == TP_OK) st = fuse_dws(&ps, built);
    if (st == TP_OK) st = fuse_means(&ps, built);
    if (st == TP_OK) st = fuse_cats(&ps, built);
    if (st == TP_OK) st = fuse_pools(&ps, built, reads);
    for (int j = 0; st == TP_OK && j < plan->n_steps; j++) {
        if (!built[j]) continue;
        plan_step *s = &plan->steps[j];
        dn_step *d = built[j];
        built[j] = NULL;
        size_t packed = 0;
        for (int k = 0; k < d->n_chunks; k++)
            if (d->chunks[k].wbase) packed += dnnl_memory_desc_get_size(&d->chunks[k].md[M_W]);
        /* the chunks own packed weights and a bias copy: the replaced plan's
         * data (folded weights) goes */
        if (s->op_plan.free_data) s->op_plan.free_data(s->op_plan.data);
        size_t old = s->op_plan.data_bytes;
        plan->packed_bytes = plan->packed_bytes > old ? plan->packed_bytes - old : 0;
        d->per_thread = d->scratch + d->stage_src_bytes + d->stage_dst_bytes;
        tp_op_plan np;
        memset(&np, 0, sizeof np);
        np.run = dn_run;
        np.variant = "onednn";
        np.max_threads = dn_threads(d);
        np.workspace = d->per_thread * (size_t)np.max_threads;
        if (d->mean[0]) /* the fused mean's row sums, N x H x C floats, after the threads' slices */
            np.workspace += ((size_t)(d->mean[0] * d->mean[2] * d->mean[1]) * sizeof(float) + 63) & ~(size_t)63;
        np.ctx_new = dn_ctx_new;
        np.ctx_free = dn_ctx_free;
        if (d->gmean) {
            np.run = gmean_run;
            np.variant = "mean-nhwc";
            np.max_threads = ps.threads;
            /* block sums threads share, and their count of finished threads */
            const bool shares = d->gm_nhwc && gmean_blocks(d->gm[2]) > 1;
            np.workspace =
                shares ? ((size_t)(d->gm[0] * gmean_blocks(d->gm[2]) * d->gm[1]) * sizeof(float) + 63) & ~(size_t)63
                       : 0;
            np.ctx_new = shares ? gmean_ctx_new : NULL;
            np.ctx_free = shares ? tp_free : NULL;
        }
        if (d->mpool) {
            np.run = g_level >= TP_CPU_AVX512 ? mpool_run16 : mpool_run;
            np.variant = "max-nhwc";
            np.max_threads = d->mp_threads;
            np.workspace = d->mp_row_bytes * (size_t)d->mp_threads;
            np.ctx_new = NULL;
            np.ctx_free = NULL;
        }
        if (d->kind == DN_GEMMCONV) {
            packed = d->gc->packed_bytes;
            np.run = gc_run;
            np.variant = d->gc->winograd == 4 ? "winograd4-nhwc"
                         : d->gc->wino_otf    ? "winograd2-otf-nhwc"
                         : d->gc->winograd    ? "winograd2-nhwc"
                         : d->gc->direct && d->gc->pool_kh ? "direct+maxpool-nhwc"
                         : d->gc->direct      ? "direct-nhwc"
                         : d->gc->pre_dw && d->gc->pre_dw->ex_cin ? "ex+dw+gemm-nhwc"
                         : d->gc->pre_dw      ? "dw+gemm-nhwc"
                         : d->gc->cat         ? "cat+gemm-nhwc"
                                              : "gemm-nhwc";
            np.max_threads = ps.threads;
            np.workspace = (tp__conv_nhwc_workspace(d->gc, ps.threads) + 63) & ~(size_t)63;
            np.ctx_new = NULL;
            np.ctx_free = NULL;
        }
        plan->packed_bytes += packed;
        np.data = d;
        np.data_bytes = packed;
        np.free_data = dn_step_free;
        if ((d->kind == DN_CONV || d->kind == DN_GEMMCONV) && d->ires >= 0 && ps.nhwc[s->in[d->ires]] == ps.nhwc[s->out[0]] &&
            s->in[d->ires] != s->in[0]) {
            /* the summed residual may be dst itself (not when it is also the
             * input: x + conv(x) would overwrite rows other bands still read) */
            np.inplace_ok = true;
            np.inplace_in = d->ires;
        } else if ((d->kind == DN_UNARY && !d->stage_src && !d->stage_dst) || d->kind == DN_BINARY) {
            /* same layout in and out: a band reads only the bytes it writes */
            np.inplace_ok = true;
            np.inplace_in = d->in_src;
        }
        s->op_plan = np;
        if (np.workspace > plan->workspace_bytes) plan->workspace_bytes = np.workspace;
    }
    for (int j = 0; built && j < plan->n_steps; j++) dn_step_free(built[j]);
    tp_free(built);
    tp_free(reads);
    tp_free(data_reads);
    tp_free(ps.cand);
    tp_free(ps.nhwc);
    return st;
}

/* ---- standalone variants: transposed and 3-D convolutions ----------------- */

/* Fill a fast variant's plan from a built step (chunk 0 whole, 1.. the cut). */
static tp_status finish_standalone(dn_step *d, tp_op_plan *plan) {
    size_t packed = 0;
    for (int i = 0; i < d->n_chunks; i++)
        if (d->chunks[i].wbase) packed += dnnl_memory_desc_get_size(&d->chunks[i].md[M_W]);
    d->per_thread = d->scratch + d->stage_src_bytes + d->stage_dst_bytes;
    plan->run = dn_run;
    plan->variant = "onednn";
    plan->max_threads = dn_threads(d);
    plan->workspace = d->per_thread * (size_t)plan->max_threads;
    plan->data = d;
    plan->data_bytes = packed;
    plan->free_data = dn_step_free;
    plan->ctx_new = dn_ctx_new;
    plan->ctx_free = dn_ctx_free;
    return TP_OK;
}

/* A transposed convolution with a constant weight (we have only the
 * reference kernel for it) as oneDNN deconvolution primitives on NHWC
 * staging copies of the NCHW input and output: whole images per chunk (a
 * batch cut into images for several threads), reordered in and out in the
 * thread's workspace. PyTorch's weight [Cin, Cout/g, kh, kw] is oneDNN's
 * iohw / giohw; output_padding extends the right padding (declined when it
 * exceeds the padding: oneDNN's right padding would be negative). */
static tp_status deconv_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *outv,
                                tp_op_plan *plan, int spatial) {
    pthread_once(&g_once, init_once);
    if (!g_enabled || info->cpu_level != g_level)
        return TP_ERR_UNSUPPORTED;
    const tp_tensor *x = tp__arg_tensor(bound, 0), *w = tp__arg_tensor(bound, 1), *b = tp__arg_tensor(bound, 2);
    const tp_tensor *o = tp__fast_out(outv);
    if (!x || !w || !o || x->dtype != TP_FLOAT32 || w->dtype != TP_FLOAT32 || o->dtype != TP_FLOAT32)
        return TP_ERR_UNSUPPORTED;
    if (x->ndim != spatial + 2 || w->ndim != spatial + 2 || o->ndim != spatial + 2 || !info->is_const[1] ||
        !tp_tensor_is_contiguous(x) || !tp_tensor_is_contiguous(w))
        return TP_ERR_UNSUPPORTED;
    if (b && (b->dtype != TP_FLOAT32 || b->ndim != 1 || !info->is_const[2] || !tp_tensor_is_contiguous(b)))
        return TP_ERR_UNSUPPORTED;
    int64_t v[4][3], g = tp__arg_int(bound, 6);
    const int arg_of[4] = {3, 4, 5, 7}; /* stride, padding, output_padding, dilation */
    for (int a = 0; a < 4; a++) {
        int n;
        if (tp__arg_ints(bound, arg_of[a], "arg", v[a], 3, spatial, &n) != TP_OK) {
            tp_clear_error();
            return TP_ERR_UNSUPPORTED;
        }
        if (spatial == 1) v[a][1] = v[a][0], v[a][0] = a == 0 || a == 3 ? 1 : 0; /* one row */
    }
    int64_t x4[4] = {x->sizes[0], x->sizes[1], spatial == 2 ? x->sizes[2] : 1, x->sizes[spatial + 1]};
    int64_t o4[4] = {o->sizes[0], o->sizes[1], spatial == 2 ? o->sizes[2] : 1, o->sizes[spatial + 1]};
    int64_t kh = spatial == 2 ? w->sizes[2] : 1, kw = w->sizes[spatial + 1];
    if (g < 1 || x4[1] % g || o4[1] % g || v[1][0] < v[2][0] || v[1][1] < v[2][1]) return TP_ERR_UNSUPPORTED;
    for (int d = 0; d < 4; d++)
        if (x4[d] <= 0 || o4[d] <= 0) return TP_ERR_UNSUPPORTED;
    dn_step *d = tp_calloc(1, sizeof *d);
    TP_CHECK(d != NULL, TP_ERR_NOMEM, "out of memory preparing a transposed convolution");
    band bands[257];
    double work = 2.0 * (double)tp_tensor_numel(x) * (double)(o4[1] / g) * (double)(kh * kw);
    int threads = info->max_threads > 256 ? 256 : info->max_threads;
    /* images only: bands of a transposed convolution's output need overlapping input rows */
    int k = o4[0] > 1 ? split(o4[0], o4[2], o4[3], x4[2], threads, work, bands) : 1;
    bands[0] = (band){0, o4[0], 0, o4[2], 0, o4[3]};
    d->kind = DN_CONV;
    d->ires = -1;
    d->in_src1 = -1;
    d->stage_src = d->stage_dst = true;
    d->n_chunks = k;
    d->chunks = tp_calloc((size_t)k, sizeof *d->chunks);
    tp_status st = d->chunks ? TP_OK : tp_error(TP_ERR_NOMEM, "out of memory preparing a transposed convolution");
    dnnl_memory_desc_t wmd, umd, bmd;
    if (g == 1) {
        dnnl_dims_t wd = {o4[1], x4[1], kh, kw};
        dnnl_memory_desc_init_by_tag(&wmd, 4, wd, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&umd, 4, wd, dnnl_f32, dnnl_iohw);
    } else {
        dnnl_dims_t wd = {g, o4[1] / g, x4[1] / g, kh, kw};
        dnnl_memory_desc_init_by_tag(&wmd, 5, wd, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&umd, 5, wd, dnnl_f32, dnnl_giohw);
    }
    dnnl_dims_t bd = {o4[1]};
    dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    for (int i = 0; st == TP_OK && i < k; i++) {
        dn_chunk *ch = &d->chunks[i];
        band ob = bands[i], ib = {ob.n0, ob.n1, 0, x4[2], 0, x4[3]};
        dnnl_memory_desc_t smd, dmd;
        st = dense_md(&smd, x4, ib);
        if (st == TP_OK) st = dense_md(&dmd, o4, ob);
        if (st != TP_OK) break;
        dnnl_dims_t strides = {v[0][0], v[0][1]}, dil = {v[3][0] - 1, v[3][1] - 1}, pl = {v[1][0], v[1][1]};
        dnnl_dims_t pr = {v[1][0] - v[2][0], v[1][1] - v[2][1]};
        dnnl_deconvolution_desc_t dd;
        if (dnnl_dilated_deconvolution_forward_desc_init(&dd, dnnl_forward_inference, dnnl_deconvolution_direct, &smd,
                                                         &wmd, b ? &bmd : NULL, &dmd, strides, dil, pl,
                                                         pr) != dnnl_success) {
            st = tp_error(TP_ERR_UNSUPPORTED, "oneDNN deconvolution descriptor");
            break;
        }
        dnnl_primitive_attr_t attr;
        st = make_attr(&attr, false, 0, 0, 0);
        if (st != TP_OK) break;
        dnnl_primitive_desc_t pd;
        st = make_pd(&dd, attr, false, &pd);
        dnnl_primitive_attr_destroy(attr);
        if (st != TP_OK) break;
        ch->md[M_SRC] = smd;
        ch->md[M_DST] = dmd;
        ch->md[M_W] = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        ch->has[M_SRC] = ch->has[M_DST] = ch->has[M_W] = true;
        if (b) {
            ch->md[M_B] = bmd;
            ch->has[M_B] = true;
            ch->bias = (const float *)tp__tensor_base(b); /* a constant of the plan */
        }
        st = share_or_pack(d, i, &umd, (const float *)tp__tensor_base(w));
        if (st == TP_OK) st = stage(d, ch, x4, false, ib, o4, false, ob);
        if (st != TP_OK) {
            dnnl_primitive_desc_destroy(pd);
            break;
        }
        st = finish_chunk(ch, pd, &d->scratch);
    }
    omp_set_num_threads(saved);
    if (st != TP_OK) {
        dn_step_free(d);
        if (st == TP_ERR_UNSUPPORTED) tp_clear_error();
        return st;
    }
    return finish_standalone(d, plan);
}

static tp_status deconv2d_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,
                                  tp_op_plan *plan) {
    return deconv_prepare(info, bound, out, plan, 2);
}
static tp_status deconv1d_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,
                                  tp_op_plan *plan) {
    return deconv_prepare(info, bound, out, plan, 1);
}

/* conv3d / conv_transpose3d with a constant weight (reference kernels
 * only otherwise): oneDNN picks the layouts ("any"); the NCDHW input and
 * output are reordered into and out of them in the thread's workspace when
 * they differ; whole images per chunk. */
static tp_status vol_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *outv,
                             tp_op_plan *plan, bool transposed) {
    pthread_once(&g_once, init_once);
    if (!g_enabled || info->cpu_level != g_level)
        return TP_ERR_UNSUPPORTED;
    const tp_tensor *x = tp__arg_tensor(bound, 0), *w = tp__arg_tensor(bound, 1), *b = tp__arg_tensor(bound, 2);
    const tp_tensor *o = tp__fast_out(outv);
    if (!x || !w || !o || x->dtype != TP_FLOAT32 || w->dtype != TP_FLOAT32 || o->dtype != TP_FLOAT32)
        return TP_ERR_UNSUPPORTED;
    if (x->ndim != 5 || w->ndim != 5 || o->ndim != 5 || !info->is_const[1] || !tp_tensor_is_contiguous(x) ||
        !tp_tensor_is_contiguous(w))
        return TP_ERR_UNSUPPORTED;
    if (b && (b->dtype != TP_FLOAT32 || b->ndim != 1 || !info->is_const[2] || !tp_tensor_is_contiguous(b)))
        return TP_ERR_UNSUPPORTED;
    /* conv3d: stride 3, padding 4, dilation 5, groups 6; transposed: stride 3,
     * padding 4, output_padding 5, groups 6, dilation 7 */
    int64_t st[3], pd[3], op[3] = {0, 0, 0}, dl[3], g = tp__arg_int(bound, 6);
    int n, a_dil = transposed ? 7 : 5;
    if (bound[4].kind == TP_VAL_STR || tp__arg_ints(bound, 3, "stride", st, 3, 3, &n) != TP_OK ||
        tp__arg_ints(bound, 4, "padding", pd, 3, 3, &n) != TP_OK ||
        tp__arg_ints(bound, a_dil, "dilation", dl, 3, 3, &n) != TP_OK ||
        (transposed && tp__arg_ints(bound, 5, "output_padding", op, 3, 3, &n) != TP_OK)) {
        tp_clear_error();
        return TP_ERR_UNSUPPORTED;
    }
    const int64_t *xs = x->sizes, *os = o->sizes, *ks = w->sizes + 2;
    if (g < 1 || xs[1] % g || os[1] % g) return TP_ERR_UNSUPPORTED;
    dnnl_dims_t pl, pr, strides, dil;
    for (int i = 0; i < 3; i++) {
        strides[i] = st[i], dil[i] = dl[i] - 1, pl[i] = pd[i];
        pr[i] = transposed ? pd[i] - op[i] : (os[2 + i] - 1) * st[i] + (ks[i] - 1) * dl[i] + 1 - xs[2 + i] - pd[i];
        if (transposed && pr[i] < 0) return TP_ERR_UNSUPPORTED;
        if (pr[i] < 0) pr[i] = 0; /* oneDNN's floor formula drops the rest */
    }
    for (int i = 0; i < 5; i++)
        if (xs[i] <= 0 || os[i] <= 0) return TP_ERR_UNSUPPORTED;
    dn_step *d = tp_calloc(1, sizeof *d);
    TP_CHECK(d != NULL, TP_ERR_NOMEM, "out of memory preparing a 3-D convolution");
    band bands[257];
    double work = 2.0 * (transposed ? (double)tp_tensor_numel(x) * (double)(os[1] / g)
                                    : (double)tp_tensor_numel(o) * (double)(xs[1] / g)) *
                  (double)ks[0] * (double)ks[1] * (double)ks[2];
    int threads = info->max_threads > 256 ? 256 : info->max_threads;
    int k = os[0] > 1 ? split(os[0], 1, 1, 1, threads, work, bands) : 1;
    bands[0] = (band){0, os[0], 0, 1, 0, 1};
    d->kind = DN_CONV;
    d->ires = -1;
    d->in_src1 = -1;
    d->n_chunks = k;
    d->chunks = tp_calloc((size_t)k, sizeof *d->chunks);
    tp_status rst = d->chunks ? TP_OK : tp_error(TP_ERR_NOMEM, "out of memory preparing a 3-D convolution");
    int64_t oc = os[1], ic = xs[1];
    dnnl_memory_desc_t wmd, umd, bmd;
    if (g == 1) {
        dnnl_dims_t wd = {oc, ic, ks[0], ks[1], ks[2]};
        dnnl_memory_desc_init_by_tag(&wmd, 5, wd, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&umd, 5, wd, dnnl_f32, transposed ? dnnl_iodhw : dnnl_oidhw);
    } else {
        dnnl_dims_t wd = {g, oc / g, ic / g, ks[0], ks[1], ks[2]};
        dnnl_memory_desc_init_by_tag(&wmd, 6, wd, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&umd, 6, wd, dnnl_f32, transposed ? dnnl_giodhw : dnnl_goidhw);
    }
    dnnl_dims_t bd = {oc};
    dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    for (int i = 0; rst == TP_OK && i < k; i++) {
        dn_chunk *ch = &d->chunks[i];
        int64_t n0 = bands[i].n0, nn = bands[i].n1 - n0;
        dnnl_dims_t sdims = {nn, ic, xs[2], xs[3], xs[4]}, ddims = {nn, oc, os[2], os[3], os[4]};
        dnnl_memory_desc_t sany, dany, suser, duser;
        dnnl_memory_desc_init_by_tag(&sany, 5, sdims, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&dany, 5, ddims, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&suser, 5, sdims, dnnl_f32, dnnl_ncdhw);
        dnnl_memory_desc_init_by_tag(&duser, 5, ddims, dnnl_f32, dnnl_ncdhw);
        dnnl_status_t ds;
        union {
            dnnl_convolution_desc_t conv;
            dnnl_deconvolution_desc_t deconv;
        } u;
        if (transposed)
            ds = dnnl_dilated_deconvolution_forward_desc_init(&u.deconv, dnnl_forward_inference,
                                                              dnnl_deconvolution_direct, &sany, &wmd, b ? &bmd : NULL,
                                                              &dany, strides, dil, pl, pr);
        else
            ds = dnnl_dilated_convolution_forward_desc_init(&u.conv, dnnl_forward_inference, dnnl_convolution_direct,
                                                            &sany, &wmd, b ? &bmd : NULL, &dany, strides, dil, pl, pr);
        if (ds != dnnl_success) {
            rst = tp_error(TP_ERR_UNSUPPORTED, "oneDNN 3-D convolution descriptor");
            break;
        }
        dnnl_primitive_attr_t attr;
        rst = make_attr(&attr, false, 0, 0, 0);
        if (rst != TP_OK) break;
        dnnl_primitive_desc_t pdesc;
        rst = make_pd(&u, attr, false, &pdesc);
        dnnl_primitive_attr_destroy(attr);
        if (rst != TP_OK) break;
        ch->md[M_SRC] = *dnnl_primitive_desc_query_md(pdesc, dnnl_query_src_md, 0);
        ch->md[M_DST] = *dnnl_primitive_desc_query_md(pdesc, dnnl_query_dst_md, 0);
        ch->md[M_W] = *dnnl_primitive_desc_query_md(pdesc, dnnl_query_weights_md, 0);
        ch->has[M_SRC] = ch->has[M_DST] = ch->has[M_W] = true;
        if (b) {
            ch->md[M_B] = bmd;
            ch->has[M_B] = true;
            ch->bias = (const float *)tp__tensor_base(b); /* a constant of the plan */
        }
        int64_t soff = n0 * ic * xs[2] * xs[3] * xs[4] * (int64_t)sizeof(float);
        int64_t doff = n0 * oc * os[2] * os[3] * os[4] * (int64_t)sizeof(float);
        bool ss = !dnnl_memory_desc_equal(&suser, &ch->md[M_SRC]), sd = !dnnl_memory_desc_equal(&duser, &ch->md[M_DST]);
        if (i == 0) d->stage_src = ss, d->stage_dst = sd;
        else if (ss != d->stage_src || sd != d->stage_dst) rst = tp_error(TP_ERR_UNSUPPORTED, "layouts differ by chunk");
        ch->off[M_SRC] = ch->off[M_SRC_T] = soff;
        ch->off[M_DST] = ch->off[M_DST_T] = doff;
        if (rst == TP_OK && ss) {
            ch->md[M_SRC_T] = suser;
            ch->has[M_SRC_T] = true;
            size_t sb = (dnnl_memory_desc_get_size(&ch->md[M_SRC]) + 63) & ~(size_t)63;
            if (sb > d->stage_src_bytes) d->stage_src_bytes = sb;
            rst = make_reorder(&suser, &ch->md[M_SRC], &ch->r_src);
        }
        if (rst == TP_OK && sd) {
            ch->md[M_DST_T] = duser;
            ch->has[M_DST_T] = true;
            size_t db = (dnnl_memory_desc_get_size(&ch->md[M_DST]) + 63) & ~(size_t)63;
            if (db > d->stage_dst_bytes) d->stage_dst_bytes = db;
            rst = make_reorder(&ch->md[M_DST], &duser, &ch->r_dst);
        }
        if (rst == TP_OK) rst = share_or_pack(d, i, &umd, (const float *)tp__tensor_base(w));
        if (rst != TP_OK) {
            dnnl_primitive_desc_destroy(pdesc);
            break;
        }
        rst = finish_chunk(ch, pdesc, &d->scratch);
    }
    omp_set_num_threads(saved);
    if (rst != TP_OK) {
        dn_step_free(d);
        if (rst == TP_ERR_UNSUPPORTED) tp_clear_error();
        return rst;
    }
    return finish_standalone(d, plan);
}

static tp_status conv3d_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,
                                tp_op_plan *plan) {
    return vol_prepare(info, bound, out, plan, false);
}
static tp_status deconv3d_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,
                                  tp_op_plan *plan) {
    return vol_prepare(info, bound, out, plan, true);
}

void tp__register_fast_onednn(void) {
    tp__register_variant(TP_OP_CONV_TRANSPOSE2D, "onednn", TP_CPU_AVX2, deconv2d_prepare);
    tp__register_variant(TP_OP_CONV_TRANSPOSE1D, "onednn", TP_CPU_AVX2, deconv1d_prepare);
    tp__register_variant(TP_OP_CONV3D, "onednn", TP_CPU_AVX2, conv3d_prepare);
    tp__register_variant(TP_OP_CONV_TRANSPOSE3D, "onednn", TP_CPU_AVX2, deconv3d_prepare);
}

#endif
