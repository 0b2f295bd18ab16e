/*
 * fuzz_zip.c - libFuzzer target for the ZIP reader (src/archive/zip.c).
 *
 * Opens the input as an archive with the default limits and reads every
 * member (copying and, for stored members, in place with the CRC check).
 * When an archive opens, its members that read cleanly are written again
 * with our writer (stored and deflated alternately) and the result must
 * read back to the same bytes, so the writer is fuzzed too. Any crash,
 * sanitizer report, leak or broken invariant (__builtin_trap) is a bug.
 *
 * Build and run: see fuzz/README.md.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "archive/zip.h"

#define REQUIRE(cond)                  \
    do {                               \
        if (!(cond)) __builtin_trap(); \
    } while (0)

/* Write the members of r that read cleanly and check they read back. */
static void rewrite(const tp_zip_reader *r) {
    tp_zip_writer *w = NULL;
    if (tp__zip_writer_new(&w) != TP_OK) return;
    int n = tp__zip_count(r);
    for (int i = 0; i < n; i++) {
        void *data = NULL;
        size_t size = 0;
        if (tp__zip_read(r, i, &data, &size) == TP_OK) {
            tp_status st = tp__zip_add(w, tp__zip_entry(r, i)->name, data, size, i % 2 == 1);
            REQUIRE(st == TP_OK || st == TP_ERR_NOMEM);
        }
        tp_free(data);
    }
    void *img = NULL;
    size_t img_size = 0;
    if (tp__zip_finish(w, &img, &img_size) != TP_OK) return;
    /* Deflate can reach ~1032:1 (long runs), above the default max_ratio. */
    tp_zip_limits limits = tp__zip_default_limits();
    limits.max_ratio = 1100;
    tp_zip_reader *again = NULL;
    REQUIRE(tp__zip_open(img, img_size, &limits, &again) == TP_OK);
    for (int i = 0; i < tp__zip_count(again); i++) {
        const tp_zip_entry *e = tp__zip_entry(again, i);
        int k = tp__zip_find(r, e->name);
        REQUIRE(k >= 0);
        void *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        REQUIRE(tp__zip_read(again, i, &a, &na) == TP_OK);
        REQUIRE(tp__zip_read(r, k, &b, &nb) == TP_OK);
        REQUIRE(na == nb && memcmp(a, b, na) == 0);
        if (e->method == 0) REQUIRE(e->data_offset % 64 == 0);
        tp_free(a);
        tp_free(b);
    }
    tp__zip_close(again);
    tp_free(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tp_zip_reader *r = NULL;
    if (tp__zip_open(data, size, NULL, &r) != TP_OK) {
        REQUIRE(r == NULL);
        return 0;
    }
    int n = tp__zip_count(r);
    for (int i = 0; i < n; i++) {
        const tp_zip_entry *e = tp__zip_entry(r, i);
        REQUIRE(e && tp__zip_find(r, e->name) == i);
        REQUIRE(e->data_offset <= size && e->comp_size <= size - e->data_offset);
        void *copy = NULL;
        size_t copy_size = 0;
        tp_status st = tp__zip_read(r, i, &copy, &copy_size);
        REQUIRE(st == TP_OK ? copy_size == e->size : copy == NULL);
        const void *p = NULL;
        size_t p_size = 0;
        if (tp__zip_stored(r, i, true, &p, &p_size) == TP_OK) {
            REQUIRE(st == TP_OK && p_size == copy_size && memcmp(p, copy, p_size) == 0);
            REQUIRE((const uint8_t *)p >= data && p_size <= size);
        }
        tp_free(copy);
    }
    rewrite(r);
    tp__zip_close(r);
    return 0;
}
