/*
 * alloc.h - the one allocation hook.
 *
 * All heap memory the library uses goes through one function with the shape of
 * Lua's lua_Alloc: fn(user, ptr, old_size, new_size). new_size == 0 frees ptr;
 * ptr == NULL allocates; otherwise reallocates. It returns NULL on failure
 * (never for a free). The hook is process-wide; set it before creating any
 * object, and do not change it while objects allocated by the previous hook
 * are alive. Tests use it to count allocations and inject failures.
 *
 * That includes the JSON parser's memory: when the library is loaded it
 * installs tp_malloc/tp_free as jansson's allocation functions
 * (json_set_alloc_funcs), so jansson's blocks go through whichever hook is
 * current, are counted by tp_alloc_live_blocks, and a failed one makes the
 * library's JSON reading or writing fail with TP_ERR_NOMEM. A program that
 * uses jansson itself shares these functions (free what json_dumps returns
 * with tp_free) and the rule above applies to its JSON values too.
 */
#ifndef TPEXPORT_ALLOC_H
#define TPEXPORT_ALLOC_H

#include <stddef.h>
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void *(*tp_alloc_fn)(void *user, void *ptr, size_t old_size, size_t new_size);

/* Install an allocation hook; fn == NULL restores the default (libc). */
TP_API void tp_set_allocator(tp_alloc_fn fn, void *user);

/* Allocate/free through the hook. Blocks carry a small header recording their
 * size, so tp_free needs only the pointer; tp_free(NULL) is a no-op.
 * tp_malloc(0) returns a unique non-NULL pointer. Returned memory is 16-byte
 * aligned. tp_calloc checks count*size for overflow. All return NULL on
 * failure. */
TP_API void *tp_malloc(size_t size);
TP_API void *tp_calloc(size_t count, size_t size);
TP_API void *tp_realloc(void *ptr, size_t new_size);
TP_API void tp_free(void *ptr);
TP_API char *tp_strdup(const char *s);

/* Number of blocks currently allocated through tp_malloc & co (for tests). */
TP_API long tp_alloc_live_blocks(void);

#ifdef __cplusplus
}
#endif
#endif
