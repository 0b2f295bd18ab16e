/*
 * test_util.h - a tiny test harness (header-only).
 *
 * CHECK(cond) records a failure with file:line and continues; CHECK_OK(expr)
 * requires TP_OK and prints tp_last_error() otherwise; CHECK_STATUS(expr,
 * code) requires a specific failure; CHECK_ERR_CONTAINS(substr) checks the
 * last error message. TEST_MAIN() runs every TEST registered in the file's
 * `tests` table and prints "N passed, N failed".
 * Run from the tests/ directory (ctest does): fixtures are fixtures/<file>.
 */
#ifndef TP_TEST_UTIL_H
#define TP_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpexport/tpexport.h"

static int tp_test_current_failed = 0;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            tp_test_current_failed++;                                                 \
        }                                                                             \
    } while (0)

#define CHECK_MSG(cond, ...)                                                  \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "  %s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            tp_test_current_failed++;                                         \
        }                                                                     \
    } while (0)

#define CHECK_OK(expr)                                                                     \
    do {                                                                                   \
        tp_status s_ = (expr);                                                             \
        if (s_ != TP_OK) {                                                                 \
            fprintf(stderr, "  %s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #expr,    \
                    tp_status_str(s_), tp_last_error());                                   \
            tp_test_current_failed++;                                                      \
        }                                                                                  \
    } while (0)

#define CHECK_STATUS(expr, code)                                                            \
    do {                                                                                    \
        tp_status s_ = (expr);                                                              \
        if (s_ != (code)) {                                                                 \
            fprintf(stderr, "  %s:%d: %s returned %s, expected %s (msg: %s)\n", __FILE__, __LINE__, \
                    #expr, tp_status_str(s_), tp_status_str(code), tp_last_error());        \
            tp_test_current_failed++;                                                       \
        }                                                                                   \
    } while (0)

#define CHECK_ERR_CONTAINS(substr)                                                          \
    do {                                                                                    \
        if (!strstr(tp_last_error(), (substr))) {                                           \
            fprintf(stderr, "  %s:%d: error message \"%s\" lacks \"%s\"\n", __FILE__, __LINE__, \
                    tp_last_error(), (substr));                                             \
            tp_test_current_failed++;                                                       \
        }                                                                                   \
    } while (0)

/* Compare two tensors with allclose; prints the mismatch. */
#define CHECK_CLOSE(a, b, rtol, atol)                                                      \
    do {                                                                                   \
        char m_[256];                                                                      \
        if (!(a) || !(b) || !tp_tensor_allclose((a), (b), (rtol), (atol), m_, sizeof m_)) { \
            fprintf(stderr, "  %s:%d: tensors differ: %s\n", __FILE__, __LINE__,           \
                    (a) && (b) ? m_ : "NULL tensor");                                      \
            tp_test_current_failed++;                                                      \
        }                                                                                  \
    } while (0)

typedef struct {
    const char *name;
    void (*fn)(void);
} tp_test_case;

#define TEST(name) static void name(void)

/* Load fixtures/<name>.npy or return NULL (recording a failure). */
static inline tp_tensor *load_fixture(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "fixtures/%s.npy", name);
    tp_tensor *t = NULL;
    if (tp_npy_load(path, &t) != TP_OK) {
        fprintf(stderr, "  cannot load %s: %s\n", path, tp_last_error());
        tp_test_current_failed++;
        return NULL;
    }
    return t;
}

static inline int tp_test_run(const tp_test_case *tests, size_t n, int argc, char **argv) {
    int passed = 0, failed = 0;
    tp_ops_init(); /* the registry's one-time allocations are not leaks */
    for (size_t i = 0; i < n; i++) {
        if (argc > 1 && !strstr(tests[i].name, argv[1])) continue;
        tp_test_current_failed = 0;
        long blocks_before = tp_alloc_live_blocks();
        tests[i].fn();
        long leaked = tp_alloc_live_blocks() - blocks_before;
        if (leaked != 0) {
            fprintf(stderr, "  %s: %ld blocks leaked\n", tests[i].name, leaked);
            tp_test_current_failed++;
        }
        if (tp_test_current_failed) {
            printf("FAIL %s\n", tests[i].name);
            failed++;
        } else {
            printf("ok   %s\n", tests[i].name);
            passed++;
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

#define TEST_MAIN(...)                                                       \
    int main(int argc, char **argv) {                                        \
        static const tp_test_case tests_[] = {__VA_ARGS__};                  \
        return tp_test_run(tests_, sizeof tests_ / sizeof tests_[0], argc, argv); \
    }
#define T(name) {#name, name}

#endif
