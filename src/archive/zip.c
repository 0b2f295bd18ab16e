/*
 * zip.c - a bounded ZIP reader and an aligned ZIP writer (see zip.h).
 *
 * Byte layout used here (PKWARE APPNOTE 6.3, all integers little-endian):
 *
 *   local file header (30 bytes + name + extra), then the member's data
 *     0 sig 0x04034b50 | 4 version needed | 6 flags | 8 method | 10 time
 *     12 date | 14 crc32 | 18 comp size | 22 size | 26 name len | 28 extra len
 *   [data descriptor, when flag bit 3 is set: sizes live in the central dir]
 *   central directory header (46 bytes + name + extra + comment), per member
 *     0 sig 0x02014b50 | 4 version made by | 6 version needed | 8 flags
 *     10 method | 12 time | 14 date | 16 crc32 | 20 comp size | 24 size
 *     28 name len | 30 extra len | 32 comment len | 34 disk start
 *     36 internal attrs | 38 external attrs | 42 local header offset
 *   ZIP64 end of central directory record (56 bytes), when needed
 *     0 sig 0x06064b50 | 4 record size - 12 | 12 version made by
 *     14 version needed | 16 disk | 20 disk with cd | 24 entries on disk
 *     32 entries | 40 cd size | 48 cd offset
 *   ZIP64 end of central directory locator (20 bytes)
 *     0 sig 0x07064b50 | 4 disk with zip64 record | 8 zip64 record offset
 *     16 total disks
 *   end of central directory record (22 bytes + comment)
 *     0 sig 0x06054b50 | 4 disk | 6 disk with cd | 8 entries on disk
 *     10 entries | 12 cd size | 16 cd offset | 20 comment len
 *
 * Extra fields are (id u16, size u16, data) triples. ZIP64 (id 0x0001) holds,
 * in this order and only for the header fields that are 0xFFFFFFFF: size,
 * comp size, local header offset (u64 each), disk start (u32). The writer
 * pads local headers with an alignment field (id 0xD935, as Android's
 * zipalign: u16 alignment then zero bytes) so stored data starts at a
 * multiple of 64.
 *
 * The reader trusts nothing: every count, offset and length is checked with
 * overflow-safe arithmetic before it is used, allocations are bounded by the
 * image size (or by max_ratio times a compressed size), members may not
 * overlap each other or the central directory, and all of zlib's memory
 * goes through tp_malloc.
 */
#include "zip.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_ZIP64_EOCD 0x06064b50u
#define SIG_ZIP64_LOCATOR 0x07064b50u

#define LOCAL_SIZE 30u
#define CENTRAL_SIZE 46u
#define EOCD_SIZE 22u
#define ZIP64_EOCD_SIZE 56u
#define ZIP64_LOCATOR_SIZE 20u
#define EOCD_SEARCH (EOCD_SIZE + 0xFFFFu) /* 65557: record + longest comment */

#define EXTRA_ZIP64 0x0001u
#define EXTRA_ALIGN 0xD935u
#define ALIGNMENT 64u

#define FLAG_ENCRYPTED 0x0001u
#define FLAG_DESCRIPTOR 0x0008u
#define FLAG_STRONG_ENCRYPTION 0x0040u
#define FLAG_UTF8 0x0800u

#define METHOD_STORED 0u
#define METHOD_DEFLATED 8u

#define U16_MAX 0xFFFFu
#define U32_MAX 0xFFFFFFFFu

/* DOS date of 1980-01-01 (year-1980 << 9 | month << 5 | day), time 00:00. */
#define FIXED_DOS_DATE ((0u << 9) | (1u << 5) | 1u)
#define FIXED_DOS_TIME 0u
/* Unix (3) host, spec version 2.0 / 4.5; regular file rw-r--r--. */
#define VERSION_DEFAULT 20u
#define VERSION_ZIP64 45u
#define MADE_BY_UNIX (3u << 8)
#define EXTERNAL_ATTRS (0100644u << 16)

tp_zip_limits tp__zip_default_limits(void) {
    tp_zip_limits l;
    l.max_member_size = (uint64_t)8 << 30;
    l.max_total_size = (uint64_t)64 << 30;
    l.max_members = 1u << 20;
    l.max_ratio = 1000;
    return l;
}

/* ---- little-endian access ---------------------------------------------- */

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }

static unsigned char *wr16(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    return p + 2;
}
static unsigned char *wr32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
    return p + 4;
}
static unsigned char *wr64(unsigned char *p, uint64_t v) {
    wr32(p, (uint32_t)v);
    return wr32(p + 4, (uint32_t)(v >> 32));
}

/* a + b <= limit, without overflow. */
static bool fits(uint64_t a, uint64_t b, uint64_t limit) { return a <= limit && b <= limit - a; }

/* ---- shared helpers ---------------------------------------------------- */

uint32_t tp__crc32(uint32_t crc, const void *data, size_t size) {
    const unsigned char *p = data;
    uLong c = crc;
    while (size > 0) {
        uInt chunk = size > UINT_MAX ? UINT_MAX : (uInt)size;
        c = crc32(c, p, chunk);
        p += chunk;
        size -= chunk;
    }
    return (uint32_t)c;
}

/* zlib's allocator hooks: everything through tp_malloc. */
static voidpf zip_zalloc(voidpf opaque, uInt items, uInt size) {
    TP_UNUSED(opaque);
    size_t total;
    if (!tp_mul_size(items, size, &total)) return Z_NULL;
    return tp_malloc(total);
}
static void zip_zfree(voidpf opaque, voidpf p) {
    TP_UNUSED(opaque);
    tp_free(p);
}

/* FNV-1a, for the name tables. */
static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* A printable form of a (possibly hostile) name for messages: non-printable
 * bytes as \xNN, cut at ~100 characters. */
static const char *show_name(const char *name, size_t len, char *buf, size_t size) {
    size_t o = 0;
    for (size_t i = 0; i < len && o + 8 < size; i++) {
        unsigned char c = (unsigned char)name[i];
        if (o > 100) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (c >= 0x20 && c < 0x7F && c != '\\') {
            buf[o++] = (char)c;
        } else {
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
        }
    }
    buf[o] = '\0';
    return buf;
}

/* Why a member name is unsafe, or NULL when it is fine: empty, NUL bytes,
 * absolute ("/x", "\x", "C:x"), or a ".." component (either separator). */
static const char *name_problem(const char *name, size_t len) {
    if (len == 0) return "empty name";
    if (memchr(name, '\0', len)) return "name contains a NUL byte";
    if (name[0] == '/' || name[0] == '\\') return "absolute path";
    if (len >= 2 && name[1] == ':' &&
        ((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z')))
        return "absolute path (drive letter)";
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || name[i] == '/' || name[i] == '\\') {
            if (i - start == 2 && name[start] == '.' && name[start + 1] == '.') return "'..' path component";
            start = i + 1;
        }
    }
    return NULL;
}

/* An open-addressing table of member indices keyed by name (power-of-two
 * size, -1 = empty). Returns the slot holding `name`, or the empty slot
 * where it would go. */
static size_t table_slot(const int32_t *table, size_t mask, const char *name, const void *base, size_t stride) {
    size_t i = (size_t)hash_name(name) & mask;
    for (;;) {
        int32_t k = table[i];
        if (k < 0) return i;
        const char *other = *(const char *const *)((const char *)base + (size_t)k * stride);
        if (strcmp(other, name) == 0) return i;
        i = (i + 1) & mask;
    }
}

/* Table size for n entries: a power of two >= 2n (at least 8). */
static bool table_size_for(size_t n, size_t *out) {
    size_t s = 8;
    while (s / 2 < n) {
        if (s > SIZE_MAX / 2) return false;
        s *= 2;
    }
    *out = s;
    return true;
}

/* ---- reader ------------------------------------------------------------ */

typedef struct zip_item {
    tp_zip_entry pub;       /* first: table_slot reads pub.name through it */
    uint64_t header_offset; /* local header */
    uint16_t flags;
} zip_item;

struct tp_zip_reader {
    const unsigned char *data;
    size_t size;
    tp_zip_limits limits;
    int count;
    zip_item *items;
    char *names;      /* all names, NUL-terminated, back to back */
    int32_t *table;   /* name -> index */
    size_t table_mask;
};

void tp__zip_close(tp_zip_reader *r) {
    if (!r) return;
    tp_free(r->items);
    tp_free(r->names);
    tp_free(r->table);
    tp_free(r);
}

int tp__zip_count(const tp_zip_reader *r) { return r ? r->count : 0; }

const tp_zip_entry *tp__zip_entry(const tp_zip_reader *r, int i) {
    if (!r || i < 0 || i >= r->count) return NULL;
    return &r->items[i].pub;
}

int tp__zip_find(const tp_zip_reader *r, const char *name) {
    if (!r || !name || !r->table) return -1;
    size_t slot = table_slot(r->table, r->table_mask, name, r->items, sizeof(zip_item));
    return r->table[slot];
}

/* The end records, as found. */
typedef struct zip_end {
    uint64_t entries, cd_size, cd_offset;
    uint64_t cd_limit; /* the central directory must end at or before this */
} zip_end;

/* Find the end of central directory record: the last signature in the final
 * 65557 bytes whose comment stays inside the file. */
static tp_status find_eocd(const unsigned char *d, size_t size, size_t *out) {
    TP_CHECK(size >= EOCD_SIZE, TP_ERR_CORRUPT,
             "zip: file too short (%zu bytes) for an end of central directory record", size);
    size_t lowest = size > EOCD_SEARCH ? size - EOCD_SEARCH : 0;
    bool truncated = false, comment_past_end = false;
    uint32_t bad_comment_len = 0;
    for (size_t p = size - 4 + 1; p-- > lowest;) {
        if (rd32(d + p) != SIG_EOCD) continue;
        if (size - p < EOCD_SIZE) {
            truncated = true;
            continue;
        }
        uint32_t comment_len = rd16(d + p + 20);
        if (comment_len > size - p - EOCD_SIZE) {
            if (!comment_past_end) bad_comment_len = comment_len;
            comment_past_end = true;
            continue;
        }
        *out = p;
        return TP_OK;
    }
    TP_CHECK(!comment_past_end, TP_ERR_CORRUPT,
             "zip: end of central directory comment length %" PRIu32 " runs past the end of the file",
             bad_comment_len);
    TP_CHECK(!truncated, TP_ERR_CORRUPT, "zip: end of central directory record truncated");
    return tp_error(TP_ERR_CORRUPT, "zip: no end of central directory record (not a zip file)");
}

static tp_status read_end_records(const unsigned char *d, size_t size, zip_end *end) {
    size_t eocd = 0;
    TP_TRY(find_eocd(d, size, &eocd));
    const unsigned char *e = d + eocd;
    uint32_t disk = rd16(e + 4), cd_disk = rd16(e + 6);
    uint64_t on_disk = rd16(e + 8);
    end->entries = rd16(e + 10);
    end->cd_size = rd32(e + 12);
    end->cd_offset = rd32(e + 16);
    end->cd_limit = eocd;

    if (eocd >= ZIP64_LOCATOR_SIZE && rd32(d + eocd - ZIP64_LOCATOR_SIZE) == SIG_ZIP64_LOCATOR) {
        size_t loc = eocd - ZIP64_LOCATOR_SIZE;
        const unsigned char *l = d + loc;
        uint32_t record_disk = rd32(l + 4), total_disks = rd32(l + 16);
        uint64_t rec = rd64(l + 8);
        TP_CHECK(record_disk == 0 && total_disks <= 1, TP_ERR_UNSUPPORTED,
                 "zip: multi-disk (split) archives are not supported (zip64 locator: %" PRIu32 " disks)",
                 total_disks);
        TP_CHECK(fits(rec, ZIP64_EOCD_SIZE, loc), TP_ERR_CORRUPT,
                 "zip: zip64 end of central directory record at offset %" PRIu64
                 " truncated (the locator is at %zu)",
                 rec, loc);
        const unsigned char *z = d + rec;
        TP_CHECK(rd32(z) == SIG_ZIP64_EOCD, TP_ERR_CORRUPT,
                 "zip: bad zip64 end of central directory signature at offset %" PRIu64, rec);
        uint64_t rec_size = rd64(z + 4);
        TP_CHECK(rec_size >= ZIP64_EOCD_SIZE - 12 && fits(rec + 12, rec_size, loc), TP_ERR_CORRUPT,
                 "zip: zip64 end of central directory record size %" PRIu64 " is invalid", rec_size);
        disk = rd32(z + 16);
        cd_disk = rd32(z + 20);
        on_disk = rd64(z + 24);
        end->entries = rd64(z + 32);
        end->cd_size = rd64(z + 40);
        end->cd_offset = rd64(z + 48);
        end->cd_limit = rec;
    }
    TP_CHECK(disk == 0 && cd_disk == 0 && on_disk == end->entries, TP_ERR_UNSUPPORTED,
             "zip: multi-disk (split) archives are not supported (disk %" PRIu32 ", central directory on disk %" PRIu32
             ")",
             disk, cd_disk);
    TP_CHECK(fits(end->cd_offset, end->cd_size, end->cd_limit), TP_ERR_CORRUPT,
             "zip: central directory (offset %" PRIu64 ", size %" PRIu64 ") runs past the end record at offset %" PRIu64,
             end->cd_offset, end->cd_size, end->cd_limit);
    return TP_OK;
}

/* Parse an entry's extra fields for ZIP64 values; fields of the header that
 * are 0xFFFFFFFF are replaced from the 0x0001 field. */
static tp_status parse_central_extra(const unsigned char *x, size_t len, const char *shown, uint64_t *size,
                                     uint64_t *comp_size, uint64_t *offset) {
    bool need_size = *size == U32_MAX, need_comp = *comp_size == U32_MAX, need_off = *offset == U32_MAX;
    bool found = false;
    size_t p = 0;
    while (len - p >= 4) {
        uint32_t id = rd16(x + p), n = rd16(x + p + 2);
        TP_CHECK(n <= len - p - 4, TP_ERR_CORRUPT,
                 "zip: member '%s': extra field 0x%04" PRIx32 " (size %" PRIu32 ") runs past the extra data", shown, id,
                 n);
        if (id == EXTRA_ZIP64 && !found) {
            found = true;
            const unsigned char *f = x + p + 4;
            uint32_t have = n, at = 0;
            if (need_size) {
                TP_CHECK(have - at >= 8, TP_ERR_CORRUPT, "zip: member '%s': zip64 extra field lacks the size", shown);
                *size = rd64(f + at);
                at += 8;
            }
            if (need_comp) {
                TP_CHECK(have - at >= 8, TP_ERR_CORRUPT,
                         "zip: member '%s': zip64 extra field lacks the compressed size", shown);
                *comp_size = rd64(f + at);
                at += 8;
            }
            if (need_off) {
                TP_CHECK(have - at >= 8, TP_ERR_CORRUPT,
                         "zip: member '%s': zip64 extra field lacks the local header offset", shown);
                *offset = rd64(f + at);
                at += 8;
            }
        }
        p += 4 + (size_t)n;
    }
    TP_CHECK(found || !(need_size || need_comp || need_off), TP_ERR_CORRUPT,
             "zip: member '%s': sizes or offset are 0xFFFFFFFF but there is no zip64 extra field", shown);
    return TP_OK;
}

/* Check the local header of item i and set its data offset. */
static tp_status check_local_header(const tp_zip_reader *r, zip_item *it, uint16_t method, const char *shown,
                                    uint64_t cd_offset) {
    const unsigned char *d = r->data;
    uint64_t off = it->header_offset;
    TP_CHECK(fits(off, LOCAL_SIZE, r->size), TP_ERR_CORRUPT,
             "zip: member '%s': local header offset %" PRIu64 " runs past the end of the file (%zu bytes)", shown, off,
             r->size);
    const unsigned char *h = d + off;
    TP_CHECK(rd32(h) == SIG_LOCAL, TP_ERR_CORRUPT,
             "zip: member '%s': bad local header signature at offset %" PRIu64, shown, off);
    uint32_t name_len = rd16(h + 26), extra_len = rd16(h + 28);
    uint64_t data_off = off + LOCAL_SIZE + name_len + extra_len; /* < 2^64: off + 30 <= size */
    TP_CHECK(data_off <= r->size, TP_ERR_CORRUPT,
             "zip: member '%s': local header name length %" PRIu32 " and extra length %" PRIu32
             " run past the end of the file",
             shown, name_len, extra_len);
    size_t central_len = strlen(it->pub.name);
    if (name_len != central_len || memcmp(h + LOCAL_SIZE, it->pub.name, central_len) != 0) {
        char local[160];
        return tp_error(TP_ERR_CORRUPT, "zip: member '%s': local header name '%s' differs from the central directory",
                        shown, show_name((const char *)h + LOCAL_SIZE, name_len, local, sizeof local));
    }
    uint32_t local_method = rd16(h + 8);
    TP_CHECK(local_method == method, TP_ERR_CORRUPT,
             "zip: member '%s': local header method %" PRIu32 " differs from the central directory's %u", shown,
             local_method, (unsigned)method);
    TP_CHECK(fits(data_off, it->pub.comp_size, r->size), TP_ERR_CORRUPT,
             "zip: member '%s': data (offset %" PRIu64 ", compressed size %" PRIu64
             ") runs past the end of the file (%zu bytes)",
             shown, data_off, it->pub.comp_size, r->size);
    TP_CHECK(fits(data_off, it->pub.comp_size, cd_offset), TP_ERR_CORRUPT,
             "zip: member '%s': data (offset %" PRIu64 ", compressed size %" PRIu64
             ") overlaps the central directory at offset %" PRIu64,
             shown, data_off, it->pub.comp_size, cd_offset);
    it->pub.data_offset = data_off;
    return TP_OK;
}

/* Parse central directory entry i at *pos (inside [.., cd_end)). */
static tp_status parse_entry(tp_zip_reader *r, int i, size_t *pos, size_t cd_end, const zip_end *end,
                             size_t *names_used, uint64_t *total) {
    const unsigned char *d = r->data;
    size_t p = *pos;
    TP_CHECK(p < cd_end, TP_ERR_CORRUPT,
             "zip: entry count: the end record declares %" PRIu64 " entries but the central directory holds %d",
             end->entries, i);
    TP_CHECK(cd_end - p >= CENTRAL_SIZE, TP_ERR_CORRUPT, "zip: central directory entry %d truncated", i);
    const unsigned char *c = d + p;
    TP_CHECK(rd32(c) == SIG_CENTRAL, TP_ERR_CORRUPT,
             "zip: central directory entry %d: bad signature 0x%08" PRIx32 " at offset %zu", i, rd32(c), p);
    uint16_t flags = rd16(c + 8), method = rd16(c + 10);
    uint32_t crc = rd32(c + 16);
    uint64_t comp_size = rd32(c + 20), size = rd32(c + 24);
    size_t name_len = rd16(c + 28), extra_len = rd16(c + 30), comment_len = rd16(c + 32);
    uint64_t header_offset = rd32(c + 42);
    TP_CHECK(name_len + extra_len + comment_len <= cd_end - p - CENTRAL_SIZE, TP_ERR_CORRUPT,
             "zip: central directory entry %d: name length %zu, extra length %zu and comment length %zu run past "
             "the end of the central directory",
             i, name_len, extra_len, comment_len);
    const char *raw_name = (const char *)c + CENTRAL_SIZE;
    char shown[160];
    show_name(raw_name, name_len, shown, sizeof shown);
    const char *problem = name_problem(raw_name, name_len);
    TP_CHECK(!problem, TP_ERR_CORRUPT, "zip: central directory entry %d: unsafe member name '%s': %s", i, shown,
             problem);

    zip_item *it = &r->items[i];
    char *name = r->names + *names_used;
    memcpy(name, raw_name, name_len);
    name[name_len] = '\0';
    *names_used += name_len + 1;
    it->pub.name = name;
    it->flags = flags;
    it->pub.method = method;
    it->pub.crc32 = crc;

    size_t slot = table_slot(r->table, r->table_mask, name, r->items, sizeof(zip_item));
    TP_CHECK(r->table[slot] < 0, TP_ERR_CORRUPT, "zip: duplicate member '%s'", shown);
    r->table[slot] = i;

    TP_CHECK(!(flags & (FLAG_ENCRYPTED | FLAG_STRONG_ENCRYPTION)), TP_ERR_UNSUPPORTED,
             "zip: member '%s' is encrypted (flags 0x%04x)", shown, (unsigned)flags);
    TP_CHECK(method == METHOD_STORED || method == METHOD_DEFLATED, TP_ERR_UNSUPPORTED,
             "zip: member '%s': compression method %u is not supported (only 0 stored and 8 deflated)", shown,
             (unsigned)method);
    TP_TRY(parse_central_extra(c + CENTRAL_SIZE + name_len, extra_len, shown, &size, &comp_size, &header_offset));
    it->pub.size = size;
    it->pub.comp_size = comp_size;
    it->header_offset = header_offset;

    if (method == METHOD_STORED) {
        TP_CHECK(size == comp_size, TP_ERR_CORRUPT,
                 "zip: stored member '%s': size %" PRIu64 " differs from compressed size %" PRIu64, shown, size,
                 comp_size);
    } else {
        uint64_t cap;
        bool overflow = __builtin_mul_overflow((uint64_t)r->limits.max_ratio, comp_size, &cap);
        TP_CHECK(overflow || size <= cap, TP_ERR_CORRUPT,
                 "zip: member '%s': declared size %" PRIu64 " exceeds %" PRIu32 " times its compressed size %" PRIu64
                 " (compression bomb?)",
                 shown, size, r->limits.max_ratio, comp_size);
    }
    TP_CHECK(size <= r->limits.max_member_size, TP_ERR_UNSUPPORTED,
             "zip: member '%s': size %" PRIu64 " exceeds the limit of %" PRIu64 " bytes", shown, size,
             r->limits.max_member_size);
    TP_CHECK(fits(*total, size, r->limits.max_total_size), TP_ERR_UNSUPPORTED,
             "zip: member '%s': total uncompressed size exceeds the limit of %" PRIu64 " bytes", shown,
             r->limits.max_total_size);
    *total += size;
    TP_TRY(check_local_header(r, it, method, shown, end->cd_offset));
    *pos = p + CENTRAL_SIZE + name_len + extra_len + comment_len;
    return TP_OK;
}

/* Members' [local header, data end) ranges must not overlap (overlapping
 * members are a zip-bomb technique): sort member indices by local header
 * offset (a bottom-up merge sort, stable and without global state) and
 * compare neighbours. */
static tp_status check_overlaps(const tp_zip_reader *r) {
    if (r->count < 2) return TP_OK;
    int32_t *order = tp_malloc((size_t)r->count * sizeof *order);
    TP_CHECK(order, TP_ERR_NOMEM, "zip: out of memory sorting %d members", r->count);
    for (int i = 0; i < r->count; i++) order[i] = i;
    int32_t *tmp = tp_malloc((size_t)r->count * sizeof *tmp);
    if (!tmp) {
        tp_free(order);
        return tp_error(TP_ERR_NOMEM, "zip: out of memory sorting %d members", r->count);
    }
    for (int width = 1; width < r->count; width *= 2) {
        for (int lo = 0; lo < r->count; lo += 2 * width) {
            int mid = lo + width < r->count ? lo + width : r->count;
            int hi = lo + 2 * width < r->count ? lo + 2 * width : r->count;
            int a = lo, b = mid, o = lo;
            while (a < mid && b < hi)
                tmp[o++] = r->items[order[b]].header_offset < r->items[order[a]].header_offset ? order[b++] : order[a++];
            while (a < mid) tmp[o++] = order[a++];
            while (b < hi) tmp[o++] = order[b++];
        }
        int32_t *swap = order;
        order = tmp;
        tmp = swap;
    }
    tp_free(tmp);
    tp_status st = TP_OK;
    for (int k = 0; k + 1 < r->count; k++) {
        const zip_item *a = &r->items[order[k]], *b = &r->items[order[k + 1]];
        uint64_t a_end = a->pub.data_offset + a->pub.comp_size; /* checked <= size */
        if (a_end > b->header_offset) {
            char sa[160], sb[160];
            st = tp_error(TP_ERR_CORRUPT,
                          "zip: member '%s' (local header at offset %" PRIu64 ") overlaps member '%s' (ends at %" PRIu64
                          ")",
                          show_name(b->pub.name, strlen(b->pub.name), sb, sizeof sb), b->header_offset,
                          show_name(a->pub.name, strlen(a->pub.name), sa, sizeof sa), a_end);
            break;
        }
    }
    tp_free(order);
    return st;
}

tp_status tp__zip_open(const void *data, size_t size, const tp_zip_limits *limits, tp_zip_reader **out) {
    TP_CHECK(out, TP_ERR_INVALID_ARG, "zip: out is NULL");
    *out = NULL;
    TP_CHECK(data || size == 0, TP_ERR_INVALID_ARG, "zip: data is NULL");
    const unsigned char *d = size ? data : (const unsigned char *)"";
    zip_end end;
    TP_TRY(read_end_records(d, size, &end));
    tp_zip_limits lim = limits ? *limits : tp__zip_default_limits();
    TP_CHECK(end.entries <= lim.max_members && end.entries <= INT32_MAX, TP_ERR_UNSUPPORTED,
             "zip: member count %" PRIu64 " exceeds the limit of %" PRIu32, end.entries, lim.max_members);
    TP_CHECK(end.entries <= end.cd_size / CENTRAL_SIZE, TP_ERR_CORRUPT,
             "zip: entry count %" PRIu64 " in the end record does not fit a central directory of %" PRIu64 " bytes",
             end.entries, end.cd_size);

    /* Everything below is bounded by the central directory's size. */
    size_t n = (size_t)end.entries, table_size;
    TP_CHECK(table_size_for(n, &table_size), TP_ERR_NOMEM, "zip: too many members");
    tp_zip_reader *r = tp_calloc(1, sizeof *r);
    TP_CHECK(r, TP_ERR_NOMEM, "zip: out of memory");
    r->data = d;
    r->size = size;
    r->limits = lim;
    r->items = tp_calloc(n, sizeof *r->items);
    r->names = tp_malloc((size_t)end.cd_size + n);
    r->table = tp_malloc(table_size * sizeof *r->table);
    if (!r->items || !r->names || !r->table) {
        tp__zip_close(r);
        return tp_error(TP_ERR_NOMEM, "zip: out of memory for %zu members", n);
    }
    r->table_mask = table_size - 1;
    for (size_t k = 0; k < table_size; k++) r->table[k] = -1;

    size_t pos = (size_t)end.cd_offset, cd_end = (size_t)(end.cd_offset + end.cd_size), names_used = 0;
    uint64_t total = 0;
    tp_status st = TP_OK;
    for (size_t i = 0; i < n && st == TP_OK; i++) {
        st = parse_entry(r, (int)i, &pos, cd_end, &end, &names_used, &total);
        r->count = (int)i + 1;
    }
    if (st == TP_OK && pos != cd_end)
        st = tp_error(TP_ERR_CORRUPT,
                      "zip: entry count: the end record declares %" PRIu64
                      " entries but the central directory has %zu more bytes",
                      end.entries, cd_end - pos);
    if (st == TP_OK) st = check_overlaps(r);
    if (st != TP_OK) {
        tp__zip_close(r);
        return st;
    }
    *out = r;
    return TP_OK;
}

/* Inflate item it (raw deflate) into out[0..size). */
static tp_status inflate_member(const zip_item *it, const unsigned char *in, unsigned char *out, const char *shown) {
    uint64_t size = it->pub.size, comp = it->pub.comp_size;
    if (size == 0 && comp == 0) return TP_OK; /* some writers store an empty deflated member so */
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    zs.zalloc = zip_zalloc;
    zs.zfree = zip_zfree;
    int ret = inflateInit2(&zs, -15);
    if (ret != Z_OK)
        return tp_error(ret == Z_MEM_ERROR ? TP_ERR_NOMEM : TP_ERR_INTERNAL, "zip: member '%s': inflateInit failed (%d)",
                        shown, ret);
    uint64_t in_left = comp, out_left = size;
    unsigned char spill;
    bool spilling = false; /* out is full: one more byte means too long */
    tp_status st = TP_OK;
    for (;;) {
        if (zs.avail_in == 0 && in_left > 0) {
            uInt chunk = in_left > UINT_MAX ? UINT_MAX : (uInt)in_left;
            zs.next_in = (Bytef *)(uintptr_t)in;
            zs.avail_in = chunk;
            in += chunk;
            in_left -= chunk;
        }
        if (zs.avail_out == 0) {
            if (out_left > 0) {
                uInt chunk = out_left > UINT_MAX ? UINT_MAX : (uInt)out_left;
                zs.next_out = out;
                zs.avail_out = chunk;
                out += chunk;
                out_left -= chunk;
            } else if (!spilling) {
                spilling = true;
                zs.next_out = &spill;
                zs.avail_out = 1;
            } else {
                break; /* the spill byte was written */
            }
        }
        ret = inflate(&zs, Z_NO_FLUSH);
        if (ret == Z_STREAM_END) break;
        if (ret == Z_OK) continue;
        if (ret == Z_BUF_ERROR && zs.avail_in == 0 && in_left == 0) {
            st = tp_error(TP_ERR_CORRUPT,
                          "zip: member '%s': deflate stream ends early (%" PRIu64 " compressed bytes, %" PRIu64
                          " of %" PRIu64 " bytes inflated)",
                          shown, comp, (uint64_t)zs.total_out, size);
            break;
        }
        if (ret == Z_BUF_ERROR) continue; /* output full: the loop gives more room or spills */
        if (ret == Z_MEM_ERROR) {
            st = tp_error(TP_ERR_NOMEM, "zip: member '%s': out of memory inflating", shown);
        } else {
            st = tp_error(TP_ERR_CORRUPT, "zip: member '%s': deflate stream corrupt (%s)", shown,
                          zs.msg ? zs.msg : "invalid data");
        }
        break;
    }
    if (st == TP_OK) {
        if (spilling && zs.avail_out == 0) {
            st = tp_error(TP_ERR_CORRUPT,
                          "zip: member '%s': inflated size does not match declared %" PRIu64 " (the stream holds more)",
                          shown, size);
        } else if ((uint64_t)zs.total_out != size) {
            st = tp_error(TP_ERR_CORRUPT, "zip: member '%s': inflated size %" PRIu64 " does not match declared %" PRIu64,
                          shown, (uint64_t)zs.total_out, size);
        } else if ((uint64_t)zs.total_in != comp) {
            st = tp_error(TP_ERR_CORRUPT,
                          "zip: member '%s': deflate stream ends after %" PRIu64 " of %" PRIu64 " compressed bytes",
                          shown, (uint64_t)zs.total_in, comp);
        }
    }
    inflateEnd(&zs);
    return st;
}

static tp_status check_crc(const zip_item *it, const void *data, size_t size, const char *shown) {
    uint32_t crc = tp__crc32(0, data, size);
    TP_CHECK(crc == it->pub.crc32, TP_ERR_CORRUPT,
             "zip: member '%s': CRC-32 mismatch (computed 0x%08" PRIx32 ", declared 0x%08" PRIx32 ")", shown, crc,
             it->pub.crc32);
    return TP_OK;
}

tp_status tp__zip_read(const tp_zip_reader *r, int i, void **data, size_t *size) {
    TP_CHECK(data && size, TP_ERR_INVALID_ARG, "zip: data or size is NULL");
    *data = NULL;
    *size = 0;
    TP_CHECK(r, TP_ERR_INVALID_ARG, "zip: reader is NULL");
    TP_CHECK(i >= 0 && i < r->count, TP_ERR_INDEX, "zip: member index %d out of range (%d members)", i, r->count);
    const zip_item *it = &r->items[i];
    char shown[160];
    show_name(it->pub.name, strlen(it->pub.name), shown, sizeof shown);
    TP_CHECK(it->pub.size < SIZE_MAX, TP_ERR_NOMEM, "zip: member '%s' is too large (%" PRIu64 " bytes)", shown,
             it->pub.size);
    size_t n = (size_t)it->pub.size;
    unsigned char *buf = tp_malloc(n + 1);
    TP_CHECK(buf, TP_ERR_NOMEM, "zip: member '%s': out of memory for %zu bytes", shown, n);
    const unsigned char *src = r->data + it->pub.data_offset;
    tp_status st;
    if (it->pub.method == METHOD_STORED) {
        if (n) memcpy(buf, src, n);
        st = TP_OK;
    } else {
        st = inflate_member(it, src, buf, shown);
    }
    if (st == TP_OK) st = check_crc(it, buf, n, shown);
    if (st != TP_OK) {
        tp_free(buf);
        return st;
    }
    buf[n] = '\0';
    *data = buf;
    *size = n;
    return TP_OK;
}

tp_status tp__zip_stored(const tp_zip_reader *r, int i, bool check, const void **data, size_t *size) {
    TP_CHECK(data && size, TP_ERR_INVALID_ARG, "zip: data or size is NULL");
    *data = NULL;
    *size = 0;
    TP_CHECK(r, TP_ERR_INVALID_ARG, "zip: reader is NULL");
    TP_CHECK(i >= 0 && i < r->count, TP_ERR_INDEX, "zip: member index %d out of range (%d members)", i, r->count);
    const zip_item *it = &r->items[i];
    char shown[160];
    show_name(it->pub.name, strlen(it->pub.name), shown, sizeof shown);
    TP_CHECK(it->pub.method == METHOD_STORED, TP_ERR_UNSUPPORTED,
             "zip: member '%s' is compressed (method %u): it cannot be used in place", shown, (unsigned)it->pub.method);
    const unsigned char *p = r->data + it->pub.data_offset;
    size_t n = (size_t)it->pub.size; /* stored: == comp_size, inside the image */
    if (check) TP_TRY(check_crc(it, p, n, shown));
    *data = p;
    *size = n;
    return TP_OK;
}

/* ---- writer ------------------------------------------------------------ */

typedef struct zip_out_entry {
    char *name; /* first: table_slot reads it through the entry */
    uint64_t header_offset, size, comp_size;
    uint32_t crc;
    uint16_t method, flags;
} zip_out_entry;

struct tp_zip_writer {
    tp_zip_sink_fn sink;  /* NULL: the memory buffer below */
    void *sink_ctx;
    uint64_t offset;      /* bytes emitted so far (the next member's offset) */
    tp_status failed;     /* TP_OK, or the status of the first emit that failed */
    unsigned char *buf;   /* memory writer: the archive so far (len == offset) */
    size_t len, cap;
    zip_out_entry *entries;
    size_t count, entries_cap;
    int32_t *table;
    size_t table_mask; /* table size - 1; 0 = no table yet */
    bool force_zip64;
};

tp_status tp__zip_writer_new(tp_zip_writer **out) {
    TP_CHECK(out, TP_ERR_INVALID_ARG, "zip: out is NULL");
    *out = tp_calloc(1, sizeof **out);
    TP_CHECK(*out, TP_ERR_NOMEM, "zip: out of memory");
    return TP_OK;
}

tp_status tp__zip_writer_new_sink(tp_zip_sink_fn sink, void *ctx, tp_zip_writer **out) {
    TP_CHECK(out, TP_ERR_INVALID_ARG, "zip: out is NULL");
    *out = NULL;
    TP_CHECK(sink, TP_ERR_INVALID_ARG, "zip: sink is NULL");
    TP_TRY(tp__zip_writer_new(out));
    (*out)->sink = sink;
    (*out)->sink_ctx = ctx;
    return TP_OK;
}

void tp__zip_writer_free(tp_zip_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->count; i++) tp_free(w->entries[i].name);
    tp_free(w->entries);
    tp_free(w->table);
    tp_free(w->buf);
    tp_free(w);
}

void tp__zip_writer_force_zip64(tp_zip_writer *w, bool on) {
    if (w) w->force_zip64 = on;
}

uint64_t tp__zip_writer_offset(const tp_zip_writer *w) { return w ? w->offset : 0; }

bool tp__zip_has(const tp_zip_writer *w, const char *name) {
    if (!w || !name || !w->table) return false;
    return w->table[table_slot(w->table, w->table_mask, name, w->entries, sizeof(zip_out_entry))] >= 0;
}

/* Make room for `more` bytes in a memory writer's buffer. */
static tp_status reserve(tp_zip_writer *w, uint64_t more) {
    size_t need;
    TP_CHECK(more <= SIZE_MAX && tp_add_size(w->len, (size_t)more, &need), TP_ERR_NOMEM, "zip: archive too large");
    if (need <= w->cap) return TP_OK;
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    unsigned char *b = tp_realloc(w->buf, cap);
    TP_CHECK(b, TP_ERR_NOMEM, "zip: out of memory growing the archive to %zu bytes", cap);
    w->buf = b;
    w->cap = cap;
    return TP_OK;
}

/* Append bytes to the output: the memory buffer or the sink. A failure is
 * sticky: bytes may be missing, so every later emit fails too. */
static tp_status emit(tp_zip_writer *w, const void *data, size_t size) {
    TP_CHECK(w->failed == TP_OK, w->failed, "zip: an earlier write to the archive failed; it is incomplete");
    if (size == 0) return TP_OK;
    tp_status st;
    if (w->sink) {
        st = w->sink(w->sink_ctx, data, size);
    } else {
        st = reserve(w, size);
        if (st == TP_OK) {
            memcpy(w->buf + w->len, data, size);
            w->len += size;
        }
    }
    if (st != TP_OK) {
        w->failed = st;
        return st;
    }
    w->offset += size;
    return TP_OK;
}

/* Room for one more entry in the entry array and the name table. */
static tp_status reserve_entry(tp_zip_writer *w) {
    if (w->count == w->entries_cap) {
        size_t cap = w->entries_cap ? w->entries_cap * 2 : 16, bytes;
        TP_CHECK(cap <= INT32_MAX && tp_mul_size(cap, sizeof(zip_out_entry), &bytes), TP_ERR_NOMEM,
                 "zip: too many members");
        zip_out_entry *e = tp_realloc(w->entries, bytes);
        TP_CHECK(e, TP_ERR_NOMEM, "zip: out of memory for %zu members", cap);
        w->entries = e;
        w->entries_cap = cap;
    }
    size_t table_size = w->table ? w->table_mask + 1 : 0;
    if ((w->count + 1) * 2 > table_size) {
        size_t size;
        TP_CHECK(table_size_for(w->count + 1, &size), TP_ERR_NOMEM, "zip: too many members");
        int32_t *t = tp_malloc(size * sizeof *t);
        TP_CHECK(t, TP_ERR_NOMEM, "zip: out of memory for the member table");
        for (size_t k = 0; k < size; k++) t[k] = -1;
        for (size_t k = 0; k < w->count; k++)
            t[table_slot(t, size - 1, w->entries[k].name, w->entries, sizeof(zip_out_entry))] = (int32_t)k;
        tp_free(w->table);
        w->table = t;
        w->table_mask = size - 1;
    }
    return TP_OK;
}

/* Raw-deflate data into a new buffer (*out, tp_malloc'd, *out_size bytes). */
static tp_status deflate_data(const void *data, size_t size, unsigned char **out, uint64_t *out_size) {
    *out = NULL;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    zs.zalloc = zip_zalloc;
    zs.zfree = zip_zfree;
    int ret = deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
    if (ret != Z_OK)
        return tp_error(ret == Z_MEM_ERROR ? TP_ERR_NOMEM : TP_ERR_INTERNAL, "zip: deflateInit failed (%d)", ret);
    uLong bound = deflateBound(&zs, (uLong)size);
    unsigned char *buf = bound < SIZE_MAX ? tp_malloc((size_t)bound) : NULL;
    if (!buf) {
        deflateEnd(&zs);
        return tp_error(TP_ERR_NOMEM, "zip: out of memory compressing %zu bytes", size);
    }
    const unsigned char *in = data;
    size_t in_left = size;
    unsigned char *o = buf;
    uint64_t out_left = bound;
    do {
        if (zs.avail_in == 0 && in_left > 0) {
            uInt chunk = in_left > UINT_MAX ? UINT_MAX : (uInt)in_left;
            zs.next_in = (Bytef *)(uintptr_t)in;
            zs.avail_in = chunk;
            in += chunk;
            in_left -= chunk;
        }
        if (zs.avail_out == 0) {
            uInt chunk = out_left > UINT_MAX ? UINT_MAX : (uInt)out_left;
            zs.next_out = o;
            zs.avail_out = chunk;
            o += chunk;
            out_left -= chunk;
        }
        ret = deflate(&zs, in_left > 0 ? Z_NO_FLUSH : Z_FINISH);
    } while (ret == Z_OK || (ret == Z_BUF_ERROR && (out_left > 0 || in_left > 0)));
    uint64_t produced = zs.total_out;
    deflateEnd(&zs);
    if (ret != Z_STREAM_END) {
        tp_free(buf);
        return tp_error(TP_ERR_INTERNAL, "zip: deflate failed (%d)", ret);
    }
    *out = buf;
    *out_size = produced;
    return TP_OK;
}

/* The largest local extra field: zip64 (20) + alignment padding (< 64 + 6). */
#define LOCAL_EXTRA_MAX (20u + ALIGNMENT + 6u)

tp_status tp__zip_add(tp_zip_writer *w, const char *name, const void *data, size_t size, bool deflate) {
    TP_CHECK(w && name, TP_ERR_INVALID_ARG, "zip: writer or name is NULL");
    TP_CHECK(data || size == 0, TP_ERR_INVALID_ARG, "zip: member '%s': data is NULL", name);
    size_t name_len = strlen(name);
    char shown[160];
    show_name(name, name_len, shown, sizeof shown);
    TP_CHECK(name_len <= U16_MAX, TP_ERR_INVALID_ARG, "zip: member name '%s' is too long (%zu bytes)", shown,
             name_len);
    const char *problem = name_problem(name, name_len);
    TP_CHECK(!problem, TP_ERR_INVALID_ARG, "zip: unsafe member name '%s': %s", shown, problem);
    TP_CHECK(!tp__zip_has(w, name), TP_ERR_DUPLICATE, "zip: duplicate member '%s'", shown);
    TP_CHECK(w->failed == TP_OK, w->failed, "zip: member '%s': an earlier write to the archive failed", shown);
    TP_TRY(reserve_entry(w));

    unsigned char *packed = NULL;
    uint64_t comp_size = size;
    if (deflate) TP_TRY(deflate_data(data, size, &packed, &comp_size));
    char *copy = tp_strdup(name);
    if (!copy) {
        tp_free(packed);
        return tp_error(TP_ERR_NOMEM, "zip: out of memory");
    }

    uint16_t flags = 0;
    for (size_t k = 0; k < name_len; k++)
        if ((unsigned char)name[k] >= 0x80) flags = FLAG_UTF8;
    bool zip64 = w->force_zip64 || size >= U32_MAX || comp_size >= U32_MAX;
    uint64_t offset = w->offset;
    uint64_t extra_len = zip64 ? 20 : 0;
    if (!deflate) { /* pad so the data starts at a multiple of 64 */
        uint64_t at = offset + LOCAL_SIZE + name_len + extra_len;
        uint64_t pad = (ALIGNMENT - at % ALIGNMENT) % ALIGNMENT;
        if (pad != 0 && pad < 6) pad += ALIGNMENT; /* the field needs 4 + 2 bytes */
        extra_len += pad;
    }
    /* a memory writer makes room for the whole member first, so running out
     * of memory leaves the buffer as it was */
    tp_status st = w->sink ? TP_OK : reserve(w, LOCAL_SIZE + name_len + extra_len + comp_size);
    if (st != TP_OK) {
        tp_free(packed);
        tp_free(copy);
        return st;
    }
    uint32_t crc = tp__crc32(0, data, size);
    unsigned char head[LOCAL_SIZE], extra[LOCAL_EXTRA_MAX];
    unsigned char *p = head;
    p = wr32(p, SIG_LOCAL);
    p = wr16(p, zip64 ? VERSION_ZIP64 : VERSION_DEFAULT);
    p = wr16(p, flags);
    p = wr16(p, deflate ? METHOD_DEFLATED : METHOD_STORED);
    p = wr16(p, FIXED_DOS_TIME);
    p = wr16(p, FIXED_DOS_DATE);
    p = wr32(p, crc);
    p = wr32(p, zip64 ? U32_MAX : (uint32_t)comp_size);
    p = wr32(p, zip64 ? U32_MAX : (uint32_t)size);
    p = wr16(p, (uint32_t)name_len);
    wr16(p, (uint32_t)extra_len);
    p = extra;
    uint64_t rest = extra_len;
    if (zip64) {
        p = wr16(p, EXTRA_ZIP64);
        p = wr16(p, 16);
        p = wr64(p, size);
        p = wr64(p, comp_size);
        rest -= 20;
    }
    if (rest > 0) {
        p = wr16(p, EXTRA_ALIGN);
        p = wr16(p, (uint32_t)(rest - 4));
        p = wr16(p, ALIGNMENT);
        memset(p, 0, (size_t)rest - 6);
    }
    st = emit(w, head, LOCAL_SIZE);
    if (st == TP_OK) st = emit(w, name, name_len);
    if (st == TP_OK) st = emit(w, extra, (size_t)extra_len);
    if (st == TP_OK) st = emit(w, deflate ? (const void *)packed : data, (size_t)comp_size);
    tp_free(packed);
    if (st != TP_OK) {
        tp_free(copy);
        tp_error_context("zip: member '%s'", shown);
        return st;
    }

    zip_out_entry *e = &w->entries[w->count];
    e->name = copy;
    e->header_offset = offset;
    e->size = size;
    e->comp_size = comp_size;
    e->crc = crc;
    e->method = deflate ? METHOD_DEFLATED : METHOD_STORED;
    e->flags = flags;
    w->table[table_slot(w->table, w->table_mask, copy, w->entries, sizeof(zip_out_entry))] = (int32_t)w->count;
    w->count++;
    return TP_OK;
}

/* Emit the central directory and end records, built in a buffer of their
 * own (its size grows with the member count, not with the data). */
static tp_status write_directory(tp_zip_writer *w) {
    TP_CHECK(w->failed == TP_OK, w->failed, "zip: an earlier write to the archive failed; it is incomplete");
    uint64_t need = EOCD_SIZE + ZIP64_EOCD_SIZE + ZIP64_LOCATOR_SIZE;
    for (size_t i = 0; i < w->count; i++) need += CENTRAL_SIZE + strlen(w->entries[i].name) + 28;
    TP_CHECK(need <= SIZE_MAX, TP_ERR_NOMEM, "zip: central directory too large");
    unsigned char *dir = tp_malloc((size_t)need);
    TP_CHECK(dir, TP_ERR_NOMEM, "zip: out of memory for a %" PRIu64 "-byte central directory", need);
    uint64_t cd_offset = w->offset;
    unsigned char *p = dir;
    for (size_t i = 0; i < w->count; i++) {
        const zip_out_entry *e = &w->entries[i];
        bool big_sizes = w->force_zip64 || e->size >= U32_MAX || e->comp_size >= U32_MAX;
        bool big_offset = w->force_zip64 || e->header_offset >= U32_MAX;
        size_t name_len = strlen(e->name);
        uint32_t extra_len = (big_sizes || big_offset) ? 4u + (big_sizes ? 16u : 0u) + (big_offset ? 8u : 0u) : 0u;
        uint32_t version = (big_sizes || big_offset) ? VERSION_ZIP64 : VERSION_DEFAULT;
        p = wr32(p, SIG_CENTRAL);
        p = wr16(p, MADE_BY_UNIX | version);
        p = wr16(p, version);
        p = wr16(p, e->flags);
        p = wr16(p, e->method);
        p = wr16(p, FIXED_DOS_TIME);
        p = wr16(p, FIXED_DOS_DATE);
        p = wr32(p, e->crc);
        p = wr32(p, big_sizes ? U32_MAX : (uint32_t)e->comp_size);
        p = wr32(p, big_sizes ? U32_MAX : (uint32_t)e->size);
        p = wr16(p, (uint32_t)name_len);
        p = wr16(p, extra_len);
        p = wr16(p, 0); /* comment */
        p = wr16(p, 0); /* disk start */
        p = wr16(p, 0); /* internal attributes */
        p = wr32(p, EXTERNAL_ATTRS);
        p = wr32(p, big_offset ? U32_MAX : (uint32_t)e->header_offset);
        memcpy(p, e->name, name_len);
        p += name_len;
        if (extra_len) {
            p = wr16(p, EXTRA_ZIP64);
            p = wr16(p, extra_len - 4);
            if (big_sizes) {
                p = wr64(p, e->size);
                p = wr64(p, e->comp_size);
            }
            if (big_offset) p = wr64(p, e->header_offset);
        }
    }
    uint64_t cd_size = (uint64_t)(p - dir);
    bool zip64 = w->force_zip64 || w->count >= U16_MAX || cd_size >= U32_MAX || cd_offset >= U32_MAX;
    if (zip64) {
        uint64_t rec = cd_offset + cd_size;
        p = wr32(p, SIG_ZIP64_EOCD);
        p = wr64(p, ZIP64_EOCD_SIZE - 12);
        p = wr16(p, MADE_BY_UNIX | VERSION_ZIP64);
        p = wr16(p, VERSION_ZIP64);
        p = wr32(p, 0);
        p = wr32(p, 0);
        p = wr64(p, w->count);
        p = wr64(p, w->count);
        p = wr64(p, cd_size);
        p = wr64(p, cd_offset);
        p = wr32(p, SIG_ZIP64_LOCATOR);
        p = wr32(p, 0);
        p = wr64(p, rec);
        p = wr32(p, 1);
    }
    p = wr32(p, SIG_EOCD);
    p = wr16(p, 0);
    p = wr16(p, 0);
    p = wr16(p, zip64 && w->count >= U16_MAX ? U16_MAX : (uint32_t)w->count);
    p = wr16(p, zip64 && w->count >= U16_MAX ? U16_MAX : (uint32_t)w->count);
    p = wr32(p, zip64 && cd_size >= U32_MAX ? U32_MAX : (uint32_t)cd_size);
    p = wr32(p, zip64 && (cd_offset >= U32_MAX || w->force_zip64) ? U32_MAX : (uint32_t)cd_offset);
    p = wr16(p, 0); /* comment */
    tp_status st = emit(w, dir, (size_t)(p - dir));
    tp_free(dir);
    if (st != TP_OK) tp_error_context("zip: central directory");
    return st;
}

tp_status tp__zip_finish(tp_zip_writer *w, void **data, size_t *size) {
    if (data) *data = NULL;
    if (size) *size = 0;
    if (!data || !size) {
        tp__zip_writer_free(w);
        return tp_error(TP_ERR_INVALID_ARG, "zip: data or size is NULL");
    }
    TP_CHECK(w, TP_ERR_INVALID_ARG, "zip: writer is NULL");
    if (w->sink) {
        tp__zip_writer_free(w);
        return tp_error(TP_ERR_INVALID_ARG, "zip: the writer streams to a sink: finish it with tp__zip_finish_sink");
    }
    tp_status st = write_directory(w);
    if (st == TP_OK) {
        *data = w->buf;
        *size = w->len;
        w->buf = NULL;
    }
    tp__zip_writer_free(w);
    return st;
}

tp_status tp__zip_finish_sink(tp_zip_writer *w) {
    TP_CHECK(w, TP_ERR_INVALID_ARG, "zip: writer is NULL");
    if (!w->sink) {
        tp__zip_writer_free(w);
        return tp_error(TP_ERR_INVALID_ARG, "zip: the writer has no sink: finish it with tp__zip_finish");
    }
    tp_status st = write_directory(w);
    tp__zip_writer_free(w);
    return st;
}
