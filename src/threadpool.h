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

#endif
