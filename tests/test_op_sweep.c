/*
 * test_op_sweep.c - every op of the registry with extreme values in each
 * int and int-list argument: 0, -1, 2^31, 2^32, 2^62, INT64_MIN, INT64_MAX
 * (lists: [v] and [v, v, v]).
 *
 * Archives and ONNX models deliver op arguments straight from the file, so
 * each call must return TP_OK or a clean error with a message: no crash,
 * no undefined behaviour (the sanitizer build runs this too), no leak (the
 * harness counts blocks), and bounded work. The baseline arguments are
 * small tensors (three flavours, below) and each argument's default (or 1,
 * [1], 1.0, false, None); allocations above 64 MiB are refused through the
 * allocation hook, so an extreme size must fail as TP_ERR_NOMEM (or an
 * earlier shape error) instead of allocating. Each op also runs once on
 * the baseline, which must not crash either.
 */
#include <stdint.h>

#include "test_util.h"

#define MAX_BYTES ((size_t)64 << 20)

static long g_refused;

static void *capped_alloc(void *user, void *ptr, size_t old_size, size_t new_size) {
    (void)user;
    (void)old_size;
    if (new_size == 0) {
        free(ptr);
        return NULL;
    }
    if (new_size > MAX_BYTES) {
        g_refused++;
        return NULL;
    }
    return realloc(ptr, new_size);
}

static const int64_t extremes[] = {0, -1, (int64_t)1 << 31, (int64_t)1 << 32, (int64_t)1 << 62, INT64_MIN, INT64_MAX};

/* Baseline flavours: every tensor argument float32 [2, 3, 4]; float32
 * [2, 2, 4, 4] (so convolution weights and pooling inputs fit); int64
 * [2, 3, 4] with values 0 and 1 (indices, masks). */
enum { FLAVOURS = 3 };
static int g_flavour;

static tp_value small_tensor(uint32_t seed) {
    tp_tensor *t = NULL;
    bool four = g_flavour == 1, ints = g_flavour == 2;
    tp_status st = four ? tp_tensor_empty(TP_FLOAT32, 4, (const int64_t[]){2, 2, 4, 4}, &t)
                        : tp_tensor_empty(ints ? TP_INT64 : TP_FLOAT32, 3, (const int64_t[]){2, 3, 4}, &t);
    if (st != TP_OK) return tp_value_none();
    int64_t n = tp_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        if (ints) ((int64_t *)tp_tensor_data(t))[i] = (seed >> 20) & 1;
        else ((float *)tp_tensor_data(t))[i] = (float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
    }
    return tp_value_tensor(t);
}

/* The baseline value of schema argument a. */
static tp_status baseline(const tp_schema_arg *a, int k, tp_value *out) {
    switch (a->type) {
    case TP_ARG_TENSOR:
    case TP_ARG_TENSOR_OR_SCALAR: *out = small_tensor(17u + (uint32_t)k); return TP_OK;
    case TP_ARG_TENSOR_LIST: {
        TP_TRY(tp_value_list(2, out));
        out->u.seq.items[0] = small_tensor(31u + (uint32_t)k);
        out->u.seq.items[1] = small_tensor(37u + (uint32_t)k);
        return TP_OK;
    }
    default: break;
    }
    if (a->has_default) return tp_value_copy(&a->default_value, out);
    switch (a->type) {
    case TP_ARG_INT: *out = tp_value_int(1); return TP_OK;
    case TP_ARG_INT_LIST: return tp_value_int_list((const int64_t[]){1}, 1, out);
    case TP_ARG_SCALAR:
    case TP_ARG_FLOAT: *out = tp_value_float(1.0); return TP_OK;
    case TP_ARG_BOOL: *out = tp_value_bool(false); return TP_OK;
    case TP_ARG_STR: return tp_value_str("none", out);
    default: *out = tp_value_none(); return TP_OK;
    }
}

static bool int_like(tp_arg_type t) { return t == TP_ARG_INT || t == TP_ARG_OPT_INT; }
static bool int_list_like(tp_arg_type t) { return t == TP_ARG_INT_LIST || t == TP_ARG_OPT_INT_LIST; }

typedef struct sweep_stats {
    long calls, ok, errors;
} sweep_stats;

/* Call op with vals (one per schema argument; kwarg-only ones by keyword). */
static void call_one(tp_op op, const tp_schema *s, tp_value *vals, const char *what, sweep_stats *st) {
    tp_value kw, out = tp_value_none();
    CHECK_OK(tp_value_dict(&kw));
    int n_pos = 0;
    tp_value pos[32];
    for (int i = 0; i < s->n_args && i < 32; i++) {
        if (s->args[i].kwarg_only) {
            tp_value item; /* dict_set consumes it: a copy, vals[i] stays the caller's */
            CHECK_OK(tp_value_copy(&vals[i], &item));
            CHECK_OK(tp_value_dict_set(&kw, s->args[i].name, &item));
        } else {
            pos[n_pos++] = vals[i];
        }
    }
    tp_status rc = tp_op_call(op, pos, n_pos, &kw, &out);
    st->calls++;
    if (rc == TP_OK) {
        st->ok++;
    } else {
        st->errors++;
        const char *msg = tp_last_error();
        CHECK_MSG(msg && *msg, "%s: %s failed with an empty message", tp_op_name(op), what);
        CHECK_MSG(rc != TP_ERR_INTERNAL, "%s: %s: internal error: %s", tp_op_name(op), what, msg);
    }
    tp_value_clear(&out);
    tp_value_clear(&kw);
}

TEST(test_sweep_every_op) {
    tp_set_allocator(capped_alloc, NULL);
    sweep_stats st = {0, 0, 0};
    int n_ops = 0, n_swept_args = 0;
    for (int o = 0; o < TP_OP_COUNT * FLAVOURS; o++) {
        tp_op op = (tp_op)(o % TP_OP_COUNT);
        g_flavour = o / TP_OP_COUNT;
        const tp_schema *s = tp_op_schema(op);
        if (!s || !tp_op_has_kernel(op) || s->n_args > 32) continue;
        if (g_flavour == 0) n_ops++;
        tp_value vals[32];
        bool ok = true;
        for (int i = 0; i < s->n_args; i++) vals[i] = tp_value_none();
        for (int i = 0; i < s->n_args && ok; i++) ok = baseline(&s->args[i], i, &vals[i]) == TP_OK;
        CHECK_MSG(ok, "%s: cannot build baseline arguments (flavour %d)", tp_op_name(op), g_flavour);
        if (ok) call_one(op, s, vals, "baseline", &st);
        for (int i = 0; ok && i < s->n_args; i++) {
            tp_arg_type t = s->args[i].type;
            if (!int_like(t) && !int_list_like(t)) continue;
            if (g_flavour == 0) n_swept_args++;
            tp_value saved = vals[i];
            for (size_t e = 0; e < sizeof extremes / sizeof extremes[0]; e++) {
                char what[128];
                for (int len = 1; len <= (int_list_like(t) ? 3 : 1); len += 2) {
                    tp_value v;
                    if (int_like(t)) {
                        v = tp_value_int(extremes[e]);
                    } else {
                        int64_t items[3] = {extremes[e], extremes[e], extremes[e]};
                        CHECK_OK(tp_value_int_list(items, len, &v));
                    }
                    vals[i] = v;
                    snprintf(what, sizeof what, "%s = %s%lld%s", s->args[i].name, int_like(t) ? "" : "[",
                             (long long)extremes[e], int_like(t) ? "" : len == 1 ? "]" : ", ...]");
                    char full[160];
                    snprintf(full, sizeof full, "%s (flavour %d)", what, g_flavour);
                    call_one(op, s, vals, full, &st);
                    tp_value_clear(&v);
                }
            }
            vals[i] = saved;
        }
        for (int i = 0; i < s->n_args; i++) tp_value_clear(&vals[i]);
    }
    tp_set_allocator(NULL, NULL);
    printf("  %d ops, %d int arguments swept: %ld calls, %ld ok, %ld clean errors, %ld allocations refused\n", n_ops,
           n_swept_args, st.calls, st.ok, st.errors, g_refused);
    CHECK(n_ops > 100 && n_swept_args > 50);
}

TEST_MAIN(T(test_sweep_every_op))
