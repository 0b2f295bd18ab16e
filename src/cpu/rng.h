/*
 * rng.h - the random numbers of TP_OPF_RANDOM ops (dropout, the random
 * fills of random.c): splitmix64, one stream per kernel call, seeded from a
 * process-wide call counter. Draws follow the distributions PyTorch's ops
 * define; the streams do not reproduce torch.manual_seed's (nor
 * tensorplay's), so outputs are tested by their distribution.
 */
#ifndef TPEXPORT_CPU_RNG_H
#define TPEXPORT_CPU_RNG_H

#include <stdint.h>

#include "internal.h"

/* A fresh stream state for one kernel call. */
TP_HIDDEN uint64_t tp__rng_seed(void);

static inline uint64_t tp__rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1), 53 bits. */
static inline double tp__rng_uniform(uint64_t *state) { return (double)(tp__rng_next(state) >> 11) * 0x1.0p-53; }

/* Uniform in (0, 1): never 0, for logarithms. */
static inline double tp__rng_uniform_open(uint64_t *state) {
    return ((double)(tp__rng_next(state) >> 11) + 0.5) * 0x1.0p-53;
}

/* Dropout masks drawn for training mode (random.c): per element, per
 * feature map ((N, C) of an (N, C, ...) input), and the alpha forms. */
typedef enum { TP_DROPOUT_PLAIN, TP_DROPOUT_FEATURE, TP_DROPOUT_ALPHA, TP_DROPOUT_FEATURE_ALPHA } tp_dropout_kind;
/* y = dropout of x (any strides, y shaped like x); mask (may be NULL) gets
 * 1 where kept, 0 where dropped, shaped like x, or (N, C, 1, ...) for the
 * feature forms. train false: y = x, the mask all ones. */
TP_HIDDEN tp_status tp__dropout_draw(tp_dropout_kind kind, const tp_tensor *x, double p, bool train, tp_tensor *y,
                                     tp_tensor *mask);

#endif
