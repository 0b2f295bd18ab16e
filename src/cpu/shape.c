/*
 * shape.c - shape ops: schemas, shape rules and reference kernels.
 * (Placeholder: registers nothing yet.)
 */
#include "kernel_util.h"

void tp__register_shape_ops(void) {}
