/*
 * test_library.c - version queries and tp_shutdown (version.h).
 *
 * After a program has been loaded, called on 2 threads and freed,
 * tp_shutdown leaves no block of the library's allocator alive (the op
 * table's parsed schemas are the only process-wide blocks) and joins the
 * pool's workers; the library then works again from scratch.
 */
#include "test_util.h"
#include <stddef.h>

#include "tpexport/archive.h"
#include "tpexport/export.h"
#include "tpexport/onnx.h"
#include "tpexport/run.h"

TEST(test_version) {
    CHECK(strcmp(tp_version(), TP_VERSION_STRING) == 0);
    CHECK(tp_version_number() == TP_VERSION_NUMBER);
    CHECK(TP_VERSION_NUMBER == TP_VERSION_MAJOR * 10000 + TP_VERSION_MINOR * 100 + TP_VERSION_PATCH);
    char s[32];
    snprintf(s, sizeof s, "%d.%d.%d", TP_VERSION_MAJOR, TP_VERSION_MINOR, TP_VERSION_PATCH);
    CHECK(strcmp(s, TP_VERSION_STRING) == 0);
}

/* Load the MLP fixture, call it on 2 threads (the pool starts a worker),
 * check the output against a second call, free everything. */
static void use_library(float *first_value) {
    tp_archive *a = NULL;
    CHECK_OK(tp_archive_load("fixtures/tensorplay/mlp.pt2", NULL, &a));
    if (!a) return;
    tp_program *p = tp_archive_program(a, 0);
    tp_run_options opt;
    tp_run_options_init(&opt);
    opt.num_threads = 2;
    tp_run *r = NULL;
    CHECK_OK(tp_run_new(p, &opt, &r));
    tp_value out;
    if (r && tp_run_call(r, NULL, 0, NULL, &out) == TP_OK) {
        const tp_value *leaf = &out;
        while (leaf->kind != TP_VAL_TENSOR && tp_value_len(leaf) > 0) leaf = &leaf->u.seq.items[0];
        CHECK(leaf->kind == TP_VAL_TENSOR);
        if (leaf->kind == TP_VAL_TENSOR) *first_value = ((const float *)tp_tensor_data(leaf->u.tensor))[0];
        tp_value_clear(&out);
    } else {
        CHECK_MSG(false, "call: %s", tp_last_error());
    }
    tp_run_free(r);
    tp_archive_free(a);
}

TEST(test_shutdown_releases_everything) {
    float v1 = NAN, v2 = NAN;
    use_library(&v1);
    CHECK(tp_alloc_live_blocks() > 0); /* the op table */
    tp_shutdown();
    CHECK_MSG(tp_alloc_live_blocks() == 0, "%ld blocks alive after tp_shutdown", tp_alloc_live_blocks());
    /* usable again: the op table and workers come back on first use */
    use_library(&v2);
    CHECK(v1 == v2 && !isnan(v1));
    tp_shutdown();
    CHECK(tp_alloc_live_blocks() == 0);
    tp_shutdown(); /* twice is harmless */
    CHECK(tp_alloc_live_blocks() == 0);
    tp_ops_init(); /* back to the state the harness counts blocks from */
}

/* Option structs: the library reads only the struct_size bytes a caller
 * knows (a program built against older headers passes a shorter struct),
 * and 0 means this version's size. A field past struct_size that would
 * fail the load if read must be ignored. */
TEST(test_option_struct_sizes) {
    tp_load_options o;
    tp_load_options_init(&o);
    CHECK(o.struct_size == sizeof o);
    o.max_member_size = 1; /* every member is larger */
    tp_archive *a = NULL;
    CHECK(tp_archive_load("fixtures/tensorplay/mlp.pt2", &o, &a) == TP_ERR_UNSUPPORTED);
    o.struct_size = 0; /* zero-initialised style: this version's fields */
    CHECK(tp_archive_load("fixtures/tensorplay/mlp.pt2", &o, &a) == TP_ERR_UNSUPPORTED);
    o.struct_size = offsetof(tp_load_options, max_member_size); /* an older caller */
    CHECK_OK(tp_archive_load("fixtures/tensorplay/mlp.pt2", &o, &a));
    tp_archive_free(a);
    CHECK_OK(tp_archive_verify("fixtures/tensorplay/mlp.pt2", &o));

    tp_onnx_options io;
    tp_onnx_options_init(&io);
    CHECK(io.struct_size == sizeof io);
    tp_export_options eo;
    tp_export_options_init(&eo);
    CHECK(eo.struct_size == sizeof eo && eo.method == NULL);

    tp_run_options ro;
    tp_run_options_init(&ro);
    CHECK(ro.struct_size == sizeof ro && ro.cpu_level == TP_CPU_AUTO);
}

TEST_MAIN(T(test_version), T(test_shutdown_releases_everything), T(test_option_struct_sizes))
