/*
 * test_alloc_sweep.c - allocation-failure sweep over whole pipelines on
 * real archives (tensorplay's fixtures): load, verify, call through the
 * engine (plan + run context), call again (steady state), call through a
 * run context, unlift (tp_program_module) and call the module, decompose,
 * save to a buffer. The k-th allocation fails for every k until the
 * pipeline makes no more (fail_alloc.h): every failure must come back as
 * TP_ERR_NOMEM with nothing leaked (the sanitizer build also checks for
 * use-after-free and double frees on those paths), and the pipeline must
 * succeed when nothing fails. jansson's allocations go through the same
 * hook, so JSON parsing and writing are swept too. (test_hostile_load and
 * test_onnx_hostile sweep loading and ONNX import on their own.)
 */
#include "fail_alloc.h"
#include "test_util.h"
#include "tpexport/archive.h"
#include "tpexport/run.h"

static tp_status pipeline(void *ctx) {
    const char *path = ctx;
    tp_status st = tp_archive_verify(path, NULL);
    if (st != TP_OK) return st;
    tp_archive *a = NULL;
    TP_TRY(tp_archive_load(path, NULL, &a));
    tp_program *p = tp_archive_program(a, 0);
    tp_value out = tp_value_none();
    st = tp_program_call(p, NULL, 0, NULL, &out); /* plans, then runs */
    tp_value_clear(&out);
    if (st == TP_OK) st = tp_program_call(p, NULL, 0, NULL, &out); /* the cached plan */
    tp_value_clear(&out);
    tp_run *r = NULL;
    if (st == TP_OK) st = tp_run_new(p, NULL, &r);
    if (st == TP_OK) st = tp_run_call(r, NULL, 0, NULL, &out);
    tp_value_clear(&out);
    tp_run_free(r);
    tp_module *m = NULL;
    if (st == TP_OK) st = tp_program_module(p, &m);
    if (st == TP_OK) st = tp_module_call(m, NULL, 0, NULL, &out);
    tp_value_clear(&out);
    tp_decomp_table *t = NULL;
    tp_program *d = NULL;
    if (st == TP_OK) st = tp_decomp_table_default(&t);
    if (st == TP_OK) st = tp_program_run_decompositions(p, t, &d);
    tp_decomp_table_free(t);
    tp_program_free(d);
    void *buf = NULL;
    size_t size = 0;
    if (st == TP_OK) {
        tp_archive_entry e = {.name = tp_archive_program_name(a, 0), .program = p};
        st = tp_archive_save_buffer(&e, 1, NULL, 0, &buf, &size);
    }
    tp_free(buf);
    tp_archive_free(a);
    return st;
}

static void sweep(const char *path) {
    /* the pipeline must work as it is first */
    tp_status st = pipeline((void *)path);
    CHECK_MSG(st == TP_OK, "%s: %s", path, tp_last_error());
    if (st != TP_OK) return;
    long n = check_alloc_failures(path, pipeline, (void *)path);
    printf("  %s: %ld allocations, each failed in turn\n", path, n);
}

TEST(test_sweep_mlp) { sweep("fixtures/tensorplay/mlp.pt2"); }
TEST(test_sweep_counter) { sweep("fixtures/tensorplay/counter.pt2"); }
TEST(test_sweep_dynamic) { sweep("fixtures/tensorplay/dynamic.pt2"); }
TEST(test_sweep_cnn) { sweep("fixtures/tensorplay/cnn.pt2"); }

TEST_MAIN(T(test_sweep_mlp), T(test_sweep_counter), T(test_sweep_dynamic), T(test_sweep_cnn))
