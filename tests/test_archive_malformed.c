/*
 * test_archive_malformed.c - hostile archives: broken .pt2 files built in C
 * from a valid archive (two programs from program_examples.h, saved with
 * tp_archive_save_buffer) and re-zipped with one thing wrong, through the
 * public tp_archive_load_buffer and tp_archive_verify_buffer. Each case
 * asserts the exact status and a message substring naming the member,
 * field or node; the test harness checks nothing leaks (ASan checks the
 * rest). Finally verify mode reports several problems at once.
 */
#include <stdint.h>

#include "archive/zip.h"
/* only make_mlp and make_counter are used here */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "program_examples.h"
#pragma GCC diagnostic pop
#include "tpexport/archive.h"

/* The valid archive every case starts from: programs "mlp" (linear + relu,
 * parameters fc1.weight [4, 3] and fc1.bias [4]) and "counter" (a buffer
 * `count` mutated in place), and one extra file. */
static void *g_base;
static size_t g_base_size;
static int g_cases; /* distinct broken archives checked */

static void make_base(void) {
    if (g_base) return;
    tp_program *mlp = make_mlp(), *counter = make_counter();
    tp_archive_entry e[2] = {{"mlp", mlp}, {"counter", counter}};
    tp_extra_file extra = {"notes.txt", "hello", 5};
    CHECK_OK(tp_archive_save_buffer(e, 2, &extra, 1, &g_base, &g_base_size));
    tp_program_free(mlp);
    tp_program_free(counter);
}

static void free_base(void) {
    tp_free(g_base);
    g_base = NULL;
    g_base_size = 0;
}

/* ---- re-zipping with changes ---------------------------------------------------- */

typedef enum { REPLACE, DROP, ADD, ADD_DEFLATED, RENAME } change_kind;

typedef struct change {
    change_kind kind;
    const char *member; /* member to change (ADD: the new member's name) */
    const void *data;   /* REPLACE/ADD: new bytes; RENAME: the new name */
    size_t size;        /* SIZE_MAX: strlen(data) */
} change;

/* The base archive with `changes` applied, as a new buffer (tp_free). */
static void *rezip(const change *changes, int n, size_t *size) {
    tp_zip_reader *z = NULL;
    tp_zip_writer *w = NULL;
    CHECK_OK(tp__zip_open(g_base, g_base_size, NULL, &z));
    CHECK_OK(tp__zip_writer_new(&w));
    if (!z || !w) {
        tp__zip_close(z);
        tp__zip_writer_free(w);
        return NULL;
    }
    for (int i = 0; i < tp__zip_count(z); i++) {
        const tp_zip_entry *e = tp__zip_entry(z, i);
        const change *c = NULL;
        for (int k = 0; k < n && !c; k++)
            if (changes[k].kind != ADD && changes[k].kind != ADD_DEFLATED && strcmp(changes[k].member, e->name) == 0)
                c = &changes[k];
        if (c && c->kind == DROP) continue;
        void *data = NULL;
        size_t len = 0;
        CHECK_OK(tp__zip_read(z, i, &data, &len));
        const char *name = c && c->kind == RENAME ? c->data : e->name;
        if (c && c->kind == REPLACE)
            CHECK_OK(tp__zip_add(w, name, c->data, c->size == SIZE_MAX ? strlen(c->data) : c->size, false));
        else
            CHECK_OK(tp__zip_add(w, name, data, len, e->method == 8));
        tp_free(data);
    }
    for (int k = 0; k < n; k++)
        if (changes[k].kind == ADD || changes[k].kind == ADD_DEFLATED)
            CHECK_OK(tp__zip_add(w, changes[k].member, changes[k].data,
                                 changes[k].size == SIZE_MAX ? strlen(changes[k].data) : changes[k].size,
                                 changes[k].kind == ADD_DEFLATED));
    tp__zip_close(z);
    void *out = NULL;
    CHECK_OK(tp__zip_finish(w, &out, size));
    return out;
}

/* A member of the base archive as text (tp_free). */
static char *base_member(const char *name) {
    tp_zip_reader *z = NULL;
    CHECK_OK(tp__zip_open(g_base, g_base_size, NULL, &z));
    int i = z ? tp__zip_find(z, name) : -1;
    CHECK_MSG(i >= 0, "base archive has no member %s", name);
    void *data = NULL;
    size_t len = 0;
    if (i >= 0) CHECK_OK(tp__zip_read(z, i, &data, &len));
    tp__zip_close(z);
    return data;
}

/* The base with member's text edited: the first occurrence of `from`
 * becomes `to` (which must be present: the edit is part of the case). */
static void *edit_member(const char *member, const char *from, const char *to, size_t *size) {
    char *text = base_member(member);
    if (!text) return NULL;
    char *at = strstr(text, from);
    CHECK_MSG(at != NULL, "'%s' not found in %s", from, member);
    if (!at) {
        tp_free(text);
        return NULL;
    }
    size_t lt = strlen(text), lf = strlen(from), lto = strlen(to);
    char *edited = tp_malloc(lt - lf + lto + 1);
    memcpy(edited, text, (size_t)(at - text));
    memcpy(edited + (at - text), to, lto);
    memcpy(edited + (at - text) + lto, at + lf, lt - (size_t)(at - text) - lf + 1);
    change c = {REPLACE, member, edited, SIZE_MAX};
    void *out = rezip(&c, 1, size);
    tp_free(edited);
    tp_free(text);
    return out;
}

/* Several edits of one member, applied in order. */
static void *edit_member_n(const char *member, const char *const *pairs, int n_pairs, size_t *size) {
    char *text = base_member(member);
    for (int k = 0; text && k < n_pairs; k++) {
        const char *from = pairs[2 * k], *to = pairs[2 * k + 1];
        char *at = strstr(text, from);
        CHECK_MSG(at != NULL, "'%s' not found in %s", from, member);
        if (!at) break;
        size_t lt = strlen(text), lf = strlen(from), lto = strlen(to);
        char *edited = tp_malloc(lt - lf + lto + 1);
        memcpy(edited, text, (size_t)(at - text));
        memcpy(edited + (at - text), to, lto);
        memcpy(edited + (at - text) + lto, at + lf, lt - (size_t)(at - text) - lf + 1);
        tp_free(text);
        text = edited;
    }
    if (!text) return NULL;
    change c = {REPLACE, member, text, SIZE_MAX};
    void *out = rezip(&c, 1, size);
    tp_free(text);
    return out;
}

/* Replace every occurrence of `from` by `to` (same length) in the image:
 * names in local headers and the central directory. */
static void patch_bytes(void *image, size_t size, const char *from, const char *to) {
    size_t l = strlen(from);
    int hits = 0;
    for (size_t i = 0; i + l <= size; i++)
        if (memcmp((char *)image + i, from, l) == 0) {
            memcpy((char *)image + i, to, l);
            hits++;
        }
    CHECK_MSG(hits > 0, "'%s' not in the image", from);
}

/* ---- the check -------------------------------------------------------------------- */

/* Loading and verifying `image` (taken over) must fail with `status` and a
 * message containing `substr`. */
static void expect_refused(const char *what, void *image, size_t size, const tp_load_options *o, tp_status status,
                           const char *substr) {
    g_cases++;
    if (!image) {
        CHECK_MSG(image != NULL, "%s: could not build the archive", what);
        return;
    }
    tp_archive *a = NULL;
    tp_status st = tp_archive_load_buffer(image, size, o, &a);
    CHECK_MSG(st == status, "%s: load returned %s, expected %s (msg: %s)", what, tp_status_str(st), tp_status_str(status),
              tp_last_error());
    CHECK_MSG(strstr(tp_last_error(), substr) != NULL, "%s: load message \"%s\" lacks \"%s\"", what, tp_last_error(),
              substr);
    CHECK_MSG(a == NULL, "%s: archive returned on failure", what);
    if (getenv("TP_TEST_VERBOSE")) printf("  %-40s %s: %s\n", what, tp_status_str(st), tp_last_error());
    tp_archive_free(a);
    st = tp_archive_verify_buffer(image, size, o);
    CHECK_MSG(st == status, "%s: verify returned %s, expected %s (msg: %s)", what, tp_status_str(st),
              tp_status_str(status), tp_last_error());
    CHECK_MSG(strstr(tp_last_error(), substr) != NULL, "%s: verify message \"%s\" lacks \"%s\"", what, tp_last_error(),
              substr);
    tp_free(image);
}

/* The image expression runs first (it sets the size variable). */
#define REFUSED(what, image, size, opts, status, substr)              \
    do {                                                              \
        void *image_ = (image);                                       \
        expect_refused(what, image_, size, opts, status, substr);     \
    } while (0)

TEST(test_base_loads) {
    make_base();
    tp_archive *a = NULL;
    CHECK_OK(tp_archive_load_buffer(g_base, g_base_size, NULL, &a));
    CHECK(a && tp_archive_num_programs(a) == 2);
    tp_archive_free(a);
    CHECK_OK(tp_archive_verify_buffer(g_base, g_base_size, NULL));
    /* the re-zipping itself keeps a valid archive valid */
    size_t size = 0;
    void *same = rezip(NULL, 0, &size);
    CHECK_OK(tp_archive_load_buffer(same, size, NULL, &a));
    tp_archive_free(a);
    tp_free(same);
    free_base();
}

/* ---- the ZIP container and the archive markers ------------------------------------ */

TEST(test_container) {
    make_base();
    size_t size = 0;
    void *img;

    REFUSED("empty file", tp_calloc(1, 1), 0, NULL, TP_ERR_CORRUPT, "zip");
    char *text = tp_malloc(64);
    snprintf(text, 64, "this is not a zip file at all, just text");
    REFUSED("not a zip", text, strlen(text), NULL, TP_ERR_CORRUPT, "zip: no end of central directory");

    img = tp_malloc(g_base_size);
    memcpy(img, g_base, g_base_size);
    REFUSED("truncated to half", img, g_base_size / 2, NULL, TP_ERR_CORRUPT, "zip: no end of central directory");

    img = tp_malloc(g_base_size);
    memcpy(img, g_base, g_base_size);
    REFUSED("last bytes cut", img, g_base_size - 10, NULL, TP_ERR_CORRUPT, "zip");

    /* a payload byte flipped: its CRC no longer matches */
    img = tp_malloc(g_base_size);
    memcpy(img, g_base, g_base_size);
    {
        tp_zip_reader *z = NULL;
        CHECK_OK(tp__zip_open(img, g_base_size, NULL, &z));
        int i = z ? tp__zip_find(z, "data/weights/mlp/weight_0") : -1;
        if (i >= 0) ((unsigned char *)img)[tp__zip_entry(z, i)->data_offset + 5] ^= 0x40;
        tp__zip_close(z);
    }
    REFUSED("payload CRC mismatch", img, g_base_size, NULL, TP_ERR_CORRUPT, "data/weights/mlp/weight_0");

    /* two members with one name: written under a stand-in, then renamed in place */
    change dup = {ADD, "data/weights/mlp/weights.jsoX", "{}", SIZE_MAX};
    img = rezip(&dup, 1, &size);
    if (img) patch_bytes(img, size, "data/weights/mlp/weights.jsoX", "data/weights/mlp/weights.json");
    REFUSED("duplicate member", img, size, NULL, TP_ERR_CORRUPT, "duplicate member 'data/weights/mlp/weights.json'");

    /* a deflate bomb: 1 MiB of zeros (~1000:1) against max_ratio 20 */
    size_t bomb_size = 1 << 20;
    char *zeros = tp_calloc(1, bomb_size);
    change bomb = {ADD_DEFLATED, "extra/bomb.bin", zeros, bomb_size};
    img = rezip(&bomb, 1, &size);
    tp_free(zeros);
    tp_load_options ratio = {.max_ratio = 20};
    REFUSED("deflate bomb", img, size, &ratio, TP_ERR_CORRUPT, "extra/bomb.bin");

    /* a member larger than max_member_size */
    tp_load_options small = {.max_member_size = 1024};
    img = rezip(NULL, 0, &size);
    REFUSED("member over max_member_size", img, size, &small, TP_ERR_UNSUPPORTED,
            "zip: member 'models/mlp.json': size 2125 exceeds the limit of 1024 bytes");

    /* more in total than max_total_size */
    tp_load_options total = {.max_total_size = 2048};
    img = rezip(NULL, 0, &size);
    REFUSED("archive over max_total_size", img, size, &total, TP_ERR_UNSUPPORTED,
            "total uncompressed size exceeds the limit of 2048 bytes");
    free_base();
}

TEST(test_markers) {
    make_base();
    size_t size = 0;
    change c;

    c = (change){DROP, "archive_format", NULL, 0};
    REFUSED("no archive_format", rezip(&c, 1, &size), size, NULL, TP_ERR_CORRUPT,
            "archive has no member 'archive_format'");
    c = (change){REPLACE, "archive_format", "zip", SIZE_MAX};
    REFUSED("wrong archive_format", rezip(&c, 1, &size), size, NULL, TP_ERR_CORRUPT,
            "member 'archive_format' must be 'pt2', not 'zip'");
    c = (change){REPLACE, "archive_format", "pt2\n", SIZE_MAX};
    REFUSED("archive_format with a newline", rezip(&c, 1, &size), size, NULL, TP_ERR_CORRUPT,
            "member 'archive_format' must be 'pt2'");
    c = (change){DROP, "archive_version", NULL, 0};
    REFUSED("no archive_version", rezip(&c, 1, &size), size, NULL, TP_ERR_CORRUPT,
            "archive has no member 'archive_version'");
    c = (change){REPLACE, "archive_version", "2", SIZE_MAX};
    REFUSED("archive_version 2", rezip(&c, 1, &size), size, NULL, TP_ERR_UNSUPPORTED,
            "archive version '2' is not supported (expected '1')");
    change no_models[2] = {{DROP, "models/mlp.json", NULL, 0}, {DROP, "models/counter.json", NULL, 0}};
    REFUSED("no models/", rezip(no_models, 2, &size), size, NULL, TP_ERR_CORRUPT,
            "archive has no program (no models/<name>.json member)");
    char long_name[400];
    snprintf(long_name, sizeof long_name, "models/%0300d.json", 7);
    c = (change){RENAME, "models/mlp.json", long_name, 0};
    REFUSED("program name too long", rezip(&c, 1, &size), size, NULL, TP_ERR_CORRUPT, "is too long");
    free_base();
}

/* ---- weights indexes and payloads ------------------------------------------------- */

#define W "data/weights/mlp/weights.json"

TEST(test_weights) {
    make_base();
    size_t size = 0;
    change c;

    c = (change){DROP, W, NULL, 0};
    REFUSED("no weights.json", rezip(&c, 1, &size), size, NULL, TP_ERR_CORRUPT,
            "node p_fc1_weight: parameter 'fc1.weight' has no stored tensor");
    c = (change){REPLACE, W, "{\"fc1.weight\": ", SIZE_MAX};
    REFUSED("weights.json not JSON", rezip(&c, 1, &size), size, NULL, TP_ERR_CORRUPT, W);
    c = (change){REPLACE, W, "[1, 2]", SIZE_MAX};
    REFUSED("weights.json an array", rezip(&c, 1, &size), size, NULL, TP_ERR_CORRUPT,
            "weights: expected an object, got an array");
    REFUSED("entry not an object", edit_member(W, "{\"dtype\": \"float32\", \"sizes\": [4, 3]", "7, \"x\": {\"sizes\": [4, 3]", &size),
            size, NULL, TP_ERR_CORRUPT, "weights 'fc1.weight': expected an object");
    REFUSED("unknown dtype", edit_member(W, "\"float32\"", "\"float128\"", &size), size, NULL, TP_ERR_UNSUPPORTED,
            "weights 'fc1.weight': unsupported dtype 'float128'");
    REFUSED("negative size", edit_member(W, "[4, 3]", "[-4, 3]", &size), size, NULL, TP_ERR_CORRUPT,
            "weights 'fc1.weight': sizes[0] must be a non-negative integer");
    REFUSED("overflowing sizes", edit_member(W, "[4, 3]", "[4611686018427387904, 4611686018427387904]", &size), size,
            NULL, TP_ERR_CORRUPT, "weights 'fc1.weight': element count overflows");
    REFUSED("overflowing strides", edit_member(W, "[3, 1]", "[4611686018427387904, 1]", &size), size, NULL,
            TP_ERR_CORRUPT, "weights 'fc1.weight': view size overflows");
    REFUSED("more strides than sizes", edit_member(W, "[3, 1]", "[3, 1, 1]", &size), size, NULL, TP_ERR_CORRUPT,
            "weights 'fc1.weight': 3 strides for 2 sizes");
    REFUSED("too many dims", edit_member(W, "[4, 3]", "[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]", &size),
            size, NULL, TP_ERR_UNSUPPORTED, "weights 'fc1.weight': sizes has 17 entries");
    REFUSED("view bigger than payload", edit_member(W, "[4, 3], \"strides\": [3, 1]", "[8, 3], \"strides\": [3, 1]", &size),
            size, NULL, TP_ERR_CORRUPT, "weights 'fc1.weight': view needs 96 bytes but payload has 48");
    REFUSED("storage offset past payload", edit_member(W, "\"storage_offset\": 0", "\"storage_offset\": 1", &size), size,
            NULL, TP_ERR_CORRUPT, "weights 'fc1.weight': view needs 52 bytes but payload has 48");
    REFUSED("negative storage offset", edit_member(W, "\"storage_offset\": 0", "\"storage_offset\": -1", &size), size,
            NULL, TP_ERR_CORRUPT, "weights 'fc1.weight': storage_offset must be a non-negative integer");
    c = (change){DROP, "data/weights/mlp/weight_0", NULL, 0};
    REFUSED("payload missing", rezip(&c, 1, &size), size, NULL, TP_ERR_CORRUPT,
            "weights 'fc1.weight': payload 'mlp/weight_0' is missing");
    c = (change){REPLACE, "data/weights/mlp/weight_0", "0123456789", 10};
    REFUSED("payload not whole elements", rezip(&c, 1, &size), size, NULL, TP_ERR_CORRUPT,
            "weights 'fc1.weight': payload of 10 bytes is not a multiple of the float32 element size");
    REFUSED("path_name escaping", edit_member(W, "\"mlp/weight_0\"", "\"../../models/mlp.json\"", &size), size, NULL,
            TP_ERR_CORRUPT, "weights 'fc1.weight': path_name must be a relative member name");
    REFUSED("use_pickle true", edit_member(W, "\"use_pickle\": false", "\"use_pickle\": true", &size), size, NULL,
            TP_ERR_UNSUPPORTED, "weights 'fc1.weight': pickled payload cannot be read safely");
    REFUSED("unknown field", edit_member(W, "\"role\": 0", "\"role\": 0, \"device\": \"cuda\"", &size), size, NULL,
            TP_ERR_CORRUPT, "weights 'fc1.weight': unknown field 'device'");
    REFUSED("missing dtype", edit_member(W, "\"dtype\": \"float32\", ", "", &size), size, NULL, TP_ERR_CORRUPT,
            "weights 'fc1.weight': missing field 'dtype'");
    c = (change){REPLACE, "data/constants/counter/constants.json", "{\"no such name!\": {}}", SIZE_MAX};
    REFUSED("constants.json with a bad state name", rezip(&c, 1, &size), size, NULL, TP_ERR_CORRUPT,
            "data/constants/counter/constants.json: constants: 'no such name!' is not a valid state name");
    free_base();
}

/* The stored tensor disagrees with the document's meta for its placeholder. */
TEST(test_weights_vs_graph) {
    make_base();
    size_t size = 0;
    /* same byte size, other dtype */
    REFUSED("weight dtype vs graph", edit_member(W, "\"float32\"", "\"int32\"", &size), size, NULL, TP_ERR_TYPE,
            "node p_fc1_weight: stored tensor 'fc1.weight' is int32 [4, 3] but the graph declares float32 [4, 3]");
    /* same element count, other shape */
    REFUSED("weight shape vs graph", edit_member(W, "[4, 3], \"strides\": [3, 1]", "[3, 4], \"strides\": [4, 1]", &size),
            size, NULL, TP_ERR_SHAPE,
            "node p_fc1_weight: stored tensor 'fc1.weight' is float32 [3, 4] but the graph declares float32 [4, 3]");
    free_base();
}

/* ---- the program document ------------------------------------------------------------ */

#define M "models/mlp.json"

TEST(test_program_document) {
    make_base();
    size_t size = 0;
    change c;

    c = (change){REPLACE, M, "{\"schema_version\": 1, \"graph\": ", SIZE_MAX};
    REFUSED("document not JSON", rezip(&c, 1, &size), size, NULL, TP_ERR_CORRUPT, "program 'mlp'");
    c = (change){REPLACE, M, "[]", SIZE_MAX};
    REFUSED("document an array", rezip(&c, 1, &size), size, NULL, TP_ERR_CORRUPT, "expected an object");
    REFUSED("schema_version 2", edit_member(M, "\"schema_version\": 1", "\"schema_version\": 2", &size), size, NULL,
            TP_ERR_UNSUPPORTED, "schema_version");
    REFUSED("schema_version a string", edit_member(M, "\"schema_version\": 1", "\"schema_version\": \"1\"", &size), size,
            NULL, TP_ERR_CORRUPT, "schema_version");
    REFUSED("no graph", edit_member(M, "\"graph\": {\"nodes\"", "\"grph\": {\"nodes\"", &size), size, NULL, TP_ERR_CORRUPT,
            "graph");
    const char *nodes_object[] = {"\"graph\": {\"nodes\": [", "\"graph\": {\"nodes\": {\"a\": [",
                                  "]}, \"signature\"", "]}}, \"signature\""};
    REFUSED("nodes not an array", edit_member_n(M, nodes_object, 2, &size), size, NULL, TP_ERR_CORRUPT, "graph.nodes");
    REFUSED("undefined node", edit_member(M, "{\"__node__\": \"p_fc1_bias\"}", "{\"__node__\": \"nowhere\"}", &size), size,
            NULL, TP_ERR_CORRUPT, "graph.nodes[3].args[2]: refers to undefined node 'nowhere'");
    REFUSED("later node", edit_member(M, "{\"__node__\": \"p_fc1_bias\"}", "{\"__node__\": \"relu\"}", &size), size,
            NULL, TP_ERR_CORRUPT, "graph.nodes[3].args[2]: refers to node 'relu', which is defined later");
    REFUSED("duplicate node names", edit_member(M, "\"name\": \"relu\", \"meta\"", "\"name\": \"linear\", \"meta\"", &size),
            size, NULL, TP_ERR_CORRUPT, "graph.nodes[4].name: duplicate node name 'linear'");
    REFUSED("unknown function", edit_member(M, "\"qualname\": \"linear\"", "\"qualname\": \"linear_v2\"", &size), size,
            NULL, TP_ERR_UNSUPPORTED, "node linear: unsupported function tensorplay.nn.functional.linear_v2");
    REFUSED("target kind vs node kind",
            edit_member(M, "{\"kind\": \"ref\", \"module\": \"tensorplay.functional\", \"qualname\": \"relu\"}",
                        "{\"kind\": \"method\", \"name\": \"relu\"}", &size),
            size, NULL, TP_ERR_CORRUPT,
            "graph.nodes[4].target.kind: a call_function target must be \"ref\", got \"method\"");
    REFUSED("unknown method",
            edit_member(M, "\"op\": \"call_function\", \"target\": {\"kind\": \"ref\", \"module\": \"tensorplay.functional\", \"qualname\": \"relu\"}",
                        "\"op\": \"call_method\", \"target\": {\"kind\": \"method\", \"name\": \"frobnicate\"}", &size),
            size, NULL, TP_ERR_UNSUPPORTED, "node relu: unsupported method 'frobnicate'");
    REFUSED("pickled target",
            edit_member(M, "{\"kind\": \"ref\", \"module\": \"tensorplay.functional\", \"qualname\": \"relu\"}",
                        "{\"kind\": \"pickle\", \"data\": \"gASVAAAAAAAAAAA=\"}", &size),
            size, NULL, TP_ERR_UNSUPPORTED, "node relu: pickled function target cannot be loaded safely");
    REFUSED("pickled argument", edit_member(M, "[{\"__node__\": \"linear\"}]", "[{\"__node__\": \"linear\"}, {\"__pickle__\": \"gASVAAAAAAAAAAA=\"}]", &size),
            size, NULL, TP_ERR_UNSUPPORTED, "relu");
    REFUSED("arguments not a tuple", edit_member(M, "\"args\": {\"__tuple__\": [{\"__node__\": \"linear\"}]}", "\"args\": [{\"__node__\": \"linear\"}]", &size),
            size, NULL, TP_ERR_CORRUPT, "graph.nodes[4].args");
    REFUSED("wrong argument type", edit_member(M, "{\"__node__\": \"p_fc1_bias\"}", "\"bias\"", &size), size, NULL,
            TP_ERR_TYPE, "linear");
    REFUSED("unknown node kind", edit_member(M, "\"op\": \"call_function\"", "\"op\": \"call_something\"", &size), size,
            NULL, TP_ERR_CORRUPT, "graph.nodes[3].target.kind: \"ref\" is not a target kind for a call_something node");
    REFUSED("call_module", edit_member(M, "\"op\": \"call_function\", \"target\": {\"kind\": \"ref\", \"module\": \"tensorplay.nn.functional\", \"qualname\": \"linear\"}",
                                       "\"op\": \"call_module\", \"target\": {\"kind\": \"name\", \"name\": \"fc1\"}", &size),
            size, NULL, TP_ERR_UNSUPPORTED, "node linear: call_module targets are not supported");
    REFUSED("unknown top-level field", edit_member(M, "\"dialect\": \"STABLE\"", "\"dialect\": \"STABLE\", \"extra\": 1", &size),
            size, NULL, TP_ERR_CORRUPT, "extra");
    REFUSED("output count vs signature",
            edit_member(M, "\"args\": {\"__tuple__\": [{\"__tuple__\": [{\"__node__\": \"relu\"}]}]}",
                        "\"args\": {\"__tuple__\": [{\"__tuple__\": [{\"__node__\": \"relu\"}, {\"__node__\": \"linear\"}]}]}", &size),
            size, NULL, TP_ERR_CORRUPT,
            "signature.output_specs: the graph produces 2 outputs but the signature describes 1");
    REFUSED("input spec without placeholder", edit_member(M, "\"name\": \"p_fc1_bias\"}, \"target\": \"fc1.bias\"", "\"name\": \"p_fc1_gone\"}, \"target\": \"fc1.bias\"", &size),
            size, NULL, TP_ERR_VERIFY, "PARAMETER spec 'fc1.bias' is neither a placeholder nor a graph attribute");
    /* deeply nested argument values */
    char deep[2048] = "[{\"__node__\": \"linear\"}, ";
    for (int i = 0; i < 40; i++) strcat(deep, "{\"__list__\": [");
    strcat(deep, "1");
    for (int i = 0; i < 40; i++) strcat(deep, "]}");
    strcat(deep, "]");
    REFUSED("nesting too deep", edit_member(M, "[{\"__node__\": \"linear\"}]", deep, &size), size, NULL, TP_ERR_CORRUPT,
            "nested deeper than");
    REFUSED("meta with unknown dtype", edit_member(M, "{\"val\": {\"dtype\": \"float32\", \"shape\": [2, 3]}}", "{\"val\": {\"dtype\": \"complex32\", \"shape\": [2, 3]}}", &size),
            size, NULL, TP_ERR_CORRUPT, "graph.nodes[2].meta.val.dtype: unknown dtype");
    free_base();
}

#define C "models/counter.json"

TEST(test_mutations) {
    make_base();
    size_t size = 0;
    REFUSED("mutation target not state",
            edit_member(C, "\"name\": \"add\"}, \"target\": \"count\"", "\"name\": \"add\"}, \"target\": \"nothing\"", &size),
            size, NULL, TP_ERR_VERIFY, "nothing");
    REFUSED("mutation of a user input",
            edit_member(C, "\"kind\": \"BUFFER_MUTATION\"", "\"kind\": \"USER_INPUT_MUTATION\"", &size), size, NULL,
            TP_ERR_VERIFY, "mutation target 'count' is not a user input");
    REFUSED("num_mutations vs signature", edit_member(C, "\"num_mutations\": 1", "\"num_mutations\": 3", &size), size,
            NULL, TP_ERR_CORRUPT, "num_mutations");
    free_base();
}

/* ---- example inputs and extra files --------------------------------------------------- */

TEST(test_examples_and_extra) {
    make_base();
    size_t size = 0;
    change c;

    static const char bad_npy[] = "\x93NUMPY\x01\x00\x16\x00{'descr': '<f4', 'sha";
    c = (change){REPLACE, "data/sample_inputs/mlp/x.npy", bad_npy, sizeof bad_npy - 1};
    REFUSED("example .npy corrupt", rezip(&c, 1, &size), size, NULL, TP_ERR_CORRUPT,
            "member 'data/sample_inputs/mlp/x.npy': npy:");
    char *npy = base_member("data/sample_inputs/mlp/x.npy");
    change nested = {ADD, "data/sample_inputs/mlp/a/b.npy", npy, 152};
    REFUSED("example input in a subfolder", rezip(&nested, 1, &size), size, NULL, TP_ERR_CORRUPT,
            "bad example input member 'data/sample_inputs/mlp/a/b.npy'");
    tp_free(npy);
    /* only tensorplay's pickle left, and it runs code */
    static const char evil[] = "cos\nsystem\n(S'echo hi'\ntR.";
    change pickle[2] = {{DROP, "data/sample_inputs/mlp/x.npy", NULL, 0},
                        {REPLACE, "data/sample_inputs/mlp.pkl", evil, sizeof evil - 1}};
    REFUSED("example pickle with code", rezip(pickle, 2, &size), size, NULL, TP_ERR_UNSUPPORTED,
            "member 'data/sample_inputs/mlp.pkl'");
    /* written under a stand-in name (our writer refuses '..'), renamed in place */
    c = (change){ADD, "extra/XX/XX/etc/passwd", "root", SIZE_MAX};
    void *img = rezip(&c, 1, &size);
    if (img) patch_bytes(img, size, "extra/XX/XX/etc/passwd", "extra/../../etc/passwd");
    REFUSED("extra file with '..'", img, size, NULL, TP_ERR_CORRUPT, "unsafe member name 'extra/../../etc/passwd'");
    c = (change){ADD, "extra//abs", "x", SIZE_MAX};
    REFUSED("extra file with an empty path part", rezip(&c, 1, &size), size, NULL, TP_ERR_CORRUPT,
            "extra file 'extra//abs': name must be a relative path without '..' or empty parts");
    c = (change){ADD, "extra/./x", "x", SIZE_MAX};
    REFUSED("extra file with a '.' part", rezip(&c, 1, &size), size, NULL, TP_ERR_CORRUPT, "extra file 'extra/./x'");
    free_base();
}

/* ---- verify: every problem at once ------------------------------------------------------ */

TEST(test_verify_reports_all) {
    make_base();
    size_t size = 0;
    /* two problems in mlp's document, one in counter's weights */
    const char *mlp_edits[] = {"\"qualname\": \"linear\"", "\"qualname\": \"linear_v2\"",
                               "{\"kind\": \"ref\", \"module\": \"tensorplay.functional\", \"qualname\": \"relu\"}",
                               "{\"kind\": \"pickle\", \"data\": \"AA==\"}"};
    char *doc = NULL;
    {
        void *img = edit_member_n(M, mlp_edits, 2, &size);
        tp_zip_reader *z = NULL;
        CHECK_OK(tp__zip_open(img, size, NULL, &z));
        size_t len = 0;
        if (z) CHECK_OK(tp__zip_read(z, tp__zip_find(z, M), (void **)&doc, &len));
        tp__zip_close(z);
        tp_free(img);
    }
    char *weights = base_member("data/weights/counter/weights.json");
    char *at = weights ? strstr(weights, "\"float32\"") : NULL;
    CHECK(at != NULL);
    if (at) memcpy(at, "\"flo@t32\"", 9);
    change c[2] = {{REPLACE, M, doc, SIZE_MAX}, {REPLACE, "data/weights/counter/weights.json", weights, SIZE_MAX}};
    void *img = doc && weights ? rezip(c, 2, &size) : NULL;
    tp_free(doc);
    tp_free(weights);
    if (!img) {
        free_base();
        return;
    }
    g_cases++;
    /* loading stops at the first problem */
    tp_archive *a = NULL;
    CHECK_STATUS(tp_archive_load_buffer(img, size, NULL, &a), TP_ERR_UNSUPPORTED);
    CHECK_ERR_CONTAINS("linear_v2");
    CHECK(strstr(tp_last_error(), "pickled function") == NULL);
    /* verify lists all three */
    CHECK_STATUS(tp_archive_verify_buffer(img, size, NULL), TP_ERR_UNSUPPORTED);
    const char *msg = tp_last_error();
    CHECK_MSG(strncmp(msg, "3 problems:\n- program 'mlp': ", 27) == 0, "verify message: %s", msg);
    if (getenv("TP_TEST_VERBOSE")) printf("%s\n", msg);
    CHECK_ERR_CONTAINS("unsupported function tensorplay.nn.functional.linear_v2");
    CHECK_ERR_CONTAINS("node relu: pickled function target cannot be loaded safely");
    CHECK_ERR_CONTAINS("weights 'count': unsupported dtype 'flo@t32'");
    tp_free(img);
    free_base();
}

TEST(test_case_count) {
    /* the suites above must keep at least 40 distinct broken archives
     * (when all of them ran: a filter on the command line runs fewer) */
    if (g_cases > 0) CHECK_MSG(g_cases >= 40, "only %d malformed archives checked", g_cases);
    printf("  %d malformed archives\n", g_cases);
}

TEST_MAIN(T(test_base_loads), T(test_container), T(test_markers), T(test_weights), T(test_weights_vs_graph),
          T(test_program_document), T(test_mutations), T(test_examples_and_extra), T(test_verify_reports_all),
          T(test_case_count))
