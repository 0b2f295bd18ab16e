/*
 * linalg.c - linalg ops: schemas, shape rules and reference kernels.
 * (Placeholder: registers nothing yet.)
 */
#include "kernel_util.h"

void tp__register_linalg_ops(void) {}
