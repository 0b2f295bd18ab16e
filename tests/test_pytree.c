/*
 * test_pytree.c - tree specs: flatten/unflatten round trips over nested
 * tuples, lists, dicts and None; leaf-count errors; spec equality; the
 * JSON form (exact text, round trips, escapes, and malformed input of every
 * kind, including every truncation); torch's TreeSpec repr.
 */
#include <stdarg.h>

#include "fail_alloc.h"
#include "test_util.h"

#define CHECK_STR(actual, expected)                                                                  \
    do {                                                                                             \
        const char *a_ = (actual), *e_ = (expected);                                                 \
        CHECK_MSG(a_ && strcmp(a_, e_) == 0, "got \"%s\", expected \"%s\"", a_ ? a_ : "(null)", e_); \
    } while (0)

static tp_value seq(tp_value_kind kind, int n, ...) {
    tp_value t = tp_value_none();
    CHECK_OK(kind == TP_VAL_LIST ? tp_value_list(n, &t) : tp_value_tuple(n, &t));
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) t.u.seq.items[i] = va_arg(ap, tp_value);
    va_end(ap);
    return t;
}

/* dict from alternating const char *key, tp_value value (taken over) */
static tp_value dict(int n, ...) {
    tp_value d = tp_value_none();
    CHECK_OK(tp_value_dict(&d));
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        const char *k = va_arg(ap, const char *);
        tp_value v = va_arg(ap, tp_value);
        CHECK_OK(tp_value_dict_set(&d, k, &v));
    }
    va_end(ap);
    return d;
}

static tp_value tensor(double v) {
    tp_tensor *t = NULL;
    CHECK_OK(tp_tensor_scalar(TP_FLOAT32, v, &t));
    return tp_value_tensor(t);
}

/* (t1, [1, None, {'b': 2.5, 'a': (t2,)}], None, 'text') */
static tp_value nested(tp_tensor **t1, tp_tensor **t2) {
    tp_value a = tensor(1.0), b = tensor(2.0);
    *t1 = a.u.tensor;
    *t2 = b.u.tensor;
    tp_value s = tp_value_none();
    CHECK_OK(tp_value_str("text", &s));
    return seq(TP_VAL_TUPLE, 4, a,
               seq(TP_VAL_LIST, 3, tp_value_int(1), tp_value_none(),
                   dict(2, "b", tp_value_float(2.5), "a", seq(TP_VAL_TUPLE, 1, b))),
               tp_value_none(), s);
}

static char *json_of(const tp_treespec *s) {
    char *j = NULL;
    CHECK_OK(tp_treespec_to_json(s, &j));
    return j;
}

static char *repr_of(const tp_treespec *s) {
    char *r = NULL;
    CHECK_OK(tp_treespec_repr(s, &r));
    return r;
}

static tp_treespec *parse(const char *json) {
    tp_treespec *s = NULL;
    CHECK_OK(tp_treespec_from_json(json, strlen(json), &s));
    return s;
}

TEST(test_flatten_nested) {
    tp_tensor *t1, *t2;
    tp_value v = nested(&t1, &t2);
    tp_value leaves = tp_value_none();
    tp_treespec *spec = NULL;
    CHECK_OK(tp_pytree_flatten(&v, &leaves, &spec));
    CHECK(leaves.kind == TP_VAL_LIST && tp_value_len(&leaves) == 5);
    CHECK(tp_treespec_num_leaves(spec) == 5);
    /* depth-first order: t1, 1, 2.5, t2, 'text' (None contributes nothing) */
    CHECK(tp_value_at(&leaves, 0)->kind == TP_VAL_TENSOR && tp_value_at(&leaves, 0)->u.tensor == t1);
    CHECK(tp_value_at(&leaves, 1)->kind == TP_VAL_INT && tp_value_at(&leaves, 1)->u.i == 1);
    CHECK(tp_value_at(&leaves, 2)->kind == TP_VAL_FLOAT && tp_value_at(&leaves, 2)->u.f == 2.5);
    CHECK(tp_value_at(&leaves, 3)->u.tensor == t2);
    CHECK(tp_value_at(&leaves, 4)->kind == TP_VAL_STR && strcmp(tp_value_at(&leaves, 4)->u.s, "text") == 0);
    /* structure */
    CHECK(tp_treespec_kind(spec) == TP_TREE_TUPLE && tp_treespec_num_children(spec) == 4);
    const tp_treespec *lst = tp_treespec_child(spec, 1);
    CHECK(tp_treespec_kind(lst) == TP_TREE_LIST && tp_treespec_num_leaves(lst) == 3);
    CHECK(tp_treespec_kind(tp_treespec_child(lst, 1)) == TP_TREE_NONE);
    CHECK(tp_treespec_num_leaves(tp_treespec_child(lst, 1)) == 0);
    const tp_treespec *d = tp_treespec_child(lst, 2);
    CHECK(tp_treespec_kind(d) == TP_TREE_DICT);
    CHECK_STR(tp_treespec_key(d, 0), "b"); /* keys keep their order */
    CHECK_STR(tp_treespec_key(d, 1), "a");
    CHECK(tp_treespec_key(d, 2) == NULL && tp_treespec_key(lst, 0) == NULL);
    CHECK(tp_treespec_child(spec, 4) == NULL && tp_treespec_child(spec, -1) == NULL);
    CHECK(tp_treespec_num_children(tp_treespec_child(spec, 0)) == 0);
    /* unflatten gives back an equal value (tensors shared) */
    tp_value back = tp_value_none();
    CHECK_OK(tp_pytree_unflatten(spec, leaves.u.seq.items, tp_value_len(&leaves), &back));
    CHECK(tp_value_equal(&back, &v));
    /* with other leaves */
    tp_value other[5] = {tp_value_int(10), tp_value_int(11), tp_value_int(12), tp_value_int(13), tp_value_int(14)};
    tp_value back2 = tp_value_none();
    CHECK_OK(tp_pytree_unflatten(spec, other, 5, &back2));
    char buf[256];
    tp_value_repr(&back2, buf, sizeof buf);
    CHECK_STR(buf, "(10, [11, None, {'b': 12, 'a': (13,)}], None, 14)");
    tp_value_clear(&back2);
    tp_value_clear(&back);
    tp_value_clear(&leaves);
    tp_treespec_free(spec);
    tp_value_clear(&v);
}

TEST(test_flatten_roots) {
    tp_value leaves = tp_value_none();
    tp_treespec *spec = NULL;
    /* a leaf at the root */
    tp_value v = tp_value_int(5);
    CHECK_OK(tp_pytree_flatten(&v, &leaves, &spec));
    CHECK(tp_treespec_kind(spec) == TP_TREE_LEAF && tp_treespec_num_leaves(spec) == 1);
    CHECK(tp_value_len(&leaves) == 1 && tp_value_at(&leaves, 0)->u.i == 5);
    tp_value back = tp_value_none();
    CHECK_OK(tp_pytree_unflatten(spec, leaves.u.seq.items, 1, &back));
    CHECK(back.kind == TP_VAL_INT && back.u.i == 5);
    tp_value_clear(&leaves);
    tp_treespec_free(spec);
    /* None at the root: no leaves */
    v = tp_value_none();
    CHECK_OK(tp_pytree_flatten(&v, &leaves, &spec));
    CHECK(tp_treespec_kind(spec) == TP_TREE_NONE && tp_value_len(&leaves) == 0);
    CHECK_OK(tp_pytree_unflatten(spec, NULL, 0, &back));
    CHECK(back.kind == TP_VAL_NONE);
    tp_value_clear(&leaves);
    tp_treespec_free(spec);
    /* empty containers */
    v = seq(TP_VAL_TUPLE, 2, seq(TP_VAL_LIST, 0), dict(0));
    CHECK_OK(tp_pytree_flatten(&v, &leaves, &spec));
    CHECK(tp_treespec_num_leaves(spec) == 0);
    char *j = json_of(spec);
    CHECK_STR(j, "{\"t\":\"tuple\",\"c\":[{\"t\":\"list\",\"c\":[]},{\"t\":\"dict\",\"ctx\":[],\"c\":[]}]}");
    tp_free(j);
    CHECK_OK(tp_pytree_unflatten(spec, NULL, 0, &back));
    CHECK(tp_value_equal(&back, &v));
    tp_value_clear(&back);
    tp_value_clear(&leaves);
    tp_treespec_free(spec);
    tp_value_clear(&v);
    /* node references are leaves too */
    v = seq(TP_VAL_TUPLE, 2, tp_value_node(NULL), tp_value_dtype(TP_INT8));
    CHECK_OK(tp_pytree_flatten(&v, &leaves, &spec));
    CHECK(tp_value_len(&leaves) == 2 && tp_value_at(&leaves, 0)->kind == TP_VAL_NODE);
    tp_value_clear(&leaves);
    tp_treespec_free(spec);
    tp_value_clear(&v);
}

TEST(test_leaf_count_errors) {
    tp_tensor *t1, *t2;
    tp_value v = nested(&t1, &t2);
    tp_value leaves = tp_value_none(), out = tp_value_int(3);
    tp_treespec *spec = NULL;
    CHECK_OK(tp_pytree_flatten(&v, &leaves, &spec));
    CHECK_STATUS(tp_pytree_unflatten(spec, leaves.u.seq.items, 4, &out), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("expected 5 leaves, got 4");
    CHECK(out.kind == TP_VAL_NONE);
    CHECK_STATUS(tp_pytree_unflatten(spec, leaves.u.seq.items, 6, &out), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("expected 5 leaves, got 6");
    tp_treespec *leaf = NULL;
    CHECK_OK(tp_treespec_leaf(&leaf));
    CHECK_STATUS(tp_pytree_unflatten(leaf, NULL, 0, &out), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("expected 1 leaf, got 0");
    tp_treespec_free(leaf);
    tp_value_clear(&leaves);
    tp_treespec_free(spec);
    tp_value_clear(&v);
    /* too deep */
    v = tp_value_int(1);
    for (int i = 0; i < 300; i++) v = seq(TP_VAL_LIST, 1, v);
    CHECK_STATUS(tp_pytree_flatten(&v, &leaves, &spec), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("nested");
    CHECK(spec == NULL && leaves.kind == TP_VAL_NONE);
    tp_value_clear(&v);
}

TEST(test_build_and_equal) {
    tp_treespec *a = NULL, *b = NULL, *c = NULL, *l1 = NULL, *l2 = NULL, *n = NULL;
    CHECK_OK(tp_treespec_leaf(&l1));
    CHECK_OK(tp_treespec_none(&n));
    const char *keys[] = {"x", "y"};
    CHECK_OK(tp_treespec_new(TP_TREE_DICT, (tp_treespec *[]){l1, n}, 2, keys, &a));
    CHECK(tp_treespec_num_leaves(a) == 1);
    CHECK_OK(tp_treespec_copy(a, &b));
    CHECK(tp_treespec_equal(a, b) && tp_treespec_equal(a, a));
    /* different keys, key order, kind */
    CHECK_OK(tp_treespec_leaf(&l1));
    CHECK_OK(tp_treespec_none(&n));
    CHECK_OK(tp_treespec_new(TP_TREE_DICT, (tp_treespec *[]){l1, n}, 2, (const char *[]){"y", "x"}, &c));
    CHECK(!tp_treespec_equal(a, c));
    tp_treespec_free(c);
    CHECK_OK(tp_treespec_leaf(&l1));
    CHECK_OK(tp_treespec_none(&n));
    CHECK_OK(tp_treespec_new(TP_TREE_TUPLE, (tp_treespec *[]){l1, n}, 2, NULL, &c));
    CHECK(!tp_treespec_equal(a, c));
    tp_treespec *d = NULL;
    CHECK_OK(tp_treespec_leaf(&l1));
    CHECK_OK(tp_treespec_none(&n));
    CHECK_OK(tp_treespec_new(TP_TREE_LIST, (tp_treespec *[]){l1, n}, 2, NULL, &d));
    CHECK(!tp_treespec_equal(c, d)); /* tuple vs list */
    tp_treespec_free(d);
    CHECK_OK(tp_treespec_leaf(&l1));
    CHECK_OK(tp_treespec_leaf(&l2));
    CHECK_OK(tp_treespec_new(TP_TREE_TUPLE, (tp_treespec *[]){l1, l2}, 2, NULL, &d));
    CHECK(!tp_treespec_equal(c, d)); /* None vs leaf */
    tp_treespec_free(d);
    tp_treespec_free(c);
    /* refusals free the children */
    CHECK_OK(tp_treespec_leaf(&l1));
    CHECK_OK(tp_treespec_leaf(&l2));
    CHECK_STATUS(tp_treespec_new(TP_TREE_DICT, (tp_treespec *[]){l1, l2}, 2, (const char *[]){"k", "k"}, &c),
                 TP_ERR_DUPLICATE);
    CHECK_ERR_CONTAINS("'k'");
    CHECK_OK(tp_treespec_leaf(&l1));
    CHECK_STATUS(tp_treespec_new(TP_TREE_LEAF, (tp_treespec *[]){l1}, 1, NULL, &c), TP_ERR_INVALID_ARG);
    CHECK_OK(tp_treespec_leaf(&l1));
    CHECK_STATUS(tp_treespec_new(TP_TREE_TUPLE, (tp_treespec *[]){l1, NULL}, 2, NULL, &c), TP_ERR_INVALID_ARG);
    CHECK_STR(tp_tree_kind_name(TP_TREE_DICT), "dict");
    CHECK_STR(tp_tree_kind_name((tp_tree_kind)42), "?");
    tp_treespec_free(a);
    tp_treespec_free(b);
    tp_treespec_free(NULL);
}

TEST(test_json_round_trip) {
    tp_tensor *t1, *t2;
    tp_value v = nested(&t1, &t2);
    tp_value leaves = tp_value_none();
    tp_treespec *spec = NULL;
    CHECK_OK(tp_pytree_flatten(&v, &leaves, &spec));
    char *j = json_of(spec);
    CHECK_STR(j, "{\"t\":\"tuple\",\"c\":[{\"t\":\"leaf\"},{\"t\":\"list\",\"c\":[{\"t\":\"leaf\"},{\"t\":\"none\"},"
                 "{\"t\":\"dict\",\"ctx\":[\"b\",\"a\"],\"c\":[{\"t\":\"leaf\"},{\"t\":\"tuple\",\"c\":[{\"t\":\"leaf\"}]}]}]},"
                 "{\"t\":\"none\"},{\"t\":\"leaf\"}]}");
    tp_treespec *back = parse(j);
    CHECK(back && tp_treespec_equal(back, spec));
    tp_treespec_free(back);
    /* whitespace and member order are free */
    back = parse(" {\n \"c\" : [ {\"t\":\"leaf\"} , { \"c\":[], \"t\" : \"list\" } ] ,\t\"t\":\"tuple\" }\r\n");
    tp_treespec *expect = parse("{\"t\":\"tuple\",\"c\":[{\"t\":\"leaf\"},{\"t\":\"list\",\"c\":[]}]}");
    CHECK(back && expect && tp_treespec_equal(back, expect));
    tp_treespec_free(back);
    tp_treespec_free(expect);
    /* the length bounds the input: no NUL needed */
    char buf[] = "{\"t\":\"leaf\"}GARBAGE";
    CHECK_OK(tp_treespec_from_json(buf, 12, &back));
    CHECK(back && tp_treespec_kind(back) == TP_TREE_LEAF);
    tp_treespec_free(back);
    tp_free(j);
    tp_value_clear(&leaves);
    tp_treespec_free(spec);
    tp_value_clear(&v);
}

TEST(test_json_escapes) {
    /* keys with quotes, backslashes, control and non-ASCII characters */
    tp_value v = dict(4, "a\"b", tp_value_int(1), "c\\d", tp_value_int(2), "e\nf\x01", tp_value_int(3),
                      "caf\xc3\xa9", tp_value_int(4));
    tp_value leaves = tp_value_none();
    tp_treespec *spec = NULL;
    CHECK_OK(tp_pytree_flatten(&v, &leaves, &spec));
    char *j = json_of(spec);
    CHECK_STR(j, "{\"t\":\"dict\",\"ctx\":[\"a\\\"b\",\"c\\\\d\",\"e\\nf\\u0001\",\"caf\xc3\xa9\"],"
                 "\"c\":[{\"t\":\"leaf\"},{\"t\":\"leaf\"},{\"t\":\"leaf\"},{\"t\":\"leaf\"}]}");
    tp_treespec *back = parse(j);
    CHECK(back && tp_treespec_equal(back, spec));
    tp_treespec_free(back);
    /* \u escapes decode to UTF-8, including surrogate pairs; \/ and \t */
    back = parse("{\"t\":\"dict\",\"ctx\":[\"caf\\u00e9\",\"\\ud83d\\ude00\",\"a\\/b\\t\"],"
                 "\"c\":[{\"t\":\"leaf\"},{\"t\":\"leaf\"},{\"t\":\"leaf\"}]}");
    if (back) {
        CHECK_STR(tp_treespec_key(back, 0), "caf\xc3\xa9");
        CHECK_STR(tp_treespec_key(back, 1), "\xf0\x9f\x98\x80");
        CHECK_STR(tp_treespec_key(back, 2), "a/b\t");
    }
    tp_treespec_free(back);
    tp_free(j);
    tp_value_clear(&leaves);
    tp_treespec_free(spec);
    tp_value_clear(&v);
}

static void check_bad_json(const char *json, const char *message) {
    tp_treespec *s = (tp_treespec *)&s; /* must be reset to NULL */
    tp_status st = tp_treespec_from_json(json, strlen(json), &s);
    CHECK_MSG(st == TP_ERR_CORRUPT, "%s: returned %s", json, tp_status_str(st));
    CHECK_MSG(strstr(tp_last_error(), message) != NULL, "%s: message \"%s\" lacks \"%s\"", json, tp_last_error(),
              message);
    CHECK(s == NULL);
    if (st == TP_OK) tp_treespec_free(s);
}

TEST(test_json_malformed) {
    check_bad_json("", "empty input");
    check_bad_json("   ", "expected '{' but the input ended");
    check_bad_json("[]", "expected '{' at offset 0");
    check_bad_json("{", "expected a string but the input ended");
    check_bad_json("{\"t\"", "expected ':' but the input ended");
    check_bad_json("{\"t\":\"leaf\"", "expected ',' or '}' but the input ended");
    check_bad_json("{\"t\":\"leaf\"} x", "trailing data after the spec at offset 13");
    check_bad_json("{\"t\":\"leaf\"}{}", "trailing data");
    check_bad_json("{}", "lacks member \"t\" at offset 0");
    check_bad_json("{\"t\":\"set\"}", "unknown spec kind \"set\"");
    check_bad_json("{\"t\":1}", "expected a string at offset 5");
    check_bad_json("{\"t\":\"leaf\",\"t\":\"none\"}", "member \"t\" given twice");
    check_bad_json("{\"t\":\"leaf\",\"x\":1}", "unknown member \"x\" at offset 12");
    check_bad_json("{\"t\":\"leaf\",\"c\":[]}", "leaf and none specs take no");
    check_bad_json("{\"t\":\"none\",\"ctx\":[]}", "leaf and none specs take no");
    check_bad_json("{\"t\":\"tuple\"}", "container spec lacks member \"c\"");
    check_bad_json("{\"t\":\"list\",\"c\":[],\"ctx\":[]}", "only dict specs take \"ctx\"");
    check_bad_json("{\"t\":\"dict\",\"c\":[]}", "dict spec lacks member \"ctx\"");
    check_bad_json("{\"t\":\"dict\",\"ctx\":[\"a\"],\"c\":[]}", "dict spec has 1 keys but 0 children");
    check_bad_json("{\"t\":\"dict\",\"ctx\":[\"a\",\"a\"],\"c\":[{\"t\":\"leaf\"},{\"t\":\"leaf\"}]}",
                   "duplicate dict key in \"ctx\" at offset 23");
    check_bad_json("{\"t\":\"tuple\",\"c\":[{\"t\":\"leaf\"},]}", "expected '{' at offset 31");
    check_bad_json("{\"t\":\"tuple\",\"c\":[{\"t\":\"leaf\"} {\"t\":\"leaf\"}]}", "expected ',' or ']'");
    check_bad_json("{\"t\":\"tuple\",\"c\":{}}", "expected '['");
    check_bad_json("{\"t\":\"dict\",\"ctx\":[1],\"c\":[{\"t\":\"leaf\"}]}", "expected a string");
    check_bad_json("{\"t\":\"leaf\",}", "expected a string at offset 12");
    check_bad_json("{\"t\":\"le\x01" "af\"}", "control character in string");
    check_bad_json("{\"t\":\"le\\qaf\"}", "bad escape in string");
    check_bad_json("{\"t\":\"\\u00zz\"}", "bad \\u escape");
    check_bad_json("{\"t\":\"\\ud800\"}", "unpaired surrogate");
    check_bad_json("{\"t\":\"\\udc00\"}", "unpaired surrogate");
    check_bad_json("{\"t\":\"\\ud800\\u0041\"}", "unpaired surrogate");
    check_bad_json("{\"t\":\"\\u0000\"}", "NUL character");
    check_bad_json("{\"t\":\"leaf", "unterminated string");
    check_bad_json("{\"t\":\"leaf\\", "unterminated string");
    /* nesting beyond the limit is refused without recursing further */
    size_t depth = 400, len = depth * 24 + 16;
    char *deep = tp_malloc(len);
    size_t o = 0;
    for (size_t i = 0; i < depth; i++) o += (size_t)snprintf(deep + o, len - o, "{\"t\":\"list\",\"c\":[");
    o += (size_t)snprintf(deep + o, len - o, "{\"t\":\"leaf\"}");
    for (size_t i = 0; i < depth; i++) o += (size_t)snprintf(deep + o, len - o, "]}");
    check_bad_json(deep, "nested too deeply");
    tp_free(deep);
    /* every truncation of a valid spec fails cleanly */
    const char *good = "{\"t\":\"tuple\",\"c\":[{\"t\":\"leaf\"},{\"t\":\"dict\",\"ctx\":[\"k\\u00e9\"],"
                       "\"c\":[{\"t\":\"none\"}]},{\"t\":\"list\",\"c\":[]}]}";
    size_t good_len = strlen(good);
    for (size_t n = 0; n < good_len; n++) {
        tp_treespec *s = NULL;
        tp_status st = tp_treespec_from_json(good, n, &s);
        CHECK_MSG(st == TP_ERR_CORRUPT, "prefix of %zu bytes: %s", n, tp_status_str(st));
        tp_treespec_free(s);
    }
    tp_treespec *s = NULL;
    CHECK_OK(tp_treespec_from_json(good, good_len, &s));
    tp_treespec_free(s);
    CHECK_STATUS(tp_treespec_from_json(NULL, 3, &s), TP_ERR_INVALID_ARG);
}

TEST(test_repr) {
    tp_tensor *t1, *t2;
    tp_value v = nested(&t1, &t2);
    tp_value leaves = tp_value_none();
    tp_treespec *spec = NULL;
    CHECK_OK(tp_pytree_flatten(&v, &leaves, &spec));
    char *r = repr_of(spec);
    /* torch.utils._pytree (2.x): repr(tree_flatten(value)[1]) */
    CHECK_STR(r, "TreeSpec(tuple, None, [*,\n"
                 "  TreeSpec(list, None, [*,\n"
                 "    TreeSpec(NoneType, None, []),\n"
                 "    TreeSpec(dict, ['b', 'a'], [*,\n"
                 "      TreeSpec(tuple, None, [*])])]),\n"
                 "  TreeSpec(NoneType, None, []),\n"
                 "  *])");
    tp_free(r);
    tp_treespec *leaf = NULL;
    CHECK_OK(tp_treespec_leaf(&leaf));
    r = repr_of(leaf);
    CHECK_STR(r, "*");
    tp_free(r);
    tp_treespec_free(leaf);
    tp_value_clear(&leaves);
    tp_treespec_free(spec);
    tp_value_clear(&v);
    /* a key needing double quotes */
    v = dict(1, "it's", tp_value_int(1));
    CHECK_OK(tp_pytree_flatten(&v, &leaves, &spec));
    r = repr_of(spec);
    CHECK_STR(r, "TreeSpec(dict, [\"it's\"], [*])");
    tp_free(r);
    tp_value_clear(&leaves);
    tp_treespec_free(spec);
    tp_value_clear(&v);
}

/* ---- allocation failures ---------------------------------------------------- */

static tp_status pytree_ops(void *ctx) {
    const tp_value *v = ctx;
    tp_value leaves = tp_value_none(), back = tp_value_none();
    tp_treespec *spec = NULL, *parsed = NULL, *copy = NULL;
    char *json = NULL, *repr = NULL;
    tp_status st = tp_pytree_flatten(v, &leaves, &spec);
    if (st == TP_OK) st = tp_pytree_unflatten(spec, leaves.u.seq.items, tp_value_len(&leaves), &back);
    if (st == TP_OK) st = tp_treespec_to_json(spec, &json);
    if (st == TP_OK) st = tp_treespec_from_json(json, strlen(json), &parsed);
    if (st == TP_OK) st = tp_treespec_copy(parsed, &copy);
    if (st == TP_OK) st = tp_treespec_repr(copy, &repr);
    if (st == TP_OK && (!tp_treespec_equal(spec, copy) || !tp_value_equal(v, &back)))
        st = tp_error(TP_ERR_INTERNAL, "round trip changed the value");
    tp_free(json);
    tp_free(repr);
    tp_treespec_free(spec);
    tp_treespec_free(parsed);
    tp_treespec_free(copy);
    tp_value_clear(&leaves);
    tp_value_clear(&back);
    return st;
}

TEST(test_alloc_failures) {
    tp_tensor *t1, *t2;
    tp_value v = nested(&t1, &t2);
    long n = check_alloc_failures("pytree round trip", pytree_ops, &v);
    CHECK(n > 20);
    tp_value_clear(&v);
}

TEST_MAIN(T(test_flatten_nested), T(test_flatten_roots), T(test_leaf_count_errors), T(test_build_and_equal),
          T(test_json_round_trip), T(test_json_escapes), T(test_json_malformed), T(test_repr),
          T(test_alloc_failures))
