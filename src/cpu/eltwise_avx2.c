/* eltwise_avx2.c - the elementwise loops (eltwise_loops.h) built for the avx2 level. */
#define TP_ELT_TABLE tp__eltwise_avx2
#define TP_ELT_VLANES 8
#include "eltwise_loops.h"
