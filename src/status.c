/*
 * status.c - status names and the thread-local last-error message.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define TP_ERRMSG_SIZE 2048

static _Thread_local char tp_errmsg[TP_ERRMSG_SIZE];

const char *tp_status_str(tp_status status) {
    switch (status) {
    case TP_OK: return "TP_OK";
    case TP_ERR_INVALID_ARG: return "TP_ERR_INVALID_ARG";
    case TP_ERR_INDEX: return "TP_ERR_INDEX";
    case TP_ERR_MISSING: return "TP_ERR_MISSING";
    case TP_ERR_DUPLICATE: return "TP_ERR_DUPLICATE";
    case TP_ERR_STATE: return "TP_ERR_STATE";
    case TP_ERR_NOT_FOUND: return "TP_ERR_NOT_FOUND";
    case TP_ERR_CANCELLED: return "TP_ERR_CANCELLED";
    case TP_ERR_TYPE: return "TP_ERR_TYPE";
    case TP_ERR_SHAPE: return "TP_ERR_SHAPE";
    case TP_ERR_CONSTRAINT: return "TP_ERR_CONSTRAINT";
    case TP_ERR_CORRUPT: return "TP_ERR_CORRUPT";
    case TP_ERR_IO: return "TP_ERR_IO";
    case TP_ERR_VERIFY: return "TP_ERR_VERIFY";
    case TP_ERR_UNSUPPORTED: return "TP_ERR_UNSUPPORTED";
    case TP_ERR_NOMEM: return "TP_ERR_NOMEM";
    case TP_ERR_INTERNAL: return "TP_ERR_INTERNAL";
    }
    return "TP_ERR_UNKNOWN";
}

tp_status tp_status_kind(tp_status status) { return (tp_status)(((int)status / 100) * 100); }

const char *tp_last_error(void) { return tp_errmsg; }

void tp_clear_error(void) { tp_errmsg[0] = '\0'; }

tp_status tp_verror(tp_status status, const char *fmt, va_list ap) {
    /* Format into a scratch buffer first: an argument may be tp_last_error()
     * itself ("outer: %s"), which must not overlap the destination. */
    char msg[TP_ERRMSG_SIZE];
    vsnprintf(msg, sizeof msg, fmt, ap);
    memcpy(tp_errmsg, msg, sizeof msg);
    return status;
}

tp_status tp_error(tp_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tp_verror(status, fmt, ap);
    va_end(ap);
    return status;
}

void tp_error_context(const char *fmt, ...) {
    char prefix[512];
    char old[TP_ERRMSG_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, tp_errmsg, sizeof old);
    size_t plen = strlen(prefix);
    if (plen + 2 >= sizeof tp_errmsg) plen = sizeof tp_errmsg - 3;
    memcpy(tp_errmsg, prefix, plen);
    memcpy(tp_errmsg + plen, ": ", 2);
    size_t room = sizeof tp_errmsg - plen - 3, olen = strlen(old);
    if (olen > room) olen = room;
    memcpy(tp_errmsg + plen + 2, old, olen);
    tp_errmsg[plen + 2 + olen] = '\0';
}

void tp__node_error_context(const char *name, const char *target) {
    size_t tl = strlen(target);
    const char *msg = tp_errmsg;
    if (strncmp(msg, target, tl) == 0 && msg[tl] == ':' && msg[tl + 1] == ' ') {
        char rest[TP_ERRMSG_SIZE];
        snprintf(rest, sizeof rest, "%s", msg + tl + 2);
        snprintf(tp_errmsg, sizeof tp_errmsg, "%s", rest);
    }
    tp_error_context("node %s (%s)", name, target);
}
