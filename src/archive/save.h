/*
 * save.h - writing a ZIP archive to a file atomically and durably (internal).
 *
 * tp__save_zip_file streams the archive a callback builds into a hidden
 * temporary file next to the target, then syncs it and renames it over the
 * target, so the target's name only ever refers to the old file or to the
 * complete new one (the contract is spelled out at tp_archive_save in
 * include/tpexport/archive.h).
 *
 * Temporary files are named ".<base>.tpsave-XXXXXX" (base: the target's
 * final name, cut to fit NAME_MAX; X: [A-Za-z0-9]) in the target's folder
 * and are locked (flock) by their writer for as long as it runs. A save
 * first removes the leftovers of earlier killed saves of the same target:
 * files with exactly that name pattern that are regular, owned by the
 * caller's effective user, unchanged for TP_SAVE_STALE_SECONDS, and not
 * locked; anything else is left alone.
 */
#ifndef TPEXPORT_SAVE_H
#define TPEXPORT_SAVE_H

#include <sys/types.h>

#include "../internal.h"
#include "zip.h"

/* Leftover temporary files younger than this are never removed. */
#define TP_SAVE_STALE_SECONDS 10

/* The temporary names of a target ".<base>.tpsave-" prefix and its random
 * suffix length (for tests that look for leftovers). */
#define TP_SAVE_TEMP_INFIX ".tpsave-"
#define TP_SAVE_TEMP_RANDOM 6

/* Adds an archive's members to `w` (which streams them to the file). */
typedef tp_status (*tp_save_build_fn)(void *ctx, tp_zip_writer *w);

/* Write the archive `build` makes to `path` (a symbolic link is followed to
 * its final target, which is replaced; the link stays). TP_ERR_IO with a
 * message naming the path for file system failures; build's status
 * otherwise. On any failure before the rename the old file is untouched
 * and the temporary file removed. */
TP_HIDDEN tp_status tp__save_zip_file(const char *path, tp_save_build_fn build, void *ctx);

/* Test hooks: the system calls a save makes through, to inject short
 * writes, full disks and failing syncs or renames. NULL members (or a NULL
 * io) mean the real calls. Process-wide; not for use outside tests. */
typedef struct tp_save_io {
    ssize_t (*write)(int fd, const void *data, size_t size);
    int (*fsync)(int fd);
    int (*rename)(const char *from, const char *to);
} tp_save_io;
TP_HIDDEN void tp__save_set_io(const tp_save_io *io);

#endif
