/*
 * status.h - error codes and messages.
 *
 * Every library function that can fail returns a tp_status. TP_OK is zero;
 * failures are grouped in ranges of 100 by kind so that callers can test the
 * kind with tp_status_kind(). Along with the code, the failing function
 * records a readable message in a thread-local buffer (tp_last_error) naming
 * what was wrong: the op, node, argument, field or dim. The message stays
 * valid until the next failing call on the same thread.
 *
 * Library code never aborts and never exits; allocation failures come back
 * as TP_ERR_NOMEM.
 */
#ifndef TPEXPORT_STATUS_H
#define TPEXPORT_STATUS_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define TP_API __declspec(dllexport)
#else
#define TP_API __attribute__((visibility("default")))
#endif

typedef enum tp_status {
    TP_OK = 0,

    /* 100-199: the caller passed something invalid */
    TP_ERR_INVALID_ARG = 100, /* bad argument value or combination */
    TP_ERR_INDEX = 101,       /* index or dim out of range */
    TP_ERR_MISSING = 102,     /* a required argument/input/entry is absent */
    TP_ERR_DUPLICATE = 103,   /* an argument/name given twice */
    TP_ERR_STATE = 104,       /* object in the wrong state for the call */
    TP_ERR_NOT_FOUND = 105,   /* named thing (node, op, file) not found */
    TP_ERR_CANCELLED = 106,   /* a run was stopped by its cancel callback */

    /* 200-299: dtype problems */
    TP_ERR_TYPE = 200,        /* wrong dtype or value kind */

    /* 300-399: shape problems */
    TP_ERR_SHAPE = 300,       /* incompatible or invalid shapes */
    TP_ERR_CONSTRAINT = 301,  /* an input violates a recorded constraint */

    /* 400-499: malformed input data (files, buffers) */
    TP_ERR_CORRUPT = 400,     /* data is malformed */
    TP_ERR_IO = 401,          /* read/write failed */
    TP_ERR_VERIFY = 402,      /* a graph or program failed validation */

    /* 500-599: valid but not supported by this build */
    TP_ERR_UNSUPPORTED = 500,

    /* 600-699: resources */
    TP_ERR_NOMEM = 600,       /* an allocation failed or would be too large */

    /* 700-799: bugs */
    TP_ERR_INTERNAL = 700
} tp_status;

/* Short constant name of a status, e.g. "TP_ERR_SHAPE". Never NULL. */
TP_API const char *tp_status_str(tp_status status);

/* The kind of a status: its code rounded down to the hundred (TP_ERR_SHAPE for
 * TP_ERR_CONSTRAINT). */
TP_API tp_status tp_status_kind(tp_status status);

/* The message recorded by the last failing call on this thread ("" if none).
 * Owned by the library; valid until the next failure on this thread. */
TP_API const char *tp_last_error(void);

/* Record a failure: formats the message, stores it as this thread's last error
 * and returns `status` unchanged, so that `return tp_error(...)` works. */
TP_API tp_status tp_error(tp_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
TP_API tp_status tp_verror(tp_status status, const char *fmt, va_list ap);

/* Prefix this thread's last error message with context, e.g.
 * tp_error_context("node %s (%s)", name, op) turns "x" into
 * "node add_1 (add): x". Returns nothing; used on the way up a failure. */
TP_API void tp_error_context(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Forget this thread's last error. */
TP_API void tp_clear_error(void);

/* Return `code` with a message if `cond` is false. */
#define TP_CHECK(cond, code, ...)                                              \
    do {                                                                       \
        if (!(cond)) return tp_error((code), __VA_ARGS__);                     \
    } while (0)

/* Propagate a failing status. */
#define TP_TRY(expr)                                                           \
    do {                                                                       \
        tp_status tp_try_status_ = (expr);                                     \
        if (tp_try_status_ != TP_OK) return tp_try_status_;                    \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
