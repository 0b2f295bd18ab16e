/*
 * torch_ops.c - ATen ops of PyTorch export archives -> our ops (torch.h).
 *
 * Two opsets arrive: the training IR torch.export.export emits (linear,
 * conv2d, layer_norm, batch_norm, scaled_dot_product_attention, in-place
 * add_ on buffers, view ops) and the core ATen opset run_decompositions()
 * produces (addmm, convolution, native_layer_norm,
 * _native_batch_norm_legit_no_training, _softmax, ...). Each entry lists
 * the overloads it accepts; an overload not listed is refused by name, as
 * its arguments may mean something else; aten.<name>.default of an op of
 * ours with that name and no entry maps one to one (torch_read.c, checked
 * by the recorded shapes). Argument names are ATen's, which
 * our schemas share unless the entry's map renames them. The writer
 * (torch_write.c) writes each op as its first entry without extra outputs or
 * fixed arguments, so the canonical ATen op of each of ours comes first.
 */
#include <string.h>

#include "torch.h"

#define E(name, overloads, op, map, fixed, flags) {name, overloads, TP_OP_##op, map, fixed, flags}
#define DROP(name, overloads) {name, overloads, TP_OP_INVALID, NULL, NULL, TP_TORCH_DROP}

static const tp_torch_op g_aten[] = {
    /* elementwise */
    E("add", "Tensor,Scalar", ADD, NULL, NULL, 0),
    E("sub", "Tensor,Scalar", SUB, NULL, NULL, 0),
    E("mul", "Tensor,Scalar", MUL, NULL, NULL, 0),
    E("div", "Tensor,Scalar,Tensor_mode,Scalar_mode", DIV, NULL, NULL, 0),
    E("pow", "Tensor_Scalar,Tensor_Tensor", POW, NULL, NULL, 0),
    E("remainder", "Tensor,Scalar", REMAINDER, NULL, NULL, 0),
    E("fmod", "Tensor,Scalar", FMOD, NULL, NULL, 0),
    E("xlogy", "Tensor,Scalar_Other", XLOGY, NULL, NULL, 0),
    E("special_xlog1py", "default,other_scalar", XLOG1PY, NULL, NULL, 0),
    E("float_power", "Tensor_Tensor,Tensor_Scalar", FLOAT_POWER, NULL, NULL, 0),
    E("bitwise_left_shift", "Tensor,Tensor_Scalar", BITWISE_LEFT_SHIFT, NULL, NULL, 0),
    E("bitwise_right_shift", "Tensor,Tensor_Scalar", BITWISE_RIGHT_SHIFT, NULL, NULL, 0),
    E("lerp", "Scalar,Tensor", LERP, NULL, NULL, 0),
    E("special_entr", "default", ENTR, NULL, NULL, 0),
    E("special_i0e", "default", I0E, NULL, NULL, 0),
    E("special_erfcx", "default", ERFCX, NULL, NULL, 0),
    E("copysign", "Tensor,Scalar", COPYSIGN, NULL, NULL, 0),
    E("ldexp", "Tensor", LDEXP, NULL, NULL, 0),
    E("frexp", "Tensor", FREXP, NULL, NULL, 0),
    E("maximum", "default", MAXIMUM, NULL, NULL, 0),
    E("minimum", "default", MINIMUM, NULL, NULL, 0),
    E("eq", "Tensor,Scalar", EQ, NULL, NULL, 0),
    E("ne", "Tensor,Scalar", NE, NULL, NULL, 0),
    E("lt", "Tensor,Scalar", LT, NULL, NULL, 0),
    E("le", "Tensor,Scalar", LE, NULL, NULL, 0),
    E("gt", "Tensor,Scalar", GT, NULL, NULL, 0),
    E("ge", "Tensor,Scalar", GE, NULL, NULL, 0),
    E("bitwise_and", "Tensor,Scalar", BITWISE_AND, NULL, NULL, 0),
    E("bitwise_or", "Tensor,Scalar", BITWISE_OR, NULL, NULL, 0),
    E("bitwise_xor", "Tensor,Scalar", BITWISE_XOR, NULL, NULL, 0),
    E("logical_and", "default", LOGICAL_AND, NULL, NULL, 0),
    E("logical_or", "default", LOGICAL_OR, NULL, NULL, 0),
    E("logical_not", "default", LOGICAL_NOT, NULL, NULL, 0),
    E("bitwise_not", "default", BITWISE_NOT, NULL, NULL, 0),
    E("where", "self,ScalarSelf,ScalarOther,Scalar", WHERE, NULL, NULL, 0),
    E("masked_fill", "Scalar,Tensor", MASKED_FILL, NULL, NULL, 0),
    E("neg", "default", NEG, NULL, NULL, 0),
    E("abs", "default", ABS, NULL, NULL, 0),
    E("exp", "default", EXP, NULL, NULL, 0),
    E("log", "default", LOG, NULL, NULL, 0),
    E("log1p", "default", LOG1P, NULL, NULL, 0),
    E("expm1", "default", EXPM1, NULL, NULL, 0),
    E("sqrt", "default", SQRT, NULL, NULL, 0),
    E("rsqrt", "default", RSQRT, NULL, NULL, 0),
    E("sin", "default", SIN, NULL, NULL, 0),
    E("cos", "default", COS, NULL, NULL, 0),
    E("tanh", "default", TANH, NULL, NULL, 0),
    E("sigmoid", "default", SIGMOID, NULL, NULL, 0),
    E("erf", "default", ERF, NULL, NULL, 0),
    E("reciprocal", "default", RECIPROCAL, NULL, NULL, 0),
    E("floor", "default", FLOOR, NULL, NULL, 0),
    E("ceil", "default", CEIL, NULL, NULL, 0),
    E("round", "default,decimals", ROUND, NULL, NULL, 0),
    E("trunc", "default", TRUNC, NULL, NULL, 0),
    E("sign", "default", SIGN, NULL, NULL, 0),
    E("relu", "default", RELU, NULL, NULL, 0),
    E("relu6", "default", RELU6, NULL, NULL, 0),
    E("gelu", "default", GELU, NULL, NULL, 0),
    E("silu", "default", SILU, NULL, NULL, 0),
    E("mish", "default", MISH, NULL, NULL, 0),
    E("hardtanh", "default", HARDTANH, NULL, NULL, 0),
    E("hardswish", "default", HARDSWISH, NULL, NULL, 0),
    E("hardsigmoid", "default", HARDSIGMOID, NULL, NULL, 0),
    E("leaky_relu", "default", LEAKY_RELU, NULL, NULL, 0),
    E("elu", "default", ELU, NULL, NULL, 0),
    E("softplus", "default", SOFTPLUS, NULL, NULL, 0),
    E("prelu", "default", PRELU, NULL, NULL, 0),
    E("glu", "default", GLU, NULL, NULL, 0),
    E("clamp", "default,Tensor", CLAMP, NULL, NULL, 0),
    E("clamp_min", "default", CLAMP, NULL, NULL, 0),
    E("clamp_max", "default", CLAMP, NULL, NULL, 0),
    E("tril", "default", TRIL, NULL, NULL, 0),
    E("triu", "default", TRIU, NULL, NULL, 0),
    /* in place (training IR, on buffers and fresh tensors) */
    E("add_", "Tensor,Scalar", ADD_, NULL, NULL, 0),
    E("mul_", "Tensor,Scalar", MUL_, NULL, NULL, 0),
    E("copy_", "default", COPY_, NULL, NULL, 0),
    E("fill_", "Scalar,Tensor", FILL_, NULL, NULL, 0),
    E("zero_", "default", ZERO_, NULL, NULL, 0),
    /* reductions */
    E("sum", "default,dim_IntList", SUM, NULL, NULL, 0),
    E("mean", "default,dim", MEAN, NULL, NULL, 0),
    E("prod", "default,dim_int", PROD, NULL, NULL, 0),
    E("amax", "default", AMAX, NULL, NULL, 0),
    E("amin", "default", AMIN, NULL, NULL, 0),
    E("max", "default,dim", MAX, NULL, NULL, 0),
    E("min", "default,dim", MIN, NULL, NULL, 0),
    E("argmax", "default", ARGMAX, NULL, NULL, 0),
    E("argmin", "default", ARGMIN, NULL, NULL, 0),
    E("any", "default,dim,dims", ANY, NULL, NULL, 0),
    E("all", "default,dim", ALL, NULL, NULL, 0),
    E("var", "correction,dim,default", VAR, NULL, NULL, 0),
    E("std", "correction,dim,default", STD, NULL, NULL, 0),
    E("logsumexp", "default", LOGSUMEXP, NULL, NULL, 0),
    E("cumsum", "default", CUMSUM, NULL, NULL, 0),
    E("quantile", "default,scalar", QUANTILE, NULL, NULL, 0),
    E("nanquantile", "default,scalar", NANQUANTILE, NULL, NULL, 0),
    E("norm", "Scalar,ScalarOpt_dim", NORM, NULL, NULL, 0),
    E("count_nonzero", "default,dim_IntList", COUNT_NONZERO, NULL, NULL, 0),
    E("median", "default,dim", MEDIAN, NULL, NULL, 0),
    E("nanmedian", "default,dim", NANMEDIAN, NULL, NULL, 0),
    E("cumprod", "default", CUMPROD, NULL, NULL, 0),
    E("softmax", "int", SOFTMAX, NULL, NULL, 0),
    E("log_softmax", "int", LOG_SOFTMAX, NULL, NULL, 0),
    E("_softmax", "default", SOFTMAX, "half_to_float:=false", NULL, 0),
    E("_log_softmax", "default", LOG_SOFTMAX, "half_to_float:=false", NULL, 0),
    E("topk", "default", TOPK, NULL, NULL, 0),
    E("sort", "default,stable", SORT, NULL, NULL, 0),
    /* matrix products */
    E("linear", "default", LINEAR, NULL, NULL, 0),
    E("addmm", "default", ADDMM, NULL, NULL, 0),
    E("mm", "default", MM, NULL, NULL, 0),
    E("bmm", "default", BMM, NULL, NULL, 0),
    E("matmul", "default", MATMUL, NULL, NULL, 0),
    E("baddbmm", "default", BADDBMM, NULL, NULL, 0),
    E("einsum", "default", EINSUM, NULL, NULL, 0),
    E("scaled_dot_product_attention", "default", SCALED_DOT_PRODUCT_ATTENTION, "enable_gqa:=false", NULL, 0),
    E("_scaled_dot_product_flash_attention_for_cpu", "default", SCALED_DOT_PRODUCT_ATTENTION, NULL, NULL,
      TP_TORCH_FIRST),
    /* convolution, normalisation, pooling */
    E("convolution", "default", CONVOLUTION, NULL, NULL, 0),
    E("conv1d", "default,padding", CONV1D, NULL, NULL, 0),
    E("conv2d", "default,padding", CONV2D, NULL, NULL, 0),
    E("conv3d", "default,padding", CONV3D, NULL, NULL, 0),
    E("conv_transpose1d", "default,input", CONV_TRANSPOSE1D, NULL, NULL, 0),
    E("conv_transpose2d", "default,input", CONV_TRANSPOSE2D, NULL, NULL, 0),
    E("batch_norm", "default", BATCH_NORM, "cudnn_enabled:-true", NULL, TP_TORCH_KW),
    E("_native_batch_norm_legit_no_training", "default", BATCH_NORM, NULL, "training=false", TP_TORCH_FIRST),
    E("layer_norm", "default", LAYER_NORM, "cudnn_enable:-true", NULL, 0),
    E("native_layer_norm", "default", LAYER_NORM, NULL, NULL, TP_TORCH_FIRST),
    E("group_norm", "default", GROUP_NORM, "cudnn_enabled:-true", NULL, 0),
    E("native_group_norm", "default", GROUP_NORM, "N:-,C:-,HxW:-,group:num_groups", NULL, TP_TORCH_FIRST),
    E("dropout", "default", DROPOUT, "self:input", NULL, 0),
    E("native_dropout", "default", NATIVE_DROPOUT, NULL, NULL, 0),
    E("max_pool1d", "default", MAX_POOL1D, NULL, NULL, 0),
    E("max_pool2d", "default", MAX_POOL2D, NULL, NULL, 0),
    E("max_pool2d_with_indices", "default", MAX_POOL2D_WITH_INDICES, NULL, NULL, 0),
    E("avg_pool1d", "default", AVG_POOL1D, NULL, NULL, 0),
    E("avg_pool2d", "default", AVG_POOL2D, NULL, NULL, 0),
    E("adaptive_avg_pool1d", "default", ADAPTIVE_AVG_POOL1D, NULL, NULL, 0),
    E("adaptive_avg_pool2d", "default", ADAPTIVE_AVG_POOL2D, NULL, NULL, 0),
    E("_adaptive_avg_pool3d", "default", ADAPTIVE_AVG_POOL3D, NULL, NULL, 0),
    E("_pdist_forward", "default", PDIST, NULL, NULL, 0),
    E("_adaptive_avg_pool2d", "default", ADAPTIVE_AVG_POOL2D, NULL, NULL, 0),
    E("upsample_nearest2d", "vec", INTERPOLATE, "output_size:size,scale_factors:scale_factor", "mode='nearest'", 0),
    E("upsample_bilinear2d", "vec", INTERPOLATE, "output_size:size,scale_factors:scale_factor",
      "mode='bilinear'", 0),
    E("upsample_nearest1d", "vec", INTERPOLATE, "output_size:size,scale_factors:scale_factor", "mode='nearest'", 0),
    E("upsample_nearest3d", "vec", INTERPOLATE, "output_size:size,scale_factors:scale_factor", "mode='nearest'", 0),
    E("upsample_linear1d", "vec", INTERPOLATE, "output_size:size,scale_factors:scale_factor", "mode='linear'", 0),
    E("upsample_bicubic2d", "vec", INTERPOLATE, "output_size:size,scale_factors:scale_factor", "mode='bicubic'", 0),
    E("upsample_trilinear3d", "vec", INTERPOLATE, "output_size:size,scale_factors:scale_factor",
      "mode='trilinear'", 0),
    E("pixel_shuffle", "default", PIXEL_SHUFFLE, NULL, NULL, 0),
    /* modes as ints in ATen (bilinear 0, nearest 1, bicubic 2; zeros 0, border 1, reflection 2) */
    E("grid_sampler_2d", "default", GRID_SAMPLE, "interpolation_mode:mode", NULL, 0),
    E("grid_sampler", "default", GRID_SAMPLE, "interpolation_mode:mode", NULL, 0),
    E("affine_grid_generator", "default", AFFINE_GRID, NULL, NULL, 0),
    /* ATen's adaptive max pools return (values, indices) */
    E("adaptive_max_pool1d", "default", ADAPTIVE_MAX_POOL1D_WITH_INDICES, NULL, NULL, 0),
    E("adaptive_max_pool2d", "default", ADAPTIVE_MAX_POOL2D_WITH_INDICES, NULL, NULL, 0),
    E("adaptive_max_pool3d", "default", ADAPTIVE_MAX_POOL3D_WITH_INDICES, NULL, NULL, 0),
    E("instance_norm", "default", INSTANCE_NORM, "cudnn_enabled:-true", NULL, 0),
    E("embedding", "default", EMBEDDING, NULL, NULL, 0),
    /* shapes and views */
    E("view", "default", VIEW, NULL, NULL, 0),
    E("reshape", "default", RESHAPE, NULL, NULL, 0),
    E("_unsafe_view", "default", RESHAPE, "size:shape", NULL, 0),
    E("expand", "default", EXPAND, "implicit:=false", NULL, 0),
    E("permute", "default", PERMUTE, NULL, NULL, 0),
    E("transpose", "int", TRANSPOSE, NULL, NULL, 0),
    E("swapaxes", "default", TRANSPOSE, "axis0:dim0,axis1:dim1", NULL, 0),
    E("swapdims", "default", TRANSPOSE, NULL, NULL, 0),
    E("movedim", "intlist", MOVEDIM, NULL, NULL, 0),
    E("diagonal", "default", DIAGONAL, NULL, NULL, 0),
    E("t", "default", TRANSPOSE, NULL, NULL, TP_TORCH_T),
    E("unsqueeze", "default", UNSQUEEZE, NULL, NULL, 0),
    E("squeeze", "default,dim,dims", SQUEEZE, NULL, NULL, 0),
    E("flatten", "using_ints", FLATTEN, NULL, NULL, 0),
    E("unflatten", "int", UNFLATTEN, NULL, NULL, 0),
    E("cat", "default", CAT, NULL, NULL, 0),
    E("stack", "default", STACK, NULL, NULL, 0),
    E("slice", "Tensor", SLICE, NULL, NULL, 0),
    E("select", "int", SELECT, NULL, NULL, 0),
    E("narrow", "default", NARROW, NULL, NULL, 0),
    E("split", "Tensor", SPLIT, "split_size:split_size_or_sections", NULL, 0),
    E("split_with_sizes", "default", SPLIT, "split_sizes:split_size_or_sections", NULL, 0),
    E("chunk", "default", CHUNK, NULL, NULL, 0),
    E("tensor_split", "sections,indices,tensor_indices_or_sections", TENSOR_SPLIT,
      "sections:indices_or_sections,indices:indices_or_sections,tensor_indices_or_sections:indices_or_sections", NULL, 0),
    E("hsplit", "int,array", HSPLIT, "sections:indices_or_sections,indices:indices_or_sections", NULL, 0),
    E("vsplit", "int,array", VSPLIT, "sections:indices_or_sections,indices:indices_or_sections", NULL, 0),
    E("dsplit", "int,array", DSPLIT, "sections:indices_or_sections,indices:indices_or_sections", NULL, 0),
    E("repeat_interleave", "self_Tensor,self_int", REPEAT_INTERLEAVE, NULL, NULL, 0),
    E("unbind", "int", UNBIND, NULL, NULL, 0),
    E("flip", "default", FLIP, NULL, NULL, 0),
    E("roll", "default", ROLL, NULL, NULL, 0),
    E("repeat", "default", REPEAT, NULL, NULL, 0),
    E("tile", "default", TILE, NULL, NULL, 0),
    E("constant_pad_nd", "default", PAD, "self:input", "mode='constant'", 0),
    E("pad", "default", PAD, "self:input", NULL, 0),
    E("reflection_pad1d", "default", PAD, "self:input,padding:pad", "mode='reflect'", 0),
    E("reflection_pad2d", "default", PAD, "self:input,padding:pad", "mode='reflect'", 0),
    E("reflection_pad3d", "default", PAD, "self:input,padding:pad", "mode='reflect'", 0),
    E("replication_pad1d", "default", PAD, "self:input,padding:pad", "mode='replicate'", 0),
    E("replication_pad2d", "default", PAD, "self:input,padding:pad", "mode='replicate'", 0),
    E("replication_pad3d", "default", PAD, "self:input,padding:pad", "mode='replicate'", 0),
    E("clone", "default", CLONE, NULL, NULL, 0),
    E("contiguous", "default", CONTIGUOUS, NULL, NULL, 0),
    E("alias", "default", CLONE, NULL, NULL, 0),
    E("detach", "default", CLONE, NULL, NULL, 0),
    E("lift_fresh_copy", "default", CLONE, NULL, NULL, 0),
    E("to", "dtype,dtype_layout", TO, NULL, NULL, 0),
    E("_to_copy", "default", TO, NULL, NULL, 0),
    E("index", "Tensor", INDEX, NULL, NULL, 0),
    E("index_select", "default", INDEX_SELECT, NULL, NULL, 0),
    E("gather", "default", GATHER, "sparse_grad:=false", NULL, 0),
    E("scatter", "src,value", SCATTER, "value:src", NULL, 0),
    E("scatter_reduce", "two", SCATTER_REDUCE, NULL, NULL, 0),
    E("index_add", "default", INDEX_ADD, NULL, NULL, 0),
    E("index_fill", "int_Scalar,int_Tensor", INDEX_FILL, NULL, NULL, 0),
    E("index_put", "default", INDEX_PUT, NULL, NULL, 0),
    E("bucketize", "Tensor", BUCKETIZE, NULL, NULL, 0),
    E("searchsorted", "Tensor,Scalar", SEARCHSORTED, NULL, NULL, 0),
    E("histogram", "bin_ct,bins_tensor", HISTOGRAM, NULL, NULL, 0),
    E("cross_entropy_loss", "default", CROSS_ENTROPY, NULL, NULL, 0),
    E("index_put_", "default", INDEX_PUT_, NULL, NULL, 0),
    /* creation */
    E("full", "default", FULL, NULL, NULL, 0),
    E("full_like", "default", FULL_LIKE, NULL, NULL, 0),
    E("zeros", "default", ZEROS, NULL, NULL, 0),
    E("ones", "default", ONES, NULL, NULL, 0),
    E("zeros_like", "default", ZEROS_LIKE, NULL, NULL, 0),
    E("ones_like", "default", ONES_LIKE, NULL, NULL, 0),
    E("new_zeros", "default", NEW_ZEROS, NULL, NULL, 0),
    E("arange", "start_step,start", ARANGE, NULL, NULL, 0),
    E("arange", "default", ARANGE, "end:start", NULL, 0), /* arange(end): our start is its end */
    E("argsort", "default,stable", ARGSORT, NULL, NULL, 0),
    E("scalar_tensor", "default", FULL, "s:fill_value", "size=[]", 0),
    E("fill", "Scalar", FULL_LIKE, "value:fill_value", NULL, 0),
    /* uninitialised memory in PyTorch: zeros are one of its values */
    E("empty", "memory_format", ZEROS, NULL, NULL, 0),
    E("empty_strided", "default", ZEROS, "stride:-", NULL, 0),
    /* symbolic sizes */
    E("sym_size", "int", SYM_SIZE, NULL, NULL, 0),
    /* runtime assertions: the program checks its ranges itself */
    DROP("_assert_scalar", "default"),
    DROP("_assert_tensor_metadata", "default"),
    DROP("sym_constrain_range_for_size", "default"),
    DROP("sym_constrain_range", "default"),
    DROP("_assert_async", "default,msg"),
};

static const tp_torch_op g_operator[] = {
    E("add", "", SYM_ADD, NULL, NULL, TP_TORCH_SYMINT),
    E("sub", "", SYM_SUB, NULL, NULL, TP_TORCH_SYMINT),
    E("mul", "", SYM_MUL, NULL, NULL, TP_TORCH_SYMINT),
    E("floordiv", "", SYM_FLOORDIV, NULL, NULL, TP_TORCH_SYMINT),
};

/* Ops of ours whose ATen op is special_<name> (torch.special). */
static const char *const g_special[] = {
    "i1", "i1e", "ndtr", "ndtri", "log_ndtr", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1",
    "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
    "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0", "airy_ai", "zeta",
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
    "legendre_polynomial_p"};

bool tp__torch_is_special(const char *name) {
    for (size_t i = 0; i < TP_ARRAY_LEN(g_special); i++)
        if (!strcmp(g_special[i], name)) return true;
    return false;
}

static bool listed(const char *list, const char *item) {
    size_t n = strlen(item);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && memcmp(p, item, n) == 0) return true;
        if (!end) break;
        p = end + 1;
    }
    return false;
}

const tp_torch_op *tp__torch_find_op(const char *module, const char *name, const char *overload) {
    if (strcmp(module, "_operator") == 0) {
        for (size_t i = 0; i < TP_ARRAY_LEN(g_operator); i++)
            if (strcmp(g_operator[i].name, name) == 0) return &g_operator[i];
        return NULL;
    }
    if (strcmp(module, "aten") != 0) return NULL;
    for (size_t i = 0; i < TP_ARRAY_LEN(g_aten); i++)
        if (strcmp(g_aten[i].name, name) == 0 && listed(g_aten[i].overloads, overload)) return &g_aten[i];
    return NULL;
}

const tp_torch_op *tp__torch_op_table(int *n) {
    *n = (int)TP_ARRAY_LEN(g_aten);
    return g_aten;
}
