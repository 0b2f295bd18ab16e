/*
 * symshape.h - symbolic shape propagation through an exported program's
 * graph (symshape.c), used by the dynamic-shape solver (shapes.c).
 */
#ifndef TPEXPORT_SYMSHAPE_H
#define TPEXPORT_SYMSHAPE_H

#include "export_impl.h"
#include "../symdim.h"

/* A dynamic dim of a user input: path ("x", "xs[0]"), dim, expression. */
typedef struct sym_site {
    const char *path;
    int dim;
    sd_e expr;
} sym_site;

/* Called after each decision that narrowed the symbols: why says which
 * node required what; f[0..n) are the findings (already applied). */
typedef void (*sym_decided_fn)(void *user, const char *why, const sd_finding *f, int n);

/* Propagate symbolic shapes through p's graph (in order) by running each
 * op's own shape rule over symbolic dims (src/ops/dim.h), deciding every
 * relation the rules rely on with sd. Nodes whose rule cannot be followed
 * symbolically (or disagrees with the traced example shapes) while an
 * input is symbolic get unknown shapes: they are counted in *n_fallback and listed
 * in `fallbacks` ("name (op), ..."). Every node gets meta "sym_shape". */
TP_HIDDEN tp_status tp__symshape_propagate(sd_ctx *sd, tp_program *p, const user_input_info *inputs, int n_inputs,
                                           const sym_site *sites, int n_sites, const size_read *reads, int n_reads,
                                           sym_decided_fn cb, void *user, tp_sb *fallbacks, int *n_fallback);

#endif
