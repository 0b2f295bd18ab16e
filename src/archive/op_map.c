/*
 * op_map.c - the one table mapping tensorplay callees (function references
 * and Tensor method names found in program documents) to our ops, with
 * each callee's parameter list mapped onto the op's schema (serde.h
 * explains the notation), and the callee written for each op.
 *
 * Sources of the entries: what tensorplay 1.0's exporter emits for the
 * layers and tensor operations of common models (nn.Linear -> nn.functional
 * .linear, x + y -> _operator.add, x.view(2, 3) -> method "view", F.softmax
 * -> method "softmax", ...), the signatures of tensorplay.functional and
 * tensorplay.nn.functional, and, for methods, PyTorch's Tensor methods.
 */
#include <string.h>

#include "serde.h"

#define TF "tensorplay.functional"
#define NF "tensorplay.nn.functional"
#define OPR "_operator"

/* A function / method entry, plain mapping. */
#define FN(mod, nm, id, params) {mod, nm, TP_OP_##id, TP_SERDE_PLAIN, params, NULL, 0, TP_OP_INVALID}
#define FNW(mod, nm, id, params) {mod, nm, TP_OP_##id, TP_SERDE_PLAIN, params, NULL, TP_SERDE_WRITE, TP_OP_INVALID}
#define MT(nm, id, params) {NULL, nm, TP_OP_##id, TP_SERDE_PLAIN, params, NULL, 0, TP_OP_INVALID}
/* In-place method without an op of its own: op, then copy_ into self. */
#define MT_(nm, id, params) {NULL, nm, TP_OP_##id, TP_SERDE_PLAIN, params, NULL, TP_SERDE_COPY_BACK, TP_OP_INVALID}
/* In-place function without an op of its own (tensorplay.functional.x_). */
#define FN_(mod, nm, id, params) {mod, nm, TP_OP_##id, TP_SERDE_PLAIN, params, NULL, TP_SERDE_COPY_BACK, TP_OP_INVALID}
#define SP(mod, nm, id, special, params) {mod, nm, TP_OP_##id, special, params, NULL, 0, TP_OP_INVALID}
#define FIX(mod, nm, id, params, fixed) {mod, nm, TP_OP_##id, TP_SERDE_PLAIN, params, fixed, 0, TP_OP_INVALID}

/* Unary elementwise: tensorplay.functional.x(input, *, out=None) (written),
 * Tensor.x(), Tensor.x_(). */
#define UNARY(id, nm)                                                                                          \
    FNW(TF, nm, id, "input,*,out:!=None"), MT(nm, id, "self"), MT_(nm "_", id, "self")
/* Same, plus tensorplay.functional.x_(input). */
#define UNARY_TF_(id, nm) UNARY(id, nm), FN_(TF, nm "_", id, "input")
/* Same, tensorplay.functional.x(input) without out=. */
#define UNARY_NO_OUT(id, nm) FNW(TF, nm, id, "input"), MT(nm, id, "self"), MT_(nm "_", id, "self")
/* Binary tensor-or-scalar ops: functional (input, other, *, out), method. */
#define BINARY(id, nm)                                                                                         \
    FNW(TF, nm, id, "input,other,*,out:!=None"), MT(nm, id, "self,other"), MT_(nm "_", id, "self,other")
/* _operator.x(a, b). */
#define OPER(nm, id, flags, swapped)                                                                           \
    {OPR, nm, TP_OP_##id, TP_SERDE_BINOP, "a:self,b:other", NULL, flags, TP_OP_##swapped}
/* nn.functional.max_poolNd(..., return_indices): the _with_indices op when true. */
#define MAXPOOL(mod, nm, id)                                                                                   \
    {mod, nm, TP_OP_##id, TP_SERDE_RETURN_INDICES,                                                            \
     "input,kernel_size,stride,padding,dilation,ceil_mode,return_indices:-", NULL, 0, TP_OP_##id##_WITH_INDICES}
/* Casts: Tensor.float() -> to(dtype=float32). */
#define CAST(nm, dt) {NULL, nm, TP_OP_TO, TP_SERDE_PLAIN, "self,*,memory_format:-", "dtype=dtype:" dt, 0, TP_OP_INVALID}

static const tp_serde_op_entry g_table[] = {
    /* ---- unary elementwise ---- */
    UNARY(NEG, "neg"),
    UNARY(ABS, "abs"),
    UNARY(EXP, "exp"),
    UNARY(LOG, "log"),
    UNARY(LOG1P, "log1p"),
    UNARY(EXPM1, "expm1"),
    UNARY(SQRT, "sqrt"),
    UNARY(RSQRT, "rsqrt"),
    UNARY(SIN, "sin"),
    UNARY(COS, "cos"),
    UNARY(TAN, "tan"),
    UNARY(TANH, "tanh"),
    FN(NF, "tanh", TANH, "input"),
    UNARY(SIGMOID, "sigmoid"),
    FN(NF, "sigmoid", SIGMOID, "input"),
    UNARY(ERF, "erf"),
    UNARY(RECIPROCAL, "reciprocal"),
    UNARY(FLOOR, "floor"),
    UNARY(CEIL, "ceil"),
    FNW(TF, "round", ROUND, "input,*,decimals,out:!=None"),
    MT("round", ROUND, "self,*,decimals"),
    MT_("round_", ROUND, "self,*,decimals"),
    UNARY(TRUNC, "trunc"),
    UNARY(SIGN, "sign"),
    UNARY(SQUARE, "square"),
    UNARY(LOGICAL_NOT, "logical_not"),
    UNARY(BITWISE_NOT, "bitwise_not"),
    FNW(TF, "isnan", ISNAN, "input"),
    MT("isnan", ISNAN, "self"),
    FNW(TF, "isinf", ISINF, "input"),
    MT("isinf", ISINF, "self"),
    UNARY_TF_(SINH, "sinh"),
    UNARY_TF_(COSH, "cosh"),
    UNARY_TF_(ASIN, "asin"),
    UNARY_TF_(ACOS, "acos"),
    UNARY_TF_(ATAN, "atan"),
    UNARY_TF_(ASINH, "asinh"),
    UNARY_TF_(ACOSH, "acosh"),
    UNARY_TF_(ATANH, "atanh"),
    UNARY_TF_(ERFC, "erfc"),
    UNARY_TF_(ERFINV, "erfinv"),
    UNARY_TF_(LGAMMA, "lgamma"),
    UNARY_TF_(LOG2, "log2"),
    UNARY_TF_(LOG10, "log10"),
    UNARY_TF_(EXP2, "exp2"),
    UNARY_TF_(DEG2RAD, "deg2rad"),
    UNARY_TF_(FRAC, "frac"),
    FNW(TF, "isfinite", ISFINITE, "input"),
    MT("isfinite", ISFINITE, "self"),
    /* aliases (PyTorch's names for the same functions) */
    FN(TF, "absolute", ABS, "input,*,out:!=None"),
    MT("absolute", ABS, "self"),
    MT_("absolute_", ABS, "self"),
    FN(TF, "negative", NEG, "input,*,out:!=None"),
    MT("negative", NEG, "self"),
    MT_("negative_", NEG, "self"),
    SP(TF, "positive", TO, TP_SERDE_ALIAS, "input"),
    SP(NULL, "positive", TO, TP_SERDE_ALIAS, "self"),
    FN(TF, "fix", TRUNC, "input,*,out:!=None"),
    MT("fix", TRUNC, "self"),
    MT_("fix_", TRUNC, "self"),
    FN(TF, "arcsin", ASIN, "input,*,out:!=None"),
    MT("arcsin", ASIN, "self"),
    MT_("arcsin_", ASIN, "self"),
    FN(TF, "arccos", ACOS, "input,*,out:!=None"),
    MT("arccos", ACOS, "self"),
    MT_("arccos_", ACOS, "self"),
    FN(TF, "arctan", ATAN, "input,*,out:!=None"),
    MT("arctan", ATAN, "self"),
    MT_("arctan_", ATAN, "self"),
    FN(TF, "arcsinh", ASINH, "input,*,out:!=None"),
    MT("arcsinh", ASINH, "self"),
    MT_("arcsinh_", ASINH, "self"),
    FN(TF, "arccosh", ACOSH, "input,*,out:!=None"),
    MT("arccosh", ACOSH, "self"),
    MT_("arccosh_", ACOSH, "self"),
    FN(TF, "arctanh", ATANH, "input,*,out:!=None"),
    MT("arctanh", ATANH, "self"),
    MT_("arctanh_", ATANH, "self"),

    /* ---- activations ---- */
    UNARY_NO_OUT(RELU, "relu"),
    FN(NF, "relu", RELU, "input,inplace:@"),
    {NF, "relu_", TP_OP_RELU, TP_SERDE_PLAIN, "input", NULL, TP_SERDE_COPY_BACK, TP_OP_INVALID},
    UNARY_NO_OUT(RELU6, "relu6"),
    FN(NF, "relu6", RELU6, "input,inplace:@"),
    FNW(TF, "leaky_relu", LEAKY_RELU, "input,negative_slope,*,out:!=None"),
    FN(NF, "leaky_relu", LEAKY_RELU, "input,negative_slope,inplace:@"),
    MT("leaky_relu", LEAKY_RELU, "self,negative_slope"),
    MT_("leaky_relu_", LEAKY_RELU, "self,negative_slope"),
    FNW(TF, "elu", ELU, "input,alpha,scale,input_scale,*,out:!=None"),
    FN(NF, "elu", ELU, "input,alpha,inplace:@"),
    MT("elu", ELU, "self,alpha,scale,input_scale"),
    MT_("elu_", ELU, "self,alpha,scale,input_scale"),
    UNARY_NO_OUT(SELU, "selu"),
    FN(NF, "selu", SELU, "input,inplace:@"),
    FNW(TF, "gelu", GELU, "input,approximate,*,out:!=None"),
    FN(NF, "gelu", GELU, "input,approximate"),
    MT("gelu", GELU, "self,*,approximate"),
    MT_("gelu_", GELU, "self,*,approximate"),
    UNARY(SILU, "silu"),
    FN(NF, "silu", SILU, "input,inplace:@"),
    UNARY(MISH, "mish"),
    FN(NF, "mish", MISH, "input,inplace:@"),
    FNW(TF, "softplus", SOFTPLUS, "input,beta,threshold,*,out:!=None"),
    FN(NF, "softplus", SOFTPLUS, "input,beta,threshold"),
    MT("softplus", SOFTPLUS, "self,beta,threshold"),
    FNW(TF, "hardtanh", HARDTANH, "input,min_val,max_val,*,out:!=None"),
    FN(NF, "hardtanh", HARDTANH, "input,min_val,max_val,inplace:@"),
    MT("hardtanh", HARDTANH, "self,min_val,max_val"),
    MT_("hardtanh_", HARDTANH, "self,min_val,max_val"),
    UNARY(HARDSIGMOID, "hardsigmoid"),
    FN(NF, "hardsigmoid", HARDSIGMOID, "input,inplace:@"),
    UNARY(HARDSWISH, "hardswish"),
    FN(NF, "hardswish", HARDSWISH, "input,inplace:@"),
    FNW(TF, "clamp", CLAMP, "input,min,max,*,out:!=None"),
    FN("tensorplay", "clamp", CLAMP, "input,min,max,*,out:!=None"),
    MT("clamp", CLAMP, "self,min,max"),
    MT_("clamp_", CLAMP, "self,min,max"),
    MT("clip", CLAMP, "self,min,max"),
    MT("clamp_min", CLAMP, "self,min"),
    MT_("clamp_min_", CLAMP, "self,min"),
    MT("clamp_max", CLAMP, "self,max"),
    MT_("clamp_max_", CLAMP, "self,max"),
    FN(TF, "clip", CLAMP, "input,min,max,*,out:!=None"),
    FN_(TF, "clip_", CLAMP, "input,min,max"),
    MT_("clip_", CLAMP, "self,min,max"),
    /* nn.functional.celu records tensorplay.functional.celu / celu_ */
    FNW(TF, "celu", CELU, "input,alpha"),
    FN_(TF, "celu_", CELU, "input,alpha"),
    MT("celu", CELU, "self,alpha"),
    MT_("celu_", CELU, "self,alpha"),
    /* nn.functional.logsigmoid records tensorplay.functional.log_sigmoid */
    FNW(TF, "log_sigmoid", LOG_SIGMOID, "input,*,out:!=None"),
    MT("log_sigmoid", LOG_SIGMOID, "self"),
    FNW(TF, "softshrink", SOFTSHRINK, "input,lambd,*,out:!=None"),
    MT("softshrink", SOFTSHRINK, "self,lambd"),
    FNW(TF, "hardshrink", HARDSHRINK, "input,lambd,*,out:!=None"),
    MT("hardshrink", HARDSHRINK, "self,lambd"),
    /* tensorplay.functional.threshold cannot be exported (1.0): the
     * nn.functional one is written */
    FNW(NF, "threshold", THRESHOLD, "input,threshold,value,inplace:@"),
    FN_(TF, "threshold_", THRESHOLD, "input,threshold,value"),
    MT_("threshold_", THRESHOLD, "self,threshold,value"),
    /* rrelu: eval mode only (training=True is refused by the op); nn.functional
     * .rrelu records rrelu_with_noise(input, noise, ...) and ignores the noise
     * tensor unless training */
    FNW(TF, "rrelu", RRELU, "input,lower,upper,training"),
    FN_(TF, "rrelu_", RRELU, "input,lower,upper,training"),
    FN(TF, "rrelu_with_noise", RRELU, "input,noise:-,lower,upper,training,*,out:!=None"),
    MT("rrelu", RRELU, "self,lower,upper,training"),
    MT_("rrelu_", RRELU, "self,lower,upper,training"),
    /* nn.functional's in-place forms record tensorplay.functional.x_ */
    FN_(TF, "elu_", ELU, "input,alpha,scale,input_scale"),
    FN_(TF, "selu_", SELU, "input"),
    FN_(TF, "leaky_relu_", LEAKY_RELU, "input,negative_slope"),
    FN_(TF, "hardtanh_", HARDTANH, "input,min_val,max_val"),
    /* tensorplay 1.0 traces softsign and tanhshrink into abs/add/div and
     * tanh/sub; the nn.functional functions are written for the ops */
    FNW(NF, "softsign", SOFTSIGN, "input"),
    FNW(NF, "tanhshrink", TANHSHRINK, "input"),

    /* ---- binary elementwise ---- */
    FNW(TF, "add", ADD, "input,other,*,alpha,out:!=None"),
    MT("add", ADD, "self,other,*,alpha"),
    FNW(TF, "sub", SUB, "input,other,alpha"),
    MT("sub", SUB, "self,other,*,alpha"),
    MT_("sub_", SUB, "self,other,*,alpha"),
    FN(TF, "subtract", SUB, "input,other,alpha"),
    MT("subtract", SUB, "self,other,*,alpha"),
    MT_("subtract_", SUB, "self,other,*,alpha"),
    FNW(TF, "mul", MUL, "input,other"),
    MT("mul", MUL, "self,other"),
    FN(TF, "multiply", MUL, "input,other"),
    MT("multiply", MUL, "self,other"),
    FNW(TF, "div", DIV, "input,other,rounding_mode"),
    MT("div", DIV, "self,other,*,rounding_mode"),
    MT_("div_", DIV, "self,other,*,rounding_mode"),
    FN(TF, "divide", DIV, "input,other,rounding_mode"),
    MT("true_divide", DIV, "self,other"),
    MT("divide", DIV, "self,other,*,rounding_mode"),
    MT_("divide_", DIV, "self,other,*,rounding_mode"),
    MT_("true_divide_", DIV, "self,other"),
    FIX(NULL, "floor_divide", DIV, "self,other", "rounding_mode='floor'"),
    FIX(TF, "floor_divide", DIV, "input,other", "rounding_mode='floor'"),
    /* tensorplay.functional.floor_divide_ records the method */
    {NULL, "floor_divide_", TP_OP_DIV, TP_SERDE_PLAIN, "self,other", "rounding_mode='floor'", TP_SERDE_COPY_BACK,
     TP_OP_INVALID},
    BINARY(REMAINDER, "remainder"),
    FNW(TF, "fmod", FMOD, "input,other"),
    MT("fmod", FMOD, "self,other"),
    MT_("fmod_", FMOD, "self,other"),
    FNW(TF, "pow", POW, "input,exponent,*,out:!=None"),
    MT("pow", POW, "self,exponent"),
    MT_("pow_", POW, "self,exponent"),
    BINARY(MAXIMUM, "maximum"),
    BINARY(MINIMUM, "minimum"),
    BINARY(ATAN2, "atan2"),
    FN(TF, "arctan2", ATAN2, "input,other,*,out:!=None"),
    MT("arctan2", ATAN2, "self,other"),
    MT_("arctan2_", ATAN2, "self,other"),
    BINARY(HYPOT, "hypot"),
    FN_(TF, "hypot_", HYPOT, "input,other"),
    /* tensorplay.functional.copysign_ records the method */
    FNW(TF, "copysign", COPYSIGN, "input,other"),
    MT("copysign", COPYSIGN, "self,other"),
    MT_("copysign_", COPYSIGN, "self,other"),
    BINARY(EQ, "eq"),
    BINARY(NE, "ne"),
    BINARY(LT, "lt"),
    BINARY(LE, "le"),
    BINARY(GT, "gt"),
    BINARY(GE, "ge"),
    FN(TF, "not_equal", NE, "input,other,*,out:!=None"),
    MT("not_equal", NE, "self,other"),
    MT_("not_equal_", NE, "self,other"),
    FN(TF, "less", LT, "input,other,*,out:!=None"),
    MT("less", LT, "self,other"),
    MT_("less_", LT, "self,other"),
    FN(TF, "less_equal", LE, "input,other,*,out:!=None"),
    MT("less_equal", LE, "self,other"),
    MT_("less_equal_", LE, "self,other"),
    FN(TF, "greater", GT, "input,other,*,out:!=None"),
    MT("greater", GT, "self,other"),
    MT_("greater_", GT, "self,other"),
    FN(TF, "greater_equal", GE, "input,other,*,out:!=None"),
    MT("greater_equal", GE, "self,other"),
    MT_("greater_equal_", GE, "self,other"),
    BINARY(LOGICAL_AND, "logical_and"),
    BINARY(LOGICAL_OR, "logical_or"),
    BINARY(LOGICAL_XOR, "logical_xor"),
    BINARY(BITWISE_AND, "bitwise_and"),
    BINARY(BITWISE_OR, "bitwise_or"),
    BINARY(BITWISE_XOR, "bitwise_xor"),
    BINARY(BITWISE_LEFT_SHIFT, "bitwise_left_shift"),
    BINARY(BITWISE_RIGHT_SHIFT, "bitwise_right_shift"),
    FNW(TF, "where", WHERE, "condition,input:self,other"),
    MT("where", WHERE, "self,condition,other"),
    FNW(TF, "lerp", LERP, "input,end,weight,*,out:!=None"),
    MT("lerp", LERP, "self,end,weight"),
    MT_("lerp_", LERP, "self,end,weight"),
    FNW(TF, "addcmul", ADDCMUL, "input,tensor1,tensor2,*,value,out:!=None"),
    MT("addcmul", ADDCMUL, "self,tensor1,tensor2,*,value"),
    MT_("addcmul_", ADDCMUL, "self,tensor1,tensor2,*,value"),
    FNW(TF, "addcdiv", ADDCDIV, "input,tensor1,tensor2,*,value,out:!=None"),
    MT("addcdiv", ADDCDIV, "self,tensor1,tensor2,*,value"),
    MT_("addcdiv_", ADDCDIV, "self,tensor1,tensor2,*,value"),
    /* Python operators */
    OPER("add", ADD, TP_SERDE_COMMUTATIVE, ADD),
    OPER("sub", SUB, 0, INVALID),
    OPER("mul", MUL, TP_SERDE_COMMUTATIVE, MUL),
    OPER("truediv", DIV, 0, INVALID),
    {OPR, "floordiv", TP_OP_DIV, TP_SERDE_BINOP, "a:self,b:other", "rounding_mode='floor'", 0, TP_OP_INVALID},
    OPER("mod", REMAINDER, 0, INVALID),
    {OPR, "pow", TP_OP_POW, TP_SERDE_BINOP, "a:self,b:exponent", NULL, 0, TP_OP_INVALID},
    OPER("eq", EQ, 0, EQ),
    OPER("ne", NE, 0, NE),
    OPER("lt", LT, 0, GT),
    OPER("le", LE, 0, GE),
    OPER("gt", GT, 0, LT),
    OPER("ge", GE, 0, LE),
    OPER("and_", BITWISE_AND, TP_SERDE_COMMUTATIVE, BITWISE_AND),
    OPER("or_", BITWISE_OR, TP_SERDE_COMMUTATIVE, BITWISE_OR),
    OPER("xor", BITWISE_XOR, TP_SERDE_COMMUTATIVE, BITWISE_XOR),
    OPER("lshift", BITWISE_LEFT_SHIFT, 0, INVALID),
    OPER("rshift", BITWISE_RIGHT_SHIFT, 0, INVALID),
    {OPR, "matmul", TP_OP_MATMUL, TP_SERDE_PLAIN, "a:self,b:other", NULL, 0, TP_OP_INVALID},
    {OPR, "neg", TP_OP_NEG, TP_SERDE_PLAIN, "a:self", NULL, 0, TP_OP_INVALID},
    {OPR, "invert", TP_OP_BITWISE_NOT, TP_SERDE_PLAIN, "a:self", NULL, 0, TP_OP_INVALID},
    {OPR, "abs", TP_OP_ABS, TP_SERDE_PLAIN, "a:self", NULL, 0, TP_OP_INVALID},
    {OPR, "pos", TP_OP_TO, TP_SERDE_ALIAS, "a:self", NULL, 0, TP_OP_INVALID},
    {OPR, "getitem", TP_OP_GETITEM, TP_SERDE_GETITEM, "a:self,b:index", NULL, TP_SERDE_WRITE, TP_OP_INVALID},
    /* in-place ops of our own */
    FNW(TF, "add_", ADD_, "input,other,alpha"),
    MT("add_", ADD_, "self,other,*,alpha"),
    FNW(TF, "mul_", MUL_, "input,other"),
    MT("mul_", MUL_, "self,other"),
    MT("multiply_", MUL_, "self,other"),
    FNW(TF, "copy_", COPY_, "input,src,non_blocking"),
    MT("copy_", COPY_, "self,src,non_blocking"),
    FNW(TF, "fill_", FILL_, "input,value"),
    MT("fill_", FILL_, "self,value"),
    FNW(TF, "zero_", ZERO_, "input"),
    MT("zero_", ZERO_, "self"),

    /* ---- reductions ---- */
    FNW(TF, "sum", SUM, "input,dim,keepdim,*,dtype"),
    MT("sum", SUM, "self,dim,keepdim,*,dtype"),
    FNW(TF, "mean", MEAN, "input,dim,keepdim,*,dtype"),
    MT("mean", MEAN, "self,dim,keepdim,*,dtype"),
    FNW(TF, "prod", PROD, "input,dim,keepdim,*,dtype"),
    MT("prod", PROD, "self,dim,keepdim,*,dtype"),
    FNW(TF, "amax", AMAX, "input,dim,keepdim,*,out:!=None"),
    MT("amax", AMAX, "self,dim,keepdim"),
    FNW(TF, "amin", AMIN, "input,dim,keepdim,*,out:!=None"),
    MT("amin", AMIN, "self,dim,keepdim"),
    FNW(TF, "max", MAX, "input,dim,keepdim"),
    SP("tensorplay", "max", MAX, TP_SERDE_MAXMIN, "input,other:-,*,dim,keepdim"),
    SP(NULL, "max", MAX, TP_SERDE_MAXMIN, "self,dim,keepdim"),
    FNW(TF, "min", MIN, "input,dim,keepdim"),
    SP("tensorplay", "min", MIN, TP_SERDE_MAXMIN, "input,other:-,*,dim,keepdim"),
    SP(NULL, "min", MIN, TP_SERDE_MAXMIN, "self,dim,keepdim"),
    FNW(TF, "argmax", ARGMAX, "input,dim,keepdim,*,out:!=None"),
    MT("argmax", ARGMAX, "self,dim,keepdim"),
    FNW(TF, "argmin", ARGMIN, "input,dim,keepdim,*,out:!=None"),
    MT("argmin", ARGMIN, "self,dim,keepdim"),
    FNW(TF, "var", VAR, "input,correction,dim,keepdim"),
    MT("var", VAR, "self,dim,unbiased,keepdim,*,correction"),
    FNW(TF, "std", STD, "input,correction,dim,keepdim"),
    MT("std", STD, "self,dim,unbiased,keepdim,*,correction"),
    FNW(TF, "norm", NORM, "input,p,dim,keepdim"),
    SP(NULL, "norm", NORM, TP_SERDE_NORM, "self,p,dim,keepdim,*,dtype"),
    FNW(TF, "logsumexp", LOGSUMEXP, "input,dim^,keepdim,*,out:!=None"), /* takes an int dim only */
    MT("logsumexp", LOGSUMEXP, "self,dim,keepdim"),
    FNW(TF, "any", ANY, "input,dim,keepdim"),
    MT("any", ANY, "self,dim,keepdim"),
    FNW(TF, "all", ALL, "input,dim,keepdim"),
    MT("all", ALL, "self,dim,keepdim"),
    FNW(TF, "cumsum", CUMSUM, "input,dim=0,dtype,*,out:!=None"),
    MT("cumsum", CUMSUM, "self,dim,*,dtype"),
    MT_("cumsum_", CUMSUM, "self,dim,*,dtype"),
    FNW(TF, "cumprod", CUMPROD, "input,dim,dtype,*,out:!=None"),
    MT("cumprod", CUMPROD, "self,dim,*,dtype"),
    MT_("cumprod_", CUMPROD, "self,dim,*,dtype"),
    FNW(TF, "count_nonzero", COUNT_NONZERO, "input,dim"),
    MT("count_nonzero", COUNT_NONZERO, "self,dim"),
    FNW(TF, "sum_to_size", SUM_TO_SIZE, "input,size"),
    MT("sum_to_size", SUM_TO_SIZE, "self,*size"),

    /* ---- linear algebra ---- */
    FNW(TF, "matmul", MATMUL, "input,other,*,out:!=None"),
    MT("matmul", MATMUL, "self,other"),
    FNW(TF, "mm", MM, "input,mat2"),
    MT("mm", MM, "self,mat2"),
    FNW(TF, "bmm", BMM, "input,mat2,*,out:!=None"),
    MT("bmm", BMM, "self,mat2"),
    FNW(TF, "addmm", ADDMM, "input,mat1,mat2,beta,alpha"),
    MT("addmm", ADDMM, "self,mat1,mat2,*,beta,alpha"),
    MT_("addmm_", ADDMM, "self,mat1,mat2,*,beta,alpha"),
    FNW(NF, "linear", LINEAR, "input,weight,bias"),
    FN(TF, "linear", LINEAR, "input,weight,bias"),
    FNW(TF, "baddbmm", BADDBMM, "input,batch1,batch2,*,beta,alpha,out:!=None"),
    MT("baddbmm", BADDBMM, "self,batch1,batch2,*,beta,alpha"),
    FN(TF, "einsum", EINSUM, "equation,*tensors,*,path:-"),
    /* what tensorplay.einsum records (with keywords); written positionally,
     * einsum(equation, [operands]), the one form tensorplay 1.0 runs back */
    FNW("tensorplay._einsum", "einsum", EINSUM, "equation,operands:tensors,path:-"),
    MT_("baddbmm_", BADDBMM, "self,batch1,batch2,*,beta,alpha"),

    /* ---- convolution and pooling ---- */
    FNW(TF, "convolution", CONVOLUTION,
        "input,weight,bias,stride,padding,dilation,transposed,output_padding,groups"),
    FNW(NF, "conv1d", CONV1D, "input,weight,bias,stride,padding,dilation,groups"),
    FN(TF, "conv1d", CONV1D, "input,weight,bias,stride,padding,dilation,groups"),
    FNW(NF, "conv2d", CONV2D, "input,weight,bias,stride,padding,dilation,groups"),
    FN(TF, "conv2d", CONV2D, "input,weight,bias,stride,padding,dilation,groups"),
    FNW(NF, "conv3d", CONV3D, "input,weight,bias,stride,padding,dilation,groups"),
    FN(TF, "conv3d", CONV3D, "input,weight,bias,stride,padding,dilation,groups"),
    FNW(NF, "conv_transpose1d", CONV_TRANSPOSE1D, "input,weight,bias,stride,padding,output_padding,groups,dilation"),
    FN(TF, "conv_transpose1d", CONV_TRANSPOSE1D, "input,weight,bias,stride,padding,output_padding,groups,dilation"),
    FNW(NF, "conv_transpose2d", CONV_TRANSPOSE2D, "input,weight,bias,stride,padding,output_padding,groups,dilation"),
    FN(TF, "conv_transpose2d", CONV_TRANSPOSE2D, "input,weight,bias,stride,padding,output_padding,groups,dilation"),
    FNW(NF, "conv_transpose3d", CONV_TRANSPOSE3D, "input,weight,bias,stride,padding,output_padding,groups,dilation"),
    FN(TF, "conv_transpose3d", CONV_TRANSPOSE3D, "input,weight,bias,stride,padding,output_padding,groups,dilation"),
    MAXPOOL(NF, "max_pool1d", MAX_POOL1D),
    FNW(TF, "max_pool1d", MAX_POOL1D, "input,kernel_size,stride,padding,dilation,ceil_mode"),
    MAXPOOL(NF, "max_pool2d", MAX_POOL2D),
    FNW(TF, "max_pool2d", MAX_POOL2D, "input,kernel_size,stride,padding,dilation,ceil_mode"),
    MAXPOOL(NF, "max_pool3d", MAX_POOL3D),
    FNW(TF, "max_pool3d", MAX_POOL3D, "input,kernel_size,stride,padding,dilation,ceil_mode"),
    /* F.max_pool2d(..., return_indices=True) records tensorplay.functional.max_pool2d_with_indices */
    FNW(TF, "max_pool1d_with_indices", MAX_POOL1D_WITH_INDICES, "input,kernel_size,stride,padding,dilation,ceil_mode"),
    FN(NF, "max_pool1d_with_indices", MAX_POOL1D_WITH_INDICES,
       "input,kernel_size,stride,padding,dilation,ceil_mode,return_indices:-"),
    FNW(TF, "max_pool2d_with_indices", MAX_POOL2D_WITH_INDICES,
        "input,kernel_size,stride,padding,dilation,ceil_mode,*,out:!=None"),
    FN(NF, "max_pool2d_with_indices", MAX_POOL2D_WITH_INDICES,
       "input,kernel_size,stride,padding,dilation,ceil_mode,return_indices:-"),
    FNW(TF, "max_pool3d_with_indices", MAX_POOL3D_WITH_INDICES,
        "input,kernel_size,stride,padding,dilation,ceil_mode,*,out:!=None"),
    FN(NF, "max_pool3d_with_indices", MAX_POOL3D_WITH_INDICES,
       "input,kernel_size,stride,padding,dilation,ceil_mode,return_indices:-"),
    FNW(NF, "avg_pool1d", AVG_POOL1D,
        "input,kernel_size,stride,padding,ceil_mode,count_include_pad,divisor_override"),
    FN(TF, "avg_pool1d", AVG_POOL1D, "input,kernel_size,stride,padding,ceil_mode,count_include_pad"),
    FN(NF, "avg_pool2d", AVG_POOL2D, "input,kernel_size,stride,padding,ceil_mode,count_include_pad,divisor_override"),
    FNW(TF, "avg_pool2d", AVG_POOL2D,
        "input,kernel_size,stride,padding,ceil_mode,count_include_pad,divisor_override,*,out:!=None"),
    FNW(NF, "avg_pool3d", AVG_POOL3D,
        "input,kernel_size^,stride^,padding^,ceil_mode,count_include_pad,divisor_override"),
    FN(TF, "avg_pool3d", AVG_POOL3D, /* crashes tensorplay 1.0 */
        "input,kernel_size,stride,padding,ceil_mode,count_include_pad,divisor_override,*,out:!=None"),
    FN(NF, "adaptive_avg_pool1d", ADAPTIVE_AVG_POOL1D, "input,output_size"),
    FNW(TF, "adaptive_avg_pool1d", ADAPTIVE_AVG_POOL1D, "input,output_size"),
    FN(NF, "adaptive_avg_pool2d", ADAPTIVE_AVG_POOL2D, "input,output_size"),
    FNW(TF, "adaptive_avg_pool2d", ADAPTIVE_AVG_POOL2D, "input,output_size,*,out:!=None"),
    FNW(NF, "adaptive_avg_pool3d", ADAPTIVE_AVG_POOL3D, "input,output_size^"),
    FN(TF, "adaptive_avg_pool3d", ADAPTIVE_AVG_POOL3D, "input,output_size,*,out:!=None"), /* 1.0: wrong for an int size */
    /* tensorplay.functional's adaptive max pools return (values, indices) */
    FNW(NF, "adaptive_max_pool1d", ADAPTIVE_MAX_POOL1D, "input,output_size^,return_indices:!=False"),
    FNW(NF, "adaptive_max_pool2d", ADAPTIVE_MAX_POOL2D, "input,output_size,return_indices:!=False"),
    FNW(NF, "interpolate", INTERPOLATE,
        "input,size,scale_factor,mode,align_corners,recompute_scale_factor:!=False,antialias:!=False"),
    FN(NF, "upsample", INTERPOLATE, "input,size,scale_factor,mode,align_corners"),

    /* ---- normalisation, softmax, attention, misc nn ---- */
    FNW(NF, "batch_norm", BATCH_NORM, "input,running_mean,running_var,weight,bias,training,momentum,eps"),
    FN(TF, "batch_norm", BATCH_NORM, "input,weight,bias,running_mean,running_var,training,momentum,eps"),
    FNW(NF, "layer_norm", LAYER_NORM, "input,normalized_shape,weight,bias,eps"),
    FN(TF, "layer_norm", LAYER_NORM, "input,normalized_shape,weight,bias,eps"),
    FNW(NF, "group_norm", GROUP_NORM, "input,num_groups,weight,bias,eps"),
    FN(TF, "group_norm", GROUP_NORM, "input,num_groups,weight,bias,eps"),
    FNW(NF, "instance_norm", INSTANCE_NORM, "input,running_mean,running_var,weight,bias,use_input_stats,momentum,eps"),
    FN(TF, "instance_norm", INSTANCE_NORM, "input,weight,bias,running_mean,running_var,use_input_stats,momentum,eps"),
    FNW(TF, "rms_norm", RMS_NORM, "input,normalized_shape,weight,eps"), /* what F.rms_norm records */
    FN(NF, "rms_norm", RMS_NORM, "input,normalized_shape,weight,eps"),
    FNW(NF, "local_response_norm", LOCAL_RESPONSE_NORM, "input,size,alpha,beta,k"),
    FN(NF, "softmax", SOFTMAX, "input,dim,dtype,_stacklevel:-"),
    FNW(TF, "softmax", SOFTMAX, "input,dim,dtype,*,out:!=None"),
    MT("softmax", SOFTMAX, "self,dim,dtype"),
    FN(NF, "log_softmax", LOG_SOFTMAX, "input,dim,dtype,_stacklevel:-"),
    FNW(TF, "log_softmax", LOG_SOFTMAX, "input,dim,dtype,*,out:!=None"),
    MT("log_softmax", LOG_SOFTMAX, "self,dim,dtype"),
    /* traced as neg + softmax by tensorplay 1.0 */
    FNW(NF, "softmin", SOFTMIN, "input,dim,dtype,_stacklevel:-"),
    /* nn.functional.glu records tensorplay.functional.glu */
    FNW(TF, "glu", GLU, "input,dim,*,out:!=None"),
    MT("glu", GLU, "self,dim"),
    FNW(NF, "prelu", PRELU, "input,weight"),
    FN(TF, "prelu", PRELU, "input,weight"),
    MT("prelu", PRELU, "self,weight"),
    FN(NF, "embedding", EMBEDDING,
       "input:indices,weight,padding_idx,max_norm:!=None,norm_type:-,scale_grad_by_freq,sparse"),
    FNW(TF, "embedding", EMBEDDING, "weight,indices,padding_idx,scale_grad_by_freq,sparse"),
    FN(NF, "dropout", DROPOUT, "input,p,training:train=True,inplace:@"),
    FNW(TF, "dropout", DROPOUT, "input,p,train=True"),
    FN_(NF, "dropout_", DROPOUT, "input,p,training:train=True"),
    FN_(TF, "dropout_", DROPOUT, "input,p,train=True"),
    /* the other dropouts: eval mode only (the ops refuse training=True);
     * dropout1d/2d/3d are feature_dropout (the channel-wise mask), which in
     * eval mode is the identity for any rank */
    FN(NF, "alpha_dropout", ALPHA_DROPOUT, "input,p=0.5,training:train=True,inplace:@"),
    FNW(TF, "alpha_dropout", ALPHA_DROPOUT, "input,p=0.5,train=True"),
    FN_(TF, "alpha_dropout_", ALPHA_DROPOUT, "input,p=0.5,train=True"),
    FN(NF, "feature_alpha_dropout", FEATURE_ALPHA_DROPOUT, "input,p=0.5,training:train=False,inplace:@"),
    FNW(TF, "feature_alpha_dropout", FEATURE_ALPHA_DROPOUT, "input,p=0.5,train=True"),
    FN_(TF, "feature_alpha_dropout_", FEATURE_ALPHA_DROPOUT, "input,p=0.5,train=True"),
    FN(NF, "feature_dropout", FEATURE_DROPOUT, "input,p=0.5,training:train=False,inplace:@"),
    FNW(TF, "feature_dropout", FEATURE_DROPOUT, "input,p=0.5,train=True"),
    FN_(TF, "feature_dropout_", FEATURE_DROPOUT, "input,p=0.5,train=True"),
    FN_(NF, "feature_dropout_", FEATURE_DROPOUT, "input,p=0.5,training:train=True"),
    FN(NF, "dropout1d", FEATURE_DROPOUT, "input,p=0.5,training:train=True,inplace:@"),
    FN(NF, "dropout2d", FEATURE_DROPOUT, "input,p=0.5,training:train=True,inplace:@"),
    FN(NF, "dropout3d", FEATURE_DROPOUT, "input,p=0.5,training:train=True,inplace:@"),
    FNW(NF, "scaled_dot_product_attention", SCALED_DOT_PRODUCT_ATTENTION,
        "query,key,value,attn_mask,dropout_p,is_causal,scale,enable_gqa:!=False,backend:-"),
    FN(TF, "scaled_dot_product_attention", SCALED_DOT_PRODUCT_ATTENTION, "query,key,value,is_causal,impl:-"),

    /* ---- losses: nn.functional's take reduction as a string (the legacy
     * size_average / reduce must be None), tensorplay.functional's tp_*_loss
     * (what nn.functional records for them) as ATen's int ---- */
    FNW(NF, "mse_loss", MSE_LOSS, "input:self,target,reduction"),
    FNW(NF, "l1_loss", L1_LOSS, "input:self,target,size_average:!=None,reduce:!=None,reduction,weight:!=None"),
    FNW(NF, "smooth_l1_loss", SMOOTH_L1_LOSS, "input:self,target,size_average:!=None,reduce:!=None,reduction,beta"),
    FNW(NF, "huber_loss", HUBER_LOSS, "input:self,target,reduction,delta,weight:!=None"),
    FNW(NF, "binary_cross_entropy", BINARY_CROSS_ENTROPY,
        "input:self,target,weight,size_average:!=None,reduce:!=None,reduction"),
    FNW(NF, "binary_cross_entropy_with_logits", BINARY_CROSS_ENTROPY_WITH_LOGITS,
        "input:self,target,weight,size_average:!=None,reduce:!=None,reduction,pos_weight"),
    FNW(NF, "kl_div", KL_DIV, "input:self,target,size_average:!=None,reduce:!=None,reduction,log_target"),
    FNW(NF, "nll_loss", NLL_LOSS, "input:self,target,weight,size_average:!=None,ignore_index,reduce:!=None,reduction"),
    FNW(NF, "cross_entropy", CROSS_ENTROPY,
        "input:self,target,weight,size_average:!=None,ignore_index,reduce:!=None,reduction,label_smoothing"),
    /* tensorplay.functional's own forms (called directly): no reduction
     * argument (the mean), or ATen's int where only the mean (1) is mapped;
     * tensorplay.functional.nll_loss returns (loss, total_weight) and is
     * not mapped */
    FN(TF, "mse_loss", MSE_LOSS, "input:self,target,reduction:!=1,*,out:!=None"),
    FN(TF, "l1_loss", L1_LOSS, "input:self,target"),
    FN(TF, "smooth_l1_loss", SMOOTH_L1_LOSS, "input:self,target,reduction:!=1,beta,*,out:!=None"),
    FN(TF, "huber_loss", HUBER_LOSS, "input:self,target,reduction:!=1,delta,*,out:!=None"),
    FN(TF, "binary_cross_entropy", BINARY_CROSS_ENTROPY, "input:self,target,weight,reduction:!=1,*,out:!=None"),
    FN(TF, "binary_cross_entropy_with_logits", BINARY_CROSS_ENTROPY_WITH_LOGITS, "input:self,target,weight,pos_weight"),
    FN(TF, "kl_div", KL_DIV, "input:self,target"),
    FNW(NF, "gaussian_nll_loss", GAUSSIAN_NLL_LOSS, "input,target,var,full,eps,reduction"),
    FNW(TF, "tp_soft_margin_loss", SOFT_MARGIN_LOSS, "input:self,target,reduction"),
    FN(TF, "soft_margin_loss", SOFT_MARGIN_LOSS, "input:self,target,*,out:!=None"),
    FNW(TF, "tp_margin_ranking_loss", MARGIN_RANKING_LOSS, "input1,input2,target,margin,reduction"),
    FN(TF, "margin_ranking_loss", MARGIN_RANKING_LOSS, "input1,input2,target,margin"),
    FNW(TF, "tp_hinge_embedding_loss", HINGE_EMBEDDING_LOSS, "input:self,target,margin,reduction"),
    FN(TF, "hinge_embedding_loss", HINGE_EMBEDDING_LOSS, "input:self,target,margin"),
    FNW(TF, "tp_cosine_embedding_loss", COSINE_EMBEDDING_LOSS, "input1,input2,target,margin,reduction"),
    FN(TF, "cosine_embedding_loss", COSINE_EMBEDDING_LOSS, "x1:input1,x2:input2,target,margin"),
    /* traced into norm, mul, clamp, sum, div (cosine_similarity) and sub,
     * add, norm (pairwise_distance) by tensorplay 1.0 */
    FNW(NF, "cosine_similarity", COSINE_SIMILARITY, "x1,x2,dim,eps"),
    FN(TF, "cosine_similarity", COSINE_SIMILARITY, "x1,x2,dim,eps"),
    FNW(NF, "pairwise_distance", PAIRWISE_DISTANCE, "x1,x2,p,eps,keepdim"),
    FN(TF, "pairwise_distance", PAIRWISE_DISTANCE, "x1,x2,p,eps,keepdim"),
    FNW(TF, "tp_poisson_nll_loss", POISSON_NLL_LOSS, "input,target,log_input,full,eps,reduction"),
    FN(TF, "poisson_nll_loss", POISSON_NLL_LOSS, "input,target,log_input,full,eps"),

    /* ---- shape and indexing ---- */
    FNW(TF, "reshape", RESHAPE, "input,shape"),
    MT("reshape", RESHAPE, "self,*shape"),
    FN(TF, "view", VIEW, "input,shape:size"),
    {NULL, "view", TP_OP_VIEW, TP_SERDE_PLAIN, "self,*size", NULL, TP_SERDE_WRITE, TP_OP_INVALID}, /* TF.view is broken */
    FN(NF, "flatten", FLATTEN, "input,start_dim,end_dim"),
    FNW(TF, "flatten", FLATTEN, "input,start_dim,end_dim"),
    MT("flatten", FLATTEN, "self,start_dim,end_dim"),
    FN(TF, "ravel", FLATTEN, "input"),
    MT("ravel", FLATTEN, "self"),
    FNW(TF, "permute", PERMUTE, "input,dims"),
    MT("permute", PERMUTE, "self,*dims"),
    FNW(TF, "transpose", TRANSPOSE, "input,dim0,dim1"),
    MT("transpose", TRANSPOSE, "self,dim0,dim1"),
    MT("swapaxes", TRANSPOSE, "self,axis0:dim0,axis1:dim1"),
    FN(TF, "swapaxes", TRANSPOSE, "input,axis0:dim0,axis1:dim1"),
    FN(TF, "swapdims", TRANSPOSE, "input,dim0,dim1"),
    MT("swapdims", TRANSPOSE, "self,dim0,dim1"),
    /* in-place view ops change self's shape, which a graph value cannot:
     * tensorplay records later uses of self as the value before the call
     * (and its own loader computes garbage for them, 1.0), so these are the
     * op's result, without a copy back */
    MT("transpose_", TRANSPOSE, "self,dim0,dim1"),
    MT("swapaxes_", TRANSPOSE, "self,axis0:dim0,axis1:dim1"),
    MT("swapdims_", TRANSPOSE, "self,dim0,dim1"),
    SP(NULL, "t_", TRANSPOSE, TP_SERDE_TRANSPOSE, "self"),
    /* mT / mH / adjoint (methods in tensorplay 1.0): real tensors only, so mH is mT */
    FIX(NULL, "mT", TRANSPOSE, "self", "dim0=-2,dim1=-1"),
    FIX(NULL, "mH", TRANSPOSE, "self", "dim0=-2,dim1=-1"),
    FIX(NULL, "adjoint", TRANSPOSE, "self", "dim0=-2,dim1=-1"),
    FIX(TF, "adjoint", TRANSPOSE, "input", "dim0=-2,dim1=-1"),
    FNW(TF, "squeeze", SQUEEZE, "input,dim"),
    MT("squeeze", SQUEEZE, "self,dim"),
    MT("squeeze_", SQUEEZE, "self,dim"),
    FNW(TF, "unsqueeze", UNSQUEEZE, "input,dim"),
    MT("unsqueeze", UNSQUEEZE, "self,dim"),
    MT("unsqueeze_", UNSQUEEZE, "self,dim"),
    FNW(TF, "expand", EXPAND, "input,size,implicit:!=False"),
    MT("expand", EXPAND, "self,*size,*,implicit:!=False"),
    FN(TF, "broadcast_to", EXPAND, "input,size"),
    MT("broadcast_to", EXPAND, "self,*size"),
    FNW(TF, "cat", CAT, "tensors,dim,*,out:!=None"),
    FN("tensorplay", "cat", CAT, "tensors,dim,*,out:!=None"),
    FN(TF, "concat", CAT, "tensors,dim,*,out:!=None"),
    FNW(TF, "stack", STACK, "tensors,dim,*,out:!=None"),
    FNW(TF, "split", SPLIT, "input,split_size:split_size_or_sections,dim"),
    MT("split", SPLIT, "self,split_size:split_size_or_sections,dim"),
    MT("split_with_sizes", SPLIT, "self,split_sizes:split_size_or_sections,dim"),
    FNW(TF, "chunk", CHUNK, "input,chunks,dim"),
    MT("chunk", CHUNK, "self,chunks,dim"),
    /* tensorplay names the int and the list form both `sections` */
    FNW(TF, "tensor_split", TENSOR_SPLIT, "input,sections:indices_or_sections,dim"),
    MT("tensor_split", TENSOR_SPLIT, "self,sections:indices_or_sections,dim"),
    FNW(TF, "hsplit", HSPLIT, "input,sections:indices_or_sections"),
    MT("hsplit", HSPLIT, "self,sections:indices_or_sections"),
    FNW(TF, "vsplit", VSPLIT, "input,sections:indices_or_sections"),
    MT("vsplit", VSPLIT, "self,sections:indices_or_sections"),
    FNW(TF, "dsplit", DSPLIT, "input,sections:indices_or_sections"),
    MT("dsplit", DSPLIT, "self,sections:indices_or_sections"),
    FNW(TF, "slice", SLICE, "input,dim,start,end,step"),
    MT("slice", SLICE, "self,dim,start,end,step"),
    FNW(TF, "select", SELECT, "input,dim,index"),
    MT("select", SELECT, "self,dim,index"),
    FNW(TF, "narrow", NARROW, "input,dim,start,length"),
    MT("narrow", NARROW, "self,dim,start,length"),
    MT("narrow_copy", NARROW, "self,dim,start,length"),
    FNW(TF, "flip", FLIP, "input,dims"),
    MT("flip", FLIP, "self,*dims"),
    FNW(TF, "repeat", REPEAT, "input,repeats"),
    MT("repeat", REPEAT, "self,*repeats"),
    FIX(TF, "fliplr", FLIP, "input", "dims=1"),
    FIX(NULL, "fliplr", FLIP, "self", "dims=1"),
    FIX(TF, "flipud", FLIP, "input", "dims=0"),
    FIX(NULL, "flipud", FLIP, "self", "dims=0"),
    FNW(TF, "tile", TILE, "input,dims"),
    MT("tile", TILE, "self,*dims"),
    FNW(TF, "roll", ROLL, "input,shifts,dims"),
    MT("roll", ROLL, "self,shifts,dims"),
    FNW(TF, "rot90", ROT90, "input,k,dims"),
    MT("rot90", ROT90, "self,k,dims"),
    FNW(TF, "repeat_interleave", REPEAT_INTERLEAVE, "input,repeats,dim,*,output_size"),
    MT("repeat_interleave", REPEAT_INTERLEAVE, "self,repeats,dim,*,output_size"),
    FNW(TF, "unbind", UNBIND, "input,dim"),
    MT("unbind", UNBIND, "self,dim"),
    FNW(TF, "hstack", HSTACK, "*tensors"),
    FNW(TF, "vstack", VSTACK, "*tensors"),
    FNW(TF, "unflatten", UNFLATTEN, "input,dim,sizes"),
    MT("unflatten", UNFLATTEN, "self,dim,sizes"),
    FNW(TF, "movedim", MOVEDIM, "input,source,destination"),
    MT("movedim", MOVEDIM, "self,source,destination"),
    FN(TF, "moveaxis", MOVEDIM, "input,source,destination"),
    MT("moveaxis", MOVEDIM, "self,source,destination"),
    FNW(NF, "pixel_shuffle", PIXEL_SHUFFLE, "input,upscale_factor"),
    FN(TF, "pixel_shuffle", PIXEL_SHUFFLE, "input,upscale_factor"),
    FNW(NF, "pixel_unshuffle", PIXEL_UNSHUFFLE, "input,downscale_factor"),
    FN(TF, "pixel_unshuffle", PIXEL_UNSHUFFLE, "input,downscale_factor"),
    /* tensorplay 1.0 cannot trace channel_shuffle (TraceError): the reader
     * maps it for programs written by others; native_channel_shuffle has the
     * same result (PyTorch's does not check divisibility, this does) */
    FNW(NF, "channel_shuffle", CHANNEL_SHUFFLE, "input,groups"),
    FN(TF, "channel_shuffle", CHANNEL_SHUFFLE, "input,groups"),
    FN(NF, "native_channel_shuffle", CHANNEL_SHUFFLE, "input,groups"),
    FN(TF, "native_channel_shuffle", CHANNEL_SHUFFLE, "input,groups"),
    FNW(TF, "contiguous", CONTIGUOUS, "input,memory_format:-"),
    MT("contiguous", CONTIGUOUS, "self,*,memory_format:-"),
    FNW(TF, "clone", CLONE, "input,memory_format:-"),
    MT("clone", CLONE, "self,*,memory_format:-"),
    FNW(TF, "to", TO, "input,dtype,layout,device,pin_memory,non_blocking,copy,memory_format"),
    SP(NULL, "to", TO, TP_SERDE_TO, "self"),
    SP(NULL, "type", TO, TP_SERDE_TO, "self"),
    CAST("float", "float32"),
    CAST("double", "float64"),
    CAST("half", "float16"),
    CAST("bfloat16", "bfloat16"),
    CAST("long", "int64"),
    CAST("int", "int32"),
    CAST("short", "int16"),
    CAST("char", "int8"),
    CAST("byte", "uint8"),
    CAST("bool", "bool"),
    SP(NULL, "type_as", TO, TP_SERDE_TYPE_AS, "self,other"),
    SP(NULL, "view_as", VIEW, TP_SERDE_SHAPE_AS, "self,other"),
    SP(NULL, "reshape_as", RESHAPE, TP_SERDE_SHAPE_AS, "self,other"),
    SP(NULL, "expand_as", EXPAND, TP_SERDE_SHAPE_AS, "self,other"),
    SP(NULL, "detach", TO, TP_SERDE_ALIAS, "self"),
    SP(TF, "detach", TO, TP_SERDE_ALIAS, "input"),
    SP(NULL, "detach_", TO, TP_SERDE_ALIAS, "self"),
    SP(NULL, "detach_copy", TO, TP_SERDE_ALIAS, "self"),
    SP(NULL, "alias", TO, TP_SERDE_ALIAS, "self"),
    SP(NULL, "resolve_conj", TO, TP_SERDE_ALIAS, "self"), /* real tensors: no conjugate bit */
    SP(NULL, "resolve_neg", TO, TP_SERDE_ALIAS, "self"),  /* no negative bit */
    SP(NULL, "requires_grad_", TO, TP_SERDE_ALIAS, "self,requires_grad:-"),
    SP(NULL, "cpu", TO, TP_SERDE_ALIAS, "self,*,memory_format:-"),
    SP(NULL, "t", TRANSPOSE, TP_SERDE_TRANSPOSE, "self"),
    SP(TF, "t", TRANSPOSE, TP_SERDE_TRANSPOSE, "input"),
    {NULL, "size", TP_OP_SYM_SIZE, TP_SERDE_SIZE, "self,dim", NULL, TP_SERDE_WRITE, TP_OP_INVALID},
    SP(NULL, "dim", INVALID, TP_SERDE_DIM, "self"),
    SP(NULL, "ndimension", INVALID, TP_SERDE_DIM, "self"),
    SP(NULL, "numel", INVALID, TP_SERDE_NUMEL, "self"),
    SP(NULL, "is_floating_point", INVALID, TP_SERDE_PREDICATE, "self"),
    SP(NULL, "is_complex", INVALID, TP_SERDE_PREDICATE, "self"),
    SP(NULL, "is_signed", INVALID, TP_SERDE_PREDICATE, "self"),
    SP(NULL, "is_same_size", INVALID, TP_SERDE_PREDICATE, "self,other"),
    SP(NULL, "numpy_T", TRANSPOSE, TP_SERDE_TRANSPOSE, "self"),
    SP(NULL, "nelement", INVALID, TP_SERDE_NUMEL, "self"),
    SP("builtins", "getattr", INVALID, TP_SERDE_GETATTR, "obj,name"),
    FNW(TF, "pad", PAD, "input,pad,mode,value"),
    FN(NF, "pad", PAD, "input,pad,mode,value"),
    FNW(TF, "index_select", INDEX_SELECT, "input,dim,index,*,out:!=None"),
    MT("index_select", INDEX_SELECT, "self,dim,index"),
    FNW(TF, "gather", GATHER, "input,dim,index,*,sparse_grad:!=False,out:!=None"),
    MT("gather", GATHER, "self,dim,index,*,sparse_grad:!=False"),
    FNW(TF, "scatter", SCATTER, "input,dim,index,src,*,reduce:!=None,out:!=None"),
    MT("scatter", SCATTER, "self,dim,index,src,*,reduce:!=None"),
    MT_("scatter_", SCATTER, "self,dim,index,src,*,reduce:!=None"),
    FNW(TF, "scatter_add", SCATTER_ADD, "input,dim,index,src,*,out:!=None"),
    MT("scatter_add", SCATTER_ADD, "self,dim,index,src"),
    MT_("scatter_add_", SCATTER_ADD, "self,dim,index,src"),
    FNW(TF, "take_along_dim", TAKE_ALONG_DIM, "input,indices,dim,*,out:!=None"),
    MT("take_along_dim", TAKE_ALONG_DIM, "self,indices,dim"),
    FNW(NF, "one_hot", ONE_HOT, "tensor:self,num_classes"),
    FN(TF, "one_hot", ONE_HOT, "input,num_classes"),
    FNW(TF, "masked_fill", MASKED_FILL, "input,mask,value"),
    MT("masked_fill", MASKED_FILL, "self,mask,value"),
    MT_("masked_fill_", MASKED_FILL, "self,mask,value"),
    /* advanced indexing: x[i, j] and x[i, j] = v lower to these (serde_index.c) */
    FNW(TF, "index", INDEX, "input,indices,*,out:!=None"),
    MT("index", INDEX, "self,indices"),
    FNW(TF, "index_put", INDEX_PUT, "input,indices,values,accumulate"),
    MT("index_put", INDEX_PUT, "self,indices,values,accumulate"),
    MT("index_put_", INDEX_PUT_, "self,indices,values,accumulate"),
    {OPR, "setitem", TP_OP_INDEX_PUT_, TP_SERDE_SETITEM, "a:self,b:indices,c:values", NULL, TP_SERDE_WRITE,
     TP_OP_INVALID},
    /* data-dependent output sizes (the program runs in the interpreter) */
    FNW(TF, "nonzero", NONZERO, "input,*,as_tuple:!=False,out:!=None"),
    MT("nonzero", NONZERO, "self,*,as_tuple:!=False"),
    FN(TF, "argwhere", NONZERO, "input"),
    MT("argwhere", NONZERO, "self"),
    FNW(TF, "masked_select", MASKED_SELECT, "input,mask,*,out:!=None"),
    MT("masked_select", MASKED_SELECT, "self,mask"),
    FNW(TF, "tril", TRIL, "input,diagonal,*,out:!=None"),
    MT("tril", TRIL, "self,diagonal"),
    MT_("tril_", TRIL, "self,diagonal"),
    FNW(TF, "triu", TRIU, "input,diagonal,*,out:!=None"),
    MT("triu", TRIU, "self,diagonal"),
    MT_("triu_", TRIU, "self,diagonal"),

    /* ---- sorting ---- */
    FNW(TF, "topk", TOPK, "input,k,dim,largest,sorted,impl:-,*,out:!=None"),
    MT("topk", TOPK, "self,k,dim,largest,sorted"),
    FNW(TF, "sort", SORT, "input,dim,descending,*,stable,out:!=None"),
    MT("sort", SORT, "self,dim,descending,*,stable"),
    FNW(TF, "argsort", ARGSORT, "input,dim,descending,*,stable,out:!=None"),
    MT("argsort", ARGSORT, "self,dim,descending,*,stable"),

    /* ---- creation ---- */
    FNW(TF, "zeros", ZEROS, "*size,*,dtype,layout,device,pin_memory,requires_grad:!=False,out:!=None"),
    FNW(TF, "ones", ONES, "*size,*,dtype,layout,device,pin_memory,requires_grad:!=False,out:!=None"),
    FNW(TF, "full", FULL, "size,fill_value,*,dtype,layout,device,pin_memory,requires_grad:!=False,out:!=None"),
    FNW(TF, "arange", ARANGE, "start,end,step,*,dtype,layout,device,pin_memory,requires_grad:!=False,out:!=None"),
    FNW(TF, "linspace", LINSPACE, "start,end,steps,*,dtype,layout,device,pin_memory,requires_grad:!=False,out:!=None"),
    FNW(TF, "zeros_like", ZEROS_LIKE, "input,dtype,device,requires_grad:!=False,*,layout,pin_memory,memory_format:-"),
    FNW(TF, "ones_like", ONES_LIKE, "input,dtype,device,requires_grad:!=False,*,layout,pin_memory,memory_format:-"),
    FNW(TF, "full_like", FULL_LIKE,
        "input,fill_value,dtype,device,requires_grad:!=False,*,layout,pin_memory,memory_format:-"),
    FNW(TF, "empty_like", EMPTY_LIKE, "input,dtype,device,requires_grad:!=False,*,layout,pin_memory,memory_format:-"),
    FNW(TF, "eye", EYE, "n,m,*,dtype,layout,device,pin_memory,requires_grad:!=False,out:!=None"),
    FNW(TF, "new_zeros", NEW_ZEROS, "input,size,dtype,layout,device,pin_memory"),
    MT("new_zeros", NEW_ZEROS, "self,*size,*,dtype,device,requires_grad:!=False,layout,pin_memory"),
    FNW(TF, "new_ones", NEW_ONES, "input,size,dtype,layout,device,pin_memory"),
    MT("new_ones", NEW_ONES, "self,*size,*,dtype,device,requires_grad:!=False,layout,pin_memory"),
    FNW(TF, "new_full", NEW_FULL, "input,size,fill_value,dtype,layout,device,pin_memory"),
    MT("new_full", NEW_FULL, "self,size,fill_value,*,dtype,device,requires_grad:!=False,layout,pin_memory"),
    FNW(TF, "new_empty", NEW_EMPTY, "input,size,dtype,layout,device,pin_memory"),
    MT("new_empty", NEW_EMPTY, "self,size,*,dtype,device,requires_grad:!=False,layout,pin_memory"),

    /* ---- tensorplay's runtime dim assertions (dynamic shapes) ---- */
    SP("tensorplay.export._trace", "_assert_dim_range", INVALID, TP_SERDE_ASSERT, "tensor,index,min,max,name"),
    SP("tensorplay.export._trace", "_assert_dims_equal", INVALID, TP_SERDE_ASSERT,
       "tensor_a,index_a,tensor_b,index_b,name"),
    SP("tensorplay.export._trace", "_assert_dim_relation", INVALID, TP_SERDE_ASSERT,
       "tensor_root,index_root,tensor_derived,index_derived,scale,offset,name"),

    /* ---- symbolic ints: x.size(d) above; arithmetic on ints as tensorplay
     * writes it (the reader picks these when an operand is an int node) ---- */
    {OPR, "add", TP_OP_SYM_ADD, TP_SERDE_BINOP, "a,b", NULL, TP_SERDE_WRITE | TP_SERDE_SYMINT, TP_OP_INVALID},
    {OPR, "sub", TP_OP_SYM_SUB, TP_SERDE_BINOP, "a,b", NULL, TP_SERDE_WRITE | TP_SERDE_SYMINT, TP_OP_INVALID},
    {OPR, "mul", TP_OP_SYM_MUL, TP_SERDE_BINOP, "a,b", NULL, TP_SERDE_WRITE | TP_SERDE_SYMINT, TP_OP_INVALID},
    {OPR, "floordiv", TP_OP_SYM_FLOORDIV, TP_SERDE_BINOP, "a,b", NULL, TP_SERDE_WRITE | TP_SERDE_SYMINT, TP_OP_INVALID},
};

const tp_serde_op_entry *tp__serde_op_table(int *n) {
    *n = (int)TP_ARRAY_LEN(g_table);
    return g_table;
}

const tp_serde_op_entry *tp__serde_find_function(const char *module, const char *qualname) {
    if (!module || !qualname) return NULL;
    for (size_t i = 0; i < TP_ARRAY_LEN(g_table); i++) {
        const tp_serde_op_entry *e = &g_table[i];
        if (e->flags & TP_SERDE_SYMINT) continue; /* found through tp__serde_find_symint */
        if (e->module && strcmp(e->module, module) == 0 && strcmp(e->name, qualname) == 0) return e;
    }
    return NULL;
}

const tp_serde_op_entry *tp__serde_find_method(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < TP_ARRAY_LEN(g_table); i++) {
        const tp_serde_op_entry *e = &g_table[i];
        if (!e->module && strcmp(e->name, name) == 0) return e;
    }
    return NULL;
}

const tp_serde_op_entry *tp__serde_find_symint(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < TP_ARRAY_LEN(g_table); i++)
        if ((g_table[i].flags & TP_SERDE_SYMINT) && strcmp(g_table[i].name, name) == 0) return &g_table[i];
    return NULL;
}

const tp_serde_op_entry *tp__serde_write_entry(tp_op op) {
    for (size_t i = 0; i < TP_ARRAY_LEN(g_table); i++)
        if (g_table[i].op == op && (g_table[i].flags & TP_SERDE_WRITE)) return &g_table[i];
    return NULL;
}
