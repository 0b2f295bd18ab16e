/*
 * npy.c - read and write numpy .npy files.
 *
 * Layout (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
 *   bytes 0-5   magic "\x93NUMPY"
 *   byte  6-7   major, minor version (1.0, 2.0 or 3.0)
 *   then        header length: uint16 LE (v1) or uint32 LE (v2, v3)
 *   then        header: a Python dict literal
 *               {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 *               padded with spaces and ended by '\n'
 *   then        the raw element data, C or Fortran order, in the byte order
 *               the descr names ('<' little, '>' big, '|' or '=' native);
 *               big-endian data is converted to the host's order on load.
 * Fixed-width byte strings ('|S<n>', numpy's bytes_ dtype) load as uint8
 * with the width n as one more, last dim: ONNX string tensors are held
 * that way (src/onnx/strings.c). Every field is checked before use; a file
 * that lies gives TP_ERR_CORRUPT naming the problem.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

static const struct {
    const char *code; /* without byte-order char */
    tp_dtype dtype;
} npy_types[] = {{"f4", TP_FLOAT32}, {"f8", TP_FLOAT64}, {"f2", TP_FLOAT16}, {"i8", TP_INT64},
                 {"i4", TP_INT32},   {"i2", TP_INT16},   {"i1", TP_INT8},    {"u1", TP_UINT8},
                 {"b1", TP_BOOL}};

typedef struct {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static bool accept(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted Python string into buf. */
static tp_status parse_str(cursor *c, char *buf, size_t size) {
    skip_ws(c);
    TP_CHECK(c->p < c->end && (*c->p == '\'' || *c->p == '"'), TP_ERR_CORRUPT, "npy header: expected a string");
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        TP_CHECK(n + 1 < size, TP_ERR_CORRUPT, "npy header: string too long");
        buf[n++] = *c->p++;
    }
    TP_CHECK(c->p < c->end, TP_ERR_CORRUPT, "npy header: unterminated string");
    c->p++;
    buf[n] = '\0';
    return TP_OK;
}

/* True on a little-endian host. */
static bool host_little_endian(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Reverse the bytes of each of n elements of `size` bytes at data. */
static void byte_swap(unsigned char *data, int64_t n, size_t size) {
    for (int64_t i = 0; i < n; i++, data += size)
        for (size_t a = 0, z = size - 1; a < z; a++, z--) {
            unsigned char t = data[a];
            data[a] = data[z];
            data[z] = t;
        }
}

/* *swap: the data's byte order ('<' or '>') is not the host's. */
static tp_status parse_header(const char *hdr, size_t len, tp_dtype *dtype, bool *fortran, int *ndim,
                              int64_t *shape, bool *swap, int64_t *str_width) {
    cursor c = {hdr, hdr + len};
    bool have_descr = false, have_order = false, have_shape = false;
    TP_CHECK(accept(&c, '{'), TP_ERR_CORRUPT, "npy header: expected '{'");
    while (!accept(&c, '}')) {
        char key[32];
        TP_TRY(parse_str(&c, key, sizeof key));
        TP_CHECK(accept(&c, ':'), TP_ERR_CORRUPT, "npy header: expected ':' after '%s'", key);
        if (strcmp(key, "descr") == 0) {
            TP_CHECK(!have_descr, TP_ERR_CORRUPT, "npy header: duplicate key 'descr'");
            char d[32];
            skip_ws(&c);
            TP_CHECK(c.p < c.end && (*c.p == '\'' || *c.p == '"'), TP_ERR_UNSUPPORTED,
                     "npy header: structured dtypes are not supported");
            TP_TRY(parse_str(&c, d, sizeof d));
            const char *code = d;
            char order = '=';
            if (*code == '<' || *code == '>' || *code == '|' || *code == '=') order = *code++;
            int found = -1;
            for (size_t i = 0; i < TP_ARRAY_LEN(npy_types); i++)
                if (strcmp(code, npy_types[i].code) == 0) found = (int)i;
            if (found < 0 && code[0] == 'S' && code[1] && strspn(code + 1, "0123456789") == strlen(code + 1) &&
                strlen(code + 1) <= 9) { /* fixed-width bytes: uint8 with the width as one more dim */
                *str_width = strtoll(code + 1, NULL, 10);
                *dtype = TP_UINT8;
                *swap = false;
                have_descr = true;
                goto next;
            }
            TP_CHECK(found >= 0, TP_ERR_UNSUPPORTED, "npy: unsupported dtype '%s'", d);
            *dtype = npy_types[found].dtype;
            *swap = tp_dtype_size(*dtype) > 1 && (order == '>' || order == '<') &&
                    (order == '<') != host_little_endian();
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            TP_CHECK(!have_order, TP_ERR_CORRUPT, "npy header: duplicate key 'fortran_order'");
            skip_ws(&c);
            if ((size_t)(c.end - c.p) >= 4 && strncmp(c.p, "True", 4) == 0) {
                *fortran = true;
                c.p += 4;
            } else if ((size_t)(c.end - c.p) >= 5 && strncmp(c.p, "False", 5) == 0) {
                *fortran = false;
                c.p += 5;
            } else {
                return tp_error(TP_ERR_CORRUPT, "npy header: fortran_order must be True or False");
            }
            have_order = true;
        } else if (strcmp(key, "shape") == 0) {
            TP_CHECK(!have_shape, TP_ERR_CORRUPT, "npy header: duplicate key 'shape'");
            TP_CHECK(accept(&c, '('), TP_ERR_CORRUPT, "npy header: shape must be a tuple");
            int n = 0;
            while (!accept(&c, ')')) {
                skip_ws(&c);
                TP_CHECK(c.p < c.end && isdigit((unsigned char)*c.p), TP_ERR_CORRUPT,
                         "npy header: shape entries must be non-negative integers");
                TP_CHECK(n < TP_MAX_DIMS, TP_ERR_UNSUPPORTED, "npy: rank above %d is not supported", TP_MAX_DIMS);
                int64_t v = 0;
                while (c.p < c.end && isdigit((unsigned char)*c.p)) {
                    TP_CHECK(tp_mul_overflow_i64(v, 10, &v) && tp_add_overflow_i64(v, *c.p - '0', &v),
                             TP_ERR_CORRUPT, "npy header: shape entry overflows");
                    c.p++;
                }
                skip_ws(&c);
                if (c.p < c.end && *c.p == 'L') c.p++; /* Python 2 longs */
                shape[n++] = v;
                if (!accept(&c, ',')) {
                    TP_CHECK(accept(&c, ')'), TP_ERR_CORRUPT, "npy header: expected ',' or ')' in shape");
                    break;
                }
            }
            *ndim = n;
            have_shape = true;
        } else {
            return tp_error(TP_ERR_CORRUPT, "npy header: unexpected key '%s'", key);
        }
    next:
        if (!accept(&c, ',')) {
            TP_CHECK(accept(&c, '}'), TP_ERR_CORRUPT, "npy header: expected ',' or '}'");
            break;
        }
    }
    skip_ws(&c);
    TP_CHECK(c.p == c.end, TP_ERR_CORRUPT, "npy header: unexpected text after the header dict");
    TP_CHECK(have_descr, TP_ERR_CORRUPT, "npy header: missing 'descr'");
    TP_CHECK(have_order, TP_ERR_CORRUPT, "npy header: missing 'fortran_order'");
    TP_CHECK(have_shape, TP_ERR_CORRUPT, "npy header: missing 'shape'");
    return TP_OK;
}

tp_status tp_npy_load_buffer(const void *data, size_t size, tp_tensor **out) {
    const unsigned char *b = data;
    TP_CHECK(data != NULL || size == 0, TP_ERR_INVALID_ARG, "npy: data is NULL");
    TP_CHECK(size >= 10, TP_ERR_CORRUPT, "npy: file too short (%zu bytes)", size);
    TP_CHECK(memcmp(b, "\x93NUMPY", 6) == 0, TP_ERR_CORRUPT, "npy: bad magic (not a .npy file)");
    unsigned major = b[6], minor = b[7];
    TP_CHECK(major >= 1 && major <= 3 && minor == 0, TP_ERR_UNSUPPORTED, "npy: unsupported format version %u.%u",
             major, minor);
    size_t hlen, hstart;
    if (major == 1) {
        hlen = (size_t)b[8] | ((size_t)b[9] << 8);
        hstart = 10;
    } else {
        TP_CHECK(size >= 12, TP_ERR_CORRUPT, "npy: file too short (%zu bytes)", size);
        hlen = (size_t)b[8] | ((size_t)b[9] << 8) | ((size_t)b[10] << 16) | ((size_t)b[11] << 24);
        hstart = 12;
    }
    TP_CHECK(hlen <= size - hstart, TP_ERR_CORRUPT, "npy: header length %zu exceeds file size %zu", hlen, size);
    tp_dtype dtype = TP_FLOAT32;
    bool fortran = false, swap = false;
    int ndim = 0;
    int64_t shape[TP_MAX_DIMS], str_width = -1;
    TP_TRY(parse_header((const char *)b + hstart, hlen, &dtype, &fortran, &ndim, shape, &swap, &str_width));
    if (str_width >= 0) { /* 'S<n>': the bytes of each string are one more (last) dim */
        TP_CHECK(ndim < TP_MAX_DIMS, TP_ERR_UNSUPPORTED, "npy: rank above %d is not supported for bytes", TP_MAX_DIMS - 1);
        TP_CHECK(!fortran || ndim <= 1, TP_ERR_UNSUPPORTED, "npy: Fortran-order byte strings are not supported");
        fortran = false;
        shape[ndim++] = str_width;
    }
    int64_t numel = 0, nbytes = 0;
    if (tp__numel(ndim, shape, &numel) != TP_OK) {
        char buf[TP_MAX_DIMS * 24];
        return tp_error(TP_ERR_CORRUPT, "npy: shape %s: element count overflows int64",
                        tp__shape_str(ndim, shape, buf, sizeof buf));
    }
    TP_CHECK(tp_mul_overflow_i64(numel, (int64_t)tp_dtype_size(dtype), &nbytes), TP_ERR_CORRUPT,
             "npy: data size overflows");
    size_t avail = size - hstart - hlen;
    TP_CHECK((uint64_t)nbytes <= (uint64_t)avail, TP_ERR_CORRUPT,
             "npy: truncated data (header says %" PRId64 " bytes, file has %zu)", nbytes, avail);
    TP_CHECK((uint64_t)nbytes == (uint64_t)avail, TP_ERR_CORRUPT,
             "npy: %zu trailing bytes after the data", avail - (size_t)nbytes);
    const void *payload = b + hstart + hlen;
    tp_tensor *t;
    if (!fortran || numel == 0) { /* an empty array has no order */
        TP_TRY(tp_tensor_from_data(dtype, ndim, shape, payload, &t));
    } else {
        /* Fortran order: the data is a C-order array of the reversed shape;
         * its transpose-all view has the right values. */
        int64_t rshape[TP_MAX_DIMS], perm[TP_MAX_DIMS];
        for (int i = 0; i < ndim; i++) {
            rshape[i] = shape[ndim - 1 - i];
            perm[i] = ndim - 1 - i;
        }
        tp_tensor *r, *v;
        TP_TRY(tp_tensor_from_data(dtype, ndim, rshape, payload, &r));
        tp_status st = tp_tensor_permute(r, perm, &v);
        tp_tensor_free(r);
        TP_TRY(st);
        st = tp_tensor_clone(v, &t);
        tp_tensor_free(v);
        TP_TRY(st);
    }
    if (swap) byte_swap((unsigned char *)tp__tensor_base(t), numel, tp_dtype_size(dtype)); /* t is contiguous: C order */
    if (dtype == TP_BOOL) { /* normalise: any non-zero byte is True */
        uint8_t *p = t->storage->data;
        for (int64_t i = 0; i < numel; i++) p[i] = p[i] != 0;
    }
    *out = t;
    return TP_OK;
}

tp_status tp_npy_load(const char *path, tp_tensor **out) {
    FILE *f = fopen(path, "rb");
    TP_CHECK(f != NULL, TP_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    tp_status st = TP_OK;
    void *buf = NULL;
    /* the size from fstat: fseek/ftell on a directory or a pipe gives
     * nonsense sizes */
    struct stat sb;
    long long size = -1;
    if (fstat(fileno(f), &sb) != 0) st = tp_error(TP_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode)) st = tp_error(TP_ERR_IO, "cannot read '%s': not a regular file", path);
    else size = (long long)sb.st_size;
    if (st == TP_OK && (uint64_t)size > SIZE_MAX - 64)
        st = tp_error(TP_ERR_NOMEM, "'%s' is too large (%lld bytes)", path, size);
    if (st == TP_OK && !(buf = tp_malloc((size_t)size)))
        st = tp_error(TP_ERR_NOMEM, "out of memory reading '%s' (%lld bytes)", path, size);
    if (st == TP_OK && size > 0 && fread(buf, 1, (size_t)size, f) != (size_t)size)
        st = tp_error(TP_ERR_IO, "short read on '%s'", path);
    fclose(f);
    if (st == TP_OK) {
        st = tp_npy_load_buffer(buf, (size_t)size, out);
        if (st != TP_OK) tp_error_context("%s", path);
    }
    tp_free(buf);
    return st;
}

tp_status tp_npy_save_buffer(const tp_tensor *t, void **out_data, size_t *out_size) {
    const char *code = NULL;
    for (size_t i = 0; i < TP_ARRAY_LEN(npy_types); i++)
        if (npy_types[i].dtype == t->dtype) code = npy_types[i].code;
    TP_CHECK(code != NULL, TP_ERR_UNSUPPORTED, "npy: dtype %s has no .npy equivalent", tp_dtype_name(t->dtype));
    TP_CHECK(t->storage != NULL, TP_ERR_INVALID_ARG, "npy: cannot save a meta tensor");
    /* The header numpy 1.24 writes (format.py _write_array_header): the dict
     * repr, spaces so that the first dim can grow to 21 digits in place, then
     * spaces and '\n' up to a multiple of 64 bytes (a full 64 more if the
     * header is already aligned). The same bytes as np.save for C order. */
    char hdr[96 + TP_MAX_DIMS * 24];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                     tp_dtype_size(t->dtype) == 1 ? '|' : '<', code);
    for (int i = 0; i < t->ndim; i++)
        n += snprintf(hdr + n, sizeof hdr - (size_t)n, "%" PRId64 ",%s", t->sizes[i],
                      (i + 1 < t->ndim) ? " " : "");
    if (t->ndim > 1) n--; /* numpy writes (2, 3) but (3,) */
    n += snprintf(hdr + n, sizeof hdr - (size_t)n, "), }");
    if (t->ndim > 0) {
        int digits = snprintf(NULL, 0, "%" PRId64, t->sizes[0]);
        for (int i = digits; i < 21; i++) hdr[n++] = ' ';
        hdr[n] = '\0';
    }
    size_t hlen = (size_t)n + 1;                  /* with the final '\n' */
    size_t padlen = 64 - ((10 + hlen) % 64);      /* 1..64 */
    hlen += padlen;
    size_t padded = 10 + hlen;
    int64_t numel = tp_tensor_numel(t);
    size_t nbytes = (size_t)numel * tp_dtype_size(t->dtype);
    size_t total = padded + nbytes;
    unsigned char *buf = tp_malloc(total);
    TP_CHECK(buf != NULL, TP_ERR_NOMEM, "out of memory writing .npy");
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    memcpy(buf + 10, hdr, (size_t)n);
    memset(buf + 10 + n, ' ', hlen - (size_t)n - 1);
    buf[padded - 1] = '\n';
    tp_tensor *c;
    tp_status st = tp_tensor_contiguous((tp_tensor *)t, &c);
    if (st != TP_OK) {
        tp_free(buf);
        return st;
    }
    if (nbytes) memcpy(buf + padded, tp__tensor_base(c), nbytes);
    tp_tensor_free(c);
    *out_data = buf;
    *out_size = total;
    return TP_OK;
}

tp_status tp_npy_save(const char *path, const tp_tensor *t) {
    void *buf;
    size_t size;
    TP_TRY(tp_npy_save_buffer(t, &buf, &size));
    FILE *f = fopen(path, "wb");
    tp_status st = TP_OK;
    if (!f) st = tp_error(TP_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    else {
        if (fwrite(buf, 1, size, f) != size) st = tp_error(TP_ERR_IO, "short write on '%s'", path);
        if (fclose(f) != 0 && st == TP_OK) st = tp_error(TP_ERR_IO, "cannot close '%s'", path);
    }
    tp_free(buf);
    return st;
}
