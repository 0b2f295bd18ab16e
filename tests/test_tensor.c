/*
 * test_tensor.c - tests for the foundation modules under the tensors:
 * status codes and messages (status.c), the allocation hook (alloc.c),
 * dtypes, promotion and element conversion (dtype.c), and tensors: creation,
 * borrowed storage, views, copies, dtype conversion, comparison and printing
 * (tensor.c).
 *
 * Expected values come from PyTorch: tests/fixtures/tensor/ is written by
 * tests/fixtures/gen_tensor.py (promote_types.npy, conversions.json,
 * views.json). Run from tests/.
 */
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail_alloc.h"
#include "internal.h"
#include "test_util.h"

#define FIX "fixtures/tensor/"

/* ---- helpers ----------------------------------------------------------- */

static json_t *load_manifest(const char *path) {
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    if (!root) {
        fprintf(stderr, "  cannot parse %s: %s (line %d)\n", path, err.text, err.line);
        tp_test_current_failed++;
        return NULL;
    }
    return root;
}

static bool json_ints(json_t *arr, int64_t *out, int *n) {
    if (!json_is_array(arr) || json_array_size(arr) > TP_MAX_DIMS) return false;
    *n = (int)json_array_size(arr);
    for (int i = 0; i < *n; i++) out[i] = json_integer_value(json_array_get(arr, (size_t)i));
    return true;
}

/* A contiguous float32 tensor holding 0, 1, 2, ... */
static tp_tensor *arange_f32(int ndim, const int64_t *sizes) {
    tp_tensor *t = NULL;
    if (tp_tensor_empty(TP_FLOAT32, ndim, sizes, &t) != TP_OK) return NULL;
    float *p = tp_tensor_data(t);
    for (int64_t i = 0; i < tp_tensor_numel(t); i++) p[i] = (float)i;
    return t;
}

/* Load a fixture; float16/bfloat16 files hold int16 bit patterns. */
static tp_tensor *load_as(const char *file, tp_dtype dtype) {
    char path[512];
    snprintf(path, sizeof path, FIX "%s", file);
    tp_tensor *t = NULL;
    if (tp_npy_load(path, &t) != TP_OK) {
        fprintf(stderr, "  cannot load %s: %s\n", path, tp_last_error());
        tp_test_current_failed++;
        return NULL;
    }
    if (dtype == TP_FLOAT16 || dtype == TP_BFLOAT16) {
        tp_tensor *r = NULL;
        CHECK(tp_tensor_dtype(t) == TP_INT16);
        CHECK_OK(tp_tensor_from_data(dtype, tp_tensor_ndim(t), tp_tensor_sizes(t), tp_tensor_data(t), &r));
        tp_tensor_free(t);
        return r;
    }
    CHECK_MSG(tp_tensor_dtype(t) == dtype, "%s: dtype %s, expected %s", file,
              tp_dtype_name(tp_tensor_dtype(t)), tp_dtype_name(dtype));
    return t;
}

static bool is_nan_bits(const void *p, tp_dtype dtype) {
    return tp_dtype_is_float(dtype) && isnan(tp__load_f64(p, dtype));
}

/* Exact element-wise comparison of the bytes of two tensors of the same
 * dtype and shape (NaN matches any NaN: torch's NaN payload depends on
 * the code path). */
static void check_same_bits(const char *what, const tp_tensor *got, const tp_tensor *want) {
    if (!got || !want) return;
    CHECK_MSG(tp_tensor_dtype(got) == tp_tensor_dtype(want), "%s: dtype %s vs %s", what,
              tp_dtype_name(tp_tensor_dtype(got)), tp_dtype_name(tp_tensor_dtype(want)));
    CHECK_MSG(tp_tensor_numel(got) == tp_tensor_numel(want), "%s: numel", what);
    if (tp_tensor_dtype(got) != tp_tensor_dtype(want) || tp_tensor_numel(got) != tp_tensor_numel(want)) return;
    tp_dtype d = tp_tensor_dtype(got);
    size_t es = tp_dtype_size(d);
    tp_tensor *g, *w;
    CHECK_OK(tp_tensor_contiguous((tp_tensor *)got, &g));
    CHECK_OK(tp_tensor_contiguous((tp_tensor *)want, &w));
    const char *pg = tp_tensor_data(g), *pw = tp_tensor_data(w);
    int bad = 0;
    for (int64_t i = 0; i < tp_tensor_numel(g) && bad < 3; i++) {
        const char *a = pg + i * (int64_t)es, *b = pw + i * (int64_t)es;
        bool ok = memcmp(a, b, es) == 0 || (is_nan_bits(a, d) && is_nan_bits(b, d));
        if (!ok) {
            uint64_t ba = 0, bb = 0;
            memcpy(&ba, a, es);
            memcpy(&bb, b, es);
            CHECK_MSG(ok, "%s: element %" PRId64 ": got %.9g (bits 0x%" PRIx64 "), want %.9g (bits 0x%" PRIx64 ")",
                      what, i, tp__load_f64(a, d), ba, tp__load_f64(b, d), bb);
            bad++;
        }
    }
    tp_tensor_free(g);
    tp_tensor_free(w);
}

static char *print_to_string(const tp_tensor *t, int64_t max_elems) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    tp_tensor_print(t, f, max_elems);
    fclose(f);
    return buf; /* free() */
}

#define CHECK_STR(got, want)                                                                    \
    do {                                                                                        \
        const char *g_ = (got), *w_ = (want);                                                   \
        CHECK_MSG(g_ && strcmp(g_, w_) == 0, "got \"%s\", want \"%s\"", g_ ? g_ : "(null)", w_); \
    } while (0)

/* ---- status ------------------------------------------------------------ */

TEST(test_status_names) {
    static const struct { tp_status s; const char *name; } names[] = {
        {TP_OK, "TP_OK"},
        {TP_ERR_INVALID_ARG, "TP_ERR_INVALID_ARG"},
        {TP_ERR_INDEX, "TP_ERR_INDEX"},
        {TP_ERR_MISSING, "TP_ERR_MISSING"},
        {TP_ERR_DUPLICATE, "TP_ERR_DUPLICATE"},
        {TP_ERR_STATE, "TP_ERR_STATE"},
        {TP_ERR_NOT_FOUND, "TP_ERR_NOT_FOUND"},
        {TP_ERR_TYPE, "TP_ERR_TYPE"},
        {TP_ERR_SHAPE, "TP_ERR_SHAPE"},
        {TP_ERR_CONSTRAINT, "TP_ERR_CONSTRAINT"},
        {TP_ERR_CORRUPT, "TP_ERR_CORRUPT"},
        {TP_ERR_IO, "TP_ERR_IO"},
        {TP_ERR_VERIFY, "TP_ERR_VERIFY"},
        {TP_ERR_UNSUPPORTED, "TP_ERR_UNSUPPORTED"},
        {TP_ERR_NOMEM, "TP_ERR_NOMEM"},
        {TP_ERR_INTERNAL, "TP_ERR_INTERNAL"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) CHECK_STR(tp_status_str(names[i].s), names[i].name);
    CHECK_STR(tp_status_str((tp_status)999), "TP_ERR_UNKNOWN");
    CHECK_STR(tp_status_str((tp_status)-1), "TP_ERR_UNKNOWN");
}

TEST(test_status_kind) {
    CHECK(tp_status_kind(TP_OK) == TP_OK);
    CHECK(tp_status_kind(TP_ERR_INVALID_ARG) == TP_ERR_INVALID_ARG);
    CHECK(tp_status_kind(TP_ERR_INDEX) == TP_ERR_INVALID_ARG);
    CHECK(tp_status_kind(TP_ERR_NOT_FOUND) == TP_ERR_INVALID_ARG);
    CHECK(tp_status_kind(TP_ERR_TYPE) == TP_ERR_TYPE);
    CHECK(tp_status_kind(TP_ERR_CONSTRAINT) == TP_ERR_SHAPE);
    CHECK(tp_status_kind(TP_ERR_IO) == TP_ERR_CORRUPT);
    CHECK(tp_status_kind(TP_ERR_VERIFY) == TP_ERR_CORRUPT);
    CHECK(tp_status_kind(TP_ERR_UNSUPPORTED) == TP_ERR_UNSUPPORTED);
    CHECK(tp_status_kind(TP_ERR_NOMEM) == TP_ERR_NOMEM);
    CHECK(tp_status_kind(TP_ERR_INTERNAL) == TP_ERR_INTERNAL);
}

TEST(test_error_messages) {
    tp_clear_error();
    CHECK_STR(tp_last_error(), "");
    CHECK(tp_error(TP_ERR_SHAPE, "size %d at dim %s", 3, "x") == TP_ERR_SHAPE);
    CHECK_STR(tp_last_error(), "size 3 at dim x");
    tp_error_context("node %s (%s)", "add_1", "add");
    CHECK_STR(tp_last_error(), "node add_1 (add): size 3 at dim x");
    tp_error_context("graph");
    CHECK_STR(tp_last_error(), "graph: node add_1 (add): size 3 at dim x");
    /* the previous message as an argument of the next one */
    CHECK(tp_error(TP_ERR_IO, "outer (%s)", tp_last_error()) == TP_ERR_IO);
    CHECK_STR(tp_last_error(), "outer (graph: node add_1 (add): size 3 at dim x)");
    tp_clear_error();
    CHECK_STR(tp_last_error(), "");
    tp_error_context("ctx");
    CHECK_STR(tp_last_error(), "ctx: ");
}

TEST(test_error_long_messages) {
    static char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    tp_error(TP_ERR_CORRUPT, "%s", big);
    size_t n = strlen(tp_last_error());
    CHECK(n > 1000 && n < sizeof big - 1);
    tp_error_context("%s", big); /* a prefix longer than the buffer */
    n = strlen(tp_last_error());
    CHECK(n > 400 && n < sizeof big - 1);
    tp_error(TP_ERR_CORRUPT, "short");
    tp_error_context("%.600s", big);
    const char *m = tp_last_error();
    CHECK(strlen(m) < 2048 && strstr(m, ": short") != NULL);
}

/* ---- allocation hook --------------------------------------------------- */

typedef struct {
    long allocs, frees, reallocs;
    size_t live_bytes;
    bool size_mismatch;
} counting_state;

static void *counting_alloc(void *user, void *ptr, size_t old_size, size_t new_size) {
    counting_state *st = user;
    /* the hook is told the old size: live_bytes returns to 0 only if every
     * old_size equals what was asked for */
    if (new_size == 0) {
        st->frees++;
        st->live_bytes -= old_size;
        free(ptr);
        return NULL;
    }
    if (ptr) {
        st->reallocs++;
        st->live_bytes -= old_size;
    } else {
        st->allocs++;
        if (old_size != 0) st->size_mismatch = true;
    }
    void *p = realloc(ptr, new_size);
    if (p) st->live_bytes += new_size;
    return p;
}

TEST(test_alloc_basics) {
    long live = tp_alloc_live_blocks();
    void *a = tp_malloc(0), *b = tp_malloc(0);
    CHECK(a != NULL && b != NULL && a != b);
    CHECK(((uintptr_t)a % 16) == 0 && ((uintptr_t)b % 16) == 0);
    CHECK(tp_alloc_live_blocks() == live + 2);
    tp_free(a);
    tp_free(b);
    tp_free(NULL);
    CHECK(tp_alloc_live_blocks() == live);
    CHECK(tp_calloc(SIZE_MAX / 2, 4) == NULL); /* count*size overflows */
    CHECK(tp_malloc(SIZE_MAX - 4) == NULL);    /* size + header overflows */
    unsigned char *z = tp_calloc(100, 3);
    CHECK(z != NULL);
    bool zero = true;
    for (int i = 0; z && i < 300; i++) zero = zero && z[i] == 0;
    CHECK(zero);
    for (int i = 0; z && i < 300; i++) z[i] = (unsigned char)i;
    z = tp_realloc(z, 5000);
    CHECK(z != NULL && ((uintptr_t)z % 16) == 0);
    bool kept = true;
    for (int i = 0; z && i < 300; i++) kept = kept && z[i] == (unsigned char)i;
    CHECK(kept);
    z = tp_realloc(z, 10);
    CHECK(z != NULL && z[9] == 9);
    tp_free(z);
    void *r = tp_realloc(NULL, 8); /* realloc(NULL) allocates */
    CHECK(r != NULL);
    tp_free(r);
    CHECK(tp_strdup(NULL) == NULL);
    char *s = tp_strdup("hello");
    CHECK(s && strcmp(s, "hello") == 0);
    tp_free(s);
    CHECK(tp_alloc_live_blocks() == live);
}

/* The VmFlags of the /proc/self/smaps mapping holding p (into flags,
 * empty when not found). */
static void smaps_flags_of(const void *p, char *flags, size_t cap) {
    flags[0] = 0;
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return;
    char line[512];
    bool inside = false;
    while (fgets(line, sizeof line, f)) {
        unsigned long long lo, hi;
        if (sscanf(line, "%llx-%llx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            snprintf(flags, cap, "%.200s", line + 8);
            break;
        }
    }
    fclose(f);
}

/* tp__malloc_stream: 64-byte aligned below 2 MiB, 2 MiB aligned from it on,
 * the whole size usable, freed by tp_free, NULL on overflow or a failing
 * hook; on Linux with transparent huge pages the huge pages of a large block
 * are advised (VmFlags "hg" in /proc/self/smaps). */
TEST(test_alloc_stream) {
    long live = tp_alloc_live_blocks();
    const size_t sizes[] = {0, 1, 100, 4096, ((size_t)2 << 20) - 1, (size_t)2 << 20, ((size_t)5 << 20) + 12345};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *aligned = (void *)1;
        void *base = tp__malloc_stream(sizes[i], &aligned);
        CHECK(base != NULL && aligned != NULL);
        if (!base) continue;
        const uintptr_t want = sizes[i] >= (size_t)TP__HUGE_PAGE ? (uintptr_t)TP__HUGE_PAGE : 64;
        CHECK_MSG((uintptr_t)aligned % want == 0, "size %zu at %p", sizes[i], aligned);
        CHECK((char *)aligned >= (char *)base);
        memset(aligned, 0xab, sizes[i]); /* every byte writable (ASan checks the bounds) */
        if (sizes[i] >= (size_t)TP__HUGE_PAGE) {
            FILE *thp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
            if (thp) {
                fclose(thp);
                char flags[256];
                smaps_flags_of(aligned, flags, sizeof flags);
                CHECK_MSG(strstr(flags, " hg") != NULL, "size %zu: VmFlags%s", sizes[i], flags);
            } else {
                printf("  note: no /sys/kernel/mm/transparent_hugepage: huge-page advice not checked\n");
            }
        }
        tp_free(base);
    }
    CHECK(tp_alloc_live_blocks() == live);
    void *aligned = (void *)1;
    CHECK(tp__malloc_stream(SIZE_MAX - 100, &aligned) == NULL && aligned == NULL); /* size + alignment overflows */
    g_fail_alloc = (fail_alloc_state){0, 0};
    tp_set_allocator(fail_alloc_fn, NULL);
    aligned = (void *)1;
    void *base = tp__malloc_stream((size_t)3 << 20, &aligned);
    tp_set_allocator(NULL, NULL);
    g_fail_alloc = (fail_alloc_state){0, -1};
    CHECK(base == NULL && aligned == NULL);
    CHECK(tp_alloc_live_blocks() == live);
}

TEST(test_alloc_hook_sees_sizes) {
    counting_state st = {0};
    tp_set_allocator(counting_alloc, &st);
    void *a = tp_malloc(100);
    void *b = tp_calloc(7, 9);
    a = tp_realloc(a, 1000);
    tp_tensor *t = NULL;
    tp_status s = tp_tensor_zeros(TP_FLOAT64, 2, (int64_t[]){3, 4}, &t);
    tp_tensor_free(t);
    tp_free(a);
    tp_free(b);
    tp_set_allocator(NULL, NULL);
    CHECK_OK(s);
    CHECK(st.allocs >= 4 && st.reallocs == 1 && st.frees == st.allocs);
    CHECK(st.live_bytes == 0); /* every free was told the size it was given */
    CHECK(!st.size_mismatch);
}

/* ---- dtypes ------------------------------------------------------------ */

TEST(test_dtype_names) {
    static const char *names[] = {"float32", "float64", "float16", "bfloat16", "int64",
                                  "int32",   "int16",   "int8",    "uint8",    "bool"};
    static const size_t sizes[] = {4, 8, 2, 2, 8, 4, 2, 1, 1, 1};
    for (int d = 0; d < TP_DTYPE_COUNT; d++) {
        CHECK_STR(tp_dtype_name((tp_dtype)d), names[d]);
        CHECK(tp_dtype_size((tp_dtype)d) == sizes[d]);
        tp_dtype back = TP_DTYPE_COUNT;
        CHECK_OK(tp_dtype_from_name(names[d], &back));
        CHECK(back == (tp_dtype)d);
        char torch_name[32];
        snprintf(torch_name, sizeof torch_name, "torch.%s", names[d]);
        CHECK_OK(tp_dtype_from_name(torch_name, &back));
        CHECK(back == (tp_dtype)d);
        CHECK(tp_dtype_is_float((tp_dtype)d) == (d <= TP_BFLOAT16));
        CHECK(tp_dtype_is_int((tp_dtype)d) == (d >= TP_INT64 && d <= TP_UINT8));
    }
    CHECK_STR(tp_dtype_name(TP_DTYPE_COUNT), "?");
    CHECK(tp_dtype_size(TP_DTYPE_COUNT) == 0);
    static const struct { const char *alias; tp_dtype d; } aliases[] = {
        {"float", TP_FLOAT32}, {"double", TP_FLOAT64}, {"half", TP_FLOAT16}, {"long", TP_INT64},
        {"int", TP_INT32},     {"short", TP_INT16},    {"torch.half", TP_FLOAT16}, {"torch.long", TP_INT64}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        tp_dtype d = TP_DTYPE_COUNT;
        CHECK_OK(tp_dtype_from_name(aliases[i].alias, &d));
        CHECK_MSG(d == aliases[i].d, "%s", aliases[i].alias);
    }
    tp_dtype d;
    CHECK_STATUS(tp_dtype_from_name("complex64", &d), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("unknown dtype 'complex64'");
    CHECK_STATUS(tp_dtype_from_name("torch.", &d), TP_ERR_UNSUPPORTED);
    CHECK_STATUS(tp_dtype_from_name("Float32", &d), TP_ERR_UNSUPPORTED);
    CHECK_STATUS(tp_dtype_from_name(NULL, &d), TP_ERR_INVALID_ARG);
}

TEST(test_promote_types) {
    tp_tensor *table = load_fixture("tensor/promote_types");
    if (!table) return;
    CHECK(tp_tensor_ndim(table) == 2 && tp_tensor_size(table, 0) == 10 && tp_tensor_size(table, 1) == 10);
    int checked = 0;
    for (int a = 0; a < TP_DTYPE_COUNT; a++) {
        for (int b = 0; b < TP_DTYPE_COUNT; b++) {
            tp_dtype want = (tp_dtype)tp_tensor_get_i64(table, (int64_t[]){a, b});
            tp_dtype got = tp_promote_types((tp_dtype)a, (tp_dtype)b);
            CHECK_MSG(got == want, "promote_types(%s, %s) = %s, torch says %s", tp_dtype_name((tp_dtype)a),
                      tp_dtype_name((tp_dtype)b), tp_dtype_name(got), tp_dtype_name(want));
            checked++;
        }
    }
    CHECK(checked == 100);
    tp_tensor_free(table);
}

TEST(test_half_conversion_helpers) {
    /* a few exact bit patterns (IEEE 754 binary16 / bfloat16) */
    CHECK(tp__f32_to_f16(1.0f) == 0x3c00);
    CHECK(tp__f32_to_f16(-2.0f) == 0xc000);
    CHECK(tp__f32_to_f16(65504.0f) == 0x7bff);
    CHECK(tp__f32_to_f16(65520.0f) == 0x7c00);     /* tie at the top rounds to inf */
    CHECK(tp__f32_to_f16(5.9604645e-8f) == 0x0001); /* smallest subnormal */
    CHECK(tp__f32_to_f16(2.9802322e-8f) == 0x0000); /* half of it: tie to even */
    CHECK(tp__f32_to_f16(-0.0f) == 0x8000);
    CHECK(tp__f16_to_f32(0x0001) == 5.9604645e-8f);
    CHECK(tp__f16_to_f32(0x03ff) == 6.0975552e-5f);
    CHECK(isinf(tp__f16_to_f32(0xfc00)) && tp__f16_to_f32(0xfc00) < 0);
    CHECK(isnan(tp__f16_to_f32(0x7e00)));
    CHECK(tp__f32_to_bf16(1.0f) == 0x3f80);
    CHECK(tp__f32_to_bf16(1.00390625f) == 0x3f80); /* 1 + 2^-8: tie to even */
    CHECK(tp__f32_to_bf16(1.01171875f) == 0x3f82); /* 1 + 3*2^-8: tie up */
    CHECK(isnan(tp__bf16_to_f32(tp__f32_to_bf16(NAN))));
    CHECK(tp__bf16_to_f32(0x4049) == 3.140625f);
    /* every float16 survives a round trip through float32 */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = tp__f16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        if (tp__f32_to_f16(f) != h) bad++;
    }
    CHECK_MSG(bad == 0, "%d float16 values do not round-trip", bad);
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = tp__bf16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        if (tp__f32_to_bf16(f) != h) bad++;
    }
    CHECK_MSG(bad == 0, "%d bfloat16 values do not round-trip", bad);
}

/* ---- creation and inspection ------------------------------------------- */

TEST(test_create_all_dtypes_and_ranks) {
    for (int d = 0; d < TP_DTYPE_COUNT; d++) {
        for (int ndim = 0; ndim <= TP_MAX_DIMS; ndim++) {
            int64_t sizes[TP_MAX_DIMS];
            for (int i = 0; i < ndim; i++) sizes[i] = (i % 3 == 1) ? 2 : 1;
            tp_tensor *t = NULL, *z = NULL;
            CHECK_OK(tp_tensor_empty((tp_dtype)d, ndim, sizes, &t));
            CHECK_OK(tp_tensor_zeros((tp_dtype)d, ndim, sizes, &z));
            if (!t || !z) {
                tp_tensor_free(t);
                tp_tensor_free(z);
                continue;
            }
            int64_t numel = 1;
            for (int i = 0; i < ndim; i++) numel *= sizes[i];
            CHECK(tp_tensor_dtype(t) == (tp_dtype)d && tp_tensor_ndim(t) == ndim);
            CHECK(tp_tensor_numel(t) == numel && tp_tensor_offset(t) == 0);
            CHECK(tp_tensor_is_contiguous(t) && !tp_tensor_is_meta(t));
            CHECK(((uintptr_t)tp_tensor_data(t) % 64) == 0);
            int64_t expect_stride = 1;
            for (int i = ndim - 1; i >= 0; i--) {
                CHECK(tp_tensor_sizes(t)[i] == sizes[i]);
                CHECK(tp_tensor_strides(t)[i] == expect_stride);
                expect_stride *= sizes[i];
            }
            bool zero = true;
            const unsigned char *p = tp_tensor_data(z);
            for (size_t i = 0; i < (size_t)numel * tp_dtype_size((tp_dtype)d); i++) zero = zero && p[i] == 0;
            CHECK(zero);
            CHECK(!tp_tensor_shares_storage(t, z));
            CHECK(tp_tensor_shares_storage(t, t));
            tp_tensor_free(t);
            tp_tensor_free(z);
        }
    }
}

TEST(test_create_errors) {
    tp_tensor *t = NULL;
    int64_t sizes[TP_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK_STATUS(tp_tensor_empty(TP_FLOAT32, TP_MAX_DIMS + 1, sizes, &t), TP_ERR_SHAPE);
    CHECK_ERR_CONTAINS("rank 13 not supported");
    CHECK_STATUS(tp_tensor_empty(TP_FLOAT32, -1, sizes, &t), TP_ERR_SHAPE);
    CHECK_STATUS(tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){2, -3}, &t), TP_ERR_SHAPE);
    CHECK_ERR_CONTAINS("negative size -3 at dim 1");
    CHECK_STATUS(tp_tensor_empty(TP_INT8, 3, (int64_t[]){1LL << 40, 1LL << 40, 1LL << 40}, &t), TP_ERR_SHAPE);
    CHECK_ERR_CONTAINS("overflows");
    CHECK_STATUS(tp_tensor_empty(TP_FLOAT64, 1, (int64_t[]){1LL << 62}, &t), TP_ERR_NOMEM);
    CHECK_ERR_CONTAINS("overflows");
    CHECK_STATUS(tp_tensor_empty((tp_dtype)TP_DTYPE_COUNT, 0, NULL, &t), TP_ERR_TYPE);
    CHECK_STATUS(tp_tensor_empty((tp_dtype)-1, 0, NULL, &t), TP_ERR_TYPE);
    CHECK_STATUS(tp_tensor_empty(TP_FLOAT32, 2, NULL, &t), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){2}, NULL, &t), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp_tensor_meta(TP_FLOAT32, 1, (int64_t[]){-1}, &t), TP_ERR_SHAPE);
    CHECK_STATUS(tp_tensor_meta(TP_BOOL, 1, NULL, &t), TP_ERR_INVALID_ARG);
    /* from_data of an empty tensor does not need data */
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 2, (int64_t[]){0, 5}, NULL, &t));
    tp_tensor_free(t);
}

TEST(test_from_data_and_getters) {
    int16_t vals[6] = {1, -2, 3, -4, 5, 32767};
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_from_data(TP_INT16, 2, (int64_t[]){2, 3}, vals, &t));
    if (!t) return;
    vals[0] = 99; /* a copy: not visible */
    CHECK(tp_tensor_get_i64(t, (int64_t[]){0, 0}) == 1);
    CHECK(tp_tensor_get_i64(t, (int64_t[]){1, 2}) == 32767);
    CHECK(tp_tensor_get_f64(t, (int64_t[]){0, 1}) == -2.0);
    CHECK(tp_tensor_item_f64(t, 4) == 5.0);
    CHECK(tp_tensor_size(t, 0) == 2 && tp_tensor_size(t, -1) == 3 && tp_tensor_size(t, -2) == 2);
    CHECK(tp_tensor_size(t, 2) == -1 && tp_tensor_size(t, -3) == -1);
    tp_tensor *tt = NULL;
    CHECK_OK(tp_tensor_transpose(t, 0, 1, &tt));
    CHECK(tp_tensor_item_f64(tt, 1) == -4.0); /* C order of the view: [[1,-4],[-2,5],[3,32767]] */
    CHECK(tp_tensor_item_f64(tt, 4) == 3.0);
    CHECK(tp_tensor_get_i64(tt, (int64_t[]){2, 1}) == 32767);
    tp_tensor_free(tt);
    tp_tensor_free(t);
}

TEST(test_scalar_and_meta) {
    static const struct { tp_dtype d; double in, out; } cases[] = {
        {TP_FLOAT32, 2.5, 2.5},  {TP_FLOAT64, -1e300, -1e300}, {TP_FLOAT16, 1.0009765625, 1.0009765625},
        {TP_BFLOAT16, 3.0, 3.0}, {TP_INT64, -2.7, -2.0},       {TP_INT32, 2.7, 2.0},
        {TP_INT16, -0.5, 0.0},   {TP_INT8, 127.9, 127.0},      {TP_UINT8, 255.0, 255.0},
        {TP_BOOL, 0.5, 1.0},     {TP_BOOL, 0.0, 0.0},          {TP_BOOL, NAN, 1.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tp_tensor *t = NULL;
        CHECK_OK(tp_tensor_scalar(cases[i].d, cases[i].in, &t));
        if (!t) continue;
        CHECK(tp_tensor_ndim(t) == 0 && tp_tensor_numel(t) == 1 && tp_tensor_is_contiguous(t));
        CHECK_MSG(tp_tensor_get_f64(t, NULL) == cases[i].out, "scalar %s(%g) = %g", tp_dtype_name(cases[i].d),
                  cases[i].in, tp_tensor_get_f64(t, NULL));
        tp_tensor_free(t);
    }
    tp_tensor *m = NULL, *v = NULL;
    CHECK_OK(tp_tensor_meta(TP_FLOAT16, 3, (int64_t[]){2, 0, 4}, &m));
    if (!m) return;
    CHECK(tp_tensor_is_meta(m) && tp_tensor_data(m) == NULL && tp_tensor_numel(m) == 0);
    CHECK(tp_tensor_strides(m)[0] == 4 && tp_tensor_strides(m)[1] == 4 && tp_tensor_strides(m)[2] == 1);
    CHECK(!tp_tensor_shares_storage(m, m)); /* no storage to share */
    /* views of meta tensors are meta; copies are refused */
    CHECK_OK(tp_tensor_permute(m, (int64_t[]){2, 0, 1}, &v));
    CHECK(v && tp_tensor_is_meta(v) && tp_tensor_size(v, 0) == 4);
    tp_tensor_free(v);
    tp_tensor *c = NULL;
    CHECK_STATUS(tp_tensor_clone(m, &c), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp_tensor_fill(m, 1.0), TP_ERR_INVALID_ARG);
    tp_tensor_free(m);
}

TEST(test_refcount) {
    tp_tensor *t = NULL, *v = NULL;
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 1, (int64_t[]){4}, &t));
    if (!t) return;
    CHECK(tp_tensor_retain(t) == t);
    CHECK(tp_tensor_retain(NULL) == NULL);
    tp_tensor_free(t); /* back to one reference: still usable */
    CHECK(tp_tensor_numel(t) == 4);
    CHECK_OK(tp_tensor_slice(t, 0, 1, 3, 1, &v));
    tp_tensor_free(t); /* the view keeps the storage alive */
    if (v) {
        float *p = tp_tensor_data(v);
        p[0] = 5.0f; /* ASan: must not be freed */
        CHECK(tp_tensor_item_f64(v, 0) == 5.0);
    }
    tp_tensor_free(v);
    tp_tensor_free(NULL);
}

/* ---- borrowed storage -------------------------------------------------- */

typedef struct {
    int calls;
    void *last;
} release_log;

static void log_release(void *ctx, void *data) {
    release_log *log = ctx;
    log->calls++;
    log->last = data;
}

TEST(test_borrow_release_once) {
    float buf[12];
    for (int i = 0; i < 12; i++) buf[i] = (float)i;
    release_log log = {0, NULL};
    tp_tensor *t = NULL, *v1 = NULL, *v2 = NULL, *v3 = NULL;
    CHECK_OK(tp_tensor_borrow(TP_FLOAT32, 2, (int64_t[]){3, 4}, NULL, 0, buf, sizeof buf, log_release, &log, &t));
    if (!t) return;
    CHECK(tp_tensor_data(t) == buf && tp_tensor_is_contiguous(t));
    CHECK_OK(tp_tensor_transpose(t, 0, 1, &v1));
    CHECK_OK(tp_tensor_select(v1, 0, 2, &v2));
    CHECK_OK(tp_tensor_reshape(v1, 1, (int64_t[]){-1}, &v3)); /* a copy: own storage */
    CHECK(tp_tensor_shares_storage(t, v2) && !tp_tensor_shares_storage(t, v3));
    /* writes through the borrowed view reach the caller's buffer */
    CHECK_OK(tp_tensor_fill(v2, -1.0));
    CHECK(buf[2] == -1.0f && buf[6] == -1.0f && buf[10] == -1.0f && buf[3] == 3.0f);
    tp_tensor_free(t);
    tp_tensor_free(v1);
    tp_tensor_free(v3);
    CHECK(log.calls == 0);
    tp_tensor_retain(v2);
    tp_tensor_free(v2);
    CHECK(log.calls == 0);
    tp_tensor_free(v2); /* the last view */
    CHECK(log.calls == 1 && log.last == buf);
}

TEST(test_borrow_strided) {
    int32_t buf[20];
    for (int i = 0; i < 20; i++) buf[i] = i;
    release_log log = {0, NULL};
    tp_tensor *t = NULL, *c = NULL;
    /* a 3x2 view with strides (5, 2) starting at element 3 */
    CHECK_OK(tp_tensor_borrow(TP_INT32, 2, (int64_t[]){3, 2}, (int64_t[]){5, 2}, 3, buf, sizeof buf, log_release,
                              &log, &t));
    if (!t) return;
    CHECK(!tp_tensor_is_contiguous(t) && tp_tensor_offset(t) == 3);
    CHECK(tp_tensor_data(t) == &buf[3]);
    CHECK_OK(tp_tensor_contiguous(t, &c));
    static const int32_t want[6] = {3, 5, 8, 10, 13, 15};
    for (int i = 0; c && i < 6; i++) CHECK(((int32_t *)tp_tensor_data(c))[i] == want[i]);
    tp_tensor_free(c);
    tp_tensor_free(t);
    CHECK(log.calls == 1);
    /* no release callback: the caller keeps the buffer */
    CHECK_OK(tp_tensor_borrow(TP_INT32, 1, (int64_t[]){20}, NULL, 0, buf, sizeof buf, NULL, NULL, &t));
    tp_tensor_free(t);
    /* an empty view of NULL data is fine */
    CHECK_OK(tp_tensor_borrow(TP_INT32, 1, (int64_t[]){0}, NULL, 0, NULL, 0, NULL, NULL, &t));
    tp_tensor_free(t);
}

TEST(test_borrow_errors) {
    int32_t buf[8] = {0};
    release_log log = {0, NULL};
    tp_tensor *t = NULL;
    CHECK_STATUS(tp_tensor_borrow(TP_INT32, 1, (int64_t[]){9}, NULL, 0, buf, sizeof buf, log_release, &log, &t),
                 TP_ERR_SHAPE);
    CHECK_ERR_CONTAINS("beyond storage of 32 bytes");
    /* elements 1, 3, 5, 7: the last one ends exactly at byte 32 */
    CHECK_OK(tp_tensor_borrow(TP_INT32, 1, (int64_t[]){4}, (int64_t[]){2}, 1, buf, sizeof buf, NULL, NULL, &t));
    tp_tensor_free(t);
    CHECK_STATUS(tp_tensor_borrow(TP_INT32, 1, (int64_t[]){4}, (int64_t[]){2}, 1, buf, sizeof buf - 1, log_release,
                                  &log, &t),
                 TP_ERR_SHAPE);
    CHECK_STATUS(tp_tensor_borrow(TP_INT32, 1, (int64_t[]){2}, NULL, -1, buf, sizeof buf, log_release, &log, &t),
                 TP_ERR_SHAPE);
    CHECK_ERR_CONTAINS("before the start of storage");
    CHECK_STATUS(tp_tensor_borrow(TP_INT32, 1, (int64_t[]){2}, (int64_t[]){INT64_MAX}, 0, buf, sizeof buf, log_release,
                                  &log, &t),
                 TP_ERR_SHAPE);
    CHECK_STATUS(tp_tensor_borrow(TP_INT32, 1, (int64_t[]){2}, NULL, 0, NULL, 8, log_release, &log, &t),
                 TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp_tensor_borrow(TP_DTYPE_COUNT, 1, (int64_t[]){2}, NULL, 0, buf, 8, log_release, &log, &t),
                 TP_ERR_TYPE);
    CHECK(log.calls == 0); /* a failed borrow leaves the buffer to the caller */
}

/* ---- views (torch fixtures) -------------------------------------------- */

static tp_status apply_view_op(tp_tensor *x, json_t *op, tp_tensor **out) {
    const char *name = json_string_value(json_array_get(op, 0));
    json_t *a1 = json_array_get(op, 1), *a2 = json_array_get(op, 2), *a3 = json_array_get(op, 3),
           *a4 = json_array_get(op, 4);
    int64_t v[TP_MAX_DIMS], w[TP_MAX_DIMS];
    int n = 0, m = 0;
    if (!name) return tp_error(TP_ERR_INTERNAL, "bad op in views.json");
    if (!strcmp(name, "view") && json_ints(a1, v, &n)) return tp_tensor_view(x, n, v, out);
    if (!strcmp(name, "reshape") && json_ints(a1, v, &n)) return tp_tensor_reshape(x, n, v, out);
    if (!strcmp(name, "permute") && json_ints(a1, v, &n)) {
        if (n != tp_tensor_ndim(x)) return tp_error(TP_ERR_INTERNAL, "permute: wrong count in fixture");
        return tp_tensor_permute(x, v, out);
    }
    if (!strcmp(name, "transpose"))
        return tp_tensor_transpose(x, json_integer_value(a1), json_integer_value(a2), out);
    if (!strcmp(name, "expand") && json_ints(a1, v, &n)) return tp_tensor_expand(x, n, v, out);
    if (!strcmp(name, "slice"))
        return tp_tensor_slice(x, json_integer_value(a1), json_integer_value(a2), json_integer_value(a3),
                               json_integer_value(a4), out);
    if (!strcmp(name, "select")) return tp_tensor_select(x, json_integer_value(a1), json_integer_value(a2), out);
    if (!strcmp(name, "narrow"))
        return tp_tensor_narrow(x, json_integer_value(a1), json_integer_value(a2), json_integer_value(a3), out);
    if (!strcmp(name, "squeeze"))
        return tp_tensor_squeeze(x, json_is_null(a1) ? TP_ALL_DIMS : json_integer_value(a1), out);
    if (!strcmp(name, "unsqueeze")) return tp_tensor_unsqueeze(x, json_integer_value(a1), out);
    if (!strcmp(name, "as_strided") && json_ints(a1, v, &n) && json_ints(a2, w, &m) && n == m)
        return tp_tensor_as_strided(x, n, v, w, json_integer_value(a3), out);
    if (!strcmp(name, "contiguous")) return tp_tensor_contiguous(x, out);
    return tp_error(TP_ERR_INTERNAL, "unknown op '%s' in views.json", name);
}

TEST(test_views_match_torch) {
    json_t *root = load_manifest(FIX "views.json");
    if (!root) return;
    size_t i;
    json_t *c;
    int n_cases = 0, n_errors = 0;
    json_array_foreach(json_object_get(root, "cases"), i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        int64_t shape[TP_MAX_DIMS];
        int nd = 0;
        json_ints(json_object_get(c, "shape"), shape, &nd);
        tp_tensor *base = arange_f32(nd, shape), *x = tp_tensor_retain(base);
        tp_status st = TP_OK;
        size_t k;
        json_t *op;
        json_array_foreach(json_object_get(c, "ops"), k, op) {
            tp_tensor *y = NULL;
            st = apply_view_op(x, op, &y);
            if (st != TP_OK) break;
            tp_tensor_free(x);
            x = y;
        }
        const char *err = json_string_value(json_object_get(c, "error"));
        n_cases++;
        if (err) {
            n_errors++;
            const char *msg = json_string_value(json_object_get(c, "message"));
            CHECK_MSG(st != TP_OK && strcmp(tp_status_str(st), err) == 0, "%s: returned %s, want %s (%s)", name,
                      tp_status_str(st), err, tp_last_error());
            CHECK_MSG(st == TP_OK || strstr(tp_last_error(), msg), "%s: message \"%s\" lacks \"%s\"", name,
                      tp_last_error(), msg);
        } else if (st != TP_OK) {
            CHECK_MSG(false, "%s: returned %s: %s", name, tp_status_str(st), tp_last_error());
        } else {
            int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
            int ns = 0, nt = 0;
            json_ints(json_object_get(c, "sizes"), sizes, &ns);
            json_ints(json_object_get(c, "strides"), strides, &nt);
            char b1[128], b2[128];
            CHECK_MSG(tp_tensor_ndim(x) == ns && !memcmp(tp_tensor_sizes(x), sizes, (size_t)ns * sizeof *sizes),
                      "%s: sizes %s, torch %s", name, tp__shape_str(tp_tensor_ndim(x), tp_tensor_sizes(x), b1, 128),
                      tp__shape_str(ns, sizes, b2, 128));
            CHECK_MSG(tp_tensor_ndim(x) == nt && !memcmp(tp_tensor_strides(x), strides, (size_t)nt * sizeof *strides),
                      "%s: strides %s, torch %s", name,
                      tp__shape_str(tp_tensor_ndim(x), tp_tensor_strides(x), b1, 128), tp__shape_str(nt, strides, b2, 128));
            int64_t offset = json_integer_value(json_object_get(c, "offset"));
            CHECK_MSG(tp_tensor_offset(x) == offset, "%s: offset %" PRId64 ", torch %" PRId64, name,
                      tp_tensor_offset(x), offset);
            bool shares = json_is_true(json_object_get(c, "shares"));
            CHECK_MSG(tp_tensor_shares_storage(x, base) == shares, "%s: shares storage %d, torch %d", name,
                      tp_tensor_shares_storage(x, base), shares);
            json_t *vals = json_object_get(c, "values");
            CHECK_MSG((int64_t)json_array_size(vals) == tp_tensor_numel(x), "%s: numel", name);
            for (size_t j = 0; j < json_array_size(vals) && (int64_t)j < tp_tensor_numel(x); j++) {
                double want = json_number_value(json_array_get(vals, j));
                double got = tp_tensor_item_f64(x, (int64_t)j);
                if (got != want) {
                    CHECK_MSG(got == want, "%s: element %zu = %g, torch %g", name, j, got, want);
                    break;
                }
            }
        }
        tp_tensor_free(x);
        tp_tensor_free(base);
    }
    CHECK(n_cases >= 60 && n_errors >= 20);
    json_decref(root);
}

TEST(test_views_write_through) {
    tp_tensor *base = arange_f32(2, (int64_t[]){3, 4});
    tp_tensor *row = NULL, *col = NULL, *cols = NULL, *ex = NULL, *re = NULL, *cp = NULL;
    if (!base) return;
    CHECK_OK(tp_tensor_select(base, 0, -1, &row));   /* last row: 8 9 10 11 */
    CHECK_OK(tp_tensor_select(base, 1, 1, &col));    /* column 1: 1 5 9 */
    CHECK_OK(tp_tensor_slice(base, 1, 0, 4, 2, &cols)); /* columns 0, 2 */
    CHECK_OK(tp_tensor_fill(row, 100.0));
    CHECK(col && tp_tensor_item_f64(col, 2) == 100.0 && tp_tensor_item_f64(col, 1) == 5.0);
    CHECK_OK(tp_tensor_fill(cols, -1.0));
    const float *p = tp_tensor_data(base);
    static const float want[12] = {-1, 1, -1, 3, -1, 5, -1, 7, -1, 100, -1, 100};
    for (int i = 0; i < 12; i++) CHECK_MSG(p[i] == want[i], "base[%d] = %g", i, p[i]);
    /* a reshape that can view shares; one that must copy does not */
    CHECK_OK(tp_tensor_reshape(base, 2, (int64_t[]){2, 6}, &re));
    CHECK(re && tp_tensor_shares_storage(re, base));
    tp_tensor_free(re);
    CHECK_OK(tp_tensor_reshape(cols, 1, (int64_t[]){6}, &re)); /* evenly spaced: a view, stride 2 */
    CHECK(re && tp_tensor_shares_storage(re, base) && tp_tensor_strides(re)[0] == 2);
    tp_tensor_free(re);
    tp_tensor *first3 = NULL;
    CHECK_OK(tp_tensor_slice(base, 1, 0, 3, 1, &first3)); /* columns 0-2: rows not mergeable */
    CHECK_OK(tp_tensor_reshape(first3, 1, (int64_t[]){9}, &re));
    tp_tensor_free(first3);
    CHECK(re && !tp_tensor_shares_storage(re, base) && tp_tensor_is_contiguous(re));
    CHECK(re && tp_tensor_item_f64(re, 3) == -1.0 && tp_tensor_item_f64(re, 4) == 5.0);
    CHECK_OK(tp_tensor_fill(re, 7.0));
    CHECK(p[0] == -1.0f);
    /* expand: stride 0, writes land on the one element */
    CHECK_OK(tp_tensor_unsqueeze(col, 1, &cp));
    CHECK_OK(tp_tensor_expand(cp, 2, (int64_t[]){3, 5}, &ex));
    CHECK(ex && tp_tensor_strides(ex)[1] == 0 && tp_tensor_shares_storage(ex, base));
    /* contiguous() of a contiguous tensor is the tensor itself */
    tp_tensor *same = NULL;
    CHECK_OK(tp_tensor_contiguous(base, &same));
    CHECK(same == base);
    tp_tensor_free(same);
    tp_tensor *clone = NULL;
    CHECK_OK(tp_tensor_clone(base, &clone));
    CHECK(clone && clone != base && !tp_tensor_shares_storage(clone, base));
    CHECK_CLOSE(clone, base, 0, 0);
    tp_tensor_free(clone);
    tp_tensor_free(ex);
    tp_tensor_free(cp);
    tp_tensor_free(re);
    tp_tensor_free(cols);
    tp_tensor_free(col);
    tp_tensor_free(row);
    tp_tensor_free(base);
}

/* Steps too large for stride * step: numpy gives one element (torch 1.13
 * overflows to an empty slice along the last dim); no signed overflow. */
TEST(test_slice_huge_step) {
    tp_tensor *t = arange_f32(2, (int64_t[]){3, 10}), *a = NULL, *b = NULL;
    if (!t) return;
    CHECK_OK(tp_tensor_slice(t, 1, 2, INT64_MAX, INT64_MAX, &a)); /* numpy a[:, 2::2**63-1]: shape (3, 1) */
    CHECK(a && tp_tensor_size(a, 0) == 3 && tp_tensor_size(a, 1) == 1);
    CHECK(a && tp_tensor_item_f64(a, 0) == 2.0 && tp_tensor_item_f64(a, 2) == 22.0);
    CHECK_OK(tp_tensor_slice(t, 0, 1, INT64_MAX, INT64_MAX, &b)); /* a[1::2**63-1]: shape (1, 10) */
    CHECK(b && tp_tensor_size(b, 0) == 1 && tp_tensor_size(b, 1) == 10 && tp_tensor_item_f64(b, 0) == 10.0);
    tp_tensor_free(a);
    tp_tensor_free(b);
    a = b = NULL;
    CHECK_OK(tp_tensor_slice(t, 0, INT64_MIN, INT64_MAX, 1, &a));
    CHECK(a && tp_tensor_size(a, 0) == 3);
    CHECK_OK(tp_tensor_slice(t, 1, INT64_MAX, INT64_MIN, 1, &b));
    CHECK(b && tp_tensor_size(b, 1) == 0);
    tp_tensor_free(a);
    tp_tensor_free(b);
    tp_tensor_free(t);
}

TEST(test_view_rank_limits) {
    int64_t sizes[TP_MAX_DIMS];
    for (int i = 0; i < TP_MAX_DIMS; i++) sizes[i] = 1;
    tp_tensor *t = NULL, *u = NULL;
    CHECK_OK(tp_tensor_zeros(TP_INT8, TP_MAX_DIMS, sizes, &t));
    if (!t) return;
    CHECK_STATUS(tp_tensor_unsqueeze(t, 0, &u), TP_ERR_SHAPE);
    CHECK_STATUS(tp_tensor_view(t, TP_MAX_DIMS + 1, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, &u),
                 TP_ERR_SHAPE);
    CHECK_STATUS(tp_tensor_expand(t, TP_MAX_DIMS + 1, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, &u),
                 TP_ERR_SHAPE);
    CHECK_OK(tp_tensor_squeeze(t, TP_ALL_DIMS, &u));
    CHECK(u && tp_tensor_ndim(u) == 0);
    tp_tensor_free(u);
    tp_tensor_free(t);
}

/* ---- copies and conversion --------------------------------------------- */

TEST(test_conversions_match_torch) {
    json_t *root = load_manifest(FIX "conversions.json");
    if (!root) return;
    size_t i;
    json_t *c;
    int n = 0;
    bool pairs[TP_DTYPE_COUNT][TP_DTYPE_COUNT] = {{false}};
    json_array_foreach(json_object_get(root, "cases"), i, c) {
        tp_dtype sd, dd;
        if (tp_dtype_from_name(json_string_value(json_object_get(c, "src_dtype")), &sd) != TP_OK ||
            tp_dtype_from_name(json_string_value(json_object_get(c, "dst_dtype")), &dd) != TP_OK) {
            CHECK_MSG(false, "bad case %zu", i);
            continue;
        }
        const char *src_file = json_string_value(json_object_get(c, "src"));
        const char *exp_file = json_string_value(json_object_get(c, "expect"));
        tp_tensor *src = load_as(src_file, sd), *want = load_as(exp_file, dd), *got = NULL;
        if (src && want) {
            char what[256];
            snprintf(what, sizeof what, "%s -> %s", src_file, tp_dtype_name(dd));
            CHECK_OK(tp_tensor_to(src, dd, &got));
            check_same_bits(what, got, want);
            tp_tensor_free(got);
            got = NULL;
            /* the same through copy_ from a strided source into a strided
             * destination */
            int64_t n2 = 2 * tp_tensor_numel(src);
            tp_tensor *sbuf = NULL, *sview = NULL, *dbuf = NULL, *dview = NULL;
            CHECK_OK(tp_tensor_zeros(sd, 1, &n2, &sbuf));
            CHECK_OK(tp_tensor_zeros(dd, 1, &n2, &dbuf));
            if (sbuf && dbuf) {
                CHECK_OK(tp_tensor_slice(sbuf, 0, 1, n2, 2, &sview));
                CHECK_OK(tp_tensor_slice(dbuf, 0, 0, n2, 2, &dview));
                CHECK_OK(tp_tensor_copy_(sview, src));
                CHECK_OK(tp_tensor_copy_(dview, sview));
                snprintf(what, sizeof what, "%s -> %s (strided copy_)", src_file, tp_dtype_name(dd));
                check_same_bits(what, dview, want);
            }
            tp_tensor_free(sview);
            tp_tensor_free(dview);
            tp_tensor_free(sbuf);
            tp_tensor_free(dbuf);
            pairs[sd][dd] = true;
            n++;
        }
        tp_tensor_free(src);
        tp_tensor_free(want);
    }
    /* every pair of dtypes is covered by at least one case */
    for (int a = 0; a < TP_DTYPE_COUNT; a++)
        for (int b = 0; b < TP_DTYPE_COUNT; b++)
            if (a != b)
                CHECK_MSG(pairs[a][b], "no case %s -> %s",
                          tp_dtype_name((tp_dtype)a), tp_dtype_name((tp_dtype)b));
    CHECK(n >= 80);
    json_decref(root);
}

TEST(test_copy_broadcast_and_errors) {
    tp_tensor *dst = NULL, *src = NULL, *bad = NULL;
    CHECK_OK(tp_tensor_zeros(TP_INT32, 2, (int64_t[]){2, 3}, &dst));
    src = arange_f32(1, (int64_t[]){3});
    if (!dst || !src) goto done;
    ((float *)tp_tensor_data(src))[1] = -2.75f;
    CHECK_OK(tp_tensor_copy_(dst, src)); /* [0, -2.75, 2] broadcast over rows, truncated */
    static const int32_t want[6] = {0, -2, 2, 0, -2, 2};
    for (int i = 0; i < 6; i++) CHECK(((int32_t *)tp_tensor_data(dst))[i] == want[i]);
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){3, 2}, &bad));
    CHECK_STATUS(tp_tensor_copy_(dst, bad), TP_ERR_SHAPE);
    CHECK_ERR_CONTAINS("[3, 2]");
    tp_tensor_free(bad);
    bad = NULL;
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 3, (int64_t[]){1, 2, 3}, &bad));
    CHECK_STATUS(tp_tensor_copy_(dst, bad), TP_ERR_SHAPE); /* src may not add dims */
    CHECK_ERR_CONTAINS("cannot be broadcast to destination shape [2, 3]");
    tp_tensor_free(bad);
    bad = NULL;
    CHECK_OK(tp_tensor_meta(TP_FLOAT32, 1, (int64_t[]){3}, &bad));
    CHECK_STATUS(tp_tensor_copy_(dst, bad), TP_ERR_INVALID_ARG);
done:
    tp_tensor_free(bad);
    tp_tensor_free(src);
    tp_tensor_free(dst);
}

TEST(test_copy_overlapping) {
    /* numpy: a = arange(8); a[1:] = a[:-1].copy() -> 0 0 1 2 3 4 5 6 */
    tp_tensor *a = arange_f32(1, (int64_t[]){8}), *lo = NULL, *hi = NULL;
    if (!a) return;
    CHECK_OK(tp_tensor_slice(a, 0, 1, 8, 1, &hi));
    CHECK_OK(tp_tensor_slice(a, 0, 0, 7, 1, &lo));
    CHECK_OK(tp_tensor_copy_(hi, lo));
    static const float want[8] = {0, 0, 1, 2, 3, 4, 5, 6};
    for (int i = 0; i < 8; i++) CHECK(((float *)tp_tensor_data(a))[i] == want[i]);
    /* in-place transpose of a square matrix through views */
    tp_tensor *m = arange_f32(2, (int64_t[]){3, 3}), *mt = NULL;
    if (m) {
        CHECK_OK(tp_tensor_transpose(m, 0, 1, &mt));
        CHECK_OK(tp_tensor_copy_(m, mt));
        static const float wt[9] = {0, 3, 6, 1, 4, 7, 2, 5, 8};
        for (int i = 0; i < 9; i++) CHECK(((float *)tp_tensor_data(m))[i] == wt[i]);
    }
    tp_tensor_free(mt);
    tp_tensor_free(m);
    tp_tensor_free(lo);
    tp_tensor_free(hi);
    tp_tensor_free(a);
}

/* Transposing copies (the source's last dim strided, another contiguous:
 * a permuted view made contiguous): every element lands where index
 * arithmetic says, for element sizes 1, 2, 4 and 8, odd sizes, 2-4 dims
 * with the contiguous dim anywhere, and a strided destination (a column
 * block of a wider tensor, as cat writes). */
TEST(test_copy_transposing) {
    static const tp_dtype dtypes[] = {TP_UINT8, TP_FLOAT16, TP_FLOAT32, TP_FLOAT64};
    static const struct {
        int nd;
        int64_t sizes[4]; /* of the contiguous base */
        int64_t perm[4];  /* the view copied: base permuted */
    } cases[] = {{2, {37, 19}, {1, 0}},          {2, {16, 32}, {1, 0}},        {3, {3, 17, 33}, {0, 2, 1}},
                 {3, {5, 7, 40}, {2, 0, 1}},     {4, {2, 3, 18, 5}, {0, 3, 1, 2}}, {3, {1, 2, 300}, {0, 2, 1}}};
    for (size_t di = 0; di < sizeof dtypes / sizeof dtypes[0]; di++)
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            const int nd = cases[ci].nd;
            const size_t es = tp_dtype_size(dtypes[di]);
            tp_tensor *base = NULL, *view = NULL, *dst = NULL, *wide = NULL, *cols = NULL;
            CHECK_OK(tp_tensor_empty(dtypes[di], nd, cases[ci].sizes, &base));
            if (!base) continue;
            unsigned char *bd = tp_tensor_data(base);
            for (int64_t i = 0; i < tp_tensor_numel(base) * (int64_t)es; i++) bd[i] = (unsigned char)(i * 7 + i / 251);
            CHECK_OK(tp_tensor_permute(base, cases[ci].perm, &view));
            int64_t vs[4], wsz[4];
            for (int k = 0; k < nd; k++) wsz[k] = vs[k] = tp_tensor_sizes(view)[k];
            wsz[nd - 1] += 3; /* a wider destination: write columns [1, 1 + n) */
            CHECK_OK(tp_tensor_empty(dtypes[di], nd, vs, &dst));
            CHECK_OK(tp_tensor_zeros(dtypes[di], nd, wsz, &wide));
            if (wide) CHECK_OK(tp_tensor_slice(wide, nd - 1, 1, 1 + vs[nd - 1], 1, &cols));
            if (view && dst && cols) {
                CHECK_OK(tp_tensor_copy_(dst, view));
                CHECK_OK(tp_tensor_copy_(cols, view));
                const unsigned char *dd = tp_tensor_data(dst), *wd = tp_tensor_data(wide);
                int bad = 0;
                int64_t idx[4] = {0, 0, 0, 0}, total = tp_tensor_numel(dst);
                for (int64_t e = 0; e < total; e++) {
                    int64_t src_off = 0, wide_off = 0;
                    for (int k = 0; k < nd; k++) {
                        src_off += idx[k] * tp_tensor_strides(view)[k];
                        wide_off = wide_off * wsz[k] + idx[k] + (k == nd - 1);
                    }
                    if (memcmp(dd + e * (int64_t)es, bd + src_off * (int64_t)es, es) != 0) bad++;
                    if (memcmp(wd + wide_off * (int64_t)es, bd + src_off * (int64_t)es, es) != 0) bad++;
                    for (int k = nd - 1; k >= 0 && ++idx[k] == vs[k]; k--) idx[k] = 0;
                }
                /* the destination's other columns stay zero */
                int64_t rows = tp_tensor_numel(wide) / wsz[nd - 1];
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t c = 0; c < wsz[nd - 1]; c++)
                        if (c == 0 || c > vs[nd - 1])
                            for (size_t b = 0; b < es; b++) bad += wd[(r * wsz[nd - 1] + c) * (int64_t)es + (int64_t)b] != 0;
                CHECK_MSG(bad == 0, "%s case %zu: %d wrong elements", tp_dtype_name(dtypes[di]), ci, bad);
            }
            tp_tensor_free(cols);
            tp_tensor_free(wide);
            tp_tensor_free(dst);
            tp_tensor_free(view);
            tp_tensor_free(base);
        }
}

/* copy_ between disjoint parts of one storage (an arena's tensors, a
 * tensor's halves) copies directly; parts whose byte ranges meet go
 * through a temporary (test_copy_overlapping). tp__tensors_may_overlap
 * answers by byte extents, strides included. */
TEST(test_copy_disjoint_same_storage) {
    tp_tensor *a = arange_f32(1, (int64_t[]){8}), *lo = NULL, *hi = NULL, *even = NULL, *odd = NULL;
    if (!a) return;
    CHECK_OK(tp_tensor_slice(a, 0, 0, 4, 1, &lo));
    CHECK_OK(tp_tensor_slice(a, 0, 4, 8, 1, &hi));
    CHECK_OK(tp_tensor_slice(a, 0, 0, 8, 2, &even)); /* bytes [0, 28) */
    CHECK_OK(tp_tensor_slice(a, 0, 1, 8, 2, &odd));  /* bytes [4, 32) */
    if (lo && hi && even && odd) {
        CHECK(!tp__tensors_may_overlap(lo, hi) && !tp__tensors_may_overlap(hi, lo));
        CHECK(tp__tensors_may_overlap(even, odd) && tp__tensors_may_overlap(lo, even));
        CHECK(tp__tensors_may_overlap(a, a));
        counting_state st = {0};
        tp_set_allocator(counting_alloc, &st);
        tp_status s = tp_tensor_copy_(hi, lo); /* a[4:8] = a[0:4] */
        tp_set_allocator(NULL, NULL);
        CHECK_OK(s);
        CHECK_MSG(st.allocs == 0, "copy_ between disjoint halves allocated %ld times", st.allocs);
        static const float want[8] = {0, 1, 2, 3, 0, 1, 2, 3};
        for (int i = 0; i < 8; i++) CHECK(((float *)tp_tensor_data(a))[i] == want[i]);
        /* interleaved (extents meet, elements do not): still right */
        CHECK_OK(tp_tensor_copy_(odd, even)); /* a[1::2] = a[0::2] -> 0 0 2 2 0 0 2 2 */
        static const float want2[8] = {0, 0, 2, 2, 0, 0, 2, 2};
        for (int i = 0; i < 8; i++) CHECK(((float *)tp_tensor_data(a))[i] == want2[i]);
    }
    /* an empty view overlaps nothing */
    tp_tensor *none = NULL;
    CHECK_OK(tp_tensor_slice(a, 0, 3, 3, 1, &none));
    if (none) CHECK(!tp__tensors_may_overlap(none, a));
    tp_tensor_free(none);
    tp_tensor_free(odd);
    tp_tensor_free(even);
    tp_tensor_free(hi);
    tp_tensor_free(lo);
    tp_tensor_free(a);
}

/* The reference kernels' scratch (alloc.c): while entered, blocks come
 * from it 64-byte aligned without the hook; realloc copies; free is a
 * no-op; what does not fit goes to the hook; `want` counts every request;
 * leaving restores the scratch entered before (nesting). */
TEST(test_scratch_blocks) {
    _Alignas(64) static char mem[1024];
    tp__scratch s = {.base = mem, .size = sizeof mem};
    counting_state st = {0};
    tp_set_allocator(counting_alloc, &st);
    tp__scratch *outer = tp__scratch_enter(&s);
    char *a = tp_malloc(10), *b = tp_calloc(3, 8);
    bool in_a = a >= mem && a < mem + sizeof mem, in_b = b >= mem && b < mem + sizeof mem;
    if (a) memcpy(a, "0123456789", 10);
    char *a2 = tp_realloc(a, 100); /* a new block holding a's bytes */
    bool copied = a2 && memcmp(a2, "0123456789", 10) == 0 && a2 != a;
    tp_free(b);                       /* no-op */
    char *big = tp_malloc(2000);      /* does not fit: the hook */
    long hook_allocs = st.allocs;
    size_t used = s.used, want = s.want;
    tp__scratch inner = {0};
    tp__scratch *prev = tp__scratch_enter(&inner); /* nested, without a block: the hook */
    char *c = tp_malloc(8);
    tp__scratch_leave(prev);
    char *d = tp_malloc(8); /* the outer scratch again */
    tp__scratch_leave(outer);
    char *e = tp_malloc(8); /* none entered: the hook */
    tp_free(c);
    tp_free(big);
    tp_free(e);
    tp_free(d);
    tp_set_allocator(NULL, NULL);
    CHECK(outer == NULL && prev == &s);
    CHECK(in_a && in_b && ((uintptr_t)a % 64) == 0 && ((uintptr_t)b % 64) == 0);
    CHECK(b && b[0] == 0 && b[23] == 0);
    CHECK(copied && a2 >= mem && a2 < mem + sizeof mem);
    CHECK(big && (big < mem || big >= mem + sizeof mem));
    CHECK_MSG(hook_allocs == 1, "%ld hook allocations while in the scratch (only the one that does not fit)",
              hook_allocs);
    /* 10 -> 64 + 64, 24 -> 64 + 64, 100 -> 64 + 128 (448 used), 2000 -> 64 + 2048 (asked, not served) */
    CHECK_MSG(used == 448 && want == 448 + 2112, "used %zu want %zu", used, want);
    CHECK(c && (c < mem || c >= mem + sizeof mem) && d >= mem && d < mem + sizeof mem);
    CHECK(e && (e < mem || e >= mem + sizeof mem));
    CHECK(st.allocs == 3 && st.frees == 3 && st.live_bytes == 0);
}

TEST(test_fill) {
    /* torch.full((2,), v, dtype=d) for float v: ints truncate toward zero,
     * bool is v != 0 */
    static const struct { tp_dtype d; double v, want; } cases[] = {
        {TP_INT64, -3.9, -3}, {TP_INT32, 3.9, 3},   {TP_UINT8, 255.5, 255}, {TP_INT8, -128.7, -128},
        {TP_BOOL, -0.1, 1},   {TP_BOOL, -0.0, 0},   {TP_FLOAT16, 0.1, 0.0999755859375},
        {TP_BFLOAT16, 0.1, 0.10009765625}, {TP_FLOAT32, 1e40, INFINITY}, {TP_FLOAT64, 0.1, 0.1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tp_tensor *t = NULL, *v = NULL;
        CHECK_OK(tp_tensor_zeros(cases[i].d, 2, (int64_t[]){3, 2}, &t));
        if (!t) continue;
        CHECK_OK(tp_tensor_select(t, 1, 0, &v));
        CHECK_OK(tp_tensor_fill(v, cases[i].v));
        for (int r = 0; r < 3; r++) {
            CHECK_MSG(tp_tensor_get_f64(t, (int64_t[]){r, 0}) == cases[i].want, "fill %s with %g: got %.17g",
                      tp_dtype_name(cases[i].d), cases[i].v, tp_tensor_get_f64(t, (int64_t[]){r, 0}));
            CHECK(tp_tensor_get_f64(t, (int64_t[]){r, 1}) == 0.0);
        }
        tp_tensor_free(v);
        tp_tensor_free(t);
    }
}

/* ---- comparison and printing ------------------------------------------- */

TEST(test_allclose) {
    float av[4] = {1.0f, 2.0f, NAN, INFINITY};
    double bv[4] = {1.0, 2.0 + 1e-6, NAN, INFINITY};
    tp_tensor *a = NULL, *b = NULL, *c = NULL, *i1 = NULL, *i2 = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){4}, av, &a));
    CHECK_OK(tp_tensor_from_data(TP_FLOAT64, 1, (int64_t[]){4}, bv, &b));
    if (!a || !b) goto done;
    char msg[128] = "";
    CHECK(tp_tensor_allclose(a, b, 1e-5, 0, msg, sizeof msg)); /* dtypes may differ */
    CHECK(!tp_tensor_allclose(a, b, 0, 1e-9, msg, sizeof msg));
    CHECK_MSG(strstr(msg, "element 1") != NULL, "msg: %s", msg);
    bv[3] = -INFINITY;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT64, 1, (int64_t[]){4}, bv, &c));
    CHECK(!tp_tensor_allclose(a, c, 1, 1, msg, sizeof msg)); /* inf vs -inf */
    CHECK(strstr(msg, "element 3") != NULL);
    tp_tensor_free(c);
    c = NULL;
    bv[3] = INFINITY;
    bv[2] = 0.0;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT64, 1, (int64_t[]){4}, bv, &c));
    CHECK(!tp_tensor_allclose(a, c, 1, 1, NULL, 0)); /* NaN vs number; msg may be NULL */
    tp_tensor_free(c);
    c = NULL;
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){2, 2}, &c));
    CHECK(!tp_tensor_allclose(a, c, 1, 1, msg, sizeof msg));
    CHECK_MSG(strstr(msg, "shape [4] != [2, 2]") != NULL, "msg: %s", msg);
    /* integers compare exactly, whatever the tolerance */
    int64_t x[2] = {INT64_MAX, 5}, y[2] = {INT64_MAX - 1, 5};
    CHECK_OK(tp_tensor_from_data(TP_INT64, 1, (int64_t[]){2}, x, &i1));
    CHECK_OK(tp_tensor_from_data(TP_INT64, 1, (int64_t[]){2}, y, &i2));
    CHECK(i1 && i2 && !tp_tensor_allclose(i1, i2, 1e-3, 10, msg, sizeof msg));
    CHECK(i1 && tp_tensor_allclose(i1, i1, 0, 0, msg, sizeof msg));
    /* a non-contiguous view against a contiguous copy */
    tp_tensor *t = NULL, *tc = NULL;
    CHECK_OK(tp_tensor_transpose(c, 0, 1, &t));
    CHECK_OK(tp_tensor_clone(t, &tc));
    CHECK(t && tc && tp_tensor_allclose(t, tc, 0, 0, msg, sizeof msg));
    tp_tensor_free(t);
    tp_tensor_free(tc);
done:
    tp_tensor_free(i1);
    tp_tensor_free(i2);
    tp_tensor_free(a);
    tp_tensor_free(b);
    tp_tensor_free(c);
}

TEST(test_print) {
    float fv[4] = {1.0f, 2.5f, -3.0f, 0.125f};
    int64_t iv[6] = {0, 1, 2, 3, 4, 5};
    uint8_t bv[3] = {1, 0, 1};
    tp_tensor *f = NULL, *i = NULL, *b = NULL, *s = NULL, *m = NULL, *e = NULL, *ft = NULL;
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 2, (int64_t[]){2, 2}, fv, &f));
    CHECK_OK(tp_tensor_from_data(TP_INT64, 2, (int64_t[]){2, 3}, iv, &i));
    CHECK_OK(tp_tensor_from_data(TP_BOOL, 1, (int64_t[]){3}, bv, &b));
    CHECK_OK(tp_tensor_scalar(TP_INT32, -7, &s));
    CHECK_OK(tp_tensor_meta(TP_FLOAT16, 2, (int64_t[]){2, 3}, &m));
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){0, 3}, &e));
    if (!f || !i || !b || !s || !m || !e) goto done;
    CHECK_OK(tp_tensor_transpose(f, 0, 1, &ft));
    char *out;
    out = print_to_string(f, 100);
    CHECK_STR(out, "tensor([[1, 2.5], [-3, 0.125]], size=[2, 2], dtype=float32)");
    free(out);
    out = print_to_string(ft, 100);
    CHECK_STR(out, "tensor([[1, -3], [2.5, 0.125]], size=[2, 2], dtype=float32)");
    free(out);
    out = print_to_string(i, 100);
    CHECK_STR(out, "tensor([[0, 1, 2], [3, 4, 5]], size=[2, 3], dtype=int64)");
    free(out);
    out = print_to_string(i, 4);
    CHECK_STR(out, "tensor([[0, 1, 2], [3, ...]], size=[2, 3], dtype=int64)");
    free(out);
    out = print_to_string(i, 0);
    CHECK_STR(out, "tensor([[...]], size=[2, 3], dtype=int64)");
    free(out);
    out = print_to_string(b, 100);
    CHECK_STR(out, "tensor([True, False, True], size=[3], dtype=bool)");
    free(out);
    out = print_to_string(s, 100);
    CHECK_STR(out, "tensor(-7, size=[], dtype=int32)");
    free(out);
    out = print_to_string(m, 100);
    CHECK_STR(out, "tensor(meta, size=[2, 3], dtype=float16)");
    free(out);
    out = print_to_string(e, 100);
    CHECK_STR(out, "tensor([[]], size=[0, 3], dtype=float32)");
    free(out);
done:
    tp_tensor_free(ft);
    tp_tensor_free(f);
    tp_tensor_free(i);
    tp_tensor_free(b);
    tp_tensor_free(s);
    tp_tensor_free(m);
    tp_tensor_free(e);
}

/* ---- threads ----------------------------------------------------------- */

typedef struct {
    tp_tensor *t;
    bool message_kept;
} thread_arg;

static void *retain_release_worker(void *p) {
    thread_arg *a = p;
    tp_error(TP_ERR_IO, "worker error");
    for (int i = 0; i < 20000; i++) {
        tp_tensor *r = tp_tensor_retain(a->t);
        tp_tensor *v = NULL;
        if (i % 100 == 0 && tp_tensor_slice(r, 0, 1, 3, 1, &v) == TP_OK) tp_tensor_free(v);
        tp_tensor_free(r);
    }
    a->message_kept = strcmp(tp_last_error(), "worker error") == 0;
    return NULL;
}

/* Tensors and storage are retained and released from several threads at
 * once; error messages are per thread. */
TEST(test_threads_refcount) {
    float buf[4] = {0};
    release_log log = {0, NULL};
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_borrow(TP_FLOAT32, 1, (int64_t[]){4}, NULL, 0, buf, sizeof buf, log_release, &log, &t));
    if (!t) return;
    tp_error(TP_ERR_SHAPE, "main error");
    enum { N = 4 };
    pthread_t th[N];
    thread_arg args[N];
    for (int i = 0; i < N; i++) {
        args[i] = (thread_arg){t, false};
        CHECK(pthread_create(&th[i], NULL, retain_release_worker, &args[i]) == 0);
    }
    for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) CHECK(args[i].message_kept);
    CHECK_STR(tp_last_error(), "main error");
    CHECK(log.calls == 0);
    tp_tensor_free(t);
    CHECK(log.calls == 1);
}

/* ---- allocation failures ----------------------------------------------- */

static tp_status op_create(void *ctx) {
    (void)ctx;
    tp_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;
    float data[6] = {1, 2, 3, 4, 5, 6};
    tp_status st;
    if ((st = tp_tensor_empty(TP_FLOAT32, 2, (int64_t[]){2, 3}, &a)) != TP_OK) goto out;
    if ((st = tp_tensor_zeros(TP_INT8, 1, (int64_t[]){5}, &b)) != TP_OK) goto out;
    if ((st = tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){6}, data, &c)) != TP_OK) goto out;
    if ((st = tp_tensor_scalar(TP_BFLOAT16, 1.5, &d)) != TP_OK) goto out;
    if ((st = tp_tensor_borrow(TP_FLOAT32, 1, (int64_t[]){6}, NULL, 0, data, sizeof data, NULL, NULL, &e)) != TP_OK)
        goto out;
    tp_tensor_free(e);
    e = NULL;
    st = tp_tensor_meta(TP_FLOAT32, 1, (int64_t[]){6}, &e);
out:
    tp_tensor_free(a);
    tp_tensor_free(b);
    tp_tensor_free(c);
    tp_tensor_free(d);
    tp_tensor_free(e);
    return st;
}

static tp_status op_reshape_copy(void *ctx) {
    tp_tensor *t = ctx, *r = NULL;
    tp_status st = tp_tensor_reshape(t, 1, (int64_t[]){-1}, &r);
    tp_tensor_free(r);
    return st;
}

static tp_status op_views_and_copies(void *ctx) {
    tp_tensor *t = ctx, *v[8] = {NULL};
    tp_status st;
    if ((st = tp_tensor_view(t, 2, (int64_t[]){4, 3}, &v[0])) != TP_OK) goto out;
    if ((st = tp_tensor_permute(v[0], (int64_t[]){1, 0}, &v[1])) != TP_OK) goto out;
    if ((st = tp_tensor_slice(v[1], 0, 0, 3, 2, &v[2])) != TP_OK) goto out;
    if ((st = tp_tensor_expand(v[2], 3, (int64_t[]){2, 2, 4}, &v[3])) != TP_OK) goto out;
    if ((st = tp_tensor_contiguous(v[3], &v[4])) != TP_OK) goto out;
    if ((st = tp_tensor_to(v[3], TP_FLOAT16, &v[5])) != TP_OK) goto out;
    if ((st = tp_tensor_copy_(v[1], t)) != TP_OK) goto out; /* overlapping: copies through a temporary */
    if ((st = tp_tensor_unsqueeze(v[5], 0, &v[6])) != TP_OK) goto out;
    st = tp_tensor_squeeze(v[6], TP_ALL_DIMS, &v[7]);
out:
    for (int i = 0; i < 8; i++) tp_tensor_free(v[i]);
    return st;
}

TEST(test_nomem_create) { check_alloc_failures("tensor creation", op_create, NULL); }

TEST(test_nomem_reshape_copy) {
    tp_tensor *t = arange_f32(2, (int64_t[]){3, 4}), *tt = NULL;
    if (!t) return;
    CHECK_OK(tp_tensor_transpose(t, 0, 1, &tt));
    if (tt) check_alloc_failures("reshape copy", op_reshape_copy, tt);
    tp_tensor_free(tt);
    tp_tensor_free(t);
}

TEST(test_nomem_views_and_copies) {
    tp_tensor *t = arange_f32(2, (int64_t[]){3, 4});
    if (!t) return;
    check_alloc_failures("views and copies", op_views_and_copies, t);
    tp_tensor_free(t);
}

TEST_MAIN(T(test_status_names), T(test_status_kind), T(test_error_messages), T(test_error_long_messages),
          T(test_alloc_basics), T(test_alloc_stream), T(test_alloc_hook_sees_sizes), T(test_dtype_names),
          T(test_promote_types),
          T(test_half_conversion_helpers), T(test_create_all_dtypes_and_ranks), T(test_create_errors),
          T(test_from_data_and_getters), T(test_scalar_and_meta), T(test_refcount), T(test_borrow_release_once),
          T(test_borrow_strided), T(test_borrow_errors), T(test_views_match_torch), T(test_views_write_through),
          T(test_slice_huge_step), T(test_view_rank_limits), T(test_threads_refcount), T(test_conversions_match_torch), T(test_copy_broadcast_and_errors),
          T(test_copy_overlapping), T(test_copy_transposing), T(test_copy_disjoint_same_storage), T(test_scratch_blocks), T(test_fill), T(test_allclose), T(test_print), T(test_nomem_create),
          T(test_nomem_reshape_copy), T(test_nomem_views_and_copies))
