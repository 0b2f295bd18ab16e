/*
 * reduce.c - reduce ops: schemas, shape rules and reference kernels.
 * (Placeholder: registers nothing yet.)
 */
#include "kernel_util.h"

void tp__register_reduce_ops(void) {}
