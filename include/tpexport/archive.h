/*
 * archive.h - save and load exported programs as tensorplay archives (.pt2).
 *
 * Format (tensorplay's, a ZIP file):
 *   archive_format                       "pt2"
 *   archive_version                      "1"
 *   models/<name>.json                   the program document (schema_version 1)
 *   data/weights/<name>/weights.json     state index: per state name dtype, sizes,
 *                                        strides, storage_offset, path_name, ...
 *   data/weights/<path_name>             raw little-endian tensor bytes
 *   data/constants/<name>/constants.json constants index (same layout)
 *   data/constants/<path_name>           raw bytes
 *   data/sample_inputs/<name>.pkl        example inputs (tensorplay: a pickle;
 *                                        never read by tpexport)
 *   data/sample_inputs/<name>/<input>.npy  example inputs as .npy (written and
 *                                        read by tpexport)
 *   extra/<file>                         user files
 * Several programs may share one archive; a tensor shared by several programs
 * is stored once.
 *
 * Writing: members are stored uncompressed with their data 64-byte aligned
 * (JSON members may be deflated), so weights can be mapped in place. Saving
 * to a path streams the archive to a temporary file that replaces the
 * target atomically (see tp_archive_save).
 * Loading: from a path (the file is mapped with a private, copy-on-write
 * mmap, so programs that mutate their buffers never write to the file;
 * stored weights become tensors borrowing the mapping, which stays alive
 * until the last such tensor is freed; a copy is made when mapping is
 * impossible or the member is deflated or misaligned for the element size
 * of any state entry viewing it: every state tensor is aligned for its
 * dtype, and entries sharing a member share one copy) or from a memory
 * buffer (copied). Every file is treated as hostile: sizes, offsets, counts
 * and JSON shapes are checked before use; pickles are never executed - only
 * the exact byte forms tensorplay writes for a dtype, Ellipsis, a tensor and
 * example inputs are read, by a strict subset reader, and any other pickled
 * payload is refused (TP_ERR_UNSUPPORTED naming the node or member); each
 * problem has its own error naming the member/field/node.
 * Loaded programs are validated before they are returned.
 *
 * PyTorch's own archives (torch.export.save) load through the same calls:
 *   - the pt2 package of torch 2.8 onwards (every member under one top
 *     folder: <root>/archive_format, models/<model>.json in torch's export
 *     schema 8.x, data/weights/<model>_weights_config.json and raw payloads,
 *     mapped in place like tensorplay's; data/sample_inputs/<model>.pt);
 *   - the layout of torch 2.4 to 2.7 (serialized_exported_program.json,
 *     schema 5.x (2.4), 7.x (2.5) or 8.x, with the state dict, constants and
 *     example inputs as torch.save files: copied out of their pickles);
 * torch.save pickles (state dicts, example inputs) are read by the same
 * strict subset reader, extended by torch's tensor rebuild functions over
 * persistent storage ids and OrderedDict (no code runs). Every node's ATen
 * op and overload must be one tpexport maps (TP_ERR_UNSUPPORTED names it),
 * and the dtype and shape tpexport infers for each node must equal the ones
 * PyTorch recorded. Schema majors other than 5, 7 and 8 are
 * TP_ERR_UNSUPPORTED, naming the version. tp_archive_save writes tensorplay's format;
 * tp_archive_save_torch writes PyTorch's.
 */
#ifndef TPEXPORT_ARCHIVE_H
#define TPEXPORT_ARCHIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "program.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tp_archive tp_archive;

/* Load options. Zero-initialise them or use tp_load_options_init; fields
 * added later default to 0 (docs/abi.md). */
typedef struct tp_load_options {
    size_t struct_size;         /* sizeof(tp_load_options) as the caller saw it; 0: this version's */
    bool no_mmap;               /* copy weights instead of mapping them */
    uint64_t max_member_size;   /* 0: default (8 GiB) - larger members are refused */
    uint64_t max_total_size;    /* 0: default (64 GiB) - sum of inflated sizes */
    uint32_t max_ratio;         /* 0: default (1000) - compression-bomb guard */
    /* Document limits (limits.h), each 0 for the build's value. A load may
     * tighten them, never loosen them: a value above the build's is refused
     * with TP_ERR_INVALID_ARG naming the field, so that whatever tpexport
     * writes still reads back under the defaults. Exceeding one is
     * TP_ERR_CORRUPT naming the document field and the option. */
    uint32_t max_name_bytes;     /* TP_LIMIT_NAME (1024): one name */
    uint32_t max_depth;          /* TP_LIMIT_DEPTH (32): nesting of values and tree specs */
    uint64_t max_nodes;          /* TP_LIMIT_NODES (2^20): nodes of one graph */
    uint64_t max_items;          /* TP_LIMIT_ITEMS (2^20): entries of one JSON array or object */
    uint64_t max_document_bytes; /* TP_LIMIT_DOCUMENT (1 GiB): one JSON document */
    /* Bytes of any one weight, constant or example-input tensor; 0: the
     * member limit (max_member_size). Larger: TP_ERR_UNSUPPORTED. */
    uint64_t max_tensor_bytes;
} tp_load_options;

static inline void tp_load_options_init(tp_load_options *o) {
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
}

/* Load every program of an archive. opts NULL = defaults. Caller frees
 * *out with tp_archive_free. */
TP_API tp_status tp_archive_load(const char *path, const tp_load_options *opts, tp_archive **out);
TP_API tp_status tp_archive_load_buffer(const void *data, size_t size, const tp_load_options *opts,
                                        tp_archive **out);
TP_API void tp_archive_free(tp_archive *a);

/* Programs in archive order. The archive owns them; tp_program_retain one
 * to keep it past tp_archive_free. */
TP_API int tp_archive_num_programs(const tp_archive *a);
TP_API const char *tp_archive_program_name(const tp_archive *a, int i);
TP_API tp_program *tp_archive_program(const tp_archive *a, int i);
/* By name; NULL if absent. */
TP_API tp_program *tp_archive_find_program(const tp_archive *a, const char *name);

/* Extra files (extra/<name>): name and bytes, owned by the archive. */
TP_API int tp_archive_num_extra(const tp_archive *a);
TP_API const char *tp_archive_extra_name(const tp_archive *a, int i);
TP_API const void *tp_archive_extra_data(const tp_archive *a, int i, size_t *size);
/* Whether weights of this archive are mapped (true) or copied. */
TP_API bool tp_archive_is_mapped(const tp_archive *a);

/* ---- saving -------------------------------------------------------------- */

typedef struct tp_archive_entry {
    const char *name;        /* program name: models/<name>.json */
    const tp_program *program;
} tp_archive_entry;

typedef struct tp_extra_file {
    const char *name;        /* stored as extra/<name> */
    const void *data;
    size_t size;
} tp_extra_file;

/* Write programs (at least one, unique names matching [A-Za-z0-9_.-]+) and
 * extra files to `path`: the same bytes tp_archive_save_buffer makes,
 * streamed to the file member by member (weights are written from the
 * tensors, never gathered into an archive-sized buffer).
 *
 * Atomic and durable: the archive goes to a temporary file in the target's
 * folder, named ".<name>.tpsave-XXXXXX" (<name>: the target's file name,
 * cut to fit NAME_MAX; X: random [A-Za-z0-9]), which is fsync'ed, renamed
 * over the target, and then the folder is fsync'ed. Readers of `path` see
 * the old file or the complete new one, never a partial one, and nothing
 * but the target ever appears under its name. Any failure before the rename
 * (a full disk, a failed write or sync, an unwritable folder, running out of
 * memory) returns its status (TP_ERR_IO naming the path and the reason,
 * TP_ERR_NOMEM, ...) with the old file untouched and the temporary file
 * removed. TP_ERR_IO "... was replaced, but its folder ... cannot be synced"
 * means the new file is in place but might not survive a system crash.
 *
 * The file: if `path` is a symbolic link (or a chain of them, up to 40), its
 * final target is replaced and the links stay; a dangling link's target is
 * created. An existing target keeps its permission bits (rwx for owner,
 * group, others; set-id and sticky bits are not copied) and, where the
 * caller may (root), its owner and group; a new file gets 0666 less the
 * umask, as creat() would. A target that exists but is not a regular file
 * (a folder, a device) is refused. The new file is a new inode: other hard
 * links to the old one keep the old contents.
 *
 * Leftovers of a save that was killed (SIGKILL, power loss) are hidden
 * ".<name>.tpsave-XXXXXX" files next to the target. Each save removes those
 * of its own target that are provably abandoned: exactly that name pattern,
 * a regular file owned by the caller's effective user, unmodified for at
 * least 10 seconds, and not locked (a running save holds an exclusive
 * flock on its temporary file until after its rename; the kernel releases
 * it when the process dies). Younger, locked, foreign or non-matching files
 * are never touched, so concurrent saves of one target do not disturb each
 * other (the last rename wins). */
TP_API tp_status tp_archive_save(const char *path, const tp_archive_entry *programs, int n_programs,
                                 const tp_extra_file *extra, int n_extra);
/* Same into a new buffer (caller frees *data with tp_free). */
TP_API tp_status tp_archive_save_buffer(const tp_archive_entry *programs, int n_programs,
                                        const tp_extra_file *extra, int n_extra, void **data, size_t *size);

/* Save programs as PyTorch's own archive (torch.export.save's pt2 package,
 * export schema 8.20) that torch.export.load reads: each node written as
 * the ATen op tpexport reads it as, parameters and persistent buffers as
 * weights and the other state as constants (raw payloads with their
 * configs), the example inputs as a torch.save file. The top folder is the
 * file's base name (up to its first '.') when that is a plain name, else
 * "archive". User-input dims follow the dim rules (sympy expressions with
 * the example sizes as hints); other values' dims are expressions where
 * inferring the graph at other sizes shows an affine form of one symbol or
 * a product of two, else their example sizes. Errors: TP_ERR_UNSUPPORTED naming a node whose op has no ATen
 * counterpart tpexport writes, a get_attr node, a non-tensor input or a
 * custom object; TP_ERR_IO; TP_ERR_NOMEM. Written atomically as
 * tp_archive_save. */
TP_API tp_status tp_archive_save_torch(const char *path, const tp_archive_entry *programs, int n_programs);
/* Same into a new buffer (caller frees *data with tp_free); top folder "archive". */
TP_API tp_status tp_archive_save_torch_buffer(const tp_archive_entry *programs, int n_programs, void **data,
                                              size_t *size);

/* ---- verifying ----------------------------------------------------------- */

/* Check an archive completely, collecting every problem instead of stopping
 * at the first: TP_OK, or the first problem's status with a message listing
 * all of them, one per line. */
TP_API tp_status tp_archive_verify(const char *path, const tp_load_options *opts);
TP_API tp_status tp_archive_verify_buffer(const void *data, size_t size, const tp_load_options *opts);

#ifdef __cplusplus
}
#endif
#endif
