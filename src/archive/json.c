/*
 * json.c - jansson's heap memory through the library's allocation hook
 * (alloc.h), and the one way the library parses JSON (tp__json_parse).
 *
 * jansson has one process-wide pair of allocation functions, and its free
 * is told no size: they are tp_malloc and tp_free, whose block header
 * records the size for the hook. They are installed once, when the
 * library is loaded (a constructor, so before any JSON value exists: a
 * block jansson got from libc's malloc must never reach tp_free), and they
 * call whatever hook is current at each call, so tp_set_allocator needs no
 * jansson-specific step. A program that uses jansson itself shares them.
 *
 * jansson 2.14's lexer does not survive a failed allocation: it ignores a
 * failed append to its token buffer and then asserts (aborts) or reads
 * past the token when the buffer disagrees with the input. So while the
 * library parses, an allocation the hook refuses is counted as a failure
 * and served from libc instead (tp__malloc_libc), and the input is cut
 * off at once: jansson reads at most the rest of its 1 KiB input chunk,
 * then sees the end of the input and unwinds. The parse then reports
 * TP_ERR_NOMEM, whatever jansson says (it would call it a syntax error).
 * Outside a parse (building documents) a refused allocation is NULL to
 * jansson, whose builders handle it.
 */
#include "json.h"

#include <string.h>

#include "../internal.h"

static _Thread_local unsigned long t_failures; /* allocations the hook refused */
static _Thread_local int t_parsing;            /* > 0 inside tp__json_parse */

static void *json_alloc(size_t size) {
    void *p = tp_malloc(size);
    if (p) return p;
    t_failures++;
    return t_parsing ? tp__malloc_libc(size) : NULL;
}

static void json_release(void *p) { tp_free(p); }

__attribute__((constructor)) static void install_json_alloc(void) { json_set_alloc_funcs(json_alloc, json_release); }

unsigned long tp__json_alloc_failures(void) { return t_failures; }

typedef struct json_input {
    const char *text;
    size_t left;
    unsigned long failures; /* t_failures when the parse began */
} json_input;

/* jansson's input callback: the text, until an allocation has failed. */
static size_t read_input(void *buffer, size_t size, void *data) {
    json_input *in = data;
    if (t_failures != in->failures) return 0; /* out of memory: end the input here */
    size_t n = in->left < size ? in->left : size;
    memcpy(buffer, in->text, n);
    in->text += n;
    in->left -= n;
    return n;
}

json_t *tp__json_parse(const char *text, size_t len, size_t flags, json_error_t *err, bool *out_of_memory) {
    json_input in = {text, len, t_failures};
    memset(err, 0, sizeof *err); /* json_error_code reads a byte jansson does not always set */
    t_parsing++;
    json_t *j = json_load_callback(read_input, &in, flags, err);
    t_parsing--;
    *out_of_memory = t_failures != in.failures || (!j && json_error_code(err) == json_error_out_of_memory);
    if (*out_of_memory) {
        json_decref(j);
        return NULL;
    }
    return j;
}
