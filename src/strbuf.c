/*
 * strbuf.c - a growable string builder for text forms (printing).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static bool sb_reserve(tp_sb *sb, size_t extra) {
    if (sb->failed) return false;
    size_t need;
    if (!tp_add_size(sb->len, extra + 1, &need)) {
        sb->failed = true;
        return false;
    }
    if (need <= sb->cap) return true;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < need) cap *= 2;
    char *p = tp_realloc(sb->data, cap);
    if (!p) {
        sb->failed = true;
        return false;
    }
    sb->data = p;
    sb->cap = cap;
    return true;
}

void tp__sb_printf(tp_sb *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        sb->failed = true;
        return;
    }
    if (!sb_reserve(sb, (size_t)n)) return;
    if ((size_t)n < sizeof small) {
        memcpy(sb->data + sb->len, small, (size_t)n + 1);
    } else {
        va_start(ap, fmt);
        vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    sb->len += (size_t)n;
}

void tp__sb_puts(tp_sb *sb, const char *s) {
    size_t n = strlen(s);
    if (!sb_reserve(sb, n)) return;
    memcpy(sb->data + sb->len, s, n + 1);
    sb->len += n;
}

void tp__sb_append(tp_sb *sb, const void *data, size_t n) {
    if (!sb_reserve(sb, n)) return;
    memcpy(sb->data + sb->len, data, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

tp_status tp__sb_finish(tp_sb *sb, char **out) {
    if (!sb->failed && !sb->data) sb_reserve(sb, 0);
    if (sb->failed) {
        tp__sb_free(sb);
        return tp_error(TP_ERR_NOMEM, "out of memory building a string");
    }
    sb->data[sb->len] = '\0';
    *out = sb->data;
    sb->data = NULL;
    sb->len = sb->cap = 0;
    return TP_OK;
}

void tp__sb_free(tp_sb *sb) {
    tp_free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
    sb->failed = false;
}
