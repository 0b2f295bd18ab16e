/*
 * test_save.c - saving archives to files atomically and durably
 * (tp_archive_save, src/archive/save.c) and the ZIP writer's streaming sink
 * it uses: the file holds exactly the bytes tp_archive_save_buffer makes;
 * modes are kept (and the umask honoured for new files); symbolic links are
 * followed and stay links; failed saves (full disk, failing sync or rename,
 * unwritable folders, allocation failures) leave the old file as it was and
 * no temporary file; leftovers of killed saves are hidden, never under the
 * target's name, and removed only when stale; a save killed at random
 * moments leaves the old or the new archive, never anything else.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "archive/save.h"
#include "archive/zip.h"
#include "fail_alloc.h"
#include "program_examples.h"
#include "tpexport/archive.h"

/* ---- helpers ------------------------------------------------------------------ */

/* A fresh folder under /tmp (path into buf). */
static void make_dir(char *buf, size_t size) {
    snprintf(buf, size, "/tmp/tp_test_save_XXXXXX");
    CHECK(mkdtemp(buf) != NULL);
}

/* Remove a folder made by make_dir and everything directly in it. */
static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            if (unlink(p) != 0) rmdir(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* The whole file (malloc'd; NULL if it cannot be read). */
static unsigned char *read_file(const char *path, size_t *size) {
    *size = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return NULL;
    }
    unsigned char *buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd);
    *size = got;
    return buf;
}

static bool file_equals(const char *path, const void *data, size_t size) {
    size_t n;
    unsigned char *f = read_file(path, &n);
    bool same = f && n == size && memcmp(f, data, size) == 0;
    free(f);
    return same;
}

static void write_bytes(const char *path, const void *data, size_t size, mode_t mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(write(fd, data, size) == (ssize_t)size);
    CHECK(fchmod(fd, mode) == 0);
    close(fd);
}

/* Whether `name` is a temporary name of the target called `base`. */
static bool is_temp_of(const char *name, const char *base) {
    size_t b = strlen(base), infix = strlen(TP_SAVE_TEMP_INFIX);
    if (name[0] != '.' || strncmp(name + 1, base, b) != 0 || strncmp(name + 1 + b, TP_SAVE_TEMP_INFIX, infix) != 0)
        return false;
    return strlen(name + 1 + b + infix) == TP_SAVE_TEMP_RANDOM;
}

/* Entries of dir other than "." and "..": how many, and how many are
 * temporary files of `base`. */
static int count_entries(const char *dir, const char *base, int *temps) {
    int n = 0;
    *temps = 0;
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        n++;
        if (is_temp_of(de->d_name, base)) (*temps)++;
    }
    closedir(d);
    return n;
}

static int count_temps(const char *dir, const char *base) {
    int temps;
    count_entries(dir, base, &temps);
    return temps;
}

/* Set the times of every temporary file of `base` in dir `age` seconds back. */
static int backdate_temps(const char *dir, const char *base, int age) {
    int n = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *de;
    struct timespec t[2];
    t[0].tv_sec = t[1].tv_sec = time(NULL) - age;
    t[0].tv_nsec = t[1].tv_nsec = 0;
    while ((de = readdir(d)) != NULL) {
        if (!is_temp_of(de->d_name, base)) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (utimensat(AT_FDCWD, p, t, AT_SYMLINK_NOFOLLOW) == 0) n++;
    }
    closedir(d);
    return n;
}

/* An MLP whose weight is [n, 3] and bias [n], float32 values from seed. */
static tp_program *make_wide(int64_t n, int seed) {
    tp_graph *g = NULL;
    CHECK_OK(tp_graph_new(&g));
    tp_node *w = placeholder(g, "p_fc_weight", 2, (int64_t[]){n, 3});
    tp_node *b = placeholder(g, "p_fc_bias", 1, (int64_t[]){n});
    tp_node *x = placeholder(g, "x", 2, (int64_t[]){2, 3});
    tp_node *lin = call(g, TP_OP_LINEAR, 3, (tp_value[]){N(x), N(w), N(b)});
    output_nodes(g, 1, &lin);
    tp_signature *s = NULL;
    CHECK_OK(tp_signature_new(&s));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_fc_weight"), "fc.weight", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor("p_fc_bias"), "fc.bias", TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor("x"), NULL, TP_PERSISTENT_UNSET));
    CHECK_OK(tp_signature_add_output(s, TP_OUTPUT_USER_OUTPUT, tp_arg_tensor(tp_node_name(lin)), NULL));
    tp_program *p = NULL;
    CHECK_OK(tp_program_new(g, s, &p));
    tp_tensor *wt = NULL, *bt = NULL;
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, 2, (int64_t[]){n, 3}, &wt));
    CHECK_OK(tp_tensor_empty(TP_FLOAT32, 1, (int64_t[]){n}, &bt));
    float *wd = tp_tensor_data(wt), *bd = tp_tensor_data(bt);
    for (int64_t i = 0; i < 3 * n; i++) wd[i] = (float)((i * 7 + seed) % 1000) * 0.001f;
    for (int64_t i = 0; i < n; i++) bd[i] = (float)(seed + i % 10);
    CHECK_OK(tp_program_set_state(p, "fc.weight", TP_STATE_PARAMETER, wt, true));
    CHECK_OK(tp_program_set_state(p, "fc.bias", TP_STATE_PARAMETER, bt, true));
    tp_tensor_free(wt);
    tp_tensor_free(bt);
    tp_value ex = tv(tensor_f32(2, (int64_t[]){2, 3}, (float[]){1, 2, 3, 4, 5, 6}));
    CHECK_OK(tp_program_set_example_input(p, "x", &ex));
    tp_value_clear(&ex);
    set_leaf_out_spec(p);
    CHECK_OK(tp_program_validate(p));
    return p;
}

/* The bytes tp_archive_save_buffer makes for one program (tp_free them). */
static void *buffer_of(tp_program *p, size_t *size) {
    tp_archive_entry e = {"model", p};
    void *data = NULL;
    *size = 0;
    CHECK_OK(tp_archive_save_buffer(&e, 1, NULL, 0, &data, size));
    return data;
}

/* ---- the ZIP writer's sink ---------------------------------------------------- */

typedef struct mem_sink {
    unsigned char *data;
    size_t len, cap;
    size_t fail_after; /* fail the write that would pass this many bytes; 0: never */
    int calls;
} mem_sink;

static tp_status mem_sink_write(void *ctx, const void *data, size_t size) {
    mem_sink *m = ctx;
    m->calls++;
    if (m->fail_after && m->len + size > m->fail_after) return tp_error(TP_ERR_IO, "test sink: disk full");
    if (m->len + size > m->cap) {
        m->cap = (m->len + size) * 2;
        m->data = realloc(m->data, m->cap);
    }
    memcpy(m->data + m->len, data, size);
    m->len += size;
    return TP_OK;
}

typedef struct member {
    const char *name;
    size_t size;
    bool deflate;
} member;

static const member zip_members[] = {
    {"a.txt", 0, false},     {"weights/w0.bin", 1000, false}, {"doc.json", 5000, true},
    {"\xc3\xbc.bin", 17, false}, {"deep/er/name.bin", 333, false}, {"big.bin", 1 << 20, false},
};

static unsigned char *member_data(const member *m) {
    unsigned char *p = malloc(m->size + 1);
    for (size_t i = 0; i < m->size; i++)
        p[i] = m->deflate ? (unsigned char)"{\"k\": [1, 2, 3]}\n"[i % 17] : (unsigned char)(i * 31 + m->size);
    return p;
}

static tp_status add_members(tp_zip_writer *w) {
    for (size_t i = 0; i < TP_ARRAY_LEN(zip_members); i++) {
        unsigned char *d = member_data(&zip_members[i]);
        tp_status st = tp__zip_add(w, zip_members[i].name, d, zip_members[i].size, zip_members[i].deflate);
        free(d);
        TP_TRY(st);
    }
    return TP_OK;
}

/* The sink receives exactly the bytes of the memory writer, with and
 * without forced zip64 records. */
TEST(test_sink_matches_memory) {
    for (int zip64 = 0; zip64 < 2; zip64++) {
        tp_zip_writer *w = NULL;
        CHECK_OK(tp__zip_writer_new(&w));
        tp__zip_writer_force_zip64(w, zip64);
        CHECK_OK(add_members(w));
        void *img = NULL;
        size_t size = 0;
        CHECK_OK(tp__zip_finish(w, &img, &size));

        mem_sink m = {0};
        CHECK_OK(tp__zip_writer_new_sink(mem_sink_write, &m, &w));
        tp__zip_writer_force_zip64(w, zip64);
        CHECK_OK(add_members(w));
        CHECK(tp__zip_writer_offset(w) == m.len);
        CHECK(tp__zip_has(w, "big.bin"));
        CHECK_OK(tp__zip_finish_sink(w));
        CHECK_MSG(m.len == size && img && memcmp(m.data, img, size) == 0, "zip64=%d: %zu vs %zu bytes", zip64, m.len,
                  size);
        /* and the reader accepts it, stored data 64-byte aligned */
        tp_zip_reader *r = NULL;
        CHECK_OK(tp__zip_open(m.data, m.len, NULL, &r));
        for (int i = 0; r && i < tp__zip_count(r); i++) {
            const tp_zip_entry *e = tp__zip_entry(r, i);
            CHECK(e->method != 0 || e->data_offset % 64 == 0);
        }
        tp__zip_close(r);
        free(m.data);
        tp_free(img);
    }
}

/* A failing sink: the add reports it, and the writer stays failed. */
TEST(test_sink_failure_is_sticky) {
    mem_sink m = {0};
    m.fail_after = 2000;
    tp_zip_writer *w = NULL;
    CHECK_OK(tp__zip_writer_new_sink(mem_sink_write, &m, &w));
    CHECK_OK(tp__zip_add(w, "a", "x", 1, false));
    CHECK_STATUS(tp__zip_add(w, "b", zip_members, 4000, false), TP_ERR_IO);
    CHECK_ERR_CONTAINS("zip: member 'b': test sink: disk full");
    CHECK(!tp__zip_has(w, "b"));
    int calls = m.calls;
    CHECK_STATUS(tp__zip_add(w, "c", "x", 1, false), TP_ERR_IO);
    CHECK_ERR_CONTAINS("an earlier write to the archive failed");
    CHECK(m.calls == calls); /* nothing more reaches the sink */
    CHECK_STATUS(tp__zip_finish_sink(w), TP_ERR_IO); /* frees w */
    free(m.data);
    memset(&m, 0, sizeof m);

    /* the two kinds of writer are finished their own way */
    void *img = NULL;
    size_t size = 0;
    CHECK_OK(tp__zip_writer_new_sink(mem_sink_write, &m, &w));
    CHECK_STATUS(tp__zip_finish(w, &img, &size), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("streams to a sink");
    CHECK_OK(tp__zip_writer_new(&w));
    CHECK_STATUS(tp__zip_finish_sink(w), TP_ERR_INVALID_ARG);
    CHECK_ERR_CONTAINS("has no sink");
    CHECK_STATUS(tp__zip_writer_new_sink(NULL, NULL, &w), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp__zip_finish_sink(NULL), TP_ERR_INVALID_ARG);
    free(m.data);
}

/* ---- what a save writes -------------------------------------------------------- */

/* The file holds exactly the bytes of tp_archive_save_buffer, for several
 * programs with shared state and extra files, and loads back. */
TEST(test_file_matches_buffer) {
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model.pt2", dir);
    tp_program *mlp = make_mlp(), *buffers = make_buffers(), *counter = make_counter(), *wide = make_wide(5000, 3);
    tp_archive_entry e[4] = {{"mlp", mlp}, {"buffers", buffers}, {"counter", counter}, {"wide", wide}};
    static const char blob[] = "bin\0ary";
    tp_extra_file extra[2] = {{"notes.txt", "some notes", 10}, {"dir/blob.bin", blob, sizeof blob}};
    void *data = NULL;
    size_t size = 0;
    CHECK_OK(tp_archive_save_buffer(e, 4, extra, 2, &data, &size));
    CHECK_OK(tp_archive_save(path, e, 4, extra, 2));
    CHECK(file_equals(path, data, size));
    /* again over the existing file, and from a relative path */
    CHECK_OK(tp_archive_save(path, e, 4, extra, 2));
    CHECK(file_equals(path, data, size));
    char cwd[1024];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    CHECK(chdir(dir) == 0);
    CHECK_OK(tp_archive_save("model.pt2", e, 4, extra, 2));
    CHECK(chdir(cwd) == 0);
    CHECK(file_equals(path, data, size));
    int temps;
    CHECK(count_entries(dir, "model.pt2", &temps) == 1 && temps == 0);
    tp_archive *a = NULL;
    CHECK_OK(tp_archive_load(path, NULL, &a));
    if (a) {
        CHECK(tp_archive_num_programs(a) == 4 && tp_archive_num_extra(a) == 2);
        tp_archive_free(a);
    }
    CHECK_OK(tp_archive_verify(path, NULL));
    /* a loaded archive saved back over its own (mapped) file */
    CHECK_OK(tp_archive_load(path, NULL, &a));
    if (a) {
        tp_archive_entry again[4];
        for (int i = 0; i < 4; i++) again[i] = (tp_archive_entry){tp_archive_program_name(a, i), tp_archive_program(a, i)};
        void *data2 = NULL;
        size_t size2 = 0;
        CHECK_OK(tp_archive_save_buffer(again, 4, extra, 2, &data2, &size2));
        CHECK_OK(tp_archive_save(path, again, 4, extra, 2));
        CHECK(file_equals(path, data2, size2));
        tp_free(data2);
        tp_archive_free(a);
    }
    tp_free(data);
    tp_program_free(mlp);
    tp_program_free(buffers);
    tp_program_free(counter);
    tp_program_free(wide);
    remove_dir(dir);
}

/* The old file's permission bits stay; a new file gets 0666 less the umask. */
TEST(test_mode_kept_and_umask_honoured) {
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model.pt2", dir);
    tp_program *p = make_mlp();
    tp_archive_entry e = {"model", p};
    static const mode_t kept[] = {0600, 0640, 0644, 0400, 0755};
    for (size_t i = 0; i < TP_ARRAY_LEN(kept); i++) {
        write_bytes(path, "old", 3, kept[i]);
        CHECK_OK(tp_archive_save(path, &e, 1, NULL, 0));
        struct stat st;
        CHECK(stat(path, &st) == 0);
        CHECK_MSG((st.st_mode & 07777) == kept[i], "mode %o became %o", (unsigned)kept[i], (unsigned)(st.st_mode & 07777));
        unlink(path);
    }
    static const mode_t masks[] = {022, 077, 027, 0};
    mode_t saved = umask(022);
    for (size_t i = 0; i < TP_ARRAY_LEN(masks); i++) {
        umask(masks[i]);
        CHECK_OK(tp_archive_save(path, &e, 1, NULL, 0));
        struct stat st;
        CHECK(stat(path, &st) == 0);
        CHECK_MSG((st.st_mode & 07777) == (0666 & ~masks[i]), "umask %03o: mode %o", (unsigned)masks[i],
                  (unsigned)(st.st_mode & 07777));
        unlink(path);
    }
    umask(saved);
    tp_program_free(p);
    remove_dir(dir);
}

/* A link is followed to its final target, which is replaced; the links stay. */
TEST(test_symlink_followed) {
    char dir[64], path[256], link1[256], link2[256], sub[256];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/real.pt2", dir);
    snprintf(sub, sizeof sub, "%s/sub", dir);
    snprintf(link1, sizeof link1, "%s/sub/link1.pt2", dir); /* -> ../real.pt2 (relative, other folder) */
    snprintf(link2, sizeof link2, "%s/link2.pt2", dir);     /* -> <abs>/sub/link1.pt2 */
    CHECK(mkdir(sub, 0755) == 0);
    write_bytes(path, "old", 3, 0600);
    CHECK(symlink("../real.pt2", link1) == 0);
    CHECK(symlink(link1, link2) == 0);
    tp_program *p = make_mlp();
    size_t size;
    void *data = buffer_of(p, &size);
    tp_archive_entry e = {"model", p};
    CHECK_OK(tp_archive_save(link2, &e, 1, NULL, 0));
    struct stat st;
    CHECK(lstat(link2, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(lstat(link1, &st) == 0 && S_ISLNK(st.st_mode));
    char got[256] = {0};
    CHECK(readlink(link1, got, sizeof got - 1) > 0 && strcmp(got, "../real.pt2") == 0);
    CHECK(file_equals(path, data, size));
    CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600);
    CHECK(count_temps(dir, "real.pt2") == 0 && count_temps(sub, "real.pt2") == 0);

    /* a dangling link: its target is created */
    char dangling[256], missing[256];
    snprintf(dangling, sizeof dangling, "%s/dangling.pt2", dir);
    snprintf(missing, sizeof missing, "%s/missing.pt2", dir);
    CHECK(symlink("missing.pt2", dangling) == 0);
    CHECK_OK(tp_archive_save(dangling, &e, 1, NULL, 0));
    CHECK(lstat(dangling, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(file_equals(missing, data, size));

    /* a loop of links */
    char loop_a[256], loop_b[256];
    snprintf(loop_a, sizeof loop_a, "%s/loop_a", dir);
    snprintf(loop_b, sizeof loop_b, "%s/loop_b", dir);
    CHECK(symlink("loop_b", loop_a) == 0);
    CHECK(symlink("loop_a", loop_b) == 0);
    CHECK_STATUS(tp_archive_save(loop_a, &e, 1, NULL, 0), TP_ERR_IO);
    CHECK_ERR_CONTAINS("levels of symbolic links");
    CHECK(lstat(loop_a, &st) == 0 && S_ISLNK(st.st_mode));
    tp_free(data);
    tp_program_free(p);
    unlink(link1);
    rmdir(sub);
    remove_dir(dir);
}

/* ---- failures leave the old file and no temporary ------------------------------ */

static int g_dev_full = -1;
static long g_write_budget; /* for write_until_full: bytes left before ENOSPC */
static int g_write_calls;

static ssize_t write_dev_full(int fd, const void *data, size_t size) {
    (void)fd;
    return write(g_dev_full, data, size);
}
static ssize_t write_until_full(int fd, const void *data, size_t size) {
    if (g_write_budget <= 0) {
        errno = ENOSPC;
        return -1;
    }
    size_t n = size < (size_t)g_write_budget ? size : (size_t)g_write_budget;
    ssize_t w = write(fd, data, n);
    if (w > 0) g_write_budget -= w;
    return w;
}
/* short writes of at most 1000 bytes, and EINTR every third call */
static ssize_t write_short(int fd, const void *data, size_t size) {
    if (++g_write_calls % 3 == 0) {
        errno = EINTR;
        return -1;
    }
    return write(fd, data, size < 1000 ? size : 1000);
}
static int fsync_eio(int fd) {
    (void)fd;
    errno = EIO;
    return -1;
}
static int fsync_eio_on_folders(int fd) {
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        errno = EIO;
        return -1;
    }
    return fsync(fd);
}
static int rename_exdev(const char *from, const char *to) {
    (void)from;
    (void)to;
    errno = EXDEV;
    return -1;
}

TEST(test_failures_keep_old_file) {
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model.pt2", dir);
    tp_program *old_p = make_wide(2000, 1), *new_p = make_wide(200000, 2);
    size_t old_size, new_size;
    void *old_data = buffer_of(old_p, &old_size), *new_data = buffer_of(new_p, &new_size);
    tp_archive_entry old_e = {"model", old_p}, new_e = {"model", new_p};
    g_dev_full = open("/dev/full", O_WRONLY);
    struct {
        const char *what, *message;
        tp_save_io io;
        long budget;
    } cases[] = {
        {"/dev/full", "No space left on device", {write_dev_full, NULL, NULL}, 0},
        {"full after the first members", "No space left on device", {write_until_full, NULL, NULL}, 70000},
        {"full inside the weights", "No space left on device", {write_until_full, NULL, NULL}, 1000000},
        {"full at the directory", "No space left on device", {write_until_full, NULL, NULL}, (long)new_size - 100},
        {"fsync", "cannot sync", {NULL, fsync_eio, NULL}, 0},
        {"rename", "cannot rename", {NULL, NULL, rename_exdev}, 0},
    };
    for (size_t i = 0; i < TP_ARRAY_LEN(cases); i++) {
        if (cases[i].io.write == write_dev_full && g_dev_full < 0) continue;
        CHECK_OK(tp_archive_save(path, &old_e, 1, NULL, 0));
        CHECK(chmod(path, 0640) == 0);
        g_write_budget = cases[i].budget;
        tp__save_set_io(&cases[i].io);
        tp_status st = tp_archive_save(path, &new_e, 1, NULL, 0);
        tp__save_set_io(NULL);
        CHECK_MSG(st == TP_ERR_IO, "%s: %s (%s)", cases[i].what, tp_status_str(st), tp_last_error());
        CHECK_ERR_CONTAINS(cases[i].message);
        CHECK_ERR_CONTAINS(path);
        CHECK_MSG(file_equals(path, old_data, old_size), "%s: the old file changed", cases[i].what);
        struct stat sb;
        CHECK(stat(path, &sb) == 0 && (sb.st_mode & 07777) == 0640);
        int temps;
        CHECK_MSG(count_entries(dir, "model.pt2", &temps) == 1 && temps == 0, "%s: %d temporary files left",
                  cases[i].what, temps);
    }
    if (g_dev_full >= 0) close(g_dev_full);

    /* short writes and interrupted calls are retried: same bytes */
    g_write_calls = 0;
    tp__save_set_io(&(tp_save_io){write_short, NULL, NULL});
    CHECK_OK(tp_archive_save(path, &new_e, 1, NULL, 0));
    tp__save_set_io(NULL);
    CHECK(g_write_calls > 100);
    CHECK(file_equals(path, new_data, new_size));

    /* the folder cannot be synced after the rename: the new file is in
     * place, and the caller hears that it may not be durable */
    CHECK_OK(tp_archive_save(path, &old_e, 1, NULL, 0));
    tp__save_set_io(&(tp_save_io){NULL, fsync_eio_on_folders, NULL});
    CHECK_STATUS(tp_archive_save(path, &new_e, 1, NULL, 0), TP_ERR_IO);
    tp__save_set_io(NULL);
    CHECK_ERR_CONTAINS("was replaced, but its folder");
    CHECK(file_equals(path, new_data, new_size));
    CHECK(count_temps(dir, "model.pt2") == 0);

    tp_free(old_data);
    tp_free(new_data);
    tp_program_free(old_p);
    tp_program_free(new_p);
    remove_dir(dir);
}

TEST(test_unwritable_targets) {
    char dir[64], path[256], file_parent[256];
    make_dir(dir, sizeof dir);
    tp_program *p = make_mlp();
    tp_archive_entry e = {"model", p};
    /* a folder we may not write: chmod works unless we are root; /proc
     * refuses new files even to root */
    char ro[128];
    snprintf(ro, sizeof ro, "%s/ro", dir);
    CHECK(mkdir(ro, 0755) == 0);
    snprintf(path, sizeof path, "%s/model.pt2", ro);
    write_bytes(path, "old", 3, 0644);
    CHECK(chmod(ro, 0555) == 0);
    if (geteuid() != 0) {
        CHECK_STATUS(tp_archive_save(path, &e, 1, NULL, 0), TP_ERR_IO);
        CHECK_ERR_CONTAINS("cannot create a temporary file in");
        CHECK_ERR_CONTAINS("Permission denied");
        CHECK(file_equals(path, "old", 3));
        CHECK(count_temps(ro, "model.pt2") == 0);
    }
    CHECK(chmod(ro, 0755) == 0);
    unlink(path);
    rmdir(ro);
    CHECK_STATUS(tp_archive_save("/proc/tp_test_save.pt2", &e, 1, NULL, 0), TP_ERR_IO);
    CHECK_ERR_CONTAINS("cannot create a temporary file in '/proc'");
    CHECK(access("/proc/tp_test_save.pt2", F_OK) != 0);
    /* a path whose parent is a regular file */
    snprintf(file_parent, sizeof file_parent, "%s/plain", dir);
    write_bytes(file_parent, "x", 1, 0644);
    snprintf(path, sizeof path, "%s/plain/model.pt2", dir);
    CHECK_STATUS(tp_archive_save(path, &e, 1, NULL, 0), TP_ERR_IO);
    CHECK_ERR_CONTAINS("Not a directory");
    CHECK(file_equals(file_parent, "x", 1));
    /* a folder, a missing folder, a path ending in '/' */
    CHECK_STATUS(tp_archive_save(dir, &e, 1, NULL, 0), TP_ERR_IO);
    CHECK_ERR_CONTAINS("is not a regular file");
    CHECK_STATUS(tp_archive_save("/nonexistent/dir/out.pt2", &e, 1, NULL, 0), TP_ERR_IO);
    CHECK_ERR_CONTAINS("/nonexistent/dir");
    snprintf(path, sizeof path, "%s/nothing/", dir);
    CHECK_STATUS(tp_archive_save(path, &e, 1, NULL, 0), TP_ERR_IO);
    CHECK_STATUS(tp_archive_save("", &e, 1, NULL, 0), TP_ERR_INVALID_ARG);
    CHECK_STATUS(tp_archive_save(NULL, &e, 1, NULL, 0), TP_ERR_INVALID_ARG);
    /* invalid arguments are refused before any file is touched */
    snprintf(path, sizeof path, "%s/model.pt2", dir);
    CHECK_STATUS(tp_archive_save(path, NULL, 0, NULL, 0), TP_ERR_INVALID_ARG);
    CHECK(access(path, F_OK) != 0);
    int temps;
    CHECK(count_entries(dir, "model.pt2", &temps) == 1 && temps == 0); /* just "plain" */
    tp_program_free(p);
    remove_dir(dir);
}

/* A target name at NAME_MAX still gets a temporary name that fits. */
TEST(test_long_name) {
    char dir[64], path[512], base[256];
    make_dir(dir, sizeof dir);
    memset(base, 'n', 255);
    base[255] = '\0';
    snprintf(path, sizeof path, "%s/%s", dir, base);
    tp_program *p = make_mlp();
    tp_archive_entry e = {"model", p};
    CHECK_OK(tp_archive_save(path, &e, 1, NULL, 0));
    CHECK_OK(tp_archive_save(path, &e, 1, NULL, 0));
    int temps;
    CHECK(count_entries(dir, base, &temps) == 1);
    tp_program_free(p);
    remove_dir(dir);
}

typedef struct alloc_case {
    const char *dir, *path;
    tp_archive_entry *entry;
    const void *old_data;
    size_t old_size;
} alloc_case;

static tp_status save_op(void *ctx) {
    alloc_case *c = ctx;
    tp_status st = tp_archive_save(c->path, c->entry, 1, NULL, 0);
    if (st != TP_OK) CHECK_MSG(file_equals(c->path, c->old_data, c->old_size), "old file changed after %s", tp_last_error());
    CHECK(count_temps(c->dir, "model.pt2") == 0);
    return st;
}

/* Each allocation of a save failing in turn: TP_ERR_NOMEM, no leak, the old
 * file intact, no temporary file left. */
TEST(test_save_allocation_failures) {
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model.pt2", dir);
    write_bytes(path, "old", 3, 0644);
    tp_program *p = make_counter();
    tp_archive_entry e = {"model", p};
    alloc_case c = {dir, path, &e, "old", 3};
    long n = check_alloc_failures("save to a file", save_op, &c);
    CHECK(n > 10);
    size_t size;
    void *data = buffer_of(p, &size);
    CHECK(file_equals(path, data, size));
    CHECK(count_temps(dir, "model.pt2") == 0);
    tp_free(data);
    tp_program_free(p);
    remove_dir(dir);
}

/* ---- leftovers of killed saves ------------------------------------------------- */

static void touch(const char *dir, const char *name, int age) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    write_bytes(p, "PK", 2, 0600);
    struct timespec t[2];
    t[0].tv_sec = t[1].tv_sec = time(NULL) - age;
    t[0].tv_nsec = t[1].tv_nsec = 0;
    CHECK(utimensat(AT_FDCWD, p, t, 0) == 0);
}

static bool exists_in(const char *dir, const char *name) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat st;
    return lstat(p, &st) == 0;
}

/* Only stale, unlocked, regular files of ours with exactly the target's
 * temporary name pattern are removed. */
TEST(test_stale_temps_removed_safely) {
    char dir[64], path[128], p2[1024];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model.pt2", dir);
    const int old = 3600;
    touch(dir, ".model.pt2.tpsave-Ab3xYz", old);   /* stale: removed */
    touch(dir, ".model.pt2.tpsave-000000", old);   /* stale: removed */
    touch(dir, ".model.pt2.tpsave-Young1", 0);     /* recent: kept */
    touch(dir, ".model.pt2.tpsave-Lockd1", old);   /* locked below: kept */
    touch(dir, ".model.pt2.tpsave-abc", old);      /* wrong length: kept */
    touch(dir, ".model.pt2.tpsave-abcdefg", old);  /* wrong length: kept */
    touch(dir, ".model.pt2.tpsave-ab_d.f", old);   /* wrong characters: kept */
    touch(dir, ".other.pt2.tpsave-Ab3xYz", old);   /* another target: kept */
    touch(dir, "model.pt2.tmpAb3xYz", old);        /* the old scheme's name: not ours */
    touch(dir, ".model.pt2.tpsave-Ab3xYz.bak", old);
    snprintf(p2, sizeof p2, "%s/.model.pt2.tpsave-Folder", dir); /* a folder: kept */
    CHECK(mkdir(p2, 0700) == 0);
    snprintf(p2, sizeof p2, "%s/.model.pt2.tpsave-SymLnk", dir); /* a link: kept, its target too */
    CHECK(symlink("model.pt2.tmpAb3xYz", p2) == 0);
    bool root = geteuid() == 0;
    if (root) { /* someone else's: kept */
        touch(dir, ".model.pt2.tpsave-Others", old);
        snprintf(p2, sizeof p2, "%s/.model.pt2.tpsave-Others", dir);
        CHECK(chown(p2, 12345, 12345) == 0);
        struct timespec t[2] = {{time(NULL) - old, 0}, {time(NULL) - old, 0}};
        CHECK(utimensat(AT_FDCWD, p2, t, 0) == 0);
    }
    snprintf(p2, sizeof p2, "%s/.model.pt2.tpsave-Lockd1", dir);
    int lock_fd = open(p2, O_RDONLY);
    CHECK(lock_fd >= 0 && flock(lock_fd, LOCK_EX) == 0);

    tp_program *p = make_mlp();
    tp_archive_entry e = {"model", p};
    CHECK_OK(tp_archive_save(path, &e, 1, NULL, 0));
    CHECK(!exists_in(dir, ".model.pt2.tpsave-Ab3xYz"));
    CHECK(!exists_in(dir, ".model.pt2.tpsave-000000"));
    static const char *const kept[] = {
        ".model.pt2.tpsave-Young1", ".model.pt2.tpsave-Lockd1", ".model.pt2.tpsave-abc",
        ".model.pt2.tpsave-abcdefg", ".model.pt2.tpsave-ab_d.f", ".other.pt2.tpsave-Ab3xYz",
        "model.pt2.tmpAb3xYz", ".model.pt2.tpsave-Ab3xYz.bak", ".model.pt2.tpsave-Folder",
        ".model.pt2.tpsave-SymLnk"};
    for (size_t i = 0; i < TP_ARRAY_LEN(kept); i++) CHECK_MSG(exists_in(dir, kept[i]), "%s was removed", kept[i]);
    if (root) CHECK(exists_in(dir, ".model.pt2.tpsave-Others"));
    /* unlocked (its writer died) it goes too */
    close(lock_fd);
    CHECK_OK(tp_archive_save(path, &e, 1, NULL, 0));
    CHECK(!exists_in(dir, ".model.pt2.tpsave-Lockd1"));
    CHECK(exists_in(dir, ".model.pt2.tpsave-Young1"));
    tp_program_free(p);
    remove_dir(dir);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A child saving a ~9 MB archive over and over is SIGKILLed at random
 * moments: the target is always one of the complete archives, leftovers
 * only ever have the hidden temporary name, and a later save removes them
 * once they are stale. */
TEST(test_kill_during_save) {
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model.pt2", dir);
    tp_program *progs[3] = {make_wide(600000, 0), make_wide(600000, 1), make_wide(600000, 2)};
    void *bytes[3];
    size_t sizes[3];
    for (int i = 0; i < 3; i++) bytes[i] = buffer_of(progs[i], &sizes[i]);
    tp_archive_entry e0 = {"model", progs[0]};
    CHECK_OK(tp_archive_save(path, &e0, 1, NULL, 0));
    double t0 = now_seconds();
    CHECK_OK(tp_archive_save(path, &e0, 1, NULL, 0));
    double one_save = now_seconds() - t0;
    unsigned seed = 12345;
    int versions_seen[3] = {0};
    enum { TRIALS = 20 };
    for (int trial = 0; trial < TRIALS; trial++) {
        fflush(NULL);
        pid_t child = fork();
        CHECK(child >= 0);
        if (child == 0) {
            for (int k = 1;; k = 3 - k) { /* versions 1 and 2 in turn */
                tp_archive_entry e = {"model", progs[k]};
                if (tp_archive_save(path, &e, 1, NULL, 0) != TP_OK) _exit(1);
            }
        }
        seed = seed * 1103515245u + 12345u;
        /* anywhere in the first few saves */
        double delay = one_save * 3.0 * (double)((seed >> 8) % 1000) / 1000.0;
        struct timespec d = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
        nanosleep(&d, NULL);
        kill(child, SIGKILL);
        int status = 0;
        waitpid(child, &status, 0);
        CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "trial %d: the child ended by itself", trial);
        size_t n;
        unsigned char *got = read_file(path, &n);
        int which = -1;
        for (int k = 0; k < 3 && got; k++)
            if (n == sizes[k] && memcmp(got, bytes[k], n) == 0) which = k;
        free(got);
        CHECK_MSG(which >= 0, "trial %d: the target is none of the archives (%zu bytes)", trial, n);
        if (which >= 0) versions_seen[which]++;
        tp_archive *a = NULL;
        CHECK_OK(tp_archive_load(path, NULL, &a));
        tp_archive_free(a);
        int temps, entries = count_entries(dir, "model.pt2", &temps);
        CHECK_MSG(entries == 1 + temps, "trial %d: %d entries, %d of them temporary", trial, entries, temps);
    }
    int before = count_temps(dir, "model.pt2");
    printf("  kill test: one save %.1f ms; %d hidden leftovers after %d kills; target was v0/v1/v2 %d/%d/%d times\n",
           one_save * 1e3, before, TRIALS, versions_seen[0], versions_seen[1], versions_seen[2]);
    /* leftovers go once stale (recent ones stay: test_stale_temps_removed_safely) */
    CHECK(backdate_temps(dir, "model.pt2", 2 * TP_SAVE_STALE_SECONDS) == before);
    CHECK_OK(tp_archive_save(path, &e0, 1, NULL, 0));
    CHECK(count_temps(dir, "model.pt2") == 0);
    CHECK(file_equals(path, bytes[0], sizes[0]));
    for (int i = 0; i < 3; i++) {
        tp_free(bytes[i]);
        tp_program_free(progs[i]);
    }
    remove_dir(dir);
}

TEST_MAIN(T(test_sink_matches_memory), T(test_sink_failure_is_sticky), T(test_file_matches_buffer),
          T(test_mode_kept_and_umask_honoured), T(test_symlink_followed), T(test_failures_keep_old_file),
          T(test_unwritable_targets), T(test_long_name), T(test_save_allocation_failures),
          T(test_stale_temps_removed_safely), T(test_kill_during_save))
