/*
 * fast.h - fast kernel variants (contract v2) shared declarations (internal).
 */
#ifndef TPEXPORT_FAST_H
#define TPEXPORT_FAST_H

#include "../ops/ops_impl.h"
#include "cpu.h"

TP_HIDDEN void tp__register_fast_eltwise(void);
TP_HIDDEN void tp__register_fast_linalg(void);
TP_HIDDEN void tp__register_fast_nn(void);
TP_HIDDEN void tp__register_fast_conv(void);

#endif
