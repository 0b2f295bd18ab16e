/* eltwise_avx512.c - the elementwise loops (eltwise_loops.h) built for the avx512 level. */
#define TP_ELT_TABLE tp__eltwise_avx512
#define TP_ELT_VLANES 16
#include "eltwise_loops.h"
