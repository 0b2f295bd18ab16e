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
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "archive/serde.h"
#include "archive/zip.h"
#include "fail_alloc.h"
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

/* ---- a ZIP image laid out by hand ----------------------------------------------- */

static unsigned char *put16(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    return p + 2;
}
static unsigned char *put32(unsigned char *p, uint32_t v) { return put16(put16(p, v & 0xffff), v >> 16); }

/* `image`'s members stored again, with no alignment: member `odd` gets its
 * data at an offset of 1 modulo 64 (padding in its local header's extra
 * field), as any ZIP writer may lay it out. Our writer always aligns, so
 * the image is built here. A new buffer (tp_free). */
static void *unaligned_zip(const void *image, size_t size, const char *odd, size_t *out_size) {
    tp_zip_reader *z = NULL;
    CHECK_OK(tp__zip_open(image, size, NULL, &z));
    if (!z) return NULL;
    int n = tp__zip_count(z);
    size_t cap = size * 2 + 4096, at = 0;
    unsigned char *out = tp_calloc(1, cap);
    uint32_t *offsets = tp_calloc((size_t)n, sizeof *offsets), *crcs = tp_calloc((size_t)n, sizeof *crcs);
    size_t *sizes = tp_calloc((size_t)n, sizeof *sizes);
    for (int i = 0; i < n; i++) {
        const char *name = tp__zip_entry(z, i)->name;
        void *data = NULL;
        CHECK_OK(tp__zip_read(z, i, &data, &sizes[i]));
        size_t name_len = strlen(name), extra = 0;
        if (strcmp(name, odd) == 0)
            while ((at + 30 + name_len + extra) % 64 != 1) extra++;
        crcs[i] = tp__crc32(0, data, sizes[i]);
        offsets[i] = (uint32_t)at;
        unsigned char *p = out + at;
        p = put32(p, 0x04034b50);
        p = put16(p, 20);
        p = put16(p, 0);
        p = put16(p, 0); /* stored */
        p = put16(p, 0);
        p = put16(p, 0x21);
        p = put32(p, crcs[i]);
        p = put32(p, (uint32_t)sizes[i]);
        p = put32(p, (uint32_t)sizes[i]);
        p = put16(p, (uint32_t)name_len);
        p = put16(p, (uint32_t)extra);
        memcpy(p, name, name_len);
        p += name_len + extra;
        if (sizes[i]) memcpy(p, data, sizes[i]);
        at = (size_t)(p - out) + sizes[i];
        tp_free(data);
    }
    size_t cd = at;
    for (int i = 0; i < n; i++) {
        const char *name = tp__zip_entry(z, i)->name;
        size_t name_len = strlen(name);
        unsigned char *p = out + at;
        p = put32(p, 0x02014b50);
        p = put16(p, 20);
        p = put16(p, 20);
        p = put16(p, 0);
        p = put16(p, 0);
        p = put16(p, 0);
        p = put16(p, 0x21);
        p = put32(p, crcs[i]);
        p = put32(p, (uint32_t)sizes[i]);
        p = put32(p, (uint32_t)sizes[i]);
        p = put16(p, (uint32_t)name_len);
        p = put16(p, 0);
        p = put16(p, 0);
        p = put16(p, 0);
        p = put16(p, 0);
        p = put32(p, 0);
        p = put32(p, offsets[i]);
        memcpy(p, name, name_len);
        at = (size_t)(p - out) + name_len;
    }
    unsigned char *p = out + at;
    p = put32(p, 0x06054b50);
    p = put16(p, 0);
    p = put16(p, 0);
    p = put16(p, (uint32_t)n);
    p = put16(p, (uint32_t)n);
    p = put32(p, (uint32_t)(at - cd));
    p = put32(p, (uint32_t)cd);
    p = put16(p, 0);
    *out_size = (size_t)(p - out);
    tp__zip_close(z);
    tp_free(offsets);
    tp_free(crcs);
    tp_free(sizes);
    return out;
}

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

/* ---- 2. one weight member, views of several dtypes ------------------------------ */

/* A program with a uint8 parameter `u` [8] and a float32 parameter `w`
 * [2]: out = (x + w, clone(u)). Saved, its weights index is edited so that
 * w reads u's member (the same 8 bytes), which is laid out at an odd
 * offset. */
static void *shared_member_archive(size_t *size) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_tensor *mu = NULL, *mw = NULL, *mx = NULL;
    CHECK_OK(tp_tensor_meta(TP_UINT8, 1, (int64_t[]){8}, &mu));
    CHECK_OK(tp_tensor_meta(TP_FLOAT32, 1, (int64_t[]){2}, &mw));
    CHECK_OK(tp_tensor_meta(TP_FLOAT32, 1, (int64_t[]){2}, &mx));
    tp_value vu = tp_value_tensor(mu), vw = tp_value_tensor(mw), vx = tp_value_tensor(mx);
    tp_node *u = NULL, *w = NULL, *x = NULL, *sum = NULL, *copy = NULL;
    CHECK_OK(tp_graph_placeholder(g, "p_u", &vu, &u));
    CHECK_OK(tp_graph_placeholder(g, "p_w", &vw, &w));
    CHECK_OK(tp_graph_placeholder(g, "x", &vx, &x));
    tp_value_clear(&vu);
    tp_value_clear(&vw);
    tp_value_clear(&vx);
    tp_value args;
    CHECK_OK(tp_value_tuple(2, &args));
    args.u.seq.items[0] = tp_value_node(x);
    args.u.seq.items[1] = tp_value_node(w);
    CHECK_OK(tp_graph_call_function(g, TP_OP_ADD, &args, NULL, &sum));
    tp_value_clear(&args);
    CHECK_OK(tp_value_tuple(1, &args));
    args.u.seq.items[0] = tp_value_node(u);
    CHECK_OK(tp_graph_call_function(g, TP_OP_CLONE, &args, NULL, &copy));
    tp_value_clear(&args);
    CHECK_OK(tp_value_tuple(2, &args));
    args.u.seq.items[0] = tp_value_node(sum);
    args.u.seq.items[1] = tp_value_node(copy);
    CHECK_OK(tp_graph_output(g, &args, NULL));
    tp_value_clear(&args);
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_u"), "u", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_w"), "w", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(sum)), NULL));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(copy)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    if (!p) return NULL;
    /* u's bytes are the float32 values 1 and 2 */
    static const float floats[2] = {1.0f, 2.0f};
    tp_tensor *tu = NULL, *tw = NULL;
    CHECK_OK(tp_tensor_from_data(TP_UINT8, 1, (int64_t[]){8}, floats, &tu));
    CHECK_OK(tp_tensor_from_data(TP_FLOAT32, 1, (int64_t[]){2}, (float[]){0, 0}, &tw));
    CHECK_OK(tp_program_set_state(p, "u", TP_STATE_PARAMETER, tu, true));
    CHECK_OK(tp_program_set_state(p, "w", TP_STATE_PARAMETER, tw, true));
    tp_tensor_free(tu);
    tp_tensor_free(tw);
    CHECK_OK(tp_program_validate(p));
    tp_archive_entry e = {"m", p};
    void *img = NULL;
    size_t img_size = 0;
    CHECK_OK(tp_archive_save_buffer(&e, 1, NULL, 0, &img, &img_size));
    tp_program_free(p);
    if (!img) return NULL;
    char *index = member_text(img, img_size, "data/weights/m/weights.json");
    index = edit_text(index, "\"path_name\": \"m/weight_1\"", "\"path_name\": \"m/weight_0\"");
    size_t edited_size = 0;
    void *edited = index ? replace_member(img, img_size, "data/weights/m/weights.json", index, strlen(index), &edited_size)
                         : NULL;
    tp_free(index);
    tp_free(img);
    if (!edited) return NULL;
    void *out = unaligned_zip(edited, edited_size, "data/weights/m/weight_0", size);
    tp_free(edited);
    return out;
}

static void check_shared_member(const void *img, size_t size, const tp_load_options *o) {
    tp_archive *a = NULL;
    CHECK_OK(tp_archive_load_buffer(img, size, o, &a));
    if (!a) return;
    tp_program *p = tp_archive_program(a, 0);
    tp_tensor *u = NULL, *w = NULL;
    CHECK_OK(tp_program_get_state(p, "u", &u, NULL, NULL));
    CHECK_OK(tp_program_get_state(p, "w", &w, NULL, NULL));
    if (u && w) {
        CHECK_MSG((uintptr_t)tp_tensor_data(w) % sizeof(float) == 0, "float32 view at %p is misaligned",
                  tp_tensor_data(w));
        CHECK(tp_tensor_item_f64(w, 0) == 1.0 && tp_tensor_item_f64(w, 1) == 2.0);
        CHECK(tp_tensor_item_f64(u, 3) == 0x3f);
        /* still one member: the two views read the same bytes */
        CHECK(tp_tensor_data(u) == tp_tensor_data(w));
    }
    tp_archive_free(a); /* u and w are borrowed from the program */
}

TEST(test_shared_member_alignment) {
    size_t size = 0;
    void *img = shared_member_archive(&size);
    if (!img) return;
    check_shared_member(img, size, NULL);
    /* through a file: the mapped image */
    const char *path = "hostile_shared_member.pt2";
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(img, 1, size, f) == size);
    if (f) fclose(f);
    tp_archive *a = NULL;
    CHECK_OK(tp_archive_load(path, NULL, &a));
    if (a) {
        tp_tensor *w = NULL;
        CHECK_OK(tp_program_get_state(tp_archive_program(a, 0), "w", &w, NULL, NULL));
        CHECK(w && (uintptr_t)tp_tensor_data(w) % sizeof(float) == 0);
        CHECK(w && tp_tensor_item_f64(w, 1) == 2.0);
    }
    tp_archive_free(a);
    remove(path);
    tp_free(img);
}

/* ---- 3. the limits writer and reader share (limits.h) ----------------------------- */

/* A name of n bytes: `base` padded with 'a'. */
static char *long_name(const char *base, size_t n) {
    char *s = tp_malloc(n + 1);
    size_t b = strlen(base);
    memcpy(s, base, b < n ? b : n);
    for (size_t i = b; i < n; i++) s[i] = 'a';
    s[n] = '\0';
    return s;
}

/* relu(x) for a user input named `input` [n, 3] with a dynamic dim 0 named
 * `dim` (range [1, 64]) and an example input. */
static tp_program *named_program(const char *input, const char *dim) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_tensor *m = NULL;
    CHECK_OK(tp_tensor_meta(TP_FLOAT32, 2, (int64_t[]){2, 3}, &m));
    tp_value mv = tp_value_tensor(m);
    tp_node *x = NULL, *y = NULL;
    CHECK_OK(tp_graph_placeholder(g, input, &mv, &x));
    tp_value_clear(&mv);
    tp_value args;
    CHECK_OK(tp_value_tuple(1, &args));
    args.u.seq.items[0] = tp_value_node(x);
    CHECK_OK(tp_graph_call_function(g, TP_OP_RELU, &args, NULL, &y));
    tp_value_clear(&args);
    CHECK_OK(tp_value_tuple(1, &args));
    args.u.seq.items[0] = tp_value_node(y);
    CHECK_OK(tp_graph_output(g, &args, NULL));
    tp_value_clear(&args);
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor(input), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(y)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    if (!p) return NULL;
    CHECK_OK(tp_program_add_range(p, dim, 1, 64));
    tp_dim_rule r = {.site = {input, 0}, .kind = TP_DIM_SYMBOL, .symbol = dim};
    CHECK_OK(tp_program_add_dim_rule(p, &r));
    tp_tensor *ex = NULL;
    CHECK_OK(tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){2, 3}, &ex));
    tp_value ev = tp_value_tensor(ex);
    CHECK_OK(tp_program_set_example_input(p, input, &ev));
    tp_value_clear(&ev);
    CHECK_OK(tp_program_validate(p));
    return p;
}

TEST(test_name_limit_round_trip) {
    /* at the limit: an input (node, example key, .npy member) and a dim
     * name of TP_LIMIT_NAME bytes are written and read back */
    char *input = long_name("x_", TP_LIMIT_NAME), *dim = long_name("dim_", TP_LIMIT_NAME);
    tp_program *p = named_program(input, dim);
    tp_archive_entry e = {"named", p};
    void *img = NULL;
    size_t size = 0;
    if (p) CHECK_OK(tp_archive_save_buffer(&e, 1, NULL, 0, &img, &size));
    tp_archive *a = NULL;
    if (img) {
        /* the example's .npy member is named in full */
        char member[TP_LIMIT_NAME + 64];
        snprintf(member, sizeof member, "data/sample_inputs/named/%s.npy", input);
        tp_zip_reader *z = NULL;
        CHECK_OK(tp__zip_open(img, size, NULL, &z));
        CHECK_MSG(z && tp__zip_find(z, member) >= 0, "no member %.40s...", member);
        tp__zip_close(z);
        CHECK_OK(tp_archive_load_buffer(img, size, NULL, &a));
    }
    if (a) {
        const tp_program *q = tp_archive_program(a, 0);
        const tp_range_constraint *rc = tp_program_find_range(q, dim);
        CHECK(rc && rc->min == 1 && rc->max == 64);
        CHECK(tp_program_example_input(q, input) != NULL);
        CHECK(tp_program_num_dim_rules(q) == 1 && strcmp(tp_program_dim_rule(q, 0)->symbol, dim) == 0);
    }
    tp_archive_free(a);
    /* one past it, the reader refuses the name... */
    if (img) {
        char *doc = member_text(img, size, "models/named.json");
        char key[TP_LIMIT_NAME + 8];
        snprintf(key, sizeof key, "\"%s\": {", dim);
        char *longer = long_name("", strlen(key) + 1);
        snprintf(longer, strlen(key) + 2, "\"%sb\": {", dim);
        doc = edit_text(doc, key, longer);
        size_t edited_size = 0;
        void *edited = doc ? replace_member(img, size, "models/named.json", doc, strlen(doc), &edited_size) : NULL;
        expect_refused("dim name one past the limit", edited, edited_size, TP_ERR_CORRUPT,
                       "range_constraints: a symbol needs a name of 1 to 1024 bytes");
        tp_free(longer);
        tp_free(doc);
    }
    tp_free(img);
    tp_program_free(p);
    /* ... and the writer refuses to write it */
    char *dim_past = long_name("dim_", TP_LIMIT_NAME + 1);
    p = named_program(input, dim_past);
    e.program = p;
    img = NULL;
    if (p) CHECK_STATUS(tp_archive_save_buffer(&e, 1, NULL, 0, &img, &size), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("saving program 'named'");
    CHECK_ERR_CONTAINS("dim name 'dim_aaaa");
    CHECK_ERR_CONTAINS("of 1025 bytes exceeds the limit of 1024 bytes (TP_LIMIT_NAME)");
    CHECK(img == NULL);
    tp_program_free(p);
    /* an input name one past the limit (a 2,000-byte ONNX dim_param alike) */
    char *input_past = long_name("x_", 2000);
    p = named_program(input_past, dim);
    e.program = p;
    if (p) CHECK_STATUS(tp_archive_save_buffer(&e, 1, NULL, 0, &img, &size), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("of 2000 bytes exceeds the limit of 1024 bytes (TP_LIMIT_NAME)");
    CHECK(img == NULL);
    tp_program_free(p);
    tp_free(input_past);
    tp_free(dim_past);
    tp_free(input);
    tp_free(dim);
}

/* A derived dim's name ("2*<root> + 1") counts as a name too: a root at the
 * limit cannot have one. */
TEST(test_derived_name_limit) {
    char *input = long_name("x_", 16), *dim = long_name("dim_", TP_LIMIT_NAME - 8);
    tp_program *p = named_program(input, dim);
    if (!p) return;
    tp_archive_entry e = {"named", p};
    void *img = NULL;
    size_t size = 0;
    /* 2*<root> + 1: 6 bytes more, within the limit */
    tp_dim_rule r = {.site = {input, 0}, .kind = TP_DIM_DERIVED, .symbol = dim, .scale = 2, .offset = 1};
    CHECK_OK(tp_program_add_dim_rule(p, &r));
    CHECK_OK(tp_archive_save_buffer(&e, 1, NULL, 0, &img, &size));
    tp_archive *a = NULL;
    if (img) CHECK_OK(tp_archive_load_buffer(img, size, NULL, &a));
    tp_archive_free(a);
    tp_free(img);
    img = NULL;
    /* 2*<root> + 1000: 9 bytes more, past it */
    r.offset = 1000;
    CHECK_OK(tp_program_add_dim_rule(p, &r));
    CHECK_STATUS(tp_archive_save_buffer(&e, 1, NULL, 0, &img, &size), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("derived dim name '2*dim_aaa");
    CHECK_ERR_CONTAINS("of 1025 bytes exceeds the limit of 1024 bytes");
    tp_program_free(p);
    tp_free(input);
    tp_free(dim);
}

/* ---- 4. allocation failures while loading real archives --------------------------- */

typedef struct sweep_ctx {
    const void *image;
    size_t size;
    const char *path;
    tp_program *program;
} sweep_ctx;

static tp_status op_load_buffer(void *ctx) {
    sweep_ctx *c = ctx;
    tp_archive *a = NULL;
    tp_status st = tp_archive_load_buffer(c->image, c->size, NULL, &a);
    tp_archive_free(a);
    return st;
}

static tp_status op_verify_buffer(void *ctx) {
    sweep_ctx *c = ctx;
    return tp_archive_verify_buffer(c->image, c->size, NULL);
}

static tp_status op_load_path(void *ctx) {
    sweep_ctx *c = ctx;
    tp_archive *a = NULL;
    tp_status st = tp_archive_load(c->path, NULL, &a);
    tp_archive_free(a);
    return st;
}

static tp_status op_save(void *ctx) {
    sweep_ctx *c = ctx;
    tp_archive_entry e = {"model", c->program};
    void *img = NULL;
    size_t size = 0;
    tp_status st = tp_archive_save_buffer(&e, 1, NULL, 0, &img, &size);
    tp_free(img);
    return st;
}

static tp_status op_module(void *ctx) {
    sweep_ctx *c = ctx;
    tp_module *m = NULL;
    tp_status st = tp_program_module(c->program, &m);
    tp_program_invalidate_module(c->program);
    return st;
}

/* Loading each archive with each allocation failing in turn: TP_ERR_NOMEM
 * every time and nothing leaked. tensorplay's archives carry pickled
 * example inputs and pickled (base64) arguments; tpexport's carry .npy
 * example inputs and per-node meta values too. An allocation failure is
 * never reported as corrupt input. */
TEST(test_load_alloc_failures) {
    static const char *const archives[] = {
        "fixtures/tensorplay/mlp.pt2",     "fixtures/tensorplay/counter.pt2", "fixtures/tensorplay/dynamic.pt2",
        "fixtures/tensorplay/ops.pt2",     "fixtures/tensorplay/two_programs_fixed.pt2",
        "../fuzz/corpus/archive/tpexport_mlp_counter.pt2"};
    for (size_t i = 0; i < TP_ARRAY_LEN(archives); i++) {
        sweep_ctx c = {.path = archives[i]};
        c.image = read_file(archives[i], &c.size);
        if (!c.image) continue;
        char what[256];
        snprintf(what, sizeof what, "load %s", archives[i]);
        long n = check_alloc_failures(what, op_load_buffer, &c);
        if (getenv("TP_TEST_VERBOSE")) printf("  %s: %ld allocations\n", what, n);
        tp_free((void *)c.image);
    }
}

TEST(test_verify_and_mapped_alloc_failures) {
    sweep_ctx c = {.path = "fixtures/tensorplay/dynamic.pt2"};
    c.image = read_file(c.path, &c.size);
    if (!c.image) return;
    check_alloc_failures("verify dynamic.pt2", op_verify_buffer, &c);
    check_alloc_failures("load dynamic.pt2 mapped", op_load_path, &c);
    tp_free((void *)c.image);
}

/* Saving (example inputs collected into a dict) and unlifting (the
 * module's defaults: a dict of the example inputs) a loaded program. */
TEST(test_save_and_module_alloc_failures) {
    static const char *const archives[] = {"fixtures/tensorplay/dynamic.pt2",
                                           "../fuzz/corpus/archive/tpexport_mlp_counter.pt2"};
    for (size_t i = 0; i < TP_ARRAY_LEN(archives); i++) {
        tp_archive *a = NULL;
        CHECK_OK(tp_archive_load(archives[i], NULL, &a));
        if (!a) continue;
        sweep_ctx c = {.program = tp_archive_program(a, 0)};
        char what[256];
        snprintf(what, sizeof what, "save %s", archives[i]);
        check_alloc_failures(what, op_save, &c);
        snprintf(what, sizeof what, "module of %s", archives[i]);
        check_alloc_failures(what, op_module, &c);
        tp_archive_free(a);
    }
}

/* tp_value_dict_set, tp_value_append and tp_value_seq_set consume the item
 * even when they fail (value.h): the item is None afterwards and nothing
 * it held leaks. */
static tp_status op_dict_set(void *ctx) {
    (void)ctx;
    tp_value d, item;
    TP_TRY(tp_value_dict(&d));
    tp_tensor *t = NULL;
    tp_status st = tp_tensor_zeros(TP_FLOAT32, 1, (int64_t[]){3}, &t);
    item = st == TP_OK ? tp_value_tensor(t) : tp_value_none();
    if (st == TP_OK) st = tp_value_dict_set(&d, "a key", &item);
    CHECK(item.kind == TP_VAL_NONE); /* consumed either way */
    tp_value s = tp_value_none();
    if (st == TP_OK) st = tp_value_str("text", &s);
    if (st == TP_OK) st = tp_value_dict_set(&d, "another key", &s);
    CHECK(s.kind == TP_VAL_NONE);
    tp_value_clear(&d);
    return st;
}

TEST(test_container_set_consumes_item) {
    check_alloc_failures("dict_set", op_dict_set, NULL);
    tp_value list, t = tp_value_none(), d;
    CHECK_OK(tp_value_list(1, &list));
    CHECK_OK(tp_value_str("x", &t));
    CHECK_STATUS(tp_value_seq_set(&list, 5, &t), TP_ERR_INDEX);
    CHECK(t.kind == TP_VAL_NONE);
    CHECK_OK(tp_value_str("x", &t));
    CHECK_STATUS(tp_value_dict_set(&list, "k", &t), TP_ERR_TYPE);
    CHECK(t.kind == TP_VAL_NONE);
    CHECK_OK(tp_value_dict(&d));
    CHECK_OK(tp_value_str("x", &t));
    CHECK_STATUS(tp_value_append(&d, &t), TP_ERR_TYPE);
    CHECK(t.kind == TP_VAL_NONE);
    tp_value_clear(&d);
    tp_value_clear(&list);
}

/* ---- 5, 6. jansson's memory through the hook; out of memory is not corrupt -------- */

/* A weights index with long keys and strings (jansson's token buffer
 * grows while lexing them). The first key's 15th byte, where that buffer
 * first grows, is the 'u' of an escape: a lexer dropping it on a failed
 * growth then meets "\0", which jansson asserts cannot happen. */
static const char g_index[] =
    "{\"abcdefghijklm\\u0065.layers.0.self_attention.in_projection.weight\": {\"dtype\": \"float32\", \"sizes\": [4, 3], "
    "\"strides\": [3, 1], \"storage_offset\": 0, \"requires_grad\": false, \"path_name\": "
    "\"encoder_with_a_long_name/weight_0\", \"use_pickle\": false, \"is_param\": true, \"role\": 0}, "
    "\"encoder.layers.0.self_attention.in_projection.bias\": {\"dtype\": \"float32\", \"sizes\": [4], "
    "\"strides\": [1], \"storage_offset\": 0, \"requires_grad\": false, \"path_name\": "
    "\"encoder_with_a_long_name/weight_1\", \"use_pickle\": false, \"is_param\": true, \"role\": 0}}";

static int g_json_nomem; /* failed runs that said "out of memory parsing JSON" */

static tp_status op_parse_index(void *ctx) {
    (void)ctx;
    tp_serde_weights w = {0};
    tp_status st = tp__serde_weights_from_json(g_index, sizeof g_index - 1, "weights", NULL, NULL, NULL, &w);
    if (st == TP_OK) CHECK(w.n == 2);
    if (st != TP_OK && strstr(tp_last_error(), "out of memory parsing JSON")) g_json_nomem++;
    CHECK_MSG(!strstr(tp_last_error(), "invalid JSON"), "out of memory read as corrupt: %s", tp_last_error());
    tp__serde_weights_free(&w);
    return st;
}

TEST(test_json_allocations_through_hook) {
    /* every jansson allocation can fail through the hook: each failure is
     * TP_ERR_NOMEM (never "invalid JSON", never an abort in jansson's
     * lexer) and nothing leaks; without the hook jansson would never fail */
    g_json_nomem = 0;
    long n = check_alloc_failures("weights index", op_parse_index, NULL);
    CHECK_MSG(g_json_nomem > 20, "only %d of %ld failures were in JSON parsing", g_json_nomem, n);
    /* jansson's blocks are counted and balanced like the library's own */
    json_t *j = json_loads("{\"a\": [1, 2, 3]}", 0, NULL);
    CHECK(j != NULL);
    long live = tp_alloc_live_blocks();
    json_decref(j);
    CHECK(tp_alloc_live_blocks() < live);
    /* a string jansson returns is freed with tp_free */
    json_t *one = json_pack("[i]", 1);
    char *text = json_dumps(one, 0);
    CHECK_MSG(text && strcmp(text, "[1]") == 0, "json_dumps gave %s", text ? text : "NULL");
    tp_free(text);
    json_decref(one);
}

/* ---- 7. eager in-place and view ops check their arguments ------------------------ */

/* A plausible value for a schema argument of type t (the first argument
 * gets the bad `self` instead). */
static tp_status plausible_arg(tp_arg_type t, tp_value *out) {
    switch (t) {
    case TP_ARG_TENSOR:
    case TP_ARG_OPT_TENSOR:
    case TP_ARG_TENSOR_OR_SCALAR: {
        tp_tensor *x = NULL;
        TP_TRY(tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){2, 3}, &x));
        *out = tp_value_tensor(x);
        return TP_OK;
    }
    case TP_ARG_TENSOR_LIST: {
        tp_tensor *x = NULL;
        TP_TRY(tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){2, 3}, &x));
        TP_TRY(tp_value_list(1, out));
        out->u.seq.items[0] = tp_value_tensor(x);
        return TP_OK;
    }
    case TP_ARG_SCALAR:
    case TP_ARG_OPT_SCALAR:
    case TP_ARG_INT:
    case TP_ARG_OPT_INT: *out = tp_value_int(1); return TP_OK;
    case TP_ARG_INT_LIST:
    case TP_ARG_OPT_INT_LIST: return tp_value_int_list((int64_t[]){1}, 1, out);
    case TP_ARG_FLOAT:
    case TP_ARG_OPT_FLOAT: *out = tp_value_float(1.0); return TP_OK;
    case TP_ARG_BOOL:
    case TP_ARG_OPT_BOOL: *out = tp_value_bool(false); return TP_OK;
    case TP_ARG_STR:
    case TP_ARG_OPT_STR: return tp_value_str("none", out);
    case TP_ARG_OPT_DTYPE: *out = tp_value_dtype(TP_FLOAT32); return TP_OK;
    case TP_ARG_ANY: *out = tp_value_int(1); return TP_OK;
    }
    *out = tp_value_none();
    return TP_OK;
}

TEST(test_inplace_and_view_ops_check_self) {
    int checked = 0;
    for (int op = 0; op < TP_OP_COUNT; op++) {
        unsigned flags = tp_op_flags((tp_op)op);
        const tp_schema *s = tp_op_schema((tp_op)op);
        if (!(flags & (TP_OPF_INPLACE | TP_OPF_VIEW)) || !s || s->n_args < 1 || !tp_op_has_kernel((tp_op)op)) continue;
        for (int bad = 0; bad < 3; bad++) {
            tp_value bound[64];
            for (int i = 0; i < s->n_args; i++) {
                bound[i] = tp_value_none();
                if (i == 0) continue;
                if (s->args[i].has_default) CHECK_OK(tp_value_copy(&s->args[i].default_value, &bound[i]));
                else CHECK_OK(plausible_arg(s->args[i].type, &bound[i]));
            }
            /* self: an int, None, a list of ints */
            if (bad == 0) bound[0] = tp_value_int(3);
            else if (bad == 2) CHECK_OK(tp_value_int_list((int64_t[]){1, 2}, 2, &bound[0]));
            tp_value out = tp_value_none();
            tp_status st = tp_op_call_bound((tp_op)op, bound, &out);
            const char *kind = bad == 0 ? "int" : bad == 1 ? "None" : "list";
            /* getitem takes Any self: a list is a valid container */
            bool valid = op == TP_OP_GETITEM && bad == 2;
            if (valid) {
                CHECK_MSG(st == TP_OK, "getitem of a list: %s", tp_last_error());
            } else {
                CHECK_MSG(st == TP_ERR_TYPE, "%s with a %s self returned %s (%s)", tp_op_name((tp_op)op), kind,
                          tp_status_str(st), tp_last_error());
                if (s->args[0].type == TP_ARG_TENSOR)
                    CHECK_MSG(strstr(tp_last_error(), "argument 'self' must be Tensor"), "%s: %s", tp_op_name((tp_op)op),
                              tp_last_error());
            }
            tp_value_clear(&out);
            for (int i = 0; i < s->n_args; i++) tp_value_clear(&bound[i]);
            checked++;
        }
    }
    /* add_ mul_ copy_ fill_ zero_ and the view ops at least */
    CHECK_MSG(checked >= 3 * 20, "only %d calls checked", checked);
}

/* ---- document limits from the load options ----------------------------------------- */

/* Load path with o: must fail with status and a message containing substr
 * (both load and verify), or succeed when status is TP_OK. */
static void expect_load(const char *what, const char *path, const tp_load_options *o, tp_status status,
                        const char *substr) {
    tp_archive *a = NULL;
    tp_status st = tp_archive_load(path, o, &a);
    CHECK_MSG(st == status, "%s: load returned %s, expected %s (msg: %s)", what, tp_status_str(st), tp_status_str(status),
              st == TP_OK ? "" : tp_last_error());
    if (substr)
        CHECK_MSG(strstr(tp_last_error(), substr) != NULL, "%s: load message \"%s\" lacks \"%s\"", what, tp_last_error(),
                  substr);
    CHECK(status == TP_OK ? a != NULL : a == NULL);
    tp_archive_free(a);
    st = tp_archive_verify(path, o);
    CHECK_MSG(st == status, "%s: verify returned %s, expected %s (msg: %s)", what, tp_status_str(st),
              tp_status_str(status), st == TP_OK ? "" : tp_last_error());
    if (substr)
        CHECK_MSG(strstr(tp_last_error(), substr) != NULL, "%s: verify message \"%s\" lacks \"%s\"", what,
                  tp_last_error(), substr);
}

TEST(test_load_option_limits) {
    /* the MLP from tensorplay: 12 nodes, fc1.weight float32[8, 4] (128
     * bytes) the largest tensor, a 4485-byte document, strings (names,
     * "TensorArgument", "tensorplay.nn.functional") up to 24 bytes */
    const char *mlp = "fixtures/tensorplay/mlp.pt2";
    tp_load_options o;
    tp_load_options_init(&o);
    expect_load("defaults", mlp, &o, TP_OK, NULL);
    o.max_nodes = 12;
    o.max_name_bytes = 24;
    o.max_tensor_bytes = 128;
    o.max_document_bytes = 4485;
    expect_load("limits met exactly", mlp, &o, TP_OK, NULL);

    tp_load_options_init(&o);
    o.max_nodes = 11;
    expect_load("max_nodes", mlp, &o, TP_ERR_CORRUPT, "graph.nodes: 12 nodes exceed the limit of 11 (max_nodes)");
    tp_load_options_init(&o);
    o.max_name_bytes = 23;
    expect_load("max_name_bytes", mlp, &o, TP_ERR_CORRUPT,
                "graph.nodes[5].target.module: string of 24 bytes exceeds the limit of 23 (max_name_bytes)");
    tp_load_options_init(&o);
    o.max_tensor_bytes = 127;
    expect_load("max_tensor_bytes (weights)", mlp, &o, TP_ERR_UNSUPPORTED,
                "weights 'fc1.weight': a float32 tensor of 128 bytes exceeds the limit of 127 bytes (max_tensor_bytes)");
    tp_load_options_init(&o);
    o.max_document_bytes = 4484;
    expect_load("max_document_bytes", mlp, &o, TP_ERR_CORRUPT,
                "document: document of 4485 bytes exceeds the limit of 4484 (max_document_bytes)");
    tp_load_options_init(&o);
    o.max_depth = 1;
    expect_load("max_depth", mlp, &o, TP_ERR_CORRUPT, "(max_depth)");
    tp_load_options_init(&o);
    o.max_items = 2;
    expect_load("max_items", mlp, &o, TP_ERR_CORRUPT, "(max_items)");

    /* example inputs: tensorplay's pickle (ops: x and y, float32[4, 6]) and
     * tpexport's .npy members (the same program saved by tpexport) */
    const char *ops = "fixtures/tensorplay/ops.pt2";
    tp_load_options_init(&o);
    o.max_tensor_bytes = 95;
    expect_load("max_tensor_bytes (pickled example)", ops, &o, TP_ERR_UNSUPPORTED,
                "pickle: a tensor of 96 bytes exceeds the limit of 95 bytes (max_tensor_bytes)");
    tp_archive *a = NULL;
    CHECK_OK(tp_archive_load(ops, NULL, &a));
    char saved[] = "/tmp/tp_test_limits_XXXXXX";
    int fd = mkstemp(saved);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    if (a && fd >= 0) {
        tp_archive_entry e = {tp_archive_program_name(a, 0), tp_archive_program(a, 0)};
        CHECK_OK(tp_archive_save(saved, &e, 1, NULL, 0));
        expect_load("max_tensor_bytes (.npy example)", saved, &o, TP_ERR_UNSUPPORTED,
                    "member 'data/sample_inputs/model/x.npy': a tensor of 96 bytes exceeds the limit of 95 bytes "
                    "(max_tensor_bytes)");
        o.max_tensor_bytes = 96;
        expect_load("max_tensor_bytes met (.npy example)", saved, &o, TP_OK, NULL);
    }
    if (fd >= 0) unlink(saved);
    tp_archive_free(a);

    /* loosening is the caller's mistake, refused before the file is read */
    tp_load_options_init(&o);
    o.max_nodes = (uint64_t)TP_LIMIT_NODES + 1;
    expect_load("loosened max_nodes", mlp, &o, TP_ERR_INVALID_ARG,
                "load options: max_nodes = 1048577 exceeds this build's limit of 1048576 (limits.h); it may only be lowered");
    tp_load_options_init(&o);
    o.max_name_bytes = TP_LIMIT_NAME + 1;
    expect_load("loosened max_name_bytes", mlp, &o, TP_ERR_INVALID_ARG, "max_name_bytes = 1025 exceeds");

    /* a caller built against the older, shorter struct: the new fields,
     * whatever lies past its struct_size, read as 0 (the defaults) */
    unsigned char old[sizeof(tp_load_options)];
    memset(old, 0xff, sizeof old);
    tp_load_options *po = (tp_load_options *)(void *)old;
    memset(po, 0, offsetof(tp_load_options, max_name_bytes));
    po->struct_size = offsetof(tp_load_options, max_name_bytes);
    expect_load("older options struct", mlp, po, TP_OK, NULL);
}

/* verify reports each problem of a document once: the header's count is
 * the number of lines, no line repeats, and each planted problem is on
 * exactly one line. */
TEST(test_verify_lists_each_problem_once) {
    static const char *const edits[] = {
        "\"qualname\": \"relu\"", "\"qualname\": \"no_such_function\"",
        "\"name\": \"softmax\"},", "\"name\": \"no_such_method\"},",
        "\"target\": \"fc1.bias\"", "\"target\": \"no.such.state\"",
    };
    size_t size = 0;
    void *image = edited_fixture("fixtures/tensorplay/mlp.pt2", "models/model.json", edits, 3, &size);
    CHECK(image != NULL);
    if (!image) return;
    CHECK_STATUS(tp_archive_verify_buffer(image, size, NULL), TP_ERR_CORRUPT);
    char *msg = tp_strdup(tp_last_error());
    tp_free(image);
    if (!msg) return;
    int declared = 0;
    CHECK_MSG(sscanf(msg, "%d problems:", &declared) == 1, "verify message does not start with a count: %s", msg);
    const char *lines[64];
    int n = 0;
    for (char *line = strchr(msg, '\n'); line && n < 64;) {
        *line++ = '\0';
        lines[n++] = line;
        line = strchr(line, '\n');
    }
    CHECK_MSG(n == declared, "%d problems declared, %d listed", declared, n);
    for (int i = 0; i < n; i++) {
        CHECK_MSG(strncmp(lines[i], "- program 'model': ", 19) == 0, "line '%s'", lines[i]);
        for (int j = 0; j < i; j++) CHECK_MSG(strcmp(lines[i], lines[j]) != 0, "listed twice: '%s'", lines[i]);
    }
    static const char *const planted[] = {"no_such_function", "no_such_method", "no.such.state"};
    for (size_t k = 0; k < TP_ARRAY_LEN(planted); k++) {
        int hits = 0;
        for (int i = 0; i < n; i++) hits += strstr(lines[i], planted[k]) != NULL;
        CHECK_MSG(hits == 1, "'%s' is on %d lines", planted[k], hits);
    }
    for (int i = 0; i < n; i++) printf("    %s\n", lines[i]);
    tp_free(msg);
}

TEST_MAIN(T(test_derived_dim_offset_bounds), T(test_derived_dim_range_overflow), T(test_derived_dim_call_overflow),
          T(test_shared_member_alignment), T(test_name_limit_round_trip), T(test_derived_name_limit),
          T(test_load_alloc_failures), T(test_verify_and_mapped_alloc_failures), T(test_save_and_module_alloc_failures),
          T(test_container_set_consumes_item), T(test_json_allocations_through_hook),
          T(test_inplace_and_view_ops_check_self), T(test_load_option_limits),
          T(test_verify_lists_each_problem_once))
