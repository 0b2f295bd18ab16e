/*
 * alloc.c - every heap allocation goes through one hook (see alloc.h).
 *
 * Each block carries a 16-byte header holding its size, so that frees and
 * reallocs can tell the hook the old size (lua_Alloc style) and callers need
 * not track sizes, and its origin: the hook, or (tp__malloc_libc only, for
 * jansson's sake: json.c) libc, which tp_free and tp_realloc then use.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "internal.h"

#define TP_HEADER 16
/* header bytes [0, 8): the size; [8, 16): the origin */
#define ORIGIN_HOOK 0u
#define ORIGIN_LIBC 0x6c696263u    /* "libc" */
#define ORIGIN_SCRATCH 0x73637261u /* "scra": a block of a tp__scratch (internal.h) */

static void write_header(char *base, size_t size, uint64_t origin) {
    memcpy(base, &size, sizeof size);
    memcpy(base + 8, &origin, sizeof origin);
}

static uint64_t header_origin(const char *base) {
    uint64_t origin;
    memcpy(&origin, base + 8, sizeof origin);
    return origin;
}

static void *default_alloc(void *user, void *ptr, size_t old_size, size_t new_size) {
    TP_UNUSED(user);
    TP_UNUSED(old_size);
    if (new_size == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, new_size);
}

static tp_alloc_fn g_alloc = default_alloc;
static void *g_alloc_user = NULL;
static atomic_long g_live_blocks;

void tp_set_allocator(tp_alloc_fn fn, void *user) {
    g_alloc = fn ? fn : default_alloc;
    g_alloc_user = fn ? user : NULL;
}

long tp_alloc_live_blocks(void) { return atomic_load(&g_live_blocks); }

/* The scratch this thread has entered, or NULL. */
static _Thread_local tp__scratch *t_scratch;

tp__scratch *tp__scratch_enter(tp__scratch *s) {
    tp__scratch *prev = t_scratch;
    s->used = 0;
    s->want = 0;
    t_scratch = s;
    return prev;
}

void tp__scratch_leave(tp__scratch *prev) { t_scratch = prev; }

/* A block of `size` bytes from the entered scratch, or NULL when it does not
 * fit (counted in `want` either way). Each block takes 64 bytes (its header
 * at the end of them) plus size rounded up to 64, so blocks stay 64-byte
 * aligned. */
static void *scratch_take(tp__scratch *s, size_t size) {
    size_t need = size > SIZE_MAX - 128 ? SIZE_MAX : 64 + ((size + 63) & ~(size_t)63);
    s->want = s->want > SIZE_MAX - need ? SIZE_MAX : s->want + need;
    if (!s->base || need > s->size - s->used) return NULL;
    char *p = s->base + s->used + 64;
    s->used += need;
    write_header(p - TP_HEADER, size, ORIGIN_SCRATCH);
    return p;
}

void *tp_malloc(size_t size) {
    if (t_scratch) {
        void *q = scratch_take(t_scratch, size);
        if (q) return q;
    }
    size_t total;
    if (!tp_add_size(size, TP_HEADER, &total)) return NULL;
    char *p = g_alloc(g_alloc_user, NULL, 0, total);
    if (!p) return NULL;
    write_header(p, size, ORIGIN_HOOK);
    atomic_fetch_add(&g_live_blocks, 1);
    return p + TP_HEADER;
}

void *tp__malloc_libc(size_t size) {
    size_t total;
    if (!tp_add_size(size, TP_HEADER, &total)) return NULL;
    char *p = malloc(total);
    if (!p) return NULL;
    write_header(p, size, ORIGIN_LIBC);
    atomic_fetch_add(&g_live_blocks, 1);
    return p + TP_HEADER;
}

void *tp__malloc_stream(size_t size, void **aligned) {
    const size_t align = size >= (size_t)TP__HUGE_PAGE ? (size_t)TP__HUGE_PAGE : 64;
    size_t total;
    char *base = tp_add_size(size, align, &total) ? tp_malloc(total) : NULL;
    if (!base) {
        *aligned = NULL;
        return NULL;
    }
    char *p = (char *)(((uintptr_t)base + align - 1) & ~(uintptr_t)(align - 1));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* only whole huge pages: a partial last one would fault 2 MiB in */
    if (align == (size_t)TP__HUGE_PAGE) (void)madvise(p, size & ~(size_t)(TP__HUGE_PAGE - 1), MADV_HUGEPAGE);
#endif
    *aligned = p;
    return base;
}

void *tp_calloc(size_t count, size_t size) {
    size_t total;
    if (!tp_mul_size(count, size, &total)) return NULL;
    void *p = tp_malloc(total);
    if (p) memset(p, 0, total);
    return p;
}

void *tp_realloc(void *ptr, size_t new_size) {
    if (!ptr) return tp_malloc(new_size);
    char *base = (char *)ptr - TP_HEADER;
    size_t old_size, total;
    memcpy(&old_size, base, sizeof old_size);
    uint64_t origin = header_origin(base);
    if (origin == ORIGIN_SCRATCH) { /* the old block stays where it is (scratch is never freed) */
        void *q = tp_malloc(new_size);
        if (q) memcpy(q, ptr, old_size < new_size ? old_size : new_size);
        return q;
    }
    if (!tp_add_size(new_size, TP_HEADER, &total)) return NULL;
    char *p = origin == ORIGIN_LIBC ? realloc(base, total) : g_alloc(g_alloc_user, base, old_size + TP_HEADER, total);
    if (!p) return NULL;
    write_header(p, new_size, origin);
    return p + TP_HEADER;
}

void tp_free(void *ptr) {
    if (!ptr) return;
    char *base = (char *)ptr - TP_HEADER;
    size_t size;
    memcpy(&size, base, sizeof size);
    if (header_origin(base) == ORIGIN_SCRATCH) return;
    if (header_origin(base) == ORIGIN_LIBC) free(base);
    else g_alloc(g_alloc_user, base, size + TP_HEADER, 0);
    atomic_fetch_sub(&g_live_blocks, 1);
}

char *tp_strdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *p = tp_malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* Room for one more item in a tp_realloc'd array of n items (capacity
 * doubles, from 4). */
tp_status tp__grow(void **items, int *cap, int n, size_t elem) {
    if (n < *cap) return TP_OK;
    int ncap = *cap ? *cap * 2 : 4;
    void *p = tp_realloc(*items, (size_t)ncap * elem);
    TP_CHECK(p != NULL, TP_ERR_NOMEM, "out of memory");
    *items = p;
    *cap = ncap;
    return TP_OK;
}
