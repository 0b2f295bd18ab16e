/*
 * tpexport._C - the CPython extension behind the tpexport package.
 *
 * Thin, faithful bindings of the C API (include/tpexport/): programs,
 * archives, ONNX import, the unlifted module, decomposition tables. The
 * Python layer (tpexport/__init__.py) builds tensorplay's ExportedProgram
 * API on top of these.
 *
 * Arrays. An input that exports the buffer protocol (numpy arrays, memory
 * views, ...) becomes a tp_tensor that borrows its memory when the buffer is
 * writable, natively ordered and its strides are non-negative multiples of
 * the item size; the Py_buffer is held until the library releases the last
 * view of the tensor (the release callback takes the GIL). Other buffers
 * are copied. Output tensors become numpy arrays over a TensorRef, an
 * object that holds one reference to the tp_tensor and exports its memory
 * through the buffer protocol, so the array views the result without a copy.
 *
 * Errors. A failing tp_status raises the exception its kind maps to, with
 * tp_last_error() as the message and the status name in `.status`.
 *
 * The GIL is released around loading, saving, ONNX import and program
 * calls.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include <tpexport/alloc.h>
#include <tpexport/archive.h>
#include <tpexport/onnx.h>
#include <tpexport/ops.h>
#include <tpexport/program.h>
#include <tpexport/run.h>
#include <tpexport/tpexport.h>
#include <tpexport/version.h>

/* ---- module state (one interpreter) ----------------------------------- */

static PyObject *g_asarray;       /* numpy.asarray, imported on first use */
static PyObject *g_from_dlpack;   /* numpy.from_dlpack */
static PyTypeObject *g_prog_cls;  /* class instantiated for new programs */

/* ---- errors --------------------------------------------------------------- */

static PyObject *status_exc_type(tp_status st) {
    switch (st) {
    case TP_ERR_INDEX: return PyExc_IndexError;
    case TP_ERR_NOT_FOUND: return PyExc_KeyError;
    case TP_ERR_STATE: return PyExc_RuntimeError;
    case TP_ERR_CANCELLED: return PyExc_RuntimeError;
    case TP_ERR_IO: return PyExc_OSError;
    case TP_ERR_UNSUPPORTED: return PyExc_NotImplementedError;
    default: break;
    }
    switch (tp_status_kind(st)) {
    case TP_ERR_INVALID_ARG: return PyExc_ValueError;
    case TP_ERR_TYPE: return PyExc_TypeError;
    case TP_ERR_SHAPE: return PyExc_ValueError;
    case TP_ERR_CORRUPT: return PyExc_ValueError;
    case TP_ERR_NOMEM: return PyExc_MemoryError;
    default: return PyExc_RuntimeError;
    }
}

/* Raise for a failing status; returns NULL. */
static PyObject *raise_status(tp_status st) {
    const char *msg = tp_last_error();
    if (!msg || !*msg) msg = tp_status_str(st);
    PyObject *type = status_exc_type(st);
    PyObject *text = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace");
    if (!text) return NULL;
    PyObject *exc = PyObject_CallOneArg(type, text);
    Py_DECREF(text);
    if (!exc) return NULL;
    PyObject *name = PyUnicode_FromString(tp_status_str(st));
    if (name) {
        if (PyObject_SetAttrString(exc, "status", name) < 0) PyErr_Clear();
        Py_DECREF(name);
    } else {
        PyErr_Clear();
    }
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
    return NULL;
}

/* An error the extension itself detects, raised like a library error. */
static PyObject *raise_msg(tp_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tp_verror(st, fmt, ap);
    va_end(ap);
    return raise_status(st);
}

static PyObject *str_or_none(const char *s) {
    if (!s) Py_RETURN_NONE;
    return PyUnicode_FromString(s);
}

/* ---- TensorRef: a buffer exporter holding one tensor reference ------------ */

typedef struct {
    PyObject_HEAD
    tp_tensor *t;
    int readonly;
    int exports;
    Py_ssize_t shape[TP_MAX_DIMS];
    Py_ssize_t strides[TP_MAX_DIMS];
} TensorRefObject;

static PyTypeObject TensorRef_Type;

static const char *dtype_format(tp_dtype d) {
    switch (d) {
    case TP_FLOAT32: return "f";
    case TP_FLOAT64: return "d";
    case TP_FLOAT16: return "e";
    case TP_INT64: return sizeof(long) == 8 ? "l" : "q";
    case TP_INT32: return "i";
    case TP_INT16: return "h";
    case TP_INT8: return "b";
    case TP_UINT8: return "B";
    case TP_BOOL: return "?";
    default: return NULL;
    }
}

static char g_empty_byte;

static int tensorref_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    TensorRefObject *r = (TensorRefObject *)self;
    if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE && r->readonly) {
        PyErr_SetString(PyExc_BufferError, "tensor is read-only");
        view->obj = NULL;
        return -1;
    }
    tp_tensor *t = r->t;
    const char *fmt = dtype_format(tp_tensor_dtype(t));
    if (!fmt) {
        PyErr_Format(PyExc_BufferError, "dtype %s has no buffer format", tp_dtype_name(tp_tensor_dtype(t)));
        view->obj = NULL;
        return -1;
    }
    int nd = tp_tensor_ndim(t);
    Py_ssize_t item = (Py_ssize_t)tp_dtype_size(tp_tensor_dtype(t));
    const int64_t *sz = tp_tensor_sizes(t), *st = tp_tensor_strides(t);
    for (int i = 0; i < nd; i++) {
        r->shape[i] = (Py_ssize_t)sz[i];
        r->strides[i] = (Py_ssize_t)(st[i] * item);
    }
    void *data = tp_tensor_data(t);
    view->buf = data ? data : &g_empty_byte;
    view->obj = self;
    Py_INCREF(self);
    view->len = (Py_ssize_t)tp_tensor_numel(t) * item;
    view->readonly = r->readonly;
    view->itemsize = item;
    view->format = (flags & PyBUF_FORMAT) ? (char *)fmt : NULL;
    view->ndim = nd;
    view->shape = (flags & PyBUF_ND) ? r->shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? r->strides : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    if (!(flags & PyBUF_STRIDES) && !tp_tensor_is_contiguous(t)) {
        Py_DECREF(self);
        view->obj = NULL;
        PyErr_SetString(PyExc_BufferError, "tensor is not contiguous: request strides");
        return -1;
    }
    r->exports++;
    return 0;
}

static void tensorref_releasebuffer(PyObject *self, Py_buffer *Py_UNUSED(view)) {
    ((TensorRefObject *)self)->exports--;
}

static PyBufferProcs tensorref_as_buffer = {tensorref_getbuffer, tensorref_releasebuffer};

static void tensorref_dealloc(PyObject *self) {
    TensorRefObject *r = (TensorRefObject *)self;
    tp_tensor_free(r->t);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *tensorref_repr(PyObject *self) {
    TensorRefObject *r = (TensorRefObject *)self;
    return PyUnicode_FromFormat("<tpexport._C.TensorRef %s ndim=%d>", tp_dtype_name(tp_tensor_dtype(r->t)),
                                tp_tensor_ndim(r->t));
}

static PyTypeObject TensorRef_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tpexport._C.TensorRef",
    .tp_basicsize = sizeof(TensorRefObject),
    .tp_dealloc = tensorref_dealloc,
    .tp_repr = tensorref_repr,
    .tp_as_buffer = &tensorref_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Holds one reference to a tpexport tensor and exports its memory (buffer protocol).",
};

static int import_numpy(void) {
    if (g_asarray) return 0;
    PyObject *np = PyImport_ImportModule("numpy");
    if (!np) return -1;
    g_asarray = PyObject_GetAttrString(np, "asarray");
    g_from_dlpack = PyObject_GetAttrString(np, "from_dlpack");
    Py_DECREF(np);
    if (!g_from_dlpack) PyErr_Clear(); /* numpy < 1.22: DLPack objects go through asarray */
    if (g_asarray && !g_from_dlpack) {
        g_from_dlpack = g_asarray;
        Py_INCREF(g_from_dlpack);
    }
    return g_asarray ? 0 : -1;
}

/* A numpy array viewing t (t retained; bfloat16 is converted to float32). */
static PyObject *tensor_to_array(tp_tensor *t, int readonly) {
    if (tp_tensor_is_meta(t))
        return raise_msg(TP_ERR_STATE, "tensor has no data (a meta tensor of dtype %s)",
                         tp_dtype_name(tp_tensor_dtype(t)));
    if (import_numpy() < 0) return NULL;
    tp_tensor *held;
    if (tp_tensor_dtype(t) == TP_BFLOAT16) {
        tp_status st = tp_tensor_to(t, TP_FLOAT32, &held);
        if (st != TP_OK) return raise_status(st);
    } else {
        held = tp_tensor_retain(t);
    }
    TensorRefObject *r = PyObject_New(TensorRefObject, &TensorRef_Type);
    if (!r) {
        tp_tensor_free(held);
        return NULL;
    }
    r->t = held;
    r->readonly = readonly;
    r->exports = 0;
    PyObject *arr = PyObject_CallOneArg(g_asarray, (PyObject *)r);
    Py_DECREF(r);
    return arr;
}

/* ---- Python -> tp_value ------------------------------------------------- */

typedef struct {
    Py_buffer view;
} borrow_ctx;

static void release_borrowed(void *ctx, void *Py_UNUSED(data)) {
    borrow_ctx *c = ctx;
    if (!Py_IsInitialized()) return; /* interpreter gone: nothing to release */
    PyGILState_STATE g = PyGILState_Ensure();
    PyBuffer_Release(&c->view);
    PyMem_RawFree(c);
    PyGILState_Release(g);
}

static int format_dtype(const char *fmt, Py_ssize_t itemsize, tp_dtype *out) {
    if (!fmt) fmt = "B";
    char order = 0;
    if (*fmt == '@' || *fmt == '=' || *fmt == '<' || *fmt == '>' || *fmt == '!') order = *fmt++;
    const uint16_t probe = 1;
    int little = *(const uint8_t *)&probe == 1;
    if ((order == '>' || order == '!') && little && itemsize > 1) {
        raise_msg(TP_ERR_TYPE, "buffer format '%s': non-native byte order is not supported", fmt - 1);
        return -1;
    }
    if (order == '<' && !little && itemsize > 1) {
        raise_msg(TP_ERR_TYPE, "buffer format '%s': non-native byte order is not supported", fmt - 1);
        return -1;
    }
    if (fmt[0] == 0 || fmt[1] != 0) {
        raise_msg(TP_ERR_TYPE, "unsupported buffer format '%s'", fmt);
        return -1;
    }
    tp_dtype d;
    switch (fmt[0]) {
    case 'f': d = TP_FLOAT32; break;
    case 'd': d = TP_FLOAT64; break;
    case 'e': d = TP_FLOAT16; break;
    case 'q': case 'l': case 'n': d = itemsize == 8 ? TP_INT64 : TP_INT32; break;
    case 'i': d = itemsize == 4 ? TP_INT32 : TP_INT64; break;
    case 'h': d = TP_INT16; break;
    case 'b': d = TP_INT8; break;
    case 'B': case 'c': d = TP_UINT8; break;
    case '?': d = TP_BOOL; break;
    default:
        raise_msg(TP_ERR_TYPE, "buffer format '%s' has no tpexport dtype (unsigned integers wider than 8 bits, "
                  "complex and object arrays are not supported)", fmt);
        return -1;
    }
    if ((Py_ssize_t)tp_dtype_size(d) != itemsize) {
        raise_msg(TP_ERR_TYPE, "buffer format '%s' with item size %zd does not match %s", fmt, itemsize,
                  tp_dtype_name(d));
        return -1;
    }
    *out = d;
    return 0;
}

/* A tensor for object o exporting the buffer protocol: borrowed when
 * possible, else copied. Returns -1 with an exception set. */
static int buffer_to_tensor(PyObject *o, tp_tensor **out) {
    borrow_ctx *c = PyMem_RawMalloc(sizeof *c);
    if (!c) {
        PyErr_NoMemory();
        return -1;
    }
    /* Read-only buffers are copied (a program may write to its inputs). */
    if (PyObject_GetBuffer(o, &c->view, PyBUF_RECORDS_RO) < 0) {
        PyMem_RawFree(c);
        return -1;
    }
    int writable = !c->view.readonly;
    Py_buffer *v = &c->view;
    tp_dtype dtype;
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    if (format_dtype(v->format, v->itemsize, &dtype) < 0) goto fail;
    if (v->ndim > TP_MAX_DIMS) {
        raise_msg(TP_ERR_SHAPE, "array of rank %d exceeds the maximum rank %d", v->ndim, TP_MAX_DIMS);
        goto fail;
    }
    int borrowable = writable && v->suboffsets == NULL;
    for (int i = 0; i < v->ndim; i++) {
        sizes[i] = v->shape[i];
        Py_ssize_t s = v->strides ? v->strides[i] : 0;
        if (!v->strides) {
            s = v->itemsize;
            for (int j = i + 1; j < v->ndim; j++) s *= v->shape[j];
        }
        if (s < 0 || s % v->itemsize != 0) borrowable = 0;
        strides[i] = s / v->itemsize;
    }
    tp_status st;
    if (borrowable) {
        /* Extent: the buffer starts at element 0 (strides are non-negative). */
        size_t nbytes = (size_t)v->itemsize;
        int empty = 0;
        for (int i = 0; i < v->ndim; i++) {
            if (sizes[i] == 0) empty = 1;
            else nbytes += (size_t)(sizes[i] - 1) * (size_t)strides[i] * (size_t)v->itemsize;
        }
        if (empty) nbytes = 0;
        st = tp_tensor_borrow(dtype, v->ndim, sizes, strides, 0, v->buf, nbytes, release_borrowed, c, out);
        if (st == TP_OK) return 0; /* the tensor owns c now */
        tp_clear_error();          /* fall back to a copy */
    }
    st = tp_tensor_empty(dtype, v->ndim, sizes, out);
    if (st != TP_OK) {
        raise_status(st);
        goto fail;
    }
    if (tp_tensor_numel(*out) > 0 &&
        PyBuffer_ToContiguous(tp_tensor_data(*out), v, (Py_ssize_t)(tp_tensor_numel(*out) * v->itemsize), 'C') < 0) {
        tp_tensor_free(*out);
        *out = NULL;
        goto fail;
    }
    PyBuffer_Release(v);
    PyMem_RawFree(c);
    return 0;
fail:
    PyBuffer_Release(v);
    PyMem_RawFree(c);
    return -1;
}

static int py_to_value(PyObject *o, tp_value *out, int depth);

static int seq_to_value(PyObject *o, int is_tuple, tp_value *out, int depth) {
    PyObject *fast = PySequence_Fast(o, "expected a sequence");
    if (!fast) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    tp_status st = is_tuple ? tp_value_tuple(n, out) : tp_value_list(n, out);
    if (st != TP_OK) {
        Py_DECREF(fast);
        raise_status(st);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        tp_value item = tp_value_none();
        if (py_to_value(PySequence_Fast_GET_ITEM(fast, i), &item, depth + 1) < 0) {
            Py_DECREF(fast);
            tp_value_clear(out);
            return -1;
        }
        st = tp_value_seq_set(out, i, &item);
        if (st != TP_OK) {
            Py_DECREF(fast);
            tp_value_clear(out);
            raise_status(st);
            return -1;
        }
    }
    Py_DECREF(fast);
    return 0;
}

static int dict_to_value(PyObject *o, tp_value *out, int depth) {
    tp_status st = tp_value_dict(out);
    if (st != TP_OK) {
        raise_status(st);
        return -1;
    }
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(o, &pos, &k, &v)) {
        if (!PyUnicode_Check(k)) {
            tp_value_clear(out);
            raise_msg(TP_ERR_TYPE, "dict keys must be str, got %s", Py_TYPE(k)->tp_name);
            return -1;
        }
        const char *key = PyUnicode_AsUTF8(k);
        if (!key) {
            tp_value_clear(out);
            return -1;
        }
        tp_value item = tp_value_none();
        if (py_to_value(v, &item, depth + 1) < 0) {
            tp_value_clear(out);
            return -1;
        }
        st = tp_value_dict_set(out, key, &item);
        if (st != TP_OK) {
            tp_value_clear(out);
            raise_status(st);
            return -1;
        }
    }
    return 0;
}

static int py_to_value(PyObject *o, tp_value *out, int depth) {
    *out = tp_value_none();
    if (depth > 64) {
        raise_msg(TP_ERR_INVALID_ARG, "input nested deeper than 64 levels");
        return -1;
    }
    if (o == Py_None) return 0;
    if (PyBool_Check(o)) {
        *out = tp_value_bool(o == Py_True);
        return 0;
    }
    if (PyLong_Check(o)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow) {
            raise_msg(TP_ERR_INVALID_ARG, "int %s does not fit in int64", "argument");
            return -1;
        }
        if (v == -1 && PyErr_Occurred()) return -1;
        *out = tp_value_int((int64_t)v);
        return 0;
    }
    if (PyFloat_Check(o)) {
        *out = tp_value_float(PyFloat_AS_DOUBLE(o));
        return 0;
    }
    if (PyUnicode_Check(o)) {
        const char *s = PyUnicode_AsUTF8(o);
        if (!s) return -1;
        tp_status st = tp_value_str(s, out);
        if (st != TP_OK) {
            raise_status(st);
            return -1;
        }
        return 0;
    }
    if (PyTuple_Check(o)) return seq_to_value(o, 1, out, depth);
    if (PyList_Check(o)) return seq_to_value(o, 0, out, depth);
    if (PyDict_Check(o)) return dict_to_value(o, out, depth);
    if (PyObject_CheckBuffer(o)) {
        tp_tensor *t;
        if (buffer_to_tensor(o, &t) < 0) return -1;
        *out = tp_value_tensor(t);
        return 0;
    }
    /* __array_interface__ / __array__ (numpy.asarray) or __dlpack__
     * (numpy.from_dlpack): tensorplay tensors, other array libraries. numpy
     * makes an array, viewing the memory when it can. */
    int iface = PyObject_HasAttrString(o, "__array_interface__") || PyObject_HasAttrString(o, "__array__");
    if (iface || PyObject_HasAttrString(o, "__dlpack__")) {
        if (import_numpy() < 0) return -1;
        PyObject *arr = PyObject_CallOneArg(iface ? g_asarray : g_from_dlpack, o);
        if (!arr) return -1;
        int rc = -1;
        if (PyObject_CheckBuffer(arr)) {
            tp_tensor *t;
            rc = buffer_to_tensor(arr, &t);
            if (rc == 0) *out = tp_value_tensor(t);
        } else {
            raise_msg(TP_ERR_TYPE, "%s did not convert to an array", Py_TYPE(o)->tp_name);
        }
        Py_DECREF(arr);
        return rc;
    }
    raise_msg(TP_ERR_TYPE, "unsupported input of type %s (expected an array, a number, a str, None, "
              "or a tuple, list or dict of them)", Py_TYPE(o)->tp_name);
    return -1;
}

/* ---- tp_value -> Python -------------------------------------------------- */

static PyObject *value_to_py(const tp_value *v, int readonly) {
    switch (v->kind) {
    case TP_VAL_NONE: Py_RETURN_NONE;
    case TP_VAL_BOOL: return PyBool_FromLong(v->u.b);
    case TP_VAL_INT: return PyLong_FromLongLong(v->u.i);
    case TP_VAL_FLOAT: return PyFloat_FromDouble(v->u.f);
    case TP_VAL_STR: return PyUnicode_FromString(v->u.s);
    case TP_VAL_DTYPE: return PyUnicode_FromString(tp_dtype_name(v->u.dtype));
    case TP_VAL_TENSOR: return tensor_to_array(v->u.tensor, readonly);
    case TP_VAL_NODE: return PyUnicode_FromString(tp_node_name(v->u.node));
    case TP_VAL_LIST:
    case TP_VAL_TUPLE: {
        Py_ssize_t n = (Py_ssize_t)v->u.seq.n;
        PyObject *r = v->kind == TP_VAL_LIST ? PyList_New(n) : PyTuple_New(n);
        if (!r) return NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = value_to_py(&v->u.seq.items[i], readonly);
            if (!item) {
                Py_DECREF(r);
                return NULL;
            }
            if (v->kind == TP_VAL_LIST) PyList_SET_ITEM(r, i, item);
            else PyTuple_SET_ITEM(r, i, item);
        }
        return r;
    }
    case TP_VAL_DICT: {
        PyObject *r = PyDict_New();
        if (!r) return NULL;
        for (int64_t i = 0; i < v->u.seq.n; i++) {
            PyObject *item = value_to_py(&v->u.seq.items[i], readonly);
            if (!item || PyDict_SetItemString(r, v->u.seq.keys[i], item) < 0) {
                Py_XDECREF(item);
                Py_DECREF(r);
                return NULL;
            }
            Py_DECREF(item);
        }
        return r;
    }
    }
    return raise_msg(TP_ERR_INTERNAL, "unknown value kind %d", (int)v->kind);
}

/* Convert args (a tuple) and kwargs (a dict or NULL). On success *vals holds
 * n values (PyMem_Free'd by the caller after clearing each). */
static int convert_call_args(PyObject *args, PyObject *kwargs, tp_value **vals, Py_ssize_t *n, tp_value *kw,
                             int *has_kw) {
    *vals = NULL;
    *n = 0;
    *kw = tp_value_none();
    *has_kw = 0;
    Py_ssize_t na = PyTuple_GET_SIZE(args);
    if (na > INT32_MAX) {
        raise_msg(TP_ERR_INVALID_ARG, "too many arguments");
        return -1;
    }
    tp_value *v = PyMem_Calloc(na ? (size_t)na : 1, sizeof *v);
    if (!v) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < na; i++) {
        if (py_to_value(PyTuple_GET_ITEM(args, i), &v[i], 0) < 0) {
            for (Py_ssize_t j = 0; j < i; j++) tp_value_clear(&v[j]);
            PyMem_Free(v);
            return -1;
        }
    }
    if (kwargs && PyDict_GET_SIZE(kwargs) > 0) {
        if (dict_to_value(kwargs, kw, 0) < 0) {
            for (Py_ssize_t j = 0; j < na; j++) tp_value_clear(&v[j]);
            PyMem_Free(v);
            return -1;
        }
        *has_kw = 1;
    }
    *vals = v;
    *n = na;
    return 0;
}

static void free_call_args(tp_value *vals, Py_ssize_t n, tp_value *kw) {
    for (Py_ssize_t i = 0; i < n; i++) tp_value_clear(&vals[i]);
    PyMem_Free(vals);
    tp_value_clear(kw);
}

/* ---- Program ----------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *dict; /* instance __dict__ (for the Python subclass) */
    tp_program *p;
    tp_run *run_slot;  /* a cached run context for calls with a thread count */
    int num_threads;   /* 0: the library default */
    uint64_t module_gen;
} ProgramObject;

static PyTypeObject Program_Type;

static PyObject *program_wrap(tp_program *p) {
    /* Takes over one reference to p. */
    PyTypeObject *cls = g_prog_cls ? g_prog_cls : &Program_Type;
    ProgramObject *o = (ProgramObject *)cls->tp_alloc(cls, 0);
    if (!o) {
        tp_program_free(p);
        return NULL;
    }
    o->p = p;
    o->run_slot = NULL;
    o->num_threads = 0;
    o->module_gen = 0;
    return (PyObject *)o;
}

static int program_check(ProgramObject *self) {
    if (!self->p) {
        raise_msg(TP_ERR_STATE, "program is not initialised (use tpexport.load or tpexport.from_onnx)");
        return -1;
    }
    return 0;
}
#define PROG_CHECK(self)                                                                                     \
    do {                                                                                                     \
        if (program_check(self) < 0) return NULL;                                                            \
    } while (0)

static int program_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((ProgramObject *)self)->dict);
    return 0;
}

static int program_clear(PyObject *self) {
    Py_CLEAR(((ProgramObject *)self)->dict);
    return 0;
}

static void program_dealloc(PyObject *self) {
    ProgramObject *o = (ProgramObject *)self;
    PyObject_GC_UnTrack(self);
    program_clear(self);
    tp_run_free(o->run_slot);
    tp_program_free(o->p);
    Py_TYPE(self)->tp_free(self);
}

/* Call with an explicit thread count (0: the program's, then the library's). */
static PyObject *program_do_call(ProgramObject *self, PyObject *args, PyObject *kwargs, int threads) {
    PROG_CHECK(self);
    tp_value *vals, kw, out = tp_value_none();
    Py_ssize_t n;
    int has_kw;
    if (convert_call_args(args, kwargs, &vals, &n, &kw, &has_kw) < 0) return NULL;
    if (threads <= 0) threads = self->num_threads;
    tp_status st;
    if (threads <= 0) {
        Py_BEGIN_ALLOW_THREADS
        st = tp_program_call(self->p, vals, (int)n, has_kw ? &kw : NULL, &out);
        Py_END_ALLOW_THREADS
    } else {
        tp_run *r = self->run_slot;
        self->run_slot = NULL;
        if (!r) {
            tp_run_options opt;
            tp_run_options_init(&opt);
            st = tp_run_new(self->p, &opt, &r);
            if (st != TP_OK) {
                free_call_args(vals, n, &kw);
                return raise_status(st);
            }
        }
        tp_run_set_num_threads(r, threads);
        Py_BEGIN_ALLOW_THREADS
        st = tp_run_call(r, vals, (int)n, has_kw ? &kw : NULL, &out);
        Py_END_ALLOW_THREADS
        if (self->run_slot) tp_run_free(r);
        else self->run_slot = r;
    }
    free_call_args(vals, n, &kw);
    if (st != TP_OK) {
        tp_value_clear(&out);
        return raise_status(st);
    }
    PyObject *res = value_to_py(&out, 0);
    tp_value_clear(&out);
    return res;
}

/* tp_program_call_exported: the same semantics through the flat contract. */
static PyObject *program_call_exported(PyObject *self_, PyObject *args, PyObject *kwargs) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    tp_value *vals, kw, out = tp_value_none();
    Py_ssize_t n;
    int has_kw;
    if (convert_call_args(args, kwargs, &vals, &n, &kw, &has_kw) < 0) return NULL;
    tp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tp_program_call_exported(self->p, vals, (int)n, has_kw ? &kw : NULL, &out);
    Py_END_ALLOW_THREADS
    free_call_args(vals, n, &kw);
    if (st != TP_OK) {
        tp_value_clear(&out);
        return raise_status(st);
    }
    PyObject *res = value_to_py(&out, 0);
    tp_value_clear(&out);
    return res;
}

/* tp_program_call_flat: one value per placeholder (state included), the raw
 * flattened outputs (mutation outputs first) as a list; no mutation applied. */
static PyObject *program_call_flat(PyObject *self_, PyObject *args) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    tp_value *vals, kw, out = tp_value_none();
    Py_ssize_t n;
    int has_kw;
    if (convert_call_args(args, NULL, &vals, &n, &kw, &has_kw) < 0) return NULL;
    tp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tp_program_call_flat(self->p, vals, (int)n, &out);
    Py_END_ALLOW_THREADS
    free_call_args(vals, n, &kw);
    if (st != TP_OK) {
        tp_value_clear(&out);
        return raise_status(st);
    }
    PyObject *res = value_to_py(&out, 0);
    tp_value_clear(&out);
    return res;
}

static PyObject *program_is_param(PyObject *self_, PyObject *arg) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    return PyBool_FromLong(tp_signature_is_param(tp_program_signature(self->p), name));
}

static PyObject *program_is_buffer(PyObject *self_, PyObject *arg) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    return PyBool_FromLong(tp_signature_is_buffer(tp_program_signature(self->p), name));
}

static PyObject *program_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    return program_do_call((ProgramObject *)self, args, kwargs, 0);
}

static PyObject *program_call_with(PyObject *self, PyObject *a, PyObject *kw) {
    static char *names[] = {"args", "kwargs", "num_threads", NULL};
    PyObject *args = NULL, *kwargs = NULL;
    int threads = 0;
    if (!PyArg_ParseTupleAndKeywords(a, kw, "|O!O!i:call", names, &PyTuple_Type, &args, &PyDict_Type, &kwargs,
                                     &threads))
        return NULL;
    if (threads < 0) return raise_msg(TP_ERR_INVALID_ARG, "num_threads must be >= 0, got %d", threads);
    PyObject *empty = NULL;
    if (!args) args = empty = PyTuple_New(0);
    if (!args) return NULL;
    PyObject *r = program_do_call((ProgramObject *)self, args, kwargs, threads);
    Py_XDECREF(empty);
    return r;
}

static PyObject *program_check_inputs(PyObject *self_, PyObject *a, PyObject *kw) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    tp_value *vals, kwv;
    Py_ssize_t n;
    int has_kw;
    if (convert_call_args(a, kw, &vals, &n, &kwv, &has_kw) < 0) return NULL;
    tp_status st = tp_program_check_inputs(self->p, vals, (int)n, has_kw ? &kwv : NULL);
    free_call_args(vals, n, &kwv);
    if (st != TP_OK) return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *program_validate(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    tp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tp_program_validate(self->p);
    Py_END_ALLOW_THREADS
    if (st != TP_OK) return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *program_copy(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    tp_program *c;
    tp_status st = tp_program_copy(self->p, &c);
    if (st != TP_OK) return raise_status(st);
    return program_wrap(c);
}

static PyObject *take_string(tp_status st, char *s) {
    if (st != TP_OK) return raise_status(st);
    PyObject *r = PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
    tp_free(s);
    return r;
}

static PyObject *program_to_string(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    char *s = NULL;
    tp_status st = tp_program_to_string(self->p, &s);
    return take_string(st, s);
}

static PyObject *program_graph_code(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    char *s = NULL;
    tp_status st = tp_graph_to_string(tp_program_graph(self->p), &s);
    return take_string(st, s);
}

static PyObject *program_signature_string(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    char *s = NULL;
    tp_status st = tp_signature_to_string(tp_program_signature(self->p), &s);
    return take_string(st, s);
}

static PyObject *arg_spec_to_py(const tp_arg_spec *a) {
    PyObject *val = value_to_py(&a->value, 1);
    if (!val) return NULL;
    PyObject *r = Py_BuildValue("(ssNN)", tp_arg_kind_name(a->kind), a->name ? a->name : "", str_or_none(a->class_fqn),
                                val);
    return r;
}

static PyObject *persistence_to_py(tp_persistence p) {
    if (p == TP_PERSISTENT_UNSET) Py_RETURN_NONE;
    return PyBool_FromLong(p == TP_PERSISTENT_YES);
}

/* [(kind, (arg_kind, name, class_fqn, value), target, persistent)] */
static PyObject *program_input_specs(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    const tp_signature *sig = tp_program_signature(self->p);
    int n = tp_signature_n_inputs(sig);
    PyObject *list = PyList_New(n);
    if (!list) return NULL;
    for (int i = 0; i < n; i++) {
        const tp_input_spec *s = tp_signature_input(sig, i);
        PyObject *arg = arg_spec_to_py(&s->arg);
        PyObject *item = arg ? Py_BuildValue("(sNNN)", tp_input_kind_name(s->kind), arg, str_or_none(s->target),
                                             persistence_to_py(s->persistent))
                             : NULL;
        if (!item) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *program_output_specs(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    const tp_signature *sig = tp_program_signature(self->p);
    int n = tp_signature_n_outputs(sig);
    PyObject *list = PyList_New(n);
    if (!list) return NULL;
    for (int i = 0; i < n; i++) {
        const tp_output_spec *s = tp_signature_output(sig, i);
        PyObject *arg = arg_spec_to_py(&s->arg);
        PyObject *item = arg ? Py_BuildValue("(sNN)", tp_output_kind_name(s->kind), arg, str_or_none(s->target))
                             : NULL;
        if (!item) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *program_view(PyObject *self_, PyObject *arg) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    long which = PyLong_AsLong(arg);
    if (which == -1 && PyErr_Occurred()) return NULL;
    if (which < TP_VIEW_USER_INPUTS || which > TP_VIEW_USER_OUTPUTS)
        return raise_msg(TP_ERR_INVALID_ARG, "unknown signature view %ld", which);
    tp_strings s = {0, NULL};
    tp_status st = tp_signature_view_names(tp_program_signature(self->p), (tp_signature_view)which, &s);
    if (st != TP_OK) return raise_status(st);
    PyObject *list = PyList_New(s.n);
    for (int i = 0; list && i < s.n; i++) {
        PyObject *x = PyUnicode_FromString(s.items[i]);
        if (!x) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, x);
    }
    tp_strings_free(&s);
    return list;
}

static PyObject *program_map(PyObject *self_, PyObject *arg) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    long which = PyLong_AsLong(arg);
    if (which == -1 && PyErr_Occurred()) return NULL;
    if (which < TP_MAP_INPUTS_TO_PARAMETERS || which > TP_MAP_USER_INPUTS_TO_MUTATE)
        return raise_msg(TP_ERR_INVALID_ARG, "unknown signature map %ld", which);
    tp_string_map m = {0, NULL, NULL};
    tp_status st = tp_signature_map_names(tp_program_signature(self->p), (tp_signature_map)which, &m);
    if (st != TP_OK) return raise_status(st);
    PyObject *d = PyDict_New();
    for (int i = 0; d && i < m.n; i++) {
        PyObject *v = PyUnicode_FromString(m.values[i]);
        if (!v || PyDict_SetItemString(d, m.keys[i], v) < 0) {
            Py_XDECREF(v);
            Py_CLEAR(d);
            break;
        }
        Py_DECREF(v);
    }
    tp_string_map_free(&m);
    return d;
}

static PyObject *named_state_to_py(const tp_named_state *s) {
    PyObject *list = PyList_New(s->n);
    if (!list) return NULL;
    for (int i = 0; i < s->n; i++) {
        const tp_named_tensor *e = &s->items[i];
        PyObject *arr = tensor_to_array(e->tensor, 0);
        PyObject *item = arr ? Py_BuildValue("(sNsO)", e->name, arr, tp_state_kind_name(e->kind),
                                             e->persistent ? Py_True : Py_False)
                             : NULL;
        if (!item) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static int parse_filter(PyObject *arg, tp_state_filter *f) {
    long which = PyLong_AsLong(arg);
    if (which == -1 && PyErr_Occurred()) return -1;
    if (which < TP_FILTER_PARAMETERS || which > TP_FILTER_ALL) {
        raise_msg(TP_ERR_INVALID_ARG, "unknown state filter %ld", which);
        return -1;
    }
    *f = (tp_state_filter)which;
    return 0;
}

/* [(name, array view, kind, persistent)] */
static PyObject *program_named_state(PyObject *self_, PyObject *arg) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    tp_state_filter f;
    if (parse_filter(arg, &f) < 0) return NULL;
    tp_named_state s = {0, NULL};
    tp_status st = tp_program_named_state(self->p, f, &s);
    if (st != TP_OK) return raise_status(st);
    PyObject *r = named_state_to_py(&s);
    tp_named_state_free(&s);
    return r;
}

static PyObject *program_get_state(PyObject *self_, PyObject *arg) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    const char *target = PyUnicode_AsUTF8(arg);
    if (!target) return NULL;
    tp_tensor *t;
    tp_state_kind kind;
    bool persistent;
    tp_status st = tp_program_get_state(self->p, target, &t, &kind, &persistent);
    if (st != TP_OK) return raise_status(st);
    PyObject *arr = tensor_to_array(t, 0);
    if (!arr) return NULL;
    return Py_BuildValue("(NsO)", arr, tp_state_kind_name(kind), persistent ? Py_True : Py_False);
}

static PyObject *program_ranges(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    int n = tp_program_num_ranges(self->p);
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        const tp_range_constraint *r = tp_program_range(self->p, i);
        PyObject *hi = r->max == TP_DIM_UNBOUNDED ? (Py_INCREF(Py_None), Py_None) : PyLong_FromLongLong(r->max);
        PyObject *item = hi ? Py_BuildValue("(sLN)", r->name, (long long)r->min, hi) : NULL;
        if (!item) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *program_equalities(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    int n = tp_program_num_equalities(self->p);
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        const tp_equality_constraint *e = tp_program_equality(self->p, i);
        PyObject *sites = PyList_New(e->n_sites);
        for (int j = 0; sites && j < e->n_sites; j++) {
            PyObject *s = Py_BuildValue("(si)", e->sites[j].input, e->sites[j].dim);
            if (!s) {
                Py_CLEAR(sites);
                break;
            }
            PyList_SET_ITEM(sites, j, s);
        }
        PyObject *item = sites ? Py_BuildValue("(NN)", sites, str_or_none(e->name)) : NULL;
        if (!item) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static const char *dim_rule_kind_name(tp_dim_rule_kind k) {
    return k == TP_DIM_STATIC ? "static" : k == TP_DIM_SYMBOL ? "symbol" : "derived";
}

/* [(input, dim, kind, value, symbol, scale, offset)] */
static PyObject *program_dim_rules(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    int n = tp_program_num_dim_rules(self->p);
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        const tp_dim_rule *r = tp_program_dim_rule(self->p, i);
        PyObject *item = Py_BuildValue("(sisLNLL)", r->site.input, r->site.dim, dim_rule_kind_name(r->kind),
                                       (long long)r->value, str_or_none(r->kind == TP_DIM_STATIC ? NULL : r->symbol),
                                       (long long)r->scale, (long long)r->offset);
        if (!item) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *treespec_repr_py(const tp_treespec *spec) {
    if (!spec) Py_RETURN_NONE;
    char *s = NULL;
    tp_status st = tp_treespec_repr(spec, &s);
    return take_string(st, s);
}

static PyObject *arg_specs_to_py(const tp_arg_spec *a, int n) {
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        PyObject *x = arg_spec_to_py(&a[i]);
        if (!x) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, x);
    }
    return list;
}

/* [(fqn, None | (inputs, outputs, in_spec, out_spec, forward_arg_names))] */
static PyObject *program_module_calls(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    int n = tp_program_num_module_calls(self->p);
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        tp_module_call_entry e = tp_program_module_call(self->p, i);
        PyObject *sig;
        if (!e.signature) {
            sig = Py_None;
            Py_INCREF(sig);
        } else {
            const tp_module_call_signature *s = e.signature;
            PyObject *names = PyList_New(s->n_forward_arg_names);
            for (int j = 0; names && j < s->n_forward_arg_names; j++) {
                PyObject *x = PyUnicode_FromString(s->forward_arg_names[j]);
                if (!x) {
                    Py_CLEAR(names);
                    break;
                }
                PyList_SET_ITEM(names, j, x);
            }
            sig = names ? Py_BuildValue("(NNNNN)", arg_specs_to_py(s->inputs, s->n_inputs),
                                        arg_specs_to_py(s->outputs, s->n_outputs), treespec_repr_py(s->in_spec),
                                        treespec_repr_py(s->out_spec), names)
                        : NULL;
        }
        PyObject *item = sig ? Py_BuildValue("(sN)", e.fqn ? e.fqn : "", sig) : NULL;
        if (!item) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *program_specs(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    return Py_BuildValue("(NN)", treespec_repr_py(tp_program_in_spec(self->p)),
                         treespec_repr_py(tp_program_out_spec(self->p)));
}

static PyObject *program_example_input(PyObject *self_, PyObject *arg) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    const tp_value *v = tp_program_example_input(self->p, name);
    if (!v) Py_RETURN_NONE;
    /* Example inputs are read-only views (the program keeps them). */
    PyObject *val = value_to_py(v, 1);
    if (!val) return NULL;
    return Py_BuildValue("(N)", val);
}

static PyObject *io_info_to_py(const tp_io_info *info) {
    PyObject *dims;
    if (info->ndim < 0) {
        dims = Py_None;
        Py_INCREF(dims);
    } else {
        dims = PyList_New(info->ndim);
        for (int i = 0; dims && i < info->ndim; i++) {
            const tp_io_dim *d = &info->dims[i];
            PyObject *hi = d->max == INT64_MAX ? (Py_INCREF(Py_None), Py_None) : PyLong_FromLongLong(d->max);
            PyObject *x = hi ? Py_BuildValue("(LNLLLN)", (long long)d->size, str_or_none(d->symbol),
                                             (long long)d->scale, (long long)d->offset, (long long)d->min, hi)
                             : NULL;
            if (!x) {
                Py_CLEAR(dims);
                break;
            }
            PyList_SET_ITEM(dims, i, x);
        }
    }
    if (!dims) return NULL;
    return Py_BuildValue("(ssNN)", info->name ? info->name : "", tp_arg_kind_name(info->kind),
                         info->dtype == TP_DTYPE_COUNT ? (Py_INCREF(Py_None), Py_None)
                                                       : PyUnicode_FromString(tp_dtype_name(info->dtype)),
                         dims);
}

static PyObject *program_io_info(ProgramObject *self, int output) {
    PROG_CHECK(self);
    int n = output ? tp_program_num_user_outputs(self->p) : tp_program_num_user_inputs(self->p);
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        tp_io_info info;
        tp_status st = output ? tp_program_output_info(self->p, i, &info) : tp_program_input_info(self->p, i, &info);
        PyObject *x = st == TP_OK ? io_info_to_py(&info) : raise_status(st);
        if (!x) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, x);
    }
    return list;
}

static PyObject *program_input_info(PyObject *self, PyObject *Py_UNUSED(unused)) {
    return program_io_info((ProgramObject *)self, 0);
}
static PyObject *program_output_info(PyObject *self, PyObject *Py_UNUSED(unused)) {
    return program_io_info((ProgramObject *)self, 1);
}

static PyObject *program_invalidate_plans(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    tp_program_invalidate_plans(self->p);
    Py_RETURN_NONE;
}

/* ---- DecompTable --------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    tp_decomp_table *t;
} DecompObject;

static PyTypeObject Decomp_Type;

static PyObject *decomp_wrap(tp_decomp_table *t) {
    DecompObject *o = PyObject_New(DecompObject, &Decomp_Type);
    if (!o) {
        tp_decomp_table_free(t);
        return NULL;
    }
    o->t = t;
    return (PyObject *)o;
}

static void decomp_dealloc(PyObject *self) {
    tp_decomp_table_free(((DecompObject *)self)->t);
    Py_TYPE(self)->tp_free(self);
}

static int op_arg(PyObject *arg, tp_op *op) {
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return -1;
    const char *n = name;
    if (!strncmp(n, "aten.", 5)) n += 5;
    char buf[128];
    size_t len = strcspn(n, ".");
    if (len >= sizeof buf) len = sizeof buf - 1;
    memcpy(buf, n, len); /* "add.Tensor" -> "add" */
    buf[len] = 0;
    *op = tp_op_from_name(buf);
    if (*op == TP_OP_INVALID) {
        raise_msg(TP_ERR_NOT_FOUND, "unknown op '%s'", name);
        return -1;
    }
    return 0;
}

static PyObject *decomp_remove(PyObject *self, PyObject *arg) {
    tp_op op;
    if (op_arg(arg, &op) < 0) return NULL;
    tp_status st = tp_decomp_table_remove(((DecompObject *)self)->t, op);
    if (st != TP_OK) return raise_status(st);
    Py_RETURN_NONE;
}

static int decomp_contains(PyObject *self, PyObject *arg) {
    tp_op op;
    if (!PyUnicode_Check(arg)) return 0;
    if (op_arg(arg, &op) < 0) {
        PyErr_Clear();
        return 0;
    }
    return tp_decomp_table_has(((DecompObject *)self)->t, op);
}

static PyObject *decomp_add_softmax(PyObject *self, PyObject *Py_UNUSED(unused)) {
    tp_status st = tp_decomp_table_add_softmax(((DecompObject *)self)->t);
    if (st != TP_OK) return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *decomp_copy(PyObject *self, PyObject *Py_UNUSED(unused)) {
    tp_decomp_table *c;
    tp_status st = tp_decomp_table_copy(((DecompObject *)self)->t, &c);
    if (st != TP_OK) return raise_status(st);
    return decomp_wrap(c);
}

static PyMethodDef decomp_methods[] = {
    {"remove", decomp_remove, METH_O, "remove(op): drop the entry for op (KeyError if absent)."},
    {"add_softmax", decomp_add_softmax, METH_NOARGS, "Add the opt-in softmax and log_softmax entries."},
    {"copy", decomp_copy, METH_NOARGS, "A copy of the table."},
    {NULL, NULL, 0, NULL}};

static PySequenceMethods decomp_as_sequence = {.sq_contains = decomp_contains};

static PyTypeObject Decomp_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tpexport.DecompositionTable",
    .tp_basicsize = sizeof(DecompObject),
    .tp_dealloc = decomp_dealloc,
    .tp_as_sequence = &decomp_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A decomposition table: op -> built-in rewrite. `'op' in table` tests for an entry.",
    .tp_methods = decomp_methods,
};

static PyObject *mod_default_decompositions(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(unused)) {
    tp_decomp_table *t;
    tp_status st = tp_decomp_table_default(&t);
    if (st != TP_OK) return raise_status(st);
    return decomp_wrap(t);
}

static PyObject *mod_empty_decompositions(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(unused)) {
    tp_decomp_table *t;
    tp_status st = tp_decomp_table_new(&t);
    if (st != TP_OK) return raise_status(st);
    return decomp_wrap(t);
}

static PyObject *program_run_decompositions(PyObject *self_, PyObject *arg) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    const tp_decomp_table *table = NULL;
    if (arg != Py_None) {
        if (!PyObject_TypeCheck(arg, &Decomp_Type))
            return raise_msg(TP_ERR_TYPE, "decomposition table must be a DecompositionTable or None, got %s",
                             Py_TYPE(arg)->tp_name);
        table = ((DecompObject *)arg)->t;
    }
    tp_program *out;
    tp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tp_program_run_decompositions(self->p, table, &out);
    Py_END_ALLOW_THREADS
    if (st != TP_OK) return raise_status(st);
    return program_wrap(out);
}

/* ---- Module (the unlifted module) ------------------------------------------ */

typedef struct {
    PyObject_HEAD
    ProgramObject *owner;
    tp_module *m; /* owned by owner->p's cache */
    uint64_t gen;
} ModuleObject;

static PyTypeObject Module_Type;

static int module_check(ModuleObject *self) {
    if (self->owner->module_gen != self->gen || !self->owner->p) {
        raise_msg(TP_ERR_STATE, "this unlifted module was invalidated (invalidate_unlifted); call module() again");
        return -1;
    }
    return 0;
}

static PyObject *program_module(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    tp_module *m;
    tp_status st = tp_program_module(self->p, &m);
    if (st != TP_OK) return raise_status(st);
    ModuleObject *o = PyObject_New(ModuleObject, &Module_Type);
    if (!o) return NULL;
    Py_INCREF(self);
    o->owner = self;
    o->m = m;
    o->gen = self->module_gen;
    return (PyObject *)o;
}

static PyObject *program_invalidate_module(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ProgramObject *self = (ProgramObject *)self_;
    PROG_CHECK(self);
    tp_program_invalidate_module(self->p);
    self->module_gen++;
    Py_RETURN_NONE;
}

static void module_dealloc(PyObject *self) {
    Py_DECREF(((ModuleObject *)self)->owner);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *module_call(PyObject *self_, PyObject *args, PyObject *kwargs) {
    ModuleObject *self = (ModuleObject *)self_;
    if (module_check(self) < 0) return NULL;
    tp_value *vals, kw, out = tp_value_none();
    Py_ssize_t n;
    int has_kw;
    if (convert_call_args(args, kwargs, &vals, &n, &kw, &has_kw) < 0) return NULL;
    /* The module interprets its graph and writes its state with copy_
     * nodes: calls hold the GIL, so Python threads never run one module
     * concurrently. */
    tp_status st = tp_module_call(self->m, vals, (int)n, has_kw ? &kw : NULL, &out);
    free_call_args(vals, n, &kw);
    if (st != TP_OK) {
        tp_value_clear(&out);
        return raise_status(st);
    }
    PyObject *r = value_to_py(&out, 0);
    tp_value_clear(&out);
    return r;
}

static PyObject *module_named_state(PyObject *self_, PyObject *arg) {
    ModuleObject *self = (ModuleObject *)self_;
    if (module_check(self) < 0) return NULL;
    tp_state_filter f;
    if (parse_filter(arg, &f) < 0) return NULL;
    tp_named_state s = {0, NULL};
    tp_status st = tp_module_named_state(self->m, f, &s);
    if (st != TP_OK) return raise_status(st);
    PyObject *r = named_state_to_py(&s);
    tp_named_state_free(&s);
    return r;
}

static PyObject *module_code(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ModuleObject *self = (ModuleObject *)self_;
    if (module_check(self) < 0) return NULL;
    const tp_graph *g = tp_module_graph(self->m);
    if (!g) return raise_msg(TP_ERR_STATE, "module has no graph forward");
    char *s = NULL;
    tp_status st = tp_graph_to_string(g, &s);
    return take_string(st, s);
}

static PyObject *module_type_name(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ModuleObject *self = (ModuleObject *)self_;
    if (module_check(self) < 0) return NULL;
    return PyUnicode_FromString(tp_module_type_name(self->m));
}

static PyObject *module_train(PyObject *self_, PyObject *arg) {
    ModuleObject *self = (ModuleObject *)self_;
    if (module_check(self) < 0) return NULL;
    int b = PyObject_IsTrue(arg);
    if (b < 0) return NULL;
    tp_module_train(self->m, b);
    Py_RETURN_NONE;
}

static PyObject *module_is_training(PyObject *self_, PyObject *Py_UNUSED(unused)) {
    ModuleObject *self = (ModuleObject *)self_;
    if (module_check(self) < 0) return NULL;
    return PyBool_FromLong(tp_module_is_training(self->m));
}

static PyMethodDef module_methods[] = {
    {"named_state", module_named_state, METH_O, "named_state(filter) -> [(name, array, kind, persistent)]"},
    {"code", module_code, METH_NOARGS, "The forward graph as text."},
    {"type_name", module_type_name, METH_NOARGS, "The module's type name."},
    {"train", module_train, METH_O, "Set the training flag (recursively)."},
    {"is_training", module_is_training, METH_NOARGS, "The training flag."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject Module_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tpexport._C.Module",
    .tp_basicsize = sizeof(ModuleObject),
    .tp_dealloc = module_dealloc,
    .tp_call = module_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The unlifted module of a program (state read through get_attr, mutations written back).",
    .tp_methods = module_methods,
};

/* ---- Program type ---------------------------------------------------------- */

static PyObject *program_get_num_threads(PyObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromLong(((ProgramObject *)self)->num_threads);
}

static int program_set_num_threads(PyObject *self, PyObject *v, void *Py_UNUSED(closure)) {
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete num_threads");
        return -1;
    }
    long n = PyLong_AsLong(v);
    if (n == -1 && PyErr_Occurred()) return -1;
    if (n < 0 || n > 256) {
        raise_msg(TP_ERR_INVALID_ARG, "num_threads must be in [0, 256], got %ld", n);
        return -1;
    }
    ((ProgramObject *)self)->num_threads = (int)n;
    return 0;
}

static PyObject *program_get_num_mutations(PyObject *self, void *Py_UNUSED(closure)) {
    ProgramObject *o = (ProgramObject *)self;
    PROG_CHECK(o);
    return PyLong_FromLong(tp_program_num_mutations(o->p));
}

static PyGetSetDef program_getset[] = {
    {"num_threads", program_get_num_threads, program_set_num_threads,
     "Threads for calls of this program (0: the library default, tpexport.set_num_threads).", NULL},
    {"_num_mutations", program_get_num_mutations, NULL, "Number of mutation outputs.", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef program_methods[] = {
    {"call", (PyCFunction)(void (*)(void))program_call_with, METH_VARARGS | METH_KEYWORDS,
     "call(args=(), kwargs=None, num_threads=0): call the program with a thread count for this call."},
    {"_check_inputs", (PyCFunction)(void (*)(void))program_check_inputs, METH_VARARGS | METH_KEYWORDS,
     "Check inputs against the program without running it."},
    {"validate", program_validate, METH_NOARGS, "Validate the program; ValueError listing every violation."},
    {"_call_exported", (PyCFunction)(void (*)(void))program_call_exported, METH_VARARGS | METH_KEYWORDS,
     "Call through the flat contract (tp_program_call_exported)."},
    {"_call_flat", program_call_flat, METH_VARARGS, "The flat contract (tp_program_call_flat)."},
    {"_is_param", program_is_param, METH_O, NULL},
    {"_is_buffer", program_is_buffer, METH_O, NULL},
    {"_copy", program_copy, METH_NOARGS, "Deep copy."},
    {"_to_string", program_to_string, METH_NOARGS, NULL},
    {"_graph_code", program_graph_code, METH_NOARGS, NULL},
    {"_signature_string", program_signature_string, METH_NOARGS, NULL},
    {"_input_specs", program_input_specs, METH_NOARGS, NULL},
    {"_output_specs", program_output_specs, METH_NOARGS, NULL},
    {"_view", program_view, METH_O, NULL},
    {"_map", program_map, METH_O, NULL},
    {"_named_state", program_named_state, METH_O, NULL},
    {"_get_state", program_get_state, METH_O, NULL},
    {"_ranges", program_ranges, METH_NOARGS, NULL},
    {"_equalities", program_equalities, METH_NOARGS, NULL},
    {"_dim_rules", program_dim_rules, METH_NOARGS, NULL},
    {"_module_calls", program_module_calls, METH_NOARGS, NULL},
    {"_specs", program_specs, METH_NOARGS, NULL},
    {"_example_input", program_example_input, METH_O, NULL},
    {"_input_info", program_input_info, METH_NOARGS, NULL},
    {"_output_info", program_output_info, METH_NOARGS, NULL},
    {"_run_decompositions", program_run_decompositions, METH_O, NULL},
    {"_module", program_module, METH_NOARGS, NULL},
    {"invalidate_unlifted", program_invalidate_module, METH_NOARGS,
     "Drop the cached unlifted module; modules returned by module() before stop working."},
    {"invalidate_plans", program_invalidate_plans, METH_NOARGS,
     "Drop the compiled plans (needed after writing a parameter or constant in place)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject Program_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tpexport._C.Program",
    .tp_basicsize = sizeof(ProgramObject),
    .tp_dictoffset = offsetof(ProgramObject, dict),
    .tp_dealloc = program_dealloc,
    .tp_call = program_call,
    .tp_traverse = program_traverse,
    .tp_clear = program_clear,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "An exported program (the C runtime's tp_program).",
    .tp_methods = program_methods,
    .tp_getset = program_getset,
    .tp_new = PyType_GenericNew,
};

/* ---- module functions ------------------------------------------------------ */

static PyObject *mod_set_program_class(PyObject *Py_UNUSED(m), PyObject *cls) {
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &Program_Type)) {
        PyErr_SetString(PyExc_TypeError, "expected a subclass of tpexport._C.Program");
        return NULL;
    }
    Py_INCREF(cls);
    Py_XSETREF(g_prog_cls, (PyTypeObject *)cls);
    Py_RETURN_NONE;
}

static PyObject *archive_to_list(tp_archive *a) {
    int n = tp_archive_num_programs(a);
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        PyObject *prog = program_wrap(tp_program_retain(tp_archive_program(a, i)));
        PyObject *item = prog ? Py_BuildValue("(sN)", tp_archive_program_name(a, i), prog) : NULL;
        if (!item) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, item);
    }
    PyObject *extra = list ? PyDict_New() : NULL;
    for (int i = 0; extra && i < tp_archive_num_extra(a); i++) {
        size_t size;
        const void *data = tp_archive_extra_data(a, i, &size);
        PyObject *b = PyBytes_FromStringAndSize(data, (Py_ssize_t)size);
        if (!b || PyDict_SetItemString(extra, tp_archive_extra_name(a, i), b) < 0) {
            Py_XDECREF(b);
            Py_CLEAR(extra);
            break;
        }
        Py_DECREF(b);
    }
    int mapped = tp_archive_is_mapped(a);
    tp_archive_free(a);
    if (!extra) {
        Py_XDECREF(list);
        return NULL;
    }
    return Py_BuildValue("(NNO)", list, extra, mapped ? Py_True : Py_False);
}

/* load(path, mmap=True) -> ([(name, Program)], {extra name: bytes}, mapped) */
static PyObject *mod_load(PyObject *Py_UNUSED(m), PyObject *a, PyObject *kw) {
    static char *names[] = {"path", "mmap", NULL};
    PyObject *path_obj;
    int use_mmap = 1;
    if (!PyArg_ParseTupleAndKeywords(a, kw, "O&|p:load", names, PyUnicode_FSConverter, &path_obj, &use_mmap))
        return NULL;
    tp_load_options opts;
    tp_load_options_init(&opts);
    opts.no_mmap = !use_mmap;
    tp_archive *arch = NULL;
    tp_status st;
    const char *path = PyBytes_AS_STRING(path_obj);
    Py_BEGIN_ALLOW_THREADS
    st = tp_archive_load(path, &opts, &arch);
    Py_END_ALLOW_THREADS
    Py_DECREF(path_obj);
    if (st != TP_OK) return raise_status(st);
    return archive_to_list(arch);
}

static PyObject *mod_load_buffer(PyObject *Py_UNUSED(m), PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    tp_archive *arch = NULL;
    tp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tp_archive_load_buffer(b.buf, (size_t)b.len, NULL, &arch);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    if (st != TP_OK) return raise_status(st);
    return archive_to_list(arch);
}

/* Entries [(name, Program)] and extra {name: bytes} -> C arrays. */
static int save_args(PyObject *entries, PyObject *extra, tp_archive_entry **pe, int *pn, tp_extra_file **px,
                     int *pnx, Py_buffer **bufs) {
    *pe = NULL;
    *px = NULL;
    *bufs = NULL;
    *pn = *pnx = 0;
    if (!PyList_Check(entries)) {
        PyErr_SetString(PyExc_TypeError, "entries must be a list of (name, program)");
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(entries);
    tp_archive_entry *e = PyMem_Calloc(n ? (size_t)n : 1, sizeof *e);
    if (!e) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(entries, i), *name, *prog;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) goto bad;
        name = PyTuple_GET_ITEM(item, 0);
        prog = PyTuple_GET_ITEM(item, 1);
        if (!PyUnicode_Check(name) || !PyObject_TypeCheck(prog, &Program_Type) || !((ProgramObject *)prog)->p)
            goto bad;
        e[i].name = PyUnicode_AsUTF8(name);
        if (!e[i].name) {
            PyMem_Free(e);
            return -1;
        }
        e[i].program = ((ProgramObject *)prog)->p;
    }
    Py_ssize_t nx = extra ? PyDict_GET_SIZE(extra) : 0;
    tp_extra_file *x = PyMem_Calloc(nx ? (size_t)nx : 1, sizeof *x);
    Py_buffer *b = PyMem_Calloc(nx ? (size_t)nx : 1, sizeof *b);
    if (!x || !b) {
        PyMem_Free(e);
        PyMem_Free(x);
        PyMem_Free(b);
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t pos = 0, j = 0;
    PyObject *k, *v;
    while (extra && PyDict_Next(extra, &pos, &k, &v)) {
        x[j].name = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
        if (!x[j].name || PyObject_GetBuffer(v, &b[j], PyBUF_SIMPLE) < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "extra files: {str: bytes}");
            for (Py_ssize_t q = 0; q < j; q++) PyBuffer_Release(&b[q]);
            PyMem_Free(e);
            PyMem_Free(x);
            PyMem_Free(b);
            return -1;
        }
        x[j].data = b[j].buf;
        x[j].size = (size_t)b[j].len;
        j++;
    }
    *pe = e;
    *pn = (int)n;
    *px = x;
    *pnx = (int)nx;
    *bufs = b;
    return 0;
bad:
    PyMem_Free(e);
    PyErr_SetString(PyExc_TypeError, "entries must be (str, ExportedProgram) pairs");
    return -1;
}

static void save_args_free(tp_archive_entry *e, tp_extra_file *x, int nx, Py_buffer *b) {
    for (int i = 0; i < nx; i++) PyBuffer_Release(&b[i]);
    PyMem_Free(e);
    PyMem_Free(x);
    PyMem_Free(b);
}

/* save(path, entries, extra=None, torch=False): torch writes PyTorch's archive (no extra files) */
static PyObject *mod_save(PyObject *Py_UNUSED(m), PyObject *a, PyObject *kw) {
    static char *names[] = {"path", "entries", "extra", "torch", NULL};
    PyObject *path_obj, *entries, *extra = NULL;
    int torch = 0;
    if (!PyArg_ParseTupleAndKeywords(a, kw, "O&O|O!p:save", names, PyUnicode_FSConverter, &path_obj, &entries,
                                     &PyDict_Type, &extra, &torch))
        return NULL;
    tp_archive_entry *e;
    tp_extra_file *x;
    Py_buffer *b;
    int n, nx;
    if (save_args(entries, extra, &e, &n, &x, &nx, &b) < 0) {
        Py_DECREF(path_obj);
        return NULL;
    }
    const char *path = PyBytes_AS_STRING(path_obj);
    tp_status st;
    /* entries hold references to the programs; the list keeps them alive. */
    Py_INCREF(entries);
    Py_BEGIN_ALLOW_THREADS
    st = torch ? tp_archive_save_torch(path, e, n) : tp_archive_save(path, e, n, x, nx);
    Py_END_ALLOW_THREADS
    Py_DECREF(entries);
    save_args_free(e, x, nx, b);
    Py_DECREF(path_obj);
    if (st != TP_OK) return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *mod_save_buffer(PyObject *Py_UNUSED(m), PyObject *a, PyObject *kw) {
    static char *names[] = {"entries", "extra", "torch", NULL};
    PyObject *entries, *extra = NULL;
    int torch = 0;
    if (!PyArg_ParseTupleAndKeywords(a, kw, "O|O!p:save_buffer", names, &entries, &PyDict_Type, &extra, &torch))
        return NULL;
    tp_archive_entry *e;
    tp_extra_file *x;
    Py_buffer *b;
    int n, nx;
    if (save_args(entries, extra, &e, &n, &x, &nx, &b) < 0) return NULL;
    void *data = NULL;
    size_t size = 0;
    tp_status st;
    Py_INCREF(entries);
    Py_BEGIN_ALLOW_THREADS
    st = torch ? tp_archive_save_torch_buffer(e, n, &data, &size) : tp_archive_save_buffer(e, n, x, nx, &data, &size);
    Py_END_ALLOW_THREADS
    Py_DECREF(entries);
    save_args_free(e, x, nx, b);
    if (st != TP_OK) return raise_status(st);
    PyObject *r = PyBytes_FromStringAndSize(data, (Py_ssize_t)size);
    tp_free(data);
    return r;
}

/* verify(path) -> None or raises with every problem listed */
static PyObject *mod_verify(PyObject *Py_UNUSED(m), PyObject *a) {
    PyObject *path_obj;
    if (!PyArg_ParseTuple(a, "O&:verify", PyUnicode_FSConverter, &path_obj)) return NULL;
    tp_status st;
    const char *path = PyBytes_AS_STRING(path_obj);
    Py_BEGIN_ALLOW_THREADS
    st = tp_archive_verify(path, NULL);
    Py_END_ALLOW_THREADS
    Py_DECREF(path_obj);
    if (st != TP_OK) return raise_status(st);
    Py_RETURN_NONE;
}

/* from_onnx(path, ranges=[(name, min, max|None)], report_all=False) -> Program */
static PyObject *mod_from_onnx(PyObject *Py_UNUSED(m), PyObject *a, PyObject *kw) {
    static char *names[] = {"path", "ranges", "report_all", NULL};
    PyObject *path_obj, *ranges = NULL;
    int report_all = 0;
    if (!PyArg_ParseTupleAndKeywords(a, kw, "O&|O!p:from_onnx", names, PyUnicode_FSConverter, &path_obj,
                                     &PyList_Type, &ranges, &report_all))
        return NULL;
    Py_ssize_t nr = ranges ? PyList_GET_SIZE(ranges) : 0;
    tp_onnx_dim_range *r = PyMem_Calloc(nr ? (size_t)nr : 1, sizeof *r);
    if (!r) {
        Py_DECREF(path_obj);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < nr; i++) {
        PyObject *item = PyList_GET_ITEM(ranges, i), *hi = NULL;
        long long lo;
        if (!PyArg_ParseTuple(item, "sLO", &r[i].name, &lo, &hi)) {
            PyMem_Free(r);
            Py_DECREF(path_obj);
            return NULL;
        }
        r[i].min = lo;
        if (hi == Py_None) {
            r[i].max = TP_DIM_UNBOUNDED;
        } else {
            r[i].max = PyLong_AsLongLong(hi);
            if (r[i].max == -1 && PyErr_Occurred()) {
                PyMem_Free(r);
                Py_DECREF(path_obj);
                return NULL;
            }
        }
    }
    tp_onnx_options opts;
    tp_onnx_options_init(&opts);
    opts.n_dim_ranges = (int)nr;
    opts.dim_ranges = r;
    opts.report_all = report_all;
    tp_program *p = NULL;
    tp_status st;
    const char *path = PyBytes_AS_STRING(path_obj);
    Py_INCREF(ranges ? ranges : Py_None); /* keeps the borrowed names alive */
    Py_BEGIN_ALLOW_THREADS
    st = tp_onnx_load(path, &opts, &p, NULL);
    Py_END_ALLOW_THREADS
    Py_DECREF(ranges ? ranges : Py_None);
    PyMem_Free(r);
    Py_DECREF(path_obj);
    if (st != TP_OK) return raise_status(st);
    return program_wrap(p);
}

static PyObject *mod_set_num_threads(PyObject *Py_UNUSED(m), PyObject *arg) {
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 1 || n > 256) return raise_msg(TP_ERR_INVALID_ARG, "num_threads must be in [1, 256], got %ld", n);
    tp_set_num_threads((int)n);
    Py_RETURN_NONE;
}

static PyObject *mod_get_num_threads(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(unused)) {
    return PyLong_FromLong(tp_get_num_threads());
}

/* _raise(status_code, message): raise as the library would (for tests and
 * the Python layer's own argument errors). */
static PyObject *mod_raise(PyObject *Py_UNUSED(m), PyObject *a) {
    int code;
    const char *msg;
    if (!PyArg_ParseTuple(a, "is:_raise", &code, &msg)) return NULL;
    return raise_msg((tp_status)code, "%s", msg);
}

static PyObject *mod_status_name(PyObject *Py_UNUSED(m), PyObject *arg) {
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(tp_status_str((tp_status)code));
}

/* _array(obj) -> numpy array over a tensor made from obj as inputs are (for
 * tests of the input conversion: shows whether obj was borrowed). */
static PyObject *mod_as_tensor(PyObject *Py_UNUSED(m), PyObject *arg) {
    tp_value v;
    if (py_to_value(arg, &v, 0) < 0) return NULL;
    if (v.kind != TP_VAL_TENSOR) {
        tp_value_clear(&v);
        return raise_msg(TP_ERR_TYPE, "expected an array, got %s", Py_TYPE(arg)->tp_name);
    }
    PyObject *r = tensor_to_array(v.u.tensor, 0);
    tp_value_clear(&v);
    return r;
}

/* _live_blocks() -> blocks the library's allocator holds (leak tests). */
static PyObject *mod_live_blocks(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(unused)) {
    return PyLong_FromLong(tp_alloc_live_blocks());
}

static PyMethodDef mod_methods[] = {
    {"load", (PyCFunction)(void (*)(void))mod_load, METH_VARARGS | METH_KEYWORDS, NULL},
    {"load_buffer", mod_load_buffer, METH_O, NULL},
    {"save", (PyCFunction)(void (*)(void))mod_save, METH_VARARGS | METH_KEYWORDS, NULL},
    {"save_buffer", (PyCFunction)(void (*)(void))mod_save_buffer, METH_VARARGS | METH_KEYWORDS, NULL},
    {"verify", mod_verify, METH_VARARGS, NULL},
    {"from_onnx", (PyCFunction)(void (*)(void))mod_from_onnx, METH_VARARGS | METH_KEYWORDS, NULL},
    {"set_num_threads", mod_set_num_threads, METH_O, NULL},
    {"get_num_threads", mod_get_num_threads, METH_NOARGS, NULL},
    {"default_decompositions", mod_default_decompositions, METH_NOARGS, NULL},
    {"empty_decompositions", mod_empty_decompositions, METH_NOARGS, NULL},
    {"_set_program_class", mod_set_program_class, METH_O, NULL},
    {"_raise", mod_raise, METH_VARARGS, NULL},
    {"_status_name", mod_status_name, METH_O, NULL},
    {"_as_tensor", mod_as_tensor, METH_O, NULL},
    {"_live_blocks", mod_live_blocks, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "tpexport._C",
                                    "C bindings of the tpexport runtime (use the tpexport package).", -1,
                                    mod_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__C(void) {
    if (PyType_Ready(&TensorRef_Type) < 0 || PyType_Ready(&Program_Type) < 0 || PyType_Ready(&Decomp_Type) < 0 ||
        PyType_Ready(&Module_Type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Program", (PyObject *)&Program_Type) < 0 ||
        PyModule_AddObjectRef(m, "TensorRef", (PyObject *)&TensorRef_Type) < 0 ||
        PyModule_AddObjectRef(m, "DecompositionTable", (PyObject *)&Decomp_Type) < 0 ||
        PyModule_AddObjectRef(m, "Module", (PyObject *)&Module_Type) < 0 ||
        PyModule_AddStringConstant(m, "version", tp_version()) < 0 ||
        PyModule_AddStringConstant(m, "cpu_level", tp_cpu_level_name(tp_cpu_level_effective())) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
