/*
 * save.c - writing a ZIP archive to a file atomically and durably (see
 * save.h; the public contract is tp_archive_save's in archive.h).
 *
 * Steps: resolve the target (a bounded readlink loop: a symbolic link's
 * final target is replaced, the link stays); remove stale temporary files
 * of that target; create ".<base>.tpsave-XXXXXX" in the target's folder
 * with O_EXCL (mode 0600 and then the old file's permission bits when the
 * target exists, 0666 less the umask as creat would when it does not) and
 * flock it; stream the archive into it through a small write buffer; fsync;
 * rename over the target; fsync the folder. Any failure before the rename
 * unlinks the temporary file, leaving the old target as it was.
 */
#include "save.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Symbolic links followed before giving up (Linux's own limit is 40). */
#define MAX_LINK_HOPS 40
/* Tries at a fresh random temporary name before giving up. */
#define MAX_NAME_TRIES 100
/* Small writes (headers, names) are gathered into a buffer this big;
 * larger ones (weights) go straight to the file. */
#define WRITE_BUFFER 65536

#define PERMISSION_BITS (S_IRWXU | S_IRWXG | S_IRWXO)

/* ---- the system calls, through test hooks ---------------------------------------- */

static tp_save_io g_io;

void tp__save_set_io(const tp_save_io *io) {
    if (io) g_io = *io;
    else memset(&g_io, 0, sizeof g_io);
}

static ssize_t io_write(int fd, const void *data, size_t size) {
    return g_io.write ? g_io.write(fd, data, size) : write(fd, data, size);
}
static int io_fsync(int fd) { return g_io.fsync ? g_io.fsync(fd) : fsync(fd); }
static int io_rename(const char *from, const char *to) {
    return g_io.rename ? g_io.rename(from, to) : rename(from, to);
}

/* ---- the target ------------------------------------------------------------------- */

/* "<dir>/<rest>" (dir_len bytes of dir, which may end with its '/'; just
 * rest when dir_len is 0). */
static char *join_path(const char *dir, size_t dir_len, const char *rest) {
    size_t rest_len = strlen(rest), total;
    if (!tp_add_size(dir_len, rest_len, &total) || !tp_add_size(total, 2, &total)) return NULL;
    char *p = tp_malloc(total);
    if (!p) return NULL;
    if (dir_len) {
        memcpy(p, dir, dir_len);
        if (dir[dir_len - 1] != '/') p[dir_len++] = '/';
        memcpy(p + dir_len, rest, rest_len + 1);
    } else {
        memcpy(p, rest, rest_len + 1);
    }
    return p;
}

/* The contents of the symbolic link `path` (tp_malloc'd). */
static tp_status read_link(const char *path, off_t hint, char **out) {
    size_t cap = hint > 0 && (uint64_t)hint < 4096 ? (size_t)hint + 1 : 256;
    for (;;) {
        char *buf = tp_malloc(cap);
        TP_CHECK(buf, TP_ERR_NOMEM, "out of memory reading the symbolic link '%s'", path);
        ssize_t n = readlink(path, buf, cap);
        if (n < 0) {
            int e = errno;
            tp_free(buf);
            return tp_error(TP_ERR_IO, "cannot read the symbolic link '%s': %s", path, strerror(e));
        }
        if ((size_t)n < cap) {
            buf[n] = '\0';
            *out = buf;
            return TP_OK;
        }
        tp_free(buf);
        TP_CHECK(cap < (size_t)1 << 20, TP_ERR_IO, "the symbolic link '%s' is too long", path);
        cap *= 2;
    }
}

/* The file a save to `path` replaces: path itself, or the final target of
 * the symbolic links it names (relative links resolve against the link's
 * folder). *exists says whether that file exists (then *st is its lstat);
 * a dangling link's target is created, as open(O_CREAT) would. */
static tp_status resolve_target(const char *path, char **out, struct stat *st, bool *exists) {
    *out = NULL;
    char *cur = tp_strdup(path);
    TP_CHECK(cur, TP_ERR_NOMEM, "out of memory");
    for (int hops = 0;; hops++) {
        if (lstat(cur, st) != 0) {
            int e = errno;
            if (e == ENOENT) {
                *exists = false;
                *out = cur;
                return TP_OK;
            }
            tp_status s = tp_error(TP_ERR_IO, "cannot save to '%s': %s", cur, strerror(e));
            tp_free(cur);
            return s;
        }
        if (!S_ISLNK(st->st_mode)) {
            if (!S_ISREG(st->st_mode)) {
                tp_status s = tp_error(TP_ERR_IO, "cannot save to '%s': it exists and is not a regular file", cur);
                tp_free(cur);
                return s;
            }
            *exists = true;
            *out = cur;
            return TP_OK;
        }
        if (hops == MAX_LINK_HOPS) {
            tp_status s = tp_error(TP_ERR_IO, "cannot save to '%s': more than %d levels of symbolic links", path,
                                   MAX_LINK_HOPS);
            tp_free(cur);
            return s;
        }
        char *link = NULL;
        tp_status s = read_link(cur, st->st_size, &link);
        if (s != TP_OK) {
            tp_free(cur);
            return s;
        }
        char *next;
        const char *slash = strrchr(cur, '/');
        if (link[0] == '/' || !slash) next = tp_strdup(link);
        else next = join_path(cur, (size_t)(slash - cur), link);
        tp_free(link);
        tp_free(cur);
        TP_CHECK(next, TP_ERR_NOMEM, "out of memory");
        cur = next;
    }
}

/* ---- temporary names ------------------------------------------------------------- */

static const char NAME_CHARS[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/* Bytes of the target's base name that go into a temporary name: all of
 * them unless ".<base>.tpsave-XXXXXX" would exceed NAME_MAX. */
static size_t temp_base_len(const char *base) {
    size_t n = strlen(base), room = NAME_MAX - 1 - strlen(TP_SAVE_TEMP_INFIX) - TP_SAVE_TEMP_RANDOM;
    return n < room ? n : room;
}

/* Whether `name` is a temporary name of the target whose prefix
 * ".<base>.tpsave-" is `prefix`. */
static bool is_temp_name(const char *name, const char *prefix, size_t prefix_len) {
    if (strncmp(name, prefix, prefix_len) != 0 || strlen(name + prefix_len) != TP_SAVE_TEMP_RANDOM) return false;
    for (const char *p = name + prefix_len; *p; p++)
        if (!strchr(NAME_CHARS, *p)) return false;
    return true;
}

/* Random characters for a name; uniqueness comes from O_EXCL, so a mix of
 * the clock, the process id and a counter is enough. */
static void random_suffix(char *out) {
    static atomic_uint_fast64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ ((uint64_t)getpid() << 12) ^
                 (atomic_fetch_add(&counter, 1) * 0x9E3779B97F4A7C15ull);
    x ^= x >> 30; /* splitmix64's finaliser */
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    for (int i = 0; i < TP_SAVE_TEMP_RANDOM; i++) {
        out[i] = NAME_CHARS[x % (sizeof NAME_CHARS - 1)];
        x /= sizeof NAME_CHARS - 1;
    }
}

/* Remove the leftovers of earlier saves of this target that were killed
 * before their rename: matching names only, regular files of ours, not
 * modified for TP_SAVE_STALE_SECONDS (a live save writes, or has held its
 * lock since microseconds after creating the file) and not locked (a live
 * save holds an exclusive flock until after its rename; the kernel drops it
 * when the process dies). The name must still be the file we checked when
 * we unlink it. Best effort: errors are ignored. */
static void remove_stale_temps(const char *dir, const char *prefix, size_t prefix_len) {
    DIR *d = opendir(dir);
    if (!d) return;
    int dfd = dirfd(d);
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!is_temp_name(de->d_name, prefix, prefix_len)) continue;
        int fd = openat(dfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat held, named;
        if (fstat(fd, &held) == 0 && S_ISREG(held.st_mode) && held.st_uid == geteuid() &&
            held.st_mtime <= now - TP_SAVE_STALE_SECONDS && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            fstatat(dfd, de->d_name, &named, AT_SYMLINK_NOFOLLOW) == 0 && named.st_dev == held.st_dev &&
            named.st_ino == held.st_ino)
            unlinkat(dfd, de->d_name, 0);
        close(fd);
    }
    closedir(d);
}

/* ---- the buffered file sink ------------------------------------------------------- */

typedef struct file_sink {
    int fd;
    const char *target, *tmp; /* for messages */
    unsigned char *buf;
    size_t len;
} file_sink;

static tp_status write_all(file_sink *f, const void *data, size_t size) {
    const unsigned char *p = data;
    while (size > 0) {
        ssize_t n = io_write(f->fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const char *why = n < 0 ? strerror(errno) : "nothing was written";
            return tp_error(TP_ERR_IO, "cannot write '%s' (temporary file '%s'): %s", f->target, f->tmp, why);
        }
        p += n;
        size -= (size_t)n;
    }
    return TP_OK;
}

static tp_status flush_sink(file_sink *f) {
    tp_status st = write_all(f, f->buf, f->len);
    f->len = 0;
    return st;
}

static tp_status file_sink_write(void *ctx, const void *data, size_t size) {
    file_sink *f = ctx;
    if (f->len + size > WRITE_BUFFER || size >= WRITE_BUFFER) TP_TRY(flush_sink(f));
    if (size >= WRITE_BUFFER) return write_all(f, data, size);
    memcpy(f->buf + f->len, data, size);
    f->len += size;
    return TP_OK;
}

/* ---- the save ---------------------------------------------------------------------- */

/* Create the temporary file: *tmp_out (tp_malloc'd) and *fd_out. */
static tp_status create_temp(const char *target, const char *dir, size_t dir_len, const char *prefix,
                             size_t prefix_len, bool exists, const struct stat *old, char **tmp_out, int *fd_out) {
    char name[NAME_MAX + 1];
    memcpy(name, prefix, prefix_len);
    name[prefix_len + TP_SAVE_TEMP_RANDOM] = '\0';
    random_suffix(name + prefix_len);
    char *tmp = join_path(dir, dir_len, name);
    TP_CHECK(tmp, TP_ERR_NOMEM, "out of memory");
    char *suffix = tmp + strlen(tmp) - TP_SAVE_TEMP_RANDOM;
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < MAX_NAME_TRIES; tries++) {
        if (tries) random_suffix(suffix);
        fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, exists ? 0600 : 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        int e = errno;
        tp_status st = tp_error(TP_ERR_IO, "cannot save to '%s': cannot create a temporary file in '%.*s': %s", target,
                                dir_len ? (int)dir_len : 1, dir_len ? dir : ".", strerror(e));
        tp_free(tmp);
        return st;
    }
    /* held until after the rename: tells remove_stale_temps we are alive */
    (void)flock(fd, LOCK_EX | LOCK_NB);
    if (exists) {
        /* keep the old file's owner where we may (best effort: only root
         * gives files away) and its permission bits */
        if ((old->st_uid != geteuid() || old->st_gid != getegid()) && fchown(fd, old->st_uid, old->st_gid) != 0)
            (void)fchown(fd, (uid_t)-1, old->st_gid);
        if (fchmod(fd, old->st_mode & PERMISSION_BITS) != 0) {
            int e = errno;
            tp_status st = tp_error(TP_ERR_IO, "cannot save to '%s': cannot set the mode of '%s': %s", target, tmp,
                                    strerror(e));
            unlink(tmp);
            close(fd);
            tp_free(tmp);
            return st;
        }
    }
    *tmp_out = tmp;
    *fd_out = fd;
    return TP_OK;
}

/* Sync the folder holding the new name. Folders that cannot be synced
 * (EINVAL: some file systems) are not an error. */
static tp_status sync_folder(const char *target, const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || (io_fsync(fd) != 0 && errno != EINVAL)) {
        int e = errno;
        if (fd >= 0) close(fd);
        return tp_error(TP_ERR_IO, "'%s' was replaced, but its folder '%s' cannot be synced: %s", target, dir,
                        strerror(e));
    }
    close(fd);
    return TP_OK;
}

/* Stream the archive into the temporary file and sync it. */
static tp_status write_temp(file_sink *sink, tp_save_build_fn build, void *ctx) {
    sink->buf = tp_malloc(WRITE_BUFFER);
    TP_CHECK(sink->buf, TP_ERR_NOMEM, "out of memory");
    tp_zip_writer *zw = NULL;
    tp_status st = tp__zip_writer_new_sink(file_sink_write, sink, &zw);
    if (st == TP_OK) {
        st = build(ctx, zw);
        if (st == TP_OK) st = tp__zip_finish_sink(zw);
        else tp__zip_writer_free(zw);
    }
    if (st == TP_OK) st = flush_sink(sink);
    tp_free(sink->buf);
    sink->buf = NULL;
    if (st == TP_OK && io_fsync(sink->fd) != 0) {
        int e = errno;
        st = tp_error(TP_ERR_IO, "cannot save to '%s': cannot sync '%s': %s", sink->target, sink->tmp, strerror(e));
    }
    return st;
}

tp_status tp__save_zip_file(const char *path, tp_save_build_fn build, void *ctx) {
    TP_CHECK(path && *path, TP_ERR_INVALID_ARG, "archive path is empty");
    TP_CHECK(build, TP_ERR_INVALID_ARG, "no archive builder");
    char *target = NULL;
    struct stat old;
    bool exists = false;
    TP_TRY(resolve_target(path, &target, &old, &exists));
    const char *slash = strrchr(target, '/');
    const char *base = slash ? slash + 1 : target;
    /* the folder: target[0..dir_len), "/" for the root, "." when none */
    size_t dir_len = slash ? (slash == target ? 1 : (size_t)(slash - target)) : 0;
    char *dir = dir_len ? tp_malloc(dir_len + 1) : tp_strdup(".");
    if (!dir) {
        tp_free(target);
        return tp_error(TP_ERR_NOMEM, "out of memory");
    }
    if (dir_len) {
        memcpy(dir, target, dir_len);
        dir[dir_len] = '\0';
    }
    tp_status st = TP_OK;
    if (!*base) st = tp_error(TP_ERR_IO, "cannot save to '%s': it names a folder", path);
    char prefix[NAME_MAX + 1]; /* ".<base>.tpsave-" */
    size_t prefix_len = 0;
    if (st == TP_OK) {
        size_t base_len = temp_base_len(base);
        prefix[0] = '.';
        memcpy(prefix + 1, base, base_len);
        memcpy(prefix + 1 + base_len, TP_SAVE_TEMP_INFIX, sizeof TP_SAVE_TEMP_INFIX);
        prefix_len = 1 + base_len + strlen(TP_SAVE_TEMP_INFIX);
        remove_stale_temps(dir, prefix, prefix_len);
    }
    char *tmp = NULL;
    int fd = -1;
    if (st == TP_OK) st = create_temp(target, target, dir_len, prefix, prefix_len, exists, &old, &tmp, &fd);
    if (st == TP_OK) {
        file_sink sink = {fd, target, tmp, NULL, 0};
        st = write_temp(&sink, build, ctx);
        if (st == TP_OK && io_rename(tmp, target) != 0) {
            int e = errno;
            st = tp_error(TP_ERR_IO, "cannot save to '%s': cannot rename '%s' over it: %s", target, tmp,
                          strerror(e));
        }
        if (st != TP_OK) unlink(tmp); /* while still locked: no cleaner races us */
        close(fd); /* the data is synced (or abandoned): close's result adds nothing */
        if (st == TP_OK) st = sync_folder(target, dir);
    }
    tp_free(tmp);
    tp_free(dir);
    tp_free(target);
    return st;
}
