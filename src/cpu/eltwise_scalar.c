/* eltwise_scalar.c - the elementwise loops (eltwise_loops.h) built for the scalar level. */
#define TP_ELT_TABLE tp__eltwise_scalar
#include "eltwise_loops.h"
