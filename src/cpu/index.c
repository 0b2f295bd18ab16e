/*
 * index.c - index ops: schemas, shape rules and reference kernels.
 * (Placeholder: registers nothing yet.)
 */
#include "kernel_util.h"

void tp__register_index_ops(void) {}
