/*
 * symdim.h - symbolic dimension sizes for dynamic-shape export: integer
 * expressions over named symbols (polynomials with integer coefficients
 * whose atoms are symbols and floor divisions by positive constants), kept
 * in a canonical form so that equal expressions compare equal, plus a
 * constraint store that decides the relations ops impose on sizes:
 *
 *   sd_require_eq(a, b)    a == b for every size in range
 *   sd_require_div(e, k)   e divisible by k
 *   sd_require_ge(e, c)    e >= c
 *
 * Each decision either holds for the whole range already, or narrows the
 * set of allowed sizes in one of four ways, reported as findings:
 *   SD_F_TIE     symbol t = a*k + b (k another symbol, a >= 1)
 *   SD_F_STATIC  symbol = value (the example's)
 *   SD_F_DIV     symbol = m*fresh + r (a fresh symbol for divisibility)
 *   SD_F_RANGE   symbol in [lo, hi]
 * Relations that cannot be expressed that way (e.g. z == x*y) are decided
 * soundly by specialising symbols (greedily, by elimination preference)
 * until they can. Every decision is checked against the example binding
 * (all symbols at their example values), which must satisfy it: a decision
 * that the example violates is SD_CONTRADICTION (a rule that disagrees with
 * the traced shapes).
 *
 * Expressions are immutable and owned by the sd_ctx (freed with it).
 */
#ifndef TPEXPORT_SYMDIM_H
#define TPEXPORT_SYMDIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tpexport/program.h"

typedef struct sd_ctx sd_ctx;
typedef const struct sd_poly *sd_e; /* NULL: unknown / failed */

typedef enum sd_state { SD_FREE, SD_STATIC, SD_REPLACED } sd_state;

typedef enum sd_fkind { SD_F_TIE, SD_F_STATIC, SD_F_DIV, SD_F_RANGE } sd_fkind;

typedef struct sd_finding {
    sd_fkind kind;
    int sym;           /* the symbol narrowed (TIE: the eliminated one) */
    int root;          /* TIE: the symbol it is tied to; DIV: the fresh symbol */
    int64_t a, b;      /* TIE: sym = a*root + b; DIV: sym = a*root + b (a = modulus) */
    int64_t value;     /* STATIC */
    int64_t lo, hi;    /* RANGE: new bounds (hi may be TP_DIM_UNBOUNDED) */
} sd_finding;

enum { SD_OK = 0, SD_CONTRADICTION = 1, SD_OVERFLOW = 2 };

TP_HIDDEN sd_ctx *sd_new(void);
TP_HIDDEN void sd_free(sd_ctx *c);

/* Symbols: name (copied), range [min, max] used for reasoning (max may be
 * TP_DIM_UNBOUNDED), example value, elimination preference (higher: chosen
 * first when a relation must eliminate or specialise a symbol; ties go to
 * the later symbol). Returns the index or -1 on OOM. */
TP_HIDDEN int sd_sym_new(sd_ctx *c, const char *name, int64_t min, int64_t max, int64_t example, int pref);
TP_HIDDEN int sd_num_syms(const sd_ctx *c);
TP_HIDDEN const char *sd_sym_name(const sd_ctx *c, int s);
TP_HIDDEN sd_state sd_sym_state(const sd_ctx *c, int s);
TP_HIDDEN int64_t sd_sym_min(const sd_ctx *c, int s);
TP_HIDDEN int64_t sd_sym_max(const sd_ctx *c, int s);
TP_HIDDEN int64_t sd_sym_example(const sd_ctx *c, int s);
TP_HIDDEN sd_e sd_sym_replacement(const sd_ctx *c, int s); /* SD_REPLACED / SD_STATIC: the expression */

/* Construction (NULL operands give NULL). */
TP_HIDDEN sd_e sd_const(sd_ctx *c, int64_t v);
TP_HIDDEN sd_e sd_sym(sd_ctx *c, int s);
TP_HIDDEN sd_e sd_add(sd_ctx *c, sd_e a, sd_e b);
TP_HIDDEN sd_e sd_sub(sd_ctx *c, sd_e a, sd_e b);
TP_HIDDEN sd_e sd_mul(sd_ctx *c, sd_e a, sd_e b);
TP_HIDDEN sd_e sd_addk(sd_ctx *c, sd_e a, int64_t k);
TP_HIDDEN sd_e sd_mulk(sd_ctx *c, sd_e a, int64_t k);
/* floor(a / k), k >= 1; ceil(a / k). */
TP_HIDDEN sd_e sd_floordiv(sd_ctx *c, sd_e a, int64_t k);
TP_HIDDEN sd_e sd_ceildiv(sd_ctx *c, sd_e a, int64_t k);
/* a with every replaced / static symbol substituted (canonical). */
TP_HIDDEN sd_e sd_subst(sd_ctx *c, sd_e a);

/* Queries. */
TP_HIDDEN bool sd_is_const(sd_e a, int64_t *v);
TP_HIDDEN bool sd_equal(sd_e a, sd_e b);   /* structural (canonical forms) */
TP_HIDDEN bool sd_affine1(sd_e a, int *sym, int64_t *scale, int64_t *offset); /* scale*sym + offset, or const (sym -1) */
/* Value at vals (one per symbol; NULL: the examples). false on overflow. */
TP_HIDDEN bool sd_eval(const sd_ctx *c, sd_e a, const int64_t *vals, int64_t *out);
/* Text like "2*s0*s1 + (s0 - 1)//2 + 1" (snprintf semantics). */
TP_HIDDEN int sd_print(const sd_ctx *c, sd_e a, char *buf, size_t size);
/* Does a mention symbol s (after substitution)? */
TP_HIDDEN bool sd_mentions(sd_ctx *c, sd_e a, int s);
TP_HIDDEN bool sd_overflowed(const sd_ctx *c);

/* Decisions: SD_OK (findings appended, see below), SD_CONTRADICTION or
 * SD_OVERFLOW. */
TP_HIDDEN int sd_require_eq(sd_ctx *c, sd_e a, sd_e b);
TP_HIDDEN int sd_require_div(sd_ctx *c, sd_e a, int64_t k);
TP_HIDDEN int sd_require_ge(sd_ctx *c, sd_e a, int64_t k);

/* Findings made since the last sd_take_findings (borrowed array valid
 * until the next decision); resets the list. */
TP_HIDDEN int sd_take_findings(sd_ctx *c, const sd_finding **out);

#endif
