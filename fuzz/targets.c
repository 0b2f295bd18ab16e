/*
 * targets.c - bodies of the archive, program-document, ONNX and .npy fuzz
 * targets (see targets.h). Compiled into the libFuzzer executables and
 * into tests/test_fuzz_corpus, which replays fuzz/corpus/<target>/ and
 * tests/fixtures/crashes/<target>/ in the ordinary test suite.
 */
#include "targets.h"

#include <stdbool.h>
#include <string.h>

#include <stdlib.h>

#include "archive/serde.h"
#include "archive/zip.h"
#include "tpexport/alloc.h"
#include "tpexport/archive.h"
#include "tpexport/onnx.h"
#include "tpexport/run.h"
#include "tpexport/tpexport.h"

#define REQUIRE(cond)                  \
    do {                               \
        if (!(cond)) __builtin_trap(); \
    } while (0)

/* Limits small enough that no input of a few KB makes a large allocation
 * legitimately (the loader must refuse the rest). */
static const tp_load_options g_archive_opts = {
    .max_member_size = 16u << 20, .max_total_size = 64u << 20, .max_ratio = 1100};

/* ---- calling a loaded program ------------------------------------------------ */

/* Bounds of the call path: programs whose state and example inputs hold
 * more elements are not called; a call through a run context is cancelled
 * before step CALL_MAX_STEPS + 1; while calling, single allocations above
 * CALL_MAX_BYTES are refused through the allocation hook (TP_ERR_NOMEM). */
#define CALL_MAX_ELEMENTS 100000
#define CALL_MAX_STEPS 10000
#define CALL_MAX_BYTES ((size_t)64 << 20)

/* libc, as the default hook, so blocks allocated before and after it was
 * set can be freed by either. */
static void *capped_alloc(void *user, void *ptr, size_t old_size, size_t new_size) {
    (void)user;
    (void)old_size;
    if (new_size == 0) {
        free(ptr);
        return NULL;
    }
    if (new_size > CALL_MAX_BYTES) return NULL;
    return realloc(ptr, new_size);
}

static bool cancel_after_max_steps(void *user) {
    int64_t *steps = user;
    return ++*steps > CALL_MAX_STEPS;
}

/* Tensor elements in a value tree, saturating at INT64_MAX. */
static int64_t value_elements(const tp_value *v) {
    switch (v->kind) {
    case TP_VAL_TENSOR: return tp_tensor_numel(v->u.tensor);
    case TP_VAL_LIST:
    case TP_VAL_TUPLE:
    case TP_VAL_DICT: {
        int64_t n = 0;
        for (int64_t i = 0; i < v->u.seq.n; i++) {
            int64_t k = value_elements(&v->u.seq.items[i]);
            if (k > INT64_MAX - n) return INT64_MAX;
            n += k;
        }
        return n;
    }
    default: return 0;
    }
}

/* Whether p can be called on its example inputs cheaply: every user input
 * has one, and state plus examples hold at most CALL_MAX_ELEMENTS. */
static bool small_and_callable(const tp_program *p) {
    int64_t total = 0;
    int n_user = tp_program_num_user_inputs(p);
    for (int i = 0; i < n_user; i++) {
        tp_io_info info;
        if (tp_program_input_info(p, i, &info) != TP_OK || !info.name) return false;
        const tp_value *ex = tp_program_example_input(p, info.name);
        if (!ex) return false;
        int64_t k = value_elements(ex);
        if (k > CALL_MAX_ELEMENTS - total) return false;
        total += k;
    }
    tp_named_state state = {0};
    if (tp_program_named_state(p, TP_FILTER_ALL, &state) != TP_OK) return false;
    bool small = true;
    for (int i = 0; i < state.n && small; i++) {
        int64_t k = state.items[i].tensor ? tp_tensor_numel(state.items[i].tensor) : 0;
        if (k > CALL_MAX_ELEMENTS - total) small = false;
        else total += k;
    }
    tp_named_state_free(&state);
    return small;
}

/* A call must succeed or fail cleanly: a status with a message. */
static void require_clean(tp_status st, tp_value *out) {
    REQUIRE(st == TP_OK || tp_last_error()[0] != '\0');
    tp_value_clear(out);
}

/* Call p on its example inputs (no arguments: the examples fill them)
 * through a run context cancelled after CALL_MAX_STEPS steps and, when that
 * ran to the end, through tp_program_call, with large allocations refused. */
static void call_program(tp_program *p) {
    if (!small_and_callable(p)) return;
    tp_set_allocator(capped_alloc, NULL);
    int64_t steps = 0;
    tp_run_options ro;
    tp_run_options_init(&ro);
    ro.cancel = cancel_after_max_steps;
    ro.cancel_user = &steps;
    tp_run *r = NULL;
    tp_status st = TP_ERR_CANCELLED;
    if (tp_run_new(p, &ro, &r) == TP_OK) {
        tp_value out = tp_value_none();
        tp_clear_error();
        st = tp_run_call(r, NULL, 0, NULL, &out);
        require_clean(st, &out);
        tp_run_free(r);
    }
    /* tp_program_call cannot be cancelled: only programs whose run stayed
     * within the step bound (or failed otherwise) are called again */
    if (st != TP_ERR_CANCELLED && steps <= CALL_MAX_STEPS) {
        tp_value out = tp_value_none();
        tp_clear_error();
        require_clean(tp_program_call(p, NULL, 0, NULL, &out), &out);
    }
    tp_set_allocator(NULL, NULL);
}

/* ---- archives ----------------------------------------------------------- */

/* Inputs that start with "TPFZ\n" are archives spelled as text so that
 * mutations reach the documents past the ZIP layer's CRC checks: sections
 * "@@ <member name>\n<bytes>" (up to the next "\n@@ " or the end), zipped
 * with our writer (a name ending in "~" is deflated) before loading.
 * Anything else is loaded as a ZIP image as it is. */
static uint8_t *sections_to_zip(const uint8_t *data, size_t size, size_t *out_size) {
    tp_zip_writer *w = NULL;
    if (tp__zip_writer_new(&w) != TP_OK) return NULL;
    const uint8_t *p = data + 5, *end = data + size;
    while (p + 3 <= end && memcmp(p, "@@ ", 3) == 0) {
        const uint8_t *name = p + 3, *nl = memchr(name, '\n', (size_t)(end - name));
        if (!nl || nl - name >= 512) break;
        const uint8_t *body = nl + 1, *next = body;
        while (next < end && !(next + 4 <= end && memcmp(next, "\n@@ ", 4) == 0)) next++;
        char member[512];
        size_t len = (size_t)(nl - name);
        memcpy(member, name, len);
        member[len] = '\0';
        bool deflate = len > 0 && member[len - 1] == '~';
        if (deflate) member[len - 1] = '\0';
        /* refused names and duplicates are simply left out */
        (void)tp__zip_add(w, member, body, (size_t)(next - body), deflate);
        p = next < end ? next + 1 : end;
    }
    void *img = NULL;
    if (tp__zip_finish(w, &img, out_size) != TP_OK) return NULL;
    return img;
}

/* An archive tpexport wrote loads back with the same program names (img is freed). */
static void loads_back(void *img, size_t img_size, const tp_archive_entry *e, int n) {
    tp_archive *b = NULL;
    tp_load_options o = g_archive_opts;
    o.max_ratio = 0;
    o.max_member_size = o.max_total_size = 0;
    REQUIRE(tp_archive_load_buffer(img, img_size, &o, &b) == TP_OK);
    REQUIRE(tp_archive_num_programs(b) == n);
    for (int i = 0; i < n; i++) REQUIRE(tp_archive_find_program(b, e[i].name) != NULL);
    tp_archive_free(b);
    tp_free(img);
}

int tp_fuzz_archive(const uint8_t *data, size_t size) {
    if (size >= 5 && memcmp(data, "TPFZ\n", 5) == 0) {
        size_t img_size = 0;
        uint8_t *img = sections_to_zip(data, size, &img_size);
        if (img) tp_fuzz_archive(img, img_size);
        tp_free(img);
        return 0;
    }
    tp_archive *a = NULL;
    tp_status st = tp_archive_load_buffer(data, size, &g_archive_opts, &a);
    REQUIRE((st == TP_OK) == (a != NULL));
    REQUIRE(st == TP_OK || tp_last_error()[0] != '\0');
    tp_status vst = tp_archive_verify_buffer(data, size, &g_archive_opts);
    /* an allocation refused as too large may stop one and not the other */
    if (st != TP_ERR_NOMEM && vst != TP_ERR_NOMEM) REQUIRE((st == TP_OK) == (vst == TP_OK));
    if (!a) return 0;
    int n = tp_archive_num_programs(a);
    REQUIRE(n >= 1);
    tp_archive_entry *e = tp_calloc((size_t)n, sizeof *e);
    if (!e) {
        tp_archive_free(a);
        return 0;
    }
    for (int i = 0; i < n; i++) {
        e[i].name = tp_archive_program_name(a, i);
        e[i].program = tp_archive_program(a, i);
        REQUIRE(e[i].name && e[i].program && tp_archive_find_program(a, e[i].name));
    }
    /* saving may refuse what tensorplay (or PyTorch's format) cannot
     * express; what is written must load back */
    void *img = NULL;
    size_t img_size = 0;
    if (tp_archive_save_buffer(e, n, NULL, 0, &img, &img_size) == TP_OK) loads_back(img, img_size, e, n);
    if (tp_archive_save_torch_buffer(e, n, &img, &img_size) == TP_OK) loads_back(img, img_size, e, n);
    for (int i = 0; i < n; i++) call_program(tp_archive_program(a, i));
    tp_free(e);
    tp_archive_free(a);
    return 0;
}

/* ---- program documents, weights indexes, example pickles ------------------ */

/* State for any target: a small float32 vector (the document's shapes
 * decide whether the program then checks out). */
static tp_status fuzz_state(void *ctx, const char *target, tp_state_kind kind, tp_tensor **out) {
    (void)ctx;
    (void)kind;
    if (!target || target[0] == 'z') return TP_ERR_NOT_FOUND; /* some state is missing */
    int64_t n = 4;
    return tp_tensor_zeros(TP_FLOAT32, 1, &n, out);
}

#define FUZZ_PAYLOAD 4096

static tp_status fuzz_payload(void *ctx, const char *path_name, size_t *size) {
    (void)ctx;
    if (!path_name || path_name[0] == 'z') return tp_error(TP_ERR_NOT_FOUND, "no payload '%s'", path_name);
    *size = FUZZ_PAYLOAD;
    return TP_OK;
}

static void no_release(void *ctx, void *data) {
    (void)ctx;
    (void)data;
}

int tp_fuzz_program_json(const uint8_t *data, size_t size) {
    const char *json = (const char *)data;
    /* the document: stop at the first problem, then verify mode */
    tp_serde_read_options ro = {.state = fuzz_state};
    tp_program *p = NULL;
    tp_status st = tp__serde_program_from_json(json, size, &ro, &p);
    REQUIRE((st == TP_OK) == (p != NULL));
    tp_serde_problems probs = {0};
    ro.problems = &probs;
    tp_program *q = NULL;
    tp_status vst = tp__serde_program_from_json(json, size, &ro, &q);
    REQUIRE((vst == TP_OK) == (q != NULL));
    if (st != TP_ERR_NOMEM && vst != TP_ERR_NOMEM) REQUIRE((st == TP_OK) == (vst == TP_OK));
    REQUIRE(vst == TP_OK || vst == TP_ERR_NOMEM || probs.n > 0);
    tp__serde_problems_free(&probs);
    tp_program_free(q);
    if (p) {
        char *out = NULL;
        if (tp__serde_program_to_json(p, NULL, &out, NULL) == TP_OK) tp_free(out);
        tp_program_free(p);
    }

    /* a weights index: accepted entries fit a payload of the size given */
    tp_serde_weights w = {0};
    if (tp__serde_weights_from_json(json, size, "weights", fuzz_payload, NULL, NULL, &w) == TP_OK) {
        static uint64_t payload[FUZZ_PAYLOAD / 8];
        for (int i = 0; i < w.n; i++) {
            REQUIRE(w.items[i].name && w.items[i].path_name && w.items[i].bytes_needed <= FUZZ_PAYLOAD);
            tp_tensor *t = NULL;
            tp_status tst = tp__serde_weight_tensor(&w.items[i], payload, FUZZ_PAYLOAD, no_release, NULL, &t);
            REQUIRE(tst == TP_OK || tst == TP_ERR_NOMEM);
            tp_tensor_free(t);
        }
        char *out = NULL;
        size_t len = 0;
        if (tp__serde_weights_to_json(&w, &out, &len) == TP_OK) tp_free(out);
    }
    tp__serde_weights_free(&w);

    /* tensorplay's example-input pickle */
    tp_value ex = tp_value_none();
    if (tp__serde_examples_from_pickle(data, size, NULL, &ex) == TP_OK) {
        void *pkl = NULL;
        size_t pkl_size = 0;
        tp_status wst = tp__serde_examples_to_pickle(&ex, &pkl, &pkl_size);
        if (wst == TP_OK) {
            tp_value again = tp_value_none();
            tp_status rst = tp__serde_examples_from_pickle(pkl, pkl_size, NULL, &again);
            REQUIRE(rst == TP_OK || rst == TP_ERR_NOMEM);
            REQUIRE(rst != TP_OK || tp_value_len(&again) == tp_value_len(&ex));
            tp_value_clear(&again);
            tp_free(pkl);
        }
    }
    tp_value_clear(&ex);
    return 0;
}

/* ---- ONNX models -------------------------------------------------------------- */

int tp_fuzz_onnx(const uint8_t *data, size_t size) {
    tp_onnx_options opts = {0};
    opts.report_all = true;
    tp_program *p = NULL;
    tp_onnx_report report = {0};
    tp_status st = tp_onnx_load_buffer(data, size, NULL, &opts, &p, &report);
    REQUIRE((st == TP_OK) == (p != NULL));
    REQUIRE(st == TP_OK || tp_last_error()[0] != '\0');
    if (p) {
        char *text = NULL;
        if (tp_program_to_string(p, &text) == TP_OK) tp_free(text);
        /* static inputs have zero-filled examples of their shapes */
        call_program(p);
        tp_program_free(p);
    }
    tp_onnx_report_clear(&report);
    tp_tensor *t = NULL;
    if (tp_onnx_load_tensor_buffer(data, size, &t) == TP_OK) tp_tensor_free(t);
    return 0;
}

/* ---- .npy ---------------------------------------------------------------------- */

int tp_fuzz_npy(const uint8_t *data, size_t size) {
    tp_tensor *t = NULL;
    tp_status st = tp_npy_load_buffer(data, size, &t);
    REQUIRE((st == TP_OK) == (t != NULL));
    if (!t) return 0;
    void *img = NULL;
    size_t img_size = 0;
    st = tp_npy_save_buffer(t, &img, &img_size);
    REQUIRE(st == TP_OK || st == TP_ERR_NOMEM);
    if (st == TP_OK) {
        tp_tensor *u = NULL;
        st = tp_npy_load_buffer(img, img_size, &u);
        REQUIRE(st == TP_OK || st == TP_ERR_NOMEM);
        if (u) {
            REQUIRE(tp_tensor_dtype(u) == tp_tensor_dtype(t) && tp_tensor_ndim(u) == tp_tensor_ndim(t));
            REQUIRE(memcmp(tp_tensor_sizes(u), tp_tensor_sizes(t), (size_t)tp_tensor_ndim(t) * sizeof(int64_t)) == 0);
            tp_tensor *a = NULL, *b = NULL;
            if (tp_tensor_contiguous(t, &a) == TP_OK && tp_tensor_contiguous(u, &b) == TP_OK) {
                size_t bytes = (size_t)tp_tensor_numel(a) * tp_dtype_size(tp_tensor_dtype(a));
                REQUIRE(bytes == 0 || memcmp(tp_tensor_data(a), tp_tensor_data(b), bytes) == 0);
            }
            tp_tensor_free(a);
            tp_tensor_free(b);
            tp_tensor_free(u);
        }
        tp_free(img);
    }
    tp_tensor_free(t);
    return 0;
}
