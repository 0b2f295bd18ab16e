/*
 * fast.c - registers the fast kernel variants (contract v2, ops_impl.h) of
 * every op family that has them. Each family's variants live beside its
 * reference kernels (fast_eltwise.c, ...).
 */
#include "fast.h"

void tp__register_fast_ops(void) {
    tp__register_fast_eltwise();
    tp__register_fast_linalg();
    tp__register_fast_conv();
    tp__register_fast_nn();
    tp__register_fast_attention();
    tp__register_fast_index();
    tp__register_fast_shape();
    tp__register_fast_onednn();
}
