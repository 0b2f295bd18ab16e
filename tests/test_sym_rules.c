/*
 * test_sym_rules.c - the dim type shape rules are written over
 * (src/ops/dim.h): with no env installed tp_sdim is integer arithmetic;
 * with one, the ops' own shape rules give symbolic output dims and record
 * the relations they rely on as decisions, and a rule that cannot be
 * followed (plain-int outputs, a symbolic int read as a plain int) is
 * marked failed. Expected shapes and decisions are derived by hand.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu/kernel_util.h"
#include "ops/dim.h"
#include "test_util.h"

/* ---- a small env: decisions collected as text, memory in a list ---------- */

typedef struct harness {
    sd_ctx *sd;
    tp_sym_env env;
    char decisions[2048];
    void *mem[256];
    int n_mem;
} harness;

static void h_decided(void *user, int rc, const char *what) {
    harness *h = user;
    size_t n = strlen(h->decisions);
    snprintf(h->decisions + n, sizeof h->decisions - n, "%s%s%s", n ? "; " : "", rc == SD_OK ? "" : "!", what);
}

static void *h_alloc(void *user, size_t size) {
    harness *h = user;
    if (h->n_mem == 256) return NULL;
    return h->mem[h->n_mem++] = calloc(1, size ? size : 1);
}

static void h_init(harness *h) {
    memset(h, 0, sizeof *h);
    h->sd = sd_new();
    h->env.sd = h->sd;
    h->env.decided = h_decided;
    h->env.alloc = h_alloc;
    h->env.user = h;
}

static void h_free(harness *h) {
    for (int i = 0; i < h->n_mem; i++) free(h->mem[i]);
    sd_free(h->sd);
}

/* A float32 meta tensor of dims d[nd] (symbolic ones carry their expression). */
static tp_value sym_tensor(harness *h, int nd, const tp_sdim *d) {
    int64_t sizes[TP_MAX_DIMS];
    for (int i = 0; i < nd; i++) sizes[i] = d[i].v;
    tp_tensor *t = NULL;
    if (tp_tensor_meta(TP_FLOAT32, nd, sizes, &t) != TP_OK) return tp_value_none();
    sd_e *sym = h_alloc(h, (size_t)(nd ? nd : 1) * sizeof *sym);
    for (int i = 0; i < nd; i++) sym[i] = d[i].e;
    tp__tensor_set_sym(t, sym);
    return tp_value_tensor(t);
}

static tp_sdim sym(harness *h, int s) {
    tp_sdim d = {sd_sym_example(h->sd, s), sd_sym(h->sd, s)};
    return d;
}

/* The shape text of a meta tensor ("[s0, 3]"). */
static void shape_text(harness *h, const tp_value *v, char *buf, size_t size) {
    if (v->kind != TP_VAL_TENSOR) {
        snprintf(buf, size, "(not a tensor)");
        return;
    }
    const tp_tensor *t = v->u.tensor;
    const sd_e *sy = tp__tensor_sym(t);
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < tp_tensor_ndim(t) && n < size; i++) {
        char e[128];
        if (sy && sy[i]) sd_print(h->sd, sd_subst(h->sd, sy[i]), e, sizeof e);
        else snprintf(e, sizeof e, "%lld", (long long)tp_tensor_sizes(t)[i]);
        n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? ", " : "", e);
    }
    if (n < size) snprintf(buf + n, size - n, "]");
}

/* Bind args to op, run its shape rule under the env, compare the shape. */
static bool rule_gives(harness *h, tp_op op, tp_value *args, int n, const char *want) {
    const tp_schema *sc = tp_op_schema(op);
    tp_value bound[16], out = tp_value_none();
    bool ok = sc && sc->n_args <= 16 && tp_op_bind(op, args, n, NULL, bound) == TP_OK;
    if (!ok) {
        fprintf(stderr, "  %s: bind failed: %s\n", tp_op_name(op), tp_last_error());
        return false;
    }
    h->env.fail = false;
    tp_sym_env *old = tp__sym_env_set(&h->env);
    tp_status st = tp_op_infer(op, bound, &out);
    tp__sym_env_set(old);
    char got[256];
    shape_text(h, &out, got, sizeof got);
    ok = st == TP_OK && !h->env.fail && strcmp(got, want) == 0;
    if (!ok)
        fprintf(stderr, "  %s: status %s, fail %d, got %s, want %s\n", tp_op_name(op), tp_status_str(st), h->env.fail,
                got, want);
    tp_value_clear(&out);
    for (int i = 0; i < sc->n_args; i++) tp_value_clear(&bound[i]);
    return ok;
}

static bool decided_text(harness *h, const char *want) {
    bool ok = strstr(h->decisions, want) != NULL;
    if (!ok) fprintf(stderr, "  decisions '%s' lack '%s'\n", h->decisions, want);
    return ok;
}

/* ---- without an env: plain integers ----------------------------------------- */

TEST(test_concrete_dims) {
    CHECK(tp__sym_env() == NULL);
    tp_sdim a = tp__dimk(-7), b = tp__dimk(7);
    CHECK(tp__dim_floordiv(a, 2).v == -4 && tp__dim_ceildiv(b, 2).v == 4 && tp__dim_ceildiv(a, 2).v == -3);
    CHECK(tp__dim_add(a, b).v == 0 && tp__dim_mul(a, b).v == -49 && tp__dim_sub(a, b).v == -14);
    CHECK(tp__dim_eq(b, tp__dimk(7), "x") && !tp__dim_eqk(b, 6, "x") && tp__dim_ge(b, 7, "x") && !tp__dim_ge(b, 8, "x"));
    CHECK(tp__dim_divisible(tp__dimk(12), 4, "x") && !tp__dim_divisible(tp__dimk(12), 5, "x"));
    CHECK(tp__dim_min(a, b, "x").v == -7 && tp__dim_max(a, b, "x").v == 7);
    tp_sdim r;
    CHECK(tp__dim_broadcast(tp__dimk(1), tp__dimk(5), &r) && r.v == 5);
    CHECK(!tp__dim_broadcast(tp__dimk(4), tp__dimk(5), &r));
    tp_sdim x[2] = {{3, NULL}, {1, NULL}}, y[1] = {{4, NULL}}, o[TP_MAX_DIMS];
    int n;
    CHECK_OK(tp__dims_broadcast(2, x, 1, y, &n, o));
    CHECK(n == 2 && o[0].v == 3 && o[1].v == 4);
    CHECK_STATUS(tp__dims_broadcast(1, (tp_sdim[]){{3, NULL}}, 1, y, &n, o), TP_ERR_SHAPE);
    CHECK_ERR_CONTAINS("shapes [3] and [4] cannot be broadcast (size 3 vs 4 at dim 0)");
}

/* ---- symbolic: the ops' own rules ------------------------------------------- */

TEST(test_broadcast_rules) {
    CHECK_OK(tp_ops_init());
    harness h;
    h_init(&h);
    int s0 = sd_sym_new(h.sd, "s0", 2, 64, 5, 0), s1 = sd_sym_new(h.sd, "s1", 2, 64, 5, 0);
    /* [s0, 3] + [1, 3]: the constant 1 broadcasts, nothing to decide */
    tp_value a[2] = {sym_tensor(&h, 2, (tp_sdim[]){sym(&h, s0), tp__dimk(3)}),
                     sym_tensor(&h, 2, (tp_sdim[]){tp__dimk(1), tp__dimk(3)})};
    CHECK(rule_gives(&h, TP_OP_ADD, a, 2, "[s0, 3]"));
    CHECK(h.decisions[0] == '\0');
    /* [s0] * [s1]: equal examples, so the two must be equal */
    tp_value b[2] = {sym_tensor(&h, 1, (tp_sdim[]){sym(&h, s0)}), sym_tensor(&h, 1, (tp_sdim[]){sym(&h, s1)})};
    CHECK(rule_gives(&h, TP_OP_MUL, b, 2, "[s0]"));
    CHECK(decided_text(&h, "broadcasting s0 against s1: s0 == s1"));
    for (int i = 0; i < 2; i++) {
        tp_value_clear(&a[i]);
        tp_value_clear(&b[i]);
    }
    h_free(&h);
}

TEST(test_shape_rules) {
    CHECK_OK(tp_ops_init());
    harness h;
    h_init(&h);
    int s0 = sd_sym_new(h.sd, "s0", 2, 64, 4, 0);
    tp_value x = sym_tensor(&h, 2, (tp_sdim[]){sym(&h, s0), tp__dimk(6)});
    /* reshape [s0, 6] to [-1, 3]: 6*s0/3 */
    tp_value r[2] = {x, tp_value_none()};
    CHECK_OK(tp_value_int_list((int64_t[]){-1, 3}, 2, &r[1]));
    CHECK(rule_gives(&h, TP_OP_RESHAPE, r, 2, "[2*s0, 3]"));
    tp_value_clear(&r[1]);
    /* x[1:] along dim 0: s0 - 1, relying on s0 >= 1 */
    tp_value sl[4] = {x, tp_value_int(0), tp_value_int(1), tp_value_none()};
    CHECK(rule_gives(&h, TP_OP_SLICE, sl, 4, "[s0 - 1, 6]"));
    CHECK(decided_text(&h, "slice start within the dim: s0 - 1 >= 0"));
    /* sum over dim 1, flatten, transpose, cat of two */
    tp_value su[2] = {x, tp_value_none()};
    CHECK_OK(tp_value_int_list((int64_t[]){1}, 1, &su[1]));
    CHECK(rule_gives(&h, TP_OP_SUM, su, 2, "[s0]"));
    tp_value_clear(&su[1]);
    CHECK(rule_gives(&h, TP_OP_FLATTEN, (tp_value[]){x}, 1, "[6*s0]"));
    CHECK(rule_gives(&h, TP_OP_TRANSPOSE, (tp_value[]){x, tp_value_int(0), tp_value_int(1)}, 3, "[6, s0]"));
    tp_value list;
    CHECK_OK(tp_value_list(2, &list));
    CHECK_OK(tp_value_copy(&x, &list.u.seq.items[0]));
    CHECK_OK(tp_value_copy(&x, &list.u.seq.items[1]));
    CHECK(rule_gives(&h, TP_OP_CAT, (tp_value[]){list, tp_value_int(0)}, 2, "[2*s0, 6]"));
    tp_value_clear(&list);
    /* chunk into 2 equal dynamic pieces: s0 must be even, so the store
     * rewrites it as 2*_s0 (a fresh symbol) and each piece is _s0 */
    h.decisions[0] = '\0';
    tp_value ch = tp_value_none();
    const tp_schema *sc = tp_op_schema(TP_OP_CHUNK);
    tp_value bound[8];
    CHECK_OK(tp_op_bind(TP_OP_CHUNK, (tp_value[]){x, tp_value_int(2)}, 2, NULL, bound));
    tp__sym_env_set(&h.env);
    CHECK_OK(tp_op_infer(TP_OP_CHUNK, bound, &ch));
    tp__sym_env_set(NULL);
    char text[128];
    CHECK(ch.kind == TP_VAL_LIST && tp_value_len(&ch) == 2);
    if (ch.kind == TP_VAL_LIST) {
        shape_text(&h, &ch.u.seq.items[1], text, sizeof text);
        CHECK_MSG(strcmp(text, "[_s0, 6]") == 0, "%s", text);
    }
    CHECK(decided_text(&h, "chunk into equal parts: s0 must be divisible by 2"));
    tp_value_clear(&ch);
    for (int i = 0; i < sc->n_args; i++) tp_value_clear(&bound[i]);
    tp_value_clear(&x);
    h_free(&h);
}

/* A symbolic int argument read through tp__arg_sdims keeps its expression
 * and is marked read; a rule building plain-int outputs fails the env. */
TEST(test_int_args_and_refusals) {
    CHECK_OK(tp_ops_init());
    harness h;
    h_init(&h);
    int s0 = sd_sym_new(h.sd, "s0", 2, 64, 4, 0);
    tp_value size;
    CHECK_OK(tp_value_int_list((int64_t[]){4, 3}, 2, &size));
    tp_value bound[8];
    const tp_schema *sc = tp_op_schema(TP_OP_ZEROS);
    CHECK_OK(tp_op_bind(TP_OP_ZEROS, &size, 1, NULL, bound));
    h.env.ints[0].slot = &bound[0].u.seq.items[0]; /* size[0] is s0 (example 4) */
    h.env.ints[0].e = sd_sym(h.sd, s0);
    h.env.n_ints = 1;
    tp_value out = tp_value_none();
    tp__sym_env_set(&h.env);
    CHECK_OK(tp_op_infer(TP_OP_ZEROS, bound, &out));
    tp__sym_env_set(NULL);
    char text[128];
    shape_text(&h, &out, text, sizeof text);
    CHECK_MSG(strcmp(text, "[s0, 3]") == 0, "%s", text);
    CHECK(h.env.ints[0].read && !h.env.fail);
    CHECK(decided_text(&h, "a size to create stays non-negative: s0 >= 0"));
    tp_value_clear(&out);
    for (int i = 0; i < sc->n_args; i++) tp_value_clear(&bound[i]);
    tp_value_clear(&size);
    /* plain int64 sizes cannot carry expressions */
    h.env.fail = false;
    tp__sym_env_set(&h.env);
    CHECK_OK(tp__out_tensor(&out, TP_FLOAT32, 1, (int64_t[]){4}));
    tp__sym_env_set(NULL);
    CHECK(h.env.fail);
    tp_value_clear(&out);
    /* a division by a dynamic int gives up */
    h.env.fail = false;
    tp_value ab[2] = {tp_value_int(8), tp_value_int(4)};
    h.env.ints[0].slot = &ab[1];
    h.env.ints[0].read = false;
    tp__sym_env_set(&h.env);
    CHECK_OK(tp_op_infer(TP_OP_SYM_FLOORDIV, ab, &out));
    tp__sym_env_set(NULL);
    CHECK(h.env.fail && h.env.ints[0].read && out.kind == TP_VAL_INT && out.u.i == 2);
    h_free(&h);
}

TEST_MAIN(T(test_concrete_dims), T(test_broadcast_rules), T(test_shape_rules), T(test_int_args_and_refusals))
