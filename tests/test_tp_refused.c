/*
 * test_tp_refused.c - archives written by the real tensorplay that
 * tpexport refuses (fixtures/tensorplay_refused/, made by
 * fixtures/gen_tp_ops_shape.py and gen_tp_ops_nnfuncs.py): loading and verifying fail with
 * TP_ERR_UNSUPPORTED and a message naming the node and the reason, with
 * nothing leaked.
 */
#include <string.h>

#include "test_util.h"
#include "tpexport/archive.h"

/* repeat_interleave with a tensor of repeats and no output_size: the
 * output size depends on the repeats' values. */
TEST(test_repeat_interleave_tensor_repeats) {
    const char *path = "fixtures/tensorplay_refused/repeat_interleave_tensor_repeats.pt2";
    tp_archive *a = NULL;
    CHECK_STATUS(tp_archive_load(path, NULL, &a), TP_ERR_UNSUPPORTED);
    CHECK(a == NULL);
    const char *msg = tp_last_error();
    CHECK_MSG(strstr(msg, "node repeat_interleave") && strstr(msg, "data-dependent output size") &&
                  strstr(msg, "output_size"),
              "%s", msg);
    CHECK_STATUS(tp_archive_verify(path, NULL), TP_ERR_UNSUPPORTED);
    msg = tp_last_error();
    CHECK_MSG(strstr(msg, "node repeat_interleave") && strstr(msg, "data-dependent output size"), "%s", msg);
    tp_archive_free(a);
}

/* one_hot with num_classes=-1: the number of classes comes from the
 * values. */
TEST(test_one_hot_inferred_classes) {
    const char *path = "fixtures/tensorplay_refused/one_hot_inferred_classes.pt2";
    tp_archive *a = NULL;
    CHECK_STATUS(tp_archive_load(path, NULL, &a), TP_ERR_UNSUPPORTED);
    CHECK(a == NULL);
    const char *msg = tp_last_error();
    CHECK_MSG(strstr(msg, "node one_hot") && strstr(msg, "num_classes=-1") && strstr(msg, "data-dependent shape"),
              "%s", msg);
    CHECK_STATUS(tp_archive_verify(path, NULL), TP_ERR_UNSUPPORTED);
    msg = tp_last_error();
    CHECK_MSG(strstr(msg, "node one_hot") && strstr(msg, "num_classes=-1"), "%s", msg);
    tp_archive_free(a);
}

/* stride() of a clone: tensorplay's clone keeps its input's strides,
 * tpexport's result is contiguous, so the value is not folded. */
TEST(test_stride_of_clone) {
    const char *path = "fixtures/tensorplay_refused/stride_of_clone.pt2";
    tp_archive *a = NULL;
    CHECK_STATUS(tp_archive_load(path, NULL, &a), TP_ERR_UNSUPPORTED);
    CHECK(a == NULL);
    const char *msg = tp_last_error();
    CHECK_MSG(strstr(msg, "node stride") && strstr(msg, "the result of clone"), "%s", msg);
    CHECK_STATUS(tp_archive_verify(path, NULL), TP_ERR_UNSUPPORTED);
    msg = tp_last_error();
    CHECK_MSG(strstr(msg, "node stride") && strstr(msg, "clone"), "%s", msg);
    tp_archive_free(a);
}

TEST_MAIN(T(test_repeat_interleave_tensor_repeats), T(test_one_hot_inferred_classes), T(test_stride_of_clone))
