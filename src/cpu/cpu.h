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

#endif
