/*
 * test_hostile_load.c - loading hostile or unusual archives (issue #12):
 * derived-dim arithmetic that would overflow, weight members shared by
 * views of different dtypes, the writer/reader limits, allocation failures
 * while loading real archives (tests/fixtures/tensorplay and an archive
 * tpexport writes), and eager in-place/view ops given a non-tensor `self`.
 *
 * Broken archives are built as test_archive_malformed.c builds them: a
 * valid archive is unzipped and re-zipped with one member's text edited
 * (our ZIP writer computes the CRCs). Every case asserts the exact status
 * and a message substring; the harness checks that nothing leaks.
 */
#include <stdint.h>

#include "archive/zip.h"
#include "test_util.h"
#include "tpexport/archive.h"

/* ---- archives as buffers ------------------------------------------------------ */

/* The bytes of a file (tp_free), or NULL with a recorded failure. */
static void *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *data = tp_malloc(n > 0 ? (size_t)n : 1);
    size_t got = data && n > 0 ? fread(data, 1, (size_t)n, f) : 0;
    fclose(f);
    CHECK_MSG(data && got == (size_t)n, "cannot read %s", path);
    *size = (size_t)n;
    return data;
}

/* One member's text as a new string (tp_free), or NULL. */
static char *member_text(const void *image, size_t size, const char *member) {
    tp_zip_reader *z = NULL;
    CHECK_OK(tp__zip_open(image, size, NULL, &z));
    int i = z ? tp__zip_find(z, member) : -1;
    CHECK_MSG(i >= 0, "no member %s", member);
    void *data = NULL;
    size_t len = 0;
    if (i >= 0) CHECK_OK(tp__zip_read(z, i, &data, &len));
    tp__zip_close(z);
    if (!data) return NULL;
    char *text = tp_malloc(len + 1);
    memcpy(text, data, len);
    text[len] = '\0';
    tp_free(data);
    return text;
}

/* `image` re-zipped with member `member` replaced by data[0..len) (or
 * dropped when data is NULL, or added when absent). A new buffer. */
static void *replace_member(const void *image, size_t size, const char *member, const void *data, size_t len,
                            size_t *out_size) {
    tp_zip_reader *z = NULL;
    tp_zip_writer *w = NULL;
    CHECK_OK(tp__zip_open(image, size, NULL, &z));
    CHECK_OK(tp__zip_writer_new(&w));
    if (!z || !w) {
        tp__zip_close(z);
        tp__zip_writer_free(w);
        return NULL;
    }
    bool found = false;
    for (int i = 0; i < tp__zip_count(z); i++) {
        const tp_zip_entry *e = tp__zip_entry(z, i);
        if (strcmp(e->name, member) == 0) {
            found = true;
            if (data) CHECK_OK(tp__zip_add(w, member, data, len, false));
            continue;
        }
        void *bytes = NULL;
        size_t n = 0;
        CHECK_OK(tp__zip_read(z, i, &bytes, &n));
        CHECK_OK(tp__zip_add(w, e->name, bytes, n, e->method == 8));
        tp_free(bytes);
    }
    if (!found && data) CHECK_OK(tp__zip_add(w, member, data, len, false));
    tp__zip_close(z);
    void *out = NULL;
    CHECK_OK(tp__zip_finish(w, &out, out_size));
    return out;
}

/* Replace the first occurrence of `from` in s by `to` (a new string; s is
 * freed). The edit must apply: it is part of the case. */
static char *edit_text(char *s, const char *from, const char *to) {
    if (!s) return NULL;
    char *at = strstr(s, from);
    CHECK_MSG(at != NULL, "'%s' not found", from);
    if (!at) {
        tp_free(s);
        return NULL;
    }
    size_t ls = strlen(s), lf = strlen(from), lt = strlen(to);
    char *out = tp_malloc(ls - lf + lt + 1);
    memcpy(out, s, (size_t)(at - s));
    memcpy(out + (at - s), to, lt);
    memcpy(out + (at - s) + lt, at + lf, ls - (size_t)(at - s) - lf + 1);
    tp_free(s);
    return out;
}

/* The fixture archive at `path` with pairs[0] -> pairs[1], pairs[2] ->
 * pairs[3], ... applied in order to the text of `member`. */
static void *edited_fixture(const char *path, const char *member, const char *const *pairs, int n_pairs,
                            size_t *out_size) {
    size_t size = 0;
    void *image = read_file(path, &size);
    if (!image) return NULL;
    char *text = member_text(image, size, member);
    for (int k = 0; text && k < n_pairs; k++) text = edit_text(text, pairs[2 * k], pairs[2 * k + 1]);
    void *out = text ? replace_member(image, size, member, text, strlen(text), out_size) : NULL;
    tp_free(text);
    tp_free(image);
    return out;
}

/* Loading and verifying image (taken over) must fail with `status` and a
 * message containing `substr`. */
static void expect_refused_(const char *what, void *image, size_t size, tp_status status, const char *substr) {
    CHECK_MSG(image != NULL, "%s: could not build the archive", what);
    if (!image) return;
    tp_archive *a = NULL;
    tp_status st = tp_archive_load_buffer(image, size, NULL, &a);
    CHECK_MSG(st == status, "%s: load returned %s, expected %s (msg: %s)", what, tp_status_str(st), tp_status_str(status),
              tp_last_error());
    CHECK_MSG(strstr(tp_last_error(), substr) != NULL, "%s: load message \"%s\" lacks \"%s\"", what, tp_last_error(),
              substr);
    CHECK(a == NULL);
    tp_archive_free(a);
    st = tp_archive_verify_buffer(image, size, NULL);
    CHECK_MSG(st == status, "%s: verify returned %s, expected %s (msg: %s)", what, tp_status_str(st),
              tp_status_str(status), tp_last_error());
    CHECK_MSG(strstr(tp_last_error(), substr) != NULL, "%s: verify message \"%s\" lacks \"%s\"", what, tp_last_error(),
              substr);
    tp_free(image);
}

/* The image expression runs first (it sets the size variable). */
#define expect_refused(what, image, size, status, substr)          \
    do {                                                           \
        void *image_ = (image);                                    \
        expect_refused_(what, image_, size, status, substr);       \
    } while (0)

#define DYNAMIC "fixtures/tensorplay/dynamic.pt2"
#define DYNAMIC_DOC "models/model.json"

/* ---- 1. derived dims ------------------------------------------------------------ */

TEST(test_derived_dim_offset_bounds) {
    size_t size = 0;
    /* INT64_MIN: negating it is undefined; it must be refused, naming the dim */
    const char *min_offset[] = {"\"offset\": 0", "\"offset\": -9223372036854775808"};
    expect_refused("offset INT64_MIN", edited_fixture(DYNAMIC, DYNAMIC_DOC, min_offset, 1, &size), size, TP_ERR_CORRUPT,
                   "dynamic_shapes[2][0].__derived_dim__.offset: derived dim '2*batch' needs an offset within");
    const char *max_offset[] = {"\"offset\": 0", "\"offset\": 9223372036854775807"};
    expect_refused("offset INT64_MAX", edited_fixture(DYNAMIC, DYNAMIC_DOC, max_offset, 1, &size), size, TP_ERR_CORRUPT,
                   "derived dim '2*batch' needs an offset within");
    const char *big_offset[] = {"\"offset\": 0", "\"offset\": -2147483648"};
    expect_refused("offset -2^31", edited_fixture(DYNAMIC, DYNAMIC_DOC, big_offset, 1, &size), size, TP_ERR_CORRUPT,
                   "derived dim '2*batch' needs an offset within");
    /* the bounds themselves are accepted */
    const char *ok_offset[] = {"\"offset\": 0", "\"offset\": -2147483647"};
    void *img = edited_fixture(DYNAMIC, DYNAMIC_DOC, ok_offset, 1, &size);
    tp_archive *a = NULL;
    if (img) CHECK_OK(tp_archive_load_buffer(img, size, NULL, &a));
    tp_archive_free(a);
    tp_free(img);
    const char *big_scale[] = {"\"scale\": 2", "\"scale\": 9223372036854775807"};
    expect_refused("scale INT64_MAX", edited_fixture(DYNAMIC, DYNAMIC_DOC, big_scale, 1, &size), size, TP_ERR_CORRUPT,
                   "derived dim '2*batch' needs a scale from 1 to");
}

TEST(test_derived_dim_range_overflow) {
    size_t size = 0;
    /* scale * max of the root overflows int64: refused, naming the dim */
    const char *huge_root[] = {"\"batch\": {\"min\": 1, \"max\": 16}", "\"batch\": {\"min\": 1, \"max\": 4611686018427387904}",
                               "\"scale\": 2", "\"scale\": 4"};
    expect_refused("scale * root max overflows", edited_fixture(DYNAMIC, DYNAMIC_DOC, huge_root, 2, &size), size,
                   TP_ERR_CORRUPT, "dynamic_shapes: derived dim z.shape[0] = 4*batch overflows int64 for batch in [1, 4611686018427387904]");
    /* scale * min + offset overflows (an unbounded root: only the minimum counts) */
    const char *huge_min[] = {"\"batch\": {\"min\": 1, \"max\": 16}",
                              "\"batch\": {\"min\": 4611686018427387904, \"max\": null}", "\"offset\": 0",
                              "\"offset\": 2147483647"};
    expect_refused("scale * root min + offset overflows", edited_fixture(DYNAMIC, DYNAMIC_DOC, huge_min, 2, &size), size,
                   TP_ERR_CORRUPT, "derived dim z.shape[0] = 2*batch+2147483647 overflows int64 for batch in [4611686018427387904, unbounded]");
}

/* The checks made on every call: a rule added through the API with a
 * scale that overflows for the actual sizes is a constraint error, not
 * wrapped arithmetic. */
TEST(test_derived_dim_call_overflow) {
    tp_archive *a = NULL;
    CHECK_OK(tp_archive_load(DYNAMIC, NULL, &a));
    if (!a) return;
    tp_program *p = tp_archive_program(a, 0);
    tp_tensor *x = load_fixture("tensorplay/dynamic/run0_in_x"), *y = load_fixture("tensorplay/dynamic/run0_in_y"),
              *z = load_fixture("tensorplay/dynamic/run0_in_z");
    tp_value args[3] = {tp_value_tensor(x), tp_value_tensor(y), tp_value_tensor(z)};
    CHECK_OK(tp_program_check_inputs(p, args, 3, NULL));
    /* z.shape[0] = INT64_MAX * batch + 0: the known batch overflows it */
    tp_dim_rule r = {.site = {"z", 0}, .kind = TP_DIM_DERIVED, .symbol = "batch", .scale = INT64_MAX, .offset = 0};
    CHECK_OK(tp_program_add_dim_rule(p, &r));
    CHECK_STATUS(tp_program_check_inputs(p, args, 3, NULL), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("z.shape[0] = ");
    CHECK_ERR_CONTAINS("overflows");
    /* the writer refuses what the reader would refuse */
    tp_archive_entry e = {"model", p};
    void *img = NULL;
    size_t size = 0;
    CHECK_STATUS(tp_archive_save_buffer(&e, 1, NULL, 0, &img, &size), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("derived dim z.shape[0] = 9223372036854775807*batch overflows int64 over the range of batch");
    tp_free(img);
    /* a root seen only through the derived dim: size - offset overflows */
    r = (tp_dim_rule){.site = {"z", 0}, .kind = TP_DIM_DERIVED, .symbol = "other", .scale = 1, .offset = INT64_MIN};
    CHECK_OK(tp_program_add_dim_rule(p, &r));
    CHECK_STATUS(tp_program_check_inputs(p, args, 3, NULL), TP_ERR_CONSTRAINT);
    CHECK_ERR_CONTAINS("z.shape[0] = ");
    CHECK_ERR_CONTAINS("overflows");
    for (int i = 0; i < 3; i++) tp_value_clear(&args[i]);
    tp_archive_free(a);
}

TEST_MAIN(T(test_derived_dim_offset_bounds), T(test_derived_dim_range_overflow), T(test_derived_dim_call_overflow))
