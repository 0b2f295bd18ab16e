/*
 * fast_eltwise.c - fast variants (contract v2) of float32 elementwise ops:
 * binary arithmetic with broadcasting and unary functions/activations.
 * The loops live in eltwise_loops.h, compiled once per ISA level
 * (eltwise_scalar.c, eltwise_avx2.c, eltwise_avx512.c); prepare picks the
 * table for the plan's CPU level, merges dims, and fixes the broadcast
 * pattern, so run is a flat loop over contiguous inner runs. Chains of
 * elementwise steps fuse into one pass (below).
 *
 * bfloat16 and float16 tensors (every operand of the one dtype, or a
 * number) run the same float32 loops a block at a time: operands widened
 * into L1 buffers, the result rounded once into the output (half.h), which
 * is how PyTorch computes these dtypes on CPUs. Their chains fuse, each
 * fused step rounding its input to 16 bits first (half_round_trip), so a
 * chain gives the bits of its steps run one by one.
 */
#include <math.h>

#include "eltwise.h"
#include "fast.h"
#include "half.h"
#include "kernel_util.h"
#include "../threadpool.h"

const tp_eltwise_table *tp__eltwise_table(int level) {
    if (level >= TP_CPU_AVX512) return &tp__eltwise_avx512;
    if (level >= TP_CPU_AVX2) return &tp__eltwise_avx2;
    return &tp__eltwise_scalar;
}

static const char *level_name(int level) {
    return level >= TP_CPU_AVX512 ? "avx512" : level >= TP_CPU_AVX2 ? "avx2" : "scalar";
}

/* Work below this many elements runs on one thread. */
#define PARALLEL_MIN 32768

static int threads_for(int64_t work, int max) {
    int64_t t = work / PARALLEL_MIN;
    if (t < 1) t = 1;
    return t < max ? (int)t : max;
}

/* ---- iteration: out contiguous; an operand per dim has a stride ---------
 * i[0] = n_outer dims, i[1] = inner length, i[2..] = outer sizes, then
 * strides. Layout in plan->i: [0] ndim_outer, [1] inner n, [2] inner stride a,
 * [3] inner stride b, [4..4+K) outer sizes, [4+K..4+2K) outer strides a,
 * [4+2K..4+3K) outer strides b, with K <= 6 (merged dims). */
#define MAXD 6

typedef struct iter_desc {
    int nd;
    int64_t n;         /* inner run */
    int64_t isa, isb;  /* inner strides (0 or 1) */
    int64_t sizes[MAXD], sa[MAXD], sb[MAXD];
} iter_desc;

/* Broadcast strides of t against out (right-aligned; 0 for size-1 or
 * missing dims); t NULL: all 0. */
static void bstrides(const tp_tensor *t, const tp_tensor *out, int64_t *s) {
    if (t) tp__broadcast_strides(t, t->ndim, out->ndim, out->sizes, s);
    else memset(s, 0, (size_t)out->ndim * sizeof *s);
}

static inline int64_t wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* Merge dims of out (contiguous) with operand strides; false if too many. */
static bool make_iter(const tp_tensor *out, const tp_tensor *a, const tp_tensor *b, iter_desc *it) {
    int64_t sa[TP_MAX_DIMS], sb[TP_MAX_DIMS], sz[TP_MAX_DIMS];
    int64_t ma[TP_MAX_DIMS], mb[TP_MAX_DIMS];
    bstrides(a, out, sa);
    bstrides(b, out, sb);
    int n = 0;
    for (int d = 0; d < out->ndim; d++) {
        if (out->sizes[d] == 1) continue;
        /* wrapping: an empty output's dims and strides may multiply past
         * int64 (nothing is then addressed); a non-empty one's never do */
        if (n > 0 && wrap_mul(sa[d], out->sizes[d]) == ma[n - 1] && wrap_mul(sb[d], out->sizes[d]) == mb[n - 1]) {
            /* dim d-1 (merged) continues dim d: merge */
            sz[n - 1] = wrap_mul(sz[n - 1], out->sizes[d]);
            ma[n - 1] = sa[d];
            mb[n - 1] = sb[d];
            continue;
        }
        sz[n] = out->sizes[d];
        ma[n] = sa[d];
        mb[n] = sb[d];
        n++;
    }
    if (n == 0) {
        sz[0] = 1;
        ma[0] = mb[0] = 0;
        n = 1;
    }
    it->n = sz[n - 1];
    it->isa = ma[n - 1];
    it->isb = mb[n - 1];
    if ((it->isa != 0 && it->isa != 1) || (it->isb != 0 && it->isb != 1)) {
        /* a strided inner dim: iterate it as an outer dim of runs of 1 */
        if (n >= MAXD) return false;
        sz[n] = 1;
        ma[n] = 0;
        mb[n] = 0;
        it->n = 1;
        it->isa = it->isb = 0;
        n++;
    }
    it->nd = n - 1;
    if (it->nd > MAXD) return false;
    for (int d = 0; d < it->nd; d++) {
        it->sizes[d] = sz[d];
        it->sa[d] = ma[d];
        it->sb[d] = mb[d];
    }
    return true;
}

static void save_iter(const iter_desc *it, tp_op_plan *plan) {
    plan->i[0] = it->nd;
    plan->i[1] = it->n;
    plan->i[2] = it->isa;
    plan->i[3] = it->isb;
    for (int d = 0; d < it->nd; d++) {
        plan->i[4 + d] = it->sizes[d];
        plan->i[4 + MAXD + d] = it->sa[d];
        plan->i[4 + 2 * MAXD + d] = it->sb[d];
    }
}

static int64_t outer_count(const tp_op_plan *plan) {
    int64_t c = 1;
    for (int d = 0; d < plan->i[0]; d++) c *= plan->i[4 + d];
    return c;
}

/* Element offsets of outer index `o` in a and b. */
static void outer_offsets(const tp_op_plan *plan, int64_t o, int64_t *oa, int64_t *ob) {
    int nd = (int)plan->i[0];
    int64_t a = 0, b = 0;
    for (int d = nd - 1; d >= 0; d--) {
        int64_t s = plan->i[4 + d], idx = o % s;
        o /= s;
        a += idx * plan->i[4 + MAXD + d];
        b += idx * plan->i[4 + 2 * MAXD + d];
    }
    *oa = a;
    *ob = b;
}

/* ---- fused chains ----------------------------------------------------------
 * An elementwise step absorbs the elementwise steps that follow it (engine.c
 * fuse_steps): after computing a block of BLOCK outputs it applies each
 * fused op to that block while it is in L1, so a chain of k ops costs one
 * pass over memory instead of k. */
#define CHAIN_MAX 8
#define BLOCK 4096

typedef struct chain {
    int n;
    const tp_op_plan *ops[CHAIN_MAX];
} chain;

static void chain_free(void *data) { tp_free(data); }

/* Work handed out at run time (threadpool.h): items (elements, or rows of
 * item_len elements) split among the step's threads, each thread's part in
 * up to ELT_UNITS pieces of at least PARALLEL_MIN elements starting at
 * multiples of align; a thread that finishes its own part takes what is
 * left of the other's. Each element is computed the same way whichever
 * thread takes it. */
enum { ELT_UNITS = 8 };
static void elt_walk(tp_range_walk *w, const tp_exec *ex, int64_t items, int64_t align, int64_t item_len) {
    tp__range_walk_init(w, ex->claims, ex->ith, ex->nth, items, align, item_len, PARALLEL_MIN, ELT_UNITS);
}

/* ---- streamed outputs ------------------------------------------------------
 * An output past tp__stream_min_bytes (cpu.h) is computed STREAM_STEP floats
 * at a time into an L1 buffer (a fused chain applied there) and copied out
 * with non-temporal stores, so its lines are not read from memory first:
 * on 64 MiB tensors relu 30% and add 10-15% faster. The transcendental
 * ops (exp, gelu, ...), bound by their arithmetic, measured no faster
 * through the buffer (some slower, by up to 10%, with blocks of 4096):
 * they store non-temporally straight from their own loops instead
 * (tp_eltwise_table.unary_stream; 64 MiB gelu 12.5-15.5 -> 11.1-14.3 ms),
 * and not at all when a chain follows them. */
#define STREAM_STEP 1024

enum { P_OP = 4 + 3 * MAXD, P_SCALAR_B = 5 + 3 * MAXD }; /* after the iteration layout */
enum { F_HALF = 4 }; /* plan->f[F_HALF]: TP_HALF_* of a 16-bit plan (after unary's 4 parameters) */

/* A float32 output that reaches tp__stream_min_bytes. */
static bool stream_sized(const tp_tensor *out) {
    int64_t bytes;
    return tp_mul_overflow_i64(tp_tensor_numel(out), 4, &bytes) && bytes >= tp__stream_min_bytes();
}

/* An op cheap enough to gain from streaming through the buffer. */
static bool streams(int op) { return !tp__eltwise_transcendental(op); }

static tp_status unary_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex);

static tp_status eltwise_fuse(tp_op_plan *plan, const tp_op_plan *consumer, int kind, int leaf) {
    (void)leaf;
    if (kind != TP_FUSE_ACT) return TP_ERR_UNSUPPORTED;
    chain *c = plan->data;
    if (!c) {
        c = tp_calloc(1, sizeof *c);
        TP_CHECK(c != NULL, TP_ERR_NOMEM, "out of memory fusing a chain");
        plan->data = c;
        plan->free_data = chain_free;
    }
    if (c->n == CHAIN_MAX) return TP_ERR_UNSUPPORTED;
    c->ops[c->n++] = consumer;
    /* a streamed transcendental op writes straight from its loop, which
     * has no place for a chain (streaming it through the buffer measured
     * no faster) */
    if (plan->run == unary_run && tp__eltwise_transcendental((int)plan->i[P_OP])) plan->stream_out = false;
    tp_elt_info ci;
    if (!tp__eltwise_info(consumer, &ci) || !streams(ci.op)) plan->stream_out = false;
    return TP_OK;
}

static void run_chain(const tp_op_plan *plan, float *p, int64_t n) {
    const chain *c = plan->data;
    if (c)
        for (int k = 0; k < c->n; k++) c->ops[k]->apply(c->ops[k], p, n);
}

/* ---- binary -------------------------------------------------------------- */

static tp_status binary_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const tp_eltwise_table *tab = plan->fn;
    int op = (int)plan->i[P_OP];
    float alpha = (float)plan->f[0];
    const float *a = (const float *)tp__tensor_base(in[0]);
    const float *b = plan->i[P_SCALAR_B] ? NULL : (const float *)tp__tensor_base(in[1]);
    float bs = (float)plan->f[1];
    float *o = (float *)tp__tensor_base(out[0]);
    int64_t n = plan->i[1], outer = outer_count(plan);
    if (n == 0) return TP_OK; /* an empty inner run: nothing to do, however many outer rows */
    tp_range_walk w;
    if (outer == 1) { /* split the one run */
        elt_walk(&w, ex, n, 16, 1);
        const bool st = plan->stream_out;
        _Alignas(64) float buf[STREAM_STEP];
        for (int64_t lo, hi; tp__range_next(&w, &lo, &hi);) {
            const int64_t step = st ? STREAM_STEP : plan->data ? BLOCK : hi - lo;
            for (int64_t q = lo; q < hi; q += step) {
                int64_t m = hi - q < step ? hi - q : step;
                float *dst = st ? buf : o + q;
                const float *pb = b ? b + (plan->i[3] ? q : 0) : &bs;
                tab->binary(op, dst, a + (plan->i[2] ? q : 0), plan->i[2], pb, b ? plan->i[3] : 0, m, alpha);
                run_chain(plan, dst, m);
                if (st) tab->stream(o + q, buf, m);
            }
        }
        if (st) tab->stream_fence();
        return TP_OK;
    }
    elt_walk(&w, ex, outer, 1, n);
    const bool st = plan->stream_out;
    _Alignas(64) float buf[STREAM_STEP];
    const int64_t step = st ? STREAM_STEP : n; /* streamed rows go in blocks */
    for (int64_t r = -1, end = 0; tp__range_next_item(&w, &r, &end);) {
        int64_t oa, ob;
        outer_offsets(plan, r, &oa, &ob);
        for (int64_t q = 0; q < n; q += step) {
            int64_t m = n - q < step ? n - q : step;
            float *dst = st ? buf : o + r * n + q;
            const float *pb = b ? b + ob + (plan->i[3] ? q : 0) : &bs;
            tab->binary(op, dst, a + oa + (plan->i[2] ? q : 0), plan->i[2], pb, b ? plan->i[3] : 0, m, alpha);
            run_chain(plan, dst, m);
            if (st) tab->stream(o + r * n + q, buf, m);
        }
    }
    if (st) tab->stream_fence();
    return TP_OK;
}

/* ---- bfloat16 / float16: blocks widened, computed, rounded ------------- */

enum { HALF_STEP = 1024 };

/* o[0, m) = a op b over m elements of the inner run, a and b with inner
 * strides 0 or 1 (b NULL: the scalar bs). */
static void half_binary_block(const tp_op_plan *plan, int kind, const uint16_t *a, int64_t sa, const uint16_t *b,
                              int64_t sb, float bs, uint16_t *o, int64_t m) {
    _Alignas(64) float fa[HALF_STEP], fb[HALF_STEP], fo[HALF_STEP];
    const tp_eltwise_table *tab = plan->fn;
    if (sa) tp__half_widen(a, m, kind, fa);
    else fa[0] = tp__half_to_f32(a[0], kind);
    const float *pb = &bs;
    if (b) {
        if (sb) tp__half_widen(b, m, kind, fb);
        else fb[0] = tp__half_to_f32(b[0], kind);
        pb = fb;
    }
    tab->binary((int)plan->i[P_OP], fo, fa, sa, pb, b ? sb : 0, m, (float)plan->f[0]);
    run_chain(plan, fo, m);
    tp__half_round(fo, m, kind, o);
}

static tp_status binary_run_half(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const int kind = (int)plan->f[F_HALF];
    const uint16_t *a = (const uint16_t *)tp__tensor_base(in[0]);
    const uint16_t *b = plan->i[P_SCALAR_B] ? NULL : (const uint16_t *)tp__tensor_base(in[1]);
    const float bs = (float)plan->f[1];
    uint16_t *o = (uint16_t *)tp__tensor_base(out[0]);
    const int64_t n = plan->i[1], outer = outer_count(plan), sa = plan->i[2], sb = plan->i[3];
    if (n == 0) return TP_OK;
    /* one run: split it; else split the rows */
    const int64_t units = outer == 1 ? n : outer;
    const int64_t chunk = (units + ex->nth - 1) / ex->nth, lo = chunk * ex->ith, hi = lo + chunk < units ? lo + chunk : units;
    for (int64_t r = outer == 1 ? 0 : lo; r < (outer == 1 ? 1 : hi); r++) {
        int64_t oa = 0, ob = 0;
        if (outer > 1) outer_offsets(plan, r, &oa, &ob);
        const int64_t q0 = outer == 1 ? lo : 0, q1 = outer == 1 ? hi : n;
        for (int64_t q = q0; q < q1; q += HALF_STEP) {
            const int64_t m = q1 - q < HALF_STEP ? q1 - q : HALF_STEP;
            half_binary_block(plan, kind, a + oa + (sa ? q : 0), sa, b ? b + ob + (sb ? q : 0) : NULL, sb, bs,
                              o + r * n + q, m);
        }
    }
    return TP_OK;
}

static tp_status unary_run_half(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const tp_eltwise_table *tab = plan->fn;
    const int kind = (int)plan->f[F_HALF], op = (int)plan->i[P_OP];
    const float params[4] = {(float)plan->f[0], (float)plan->f[1], (float)plan->f[2], (float)plan->f[3]};
    const uint16_t *a = (const uint16_t *)tp__tensor_base(in[0]);
    uint16_t *o = (uint16_t *)tp__tensor_base(out[0]);
    const int64_t n = plan->i[1], outer = outer_count(plan), sa = plan->i[2];
    if (n == 0) return TP_OK;
    const int64_t units = outer == 1 ? n : outer;
    const int64_t chunk = (units + ex->nth - 1) / ex->nth, lo = chunk * ex->ith, hi = lo + chunk < units ? lo + chunk : units;
    _Alignas(64) float fa[HALF_STEP];
    for (int64_t r = outer == 1 ? 0 : lo; r < (outer == 1 ? 1 : hi); r++) {
        int64_t oa = 0, ob;
        if (outer > 1) outer_offsets(plan, r, &oa, &ob);
        const int64_t q0 = outer == 1 ? lo : 0, q1 = outer == 1 ? hi : n;
        for (int64_t q = q0; q < q1; q += HALF_STEP) {
            const int64_t m = q1 - q < HALF_STEP ? q1 - q : HALF_STEP;
            if (sa) {
                tp__half_widen(a + oa + q, m, kind, fa);
            } else {
                const float v = tp__half_to_f32(a[oa], kind);
                for (int64_t k = 0; k < m; k++) fa[k] = v;
            }
            tab->unary(op, fa, fa, m, params);
            run_chain(plan, fa, m);
            tp__half_round(fa, m, kind, o + r * n + q);
        }
    }
    return TP_OK;
}

/* p[0, n) = p rounded to the plan's 16-bit dtype and widened again: what a
 * fused 16-bit step reads where the unfused one would read its producer's
 * 16-bit output. */
static void half_round_trip(const tp_op_plan *plan, float *p, int64_t n) {
    uint16_t tmp[HALF_STEP];
    const int kind = (int)plan->f[F_HALF];
    for (int64_t q = 0; q < n; q += HALF_STEP) {
        const int64_t m = n - q < HALF_STEP ? n - q : HALF_STEP;
        tp__half_round(p + q, m, kind, tmp);
        tp__half_widen(tmp, m, kind, p + q);
    }
}

static void unary_apply(const tp_op_plan *plan, float *p, int64_t n);
static void binary_apply(const tp_op_plan *plan, float *p, int64_t n);

/* A 16-bit unary step or step with a number operand fused after another
 * 16-bit elementwise step: its input rounded first, so the chain gives the
 * bits the separate steps give (the last rounding is the producer's store). */
static void half_unary_apply(const tp_op_plan *plan, float *p, int64_t n) {
    half_round_trip(plan, p, n);
    unary_apply(plan, p, n);
}
static void half_binary_apply(const tp_op_plan *plan, float *p, int64_t n) {
    half_round_trip(plan, p, n);
    binary_apply(plan, p, n);
}

/* A plan of binary_prepare / unary_prepare turned into its 16-bit form: no
 * streaming; chains of 16-bit elementwise steps still fuse (each fused
 * step rounds its input first), and a bias or residual add into a
 * bfloat16 product that rounds before each add (fast_linalg.c). */
static void make_half(tp_op_plan *plan, int kind, tp_run_fn run) {
    plan->f[F_HALF] = kind;
    plan->run = run;
    plan->stream_out = false;
    if (plan->apply) plan->apply = run == binary_run_half ? half_binary_apply : half_unary_apply;
}

/* A binary op with a scalar operand as a fused step: p = p op scalar. */
static void binary_apply(const tp_op_plan *plan, float *p, int64_t n) {
    const tp_eltwise_table *tab = plan->fn;
    float bs = (float)plan->f[1];
    tab->binary((int)plan->i[P_OP], p, p, 1, &bs, 0, n, (float)plan->f[0]);
}

static tp_status binary_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *outv,
                                tp_op_plan *plan, int op, bool has_alpha) {
    tp_tensor *out = tp__fast_out(outv);
    tp_tensor *a = tp__arg_tensor(bound, 0), *b = tp__arg_tensor(bound, 1);
    if (!out || !a || a->dtype != out->dtype || (b && b->dtype != out->dtype)) return TP_ERR_UNSUPPORTED;
    const int half = tp__half_kind(out->dtype, info->cpu_level);
    if (out->dtype != TP_FLOAT32 && half < 0) return TP_ERR_UNSUPPORTED;
    if (!b && !tp_value_is_number(&bound[1])) return TP_ERR_UNSUPPORTED;
    if (out->ndim != (a->ndim > (b ? b->ndim : 0) ? a->ndim : (b ? b->ndim : 0))) return TP_ERR_UNSUPPORTED;
    for (int d = 0; d < a->ndim; d++) /* a must broadcast to out without being the larger one */
        if (a->sizes[d] != out->sizes[d + out->ndim - a->ndim] && a->sizes[d] != 1) return TP_ERR_UNSUPPORTED;
    /* a one-element constant operand is a scalar of the plan (ONNX writes constants as tensors) */
    double b_value = 0.0;
    bool b_scalar = !b;
    if (b && info->is_const[1] && tp_tensor_numel(b) == 1 && b->ndim <= out->ndim) {
        b_value = half >= 0 ? tp__half_to_f32(((const uint16_t *)tp_tensor_data(b))[0], half)
                            : ((const float *)tp_tensor_data(b))[0];
        b_scalar = true;
    } else if (!b) {
        b_value = tp__arg_f64(bound, 1);
    }
    iter_desc it;
    if (!make_iter(out, a, b_scalar ? NULL : b, &it)) return TP_ERR_UNSUPPORTED;
    save_iter(&it, plan);
    plan->i[P_OP] = op;
    plan->i[P_SCALAR_B] = b_scalar;
    plan->f[0] = has_alpha ? tp__arg_f64(bound, 2) : 1.0;
    plan->f[1] = b_value;
    plan->fn = tp__eltwise_table(info->cpu_level);
    plan->variant = level_name(info->cpu_level);
    plan->run = binary_run;
    plan->stream_out = streams(op) && stream_sized(out);
    plan->max_threads = threads_for(tp_tensor_numel(out), info->max_threads);
    /* in place over a: same layout, a not broadcast */
    plan->inplace_ok = tp_tensor_is_contiguous(a) && a->ndim == out->ndim && tp_tensor_numel(a) == tp_tensor_numel(out);
    int64_t last = out->ndim > 0 ? out->sizes[out->ndim - 1] : 1;
    bool b_row = b && b->ndim >= 1 && tp_tensor_numel(b) == last && b->sizes[b->ndim - 1] == last && b->strides[b->ndim - 1] == 1;
    bool a_row = a->ndim >= 1 && tp_tensor_numel(a) == last && a->sizes[a->ndim - 1] == last && a->strides[a->ndim - 1] == 1;
    bool b_full = b && tp_tensor_is_contiguous(b) && b->ndim == out->ndim && tp_tensor_numel(b) == tp_tensor_numel(out);
    if (op == TP_ELT_ADD && plan->f[0] == 1.0 && plan->inplace_ok && b_row) {
        plan->bias_add = true; /* tensor + row */
        plan->bias_leaf = 1;
    } else if (op == TP_ELT_ADD && plan->f[0] == 1.0 && b_full && a_row && tp_tensor_numel(out) > last) {
        plan->bias_add = true; /* row + tensor, as ONNX exports Linear */
        plan->bias_leaf = 0;
    }
    plan->residual_add = op == TP_ELT_ADD && plan->f[0] == 1.0 && b && plan->inplace_ok && tp_tensor_is_contiguous(b) &&
                         b->ndim == out->ndim && tp_tensor_numel(b) == tp_tensor_numel(out);
    if (b_scalar && plan->inplace_ok) plan->apply = binary_apply;
    plan->fuse = eltwise_fuse;
    if (half >= 0) {
        /* a number operand and alpha are rounded to the tensors' dtype
         * first, as PyTorch (1.13) converts them */
        plan->f[0] = tp__half_scalar(plan->f[0], half);
        if (!b) plan->f[1] = tp__half_scalar(plan->f[1], half);
        make_half(plan, half, binary_run_half);
    }
    return TP_OK;
}

#define BINARY(name, op, alpha)                                                                                 \
    static tp_status name##_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,  \
                                    tp_op_plan *plan) {                                                        \
        return binary_prepare(info, bound, out, plan, op, alpha);                                              \
    }
BINARY(add, TP_ELT_ADD, true)
BINARY(sub, TP_ELT_SUB, true)
BINARY(mul, TP_ELT_MUL, false)
BINARY(maximum, TP_ELT_MAX, false)
BINARY(minimum, TP_ELT_MIN, false)
#undef BINARY

/* div(self, other, *, rounding_mode=None): true division only */
static tp_status div_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out, tp_op_plan *plan) {
    if (!tp__arg_is_none(bound, 2)) return TP_ERR_UNSUPPORTED;
    return binary_prepare(info, bound, out, plan, TP_ELT_DIV, false);
}

/* ---- unary ---------------------------------------------------------------- */

static tp_status unary_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const tp_eltwise_table *tab = plan->fn;
    int op = (int)plan->i[P_OP];
    float params[4] = {(float)plan->f[0], (float)plan->f[1], (float)plan->f[2], (float)plan->f[3]};
    const float *a = (const float *)tp__tensor_base(in[0]);
    float *o = (float *)tp__tensor_base(out[0]);
    int64_t n = plan->i[1], outer = outer_count(plan);
    if (n == 0) return TP_OK; /* an empty inner run: nothing to do, however many outer rows */
    tp_range_walk w;
    /* one contiguous run; an input broadcast along the whole of it (inner
     * stride 0: a single element expanded) takes the rows loop's gather */
    if (outer == 1 && plan->i[2] == 1) {
        elt_walk(&w, ex, n, 16, 1); /* pieces start 64-byte aligned for the vector loops */
        const bool st = plan->stream_out;
        if (st && tp__eltwise_transcendental(op)) { /* straight from the loop (no chain) */
            for (int64_t lo, hi; tp__range_next(&w, &lo, &hi);) tab->unary_stream(op, o + lo, a + lo, hi - lo, params);
            tab->stream_fence();
            return TP_OK;
        }
        _Alignas(64) float buf[STREAM_STEP];
        for (int64_t lo, hi; tp__range_next(&w, &lo, &hi);) {
            const int64_t step = st ? STREAM_STEP : plan->data ? BLOCK : hi - lo;
            for (int64_t q = lo; q < hi; q += step) {
                int64_t m = hi - q < step ? hi - q : step;
                float *dst = st ? buf : o + q;
                tab->unary(op, dst, a + q, m, params);
                run_chain(plan, dst, m);
                if (st) tab->stream(o + q, buf, m);
            }
        }
        if (st) tab->stream_fence();
        return TP_OK;
    }
    elt_walk(&w, ex, outer, 1, n);
    const bool st = plan->stream_out && plan->i[2] == 1; /* streamed contiguous rows go in blocks */
    _Alignas(64) float buf[STREAM_STEP];
    float tmp[256];
    for (int64_t r = -1, end = 0; tp__range_next_item(&w, &r, &end);) {
        int64_t oa, ob;
        outer_offsets(plan, r, &oa, &ob);
        if (st && tp__eltwise_transcendental(op)) {
            tab->unary_stream(op, o + r * n, a + oa, n, params);
            continue;
        }
        if (st) {
            for (int64_t q = 0; q < n; q += STREAM_STEP) {
                int64_t m = n - q < STREAM_STEP ? n - q : STREAM_STEP;
                tab->unary(op, buf, a + oa + q, m, params);
                run_chain(plan, buf, m);
                tab->stream(o + r * n + q, buf, m);
            }
            continue;
        }
        if (plan->i[2] == 1) {
            tab->unary(op, o + r * n, a + oa, n, params);
        } else { /* strided: gather runs of 1 */
            for (int64_t k = 0; k < n; k += 256) {
                int64_t m = n - k < 256 ? n - k : 256;
                for (int64_t q = 0; q < m; q++) tmp[q] = a[oa];
                tab->unary(op, o + r * n + k, tmp, m, params);
            }
        }
        run_chain(plan, o + r * n, n);
    }
    if (st) tab->stream_fence();
    return TP_OK;
}

/* The activation as a GEMM/convolution epilogue. */
static void unary_apply(const tp_op_plan *plan, float *p, int64_t n) {
    const tp_eltwise_table *tab = plan->fn;
    float params[4] = {(float)plan->f[0], (float)plan->f[1], (float)plan->f[2], (float)plan->f[3]};
    tab->unary((int)plan->i[P_OP], p, p, n, params);
}

static tp_status unary_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *outv,
                               tp_op_plan *plan, int op) {
    tp_tensor *out = tp__fast_out(outv);
    tp_tensor *a = tp__arg_tensor(bound, 0);
    if (!out || !a || a->dtype != out->dtype || a->ndim != out->ndim) return TP_ERR_UNSUPPORTED;
    const int half = tp__half_kind(out->dtype, info->cpu_level);
    if (out->dtype != TP_FLOAT32 && half < 0) return TP_ERR_UNSUPPORTED;
    iter_desc it;
    if (!make_iter(out, a, NULL, &it)) return TP_ERR_UNSUPPORTED;
    save_iter(&it, plan);
    plan->i[P_OP] = op;
    plan->fn = tp__eltwise_table(info->cpu_level);
    plan->variant = level_name(info->cpu_level);
    plan->run = unary_run;
    /* transcendental ops stream straight from their loops (unary_stream):
     * 64 MiB gelu ~10% faster at AVX-512 */
    plan->stream_out = stream_sized(out);
    plan->max_threads = threads_for(tp_tensor_numel(out) * 4, info->max_threads);
    plan->inplace_ok = tp_tensor_is_contiguous(a);
    if (plan->inplace_ok) plan->apply = unary_apply;
    plan->fuse = eltwise_fuse;
    if (half >= 0) make_half(plan, half, unary_run_half);
    return TP_OK;
}

/* What a plan of binary run bin / unary run un computes. */
static bool elt_info(const tp_op_plan *plan, tp_run_fn bin, tp_run_fn un, tp_elt_info *out) {
    if (plan->run != bin && plan->run != un) return false;
    *out = (tp_elt_info){.binary = plan->run == bin, .op = (int)plan->i[P_OP], .chained = plan->data != NULL};
    out->scalar_b = out->binary && plan->i[P_SCALAR_B];
    for (int k = 0; k < 4; k++) out->f[k] = plan->f[k]; /* a 16-bit plan's kind is f[F_HALF], after them */
    return true;
}

bool tp__eltwise_info(const tp_op_plan *plan, tp_elt_info *out) { return elt_info(plan, binary_run, unary_run, out); }

bool tp__eltwise_half_info(const tp_op_plan *plan, tp_elt_info *out) {
    return elt_info(plan, binary_run_half, unary_run_half, out);
}


#define UNARY(name, op)                                                                                        \
    static tp_status name##_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out, \
                                    tp_op_plan *plan) {                                                       \
        return unary_prepare(info, bound, out, plan, op);                                                     \
    }
UNARY(relu, TP_ELT_RELU)
UNARY(neg, TP_ELT_NEG)
UNARY(abs, TP_ELT_ABS)
UNARY(exp, TP_ELT_EXP)
UNARY(tanh, TP_ELT_TANH)
UNARY(sigmoid, TP_ELT_SIGMOID)
UNARY(silu, TP_ELT_SILU)
UNARY(sqrt, TP_ELT_SQRT)
UNARY(rsqrt, TP_ELT_RSQRT)
UNARY(reciprocal, TP_ELT_RECIPROCAL)
UNARY(square, TP_ELT_SQUARE)
UNARY(erf, TP_ELT_ERF)
UNARY(log, TP_ELT_LOG)
UNARY(relu6, TP_ELT_RELU6)
UNARY(hardswish, TP_ELT_HARDSWISH)
UNARY(hardsigmoid, TP_ELT_HARDSIGMOID)
#undef UNARY

/* pow(Tensor self, Scalar exponent) for the exponents PyTorch computes as
 * these ops (x * x, sqrt(x), 1 / sqrt(x), 1 / x in the tensor's float
 * type); a tensor or any other exponent declines. */
static tp_status pow_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out, tp_op_plan *plan) {
    if (!tp_value_is_number(&bound[1]) || bound[1].kind == TP_VAL_BOOL) return TP_ERR_UNSUPPORTED;
    const double e = tp__arg_f64(bound, 1);
    const int op = e == 2.0 ? TP_ELT_SQUARE : e == 0.5 ? TP_ELT_SQRT : e == -0.5 ? TP_ELT_RSQRT
                 : e == -1.0 ? TP_ELT_RECIPROCAL : -1;
    if (op < 0) return TP_ERR_UNSUPPORTED;
    return unary_prepare(info, bound, out, plan, op);
}

/* gelu(Tensor self, *, str approximate='none') */
static tp_status gelu_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out, tp_op_plan *plan) {
    const char *approx = tp__arg_str(bound, 1);
    bool tanh_form = approx && strcmp(approx, "tanh") == 0;
    if (approx && !tanh_form && strcmp(approx, "none") != 0) return TP_ERR_UNSUPPORTED;
    return unary_prepare(info, bound, out, plan, tanh_form ? TP_ELT_GELU_TANH : TP_ELT_GELU);
}

/* leaky_relu(Tensor self, Scalar negative_slope=0.01) */
static tp_status leaky_relu_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,
                                    tp_op_plan *plan) {
    TP_TRY(unary_prepare(info, bound, out, plan, TP_ELT_LEAKY_RELU));
    plan->f[0] = tp__arg_f64(bound, 1);
    return TP_OK;
}

/* hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) / clamp(self, min=None, max=None) */
static tp_status hardtanh_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,
                                  tp_op_plan *plan) {
    TP_TRY(unary_prepare(info, bound, out, plan, TP_ELT_CLAMP));
    plan->f[0] = tp__arg_f64(bound, 1);
    plan->f[1] = tp__arg_f64(bound, 2);
    return TP_OK;
}

static tp_status clamp_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *out,
                               tp_op_plan *plan) {
    /* tensor bounds and NaN bounds take the reference path */
    for (int k = 1; k <= 2; k++)
        if (!tp__arg_is_none(bound, k) && (!tp_value_is_number(&bound[k]) || isnan(tp__arg_f64(bound, k))))
            return TP_ERR_UNSUPPORTED;
    TP_TRY(unary_prepare(info, bound, out, plan, TP_ELT_CLAMP));
    plan->f[0] = tp__arg_is_none(bound, 1) ? -INFINITY : tp__arg_f64(bound, 1);
    plan->f[1] = tp__arg_is_none(bound, 2) ? INFINITY : tp__arg_f64(bound, 2);
    return TP_OK;
}

/* ---- where(condition, self, other): three broadcast operands -------------
 * plan->i: [0] ndim, [1..8] sizes, then strides of cond, self, other (8
 * each); self/other may be scalars (f[0], f[1]; stride arrays unused). */
enum { W_ND = 0, W_SIZES = 1, W_SC = 9 }; /* i[9..16]: cond strides */

/* Element offsets of row r (all dims but the last) in the condition, x and y. */
static void where_row(const int64_t *q, const int64_t *sx, const int64_t *sy, int nd, int64_t r, int64_t *oc,
                      int64_t *ox, int64_t *oy) {
    *oc = *ox = *oy = 0;
    for (int d = nd - 2; d >= 0; d--) {
        int64_t i = r % q[W_SIZES + d];
        r /= q[W_SIZES + d];
        *oc += i * q[W_SC + d];
        *ox += i * sx[d];
        *oy += i * sy[d];
    }
}

static tp_status where_run(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const int64_t *q = plan->i;
    int nd = (int)q[W_ND];
    const uint8_t *c = (const uint8_t *)tp__tensor_base(in[0]);
    const tp_eltwise_table *tab = plan->fn;
    int k = 1;
    const float *x;
    bool x_scalar = plan->f[2] != 0, y_scalar = plan->f[3] != 0;
    x = x_scalar ? NULL : (const float *)tp__tensor_base(in[k++]);
    const float *y = y_scalar ? NULL : (const float *)tp__tensor_base(in[k++]);
    const int64_t *sx = plan->data, *sy = (const int64_t *)plan->data + TP_MAX_DIMS;
    float xs = (float)plan->f[0], ys = (float)plan->f[1];
    float *o = (float *)tp__tensor_base(out[0]);
    if (tp_tensor_numel(out[0]) == 0) return TP_OK; /* its dims may still be huge: no rows to walk */
    int64_t n = nd > 0 ? q[W_SIZES + nd - 1] : 1, outer = 1;
    for (int d = 0; d + 1 < nd; d++) outer *= q[W_SIZES + d];
    int64_t isc = nd > 0 ? q[W_SC + nd - 1] : 0, isx = nd > 0 ? sx[nd - 1] : 0, isy = nd > 0 ? sy[nd - 1] : 0;
    int64_t chunk = (outer + ex->nth - 1) / ex->nth, lo = chunk * ex->ith, hi = lo + chunk < outer ? lo + chunk : outer;
    for (int64_t r = lo; r < hi; r++) {
        int64_t oc, ox, oy;
        where_row(q, sx, sy, nd, r, &oc, &ox, &oy);
        float *po = o + r * n;
        const uint8_t *pc = c + oc;
        const float *px = x ? x + ox : &xs, *py = y ? y + oy : &ys;
        const int64_t sx = x ? isx : 0, sy = y ? isy : 0;
        if (isc == 1 && (sx | sy) <= 1 && sx >= 0 && sy >= 0) { /* contiguous condition: the vector loop */
            tab->where(po, pc, px, sx, py, sy, n);
            continue;
        }
        for (int64_t i = 0; i < n; i++) {
            float a = px[i * sx], b = py[i * sy];
            po[i] = pc[i * isc] != 0 ? a : b;
        }
    }
    return TP_OK;
}

/* where on 16-bit values: the bits selected (plan->f[0] / f[1]: a number
 * operand already rounded to the dtype, as its bits). */
static tp_status where_run16(const tp_op_plan *plan, tp_tensor *const *in, tp_tensor *const *out, const tp_exec *ex) {
    const int64_t *q = plan->i;
    int nd = (int)q[W_ND];
    const uint8_t *c = (const uint8_t *)tp__tensor_base(in[0]);
    int k = 1;
    const bool x_scalar = plan->f[2] != 0, y_scalar = plan->f[3] != 0;
    const uint16_t *x = x_scalar ? NULL : (const uint16_t *)tp__tensor_base(in[k++]);
    const uint16_t *y = y_scalar ? NULL : (const uint16_t *)tp__tensor_base(in[k++]);
    const int64_t *sx = plan->data, *sy = (const int64_t *)plan->data + TP_MAX_DIMS;
    const uint16_t xs = (uint16_t)plan->f[0], ys = (uint16_t)plan->f[1];
    uint16_t *o = (uint16_t *)tp__tensor_base(out[0]);
    if (tp_tensor_numel(out[0]) == 0) return TP_OK;
    int64_t n = nd > 0 ? q[W_SIZES + nd - 1] : 1, outer = 1;
    for (int d = 0; d + 1 < nd; d++) outer *= q[W_SIZES + d];
    int64_t isc = nd > 0 ? q[W_SC + nd - 1] : 0, isx = nd > 0 ? sx[nd - 1] : 0, isy = nd > 0 ? sy[nd - 1] : 0;
    int64_t chunk = (outer + ex->nth - 1) / ex->nth, lo = chunk * ex->ith, hi = lo + chunk < outer ? lo + chunk : outer;
    for (int64_t r = lo; r < hi; r++) {
        int64_t oc, ox, oy;
        where_row(q, sx, sy, nd, r, &oc, &ox, &oy);
        uint16_t *po = o + r * n;
        const uint8_t *pc = c + oc;
        const uint16_t *px = x ? x + ox : &xs, *py = y ? y + oy : &ys;
        const int64_t ssx = x ? isx : 0, ssy = y ? isy : 0;
        for (int64_t i = 0; i < n; i++) po[i] = pc[i * isc] ? px[i * ssx] : py[i * ssy];
    }
    return TP_OK;
}

static void where_free(void *data) { tp_free(data); }

static tp_status where_prepare(const tp_prepare_info *info, const tp_value *bound, const tp_value *outv,
                               tp_op_plan *plan) {
    tp_tensor *out = tp__fast_out(outv);
    tp_tensor *c = tp__arg_tensor(bound, 0), *x = tp__arg_tensor(bound, 1), *y = tp__arg_tensor(bound, 2);
    if (!out || !c || c->dtype != TP_BOOL || out->ndim > 8) return TP_ERR_UNSUPPORTED;
    const int half = tp__half_kind(out->dtype, info->cpu_level);
    if (out->dtype != TP_FLOAT32 && half < 0) return TP_ERR_UNSUPPORTED;
    if ((x && x->dtype != out->dtype) || (y && y->dtype != out->dtype)) return TP_ERR_UNSUPPORTED;
    if ((!x && !tp_value_is_number(&bound[1])) || (!y && !tp_value_is_number(&bound[2]))) return TP_ERR_UNSUPPORTED;
    int64_t *strides = tp_calloc(2 * TP_MAX_DIMS, sizeof *strides);
    TP_CHECK(strides != NULL, TP_ERR_NOMEM, "out of memory preparing where");
    plan->i[W_ND] = out->ndim;
    for (int d = 0; d < out->ndim; d++) plan->i[W_SIZES + d] = out->sizes[d];
    bstrides(c, out, &plan->i[W_SC]);
    if (x) bstrides(x, out, strides);
    if (y) bstrides(y, out, strides + TP_MAX_DIMS);
    plan->f[0] = x ? 0.0 : tp__arg_f64(bound, 1);
    plan->f[1] = y ? 0.0 : tp__arg_f64(bound, 2);
    plan->f[2] = x ? 0.0 : 1.0;
    plan->f[3] = y ? 0.0 : 1.0;
    plan->data = strides;
    plan->free_data = where_free;
    plan->fn = tp__eltwise_table(info->cpu_level);
    plan->run = where_run;
    plan->variant = level_name(info->cpu_level);
    plan->max_threads = threads_for(tp_tensor_numel(out), info->max_threads);
    if (half >= 0) { /* numbers as the dtype's bits */
        if (!x) plan->f[0] = tp__half_bits(plan->f[0], half);
        if (!y) plan->f[1] = tp__half_bits(plan->f[1], half);
        plan->run = where_run16;
    }
    return TP_OK;
}

void tp__register_fast_eltwise(void) {
    static const struct {
        tp_op op;
        tp_prepare_fn prepare;
    } table[] = {
        {TP_OP_ADD, add_prepare},
        {TP_OP_SUB, sub_prepare},
        {TP_OP_MUL, mul_prepare},
        {TP_OP_DIV, div_prepare},
        {TP_OP_MAXIMUM, maximum_prepare},
        {TP_OP_MINIMUM, minimum_prepare},
        {TP_OP_RELU, relu_prepare},
        {TP_OP_NEG, neg_prepare},
        {TP_OP_ABS, abs_prepare},
        {TP_OP_EXP, exp_prepare},
        {TP_OP_TANH, tanh_prepare},
        {TP_OP_SIGMOID, sigmoid_prepare},
        {TP_OP_SILU, silu_prepare},
        {TP_OP_SQRT, sqrt_prepare},
        {TP_OP_RSQRT, rsqrt_prepare},
        {TP_OP_RECIPROCAL, reciprocal_prepare},
        {TP_OP_SQUARE, square_prepare},
        {TP_OP_ERF, erf_prepare},
        {TP_OP_LOG, log_prepare},
        {TP_OP_RELU6, relu6_prepare},
        {TP_OP_HARDSWISH, hardswish_prepare},
        {TP_OP_HARDSIGMOID, hardsigmoid_prepare},
        {TP_OP_GELU, gelu_prepare},
        {TP_OP_POW, pow_prepare},
        {TP_OP_LEAKY_RELU, leaky_relu_prepare},
        {TP_OP_HARDTANH, hardtanh_prepare},
        {TP_OP_CLAMP, clamp_prepare},
        {TP_OP_WHERE, where_prepare},
    };
    for (size_t i = 0; i < TP_ARRAY_LEN(table); i++) tp__register_variant(table[i].op, "simd", TP_CPU_SCALAR, table[i].prepare);
}
