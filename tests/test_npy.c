/*
 * test_npy.c - tests for the .npy reader and writer (npy.c).
 *
 * Well-formed files in fixtures/tensor/npy/ and broken ones in
 * fixtures/npy_malformed/ (with cases.json: the status and message each must
 * give) are written by tests/fixtures/gen_tensor.py with numpy. Our writer
 * must produce numpy's bytes exactly (np.save's header, padding and data).
 * Run from tests/.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fail_alloc.h"
#include "internal.h"
#include "test_util.h"

#define NPY_DIR "fixtures/tensor/npy/"
#define BAD_DIR "fixtures/npy_malformed/"
#define BE_DIR "fixtures/tensor/npy_big_endian/" /* gen_npy_big_endian.py */

/* The npy dtypes, in the names gen_tensor.py uses. */
static const struct {
    const char *name;
    tp_dtype dtype;
} npy_dtypes[] = {{"float32", TP_FLOAT32}, {"float64", TP_FLOAT64}, {"float16", TP_FLOAT16},
                  {"int64", TP_INT64},     {"int32", TP_INT32},     {"int16", TP_INT16},
                  {"int8", TP_INT8},       {"uint8", TP_UINT8},     {"bool", TP_BOOL}};
#define N_NPY_DTYPES (sizeof npy_dtypes / sizeof npy_dtypes[0])

/* Element i (C order) of gen_tensor.py's npy_values(), as numpy computes it:
 * floats (i - 2) * 0.5, ints i * 7 - 10 (wrapped to the type), uint8
 * i * 40, bool i % 3 == 0. */
static double expected_value(tp_dtype d, int64_t i) {
    switch (d) {
    case TP_FLOAT32:
    case TP_FLOAT64:
    case TP_FLOAT16: return (double)(i - 2) * 0.5;
    case TP_UINT8: return (double)(uint8_t)(i * 40);
    case TP_BOOL: return i % 3 == 0 ? 1.0 : 0.0;
    case TP_INT8: return (double)(int8_t)(i * 7 - 10);
    default: return (double)(i * 7 - 10);
    }
}

static bool read_file(const char *path, unsigned char **data, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc(n > 0 ? (size_t)n : 1);
    *size = (size_t)n;
    bool ok = *data && fread(*data, 1, *size, f) == *size;
    fclose(f);
    return ok;
}

/* Check dtype, shape and every value of a loaded array against the formula. */
static void check_values(const char *what, const tp_tensor *t, tp_dtype dtype, int ndim, const int64_t *shape) {
    if (!t) return;
    CHECK_MSG(tp_tensor_dtype(t) == dtype, "%s: dtype %s", what, tp_dtype_name(tp_tensor_dtype(t)));
    CHECK_MSG(tp_tensor_ndim(t) == ndim, "%s: rank %d", what, tp_tensor_ndim(t));
    if (tp_tensor_ndim(t) != ndim) return;
    for (int i = 0; i < ndim; i++) CHECK_MSG(tp_tensor_sizes(t)[i] == shape[i], "%s: size of dim %d", what, i);
    CHECK_MSG(tp_tensor_is_contiguous(t), "%s: not contiguous", what);
    for (int64_t i = 0; i < tp_tensor_numel(t); i++) {
        double got = tp_tensor_item_f64(t, i), want = expected_value(dtype, i);
        if (got != want) {
            CHECK_MSG(got == want, "%s: element %" PRId64 " = %g, want %g", what, i, got, want);
            break;
        }
    }
}

/* Save t and compare with the bytes of a numpy-written file. */
static void check_saves_as(const char *what, const tp_tensor *t, const char *numpy_file) {
    unsigned char *want = NULL;
    size_t want_size = 0;
    if (!read_file(numpy_file, &want, &want_size)) {
        CHECK_MSG(false, "%s: cannot read %s", what, numpy_file);
        free(want);
        return;
    }
    void *got = NULL;
    size_t got_size = 0;
    CHECK_OK(tp_npy_save_buffer(t, &got, &got_size));
    if (got) {
        size_t first = 0;
        while (first < got_size && first < want_size && ((unsigned char *)got)[first] == want[first]) first++;
        CHECK_MSG(got_size == want_size && first == got_size,
                  "%s: our bytes differ from numpy's %s (sizes %zu vs %zu, first difference at %zu)", what,
                  numpy_file, got_size, want_size, first);
    }
    tp_free(got);
    free(want);
}

/* ---- well-formed files ------------------------------------------------- */

TEST(test_load_versions_and_orders) {
    static const char *variants[] = {"v1_c", "v2_c", "v3_c", "v1_f", "v2_f"};
    int loaded = 0;
    for (size_t d = 0; d < N_NPY_DTYPES; d++) {
        for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
            char path[256];
            snprintf(path, sizeof path, NPY_DIR "%s_%s.npy", npy_dtypes[d].name, variants[v]);
            tp_tensor *t = NULL;
            CHECK_OK(tp_npy_load(path, &t));
            check_values(path, t, npy_dtypes[d].dtype, 2, (int64_t[]){2, 3});
            /* whatever the version and order, we write numpy's default file */
            char c_path[256];
            snprintf(c_path, sizeof c_path, NPY_DIR "%s_v1_c.npy", npy_dtypes[d].name);
            if (t) check_saves_as(path, t, c_path);
            loaded += t != NULL;
            tp_tensor_free(t);
        }
    }
    CHECK(loaded == 45);
}

TEST(test_load_shapes) {
    static const struct {
        const char *file;
        tp_dtype dtype;
        int ndim;
        int64_t shape[TP_MAX_DIMS];
        bool numpy_bytes; /* saving it back gives the same file */
    } cases[] = {
        {"float32_0d", TP_FLOAT32, 0, {0}, true},
        {"int64_0d", TP_INT64, 0, {0}, true},
        {"float32_empty", TP_FLOAT32, 1, {0}, true},
        {"int64_empty_2d", TP_INT64, 2, {0, 3}, true},
        {"bool_empty_3d", TP_BOOL, 3, {2, 0, 4}, true},
        {"float32_1d", TP_FLOAT32, 1, {7}, true},
        {"float64_4d", TP_FLOAT64, 4, {2, 1, 3, 2}, true},
        {"int32_3d_f", TP_INT32, 3, {2, 3, 4}, false},
        {"int16_40", TP_INT16, 1, {40}, true},
        {"uint8_wide", TP_UINT8, 2, {1, 6}, true},
        {"float32_aligned_header", TP_FLOAT32, 9, {2, 0, 100000000000000000, 1, 1, 1, 1, 1, 1}, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, NPY_DIR "%s.npy", cases[i].file);
        tp_tensor *t = NULL;
        CHECK_OK(tp_npy_load(path, &t));
        check_values(path, t, cases[i].dtype, cases[i].ndim, cases[i].shape);
        if (t && cases[i].numpy_bytes) check_saves_as(path, t, path);
        tp_tensor_free(t);
    }
}

/* Big-endian files ('>f4', '>i8', ...; C and Fortran order, 0-d) load with
 * the values converted to the host's order, and save back as numpy's
 * default little-endian file. */
TEST(test_load_big_endian) {
    static const struct {
        const char *name;
        tp_dtype dtype;
    } be[] = {{"float32", TP_FLOAT32}, {"float64", TP_FLOAT64}, {"float16", TP_FLOAT16},
              {"int64", TP_INT64},     {"int32", TP_INT32},     {"int16", TP_INT16}};
    int loaded = 0;
    for (size_t d = 0; d < sizeof be / sizeof be[0]; d++) {
        for (int f = 0; f < 2; f++) {
            char path[256], c_path[256];
            snprintf(path, sizeof path, BE_DIR "%s_be%s.npy", be[d].name, f ? "_f" : "");
            tp_tensor *t = NULL;
            CHECK_OK(tp_npy_load(path, &t));
            check_values(path, t, be[d].dtype, 2, (int64_t[]){2, 3});
            snprintf(c_path, sizeof c_path, NPY_DIR "%s_v1_c.npy", be[d].name);
            if (t) check_saves_as(path, t, c_path);
            loaded += t != NULL;
            tp_tensor_free(t);
        }
    }
    CHECK(loaded == 12);
    tp_tensor *t = NULL;
    CHECK_OK(tp_npy_load(BE_DIR "float32_be_0d.npy", &t));
    check_values("float32_be_0d", t, TP_FLOAT32, 0, NULL);
    if (t) check_saves_as("float32_be_0d", t, NPY_DIR "float32_0d.npy");
    tp_tensor_free(t);
    /* the same bytes from memory */
    unsigned char *data = NULL;
    size_t size = 0;
    CHECK(read_file(BE_DIR "int64_be.npy", &data, &size));
    t = NULL;
    if (data) CHECK_OK(tp_npy_load_buffer(data, size, &t));
    check_values("int64_be (buffer)", t, TP_INT64, 2, (int64_t[]){2, 3});
    tp_tensor_free(t);
    free(data);
}

/* Fixed-width bytes ('|S4', gen_npy_big_endian.py): uint8 with the width
 * as the last dim, each string zero-padded. */
TEST(test_load_bytes) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_npy_load(BE_DIR "bytes_S4.npy", &t));
    CHECK(t && tp_tensor_dtype(t) == TP_UINT8 && tp_tensor_ndim(t) == 3 && tp_tensor_size(t, 0) == 2 &&
          tp_tensor_size(t, 1) == 2 && tp_tensor_size(t, 2) == 4);
    static const char want[17] = "ab\0\0cdef\0\0\0\0x\0\0\0";
    for (int i = 0; t && tp_tensor_numel(t) == 16 && i < 16; i++) CHECK(tp_tensor_item_f64(t, i) == (double)want[i]);
    tp_tensor_free(t);
}

TEST(test_load_buffer_matches_file) {
    unsigned char *data = NULL;
    size_t size = 0;
    CHECK(read_file(NPY_DIR "float64_4d.npy", &data, &size));
    tp_tensor *a = NULL, *b = NULL;
    CHECK_OK(tp_npy_load_buffer(data, size, &a));
    CHECK_OK(tp_npy_load(NPY_DIR "float64_4d.npy", &b));
    CHECK_CLOSE(a, b, 0, 0);
    /* the loaded tensor owns a copy: the buffer may go away */
    memset(data, 0, size);
    free(data);
    check_values("float64_4d (buffer)", a, TP_FLOAT64, 4, (int64_t[]){2, 1, 3, 2});
    tp_tensor_free(a);
    tp_tensor_free(b);
}

/* ---- writing ----------------------------------------------------------- */

TEST(test_save_round_trip) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/tp_test_npy_%ld.npy", (long)getpid());
    for (size_t d = 0; d < N_NPY_DTYPES; d++) {
        /* a transposed (non-contiguous) source with special values */
        tp_dtype dt = npy_dtypes[d].dtype;
        tp_tensor *src = NULL, *view = NULL, *back = NULL, *back2 = NULL;
        CHECK_OK(tp_tensor_empty(dt, 2, (int64_t[]){3, 4}, &src));
        if (!src) continue;
        static const double vals[12] = {0.0, -0.0, 1.0, -1.0, NAN, INFINITY, 65504, -3.5, 100, 1e-7, 0.1, 7};
        for (int i = 0; i < 12; i++) tp__store_f64((char *)tp_tensor_data(src) + i * (int)tp_dtype_size(dt), dt, vals[i]);
        CHECK_OK(tp_tensor_transpose(src, 0, 1, &view));
        void *buf = NULL;
        size_t size = 0;
        CHECK_OK(tp_npy_save_buffer(view, &buf, &size));
        CHECK(buf && size % 64 == 12 * tp_dtype_size(dt) % 64); /* data starts 64-byte aligned */
        if (buf) CHECK_OK(tp_npy_load_buffer(buf, size, &back));
        tp_free(buf);
        CHECK_OK(tp_npy_save(path, view));
        CHECK_OK(tp_npy_load(path, &back2));
        if (back && back2 && view) {
            CHECK(tp_tensor_ndim(back) == 2 && tp_tensor_size(back, 0) == 4 && tp_tensor_size(back, 1) == 3);
            tp_tensor *c = NULL;
            CHECK_OK(tp_tensor_contiguous(view, &c));
            CHECK_MSG(c && memcmp(tp_tensor_data(c), tp_tensor_data(back), 12 * tp_dtype_size(dt)) == 0,
                      "%s: bytes changed in a round trip", npy_dtypes[d].name);
            CHECK(c && memcmp(tp_tensor_data(c), tp_tensor_data(back2), 12 * tp_dtype_size(dt)) == 0);
            tp_tensor_free(c);
        }
        tp_tensor_free(back);
        tp_tensor_free(back2);
        tp_tensor_free(view);
        tp_tensor_free(src);
    }
    unlink(path);
}

TEST(test_save_errors) {
    tp_tensor *bf = NULL, *meta = NULL, *t = NULL;
    void *buf = NULL;
    size_t size = 0;
    CHECK_OK(tp_tensor_zeros(TP_BFLOAT16, 1, (int64_t[]){2}, &bf));
    CHECK_STATUS(tp_npy_save_buffer(bf, &buf, &size), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("bfloat16");
    CHECK_STATUS(tp_npy_save("/tmp/tp_never_written.npy", bf), TP_ERR_UNSUPPORTED);
    CHECK(access("/tmp/tp_never_written.npy", F_OK) != 0);
    CHECK_OK(tp_tensor_meta(TP_FLOAT32, 1, (int64_t[]){2}, &meta));
    CHECK_STATUS(tp_npy_save_buffer(meta, &buf, &size), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("meta");
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 1, (int64_t[]){2}, &t));
    CHECK_STATUS(tp_npy_save("/nonexistent-dir/x.npy", t), TP_ERR_IO);
    CHECK_ERR_CONTAINS("cannot create '/nonexistent-dir/x.npy'");
    CHECK(buf == NULL);
    tp_tensor_free(bf);
    tp_tensor_free(meta);
    tp_tensor_free(t);
}

/* ---- malformed files --------------------------------------------------- */

TEST(test_load_io_errors) {
    tp_tensor *t = NULL;
    CHECK_STATUS(tp_npy_load("fixtures/does-not-exist.npy", &t), TP_ERR_IO);
    CHECK_ERR_CONTAINS("cannot open 'fixtures/does-not-exist.npy'");
    tp_status st = tp_npy_load("fixtures", &t); /* a directory */
    CHECK_MSG(st == TP_ERR_IO || st == TP_ERR_CORRUPT, "directory: %s", tp_status_str(st));
    CHECK(t == NULL);
    CHECK_STATUS(tp_npy_load_buffer(NULL, 10, &t), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp_npy_load_buffer(NULL, 0, &t), TP_ERR_CORRUPT);
    CHECK(t == NULL);
}

TEST(test_malformed_files) {
    json_error_t jerr;
    json_t *root = json_load_file(BAD_DIR "cases.json", 0, &jerr);
    CHECK_MSG(root != NULL, "cannot parse cases.json: %s", jerr.text);
    if (!root) return;
    size_t i;
    json_t *c;
    int n = 0;
    json_array_foreach(json_object_get(root, "cases"), i, c) {
        const char *file = json_string_value(json_object_get(c, "file"));
        const char *status = json_string_value(json_object_get(c, "status"));
        const char *message = json_string_value(json_object_get(c, "message"));
        char path[256];
        snprintf(path, sizeof path, BAD_DIR "%s", file);
        tp_tensor *t = NULL;
        tp_status st = tp_npy_load(path, &t);
        CHECK_MSG(strcmp(tp_status_str(st), status) == 0, "%s: returned %s, want %s (%s)", file, tp_status_str(st),
                  status, tp_last_error());
        CHECK_MSG(strstr(tp_last_error(), message) != NULL, "%s: message \"%s\" lacks \"%s\"", file,
                  tp_last_error(), message);
        CHECK_MSG(strncmp(tp_last_error(), path, strlen(path)) == 0, "%s: message \"%s\" does not name the file",
                  file, tp_last_error());
        CHECK(t == NULL);
        tp_tensor_free(t);
        /* the same from memory */
        unsigned char *data = NULL;
        size_t size = 0;
        if (read_file(path, &data, &size)) {
            t = NULL;
            st = tp_npy_load_buffer(size ? data : (unsigned char *)"", size, &t);
            CHECK_MSG(strcmp(tp_status_str(st), status) == 0, "%s (buffer): returned %s", file, tp_status_str(st));
            CHECK_MSG(strstr(tp_last_error(), message) != NULL, "%s (buffer): message \"%s\"", file, tp_last_error());
            tp_tensor_free(t);
        }
        free(data);
        n++;
    }
    CHECK_MSG(n >= 12, "only %d malformed files", n);
    json_decref(root);
    /* and the base they were made from is fine */
    tp_tensor *good = NULL;
    CHECK_OK(tp_npy_load(BAD_DIR "good.npy", &good));
    CHECK(good && tp_tensor_numel(good) == 2 && tp_tensor_item_f64(good, 0) == 1.5 &&
          tp_tensor_item_f64(good, 1) == -2.0);
    tp_tensor_free(good);
}

/* Every proper prefix of a valid file, and the file with a byte appended,
 * is corrupt; none crashes. */
TEST(test_truncations) {
    static const char *files[] = {NPY_DIR "float32_v1_c.npy", NPY_DIR "int16_v2_f.npy", NPY_DIR "bool_v3_c.npy",
                                  NPY_DIR "int64_0d.npy",     NPY_DIR "float32_empty.npy"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        unsigned char *data = NULL;
        size_t size = 0;
        CHECK(read_file(files[f], &data, &size));
        int bad = 0;
        for (size_t len = 0; data && len < size && bad < 3; len++) {
            unsigned char *copy = malloc(len ? len : 1); /* exact size: ASan sees overreads */
            memcpy(copy, data, len);
            tp_tensor *t = NULL;
            tp_status st = tp_npy_load_buffer(copy, len, &t);
            if (st != TP_ERR_CORRUPT) {
                CHECK_MSG(st == TP_ERR_CORRUPT, "%s cut at %zu: %s (%s)", files[f], len, tp_status_str(st),
                          tp_last_error());
                bad++;
            }
            tp_tensor_free(t);
            free(copy);
        }
        if (data) {
            unsigned char *longer = malloc(size + 1);
            memcpy(longer, data, size);
            longer[size] = 0;
            tp_tensor *t = NULL;
            CHECK_STATUS(tp_npy_load_buffer(longer, size + 1, &t), TP_ERR_CORRUPT);
            CHECK_ERR_CONTAINS("1 trailing bytes");
            free(longer);
        }
        free(data);
    }
}

/* Overwrite each header byte with a few values: the loader returns OK or
 * a CORRUPT/UNSUPPORTED error, never anything else (and never crashes). */
TEST(test_header_byte_mutations) {
    unsigned char *data = NULL;
    size_t size = 0;
    CHECK(read_file(NPY_DIR "int32_v1_f.npy", &data, &size));
    if (!data) return;
    static const unsigned char repl[] = {0x00, 0xff, ' ', '\'', '(', ')', ',', ':', '{', '}', '9', '-', 'L', '\n'};
    size_t header_end = 10 + (size_t)(data[8] | data[9] << 8);
    int bad = 0, accepted = 0;
    for (size_t pos = 0; pos < header_end && bad < 5; pos++) {
        for (size_t r = 0; r < sizeof repl; r++) {
            if (data[pos] == repl[r]) continue;
            unsigned char *copy = malloc(size);
            memcpy(copy, data, size);
            copy[pos] = repl[r];
            tp_tensor *t = NULL;
            tp_status st = tp_npy_load_buffer(copy, size, &t);
            if (st == TP_OK) {
                accepted++;
                /* whatever it accepted describes exactly the data present */
                CHECK(t && (size_t)tp_tensor_numel(t) * tp_dtype_size(tp_tensor_dtype(t)) == size - header_end);
            } else if (tp_status_kind(st) != TP_ERR_CORRUPT && st != TP_ERR_UNSUPPORTED) {
                CHECK_MSG(false, "byte %zu = 0x%02x: %s (%s)", pos, repl[r], tp_status_str(st), tp_last_error());
                bad++;
            }
            tp_tensor_free(t);
            free(copy);
        }
    }
    CHECK(accepted > 0); /* e.g. padding spaces replaced by newlines */
    free(data);
}

/* ---- allocation failures ----------------------------------------------- */

typedef struct {
    const unsigned char *data;
    size_t size;
} npy_blob;

static tp_status op_load_buffer(void *ctx) {
    npy_blob *b = ctx;
    tp_tensor *t = NULL;
    tp_status st = tp_npy_load_buffer(b->data, b->size, &t);
    if (st == TP_OK) {
        void *out = NULL;
        size_t n = 0;
        tp_tensor *tt = NULL;
        st = tp_tensor_transpose(t, 0, -1, &tt);
        if (st == TP_OK) st = tp_npy_save_buffer(tt, &out, &n);
        tp_free(out);
        tp_tensor_free(tt);
    }
    tp_tensor_free(t);
    return st;
}

static tp_status op_load_file(void *ctx) {
    tp_tensor *t = NULL;
    tp_status st = tp_npy_load((const char *)ctx, &t);
    tp_tensor_free(t);
    return st;
}

TEST(test_nomem_load) {
    static const char *files[] = {NPY_DIR "float32_v1_c.npy", NPY_DIR "int32_3d_f.npy", NPY_DIR "bool_v2_f.npy"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        unsigned char *data = NULL;
        size_t size = 0;
        CHECK(read_file(files[f], &data, &size));
        if (!data) continue;
        npy_blob blob = {data, size};
        check_alloc_failures(files[f], op_load_buffer, &blob);
        check_alloc_failures(files[f], op_load_file, (void *)files[f]);
        free(data);
    }
}

TEST_MAIN(T(test_load_versions_and_orders), T(test_load_bytes), T(test_load_shapes), T(test_load_big_endian),
          T(test_load_buffer_matches_file),
          T(test_save_round_trip), T(test_save_errors), T(test_load_io_errors), T(test_malformed_files),
          T(test_truncations), T(test_header_byte_mutations), T(test_nomem_load))
