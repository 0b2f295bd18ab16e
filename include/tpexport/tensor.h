/*
 * tensor.h - n-dimensional strided tensors.
 *
 * A tp_tensor is a view: dtype, sizes, strides (in elements), and a storage
 * offset (in elements) into a reference-counted tp_storage. Storage is either
 * owned (allocated by the library, 64-byte aligned) or borrowed from memory
 * someone else owns (a mapped file, a caller's buffer), in which case an
 * optional release callback runs when the last reference goes.
 *
 * Tensors are reference counted too (atomically, so a tensor held by an
 * immutable program may be retained from several threads). tp_tensor_free
 * drops one reference; tp_tensor_retain adds one. Views share storage with
 * their base. A "meta" tensor has sizes and dtype but no storage: shape
 * inference and graph building use them.
 *
 * Limits: rank <= TP_MAX_DIMS (limits.h); every size >= 0; element counts and byte
 * sizes are checked for int64 overflow.
 */
#ifndef TPEXPORT_TENSOR_H
#define TPEXPORT_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "limits.h" /* TP_MAX_DIMS */
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tp_dtype {
    TP_FLOAT32 = 0,
    TP_FLOAT64,
    TP_FLOAT16,
    TP_BFLOAT16,
    TP_INT64,
    TP_INT32,
    TP_INT16,
    TP_INT8,
    TP_UINT8,
    TP_BOOL,
    TP_DTYPE_COUNT
} tp_dtype;

/* "float32", "int64", ... (PyTorch's names without "torch."). */
TP_API const char *tp_dtype_name(tp_dtype dtype);
/* Parse a dtype name; accepts "float32"/"float", "float64"/"double",
 * "float16"/"half", "bfloat16", "int64"/"long", "int32"/"int",
 * "int16"/"short", "int8", "uint8", "bool", optionally prefixed "torch.". */
TP_API tp_status tp_dtype_from_name(const char *name, tp_dtype *out);
TP_API size_t tp_dtype_size(tp_dtype dtype);
TP_API bool tp_dtype_is_float(tp_dtype dtype);   /* f32 f64 f16 bf16 */
TP_API bool tp_dtype_is_int(tp_dtype dtype);     /* integer, not bool */
/* PyTorch's promote_types for two tensor dtypes. */
TP_API tp_dtype tp_promote_types(tp_dtype a, tp_dtype b);

typedef struct tp_storage tp_storage;
typedef struct tp_tensor tp_tensor;

/* ---- creation ----------------------------------------------------------
 * All creators return a new tensor the caller frees with tp_tensor_free. */

/* Contiguous, uninitialised (tp_tensor_zeros: zero-filled). */
TP_API tp_status tp_tensor_empty(tp_dtype dtype, int ndim, const int64_t *sizes, tp_tensor **out);
TP_API tp_status tp_tensor_zeros(tp_dtype dtype, int ndim, const int64_t *sizes, tp_tensor **out);
/* Contiguous copy of `data` (numel * dtype size bytes, C order). */
TP_API tp_status tp_tensor_from_data(tp_dtype dtype, int ndim, const int64_t *sizes,
                                     const void *data, tp_tensor **out);
/* Borrow `data` (nbytes long) without copying. `release(release_ctx, data)` is
 * called when the last view of it is freed (may be NULL: the caller keeps it
 * alive longer than every view - borrowed, must outlive the tensor). Strides
 * NULL means contiguous. Checks that every element lies inside nbytes. */
TP_API tp_status tp_tensor_borrow(tp_dtype dtype, int ndim, const int64_t *sizes,
                                  const int64_t *strides, int64_t offset, void *data,
                                  size_t nbytes, void (*release)(void *ctx, void *data),
                                  void *release_ctx, tp_tensor **out);
/* A 0-d tensor holding one value (converted with tp_tensor_fill rules). */
TP_API tp_status tp_tensor_scalar(tp_dtype dtype, double value, tp_tensor **out);
/* A meta tensor: dtype and shape, no storage (data pointer NULL). */
TP_API tp_status tp_tensor_meta(tp_dtype dtype, int ndim, const int64_t *sizes, tp_tensor **out);

/* ---- lifetime ---------------------------------------------------------- */
TP_API tp_tensor *tp_tensor_retain(tp_tensor *t); /* returns t */
TP_API void tp_tensor_free(tp_tensor *t);         /* drops one ref; NULL ok */

/* ---- inspection -------------------------------------------------------- */
TP_API tp_dtype tp_tensor_dtype(const tp_tensor *t);
TP_API int tp_tensor_ndim(const tp_tensor *t);
TP_API const int64_t *tp_tensor_sizes(const tp_tensor *t);   /* ndim entries */
TP_API const int64_t *tp_tensor_strides(const tp_tensor *t); /* in elements */
TP_API int64_t tp_tensor_size(const tp_tensor *t, int dim);  /* dim may be negative */
TP_API int64_t tp_tensor_offset(const tp_tensor *t);
TP_API int64_t tp_tensor_numel(const tp_tensor *t);
TP_API bool tp_tensor_is_contiguous(const tp_tensor *t);
TP_API bool tp_tensor_is_meta(const tp_tensor *t);
/* Pointer to element 0 of the view (storage data + offset); NULL for meta.
 * Borrowed: valid while the tensor lives. */
TP_API void *tp_tensor_data(const tp_tensor *t);
/* Same storage object? */
TP_API bool tp_tensor_shares_storage(const tp_tensor *a, const tp_tensor *b);
/* Read one element as double / int64 (index has ndim entries). */
TP_API double tp_tensor_get_f64(const tp_tensor *t, const int64_t *index);
TP_API int64_t tp_tensor_get_i64(const tp_tensor *t, const int64_t *index);
/* Element at flat C-order position `i` of the view (0 <= i < numel). */
TP_API double tp_tensor_item_f64(const tp_tensor *t, int64_t i);

/* ---- views (share storage; caller frees the new view) ------------------
 * dims may be negative (counted from the end), as in PyTorch. */
TP_API tp_status tp_tensor_view(tp_tensor *t, int ndim, const int64_t *sizes, tp_tensor **out);
/* reshape: a view when the strides allow it, otherwise a contiguous copy.
 * One size may be -1 (inferred). */
TP_API tp_status tp_tensor_reshape(tp_tensor *t, int ndim, const int64_t *sizes, tp_tensor **out);
TP_API tp_status tp_tensor_permute(tp_tensor *t, const int64_t *dims, tp_tensor **out);
TP_API tp_status tp_tensor_transpose(tp_tensor *t, int64_t dim0, int64_t dim1, tp_tensor **out);
/* expand: sizes has ndim >= t's rank; -1 keeps a size; size-1 dims broadcast
 * with stride 0. */
TP_API tp_status tp_tensor_expand(tp_tensor *t, int ndim, const int64_t *sizes, tp_tensor **out);
/* slice along dim [start, end) with step > 0; start/end clamp like Python. */
TP_API tp_status tp_tensor_slice(tp_tensor *t, int64_t dim, int64_t start, int64_t end,
                                 int64_t step, tp_tensor **out);
TP_API tp_status tp_tensor_select(tp_tensor *t, int64_t dim, int64_t index, tp_tensor **out);
TP_API tp_status tp_tensor_narrow(tp_tensor *t, int64_t dim, int64_t start, int64_t length,
                                  tp_tensor **out);
/* squeeze: dim == TP_ALL_DIMS removes every size-1 dim. */
#define TP_ALL_DIMS INT64_MIN
TP_API tp_status tp_tensor_squeeze(tp_tensor *t, int64_t dim, tp_tensor **out);
TP_API tp_status tp_tensor_unsqueeze(tp_tensor *t, int64_t dim, tp_tensor **out);
/* A view with explicit sizes/strides/offset on t's storage (checked to fit). */
TP_API tp_status tp_tensor_as_strided(tp_tensor *t, int ndim, const int64_t *sizes,
                                      const int64_t *strides, int64_t offset, tp_tensor **out);

/* ---- copies and conversion --------------------------------------------- */
/* New contiguous tensor with t's values (always a copy). */
TP_API tp_status tp_tensor_clone(const tp_tensor *t, tp_tensor **out);
/* t itself (retained) if contiguous, else a contiguous copy. */
TP_API tp_status tp_tensor_contiguous(tp_tensor *t, tp_tensor **out);
/* New contiguous tensor converted to dtype with PyTorch's rules: float->int
 * truncates toward zero, ->bool is (x != 0), float->half/bfloat16 rounds to
 * nearest even, NaN->bfloat16 stays NaN. */
TP_API tp_status tp_tensor_to(const tp_tensor *t, tp_dtype dtype, tp_tensor **out);
/* Copy src into dst (same numel after broadcasting src to dst's shape),
 * converting dtype; dst may be any strided view. */
TP_API tp_status tp_tensor_copy_(tp_tensor *dst, const tp_tensor *src);
/* Set every element of t to value (converted to t's dtype). */
TP_API tp_status tp_tensor_fill(tp_tensor *t, double value);

/* ---- comparison and printing ------------------------------------------- */
/* Same shape and every |a-b| <= atol + rtol*|b| (NaN equals NaN). dtypes may
 * differ. On mismatch returns false and, if msg != NULL, writes a
 * description of the first mismatch into msg (msg_size bytes). */
TP_API bool tp_tensor_allclose(const tp_tensor *a, const tp_tensor *b, double rtol, double atol,
                               char *msg, size_t msg_size);
/* Text like "tensor([[1, 2.5], [-3, 0.125]], size=[2, 2], dtype=float32)"
 * (floats with %.6g), elided with "..." past max_elems elements. */
TP_API void tp_tensor_print(const tp_tensor *t, FILE *f, int64_t max_elems);

/* ---- numpy .npy files (format 1.0, 2.0, 3.0; C or Fortran order; dtypes
 * f4 f8 f2 i8 i4 i2 i1 u1 b1). Loading reads either byte order ('<f4',
 * '>f4', '=f4', '|u1', ...) and gives a tensor in the host's order; saving
 * writes little-endian, as np.save does on x86. A malformed file gives
 * TP_ERR_CORRUPT (or TP_ERR_UNSUPPORTED for a valid but unsupported dtype)
 * naming the problem. bfloat16 has no .npy dtype: saving one gives
 * TP_ERR_UNSUPPORTED. */
TP_API tp_status tp_npy_load(const char *path, tp_tensor **out);
TP_API tp_status tp_npy_load_buffer(const void *data, size_t size, tp_tensor **out);
TP_API tp_status tp_npy_save(const char *path, const tp_tensor *t);
/* Serialise to a new buffer (caller frees *out_data with tp_free). */
TP_API tp_status tp_npy_save_buffer(const tp_tensor *t, void **out_data, size_t *out_size);

#ifdef __cplusplus
}
#endif
#endif
