/*
 * unary.c - unary ops: schemas, shape rules and reference kernels.
 * (Placeholder: registers nothing yet.)
 */
#include "kernel_util.h"

void tp__register_unary_ops(void) {}
