/*
 * archive.c - tensorplay archives (.pt2): load (mapped or copied), save,
 * verify. The ZIP layer is zip.c, the JSON documents are serde_*.c; this file
 * ties members to programs and owns the lifetime of mapped weights.
 *
 * Lifetime of mapped weights: the file image is a reference-counted
 * `mapping`. The archive holds one reference, and every tensor that borrows
 * bytes from the image holds one (released by its storage's release
 * callback), so programs and tensors may outlive the tp_archive.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../internal.h"
#include "save.h"
#include "serde.h"
#include "torch.h"
#include "tpexport/limits.h"
#include "tpexport/archive.h"
#include "zip.h"

/* ---- the file image ------------------------------------------------------ */

typedef struct mapping {
    atomic_long refcount;
    void *data;
    size_t size;
    bool mmapped;
} mapping;

static void mapping_release(void *ctx, void *data) {
    TP_UNUSED(data);
    mapping *m = ctx;
    if (!m || atomic_fetch_sub(&m->refcount, 1) != 1) return;
    if (m->mmapped) munmap(m->data, m->size);
    else tp_free(m->data);
    tp_free(m);
}

static mapping *mapping_retain(mapping *m) {
    atomic_fetch_add(&m->refcount, 1);
    return m;
}

static tp_status map_file(const char *path, bool no_mmap, mapping **out) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    TP_CHECK(fd >= 0, TP_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return tp_error(TP_ERR_IO, "'%s' is not a regular file", path);
    }
    mapping *m = tp_calloc(1, sizeof *m);
    if (!m) {
        close(fd);
        return tp_error(TP_ERR_NOMEM, "out of memory");
    }
    atomic_init(&m->refcount, 1);
    m->size = (size_t)sb.st_size;
    if (m->size > 0 && !no_mmap) {
        /* copy-on-write: programs that mutate a buffer in place write to
         * private pages, never to the file (a read-only map would fault) */
        void *p = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            m->data = p;
            m->mmapped = true;
        }
    }
    if (!m->mmapped) {
        m->data = tp_malloc(m->size ? m->size : 1);
        size_t got = 0;
        while (m->data && got < m->size) {
            ssize_t n = read(fd, (char *)m->data + got, m->size - got);
            if (n <= 0) break;
            got += (size_t)n;
        }
        if (!m->data || got != m->size) {
            bool no_memory = m->data == NULL;
            close(fd);
            tp_free(m->data);
            tp_free(m);
            return no_memory ? tp_error(TP_ERR_NOMEM, "out of memory reading '%s' (%zu bytes)", path, (size_t)sb.st_size)
                             : tp_error(TP_ERR_IO, "cannot read '%s'", path);
        }
    }
    close(fd);
    *out = m;
    return TP_OK;
}

static tp_status map_buffer(const void *data, size_t size, mapping **out) {
    mapping *m = tp_calloc(1, sizeof *m);
    TP_CHECK(m != NULL, TP_ERR_NOMEM, "out of memory");
    m->data = tp_malloc(size ? size : 1);
    if (!m->data) {
        tp_free(m);
        return tp_error(TP_ERR_NOMEM, "out of memory copying a %zu-byte archive", size);
    }
    if (size) memcpy(m->data, data, size);
    m->size = size;
    atomic_init(&m->refcount, 1);
    *out = m;
    return TP_OK;
}

/* ---- the archive object -------------------------------------------------- */

typedef struct named_blob {
    char *name;
    void *data;
    size_t size;
} named_blob;

struct tp_archive {
    mapping *image;
    int n_programs;
    char **names;
    tp_program **programs;
    int n_extra;
    named_blob *extra;
    bool mapped_weights;
};

void tp_archive_free(tp_archive *a) {
    if (!a) return;
    for (int i = 0; i < a->n_programs; i++) {
        tp_free(a->names[i]);
        tp_program_free(a->programs[i]);
    }
    tp_free(a->names);
    tp_free(a->programs);
    for (int i = 0; i < a->n_extra; i++) {
        tp_free(a->extra[i].name);
        tp_free(a->extra[i].data);
    }
    tp_free(a->extra);
    if (a->image) mapping_release(a->image, NULL);
    tp_free(a);
}

int tp_archive_num_programs(const tp_archive *a) { return a->n_programs; }
const char *tp_archive_program_name(const tp_archive *a, int i) {
    return (i >= 0 && i < a->n_programs) ? a->names[i] : NULL;
}
tp_program *tp_archive_program(const tp_archive *a, int i) {
    return (i >= 0 && i < a->n_programs) ? a->programs[i] : NULL;
}
tp_program *tp_archive_find_program(const tp_archive *a, const char *name) {
    for (int i = 0; name && i < a->n_programs; i++)
        if (strcmp(a->names[i], name) == 0) return a->programs[i];
    return NULL;
}
int tp_archive_num_extra(const tp_archive *a) { return a->n_extra; }
const char *tp_archive_extra_name(const tp_archive *a, int i) {
    return (i >= 0 && i < a->n_extra) ? a->extra[i].name : NULL;
}
const void *tp_archive_extra_data(const tp_archive *a, int i, size_t *size) {
    if (i < 0 || i >= a->n_extra) {
        if (size) *size = 0;
        return NULL;
    }
    if (size) *size = a->extra[i].size;
    return a->extra[i].data;
}
bool tp_archive_is_mapped(const tp_archive *a) { return a->mapped_weights; }

/* ---- loading ----------------------------------------------------------------- */

#define FORMAT_MEMBER "archive_format"
#define VERSION_MEMBER "archive_version"

static tp_zip_limits limits_from(const tp_load_options *o) {
    tp_zip_limits l = tp__zip_default_limits();
    if (o && o->max_member_size) l.max_member_size = o->max_member_size;
    if (o && o->max_total_size) l.max_total_size = o->max_total_size;
    if (o && o->max_ratio) l.max_ratio = o->max_ratio;
    return l;
}

/* The document limits of a load: the build's, tightened by the options.
 * A value above the build's is the caller's mistake, not the file's. */
static tp_status doc_limits_from(const tp_load_options *o, const tp_zip_limits *zl, tp_doc_limits *out) {
    tp_doc_limits l = tp__doc_limits_default();
    l.tensor_bytes = zl->max_member_size;
    if (o) {
        const struct {
            const char *field;
            uint64_t value;
            size_t *limit;
        } f[] = {{"max_name_bytes", o->max_name_bytes, &l.name},
                 {"max_depth", o->max_depth, &l.depth},
                 {"max_nodes", o->max_nodes, &l.nodes},
                 {"max_items", o->max_items, &l.items},
                 {"max_document_bytes", o->max_document_bytes, &l.document}};
        for (size_t i = 0; i < TP_ARRAY_LEN(f); i++) {
            if (f[i].value == 0) continue;
            TP_CHECK(f[i].value <= *f[i].limit, TP_ERR_INVALID_ARG,
                     "load options: %s = %" PRIu64 " exceeds this build's limit of %zu (limits.h); it may only be lowered",
                     f[i].field, f[i].value, *f[i].limit);
            *f[i].limit = (size_t)f[i].value;
        }
        if (o->max_tensor_bytes) l.tensor_bytes = o->max_tensor_bytes;
    }
    *out = l;
    return TP_OK;
}

/* Up to 32 bytes of a member's text for a message, with anything that is
 * not printable ASCII shown as '?' (messages stay on one line). */
static const char *printable(const char *text, size_t len, char *buf, size_t size) {
    size_t n = len < size - 1 ? len : size - 1;
    for (size_t i = 0; i < n; i++) buf[i] = (text[i] >= 0x20 && text[i] < 0x7f) ? text[i] : '?';
    buf[n] = '\0';
    return buf;
}

/* Read a small text member; missing -> TP_ERR_CORRUPT naming it. */
static tp_status read_member(const tp_zip_reader *z, const char *name, bool required, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    int i = tp__zip_find(z, name);
    if (i < 0) return required ? tp_error(TP_ERR_CORRUPT, "archive has no member '%s'", name) : TP_OK;
    void *data;
    TP_TRY(tp__zip_read(z, i, &data, len));
    *text = data;
    return TP_OK;
}

/* Context shared by the state and payload callbacks of one program. */
typedef struct load_ctx {
    const tp_zip_reader *zip;
    mapping *image;
    bool mapped;
    bool any_copied;
    const char *dir; /* "data/weights/" or "data/constants/": the index being parsed */
    const char *wdir, *cdir; /* where payloads of the weights / constants indexes live */
    tp_serde_weights weights, constants;
    /* per member index: the largest element size of any view the indexes
     * make of it (0: none), computed on first use; a member is mapped in
     * place only when aligned for all of them */
    unsigned char *member_align;
    /* payloads already turned into storage, by member index */
    int n_cache;
    struct {
        int member;
        void *data;
        size_t size;
        tp_tensor *keeper; /* a 1-d uint8 tensor owning the bytes, shared by views */
    } cache[256];
    /* across programs: shared by the archive (set by the caller) */
} load_ctx;

static tp_status payload_size(void *ctx, const char *path_name, size_t *size) {
    load_ctx *c = ctx;
    char member[1024];
    int n = snprintf(member, sizeof member, "%s%s", c->dir, path_name);
    TP_CHECK(n > 0 && (size_t)n < sizeof member, TP_ERR_CORRUPT, "payload path '%s' is too long", path_name);
    int i = tp__zip_find(c->zip, member);
    TP_CHECK(i >= 0, TP_ERR_NOT_FOUND, "archive has no member '%s'", member);
    *size = (size_t)tp__zip_entry(c->zip, i)->size;
    return TP_OK;
}

static void free_buffer(void *ctx, void *data) {
    TP_UNUSED(ctx);
    tp_free(data);
}

/* Fill c->member_align from both indexes: for each member, the largest
 * element size among the entries whose path_name resolves to it. */
static tp_status compute_member_align(load_ctx *c) {
    int n = tp__zip_count(c->zip);
    c->member_align = tp_calloc((size_t)(n ? n : 1), 1);
    TP_CHECK(c->member_align != NULL, TP_ERR_NOMEM, "out of memory");
    const tp_serde_weights *lists[2] = {&c->weights, &c->constants};
    const char *dirs[2] = {c->wdir, c->cdir};
    for (int l = 0; l < 2; l++) {
        for (int i = 0; i < lists[l]->n; i++) {
            const tp_serde_weight *w = &lists[l]->items[i];
            char member[1024];
            int len = snprintf(member, sizeof member, "%s%s", dirs[l], w->path_name);
            int m = len > 0 && (size_t)len < sizeof member ? tp__zip_find(c->zip, member) : -1;
            size_t size = tp_dtype_size(w->dtype);
            if (m >= 0 && size > c->member_align[m]) c->member_align[m] = (unsigned char)size;
        }
    }
    return TP_OK;
}

/* The bytes of payload member `member` as something tensors can borrow:
 * the mapped image itself when the member is stored and aligned for every
 * view any entry makes of it (so that all views share one keeper and stay
 * aligned, whichever dtype is looked up first), otherwise a private copy
 * (tp_malloc: 16-byte aligned). Returns a "keeper" tensor (uint8, 1-d)
 * whose storage owns/borrows the bytes; views are made on its storage. */
static tp_status payload_keeper(load_ctx *c, int member, size_t align, tp_tensor **keeper) {
    if (!c->member_align) TP_TRY(compute_member_align(c));
    if (c->member_align[member] > align) align = c->member_align[member];
    for (int k = 0; k < c->n_cache; k++)
        if (c->cache[k].member == member) {
            /* aligned for every entry by construction; checked all the same */
            TP_CHECK((uintptr_t)tp_tensor_data(c->cache[k].keeper) % align == 0, TP_ERR_INTERNAL,
                     "payload '%s' is not aligned for a %zu-byte element", tp__zip_entry(c->zip, member)->name, align);
            *keeper = c->cache[k].keeper;
            return TP_OK;
        }
    const tp_zip_entry *e = tp__zip_entry(c->zip, member);
    const void *ptr = NULL;
    size_t size = 0;
    tp_tensor *t = NULL;
    int64_t n = (int64_t)e->size;
    if (c->mapped && e->method == 0 && tp__zip_stored(c->zip, member, true, &ptr, &size) == TP_OK &&
        ((uintptr_t)ptr % align) == 0) {
        mapping_retain(c->image);
        tp_status st = tp_tensor_borrow(TP_UINT8, 1, &n, NULL, 0, (void *)ptr, size, mapping_release, c->image, &t);
        if (st != TP_OK) {
            mapping_release(c->image, NULL);
            return st;
        }
    } else {
        void *data;
        TP_TRY(tp__zip_read(c->zip, member, &data, &size));
        if ((uintptr_t)data % align != 0) { /* a hook breaking alloc.h's 16-byte promise */
            tp_free(data);
            return tp_error(TP_ERR_INTERNAL, "the allocator returned memory not aligned for a %zu-byte element", align);
        }
        tp_status st = tp_tensor_borrow(TP_UINT8, 1, &n, NULL, 0, data, size, free_buffer, NULL, &t);
        if (st != TP_OK) {
            tp_free(data);
            return st;
        }
        c->any_copied = true;
    }
    if (c->n_cache < (int)TP_ARRAY_LEN(c->cache)) {
        c->cache[c->n_cache].member = member;
        c->cache[c->n_cache].keeper = t;
        c->n_cache++;
        *keeper = t;
        return TP_OK;
    }
    /* cache full: hand out an uncached keeper (the caller frees it) */
    *keeper = t;
    return TP_ERR_STATE;
}

static void release_keeper(void *ctx, void *data) {
    TP_UNUSED(data);
    tp_tensor_free(ctx);
}

static tp_status state_lookup(void *ctx, const char *target, tp_state_kind kind, tp_tensor **out) {
    load_ctx *c = ctx;
    /* constants first for CONSTANT, weights first otherwise */
    const tp_serde_weights *lists[2] = {kind == TP_STATE_CONSTANT ? &c->constants : &c->weights,
                                        kind == TP_STATE_CONSTANT ? &c->weights : &c->constants};
    const char *dirs[2] = {kind == TP_STATE_CONSTANT ? c->cdir : c->wdir, kind == TP_STATE_CONSTANT ? c->wdir : c->cdir};
    for (int l = 0; l < 2; l++) {
        for (int i = 0; i < lists[l]->n; i++) {
            const tp_serde_weight *w = &lists[l]->items[i];
            if (strcmp(w->name, target) != 0) continue;
            char member[1024];
            snprintf(member, sizeof member, "%s%s", dirs[l], w->path_name);
            int m = tp__zip_find(c->zip, member);
            TP_CHECK(m >= 0, TP_ERR_CORRUPT, "archive has no member '%s' (state '%s')", member, target);
            tp_tensor *keeper = NULL;
            tp_status st = payload_keeper(c, m, tp_dtype_size(w->dtype), &keeper);
            bool uncached = st == TP_ERR_STATE;
            if (st != TP_OK && !uncached) return st;
            /* the typed view keeps the keeper (and so the bytes) alive */
            if (!uncached) tp_tensor_retain(keeper);
            st = tp__serde_weight_tensor(w, tp_tensor_data(keeper), (size_t)tp_tensor_numel(keeper), release_keeper,
                                         keeper, out);
            if (st != TP_OK) {
                tp_tensor_free(keeper);
                tp_error_context("state '%s'", target);
            }
            return st;
        }
    }
    return tp_error(TP_ERR_NOT_FOUND, "state '%s' is not in the archive's weights or constants", target);
}

static void load_ctx_clear(load_ctx *c) {
    for (int k = 0; k < c->n_cache; k++) tp_tensor_free(c->cache[k].keeper);
    c->n_cache = 0;
    tp_free(c->member_align);
    c->member_align = NULL;
    tp__serde_weights_free(&c->weights);
    tp__serde_weights_free(&c->constants);
}

/* Example inputs of program `name`: tensorplay's pickle
 * data/sample_inputs/<name>.pkl, read by the strict subset reader (it holds
 * every kind of input: tensors, numbers, lists, dicts), else the .npy
 * members under data/sample_inputs/<name>/ that tpexport also writes for
 * tools (tensors only; read and checked either way). *out: a dict value,
 * or None. */
static tp_status load_examples(const tp_zip_reader *z, const char *name, const tp_doc_limits *lim, tp_value *out) {
    *out = tp_value_none();
    char prefix[512];
    snprintf(prefix, sizeof prefix, "data/sample_inputs/%s/", name);
    size_t plen = strlen(prefix);
    bool any = false;
    for (int i = 0; i < tp__zip_count(z); i++) {
        const char *m = tp__zip_entry(z, i)->name;
        size_t len = strlen(m);
        if (strncmp(m, prefix, plen) != 0 || len < plen + 5 || strcmp(m + len - 4, ".npy") != 0) continue;
        if (!any) {
            TP_TRY(tp_value_dict(out));
            any = true;
        }
        char key[TP_LIMIT_NAME + 1]; /* an input name */
        size_t klen = len - plen - 4;
        TP_CHECK(klen > 0 && klen < sizeof key && !memchr(m + plen, '/', klen), TP_ERR_CORRUPT,
                 "bad example input member '%s'", m);
        memcpy(key, m + plen, klen);
        key[klen] = '\0';
        void *data;
        size_t size;
        tp_tensor *t = NULL;
        tp_status st = tp__zip_read(z, i, &data, &size);
        if (st == TP_OK) {
            st = tp_npy_load_buffer(data, size, &t);
            tp_free(data);
            uint64_t bytes = st == TP_OK ? (uint64_t)tp_tensor_numel(t) * tp_dtype_size(tp_tensor_dtype(t)) : 0;
            if (bytes > lim->tensor_bytes) {
                st = tp_error(TP_ERR_UNSUPPORTED, "a tensor of %" PRIu64 " bytes exceeds the limit of %" PRIu64
                              " bytes (max_tensor_bytes)", bytes, lim->tensor_bytes);
                tp_tensor_free(t);
            }
            if (st != TP_OK) tp_error_context("member '%s'", m);
        }
        if (st == TP_OK) {
            tp_value v = tp_value_tensor(t);
            st = tp_value_dict_set(out, key, &v);
            tp_value_clear(&v);
        }
        if (st != TP_OK) {
            tp_value_clear(out);
            return st;
        }
    }
    char pkl[512];
    snprintf(pkl, sizeof pkl, "data/sample_inputs/%s.pkl", name);
    int i = tp__zip_find(z, pkl);
    if (i < 0) return TP_OK;
    if (any) tp_value_clear(out); /* the pickle has them all */
    void *data;
    size_t size;
    TP_TRY(tp__zip_read(z, i, &data, &size));
    tp_status st = tp__serde_examples_from_pickle(data, size, lim, out);
    tp_free(data);
    if (st != TP_OK) tp_error_context("member '%s'", pkl);
    return st;
}

/* Member names under extra/ become file names for users: a relative path
 * of non-empty parts, none of them "." or "..", no backslashes. */
static bool extra_name_ok(const char *name) {
    if (!*name || name[0] == '/' || strchr(name, '\\')) return false;
    for (const char *part = name; part;) {
        const char *end = strchr(part, '/');
        size_t len = end ? (size_t)(end - part) : strlen(part);
        if (len == 0 || (len == 1 && part[0] == '.') || (len == 2 && part[0] == '.' && part[1] == '.')) return false;
        part = end ? end + 1 : NULL;
    }
    return true;
}

/* Append one verify-mode problem line ("- program 'p': message"). */
static void report_problem(tp_sb *report, int *n_problems, const char *program, const char *message) {
    tp__sb_printf(report, "%s- program '%s': %s", report->len ? "\n" : "", program, message);
    (*n_problems)++;
}

/* Load or verify every program. report != NULL: verify mode, where each
 * problem of each program is appended as a line and counted in
 * *n_problems. */
/* Whether member m is a program document: prefix + <name>.json, name non-empty, no folder. */
static bool model_member(const char *m, const char *prefix) {
    size_t pl = strlen(prefix), l = strlen(m);
    return strncmp(m, prefix, pl) == 0 && l > pl + 5 && strcmp(m + l - 5, ".json") == 0 && !strchr(m + pl, '/');
}

/* ---- PyTorch's archives (torch.export.save; torch.h) ---------------------- */

/* The top folder <root> of a PyTorch archive: the one folder holding an
 * archive_format member, when the archive has none at its root. */
static bool find_torch_root(const tp_zip_reader *z, char *root, size_t size) {
    for (int i = 0; i < tp__zip_count(z); i++) {
        const char *m = tp__zip_entry(z, i)->name;
        const char *slash = strchr(m, '/');
        if (!slash || slash == m || strcmp(slash + 1, FORMAT_MEMBER) != 0 || (size_t)(slash - m) >= size) continue;
        memcpy(root, m, (size_t)(slash - m));
        root[slash - m] = '\0';
        return true;
    }
    return false;
}

static tp_status add_program(tp_archive *a, const char *name, tp_program *p) {
    char *nm = tp_strdup(name);
    if (!nm) {
        tp_program_free(p);
        return tp_error(TP_ERR_NOMEM, "out of memory");
    }
    a->names[a->n_programs] = nm;
    a->programs[a->n_programs++] = p;
    return TP_OK;
}

/* Example inputs from a torch.save'd (args, kwargs) pair: when it has one
 * leaf per user input (tensors, and the Python scalars of constant inputs),
 * each becomes that input's example. Any other structure is left out (the
 * program then has no examples). */
static tp_status torch_examples(tp_program *p, const tp_value *v) {
    tp_value leaves;
    tp_treespec *spec = NULL;
    if (v->kind != TP_VAL_TUPLE || tp_pytree_flatten(v, &leaves, &spec) != TP_OK) {
        tp_clear_error();
        return TP_OK;
    }
    tp_treespec_free(spec);
    int n = tp_program_num_user_inputs(p);
    bool ok = tp_value_len(&leaves) == n;
    tp_status st = TP_OK;
    const tp_signature *sig = tp_program_signature(p);
    for (int i = 0, k = 0; ok && st == TP_OK && i < tp_signature_n_inputs(sig); i++) {
        const tp_input_spec *s = tp_signature_input(sig, i);
        if (s->kind == TP_INPUT_USER_INPUT) st = tp_program_set_example_input(p, s->arg.name, tp_value_at(&leaves, k++));
    }
    tp_value_clear(&leaves);
    return st;
}

/* A torch.save member of the archive as a value (None when absent). */
static tp_status torch_saved_member(const tp_zip_reader *z, const char *member, const tp_zip_limits *zl,
                                    const tp_doc_limits *dlim, tp_value *out) {
    *out = tp_value_none();
    int i = tp__zip_find(z, member);
    if (i < 0) return TP_OK;
    void *data;
    size_t size;
    TP_TRY(tp__zip_read(z, i, &data, &size));
    tp_status st = tp__torch_saved_value(data, size, zl, dlim, out);
    tp_free(data);
    if (st != TP_OK) tp_error_context("member '%s'", member);
    return st;
}

/* State of the legacy layout: the tensors of serialized_state_dict.pt and
 * serialized_constants.pt. */
typedef struct legacy_state {
    tp_value state, constants;
} legacy_state;

static tp_status legacy_lookup(void *ctx, const char *target, tp_state_kind kind, tp_tensor **out) {
    legacy_state *L = ctx;
    const tp_value *lists[2] = {kind == TP_STATE_CONSTANT ? &L->constants : &L->state,
                                kind == TP_STATE_CONSTANT ? &L->state : &L->constants};
    for (int l = 0; l < 2; l++) {
        const tp_value *v = lists[l]->kind == TP_VAL_DICT ? tp_value_dict_get(lists[l], target) : NULL;
        if (v && v->kind == TP_VAL_TENSOR) {
            *out = tp_tensor_retain(v->u.tensor);
            return TP_OK;
        }
    }
    return tp_error(TP_ERR_NOT_FOUND, "state '%s' is not in serialized_state_dict.pt or serialized_constants.pt", target);
}

/* torch 2.6 and 2.7's layout: serialized_exported_program.json (schema 8.x),
 * serialized_state_dict.pt, serialized_constants.pt and
 * serialized_example_inputs.pt (torch.save files, read by the strict
 * pickle subset) at the root; one program, "model". Weights are copies. */
static tp_status load_torch_legacy(const tp_zip_reader *z, const tp_zip_limits *zl, const tp_doc_limits *dlim,
                                   tp_archive *a) {
    legacy_state L = {tp_value_none(), tp_value_none()};
    tp_value ex = tp_value_none();
    char *text = NULL;
    size_t len = 0;
    tp_program *p = NULL;
    tp_status st = torch_saved_member(z, "serialized_state_dict.pt", zl, dlim, &L.state);
    if (st == TP_OK) st = torch_saved_member(z, "serialized_constants.pt", zl, dlim, &L.constants);
    if (st == TP_OK && (L.state.kind != TP_VAL_DICT && L.state.kind != TP_VAL_NONE))
        st = tp_error(TP_ERR_CORRUPT, "serialized_state_dict.pt: not a dict of tensors");
    if (st == TP_OK) st = read_member(z, "serialized_exported_program.json", true, &text, &len);
    if (st == TP_OK) {
        tp_torch_read_options ro = {.state = legacy_lookup, .state_ctx = &L, .limits = dlim};
        st = tp__torch_program_from_json(text, len, &ro, &p);
        if (st != TP_OK) tp_error_context("serialized_exported_program.json");
    }
    if (st == TP_OK) st = torch_saved_member(z, "serialized_example_inputs.pt", zl, dlim, &ex);
    if (st == TP_OK) st = torch_examples(p, &ex);
    tp_free(text);
    tp_value_clear(&ex);
    tp_value_clear(&L.state);
    tp_value_clear(&L.constants);
    if (st == TP_OK) {
        a->names = tp_calloc(1, sizeof *a->names);
        a->programs = tp_calloc(1, sizeof *a->programs);
        if (!a->names || !a->programs) st = tp_error(TP_ERR_NOMEM, "out of memory");
    }
    if (st == TP_OK) return add_program(a, "model", p);
    tp_program_free(p);
    return st;
}

/* The programs of a PyTorch archive under <root>/: models/<model>.json with
 * data/weights/<model>_weights_config.json and
 * data/constants/<model>_constants_config.json; payloads under
 * data/weights/ and data/constants/ (mapped as for tensorplay archives).
 * Example inputs (data/sample_inputs/<model>.pt, a pickle) are not read. */
static tp_status load_torch(const tp_zip_reader *z, mapping *image, bool mapped, const tp_zip_limits *zl,
                            const tp_doc_limits *dlim, const char *root, tp_archive *a) {
    char member[600], wdir[300], cdir[300], text_buf[33];
    char *text = NULL;
    size_t len = 0;
    snprintf(member, sizeof member, "%s/%s", root, FORMAT_MEMBER);
    TP_TRY(read_member(z, member, true, &text, &len));
    bool pt2 = len == 3 && memcmp(text, "pt2", 3) == 0;
    if (!pt2) printable(text, len, text_buf, sizeof text_buf);
    tp_free(text);
    TP_CHECK(pt2, TP_ERR_CORRUPT, "member '%s' must be 'pt2', not '%s'", member, text_buf);
    snprintf(member, sizeof member, "%s/byteorder", root);
    TP_TRY(read_member(z, member, false, &text, &len));
    bool little = !text || (len == 6 && memcmp(text, "little", 6) == 0);
    if (!little) printable(text, len, text_buf, sizeof text_buf);
    tp_free(text);
    TP_CHECK(little, TP_ERR_UNSUPPORTED, "byte order '%s' (member '%s'): only little-endian archives are read", text_buf,
             member);
    snprintf(wdir, sizeof wdir, "%s/data/weights/", root);
    snprintf(cdir, sizeof cdir, "%s/data/constants/", root);
    char prefix[300];
    int plen = snprintf(prefix, sizeof prefix, "%s/models/", root);
    int n_models = 0;
    for (int i = 0; i < tp__zip_count(z); i++) {
        const char *m = tp__zip_entry(z, i)->name;
        if (model_member(m, prefix)) n_models++;
    }
    TP_CHECK(n_models > 0, TP_ERR_CORRUPT, "PyTorch archive has no program (no %s<model>.json member)", prefix);
    a->names = tp_calloc((size_t)n_models, sizeof *a->names);
    a->programs = tp_calloc((size_t)n_models, sizeof *a->programs);
    TP_CHECK(a->names && a->programs, TP_ERR_NOMEM, "out of memory");
    tp_status st = TP_OK;
    for (int i = 0; st == TP_OK && i < tp__zip_count(z); i++) {
        const char *m = tp__zip_entry(z, i)->name;
        size_t l = strlen(m);
        if (!model_member(m, prefix)) continue;
        char name[256];
        size_t nlen = l - (size_t)plen - 5;
        TP_CHECK(nlen < sizeof name, TP_ERR_CORRUPT, "program name in '%s' is too long", m);
        memcpy(name, m + plen, nlen);
        name[nlen] = '\0';
        load_ctx c = {.zip = z, .image = image, .mapped = mapped, .wdir = wdir, .cdir = cdir};
        for (int k = 0; k < 2 && st == TP_OK; k++) {
            const char *what = k == 0 ? "weights" : "constants";
            snprintf(member, sizeof member, "%s%s_%s_config.json", k == 0 ? wdir : cdir, name, what);
            c.dir = k == 0 ? wdir : cdir;
            st = read_member(z, member, false, &text, &len);
            if (st == TP_OK && text) {
                st = tp__torch_weights_from_json(text, len, what, payload_size, &c, dlim,
                                                 k == 0 ? &c.weights : &c.constants);
                if (st != TP_OK) tp_error_context("%s", member);
            }
            tp_free(text);
            text = NULL;
        }
        tp_program *p = NULL;
        if (st == TP_OK) st = read_member(z, m, true, &text, &len);
        if (st == TP_OK) {
            tp_torch_read_options ro = {.state = state_lookup, .state_ctx = &c, .limits = dlim};
            st = tp__torch_program_from_json(text, len, &ro, &p);
            if (st != TP_OK) tp_error_context("program '%s' (%s)", name, m);
        }
        tp_free(text);
        text = NULL;
        if (st == TP_OK) {
            tp_value ex;
            snprintf(member, sizeof member, "%s/data/sample_inputs/%s.pt", root, name);
            st = torch_saved_member(z, member, zl, dlim, &ex);
            if (st == TP_OK) st = torch_examples(p, &ex);
            tp_value_clear(&ex);
            if (st != TP_OK) tp_program_free(p);
        }
        if (c.any_copied) a->mapped_weights = false;
        load_ctx_clear(&c);
        if (st == TP_OK) st = add_program(a, name, p);
    }
    return st;
}

static tp_status load_all(mapping *image, bool mapped, const tp_load_options *opts, tp_archive **out,
                          tp_sb *report, int *n_problems) {
    tp_zip_limits lim = limits_from(opts);
    tp_doc_limits dlim;
    TP_TRY(doc_limits_from(opts, &lim, &dlim));
    tp_zip_reader *z = NULL;
    TP_TRY(tp__zip_open(image->data, image->size, &lim, &z));
    tp_archive *a = tp_calloc(1, sizeof *a);
    tp_status st = a ? TP_OK : tp_error(TP_ERR_NOMEM, "out of memory");
    char *text = NULL;
    size_t len = 0;
    if (st == TP_OK) {
        a->image = mapping_retain(image);
        a->mapped_weights = mapped;
        char root[256];
        if (tp__zip_find(z, FORMAT_MEMBER) < 0 && find_torch_root(z, root, sizeof root)) {
            /* PyTorch's own layout: every member under one top folder */
            st = load_torch(z, image, mapped, &lim, &dlim, root, a);
            tp__zip_close(z);
            if (st != TP_OK) {
                tp_archive_free(a);
                return st;
            }
            *out = a;
            return TP_OK;
        }
        if (tp__zip_find(z, FORMAT_MEMBER) < 0 && tp__zip_find(z, "serialized_exported_program.json") >= 0) {
            /* PyTorch's layout before the pt2 package (torch 2.7 and earlier) */
            st = load_torch_legacy(z, &lim, &dlim, a);
            tp__zip_close(z);
            if (st != TP_OK) {
                tp_archive_free(a);
                return st;
            }
            a->mapped_weights = false;
            *out = a;
            return TP_OK;
        }
        if (st == TP_OK) st = read_member(z, FORMAT_MEMBER, true, &text, &len);
        if (st == TP_OK && !(len == 3 && memcmp(text, "pt2", 3) == 0))
            st = tp_error(TP_ERR_CORRUPT, "member '%s' must be 'pt2', not '%s'", FORMAT_MEMBER,
                          printable(text, len, (char[33]){0}, 33));
        tp_free(text);
        text = NULL;
    }
    if (st == TP_OK) {
        st = read_member(z, VERSION_MEMBER, true, &text, &len);
        if (st == TP_OK && !(len == 1 && text[0] == '1'))
            st = tp_error(TP_ERR_UNSUPPORTED, "archive version '%s' is not supported (expected '1')",
                          printable(text, len, (char[33]){0}, 33));
        tp_free(text);
        text = NULL;
    }
    /* programs: models/<name>.json */
    int n_models = 0;
    for (int i = 0; st == TP_OK && i < tp__zip_count(z); i++) {
        const char *m = tp__zip_entry(z, i)->name;
        if (model_member(m, "models/")) n_models++;
    }
    if (st == TP_OK && n_models == 0) st = tp_error(TP_ERR_CORRUPT, "archive has no program (no models/<name>.json member)");
    if (st == TP_OK) {
        a->names = tp_calloc((size_t)n_models, sizeof *a->names);
        a->programs = tp_calloc((size_t)n_models, sizeof *a->programs);
        if (!a->names || !a->programs) st = tp_error(TP_ERR_NOMEM, "out of memory");
    }
    tp_status first = TP_OK;
    for (int i = 0; st == TP_OK && i < tp__zip_count(z); i++) {
        const char *m = tp__zip_entry(z, i)->name;
        size_t l = strlen(m);
        if (!model_member(m, "models/")) continue;
        char name[256];
        size_t nlen = l - 12;
        if (nlen >= sizeof name) {
            st = tp_error(TP_ERR_CORRUPT, "program name in '%s' is too long", m);
            break;
        }
        memcpy(name, m + 7, nlen);
        name[nlen] = '\0';
        load_ctx c = {.zip = z, .image = image, .mapped = mapped, .wdir = "data/weights/", .cdir = "data/constants/"};
        tp_value examples = tp_value_none();
        char idx_name[512];
        tp_status pst = TP_OK;
        /* weights and constants indexes */
        for (int k = 0; k < 2 && pst == TP_OK; k++) {
            const char *what = k == 0 ? "weights" : "constants";
            snprintf(idx_name, sizeof idx_name, "data/%s/%s/%s.json", what, name, what);
            c.dir = k == 0 ? "data/weights/" : "data/constants/";
            pst = read_member(z, idx_name, false, &text, &len);
            if (pst == TP_OK && text) {
                pst = tp__serde_weights_from_json(text, len, what, payload_size, &c, &dlim,
                                                  k == 0 ? &c.weights : &c.constants);
                if (pst != TP_OK) tp_error_context("%s", idx_name);
            }
            tp_free(text);
            text = NULL;
        }
        if (pst == TP_OK) pst = load_examples(z, name, &dlim, &examples);
        tp_program *p = NULL;
        if (pst == TP_OK) pst = read_member(z, m, true, &text, &len);
        tp_serde_problems probs = {0};
        if (pst == TP_OK) {
            tp_serde_read_options ro = {.state = state_lookup,
                                        .state_ctx = &c,
                                        .example_inputs = examples.kind == TP_VAL_DICT ? &examples : NULL,
                                        .problems = report ? &probs : NULL,
                                        .limits = &dlim};
            pst = tp__serde_program_from_json(text, len, &ro, &p);
        }
        if (pst != TP_OK && report && pst != TP_ERR_NOMEM) {
            /* verify mode: each of the document's problems on its own line */
            for (int k = 0; k < probs.n; k++) report_problem(report, n_problems, name, probs.items[k].message);
            if (probs.n == 0) report_problem(report, n_problems, name, tp_last_error());
        }
        tp__serde_problems_free(&probs);
        if (pst != TP_OK) tp_error_context("program '%s'", name);
        tp_free(text);
        text = NULL;
        if (c.any_copied) a->mapped_weights = false;
        load_ctx_clear(&c);
        tp_value_clear(&examples);
        if (pst != TP_OK) {
            if (!report || pst == TP_ERR_NOMEM) {
                st = pst;
                break;
            }
            /* verify mode: recorded above; go on with the next program */
            if (first == TP_OK) first = pst;
            continue;
        }
        char *nm = tp_strdup(name);
        if (!nm) {
            tp_program_free(p);
            st = tp_error(TP_ERR_NOMEM, "out of memory");
            break;
        }
        a->names[a->n_programs] = nm;
        a->programs[a->n_programs++] = p;
    }
    /* extra files */
    for (int i = 0; st == TP_OK && i < tp__zip_count(z); i++) {
        const char *m = tp__zip_entry(z, i)->name;
        if (strncmp(m, "extra/", 6) != 0 || !m[6] || m[strlen(m) - 1] == '/') continue; /* not a directory entry */
        if (!extra_name_ok(m + 6)) {
            tp_status est = tp_error(TP_ERR_CORRUPT,
                                     "extra file '%.200s': name must be a relative path without '..' or empty parts", m);
            if (!report) {
                st = est;
                break;
            }
            if (first == TP_OK) first = est;
            tp__sb_printf(report, "%s- %s", report->len ? "\n" : "", tp_last_error());
            (*n_problems)++;
            continue;
        }
        named_blob *nb = tp_realloc(a->extra, (size_t)(a->n_extra + 1) * sizeof *nb);
        if (!nb) {
            st = tp_error(TP_ERR_NOMEM, "out of memory");
            break;
        }
        a->extra = nb;
        named_blob b = {0};
        st = tp__zip_read(z, i, &b.data, &b.size);
        if (st == TP_OK && !(b.name = tp_strdup(m + 6))) {
            tp_free(b.data);
            st = tp_error(TP_ERR_NOMEM, "out of memory");
        }
        if (st == TP_OK) a->extra[a->n_extra++] = b;
    }
    tp__zip_close(z);
    if (st != TP_OK && st != TP_ERR_NOMEM && report && report->len) {
        /* verify mode: a problem that stopped the walk joins the others */
        tp__sb_printf(report, "\n- %s", tp_last_error());
        (*n_problems)++;
    }
    if (st == TP_OK && first != TP_OK) st = first;
    if (st != TP_OK) {
        tp_archive_free(a);
        return st;
    }
    *out = a;
    return TP_OK;
}

/* ---- public loading entry points ---------------------------------------------- */

tp_status tp_archive_load(const char *path, const tp_load_options *opts_in, tp_archive **out) {
    TP_CHECK(path && out, TP_ERR_INVALID_ARG, "archive path is NULL");
    tp_load_options o, *opts = &o;
    tp__options_copy(&o, sizeof o, opts_in);
    mapping *m;
    TP_TRY(map_file(path, opts && opts->no_mmap, &m));
    tp_status st = load_all(m, m->mmapped, opts, out, NULL, NULL);
    mapping_release(m, NULL);
    if (st != TP_OK) tp_error_context("%s", path);
    return st;
}

tp_status tp_archive_load_buffer(const void *data, size_t size, const tp_load_options *opts_in, tp_archive **out) {
    TP_CHECK((data || !size) && out, TP_ERR_INVALID_ARG, "archive buffer is NULL");
    tp_load_options o, *opts = &o;
    tp__options_copy(&o, sizeof o, opts_in);
    mapping *m;
    TP_TRY(map_buffer(data, size, &m));
    /* the private copy is ours: weights may borrow it like a mapping */
    tp_status st = load_all(m, true, opts, out, NULL, NULL);
    if (st == TP_OK) (*out)->mapped_weights = false;
    mapping_release(m, NULL);
    return st;
}

/* Verify: TP_OK, or the first problem's status with the message
 * "N problems:\n- program 'a': ...\n- ..." (one problem: its line alone). */
static tp_status verify_image(mapping *m, const tp_load_options *opts) {
    tp_sb report = {0};
    tp_archive *a = NULL;
    int n_problems = 0;
    tp_status st = load_all(m, m->mmapped, opts, &a, &report, &n_problems);
    tp_archive_free(a);
    if (st == TP_OK || !report.len || n_problems == 0) {
        tp__sb_free(&report);
        return st;
    }
    char *text;
    tp_status fst = tp__sb_finish(&report, &text);
    if (fst != TP_OK) return fst;
    if (n_problems == 1) tp_error(st, "%s", text + 2);
    else tp_error(st, "%d problems:\n%s", n_problems, text);
    tp_free(text);
    return st;
}

tp_status tp_archive_verify(const char *path, const tp_load_options *opts_in) {
    tp_load_options o, *opts = &o;
    tp__options_copy(&o, sizeof o, opts_in);
    mapping *m;
    TP_TRY(map_file(path, opts && opts->no_mmap, &m));
    tp_status st = verify_image(m, opts);
    mapping_release(m, NULL);
    return st;
}

tp_status tp_archive_verify_buffer(const void *data, size_t size, const tp_load_options *opts_in) {
    tp_load_options o, *opts = &o;
    tp__options_copy(&o, sizeof o, opts_in);
    mapping *m;
    TP_TRY(map_buffer(data, size, &m));
    tp_status st = verify_image(m, opts);
    mapping_release(m, NULL);
    return st;
}

/* ---- saving -------------------------------------------------------------------- */

static tp_status check_member_name(const char *what, const char *name, bool allow_slash) {
    TP_CHECK(name && *name, TP_ERR_INVALID_ARG, "%s name is empty", what);
    TP_CHECK(strlen(name) < 200, TP_ERR_INVALID_ARG, "%s name '%.40s...' is too long", what, name);
    TP_CHECK(strcmp(name, ".") != 0 && strcmp(name, "..") != 0 && !strstr(name, "../") && name[0] != '/',
             TP_ERR_INVALID_ARG, "%s name '%s' is not allowed", what, name);
    for (const char *p = name; *p; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                  ch == '-' || ch == '.' || (allow_slash && ch == '/');
        TP_CHECK(ok, TP_ERR_INVALID_ARG, "%s name '%s' may only use letters, digits, '_', '-' and '.'%s", what, name,
                 allow_slash ? " and '/'" : "");
    }
    return TP_OK;
}

/* A payload already written, for sharing state between programs. */
typedef struct written {
    const tp_tensor *tensor;
    const char *dir;
    char *path_name;
} written;

static bool same_view(const tp_tensor *a, const tp_tensor *b) {
    if (a == b) return true;
    if (!tp_tensor_shares_storage(a, b) || tp_tensor_dtype(a) != tp_tensor_dtype(b) || tp_tensor_ndim(a) != tp_tensor_ndim(b) ||
        tp_tensor_offset(a) != tp_tensor_offset(b))
        return false;
    size_t nd = (size_t)tp_tensor_ndim(a);
    return memcmp(tp_tensor_sizes(a), tp_tensor_sizes(b), nd * sizeof(int64_t)) == 0 &&
           memcmp(tp_tensor_strides(a), tp_tensor_strides(b), nd * sizeof(int64_t)) == 0;
}

static tp_status write_payloads(tp_zip_writer *zw, tp_serde_weights *w, const char *dir, written **done, int *n_done,
                                int *cap_done) {
    for (int i = 0; i < w->n; i++) {
        tp_serde_weight *d = &w->items[i];
        const written *prev = NULL;
        for (int k = 0; k < *n_done && !prev; k++)
            if ((*done)[k].dir == dir && same_view((*done)[k].tensor, d->tensor)) prev = &(*done)[k];
        if (prev) { /* stored once: point this entry at the earlier payload */
            char *pn = tp_strdup(prev->path_name);
            TP_CHECK(pn != NULL, TP_ERR_NOMEM, "out of memory");
            tp_free(d->path_name);
            d->path_name = pn;
            continue;
        }
        char member[1024];
        snprintf(member, sizeof member, "%s%s", dir, d->path_name);
        tp_tensor *c;
        TP_TRY(tp_tensor_contiguous(d->tensor, &c));
        size_t bytes = (size_t)tp_tensor_numel(c) * tp_dtype_size(tp_tensor_dtype(c));
        tp_status st = tp__zip_add(zw, member, tp_tensor_data(c), bytes, false);
        tp_tensor_free(c);
        TP_TRY(st);
        if (*n_done == *cap_done) {
            int cap = *cap_done ? *cap_done * 2 : 16;
            written *nd = tp_realloc(*done, (size_t)cap * sizeof *nd);
            TP_CHECK(nd != NULL, TP_ERR_NOMEM, "out of memory");
            *done = nd;
            *cap_done = cap;
        }
        char *pn = tp_strdup(d->path_name);
        TP_CHECK(pn != NULL, TP_ERR_NOMEM, "out of memory");
        (*done)[(*n_done)++] = (written){d->tensor, dir, pn};
    }
    return TP_OK;
}

static tp_status add_text(tp_zip_writer *zw, const char *member, const char *text, size_t len) {
    return tp__zip_add(zw, member, text, len, true);
}

/* Example inputs of p as a dict (user input name -> value). */
static tp_status collect_examples(const tp_program *p, tp_value *out) {
    TP_TRY(tp_value_dict(out));
    const tp_signature *sig = tp_program_signature(p);
    for (int i = 0; i < tp_signature_n_inputs(sig); i++) {
        const tp_input_spec *s = tp_signature_input(sig, i);
        if (s->kind != TP_INPUT_USER_INPUT) continue;
        const tp_value *ex = tp_program_example_input(p, s->arg.name);
        if (!ex) continue;
        tp_value c = tp_value_none();
        tp_status st = tp_value_copy(ex, &c);
        if (st == TP_OK) st = tp_value_dict_set(out, s->arg.name, &c);
        if (st != TP_OK) {
            tp_value_clear(&c); /* a failed dict_set leaves it with us */
            tp_value_clear(out);
            return st;
        }
    }
    return TP_OK;
}

static tp_status save_program(tp_zip_writer *zw, const char *name, const tp_program *p, written **done, int *n_done,
                              int *cap_done) {
    /* program names are < 200 bytes; input names at most TP_LIMIT_NAME
     * (the example pickle refuses longer ones before .npy members are named) */
    char member[TP_LIMIT_NAME + 512], prefix[300];
    snprintf(prefix, sizeof prefix, "%s/", name);
    tp_serde_weights w = {0}, c = {0};
    tp_status st = tp__serde_state_weights(p, prefix, &w, &c);
    if (st == TP_OK) st = write_payloads(zw, &w, "data/weights/", done, n_done, cap_done);
    if (st == TP_OK) st = write_payloads(zw, &c, "data/constants/", done, n_done, cap_done);
    char *json = NULL;
    size_t len = 0;
    if (st == TP_OK) st = tp__serde_weights_to_json(&w, &json, &len);
    if (st == TP_OK) {
        snprintf(member, sizeof member, "data/weights/%s/weights.json", name);
        st = add_text(zw, member, json, len);
    }
    tp_free(json);
    json = NULL;
    if (st == TP_OK) st = tp__serde_weights_to_json(&c, &json, &len);
    if (st == TP_OK) {
        snprintf(member, sizeof member, "data/constants/%s/constants.json", name);
        st = add_text(zw, member, json, len);
    }
    tp_free(json);
    json = NULL;
    tp__serde_weights_free(&w);
    tp__serde_weights_free(&c);
    if (st == TP_OK) st = tp__serde_program_to_json(p, NULL, &json, &len);
    if (st == TP_OK) {
        snprintf(member, sizeof member, "models/%s.json", name);
        st = add_text(zw, member, json, len);
    }
    tp_free(json);
    /* example inputs: tensorplay's pickle, plus .npy members for C readers */
    tp_value ex = tp_value_none();
    if (st == TP_OK) st = collect_examples(p, &ex);
    void *pkl = NULL;
    size_t pkl_size = 0;
    if (st == TP_OK) st = tp__serde_examples_to_pickle(&ex, &pkl, &pkl_size);
    if (st == TP_OK) {
        snprintf(member, sizeof member, "data/sample_inputs/%s.pkl", name);
        st = tp__zip_add(zw, member, pkl, pkl_size, false);
    }
    tp_free(pkl);
    for (int64_t i = 0; st == TP_OK && i < tp_value_len(&ex); i++) {
        const tp_value *v = tp_value_at(&ex, i);
        if (v->kind != TP_VAL_TENSOR) continue;
        void *npy;
        size_t npy_size;
        st = tp_npy_save_buffer(v->u.tensor, &npy, &npy_size);
        if (st == TP_ERR_UNSUPPORTED) { /* bfloat16: the pickle carries it */
            st = TP_OK;
            continue;
        }
        if (st != TP_OK) break;
        snprintf(member, sizeof member, "data/sample_inputs/%s/%s.npy", name, ex.u.seq.keys[i]);
        st = tp__zip_add(zw, member, npy, npy_size, false);
        tp_free(npy);
    }
    tp_value_clear(&ex);
    if (st != TP_OK) tp_error_context("saving program '%s'", name);
    return st;
}

/* What a save writes: the arguments of tp_archive_save(_buffer). */
typedef struct save_args {
    const tp_archive_entry *programs;
    int n_programs;
    const tp_extra_file *extra;
    int n_extra;
} save_args;

static tp_status check_save_args(const save_args *a) {
    TP_CHECK(a->n_programs >= 1 && a->programs, TP_ERR_INVALID_ARG, "an archive needs at least one program");
    TP_CHECK(a->n_extra == 0 || a->extra, TP_ERR_INVALID_ARG, "extra files array is NULL");
    for (int i = 0; i < a->n_programs; i++) {
        TP_TRY(check_member_name("program", a->programs[i].name, false));
        TP_CHECK(a->programs[i].program != NULL, TP_ERR_INVALID_ARG, "program '%s' is NULL", a->programs[i].name);
        for (int k = 0; k < i; k++)
            TP_CHECK(strcmp(a->programs[i].name, a->programs[k].name) != 0, TP_ERR_DUPLICATE,
                     "program name '%s' given twice", a->programs[i].name);
    }
    for (int i = 0; i < a->n_extra; i++) TP_TRY(check_member_name("extra file", a->extra[i].name, true));
    return TP_OK;
}

/* Add every member of the archive to zw (a memory or a file writer: the
 * same calls, so the same bytes). */
static tp_status build_archive(void *ctx, tp_zip_writer *zw) {
    const save_args *a = ctx;
    tp_status st = tp__zip_add(zw, FORMAT_MEMBER, "pt2", 3, false);
    if (st == TP_OK) st = tp__zip_add(zw, VERSION_MEMBER, "1", 1, false);
    written *done = NULL;
    int n_done = 0, cap_done = 0;
    for (int i = 0; st == TP_OK && i < a->n_programs; i++)
        st = save_program(zw, a->programs[i].name, a->programs[i].program, &done, &n_done, &cap_done);
    for (int i = 0; st == TP_OK && i < a->n_extra; i++) {
        char member[512];
        snprintf(member, sizeof member, "extra/%s", a->extra[i].name);
        st = tp__zip_add(zw, member, a->extra[i].data, a->extra[i].size, false);
    }
    for (int k = 0; k < n_done; k++) tp_free(done[k].path_name);
    tp_free(done);
    return st;
}

tp_status tp_archive_save_buffer(const tp_archive_entry *programs, int n_programs, const tp_extra_file *extra,
                                 int n_extra, void **data, size_t *size) {
    save_args a = {programs, n_programs, extra, n_extra};
    TP_TRY(check_save_args(&a));
    tp_zip_writer *zw;
    TP_TRY(tp__zip_writer_new(&zw));
    tp_status st = build_archive(&a, zw);
    if (st != TP_OK) {
        tp__zip_writer_free(zw);
        return st;
    }
    return tp__zip_finish(zw, data, size);
}

tp_status tp_archive_save(const char *path, const tp_archive_entry *programs, int n_programs,
                          const tp_extra_file *extra, int n_extra) {
    TP_CHECK(path && *path, TP_ERR_INVALID_ARG, "archive path is empty");
    save_args a = {programs, n_programs, extra, n_extra};
    TP_TRY(check_save_args(&a));
    return tp__save_zip_file(path, build_archive, &a);
}

/* ---- saving as PyTorch's archive (torch_write.c) --------------------------- */

typedef struct torch_save_args {
    const tp_archive_entry *programs;
    int n_programs;
    const char *root;
} torch_save_args;

static tp_status add_state_payloads(tp_zip_writer *zw, const char *dir, const tp_named_state *s, const char *prefix) {
    for (int i = 0; i < s->n; i++) {
        char member[600];
        snprintf(member, sizeof member, "%s%s%d", dir, prefix, i);
        tp_tensor *c = NULL;
        TP_TRY(tp_tensor_contiguous(s->items[i].tensor, &c));
        tp_status st = tp__zip_add(zw, member, tp_tensor_data(c),
                                   (size_t)tp_tensor_numel(c) * tp_dtype_size(tp_tensor_dtype(c)), false);
        tp_tensor_free(c);
        TP_TRY(st);
    }
    return TP_OK;
}

static tp_status build_torch_program(tp_zip_writer *zw, const char *root, const char *name, const tp_program *p) {
    char member[600], wdir[300], cdir[300], wprefix[300], cprefix[300];
    snprintf(wdir, sizeof wdir, "%s/data/weights/", root);
    snprintf(cdir, sizeof cdir, "%s/data/constants/", root);
    snprintf(wprefix, sizeof wprefix, "weight_%s_", name);
    snprintf(cprefix, sizeof cprefix, "tensor_%s_", name);
    char *doc = NULL, *wcfg = NULL, *ccfg = NULL;
    size_t len = 0;
    tp_named_state weights = {0}, constants = {0};
    void *si = NULL;
    size_t si_size = 0;
    tp_status st = tp__torch_program_to_json(p, &doc, &len);
    if (st == TP_OK) st = tp_program_named_state(p, TP_FILTER_STATE_DICT, &weights);
    if (st == TP_OK) st = tp_program_named_state(p, TP_FILTER_CONSTANTS, &constants);
    if (st == TP_OK) st = tp__torch_payload_config(&weights, wprefix, &wcfg);
    if (st == TP_OK) st = tp__torch_payload_config(&constants, cprefix, &ccfg);
    if (st == TP_OK) {
        snprintf(member, sizeof member, "%s/models/%s.json", root, name);
        st = tp__zip_add(zw, member, doc, len, true);
    }
    if (st == TP_OK) {
        snprintf(member, sizeof member, "%s%s_weights_config.json", wdir, name);
        st = tp__zip_add(zw, member, wcfg, strlen(wcfg), true);
    }
    if (st == TP_OK) st = add_state_payloads(zw, wdir, &weights, wprefix);
    if (st == TP_OK) {
        snprintf(member, sizeof member, "%s%s_constants_config.json", cdir, name);
        st = tp__zip_add(zw, member, ccfg, strlen(ccfg), true);
    }
    if (st == TP_OK) st = add_state_payloads(zw, cdir, &constants, cprefix);
    /* sample inputs: the example inputs of every user input (a constant input's value when it has
     * none), or none at all */
    if (st == TP_OK) {
        const tp_signature *sig = tp_program_signature(p);
        int n = 0, k = 0;
        for (int i = 0; i < tp_signature_n_inputs(sig); i++) n += tp_signature_input(sig, i)->kind == TP_INPUT_USER_INPUT;
        tp_value *ex = tp_calloc((size_t)(n ? n : 1), sizeof *ex);
        if (!ex) st = tp_error(TP_ERR_NOMEM, "out of memory");
        for (int i = 0; st == TP_OK && i < tp_signature_n_inputs(sig); i++) {
            const tp_input_spec *s = tp_signature_input(sig, i);
            if (s->kind != TP_INPUT_USER_INPUT) continue;
            const tp_value *v = tp_program_example_input(p, s->arg.name);
            if (!v && s->arg.kind == TP_ARGK_CONSTANT) v = &s->arg.value;
            if (v && (v->kind == TP_VAL_TENSOR || (v->kind != TP_VAL_LIST && v->kind != TP_VAL_TUPLE &&
                                                   v->kind != TP_VAL_DICT && v->kind != TP_VAL_NODE)))
                ex[k++] = *v; /* borrowed: not cleared */
        }
        /* (args, kwargs) as the call's tree spec arranges the leaves; ((), {}) without examples */
        tp_value leaves = tp_value_none(), tree = tp_value_none();
        if (st == TP_OK) st = tp_value_list(k == n ? n : 0, &leaves);
        for (int i = 0; st == TP_OK && k == n && i < n; i++) st = tp_value_copy(&ex[i], &leaves.u.seq.items[i]);
        if (st == TP_OK && k == n && tp_program_in_spec(p) &&
            tp_pytree_unflatten(tp_program_in_spec(p), leaves.u.seq.items, n, &tree) != TP_OK) {
            tp_clear_error();
            tree = tp_value_none();
        }
        if (st == TP_OK && tree.kind == TP_VAL_NONE) { /* no spec (or none that fits): flat args */
            tp_value args, kwargs;
            st = tp_value_tuple(0, &args);
            for (int64_t i = 0; st == TP_OK && i < tp_value_len(&leaves); i++) {
                tp_value c;
                st = tp_value_copy(tp_value_at(&leaves, i), &c);
                if (st == TP_OK) st = tp_value_append(&args, &c);
            }
            if (st == TP_OK) st = tp_value_dict(&kwargs);
            if (st == TP_OK) st = tp_value_tuple(2, &tree);
            if (st == TP_OK) {
                tree.u.seq.items[0] = args;
                tree.u.seq.items[1] = kwargs;
            }
        }
        if (st == TP_OK) st = tp__torch_save_value(&tree, &si, &si_size);
        tp_value_clear(&tree);
        tp_value_clear(&leaves);
        tp_free(ex);
    }
    if (st == TP_OK) {
        snprintf(member, sizeof member, "%s/data/sample_inputs/%s.pt", root, name);
        st = tp__zip_add(zw, member, si, si_size, false);
    }
    tp_free(si);
    tp_free(doc);
    tp_free(wcfg);
    tp_free(ccfg);
    tp_named_state_free(&weights);
    tp_named_state_free(&constants);
    if (st != TP_OK) tp_error_context("program '%s'", name);
    return st;
}

static tp_status build_torch_archive(void *ctx, tp_zip_writer *zw) {
    const torch_save_args *a = ctx;
    char member[300];
    static const struct {
        const char *path, *text;
    } fixed[] = {{"archive_format", "pt2"}, {"archive_version", "0"}, {".data/version", "6"}, {"byteorder", "little"}};
    for (size_t i = 0; i < TP_ARRAY_LEN(fixed); i++) {
        snprintf(member, sizeof member, "%s/%s", a->root, fixed[i].path);
        TP_TRY(tp__zip_add(zw, member, fixed[i].text, strlen(fixed[i].text), false));
    }
    for (int i = 0; i < a->n_programs; i++)
        TP_TRY(build_torch_program(zw, a->root, a->programs[i].name, a->programs[i].program));
    return TP_OK;
}

static tp_status check_torch_args(const tp_archive_entry *programs, int n) {
    TP_CHECK(programs && n > 0, TP_ERR_INVALID_ARG, "no programs to save");
    for (int i = 0; i < n; i++) {
        TP_CHECK(programs[i].program, TP_ERR_INVALID_ARG, "program %d is NULL", i);
        TP_TRY(check_member_name("program name", programs[i].name, false));
        for (int k = 0; k < i; k++)
            TP_CHECK(strcmp(programs[k].name, programs[i].name) != 0, TP_ERR_DUPLICATE, "program name '%s' repeated",
                     programs[i].name);
    }
    return TP_OK;
}

tp_status tp_archive_save_torch(const char *path, const tp_archive_entry *programs, int n_programs) {
    TP_CHECK(path && *path, TP_ERR_INVALID_ARG, "archive path is empty");
    TP_TRY(check_torch_args(programs, n_programs));
    /* the top folder: the file's base name when it is a plain name (as torch does), else "archive" */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char root[128] = "archive";
    size_t n = strcspn(base, ".");
    bool plain = n > 0 && n < sizeof root;
    for (size_t i = 0; plain && i < n; i++)
        plain = (base[i] >= 'a' && base[i] <= 'z') || (base[i] >= 'A' && base[i] <= 'Z') ||
                (base[i] >= '0' && base[i] <= '9') || base[i] == '_' || base[i] == '-';
    if (plain) snprintf(root, sizeof root, "%.*s", (int)n, base);
    torch_save_args a = {programs, n_programs, root};
    return tp__save_zip_file(path, build_torch_archive, &a);
}

tp_status tp_archive_save_torch_buffer(const tp_archive_entry *programs, int n_programs, void **data, size_t *size) {
    TP_CHECK(data && size, TP_ERR_INVALID_ARG, "NULL output");
    TP_TRY(check_torch_args(programs, n_programs));
    torch_save_args a = {programs, n_programs, "archive"};
    tp_zip_writer *zw;
    TP_TRY(tp__zip_writer_new(&zw));
    tp_status st = build_torch_archive(&a, zw);
    if (st != TP_OK) {
        tp__zip_writer_free(zw);
        return st;
    }
    return tp__zip_finish(zw, data, size);
}
