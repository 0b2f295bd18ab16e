/*
 * conv_bench.c - GFLOP/s of one NHWC float32 convolution, one thread:
 * oneDNN's convolution primitive (the kernel it picks for NHWC source and
 * destination, weights in the layout it asks for) against an implicit GEMM
 * on our GEMM (src/cpu/gemm.h): output pixels as rows, the packed weights
 * (K = KH*KW*Cin ordered kh, kw, c) as B, im2col of a tile of T pixels into
 * an L2-sized buffer ("tiles", the first design tried), and the library's
 * implicit GEMM (src/cpu/conv_nhwc_avx2.c: the GEMM's a_fill callback
 * gathering one K block of a pixel block at a time, "implicit"). Samples of the three
 * alternate; medians are printed as percentages of the FMA peak (-p).
 *
 * Build (from the repository root, after building build/libtpexport.a):
 *   F="-std=c11 -O2 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Iinclude -Isrc"
 *   gcc $F bench/conv_bench.c build/libtpexport.a $(pkg-config --libs jansson libprotobuf-c zlib) \
 *       -ldnnl -lgomp -lm -lpthread -o build/conv_bench
 * Usage: conv_bench [-r REPEATS] [-T TILE] [-p PEAK_GFLOPS] [H W CIN COUT K STRIDE PAD] ...
 *   (default: ResNet-18's 3x3 layers and its 7x7 stem)
 */
#include <dnnl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/conv_nhwc.h"
#include "cpu/gemm.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct shape {
    long h, w, cin, cout, k, s, p;
} shape;

typedef struct ours {
    shape sh;
    long oh, ow, kk;
    const float *x;
    float *y;
    void *wp;
    float *buf;
    void *ws;
    long tile;
} ours;

static void ours_run(ours *o) {
    const shape *s = &o->sh;
    const long pix = o->oh * o->ow, kk = o->kk;
    for (long p0 = 0; p0 < pix; p0 += o->tile) {
        long t = pix - p0 < o->tile ? pix - p0 : o->tile;
        for (long i = 0; i < t; i++) {
            long oh = (p0 + i) / o->ow, ow = (p0 + i) % o->ow;
            float *row = o->buf + i * kk;
            for (long kh = 0; kh < s->k; kh++) {
                long ih = oh * s->s - s->p + kh;
                for (long kw = 0; kw < s->k; kw++) {
                    long iw = ow * s->s - s->p + kw;
                    float *d = row + (kh * s->k + kw) * s->cin;
                    if (ih < 0 || ih >= s->h || iw < 0 || iw >= s->w)
                        memset(d, 0, (size_t)s->cin * sizeof(float));
                    else
                        memcpy(d, o->x + (ih * s->w + iw) * s->cin, (size_t)s->cin * sizeof(float));
                }
            }
        }
        tp_gemm g = {0};
        g.isa = TP_ISA_AVX2;
        g.m = t;
        g.n = s->cout;
        g.k = kk;
        g.a = o->buf;
        g.rs_a = kk;
        g.cs_a = 1;
        g.packed_b = o->wp;
        g.c = o->y + p0 * s->cout;
        g.ldc = s->cout;
        g.ep = tp__gemm_epilogue_default();
        tp__gemm_run(&g, 0, 1, o->ws);
    }
}

/* The library's NHWC implicit GEMM (src/cpu/conv_nhwc_avx2.c), as the
 * oneDNN layout pass runs it. */
typedef struct implicit {
    tp_conv_nhwc cv;
    tp_conv_nhwc_call call;
    void *ws;
} implicit;

static void implicit_run(implicit *im) { tp__conv_nhwc_run(&im->call, 0, 1, im->ws); }

typedef struct dn {
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    dnnl_memory_t src, wei, dst, scratch;
} dn;

static void dn_run(dn *d) {
    dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, d->src}, {DNNL_ARG_WEIGHTS, d->wei}, {DNNL_ARG_DST, d->dst},
                            {DNNL_ARG_SCRATCHPAD, d->scratch}};
    dnnl_primitive_execute(d->prim, d->stream, 4, a);
}

#define CK(x)                                                                                                          \
    do {                                                                                                               \
        if ((x) != dnnl_success) {                                                                                     \
            fprintf(stderr, "oneDNN failed: %s\n", #x);                                                               \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

static void bench(shape s, int repeats, long tile, double peak) {
    long oh = (s.h + 2 * s.p - s.k) / s.s + 1, ow = (s.w + 2 * s.p - s.k) / s.s + 1, kk = s.k * s.k * s.cin;
    double flop = 2.0 * (double)(oh * ow) * (double)s.cout * (double)kk;
    float *x = aligned_alloc(64, (size_t)(s.h * s.w * s.cin) * 4 + 64);
    float *w = aligned_alloc(64, (size_t)(kk * s.cout) * 4 + 64); /* OIHW */
    float *y0 = aligned_alloc(64, (size_t)(oh * ow * s.cout) * 4 + 64);
    float *y1 = aligned_alloc(64, (size_t)(oh * ow * s.cout) * 4 + 64);
    for (long i = 0; i < s.h * s.w * s.cin; i++) x[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    for (long i = 0; i < kk * s.cout; i++) w[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
    /* ours: B (K x N): element (p = (kh*K + kw)*cin + c, o) = w[o][c][kh][kw] */
    float *b = malloc((size_t)(kk * s.cout) * 4);
    for (long o = 0; o < s.cout; o++)
        for (long c = 0; c < s.cin; c++)
            for (long t = 0; t < s.k * s.k; t++) b[((t)*s.cin + c) * s.cout + o] = w[(o * s.cin + c) * s.k * s.k + t];
    ours o = {s, oh, ow, kk, x, y1, NULL, NULL, NULL, tile};
    o.wp = aligned_alloc(64, tp__gemm_packed_b_bytes(TP_ISA_AVX2, kk, s.cout) + 64);
    tp__gemm_pack_b(TP_ISA_AVX2, kk, s.cout, b, s.cout, 1, o.wp);
    o.buf = aligned_alloc(64, (size_t)(tile * kk) * 4 + 64);
    tp_gemm g = {0};
    g.isa = TP_ISA_AVX2;
    g.m = tile;
    g.n = s.cout;
    g.k = kk;
    g.rs_a = kk;
    g.cs_a = 1;
    g.packed_b = o.wp;
    g.ldc = s.cout;
    o.ws = aligned_alloc(64, tp__gemm_workspace_bytes(&g, 1) + 64);
    float *y2 = aligned_alloc(64, (size_t)(oh * ow * s.cout) * 4 + 64);

    dnnl_engine_t eng;
    CK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    dn d;
    CK(dnnl_stream_create(&d.stream, eng, dnnl_stream_default_flags));
    dnnl_memory_desc_t smd, wmd, wumd, dmd;
    dnnl_dims_t sd = {1, s.cin, s.h, s.w}, wd = {s.cout, s.cin, s.k, s.k}, dd = {1, s.cout, oh, ow};
    CK(dnnl_memory_desc_init_by_tag(&smd, 4, sd, dnnl_f32, dnnl_nhwc));
    CK(dnnl_memory_desc_init_by_tag(&wmd, 4, wd, dnnl_f32, dnnl_format_tag_any));
    CK(dnnl_memory_desc_init_by_tag(&wumd, 4, wd, dnnl_f32, dnnl_oihw));
    CK(dnnl_memory_desc_init_by_tag(&dmd, 4, dd, dnnl_f32, dnnl_nhwc));
    dnnl_dims_t st = {s.s, s.s}, pd_ = {s.p, s.p};
    dnnl_convolution_desc_t cd;
    CK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &smd, &wmd, NULL,
                                          &dmd, st, pd_, pd_));
    dnnl_primitive_attr_t attr;
    CK(dnnl_primitive_attr_create(&attr));
    CK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    dnnl_primitive_desc_t pd;
    CK(dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL));
    const char *impl = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    CK(dnnl_primitive_create(&d.prim, pd));
    const dnnl_memory_desc_t *pw = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *psc = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    dnnl_memory_t wu;
    CK(dnnl_memory_create(&wu, &wumd, eng, w));
    CK(dnnl_memory_create(&d.wei, pw, eng, DNNL_MEMORY_ALLOCATE));
    dnnl_primitive_desc_t rpd;
    CK(dnnl_reorder_primitive_desc_create(&rpd, &wumd, eng, pw, eng, NULL));
    dnnl_primitive_t rp;
    CK(dnnl_primitive_create(&rp, rpd));
    dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, wu}, {DNNL_ARG_TO, d.wei}};
    CK(dnnl_primitive_execute(rp, d.stream, 2, ra));
    CK(dnnl_memory_create(&d.src, &smd, eng, x));
    CK(dnnl_memory_create(&d.dst, &dmd, eng, y0));
    CK(dnnl_memory_create(&d.scratch, psc, eng, DNNL_MEMORY_ALLOCATE));

    ours_run(&o);
    dn_run(&d);
    double err = 0, mx = 0;
    for (long i = 0; i < oh * ow * s.cout; i++) {
        double e = y0[i] - y1[i];
        err = e * e > err ? e * e : err;
        mx = y0[i] * y0[i] > mx ? y0[i] * y0[i] : mx;
    }
    implicit oi;
    memset(&oi, 0, sizeof oi);
    oi.cv = (tp_conv_nhwc){.n = 1, .cin = s.cin, .h = s.h, .w = s.w, .cout = s.cout, .oh = oh, .ow = ow, .kh = s.k,
                           .kw = s.k, .sh = s.s, .sw = s.s, .ph = s.p, .pw = s.p, .dh = 1, .dw = 1, .threads = 1};
    if (tp__conv_nhwc_init(&oi.cv, TP_ISA_AVX2, w) != TP_OK) {
        fprintf(stderr, "tp__conv_nhwc_init failed\n");
        exit(1);
    }
    oi.ws = aligned_alloc(64, tp__conv_nhwc_workspace(&oi.cv, 1) + 64);
    oi.call = (tp_conv_nhwc_call){.conv = &oi.cv, .x = x, .x_nhwc = true, .y = y2, .res = NULL};
    implicit_run(&oi);
    double err2 = 0;
    for (long i = 0; i < oh * ow * s.cout; i++) {
        double e = y0[i] - y2[i];
        err2 = e * e > err2 ? e * e : err2;
    }
    double td[64], to[64], ti[64];
    if (repeats > 64) repeats = 64;
    for (int r = 0; r < repeats; r++) {
        double t0 = now();
        int n = 0;
        do {
            dn_run(&d);
            n++;
        } while (now() - t0 < 0.02);
        td[r] = (now() - t0) / n;
        t0 = now();
        n = 0;
        do {
            ours_run(&o);
            n++;
        } while (now() - t0 < 0.02);
        to[r] = (now() - t0) / n;
        t0 = now();
        n = 0;
        do {
            implicit_run(&oi);
            n++;
        } while (now() - t0 < 0.02);
        ti[r] = (now() - t0) / n;
    }
    for (int i = 1; i < repeats; i++)
        for (int j = i; j > 0; j--) {
            if (td[j] < td[j - 1]) {
                double t = td[j];
                td[j] = td[j - 1];
                td[j - 1] = t;
            }
            if (ti[j] < ti[j - 1]) {
                double t = ti[j];
                ti[j] = ti[j - 1];
                ti[j - 1] = t;
            }
            if (to[j] < to[j - 1]) {
                double t = to[j];
                to[j] = to[j - 1];
                to[j - 1] = t;
            }
        }
    double gd = flop / td[repeats / 2] / 1e9, go = flop / to[repeats / 2] / 1e9, gi = flop / ti[repeats / 2] / 1e9;
    printf("%3ldx%-3ld %4ld->%-4ld k%ld s%ld  onednn %-12s %5.1f%%  tiles(T=%ld) %5.1f%%  implicit %5.1f%%  "
           "implicit/onednn time %.2f  diff %.1e %.1e\n",
           s.h, s.w, s.cin, s.cout, s.k, s.s, impl, 100 * gd / peak, tile, 100 * go / peak, 100 * gi / peak,
           ti[repeats / 2] / td[repeats / 2], sqrt(err / (mx > 0 ? mx : 1)), sqrt(err2 / (mx > 0 ? mx : 1)));
    free(y2);
    free(oi.ws);
    tp__conv_nhwc_free(&oi.cv);
    dnnl_primitive_destroy(rp);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    dnnl_primitive_destroy(d.prim);
    dnnl_memory_destroy(d.src);
    dnnl_memory_destroy(d.dst);
    dnnl_memory_destroy(d.wei);
    dnnl_memory_destroy(wu);
    dnnl_memory_destroy(d.scratch);
    dnnl_stream_destroy(d.stream);
    dnnl_engine_destroy(eng);
    free(x);
    free(w);
    free(b);
    free(y0);
    free(y1);
    free(o.wp);
    free(o.buf);
    free(o.ws);
}

int main(int argc, char **argv) {
    int repeats = 9;
    long tile = 0;
    double peak = 91.0; /* one core of the AVX2 Zen 3 this was written on */
    shape list[64];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-r") && i + 1 < argc) repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-p") && i + 1 < argc) peak = atof(argv[++i]);
        else if (!strcmp(argv[i], "-T") && i + 1 < argc) tile = atol(argv[++i]);
        else if (i + 6 < argc && n < 64) {
            shape s;
            s.h = atol(argv[i]);
            s.w = atol(argv[i + 1]);
            s.cin = atol(argv[i + 2]);
            s.cout = atol(argv[i + 3]);
            s.k = atol(argv[i + 4]);
            s.s = atol(argv[i + 5]);
            s.p = atol(argv[i + 6]);
            list[n++] = s;
            i += 6;
        }
    }
    if (!n) {
        const shape d[] = {{56, 56, 64, 64, 3, 1, 1},    {56, 56, 64, 128, 3, 2, 1}, {28, 28, 128, 128, 3, 1, 1},
                           {28, 28, 128, 256, 3, 2, 1},  {14, 14, 256, 256, 3, 1, 1}, {14, 14, 256, 512, 3, 2, 1},
                           {7, 7, 512, 512, 3, 1, 1},    {224, 224, 3, 64, 7, 2, 3},  {56, 56, 64, 128, 1, 2, 0},
                           {56, 56, 64, 256, 1, 1, 0}};
        n = (int)(sizeof d / sizeof d[0]);
        memcpy(list, d, sizeof d);
    }
    printf("percent of an FMA peak of %.1f GFLOP/s (-p; bench/fma_peak.c measures it)\n", peak);
    for (int i = 0; i < n; i++) {
        long kk = list[i].k * list[i].k * list[i].cin;
        long t = tile > 0 ? tile : (256 * 1024 / 4 / kk) / 6 * 6;
        if (t < 24) t = 24;
        bench(list[i], repeats, t, peak);
    }
    return 0;
}
