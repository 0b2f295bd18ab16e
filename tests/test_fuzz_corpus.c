/*
 * test_fuzz_corpus.c - replays every seed of fuzz/corpus/<target>/ and every
 * regression input of fixtures/crashes/<target>/ through the fuzz target
 * bodies (fuzz/targets.c) for archive, program_json, onnx and npy, so the
 * ordinary (gcc, sanitizer) test suite checks them without clang. A crash,
 * sanitizer report or leak fails the run; the targets trap on a broken
 * invariant.
 */
#include <dirent.h>
#include <stdint.h>

#include "targets.h"
#include "test_util.h"

typedef int (*fuzz_fn)(const uint8_t *, size_t);

static char *slurp(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 4096;
            char *nb = realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) break;
    }
    fclose(f);
    *size = len;
    return buf;
}

/* Run fn on every regular file of dir; returns how many. A missing
 * directory counts 0 (crash folders appear when a finding is fixed). */
static int replay_dir(const char *dir, fuzz_fn fn) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t size = 0;
        char *data = slurp(path, &size);
        if (!data) continue; /* a subdirectory or unreadable */
        fn((const uint8_t *)data, size);
        free(data);
        n++;
    }
    closedir(d);
    return n;
}

static void replay(const char *target, fuzz_fn fn, int min_seeds) {
    char dir[256];
    snprintf(dir, sizeof dir, "../fuzz/corpus/%s", target);
    int seeds = replay_dir(dir, fn);
    snprintf(dir, sizeof dir, "fixtures/crashes/%s", target);
    int crashes = replay_dir(dir, fn);
    CHECK_MSG(seeds >= min_seeds, "%s: %d seeds in fuzz/corpus/%s, expected at least %d", target, seeds, target,
              min_seeds);
    printf("  %s: %d seeds, %d crash inputs\n", target, seeds, crashes);
}

TEST(test_archive_corpus) { replay("archive", tp_fuzz_archive, 3); }
TEST(test_program_json_corpus) { replay("program_json", tp_fuzz_program_json, 3); }
TEST(test_npy_corpus) { replay("npy", tp_fuzz_npy, 3); }
TEST(test_onnx_corpus) { replay("onnx", tp_fuzz_onnx, 10); }

TEST(test_truncated_seeds) {
    /* prefixes of one seed per target (lengths growing by ~1/8): the
     * targets must refuse them cleanly */
    struct {
        const char *path;
        fuzz_fn fn;
    } seeds[] = {{"../fuzz/corpus/npy/f32_2x3.npy", tp_fuzz_npy},
                 {"../fuzz/corpus/program_json/tpexport_counter.json", tp_fuzz_program_json},
                 {"../fuzz/corpus/archive/tensorplay_mlp.pt2", tp_fuzz_archive},
                 {"../fuzz/corpus/onnx/conv.onnx", tp_fuzz_onnx}};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        size_t size = 0;
        char *data = slurp(seeds[i].path, &size);
        CHECK_MSG(data != NULL, "cannot read %s", seeds[i].path);
        for (size_t len = 0; data && len < size; len += 1 + len / 8) seeds[i].fn((const uint8_t *)data, len);
        free(data);
    }
}

TEST_MAIN(T(test_archive_corpus), T(test_program_json_corpus), T(test_npy_corpus), T(test_onnx_corpus),
          T(test_truncated_seeds))
