/*
 * cpu.h - CPU levels for kernel variants (internal; public part in run.h).
 */
#ifndef TPEXPORT_CPU_H
#define TPEXPORT_CPU_H

#include "../internal.h"
#include "tpexport/run.h"

/* The level to plan for when a run asks for `requested` (TP_CPU_AUTO or a
 * cap): never above what the CPU supports. */
TP_HIDDEN tp_cpu_level tp__cpu_level_resolve(tp_cpu_level requested);

/* Whether the CPU converts float16 <-> float32 in vectors (F16C, with the
 * OS's AVX state; cpuid, read once). */
TP_HIDDEN bool tp__cpu_has_f16c(void);

/* Outputs of at least this many bytes are written with non-temporal
 * stores by the elementwise ops cheap enough to gain (fast_eltwise.c):
 * the size of the last-level cache (sysconf; 32 MiB when unknown), beyond
 * which an output cannot stay in cache for its consumer anyway, so reading
 * its lines before overwriting them (a third memory stream) buys nothing.
 * The TP_STREAM_MIN_BYTES environment variable (read once; a value that
 * is not a non-negative decimal integer is ignored) overrides it: 0
 * streams every output (tests run the fixtures that way). */
TP_HIDDEN int64_t tp__stream_min_bytes(void);

#endif
