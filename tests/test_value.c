/*
 * test_value.c - tests for tagged values (value.c): constructors, ownership
 * (copy, move, clear), lists, tuples and dicts, equality and repr (which
 * must read like Python's repr).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fail_alloc.h"
#include "test_util.h"

#define CHECK_REPR(v, want)                                                         \
    do {                                                                            \
        char buf_[256];                                                             \
        int n_ = tp_value_repr((v), buf_, sizeof buf_);                             \
        CHECK_MSG(strcmp(buf_, (want)) == 0 && n_ == (int)strlen(want),             \
                  "repr: got \"%s\" (%d), want \"%s\"", buf_, n_, (want));          \
    } while (0)

static tp_tensor *small_tensor(void) {
    tp_tensor *t = NULL;
    tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){2, 3}, &t);
    return t;
}

TEST(test_scalars) {
    tp_value v = tp_value_none();
    CHECK(v.kind == TP_VAL_NONE);
    v = tp_value_bool(true);
    CHECK(v.kind == TP_VAL_BOOL && v.u.b);
    CHECK(tp_value_is_number(&v) && tp_value_as_i64(&v) == 1 && tp_value_as_f64(&v) == 1.0);
    v = tp_value_int(-42);
    CHECK(v.kind == TP_VAL_INT && tp_value_as_i64(&v) == -42 && tp_value_as_f64(&v) == -42.0);
    v = tp_value_float(2.75);
    CHECK(v.kind == TP_VAL_FLOAT && tp_value_as_f64(&v) == 2.75 && tp_value_as_i64(&v) == 2);
    v = tp_value_float(-2.75);
    CHECK(tp_value_as_i64(&v) == -2); /* int() truncates toward zero */
    v = tp_value_float(1e300);
    CHECK(tp_value_as_i64(&v) == 0); /* out of range: no UB */
    v = tp_value_float(NAN);
    CHECK(tp_value_as_i64(&v) == 0);
    v = tp_value_dtype(TP_BFLOAT16);
    CHECK(v.kind == TP_VAL_DTYPE && v.u.dtype == TP_BFLOAT16 && !tp_value_is_number(&v));
    CHECK(tp_value_as_f64(&v) == 0.0 && tp_value_as_i64(&v) == 0);
    CHECK(tp_value_len(&v) == 0 && tp_value_at(&v, 0) == NULL && !tp_value_is_seq(&v));
    tp_value_clear(&v);
    CHECK(v.kind == TP_VAL_NONE);
    tp_value_clear(NULL);
    v = tp_value_tensor(NULL);
    CHECK(v.kind == TP_VAL_NONE);
    static const char *names[] = {"None", "bool", "int", "float", "str", "dtype", "Tensor", "Node", "list",
                                  "tuple", "dict"};
    for (int k = 0; k <= TP_VAL_DICT; k++) CHECK(strcmp(tp_value_kind_name((tp_value_kind)k), names[k]) == 0);
    CHECK(strcmp(tp_value_kind_name((tp_value_kind)99), "?") == 0);
}

TEST(test_strings) {
    char src[8] = "hello";
    tp_value s = tp_value_none(), e = tp_value_none(), c = tp_value_none();
    CHECK_OK(tp_value_str(src, &s));
    src[0] = 'j'; /* an owned copy */
    CHECK(s.kind == TP_VAL_STR && strcmp(s.u.s, "hello") == 0);
    CHECK_OK(tp_value_str(NULL, &e));
    CHECK(e.kind == TP_VAL_STR && strcmp(e.u.s, "") == 0);
    CHECK_OK(tp_value_copy(&s, &c));
    CHECK(c.u.s != s.u.s && tp_value_equal(&c, &s));
    CHECK(!tp_value_equal(&c, &e));
    tp_value_clear(&s);
    CHECK(strcmp(c.u.s, "hello") == 0); /* the copy survives */
    tp_value_clear(&c);
    tp_value_clear(&e);
}

TEST(test_tensor_values) {
    tp_tensor *t = small_tensor();
    if (!t) return;
    tp_value v = tp_value_tensor(tp_tensor_retain(t)), c = tp_value_none();
    CHECK(v.kind == TP_VAL_TENSOR && v.u.tensor == t);
    CHECK_OK(tp_value_copy(&v, &c));
    CHECK(c.u.tensor == t && tp_value_equal(&v, &c)); /* retained, not copied */
    tp_value_clear(&v);
    tp_tensor_free(t); /* c still holds a reference */
    CHECK(tp_tensor_numel(c.u.tensor) == 6);
    CHECK_REPR(&c, "Tensor(shape=[2, 3], dtype=float32)");
    tp_tensor *other = small_tensor();
    tp_value o = tp_value_tensor(other);
    CHECK(!tp_value_equal(&c, &o)); /* identity, not values */
    tp_value_clear(&o);
    tp_value_clear(&c);
}

TEST(test_sequences) {
    tp_value list = tp_value_none(), tup = tp_value_none(), ints = tp_value_none();
    CHECK_OK(tp_value_list(3, &list));
    CHECK(list.kind == TP_VAL_LIST && tp_value_len(&list) == 3 && tp_value_is_seq(&list));
    for (int i = 0; i < 3; i++) CHECK(tp_value_at(&list, i)->kind == TP_VAL_NONE);
    CHECK(tp_value_at(&list, 3) == NULL && tp_value_at(&list, -1) == NULL);
    tp_value item = tp_value_int(7);
    CHECK_OK(tp_value_seq_set(&list, 1, &item));
    CHECK(item.kind == TP_VAL_NONE && tp_value_at(&list, 1)->u.i == 7);
    CHECK_OK(tp_value_str("x", &item));
    CHECK_OK(tp_value_seq_set(&list, 1, &item)); /* replaces (and frees) the old item */
    CHECK(tp_value_at(&list, 1)->kind == TP_VAL_STR);
    item = tp_value_int(1);
    CHECK_STATUS(tp_value_seq_set(&list, 3, &item), TP_ERR_INDEX);
    CHECK_STATUS(tp_value_seq_set(&list, -1, &item), TP_ERR_INDEX);
    for (int i = 0; i < 5; i++) {
        item = tp_value_float(i + 0.5);
        CHECK_OK(tp_value_append(&list, &item));
        CHECK(item.kind == TP_VAL_NONE);
    }
    CHECK(tp_value_len(&list) == 8 && tp_value_at(&list, 7)->u.f == 4.5);
    CHECK_OK(tp_value_tuple(0, &tup));
    CHECK(tup.kind == TP_VAL_TUPLE && tp_value_len(&tup) == 0);
    item = tp_value_bool(false);
    CHECK_OK(tp_value_append(&tup, &item));
    CHECK(tp_value_len(&tup) == 1);
    CHECK_OK(tp_value_int_list((int64_t[]){3, -1, 4}, 3, &ints));
    CHECK(ints.kind == TP_VAL_LIST && tp_value_len(&ints) == 3 && tp_value_at(&ints, 1)->u.i == -1);
    CHECK_STATUS(tp_value_list(-1, &item), TP_ERR_INVALID_ARG);
    item = tp_value_int(3);
    tp_value not_seq = tp_value_int(1);
    CHECK_STATUS(tp_value_append(&not_seq, &item), TP_ERR_TYPE);
    CHECK_ERR_CONTAINS("got int");
    CHECK_STATUS(tp_value_seq_set(&not_seq, 0, &item), TP_ERR_INDEX);
    tp_value_clear(&list);
    tp_value_clear(&tup);
    tp_value_clear(&ints);
}

TEST(test_dicts) {
    tp_value d = tp_value_none(), item;
    CHECK_OK(tp_value_dict(&d));
    CHECK(d.kind == TP_VAL_DICT && tp_value_len(&d) == 0 && !tp_value_is_seq(&d));
    CHECK(tp_value_dict_get(&d, "a") == NULL);
    item = tp_value_int(1);
    CHECK_OK(tp_value_dict_set(&d, "a", &item));
    CHECK_OK(tp_value_str("two", &item));
    CHECK_OK(tp_value_dict_set(&d, "b", &item));
    CHECK(item.kind == TP_VAL_NONE && tp_value_len(&d) == 2);
    char key[4] = "a";
    tp_value *got = tp_value_dict_get(&d, key);
    CHECK(got && got->kind == TP_VAL_INT && got->u.i == 1);
    /* replace an existing key: same position, the old value is freed */
    CHECK_OK(tp_value_list(2, &item));
    CHECK_OK(tp_value_dict_set(&d, "b", &item));
    CHECK(tp_value_len(&d) == 2 && tp_value_dict_get(&d, "b")->kind == TP_VAL_LIST);
    CHECK(tp_value_at(&d, 1) == tp_value_dict_get(&d, "b"));
    CHECK_REPR(&d, "{'a': 1, 'b': [None, None]}");
    /* keys are copied */
    char k[8] = "key";
    item = tp_value_float(0.25);
    CHECK_OK(tp_value_dict_set(&d, k, &item));
    k[0] = 'X';
    CHECK(tp_value_dict_get(&d, "key") && tp_value_dict_get(&d, "Xey") == NULL);
    tp_value notdict = tp_value_int(0);
    item = tp_value_int(1);
    CHECK_STATUS(tp_value_dict_set(&notdict, "a", &item), TP_ERR_TYPE);
    CHECK(tp_value_dict_get(&notdict, "a") == NULL && tp_value_dict_get(NULL, "a") == NULL);
    /* dicts are ordered: same entries in another order differ */
    tp_value d2 = tp_value_none();
    CHECK_OK(tp_value_dict(&d2));
    item = tp_value_float(0.25);
    CHECK_OK(tp_value_dict_set(&d2, "key", &item));
    CHECK_OK(tp_value_copy(tp_value_dict_get(&d, "a"), &item));
    CHECK_OK(tp_value_dict_set(&d2, "a", &item));
    CHECK_OK(tp_value_copy(tp_value_dict_get(&d, "b"), &item));
    CHECK_OK(tp_value_dict_set(&d2, "b", &item));
    CHECK(!tp_value_equal(&d, &d2));
    tp_value d3 = tp_value_none();
    CHECK_OK(tp_value_copy(&d, &d3));
    CHECK(tp_value_equal(&d, &d3));
    tp_value_clear(&d);
    tp_value_clear(&d2);
    CHECK(tp_value_dict_get(&d3, "b") && tp_value_len(tp_value_dict_get(&d3, "b")) == 2);
    tp_value_clear(&d3);
}

/* [1, 'two', (3.5, None, Tensor), {'k': [True, torch.int8]}, []] */
static tp_status build_nested(tp_value *out) {
    tp_value list = tp_value_none(), item = tp_value_none(), tup = tp_value_none(), dict = tp_value_none(),
             inner = tp_value_none();
    tp_status st;
    tp_tensor *t = NULL;
    if ((st = tp_value_list(0, &list)) != TP_OK) goto fail;
    item = tp_value_int(1);
    if ((st = tp_value_append(&list, &item)) != TP_OK) goto fail;
    if ((st = tp_value_str("two", &item)) != TP_OK) goto fail;
    if ((st = tp_value_append(&list, &item)) != TP_OK) goto fail;
    if ((st = tp_value_tuple(3, &tup)) != TP_OK) goto fail;
    tup.u.seq.items[0] = tp_value_float(3.5);
    if ((st = tp_tensor_zeros(TP_INT8, 1, (int64_t[]){4}, &t)) != TP_OK) goto fail;
    tup.u.seq.items[2] = tp_value_tensor(t);
    if ((st = tp_value_append(&list, &tup)) != TP_OK) goto fail;
    if ((st = tp_value_dict(&dict)) != TP_OK) goto fail;
    if ((st = tp_value_list(2, &inner)) != TP_OK) goto fail;
    inner.u.seq.items[0] = tp_value_bool(true);
    inner.u.seq.items[1] = tp_value_dtype(TP_INT8);
    if ((st = tp_value_dict_set(&dict, "k", &inner)) != TP_OK) goto fail;
    if ((st = tp_value_append(&list, &dict)) != TP_OK) goto fail;
    if ((st = tp_value_list(0, &item)) != TP_OK) goto fail;
    if ((st = tp_value_append(&list, &item)) != TP_OK) goto fail;
    *out = list;
    return TP_OK;
fail:
    tp_value_clear(&list);
    tp_value_clear(&item);
    tp_value_clear(&tup);
    tp_value_clear(&dict);
    tp_value_clear(&inner);
    return st;
}

TEST(test_nested_copy_move_equal) {
    tp_value v = tp_value_none(), c = tp_value_none(), m = tp_value_none();
    CHECK_OK(build_nested(&v));
    CHECK_REPR(&v, "[1, 'two', (3.5, None, Tensor(shape=[4], dtype=int8)), {'k': [True, torch.int8]}, []]");
    CHECK_OK(tp_value_copy(&v, &c));
    CHECK(tp_value_equal(&v, &c));
    /* deep: changing the copy leaves the original alone */
    tp_value *inner = tp_value_at(tp_value_dict_get(tp_value_at(&c, 3), "k"), 0);
    CHECK(inner && inner->kind == TP_VAL_BOOL);
    if (inner) *inner = tp_value_bool(false);
    CHECK(!tp_value_equal(&v, &c));
    CHECK(tp_value_at(tp_value_dict_get(tp_value_at(&v, 3), "k"), 0)->u.b);
    CHECK(tp_value_at(&v, 1)->u.s != tp_value_at(&c, 1)->u.s);
    /* tensors are shared */
    CHECK(tp_value_at(tp_value_at(&v, 2), 2)->u.tensor == tp_value_at(tp_value_at(&c, 2), 2)->u.tensor);
    /* move */
    tp_value_move(&m, &c);
    CHECK(c.kind == TP_VAL_NONE && m.kind == TP_VAL_LIST && tp_value_len(&m) == 5);
    tp_value_move(&m, &m);
    CHECK(m.kind == TP_VAL_LIST);
    tp_value_move(&m, &v); /* clears what m held first */
    CHECK(v.kind == TP_VAL_NONE && tp_value_len(&m) == 5);
    tp_value_clear(&m);
}

TEST(test_equality) {
    tp_value a = tp_value_int(1), b = tp_value_float(1.0), c = tp_value_bool(true);
    CHECK(!tp_value_equal(&a, &b) && !tp_value_equal(&a, &c)); /* kinds differ */
    tp_value n1 = tp_value_float(NAN), n2 = tp_value_float(NAN);
    CHECK(tp_value_equal(&n1, &n2));
    tp_value z1 = tp_value_float(0.0), z2 = tp_value_float(-0.0);
    CHECK(tp_value_equal(&z1, &z2));
    tp_value none1 = tp_value_none(), none2 = tp_value_none();
    CHECK(tp_value_equal(&none1, &none2));
    tp_value d1 = tp_value_dtype(TP_INT8), d2 = tp_value_dtype(TP_UINT8);
    CHECK(!tp_value_equal(&d1, &d2));
    tp_value l = tp_value_none(), t = tp_value_none(), l2 = tp_value_none();
    CHECK_OK(tp_value_int_list((int64_t[]){1, 2}, 2, &l));
    CHECK_OK(tp_value_int_list((int64_t[]){1, 2, 3}, 3, &l2));
    CHECK_OK(tp_value_tuple(2, &t));
    t.u.seq.items[0] = tp_value_int(1);
    t.u.seq.items[1] = tp_value_int(2);
    CHECK(!tp_value_equal(&l, &t)); /* list != tuple */
    CHECK(!tp_value_equal(&l, &l2)); /* lengths differ */
    CHECK(tp_value_equal(&l, &l));
    tp_value_clear(&l);
    tp_value_clear(&l2);
    tp_value_clear(&t);
}

TEST(test_repr) {
    static const struct { double f; const char *want; } floats[] = {
        {2.5, "2.5"},         {1.0, "1.0"},       {-0.0, "-0.0"},        {0.1, "0.1"},
        {-0.3, "-0.3"},       {1e-05, "1e-05"},   {2.5e-05, "2.5e-05"},  {0.0001, "0.0001"},
        {1e16, "1e+16"},      {1e15, "1000000000000000.0"}, {1.5e300, "1.5e+300"},
        {0.1 + 0.2, "0.30000000000000004"}, {123456789.125, "123456789.125"}, {5e-324, "5e-324"},
        {1.7976931348623157e308, "1.7976931348623157e+308"}, {1.0 / 3.0, "0.3333333333333333"},
        {INFINITY, "inf"},    {-INFINITY, "-inf"}, {NAN, "nan"},
    };
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        tp_value v = tp_value_float(floats[i].f);
        CHECK_REPR(&v, floats[i].want);
    }
    tp_value v = tp_value_int(INT64_MIN);
    CHECK_REPR(&v, "-9223372036854775808");
    v = tp_value_bool(false);
    CHECK_REPR(&v, "False");
    v = tp_value_none();
    CHECK_REPR(&v, "None");
    v = tp_value_dtype(TP_FLOAT16);
    CHECK_REPR(&v, "torch.float16");
    CHECK_OK(tp_value_str("it", &v));
    CHECK_REPR(&v, "'it'");
    tp_value_clear(&v);
    CHECK_OK(tp_value_tuple(1, &v));
    v.u.seq.items[0] = tp_value_int(5);
    CHECK_REPR(&v, "(5,)"); /* Python's one-tuple */
    tp_value item = tp_value_int(6);
    CHECK_OK(tp_value_append(&v, &item));
    CHECK_REPR(&v, "(5, 6)");
    tp_value_clear(&v);
    CHECK_OK(tp_value_tuple(0, &v));
    CHECK_REPR(&v, "()");
    tp_value_clear(&v);
    CHECK_OK(tp_value_list(0, &v));
    CHECK_REPR(&v, "[]");
    tp_value_clear(&v);
    CHECK_OK(tp_value_dict(&v));
    CHECK_REPR(&v, "{}");
    tp_value_clear(&v);
}

TEST(test_repr_truncation) {
    tp_value v = tp_value_none();
    CHECK_OK(build_nested(&v));
    const char *full = "[1, 'two', (3.5, None, Tensor(shape=[4], dtype=int8)), {'k': [True, torch.int8]}, []]";
    int len = (int)strlen(full);
    CHECK(tp_value_repr(&v, NULL, 0) == len); /* length only */
    for (size_t size = 1; size <= (size_t)len + 2; size++) {
        char buf[128];
        memset(buf, '#', sizeof buf);
        int n = tp_value_repr(&v, buf, size);
        CHECK_MSG(n == len, "size %zu: returned %d", size, n);
        size_t want_len = size - 1 < (size_t)len ? size - 1 : (size_t)len;
        CHECK_MSG(strlen(buf) == want_len && strncmp(buf, full, want_len) == 0, "size %zu: \"%s\"", size, buf);
        CHECK_MSG(buf[size] == '#', "size %zu: wrote past the buffer", size);
    }
    tp_value_clear(&v);
}

/* ---- allocation failures ----------------------------------------------- */

static tp_status op_copy_nested(void *ctx) {
    const tp_value *v = ctx;
    tp_value c = tp_value_none();
    tp_status st = tp_value_copy(v, &c);
    tp_value_clear(&c);
    return st;
}

static tp_status op_build_nested(void *ctx) {
    (void)ctx;
    tp_value v = tp_value_none();
    tp_status st = build_nested(&v);
    tp_value_clear(&v);
    return st;
}

static tp_status op_dict_grow(void *ctx) {
    (void)ctx;
    tp_value d = tp_value_none(), item;
    tp_status st = tp_value_dict(&d);
    for (int i = 0; st == TP_OK && i < 6; i++) {
        char key[8];
        snprintf(key, sizeof key, "k%d", i % 4); /* two replacements */
        if ((st = tp_value_str(key, &item)) != TP_OK) break;
        st = tp_value_dict_set(&d, key, &item);
        tp_value_clear(&item); /* None on success; still owned on failure */
    }
    tp_value_clear(&d);
    return st;
}

TEST(test_nomem_values) {
    tp_value v = tp_value_none();
    CHECK_OK(build_nested(&v));
    check_alloc_failures("copy of a nested list", op_copy_nested, &v);
    tp_value_clear(&v);
    check_alloc_failures("building a nested list", op_build_nested, NULL);
    check_alloc_failures("dict growth", op_dict_grow, NULL);
}

TEST_MAIN(T(test_scalars), T(test_strings), T(test_tensor_values), T(test_sequences), T(test_dicts),
          T(test_nested_copy_move_equal), T(test_equality), T(test_repr), T(test_repr_truncation),
          T(test_nomem_values))
