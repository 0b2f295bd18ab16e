/*
 * symint.c - symbolic-int ops: schemas, rules and kernels for sym_size
 * (x.size(dim) as a graph value) and the integer arithmetic on such values
 * (sym_add, sym_sub, sym_mul, sym_floordiv: Python's operator.add/sub/mul/
 * floordiv on ints), and py_binop: Python arithmetic and comparisons on
 * numbers known only at run time (item()'s).
 *
 * Their results are plain ints, not tensors: the shape rule computes the
 * int from metadata (sym_size reads only the shape, so it works on meta
 * tensors) or from its int arguments, and the kernel computes the same int.
 * A graph node of these ops therefore has an int meta value, which the
 * graph's shape inference substitutes wherever another node passes it as an
 * int / int-list argument; the interpreter substitutes the computed int. The
 * export layer (src/export/symshape.c) gives these nodes symbolic values.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "kernel_util.h"

/* sym_size(Tensor self, int dim) -> Any */
static tp_status sym_size_infer(const tp_value *args, tp_value *out) {
    tp_tensor *t;
    TP_TRY(tp__need_tensor(args, 0, "self", &t));
    int64_t dim = tp__arg_int(args, 1);
    int nd = t->ndim;
    TP_CHECK(nd > 0, TP_ERR_INDEX, "dimension specified as %" PRId64 " but tensor has no dimensions", dim);
    TP_CHECK(dim >= -nd && dim < nd, TP_ERR_INDEX,
             "Dimension out of range (expected to be in range of [%d, %d], but got %" PRId64 ")", -nd, nd - 1, dim);
    return tp__out_int(out, tp__dim(t, (int)(dim < 0 ? dim + nd : dim)));
}

/* Python int arithmetic (floordiv rounds towards -inf); int64 overflow is
 * an error (Python ints would not overflow). */
static tp_status arith(tp_op op, int64_t a, int64_t b, int64_t *r) {
    bool ok = true;
    switch (op) {
    case TP_OP_SYM_ADD: ok = !__builtin_add_overflow(a, b, r); break;
    case TP_OP_SYM_SUB: ok = !__builtin_sub_overflow(a, b, r); break;
    case TP_OP_SYM_MUL: ok = !__builtin_mul_overflow(a, b, r); break;
    default:
        TP_CHECK(b != 0, TP_ERR_INVALID_ARG, "integer division or modulo by zero");
        ok = !(a == INT64_MIN && b == -1);
        if (ok) {
            int64_t q = a / b;
            if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
            *r = q;
        }
        break;
    }
    TP_CHECK(ok, TP_ERR_INVALID_ARG, "integer overflow computing %" PRId64 " %s %" PRId64, a,
             op == TP_OP_SYM_ADD ? "+" : op == TP_OP_SYM_SUB ? "-" : op == TP_OP_SYM_MUL ? "*" : "//", b);
    return TP_OK;
}

static tp_status binop(tp_op op, const tp_value *args, tp_value *out) {
    tp_sdim a = tp__arg_sdim(args, 0), b = tp__arg_sdim(args, 1), d;
    int64_t r = 0;
    TP_TRY(arith(op, a.v, b.v, &r));
    switch (op) {
    case TP_OP_SYM_ADD: d = tp__dim_add(a, b); break;
    case TP_OP_SYM_SUB: d = tp__dim_sub(a, b); break;
    case TP_OP_SYM_MUL: d = tp__dim_mul(a, b); break;
    default: /* floor division by a constant (a dynamic divisor has no expression) */
        if (!tp__dim_is_const(b) || b.v == INT64_MIN) {
            tp__dim_give_up();
            d = tp__dimk(r);
        } else {
            d = b.v > 0 ? tp__dim_floordiv(a, b.v) : tp__dim_floordiv(tp__dim_mulk(a, -1), -b.v);
        }
        break;
    }
    d.v = r;
    return tp__out_int(out, d);
}

static tp_status sym_add_infer(const tp_value *args, tp_value *out) { return binop(TP_OP_SYM_ADD, args, out); }
static tp_status sym_sub_infer(const tp_value *args, tp_value *out) { return binop(TP_OP_SYM_SUB, args, out); }
static tp_status sym_mul_infer(const tp_value *args, tp_value *out) { return binop(TP_OP_SYM_MUL, args, out); }
static tp_status sym_floordiv_infer(const tp_value *args, tp_value *out) {
    return binop(TP_OP_SYM_FLOORDIV, args, out);
}

/* The kernels compute what the rules compute (ints need no data). */
#define KERNEL(name)                                                      \
    static tp_status name##_kernel(const tp_value *args, tp_value *out) { \
        tp_value_clear(out);                                              \
        return name##_infer(args, out);                                   \
    }
KERNEL(sym_size)
KERNEL(sym_add)
KERNEL(sym_sub)
KERNEL(sym_mul)
KERNEL(sym_floordiv)
#undef KERNEL

/* ---- py_binop(str op, Any a, Any b) -> Any ------------------------------
 * Python's operator.<op> on two numbers (int, float or bool) known only when
 * the program runs (an item() result): ints stay ints (truediv gives a
 * float, floordiv and mod round towards -inf), a float operand gives a
 * float, comparisons give a bool. Nodes of this op have no meta value, so
 * programs using it run in the interpreter. */

static bool py_number(const tp_value *v) { return v->kind == TP_VAL_INT || v->kind == TP_VAL_FLOAT || v->kind == TP_VAL_BOOL; }

static tp_status py_binop_infer(const tp_value *args, tp_value *out) {
    const char *op = tp__arg_str(args, 0);
    const tp_value *a = &args[1], *b = &args[2];
    TP_CHECK(op, TP_ERR_TYPE, "op must be a string");
    TP_CHECK(py_number(a) && py_number(b), TP_ERR_UNSUPPORTED,
             "operator.%s of a %s and a %s: numbers are known only when the program runs", op,
             tp_value_kind_name(a->kind), tp_value_kind_name(b->kind));
    bool ints = a->kind != TP_VAL_FLOAT && b->kind != TP_VAL_FLOAT;
    int64_t x = tp_value_as_i64(a), y = tp_value_as_i64(b);
    double fx = tp_value_as_f64(a), fy = tp_value_as_f64(b);
    tp_value r = tp_value_none();
    if (!strcmp(op, "eq")) r = tp_value_bool(ints ? x == y : fx == fy);
    else if (!strcmp(op, "ne")) r = tp_value_bool(ints ? x != y : fx != fy);
    else if (!strcmp(op, "lt")) r = tp_value_bool(ints ? x < y : fx < fy);
    else if (!strcmp(op, "le")) r = tp_value_bool(ints ? x <= y : fx <= fy);
    else if (!strcmp(op, "gt")) r = tp_value_bool(ints ? x > y : fx > fy);
    else if (!strcmp(op, "ge")) r = tp_value_bool(ints ? x >= y : fx >= fy);
    else if (!strcmp(op, "truediv")) {
        TP_CHECK(fy != 0.0, TP_ERR_INVALID_ARG, "division by zero");
        r = tp_value_float(fx / fy);
    } else if (!strcmp(op, "add") || !strcmp(op, "sub") || !strcmp(op, "mul")) {
        if (ints) {
            int64_t z;
            bool ovf = op[0] == 'a' ? __builtin_add_overflow(x, y, &z) : op[0] == 's' ? __builtin_sub_overflow(x, y, &z)
                                                                                     : __builtin_mul_overflow(x, y, &z);
            TP_CHECK(!ovf, TP_ERR_INVALID_ARG, "integer overflow in operator.%s", op);
            r = tp_value_int(z);
        } else {
            r = tp_value_float(op[0] == 'a' ? fx + fy : op[0] == 's' ? fx - fy : fx * fy);
        }
    } else if (!strcmp(op, "floordiv") || !strcmp(op, "mod")) {
        if (ints) {
            TP_CHECK(y != 0, TP_ERR_INVALID_ARG, "integer division or modulo by zero");
            TP_CHECK(!(x == INT64_MIN && y == -1), TP_ERR_INVALID_ARG, "integer overflow in operator.%s", op);
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) q--, m += y;
            r = tp_value_int(op[0] == 'f' ? q : m);
        } else {
            TP_CHECK(fy != 0.0, TP_ERR_INVALID_ARG, "float floor division or modulo by zero");
            double q = floor(fx / fy);
            r = tp_value_float(op[0] == 'f' ? q : fx - q * fy);
        }
    } else if (!strcmp(op, "pow")) {
        r = tp_value_float(pow(fx, fy));
        if (ints && y >= 0 && fabs(r.u.f) < 9007199254740992.0) r = tp_value_int((int64_t)llround(r.u.f));
    } else {
        return tp_error(TP_ERR_UNSUPPORTED, "operator.%s on numbers is not supported", op);
    }
    tp_value_clear(out);
    *out = r;
    return TP_OK;
}

static tp_status py_binop_kernel(const tp_value *args, tp_value *out) { return py_binop_infer(args, out); }

void tp__register_symint_ops(void) {
    tp__register_op(TP_OP_PY_BINOP, "py_binop(str op, Any a, Any b) -> Any", 0, py_binop_infer, py_binop_kernel);
    tp__register_op(TP_OP_SYM_SIZE, "sym_size(Tensor self, int dim) -> Any", 0, sym_size_infer, sym_size_kernel);
    tp__register_op(TP_OP_SYM_ADD, "sym_add(int a, int b) -> Any", 0, sym_add_infer, sym_add_kernel);
    tp__register_op(TP_OP_SYM_SUB, "sym_sub(int a, int b) -> Any", 0, sym_sub_infer, sym_sub_kernel);
    tp__register_op(TP_OP_SYM_MUL, "sym_mul(int a, int b) -> Any", 0, sym_mul_infer, sym_mul_kernel);
    tp__register_op(TP_OP_SYM_FLOORDIV, "sym_floordiv(int a, int b) -> Any", 0, sym_floordiv_infer,
                    sym_floordiv_kernel);
}
