/*
 * json.h - JSON parsing with jansson's memory through the allocation hook
 * (internal; json.c).
 */
#ifndef TPEXPORT_JSON_H
#define TPEXPORT_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../internal.h"

/* Parse text[0..len) (need not be NUL-terminated) with jansson's `flags`.
 * NULL on failure: *out_of_memory tells an allocation failure (then err
 * says nothing useful) from a syntax error (described in *err). */
TP_HIDDEN json_t *tp__json_parse(const char *text, size_t len, size_t flags, json_error_t *err, bool *out_of_memory);

/* Allocations jansson was refused on this thread so far: building a
 * document during which the count moved ran out of memory. */
TP_HIDDEN unsigned long tp__json_alloc_failures(void);

#endif
