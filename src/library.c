/*
 * library.c - version queries and tp_shutdown (version.h).
 */
#include "tpexport/version.h"

#include "internal.h"
#include "ops/ops_impl.h"
#include "threadpool.h"

const char *tp_version(void) { return TP_VERSION_STRING; }

int tp_version_number(void) { return TP_VERSION_NUMBER; }

void tp_shutdown(void) {
    tp__parallel_shutdown();
    tp__ops_shutdown();
}
