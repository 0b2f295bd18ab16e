/*
 * signature.c - graph signatures: input/output specs, derived views,
 * renaming, cloning and the text form (see signature.h).
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "tpexport/signature.h"

struct tp_signature {
    tp_input_spec *inputs;
    int n_inputs, cap_inputs;
    tp_output_spec *outputs;
    int n_outputs, cap_outputs;
};

static const char *const input_kind_names[] = {"USER_INPUT",      "PARAMETER",  "BUFFER",
                                               "CONSTANT_TENSOR", "CUSTOM_OBJ", "TOKEN"};
static const char *const output_kind_names[] = {"USER_OUTPUT",
                                                "LOSS_OUTPUT",
                                                "BUFFER_MUTATION",
                                                "PARAMETER_MUTATION",
                                                "GRADIENT_TO_PARAMETER",
                                                "GRADIENT_TO_USER_INPUT",
                                                "USER_INPUT_MUTATION",
                                                "TOKEN"};
static const char *const arg_kind_names[] = {"TENSOR",    "SYM_INT",    "SYM_FLOAT", "SYM_BOOL",
                                             "TOKEN", "CUSTOM_OBJ", "CONSTANT"};

const char *tp_input_kind_name(tp_input_kind k) {
    return (unsigned)k < TP_ARRAY_LEN(input_kind_names) ? input_kind_names[k] : "?";
}
const char *tp_output_kind_name(tp_output_kind k) {
    return (unsigned)k < TP_ARRAY_LEN(output_kind_names) ? output_kind_names[k] : "?";
}
const char *tp_arg_kind_name(tp_arg_kind k) {
    return (unsigned)k < TP_ARRAY_LEN(arg_kind_names) ? arg_kind_names[k] : "?";
}

tp_status tp_input_kind_from_name(const char *name, tp_input_kind *out) {
    for (size_t i = 0; name && i < TP_ARRAY_LEN(input_kind_names); i++)
        if (strcmp(name, input_kind_names[i]) == 0) {
            *out = (tp_input_kind)i;
            return TP_OK;
        }
    return tp_error(TP_ERR_INVALID_ARG, "unknown input kind '%s'", name ? name : "(null)");
}

tp_status tp_output_kind_from_name(const char *name, tp_output_kind *out) {
    for (size_t i = 0; name && i < TP_ARRAY_LEN(output_kind_names); i++)
        if (strcmp(name, output_kind_names[i]) == 0) {
            *out = (tp_output_kind)i;
            return TP_OK;
        }
    return tp_error(TP_ERR_INVALID_ARG, "unknown output kind '%s'", name ? name : "(null)");
}

tp_arg_spec tp_arg_tensor(const char *name) { return (tp_arg_spec){.kind = TP_ARGK_TENSOR, .name = name}; }
tp_arg_spec tp_arg_token(const char *name) { return (tp_arg_spec){.kind = TP_ARGK_TOKEN, .name = name}; }
tp_arg_spec tp_arg_sym_int(const char *name) { return (tp_arg_spec){.kind = TP_ARGK_SYM_INT, .name = name}; }
tp_arg_spec tp_arg_custom_obj(const char *name, const char *class_fqn) {
    return (tp_arg_spec){.kind = TP_ARGK_CUSTOM_OBJ, .name = name, .class_fqn = class_fqn};
}
tp_arg_spec tp_arg_constant(const char *name, tp_value value) {
    return (tp_arg_spec){.kind = TP_ARGK_CONSTANT, .name = name, .value = value};
}

/* ---- spec copies ------------------------------------------------------- */

static void arg_clear(tp_arg_spec *a) {
    tp_free((char *)a->name);
    tp_free((char *)a->class_fqn);
    tp_value_clear(&a->value);
    memset(a, 0, sizeof *a);
}

static tp_status arg_copy(const tp_arg_spec *src, tp_arg_spec *dst) {
    memset(dst, 0, sizeof *dst);
    dst->kind = src->kind;
    TP_CHECK((unsigned)src->kind <= TP_ARGK_CONSTANT, TP_ERR_INVALID_ARG, "invalid argument kind %d", (int)src->kind);
    dst->name = tp_strdup(src->name ? src->name : "");
    if (!dst->name) return tp_error(TP_ERR_NOMEM, "out of memory copying a signature");
    if (src->kind == TP_ARGK_CUSTOM_OBJ) {
        dst->class_fqn = tp_strdup(src->class_fqn ? src->class_fqn : "");
        if (!dst->class_fqn) {
            arg_clear(dst);
            return tp_error(TP_ERR_NOMEM, "out of memory copying a signature");
        }
    }
    if (src->kind == TP_ARGK_CONSTANT) {
        tp_value_kind k = src->value.kind;
        if (!(k == TP_VAL_NONE || k == TP_VAL_BOOL || k == TP_VAL_INT || k == TP_VAL_FLOAT || k == TP_VAL_STR)) {
            arg_clear(dst);
            return tp_error(TP_ERR_TYPE, "constant argument '%s' must be an int, float, bool, str or None, not %s",
                            src->name ? src->name : "", tp_value_kind_name(k));
        }
        tp_status st = tp_value_copy(&src->value, &dst->value);
        if (st != TP_OK) {
            arg_clear(dst);
            return st;
        }
    }
    return TP_OK;
}

static tp_status dup_opt(const char *s, const char **out) {
    *out = NULL;
    if (!s) return TP_OK;
    *out = tp_strdup(s);
    return *out ? TP_OK : tp_error(TP_ERR_NOMEM, "out of memory copying a signature");
}

static void input_clear(tp_input_spec *s) {
    arg_clear(&s->arg);
    tp_free((char *)s->target);
    s->target = NULL;
}

static void output_clear(tp_output_spec *s) {
    arg_clear(&s->arg);
    tp_free((char *)s->target);
    s->target = NULL;
}

/* ---- building ---------------------------------------------------------- */

tp_status tp_signature_new(tp_signature **out) {
    tp_signature *s = tp_calloc(1, sizeof *s);
    TP_CHECK(s != NULL, TP_ERR_NOMEM, "out of memory allocating a signature");
    *out = s;
    return TP_OK;
}

void tp_signature_free(tp_signature *sig) {
    if (!sig) return;
    for (int i = 0; i < sig->n_inputs; i++) input_clear(&sig->inputs[i]);
    for (int i = 0; i < sig->n_outputs; i++) output_clear(&sig->outputs[i]);
    tp_free(sig->inputs);
    tp_free(sig->outputs);
    tp_free(sig);
}


static bool is_state_input(tp_input_kind k) {
    return k == TP_INPUT_PARAMETER || k == TP_INPUT_BUFFER || k == TP_INPUT_CONSTANT_TENSOR || k == TP_INPUT_CUSTOM_OBJ;
}

tp_status tp_signature_add_input(tp_signature *sig, tp_input_kind kind, tp_arg_spec arg, const char *target,
                                 tp_persistence persistent) {
    TP_CHECK((unsigned)kind < TP_ARRAY_LEN(input_kind_names), TP_ERR_INVALID_ARG, "invalid input kind %d", (int)kind);
    TP_CHECK(kind != TP_INPUT_BUFFER || persistent != TP_PERSISTENT_UNSET, TP_ERR_INVALID_ARG,
             "buffer input '%s' requires a persistence flag", arg.name ? arg.name : "");
    TP_CHECK(!is_state_input(kind) || (target && *target), TP_ERR_INVALID_ARG, "%s input '%s' requires a target",
             tp_input_kind_name(kind), arg.name ? arg.name : "");
    TP_TRY(tp__grow((void **)&sig->inputs, &sig->cap_inputs, sig->n_inputs, sizeof *sig->inputs));
    tp_input_spec s = {.kind = kind, .persistent = persistent};
    TP_TRY(arg_copy(&arg, &s.arg));
    tp_status st = dup_opt(target, &s.target);
    if (st != TP_OK) {
        input_clear(&s);
        return st;
    }
    sig->inputs[sig->n_inputs++] = s;
    return TP_OK;
}

static bool output_needs_target(tp_output_kind k) {
    return k == TP_OUTPUT_BUFFER_MUTATION || k == TP_OUTPUT_PARAMETER_MUTATION || k == TP_OUTPUT_USER_INPUT_MUTATION ||
           k == TP_OUTPUT_GRADIENT_TO_PARAMETER || k == TP_OUTPUT_GRADIENT_TO_USER_INPUT;
}

tp_status tp_signature_add_output(tp_signature *sig, tp_output_kind kind, tp_arg_spec arg, const char *target) {
    TP_CHECK((unsigned)kind < TP_ARRAY_LEN(output_kind_names), TP_ERR_INVALID_ARG, "invalid output kind %d",
             (int)kind);
    TP_CHECK(!output_needs_target(kind) || (target && *target), TP_ERR_INVALID_ARG,
             "%s output '%s' requires a target", tp_output_kind_name(kind), arg.name ? arg.name : "");
    TP_TRY(tp__grow((void **)&sig->outputs, &sig->cap_outputs, sig->n_outputs, sizeof *sig->outputs));
    tp_output_spec s = {.kind = kind};
    TP_TRY(arg_copy(&arg, &s.arg));
    tp_status st = dup_opt(target, &s.target);
    if (st != TP_OK) {
        output_clear(&s);
        return st;
    }
    sig->outputs[sig->n_outputs++] = s;
    return TP_OK;
}

tp_status tp_signature_clone(const tp_signature *sig, tp_signature **out) {
    tp_signature *c;
    TP_TRY(tp_signature_new(&c));
    tp_status st = TP_OK;
    for (int i = 0; st == TP_OK && i < sig->n_inputs; i++) {
        const tp_input_spec *s = &sig->inputs[i];
        st = tp_signature_add_input(c, s->kind, s->arg, s->target, s->persistent);
    }
    for (int i = 0; st == TP_OK && i < sig->n_outputs; i++) {
        const tp_output_spec *s = &sig->outputs[i];
        st = tp_signature_add_output(c, s->kind, s->arg, s->target);
    }
    if (st != TP_OK) {
        tp_signature_free(c);
        return st;
    }
    *out = c;
    return TP_OK;
}

static bool in_list(const char *name, const char *const *list, int n) {
    for (int i = 0; i < n; i++)
        if (list[i] && strcmp(list[i], name) == 0) return true;
    return false;
}

tp_status tp_signature_from_legacy(const char *const *parameters, int n_parameters, const char *const *buffers,
                                   int n_buffers, const char *const *non_persistent, int n_non_persistent,
                                   const char *const *user_inputs, int n_user_inputs, tp_signature **out) {
    tp_signature *s;
    TP_TRY(tp_signature_new(&s));
    tp_status st = TP_OK;
    for (int i = 0; st == TP_OK && i < n_parameters; i++)
        st = tp_signature_add_input(s, TP_INPUT_PARAMETER, tp_arg_tensor(parameters[i]), parameters[i],
                                    TP_PERSISTENT_UNSET);
    for (int i = 0; st == TP_OK && i < n_buffers; i++)
        st = tp_signature_add_input(s, TP_INPUT_BUFFER, tp_arg_tensor(buffers[i]), buffers[i],
                                    in_list(buffers[i], non_persistent, n_non_persistent) ? TP_PERSISTENT_NO
                                                                                          : TP_PERSISTENT_YES);
    for (int i = 0; st == TP_OK && i < n_user_inputs; i++)
        st = tp_signature_add_input(s, TP_INPUT_USER_INPUT, tp_arg_tensor(user_inputs[i]), NULL, TP_PERSISTENT_UNSET);
    if (st != TP_OK) {
        tp_signature_free(s);
        return st;
    }
    *out = s;
    return TP_OK;
}

/* ---- access ------------------------------------------------------------ */

int tp_signature_n_inputs(const tp_signature *sig) { return sig->n_inputs; }
int tp_signature_n_outputs(const tp_signature *sig) { return sig->n_outputs; }

const tp_input_spec *tp_signature_input(const tp_signature *sig, int i) {
    return (i >= 0 && i < sig->n_inputs) ? &sig->inputs[i] : NULL;
}

const tp_output_spec *tp_signature_output(const tp_signature *sig, int i) {
    return (i >= 0 && i < sig->n_outputs) ? &sig->outputs[i] : NULL;
}

int tp_signature_find_input(const tp_signature *sig, const char *name) {
    for (int i = 0; name && i < sig->n_inputs; i++)
        if (strcmp(sig->inputs[i].arg.name, name) == 0) return i;
    return -1;
}

int tp_signature_find_output(const tp_signature *sig, const char *name) {
    for (int i = 0; name && i < sig->n_outputs; i++)
        if (strcmp(sig->outputs[i].arg.name, name) == 0) return i;
    return -1;
}

int tp_signature_n_mutations(const tp_signature *sig) {
    int n = 0;
    for (int i = 0; i < sig->n_outputs; i++) {
        tp_output_kind k = sig->outputs[i].kind;
        if (k == TP_OUTPUT_BUFFER_MUTATION || k == TP_OUTPUT_PARAMETER_MUTATION || k == TP_OUTPUT_USER_INPUT_MUTATION)
            n++;
    }
    return n;
}

static tp_status rename_arg(tp_arg_spec *a, const char *old_name, const char *new_name, int *count) {
    if (strcmp(a->name, old_name) != 0) return TP_OK;
    char *n = tp_strdup(new_name);
    TP_CHECK(n != NULL, TP_ERR_NOMEM, "out of memory renaming '%s'", old_name);
    tp_free((char *)a->name);
    a->name = n;
    (*count)++;
    return TP_OK;
}

tp_status tp_signature_replace_all_uses(tp_signature *sig, const char *old_name, const char *new_name, int *count) {
    TP_CHECK(old_name && new_name, TP_ERR_INVALID_ARG, "replace_all_uses expects two names");
    int c = 0;
    for (int i = 0; i < sig->n_outputs; i++) TP_TRY(rename_arg(&sig->outputs[i].arg, old_name, new_name, &c));
    for (int i = 0; i < sig->n_inputs; i++) TP_TRY(rename_arg(&sig->inputs[i].arg, old_name, new_name, &c));
    if (count) *count = c;
    return TP_OK;
}

static bool is_kind_tensor_named(const tp_signature *sig, tp_input_kind kind, const char *name) {
    for (int i = 0; name && i < sig->n_inputs; i++) {
        const tp_input_spec *s = &sig->inputs[i];
        if (s->kind == kind && s->arg.kind == TP_ARGK_TENSOR && strcmp(s->arg.name, name) == 0) return true;
    }
    return false;
}

bool tp_signature_is_param(const tp_signature *sig, const char *name) {
    return is_kind_tensor_named(sig, TP_INPUT_PARAMETER, name);
}

bool tp_signature_is_buffer(const tp_signature *sig, const char *name) {
    return is_kind_tensor_named(sig, TP_INPUT_BUFFER, name);
}

/* ---- views -------------------------------------------------------------- */

void tp_strings_free(tp_strings *s) {
    if (!s) return;
    tp_free(s->items);
    s->items = NULL;
    s->n = 0;
}

void tp_string_map_free(tp_string_map *m) {
    if (!m) return;
    tp_free(m->keys);
    tp_free(m->values);
    m->keys = m->values = NULL;
    m->n = 0;
}

const char *tp_string_map_get(const tp_string_map *m, const char *key) {
    for (int i = 0; key && i < m->n; i++)
        if (strcmp(m->keys[i], key) == 0) return m->values[i];
    return NULL;
}

tp_status tp_signature_view_names(const tp_signature *sig, tp_signature_view view, tp_strings *out) {
    int cap = sig->n_inputs > sig->n_outputs ? sig->n_inputs : sig->n_outputs;
    out->n = 0;
    out->items = tp_calloc((size_t)(cap ? cap : 1), sizeof *out->items);
    TP_CHECK(out->items != NULL, TP_ERR_NOMEM, "out of memory listing signature names");
    bool on_outputs = view == TP_VIEW_OUTPUT_TOKENS || view == TP_VIEW_USER_OUTPUTS;
    if (on_outputs) {
        for (int i = 0; i < sig->n_outputs; i++) {
            const tp_output_spec *s = &sig->outputs[i];
            bool take = view == TP_VIEW_OUTPUT_TOKENS
                            ? (s->kind == TP_OUTPUT_TOKEN && s->arg.kind == TP_ARGK_TOKEN)
                            : (s->kind == TP_OUTPUT_USER_OUTPUT || s->kind == TP_OUTPUT_LOSS_OUTPUT);
            if (take) out->items[out->n++] = s->arg.name;
        }
        return TP_OK;
    }
    for (int i = 0; i < sig->n_inputs; i++) {
        const tp_input_spec *s = &sig->inputs[i];
        const char *item = NULL;
        switch (view) {
        case TP_VIEW_USER_INPUTS: if (s->kind == TP_INPUT_USER_INPUT) item = s->arg.name; break;
        case TP_VIEW_PARAMETERS: if (s->kind == TP_INPUT_PARAMETER) item = s->target; break;
        case TP_VIEW_BUFFERS: if (s->kind == TP_INPUT_BUFFER) item = s->target; break;
        case TP_VIEW_NON_PERSISTENT_BUFFERS:
            if (s->kind == TP_INPUT_BUFFER && s->persistent == TP_PERSISTENT_NO) item = s->target;
            break;
        case TP_VIEW_LIFTED_TENSOR_CONSTANTS: if (s->kind == TP_INPUT_CONSTANT_TENSOR) item = s->target; break;
        case TP_VIEW_LIFTED_CUSTOM_OBJS: if (s->kind == TP_INPUT_CUSTOM_OBJ) item = s->target; break;
        case TP_VIEW_INPUT_TOKENS:
            if (s->kind == TP_INPUT_TOKEN && s->arg.kind == TP_ARGK_TOKEN) item = s->arg.name;
            break;
        default: break;
        }
        if (item) out->items[out->n++] = item;
    }
    return TP_OK;
}

tp_status tp_signature_map_names(const tp_signature *sig, tp_signature_map map, tp_string_map *out) {
    int cap = sig->n_inputs > sig->n_outputs ? sig->n_inputs : sig->n_outputs;
    memset(out, 0, sizeof *out);
    out->keys = tp_calloc((size_t)(cap ? cap : 1), sizeof *out->keys);
    out->values = tp_calloc((size_t)(cap ? cap : 1), sizeof *out->values);
    if (!out->keys || !out->values) {
        tp_string_map_free(out);
        return tp_error(TP_ERR_NOMEM, "out of memory mapping signature names");
    }
    if (map <= TP_MAP_INPUTS_TO_CONSTANTS) {
        tp_input_kind want = map == TP_MAP_INPUTS_TO_PARAMETERS ? TP_INPUT_PARAMETER
                             : map == TP_MAP_INPUTS_TO_BUFFERS  ? TP_INPUT_BUFFER
                                                                : TP_INPUT_CONSTANT_TENSOR;
        for (int i = 0; i < sig->n_inputs; i++) {
            const tp_input_spec *s = &sig->inputs[i];
            if (s->kind == want && s->arg.kind == TP_ARGK_TENSOR && s->target) {
                out->keys[out->n] = s->arg.name;
                out->values[out->n++] = s->target;
            }
        }
    } else {
        tp_output_kind want = map == TP_MAP_BUFFERS_TO_MUTATE      ? TP_OUTPUT_BUFFER_MUTATION
                              : map == TP_MAP_PARAMETERS_TO_MUTATE ? TP_OUTPUT_PARAMETER_MUTATION
                                                                   : TP_OUTPUT_USER_INPUT_MUTATION;
        for (int i = 0; i < sig->n_outputs; i++) {
            const tp_output_spec *s = &sig->outputs[i];
            if (s->kind == want && s->arg.kind == TP_ARGK_TENSOR && s->target) {
                out->keys[out->n] = s->arg.name;
                out->values[out->n++] = s->target;
            }
        }
    }
    return TP_OK;
}

void tp_backward_signature_free(tp_backward_signature *b) {
    if (!b) return;
    tp_string_map_free(&b->gradients_to_parameters);
    tp_string_map_free(&b->gradients_to_user_inputs);
    b->loss_output = NULL;
}

tp_status tp_signature_backward(const tp_signature *sig, bool *has, tp_backward_signature *out) {
    memset(out, 0, sizeof *out);
    *has = false;
    const char *loss = NULL;
    for (int i = 0; i < sig->n_outputs; i++) {
        const tp_output_spec *s = &sig->outputs[i];
        if (s->kind != TP_OUTPUT_LOSS_OUTPUT) continue;
        TP_CHECK(loss == NULL && s->arg.kind == TP_ARGK_TENSOR, TP_ERR_INVALID_ARG,
                 "loss output must be one tensor argument");
        loss = s->arg.name;
    }
    if (!loss) return TP_OK;
    int cap = sig->n_outputs ? sig->n_outputs : 1;
    tp_string_map *maps[2] = {&out->gradients_to_parameters, &out->gradients_to_user_inputs};
    for (int m = 0; m < 2; m++) {
        maps[m]->keys = tp_calloc((size_t)cap, sizeof(char *));
        maps[m]->values = tp_calloc((size_t)cap, sizeof(char *));
        if (!maps[m]->keys || !maps[m]->values) {
            tp_backward_signature_free(out);
            return tp_error(TP_ERR_NOMEM, "out of memory building a backward signature");
        }
    }
    for (int i = 0; i < sig->n_outputs; i++) {
        const tp_output_spec *s = &sig->outputs[i];
        tp_string_map *m = s->kind == TP_OUTPUT_GRADIENT_TO_PARAMETER    ? maps[0]
                           : s->kind == TP_OUTPUT_GRADIENT_TO_USER_INPUT ? maps[1]
                                                                         : NULL;
        if (m && s->arg.kind == TP_ARGK_TENSOR && s->target) {
            m->keys[m->n] = s->arg.name;
            m->values[m->n++] = s->target;
        }
    }
    out->loss_output = loss;
    *has = true;
    return TP_OK;
}

/* ---- text -------------------------------------------------------------- */

void tp_input_spec_str(const tp_input_spec *s, char *buf, size_t size) {
    int n = snprintf(buf, size, "%s: %s", s->arg.name, tp_input_kind_name(s->kind));
    if (n >= 0 && (size_t)n < size && s->target) n += snprintf(buf + n, size - (size_t)n, " target='%s'", s->target);
    if (n >= 0 && (size_t)n < size && s->persistent != TP_PERSISTENT_UNSET)
        snprintf(buf + n, size - (size_t)n, " persistent=%s", s->persistent == TP_PERSISTENT_YES ? "True" : "False");
}

void tp_output_spec_str(const tp_output_spec *s, char *buf, size_t size) {
    int n = snprintf(buf, size, "%s: %s", s->arg.name, tp_output_kind_name(s->kind));
    if (n >= 0 && (size_t)n < size && s->target) snprintf(buf + n, size - (size_t)n, " target='%s'", s->target);
}

tp_status tp_signature_to_string(const tp_signature *sig, char **out) {
    tp_sb sb = {0};
    char line[1024];
    tp__sb_puts(&sb, "\n# inputs\n");
    for (int i = 0; i < sig->n_inputs; i++) {
        tp_input_spec_str(&sig->inputs[i], line, sizeof line);
        tp__sb_printf(&sb, i + 1 < sig->n_inputs ? "%s\n" : "%s", line);
    }
    tp__sb_puts(&sb, "\n\n# outputs\n");
    for (int i = 0; i < sig->n_outputs; i++) {
        tp_output_spec_str(&sig->outputs[i], line, sizeof line);
        tp__sb_printf(&sb, i + 1 < sig->n_outputs ? "%s\n" : "%s", line);
    }
    tp__sb_puts(&sb, "\n");
    return tp__sb_finish(&sb, out);
}

tp_status tp_signature_print(const tp_signature *sig, FILE *f) {
    char *s;
    TP_TRY(tp_signature_to_string(sig, &s));
    int rc = fputs(s, f);
    tp_free(s);
    TP_CHECK(rc >= 0, TP_ERR_IO, "cannot write the signature");
    return TP_OK;
}
