/*
 * pickle.c - the strict pickle subset: tensorplay's dtypes, Ellipsis and
 * tensors, plus None, bools, ints, floats, strings, tuples, lists and dicts,
 * read by a bounded stack machine that runs no code, and written for example
 * inputs and dtype arguments.
 *
 * Part of the program document reader/writer (serde.h is the contract,
 * serde_impl.h what its files share).
 */
#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serde_impl.h"

/* ======================================================================
 * the strict pickle subset
 * ======================================================================
 * tensorplay pickles (protocol 2-5) three kinds of objects we accept:
 *   tensorplay.DType:       NEWOBJ(DType, ()) BUILD(<int code>)
 *   builtins.Ellipsis:      the global itself
 *   tensorplay._C.TensorBase: NEWOBJ(TensorBase, ()) BUILD((bytes, sizes,
 *                           strides, dtype code, storage offset, device,
 *                           requires_grad))
 * plus None, bools, ints, floats, str, bytes, tuples, lists and dicts. The
 * reader is a stack machine over that opcode subset only; objects live in
 * an arena freed at the end (the memo may share them). */

enum {
    PK_NONE,
    PK_BOOL,
    PK_INT,
    PK_FLOAT,
    PK_STR,
    PK_BYTES,
    PK_TUPLE,
    PK_LIST,
    PK_DICT, /* items: key, value, key, value, ... */
    PK_CLASS,
    PK_OBJECT, /* cls; state in `state` once built */
    PK_ELLIPSIS,
    PK_MARK,
    PK_STORAGE, /* torch.save: a persistent storage reference; state = (kind, class, key, location, numel) */
    PK_TTENSOR  /* torch.save: _rebuild_tensor_v2(storage, offset, size, stride, ...); state = its arguments */
};

/* PK_CLS_STORAGE keeps the storage's dtype in `i`. */
enum {
    PK_CLS_DTYPE = 1,
    PK_CLS_TENSOR = 2,
    PK_CLS_REBUILD_TENSOR = 3,
    PK_CLS_REBUILD_PARAM = 4,
    PK_CLS_ORDERED_DICT = 5,
    PK_CLS_STORAGE = 6
};

typedef struct pk_val pk_val;

struct pk_val {
    int kind;
    int cls;
    bool b;
    int64_t i;
    double f;
    const unsigned char *bytes; /* STR/BYTES: into the pickle data (not NUL-terminated) */
    size_t len;
    pk_val **items;
    int64_t n, cap;
    pk_val *state;
};

typedef struct pk_reader {
    const unsigned char *data;
    size_t size, pos;
    pk_val **arena;
    size_t n_arena, cap_arena;
    pk_val **stack;
    size_t n_stack, cap_stack;
    size_t *marks;
    size_t n_marks, cap_marks;
    pk_val **memo;
    size_t cap_memo; /* memo indexes < cap_memo; NULL = unset */
    size_t n_memo;   /* next MEMOIZE index */
    bool torch;      /* torch.save's pickle: its tensor, storage and OrderedDict globals, REDUCE, BINPERSID */
    tp__sd_storage_fn storage;
    void *storage_ctx;
} pk_reader;

#define PK_MAX_OBJECTS ((size_t)1 << 22)

#define PK_MAX_MEMO ((size_t)1 << 20)

static bool pk_grow(void **items, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *p = tp_realloc(*items, c * elem);
    if (!p) return false;
    *items = p;
    *cap = c;
    return true;
}

static void pk_free(pk_reader *p) {
    for (size_t i = 0; i < p->n_arena; i++) {
        tp_free(p->arena[i]->items);
        tp_free(p->arena[i]);
    }
    tp_free(p->arena);
    tp_free(p->stack);
    tp_free(p->marks);
    tp_free(p->memo);
    *p = (pk_reader){0};
}

static pk_val *pk_new(pk_reader *p, int kind) {
    if (p->n_arena >= PK_MAX_OBJECTS) return NULL;
    if (!pk_grow((void **)&p->arena, &p->cap_arena, p->n_arena + 1, sizeof *p->arena)) return NULL;
    pk_val *v = tp_calloc(1, sizeof *v);
    if (!v) return NULL;
    v->kind = kind;
    p->arena[p->n_arena++] = v;
    return v;
}

static bool pk_add_item(pk_val *c, pk_val *item) {
    if (c->n >= (int64_t)PK_MAX_OBJECTS) return false;
    size_t cap = (size_t)c->cap;
    if (!pk_grow((void **)&c->items, &cap, (size_t)c->n + 1, sizeof *c->items)) return false;
    c->cap = (int64_t)cap;
    c->items[c->n++] = item;
    return true;
}

#define PK_FAIL(code, ...) return tp_error(code, "pickle: " __VA_ARGS__)

static tp_status pk_push(pk_reader *p, pk_val *v) {
    if (!v) return tp_error(TP_ERR_NOMEM, "pickle: out of memory (or more than %zu objects)", PK_MAX_OBJECTS);
    if (!pk_grow((void **)&p->stack, &p->cap_stack, p->n_stack + 1, sizeof *p->stack))
        return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
    p->stack[p->n_stack++] = v;
    return TP_OK;
}

static tp_status pk_pop(pk_reader *p, pk_val **out) {
    size_t floor_ = p->n_marks ? p->marks[p->n_marks - 1] : 0;
    if (p->n_stack <= floor_) PK_FAIL(TP_ERR_CORRUPT, "stack underflow at offset %zu", p->pos);
    *out = p->stack[--p->n_stack];
    return TP_OK;
}

static tp_status pk_need(pk_reader *p, size_t n, const unsigned char **out) {
    if (p->size - p->pos < n) PK_FAIL(TP_ERR_CORRUPT, "truncated at offset %zu", p->pos);
    *out = p->data + p->pos;
    p->pos += n;
    return TP_OK;
}

static uint64_t pk_le(const unsigned char *b, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}

static tp_status pk_memo_put(pk_reader *p, size_t idx) {
    if (idx >= PK_MAX_MEMO) PK_FAIL(TP_ERR_CORRUPT, "memo index %zu too large", idx);
    if (p->n_stack == 0) PK_FAIL(TP_ERR_CORRUPT, "memoize with an empty stack at offset %zu", p->pos);
    if (idx >= p->cap_memo) {
        size_t old = p->cap_memo, cap = old;
        if (!pk_grow((void **)&p->memo, &cap, idx + 1, sizeof *p->memo)) return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
        memset(p->memo + old, 0, (cap - old) * sizeof *p->memo);
        p->cap_memo = cap;
    }
    p->memo[idx] = p->stack[p->n_stack - 1];
    return TP_OK;
}

static tp_status pk_string(pk_reader *p, int kind, size_t n) {
    const unsigned char *b = NULL;
    TP_TRY(pk_need(p, n, &b));
    pk_val *v = pk_new(p, kind);
    if (v) {
        v->bytes = b;
        v->len = n;
    }
    return pk_push(p, v);
}

/* The globals torch.save pickles use for tensors: torch._utils._rebuild_tensor_v2 and
 * _rebuild_parameter, collections.OrderedDict, and the typed storage classes
 * torch.FloatStorage & co. (which name the dtype). True when (module, name)
 * is one of them; *v is the class object (NULL: out of memory). */
static bool pk_torch_global(pk_reader *p, const char *module, size_t mlen, const char *name, size_t nlen, pk_val **v) {
    static const struct {
        const char *name;
        tp_dtype dtype;
    } storages[] = {{"FloatStorage", TP_FLOAT32}, {"DoubleStorage", TP_FLOAT64}, {"HalfStorage", TP_FLOAT16},
                    {"BFloat16Storage", TP_BFLOAT16}, {"LongStorage", TP_INT64}, {"IntStorage", TP_INT32},
                    {"ShortStorage", TP_INT16}, {"CharStorage", TP_INT8}, {"ByteStorage", TP_UINT8},
                    {"BoolStorage", TP_BOOL}};
    int cls = 0;
    int64_t dtype = 0;
#define PK_IS(s, len, lit) ((len) == sizeof(lit) - 1 && memcmp((s), (lit), (len)) == 0)
    if (PK_IS(module, mlen, "torch._utils") && PK_IS(name, nlen, "_rebuild_tensor_v2")) cls = PK_CLS_REBUILD_TENSOR;
    else if (PK_IS(module, mlen, "torch._utils") && PK_IS(name, nlen, "_rebuild_parameter")) cls = PK_CLS_REBUILD_PARAM;
    else if (PK_IS(module, mlen, "collections") && PK_IS(name, nlen, "OrderedDict")) cls = PK_CLS_ORDERED_DICT;
    else if (PK_IS(module, mlen, "torch"))
        for (size_t i = 0; i < TP_ARRAY_LEN(storages) && !cls; i++)
            if (nlen == strlen(storages[i].name) && memcmp(name, storages[i].name, nlen) == 0) {
                cls = PK_CLS_STORAGE;
                dtype = storages[i].dtype;
            }
#undef PK_IS
    if (!cls) return false;
    *v = pk_new(p, PK_CLASS);
    if (*v) {
        (*v)->cls = cls;
        (*v)->i = dtype;
    }
    return true;
}

static tp_status pk_global(pk_reader *p, const char *module, size_t mlen, const char *name, size_t nlen) {
    pk_val *v = NULL;
    if (mlen == 10 && memcmp(module, "tensorplay", 10) == 0 && nlen == 5 && memcmp(name, "DType", 5) == 0) {
        v = pk_new(p, PK_CLASS);
        if (v) v->cls = PK_CLS_DTYPE;
    } else if (mlen == 13 && memcmp(module, "tensorplay._C", 13) == 0 && nlen == 10 &&
               memcmp(name, "TensorBase", 10) == 0) {
        v = pk_new(p, PK_CLASS);
        if (v) v->cls = PK_CLS_TENSOR;
    } else if (mlen == 8 && memcmp(module, "builtins", 8) == 0 && nlen == 8 && memcmp(name, "Ellipsis", 8) == 0) {
        v = pk_new(p, PK_ELLIPSIS);
    } else if (p->torch && pk_torch_global(p, module, mlen, name, nlen, &v)) {
        if (!v) return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
    } else {
        return tp_error(TP_ERR_UNSUPPORTED, "pickle: global %.*s.%.*s cannot be loaded safely", (int)(mlen > 64 ? 64 : mlen),
                        module, (int)(nlen > 64 ? 64 : nlen), name);
    }
    return pk_push(p, v);
}

/* Pop items down to the last mark into a new container of `kind`. */
static tp_status pk_collect(pk_reader *p, int kind, pk_val **out) {
    if (!p->n_marks) PK_FAIL(TP_ERR_CORRUPT, "no mark at offset %zu", p->pos);
    size_t m = p->marks[--p->n_marks];
    pk_val *c = pk_new(p, kind);
    if (!c) return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
    for (size_t i = m; i < p->n_stack; i++)
        if (!pk_add_item(c, p->stack[i])) return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
    p->n_stack = m;
    *out = c;
    return TP_OK;
}

static tp_status pk_run(pk_reader *p, pk_val **result) {
    for (;;) {
        const unsigned char *b = NULL;
        TP_TRY(pk_need(p, 1, &b));
        unsigned char op = b[0];
        size_t at = p->pos - 1;
        switch (op) {
        case 0x80: /* PROTO */
            TP_TRY(pk_need(p, 1, &b));
            if (b[0] < 2 || b[0] > 5) PK_FAIL(TP_ERR_UNSUPPORTED, "protocol %d is not supported", b[0]);
            break;
        case 0x95: /* FRAME */ TP_TRY(pk_need(p, 8, &b)); break;
        case '.': /* STOP */ {
            pk_val *v = NULL;
            TP_TRY(pk_pop(p, &v));
            if (p->n_stack || p->n_marks) PK_FAIL(TP_ERR_CORRUPT, "data left on the stack at STOP");
            *result = v;
            return TP_OK;
        }
        case 0x8c: /* SHORT_BINUNICODE */
            TP_TRY(pk_need(p, 1, &b));
            TP_TRY(pk_string(p, PK_STR, b[0]));
            break;
        case 'X': /* BINUNICODE */
            TP_TRY(pk_need(p, 4, &b));
            TP_TRY(pk_string(p, PK_STR, (size_t)pk_le(b, 4)));
            break;
        case 0x8d: /* BINUNICODE8 */
            TP_TRY(pk_need(p, 8, &b));
            if (pk_le(b, 8) > p->size) PK_FAIL(TP_ERR_CORRUPT, "string length out of range at offset %zu", at);
            TP_TRY(pk_string(p, PK_STR, (size_t)pk_le(b, 8)));
            break;
        case 'C': /* SHORT_BINBYTES */
            TP_TRY(pk_need(p, 1, &b));
            TP_TRY(pk_string(p, PK_BYTES, b[0]));
            break;
        case 'B': /* BINBYTES */
            TP_TRY(pk_need(p, 4, &b));
            TP_TRY(pk_string(p, PK_BYTES, (size_t)pk_le(b, 4)));
            break;
        case 0x8e: /* BINBYTES8 */
            TP_TRY(pk_need(p, 8, &b));
            if (pk_le(b, 8) > p->size) PK_FAIL(TP_ERR_CORRUPT, "bytes length out of range at offset %zu", at);
            TP_TRY(pk_string(p, PK_BYTES, (size_t)pk_le(b, 8)));
            break;
        case 0x94: /* MEMOIZE */
            TP_TRY(pk_memo_put(p, p->n_memo));
            p->n_memo++;
            break;
        case 'q': /* BINPUT */
            TP_TRY(pk_need(p, 1, &b));
            TP_TRY(pk_memo_put(p, b[0]));
            break;
        case 'r': /* LONG_BINPUT */
            TP_TRY(pk_need(p, 4, &b));
            TP_TRY(pk_memo_put(p, (size_t)pk_le(b, 4)));
            break;
        case 'h': /* BINGET */
        case 'j': /* LONG_BINGET */ {
            TP_TRY(pk_need(p, op == 'h' ? 1 : 4, &b));
            size_t idx = (size_t)pk_le(b, op == 'h' ? 1 : 4);
            if (idx >= p->cap_memo || !p->memo[idx]) PK_FAIL(TP_ERR_CORRUPT, "memo %zu is unset at offset %zu", idx, at);
            TP_TRY(pk_push(p, p->memo[idx]));
            break;
        }
        case 0x93: /* STACK_GLOBAL */ {
            pk_val *name = NULL, *module = NULL;
            TP_TRY(pk_pop(p, &name));
            TP_TRY(pk_pop(p, &module));
            if (name->kind != PK_STR || module->kind != PK_STR)
                PK_FAIL(TP_ERR_CORRUPT, "STACK_GLOBAL needs two strings at offset %zu", at);
            TP_TRY(pk_global(p, (const char *)module->bytes, module->len, (const char *)name->bytes, name->len));
            break;
        }
        case 'c': /* GLOBAL module\nname\n */ {
            const unsigned char *start = p->data + p->pos;
            const unsigned char *nl1 = memchr(start, '\n', p->size - p->pos);
            if (!nl1) PK_FAIL(TP_ERR_CORRUPT, "truncated GLOBAL at offset %zu", at);
            const unsigned char *nl2 = memchr(nl1 + 1, '\n', (size_t)(p->data + p->size - (nl1 + 1)));
            if (!nl2) PK_FAIL(TP_ERR_CORRUPT, "truncated GLOBAL at offset %zu", at);
            p->pos = (size_t)(nl2 + 1 - p->data);
            TP_TRY(pk_global(p, (const char *)start, (size_t)(nl1 - start), (const char *)nl1 + 1,
                             (size_t)(nl2 - nl1 - 1)));
            break;
        }
        case ')': TP_TRY(pk_push(p, pk_new(p, PK_TUPLE))); break;
        case ']': TP_TRY(pk_push(p, pk_new(p, PK_LIST))); break;
        case '}': TP_TRY(pk_push(p, pk_new(p, PK_DICT))); break;
        case 0x85: /* TUPLE1..3 */
        case 0x86:
        case 0x87: {
            int n = op - 0x84;
            pk_val *items[3], *t;
            for (int i = n - 1; i >= 0; i--) TP_TRY(pk_pop(p, &items[i]));
            t = pk_new(p, PK_TUPLE);
            for (int i = 0; t && i < n; i++)
                if (!pk_add_item(t, items[i])) t = NULL;
            TP_TRY(pk_push(p, t));
            break;
        }
        case '(': /* MARK */
            if (!pk_grow((void **)&p->marks, &p->cap_marks, p->n_marks + 1, sizeof *p->marks))
                return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
            p->marks[p->n_marks++] = p->n_stack;
            break;
        case 't': /* TUPLE */ {
            pk_val *t = NULL;
            TP_TRY(pk_collect(p, PK_TUPLE, &t));
            TP_TRY(pk_push(p, t));
            break;
        }
        case 'a': /* APPEND */ {
            pk_val *item = NULL, *list = NULL;
            TP_TRY(pk_pop(p, &item));
            TP_TRY(pk_pop(p, &list));
            if (list->kind != PK_LIST) PK_FAIL(TP_ERR_CORRUPT, "APPEND to a non-list at offset %zu", at);
            if (!pk_add_item(list, item)) return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
            TP_TRY(pk_push(p, list));
            break;
        }
        case 'e': /* APPENDS */
        case 'u': /* SETITEMS */ {
            pk_val *items = NULL, *c = NULL;
            TP_TRY(pk_collect(p, PK_TUPLE, &items));
            TP_TRY(pk_pop(p, &c));
            if (c->kind != (op == 'e' ? PK_LIST : PK_DICT))
                PK_FAIL(TP_ERR_CORRUPT, "%s to a %s at offset %zu", op == 'e' ? "APPENDS" : "SETITEMS",
                        op == 'e' ? "non-list" : "non-dict", at);
            if (op == 'u' && items->n % 2) PK_FAIL(TP_ERR_CORRUPT, "SETITEMS with an odd count at offset %zu", at);
            for (int64_t i = 0; i < items->n; i++)
                if (!pk_add_item(c, items->items[i])) return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
            TP_TRY(pk_push(p, c));
            break;
        }
        case 's': /* SETITEM */ {
            pk_val *value = NULL, *key = NULL, *d = NULL;
            TP_TRY(pk_pop(p, &value));
            TP_TRY(pk_pop(p, &key));
            TP_TRY(pk_pop(p, &d));
            if (d->kind != PK_DICT) PK_FAIL(TP_ERR_CORRUPT, "SETITEM to a non-dict at offset %zu", at);
            if (!pk_add_item(d, key) || !pk_add_item(d, value)) return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
            TP_TRY(pk_push(p, d));
            break;
        }
        case 'N': TP_TRY(pk_push(p, pk_new(p, PK_NONE))); break;
        case 0x88:
        case 0x89: {
            pk_val *v = pk_new(p, PK_BOOL);
            if (v) v->b = op == 0x88;
            TP_TRY(pk_push(p, v));
            break;
        }
        case 'K':
        case 'M':
        case 'J': {
            int n = op == 'K' ? 1 : op == 'M' ? 2 : 4;
            TP_TRY(pk_need(p, (size_t)n, &b));
            pk_val *v = pk_new(p, PK_INT);
            if (v) v->i = op == 'J' ? (int64_t)(int32_t)(uint32_t)pk_le(b, 4) : (int64_t)pk_le(b, n);
            TP_TRY(pk_push(p, v));
            break;
        }
        case 0x8a: /* LONG1 */ {
            TP_TRY(pk_need(p, 1, &b));
            int n = b[0];
            if (n > 8) PK_FAIL(TP_ERR_UNSUPPORTED, "integer of %d bytes at offset %zu is too large", n, at);
            TP_TRY(pk_need(p, (size_t)n, &b));
            uint64_t u = pk_le(b, n);
            if (n > 0 && n < 8 && (b[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n); /* sign-extend */
            pk_val *v = pk_new(p, PK_INT);
            if (v) v->i = (int64_t)u;
            TP_TRY(pk_push(p, v));
            break;
        }
        case 'G': { /* BINFLOAT, big-endian */
            TP_TRY(pk_need(p, 8, &b));
            uint64_t u = 0;
            for (int i = 0; i < 8; i++) u = (u << 8) | b[i];
            double d;
            memcpy(&d, &u, sizeof d);
            pk_val *v = pk_new(p, PK_FLOAT);
            if (v) v->f = d;
            TP_TRY(pk_push(p, v));
            break;
        }
        case 0x81: /* NEWOBJ */ {
            pk_val *args = NULL, *cls = NULL;
            TP_TRY(pk_pop(p, &args));
            TP_TRY(pk_pop(p, &cls));
            if (cls->kind != PK_CLASS || args->kind != PK_TUPLE || args->n != 0)
                PK_FAIL(TP_ERR_UNSUPPORTED, "object construction at offset %zu is not supported", at);
            pk_val *o = pk_new(p, PK_OBJECT);
            if (o) o->cls = cls->cls;
            TP_TRY(pk_push(p, o));
            break;
        }
        case 'b': /* BUILD */ {
            pk_val *state = NULL, *obj = NULL;
            TP_TRY(pk_pop(p, &state));
            TP_TRY(pk_pop(p, &obj));
            if (p->torch && obj->kind == PK_DICT && state->kind == PK_DICT) {
                /* torch.save of a state dict: OrderedDict attributes (_metadata), not items */
                TP_TRY(pk_push(p, obj));
                break;
            }
            if (obj->kind != PK_OBJECT || obj->state) PK_FAIL(TP_ERR_UNSUPPORTED, "BUILD at offset %zu is not supported", at);
            obj->state = state;
            TP_TRY(pk_push(p, obj));
            break;
        }
        case 'Q': /* BINPERSID (torch.save): ('storage', <class>, key, location, numel) */ {
            pk_val *pid = NULL;
            if (!p->torch) PK_FAIL(TP_ERR_UNSUPPORTED, "opcode 0x%02x at offset %zu is not supported", op, at);
            TP_TRY(pk_pop(p, &pid));
            if (pid->kind != PK_TUPLE || pid->n != 5 || pid->items[0]->kind != PK_STR ||
                pid->items[0]->len != 7 || memcmp(pid->items[0]->bytes, "storage", 7) != 0 ||
                pid->items[1]->kind != PK_CLASS || pid->items[1]->cls != PK_CLS_STORAGE || pid->items[2]->kind != PK_STR ||
                pid->items[4]->kind != PK_INT || pid->items[4]->i < 0)
                PK_FAIL(TP_ERR_UNSUPPORTED, "persistent id at offset %zu is not a storage reference", at);
            pk_val *st = pk_new(p, PK_STORAGE);
            if (st) st->state = pid;
            TP_TRY(pk_push(p, st));
            break;
        }
        case 'R': /* REDUCE (torch.save): only its tensor rebuilders and OrderedDict() */ {
            pk_val *args = NULL, *fn = NULL;
            if (!p->torch) PK_FAIL(TP_ERR_UNSUPPORTED, "opcode 0x%02x at offset %zu is not supported", op, at);
            TP_TRY(pk_pop(p, &args));
            TP_TRY(pk_pop(p, &fn));
            if (fn->kind != PK_CLASS || args->kind != PK_TUPLE)
                PK_FAIL(TP_ERR_UNSUPPORTED, "call at offset %zu is not supported", at);
            pk_val *r = NULL;
            if (fn->cls == PK_CLS_ORDERED_DICT && args->n == 0) {
                r = pk_new(p, PK_DICT);
            } else if (fn->cls == PK_CLS_REBUILD_TENSOR && args->n >= 6 && args->items[0]->kind == PK_STORAGE) {
                r = pk_new(p, PK_TTENSOR);
                if (r) r->state = args;
            } else if (fn->cls == PK_CLS_REBUILD_PARAM && args->n >= 1 && args->items[0]->kind == PK_TTENSOR) {
                r = args->items[0];
            } else {
                PK_FAIL(TP_ERR_UNSUPPORTED, "call at offset %zu is not one of torch.save's tensor rebuilders", at);
            }
            TP_TRY(pk_push(p, r));
            break;
        }
        default: PK_FAIL(TP_ERR_UNSUPPORTED, "opcode 0x%02x at offset %zu is not supported", op, at);
        }
    }
}

/* tensorplay DType codes. */
static const struct {
    int code;
    tp_dtype dtype;
} g_dtype_codes[] = {{0, TP_UINT8},  {1, TP_INT8},    {2, TP_INT16},     {3, TP_INT32},  {4, TP_INT64},
                     {8, TP_FLOAT32}, {9, TP_FLOAT64}, {10, TP_FLOAT16}, {11, TP_BFLOAT16}, {12, TP_BOOL}};

#define DTYPE_CODE_UNDEFINED 22

static bool dtype_from_code(int64_t code, tp_dtype *out) {
    for (size_t i = 0; i < TP_ARRAY_LEN(g_dtype_codes); i++)
        if (g_dtype_codes[i].code == code) {
            *out = g_dtype_codes[i].dtype;
            return true;
        }
    return false;
}

int tp__sd_dtype_code(tp_dtype d) {
    for (size_t i = 0; i < TP_ARRAY_LEN(g_dtype_codes); i++)
        if (g_dtype_codes[i].dtype == d) return g_dtype_codes[i].code;
    return DTYPE_CODE_UNDEFINED;
}

static tp_status pk_int_list(const pk_val *v, const char *what, int *n, int64_t *out) {
    if (v->kind != PK_LIST && v->kind != PK_TUPLE) PK_FAIL(TP_ERR_CORRUPT, "tensor %s is not a list", what);
    if (v->n > TP_MAX_DIMS) PK_FAIL(TP_ERR_UNSUPPORTED, "tensor %s has %" PRId64 " entries (more than %d dims)", what, v->n, TP_MAX_DIMS);
    for (int64_t i = 0; i < v->n; i++) {
        if (v->items[i]->kind != PK_INT || v->items[i]->i < 0)
            PK_FAIL(TP_ERR_CORRUPT, "tensor %s[%" PRId64 "] is not a non-negative int", what, i);
        out[i] = v->items[i]->i;
    }
    *n = (int)v->n;
    return TP_OK;
}

/* Bytes a view needs: (offset + sum((size-1)*stride) + 1) * itemsize, or 0
 * for an empty view; false on overflow. */
bool tp__sd_view_bytes(int ndim, const int64_t *sizes, const int64_t *strides, int64_t offset, size_t itemsize,
                       uint64_t *out) {
    int64_t last = offset;
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] == 0) {
            *out = 0;
            return true;
        }
        int64_t step;
        if (!tp_mul_overflow_i64(sizes[d] - 1, strides[d], &step) || !tp_add_overflow_i64(last, step, &last))
            return false;
    }
    int64_t count;
    if (!tp_add_overflow_i64(last, 1, &count) || !tp_mul_overflow_i64(count, (int64_t)itemsize, &count)) return false;
    *out = (uint64_t)count;
    return true;
}

static tp_status pk_tensor(const pk_val *o, const tp_doc_limits *lim, tp_value *out) {
    const pk_val *s = o->state;
    if (!s || s->kind != PK_TUPLE || s->n != 7) PK_FAIL(TP_ERR_UNSUPPORTED, "tensor state is not the expected 7-tuple");
    const pk_val *data = s->items[0];
    if (data->kind != PK_BYTES) PK_FAIL(TP_ERR_CORRUPT, "tensor data is not bytes");
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    int nd, ns;
    TP_TRY(pk_int_list(s->items[1], "sizes", &nd, sizes));
    TP_TRY(pk_int_list(s->items[2], "strides", &ns, strides));
    if (nd != ns) PK_FAIL(TP_ERR_CORRUPT, "tensor has %d sizes but %d strides", nd, ns);
    if (s->items[3]->kind != PK_INT || s->items[4]->kind != PK_INT || s->items[4]->i < 0)
        PK_FAIL(TP_ERR_CORRUPT, "tensor dtype code or offset is not a valid int");
    tp_dtype dt;
    if (!dtype_from_code(s->items[3]->i, &dt)) PK_FAIL(TP_ERR_UNSUPPORTED, "tensor dtype code %" PRId64 " is not supported", s->items[3]->i);
    size_t itemsize = tp_dtype_size(dt);
    uint64_t need;
    if (!tp__sd_view_bytes(nd, sizes, strides, s->items[4]->i, itemsize, &need))
        PK_FAIL(TP_ERR_CORRUPT, "tensor view size overflows");
    if (need > data->len) PK_FAIL(TP_ERR_CORRUPT, "tensor view needs %" PRIu64 " bytes but has %zu", need, data->len);
    if (data->len % itemsize) PK_FAIL(TP_ERR_CORRUPT, "tensor data of %zu bytes is not a multiple of %zu", data->len, itemsize);
    if (data->len > lim->tensor_bytes)
        PK_FAIL(TP_ERR_UNSUPPORTED, "a tensor of %zu bytes exceeds the limit of %" PRIu64 " bytes (max_tensor_bytes)", data->len,
                lim->tensor_bytes);
    /* copy the storage bytes (never more than the pickle holds), then view them */
    int64_t n_storage = (int64_t)(data->len / itemsize);
    tp_tensor *flat, *view;
    TP_TRY(tp_tensor_from_data(dt, 1, &n_storage, data->bytes, &flat));
    tp_status st = tp_tensor_as_strided(flat, nd, sizes, strides, s->items[4]->i, &view);
    tp_tensor_free(flat);
    TP_TRY(st);
    *out = tp_value_tensor(view);
    return TP_OK;
}

/* A torch.save tensor: the storage's bytes (fetched by key) viewed with
 * the rebuild arguments (storage, offset, size, stride, requires_grad, ...). */
static tp_status pk_torch_tensor(const pk_val *t, const pk_reader *p, const tp_doc_limits *lim, tp_value *out) {
    const pk_val *a = t->state, *pid = a->items[0]->state;
    if (a->items[1]->kind != PK_INT || a->items[1]->i < 0) PK_FAIL(TP_ERR_CORRUPT, "tensor offset is not a valid int");
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    int nd, ns;
    TP_TRY(pk_int_list(a->items[2], "sizes", &nd, sizes));
    TP_TRY(pk_int_list(a->items[3], "strides", &ns, strides));
    if (nd != ns) PK_FAIL(TP_ERR_CORRUPT, "tensor has %d sizes but %d strides", nd, ns);
    tp_dtype dt = (tp_dtype)pid->items[1]->i;
    int64_t numel = pid->items[4]->i;
    const pk_val *key = pid->items[2];
    char k[64];
    if (key->len == 0 || key->len >= sizeof k || memchr(key->bytes, 0, key->len) || memchr(key->bytes, '/', key->len))
        PK_FAIL(TP_ERR_CORRUPT, "storage key is not a plain name");
    memcpy(k, key->bytes, key->len);
    k[key->len] = '\0';
    uint64_t need;
    if (!tp__sd_view_bytes(nd, sizes, strides, a->items[1]->i, tp_dtype_size(dt), &need))
        PK_FAIL(TP_ERR_CORRUPT, "tensor view size overflows");
    if (numel > INT64_MAX / 16 || need > (uint64_t)numel * tp_dtype_size(dt))
        PK_FAIL(TP_ERR_CORRUPT, "tensor view needs %" PRIu64 " bytes but storage '%s' has %" PRId64 " elements", need, k,
                numel);
    if ((uint64_t)numel * tp_dtype_size(dt) > lim->tensor_bytes)
        PK_FAIL(TP_ERR_UNSUPPORTED, "a storage of %" PRIu64 " bytes exceeds the limit of %" PRIu64 " bytes (max_tensor_bytes)",
                (uint64_t)numel * tp_dtype_size(dt), lim->tensor_bytes);
    if (!p->storage) PK_FAIL(TP_ERR_UNSUPPORTED, "no storages to read tensor data from");
    tp_tensor *flat = NULL, *view = NULL;
    TP_TRY(p->storage(p->storage_ctx, k, dt, numel, &flat));
    tp_status st = tp_tensor_as_strided(flat, nd, sizes, strides, a->items[1]->i, &view);
    tp_tensor_free(flat);
    TP_TRY(st);
    *out = tp_value_tensor(view);
    return TP_OK;
}

/* Convert a pickled value. `ellipsis`: where an Ellipsis may appear (set to
 * true when the value is one); NULL refuses it. */
static tp_status pk_to_value(const pk_reader *p, const pk_val *v, const tp_doc_limits *lim, int depth, size_t *budget,
                              tp_value *out, bool *ellipsis) {
    *out = tp_value_none();
    if ((size_t)depth > lim->depth) PK_FAIL(TP_ERR_CORRUPT, "nesting deeper than %zu (max_depth)", lim->depth);
    if (*budget == 0) PK_FAIL(TP_ERR_CORRUPT, "more than %zu values (shared objects expand too far)", PK_MAX_OBJECTS);
    (*budget)--;
    switch (v->kind) {
    case PK_NONE: return TP_OK;
    case PK_BOOL: *out = tp_value_bool(v->b); return TP_OK;
    case PK_INT: *out = tp_value_int(v->i); return TP_OK;
    case PK_FLOAT: *out = tp_value_float(v->f); return TP_OK;
    case PK_STR: {
        if (memchr(v->bytes, 0, v->len)) PK_FAIL(TP_ERR_UNSUPPORTED, "string with a NUL byte");
        char *s = tp_malloc(v->len + 1);
        if (!s) return tp_error(TP_ERR_NOMEM, "pickle: out of memory");
        memcpy(s, v->bytes, v->len);
        s[v->len] = '\0';
        tp_status st = tp_value_str(s, out);
        tp_free(s);
        return st;
    }
    case PK_ELLIPSIS:
        if (!ellipsis) PK_FAIL(TP_ERR_UNSUPPORTED, "Ellipsis is only supported as a tensor index");
        *ellipsis = true;
        return TP_OK;
    case PK_TUPLE:
    case PK_LIST: {
        TP_TRY(v->kind == PK_TUPLE ? tp_value_tuple(v->n, out) : tp_value_list(v->n, out));
        for (int64_t i = 0; i < v->n; i++) {
            tp_value item;
            tp_status st = pk_to_value(p, v->items[i], lim, depth + 1, budget, &item, NULL);
            if (st == TP_OK) st = tp_value_seq_set(out, i, &item);
            if (st != TP_OK) {
                tp_value_clear(out);
                return st;
            }
        }
        return TP_OK;
    }
    case PK_DICT: {
        TP_TRY(tp_value_dict(out));
        for (int64_t i = 0; i + 1 < v->n; i += 2) {
            const pk_val *k = v->items[i];
            if (k->kind != PK_STR || memchr(k->bytes, 0, k->len)) {
                tp_value_clear(out);
                PK_FAIL(TP_ERR_UNSUPPORTED, "dict keys must be strings");
            }
            if (k->len > lim->name) {
                tp_value_clear(out);
                PK_FAIL(TP_ERR_CORRUPT, "a dict key of %zu bytes exceeds the limit of %zu (max_name_bytes)", k->len, lim->name);
            }
            char key[TP_LIMIT_NAME + 1];
            memcpy(key, k->bytes, k->len);
            key[k->len] = '\0';
            if (tp_value_dict_get(out, key)) {
                tp_value_clear(out);
                PK_FAIL(TP_ERR_CORRUPT, "duplicate dict key '%.64s'", key);
            }
            tp_value item;
            tp_status st = pk_to_value(p, v->items[i + 1], lim, depth + 1, budget, &item, NULL);
            if (st == TP_OK) st = tp_value_dict_set(out, key, &item);
            if (st != TP_OK) {
                tp_value_clear(out);
                return st;
            }
        }
        return TP_OK;
    }
    case PK_OBJECT:
        if (v->cls == PK_CLS_DTYPE) {
            if (!v->state || v->state->kind != PK_INT) PK_FAIL(TP_ERR_CORRUPT, "dtype state is not an int");
            if (v->state->i == DTYPE_CODE_UNDEFINED) return TP_OK; /* None: "no dtype" */
            tp_dtype d;
            if (!dtype_from_code(v->state->i, &d)) PK_FAIL(TP_ERR_UNSUPPORTED, "dtype code %" PRId64 " is not supported", v->state->i);
            *out = tp_value_dtype(d);
            return TP_OK;
        }
        return pk_tensor(v, lim, out);
    case PK_TTENSOR: return pk_torch_tensor(v, p, lim, out);
    case PK_BYTES: PK_FAIL(TP_ERR_UNSUPPORTED, "bytes values are not supported");
    default: PK_FAIL(TP_ERR_UNSUPPORTED, "a class object is not a value");
    }
}

tp_status tp__sd_pickle_read(const void *data, size_t size, const tp_doc_limits *lim, tp_value *out, bool *ellipsis) {
    pk_reader p = {.data = data, .size = size};
    pk_val *root = NULL;
    tp_status st = pk_run(&p, &root);
    size_t budget = PK_MAX_OBJECTS;
    if (st == TP_OK) st = pk_to_value(&p, root, lim, 0, &budget, out, ellipsis);
    pk_free(&p);
    return st;
}

tp_status tp__sd_torch_pickle_read(const void *data, size_t size, const tp_doc_limits *lim, tp__sd_storage_fn storage,
                                   void *storage_ctx, tp_value *out) {
    pk_reader p = {.data = data, .size = size, .torch = true, .storage = storage, .storage_ctx = storage_ctx};
    pk_val *root = NULL;
    tp_status st = pk_run(&p, &root);
    size_t budget = PK_MAX_OBJECTS;
    if (st == TP_OK) st = pk_to_value(&p, root, lim, 0, &budget, out, NULL);
    pk_free(&p);
    return st;
}

tp_status tp__serde_examples_from_pickle(const void *data, size_t size, const tp_doc_limits *limits, tp_value *out) {
    *out = tp_value_none();
    TP_CHECK(data || size == 0, TP_ERR_INVALID_ARG, "pickle: no data");
    tp_doc_limits dflt = tp__doc_limits_default();
    tp_value v;
    TP_TRY(tp__sd_pickle_read(data, size, limits ? limits : &dflt, &v, NULL));
    if (v.kind != TP_VAL_DICT) {
        tp_status st = tp_error(TP_ERR_CORRUPT, "pickle: example inputs are a %s, not a dict", tp_value_kind_name(v.kind));
        tp_value_clear(&v);
        return st;
    }
    *out = v;
    return TP_OK;
}

/* ---- writing pickles ---------------------------------------------------- */

static void pk_put(tp_sb *sb, const void *data, size_t n) { tp__sb_append(sb, data, n); }

static void pk_byte(tp_sb *sb, unsigned char c) { pk_put(sb, &c, 1); }

static void pk_u32(tp_sb *sb, uint32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    pk_put(sb, b, 4);
}

static void pk_write_int(tp_sb *sb, int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
        pk_byte(sb, 'J');
        pk_u32(sb, (uint32_t)(int32_t)v);
    } else {
        pk_byte(sb, 0x8a);
        pk_byte(sb, 8);
        for (int i = 0; i < 8; i++) pk_byte(sb, (unsigned char)((uint64_t)v >> (8 * i)));
    }
}

static void pk_write_bytes(tp_sb *sb, int op4, int op8, const void *data, size_t n) {
    if (n <= UINT32_MAX) {
        pk_byte(sb, (unsigned char)op4);
        pk_u32(sb, (uint32_t)n);
    } else {
        pk_byte(sb, (unsigned char)op8);
        for (int i = 0; i < 8; i++) pk_byte(sb, (unsigned char)((uint64_t)n >> (8 * i)));
    }
    pk_put(sb, data, n);
}

static tp_status pk_write_value(tp_sb *sb, const tp_value *v, int depth) {
    TP_CHECK(depth <= TP_LIMIT_DEPTH, TP_ERR_INVALID_ARG, "example input nested deeper than %d", TP_LIMIT_DEPTH);
    switch (v->kind) {
    case TP_VAL_NONE: pk_byte(sb, 'N'); return TP_OK;
    case TP_VAL_BOOL: pk_byte(sb, v->u.b ? 0x88 : 0x89); return TP_OK;
    case TP_VAL_INT: pk_write_int(sb, v->u.i); return TP_OK;
    case TP_VAL_FLOAT: {
        uint64_t u;
        memcpy(&u, &v->u.f, sizeof u);
        pk_byte(sb, 'G');
        for (int i = 7; i >= 0; i--) pk_byte(sb, (unsigned char)(u >> (8 * i)));
        return TP_OK;
    }
    case TP_VAL_STR: pk_write_bytes(sb, 'X', 0x8d, v->u.s, strlen(v->u.s)); return TP_OK;
    case TP_VAL_TUPLE:
    case TP_VAL_LIST:
        if (v->kind == TP_VAL_LIST) pk_byte(sb, ']');
        pk_byte(sb, '(');
        for (int64_t i = 0; i < v->u.seq.n; i++) TP_TRY(pk_write_value(sb, &v->u.seq.items[i], depth + 1));
        pk_byte(sb, v->kind == TP_VAL_LIST ? 'e' : 't');
        return TP_OK;
    case TP_VAL_DICT:
        pk_byte(sb, '}');
        pk_byte(sb, '(');
        for (int64_t i = 0; i < v->u.seq.n; i++) {
            size_t klen = strlen(v->u.seq.keys[i]);
            TP_CHECK(klen <= TP_LIMIT_NAME, TP_ERR_UNSUPPORTED,
                     "example input key '%.32s...' of %zu bytes exceeds the limit of %d bytes (TP_LIMIT_NAME)",
                     v->u.seq.keys[i], klen, TP_LIMIT_NAME);
            pk_write_bytes(sb, 'X', 0x8d, v->u.seq.keys[i], klen);
            TP_TRY(pk_write_value(sb, &v->u.seq.items[i], depth + 1));
        }
        pk_byte(sb, 'u');
        return TP_OK;
    case TP_VAL_TENSOR: {
        tp_tensor *t = v->u.tensor;
        TP_CHECK(!tp_tensor_is_meta(t), TP_ERR_INVALID_ARG, "a meta tensor has no data to pickle");
        tp_tensor *c;
        TP_TRY(tp_tensor_contiguous(t, &c));
        static const char cls[] = "ctensorplay._C\nTensorBase\n";
        pk_put(sb, cls, sizeof cls - 1);
        pk_byte(sb, ')');
        pk_byte(sb, 0x81);
        pk_byte(sb, '(');
        size_t nbytes = (size_t)tp_tensor_numel(c) * tp_dtype_size(tp_tensor_dtype(c));
        pk_write_bytes(sb, 'B', 0x8e, nbytes ? tp_tensor_data(c) : "", nbytes);
        int64_t strides[TP_MAX_DIMS];
        tp__contiguous_strides(tp_tensor_ndim(c), tp_tensor_sizes(c), strides);
        for (int list = 0; list < 2; list++) {
            pk_byte(sb, ']');
            if (tp_tensor_ndim(c)) {
                pk_byte(sb, '(');
                for (int d = 0; d < tp_tensor_ndim(c); d++) pk_write_int(sb, list ? strides[d] : tp_tensor_sizes(c)[d]);
                pk_byte(sb, 'e');
            }
        }
        pk_write_int(sb, tp__sd_dtype_code(tp_tensor_dtype(c)));
        pk_write_int(sb, 0);  /* storage offset */
        pk_write_int(sb, -1); /* device: CPU */
        pk_byte(sb, 0x89);    /* requires_grad */
        pk_byte(sb, 't');
        pk_byte(sb, 'b');
        tp_tensor_free(c);
        return TP_OK;
    }
    case TP_VAL_DTYPE:
    case TP_VAL_NODE:
        break;
    }
    return tp_error(TP_ERR_UNSUPPORTED, "a %s example input cannot be pickled", tp_value_kind_name(v->kind));
}

tp_status tp__serde_examples_to_pickle(const tp_value *examples, void **data, size_t *size) {
    *data = NULL;
    *size = 0;
    TP_CHECK(!examples || examples->kind == TP_VAL_DICT || examples->kind == TP_VAL_NONE, TP_ERR_INVALID_ARG,
             "example inputs must be a dict, not %s", tp_value_kind_name(examples->kind));
    tp_sb sb = {0};
    pk_byte(&sb, 0x80);
    pk_byte(&sb, 4);
    tp_value empty = tp_value_none();
    tp_status st = TP_OK;
    if (examples && examples->kind == TP_VAL_DICT) st = pk_write_value(&sb, examples, 0);
    else if ((st = tp_value_dict(&empty)) == TP_OK) st = pk_write_value(&sb, &empty, 0);
    tp_value_clear(&empty);
    pk_byte(&sb, '.');
    if (st != TP_OK) {
        tp__sb_free(&sb);
        return st;
    }
    size_t n = sb.len;
    char *out;
    TP_TRY(tp__sb_finish(&sb, &out));
    *data = out;
    *size = n;
    return TP_OK;
}

/* The dtype pickle tensorplay writes (protocol 4, one frame). */
static const unsigned char g_dtype_pickle_head[] = {0x80, 0x04, 0x95, 0x1e, 0, 0, 0, 0, 0, 0, 0, 0x8c, 0x0a,
                                                    't', 'e', 'n', 's', 'o', 'r', 'p', 'l', 'a', 'y', 0x94, 0x8c,
                                                    0x05, 'D', 'T', 'y', 'p', 'e', 0x94, 0x93, 0x94, ')', 0x81, 0x94,
                                                    'K'};

/* base64 ------------------------------------------------------------------ */

static const char g_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const unsigned char *data, size_t n) {
    size_t out_len = 4 * ((n + 2) / 3);
    char *out = tp_malloc(out_len + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16;
        if (i + 1 < n) v |= (uint32_t)data[i + 1] << 8;
        if (i + 2 < n) v |= data[i + 2];
        out[o++] = g_b64[(v >> 18) & 63];
        out[o++] = g_b64[(v >> 12) & 63];
        out[o++] = i + 1 < n ? g_b64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? g_b64[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

/* Strict base64 (padding required, no whitespace). *out is tp_malloc'd.
 * TP_ERR_CORRUPT (no message: the caller names the field) for bad text,
 * TP_ERR_NOMEM when the buffer cannot be allocated. */
tp_status tp__sd_b64_decode(const char *s, unsigned char **out, size_t *out_len) {
    size_t n = strlen(s);
    *out = NULL;
    if (n % 4) return TP_ERR_CORRUPT;
    unsigned char *buf = tp_malloc(n / 4 * 3 + 1);
    if (!buf) return tp_error(TP_ERR_NOMEM, "out of memory decoding %zu bytes of base64", n);
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            char c = s[i + k];
            const char *p = c ? strchr(g_b64, c) : NULL;
            int d;
            if (c == '=' && i + 4 == n && k >= 2) {
                d = 0;
                pad++;
            } else if (p && !pad) {
                d = (int)(p - g_b64);
            } else {
                tp_free(buf);
                return TP_ERR_CORRUPT;
            }
            v = (v << 6) | (uint32_t)d;
        }
        buf[o++] = (unsigned char)(v >> 16);
        if (pad < 2) buf[o++] = (unsigned char)(v >> 8);
        if (pad < 1) buf[o++] = (unsigned char)v;
    }
    *out = buf;
    *out_len = o;
    return TP_OK;
}

/* A dtype as tensorplay's pickle, base64 (new string). */
char *tp__sd_dtype_pickle_b64(int code) {
    unsigned char buf[sizeof g_dtype_pickle_head + 3];
    memcpy(buf, g_dtype_pickle_head, sizeof g_dtype_pickle_head);
    buf[sizeof g_dtype_pickle_head] = (unsigned char)code;
    buf[sizeof g_dtype_pickle_head + 1] = 'b';
    buf[sizeof g_dtype_pickle_head + 2] = '.';
    return b64_encode(buf, sizeof buf);
}
