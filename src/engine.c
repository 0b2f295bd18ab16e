/*
 * engine.c - compiled plans, the memory plan and run contexts (run.h,
 * engine_impl.h; docs/architecture.md walks one call through it).
 *
 * Building a plan walks the graph once with *probe* values: a placeholder
 * becomes a meta tensor with the call's dtype, sizes and strides (offset
 * 0), state becomes the real state tensor. Each call node is bound
 * (tp_op_bind) and its shape rule run once; view ops run their kernel on
 * the probes, which yields the view's exact strides and offset; every other
 * node becomes a step with a prepared fast variant (contract v2, ops_impl.h)
 * or the reference kernel and fixed argument templates. Outputs of steps
 * get arena offsets from a liveness scan (best fit; an elementwise output
 * may take over the block of an input that dies at that node). A call then
 * only compares the inputs with the plan's key and runs the steps.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu/cpu.h"
#include "cpu/half.h"
#include "engine_impl.h"
#include "graph_impl.h"
#include "program_impl.h"
#include "threadpool.h"
#include "tpexport/pytree.h"

#define ARENA_ALIGN 64
#define HUGE_REFS (1L << 40) /* embedded tensors are never freed through a reference */
#define MAX_RUN_THREADS 256  /* threads one step may run on */

static size_t align_up(size_t n) { return (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1); }

/* ---- threads ----------------------------------------------------------- */

static atomic_int g_num_threads = 1;

void tp_set_num_threads(int n) {
    atomic_store(&g_num_threads, n < 1 ? 1 : n > MAX_RUN_THREADS ? MAX_RUN_THREADS : n);
}
int tp_get_num_threads(void) { return atomic_load(&g_num_threads); }

/* ---- plans -------------------------------------------------------------- */

static void step_clear(plan_step *s) {
    tp_free(s->name);
    tp_free(s->target);
    tp_free(s->in);
    tp_free(s->out);
    if (s->op_plan.free_data) s->op_plan.free_data(s->op_plan.data);
    for (int i = 0; i < s->n_args; i++) tp_value_clear(&s->args[i]);
    tp_free(s->args);
    tp_free(s->leaves);
}

void tp__plan_release(tp_plan *plan) {
    if (!plan || atomic_fetch_sub(&plan->refcount, 1) != 1) return;
    for (int i = 0; i < plan->n_steps; i++) step_clear(&plan->steps[i]);
    tp_free(plan->steps);
    for (int i = 0; i < plan->n_slots; i++) tp_tensor_free(plan->slots[i].constant);
    tp_free(plan->slots);
    for (int i = 0; i < plan->n_key; i++) tp_value_clear(&plan->key[i].value);
    tp_free(plan->key);
    tp_free(plan->leaf_slot);
    tp_value_clear(&plan->leaf_consts);
    tp_treespec_free(plan->out_spec);
    tp_free(plan->user_out_leaf);
    tp_free(plan->mutations);
    tp_free(plan);
}

/* Was plan built for the program as it is now, at this CPU level? */
static bool plan_current(const tp_plan *plan, const tp_program *p, int level) {
    return plan->version == atomic_load(&p->engine.version) && plan->graph_version == p->graph->version &&
           plan->cpu_level == level;
}

static tp_plan *plan_retain(tp_plan *plan) {
    atomic_fetch_add(&plan->refcount, 1);
    return plan;
}

/* Does value v (a flat user input) match key entry k? */
static bool key_matches(const key_entry *k, const tp_value *v) {
    if (!k->is_tensor) return v->kind != TP_VAL_TENSOR && tp_value_equal(&k->value, v);
    if (v->kind != TP_VAL_TENSOR) return false;
    const tp_tensor *t = v->u.tensor;
    if (t->dtype != k->dtype || t->ndim != k->ndim || !t->storage) return false;
    for (int d = 0; d < k->ndim; d++)
        if (t->sizes[d] != k->sizes[d] || (t->strides[d] != k->strides[d] && t->sizes[d] != 1)) return false;
    return true;
}

static bool key_matches_tensor(const key_entry *k, const tp_tensor *t) {
    if (!k->is_tensor || !t || t->dtype != k->dtype || t->ndim != k->ndim || !t->storage) return false;
    for (int d = 0; d < k->ndim; d++)
        if (t->sizes[d] != k->sizes[d] || (t->strides[d] != k->strides[d] && t->sizes[d] != 1)) return false;
    return true;
}

static bool plan_matches(const tp_plan *plan, const tp_value *flat) {
    for (int i = 0; i < plan->n_key; i++)
        if (!key_matches(&plan->key[i], &flat[plan->key[i].placeholder])) return false;
    return true;
}

/* ---- building ----------------------------------------------------------- */

typedef struct builder {
    tp_program *p;
    tp_plan *plan;
    const tp_graph *g;
    tp_value *pv;        /* probe value per node position */
    int64_t *pos_of_uid; /* node uid -> position */
    tp_tensor **probe;   /* probe tensor per slot (borrowed from pv / slots) */
    int cap_probe;
    bool *mutable_node;  /* per position: state written by the graph */
    bool *mut;           /* per slot: a constant the graph writes */
    tp_tensor **extra;   /* probes made by the builder itself (owned) */
    int n_extra, cap_extra;
    int level, threads;
} builder;

static tp_status lookup_probe(void *ctx, const tp_node *node, const tp_value **out) {
    const builder *b = ctx;
    *out = &b->pv[b->pos_of_uid[node->uid]];
    return TP_OK;
}

static int find_slot(const builder *b, const tp_tensor *t) {
    for (int i = b->plan->n_slots - 1; i >= 0; i--)
        if (b->probe[i] == t) return i;
    return -1;
}

static tp_status new_slot(builder *b, slot_kind kind, tp_tensor *probe, int *out) {
    tp_plan *plan = b->plan;
    TP_TRY(tp__grow((void **)&plan->slots, &plan->cap_slots, plan->n_slots, sizeof *plan->slots));
    if (plan->n_slots >= b->cap_probe) {
        int cap = b->cap_probe ? b->cap_probe * 2 : 64;
        tp_tensor **np = tp_realloc(b->probe, (size_t)cap * sizeof *np);
        TP_CHECK(np != NULL, TP_ERR_NOMEM, "out of memory planning a program");
        b->probe = np;
        bool *nm = tp_realloc(b->mut, (size_t)cap * sizeof *nm);
        TP_CHECK(nm != NULL, TP_ERR_NOMEM, "out of memory planning a program");
        memset(nm + b->cap_probe, 0, (size_t)(cap - b->cap_probe) * sizeof *nm);
        b->mut = nm;
        b->cap_probe = cap;
    }
    int id = plan->n_slots++;
    plan_slot *s = &plan->slots[id];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->dtype = probe->dtype;
    s->ndim = probe->ndim;
    memcpy(s->sizes, probe->sizes, sizeof s->sizes);
    memcpy(s->strides, probe->strides, sizeof s->strides);
    s->root = -1;
    s->input = -1;
    s->output = -1;
    s->def = plan->n_steps;
    s->last = -1;
    int64_t numel = tp_tensor_numel(probe);
    s->nbytes = (size_t)numel * tp_dtype_size(probe->dtype);
    b->probe[id] = probe;
    *out = id;
    return TP_OK;
}

static tp_status new_step(builder *b, step_kind kind, const tp_node *n, int n_in, int n_out, plan_step **out) {
    tp_plan *plan = b->plan;
    TP_TRY(tp__grow((void **)&plan->steps, &plan->cap_steps, plan->n_steps, sizeof *plan->steps));
    plan_step *s = &plan->steps[plan->n_steps];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->op = n ? n->op : TP_OP_INVALID;
    s->name = tp_strdup(n ? n->name : "output");
    s->target = tp_strdup(n ? n->target : "output");
    s->in = tp_calloc((size_t)(n_in ? n_in : 1), sizeof *s->in);
    s->out = tp_calloc((size_t)(n_out ? n_out : 1), sizeof *s->out);
    if (!s->name || !s->target || !s->in || !s->out) {
        step_clear(s);
        return tp_error(TP_ERR_NOMEM, "out of memory planning a program");
    }
    s->n_in = n_in;
    s->n_out = n_out;
    plan->n_steps++;
    if (n_in + n_out > plan->max_io) plan->max_io = n_in + n_out;
    *out = s;
    return TP_OK;
}

/* Record that step `step` reads slot id (and the root of a view). */
void tp__plan_use_slot(tp_plan *plan, int id, int step) {
    if (id < 0) return;
    plan_slot *s = &plan->slots[id];
    if (s->last < step) s->last = step;
    if (s->kind == SLOT_VIEW) tp__plan_use_slot(plan, s->root, step);
}

/* Count tensor leaves of bound arguments (depth: argument or list item). */
static tp_status collect_leaves(const tp_value *bound, int n_args, leaf_ref *refs, int *n_refs, int max) {
    int n = 0;
    for (int a = 0; a < n_args; a++) {
        const tp_value *v = &bound[a];
        if (v->kind == TP_VAL_TENSOR) {
            if (refs && n < max) refs[n] = (leaf_ref){a, -1};
            n++;
        } else if (tp_value_is_seq(v) || v->kind == TP_VAL_DICT) {
            for (int64_t k = 0; k < v->u.seq.n; k++) {
                const tp_value *item = &v->u.seq.items[k];
                if (item->kind == TP_VAL_TENSOR) {
                    if (refs && n < max) refs[n] = (leaf_ref){a, (int)k};
                    n++;
                } else if (tp_value_is_seq(item) || item->kind == TP_VAL_DICT) {
                    for (int64_t j = 0; j < item->u.seq.n; j++)
                        if (item->u.seq.items[j].kind == TP_VAL_TENSOR) return TP_ERR_UNSUPPORTED;
                }
            }
        }
    }
    *n_refs = n;
    return TP_OK;
}

static tp_value *leaf_value(tp_value *args, leaf_ref r) {
    return r.item < 0 ? &args[r.arg] : &args[r.arg].u.seq.items[r.item];
}

static bool has_tensor(const tp_value *v) {
    if (v->kind == TP_VAL_TENSOR) return true;
    if (tp_value_is_seq(v) || v->kind == TP_VAL_DICT)
        for (int64_t i = 0; i < v->u.seq.n; i++)
            if (has_tensor(&v->u.seq.items[i])) return true;
    return false;
}

/* Positions whose state the graph writes: in-place ops (through views) and
 * mutation outputs. Their constants are never packed. */
static void mark_mutable(builder *b) {
    const tp_graph *g = b->g;
    for (const tp_node *n = g->first; n; n = n->next) {
        if (n->kind != TP_NODE_CALL_FUNCTION && n->kind != TP_NODE_CALL_METHOD) continue;
        if (!(tp_op_flags(n->op) & (TP_OPF_INPLACE | TP_OPF_MUTATES))) continue;
        for (int64_t k = 0; k < n->n_inputs; k++) {
            const tp_node *m = n->inputs[k];
            while (m && (m->kind == TP_NODE_CALL_FUNCTION || m->kind == TP_NODE_CALL_METHOD) &&
                   (tp_op_flags(m->op) & TP_OPF_VIEW) && m->n_inputs > 0)
                m = m->inputs[0];
            if (m) b->mutable_node[b->pos_of_uid[m->uid]] = true;
        }
    }
    const tp_signature *sig = b->p->signature;
    for (int i = 0; i < tp_signature_n_outputs(sig); i++) {
        const tp_output_spec *o = tp_signature_output(sig, i);
        if (o->kind != TP_OUTPUT_BUFFER_MUTATION && o->kind != TP_OUTPUT_PARAMETER_MUTATION) continue;
        for (const tp_node *n = g->first; n; n = n->next) {
            if (n->kind != TP_NODE_PLACEHOLDER) continue;
            int k = tp_signature_find_input(sig, n->name);
            const tp_input_spec *s = k >= 0 ? tp_signature_input(sig, k) : NULL;
            if (s && s->target && o->target && strcmp(s->target, o->target) == 0)
                b->mutable_node[b->pos_of_uid[n->uid]] = true;
        }
    }
}

/* A slot's probe is a constant with data that nobody writes. */
static bool slot_is_const(const builder *b, int id) {
    return id >= 0 && b->plan->slots[id].kind == SLOT_CONST && !b->mut[id];
}

static tp_status plan_placeholder(builder *b, const tp_node *n, int64_t pos, const tp_value *flat, int64_t index) {
    const tp_signature *sig = b->p->signature;
    int k = tp_signature_find_input(sig, n->name);
    TP_CHECK(k >= 0, TP_ERR_VERIFY, "placeholder '%s' has no input spec", n->name);
    const tp_input_spec *s = tp_signature_input(sig, k);
    tp_plan *plan = b->plan;
    tp_value *pv = &b->pv[pos];
    int id;
    switch (s->kind) {
    case TP_INPUT_USER_INPUT: {
        const tp_value *v = &flat[index];
        key_entry *e = &plan->key[plan->n_key++];
        e->placeholder = (int)index;
        e->value = tp_value_none();
        if (v->kind == TP_VAL_TENSOR) {
            const tp_tensor *t = v->u.tensor;
            if (!t->storage) return TP_ERR_UNSUPPORTED;
            e->is_tensor = true;
            e->dtype = t->dtype;
            e->ndim = t->ndim;
            memcpy(e->sizes, t->sizes, sizeof e->sizes);
            memcpy(e->strides, t->strides, sizeof e->strides);
            tp_tensor *probe;
            TP_TRY(tp__tensor_make(t->dtype, t->ndim, t->sizes, t->strides, 0, NULL, &probe));
            *pv = tp_value_tensor(probe);
            TP_TRY(new_slot(b, SLOT_INPUT, probe, &id));
            plan->slots[id].input = (int)index;
            return TP_OK;
        }
        if (has_tensor(v)) return TP_ERR_UNSUPPORTED; /* containers of tensors: interpreted */
        TP_TRY(tp_value_copy(v, &e->value));
        return tp_value_copy(v, pv);
    }
    case TP_INPUT_CUSTOM_OBJ: *pv = tp_value_none(); return TP_OK;
    case TP_INPUT_TOKEN: {
        tp_tensor *token;
        TP_TRY(tp_tensor_empty(TP_FLOAT32, 1, (const int64_t[]){0}, &token));
        *pv = tp_value_tensor(token);
        TP_TRY(new_slot(b, SLOT_CONST, token, &id));
        plan->slots[id].constant = tp_tensor_retain(token);
        return TP_OK;
    }
    default: {
        tp_tensor *t;
        TP_TRY(tp_module_get_state(b->p->state, s->target, &t, NULL, NULL));
        *pv = tp_value_tensor(tp_tensor_retain(t));
        TP_TRY(new_slot(b, SLOT_CONST, t, &id));
        plan->slots[id].constant = tp_tensor_retain(t);
        b->mut[id] = b->mutable_node[pos];
        return TP_OK;
    }
    }
}

/* Is probe r (a new result of view op `op` on base) a view, or a copy? */
static tp_status classify_view(tp_op op, tp_tensor *base, tp_tensor *r, tp_tensor **view, bool *is_view) {
    *view = NULL;
    *is_view = true;
    if (op == TP_OP_RESHAPE || op == TP_OP_FLATTEN || op == TP_OP_VIEW) {
        tp_tensor *v;
        tp_status st = tp_tensor_view(base, r->ndim, r->sizes, &v);
        if (st == TP_OK) {
            *view = v;
        } else if (st == TP_ERR_NOMEM) {
            return st;
        } else {
            tp_clear_error(); /* not expressible as a view: a copy */
            *is_view = false;
        }
    } else if (op == TP_OP_CONTIGUOUS || op == TP_OP_TO) {
        *is_view = false; /* an unchanged input came back as itself */
    }
    return TP_OK;
}

/* Give each new tensor leaf of a view op's result a slot (a view, a
 * constant view of state, or the output of a copy step). */
static tp_status plan_view_leaf(builder *b, const tp_node *n, tp_value *leaf, int base_id) {
    tp_plan *plan = b->plan;
    tp_tensor *r = leaf->u.tensor;
    if (find_slot(b, r) >= 0) return TP_OK; /* an existing value (getitem of a tuple, to() unchanged) */
    if (base_id < 0) return TP_ERR_UNSUPPORTED;
    tp_tensor *base = b->probe[base_id];
    const plan_slot *bs = &plan->slots[base_id];
    int id;
    if (bs->kind == SLOT_CONST) {
        if (r->storage && r->storage == base->storage) { /* a real view of state */
            TP_TRY(new_slot(b, SLOT_CONST, r, &id));
            plan->slots[id].constant = tp_tensor_retain(r);
            b->mut[id] = b->mut[base_id];
            return TP_OK;
        }
    }
    tp_tensor *view = NULL;
    bool is_view = bs->kind != SLOT_CONST;
    if (is_view) TP_TRY(classify_view(n->op, base, r, &view, &is_view));
    if (view) { /* replace the contiguous probe by the real view */
        tp_tensor_free(r);
        leaf->u.tensor = r = view;
    }
    if (is_view) {
        int root = bs->kind == SLOT_VIEW ? bs->root : base_id;
        TP_TRY(new_slot(b, SLOT_VIEW, r, &id));
        plan->slots[id].root = root;
        plan->slots[id].offset = r->offset;
        plan_step *s;
        TP_TRY(new_step(b, STEP_VIEW, n, 1, 1, &s));
        s->in[0] = root;
        s->out[0] = id;
        tp__plan_use_slot(plan, root, plan->n_steps - 1);
        plan->slots[id].def = plan->n_steps - 1;
        return TP_OK;
    }
    /* a copy (reshape of a non-viewable layout, contiguous(), a dtype change): contiguous result */
    tp_tensor *meta;
    TP_TRY(tp__tensor_make(r->dtype, r->ndim, r->sizes, NULL, 0, NULL, &meta));
    tp_tensor_free(r);
    leaf->u.tensor = meta;
    plan_step *s;
    TP_TRY(new_step(b, STEP_COPY, n, 1, 1, &s));
    TP_TRY(new_slot(b, SLOT_ARENA, meta, &id));
    plan->slots[id].def = plan->n_steps - 1;
    s->in[0] = base_id;
    s->out[0] = id;
    tp__plan_use_slot(plan, base_id, plan->n_steps - 1);
    return TP_OK;
}

static tp_status plan_view_tree(builder *b, const tp_node *n, tp_value *v, int base_id) {
    if (v->kind == TP_VAL_TENSOR) return plan_view_leaf(b, n, v, base_id);
    if (tp_value_is_seq(v) || v->kind == TP_VAL_DICT)
        for (int64_t i = 0; i < v->u.seq.n; i++) TP_TRY(plan_view_tree(b, n, &v->u.seq.items[i], base_id));
    return TP_OK;
}

/* Try the op's fast variants; fills s->op_plan and returns true if one took it. */
static tp_status try_variants(builder *b, plan_step *s, const tp_value *bound, const tp_value *outv, const bool *is_const,
                              int n_leaves, bool *taken) {
    *taken = false;
    if (b->level < TP_CPU_SCALAR) return TP_OK;
    int nv;
    const tp_variant *v = tp__op_variants(s->op, &nv);
    tp_prepare_info info = {.cpu_level = b->level, .max_threads = b->threads, .is_const = is_const, .n_leaves = n_leaves};
    for (int i = 0; i < nv; i++) {
        if (v[i].min_level > b->level) continue;
        tp_op_plan op_plan;
        memset(&op_plan, 0, sizeof op_plan);
        op_plan.max_threads = 1;
        tp_status st = v[i].prepare(&info, bound, outv, &op_plan);
        if (st == TP_ERR_UNSUPPORTED) {
            if (op_plan.free_data) op_plan.free_data(op_plan.data);
            tp_clear_error();
            continue;
        }
        if (st != TP_OK) {
            if (op_plan.free_data) op_plan.free_data(op_plan.data);
            return st;
        }
        if (!op_plan.variant) op_plan.variant = v[i].name;
        if (op_plan.max_threads < 1) op_plan.max_threads = 1;
        s->op_plan = op_plan;
        *taken = true;
        return TP_OK;
    }
    return TP_OK;
}

/* A fast variant may want contiguous inputs: when strided (non-constant)
 * inputs made every variant decline, try again as if they were contiguous;
 * if one accepts, copy those inputs into arena slots with copy steps placed
 * just before step j0. */
static tp_status retry_contiguous(builder *b, int j0, const tp_node *n, tp_value *bound, const leaf_ref *refs,
                                  int n_leaves, const tp_value *outv, bool *is_const, bool *taken) {
    tp_plan *plan = b->plan;
    int nv, which[64], m = 0;
    if (b->level < TP_CPU_SCALAR || !tp__op_variants(plan->steps[j0].op, &nv)) return TP_OK;
    for (int k = 0; k < n_leaves; k++) {
        int id = plan->steps[j0].in[k];
        if (plan->slots[id].kind != SLOT_CONST && !tp_tensor_is_contiguous(b->probe[id])) which[m++] = k;
    }
    if (m == 0) return TP_OK;
    tp_tensor *cprobe[64], *orig[64];
    tp_status st = TP_OK;
    int made = 0;
    for (int i = 0; i < m && st == TP_OK; i++, made++) {
        tp_tensor *o = b->probe[plan->steps[j0].in[which[i]]];
        st = tp__tensor_make(o->dtype, o->ndim, o->sizes, NULL, 0, NULL, &cprobe[i]);
        if (st != TP_OK) break;
        tp_value *lv = leaf_value(bound, refs[which[i]]);
        orig[i] = lv->u.tensor;
        lv->u.tensor = cprobe[i];
    }
    plan_step trial = plan->steps[j0];
    memset(&trial.op_plan, 0, sizeof trial.op_plan);
    bool ok = false;
    bool saved_const[64];
    memcpy(saved_const, is_const, (size_t)n_leaves * sizeof *is_const);
    for (int i = 0; i < made; i++) is_const[which[i]] = false;
    if (st == TP_OK) st = try_variants(b, &trial, bound, outv, is_const, n_leaves, &ok);
    for (int i = 0; i < made; i++) leaf_value(bound, refs[which[i]])->u.tensor = orig[i];
    for (int i = 0; i < made && st == TP_OK; i++) { /* the builder owns the new probes from here */
        st = tp__grow((void **)&b->extra, &b->cap_extra, b->n_extra, sizeof *b->extra);
        if (st == TP_OK) b->extra[b->n_extra++] = cprobe[i];
        else tp_tensor_free(cprobe[i]);
        if (st != TP_OK)
            for (int k = i + 1; k < made; k++) tp_tensor_free(cprobe[k]);
    }
    if (st != TP_OK || !ok) {
        if (ok && trial.op_plan.free_data) trial.op_plan.free_data(trial.op_plan.data);
        memcpy(is_const, saved_const, (size_t)n_leaves * sizeof *is_const);
        return st;
    }
    int cid[64];
    for (int i = 0; i < m && st == TP_OK; i++) {
        plan_step *cs;
        st = new_step(b, STEP_COPY, n, 1, 1, &cs);
        if (st == TP_OK) st = new_slot(b, SLOT_ARENA, cprobe[i], &cid[i]);
        if (st == TP_OK) {
            cs->in[0] = plan->steps[j0].in[which[i]];
            cs->out[0] = cid[i];
        }
    }
    if (st != TP_OK) {
        if (trial.op_plan.free_data) trial.op_plan.free_data(trial.op_plan.data);
        return st;
    }
    /* rotate: the copies run first, then the step */
    plan_step step = plan->steps[j0];
    memmove(&plan->steps[j0], &plan->steps[j0 + 1], (size_t)m * sizeof *plan->steps);
    plan->steps[j0 + m] = step;
    for (int i = 0; i < m; i++) {
        plan_step *cs = &plan->steps[j0 + i];
        plan->slots[cs->out[0]].def = j0 + i;
        tp__plan_use_slot(plan, cs->in[0], j0 + i);
    }
    plan_step *s = &plan->steps[j0 + m];
    for (int i = 0; i < m; i++) s->in[which[i]] = cid[i];
    for (int k = 0; k < s->n_in; k++) tp__plan_use_slot(plan, s->in[k], j0 + m);
    for (int o = 0; o < s->n_out; o++)
        if (plan->slots[s->out[o]].def == j0) plan->slots[s->out[o]].def = j0 + m;
    s->op_plan = trial.op_plan;
    *taken = true;
    return TP_OK;
}

static tp_status plan_call(builder *b, const tp_node *n, int64_t pos) {
    tp_plan *plan = b->plan;
    tp_op op = n->op;
    tp_value bound[64];
    int n_bound = 0;
    tp_status st;
    TP_TRY(tp__node_bind(n, lookup_probe, b, bound, &n_bound));
    unsigned flags = tp_op_flags(op);
    tp_value *pv = &b->pv[pos];
    tp_value result = tp_value_none();
    leaf_ref refs[64];
    int n_leaves = 0;
    plan_step *s = NULL;
    if (flags & TP_OPF_VIEW) {
        tp_kernel_fn k = tp__op_reference_kernel(op);
        st = k ? k(bound, &result) : tp_error(TP_ERR_UNSUPPORTED, "op %s has no kernel", tp_op_name(op));
        if (st != TP_OK) tp_error_context("%s", tp_op_name(op));
        int base_id = bound[0].kind == TP_VAL_TENSOR ? find_slot(b, bound[0].u.tensor) : -1;
        if (st == TP_OK) st = plan_view_tree(b, n, &result, base_id);
        if (st == TP_OK) tp_value_move(pv, &result);
        goto done;
    }
    st = tp_op_infer(op, bound, &result);
    if (st != TP_OK) goto done;
    if (!has_tensor(&result)) {
        if (op == TP_OP_SYM_SIZE || op == TP_OP_SYM_ADD || op == TP_OP_SYM_SUB || op == TP_OP_SYM_MUL ||
            op == TP_OP_SYM_FLOORDIV) {
            tp_value_move(pv, &result); /* ints of the shape class: constants of the plan */
            goto done;
        }
        st = TP_ERR_UNSUPPORTED;
        goto done;
    }
    if ((st = collect_leaves(bound, n_bound, refs, &n_leaves, 64)) != TP_OK || n_leaves > 64) {
        st = TP_ERR_UNSUPPORTED;
        goto done;
    }
    int n_out = 0;
    bool inplace = flags & TP_OPF_INPLACE;
    int out_kind = inplace ? 3 : result.kind == TP_VAL_TENSOR ? 0 : result.kind == TP_VAL_TUPLE ? 1 : 2;
    if (inplace) n_out = 1;
    else if (out_kind == 0) n_out = 1;
    else {
        n_out = (int)result.u.seq.n;
        for (int i = 0; i < n_out; i++)
            if (result.u.seq.items[i].kind != TP_VAL_TENSOR) {
                st = TP_ERR_UNSUPPORTED;
                goto done;
            }
    }
    if (inplace && bound[0].kind != TP_VAL_TENSOR) {
        st = tp_error(TP_ERR_TYPE, "%s: self must be a Tensor, not %s", tp_op_name(op), tp_value_kind_name(bound[0].kind));
        goto done;
    }
    if ((st = new_step(b, STEP_LEGACY, n, n_leaves, n_out, &s)) != TP_OK) goto done;
    int step_index = plan->n_steps - 1;
    bool is_const[64];
    for (int k = 0; k < n_leaves; k++) {
        const tp_value *lv = leaf_value(bound, refs[k]);
        int id = find_slot(b, lv->u.tensor);
        if (id < 0) {
            st = TP_ERR_UNSUPPORTED;
            goto done;
        }
        s->in[k] = id;
        is_const[k] = slot_is_const(b, id);
        tp__plan_use_slot(plan, id, step_index);
    }
    if (inplace) {
        s->out[0] = s->in[0];
        tp_value_clear(&result);
        st = tp_value_copy(&bound[0], pv);
    } else {
        for (int i = 0; i < n_out && st == TP_OK; i++) {
            tp_value *ov = out_kind == 0 ? &result : &result.u.seq.items[i];
            st = new_slot(b, SLOT_ARENA, ov->u.tensor, &s->out[i]);
            if (st == TP_OK) plan->slots[s->out[i]].def = step_index;
        }
    }
    if (st != TP_OK) goto done;
    s->out_kind = out_kind;
    bool taken = false;
    const tp_value *outv = inplace ? pv : &result;
    if ((st = try_variants(b, s, bound, outv, is_const, n_leaves, &taken)) != TP_OK) goto done;
    if (!taken && !inplace) {
        if ((st = retry_contiguous(b, step_index, n, bound, refs, n_leaves, outv, is_const, &taken)) != TP_OK) goto done;
        s = &plan->steps[plan->n_steps - 1]; /* the step array may have moved */
    }
    if (taken) {
        s->kind = STEP_FAST;
        plan->n_fast++;
        plan->packed_bytes += s->op_plan.data_bytes;
        if (s->op_plan.workspace > plan->workspace_bytes) plan->workspace_bytes = s->op_plan.workspace;
    } else {
        /* the reference kernel with a template of the bound arguments */
        plan->n_reference++;
        s->args = tp_calloc((size_t)(n_bound ? n_bound : 1), sizeof *s->args);
        s->leaves = tp_calloc((size_t)(n_leaves ? n_leaves : 1), sizeof *s->leaves);
        if (s->args) s->n_args = n_bound; /* step_clear clears n_args values */
        if (!s->args || !s->leaves) {
            st = tp_error(TP_ERR_NOMEM, "out of memory planning a program");
            goto done;
        }
        for (int a = 0; a < n_bound && st == TP_OK; a++) st = tp_value_copy(&bound[a], &s->args[a]);
        if (st != TP_OK) goto done;
        for (int k = 0; k < n_leaves; k++) {
            s->leaves[k] = refs[k];
            tp_value *lv = leaf_value(s->args, refs[k]);
            tp_value_clear(lv); /* filled with the run's tensor at each execution */
        }
    }
    if (!inplace) tp_value_move(pv, &result);
done:
    tp_value_clear(&result);
    for (int i = 0; i < n_bound; i++) tp_value_clear(&bound[i]);
    return st;
}

/* Map output leaves to slots: user outputs become OUTPUT slots (through a
 * copy step when the leaf is not a fresh step result), mutations are
 * recorded with their destination. */
static tp_status plan_outputs(builder *b, const tp_node *out_node) {
    tp_plan *plan = b->plan;
    tp_value tree = tp_value_none(), leaves = tp_value_none();
    if (tp_value_len(&out_node->args) > 0) TP_TRY(tp__value_substitute(&out_node->args.u.seq.items[0], lookup_probe, b, &tree));
    tp_status st = tp_pytree_flatten(&tree, &leaves, &plan->out_spec);
    tp_value_clear(&tree);
    TP_TRY(st);
    int n = (int)tp_value_len(&leaves);
    plan->leaf_slot = tp_calloc((size_t)(n ? n : 1), sizeof *plan->leaf_slot);
    plan->user_out_leaf = tp_calloc((size_t)(n ? n : 1), sizeof *plan->user_out_leaf);
    plan->mutations = tp_calloc((size_t)(n ? n : 1), sizeof *plan->mutations);
    if (!plan->leaf_slot || !plan->user_out_leaf || !plan->mutations) {
        tp_value_clear(&leaves);
        return tp_error(TP_ERR_NOMEM, "out of memory planning");
    }
    plan->n_leaves = n;
    st = tp_value_tuple(n, &plan->leaf_consts);
    const tp_signature *sig = b->p->signature;
    plan->all_tensor_io = true;
    for (int k = 0; k < plan->n_key; k++)
        if (!plan->key[k].is_tensor) plan->all_tensor_io = false;
    int end = plan->n_steps; /* "after the last step" */
    for (int i = 0; i < n && st == TP_OK; i++) {
        tp_value *lv = tp_value_at(&leaves, i);
        const tp_output_spec *o = tp_signature_output(sig, i);
        tp_output_kind kind = o ? o->kind : TP_OUTPUT_USER_OUTPUT;
        plan->leaf_slot[i] = -1;
        if (kind == TP_OUTPUT_TOKEN) {
            plan->n_mut++;
            continue;
        }
        bool mutation = kind == TP_OUTPUT_BUFFER_MUTATION || kind == TP_OUTPUT_PARAMETER_MUTATION ||
                        kind == TP_OUTPUT_USER_INPUT_MUTATION;
        if (mutation) {
            plan->n_mut++;
            if (lv->kind != TP_VAL_TENSOR) {
                st = tp_error(TP_ERR_TYPE, "mutation output for %s is a %s, not a tensor", o->target,
                              tp_value_kind_name(lv->kind));
                break;
            }
            int id = find_slot(b, lv->u.tensor);
            if (id < 0) {
                st = TP_ERR_UNSUPPORTED;
                break;
            }
            tp__plan_use_slot(plan, id, end);
            int dst = -1;
            if (kind == TP_OUTPUT_USER_INPUT_MUTATION) {
                for (int s2 = 0; s2 < plan->n_slots && dst < 0; s2++)
                    if (plan->slots[s2].kind == SLOT_INPUT &&
                        strcmp(tp_node_name(tp_graph_placeholder_at(b->g, plan->slots[s2].input)), o->target) == 0)
                        dst = s2;
                if (dst < 0) continue; /* a container input: its elements were updated in place */
            } else {
                tp_tensor *t;
                if ((st = tp_module_get_state(b->p->state, o->target, &t, NULL, NULL)) != TP_OK) break;
                for (int s2 = 0; s2 < plan->n_slots && dst < 0; s2++)
                    if (plan->slots[s2].kind == SLOT_CONST && plan->slots[s2].constant == t) dst = s2;
                if (dst < 0) {
                    st = TP_ERR_UNSUPPORTED;
                    break;
                }
                plan->mutates_state = true;
            }
            if (dst != id) plan->mutations[plan->n_mutations++] = (plan_mutation){.slot = id, .dst_slot = dst};
            continue;
        }
        plan->user_out_leaf[plan->n_user_out] = i;
        if (lv->kind != TP_VAL_TENSOR) {
            plan->all_tensor_io = false;
            st = tp_value_copy(lv, tp_value_at(&plan->leaf_consts, i));
            plan->n_user_out++;
            continue;
        }
        int id = find_slot(b, lv->u.tensor);
        if (id < 0) {
            st = TP_ERR_UNSUPPORTED;
            break;
        }
        plan_slot *s = &plan->slots[id];
        bool fresh = s->kind == SLOT_ARENA;
        for (int k = 0; k < plan->n_user_out && fresh; k++)
            if (plan->leaf_slot[plan->user_out_leaf[k]] == id) fresh = false;
        if (!fresh) { /* a view, input, state or repeated value: copied into its own output */
            plan_step *cs;
            tp_tensor *meta;
            if ((st = tp__tensor_make(s->dtype, s->ndim, s->sizes, NULL, 0, NULL, &meta)) != TP_OK) break;
            int oid;
            st = new_step(b, STEP_COPY, NULL, 1, 1, &cs);
            if (st == TP_OK) st = new_slot(b, SLOT_ARENA, meta, &oid);
            /* the probe is owned by the leaves tuple from here on */
            tp_value_clear(lv);
            *lv = tp_value_tensor(meta);
            if (st != TP_OK) break;
            cs->in[0] = id;
            cs->out[0] = oid;
            tp__plan_use_slot(plan, id, plan->n_steps - 1);
            plan->slots[oid].def = plan->n_steps - 1;
            id = oid;
            end = plan->n_steps;
            s = &plan->slots[id];
        }
        s->kind = SLOT_OUTPUT;
        s->output = plan->n_user_out;
        plan->leaf_slot[i] = id;
        plan->n_user_out++;
    }
    /* every leaf stays alive to the end */
    for (int i = 0; i < plan->n_mutations; i++) tp__plan_use_slot(plan, plan->mutations[i].slot, plan->n_steps);
    for (int i = 0; i < plan->n_leaves; i++)
        if (plan->leaf_slot[i] >= 0) tp__plan_use_slot(plan, plan->leaf_slot[i], plan->n_steps);
    /* steps writing state in place also serialise calls */
    for (int i = 0; i < plan->n_steps; i++) {
        const plan_step *s = &plan->steps[i];
        if (s->out_kind == 3 && (s->kind == STEP_LEGACY || s->kind == STEP_FAST)) {
            int root = s->out[0];
            if (root >= 0 && plan->slots[root].kind == SLOT_VIEW) root = plan->slots[root].root;
            if (root >= 0 && plan->slots[root].kind == SLOT_CONST) plan->mutates_state = true;
        }
        if (s->kind != STEP_VIEW && s->op != TP_OP_INVALID && (tp_op_flags(s->op) & TP_OPF_MUTATES))
            plan->mutates_state = true;
    }
    /* leaves probes are referenced by slots via b->probe: keep them alive with the pv array */
    tp_value_clear(&leaves);
    return st;
}

/* ---- fusion --------------------------------------------------------------
 * A GEMM or convolution step whose output feeds exactly one elementwise
 * step absorbs it: a bias add (a row vector), a residual add (out = P + R)
 * and then activations, in that order, run in the producer's epilogue
 * while the tile is in cache (ViT's and GPT-2's blocks: matmul, + bias,
 * + the residual stream). The producer then writes the consumer's output
 * slot; the consumer step is skipped.
 * Only the plan changes, never the program. */

static void count_uses(const tp_plan *plan, int *uses) {
    memset(uses, 0, (size_t)plan->n_slots * sizeof *uses);
    for (int j = 0; j < plan->n_steps; j++) {
        const plan_step *s = &plan->steps[j];
        if (s->kind == STEP_FUSED) continue;
        for (int k = 0; k < s->n_in; k++)
            if (s->in[k] >= 0) uses[s->in[k]]++;
    }
    for (int i = 0; i < plan->n_slots; i++)
        if (plan->slots[i].kind == SLOT_VIEW) uses[plan->slots[i].root] += 2;
    for (int i = 0; i < plan->n_leaves; i++)
        if (plan->leaf_slot[i] >= 0) uses[plan->leaf_slot[i]] += 2;
    for (int i = 0; i < plan->n_mutations; i++) uses[plan->mutations[i].slot] += 2;
}

/* The one step reading slot id, after step `after`, or -1. */
static int sole_reader(const tp_plan *plan, int id, int after) {
    for (int j = after + 1; j < plan->n_steps; j++) {
        const plan_step *s = &plan->steps[j];
        if (s->kind == STEP_FUSED) continue;
        for (int k = 0; k < s->n_in; k++)
            if (s->in[k] == id) return j;
    }
    return -1;
}

/* Whether step s reads slot id or a view of it. */
static bool step_reads(const tp_plan *plan, const plan_step *s, int id) {
    for (int k = 0; k < s->n_in; k++) {
        for (int r = s->in[k]; r >= 0; r = plan->slots[r].kind == SLOT_VIEW ? plan->slots[r].root : -1)
            if (r == id) return true;
    }
    return false;
}

/* The last step in [j, c) that reads slot id (directly or through a view),
 * skipping fused steps (they run inside their producer): where id's life
 * ends once step c, its last reader until now, is fused into step j, which
 * reads id in its place. With no reader in between, a summed residual's
 * block can become the output of the step that sums it (plan_memory). */
static int last_reader_before(const tp_plan *plan, int id, int j, int c) {
    for (int t = c - 1; t > j; t--)
        if (plan->steps[t].kind != STEP_FUSED && step_reads(plan, &plan->steps[t], id)) return t;
    return j;
}

bool tp__plan_written_between(const tp_plan *plan, int r, int j, int c) {
    while (r >= 0 && plan->slots[r].kind == SLOT_VIEW) r = plan->slots[r].root;
    for (int t = j + 1; t < c; t++) {
        const plan_step *ws = &plan->steps[t];
        if (ws->kind == STEP_FUSED || ws->kind == STEP_VIEW) continue;
        const unsigned fl = ws->op != TP_OP_INVALID ? tp_op_flags(ws->op) : 0;
        if (fl & TP_OPF_MUTATES) return true;
        for (int k = 0; k < ws->n_out + ((fl & TP_OPF_INPLACE) && ws->n_in > 0 ? 1 : 0); k++) {
            int w = k < ws->n_out ? ws->out[k] : ws->in[0];
            while (w >= 0 && plan->slots[w].kind == SLOT_VIEW) w = plan->slots[w].root;
            if (w == r) return true;
        }
    }
    return false;
}

static tp_status fuse_steps(tp_plan *plan) {
    int *uses = tp_calloc((size_t)(plan->n_slots ? plan->n_slots : 1), sizeof *uses);
    TP_CHECK(uses != NULL, TP_ERR_NOMEM, "out of memory fusing steps");
    tp_status st = TP_OK;
    for (int j = 0; j < plan->n_steps && st == TP_OK; j++) {
        bool has_residual = false, has_bias = false; /* a bias add, then a residual add, then activations */
        for (;;) {
            plan_step *p = &plan->steps[j];
            /* a producer refuses what it cannot take (GEMM/conv: nothing after the activation) */
            if (p->kind != STEP_FAST || !p->op_plan.fuse || p->n_out != 1) break;
            count_uses(plan, uses);
            int pid = p->out[0];
            if (plan->slots[pid].kind != SLOT_ARENA || uses[pid] != 1) break;
            int c = sole_reader(plan, pid, j);
            if (c < 0) break;
            plan_step *cs = &plan->steps[c];
            if (cs->kind != STEP_FAST || cs->n_out != 1) break;
            const plan_slot *ps = &plan->slots[pid], *qs = &plan->slots[cs->out[0]];
            if (qs->kind != SLOT_ARENA && qs->kind != SLOT_OUTPUT) break;
            if (qs->nbytes != ps->nbytes || qs->dtype != ps->dtype) break;
            bool others_const = cs->n_in >= 1 && cs->in[0] == pid;
            for (int k = 1; k < cs->n_in && others_const; k++)
                others_const = cs->in[k] >= 0 && plan->slots[cs->in[k]].kind == SLOT_CONST;
            /* a producer that cannot take the consumer leaves it a step of
             * its own; running out of memory fails the plan */
            tp_status fs = TP_OK;
            if (cs->op_plan.apply && others_const) { /* apply reads constants from its plan, not in[] */
                if ((fs = p->op_plan.fuse(&p->op_plan, &cs->op_plan, TP_FUSE_ACT, -1)) != TP_OK) {
                    if (fs == TP_ERR_NOMEM) st = fs;
                    break;
                }
            } else if (cs->op_plan.channel_scale && cs->in[0] == pid) {
                if ((fs = p->op_plan.fuse(&p->op_plan, &cs->op_plan, TP_FUSE_CHANNEL_AFFINE, -1)) != TP_OK) {
                    if (fs == TP_ERR_NOMEM) st = fs;
                    break;
                }
            } else if ((cs->op_plan.residual_add || cs->op_plan.bias_add) && cs->n_in == 2 && !has_residual &&
                       (cs->op_plan.residual_add || (!has_bias && cs->in[1 - cs->op_plan.bias_leaf] == pid))) {
                int kind = cs->op_plan.residual_add ? TP_FUSE_RESIDUAL : TP_FUSE_BIAS;
                int r = cs->in[0] == pid ? cs->in[1] : cs->in[0];
                if (r < 0 || r == pid) break;
                const plan_slot *rs = &plan->slots[r];
                bool ready = rs->kind == SLOT_CONST || rs->kind == SLOT_INPUT || rs->def < j;
                if (!ready || rs->kind == SLOT_VIEW || tp__plan_written_between(plan, r, j, c)) break;
                int *in = tp_realloc(p->in, (size_t)(p->n_in + 1) * sizeof *in);
                if (!in) {
                    st = tp_error(TP_ERR_NOMEM, "out of memory fusing steps");
                    break;
                }
                p->in = in;
                if ((fs = p->op_plan.fuse(&p->op_plan, &cs->op_plan, kind, p->n_in)) != TP_OK) {
                    if (fs == TP_ERR_NOMEM) st = fs;
                    break;
                }
                p->in[p->n_in++] = r;
                if (p->n_in + p->n_out > plan->max_io) plan->max_io = p->n_in + p->n_out;
                /* c read r (so r lives to c at least); r is no view (above):
                 * the read now happens in step j */
                if (plan->slots[r].last == c) plan->slots[r].last = last_reader_before(plan, r, j, c);
                if (kind == TP_FUSE_RESIDUAL) has_residual = true;
                else has_bias = true;
            } else {
                break;
            }
            /* the producer writes the consumer's output; the consumer is skipped */
            p->out[0] = cs->out[0];
            plan->slots[cs->out[0]].def = j;
            cs->kind = STEP_FUSED;
            plan->n_fast--;
            plan->n_fused++;
        }
    }
    tp_free(uses);
    return st;
}

/* ---- memory plan -------------------------------------------------------- */

typedef struct free_block {
    size_t offset, size;
} free_block;

typedef struct arena_alloc {
    free_block *blocks;
    int n, cap;
    size_t top; /* high-water mark */
} arena_alloc;

static tp_status arena_take(arena_alloc *a, size_t size, size_t *offset) {
    size = align_up(size ? size : 1);
    int best = -1;
    for (int i = 0; i < a->n; i++)
        if (a->blocks[i].size >= size && (best < 0 || a->blocks[i].size < a->blocks[best].size)) best = i;
    if (best >= 0) {
        *offset = a->blocks[best].offset;
        a->blocks[best].offset += size;
        a->blocks[best].size -= size;
        if (a->blocks[best].size == 0) a->blocks[best] = a->blocks[--a->n];
        return TP_OK;
    }
    /* grow at the top, merging a free block that ends there */
    for (int i = 0; i < a->n; i++)
        if (a->blocks[i].offset + a->blocks[i].size == a->top) {
            *offset = a->blocks[i].offset;
            a->top = a->blocks[i].offset + size;
            a->blocks[i] = a->blocks[--a->n];
            return TP_OK;
        }
    *offset = a->top;
    a->top += size;
    return TP_OK;
}

static tp_status arena_give(arena_alloc *a, size_t offset, size_t size) {
    size = align_up(size ? size : 1);
    /* merged with the free blocks just before and after it (free blocks are
     * never adjacent, so at most one of each) */
    for (int i = 0; i < a->n;) {
        if (a->blocks[i].offset + a->blocks[i].size == offset) {
            offset = a->blocks[i].offset;
            size += a->blocks[i].size;
        } else if (offset + size == a->blocks[i].offset) {
            size += a->blocks[i].size;
        } else {
            i++;
            continue;
        }
        a->blocks[i] = a->blocks[--a->n];
        i = 0;
    }
    TP_TRY(tp__grow((void **)&a->blocks, &a->cap, a->n, sizeof *a->blocks));
    a->blocks[a->n++] = (free_block){offset, size};
    return TP_OK;
}

/* Does step s read slot id through a view in another input than in[k]?
 * An in-place output over id would then overwrite bytes the view still
 * reads elsewhere (x + x.t(), x * x[0]). The slot itself again, as in
 * x * x, is read at the bytes written over it. */
static bool reads_through_view(const tp_plan *plan, const plan_step *s, int k, int id) {
    for (int i = 0; i < s->n_in; i++) {
        const int r = s->in[i];
        if (i != k && r >= 0 && plan->slots[r].kind == SLOT_VIEW && plan->slots[r].root == id) return true;
    }
    return false;
}

static tp_status plan_memory(tp_plan *plan) {
    arena_alloc a = {0};
    tp_status st = TP_OK;
    size_t ns = (size_t)(plan->n_slots ? plan->n_slots : 1);
    bool *held = tp_calloc(ns, sizeof *held); /* has a block now */
    TP_CHECK(held != NULL, TP_ERR_NOMEM, "out of memory planning memory");
    for (int j = 0; j < plan->n_steps && st == TP_OK; j++) {
        plan_step *s = &plan->steps[j];
        if (s->kind == STEP_VIEW) continue;
        for (int o = 0; s->kind != STEP_FUSED && o < s->n_out && st == TP_OK; o++) {
            int id = s->out[o];
            plan_slot *os = &plan->slots[id];
            if (os->kind != SLOT_ARENA || os->def != j || held[id]) continue;
            if (os->last < j) os->last = j;
            /* an elementwise output may take over its dying input's block */
            int ii = s->op_plan.inplace_in;
            if (o == 0 && s->kind == STEP_FAST && s->op_plan.inplace_ok && ii >= 0 && ii < s->n_in && s->in[ii] >= 0) {
                int iid = s->in[ii];
                plan_slot *is = &plan->slots[iid];
                if (is->kind == SLOT_ARENA && is->last == j && held[iid] && is->nbytes == os->nbytes &&
                    !reads_through_view(plan, s, ii, iid)) {
                    os->offset = is->offset;
                    held[iid] = false; /* the block now belongs to the output */
                    held[id] = true;
                    plan->n_in_place++;
                    continue;
                }
            }
            size_t off;
            st = arena_take(&a, os->nbytes, &off);
            os->offset = (int64_t)off;
            held[id] = true;
        }
        /* release what dies here: inputs (and their roots) and unused outputs */
        for (int k = 0; k < s->n_in + s->n_out && st == TP_OK; k++) {
            int id = k < s->n_in ? s->in[k] : s->out[k - s->n_in];
            if (id < 0) continue;
            if (plan->slots[id].kind == SLOT_VIEW) id = plan->slots[id].root;
            plan_slot *ps = &plan->slots[id];
            if (ps->kind == SLOT_ARENA && ps->last <= j && held[id]) {
                held[id] = false;
                st = arena_give(&a, (size_t)ps->offset, ps->nbytes);
            }
        }
    }
    tp_free(a.blocks);
    tp_free(held);
    plan->workspace_offset = align_up(a.top);
    plan->arena_bytes = plan->workspace_offset + align_up(plan->workspace_bytes);
    return st;
}

/* Do the tensors a plan is built for have the dtypes and ranks (*kinds)
 * and also the sizes (*same) that p's graph recorded in its meta (each
 * placeholder's: the user input in flat, or the state it names; each
 * get_attr's)? Fails only when out of memory. The plan-time rewrites
 * trust the recorded meta: attention, silu and gelu its dtypes and ranks
 * (softmax's dim is the last at the recorded rank, the float32 gates),
 * row selections its sizes too (a select of index -1 becomes a slice at
 * the recorded last row, a broadcast dim is told by its size 1). A
 * program without examples or dim rules may be called on others: plans
 * are built per input-shape class, and only those of the recorded kinds
 * (sizes) are rewritten. */
static tp_status meta_recorded(const tp_program *p, const tp_value *flat, int64_t n_flat, bool *kinds, bool *same) {
    *kinds = false;
    *same = false;
    bool sizes = true;
    int64_t ph = 0;
    for (const tp_node *n = p->graph->first; n; n = n->next) {
        if (n->kind != TP_NODE_PLACEHOLDER && n->kind != TP_NODE_GET_ATTR) continue;
        tp_value v = tp_value_none();
        const tp_tensor *t = NULL;
        if (n->kind == TP_NODE_GET_ATTR) {
            const tp_status st = tp__program_resolve_attr((void *)p, n->target, &v);
            if (st == TP_ERR_NOMEM) return st;
            if (st != TP_OK) {
                tp_clear_error();
                return TP_OK;
            }
            if (v.kind == TP_VAL_TENSOR) t = v.u.tensor;
        } else {
            const int k = tp_signature_find_input(p->signature, n->name);
            const tp_input_spec *s = k >= 0 ? tp_signature_input(p->signature, k) : NULL;
            const int64_t index = ph++;
            if (!s || index >= n_flat) return TP_OK;
            if (s->kind == TP_INPUT_CUSTOM_OBJ || s->kind == TP_INPUT_TOKEN) continue;
            if (s->kind == TP_INPUT_USER_INPUT) {
                if (flat[index].kind == TP_VAL_TENSOR) t = flat[index].u.tensor;
            } else {
                tp_tensor *st = NULL;
                if (tp_module_get_state(p->state, s->target, &st, NULL, NULL) != TP_OK) {
                    tp_clear_error();
                    return TP_OK;
                }
                t = st;
            }
        }
        bool ok = (t != NULL) == (n->meta_val.kind == TP_VAL_TENSOR);
        if (ok && t) {
            const tp_tensor *m = n->meta_val.u.tensor;
            ok = m->ndim == t->ndim && m->dtype == t->dtype;
            if (ok && memcmp(m->sizes, t->sizes, (size_t)t->ndim * sizeof *t->sizes) != 0) sizes = false;
        }
        tp_value_clear(&v);
        if (!ok) return TP_OK;
    }
    *kinds = true;
    *same = sizes;
    return TP_OK;
}

/* Build a plan for program p and flat placeholder values. */
static tp_status build_plan(tp_program *p, const tp_value *flat, int64_t n_flat, int level, int threads,
                            tp_plan **out) {
    /* plan-time rewrites run on a copy of the graph (plan_rewrite.c) */
    const tp_graph *g = p->graph;
    tp_graph *copy = NULL;
    if (level >= TP_CPU_SCALAR) {
        int n_attention = 0, n_silu = 0, n_gelu = 0, n_rows = 0;
        bool kinds = false, sizes = false;
        tp_status rst = meta_recorded(p, flat, n_flat, &kinds, &sizes);
        if (rst == TP_OK && kinds) rst = tp_graph_copy(p->graph, &copy);
        if (rst == TP_OK && kinds) rst = tp__rewrite_attention(p, copy, &n_attention);
        if (rst == TP_OK && kinds) rst = tp__rewrite_silu(copy, &n_silu);
        if (rst == TP_OK && kinds) rst = tp__rewrite_gelu(p, copy, &n_gelu);
        if (rst == TP_OK && sizes) rst = tp__rewrite_row_select(p, copy, &n_rows);
        if (rst != TP_OK || n_attention + n_silu + n_gelu + n_rows == 0) {
            tp_graph_free(copy);
            copy = NULL;
            /* out of memory fails the plan; any other problem only skips the rewrites */
            if (rst == TP_ERR_NOMEM) return rst;
            tp_clear_error();
        }
        if (copy) g = copy;
    }
    tp_plan *plan = tp_calloc(1, sizeof *plan);
    if (!plan) {
        tp_graph_free(copy);
        return tp_error(TP_ERR_NOMEM, "out of memory planning a program");
    }
    atomic_init(&plan->refcount, 1);
    plan->version = atomic_load(&p->engine.version);
    plan->graph_version = p->graph->version;
    plan->cpu_level = level;
    plan->n_flat = (int)n_flat;
    builder b = {.p = p, .plan = plan, .g = g, .level = level, .threads = threads};
    size_t nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    b.pv = tp_calloc(nn, sizeof *b.pv);
    b.mutable_node = tp_calloc(nn, sizeof *b.mutable_node);
    plan->key = tp_calloc((size_t)(n_flat ? n_flat : 1), sizeof *plan->key);
    tp_status st = tp__graph_positions(g, &b.pos_of_uid);
    if (st == TP_OK && (!b.pv || !b.mutable_node || !plan->key)) st = tp_error(TP_ERR_NOMEM, "out of memory planning");
    if (st == TP_OK) mark_mutable(&b);
    int64_t pos = 0, ph = 0;
    const tp_node *out_node = NULL;
    for (const tp_node *n = g->first; n && st == TP_OK; n = n->next, pos++) {
        switch (n->kind) {
        case TP_NODE_PLACEHOLDER:
            if (ph >= n_flat) st = tp_error(TP_ERR_INVALID_ARG, "expected %" PRId64 " inputs", ph + 1);
            else st = plan_placeholder(&b, n, pos, flat, ph);
            ph++;
            break;
        case TP_NODE_GET_ATTR: {
            tp_value v = tp_value_none();
            st = tp__program_resolve_attr(p, n->target, &v);
            if (st == TP_OK && v.kind == TP_VAL_TENSOR) {
                int id;
                st = new_slot(&b, SLOT_CONST, v.u.tensor, &id);
                if (st == TP_OK) {
                    plan->slots[id].constant = tp_tensor_retain(v.u.tensor);
                    b.mut[id] = b.mutable_node[pos];
                }
            }
            b.pv[pos] = v;
            break;
        }
        case TP_NODE_CALL_FUNCTION:
        case TP_NODE_CALL_METHOD: st = plan_call(&b, n, pos); break;
        case TP_NODE_OUTPUT: out_node = n; break;
        default: st = tp_error(TP_ERR_INTERNAL, "invalid node kind"); break;
        }
        if (st != TP_OK && st != TP_ERR_UNSUPPORTED) tp__node_error_context(n->name, n->target);
    }
    if (st == TP_OK && ph != n_flat)
        st = tp_error(TP_ERR_INVALID_ARG, "expected %" PRId64 " inputs, got %" PRId64, ph, n_flat);
    if (st == TP_OK && !out_node) st = TP_ERR_UNSUPPORTED;
    if (st == TP_OK) st = plan_outputs(&b, out_node);
    if (st == TP_OK && level >= TP_CPU_SCALAR) st = fuse_steps(plan);
    if (st == TP_OK) st = tp__plan_onednn(plan, level, threads);
    if (st == TP_OK) st = plan_memory(plan);
    for (size_t i = 0; b.pv && i < nn; i++) tp_value_clear(&b.pv[i]);
    tp_free(b.pv);
    tp_free(b.probe);
    for (int i = 0; i < b.n_extra; i++) tp_tensor_free(b.extra[i]);
    tp_free(b.extra);
    tp_free(b.mutable_node);
    tp_free(b.pos_of_uid);
    tp_free(b.mut);
    tp_graph_free(copy);
    if (st != TP_OK) {
        tp__plan_release(plan);
        return st;
    }
    *out = plan;
    return TP_OK;
}

/* ---- eager calls through the fast variants -------------------------------- */

/* This thread's cap on eager calls (tp__eager_level_swap). */
static _Thread_local tp_cpu_level t_eager_level = TP_CPU_AUTO;

tp_cpu_level tp__eager_level_swap(tp_cpu_level level) {
    tp_cpu_level prev = t_eager_level;
    t_eager_level = level;
    return prev;
}

tp_status tp__eager_fast_call(tp_op op, const tp_value *bound, int n_bound, tp_value *result, bool *handled) {
    *handled = false;
    int level = tp__cpu_level_resolve(t_eager_level);
    int nv;
    if (level < TP_CPU_SCALAR || !tp__op_variants(op, &nv) || (tp_op_flags(op) & (TP_OPF_VIEW | TP_OPF_INPLACE)))
        return TP_OK;
    leaf_ref refs[64];
    int n_leaves = 0;
    if (collect_leaves(bound, n_bound, refs, &n_leaves, 64) != TP_OK || n_leaves > 64) return TP_OK;
    tp_tensor *io[64 + 16];
    bool is_const[64] = {false};
    for (int k = 0; k < n_leaves; k++) {
        io[k] = leaf_value((tp_value *)bound, refs[k])->u.tensor;
        if (!io[k]->storage) return TP_OK;
    }
    int n_out = 0;
    if (result->kind == TP_VAL_TENSOR) io[n_leaves + n_out++] = result->u.tensor;
    else if (tp_value_is_seq(result) && result->u.seq.n <= 16)
        for (int64_t i = 0; i < result->u.seq.n; i++) {
            if (result->u.seq.items[i].kind != TP_VAL_TENSOR) return TP_OK;
            io[n_leaves + n_out++] = result->u.seq.items[i].u.tensor;
        }
    else return TP_OK;
    builder b = {.level = level, .threads = 1};
    plan_step s;
    memset(&s, 0, sizeof s);
    s.op = op;
    bool taken = false;
    TP_TRY(try_variants(&b, &s, bound, result, is_const, n_leaves, &taken));
    if (!taken) return TP_OK;
    void *ws = s.op_plan.workspace ? tp_malloc(s.op_plan.workspace + ARENA_ALIGN) : NULL;
    tp_status st = TP_OK;
    if (s.op_plan.workspace && !ws) st = tp_error(TP_ERR_NOMEM, "out of memory for a kernel workspace");
    void *ctx = NULL; /* per-run state, made for this one call */
    if (st == TP_OK && s.op_plan.ctx_new) st = s.op_plan.ctx_new(&s.op_plan, &ctx);
    if (st == TP_OK) {
        tp_exec ex = {.ith = 0, .nth = 1,
                      .workspace = ws ? (void *)(((uintptr_t)ws + ARENA_ALIGN - 1) & ~(uintptr_t)(ARENA_ALIGN - 1)) : NULL,
                      .ctx = ctx};
        st = s.op_plan.run(&s.op_plan, io, io + n_leaves, &ex);
    }
    if (ctx) s.op_plan.ctx_free(ctx);
    tp_free(ws);
    if (s.op_plan.free_data) s.op_plan.free_data(s.op_plan.data);
    *handled = true;
    return st;
}

/* ---- per-program state -------------------------------------------------- */

void tp__engine_init(tp_engine_state *e) {
    pthread_mutex_init(&e->lock, NULL);
    pthread_mutex_init(&e->call_lock, NULL);
    atomic_init(&e->version, 1);
    e->n_plans = 0;
    e->n_idle = 0;
}

static void run_destroy(tp_run *r);

void tp__engine_destroy(tp_engine_state *e) {
    for (int i = 0; i < e->n_plans; i++) tp__plan_release(e->plans[i]);
    for (int i = 0; i < e->n_idle; i++) run_destroy(e->idle[i]);
    e->n_plans = e->n_idle = 0;
    pthread_mutex_destroy(&e->lock);
    pthread_mutex_destroy(&e->call_lock);
}

void tp__engine_invalidate(tp_program *p) {
    tp_engine_state *e = &p->engine;
    atomic_fetch_add(&e->version, 1);
    pthread_mutex_lock(&e->lock);
    for (int i = 0; i < e->n_plans; i++) tp__plan_release(e->plans[i]);
    e->n_plans = 0;
    pthread_mutex_unlock(&e->lock);
}

void tp_program_invalidate_plans(tp_program *p) {
    if (p) tp__engine_invalidate(p);
}

/* ---- run contexts ------------------------------------------------------- */

struct tp_run {
    tp_program *program; /* one reference, or borrowed when pooled */
    bool pooled;
    tp_run_options opt;
    tp_plan *plan;       /* one reference */
    void *arena_base;    /* owned allocation */
    char *arena;         /* 64-byte aligned */
    size_t arena_cap;
    tp_storage arena_storage;
    tp_tensor *emb;      /* per slot: the run's tensor struct (ARENA, VIEW) */
    tp_tensor **t;       /* per slot: the tensor a step sees */
    tp_tensor **owned_out; /* per user output: tensors of the run (tp_run_execute without outputs) */
    tp_value *largs;     /* per step: its argument copies (legacy steps) */
    tp_value *lout;      /* per step: its output value (legacy steps) */
    int64_t *largs_at;   /* per step: index into largs */
    tp_tensor **io;      /* max_io pointers */
    void **ctx;          /* per step: tp_op_plan.ctx_new state, or NULL */
    int64_t calls, plans_built;
    bool have_outputs;
    /* Reference kernels' allocations (alloc.c): served from this block once
     * a call has shown how much one step asks for (scratch_base owned). */
    tp__scratch scratch;
    void *scratch_base;
    /* Work claims of a parallel step (threadpool.h), one cache line per
     * thread, zeroed before each: claims_base owned, claims 64-byte aligned. */
    void *claims_base;
    tp_claim *claims;
};

/* Release what a run context holds for its plan. */
static void run_unbind(tp_run *r) {
    tp_plan *plan = r->plan;
    if (!plan) return;
    for (int j = 0; r->ctx && j < plan->n_steps; j++)
        if (r->ctx[j]) plan->steps[j].op_plan.ctx_free(r->ctx[j]);
    tp_free(r->ctx);
    r->ctx = NULL;
    for (int j = 0; r->largs && r->lout && r->largs_at && j < plan->n_steps; j++) {
        const plan_step *s = &plan->steps[j];
        /* no argument copies yet when binding failed before making them */
        if (s->kind != STEP_LEGACY || !r->largs_at) continue;
        tp_value *args = &r->largs[r->largs_at[j]];
        for (int k = 0; k < s->n_in; k++) {
            /* borrowed leaves are dropped unfreed; a list argument not yet copied (run_bind failed) has none */
            leaf_ref lr = s->leaves[k];
            if (lr.item < 0 || (tp_value_is_seq(&args[lr.arg]) && lr.item < args[lr.arg].u.seq.n))
                *leaf_value(args, lr) = tp_value_none();
        }
        for (int a = 0; a < s->n_args; a++) tp_value_clear(&args[a]);
        tp_value *ov = &r->lout[j];
        if (tp_value_is_seq(ov))
            for (int64_t i = 0; i < ov->u.seq.n; i++) ov->u.seq.items[i] = tp_value_none();
        else *ov = tp_value_none();
        tp_value_clear(ov);
    }
    for (int i = 0; r->owned_out && i < plan->n_user_out; i++) tp_tensor_free(r->owned_out[i]);
    tp_free(r->owned_out);
    tp_free(r->largs);
    tp_free(r->lout);
    tp_free(r->largs_at);
    tp_free(r->emb);
    tp_free(r->t);
    tp_free(r->io);
    r->owned_out = NULL;
    r->largs = r->lout = NULL;
    r->largs_at = NULL;
    r->emb = NULL;
    r->t = NULL;
    r->io = NULL;
    r->have_outputs = false;
    tp__plan_release(plan);
    r->plan = NULL;
}

/* Adopt plan (takes the reference): arena, tensors, argument copies. */
static tp_status run_bind(tp_run *r, tp_plan *plan) {
    run_unbind(r);
    r->plan = plan;
    tp_status st = TP_OK;
    /* a plan without activations still gets an (empty) arena: kernels and
     * views compute offsets from its base, and NULL + 0 is undefined */
    if (!r->arena_base || plan->arena_bytes > r->arena_cap) {
        tp_free(r->arena_base);
        r->arena_cap = 0;
        void *arena = NULL;
        r->arena_base = tp__malloc_stream(plan->arena_bytes, &arena);
        if (!r->arena_base) {
            run_unbind(r);
            return tp_error(TP_ERR_NOMEM, "out of memory allocating a %zu-byte arena", plan->arena_bytes);
        }
        r->arena_cap = plan->arena_bytes;
        r->arena = arena;
    }
    atomic_init(&r->arena_storage.refcount, HUGE_REFS);
    r->arena_storage.data = r->arena;
    r->arena_storage.nbytes = r->arena_cap;
    r->arena_storage.alloc_base = NULL;
    r->arena_storage.release = NULL;
    size_t ns = (size_t)(plan->n_slots ? plan->n_slots : 1), nst = (size_t)(plan->n_steps ? plan->n_steps : 1);
    r->emb = tp_calloc(ns, sizeof *r->emb);
    r->t = tp_calloc(ns, sizeof *r->t);
    r->io = tp_calloc((size_t)(plan->max_io ? plan->max_io : 1), sizeof *r->io);
    r->owned_out = tp_calloc((size_t)(plan->n_user_out ? plan->n_user_out : 1), sizeof *r->owned_out);
    r->lout = tp_calloc(nst, sizeof *r->lout);
    r->largs_at = tp_calloc(nst, sizeof *r->largs_at);
    int64_t n_largs = 0;
    for (int j = 0; r->largs_at && j < plan->n_steps; j++) {
        r->largs_at[j] = n_largs;
        if (plan->steps[j].kind == STEP_LEGACY) n_largs += plan->steps[j].n_args;
    }
    r->largs = tp_calloc((size_t)(n_largs ? n_largs : 1), sizeof *r->largs);
    r->ctx = tp_calloc(nst, sizeof *r->ctx);
    if (!r->emb || !r->t || !r->io || !r->owned_out || !r->lout || !r->largs_at || !r->largs || !r->ctx) {
        run_unbind(r);
        return tp_error(TP_ERR_NOMEM, "out of memory preparing a run");
    }
    for (int i = 0; i < plan->n_slots; i++) {
        const plan_slot *s = &plan->slots[i];
        tp_tensor *e = &r->emb[i];
        atomic_init(&e->refcount, HUGE_REFS);
        e->dtype = s->dtype;
        e->ndim = s->ndim;
        memcpy(e->sizes, s->sizes, sizeof e->sizes);
        if (s->kind == SLOT_ARENA || s->kind == SLOT_OUTPUT) tp__contiguous_strides(s->ndim, s->sizes, e->strides);
        else memcpy(e->strides, s->strides, sizeof e->strides);
        if (s->kind == SLOT_ARENA) {
            e->storage = &r->arena_storage;
            e->offset = s->offset / (int64_t)tp_dtype_size(s->dtype);
            r->t[i] = e;
        } else if (s->kind == SLOT_CONST) {
            r->t[i] = s->constant;
        } else if (s->kind == SLOT_VIEW) {
            e->storage = &r->arena_storage; /* re-pointed at each call */
            r->t[i] = e;
        }
    }
    for (int j = 0; j < plan->n_steps && st == TP_OK; j++) {
        const plan_step *s = &plan->steps[j];
        if (s->kind == STEP_FAST && s->op_plan.ctx_new) {
            st = s->op_plan.ctx_new(&s->op_plan, &r->ctx[j]);
            if (st != TP_OK) tp__node_error_context(s->name, s->target);
            continue;
        }
        /* no argument copies yet when binding failed before making them */
        if (s->kind != STEP_LEGACY || !r->largs_at) continue;
        tp_value *args = &r->largs[r->largs_at[j]];
        for (int a = 0; a < s->n_args && st == TP_OK; a++) st = tp_value_copy(&s->args[a], &args[a]);
        if (st == TP_OK && (s->out_kind == 1 || s->out_kind == 2))
            st = s->out_kind == 1 ? tp_value_tuple(s->n_out, &r->lout[j]) : tp_value_list(s->n_out, &r->lout[j]);
    }
    if (st != TP_OK) run_unbind(r);
    return st;
}

static tp_status run_create(tp_program *p, const tp_run_options *opt, bool pooled, tp_run **out) {
    tp_run *r = tp_calloc(1, sizeof *r);
    TP_CHECK(r != NULL, TP_ERR_NOMEM, "out of memory creating a run context");
    void *claims = NULL;
    r->claims_base = tp__malloc_stream((size_t)MAX_RUN_THREADS * sizeof(tp_claim), &claims);
    if (!r->claims_base) {
        tp_free(r);
        return tp_error(TP_ERR_NOMEM, "out of memory creating a run context");
    }
    r->claims = claims;
    tp_run_options_init(&r->opt);
    if (opt) {
        size_t n = opt->struct_size && opt->struct_size < sizeof r->opt ? opt->struct_size : sizeof r->opt;
        memcpy(&r->opt, opt, n);
        r->opt.struct_size = sizeof r->opt;
    }
    r->pooled = pooled;
    r->program = pooled ? p : tp_program_retain(p);
    *out = r;
    return TP_OK;
}

tp_status tp_run_new(tp_program *p, const tp_run_options *opt, tp_run **out) {
    TP_CHECK(p != NULL && out != NULL, TP_ERR_INVALID_ARG, "tp_run_new: program and out must not be NULL");
    return run_create(p, opt, false, out);
}

static void run_destroy(tp_run *r) {
    run_unbind(r);
    tp_free(r->arena_base);
    tp_free(r->scratch_base);
    tp_free(r->claims_base);
    tp_free(r);
}

void tp_run_free(tp_run *r) {
    if (!r) return;
    tp_program *p = r->pooled ? NULL : r->program;
    run_destroy(r);
    tp_program_free(p);
}

tp_program *tp_run_program(const tp_run *r) { return r ? r->program : NULL; }
tp_cpu_level tp__run_cpu_level(const tp_run *r) { return r ? r->opt.cpu_level : TP_CPU_AUTO; }
void tp_run_set_num_threads(tp_run *r, int n) {
    if (r) r->opt.num_threads = n < 0 ? 0 : n;
}

static int run_threads(const tp_run *r) {
    int n = r->opt.num_threads > 0 ? r->opt.num_threads : tp_get_num_threads();
    return n > MAX_RUN_THREADS ? MAX_RUN_THREADS : n;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Send a message to r's log callback (if set and level is wanted). */
static void run_log(const tp_run *r, tp_log_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void run_log(const tp_run *r, tp_log_level level, const char *fmt, ...) {
    if (!r->opt.log || level < r->opt.log_level) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->opt.log(r->opt.log_user, level, msg);
}

static void log_new_plan(const tp_run *r, const tp_plan *plan, double ms, int cached) {
    if (!r->opt.log) return;
    run_log(r, TP_LOG_INFO,
            "built a plan in %.2f ms: %d steps (%d fast, %d reference, %d fused, %d in place), arena %zu bytes, packed weights "
            "%zu bytes, cpu level %s; %d of %d plans cached",
            ms, plan->n_steps, (int)plan->n_fast, (int)plan->n_reference, (int)plan->n_fused, (int)plan->n_in_place,
            (size_t)plan->arena_bytes,
            (size_t)plan->packed_bytes, tp_cpu_level_name((tp_cpu_level)plan->cpu_level), cached, TP_PLAN_CACHE);
    for (int j = 0; j < plan->n_steps; j++)
        if (plan->steps[j].kind == STEP_LEGACY)
            run_log(r, TP_LOG_DEBUG, "node '%s' (%s) runs the reference kernel: no fast variant took it",
                    plan->steps[j].name, tp_op_name(plan->steps[j].op));
}

/* Find or build the plan for these flat inputs; bind it to r. *built tells
 * whether it is new (the caller checked the inputs before). */
static tp_status run_select_plan(tp_run *r, const tp_value *flat, int64_t n_flat) {
    tp_program *p = r->program;
    int level = tp__cpu_level_resolve(r->opt.cpu_level);
    if (r->plan && plan_current(r->plan, p, level) && plan_matches(r->plan, flat)) return TP_OK;
    tp_plan *found = NULL;
    tp_engine_state *e = &p->engine;
    pthread_mutex_lock(&e->lock);
    for (int i = 0; i < e->n_plans && !found; i++) {
        tp_plan *c = e->plans[i];
        if (plan_current(c, p, level) && plan_matches(c, flat)) found = plan_retain(c);
    }
    pthread_mutex_unlock(&e->lock);
    if (!found) {
        /* prepared for every core (no oversubscription beyond that); each call uses its own count */
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        int cap = ncpu < 1 ? 1 : ncpu > 256 ? 256 : (int)ncpu;
        double t0 = r->opt.log ? now_ms() : 0;
        tp_status st = build_plan(p, flat, n_flat, level, cap, &found);
        if (st == TP_ERR_UNSUPPORTED)
            run_log(r, TP_LOG_WARN, "the program could not be planned (%s): it is interpreted", tp_last_error());
        TP_TRY(st);
        r->plans_built++;
        bool evicted = false;
        int cached = 0;
        pthread_mutex_lock(&e->lock);
        if (plan_current(found, p, level)) {
            if (e->n_plans == TP_PLAN_CACHE) { /* evict the oldest */
                tp__plan_release(e->plans[0]);
                memmove(e->plans, e->plans + 1, (size_t)(TP_PLAN_CACHE - 1) * sizeof *e->plans);
                e->n_plans--;
                evicted = true;
            }
            e->plans[e->n_plans++] = plan_retain(found);
        }
        cached = e->n_plans;
        pthread_mutex_unlock(&e->lock);
        if (evicted)
            run_log(r, TP_LOG_WARN,
                    "plan cache full (%d input-shape classes): evicted the oldest plan; calls cycling through more "
                    "shapes than that plan again each time",
                    TP_PLAN_CACHE);
        log_new_plan(r, found, r->opt.log ? now_ms() - t0 : 0, cached);
    }
    return run_bind(r, found);
}

typedef struct fast_task {
    const plan_step *s;
    tp_tensor *const *in;
    tp_tensor *const *out;
    void *workspace;
    void *step_ctx;
    tp_claim *claims; /* nth zeroed claims (tp_exec.claims) */
    bool timed;       /* profiling: each thread notes when it finished */
    double done_ms[MAX_RUN_THREADS];
    tp_status status[MAX_RUN_THREADS];
    /* The error message of the lowest failing pool worker (ith >= 1,
     * err_ith; nth when none; cut to 1 KiB): messages are thread-local,
     * and the caller (ith 0) reports the first failing thread's. */
    atomic_flag err_lock;
    int err_ith;
    char err[1024];
} fast_task;

static void fast_worker(void *ctx, int ith, int nth) {
    fast_task *t = ctx;
    tp_exec ex = {.ith = ith, .nth = nth, .workspace = t->workspace, .ctx = t->step_ctx, .claims = t->claims};
    t->status[ith] = t->s->op_plan.run(&t->s->op_plan, t->in, t->out, &ex);
    if (t->timed) t->done_ms[ith] = now_ms();
    if (t->status[ith] != TP_OK && ith > 0) {
        while (atomic_flag_test_and_set_explicit(&t->err_lock, memory_order_acquire)) {
        }
        if (ith < t->err_ith) {
            t->err_ith = ith;
            snprintf(t->err, sizeof t->err, "%s", tp_last_error());
        }
        atomic_flag_clear_explicit(&t->err_lock, memory_order_release);
    }
}


/* A contiguous float32 <-> bfloat16 / float16 conversion (a `to` between
 * them): elements [lo, hi) of it through half.h's vector loops, the bits
 * the generic copy gives. Returns false for any other copy. */
static bool convert_range(tp_tensor *dst, const tp_tensor *src, int64_t lo, int64_t hi) {
    if (!tp_tensor_is_contiguous(src)) return false;
    const tp_cpu_level level = tp_cpu_level_supported();
    if (src->dtype == TP_FLOAT32 && tp__half_kind(dst->dtype, level) >= 0) {
        if (lo < hi)
            tp__half_round((const float *)tp__tensor_base(src) + lo, hi - lo, tp__half_kind(dst->dtype, level),
                           (uint16_t *)tp__tensor_base(dst) + lo);
        return true;
    }
    if (dst->dtype == TP_FLOAT32 && tp__half_kind(src->dtype, level) >= 0) {
        if (lo < hi)
            tp__half_widen((const uint16_t *)tp__tensor_base(src) + lo, hi - lo, tp__half_kind(src->dtype, level),
                           (float *)tp__tensor_base(dst) + lo);
        return true;
    }
    return false;
}

/* Copy src's elements in C order into dst (contiguous, same element count,
 * any dtypes; a reshape copy has another shape). Slots live at the same time
 * never overlap, so no temporary is needed and nothing is allocated. */
static void copy_into(tp_tensor *dst, const tp_tensor *src) {
    if (dst->dtype == src->dtype && tp_tensor_is_contiguous(src)) {
        size_t n = (size_t)tp_tensor_numel(dst) * tp_dtype_size(dst->dtype);
        if (n) memcpy(tp__tensor_base(dst), tp__tensor_base(src), n);
        return;
    }
    if (convert_range(dst, src, 0, tp_tensor_numel(src))) return;
    tp_tensor view = *dst; /* dst's memory seen with src's shape */
    view.ndim = src->ndim;
    memcpy(view.sizes, src->sizes, sizeof view.sizes);
    tp__contiguous_strides(src->ndim, src->sizes, view.strides);
    tp__tensor_copy_disjoint(&view, src);
}

/* A copy step split among threads: each takes a slab of the first dim of
 * src's shape with at least nth entries (dst seen with src's shape, as in
 * copy_into), so the slabs are disjoint in both. */
typedef struct copy_task {
    tp_tensor *dst;
    const tp_tensor *src;
    int dim;
} copy_task;

static void copy_worker(void *ctx, int ith, int nth) {
    const copy_task *t = ctx;
    /* layout copies, field by field: the refcounts are not ours to read */
    tp_tensor part = {.dtype = t->src->dtype, .ndim = t->src->ndim, .offset = t->src->offset,
                      .storage = t->src->storage};
    memcpy(part.sizes, t->src->sizes, sizeof part.sizes);
    memcpy(part.strides, t->src->strides, sizeof part.strides);
    tp_tensor view = {.dtype = t->dst->dtype, .ndim = part.ndim, .offset = t->dst->offset,
                      .storage = t->dst->storage};
    memcpy(view.sizes, part.sizes, sizeof view.sizes);
    tp__contiguous_strides(part.ndim, part.sizes, view.strides);
    const int64_t n = part.sizes[t->dim], lo = n * ith / nth, hi = n * (ith + 1) / nth;
    if (lo >= hi) return;
    view.offset += lo * view.strides[t->dim];
    part.offset += lo * part.strides[t->dim];
    view.sizes[t->dim] = part.sizes[t->dim] = hi - lo;
    tp__tensor_copy_disjoint(&view, &part);
}

static void convert_worker(void *ctx, int ith, int nth) {
    const copy_task *t = ctx;
    const int64_t n = tp_tensor_numel(t->src);
    convert_range(t->dst, t->src, n * ith / nth, n * (ith + 1) / nth);
}

/* Copies of at least this many bytes run on every thread of the call. */
#define PARALLEL_COPY_BYTES ((size_t)128 << 10)

/* copy_into on up to `threads` threads; returns how many ran it. */
static int copy_step(tp_tensor *dst, const tp_tensor *src, int threads) {
    const size_t bytes = (size_t)tp_tensor_numel(dst) * tp_dtype_size(dst->dtype);
    if (threads > 1 && bytes >= PARALLEL_COPY_BYTES && dst->dtype != src->dtype &&
        convert_range(dst, src, 0, 0)) { /* a float32 <-> 16-bit conversion, cut into ranges */
        copy_task task = {.dst = dst, .src = src};
        tp__parallel(threads, convert_worker, &task);
        return threads;
    }
    int dim = -1;
    for (int d = 0; d < src->ndim && dim < 0; d++)
        if (src->sizes[d] >= threads) dim = d;
    if (threads <= 1 || bytes < PARALLEL_COPY_BYTES || dim < 0 || dst->dtype != src->dtype) {
        copy_into(dst, src);
        return 1;
    }
    copy_task task = {.dst = dst, .src = src, .dim = dim};
    tp__parallel(threads, copy_worker, &task);
    return threads;
}

/* Make r's reference-kernel scratch hold `want` bytes for the next call
 * (this call's steps asked for that much). */
static tp_status scratch_grow(tp_run *r, size_t want) {
    void *aligned = NULL, *base = tp__malloc_stream(want, &aligned);
    TP_CHECK(base != NULL, TP_ERR_NOMEM, "out of memory for reference kernels' scratch (%zu bytes)", want);
    tp_free(r->scratch_base);
    r->scratch_base = base;
    r->scratch.base = aligned;
    r->scratch.size = want;
    return TP_OK;
}

/* Run every step of r's plan; inputs and outputs are already in r->t. */
static tp_status run_steps(tp_run *r) {
    const tp_plan *plan = r->plan;
    int threads = run_threads(r);
    void *workspace = r->arena + plan->workspace_offset;
    tp_status st = TP_OK;
    size_t scratch_want = 0; /* the most one reference step asked for */
    for (int j = 0; j < plan->n_steps && st == TP_OK; j++) {
        const plan_step *s = &plan->steps[j];
        if (r->opt.cancel && (j == 0 || !plan->mutates_state) && r->opt.cancel(r->opt.cancel_user))
            return tp_error(TP_ERR_CANCELLED, "call cancelled before node '%s' (step %d of %d)", s->name, j + 1,
                            plan->n_steps);
        double t0 = r->opt.profile ? now_ms() : 0, spread = 0;
        int used_threads = 1;
        switch (s->kind) {
        case STEP_FUSED: continue;
        case STEP_VIEW: {
            tp_tensor *v = r->t[s->out[0]];
            const tp_tensor *root = r->t[s->in[0]];
            v->storage = root->storage;
            v->offset = root->offset + plan->slots[s->out[0]].offset;
            break;
        }
        case STEP_COPY: used_threads = copy_step(r->t[s->out[0]], r->t[s->in[0]], threads); break;
        case STEP_FAST: {
            tp_tensor **io = r->io;
            for (int k = 0; k < s->n_in; k++) io[k] = s->in[k] >= 0 ? r->t[s->in[k]] : NULL;
            for (int k = 0; k < s->n_out; k++) io[s->n_in + k] = r->t[s->out[k]];
            int nth = s->op_plan.max_threads < threads ? s->op_plan.max_threads : threads;
            used_threads = nth;
            if (nth <= 1) {
                tp_exec ex = {.ith = 0, .nth = 1, .workspace = workspace, .ctx = r->ctx[j]};
                st = s->op_plan.run(&s->op_plan, io, io + s->n_in, &ex);
            } else {
                /* fields set one by one: an initializer would zero status[]
                 * and err[] (2 KiB) on every step, and tp__parallel runs
                 * every ith, so each status is written before it is read */
                fast_task task;
                task.s = s;
                task.in = io;
                task.out = io + s->n_in;
                task.workspace = workspace;
                task.step_ctx = r->ctx[j];
                task.claims = r->claims;
                task.timed = r->opt.profile != NULL;
                for (int i = 0; i < nth; i++) atomic_store_explicit(&r->claims[i].taken, 0, memory_order_relaxed);
                task.err_ith = nth;
                atomic_flag_clear_explicit(&task.err_lock, memory_order_relaxed);
                tp__parallel(nth, fast_worker, &task);
                if (task.timed) {
                    double first = task.done_ms[0], last = first;
                    for (int i = 1; i < nth; i++) {
                        if (task.done_ms[i] < first) first = task.done_ms[i];
                        if (task.done_ms[i] > last) last = task.done_ms[i];
                    }
                    spread = last - first;
                }
                for (int i = 0; i < nth && st == TP_OK; i++) st = task.status[i];
                /* a worker's failure: its message, not the caller's stale one */
                if (st != TP_OK && task.status[0] == TP_OK && task.err_ith < nth) tp_error(st, "%s", task.err);
            }
            break;
        }
        case STEP_LEGACY: {
            tp_value *args = &r->largs[r->largs_at[j]];
            for (int k = 0; k < s->n_in; k++) {
                tp_value *lv = leaf_value(args, s->leaves[k]);
                lv->kind = TP_VAL_TENSOR;
                lv->u.tensor = r->t[s->in[k]];
            }
            tp_value *ov = &r->lout[j];
            if (s->out_kind == 0) {
                ov->kind = TP_VAL_TENSOR;
                ov->u.tensor = r->t[s->out[0]];
            } else if (s->out_kind != 3) {
                for (int k = 0; k < s->n_out; k++) {
                    ov->u.seq.items[k].kind = TP_VAL_TENSOR;
                    ov->u.seq.items[k].u.tensor = r->t[s->out[k]];
                }
            }
            tp_kernel_fn k = tp__op_eager_kernel(s->op, plan->cpu_level == TP_CPU_REFERENCE);
            tp__scratch *outer = tp__scratch_enter(&r->scratch);
            st = k(args, ov);
            tp__scratch_leave(outer);
            if (r->scratch.want > scratch_want) scratch_want = r->scratch.want;
            if (st != TP_OK) tp_error_context("%s", tp_op_name(s->op));
            if (s->out_kind == 3) tp_value_clear(ov); /* the in-place result: a reference to self */
            else if (s->out_kind == 0) *ov = tp_value_none();
            else
                for (int k2 = 0; k2 < s->n_out; k2++) ov->u.seq.items[k2] = tp_value_none();
            for (int k2 = 0; k2 < s->n_in; k2++) *leaf_value(args, s->leaves[k2]) = tp_value_none();
            break;
        }
        }
        if (st != TP_OK) {
            tp__node_error_context(s->name, s->target);
            break;
        }
        if (r->opt.profile) {
            const char *variant = s->kind == STEP_FAST ? s->op_plan.variant : s->kind == STEP_LEGACY ? "reference"
                                  : s->kind == STEP_VIEW                     ? "view"
                                                                             : "copy";
            tp_profile_event ev = {.node = s->name,
                                   .op = s->op == TP_OP_INVALID ? "copy" : tp_op_name(s->op),
                                   .variant = variant,
                                   .ms = now_ms() - t0,
                                   .threads = used_threads,
                                   .spread_ms = spread};
            r->opt.profile(r->opt.profile_user, &ev);
        }
    }
    if (st == TP_OK && scratch_want > r->scratch.size) st = scratch_grow(r, scratch_want);
    if (st != TP_OK) return st;
    for (int i = 0; i < plan->n_mutations && st == TP_OK; i++) {
        const plan_mutation *m = &plan->mutations[i];
        tp_tensor *dst = r->t[m->dst_slot], *src = r->t[m->slot];
        if (tp__written_in_place(src, dst)) continue;
        st = tp_tensor_copy_(dst, src);
        if (st != TP_OK) tp_error_context("applying a mutation");
    }
    r->calls++;
    return st;
}

/* Point INPUT slots at this call's tensors. */
static void bind_inputs(tp_run *r, const tp_value *flat) {
    const tp_plan *plan = r->plan;
    for (int i = 0; i < plan->n_slots; i++)
        if (plan->slots[i].kind == SLOT_INPUT) r->t[i] = flat[plan->slots[i].input].u.tensor;
}

/* ---- program calls ------------------------------------------------------ */

static tp_status take_run(tp_program *p, tp_run **out) {
    tp_engine_state *e = &p->engine;
    tp_run *r = NULL;
    pthread_mutex_lock(&e->lock);
    if (e->n_idle > 0) r = e->idle[--e->n_idle];
    pthread_mutex_unlock(&e->lock);
    if (r) {
        *out = r;
        return TP_OK;
    }
    return run_create(p, NULL, true, out);
}

static void give_run(tp_program *p, tp_run *r) {
    tp_engine_state *e = &p->engine;
    pthread_mutex_lock(&e->lock);
    if (e->n_idle < TP_RUN_POOL) {
        e->idle[e->n_idle++] = r;
        r = NULL;
    }
    pthread_mutex_unlock(&e->lock);
    if (r) run_destroy(r);
}

/* Execute r's plan with fresh output tensors; build the raw tree. */
static tp_status execute_fresh(tp_run *r, const tp_value *flat, tp_value *raw, tp_value *leaves) {
    const tp_plan *plan = r->plan;
    tp_status st = TP_OK;
    bind_inputs(r, flat);
    for (int i = 0; i < plan->n_slots; i++) r->t[i] = plan->slots[i].kind == SLOT_OUTPUT ? NULL : r->t[i];
    for (int i = 0; i < plan->n_slots && st == TP_OK; i++) {
        const plan_slot *s = &plan->slots[i];
        if (s->kind == SLOT_OUTPUT) st = tp_tensor_empty(s->dtype, s->ndim, s->sizes, &r->t[i]);
    }
    if (st == TP_OK) st = run_steps(r);
    tp_value lv = tp_value_none();
    if (st == TP_OK) st = tp_value_copy(&plan->leaf_consts, &lv);
    for (int i = 0; i < plan->n_leaves && st == TP_OK; i++) {
        int id = plan->leaf_slot[i];
        if (id < 0) continue;
        tp_value tv = tp_value_tensor(tp_tensor_retain(r->t[id]));
        st = tp_value_seq_set(&lv, i, &tv);
    }
    for (int i = 0; i < plan->n_slots; i++)
        if (plan->slots[i].kind == SLOT_OUTPUT) {
            tp_tensor_free(r->t[i]);
            r->t[i] = NULL;
        }
    if (st == TP_OK) st = tp_pytree_unflatten(plan->out_spec, lv.u.seq.items, lv.u.seq.n, raw);
    if (st != TP_OK) {
        tp_value_clear(&lv);
        return st;
    }
    *leaves = lv;
    return TP_OK;
}

tp_status tp__engine_call(tp_program *p, tp_run *r, const tp_value *flat, int64_t n_flat, tp_value *raw,
                          tp_value *leaves, bool *unplannable) {
    *raw = tp_value_none();
    *leaves = tp_value_none();
    *unplannable = false;
    bool pooled = r == NULL;
    if (pooled) TP_TRY(take_run(p, &r));
    tp_status st = run_select_plan(r, flat, n_flat);
    if (st == TP_ERR_UNSUPPORTED) *unplannable = true; /* nothing ran: the caller may interpret the graph */
    if (st == TP_OK) {
        bool lock = r->plan->mutates_state;
        if (lock) pthread_mutex_lock(&p->engine.call_lock);
        st = execute_fresh(r, flat, raw, leaves);
        if (lock) pthread_mutex_unlock(&p->engine.call_lock);
    }
    if (pooled) give_run(p, r);
    return st;
}

tp_status tp_run_call(tp_run *r, const tp_value *args, int n_args, const tp_value *kwargs, tp_value *out) {
    TP_CHECK(r != NULL, TP_ERR_INVALID_ARG, "tp_run_call: run context is NULL");
    return tp__program_call_with(r->program, r, args, n_args, kwargs, out);
}

tp_status tp_run_execute(tp_run *r, tp_tensor *const *inputs, int n_inputs, tp_tensor *const *outputs,
                         int n_outputs) {
    TP_CHECK(r != NULL, TP_ERR_INVALID_ARG, "tp_run_execute: run context is NULL");
    tp_program *p = r->program;
    int level = tp__cpu_level_resolve(r->opt.cpu_level);
    tp_plan *plan = r->plan;
    bool hit = plan && plan_current(plan, p, level) && plan->n_key == n_inputs;
    for (int i = 0; hit && i < n_inputs; i++) hit = key_matches_tensor(&plan->key[i], inputs[i]);
    if (!hit) {
        /* a new shape class: full checks, then a plan from flat placeholder values */
        TP_TRY(tp__program_check_tensor_inputs(p, inputs, n_inputs));
        int64_t n_flat = tp_graph_num_placeholders(p->graph);
        tp_value *flat = tp_calloc((size_t)(n_flat ? n_flat : 1), sizeof *flat);
        TP_CHECK(flat != NULL, TP_ERR_NOMEM, "out of memory calling the program");
        int k = 0;
        tp_status st = TP_OK;
        for (int64_t i = 0; i < n_flat && st == TP_OK; i++) {
            const char *name = tp_node_name(tp_graph_placeholder_at(p->graph, i));
            int si = tp_signature_find_input(p->signature, name);
            const tp_input_spec *s = si >= 0 ? tp_signature_input(p->signature, si) : NULL;
            if (s && s->kind == TP_INPUT_USER_INPUT) {
                if (k >= n_inputs) st = tp_error(TP_ERR_INVALID_ARG, "expected more than %d inputs", n_inputs);
                else flat[i] = tp_value_tensor(tp_tensor_retain(inputs[k++]));
            }
        }
        if (st == TP_OK && k != n_inputs) st = tp_error(TP_ERR_INVALID_ARG, "expected %d inputs, got %d", k, n_inputs);
        if (st == TP_OK) st = run_select_plan(r, flat, n_flat);
        for (int64_t i = 0; i < n_flat; i++) tp_value_clear(&flat[i]);
        tp_free(flat);
        TP_TRY(st);
        plan = r->plan;
    }
    /* also on a hit: the plan may have been bound by tp_run_call or by a
     * call that failed here */
    TP_CHECK(plan->all_tensor_io, TP_ERR_UNSUPPORTED,
             "tp_run_execute needs tensor inputs and outputs; use tp_run_call for this program");
    TP_CHECK(outputs == NULL || n_outputs == plan->n_user_out, TP_ERR_INVALID_ARG, "expected %d outputs, got %d",
             plan->n_user_out, n_outputs);
    for (int i = 0, k = 0; i < plan->n_slots; i++) {
        const plan_slot *s = &plan->slots[i];
        if (s->kind == SLOT_INPUT) r->t[i] = inputs[k++];
        else if (s->kind == SLOT_OUTPUT) {
            tp_tensor *o = outputs ? outputs[s->output] : r->owned_out[s->output];
            if (outputs) {
                bool ok = o && o->storage && o->dtype == s->dtype && o->ndim == s->ndim && tp_tensor_is_contiguous(o);
                for (int d = 0; ok && d < s->ndim; d++) ok = o->sizes[d] == s->sizes[d];
                TP_CHECK(ok, TP_ERR_INVALID_ARG, "output %d must be a contiguous %s tensor of shape %s", s->output,
                         tp_dtype_name(s->dtype), tp__shape_str(s->ndim, s->sizes, (char[128]){0}, 128));
            } else if (!o) {
                TP_TRY(tp_tensor_empty(s->dtype, s->ndim, s->sizes, &r->owned_out[s->output]));
                o = r->owned_out[s->output];
            }
            r->t[i] = o;
        }
    }
    /* key order = placeholder order of user inputs = the order of INPUT slots */
    bool lock = plan->mutates_state;
    if (lock) pthread_mutex_lock(&p->engine.call_lock);
    tp_status st = run_steps(r);
    if (lock) pthread_mutex_unlock(&p->engine.call_lock);
    r->have_outputs = st == TP_OK;
    return st;
}

int tp_run_num_outputs(const tp_run *r) { return r && r->plan ? r->plan->n_user_out : 0; }

tp_tensor *tp_run_output(const tp_run *r, int i) {
    if (!r || !r->plan || !r->have_outputs || i < 0 || i >= r->plan->n_user_out) return NULL;
    int leaf = r->plan->user_out_leaf[i];
    int id = r->plan->leaf_slot[leaf];
    return id >= 0 ? r->t[id] : NULL;
}

void tp_run_get_stats(const tp_run *r, tp_run_stats *out) {
    memset(out, 0, sizeof *out);
    if (!r) return;
    out->plans_built = r->plans_built;
    out->calls = r->calls;
    const tp_plan *plan = r->plan;
    if (!plan) return;
    out->arena_bytes = plan->arena_bytes;
    out->workspace_bytes = plan->workspace_bytes;
    out->packed_bytes = plan->packed_bytes;
    out->n_steps = plan->n_steps;
    out->n_fast = plan->n_fast;
    out->n_reference = plan->n_reference;
    out->n_fused = plan->n_fused;
    out->n_in_place = plan->n_in_place;
    out->cpu_level = (tp_cpu_level)plan->cpu_level;
}
