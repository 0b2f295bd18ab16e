/*
 * fail_alloc.h - allocation-failure injection for the tests (header-only).
 *
 * check_alloc_failures(what, op, ctx) runs `op` once per allocation it makes,
 * with an allocation hook (tp_set_allocator) that fails the k-th allocation
 * or reallocation, for k = 0, 1, ... until `op` completes without reaching
 * allocation k. Every failing run must return TP_ERR_NOMEM and leave
 * tp_alloc_live_blocks() where it was (no leak, no double free: ASan checks
 * the rest). `op` must free whatever it creates when it succeeds. The
 * default allocator is restored after every run; the hook is libc-based, so
 * blocks allocated before or after the switch are interchangeable.
 */
#ifndef TP_FAIL_ALLOC_H
#define TP_FAIL_ALLOC_H

#include <stdlib.h>

#include "test_util.h"

typedef struct {
    long calls;   /* allocations + reallocations seen */
    long fail_at; /* index of the one to fail; -1: never */
} fail_alloc_state;

static fail_alloc_state g_fail_alloc = {0, -1};

static void *fail_alloc_fn(void *user, void *ptr, size_t old_size, size_t new_size) {
    (void)user;
    (void)old_size;
    if (new_size == 0) {
        free(ptr);
        return NULL;
    }
    if (g_fail_alloc.calls++ == g_fail_alloc.fail_at) return NULL;
    return realloc(ptr, new_size);
}

typedef tp_status (*fail_alloc_op)(void *ctx);

/* Returns the number of allocations `op` makes when nothing fails; an op
 * that makes none is a failure unless may_not_allocate. */
static long check_alloc_failures_ex(const char *what, fail_alloc_op op, void *ctx, bool may_not_allocate) {
    long k;
    for (k = 0; k < 100000; k++) {
        long before = tp_alloc_live_blocks();
        g_fail_alloc.calls = 0;
        g_fail_alloc.fail_at = k;
        tp_set_allocator(fail_alloc_fn, NULL);
        tp_status st = op(ctx);
        tp_set_allocator(NULL, NULL);
        bool injected = g_fail_alloc.calls > k;
        g_fail_alloc.fail_at = -1;
        long leaked = tp_alloc_live_blocks() - before;
        if (!injected) {
            CHECK_MSG(st == TP_OK, "%s: returned %s without a failed allocation: %s", what,
                      tp_status_str(st), tp_last_error());
            CHECK_MSG(leaked == 0, "%s: %ld blocks leaked on success", what, leaked);
            break;
        }
        CHECK_MSG(st == TP_ERR_NOMEM, "%s: allocation %ld failed but it returned %s (%s)", what, k,
                  tp_status_str(st), tp_last_error());
        CHECK_MSG(leaked == 0, "%s: allocation %ld failed: %ld blocks leaked", what, k, leaked);
    }
    CHECK_MSG(k > 0 || may_not_allocate, "%s: made no allocation", what);
    return k;
}

static long check_alloc_failures(const char *what, fail_alloc_op op, void *ctx) {
    return check_alloc_failures_ex(what, op, ctx, false);
}

#endif
