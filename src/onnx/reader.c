/*
 * reader.c - bounded reading of ONNX protobuf files: whole-file reads with a
 * size limit, a schema-aware nesting check run before protobuf-c decodes
 * (so a hostile file cannot recurse the decoder off the stack), decoding
 * through the library's allocator, and TensorProto -> tensor conversion
 * (typed fields, raw_data, external data files kept inside the model's
 * folder), every count and size checked.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_impl.h"

/* ---- files ------------------------------------------------------------- */

tp_status tp__onnx_read_file(const char *path, size_t max_bytes, uint8_t **data, size_t *size) {
    *data = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return tp_error(TP_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return tp_error(TP_ERR_IO, "cannot seek in '%s'", path);
    }
    long len = ftell(f);
    if (len < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return tp_error(TP_ERR_IO, "cannot size '%s'", path);
    }
    if ((unsigned long)len > max_bytes) {
        fclose(f);
        return tp_error(TP_ERR_CORRUPT, "'%s' is %ld bytes, over the limit of %zu", path, len, max_bytes);
    }
    uint8_t *buf = tp_malloc(len ? (size_t)len : 1);
    if (!buf) {
        fclose(f);
        return tp_error(TP_ERR_NOMEM, "out of memory reading '%s' (%ld bytes)", path, len);
    }
    size_t got = fread(buf, 1, (size_t)len, f);
    fclose(f);
    if (got != (size_t)len) {
        tp_free(buf);
        return tp_error(TP_ERR_IO, "short read of '%s' (%zu of %ld bytes)", path, got, len);
    }
    *data = buf;
    *size = (size_t)len;
    return TP_OK;
}

/* ---- nesting check ---------------------------------------------------- */

/* Message kinds whose fields can nest (recursively) - the rest are leaves
 * for this check (protobuf-c decodes them without deep recursion). */
enum { M_LEAF, M_MODEL, M_TRAINING, M_GRAPH, M_NODE, M_ATTR, M_FUNCTION, M_VALUEINFO, M_TYPE, M_TYPE_ELEM, M_TYPE_MAP };

static int child_kind(int kind, uint64_t field) {
    switch (kind) {
    case M_MODEL: return field == 7 ? M_GRAPH : field == 20 ? M_TRAINING : field == 25 ? M_FUNCTION : M_LEAF;
    case M_TRAINING: return (field == 1 || field == 2) ? M_GRAPH : M_LEAF;
    case M_GRAPH: return field == 1 ? M_NODE : (field >= 11 && field <= 13) ? M_VALUEINFO : M_LEAF;
    case M_NODE: return field == 5 ? M_ATTR : M_LEAF;
    case M_ATTR: return (field == 6 || field == 11) ? M_GRAPH : (field == 14 || field == 15) ? M_TYPE : M_LEAF;
    case M_FUNCTION: return field == 7 ? M_NODE : M_LEAF;
    case M_VALUEINFO: return field == 2 ? M_TYPE : M_LEAF;
    case M_TYPE: return (field == 4 || field == 9) ? M_TYPE_ELEM : field == 5 ? M_TYPE_MAP : M_LEAF;
    case M_TYPE_ELEM: return field == 1 ? M_TYPE : M_LEAF;
    case M_TYPE_MAP: return field == 2 ? M_TYPE : M_LEAF;
    default: return M_LEAF;
    }
}

#define MAX_NESTING 48

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end) return false;
        uint8_t b = *(*p)++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

static tp_status check_nesting(const uint8_t *p, const uint8_t *end, int kind, int depth) {
    if (depth > MAX_NESTING)
        return tp_error(TP_ERR_CORRUPT, "protobuf nesting deeper than %d levels", MAX_NESTING);
    while (p < end) {
        uint64_t key, len;
        if (!read_varint(&p, end, &key)) return tp_error(TP_ERR_CORRUPT, "truncated protobuf field key");
        unsigned wire = (unsigned)(key & 7);
        uint64_t field = key >> 3;
        switch (wire) {
        case 0:
            if (!read_varint(&p, end, &len)) return tp_error(TP_ERR_CORRUPT, "truncated protobuf varint");
            break;
        case 1:
            if (end - p < 8) return tp_error(TP_ERR_CORRUPT, "truncated protobuf fixed64");
            p += 8;
            break;
        case 5:
            if (end - p < 4) return tp_error(TP_ERR_CORRUPT, "truncated protobuf fixed32");
            p += 4;
            break;
        case 2: {
            if (!read_varint(&p, end, &len)) return tp_error(TP_ERR_CORRUPT, "truncated protobuf length");
            if (len > (uint64_t)(end - p))
                return tp_error(TP_ERR_CORRUPT, "protobuf field %llu length %llu runs past the end of the data",
                                (unsigned long long)field, (unsigned long long)len);
            int ck = child_kind(kind, field);
            if (ck != M_LEAF) TP_TRY(check_nesting(p, p + len, ck, depth + 1));
            p += len;
            break;
        }
        default: return tp_error(TP_ERR_CORRUPT, "unsupported protobuf wire type %u", wire);
        }
    }
    return TP_OK;
}

/* ---- decoding ----------------------------------------------------------- */

static _Thread_local bool g_pb_nomem;

static void *pb_alloc(void *user, size_t size) {
    TP_UNUSED(user);
    void *p = tp_malloc(size ? size : 1);
    if (!p) g_pb_nomem = true;
    return p;
}

bool tp__onnx_decode_nomem(void) { return g_pb_nomem; }
static void pb_free(void *user, void *ptr) {
    TP_UNUSED(user);
    tp_free(ptr);
}
static ProtobufCAllocator g_pb_allocator = {pb_alloc, pb_free, NULL};

tp_status tp__onnx_decode_model(const uint8_t *data, size_t size, Onnx__ModelProto **out) {
    *out = NULL;
    TP_TRY(check_nesting(data, data + size, M_MODEL, 0));
    g_pb_nomem = false;
    Onnx__ModelProto *m = onnx__model_proto__unpack(&g_pb_allocator, size, data);
    if (!m && g_pb_nomem) return tp_error(TP_ERR_NOMEM, "out of memory decoding the ONNX model");
    if (!m) return tp_error(TP_ERR_CORRUPT, "not a valid ONNX model (protobuf decoding failed)");
    *out = m;
    return TP_OK;
}

void tp__onnx_model_free(Onnx__ModelProto *m) {
    if (m) onnx__model_proto__free_unpacked(m, &g_pb_allocator);
}

/* ---- dtypes --------------------------------------------------------------- */

const char *tp__onnx_dtype_name(int32_t t) {
    static const char *names[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16", "INT16",
                                  "INT32",     "INT64",  "STRING",    "BOOL",       "FLOAT16", "DOUBLE",
                                  "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
    if (t >= 0 && t < (int32_t)TP_ARRAY_LEN(names)) return names[t];
    return "unknown";
}

tp_status tp__onnx_dtype(int32_t t, tp_dtype *out) {
    switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: *out = TP_FLOAT32; return TP_OK;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: *out = TP_FLOAT64; return TP_OK;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: *out = TP_FLOAT16; return TP_OK;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: *out = TP_BFLOAT16; return TP_OK;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *out = TP_INT64; return TP_OK;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *out = TP_INT32; return TP_OK;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: *out = TP_INT16; return TP_OK;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: *out = TP_INT8; return TP_OK;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: *out = TP_UINT8; return TP_OK;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: *out = TP_BOOL; return TP_OK;
    default: return tp_error(TP_ERR_UNSUPPORTED, "ONNX element type %s (%d) is not supported", tp__onnx_dtype_name(t), t);
    }
}

/* ---- tensors ------------------------------------------------------------------ */

/* Is `rel` a safe relative path (no absolute path, no ".." component)? */
static bool safe_relative(const char *rel) {
    if (!rel[0] || rel[0] == '/') return false;
    const char *p = rel;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') return false;
        if (!slash) break;
        p = slash + 1;
    }
    return true;
}

/* Open the external data of tp and check everything about it before the
 * tensor is allocated: the location stays in base_dir, the length matches,
 * the budget allows nbytes, and the file holds [offset, offset + nbytes).
 * On success *file is open at the offset (the caller reads and closes it)
 * and *location points into tp. */
static tp_status open_external(const Onnx__TensorProto *tp, const char *base_dir, const size_t *budget,
                               size_t nbytes, FILE **file, const char **location_out) {
    *file = NULL;
    const char *location = NULL;
    uint64_t offset = 0, length = UINT64_MAX;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e || !e->key || !e->value) continue;
        char *endp;
        if (strcmp(e->key, "location") == 0) {
            location = e->value;
        } else if (strcmp(e->key, "offset") == 0 || strcmp(e->key, "length") == 0) {
            errno = 0;
            unsigned long long v = strtoull(e->value, &endp, 10);
            if (errno || *endp || e->value[0] == '-' || !e->value[0])
                return tp_error(TP_ERR_CORRUPT, "tensor '%s': external data %s '%s' is not a number",
                                tp->name ? tp->name : "", e->key, e->value);
            if (e->key[0] == 'o') offset = v;
            else length = v;
        }
    }
    const char *tname = tp->name ? tp->name : "";
    if (!location) return tp_error(TP_ERR_CORRUPT, "tensor '%s': external data without a location", tname);
    if (!base_dir)
        return tp_error(TP_ERR_UNSUPPORTED, "tensor '%s': external data '%s' needs the model's folder (load from a file)",
                        tname, location);
    if (!safe_relative(location))
        return tp_error(TP_ERR_CORRUPT, "tensor '%s': external data location '%s' leaves the model's folder", tname,
                        location);
    if (length != UINT64_MAX && length != nbytes)
        return tp_error(TP_ERR_CORRUPT, "tensor '%s': external data length %llu, expected %zu bytes", tname,
                        (unsigned long long)length, nbytes);
    if (nbytes > *budget)
        return tp_error(TP_ERR_CORRUPT, "tensor '%s': external data over the limit on external bytes", tname);
    size_t plen = strlen(base_dir) + strlen(location) + 2;
    char *path = tp_malloc(plen);
    if (!path) return tp_error(TP_ERR_NOMEM, "out of memory");
    snprintf(path, plen, "%s/%s", base_dir, location);
    /* Resolve links: the real path must stay inside the real base folder. */
    char *real_file = realpath(path, NULL);
    char *real_base = realpath(base_dir, NULL);
    tp_free(path);
    tp_status st = TP_OK;
    if (!real_file || !real_base) {
        st = tp_error(TP_ERR_IO, "tensor '%s': cannot open external data '%s'", tname, location);
    } else {
        size_t bl = strlen(real_base);
        if (strncmp(real_file, real_base, bl) != 0 || (real_file[bl] != '/' && !(bl == 1 && real_base[0] == '/')))
            st = tp_error(TP_ERR_CORRUPT, "tensor '%s': external data location '%s' leaves the model's folder", tname,
                          location);
    }
    if (st == TP_OK) {
        FILE *f = fopen(real_file, "rb");
        if (!f) {
            st = tp_error(TP_ERR_IO, "tensor '%s': cannot open external data '%s'", tname, location);
        } else {
            long flen = -1;
            if (fseek(f, 0, SEEK_END) == 0) flen = ftell(f);
            if (flen < 0)
                st = tp_error(TP_ERR_IO, "tensor '%s': cannot size external data '%s'", tname, location);
            else if (offset > (uint64_t)flen || nbytes > (uint64_t)flen - offset)
                st = tp_error(TP_ERR_CORRUPT,
                              "tensor '%s': external data [%llu, +%zu) lies outside '%s' (%ld bytes): the file is "
                              "short or the offset wrong",
                              tname, (unsigned long long)offset, nbytes, location, flen);
            else if (offset > (uint64_t)LONG_MAX || fseek(f, (long)offset, SEEK_SET) != 0)
                st = tp_error(TP_ERR_IO, "tensor '%s': cannot seek in external data '%s'", tname, location);
            if (st == TP_OK) *file = f;
            else fclose(f);
        }
    }
    free(real_file); /* realpath allocates with malloc */
    free(real_base);
    if (st == TP_OK) *location_out = location;
    return st;
}

/* A STRING tensor as UTF-8 bytes: uint8 [dims..., width], each string
 * zero-padded to the longest one (numpy's 'S' layout). */
static tp_status string_tensor(const Onnx__TensorProto *tp, const char *tname, tp_tensor **out) {
    if (tp->n_dims + 1 > TP_MAX_DIMS)
        return tp_error(TP_ERR_UNSUPPORTED, "string tensor '%s' has %zu dims (at most %d)", tname, tp->n_dims,
                        TP_MAX_DIMS - 1);
    int64_t sizes[TP_MAX_DIMS], numel = 1, width = 0;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0) return tp_error(TP_ERR_CORRUPT, "tensor '%s': dim %zu is negative", tname, i);
        sizes[i] = tp->dims[i];
        if (!tp_mul_overflow_i64(numel, sizes[i], &numel))
            return tp_error(TP_ERR_CORRUPT, "tensor '%s': element count overflows", tname);
    }
    if (tp->n_string_data != (size_t)numel)
        return tp_error(TP_ERR_CORRUPT, "tensor '%s': %zu strings for %lld elements", tname, tp->n_string_data,
                        (long long)numel);
    for (size_t i = 0; i < tp->n_string_data; i++)
        if ((int64_t)tp->string_data[i].len > width) width = (int64_t)tp->string_data[i].len;
    int64_t total;
    if (!tp_mul_overflow_i64(numel, width, &total) || total > ((int64_t)1 << 32))
        return tp_error(TP_ERR_CORRUPT, "string tensor '%s' is too large as bytes", tname);
    sizes[tp->n_dims] = width;
    tp_tensor *t;
    TP_TRY(tp_tensor_zeros(TP_UINT8, (int)tp->n_dims + 1, sizes, &t));
    uint8_t *p = tp_tensor_data(t);
    for (size_t i = 0; i < tp->n_string_data; i++)
        if (tp->string_data[i].len) memcpy(p + i * (size_t)width, tp->string_data[i].data, tp->string_data[i].len);
    *out = t;
    return TP_OK;
}

tp_status tp__onnx_tensor(const Onnx__TensorProto *tp, const char *base_dir, size_t *external_budget,
                          tp_tensor **out) {
    *out = NULL;
    const char *tname = tp->name ? tp->name : "";
    if (tp->segment) return tp_error(TP_ERR_UNSUPPORTED, "tensor '%s': segmented tensors are not supported", tname);
    if (tp->has_data_type && tp->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__STRING) return string_tensor(tp, tname, out);
    tp_dtype dt;
    tp_status st = tp__onnx_dtype(tp->has_data_type ? tp->data_type : 0, &dt);
    if (st != TP_OK) {
        tp_error_context("tensor '%s'", tname);
        return st;
    }
    if (tp->n_dims > TP_MAX_DIMS)
        return tp_error(TP_ERR_UNSUPPORTED, "tensor '%s' has %zu dims (at most %d)", tname, tp->n_dims, TP_MAX_DIMS);
    int64_t sizes[TP_MAX_DIMS];
    int64_t numel = 1;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0) return tp_error(TP_ERR_CORRUPT, "tensor '%s': dim %zu is negative", tname, i);
        sizes[i] = tp->dims[i];
        if (!tp_mul_overflow_i64(numel, sizes[i], &numel))
            return tp_error(TP_ERR_CORRUPT, "tensor '%s': element count overflows", tname);
    }
    size_t esize = tp_dtype_size(dt), nbytes;
    if (!tp_mul_size((size_t)numel, esize, &nbytes) || nbytes > ((size_t)1 << 40))
        return tp_error(TP_ERR_CORRUPT, "tensor '%s': %lld elements is too large", tname, (long long)numel);
    bool external = tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    /* Check the data size before allocating. */
    size_t count = 0;
    if (!external && !tp->has_raw_data) {
        switch (dt) {
        case TP_FLOAT32: count = tp->n_float_data; break;
        case TP_FLOAT64: count = tp->n_double_data; break;
        case TP_INT64: count = tp->n_int64_data; break;
        default: count = tp->n_int32_data; break;
        }
        if (count != (size_t)numel)
            return tp_error(TP_ERR_CORRUPT, "tensor '%s': %zu values for %lld elements", tname, count,
                            (long long)numel);
    } else if (!external && tp->raw_data.len != nbytes) {
        return tp_error(TP_ERR_CORRUPT, "tensor '%s': raw_data has %zu bytes, expected %zu", tname, tp->raw_data.len,
                        nbytes);
    }
    /* External data: the file is checked (and opened) before allocating, so
     * a short file is reported as such, not as a failed huge allocation. */
    FILE *ext = NULL;
    const char *location = NULL;
    size_t unlimited = SIZE_MAX;
    if (external) TP_TRY(open_external(tp, base_dir, external_budget ? external_budget : &unlimited, nbytes, &ext, &location));
    tp_tensor *t;
    st = tp_tensor_empty(dt, (int)tp->n_dims, sizes, &t);
    if (st != TP_OK) {
        if (ext) fclose(ext);
        tp_error_context("tensor '%s'", tname);
        return st;
    }
    void *dst = tp_tensor_data(t);
    if (external) {
        if (fread(dst, 1, nbytes, ext) != nbytes)
            st = tp_error(TP_ERR_IO, "tensor '%s': short read of external data '%s'", tname, location);
        fclose(ext);
        if (st == TP_OK && external_budget) *external_budget -= nbytes;
    } else if (tp->has_raw_data) {
        if (nbytes) memcpy(dst, tp->raw_data.data, nbytes); /* little-endian host assumed, as ONNX stores */
    } else {
        for (int64_t i = 0; i < numel; i++) {
            char *p = (char *)dst + (size_t)i * esize;
            switch (dt) {
            case TP_FLOAT32: memcpy(p, &tp->float_data[i], 4); break;
            case TP_FLOAT64: memcpy(p, &tp->double_data[i], 8); break;
            case TP_INT64: memcpy(p, &tp->int64_data[i], 8); break;
            case TP_FLOAT16:
            case TP_BFLOAT16: {
                uint16_t bits = (uint16_t)tp->int32_data[i];
                memcpy(p, &bits, 2);
                break;
            }
            case TP_BOOL: *(uint8_t *)p = tp->int32_data[i] != 0; break;
            default: tp__store_i64(p, dt, tp->int32_data[i]); break;
            }
        }
    }
    if (st == TP_OK && dt == TP_BOOL) { /* normalise bytes to 0/1 */
        uint8_t *b = dst;
        for (int64_t i = 0; i < numel; i++) b[i] = b[i] != 0;
    }
    if (st != TP_OK) {
        tp_tensor_free(t);
        return st;
    }
    *out = t;
    return TP_OK;
}

tp_status tp_onnx_load_tensor_buffer(const void *data, size_t size, tp_tensor **out) {
    *out = NULL;
    g_pb_nomem = false;
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(&g_pb_allocator, size, data);
    if (!tp && g_pb_nomem) return tp_error(TP_ERR_NOMEM, "out of memory decoding a TensorProto");
    if (!tp) return tp_error(TP_ERR_CORRUPT, "not a valid ONNX TensorProto (protobuf decoding failed)");
    tp_status st = tp__onnx_tensor(tp, NULL, NULL, out);
    onnx__tensor_proto__free_unpacked(tp, &g_pb_allocator);
    return st;
}

tp_status tp_onnx_load_tensor(const char *path, tp_tensor **out) {
    uint8_t *data;
    size_t size;
    *out = NULL;
    TP_TRY(tp__onnx_read_file(path, (size_t)1 << 31, &data, &size));
    tp_status st = tp_onnx_load_tensor_buffer(data, size, out);
    tp_free(data);
    if (st != TP_OK) tp_error_context("%s", path);
    return st;
}
