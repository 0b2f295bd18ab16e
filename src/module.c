/*
 * module.c - module trees (see module.h): state entries, children, dotted
 * paths, PyTorch-order iteration, and graph forwards.
 */
#include <string.h>

#include "internal.h"
#include "tpexport/interp.h"
#include "tpexport/module.h"

typedef struct entry {
    char *name;
    tp_state_kind kind;
    bool persistent;
    tp_tensor *tensor;
} entry;

typedef struct child {
    char *name;
    tp_module *module;
} child;

struct tp_module {
    char *type_name;
    entry *entries;
    int n_entries, cap_entries;
    child *children;
    int n_children, cap_children;
    bool training;
    tp_graph *graph;
    tp_value defaults; /* dict or None */
    const void *impl_ops;
    void *impl_data;
    void (*impl_free)(void *);
};

const char *tp_state_kind_name(tp_state_kind kind) {
    switch (kind) {
    case TP_STATE_PARAMETER: return "parameter";
    case TP_STATE_BUFFER: return "buffer";
    case TP_STATE_CONSTANT: return "constant";
    }
    return "?";
}

tp_status tp_module_new(const char *type_name, tp_module **out) {
    tp_module *m = tp_calloc(1, sizeof *m);
    TP_CHECK(m != NULL, TP_ERR_NOMEM, "out of memory allocating a module");
    m->type_name = tp_strdup(type_name ? type_name : "Module");
    if (!m->type_name) {
        tp_free(m);
        return tp_error(TP_ERR_NOMEM, "out of memory allocating a module");
    }
    m->training = true;
    *out = m;
    return TP_OK;
}

void tp_module_free(tp_module *m) {
    if (!m) return;
    for (int i = 0; i < m->n_entries; i++) {
        tp_free(m->entries[i].name);
        tp_tensor_free(m->entries[i].tensor);
    }
    for (int i = 0; i < m->n_children; i++) {
        tp_free(m->children[i].name);
        tp_module_free(m->children[i].module);
    }
    tp_free(m->entries);
    tp_free(m->children);
    tp_free(m->type_name);
    tp_graph_free(m->graph);
    tp_value_clear(&m->defaults);
    if (m->impl_free) m->impl_free(m->impl_data);
    tp_free(m);
}

const char *tp_module_type_name(const tp_module *m) { return m->type_name; }

static entry *find_entry(const tp_module *m, const char *name, size_t len) {
    for (int i = 0; i < m->n_entries; i++)
        if (strlen(m->entries[i].name) == len && strncmp(m->entries[i].name, name, len) == 0) return &m->entries[i];
    return NULL;
}

static tp_module *find_child(const tp_module *m, const char *name, size_t len) {
    for (int i = 0; i < m->n_children; i++)
        if (strlen(m->children[i].name) == len && strncmp(m->children[i].name, name, len) == 0)
            return m->children[i].module;
    return NULL;
}

static tp_status check_simple_name(const char *name) {
    TP_CHECK(name && *name, TP_ERR_INVALID_ARG, "attribute name is empty");
    TP_CHECK(!strchr(name, '.'), TP_ERR_INVALID_ARG, "attribute name '%s' must not contain '.'", name);
    return TP_OK;
}

tp_status tp_module_register(tp_module *m, tp_state_kind kind, const char *name, tp_tensor *t, bool persistent) {
    TP_TRY(check_simple_name(name));
    TP_CHECK(t != NULL, TP_ERR_INVALID_ARG, "tensor for '%s' is NULL", name);
    TP_CHECK((unsigned)kind <= TP_STATE_CONSTANT, TP_ERR_INVALID_ARG, "invalid state kind %d", (int)kind);
    TP_CHECK(!find_entry(m, name, strlen(name)) && !find_child(m, name, strlen(name)), TP_ERR_DUPLICATE,
             "attribute '%s' already exists", name);
    if (m->n_entries == m->cap_entries) {
        int cap = m->cap_entries ? m->cap_entries * 2 : 8;
        entry *e = tp_realloc(m->entries, (size_t)cap * sizeof *e);
        TP_CHECK(e != NULL, TP_ERR_NOMEM, "out of memory registering '%s'", name);
        m->entries = e;
        m->cap_entries = cap;
    }
    char *n = tp_strdup(name);
    TP_CHECK(n != NULL, TP_ERR_NOMEM, "out of memory registering '%s'", name);
    m->entries[m->n_entries++] = (entry){n, kind, kind == TP_STATE_BUFFER ? persistent : kind == TP_STATE_PARAMETER,
                                         tp_tensor_retain(t)};
    return TP_OK;
}

tp_status tp_module_add_child(tp_module *m, const char *name, tp_module *c) {
    tp_status st = check_simple_name(name);
    if (st == TP_OK && (find_entry(m, name, strlen(name)) || find_child(m, name, strlen(name))))
        st = tp_error(TP_ERR_DUPLICATE, "attribute '%s' already exists", name);
    if (st == TP_OK && m->n_children == m->cap_children) {
        int cap = m->cap_children ? m->cap_children * 2 : 4;
        child *cs = tp_realloc(m->children, (size_t)cap * sizeof *cs);
        if (!cs) st = tp_error(TP_ERR_NOMEM, "out of memory adding child '%s'", name);
        else {
            m->children = cs;
            m->cap_children = cap;
        }
    }
    char *n = NULL;
    if (st == TP_OK && !(n = tp_strdup(name))) st = tp_error(TP_ERR_NOMEM, "out of memory adding child '%s'", name);
    if (st != TP_OK) {
        tp_module_free(c);
        return st;
    }
    m->children[m->n_children++] = (child){n, c};
    return TP_OK;
}

tp_module *tp_module_child(const tp_module *m, const char *path) {
    if (!path) return NULL;
    const tp_module *cur = m;
    const char *p = path;
    while (*p && cur) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        cur = find_child(cur, p, len);
        p = dot ? dot + 1 : p + len;
    }
    return (tp_module *)cur;
}

tp_status tp_module_set_state(tp_module *m, const char *target, tp_state_kind kind, tp_tensor *t, bool persistent) {
    TP_CHECK(target && *target, TP_ERR_INVALID_ARG, "state target is empty");
    tp_module *cur = m;
    const char *p = target;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        TP_CHECK(len > 0, TP_ERR_INVALID_ARG, "state target '%s' has an empty component", target);
        if (!dot) break;
        tp_module *next = find_child(cur, p, len);
        if (!next) {
            TP_CHECK(!find_entry(cur, p, len), TP_ERR_DUPLICATE, "'%.*s' in target '%s' is not a module", (int)len, p,
                     target);
            char name[256];
            TP_CHECK(len < sizeof name, TP_ERR_INVALID_ARG, "component too long in '%s'", target);
            memcpy(name, p, len);
            name[len] = '\0';
            tp_module *c;
            TP_TRY(tp_module_new("Module", &c));
            c->training = cur->training;
            TP_TRY(tp_module_add_child(cur, name, c));
            next = c;
        }
        cur = next;
        p = dot + 1;
    }
    entry *e = find_entry(cur, p, strlen(p));
    if (e) {
        TP_CHECK(t != NULL, TP_ERR_INVALID_ARG, "tensor for '%s' is NULL", target);
        tp_tensor_retain(t);
        tp_tensor_free(e->tensor);
        e->tensor = t;
        e->kind = kind;
        e->persistent = kind == TP_STATE_BUFFER ? persistent : kind == TP_STATE_PARAMETER;
        return TP_OK;
    }
    TP_CHECK(!find_child(cur, p, strlen(p)), TP_ERR_DUPLICATE, "'%s' names a module, not a tensor", target);
    return tp_module_register(cur, kind, p, t, persistent);
}

tp_status tp_module_get_state(const tp_module *m, const char *target, tp_tensor **t, tp_state_kind *kind,
                              bool *persistent) {
    TP_CHECK(target && *target, TP_ERR_INVALID_ARG, "state target is empty");
    const tp_module *cur = m;
    const char *p = target;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        if (!dot) {
            entry *e = find_entry(cur, p, len);
            TP_CHECK(e != NULL, TP_ERR_NOT_FOUND, "module has no attribute '%s' (looking up '%s')", p, target);
            if (t) *t = e->tensor;
            if (kind) *kind = e->kind;
            if (persistent) *persistent = e->persistent;
            return TP_OK;
        }
        const tp_module *next = find_child(cur, p, len);
        TP_CHECK(next != NULL, TP_ERR_NOT_FOUND, "module has no submodule '%.*s' (looking up '%s')", (int)len, p, target);
        cur = next;
        p = dot + 1;
    }
}

void tp_named_state_free(tp_named_state *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) tp_free(s->items[i].name);
    tp_free(s->items);
    s->items = NULL;
    s->n = 0;
}

static bool keep(const entry *e, tp_state_filter f) {
    switch (f) {
    case TP_FILTER_PARAMETERS: return e->kind == TP_STATE_PARAMETER;
    case TP_FILTER_BUFFERS: return e->kind == TP_STATE_BUFFER;
    case TP_FILTER_CONSTANTS: return e->kind == TP_STATE_CONSTANT;
    case TP_FILTER_STATE_DICT: return e->kind == TP_STATE_PARAMETER || (e->kind == TP_STATE_BUFFER && e->persistent);
    case TP_FILTER_ALL: return true;
    }
    return false;
}

static tp_status collect(const tp_module *m, const char *prefix, tp_state_filter f, tp_named_state *out, int *cap) {
    for (int i = 0; i < m->n_entries; i++) {
        const entry *e = &m->entries[i];
        if (!keep(e, f)) continue;
        if (out->n == *cap) {
            int ncap = *cap ? *cap * 2 : 16;
            tp_named_tensor *items = tp_realloc(out->items, (size_t)ncap * sizeof *items);
            TP_CHECK(items != NULL, TP_ERR_NOMEM, "out of memory listing module state");
            out->items = items;
            *cap = ncap;
        }
        tp_sb sb = {0};
        tp__sb_printf(&sb, "%s%s%s", prefix, *prefix ? "." : "", e->name);
        char *name;
        TP_TRY(tp__sb_finish(&sb, &name));
        out->items[out->n++] = (tp_named_tensor){name, e->tensor, e->kind, e->persistent};
    }
    for (int i = 0; i < m->n_children; i++) {
        tp_sb sb = {0};
        tp__sb_printf(&sb, "%s%s%s", prefix, *prefix ? "." : "", m->children[i].name);
        char *cp;
        TP_TRY(tp__sb_finish(&sb, &cp));
        tp_status st = collect(m->children[i].module, cp, f, out, cap);
        tp_free(cp);
        TP_TRY(st);
    }
    return TP_OK;
}

tp_status tp_module_named_state(const tp_module *m, tp_state_filter filter, tp_named_state *out) {
    out->n = 0;
    out->items = NULL;
    int cap = 0;
    tp_status st = collect(m, "", filter, out, &cap);
    if (st != TP_OK) tp_named_state_free(out);
    return st;
}

int tp_module_num_children(const tp_module *m) { return m->n_children; }

tp_module *tp_module_child_at(const tp_module *m, int i, const char **name) {
    if (i < 0 || i >= m->n_children) return NULL;
    if (name) *name = m->children[i].name;
    return m->children[i].module;
}

void tp_module_train(tp_module *m, bool training) {
    m->training = training;
    for (int i = 0; i < m->n_children; i++) tp_module_train(m->children[i].module, training);
}

bool tp_module_is_training(const tp_module *m) { return m->training; }

/* ---- graph forward ----------------------------------------------------- */

tp_status tp_module_set_graph(tp_module *m, tp_graph *graph, const tp_value *defaults) {
    tp_value d = tp_value_none();
    if (defaults && defaults->kind != TP_VAL_NONE) {
        tp_status st = defaults->kind == TP_VAL_DICT ? tp_value_copy(defaults, &d)
                                                     : tp_error(TP_ERR_TYPE, "module defaults must be a dict");
        if (st != TP_OK) {
            tp_graph_free(graph);
            return st;
        }
    }
    tp_graph_free(m->graph);
    tp_value_clear(&m->defaults);
    m->graph = graph;
    m->defaults = d;
    return TP_OK;
}

const tp_graph *tp_module_graph(const tp_module *m) { return m->graph; }

static tp_status module_attr(void *ctx, const char *target, tp_value *out) {
    const tp_module *m = ctx;
    tp_tensor *t;
    TP_TRY(tp_module_get_state(m, target, &t, NULL, NULL));
    *out = tp_value_tensor(tp_tensor_retain(t));
    return TP_OK;
}

tp_status tp_module_call(tp_module *m, const tp_value *args, int n_args, const tp_value *kwargs, tp_value *out) {
    TP_CHECK(m->graph != NULL, TP_ERR_STATE, "module '%s' has no graph forward", m->type_name);
    int64_t n_ph = tp_graph_num_placeholders(m->graph);
    TP_CHECK(n_args <= n_ph, TP_ERR_INVALID_ARG, "expected at most %lld positional arguments, got %d",
             (long long)n_ph, n_args);
    tp_value *inputs = tp_calloc((size_t)(n_ph ? n_ph : 1), sizeof *inputs);
    TP_CHECK(inputs != NULL, TP_ERR_NOMEM, "out of memory binding module arguments");
    tp_status st = TP_OK;
    for (int64_t i = 0; st == TP_OK && i < n_ph; i++) {
        const char *name = tp_node_name(tp_graph_placeholder_at(m->graph, i));
        const tp_value *kw = tp_value_dict_get(kwargs, name);
        if (i < n_args && kw) st = tp_error(TP_ERR_DUPLICATE, "duplicate value for argument '%s'", name);
        else if (i < n_args) st = tp_value_copy(&args[i], &inputs[i]);
        else if (kw) st = tp_value_copy(kw, &inputs[i]);
        else if (tp_value_dict_get(&m->defaults, name)) st = tp_value_copy(tp_value_dict_get(&m->defaults, name), &inputs[i]);
        else st = tp_error(TP_ERR_MISSING, "missing required input: %s", name);
    }
    for (int64_t k = 0; st == TP_OK && kwargs && k < tp_value_len(kwargs); k++) {
        const char *key = kwargs->u.seq.keys[k];
        bool found = false;
        for (int64_t i = 0; i < n_ph && !found; i++)
            found = strcmp(tp_node_name(tp_graph_placeholder_at(m->graph, i)), key) == 0;
        if (!found) st = tp_error(TP_ERR_INVALID_ARG, "unexpected keyword argument '%s'", key);
    }
    if (st == TP_OK) st = tp_interp_run(m->graph, inputs, n_ph, module_attr, m, out);
    for (int64_t i = 0; i < n_ph; i++) tp_value_clear(&inputs[i]);
    tp_free(inputs);
    return st;
}

/* ---- implementation slot ------------------------------------------------ */

void tp_module_set_impl(tp_module *m, const void *ops, void *data, void (*free_data)(void *data)) {
    if (m->impl_free && m->impl_data != data) m->impl_free(m->impl_data);
    m->impl_ops = ops;
    m->impl_data = data;
    m->impl_free = free_data;
}

const void *tp_module_impl_ops(const tp_module *m) { return m->impl_ops; }
void *tp_module_impl_data(const tp_module *m) { return m->impl_data; }

tp_tensor *tp_module_own_state(const tp_module *m, const char *name) {
    entry *e = find_entry(m, name, strlen(name));
    return e ? e->tensor : NULL;
}

tp_status tp_module_replace_state(tp_module *m, const char *target, tp_tensor *t) {
    TP_CHECK(t != NULL, TP_ERR_INVALID_ARG, "tensor for '%s' is NULL", target);
    const char *dot = strrchr(target, '.');
    tp_module *owner = m;
    const char *leaf = target;
    if (dot) {
        char path[512];
        size_t n = (size_t)(dot - target);
        TP_CHECK(n < sizeof path, TP_ERR_INVALID_ARG, "state target '%s' is too long", target);
        memcpy(path, target, n);
        path[n] = '\0';
        owner = tp_module_child(m, path);
        TP_CHECK(owner != NULL, TP_ERR_NOT_FOUND, "module has no submodule '%s' (looking up '%s')", path, target);
        leaf = dot + 1;
    }
    entry *e = find_entry(owner, leaf, strlen(leaf));
    TP_CHECK(e != NULL, TP_ERR_NOT_FOUND, "module has no attribute '%s' (looking up '%s')", leaf, target);
    tp_tensor_retain(t);
    tp_tensor_free(e->tensor);
    e->tensor = t;
    return TP_OK;
}
