/*
 * control_flow.c - If, Loop and Scan at import.
 *
 * Our programs are dataflow graphs, so control flow becomes dataflow while
 * importing, in the value table of the enclosing graph (subgraphs see the
 * outer values by name):
 *
 *  - If with a condition known at import converts the chosen branch only.
 *    With a run-time condition both branches are converted and each output
 *    is where(cond, then, else); the branches' outputs must then agree in
 *    dtype and shape (otherwise the choice would change the program's
 *    shapes: refused). Both branches run on every call, so a branch that
 *    fails at run time (an index out of range) fails the call whatever the
 *    condition.
 *  - Loop with a trip count and a condition known at import is unrolled:
 *    the body converted once per iteration with the iteration number as a
 *    constant, until the trip count or a body condition known to be false;
 *    a condition computed at run time is refused (the trip count would
 *    depend on data). Scan outputs are stacked on a new first axis.
 *  - Scan is unrolled over its static scan axis: per step the scan inputs'
 *    slices (select along their axes, in their directions) and the state
 *    go through the body; scan outputs are stacked along their axes,
 *    reversed where their direction says so. Opset 8's batched form runs
 *    that per batch entry and stacks the results.
 *
 * Unrolling is bounded by OX_MAX_UNROLL steps in all.
 */
#include <inttypes.h>
#include <string.h>

#include "onnx_impl.h"

#define OX_MAX_UNROLL 512
#define OX_MAX_CF_VALUES 64

static const Onnx__GraphProto *graph_attr(ox_ctx *c, const char *name) {
    const Onnx__AttributeProto *a = ox_attr(c, name);
    return a && a->g ? a->g : NULL;
}

/* Output i of the node := a copy of the subgraph value `name`. */
static tp_status out_from(ox_ctx *c, int i, const char *name) {
    const tp_value *v;
    TP_TRY(ox_lookup(c, name, &v, NULL));
    tp_value cp;
    TP_TRY(tp_value_copy(v, &cp));
    return ox_set_out(c, i, &cp);
}

static bool same_meta(const tp_tensor *a, const tp_tensor *b) {
    if (!a || !b || tp_tensor_dtype(a) != tp_tensor_dtype(b) || tp_tensor_ndim(a) != tp_tensor_ndim(b)) return false;
    for (int d = 0; d < tp_tensor_ndim(a); d++)
        if (tp_tensor_sizes(a)[d] != tp_tensor_sizes(b)[d]) return false;
    return true;
}

/* r = where(cond, a, b) for tensors, item by item for sequences of one
 * length; refused when the branches' dtypes, shapes or lengths differ. */
static tp_status choose(ox_ctx *c, int i, const tp_value *cond, const tp_value *a, const tp_value *b, tp_value *r) {
    *r = tp_value_none();
    if (a->kind == TP_VAL_LIST && b->kind == TP_VAL_LIST) {
        int64_t n = tp_value_len(a);
        if (n != tp_value_len(b))
            return ox_unsupported(c, "output %d: the branches make sequences of %" PRId64 " and %" PRId64
                                     " items, so the condition, known only when the program runs, would change them", i, n,
                                  tp_value_len(b));
        TP_TRY(tp_value_list(n, r));
        for (int64_t k = 0; k < n; k++) {
            tp_value item;
            tp_status st = choose(c, i, cond, tp_value_at(a, k), tp_value_at(b, k), &item);
            if (st == TP_OK) st = tp_value_seq_set(r, k, &item);
            if (st != TP_OK) {
                tp_value_clear(r);
                return st;
            }
        }
        return TP_OK;
    }
    if (a->kind == TP_VAL_LIST || b->kind == TP_VAL_LIST || a->kind == TP_VAL_TUPLE || b->kind == TP_VAL_TUPLE)
        return ox_unsupported(c, "output %d is an optional, or a sequence in one branch only: only tensors and "
                                 "sequences of one length can be chosen at run time", i);
    if (!same_meta(ox_meta(a), ox_meta(b)))
        return ox_unsupported(c, "output %d: the branches make different dtypes or shapes, so the condition, known only "
                                 "when the program runs, would change the program's shapes", i);
    return ox_call3(c, TP_OP_WHERE, cond, a, b, r);
}

/* ---- If ---------------------------------------------------------------------- */

static tp_status map_if(ox_ctx *c) {
    const tp_value *cond = ox_in(c, 0);
    if (!cond) return ox_bad(c, "missing input 'cond'");
    const Onnx__GraphProto *gt = graph_attr(c, "then_branch"), *ge = graph_attr(c, "else_branch");
    if (!gt || !ge) return ox_bad(c, "missing attribute %s", gt ? "'else_branch'" : "'then_branch'");
    int n_out = ox_n_out(c);
    if ((int)gt->n_output != n_out || (int)ge->n_output != n_out)
        return ox_bad(c, "the branches have %zu and %zu outputs for the node's %d", gt->n_output, ge->n_output, n_out);
    const tp_tensor *cm = ox_meta(cond);
    if (!cm || tp_tensor_numel(cm) != 1) return ox_bad(c, "input 'cond' must hold one value");
    tp_tensor *ct = ox_const(cond);
    if (ct) { /* known now: only the branch taken */
        const Onnx__GraphProto *g = tp_tensor_item_f64(ct, 0) != 0 ? gt : ge;
        TP_TRY(ox_convert_subgraph(c, g));
        for (int i = 0; i < n_out; i++) TP_TRY(out_from(c, i, g->output[i] ? g->output[i]->name : NULL));
        return TP_OK;
    }
    TP_TRY(ox_convert_subgraph(c, gt));
    TP_TRY(ox_convert_subgraph(c, ge));
    tp_value c0 = tp_value_none();
    tp_status st = TP_OK;
    if (tp_tensor_ndim(cm) > 0) { /* a one-element tensor: as a 0-d condition */
        ox_args A;
        ox_args_init(&A);
        ox_arg_ref(&A, cond);
        ox_arg_ints(&A, NULL, 0);
        st = ox_call(c, TP_OP_RESHAPE, &A, &c0);
    } else {
        st = tp_value_copy(cond, &c0);
    }
    if (st == TP_OK && tp_tensor_dtype(cm) != TP_BOOL) {
        tp_value b;
        st = ox_cast(c, &c0, TP_BOOL, &b);
        tp_value_clear(&c0);
        c0 = b;
    }
    for (int i = 0; st == TP_OK && i < n_out; i++) {
        const tp_value *a, *b;
        bool da, db;
        st = ox_lookup(c, gt->output[i] ? gt->output[i]->name : NULL, &a, &da);
        if (st == TP_OK) st = ox_lookup(c, ge->output[i] ? ge->output[i]->name : NULL, &b, &db);
        if (st == TP_OK && (da || db))
            st = ox_unsupported(c, "output %d: a branch's shape depends on a dynamic dim", i);
        tp_value r = tp_value_none();
        if (st == TP_OK) st = choose(c, i, &c0, a, b, &r);
        if (st == TP_OK) st = ox_set_out(c, i, &r);
    }
    tp_value_clear(&c0);
    return st;
}

/* ---- Loop ---------------------------------------------------------------------- */

/* A one-value constant operand as an int64 (*ok false when not constant). */
static tp_status const_scalar(ox_ctx *c, const tp_value *v, const char *what, int64_t *out, bool *ok) {
    tp_tensor *t = ox_const(v);
    *ok = t != NULL;
    if (!t) return TP_OK;
    if (tp_tensor_numel(t) != 1) return ox_bad(c, "input '%s' must hold one value", what);
    double d = tp_tensor_item_f64(t, 0);
    *out = d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? INT64_MIN : (int64_t)d;
    return TP_OK;
}

static tp_status stack_pieces(ox_ctx *c, tp_value *pieces, int64_t axis, tp_value *out) {
    ox_args A;
    ox_args_init(&A);
    ox_arg(&A, *pieces);
    *pieces = tp_value_none();
    ox_arg(&A, tp_value_int(axis));
    return ox_call(c, TP_OP_STACK, &A, out);
}

static tp_status map_loop(ox_ctx *c) {
    const Onnx__GraphProto *body = graph_attr(c, "body");
    if (!body) return ox_bad(c, "missing attribute 'body'");
    int n_in = ox_n_in(c), n_carried = n_in - 2;
    if (n_carried < 0) return ox_bad(c, "Loop needs the trip count and condition inputs (possibly empty)");
    if ((int)body->n_input != n_carried + 2 || (int)body->n_output < n_carried + 1)
        return ox_bad(c, "the body has %zu inputs and %zu outputs for %d loop-carried values", body->n_input,
                      body->n_output, n_carried);
    int n_scan = (int)body->n_output - 1 - n_carried;
    if (n_carried > OX_MAX_CF_VALUES || n_scan > OX_MAX_CF_VALUES) return ox_unsupported(c, "more than %d loop values", OX_MAX_CF_VALUES);
    if (ox_n_out(c) != n_carried + n_scan) return ox_bad(c, "%d outputs for %d loop-carried and %d scan values", ox_n_out(c), n_carried, n_scan);
    int64_t trip = INT64_MAX, cond_v = 1;
    bool ok;
    const tp_value *m = ox_in(c, 0), *cond = ox_in(c, 1);
    if (m) {
        TP_TRY(const_scalar(c, m, "M", &trip, &ok));
        if (!ok) {
            ox_note_need_constant(c, m);
            return ox_unsupported(c, "the trip count is known only when the program runs (the loop would run a "
                                     "data-dependent number of times)");
        }
    }
    if (cond) {
        TP_TRY(const_scalar(c, cond, "cond", &cond_v, &ok));
        if (!ok) {
            ox_note_need_constant(c, cond);
            return ox_unsupported(c, "the loop condition is known only when the program runs");
        }
    }
    if (trip > OX_MAX_UNROLL && cond_v)
        return ox_unsupported(c, "a loop of %s iterations (unrolled at import: at most %d)",
                              trip == INT64_MAX ? "unbounded" : "more than the limit of", OX_MAX_UNROLL);
    tp_value carried[OX_MAX_CF_VALUES], scans[OX_MAX_CF_VALUES];
    bool cdyn[OX_MAX_CF_VALUES];
    tp_status st = TP_OK;
    int n_init = 0, n_scan_init = 0;
    for (int k = 0; k < n_carried && st == TP_OK; k++) {
        const tp_value *v = ox_in(c, 2 + k);
        if (!v) st = ox_bad(c, "missing loop-carried input %d", k);
        else st = tp_value_copy(v, &carried[k]);
        if (st == TP_OK) {
            cdyn[k] = ox_in_dyn(c, 2 + k);
            n_init++;
        }
    }
    for (int k = 0; k < n_scan && st == TP_OK; k++) {
        st = tp_value_list(0, &scans[k]);
        if (st == TP_OK) n_scan_init++;
    }
    for (int64_t it = 0; st == TP_OK && it < trip && cond_v; it++) {
        if (it >= OX_MAX_UNROLL) {
            st = ox_unsupported(c, "a loop of more than %d iterations (unrolled at import)", OX_MAX_UNROLL);
            break;
        }
        tp_tensor *itt = NULL, *ct = NULL;
        st = tp_tensor_from_data(TP_INT64, 0, NULL, &it, &itt);
        if (st == TP_OK) st = tp_tensor_scalar(TP_BOOL, 1, &ct);
        tp_value iv = tp_value_tensor(itt), cv = tp_value_tensor(ct);
        if (st == TP_OK && body->input[0] && body->input[0]->name[0]) st = ox_bind(c, body->input[0]->name, &iv, false);
        if (st == TP_OK && body->input[1] && body->input[1]->name[0]) st = ox_bind(c, body->input[1]->name, &cv, false);
        tp_value_clear(&iv);
        tp_value_clear(&cv);
        for (int k = 0; st == TP_OK && k < n_carried; k++)
            if (body->input[2 + k] && body->input[2 + k]->name) st = ox_bind(c, body->input[2 + k]->name, &carried[k], cdyn[k]);
        if (st == TP_OK) st = ox_convert_subgraph(c, body);
        const tp_value *v;
        bool dyn;
        if (st == TP_OK) st = ox_lookup(c, body->output[0] ? body->output[0]->name : NULL, &v, &dyn);
        if (st == TP_OK) {
            st = const_scalar(c, v, "cond_out", &cond_v, &ok);
            if (st == TP_OK && !ok)
                st = ox_unsupported(c, "the body's condition is known only when the program runs (the loop would run "
                                       "a data-dependent number of times)");
        }
        for (int k = 0; st == TP_OK && k < n_carried; k++) {
            st = ox_lookup(c, body->output[1 + k] ? body->output[1 + k]->name : NULL, &v, &dyn);
            tp_value nv = tp_value_none();
            if (st == TP_OK) st = tp_value_copy(v, &nv);
            if (st == TP_OK) {
                tp_value_clear(&carried[k]);
                carried[k] = nv;
                cdyn[k] = dyn;
            }
        }
        for (int k = 0; st == TP_OK && k < n_scan; k++) {
            st = ox_lookup(c, body->output[1 + n_carried + k] ? body->output[1 + n_carried + k]->name : NULL, &v, &dyn);
            tp_value nv = tp_value_none();
            if (st == TP_OK) st = tp_value_copy(v, &nv);
            if (st == TP_OK) st = tp_value_append(&scans[k], &nv);
        }
    }
    for (int k = 0; k < n_carried; k++)
        if (cdyn[k]) ox_set_node_dyn(c); /* outputs follow a dynamic dim */
    for (int k = 0; st == TP_OK && k < n_carried; k++) {
        tp_value v = carried[k];
        carried[k] = tp_value_none();
        st = ox_set_out(c, k, &v);
    }
    for (int k = 0; st == TP_OK && k < n_scan; k++) {
        if (tp_value_len(&scans[k]) == 0) {
            st = ox_unsupported(c, "a loop that runs no iteration has scan outputs of unknown shape");
            break;
        }
        tp_value r;
        st = stack_pieces(c, &scans[k], 0, &r);
        if (st == TP_OK) st = ox_set_out(c, n_carried + k, &r);
    }
    for (int k = 0; k < n_init; k++) tp_value_clear(&carried[k]);
    for (int k = 0; k < n_scan_init; k++) tp_value_clear(&scans[k]);
    return st;
}

/* ---- Scan ---------------------------------------------------------------------- */

typedef struct scan_spec {
    const Onnx__GraphProto *body;
    int n_state, n_sin, n_sout;
    int64_t in_axes[OX_MAX_CF_VALUES], in_dirs[OX_MAX_CF_VALUES], out_axes[OX_MAX_CF_VALUES],
        out_dirs[OX_MAX_CF_VALUES];
} scan_spec;

/* Run the body over `steps` steps: states[n_state] in, xs[n_sin] scanned
 * along in_axes; res[0..n_state) the final states, res[n_state..) the scan
 * outputs stacked along out_axes (new operands, caller clears them all). */
static tp_status scan_unroll(ox_ctx *c, const scan_spec *sp, const tp_value *const *states,
                             const tp_value *const *xs, int64_t steps, tp_value *res) {
    const Onnx__GraphProto *body = sp->body;
    int n_state = sp->n_state, n_sin = sp->n_sin, n_sout = sp->n_sout;
    tp_value state[OX_MAX_CF_VALUES], outs[OX_MAX_CF_VALUES];
    int n_st = 0, n_outs = 0;
    tp_status st = TP_OK;
    for (int k = 0; k < n_state + n_sout; k++) res[k] = tp_value_none();
    for (int k = 0; k < n_state && st == TP_OK; k++) {
        st = tp_value_copy(states[k], &state[k]);
        if (st == TP_OK) n_st++;
    }
    for (int k = 0; k < n_sout && st == TP_OK; k++) {
        st = tp_value_list(0, &outs[k]);
        if (st == TP_OK) n_outs++;
    }
    for (int64_t t = 0; st == TP_OK && t < steps; t++) {
        for (int k = 0; st == TP_OK && k < n_state; k++)
            if (body->input[k] && body->input[k]->name) st = ox_bind(c, body->input[k]->name, &state[k], false);
        for (int j = 0; st == TP_OK && j < n_sin; j++) {
            ox_args A;
            ox_args_init(&A);
            ox_arg_ref(&A, xs[j]);
            ox_arg(&A, tp_value_int(sp->in_axes[j]));
            ox_arg(&A, tp_value_int(sp->in_dirs[j] ? steps - 1 - t : t));
            tp_value slice;
            st = ox_call(c, TP_OP_SELECT, &A, &slice);
            if (st == TP_OK && body->input[n_state + j] && body->input[n_state + j]->name)
                st = ox_bind(c, body->input[n_state + j]->name, &slice, false);
            tp_value_clear(&slice);
        }
        if (st == TP_OK) st = ox_convert_subgraph(c, body);
        for (int k = 0; st == TP_OK && k < n_state; k++) {
            const tp_value *v;
            st = ox_lookup(c, body->output[k] ? body->output[k]->name : NULL, &v, NULL);
            tp_value nv = tp_value_none();
            if (st == TP_OK) st = tp_value_copy(v, &nv);
            if (st == TP_OK) {
                tp_value_clear(&state[k]);
                state[k] = nv;
            }
        }
        for (int k = 0; st == TP_OK && k < n_sout; k++) {
            const tp_value *v;
            st = ox_lookup(c, body->output[n_state + k] ? body->output[n_state + k]->name : NULL, &v, NULL);
            tp_value nv = tp_value_none();
            if (st == TP_OK) st = tp_value_copy(v, &nv);
            if (st == TP_OK) st = tp_value_append(&outs[k], &nv);
        }
    }
    for (int k = 0; st == TP_OK && k < n_state; k++) {
        res[k] = state[k];
        state[k] = tp_value_none();
    }
    for (int k = 0; st == TP_OK && k < n_sout; k++) {
        if (sp->out_dirs[k]) { /* reverse: the last step's value first */
            int64_t n = tp_value_len(&outs[k]);
            for (int64_t i = 0; i < n / 2; i++) {
                tp_value tmp = outs[k].u.seq.items[i];
                outs[k].u.seq.items[i] = outs[k].u.seq.items[n - 1 - i];
                outs[k].u.seq.items[n - 1 - i] = tmp;
            }
        }
        const tp_tensor *m0 = ox_meta(tp_value_at(&outs[k], 0));
        int r = m0 ? tp_tensor_ndim(m0) + 1 : 1;
        int64_t axis = sp->out_axes[k];
        if (axis < -r || axis >= r) {
            st = ox_bad(c, "scan output %d: axis %" PRId64 " out of range for rank %d", k, axis, r);
            break;
        }
        st = stack_pieces(c, &outs[k], axis < 0 ? axis + r : axis, &res[n_state + k]);
    }
    for (int k = 0; k < n_st; k++) tp_value_clear(&state[k]);
    for (int k = 0; k < n_outs; k++) tp_value_clear(&outs[k]);
    if (st != TP_OK)
        for (int k = 0; k < n_state + n_sout; k++) tp_value_clear(&res[k]);
    return st;
}

/* Scan: opset 9 on, states and scan inputs as they are; opset 8, every
 * input with a leading batch dim (scan axis 1), the body run per batch
 * entry and the results stacked back (sequence_lens must be absent or
 * hold every full length). */
static tp_status map_scan(ox_ctx *c) {
    bool v8 = ox_opset(c) < 9;
    scan_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.body = graph_attr(c, "body");
    if (!sp.body) return ox_bad(c, "missing attribute 'body'");
    const Onnx__GraphProto *body = sp.body;
    int64_t n_scan_in = ox_attr_i(c, "num_scan_inputs", -1);
    int first = v8 ? 1 : 0, n_in = ox_n_in(c) - first;
    if (n_scan_in < 1 || n_scan_in > n_in) return ox_bad(c, "attribute 'num_scan_inputs' %" PRId64 " for %d inputs", n_scan_in, n_in);
    sp.n_state = n_in - (int)n_scan_in;
    sp.n_sin = (int)n_scan_in;
    if ((int)body->n_input != n_in || (int)body->n_output < sp.n_state)
        return ox_bad(c, "the body has %zu inputs and %zu outputs for %d state and %d scan inputs", body->n_input,
                      body->n_output, sp.n_state, sp.n_sin);
    sp.n_sout = (int)body->n_output - sp.n_state;
    if (sp.n_state > OX_MAX_CF_VALUES || sp.n_sin > OX_MAX_CF_VALUES || sp.n_sout > OX_MAX_CF_VALUES)
        return ox_unsupported(c, "more than %d scan values", OX_MAX_CF_VALUES);
    if (ox_n_out(c) != sp.n_state + sp.n_sout)
        return ox_bad(c, "%d outputs for %d state and %d scan outputs", ox_n_out(c), sp.n_state, sp.n_sout);
    int na;
    if (!v8) {
        TP_TRY(ox_attr_ints(c, "scan_input_axes", sp.in_axes, OX_MAX_CF_VALUES, &na));
        if (na >= 0 && na != sp.n_sin) return ox_bad(c, "attribute 'scan_input_axes' has %d values for %d scan inputs", na, sp.n_sin);
        TP_TRY(ox_attr_ints(c, "scan_input_directions", sp.in_dirs, OX_MAX_CF_VALUES, &na));
        if (na >= 0 && na != sp.n_sin)
            return ox_bad(c, "attribute 'scan_input_directions' has %d values for %d scan inputs", na, sp.n_sin);
        TP_TRY(ox_attr_ints(c, "scan_output_axes", sp.out_axes, OX_MAX_CF_VALUES, &na));
        if (na >= 0 && na != sp.n_sout) return ox_bad(c, "attribute 'scan_output_axes' has %d values for %d scan outputs", na, sp.n_sout);
        TP_TRY(ox_attr_ints(c, "scan_output_directions", sp.out_dirs, OX_MAX_CF_VALUES, &na));
        if (na >= 0 && na != sp.n_sout)
            return ox_bad(c, "attribute 'scan_output_directions' has %d values for %d scan outputs", na, sp.n_sout);
    } else {
        TP_TRY(ox_attr_ints(c, "directions", sp.in_dirs, OX_MAX_CF_VALUES, &na));
        if (na >= 0 && na != sp.n_sin) return ox_bad(c, "attribute 'directions' has %d values for %d scan inputs", na, sp.n_sin);
    }
    int64_t steps = -1, batch = -1;
    for (int j = 0; j < sp.n_sin; j++) {
        int i = first + sp.n_state + j;
        const tp_tensor *m = ox_meta(ox_in(c, i));
        if (!m) return ox_bad(c, "missing scan input %d", j);
        if (ox_in_dyn(c, i))
            return ox_unsupported(c, "scan input %d has a dynamic shape (unrolled at import: the scan length must be static)", j);
        int r = tp_tensor_ndim(m);
        if (v8) {
            if (r < 2) return ox_bad(c, "scan input %d needs a batch and a sequence dim", j);
            if (batch >= 0 && tp_tensor_sizes(m)[0] != batch) return ox_bad(c, "scan inputs of different batch sizes");
            batch = tp_tensor_sizes(m)[0];
            sp.in_axes[j] = 1;
        }
        if (sp.in_axes[j] < -r || sp.in_axes[j] >= r)
            return ox_bad(c, "scan input %d: axis %" PRId64 " out of range for rank %d", j, sp.in_axes[j], r);
        if (sp.in_axes[j] < 0) sp.in_axes[j] += r;
        int64_t len = tp_tensor_sizes(m)[sp.in_axes[j]];
        if (steps >= 0 && len != steps) return ox_bad(c, "scan inputs of lengths %" PRId64 " and %" PRId64, steps, len);
        steps = len;
    }
    if (steps < 1) return ox_unsupported(c, "a scan of no steps has outputs of unknown shape");
    if (steps * (v8 ? batch : 1) > OX_MAX_UNROLL)
        return ox_unsupported(c, "a scan of %" PRId64 " steps in all (unrolled at import: at most %d)", steps * (v8 ? batch : 1),
                              OX_MAX_UNROLL);
    if (v8 && ox_in(c, 0)) {
        tp_tensor *lens = ox_const(ox_in(c, 0));
        if (!lens) return ox_unsupported(c, "sequence_lens known only when the program runs");
        for (int64_t i = 0; i < tp_tensor_numel(lens); i++)
            if (tp_tensor_item_f64(lens, i) != (double)steps)
                return ox_unsupported(c, "sequence_lens shorter than the scan (%" PRId64 " steps)", steps);
    }
    const tp_value *states[OX_MAX_CF_VALUES], *xs[OX_MAX_CF_VALUES];
    for (int k = 0; k < sp.n_state; k++) {
        states[k] = ox_in(c, first + k);
        if (!states[k]) return ox_bad(c, "missing state input %d", k);
    }
    for (int j = 0; j < sp.n_sin; j++) xs[j] = ox_in(c, first + sp.n_state + j);
    int n_res = sp.n_state + sp.n_sout;
    tp_value res[2 * OX_MAX_CF_VALUES];
    if (!v8) {
        TP_TRY(scan_unroll(c, &sp, states, xs, steps, res));
    } else { /* per batch entry: slices in, results stacked on a new batch dim */
        for (int j = 0; j < sp.n_sin; j++) sp.in_axes[j] = 0;
        tp_value acc[2 * OX_MAX_CF_VALUES];
        tp_status st = TP_OK;
        int n_acc = 0;
        for (int k = 0; k < n_res && st == TP_OK; k++) {
            st = tp_value_list(0, &acc[k]);
            if (st == TP_OK) n_acc++;
        }
        for (int64_t b = 0; st == TP_OK && b < batch; b++) {
            tp_value sb[OX_MAX_CF_VALUES], xb[OX_MAX_CF_VALUES], one[2 * OX_MAX_CF_VALUES];
            const tp_value *sbp[OX_MAX_CF_VALUES], *xbp[OX_MAX_CF_VALUES];
            int n_sb = 0, n_xb = 0;
            for (int k = 0; st == TP_OK && k < sp.n_state; k++) {
                ox_args A;
                ox_args_init(&A);
                ox_arg_ref(&A, states[k]);
                ox_arg(&A, tp_value_int(0));
                ox_arg(&A, tp_value_int(b));
                st = ox_call(c, TP_OP_SELECT, &A, &sb[k]);
                if (st == TP_OK) sbp[n_sb++] = &sb[k];
            }
            for (int j = 0; st == TP_OK && j < sp.n_sin; j++) {
                ox_args A;
                ox_args_init(&A);
                ox_arg_ref(&A, xs[j]);
                ox_arg(&A, tp_value_int(0));
                ox_arg(&A, tp_value_int(b));
                st = ox_call(c, TP_OP_SELECT, &A, &xb[j]);
                if (st == TP_OK) xbp[n_xb++] = &xb[j];
            }
            if (st == TP_OK) st = scan_unroll(c, &sp, sbp, xbp, steps, one);
            for (int k = 0; st == TP_OK && k < n_res; k++) st = tp_value_append(&acc[k], &one[k]);
            for (int k = 0; k < n_sb; k++) tp_value_clear(&sb[k]);
            for (int j = 0; j < n_xb; j++) tp_value_clear(&xb[j]);
        }
        for (int k = 0; k < n_res; k++) res[k] = tp_value_none();
        for (int k = 0; st == TP_OK && k < n_res; k++) st = stack_pieces(c, &acc[k], 0, &res[k]);
        for (int k = 0; k < n_acc; k++) tp_value_clear(&acc[k]);
        if (st != TP_OK) {
            for (int k = 0; k < n_res; k++) tp_value_clear(&res[k]);
            return st;
        }
    }
    tp_status st = TP_OK;
    for (int k = 0; k < n_res; k++) {
        if (st == TP_OK) st = ox_set_out(c, k, &res[k]);
        else tp_value_clear(&res[k]);
    }
    return st;
}

tp_status tp__onnx_convert_control_flow(ox_ctx *c, const char *op) {
    if (!strcmp(op, "If")) return map_if(c);
    if (!strcmp(op, "Loop")) return map_loop(c);
    if (!strcmp(op, "Scan")) return map_scan(c);
    return ox_unsupported(c, "unknown control-flow op");
}
