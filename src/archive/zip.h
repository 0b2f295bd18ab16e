/*
 * zip.h - a bounded ZIP reader and an aligned ZIP writer (internal).
 *
 * Reader: parses an in-memory (or mapped) ZIP image through the central
 * directory, checking every offset, size and count with overflow-safe
 * arithmetic before use. Supports stored (0) and deflated (8) members,
 * ZIP64 extra fields for sizes/offsets, and rejects: bad signatures,
 * truncated records, members whose local header disagrees with the central
 * directory, data ranges outside the image, duplicate names, encrypted or
 * otherwise unsupported members, CRC mismatches, and members that inflate
 * beyond their declared size or beyond the configured limit (compression
 * bombs). Errors are TP_ERR_CORRUPT (or TP_ERR_UNSUPPORTED / TP_ERR_NOMEM)
 * with a message naming the member and field.
 *
 * Writer: appends members stored (uncompressed) with their data aligned to
 * 64 bytes inside the file (padding through the local header's extra
 * field), so a reader can map weights in place; or deflated for text
 * members when asked. Produces a standard archive (Python's zipfile and
 * `unzip -t` accept it), using ZIP64 records when sizes demand. The output
 * goes to a growing memory buffer or, byte for byte the same, to a sink
 * callback as members are added (archive saving streams weights to the file
 * that way, without holding the archive in memory).
 */
#ifndef TPEXPORT_ZIP_H
#define TPEXPORT_ZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../internal.h"

typedef struct tp_zip_limits {
    uint64_t max_member_size;   /* largest uncompressed member (default 8 GiB) */
    uint64_t max_total_size;    /* sum of uncompressed sizes (default 64 GiB) */
    uint32_t max_members;       /* default 1<<20 */
    uint32_t max_ratio;         /* largest compression ratio for deflated members (default 1000) */
} tp_zip_limits;

/* The defaults above. */
TP_HIDDEN tp_zip_limits tp__zip_default_limits(void);

typedef struct tp_zip_entry {
    const char *name;        /* NUL-terminated copy, owned by the reader */
    uint16_t method;         /* 0 stored, 8 deflated */
    uint32_t crc32;
    uint64_t comp_size;
    uint64_t size;           /* uncompressed */
    uint64_t data_offset;    /* offset of the member's data in the image */
} tp_zip_entry;

typedef struct tp_zip_reader tp_zip_reader;

/* Parse the image data[0..size). The reader borrows `data`: it must outlive
 * the reader. limits NULL = defaults. */
TP_HIDDEN tp_status tp__zip_open(const void *data, size_t size, const tp_zip_limits *limits,
                                 tp_zip_reader **out);
TP_HIDDEN void tp__zip_close(tp_zip_reader *r);
TP_HIDDEN int tp__zip_count(const tp_zip_reader *r);
TP_HIDDEN const tp_zip_entry *tp__zip_entry(const tp_zip_reader *r, int i);
/* Index of the member called `name`, or -1. */
TP_HIDDEN int tp__zip_find(const tp_zip_reader *r, const char *name);
/* The member's bytes: *data is a new tp_malloc'd buffer of *size bytes (plus
 * a NUL byte after them, not counted, so text can be parsed in place).
 * Checks the CRC. */
TP_HIDDEN tp_status tp__zip_read(const tp_zip_reader *r, int i, void **data, size_t *size);
/* For a stored member: a pointer into the image (zero copy; CRC checked on
 * request). TP_ERR_UNSUPPORTED if the member is compressed. */
TP_HIDDEN tp_status tp__zip_stored(const tp_zip_reader *r, int i, bool check_crc, const void **data,
                                   size_t *size);

typedef struct tp_zip_writer tp_zip_writer;
/* Where a streaming writer's bytes go: write all `size` bytes (in order,
 * after the ones before) or return a failing status with a message naming
 * the destination. */
typedef tp_status (*tp_zip_sink_fn)(void *ctx, const void *data, size_t size);
/* A writer into a growing memory buffer (finish with tp__zip_finish). */
TP_HIDDEN tp_status tp__zip_writer_new(tp_zip_writer **out);
/* A writer that streams the archive to `sink` as members are added: member
 * data goes to the sink as given, without a copy of the archive in memory
 * (finish with tp__zip_finish_sink). The bytes are exactly those a memory
 * writer would produce for the same calls. `ctx` is borrowed - it must
 * outlive the writer. A sink failure is sticky: the writer's later adds and
 * its finish fail with that status. */
TP_HIDDEN tp_status tp__zip_writer_new_sink(tp_zip_sink_fn sink, void *ctx, tp_zip_writer **out);
/* Add a member. deflate=false stores it with its data 64-byte aligned in the
 * file. Duplicate names are refused (TP_ERR_DUPLICATE). The local header
 * carries the CRC and sizes (no data descriptor), so the data is read twice
 * (CRC, then output) and must not change during the call; it is borrowed
 * for the call only. A memory writer that runs out of memory is left as it
 * was; a failed sink leaves the archive incomplete. */
TP_HIDDEN tp_status tp__zip_add(tp_zip_writer *w, const char *name, const void *data, size_t size, bool deflate);
TP_HIDDEN bool tp__zip_has(const tp_zip_writer *w, const char *name);
/* Bytes emitted so far. */
TP_HIDDEN uint64_t tp__zip_writer_offset(const tp_zip_writer *w);
/* Write ZIP64 records (local and central zip64 extra fields with sizes and
 * offsets, the zip64 end record and locator) even when nothing needs them,
 * as Python's force_zip64 does; for testing the ZIP64 paths with small
 * archives. Call before adding members. */
TP_HIDDEN void tp__zip_writer_force_zip64(tp_zip_writer *w, bool on);
/* Memory writer: write the central directory; *data (tp_malloc'd, caller
 * frees) and *size receive the archive. The writer is freed either way
 * (TP_ERR_INVALID_ARG for a sink writer). */
TP_HIDDEN tp_status tp__zip_finish(tp_zip_writer *w, void **data, size_t *size);
/* Sink writer: emit the central directory and end records. The writer is
 * freed either way (TP_ERR_INVALID_ARG for a memory writer). */
TP_HIDDEN tp_status tp__zip_finish_sink(tp_zip_writer *w);
TP_HIDDEN void tp__zip_writer_free(tp_zip_writer *w);

/* CRC-32 (zlib's). */
TP_HIDDEN uint32_t tp__crc32(uint32_t crc, const void *data, size_t size);

#endif
