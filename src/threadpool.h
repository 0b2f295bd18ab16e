/*
 * threadpool.h - the library's one thread pool (internal).
 *
 * tp__parallel(nth, fn, ctx) runs fn(ctx, ith, nth) for every ith in
 * [0, nth): ith 0 on the calling thread, the others on pool workers, and
 * returns when all are done. Workers are started on demand (up to 255),
 * spin briefly after a job so back-to-back nodes start quickly, then sleep
 * on a condition variable: an idle pool uses no CPU. One job runs at a time;
 * a caller that finds the pool busy (another run context in another thread)
 * runs every ith itself, in order, so nothing is oversubscribed and results
 * are the same.
 */
#ifndef TPEXPORT_THREADPOOL_H
#define TPEXPORT_THREADPOOL_H

#include "internal.h"

typedef void (*tp_task_fn)(void *ctx, int ith, int nth);

TP_HIDDEN void tp__parallel(int nth, tp_task_fn fn, void *ctx);
/* Stop and join every worker (tp_shutdown); later jobs start new ones. */
TP_HIDDEN void tp__parallel_shutdown(void);

/* Work handed out at run time. A step split among nth threads cuts each
 * thread's static part into a few units; thread ith takes its own units
 * from the front (tp__claim_own on claims[ith]) and, when it has none left,
 * the other threads' from the back (tp__claim_steal on theirs), so a
 * thread that runs slower than the rest (a shared host's busy core, a
 * smaller core of a hybrid CPU) hands the end of its part to the others,
 * and with equal threads each runs its own part as a static split would.
 * Every unit is a disjoint part of the output computed the same way
 * whichever thread runs it, so results do not depend on who took what.
 * A step starts from nth zeroed claims (the run context zeroes them before
 * each parallel step); the two counts share one word, so owner and thief
 * never take the same unit. */
typedef struct tp_claim {
    atomic_uint_least64_t taken; /* units taken from the front (low 32 bits) and the back (high) */
    char pad[64 - sizeof(atomic_uint_least64_t)];
} tp_claim;

/* The next unit of a part of `units` units (< 2^31) from its front, or -1
 * when every unit is taken. */
TP_HIDDEN int64_t tp__claim_own(tp_claim *c, int64_t units);
/* The last untaken unit of another thread's part, or -1. */
TP_HIDDEN int64_t tp__claim_steal(tp_claim *c, int64_t units);

/* Thread ith's walk over all nth parts: its own from the front, then
 * threads ith+1, ith+2, ... (cyclically) from the back. Start with
 * {claims, ith, nth} (the rest zero); each tp__claim_next gives the part
 * (*part) and unit of the next piece of work, units(arg, part) telling how
 * many units a part has (0: none), until it returns false. */
typedef struct tp_claim_walk {
    tp_claim *claims;
    int ith, nth;
    int step; /* parts visited: 0 its own, then ith + step */
} tp_claim_walk;
TP_HIDDEN bool tp__claim_next(tp_claim_walk *w, int64_t (*units)(const void *arg, int part), const void *arg,
                              int *part, int64_t *unit);

/* A range [0, n) of items split among nth threads, walked with claims:
 * thread part p is [n*p/nth, n*(p+1)/nth) with inner bounds rounded down
 * to a multiple of align (the last part ends at n), cut into units of
 * about a per_part-th of a part (whole multiples of align, of at least
 * min_elems elements where an item is item_len elements); tp__range_next gives the next piece [lo, hi) of the
 * walk: the thread's own units front to back, then the others' from the
 * back (tp__claim_next). With claims NULL or nth 1 the walk is the
 * thread's own part in one piece (a static split). */
typedef struct tp_range_walk {
    tp_claim_walk w;
    int64_t n, align, unit;
    bool claimed, done;
} tp_range_walk;
TP_HIDDEN void tp__range_walk_init(tp_range_walk *rw, tp_claim *claims, int ith, int nth, int64_t n, int64_t align,
                                   int64_t item_len, int64_t min_elems, int per_part);
TP_HIDDEN bool tp__range_next(tp_range_walk *rw, int64_t *lo, int64_t *hi);
/* The walk an item at a time: start with *item = -1, *end = 0; each call
 * moves *item to the next item ([*item, *end) is what is left of the
 * current piece), false at the end:
 *   for (int64_t r = -1, end = 0; tp__range_next_item(&w, &r, &end);) ... */
static inline bool tp__range_next_item(tp_range_walk *rw, int64_t *item, int64_t *end) {
    if (++*item < *end) return true;
    return tp__range_next(rw, item, end);
}

#endif
