/*
 * test_symdim.c - the symbolic dim layer used by dynamic-shape export
 * (src/export/symdim.c): canonical forms, simplification of floor
 * divisions, evaluation, printing, and the decision procedures for
 * equality (ties, specialisation), divisibility (fresh symbols) and lower
 * bounds (range refinement).
 */
#include <string.h>

#include "symdim.h"
#include "test_util.h"

static bool prints(sd_ctx *c, sd_e e, const char *want) {
    char buf[256];
    sd_print(c, e, buf, sizeof buf);
    if (strcmp(buf, want) != 0) fprintf(stderr, "  got '%s', want '%s'\n", buf, want);
    return strcmp(buf, want) == 0;
}

TEST(test_canonical_forms) {
    sd_ctx *c = sd_new();
    int a = sd_sym_new(c, "a", 2, 64, 6, 0), b = sd_sym_new(c, "b", 2, 64, 4, 0);
    sd_e A = sd_sym(c, a), B = sd_sym(c, b);
    /* commutativity, distribution, cancellation */
    CHECK(sd_equal(sd_add(c, A, B), sd_add(c, B, A)));
    CHECK(sd_equal(sd_mul(c, sd_addk(c, A, 1), B), sd_add(c, sd_mul(c, B, A), B)));
    int64_t v;
    CHECK(sd_is_const(sd_sub(c, sd_add(c, A, B), sd_add(c, B, A)), &v) && v == 0);
    /* floor division: exact parts come out, gcds cancel, nesting merges */
    CHECK(sd_equal(sd_floordiv(c, sd_addk(c, sd_mulk(c, A, 2), 2), 2), sd_addk(c, A, 1)));
    CHECK(sd_equal(sd_floordiv(c, sd_addk(c, sd_mulk(c, A, 4), 6), 4), sd_addk(c, A, 1)));
    CHECK(sd_equal(sd_floordiv(c, sd_addk(c, A, 7), 2), sd_addk(c, sd_floordiv(c, sd_addk(c, A, 1), 2), 3)));
    CHECK(sd_equal(sd_floordiv(c, sd_floordiv(c, A, 2), 3), sd_floordiv(c, A, 6)));
    CHECK(sd_equal(sd_floordiv(c, sd_mulk(c, A, 6), 4), sd_floordiv(c, sd_mulk(c, A, 3), 2)));
    /* constants inside a floor division are reduced modulo the divisor */
    CHECK(prints(c, sd_addk(c, sd_floordiv(c, sd_addk(c, A, -1), 2), 1), "(a + 1)//2"));
    CHECK(prints(c, sd_add(c, sd_mulk(c, sd_mul(c, A, B), 2), sd_addk(c, B, -3)), "2*a*b + b - 3"));
    CHECK(prints(c, sd_ceildiv(c, A, 3), "(a + 2)//3"));
    /* evaluation: examples and explicit bindings, floor semantics */
    CHECK(sd_eval(c, sd_floordiv(c, sd_addk(c, A, -9), 2), NULL, &v) && v == -2);
    int64_t vals[2] = {11, 3};
    CHECK(sd_eval(c, sd_add(c, sd_mul(c, A, B), sd_floordiv(c, A, 4)), vals, &v) && v == 35);
    sd_free(c);
}

TEST(test_equality_decisions) {
    sd_ctx *c = sd_new();
    int x = sd_sym_new(c, "x", 2, 64, 4, 0), y = sd_sym_new(c, "y", 2, 64, 4, 0), z = sd_sym_new(c, "z", 2, 200, 9, 0);
    const sd_finding *f;
    /* y == x: the later symbol is tied to the earlier */
    CHECK(sd_require_eq(c, sd_sym(c, x), sd_sym(c, y)) == SD_OK);
    CHECK(sd_take_findings(c, &f) == 1 && f[0].kind == SD_F_TIE && f[0].sym == y && f[0].root == x && f[0].a == 1 &&
          f[0].b == 0);
    CHECK(sd_sym_state(c, y) == SD_REPLACED);
    /* now x - y is identically 0: nothing new */
    CHECK(sd_require_eq(c, sd_sym(c, y), sd_sym(c, x)) == SD_OK);
    CHECK(sd_take_findings(c, &f) == 0);
    /* z == 2*y + 1 (= 2*x + 1): a derived relation */
    CHECK(sd_require_eq(c, sd_sym(c, z), sd_addk(c, sd_mulk(c, sd_sym(c, y), 2), 1)) == SD_OK);
    CHECK(sd_take_findings(c, &f) == 1 && f[0].kind == SD_F_TIE && f[0].sym == z && f[0].root == x && f[0].a == 2 &&
          f[0].b == 1);
    /* a relation the example violates is a contradiction */
    CHECK(sd_require_eq(c, sd_sym(c, x), sd_const(c, 5)) == SD_CONTRADICTION);
    /* x == 4 pins x; z follows */
    CHECK(sd_require_eq(c, sd_sym(c, x), sd_const(c, 4)) == SD_OK);
    CHECK(sd_take_findings(c, &f) == 1 && f[0].kind == SD_F_STATIC && f[0].sym == x && f[0].value == 4);
    int64_t v;
    CHECK(sd_is_const(sd_subst(c, sd_sym(c, z)), &v) && v == 9);
    sd_free(c);
    /* a product: n == a*b cannot be a dim rule; b is specialised, then n = 3*a */
    c = sd_new();
    int a = sd_sym_new(c, "a", 2, 64, 2, 0), b = sd_sym_new(c, "b", 2, 64, 3, 0), n = sd_sym_new(c, "n", 2, 64, 6, 0);
    CHECK(sd_require_eq(c, sd_sym(c, n), sd_mul(c, sd_sym(c, a), sd_sym(c, b))) == SD_OK);
    int k = sd_take_findings(c, &f);
    CHECK(k == 2 && f[0].kind == SD_F_STATIC && f[0].sym == b && f[1].kind == SD_F_TIE && f[1].sym == n &&
          f[1].root == a && f[1].a == 3);
    sd_free(c);
    /* preference: an AUTO-like symbol (higher pref) is eliminated first */
    c = sd_new();
    int p = sd_sym_new(c, "p", 2, 64, 5, 2), q = sd_sym_new(c, "q", 2, 64, 5, 0);
    CHECK(sd_require_eq(c, sd_sym(c, p), sd_sym(c, q)) == SD_OK);
    CHECK(sd_take_findings(c, &f) == 1 && f[0].sym == p && f[0].root == q);
    sd_free(c);
}

TEST(test_divisibility_decisions) {
    sd_ctx *c = sd_new();
    int n = sd_sym_new(c, "n", 2, 64, 12, 0);
    const sd_finding *f;
    /* 2*n divisible by 4 -> n = 2*_n */
    CHECK(sd_require_div(c, sd_mulk(c, sd_sym(c, n), 2), 4) == SD_OK);
    CHECK(sd_take_findings(c, &f) == 1 && f[0].kind == SD_F_DIV && f[0].sym == n && f[0].a == 2 && f[0].b == 0 &&
          f[0].lo == 1 && f[0].hi == 32);
    int fresh = f[0].root;
    CHECK(strcmp(sd_sym_name(c, fresh), "_n") == 0 && sd_sym_example(c, fresh) == 6);
    /* then 3*n divisible by 6 holds already; n divisible by 3 needs _n = 3*__ */
    CHECK(sd_require_div(c, sd_mulk(c, sd_sym(c, n), 3), 6) == SD_OK);
    CHECK(sd_take_findings(c, &f) == 0);
    CHECK(sd_require_div(c, sd_sym(c, n), 6) == SD_OK);
    CHECK(sd_take_findings(c, &f) == 1 && f[0].kind == SD_F_DIV && f[0].sym == fresh && f[0].a == 3);
    int64_t vals[3] = {0, 0, 5}, v;
    CHECK(sd_eval(c, sd_subst(c, sd_sym(c, n)), vals, &v) && v == 30);
    /* the quotient is exact afterwards */
    sd_e q = sd_floordiv(c, sd_subst(c, sd_sym(c, n)), 6);
    int s;
    int64_t sc, off;
    CHECK(sd_affine1(q, &s, &sc, &off) && s == f[0].root && sc == 1 && off == 0);
    /* an offset: n + 1 divisible by 4 with n = 11 -> n = 4*_m + 3 */
    sd_ctx *c2 = sd_new();
    int m = sd_sym_new(c2, "m", 3, 100, 11, 0);
    CHECK(sd_require_div(c2, sd_addk(c2, sd_sym(c2, m), 1), 4) == SD_OK);
    CHECK(sd_take_findings(c2, &f) == 1 && f[0].a == 4 && f[0].b == 3 && f[0].lo == 0 && f[0].hi == 24);
    CHECK(sd_require_div(c2, sd_sym(c2, m), 4) == SD_CONTRADICTION);
    sd_free(c2);
    sd_free(c);
    /* a product divisible by 6 (probes moving one symbol at a time pass) */
    c = sd_new();
    int a = sd_sym_new(c, "a", 2, 64, 6, 0), b = sd_sym_new(c, "b", 2, 64, 6, 0);
    CHECK(sd_require_div(c, sd_mul(c, sd_sym(c, a), sd_sym(c, b)), 6) == SD_OK);
    CHECK(sd_take_findings(c, &f) == 1 && f[0].kind == SD_F_STATIC && f[0].sym == b);
    sd_free(c);
}

TEST(test_range_decisions) {
    sd_ctx *c = sd_new();
    int l = sd_sym_new(c, "L", 2, 64, 20, 0);
    const sd_finding *f;
    /* conv1d, kernel 5, stride 3: (L - 5)//3 + 1 >= 1 -> L >= 5 */
    sd_e out = sd_addk(c, sd_floordiv(c, sd_addk(c, sd_sym(c, l), -5), 3), 1);
    CHECK(sd_require_ge(c, out, 1) == SD_OK);
    CHECK(sd_take_findings(c, &f) == 1 && f[0].kind == SD_F_RANGE && f[0].sym == l && f[0].lo == 5 && f[0].hi == 64);
    CHECK(sd_require_ge(c, out, 1) == SD_OK);
    CHECK(sd_take_findings(c, &f) == 0);
    /* an upper bound: 10 - L >= 0 (a slice end that must not clamp the other way) */
    CHECK(sd_require_ge(c, sd_addk(c, sd_mulk(c, sd_sym(c, l), -1), 30), 0) == SD_OK);
    CHECK(sd_take_findings(c, &f) == 1 && f[0].kind == SD_F_RANGE && f[0].lo == 5 && f[0].hi == 30);
    CHECK(sd_require_ge(c, sd_sym(c, l), 21) == SD_CONTRADICTION);
    sd_free(c);
    /* two symbols, monotone: a*b >= 12 with examples 4, 4 and mins 2 */
    c = sd_new();
    int a = sd_sym_new(c, "a", 2, 64, 4, 0), b = sd_sym_new(c, "b", 2, TP_DIM_UNBOUNDED, 4, 0);
    CHECK(sd_require_ge(c, sd_mul(c, sd_sym(c, a), sd_sym(c, b)), 12) == SD_OK);
    int n = sd_take_findings(c, &f);
    CHECK(n >= 1);
    int64_t v, vals[2] = {sd_sym_min(c, a), sd_sym_min(c, b)};
    CHECK(sd_eval(c, sd_mul(c, sd_sym(c, a), sd_sym(c, b)), vals, &v) && v >= 12);
    sd_free(c);
}

TEST_MAIN(T(test_canonical_forms), T(test_equality_decisions), T(test_divisibility_decisions), T(test_range_decisions))
