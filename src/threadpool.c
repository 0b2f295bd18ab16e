/*
 * threadpool.c - see threadpool.h.
 *
 * A job is posted to workers 0 .. nth-2 by bumping each one's `posted`
 * counter (atomic); worker i runs ith = i + 1 and decrements `pending`.
 * Workers that find no job for a while sleep on `wake`; the poster
 * broadcasts only when some worker sleeps. The caller waits for `pending` to reach
 * zero, spinning briefly, then on `done`.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "threadpool.h"

#define MAX_WORKERS 255
#define SPIN_ROUNDS 20000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

typedef struct worker_slot {
    atomic_ulong posted; /* jobs posted to this worker */
    atomic_bool quit;    /* tp__parallel_shutdown: leave instead of running a job */
    pthread_t thread;
    char pad[40];
} worker_slot;

typedef struct pool {
    pthread_mutex_t job_lock; /* held by the thread whose job runs */
    pthread_mutex_t lock;     /* guards sleeping workers / waiting caller */
    pthread_cond_t wake, done;
    atomic_int pending;
    atomic_int sleepers;
    atomic_bool caller_waiting;
    tp_task_fn fn; /* written before posting, read only by posted workers */
    void *ctx;
    int nth;
    int n_workers;
    worker_slot slots[MAX_WORKERS];
} pool;

static pool g_pool = {
    .job_lock = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
};

static void finish_one(pool *p) {
    if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_waiting)) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->lock);
    }
}

static void *worker_main(void *arg) {
    pool *p = &g_pool;
    int index = (int)(intptr_t)arg;
    worker_slot *slot = &p->slots[index];
    unsigned long ran = 0;
    for (;;) {
        unsigned long posted = atomic_load(&slot->posted);
        for (int spin = 0; posted == ran && spin < SPIN_ROUNDS; spin++) {
            cpu_relax();
            posted = atomic_load(&slot->posted);
        }
        if (posted == ran) {
            pthread_mutex_lock(&p->lock);
            atomic_fetch_add(&p->sleepers, 1);
            while ((posted = atomic_load(&slot->posted)) == ran) pthread_cond_wait(&p->wake, &p->lock);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->lock);
        }
        ran = posted;
        if (atomic_load(&slot->quit)) break;
        p->fn(p->ctx, index + 1, p->nth);
        finish_one(p);
    }
    return NULL;
}

/* Start workers until there are `want` (called with job_lock held). */
static void grow(pool *p, int want) {
    if (want > MAX_WORKERS) want = MAX_WORKERS;
    while (p->n_workers < want) {
        worker_slot *slot = &p->slots[p->n_workers];
        atomic_store(&slot->quit, false);
        atomic_store(&slot->posted, 0);
        if (pthread_create(&slot->thread, NULL, worker_main, (void *)(intptr_t)p->n_workers) != 0) break;
        p->n_workers++;
    }
}

void tp__parallel(int nth, tp_task_fn fn, void *ctx) {
    pool *p = &g_pool;
    if (nth < 1) nth = 1;
    if (nth == 1 || pthread_mutex_trylock(&p->job_lock) != 0) {
        for (int i = 0; i < nth; i++) fn(ctx, i, nth);
        return;
    }
    grow(p, nth - 1);
    int workers = p->n_workers < nth - 1 ? p->n_workers : nth - 1;
    p->fn = fn;
    p->ctx = ctx;
    p->nth = nth;
    atomic_store(&p->pending, workers);
    atomic_store(&p->caller_waiting, false);
    for (int i = 0; i < workers; i++) atomic_fetch_add(&p->slots[i].posted, 1);
    if (workers > 0 && atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
    }
    /* the caller is ith 0, plus any ith no worker could take */
    fn(ctx, 0, nth);
    for (int i = workers + 1; i < nth; i++) fn(ctx, i, nth);
    for (int spin = 0; atomic_load(&p->pending) > 0 && spin < SPIN_ROUNDS * 4; spin++) cpu_relax();
    if (atomic_load(&p->pending) > 0) {
        pthread_mutex_lock(&p->lock);
        atomic_store(&p->caller_waiting, true);
        while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done, &p->lock);
        atomic_store(&p->caller_waiting, false);
        pthread_mutex_unlock(&p->lock);
    }
    pthread_mutex_unlock(&p->job_lock);
}

/* One unit of `units` from the front or the back of c's part, or -1. */
static int64_t claim(tp_claim *c, int64_t units, bool back_end) {
    uint_least64_t w = atomic_load_explicit(&c->taken, memory_order_relaxed);
    for (;;) {
        const int64_t front = (int64_t)(w & 0xffffffffu), back = (int64_t)(w >> 32);
        if (front + back >= units) return -1;
        const uint_least64_t next = w + (back_end ? (uint_least64_t)1 << 32 : 1);
        if (atomic_compare_exchange_weak_explicit(&c->taken, &w, next, memory_order_relaxed, memory_order_relaxed))
            return back_end ? units - 1 - back : front;
    }
}

int64_t tp__claim_own(tp_claim *c, int64_t units) { return claim(c, units, false); }
int64_t tp__claim_steal(tp_claim *c, int64_t units) { return claim(c, units, true); }

bool tp__claim_next(tp_claim_walk *w, int64_t (*units)(const void *arg, int part), const void *arg, int *part,
                    int64_t *unit) {
    for (; w->step < w->nth; w->step++) {
        const int v = (w->ith + w->step) % w->nth;
        const int64_t n = units(arg, v);
        const int64_t u = n <= 0 ? -1 : w->step == 0 ? tp__claim_own(&w->claims[v], n) : tp__claim_steal(&w->claims[v], n);
        if (u >= 0) {
            *part = v;
            *unit = u;
            return true;
        }
    }
    return false;
}

/* Start of part p of n items among nth (a multiple of align but at 0 and n). */
static int64_t range_part_lo(const tp_range_walk *rw, int p) {
    if (p <= 0) return 0;
    if (p >= rw->w.nth) return rw->n;
    const int64_t nth = rw->w.nth, x = rw->n / nth * p + rw->n % nth * p / nth; /* n*p/nth without overflow */
    return x / rw->align * rw->align;
}

static int64_t range_part_units(const void *arg, int p) {
    const tp_range_walk *rw = arg;
    const int64_t len = range_part_lo(rw, p + 1) - range_part_lo(rw, p);
    return len <= 0 ? 0 : (len - 1) / rw->unit + 1;
}

void tp__range_walk_init(tp_range_walk *rw, tp_claim *claims, int ith, int nth, int64_t n, int64_t align,
                         int64_t item_len, int64_t min_elems, int per_part) {
    if (nth < 1) nth = 1;
    if (align < 1) align = 1;
    if (per_part < 1) per_part = 1;
    rw->w = (tp_claim_walk){claims, ith, nth, 0};
    rw->n = n > 0 ? n : 0;
    rw->align = align;
    rw->claimed = claims && nth > 1;
    rw->done = false;
    const int64_t part = rw->n / nth + 1;
    int64_t unit = (part - 1) / per_part + 1;
    /* items of min_elems elements, rounded up (without overflow for huge items) */
    const int64_t min_unit = item_len >= min_elems ? 1 : item_len > 0 ? (min_elems + item_len - 1) / item_len : 1;
    if (unit < min_unit) unit = min_unit;
    unit = (unit - 1) / align * align + align; /* rounded up to align */
    rw->unit = unit;
}

bool tp__range_next(tp_range_walk *rw, int64_t *lo, int64_t *hi) {
    if (rw->done) return false;
    if (!rw->claimed) {
        rw->done = true;
        *lo = range_part_lo(rw, rw->w.ith);
        *hi = range_part_lo(rw, rw->w.ith + 1);
        return *lo < *hi;
    }
    int p;
    int64_t u;
    if (!tp__claim_next(&rw->w, range_part_units, rw, &p, &u)) {
        rw->done = true;
        return false;
    }
    const int64_t p0 = range_part_lo(rw, p), p1 = range_part_lo(rw, p + 1);
    *lo = p0 + u * rw->unit;
    *hi = *lo + rw->unit < p1 ? *lo + rw->unit : p1;
    return true;
}

void tp__parallel_shutdown(void) {
    pool *p = &g_pool;
    pthread_mutex_lock(&p->job_lock);
    for (int i = 0; i < p->n_workers; i++) {
        atomic_store(&p->slots[i].quit, true);
        atomic_fetch_add(&p->slots[i].posted, 1);
    }
    pthread_mutex_lock(&p->lock);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->n_workers; i++) pthread_join(p->slots[i].thread, NULL);
    p->n_workers = 0;
    pthread_mutex_unlock(&p->job_lock);
}
