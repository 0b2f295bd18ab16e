/*
 * test_zip.c - tests for the ZIP reader and writer (src/archive/zip.c).
 *
 * Archives written by Python's zipfile (fixtures/zip/ok_*.zip) and broken
 * ones (fixtures/zip/bad_*.zip), with cases.json giving each valid member's
 * bytes and each broken archive's status and message, come from
 * tests/fixtures/gen_zip.py. Our writer's output is read back by our reader
 * and also checked structurally here, field by field, against the ZIP
 * format (so a reader bug cannot hide a writer bug). Set TP_ZIP_WRITE_DIR
 * to a directory to keep the written archives for checking with other
 * tools (python3 -m zipfile -t, unzip -t). Run from tests/.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive/zip.h"
#include "fail_alloc.h"
#include "internal.h"
#include "test_util.h"

#define ZIP_DIR "fixtures/zip/"

static bool read_file(const char *path, unsigned char **data, size_t *size) {
    FILE *f = fopen(path, "rb");
    *data = NULL;
    *size = 0;
    if (!f) return false;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc(n > 0 ? (size_t)n : 1);
    *size = n > 0 ? (size_t)n : 0;
    bool ok = *data && fread(*data, 1, *size, f) == *size;
    fclose(f);
    return ok;
}

/* Keep an archive for outside checks when TP_ZIP_WRITE_DIR is set. */
static void maybe_keep(const char *name, const void *data, size_t size) {
    const char *dir = getenv("TP_ZIP_WRITE_DIR");
    if (!dir) return;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, size, f);
    fclose(f);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Decode hex into a malloc'd buffer. */
static unsigned char *unhex(const char *hex, size_t *n) {
    size_t len = strlen(hex);
    *n = len / 2;
    unsigned char *out = malloc(*n + 1);
    for (size_t i = 0; i < *n; i++) out[i] = (unsigned char)(hexval(hex[2 * i]) * 16 + hexval(hex[2 * i + 1]));
    return out;
}

static uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get32(const unsigned char *p) { return (uint32_t)get16(p) | (uint32_t)get16(p + 2) << 16; }
static uint64_t get64(const unsigned char *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

/* ---- archives from Python's zipfile ------------------------------------ */

TEST(test_python_archives) {
    json_error_t jerr;
    json_t *root = json_load_file(ZIP_DIR "cases.json", 0, &jerr);
    CHECK_MSG(root != NULL, "cannot parse cases.json: %s", jerr.text);
    if (!root) return;
    size_t i, j;
    json_t *c, *m;
    int n_files = 0;
    json_array_foreach(json_object_get(root, "valid"), i, c) {
        const char *file = json_string_value(json_object_get(c, "file"));
        char path[256];
        snprintf(path, sizeof path, ZIP_DIR "%s", file);
        unsigned char *img;
        size_t img_size;
        CHECK_MSG(read_file(path, &img, &img_size), "cannot read %s", path);
        tp_zip_reader *r = NULL;
        tp_status st = tp__zip_open(img, img_size, NULL, &r);
        CHECK_MSG(st == TP_OK, "%s: %s: %s", file, tp_status_str(st), tp_last_error());
        json_t *members = json_object_get(c, "members");
        if (r) {
            CHECK_MSG(tp__zip_count(r) == (int)json_array_size(members), "%s: %d members", file, tp__zip_count(r));
            json_array_foreach(members, j, m) {
                const char *name = json_string_value(json_object_get(m, "name"));
                int method = (int)json_integer_value(json_object_get(m, "method"));
                size_t want_size;
                unsigned char *want = unhex(json_string_value(json_object_get(m, "hex")), &want_size);
                int k = tp__zip_find(r, name);
                CHECK_MSG(k == (int)j, "%s: find('%s') = %d", file, name, k);
                const tp_zip_entry *e = tp__zip_entry(r, k);
                if (e) {
                    CHECK_MSG(strcmp(e->name, name) == 0 && e->method == method && e->size == want_size,
                              "%s: entry '%s' method %u size %" PRIu64, file, e->name, e->method, e->size);
                    CHECK(e->data_offset + e->comp_size <= img_size);
                }
                void *got = NULL;
                size_t got_size = 0;
                st = tp__zip_read(r, k, &got, &got_size);
                CHECK_MSG(st == TP_OK, "%s: read '%s': %s", file, name, tp_last_error());
                CHECK_MSG(got && got_size == want_size && memcmp(got, want, want_size) == 0 &&
                              ((char *)got)[got_size] == '\0',
                          "%s: '%s' bytes differ", file, name);
                tp_free(got);
                const void *p = NULL;
                size_t p_size = 0;
                st = tp__zip_stored(r, k, true, &p, &p_size);
                if (method == 0) {
                    CHECK_MSG(st == TP_OK && p_size == want_size && (p_size == 0 || memcmp(p, want, want_size) == 0),
                              "%s: stored '%s': %s", file, name, tp_last_error());
                    CHECK(e && p == img + e->data_offset);
                } else {
                    CHECK_STATUS(st, TP_ERR_UNSUPPORTED);
                    CHECK(p == NULL);
                }
                free(want);
            }
            CHECK(tp__zip_find(r, "no such member") == -1);
        }
        tp__zip_close(r);
        free(img);
        n_files++;
    }
    CHECK_MSG(n_files >= 6, "only %d valid archives", n_files);
    json_decref(root);
}

/* ---- malformed archives ------------------------------------------------ */

static void apply_limits(json_t *j, tp_zip_limits *l) {
    *l = tp__zip_default_limits();
    json_t *v;
    if ((v = json_object_get(j, "max_members"))) l->max_members = (uint32_t)json_integer_value(v);
    if ((v = json_object_get(j, "max_member_size"))) l->max_member_size = (uint64_t)json_integer_value(v);
    if ((v = json_object_get(j, "max_total_size"))) l->max_total_size = (uint64_t)json_integer_value(v);
    if ((v = json_object_get(j, "max_ratio"))) l->max_ratio = (uint32_t)json_integer_value(v);
}

static void check_failure(const char *file, const char *what, tp_status st, const char *status, const char *message) {
    CHECK_MSG(strcmp(tp_status_str(st), status) == 0, "%s: %s returned %s, want %s (%s)", file, what,
              tp_status_str(st), status, tp_last_error());
    CHECK_MSG(strstr(tp_last_error(), message) != NULL, "%s: %s message \"%s\" lacks \"%s\"", file, what,
              tp_last_error(), message);
}

TEST(test_malformed_archives) {
    json_error_t jerr;
    json_t *root = json_load_file(ZIP_DIR "cases.json", 0, &jerr);
    CHECK_MSG(root != NULL, "cannot parse cases.json: %s", jerr.text);
    if (!root) return;
    size_t i;
    json_t *c;
    int n = 0;
    json_array_foreach(json_object_get(root, "malformed"), i, c) {
        const char *file = json_string_value(json_object_get(c, "file"));
        const char *stage = json_string_value(json_object_get(c, "stage"));
        const char *status = json_string_value(json_object_get(c, "status"));
        const char *message = json_string_value(json_object_get(c, "message"));
        tp_zip_limits limits;
        apply_limits(json_object_get(c, "limits"), &limits);
        char path[256];
        snprintf(path, sizeof path, ZIP_DIR "%s", file);
        unsigned char *img;
        size_t img_size;
        CHECK_MSG(read_file(path, &img, &img_size), "cannot read %s", path);
        tp_zip_reader *r = (tp_zip_reader *)&limits; /* must be reset to NULL on failure */
        tp_status st = tp__zip_open(img, img_size, &limits, &r);
        if (strcmp(stage, "open") == 0) {
            check_failure(file, "open", st, status, message);
            CHECK_MSG(r == NULL, "%s: reader not NULL after a failed open", file);
            if (st == TP_OK) tp__zip_close(r);
        } else {
            const char *member = json_string_value(json_object_get(c, "member"));
            CHECK_MSG(st == TP_OK, "%s: open failed: %s", file, tp_last_error());
            int k = tp__zip_find(r, member);
            CHECK_MSG(st != TP_OK || k >= 0, "%s: no member '%s'", file, member);
            void *data = (void *)&limits;
            size_t size = 7;
            st = tp__zip_read(r, k, &data, &size);
            check_failure(file, "read", st, status, message);
            CHECK(data == NULL && size == 0);
            if (st == TP_OK) tp_free(data);
            /* the zero-copy path checks the CRC the same way */
            const tp_zip_entry *e = tp__zip_entry(r, k);
            if (e && e->method == 0) {
                const void *p = &limits;
                check_failure(file, "stored", tp__zip_stored(r, k, true, &p, &size), status, message);
                CHECK(p == NULL);
                CHECK_OK(tp__zip_stored(r, k, false, &p, &size));
            }
            tp__zip_close(r);
        }
        free(img);
        n++;
    }
    CHECK_MSG(n >= 20, "only %d malformed archives", n);
    json_decref(root);
}

/* Every prefix of a valid archive, and every single-byte change of one, is
 * refused or read cleanly: no crash, no leak (ASan watches). */
TEST(test_truncations_and_bit_flips) {
    const char *files[] = {ZIP_DIR "ok_mixed.zip", ZIP_DIR "ok_zip64_full.zip", ZIP_DIR "ok_descriptors.zip"};
    for (size_t f = 0; f < TP_ARRAY_LEN(files); f++) {
        unsigned char *img;
        size_t size;
        CHECK_MSG(read_file(files[f], &img, &size), "cannot read %s", files[f]);
        for (size_t len = 0; len < size; len++) {
            unsigned char *copy = malloc(len + 1);
            memcpy(copy, img, len);
            tp_zip_reader *r = NULL;
            tp_status st = tp__zip_open(copy, len, NULL, &r);
            CHECK_MSG(st == TP_ERR_CORRUPT || st == TP_ERR_UNSUPPORTED, "%s cut at %zu: %s", files[f], len,
                      tp_status_str(st));
            tp__zip_close(r);
            free(copy);
        }
        for (size_t pos = 0; pos < size; pos++) {
            img[pos] ^= 0x5A;
            tp_zip_reader *r = NULL;
            if (tp__zip_open(img, size, NULL, &r) == TP_OK) {
                for (int k = 0; k < tp__zip_count(r); k++) {
                    void *d = NULL;
                    size_t n = 0;
                    tp_status st = tp__zip_read(r, k, &d, &n);
                    CHECK(st == TP_OK || st == TP_ERR_CORRUPT);
                    tp_free(d);
                }
            }
            tp__zip_close(r);
            img[pos] ^= 0x5A;
        }
        free(img);
    }
}

/* ---- writer ------------------------------------------------------------ */

typedef struct member_spec {
    const char *name;
    size_t size;
    bool deflate;
} member_spec;

static const member_spec round_trip_members[] = {
    {"empty", 0, false},          {"one", 1, false},           {"sixty-three", 63, false},
    {"sixty-four", 64, false},    {"dir/sixty-five", 65, false}, {"text.json", 3000, true},
    {"weights/w0.bin", 1000, false}, {"empty-deflated", 0, true}, {"\xc3\xbcnicode.txt", 17, false},
    {"a/b/c/deep-name-that-is-longer-than-the-usual-ones.bin", 333, false},
    {"small-deflated", 5, true},
};

/* Deterministic member contents: text for deflated members, bytes else. */
static unsigned char *member_bytes(const member_spec *m) {
    unsigned char *p = malloc(m->size + 1);
    for (size_t i = 0; i < m->size; i++)
        p[i] = m->deflate ? (unsigned char)("{\"key\": [1, 2, 3], \"text\": \"abc\"}\n"[i % 35])
                          : (unsigned char)(i * 31 + strlen(m->name));
    return p;
}

static tp_status write_archive(const member_spec *ms, size_t n, bool zip64, void **out, size_t *out_size) {
    tp_zip_writer *w = NULL;
    TP_TRY(tp__zip_writer_new(&w));
    tp__zip_writer_force_zip64(w, zip64);
    for (size_t i = 0; i < n; i++) {
        unsigned char *d = member_bytes(&ms[i]);
        tp_status st = tp__zip_add(w, ms[i].name, d, ms[i].size, ms[i].deflate);
        free(d);
        if (st != TP_OK) {
            tp__zip_writer_free(w);
            return st;
        }
    }
    return tp__zip_finish(w, out, out_size);
}

/* Read the archive back with our reader and compare every member. */
static void check_read_back(const char *what, const unsigned char *img, size_t size, const member_spec *ms, size_t n) {
    tp_zip_reader *r = NULL;
    tp_status st = tp__zip_open(img, size, NULL, &r);
    CHECK_MSG(st == TP_OK, "%s: open: %s", what, tp_last_error());
    if (!r) return;
    CHECK(tp__zip_count(r) == (int)n);
    for (size_t i = 0; i < n; i++) {
        int k = tp__zip_find(r, ms[i].name);
        CHECK_MSG(k == (int)i, "%s: find %s = %d", what, ms[i].name, k);
        const tp_zip_entry *e = tp__zip_entry(r, k);
        if (!e) continue;
        unsigned char *want = member_bytes(&ms[i]);
        CHECK(e->size == ms[i].size && e->method == (ms[i].deflate ? 8 : 0));
        CHECK(e->crc32 == tp__crc32(0, want, ms[i].size));
        void *got = NULL;
        size_t got_size = 0;
        CHECK_OK(tp__zip_read(r, k, &got, &got_size));
        CHECK_MSG(got && got_size == ms[i].size && memcmp(got, want, got_size) == 0, "%s: %s differs", what,
                  ms[i].name);
        tp_free(got);
        if (!ms[i].deflate) {
            const void *p = NULL;
            size_t p_size = 0;
            CHECK_OK(tp__zip_stored(r, k, true, &p, &p_size));
            CHECK_MSG(e->data_offset % 64 == 0 && (size_t)((const unsigned char *)p - img) % 64 == 0,
                      "%s: %s data at offset %" PRIu64 " is not 64-byte aligned", what, ms[i].name, e->data_offset);
            CHECK(p_size == ms[i].size && (p_size == 0 || memcmp(p, want, p_size) == 0));
        } else {
            CHECK(e->comp_size > 0);
        }
        free(want);
    }
    tp__zip_close(r);
}

/* Walk the archive with independent parsing code and check the format's
 * invariants: signatures, versions, fixed timestamps, CRCs, sizes, the
 * alignment extra field, zip64 records when asked, and that the central
 * directory and local headers agree. */
static void check_structure(const char *what, const unsigned char *d, size_t size, const member_spec *ms, size_t n,
                            bool zip64) {
    CHECK_MSG(size >= 22, "%s: %zu bytes", what, size);
    if (size < 22) return;
    const unsigned char *e = d + size - 22;
    CHECK_MSG(get32(e) == 0x06054b50, "%s: no end record at size - 22", what);
    CHECK(get16(e + 4) == 0 && get16(e + 6) == 0 && get16(e + 20) == 0);
    uint64_t count = get16(e + 10), cd_size = get32(e + 12), cd_off = get32(e + 16);
    CHECK(get16(e + 8) == get16(e + 10));
    bool has_locator = size >= 42 && get32(e - 20) == 0x07064b50;
    CHECK_MSG(has_locator == (zip64 || n >= 0xFFFF), "%s: zip64 locator %d", what, has_locator);
    if (has_locator) {
        uint64_t rec = get64(e - 20 + 8);
        CHECK(get32(e - 20 + 4) == 0 && get32(e - 20 + 16) == 1);
        CHECK(rec + 56 == size - 22 - 20);
        if (rec + 56 != size - 42) return;
        const unsigned char *z = d + rec;
        CHECK(get32(z) == 0x06064b50 && get64(z + 4) == 44 && get16(z + 12) == (3 << 8 | 45) && get16(z + 14) == 45);
        CHECK(get32(z + 16) == 0 && get32(z + 20) == 0);
        CHECK(get64(z + 24) == n && get64(z + 32) == n);
        CHECK(count == (n >= 0xFFFF ? 0xFFFF : n));
        count = get64(z + 32);
        cd_size = get64(z + 40);
        cd_off = get64(z + 48);
        CHECK(cd_off + cd_size == rec);
    } else {
        CHECK(cd_off + cd_size == size - 22);
    }
    CHECK(count == n);
    if (count != n || cd_off + cd_size > size) return;
    const unsigned char *c = d + cd_off;
    uint64_t expected_local = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK_MSG(get32(c) == 0x02014b50, "%s: central header %zu signature", what, i);
        if (get32(c) != 0x02014b50) return;
        uint16_t name_len = get16(c + 28), extra_len = get16(c + 30);
        unsigned char *want = member_bytes(&ms[i]);
        uint32_t crc = tp__crc32(0, want, ms[i].size);
        free(want);
        CHECK(name_len == strlen(ms[i].name) && memcmp(c + 46, ms[i].name, name_len) == 0);
        CHECK(get16(c + 4) >> 8 == 3);                             /* made by Unix */
        CHECK(get16(c + 6) == (zip64 ? 45 : 20));                  /* version needed */
        CHECK(get16(c + 10) == (ms[i].deflate ? 8 : 0));
        CHECK(get16(c + 12) == 0 && get16(c + 14) == (1 << 5 | 1)); /* 00:00 1980-01-01 */
        CHECK(get32(c + 16) == crc);
        CHECK(get16(c + 32) == 0 && get16(c + 34) == 0);
        uint64_t comp = get32(c + 20), usize = get32(c + 24), off = get32(c + 42);
        if (zip64) {
            CHECK(comp == 0xFFFFFFFF && usize == 0xFFFFFFFF && off == 0xFFFFFFFF);
            CHECK(extra_len == 28 && get16(c + 46 + name_len) == 1 && get16(c + 48 + name_len) == 24);
            usize = get64(c + 50 + name_len);
            comp = get64(c + 58 + name_len);
            off = get64(c + 66 + name_len);
        } else {
            CHECK(extra_len == 0);
        }
        CHECK(usize == ms[i].size);
        CHECK(ms[i].deflate || comp == usize);
        /* Members are written back to back from offset 0. */
        CHECK_MSG(off == expected_local, "%s: %s local header at %" PRIu64 ", want %" PRIu64, what, ms[i].name, off,
                  expected_local);
        if (off + 30 > size) return;
        const unsigned char *l = d + off;
        CHECK(get32(l) == 0x04034b50);
        CHECK(get16(l + 4) == get16(c + 6) && get16(l + 6) == get16(c + 8) && get16(l + 8) == get16(c + 10));
        CHECK(get16(l + 10) == 0 && get16(l + 12) == (1 << 5 | 1) && get32(l + 14) == crc);
        uint16_t lname = get16(l + 26), lextra = get16(l + 28);
        CHECK(lname == name_len && memcmp(l + 30, ms[i].name, lname) == 0);
        /* the local extra fields: zip64 (sizes), then alignment padding */
        const unsigned char *x = l + 30 + lname;
        size_t xp = 0;
        bool saw_zip64 = false;
        while (xp + 4 <= lextra) {
            uint16_t id = get16(x + xp), len = get16(x + xp + 2);
            CHECK_MSG(xp + 4 + len <= lextra, "%s: %s local extra field overruns", what, ms[i].name);
            if (id == 1) {
                saw_zip64 = true;
                CHECK(len == 16 && get64(x + xp + 4) == ms[i].size && get64(x + xp + 12) == comp);
                CHECK(get32(l + 18) == 0xFFFFFFFF && get32(l + 22) == 0xFFFFFFFF);
            } else {
                CHECK_MSG(id == 0xD935 && len >= 2 && get16(x + xp + 4) == 64, "%s: %s extra id 0x%04x", what,
                          ms[i].name, id);
            }
            xp += 4 + (size_t)len;
        }
        CHECK(xp == lextra);
        CHECK(saw_zip64 == zip64);
        if (!zip64) CHECK(get32(l + 18) == comp && get32(l + 22) == usize);
        uint64_t data_off = off + 30 + lname + lextra;
        if (!ms[i].deflate) CHECK_MSG(data_off % 64 == 0, "%s: %s data at %" PRIu64, what, ms[i].name, data_off);
        expected_local = data_off + comp;
        c += 46 + name_len + extra_len;
    }
    CHECK(expected_local == cd_off);
    CHECK((uint64_t)(c - d) == cd_off + cd_size);
}

TEST(test_write_round_trip) {
    size_t n = TP_ARRAY_LEN(round_trip_members);
    for (int zip64 = 0; zip64 < 2; zip64++) {
        void *img = NULL;
        size_t size = 0;
        CHECK_OK(write_archive(round_trip_members, n, zip64, &img, &size));
        if (!img) continue;
        const char *what = zip64 ? "zip64" : "plain";
        check_structure(what, img, size, round_trip_members, n, zip64);
        check_read_back(what, img, size, round_trip_members, n);
        maybe_keep(zip64 ? "round_trip_zip64.zip" : "round_trip.zip", img, size);
        /* reproducible: the same members give the same bytes */
        void *again = NULL;
        size_t again_size = 0;
        CHECK_OK(write_archive(round_trip_members, n, zip64, &again, &again_size));
        CHECK(again && again_size == size && memcmp(again, img, size) == 0);
        tp_free(again);
        tp_free(img);
    }
}

TEST(test_write_empty_archive) {
    tp_zip_writer *w = NULL;
    CHECK_OK(tp__zip_writer_new(&w));
    void *img = NULL;
    size_t size = 0;
    CHECK_OK(tp__zip_finish(w, &img, &size));
    CHECK(size == 22);
    check_structure("empty", img, size, NULL, 0, false);
    tp_zip_reader *r = NULL;
    CHECK_OK(tp__zip_open(img, size, NULL, &r));
    CHECK(tp__zip_count(r) == 0 && tp__zip_entry(r, 0) == NULL && tp__zip_find(r, "x") == -1);
    tp__zip_close(r);
    maybe_keep("empty.zip", img, size);
    tp_free(img);
}

/* 0xFFFF or more members need the zip64 end records. */
TEST(test_write_many_members) {
    enum { N = 0x10000 + 10 };
    member_spec *ms = malloc(N * sizeof *ms);
    char(*names)[16] = malloc((size_t)N * 16);
    tp_zip_writer *w = NULL;
    CHECK_OK(tp__zip_writer_new(&w));
    for (int i = 0; i < N; i++) {
        snprintf(names[i], 16, "m%d", i);
        ms[i].name = names[i];
        ms[i].size = (size_t)(i % 3);
        ms[i].deflate = false;
        unsigned char *d = member_bytes(&ms[i]);
        tp_status st = tp__zip_add(w, names[i], d, ms[i].size, false);
        free(d);
        if (st != TP_OK) {
            CHECK_OK(st);
            break;
        }
    }
    CHECK(tp__zip_has(w, "m0") && tp__zip_has(w, "m65545") && !tp__zip_has(w, "m65546"));
    void *img = NULL;
    size_t size = 0;
    CHECK_OK(tp__zip_finish(w, &img, &size));
    if (img) {
        check_structure("many", img, size, ms, N, false);
        tp_zip_reader *r = NULL;
        CHECK_OK(tp__zip_open(img, size, NULL, &r));
        CHECK(tp__zip_count(r) == N);
        CHECK(tp__zip_find(r, "m65545") == 65545 && tp__zip_find(r, "m12345") == 12345);
        tp__zip_close(r);
        tp_zip_limits lim = tp__zip_default_limits();
        lim.max_members = 0xFFFF;
        CHECK_STATUS(tp__zip_open(img, size, &lim, &r), TP_ERR_UNSUPPORTED);
        CHECK_ERR_CONTAINS("member count 65546 exceeds the limit of 65535");
        maybe_keep("many.zip", img, size);
    }
    tp_free(img);
    free(names);
    free(ms);
}

TEST(test_writer_errors) {
    tp_zip_writer *w = NULL;
    CHECK_OK(tp__zip_writer_new(&w));
    CHECK_OK(tp__zip_add(w, "a.txt", "abc", 3, false));
    CHECK(tp__zip_has(w, "a.txt") && !tp__zip_has(w, "b.txt") && !tp__zip_has(w, NULL) && !tp__zip_has(NULL, "a"));
    CHECK_STATUS(tp__zip_add(w, "a.txt", "xyz", 3, true), TP_ERR_DUPLICATE);
    CHECK_ERR_CONTAINS("duplicate member 'a.txt'");
    CHECK_STATUS(tp__zip_add(w, "../x", "x", 1, false), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("'..' path component");
    CHECK_STATUS(tp__zip_add(w, "/abs", "x", 1, false), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("absolute path");
    CHECK_STATUS(tp__zip_add(w, "", "x", 1, false), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("empty name");
    CHECK_STATUS(tp__zip_add(w, "n", NULL, 1, false), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp__zip_add(w, NULL, "x", 1, false), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp__zip_add(NULL, "n", "x", 1, false), TP_ERR_INVALID_ARG);
    char *long_name = malloc(70000);
    memset(long_name, 'x', 69999);
    long_name[69999] = '\0';
    CHECK_STATUS(tp__zip_add(w, long_name, "x", 1, false), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("too long (69999 bytes)");
    free(long_name);
    /* the failed adds left nothing behind */
    CHECK_OK(tp__zip_add(w, "b.txt", NULL, 0, true));
    void *img = NULL;
    size_t size = 0;
    CHECK_STATUS(tp__zip_finish(w, NULL, &size), TP_ERR_INVALID_ARG); /* frees w */
    CHECK_STATUS(tp__zip_finish(NULL, &img, &size), TP_ERR_INVALID_ARG);
    CHECK(img == NULL && size == 0);
    tp__zip_writer_free(NULL);
    CHECK_STATUS(tp__zip_writer_new(NULL), TP_ERR_INVALID_ARG);
}

TEST(test_reader_api) {
    const member_spec ms[] = {{"s", 10, false}, {"d", 100, true}};
    void *img = NULL;
    size_t size = 0;
    CHECK_OK(write_archive(ms, 2, false, &img, &size));
    tp_zip_reader *r = NULL;
    CHECK_STATUS(tp__zip_open(img, size, NULL, NULL), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp__zip_open(NULL, 10, NULL, &r), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp__zip_open(NULL, 0, NULL, &r), TP_ERR_CORRUPT);
    CHECK(r == NULL);
    CHECK_OK(tp__zip_open(img, size, NULL, &r));
    void *d = NULL;
    size_t n = 0;
    const void *p = NULL;
    CHECK_STATUS(tp__zip_read(r, 2, &d, &n), TP_ERR_INDEX);
    CHECK_ERR_CONTAINS("member index 2 out of range (2 members)");
    CHECK_STATUS(tp__zip_read(r, -1, &d, &n), TP_ERR_INDEX);
    CHECK_STATUS(tp__zip_read(NULL, 0, &d, &n), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp__zip_read(r, 0, NULL, &n), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp__zip_stored(r, 5, false, &p, &n), TP_ERR_INDEX);
    CHECK_STATUS(tp__zip_stored(r, 1, false, &p, &n), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("member 'd' is compressed");
    CHECK_STATUS(tp__zip_stored(r, 0, false, NULL, &n), TP_ERR_INVALID_ARG);
    CHECK(tp__zip_entry(r, -1) == NULL && tp__zip_entry(r, 2) == NULL && tp__zip_entry(NULL, 0) == NULL);
    CHECK(tp__zip_find(r, NULL) == -1 && tp__zip_find(NULL, "s") == -1);
    CHECK(tp__zip_count(NULL) == 0);
    tp__zip_close(r);
    tp__zip_close(NULL);
    tp_free(img);
}

/* A real high-ratio member (2 MiB of zeros, ~1023:1) passes with a higher
 * max_ratio and is refused under the default. */
TEST(test_ratio_limit) {
    unsigned char *img;
    size_t size;
    CHECK(read_file(ZIP_DIR "bad_zip_bomb.zip", &img, &size));
    tp_zip_reader *r = NULL;
    CHECK_STATUS(tp__zip_open(img, size, NULL, &r), TP_ERR_CORRUPT);
    tp_zip_limits lim = tp__zip_default_limits();
    lim.max_ratio = 1100;
    CHECK_OK(tp__zip_open(img, size, &lim, &r));
    void *d = NULL;
    size_t n = 0;
    CHECK_OK(tp__zip_read(r, 0, &d, &n));
    CHECK(n == (2u << 20));
    bool zeros = d != NULL;
    for (size_t i = 0; zeros && i < n; i++) zeros = ((unsigned char *)d)[i] == 0;
    CHECK(zeros);
    tp_free(d);
    tp__zip_close(r);
    free(img);
}

TEST(test_crc32) {
    CHECK(tp__crc32(0, "123456789", 9) == 0xCBF43926u);
    CHECK(tp__crc32(tp__crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u);
    CHECK(tp__crc32(0, "", 0) == 0);
    tp_zip_limits l = tp__zip_default_limits();
    CHECK(l.max_member_size == (uint64_t)8 << 30 && l.max_total_size == (uint64_t)64 << 30);
    CHECK(l.max_members == 1u << 20 && l.max_ratio == 1000);
}

/* ---- allocation failures ----------------------------------------------- */

typedef struct {
    const unsigned char *img;
    size_t size;
} image_ctx;

static tp_status open_and_read_all(void *ctx) {
    image_ctx *c = ctx;
    tp_zip_reader *r = NULL;
    TP_TRY(tp__zip_open(c->img, c->size, NULL, &r));
    for (int k = 0; k < tp__zip_count(r); k++) {
        void *d = NULL;
        size_t n = 0;
        tp_status st = tp__zip_read(r, k, &d, &n);
        tp_free(d);
        if (st != TP_OK) {
            tp__zip_close(r);
            return st;
        }
    }
    tp__zip_close(r);
    return TP_OK;
}

static tp_status write_round_trip(void *ctx) {
    bool zip64 = ctx != NULL;
    void *img = NULL;
    size_t size = 0;
    TP_TRY(write_archive(round_trip_members, TP_ARRAY_LEN(round_trip_members), zip64, &img, &size));
    tp_free(img);
    return TP_OK;
}

TEST(test_alloc_failures) {
    const char *files[] = {ZIP_DIR "ok_deflated.zip", ZIP_DIR "ok_zip64_full.zip", ZIP_DIR "ok_mixed.zip"};
    for (size_t f = 0; f < TP_ARRAY_LEN(files); f++) {
        unsigned char *img;
        size_t size;
        CHECK(read_file(files[f], &img, &size));
        image_ctx c = {img, size};
        check_alloc_failures(files[f], open_and_read_all, &c);
        free(img);
    }
    check_alloc_failures("write", write_round_trip, NULL);
    check_alloc_failures("write zip64", write_round_trip, (void *)1);
}

TEST_MAIN(T(test_python_archives), T(test_malformed_archives), T(test_truncations_and_bit_flips),
          T(test_write_round_trip), T(test_write_empty_archive), T(test_write_many_members), T(test_writer_errors),
          T(test_reader_api), T(test_ratio_limit), T(test_crc32), T(test_alloc_failures))
