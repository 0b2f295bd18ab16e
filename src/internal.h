/*
 * internal.h - declarations shared by the library's modules but not public:
 * the tensor and storage structs, overflow-safe arithmetic, small helpers.
 */
#ifndef TPEXPORT_INTERNAL_H
#define TPEXPORT_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tpexport/alloc.h"
#include "tpexport/status.h"
#include "tpexport/tensor.h"
#include "tpexport/value.h"

#define TP_HIDDEN __attribute__((visibility("hidden")))
#define TP_UNUSED(x) ((void)(x))
#define TP_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Reference-counted bytes. Owned storage was allocated by the library
 * (alloc_base != NULL, freed with tp_free); borrowed storage calls
 * release(release_ctx, data) when the count drops to zero (if set). */
struct tp_storage {
    atomic_long refcount;
    void *data;   /* 64-byte aligned for owned storage */
    size_t nbytes;
    void *alloc_base;
    void (*release)(void *ctx, void *data);
    void *release_ctx;
};

struct tp_tensor {
    atomic_long refcount;
    tp_dtype dtype;
    int ndim;
    int64_t sizes[TP_MAX_DIMS];
    int64_t strides[TP_MAX_DIMS]; /* in elements; may be 0 (broadcast) */
    int64_t offset;               /* in elements */
    tp_storage *storage;          /* NULL for a meta tensor */
    /* Symbolic dims of a meta tensor during dynamic-shape export's symbolic
     * pass (src/ops/dim.h); NULL otherwise. Not owned. */
    const struct sd_poly *const *sym;
};

/* Byte pointer of element 0 of the view. */
static inline char *tp__tensor_base(const tp_tensor *t) {
    return t->storage ? (char *)t->storage->data + t->offset * (int64_t)tp_dtype_size(t->dtype) : NULL;
}

/* Overflow-checked arithmetic: return false on overflow (true: *out holds
 * the exact result). */
static inline bool tp_mul_overflow_i64(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool tp_add_overflow_i64(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool tp_sub_overflow_i64(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_sub_overflow(a, b, out);
}
static inline bool tp_mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool tp_add_size(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* Number of elements for sizes; TP_ERR_SHAPE on a negative size or
 * overflow. */
TP_HIDDEN tp_status tp__numel(int ndim, const int64_t *sizes, int64_t *out);
/* Fill contiguous (C-order) strides. */
TP_HIDDEN void tp__contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides);
/* Wrap a possibly negative dim into [0, ndim) (ndim 0 accepts -1 and 0 as
 * PyTorch does for scalars when allow_scalar). TP_ERR_INDEX with a message
 * "dim D out of range for a tensor of rank R" otherwise. */
TP_HIDDEN tp_status tp__wrap_dim(int64_t dim, int ndim, int *out);
/* Broadcast two shapes; TP_ERR_SHAPE naming both shapes on mismatch. */
TP_HIDDEN tp_status tp__broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b,
                                         int *nout, int64_t *out);
/* Format a shape as "[2, 3]" into buf (returns buf). */
TP_HIDDEN const char *tp__shape_str(int ndim, const int64_t *sizes, char *buf, size_t size);

/* A new tensor struct (refcount 1) with the given metadata, sharing
 * `storage` (retained; may be NULL for meta). Strides NULL = contiguous. */
TP_HIDDEN tp_status tp__tensor_make(tp_dtype dtype, int ndim, const int64_t *sizes,
                                    const int64_t *strides, int64_t offset, tp_storage *storage,
                                    tp_tensor **out);
TP_HIDDEN void tp__storage_retain(tp_storage *s);
/* tp_tensor_copy_ for tensors known not to overlap (src broadcast to dst's
 * shape already checked): converts dtypes, never allocates. */
TP_HIDDEN void tp__tensor_copy_disjoint(tp_tensor *dst, const tp_tensor *src);
/* Whether the bytes two views can address intersect (their extents in a
 * shared storage; never for different storages or an empty view). Views of
 * one arena or one parent that touch disjoint bytes do not overlap. */
TP_HIDDEN bool tp__tensors_may_overlap(const tp_tensor *a, const tp_tensor *b);
/* Views written into a caller's struct (kernels' per-element views without
 * an allocation): out borrows t's storage and must not outlive it, is never
 * passed to tp_tensor_free, and gets refcount 0. The index / range must be
 * valid (checked by the caller); d is a wrapped dim of t. */
TP_HIDDEN void tp__view_select(const tp_tensor *t, int d, int64_t index, tp_tensor *out);
TP_HIDDEN void tp__view_narrow(const tp_tensor *t, int d, int64_t start, int64_t length, tp_tensor *out);
TP_HIDDEN void tp__storage_release(tp_storage *s);

/* Copy a caller's option struct whose first field is `size_t struct_size`
 * into dst (the library's size): only the fields the caller knows
 * (struct_size bytes; 0 means this library's size), the rest zero (the
 * default of every field added later). src NULL: all defaults. */
static inline void tp__options_copy(void *dst, size_t size, const void *src) {
    memset(dst, 0, size);
    if (!src) return;
    size_t n;
    memcpy(&n, src, sizeof n);
    if (n == 0 || n > size) n = size;
    memcpy(dst, src, n);
    memcpy(dst, &size, sizeof size);
}

/* A mutation's new value src already is dst's data: the same view, or a
 * view of dst with another shape that an in-place op wrote through
 * (self.cache[1:3].add_(x), whose result tensorplay records as the mutated
 * value). Mutation write-back skips the copy then (program.c, engine.c). */
static inline bool tp__written_in_place(const tp_tensor *src, const tp_tensor *dst) {
    if (src == dst) return true;
    if (!src->storage || src->storage != dst->storage) return false;
    bool same_shape = src->ndim == dst->ndim && memcmp(src->sizes, dst->sizes, (size_t)dst->ndim * sizeof(int64_t)) == 0;
    if (!same_shape) return true;
    return src->offset == dst->offset && memcmp(src->strides, dst->strides, (size_t)dst->ndim * sizeof(int64_t)) == 0;
}

/* Scalar element access by dtype (p points at one element). */
TP_HIDDEN double tp__load_f64(const void *p, tp_dtype dtype);
TP_HIDDEN int64_t tp__load_i64(const void *p, tp_dtype dtype);
TP_HIDDEN void tp__store_f64(void *p, tp_dtype dtype, double v);
TP_HIDDEN void tp__store_i64(void *p, tp_dtype dtype, int64_t v);
/* float <-> half / bfloat16 with round-to-nearest-even. */
TP_HIDDEN uint16_t tp__f32_to_f16(float f);
TP_HIDDEN float tp__f16_to_f32(uint16_t h);
TP_HIDDEN uint16_t tp__f32_to_bf16(float f);
TP_HIDDEN float tp__bf16_to_f32(uint16_t h);


/* ---- strided iteration -------------------------------------------------
 * Walks the elements of a shape in C order over up to TP_ITER_MAX_OPS
 * tensors at once. Each operand's shape must broadcast to `sizes`
 * (right-aligned; size-1 or missing dims get stride 0). Usage:
 *     tp_iter it; tp__iter_init(&it, ndim, sizes, 2, (const tp_tensor*[]){out, a});
 *     while (tp__iter_next(&it)) { char *po = it.ptr[0], *pa = it.ptr[1]; ... }
 */
#define TP_ITER_MAX_OPS 6
typedef struct tp_iter {
    int ndim;
    int n_ops;
    int64_t sizes[TP_MAX_DIMS];
    int64_t index[TP_MAX_DIMS];
    int64_t bstrides[TP_ITER_MAX_OPS][TP_MAX_DIMS]; /* byte strides */
    char *ptr[TP_ITER_MAX_OPS];
    int64_t remaining; /* elements not yet visited */
    bool started;
} tp_iter;

TP_HIDDEN void tp__iter_init(tp_iter *it, int ndim, const int64_t *sizes, int n_ops,
                             const tp_tensor *const *ops);
TP_HIDDEN bool tp__iter_next(tp_iter *it);

/* The same C-order walk over explicit strides (any unit: elements or
 * bytes), tracking one offset per operand from 0 - for kernels that walk a
 * sub-space of a tensor (the reduced dims of a reduction, the normalised
 * dims of a norm). strides[k] may be NULL (a broadcast operand: offset 0).
 * sizes and strides are copied. ndim 0 visits one position; a zero size
 * visits none.
 *     tp_walk w; tp__walk_init(&w, nd, sizes, 2, (const int64_t *[]){xs, ys});
 *     while (tp__walk_next(&w)) { ... x[w.off[0]] ... y[w.off[1]] ... } */
typedef struct tp_walk {
    int ndim;
    int n_ops;
    int64_t sizes[TP_MAX_DIMS];
    int64_t index[TP_MAX_DIMS];
    int64_t strides[TP_ITER_MAX_OPS][TP_MAX_DIMS];
    int64_t off[TP_ITER_MAX_OPS];
    int64_t remaining; /* positions not yet visited */
    bool started;
} tp_walk;

TP_HIDDEN void tp__walk_init(tp_walk *w, int ndim, const int64_t *sizes, int n_ops, const int64_t *const *strides);
TP_HIDDEN bool tp__walk_next(tp_walk *w);

/* ---- growable string builder (strbuf.c) ---------------------------------
 * Appends never fail visibly: an allocation failure sets `failed`, and
 * tp__sb_finish then returns TP_ERR_NOMEM. */
typedef struct tp_sb {
    char *data;
    size_t len, cap;
    bool failed;
} tp_sb;
TP_HIDDEN void tp__sb_printf(tp_sb *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
TP_HIDDEN void tp__sb_puts(tp_sb *sb, const char *s);
/* n bytes, NULs included (binary data: use sb->len, not strlen). */
TP_HIDDEN void tp__sb_append(tp_sb *sb, const void *data, size_t n);
/* Hand the string to the caller (*out, freed with tp_free) and reset sb. */
TP_HIDDEN tp_status tp__sb_finish(tp_sb *sb, char **out);
TP_HIDDEN void tp__sb_free(tp_sb *sb);

/* Prefix the last error with "node NAME (TARGET): ", dropping a leading
 * "TARGET: " the op dispatcher already put there (status.c). */
TP_HIDDEN void tp__node_error_context(const char *name, const char *target);

/* A block like tp_malloc's, taken from libc instead of the hook; tp_free
 * and tp_realloc know it by its header. Only for a parser that cannot
 * survive a failed allocation (jansson's lexer: archive/json.c). */
TP_HIDDEN void *tp__malloc_libc(size_t size);

/* A block for data that calls stream through (packed weights, a run's
 * arena): returns the block to tp_free (NULL on failure) and sets *aligned
 * to the first of `size` usable bytes, 64-byte aligned; when size is at
 * least TP__HUGE_PAGE, aligned to TP__HUGE_PAGE and its whole huge pages
 * advised for transparent huge pages (Linux madvise MADV_HUGEPAGE: a hint,
 * ignored where the kernel has THP off or refuses), so that streaming
 * through them misses the TLB once per 2 MiB instead of once per 4 KiB.
 * The alignment's slack is never written: address space, not memory, where
 * the block is mapped (large blocks are, with glibc). */
enum { TP__HUGE_PAGE = 2 << 20 };
TP_HIDDEN void *tp__malloc_stream(size_t size, void **aligned);

/* Scratch for reference kernels in a plan (alloc.c, used by engine.c):
 * while a thread has entered one, tp_malloc & co serve blocks from it by
 * bumping `used` (64-byte aligned, origin "scratch" in the header), tp_free
 * of such a block does nothing and tp_realloc copies it into a new block.
 * A request that does not fit goes to the hook as usual. `want` adds up
 * every request since the enter (served or not), so the owner can size the
 * block to what one step asks for and later calls allocate nothing.
 * Blocks must not outlive the step: the next enter reuses the memory. */
typedef struct tp__scratch {
    char *base;  /* 64-byte aligned, `size` bytes; NULL when none yet */
    size_t size;
    size_t used; /* bytes handed out since the enter */
    size_t want; /* bytes asked for since the enter (saturating) */
} tp__scratch;
/* Enter s (used and want reset) on this thread, returning the scratch that
 * was entered before (a kernel may run a nested plan); leave restores it. */
TP_HIDDEN tp__scratch *tp__scratch_enter(tp__scratch *s);
TP_HIDDEN void tp__scratch_leave(tp__scratch *prev);

/* Ensure room for one more item in a tp_realloc'd array of n items with
 * capacity *cap (doubling; alloc.c). TP_ERR_NOMEM on failure. */
TP_HIDDEN tp_status tp__grow(void **items, int *cap, int n, size_t elem);

#endif /* TPEXPORT_INTERNAL_H */
